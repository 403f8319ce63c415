/* agenthost/sse.h - incremental Server-Sent Events parser (WHATWG event-stream rules).
 *
 * No I/O: feed bytes in any split, pull dispatched events out. CR, LF and CRLF line ends
 * (a CRLF split across two feeds is one line end); a leading UTF-8 BOM is skipped; lines
 * starting with ':' are comments; fields event/data/id/retry; multi-line data joined with
 * '\n'; a block with an empty data buffer is not dispatched; a final block with no blank
 * line after it is never dispatched. Hard caps on line and event size: exceeding one is a
 * sticky AH_ERR_TOO_LARGE, never unbounded growth.
 */
#ifndef AGENTHOST_SSE_H
#define AGENTHOST_SSE_H

#include "agenthost/export.h"

#include "agenthost/status.h"

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct ah_sse ah_sse;

typedef struct ah_sse_limits {
    size_t max_line;  /* longest accepted line in bytes, 0 = default (1 MiB) */
    size_t max_event; /* largest data buffer of one event, 0 = default (8 MiB) */
} ah_sse_limits;

/* One dispatched event. All pointers are borrowed: valid until the next call to
 * ah_sse_next(), ah_sse_feed(), ah_sse_reset() or ah_sse_free() on the same parser.
 * Strings are NUL-terminated as well as length-counted. */
typedef struct ah_sse_event {
    const char *type; /* the event: field, or "message" when the block had none */
    size_t type_len;
    const char *data; /* data lines joined by '\n' (no trailing '\n') */
    size_t data_len;
    const char *id; /* the last event ID seen so far (persists across events), "" if none */
    size_t id_len;
    int64_t retry_ms; /* the retry: value in this event's block, or -1 */
} ah_sse_event;

/* Returns NULL on allocation failure. limits may be NULL (defaults). */
AH_EXPORT ah_sse *ah_sse_new(const ah_sse_limits *limits);
AH_EXPORT void ah_sse_free(ah_sse *p);

/* Append bytes. Copies what it needs; buf is borrowed only for the call. Returns AH_OK,
 * AH_ERR_NOMEM, or the sticky error if the parser already failed. */
AH_EXPORT ah_status ah_sse_feed(ah_sse *p, const void *buf, size_t len);

/* Pull the next complete event: returns 1 and fills *ev, 0 when more bytes are needed,
 * -1 on a (sticky) error; see ah_sse_status() / ah_sse_errmsg(). */
AH_EXPORT int ah_sse_next(ah_sse *p, ah_sse_event *ev);

/* The sticky status (AH_OK while healthy) and a message naming what went wrong and where
 * (byte offset in the stream). */
AH_EXPORT ah_status ah_sse_status(const ah_sse *p);
AH_EXPORT const char *ah_sse_errmsg(const ah_sse *p);

/* Total bytes fed so far. */
AH_EXPORT uint64_t ah_sse_bytes_fed(const ah_sse *p);
/* Stream offset just past the last line ah_sse_next() consumed: after it returned an
 * event, where that event ended. */
AH_EXPORT uint64_t ah_sse_bytes_consumed(const ah_sse *p);

/* Stream-level state that also changes in blocks that are never dispatched (for example a
 * lone "retry: 3000" or "id: 7" block), which a reconnecting client needs:
 * the reconnection time from the last valid retry: field, or -1 if none was seen; and the
 * last event ID buffer ("" if none). The string is borrowed like event fields. */
AH_EXPORT int64_t ah_sse_retry_ms(const ah_sse *p);
AH_EXPORT const char *ah_sse_last_id(const ah_sse *p);

/* Forget all buffered state and errors (keeps the limits). */
AH_EXPORT void ah_sse_reset(ah_sse *p);

#ifdef __cplusplus
}
#endif
#endif
