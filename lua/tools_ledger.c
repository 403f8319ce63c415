/* tools_ledger.c - ah.ledger and ah.budget: Lua handles over ah_ledger and ah_budget.
 *
 * A ledger handle owns its ah_ledger; tool calls BORROW it (core/tool_call.c), so a call
 * in flight keeps the handle on its Lua stack (it cannot be collected) and counts itself
 * in `busy` (it cannot be closed: ledger:close() refuses while busy > 0).
 * A ledger named by a path string (opts.ledger = "effects.db", ah.agent{ledger = path})
 * is opened once per path and kept in a registry table for the life of the Lua state,
 * so every call naming that path shares one handle.
 * A budget handle holds one reference to its ah_budget; each call takes its own.
 * __gc and __close share one idempotent function for each type.
 */
#include "tools.h"

#include "internal.h"

#include <stdlib.h>
#include <string.h>

#define LEDGER_CACHE "agenthost.ledger_paths"

/* ---- ledger -------------------------------------------------------------------------
 */

lah_ledger_ud *lah_ledger_test(lua_State *L, int idx)
{
    return luaL_testudata(L, idx, LAH_LEDGER_MT);
}

static lah_ledger_ud *check_open(lua_State *L, int idx)
{
    lah_ledger_ud *u = luaL_checkudata(L, idx, LAH_LEDGER_MT);
    if (!u->l)
        luaL_error(L, "ledger is closed");
    return u;
}

/* A silent fallback to memory would re-run effects after a restart, so a file that
 * cannot be used raises (the core's message names the path and the cause). */
lah_ledger_ud *lah_ledger_push_new(lua_State *L, const char *path)
{
    lah_ledger_ud *u = lua_newuserdatauv(L, sizeof *u, 0);
    memset(u, 0, sizeof *u);
    luaL_setmetatable(L, LAH_LEDGER_MT);
    if (path) {
        char err[512];
        u->path = ah__strdup(path);
        if (!u->path)
            luaL_error(L, "out of memory");
        ah_ledger_open(path, &u->l, err, sizeof err);
        if (!u->l)
            luaL_error(L, "ah.ledger: %s", err);
        /* Commits (an fsync each) run on the ledger's writer thread, never stalling the
         * scheduler's loop; answers come back through it. */
        if (ah_ledger_set_loop(u->l, lah_loop(L)) != AH_OK)
            luaL_error(L, "ah.ledger: %s", ah_ledger_errmsg(u->l));
    } else {
        u->l = ah_ledger_new_memory();
        if (!u->l)
            luaL_error(L, "out of memory");
    }
    return u;
}

/* ah.ledger{} | ah.ledger{ path = "effects.db", lease_ms = 30000 } | ah.ledger(path) */
static int l_ledger_new(lua_State *L)
{
    const char *path = NULL;
    lua_Integer lease = 0;
    if (lua_type(L, 1) == LUA_TSTRING) {
        path = lah_check_no_nul(L, 1, "ah.ledger: path");
    } else if (!lua_isnoneornil(L, 1)) {
        static const char *const known[] = {"path", "lease_ms", "redis", "prefix", "ttl_s",
                                            NULL};
        luaL_checktype(L, 1, LUA_TTABLE);
        lah_check_fields(L, 1, "ah.ledger", known);
        if (lua_getfield(L, 1, "redis") != LUA_TNIL)
            return lah_ledger_push_redis(L, 1); /* scale.c */
        lua_pop(L, 1);
        if (lua_getfield(L, 1, "path") != LUA_TNIL) {
            if (lua_type(L, -1) != LUA_TSTRING)
                return luaL_error(L, "ah.ledger: path must be a string (got %s)",
                                  luaL_typename(L, -1));
            path = lah_check_no_nul(L, -1, "ah.ledger: path");
        }
        if (lua_getfield(L, 1, "lease_ms") != LUA_TNIL) {
            lua_Number n = lua_tonumber(L, -1);
            if (!lua_isnumber(L, -1) || n != (lua_Number)(lua_Integer)n || n < 1)
                return luaL_error(L, "ah.ledger: lease_ms must be a whole number >= 1 "
                                     "(got %s)",
                                  luaL_tolstring(L, -1, NULL));
            lease = (lua_Integer)n;
        }
    }
    lah_ledger_ud *u = lah_ledger_push_new(L, path);
    if (lease > 0)
        ah_ledger_set_lease_ms(u->l, (int64_t)lease);
    return 1;
}

lah_ledger_ud *lah_ledger_push_arg(lua_State *L, int idx)
{
    idx = lua_absindex(L, idx);
    int t = lua_type(L, idx);
    if (t == LUA_TNIL || (t == LUA_TBOOLEAN && !lua_toboolean(L, idx))) {
        lua_pushnil(L);
        return NULL;
    }
    if (t == LUA_TSTRING) {
        lah_check_no_nul(L, idx, "ledger path");
        luaL_getsubtable(L, LUA_REGISTRYINDEX, LEDGER_CACHE);
        lua_pushvalue(L, idx);
        lua_rawget(L, -2);
        lah_ledger_ud *u = lah_ledger_test(L, -1);
        if (u && u->l) {
            lua_remove(L, -2);
            return u;
        }
        lua_pop(L, 1);
        u = lah_ledger_push_new(L, lua_tostring(L, idx));
        lua_pushvalue(L, idx);
        lua_pushvalue(L, -2);
        lua_rawset(L, -4); /* cache[path] = handle */
        lua_remove(L, -2);
        return u;
    }
    lah_ledger_ud *u = lah_ledger_test(L, idx);
    if (!u)
        luaL_error(L, "ledger must be an ah.ledger, a path string or false (got %s)",
                   luaL_typename(L, idx));
    if (!u->l)
        luaL_error(L, "ledger is closed");
    lua_pushvalue(L, idx);
    return u;
}

static int l_ledger_close(lua_State *L)
{
    lah_ledger_ud *u = luaL_checkudata(L, 1, LAH_LEDGER_MT);
    if (u->busy > 0 && lua_toboolean(L, lua_upvalueindex(1)))
        return luaL_error(L, "ledger is in use by %d tool call(s)", u->busy);
    ah_ledger_free(u->l);
    u->l = NULL;
    free(u->path);
    u->path = NULL;
    return 0;
}

/* Entries are copied out of the ledger first: the callback must not raise (a Lua error
 * would skip the SQLite statement's cleanup). */
typedef struct entry_copy {
    char *key, *receipt;
    int64_t seq, created_ms;
} entry_copy;

typedef struct entry_list {
    entry_copy *v;
    size_t n, cap;
    int oom;
} entry_list;

static int collect_entry(void *ud, const ah_ledger_entry *e)
{
    entry_list *list = ud;
    if (list->n == list->cap) {
        size_t cap = list->cap ? list->cap * 2 : 16;
        entry_copy *v = realloc(list->v, cap * sizeof *v);
        if (!v) {
            list->oom = 1;
            return 1;
        }
        list->v = v;
        list->cap = cap;
    }
    entry_copy *c = &list->v[list->n];
    c->key = ah__strdup(e->key);
    c->receipt = ah__strdup(e->receipt);
    c->seq = e->seq;
    c->created_ms = e->created_ms;
    list->n++;
    if (!c->key || !c->receipt) {
        list->oom = 1;
        return 1;
    }
    return 0;
}

static void entry_list_free(entry_list *list)
{
    for (size_t i = 0; i < list->n; i++) {
        free(list->v[i].key);
        free(list->v[i].receipt);
    }
    free(list->v);
    memset(list, 0, sizeof *list);
}

/* Push entries[i] as {key, seq, receipt, created_ms}; runs protected (lah_gate_protect).
 */
static int push_entries(lua_State *L)
{
    const entry_list *list = lua_touserdata(L, 1);
    lua_createtable(L, (int)list->n, 0);
    for (size_t i = 0; i < list->n; i++) {
        const entry_copy *c = &list->v[i];
        lua_createtable(L, 0, 4);
        lua_pushstring(L, c->key);
        lua_setfield(L, -2, "key");
        lua_pushinteger(L, (lua_Integer)c->seq);
        lua_setfield(L, -2, "seq");
        if (!lah_push_json_decoded(L, c->receipt, strlen(c->receipt)))
            lua_pushstring(L, c->receipt); /* recorded by C code as plain text */
        lua_setfield(L, -2, "receipt");
        lua_pushinteger(L, (lua_Integer)c->created_ms);
        lua_setfield(L, -2, "created_ms");
        lua_rawseti(L, -2, (lua_Integer)i + 1);
    }
    return 1;
}

/* ledger:entries() -> { {key, seq, receipt, created_ms}, ... } in seq order. A Redis
 * ledger reads the snapshot lua/waits.lua fetched first (ledger_refresh). */
static int l_ledger_entries(lua_State *L)
{
    lah_ledger_ud *u = check_open(L, 1);
    lua_settop(L, 1);
    entry_list list = {0};
    ah_status st = ah_ledger_foreach(u->l, collect_entry, &list);
    if (st != AH_OK || list.oom) {
        int oom = list.oom;
        entry_list_free(&list);
        return luaL_error(L, "ledger:entries(): %s",
                          oom ? "out of memory" : ah_ledger_errmsg(u->l));
    }
    int rc = lah_gate_protect(L, push_entries, &list, 1);
    entry_list_free(&list);
    if (rc != LUA_OK)
        return lua_error(L);
    return 1;
}

/* ledger:count() -> the number of receipts (a Redis ledger: of the snapshot fetched
 * first, as for entries) */
static int l_ledger_count(lua_State *L)
{
    lah_ledger_ud *u = check_open(L, 1);
    lua_settop(L, 1);
    int64_t n = ah_ledger_count(u->l);
    if (n < 0)
        return luaL_error(L, "ledger:count(): %s", ah_ledger_errmsg(u->l));
    lua_pushinteger(L, (lua_Integer)n);
    return 1;
}

static int l_ledger_index(lua_State *L)
{
    lah_ledger_ud *u = luaL_checkudata(L, 1, LAH_LEDGER_MT);
    const char *k = luaL_checkstring(L, 2);
    if (strcmp(k, "backend") == 0) {
        lua_pushstring(L, u->l ? ah_ledger_backend(u->l) : "closed");
    } else if (strcmp(k, "lease_ms") == 0) {
        lua_pushinteger(L, u->l ? (lua_Integer)ah_ledger_lease_ms(u->l) : 0);
    } else if (strcmp(k, "claims") == 0) {
        lua_pushinteger(L, u->l ? (lua_Integer)ah_ledger_claims(u->l) : 0);
    } else if (strcmp(k, "path") == 0) {
        if (u->path)
            lua_pushstring(L, u->path);
        else
            lua_pushnil(L);
    } else {
        lua_getmetatable(L, 1);
        lua_getfield(L, -1, "methods");
        lua_getfield(L, -1, k);
    }
    return 1;
}

static int l_ledger_tostring(lua_State *L)
{
    lah_ledger_ud *u = luaL_checkudata(L, 1, LAH_LEDGER_MT);
    if (!u->l)
        lua_pushstring(L, "ah.ledger (closed)");
    else if (u->path)
        lua_pushfstring(L, "ah.ledger (sqlite: %s)", u->path);
    else
        lua_pushstring(L, "ah.ledger (memory)");
    return 1;
}

/* ---- budget -------------------------------------------------------------------------
 */

lah_budget_ud *lah_budget_test(lua_State *L, int idx)
{
    return luaL_testudata(L, idx, LAH_BUDGET_MT);
}

lah_budget_ud *lah_budget_push_new(lua_State *L, lua_Integer limit)
{
    if (limit < 0)
        luaL_error(L, "budget must be >= 0 (got %I)", limit);
    lah_budget_ud *u = lua_newuserdatauv(L, sizeof *u, 0);
    u->b = NULL;
    luaL_setmetatable(L, LAH_BUDGET_MT);
    ah_budget_new((int64_t)limit, &u->b, NULL, 0);
    if (!u->b)
        luaL_error(L, "out of memory");
    return u;
}

/* ah.budget(n): n executions of tool bodies (0 = none may run). */
static int l_budget_new(lua_State *L)
{
    lah_budget_push_new(L, lah_check_whole(L, 1, "ah.budget(n)", "n", 0, LUA_MAXINTEGER));
    return 1;
}

static int l_budget_gc(lua_State *L)
{
    lah_budget_ud *u = luaL_checkudata(L, 1, LAH_BUDGET_MT);
    ah_budget_free(u->b);
    u->b = NULL;
    return 0;
}

static int l_budget_index(lua_State *L)
{
    lah_budget_ud *u = luaL_checkudata(L, 1, LAH_BUDGET_MT);
    const char *k = luaL_checkstring(L, 2);
    if (!u->b)
        lua_pushnil(L);
    else if (strcmp(k, "limit") == 0)
        lua_pushinteger(L, (lua_Integer)ah_budget_limit(u->b));
    else if (strcmp(k, "used") == 0)
        lua_pushinteger(L, (lua_Integer)ah_budget_used(u->b));
    else if (strcmp(k, "remaining") == 0)
        lua_pushinteger(L, (lua_Integer)ah_budget_remaining(u->b));
    else if (strcmp(k, "refused") == 0)
        lua_pushinteger(L, (lua_Integer)ah_budget_refused(u->b));
    else
        lua_pushnil(L);
    return 1;
}

static int l_budget_tostring(lua_State *L)
{
    lah_budget_ud *u = luaL_checkudata(L, 1, LAH_BUDGET_MT);
    lua_pushfstring(L, "ah.budget (%I of %I used)", (lua_Integer)ah_budget_used(u->b),
                    (lua_Integer)ah_budget_limit(u->b));
    return 1;
}

/* ---- registration -------------------------------------------------------------------
 */

void lah_open_ledger_budget(lua_State *L)
{
    static const luaL_Reg ledger_methods[] = {
        {"entries", l_ledger_entries},
        {"count", l_ledger_count},
        {NULL, NULL},
    };
    /* one upvalue: close() refuses a busy ledger (true); __gc / __close do not ask */
    static const luaL_Reg ledger_close[] = {{"close", l_ledger_close}, {NULL, NULL}};
    static const luaL_Reg ledger_finalizers[] = {
        {"__gc", l_ledger_close}, {"__close", l_ledger_close}, {NULL, NULL}};
    /* __len is lua/waits.lua's (ledger:count(), which may wait for Redis) */
    static const luaL_Reg ledger_meta[] = {
        {"__index", l_ledger_index}, {"__tostring", l_ledger_tostring}, {NULL, NULL}};
    luaL_newmetatable(L, LAH_LEDGER_MT);
    luaL_newlib(L, ledger_methods);
    lua_pushboolean(L, 1);
    luaL_setfuncs(L, ledger_close, 1);
    lah_push_private(L);
    lua_pushvalue(L, -2);
    lua_setfield(L, -2, "ledger_methods");
    lua_pushvalue(L, -3);
    lua_setfield(L, -2, "ledger_mt");
    lua_pop(L, 1);
    lua_setfield(L, -2, "methods");
    lua_pushboolean(L, 0);
    luaL_setfuncs(L, ledger_finalizers, 1);
    luaL_setfuncs(L, ledger_meta, 0);
    lua_pop(L, 1);

    static const luaL_Reg budget_meta[] = {{"__gc", l_budget_gc},
                                           {"__index", l_budget_index},
                                           {"__tostring", l_budget_tostring},
                                           {NULL, NULL}};
    lah_register_class(L, LAH_BUDGET_MT, budget_meta);

    static const luaL_Reg fns[] = {
        {"ledger", l_ledger_new}, {"budget", l_budget_new}, {NULL, NULL}};
    luaL_setfuncs(L, fns, 0);
}
