/* provider_responses.c - the OpenAI Responses API's ops table (POST /v1/responses),
 * with its background responses (re-attach and cancel URLs).
 *
 * The codec lives beside it: encode_responses.c (request body), decode_responses.c
 * (stream events with the resume cursor, and the non-stream body). Facts:
 * docs/providers-encoding.md and docs/providers-decoding.md. */
#include "decode_internal.h"
#include "encode_internal.h"
#include "provider.h"

#include <stdio.h>

/* GET {request_url}/{id}?stream=true&starting_after={after}: the events after `after`. */
static char *reattach_url(const char *request_url, const char *id, int64_t after)
{
    char query[64];
    snprintf(query, sizeof query, "stream=true&starting_after=%lld", (long long)after);
    return ah__response_url(request_url, id, "", query);
}

/* POST {request_url}/{id}/cancel */
static char *cancel_url(const char *request_url, const char *id)
{
    return ah__response_url(request_url, id, "/cancel", NULL);
}

const ah__provider ah__provider_RESPONSES = {
    .name = "responses",
    .path = "/v1/responses",
    .base_url = "https://api.openai.com",
    .key_env = "OPENAI_API_KEY", /* the openai SDKs' */
    .needs_max_tokens = 0,
    .key_header = "Authorization",
    .key_prefix = "Bearer ",
    .encode = ah__encode_responses,
    .event_type = NULL, /* every event names its type */
    .event = ah__responses_event,
    .fast = ah__fast_responses,
    .parse = ah__fast_parse, /* closing events parsed without the answer they repeat */
    .tree = ah__tree_responses,
    .end = NULL,
    .ends_at_done = 0,
    .end_marker = "response.completed/incomplete/failed",
    .body = ah__responses_body,
    .reattach_url = reattach_url,
    .cancel_url = cancel_url,
    .caps = ah__caps_responses,
};
