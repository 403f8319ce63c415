/* gate.c - the one gate between C and Lua: every call the binding makes into Lua goes
 * through a function of this file, so errors are shaped the same way everywhere and
 * tests/cli/test_gate.sh can check that no other file calls lua_pcall / lua_call /
 * lua_resume itself.
 *
 *  - lah_gate_call: a protected call with the traceback message handler. On success the
 *    results; on error ONE value, "message\ntraceback". The handler is removed both
 *    ways, so the stack below the function is what it was. With a gate (g non-NULL) the
 *    call is a hook: the hook depth is counted, and every Lua function that waits
 *    refuses to run while it is above zero (lah_check_not_in_hook). Hot paths keep g
 *    and a handler at a fixed stack slot: then a call costs no table lookup and no
 *    stack shuffle.
 *  - lah_gate_resume: resume a coroutine (a tool body, a batch item, anything that may
 *    wait runs as one: no C call ever yields); on error "message\ntraceback" is pushed
 *    above the error value on the dead coroutine (its stack is not unwound), and the
 *    raised value stays as raised (an error value says how the call failed).
 *  - lah_gate_protect: run a C function protected (no traceback: for C memory that must
 *    be freed before a memory error goes on).
 *  - lah_gate_call_raising: a call that lets errors through, for code that is itself
 *    running inside a protected call (the shipped Lua run inside luaopen_agenthost).
 */
#include "lah.h"
#include "internal.h"

#include <string.h>

int lah_traceback(lua_State *L)
{
    const char *msg = NULL;
    if (lua_type(L, 1) == LUA_TSTRING || lua_type(L, 1) == LUA_TNUMBER)
        msg = lua_tostring(L, 1);
    else if (luaL_callmeta(L, 1, "__tostring") && lua_type(L, -1) == LUA_TSTRING)
        msg = lua_tostring(L, -1);
    else
        msg = lua_pushfstring(L, "(error object is a %s value)", luaL_typename(L, 1));
    luaL_traceback(L, L, msg, 1);
    return 1;
}

int lah_gate_call(lua_State *L, lah_gate *g, int nargs, int nresults, int msgh)
{
    int base = 0;
    if (msgh == 0) {
        base = lua_gettop(L) - nargs; /* the function's index */
        lua_pushcfunction(L, lah_traceback);
        lua_insert(L, base);
        msgh = base;
    }
    if (g)
        g->hook_depth++;
    int st = lua_pcall(L, nargs, nresults, msgh);
    if (g)
        g->hook_depth--;
    if (base)
        lua_remove(L, base);
    return st;
}

/* A string for the error value at the top of co, as "message" (its __tostring runs
 * protected, on L: a dead coroutine cannot run code). */
static int tostring_fn(lua_State *L)
{
    luaL_tolstring(L, 1, NULL);
    return 1;
}

static void push_message(lua_State *L, int idx)
{
    idx = lua_absindex(L, idx);
    if (lua_type(L, idx) == LUA_TSTRING || lua_type(L, idx) == LUA_TNUMBER) {
        lua_pushstring(L, lua_tostring(L, idx));
        return;
    }
    int top = lua_gettop(L);
    if (luaL_getmetafield(L, idx, "__tostring") != LUA_TNIL) {
        lua_pop(L, 1);
        lua_pushcfunction(L, tostring_fn);
        lua_pushvalue(L, idx);
        if (lua_pcall(L, 1, 1, 0) == LUA_OK && lua_isstring(L, -1))
            return;
        lua_settop(L, top);
    }
    lua_pushfstring(L, "(error object is a %s value)", luaL_typename(L, idx));
}

int lah_gate_resume(lua_State *co, lua_State *from, int nargs, int *nres)
{
#if LUA_VERSION_NUM >= 504
    int st = lua_resume(co, from, nargs, nres);
#elif LUA_VERSION_NUM >= 502
    int st = lua_resume(co, from, nargs);
    *nres = lua_gettop(co);
#else
    int st = lua_resume(co, nargs);
    *nres = lua_gettop(co);
#endif
    if (st == LUA_OK || st == LUA_YIELD || !from)
        return st;
    /* error value at the top of co; its stack is still there to be read */
    luaL_checkstack(from, 6, "traceback");
    int top = lua_gettop(from);
    lua_pushvalue(co, -1);
    lua_xmove(co, from, 1);
    push_message(from, -1);
    luaL_traceback(from, co, lua_tostring(from, -1), 0);
    lua_xmove(from, co, 1);
    lua_settop(from, top);
    return st;
}

int lah_gate_protect(lua_State *L, lua_CFunction f, void *ud, int nresults)
{
    lua_pushcfunction(L, f);
    lua_pushlightuserdata(L, ud);
    return lua_pcall(L, 1, nresults, 0);
}

int lah_gate_protect_call(lua_State *L, int nargs, int nresults)
{
    return lua_pcall(L, nargs, nresults, 0);
}

void lah_gate_call_raising(lua_State *L, int nargs, int nresults)
{
    lua_call(L, nargs, nresults);
}

/* ---- hooks ------------------------------------------------------------------------- */

int lah_pcall_hook_at(lua_State *L, int nargs, int nresults, int msgh, int *depth)
{
    ++*depth;
    int st = lua_pcall(L, nargs, nresults, msgh);
    --*depth;
    return st;
}

int *lah_hook_depth_slot(lua_State *L)
{
    return &lah_gate_of(L)->hook_depth;
}

int lah_pcall_hook(lua_State *L, int nargs, int nresults)
{
    return lah_gate_call(L, lah_gate_of(L), nargs, nresults, 0);
}

void lah_check_not_in_hook(lua_State *L, const char *what)
{
    lah_gate *g = lah_gate_of(L);
    if (g->in_done > 0 && g->hook_depth == g->in_done && g->in_loop == 0)
        luaL_error(L,
                   "%s cannot be called inside on_done: it runs inside a step of the "
                   "event loop and must not wait; start another run with agent:start "
                   "and its own on_done instead",
                   what);
    lah_check_can_start(L, what);
}

void lah_check_can_start(lua_State *L, const char *what)
{
    lah_gate *g = lah_gate_of(L);
    /* in_loop too: whatever runs inside a loop callback is a hook, even one called
     * through a protected call of its own rather than the gate's. An on_done (in_done)
     * is a hook that may start runs. */
    if (g->hook_depth > g->in_done || g->in_loop > 0)
        luaL_error(L,
                   "%s cannot be called inside a hook (on_event, retry_on, validate, "
                   "idempotency_key, a log handler): hooks run inside a step of the "
                   "event loop and must not wait; start the work from the script or "
                   "a tool body instead",
                   what);
}

int lah_pcall_once(lua_State *L, int nargs, int nresults, const char *what, int *once)
{
    return lah_gate_hook_once(L, lah_gate_of(L), nargs, nresults, 0, what, once);
}

int lah_gate_hook_once(lua_State *L, lah_gate *g, int nargs, int nresults, int msgh,
                       const char *what, int *once)
{
    int st = lah_gate_call(L, g, nargs, nresults, msgh);
    if (st == LUA_OK)
        return 1;
    if (!once || !*once) {
        ah__log(AH_LOG_WARN, "%s: %s", what ? what : "Lua hook", lua_tostring(L, -1));
        if (once)
            *once = 1;
    }
    lua_pop(L, 1);
    return 0;
}

int lah_pcall(lua_State *L, int nargs, int nresults, const char *what)
{
    return lah_pcall_once(L, nargs, nresults, what, NULL);
}
