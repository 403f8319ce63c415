/* sched.c - the scheduler: Lua coroutines over the one core loop (lah.h has the model),
 * the wait primitives lua/waits.lua builds every waiting function on, and the host-loop
 * surface (ah.step, ah.backend_fd, ah.backend_timeout).
 *
 * Invariants:
 *  - One scheduler per lua_State, a userdata in the registry created before any other
 *    object of the binding, so it is finalized last at lua_close (every runtime finalizes
 *    userdata newest first) and frees the loop after every worker, timer and transfer.
 *  - A managed coroutine is anchored by a registry reference from lah_spawn until it
 *    ends; its entry is never freed while a step that may touch it is on the C stack
 *    (entries are compacted only when the outermost step returns).
 *  - A coroutine is resumed only by the scheduler and only when it is not already
 *    running (a step nested inside a blocking wait skips the threads on the C stack).
 *  - The loop is never re-entered: a wait inside a hook (which runs inside a loop
 *    callback) is an error, not a nested step.
 *  - No C function here waits by yielding: a wait is a Lua loop (lua/waits.lua) over
 *    park (yield to the scheduler, which resumes the coroutine once the wait is ready)
 *    and drive (step the scheduler right here until it is). park says yield only for the
 *    coroutine the scheduler is running (`current`) and only where a yield can reach it,
 *    so a yield never lands in a resume the user made (coroutine.wrap in a script).
 *  - Deferred calls (on_done of a run) run at the top of a step, outside the loop, in
 *    the order they were deferred.
 */
#include "lah.h"
#include "lah_backend.h"
#include "internal.h"

#include <stdlib.h>
#include <string.h>

typedef struct entry {
    lua_State *co;
    int ref;        /* registry reference anchoring the thread */
    int anchor_ref; /* anchors what on_done's ud points into, or LUA_NOREF */
    lua_State *owner; /* a child dies with its owner (lah_kill); NULL: independent */
    lah_wait *wait;   /* what it waits on; NULL = runnable (new, or after a plain yield) */
    int nargs;        /* arguments for the first resume */
    int started, running, dead;
    int killed; /* lah_kill while it was on the C stack: end it when it yields */
    lah_done_fn on_done;
    void *ud;
} entry;

typedef struct deferred {
    lah_defer_fn fn;
    void *ud;
} deferred;

typedef struct sched {
    lah_backend *backend;
    ah_loop *loop;
    entry **v;
    size_t n, cap;
    size_t live;
    int depth;          /* nesting of lah_step (a blocking wait inside a coroutine) */
    lah_gate gate;      /* hook depth, inside the loop (lua/gate.c) */
    lua_State *running; /* the thread executing right now */
    lua_State *main;    /* a thread that lives as long as the state */
    entry *current;     /* the managed coroutine being resumed, or NULL */
    ah_event_fn sink;
    void *sink_ud;
    int *unrefs; /* registry references to drop at the next step (lah_unref_later) */
    size_t n_unrefs, cap_unrefs;
    deferred *defers;
    size_t n_defers, cap_defers;
    int runs; /* runs in flight: started, result not yet delivered (ah.step) */
} sched;

static const char SCHED_KEY = 'S'; /* its address keys the scheduler in the registry */
#ifndef LUA_RIDX_MAINTHREAD
static const char MAIN_KEY = 'M'; /* 5.1: the thread that opened the module, anchored */
#endif
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
    free(s->defers);
    s->defers = NULL;
    s->n_defers = s->cap_defers = 0;
    lah_backend_free(s->backend);
    s->backend = NULL;
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
    static const luaL_Reg meta[] = {{"__gc", sched_gc}, {NULL, NULL}};
    if (luaL_newmetatable(L, SCHED_MT))
        luaL_setfuncs(L, meta, 0);
    lua_setmetatable(L, -2);
    char err[200];
    s->backend = lah_backend_new(err, sizeof err);
    if (!s->backend) {
        lua_pop(L, 1);
        luaL_error(L, "agenthost: cannot create the event loop: %s", err);
    }
    s->loop = lah_backend_loop(s->backend);
#ifdef LUA_RIDX_MAINTHREAD
    lua_rawgeti(L, LUA_REGISTRYINDEX, LUA_RIDX_MAINTHREAD);
    s->main = lua_tothread(L, -1);
    lua_pop(L, 1);
#else
    /* Lua 5.1 and LuaJIT name no main thread: the one that loads the module stands for
     * it, anchored for the state's life. */
    lua_pushthread(L);
    s->main = lua_tothread(L, -1);
    lua_rawsetp(L, LUA_REGISTRYINDEX, &MAIN_KEY);
#endif
    s->running = s->main;
    lua_rawsetp(L, LUA_REGISTRYINDEX, &SCHED_KEY);
    return s;
}

ah_loop *lah_loop(lua_State *L)
{
    return get_sched(L)->loop;
}

lua_State *lah_main(lua_State *L)
{
    return get_sched(L)->main;
}

void *lah_state_id(lua_State *L)
{
    return get_sched(L);
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

void lah_runs_add(lua_State *L, int delta)
{
    get_sched(L)->runs += delta;
}

/* ---- the gate (lua/gate.c) keeps its counters in the scheduler --------------------- */

lah_gate *lah_gate_of(lua_State *L)
{
    return &get_sched(L)->gate;
}

/* ---- coroutines -------------------------------------------------------------------- */

/* Lua work added outside a step (from the host's own code) while a host watches the fd:
 * make it readable now, since no step's end will. */
static void work_added(sched *s)
{
    if (s->depth == 0 && lah_backend_is_external(s->backend))
        lah_backend_idle(s->backend, 1);
}

lua_State *lah_spawn_ex(lua_State *L, int nargs, lah_done_fn on_done, void *ud, int anchor,
                        int child)
{
    sched *s = get_sched(L);
    if (anchor)
        anchor = lua_absindex(L, anchor);
    luaL_checkstack(L, 3, "spawn");
    if (s->n == s->cap) {
        size_t cap = s->cap ? s->cap * 2 : 16;
        entry **v = realloc(s->v, cap * sizeof *v);
        if (!v)
            luaL_error(L, "agenthost: out of memory");
        s->v = v;
        s->cap = cap;
    }
    lua_State *co = lua_newthread(L);
    /* the function and its arguments go to the new thread's stack, which is only
     * LUA_MINSTACK deep (a script run with 60 arguments overflowed it) */
    if (!lua_checkstack(co, nargs + 1 + LUA_MINSTACK))
        luaL_error(L, "agenthost: too many arguments (%d) for a coroutine", nargs);
    entry *e = calloc(1, sizeof *e);
    if (!e)
        luaL_error(L, "agenthost: out of memory");
    e->anchor_ref = LUA_NOREF;
    if (anchor) {
        lua_pushvalue(L, anchor);
        e->anchor_ref = luaL_ref(L, LUA_REGISTRYINDEX);
    }
    lua_insert(L, -(nargs + 2)); /* thread below the function and its arguments */
    lua_xmove(L, co, nargs + 1);
    e->co = co;
    e->ref = luaL_ref(L, LUA_REGISTRYINDEX); /* pops the thread */
    e->nargs = nargs;
    e->on_done = on_done;
    e->ud = ud;
    e->owner = child ? s->running : NULL;
    s->v[s->n++] = e;
    s->live++;
    work_added(s);
    return co;
}

lua_State *lah_spawn(lua_State *L, int nargs, lah_done_fn on_done, void *ud)
{
    return lah_spawn_ex(L, nargs, on_done, ud, 0, 0);
}

static void drop_refs(lua_State *L, entry *e)
{
    luaL_unref(L, LUA_REGISTRYINDEX, e->ref);
    e->ref = LUA_NOREF;
    if (e->anchor_ref != LUA_NOREF)
        luaL_unref(L, LUA_REGISTRYINDEX, e->anchor_ref);
    e->anchor_ref = LUA_NOREF;
}

static void finish_entry(sched *s, entry *e, int ok)
{
    lua_State *co = e->co;
    lua_State *L = s->running; /* executing C code right now: calls on it are allowed */
    e->dead = 1;
    s->live--;
    /* a failed coroutine: lah_gate_resume put "message\ntraceback" above its error */
    if (e->killed) /* lah_kill'ed while running: nobody waits for its results */
        e->killed = 0;
    else if (e->on_done)
        e->on_done(e->ud, co, ok);
    else if (!ok)
        ah__log(AH_LOG_WARN, "coroutine failed: %s", lua_tostring(co, -1));
    if (!ok)
        lahc_closethread(co); /* close its pending to-be-closed variables */
    drop_refs(L, e);
}

/* End a suspended coroutine without resuming it: its to-be-closed variables are
 * closed, its stack (and every userdata only it held: timers, tool call states) is left
 * to the collector, whose finalizers free the C side. on_done is not called. */
static void kill_entry(sched *s, entry *e)
{
    e->dead = 1;
    e->killed = 0;
    s->live--;
    lahc_closethread(e->co);
    drop_refs(s->running, e);
}

static void kill_tree(sched *s, lua_State *co, lah_kill_fn each)
{
    for (size_t i = 0; i < s->n; i++) {
        entry *e = s->v[i];
        if (e->dead)
            continue;
        if (e->owner == co) /* its children first: they wait for nothing it holds */
            kill_tree(s, e->co, each);
    }
    for (size_t i = 0; i < s->n; i++) {
        entry *e = s->v[i];
        if (e->co != co || e->dead)
            continue;
        if (each)
            each(co);
        if (e->running)
            e->killed = 1; /* on the C stack right now: at its next yield */
        else
            kill_entry(s, e);
        return;
    }
}

void lah_kill(lua_State *L, lua_State *co, lah_kill_fn each)
{
    kill_tree(get_sched(L), co, each);
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

int lah_defer(lua_State *L, lah_defer_fn fn, void *ud)
{
    sched *s = get_sched(L);
    if (s->n_defers == s->cap_defers) {
        size_t cap = s->cap_defers ? s->cap_defers * 2 : 8;
        deferred *v = realloc(s->defers, cap * sizeof *v);
        if (!v)
            return 0;
        s->defers = v;
        s->cap_defers = cap;
    }
    s->defers[s->n_defers++] = (deferred){fn, ud};
    work_added(s);
    return 1;
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
    int st = lah_gate_resume(e->co, prev_running, nargs, &nres);
    s->running = prev_running;
    s->current = prev_current;
    e->running = 0;
    if (st == LUA_YIELD) {
        /* park set e->wait before the Lua side yielded; a plain coroutine.yield leaves
         * it NULL and the coroutine just runs again at the next step. */
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

static int run_defers(lua_State *L, sched *s)
{
    if (s->n_defers == 0)
        return 0;
    /* what a deferred call defers runs at the next step */
    size_t n = s->n_defers;
    deferred *v = s->defers;
    s->defers = NULL;
    s->n_defers = s->cap_defers = 0;
    for (size_t i = 0; i < n; i++)
        v[i].fn(L, v[i].ud);
    free(v);
    return (int)n;
}

/* Lua work that can run now: a deferred call, a coroutine that is new or runnable, or
 * one whose wait is ready. */
static int work_ready(const sched *s)
{
    if (s->n_defers)
        return 1;
    for (size_t i = 0; i < s->n; i++) {
        const entry *e = s->v[i];
        if (!e->dead && !e->running && (!e->wait || e->wait->ready))
            return 1;
    }
    return 0;
}

int lah_step(lua_State *L, int block)
{
    sched *s = get_sched(L);
    /* never inside the loop (no hook waits), so nothing these anchored is running */
    while (s->n_unrefs > 0)
        luaL_unref(L, LUA_REGISTRYINDEX, s->unrefs[--s->n_unrefs]);
    lua_State *prev_running = s->running;
    s->running = L;
    if (s->depth++ == 0)
        lah_backend_stepping(s->backend, 1);
    int ran = run_defers(L, s);
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
    if (ran || !block || ah_loop_alive(s->loop)) {
        /* without blocking while Lua work ran (keep I/O moving) or when asked not to,
         * else until the next timer or socket event */
        s->gate.in_loop++;
        lah_backend_poll(s->backend, ran || !block ? 0 : -1);
        s->gate.in_loop--;
    } else if (!work_ready(s)) {
        /* Nothing ran and the loop has nothing that could wake anyone: unless a wait is
         * already ready (set by a callback after our pass), nobody can progress. */
        result = -1;
    }
    s->depth--;
    s->running = prev_running;
    if (s->depth == 0) {
        compact(s);
        lah_backend_stepping(s->backend, 0);
        if (lah_backend_is_external(s->backend)) /* a host watches the fd: keep it true */
            lah_backend_idle(s->backend, work_ready(s));
    }
    return result;
}

/* ---- the wait primitives of lua/waits.lua -------------------------------------------
 * Every object a script can wait for (a run, a sleep, a tool call, a batch, ...) is a
 * full userdata whose C struct begins with its lah_wait. */

static lah_wait *check_wait(lua_State *L, int idx)
{
    lah_wait *w = lua_touserdata(L, idx);
    if (!w)
        luaL_error(L, "agenthost: internal: not a waitable object");
    return w;
}

/* ready(w) -> bool */
static int w_ready(lua_State *L)
{
    lua_pushboolean(L, check_wait(L, 1)->ready);
    return 1;
}

/* park(w) -> true when the caller is the coroutine the scheduler runs and may yield
 * here: the scheduler resumes it once w is ready. false: drive instead. */
static int w_park(lua_State *L)
{
    lah_wait *w = check_wait(L, 1);
    sched *s = get_sched(L);
    if (w->ready || !s->current || s->current->co != L) {
        lua_pushboolean(L, 0);
        return 1;
    }
    if (lahc_can_yield(L)) {
        s->current->wait = w;
        lua_pushboolean(L, 1);
        return 1;
    }
#if LUA_VERSION_NUM == 501
    if (!lahc_is_luajit())
        return luaL_error(
            L, "%s: cannot wait here: Lua 5.1 cannot yield across pcall, a metamethod or "
               "an iterator, and this coroutine runs other agents too; call it outside "
               "the pcall (or run on LuaJIT or Lua 5.2+, which can)",
            lua_isstring(L, 2) ? lua_tostring(L, 2) : "agenthost");
#endif
    /* inside a C function that called back into Lua (table.sort's comparator...): the
     * coroutine cannot be suspended, so this wait runs the loop itself */
    lua_pushboolean(L, 0);
    return 1;
}

/* drive(w): step the scheduler here until w is ready */
static int w_drive(lua_State *L)
{
    lah_wait *w = check_wait(L, 1);
    sched *s = get_sched(L);
    if (s->gate.in_loop || s->gate.hook_depth > 0)
        return luaL_error(L, "agenthost: cannot wait inside a hook (on_event, retry_on, "
                             "validate, idempotency_key, on_done): the event loop is "
                             "running it");
    while (!w->ready) {
        if (lah_step(L, 1) < 0 && !w->ready)
            return luaL_error(L, "agenthost: deadlock: this thread waits for work that "
                                 "nothing is left to do");
    }
    return 0;
}

/* check_wait(what): raise when waiting is not allowed here (inside a hook) */
static int w_check(lua_State *L)
{
    lah_check_not_in_hook(L, luaL_checkstring(L, 1));
    return 0;
}

/* ---- the host's loop: ah.step(), ah.backend_fd(), ah.backend_timeout() ------------- */

/* ah.step() -> runs in flight: do what is ready, without blocking */
static int l_step(lua_State *L)
{
    lah_check_not_in_hook(L, "ah.step");
    lah_step(L, 0);
    lua_pushinteger(L, get_sched(L)->runs);
    return 1;
}

/* ah.backend_fd() -> fd: readable while agenthost has work ready for ah.step() */
static int l_backend_fd(lua_State *L)
{
    sched *s = get_sched(L);
    int fd = lah_backend_fd(s->backend);
    lah_backend_idle(s->backend, work_ready(s));
    lua_pushinteger(L, fd);
    return 1;
}

/* ah.backend_timeout() -> ms until ah.step() must run anyway (0: now), -1 for none */
static int l_backend_timeout(lua_State *L)
{
    sched *s = get_sched(L);
    lua_pushinteger(L, work_ready(s) ? 0 : (lua_Integer)lah_backend_timeout(s->backend));
    return 1;
}

void lah_open_sched(lua_State *L)
{
    static const luaL_Reg fns[] = {{"step", l_step},
                                   {"backend_fd", l_backend_fd},
                                   {"backend_timeout", l_backend_timeout},
                                   {NULL, NULL}};
    static const luaL_Reg priv[] = {{"ready", w_ready},
                                    {"park", w_park},
                                    {"drive", w_drive},
                                    {"check_wait", w_check},
                                    {NULL, NULL}};
    luaL_setfuncs(L, fns, 0);
    lah_private_funcs(L, priv);
}
