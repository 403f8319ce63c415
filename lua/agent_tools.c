/* agent_tools.c - the built-in tool object an agent uses for its declared tools when the
 * module has no ah.tool (lua/tools.c): obj:call(args, opts) drives one ah_tool_call (the
 * core's idempotency/budget/retry state machine, here without ledger or budget) with
 * each body attempt in a coroutine of its own and each retry wait as a loop timer. It
 * follows the tool seam of lah.h: it returns the SPEC §5 record and never raises for a
 * failing body.
 *
 * Invariants: obj:call must run in a scheduler coroutine or a blocking context (it
 * awaits); its state is a userdata at a fixed stack slot of that coroutine, so it lives
 * until the call returns; a body coroutine reports into it exactly once.
 */
#include "lah.h"
#include "internal.h"

#include <string.h>

#define TOOL_MT "agenthost.builtin_tool"
#define CALL_MT "agenthost.builtin_tool_call"

enum { T_RUN = 1, T_RETRY_ON, T_NUV = T_RETRY_ON };

typedef struct btool {
    ah_policy policy;
    int has_retry_on;
    int retry_on_failed;
    char name[64];
} btool;

enum { PH_STEP, PH_BODY, PH_WAIT };

typedef struct bcall {
    lah_wait wait;
    ah_tool_call *c;
    ah_timer *timer;
    ah_loop *loop;
    btool *t;
    int phase;
    int body_ok;
    int result_ref; /* what the last successful body returned */
    ah_error body_err;
    int64_t started_ms, prev_wait_ms;
    lua_State *main;
    int retry_on_ref;
} bcall;

static int bcall_gc(lua_State *L)
{
    bcall *bc = luaL_checkudata(L, 1, CALL_MT);
    ah_tool_call_free(bc->c);
    bc->c = NULL;
    ah_timer_free(bc->timer);
    bc->timer = NULL;
    if (bc->result_ref != LUA_NOREF)
        luaL_unref(L, LUA_REGISTRYINDEX, bc->result_ref);
    bc->result_ref = LUA_NOREF;
    if (bc->retry_on_ref != LUA_NOREF)
        luaL_unref(L, LUA_REGISTRYINDEX, bc->retry_on_ref);
    bc->retry_on_ref = LUA_NOREF;
    return 0;
}

static void timer_fire(void *ud)
{
    ((bcall *)ud)->wait.ready = 1;
}

static void body_done(void *ud, lua_State *co, int ok)
{
    bcall *bc = ud;
    bc->body_ok = ok;
    if (ok) {
        if (lua_gettop(co) >= 1)
            lua_pushvalue(co, 1);
        else
            lua_pushnil(co);
        if (bc->result_ref != LUA_NOREF)
            luaL_unref(co, LUA_REGISTRYINDEX, bc->result_ref);
        bc->result_ref = luaL_ref(co, LUA_REGISTRYINDEX);
    } else {
        /* a failed coroutine runs no code: read its error value on the running thread */
        lua_State *L = lah_running(co);
        luaL_checkstack(L, 4, "tool");
        lua_pushvalue(co, -2);
        lua_xmove(co, L, 1);
        lah_to_error(L, -1, &bc->body_err);
        lua_pop(L, 1);
        ah__log(AH_LOG_DEBUG, "tool '%s' attempt failed: %s", bc->t->name,
                lua_tostring(co, -1));
    }
    bc->wait.ready = 1;
}

/* The policy's retry_on for the tool: retry_on(err, default) -> boolean. */
static int call_retry_on(void *ud, const ah_error *err, int default_verdict)
{
    bcall *bc = ud;
    lua_State *L = lah_running(bc->main);
    if (!lua_checkstack(L, 6))
        return -1;
    lua_rawgeti(L, LUA_REGISTRYINDEX, bc->retry_on_ref);
    lah_push_error(L, err);
    lua_pushboolean(L, default_verdict);
    if (!lah_pcall_once(L, 2, 1, "tool policy.retry_on", &bc->t->retry_on_failed))
        return -1;
    int v = lua_isboolean(L, -1) ? lua_toboolean(L, -1) : -1;
    lua_pop(L, 1);
    return v;
}

/* The wait seam: the policy's backoff (jitter, hint floor, deadline) for a retry the
 * tool machinery already decided to make. */
static int64_t call_wait(void *ud, const ah_error *err, int failed_attempt)
{
    bcall *bc = ud;
    ah_error e = *err;
    e.kind = AH_EK_TRANSIENT; /* retryability was decided by the tool rules */
    ah_policy p = bc->t->policy;
    p.retry_on = NULL;
    int64_t elapsed = ah_loop_now_ms(bc->loop) - bc->started_ms;
    ah_decision d = ah_backoff_decide(&p, &e, failed_attempt, elapsed, bc->prev_wait_ms,
                                      ah_loop_rng(bc->loop), NULL);
    if (!d.retry)
        return -1;
    bc->prev_wait_ms = d.wait_ms;
    return d.wait_ms;
}

static void push_record(lua_State *L, bcall *bc)
{
    ah_tool_outcome o = ah_tool_call_outcome(bc->c);
    lua_createtable(L, 0, 7);
    lua_pushboolean(L, o == AH_TOOL_OK);
    lua_setfield(L, -2, "ok");
    lua_pushstring(L, o == AH_TOOL_OK                 ? "ok"
                      : o == AH_TOOL_BUDGET_EXHAUSTED ? "budget_exhausted"
                                                      : "failed");
    lua_setfield(L, -2, "outcome");
    lua_pushinteger(L, ah_tool_call_attempts(bc->c));
    lua_setfield(L, -2, "attempts");
    if (o == AH_TOOL_OK) {
        lua_rawgeti(L, LUA_REGISTRYINDEX, bc->result_ref);
        lua_setfield(L, -2, "receipt");
    } else {
        lah_push_error(L, ah_tool_call_error(bc->c));
        lua_setfield(L, -2, "error");
    }
    lua_pushinteger(L, (lua_Integer)ah_tool_call_seq(bc->c));
    lua_setfield(L, -2, "seq");
    lua_pushboolean(L, ah_tool_call_duplicate(bc->c));
    lua_setfield(L, -2, "duplicate");
}

/* Stack of the call: 1 tool, 2 args, 3 opts, 4 the bcall userdata (ctx). */
static int call_k(lua_State *L, int status, lua_KContext ctx)
{
    (void)status;
    bcall *bc = lua_touserdata(L, (int)ctx);
    for (;;) {
        if (bc->phase == PH_BODY) {
            if (bc->body_ok)
                ah_tool_call_body_ok(bc->c,
                                     "null"); /* no ledger: the value stays in Lua */
            else
                ah_tool_call_body_failed(bc->c, &bc->body_err);
        }
        bc->phase = PH_STEP;
        switch (ah_tool_step(bc->c)) {
        case AH_TOOL_DO_RUN_BODY:
            lua_getiuservalue(L, 1, T_RUN);
            lua_pushvalue(L, 2);
            lua_createtable(L, 0, 5);
            lua_pushinteger(L, ah_tool_call_attempts(bc->c));
            lua_setfield(L, -2, "attempt");
            lua_pushstring(L, bc->t->name);
            lua_setfield(L, -2, "name");
            if (ah_tool_call_key(bc->c)) {
                lua_pushstring(L, ah_tool_call_key(bc->c));
                lua_setfield(L, -2, "key");
            }
            if (lua_istable(L, 3)) {
                lua_getfield(L, 3, "run_id");
                lua_setfield(L, -2, "run_id");
                lua_getfield(L, 3, "tool_call_id");
                lua_setfield(L, -2, "tool_call_id");
            }
            bc->phase = PH_BODY;
            bc->wait.ready = 0;
            lah_spawn(L, 2, body_done, bc);
            return lah_await(L, &bc->wait, ctx, call_k);
        case AH_TOOL_DO_RETRY_AFTER:
            bc->phase = PH_WAIT;
            bc->wait.ready = 0;
            ah_timer_start(bc->timer, ah_tool_call_wait_ms(bc->c));
            return lah_await(L, &bc->wait, ctx, call_k);
        default:
            push_record(L, bc);
            return 1;
        }
    }
}

/* tool:call(args, opts) -> record (the tool seam of lah.h, without ledger or budget) */
static int tool_call(lua_State *L)
{
    btool *t = luaL_checkudata(L, 1, TOOL_MT);
    luaL_checkany(L, 2);
    lua_settop(L, 3);
    if (!lua_isnil(L, 3))
        luaL_checktype(L, 3, LUA_TTABLE);
    bcall *bc = lua_newuserdatauv(L, sizeof *bc, 0);
    memset(bc, 0, sizeof *bc);
    bc->result_ref = bc->retry_on_ref = LUA_NOREF;
    luaL_setmetatable(L, CALL_MT);
    bc->t = t;
    bc->loop = lah_loop(L);
    lua_rawgeti(L, LUA_REGISTRYINDEX, LUA_RIDX_MAINTHREAD);
    bc->main = lua_tothread(L, -1);
    lua_pop(L, 1);
    bc->started_ms = ah_loop_now_ms(bc->loop);
    const char *key = NULL;
    if (lua_istable(L, 3)) {
        lua_getfield(L, 3, "key");
        key = lua_tostring(L, -1); /* opts keeps it alive */
        lua_pop(L, 1);
    }
    ah_tool_policy tp;
    ah_tool_policy_init(&tp);
    tp.max_attempts = t->policy.max_attempts;
    tp.wait = call_wait;
    tp.wait_ud = bc;
    if (t->has_retry_on) {
        lua_getiuservalue(L, 1, T_RETRY_ON);
        bc->retry_on_ref = luaL_ref(L, LUA_REGISTRYINDEX);
        tp.retry_on = call_retry_on;
        tp.retry_on_ud = bc;
    }
    bc->c = ah_tool_call_new(&tp, NULL, NULL, key, NULL);
    bc->timer = ah_timer_new(bc->loop, timer_fire, bc);
    if (!bc->c || !bc->timer)
        return luaL_error(L, "tool:call: out of memory");
    return call_k(L, LUA_OK, 4);
}

void lah_builtin_tool_new(lua_State *L, int idx, const char *name, const char *where)
{
    idx = lua_absindex(L, idx);
    btool *t = lua_newuserdatauv(L, sizeof *t, T_NUV);
    memset(t, 0, sizeof *t);
    luaL_setmetatable(L, TOOL_MT);
    ah__bufprintf(t->name, sizeof t->name, "%s", name);
    ah_policy_init(&t->policy);
    lua_getfield(L, idx, "policy");
    if (lah_policy_from_table(L, -1, where, &t->policy)) {
        t->has_retry_on = 1;
        lua_setiuservalue(L, -3, T_RETRY_ON);
    }
    lua_pop(L, 1);
    lua_getfield(L, idx, "run");
    luaL_argcheck(L, lua_isfunction(L, -1), idx, "run must be a function");
    lua_setiuservalue(L, -2, T_RUN);
}

void lah_open_agent_tools(lua_State *L)
{
    luaL_newmetatable(L, CALL_MT);
    lua_pushcfunction(L, bcall_gc);
    lua_setfield(L, -2, "__gc");
    lua_pop(L, 1);
    luaL_newmetatable(L, TOOL_MT);
    lua_createtable(L, 0, 1);
    lua_pushcfunction(L, tool_call);
    lua_setfield(L, -2, "call");
    lua_setfield(L, -2, "__index");
    lua_pop(L, 1);
}
