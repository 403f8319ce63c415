/* agenthost/transport.h - one HTTP attempt, as an ops table (docs/errors.md).
 *
 * A transport starts one HTTP request on a loop and reports, in this order: the response
 * head (status + headers, delivered when the head is complete and BEFORE any body byte),
 * zero or more body chunks, then exactly one completion with a classified result. It
 * never retries: retrying is ah_call's job, and only ah_call's.
 *
 * libcurl is the built-in transport (ah_transport_curl()). Embedders may supply another
 * HTTP stack, and tests supply a scripted fake, through the same table.
 *
 * Contract for implementations:
 *   - start() never calls a sink function synchronously; deliveries happen during later
 *     ah_loop_run_once() steps on the loop's thread.
 *   - After start() succeeded, exactly one of these ends the attempt: on_done() (then the
 *     attempt handle is gone), or abort() by the owner (then no callback follows). abort()
 *     is never called from inside a sink callback of the same attempt: a sink that wants
 *     to stop returns nonzero instead, and the attempt completes with kind `cancelled`.
 *   - The request and everything it points to are borrowed until the attempt ends.
 */
#ifndef AGENTHOST_TRANSPORT_H
#define AGENTHOST_TRANSPORT_H

#include "agenthost/export.h"

#include "agenthost/error.h"
#include "agenthost/loop.h"
#include "agenthost/status.h"

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct ah_http_request {
    const char *method; /* "POST" when NULL */
    const char *url;
    const ah_header *headers;
    size_t n_headers;
    const char *body;
    size_t body_len;
    /* TLS trust: a PEM bundle of CA certificates and/or a directory of them (OpenSSL's
     * hashed layout), replacing the system's default store; NULL = the default. */
    const char *ca_file;
    const char *ca_path;
} ah_http_request;

/* What the transport reports to the attempt's owner. Everything passed is borrowed for the
 * duration of the call. on_head and on_body return 0 to continue or nonzero to abort the
 * attempt (it then completes with kind `cancelled`). */
typedef struct ah_transport_sink {
    int (*on_head)(void *ud, int status, const ah_header *headers, size_t n);
    int (*on_body)(void *ud, const char *buf, size_t len);
    /* err->kind is AH_EK_NONE when the response was received completely (any status).
     * Otherwise: connect (refused, DNS, TLS, reset before a response), timeout, stream
     * (broken after the head was delivered) or cancelled. Messages are safe to show. */
    void (*on_done)(void *ud, const ah_error *err);
    /* Optional (NULL: not told): the request is about to leave on a connection (called
     * at most once, before on_head). A failure before it is certain never to have
     * reached the server; a transport that cannot tell never calls it, and its caller
     * must then treat every failure before the head as possibly sent (agenthost/mcp.h
     * uses it to tell "never sent" from "outcome unknown"). */
    void (*on_sent)(void *ud);
} ah_transport_sink;

typedef struct ah_transport_ops {
    const char *name;
    /* Start one attempt. On AH_OK *attempt is the handle until on_done/abort. On failure
     * (AH_ERR_NOMEM, AH_ERR_INVALID ...) err says why and no callback will follow. */
    ah_status (*start)(void *self, ah_loop *loop, const ah_http_request *req,
                       const ah_transport_sink *sink, void *sink_ud, void **attempt,
                       ah_error *err);
    /* Abandon an attempt: the request is torn down at once (no dangling transfer), no
     * callback follows. */
    void (*abort)(void *self, void *attempt);
} ah_transport_ops;

typedef struct ah_transport {
    const ah_transport_ops *ops;
    void *self;
} ah_transport;

/* The libcurl transport: one easy handle per attempt on the loop's multi handle; TLS
 * verification on (a certificate that does not verify is an error with should_retry 0:
 * retrying cannot fix it), HTTP/2 over TLS, no signals, no redirects, every content
 * encoding libcurl decodes offered and decoded (the sink sees the identity bytes), no
 * 100-continue. Static storage; never free it. */
AH_EXPORT const ah_transport *ah_transport_curl(void);

#ifdef __cplusplus
}
#endif
#endif
