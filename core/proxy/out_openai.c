/* out_openai.c - the spliced response as Chat Completions chunks: the first attempt's id,
 * model and created on every chunk, choice 0 only, tool-call indexes that count 0, 1 ...
 * across attempts (each call whole, after the text), one finish chunk, the usage chunk
 * when the client asked for it (stream_options.include_usage), one [DONE]; past the last
 * continuation a data: {"error": ...} chunk and no [DONE]. Reasoning deltas are not
 * written (Chat Completions has no standard field for them). */
#include "proxy_internal.h"

#include "decode_internal.h"

#include <string.h>


static const char *jstr(const cJSON *o, const char *key)
{
    return cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(o, key));
}

static int head(ah__px_splice *s, const ah_sse_event *ev, const cJSON *data)
{
    (void)ev;
    if (!cJSON_IsObject(data) || !cJSON_IsArray(cJSON_GetObjectItemCaseSensitive(data, "choices")) ||
        cJSON_GetObjectItemCaseSensitive(data, "error"))
        return 0;
    if (!s->id) {
        s->id = ah__px_strdup(jstr(data, "id") ? jstr(data, "id") : "chatcmpl-proxy");
        s->model = ah__px_strdup(jstr(data, "model"));
        s->service_tier = ah__px_strdup(jstr(data, "service_tier"));
        s->fingerprint = ah__px_strdup(jstr(data, "system_fingerprint"));
        const cJSON *c = cJSON_GetObjectItemCaseSensitive(data, "created");
        s->created = cJSON_IsNumber(c) ? (long long)c->valuedouble : 0;
        s->include_usage = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(
            cJSON_GetObjectItemCaseSensitive(s->req, "stream_options"), "include_usage"));
    }
    return 1;
}

/* What head reads (a filtered tree: only looked up by key; of "choices" only that it is
 * an array). */
static const ah__tree_key no_keys[] = {
    AH__TK_END,
};
static const ah__tree_key head_keys[] = {
    AH__TK("choices", AH__TK_EACH, no_keys),
    AH__TK("error", AH__TK_DEEP, NULL),
    AH__TK("id", AH__TK_DEEP, NULL),
    AH__TK("model", AH__TK_DEEP, NULL),
    AH__TK("service_tier", AH__TK_DEEP, NULL),
    AH__TK("system_fingerprint", AH__TK_DEEP, NULL),
    AH__TK("created", AH__TK_DEEP, NULL),
    AH__TK_END,
};

/* The chunk prefix, built once from the head. */
static const ah__wbuf *prefix(ah__px_splice *s)
{
    if (s->prefix.len)
        return &s->prefix;
    ah__wr_chat_head h = {.id = s->id ? s->id : "chatcmpl-proxy", .model = s->model,
                          .created = s->created, .service_tier = s->service_tier,
                          .system_fingerprint = s->fingerprint,
                          .include_usage = s->include_usage};
    ah__wr_c_prefix(&s->prefix, &h);
    return &s->prefix;
}

static void start(ah__px_splice *s)
{
    (void)s; /* the role goes in the first chunk with content */
}

static void open_block(ah__px_splice *s, ah__px_block *b)
{
    (void)b;
    if (s->role_sent)
        return;
    const ah__wbuf *p = prefix(s);
    ah__wr_c_role(&s->o, p, s->include_usage);
    s->role_sent = 1;
}

static void text(ah__px_splice *s, ah__px_block *b, const char *t, size_t n)
{
    (void)b;
    const ah__wbuf *p = prefix(s);
    ah__wr_c_text(&s->o, p, s->include_usage, t, n);
}

static void close_block(ah__px_splice *s, ah__px_block *b)
{
    (void)s;
    (void)b;
}

static void whole(ah__px_splice *s, ah__px_block *b)
{
    const ah__wbuf *p = prefix(s);
    if (b->kind == AH__WR_TOOL) {
        ah__wr_c_tool_start(&s->o, p, s->include_usage, b->index, b->id, b->name,
                            !s->role_sent);
        s->role_sent = 1;
        if (b->text.len)
            ah__wr_c_tool_args(&s->o, p, s->include_usage, b->index, b->text.data,
                               b->text.len);
    } else if (b->kind == AH__WR_TEXT) {
        open_block(s, b);
        ah__wr_c_text(&s->o, p, s->include_usage, b->text.data, b->text.len);
    }
}

static void finish(ah__px_splice *s)
{
    const ah__wbuf *p = prefix(s);
    if (!s->role_sent) {
        ah__wr_c_role(&s->o, p, s->include_usage);
        s->role_sent = 1;
    }
    ah__wr_c_finish(&s->o, p, s->include_usage, s->stop_reason ? s->stop_reason : "stop");
    if (s->include_usage) {
        ah__wr_usage u = {.input = s->input_tokens, .output = s->output_tokens,
                          .cache_read = s->cache_read};
        ah__wr_c_usage(&s->o, p, &u);
    }
    ah__wr_c_done(&s->o);
}

static void fail(ah__px_splice *s, const char *type, const char *message)
{
    ah__wr_c_error(&s->o, type ? type : "server_error", message);
}

const ah__px_out ah__px_out_openai = {
    .messages_key = "messages",
    .head = head,
    .head_keys = head_keys,
    .start = start,
    .open = open_block,
    .text = text,
    .close = close_block,
    .whole = whole,
    .finish = finish,
    .fail = fail,
};
