/* tools_json.c - canonical JSON for tool arguments and receipts (docs/tools-and-ledger.md).
 *
 * The ledger fingerprints a call's arguments, so the same arguments must always give the
 * same bytes: object keys are sorted (bytewise), an integral float is written as an
 * integer (1500.0 and 1500 are one amount), other floats with 17 significant digits, and
 * nothing else varies. Receipts go through the same encoder and come back through
 * lah_push_json_decoded(), so a first call and its duplicate return the same shape.
 *
 * Invariants: every allocation of the encoder lives in a userdata on the Lua stack (the
 * output buffer, the key arrays), so an error raised half-way (strict mode, out of
 * memory) leaks nothing; the decoder frees its cJSON tree on every path (it pushes under
 * lah_gate_protect).
 */
#include "tools.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { MAX_DEPTH = 100, PATH_MAX_LEN = 200, DEC_MAX_DEPTH = 1000 };

/* ---- the output buffer: a userdata whose __gc frees the bytes ---------------------- */

typedef struct jbuf {
    char *p;
    size_t len, cap;
} jbuf;

static int jbuf_gc(lua_State *L)
{
    jbuf *b = lua_touserdata(L, 1);
    free(b->p);
    b->p = NULL;
    b->len = b->cap = 0;
    return 0;
}

static jbuf *jbuf_push(lua_State *L)
{
    jbuf *b = lua_newuserdatauv(L, sizeof *b, 0);
    memset(b, 0, sizeof *b);
    static const luaL_Reg meta[] = {{"__gc", jbuf_gc}, {NULL, NULL}};
    if (luaL_newmetatable(L, "agenthost.jsonbuf"))
        luaL_setfuncs(L, meta, 0);
    lua_setmetatable(L, -2);
    return b;
}

static void jbuf_add(lua_State *L, jbuf *b, const char *s, size_t n)
{
    if (b->len + n > LAH_JSON_MAX_BYTES)
        luaL_error(L, "cannot encode the value as JSON: it is larger than %d MiB",
                   (int)(LAH_JSON_MAX_BYTES >> 20));
    if (b->len + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->len + n + 1)
            cap *= 2;
        char *p = realloc(b->p, cap);
        if (!p)
            luaL_error(L, "out of memory encoding JSON");
        b->p = p;
        b->cap = cap;
    }
    memcpy(b->p + b->len, s, n);
    b->len += n;
    b->p[b->len] = '\0';
}

static void jbuf_adds(lua_State *L, jbuf *b, const char *s)
{
    jbuf_add(L, b, s, strlen(s));
}

static void add_string(lua_State *L, jbuf *b, const char *s, size_t n)
{
    jbuf_add(L, b, "\"", 1);
    size_t run = 0; /* bytes copied as they are, flushed before each escape */
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        const char *esc = NULL;
        char hex[8];
        switch (c) {
        case '"':
            esc = "\\\"";
            break;
        case '\\':
            esc = "\\\\";
            break;
        case '\n':
            esc = "\\n";
            break;
        case '\r':
            esc = "\\r";
            break;
        case '\t':
            esc = "\\t";
            break;
        case '\b':
            esc = "\\b";
            break;
        case '\f':
            esc = "\\f";
            break;
        default:
            if (c < 0x20) {
                snprintf(hex, sizeof hex, "\\u%04x", c);
                esc = hex;
            }
        }
        if (esc) {
            jbuf_add(L, b, s + i - run, run);
            run = 0;
            jbuf_adds(L, b, esc);
        } else {
            run++;
        }
    }
    jbuf_add(L, b, s + n - run, run);
    jbuf_add(L, b, "\"", 1);
}

/* ---- the encoder ------------------------------------------------------------------- */

typedef struct enc {
    jbuf *out;
    int strict;
    int seen; /* stack index of a table: the tables being encoded now (a cycle check) */
    char path[PATH_MAX_LEN]; /* where we are, for error messages: "$.items[2].fn" */
} enc;

static void encode_value(lua_State *L, enc *e, int idx, int depth);

/* A value JSON cannot hold: raise (strict) or write its text (lenient). */
static void unencodable(lua_State *L, enc *e, int idx, const char *why)
{
    if (e->strict)
        luaL_error(L, "cannot encode %s as JSON: %s", e->path, why);
    size_t n;
    const char *s = luaL_tolstring(L, idx, &n);
    add_string(L, e->out, s, n);
    lua_pop(L, 1);
}

static void add_number(lua_State *L, enc *e, int idx)
{
    char num[64];
    if (lua_isinteger(L, idx)) {
        snprintf(num, sizeof num, "%lld", (long long)lua_tointeger(L, idx));
    } else {
        double d = lua_tonumber(L, idx);
        if (!isfinite(d)) {
            unencodable(L, e, idx, isnan(d) ? "NaN" : "an infinite number");
            return;
        }
        /* 1500.0 and 1500 must fingerprint alike. */
        if (d == floor(d) && fabs(d) < 9007199254740992.0) /* 2^53 */
            snprintf(num, sizeof num, "%lld", (long long)d);
        else
            snprintf(num, sizeof num, "%.17g", d);
    }
    jbuf_adds(L, e->out, num);
}

typedef struct keyref {
    const char *s; /* anchored in the key table on the stack */
    size_t n;
} keyref;

static int keyref_cmp(const void *a, const void *b)
{
    const keyref *x = a, *y = b;
    size_t n = x->n < y->n ? x->n : y->n;
    int c = memcmp(x->s, y->s, n);
    if (c)
        return c;
    return x->n < y->n ? -1 : x->n > y->n;
}

/* 1 when the table at idx is a non-empty sequence 1..n with no other key. */
static int is_array(lua_State *L, int idx, lua_Integer *n_out)
{
    lua_Integer count = 0, max = 0;
    lua_pushnil(L);
    while (lua_next(L, idx)) {
        lua_pop(L, 1);
        if (lua_type(L, -1) != LUA_TNUMBER || !lua_isinteger(L, -1) ||
            lua_tointeger(L, -1) < 1) {
            lua_pop(L, 1);
            return 0;
        }
        lua_Integer k = lua_tointeger(L, -1);
        if (k > max)
            max = k;
        count++;
    }
    *n_out = count;
    return count > 0 && max == count;
}

static void path_push(enc *e, size_t *saved, const char *fmt_key, const char *s, size_t n,
                      lua_Integer i)
{
    *saved = strlen(e->path);
    size_t room = sizeof e->path - *saved;
    if (fmt_key)
        snprintf(e->path + *saved, room, ".%.*s", (int)(n > 40 ? 40 : n), s);
    else
        snprintf(e->path + *saved, room, "[%lld]", (long long)i);
}

static void encode_array(lua_State *L, enc *e, int idx, lua_Integer n, int depth)
{
    jbuf_add(L, e->out, "[", 1);
    for (lua_Integer i = 1; i <= n; i++) {
        size_t saved;
        if (i > 1)
            jbuf_add(L, e->out, ",", 1);
        path_push(e, &saved, NULL, NULL, 0, i);
        lua_rawgeti(L, idx, i);
        encode_value(L, e, lua_gettop(L), depth + 1);
        lua_pop(L, 1);
        e->path[saved] = '\0';
    }
    jbuf_add(L, e->out, "]", 1);
}

static void encode_object(lua_State *L, enc *e, int idx, int depth)
{
    /* norm: key text -> value; the key texts are anchored there while we sort. */
    lua_newtable(L);
    int norm = lua_gettop(L);
    size_t count = 0;
    lua_pushnil(L);
    while (lua_next(L, idx)) {
        /* key at -2, value at -1 */
        int kt = lua_type(L, -2);
        if (kt == LUA_TSTRING) {
            lua_pushvalue(L, -2);
        } else if (kt == LUA_TNUMBER &&
                   (lua_isinteger(L, -2) ||
                    lua_tonumber(L, -2) == floor(lua_tonumber(L, -2)))) {
            char num[32];
            snprintf(num, sizeof num, "%lld",
                     lua_isinteger(L, -2) ? (long long)lua_tointeger(L, -2)
                                          : (long long)lua_tonumber(L, -2));
            lua_pushstring(L, num);
        } else {
            if (e->strict)
                luaL_error(L, "cannot encode %s as JSON: a table key of type %s", e->path,
                           luaL_typename(L, -2));
            lua_pop(L, 1); /* lenient: such a key is left out */
            continue;
        }
        lua_pushvalue(L, -1);
        if (lua_rawget(L, norm) != LUA_TNIL) {
            if (e->strict)
                luaL_error(L, "cannot encode %s as JSON: key '%s' appears twice", e->path,
                           lua_tostring(L, -2));
            lua_pop(L, 3);
            continue;
        }
        lua_pop(L, 1);
        lua_pushvalue(L, -2); /* the value */
        lua_rawset(L, norm);  /* norm[text] = value */
        lua_pop(L, 1);
        count++;
    }
    keyref *keys = count ? lua_newuserdatauv(L, count * sizeof *keys, 0) : NULL;
    if (!keys)
        lua_pushnil(L); /* keep the stack shape */
    size_t i = 0;
    lua_pushnil(L);
    while (lua_next(L, norm)) {
        lua_pop(L, 1);
        keys[i].s = lua_tolstring(L, -1, &keys[i].n);
        i++;
    }
    if (count)
        qsort(keys, count, sizeof *keys, keyref_cmp);
    jbuf_add(L, e->out, "{", 1);
    for (i = 0; i < count; i++) {
        size_t saved;
        if (i)
            jbuf_add(L, e->out, ",", 1);
        add_string(L, e->out, keys[i].s, keys[i].n);
        jbuf_add(L, e->out, ":", 1);
        path_push(e, &saved, "k", keys[i].s, keys[i].n, 0);
        lua_pushlstring(L, keys[i].s, keys[i].n);
        lua_rawget(L, norm);
        encode_value(L, e, lua_gettop(L), depth + 1);
        lua_pop(L, 1);
        e->path[saved] = '\0';
    }
    jbuf_add(L, e->out, "}", 1);
    lua_pop(L, 2); /* keys, norm */
}

static void encode_value(lua_State *L, enc *e, int idx, int depth)
{
    luaL_checkstack(L, 8, "JSON nesting");
    switch (lua_type(L, idx)) {
    case LUA_TNIL:
        jbuf_adds(L, e->out, "null");
        return;
    case LUA_TBOOLEAN:
        jbuf_adds(L, e->out, lua_toboolean(L, idx) ? "true" : "false");
        return;
    case LUA_TNUMBER:
        add_number(L, e, idx);
        return;
    case LUA_TSTRING: {
        size_t n;
        const char *s = lua_tolstring(L, idx, &n);
        add_string(L, e->out, s, n);
        return;
    }
    case LUA_TLIGHTUSERDATA:
        if (lua_touserdata(L, idx) == NULL) { /* cjson.null */
            jbuf_adds(L, e->out, "null");
            return;
        }
        unencodable(L, e, idx, "a light userdata");
        return;
    case LUA_TTABLE: {
        /* a table inside itself: an error naming where (lenient mode too: a cycle has
         * no text, and walking it would not end) */
        lua_pushvalue(L, idx);
        if (lua_rawget(L, e->seen) != LUA_TNIL)
            luaL_error(L, "cannot encode %s as JSON: a table that contains itself (a cycle)",
                       e->path);
        lua_pop(L, 1);
        if (depth >= MAX_DEPTH) {
            unencodable(L, e, idx, "nested too deeply");
            return;
        }
        lua_pushvalue(L, idx);
        lua_pushboolean(L, 1);
        lua_rawset(L, e->seen);
        lua_Integer n = 0;
        if (is_array(L, idx, &n))
            encode_array(L, e, idx, n, depth);
        else
            encode_object(L, e, idx, depth);
        lua_pushvalue(L, idx);
        lua_pushnil(L);
        lua_rawset(L, e->seen);
        return;
    }
    default:
        unencodable(L, e, idx, lua_typename(L, lua_type(L, idx)));
        return;
    }
}

void lah_push_canonical_json(lua_State *L, int idx, int strict)
{
    idx = lua_absindex(L, idx);
    enc e;
    e.strict = strict;
    snprintf(e.path, sizeof e.path, "$");
    lua_newtable(L);
    e.seen = lua_gettop(L);
    e.out = jbuf_push(L);
    encode_value(L, &e, idx, 0);
    lua_pushlstring(L, e.out->p ? e.out->p : "", e.out->len);
    lua_replace(L, e.seen); /* the buffer goes too; its __gc frees the bytes */
    lua_settop(L, e.seen);
}

/* ---- the decoder ------------------------------------------------------------------- */

static void push_cjson(lua_State *L, const cJSON *j, int top)
{
    luaL_checkstack(L, 4, "JSON nesting");
    if (cJSON_IsNull(j)) {
        if (top)
            lua_pushnil(L);
        else
            lua_pushlightuserdata(L, NULL); /* cjson.null */
    } else if (cJSON_IsBool(j)) {
        lua_pushboolean(L, cJSON_IsTrue(j));
    } else if (cJSON_IsNumber(j)) {
        double d = j->valuedouble;
        if (d == floor(d) && fabs(d) < 9007199254740992.0)
            lua_pushinteger(L, (lua_Integer)d);
        else
            lua_pushnumber(L, d);
    } else if (cJSON_IsString(j)) {
        lua_pushstring(L, j->valuestring ? j->valuestring : "");
    } else if (cJSON_IsArray(j)) {
        lua_createtable(L, cJSON_GetArraySize(j), 0);
        lua_Integer i = 1;
        for (const cJSON *c = j->child; c; c = c->next) {
            push_cjson(L, c, 0);
            lua_rawseti(L, -2, i++);
        }
    } else if (cJSON_IsObject(j)) {
        lua_newtable(L);
        for (const cJSON *c = j->child; c; c = c->next) {
            push_cjson(L, c, 0);
            lua_setfield(L, -2, c->string ? c->string : "");
        }
    } else {
        lua_pushnil(L);
    }
}

static int push_cjson_protected(lua_State *L)
{
    push_cjson(L, lua_touserdata(L, 1), 1);
    return 1;
}

void lah_push_cjson(lua_State *L, cJSON *root)
{
    int st = lah_gate_protect(L, push_cjson_protected, root, 1);
    cJSON_Delete(root);
    if (st != LUA_OK)
        lua_error(L); /* out of memory or a too deep document: the tree is freed */
}

/* ---- the exact decoder ---------------------------------------------------------------
 *
 * cJSON keeps numbers as doubles only, so 12345678901234567 came back as
 * 12345678901234568. This decoder reads the number's own text: an integer token that
 * fits in a Lua integer becomes that integer, exactly; a token with a fraction or an
 * exponent is a float (an integral one below 2^53 an integer, as canonical JSON writes
 * it). Strings may hold any byte, \u0000 included (a Lua string keeps it); a lone
 * surrogate escape becomes U+FFFD. It pushes straight onto the Lua stack and runs under
 * lah_gate_protect, so a memory error leaves nothing behind. */

typedef struct jdec {
    const char *p, *start, *end;
    int failed; /* a syntax error at p */
} jdec;

static void dec_ws(jdec *d)
{
    while (d->p < d->end &&
           (*d->p == ' ' || *d->p == '\n' || *d->p == '\r' || *d->p == '\t'))
        d->p++;
}

static int dec_fail(jdec *d)
{
    d->failed = 1;
    return 0;
}

static int dec_lit(jdec *d, const char *lit, size_t n)
{
    if ((size_t)(d->end - d->p) < n || memcmp(d->p, lit, n) != 0)
        return dec_fail(d);
    d->p += n;
    return 1;
}

static int hex4(const char *p, unsigned *out)
{
    unsigned v = 0;
    for (int i = 0; i < 4; i++) {
        char c = p[i];
        v <<= 4;
        if (c >= '0' && c <= '9')
            v |= (unsigned)(c - '0');
        else if (c >= 'a' && c <= 'f')
            v |= (unsigned)(c - 'a' + 10);
        else if (c >= 'A' && c <= 'F')
            v |= (unsigned)(c - 'A' + 10);
        else
            return 0;
    }
    *out = v;
    return 1;
}

static void add_utf8(luaL_Buffer *b, unsigned cp)
{
    char u[4];
    int n;
    if (cp < 0x80) {
        u[0] = (char)cp;
        n = 1;
    } else if (cp < 0x800) {
        u[0] = (char)(0xC0 | (cp >> 6));
        u[1] = (char)(0x80 | (cp & 0x3F));
        n = 2;
    } else if (cp < 0x10000) {
        u[0] = (char)(0xE0 | (cp >> 12));
        u[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
        u[2] = (char)(0x80 | (cp & 0x3F));
        n = 3;
    } else {
        u[0] = (char)(0xF0 | (cp >> 18));
        u[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
        u[2] = (char)(0x80 | ((cp >> 6) & 0x3F));
        u[3] = (char)(0x80 | (cp & 0x3F));
        n = 4;
    }
    luaL_addlstring(b, u, (size_t)n);
}

/* At the opening quote: push the string. */
static int dec_string(lua_State *L, jdec *d)
{
    luaL_Buffer b;
    d->p++; /* the quote */
    luaL_buffinit(L, &b);
    for (;;) {
        const char *run = d->p;
        while (d->p < d->end && *d->p != '"' && *d->p != '\\' &&
               (unsigned char)*d->p >= 0x20)
            d->p++;
        luaL_addlstring(&b, run, (size_t)(d->p - run));
        if (d->p >= d->end || (unsigned char)*d->p < 0x20)
            return dec_fail(d);
        if (*d->p == '"') {
            d->p++;
            luaL_pushresult(&b);
            return 1;
        }
        /* an escape */
        if (d->end - d->p < 2)
            return dec_fail(d);
        char c = d->p[1];
        d->p += 2;
        switch (c) {
        case '"':
        case '\\':
        case '/':
            luaL_addchar(&b, c);
            break;
        case 'b':
            luaL_addchar(&b, '\b');
            break;
        case 'f':
            luaL_addchar(&b, '\f');
            break;
        case 'n':
            luaL_addchar(&b, '\n');
            break;
        case 'r':
            luaL_addchar(&b, '\r');
            break;
        case 't':
            luaL_addchar(&b, '\t');
            break;
        case 'u': {
            unsigned cp, lo;
            if (d->end - d->p < 4 || !hex4(d->p, &cp))
                return dec_fail(d);
            d->p += 4;
            if (cp >= 0xD800 && cp <= 0xDBFF && d->end - d->p >= 6 && d->p[0] == '\\' &&
                d->p[1] == 'u' && hex4(d->p + 2, &lo) && lo >= 0xDC00 && lo <= 0xDFFF) {
                d->p += 6;
                cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
            } else if (cp >= 0xD800 && cp <= 0xDFFF) {
                cp = 0xFFFD; /* a lone surrogate */
            }
            add_utf8(&b, cp);
            break;
        }
        default:
            d->p -= 2;
            return dec_fail(d);
        }
    }
}

static int dec_number(lua_State *L, jdec *d)
{
    const char *s = d->p;
    const char *q = s;
    int is_float = 0;
    if (q < d->end && *q == '-')
        q++;
    if (q >= d->end || *q < '0' || *q > '9')
        return dec_fail(d);
    if (*q == '0')
        q++;
    else
        while (q < d->end && *q >= '0' && *q <= '9')
            q++;
    if (q < d->end && *q == '.') {
        is_float = 1;
        q++;
        if (q >= d->end || *q < '0' || *q > '9')
            return dec_fail(d);
        while (q < d->end && *q >= '0' && *q <= '9')
            q++;
    }
    if (q < d->end && (*q == 'e' || *q == 'E')) {
        is_float = 1;
        q++;
        if (q < d->end && (*q == '+' || *q == '-'))
            q++;
        if (q >= d->end || *q < '0' || *q > '9')
            return dec_fail(d);
        while (q < d->end && *q >= '0' && *q <= '9')
            q++;
    }
    char tmp[64];
    size_t n = (size_t)(q - s);
    d->p = q;
    if (n >= sizeof tmp) { /* a long literal: only strtod can read it */
#if LAH_DOUBLES_ONLY
        if (!is_float) { /* an integer of 64 digits or more: its digits (see below) */
            lua_pushlstring(L, s, n);
            return 1;
        }
#endif
        lua_pushlstring(L, s, n);
        lua_pushnumber(L, lua_tonumber(L, -1));
        lua_remove(L, -2);
        return 1;
    }
    memcpy(tmp, s, n);
    tmp[n] = '\0';
#if LAH_DOUBLES_ONLY
    /* Numbers are doubles here: an integer a double cannot hold exactly reaches Lua as
     * the string of its digits (the history keeps the JSON text, so nothing is rounded
     * on the way back to the provider). */
    if (!is_float) {
        errno = 0;
        char *e = NULL;
        long long v = strtoll(tmp, &e, 10);
        if (errno == 0 && e == tmp + n && v >= -9007199254740992LL &&
            v <= 9007199254740992LL) /* [-2^53, 2^53]: exact as a double */
            lua_pushnumber(L, (lua_Number)v);
        else
            lua_pushlstring(L, s, n);
        return 1;
    }
#endif
    if (!is_float) {
        errno = 0;
        char *e = NULL;
        long long v = strtoll(tmp, &e, 10);
        if (errno == 0 && e == tmp + n) {
            lua_pushinteger(L, (lua_Integer)v);
            return 1;
        }
    }
    double v = strtod(tmp, NULL);
    if (v == floor(v) && fabs(v) < 9007199254740992.0)
        lua_pushinteger(L, (lua_Integer)v);
    else
        lua_pushnumber(L, v);
    return 1;
}

static int dec_value(lua_State *L, jdec *d, int depth, int top)
{
    luaL_checkstack(L, 6, "JSON nesting");
    if (depth > DEC_MAX_DEPTH)
        return dec_fail(d);
    dec_ws(d);
    if (d->p >= d->end)
        return dec_fail(d);
    switch (*d->p) {
    case '{': {
        d->p++;
        lua_newtable(L);
        dec_ws(d);
        if (d->p < d->end && *d->p == '}') {
            d->p++;
            return 1;
        }
        for (;;) {
            dec_ws(d);
            if (d->p >= d->end || *d->p != '"' || !dec_string(L, d))
                return dec_fail(d);
            dec_ws(d);
            if (d->p >= d->end || *d->p != ':')
                return dec_fail(d);
            d->p++;
            if (!dec_value(L, d, depth + 1, 0))
                return 0;
            lua_rawset(L, -3);
            dec_ws(d);
            if (d->p < d->end && *d->p == ',') {
                d->p++;
                continue;
            }
            if (d->p < d->end && *d->p == '}') {
                d->p++;
                return 1;
            }
            return dec_fail(d);
        }
    }
    case '[': {
        d->p++;
        lua_newtable(L);
        dec_ws(d);
        if (d->p < d->end && *d->p == ']') {
            d->p++;
            return 1;
        }
        for (lua_Integer i = 1;; i++) {
            if (!dec_value(L, d, depth + 1, 0))
                return 0;
            lua_rawseti(L, -2, i);
            dec_ws(d);
            if (d->p < d->end && *d->p == ',') {
                d->p++;
                continue;
            }
            if (d->p < d->end && *d->p == ']') {
                d->p++;
                return 1;
            }
            return dec_fail(d);
        }
    }
    case '"':
        return dec_string(L, d);
    case 't':
        if (!dec_lit(d, "true", 4))
            return 0;
        lua_pushboolean(L, 1);
        return 1;
    case 'f':
        if (!dec_lit(d, "false", 5))
            return 0;
        lua_pushboolean(L, 0);
        return 1;
    case 'n':
        if (!dec_lit(d, "null", 4))
            return 0;
        if (top)
            lua_pushnil(L);
        else
            lua_pushlightuserdata(L, NULL); /* cjson.null */
        return 1;
    default:
        return dec_number(L, d);
    }
}

static int dec_protected(lua_State *L)
{
    jdec *d = lua_touserdata(L, 1);
    lua_settop(L, 0);
    if (!dec_value(L, d, 0, 1))
        return 0;
    return 1;
}

int lah_json_push_exact(lua_State *L, const char *json, size_t len, size_t *errpos,
                        int *trailing)
{
    jdec d = {json, json, json + len, 0};
    *trailing = 0;
    if (lah_gate_protect(L, dec_protected, &d, 1) != LUA_OK)
        lua_error(L); /* out of memory or too deep for the C stack */
    if (!d.failed) {
        dec_ws(&d);
        if (d.p >= d.end)
            return 1;
        *trailing = 1;
    }
    lua_pop(L, 1);
    *errpos = (size_t)(d.p - json);
    return 0;
}

int lah_push_json_decoded(lua_State *L, const char *json, size_t len)
{
    size_t at;
    int trailing;
    return lah_json_push_exact(L, json, len, &at, &trailing);
}
