/* agenthost/mcp.h - MCP tool servers on the loop, with the guarantees of any tool call
 * (docs/mcp.md).
 *
 * An ah_mcp is one server: a child process spoken to over stdio (one JSON-RPC message
 * per line), or a streamable HTTP endpoint reached through the loop's HTTP transport
 * (JSON or SSE answers). It negotiates the protocol era per server (the 2025 revisions
 * with initialize, sessions and resumable streams; the stateless 2026-07-28 revision),
 * lists the server's tools, and supervises a stdio child (restart with the policy's
 * backoff, a crash loop marks it failed, stderr to the log, bounded).
 *
 * An ah_mcp_call is one tool call, driven by the tool-call machine of agenthost/tool.h:
 * idempotency key (sent in params._meta["io.agenthost/idempotency-key"]), ledger,
 * budget, deadline and retries. The transport classifies every failure: never sent
 * (retried by the policy), sent with the outcome unknown (resumed from the last SSE event
 * id where the server offers one; else repeated only when the tool is safe to repeat:
 * trusted server and a readOnlyHint / idempotentHint annotation, or the caller's
 * override; else outcome AH_TOOL_OUTCOME_UNKNOWN). A result with isError true is the
 * tool's answer (recorded, never retried).
 *
 *   ah_mcp_config cfg = {.loop = loop, .name = "fs", .command = argv};
 *   ah_mcp_new(&cfg, &fs, err, sizeof err);        // starts it; events on cfg.on_event
 *   ... step the loop until ah_mcp_state_of(fs) is READY (or FAILED) ...
 *   ah_mcp_call_opts o = {.done = on_done, .done_ud = me};
 *   ah_mcp_call_start(fs, "read_file", "{\"path\":\"a.txt\"}", &o, &call, err, n);
 *   ... on_done(me, call): ah_mcp_call_outcome(call), _result_json(call) ...
 *   ah_mcp_call_free(call); ah_mcp_free(fs);
 *
 * Everything on the loop's thread; nothing blocks (ah_mcp_free excepted: it reaps a
 * child it had to kill). Not thread-safe.
 */
#ifndef AGENTHOST_MCP_H
#define AGENTHOST_MCP_H

#include "agenthost/export.h"

#include "agenthost/budget.h"
#include "agenthost/error.h"
#include "agenthost/event.h"
#include "agenthost/ledger.h"
#include "agenthost/loop.h"
#include "agenthost/policy.h"
#include "agenthost/status.h"
#include "agenthost/tool.h"

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* A server's state (mcp_server.state). X(NAME, "name") */
#define AH_MCP_STATE_MAP(X)                                                               \
    X(STARTING, "starting")                                                               \
    X(READY, "ready")                                                                     \
    X(RESTARTING, "restarting")                                                           \
    X(FAILED, "failed")                                                                   \
    X(CLOSED, "closed")

typedef enum ah_mcp_state {
#define AH__MCP_ST_ENUM(name, s) AH_MCP_##name,
    AH_MCP_STATE_MAP(AH__MCP_ST_ENUM)
#undef AH__MCP_ST_ENUM
        AH_MCP_STATE_COUNT_
} ah_mcp_state;

AH_EXPORT const char *ah_mcp_state_name(ah_mcp_state s); /* "unknown" out of range */

/* The protocol revisions this client speaks, newest first. */
#define AH_MCP_PROTOCOL_2026 "2026-07-28"
#define AH_MCP_PROTOCOL_2025 "2025-11-25"

typedef struct ah_mcp ah_mcp;

typedef struct ah_mcp_config {
    ah_loop *loop;    /* required; borrowed, must outlive the server */
    const char *name; /* required: [A-Za-z0-9_-], 1 to 64 bytes; in events and errors */
    /* stdio: the command (argv, NULL-terminated; argv[0] looked up in PATH) ... */
    const char *const *command;
    /* ... its whole environment ("NAME=value", NULL-terminated; NULL = empty), to which
     * PATH is added from ours unless it is given, and its working directory (NULL: ours) */
    const char *const *env;
    const char *cwd;
    /* or streamable HTTP: the endpoint's URL and extra request headers (never logged) */
    const char *url;
    const ah_header *headers;
    size_t n_headers;
    /* "auto" (NULL): detect the era as the specification says (stdio: a server/discover
     * probe; HTTP: a modern request, falling back on a 4xx that is not a modern error)
     * and remember it for the server's life; or a revision: "2026-07-28", "2025-11-25",
     * "2025-06-18". */
    const char *protocol;
    /* The tools' annotations are trusted: readOnlyHint / idempotentHint make a tool
     * safe to repeat when its outcome is unknown. */
    int trust;
    /* The calls' retry policy (backoff, attempts, deadline_ms, idle_timeout_ms: a call
     * silent this long counts as lost; progress resets it); restarts use its backoff.
     * Copied; NULL = defaults (4 attempts, 500 ms base, 30 s cap). */
    const ah_policy *policy;
    int64_t timeout_ms;      /* one call's attempt: 0 = 60000 */
    int64_t init_timeout_ms; /* the handshake and listing: 0 = 30000 */
    int restart_max;         /* restarts within restart_window_ms before failed: 0 = 5 */
    int64_t restart_window_ms; /* 0 = 60000 */
    /* mcp_server events (and nothing else), borrowed for the call */
    ah_event_fn on_event;
    void *event_ud;
    /* Where the child's stderr lines go: NULL = the log (info), each cut at 4 KiB, at
     * most 1 MiB a minute (the rest counted and reported once). */
    void (*on_stderr)(void *ud, const char *line, size_t len);
    void *stderr_ud;
    const struct ah_transport *transport; /* HTTP only; NULL = libcurl */
} ah_mcp_config;

/* Check the configuration, copy it and start the server (the child is spawned or the
 * endpoint probed at the loop's next step). AH_OK with *out set; else *out = NULL and
 * AH_ERR_INVALID with err naming the field, or AH_ERR_NOMEM. */
AH_EXPORT ah_status ah_mcp_new(const ah_mcp_config *cfg, ah_mcp **out, char *err,
                               size_t errsize);
/* Close (stdio: EOF on stdin, then SIGTERM, then SIGKILL; calls in flight end as
 * cancelled) and free. Every ah_mcp_call of the server must be freed first. NULL: no-op. */
AH_EXPORT void ah_mcp_free(ah_mcp *s);
/* Begin closing without freeing: the server goes CLOSED once its child has exited, or,
 * over HTTP in the 2025 era, once its session's DELETE was answered (any status: 405
 * means the server does not allow it) or after 2 s. */
AH_EXPORT void ah_mcp_close(ah_mcp *s);

AH_EXPORT ah_mcp_state ah_mcp_state_of(const ah_mcp *s);
AH_EXPORT const char *ah_mcp_name(const ah_mcp *s);
/* The revision spoken (NULL until negotiated). */
AH_EXPORT const char *ah_mcp_protocol(const ah_mcp *s);
/* Why the server is not ready (the last failure), or NULL. */
AH_EXPORT const char *ah_mcp_reason(const ah_mcp *s);
/* The server's serverInfo.name / version (NULL when it gave none). */
AH_EXPORT const char *ah_mcp_server_info(const ah_mcp *s);
/* Restarts so far (of a stdio child) and the bound. */
AH_EXPORT int ah_mcp_restarts(const ah_mcp *s);

/* One listed tool; borrowed, valid until the list changes (a re-list after a restart or
 * notifications/tools/list_changed). */
typedef struct ah_mcp_tool {
    const char *name;        /* the server's own name */
    const char *title;       /* or NULL */
    const char *description; /* or NULL */
    const char *schema_json; /* inputSchema: a JSON object */
    const char *annotations_json; /* the annotations object, or NULL */
    int read_only, idempotent, destructive, open_world; /* hints: 1, 0, or -1 absent */
} ah_mcp_tool;

AH_EXPORT size_t ah_mcp_tool_count(const ah_mcp *s);
AH_EXPORT const ah_mcp_tool *ah_mcp_tool_at(const ah_mcp *s, size_t i);
AH_EXPORT const ah_mcp_tool *ah_mcp_tool_find(const ah_mcp *s, const char *name);
/* Bumped each time the list is replaced. */
AH_EXPORT unsigned ah_mcp_tools_version(const ah_mcp *s);

/* ---- one tool call -------------------------------------------------------------- */

typedef struct ah_mcp_call ah_mcp_call;
/* The call ended (always on a later loop step than ah_mcp_call_start). The call may be
 * freed inside. */
typedef void (*ah_mcp_done_fn)(void *ud, ah_mcp_call *c);

typedef struct ah_mcp_call_opts {
    const char *key;   /* idempotency key; NULL = none (one is made up for the server) */
    ah_ledger *ledger; /* borrowed; used only with a key */
    ah_budget *budget; /* a reference is held */
    const ah_policy *policy; /* NULL = the server's; copied */
    int64_t timeout_ms;      /* 0 = the server's */
    int idempotent;          /* -1 (default: trust + hints), 0 never repeat, 1 safe */
    /* for events: the tool call's id (mcp_progress.id) and the name shown (NULL = the
     * tool's), the run */
    const char *id, *display_name, *run_id;
    /* mcp_progress and budget_exhausted (tool_call_end is the caller's), borrowed */
    ah_event_fn on_event;
    void *event_ud;
    ah_tool_retry_on_fn retry_on; /* as ah_tool_policy's */
    void *retry_on_ud;
    ah_mcp_done_fn done; /* required */
    void *done_ud;
} ah_mcp_call_opts;

/* Start a call of tool `name` with arguments args_json (a JSON object; NULL = {}).
 * AH_OK with *out set; AH_ERR_INVALID (err says why: arguments that are not an object,
 * a bad option) or AH_ERR_NOMEM. A tool the server does not list, or a server that
 * failed, is not refused here: the call ends with that error. */
AH_EXPORT ah_status ah_mcp_call_start(ah_mcp *s, const char *name, const char *args_json,
                                      const ah_mcp_call_opts *opts, ah_mcp_call **out,
                                      char *err, size_t errsize);
/* Cancel: the server is told (notifications/cancelled, or the stream closed in the
 * 2026 era) and the call ends with a `cancelled` error (its effect may have happened).
 * No-op once it ended. */
AH_EXPORT void ah_mcp_call_cancel(ah_mcp_call *c, const char *reason);
/* Free (cancelling first when still going). NULL: no-op. */
AH_EXPORT void ah_mcp_call_free(ah_mcp_call *c);

AH_EXPORT int ah_mcp_call_finished(const ah_mcp_call *c);
/* ok (answered; isError true gives ERROR), error, budget_exhausted, in_progress,
 * outcome_unknown */
AH_EXPORT ah_tool_outcome ah_mcp_call_outcome(const ah_mcp_call *c);
AH_EXPORT const ah_error *ah_mcp_call_error(const ah_mcp_call *c); /* kind NONE when ok */
/* The CallToolResult object as JSON (content, structuredContent, isError), when the
 * server answered (also for isError true and a duplicate); else NULL. Borrowed. */
AH_EXPORT const char *ah_mcp_call_result_json(const ah_mcp_call *c);
AH_EXPORT int ah_mcp_call_is_error(const ah_mcp_call *c);
AH_EXPORT int ah_mcp_call_attempts(const ah_mcp_call *c);
AH_EXPORT int ah_mcp_call_duplicate(const ah_mcp_call *c);
AH_EXPORT int64_t ah_mcp_call_seq(const ah_mcp_call *c);
AH_EXPORT const char *ah_mcp_call_key(const ah_mcp_call *c);
AH_EXPORT int ah_mcp_call_budget_first_refusal(const ah_mcp_call *c);
/* The text the model sees: the text content joined (other content described), or for a
 * failure "error: <message>". malloc'd; the caller frees it. NULL when out of memory. */
AH_EXPORT char *ah_mcp_call_text(const ah_mcp_call *c);

/* Fill a tool_call_end event from a finished call (server set); strings borrowed. */
AH_EXPORT void ah_mcp_call_end_event(const ah_mcp_call *c, const char *id, const char *name,
                                     ah_event *out);

#ifdef __cplusplus
}
#endif
#endif
