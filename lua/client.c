/* client.c - ah.client{ provider, model, base_url, api_key, max_tokens, extra,
 * continuation, background, ca_file, ca_path, headers, query, cache, cache_ttl,
 * prompt_cache_key }: where and how to reach a
 * provider, as an "agenthost.client" userdata owning an ah_client.
 *
 * Invariants: the API key is copied into the ah_client and never exposed back to Lua
 * (client.api_key is not readable; client.url and tostring mask what base_url holds of
 * secrets); every config field is checked, unknown ones named.
 */
#include "lah.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CLIENT_MT "agenthost.client"

typedef struct lclient {
    ah_client *c;
    ah_rate_limit *rl; /* borrowed: the ah.rate_limit is uservalue 1 */
} lclient;

ah_rate_limit *lah_client_rate_limit(lua_State *L, int idx)
{
    lclient *lc = luaL_testudata(L, idx, CLIENT_MT);
    return lc ? lc->rl : NULL;
}

ah_client *lah_check_client(lua_State *L, int idx);

ah_client *lah_check_client(lua_State *L, int idx)
{
    lclient *lc = luaL_testudata(L, idx, CLIENT_MT);
    if (!lc || !lc->c)
        return NULL;
    return lc->c;
}

static int client_gc(lua_State *L)
{
    lclient *lc = luaL_checkudata(L, 1, CLIENT_MT);
    ah_client_free(lc->c);
    lc->c = NULL;
    return 0;
}

static int client_index(lua_State *L)
{
    lclient *lc = luaL_checkudata(L, 1, CLIENT_MT);
    const char *k = luaL_checkstring(L, 2);
    if (strcmp(k, "provider") == 0)
        lua_pushstring(L, ah_wire_name(ah_client_wire(lc->c)));
    else if (strcmp(k, "url") == 0) /* secrets in base_url masked */
        lua_pushstring(L, ah_client_display_url(lc->c));
    else if (strcmp(k, "continuation") == 0)
        lua_pushstring(L, ah_continuation_name(ah_client_continuation(lc->c)));
    else if (strcmp(k, "rung") == 0) /* what the next continuation takes */
        lua_pushstring(L, ah_cont_mode_name(ah_client_rung(lc->c)));
    else
        lua_pushnil(L);
    return 1;
}

static int client_tostring(lua_State *L)
{
    lclient *lc = luaL_checkudata(L, 1, CLIENT_MT);
    lua_pushfstring(L, "agenthost.client (%s, %s)", ah_wire_name(ah_client_wire(lc->c)),
                    ah_client_display_url(lc->c));
    return 1;
}

static const char *opt_string(lua_State *L, int t, const char *field, const char *where)
{
    int ty = lua_getfield(L, t, field);
    if (ty == LUA_TNIL) {
        lua_pop(L, 1);
        return NULL;
    }
    if (ty != LUA_TSTRING)
        luaL_error(L, "%s: %s must be a string, got %s", where, field,
                   luaL_typename(L, -1));
    const char *s = lua_tostring(L, -1);
    lua_pop(L, 1); /* the table keeps the string alive */
    return s;
}

static int by_name(const void *a, const void *b)
{
    return strcmp(((const ah_header *)a)->name, ((const ah_header *)b)->name);
}

/* headers = { name = value }, query = { name = value }: the table at t's field as
 * name/value pairs, sorted by name, in a userdata left on the stack with the table (the
 * strings stay alive in it) until l_client returns. */
static const ah_header *opt_pairs(lua_State *L, int t, const char *field, const char *where,
                                  size_t *n_out)
{
    *n_out = 0;
    int ty = lua_getfield(L, t, field);
    if (ty == LUA_TNIL) {
        lua_pop(L, 1);
        return NULL;
    }
    if (ty != LUA_TTABLE)
        luaL_error(L, "%s: %s must be a table of name = value strings, got %s", where,
                   field, luaL_typename(L, -1));
    int tab = lua_gettop(L);
    size_t n = 0;
    for (lua_pushnil(L); lua_next(L, tab); lua_pop(L, 1))
        n++;
    ah_header *h = lua_newuserdatauv(L, (n ? n : 1) * sizeof *h, 0);
    size_t i = 0;
    for (lua_pushnil(L); lua_next(L, tab); lua_pop(L, 1)) {
        size_t kl = 0, vl = 0;
        if (lua_type(L, -2) != LUA_TSTRING)
            luaL_error(L, "%s: %s: every name must be a string, got %s", where, field,
                       luaL_typename(L, -2));
        const char *k = lua_tolstring(L, -2, &kl);
        if (lua_type(L, -1) != LUA_TSTRING)
            luaL_error(L, "%s: %s['%s'] must be a string, got %s", where, field, k,
                       luaL_typename(L, -1));
        const char *v = lua_tolstring(L, -1, &vl);
        if (strlen(k) != kl || strlen(v) != vl)
            luaL_error(L, "%s: %s['%s'] holds a NUL byte", where, field, k);
        h[i].name = k;
        h[i].value = v;
        i++;
    }
    /* in name order, not the table's: the same request for the same table, every time */
    qsort(h, n, sizeof *h, by_name);
    /* the userdata above the table, both kept on the stack until the client is built */
    *n_out = n;
    return h;
}

/* The provider names, NULL-terminated, and "a, b or c" for messages: from the wire
 * registry, so a new provider needs nothing here. */
static void provider_names(const char *names[AH_WIRE_COUNT_ + 1], char *list, size_t size)
{
    size_t o = 0;
    list[0] = '\0';
    for (int w = 0; w < AH_WIRE_COUNT_; w++) {
        names[w] = ah_wire_name((ah_wire)w);
        const char *sep = w == 0 ? "" : w == AH_WIRE_COUNT_ - 1 ? " or " : ", ";
        int n = snprintf(list + o, size - o, "%s%s", sep, names[w]);
        if (n > 0 && (size_t)n < size - o)
            o += (size_t)n;
    }
    names[AH_WIRE_COUNT_] = NULL;
}

static int l_client(lua_State *L)
{
    static const char *const known[] = {"provider",     "model",      "base_url",
                                        "api_key",      "max_tokens", "extra",
                                        "continuation", "background", "rate_limit",
                                        "ca_file",      "ca_path",    "headers",
                                        "query",        "cache",      "cache_ttl",
                                        "prompt_cache_key", NULL};
    static const char *const settings[] = {"auto", "prefill", "prompt", NULL};
    const char *providers[AH_WIRE_COUNT_ + 1];
    char plist[256];
    provider_names(providers, plist, sizeof plist);
    const char *where = "ah.client";
    luaL_checktype(L, 1, LUA_TTABLE);
    lah_check_fields(L, 1, where, known);
    ah_client_config cfg;
    memset(&cfg, 0, sizeof cfg);
    const char *provider = opt_string(L, 1, "provider", where);
    if (!provider)
        return luaL_error(L, "%s: provider is required (%s)", where, plist);
    int wire = ah_wire_from_name(provider);
    if (wire < 0) {
        const char *hint = lah_did_you_mean(provider, providers);
        if (hint)
            return luaL_error(L, "%s: unknown provider '%s' (did you mean '%s'?)", where,
                              provider, hint);
        return luaL_error(L, "%s: unknown provider '%s' (%s)", where, provider, plist);
    }
    cfg.wire = (ah_wire)wire;
    cfg.model = opt_string(L, 1, "model", where);
    cfg.base_url = opt_string(L, 1, "base_url", where); /* nil: the public API */
    cfg.api_key = opt_string(L, 1, "api_key", where);   /* nil: the provider's variable */
    cfg.headers = opt_pairs(L, 1, "headers", where, &cfg.n_headers);
    cfg.query = opt_pairs(L, 1, "query", where, &cfg.n_query);
    cfg.ca_file = opt_string(L, 1, "ca_file", where); /* TLS trust for a private CA */
    cfg.ca_path = opt_string(L, 1, "ca_path", where);
    if (lua_getfield(L, 1, "max_tokens") != LUA_TNIL) {
        cfg.max_tokens =
            (int64_t)lah_check_whole(L, -1, where, "max_tokens", 1, LUA_MAXINTEGER);
    }
    lua_pop(L, 1);
    const char *cont = opt_string(L, 1, "continuation", where);
    if (cont) {
        int c = ah_continuation_from_name(cont);
        if (c < 0) {
            const char *hint = lah_did_you_mean(cont, settings);
            if (hint)
                return luaL_error(L, "%s: unknown continuation '%s' (did you mean '%s'?)",
                                  where, cont, hint);
            return luaL_error(L, "%s: unknown continuation '%s' (auto, prefill or prompt)",
                              where, cont);
        }
        cfg.continuation = (ah_continuation)c;
    }
    /* prompt caching: "auto" (the default) or false */
    int ct = lua_getfield(L, 1, "cache");
    if (ct == LUA_TBOOLEAN && !lua_toboolean(L, -1))
        cfg.cache = AH_CACHE_OFF;
    else if (!(ct == LUA_TNIL || (ct == LUA_TSTRING && strcmp(lua_tostring(L, -1), "auto") == 0)))
        return luaL_error(L, "%s: cache must be \"auto\" or false, got %s%s%s", where,
                          ct == LUA_TSTRING ? "'" : "",
                          ct == LUA_TSTRING ? lua_tostring(L, -1) : luaL_typename(L, -1),
                          ct == LUA_TSTRING ? "'" : "");
    lua_pop(L, 1);
    cfg.cache_ttl = opt_string(L, 1, "cache_ttl", where);
    cfg.prompt_cache_key = opt_string(L, 1, "prompt_cache_key", where);
    int bt = lua_getfield(L, 1, "background");
    if (bt == LUA_TBOOLEAN)
        cfg.background = lua_toboolean(L, -1);
    else if (bt != LUA_TNIL)
        return luaL_error(L, "%s: background must be a boolean (true or false), got %s",
                          where, luaL_typename(L, -1));
    lua_pop(L, 1);
    int ty = lua_getfield(L, 1, "extra");
    if (ty == LUA_TTABLE) {
        if (!lah_json_encode(L, -1))
            return luaL_error(L, "%s: extra: %s", where, lua_tostring(L, -1));
        cfg.extra_json = lua_tostring(L, -1); /* kept on the stack until the copy */
    } else if (ty == LUA_TSTRING) {
        cfg.extra_json = lua_tostring(L, -1);
    } else if (ty != LUA_TNIL) {
        return luaL_error(L, "%s: extra must be a table (or JSON text), got %s", where,
                          luaL_typename(L, -1));
    }
    ty = lua_getfield(L, 1, "rate_limit");
    ah_rate_limit *rl = lah_check_rate_limit(L, -1);
    if (ty != LUA_TNIL && !rl)
        return luaL_error(L, "%s: rate_limit must be an ah.rate_limit{...}, got %s", where,
                          luaL_typename(L, -1));
    lclient *lc = lua_newuserdatauv(L, sizeof *lc, 1);
    lc->c = NULL;
    lc->rl = rl;
    luaL_setmetatable(L, CLIENT_MT);
    lua_pushvalue(L, -2);
    lua_setiuservalue(L, -2, 1);
    char err[256];
    ah_client_new(&cfg, &lc->c, err, sizeof err);
    if (!lc->c) {
        const char *msg = strncmp(err, "client.", 7) == 0 ? err + 7 : err;
        return luaL_error(L, "%s: %s", where, msg);
    }
    return 1;
}

void lah_open_client(lua_State *L)
{
    static const luaL_Reg meta[] = {{"__gc", client_gc},
                                    {"__index", client_index},
                                    {"__tostring", client_tostring},
                                    {NULL, NULL}};
    static const luaL_Reg fns[] = {{"client", l_client}, {NULL, NULL}};
    lah_register_class(L, CLIENT_MT, meta);
    luaL_setfuncs(L, fns, 0);
}
