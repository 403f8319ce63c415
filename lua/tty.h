/* tty.h - the terminal seam of the Lua binding (lua/tty.c).
 *
 * Plain Lua cannot ask whether a file is a terminal; the status display
 * (scripts/status.lua) needs to, to choose between its transient line and plain log
 * lines. luaopen_agenthost calls lah_tty_open() once; nothing else in the binding
 * depends on this file.
 */
#ifndef LAH_TTY_H
#define LAH_TTY_H

#include <lua.h>

/* Add to the module table at the top of the stack:
 *   ah.isatty(file) -> boolean   the Lua file (io.stderr, io.open(...)) is a terminal;
 *                                a closed file is not; anything but a file raises.
 *   ah.term_width(file) -> columns or nil   the terminal's real width (TIOCGWINSZ),
 *                                asked anew on each call; nil off a terminal. */
void lah_tty_open(lua_State *L);

#endif
