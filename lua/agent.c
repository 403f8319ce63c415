/* agent.c - ah.agent{...}, agent:start(input, opts) -> run handle (run.id, run:wait(),
 * run:cancel()) and agent:run = start + wait (the waits are Lua, lua/waits.lua, over
 * run_start / run_result here): one ah_worker per run, driven by the scheduler, with
 * the Lua hooks plugged into the worker's callbacks:
 * on_event (or the default status display), policy.retry_on, output.validate, and tools
 * whose bodies run in coroutines of their own (the tool seam of lah.h).
 *
 * Invariants:
 *  - A run is a userdata (the handle) plus a registry reference (self_ref) from start to
 *    run_end, so it keeps going when the handle is dropped and hooks can reach it from
 *    any thread; self_ref is dropped at run_end through lah_unref_later (the worker is
 *    still on the C stack then), the other references when the result is built (cached
 *    in the run: every wait gets the same table) or at __gc.
 *  - A run is on the live list (lah_cancel_runs, Ctrl-C) from start to run_end.
 *  - A run started with on_done keeps self_ref until on_done was called (deferred to
 *    the next scheduler step, outside the loop); it counts as in flight until then.
 *  - At run_end no tool call of the run is left running: a cancel's leftover tool
 *    coroutines are ended (lah_kill) and the runs they started are cancelled.
 *  - Every call into Lua from a worker callback goes through the gate (lua/gate.c) and
 *    runs on lah_running(); a failing hook is logged once per agent and the C default
 *    decides (the event is dropped; retry_on -> the default verdict; idempotency_key ->
 *    the default key; validate -> the answer is rejected with the error as the reason).
 *  - Nothing here goes through the module table: budgets, ledgers and tool objects are
 *    made in C, a tool call is started with lah_tool_call_into and its outcome read from
 *    a lah_tool_result (tests/lua/test_gate.lua patches ah.* and tool.call to check).
 *  - The worker is freed only from run_result or __gc, never inside its own callbacks.
 */
#include "lah.h"
#include "tools.h"
#include "internal.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define AGENT_MT "agenthost.agent"
#define RUN_MT   "agenthost.run"

/* agent uservalues */
enum {
    A_CLIENT = 1,
    A_ON_EVENT,
    A_RETRY_ON,
    A_STATUS,
    A_TOOLS,
    A_SPECS,
    A_RB,
    A_LEDGER,
    A_BUDGET,
    A_RL,
    A_MCP, /* { list = { server, ... }, map = { name -> { server, tool } } } or nil */
    A_ON_CONTEXT, /* on_context_exceeded(history) -> history | nil, or nil */
    A_NUV = A_ON_CONTEXT
};

/* run uservalues: 1 the agent, 3 the run's budget, and its own ledger when the agent
 * has none (made at the first tool call) */
enum { RUN_UV_RESULT = 2, RUN_UV_LEDGER = 4, RUN_UV_N = 4 }; /* 1 agent, 3 budget */

typedef struct lagent {
    ah_client *client; /* borrowed: the client userdata is uservalue A_CLIENT */
    char *system;
    char *continue_prompt;
    int max_steps;
    ah_policy policy; /* retry_on is set per run */
    int has_retry_on, has_on_event, has_status, has_on_context;
    int64_t coalesce_ms; /* on_event_coalesce: 0 = off */
    size_t coalesce_bytes;
    int reuse_deltas; /* one delta table per run, refilled: on_event_reuse = true, or a
                       * hook that cannot keep it (absent) */
    ah_tool_def *tools;
    int *tool_exclusive; /* per tool (same order as tools) */
    size_t n_tools;
    int max_tool_concurrency; /* 0 = the worker's default */
    ah_retry_budget *rb; /* borrowed: uservalue A_RB */
    ah_rate_limit *rl;   /* borrowed: uservalue A_RL, or the client's */
    /* hooks that failed once are not reported again */
    int event_failed, retry_on_failed, validate_failed, key_failed;
} lagent;

typedef struct tool_op tool_op;

typedef struct lrun {
    lah_wait wait;
    ah_worker *w;
    lagent *agent;   /* anchored: uservalue 1 of the run */
    lua_State *main; /* lah_main(): a thread of the state, to find the running thread */
    void *state;     /* lah_state_id(): which Lua state the run belongs to */
    ah_event_fn sink;
    void *sink_ud;
    int self_ref, on_event_ref, status_ref, retry_on_ref, validate_ref, output_ref;
    int on_done_ref; /* agent:start(input, { on_done = fn }) */
    lah_event_cache evc; /* on_event's per-run state (lua/events.c) */
    lah_coalescer *coalesce; /* on_event_coalesce, or NULL */
    lua_State *const *running; /* lah_running_slot(main): read once per event */
    tool_op *ops; /* tool calls in flight */
    struct lrun *prev_live, *next_live; /* the runs in flight (lah_cancel_runs) */
    int live;
    lua_State *started_on; /* the thread that started it (a tool body's, for a sub-agent) */
    /* what a failing hook's log line calls it, naming the run: "on_event (run_...)" */
    char what_event[96], what_retry_on[96], what_key[96], what_done[96];
} lrun;

struct tool_op {
    lrun *r;
    size_t index;
    lua_State *co; /* the coroutine running it (valid while the op is listed) */
    tool_op *next;
};

/* ---- the runs in flight, for lah_cancel_runs (the host's Ctrl-C) ------------------- */

static lrun *live_runs; /* loop thread only */
static atomic_int live_count;

static void list_run(lrun *r)
{
    r->prev_live = NULL;
    r->next_live = live_runs;
    if (live_runs)
        live_runs->prev_live = r;
    live_runs = r;
    r->live = 1;
    atomic_fetch_add(&live_count, 1);
}

static void unlist_run(lrun *r)
{
    if (!r->live)
        return;
    if (r->prev_live)
        r->prev_live->next_live = r->next_live;
    else
        live_runs = r->next_live;
    if (r->next_live)
        r->next_live->prev_live = r->prev_live;
    r->prev_live = r->next_live = NULL;
    r->live = 0;
    atomic_fetch_sub(&live_count, 1);
}

int lah_runs_in_flight(void)
{
    return atomic_load(&live_count) + lah_mcp_bare_in_flight();
}

int lah_cancel_runs(lua_State *L, const char *reason)
{
    void *state = lah_state_id(L);
    int n = 0;
    for (lrun *r = live_runs; r; r = r->next_live) {
        if (r->state == state && r->w && !ah_worker_finished(r->w)) {
            ah_worker_cancel_with(r->w, reason);
            n++;
        }
    }
    return n + lah_mcp_cancel_bare(L, reason);
}

/* ---- small helpers ----------------------------------------------------------------- */

static char *dup_or_raise(lua_State *L, const char *s)
{
    if (!s)
        return NULL;
    char *d = ah__strdup(s);
    if (!d)
        luaL_error(L, "agenthost: out of memory");
    return d;
}

static void set_int(lua_State *L, const char *k, lua_Integer v)
{
    lua_pushinteger(L, v);
    lua_setfield(L, -2, k);
}

static void set_str(lua_State *L, const char *k, const char *v)
{
    if (!v)
        return;
    lua_pushstring(L, v);
    lua_setfield(L, -2, k);
}


static void unref(lua_State *L, int *ref)
{
    if (*ref != LUA_NOREF && *ref != LUA_REFNIL)
        luaL_unref(L, LUA_REGISTRYINDEX, *ref);
    *ref = LUA_NOREF;
}

/* ---- worker callbacks -------------------------------------------------------------- */

/* Runs a tool body started (sub-agents) stop with it. */
static void cancel_started_on(lua_State *co)
{
    lah_mcp_cancel_started_on(co); /* the servers are told at once */
    for (lrun *x = live_runs; x; x = x->next_live)
        if (x->started_on == co && x->w && !ah_worker_finished(x->w))
            ah_worker_cancel_with(x->w, "the tool call that ran it was cancelled");
}

static int run_result(lua_State *L);

/* At the next step after run_end, outside the loop: on_done(result), as a hook that may
 * start other runs; then the handle is let go. */
static void deliver_done(lua_State *L, void *ud)
{
    lrun *r = ud;
    int top = lua_gettop(L);
    luaL_checkstack(L, 6, "on_done");
    lua_rawgeti(L, LUA_REGISTRYINDEX, r->on_done_ref);
    lua_pushcfunction(L, run_result);
    lua_rawgeti(L, LUA_REGISTRYINDEX, r->self_ref);
    if (lah_gate_call(L, NULL, 1, 1, 0) != LUA_OK) {
        ah__log(AH_LOG_WARN, "%s: cannot build the result: %s", r->what_done,
                lua_tostring(L, -1));
    } else {
        lah_gate *g = lah_gate_of(L);
        g->in_done++;
        lah_pcall_once(L, 1, 0, r->what_done, NULL);
        g->in_done--;
    }
    lua_settop(L, top);
    unref(L, &r->on_done_ref);
    unref(L, &r->self_ref);
    lah_runs_add(L, -1);
}

/* run_end: wake the waiters, leave the in-flight list, end the tool calls a cancel left
 * running (their answers are no longer wanted: the bodies stop at their current wait,
 * with every coroutine they own), and let the handle go once the worker is off the C
 * stack (or once on_done has it). */
static void run_ended(lrun *r)
{
    lua_State *L = lah_running(r->main);
    r->wait.ready = 1;
    unlist_run(r);
    while (r->ops) {
        tool_op *op = r->ops;
        r->ops = op->next;
        lah_kill(L, op->co, cancel_started_on);
        free(op);
    }
    if (r->on_done_ref != LUA_NOREF && lah_defer(L, deliver_done, r))
        return; /* self_ref stays until it is delivered */
    if (r->on_done_ref != LUA_NOREF)
        ah__log(AH_LOG_ERROR, "%s: out of memory: on_done is not called", r->what_done);
    lah_unref_later(L, r->self_ref);
    r->self_ref = LUA_NOREF;
    lah_runs_add(L, -1);
}


/* An event to the Lua hook: on_event, or the status display */
static void deliver_event(void *ud, const ah_event *ev)
{
    lrun *r = ud;
    lagent *a = r->agent;
    lua_State *L = *r->running;
    if (r->on_event_ref != LUA_NOREF) {
        if (lah_event_hook(L, r->on_event_ref, ev, &r->evc, a->reuse_deltas) != LUA_OK) {
            if (!a->event_failed) {
                ah__log(AH_LOG_WARN, "%s: %s", r->what_event, lua_tostring(L, -1));
                a->event_failed = 1;
            }
            lua_pop(L, 1);
        }
    } else if (lua_checkstack(L, 8)) {
        lua_rawgeti(L, LUA_REGISTRYINDEX, r->status_ref);
        lua_getfield(L, -1, "update");
        lua_insert(L, -2);
        lah_push_event(L, ev);
        lah_pcall_once(L, 2, 0, r->what_event, &a->event_failed);
    }
}

static void run_on_event(void *ud, const ah_event *ev)
{
    lrun *r = ud;
    if (r->sink)
        r->sink(r->sink_ud, ev);
    if (ev->type == AH_EV_RUN_END)
        run_ended(r);
    if (r->on_event_ref == LUA_NOREF && r->status_ref == LUA_NOREF)
        return;
    if (r->coalesce && lah_coalescer_feed(r->coalesce, ev))
        return;
    deliver_event(r, ev);
}

static int run_retry_on(void *ud, const ah_error *err, int default_verdict)
{
    lrun *r = ud;
    lua_State *L = lah_running(r->main);
    if (!lua_checkstack(L, 6))
        return -1;
    lua_rawgeti(L, LUA_REGISTRYINDEX, r->retry_on_ref);
    lah_push_error(L, err);
    lua_pushboolean(L, default_verdict);
    if (!lah_pcall_once(L, 2, 1, r->what_retry_on, &r->agent->retry_on_failed))
        return -1;
    int v = lua_isboolean(L, -1) ? lua_toboolean(L, -1) : -1;
    lua_pop(L, 1);
    return v;
}

/* Skip one surrounding ``` fence (```json ... ```), which models often add. */
static void strip_fence(const char **s, size_t *len)
{
    const char *p = *s, *e = *s + *len;
    while (p < e && (*p == ' ' || *p == '\n' || *p == '\r' || *p == '\t'))
        p++;
    while (e > p && (e[-1] == ' ' || e[-1] == '\n' || e[-1] == '\r' || e[-1] == '\t'))
        e--;
    if (e - p >= 6 && strncmp(p, "```", 3) == 0 && strncmp(e - 3, "```", 3) == 0) {
        const char *nl = memchr(p, '\n', (size_t)(e - p));
        if (nl && nl < e - 3) {
            p = nl + 1;
            e -= 3;
        }
    }
    *s = p;
    *len = (size_t)(e - p);
}

/* on_context_exceeded(history) -> a shorter history, or nil: the worker's one more try. A
 * hook that fails or returns something that is not a history ends the run as
 * context_exceeded, with a warning. */
static ah_conversation *run_context_exceeded(void *ud, const ah_conversation *history)
{
    lrun *r = ud;
    lua_State *L = lah_running(r->main);
    if (!lua_checkstack(L, 8))
        return NULL;
    int top = lua_gettop(L);
    ah_conversation *out = NULL;
    lua_rawgeti(L, LUA_REGISTRYINDEX, r->self_ref);
    lua_getiuservalue(L, -1, 1); /* the agent */
    lua_getiuservalue(L, -1, A_ON_CONTEXT);
    lah_push_history(L, history, 0);
    if (lah_pcall_hook(L, 1, 1) != LUA_OK) {
        ah__log(AH_LOG_WARN, "on_context_exceeded: %s", lua_tostring(L, -1));
    } else if (lua_istable(L, -1)) {
        char err[320];
        if (!lah_history_check(L, -1, &out, err, sizeof err))
            ah__log(AH_LOG_WARN, "on_context_exceeded returned a bad history: %s", err);
    } else if (!lua_isnil(L, -1)) {
        ah__log(AH_LOG_WARN, "on_context_exceeded must return a history or nil, got %s",
                luaL_typename(L, -1));
    }
    lua_settop(L, top);
    return out;
}

static int run_check_output(void *ud, const char *text, int refused, char *why,
                            size_t whysize)
{
    lrun *r = ud;
    lua_State *L = lah_running(r->main);
    if (refused) {
        ah__bufprintf(why, whysize,
                      "Your previous answer was a refusal, but an answer is required. "
                      "Reply with only the JSON value that was asked for.");
        return 1;
    }
    if (!lua_checkstack(L, 8)) {
        ah__bufprintf(why, whysize, "out of memory checking the answer");
        return 1;
    }
    int top = lua_gettop(L);
    size_t len = strlen(text);
    strip_fence(&text, &len);
    if (!lah_json_decode(L, text, len)) {
        ah__bufprintf(why, whysize,
                      "Your previous answer is not valid JSON (%s). Reply with only the "
                      "JSON value, without any other text.",
                      lua_tostring(L, -1));
        lua_settop(L, top);
        return 1;
    }
    int value = lua_gettop(L);
    if (r->validate_ref != LUA_NOREF) {
        lua_rawgeti(L, LUA_REGISTRYINDEX, r->validate_ref);
        lua_pushvalue(L, value);
        if (lah_pcall_hook(L, 1, 2) != LUA_OK) {
            const char *msg = lua_tostring(L, -1);
            if (!r->agent->validate_failed) {
                ah__log(AH_LOG_WARN, "output.validate: %s", msg);
                r->agent->validate_failed = 1;
            }
            const char *nl = strstr(msg, "\nstack traceback:");
            int n = nl ? (int)(nl - msg) : (int)strlen(msg);
            ah__bufprintf(why, whysize,
                          "Your previous answer was rejected: checking it failed with "
                          "\"%.*s\". Reply with only the corrected JSON value.",
                          n > 300 ? 300 : n, msg);
            lua_settop(L, top);
            return 1;
        }
        if (!lua_toboolean(L, -2)) {
            const char *reason = lua_isstring(L, -1)
                                     ? lua_tostring(L, -1)
                                     : "it does not have the expected shape";
            ah__bufprintf(why, whysize,
                          "Your previous answer was rejected: %s. Reply with only the "
                          "corrected JSON value.",
                          reason);
            lua_settop(L, top);
            return 1;
        }
    }
    lua_pushvalue(L, value);
    unref(L, &r->output_ref);
    r->output_ref = luaL_ref(L, LUA_REGISTRYINDEX);
    lua_settop(L, top);
    return 0;
}

/* ---- tools: the agent's side of the tool seam (lah.h) ------------------------------ */

static void unlink_op(lrun *r, tool_op *op)
{
    for (tool_op **pp = &r->ops; *pp; pp = &(*pp)->next) {
        if (*pp == op) {
            *pp = op->next;
            return;
        }
    }
}

/* What lah_tool_call_into left on the finished coroutine co (a lah_tool_result, the
 * receipt text) becomes the worker's answer: the receipt for the model, or
 * "error: <message>". */
static void tool_done(void *ud, lua_State *co, int ok)
{
    tool_op *op = ud;
    lrun *r = op->r;
    size_t index = op->index;
    if (r)
        unlink_op(r, op);
    free(op);
    if (!r || !r->w)
        return;
    ah_tool_response res = {.outcome = AH_TOOL_ERROR, .attempts = 1};
    lua_State *L = lah_running(co);
    luaL_checkstack(L, 6, "tool");
    int top = lua_gettop(L);
    if (!ok) {
        /* the tool-call machinery itself failed (the body's errors are in the record) */
        const char *msg = lua_tostring(co, -1);
        ah__log(AH_LOG_WARN, "tool call failed: %s", msg ? msg : "?");
        lua_pushvalue(co, -2);
        lua_xmove(co, L, 1);
        ah_error e;
        lah_to_error(L, -1, &e);
        lua_pushfstring(L, "error: %s", e.message);
    } else if (lua_type(co, 1) != LUA_TUSERDATA ||
               lua_rawlen(co, 1) != sizeof(lah_tool_result)) {
        lua_pushliteral(L, "error: the tool call returned no result");
    } else {
        /* lah_tool_call_into's results: the outcome in C, the receipt as text */
        const lah_tool_result *tr = lua_touserdata(co, 1);
        res.outcome = tr->outcome;
        res.attempts = tr->attempts;
        res.duplicate = tr->duplicate;
        switch (tr->outcome) {
        case AH_TOOL_OK:
            if (lua_type(co, 2) == LUA_TSTRING) {
                lua_pushvalue(co, 2);
                lua_xmove(co, L, 1);
            } else {
                lua_pushliteral(L, "");
            }
            break;
        case AH_TOOL_BUDGET_EXHAUSTED:
            lua_pushliteral(
                L, "error: the tool-call budget is exhausted; the tool was not run");
            break;
        default:
            /* failed, or in progress: the key is in flight in another call and its
             * receipt did not come in time (calling again later gets the receipt); an
             * MCP call gives its own text (the tool's isError answer) */
            if (lua_type(co, 2) == LUA_TSTRING) {
                lua_pushvalue(co, 2);
                lua_xmove(co, L, 1);
            } else if (tr->error.kind == AH_EK_NONE)
                lua_pushliteral(L, "error: the tool failed");
            else
                lua_pushfstring(L, "error: %s", tr->error.message);
            break;
        }
    }
    size_t clen = 0;
    const char *content = lua_tolstring(L, -1, &clen);
    if (content && memchr(content, '\0', clen)) {
        /* C strings end at NUL: a NUL byte in a tool's result is sent as the six
         * characters \u0000 instead of cutting the result there. */
        luaL_Buffer b;
        luaL_buffinit(L, &b);
        for (size_t i = 0; i < clen; i++) {
            if (content[i])
                luaL_addchar(&b, content[i]);
            else
                luaL_addstring(&b, "\\u0000");
        }
        luaL_pushresult(&b);
        content = lua_tostring(L, -1);
    }
    res.content = content;
    ah_worker_tool_done(r->w, index, &res); /* copies the content */
    lua_settop(L, top);
}

/* The seam's event sink (lah_tool_sink, ud: the run, anchored by the sink's user
 * value): the tool machinery's budget_exhausted and tool_retry become events of this
 * run. */
static void seam_event(void *ud, lua_State *L, const ah_event *in)
{
    lrun *r = ud;
    if (!r->w || (in->type != AH_EV_BUDGET_EXHAUSTED && in->type != AH_EV_TOOL_RETRY &&
                  in->type != AH_EV_MCP_PROGRESS))
        return;
    ah_event ev = *in;
    ev.run_id = ah_worker_run_id(r->w);
    if (!ev.ts_ms)
        ev.ts_ms = ah_loop_wall_ms(lah_loop(L));
    lua_State *prev = lah_enter(L);
    run_on_event(r, &ev);
    lah_leave(L, prev);
}

static void push_run(lua_State *L, lrun *r)
{
    lua_rawgeti(L, LUA_REGISTRYINDEX, r->self_ref);
}

static int run_tool_exec(void *ud, ah_worker *w, const ah_tool_request *req,
                         ah_tool_response *res)
{
    (void)w;
    lrun *r = ud;
    lagent *a = r->agent;
    lua_State *L = lah_running(r->main);
    static char msg[200];
    if (!lua_checkstack(L, 16)) {
        res->outcome = AH_TOOL_ERROR;
        res->content = "error: out of memory";
        return 0;
    }
    int top = lua_gettop(L);
    push_run(L, r);
    int run = lua_gettop(L);
    lua_getiuservalue(L, run, 1); /* the agent */
    int agent = lua_gettop(L);
    lua_getiuservalue(L, agent, A_TOOLS);
    lua_getfield(L, -1, req->name);
    int obj = lua_gettop(L);
    lua_getiuservalue(L, agent, A_SPECS);
    lua_getfield(L, -1, req->name);
    int spec = lua_gettop(L);
    int mcp_entry = 0;
    if (lua_isnil(L, obj) && lua_getiuservalue(L, agent, A_MCP) == LUA_TTABLE) {
        lua_getfield(L, -1, "map");
        lua_getfield(L, -1, req->name);
        if (lua_istable(L, -1)) {
            lua_replace(L, obj); /* { server, tool name } */
            mcp_entry = 1;
        }
        lua_pop(L, 2);
    } else if (lua_isnil(L, obj)) {
        lua_pop(L, 1);
    }
    if (lua_isnil(L, obj)) {
        lua_settop(L, top);
        ah__bufprintf(msg, sizeof msg, "error: unknown tool '%.60s'", req->name);
        res->outcome = AH_TOOL_ERROR;
        res->content = msg;
        return 0;
    }
    if (!lah_json_decode(L, req->arguments, strlen(req->arguments)) ||
        !lua_istable(L, -1)) {
        lua_settop(L, top);
        ah__bufprintf(msg, sizeof msg,
                      "error: the arguments for tool '%.60s' are not a "
                      "JSON object",
                      req->name);
        res->outcome = AH_TOOL_ERROR;
        res->content = msg;
        return 0;
    }
    int args = lua_gettop(L);
    /* opts for the call, also the ctx the key hook sees */
    lua_createtable(L, 0, 8);
    int opts = lua_gettop(L);
    set_str(L, "run_id", req->run_id);
    set_str(L, "tool_call_id", req->id);
    set_str(L, "name", req->name);
    set_str(L, "key", req->key);
    if (lua_istable(L, spec) && lua_getfield(L, spec, "idempotency_key") == LUA_TFUNCTION) {
        lua_pushvalue(L, args);
        lua_pushvalue(L, opts);
        if (lah_pcall_once(L, 2, 1, r->what_key, &a->key_failed)) {
            if (lua_type(L, -1) == LUA_TSTRING || lua_type(L, -1) == LUA_TNUMBER) {
                lua_pushvalue(L, -1);
                lua_setfield(L, opts, "key");
            } else if (!a->key_failed) {
                ah__log(AH_LOG_WARN,
                        "idempotency_key for tool '%s' returned a %s, not a "
                        "string; using the default key",
                        req->name, luaL_typename(L, -1));
                a->key_failed = 1;
            }
        }
    }
    lua_settop(L, opts);
    /* The agent's ledger (a handle, or false for none); by default one in memory for
     * this run alone, made at its first tool call and collected with the run, so a
     * long-lived agent does not keep every run's keys (they hold the run id and never
     * hit again). */
    if (lua_getiuservalue(L, agent, A_LEDGER) == LUA_TNIL) {
        lua_pop(L, 1);
        if (lua_getiuservalue(L, run, RUN_UV_LEDGER) == LUA_TNIL) {
            lua_pop(L, 1);
            lah_ledger_push_new(L, NULL);
            lua_pushvalue(L, -1);
            lua_setiuservalue(L, run, RUN_UV_LEDGER);
        }
    }
    lua_setfield(L, opts, "ledger");
    lua_getiuservalue(L, run, 3); /* the run's budget */
    lua_setfield(L, opts, "budget");
    lah_tool_sink *sink = lua_newuserdatauv(L, sizeof *sink, 1);
    sink->fn = seam_event;
    sink->ud = r;
    lua_pushvalue(L, run);
    lua_setiuservalue(L, -2, 1); /* the sink anchors the run */
    lua_setfield(L, opts, "on_event");

    tool_op *op = calloc(1, sizeof *op);
    if (!op) {
        lua_settop(L, top);
        res->outcome = AH_TOOL_ERROR;
        res->content = "error: out of memory";
        return 0;
    }
    op->r = r;
    op->index = req->index;
    op->next = r->ops;
    r->ops = op;
    /* the call, in a coroutine of its own: lua/waits.lua's tool_call_into, the tool
     * driver of lua/tools.c with its results for C */
    lah_push_private(L);
    if (mcp_entry) {
        /* an MCP server's tool: lua/waits.lua's mcp_call_into(server, tool, args, opts) */
        lua_getfield(L, -1, "mcp_call_into");
        lua_remove(L, -2);
        lua_rawgeti(L, obj, 1);
        lua_rawgeti(L, obj, 2);
        lua_pushvalue(L, args);
        lua_pushvalue(L, opts);
        op->co = lah_spawn(L, 4, tool_done, op);
        lua_settop(L, top);
        return 1;
    }
    lua_getfield(L, -1, "tool_call_into");
    lua_remove(L, -2);
    lua_pushvalue(L, obj);
    lua_pushvalue(L, args);
    lua_pushvalue(L, opts);
    op->co = lah_spawn(L, 3, tool_done, op);
    lua_settop(L, top);
    return 1;
}

/* ---- results ----------------------------------------------------------------------- */

/* Drop the run's references and its worker. Tool calls still in flight (only possible
 * when the state closes mid-run, since the worker waits for every tool answer) are
 * freed when closing, since their coroutines will never report; otherwise orphaned, and
 * tool_done frees them. */
static void release_run(lua_State *L, lrun *r, int closing)
{
    unlist_run(r);
    unref(L, &r->self_ref);
    unref(L, &r->on_event_ref);
    lah_event_cache_free(L, &r->evc);
    lah_coalescer_free(r->coalesce);
    r->coalesce = NULL;
    unref(L, &r->status_ref);
    unref(L, &r->retry_on_ref);
    unref(L, &r->validate_ref);
    unref(L, &r->output_ref);
    unref(L, &r->on_done_ref);
    while (r->ops) {
        tool_op *op = r->ops;
        r->ops = op->next;
        if (closing)
            free(op);
        else
            op->r = NULL;
    }
    ah_worker_free(r->w);
    r->w = NULL;
}

static int run_gc(lua_State *L)
{
    lrun *r = luaL_checkudata(L, 1, RUN_MT);
    release_run(L, r, 1);
    return 0;
}

/* run_result(run) -> result: built once (uservalue 2 of the run), once the run ended,
 * and returned to every wait. */
static int run_result(lua_State *L)
{
    lrun *r = luaL_checkudata(L, 1, RUN_MT);
    lua_settop(L, 1);
    const int run = 1;
    if (lua_getiuservalue(L, run, RUN_UV_RESULT) == LUA_TTABLE)
        return 1;
    lua_pop(L, 1);
    ah_worker *w = r->w;
    if (!w)
        return luaL_error(L, "run:wait: the run was released");
    if (!r->wait.ready)
        return luaL_error(L, "run:wait: internal: the run has not ended");
    ah_run_outcome outcome = ah_worker_outcome(w);
    lua_createtable(L, 0, 8);
    set_str(L, "text", ah_worker_text(w));
    set_str(L, "outcome", ah_run_outcome_name(outcome));
    set_str(L, "run_id", ah_worker_run_id(w));
    if (ah_worker_stop_reason(w))
        set_str(L, "stop_reason", ah_worker_stop_reason(w));
    if (outcome != AH_OUTCOME_COMPLETED && ah_worker_error(w)->kind != AH_EK_NONE) {
        lah_push_error(L, ah_worker_error(w));
        lua_setfield(L, -2, "error");
    }
    if (outcome == AH_OUTCOME_COMPLETED && r->output_ref != LUA_NOREF) {
        lua_rawgeti(L, LUA_REGISTRYINDEX, r->output_ref);
        lua_setfield(L, -2, "output");
    }
    lua_getfield(L, -1, "text");
    lah_push_history(L, ah_worker_history(w), lua_gettop(L));
    lua_setfield(L, -3, "history");
    lua_pop(L, 1); /* the text */
    ah_worker_stats st;
    ah_worker_get_stats(w, &st);
    lua_createtable(L, 0, 10);
    set_int(L, "llm_calls", st.llm_calls);
    set_int(L, "attempts", st.attempts);
    set_int(L, "retries", st.retries);
    set_int(L, "continuations", st.continuations);
    set_int(L, "trimmed_bytes", (lua_Integer)st.trimmed_bytes);
    set_int(L, "tool_calls", st.tool_calls);
    set_int(L, "tool_attempts", st.tool_attempts);
    set_int(L, "output_retries", st.output_retries);
    set_int(L, "steps", st.steps);
    set_int(L, "input_tokens", (lua_Integer)st.input_tokens);
    set_int(L, "cache_read_tokens", (lua_Integer)st.cache_read_tokens);
    set_int(L, "cache_write_tokens", (lua_Integer)st.cache_write_tokens);
    set_int(L, "output_tokens", (lua_Integer)st.output_tokens);
    lua_setfield(L, -2, "stats");
    lua_pushvalue(L, -1);
    lua_setiuservalue(L, run, RUN_UV_RESULT);
    release_run(L, r, 0);
    return 1;
}

static lagent *check_agent(lua_State *L, int idx)
{
    return luaL_checkudata(L, idx, AGENT_MT);
}

/* Start a run of agent:start / agent:run (input at 2, opts at 3): the run handle is
 * pushed and its stack index returned. `where` names the function in errors. */
static int start_run(lua_State *L, const char *where)
{
    lah_check_can_start(L, where);
    lagent *a = check_agent(L, 1);
    if (!lua_isstring(L, 2) && !lua_istable(L, 2)) {
        const char *method = strchr(where, ':');
        return luaL_error(L,
                          "bad argument #1 to '%s' (string or list of blocks expected, got "
                          "%s)",
                          method ? method + 1 : where, luaL_typename(L, 2));
    }
    const char *input = lua_isstring(L, 2) ? lua_tostring(L, 2) : NULL;
    ah_msg_block *in_blocks = NULL; /* input as a list of blocks (strings in the table) */
    size_t n_in_blocks = 0;
    if (!input) {
        char ierr[320];
        /* checked now, so a bad input raises before anything starts; built again
         * (on the stack) just before the worker copies it */
        if (!lah_input_blocks_check(L, 2, &in_blocks, &n_in_blocks, ierr, sizeof ierr))
            return luaL_error(L, "%s: %s", where, ierr);
        lua_pop(L, 1);
    }
    lua_settop(L, 3);
    int has_output = 0, max_output_retries = 1;
    ah_conversation *history = NULL;
    if (!lua_isnil(L, 3)) {
        static const char *const known[] = {"output", "history", "on_done", NULL};
        static const char *const known_out[] = {"validate", "max_retries", NULL};
        char where_output[64];
        snprintf(where_output, sizeof where_output, "%s: output", where);
        luaL_checktype(L, 3, LUA_TTABLE);
        lah_check_fields(L, 3, where, known);
        int ty = lua_getfield(L, 3, "output");
        if (ty == LUA_TTABLE) {
            has_output = 1;
            lah_check_fields(L, -1, where_output, known_out);
            lua_getfield(L, -1, "max_retries");
            if (!lua_isnil(L, -1)) {
                max_output_retries =
                    (int)lah_check_whole(L, -1, where, "output.max_retries", 0, 100);
            }
            lua_pop(L, 1);
            lua_getfield(L, -1, "validate");
            if (!lua_isnil(L, -1) && !lua_isfunction(L, -1))
                return luaL_error(L, "%s: output.validate must be a function", where);
            lua_pop(L, 1);
        } else if (ty == LUA_TBOOLEAN && lua_toboolean(L, -1)) {
            has_output = 1; /* output = true: JSON required, no validator */
        } else if (ty != LUA_TNIL && !(ty == LUA_TBOOLEAN)) {
            return luaL_error(L, "%s: output must be a table, got %s", where,
                              luaL_typename(L, -1));
        }
        lua_pop(L, 1);
        ty = lua_getfield(L, 3, "on_done");
        if (ty != LUA_TNIL && ty != LUA_TFUNCTION)
            return luaL_error(L, "%s: on_done must be a function, got %s", where,
                              luaL_typename(L, -1));
        lua_pop(L, 1);
    }
    lrun *r = lua_newuserdatauv(L, sizeof *r, RUN_UV_N);
    int run = lua_gettop(L);
    memset(r, 0, sizeof *r);
    r->self_ref = r->on_event_ref = r->status_ref = r->retry_on_ref = r->validate_ref =
        r->output_ref = r->on_done_ref = LUA_NOREF;
    r->evc.run_id_ref = r->evc.reused[0] = r->evc.reused[1] = LUA_NOREF;
    r->evc.bound[0] = r->evc.bound[1] = LUA_NOREF;
    r->running = lah_running_slot(L);
    luaL_setmetatable(L, RUN_MT);
    r->agent = a;
    r->main = lah_main(L);
    r->state = lah_state_id(L);
    lua_pushvalue(L, 1);
    lua_setiuservalue(L, run, 1);
    lah_event_sink(L, &r->sink, &r->sink_ud);

    /* the hooks, referenced for the run's duration */
    if (a->has_on_event) {
        lah_event_cache_init(L, &r->evc);
        lua_getiuservalue(L, 1, A_ON_EVENT);
        r->on_event_ref = luaL_ref(L, LUA_REGISTRYINDEX);
    } else if (a->has_status) {
        lua_getiuservalue(L, 1, A_STATUS);
        r->status_ref = luaL_ref(L, LUA_REGISTRYINDEX);
    }
    if (a->coalesce_ms > 0 && (a->has_on_event || a->has_status)) {
        r->coalesce = lah_coalescer_new(lah_loop(L), a->coalesce_ms, a->coalesce_bytes,
                                        deliver_event, r);
        if (!r->coalesce)
            return luaL_error(L, "agenthost: out of memory");
    }
    ah_policy pol = a->policy;
    if (a->has_retry_on) {
        lua_getiuservalue(L, 1, A_RETRY_ON);
        r->retry_on_ref = luaL_ref(L, LUA_REGISTRYINDEX);
        pol.retry_on = run_retry_on;
        pol.retry_on_ud = r;
    }
    if (has_output) {
        lua_getfield(L, 3, "output");
        if (lua_istable(L, -1) && lua_getfield(L, -1, "validate") == LUA_TFUNCTION)
            r->validate_ref = luaL_ref(L, LUA_REGISTRYINDEX);
        lua_settop(L, run);
    }
    if (lua_istable(L, 3) && lua_getfield(L, 3, "on_done") == LUA_TFUNCTION)
        r->on_done_ref = luaL_ref(L, LUA_REGISTRYINDEX);
    lua_settop(L, run);
    /* the run's budget: a number makes a fresh ah.budget(N) per run */
    lua_getiuservalue(L, 1, A_BUDGET);
    if (lua_isinteger(L, -1)) {
        /* straight to lua/tools_ledger.c, never through the module table (a script
         * that replaces ah.budget does not change how agents count) */
        lua_Integer n = lua_tointeger(L, -1);
        lua_pop(L, 1);
        lah_budget_push_new(L, n);
    }
    lua_setiuservalue(L, run, 3);

    /* the tools of the agent's MCP servers as listed now, in a fresh map for this and
     * later runs: the map (in the agent) anchors the names and arrays the worker copies */
    ah_tool_def *mcp_defs = NULL;
    const char **mcp_servers = NULL;
    int *mcp_excl = NULL;
    size_t mcp_n = 0;
    if (lua_getiuservalue(L, 1, A_MCP) == LUA_TTABLE) {
        lua_getfield(L, -1, "list");
        lua_newtable(L);
        mcp_n = lah_mcp_offer(L, -2, -1, a->tools, a->n_tools, &mcp_defs, &mcp_servers);
        mcp_excl = lua_newuserdatauv(L, (mcp_n + 1) * sizeof *mcp_excl, 0);
        for (size_t i = 0; i < mcp_n; i++)
            mcp_excl[i] = i < a->n_tools && a->tool_exclusive ? a->tool_exclusive[i] : 0;
        lua_rawsetp(L, -2, (void *)mcp_excl);
        lua_setfield(L, -3, "map");
        if (mcp_n == 0)
            mcp_n = (size_t)-1; /* none at all: the agent's own (none either) */
    }
    lua_settop(L, run);
    if (mcp_n == (size_t)-1)
        mcp_n = 0;

    /* last of the checks: nothing raises between here and the worker's copy of it */
    if (lua_istable(L, 3) && lua_getfield(L, 3, "history") != LUA_TNIL) {
        char herr[320];
        if (!lah_history_check(L, -1, &history, herr, sizeof herr)) {
            release_run(L, r, 0);
            return luaL_error(L, "%s: %s", where, herr);
        }
    }
    lua_settop(L, run);
    ah_worker_config wc;
    memset(&wc, 0, sizeof wc);
    wc.history = history;
    wc.loop = lah_loop(L);
    wc.client = a->client;
    wc.system = a->system;
    wc.max_steps = a->max_steps;
    wc.policy = &pol;
    wc.retry_budget = a->rb;
    wc.rate_limit = a->rl;
    wc.tools = a->tools;
    wc.n_tools = a->n_tools;
    wc.tool_exclusive = a->tool_exclusive;
    if (mcp_n) {
        wc.tools = mcp_defs;
        wc.n_tools = mcp_n;
        wc.tool_exclusive = mcp_excl;
        wc.tool_servers = mcp_servers;
    }
    wc.max_tool_concurrency = a->max_tool_concurrency;
    wc.tool_exec = run_tool_exec;
    wc.tool_ud = r;
    wc.on_event = run_on_event;
    wc.event_ud = r;
    wc.continue_prompt = a->continue_prompt;
    if (a->has_on_context) {
        wc.on_context_exceeded = run_context_exceeded;
        wc.context_ud = r;
    }
    if (has_output) {
        wc.check_output = run_check_output;
        wc.check_ud = r;
        wc.max_output_retries = max_output_retries;
    }
    char err[256];
    ah_worker_new(&wc, &r->w, err, sizeof err);
    ah_conversation_free(history);
    if (!r->w) {
        release_run(L, r, 0);
        return luaL_error(L, "%s: %s", where, err);
    }
    const char *id = ah_worker_run_id(r->w);
    snprintf(r->what_event, sizeof r->what_event, "%s (%s)",
             r->on_event_ref != LUA_NOREF ? "on_event" : "status display", id);
    snprintf(r->what_retry_on, sizeof r->what_retry_on, "policy.retry_on (%s)", id);
    snprintf(r->what_key, sizeof r->what_key, "idempotency_key (%s)", id);
    snprintf(r->what_done, sizeof r->what_done, "on_done (%s)", id);
    lua_pushvalue(L, run);
    r->self_ref = luaL_ref(L, LUA_REGISTRYINDEX);
    lua_State *prev = lah_enter(L);
    ah_status st;
    char serr[320] = "";
    if (input) {
        st = ah_worker_start(r->w, input);
    } else if (lah_input_blocks_check(L, 2, &in_blocks, &n_in_blocks, serr, sizeof serr)) {
        st = ah_worker_start_blocks(r->w, in_blocks, n_in_blocks, serr, sizeof serr);
        lua_pop(L, 1);
    } else {
        st = AH_ERR_INVALID;
    }
    lah_leave(L, prev);
    if (st != AH_OK && serr[0]) {
        release_run(L, r, 0);
        return luaL_error(L, "%s: input: %s", where, serr);
    }
    if (st != AH_OK) {
        release_run(L, r, 0);
        return luaL_error(L, "%s: cannot start the run: %s", where,
                          ah_status_message(st));
    }
    r->started_on = L;
    list_run(r);
    lah_runs_add(L, 1);
    lua_settop(L, run);
    return run;
}

/* agent:start(input [, { history = h, output = {...}, on_done = fn }]) -> run handle,
 * at once (opts as agent:run, plus on_done(result), called once the run ended) */
static int agent_start(lua_State *L)
{
    start_run(L, "agent:start");
    return 1;
}

/* run_start(agent, input, opts, where) -> run handle: agent:run's start (lua/waits.lua).
 * `where` is a literal of waits.lua, anchored there. */
static int p_run_start(lua_State *L)
{
    const char *where = luaL_optstring(L, 4, "agent:run");
    lua_settop(L, 3);
    start_run(L, where);
    return 1;
}

/* ---- the run handle: run.id, run:wait(), run:cancel([reason]) ---------------------- */

static lrun *check_run(lua_State *L)
{
    return luaL_checkudata(L, 1, RUN_MT);
}

/* run:cancel([reason]) -> true when the run was still going (it ends `cancelled` at
 * once, wherever it is), false when it had already ended. */
static int run_cancel(lua_State *L)
{
    lrun *r = check_run(L);
    const char *reason = luaL_optstring(L, 2, NULL);
    int going = r->w && !ah_worker_finished(r->w) && !r->wait.ready;
    if (going)
        ah_worker_cancel_with(r->w, reason);
    lua_pushboolean(L, going);
    return 1;
}

static int run_index(lua_State *L)
{
    lrun *r = check_run(L);
    const char *k = luaL_checkstring(L, 2);
    if (strcmp(k, "id") == 0) {
        if (lua_getiuservalue(L, 1, RUN_UV_RESULT) == LUA_TTABLE) {
            lua_getfield(L, -1, "run_id");
            return 1;
        }
        lua_pushstring(L, r->w ? ah_worker_run_id(r->w) : NULL);
        return 1;
    }
    lua_getfield(L, lua_upvalueindex(1), k); /* wait (lua/waits.lua), cancel */
    return 1;
}

static int run_tostring(lua_State *L)
{
    lrun *r = check_run(L);
    lua_pushfstring(L, "agenthost.run (%s)",
                    r->w ? (ah_worker_finished(r->w) ? "ended" : "running") : "ended");
    return 1;
}

/* ---- ah.agent{...} ----------------------------------------------------------------- */

static int agent_gc(lua_State *L)
{
    lagent *a = luaL_checkudata(L, 1, AGENT_MT);
    free(a->system);
    free(a->continue_prompt);
    for (size_t i = 0; i < a->n_tools; i++) {
        free((char *)a->tools[i].name);
        free((char *)a->tools[i].description);
        free((char *)a->tools[i].schema_json);
    }
    free(a->tools);
    free(a->tool_exclusive);
    memset(a, 0, sizeof *a);
    return 0;
}

static int cmp_names(const void *x, const void *y)
{
    return strcmp(((const ah_tool_def *)x)->name, ((const ah_tool_def *)y)->name);
}

/* Read the tools table (stack index t): name -> spec, or a list of specs with a name.
 * Fills a->tools, and the agent's A_SPECS (name -> spec) and A_TOOLS (name -> tool
 * object) uservalues. */
static void read_tools(lua_State *L, int t, int agent, lagent *a)
{
    static const char *const known[] = {"name",   "description",     "schema", "run",
                                        "policy", "idempotency_key", "exclusive", NULL};
    if (!lua_istable(L, t))
        luaL_error(L, "ah.agent: tools must be a table, got %s", luaL_typename(L, t));
    lua_newtable(L);
    int specs = lua_gettop(L);
    lua_newtable(L);
    int objs = lua_gettop(L);
    size_t n = 0;
    lua_pushnil(L);
    while (lua_next(L, t)) {
        n++;
        lua_pop(L, 1);
    }
    if (n == 0) {
        lua_pushvalue(L, specs);
        lua_setiuservalue(L, agent, A_SPECS);
        lua_pushvalue(L, objs);
        lua_setiuservalue(L, agent, A_TOOLS);
        lua_settop(L, specs - 1);
        return;
    }
    a->tools = calloc(n, sizeof *a->tools);
    if (!a->tools)
        luaL_error(L, "agenthost: out of memory");
    lua_pushnil(L);
    while (lua_next(L, t)) {
        int spec = lua_gettop(L);
        char where[160];
        const char *name;
        if (lua_type(L, -2) == LUA_TSTRING) {
            name = lua_tostring(L, -2);
        } else if (lua_isinteger(L, -2) && lua_istable(L, spec)) {
            lua_getfield(L, spec, "name");
            if (lua_type(L, -1) != LUA_TSTRING)
                luaL_error(L, "ah.agent: tools[%d]: name is required",
                           (int)lua_tointeger(L, -3));
            name = lua_tostring(L, -1);
            lua_pop(L, 1); /* the spec keeps it alive */
        } else {
            luaL_error(L, "ah.agent: tools: keys are tool names, got a %s key",
                       luaL_typename(L, -2));
            return;
        }
        snprintf(where, sizeof where, "ah.agent: tools.%.100s", name);
        if (lua_type(L, -2) == LUA_TSTRING) {
            lua_pushvalue(L, -2);
            lah_check_no_nul(L, -1, "ah.agent: a tool name");
            lua_pop(L, 1);
        } else {
            lua_getfield(L, spec, "name");
            lah_check_no_nul(L, -1, "ah.agent: a tool name");
            lua_pop(L, 1);
        }
        if (!lua_istable(L, spec))
            luaL_error(L, "%s: expected a table {description, schema, run, ...}, got %s",
                       where, luaL_typename(L, spec));
        lah_check_fields(L, spec, where, known);
        if (lua_getfield(L, specs, name) != LUA_TNIL)
            luaL_error(L, "%s: declared twice", where);
        lua_pop(L, 1);
        if (lua_getfield(L, spec, "run") != LUA_TFUNCTION)
            luaL_error(L, "%s: run must be a function", where);
        lua_pop(L, 1);
        ah_tool_def *d = &a->tools[a->n_tools];
        d->name = dup_or_raise(L, name);
        a->n_tools++;
        if (lua_getfield(L, spec, "description") == LUA_TSTRING)
            d->description = dup_or_raise(L, lua_tostring(L, -1));
        else if (!lua_isnil(L, -1))
            luaL_error(L, "%s: description must be a string", where);
        lua_pop(L, 1);
        int ty = lua_getfield(L, spec, "schema");
        if (ty == LUA_TTABLE) {
            if (!lah_json_encode(L, -1))
                luaL_error(L, "%s: schema: %s", where, lua_tostring(L, -1));
            d->schema_json = dup_or_raise(L, lua_tostring(L, -1));
            lua_pop(L, 1);
        } else if (ty == LUA_TSTRING) {
            d->schema_json = dup_or_raise(L, lua_tostring(L, -1));
        } else if (ty != LUA_TNIL) {
            luaL_error(L, "%s: schema must be a table (or JSON text)", where);
        }
        /* checked now, not at the first request: JSON text parsed, an object schema */
        char why[200];
        if (ah_tool_schema_check(d->schema_json, why, sizeof why) != AH_OK)
            luaL_error(L, "%s: schema %s", where, why);
        lua_pop(L, 1);
        ty = lua_getfield(L, spec, "idempotency_key");
        if (ty != LUA_TNIL && ty != LUA_TFUNCTION)
            luaL_error(L, "%s: idempotency_key must be a function", where);
        lua_pop(L, 1);
        ty = lua_getfield(L, spec, "exclusive");
        if (ty != LUA_TNIL && ty != LUA_TBOOLEAN)
            luaL_error(L, "%s: exclusive must be a boolean", where);
        lua_pop(L, 1);
        /* the policy is checked here too, so its errors name the agent's tool whichever
         * tool object takes it */
        ah_policy scratch;
        ah_policy_init(&scratch);
        lua_getfield(L, spec, "policy");
        if (lah_policy_from_table(L, -1, where, &scratch))
            lua_pop(L, 1);
        lua_pop(L, 1);
        /* the tool object: the same ah.tool a script can build (lua/tools.c) */
        lua_createtable(L, 0, 3);
        lua_pushstring(L, name);
        lua_setfield(L, -2, "name");
        lua_getfield(L, spec, "run");
        lua_setfield(L, -2, "run");
        lua_getfield(L, spec, "policy");
        lua_setfield(L, -2, "policy");
        lah_tool_push(L, -1);
        lua_remove(L, -2);
        lua_setfield(L, objs, name);
        lua_pushvalue(L, spec);
        lua_setfield(L, specs, name);
        lua_settop(L, spec - 1); /* keep the key */
    }
    /* a stable order: the request (and the model's choices) must not depend on hashing */
    qsort(a->tools, a->n_tools, sizeof *a->tools, cmp_names);
    a->tool_exclusive = calloc(a->n_tools, sizeof *a->tool_exclusive);
    if (!a->tool_exclusive)
        luaL_error(L, "agenthost: out of memory");
    for (size_t i = 0; i < a->n_tools; i++) {
        lua_getfield(L, specs, a->tools[i].name);
        lua_getfield(L, -1, "exclusive");
        a->tool_exclusive[i] = lua_toboolean(L, -1);
        lua_pop(L, 2);
    }
    lua_pushvalue(L, specs);
    lua_setiuservalue(L, agent, A_SPECS);
    lua_pushvalue(L, objs);
    lua_setiuservalue(L, agent, A_TOOLS);
    lua_settop(L, specs - 1);
}

/* The default display: require("agenthost.status").new(). On a terminal it is the
 * transient line; off one it writes one plain line per continuation and exhausted budget
 * (retries and give-ups are the library's own log lines there). A missing or failing
 * module just means no display. */
static void default_status(lua_State *L, int agent, lagent *a)
{
    int top = lua_gettop(L);
    lua_getglobal(L, "require");
    lua_pushliteral(L, "agenthost.status");
    if (!lah_pcall_once(L, 1, 1, NULL, &(int){1}) || !lua_istable(L, -1)) {
        lua_settop(L, top);
        ah__log(AH_LOG_DEBUG, "no default status display (agenthost.status not loaded)");
        return;
    }
    /* default(): the display an agent gets when it has no on_event (none inside Neovim,
     * where stderr is the editor's screen); new() for an older module */
    if (lua_getfield(L, -1, "default") != LUA_TFUNCTION) {
        lua_pop(L, 1);
        lua_getfield(L, -1, "new");
    }
    if (lah_pcall_once(L, 0, 1, "agenthost.status.new", NULL) && !lua_isnil(L, -1)) {
        lua_setiuservalue(L, agent, A_STATUS);
        a->has_status = 1;
    }
    lua_settop(L, top);
}

/* on_event_coalesce = MS, or { ms = MS, bytes = N }: merge adjacent deltas for the hook
 * (lah_coalescer); absent or false: every delta is its own event */
static void read_coalesce(lua_State *L, const char *where, lagent *a)
{
    int ty = lua_getfield(L, 1, "on_event_coalesce");
    a->coalesce_ms = 0;
    a->coalesce_bytes = 16384;
    if (ty == LUA_TNUMBER) {
        a->coalesce_ms = lah_check_whole(L, -1, where, "on_event_coalesce", 1, 3600000);
    } else if (ty == LUA_TTABLE) {
        static const char *const known[] = {"ms", "bytes", NULL};
        lah_check_fields(L, lua_gettop(L), "ah.agent: on_event_coalesce", known);
        lua_getfield(L, -1, "ms");
        a->coalesce_ms = lua_isnil(L, -1) ? 50
                                          : lah_check_whole(L, -1, where, "on_event_coalesce.ms",
                                                            1, 3600000);
        lua_getfield(L, -2, "bytes");
        if (!lua_isnil(L, -1))
            a->coalesce_bytes = (size_t)lah_check_whole(L, -1, where, "on_event_coalesce.bytes",
                                                        1, 1 << 30);
        lua_pop(L, 2);
    } else if (ty != LUA_TNIL && !(ty == LUA_TBOOLEAN && !lua_toboolean(L, -1))) {
        luaL_error(L, "%s: on_event_coalesce must be a number of ms, a table {ms = , bytes = } "
                      "or false, got %s",
                   where, luaL_typename(L, -1));
    }
    lua_pop(L, 1);
}

static int l_agent(lua_State *L)
{
    static const char *const known[] = {
        "client",   "system", "max_steps", "policy",          "tools",
        "on_event", "ledger", "budget",    "continue_prompt", "on_event_reuse",
        "rate_limit", "max_tool_concurrency", "on_event_coalesce", "mcp",
        "on_context_exceeded", NULL};
    const char *where = "ah.agent";
    luaL_checktype(L, 1, LUA_TTABLE);
    lua_settop(L, 1);
    lah_check_fields(L, 1, where, known);
    lagent *a = lua_newuserdatauv(L, sizeof *a, A_NUV);
    int agent = lua_gettop(L);
    memset(a, 0, sizeof *a);
    luaL_setmetatable(L, AGENT_MT);

    lua_getfield(L, 1, "client");
    a->client = lah_check_client(L, -1);
    if (!a->client)
        return luaL_error(L, "%s: client must be an ah.client{...}, got %s", where,
                          luaL_typename(L, -1));
    lua_setiuservalue(L, agent, A_CLIENT);

    int ty = lua_getfield(L, 1, "system");
    if (ty == LUA_TSTRING)
        a->system = dup_or_raise(L, lua_tostring(L, -1));
    else if (ty != LUA_TNIL)
        return luaL_error(L, "%s: system must be a string", where);
    lua_pop(L, 1);
    ty = lua_getfield(L, 1, "continue_prompt");
    if (ty == LUA_TSTRING)
        a->continue_prompt = dup_or_raise(L, lua_tostring(L, -1));
    else if (ty != LUA_TNIL)
        return luaL_error(L, "%s: continue_prompt must be a string", where);
    lua_pop(L, 1);
    if (lua_getfield(L, 1, "max_steps") != LUA_TNIL) {
        a->max_steps = (int)lah_check_whole(L, -1, where, "max_steps", 1, 1000000);
    }
    lua_pop(L, 1);

    if (lua_getfield(L, 1, "max_tool_concurrency") != LUA_TNIL)
        a->max_tool_concurrency =
            (int)lah_check_whole(L, -1, where, "max_tool_concurrency", 1, 1000);
    lua_pop(L, 1);

    ah_policy_init(&a->policy);
    lua_getfield(L, 1, "policy");
    if (lah_policy_from_table(L, -1, where, &a->policy)) {
        a->has_retry_on = 1;
        lua_setiuservalue(L, agent, A_RETRY_ON);
    }
    lua_pop(L, 1);

    ty = lua_getfield(L, 1, "on_event");
    if (ty == LUA_TFUNCTION) {
        a->has_on_event = 1;
        lua_setiuservalue(L, agent, A_ON_EVENT);
    } else if (ty == LUA_TNIL) {
        lua_pop(L, 1);
        default_status(L, agent, a);
    } else if (ty == LUA_TBOOLEAN && !lua_toboolean(L, -1)) {
        lua_pop(L, 1); /* on_event = false: no display at all */
    } else {
        return luaL_error(L, "%s: on_event must be a function (or false), got %s", where,
                          luaL_typename(L, -1));
    }
    ty = lua_getfield(L, 1, "on_context_exceeded");
    if (ty == LUA_TFUNCTION) {
        a->has_on_context = 1;
        lua_setiuservalue(L, agent, A_ON_CONTEXT);
    } else if (ty == LUA_TNIL) {
        lua_pop(L, 1);
    } else {
        return luaL_error(L, "%s: on_context_exceeded must be a function, got %s", where,
                          luaL_typename(L, -1));
    }
    ty = lua_getfield(L, 1, "on_event_reuse");
    if (ty != LUA_TNIL && ty != LUA_TBOOLEAN)
        return luaL_error(L, "%s: on_event_reuse must be a boolean, got %s", where,
                          luaL_typename(L, -1));
    /* absent or true: the cheapest refill when the hook provably cannot keep or change
     * its table (lah_hook_keeps_nothing); true: otherwise every field refilled; false:
     * fresh tables always */
    a->reuse_deltas = lua_toboolean(L, -1) ? LAH_REUSE_REFILL : LAH_REUSE_NONE;
    if ((ty == LUA_TNIL || a->reuse_deltas) && a->has_on_event) {
        lua_getiuservalue(L, agent, A_ON_EVENT);
        if (lah_hook_keeps_nothing(L, -1))
            a->reuse_deltas = LAH_REUSE_READ_ONLY;
        lua_pop(L, 1);
    }
    lua_pop(L, 1);
    read_coalesce(L, where, a);

    if (lua_getfield(L, 1, "tools") != LUA_TNIL)
        read_tools(L, lua_gettop(L), agent, a);
    else {
        lua_newtable(L);
        lua_setiuservalue(L, agent, A_SPECS);
        lua_newtable(L);
        lua_setiuservalue(L, agent, A_TOOLS);
    }
    lua_pop(L, 1);

    /* ledger: an ah.ledger object or a path (shared by every run), false (none), or
     * absent: nil here, and each run gets an in-memory ledger of its own (run_tool_exec) */
    ty = lua_getfield(L, 1, "ledger");
    if (ty == LUA_TSTRING) {
        lah_ledger_push_arg(L, -1); /* opened once per path */
        lua_remove(L, -2);
    } else if (ty == LUA_TUSERDATA) {
        if (!lah_ledger_test(L, -1))
            return luaL_error(L, "%s: ledger must be an ah.ledger, a path or false, got %s",
                              where, luaL_typename(L, -1));
    } else if (ty == LUA_TBOOLEAN && !lua_toboolean(L, -1)) {
        /* false: no ledger, no idempotency */
    } else if (ty != LUA_TNIL) {
        return luaL_error(L, "%s: ledger must be an ah.ledger, a path or false, got %s",
                          where, luaL_typename(L, -1));
    }
    lua_setiuservalue(L, agent, A_LEDGER);

    /* budget: an ah.budget object (shared as is) or a number (a fresh budget per run) */
    ty = lua_getfield(L, 1, "budget");
    if (ty == LUA_TNUMBER) {
        lua_Integer n = lah_check_whole(L, -1, where, "budget", 0, LUA_MAXINTEGER);
        lua_pop(L, 1);
        lua_pushinteger(L, n); /* kept as an integer: a fresh ah.budget(n) per run */
    } else if (ty != LUA_TNIL && ty != LUA_TUSERDATA && ty != LUA_TTABLE) {
        return luaL_error(L, "%s: budget must be an ah.budget or a number, got %s", where,
                          luaL_typename(L, -1));
    }
    lua_setiuservalue(L, agent, A_BUDGET);

    a->rb = lah_push_retry_budget(L);
    lua_setiuservalue(L, agent, A_RB);
    /* rate_limit: the agent's own, else its client's (anchored by the client) */
    ty = lua_getfield(L, 1, "rate_limit");
    a->rl = lah_check_rate_limit(L, -1);
    if (ty != LUA_TNIL && !a->rl)
        return luaL_error(L, "%s: rate_limit must be an ah.rate_limit{...}, got %s", where,
                          luaL_typename(L, -1));
    lua_setiuservalue(L, agent, A_RL);
    if (!a->rl) {
        lua_getiuservalue(L, agent, A_CLIENT);
        a->rl = lah_client_rate_limit(L, -1);
        lua_pop(L, 1);
    }
    /* mcp: a list of ah.mcp servers whose tools the agent offers as <server>__<tool> */
    ty = lua_getfield(L, 1, "mcp");
    if (ty == LUA_TTABLE) {
        int list = lua_gettop(L);
        lua_createtable(L, 0, 2);
        lua_createtable(L, (int)lua_rawlen(L, list), 0);
        for (int i = 1; i <= (int)lua_rawlen(L, list); i++) {
            lua_rawgeti(L, list, i);
            if (!lah_mcp_test(L, -1))
                return luaL_error(L, "%s: mcp[%d] must be an ah.mcp{...}, got %s", where, i,
                                  luaL_typename(L, -1));
            lah_mcp_listen(L, -1, agent);
            lua_rawseti(L, -2, i);
        }
        lua_setfield(L, -2, "list");
        lua_newtable(L);
        int map = lua_gettop(L);
        /* the tools known now: a collision is an error here already */
        ah_tool_def *defs;
        const char **servers;
        lua_getfield(L, -2, "list");
        lah_mcp_offer(L, -1, map, a->tools, a->n_tools, &defs, &servers);
        lua_pop(L, 1);
        lua_setfield(L, -2, "map");
        lua_setiuservalue(L, agent, A_MCP);
    } else if (ty != LUA_TNIL) {
        return luaL_error(L, "%s: mcp must be a list of ah.mcp{...} servers", where);
    }
    lua_settop(L, agent);
    return 1;
}

/* agent_mcp_pending(agent) -> a server of the agent not yet settled, or nil
 * (lua/waits.lua: agent:run waits for it) */
static int p_agent_mcp_pending(lua_State *L)
{
    check_agent(L, 1);
    if (lua_getiuservalue(L, 1, A_MCP) != LUA_TTABLE)
        return 0;
    lua_getfield(L, -1, "list");
    lah_push_private(L);
    lua_getfield(L, -1, "mcp_settle");
    int settle = lua_gettop(L);
    int list = settle - 2;
    for (int i = 1; i <= (int)lua_rawlen(L, list); i++) {
        lua_pushvalue(L, settle);
        lua_rawgeti(L, list, i);
        if (lah_gate_protect_call(L, 1, 1) != LUA_OK)
            return lua_error(L);
        if (!lua_isnil(L, -1))
            return 1;
        lua_pop(L, 1);
    }
    return 0;
}

void lah_agent_mcp_event(lua_State *L, int agent, const ah_event *ev)
{
    lagent *a = luaL_testudata(L, agent, AGENT_MT);
    if (!a || !lua_checkstack(L, 6))
        return;
    agent = lua_absindex(L, agent);
    int top = lua_gettop(L);
    if (a->has_on_event) {
        lua_getiuservalue(L, agent, A_ON_EVENT);
        lah_push_event(L, ev);
        lah_pcall_once(L, 1, 0, "on_event", &a->event_failed);
    } else if (a->has_status) {
        lua_getiuservalue(L, agent, A_STATUS);
        lua_getfield(L, -1, "update");
        lua_insert(L, -2);
        lah_push_event(L, ev);
        lah_pcall_once(L, 2, 0, "status display", &a->event_failed);
    }
    lua_settop(L, top);
}

static int agent_tostring(lua_State *L)
{
    lagent *a = check_agent(L, 1);
    lua_pushfstring(L, "agenthost.agent (%d tools)", (int)a->n_tools);
    return 1;
}

void lah_open_agent(lua_State *L)
{
    static const luaL_Reg run_meta[] = {{"__gc", run_gc}, {"__tostring", run_tostring},
                                        {NULL, NULL}};
    static const luaL_Reg run_methods[] = {{"cancel", run_cancel}, {NULL, NULL}};
    static const luaL_Reg agent_meta[] = {
        {"__gc", agent_gc}, {"__tostring", agent_tostring}, {NULL, NULL}};
    /* run (agent:run) and run:wait are added by lua/waits.lua */
    static const luaL_Reg agent_methods[] = {{"start", agent_start}, {NULL, NULL}};
    static const luaL_Reg priv[] = {
        {"run_start", p_run_start},
        {"run_result", run_result},
        {"agent_mcp_pending", p_agent_mcp_pending},
        {NULL, NULL}};
    static const luaL_Reg fns[] = {{"agent", l_agent}, {NULL, NULL}};
    lah_push_private(L);
    int priv_t = lua_gettop(L);
    luaL_setfuncs(L, priv, 0);
    luaL_newmetatable(L, RUN_MT);
    luaL_setfuncs(L, run_meta, 0);
    luaL_newlib(L, run_methods);
    lua_pushvalue(L, -1);
    lua_setfield(L, priv_t, "run_methods");
    lua_pushcclosure(L, run_index, 1); /* run.id, else the methods */
    lua_setfield(L, -2, "__index");
    lua_pop(L, 1);
    luaL_newmetatable(L, AGENT_MT);
    luaL_setfuncs(L, agent_meta, 0);
    luaL_newlib(L, agent_methods);
    lua_pushvalue(L, -1);
    lua_setfield(L, priv_t, "agent_methods");
    lua_setfield(L, -2, "__index");
    lua_pop(L, 2); /* the metatable, the private table */
    luaL_setfuncs(L, fns, 0);
}
