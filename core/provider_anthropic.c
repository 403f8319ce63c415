/* provider_anthropic.c - the Anthropic Messages API's ops table (POST /v1/messages).
 *
 * The codec lives beside it: encode_anthropic.c (request body), decode_anthropic.c
 * (stream events and the non-stream body). Facts: docs/providers-encoding.md and
 * docs/providers-decoding.md. */
#include "decode_internal.h"
#include "encode_internal.h"
#include "provider.h"

const ah__provider ah__provider_ANTHROPIC = {
    .name = "anthropic",
    .path = "/v1/messages",
    .base_url = "https://api.anthropic.com",
    .key_env = "ANTHROPIC_API_KEY", /* the anthropic SDKs' */
    .needs_max_tokens = 1,
    .key_header = "x-api-key",
    .key_prefix = "",
    .fixed_headers = {{"anthropic-version", "2023-06-01"}},
    .encode = ah__encode_anthropic,
    .event_type = NULL, /* every event names its type */
    .event = ah__anthropic_event,
    .fast = ah__fast_anthropic,
    .end = NULL,
    .ends_at_done = 0,
    .end_marker = "message_stop",
    .body = ah__anthropic_body,
    .caps = ah__caps_anthropic,
    .prefill_refusal = {"does not support assistant message prefill",
                        "must end with a user message"},
};
