/* mock_internal.h - the mock provider's pieces shared between its files, never installed.
 *
 *   buf.c    growable byte buffer with JSON string escaping (the writers' hot path)
 *   plan.c   fault plan: JSON -> validated steps, errors name the step and the field
 *   model.c  the deterministic model: request JSON -> one reply (text, tool call, usage)
 *   reply.c  the format-blind writer driver (segments, malformed events) and the
 *            registry of formats
 *   format_<name>.c  one per wire format: its request reader, SSE events, JSON bodies,
 *            error shapes, headers and ids, behind one ah__mock_format table
 *   mock.c   the libmicrohttpd server, fault injection, request log, public API
 *
 * The mock's knowledge of a wire format is its own: nothing here calls the client's
 * encoders, decoders or provider tables, so a decoder bug cannot hide behind the same
 * bug in the mock.
 *
 * Everything here is prefixed ah__mock_ so it cannot collide with other core modules.
 */
#ifndef AH_MOCK_INTERNAL_H
#define AH_MOCK_INTERNAL_H

#include "agenthost.h"
#include "internal.h"

#include "agenthost/mock.h"

#include <stddef.h>
#include <stdint.h>

#include <cjson/cJSON.h>

/* ---- the byte buffer and the wire formats' writers (core/writer/) ------------------ */

/* The mock writes every event and body through the writers it shares with the proxy
 * (core/writer/writer.h); these are its historical names for the buffer. */
#include "writer/writer.h"

typedef ah__wbuf ah__mock_buf;
#define ah__mock_buf_reserve ah__wbuf_reserve
#define ah__mock_buf_put ah__wbuf_put
#define ah__mock_buf_puts ah__wbuf_puts
#define ah__mock_buf_printf ah__wbuf_printf
#define ah__mock_buf_json_str ah__wbuf_json_str
#define ah__mock_buf_json_cstr ah__wbuf_json_cstr
#define ah__mock_buf_reset ah__wbuf_reset
#define ah__mock_buf_free ah__wbuf_free
#define ah__mock_buf_take ah__wbuf_take
#define ah__mock_utf8_floor ah__wr_utf8_floor
#define ah__mock_fnv1a ah__wr_fnv1a
#define AH__MOCK_FNV_INIT AH__WR_FNV_INIT

/* ---- plan.c ------------------------------------------------------------------------ */

#define AH__MOCK_STEP_KIND_MAP(X)                                                        \
    X(OK, "ok")                                                                          \
    X(STATUS, "status")                                                                  \
    X(RESET, "reset")                                                                    \
    X(DELAY, "delay")                                                                    \
    X(CUT, "cut")                                                                        \
    X(STALL, "stall")                                                                    \
    X(MALFORMED, "malformed")                                                            \
    X(ERROR_EVENT, "error_event")

typedef enum ah__mock_step_kind {
#define AH__MOCK_KIND_ENUM(name, s) AH__MOCK_##name,
    AH__MOCK_STEP_KIND_MAP(AH__MOCK_KIND_ENUM)
#undef AH__MOCK_KIND_ENUM
        AH__MOCK_KIND_COUNT_
} ah__mock_step_kind;

const char *ah__mock_step_kind_name(ah__mock_step_kind k);

typedef struct ah__mock_header {
    char *name;
    char *value;       /* NULL when the value is a relative date */
    long long date_in; /* seconds from now, formatted as an HTTP-date when sent */
} ah__mock_header;

/* Text options of the model; 0 / NULL = unset (fall back to the config, then model). */
typedef struct ah__mock_text_opts {
    const char *text;
    size_t text_deltas;
    size_t delta_bytes;
    const char *tool_args; /* the tool call's arguments text instead of the model's */
    size_t tool_repeat;    /* the call made this many times in parallel (0 = once) */
    /* The calls the reply makes instead of the model's: a compact JSON array of
     * {"name": ..., "arguments": {...} (optional)} (a plan step's tool_calls list) */
    const char *tool_calls_json;
    int restate;        /* a continuation's reply restates: AH__MOCK_RESTATE_* */
    int refuse_prefill; /* refuse a trailing assistant message whatever the model */
} ah__mock_text_opts;

enum { AH__MOCK_RESTATE_NONE, AH__MOCK_RESTATE_ALL, AH__MOCK_RESTATE_LAST_SENTENCE };

/* The exact text of Anthropic's 400 for a trailing assistant message (Claude 4.6+). */
#define AH__MOCK_PREFILL_REFUSAL                                                          \
    "This model does not support assistant message prefill. The conversation must end "   \
    "with a user message."

typedef struct ah__mock_step {
    ah__mock_step_kind kind;
    int status;               /* STATUS: 200..599 */
    ah__mock_header *headers; /* extra response headers, any kind but RESET */
    size_t header_count;
    char *body; /* STATUS: raw body to send instead of the default */
    size_t body_len;
    int has_body;
    char *error_type;           /* STATUS / ERROR_EVENT: override the error type */
    char *message;              /* STATUS / ERROR_EVENT: override the error message */
    long long delay_headers_ms; /* any kind; 0 = none */
    long long after_events;     /* CUT / STALL / MALFORMED / ERROR_EVENT: K */
    long long stall_ms;         /* STALL: -1 = until the client or the mock goes away */
    size_t tool_calls;          /* parallel calls when the reply calls the tool; 0 = 1 */
    char *tool_calls_json;      /* tool_calls as a list of {name, arguments}: compact JSON */
    char *text;                 /* reply text options (OK, DELAY and the stream faults) */
    char *tool_args;            /* the tool call's arguments, verbatim (any JSON text) */
    size_t text_deltas;
    size_t delta_bytes;
    int restate;        /* AH__MOCK_RESTATE_* */
    int refuse_prefill;
    /* OK / DELAY streams: how the connection ends after the final event. */
    int unclean; /* AH__MOCK_UNCLEAN_* */
    char *extra; /* bytes sent after the final event (NULL = none) */
    size_t extra_len;
    int extra_default; /* extra_after_end: true (the format's default extra events) */
    char *content_type; /* overrides the response's Content-Type (NULL = the usual) */
    int json_body;      /* OK / DELAY: a JSON body even when the request asked to stream */
    int body_fault;     /* STATUS: AH__MOCK_BODY_* */
    int invalid_utf8;   /* OK / DELAY: the reply text starts with the bytes FF FE */
    int gzip;           /* OK / DELAY: the body is sent gzip-encoded, asked for or not */
    long long repeat_events; /* a re-attach starts this many events early (repeats) */
    const char *stop_reason;  /* the reply's stop reason (static), NULL = the model's */
    char *refusal_category;   /* with stop_reason refusal: stop_details.category */
    int spend_limit;          /* STATUS: the provider's spend-limit error body */
    int context_exceeded;     /* STATUS: the provider's prompt-too-long error body */
} ah__mock_step;

enum { AH__MOCK_UNCLEAN_NONE, AH__MOCK_UNCLEAN_NO_FINAL_CHUNK, AH__MOCK_UNCLEAN_RESET,
       AH__MOCK_UNCLEAN_SHORT_CONTENT_LENGTH };
enum { AH__MOCK_BODY_NONE, AH__MOCK_BODY_ENDLESS, AH__MOCK_BODY_STALL };
enum { AH__MOCK_MAX_TOOL_CALLS = 16 }; /* a step's tool_calls */

typedef struct ah__mock_plan {
    ah__mock_step *steps;
    size_t count;
    ah__mock_step then; /* applied once the steps are used up (default: ok) */
    /* "rate_limit": {"requests_per_minute": N, "burst": B}: GCRA enforced by the mock;
     * a request over it gets 429 without taking a step. rl_t_ms 0 = none. */
    double rl_t_ms, rl_tau_ms;
} ah__mock_plan;

/* Parse and validate a plan: a JSON array of steps, or {"steps": [...], "then": step}.
 * On failure returns AH_ERR_PARSE (or AH_ERR_NOMEM) with "plan step N: ..." in err. */
ah_status ah__mock_plan_parse(const char *json, ah__mock_plan **out, char *err,
                              size_t errsize);
void ah__mock_plan_free(ah__mock_plan *p);

/* ---- model.c ----------------------------------------------------------------------- */

/* What the model says in one reply. Text deltas are [cuts[i], cuts[i+1]) of text; for a
 * continuation `text` is only what is left to say. */
typedef struct ah__mock_reply {
    char *model; /* echoed from the request, or "mock-model" */
    char *text;  /* the full reply text (owned) */
    size_t text_len;
    size_t *cuts; /* ndeltas + 1 offsets into text */
    size_t ndeltas;
    int has_tool;
    /* The tool calls (ids tool_id, tool_id_1, ...): one, the same one `tool_calls: N`
     * times, or a plan's list; ncalls >= 1 when has_tool. */
    struct ah__mock_call {
        char *name;
        char *args; /* compact JSON object */
        size_t args_len;
        size_t *arg_cuts; /* nargs + 1 offsets into args */
        size_t nargs;
    } *calls;
    size_t ncalls;
    char *tools_json;  /* the request's tools array, compact (Responses echoes it) */
    int include_usage; /* Chat: stream_options.include_usage */
    int continuation;  /* the request ended with an assistant message, or with a user
                          message asking to continue right after one */
    size_t restated;   /* bytes at the start of text that restate the partial */
    int background;    /* Responses: "background": true (kept for re-attaching) */
    long long input_tokens, output_tokens; /* input_tokens: the whole prompt */
    long long cache_read, cache_write;     /* of input_tokens (cache.c) */
    int input_excludes_cache; /* anthropic: usage.input_tokens is what is not cached */
    const char *stop_reason;     /* a plan's stop_reason (borrowed), NULL = the model's */
    const char *stop_category;   /* a plan's refusal_category (borrowed) or NULL */
    char msg_id[48], tool_id[48], call_id[48], item_id[48];
} ah__mock_reply;

/* Build the reply for a parsed request body. On an invalid request returns
 * AH_ERR_INVALID with a provider-style message in err (sent as a 400). */
ah_status ah__mock_model_reply(ah_wire wire, const cJSON *req, size_t body_len,
                               const ah__mock_text_opts *opts, ah__mock_reply *out,
                               char *err, size_t errsize);
void ah__mock_reply_free(ah__mock_reply *r);

/* ---- cache.c: the prompt cache (docs/mock.md, "Prompt caching") ------------------- */

typedef struct ah__mock_cache ah__mock_cache;
ah__mock_cache *ah__mock_cache_new(void);
void ah__mock_cache_free(ah__mock_cache *c);
/* Set r's cache usage for request req (and remember its prefixes). */
void ah__mock_cache_apply(ah__mock_cache *c, ah_wire wire, const cJSON *req,
                          ah__mock_reply *r);

/* ---- the neutral conversation (model.c) that a format's request reader fills ----- */

typedef enum {
    AH__MOCK_M_USER,
    AH__MOCK_M_TOOL_RESULTS,
    AH__MOCK_M_ASSISTANT
} ah__mock_msg_kind;

typedef struct ah__mock_nmsg {
    ah__mock_msg_kind kind;
    ah__mock_buf text;
    const cJSON *item; /* first raw item of this message (where hashing stops) */
} ah__mock_nmsg;

typedef struct ah__mock_conv {
    ah__mock_nmsg *v;
    size_t n, cap;
    const cJSON *items;       /* the raw messages / input array, or NULL */
    const char *tool_name;    /* first function tool, or NULL */
    const cJSON *tool_schema; /* its JSON schema, or NULL */
} ah__mock_conv;

/* Start a message of `kind`; consecutive tool results merge into one message. NULL when
 * out of memory. */
ah__mock_nmsg *ah__mock_conv_push(ah__mock_conv *c, ah__mock_msg_kind kind,
                                  const cJSON *item);
/* Append one tool result's text to a tool-results message (" | " between results). */
void ah__mock_add_result(ah__mock_nmsg *m, const char *s);
/* Text of a content value: a string, or an array of parts whose "text" is taken when the
 * part's type is one of `types` (space-separated list). */
void ah__mock_append_parts(ah__mock_buf *out, const cJSON *content, const char *types);
/* cJSON reads that tolerate anything: NULL / 0 when absent or of another type. */
const cJSON *ah__mock_get(const cJSON *o, const char *key);
const char *ah__mock_get_str(const cJSON *o, const char *key);
int ah__mock_str_is(const cJSON *o, const char *key, const char *want);

/* ---- the writer (reply.c), driven through the format's table ---------------------- */

/* Streams one reply as SSE events, one at a time, in the byte layout of the real API.
 * Its stream is a short table of segments (event kind x count; the kinds are the
 * format's own), so event i is generated on demand: a 200k-delta reply never exists as
 * a whole. */
typedef struct ah__mock_writer ah__mock_writer;
typedef struct ah__mock_format ah__mock_format;

typedef struct ah__mock_seg {
    int kind; /* the format's event kind */
    size_t count;
    size_t call; /* which tool call a tool segment belongs to */
} ah__mock_seg;

struct ah__mock_writer {
    const ah__mock_format *f;
    const ah__mock_reply *r;
    char request_id[48];
    ah__mock_seg segs[16 + 4 * AH__MOCK_MAX_TOOL_CALLS];
    size_t nsegs, total;
    size_t seg_i, in_seg; /* position of the next event */
    size_t seq;           /* events emitted so far (Responses sequence_number) */
    ah__mock_buf chunk;   /* a format's per-reply prefix (Chat: up to "choices":[) */
    ah__mock_buf scratch;
};

/* One wire format as the mock speaks it. */
struct ah__mock_format {
    const char *path;              /* the endpoint it serves, "/v1/messages"; "{model}"
                                      in it takes the model id (put in the request as
                                      "model") */
    /* NULL: a request streams when its body says "stream": true; else the endpoint
     * that streams (Gemini's :streamGenerateContent), `path` the one that does not */
    const char *stream_path;
    const char *request_id_header; /* "request-id" */
    /* For a request to an unknown path: request headers only this provider's clients
     * send (NULL none); the 404 then takes this format's shape, as does a path starting
     * with `path`. The format with guess_default answers the rest. */
    const char *signature_headers[2];
    int guess_default;
    const char *not_found_type;   /* error type of a 404 (unknown path) */
    const char *bad_method_type;  /* error type of a 405 */
    const char *bad_json_message; /* 400 for a body that is not JSON */
    const char *missing_model;    /* 400 for a request without "model" */
    const char *default_error_type; /* error_event / error status without a type */
    int overloaded_status;          /* the status of "overloaded_error" */
    const char *extra_after_end;    /* what extra_after_end: true sends after the end */
    /* id prefixes (NULL: the format has no such id): message/response, tool use / call
     * item, output message item, call id; each followed by 16 hex digits of the hash */
    const char *msg_id, *tool_id, *item_id, *call_id;

    /* Read a request into the neutral conversation (and any format-specific reply
     * fields, e.g. background). 0 ok, -1 invalid (message in err), -2 out of memory. */
    int (*read)(const cJSON *req, ah__mock_conv *c, ah__mock_reply *out, char *err,
                size_t errsize);
    /* NULL, or the format's own refusal of a trailing assistant message `last` (1 with
     * the provider's message in err, else 0). */
    int (*refuses_prefill)(const cJSON *req, const ah__mock_nmsg *last, char *err,
                           size_t errsize);
    /* The stream's segments (ah__mock_writer_add); -1 when out of memory. */
    int (*plan)(ah__mock_writer *w);
    /* Append event j (of `call`) of segment kind `kind`. */
    void (*emit)(ah__mock_writer *w, ah__mock_buf *o, int kind, size_t j, size_t call);
    /* Append the in-stream error event(s); type and message already defaulted. */
    void (*error_event)(ah__mock_writer *w, ah__mock_buf *o, const char *type,
                        const char *message);
    /* The non-streaming JSON body of a reply. */
    void (*body)(const ah__mock_reply *r, ah__mock_buf *o);
    /* The HTTP error body (type / message NULL = the defaults for that status). */
    void (*error_body)(int status, const char *type, const char *message,
                       const char *request_id, ah__mock_buf *o);
};

/* The registry: one table per AH_WIRE_MAP line (ah__mock_format_<NAME>, in
 * format_<name>.c). NULL out of range. */
#define AH__MOCK_FORMAT_DECL(N, s, path) extern const ah__mock_format ah__mock_format_##N;
AH_WIRE_MAP(AH__MOCK_FORMAT_DECL)
#undef AH__MOCK_FORMAT_DECL
const ah__mock_format *ah__mock_format_of(ah_wire wire);

ah__mock_writer *ah__mock_writer_new(ah_wire wire, const ah__mock_reply *r,
                                     const char *request_id);
void ah__mock_writer_free(ah__mock_writer *w);
size_t ah__mock_writer_event_count(const ah__mock_writer *w);
/* Append the next event to out; returns 0 when there are none left. */
int ah__mock_writer_next(ah__mock_writer *w, ah__mock_buf *out);
/* Append an event whose data is not JSON (the next event cut in half). */
void ah__mock_writer_malformed(ah__mock_writer *w, ah__mock_buf *out);
/* Append the in-stream error event(s) of the format. */
void ah__mock_writer_error(ah__mock_writer *w, ah__mock_buf *out, const char *type,
                           const char *message);

/* The non-streaming JSON body of a reply. */
void ah__mock_reply_body(ah_wire wire, const ah__mock_reply *r, ah__mock_buf *out);

/* The provider's error body for an HTTP status (type/message NULL = the defaults for that
 * status), e.g. Anthropic 529 {"type":"error","error":{"type":"overloaded_error"..}}. */
void ah__mock_error_body(ah_wire wire, int status, const char *type, const char *message,
                         const char *request_id, ah__mock_buf *out);
/* The error type of an error_event step without one: Anthropic "overloaded_error",
 * OpenAI formats "server_error" (what each sends mid-stream in practice). */
const char *ah__mock_default_error_type(ah_wire wire);
/* The HTTP status a provider would use for an error type (non-streaming error_event). */
int ah__mock_error_status(ah_wire wire, const char *type);

/* ---- pieces the format files share (reply.c) ----------------------------------------- */

/* Add a segment of `count` events of `kind` (nothing when count is 0). */
void ah__mock_writer_add(ah__mock_writer *w, int kind, size_t count, size_t call);
/* How many tool calls the reply makes (0, 1, or `tool_calls` parallel ones). */
size_t ah__mock_ncalls(const ah__mock_reply *r);
#define AH__MOCK_PUT AH__WR_PUT
/* The id of parallel call `call`: the base id, then <id>_1, ... (into buf, returned). */
const char *ah__mock_call_id(char *buf, size_t size, const char *base, size_t call);
/* Text delta i, argument fragment i of the reply. */
#define AH__MOCK_DELTA(r, i) (r)->text + (r)->cuts[i], (r)->cuts[(i) + 1] - (r)->cuts[i]
#define AH__MOCK_ARG(r, call, i)                                                          \
    (r)->calls[call].args + (r)->calls[call].arg_cuts[i],                                 \
        (r)->calls[call].arg_cuts[(i) + 1] - (r)->calls[call].arg_cuts[i]
#define ah__mock_default_message ah__wr_default_message
#define AH__MOCK_CREATED_AT "1700000000"
#define AH__MOCK_CREATED 1700000000LL
/* The mock's usage of a reply with `output` tokens. */
ah__wr_usage ah__mock_usage(const ah__mock_reply *r, long long output);

#endif
