/* tools.c - ah.tool and tool:call (docs/tools-and-ledger.md): the driver of
 * core/tool_call.c, in three primitives that never wait (tool_begin, tool_step) and the
 * Lua loop of lua/waits.lua that waits between them.
 *
 * One tool call = one ah_tool_call stepped here. RUN_BODY starts `run(args, ctx)` as a
 * coroutine of its own, a child of the call's (so a body that waits, a sub-agent, yields
 * like any coroutine, on every runtime, and its error is caught where the scheduler
 * resumes it); tool_step returns "not done" and the Lua side waits until the body has
 * ended; the next tool_step hands its result or error to the core. RETRY_AFTER arms a
 * loop timer and the Lua side waits for it the same way (never a blocking sleep).
 * Whether and how long to wait before a retry is decided inside ah_tool_step by the
 * core's retry machine, the one LLM calls use, with the tool's policy as its schedule
 * (its default retries only `transient`; the tool's retry_on, when given, sees every
 * error and decides) and the host loop's clock and RNG.
 *
 * Invariants:
 *   - the call's Lua values sit at fixed stack slots (TOOL .. KEY below) in every
 *     primitive: tool_begin saves them in the call state's slot table, each tool_step
 *     puts them back in the same slots (restore);
 *   - the call state is created after the ledger it borrows (finalizers run newest
 *     first), so its __gc still releases the key's claim in a ledger made for the call;
 *   - everything C-allocated for a call (the ah_tool_call, its timer) lives in the call
 *     state userdata at ST, whose __gc frees it: an error or an abandoned coroutine
 *     leaks nothing; finish() frees it early on the normal path;
 *   - a borrowed ledger is pinned on the stack (LEDGER) and counted busy until finish.
 */
#include "tools.h"

#include "internal.h"

#include <stdlib.h>
#include <string.h>

static int push_json_string_with_nul(lua_State *L, const char *j);

/* The tool userdata's user values. */
enum {
    UV_RUN = 1,
    UV_IDEMPOTENCY_KEY,
    UV_RETRY_ON,
    UV_ON_EVENT,
    UV_SPEC,
    UV_LEDGER,
    UV_N
};

typedef struct tool_ud {
    char *name;
    ah_policy policy; /* validated; retry_on is the Lua function at UV_RETRY_ON */
    int has_retry_on;
    /* A failing hook is logged once per tool, not on every call (lah_pcall_once). */
    int retry_on_logged, idempotency_key_logged, body_error_logged;
    char retry_on_what[96], idempotency_key_what[96];
} tool_ud;

#define CALL_MT "agenthost.toolcall"
/* Waiting for our own receipt's commit past the call's deadline: re-check this often. */
#define RECORD_RECHECK_MS 1000

/* Stack slots of one call (tool_begin's arguments are 1..3). */
enum {
    TOOL = 1,
    ARGS,
    OPTS,
    ST,       /* call_state userdata */
    ON_EVENT, /* the Lua event hook or nil */
    LEDGER,   /* ledger handle or nil */
    BUDGET,   /* budget handle or nil */
    RUN_ID,   /* ctx.run_id or nil */
    TCID,     /* ctx.tool_call_id or nil: set by an agent, which owns tool_call_end */
    KEY,      /* the idempotency key (string) or nil */
    BASE = KEY,
    /* in the slot table only: what the body's coroutine ended with */
    BODY_VALUE, /* its first result, or the error as raised */
    BODY_TB     /* "message\ntraceback" when it raised */
};

typedef struct call_state {
    lah_wait wait; /* first: the call is what lua/waits.lua waits on */
    ah_tool_call *call;
    ah_timer *timer;
    ah_loop *loop;
    int slots_ref;  /* the slot table (registry), until release */
    int body_state; /* 0 none, 1 the body returned, 2 it raised (BODY_* hold it) */
    int body_running; /* its coroutine has not ended: a ledger's wake-up is not for us */
    int64_t started_ms;
    int64_t claim_until_ms; /* give up waiting for a key in flight after this */
    lua_State *L;          /* the thread driving the call, for hooks */
    lah_ledger_ud *ledger; /* busy-counted while the call runs */
    int c_result;          /* lah_tool_call_into: finish with a lah_tool_result */
    const lah_tool_sink *sink; /* and its events go here (anchored at ON_EVENT) */
    char id[128];          /* tool_call_end.id */
    tool_ud *tool;         /* the tool at TOOL */
} call_state;

/* An error value built by ah.transient / ah.permanent (lua/util.c). */
static int is_error_value(lua_State *L, int idx)
{
    if (lua_type(L, idx) != LUA_TTABLE || !lua_getmetatable(L, idx))
        return 0;
    luaL_getmetatable(L, "agenthost.error");
    int same = lua_rawequal(L, -1, -2);
    lua_pop(L, 2);
    return same;
}

/* ---- ah.tool ------------------------------------------------------------------------
 */

static tool_ud *check_tool(lua_State *L, int idx)
{
    return luaL_checkudata(L, idx, LAH_TOOL_MT);
}

static int is_tool(lua_State *L, int idx)
{
    return luaL_testudata(L, idx, LAH_TOOL_MT) != NULL;
}

static const char *const spec_fields[] = {"name",   "description",     "schema",   "run",
                                          "policy", "idempotency_key", "on_event", NULL};

static int tool_gc(lua_State *L)
{
    tool_ud *t = luaL_checkudata(L, 1, LAH_TOOL_MT);
    free(t->name);
    t->name = NULL;
    return 0;
}

/* Push a tool built from the declaration at `spec` (an ah.tool value is pushed as is).
 * name NULL: spec.name. Raises naming the tool and the bad field. */
static void tool_push_from_spec(lua_State *L, int spec, const char *name)
{
    spec = lua_absindex(L, spec);
    if (is_tool(L, spec)) {
        lua_pushvalue(L, spec);
        return;
    }
    if (lua_type(L, spec) != LUA_TTABLE)
        luaL_error(L, "tool '%s' must be a table (got %s)", name ? name : "?",
                   luaL_typename(L, spec));
    if (!name) {
        if (lua_getfield(L, spec, "name") != LUA_TSTRING)
            luaL_error(L, "ah.tool: name must be a string (got %s)",
                       luaL_typename(L, -1));
        name = lah_check_no_nul(L, -1, "ah.tool: name"); /* anchored in spec */
        lua_pop(L, 1);
    }
    lua_pushfstring(L, "tool '%s'", name);
    lah_check_fields(L, spec, lua_tostring(L, -1), spec_fields);
    lua_pop(L, 1);
    tool_ud *t = lua_newuserdatauv(L, sizeof *t, UV_N - 1);
    memset(t, 0, sizeof *t);
    luaL_setmetatable(L, LAH_TOOL_MT);
    int ud = lua_gettop(L);
    t->name = ah__strdup(name);
    if (!t->name)
        luaL_error(L, "out of memory");
    ah__bufprintf(t->retry_on_what, sizeof t->retry_on_what, "tool '%s' retry_on", name);
    ah__bufprintf(t->idempotency_key_what, sizeof t->idempotency_key_what,
                  "tool '%s' idempotency_key", name);

    static const struct {
        const char *field;
        int uv;
    } fns[] = {{"run", UV_RUN},
               {"idempotency_key", UV_IDEMPOTENCY_KEY},
               {"on_event", UV_ON_EVENT}};
    for (size_t i = 0; i < sizeof fns / sizeof fns[0]; i++) {
        int ty = lua_getfield(L, spec, fns[i].field);
        if (ty != LUA_TFUNCTION && (ty != LUA_TNIL || fns[i].uv == UV_RUN))
            luaL_error(L, "tool '%s': %s must be a function (got %s)", name, fns[i].field,
                       luaL_typename(L, -1));
        lua_setiuservalue(L, ud, fns[i].uv);
    }
    lua_getfield(L, spec, "policy");
    ah_policy_init(&t->policy);
    lua_pushfstring(L, "tool '%s'", name);
    t->has_retry_on = lah_policy_from_table(L, -2, lua_tostring(L, -1), &t->policy);
    if (t->has_retry_on)
        lua_remove(L, -2); /* the "where" text */
    else
        lua_pop(L, 1);
    if (t->has_retry_on)
        lua_setiuservalue(L, ud, UV_RETRY_ON);
    lua_pop(L, 1);
    /* The declaration itself, for description and schema (agents send them). */
    lua_pushvalue(L, spec);
    lua_setiuservalue(L, ud, UV_SPEC);
}

void lah_tool_push(lua_State *L, int spec)
{
    luaL_checktype(L, spec, LUA_TTABLE);
    tool_push_from_spec(L, spec, NULL);
}

/* ah.tool{ name = ..., run = function(args, ctx) ... end, policy = {...},
 *          idempotency_key = function(args, ctx) ... end, on_event = fn } */
int lah_tool_new(lua_State *L)
{
    luaL_checktype(L, 1, LUA_TTABLE);
    tool_push_from_spec(L, 1, NULL);
    return 1;
}

static int tool_index(lua_State *L)
{
    tool_ud *t = check_tool(L, 1);
    const char *k = luaL_checkstring(L, 2);
    if (strcmp(k, "call") == 0) {
        lua_getfield(L, lua_upvalueindex(1), "call"); /* lua/waits.lua */
    } else if (strcmp(k, "name") == 0) {
        lua_pushstring(L, t->name);
    } else if (strcmp(k, "description") == 0 || strcmp(k, "schema") == 0) {
        lua_getiuservalue(L, 1, UV_SPEC);
        lua_getfield(L, -1, k);
    } else if (strcmp(k, "max_attempts") == 0) {
        lua_pushinteger(L, t->policy.max_attempts);
    } else {
        lua_pushnil(L);
    }
    return 1;
}

static int tool_tostring(lua_State *L)
{
    lua_pushfstring(L, "ah.tool '%s'", check_tool(L, 1)->name);
    return 1;
}

/* ---- one call: hooks ----------------------------------------------------------------
 */

void lah_tools_emit(lua_State *L, int on_event, int to_sink, const ah_event *in)
{
    on_event = lua_absindex(L, on_event);
    ah_event stamped = *in; /* every event carries a time (and a run_id when it has one) */
    const ah_event *ev = &stamped;
    if (!stamped.ts_ms)
        stamped.ts_ms = ah_loop_wall_ms(lah_loop(L));
    if (to_sink) {
        ah_event_fn fn = NULL;
        void *ud = NULL;
        lah_event_sink(L, &fn, &ud);
        if (fn)
            fn(ud, ev);
    }
    if (lua_type(L, on_event) == LUA_TFUNCTION) {
        lua_pushvalue(L, on_event);
        lah_push_event(L, ev);
        lah_pcall(L, 1, 0, "on_event");
    }
}

/* A bare call's events also go to the host's sink (--events); inside an agent run the
 * agent routes what it is given to its own events, which reach that sink. */
static void emit(lua_State *L, const ah_event *ev)
{
    const call_state *st = lua_touserdata(L, ST);
    if (st->sink) { /* an agent's call: straight to the run, in C */
        st->sink->fn(st->sink->ud, L, ev);
        return;
    }
    ah_event e = *ev;
    if (lua_type(L, RUN_ID) == LUA_TSTRING)
        e.run_id = lua_tostring(L, RUN_ID);
    lah_tools_emit(L, ON_EVENT, lua_isnil(L, TCID), &e);
}

/* The call machine's own events (tool_retry), from inside ah_tool_step: the slots of
 * the thread stepping it are in place (drive sets st->L first). */
static void forward_tool_event(void *ud, const ah_event *ev)
{
    call_state *st = ud;
    emit(st->L, ev);
}

/* The tool's retry_on(err, default) as an ah_tool_retry_on_fn: 1/0 by its truthiness,
 * -1 (keep the default) when it raised (lah_pcall logged it with a traceback). */
static int call_retry_on(void *ud, const ah_error *err, int default_verdict)
{
    call_state *st = ud;
    lua_State *L = st->L;
    if (!lua_checkstack(L, 4))
        return -1;
    lua_getiuservalue(L, TOOL, UV_RETRY_ON);
    lah_push_error(L, err);
    lua_pushboolean(L, default_verdict);
    if (!lah_pcall_once(L, 2, 1, st->tool->retry_on_what, &st->tool->retry_on_logged))
        return -1;
    int v = lua_toboolean(L, -1);
    lua_pop(L, 1);
    return v;
}

static void timer_fired(void *ud)
{
    call_state *st = ud;
    st->wait.ready = 1;
}

/* The key this call waits for was released or recorded (or the ledger answered). */
static void claim_notified(void *ud)
{
    call_state *st = ud;
    st->wait.ready = 1;
}

static void release(lua_State *L, call_state *st)
{
    ah_timer_free(st->timer);
    st->timer = NULL;
    ah_tool_call_free(st->call);
    st->call = NULL;
    if (st->ledger) {
        st->ledger->busy--;
        st->ledger = NULL;
    }
    if (st->slots_ref != LUA_NOREF)
        luaL_unref(L, LUA_REGISTRYINDEX, st->slots_ref);
    st->slots_ref = LUA_NOREF;
}

static int call_state_gc(lua_State *L)
{
    release(L, luaL_checkudata(L, 1, CALL_MT));
    return 0;
}

/* ---- one call: the driver ---------------------------------------------------------- */

/* A body that raises an error value (ah.transient / ah.permanent) is saying how it
 * failed; any other error is a bug in the body: logged once per tool, with its
 * traceback, like a failing hook (the call still fails with it, and the model sees it);
 * later ones at debug level. The error value is at -1. */
static void log_body_error(lua_State *L, tool_ud *t, const char *tb)
{
    if (is_error_value(L, -1) || (t->body_error_logged && !ah__log_enabled(AH_LOG_DEBUG)))
        return;
    const char *run = lua_tostring(L, RUN_ID);
    ah__log(t->body_error_logged ? AH_LOG_DEBUG : AH_LOG_WARN, "tool '%s'%s%s%s: %s",
            t->name, run ? " (" : "", run ? run : "", run ? ")" : "", tb ? tb : "?");
    t->body_error_logged = 1;
}

/* Encode the body's result (at idx) strictly: a value JSON cannot hold (a function, a
 * cycle, NaN...) or a result over LAH_JSON_MAX_BYTES is the body's error, naming where it
 * is, never a receipt that is not what the body returned. */
static int encode_result(lua_State *L)
{
    lah_push_canonical_json(L, 1, 1);
    return 1;
}

/* The body's coroutine ended (on the thread stepping the scheduler): keep what it
 * ended with in the slot table for the next tool_step, and wake the call. */
static void body_done(void *ud, lua_State *co, int ok)
{
    call_state *st = ud;
    lua_State *L = lah_running(co);
    st->body_state = ok ? 1 : 2;
    st->body_running = 0;
    st->wait.ready = 1;
    if (st->slots_ref == LUA_NOREF || !lua_checkstack(L, 4) || !lua_checkstack(co, 2))
        return; /* released: nobody is waiting */
    lua_rawgeti(L, LUA_REGISTRYINDEX, st->slots_ref);
    if (ok) {
        if (lua_gettop(co) >= 1)
            lua_pushvalue(co, 1);
        else
            lua_pushnil(co);
        lua_xmove(co, L, 1);
        lua_rawseti(L, -2, BODY_VALUE);
    } else {
        lua_pushvalue(co, -2); /* the error as raised */
        lua_xmove(co, L, 1);
        lua_rawseti(L, -2, BODY_VALUE);
        lua_pushvalue(co, -1); /* "message\ntraceback" */
        lua_xmove(co, L, 1);
        lua_rawseti(L, -2, BODY_TB);
    }
    lua_pop(L, 1);
}

/* Hand what the body ended with to the core. */
static void body_result(lua_State *L, call_state *st)
{
    int state = st->body_state;
    st->body_state = 0;
    lua_settop(L, BASE);
    lua_rawgeti(L, LUA_REGISTRYINDEX, st->slots_ref);
    int t = lua_gettop(L);
    lua_rawgeti(L, t, BODY_VALUE);
    lua_rawgeti(L, t, BODY_TB);
    lua_pushnil(L);
    lua_rawseti(L, t, BODY_VALUE);
    lua_pushnil(L);
    lua_rawseti(L, t, BODY_TB);
    /* t, value, traceback */
    if (state == 1) {
        lua_pushcfunction(L, encode_result);
        lua_pushvalue(L, t + 1);
        if (lah_gate_protect_call(L, 1, 1) == LUA_OK) {
            if (ah_tool_call_body_ok(st->call, lua_tostring(L, -1)) != AH_OK)
                luaL_error(L, "out of memory recording a receipt");
        } else {
            /* the result is not data: the call fails with that, permanently */
            ah_error err;
            memset(&err, 0, sizeof err);
            err.kind = AH_EK_PERMANENT;
            ah__bufprintf(err.message, sizeof err.message,
                          "the tool's result cannot be recorded: %s", lua_tostring(L, -1));
            if (!st->tool->body_error_logged)
                ah__log(AH_LOG_WARN, "tool '%s': %s", st->tool->name, err.message);
            st->tool->body_error_logged = 1;
            ah_tool_call_body_failed(st->call, &err);
        }
    } else {
        const char *tb = lua_tostring(L, t + 2);
        lua_pushvalue(L, t + 1);
        log_body_error(L, st->tool, tb);
        ah_error err;
        lah_to_error(L, -1, &err);
        ah_tool_call_body_failed(st->call, &err);
    }
    lua_settop(L, BASE);
}

static void push_ctx(lua_State *L, call_state *st)
{
    lua_createtable(L, 0, 7);
    lua_pushvalue(L, KEY);
    lua_setfield(L, -2, "key");
    lua_pushinteger(L, ah_tool_call_attempts(st->call));
    lua_setfield(L, -2, "attempt");
    lua_pushvalue(L, RUN_ID);
    lua_setfield(L, -2, "run_id");
    lua_pushstring(L, st->tool->name);
    lua_setfield(L, -2, "tool");
    lua_pushvalue(L, TCID);
    lua_setfield(L, -2, "tool_call_id");
    if (ah_tool_call_fence(st->call) > 0) { /* a Redis ledger's claim */
        lua_pushinteger(L, (lua_Integer)ah_tool_call_fence(st->call));
        lua_setfield(L, -2, "fence");
    }
    lua_pushvalue(L, BUDGET);
    lua_setfield(L, -2, "budget");
    lua_pushvalue(L, LEDGER);
    lua_setfield(L, -2, "ledger");
}

/* Start the body, run(args, ctx), as a child coroutine of the call's (it dies with the
 * call when a cancelled run kills it); the call state is anchored by it. */
static void run_body(lua_State *L, call_state *st)
{
    lua_settop(L, BASE);
    lua_getiuservalue(L, TOOL, UV_RUN);
    lua_pushvalue(L, ARGS);
    push_ctx(L, st);
    st->wait.ready = 0;
    st->body_state = 0;
    st->body_running = 1;
    lah_spawn_ex(L, 2, body_done, st, ST, 1);
    lua_settop(L, BASE);
}

static const char *outcome_name(ah_tool_outcome o)
{
    switch (o) {
    case AH_TOOL_OK:
        return "ok";
    case AH_TOOL_BUDGET_EXHAUSTED:
        return "budget_exhausted";
    case AH_TOOL_IN_PROGRESS:
        return "in_progress";
    case AH_TOOL_OUTCOME_UNKNOWN:
        return "outcome_unknown";
    default:
        return "failed";
    }
}

static int finish(lua_State *L, call_state *st)
{
    ah_tool_call *c = st->call;
    ah_event ev;
    lua_settop(L, BASE);
    if (ah_tool_call_budget_first_refusal(c)) {
        lah_budget_ud *b = lah_budget_test(L, BUDGET);
        ah_budget_exhausted_event(b ? b->b : NULL, "tool_calls", &ev);
        emit(L, &ev);
    }
    /* An agent emits tool_call_start/_end around the call itself. */
    if (lua_isnil(L, TCID)) {
        ah_tool_call_end_event(c, st->id, st->tool->name, &ev);
        emit(L, &ev);
    }

    ah_tool_outcome o = ah_tool_call_outcome(c);
    if (st->c_result) {
        /* an agent's call: the outcome in C, the receipt as text (lah_tool_result) */
        lah_tool_result *out = lua_newuserdatauv(L, sizeof *out, 0);
        memset(out, 0, sizeof *out);
        out->outcome = o;
        out->attempts = ah_tool_call_attempts(c);
        out->duplicate = ah_tool_call_duplicate(c);
        out->error = *ah_tool_call_error(c);
        const char *receipt = o == AH_TOOL_OK ? ah_tool_call_receipt(c) : NULL;
        if (!receipt) {
            lua_pushnil(L);
        } else if (receipt[0] != '"') {
            lua_pushstring(L, receipt); /* canonical JSON (or text recorded by C code) */
        } else if (!push_json_string_with_nul(L, receipt) &&
                   (!lah_push_json_decoded(L, receipt, strlen(receipt)) ||
                    lua_type(L, -1) != LUA_TSTRING)) {
            lua_settop(L, BASE + 1);
            lua_pushstring(L, receipt);
        }
        release(L, st);
        return 2;
    }
    lua_createtable(L, 0, 9);
    lua_pushboolean(L, o == AH_TOOL_OK);
    lua_setfield(L, -2, "ok");
    lua_pushstring(L, outcome_name(o));
    lua_setfield(L, -2, "outcome");
    lua_pushinteger(L, ah_tool_call_attempts(c));
    lua_setfield(L, -2, "attempts");
    lua_pushboolean(L, ah_tool_call_duplicate(c));
    lua_setfield(L, -2, "duplicate");
    lua_pushstring(L, st->tool->name);
    lua_setfield(L, -2, "tool");
    lua_pushvalue(L, KEY);
    lua_setfield(L, -2, "key");
    if (ah_tool_call_seq(c) > 0) {
        lua_pushinteger(L, (lua_Integer)ah_tool_call_seq(c));
        lua_setfield(L, -2, "seq");
    }
    if (o == AH_TOOL_OK) {
        const char *receipt = ah_tool_call_receipt(c);
        if (receipt && push_json_string_with_nul(L, receipt))
            ; /* a string result holding NUL bytes: decoded here, whole */
        else if (receipt && !lah_push_json_decoded(L, receipt, strlen(receipt)))
            lua_pushstring(L, receipt);
        else if (!receipt)
            lua_pushnil(L);
        lua_setfield(L, -2, "receipt");
    } else {
        lah_push_error(L, ah_tool_call_error(c));
        lua_setfield(L, -2, "error");
    }
    release(L, st);
    return 1;
}

/* Step the call until it must wait (a body running, a retry's backoff, a key in flight
 * elsewhere): push false; or until it is done: push true and its results. */
static int drive(lua_State *L)
{
    call_state *st = lua_touserdata(L, ST);
    lua_settop(L, BASE);
    for (;;) {
        st->L = L;
        ah_tool_action a = ah_tool_step(st->call);
        if (a == AH_TOOL_DO_RUN_BODY) {
            run_body(L, st);
            lua_pushboolean(L, 0);
            return 1;
        }
        if (a != AH_TOOL_DO_RETRY_AFTER && a != AH_TOOL_DO_WAIT_CLAIM) {
            int n = finish(L, st);
            lua_pushboolean(L, 1);
            lua_insert(L, -(n + 1));
            return n + 1;
        }
        int64_t ms = ah_tool_call_wait_ms(st->call);
        if (a == AH_TOOL_DO_WAIT_CLAIM) {
            /* Another call holds the key: wait on the loop for its receipt (woken by
             * claim_notified, or polled: the holder may be another process), up to
             * this call's deadline. */
            int64_t left = st->claim_until_ms - ah_loop_now_ms(st->loop);
            if (left <= 0) {
                if (ah_tool_call_stop_waiting(st->call) == AH_OK)
                    continue;
                /* Not waiting for a claim but for our own receipt to be committed: that
                 * is waited for past any deadline (the effect happened); the ledger's
                 * answer wakes us, the timer only re-checks. */
                left = RECORD_RECHECK_MS;
            }
            if (ms < 0 || ms > left)
                ms = left;
        } else if (ms <= 0) {
            continue;
        }
        if (!st->timer) {
            st->timer = ah_timer_new(st->loop, timer_fired, st);
            if (!st->timer)
                return luaL_error(L, "out of memory");
        }
        st->wait.ready = 0;
        ah_timer_start(st->timer, ms);
        lua_pushboolean(L, 0);
        return 1;
    }
}

/* Put the call's slots back at 1..BASE from the state at index 1. */
static call_state *restore(lua_State *L)
{
    call_state *st = luaL_checkudata(L, 1, CALL_MT);
    if (st->slots_ref == LUA_NOREF || !st->call)
        luaL_error(L, "tool:call: internal: the call has ended");
    lua_settop(L, 1);
    luaL_checkstack(L, BASE + 8, "tool:call");
    lua_rawgeti(L, LUA_REGISTRYINDEX, st->slots_ref);
    for (int i = 1; i <= BASE; i++) {
        if (i == ST)
            lua_pushvalue(L, 1);
        else
            lua_rawgeti(L, 2, i);
    }
    lua_remove(L, 1);
    lua_remove(L, 1);
    return st;
}

/* tool_step(st) -> false (wait for st, then step again) | true, results */
static int p_tool_step(lua_State *L)
{
    call_state *st = restore(L);
    if (st->body_running) {
        /* woken by the ledger (a claim released elsewhere) while the body runs: the call
         * goes on only once the body has ended */
        st->wait.ready = 0;
        lua_pushboolean(L, 0);
        return 1;
    }
    if (st->body_state)
        body_result(L, st);
    return drive(L);
}

/* ---- one call: setting it up --------------------------------------------------------
 */

static const char *const opts_fields[] = {"key",          "ledger", "budget",   "run_id",
                                          "tool_call_id", "name",   "on_event", NULL};

static int opt(lua_State *L, const char *field)
{
    if (lua_isnil(L, OPTS)) {
        lua_pushnil(L);
        return LUA_TNIL;
    }
    return lua_getfield(L, OPTS, field);
}

/* A receipt that is one JSON string with a \u0000 escape: cJSON would cut the decoded
 * string at the NUL, so decode it here, whole (the agent then sends the NUL as the text
 * \u0000). Returns 1 with the string pushed, 0 (nothing pushed) for any other receipt. */
static int push_json_string_with_nul(lua_State *L, const char *j)
{
    size_t n = strlen(j);
    if (n < 2 || j[0] != '"' || j[n - 1] != '"' || !strstr(j, "\\u0000"))
        return 0;
    luaL_Buffer b;
    luaL_buffinit(L, &b);
    for (size_t i = 1; i < n - 1; i++) {
        char ch = j[i];
        if (ch != '\\') {
            luaL_addchar(&b, ch);
            continue;
        }
        if (++i >= n - 1)
            goto bad;
        switch (j[i]) {
        case 'b': luaL_addchar(&b, '\b'); break;
        case 'f': luaL_addchar(&b, '\f'); break;
        case 'n': luaL_addchar(&b, '\n'); break;
        case 'r': luaL_addchar(&b, '\r'); break;
        case 't': luaL_addchar(&b, '\t'); break;
        case 'u': {
            unsigned long cp = 0;
            char hex[5] = {0};
            if (i + 4 >= n - 1) /* four hex digits before the closing quote */
                goto bad;
            memcpy(hex, j + i + 1, 4);
            char *end;
            cp = strtoul(hex, &end, 16);
            if (end != hex + 4)
                goto bad;
            i += 4;
            if (cp >= 0xD800 && cp <= 0xDBFF && i + 6 < n - 1 && j[i + 1] == '\\' &&
                j[i + 2] == 'u') {
                memcpy(hex, j + i + 3, 4);
                unsigned long lo = strtoul(hex, &end, 16);
                if (end == hex + 4 && lo >= 0xDC00 && lo <= 0xDFFF) {
                    cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
                    i += 6;
                }
            }
            if (cp >= 0xD800 && cp <= 0xDFFF)
                cp = 0xFFFD; /* a lone surrogate */
            char u[8];
            int k = 0;
            if (cp < 0x80) {
                u[k++] = (char)cp;
            } else if (cp < 0x800) {
                u[k++] = (char)(0xC0 | (cp >> 6));
                u[k++] = (char)(0x80 | (cp & 0x3F));
            } else if (cp < 0x10000) {
                u[k++] = (char)(0xE0 | (cp >> 12));
                u[k++] = (char)(0x80 | ((cp >> 6) & 0x3F));
                u[k++] = (char)(0x80 | (cp & 0x3F));
            } else {
                u[k++] = (char)(0xF0 | (cp >> 18));
                u[k++] = (char)(0x80 | ((cp >> 12) & 0x3F));
                u[k++] = (char)(0x80 | ((cp >> 6) & 0x3F));
                u[k++] = (char)(0x80 | (cp & 0x3F));
            }
            luaL_addlstring(&b, u, (size_t)k);
            break;
        }
        default: luaL_addchar(&b, j[i]); break; /* \" \\ \/ */
        }
    }
    luaL_pushresult(&b);
    return 1;
bad:
    luaL_pushresult(&b);
    lua_pop(L, 1);
    return 0;
}

/* Push the key: the caller's (opts.key), unless the tool's idempotency_key(args, ctx)
 * returns one (ctx.key is the caller's, ctx.run_id, ctx.tool). A failing hook is logged
 * and the caller's key kept. */
static void push_key(lua_State *L, tool_ud *t)
{
    int ty = opt(L, "key");
    if (ty == LUA_TNUMBER) {
        lua_pushstring(L, lua_tostring(L, -1));
        lua_remove(L, -2);
    } else if (ty != LUA_TNIL && ty != LUA_TSTRING) {
        luaL_error(L, "tool:call: key must be a string or a number (got %s)",
                   luaL_typename(L, -1));
    } else if (ty == LUA_TSTRING) {
        lah_check_no_nul(L, -1, "tool:call: the idempotency key");
    }
    if (lua_getiuservalue(L, TOOL, UV_IDEMPOTENCY_KEY) != LUA_TFUNCTION) {
        lua_pop(L, 1);
        return;
    }
    lua_pushvalue(L, ARGS);
    lua_createtable(L, 0, 3);
    lua_pushvalue(L, -4);
    lua_setfield(L, -2, "key");
    lua_pushvalue(L, RUN_ID);
    lua_setfield(L, -2, "run_id");
    lua_pushstring(L, t->name);
    lua_setfield(L, -2, "tool");
    if (!lah_pcall_once(L, 2, 1, t->idempotency_key_what, &t->idempotency_key_logged))
        return; /* logged; the caller's key stays */
    ty = lua_type(L, -1);
    if (ty == LUA_TSTRING)
        lah_check_no_nul(L, -1, t->idempotency_key_what);
    if (ty == LUA_TSTRING || ty == LUA_TNUMBER) {
        lua_pushstring(L, lua_tostring(L, -1));
        lua_remove(L, -2);
        lua_remove(L, -2); /* the caller's key */
    } else {
        if (ty != LUA_TNIL)
            ah__log(AH_LOG_WARN,
                    "tool '%s': idempotency_key returned a %s, not a string; "
                    "using the caller's key",
                    t->name, lua_typename(L, ty));
        lua_pop(L, 1);
    }
}

/* tool_begin(tool, args, opts, into) -> st (waitable; tool_step drives it). into: an
 * agent's call (lah_tool_call_into's results). */
static int p_tool_begin(lua_State *L)
{
    int c_result = lua_toboolean(L, 4);
    tool_ud *t = check_tool(L, TOOL);
    lua_settop(L, OPTS);
    if (!lua_isnil(L, OPTS)) {
        luaL_checktype(L, OPTS, LUA_TTABLE);
        lah_check_fields(L, OPTS, "tool:call options", opts_fields);
    }

    /* ST: created once the ledger is resolved (below), so that a ledger made for this
     * call (the tool's own, or a path opened now) is finalized after the call state,
     * whose __gc still releases the key's claim in it: Lua 5.4 runs finalizers in the
     * reverse order objects got theirs, 5.1 to 5.3 and LuaJIT in the reverse order of
     * creation. */
    lua_pushnil(L);
    const lah_tool_sink *sink = NULL;

    /* ON_EVENT: the call's hook, else the tool's; for an agent's call (c_result) its
     * lah_tool_sink userdata, anchored there. */
    if (opt(L, "on_event") == LUA_TNIL) {
        lua_pop(L, 1);
        lua_getiuservalue(L, TOOL, UV_ON_EVENT);
    } else if (c_result && lua_type(L, -1) == LUA_TUSERDATA) {
        sink = lua_touserdata(L, -1);
    } else if (lua_type(L, -1) != LUA_TFUNCTION) {
        return luaL_error(L, "tool:call: on_event must be a function");
    }

    /* LEDGER placeholder (resolved once the key is known), BUDGET, RUN_ID, TCID, KEY */
    lua_pushnil(L);
    int ty = opt(L, "budget");
    if (ty == LUA_TNUMBER) {
        lua_Integer n = lah_check_whole(L, -1, "tool:call", "budget", 0, LUA_MAXINTEGER);
        lua_pop(L, 1);
        lah_budget_push_new(L, n);
    } else if (ty != LUA_TNIL && !lah_budget_test(L, -1)) {
        return luaL_error(L,
                          "tool:call: budget must be an ah.budget or a number (got %s)",
                          luaL_typename(L, -1));
    }
    opt(L, "run_id");
    if (opt(L, "tool_call_id") != LUA_TNIL && !lua_isstring(L, -1))
        return luaL_error(L, "tool:call: tool_call_id must be a string");
    push_key(L, t);

    /* LEDGER: only a keyed call uses one. nil = the tool's own in-memory ledger. */
    if (!lua_isnil(L, KEY)) {
        if (opt(L, "ledger") == LUA_TNIL) {
            lua_pop(L, 1);
            if (lua_getiuservalue(L, TOOL, UV_LEDGER) == LUA_TNIL) {
                lua_pop(L, 1);
                lah_ledger_push_new(L, NULL);
                lua_pushvalue(L, -1);
                lua_setiuservalue(L, TOOL, UV_LEDGER);
            }
        } else {
            lah_ledger_push_arg(L, -1);
            lua_remove(L, -2);
        }
        lua_replace(L, LEDGER);
    }
    lah_ledger_ud *lu = lah_ledger_test(L, LEDGER);
    lah_budget_ud *bu = lah_budget_test(L, BUDGET);

    call_state *st = lua_newuserdatauv(L, sizeof *st, 0);
    memset(st, 0, sizeof *st);
    st->slots_ref = LUA_NOREF;
    st->tool = t;
    st->c_result = c_result;
    st->sink = sink;
    luaL_setmetatable(L, CALL_MT);
    lua_replace(L, ST);

    if (!lua_isnil(L, TCID))
        ah__bufprintf(st->id, sizeof st->id, "%s", lua_tostring(L, TCID));
    else if (!lua_isnil(L, KEY))
        ah__bufprintf(st->id, sizeof st->id, "%s", lua_tostring(L, KEY));

    /* The fingerprint covers the tool's name and its canonical arguments: the same key
     * sent to another tool, or with other arguments, is refused rather than answered
     * with someone else's receipt. Arguments JSON cannot hold raise here (misuse). */
    lua_pushliteral(L, "{\"args\":");
    lah_push_canonical_json(L, ARGS, 1);
    lua_pushliteral(L, ",\"tool\":");
    lua_pushstring(L, t->name);
    lah_push_canonical_json(L, -1, 1);
    lua_remove(L, -2);
    lua_pushliteral(L, "}");
    lua_concat(L, 5);

    ah_tool_policy tp;
    ah_tool_policy_init(&tp);
    tp.max_attempts = t->policy.max_attempts;
    if (t->has_retry_on) {
        tp.retry_on = call_retry_on;
        tp.retry_on_ud = st;
    }
    tp.notify = claim_notified;
    tp.notify_ud = st;
    tp.on_event = forward_tool_event; /* tool_retry, before each retry's wait */
    tp.event_ud = st;
    tp.id = st->id;
    st->loop = lah_loop(L);
    tp.backoff = &t->policy; /* its retry_on is replaced by tp.retry_on */
    tp.loop = st->loop;
    tp.name = t->name;
    st->started_ms = ah_loop_now_ms(st->loop);
    /* A key in flight elsewhere is waited for up to the tool's deadline, or, without
     * one, the ledger's lease (after which a dead holder's claim is taken over). */
    st->claim_until_ms =
        st->started_ms + (t->policy.deadline_ms > 0 ? t->policy.deadline_ms
                          : lu                      ? ah_ledger_lease_ms(lu->l)
                                                    : 0);
    ah_tool_call_new(&tp, lu ? lu->l : NULL, bu ? bu->b : NULL,
                     lua_isnil(L, KEY) ? NULL : lua_tostring(L, KEY), lua_tostring(L, -1),
                     &st->call, NULL, 0);
    if (!st->call)
        return luaL_error(L, "out of memory");
    if (lu) {
        lu->busy++;
        st->ledger = lu;
    }
    /* the slots, for every tool_step */
    lua_settop(L, BASE);
    lua_createtable(L, BODY_TB, 0);
    for (int i = 1; i <= BASE; i++) {
        if (i == ST)
            continue;
        lua_pushvalue(L, i);
        lua_rawseti(L, -2, i);
    }
    st->slots_ref = luaL_ref(L, LUA_REGISTRYINDEX);
    lua_pushvalue(L, ST);
    return 1;
}

/* ---- registration -------------------------------------------------------------------
 */

void lah_tools_open(lua_State *L)
{
    static const luaL_Reg tool_meta[] = {
        {"__gc", tool_gc}, {"__tostring", tool_tostring}, {NULL, NULL}};
    static const luaL_Reg call_meta[] = {{"__gc", call_state_gc}, {NULL, NULL}};
    static const luaL_Reg fns[] = {{"tool", lah_tool_new}, {NULL, NULL}};
    static const luaL_Reg priv[] = {
        {"tool_begin", p_tool_begin}, {"tool_step", p_tool_step}, {NULL, NULL}};
    lah_register_class(L, LAH_TOOL_MT, tool_meta);
    /* tool.call is lua/waits.lua's, in the methods table tool_index reads */
    lah_push_private(L);
    lua_newtable(L);
    lua_pushvalue(L, -1);
    lua_setfield(L, -3, "tool_methods");
    luaL_getmetatable(L, LAH_TOOL_MT);
    lua_insert(L, -2);
    lua_pushcclosure(L, tool_index, 1);
    lua_setfield(L, -2, "__index");
    lua_pop(L, 1);
    luaL_setfuncs(L, priv, 0);
    lua_pop(L, 1);
    lah_register_class(L, CALL_MT, call_meta);
    luaL_setfuncs(L, fns, 0);
    lah_open_ledger_budget(L);
    lah_open_batch(L);
}
