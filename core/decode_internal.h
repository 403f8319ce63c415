/* decode_internal.h - what the timeline and the three format decoders share (never
 * installed).
 *
 * The timeline (timeline.c) owns the blocks and their growable buffers; only the
 * functions here mutate it. The decoder core (decode.c) owns the SSE parser, the sticky
 * error and the hooks; the format files (decode_anthropic.c, decode_openai.c,
 * decode_responses.c) turn one parsed event into timeline mutations through the ah__dec_*
 * helpers, which fire the hooks, so a format file never touches a hook or a buffer
 * directly.
 */
#ifndef AH_DECODE_INTERNAL_H
#define AH_DECODE_INTERNAL_H

#include "internal.h"

#include "agenthost/sse.h"
#include "agenthost/timeline.h"

#include <cjson/cJSON.h>

#include <stdalign.h>
#include <stddef.h>
#include <stdint.h>

/* ---- timeline mutators (timeline.c)
 * ------------------------------------------------------ */

/* The string fields of a block, one growable buffer each. */
typedef enum ah__field {
    AH__F_TEXT,  /* text / reasoning content */
    AH__F_ARGS,  /* tool arguments JSON as assembled */
    AH__F_INPUT, /* Anthropic tool input given whole in content_block_start (fallback) */
    AH__F_SIGNATURE, /* Anthropic thinking signature */
    AH__F_ENCRYPTED, /* Responses encrypted_content / Anthropic redacted_thinking data */
    AH__F_ITEM_ID,   /* Responses item id */
    AH__F_ID,        /* tool id (Responses call_id) */
    AH__F_NAME,      /* tool name */
    AH__F_TYPE,      /* OPAQUE: provider type */
    AH__F_RAW,       /* OPAQUE: provider JSON */
    AH__F_COUNT_
} ah__field;

/* No block found. */
#define AH__NONE ((size_t)-1)

/* Append a block of `kind`, open, keyed by the provider's (key, sub) indices (-1 = none);
 * *index receives its position. */
ah_status ah__tl_open(ah_timeline *tl, ah_block_kind kind, int64_t key, int64_t sub,
                      size_t *index);
/* The most recent block with (key, sub), optionally open only; AH__NONE if none. */
size_t ah__tl_find(const ah_timeline *tl, int64_t key, int64_t sub, int open_only);
ah_block_kind ah__tl_kind(const ah_timeline *tl, size_t i);
int64_t ah__tl_key(const ah_timeline *tl, size_t i);
int ah__tl_is_open(const ah_timeline *tl, size_t i);
size_t ah__tl_len(const ah_timeline *tl, size_t i, ah__field f);

ah_status ah__tl_append(ah_timeline *tl, size_t i, ah__field f, const char *s, size_t n);
ah_status ah__tl_set(ah_timeline *tl, size_t i, ah__field f, const char *s, size_t n);
void ah__tl_set_redacted(ah_timeline *tl, size_t i);
/* Responses reasoning parts: note that content for part (kind, idx) arrives. Returns 1
 * when this starts a new part after earlier content (the caller appends the "\n\n"
 * joint). */
int ah__tl_part(ah_timeline *tl, size_t i, int part_kind, int64_t part_idx);
/* Close block i. For a tool block the arguments are parsed here, once: whitespace-only
 * arguments fall back to AH__F_INPUT, then to "{}". Returns AH_ERR_PARSE (block left
 * open) when they are not valid JSON, AH_ERR_NOMEM; closing a closed block is a no-op. */
ah_status ah__tl_close(ah_timeline *tl, size_t i);

ah_status ah__tl_set_stop_reason(ah_timeline *tl, const char *s); /* NULL clears */
/* -1 leaves a count unchanged. */
void ah__tl_set_usage(ah_timeline *tl, int64_t input, int64_t output);
/* Both counts replaced, -1 = not reported. */
void ah__tl_replace_usage(ah_timeline *tl, int64_t input, int64_t output);
/* Anthropic: input_tokens excludes the cache figures, which ah_timeline_input_tokens
 * then adds. */
void ah__tl_input_excludes_cache(ah_timeline *tl);
/* Cache usage; -1 leaves a count unchanged. */
void ah__tl_set_cache_usage(ah_timeline *tl, int64_t read, int64_t write);
/* The normalised stop reason when the raw one does not say it (a static string: a
 * Responses "incomplete" for max_output_tokens is "max_tokens"). NULL clears. */
void ah__tl_set_stop_norm(ah_timeline *tl, const char *norm);
ah_status ah__tl_set_stop_category(ah_timeline *tl, const char *category); /* NULL clears */
ah_status ah__tl_refusal_append(ah_timeline *tl, const char *s, size_t n);
void ah__tl_add_citation(ah_timeline *tl);
void ah__tl_set_finished(ah_timeline *tl);
/* Record the provider's in-stream error (the first one wins). json may be NULL. */
ah_status ah__tl_set_error(ah_timeline *tl, const char *provider_type,
                           const char *message, const char *json);

/* ---- the decoder core (decode.c)
 * --------------------------------------------------------- */

struct ah__provider;

struct ah_decoder {
    ah_wire wire;
    const struct ah__provider *p; /* the format's ops table (provider.h) */
    ah_timeline *tl;
    ah_decoder_hooks hooks;
    void *ud;
    ah_sse *sse;      /* NULL for a non-stream decode */
    ah_status status; /* sticky */
    /* The sticky error (valid when status != AH_OK) and finish's, each malloc'd when
     * first set (ah__dec_err_slot): out of the struct, 2 x 664 bytes, so that the
     * decoder stays in malloc's fast per-thread cache (chunks up to 1 KiB). */
    ah_error *err;
    int finish_called;
    ah_status finish_status;
    ah_error *finish_err;
    uint64_t bytes;      /* stream bytes fed */
    uint64_t events;     /* events decoded */
    int64_t ev_end;      /* byte offset where the current event ended, -1 unknown */
    const char *ev_type; /* type of the event being decoded (for messages) */
    int done_seen;       /* "data: [DONE]" arrived */
    const char *raw;     /* the JSON text being decoded (for ah__dec_name); meaningful
                            only while an event or body is dispatched */
    size_t raw_len;
    char *name_buf;      /* ah__dec_name's answer (160 bytes, malloc'd by the
                            first: a name with a NUL in it is rare) */
    int nonstream;       /* decoding a whole body (errors are DECODE) */
    int slow;       /* the fast path is off (tests) */
    char *scratch;  /* the fast path's unescaped string, reused */
    size_t scratch_cap;
    /* the fast path's shape cache (decode_fast.c): the bytes around the delta string of
     * the last event it took, and what that event was */
    char *fast_bytes;
    size_t fast_pre, fast_suf, fast_cap;
    int fast_kind; /* 0 none, 1 Anthropic delta (fast_idx, fast_dt), 2 Chat content */
    size_t skip_min; /* Responses events from this size on go through ah__fast_parse */
    int64_t fast_idx;
    const char *fast_dt;
    /* Responses: the resume cursor (see ah_decoder_cursor) */
    int64_t last_seq; /* -1 until an event with a sequence_number was decoded */
    int64_t skip_upto; /* after a re-attach: events up to this number are repeats */
    char response_id[128];
    uint64_t duplicates;
    /* a format with a tail op (Gemini): the bytes after the last event (tail_from, its
     * end), which an unfinished stream hands to the op at finish */
    char *tail;
    size_t tail_len;
    uint64_t tail_off, tail_from;
    /* Gemini state (decode_gemini.c) */
    size_t gem_open;   /* the open text/reasoning block, AH__NONE if none */
    int64_t gem_calls; /* functionCall parts seen (the ids made for those without one) */
    int no_tree; /* ah__tree_parse is off (tests) */
    uint64_t tree_events; /* events decoded from its tree (tests) */
    /* Chat Completions state */
    size_t chat_open; /* the open text/reasoning block, AH__NONE if none */
    int chat_finish_seen;
};

/* *slot, malloc'd (and cleared) when NULL; NULL when out of memory. */
ah_error *ah__dec_err_slot(ah_error **slot);

/* ---- the helpers the formats decode with (decode_util.c, below the formats) ---- */

/* Set the sticky error (kind STREAM, or DECODE for a non-stream body), message prefixed
 * with the format, event type, number and byte offset. Returns st. */
ah_status ah__dec_fail(ah_decoder *d, ah_status st, const char *fmt, ...)
    AH__PRINTF(3, 4);

/* A tool name read with ah__jstr, checked for an embedded NUL: cJSON stops a string at
 * "\u0000", so "rec\u0000evil" would be the declared tool "rec". Such a name comes back
 * as its prefix + U+FFFD (a name no tool can have: declared names hold no NUL, and the
 * worker answers the call as an unknown tool); any other name as is. NULL stays NULL.
 * The answer lives until the next call. */
const char *ah__dec_name(ah_decoder *d, const char *name);
/* Open a block (fires block_start). */
ah_status ah__dec_open(ah_decoder *d, ah_block_kind kind, int64_t key, int64_t sub,
                       const char *id, const char *name, size_t *index);
/* Append content: text/reasoning text, or an argument fragment for a tool block (fires
 * delta when n > 0). */
ah_status ah__dec_content(ah_decoder *d, size_t i, const char *s, size_t n);
/* Close a block (fires block_end); invalid tool arguments become the sticky error. */
ah_status ah__dec_close(ah_decoder *d, size_t i);
/* Close every open block. */
ah_status ah__dec_close_all(ah_decoder *d);
/* Record a provider error object (any of its shapes: {type,message}, {code,message}). */
ah_status ah__dec_provider_error(ah_decoder *d, const cJSON *err_obj);

/* Small cJSON accessors: NULL / 0 when absent or of another type. */
const char *ah__jstr(const cJSON *o, const char *key);
int ah__jint(const cJSON *o, const char *key, int64_t *out);
const cJSON *ah__jobj(const cJSON *o, const char *key);
const cJSON *ah__jarr(const cJSON *o, const char *key);
/* A cJSON value as compact JSON into block field f (the rare copy: opaque blocks, a tool
 * input given whole, error objects). */
ah_status ah__tl_set_json(ah_timeline *tl, size_t i, ah__field f, const cJSON *v);

/* ---- the formats
 * --------------------------------------------------------------------------
 * Reached by the drivers only through each provider's ops table (provider_*.c). */

/* One parsed stream event; `type` is the payload's "type" (NULL for Chat chunks). */
ah_status ah__anthropic_event(ah_decoder *d, const cJSON *root, const char *type);
ah_status ah__openai_event(ah_decoder *d, const cJSON *root);
ah_status ah__responses_event(ah_decoder *d, const cJSON *root, const char *type);
/* The bodies the fast path (decode_fast.c) shares with the cJSON path: a
 * content_block_delta (delta NULL: its string field given as fs/fn), Chat content. */
ah_status ah__anthropic_delta(ah_decoder *d, int64_t idx, const char *dt,
                              const cJSON *delta, const char *fs, size_t fn);
ah_status ah__openai_content(ah_decoder *d, ah_block_kind kind, const char *s, size_t n);
/* What ah__responses_event does for a response.output_text.delta with these values
 * (seq -1: no sequence_number; item_id NULL: none). */
ah_status ah__responses_text_delta(ah_decoder *d, int64_t seq, int64_t oi, int64_t ci,
                                   const char *item_id, size_t idn, const char *s,
                                   size_t n);
/* The fast paths, one per format (each provider table's `fast` op): decode the few hot
 * event shapes (Anthropic text/thinking/input JSON deltas, Chat content chunks, Responses
 * output_text deltas) without building a cJSON tree. Return 1 when they took the event
 * (*st its status), 0 when the caller must parse it with cJSON: anything they do not
 * recognise byte for byte. tests/fuzz/fuzz_decode_fast.c checks that they decode exactly
 * like the cJSON path. */
int ah__fast_anthropic(ah_decoder *d, const char *data, size_t len, ah_status *st);
int ah__fast_chat(ah_decoder *d, const char *data, size_t len, ah_status *st);
int ah__fast_responses(ah_decoder *d, const char *data, size_t len, ah_status *st);
/* The decoder's provider's fast path, or 0 when it has none. */
int ah__fast_event(ah_decoder *d, const char *data, size_t len, ah_status *st);
/* Responses' closing events (output_text.done, content_part.done, output_item.done,
 * response.completed / incomplete / failed) repeat the whole answer. For an event of at
 * least d->skip_min bytes: the tree cJSON would build, minus the answer texts the decoder
 * provably does not read for this event and this timeline (they come out as ""), built
 * from a copy of the data without them; NULL when that does not apply (the caller parses
 * the data itself). */
cJSON *ah__fast_parse(ah_decoder *d, const char *data, size_t len);
/* Turn the fast path off (1) or on (0, the default) for one decoder: for the tests that
 * compare the two paths. */
void ah__decoder_set_slow(ah_decoder *d, int slow);
/* The size from which Responses events go through ah__fast_parse (default 64 KiB; tests
 * use 0 so that every event does). */
void ah__decoder_set_skip_min(ah_decoder *d, size_t n);

/* Gemini (decode_gemini.c): a chunk, the bytes after the last event, a body. */
ah_status ah__gemini_event(ah_decoder *d, const cJSON *root, const char *type);
ah_status ah__gemini_tail(ah_decoder *d, const char *bytes, size_t len);
ah_status ah__gemini_body(ah_decoder *d, const cJSON *root);
/* The string scanner the fast paths share: the first byte in [p, end) that is '"', '\\'
 * or a control byte (< 0x20), or end (decode_fast.c). */
const char *ah__scan_plain(const char *p, const char *end);
/* The four hex digits at p as *v (a \\u escape's); 0 if one is not a hex digit
 * (decode_fast.c). */
int ah__hex4(const char *p, unsigned *v);

/* ---- the non-delta events without cJSON (decode_tree.c)
 * A format's key filter: what its event handlers read, one list per object, ended by a
 * NULL name. TK_DEEP: the value is kept whole; TK_OBJ: kept, and if it is an object only
 * its members in `sub`; TK_EACH: kept, and if it is an array each object element only
 * with its members in `sub`. Members not listed are checked and left out. A filtered
 * object must only be looked up by key by the handlers (never walked or printed). */
enum { AH__TK_DEEP = 1, AH__TK_OBJ, AH__TK_EACH };
typedef struct ah__tree_key {
    const char *name;
    size_t len; /* strlen(name) */
    int kind;
    const struct ah__tree_key *sub;
} ah__tree_key;
/* One entry: AH__TK("usage", AH__TK_DEEP, NULL); the list ends with AH__TK_END. */
#define AH__TK(name, kind, sub) {name, sizeof(name) - 1, kind, sub}
#define AH__TK_END {NULL, 0, 0, NULL}
/* Where the tree lives: the caller's (a stack variable: one event's tree fits in `mem`
 * but for big ones, which get heap blocks). */
typedef struct ah__tree_arena {
    void *blocks; /* heap blocks, freed by ah__tree_arena_release */
    unsigned char *cur;
    size_t left;
    alignas(max_align_t) unsigned char mem[3072];
} ah__tree_arena;
void ah__tree_arena_init(ah__tree_arena *a);
void ah__tree_arena_release(ah__tree_arena *a); /* frees the tree; a is reusable */
/* The tree cJSON would build from data, without the members the provider's filter
 * (its `tree`) leaves out, in arena a: valid until a is released, never
 * cJSON_Delete'd. NULL when it is not certain to be cJSON's (the caller parses with
 * cJSON). */
cJSON *ah__tree_parse(ah_decoder *d, ah__tree_arena *a, const char *data, size_t len);
/* The same with another key filter (the proxy's opening event: core/proxy/splice.c);
 * typed: the root must have a "type" string other than "error", as for the formats whose
 * events name their type. */
cJSON *ah__tree_parse_keys(const ah__tree_key *keys, int typed, ah__tree_arena *a,
                          const char *data, size_t len);
/* Turn ah__tree_parse off (1) or on (0, the default) while the delta fast path stays as
 * set by ah__decoder_set_slow: for the tests of the one or the other. */
void ah__decoder_set_no_tree(ah_decoder *d, int off);
/* The key filters (beside each format's handlers). */
extern const ah__tree_key ah__tree_anthropic[];
extern const ah__tree_key ah__tree_chat[];
extern const ah__tree_key ah__tree_responses[];

/* The stream's end: applies the format's end rule (Chat: finish_reason seen). */
void ah__openai_end(ah_decoder *d);

/* Whole non-stream bodies. */
ah_status ah__anthropic_body(ah_decoder *d, const cJSON *root);
ah_status ah__openai_body(ah_decoder *d, const cJSON *root);
ah_status ah__responses_body(ah_decoder *d, const cJSON *root);

#endif
