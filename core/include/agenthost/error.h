/* agenthost/error.h - the classified error record (SPEC §1).
 *
 * Every failure the core reports — transport, HTTP status, stream, decode, cancellation,
 * budget, a tool's own failure, rejected structured output — is one ah_error value:
 * plain data with fixed-size buffers, no ownership, safe to copy with '='.
 * Its message is always safe to show: never an API key, an Authorization / x-api-key
 * value or a request body (redaction is applied when the record is built).
 */
#ifndef AGENTHOST_ERROR_H
#define AGENTHOST_ERROR_H

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
    X(OUTPUT, "output")

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
    X(BODY_TEXT, "body")

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
} ah_error;

/* One response header, borrowed. Names compare case-insensitively. */
typedef struct ah_header {
    const char *name;
    const char *value;
} ah_header;

/* Reset to "no error": kind NONE, status 0, retry_after_ms -1, should_retry -1. */
void ah_error_clear(ah_error *e);

const char *ah_error_kind_name(ah_error_kind kind);          /* "unknown" out of range */
/* Returns the kind, or -1 for an unknown name. */
int ah_error_kind_from_name(const char *name);
const char *ah_hint_source_name(ah_hint_source src);

/* The default retry table of SPEC §1: HTTP 408, 425, 429, 500, 502, 503, 504, 529;
 * connect; timeout. An explicit x-should-retry verdict overrides the table for connect,
 * timeout and http errors. Everything else — other statuses, stream (it goes to
 * continuation, never a plain resend), decode, cancelled, budget, permanent, output and
 * unknown kinds — is not retryable. A transient error (a tool's) is retryable. */
int ah_error_is_retryable(const ah_error *e);

#ifdef __cplusplus
}
#endif
#endif
