/* provider.h - one ops table per wire format, and the registry of them (never installed).
 *
 * Everything the core knows about one provider's wire format is reached through its
 * ah__provider: names, request path and default URL, request headers, the request
 * encoder, the stream-event and body decoders, the stream's end rule, background
 * (re-attach / cancel) URLs and the continuation capability rows. The drivers (encode.c,
 * decode.c, wire.c, capabilities.c, the Lua client) look the table up by ah_wire and
 * never branch on which format it is.
 *
 * Adding a provider (docs/providers-encoding.md, "Adding a provider"): write
 * core/provider_<name>.c defining `const ah__provider ah__provider_<NAME>` (its codec may
 * be split into encode_<name>.c / decode_<name>.c like the three existing ones), and add
 * its line to AH_WIRE_MAP in agenthost/wire.h: that line is the registry entry (the
 * ah_wire value, the public name, and the pointer in ah__providers[]).
 */
#ifndef AH_PROVIDER_H
#define AH_PROVIDER_H

#include "internal.h"

#include "agenthost/error.h"
#include "agenthost/status.h"
#include "agenthost/timeline.h"
#include "agenthost/wire.h"

#include <cjson/cJSON.h>

#include <stdint.h>

typedef struct ah__enc ah__enc; /* encode_internal.h */

/* One row of a provider's continuation capability table: the first row whose `when`
 * holds for (model, thinking) decides whether a trailing partial assistant message is
 * continued (prefill 1) or answered after (prefill 0). A table ends with a row whose
 * `when` is NULL. */
typedef struct ah__cap_row {
    int (*when)(const char *model, int thinking);
    int prefill;
    const char *rule;
} ah__cap_row;

typedef struct ah__provider {
    /* names (the same strings as the provider's AH_WIRE_MAP line: test_wire_edges checks) */
    const char *name;     /* "anthropic": ah_wire_name, the Lua client's `provider` */
    /* default request path, "/v1/messages"; "{model}" in it is replaced by the client's
     * model id, percent-encoded (Gemini: "/v1beta/models/{model}:streamGenerateContent") */
    const char *path;
    const char *query;    /* NULL, or a query every request carries ("alt=sse") */
    const char *base_url; /* the public API, "https://api.anthropic.com" */
    /* the environment variable the provider's SDKs read the key from, or NULL */
    const char *key_env;  /* "ANTHROPIC_API_KEY" */

    /* ---- the request */
    int needs_max_tokens; /* opts.max_tokens 0 is an error (Anthropic requires it) */
    /* the API key: header `key_header` with value key_prefix + key */
    const char *key_header; /* "x-api-key", "Authorization" */
    const char *key_prefix; /* "", "Bearer " */
    /* up to two fixed headers sent with every request ({NULL, NULL} = none) */
    ah_header fixed_headers[2];
    /* Add the body's members to root (the options were validated by encode.c). */
    ah_status (*encode)(ah__enc *e, cJSON *root);

    /* ---- the stream */
    /* NULL: every event's data carries a "type" string (its name in messages and the
     * `type` handed to event); else every event is of this type (Chat chunks) and
     * event gets type NULL. */
    const char *event_type;
    ah_status (*event)(ah_decoder *d, const cJSON *root, const char *type);
    /* NULL, or the format's fast path, tried first on every event's data: 1 when it
     * took the event (*st its status), 0 to go on with parse/cJSON and event. It must
     * decode exactly like the cJSON path (decode_fast.c, fuzz_decode_fast). */
    int (*fast)(ah_decoder *d, const char *data, size_t len, ah_status *st);
    /* NULL, or the format's own parser for an event's data, tried before cJSON (which
     * parses the data when this returns NULL): a parser that builds the tree without
     * what the decoder will not read (Responses' closing events repeat the answer). */
    cJSON *(*parse)(ah_decoder *d, const char *data, size_t len);
    /* NULL, or the format's end rule, run at "[DONE]" and at finish (Chat: a
     * finish_reason seen finishes the timeline). */
    void (*end)(ah_decoder *d);
    /* 1: the stream has ended only at "[DONE]" (Chat sends usage after the finish
     * chunk); 0: also at the event that finished the timeline. */
    int ends_at_done;
    const char *end_marker; /* for "stream ended before ..." messages */
    /* NULL, or the format's reader of what the stream held after its last event when it
     * ended unfinished: the bytes that were no SSE event (Gemini writes a mid-stream
     * error as raw JSON lines after its events), at most 64 KiB; run by
     * ah_decoder_finish before the verdict, it may record the provider's error. */
    ah_status (*tail)(ah_decoder *d, const char *bytes, size_t len);

    /* ---- a non-stream body */
    ah_status (*body)(ah_decoder *d, const cJSON *root);

    /* ---- background responses (NULL when the format has none): malloc'd URLs, see
     * ah_wire_reattach_url / ah_wire_cancel_url; arguments already checked non-empty. */
    char *(*reattach_url)(const char *request_url, const char *id, int64_t after);
    char *(*cancel_url)(const char *request_url, const char *id);

    /* ---- continuation (capabilities.c) */
    const ah__cap_row *caps;
    /* phrases of the HTTP 400 by which the provider refuses a trailing assistant message
     * (ah_error_is_prefill_refusal reads every table's; NULL-terminated, may be empty) */
    const char *prefill_refusal[3];
} ah__provider;

/* The registry: one ops pointer per AH_WIRE_MAP line, indexed by ah_wire. */
#define AH__PROVIDER_DECL(N, s, path) extern const ah__provider ah__provider_##N;
AH_WIRE_MAP(AH__PROVIDER_DECL)
#undef AH__PROVIDER_DECL

/* The table of wire format w, or NULL out of range. */
const ah__provider *ah__provider_of(ah_wire w);

/* request_url with "/" + id percent-encoded + tail appended to its path and `query`
 * (NULL = none) to its query, so a request URL that carries a query keeps it last;
 * malloc'd, NULL on allocation failure (wire.c). */
char *ah__response_url(const char *request_url, const char *id, const char *tail,
                       const char *query);

/* Capability rows (capabilities.c), reached through each provider's `caps`. */
extern const ah__cap_row ah__caps_anthropic[];
extern const ah__cap_row ah__caps_chat[];
extern const ah__cap_row ah__caps_responses[];

#endif
