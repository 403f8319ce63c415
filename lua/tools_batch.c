/* tools_batch.c - ah.batch(items, fn, { budget = N, concurrency = K, on_event = fn })
 * (docs/tools.md): run fn(item, ctx) for every item, up to K at once, all sharing one
 * budget. The waiting is lua/waits.lua's loop over the primitives here:
 *     b = batch_start(items, fn, opts); while batch_pump(b) do await(b) end;
 *     return batch_result(b)
 *
 * Each started item runs fn(item, ctx) as a coroutine of its own (lah_spawn), so fn may
 * wait and its error is caught where the scheduler resumes it; batch_pump starts items
 * while fewer than K run, and takes in the ones that ended. An item is started only while
 * the budget has executions left; items reached after that are `skipped` and fn is never
 * called for them.
 *
 * Invariants:
 *   - the batch's Lua values live in its slot table (ITEMS .. ON_EVENT below, the
 *     state's user value), put back at the same stack slots by every primitive;
 *   - every item's coroutine anchors the batch state, so the state outlives every item
 *     even if the batch's own coroutine is abandoned, and item_done never touches freed
 *     memory;
 *   - item_done (on the thread stepping the scheduler) only moves what the item ended
 *     with into the slot table and queues its index; batch_pump classifies it, on the
 *     batch's own thread, where an error in a metamethod is the batch's error.
 */
#include "tools.h"

#include "internal.h"

#include <stdlib.h>
#include <string.h>

enum {
    BST = 1, /* the batch state: every primitive's first argument */
    ITEMS,
    FN,
    OPTS,
    BUDGET,
    RESULTS,
    STATUS,
    KEYS,
    ON_EVENT,
    BASE = ON_EVENT,
    RAW /* in the slot table only: index -> { ok, value, traceback } of an item that ended */
};

#define BATCH_MT "agenthost.batchstate"

typedef struct batch_state batch_state;
typedef struct batch_item {
    batch_state *b;
    lua_Integer index;
} batch_item;

struct batch_state {
    lah_wait wait; /* first: the batch is what lua/waits.lua waits on */
    lua_Integer n, next; /* items 1..n; next to consider */
    int running, concurrency;
    int64_t used_before;
    int unlimited;  /* no budget was given: ours only counts */
    int skip_event; /* budget_exhausted emitted */
    int slots_ref;  /* the slot table (registry), while the batch runs */
    lua_Integer *ended; /* indexes of items that ended and wait for batch_pump */
    size_t n_ended, cap_ended;
    batch_item items[]; /* item_done's ud, one per item */
};

static int batch_gc(lua_State *L)
{
    batch_state *b = lua_touserdata(L, 1);
    free(b->ended);
    b->ended = NULL;
    b->n_ended = b->cap_ended = 0;
    if (b->slots_ref != LUA_NOREF)
        luaL_unref(L, LUA_REGISTRYINDEX, b->slots_ref);
    b->slots_ref = LUA_NOREF;
    return 0;
}

/* Put the slots back at 1..BASE from the state at index 1. */
static batch_state *restore(lua_State *L)
{
    batch_state *b = luaL_checkudata(L, 1, BATCH_MT);
    if (b->slots_ref == LUA_NOREF)
        luaL_error(L, "ah.batch: internal: the batch has ended");
    lua_settop(L, 1);
    luaL_checkstack(L, BASE + 12, "ah.batch");
    lua_rawgeti(L, LUA_REGISTRYINDEX, b->slots_ref);
    for (int i = ITEMS; i <= BASE; i++)
        lua_rawgeti(L, 2, i);
    lua_remove(L, 2);
    return b;
}

/* ---- one item ------------------------------------------------------------------------ */

static void set_status(lua_State *L, lua_Integer i, const char *status)
{
    lua_pushstring(L, status);
    lua_rawseti(L, STATUS, i);
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

/* The item's coroutine ended: keep { ok, value, traceback } for batch_pump. */
static void item_done(void *ud, lua_State *co, int ok)
{
    batch_item *it = ud;
    batch_state *b = it->b;
    lua_State *L = lah_running(co);
    b->running--;
    b->wait.ready = 1;
    if (b->n_ended == b->cap_ended) {
        size_t cap = b->cap_ended ? b->cap_ended * 2 : 8;
        lua_Integer *v = realloc(b->ended, cap * sizeof *v);
        if (!v) {
            ah__log(AH_LOG_ERROR, "batch item %lld: out of memory", (long long)it->index);
            return; /* its status stays unset: failed */
        }
        b->ended = v;
        b->cap_ended = cap;
    }
    if (b->slots_ref == LUA_NOREF || !lua_checkstack(L, 6) || !lua_checkstack(co, 3))
        return;
    lua_rawgeti(L, LUA_REGISTRYINDEX, b->slots_ref);
    lua_rawgeti(L, -1, RAW);
    lua_createtable(L, 3, 0);
    lua_pushboolean(L, ok);
    lua_rawseti(L, -2, 1);
    if (ok) {
        if (lua_gettop(co) >= 1)
            lua_pushvalue(co, 1);
        else
            lua_pushnil(co);
        lua_xmove(co, L, 1);
        lua_rawseti(L, -2, 2);
    } else {
        lua_pushvalue(co, -2); /* the error as raised */
        lua_xmove(co, L, 1);
        lua_rawseti(L, -2, 2);
        lua_pushvalue(co, -1); /* "message\ntraceback" */
        lua_xmove(co, L, 1);
        lua_rawseti(L, -2, 3);
    }
    lua_rawseti(L, -2, it->index);
    lua_pop(L, 2);
    b->ended[b->n_ended++] = it->index;
}

/* Take in an item that ended: results[key] = what fn returned (or a failure record),
 * status[i] = done | failed | skipped. */
static void take_in(lua_State *L, lua_Integer i)
{
    int top = lua_gettop(L);
    lua_rawgeti(L, LUA_REGISTRYINDEX, ((batch_state *)lua_touserdata(L, BST))->slots_ref);
    lua_rawgeti(L, -1, RAW);
    int raw = lua_gettop(L);
    lua_rawgeti(L, raw, i);
    int rec = lua_gettop(L);
    lua_pushnil(L);
    lua_rawseti(L, raw, i);
    lua_rawgeti(L, KEYS, i);
    int key = lua_gettop(L);
    lua_rawgeti(L, rec, 1);
    int ok = lua_toboolean(L, -1);
    lua_pop(L, 1);
    lua_rawgeti(L, rec, 2);
    if (ok) {
        set_status(L, i, classify(L));
    } else {
        ah_error err;
        lah_to_error(L, -1, &err);
        lua_rawgeti(L, rec, 3);
        const char *tb = lua_tostring(L, -1); /* anchored in rec */
        lua_pop(L, 1);
        ah__log(AH_LOG_INFO, "batch item %lld failed: %s", (long long)i,
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
        set_status(L, i, "failed");
    }
    lua_pushvalue(L, key);
    lua_insert(L, -2);
    lua_rawset(L, RESULTS); /* results[key] = what fn returned */
    lua_settop(L, top);
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

/* batch_result(b) -> { done, failed, skipped, calls, budget, results, items } */
static int p_batch_result(lua_State *L)
{
    batch_state *b = restore(L);
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
    luaL_unref(L, LUA_REGISTRYINDEX, b->slots_ref);
    b->slots_ref = LUA_NOREF;
    return 1;
}

/* batch_pump(b) -> true while items run (wait for b, then pump again), false when all
 * are done: takes in the items that ended, starts the next ones. */
static int p_batch_pump(lua_State *L)
{
    batch_state *b = restore(L);
    lah_budget_ud *bu = lah_budget_test(L, BUDGET);
    for (size_t k = 0; k < b->n_ended; k++)
        take_in(L, b->ended[k]);
    b->n_ended = 0;
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
        lua_pushvalue(L, FN);
        lua_rawgeti(L, ITEMS, i);
        lua_createtable(L, 0, 3); /* ctx */
        lua_pushvalue(L, BUDGET);
        lua_setfield(L, -2, "budget");
        lua_pushvalue(L, key);
        lua_setfield(L, -2, "key");
        lua_pushinteger(L, i);
        lua_setfield(L, -2, "index");
        b->items[i - 1].b = b;
        b->items[i - 1].index = i;
        lah_spawn_ex(L, 2, item_done, &b->items[i - 1], BST, 0);
        b->running++;
        lua_settop(L, BASE);
    }
    b->wait.ready = 0;
    lua_pushboolean(L, b->running > 0);
    return 1;
}

/* batch_start(items, fn, opts) -> b */
static int p_batch_start(lua_State *L)
{
    luaL_checktype(L, 1, LUA_TTABLE);
    luaL_checktype(L, 2, LUA_TFUNCTION);
    lua_settop(L, 3);
    if (!lua_isnil(L, 3)) {
        static const char *const known[] = {"budget", "concurrency", "on_event", NULL};
        luaL_checktype(L, 3, LUA_TTABLE);
        lah_check_fields(L, 3, "ah.batch", known);
    }
    lua_Integer n = (lua_Integer)lua_rawlen(L, 1);
    batch_state *b = lua_newuserdatauv(L, sizeof *b + (size_t)n * sizeof(batch_item), 0);
    memset(b, 0, sizeof *b);
    b->slots_ref = LUA_NOREF;
    luaL_setmetatable(L, BATCH_MT);
    lua_insert(L, 1); /* BST, then ITEMS, FN, OPTS */
    b->n = n;
    b->next = 1;
    b->concurrency = 1;

    int ty = lua_isnil(L, OPTS) ? LUA_TNIL : lua_getfield(L, OPTS, "budget");
    if (ty == LUA_TNIL) {
        lua_settop(L, OPTS);
        lah_budget_push_new(L, LUA_MAXINTEGER); /* counts calls; never runs out */
        b->unlimited = 1;
    } else if (ty == LUA_TNUMBER) {
        lua_Integer lim = lah_check_whole(L, -1, "ah.batch", "budget", 0, LUA_MAXINTEGER);
        lua_pop(L, 1);
        lah_budget_push_new(L, lim);
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
    /* the slot table */
    lua_createtable(L, RAW, 0);
    for (int i = ITEMS; i <= BASE; i++) {
        lua_pushvalue(L, i);
        lua_rawseti(L, -2, i);
    }
    lua_newtable(L);
    lua_rawseti(L, -2, RAW);
    b->slots_ref = luaL_ref(L, LUA_REGISTRYINDEX);
    lua_settop(L, BST);
    return 1;
}

void lah_open_batch(lua_State *L)
{
    static const luaL_Reg meta[] = {{"__gc", batch_gc}, {NULL, NULL}};
    static const luaL_Reg priv[] = {{"batch_start", p_batch_start},
                                    {"batch_pump", p_batch_pump},
                                    {"batch_result", p_batch_result},
                                    {NULL, NULL}};
    lah_register_class(L, BATCH_MT, meta);
    lah_private_funcs(L, priv);
}
