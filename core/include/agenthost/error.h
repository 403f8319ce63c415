/* agenthost/error.h - the classified error record (docs/errors.md).
 *
 * Every failure the core reports — transport, HTTP status, stream, decode, cancellation,
 * budget, a tool's own failure, rejected structured output — is one ah_error value:
 * plain data with fixed-size buffers, no ownership, safe to copy with '='.
 * Its message is always safe to show: never an API key, an Authorization / x-api-key
 * value or a request body (redaction is applied when the record is built).
 *
 * Contract for every error-building function below: a REQUEST body is never passed to any
 * of them, not even to be redacted. Redaction is a second line of defence for what a
 * response may echo back (headers, URLs, keys); it is not a licence to hand request data
 * to an error record. Only response status, response headers and the response body go in.
 *
 * All functions here are pure (no I/O, no globals, no clock reads: the wall time is a
 * parameter), reentrant, and never allocate except ah_error_from_http / ah_error_set,
 * which may use a temporary heap buffer and fall back to a shorter message without it.
 * See docs/errors.md.
 */
#ifndef AGENTHOST_ERROR_H
#define AGENTHOST_ERROR_H

#include "agenthost/export.h"

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* X(NAME, "json_name") */
#define AH_ERROR_KIND_MAP(X)                                                              \
    X(NONE, "none")                                                                       \
    X(CONNECT, "connect")                                                                 \
    X(TIMEOUT, "timeout")                                                                 \
    X(HTTP, "http")                                                                       \
    X(STREAM, "stream")                                                                   \
    X(DECODE, "decode")                                                                   \
    X(CANCELLED, "cancelled")                                                             \
    X(BUDGET, "budget")                                                                   \
    X(TRANSIENT, "transient")                                                             \
    X(PERMANENT, "permanent")                                                             \
    X(OUTPUT, "output")                                                                   \
    X(IDEMPOTENCY_MISMATCH, "idempotency_mismatch")                                       \
    X(LEDGER, "ledger")                                                                   \
    /* a tool call reached its server but its answer was lost: the effect may or may    \
     * not have happened (docs/mcp.md, "The failure rule") */                           \
    X(OUTCOME_UNKNOWN, "outcome_unknown")                                                 \
    /* an MCP server's session ended twice in a row before the call was accepted */      \
    X(MCP_SESSION, "mcp_session")                                                         \
    /* a 429 that says a spend limit was reached (Anthropic enforced_spend_limit_reached, \
     * OpenAI organization/project_spend_limit_exceeded): never retried */              \
    X(SPEND_LIMIT, "spend_limit")                                                         \
    /* the model refused (stop reason refusal, content_filter); category says why */    \
    X(REFUSED, "refused")                                                                 \
    /* the request is longer than the model's context window (a 400, or the stop reason \
     * model_context_window_exceeded): never retried */                                 \
    X(CONTEXT_EXCEEDED, "context_exceeded")

typedef enum ah_error_kind {
#define AH__KIND_ENUM(name, s) AH_EK_##name,
    AH_ERROR_KIND_MAP(AH__KIND_ENUM)
#undef AH__KIND_ENUM
        AH_EK_COUNT_
} ah_error_kind;

/* Where retry_after_ms came from. X(NAME, "json_name") */
#define AH_HINT_SOURCE_MAP(X)                                                             \
    X(NONE, "none")                                                                       \
    X(RETRY_AFTER_MS, "retry-after-ms")                                                   \
    X(RETRY_AFTER_SECONDS, "retry-after")                                                 \
    X(RETRY_AFTER_DATE, "retry-after-date")                                               \
    X(RATELIMIT_RESET, "ratelimit-reset")                                                 \
    X(BODY_TEXT, "body")                                                                  \
    X(RETRY_INFO, "retry-info")

typedef enum ah_hint_source {
#define AH__HINT_ENUM(name, s) AH_HINT_##name,
    AH_HINT_SOURCE_MAP(AH__HINT_ENUM)
#undef AH__HINT_ENUM
        AH_HINT_COUNT_
} ah_hint_source;

enum { AH_ERROR_PROVIDER_TYPE_MAX = 64, AH_ERROR_MESSAGE_MAX = 512 };

typedef struct ah_error {
    ah_error_kind kind;
    int status;                    /* HTTP status, or 0 */
    int64_t retry_after_ms;        /* normalised server hint, or -1 when absent */
    ah_hint_source retry_after_source;
    int should_retry;              /* x-should-retry: -1 absent, 0 false, 1 true */
    char provider_type[AH_ERROR_PROVIDER_TYPE_MAX]; /* e.g. "overloaded_error", or "" */
    char message[AH_ERROR_MESSAGE_MAX];             /* safe to show, redacted */
    /* refused: the provider's refusal category (Anthropic stop_details.category, e.g.
     * "cyber"), or "" when it named none */
    char category[AH_ERROR_PROVIDER_TYPE_MAX];
} ah_error;

/* One response header, borrowed. Names compare case-insensitively. */
typedef struct ah_header {
    const char *name;
    const char *value;
} ah_header;

/* Reset to "no error": kind NONE, status 0, retry_after_ms -1, should_retry -1. */
AH_EXPORT void ah_error_clear(ah_error *e);

AH_EXPORT const char *ah_error_kind_name(ah_error_kind kind);          /* "unknown" out of range */
/* Returns the kind, or -1 for an unknown name. */
AH_EXPORT int ah_error_kind_from_name(const char *name);
AH_EXPORT const char *ah_hint_source_name(ah_hint_source src);

/* The default retry table of docs/errors.md: HTTP 408, 425, 429, 500, 502, 503, 504, 529;
 * connect; timeout. An explicit x-should-retry verdict overrides the table for connect,
 * timeout and http errors. Everything else — other statuses, stream (it goes to
 * continuation, never a plain resend), decode, cancelled, budget, permanent, output and
 * unknown kinds — is not retryable. A transient error (a tool's) is retryable. */
AH_EXPORT int ah_error_is_retryable(const ah_error *e);

/* ---- building a record -------------------------------------------------------------- */

/* Reset e, then set kind, status and a printf-style message. The formatted text is
 * redacted with the built-in patterns (see ah_redact), made single-line valid UTF-8 and
 * truncated to fit (ending in "..."). retry_after_ms / should_retry / provider_type are
 * reset; fill them afterwards. */
AH_EXPORT void ah_error_set(ah_error *e, ah_error_kind kind, int status, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 4, 5)))
#endif
    ;

/* Set provider_type (e.g. from an in-stream error event). Characters outside
 * [A-Za-z0-9_.:-] become '_', the result is truncated to fit and redacted. NULL or ""
 * clears it. */
AH_EXPORT void ah_error_set_provider_type(ah_error *e, const char *type);

/* Re-redact e->message and e->provider_type with a caller's secrets (e.g. the API key)
 * in addition to the built-in patterns. secrets: NULL-terminated list, may be NULL. */
AH_EXPORT void ah_error_redact(ah_error *e, const char *const *secrets);

/* Build an HTTP error from a non-2xx response: kind http, the status, the headers'
 * hints (ah_error_apply_headers), provider_type and the provider's message from a JSON
 * error body (Anthropic {"type":"error","error":{"type":..,"message":..}}, OpenAI
 * {"error":{"message":..,"type":..,"code":..}}; any other body is tolerated and shown
 * as text), and — only when no header gave a hint — a body text hint such as
 * "Please try again in 17.2s" (source AH_HINT_BODY_TEXT); a google.rpc.Status body
 * (Gemini) whose details hold a google.rpc.RetryInfo gives its retryDelay ("17s") first
 * (source AH_HINT_RETRY_INFO).
 * The message reads "HTTP 529 overloaded_error: Overloaded" (or "HTTP 503 Service
 * Unavailable" without a body), is redacted with the built-in patterns plus `secrets`
 * (NULL-terminated, may be NULL) BEFORE it is truncated, and is single-line UTF-8.
 * h may be NULL when n is 0; body may be NULL (body_len ignored) or not NUL-terminated.
 * now_wall_ms: wall-clock ms since the Unix epoch, for HTTP-date and RFC 3339 hints. */
AH_EXPORT void ah_error_from_http(ah_error *e, int status, const ah_header *h, size_t n,
                                  const char *body, size_t body_len, int64_t now_wall_ms,
                                  const char *const *secrets);

/* ---- retry hints -------------------------------------------------------------------- */

/* The largest hint any parser returns: 2^31 seconds, the value RFC 9111 §1.2.2 says to
 * use for a delta-seconds too large to represent. Every hint is clamped to it, so
 * arithmetic on hints never overflows int64. */
#define AH_RETRY_AFTER_MAX_MS ((int64_t)2147483648 * 1000)

/* Parse an RFC 9110 Retry-After value into milliseconds from now_wall_ms.
 * Accepts delta-seconds ("120"; a fractional value such as "1.5" is accepted as a
 * lenient extension and rounded UP to the next millisecond) and HTTP-date in all three
 * forms recipients must accept: IMF-fixdate "Sun, 06 Nov 1994 08:49:37 GMT", rfc850
 * "Sunday, 06-Nov-94 08:49:37 GMT" (two-digit year: more than 50 years ahead means the
 * previous century) and asctime "Sun Nov  6 08:49:37 1994". Surrounding spaces, tabs,
 * CR and LF are ignored; names are matched case-insensitively; the weekday must be a
 * weekday name but is not checked against the date.
 * Returns -1 for NULL, empty, negative ("-5"), signed ("+5"), exponent, list or any
 * trailing garbage. A date in the past gives 0. Values are clamped to
 * AH_RETRY_AFTER_MAX_MS. */
AH_EXPORT int64_t ah_retry_after_parse(const char *value, int64_t now_wall_ms);

/* Fill e->retry_after_ms and e->retry_after_source from response headers, by precedence:
 *   1. retry-after-ms (decimal milliseconds, fraction rounded up),
 *   2. Retry-After (ah_retry_after_parse; source retry-after or retry-after-date),
 *   3. only when e->status == 429: the rate-limit reset headers
 *      anthropic-ratelimit-{requests,tokens,input-tokens,output-tokens}-reset (RFC 3339
 *      timestamps) and x-ratelimit-reset-{requests,tokens} (durations "1s", "6m0s",
 *      "20ms", "1h2m3.5s"; a bare number is seconds). A reset whose limit still reports
 *      capacity (its *-remaining header parses as > 0) is not the one blocking us and is
 *      skipped; of the rest, the LATEST reset is used, because a retry only succeeds once
 *      every exhausted limit has refilled. If every limit reports capacity (e.g. one
 *      large request exceeds the tokens left), the latest of all resets is used.
 * A malformed value is ignored and the next source is tried; the first valid header of a
 * name wins. When no hint is found the two fields are left unchanged. An instant (an
 * HTTP-date, an RFC 3339 reset) is measured from now_wall_ms, unless the response's Date
 * header is more than 2 s from it (a skewed local clock): then from the server's Date.
 * Also x-should-retry: "true"/"false" (case-insensitive) sets e->should_retry to 1/0;
 * any other value is ignored. Header names compare case-insensitively; h may be NULL
 * when n is 0; entries with a NULL name or value are skipped. */
AH_EXPORT void ah_error_apply_headers(ah_error *e, const ah_header *h, size_t n, int64_t now_wall_ms);

/* ---- redaction ---------------------------------------------------------------------- */

/* The text that replaces a secret. */
#define AH_REDACTED "[REDACTED]"

/* Redact the NUL-terminated string in buf (capacity `size` bytes) in place, in one
 * left-to-right pass (a mask is never scanned again):
 *   - every occurrence of each string of `secrets` (NULL-terminated list, may be NULL;
 *     entries shorter than 4 bytes are ignored; the longest match wins);
 *   - the value after a credential name followed by ':' or '=' (names case-insensitive,
 *     optional JSON quotes around name and value): "Authorization", "x-api-key",
 *     "api-key", "api_key", "apikey", "access_token" with either separator, and URL
 *     query parameters "key=" and "token=" at a word boundary. A quoted value runs to its
 *     closing quote; an unquoted value after ':' runs to the end of the line (header
 *     style); after '=' to '&', '#', whitespace, a quote or the end (query style);
 *   - "Bearer <token>";
 *   - key-shaped tokens: "sk-" plus at least 8 of [A-Za-z0-9_-] (covers sk-ant-...,
 *     sk-proj-...), not preceded by a letter or digit.
 * A masked value becomes AH_REDACTED; when that would not fit in `size`, it becomes the
 * same number of '*' instead, so text is never dropped and buf never overflows.
 * Returns the number of values masked. buf NULL or size 0: returns 0. */
AH_EXPORT size_t ah_redact(char *buf, size_t size, const char *const *secrets);

#ifdef __cplusplus
}
#endif
#endif
