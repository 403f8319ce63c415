/* test_one_core.c - a program that links libagenthost.so and loads the Lua module
 * (agenthost.so) into its own lua_State has one core, not two: the log handler the program
 * installs with ah_log_set_handler() is the one the module's code logs through. With a
 * module that carried its own copy of the core (as it once did), the module's lines went
 * to that copy's handler, which nobody had set, and were lost.
 *
 * Built against the shared library and liblua (not the static core the other tests link);
 * LUA_CPATH points at the build tree's module. */
#include "agenthost.h"

#include <lauxlib.h>
#include <lua.h>
#include <lualib.h>

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

typedef struct seen {
    int lines;
    int boom; /* lines that name the failing tool's error */
} seen;

static void on_log(void *ud, ah_log_level level, int event, const char *line)
{
    seen *s = ud;
    s->lines++;
    if (strstr(line, "boom-from-the-module"))
        s->boom++;
}

static lua_State *open_lua(void)
{
    lua_State *L = luaL_newstate();
    assert_non_null(L);
    luaL_openlibs(L);
    return L;
}

static void run_chunk(lua_State *L, const char *chunk)
{
    int rc = luaL_dostring(L, chunk);
    if (rc != LUA_OK)
        fail_msg("Lua: %s", lua_tostring(L, -1));
}

/* The module and the program agree on the library: the same version, from one place. */
static void test_same_library(void **state)
{
    lua_State *L = open_lua();
    run_chunk(L, "local ah = require 'agenthost'; return ah.version");
    assert_string_equal(lua_tostring(L, -1), ah_version());
    lua_close(L);
}

/* A tool body that raises a plain error is logged by the module (lua/tools.c) through the
 * process-wide handler: the program's handler sees that line (and loading the module did
 * not replace it with the module's stderr handler, which it installs only when no handler
 * is set). */
static void test_module_logs_through_the_programs_handler(void **state)
{
    seen s = {0, 0};
    ah_log_set_handler(on_log, &s, AH_LOG_DEBUG);
    lua_State *L = open_lua();
    run_chunk(L, "local ah = require 'agenthost'\n"
                 "local t = ah.tool { name = 'fails', run = function() "
                 "error('boom-from-the-module') end }\n"
                 "local r = t:call({})\n"
                 "assert(not r.ok, 'the call failed')\n");
    lua_close(L);
    ah_log_set_handler(NULL, NULL, AH_LOG_INFO);
    assert_true(s.boom >= 1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_same_library),
        cmocka_unit_test(test_module_logs_through_the_programs_handler),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
