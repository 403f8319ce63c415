/* out_responses.c - the spliced response as OpenAI Responses events: one
 * response.created (and response.in_progress) with the first attempt's response object,
 * output_index and sequence_number that keep increasing across attempts, the closing
 * events of each item repeating it whole, one terminal event: response.completed with
 * every item and the summed usage, or past the last continuation response.incomplete
 * with incomplete_details.reason "interrupted" (not response.failed, which makes some
 * clients regenerate the turn). */
#include "proxy_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *jstr(const cJSON *o, const char *key)
{
    return cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(o, key));
}

static int head(ah__px_splice *s, const ah_sse_event *ev, const cJSON *data)
{
    (void)ev;
    const char *type = jstr(data, "type");
    const cJSON *resp = cJSON_GetObjectItemCaseSensitive(data, "response");
    if (!type || strcmp(type, "response.created") != 0 || !cJSON_IsObject(resp))
        return 0;
    if (!s->id) {
        s->id = ah__px_strdup(jstr(resp, "id") ? jstr(resp, "id") : "resp_proxy");
        s->model = ah__px_strdup(jstr(resp, "model"));
        const cJSON *c = cJSON_GetObjectItemCaseSensitive(resp, "created_at");
        s->created = cJSON_IsNumber(c) ? (long long)c->valuedouble : 0;
        s->tmpl = cJSON_Duplicate(resp, 1);
        if (!s->tmpl)
            s->failed_nomem = 1;
    }
    return 1;
}

static ah__wr_resp_head rhead(const ah__px_splice *s)
{
    ah__wr_resp_head h = {.id = s->id ? s->id : "resp_proxy", .model = s->model,
                          .created_at = s->created, .tmpl = s->tmpl};
    return h;
}

/* A text block's item id: the upstream's, else one of our own from the response id. */
static const char *item_id(ah__px_splice *s, ah__px_block *b)
{
    if (!b->id) {
        char id[96];
        snprintf(id, sizeof id, "msg_px_%zu_%.60s", b->index, s->id ? s->id : "");
        b->id = ah__px_strdup(id);
    }
    return b->id ? b->id : "msg_px";
}

static ah__wr_block wblock(ah__px_splice *s, ah__px_block *b)
{
    ah__wr_block w = {.kind = b->kind, .id = b->kind == AH__WR_TEXT ? item_id(s, b) : b->id,
                      .call_id = b->call_id, .name = b->name,
                      .text = b->text.data, .text_len = b->text.len,
                      .signature = b->sig.data, .signature_len = b->sig.len,
                      .encrypted = b->enc.data, .encrypted_len = b->enc.len,
                      .raw = b->raw.data, .raw_len = b->raw.len};
    return w;
}

static void start(ah__px_splice *s)
{
    ah__wr_resp_head h = rhead(s);
    ah__wr_r_lifecycle(&s->o, "response.created", &h, s->seq++);
    ah__wr_r_lifecycle(&s->o, "response.in_progress", &h, s->seq++);
}

static void open_block(ah__px_splice *s, ah__px_block *b)
{
    ah__wr_block w = wblock(s, b);
    ah__wr_r_item_event(&s->o, 0, &w, b->index, s->seq++);
    ah__wr_r_part_event(&s->o, 0, w.id, b->index, NULL, 0, s->seq++);
}

static void text(ah__px_splice *s, ah__px_block *b, const char *t, size_t n)
{
    ah__wr_r_text_delta(&s->o, item_id(s, b), b->index, t, n, s->seq++);
}

static void close_block(ah__px_splice *s, ah__px_block *b)
{
    ah__wr_block w = wblock(s, b);
    ah__wr_r_text_done(&s->o, w.id, b->index, w.text, w.text_len, s->seq++);
    ah__wr_r_part_event(&s->o, 1, w.id, b->index, w.text, w.text_len, s->seq++);
    ah__wr_r_item_event(&s->o, 1, &w, b->index, s->seq++);
}

static void whole(ah__px_splice *s, ah__px_block *b)
{
    ah__wr_block w = wblock(s, b);
    if (b->kind == AH__WR_TEXT) {
        open_block(s, b);
        text(s, b, w.text, w.text_len);
        close_block(s, b);
        return;
    }
    ah__wr_r_item_event(&s->o, 0, &w, b->index, s->seq++);
    if (b->kind == AH__WR_TOOL) {
        ah__wr_r_args_delta(&s->o, w.id, b->index, w.text, w.text_len, s->seq++);
        ah__wr_r_args_done(&s->o, w.id, b->index, w.text, w.text_len, s->seq++);
    }
    ah__wr_r_item_event(&s->o, 1, &w, b->index, s->seq++);
}

static void terminal(ah__px_splice *s, ah__wr_resp_status st, const char *reason)
{
    ah__wr_block *items = s->n ? calloc(s->n, sizeof *items) : NULL;
    if (s->n && !items) {
        s->failed_nomem = 1;
        return;
    }
    for (size_t i = 0; i < s->n; i++)
        items[i] = wblock(s, s->blocks[i]);
    ah__wr_usage u = {.input = s->input_tokens, .output = s->output_tokens,
                      .cache_read = s->cache_read};
    ah__wr_resp_end end = {.items = items, .n_items = s->n, .usage = &u,
                           .incomplete_reason = reason};
    ah__wr_resp_head h = rhead(s);
    ah__wr_r_terminal(&s->o, &h, st, &end, s->seq++);
    free(items);
}

static void finish(ah__px_splice *s)
{
    /* the upstream's own end: completed, or incomplete (max_output_tokens ...) */
    const char *st = s->stop_reason;
    if (st && strcmp(st, "incomplete") == 0)
        terminal(s, AH__WR_RS_INCOMPLETE, "max_output_tokens");
    else
        terminal(s, AH__WR_RS_COMPLETED, NULL);
}

static void fail(ah__px_splice *s, const char *type, const char *message)
{
    (void)type;
    (void)message;
    terminal(s, AH__WR_RS_INCOMPLETE, "interrupted");
}

const ah__px_out ah__px_out_responses = {
    .messages_key = "input",
    .head = head,
    .start = start,
    .open = open_block,
    .text = text,
    .close = close_block,
    .whole = whole,
    .finish = finish,
    .fail = fail,
};
