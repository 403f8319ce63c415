/* writer_gemini.c - Gemini API GenerateContentResponse chunks and bodies, and the
 * google.rpc.Status error shapes (docs/providers-gemini.md has the facts and sources).
 *
 * Byte layout: streamGenerateContent?alt=sse sends one "data: " line per chunk, ended by
 * "\r\n\r\n", no event names and no [DONE]; every chunk repeats usageMetadata,
 * modelVersion and responseId; the last one carries the finishReason. A failure after
 * the head is written either as a chunk {"error": ...} or, as the API does, as raw
 * pretty-printed JSON after the events. Used by the mock (format_gemini.c). */
#include "writer.h"

#include <string.h>

#define PUT AH__WR_PUT

static long long known(long long v)
{
    return v < 0 ? 0 : v;
}

static const struct {
    int code;
    const char *status, *message;
} codes[] = {
    {400, "INVALID_ARGUMENT", "Request contains an invalid argument."},
    {401, "UNAUTHENTICATED", "Request had invalid authentication credentials."},
    {403, "PERMISSION_DENIED", "The caller does not have permission"},
    {404, "NOT_FOUND", "Requested entity was not found."},
    {409, "ABORTED", "The operation was aborted."},
    {413, "INVALID_ARGUMENT", "Request payload size exceeds the limit."},
    {429, "RESOURCE_EXHAUSTED", "Resource has been exhausted (e.g. check quota)."},
    {499, "CANCELLED", "The operation was cancelled."},
    {500, "INTERNAL", "An internal error has occurred. Please retry or report in "
                      "https://developers.generativeai.google/guide/troubleshooting"},
    {503, "UNAVAILABLE", "The model is overloaded. Please try again later."},
    {504, "DEADLINE_EXCEEDED", "The request timed out. Please try again."},
};

const char *ah__wr_g_status_name(int code)
{
    for (size_t i = 0; i < sizeof codes / sizeof codes[0]; i++)
        if (codes[i].code == code)
            return codes[i].status;
    return code >= 500 ? "INTERNAL" : "INVALID_ARGUMENT";
}

int ah__wr_g_status_code(const char *status)
{
    for (size_t i = 0; status && i < sizeof codes / sizeof codes[0]; i++)
        if (strcmp(codes[i].status, status) == 0)
            return codes[i].code;
    return 0;
}

static const char *default_message(int code)
{
    for (size_t i = 0; i < sizeof codes / sizeof codes[0]; i++)
        if (codes[i].code == code)
            return codes[i].message;
    return "Mock provider error";
}

static void usage(ah__wbuf *o, const ah__wr_usage *u)
{
    long long in = known(u->input), out = known(u->output);
    PUT(o, ",\"usageMetadata\":{\"promptTokenCount\":");
    ah__wbuf_int(o, in);
    PUT(o, ",\"candidatesTokenCount\":");
    ah__wbuf_int(o, out);
    PUT(o, ",\"totalTokenCount\":");
    ah__wbuf_int(o, in + out);
    if (u->cache_read > 0) {
        PUT(o, ",\"cachedContentTokenCount\":");
        ah__wbuf_int(o, u->cache_read);
    }
    PUT(o, ",\"promptTokensDetails\":[{\"modality\":\"TEXT\",\"tokenCount\":");
    ah__wbuf_int(o, in);
    PUT(o, "}]}");
}

static void tail(ah__wbuf *o, const ah__wr_gemini_head *h, const ah__wr_usage *u)
{
    if (u)
        usage(o, u);
    PUT(o, ",\"modelVersion\":");
    ah__wbuf_json_cstr(o, h->model);
    PUT(o, ",\"responseId\":");
    ah__wbuf_json_cstr(o, h->response_id);
    PUT(o, "}");
}

static void chunk_start(ah__wbuf *o)
{
    PUT(o, "data: {\"candidates\":[{\"content\":{\"parts\":[");
}

static void chunk_end(ah__wbuf *o, const ah__wr_gemini_head *h, const ah__wr_usage *u)
{
    PUT(o, "],\"role\":\"model\"},\"index\":0}]");
    tail(o, h, u);
    PUT(o, "\r\n\r\n");
}

void ah__wr_g_text(ah__wbuf *o, const ah__wr_gemini_head *h, const char *s, size_t n,
                   int thought, const ah__wr_usage *u)
{
    chunk_start(o);
    PUT(o, "{\"text\":");
    ah__wbuf_json_str(o, s, n);
    if (thought)
        PUT(o, ",\"thought\":true");
    PUT(o, "}");
    chunk_end(o, h, u);
}

static void call_part(ah__wbuf *o, const char *name, const char *args, size_t args_len,
                      const char *signature)
{
    PUT(o, "{\"functionCall\":{\"name\":");
    ah__wbuf_json_cstr(o, name);
    PUT(o, ",\"args\":");
    if (args && args_len)
        ah__wbuf_put(o, args, args_len);
    else
        PUT(o, "{}");
    PUT(o, "}");
    if (signature) {
        PUT(o, ",\"thoughtSignature\":");
        ah__wbuf_json_cstr(o, signature);
    }
    PUT(o, "}");
}

void ah__wr_g_call(ah__wbuf *o, const ah__wr_gemini_head *h, const char *name,
                   const char *args, size_t args_len, const char *signature,
                   const ah__wr_usage *u)
{
    chunk_start(o);
    call_part(o, name, args, args_len, signature);
    chunk_end(o, h, u);
}

void ah__wr_g_finish(ah__wbuf *o, const ah__wr_gemini_head *h, const char *finish_reason,
                     const ah__wr_usage *u)
{
    chunk_start(o);
    PUT(o, "{\"text\":\"\"}],\"role\":\"model\"},\"finishReason\":");
    ah__wbuf_json_cstr(o, finish_reason);
    PUT(o, ",\"index\":0}]");
    tail(o, h, u);
    PUT(o, "\r\n\r\n");
}

static void status_object(ah__wbuf *o, int code, const char *status, const char *message,
                          const char *nl, const char *retry_delay)
{
    ah__wbuf_puts(o, "{");
    ah__wbuf_puts(o, nl);
    ah__wbuf_puts(o, "\"error\": {");
    ah__wbuf_puts(o, nl);
    ah__wbuf_puts(o, "\"code\": ");
    ah__wbuf_int(o, code);
    ah__wbuf_puts(o, ",");
    ah__wbuf_puts(o, nl);
    ah__wbuf_puts(o, "\"message\": ");
    ah__wbuf_json_cstr(o, message ? message : default_message(code));
    ah__wbuf_puts(o, ",");
    ah__wbuf_puts(o, nl);
    ah__wbuf_puts(o, "\"status\": ");
    ah__wbuf_json_cstr(o, status ? status : ah__wr_g_status_name(code));
    if (retry_delay) {
        ah__wbuf_puts(o, ",");
        ah__wbuf_puts(o, nl);
        PUT(o, "\"details\": [{\"@type\": \"type.googleapis.com/google.rpc.RetryInfo\", "
               "\"retryDelay\": ");
        ah__wbuf_json_cstr(o, retry_delay);
        PUT(o, "}]");
    }
    ah__wbuf_puts(o, nl);
    ah__wbuf_puts(o, "}");
    ah__wbuf_puts(o, nl);
    ah__wbuf_puts(o, "}");
}

void ah__wr_g_error_event(ah__wbuf *o, int code, const char *status, const char *message)
{
    PUT(o, "data: ");
    status_object(o, code, status, message, "", NULL);
    PUT(o, "\r\n\r\n");
}

void ah__wr_g_error_tail(ah__wbuf *o, int code, const char *status, const char *message)
{
    PUT(o, "[");
    status_object(o, code, status, message, "\n", NULL);
    PUT(o, "\n]");
}

void ah__wr_g_error_body(ah__wbuf *o, int code, const char *status, const char *message,
                         const char *retry_delay)
{
    status_object(o, code, status, message, "\n", retry_delay);
    PUT(o, "\n");
}

void ah__wr_g_body(ah__wbuf *o, const ah__wr_gemini_head *h, const char *text,
                   size_t text_len, const ah__wr_block *tools, size_t ntools,
                   const char *finish_reason, const ah__wr_usage *u)
{
    PUT(o, "{\"candidates\":[{\"content\":{\"parts\":[");
    int first = 1;
    if (text) {
        PUT(o, "{\"text\":");
        ah__wbuf_json_str(o, text, text_len);
        PUT(o, "}");
        first = 0;
    }
    for (size_t i = 0; i < ntools; i++) {
        if (!first)
            PUT(o, ",");
        call_part(o, tools[i].name, tools[i].text, tools[i].text_len, tools[i].signature);
        first = 0;
    }
    PUT(o, "],\"role\":\"model\"},\"finishReason\":");
    ah__wbuf_json_cstr(o, finish_reason);
    PUT(o, ",\"index\":0}]");
    tail(o, h, u);
}
