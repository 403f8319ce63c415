/* agenthost.c - luaopen_agenthost: the module table, plus the small process-level
 * functions: ah.parallel, ah.sleep, ah.retry_budget, ah.version; the log handler of a
 * plain lua5.4. The searcher for the shipped scripts is scripts_path.c.
 *
 * Invariants: the scheduler is created first thing in luaopen_agenthost, before any
 * object of the binding exists, so that it is finalized last (lah.h). ah.parallel's
 * children report into a userdata that stays on the parent's stack until every child
 * has reported.
 */
#include "lah.h"
#include "tty.h"
#include "internal.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>


const char lah_host_key = 'H';

/* ---- ah.parallel ------------------------------------------------------------------- */

typedef struct par_child par_child;
typedef struct par {
    lah_wait wait;
    int remaining;
    int results_ref; /* the results table, anchored while children run */
    int n;
} par;

struct par_child {
    par *p;
    int index;
};

#define PAR_MT "agenthost.parallel"

static void par_done(void *ud, lua_State *co, int ok)
{
    par_child *c = ud;
    par *p = c->p;
    int top = lua_gettop(co);
    luaL_checkstack(co, 4, "parallel");
    lua_rawgeti(co, LUA_REGISTRYINDEX, p->results_ref);
    if (ok) {
        if (top >= 1)
            lua_pushvalue(co, 1);
        else
            lua_pushnil(co);
    } else {
        /* error value at top-1, "message\ntraceback" at top */
        lua_createtable(co, 0, 3);
        lua_pushboolean(co, 0);
        lua_setfield(co, -2, "ok");
        const char *full = lua_tostring(co, top);
        const char *nl = full ? strstr(full, "\nstack traceback:") : NULL;
        if (full && nl)
            lua_pushlstring(co, full, (size_t)(nl - full));
        else
            lua_pushstring(co, full ? full : "error");
        lua_setfield(co, -2, "error");
        lua_pushvalue(co, top);
        lua_setfield(co, -2, "traceback");
    }
    lua_rawseti(co, -2, c->index);
    lua_pop(co, 1);
    if (--p->remaining == 0)
        p->wait.ready = 1;
}

/* parallel_result(p) -> the results table (ah.parallel, after the wait) */
static int par_result(lua_State *L)
{
    par *p = lua_touserdata(L, 1);
    if (p->results_ref == LUA_NOREF)
        return luaL_error(L, "ah.parallel: internal: the results were taken already");
    lua_rawgeti(L, LUA_REGISTRYINDEX, p->results_ref);
    luaL_unref(L, LUA_REGISTRYINDEX, p->results_ref);
    p->results_ref = LUA_NOREF;
    lua_pushinteger(L, p->n);
    lua_setfield(L, -2, "n");
    return 1;
}

/* parallel_start{ fn, fn, ... } -> p (waitable): every function starts in its own
 * coroutine; result i is function i's first return value, or { ok = false, error =
 * message, traceback = text } when it raised. Each child anchors p, so its report never
 * lands in freed memory. */
static int par_start(lua_State *L)
{
    luaL_checktype(L, 1, LUA_TTABLE);
    int n = (int)luaL_len(L, 1);
    for (int i = 1; i <= n; i++) {
        lua_rawgeti(L, 1, i);
        if (!lua_isfunction(L, -1) && !luaL_getmetafield(L, -1, "__call"))
            luaL_error(L, "ah.parallel: item %d is a %s, not a function", i,
                       luaL_typename(L, -1));
        lua_settop(L, 1);
    }
    par *p = lua_newuserdatauv(L, sizeof *p + (size_t)n * sizeof(par_child), 0);
    int pidx = lua_gettop(L);
    memset(p, 0, sizeof *p);
    p->n = n;
    p->remaining = n;
    p->wait.ready = n == 0;
    p->results_ref = LUA_NOREF;
    lua_createtable(L, n, 1);
    p->results_ref = luaL_ref(L, LUA_REGISTRYINDEX);
    luaL_setmetatable(L, PAR_MT);
    par_child *children = (par_child *)(p + 1);
    for (int i = 1; i <= n; i++) {
        children[i - 1].p = p;
        children[i - 1].index = i;
        lua_rawgeti(L, 1, i);
        lah_spawn_ex(L, 0, par_done, &children[i - 1], pidx, 0);
    }
    lua_settop(L, pidx);
    return 1;
}

static int par_gc(lua_State *L)
{
    par *p = lua_touserdata(L, 1);
    if (p->results_ref != LUA_NOREF)
        luaL_unref(L, LUA_REGISTRYINDEX, p->results_ref);
    p->results_ref = LUA_NOREF;
    return 0;
}

/* ---- ah.sleep ---------------------------------------------------------------------- */

typedef struct sleeper {
    lah_wait wait;
    ah_timer *timer;
} sleeper;

#define SLEEPER_MT "agenthost.sleeper"

static void sleeper_fire(void *ud)
{
    ((sleeper *)ud)->wait.ready = 1;
}

static int sleeper_gc(lua_State *L)
{
    sleeper *s = luaL_checkudata(L, 1, SLEEPER_MT);
    ah_timer_free(s->timer);
    s->timer = NULL;
    return 0;
}

/* sleep_start(ms) -> s (waitable): a loop timer; ah.sleep waits for it. */
static int sleep_start(lua_State *L)
{
    lua_Integer ms = luaL_checkinteger(L, 1);
    luaL_argcheck(L, ms >= 0, 1, "must be >= 0");
    sleeper *s = lua_newuserdatauv(L, sizeof *s, 0);
    memset(s, 0, sizeof *s);
    luaL_setmetatable(L, SLEEPER_MT);
    s->timer = ah_timer_new(lah_loop(L), sleeper_fire, s);
    if (!s->timer)
        return luaL_error(L, "ah.sleep: out of memory");
    ah_timer_start(s->timer, (int64_t)ms);
    return 1;
}

/* ---- ah.retry_budget --------------------------------------------------------------- */

#define RB_MT "agenthost.retry_budget"
static const char RB_KEY = 'B';

typedef struct rb_box {
    ah_retry_budget *b;
    ah_redis *r; /* a shared budget's connection, freed after it */
} rb_box;

static int rb_gc(lua_State *L)
{
    rb_box *box = luaL_checkudata(L, 1, RB_MT);
    ah_retry_budget_free(box->b);
    ah_redis_free(box->r);
    box->b = NULL;
    box->r = NULL;
    return 0;
}

static int rb_tokens(lua_State *L)
{
    rb_box *box = luaL_checkudata(L, 1, RB_MT);
    lua_pushnumber(L, box->b ? ah_retry_budget_tokens(box->b) : 0);
    return 1;
}

/* ah.retry_budget{ max_tokens = 10, token_ratio = 0.1 }: the process-level retry budget
 * every agent created afterwards shares. With redis = URL and key = NAME the bucket is
 * shared by every process naming the key. ah.retry_budget(false) removes it. */
static int l_retry_budget(lua_State *L)
{
    if (lua_isboolean(L, 1) && !lua_toboolean(L, 1)) {
        lua_pushnil(L);
        lua_rawsetp(L, LUA_REGISTRYINDEX, &RB_KEY);
        return 0;
    }
    luaL_checktype(L, 1, LUA_TTABLE);
    static const char *const known[] = {"max_tokens", "token_ratio", "redis", "key", NULL};
    lah_check_fields(L, 1, "ah.retry_budget", known);
    int ty = lua_getfield(L, 1, "redis");
    if (ty != LUA_TNIL && ty != LUA_TSTRING)
        return luaL_error(L, "ah.retry_budget: redis must be a URL string");
    const char *url = lua_tostring(L, -1);
    ty = lua_getfield(L, 1, "key");
    if (ty != LUA_TNIL && ty != LUA_TSTRING)
        return luaL_error(L, "ah.retry_budget: key must be a string");
    const char *key = lua_tostring(L, -1);
    if (url && (!key || !*key))
        return luaL_error(L, "ah.retry_budget: key is required with redis (every process "
                          "that shares the budget names the same key)");
    lua_pop(L, 2); /* the table keeps both strings alive */
    lua_getfield(L, 1, "max_tokens");
    double max_tokens = luaL_optnumber(L, -1, 10);
    lua_getfield(L, 1, "token_ratio");
    double ratio = luaL_optnumber(L, -1, 0.1);
    lua_pop(L, 2);
    char err[200];
    if (ah_retry_budget_check(max_tokens, ratio, err, sizeof err) != AH_OK)
        return luaL_error(L, "ah.retry_budget: %s", err);
    rb_box *box = lua_newuserdatauv(L, sizeof *box, 0);
    box->b = NULL;
    box->r = NULL;
    luaL_setmetatable(L, RB_MT);
    if (url) {
        box->r = lah_redis_open(L, url, "ah.retry_budget");
        ah_retry_budget_new_redis(box->r, key, max_tokens, ratio, &box->b, err, sizeof err);
        if (!box->b)
            return luaL_error(L, "ah.retry_budget: %s", err);
    } else {
        ah_retry_budget_new(max_tokens, ratio, &box->b, NULL, 0);
    }
    if (!box->b)
        return luaL_error(L, "ah.retry_budget: out of memory");
    lua_pushvalue(L, -1);
    lua_rawsetp(L, LUA_REGISTRYINDEX, &RB_KEY);
    return 1;
}

ah_retry_budget *lah_push_retry_budget(lua_State *L)
{
    if (lua_rawgetp(L, LUA_REGISTRYINDEX, &RB_KEY) != LUA_TUSERDATA)
        return NULL;
    rb_box *box = lua_touserdata(L, -1);
    return box->b;
}

void lah_log_to_stderr(void *ud, ah_log_level level, int event, const char *line)
{
    (void)ud;
    static int tty = -1;
    if (tty < 0)
        tty = isatty(2);
    /* On a terminal the status display shows each retry and give-up as its transient
     * (or final) line, from the llm_retry / llm_gave_up events; printing the core's log
     * line for the same thing too would stack lines under it. */
    if (tty && (event == AH_EV_LLM_RETRY || event == AH_EV_LLM_GAVE_UP))
        return;
    fprintf(stderr, "agenthost: %s: %s\n", ah_log_level_name(level), line);
}

/* ---- ah.log_handler ------------------------------------------------------------------ */

/* The library's log handler is process-wide; a Lua one belongs to one state and is
 * called only on the thread that installed it, never re-entrantly (a line logged from
 * another thread, or while the handler runs, goes to stderr). The sentinel userdata's
 * __gc hands logging back to stderr when the state closes. */
typedef struct lua_log {
    lua_State *main;
    int ref;
    pthread_t thread;
    int busy, failed;
} lua_log;

static lua_log g_log; /* main == NULL: no Lua handler */
static const char LOG_SENTINEL_KEY = 'G';
#define LOG_SENTINEL_MT "agenthost.log_sentinel"

static void lua_log_fn(void *ud, ah_log_level level, int event, const char *line)
{
    lua_log *lg = ud;
    if (!lg->main || lg->busy || !pthread_equal(pthread_self(), lg->thread)) {
        lah_log_to_stderr(NULL, level, event, line);
        return;
    }
    lua_State *L = lah_running(lg->main);
    if (!lua_checkstack(L, 6))
        return;
    lg->busy = 1;
    lua_rawgeti(L, LUA_REGISTRYINDEX, lg->ref);
    lua_pushstring(L, ah_log_level_name(level));
    lua_pushstring(L, line);
    if (event >= 0 && event < AH_EV_COUNT_)
        lua_pushstring(L, ah_event_type_name((ah_event_type)event));
    else
        lua_pushnil(L);
    /* a hook like any other: it must not wait, its error carries a traceback */
    if (lah_gate_call(L, lah_gate_of(L), 3, 0, 0) != LUA_OK) {
        if (!lg->failed)
            fprintf(stderr, "agenthost: warning: log handler: %s\nagenthost: %s: %s\n",
                    lua_tostring(L, -1), ah_log_level_name(level), line);
        lg->failed = 1;
        lua_pop(L, 1);
    }
    lg->busy = 0;
}

static void log_release(lua_State *L)
{
    if (g_log.main && g_log.ref != LUA_NOREF)
        luaL_unref(L, LUA_REGISTRYINDEX, g_log.ref);
    g_log.main = NULL;
    g_log.ref = LUA_NOREF;
}

static int log_sentinel_gc(lua_State *L)
{
    lua_State *main = lah_main(L);
    if (g_log.main == main) {
        g_log.main = NULL; /* the registry is going away with the state */
        g_log.ref = LUA_NOREF;
        ah_log_set_handler(lah_log_to_stderr, NULL, AH_LOG_WARN);
    }
    return 0;
}

/* ah.log_handler(fn [, min_level]) -> nothing. fn(level, message, event_type) gets each
 * library log line at min_level ("debug", "info", "warning" (default), "error") or
 * above; event_type names the event the line restates ("llm_retry", "llm_gave_up") or
 * is nil. false: silence the library. nil: back to stderr. */
static int l_log_handler(lua_State *L)
{
    static const char *const levels[] = {"debug", "info", "warning", "error", NULL};
    int ty = lua_type(L, 1);
    if (ty != LUA_TFUNCTION && ty != LUA_TNIL && !(ty == LUA_TBOOLEAN && !lua_toboolean(L, 1)))
        return luaL_error(L, "ah.log_handler: expected a function, false or nil, got %s",
                          luaL_typename(L, 1));
    int min = luaL_checkoption(L, 2, "warning", levels);
    if (g_log.main) {
        lua_State *main = lah_main(L);
        if (g_log.main == main)
            log_release(L);
        else
            g_log.main = NULL; /* another state's: its reference dies with it */
    }
    if (ty == LUA_TNIL) {
        ah_log_set_handler(lah_log_to_stderr, NULL, (ah_log_level)min);
        return 0;
    }
    if (ty == LUA_TBOOLEAN) {
        ah_log_set_handler(NULL, NULL, AH_LOG_ERROR);
        return 0;
    }
    if (lua_rawgetp(L, LUA_REGISTRYINDEX, &LOG_SENTINEL_KEY) == LUA_TNIL) {
        lua_newuserdatauv(L, 1, 0);
        static const luaL_Reg meta[] = {{"__gc", log_sentinel_gc}, {NULL, NULL}};
        if (luaL_newmetatable(L, LOG_SENTINEL_MT))
            luaL_setfuncs(L, meta, 0);
        lua_setmetatable(L, -2);
        lua_rawsetp(L, LUA_REGISTRYINDEX, &LOG_SENTINEL_KEY);
    }
    lua_pop(L, 1);
    lua_pushvalue(L, 1);
    g_log.ref = luaL_ref(L, LUA_REGISTRYINDEX);
    g_log.main = lah_main(L);
    g_log.thread = pthread_self();
    g_log.busy = g_log.failed = 0;
    ah_log_set_handler(lua_log_fn, &g_log, (ah_log_level)min);
    return 0;
}

/* ---- the private table of lua/waits.lua -------------------------------------------- */

static const char PRIVATE_KEY = 'P';

void lah_push_private(lua_State *L)
{
    if (lua_rawgetp(L, LUA_REGISTRYINDEX, &PRIVATE_KEY) == LUA_TTABLE)
        return;
    lua_pop(L, 1);
    lua_newtable(L);
    lua_pushvalue(L, -1);
    lua_rawsetp(L, LUA_REGISTRYINDEX, &PRIVATE_KEY);
}

void lah_private_funcs(lua_State *L, const luaL_Reg *fns)
{
    lah_push_private(L);
    luaL_setfuncs(L, fns, 0);
    lua_pop(L, 1);
}

/* lua/waits.lua, compiled in (the build turns it into this array) */
#include "waits_lua.h"

/* Run lua/waits.lua with the module table (on top) and the private table: it puts every
 * function that waits into the module and the methods tables. */
static void run_waits(lua_State *L)
{
    int mod = lua_gettop(L);
    if (luaL_loadbuffer(L, (const char *)lah_waits_lua, sizeof lah_waits_lua,
                        "=agenthost/waits.lua") != LUA_OK)
        lua_error(L);
    lua_pushvalue(L, mod);
    lah_push_private(L);
    lah_gate_call_raising(L, 2, 0);
}

/* ---- the module -------------------------------------------------------------------- */

/* The module's one exported symbol (everything else is hidden; cmake/lua_module.map). */
AH_EXPORT int luaopen_agenthost(lua_State *L);

int luaopen_agenthost(lua_State *L)
{
    lah_loop(L); /* the scheduler first: finalized last */
    lua_rawgetp(L, LUA_REGISTRYINDEX, &lah_host_key);
    int hosted = lua_toboolean(L, -1);
    lua_pop(L, 1);
    /* From a plain lua5.4, library lines go to stderr, unless the program that loaded the
     * module (it shares this process's one libagenthost) installed a handler already. */
    if (!hosted && !ah_log_enabled(AH_LOG_ERROR))
        ah_log_set_handler(lah_log_to_stderr, NULL, AH_LOG_WARN);
    lah_add_script_searcher(L);

    static const luaL_Reg sleeper_meta[] = {{"__gc", sleeper_gc}, {NULL, NULL}};
    static const luaL_Reg par_meta[] = {{"__gc", par_gc}, {NULL, NULL}};
    static const luaL_Reg rb_meta[] = {{"__gc", rb_gc}, {NULL, NULL}};
    static const luaL_Reg rb_methods[] = {{"tokens", rb_tokens}, {NULL, NULL}};
    lah_register_class(L, SLEEPER_MT, sleeper_meta);
    lah_register_class(L, PAR_MT, par_meta);
    lah_register_class(L, RB_MT, rb_meta);
    luaL_getmetatable(L, RB_MT);
    luaL_newlib(L, rb_methods);
    lua_setfield(L, -2, "__index");
    lua_pop(L, 1);

    static const luaL_Reg priv[] = {{"parallel_start", par_start},
                                    {"parallel_result", par_result},
                                    {"sleep_start", sleep_start},
                                    {NULL, NULL}};
    lah_private_funcs(L, priv);
    static const luaL_Reg fns[] = {{"retry_budget", l_retry_budget},
                                   {"log_handler", l_log_handler},
                                   {NULL, NULL}};
    luaL_newlib(L, fns);
    lua_pushstring(L, ah_version());
    lua_setfield(L, -2, "version");
    lua_pushstring(L, lahc_runtime_name(L));
    lua_setfield(L, -2, "runtime");
    lah_open_sched(L);
    lah_open_errors(L);
    lah_open_client(L);
    lah_open_scale(L);
    lah_open_mock(L);
    lah_open_agent(L);
    lah_open_history(L);
    lah_open_mcp(L);
    lah_tty_open(L); /* ah.isatty (lua/tty.h) */
    lah_tools_open(L);
    run_waits(L); /* last: it reads what the others registered */
    return 1;
}
