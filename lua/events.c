/* events.c - events as Lua tables, generated from the one list of event types and fields
 * (AH_EVENT_MAP in agenthost/event.h), and the per-event hook call of on_event.
 *
 * Two ways to build an event's table, with the same fields and values:
 *  - lah_push_event: from C, lua_createtable + one lua_setfield per field (the status
 *    display, a tool call's on_event, the first reused delta table).
 *  - lah_event_hook: the hot path of on_event. Per event type a small Lua function,
 *    compiled once per state from the same list,
 *        function(h, r, t, llm_call, block, text)
 *          return h{type = "text_delta", run_id = r, ts_ms = t, llm_call = llm_call, ...}
 *        end
 *    is called with the hook and the field values: the table is built by the VM's
 *    constructor (sized, constant keys, the type name a constant of the function) and the
 *    hook is a tail call from Lua, so there is one C->Lua call per event and no string is
 *    made per event but the text and the (cached) run id.
 * A null field (status 0, no error, a NULL string) is absent (nil) either way. A table
 * is fresh unless the hook cannot tell: for a hook that provably cannot keep, pass on or
 * change its table (lah_hook_keeps_nothing, lua/hook_escape.c) one table per run and
 * delta type is refilled, and a delta of the same run, call and block as the last one
 * only sets ts_ms and text (a per-run closure over the hook and the table); the opt-in
 * ah.agent{on_event_reuse = true} refills every field of one table per delta type.
 *
 * Invariants: the trampolines live in a userdata in the registry (one per state),
 * created on first use and never changed; the run-id cache and the refilled tables are
 * the caller's (one lah_event_cache per run); a refilled table is never refilled while a
 * hook holding it runs (a delta emitted from inside that hook gets a fresh one). */
#include "lah.h"
#include "internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- lah_push_event ---------------------------------------------------------------- */

/* A NUM field: an integer where the runtime has them and the value is whole */
static void lah_push_number(lua_State *L, double v)
{
    if (v == floor(v) && fabs(v) < 9e15)
        lua_pushinteger(L, (lua_Integer)v);
    else
        lua_pushnumber(L, (lua_Number)v);
}

/* Set field key of the table on top to the value on top; a null value is left out */
#define SET(key) lua_setfield(L, -2, key)
#define NUL(key) (void)0 /* absent */
#define T_INT(v, key, arg) (lua_pushinteger(L, (lua_Integer)(v)), SET(key));
#define T_I64(v, key, arg) T_INT(v, key, arg)
#define T_BOOL(v, key, arg) (lua_pushboolean(L, (v) != 0), SET(key));
#define T_STR(v, key, arg)                                                                \
    if (v) {                                                                              \
        lua_pushstring(L, v);                                                             \
        SET(key);                                                                         \
    } else                                                                                \
        NUL(key);
#define T_TEXT(v, key, arg) (lua_pushlstring(L, (v) ? (v) : "", (v) ? p->len : 0), SET(key));
#define T_STATUS(v, key, arg)                                                             \
    if (v)                                                                                \
        T_INT(v, key, arg)                                                                \
    else                                                                                  \
        NUL(key);
#define T_ERROR(v, key, arg)                                                              \
    if ((v) && (v)->kind != AH_EK_NONE) {                                                 \
        lah_push_error(L, v);                                                             \
        SET(key);                                                                         \
    } else                                                                                \
        NUL(key);
#define T_ENUM(v, key, arg) (lua_pushstring(L, ah_##arg##_name(v)), SET(key));
#define T_NUM(v, key, arg)                                                                \
    if (!isnan(v)) {                                                                      \
        lah_push_number(L, v);                                                            \
        SET(key);                                                                         \
    } else                                                                                \
        NUL(key);
#define T_RUN_ID(v, key, arg) /* the common run_id */
#define T_FIELD(kind, m, arg) T_##kind(p->m, #m, arg)
#define T_CASE(name, s, member, own, ...)                                                 \
    case AH_EV_##name: {                                                                  \
        const struct ah__ev_##member *p = &ev->u.member;                                  \
        (void)p;                                                                          \
        __VA_ARGS__                                                                       \
        break;                                                                            \
    }

/* The event's run (run_start's own id when the emitter left the common one unset) */
static const char *run_id_of(const ah_event *ev)
{
    if (!ev->run_id && ev->type == AH_EV_RUN_START)
        return ev->u.run_start.run_id;
    return ev->run_id;
}

static void fill(lua_State *L, const ah_event *ev)
{
    lua_pushstring(L, ah_event_type_name(ev->type));
    SET("type");
    const char *rid = run_id_of(ev);
    T_STR(rid, "run_id", )
    T_I64(ev->ts_ms, "ts_ms", )
    switch (ev->type) {
        AH_EVENT_MAP(T_CASE, T_FIELD)
    case AH_EV_COUNT_:
        break;
    }
}

/* Fields per type, for lua_createtable: the three common ones and the type's own */
#define N_FIELD(kind, m, arg) N_##kind
#define N_INT +1
#define N_I64 +1
#define N_BOOL +1
#define N_STR +1
#define N_TEXT +1
#define N_STATUS +1
#define N_ERROR +1
#define N_ENUM +1
#define N_NUM +1
#define N_RUN_ID
#define N_TYPE(name, s, member, own, ...) 3 __VA_ARGS__,
static const unsigned char n_fields[AH_EV_COUNT_ + 1] = {AH_EVENT_MAP(N_TYPE, N_FIELD) 3};

void lah_push_event(lua_State *L, const ah_event *ev)
{
    unsigned t = (unsigned)ev->type < (unsigned)AH_EV_COUNT_ ? (unsigned)ev->type : AH_EV_COUNT_;
    lua_createtable(L, 0, n_fields[t]);
    fill(L, ev);
}

/* ---- the hook call ------------------------------------------------------------------ */

/* The trampolines' source, per type: their parameters and the constructor's fields */
#define A_FIELD(kind, m, arg) A_##kind(m)
#define A_RUN_ID(m)
#define A_INT(m) ", " #m
#define A_I64 A_INT
#define A_BOOL A_INT
#define A_STR A_INT
#define A_TEXT A_INT
#define A_STATUS A_INT
#define A_ERROR A_INT
#define A_ENUM A_INT
#define A_NUM A_INT
#define S_FIELD(kind, m, arg) S_##kind(m)
#define S_RUN_ID(m)
#define S_INT(m) ", " #m " = " #m
#define S_I64 S_INT
#define S_BOOL S_INT
#define S_STR S_INT
#define S_TEXT S_INT
#define S_STATUS S_INT
#define S_ERROR S_INT
#define S_ENUM S_INT
#define S_NUM S_INT
#define R_FIELD(kind, m, arg) R_##kind(m)
#define R_RUN_ID(m)
#define R_INT(m) " ah__e." #m " = " #m
#define R_I64 R_INT
#define R_BOOL R_INT
#define R_STR R_INT
#define R_TEXT R_INT
#define R_STATUS R_INT
#define R_ERROR R_INT
#define R_ENUM R_INT
#define R_NUM R_INT
#define SRC(name, s, member, own, ...) "" __VA_ARGS__,
static const char *const params[] = {AH_EVENT_MAP(SRC, A_FIELD)};
static const char *const ctor[] = {AH_EVENT_MAP(SRC, S_FIELD)};
static const char *const refill_src[] = {AH_EVENT_MAP(SRC, R_FIELD)};

typedef struct trampolines {
    int fresh[AH_EV_COUNT_];  /* function(h, r, t, ...) return h{...} end */
    int reused[AH_EV_COUNT_]; /* function(h, e, r, t, ...) e.run_id = r ... return h(e) end */
    int bind_delta; /* function(h, e) return function(t, x) e.ts_ms = t ... end end */
} trampolines;

/* For a hook that cannot change its table (lah_hook_keeps_nothing): a delta of the same
 * run, call and block as the last one differs from it only in ts_ms and text */
static const char BIND_DELTA[] = "return function(ah__h, ah__e) return function(ah__t, ah__x) "
                                 "ah__e.ts_ms = ah__t ah__e.text = ah__x return ah__h(ah__e) "
                                 "end end";

static const char TRAMPOLINES_KEY = 'T';

static int compile(lua_State *L, const char *src, const char *name)
{
    if (luaL_loadbuffer(L, src, strlen(src), name) != LUA_OK ||
        lah_pcall_hook(L, 0, 1) != LUA_OK) /* the binding's one way into Lua */
        return luaL_error(L, "agenthost: event hook %s: %s", name, lua_tostring(L, -1));
    return luaL_ref(L, LUA_REGISTRYINDEX);
}

static trampolines *get_trampolines(lua_State *L)
{
    if (lua_rawgetp(L, LUA_REGISTRYINDEX, &TRAMPOLINES_KEY) == LUA_TUSERDATA) {
        trampolines *tr = lua_touserdata(L, -1);
        lua_pop(L, 1);
        return tr;
    }
    lua_pop(L, 1);
    trampolines *tr = lua_newuserdatauv(L, sizeof *tr, 0);
    for (int i = 0; i < AH_EV_COUNT_; i++)
        tr->fresh[i] = tr->reused[i] = LUA_NOREF;
    lua_rawsetp(L, LUA_REGISTRYINDEX, &TRAMPOLINES_KEY);
    char src[1024];
    for (int i = 0; i < AH_EV_COUNT_; i++) {
        const char *type = ah_event_type_name((ah_event_type)i);
        snprintf(src, sizeof src,
                 "return function(ah__h, ah__r, ah__t%s) return ah__h{type = \"%s\", "
                 "run_id = ah__r, ts_ms = ah__t%s} end",
                 params[i], type, ctor[i]);
        tr->fresh[i] = compile(L, src, "=on_event");
        snprintf(src, sizeof src,
                 "return function(ah__h, ah__e, ah__r, ah__t%s) ah__e.run_id = ah__r "
                 "ah__e.ts_ms = ah__t%s return ah__h(ah__e) end",
                 params[i], refill_src[i]);
        tr->reused[i] = compile(L, src, "=on_event");
    }
    tr->bind_delta = compile(L, BIND_DELTA, "=on_event");
    return tr;
}

/* The values of the type's own fields, in the list's order; returns how many (the
 * type's fields less the three common ones) */
#define P_INT(v, arg) lua_pushinteger(L, (lua_Integer)(v));
#define P_I64 P_INT
#define P_BOOL(v, arg) lua_pushboolean(L, (v) != 0);
#define P_STR(v, arg)                                                                     \
    if (v)                                                                                \
        lua_pushstring(L, v);                                                             \
    else                                                                                  \
        lua_pushnil(L);
#define P_TEXT(v, arg) lua_pushlstring(L, (v) ? (v) : "", (v) ? p->len : 0);
#define P_STATUS(v, arg)                                                                  \
    if (v)                                                                                \
        lua_pushinteger(L, v);                                                            \
    else                                                                                  \
        lua_pushnil(L);
#define P_ERROR(v, arg)                                                                   \
    if ((v) && (v)->kind != AH_EK_NONE)                                                   \
        lah_push_error(L, v);                                                             \
    else                                                                                  \
        lua_pushnil(L);
#define P_ENUM(v, arg) lua_pushstring(L, ah_##arg##_name(v));
#define P_NUM(v, arg)                                                                     \
    if (!isnan(v))                                                                        \
        lah_push_number(L, v);                                                            \
    else                                                                                  \
        lua_pushnil(L);
#define P_RUN_ID(v, arg) /* not an argument */
#define P_FIELD(kind, m, arg) P_##kind(p->m, arg)
#define P_CASE(name, s, member, own, ...)                                                 \
    case AH_EV_##name: {                                                                  \
        const struct ah__ev_##member *p = &ev->u.member;                                  \
        (void)p;                                                                          \
        __VA_ARGS__                                                                       \
        break;                                                                            \
    }

static int push_args(lua_State *L, const ah_event *ev)
{
    switch (ev->type) {
        AH_EVENT_MAP(P_CASE, P_FIELD)
    case AH_EV_COUNT_:
        break;
    }
    return n_fields[ev->type] - 3;
}

void lah_event_cache_init(lua_State *L, lah_event_cache *c)
{
    c->tr = get_trampolines(L);
    c->depth = lah_hook_depth_slot(L);
    c->run_id = NULL;
    c->run_id_ref = LUA_NOREF;
    c->reused[0] = c->reused[1] = c->bound[0] = c->bound[1] = LUA_NOREF;
    c->busy[0] = c->busy[1] = 0;
}

void lah_event_cache_free(lua_State *L, lah_event_cache *c)
{
    int *refs[] = {&c->run_id_ref, &c->reused[0], &c->reused[1], &c->bound[0], &c->bound[1]};
    for (size_t i = 0; i < sizeof refs / sizeof refs[0]; i++) {
        if (*refs[i] != LUA_NOREF && *refs[i] != LUA_REFNIL)
            luaL_unref(L, LUA_REGISTRYINDEX, *refs[i]);
        *refs[i] = LUA_NOREF;
    }
    c->run_id = NULL;
}

/* The run id as a Lua string: made once per run, not once per event */
static void push_run_id(lua_State *L, lah_event_cache *c, const char *rid)
{
    if (!rid) {
        lua_pushnil(L);
        return;
    }
    if (c->run_id == rid && c->run_id_ref != LUA_NOREF) {
        lua_rawgeti(L, LUA_REGISTRYINDEX, c->run_id_ref);
        return;
    }
    lua_pushstring(L, rid);
    if (c->run_id_ref != LUA_NOREF)
        luaL_unref(L, LUA_REGISTRYINDEX, c->run_id_ref);
    lua_pushvalue(L, -1);
    c->run_id_ref = luaL_ref(L, LUA_REGISTRYINDEX);
    c->run_id = rid;
}

int lah_event_hook(lua_State *L, int hook_ref, const ah_event *ev, lah_event_cache *c,
                   int reuse)
{
    if ((unsigned)ev->type >= (unsigned)AH_EV_COUNT_ || !lua_checkstack(L, 20))
        return LUA_OK; /* dropped, as an event the stack has no room for always was */
    const trampolines *tr = c->tr;
    lua_pushcfunction(L, lah_traceback);
    int msgh = lua_gettop(L);
    int k = ev->type == AH_EV_TEXT_DELTA ? 0 : ev->type == AH_EV_REASONING_DELTA ? 1 : -1;
    int nargs;
    if (k >= 0 && c->busy[k])
        reuse = LAH_REUSE_NONE; /* a delta inside the hook of one: its table is in use */
    if (!reuse || k < 0) {
        lua_rawgeti(L, LUA_REGISTRYINDEX, tr->fresh[ev->type]);
        lua_rawgeti(L, LUA_REGISTRYINDEX, hook_ref);
        push_run_id(L, c, run_id_of(ev));
        lua_pushinteger(L, (lua_Integer)ev->ts_ms);
        nargs = 3 + push_args(L, ev);
    } else if (c->reused[k] == LUA_NOREF) {
        /* the first delta of its type: a table from C, kept for the next ones */
        lua_rawgeti(L, LUA_REGISTRYINDEX, hook_ref);
        lah_push_event(L, ev);
        lua_pushvalue(L, -1);
        c->reused[k] = luaL_ref(L, LUA_REGISTRYINDEX);
        if (reuse == LAH_REUSE_READ_ONLY) {
            lua_rawgeti(L, LUA_REGISTRYINDEX, tr->bind_delta);
            lua_pushvalue(L, -3);
            lua_pushvalue(L, -3);
            if (lah_pcall_hook(L, 2, 1) == LUA_OK)
                c->bound[k] = luaL_ref(L, LUA_REGISTRYINDEX);
            else
                lua_pop(L, 1); /* out of memory: the next deltas refill every field */
        }
        nargs = 1;
    } else if (c->bound[k] != LUA_NOREF && run_id_of(ev) == c->delta_run_id[k] &&
               ev->u.delta.llm_call == c->delta_call[k] &&
               ev->u.delta.block == c->delta_block[k]) {
        /* the table still holds this delta's run, call and block: only ts_ms and text */
        lua_rawgeti(L, LUA_REGISTRYINDEX, c->bound[k]);
        lua_pushinteger(L, (lua_Integer)ev->ts_ms);
        lua_pushlstring(L, ev->u.delta.text ? ev->u.delta.text : "",
                        ev->u.delta.text ? ev->u.delta.len : 0);
        nargs = 2;
    } else {
        lua_rawgeti(L, LUA_REGISTRYINDEX, tr->reused[ev->type]);
        lua_rawgeti(L, LUA_REGISTRYINDEX, hook_ref);
        lua_rawgeti(L, LUA_REGISTRYINDEX, c->reused[k]);
        push_run_id(L, c, run_id_of(ev));
        lua_pushinteger(L, (lua_Integer)ev->ts_ms);
        nargs = 4 + push_args(L, ev);
    }
    if (k >= 0) {
        c->delta_run_id[k] = run_id_of(ev);
        c->delta_call[k] = ev->u.delta.llm_call;
        c->delta_block[k] = ev->u.delta.block;
    }
    int held = reuse && k >= 0;
    if (held)
        c->busy[k] = 1;
    int st = lah_pcall_hook_at(L, nargs, 0, msgh, c->depth);
    if (held)
        c->busy[k] = 0;
    if (st == LUA_OK)
        lua_pop(L, 1); /* msgh */
    else
        lua_remove(L, msgh); /* leaves the message */
    return st;
}

/* ---- coalescing deltas for a display (ah.agent{on_event_coalesce = ...}) ------------ */

struct lah_coalescer {
    ah_loop *loop;
    ah_timer *timer;
    int64_t ms;
    size_t max_bytes;
    lah_deliver_fn deliver;
    void *ud;
    int pending;
    int64_t started_ms; /* loop clock at the first buffered delta */
    ah_event ev;        /* the merged delta: the first one's fields, the text below */
    char *text;
    size_t len, cap;
};

static void flush(lah_coalescer *c)
{
    if (!c->pending)
        return;
    c->pending = 0;
    ah_timer_stop(c->timer);
    c->ev.u.delta.text = c->text ? c->text : "";
    c->ev.u.delta.len = c->len;
    c->deliver(c->ud, &c->ev);
}

static void on_timer(void *ud)
{
    flush(ud);
}

lah_coalescer *lah_coalescer_new(ah_loop *loop, int64_t ms, size_t max_bytes,
                                 lah_deliver_fn deliver, void *ud)
{
    lah_coalescer *c = calloc(1, sizeof *c);
    if (!c)
        return NULL;
    c->timer = ah_timer_new(loop, on_timer, c);
    if (!c->timer) {
        free(c);
        return NULL;
    }
    c->loop = loop;
    c->ms = ms;
    c->max_bytes = max_bytes;
    c->deliver = deliver;
    c->ud = ud;
    return c;
}

void lah_coalescer_free(lah_coalescer *c)
{
    if (!c)
        return;
    ah_timer_free(c->timer);
    free(c->text);
    free(c);
}

static int append(lah_coalescer *c, const ah_event *ev)
{
    size_t n = ev->u.delta.text ? ev->u.delta.len : 0;
    if (c->len + n > c->cap) {
        size_t cap = c->cap ? c->cap : 256;
        while (cap < c->len + n)
            cap *= 2;
        char *t = realloc(c->text, cap);
        if (!t)
            return 0;
        c->text = t;
        c->cap = cap;
    }
    if (n)
        memcpy(c->text + c->len, ev->u.delta.text, n);
    c->len += n;
    return 1;
}

int lah_coalescer_feed(lah_coalescer *c, const ah_event *ev)
{
    if (ev->type != AH_EV_TEXT_DELTA && ev->type != AH_EV_REASONING_DELTA) {
        flush(c); /* what came before it first */
        return 0;
    }
    if (c->pending && (ev->type != c->ev.type || ev->run_id != c->ev.run_id ||
                       ev->u.delta.llm_call != c->ev.u.delta.llm_call ||
                       ev->u.delta.block != c->ev.u.delta.block))
        flush(c);
    if (!c->pending) {
        c->ev = *ev;
        c->len = 0;
        c->started_ms = ah_loop_now_ms(c->loop);
    }
    if (!append(c, ev)) { /* out of memory: no merging for this one */
        flush(c);
        return 0;
    }
    c->pending = 1;
    int64_t waited = ah_loop_now_ms(c->loop) - c->started_ms;
    if (c->len >= c->max_bytes || waited >= c->ms)
        flush(c);
    else if (!ah_timer_active(c->timer))
        ah_timer_start(c->timer, c->ms - waited);
    return 1;
}
