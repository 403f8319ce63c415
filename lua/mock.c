/* mock.c - ah.mock{ plan = {...} | plan_json = "...", text =, text_deltas =,
 * delta_bytes =, port = }: the built-in mock provider in-process (docs/mock.md), as an
 * "agenthost.mock" userdata: m.url, m.port, m:requests(), m:set_plan(plan), m:close().
 *
 * Invariants: __gc, __close and m:close() share one idempotent close; after it, m.url
 * is nil and m:requests() raises. The mock serves from its own threads, so the Lua
 * thread can talk to it through the loop.
 */
#include "lah.h"

#include <string.h>

#ifdef AH_NO_MOCK
/* Built without the mock provider (AH_WITH_MOCK=OFF, no libmicrohttpd): ah.mock says so. */
static int l_mock_missing(lua_State *L)
{
    return luaL_error(L, "ah.mock: agenthost was built without the mock provider "
                         "(AH_WITH_MOCK=OFF)");
}

void lah_open_mock(lua_State *L)
{
    lua_pushcfunction(L, l_mock_missing);
    lua_setfield(L, -2, "mock");
}
#else
#include "agenthost/mock.h"

#define MOCK_MT "agenthost.mock"

typedef struct lmock {
    ah_mock *m;
} lmock;

static lmock *check_mock(lua_State *L, int idx)
{
    return luaL_checkudata(L, idx, MOCK_MT);
}

static int mock_close(lua_State *L)
{
    lmock *lm = check_mock(L, 1);
    ah_mock_free(lm->m);
    lm->m = NULL;
    return 0;
}

/* Push the plan at idx as JSON text: a table (a list of steps, or {steps=, then=}) is
 * encoded; a string is taken as JSON. An empty table means no plan (nil pushed). */
static void push_plan_json(lua_State *L, int idx, const char *where)
{
    idx = lua_absindex(L, idx);
    if (lua_type(L, idx) == LUA_TSTRING) {
        lua_pushvalue(L, idx);
        return;
    }
    if (!lua_istable(L, idx))
        luaL_error(L, "%s: plan must be a table (or JSON text), got %s", where,
                   luaL_typename(L, idx));
    lua_pushnil(L);
    if (!lua_next(L, idx)) {
        lua_pushnil(L);
        return;
    }
    lua_pop(L, 2);
    if (!lah_json_encode(L, idx))
        luaL_error(L, "%s: plan: %s", where, lua_tostring(L, -1));
}

static int l_mock(lua_State *L)
{
    static const char *const known[] = {"plan",        "plan_json", "text",     "text_deltas",
                                        "delta_bytes", "port",      "tls_cert", "tls_key",
                                        NULL};
    const char *where = "ah.mock";
    ah_mock_config cfg;
    ah_mock_config_init(&cfg);
    if (!lua_isnoneornil(L, 1)) {
        luaL_checktype(L, 1, LUA_TTABLE);
        lah_check_fields(L, 1, where, known);
        lua_getfield(L, 1, "plan");
        lua_getfield(L, 1, "plan_json");
        if (!lua_isnil(L, -2) && !lua_isnil(L, -1))
            return luaL_error(L, "%s: give plan or plan_json, not both", where);
        if (!lua_isnil(L, -2)) {
            push_plan_json(L, -2, where);
            cfg.plan_json = lua_tostring(L, -1); /* stays on the stack */
        } else if (!lua_isnil(L, -1)) {
            if (lua_type(L, -1) != LUA_TSTRING)
                return luaL_error(L, "%s: plan_json must be a string", where);
            cfg.plan_json = lua_tostring(L, -1);
        }
        if (lua_getfield(L, 1, "text") != LUA_TNIL) {
            if (lua_type(L, -1) != LUA_TSTRING)
                return luaL_error(L, "%s: text must be a string", where);
            cfg.text = lua_tostring(L, -1);
        }
        /* HTTPS: PEM files of the certificate and key (kept alive by the table) */
        const char *tls[] = {"tls_cert", "tls_key"};
        for (int i = 0; i < 2; i++) {
            lua_getfield(L, 1, tls[i]);
            if (!lua_isnil(L, -1) && lua_type(L, -1) != LUA_TSTRING)
                return luaL_error(L, "%s: %s must be a file name (a string)", where, tls[i]);
            if (i == 0)
                cfg.tls_cert = lua_tostring(L, -1);
            else
                cfg.tls_key = lua_tostring(L, -1);
            lua_pop(L, 1);
        }
        const char *counts[] = {"text_deltas", "delta_bytes", "port"};
        for (int i = 0; i < 3; i++) {
            if (lua_getfield(L, 1, counts[i]) == LUA_TNIL) {
                lua_pop(L, 1);
                continue;
            }
            lua_Integer v = lah_check_whole(L, -1, where, counts[i], 0,
                                            i == 2 ? 65535 : LUA_MAXINTEGER);
            lua_pop(L, 1);
            if (i == 0)
                cfg.text_deltas = (size_t)v;
            else if (i == 1)
                cfg.delta_bytes = (size_t)v;
            else
                cfg.port = (int)v;
        }
    }
    lmock *lm = lua_newuserdatauv(L, sizeof *lm, 0);
    lm->m = NULL;
    luaL_setmetatable(L, MOCK_MT);
    char err[512];
    ah_mock_new(&cfg, &lm->m, err, sizeof err);
    if (!lm->m)
        return luaL_error(L, "%s: %s", where, err);
    return 1;
}

static int mock_requests(lua_State *L)
{
    lmock *lm = check_mock(L, 1);
    if (!lm->m)
        return luaL_error(L, "mock:requests(): the mock is closed");
    size_t n = ah_mock_request_count(lm->m);
    lua_createtable(L, (int)n, 0);
    for (size_t i = 0; i < n; i++) {
        ah_mock_request r;
        if (ah_mock_request_get(lm->m, i, &r) != AH_OK)
            break;
        lua_createtable(L, 0, 10);
        lua_pushstring(L, r.method);
        lua_setfield(L, -2, "method");
        lua_pushstring(L, r.path);
        lua_setfield(L, -2, "path");
        if (r.wire >= 0) {
            lua_pushstring(L, ah_wire_name((ah_wire)r.wire));
            lua_setfield(L, -2, "wire");
        }
        lua_pushboolean(L, r.stream);
        lua_setfield(L, -2, "stream");
        lua_pushstring(L, r.step);
        lua_setfield(L, -2, "step");
        lua_pushinteger(L, (lua_Integer)r.step_index);
        lua_setfield(L, -2, "step_index");
        lua_pushinteger(L, r.status);
        lua_setfield(L, -2, "status");
        lua_pushinteger(L, (lua_Integer)r.restated);
        lua_setfield(L, -2, "restated");
        lua_pushlstring(L, r.body ? r.body : "", r.body ? r.body_len : 0);
        lua_setfield(L, -2, "body");
        lua_createtable(L, 0, (int)r.header_count);
        for (size_t h = 0; h < r.header_count; h++) {
            /* lower-case names; a repeated header keeps its last value */
            char name[128];
            size_t k = 0;
            for (; r.headers[h].name[k] && k + 1 < sizeof name; k++) {
                char c = r.headers[h].name[k];
                name[k] = (char)(c >= 'A' && c <= 'Z' ? c + 32 : c);
            }
            name[k] = '\0';
            lua_pushstring(L, r.headers[h].value);
            lua_setfield(L, -2, name);
        }
        lua_setfield(L, -2, "headers");
        lua_createtable(L, 0, (int)r.query_count); /* a repeated name: its last value */
        for (size_t q = 0; q < r.query_count; q++) {
            lua_pushstring(L, r.query[q].value);
            lua_setfield(L, -2, r.query[q].name);
        }
        lua_setfield(L, -2, "query");
        lua_rawseti(L, -2, (lua_Integer)i + 1);
    }
    return 1;
}

static int mock_set_plan(lua_State *L)
{
    lmock *lm = check_mock(L, 1);
    if (!lm->m)
        return luaL_error(L, "mock:set_plan(): the mock is closed");
    const char *plan = NULL;
    if (!lua_isnoneornil(L, 2)) {
        push_plan_json(L, 2, "mock:set_plan()");
        plan = lua_tostring(L, -1);
    }
    char err[512];
    if (ah_mock_set_plan(lm->m, plan, err, sizeof err) != AH_OK)
        return luaL_error(L, "mock:set_plan(): %s", err);
    return 0;
}

static int mock_index(lua_State *L)
{
    lmock *lm = check_mock(L, 1);
    const char *k = luaL_checkstring(L, 2);
    if (strcmp(k, "url") == 0) {
        if (lm->m)
            lua_pushstring(L, ah_mock_url(lm->m));
        else
            lua_pushnil(L);
        return 1;
    }
    if (strcmp(k, "port") == 0) {
        if (lm->m)
            lua_pushinteger(L, ah_mock_port(lm->m));
        else
            lua_pushnil(L);
        return 1;
    }
    luaL_getmetatable(L, MOCK_MT);
    lua_getfield(L, -1, "methods");
    lua_getfield(L, -1, k);
    return 1;
}

static int mock_tostring(lua_State *L)
{
    lmock *lm = check_mock(L, 1);
    if (lm->m)
        lua_pushfstring(L, "agenthost.mock (%s)", ah_mock_url(lm->m));
    else
        lua_pushliteral(L, "agenthost.mock (closed)");
    return 1;
}

void lah_open_mock(lua_State *L)
{
    static const luaL_Reg methods[] = {{"requests", mock_requests},
                                       {"set_plan", mock_set_plan},
                                       {"close", mock_close},
                                       {NULL, NULL}};
    static const luaL_Reg meta[] = {{"__gc", mock_close},
                                    {"__close", mock_close},
                                    {"__index", mock_index},
                                    {"__tostring", mock_tostring},
                                    {NULL, NULL}};
    static const luaL_Reg fns[] = {{"mock", l_mock}, {NULL, NULL}};
    lah_register_class(L, MOCK_MT, meta);
    luaL_getmetatable(L, MOCK_MT);
    luaL_newlib(L, methods);
    lua_setfield(L, -2, "methods");
    lua_pop(L, 1);
    luaL_setfuncs(L, fns, 0);
}
#endif /* AH_NO_MOCK */
