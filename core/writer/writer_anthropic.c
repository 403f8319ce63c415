/* writer_anthropic.c - the Anthropic Messages API's SSE events and bodies.
 *
 * Byte layout as recorded in tests/fixtures/real-streams/anthropic: `event:` lines, usage
 * in message_start (service_tier inside it) and message_delta, `{"type": "ping"}` with
 * the API's own space. Used by the mock (format_anthropic.c) and the proxy. */
#include "writer.h"

#include <string.h>

#define PUT AH__WR_PUT

static long long known(long long v)
{
    return v < 0 ? 0 : v;
}

/* "usage":{...} with the service tier inside, as the API has it. */
static void usage(ah__wbuf *o, const ah__wr_usage *u, const char *service_tier)
{
    PUT(o, "\"usage\":{\"input_tokens\":");
    ah__wbuf_int(o, known(u->input));
    PUT(o, ",\"cache_creation_input_tokens\":");
    ah__wbuf_int(o, known(u->cache_write));
    PUT(o, ",\"cache_read_input_tokens\":");
    ah__wbuf_int(o, known(u->cache_read));
    PUT(o, ",\"output_tokens\":");
    ah__wbuf_int(o, known(u->output));
    if (service_tier) {
        PUT(o, ",\"service_tier\":");
        ah__wbuf_json_cstr(o, service_tier);
    }
    PUT(o, "}");
}

static void stop_reason(ah__wbuf *o, const char *r)
{
    ah__wbuf_json_cstr(o, r);
}

void ah__wr_a_message_start(ah__wbuf *o, const ah__wr_anthropic_head *h,
                            const ah__wr_usage *u)
{
    ah__wr_begin_event(o, "message_start");
    PUT(o, "{\"type\":\"message_start\",\"message\":{\"id\":");
    ah__wbuf_json_cstr(o, h->id);
    PUT(o, ",\"type\":\"message\",\"role\":\"assistant\",\"model\":");
    ah__wbuf_json_cstr(o, h->model);
    PUT(o, ",\"content\":[],\"stop_reason\":null,\"stop_sequence\":null,");
    usage(o, u, h->service_tier);
    PUT(o, "}}\n\n");
}

/* A block's JSON; open = its content_block_start form (empty content). */
static void block_json(ah__wbuf *o, const ah__wr_block *b, int open)
{
    switch (b->kind) {
    case AH__WR_TEXT:
        PUT(o, "{\"type\":\"text\",\"text\":");
        if (open)
            PUT(o, "\"\"");
        else
            ah__wbuf_json_str(o, b->text ? b->text : "", b->text_len);
        PUT(o, "}");
        break;
    case AH__WR_TOOL:
    case AH__WR_SERVER_TOOL:
        if (b->kind == AH__WR_TOOL)
            PUT(o, "{\"type\":\"tool_use\",\"id\":");
        else
            PUT(o, "{\"type\":\"server_tool_use\",\"id\":");
        ah__wbuf_json_cstr(o, b->id);
        PUT(o, ",\"name\":");
        ah__wbuf_json_cstr(o, b->name);
        PUT(o, ",\"input\":");
        if (open || !b->text_len)
            PUT(o, "{}");
        else
            ah__wbuf_put(o, b->text, b->text_len);
        PUT(o, "}");
        break;
    case AH__WR_THINKING:
        PUT(o, "{\"type\":\"thinking\",\"thinking\":");
        if (open)
            PUT(o, "\"\"");
        else
            ah__wbuf_json_str(o, b->text ? b->text : "", b->text_len);
        PUT(o, ",\"signature\":");
        if (open)
            PUT(o, "\"\"");
        else
            ah__wbuf_json_str(o, b->signature ? b->signature : "", b->signature_len);
        PUT(o, "}");
        break;
    case AH__WR_REDACTED:
        PUT(o, "{\"type\":\"redacted_thinking\",\"data\":");
        ah__wbuf_json_str(o, b->encrypted ? b->encrypted : "", b->encrypted_len);
        PUT(o, "}");
        break;
    case AH__WR_RAW:
        if (b->raw_len)
            ah__wbuf_put(o, b->raw, b->raw_len);
        else
            PUT(o, "{}");
        break;
    }
}

void ah__wr_a_block_start(ah__wbuf *o, size_t index, const ah__wr_block *b)
{
    ah__wr_begin_event(o, "content_block_start");
    PUT(o, "{\"type\":\"content_block_start\",\"index\":");
    ah__wbuf_size(o, index);
    PUT(o, ",\"content_block\":");
    block_json(o, b, 1);
    PUT(o, "}\n\n");
}

void ah__wr_a_ping(ah__wbuf *o)
{
    ah__wr_begin_event(o, "ping");
    PUT(o, "{\"type\": \"ping\"}\n\n");
}

void ah__wr_a_delta(ah__wbuf *o, size_t index, int kind, const char *s, size_t n)
{
    PUT(o, "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":");
    ah__wbuf_size(o, index);
    switch (kind) {
    case AH__WR_A_JSON:
        PUT(o, ",\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":");
        break;
    case AH__WR_A_THINKING:
        PUT(o, ",\"delta\":{\"type\":\"thinking_delta\",\"thinking\":");
        break;
    case AH__WR_A_SIGNATURE:
        PUT(o, ",\"delta\":{\"type\":\"signature_delta\",\"signature\":");
        break;
    default:
        PUT(o, ",\"delta\":{\"type\":\"text_delta\",\"text\":");
    }
    ah__wbuf_json_str(o, s, n);
    PUT(o, "}}\n\n");
}

void ah__wr_a_block_stop(ah__wbuf *o, size_t index)
{
    ah__wr_begin_event(o, "content_block_stop");
    PUT(o, "{\"type\":\"content_block_stop\",\"index\":");
    ah__wbuf_size(o, index);
    PUT(o, "}\n\n");
}

void ah__wr_a_message_delta_details(ah__wbuf *o, const char *reason, const char *category,
                                    const ah__wr_usage *u)
{
    if (!reason || strcmp(reason, "refusal") != 0) {
        ah__wr_a_message_delta(o, reason, u);
        return;
    }
    ah__wr_begin_event(o, "message_delta");
    PUT(o, "{\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"refusal\","
           "\"stop_sequence\":null,\"stop_details\":{\"type\":\"refusal\",\"category\":");
    ah__wbuf_json_cstr(o, category);
    PUT(o, ",\"explanation\":\"The request was declined by the mock's policy.\"}},");
    usage(o, u, NULL);
    PUT(o, "}\n\n");
}

void ah__wr_a_message_delta(ah__wbuf *o, const char *reason, const ah__wr_usage *u)
{
    ah__wr_begin_event(o, "message_delta");
    PUT(o, "{\"type\":\"message_delta\",\"delta\":{\"stop_reason\":");
    stop_reason(o, reason);
    PUT(o, ",\"stop_sequence\":null},");
    usage(o, u, NULL);
    PUT(o, "}\n\n");
}

void ah__wr_a_message_stop(ah__wbuf *o)
{
    ah__wr_begin_event(o, "message_stop");
    PUT(o, "{\"type\":\"message_stop\"}\n\n");
}

void ah__wr_a_error(ah__wbuf *o, const char *type, const char *message,
                    const char *request_id)
{
    PUT(o, "event: error\ndata: {\"type\":\"error\",\"error\":{\"details\":null,"
           "\"type\":");
    ah__wbuf_json_cstr(o, type);
    PUT(o, ",\"message\":");
    ah__wbuf_json_cstr(o, message);
    PUT(o, "},\"request_id\":");
    ah__wbuf_json_cstr(o, request_id);
    PUT(o, "}\n\n");
}

void ah__wr_a_body(ah__wbuf *o, const ah__wr_anthropic_head *h, const ah__wr_block *blocks,
                   size_t n, const char *reason, const ah__wr_usage *u)
{
    PUT(o, "{\"id\":");
    ah__wbuf_json_cstr(o, h->id);
    PUT(o, ",\"type\":\"message\",\"role\":\"assistant\",\"model\":");
    ah__wbuf_json_cstr(o, h->model);
    PUT(o, ",\"content\":[");
    for (size_t i = 0; i < n; i++) {
        if (i)
            PUT(o, ",");
        block_json(o, &blocks[i], 0);
    }
    PUT(o, "],\"stop_reason\":");
    stop_reason(o, reason);
    PUT(o, ",\"stop_sequence\":null,");
    usage(o, u, h->service_tier);
    PUT(o, "}");
}

/* clang-format off */
const char *ah__wr_a_status_type(int status)
{
    switch (status) {
    case 400: return "invalid_request_error";
    case 401: return "authentication_error";
    case 402: return "billing_error";
    case 403: return "permission_error";
    case 404: return "not_found_error";
    case 413: return "request_too_large";
    case 429: return "rate_limit_error";
    case 504: return "timeout_error";
    case 529: return "overloaded_error";
    default: return status >= 500 ? "api_error" : "invalid_request_error";
    }
}
/* clang-format on */

void ah__wr_a_error_body(ah__wbuf *o, int status, const char *type, const char *message,
                         const char *request_id)
{
    if (!type)
        type = ah__wr_a_status_type(status);
    PUT(o, "{\"type\":\"error\",\"error\":{\"type\":");
    ah__wbuf_json_cstr(o, type);
    PUT(o, ",\"message\":");
    ah__wbuf_json_cstr(o, message ? message : ah__wr_default_message(type));
    PUT(o, "},\"request_id\":");
    ah__wbuf_json_cstr(o, request_id);
    PUT(o, "}");
}
