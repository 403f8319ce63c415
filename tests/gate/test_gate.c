/* test_gate.c - the one gate from C into Lua (lua/gate.c) against a real lua_State: the
 * same clean-up on success and error (the stack below the function as it was), errors as
 * one "message\ntraceback" value, the hook depth counted during a hook and restored after
 * an error, waits refused inside a hook, the yieldable variant keeping the raised value
 * and recording its traceback, and a coroutine's error shaped the same way. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <string.h>

#include "lah.h"

#include <lualib.h>

static lua_State *new_state(void)
{
    lua_State *L = luaL_newstate();
    assert_non_null(L);
    luaL_openlibs(L);
    return L;
}

/* push the function compiled from src (a chunk that returns a function) */
static void push_fn(lua_State *L, const char *src)
{
    assert_int_equal(luaL_loadstring(L, src), LUA_OK);
    lua_call(L, 0, 1);
}

static int depth_seen;
static int record_depth(lua_State *L)
{
    depth_seen = lah_gate_of(L)->hook_depth;
    return 0;
}

static void success_leaves_the_results_and_nothing_else(void **state)
{
    (void)state;
    lua_State *L = new_state();
    lua_pushliteral(L, "below");
    int top = lua_gettop(L);
    push_fn(L, "return function(a, b) return a + b, a * b end");
    lua_pushinteger(L, 3);
    lua_pushinteger(L, 4);
    assert_int_equal(lah_gate_call(L, NULL, 2, 2, 0), LUA_OK);
    assert_int_equal(lua_gettop(L), top + 2);
    assert_int_equal(lua_tointeger(L, -2), 7);
    assert_int_equal(lua_tointeger(L, -1), 12);
    assert_string_equal(lua_tostring(L, top), "below");
    lua_close(L);
}

static void an_error_is_one_value_with_a_traceback(void **state)
{
    (void)state;
    lua_State *L = new_state();
    lua_pushliteral(L, "below");
    int top = lua_gettop(L);
    push_fn(L, "local function inner() error('boom') end\n"
               "return function() inner() end");
    assert_int_equal(lah_gate_call(L, NULL, 0, 3, 0), LUA_ERRRUN);
    assert_int_equal(lua_gettop(L), top + 1);
    const char *msg = lua_tostring(L, -1);
    assert_non_null(msg);
    assert_non_null(strstr(msg, "boom"));
    assert_non_null(strstr(msg, "\nstack traceback:"));
    assert_non_null(strstr(msg, "inner"));
    assert_string_equal(lua_tostring(L, top), "below");
    /* a non-string error value is described */
    lua_settop(L, top);
    push_fn(L, "return function() error({}) end");
    assert_int_equal(lah_gate_call(L, NULL, 0, 0, 0), LUA_ERRRUN);
    assert_non_null(strstr(lua_tostring(L, -1), "(error object is a table value)"));
    lua_close(L);
}

static void a_handler_at_a_slot_stays_where_it_is(void **state)
{
    (void)state;
    lua_State *L = new_state();
    lua_pushcfunction(L, lah_traceback);
    int msgh = lua_gettop(L);
    for (int i = 0; i < 3; i++) { /* many calls, one handler */
        push_fn(L, "return function(x) if x == 1 then error('odd') end return x end");
        lua_pushinteger(L, i);
        int st = lah_gate_call(L, lah_gate_of(L), 1, 1, msgh);
        assert_int_equal(st, i == 1 ? LUA_ERRRUN : LUA_OK);
        if (i == 1)
            assert_non_null(strstr(lua_tostring(L, -1), "stack traceback:"));
        else
            assert_int_equal(lua_tointeger(L, -1), i);
        assert_int_equal(lua_gettop(L), msgh + 1);
        assert_true(lua_tocfunction(L, msgh) == lah_traceback);
        lua_settop(L, msgh);
    }
    assert_int_equal(lah_gate_of(L)->hook_depth, 0);
    lua_close(L);
}

static void a_hook_counts_depth_and_an_error_restores_it(void **state)
{
    (void)state;
    lua_State *L = new_state();
    lah_gate *g = lah_gate_of(L);
    lua_pushcfunction(L, record_depth);
    lua_setglobal(L, "record_depth");
    depth_seen = -1;
    push_fn(L, "return function() record_depth() end");
    assert_int_equal(lah_gate_call(L, g, 0, 0, 0), LUA_OK);
    assert_int_equal(depth_seen, 1);
    assert_int_equal(g->hook_depth, 0);
    /* failing: the depth comes back to 0 */
    depth_seen = -1;
    push_fn(L, "return function() record_depth(); error('x') end");
    lua_setglobal(L, "failing");
    push_fn(L, "return function() failing() end");
    assert_int_equal(lah_gate_call(L, g, 0, 0, 0), LUA_ERRRUN);
    assert_int_equal(depth_seen, 1);
    assert_int_equal(g->hook_depth, 0);
    lua_pop(L, 1);
    /* not a hook (no gate): nothing counted */
    depth_seen = -1;
    push_fn(L, "return function() record_depth() end");
    assert_int_equal(lah_gate_call(L, NULL, 0, 0, 0), LUA_OK);
    assert_int_equal(depth_seen, 0);
    lua_close(L);
}

static int try_wait(lua_State *L)
{
    lah_check_not_in_hook(L, "a wait");
    lua_pushliteral(L, "waited");
    return 1;
}

static void a_wait_inside_a_hook_is_refused(void **state)
{
    (void)state;
    lua_State *L = new_state();
    lua_pushcfunction(L, try_wait);
    lua_setglobal(L, "try_wait");
    push_fn(L, "return function() return try_wait() end");
    assert_int_equal(lah_gate_call(L, lah_gate_of(L), 0, 1, 0), LUA_ERRRUN);
    assert_non_null(strstr(lua_tostring(L, -1), "a wait cannot be called inside a hook"));
    lua_pop(L, 1);
    push_fn(L, "return function() return try_wait() end");
    assert_int_equal(lah_gate_call(L, NULL, 0, 1, 0), LUA_OK);
    assert_string_equal(lua_tostring(L, -1), "waited");
    lua_close(L);
}

/* A body that may wait runs as a coroutine: its error comes back as raised (an error
 * value says how the call failed) with the traceback beside it. */
static void a_coroutine_error_keeps_the_value_as_raised(void **state)
{
    (void)state;
    lua_State *L = new_state();
    lua_State *co = lua_newthread(L);
    lua_newtable(L);
    lua_pushvalue(L, -1);
    lua_setglobal(L, "raised");
    push_fn(L, "return function(t) error(t) end");
    lua_insert(L, -2);
    lua_xmove(L, co, 2);
    int nres = 0;
    assert_int_equal(lah_gate_resume(co, L, 1, &nres), LUA_ERRRUN);
    lua_getglobal(L, "raised");
    lua_pushvalue(co, -2);
    lua_xmove(co, L, 1);
    assert_true(lua_rawequal(L, -1, -2)); /* the value as raised, not a string */
    assert_non_null(strstr(lua_tostring(co, -1), "stack traceback:"));
    lua_close(L);
}

/* lah_gate_protect_call: the message as raised, no traceback (a record's message). */
static void a_protected_call_gives_the_bare_message(void **state)
{
    (void)state;
    lua_State *L = new_state();
    push_fn(L, "return function(x) error('bad ' .. x, 0) end");
    lua_pushliteral(L, "value");
    assert_int_equal(lah_gate_protect_call(L, 1, 1), LUA_ERRRUN);
    assert_string_equal(lua_tostring(L, -1), "bad value");
    lua_close(L);
}

static void a_coroutine_error_gets_its_traceback(void **state)
{
    (void)state;
    lua_State *L = new_state();
    lua_State *co = lua_newthread(L);
    push_fn(L, "local function deep() error('in the coroutine') end\n"
               "return function() coroutine.yield(1); deep() end");
    lua_xmove(L, co, 1);
    int nres = 0;
    assert_int_equal(lah_gate_resume(co, L, 0, &nres), LUA_YIELD);
    assert_int_equal(nres, 1);
    lua_pop(co, nres);
    int top = lua_gettop(L);
    assert_int_equal(lah_gate_resume(co, L, 0, &nres), LUA_ERRRUN);
    assert_int_equal(lua_gettop(L), top); /* nothing left on the resumer */
    const char *full = lua_tostring(co, -1);
    assert_non_null(full);
    assert_non_null(strstr(full, "in the coroutine"));
    assert_non_null(strstr(full, "stack traceback:"));
    assert_non_null(strstr(full, "deep"));
    assert_non_null(strstr(lua_tostring(co, -2), "in the coroutine")); /* the value */
    lua_close(L);
}

static int raise_it(lua_State *L)
{
    int *flag = lua_touserdata(L, 1);
    *flag = 1;
    return luaL_error(L, "inside the helper");
}

static void a_protected_helper_reports_without_a_traceback(void **state)
{
    (void)state;
    lua_State *L = new_state();
    int top = lua_gettop(L), ran = 0;
    assert_int_equal(lah_gate_protect(L, raise_it, &ran, 1), LUA_ERRRUN);
    assert_int_equal(ran, 1);
    assert_int_equal(lua_gettop(L), top + 1);
    assert_non_null(strstr(lua_tostring(L, -1), "inside the helper"));
    assert_null(strstr(lua_tostring(L, -1), "traceback"));
    lua_close(L);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(success_leaves_the_results_and_nothing_else),
        cmocka_unit_test(an_error_is_one_value_with_a_traceback),
        cmocka_unit_test(a_handler_at_a_slot_stays_where_it_is),
        cmocka_unit_test(a_hook_counts_depth_and_an_error_restores_it),
        cmocka_unit_test(a_wait_inside_a_hook_is_refused),
        cmocka_unit_test(a_coroutine_error_keeps_the_value_as_raised),
        cmocka_unit_test(a_protected_call_gives_the_bare_message),
        cmocka_unit_test(a_coroutine_error_gets_its_traceback),
        cmocka_unit_test(a_protected_helper_reports_without_a_traceback),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
