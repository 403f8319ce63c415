/* tty.c - ah.isatty(file): whether a Lua file handle refers to a terminal (see tty.h).
 * No state; reads the handle's FILE through the standard luaL_Stream layout. */
#include "tty.h"

#include <lauxlib.h>
#include <lualib.h>
#include <stdio.h>
#include <unistd.h>

static int l_isatty(lua_State *L)
{
    luaL_Stream *s = luaL_checkudata(L, 1, LUA_FILEHANDLE);
    lua_pushboolean(L, s->closef != NULL && s->f != NULL && isatty(fileno(s->f)));
    return 1;
}

void lah_tty_open(lua_State *L)
{
    lua_pushcfunction(L, l_isatty);
    lua_setfield(L, -2, "isatty");
}
