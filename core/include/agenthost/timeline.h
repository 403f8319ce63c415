/* agenthost/timeline.h - the neutral stream timeline and the per-format decoders that
 * fill it (docs/providers-decoding.md, docs/worker.md).
 *
 * Each provider wire format (anthropic, openai = Chat Completions, responses) decodes
 * into one neutral timeline: an ordered list of blocks (text, reasoning, tool_use, plus
 * the provider's server-side tool blocks), each open or closed, and the response's stop
 * reason, usage, refusal text, "finished" flag and in-stream provider error.
 *
 * A block is closed only when its format says so: Anthropic content_block_stop; Responses
 * response.output_item.done (and, for a server that skips it, response.completed /
 * incomplete); Chat Completions: a text or reasoning block closes when a different kind
 * of content or a tool call starts or when finish_reason arrives, a tool call at
 * finish_reason. Tool arguments are assembled from fragments and parsed once, at close.
 *
 * Ownership: the caller owns the timeline; a decoder borrows it. Every pointer returned
 * by an accessor is borrowed from the timeline and valid until the timeline is next
 * modified (a decoder feed), reset or freed. Not thread-safe; one decoder per timeline at
 * a time.
 */
#ifndef AGENTHOST_TIMELINE_H
#define AGENTHOST_TIMELINE_H

#include "agenthost/export.h"

#include "agenthost/error.h"
#include "agenthost/sse.h"
#include "agenthost/status.h"
#include "agenthost/wire.h"

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

struct cJSON; /* parsed tool arguments are handed out as cJSON values (libcjson) */

/* X(NAME, "name") */
#define AH_BLOCK_KIND_MAP(X)                                                             \
    X(TEXT, "text")                                                                      \
    X(REASONING, "reasoning")                                                            \
    X(TOOL_USE, "tool_use")                                                              \
    X(SERVER_TOOL_USE, "server_tool_use")                                                \
    X(OPAQUE, "opaque")

/* TEXT: assistant output text. REASONING: thinking / reasoning summary / raw reasoning.
 * TOOL_USE: a client tool call (the only kind the worker executes).
 * SERVER_TOOL_USE: a tool the provider runs itself (Anthropic server_tool_use,
 *   mcp_tool_use); recorded with its arguments, never executed by us.
 * OPAQUE: any other provider block (Anthropic *_tool_result, Responses web_search_call,
 *   unknown future types), kept verbatim as JSON so a later encoder may echo it. */
typedef enum ah_block_kind {
#define AH__BK_ENUM(name, s) AH_BLOCK_##name,
    AH_BLOCK_KIND_MAP(AH__BK_ENUM)
#undef AH__BK_ENUM
        AH_BLOCK_COUNT_
} ah_block_kind;

AH_EXPORT const char *ah_block_kind_name(ah_block_kind k); /* "unknown" out of range */

/* A read-only view of one block. Every string is NUL-terminated and never NULL ("" when
 * absent) unless noted. */
typedef struct ah_block {
    ah_block_kind kind;
    int closed; /* 1 once the format closed it */
    /* TEXT, REASONING: the content. A Responses reasoning item with several summary or
     * content parts holds them joined by "\n\n". */
    const char *text;
    size_t text_len;
    /* REASONING (Anthropic thinking): the signature. */
    const char *signature;
    size_t signature_len;
    /* REASONING: Responses encrypted_content (the LAST one seen: output_item.added, .done
     * and response.completed may each carry a different one), or the data of an Anthropic
     * redacted_thinking block (then redacted = 1). */
    const char *encrypted;
    size_t encrypted_len;
    int redacted;
    /* Responses: the output item id (rs_..., msg_..., fc_...), the last one seen. */
    const char *item_id;
    /* TOOL_USE, SERVER_TOOL_USE: the id the tool result must reference (Anthropic
     * toolu_..., Chat call id, Responses call_id), and the tool name. */
    const char *id;
    const char *name;
    /* TOOL_USE, SERVER_TOOL_USE: the arguments JSON text as assembled from the fragments.
     * Once closed it is valid JSON; an empty argument string became "{}". */
    const char *arguments;
    size_t arguments_len;
    /* ... and parsed, once, at close (NULL while open). Borrowed from the timeline. */
    const struct cJSON *args;
    /* OPAQUE: the provider's block/item type and its JSON, compact. */
    const char *type;
    const char *raw;
    size_t raw_len;
} ah_block;

typedef struct ah_timeline ah_timeline;

/* Returns NULL on allocation failure. */
AH_EXPORT ah_timeline *ah_timeline_new(void);
AH_EXPORT void ah_timeline_free(ah_timeline *tl);
/* Forget all blocks and response fields (keeps allocated capacity for reuse). */
AH_EXPORT void ah_timeline_reset(ah_timeline *tl);

AH_EXPORT size_t ah_timeline_count(const ah_timeline *tl);
/* The i-th block in stream order, or NULL when out of range. */
AH_EXPORT const ah_block *ah_timeline_block(const ah_timeline *tl, size_t i);

/* The provider's stop reason, verbatim (NOT normalised): Anthropic message_delta
 * stop_reason (end_turn, tool_use, max_tokens, stop_sequence, refusal, pause_turn ...),
 * Chat finish_reason of choice 0 (stop, tool_calls, length, content_filter ...),
 * Responses response.status of the terminal event (completed, incomplete, failed). NULL
 * if none. */
AH_EXPORT const char *ah_timeline_stop_reason(const ah_timeline *tl);
/* The stop reason normalised (docs/providers-decoding.md, "Stop reasons"): "end_turn"
 * (end_turn, stop_sequence, stop, completed, STOP), "tool_use" (tool_use, tool_calls,
 * function_call, or any completed response whose closed blocks hold a tool call),
 * "max_tokens" (max_tokens, length, an incomplete response for max_output_tokens,
 * MAX_TOKENS), "refusal" (refusal, content_filter, SAFETY and its kin, or refusal text
 * with no other text), "pause_turn", "context_exceeded" (model_context_window_exceeded);
 * any other value verbatim; NULL when none arrived. */
AH_EXPORT const char *ah_timeline_stop(const ah_timeline *tl);
/* Anthropic stop_details.category (a refusal's policy category), or NULL. */
AH_EXPORT const char *ah_timeline_stop_category(const ah_timeline *tl);
/* Token usage as finally reported; -1 for a count never reported. input_tokens is the
 * whole prompt, cached or not (for Anthropic, input_tokens + cache_read_input_tokens +
 * cache_creation_input_tokens, so every format counts the same thing). */
AH_EXPORT int64_t ah_timeline_input_tokens(const ah_timeline *tl);
AH_EXPORT int64_t ah_timeline_output_tokens(const ah_timeline *tl);
/* Prompt-cache usage (part of input_tokens): tokens read from the cache (Anthropic
 * cache_read_input_tokens, OpenAI prompt_tokens_details.cached_tokens / Responses
 * input_tokens_details.cached_tokens) and written to it (Anthropic
 * cache_creation_input_tokens; OpenAI reports none). -1 when never reported. */
AH_EXPORT int64_t ah_timeline_cache_read_tokens(const ah_timeline *tl);
AH_EXPORT int64_t ah_timeline_cache_write_tokens(const ah_timeline *tl);
/* Refusal text (Chat delta.refusal, Responses refusal parts), or NULL if none. */
AH_EXPORT const char *ah_timeline_refusal(const ah_timeline *tl, size_t *len);
/* Number of Anthropic citations_delta events (citations are counted, not kept). */
AH_EXPORT int ah_timeline_citations(const ah_timeline *tl);
/* 1 once the format's end arrived: Anthropic message_stop; Chat finish_reason followed by
 * [DONE] or by the end of the stream (ah_decoder_finish); Responses response.completed,
 * response.incomplete or response.failed. A non-stream body sets it when decoded. */
AH_EXPORT int ah_timeline_finished(const ah_timeline *tl);
/* The provider's in-stream error (Anthropic `error` event, Responses `error` event or
 * response.failed, a Chat chunk carrying "error"), kind AH_EK_STREAM with provider_type;
 * NULL if none. error_json is the provider's error object as compact JSON (NULL if none).
 */
AH_EXPORT const ah_error *ah_timeline_error(const ah_timeline *tl);
AH_EXPORT const char *ah_timeline_error_json(const ah_timeline *tl);

/* ---- partial drain (continuation, docs/worker.md) -----------------------------------------
 */

/* What an interrupted response may commit: the closed TEXT and REASONING blocks, in
 * stream order, to be sent as ONE partial assistant message. Everything else is dropped
 * and counted: every open block, and every TOOL_USE / SERVER_TOOL_USE / OPAQUE block
 * whether closed or not (tool calls run only from a completed response; a tool_use
 * without its result cannot be committed). A closed TEXT block with no text is omitted
 * silently (providers reject empty text blocks; nothing the user saw is lost). */
typedef struct ah_partial {
    const ah_block **blocks; /* borrowed from the timeline; array owned by this struct */
    size_t count;
    size_t dropped_blocks;    /* all dropped blocks ... */
    size_t dropped_tool_uses; /* ... of which client TOOL_USE blocks */
    uint64_t dropped_bytes; /* text + reasoning + argument bytes of the dropped blocks */
    uint64_t kept_bytes;    /* text + reasoning bytes of the kept blocks */
} ah_partial;

/* Fill *out (previous contents are overwritten, not freed). Returns AH_OK or AH_ERR_NOMEM
 * (then *out is empty). Does not modify the timeline. Free with ah_partial_clear(). */
AH_EXPORT ah_status ah_timeline_partial_drain(const ah_timeline *tl, ah_partial *out);
AH_EXPORT void ah_partial_clear(ah_partial *p);

/* ---- decoders
 * ---------------------------------------------------------------------------- */

/* Callbacks for the worker's events; any may be NULL. All pointers are borrowed for the
 * call only. A hook must not feed, finish or free the decoder, nor reset the timeline. */
typedef struct ah_decoder_hooks {
    /* A block was opened at timeline position `index`. id/name: the tool id and name for
     * TOOL_USE and SERVER_TOOL_USE (NULL when the provider has not sent them yet: a Chat
     * server may send the name in a later fragment; the block has the final values). */
    void (*block_start)(void *ud, size_t index, ah_block_kind kind, const char *id,
                        const char *name);
    /* New content for block `index`: text for TEXT and REASONING, an argument JSON
     * fragment for TOOL_USE and SERVER_TOOL_USE. Not NUL-terminated; len > 0. */
    void (*delta)(void *ud, size_t index, ah_block_kind kind, const char *text,
                  size_t len);
    /* Block `index` was closed (for a tool call: its arguments parsed). */
    void (*block_end)(void *ud, size_t index, const ah_block *b);
} ah_decoder_hooks;

typedef struct ah_decoder ah_decoder;

/* A streaming decoder for `wire` that fills `tl` (borrowed: it must outlive the decoder).
 * hooks may be NULL (copied; ud passed to every hook). AH_OK with *out set; else
 * *out = NULL and AH_ERR_INVALID (an unknown wire, no timeline: said in err) or
 * AH_ERR_NOMEM; err may be NULL. The timeline is not reset: pass a fresh or reset one. */
AH_EXPORT ah_status ah_decoder_new(ah_wire wire, ah_timeline *tl, const ah_decoder_hooks *hooks,
                                   void *ud, ah_decoder **out, char *err, size_t errsize);
AH_EXPORT void ah_decoder_free(ah_decoder *d);

/* Feed raw stream bytes in any split (the decoder owns an SSE parser). Returns AH_OK, or
 * a sticky error: AH_ERR_PARSE (malformed event: bad JSON, a known event missing a field
 * it needs, tool arguments that are not valid JSON at close), AH_ERR_TOO_LARGE (SSE size
 * cap), AH_ERR_NOMEM, AH_ERR_STATE (fed after ah_decoder_finish). Details:
 * ah_decoder_error(). An in-stream PROVIDER error (overloaded_error ...) is not a decoder
 * error: feeding goes on (a response.failed may follow) and it is recorded in the
 * timeline. Unknown event types and unknown delta/block types are ignored (providers add
 * new ones; logged at debug level); a malformed event of a known type is an error. */
AH_EXPORT ah_status ah_decoder_feed(ah_decoder *d, const void *bytes, size_t len);

/* Feed one already-parsed SSE event (for a caller that runs its own parser). The event is
 * borrowed for the call. Same results as ah_decoder_feed. */
AH_EXPORT ah_status ah_decoder_feed_event(ah_decoder *d, const ah_sse_event *ev);

/* The end of the stream (EOF from the transport). Returns AH_OK when the stream ended
 * cleanly: the format's end arrived and no error, of the decoder or of the provider, was
 * seen. Otherwise fills *err (if not NULL) with an AH_EK_STREAM error and returns:
 * the sticky decoder error (AH_ERR_PARSE ...), AH_ERR_PROVIDER for a provider's
 * in-stream error (provider_type set) or AH_ERR_TRUNCATED for a stream that ended before
 * its format's end.
 * Open blocks stay open. After it, feeding returns AH_ERR_STATE; calling it again returns
 * the same answer. */
AH_EXPORT ah_status ah_decoder_finish(ah_decoder *d, ah_error *err);

/* ---- resumable streams (OpenAI Responses background mode) ----
 * Every Responses event carries a sequence_number; response.created / in_progress /
 * queued carry the response id. The decoder keeps both, can take the rest of the same
 * response from a new connection, and there skips the events whose sequence_number is
 * not above the last one decoded before the break (a re-attached stream that repeats
 * events emits nothing twice). */

/* The response id and the last sequence_number decoded. Returns 1 when the stream can
 * be re-attached after them: both are known, the decoder is healthy (no decoder error, no
 * in-stream provider error) and the response has not finished; 0 otherwise (the
 * outputs are then left untouched). *response_id is borrowed from the decoder. Either
 * pointer may be NULL. */
AH_EXPORT int ah_decoder_cursor(const ah_decoder *d, const char **response_id, int64_t *last_seq);
/* The response id when one was seen and the response has not finished (a cancel has
 * something to cancel), else NULL. Borrowed. */
AH_EXPORT const char *ah_decoder_response_id(const ah_decoder *d);
/* The stream broke and the same response goes on in a new connection: drop whatever
 * partial event the SSE parser holds and accept bytes again (also after
 * ah_decoder_finish). The timeline, its open blocks and the cursor stay. AH_ERR_STATE
 * when the decoder has a sticky error. */
AH_EXPORT ah_status ah_decoder_reattach(ah_decoder *d);
/* Events of re-attached streams skipped because their sequence_number was at or below
 * the cursor at the re-attach. */
AH_EXPORT uint64_t ah_decoder_duplicates(const ah_decoder *d);

/* The decoder's sticky error, or NULL while healthy. Kind AH_EK_STREAM; the message names
 * the format, the event type, the event number and the byte offset where it ended. */
AH_EXPORT const ah_error *ah_decoder_error(const ah_decoder *d);
/* 1 once the stream's final event was decoded: Anthropic message_stop, Responses
 * response.completed / incomplete / failed, Chat [DONE] (every format: [DONE]). Events
 * after it are ignored, so content sent after the end (a tool call after message_stop)
 * never reaches the timeline. */
AH_EXPORT int ah_decoder_ended(const ah_decoder *d);

/* Decode a complete NON-stream response body of `wire` into `tl` (fresh or reset). Every
 * block is closed and the timeline is finished. Returns AH_OK; AH_ERR_PARSE with err kind
 * AH_EK_DECODE for invalid JSON, a body that is not a response object of the format, or
 * tool arguments that are not valid JSON; AH_ERR_PROVIDER with err kind AH_EK_HTTP and
 * provider_type set when the body is the provider's error object (also recorded in the
 * timeline). err may be NULL. */
AH_EXPORT ah_status ah_decode_response(ah_wire wire, const char *body, size_t len, ah_timeline *tl,
                                       ah_error *err);

#ifdef __cplusplus
}
#endif
#endif
