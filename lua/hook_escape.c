/* hook_escape.c - can an on_event hook keep its event table? (lah_hook_keeps_nothing)
 *
 * A fresh table per event is what makes `evs[#evs + 1] = ev` keep its values, and it is
 * most of an empty hook's cost (a six-field table is ~2 000 instructions in Lua 5.4). A
 * hook that only reads its event (`ev.type == "text_delta"`, `ev.text`) cannot tell a
 * fresh table from one table refilled for every delta, so for such a hook the binding
 * refills one (lua/events.c). Which hooks those are is decided once, when the agent is
 * made, by reading the hook's bytecode (lua_dump): the event is the hook's first
 * parameter, register 0, and the hook qualifies only if no instruction does anything
 * with register 0 but read a field of it (GETFIELD/GETI/GETTABLE), test it (TEST), compare
 * it with a constant (EQK/EQI), take its length or negate it (LEN/NOT), or return it (the
 * caller drops a hook's results). Passing it to a function, storing it anywhere, writing
 * into it, comparing it with another value (an __eq could see it), arithmetic on it,
 * making a closure at all, or an opcode not known here: the hook gets fresh tables.
 *
 * The reading is checked before it is trusted: the dump header must be Lua 5.4's, and a
 * probe function compiled at first use must decode to the opcodes expected here; if not
 * (another Lua version), every hook gets fresh tables. What is outside the bytecode: the
 * debug library (debug.getlocal from a function the hook calls can reach the table);
 * docs/lua.md says so, and on_event_reuse = false turns the refilling off. */
#include "lah.h"

#include <stdlib.h>
#include <string.h>

#if LUA_VERSION_NUM != 504
/* Lua 5.1 to 5.3 and LuaJIT have other bytecode: every hook gets fresh tables there
 * (docs/lua.md "Runtimes"). */
int lah_hook_keeps_nothing(lua_State *L, int idx)
{
    (void)L, (void)idx;
    return 0;
}
#else

/* Lua 5.4's opcodes (lopcodes.h), the ones this file names */
enum {
    OP_MOVE = 0,
    OP_LOADI, OP_LOADF, OP_LOADK, OP_LOADKX, OP_LOADFALSE, OP_LFALSESKIP, OP_LOADTRUE,
    OP_LOADNIL, OP_GETUPVAL, OP_SETUPVAL, OP_GETTABUP, OP_GETTABLE, OP_GETI, OP_GETFIELD,
    OP_SETTABUP, OP_SETTABLE, OP_SETI, OP_SETFIELD, OP_NEWTABLE, OP_SELF, OP_ADDI, OP_ADDK,
    OP_SUBK, OP_MULK, OP_MODK, OP_POWK, OP_DIVK, OP_IDIVK, OP_BANDK, OP_BORK, OP_BXORK,
    OP_SHRI, OP_SHLI, OP_ADD, OP_SUB, OP_MUL, OP_MOD, OP_POW, OP_DIV, OP_IDIV, OP_BAND,
    OP_BOR, OP_BXOR, OP_SHL, OP_SHR, OP_MMBIN, OP_MMBINI, OP_MMBINK, OP_UNM, OP_BNOT,
    OP_NOT, OP_LEN, OP_CONCAT, OP_CLOSE, OP_TBC, OP_JMP, OP_EQ, OP_LT, OP_LE, OP_EQK,
    OP_EQI, OP_LTI, OP_LEI, OP_GTI, OP_GEI, OP_TEST, OP_TESTSET, OP_CALL, OP_TAILCALL,
    OP_RETURN, OP_RETURN0, OP_RETURN1, OP_FORLOOP, OP_FORPREP, OP_TFORPREP, OP_TFORCALL,
    OP_TFORLOOP, OP_SETLIST, OP_CLOSURE, OP_VARARG, OP_VARARGPREP, OP_EXTRAARG,
    N_OPCODES
};

#define OPC(i) ((int)((i)&0x7F))
#define ARG_A(i) ((int)(((i) >> 7) & 0xFF))
#define ARG_K(i) ((int)(((i) >> 15) & 1))
#define ARG_B(i) ((int)(((i) >> 16) & 0xFF))
#define ARG_C(i) ((int)(((i) >> 24) & 0xFF))

typedef struct dump {
    unsigned char *p;
    size_t len, cap;
} dump;

static int writer(lua_State *L, const void *p, size_t sz, void *ud)
{
    (void)L;
    dump *d = ud;
    if (d->len + sz > d->cap) {
        size_t cap = (d->len + sz) * 2;
        unsigned char *n = realloc(d->p, cap);
        if (!n)
            return 1;
        d->p = n;
        d->cap = cap;
    }
    memcpy(d->p + d->len, p, sz);
    d->len += sz;
    return 0;
}

/* lundump.c's size encoding: 7 bits a byte, most significant first, the last byte marked
 * with 0x80 */
static int read_size(const dump *d, size_t *at, size_t *out)
{
    size_t x = 0;
    for (int n = 0; n < 10 && *at < d->len; n++) {
        unsigned char b = d->p[(*at)++];
        x = (x << 7) | (b & 0x7F);
        if (b & 0x80) {
            *out = x;
            return 1;
        }
    }
    return 0;
}

/* The main function's code in a stripped 5.4 dump: 0 if the dump is not one */
static int code_of(const dump *d, const unsigned char **code, size_t *n, int *nparams,
                   int *vararg)
{
    static const unsigned char head[] = {0x1B, 'L', 'u', 'a', 0x54, 0,    0x19, 0x93,
                                         '\r', '\n', 0x1A, '\n', 4,   8,    8};
    size_t at = sizeof head + 8 + 8 + 1; /* LUAC_INT, LUAC_NUM, the upvalue count */
    if (d->len < at || memcmp(d->p, head, sizeof head) != 0)
        return 0;
    size_t src, line, v;
    if (!read_size(d, &at, &src) || src != 0) /* stripped: no source */
        return 0;
    if (!read_size(d, &at, &line) || !read_size(d, &at, &line) || at + 3 > d->len)
        return 0;
    *nparams = d->p[at];
    *vararg = d->p[at + 1];
    at += 3; /* numparams, is_vararg, maxstacksize */
    if (!read_size(d, &at, &v) || v > (d->len - at) / 4)
        return 0;
    *code = d->p + at;
    *n = v;
    return 1;
}

static unsigned instr(const unsigned char *code, size_t i)
{
    unsigned x;
    memcpy(&x, code + 4 * i, 4);
    return x;
}

/* 1 when the instruction may let register 0's value out of the hook or change it */
static int leaks_r0(unsigned i)
{
    int a = ARG_A(i), b = ARG_B(i), c = ARG_C(i), k = ARG_K(i);
    switch (OPC(i)) {
    /* write their A only, or read nothing */
    case OP_LOADI: case OP_LOADF: case OP_LOADK: case OP_LOADKX: case OP_LOADFALSE:
    case OP_LFALSESKIP: case OP_LOADTRUE: case OP_LOADNIL: case OP_GETUPVAL:
    case OP_GETTABUP: case OP_NEWTABLE: case OP_JMP: case OP_CLOSE: case OP_VARARG:
    case OP_VARARGPREP: case OP_EXTRAARG:
    /* read a field of B (a table without a metatable: nothing runs), test / compare A
     * with a constant, length or not of B, return values (the caller drops them) */
    case OP_GETFIELD: case OP_GETI: case OP_TEST: case OP_EQK: case OP_EQI: case OP_LEN:
    case OP_NOT: case OP_RETURN: case OP_RETURN0: case OP_RETURN1:
        return 0;
    case OP_GETTABLE: /* as a key, another table's __index would see it */
        return c == 0;
    case OP_SELF:
        return b == 0 || (!k && c == 0);
    case OP_MOVE: case OP_TESTSET: case OP_UNM: case OP_BNOT:
    case OP_ADDI: case OP_ADDK: case OP_SUBK: case OP_MULK: case OP_MODK: case OP_POWK:
    case OP_DIVK: case OP_IDIVK: case OP_BANDK: case OP_BORK: case OP_BXORK: case OP_SHRI:
    case OP_SHLI:
        return b == 0;
    case OP_ADD: case OP_SUB: case OP_MUL: case OP_MOD: case OP_POW: case OP_DIV:
    case OP_IDIV: case OP_BAND: case OP_BOR: case OP_BXOR: case OP_SHL: case OP_SHR:
        return b == 0 || c == 0;
    case OP_MMBIN: case OP_EQ: case OP_LT: case OP_LE:
        return a == 0 || b == 0;
    case OP_SETUPVAL: case OP_MMBINI: case OP_MMBINK: case OP_LTI: case OP_LEI:
    case OP_GTI: case OP_GEI: case OP_TBC: case OP_CONCAT: case OP_CALL: case OP_TAILCALL:
    case OP_FORLOOP: case OP_FORPREP: case OP_TFORPREP: case OP_TFORCALL:
    case OP_TFORLOOP: case OP_SETLIST:
        return a == 0; /* their registers start at A */
    case OP_SETTABUP:
        return !k && c == 0;
    case OP_SETTABLE:
        return a == 0 || b == 0 || (!k && c == 0);
    case OP_SETI: case OP_SETFIELD:
        return a == 0 || (!k && c == 0);
    default: /* OP_CLOSURE (it may capture it), and anything unknown */
        return 1;
    }
}

static int dump_top(lua_State *L, dump *d)
{
    memset(d, 0, sizeof *d);
    int st = lua_dump(L, writer, d, 1);
    if (st != 0) {
        free(d->p);
        d->p = NULL;
        return 0;
    }
    return 1;
}

/* ---- the probe: is this Lua's bytecode the one read above? -------------------------- */

static const char PROBE[] = "local n = 0\n"
                            "return function(ev, x)\n"
                            "  local t = ev.type\n"
                            "  if t == 'text_delta' then n = n + 1 end\n"
                            "  local a, b = ev[1], ev[t]\n"
                            "  if ev then print(a, b) end\n"
                            "  ev.y = x\n"
                            "  x:m(ev == x, 1 == n)\n"
                            "  return ev\n"
                            "end\n";
static const unsigned char PROBE_OPS[] = {
    OP_GETFIELD, OP_EQK, OP_JMP, OP_GETUPVAL, OP_ADDI, OP_MMBINI, OP_SETUPVAL, OP_GETI,
    OP_GETTABLE, OP_TEST, OP_JMP, OP_GETTABUP, OP_MOVE, OP_MOVE, OP_CALL, OP_SETFIELD,
    OP_SELF, OP_EQ, OP_JMP, OP_LFALSESKIP, OP_LOADTRUE, OP_GETUPVAL, OP_EQI, OP_JMP,
    OP_LFALSESKIP, OP_LOADTRUE, OP_CALL, OP_RETURN1, OP_RETURN0};

static int probe_matches(lua_State *L)
{
    int top = lua_gettop(L), ok = 0;
    if (luaL_loadbuffer(L, PROBE, sizeof PROBE - 1, "=probe") == LUA_OK &&
        lah_pcall_hook(L, 0, 1) == LUA_OK && lua_type(L, -1) == LUA_TFUNCTION) {
        dump d;
        const unsigned char *code;
        size_t n;
        int np, va;
        if (dump_top(L, &d)) {
            if (code_of(&d, &code, &n, &np, &va) && np == 2 && !va &&
                n == sizeof PROBE_OPS) {
                ok = 1;
                for (size_t i = 0; i < n && ok; i++)
                    ok = OPC(instr(code, i)) == PROBE_OPS[i];
                /* the operands are where this file reads them */
                ok = ok && ARG_B(instr(code, 0)) == 0 && ARG_A(instr(code, 15)) == 0 &&
                     ARG_K(instr(code, 15)) == 0 && ARG_C(instr(code, 15)) == 1 &&
                     ARG_B(instr(code, 16)) == 1 && ARG_K(instr(code, 16)) == 1;
            }
            free(d.p);
        }
    }
    lua_settop(L, top);
    return ok;
}

static const char PROBE_KEY = 'P'; /* registry: the probe's verdict, per state */

int lah_hook_keeps_nothing(lua_State *L, int idx)
{
    idx = lua_absindex(L, idx);
    if (lua_type(L, idx) != LUA_TFUNCTION || lua_iscfunction(L, idx))
        return 0;
    if (lua_rawgetp(L, LUA_REGISTRYINDEX, &PROBE_KEY) == LUA_TNIL) {
        lua_pop(L, 1);
        lua_pushboolean(L, probe_matches(L));
        lua_pushvalue(L, -1);
        lua_rawsetp(L, LUA_REGISTRYINDEX, &PROBE_KEY);
    }
    int trusted = lua_toboolean(L, -1);
    lua_pop(L, 1);
    if (!trusted)
        return 0;
    lua_pushvalue(L, idx);
    dump d;
    int ok = dump_top(L, &d);
    lua_pop(L, 1);
    if (!ok)
        return 0;
    const unsigned char *code;
    size_t n;
    int np, va;
    ok = code_of(&d, &code, &n, &np, &va) && (np >= 1 || !va);
    for (size_t i = 0; ok && i < n; i++)
        ok = !leaks_r0(instr(code, i));
    free(d.p);
    return ok;
}
#endif
