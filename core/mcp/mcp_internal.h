/* mcp_internal.h - the parts of the MCP client (core/mcp/, docs/mcp.md): the JSON-RPC
 * client (requests, pending table, era), its two transports (stdio, streamable HTTP),
 * and the tool-call driver. Internal: never installed.
 *
 *   mcp_call.c ── ah_tool_call (tool_call.c: retries, ledger, budget) ── body: a request
 *   mcp_client.c: the server (state, era, handshake, tools), requests and dispatch
 *     ├── mcp_stdio.c: a child on the loop (socket stdin, pipes, pidfd), restarts
 *     └── mcp_http.c: one POST per message through the transport; SSE via sse.c
 *   mcp_jsonrpc.c: framing without I/O (lines, message kinds, _meta), unit-tested
 */
#ifndef AH_MCP_INTERNAL_H
#define AH_MCP_INTERNAL_H

#include "internal.h"

#include "agenthost/mcp.h"
#include "agenthost/sse.h"
#include "agenthost/transport.h"

#include <cjson/cJSON.h>

enum {
    MCP_MAX_MESSAGE = 16 << 20, /* one JSON-RPC message (a stdout line, an HTTP body) */
    MCP_STDERR_LINE = 4096,     /* a stderr line is cut here */
    MCP_STDERR_PER_MIN = 1 << 20
};

/* ---- framing (mcp_jsonrpc.c) ----------------------------------------------------- */

/* A line splitter with a hard cap: feed bytes, get complete lines (without the '\n' and
 * a trailing '\r'); a line past max is dropped whole (on_long is told once per line). */
typedef struct ah__mcp_lines {
    char *buf;
    size_t len, cap, max;
    int dropping; /* inside a line that went past max */
} ah__mcp_lines;
void ah__mcp_lines_init(ah__mcp_lines *l, size_t max);
void ah__mcp_lines_free(ah__mcp_lines *l);
/* Returns 0, or -1 when out of memory. on_line(ud, line, len) for each complete line;
 * on_long(ud) for each line dropped. */
int ah__mcp_lines_feed(ah__mcp_lines *l, const char *buf, size_t n,
                       void (*on_line)(void *ud, const char *line, size_t len),
                       void (*on_long)(void *ud), void *ud);

typedef enum mcp_kind {
    MCP_MSG_INVALID,
    MCP_MSG_RESPONSE,     /* id and result */
    MCP_MSG_ERROR,        /* id and error (or an error without id) */
    MCP_MSG_NOTIFICATION, /* method, no id */
    MCP_MSG_REQUEST       /* method and id: from the server */
} mcp_kind;
/* What a parsed message is; *id gets a numeric id (-1 when it has none, or a string
 * id that is not ours). */
mcp_kind ah__mcp_classify(const cJSON *msg, int64_t *id);
/* The request as text: {"jsonrpc":"2.0","id":id,"method":...,"params":...}; id < 0: a
 * notification. params is borrowed (may be NULL). modern: the 2026 era's _meta keys
 * (protocol version, client info and capabilities) are added to params._meta. */
char *ah__mcp_encode(int64_t id, const char *method, const cJSON *params, int modern);
/* A recognised modern error (2026-07-28: the codes it defines, -32020..-32022). */
int ah__mcp_modern_error(int code);
int ah__mcp_is_legacy_version(const char *v);

/* ---- tool parameters mirrored into headers (mcp_params.c) ------------------------- */

/* The x-mcp-header declarations of a tool's inputSchema: 0 with *out a list
 * [{"h": name, "p": [key, ...]}] (NULL: none), or -1 with why (the tool is invalid for
 * streamable HTTP in the 2026 era and must be left out). */
int ah__mcp_param_decls(const cJSON *schema, cJSON **out, char *why, size_t whysize);
/* The headers for one call: names[i] "Mcp-Param-<h>", values[i] encoded (both
 * malloc'd, the caller frees); a declaration whose argument is absent, null or not a
 * primitive gives none. Returns how many, at most max. */
size_t ah__mcp_param_headers(const cJSON *decls, const cJSON *args, char **names,
                             char **values, size_t max);
/* A header value as is when it is plain visible ASCII without leading or trailing
 * space, else (or when it looks like the sentinel) =?base64?...?= (mcp_http.c). */
char *ah__mcp_header_value(const char *v);

/* ---- requests (mcp_client.c) ------------------------------------------------------ */

typedef enum rq_state { RQ_QUEUED, RQ_SENDING, RQ_SENT, RQ_ACCEPTED, RQ_DONE } rq_state;

typedef struct mcp_req mcp_req;
/* The request ended: result (an answer), rpc_error (a JSON-RPC error answer) or fail
 * (the transport's classification: transient = never sent, outcome_unknown, stream =
 * cut and resumable, mcp_session, permanent, cancelled). Exactly one is non-NULL. The
 * request is freed after it returns unless it is kept (ah__mcp_req_keep). */
typedef void (*mcp_answer_fn)(void *ud, mcp_req *r, const cJSON *result,
                              const cJSON *rpc_error, const ah_error *fail);
typedef void (*mcp_progress_fn)(void *ud, mcp_req *r, double progress, double total,
                                const char *message);

struct mcp_req {
    ah_mcp *s;
    int64_t id;
    char *method;
    char *name;     /* params.name (Mcp-Name) or NULL */
    cJSON *params;  /* owned */
    rq_state state;
    int internal;   /* the server's own (handshake, listing): no session re-send */
    int session_retries; /* 404s in a row */
    int header_retried;  /* sent again after a -32020 HeaderMismatch (once) */
    int keep;       /* the owner frees it (a resumable call keeps it across attempts) */
    int64_t progress_token; /* params._meta.progressToken, or 0 */
    /* HTTP */
    void *http;      /* the transfer in flight */
    char *last_event_id;
    int64_t retry_ms; /* the stream's retry field, -1 none */
    /* stdio: the byte offset on stdin just past this request's line */
    uint64_t wend;
    mcp_answer_fn on_answer;
    mcp_progress_fn on_progress;
    void *ud;
    mcp_req *prev, *next; /* pending list */
};

/* ---- the server ------------------------------------------------------------------- */

typedef struct mcp_stdio mcp_stdio;
typedef struct mcp_http mcp_http;

typedef struct mcp_tool_rec {
    ah_mcp_tool t;
    char *name, *title, *description, *schema, *annotations;
    cJSON *param_headers; /* x-mcp-header declarations (2026 era over HTTP), or NULL */
} mcp_tool_rec;

struct ah_mcp {
    ah_loop *loop;
    char *name;
    ah_mcp_state state;
    int modern;       /* the 2026 era */
    char protocol[24];
    char *want;       /* the configured protocol ("auto" = NULL) */
    int trust;
    ah_policy policy;
    int64_t timeout_ms, init_timeout_ms;
    int restart_max;
    int64_t restart_window_ms;
    ah_event_fn on_event;
    void *event_ud;
    void (*on_stderr)(void *ud, const char *line, size_t len);
    void *stderr_ud;
    int64_t next_id;
    mcp_req *pending; /* requests not yet answered, sent or queued */
    char *reason;
    char *server_info;
    /* tools */
    mcp_tool_rec *tools;
    size_t n_tools;
    unsigned tools_version;
    cJSON *listing;  /* tools gathered over pages */
    int ever_ready;
    int phase;       /* handshake step (mcp_client.c) */
    int64_t restarts_at[16]; /* the restart times within the window (a ring) */
    int restarts;    /* since the last ready */
    int total_restarts;
    int closing;
    ah_timer *timer; /* handshake deadline, restart backoff */
    mcp_stdio *stdio;
    mcp_http *http;
    int calls;       /* ah_mcp_call objects alive */
};

/* A request: queued until the server is ready (internal ones go at once), then sent.
 * The request owns params. NULL when out of memory. */
mcp_req *ah__mcp_request(ah_mcp *s, const char *method, cJSON *params, int internal,
                         mcp_answer_fn fn, mcp_progress_fn progress, void *ud);
/* Send a queued request now (the server is ready or it is internal). */
void ah__mcp_req_send(mcp_req *r);
/* End a request with a result / error / failure (see mcp_answer_fn); the request leaves
 * the pending list first. */
void ah__mcp_req_end(mcp_req *r, const cJSON *result, const cJSON *rpc_error,
                     const ah_error *fail);
/* Drop a request without an answer (its owner gave up): nothing more is delivered. */
void ah__mcp_req_drop(mcp_req *r);
void ah__mcp_req_free(mcp_req *r);
mcp_req *ah__mcp_req_find(ah_mcp *s, int64_t id);
/* Pick an ended (kept) request's answer up again: HTTP GET with its Last-Event-ID; the
 * answer goes to fn as before. */
void ah__mcp_req_resume(mcp_req *r, mcp_answer_fn fn);

/* A message from the server (one stdout line, one JSON body, one SSE event's data). */
void ah__mcp_receive(ah_mcp *s, const char *json, size_t len);
/* Tell the server (notifications/cancelled) that r is cancelled. */
void ah__mcp_send_cancelled(ah_mcp *s, mcp_req *r, const char *reason);
void ah__mcp_set_state(ah_mcp *s, ah_mcp_state st, const char *reason);
void ah__mcp_log(ah_mcp *s, ah_log_level lvl, const char *fmt, ...) AH__PRINTF(3, 4);
/* The transport is up (the child spawned): begin the handshake. */
void ah__mcp_connected(ah_mcp *s);
/* The stdio child is gone: every request in flight ends; restart or fail. */
void ah__mcp_child_gone(ah_mcp *s, const char *why);
/* HTTP: the session expired (404) under r: one new session, then r again. */
void ah__mcp_session_lost(ah_mcp *s, mcp_req *r);
/* HTTP, 2026 era: the server refused r (tools/call) with -32020 HeaderMismatch before
 * running it: the tools are listed again (their x-mcp-header declarations may have
 * changed), then r again, once. 0 when that began; -1 (already retried, or not such a
 * request): r's answer is the error. */
int ah__mcp_header_mismatch(ah_mcp *s, mcp_req *r);

/* ---- stdio (mcp_stdio.c) ---------------------------------------------------------- */
int ah__mcp_stdio_new(ah_mcp *s, const ah_mcp_config *cfg, char *err, size_t errsize);
int ah__mcp_stdio_spawn(ah_mcp *s, char *err, size_t errsize);
/* Write one line (a message); r (may be NULL) becomes SENT once it left. -1: the child
 * is not there (never sent). */
int ah__mcp_stdio_write(ah_mcp *s, const char *msg, mcp_req *r);
void ah__mcp_stdio_close(ah_mcp *s);   /* EOF, SIGTERM, SIGKILL */
void ah__mcp_stdio_free(ah_mcp *s);    /* kill and reap */
int ah__mcp_stdio_alive(const ah_mcp *s);

/* ---- HTTP (mcp_http.c) ------------------------------------------------------------ */
int ah__mcp_http_new(ah_mcp *s, const ah_mcp_config *cfg, char *err, size_t errsize);
/* POST the request r (its answer arrives through ah__mcp_receive / ah__mcp_req_end). */
void ah__mcp_http_send(ah_mcp *s, mcp_req *r);
/* POST a notification or a response (fire and forget). */
void ah__mcp_http_post(ah_mcp *s, const char *msg, const char *method);
/* GET with Last-Event-ID: pick r's stream up again. */
void ah__mcp_http_resume(ah_mcp *s, mcp_req *r);
/* Stop the transfer of r (no callback follows). */
void ah__mcp_http_abort(ah_mcp *s, mcp_req *r);
void ah__mcp_http_forget_session(ah_mcp *s);
/* End the 2025 era's session at close: DELETE with its Mcp-Session-Id, any answer
 * accepted (405: the server does not allow it), bound_ms at most; done(s) runs from a
 * loop timer after. 0 when started; -1 (nothing to end, or it could not start). */
int ah__mcp_http_end_session(ah_mcp *s, int64_t bound_ms, void (*done)(ah_mcp *s));
/* A DELETE of the session is in flight. */
int ah__mcp_http_ending_session(const ah_mcp *s);
int ah__mcp_http_has_session(const ah_mcp *s);
void ah__mcp_http_free(ah_mcp *s);

#endif
