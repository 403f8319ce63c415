/* out_anthropic.c - the spliced response as Anthropic Messages events: one
 * message_start (the first attempt's id, model and input tokens), block indexes that
 * count 0, 1, 2 ... across attempts, one message_delta with the summed usage, one
 * message_stop; past the last continuation an `event: error`. */
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
    const cJSON *msg = cJSON_GetObjectItemCaseSensitive(data, "message");
    if (!cJSON_IsObject(msg) || !cJSON_IsString(cJSON_GetObjectItemCaseSensitive(data, "type")) ||
        strcmp(jstr(data, "type"), "message_start") != 0)
        return 0;
    if (!s->id) {
        s->id = ah__px_strdup(jstr(msg, "id") ? jstr(msg, "id") : "msg_proxy");
        s->model = ah__px_strdup(jstr(msg, "model"));
        s->service_tier =
            ah__px_strdup(jstr(cJSON_GetObjectItemCaseSensitive(msg, "usage"), "service_tier"));
    }
    return 1;
}

/* What head reads (a filtered tree: only looked up by key). */
static const ah__tree_key usage_keys[] = {
    AH__TK("service_tier", AH__TK_DEEP, NULL),
    AH__TK_END,
};
static const ah__tree_key message_keys[] = {
    AH__TK("id", AH__TK_DEEP, NULL),
    AH__TK("model", AH__TK_DEEP, NULL),
    AH__TK("usage", AH__TK_OBJ, usage_keys),
    AH__TK_END,
};
static const ah__tree_key head_keys[] = {
    AH__TK("type", AH__TK_DEEP, NULL),
    AH__TK("message", AH__TK_OBJ, message_keys),
    AH__TK_END,
};

static ah__wr_usage usage(const ah__px_splice *s, long long output)
{
    ah__wr_usage u = {.input = s->input_tokens, .output = output,
                      .cache_read = s->cache_read, .cache_write = s->cache_write};
    return u;
}

static void start(ah__px_splice *s)
{
    ah__wr_anthropic_head h = {.id = s->id ? s->id : "msg_proxy", .model = s->model,
                               .service_tier = s->service_tier};
    long long out = s->tl ? ah_timeline_output_tokens(s->tl) : 1;
    ah__wr_usage u = usage(s, out < 0 ? 1 : out);
    ah__wr_a_message_start(&s->o, &h, &u);
}

static void open_block(ah__px_splice *s, ah__px_block *b)
{
    ah__wr_block wb = {.kind = b->kind};
    ah__wr_a_block_start(&s->o, b->index, &wb);
}

static void text(ah__px_splice *s, ah__px_block *b, const char *t, size_t n)
{
    ah__wr_a_delta(&s->o, b->index, AH__WR_A_TEXT, t, n);
}

static void close_block(ah__px_splice *s, ah__px_block *b)
{
    ah__wr_a_block_stop(&s->o, b->index);
}

static void whole(ah__px_splice *s, ah__px_block *b)
{
    ah__wr_block wb = {.kind = b->kind, .id = b->id, .name = b->name,
                       .encrypted = b->enc.data, .encrypted_len = b->enc.len,
                       .raw = b->raw.data, .raw_len = b->raw.len};
    ah__wr_a_block_start(&s->o, b->index, &wb);
    switch (b->kind) {
    case AH__WR_TEXT:
        ah__wr_a_delta(&s->o, b->index, AH__WR_A_TEXT, b->text.data, b->text.len);
        break;
    case AH__WR_THINKING:
        if (b->text.len)
            ah__wr_a_delta(&s->o, b->index, AH__WR_A_THINKING, b->text.data, b->text.len);
        if (b->sig.len)
            ah__wr_a_delta(&s->o, b->index, AH__WR_A_SIGNATURE, b->sig.data, b->sig.len);
        break;
    case AH__WR_TOOL:
    case AH__WR_SERVER_TOOL:
        if (b->text.len)
            ah__wr_a_delta(&s->o, b->index, AH__WR_A_JSON, b->text.data, b->text.len);
        break;
    default:
        break; /* redacted thinking and raw blocks arrive whole in their start */
    }
    ah__wr_a_block_stop(&s->o, b->index);
}

static void finish(ah__px_splice *s)
{
    ah__wr_usage u = usage(s, s->output_tokens);
    ah__wr_a_message_delta(&s->o, s->stop_reason ? s->stop_reason : "end_turn", &u);
    ah__wr_a_message_stop(&s->o);
}

static void fail(ah__px_splice *s, const char *type, const char *message)
{
    ah__wr_a_error(&s->o, type ? type : "overloaded_error", message, NULL);
}

const ah__px_out ah__px_out_anthropic = {
    .messages_key = "messages",
    .head = head,
    .head_keys = head_keys,
    .head_typed = 1,
    .start = start,
    .open = open_block,
    .text = text,
    .close = close_block,
    .whole = whole,
    .finish = finish,
    .fail = fail,
};
