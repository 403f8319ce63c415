/* decode_responses.c - OpenAI Responses API: stream events and non-stream bodies.
 *
 * Stream: response.output_item.added/.done frame each output item (message, reasoning,
 * function_call, or a server-side item such as web_search_call); text, refusal, reasoning
 * and argument deltas fill them; response.completed / incomplete / failed end the stream;
 * `error` is the provider's in-stream error. Dispatch is on the payload's "type" (some
 * servers send no `event:` lines, and add "data: [DONE]").
 *
 * Invariants:
 *   - state is keyed by output_index (+ content_index for text parts), never by item_id:
 *     some servers rotate item ids on every event;
 *   - one REASONING block per reasoning item; its summary/content parts are joined by
 *     "\n\n" in order of first content; its encrypted_content and item id are the LAST
 * ones seen (output_item.added, output_item.done, then response.completed's output[]);
 *   - a TOOL_USE block's id is the call_id (what function_call_output must reference);
 * the item id (fc_...) is kept as item_id;
 *   - blocks close at output_item.done; response.completed / incomplete also close what a
 *     server left open (the response is final), response.failed does not;
 *   - a .done event that repeats content is used only when no delta delivered it.
 */
#include "decode_internal.h"

#include <string.h>

enum { PART_SUMMARY = 1, PART_CONTENT = 2 };

static ah_status nomem(ah_decoder *d)
{
    return ah__dec_fail(d, AH_ERR_NOMEM, "out of memory");
}

static ah_status need_int(ah_decoder *d, const cJSON *o, const char *key, int64_t *v)
{
    if (!ah__jint(o, key, v))
        return ah__dec_fail(d, AH_ERR_PARSE, "missing or invalid \"%s\"", key);
    return AH_OK;
}

static ah_status set_str(ah_decoder *d, size_t i, ah__field f, const char *s)
{
    if (s && ah__tl_set(d->tl, i, f, s, strlen(s)) != AH_OK)
        return nomem(d);
    return AH_OK;
}

/* The open block for an item, or AH__NONE. A delta for an item that is already done is an
 * error: it would change a block after it was declared complete. */
static ah_status item_block(ah_decoder *d, int64_t oi, int64_t ci, size_t *out)
{
    *out = ah__tl_find(d->tl, oi, ci, 1);
    if (*out == AH__NONE && ah__tl_find(d->tl, oi, ci, 0) != AH__NONE)
        return ah__dec_fail(d, AH_ERR_PARSE, "content for output %lld after it was done",
                            (long long)oi);
    return AH_OK;
}

static ah_status close_item(ah_decoder *d, int64_t oi)
{
    size_t n = ah_timeline_count(d->tl);
    for (size_t i = 0; i < n; i++) {
        ah_status st;
        if (ah__tl_key(d->tl, i) == oi && (st = ah__dec_close(d, i)) != AH_OK)
            return st;
    }
    return AH_OK;
}

/* Reasoning text for part (kind, idx) of the reasoning block of output oi. */
static ah_status reasoning_text(ah_decoder *d, int64_t oi, int part, int64_t pidx,
                                const char *item_id, const char *s, size_t n)
{
    size_t i;
    ah_status st = item_block(d, oi, -1, &i);
    if (st != AH_OK)
        return st;
    if (i == AH__NONE) {
        if ((st = ah__dec_open(d, AH_BLOCK_REASONING, oi, -1, NULL, NULL, &i)) != AH_OK ||
            (st = set_str(d, i, AH__F_ITEM_ID, item_id)) != AH_OK)
            return st;
    } else if (ah__tl_kind(d->tl, i) != AH_BLOCK_REASONING) {
        return ah__dec_fail(d, AH_ERR_PARSE, "reasoning text for output %lld, a %s block",
                            (long long)oi, ah_block_kind_name(ah__tl_kind(d->tl, i)));
    }
    if (ah__tl_part(d->tl, i, part, pidx) &&
        (st = ah__dec_content(d, i, "\n\n", 2)) != AH_OK)
        return st;
    return ah__dec_content(d, i, s, n);
}

/* Fill the (empty) reasoning block of output oi from a whole item's summary[] and
 * content[]. */
static ah_status reasoning_from_item(ah_decoder *d, int64_t oi, const cJSON *item)
{
    static const char *const arrays[] = {"summary", "content"};
    ah_status st;
    for (int k = 0; k < 2; k++) {
        const cJSON *part;
        int64_t idx = 0;
        cJSON_ArrayForEach(part, ah__jarr(item, arrays[k]))
        {
            const char *t = ah__jstr(part, "text");
            if (t && *t &&
                (st = reasoning_text(d, oi, k + 1, idx, NULL, t, strlen(t))) != AH_OK)
                return st;
            idx++;
        }
    }
    return AH_OK;
}

/* Update a reasoning block's item id and encrypted_content (the last value wins). */
static ah_status reasoning_meta(ah_decoder *d, size_t i, const cJSON *item)
{
    ah_status st = set_str(d, i, AH__F_ITEM_ID, ah__jstr(item, "id"));
    if (st == AH_OK)
        st = set_str(d, i, AH__F_ENCRYPTED, ah__jstr(item, "encrypted_content"));
    return st;
}

/* Text for part (oi, ci) of a message; item_id and s have lengths (the fast path's
 * strings point into the event data). */
static ah_status text_partn(ah_decoder *d, int64_t oi, int64_t ci, const char *item_id,
                            size_t idn, const char *s, size_t n, int only_if_empty)
{
    size_t i;
    ah_status st = item_block(d, oi, ci, &i);
    if (st != AH_OK)
        return st;
    if (i == AH__NONE) {
        if ((st = ah__dec_open(d, AH_BLOCK_TEXT, oi, ci, NULL, NULL, &i)) != AH_OK)
            return st;
    } else if (ah__tl_kind(d->tl, i) != AH_BLOCK_TEXT) {
        return ah__dec_fail(d, AH_ERR_PARSE, "text for output %lld, a %s block",
                            (long long)oi, ah_block_kind_name(ah__tl_kind(d->tl, i)));
    }
    if (item_id && ah__tl_set(d->tl, i, AH__F_ITEM_ID, item_id, idn) != AH_OK)
        return nomem(d);
    if (!s || (only_if_empty && ah__tl_len(d->tl, i, AH__F_TEXT) > 0))
        return AH_OK;
    return ah__dec_content(d, i, s, n);
}

static ah_status text_part(ah_decoder *d, int64_t oi, int64_t ci, const char *item_id,
                           const char *s, int only_if_empty)
{
    return text_partn(d, oi, ci, item_id, item_id ? strlen(item_id) : 0, s,
                      s ? strlen(s) : 0, only_if_empty);
}

/* Open the block of a new item (output_item.added, or .done / a body without one). */
static ah_status open_item(ah_decoder *d, int64_t oi, const cJSON *item, size_t *out)
{
    const char *type = ah__jstr(item, "type");
    ah_status st;
    *out = AH__NONE;
    if (!type)
        return ah__dec_fail(d, AH_ERR_PARSE, "output item %lld has no \"type\"",
                            (long long)oi);
    if (strcmp(type, "message") == 0)
        return AH_OK; /* its content parts become TEXT blocks as they arrive */
    if (ah__tl_find(d->tl, oi, -1, 0) != AH__NONE)
        return ah__dec_fail(d, AH_ERR_PARSE, "output item %lld added twice",
                            (long long)oi);
    if (strcmp(type, "reasoning") == 0) {
        if ((st = ah__dec_open(d, AH_BLOCK_REASONING, oi, -1, NULL, NULL, out)) != AH_OK)
            return st;
        return reasoning_meta(d, *out, item);
    }
    if (strcmp(type, "function_call") == 0) {
        const char *call_id = ah__jstr(item, "call_id");
        const char *name = ah__dec_name(d, ah__jstr(item, "name"));
        const char *args = ah__jstr(item, "arguments");
        if ((st = ah__dec_open(d, AH_BLOCK_TOOL_USE, oi, -1, call_id, name, out)) !=
                AH_OK ||
            (st = set_str(d, *out, AH__F_ITEM_ID, ah__jstr(item, "id"))) != AH_OK)
            return st;
        return args ? ah__dec_content(d, *out, args, strlen(args)) : AH_OK;
    }
    /* web_search_call, file_search_call, custom tools, future item types: kept verbatim.
     */
    if ((st = ah__dec_open(d, AH_BLOCK_OPAQUE, oi, -1, NULL, NULL, out)) != AH_OK ||
        (st = set_str(d, *out, AH__F_TYPE, type)) != AH_OK ||
        (st = set_str(d, *out, AH__F_ITEM_ID, ah__jstr(item, "id"))) != AH_OK)
        return st;
    if (ah__tl_set_json(d->tl, *out, AH__F_RAW, item) != AH_OK)
        return nomem(d);
    return AH_OK;
}

/* An item is complete (output_item.done, or an item of a non-stream body): fill what no
 * delta delivered, take its final metadata, close its blocks. */
static ah_status item_done(ah_decoder *d, int64_t oi, const cJSON *item)
{
    const char *type = ah__jstr(item, "type");
    ah_status st;
    size_t i;
    if (!type)
        return ah__dec_fail(d, AH_ERR_PARSE, "output item %lld has no \"type\"",
                            (long long)oi);
    if (strcmp(type, "message") == 0) {
        const cJSON *part;
        int64_t ci = 0;
        cJSON_ArrayForEach(part, ah__jarr(item, "content"))
        {
            const char *pt = ah__jstr(part, "type");
            const char *text = ah__jstr(part, "text");
            if (pt && strcmp(pt, "output_text") == 0 && text && *text &&
                ah__tl_find(d->tl, oi, ci, 0) == AH__NONE &&
                (st = text_part(d, oi, ci, ah__jstr(item, "id"), text, 1)) != AH_OK)
                return st;
            const char *refusal = ah__jstr(part, "refusal");
            if (pt && strcmp(pt, "refusal") == 0 && refusal &&
                !ah_timeline_refusal(d->tl, NULL) &&
                ah__tl_refusal_append(d->tl, refusal, strlen(refusal)) != AH_OK)
                return nomem(d);
            ci++;
        }
        return close_item(d, oi);
    }
    i = ah__tl_find(d->tl, oi, -1, 0);
    if (i == AH__NONE) {
        if ((st = open_item(d, oi, item, &i)) != AH_OK)
            return st;
    } else if (!ah__tl_is_open(d->tl, i)) {
        return ah__dec_fail(d, AH_ERR_PARSE, "output item %lld done twice",
                            (long long)oi);
    }
    switch (ah__tl_kind(d->tl, i)) {
    case AH_BLOCK_REASONING:
        if ((st = reasoning_meta(d, i, item)) != AH_OK)
            return st;
        if (ah__tl_len(d->tl, i, AH__F_TEXT) == 0 &&
            (st = reasoning_from_item(d, oi, item)) != AH_OK)
            return st;
        break;
    case AH_BLOCK_TOOL_USE: {
        const char *args = ah__jstr(item, "arguments");
        if (ah__tl_len(d->tl, i, AH__F_ID) == 0 &&
            (st = set_str(d, i, AH__F_ID, ah__jstr(item, "call_id"))) != AH_OK)
            return st;
        if (ah__tl_len(d->tl, i, AH__F_NAME) == 0 &&
            (st = set_str(d, i, AH__F_NAME, ah__dec_name(d, ah__jstr(item, "name")))) !=
                AH_OK)
            return st;
        if (args && ah__tl_len(d->tl, i, AH__F_ARGS) == 0 &&
            (st = ah__dec_content(d, i, args, strlen(args))) != AH_OK)
            return st;
        break;
    }
    case AH_BLOCK_OPAQUE:
        if (ah__tl_set_json(d->tl, i, AH__F_RAW, item) != AH_OK)
            return nomem(d);
        break;
    default:
        break;
    }
    return close_item(d, oi);
}

static ah_status on_args_done(ah_decoder *d, const cJSON *root)
{
    int64_t oi;
    size_t i;
    ah_status st = need_int(d, root, "output_index", &oi);
    const char *args = ah__jstr(root, "arguments");
    if (st != AH_OK || (st = item_block(d, oi, -1, &i)) != AH_OK)
        return st;
    if (i == AH__NONE || ah__tl_kind(d->tl, i) != AH_BLOCK_TOOL_USE)
        return ah__dec_fail(d, AH_ERR_PARSE, "no function_call at output %lld",
                            (long long)oi);
    if (!args)
        return AH_OK;
    if (ah__tl_len(d->tl, i, AH__F_ARGS) == 0)
        return ah__dec_content(d, i, args, strlen(args));
    const ah_block *b = ah_timeline_block(d->tl, i);
    if (b->arguments_len != strlen(args) ||
        memcmp(b->arguments, args, b->arguments_len) != 0) {
        /* The .done event carries the whole arguments: it is authoritative. */
        ah__log(AH_LOG_DEBUG,
                "responses: arguments.done differs from the deltas; using it");
        if (ah__tl_set(d->tl, i, AH__F_ARGS, args, strlen(args)) != AH_OK)
            return nomem(d);
    }
    return AH_OK;
}

/* A response object's status (the stop reason; an incomplete one says why in
 * incomplete_details.reason) and usage (cached_tokens are part of input_tokens; the
 * format has no cache-write figure: 0). */
static ah_status read_status_usage(ah_decoder *d, const cJSON *r)
{
    const char *status = ah__jstr(r, "status");
    if (ah__tl_set_stop_reason(d->tl, status) != AH_OK)
        return AH_ERR_NOMEM;
    const char *why = ah__jstr(ah__jobj(r, "incomplete_details"), "reason");
    if (status && strcmp(status, "incomplete") == 0 && why)
        ah__tl_set_stop_norm(d->tl, strcmp(why, "max_output_tokens") == 0 ? "max_tokens"
                                    : strcmp(why, "content_filter") == 0  ? "refusal"
                                                                          : NULL);
    const cJSON *u = ah__jobj(r, "usage");
    if (u) {
        int64_t in = -1, out = -1, cached = -1;
        ah__jint(u, "input_tokens", &in);
        ah__jint(u, "output_tokens", &out);
        ah__tl_replace_usage(d->tl, in, out);
        ah__jint(ah__jobj(u, "input_tokens_details"), "cached_tokens", &cached);
        ah__tl_set_cache_usage(d->tl, cached, in >= 0 ? 0 : -1);
    }
    return AH_OK;
}

static ah_status on_terminal(ah_decoder *d, const cJSON *root, const char *type)
{
    const cJSON *r = ah__jobj(root, "response");
    ah_status st;
    if (!r)
        return ah__dec_fail(d, AH_ERR_PARSE, "missing \"response\" object");
    if (read_status_usage(d, r) != AH_OK)
        return nomem(d);
    /* The final response may carry a newer encrypted_content (and item id) per reasoning
     * item; output[] is indexed by output_index. */
    const cJSON *item;
    int64_t oi = 0;
    cJSON_ArrayForEach(item, ah__jarr(r, "output"))
    {
        const char *it = ah__jstr(item, "type");
        size_t i = ah__tl_find(d->tl, oi, -1, 0);
        if (it && strcmp(it, "reasoning") == 0 && i != AH__NONE &&
            ah__tl_kind(d->tl, i) == AH_BLOCK_REASONING &&
            (st = reasoning_meta(d, i, item)) != AH_OK)
            return st;
        oi++;
    }
    if (strcmp(type, "response.failed") == 0) {
        const cJSON *e = ah__jobj(r, "error");
        if (e) {
            if ((st = ah__dec_provider_error(d, e)) != AH_OK)
                return st;
        } else if (ah__tl_set_error(d->tl, "response_failed",
                                    "response.failed without an "
                                    "error object",
                                    NULL) != AH_OK) {
            return nomem(d);
        }
    } else if ((st = ah__dec_close_all(d)) != AH_OK) {
        return st;
    }
    ah__tl_set_finished(d->tl);
    return AH_OK;
}

static ah_status on_delta(ah_decoder *d, const cJSON *root, const char *type)
{
    int64_t oi, idx = 0;
    ah_status st = need_int(d, root, "output_index", &oi);
    if (st != AH_OK)
        return st;
    const char *delta = ah__jstr(root, "delta");
    if (!delta)
        return ah__dec_fail(d, AH_ERR_PARSE, "missing \"delta\" string");
    const char *item_id = ah__jstr(root, "item_id");
    size_t n = strlen(delta);
    if (strcmp(type, "response.output_text.delta") == 0) {
        ah__jint(root, "content_index", &idx);
        return text_part(d, oi, idx, item_id, delta, 0);
    }
    if (strcmp(type, "response.reasoning_summary_text.delta") == 0) {
        ah__jint(root, "summary_index", &idx);
        return reasoning_text(d, oi, PART_SUMMARY, idx, item_id, delta, n);
    }
    if (strcmp(type, "response.reasoning_text.delta") == 0) {
        ah__jint(root, "content_index", &idx);
        return reasoning_text(d, oi, PART_CONTENT, idx, item_id, delta, n);
    }
    if (strcmp(type, "response.refusal.delta") == 0) {
        if (ah__tl_refusal_append(d->tl, delta, n) != AH_OK)
            return nomem(d);
        return AH_OK;
    }
    /* response.function_call_arguments.delta */
    size_t i;
    if ((st = item_block(d, oi, -1, &i)) != AH_OK)
        return st;
    if (i == AH__NONE || ah__tl_kind(d->tl, i) != AH_BLOCK_TOOL_USE)
        return ah__dec_fail(d, AH_ERR_PARSE, "no function_call at output %lld",
                            (long long)oi);
    return ah__dec_content(d, i, delta, n);
}

/* reasoning .done events repeat the text: used only when no delta delivered it. */
static ah_status on_reasoning_done(ah_decoder *d, const cJSON *root, int part)
{
    int64_t oi, idx = 0;
    ah_status st = need_int(d, root, "output_index", &oi);
    const char *text = ah__jstr(root, "text");
    if (st != AH_OK)
        return st;
    ah__jint(root, part == PART_SUMMARY ? "summary_index" : "content_index", &idx);
    size_t i = ah__tl_find(d->tl, oi, -1, 0);
    if (!text || !*text || (i != AH__NONE && ah__tl_len(d->tl, i, AH__F_TEXT) > 0) ||
        (i != AH__NONE && !ah__tl_is_open(d->tl, i)))
        return AH_OK;
    return reasoning_text(d, oi, part, idx, ah__jstr(root, "item_id"), text,
                          strlen(text));
}

/* The resume cursor. In a re-attached stream, an event at or below the sequence_number
 * the last stream stopped at is a repeat (the stream may start early) and is skipped
 * whole, until the first event past it. Within one stream nothing is skipped: some
 * compatible servers number events loosely, and a single stream has nothing to repeat.
 * The response id comes with the events that carry the response object. */
static int seq_repeat(ah_decoder *d, int64_t seq, const char *type)
{
    if (seq < 0 || d->skip_upto < 0)
        return 0;
    if (seq <= d->skip_upto) {
        d->duplicates++;
        ah__log(AH_LOG_DEBUG, "responses: event %lld ('%s') repeated; skipped",
                (long long)seq, type);
        return 1;
    }
    d->skip_upto = -1;
    return 0;
}

static int is_repeat(ah_decoder *d, const cJSON *root, const char *type, int64_t *seq)
{
    *seq = -1;
    if (!ah__jint(root, "sequence_number", seq))
        *seq = -1;
    return seq_repeat(d, *seq, type);
}

static void note_response_id(ah_decoder *d, const cJSON *root)
{
    const char *id = ah__jstr(ah__jobj(root, "response"), "id");
    size_t n = id ? strlen(id) : 0;
    if (n > 0 && n < sizeof d->response_id)
        memcpy(d->response_id, id, n + 1);
}

static ah_status responses_event(ah_decoder *d, const cJSON *root, const char *type);

ah_status ah__responses_event(ah_decoder *d, const cJSON *root, const char *type)
{
    int64_t seq;
    if (is_repeat(d, root, type, &seq))
        return AH_OK;
    ah_status st = responses_event(d, root, type);
    if (st == AH_OK && seq >= 0)
        d->last_seq = seq;
    return st;
}

ah_status ah__responses_text_delta(ah_decoder *d, int64_t seq, int64_t oi, int64_t ci,
                                   const char *item_id, size_t idn, const char *s,
                                   size_t n)
{
    if (seq_repeat(d, seq, "response.output_text.delta"))
        return AH_OK;
    ah_status st = text_partn(d, oi, ci, item_id, idn, s, n, 0);
    if (st == AH_OK && seq >= 0)
        d->last_seq = seq;
    return st;
}

static ah_status responses_event(ah_decoder *d, const cJSON *root, const char *type)
{
    int64_t oi, idx = 0;
    size_t i;
    ah_status st;
    if (strcmp(type, "error") == 0) {
        const cJSON *e = ah__jobj(root, "error");
        return ah__dec_provider_error(d, e ? e : root);
    }
    if (strncmp(type, "response.", 9) != 0)
        goto unknown;
    const char *t = type + 9;
    if (strcmp(t, "output_text.delta") == 0 ||
        strcmp(t, "function_call_arguments.delta") == 0 ||
        strcmp(t, "reasoning_summary_text.delta") == 0 ||
        strcmp(t, "reasoning_text.delta") == 0 || strcmp(t, "refusal.delta") == 0)
        return on_delta(d, root, type);
    if (strcmp(t, "output_item.added") == 0 || strcmp(t, "output_item.done") == 0) {
        const cJSON *item = ah__jobj(root, "item");
        if ((st = need_int(d, root, "output_index", &oi)) != AH_OK)
            return st;
        if (!item)
            return ah__dec_fail(d, AH_ERR_PARSE, "missing \"item\" object");
        if (t[12] == 'd')
            return item_done(d, oi, item);
        return open_item(d, oi, item, &i);
    }
    if (strcmp(t, "content_part.added") == 0) {
        const char *pt = ah__jstr(ah__jobj(root, "part"), "type");
        if ((st = need_int(d, root, "output_index", &oi)) != AH_OK)
            return st;
        ah__jint(root, "content_index", &idx);
        if (pt && strcmp(pt, "output_text") == 0 &&
            ah__tl_find(d->tl, oi, idx, 0) == AH__NONE)
            return text_part(d, oi, idx, ah__jstr(root, "item_id"), NULL, 0);
        return AH_OK;
    }
    if (strcmp(t, "output_text.done") == 0) {
        if ((st = need_int(d, root, "output_index", &oi)) != AH_OK)
            return st;
        ah__jint(root, "content_index", &idx);
        i = ah__tl_find(d->tl, oi, idx, 0);
        if (i != AH__NONE && !ah__tl_is_open(d->tl, i))
            return AH_OK;
        return text_part(d, oi, idx, ah__jstr(root, "item_id"), ah__jstr(root, "text"),
                         1);
    }
    if (strcmp(t, "function_call_arguments.done") == 0)
        return on_args_done(d, root);
    if (strcmp(t, "reasoning_summary_text.done") == 0)
        return on_reasoning_done(d, root, PART_SUMMARY);
    if (strcmp(t, "reasoning_text.done") == 0)
        return on_reasoning_done(d, root, PART_CONTENT);
    if (strcmp(t, "completed") == 0 || strcmp(t, "incomplete") == 0 ||
        strcmp(t, "failed") == 0)
        return on_terminal(d, root, type);
    if (strcmp(t, "created") == 0 || strcmp(t, "in_progress") == 0 ||
        strcmp(t, "queued") == 0) {
        note_response_id(d, root);
        return AH_OK;
    }
    if (strcmp(t, "content_part.done") == 0 ||
        strcmp(t, "refusal.done") == 0 ||
        strcmp(t, "reasoning_summary_part.added") == 0 ||
        strcmp(t, "reasoning_summary_part.done") == 0 ||
        strcmp(t, "output_text.annotation.added") == 0)
        return AH_OK;
unknown:
    ah__log(AH_LOG_DEBUG, "responses: unknown event type '%s' ignored", type);
    return AH_OK;
}

ah_status ah__responses_body(ah_decoder *d, const cJSON *root)
{
    const cJSON *output = ah__jarr(root, "output");
    const cJSON *err = ah__jobj(root, "error");
    ah_status st;
    if (!output && err)
        return ah__dec_provider_error(d, err);
    if (!output)
        return ah__dec_fail(d, AH_ERR_PARSE, "not a response: no \"output\" array");
    const cJSON *item;
    int64_t oi = 0;
    cJSON_ArrayForEach(item, output)
    {
        size_t i;
        if (!cJSON_IsObject(item))
            return ah__dec_fail(d, AH_ERR_PARSE, "output[%lld] is not an object",
                                (long long)oi);
        if ((st = open_item(d, oi, item, &i)) != AH_OK ||
            (st = item_done(d, oi, item)) != AH_OK)
            return st;
        oi++;
    }
    if (read_status_usage(d, root) != AH_OK)
        return nomem(d);
    if (err && (st = ah__dec_provider_error(d, err)) != AH_OK)
        return st;
    ah__tl_set_finished(d->tl);
    return AH_OK;
}

/* What the stream handlers above read (decode_tree.c builds only this): the root's
 * scalars, "item" whole (an unknown item is kept as JSON), part.type, "error" whole, and
 * of "response" its id, status, incomplete_details, usage and error (whole) and of each
 * output[] object its type, id and encrypted_content: the answer the closing events
 * repeat (part.text, response.output[].content) is left out. The root, "part",
 * "response" and each output item are only looked up by key; an "error" event is never
 * decoded from the filtered tree (it may print the root). */
static const ah__tree_key part_keys[] = {
    AH__TK("type", AH__TK_DEEP, NULL),
    AH__TK_END,
};
static const ah__tree_key output_keys[] = {
    AH__TK("type", AH__TK_DEEP, NULL),
    AH__TK("id", AH__TK_DEEP, NULL),
    AH__TK("encrypted_content", AH__TK_DEEP, NULL),
    AH__TK_END,
};
static const ah__tree_key response_keys[] = {
    AH__TK("id", AH__TK_DEEP, NULL),
    AH__TK("status", AH__TK_DEEP, NULL),
    AH__TK("incomplete_details", AH__TK_DEEP, NULL),
    AH__TK("usage", AH__TK_DEEP, NULL),
    AH__TK("error", AH__TK_DEEP, NULL),
    AH__TK("output", AH__TK_EACH, output_keys),
    AH__TK_END,
};
const ah__tree_key ah__tree_responses[] = {
    AH__TK("type", AH__TK_DEEP, NULL),
    AH__TK("sequence_number", AH__TK_DEEP, NULL),
    AH__TK("output_index", AH__TK_DEEP, NULL),
    AH__TK("content_index", AH__TK_DEEP, NULL),
    AH__TK("summary_index", AH__TK_DEEP, NULL),
    AH__TK("item_id", AH__TK_DEEP, NULL),
    AH__TK("delta", AH__TK_DEEP, NULL),
    AH__TK("text", AH__TK_DEEP, NULL),
    AH__TK("arguments", AH__TK_DEEP, NULL),
    AH__TK("item", AH__TK_DEEP, NULL),
    AH__TK("part", AH__TK_OBJ, part_keys),
    AH__TK("response", AH__TK_OBJ, response_keys),
    AH__TK("error", AH__TK_DEEP, NULL),
    AH__TK_END,
};
