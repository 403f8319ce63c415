/* tty.c - the terminal seam (see tty.h): ah.isatty, ah.status_on_terminal, and the
 * stderr log handler that leaves LLM retry warnings to the status display.
 *
 * Invariant: the only state is one process-wide flag, set from Lua and read by the log
 * handler, which may run on any thread (an in-process mock logs from its own threads),
 * hence atomic. */
#include "tty.h"

#include <lauxlib.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

static atomic_int status_on_terminal;

/* ah.isatty(file) -> boolean; a closed file is not a terminal. */
static int l_isatty(lua_State *L)
{
    luaL_Stream *s = luaL_checkudata(L, 1, LUA_FILEHANDLE);
    lua_pushboolean(L, s->closef != NULL && s->f != NULL && isatty(fileno(s->f)));
    return 1;
}

/* ah.status_on_terminal(on) */
static int l_status_on_terminal(lua_State *L)
{
    luaL_checktype(L, 1, LUA_TBOOLEAN);
    atomic_store(&status_on_terminal, lua_toboolean(L, 1));
    return 0;
}

void lah_tty_open(lua_State *L)
{
    lua_pushcfunction(L, l_isatty);
    lua_setfield(L, -2, "isatty");
    lua_pushcfunction(L, l_status_on_terminal);
    lua_setfield(L, -2, "status_on_terminal");
}

/* The core words its retry and give-up warnings "LLM request N: ..." and "LLM request N
 * gave up ..." (core/call.c); the llm_retry / llm_gave_up events carry the same facts.
 * tests/cli/test_status_tty.sh fails if they reach the terminal under the display. */
static int shown_by_status(ah_log_level level, const char *line)
{
    return atomic_load(&status_on_terminal) && level == AH_LOG_WARN &&
           strncmp(line, "LLM request ", 12) == 0 && isatty(STDERR_FILENO);
}

void lah_log_to_stderr(void *ud, ah_log_level level, const char *line)
{
    (void)ud;
    if (shown_by_status(level, line))
        return;
    fprintf(stderr, "agenthost: %s: %s\n", ah_log_level_name(level), line);
}
