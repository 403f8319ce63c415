/* scripts_path.c - finding the shipped scripts (`require "agenthost.status"`, ...).
 *
 * The scripts are found relative to the binary that holds this code, never through a
 * path compiled in from the source tree, so a build tree, an installed copy and a copy
 * moved to another prefix each use their own scripts:
 *   1. $AGENTHOST_SCRIPTS/<name>.lua (a user's override);
 *   2. <dir>/lua/agenthost/<name>.lua, where <dir> holds the program or module: the
 *      build tree stages scripts/ there;
 *   3. <dir>/<rel>/agenthost/<name>.lua, where <rel> is the configured path from the
 *      install directory of the program (bin) or of the module (lib/lua/5.4) to the Lua
 *      module directory (share/lua/5.4).
 * <dir> is taken from the shared object that contains this function (dladdr: the module
 * agenthost.so when loaded by a plain lua5.4) and from /proc/self/exe (the program).
 * The searcher runs after the standard ones, so package.path still wins.
 */
#define _GNU_SOURCE /* dladdr */
#include "lah.h"

#include <dlfcn.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#ifndef AH_REL_BIN_TO_LMOD
#define AH_REL_BIN_TO_LMOD "../share/lua/5.4"
#endif
#ifndef AH_REL_CMOD_TO_LMOD
#define AH_REL_CMOD_TO_LMOD "../../../share/lua/5.4"
#endif

/* The directory part of `path` into out (no trailing slash); 0 if there is none. */
static int dir_of(const char *path, char *out, size_t size)
{
    char real[PATH_MAX];
    if (!path || !*path || !realpath(path, real))
        return 0;
    char *slash = strrchr(real, '/');
    if (!slash)
        return 0;
    *slash = '\0';
    if (strlen(real) + 1 > size)
        return 0;
    memcpy(out, real, strlen(real) + 1);
    return 1;
}

static int search_scripts(lua_State *L);

/* Candidate directories, in order, pushed as strings; returns how many. */
static int push_dirs(lua_State *L)
{
    int n = 0;
    const char *env = getenv("AGENTHOST_SCRIPTS");
    if (env && *env) {
        lua_pushstring(L, env);
        n++;
    }
    char dirs[2][PATH_MAX];
    int nd = 0;
    Dl_info info;
    if (dladdr((void *)(uintptr_t)search_scripts, &info) && dir_of(info.dli_fname, dirs[nd],
                                                                    sizeof dirs[nd]))
        nd++;
    if (dir_of("/proc/self/exe", dirs[nd], sizeof dirs[nd]) &&
        (nd == 0 || strcmp(dirs[0], dirs[nd]) != 0))
        nd++;
    for (int i = 0; i < nd; i++) {
        lua_pushfstring(L, "%s/lua/agenthost", dirs[i]);
        lua_pushfstring(L, "%s/" AH_REL_BIN_TO_LMOD "/agenthost", dirs[i]);
        lua_pushfstring(L, "%s/" AH_REL_CMOD_TO_LMOD "/agenthost", dirs[i]);
        n += 3;
    }
    return n;
}

static int search_scripts(lua_State *L)
{
    const char *name = luaL_checkstring(L, 1);
    if (strncmp(name, "agenthost.", 10) != 0) {
        lua_pushliteral(L, "");
        return 1;
    }
    const char *rest = name + 10;
    int top = lua_gettop(L);
    int n = push_dirs(L);
    for (int i = 0; i < n; i++) {
        const char *path = lua_pushfstring(L, "%s/%s.lua", lua_tostring(L, top + 1 + i), rest);
        if (access(path, R_OK) == 0) {
            if (luaL_loadfile(L, path) != LUA_OK)
                return luaL_error(L, "error loading module '%s' from file '%s':\n\t%s", name,
                                  path, lua_tostring(L, -1));
            lua_pushvalue(L, -2);
            return 2;
        }
        lua_pop(L, 1);
    }
    /* The message: one "no file" line per candidate, as package.searchpath words it. */
    for (int i = 0; i < n; i++)
        lua_pushfstring(L, "\n\tno file '%s/%s.lua'", lua_tostring(L, top + 1 + i), rest);
    lua_concat(L, n);
    return 1;
}

static const char SEARCHER_KEY = 'F'; /* set once the searcher is installed */

void lah_add_script_searcher(lua_State *L)
{
    /* once per state: the host program installs it at start (so require
     * "agenthost.status" works before require "agenthost"), the module when loaded */
    if (lua_rawgetp(L, LUA_REGISTRYINDEX, &SEARCHER_KEY) != LUA_TNIL) {
        lua_pop(L, 1);
        return;
    }
    lua_pop(L, 1);
    lua_pushboolean(L, 1);
    lua_rawsetp(L, LUA_REGISTRYINDEX, &SEARCHER_KEY);
    lua_getglobal(L, "package");
    if (!lua_istable(L, -1)) {
        lua_pop(L, 1);
        return;
    }
    lua_getfield(L, -1, "searchers");
    if (lua_istable(L, -1)) {
        lua_pushcfunction(L, search_scripts);
        lua_rawseti(L, -2, (lua_Integer)luaL_len(L, -2) + 1);
    }
    lua_pop(L, 2);
}
