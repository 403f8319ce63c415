/* util.c - helpers shared by the binding's files: JSON (the binding's own canonical
 * encoder and exact decoder, lua/tools_json.c: the module needs no Lua JSON library),
 * config-table checks with "did you mean" hints, policy tables, and error values (the
 * "agenthost.error" metatable).
 *
 * Invariants: the JSON helpers never raise for bad input (they return 0 with a message).
 */
#include "lah.h"
#include "tools.h"
#include "internal.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdint.h>
#include <string.h>

/* ---- registration ------------------------------------------------------------------ */

void lah_register_class(lua_State *L, const char *mt, const luaL_Reg *meta)
{
    luaL_newmetatable(L, mt);
    luaL_setfuncs(L, meta, 0);
    lua_pop(L, 1);
}

/* ---- JSON -------------------------------------------------------------------------- */

static int encode_protected(lua_State *L)
{
    lah_push_canonical_json(L, 1, 1);
    return 1;
}

int lah_json_encode(lua_State *L, int idx)
{
    idx = lua_absindex(L, idx);
    luaL_checkstack(L, 4, "json");
    lua_pushcfunction(L, encode_protected);
    lua_pushvalue(L, idx);
    if (lah_gate_protect_call(L, 1, 1) == LUA_OK)
        return 1;
    if (!lua_isstring(L, -1)) {
        lua_pop(L, 1);
        lua_pushliteral(L, "cannot encode the value as JSON");
    }
    return 0;
}

int lah_json_decode(lua_State *L, const char *s, size_t len)
{
    size_t at = 0;
    int trailing = 0;
    if (lah_json_push_exact(L, s, len, &at, &trailing))
        return 1;
    if (trailing)
        lua_pushfstring(L, "invalid JSON: unexpected text after the value at byte %d",
                        (int)at);
    else
        lua_pushfstring(L, "invalid JSON at byte %d", (int)at);
    return 0;
}

/* ---- config tables ----------------------------------------------------------------- */

const char *lah_did_you_mean(const char *name, const char *const *known)
{
    size_t n = 0;
    while (known[n])
        n++;
    return ah__did_you_mean(name, known, n, sizeof known[0]);
}

const char *lah_check_no_nul(lua_State *L, int idx, const char *what)
{
    size_t len = 0;
    const char *s = lua_tolstring(L, idx, &len);
    const char *nul = s ? memchr(s, '\0', len) : NULL;
    if (nul)
        luaL_error(L, "%s contains a NUL byte at offset %d (names and keys must be text "
                      "without NUL)",
                   what, (int)(nul - s));
    return s;
}

void lah_check_fields(lua_State *L, int idx, const char *where, const char *const *known)
{
    idx = lua_absindex(L, idx);
    lua_pushnil(L);
    while (lua_next(L, idx)) {
        lua_pop(L, 1);
        if (lua_type(L, -1) != LUA_TSTRING) {
            luaL_error(L, "%s: unexpected %s key (fields are named)", where,
                       luaL_typename(L, -1));
        }
        const char *k = lua_tostring(L, -1);
        int found = 0;
        for (size_t i = 0; known[i] && !found; i++)
            found = strcmp(k, known[i]) == 0;
        if (!found) {
            const char *hint = lah_did_you_mean(k, known);
            if (hint)
                luaL_error(L, "%s: unknown field '%s' (did you mean '%s'?)", where, k,
                           hint);
            luaL_error(L, "%s: unknown field '%s'", where, k);
        }
    }
}

int lah_policy_from_table(lua_State *L, int idx, const char *where, ah_policy *p)
{
    char err[256];
    int has_retry_on = 0;
    if (lua_isnoneornil(L, idx))
        return 0;
    idx = lua_absindex(L, idx);
    if (!lua_istable(L, idx))
        luaL_error(L, "%s: policy must be a table, got %s", where, luaL_typename(L, idx));
    lua_pushnil(L);
    while (lua_next(L, idx)) {
        if (lua_type(L, -2) != LUA_TSTRING)
            luaL_error(L, "%s: policy: unexpected %s key", where, luaL_typename(L, -2));
        const char *field = lua_tostring(L, -2);
        ah_status st = AH_OK;
        err[0] = '\0';
        if (strcmp(field, "retry_on") == 0) {
            if (!lua_isfunction(L, -1))
                luaL_error(L, "%s: policy.retry_on must be a function, got %s", where,
                           luaL_typename(L, -1));
            has_retry_on = 1;
        } else if (lua_type(L, -1) == LUA_TNUMBER) {
            lua_Integer v = 0; /* luaL_error does not return; gcc cannot know */
            if (!lah_to_whole(L, -1, &v))
                luaL_error(L, "%s: policy.%s must be a whole number (got %s)", where,
                           field, lua_tostring(L, -1));
            st = ah_policy_set_int(p, field, (int64_t)v, err, sizeof err);
        } else if (lua_type(L, -1) == LUA_TSTRING) {
            st = ah_policy_set_str(p, field, lua_tostring(L, -1), err, sizeof err);
        } else if (lua_type(L, -1) == LUA_TBOOLEAN && !lua_toboolean(L, -1)) {
            /* false: the field's "off" (continue_partial_text = false) */
            st = ah_policy_set_str(p, field, "false", err, sizeof err);
        } else if (ah_policy_is_field(field)) {
            luaL_error(L, "%s: policy.%s: expected a number or a string, got %s", where,
                       field, luaL_typename(L, -1));
        } else {
            st =
                ah_policy_set_int(p, field, 0, err, sizeof err); /* the unknown message */
        }
        if (st != AH_OK) {
            if (strncmp(err, "policy.", 7) == 0)
                luaL_error(L, "%s: %s", where, err);
            luaL_error(L, "%s: policy.%s: %s", where, field, err);
        }
        lua_pop(L, 1);
    }
    if (ah_policy_validate(p, err, sizeof err) != AH_OK)
        luaL_error(L, "%s: %s", where, err);
    if (has_retry_on)
        lua_getfield(L, idx, "retry_on");
    return has_retry_on;
}

/* ---- error values ------------------------------------------------------------------ */

#define ERROR_MT "agenthost.error"

static int error_tostring(lua_State *L)
{
    lua_getfield(L, 1, "message");
    if (!lua_isstring(L, -1)) {
        lua_getfield(L, 1, "kind");
        lua_pushfstring(L, "%s error",
                        lua_isstring(L, -1) ? lua_tostring(L, -1) : "unknown");
    }
    return 1;
}

static void push_error_mt(lua_State *L)
{
    static const luaL_Reg meta[] = {{"__tostring", error_tostring}, {NULL, NULL}};
    if (luaL_newmetatable(L, ERROR_MT)) {
        luaL_setfuncs(L, meta, 0);
        lua_pushliteral(L, "agenthost.error");
        lua_setfield(L, -2, "__name");
    }
}

void lah_push_error(lua_State *L, const ah_error *e)
{
    luaL_checkstack(L, 4, "error");
    lua_createtable(L, 0, 6);
    lua_pushstring(L, ah_error_kind_name(e->kind));
    lua_setfield(L, -2, "kind");
    if (e->status) {
        lua_pushinteger(L, e->status);
        lua_setfield(L, -2, "status");
    }
    if (e->retry_after_ms >= 0) {
        lua_pushinteger(L, (lua_Integer)e->retry_after_ms);
        lua_setfield(L, -2, "retry_after_ms");
    }
    if (e->provider_type[0]) {
        lua_pushstring(L, e->provider_type);
        lua_setfield(L, -2, "provider_type");
    }
    if (e->should_retry >= 0) {
        lua_pushboolean(L, e->should_retry);
        lua_setfield(L, -2, "should_retry");
    }
    if (e->category[0]) {
        lua_pushstring(L, e->category);
        lua_setfield(L, -2, "category");
    }
    lua_pushstring(L, e->message);
    lua_setfield(L, -2, "message");
    push_error_mt(L);
    lua_setmetatable(L, -2);
}

/* Push a value's tostring without raising (a failing __tostring gives its type name). */
static int tostring_fn(lua_State *L)
{
    luaL_tolstring(L, 1, NULL);
    return 1;
}

static void safe_tostring(lua_State *L, int idx)
{
    idx = lua_absindex(L, idx);
    lua_pushcfunction(L, tostring_fn);
    lua_pushvalue(L, idx);
    if (lah_gate_call(L, NULL, 1, 1, 0) != LUA_OK || !lua_isstring(L, -1)) {
        lua_pop(L, 1);
        lua_pushfstring(L, "(error object is a %s value)", luaL_typename(L, idx));
    }
}

void lah_to_error(lua_State *L, int idx, ah_error *e)
{
    idx = lua_absindex(L, idx);
    ah_error_clear(e);
    luaL_checkstack(L, 4, "error");
    if (!lua_istable(L, idx)) {
        safe_tostring(L, idx);
        ah_error_set(e, AH_EK_PERMANENT, 0, "%s", lua_tostring(L, -1));
        lua_pop(L, 1);
        return;
    }
    int kind = AH_EK_PERMANENT;
    if (lua_getfield(L, idx, "kind") == LUA_TSTRING) {
        int k = ah_error_kind_from_name(lua_tostring(L, -1));
        if (k >= 0)
            kind = k;
    }
    lua_pop(L, 1);
    int status = 0;
    if (lua_getfield(L, idx, "status") == LUA_TNUMBER)
        status = (int)lua_tointeger(L, -1);
    lua_pop(L, 1);
    if (lua_getfield(L, idx, "message") != LUA_TNIL) {
        lua_pop(L, 1);
        lua_getfield(L, idx, "message");
        safe_tostring(L, -1);
        ah_error_set(e, (ah_error_kind)kind, status, "%s", lua_tostring(L, -1));
        lua_pop(L, 2);
    } else {
        lua_pop(L, 1);
        ah_error_set(e, (ah_error_kind)kind, status, "%s error",
                     ah_error_kind_name(kind));
    }
    if (lua_getfield(L, idx, "retry_after_ms") == LUA_TNUMBER)
        e->retry_after_ms = (int64_t)lua_tointeger(L, -1);
    lua_pop(L, 1);
    if (lua_getfield(L, idx, "provider_type") == LUA_TSTRING)
        ah_error_set_provider_type(e, lua_tostring(L, -1));
    lua_pop(L, 1);
    if (lua_getfield(L, idx, "should_retry") == LUA_TBOOLEAN)
        e->should_retry = lua_toboolean(L, -1);
    lua_pop(L, 1);
    if (lua_getfield(L, idx, "category") == LUA_TSTRING)
        snprintf(e->category, sizeof e->category, "%s", lua_tostring(L, -1));
    lua_pop(L, 1);
}

/* ah.transient(msg) / ah.permanent(msg): error VALUES for error(). */
static int make_error(lua_State *L, const char *kind)
{
    lua_createtable(L, 0, 2);
    lua_pushstring(L, kind);
    lua_setfield(L, -2, "kind");
    if (lua_isnoneornil(L, 1))
        lua_pushfstring(L, "%s error", kind);
    else
        safe_tostring(L, 1);
    lua_setfield(L, -2, "message");
    push_error_mt(L);
    lua_setmetatable(L, -2);
    return 1;
}

static int l_transient(lua_State *L)
{
    return make_error(L, "transient");
}

static int l_permanent(lua_State *L)
{
    return make_error(L, "permanent");
}

static int l_is_retryable(lua_State *L)
{
    luaL_checkany(L, 1);
    if (!lua_istable(L, 1)) {
        lua_pushboolean(L, 0);
        return 1;
    }
    ah_error e;
    lah_to_error(L, 1, &e);
    lua_pushboolean(L, ah_error_is_retryable(&e));
    return 1;
}

void lah_open_errors(lua_State *L)
{
    static const luaL_Reg fns[] = {{"transient", l_transient},
                                   {"permanent", l_permanent},
                                   {"is_retryable", l_is_retryable},
                                   {NULL, NULL}};
    luaL_setfuncs(L, fns, 0);
}

/* ---- whole numbers ------------------------------------------------------------------ */

int lah_to_whole(lua_State *L, int idx, lua_Integer *out)
{
    if (lua_type(L, idx) != LUA_TNUMBER)
        return 0;
#if LAH_DOUBLES_ONLY
    /* every number is a double: whole when integral and exact (|n| <= 2^53) */
    if (!lua_isinteger(L, idx))
        return 0;
    *out = (lua_Integer)lua_tonumber(L, idx);
    return 1;
#else
    int isnum = 0;
    lua_Integer v = lua_tointegerx(L, idx, &isnum); /* 3.0 -> 3; 3.5, 1e300 -> not */
    if (!isnum)
        return 0;
    *out = v;
    return 1;
#endif
}

lua_Integer lah_check_whole(lua_State *L, int idx, const char *where, const char *field,
                            lua_Integer min, lua_Integer max)
{
    lua_Integer v = 0; /* luaL_error does not return; gcc cannot know */
    if (!lah_to_whole(L, idx, &v) || v < min || v > max) {
        const char *got = lua_type(L, idx) == LUA_TNUMBER ? lua_tostring(L, idx)
                                                          : luaL_typename(L, idx);
        char lo[32], hi[32];
        snprintf(lo, sizeof lo, "%lld", (long long)min);
        snprintf(hi, sizeof hi, "%lld", (long long)max);
        if (max == LUA_MAXINTEGER)
            luaL_error(L, "%s: %s must be a whole number >= %s (got %s)", where, field, lo,
                       got);
        else
            luaL_error(L, "%s: %s must be a whole number from %s to %s (got %s)", where,
                       field, lo, hi, got);
    }
    return v;
}

