/* compat.h - one binding source for Lua 5.1, 5.2, 5.3, 5.4 and LuaJIT 2.1 (the way luv,
 * lua-cjson and luaposix do it): the binding is written against the Lua 5.4 C API, and
 * this header supplies what an older runtime lacks, with the 5.4 meaning.
 *
 * What differs, and where it is handled (docs/lua.md "Runtimes" lists what users see):
 *  - user values: 5.4 has n per userdata (lua_newuserdatauv); 5.2/5.3 one, 5.1 an
 *    environment table. Here a userdata with n > 0 user values carries one table holding
 *    them (slot i = user value i), so lua_getiuservalue/lua_setiuservalue read and write
 *    that table.
 *  - lua_getfield & co return the type only from 5.3 on; wrapped to return it.
 *  - lua_resume's signature (5.1: no `from`, 5.2/5.3: no result count): in the one
 *    place that resumes, lah_gate_resume (lua/gate.c).
 *  - integers: 5.1/5.2 (and LuaJIT) have doubles only. lua_isinteger means "a number
 *    with an integral value" there, and LUA_MAXINTEGER is 2^53 (the largest integer a
 *    double holds with every smaller one).
 *  - yields: no lua_yieldk/lua_pcallk before 5.2, so no C function of the binding ever
 *    waits (lua/waits.lua does, in Lua); lahc_can_yield() says whether the running Lua
 *    code may yield (lua_isyieldable from 5.3 and on LuaJIT, a look at the call stack on
 *    5.1/5.2).
 *  - lua_resetthread (closing to-be-closed variables of a dead coroutine): 5.4 only.
 * The module for the 5.1 ABI is one file for PUC Lua 5.1 and LuaJIT (both load from
 * lib/lua/5.1): it is compiled against whichever 5.1 headers were found and asks at run
 * time for what only LuaJIT has (lua_isyieldable, through a weak reference).
 */
#ifndef LAH_COMPAT_H
#define LAH_COMPAT_H

#include <lauxlib.h>
#include <lua.h>

#include <stddef.h>

#ifndef LUA_OK
#define LUA_OK 0
#endif

/* Whole numbers: a double holds every integer up to 2^53 exactly. */
#if LUA_VERSION_NUM < 503
#define LAH_DOUBLES_ONLY 1
#define LUA_MAXINTEGER ((lua_Integer)9007199254740992LL)
#define LUA_MININTEGER ((lua_Integer)-9007199254740992LL)
int lahc_isinteger(lua_State *L, int idx);
#define lua_isinteger(L, i) lahc_isinteger((L), (i))
#else
#define LAH_DOUBLES_ONLY 0
#endif

/* ---- what 5.2 added ---------------------------------------------------------------- */
#if LUA_VERSION_NUM < 502
#define LUA_RIDX_MAINTHREAD_MISSING 1
#define lua_rawlen(L, i) lua_objlen((L), (i))
int lahc_absindex(lua_State *L, int idx);
#define lua_absindex(L, i) lahc_absindex((L), (i))
void lahc_setfuncs(lua_State *L, const luaL_Reg *l, int nup);
#define luaL_setfuncs(L, l, n) lahc_setfuncs((L), (l), (n))
#ifndef luaL_newlib /* LuaJIT 2.1's lauxlib.h has them (and luaL_setfuncs) */
#define luaL_newlibtable(L, l) lua_createtable((L), 0, (int)(sizeof(l) / sizeof((l)[0]) - 1))
#define luaL_newlib(L, l) (luaL_newlibtable((L), (l)), luaL_setfuncs((L), (l), 0))
#endif
void lahc_setmetatable(lua_State *L, const char *tname);
#define luaL_setmetatable(L, t) lahc_setmetatable((L), (t))
void *lahc_testudata(lua_State *L, int idx, const char *tname);
#define luaL_testudata(L, i, t) lahc_testudata((L), (i), (t))
const char *lahc_tolstring(lua_State *L, int idx, size_t *len);
#define luaL_tolstring(L, i, n) lahc_tolstring((L), (i), (n))
void lahc_traceback(lua_State *L, lua_State *L1, const char *msg, int level);
#define luaL_traceback(L, L1, m, l) lahc_traceback((L), (L1), (m), (l))
lua_Integer lahc_len(lua_State *L, int idx);
#define luaL_len(L, i) lahc_len((L), (i))
int lahc_getsubtable(lua_State *L, int idx, const char *fname);
#define luaL_getsubtable(L, i, f) lahc_getsubtable((L), (i), (f))
void lahc_rawsetp(lua_State *L, int idx, const void *p);
#define lua_rawsetp(L, i, p) lahc_rawsetp((L), (i), (p))
lua_Integer lahc_tointegerx(lua_State *L, int idx, int *isnum);
#define lua_tointegerx(L, i, n) lahc_tointegerx((L), (i), (n))
#define LUA_LOADED_TABLE "_LOADED"
#define LUA_PRELOAD_TABLE "_PRELOAD"
#endif

/* ---- what 5.3 changed: getters return the type ------------------------------------- */
#if LUA_VERSION_NUM < 503
int lahc_getfield(lua_State *L, int idx, const char *k);
int lahc_rawgeti(lua_State *L, int idx, lua_Integer n);
int lahc_rawget(lua_State *L, int idx);
int lahc_gettable(lua_State *L, int idx);
int lahc_getglobal(lua_State *L, const char *name);
int lahc_getmetafield(lua_State *L, int idx, const char *e);
int lahc_rawgetp(lua_State *L, int idx, const void *p);
#define lua_rawgetp(L, i, p) lahc_rawgetp((L), (i), (p))
#define lua_getfield(L, i, k) lahc_getfield((L), (i), (k))
#define lua_rawgeti(L, i, n) lahc_rawgeti((L), (i), (n))
#define lua_rawget(L, i) lahc_rawget((L), (i))
#define lua_gettable(L, i) lahc_gettable((L), (i))
#undef lua_getglobal
#define lua_getglobal(L, n) lahc_getglobal((L), (n))
#define luaL_getmetafield(L, i, e) lahc_getmetafield((L), (i), (e))
#endif

/* ---- what 5.4 added ------------------------------------------------------------------ */
#if LUA_VERSION_NUM < 504
void *lahc_newuserdatauv(lua_State *L, size_t size, int nuv);
int lahc_getiuservalue(lua_State *L, int idx, int n);
int lahc_setiuservalue(lua_State *L, int idx, int n);
#define lua_newuserdatauv(L, s, n) lahc_newuserdatauv((L), (s), (n))
#define lua_getiuservalue(L, i, n) lahc_getiuservalue((L), (i), (n))
#define lua_setiuservalue(L, i, n) lahc_setiuservalue((L), (i), (n))
#endif

/* ---- coroutines ---------------------------------------------------------------------- */

/* 1 when the Lua code that called the running C function may yield its coroutine here:
 * no C call between (pcall on PUC 5.1, a C function that called back into Lua, a
 * metamethod or an iterator on 5.1). Only meaningful inside a coroutine. */
int lahc_can_yield(lua_State *L);

/* Close a dead coroutine's pending to-be-closed variables (5.4); no-op before 5.4. */
void lahc_closethread(lua_State *co);

/* The Lua runtime this module runs in, for ah.runtime and error messages: "Lua 5.4",
 * "LuaJIT 2.1.0-beta3", ... (read at run time: the 5.1 module serves LuaJIT too). */
const char *lahc_runtime_name(lua_State *L);
/* 1 when running in LuaJIT (which yields across pcall, metamethods and iterators). */
int lahc_is_luajit(void);

/* lua_dump with the 5.4 signature (strip ignored before 5.3). */
#if LUA_VERSION_NUM < 503
#define lahc_dump(L, w, d, s) ((void)(s), lua_dump((L), (w), (d)))
#else
#define lahc_dump(L, w, d, s) lua_dump((L), (w), (d), (s))
#endif

#endif
