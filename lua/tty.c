/* tty.c - ah.isatty(file) and ah.term_width(file): whether a Lua file handle refers to
 * a terminal, and how many columns it has (see tty.h). No state; reads the handle's FILE
 * through the standard luaL_Stream layout. */
#include "tty.h"

#include <lauxlib.h>
#include <lualib.h>
#include <stdio.h>
#include <sys/ioctl.h>
#include <unistd.h>

static int l_isatty(lua_State *L)
{
    luaL_Stream *s = luaL_checkudata(L, 1, LUA_FILEHANDLE);
    lua_pushboolean(L, s->closef != NULL && s->f != NULL && isatty(fileno(s->f)));
    return 1;
}

/* The terminal's real width (TIOCGWINSZ), asked each time: terminals get resized. */
static int l_term_width(lua_State *L)
{
    luaL_Stream *s = luaL_checkudata(L, 1, LUA_FILEHANDLE);
    struct winsize ws;
    if (s->closef == NULL || s->f == NULL || ioctl(fileno(s->f), TIOCGWINSZ, &ws) != 0 ||
        ws.ws_col == 0) {
        lua_pushnil(L);
        return 1;
    }
    lua_pushinteger(L, ws.ws_col);
    return 1;
}

void lah_tty_open(lua_State *L)
{
    static const luaL_Reg fns[] = {
        {"isatty", l_isatty}, {"term_width", l_term_width}, {NULL, NULL}};
    luaL_setfuncs(L, fns, 0);
}
