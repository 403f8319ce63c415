/* lah.h - internals shared by the Lua binding (the files under lua/): the scheduler that
 * runs Lua coroutines over the one core loop, the protected-call helper, JSON and config
 * helpers, and the seams between the binding's parts (agent.c <-> tools.c, main.c).
 *
 * The model (one code path, two drivers, every Lua runtime):
 *  - One ah_loop per lua_State (created by luaopen_agenthost, kept in the registry, freed
 *    by the scheduler's __gc). The scheduler is created before any other object of the
 *    binding, so at lua_close it is finalized LAST (every runtime finalizes newest first):
 *    every worker, timer and transfer is freed before the loop. The loop waits on one
 *    epoll set (lua/backend.c) that a host's own loop can watch (ah.backend_fd).
 *  - No C function of the binding waits. Code that must wait for the core (agent:run,
 *    run:wait, a tool's retry wait, ah.parallel, ah.sleep, ah.batch) is a small Lua
 *    function in lua/waits.lua over C primitives that never wait: a start that returns a
 *    waitable object (a userdata whose C struct begins with a lah_wait), then
 *    `await(w)`: inside a coroutine the scheduler manages, and where a yield can reach
 *    the scheduler, it yields (Lua's own coroutine.yield, so no yield ever crosses a C
 *    call: Lua 5.1 and LuaJIT have no lua_yieldk); anywhere else (the main chunk of a
 *    plain `lua`, a coroutine the user created, a C callback) it drives the scheduler
 *    itself until the wait is ready — the same code path either way.
 *  - The scheduler's step: run deferred calls (a run's on_done), resume every managed
 *    coroutine that is new, runnable or whose wait is ready; then let the loop handle
 *    what is ready (without blocking when something ran, else until the next timer or
 *    socket event when blocking).
 *  - Tool bodies and batch items run as coroutines of their own, so a body that waits (a
 *    sub-agent) yields, and its error is caught where the scheduler resumes it: no
 *    pcall sits between a body and the scheduler on any runtime.
 *  - Hooks (on_event, retry_on, validate, idempotency_key, on_done) are plain protected
 *    calls through the gate on the RUNNING Lua thread (lah_running()), never on a
 *    suspended coroutine; they must not wait (a wait inside one is an error, logged like
 *    any other).
 */
#ifndef LAH_H
#define LAH_H

#include "agenthost.h"

#include "agenthost/redis.h"

#include "compat.h"

/* ---- the scheduler (lua/sched.c) ----------------------------------------------------- */

/* A condition a Lua thread waits on: the first member of every waitable userdata. The
 * waiter keeps the userdata (so it lives as long as the wait); whoever completes the work
 * sets ready = 1 (on the loop thread). */
typedef struct lah_wait {
    int ready;
} lah_wait;

/* The loop of this Lua state (created on first use). Never NULL: failure raises. */
ah_loop *lah_loop(lua_State *L);
/* A thread of this state that lives as long as the state (its main thread; on 5.1 and
 * LuaJIT the thread that first loaded the module), and an identity for the state. */
lua_State *lah_main(lua_State *L);
void *lah_state_id(lua_State *L);

/* Run a function in a new coroutine managed by the scheduler: the function and its
 * nargs arguments are on top of L's stack and are moved to the coroutine. It first runs
 * at the next scheduler step. on_done (may be NULL) is called once when it ends, on the
 * loop thread, with ok = 1 and the coroutine's stack holding exactly its results
 * (lua_gettop(co) of them), or ok = 0 and two values on top: the error value as raised
 * (at -2) and a string "message\ntraceback" (at -1). Without on_done a failure is logged
 * as a warning. The coroutine is released after on_done returns. Returns the coroutine
 * (borrowed, valid until on_done returns).
 * lah_spawn_ex also: anchor (a stack index, 0 for none: a value kept alive until the
 * coroutine ends, e.g. the userdata on_done's ud points into) and child (1: the
 * coroutine belongs to the one running now and is killed with it by lah_kill). */
typedef void (*lah_done_fn)(void *ud, lua_State *co, int ok);
lua_State *lah_spawn(lua_State *L, int nargs, lah_done_fn on_done, void *ud);
lua_State *lah_spawn_ex(lua_State *L, int nargs, lah_done_fn on_done, void *ud, int anchor,
                        int child);

/* End a managed coroutine now, without resuming it (a cancelled run's tool calls), with
 * every child coroutine it owns (lah_spawn_ex child): each is passed to `each` (may be
 * NULL) first, then its to-be-closed variables are closed (5.4) and its on_done is NOT
 * called. One that is running right now (on the C stack) ends at its next yield. Unknown
 * or dead: no-op. */
typedef void (*lah_kill_fn)(lua_State *co);
void lah_kill(lua_State *L, lua_State *co, lah_kill_fn each);

/* Drop a registry reference at the start of the next scheduler step, outside the loop:
 * for a reference that anchors an object whose C code is still on the stack (a run
 * whose worker is emitting run_end). */
void lah_unref_later(lua_State *L, int ref);

/* Call fn(L, ud) at the top of the next scheduler step, outside the loop, on the thread
 * that steps (a run's on_done). Returns 0 when out of memory. */
typedef void (*lah_defer_fn)(lua_State *L, void *ud);
int lah_defer(lua_State *L, lah_defer_fn fn, void *ud);

/* One scheduler step (see above); block 0 never waits. Returns the number of coroutines
 * still managed, or -1 (only when blocking) when nothing can make progress any more (no
 * coroutine runnable, none ready, and the loop has no timer or transfer left: whoever
 * still waits would wait forever). */
int lah_step(lua_State *L, int block);

/* Runs in flight in this state (what ah.step() returns): +1 when a run starts, -1 when
 * its result has been delivered. */
void lah_runs_add(lua_State *L, int delta);

/* The Lua thread that is running right now (the one a hook must use). */
lua_State *lah_running(lua_State *L);
/* Where lah_running() reads the running thread: valid as long as the state (the
 * scheduler is finalized last), for a caller on a hot path to read it directly. */
lua_State *const *lah_running_slot(lua_State *L);

/* A Lua API function that calls into the core synchronously (which may fire hooks, e.g.
 * ah_worker_start emits run_start) brackets the call with these, so lah_running() is
 * exactly the thread executing it: prev = lah_enter(L); ...; lah_leave(L, prev). */
lua_State *lah_enter(lua_State *L);
void lah_leave(lua_State *L, lua_State *prev);

/* ah.step, ah.backend_fd, ah.backend_timeout into the module table on top; the wait
 * primitives into the private table. */
void lah_open_sched(lua_State *L);

/* ---- the private table of lua/waits.lua --------------------------------------------
 * C primitives that only the shipped Lua (lua/waits.lua, run once per state by
 * luaopen_agenthost) sees: start/step/finish halves of everything that waits. */
void lah_private_funcs(lua_State *L, const luaL_Reg *fns);
/* Push the private table (created on first use). */
void lah_push_private(lua_State *L);

/* ---- the gate: every call from C into Lua (lua/gate.c) ---------------------------
 *
 * No other file of the binding calls lua_pcall, lua_call or lua_resume
 * (tests/cli/test_gate.sh checks it). Errors come out the same way from every entry:
 * "message\ntraceback". */

/* The state's gate: its counters live in the scheduler (stable address for the state's
 * life), so a hot path looks it up once and keeps the pointer. */
typedef struct lah_gate {
    int hook_depth; /* hooks running right now, nested */
    int in_loop;    /* inside the loop's dispatch: whatever runs there is a hook */
    int in_done;    /* inside an on_done: a hook that may start runs, not wait */
} lah_gate;
lah_gate *lah_gate_of(lua_State *L);

/* The message handler of every protected call: turns the error (string, or a value with
 * __tostring) into "message\ntraceback". */
int lah_traceback(lua_State *L);

/* THE protected call: the function is below nargs arguments on top of L. msgh: the
 * absolute index of lah_traceback kept by the caller at a fixed slot (a hot path), or 0:
 * the gate puts it below the function and removes it again. g non-NULL: the call is a
 * hook (its depth is counted: see lah_check_not_in_hook). Returns the lua_pcall status;
 * on success nresults values, on error one, "message\ntraceback"; below the function
 * the stack is as it was either way. No table lookup, no allocation. */
int lah_gate_call(lua_State *L, lah_gate *g, int nargs, int nresults, int msgh);

/* Resume co. On an error the error value stays at the top of the dead coroutine and
 * "message\ntraceback" is pushed above it (built on from, which must be the thread
 * executing now). */
int lah_gate_resume(lua_State *co, lua_State *from, int nargs, int *nres);

/* Run the C function f(ud) protected, without a traceback: for code that holds C
 * memory to free before a (memory) error goes on. Returns the status; the error value
 * or nresults results on top. */
int lah_gate_protect(lua_State *L, lua_CFunction f, void *ud, int nresults);

/* A protected call of the function below nargs arguments, without a traceback (the
 * message as raised, for an error that becomes a record's message). */
int lah_gate_protect_call(lua_State *L, int nargs, int nresults);

/* A call that lets errors through, for code that is itself inside a protected call
 * (running the shipped Lua of lua/waits.lua inside luaopen_agenthost). */
void lah_gate_call_raising(lua_State *L, int nargs, int nresults);

/* Hooks. lah_pcall_once: a hook call through the gate. On success leaves nresults
 * values and returns 1. On error pops everything it was given and returns 0, after
 * logging a warning "<what>: <message + traceback>" unless *once is non-zero (once may
 * be NULL: always log); *once is then set to 1, so a hook that fails on every event is
 * reported once (the C default then decides). Never raises (beyond a memory error). */
int lah_pcall_once(lua_State *L, int nargs, int nresults, const char *what, int *once);
int lah_pcall(lua_State *L, int nargs, int nresults, const char *what); /* once = NULL */
/* lah_pcall_once for a hot path (on_event): the state's gate already at hand (kept from
 * lah_gate_of() at the run's start: no registry lookup per call) and msgh as in
 * lah_gate_call (lah_traceback pushed by the caller before the function: no stack
 * shuffle; 0: the gate inserts it). Cost per call over a raw lua_pcall of an empty Lua
 * function (~310 instructions, callgrind): this way, handler pushed first +122; the
 * plain lah_pcall_once (registry lookup, handler inserted) +420; a handler the caller
 * keeps at a fixed slot for many calls, through lah_gate_call, +44. */
int lah_gate_hook_once(lua_State *L, lah_gate *g, int nargs, int nresults, int msgh,
                       const char *what, int *once);

/* The same hook call for a caller that wants the error: returns the status and leaves
 * "message\ntraceback" on the stack on failure (nothing logged). */
int lah_pcall_hook(lua_State *L, int nargs, int nresults);
/* The per-event variant of lah_pcall_hook, for a caller that calls a hook per event (on
 * on_event): the message handler (lah_traceback) is already on the stack at msgh, below
 * the function, and depth is lah_hook_depth_slot(L), read once. The same hook-depth
 * accounting and status; msgh stays on the stack. */
int lah_pcall_hook_at(lua_State *L, int nargs, int nresults, int msgh, int *depth);
/* The scheduler's hook-depth counter (valid as long as the state). */
int *lah_hook_depth_slot(lua_State *L);

/* Hooks must not wait: a hook runs synchronously inside a step of the loop or of a tool
 * call, so a wait there would re-enter the loop or resume a half-finished step. Every
 * Lua function that waits (ah.parallel, ah.sleep, agent:run, tool:call, ah.batch...)
 * calls this FIRST, before it has any effect: inside a hook (or an on_done) it raises
 * "<what> cannot be called inside a hook (...)"; elsewhere it does nothing.
 * lah_check_can_start: the same for starting a run (agent:start), which an on_done may
 * do. */
void lah_check_not_in_hook(lua_State *L, const char *what);
void lah_check_can_start(lua_State *L, const char *what);

/* ---- the host's event sink (main.c --events) --------------------------------------- */

/* Every event of every agent of this state goes to fn (before any Lua hook), e.g. the
 * JSON Lines writer of `agenthost --events`. fn NULL removes it. Events are borrowed. */
void lah_set_event_sink(lua_State *L, ah_event_fn fn, void *ud);
/* The sink of this state (fn NULL when none). */
void lah_event_sink(lua_State *L, ah_event_fn *fn, void **ud);

/* ---- JSON (the binding's own canonical encoder and exact decoder: no Lua JSON library) */

/* Push the JSON text of the value at idx and return 1; or push an error message and
 * return 0 (a function, a cycle, NaN: the message names where). Never raises (beyond a
 * memory error). Keys are sorted: the same value always gives the same text. */
int lah_json_encode(lua_State *L, int idx);
/* Push the decoded value of s[0..len) and return 1 (JSON null is cjson.null, i.e.
 * lightuserdata NULL; whole numbers are integers); or push an error message and return
 * 0 ("invalid JSON at byte N"). */
int lah_json_decode(lua_State *L, const char *s, size_t len);
/* Push an event as a Lua table with the docs/lua.md field names (ah_event_visit); a null
 * field (status 0, no error) is nil; an error is an error value (lah_push_error). */
void lah_push_event(lua_State *L, const ah_event *ev);

/* The hot path of an on_event hook (lua/events.c): what a caller keeps per run so that an
 * event costs one C->Lua call and no string but its text. Init before the first event
 * (may raise: out of memory), free when the run is done with it. */
typedef struct lah_event_cache {
    const void *tr;     /* the state's per-type trampolines */
    int *depth;         /* lah_hook_depth_slot() */
    const char *run_id; /* the run id last pushed, and its Lua string */
    int run_id_ref;
    int reused[2]; /* reuse: the text_delta / reasoning_delta tables */
    int bound[2];  /* LAH_REUSE_READ_ONLY: their ts_ms + text refills */
    const char *delta_run_id[2]; /* what the reused tables hold */
    int delta_call[2], delta_block[2];
    int busy[2]; /* a hook is running with that table */
} lah_event_cache;
/* lah_event_hook's reuse: none (a fresh table per event), refill every field of one
 * table per delta type (on_event_reuse = true: the hook may write into it), or, for a
 * hook that cannot change it (lah_hook_keeps_nothing), refill only what changed */
enum { LAH_REUSE_NONE, LAH_REUSE_REFILL, LAH_REUSE_READ_ONLY };
void lah_event_cache_init(lua_State *L, lah_event_cache *c);
void lah_event_cache_free(lua_State *L, lah_event_cache *c);
/* Call the hook (a function, registry reference hook_ref) with ev's table, protected
 * like lah_pcall_hook (traceback, hook depth). The table is fresh (the same fields and
 * values as lah_push_event); with reuse, a text_delta or reasoning_delta refills one table
 * per type and run instead. Returns the lua_pcall status; on an error the message (with
 * traceback) is left on the stack, otherwise nothing (also when the stack cannot grow:
 * the event is dropped). Never raises (beyond a memory error). */
int lah_event_hook(lua_State *L, int hook_ref, const ah_event *ev, lah_event_cache *c,
                   int reuse);
/* 1 if the function at idx provably cannot keep, pass on or change its first argument
 * (lua/hook_escape.c reads its bytecode; 0 when unsure: a C function, another Lua's
 * bytecode, anything not known), so a refilled table is indistinguishable from a fresh
 * one for it. Never raises (beyond a memory error). */
int lah_hook_keeps_nothing(lua_State *L, int idx);

/* Coalescing deltas for a display (ah.agent{on_event_coalesce = ...}, lua/events.c):
 * adjacent text_delta (or reasoning_delta) events of one run, LLM call and block are
 * merged into one (the first one's fields, their texts concatenated), delivered when
 * max_bytes are buffered, ms after the first one (a loop timer: a pause in the stream
 * does not hold text back), or before any other event. feed returns 1 when it took ev
 * (deliver will get it, merged, later), 0 when the caller delivers ev itself (anything
 * pending was delivered first). deliver gets a borrowed event. new returns NULL when out
 * of memory; free drops what is pending. */
typedef struct lah_coalescer lah_coalescer;
typedef void (*lah_deliver_fn)(void *ud, const ah_event *ev);
lah_coalescer *lah_coalescer_new(ah_loop *loop, int64_t ms, size_t max_bytes,
                                 lah_deliver_fn deliver, void *ud);
int lah_coalescer_feed(lah_coalescer *c, const ah_event *ev);
void lah_coalescer_free(lah_coalescer *c);
/* Push a cJSON tree as a Lua value (protected; a top-level null is nil, a nested null is
 * cjson.null; whole numbers are integers) and free it, also when pushing raises. */
struct cJSON;
void lah_push_cjson(lua_State *L, struct cJSON *root);
/* The decoder behind lah_json_decode (lua/tools_json.c): integers exactly as written
 * (12345678901234567 stays that integer; cJSON would round it through a double). Returns
 * 1 with the value pushed, or 0 with nothing pushed, *errpos the byte offset of the
 * error and *trailing 1 when a value was followed by other text. Raises only for memory
 * or nesting too deep for the C stack. */
int lah_json_push_exact(lua_State *L, const char *json, size_t len, size_t *errpos,
                        int *trailing);

/* ---- runs in flight (lua/agent.c), for the host's Ctrl-C -------------------------- */

/* Cancel every run of this Lua state that is still going (ah_worker_cancel_with reason),
 * and its MCP calls made outside a run (lah_mcp_cancel_bare); returns how many. Loop
 * thread, outside hooks or inside them. */
int lah_cancel_runs(lua_State *L, const char *reason);
/* How many runs (and MCP calls outside a run) of the process are going right now. Safe
 * from any thread (atomics). */
int lah_runs_in_flight(void);

/* ---- conversations (lua/history.c) ------------------------------------------------ */

/* Push a conversation's messages as a Lua history (result.history): a list of
 * { role, partial, content = { blocks } } with every field a block has. shared: the
 * absolute index of a Lua string (the result's text) that a text block equal to it
 * reuses instead of a second copy of a large answer; 0 = none. */
void lah_push_history(lua_State *L, const ah_conversation *c, int shared);
/* Check the Lua history at idx and build the conversation it describes (*out, owned by
 * the caller). Returns 1; or 0 with err naming the first bad element
 * ("history[3].content[1].type: unknown block type 'image'"). Never raises (beyond a
 * memory error); may store a tool_use's encoded input as its arguments. */
/* agent:run(input) with a list of blocks: each a text, image or document block table (or
 * a string, a text block), checked as history blocks are. On success *out is pushed
 * (a userdata: keep it on the stack while *out is used) and borrows its strings from
 * the table at idx, which must stay alive too. 0 (nothing pushed) with err naming
 * "input[2].media_type: ..." on a bad one. */
int lah_input_blocks_check(lua_State *L, int idx, ah_msg_block **out, size_t *n_out,
                           char *err, size_t errsize);
int lah_history_check(lua_State *L, int idx, ah_conversation **out, char *err,
                      size_t errsize);
void lah_open_history(lua_State *L); /* ah.history_save, ah.history_load */

/* ---- registration ------------------------------------------------------------------
 * Every binding file registers its functions as luaL_Reg tables: lah_register_class
 * creates the metatable `mt` with the functions of `meta` (__gc, __index, ...), and the
 * module's own functions go into the module table on top with luaL_setfuncs. */
void lah_register_class(lua_State *L, const char *mt, const luaL_Reg *meta);

/* ---- config tables ----------------------------------------------------------------- */

/* Raise "<where>: unknown field 'x' (did you mean 'y'?)" for the first string key of the
 * table at idx that is not in the NULL-terminated list `known`; also raise for a
 * non-string key. */
void lah_check_fields(lua_State *L, int idx, const char *where, const char *const *known);

/* The string at idx, which must hold no NUL byte: C sees a string only up to its first
 * NUL, so "rec\0evil" would be the tool "rec" and keys "order\0A" / "order\0B" would
 * collide. Raises "<what> contains a NUL byte at offset N" otherwise. */
const char *lah_check_no_nul(lua_State *L, int idx, const char *what);
/* The NULL-terminated list's nearest name to `name` within a small edit distance, or
 * NULL. */
const char *lah_did_you_mean(const char *name, const char *const *known);

/* Whole numbers: wherever one is expected, an integral float (3.0, which is what
 * lua-cjson gives for every JSON number) is accepted and 3.5 is not. lah_to_whole: 1 and
 * *out for an integer or integral float at idx, else 0. lah_check_whole: the value, or
 * raise "<where>: <field> must be a whole number from MIN to MAX (got 3.5)" (">= MIN"
 * when max is LUA_MAXINTEGER). */
int lah_to_whole(lua_State *L, int idx, lua_Integer *out);
lua_Integer lah_check_whole(lua_State *L, int idx, const char *where, const char *field,
                            lua_Integer min, lua_Integer max);

/* Fill *p from the policy table at idx (nil: leave *p as is), validating every field with
 * ah_policy_set_int / _set_str and the whole with ah_policy_validate. Errors raise
 * "<where>: policy.<field>: <reason>". retry_on is not set here: when the table has a
 * function under retry_on it is pushed (else nothing is pushed) and 1 is returned. */
int lah_policy_from_table(lua_State *L, int idx, const char *where, ah_policy *p);

/* Push an ah_error as a Lua error value: a table {kind, status, retry_after_ms,
 * provider_type, message} with the "agenthost.error" metatable (tostring gives the
 * message; status / retry_after_ms / provider_type are nil when absent). */
void lah_push_error(lua_State *L, const ah_error *e);
/* Read an error value (table with kind/message/status/..., or any value, which becomes
 * a `permanent` error with its tostring as message) into *e. */
void lah_to_error(lua_State *L, int idx, ah_error *e);

/* Push the process-level retry budget userdata (ah.retry_budget) and return its budget,
 * or push nil and return NULL when none is set. Agents keep the userdata to anchor it. */
ah_retry_budget *lah_push_retry_budget(lua_State *L);

/* ---- the tool seam (agent.c <-> lua/tools.c) ----------------------------------------
 *
 * lua/tools.c defines lah_tools_open(); luaopen_agenthost calls it to add ah.tool,
 * ah.ledger, ah.budget and ah.batch to the module table at the top of the stack. Nothing
 * of an agent goes through that table: a script that replaces ah.ledger or ah.budget
 * changes only its own calls (tests/lua/test_gate.lua).
 *
 * An agent turns each tool it declares into a TOOL OBJECT at ah.agent time, with
 * lah_tool_push() on { name = NAME, run = spec.run, policy = spec.policy } (the same
 * object ah.tool{...} builds; spec.description / schema / idempotency_key stay with the
 * agent). For each tool call of a completed response the agent decides the key (default
 * "<run_id>:<tool_call_id>", or spec.idempotency_key(args, ctx)) and runs
 *     tool_call_into(obj, args, { key = K, ledger = L, budget = B, run_id = R,
 *                                 tool_call_id = ID, name = NAME, on_event = fn })
 * (lua/waits.lua, from the private table) in a scheduler coroutine of its own.
 * ledger / budget are the agent's (ah.agent{ ledger = ah.ledger{...} | "path.db",
 * budget = ah.budget(N) | N }; built in C (lah_ledger_push_new / lah_budget_push_new)
 * when given as a path or a number; by default an in-memory ledger per run and no
 * budget). on_event is a lah_tool_sink (below) that routes a budget_exhausted event to
 * the run's events in C. The call puts key, attempt, run_id and
 * tool_call_id into the body's ctx and leaves a lah_tool_result and the receipt text
 * (below); the agent gives the model the receipt or "error: <message>". */
void lah_tools_open(lua_State *L);
/* ah.tool{...} as a lua_CFunction: the spec table at index 1, the tool object pushed. */
int lah_tool_new(lua_State *L);
/* The same from C: push the tool object built from the declaration table at spec. */
void lah_tool_push(lua_State *L, int spec);

/* How an agent starts a tool call: not obj:call looked up by name, but the private
 * tool_call_into, run as lah_spawn's function with (tool, args, opts). It is tool:call
 * except for its results, which C reads back without string compares: [1] a full
 * userdata holding a lah_tool_result, [2] the receipt as text for the model (outcome ok:
 * a string receipt as is, anything else its canonical JSON; nil when there is none). */
typedef struct lah_tool_result {
    ah_tool_outcome outcome;
    int attempts, duplicate;
    ah_error error; /* why, when the outcome is not ok (kind NONE: no reason given) */
} lah_tool_result;
/* For tool_call_into, opts.on_event may be a full userdata holding this: the call's
 * events (budget_exhausted) go to fn in C, with the thread running the call. The
 * userdata is anchored by the call; it must anchor whatever ud points to. */
typedef struct lah_tool_sink {
    void (*fn)(void *ud, lua_State *L, const ah_event *ev);
    void *ud;
} lah_tool_sink;

/* The ah_client of an "agenthost.client" userdata at idx, or NULL when it is not one. */
ah_client *lah_check_client(lua_State *L, int idx);

/* ---- module parts (each registers its functions into the module table on top) ------ */
void lah_open_client(lua_State *L);
/* scale.c: ah.rate_limit, and Redis connections on the state's loop (raises on a bad
 * URL, naming `where`). lah_check_rate_limit: the pacer of an ah.rate_limit at idx, or
 * NULL. lah_client_rate_limit: the rate_limit field of the client at idx, or NULL. */
void lah_open_scale(lua_State *L);
ah_redis *lah_redis_open(lua_State *L, const char *url, const char *where);
ah_rate_limit *lah_check_rate_limit(lua_State *L, int idx);
ah_rate_limit *lah_client_rate_limit(lua_State *L, int idx);
void lah_open_agent(lua_State *L);
void lah_open_mock(lua_State *L);
void lah_open_errors(lua_State *L); /* ah.transient, ah.permanent, ah.is_retryable */

/* ---- MCP servers (lua/mcp.c, docs/mcp.md) ----------------------------------------- */
/* ah.mcp into the module table on top; its primitives into the private table. */
void lah_open_mcp(lua_State *L);
/* The ah_mcp of an "agenthost.mcp" userdata at idx, or NULL. */
struct ah_mcp;
struct ah_mcp *lah_mcp_test(lua_State *L, int idx);
/* The agent at idx gets the server's mcp_server events (lah_agent_mcp_event). */
void lah_mcp_listen(lua_State *L, int server, int agent);
/* The tools an agent offers: its own (n_own) and those of the servers in the list at
 * `list`, each as "<server>__<tool>" fitted to ^[A-Za-z0-9_-]{1,64}$; map (a table at
 * idx) gets name -> { server, tool name } and anchors what *defs and *servers point to.
 * Raises for two tools offered under one name, naming both. */
size_t lah_mcp_offer(lua_State *L, int list, int map, const ah_tool_def *own,
                     size_t n_own, ah_tool_def **defs, const char ***servers);
/* End the MCP calls a coroutine started (a cancelled run's tool calls): the servers are
 * told at once. */
void lah_mcp_cancel_started_on(lua_State *co);
/* Cancel the server:call()s of this Lua state made outside an agent (Ctrl-C in the host
 * program, with lah_cancel_runs); returns how many. Loop thread. */
int lah_mcp_cancel_bare(lua_State *L, const char *reason);
/* How many such calls of the process are going. Safe from any thread (an atomic). */
int lah_mcp_bare_in_flight(void);
/* agent.c: an mcp_server event to the agent at idx (its on_event or status display). */
void lah_agent_mcp_event(lua_State *L, int agent, const ah_event *ev);

/* The log handler of scripts (host program and plain lua5.4): "agenthost: warning: ..."
 * on stderr. On a terminal the core's per-request retry / give-up lines are left out:
 * the status display shows them from the events (no stacked retry lines). */
void lah_log_to_stderr(void *ud, ah_log_level level, int event, const char *line);
/* Appends the searcher for agenthost.<name> (the shipped scripts, found relative to the
 * binary: scripts_path.c) to package.searchers, once per state: the module does it when
 * loaded, the host program at start (so require "agenthost.status" works before
 * require "agenthost"). */
void lah_add_script_searcher(lua_State *L);

/* The registry key (a light userdata address) the host program sets to true before it
 * loads the module: the module then leaves the log handler to the host. */
extern const char lah_host_key;

#endif
