/* proxy_internal.h - the proxy's pieces shared between its files, never installed.
 *
 *   server.c        libmicrohttpd on the loop (suspend / resume), routing, the upstream
 *                   calls, retries' and continuations' bookkeeping
 *   splice.c        the format-blind splicer: upstream events (decoder + timeline) in,
 *                   one response out through a format's output table; the continuation
 *                   request
 *   out_<name>.c    one per wire format: what the response's head is, how each block and
 *                   the end are written (through core/writer/), the in-band error
 *
 * Everything here runs on the loop thread (ah_proxy_get_stats excepted). Prefix
 * ah__px_. */
#ifndef AH_PROXY_INTERNAL_H
#define AH_PROXY_INTERNAL_H

#include "internal.h"
#include "overlap.h"
#include "writer/writer.h"

#include "agenthost/capabilities.h"
#include "agenthost/proxy.h"
#include "agenthost/sse.h"
#include "agenthost/timeline.h"
#include "agenthost/wire.h"

#include <cjson/cJSON.h>
#include <stddef.h>
#include <stdint.h>

/* One block of the spliced response, as the client sees it. */
typedef struct ah__px_block {
    ah__wr_kind kind;
    size_t index;  /* Anthropic index, Responses output_index, Chat tool-call index */
    char *id;      /* tool id / call id; Responses item id of text and reasoning */
    char *call_id; /* Responses function_call call_id */
    char *name;
    ah__wbuf text; /* text forwarded, thinking, arguments */
    ah__wbuf sig;  /* thinking signature */
    ah__wbuf enc;  /* redacted data / encrypted_content */
    ah__wbuf raw;  /* opaque block JSON */
    int open;      /* its start was written, its stop not yet */
} ah__px_block;

typedef struct ah__px_splice ah__px_splice;

/* A format's output side. */
typedef struct ah__px_out {
    const char *messages_key; /* where the conversation is: "messages" / "input" */
    /* The first event of an attempt: 1 when it is the format's opening event (its head
     * fields are taken from it when the response has not started), 0 to wait for one. */
    int (*head)(ah__px_splice *s, const ah_sse_event *ev, const cJSON *data);
    /* NULL, or what head reads as a key filter (decode_internal.h): the opening event is
     * then parsed into a filtered tree on the stack instead of by cJSON when it can be
     * (ah__tree_parse_keys; cJSON when that gives up); head_typed as its `typed`. head
     * must only look members up by key then, never walk or print them. */
    const struct ah__tree_key *head_keys;
    int head_typed;
    void (*start)(ah__px_splice *s);
    void (*open)(ah__px_splice *s, ah__px_block *b);
    void (*text)(ah__px_splice *s, ah__px_block *b, const char *t, size_t n);
    void (*close)(ah__px_splice *s, ah__px_block *b);
    /* A complete block written at once (held tool calls, reasoning). */
    void (*whole)(ah__px_splice *s, ah__px_block *b);
    void (*finish)(ah__px_splice *s);
    void (*fail)(ah__px_splice *s, const char *type, const char *message);
} ah__px_out;

extern const ah__px_out ah__px_out_anthropic, ah__px_out_openai, ah__px_out_responses;
const ah__px_out *ah__px_out_of(ah_wire wire);

/* What a timeline block of the current attempt became. */
enum { AH__PX_UNSEEN = -1, AH__PX_HELD = -2, AH__PX_DROPPED = -3 };

struct ah__px_splice {
    ah_wire wire;
    const ah__px_out *out;
    const cJSON *req; /* the client's request (borrowed) */
    /* NULL, or the client's request body (borrowed) when req is the filtered tree of
     * ah__px_request_parse: what a continuation re-parses whole */
    const char *req_body;
    size_t req_body_len;
    ah__wbuf o;       /* bytes for the client not yet handed over */

    /* the response's head, from the first attempt's opening event */
    char *id, *model, *service_tier, *fingerprint;
    long long created;
    cJSON *tmpl; /* Responses: the upstream's response object */
    int include_usage;
    ah__wbuf prefix; /* Chat: every chunk's prefix, built once */
    int started; /* the head events were written */
    int ended;   /* the terminal event was written */

    ah__px_block **blocks; /* each allocated alone: pointers to them stay valid */
    size_t n, cap;
    size_t next_index; /* Anthropic / Responses */
    size_t next_tool;  /* Chat tool-call index */
    size_t seq;        /* Responses sequence_number */
    int role_sent;     /* Chat */
    ah__px_block *open_text; /* a text block open on the client's side (stop deferred) */

    long long input_tokens; /* the first attempt's (-1 unknown) */
    long long output_tokens; /* every attempt's reported, summed */
    long long cache_read, cache_write;
    char *stop_reason;

    /* the current attempt */
    int attempt;        /* 1-based */
    int continuation;   /* it continues what was forwarded */
    ah_timeline *tl;
    ah_decoder *dec;
    ah_sse *sse;
    int *map;           /* timeline index -> block index or AH__PX_* */
    size_t map_cap;
    int holding;        /* a held block started: later blocks wait for the end */
    int first_event;    /* the attempt's first event was seen */
    size_t events;      /* events decoded in this attempt */
    int saw_text;       /* a text block of this attempt was routed */
    ah__overlap *ov;    /* trims the continuation's first text block */
    long ov_block;      /* its timeline index, -1 before it opens */
    int failed_nomem;
    uint64_t trimmed;   /* bytes trimmed, all attempts */
    uint64_t trimmed_attempt;
};

/* splice.c */
struct ah__tree_arena;
/* The client's request body as the proxy reads it: with *arena set, a tree of only the
 * members the proxy looks up ("model", "stream", "store", "background", "thinking".type,
 * "stream_options".include_usage), built in *arena (malloc'd) by the tree parser of
 * decode_tree.c, which accepts only what cJSON accepts and builds what cJSON would for
 * those members; it must only be looked up by key. Else (*arena NULL) cJSON's whole
 * tree, or NULL when the body is not JSON: the same answers either way. Free both with
 * ah__px_request_free. */
cJSON *ah__px_request_parse(const char *body, size_t len, struct ah__tree_arena **arena);
void ah__px_request_free(cJSON *req, struct ah__tree_arena *arena);
ah_status ah__px_splice_init(ah__px_splice *s, ah_wire wire, const cJSON *req);
void ah__px_splice_clear(ah__px_splice *s);
/* A new upstream attempt (the first, or a continuation of what was forwarded). */
ah_status ah__px_splice_attempt(ah__px_splice *s, int continuation);
/* Bytes of the attempt's stream. AH_OK, or an error that makes it a cut (malformed). */
ah_status ah__px_splice_feed(ah__px_splice *s, const char *buf, size_t len, ah_error *err);
/* The attempt's stream ended cleanly at the HTTP level: AH_OK when the format's end
 * arrived, else a stream error in *err. */
ah_status ah__px_splice_eof(ah__px_splice *s, ah_error *err);
int ah__px_splice_ended(const ah__px_splice *s); /* the format's final event arrived */
/* The attempt completed: write the held blocks and the end. */
void ah__px_splice_finish(ah__px_splice *s);
/* The attempt broke: drop what was held, count its usage. */
void ah__px_splice_break(ah__px_splice *s);
/* Past the last continuation: the format's in-band error, the stream ends. */
void ah__px_splice_fail(ah__px_splice *s, const ah_error *err);
/* Anything forwarded that a continuation must continue from? */
int ah__px_splice_has_partial(const ah__px_splice *s);
/* The provider's own error arrived in the current attempt's stream (an overload seen
 * through a 200)? */
int ah__px_splice_provider_error(const ah__px_splice *s);
/* The next request's body: the client's request with the forwarded blocks as a partial
 * assistant message (mode PREFILL), and the prompt after it (PROMPT). malloc'd. */
ah_status ah__px_continuation_body(const ah__px_splice *s, ah_cont_mode mode,
                                   const char *prompt, char **out, size_t *len);

/* helpers for the out_ files */
void ah__px_flush_text(ah__px_splice *s); /* write the deferred stop of the open text */
char *ah__px_strdup(const char *s);

#endif
