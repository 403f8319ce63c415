/* splice.c - upstream attempts in, one response out (docs/proxy.md, "The splice").
 *
 * Each attempt's bytes go through an SSE parser into the client's own decoder and a
 * timeline; the decoder's hooks route each block:
 *   - text streams live: its start, its deltas as they come. Its stop is deferred until
 *     something else is written, so a continuation can go on in the same block;
 *   - reasoning is written whole once complete (its signature with it); a continuation's
 *     reasoning that comes before the text it continues is dropped (it would sit after
 *     the text it precedes);
 *   - tool calls, server tools and unknown blocks are held until the response completes
 *     (and so is everything after the first of them), then written whole: a client
 *     never sees a partial, repeated or unfinished call.
 * A continuation's first text block passes through the overlap trimmer, against the text
 * already forwarded: a restatement is dropped before it is written. Nothing reaches the
 * client that the timeline has not accepted, so what it has read is always a prefix of
 * one valid response; indexes, sequence numbers and usage are the splice's own.
 *
 * The continuation request is the client's request with what was forwarded as a partial
 * assistant message (and the prompt), in the format's own message shapes: the core's
 * request encoder writes those messages from a small conversation, and they are appended
 * to the client's "messages" / "input". */
#include "proxy_internal.h"

#include "decode_internal.h"

#include "agenthost/conversation.h"

#include <stdlib.h>
#include <string.h>

char *ah__px_strdup(const char *s)
{
    return s ? ah__strdup(s) : NULL;
}

const ah__px_out *ah__px_out_of(ah_wire wire)
{
    switch (wire) {
    case AH_WIRE_ANTHROPIC:
        return &ah__px_out_anthropic;
    case AH_WIRE_OPENAI:
        return &ah__px_out_openai;
    case AH_WIRE_RESPONSES:
        return &ah__px_out_responses;
    default:
        return NULL;
    }
}

static void block_free(ah__px_block *b)
{
    free(b->id);
    free(b->call_id);
    free(b->name);
    ah__wbuf_free(&b->text);
    ah__wbuf_free(&b->sig);
    ah__wbuf_free(&b->enc);
    ah__wbuf_free(&b->raw);
}

static void attempt_clear(ah__px_splice *s)
{
    ah_decoder_free(s->dec);
    s->dec = NULL;
    ah_timeline_free(s->tl);
    s->tl = NULL;
    ah_sse_free(s->sse);
    s->sse = NULL;
    ah__overlap_free(s->ov);
    s->ov = NULL;
}

/* ---- the client's request ------------------------------------------------------------
 * Every member of it the proxy reads (server.c: stream, store, background, model,
 * thinking; out_openai.c: stream_options.include_usage; the continuation: model, the
 * rest from a whole parse of the body). A long conversation is then scanned, never
 * built. */
static const ah__tree_key req_thinking_keys[] = {
    AH__TK("type", AH__TK_DEEP, NULL),
    AH__TK_END,
};
static const ah__tree_key req_stream_options_keys[] = {
    AH__TK("include_usage", AH__TK_DEEP, NULL),
    AH__TK_END,
};
static const ah__tree_key req_keys[] = {
    AH__TK("model", AH__TK_DEEP, NULL),
    AH__TK("stream", AH__TK_DEEP, NULL),
    AH__TK("store", AH__TK_DEEP, NULL),
    AH__TK("background", AH__TK_DEEP, NULL),
    AH__TK("thinking", AH__TK_OBJ, req_thinking_keys),
    AH__TK("stream_options", AH__TK_OBJ, req_stream_options_keys),
    AH__TK_END,
};

cJSON *ah__px_request_parse(const char *body, size_t len, ah__tree_arena **arena)
{
    *arena = malloc(sizeof **arena);
    if (*arena) {
        ah__tree_arena_init(*arena);
        cJSON *root = ah__tree_parse_keys(req_keys, 0, *arena, body, len);
        if (root)
            return root;
        ah__tree_arena_release(*arena);
        free(*arena);
        *arena = NULL;
    }
    return cJSON_ParseWithLength(body, len);
}

void ah__px_request_free(cJSON *req, ah__tree_arena *arena)
{
    if (arena) {
        ah__tree_arena_release(arena);
        free(arena);
    } else {
        cJSON_Delete(req);
    }
}

ah_status ah__px_splice_init(ah__px_splice *s, ah_wire wire, const cJSON *req)
{
    memset(s, 0, sizeof *s);
    s->wire = wire;
    s->out = ah__px_out_of(wire);
    s->req = req;
    s->input_tokens = -1;
    s->ov_block = -1;
    return s->out ? AH_OK : AH_ERR_INVALID;
}

void ah__px_splice_clear(ah__px_splice *s)
{
    attempt_clear(s);
    for (size_t i = 0; i < s->n; i++) {
        block_free(s->blocks[i]);
        free(s->blocks[i]);
    }
    free(s->blocks);
    free(s->map);
    free(s->id);
    free(s->model);
    free(s->service_tier);
    free(s->fingerprint);
    free(s->stop_reason);
    cJSON_Delete(s->tmpl);
    ah__wbuf_free(&s->o);
    ah__wbuf_free(&s->prefix);
    memset(s, 0, sizeof *s);
}

/* ---- blocks ------------------------------------------------------------------------ */

static ah__px_block *new_block(ah__px_splice *s, ah__wr_kind kind)
{
    if (s->n == s->cap) {
        size_t cap = s->cap ? s->cap * 2 : 8;
        ah__px_block **nb = realloc(s->blocks, cap * sizeof *nb);
        if (!nb) {
            s->failed_nomem = 1;
            return NULL;
        }
        s->blocks = nb;
        s->cap = cap;
    }
    ah__px_block *b = calloc(1, sizeof *b);
    if (!b) {
        s->failed_nomem = 1;
        return NULL;
    }
    s->blocks[s->n++] = b;
    b->kind = kind;
    if (kind == AH__WR_TOOL && s->wire == AH_WIRE_OPENAI)
        b->index = s->next_tool++;
    else
        b->index = s->next_index++;
    return b;
}

static long block_pos(const ah__px_splice *s, const ah__px_block *b)
{
    for (size_t i = s->n; i-- > 0;)
        if (s->blocks[i] == b)
            return (long)i;
    return -1;
}

void ah__px_flush_text(ah__px_splice *s)
{
    if (!s->open_text)
        return;
    ah__px_block *b = s->open_text;
    s->open_text = NULL;
    if (b->open) {
        b->open = 0;
        s->out->close(s, b);
        return;
    }
    /* never written (no text came): the client never saw it, so it never was */
    if (s->n && s->blocks[s->n - 1] == b) {
        s->n--;
        s->next_index--;
        block_free(b);
        free(b);
    }
}

static int *map_at(ah__px_splice *s, size_t i)
{
    if (i >= s->map_cap) {
        size_t cap = s->map_cap ? s->map_cap : 16;
        while (cap <= i)
            cap *= 2;
        int *m = realloc(s->map, cap * sizeof *m);
        if (!m) {
            s->failed_nomem = 1;
            return NULL;
        }
        for (size_t k = s->map_cap; k < cap; k++)
            m[k] = AH__PX_UNSEEN;
        s->map = m;
        s->map_cap = cap;
    }
    return &s->map[i];
}

/* The text forwarded so far, blocks joined by a newline (what a restatement repeats). */
static char *committed_text(const ah__px_splice *s, size_t *len)
{
    size_t total = 0;
    for (size_t i = 0; i < s->n; i++)
        if (s->blocks[i]->kind == AH__WR_TEXT && s->blocks[i]->text.len)
            total += s->blocks[i]->text.len + 1;
    char *c = malloc(total + 1);
    if (!c)
        return NULL;
    size_t pos = 0;
    for (size_t i = 0; i < s->n; i++) {
        const ah__px_block *b = s->blocks[i];
        if (b->kind != AH__WR_TEXT || !b->text.len)
            continue;
        if (pos)
            c[pos++] = '\n';
        memcpy(c + pos, b->text.data, b->text.len);
        pos += b->text.len;
    }
    c[pos] = '\0';
    *len = pos;
    return c;
}

static void write_text(ah__px_splice *s, ah__px_block *b, const char *t, size_t n)
{
    if (!n)
        return;
    if (!b->open) { /* a text block starts with its first byte */
        b->open = 1;
        s->out->open(s, b);
    }
    ah__wbuf_put(&b->text, t, n);
    s->out->text(s, b, t, n);
}

/* A complete timeline block as a block of the response, written whole. */
static void emit_whole(ah__px_splice *s, const ah_block *tb)
{
    ah__wr_kind kind;
    switch (tb->kind) {
    case AH_BLOCK_TEXT:
        kind = AH__WR_TEXT;
        break;
    case AH_BLOCK_REASONING:
        kind = tb->redacted ? AH__WR_REDACTED : AH__WR_THINKING;
        break;
    case AH_BLOCK_TOOL_USE:
        kind = AH__WR_TOOL;
        break;
    case AH_BLOCK_SERVER_TOOL_USE:
        kind = AH__WR_SERVER_TOOL;
        break;
    default:
        kind = AH__WR_RAW;
    }
    if (kind == AH__WR_TEXT && tb->text_len == 0)
        return;
    ah__px_flush_text(s);
    ah__px_block *b = new_block(s, kind);
    if (!b)
        return;
    if (kind == AH__WR_TOOL || kind == AH__WR_SERVER_TOOL) {
        b->id = ah__px_strdup(s->wire == AH_WIRE_RESPONSES && tb->item_id[0] ? tb->item_id
                                                                            : tb->id);
        b->call_id = ah__px_strdup(tb->id);
        b->name = ah__px_strdup(tb->name);
        ah__wbuf_put(&b->text, tb->arguments, tb->arguments_len);
    } else {
        b->id = ah__px_strdup(tb->item_id);
        ah__wbuf_put(&b->text, tb->text, tb->text_len);
        ah__wbuf_put(&b->sig, tb->signature, tb->signature_len);
        ah__wbuf_put(&b->enc, tb->encrypted, tb->encrypted_len);
        ah__wbuf_put(&b->raw, tb->raw, tb->raw_len);
    }
    if (b->text.failed || b->sig.failed || b->enc.failed || b->raw.failed)
        s->failed_nomem = 1;
    s->out->whole(s, b);
}

/* ---- the decoder's hooks ----------------------------------------------------------- */

static void hook_start(void *ud, size_t index, ah_block_kind kind, const char *id,
                       const char *name)
{
    ah__px_splice *s = ud;
    (void)id;
    (void)name;
    int *m = map_at(s, index);
    if (!m)
        return;
    if (kind == AH_BLOCK_TEXT && !s->holding) {
        ah__px_block *b = NULL;
        if (!s->saw_text && s->attempt > 1) {
            /* The continuation's first text block: trimmed against what was forwarded,
             * and it goes on in the block the client has open, if any. */
            size_t clen = 0;
            char *c = committed_text(s, &clen);
            if (!c) {
                s->failed_nomem = 1;
                return;
            }
            if (clen) {
                /* text cut inside its block may have been cut inside a word */
                s->ov = s->open_text ? ah__overlap_new_cut(c, clen) : ah__overlap_new(c, clen);
                if (!s->ov)
                    s->failed_nomem = 1;
                s->ov_block = (long)index;
            }
            free(c);
            b = s->open_text;
        }
        s->saw_text = 1;
        if (!b) {
            ah__px_flush_text(s);
            b = new_block(s, AH__WR_TEXT);
            if (!b)
                return;
            const ah_block *tb = ah_timeline_block(s->tl, index);
            if (tb && tb->item_id[0])
                b->id = ah__px_strdup(tb->item_id); /* Responses: the message item */
            s->open_text = b; /* written from its first byte on */
        }
        *m = (int)block_pos(s, b);
        return;
    }
    if (kind == AH_BLOCK_REASONING && s->continuation && !s->saw_text && s->open_text) {
        *m = AH__PX_DROPPED; /* it would come after the text it precedes */
        return;
    }
    if (kind != AH_BLOCK_REASONING)
        s->holding = 1; /* a tool call or an unknown block: the rest waits for the end */
    *m = AH__PX_HELD;
}

static void hook_delta(void *ud, size_t index, ah_block_kind kind, const char *text,
                       size_t len)
{
    ah__px_splice *s = ud;
    if (kind != AH_BLOCK_TEXT || index >= s->map_cap || s->map[index] < 0)
        return;
    ah__px_block *b = s->blocks[s->map[index]];
    if (s->ov && (long)index == s->ov_block) {
        if (ah__overlap_feed(s->ov, text, len, &text, &len) != AH_OK) {
            s->failed_nomem = 1;
            return;
        }
    }
    write_text(s, b, text, len);
}

static void hook_end(void *ud, size_t index, const ah_block *tb)
{
    ah__px_splice *s = ud;
    if (index >= s->map_cap)
        return;
    int m = s->map[index];
    if (m >= 0) {
        ah__px_block *b = s->blocks[m];
        if (s->ov && (long)index == s->ov_block) {
            const char *out;
            size_t len;
            if (ah__overlap_finish(s->ov, &out, &len) != AH_OK) {
                s->failed_nomem = 1;
                return;
            }
            write_text(s, b, out, len);
        }
        return; /* its stop waits: a continuation may go on in it */
    }
    if (m == AH__PX_HELD && tb->kind == AH_BLOCK_REASONING && !s->holding) {
        emit_whole(s, tb);
        s->map[index] = AH__PX_DROPPED; /* written */
    }
}

/* ---- attempts ---------------------------------------------------------------------- */

ah_status ah__px_splice_attempt(ah__px_splice *s, int continuation)
{
    attempt_clear(s);
    s->attempt++;
    s->continuation = continuation;
    s->holding = 0;
    s->first_event = 0;
    s->events = 0;
    s->saw_text = 0;
    s->ov_block = -1;
    s->trimmed_attempt = 0;
    for (size_t i = 0; i < s->map_cap; i++)
        s->map[i] = AH__PX_UNSEEN;
    ah_decoder_hooks hooks = {.block_start = hook_start, .delta = hook_delta,
                              .block_end = hook_end};
    s->tl = ah_timeline_new();
    s->sse = ah_sse_new(NULL);
    if (!s->tl || !s->sse)
        return AH_ERR_NOMEM;
    return ah_decoder_new(s->wire, s->tl, &hooks, s, &s->dec, NULL, 0);
}

static void start_response(ah__px_splice *s)
{
    if (s->started)
        return;
    s->started = 1;
    s->out->start(s);
}

ah_status ah__px_splice_feed(ah__px_splice *s, const char *buf, size_t len, ah_error *err)
{
    if (ah_sse_feed(s->sse, buf, len) != AH_OK) {
        ah_error_set(err, AH_EK_STREAM, 0, "malformed event stream: %s", ah_sse_errmsg(s->sse));
        return AH_ERR_PARSE;
    }
    ah_sse_event ev;
    int r;
    while ((r = ah_sse_next(s->sse, &ev)) == 1) {
        if (ah_decoder_ended(s->dec))
            continue;
        if (!s->first_event) {
            /* The format's opening event: the response's head (first attempt only). */
            ah__tree_arena arena;
            ah__tree_arena_init(&arena);
            cJSON *data = ah__tree_parse_keys(s->out->head_keys, s->out->head_typed, &arena,
                                              ev.data, ev.data_len);
            int in_arena = data != NULL;
            if (!in_arena) {
                ah__tree_arena_release(&arena); /* what a refused big event took */
                data = cJSON_ParseWithLength(ev.data, ev.data_len);
            }
            int opening = data && s->out->head(s, &ev, data);
            if (in_arena)
                ah__tree_arena_release(&arena);
            else
                cJSON_Delete(data);
            if (opening)
                s->first_event = 1;
        }
        ah_status st = ah_decoder_feed_event(s->dec, &ev);
        if (st != AH_OK) {
            const ah_error *de = ah_decoder_error(s->dec);
            if (de)
                *err = *de;
            else
                ah_error_set(err, AH_EK_STREAM, 0, "stream decoder: %s",
                             ah_status_message(st));
            return st;
        }
        s->events++;
        if (s->first_event && !s->started && ah_timeline_input_tokens(s->tl) >= 0 &&
            s->input_tokens < 0)
            s->input_tokens = ah_timeline_input_tokens(s->tl);
        if (s->first_event)
            start_response(s);
        if (s->failed_nomem) {
            ah_error_set(err, AH_EK_BUDGET, 0, "out of memory in the proxy's splice");
            return AH_ERR_NOMEM;
        }
    }
    if (r < 0) {
        ah_error_set(err, AH_EK_STREAM, 0, "malformed event stream: %s", ah_sse_errmsg(s->sse));
        return AH_ERR_PARSE;
    }
    return AH_OK;
}

ah_status ah__px_splice_eof(ah__px_splice *s, ah_error *err)
{
    return ah_decoder_finish(s->dec, err);
}

int ah__px_splice_ended(const ah__px_splice *s)
{
    return s->dec && ah_decoder_ended(s->dec) && !ah_timeline_error(s->tl);
}

static void count_usage(ah__px_splice *s)
{
    if (s->input_tokens < 0 && ah_timeline_input_tokens(s->tl) >= 0)
        s->input_tokens = ah_timeline_input_tokens(s->tl);
    int64_t out = ah_timeline_output_tokens(s->tl);
    if (out > 0)
        s->output_tokens += out;
    if (s->ov)
        s->trimmed += ah__overlap_trimmed(s->ov);
}

void ah__px_splice_finish(ah__px_splice *s)
{
    count_usage(s);
    start_response(s); /* an answer with no event before its end */
    /* the held blocks, in stream order */
    for (size_t i = 0; i < ah_timeline_count(s->tl) && i < s->map_cap; i++) {
        const ah_block *tb = ah_timeline_block(s->tl, i);
        if (s->map[i] == AH__PX_HELD && tb->closed)
            emit_whole(s, tb);
    }
    ah__px_flush_text(s);
    free(s->stop_reason);
    s->stop_reason = ah__px_strdup(ah_timeline_stop_reason(s->tl));
    s->out->finish(s);
    s->ended = 1;
    attempt_clear(s);
}

void ah__px_splice_break(ah__px_splice *s)
{
    count_usage(s);
    attempt_clear(s);
}

void ah__px_splice_fail(ah__px_splice *s, const ah_error *err)
{
    if (s->ended)
        return;
    start_response(s);
    ah__px_flush_text(s);
    const char *type = err && err->provider_type[0] ? err->provider_type : NULL;
    s->out->fail(s, type, err && err->message[0] ? err->message : "upstream stream failed");
    s->ended = 1;
    attempt_clear(s);
}

int ah__px_splice_provider_error(const ah__px_splice *s)
{
    return s->tl && ah_timeline_error(s->tl) != NULL;
}

int ah__px_splice_has_partial(const ah__px_splice *s)
{
    for (size_t i = 0; i < s->n; i++)
        if (s->blocks[i]->kind != AH__WR_TEXT || s->blocks[i]->text.len)
            return 1;
    return 0;
}

/* ---- the continuation request ------------------------------------------------------ */

static ah_status add_partial(const ah__px_splice *s, ah_conversation *c)
{
    ah_status st = ah_conversation_begin_assistant(c);
    for (size_t i = 0; st == AH_OK && i < s->n; i++) {
        const ah__px_block *b = s->blocks[i];
        switch (b->kind) {
        case AH__WR_TEXT:
            if (b->text.len)
                st = ah_conversation_add_text(c, b->text.data, b->text.len);
            break;
        case AH__WR_THINKING:
        case AH__WR_REDACTED:
            st = ah_conversation_add_reasoning(
                c, b->text.data ? b->text.data : "", b->sig.len ? b->sig.data : NULL,
                b->id && b->id[0] ? b->id : NULL, b->enc.len ? b->enc.data : NULL,
                b->kind == AH__WR_REDACTED);
            break;
        default:
            break; /* tool calls are never forwarded before the end */
        }
    }
    if (st == AH_OK)
        st = ah_conversation_set_partial(c, 1);
    return st;
}

ah_status ah__px_continuation_body(const ah__px_splice *s, ah_cont_mode mode,
                                   const char *prompt, char **out, size_t *len)
{
    *out = NULL;
    *len = 0;
    const char *model = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(s->req, "model"));
    ah_conversation *c = ah_conversation_new();
    if (!c)
        return AH_ERR_NOMEM;
    ah_status st = ah_conversation_add_user_text(c, "-");
    if (st == AH_OK)
        st = add_partial(s, c);
    if (st == AH_OK && mode == AH_CONT_PROMPT)
        st = ah_conversation_add_user_text(c, prompt);
    char *enc = NULL;
    size_t enc_len = 0;
    if (st == AH_OK) {
        ah_request_opts o;
        ah_request_opts_init(&o);
        o.model = model ? model : "model";
        o.max_tokens = 1;
        char msg[128];
        st = ah_request_encode(s->wire, c, &o, &enc, &enc_len, msg, sizeof msg);
    }
    ah_conversation_free(c);
    if (st != AH_OK)
        return st;
    cJSON *encoded = cJSON_ParseWithLength(enc, enc_len);
    free(enc);
    cJSON *body = s->req_body ? cJSON_ParseWithLength(s->req_body, s->req_body_len)
                              : cJSON_Duplicate(s->req, 1);
    st = AH_ERR_NOMEM;
    if (!encoded || !body)
        goto done;
    const char *key = s->out->messages_key;
    cJSON *add = cJSON_GetObjectItemCaseSensitive(encoded, key);
    cJSON *dst = cJSON_GetObjectItemCaseSensitive(body, key);
    if (cJSON_IsString(dst)) {
        /* Responses: a string input is one user message */
        cJSON *arr = cJSON_CreateArray(), *m = cJSON_CreateObject();
        if (!arr || !m || !cJSON_AddStringToObject(m, "role", "user") ||
            !cJSON_AddStringToObject(m, "content", dst->valuestring)) {
            cJSON_Delete(arr);
            cJSON_Delete(m);
            goto done;
        }
        cJSON_AddItemToArray(arr, m);
        cJSON_ReplaceItemInObjectCaseSensitive(body, key, arr);
        dst = arr;
    }
    if (!cJSON_IsArray(add) || !cJSON_IsArray(dst)) {
        st = AH_ERR_INVALID;
        goto done;
    }
    /* the encoded conversation's first message is the placeholder user turn */
    int first = 1;
    for (cJSON *m = add->child; m;) {
        cJSON *next = m->next;
        if (first) {
            first = 0;
        } else {
            cJSON *copy = cJSON_Duplicate(m, 1);
            if (!copy)
                goto done;
            cJSON_AddItemToArray(dst, copy);
        }
        m = next;
    }
    char *printed = cJSON_PrintUnformatted(body);
    if (!printed)
        goto done;
    *out = ah__strdup(printed);
    cJSON_free(printed);
    if (*out) {
        *len = strlen(*out);
        st = AH_OK;
    }
done:
    cJSON_Delete(encoded);
    cJSON_Delete(body);
    return st;
}
