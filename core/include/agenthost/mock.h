/* agenthost/mock.h - the built-in mock LLM provider (docs/mock.md).
 *
 * An HTTP server on 127.0.0.1 that speaks the three wire formats (Anthropic Messages,
 * OpenAI Chat Completions, OpenAI Responses; streaming and not) with a deterministic
 * model, and injects faults from a plan: one step per request, in order. It records every
 * request (secrets redacted) so tests can inspect what a client sent. It runs on its own
 * threads (one per connection), so a client in the calling thread can talk to it.
 *
 * The plan format, the model's behaviour and the CLI are described in docs/mock.md.
 * Every function here is thread-safe unless its comment says otherwise.
 */
#ifndef AGENTHOST_MOCK_H
#define AGENTHOST_MOCK_H

#include "agenthost/export.h"

#include <stddef.h>

#include "agenthost/error.h"
#include "agenthost/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct ah_mock ah_mock;

typedef struct ah_mock_config {
    int port;              /* 0 = any free port */
    const char *plan_json; /* the fault plan as JSON text, or NULL */
    const char *plan_path; /* or a file holding it (used when plan_json is NULL) */
    /* Model defaults, overridable per plan step (see docs/mock.md). 0 / NULL = unset. */
    const char *text;   /* fixed reply text instead of the model's */
    size_t text_deltas; /* stream the text in exactly this many deltas */
    size_t delta_bytes; /* or split it every this many bytes (UTF-8 safe) */
    /* HTTPS: PEM files of the server's certificate (chain) and its private key; the URL
     * is then https://127.0.0.1:PORT. Both or neither. */
    const char *tls_cert;
    const char *tls_key;
} ah_mock_config;

/* Zero the config: port 0, no plan, model defaults. */
AH_EXPORT void ah_mock_config_init(ah_mock_config *cfg);

/* Start a mock on 127.0.0.1. cfg may be NULL (defaults). AH_OK with *out set; on failure
 * *out = NULL, a message in err and AH_ERR_INVALID (a bad plan names its step and field:
 * "plan step 3: unknown field 'cut_after_event'"), AH_ERR_IO (a plan file that cannot be
 * read; a port in use, named) or AH_ERR_NOMEM. err may be NULL. */
AH_EXPORT ah_status ah_mock_new(const ah_mock_config *cfg, ah_mock **out, char *err, size_t errsize);

/* Stop serving, wake every delayed or stalled connection, join all threads, free
 * everything. Returns promptly even while a connection is stalled. NULL is a no-op.
 * Not to be called concurrently with other calls on the same mock. */
AH_EXPORT void ah_mock_free(ah_mock *m);

/* "http://127.0.0.1:PORT" (https with tls_cert), owned by the mock. */
AH_EXPORT const char *ah_mock_url(const ah_mock *m);
AH_EXPORT int ah_mock_port(const ah_mock *m);

/* Check a plan without starting anything. AH_OK, or AH_ERR_PARSE with the message in err
 * (the same message ah_mock_new would give). */
AH_EXPORT ah_status ah_mock_plan_validate(const char *plan_json, char *err, size_t errsize);

/* Replace the plan of a running mock and restart at its first step. NULL = no plan
 * (every request ok). On error the old plan stays in force. Requests already being
 * answered keep the step they took. */
AH_EXPORT ah_status ah_mock_set_plan(ah_mock *m, const char *plan_json, char *err, size_t errsize);

/* One recorded request. Every pointer is owned by the mock and stays valid until
 * ah_mock_free. Header values of Authorization, Proxy-Authorization, x-api-key, api-key,
 * x-goog-api-key and Cookie are replaced by "[REDACTED]" before anything is stored. */
typedef struct ah_mock_request {
    const char *method; /* "POST" */
    const char *path;   /* "/v1/messages" */
    int wire;           /* an ah_wire, or -1 for an unknown path */
    int stream;         /* 1 when the body held "stream": true */
    const char *step;   /* kind of the plan step applied: "ok", "status", "reset",
                           "delay", "cut", "stall", "malformed", "error_event";
                           "none" when no step was consumed (unknown path/method) */
    size_t step_index;  /* 1-based index of that step in the plan; 0 when the plan
                           was exhausted (its 'then' step or ok) or none applied */
    int status;         /* HTTP status answered; 0 when reset before headers */
    const char *body;   /* the request body as received, NUL-terminated */
    size_t body_len;
    const ah_header *headers; /* request headers in arrival order, redacted */
    size_t header_count;
    /* the URL's query parameters in order, decoded; a credential's (key, api_key,
     * token, sig, ...) value redacted */
    const ah_header *query;
    size_t query_count;
    size_t restated; /* bytes at the start of the reply's text that restate the request's
                        partial assistant text (a `restate` step); 0 otherwise */
} ah_mock_request;

AH_EXPORT size_t ah_mock_request_count(ah_mock *m);
/* Fill *out with request i (0-based, arrival order). AH_ERR_NOT_FOUND if out of range. */
AH_EXPORT ah_status ah_mock_request_get(ah_mock *m, size_t i, ah_mock_request *out);

#ifdef __cplusplus
}
#endif
#endif
