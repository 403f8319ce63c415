/* tools_batch.c - ah.batch(items, fn, { budget = N, concurrency = K, on_event = fn })
 * (docs/tools.md): run fn(item, ctx) for every item, up to K at once, all sharing one
 * budget.
 *
 * Each started item runs in its own coroutine (lah_spawn); the batch itself waits with
 * lah_await until one of them ends, then starts the next. An item is started only while
 * the budget has executions left; items reached after that are `skipped` and fn is never
 * called for them.
 *
 * Invariants:
 *   - the batch's Lua values sit at fixed stack slots across its yields (ITEMS ..
 * ON_EVENT);
 *   - each item's coroutine holds the batch state userdata on its own stack, so the
 *     state outlives every item even if the batch's own coroutine is abandoned, and
 *     on_done never touches freed memory;
 *   - an item writes its own status and result from inside its coroutine (a running
 *     thread), so on_done only does C bookkeeping.
 */
#include "tools.h"

#include "internal.h"

#include <string.h>

enum {
    ITEMS = 1,
    FN,
    OPTS,
    BST,
    BUDGET,
    RESULTS,
    STATUS,
    KEYS,
    ON_EVENT,
    BASE = ON_EVENT
};

#define BATCH_MT "agenthost.batchstate"

typedef struct batch_state {
    lua_Integer n, next; /* items 1..n; next to consider */
    int running, concurrency;
    lah_wait wait;
    int64_t used_before;
    int unlimited;  /* no budget was given: ours only counts */
    int skip_event; /* budget_exhausted emitted */
} batch_state;

/* ---- one item, inside its coroutine --------------------------------------------------
 * stack: 1 fn, 2 item, 3 ctx, 4 results, 5 status, 6 index, 7 key, 8 batch state,
 * 9 the gate's message handler (fn runs through lah_gate_callk: a raised value is kept
 * as raised, its traceback recorded beside it) */
#define MSGH 9

static void set_status(lua_State *L, const char *status)
{
    lua_pushstring(L, status);
    lua_rawseti(L, 5, lua_tointeger(L, 6));
}

/* Classify what fn returned (at the top): a tool result by its outcome (a call the
 * budget refused before its first attempt ran nothing: skipped), `false` or
 * { ok = false } failed, anything else done. */
static const char *classify(lua_State *L)
{
    int t = lua_type(L, -1);
    if (t == LUA_TBOOLEAN && !lua_toboolean(L, -1))
        return "failed";
    if (t != LUA_TTABLE)
        return "done";
    const char *status = "done";
    if (lua_getfield(L, -1, "outcome") == LUA_TSTRING) {
        const char *o = lua_tostring(L, -1);
        if (strcmp(o, "ok") == 0) {
            status = "done";
        } else if (strcmp(o, "budget_exhausted") == 0) {
            lua_getfield(L, -2, "attempts");
            status = lua_tointeger(L, -1) == 0 ? "skipped" : "failed";
            lua_pop(L, 1);
        } else {
            status = "failed";
        }
    } else {
        lua_getfield(L, -2, "ok");
        if (lua_type(L, -1) == LUA_TBOOLEAN && !lua_toboolean(L, -1))
            status = "failed";
        lua_pop(L, 1);
    }
    lua_pop(L, 1);
    return status;
}

static int item_k(lua_State *L, int status, lua_KContext ctx)
{
    (void)ctx;
    if (status == LUA_OK || status == LUA_YIELD) {
        set_status(L, classify(L));
    } else {
        ah_error err;
        lah_to_error(L, -1, &err);
        const char *tb = lah_gate_traceback(L, MSGH); /* anchored by the handler */
        ah__log(AH_LOG_INFO, "batch item %lld failed: %s", (long long)lua_tointeger(L, 6),
                tb ? tb : err.message);
        lua_pop(L, 1);
        lua_createtable(L, 0, 4);
        if (tb) {
            lua_pushstring(L, tb);
            lua_setfield(L, -2, "traceback");
        }
        lua_pushboolean(L, 0);
        lua_setfield(L, -2, "ok");
        lua_pushliteral(L, "failed");
        lua_setfield(L, -2, "outcome");
        lah_push_error(L, &err);
        lua_setfield(L, -2, "error");
        set_status(L, "failed");
    }
    lua_pushvalue(L, 7);
    lua_insert(L, -2);
    lua_rawset(L, 4); /* results[key] = what fn returned */
    return 0;
}

static int batch_item(lua_State *L)
{
    lua_settop(L, 8);
    lah_gate_push_keep_msgh(L); /* MSGH */
    lua_pushvalue(L, 1);
    lua_pushvalue(L, 2);
    lua_pushvalue(L, 3);
    return item_k(L, lah_gate_callk(L, 2, 1, MSGH, 0, item_k), 0);
}

static void item_done(void *ud, lua_State *co, int ok)
{
    batch_state *b = ud;
    (void)co;
    if (!ok) /* batch_item itself failed (out of memory): its status stays unset */
        ah__log(AH_LOG_ERROR, "batch item could not run");
    b->running--;
    b->wait.ready = 1;
}

/* ---- the batch ----------------------------------------------------------------------
 */

static void push_key(lua_State *L, lua_Integer i)
{
    lua_rawgeti(L, ITEMS, i);
    if (lua_type(L, -1) == LUA_TTABLE) {
        int t = lua_getfield(L, -1, "key");
        if (t == LUA_TSTRING || t == LUA_TNUMBER) {
            lua_remove(L, -2);
            return;
        }
        lua_pop(L, 1);
    }
    lua_pop(L, 1);
    lua_pushinteger(L, i);
}

/* The first item skipped for the budget reports it (budget "batch"). */
static void emit_skip(lua_State *L, batch_state *b)
{
    if (b->skip_event)
        return;
    b->skip_event = 1;
    ah_event ev;
    ah_budget_exhausted_event(lah_budget_test(L, BUDGET)->b, "batch", &ev);
    lah_tools_emit(L, ON_EVENT, 1, &ev);
}

static void push_list(lua_State *L, batch_state *b, const char *which)
{
    lua_newtable(L);
    lua_Integer j = 1;
    for (lua_Integer i = 1; i <= b->n; i++) {
        lua_rawgeti(L, STATUS, i);
        const char *s = lua_tostring(L, -1);
        /* an item whose coroutine could not run has no status: failed */
        int match = s ? strcmp(s, which) == 0 : strcmp(which, "failed") == 0;
        lua_pop(L, 1);
        if (match) {
            lua_rawgeti(L, KEYS, i);
            lua_rawseti(L, -2, j++);
        }
    }
}

static int finish(lua_State *L, batch_state *b)
{
    lah_budget_ud *bu = lah_budget_test(L, BUDGET);
    int64_t used = ah_budget_used(bu->b);
    lua_settop(L, BASE);
    lua_createtable(L, 0, 7);
    push_list(L, b, "done");
    lua_setfield(L, -2, "done");
    push_list(L, b, "failed");
    lua_setfield(L, -2, "failed");
    push_list(L, b, "skipped");
    lua_setfield(L, -2, "skipped");
    lua_pushinteger(L, (lua_Integer)(used - b->used_before));
    lua_setfield(L, -2, "calls");
    lua_createtable(L, 0, 2);
    if (!b->unlimited) {
        lua_pushinteger(L, (lua_Integer)ah_budget_limit(bu->b));
        lua_setfield(L, -2, "limit");
    }
    lua_pushinteger(L, (lua_Integer)used);
    lua_setfield(L, -2, "used");
    lua_setfield(L, -2, "budget");
    lua_pushvalue(L, RESULTS);
    lua_setfield(L, -2, "results");
    lua_pushinteger(L, b->n);
    lua_setfield(L, -2, "items");
    return 1;
}

static int batch_k(lua_State *L, int status, lua_KContext ctx);

static int drive(lua_State *L)
{
    batch_state *b = lua_touserdata(L, BST);
    lah_budget_ud *bu = lah_budget_test(L, BUDGET);
    lua_settop(L, BASE);
    while (b->running < b->concurrency && b->next <= b->n) {
        lua_Integer i = b->next++;
        push_key(L, i);
        lua_pushvalue(L, -1);
        lua_rawseti(L, KEYS, i);
        if (ah_budget_remaining(bu->b) <= 0) {
            /* Reached after the budget is spent: never started. */
            lua_pushliteral(L, "skipped");
            lua_rawseti(L, STATUS, i);
            lua_createtable(L, 0, 2);
            lua_pushboolean(L, 0);
            lua_setfield(L, -2, "ok");
            lua_pushliteral(L, "skipped");
            lua_setfield(L, -2, "outcome");
            lua_rawset(L, RESULTS); /* results[key] */
            emit_skip(L, b);
            continue;
        }
        int key = lua_gettop(L);
        lua_pushcfunction(L, batch_item);
        lua_pushvalue(L, FN);
        lua_rawgeti(L, ITEMS, i);
        lua_createtable(L, 0, 3); /* ctx */
        lua_pushvalue(L, BUDGET);
        lua_setfield(L, -2, "budget");
        lua_pushvalue(L, key);
        lua_setfield(L, -2, "key");
        lua_pushinteger(L, i);
        lua_setfield(L, -2, "index");
        lua_pushvalue(L, RESULTS);
        lua_pushvalue(L, STATUS);
        lua_pushinteger(L, i);
        lua_pushvalue(L, key);
        lua_pushvalue(L, BST);
        lah_spawn(L, 8, item_done, b);
        b->running++;
        lua_settop(L, BASE);
    }
    if (b->running == 0)
        return finish(L, b);
    b->wait.ready = 0;
    return lah_await(L, &b->wait, 0, batch_k);
}

static int batch_k(lua_State *L, int status, lua_KContext ctx)
{
    (void)status, (void)ctx;
    return drive(L);
}

static int l_batch(lua_State *L)
{
    lah_check_not_in_hook(L, "ah.batch");
    luaL_checktype(L, ITEMS, LUA_TTABLE);
    luaL_checktype(L, FN, LUA_TFUNCTION);
    lua_settop(L, OPTS);
    if (!lua_isnil(L, OPTS)) {
        static const char *const known[] = {"budget", "concurrency", "on_event", NULL};
        luaL_checktype(L, OPTS, LUA_TTABLE);
        lah_check_fields(L, OPTS, "ah.batch", known);
    }
    batch_state *b = lua_newuserdatauv(L, sizeof *b, 0); /* BST */
    memset(b, 0, sizeof *b);
    luaL_setmetatable(L, BATCH_MT);
    b->n = (lua_Integer)lua_rawlen(L, ITEMS);
    b->next = 1;
    b->concurrency = 1;

    int ty = lua_isnil(L, OPTS) ? LUA_TNIL : lua_getfield(L, OPTS, "budget");
    if (ty == LUA_TNIL) {
        lua_settop(L, BST);
        lah_budget_push_new(L, LUA_MAXINTEGER); /* counts calls; never runs out */
        b->unlimited = 1;
    } else if (ty == LUA_TNUMBER) {
        lua_Integer n = lah_check_whole(L, -1, "ah.batch", "budget", 0, LUA_MAXINTEGER);
        lua_pop(L, 1);
        lah_budget_push_new(L, n);
    } else if (!lah_budget_test(L, -1)) {
        return luaL_error(L, "ah.batch: budget must be a number or an ah.budget (got %s)",
                          luaL_typename(L, -1));
    } /* BUDGET */
    b->used_before = ah_budget_used(lah_budget_test(L, BUDGET)->b);

    if (!lua_isnil(L, OPTS) && lua_getfield(L, OPTS, "concurrency") != LUA_TNIL) {
        b->concurrency = (int)lah_check_whole(L, -1, "ah.batch", "concurrency", 1, 10000);
    }
    lua_settop(L, BUDGET);
    lua_newtable(L); /* RESULTS */
    lua_newtable(L); /* STATUS */
    lua_newtable(L); /* KEYS */
    if (lua_isnil(L, OPTS))
        lua_pushnil(L);
    else if (lua_getfield(L, OPTS, "on_event") != LUA_TNIL &&
             lua_type(L, -1) != LUA_TFUNCTION)
        return luaL_error(L, "ah.batch: on_event must be a function");
    return drive(L);
}

void lah_open_batch(lua_State *L)
{
    static const luaL_Reg meta[] = {{NULL, NULL}};
    static const luaL_Reg fns[] = {{"batch", l_batch}, {NULL, NULL}};
    lah_register_class(L, BATCH_MT, meta);
    luaL_setfuncs(L, fns, 0);
}
