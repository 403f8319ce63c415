/* test_host_loop.c - a host's own loop drives agenthost through ah.backend_fd(),
 * ah.backend_timeout() and ah.step() (docs/lua.md "Host loops"), here with poll(2) on a
 * real lua_State and the in-process mock: the fd becomes readable when there is work and
 * each step does it; while a run waits out a 50 ms Retry-After the fd is quiet (a
 * level-triggered fd that stayed readable would wake the host thousands of times); on_done
 * runs once, inside a step; an idle agenthost leaves the fd unreadable and has no timeout;
 * the fd is the same for the state's life. No assertion depends on speed: wake-ups are
 * bounded by the events there are, on any machine. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <poll.h>
#include <string.h>

#include "lah.h"

#include <lualib.h>

int luaopen_agenthost(lua_State *L);

static lua_State *new_state(void)
{
    lua_State *L = luaL_newstate();
    assert_non_null(L);
    luaL_openlibs(L);
    lua_pushcfunction(L, luaopen_agenthost);
    lua_call(L, 0, 1);
    lua_setglobal(L, "ah");
    return L;
}

static void run_lua(lua_State *L, const char *src)
{
    if (luaL_loadstring(L, src) != LUA_OK || lua_pcall(L, 0, 0, 0) != LUA_OK)
        fail_msg("lua: %s", lua_tostring(L, -1));
}

static lua_Integer call_int(lua_State *L, const char *fn)
{
    lua_getglobal(L, "ah");
    lua_getfield(L, -1, fn);
    if (lua_pcall(L, 0, 1, 0) != LUA_OK)
        fail_msg("ah.%s: %s", fn, lua_tostring(L, -1));
    lua_Integer v = lua_tointeger(L, -1);
    lua_pop(L, 2);
    return v;
}

static int global_int(lua_State *L, const char *name)
{
    lua_getglobal(L, name);
    int v = (int)lua_tointeger(L, -1);
    lua_pop(L, 1);
    return v;
}

static int readable(int fd, int ms)
{
    struct pollfd p = {.fd = fd, .events = POLLIN};
    return poll(&p, 1, ms) > 0 && (p.revents & POLLIN);
}

static void a_host_loop_drives_runs_without_spinning(void **state)
{
    (void)state;
    lua_State *L = new_state();
    run_lua(L, "m = ah.mock{ plan = { { status = 529, headers = { ['retry-after-ms'] = '50' } },"
               "                      { cut_after_events = 4 } } }\n"
               "agent = ah.agent{ client = ah.client{ provider = 'anthropic', model = 'm',"
               "                                      base_url = m.url },"
               "                  on_event = false, policy = { base_ms = 1, cap_ms = 2 } }\n"
               "done, text, steps_in_done = 0, nil, nil\n"
               "run = agent:start('hello', { on_done = function(r)"
               "  done = done + 1; text = r.outcome .. ' ' .. r.text end })");
    lua_Integer fd = call_int(L, "backend_fd");
    assert_true(fd >= 0);
    int wakeups = 0, timeouts = 0;
    lua_Integer in_flight = 1;
    while (global_int(L, "done") == 0) {
        /* the host's loop: wait for the fd (a generous bound: a stall fails the test) */
        lua_Integer t = call_int(L, "backend_timeout");
        assert_true(t >= -1);
        if (readable((int)fd, 10000))
            wakeups++;
        else
            timeouts++;
        in_flight = call_int(L, "step");
        assert_true(wakeups < 500); /* a spinning fd would pass this in no time */
    }
    assert_int_equal(timeouts, 0); /* the fd alone was enough: its timer is in the set */
    assert_int_equal(in_flight, 0);
    lua_getglobal(L, "text");
    assert_non_null(strstr(lua_tostring(L, -1), "completed You said: \"hello\""));
    lua_pop(L, 1);
    /* the 529 and the cut that kept nothing are both retries; the cut is a continuation */
    run_lua(L, "local r = run:wait(); assert(r.stats.retries == 2 and r.stats.continuations == 1)");
    /* idle: nothing to do, nothing timed, and the fd stays quiet */
    assert_int_equal(call_int(L, "step"), 0);
    assert_int_equal(call_int(L, "backend_timeout"), -1);
    assert_false(readable((int)fd, 0));
    assert_int_equal(global_int(L, "done"), 1);
    assert_int_equal(call_int(L, "backend_fd"), fd); /* the same fd */
    /* a second run wakes the same fd */
    run_lua(L, "run2 = agent:start('again', { on_done = function() done = done + 1 end })");
    while (global_int(L, "done") == 1) {
        assert_true(readable((int)fd, 10000));
        call_int(L, "step");
    }
    run_lua(L, "m:close()");
    lua_close(L);
}

static void pending_lua_work_keeps_the_fd_readable(void **state)
{
    (void)state;
    lua_State *L = new_state();
    lua_Integer fd = call_int(L, "backend_fd");
    call_int(L, "step");
    assert_false(readable((int)fd, 0)); /* nothing to do */
    /* a coroutine made runnable (ah.parallel spawns; its work runs at the next step) */
    run_lua(L, "ran = 0\n"
               "co = coroutine.wrap(function() ah.parallel{ function() ran = 1 end } end)");
    /* a wait from a plain coroutine drives the loop itself: it is done at once */
    run_lua(L, "co()");
    assert_int_equal(global_int(L, "ran"), 1);
    assert_false(readable((int)fd, 0));
    lua_close(L);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(a_host_loop_drives_runs_without_spinning),
        cmocka_unit_test(pending_lua_work_keeps_the_fd_readable),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
