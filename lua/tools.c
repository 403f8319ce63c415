/* tools.c - ah.tool and tool:call (docs/tools-and-ledger.md): the Lua driver of core/tool_call.c.
 *
 * One tool call = one ah_tool_call stepped here. RUN_BODY runs `run(args, ctx)` under
 * lua_pcallk on the calling thread, so a body that waits (a nested call's backoff, a
 * sub-agent) yields the caller's coroutine to the scheduler and the call continues in
 * body_k; RETRY_AFTER arms a loop timer and lah_await()s it (never a blocking sleep).
 * The wait before a retry comes from ah_backoff_decide() through the tool policy's wait
 * seam; the decision WHETHER to retry is made once, by ah_tool_step (its default retries
 * only `transient`; the tool's retry_on, when given, sees every error and decides), so
 * the backoff runs with a predicate that always agrees and retry_on never runs twice.
 *
 * Invariants:
 *   - the call's Lua values sit at fixed stack slots (TOOL .. KEY below) for its whole
 *     life, across yields; each continuation starts by truncating the stack to BASE;
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

/* Stack slots of one call (tool:call is a lua_CFunction: 1..3 are its arguments). */
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
    MSGH, /* during a body: the message handler, then the body's result or error */
    RESULT
};

typedef struct call_state {
    ah_tool_call *call;
    ah_timer *timer;
    lah_wait wait;
    ah_policy backoff; /* the tool's policy for ah_backoff_decide, retry_on replaced */
    const ah_rng *rng;
    ah_loop *loop;
    int64_t started_ms, prev_wait_ms;
    int64_t claim_until_ms; /* give up waiting for a key in flight after this */
    lua_State *L;          /* the thread driving the call, for hooks */
    lah_ledger_ud *ledger; /* busy-counted while the call runs */
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

/* ah.tool{ name = ..., run = function(args, ctx) ... end, policy = {...},
 *          idempotency_key = function(args, ctx) ... end, on_event = fn } */
int lah_tool_new(lua_State *L)
{
    luaL_checktype(L, 1, LUA_TTABLE);
    tool_push_from_spec(L, 1, NULL);
    return 1;
}

static int l_tool_call(lua_State *L);

static int tool_index(lua_State *L)
{
    tool_ud *t = check_tool(L, 1);
    const char *k = luaL_checkstring(L, 2);
    if (strcmp(k, "call") == 0) {
        lua_pushcfunction(L, l_tool_call);
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
    ah_event e = *ev;
    if (lua_type(L, RUN_ID) == LUA_TSTRING)
        e.run_id = lua_tostring(L, RUN_ID);
    lah_tools_emit(L, ON_EVENT, lua_isnil(L, TCID), &e);
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

/* ah_tool_step has already decided to retry: the backoff must not decide again. */
static int always_retry(void *ud, const ah_error *err, int default_verdict)
{
    (void)ud, (void)err, (void)default_verdict;
    return 1;
}

/* The wait seam: jitter, the error's retry_after_ms as a floor, the policy's deadline. */
static int64_t call_wait(void *ud, const ah_error *err, int failed_attempt)
{
    call_state *st = ud;
    int64_t elapsed = ah_loop_now_ms(st->loop) - st->started_ms;
    ah_decision d = ah_backoff_decide(&st->backoff, err, failed_attempt, elapsed,
                                      st->prev_wait_ms, st->rng, NULL);
    if (!d.retry) {
        ah__log(AH_LOG_INFO, "tool '%s' attempt %d/%d failed (%s: %s); giving up: %s",
                st->tool->name, failed_attempt, st->backoff.max_attempts,
                ah_error_kind_name(err->kind), err->message,
                ah_giveup_reason_name(d.reason));
        return -1;
    }
    ah__log(AH_LOG_INFO, "tool '%s' attempt %d/%d failed (%s: %s); retrying in %lld ms",
            st->tool->name, failed_attempt, st->backoff.max_attempts,
            ah_error_kind_name(err->kind), err->message, (long long)d.wait_ms);
    st->prev_wait_ms = d.wait_ms;
    return d.wait_ms;
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

static void release(call_state *st)
{
    ah_timer_free(st->timer);
    st->timer = NULL;
    ah_tool_call_free(st->call);
    st->call = NULL;
    if (st->ledger) {
        st->ledger->busy--;
        st->ledger = NULL;
    }
}

static int call_state_gc(lua_State *L)
{
    release(luaL_checkudata(L, 1, CALL_MT));
    return 0;
}

/* ---- one call: the driver ---------------------------------------------------------- */

static int drive(lua_State *L);

static int wait_k(lua_State *L, int status, lua_KContext ctx)
{
    (void)status, (void)ctx;
    return drive(L);
}

/* The body's message handler: keep the raised value (error values carry their kind);
 * a plain Lua error (a bug, most likely) gets its traceback logged at debug level. */
/* A body that raises an error value (ah.transient / ah.permanent) is saying how it
 * failed; any other error is a bug in the body: logged once per tool, with its
 * traceback, like a failing hook (the call still fails with it, and the model sees it).
 * Upvalue 1: the tool_ud; 2: the run id or nil. */
static int body_msgh(lua_State *L)
{
    tool_ud *t = lua_touserdata(L, lua_upvalueindex(1));
    if (!is_error_value(L, 1) && (!t->body_error_logged || ah__log_enabled(AH_LOG_DEBUG))) {
        const char *msg = lua_tostring(L, 1);
        if (!msg)
            msg = lua_pushfstring(L, "(error object is a %s value)", luaL_typename(L, 1));
        luaL_traceback(L, L, msg, 1);
        const char *run = lua_tostring(L, lua_upvalueindex(2));
        ah__log(t->body_error_logged ? AH_LOG_DEBUG : AH_LOG_WARN, "tool '%s'%s%s%s: %s",
                t->name, run ? " (" : "", run ? run : "", run ? ")" : "", lua_tostring(L, -1));
        t->body_error_logged = 1;
    }
    lua_settop(L, 1);
    return 1;
}

static int body_k(lua_State *L, int status, lua_KContext ctx)
{
    (void)ctx;
    call_state *st = lua_touserdata(L, ST);
    if (status == LUA_OK || status == LUA_YIELD) {
        /* Lenient: a receipt that is not plain data is recorded as text, never lost. */
        lah_push_canonical_json(L, RESULT, 0);
        if (ah_tool_call_body_ok(st->call, lua_tostring(L, -1)) != AH_OK)
            return luaL_error(L, "out of memory recording a receipt");
    } else {
        ah_error err;
        lah_to_error(L, -1, &err);
        ah_tool_call_body_failed(st->call, &err);
    }
    lua_settop(L, BASE);
    return drive(L);
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

static int run_body(lua_State *L, call_state *st)
{
    lua_settop(L, BASE);
    lua_pushlightuserdata(L, st->tool);
    lua_pushvalue(L, RUN_ID); /* names the run in the log line, when there is one */
    lua_pushcclosure(L, body_msgh, 2); /* MSGH */
    lua_getiuservalue(L, TOOL, UV_RUN);
    lua_pushvalue(L, ARGS);
    push_ctx(L, st);
    int status = lua_pcallk(L, 2, 1, MSGH, 0, body_k);
    return body_k(L, status, 0);
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
    release(st);
    return 1;
}

static int drive(lua_State *L)
{
    call_state *st = lua_touserdata(L, ST);
    lua_settop(L, BASE);
    for (;;) {
        st->L = L;
        ah_tool_action a = ah_tool_step(st->call);
        if (a == AH_TOOL_DO_RUN_BODY)
            return run_body(L, st);
        if (a != AH_TOOL_DO_RETRY_AFTER && a != AH_TOOL_DO_WAIT_CLAIM)
            return finish(L, st);
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
        return lah_await(L, &st->wait, 0, wait_k);
    }
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

static int l_tool_call(lua_State *L)
{
    lah_check_not_in_hook(L, "tool:call");
    tool_ud *t = check_tool(L, TOOL);
    lua_settop(L, OPTS);
    if (!lua_isnil(L, OPTS)) {
        luaL_checktype(L, OPTS, LUA_TTABLE);
        lah_check_fields(L, OPTS, "tool:call options", opts_fields);
    }

    /* ST. Its metatable (and so its __gc) is set only once the ledger is resolved:
     * Lua runs finalizers in the reverse order objects got theirs, so a ledger made for
     * this call (the tool's own, or a path opened now) is finalized after the call
     * state, whose __gc still releases the key's claim in it. Nothing C-allocated is in
     * the state before then. */
    call_state *st = lua_newuserdatauv(L, sizeof *st, 0);
    memset(st, 0, sizeof *st);
    st->tool = t;

    /* ON_EVENT: the call's hook, else the tool's. */
    if (opt(L, "on_event") == LUA_TNIL) {
        lua_pop(L, 1);
        lua_getiuservalue(L, TOOL, UV_ON_EVENT);
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
    tp.wait = call_wait;
    tp.wait_ud = st;
    tp.notify = claim_notified;
    tp.notify_ud = st;
    st->backoff = t->policy;
    st->backoff.retry_on = always_retry;
    st->backoff.retry_on_ud = NULL;
    st->loop = lah_loop(L);
    st->rng = ah_loop_rng(st->loop);
    st->started_ms = ah_loop_now_ms(st->loop);
    /* A key in flight elsewhere is waited for up to the tool's deadline, or, without
     * one, the ledger's lease (after which a dead holder's claim is taken over). */
    st->claim_until_ms =
        st->started_ms + (t->policy.deadline_ms > 0 ? t->policy.deadline_ms
                          : lu                      ? ah_ledger_lease_ms(lu->l)
                                                    : 0);
    lua_pushvalue(L, ST);
    luaL_setmetatable(L, CALL_MT);
    lua_pop(L, 1);
    ah_tool_call_new(&tp, lu ? lu->l : NULL, bu ? bu->b : NULL,
                                lua_isnil(L, KEY) ? NULL : lua_tostring(L, KEY),
                                lua_tostring(L, -1), &st->call, NULL, 0);
    if (!st->call)
        return luaL_error(L, "out of memory");
    if (lu) {
        lu->busy++;
        st->ledger = lu;
    }
    return drive(L);
}

/* ---- registration -------------------------------------------------------------------
 */

void lah_tools_open(lua_State *L)
{
    luaL_newmetatable(L, LAH_TOOL_MT);
    lua_pushcfunction(L, tool_gc);
    lua_setfield(L, -2, "__gc");
    lua_pushcfunction(L, tool_index);
    lua_setfield(L, -2, "__index");
    lua_pushcfunction(L, tool_tostring);
    lua_setfield(L, -2, "__tostring");
    lua_pop(L, 1);

    luaL_newmetatable(L, CALL_MT);
    lua_pushcfunction(L, call_state_gc);
    lua_setfield(L, -2, "__gc");
    lua_pop(L, 1);

    lua_pushcfunction(L, lah_tool_new);
    lua_setfield(L, -2, "tool");
    lah_open_ledger_budget(L);
    lah_open_batch(L);
}
