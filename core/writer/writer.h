/* writer.h - the wire formats' SSE events and JSON bodies, as the real APIs lay them out
 * (internal; shared by the mock provider and the proxy, never installed).
 *
 *   buf.c              growable byte buffer, JSON string escaping, UTF-8 floor
 *   writer_anthropic.c Anthropic Messages: message_start .. message_stop, error event,
 *                      message body, error body
 *   writer_openai.c    OpenAI Chat Completions chunks, [DONE], body, the OpenAI error body
 *   writer_responses.c OpenAI Responses events (with sequence numbers), response object,
 *                      output items, incomplete / failed endings
 *   writer_gemini.c    Gemini GenerateContentResponse chunks (SSE with CRLF), the
 *                      error chunk and the raw JSON error tail, body, google.rpc.Status
 *
 * One writer per format: the mock (core/mock/format_<name>.c) streams its deterministic
 * replies through these functions, and the proxy (core/proxy/) writes the response it
 * splices from upstream attempts through the same ones, so the bytes a client reads from
 * either are laid out the same way. Each function appends one event (or one body) to an
 * ah__wbuf and knows nothing of where the content comes from: the caller says which
 * index, which id, which text. The byte layout follows the recorded provider streams in
 * tests/fixtures/real-streams; tests/unit/test_writer_golden.c pins the mock's bytes.
 *
 * Nothing here reads JSON or calls the client's encoders and decoders: a decoder bug
 * cannot hide behind the same bug in the writer. Prefix ah__wr_ (and ah__wbuf_). */
#ifndef AH_WRITER_H
#define AH_WRITER_H

#include <stddef.h>
#include <stdint.h>

#if defined(__GNUC__) || defined(__clang__)
#define AH__WR_PRINTF(a, b) __attribute__((format(printf, a, b)))
#else
#define AH__WR_PRINTF(a, b)
#endif

/* ---- buf.c ------------------------------------------------------------------------- */

/* A growable buffer. Once an allocation fails, `failed` sticks and further appends are
 * dropped, so writers check once at the end instead of after every append. Invariant:
 * data[len] == '\0' whenever data != NULL. */
typedef struct ah__wbuf {
    char *data;
    size_t len, cap;
    int failed;
} ah__wbuf;

int ah__wbuf_reserve(ah__wbuf *b, size_t extra); /* 0 ok, -1 failed */
void ah__wbuf_put(ah__wbuf *b, const char *s, size_t n);
void ah__wbuf_puts(ah__wbuf *b, const char *s);
void ah__wbuf_printf(ah__wbuf *b, const char *fmt, ...) AH__WR_PRINTF(2, 3);
/* Append s[0..n) as a JSON string literal, quotes included. */
void ah__wbuf_json_str(ah__wbuf *b, const char *s, size_t n);
/* Append a NUL-terminated string as a JSON literal; NULL becomes null. */
void ah__wbuf_json_cstr(ah__wbuf *b, const char *s);
void ah__wbuf_reset(ah__wbuf *b); /* len = 0, keeps the memory */
void ah__wbuf_free(ah__wbuf *b);
/* Hand the NUL-terminated contents to the caller (NULL if failed); leaves b empty. */
char *ah__wbuf_take(ah__wbuf *b);
void ah__wbuf_int(ah__wbuf *b, long long v);
void ah__wbuf_size(ah__wbuf *b, size_t v); /* no printf: sequence numbers are hot */

/* Length of the longest prefix of s[0..n) that does not end inside a UTF-8 sequence. */
size_t ah__wr_utf8_floor(const char *s, size_t n);
uint64_t ah__wr_fnv1a(uint64_t h, const void *data, size_t n);
#define AH__WR_FNV_INIT 0xcbf29ce484222325ULL

#define AH__WR_PUT(o, lit) ah__wbuf_put((o), lit, sizeof(lit) - 1)
/* "event: NAME\ndata: " */
void ah__wr_begin_event(ah__wbuf *o, const char *name);
/* The message an error of `type` carries when none is given (each provider's wording). */
const char *ah__wr_default_message(const char *type);

/* ---- what the writers are told ------------------------------------------------------ */

/* Token counts as a format reports them; -1 = unknown (written as 0). */
typedef struct ah__wr_usage {
    long long input, output, cache_read, cache_write;
} ah__wr_usage;

/* One output block / item, for the events that carry a whole one (Anthropic
 * content_block_start, Responses output_item.added/.done and response.completed) and
 * for bodies. Unused fields NULL / 0. */
typedef enum ah__wr_kind {
    AH__WR_TEXT,      /* text / output_text message */
    AH__WR_TOOL,      /* tool_use / function tool call / function_call item */
    AH__WR_THINKING,  /* Anthropic thinking (text = thinking, signature); Responses
                         reasoning (text = summary, encrypted) */
    AH__WR_REDACTED,  /* Anthropic redacted_thinking (encrypted = data) */
    AH__WR_SERVER_TOOL, /* Anthropic server_tool_use (id, name, args) */
    AH__WR_RAW        /* any other block / item: raw is its JSON, written as is */
} ah__wr_kind;

typedef struct ah__wr_block {
    ah__wr_kind kind;
    const char *id;      /* tool id (toolu_, call_, fc_), Responses item id (msg_, rs_) */
    const char *call_id; /* Responses function_call call_id */
    const char *name;
    const char *text; /* text, thinking, reasoning summary; the arguments of a tool */
    size_t text_len;
    const char *signature; /* thinking */
    size_t signature_len;
    const char *encrypted; /* redacted_thinking data, Responses encrypted_content */
    size_t encrypted_len;
    const char *raw; /* AH__WR_RAW: the block's JSON */
    size_t raw_len;
} ah__wr_block;

/* ---- writer_anthropic.c ------------------------------------------------------------ */

typedef struct ah__wr_anthropic_head {
    const char *id, *model;
    const char *service_tier; /* NULL: not written */
} ah__wr_anthropic_head;

/* Delta kinds of content_block_delta. */
enum { AH__WR_A_TEXT, AH__WR_A_JSON, AH__WR_A_THINKING, AH__WR_A_SIGNATURE };

void ah__wr_a_message_start(ah__wbuf *o, const ah__wr_anthropic_head *h,
                            const ah__wr_usage *u);
/* content_block_start with the block's opening form: text "", tool_use / server_tool_use
 * input {}, thinking "" with signature "", redacted_thinking with its data, raw as is. */
void ah__wr_a_block_start(ah__wbuf *o, size_t index, const ah__wr_block *b);
void ah__wr_a_ping(ah__wbuf *o);
void ah__wr_a_delta(ah__wbuf *o, size_t index, int kind, const char *s, size_t n);
void ah__wr_a_block_stop(ah__wbuf *o, size_t index);
void ah__wr_a_message_delta(ah__wbuf *o, const char *stop_reason, const ah__wr_usage *u);
/* The same with a refusal's stop_details (category NULL: null) when stop_reason is
 * "refusal". */
void ah__wr_a_message_delta_details(ah__wbuf *o, const char *stop_reason,
                                    const char *category, const ah__wr_usage *u);
void ah__wr_a_message_stop(ah__wbuf *o);
/* event: error {"type":"error","error":{"details":null,"type","message"},"request_id"} */
void ah__wr_a_error(ah__wbuf *o, const char *type, const char *message,
                    const char *request_id);
/* The non-stream message object. */
void ah__wr_a_body(ah__wbuf *o, const ah__wr_anthropic_head *h, const ah__wr_block *blocks,
                   size_t n, const char *stop_reason, const ah__wr_usage *u);
/* {"type":"error","error":{"type","message"},"request_id"} (type/message NULL = the
 * defaults for the status). */
void ah__wr_a_error_body(ah__wbuf *o, int status, const char *type, const char *message,
                         const char *request_id);
const char *ah__wr_a_status_type(int status);

/* ---- writer_openai.c (Chat Completions) --------------------------------------------- */

typedef struct ah__wr_chat_head {
    const char *id, *model;
    long long created;
    const char *service_tier;       /* NULL: not written */
    const char *system_fingerprint; /* NULL: not written */
    int include_usage; /* stream_options.include_usage: "usage":null on every chunk */
} ah__wr_chat_head;

/* Every chunk starts with the same bytes, up to "choices":[ : built once per response. */
void ah__wr_c_prefix(ah__wbuf *prefix, const ah__wr_chat_head *h);
/* The first chunk of a text answer: role assistant, content "". */
void ah__wr_c_role(ah__wbuf *o, const ah__wbuf *prefix, int include_usage);
void ah__wr_c_text(ah__wbuf *o, const ah__wbuf *prefix, int include_usage, const char *s,
                   size_t n);
/* A tool call's first chunk (id, name, arguments ""); with_role: it is the answer's
 * first chunk too (role, content null, refusal null). */
void ah__wr_c_tool_start(ah__wbuf *o, const ah__wbuf *prefix, int include_usage,
                         size_t call, const char *id, const char *name, int with_role);
void ah__wr_c_tool_args(ah__wbuf *o, const ah__wbuf *prefix, int include_usage, size_t call,
                        const char *s, size_t n);
void ah__wr_c_finish(ah__wbuf *o, const ah__wbuf *prefix, int include_usage,
                     const char *finish_reason);
/* The usage-only chunk ("choices":[]). */
void ah__wr_c_usage(ah__wbuf *o, const ah__wbuf *prefix, const ah__wr_usage *u);
void ah__wr_c_done(ah__wbuf *o);
/* data: {"error":{"message","type","param":null,"code":null}} (no [DONE]). */
void ah__wr_c_error(ah__wbuf *o, const char *type, const char *message);
/* The non-stream chat.completion object: text (NULL = content null) and tool calls. */
void ah__wr_c_body(ah__wbuf *o, const ah__wr_chat_head *h, const char *text,
                   size_t text_len, const ah__wr_block *tools, size_t ntools,
                   const char *finish_reason, const ah__wr_usage *u);
/* {"error":{"message","type","param":null,"code"}}, which Chat Completions and Responses
 * share (type/message NULL = the defaults for the status). */
void ah__wr_openai_error_body(ah__wbuf *o, int status, const char *type,
                              const char *message);

/* ---- writer_responses.c ------------------------------------------------------------- */

typedef struct ah__wr_resp_head {
    const char *id, *model;
    long long created_at;
    int background, store;
    const char *tools_json; /* the request's tools, compact JSON ("[]" when NULL) */
    /* When set, the response object is this JSON object (the upstream's own, from its
     * response.created) with the fields the writer owns replaced: status, completed_at,
     * error, incomplete_details, output, usage. NULL: the mock's fixed layout. */
    const struct cJSON *tmpl;
} ah__wr_resp_head;

typedef enum ah__wr_resp_status {
    AH__WR_RS_IN_PROGRESS,
    AH__WR_RS_COMPLETED,
    AH__WR_RS_FAILED,
    AH__WR_RS_INCOMPLETE
} ah__wr_resp_status;

/* The end of a response object: its output items (NULL / 0 for none), the usage (NULL =
 * null), the error of a failed one, the reason of an incomplete one. */
typedef struct ah__wr_resp_end {
    const ah__wr_block *items;
    size_t n_items;
    const ah__wr_usage *usage;
    const char *error_code, *error_message;
    const char *incomplete_reason;
} ah__wr_resp_end;

void ah__wr_r_object(ah__wbuf *o, const ah__wr_resp_head *h, ah__wr_resp_status st,
                     const ah__wr_resp_end *end);
/* An output item: done = its final form (status completed, whole text/arguments). */
void ah__wr_r_item(ah__wbuf *o, const ah__wr_block *b, int done);
/* response.created / response.in_progress (name), status in_progress. */
void ah__wr_r_lifecycle(ah__wbuf *o, const char *name, const ah__wr_resp_head *h, size_t seq);
void ah__wr_r_item_event(ah__wbuf *o, int done, const ah__wr_block *b, size_t output_index,
                         size_t seq);
void ah__wr_r_part_event(ah__wbuf *o, int done, const char *item_id, size_t output_index,
                         const char *text, size_t text_len, size_t seq);
void ah__wr_r_text_delta(ah__wbuf *o, const char *item_id, size_t output_index,
                         const char *s, size_t n, size_t seq);
void ah__wr_r_text_done(ah__wbuf *o, const char *item_id, size_t output_index,
                        const char *text, size_t text_len, size_t seq);
void ah__wr_r_args_delta(ah__wbuf *o, const char *item_id, size_t output_index,
                         const char *s, size_t n, size_t seq);
void ah__wr_r_args_done(ah__wbuf *o, const char *item_id, size_t output_index,
                        const char *args, size_t len, size_t seq);
/* response.completed / response.incomplete / response.failed with the object. */
void ah__wr_r_terminal(ah__wbuf *o, const ah__wr_resp_head *h, ah__wr_resp_status st,
                       const ah__wr_resp_end *end, size_t seq);
/* event: error {"type":"error","sequence_number","error":{"type","code","message",
 * "param":null}} */
void ah__wr_r_error(ah__wbuf *o, const char *type, const char *message, size_t seq);

/* ---- writer_gemini.c ---------------------------------------------------------------- */

typedef struct ah__wr_gemini_head {
    const char *model;       /* modelVersion */
    const char *response_id; /* responseId */
} ah__wr_gemini_head;

/* One chunk (an SSE event, "data: {...}\r\n\r\n") with one part: text (thought 1: a
 * thought summary), or a whole functionCall {name, args: the JSON object text} with an
 * optional thoughtSignature. u NULL: no usageMetadata. */
void ah__wr_g_text(ah__wbuf *o, const ah__wr_gemini_head *h, const char *s, size_t n,
                   int thought, const ah__wr_usage *u);
void ah__wr_g_call(ah__wbuf *o, const ah__wr_gemini_head *h, const char *name,
                   const char *args, size_t args_len, const char *signature,
                   const ah__wr_usage *u);
/* The last chunk: an empty text part, the finishReason and the usage. */
void ah__wr_g_finish(ah__wbuf *o, const ah__wr_gemini_head *h, const char *finish_reason,
                     const ah__wr_usage *u);
/* A google.rpc.Status {"error":{"code","message","status"}} (status/message NULL = the
 * defaults for code; retry_delay NULL = no RetryInfo detail), as an SSE chunk
 * (ah__wr_g_error_event), as the raw JSON the API writes after its events when it fails
 * mid-stream (ah__wr_g_error_tail: "[{\n  \"error\": ...\n}\n]"), or as a body. */
void ah__wr_g_error_event(ah__wbuf *o, int code, const char *status, const char *message);
void ah__wr_g_error_tail(ah__wbuf *o, int code, const char *status, const char *message);
void ah__wr_g_error_body(ah__wbuf *o, int code, const char *status, const char *message,
                         const char *retry_delay);
/* The google.rpc.Code name of an HTTP status ("RESOURCE_EXHAUSTED" for 429) and back. */
const char *ah__wr_g_status_name(int code);
int ah__wr_g_status_code(const char *status);
/* The non-stream GenerateContentResponse: text (NULL none), tool calls, finish, usage. */
void ah__wr_g_body(ah__wbuf *o, const ah__wr_gemini_head *h, const char *text,
                   size_t text_len, const ah__wr_block *tools, size_t ntools,
                   const char *finish_reason, const ah__wr_usage *u);

#endif
