/* agenthost/worker.h - the agent turn loop (docs/worker.md, docs/lua.md).
 *
 *   BUILD_REQUEST ─▶ CALLING ─DONE─▶ COMMIT_RESPONSE ─▶ TOOLS ─▶ BUILD_REQUEST … ─▶ FINISHED
 *                       └─INTERRUPTED─▶ PARTIAL_COMMIT (continuation n+1) ─▶ BUILD_REQUEST
 *
 * A worker owns one run's history (an ah_conversation). Each request is encoded from that
 * history, so a continuation is nothing more than "history gained a partial assistant
 * message; encode the next request". The normal path is one path: a response that
 * completes is committed whole and its tool calls run; only an interrupted response takes
 * the continuation branch, which commits the closed text/reasoning blocks and nothing
 * else (never a tool_use; no tool of an interrupted response runs).
 *
 * Two drivers: ah_worker_run() blocks (it steps the loop itself); or ah_worker_start()
 * and step the loop from your own code until ah_worker_finished(). Tools may answer at
 * once or later (ah_worker_tool_done), so a host can run tool bodies in coroutines.
 *
 * Threads: everything on the loop's thread, except ah_worker_cancel() (any thread).
 */
#ifndef AGENTHOST_WORKER_H
#define AGENTHOST_WORKER_H

#include "agenthost/export.h"

#include "agenthost/capabilities.h"
#include "agenthost/conversation.h"
#include "agenthost/error.h"
#include "agenthost/event.h"
#include "agenthost/loop.h"
#include "agenthost/policy.h"
#include "agenthost/status.h"
#include "agenthost/wire.h"

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The HTTP transport a worker's calls use (NULL: libcurl); its ops are in
 * agenthost/transport.h, which only a program that plugs in its own needs. */
typedef struct ah_transport ah_transport;

/* ---- client: where and how to reach a provider ------------------------------------------- */

typedef struct ah_client ah_client;

/* Prompt caching of a client (docs/worker.md, "Prompt caching"). */
typedef enum ah_cache_mode {
    /* anthropic: cache_control breakpoints at the end of tools + system and on the last
     * message before the new turn; openai, responses: prompt_cache_key */
    AH_CACHE_AUTO = 0,
    AH_CACHE_OFF
} ah_cache_mode;

typedef struct ah_client_config {
    ah_wire wire;         /* the provider's wire format */
    /* e.g. "https://api.anthropic.com"; NULL = the provider's public API
     * (ah_wire_base_url); "" is an error. The format's path is appended unless the URL
     * already ends with it (with or without its "/v1"). */
    const char *base_url;
    /* Never logged. NULL = the provider's environment variable (ah_wire_key_env:
     * ANTHROPIC_API_KEY, OPENAI_API_KEY), as the official SDKs read it, unless `headers`
     * authenticate; "" = no key. A client of a provider's public host (api.anthropic.com,
     * api.openai.com) with neither a key nor an authentication header is refused here,
     * naming the variable, before any request. */
    const char *api_key;
    const char *model;    /* required */
    int64_t max_tokens;   /* 0 = 1024 */
    const char *extra_json; /* merged into every request body (ah_request_opts) or NULL */
    /* How a cut stream is continued (0 = AH_CONTINUATION_AUTO: the rung comes from the
     * model capability table, agenthost/capabilities.h; a prefill the provider refuses
     * switches this client to the prompt rung for the rest of its life). */
    ah_continuation continuation;
    /* responses only: background mode ("background": true, "store": true). The provider
     * runs and keeps the response whatever happens to the connection, so a stream that
     * breaks after its head is re-attached at the last sequence number received: the
     * same response goes on, nothing is regenerated. A cancel also asks the provider to
     * cancel the response. An error with any other provider. */
    int background;
    /* TLS trust for a private CA: a PEM bundle and/or a directory of CA certificates
     * (OpenSSL's hashed layout), instead of the system's store; each must be readable.
     * When both are NULL the environment is read as curl and OpenSSL do: CURL_CA_BUNDLE,
     * else SSL_CERT_FILE and SSL_CERT_DIR. A certificate that does not verify fails the
     * request at once (not retried). */
    const char *ca_file;
    const char *ca_path;
    /* Sent with every request, after agenthost's own (anthropic-beta, OpenAI-Organization,
     * Azure's api-key): names are HTTP tokens, values hold no CR, LF or other control
     * byte but tab, a name is given once. The ones agenthost writes (Content-Type,
     * Accept, Content-Length, Host, Connection, Expect, Transfer-Encoding) are refused;
     * one of the provider's own fixed headers (anthropic-version) is replaced. An
     * authentication header (Authorization, x-api-key, api-key) stands instead of
     * api_key, never beside it: it is then the request's authentication (kept out of
     * every message and log like a key) and no key is read from the environment. */
    const ah_header *headers;
    size_t n_headers;
    /* Added to every request URL's query, percent-encoded, after any query base_url
     * carries (Azure's api-version). Names are not empty. */
    const ah_header *query;
    size_t n_query;
    ah_cache_mode cache;
    const char *cache_ttl; /* anthropic breakpoints: NULL or "5m" (default), or "1h" */
    /* openai, responses: the prompt_cache_key of every request (NULL: the conversation's
     * id, i.e. the id of the first run it continues) */
    const char *prompt_cache_key;
} ah_client_config;

/* Copies everything. AH_OK with *out set; else *out = NULL and AH_ERR_INVALID with a
 * message naming the field in err, or AH_ERR_NOMEM. err may be NULL (the constructor
 * convention of every fallible ah_*_new: docs/errors.md). */
AH_EXPORT ah_status ah_client_new(const ah_client_config *cfg, ah_client **out, char *err,
                                  size_t errsize);
AH_EXPORT void ah_client_free(ah_client *c);
AH_EXPORT ah_wire ah_client_wire(const ah_client *c);
AH_EXPORT const char *ah_client_url(const ah_client *c); /* the full request URL */
/* The request URL as it may be shown or logged: a password in its userinfo, a key in its
 * query and the API key masked (ah_redact). Owned by the client. */
AH_EXPORT const char *ah_client_display_url(const ah_client *c);
AH_EXPORT ah_continuation ah_client_continuation(const ah_client *c); /* the setting */
/* The rung the client's next continuation takes: AH_CONT_PREFILL or AH_CONT_PROMPT (from
 * the setting, the table, and whether the provider refused a prefill). Thread-safe. */
AH_EXPORT ah_cont_mode ah_client_rung(const ah_client *c);

/* ---- tools ---------------------------------------------------------------------------------- */

typedef struct ah_worker ah_worker;

/* One tool call of a completed response, borrowed for the exec call only. */
typedef struct ah_tool_request {
    size_t index;            /* position among this response's tool calls */
    const char *id;          /* the provider's tool call id */
    const char *name;
    const char *arguments;   /* JSON object text */
    const char *key;         /* default idempotency key: "<run_id>:<id>" */
    const char *run_id;
    int llm_call;
} ah_tool_request;

/* A tool's answer. The worker copies content as soon as the exec callback returns (or
 * inside ah_worker_tool_done), so it must still be valid then: static or heap memory
 * owned by the tool, never a buffer on the exec callback's own stack. */
typedef struct ah_tool_response {
    ah_tool_outcome outcome; /* ok, error (shown to the model as an error), budget_exhausted */
    const char *content;     /* the tool result text for the model (NULL = "") */
    int duplicate;           /* the ledger returned an earlier receipt */
    int attempts;            /* body executions (0 for a duplicate or budget) */
} ah_tool_response;

/* Run one tool call. Return 0 after filling *res (done now), or 1 when the answer will
 * come later through ah_worker_tool_done(w, req->index, ...). Unknown tool names and
 * invalid arguments never reach it: the worker answers those itself as tool errors. */
typedef int (*ah_tool_exec_fn)(void *ud, ah_worker *w, const ah_tool_request *req,
                               ah_tool_response *res);

/* ---- the worker ----------------------------------------------------------------------------- */

typedef struct ah_worker_config {
    ah_loop *loop;                 /* required; borrowed */
    const ah_client *client;       /* required; borrowed, must outlive the worker */
    const char *system;            /* system prompt or NULL (copied) */
    int max_steps;                 /* LLM calls per run (continuations excluded); 0 = 20 */
    const ah_policy *policy;       /* copied; NULL = defaults */
    ah_retry_budget *retry_budget; /* shared across workers; optional, borrowed */
    /* Pacing before every attempt; token usage reported by a response is charged to it.
     * Optional, borrowed (agenthost/redis.h). */
    struct ah_rate_limit *rate_limit;
    const ah_tool_def *tools;      /* offered to the model; copied */
    size_t n_tools;
    ah_tool_exec_fn tool_exec; /* required when n_tools > 0 */
    void *tool_ud;
    /* The tool calls of one completed response run concurrently: at most this many are
     * started and not yet answered at a time (0 = 8; 1 = one after the other). They
     * start in call order; a call of a tool marked exclusive waits until nothing runs,
     * and nothing starts beside it. Results enter history in call order, whatever order
     * they are answered in. */
    int max_tool_concurrency;
    const int *tool_exclusive; /* n_tools flags (nonzero: exclusive), or NULL; copied */
    /* n_tools names of the MCP server each tool comes from (NULL entries: not an MCP
     * tool), or NULL: tool_call_start / tool_call_end carry it as `server`. Copied. */
    const char *const *tool_servers;
    ah_event_fn on_event; /* every event of the run; optional */
    void *event_ud;
    /* The prompt rung's user message, added to history after the partial assistant
     * message when a continuation takes that rung (the client's continuation setting
     * decides the rung). NULL = AH_CONTINUE_PROMPT_DEFAULT. Copied. */
    const char *continue_prompt;
    const ah_transport *transport; /* NULL = libcurl */
    const char *run_id;            /* NULL = generated */
    /* Structured output (docs/worker.md), optional. When a response completes without a tool
     * call, check_output sees the answer's text (the assistant text since the last user
     * or tool-result message) and refused = 1 when the model refused. Return 0 to accept
     * it (outcome completed), nonzero to reject it after writing why (NUL-terminated, at
     * most whysize bytes; "" gets a generic text). A rejection adds why to history as a
     * visible user message and asks again, at most max_output_retries times (each retry
     * is a step, bounded by max_steps too); past that the run ends with outcome
     * bad_output and an `output` error whose message is why. Runs on the loop thread;
     * it must not call into the worker (ah_worker_cancel excepted). */
    int (*check_output)(void *ud, const char *text, int refused, char *why, size_t whysize);
    void *check_ud;
    int max_output_retries; /* >= 0 */
    /* An existing conversation to continue (a previous run's ah_worker_history, or one
     * built or loaded by the caller), or NULL to start empty. Copied: the run works on
     * its copy and its history is the whole conversation. `system` above, when set,
     * replaces the conversation's system prompt. */
    const ah_conversation *history;
    /* The request does not fit the model's context window (a context-length 400, or the
     * stop reason model_context_window_exceeded): given the history (the new input
     * included), return a shorter one (a new conversation, which the worker takes) to try
     * once more, or NULL to end with outcome context_exceeded. Optional; at most once a
     * run. Runs on the loop thread. */
    ah_conversation *(*on_context_exceeded)(void *ud, const ah_conversation *history);
    void *context_ud;
} ah_worker_config;

typedef struct ah_worker_stats {
    int llm_calls;     /* model turns: requests from history that are no continuation
                          (the same number as steps); continuations count below only */
    int attempts;      /* HTTP attempts, all requests together (each llm_call_start) */
    int retries;       /* llm_retry events: attempts that failed before their stream and
                          were tried again, and broken streams sent again as retries */
    int continuations; /* continuations of cut streams, every mode (llm_continuation) */
    int tool_calls;    /* tool calls answered (including duplicates and budget refusals) */
    int tool_attempts; /* tool body executions */
    int steps;         /* LLM calls that were not continuations */
    int output_retries; /* answers rejected by check_output and asked for again */
    int64_t input_tokens, output_tokens; /* every llm_call_end, cut requests too */
    /* prompt-cache usage, part of input_tokens (every llm_call_end; 0 where the format
     * reports none) */
    int64_t cache_read_tokens, cache_write_tokens;
    int64_t trimmed_bytes; /* restated text dropped from continuations (llm_call_end) */
} ah_worker_stats;

/* AH_OK with *out set; else *out = NULL and AH_ERR_INVALID (a message naming the problem
 * in err) or AH_ERR_NOMEM. err may be NULL. */
AH_EXPORT ah_status ah_worker_new(const ah_worker_config *cfg, ah_worker **out, char *err,
                                  size_t errsize);
/* Cancels anything in flight (no events) and frees. NULL is a no-op. Not from inside the
 * worker's own callbacks. */
AH_EXPORT void ah_worker_free(ah_worker *w);

/* Add the user's input to history and send the first request (at the loop's next step).
 * AH_ERR_STATE if the run already started. */
AH_EXPORT ah_status ah_worker_start(ah_worker *w, const char *input);
/* The same with an input of n blocks (text, image, document: agenthost/conversation.h),
 * as one user message. AH_ERR_INVALID with err naming the block and field. */
AH_EXPORT ah_status ah_worker_start_blocks(ah_worker *w, const ah_msg_block *blocks, size_t n,
                                           char *err, size_t errsize);
/* Blocking driver: start (if input != NULL) and step the loop until the run ends.
 * Returns the outcome. */
AH_EXPORT ah_run_outcome ah_worker_run(ah_worker *w, const char *input);

/* The answer to a tool call whose exec returned 1. AH_ERR_STATE if no such call is
 * pending. May be called from inside the exec callback or later, on the loop thread. */
AH_EXPORT ah_status ah_worker_tool_done(ah_worker *w, size_t index, const ah_tool_response *res);

/* Thread-safe, idempotent. Ends the run with outcome cancelled at the loop's next step,
 * wherever it is: an in-flight request or stream is torn down, a backoff wait ends, a
 * continuation is not sent, a round of tools that are still running ends (answers that
 * come later get AH_ERR_STATE; stop the bodies you run). No tool call starts once it is
 * asked for, even before that step (one cancelled from its tool_call_start event does
 * not run). One run_end, no further request. The run_end error is kind `cancelled`,
 * message "cancelled".
 *
 * A run that ends inside a tool round (cancelled, or failed) leaves every call of the
 * round answered in history, so the conversation can go on (providers refuse a tool call
 * without a result): a call that answered keeps its result; one still running gets a
 * tool error (is_error) AH_TOOL_CANCELLED_RUNNING, one not started yet
 * AH_TOOL_CANCELLED_WAITING (AH_TOOL_STOPPED_* when the run failed). */
AH_EXPORT void ah_worker_cancel(ah_worker *w);
#define AH_TOOL_CANCELLED_RUNNING                                                        \
    "error: the tool call was cancelled before it finished; its effect may or may not "  \
    "have happened"
#define AH_TOOL_CANCELLED_WAITING                                                        \
    "error: the tool call was cancelled before it started; it did not run"
#define AH_TOOL_STOPPED_RUNNING                                                          \
    "error: the run failed before the tool call finished; its effect may or may not "    \
    "have happened"
#define AH_TOOL_STOPPED_WAITING                                                          \
    "error: the run failed before the tool call started; it did not run"
/* The same, with the run_end error message "cancelled: <reason>" (reason NULL or "":
 * "cancelled"). The reason is recorded only by the first cancel; call it on the loop
 * thread (ah_worker_cancel from any thread). */
AH_EXPORT void ah_worker_cancel_with(ah_worker *w, const char *reason);

AH_EXPORT int ah_worker_finished(const ah_worker *w);
AH_EXPORT ah_run_outcome ah_worker_outcome(const ah_worker *w); /* valid once finished */
AH_EXPORT const ah_error *ah_worker_error(const ah_worker *w);  /* kind NONE on success */
/* The normalised stop reason of the run's last response (ah_timeline_stop: "end_turn",
 * "tool_use", "max_tokens", "refusal", "pause_turn", ...), or NULL when no response
 * completed. Borrowed, static. */
AH_EXPORT const char *ah_worker_stop_reason(const ah_worker *w);
/* The final answer: the text of the assistant messages after the last tool round
 * (a partial message and its continuation together). Borrowed, valid until the worker
 * is freed or its history changes (an answer of one text block is that block of the
 * history, not a copy); "" before the end. */
AH_EXPORT const char *ah_worker_text(const ah_worker *w);
AH_EXPORT const ah_conversation *ah_worker_history(const ah_worker *w); /* borrowed */
AH_EXPORT const char *ah_worker_run_id(const ah_worker *w);
AH_EXPORT void ah_worker_get_stats(const ah_worker *w, ah_worker_stats *out);

#ifdef __cplusplus
}
#endif
#endif
