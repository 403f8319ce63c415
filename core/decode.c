/* decode.c - the decoder core: SSE framing, one JSON parse per event, dispatch to the
 * format, sticky errors, hooks, end-of-stream verdict, and the non-stream entry point.
 * A format-blind driver: what differs between formats is in the provider's table
 * (provider.h, d->p); nothing here branches on the format.
 *
 * Invariants:
 *   - each event's data is parsed exactly once: by the fast path (decode_fast.c) when it
 * is one of the hot delta shapes, else into the format's filtered tree in an arena on
 * this file's stack (decode_tree.c), else by cJSON; either tree is freed before the next
 * event; format code borrows it and copies only what the timeline keeps;
 *   - after the first decoder error every feed returns the same sticky status and nothing
 *     more reaches the timeline or the hooks;
 *   - "[DONE]" is the end-of-data sentinel in every format (Chat always sends it, some
 *     Responses servers do too); later events are ignored;
 *   - the byte offset named in an error is the end of the offending event (the SSE
 * parser's consumed offset); a chunk is handed to it as its complete lines, then its
 * unterminated rest, so the events before a framing error are all decoded.
 */
#include "decode_internal.h"
#include "provider.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- lifecycle
 * ---------------------------------------------------------------------------- */

static void decoder_init(ah_decoder *d, ah_wire wire, ah_timeline *tl,
                         const ah_decoder_hooks *hooks, void *ud)
{
    memset(d, 0, sizeof *d);
    d->wire = wire;
    d->p = ah__provider_of(wire);
    d->tl = tl;
    if (hooks)
        d->hooks = *hooks;
    d->ud = ud;
    d->status = AH_OK;
    d->ev_end = -1;
    d->last_seq = -1;
    d->skip_upto = -1;
    d->chat_open = AH__NONE;
    d->gem_open = AH__NONE;
    d->skip_min = 64u << 10;
}

static ah_decoder *decoder_make(ah_wire wire, ah_timeline *tl, const ah_decoder_hooks *hooks,
                                void *ud, char *err, size_t errsize, ah_status *st)
{
    if (!ah__provider_of(wire) || !tl) {
        ah__bufprintf(err, errsize, "decoder: %s", !tl ? "a timeline is required"
                                                       : "unknown wire format");
        *st = AH_ERR_INVALID;
        return NULL;
    }
    *st = AH_ERR_NOMEM;
    ah_decoder *d = malloc(sizeof *d);
    if (!d) {
        ah__bufprintf(err, errsize, "decoder: out of memory");
        return NULL;
    }
    decoder_init(d, wire, tl, hooks, ud);
    /* The SSE parser comes with the first byte (ah_decoder_feed): a decoder whose
     * stream has not begun holds none. */
    d->sse = NULL;
    return d;
}

/* The public form (status, out-pointer, error buffer): see the header. */
ah_status ah_decoder_new(ah_wire wire, ah_timeline *tl, const ah_decoder_hooks *hooks,
                         void *ud, ah_decoder **out, char *err, size_t errsize)
{
    ah_status st = AH_OK;
    if (!out) {
        if (err && errsize)
            ah__bufprintf(err, errsize, "ah_decoder_new: out is NULL");
        return AH_ERR_INVALID;
    }
    *out = decoder_make(wire, tl, hooks, ud, err, errsize, &st);
    return *out ? AH_OK : st;
}

void ah_decoder_free(ah_decoder *d)
{
    if (!d)
        return;
    ah_sse_free(d->sse);
    free(d->scratch);
    free(d->fast_bytes);
    free(d->tail);
    free(d->err);
    free(d->finish_err);
    free(d->name_buf);
    free(d);
}

void ah__decoder_set_slow(ah_decoder *d, int slow)
{
    if (d)
        d->slow = slow != 0;
}

void ah__decoder_set_no_tree(ah_decoder *d, int off)
{
    if (d)
        d->no_tree = off != 0;
}

void ah__decoder_set_skip_min(ah_decoder *d, size_t n)
{
    if (d)
        d->skip_min = n;
}

/* The error of a decoder whose error text had no memory to live in. */
static const ah_error dec_nomem = {.kind = AH_EK_STREAM, .retry_after_ms = -1,
                                   .retry_after_source = AH_HINT_NONE, .should_retry = -1,
                                   .message = "out of memory (the decoder's error)"};

const ah_error *ah_decoder_error(const ah_decoder *d)
{
    if (!d || d->status == AH_OK)
        return NULL;
    return d->err ? d->err : &dec_nomem;
}

/* ---- resumable streams
 * ---------------------------------------------------------------------- */

const char *ah_decoder_response_id(const ah_decoder *d)
{
    if (!d || !d->response_id[0] || ah_timeline_finished(d->tl))
        return NULL;
    return d->response_id;
}

int ah_decoder_cursor(const ah_decoder *d, const char **response_id, int64_t *last_seq)
{
    if (!d || d->nonstream || d->status != AH_OK || d->last_seq < 0 || d->done_seen ||
        ah_timeline_error(d->tl) || !ah_decoder_response_id(d))
        return 0;
    if (response_id)
        *response_id = d->response_id;
    if (last_seq)
        *last_seq = d->last_seq;
    return 1;
}

ah_status ah_decoder_reattach(ah_decoder *d)
{
    if (!d || d->nonstream)
        return AH_ERR_INVALID;
    if (d->status != AH_OK)
        return AH_ERR_STATE;
    if (d->sse)
        ah_sse_reset(d->sse);
    d->skip_upto = d->last_seq;
    d->finish_called = 0;
    d->finish_status = AH_OK;
    if (d->finish_err)
        ah_error_clear(d->finish_err);
    d->ev_end = -1;
    return AH_OK;
}

uint64_t ah_decoder_duplicates(const ah_decoder *d)
{
    return d ? d->duplicates : 0;
}

/* ---- events
 * ----------------------------------------------------------------------------------- */

static int is_done(const char *s, size_t n)
{
    while (n && (*s == ' ' || *s == '\t' || *s == '\r' || *s == '\n'))
        s++, n--;
    while (n &&
           (s[n - 1] == ' ' || s[n - 1] == '\t' || s[n - 1] == '\r' || s[n - 1] == '\n'))
        n--;
    return n == 6 && memcmp(s, "[DONE]", 6) == 0;
}

static ah_status dispatch(ah_decoder *d, const cJSON *root)
{
    const char *type = NULL;
    if (d->p->event_type) {
        d->ev_type = d->p->event_type;
    } else {
        type = ah__jstr(root, "type");
        if (!type)
            return ah__dec_fail(d, AH_ERR_PARSE, "event data has no \"type\" string");
        d->ev_type = type;
    }
    return d->p->event(d, root, type);
}

static ah_status feed_event(ah_decoder *d, const ah_sse_event *ev, int64_t end)
{
    if (d->status != AH_OK)
        return d->status;
    if (d->finish_called)
        return AH_ERR_STATE;
    d->events++;
    d->ev_end = end;
    d->ev_type = ev->type;
    d->raw = ev->data; /* for ah__dec_name while this event is decoded */
    d->raw_len = ev->data_len;
    if (ah_decoder_ended(d)) {
        /* Nothing after the final event is the answer: a tool_use sent after
         * message_stop never runs. */
        ah__log(AH_LOG_DEBUG, "%s stream: event after the final event ignored",
                ah_wire_name(d->wire));
        return AH_OK;
    }
    if (is_done(ev->data, ev->data_len)) {
        d->done_seen = 1;
        if (d->p->end)
            d->p->end(d);
        return d->status;
    }
    /* Invalid UTF-8 and lone surrogate escapes become U+FFFD here, at the boundary:
     * the timeline, history, events and the next request body only see valid text, and
     * one bad character never makes the event (and every continuation) unparseable.
     * Both the fast path and cJSON see the repaired bytes. */
    char *fixed = NULL;
    size_t fixed_len = 0;
    int fx = ah__json_text_fix(ev->data, ev->data_len, &fixed, &fixed_len);
    if (fx < 0)
        return ah__dec_fail(d, AH_ERR_NOMEM, "out of memory");
    const char *data = fx ? fixed : ev->data;
    size_t data_len = fx ? fixed_len : ev->data_len;
    ah_status st;
    if (!d->slow && ah__fast_event(d, data, data_len, &st)) {
        free(fixed);
        d->ev_type = NULL;
        d->raw = NULL;
        if (st != AH_OK && d->status == AH_OK)
            st = ah__dec_fail(d, st, "failed");
        return st;
    }
    /* The other events: the format's own parser for the big events it applies to
     * (Responses' closing events repeating a long answer: it leaves the answer out
     * before anything reads it), else the format's filtered tree in an arena on this
     * stack (decode_tree.c), else cJSON. */
    ah__tree_arena arena_mem;
    ah__tree_arena_init(&arena_mem);
    cJSON *root = !d->slow && d->p->parse ? d->p->parse(d, data, data_len) : NULL;
    int arena = 0;
    if (!root && !d->slow && !d->no_tree &&
        (root = ah__tree_parse(d, &arena_mem, data, data_len)) != NULL)
        arena = 1;
    d->tree_events += (uint64_t)arena;
    if (!arena)
        ah__tree_arena_release(&arena_mem); /* what a refused big event took */
    if (!root)
        root = cJSON_ParseWithLength(data, data_len);
    free(fixed);
    if (!root)
        return ah__dec_fail(d, AH_ERR_PARSE, "malformed JSON in event data (%zu bytes)",
                            ev->data_len);
    if (!cJSON_IsObject(root))
        st = ah__dec_fail(d, AH_ERR_PARSE, "event data is JSON but not an object");
    else
        st = dispatch(d, root);
    d->ev_type = NULL; /* it pointed into the tree or the borrowed event */
    d->raw = NULL;
    if (st != AH_OK && d->status == AH_OK)
        st = ah__dec_fail(d, st, "failed");
    if (arena)
        ah__tree_arena_release(&arena_mem);
    else
        cJSON_Delete(root);
    return st;
}

ah_status ah_decoder_feed_event(ah_decoder *d, const ah_sse_event *ev)
{
    if (!d || !ev)
        return AH_ERR_INVALID;
    return feed_event(d, ev, -1);
}

enum { TAIL_MAX = 64 << 10 };

/* A format with a tail op: keep the stream bytes from the last event's end on (at most
 * TAIL_MAX of them, contiguous), given the chunk [start, start + n) just fed. */
static void tail_keep(ah_decoder *d, const char *chunk, size_t n, uint64_t start)
{
    uint64_t from = d->tail_from;
    if (from > d->tail_off) {
        uint64_t drop = from - d->tail_off;
        if (drop >= d->tail_len) {
            d->tail_len = 0;
        } else {
            memmove(d->tail, d->tail + drop, d->tail_len - (size_t)drop);
            d->tail_len -= (size_t)drop;
        }
        d->tail_off = from;
    }
    size_t skip = from > start ? (size_t)(from - start) : 0;
    if (skip >= n)
        return;
    if (d->tail_len == 0)
        d->tail_off = start + skip;
    if (d->tail_off + d->tail_len != start + skip)
        return; /* full before: what follows the gap is not kept */
    size_t add = n - skip;
    if (add > TAIL_MAX - d->tail_len)
        add = TAIL_MAX - d->tail_len;
    if (!add)
        return;
    if (!d->tail && !(d->tail = malloc(TAIL_MAX)))
        return; /* no tail then: the verdict is the plain one */
    memcpy(d->tail + d->tail_len, chunk + skip, add);
    d->tail_len += add;
}

ah_status ah_decoder_feed(ah_decoder *d, const void *bytes, size_t len)
{
    if (!d || (!bytes && len))
        return AH_ERR_INVALID;
    if (d->status != AH_OK)
        return d->status;
    if (d->finish_called)
        return AH_ERR_STATE;
    if (len && !d->sse) {
        /* Responses' closing events (output_text.done, output_item.done,
         * response.completed) each repeat the whole answer on one data line, so a long
         * answer needs lines as large as an event: the SSE defaults (1 MiB line) would
         * cut a legitimate stream. */
        static const ah_sse_limits limits = {.max_line = 16u << 20, .max_event = 16u << 20};
        if (!(d->sse = ah_sse_new(&limits)))
            return ah__dec_fail(d, AH_ERR_NOMEM, "out of memory (the SSE parser)");
    }
    const char *p = bytes;
    while (len > 0) {
        /* The complete lines first, then the unterminated rest: every event before a bad
         * line (say, one over the line limit) is decoded, as if fed line by line. */
        size_t take = len;
        while (take > 0 && p[take - 1] != '\n' && p[take - 1] != '\r')
            take--;
        if (take == 0)
            take = len;
        ah_status st = ah_sse_feed(d->sse, p, take);
        d->bytes += take;
        p += take;
        len -= take;
        ah_sse_event ev;
        int r;
        while (st == AH_OK && (r = ah_sse_next(d->sse, &ev)) != 0) {
            if (r < 0) {
                st = ah_sse_status(d->sse);
                break;
            }
            st = feed_event(d, &ev, (int64_t)ah_sse_bytes_consumed(d->sse));
            d->tail_from = ah_sse_bytes_consumed(d->sse);
        }
        if (d->p->tail)
            tail_keep(d, p - take, take, d->bytes - take);
        if (st != AH_OK) {
            if (d->status == AH_OK) {
                d->ev_end = (int64_t)d->bytes;
                d->ev_type = "(framing)";
                ah__dec_fail(d, st == AH_OK ? AH_ERR_PARSE : st, "SSE framing: %s",
                             ah_sse_errmsg(d->sse));
            }
            return d->status;
        }
    }
    return AH_OK;
}

int ah_decoder_ended(const ah_decoder *d)
{
    /* [DONE], or (unless the format ends only there, as Chat does: a finish_reason
     * chunk is followed by the usage chunk) the event that finished the timeline
     * (message_stop, response.completed, ...). */
    return d && (d->done_seen || (!d->p->ends_at_done && ah_timeline_finished(d->tl)));
}

ah_status ah_decoder_finish(ah_decoder *d, ah_error *err)
{
    if (!d)
        return AH_ERR_INVALID;
    if (!d->finish_called) {
        d->finish_called = 1;
        if (d->finish_err)
            ah_error_clear(d->finish_err);
        if (d->status == AH_OK && d->p->end)
            d->p->end(d);
        if (d->status == AH_OK && d->p->tail && d->tail_len && !ah_timeline_finished(d->tl))
            d->p->tail(d, d->tail, d->tail_len);
        const ah_error *pe = ah_timeline_error(d->tl);
        ah_error *fe = NULL;
        if (d->status != AH_OK) {
            d->finish_status = d->status;
            if ((fe = ah__dec_err_slot(&d->finish_err)) != NULL)
                *fe = *ah_decoder_error(d);
        } else if (pe) {
            d->finish_status = AH_ERR_PROVIDER;
            if ((fe = ah__dec_err_slot(&d->finish_err)) != NULL)
                *fe = *pe;
        } else if (!ah_timeline_finished(d->tl)) {
            d->finish_status = AH_ERR_TRUNCATED;
            if ((fe = ah__dec_err_slot(&d->finish_err)) != NULL)
                ah_error_set(fe, AH_EK_STREAM, 0,
                         "%s stream ended before %s (after %llu bytes, %llu events)",
                         d->p->name, d->p->end_marker,
                         (unsigned long long)d->bytes, (unsigned long long)d->events);
        } else {
            d->finish_status = AH_OK;
        }
    }
    if (err) {
        if (d->finish_status == AH_OK)
            ah_error_clear(err);
        else
            *err = d->finish_err ? *d->finish_err : dec_nomem;
    }
    return d->finish_status;
}

/* ---- non-stream bodies
 * ---------------------------------------------------------------------- */

ah_status ah_decode_response(ah_wire wire, const char *body, size_t len, ah_timeline *tl,
                             ah_error *err)
{
    ah_decoder d;
    if (!tl || (!body && len) || !ah__provider_of(wire))
        return AH_ERR_INVALID;
    decoder_init(&d, wire, tl, NULL, NULL);
    d.nonstream = 1;
    char *fixed = NULL;
    size_t fixed_len = 0;
    int fx = body ? ah__json_text_fix(body, len, &fixed, &fixed_len) : 0;
    cJSON *root = !body || fx < 0 ? NULL
                  : fx           ? cJSON_ParseWithLength(fixed, fixed_len)
                                 : cJSON_ParseWithLength(body, len);
    free(fixed);
    ah_status st;
    d.raw = body;
    d.raw_len = len;
    if (!root)
        st = ah__dec_fail(&d, AH_ERR_PARSE, "invalid JSON (%zu bytes)", len);
    else if (!cJSON_IsObject(root))
        st = ah__dec_fail(&d, AH_ERR_PARSE, "JSON but not an object");
    else
        st = d.p->body(&d, root);
    cJSON_Delete(root);
    if (st == AH_OK && ah_timeline_error(tl)) {
        /* The body is the provider's error object (HTTP 200 with an error, or a caller
         * decoding an error body): classify it as the provider's, not as a decode
         * failure. */
        st = AH_ERR_PROVIDER;
        if (err) {
            *err = *ah_timeline_error(tl);
            err->kind = AH_EK_HTTP;
        }
    } else if (err) {
        if (st != AH_OK && d.err)
            *err = *d.err;
        else if (st != AH_OK && d.status != AH_OK)
            *err = dec_nomem;
        else
            ah_error_clear(err);
    }
    free(d.err);
    free(d.finish_err);
    return st;
}
