/* tty.c - ah.isatty(file) and ah.term_width(file): whether a Lua file handle refers to
 * a terminal, and how many columns it has (see tty.h). No state; reads the handle's FILE:
 * luaL_Stream from 5.2 on (closed when closef is NULL), a FILE* first (NULL when closed)
 * in Lua 5.1 and LuaJIT. */
#include "tty.h"

#include "compat.h"

#include <lualib.h>
#include <stdio.h>
#include <sys/ioctl.h>
#include <unistd.h>

/* The open FILE of the io handle at 1, or NULL when it is closed. */
static FILE *check_file(lua_State *L)
{
    void *ud = luaL_checkudata(L, 1, LUA_FILEHANDLE);
#if LUA_VERSION_NUM >= 502
    luaL_Stream *s = ud;
    return s->closef != NULL ? s->f : NULL;
#else
    return *(FILE **)ud;
#endif
}

static int l_isatty(lua_State *L)
{
    FILE *f = check_file(L);
    lua_pushboolean(L, f != NULL && isatty(fileno(f)));
    return 1;
}

/* The terminal's real width (TIOCGWINSZ), asked each time: terminals get resized. */
static int l_term_width(lua_State *L)
{
    FILE *f = check_file(L);
    struct winsize ws;
    if (f == NULL || ioctl(fileno(f), TIOCGWINSZ, &ws) != 0 || ws.ws_col == 0) {
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
