/* test_event_fields.c - the one list of event types and fields (AH_EVENT_MAP) gives every
 * encoding the same fields: for an event of every type, with every field set, the JSON
 * object's keys equal the visit's keys (in order), which equal the keys of the Lua table
 * (lah_push_event) and of the table the on_event hook receives (fresh and reused), with
 * the same values; a null field is null in JSON and absent in Lua. Events are made from
 * the list itself, so a new type is covered without touching this file. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "lah.h"

#include <lualib.h>

static ah_error sample_error(void)
{
    ah_error e;
    ah_error_clear(&e);
    e.kind = AH_EK_HTTP;
    e.status = 503;
    e.retry_after_ms = 7;
    strcpy(e.provider_type, "overloaded_error");
    strcpy(e.message, "HTTP 503: busy");
    return e;
}

/* Every field set to a value that is not its null (null_them: every nullable one null) */
#define S_INT(m, arg) p->m = ++n;
#define S_I64(m, arg) p->m = 1000000000000LL + ++n;
#define S_BOOL(m, arg) p->m = 1;
#define S_STR(m, arg) p->m = null_them ? NULL : #m "-value";
#define S_TEXT(m, arg)                                                                    \
    p->m = "some text, cut";                                                              \
    p->len = 9;
#define S_STATUS(m, arg) p->m = null_them ? 0 : 503;
#define S_ERROR(m, arg) p->m = null_them ? NULL : err;
#define S_ENUM(m, arg) p->m = 1;
#define S_NUM(m, arg) p->m = null_them ? NAN : (double)++n;
#define S_RUN_ID(m, arg) p->m = ev->run_id;
#define S_FIELD(kind, m, arg) S_##kind(m, arg)
#define S_CASE(name, s, member, own, ...)                                                 \
    case AH_EV_##name: {                                                                  \
        struct ah__ev_##member *p = &ev->u.member;                                        \
        __VA_ARGS__                                                                       \
        break;                                                                            \
    }

static void make_event(ah_event *ev, ah_event_type t, const ah_error *err, int null_them)
{
    memset(ev, 0, sizeof *ev);
    ev->type = t;
    ev->run_id = null_them ? NULL : "run_0123456789abcdef";
    ev->ts_ms = 1764583200123LL;
    int n = 0;
    switch (t) {
        AH_EVENT_MAP(S_CASE, S_FIELD)
    case AH_EV_COUNT_:
        break;
    }
    (void)n;
}

/* ---- the keys and values each encoding gives, as "key=value" lines ----------------- */

typedef struct keys {
    char text[4096];
    size_t len;
    int n;
} keys;

static void add(keys *k, const char *key, const char *fmt, ...)
{
    char v[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(v, sizeof v, fmt, ap);
    va_end(ap);
    k->len += (size_t)snprintf(k->text + k->len, sizeof k->text - k->len, "%s=%s\n", key, v);
    assert_true(k->len < sizeof k->text);
    k->n++;
}

/* the visit, with nulls as "null" */
static void v_str(void *ud, const char *key, const char *s, size_t len)
{
    if (s)
        add(ud, key, "s:%.*s", (int)len, s);
    else
        add(ud, key, "null");
}
static void v_num(void *ud, const char *key, int64_t v)
{
    add(ud, key, "n:%lld", (long long)v);
}
static void v_bool(void *ud, const char *key, int v)
{
    add(ud, key, "b:%d", v != 0);
}
static void v_null(void *ud, const char *key)
{
    add(ud, key, "null");
}
static void v_error(void *ud, const char *key, const ah_error *e)
{
    if (e)
        add(ud, key, "e:%s", e->message);
    else
        add(ud, key, "null");
}
static const ah_event_fields visit_fields = {v_str, v_num, v_bool, v_null, v_error, NULL};

static void json_keys(const ah_event *ev, keys *k)
{
    char *json = ah_event_to_json(ev);
    assert_non_null(json);
    cJSON *o = cJSON_Parse(json);
    assert_non_null(o);
    for (cJSON *c = o->child; c; c = c->next) {
        if (cJSON_IsString(c))
            add(k, c->string, "s:%s", c->valuestring);
        else if (cJSON_IsBool(c))
            add(k, c->string, "b:%d", cJSON_IsTrue(c));
        else if (cJSON_IsNumber(c))
            add(k, c->string, "n:%.0f", c->valuedouble);
        else if (cJSON_IsNull(c))
            add(k, c->string, "null");
        else if (cJSON_IsObject(c))
            add(k, c->string, "e:%s", cJSON_GetObjectItem(c, "message")->valuestring);
        else
            fail_msg("unexpected JSON value for %s", c->string);
    }
    cJSON_Delete(o);
    free(json);
}

/* The visit's lines without the null ones: what a Lua table holds */
static void drop_nulls(const keys *in, keys *out)
{
    memset(out, 0, sizeof *out);
    const char *p = in->text;
    while (*p) {
        const char *nl = strchr(p, '\n');
        size_t n = (size_t)(nl - p);
        if (!(n > 5 && strncmp(nl - 5, "=null", 5) == 0)) {
            memcpy(out->text + out->len, p, n + 1);
            out->len += n + 1;
            out->n++;
        }
        p = nl + 1;
    }
}

/* The table on top as sorted "key=value" lines, by a Lua function (pops nothing) */
static const char *LUA_KEYS =
    "return function(ev)\n"
    "  local out = {}\n"
    "  for k, v in pairs(ev) do\n"
    "    local s\n"
    "    if type(v) == 'string' then s = 's:' .. v\n"
    "    elseif math.type(v) == 'integer' then s = 'n:' .. v\n"
    "    elseif type(v) == 'boolean' then s = 'b:' .. (v and 1 or 0)\n"
    "    else s = 'e:' .. tostring(v.message) end\n"
    "    out[#out + 1] = k .. '=' .. s .. '\\n'\n"
    "  end\n"
    "  table.sort(out)\n"
    "  return table.concat(out)\n"
    "end\n";

static void sort_lines(keys *k)
{
    char *lines[64];
    int n = 0;
    char copy[4096];
    memcpy(copy, k->text, k->len + 1);
    for (char *p = copy; *p;) {
        char *nl = strchr(p, '\n');
        *nl = '\0';
        lines[n++] = p;
        p = nl + 1;
    }
    for (int i = 1; i < n; i++)
        for (int j = i; j > 0 && strcmp(lines[j - 1], lines[j]) > 0; j--) {
            char *t = lines[j];
            lines[j] = lines[j - 1];
            lines[j - 1] = t;
        }
    k->len = 0;
    for (int i = 0; i < n; i++)
        k->len += (size_t)snprintf(k->text + k->len, sizeof k->text - k->len, "%s\n", lines[i]);
}

static lua_State *new_state(int *keys_ref)
{
    lua_State *L = luaL_newstate();
    assert_non_null(L);
    luaL_openlibs(L);
    assert_int_equal(luaL_loadstring(L, LUA_KEYS), LUA_OK);
    lua_call(L, 0, 1);
    *keys_ref = luaL_ref(L, LUA_REGISTRYINDEX);
    return L;
}

static void lua_table_keys(lua_State *L, int keys_ref, keys *k)
{
    lua_rawgeti(L, LUA_REGISTRYINDEX, keys_ref);
    lua_insert(L, -2);
    lua_call(L, 1, 1);
    memset(k, 0, sizeof *k);
    size_t len;
    const char *s = lua_tolstring(L, -1, &len);
    assert_true(len < sizeof k->text);
    memcpy(k->text, s, len + 1);
    k->len = len;
    lua_pop(L, 1);
}

/* The hook the on_event path calls: records its table's lines in the global `last` */
static const char *HOOK = "local keys = ...\n"
                          "return function(ev) last = keys(ev) end\n";

static void check_type(lua_State *L, int keys_ref, int hook_ref, lah_event_cache *c /* [3] */,
                       ah_event_type t, const ah_error *err, int null_them)
{
    ah_event ev;
    make_event(&ev, t, err, null_them);
    keys visit = {{0}, 0, 0}, json = {{0}, 0, 0}, want, lua;
    ah_event_visit(&ev, &visit_fields, &visit);
    json_keys(&ev, &json);
    /* JSON = visit, key by key in order, values alike */
    assert_string_equal(json.text, visit.text);
    drop_nulls(&visit, &want);
    sort_lines(&want);
    lah_push_event(L, &ev);
    lua_table_keys(L, keys_ref, &lua);
    assert_string_equal(lua.text, want.text);
    for (int reuse = LAH_REUSE_NONE; reuse <= LAH_REUSE_READ_ONLY; reuse++)
        for (int rep = 0; rep < 3; rep++) { /* the later reused deltas are refilled */
            lua_pushnil(L);
            lua_setglobal(L, "last");
            assert_int_equal(lah_event_hook(L, hook_ref, &ev, &c[reuse], reuse), LUA_OK);
            assert_int_equal(lua_getglobal(L, "last"), LUA_TSTRING);
            if (strcmp(lua_tostring(L, -1), want.text) != 0)
                fail_msg("%s (reuse %d, %d): hook saw\n%s\nwant\n%s", ah_event_type_name(t),
                         reuse, rep, lua_tostring(L, -1), want.text);
            lua_pop(L, 1);
        }
}

static void every_type_has_the_same_keys_everywhere(void **state)
{
    (void)state;
    ah_error err = sample_error();
    int keys_ref;
    lua_State *L = new_state(&keys_ref);
    assert_int_equal(luaL_loadstring(L, HOOK), LUA_OK);
    lua_rawgeti(L, LUA_REGISTRYINDEX, keys_ref);
    lua_call(L, 1, 1);
    int hook_ref = luaL_ref(L, LUA_REGISTRYINDEX);
    lah_event_cache c[3];
    for (int i = 0; i < 3; i++)
        lah_event_cache_init(L, &c[i]);
    int top = lua_gettop(L);
    for (int null_them = 0; null_them <= 1; null_them++)
        for (int t = 0; t < AH_EV_COUNT_; t++)
            check_type(L, keys_ref, hook_ref, c, (ah_event_type)t, &err, null_them);
    assert_int_equal(lua_gettop(L), top); /* the hook path leaves the stack as it was */
    for (int i = 0; i < 3; i++)
        lah_event_cache_free(L, &c[i]);
    lua_close(L);
}

/* A run of deltas whose text, time, block, call and run change: in every reuse mode the
 * hook sees each delta's own values */
static void refilled_deltas_carry_their_own_values(void **state)
{
    (void)state;
    int keys_ref;
    lua_State *L = new_state(&keys_ref);
    assert_int_equal(luaL_loadstring(L, HOOK), LUA_OK);
    lua_rawgeti(L, LUA_REGISTRYINDEX, keys_ref);
    lua_call(L, 1, 1);
    int hook_ref = luaL_ref(L, LUA_REGISTRYINDEX);
    static const struct {
        ah_event_type type;
        const char *run_id, *text;
        int llm_call, block;
    } seq[] = {
        {AH_EV_TEXT_DELTA, "run_a", "one", 1, 0},       {AH_EV_TEXT_DELTA, "run_a", "two", 1, 0},
        {AH_EV_REASONING_DELTA, "run_a", "hm", 1, 0},   {AH_EV_TEXT_DELTA, "run_a", "", 1, 0},
        {AH_EV_TEXT_DELTA, "run_a", "three", 1, 1},     {AH_EV_TEXT_DELTA, "run_a", "four", 2, 1},
        {AH_EV_REASONING_DELTA, "run_a", "hmm", 2, 1},  {AH_EV_TEXT_DELTA, NULL, "five", 2, 1},
        {AH_EV_TEXT_DELTA, "run_b", "six", 2, 1},       {AH_EV_TEXT_DELTA, "run_b", "seven", 2, 1},
    };
    for (int reuse = LAH_REUSE_NONE; reuse <= LAH_REUSE_READ_ONLY; reuse++) {
        lah_event_cache c;
        lah_event_cache_init(L, &c);
        for (size_t i = 0; i < sizeof seq / sizeof seq[0]; i++) {
            ah_event ev;
            memset(&ev, 0, sizeof ev);
            ev.type = seq[i].type;
            ev.run_id = seq[i].run_id;
            ev.ts_ms = 1000 + (int64_t)i;
            ev.u.delta.llm_call = seq[i].llm_call;
            ev.u.delta.block = seq[i].block;
            ev.u.delta.text = seq[i].text;
            ev.u.delta.len = strlen(seq[i].text);
            keys visit = {{0}, 0, 0}, want;
            ah_event_visit(&ev, &visit_fields, &visit);
            drop_nulls(&visit, &want);
            sort_lines(&want);
            assert_int_equal(lah_event_hook(L, hook_ref, &ev, &c, reuse), LUA_OK);
            assert_int_equal(lua_getglobal(L, "last"), LUA_TSTRING);
            if (strcmp(lua_tostring(L, -1), want.text) != 0)
                fail_msg("delta %zu (reuse %d): hook saw\n%s\nwant\n%s", i, reuse,
                         lua_tostring(L, -1), want.text);
            lua_pop(L, 1);
        }
        lah_event_cache_free(L, &c);
    }
    lua_close(L);
}

/* A delta emitted while the hook of another delta runs (a hook that cancels its run,
 * say) does not refill the table that hook is reading */
static lah_event_cache *nested_cache;
static int nested_hook_ref, nested_mode;

static int emit_nested(lua_State *L)
{
    ah_event ev;
    memset(&ev, 0, sizeof ev);
    ev.type = AH_EV_TEXT_DELTA;
    ev.run_id = "run_a";
    ev.u.delta.text = "inner";
    ev.u.delta.len = 5;
    lua_pushboolean(L, lah_event_hook(L, nested_hook_ref, &ev, nested_cache, nested_mode) ==
                           LUA_OK);
    return 1;
}

static void a_nested_delta_does_not_refill_the_table_in_use(void **state)
{
    (void)state;
    int keys_ref;
    lua_State *L = new_state(&keys_ref);
    lua_register(L, "emit_nested", emit_nested);
    assert_int_equal(luaL_loadstring(L, "return function(ev) inner = ev.text end"), LUA_OK);
    lua_call(L, 0, 1);
    nested_hook_ref = luaL_ref(L, LUA_REGISTRYINDEX);
    assert_int_equal(luaL_loadstring(L, "return function(ev) local a = ev.text "
                                        "local ok = emit_nested() outer = a .. '|' .. ev.text "
                                        ".. '|' .. tostring(ok) end"),
                     LUA_OK);
    lua_call(L, 0, 1);
    assert_int_equal(lah_hook_keeps_nothing(L, -1), 1);
    int outer_ref = luaL_ref(L, LUA_REGISTRYINDEX);
    for (nested_mode = LAH_REUSE_NONE; nested_mode <= LAH_REUSE_READ_ONLY; nested_mode++) {
        lah_event_cache c;
        lah_event_cache_init(L, &c);
        nested_cache = &c;
        ah_event ev;
        memset(&ev, 0, sizeof ev);
        ev.type = AH_EV_TEXT_DELTA;
        ev.run_id = "run_a";
        for (int i = 0; i < 3; i++) {
            ev.u.delta.text = i == 1 ? "two" : "one";
            ev.u.delta.len = 3;
            assert_int_equal(lah_event_hook(L, outer_ref, &ev, &c, nested_mode), LUA_OK);
            lua_getglobal(L, "outer");
            assert_string_equal(lua_tostring(L, -1), i == 1 ? "two|two|true" : "one|one|true");
            lua_getglobal(L, "inner");
            assert_string_equal(lua_tostring(L, -1), "inner");
            lua_pop(L, 2);
        }
        lah_event_cache_free(L, &c);
    }
    lua_close(L);
}

/* A generated event of every type round-trips through JSON to the same bytes */
static void every_generated_type_round_trips(void **state)
{
    (void)state;
    ah_error err = sample_error();
    for (int null_them = 0; null_them <= 1; null_them++)
        for (int t = 0; t < AH_EV_COUNT_; t++) {
            ah_event ev;
            make_event(&ev, (ah_event_type)t, &err, null_them);
            char *json = ah_event_to_json(&ev);
            assert_non_null(json);
            char msg[128];
            ah_event_box *b = ah_event_from_json(json, strlen(json), msg, sizeof msg);
            if (!b)
                fail_msg("%s: %s", json, msg);
            char *again = ah_event_to_json(ah_event_box_get(b));
            assert_string_equal(json, again);
            free(again);
            free(json);
            ah_event_box_free(b);
        }
}

/* A hook that raises: the status and the message (with a traceback) come back, and the
 * stack is as it was */
static void a_failing_hook_reports(void **state)
{
    (void)state;
    int keys_ref;
    lua_State *L = new_state(&keys_ref);
    assert_int_equal(luaL_loadstring(L, "return function(ev) error('bad ' .. ev.type) end"),
                     LUA_OK);
    lua_call(L, 0, 1);
    int hook_ref = luaL_ref(L, LUA_REGISTRYINDEX);
    lah_event_cache c;
    lah_event_cache_init(L, &c);
    int top = lua_gettop(L);
    ah_event ev;
    make_event(&ev, AH_EV_TEXT_DELTA, NULL, 0);
    assert_int_not_equal(lah_event_hook(L, hook_ref, &ev, &c, 0), LUA_OK);
    assert_non_null(strstr(lua_tostring(L, -1), "bad text_delta"));
    assert_non_null(strstr(lua_tostring(L, -1), "traceback"));
    lua_pop(L, 1);
    assert_int_equal(lua_gettop(L), top);
    lah_event_cache_free(L, &c);
    lua_close(L);
}

/* Which hooks get a refilled table (lah_hook_keeps_nothing): only those that cannot keep,
 * pass on or change it */
static void only_hooks_that_cannot_keep_the_table_reuse_it(void **state)
{
    (void)state;
    static const struct {
        int reuse;
        const char *src;
    } cases[] = {
        {1, "return function(ev) end"},
        {1, "return function() end"},
        {1, "local n = 0 return function(ev) if ev.type == 'text_delta' then n = n + 1 end end"},
        {1, "local b = {} return function(ev) b[#b + 1] = ev.text end"},
        {1, "local n = 0 return function(ev) n = n + #ev.text + ev.block end"},
        {1, "return function(ev) if ev and not ev.x and ev[1] == nil then return ev end end"},
        {1, "return function(ev, ...) local t = ev.type return t end"},
        {1, "return function(ev) if ev.type == 'text_delta' then io.write(ev.text) end end"},
        {1, "local s = {} return function(ev) s[ev.type] = (s[ev.type] or 0) + #ev.text end"},
        {0, "local st = {} return function(ev) st:update(ev) end"},
        {0, "return function(ev) io.write(ev) end"},
        {0, "return function(...) local ev = ... end"},
        {0, "local keep = {} return function(ev) keep[#keep + 1] = ev end"},
        {0, "local keep = {} return function(ev) keep[ev] = true end"},
        {0, "local keep = {} return function(ev) keep.last = ev end"},
        {0, "local keep = {} return function(ev) keep[1] = ev end"},
        {0, "local last return function(ev) last = ev end"},
        {0, "return function(ev) LAST = ev end"},
        {0, "return function(ev) print(ev) end"},
        {0, "return function(ev) table.insert({}, ev) end"},
        {0, "return function(ev) local e = ev end"},
        {0, "return function(ev) ev.seen = true end"},
        {0, "return function(ev) ev[1] = true end"},
        {0, "return function(ev) return function() return ev end end"},
        {0, "return function(ev) local f = function() end end"},
        {0, "local s = {} return function(ev) s:add(ev) end"},
        {0, "local o = {} return function(ev) return o[ev] end"},
        {0, "local o = {} return function(ev) return ev == o end"},
        {0, "return function(ev) local t = {ev} end"},
        {0, "return function(ev) local t = {e = ev} end"},
        {0, "return function(ev) local x = ev or 1 end"},
        {0, "return function(ev) for k in pairs(ev) do end end"},
        {0, "return function(ev) error(ev) end"},
        {0, "return function(ev) local s = 'x' .. ev.text .. ev end"},
        {0, "return function(ev) return ev + 1 end"},
        {0, "return function(ev) setmetatable(ev, {}) end"},
    };
    int keys_ref;
    lua_State *L = new_state(&keys_ref);
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        assert_int_equal(luaL_loadstring(L, cases[i].src), LUA_OK);
        lua_call(L, 0, 1);
        if (lah_hook_keeps_nothing(L, -1) != cases[i].reuse)
            fail_msg("%s: want %s", cases[i].src, cases[i].reuse ? "reuse" : "fresh tables");
        lua_pop(L, 1);
    }
    lua_pushcfunction(L, lah_traceback);
    assert_int_equal(lah_hook_keeps_nothing(L, -1), 0); /* C: not known */
    lua_pop(L, 1);
    lua_close(L);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(every_type_has_the_same_keys_everywhere),
        cmocka_unit_test(refilled_deltas_carry_their_own_values),
        cmocka_unit_test(a_nested_delta_does_not_refill_the_table_in_use),
        cmocka_unit_test(every_generated_type_round_trips),
        cmocka_unit_test(a_failing_hook_reports),
        cmocka_unit_test(only_hooks_that_cannot_keep_the_table_reuse_it),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
