/* provider_openai.c - the OpenAI Chat Completions API's ops table
 * (POST /v1/chat/completions; wire name "openai").
 *
 * The codec lives beside it: encode_openai.c (request body), decode_openai.c (stream
 * chunks and the non-stream body). Facts: docs/providers-encoding.md and
 * docs/providers-decoding.md. */
#include "decode_internal.h"
#include "encode_internal.h"
#include "provider.h"

/* Chunks carry no "type": every event is a chat.completion.chunk. */
static ah_status chat_event(ah_decoder *d, const cJSON *root, const char *type)
{
    (void)type;
    return ah__openai_event(d, root);
}

const ah__provider ah__provider_OPENAI = {
    .name = "openai",
    .path = "/v1/chat/completions",
    .base_url = "https://api.openai.com",
    .key_env = "OPENAI_API_KEY", /* the openai SDKs' */
    .needs_max_tokens = 0,
    .key_header = "Authorization",
    .key_prefix = "Bearer ",
    .encode = ah__encode_openai,
    .event_type = "chat.completion.chunk",
    .event = chat_event,
    .fast = ah__fast_chat,
    .tree = ah__tree_chat,
    .end = ah__openai_end, /* a finish_reason seen finishes the timeline */
    .ends_at_done = 1,     /* the usage chunk follows the finish chunk */
    .end_marker = "a finish_reason",
    .body = ah__openai_body,
    .caps = ah__caps_chat,
};
