/* agenthost/event.h - typed operational events (docs/lua.md, "Events").
 *
 * Events flow bottom-up (transport -> call -> worker -> host) to a registered callback.
 * They never enter history or a request. An event and every pointer inside it are
 * borrowed for the duration of the callback only: copy what you keep.
 */
#ifndef AGENTHOST_EVENT_H
#define AGENTHOST_EVENT_H

#include "agenthost/export.h"

#include "agenthost/error.h"

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The event types and their fields: the one list that the C struct (ah_event.u), the
 * field walk (ah_event_visit), the JSON encoder and decoder and the Lua tables are all
 * generated from. Adding an event type is one entry here (plus the code that emits it).
 *
 *   X(NAME, "json type", union member, OWN | SHARED, fields)
 *
 * NAME gives AH_EV_NAME; a SHARED entry uses the union member (and fields) of the OWN
 * entry of that member (reasoning_delta is a text_delta's struct). The fields, in the
 * documented order (and the JSON's), are F(KIND, member, arg) with KIND one of:
 *   INT     int                      a number
 *   I64     int64_t                  a number
 *   BOOL    int                      true/false
 *   STR     const char *             a string; NULL is null
 *   TEXT    const char *, size_t len a string of len bytes (not NUL-terminated); NULL is ""
 *   STATUS  int                      an HTTP status; 0 is null
 *   ERROR   const ah_error *         an error object; NULL or kind NONE is null
 *   NUM     double                   a number that may have a fraction; NaN is null
 *   ENUM    ah_<arg>                 a string: ah_<arg>_name(value)
 *   RUN_ID  const char *             not a field of its own: the event's run_id
 * The JSON key and the Lua field are the member's name. F's arg is empty but for ENUM.
 * The member order here is also the struct's order; an OWN member's struct is also
 * `struct ah__ev_<member>`, for code generated from this list. */
#define AH_EVENT_MAP(X, F)                                                                \
    X(RUN_START, "run_start", run_start, OWN, F(RUN_ID, run_id, ))                        \
    X(LLM_CALL_START, "llm_call_start", llm_call_start, OWN,                              \
      F(INT, llm_call, ) F(INT, attempt, ) F(INT, continuation, ))                        \
    X(TEXT_DELTA, "text_delta", delta, OWN, AH__EVF_DELTA(F))                             \
    X(REASONING_DELTA, "reasoning_delta", delta, SHARED, AH__EVF_DELTA(F))                \
    /* server: the MCP server an agent's tool comes from (docs/mcp.md), else null */       \
    X(TOOL_CALL_START, "tool_call_start", tool_call_start, OWN,                           \
      F(INT, llm_call, ) F(STR, id, ) F(STR, name, ) F(STR, server, ))                    \
    X(TOOL_CALL_END, "tool_call_end", tool_call_end, OWN,                                 \
      F(STR, id, ) F(STR, name, ) F(ENUM, outcome, tool_outcome) F(BOOL, duplicate, )     \
      F(INT, attempts, ) F(STR, server, ))                                                \
    X(LLM_RETRY, "llm_retry", llm_retry, OWN,                                             \
      F(INT, llm_call, ) F(INT, failed_attempt, ) F(INT, max_attempts, )                  \
      F(I64, wait_ms, ) F(ENUM, wait_source, wait_source) F(I64, elapsed_ms, )            \
      F(STATUS, status, ) F(ERROR, error, ))                                              \
    /* limit: "requests_per_minute" or "tokens_per_minute" (the one that set wait) */     \
    X(LLM_PACED, "llm_paced", llm_paced, OWN,                                             \
      F(INT, llm_call, ) F(I64, wait_ms, ) F(STR, limit, ))                               \
    /* a call that is waiting, once a second (docs/status-display.md): wait "retry" or    \
     * "pace" while a wait of more than a second runs (remaining_ms: until the next      \
     * attempt); "response" (no response head yet) or "stream" (no byte since the last) \
     * once nothing has arrived for 5 s (AH_CALL_SILENCE_NOTICE_MS; remaining_ms: until \
     * a time-out cuts it, -1 when none will); waited_ms: how long it has lasted (0:    \
     * a silence said before is over, bytes came) */                                   \
    X(LLM_WAITING, "llm_waiting", llm_waiting, OWN,                                       \
      F(INT, llm_call, ) F(STR, wait, ) F(I64, waited_ms, ) F(I64, remaining_ms, ))       \
    X(LLM_GAVE_UP, "llm_gave_up", llm_gave_up, OWN,                                       \
      F(INT, llm_call, ) F(INT, attempts, ) F(I64, elapsed_ms, ) F(STATUS, status, )      \
      F(ERROR, error, ) F(ENUM, reason, giveup_reason))                                   \
    X(LLM_CONTINUATION, "llm_continuation", llm_continuation, OWN,                        \
      F(INT, llm_call, ) F(INT, continuation, ) F(INT, max_continuations, )               \
      F(INT, committed_blocks, ) F(INT, discarded_blocks, ) F(I64, discarded_bytes, )     \
      F(ENUM, mode, cont_mode) F(STR, reason, ))                                          \
    /* trimmed_bytes: restated text dropped from a continuation's start */                \
    X(LLM_CALL_END, "llm_call_end", llm_call_end, OWN,                                    \
      F(INT, llm_call, ) F(STR, stop_reason, ) F(I64, input_tokens, )                     \
      F(I64, output_tokens, ) F(I64, cache_read_tokens, ) F(I64, cache_write_tokens, )  \
      F(I64, trimmed_bytes, ))                                    \
    /* a tool body failed and is run again after wait_ms (before the wait starts) */      \
    X(TOOL_RETRY, "tool_retry", tool_retry, OWN,                                          \
      F(STR, id, ) F(STR, name, ) F(INT, failed_attempt, ) F(INT, max_attempts, )         \
      F(I64, wait_ms, ) F(ERROR, error, ))                                                \
    X(BUDGET_EXHAUSTED, "budget_exhausted", budget_exhausted, OWN,                        \
      F(STR, budget, ) F(I64, used, ) F(I64, limit, ))                                    \
    /* error: NULL on success */                                                          \
    X(RUN_END, "run_end", run_end, OWN, F(ENUM, outcome, run_outcome) F(ERROR, error, ))  \
    /* an MCP server's life (docs/mcp.md): state starting / ready / restarting / failed / \
     * closed; attempt: the restart (0 for the first start) of max_attempts; protocol: \
     * the revision spoken (null before it is known); reason: why (null when none) */    \
    X(MCP_SERVER, "mcp_server", mcp_server, OWN,                                          \
      F(STR, server, ) F(STR, state, ) F(INT, attempt, ) F(INT, max_attempts, )           \
      F(STR, protocol, ) F(STR, reason, ))                                                \
    /* progress of an MCP tool call: id is the call's (tool_call_start.id), name the     \
     * tool's; progress and total as the server sent them (total null when unknown) */   \
    X(MCP_PROGRESS, "mcp_progress", mcp_progress, OWN,                                    \
      F(STR, server, ) F(STR, id, ) F(STR, name, ) F(NUM, progress, ) F(NUM, total, )     \
      F(STR, message, ))

/* text_delta and reasoning_delta */
#define AH__EVF_DELTA(F) F(INT, llm_call, ) F(INT, block, ) F(TEXT, text, )

#define AH__EV_NO_FIELD(kind, member, arg)

typedef enum ah_event_type {
#define AH__EV_ENUM(name, s, member, own, ...) AH_EV_##name,
    AH_EVENT_MAP(AH__EV_ENUM, AH__EV_NO_FIELD)
#undef AH__EV_ENUM
        AH_EV_COUNT_
} ah_event_type;

/* Where a retry wait came from. */
#define AH_WAIT_SOURCE_MAP(X) X(BACKOFF, "backoff") X(SERVER, "server")
typedef enum ah_wait_source {
#define AH__WS_ENUM(name, s) AH_WAIT_##name,
    AH_WAIT_SOURCE_MAP(AH__WS_ENUM)
#undef AH__WS_ENUM
        AH_WAIT_COUNT_
} ah_wait_source;

/* Why a call gave up (llm_gave_up.reason). */
#define AH_GIVEUP_REASON_MAP(X)                                                           \
    X(ATTEMPTS, "attempts")                                                               \
    X(DEADLINE, "deadline")                                                               \
    X(RETRY_AFTER_TOO_LONG, "retry_after_too_long")                                       \
    X(NOT_RETRYABLE, "not_retryable")                                                     \
    X(RETRY_BUDGET, "retry_budget")                                                       \
    X(SPEND_LIMIT, "spend_limit")
typedef enum ah_giveup_reason {
#define AH__GR_ENUM(name, s) AH_GIVEUP_##name,
    AH_GIVEUP_REASON_MAP(AH__GR_ENUM)
#undef AH__GR_ENUM
        AH_GIVEUP_COUNT_
} ah_giveup_reason;

/* run_end.outcome */
#define AH_RUN_OUTCOME_MAP(X)                                                             \
    X(COMPLETED, "completed")                                                             \
    X(FAILED, "failed")                                                                   \
    X(CANCELLED, "cancelled")                                                             \
    X(BUDGET_EXHAUSTED, "budget_exhausted")                                               \
    X(MAX_STEPS, "max_steps")                                                             \
    X(BAD_OUTPUT, "bad_output")                                                           \
    X(REFUSED, "refused")                                                                 \
    X(CONTEXT_EXCEEDED, "context_exceeded")
typedef enum ah_run_outcome {
#define AH__RO_ENUM(name, s) AH_OUTCOME_##name,
    AH_RUN_OUTCOME_MAP(AH__RO_ENUM)
#undef AH__RO_ENUM
        AH_OUTCOME_COUNT_
} ah_run_outcome;

/* llm_continuation.mode: the rung a continuation takes (docs/worker.md, "The continuation
 * ladder"). RESUME re-attaches to the same provider response (nothing regenerated);
 * PREFILL sends the partial assistant message last for the model to continue; PROMPT adds
 * a visible user message asking the model to continue. REGENERATE is no rung: nothing new
 * was kept (the cut came inside the first unfinished block), so the same request is sent
 * again and the unfinished block is generated, paid for and streamed again. */
#define AH_CONT_MODE_MAP(X)                                                               \
    X(RESUME, "resume") X(PREFILL, "prefill") X(PROMPT, "prompt") X(REGENERATE, "regenerate")
typedef enum ah_cont_mode {
#define AH__CM_ENUM(name, s) AH_CONT_##name,
    AH_CONT_MODE_MAP(AH__CM_ENUM)
#undef AH__CM_ENUM
        AH_CONT_COUNT_
} ah_cont_mode;

/* tool_call_end.outcome */
#define AH_TOOL_OUTCOME_MAP(X)                                                            \
    X(OK, "ok")                                                                           \
    X(ERROR, "error")                                                                     \
    X(BUDGET_EXHAUSTED, "budget_exhausted")                                               \
    X(IN_PROGRESS, "in_progress")                                                         \
    X(OUTCOME_UNKNOWN, "outcome_unknown")
typedef enum ah_tool_outcome {
#define AH__TO_ENUM(name, s) AH_TOOL_##name,
    AH_TOOL_OUTCOME_MAP(AH__TO_ENUM)
#undef AH__TO_ENUM
        AH_TOOL_COUNT_
} ah_tool_outcome;

typedef struct ah_event {
    ah_event_type type;
    /* On every event: the run it belongs to (NULL for a bare LLM or tool call made
     * outside a run) and the loop clock's wall time, ms since the Unix epoch, when it
     * was emitted (the emitter stamps both; 0 = not stamped). The JSON Lines of many
     * concurrent runs are told apart and ordered by these two. */
    const char *run_id;
    int64_t ts_ms;
    union {
#define AH__EV_DECL_INT(m, arg) int m;
#define AH__EV_DECL_I64(m, arg) int64_t m;
#define AH__EV_DECL_BOOL(m, arg) int m;
#define AH__EV_DECL_STR(m, arg) const char *m;
#define AH__EV_DECL_TEXT(m, arg) const char *m; size_t len;
#define AH__EV_DECL_STATUS(m, arg) int m;
#define AH__EV_DECL_ERROR(m, arg) const ah_error *m;
#define AH__EV_DECL_NUM(m, arg) double m;
#define AH__EV_DECL_ENUM(m, arg) ah_##arg m;
#define AH__EV_DECL_RUN_ID(m, arg) const char *m;
#define AH__EV_DECL(kind, m, arg) AH__EV_DECL_##kind(m, arg)
#define AH__EV_MEMBER_OWN(member, ...) struct ah__ev_##member { __VA_ARGS__ } member;
#define AH__EV_MEMBER_SHARED(member, ...)
#define AH__EV_MEMBER(name, s, member, own, ...) AH__EV_MEMBER_##own(member, __VA_ARGS__)
        AH_EVENT_MAP(AH__EV_MEMBER, AH__EV_DECL)
#undef AH__EV_MEMBER
#undef AH__EV_MEMBER_OWN
#undef AH__EV_MEMBER_SHARED
    } u;
} ah_event;

/* The event callback. `ev` is borrowed for this call only. Must not re-enter the object
 * that emitted it except to request cancellation. */
typedef void (*ah_event_fn)(void *ud, const ah_event *ev);

AH_EXPORT const char *ah_event_type_name(ah_event_type t);
AH_EXPORT const char *ah_wait_source_name(ah_wait_source s);
AH_EXPORT const char *ah_giveup_reason_name(ah_giveup_reason r);
AH_EXPORT const char *ah_run_outcome_name(ah_run_outcome o);
AH_EXPORT const char *ah_tool_outcome_name(ah_tool_outcome o);
AH_EXPORT const char *ah_cont_mode_name(ah_cont_mode m);

/* Walk the fields of an event in the documented order and names (docs/lua.md, "Events"):
 * "type", "run_id", "ts_ms" first, then each field of that type (run_start has no
 * other). This is the one place that knows which fields an event
 * type has, so every encoding (JSON, Lua tables, an embedder's own) names them alike.
 * A status of 0 is visited as null; a NULL string as null; a NULL or kind-NONE error as
 * null (error(ud, key, NULL)). Text deltas are visited with their length (not
 * NUL-terminated). Every callback is required. */
typedef struct ah_event_fields {
    void (*str)(void *ud, const char *key, const char *s, size_t len); /* s NULL: null */
    void (*num)(void *ud, const char *key, int64_t v);
    void (*boolean)(void *ud, const char *key, int v);
    void (*null)(void *ud, const char *key);
    void (*error)(void *ud, const char *key, const ah_error *e); /* e NULL: null */
    /* A NUM field that has a fraction (a whole one goes to num). Optional: NULL sends
     * it to num, truncated. */
    void (*fraction)(void *ud, const char *key, double v);
} ah_event_fields;
AH_EXPORT void ah_event_visit(const ah_event *ev, const ah_event_fields *f, void *ud);

/* Encode one event as a single-line JSON object (the visit's names). Returns a malloc'd
 * string the caller frees with free(), or NULL on allocation failure / bad type. */
AH_EXPORT char *ah_event_to_json(const ah_event *ev);

/* A decoded event that owns its strings. */
typedef struct ah_event_box ah_event_box;
/* Decode one JSON object; NULL with a message naming the bad field in err on failure. */
AH_EXPORT ah_event_box *ah_event_from_json(const char *json, size_t len, char *err, size_t errsize);
AH_EXPORT const ah_event *ah_event_box_get(const ah_event_box *b); /* borrowed, lives with b */
AH_EXPORT void ah_event_box_free(ah_event_box *b);

#ifdef __cplusplus
}
#endif
#endif
