/* agenthost/wire.h - the provider wire formats a client can speak (docs/providers-decoding.md). */
#ifndef AGENTHOST_WIRE_H
#define AGENTHOST_WIRE_H

#include "agenthost/export.h"

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* X(NAME, "name", "default request path"). Each line is also the provider's registry
 * entry: the library holds one ops table per line (docs/providers-encoding.md, "Adding
 * a provider"). */
#define AH_WIRE_MAP(X)                                                                    \
    X(ANTHROPIC, "anthropic", "/v1/messages")                                             \
    X(OPENAI, "openai", "/v1/chat/completions")                                           \
    X(RESPONSES, "responses", "/v1/responses")                                            \
    X(GEMINI, "gemini", "/v1beta/models/{model}:streamGenerateContent")

typedef enum ah_wire {
#define AH__WIRE_ENUM(name, s, path) AH_WIRE_##name,
    AH_WIRE_MAP(AH__WIRE_ENUM)
#undef AH__WIRE_ENUM
        AH_WIRE_COUNT_
} ah_wire;

AH_EXPORT const char *ah_wire_name(ah_wire w);      /* "unknown" out of range */
AH_EXPORT const char *ah_wire_path(ah_wire w);      /* "" out of range */
AH_EXPORT int ah_wire_from_name(const char *name); /* the ah_wire, or -1 */
/* The provider's public API ("https://api.anthropic.com"), static; NULL out of range. */
AH_EXPORT const char *ah_wire_base_url(ah_wire w);
/* The environment variable its official SDKs read the API key from ("ANTHROPIC_API_KEY",
 * "OPENAI_API_KEY"), static; NULL when there is none or out of range. A client built
 * without api_key reads it (ah_client_config.api_key). */
AH_EXPORT const char *ah_wire_key_env(ah_wire w);

/* Background responses (OpenAI Responses, "background": true): the provider keeps
 * running a response whatever happens to the connection, and its stream can be taken up
 * again. request_url is the URL the response was created with (".../v1/responses").
 * Both return a malloc'd URL (free with free()), or NULL when the format has no such
 * request or on allocation failure. The id is percent-encoded.
 *   re-attach: GET {request_url}/{id}?stream=true&starting_after={after}, the events
 *              after sequence number `after`;
 *   cancel:    POST {request_url}/{id}/cancel. */
AH_EXPORT int ah_wire_has_background(ah_wire w); /* 1 for responses */
AH_EXPORT char *ah_wire_reattach_url(ah_wire w, const char *request_url, const char *id,
                                     int64_t after);
AH_EXPORT char *ah_wire_cancel_url(ah_wire w, const char *request_url, const char *id);

#ifdef __cplusplus
}
#endif
#endif
