/* scale.c - what many hosts share: ah.rate_limit{...} (pacing, local or on Redis) and the
 * Redis connections the binding opens for it, for ah.retry_budget{ redis = ... } and for
 * ah.ledger{ redis = ... } (docs/scale-out.md).
 *
 * Invariants: a connection belongs to the object that opened it and is freed after that
 * object's core half (budget, pacer, ledger), on the state's one loop; a URL's password
 * never appears in an error message (ah_redis_url_parse names the part, not the value).
 */
#include "lah.h"

#include <string.h>

#define RL_MT "agenthost.rate_limit"

typedef struct lrl {
    ah_rate_limit *rl;
    ah_redis *r;
} lrl;

ah_redis *lah_redis_open(lua_State *L, const char *url, const char *where)
{
    char err[300];
    ah_redis *r = ah_redis_new(lah_loop(L), url, NULL, err, sizeof err);
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
 * tokens_per_minute = M, burst = B } */
static int l_rate_limit(lua_State *L)
{
    static const char *const known[] = {"redis", "key", "requests_per_minute",
                                        "tokens_per_minute", "burst", NULL};
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
    int ty = lua_getfield(L, 1, "key");
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
        b->rl = ah_rate_limit_new(&cfg, NULL, err, sizeof err);
    } else {
        /* Check the config before connecting, so a bad field does not open a socket. */
        ah_rate_limit *probe = ah_rate_limit_new(&cfg, NULL, err, sizeof err);
        if (probe) {
            ah_rate_limit_free(probe);
            b->r = lah_redis_open(L, url, where);
            b->rl = ah_rate_limit_new(&cfg, b->r, err, sizeof err);
        }
    }
    if (!b->rl)
        return luaL_error(L, "%s: %s", where,
                          strncmp(err, "rate_limit.", 11) == 0 ? err + 11 : err);
    return 1;
}

void lah_open_scale(lua_State *L)
{
    luaL_newmetatable(L, RL_MT);
    lua_pushcfunction(L, rl_gc);
    lua_setfield(L, -2, "__gc");
    lua_pushcfunction(L, rl_tostring);
    lua_setfield(L, -2, "__tostring");
    lua_pop(L, 1);
    lua_pushcfunction(L, l_rate_limit);
    lua_setfield(L, -2, "rate_limit");
}
