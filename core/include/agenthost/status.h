/* agenthost/status.h - the one status enum, generated with its names and messages. */
#ifndef AGENTHOST_STATUS_H
#define AGENTHOST_STATUS_H

#ifdef __cplusplus
extern "C" {
#endif

/* The library version, for compile-time checks (#if AH_VERSION_NUM >= 0x000200) and, at
 * run time, ah_version() / ah_version_num() for the library actually loaded. */
#define AH_VERSION_MAJOR 0
#define AH_VERSION_MINOR 1
#define AH_VERSION_PATCH 0
#define AH_VERSION_STRING "0.1.0"
/* 0xMMmmpp: major, minor and patch in one comparable integer. */
#define AH_VERSION_NUM ((AH_VERSION_MAJOR << 16) | (AH_VERSION_MINOR << 8) | AH_VERSION_PATCH)

/* X(name, "short_name", "message"). Each status means one thing:
 *   TRANSPORT  the machinery that moves bytes failed (the loop's curl multi handle, a
 *              transport that cannot start a request);
 *   PROVIDER   the provider answered, with an error (its error object in a body or in
 *              the stream; the ah_error says which, with provider_type);
 *   TRUNCATED  a stream ended before its format's end marker.
 * How a failure is classified for retrying is the ah_error's kind (error.h), never the
 * status. New statuses are appended, so the numbers of the old ones stay. */
#define AH_STATUS_MAP(X)                                                                  \
    X(OK, "ok", "success")                                                                \
    X(ERR_NOMEM, "nomem", "out of memory")                                                \
    X(ERR_INVALID, "invalid", "invalid argument")                                         \
    X(ERR_TOO_LARGE, "too_large", "input exceeds a size limit")                           \
    X(ERR_PARSE, "parse", "malformed input")                                              \
    X(ERR_STATE, "state", "operation not valid in the current state")                     \
    X(ERR_NOT_FOUND, "not_found", "not found")                                            \
    X(ERR_IO, "io", "input/output error")                                                 \
    X(ERR_CANCELLED, "cancelled", "cancelled")                                            \
    X(ERR_TRANSPORT, "transport", "transport failure")                                    \
    X(ERR_INTERNAL, "internal", "internal error")                                         \
    X(ERR_PROVIDER, "provider", "the provider answered with an error")                    \
    X(ERR_TRUNCATED, "truncated", "the stream ended before its end marker")

typedef enum ah_status {
#define AH__STATUS_ENUM(name, s, m) AH_##name,
    AH_STATUS_MAP(AH__STATUS_ENUM)
#undef AH__STATUS_ENUM
        AH_STATUS_COUNT_
} ah_status;

/* Short stable name ("ok", "nomem", ...). Never NULL; "unknown" out of range. */
const char *ah_status_name(ah_status st);
/* Human-readable message. Never NULL. */
const char *ah_status_message(ah_status st);
/* Library version, e.g. "0.1.0". */
const char *ah_version(void);
int ah_version_num(void); /* AH_VERSION_NUM of the library loaded */

#ifdef __cplusplus
}
#endif
#endif
