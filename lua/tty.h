/* tty.h - the terminal seam of the Lua binding (lua/tty.c).
 *
 * The status display (scripts/status.lua) draws one transient line on stderr's terminal.
 * Two things around it need C: knowing whether a Lua file is a terminal, and keeping the
 * library's per-retry warnings from stacking up under that line. Both live here, so the
 * rest of the binding only calls lah_tty_open() from luaopen_agenthost and installs
 * lah_log_to_stderr() as its log handler.
 */
#ifndef LAH_TTY_H
#define LAH_TTY_H

#include "agenthost.h"

#include <lua.h>

/* Add to the module table at the top of the stack:
 *   ah.isatty(file) -> boolean   the Lua file (io.stderr, io.open(...)) is a terminal
 *   ah.status_on_terminal(on)    a status display shows LLM retries on stderr's
 *                                terminal (true), or no longer does (false)
 * Never raises except for a wrong argument type. */
void lah_tty_open(lua_State *L);

/* The stderr log handler of the agenthost program and of the module in a plain lua5.4:
 * "agenthost: <level>: <line>". While a status display is on the terminal
 * (ah.status_on_terminal(true) and stderr is a tty), the LLM request retry and give-up
 * warnings are left to it: it shows the same facts as its transient line, and printed
 * here they would stack up in the transcript. Every other line is printed. */
void lah_log_to_stderr(void *ud, ah_log_level level, const char *line);

#endif
