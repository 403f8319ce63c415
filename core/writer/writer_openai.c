/* writer_openai.c - OpenAI Chat Completions chunks and bodies, and the OpenAI error body.
 *
 * Byte layout as recorded in tests/fixtures/real-streams/chat: no `event:` lines, every
 * chunk repeats the id/model prefix, a usage-only chunk ("choices":[]) when
 * stream_options.include_usage, then `data: [DONE]`. Used by the mock (format_openai.c)
 * and the proxy. */
#include "writer.h"

#include <string.h>

#define PUT AH__WR_PUT

static long long known(long long v)
{
    return v < 0 ? 0 : v;
}

void ah__wr_c_prefix(ah__wbuf *p, const ah__wr_chat_head *h)
{
    PUT(p, "{\"id\":");
    ah__wbuf_json_cstr(p, h->id);
    PUT(p, ",\"object\":\"chat.completion.chunk\",\"created\":");
    ah__wbuf_int(p, h->created);
    PUT(p, ",\"model\":");
    ah__wbuf_json_cstr(p, h->model);
    if (h->service_tier) {
        PUT(p, ",\"service_tier\":");
        ah__wbuf_json_cstr(p, h->service_tier);
    }
    if (h->system_fingerprint) {
        PUT(p, ",\"system_fingerprint\":");
        ah__wbuf_json_cstr(p, h->system_fingerprint);
    }
    PUT(p, ",\"choices\":[");
}

static void chunk_start(ah__wbuf *o, const ah__wbuf *prefix)
{
    PUT(o, "data: ");
    ah__wbuf_put(o, prefix->data ? prefix->data : "", prefix->len);
}

static void choice_end(ah__wbuf *o, int include_usage)
{
    PUT(o, ",\"logprobs\":null,\"finish_reason\":null}]");
    if (include_usage)
        PUT(o, ",\"usage\":null");
    PUT(o, "}\n\n");
}

static void usage(ah__wbuf *o, const ah__wr_usage *u)
{
    long long in = known(u->input), out = known(u->output);
    PUT(o, "\"usage\":{\"prompt_tokens\":");
    ah__wbuf_int(o, in);
    PUT(o, ",\"completion_tokens\":");
    ah__wbuf_int(o, out);
    PUT(o, ",\"total_tokens\":");
    ah__wbuf_int(o, in + out);
    PUT(o, ",\"prompt_tokens_details\":{\"cached_tokens\":");
    ah__wbuf_int(o, known(u->cache_read));
    PUT(o, ",\"audio_tokens\":0},"
           "\"completion_tokens_details\":{\"reasoning_tokens\":0,\"audio_tokens\":0,"
           "\"accepted_prediction_tokens\":0,\"rejected_prediction_tokens\":0}}");
}

void ah__wr_c_role(ah__wbuf *o, const ah__wbuf *prefix, int include_usage)
{
    chunk_start(o, prefix);
    PUT(o, "{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"\","
           "\"refusal\":null}");
    choice_end(o, include_usage);
}

void ah__wr_c_text(ah__wbuf *o, const ah__wbuf *prefix, int include_usage, const char *s,
                   size_t n)
{
    chunk_start(o, prefix);
    PUT(o, "{\"index\":0,\"delta\":{\"content\":");
    ah__wbuf_json_str(o, s, n);
    PUT(o, "}");
    choice_end(o, include_usage);
}

void ah__wr_c_tool_start(ah__wbuf *o, const ah__wbuf *prefix, int include_usage,
                         size_t call, const char *id, const char *name, int with_role)
{
    chunk_start(o, prefix);
    PUT(o, "{\"index\":0,\"delta\":{");
    if (with_role)
        PUT(o, "\"role\":\"assistant\",\"content\":null,");
    PUT(o, "\"tool_calls\":[{\"index\":");
    ah__wbuf_size(o, call);
    PUT(o, ",\"id\":");
    ah__wbuf_json_cstr(o, id);
    PUT(o, ",\"type\":\"function\",\"function\":{\"name\":");
    ah__wbuf_json_cstr(o, name);
    PUT(o, ",\"arguments\":\"\"}}]");
    if (with_role)
        PUT(o, ",\"refusal\":null");
    PUT(o, "}");
    choice_end(o, include_usage);
}

void ah__wr_c_tool_args(ah__wbuf *o, const ah__wbuf *prefix, int include_usage, size_t call,
                        const char *s, size_t n)
{
    chunk_start(o, prefix);
    PUT(o, "{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":");
    ah__wbuf_size(o, call);
    PUT(o, ",\"function\":{\"arguments\":");
    ah__wbuf_json_str(o, s, n);
    PUT(o, "}}]}");
    choice_end(o, include_usage);
}

void ah__wr_c_finish(ah__wbuf *o, const ah__wbuf *prefix, int include_usage,
                     const char *finish_reason)
{
    chunk_start(o, prefix);
    PUT(o, "{\"index\":0,\"delta\":{},\"logprobs\":null,\"finish_reason\":");
    ah__wbuf_json_cstr(o, finish_reason);
    PUT(o, "}]");
    if (include_usage)
        PUT(o, ",\"usage\":null");
    PUT(o, "}\n\n");
}

void ah__wr_c_usage(ah__wbuf *o, const ah__wbuf *prefix, const ah__wr_usage *u)
{
    chunk_start(o, prefix);
    PUT(o, "],");
    usage(o, u);
    PUT(o, "}\n\n");
}

void ah__wr_c_done(ah__wbuf *o)
{
    PUT(o, "data: [DONE]\n\n");
}

void ah__wr_c_error(ah__wbuf *o, const char *type, const char *message)
{
    PUT(o, "data: {\"error\":{\"message\":");
    ah__wbuf_json_cstr(o, message);
    PUT(o, ",\"type\":");
    ah__wbuf_json_cstr(o, type);
    PUT(o, ",\"param\":null,\"code\":null}}\n\n");
}

void ah__wr_c_body(ah__wbuf *o, const ah__wr_chat_head *h, const char *text,
                   size_t text_len, const ah__wr_block *tools, size_t ntools,
                   const char *finish_reason, const ah__wr_usage *u)
{
    PUT(o, "{\"id\":");
    ah__wbuf_json_cstr(o, h->id);
    PUT(o, ",\"object\":\"chat.completion\",\"created\":");
    ah__wbuf_int(o, h->created);
    PUT(o, ",\"model\":");
    ah__wbuf_json_cstr(o, h->model);
    PUT(o, ",\"choices\":[{\"index\":0,\"message\":{\"role\":\"assistant\","
           "\"content\":");
    if (text)
        ah__wbuf_json_str(o, text, text_len);
    else
        PUT(o, "null");
    if (ntools) {
        PUT(o, ",\"tool_calls\":[");
        for (size_t i = 0; i < ntools; i++) {
            if (i)
                PUT(o, ",");
            PUT(o, "{\"id\":");
            ah__wbuf_json_cstr(o, tools[i].id);
            PUT(o, ",\"type\":\"function\",\"function\":{\"name\":");
            ah__wbuf_json_cstr(o, tools[i].name);
            PUT(o, ",\"arguments\":");
            ah__wbuf_json_str(o, tools[i].text ? tools[i].text : "", tools[i].text_len);
            PUT(o, "}}");
        }
        PUT(o, "]");
    }
    PUT(o, ",\"refusal\":null,\"annotations\":[]},\"logprobs\":null,"
           "\"finish_reason\":");
    ah__wbuf_json_cstr(o, finish_reason);
    PUT(o, "}],");
    usage(o, u);
    if (h->service_tier) {
        PUT(o, ",\"service_tier\":");
        ah__wbuf_json_cstr(o, h->service_tier);
    }
    if (h->system_fingerprint) {
        PUT(o, ",\"system_fingerprint\":");
        ah__wbuf_json_cstr(o, h->system_fingerprint);
    }
    PUT(o, "}");
}

/* clang-format off */
static const char *status_type(int status)
{
    if (status == 429)
        return "requests";
    return status >= 500 ? "server_error" : "invalid_request_error";
}

static const char *status_message(int status)
{
    switch (status) {
    case 401: return "Incorrect API key provided.";
    case 404: return "The requested resource was not found.";
    case 405: return "Method not allowed.";
    case 429: return "Rate limit reached for requests";
    case 503: return "The server is overloaded or not ready yet.";
    default:
        return status >= 500 ? "The server had an error while processing your request. "
                               "Sorry about that!"
                             : "Invalid request.";
    }
}
/* clang-format on */

void ah__wr_openai_error_body(ah__wbuf *o, int status, const char *type,
                              const char *message)
{
    const char *code = NULL;
    if (!type) {
        type = status_type(status);
        code = status == 429   ? "rate_limit_exceeded"
               : status == 401 ? "invalid_api_key"
                               : NULL;
        if (!message)
            message = status_message(status);
    }
    PUT(o, "{\"error\":{\"message\":");
    ah__wbuf_json_cstr(o, message ? message : ah__wr_default_message(type));
    PUT(o, ",\"type\":");
    ah__wbuf_json_cstr(o, type);
    PUT(o, ",\"param\":null,\"code\":");
    ah__wbuf_json_cstr(o, code);
    PUT(o, "}}");
}
