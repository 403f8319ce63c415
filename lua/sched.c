/* sched.c - the scheduler: Lua coroutines over the one core loop (lah.h has the model).
 *
 * Invariants:
 *  - One scheduler per lua_State, a userdata in the registry created before any other
 *    object of the binding, so it is finalized last at lua_close and frees the loop after
 *    every worker, timer and transfer is gone.
 *  - A managed coroutine is anchored by a registry reference from lah_spawn until it
 *    ends; its entry is never freed while a step that may touch it is on the C stack
 *    (entries are compacted only when the outermost step returns).
 *  - A coroutine is resumed only by the scheduler and only when it is not already
 *    running (a step nested inside a blocking lah_await skips the threads on the C
 * stack).
 *  - The loop is never re-entered: a wait inside a hook (which runs inside
 *    ah_loop_run_once, e.g. from a curl callback) is an error, not a nested step.
 *  - `current` is the managed entry whose coroutine the scheduler resumed last and that
 *    is still executing; lah_await yields only when the caller IS that coroutine, so a
 *    yield never lands in a resume the user made (coroutine.wrap inside a script).
 */
#include "lah.h"
#include "internal.h"

#include <stdlib.h>
#include <string.h>

typedef struct entry {
    lua_State *co;
    int ref;        /* registry reference anchoring the thread */
    lah_wait *wait; /* what it waits on; NULL = runnable (new, or after a plain yield) */
    int nargs;      /* arguments for the first resume */
    int started, running, dead;
    int killed; /* lah_kill while it was on the C stack: end it when it yields */
    lah_done_fn on_done;
    void *ud;
} entry;

typedef struct sched {
    ah_loop *loop;
    entry **v;
    size_t n, cap;
    size_t live;
    int depth;          /* nesting of lah_step (a blocking await inside a coroutine) */
    int in_loop;        /* inside ah_loop_run_once: hooks run here and must not wait */
    int hook_depth;     /* hooks (lah_pcall_hook) running right now, nested */
    lua_State *running; /* the thread executing right now */
    entry *current;     /* the managed coroutine being resumed, or NULL */
    ah_event_fn sink;
    void *sink_ud;
    int *unrefs; /* registry references to drop at the next step (lah_unref_later) */
    size_t n_unrefs, cap_unrefs;
} sched;

static const char SCHED_KEY = 'S'; /* its address keys the scheduler in the registry */
#define SCHED_MT "agenthost.scheduler"

static int sched_gc(lua_State *L)
{
    sched *s = luaL_checkudata(L, 1, SCHED_MT);
    for (size_t i = 0; i < s->n; i++)
        free(s->v[i]);
    free(s->v);
    s->v = NULL;
    s->n = s->cap = 0;
    free(s->unrefs);
    s->unrefs = NULL;
    s->n_unrefs = s->cap_unrefs = 0;
    ah_loop_free(s->loop);
    s->loop = NULL;
    return 0;
}

static sched *get_sched(lua_State *L)
{
    if (lua_rawgetp(L, LUA_REGISTRYINDEX, &SCHED_KEY) == LUA_TUSERDATA) {
        sched *s = lua_touserdata(L, -1);
        lua_pop(L, 1);
        return s;
    }
    lua_pop(L, 1);
    sched *s = lua_newuserdatauv(L, sizeof *s, 0);
    memset(s, 0, sizeof *s);
    if (luaL_newmetatable(L, SCHED_MT)) {
        lua_pushcfunction(L, sched_gc);
        lua_setfield(L, -2, "__gc");
    }
    lua_setmetatable(L, -2);
    s->loop = ah_loop_new(NULL, NULL);
    if (!s->loop) {
        lua_pop(L, 1);
        luaL_error(L, "agenthost: cannot create the event loop (out of memory?)");
    }
    lua_State *main;
    lua_rawgeti(L, LUA_REGISTRYINDEX, LUA_RIDX_MAINTHREAD);
    main = lua_tothread(L, -1);
    lua_pop(L, 1);
    s->running = main;
    lua_rawsetp(L, LUA_REGISTRYINDEX, &SCHED_KEY);
    return s;
}

ah_loop *lah_loop(lua_State *L)
{
    return get_sched(L)->loop;
}

lua_State *lah_running(lua_State *L)
{
    return get_sched(L)->running;
}

lua_State *const *lah_running_slot(lua_State *L)
{
    return &get_sched(L)->running;
}

lua_State *lah_enter(lua_State *L)
{
    sched *s = get_sched(L);
    lua_State *prev = s->running;
    s->running = L;
    return prev;
}

void lah_leave(lua_State *L, lua_State *prev)
{
    get_sched(L)->running = prev;
}

void lah_set_event_sink(lua_State *L, ah_event_fn fn, void *ud)
{
    sched *s = get_sched(L);
    s->sink = fn;
    s->sink_ud = fn ? ud : NULL;
}

void lah_event_sink(lua_State *L, ah_event_fn *fn, void **ud)
{
    sched *s = get_sched(L);
    *fn = s->sink;
    *ud = s->sink_ud;
}

/* ---- protected calls --------------------------------------------------------------- */

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

int lah_pcall_hook_at(lua_State *L, int nargs, int nresults, int msgh, int *depth)
{
    ++*depth;
    int st = lua_pcall(L, nargs, nresults, msgh);
    --*depth;
    return st;
}

int *lah_hook_depth_slot(lua_State *L)
{
    return &get_sched(L)->hook_depth;
}

int lah_pcall_hook(lua_State *L, int nargs, int nresults)
{
    sched *s = get_sched(L);
    int base = lua_gettop(L) - nargs; /* the function's index */
    lua_pushcfunction(L, lah_traceback);
    lua_insert(L, base);
    int st = lah_pcall_hook_at(L, nargs, nresults, base, &s->hook_depth);
    lua_remove(L, base);
    return st;
}

void lah_check_not_in_hook(lua_State *L, const char *what)
{
    sched *s = get_sched(L);
    /* in_loop too: whatever runs inside a loop callback is a hook, even one called
     * through a protected call of its own rather than lah_pcall_hook. */
    if (s->hook_depth > 0 || s->in_loop > 0)
        luaL_error(L, "%s cannot be called inside a hook (on_event, retry_on, validate, "
                      "idempotency_key, a log handler): hooks run inside a step of the "
                      "event loop and must not wait; start the work from the script or "
                      "a tool body instead",
                   what);
}

int lah_pcall_once(lua_State *L, int nargs, int nresults, const char *what, int *once)
{
    int st = lah_pcall_hook(L, nargs, nresults);
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

/* ---- coroutines -------------------------------------------------------------------- */

lua_State *lah_spawn(lua_State *L, int nargs, lah_done_fn on_done, void *ud)
{
    sched *s = get_sched(L);
    luaL_checkstack(L, 2, "spawn");
    if (s->n == s->cap) {
        size_t cap = s->cap ? s->cap * 2 : 16;
        entry **v = realloc(s->v, cap * sizeof *v);
        if (!v)
            luaL_error(L, "agenthost: out of memory");
        s->v = v;
        s->cap = cap;
    }
    lua_State *co = lua_newthread(L);
    entry *e = calloc(1, sizeof *e);
    if (!e)
        luaL_error(L, "agenthost: out of memory");
    lua_insert(L, -(nargs + 2)); /* thread below the function and its arguments */
    lua_xmove(L, co, nargs + 1);
    e->co = co;
    e->ref = luaL_ref(L, LUA_REGISTRYINDEX); /* pops the thread */
    e->nargs = nargs;
    e->on_done = on_done;
    e->ud = ud;
    s->v[s->n++] = e;
    s->live++;
    return co;
}

static int tostring_fn(lua_State *L)
{
    luaL_tolstring(L, 1, NULL);
    return 1;
}

/* Push a string for the value at idx of L: its tostring (__tostring runs protected), or
 * a description of its type. */
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

static void finish_entry(sched *s, entry *e, int ok)
{
    lua_State *co = e->co;
    lua_State *L = s->running; /* executing C code right now: calls on it are allowed */
    e->dead = 1;
    s->live--;
    if (!ok) {
        /* A failed coroutine cannot run code (its __tostring runs on L), but its stack
         * is not unwound: the traceback can still be read from it. */
        luaL_checkstack(L, 6, "traceback");
        int top = lua_gettop(L);
        lua_pushvalue(co, -1);
        lua_xmove(co, L, 1);
        push_message(L, -1);
        luaL_traceback(L, co, lua_tostring(L, -1), 0);
        lua_xmove(L, co, 1);
        lua_settop(L, top);
    }
    if (e->killed) /* lah_kill'ed while running: nobody waits for its results */
        e->killed = 0;
    else if (e->on_done)
        e->on_done(e->ud, co, ok);
    else if (!ok)
        ah__log(AH_LOG_WARN, "coroutine failed: %s", lua_tostring(co, -1));
    if (!ok)
        lua_resetthread(co); /* close its pending to-be-closed variables */
    luaL_unref(L, LUA_REGISTRYINDEX, e->ref);
    e->ref = LUA_NOREF;
}

/* End a suspended coroutine without resuming it: its to-be-closed variables are
 * closed, its stack (and every userdata only it held: timers, tool call states) is left
 * to the collector, whose finalizers free the C side. on_done is not called. */
static void kill_entry(sched *s, entry *e)
{
    e->dead = 1;
    e->killed = 0;
    s->live--;
    lua_resetthread(e->co);
    luaL_unref(s->running, LUA_REGISTRYINDEX, e->ref);
    e->ref = LUA_NOREF;
}

void lah_kill(lua_State *L, lua_State *co)
{
    sched *s = get_sched(L);
    for (size_t i = 0; i < s->n; i++) {
        entry *e = s->v[i];
        if (e->co != co || e->dead)
            continue;
        if (e->running)
            e->killed = 1; /* on the C stack right now: at its next yield */
        else
            kill_entry(s, e);
        return;
    }
}

void lah_unref_later(lua_State *L, int ref)
{
    sched *s = get_sched(L);
    if (ref == LUA_NOREF || ref == LUA_REFNIL)
        return;
    if (s->n_unrefs == s->cap_unrefs) {
        size_t cap = s->cap_unrefs ? s->cap_unrefs * 2 : 8;
        int *v = realloc(s->unrefs, cap * sizeof *v);
        if (!v) {
            luaL_unref(L, LUA_REGISTRYINDEX, ref); /* better now than never */
            return;
        }
        s->unrefs = v;
        s->cap_unrefs = cap;
    }
    s->unrefs[s->n_unrefs++] = ref;
}

static void resume(sched *s, entry *e)
{
    int nargs = e->started ? 0 : e->nargs;
    e->started = 1;
    e->wait = NULL;
    e->running = 1;
    lua_State *prev_running = s->running;
    entry *prev_current = s->current;
    s->running = e->co;
    s->current = e;
    int nres = 0;
    int st = lua_resume(e->co, prev_running, nargs, &nres);
    s->running = prev_running;
    s->current = prev_current;
    e->running = 0;
    if (st == LUA_YIELD) {
        /* lah_await set e->wait before yielding; a plain coroutine.yield leaves it NULL
         * and the coroutine just runs again at the next step. */
        lua_pop(e->co, nres);
        if (e->killed)
            kill_entry(s, e);
        return;
    }
    finish_entry(s, e, st == LUA_OK);
}

static void compact(sched *s)
{
    size_t j = 0;
    for (size_t i = 0; i < s->n; i++) {
        if (s->v[i]->dead)
            free(s->v[i]);
        else
            s->v[j++] = s->v[i];
    }
    s->n = j;
}

int lah_step(lua_State *L)
{
    sched *s = get_sched(L);
    /* never inside the loop (no hook awaits), so nothing these anchored is running */
    while (s->n_unrefs > 0)
        luaL_unref(L, LUA_REGISTRYINDEX, s->unrefs[--s->n_unrefs]);
    lua_State *prev_running = s->running;
    s->running = L;
    s->depth++;
    int ran = 0;
    /* Entries spawned during this pass are appended and run in the same pass. */
    for (size_t i = 0; i < s->n; i++) {
        entry *e = s->v[i];
        if (e->dead || e->running)
            continue;
        if (!e->started || !e->wait || e->wait->ready) {
            resume(s, e);
            ran++;
        }
    }
    int result = (int)s->live;
    if (ran || ah_loop_alive(s->loop)) {
        /* without blocking while coroutines are busy (keep I/O moving), else until the
         * next timer or socket event */
        s->in_loop++;
        ah_loop_run_once(s->loop, ran ? 0 : -1);
        s->in_loop--;
    } else {
        /* Nothing ran and the loop has nothing that could wake anyone: unless a wait is
         * already ready (set by a callback after our pass), nobody can progress. */
        int ready = 0;
        for (size_t i = 0; i < s->n && !ready; i++) {
            entry *e = s->v[i];
            ready = !e->dead && !e->running && (!e->wait || e->wait->ready);
        }
        if (!ready)
            result = -1;
    }
    s->depth--;
    s->running = prev_running;
    if (s->depth == 0)
        compact(s);
    return result;
}

int lah_await(lua_State *L, lah_wait *w, lua_KContext ctx, lua_KFunction k)
{
    if (w->ready)
        return k(L, LUA_OK, ctx);
    sched *s = get_sched(L);
    if (s->current && s->current->co == L && lua_isyieldable(L)) {
        s->current->wait = w;
        return lua_yieldk(L, 0, ctx, k);
    }
    if (s->in_loop || s->hook_depth > 0)
        return luaL_error(L, "agenthost: cannot wait inside a hook (on_event, retry_on, "
                             "validate, idempotency_key): the event loop is running it");
    while (!w->ready) {
        if (lah_step(L) < 0 && !w->ready)
            return luaL_error(L, "agenthost: deadlock: this thread waits for work that "
                                 "nothing is left to do");
    }
    return k(L, LUA_OK, ctx);
}
