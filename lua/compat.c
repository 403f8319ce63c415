/* compat.c - the functions of compat.h that an older Lua lacks, with the meaning Lua 5.4
 * gives them. A parenthesized name, `(lua_getfield)(...)`, calls the runtime's own
 * function past the macro of the same name. */
#include "compat.h"

#include <math.h>
#include <string.h>

/* ---- integers on doubles-only runtimes ----------------------------------------------- */
#if LUA_VERSION_NUM < 503
int lahc_isinteger(lua_State *L, int idx)
{
    if (lua_type(L, idx) != LUA_TNUMBER)
        return 0;
    lua_Number n = lua_tonumber(L, idx);
    return n == floor(n) && n >= -9007199254740992.0 && n <= 9007199254740992.0;
}
#endif

/* ---- 5.2 ----------------------------------------------------------------------------- */
#if LUA_VERSION_NUM < 502
int lahc_absindex(lua_State *L, int idx)
{
    return idx > 0 || idx <= LUA_REGISTRYINDEX ? idx : lua_gettop(L) + idx + 1;
}

void lahc_setfuncs(lua_State *L, const luaL_Reg *l, int nup)
{
    luaL_checkstack(L, nup + 1, "too many upvalues");
    for (; l->name; l++) {
        for (int i = 0; i < nup; i++)
            lua_pushvalue(L, -nup);
        lua_pushcclosure(L, l->func, nup);
        lua_setfield(L, -(nup + 2), l->name);
    }
    lua_pop(L, nup);
}

void lahc_setmetatable(lua_State *L, const char *tname)
{
    luaL_getmetatable(L, tname);
    lua_setmetatable(L, -2);
}

void *lahc_testudata(lua_State *L, int idx, const char *tname)
{
    void *p = lua_touserdata(L, idx);
    if (!p || !lua_getmetatable(L, idx))
        return NULL;
    luaL_getmetatable(L, tname);
    int same = lua_rawequal(L, -1, -2);
    lua_pop(L, 2);
    return same ? p : NULL;
}

const char *lahc_tolstring(lua_State *L, int idx, size_t *len)
{
    idx = lahc_absindex(L, idx);
    if (luaL_callmeta(L, idx, "__tostring")) {
        if (!lua_isstring(L, -1))
            luaL_error(L, "'__tostring' must return a string");
    } else {
        switch (lua_type(L, idx)) {
        case LUA_TNUMBER:
        case LUA_TSTRING:
            lua_pushvalue(L, idx);
            break;
        case LUA_TBOOLEAN:
            lua_pushstring(L, lua_toboolean(L, idx) ? "true" : "false");
            break;
        case LUA_TNIL:
            lua_pushliteral(L, "nil");
            break;
        default:
            lua_pushfstring(L, "%s: %p", luaL_typename(L, idx), lua_topointer(L, idx));
            break;
        }
    }
    return lua_tolstring(L, -1, len);
}

/* luaL_traceback as Lua 5.2 writes it (LuaJIT has its own, PUC 5.1 none): the levels of
 * L1 from `level` on, the middle ones elided when there are many. */
void lahc_traceback(lua_State *L, lua_State *L1, const char *msg, int level)
{
    enum { LEVELS1 = 12, LEVELS2 = 10 };
    lua_Debug ar;
    int top = lua_gettop(L);
    int last = level; /* find the last level, to elide the middle of a deep stack */
    while (lua_getstack(L1, last, &ar))
        last++;
    if (msg)
        lua_pushfstring(L, "%s\n", msg);
    lua_pushliteral(L, "stack traceback:");
    for (; lua_getstack(L1, level, &ar); level++) {
        if (level == LEVELS1 && last - level > LEVELS2 + 1) {
            lua_pushliteral(L, "\n\t...");
            level = last - LEVELS2 - 1;
            continue;
        }
        lua_getinfo(L1, "Sln", &ar);
        lua_pushfstring(L, "\n\t%s:", ar.short_src);
        if (ar.currentline > 0)
            lua_pushfstring(L, "%d:", ar.currentline);
        if (*ar.namewhat != '\0')
            lua_pushfstring(L, " in function '%s'", ar.name);
        else if (*ar.what == 'm')
            lua_pushliteral(L, " in main chunk");
        else if (*ar.what == 'C' || *ar.what == 't')
            lua_pushliteral(L, " ?");
        else
            lua_pushfstring(L, " in function <%s:%d>", ar.short_src, ar.linedefined);
        lua_concat(L, lua_gettop(L) - top);
    }
    lua_concat(L, lua_gettop(L) - top);
}

lua_Integer lahc_len(lua_State *L, int idx)
{
    idx = lahc_absindex(L, idx);
    if (luaL_callmeta(L, idx, "__len")) {
        lua_Integer n = lua_tointeger(L, -1);
        lua_pop(L, 1);
        return n;
    }
    return (lua_Integer)lua_objlen(L, idx);
}

int lahc_getsubtable(lua_State *L, int idx, const char *fname)
{
    idx = lahc_absindex(L, idx);
    (lua_getfield)(L, idx, fname);
    if (lua_istable(L, -1))
        return 1;
    lua_pop(L, 1);
    lua_newtable(L);
    lua_pushvalue(L, -1);
    lua_setfield(L, idx, fname);
    return 0;
}

void lahc_rawsetp(lua_State *L, int idx, const void *p)
{
    idx = lahc_absindex(L, idx);
    lua_pushlightuserdata(L, (void *)p);
    lua_insert(L, -2);
    lua_rawset(L, idx);
}

lua_Integer lahc_tointegerx(lua_State *L, int idx, int *isnum)
{
    int ok = lua_isnumber(L, idx);
    if (isnum)
        *isnum = ok;
    return ok ? lua_tointeger(L, idx) : 0;
}
#endif

/* ---- 5.3: getters that return the type ----------------------------------------------- */
#if LUA_VERSION_NUM < 503
int lahc_getfield(lua_State *L, int idx, const char *k)
{
    (lua_getfield)(L, idx, k);
    return lua_type(L, -1);
}

int lahc_rawgeti(lua_State *L, int idx, lua_Integer n)
{
    (lua_rawgeti)(L, idx, (int)n);
    return lua_type(L, -1);
}

int lahc_rawget(lua_State *L, int idx)
{
    (lua_rawget)(L, idx);
    return lua_type(L, -1);
}

int lahc_gettable(lua_State *L, int idx)
{
    (lua_gettable)(L, idx);
    return lua_type(L, -1);
}

int lahc_getglobal(lua_State *L, const char *name)
{
#if LUA_VERSION_NUM < 502
    (lua_getfield)(L, LUA_GLOBALSINDEX, name);
#else
    (lua_getglobal)(L, name);
#endif
    return lua_type(L, -1);
}

int lahc_rawgetp(lua_State *L, int idx, const void *p)
{
#if LUA_VERSION_NUM < 502
    idx = lahc_absindex(L, idx);
    lua_pushlightuserdata(L, (void *)p);
    (lua_rawget)(L, idx);
#else
    (lua_rawgetp)(L, idx, p);
#endif
    return lua_type(L, -1);
}

int lahc_getmetafield(lua_State *L, int idx, const char *e)
{
    if (!(luaL_getmetafield)(L, idx, e))
        return LUA_TNIL;
    return lua_type(L, -1);
}
#endif

/* ---- 5.4: n user values -------------------------------------------------------------- */
#if LUA_VERSION_NUM < 504
/* The user values live in one table: the userdata's user value (5.2, 5.3) or its
 * environment (5.1). A userdata made with nuv = 0 has none (reads give LUA_TNONE). */
static void push_uv_table(lua_State *L, int idx)
{
#if LUA_VERSION_NUM < 502
    lua_getfenv(L, idx);
#else
    lua_getuservalue(L, idx);
#endif
}

void *lahc_newuserdatauv(lua_State *L, size_t size, int nuv)
{
    void *p = lua_newuserdata(L, size);
    if (nuv > 0) {
        lua_createtable(L, nuv, 0);
#if LUA_VERSION_NUM < 502
        lua_setfenv(L, -2);
#else
        lua_setuservalue(L, -2);
#endif
    }
    return p;
}

int lahc_getiuservalue(lua_State *L, int idx, int n)
{
    idx = lua_absindex(L, idx);
    push_uv_table(L, idx);
    if (!lua_istable(L, -1)) {
        lua_pop(L, 1);
        lua_pushnil(L);
        return LUA_TNONE;
    }
    (lua_rawgeti)(L, -1, n);
    lua_remove(L, -2);
    return lua_type(L, -1);
}

int lahc_setiuservalue(lua_State *L, int idx, int n)
{
    idx = lua_absindex(L, idx);
    push_uv_table(L, idx);
    if (!lua_istable(L, -1)) {
        lua_pop(L, 2);
        return 0;
    }
    lua_insert(L, -2);
    lua_rawseti(L, -2, n);
    lua_pop(L, 1);
    return 1;
}
#endif

/* ---- coroutines ---------------------------------------------------------------------- */

void lahc_closethread(lua_State *co)
{
#if LUA_VERSION_NUM >= 504
    lua_resetthread(co);
#else
    (void)co;
#endif
}

#if LUA_VERSION_NUM < 503
/* LuaJIT's lua_isyieldable, when the module runs in LuaJIT; NULL in PUC Lua 5.1/5.2. */
extern int lahc_luajit_isyieldable(lua_State *L) __asm__("lua_isyieldable")
    __attribute__((weak));
/* LuaJIT's luaJIT_setmode: present only in LuaJIT. */
extern int lahc_luajit_setmode(lua_State *L, int idx, int mode) __asm__("luaJIT_setmode")
    __attribute__((weak));
#endif

int lahc_is_luajit(void)
{
#if LUA_VERSION_NUM < 503
    return lahc_luajit_setmode != NULL;
#else
    return 0;
#endif
}

#if LUA_VERSION_NUM == 502
/* The C functions of 5.2 that call back into Lua with a continuation (a yield inside
 * what they call comes back to them): pcall and xpcall. Compared by identity with the
 * base library's, read once. */
static int yieldable_c_frame(lua_State *L, lua_Debug *ar)
{
    static const char KEY = 'Y';
    if (!lua_getinfo(L, "f", ar))
        return 0;
    int fn = lua_gettop(L);
    if (lahc_rawgetp(L, LUA_REGISTRYINDEX, &KEY) != LUA_TTABLE) {
        lua_pop(L, 1);
        lua_createtable(L, 2, 0);
        lua_rawgeti(L, LUA_REGISTRYINDEX, LUA_RIDX_GLOBALS);
        (lua_getfield)(L, -1, "pcall");
        lua_rawseti(L, -3, 1);
        (lua_getfield)(L, -1, "xpcall");
        lua_rawseti(L, -3, 2);
        lua_pop(L, 1);
        lua_pushvalue(L, -1);
        lua_rawsetp(L, LUA_REGISTRYINDEX, &KEY);
    }
    int ok = 0;
    for (int i = 1; i <= 2 && !ok; i++) {
        (lua_rawgeti)(L, -1, i);
        ok = lua_rawequal(L, -1, fn);
        lua_pop(L, 1);
    }
    lua_settop(L, fn - 1);
    return ok;
}
#endif

int lahc_can_yield(lua_State *L)
{
#if LUA_VERSION_NUM >= 503
    return lua_isyieldable(L);
#else
#if LUA_VERSION_NUM == 501
    if (lahc_luajit_isyieldable)
        return lahc_luajit_isyieldable(L);
#endif
    /* Level 0 is the C function asking; every level above it up to the coroutine's body
     * must let a yield through. */
    lua_Debug ar;
    if (!lua_checkstack(L, 4))
        return 0;
    for (int level = 1; lua_getstack(L, level, &ar); level++) {
        lua_Debug next;
        int has_next = lua_getstack(L, level + 1, &next);
        if (!lua_getinfo(L, "Sn", &ar))
            return 0;
        if (*ar.what == 'C') {
#if LUA_VERSION_NUM == 502
            if (!yieldable_c_frame(L, &ar))
                return 0;
            continue;
#else
            return 0; /* pcall, a C function that called back into Lua */
#endif
        }
#if LUA_VERSION_NUM == 501
        if (*ar.what == 't') /* a tail call's lost frame */
            continue;
        if (!has_next) /* the coroutine's body, resumed by the scheduler */
            break;
        if (ar.name && strcmp(ar.name, "(for generator)") == 0)
            return 0; /* an iterator, called from the VM through a C boundary */
        if (*ar.namewhat == '\0') {
            /* no name: tail-called (the next level is the lost frame) or called from
             * C / as a metamethod */
            if (!lua_getinfo(L, "S", &next) || *next.what != 't')
                return 0;
        }
#else
        (void)has_next;
#endif
    }
    return 1;
#endif
}

const char *lahc_runtime_name(lua_State *L)
{
#if LUA_VERSION_NUM < 503
    if (lahc_is_luajit()) {
        (lua_getfield)(L, LUA_REGISTRYINDEX, "_LOADED");
        const char *v = NULL;
        if (lua_istable(L, -1)) {
            (lua_getfield)(L, -1, "jit");
            if (lua_istable(L, -1)) {
                (lua_getfield)(L, -1, "version");
                v = lua_tostring(L, -1); /* interned, and jit.version stays: anchored */
                lua_pop(L, 1);
            }
            lua_pop(L, 1);
        }
        lua_pop(L, 1);
        return v ? v : "LuaJIT";
    }
#else
    (void)L;
#endif
    return LUA_VERSION;
}
