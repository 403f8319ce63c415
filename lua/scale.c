/* scale.c - what many hosts share: ah.rate_limit{...} (pacing, local or on Redis) and the
 * Redis connections the binding opens for it, for ah.retry_budget{ redis = ... } and for
 * ah.ledger{ redis = ... } (docs/scale-out.md).
 *
 * Invariants: a connection belongs to the object that opened it and is freed after that
 * object's core half (budget, pacer, ledger), on the state's one loop; a URL's password
 * never appears in an error message (ah_redis_url_parse names the part, not the value).
 */
#include "lah.h"
#include "tools.h"

#include <string.h>

#define RL_MT "agenthost.rate_limit"

typedef struct lrl {
    ah_rate_limit *rl;
    ah_redis *r;
} lrl;

ah_redis *lah_redis_open(lua_State *L, const char *url, const char *where)
{
    char err[300];
    ah_redis *r = NULL;
    ah_redis_new(lah_loop(L), url, NULL, &r, err, sizeof err);
    if (!r)
        luaL_error(L, "%s: redis: %s", where, err);
    return r;
}

ah_rate_limit *lah_check_rate_limit(lua_State *L, int idx)
{
    lrl *b = luaL_testudata(L, idx, RL_MT);
    return b ? b->rl : NULL;
}

static int rl_gc(lua_State *L)
{
    lrl *b = luaL_checkudata(L, 1, RL_MT);
    ah_rate_limit_free(b->rl);
    ah_redis_free(b->r);
    b->rl = NULL;
    b->r = NULL;
    return 0;
}

static int rl_tostring(lua_State *L)
{
    lrl *b = luaL_checkudata(L, 1, RL_MT);
    lua_pushfstring(L, "agenthost.rate_limit (%s)", b->r ? ah_redis_name(b->r) : "local");
    return 1;
}

static double opt_rate(lua_State *L, const char *field, const char *where)
{
    int ty = lua_getfield(L, 1, field);
    double v = 0;
    if (ty == LUA_TNUMBER)
        v = lua_tonumber(L, -1);
    else if (ty != LUA_TNIL)
        luaL_error(L, "%s: %s must be a number, got %s", where, field, luaL_typename(L, -1));
    lua_pop(L, 1);
    return v;
}

/* ah.rate_limit{ redis = "redis://..." or nil, key = "...", requests_per_minute = N,
 * tokens_per_minute = M, burst = B, follow_headers = true } */
static int l_rate_limit(lua_State *L)
{
    static const char *const known[] = {"redis",      "key",           "requests_per_minute",
                                        "tokens_per_minute", "burst", "follow_headers",
                                        NULL};
    const char *where = "ah.rate_limit";
    luaL_checktype(L, 1, LUA_TTABLE);
    lua_settop(L, 1);
    lah_check_fields(L, 1, where, known);
    ah_rate_limit_config cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.requests_per_minute = opt_rate(L, "requests_per_minute", where);
    cfg.tokens_per_minute = opt_rate(L, "tokens_per_minute", where);
    if (lua_getfield(L, 1, "burst") != LUA_TNIL) {
        if (!lua_isinteger(L, -1) || lua_tointeger(L, -1) < 1 ||
            lua_tointeger(L, -1) > 1000000)
            return luaL_error(L, "%s: burst must be a whole number 1..1000000", where);
        cfg.burst = (int)lua_tointeger(L, -1);
    }
    int ty = lua_getfield(L, 1, "follow_headers");
    if (ty == LUA_TBOOLEAN)
        cfg.ignore_headers = !lua_toboolean(L, -1);
    else if (ty != LUA_TNIL)
        return luaL_error(L, "%s: follow_headers must be a boolean", where);
    ty = lua_getfield(L, 1, "key");
    if (ty == LUA_TSTRING)
        cfg.key = lua_tostring(L, -1);
    else if (ty != LUA_TNIL)
        return luaL_error(L, "%s: key must be a string", where);
    ty = lua_getfield(L, 1, "redis");
    if (ty != LUA_TNIL && ty != LUA_TSTRING)
        return luaL_error(L, "%s: redis must be a URL string (redis://host:port/db)", where);
    const char *url = lua_tostring(L, -1);
    lrl *b = lua_newuserdatauv(L, sizeof *b, 0);
    b->rl = NULL;
    b->r = NULL;
    luaL_setmetatable(L, RL_MT);
    char err[256];
    if (url && (!cfg.key || !*cfg.key))
        return luaL_error(L, "%s: key is required with redis (every process that shares "
                          "the limit names the same key)", where);
    if (!url) {
        ah_rate_limit_new(&cfg, NULL, &b->rl, err, sizeof err);
    } else {
        /* Check the config before connecting, so a bad field does not open a socket. */
        ah_rate_limit *probe = NULL;
        ah_rate_limit_new(&cfg, NULL, &probe, err, sizeof err);
        if (probe) {
            ah_rate_limit_free(probe);
            b->r = lah_redis_open(L, url, where);
            ah_rate_limit_new(&cfg, b->r, &b->rl, err, sizeof err);
        }
    }
    if (!b->rl)
        return luaL_error(L, "%s: %s", where,
                          strncmp(err, "rate_limit.", 11) == 0 ? err + 11 : err);
    return 1;
}

/* ---- the Redis ledger ---------------------------------------------------------------- */

static lua_Integer opt_whole(lua_State *L, int t, const char *field, lua_Integer dflt,
                             lua_Integer min)
{
    lua_Integer v = dflt;
    if (lua_getfield(L, t, field) != LUA_TNIL) {
        if (!lua_isinteger(L, -1) || lua_tointeger(L, -1) < min)
            luaL_error(L, "ah.ledger: %s must be a whole number >= %d (got %s)", field,
                       (int)min, luaL_tolstring(L, -1, NULL));
        v = lua_tointeger(L, -1);
    }
    lua_pop(L, 1);
    return v;
}

int lah_ledger_push_redis(lua_State *L, int idx)
{
    idx = lua_absindex(L, idx);
    ah_ledger_redis_config cfg;
    ah_ledger_redis_config_init(&cfg);
    if (lua_getfield(L, idx, "redis") != LUA_TSTRING)
        return luaL_error(L, "ah.ledger: redis must be a URL string (redis://host:port/db)");
    cfg.url = lua_tostring(L, -1);
    if (lua_getfield(L, idx, "path") != LUA_TNIL)
        return luaL_error(L, "ah.ledger: path and redis exclude each other");
    int ty = lua_getfield(L, idx, "prefix");
    if (ty == LUA_TSTRING)
        cfg.prefix = lua_tostring(L, -1);
    else if (ty != LUA_TNIL)
        return luaL_error(L, "ah.ledger: prefix must be a string");
    cfg.ttl_s = (int64_t)opt_whole(L, idx, "ttl_s", cfg.ttl_s, 0);
    cfg.lease_ms = (int64_t)opt_whole(L, idx, "lease_ms", cfg.lease_ms, 1);
    lah_ledger_ud *u = lua_newuserdatauv(L, sizeof *u, 0);
    memset(u, 0, sizeof *u);
    luaL_setmetatable(L, LAH_LEDGER_MT);
    char err[300];
    ah_ledger_new_redis(lah_loop(L), &cfg, &u->l, err, sizeof err);
    if (!u->l)
        return luaL_error(L, "ah.ledger: %s", err);
    return 1;
}

typedef struct refresh_box {
    lah_wait wait; /* first: lua/waits.lua waits on the box */
    ah_status st;
    int ref; /* anchors the box until its answer came (the callback writes into it) */
    ah_ledger *l;
} refresh_box;

static void refresh_done(void *ud, ah_status st)
{
    refresh_box *b = ud;
    b->st = st;
    b->wait.ready = 1;
}

/* ledger_refresh(ledger) -> box (waitable) for a Redis ledger, whose listing is a
 * snapshot fetched on the loop first; nothing for any other ledger. */
static int p_ledger_refresh(lua_State *L)
{
    lah_ledger_ud *u = luaL_checkudata(L, 1, LAH_LEDGER_MT);
    if (!u->l || !ah_ledger_is_redis(u->l))
        return 0;
    refresh_box *b = lua_newuserdatauv(L, sizeof *b, 0);
    memset(b, 0, sizeof *b);
    b->l = u->l;
    b->ref = LUA_NOREF;
    ah_redis_req *q = NULL;
    b->st = ah_ledger_redis_refresh(u->l, refresh_done, b, &q);
    if (b->st != AH_OK) {
        b->wait.ready = 1;
    } else {
        lua_pushvalue(L, -1);
        b->ref = luaL_ref(L, LUA_REGISTRYINDEX);
    }
    return 1;
}

/* ledger_refreshed(box, what): after the wait; raises "<what>: <why>" when Redis could
 * not answer */
static int p_ledger_refreshed(lua_State *L)
{
    refresh_box *b = lua_touserdata(L, 1);
    const char *what = luaL_checkstring(L, 2);
    if (b->ref != LUA_NOREF)
        luaL_unref(L, LUA_REGISTRYINDEX, b->ref);
    b->ref = LUA_NOREF;
    if (b->st != AH_OK)
        return luaL_error(L, "%s: %s", what, ah_ledger_errmsg(b->l));
    return 0;
}

void lah_open_scale(lua_State *L)
{
    static const luaL_Reg meta[] = {
        {"__gc", rl_gc}, {"__tostring", rl_tostring}, {NULL, NULL}};
    static const luaL_Reg fns[] = {{"rate_limit", l_rate_limit}, {NULL, NULL}};
    static const luaL_Reg priv[] = {{"ledger_refresh", p_ledger_refresh},
                                    {"ledger_refreshed", p_ledger_refreshed},
                                    {NULL, NULL}};
    lah_register_class(L, RL_MT, meta);
    luaL_setfuncs(L, fns, 0);
    lah_private_funcs(L, priv);
}
