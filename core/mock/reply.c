/* reply.c - the mock's format-blind writer driver and the registry of its formats.
 *
 * Each wire format's events are planned in its own format_<name>.c (one ah__mock_format
 * table) and written by the writers the mock shares with the proxy (core/writer/);
 * this file only walks a writer's segments, cuts an event in half for a malformed
 * step, and defaults error types and messages. The layouts follow the real APIs as recorded in tests/fixtures/real-streams,
 * so a decoder that reads the mock reads the providers. This file and the formats share
 * no code with the client's encoders/decoders on purpose.
 *
 * A writer's stream is a short table of segments (event kind x count), so event i is
 * generated on demand in O(1) amortised: a 200k-delta reply never exists as a whole. */
#include "mock_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* THE REGISTRY: one mock format per AH_WIRE_MAP line, in ah_wire order. */
static const ah__mock_format *const formats[] = {
#define X(name, s, path) &ah__mock_format_##name,
    AH_WIRE_MAP(X)
#undef X
};

const ah__mock_format *ah__mock_format_of(ah_wire wire)
{
    return (unsigned)wire < (unsigned)AH_WIRE_COUNT_ ? formats[wire] : NULL;
}

/* ---- the writer -------------------------------------------------------------------- */

size_t ah__mock_ncalls(const ah__mock_reply *r)
{
    return r->has_tool ? r->ncalls : 0;
}

void ah__mock_writer_add(ah__mock_writer *w, int kind, size_t count, size_t call)
{
    if (count == 0 || w->nsegs >= sizeof w->segs / sizeof w->segs[0])
        return;
    w->segs[w->nsegs].kind = kind;
    w->segs[w->nsegs].count = count;
    w->segs[w->nsegs].call = call;
    w->nsegs++;
    w->total += count;
}

ah__mock_writer *ah__mock_writer_new(ah_wire wire, const ah__mock_reply *r,
                                     const char *request_id)
{
    const ah__mock_format *f = ah__mock_format_of(wire);
    if (!f)
        return NULL;
    ah__mock_writer *w = calloc(1, sizeof *w);
    if (!w)
        return NULL;
    w->f = f;
    w->r = r;
    ah__bufprintf(w->request_id, sizeof w->request_id, "%s", request_id);
    if (f->plan(w) != 0) {
        ah__mock_writer_free(w);
        return NULL;
    }
    return w;
}

void ah__mock_writer_free(ah__mock_writer *w)
{
    if (!w)
        return;
    ah__mock_buf_free(&w->chunk);
    ah__mock_buf_free(&w->scratch);
    free(w);
}

size_t ah__mock_writer_event_count(const ah__mock_writer *w)
{
    return w->total;
}

int ah__mock_writer_next(ah__mock_writer *w, ah__mock_buf *out)
{
    while (w->seg_i < w->nsegs && w->in_seg >= w->segs[w->seg_i].count) {
        w->seg_i++;
        w->in_seg = 0;
    }
    if (w->seg_i >= w->nsegs)
        return 0;
    w->f->emit(w, out, w->segs[w->seg_i].kind, w->in_seg, w->segs[w->seg_i].call);
    w->in_seg++;
    w->seq++;
    return 1;
}

void ah__mock_writer_malformed(ah__mock_writer *w, ah__mock_buf *out)
{
    /* The next event with its data cut in half: any strict prefix of a JSON object (or
     * of "[DONE]") is not JSON. */
    ah__mock_buf *s = &w->scratch;
    ah__mock_buf_reset(s);
    if (!ah__mock_writer_next(w, s) || s->failed) {
        AH__MOCK_PUT(out, "data: {\"type\":\n\n");
        return;
    }
    const char *data = strstr(s->data, "data: ");
    size_t head = (size_t)(data - s->data) + 6;
    size_t json = s->len - head - 2; /* without the blank line */
    size_t half = ah__mock_utf8_floor(s->data + head, json / 2);
    ah__mock_buf_put(out, s->data, head + half);
    AH__MOCK_PUT(out, "\n\n");
}

void ah__mock_writer_error(ah__mock_writer *w, ah__mock_buf *out, const char *type,
                           const char *message)
{
    if (!type)
        type = w->f->default_error_type;
    if (!message)
        message = ah__mock_default_message(type);
    w->f->error_event(w, out, type, message);
}

void ah__mock_reply_body(ah_wire wire, const ah__mock_reply *r, ah__mock_buf *o)
{
    const ah__mock_format *f = ah__mock_format_of(wire);
    if (f)
        f->body(r, o);
    else
        o->failed = 1;
}

void ah__mock_error_body(ah_wire wire, int status, const char *type, const char *message,
                         const char *request_id, ah__mock_buf *out)
{
    const ah__mock_format *f = ah__mock_format_of(wire);
    if (f)
        f->error_body(status, type, message, request_id, out);
    else
        out->failed = 1;
}

const char *ah__mock_default_error_type(ah_wire wire)
{
    const ah__mock_format *f = ah__mock_format_of(wire);
    return f ? f->default_error_type : "server_error";
}

int ah__mock_error_status(ah_wire wire, const char *type)
{
    static const struct {
        const char *type;
        int status;
    } t[] = {
        {"invalid_request_error", 400},
        {"authentication_error", 401},
        {"billing_error", 402},
        {"permission_error", 403},
        {"not_found_error", 404},
        {"request_too_large", 413},
        {"rate_limit_error", 429},
        {"requests", 429},
        {"tokens", 429},
        {"rate_limit_exceeded", 429},
        {"insufficient_quota", 429},
        {"api_error", 500},
        {"server_error", 500},
        {"timeout_error", 504},
    };
    const ah__mock_format *f = ah__mock_format_of(wire);
    if (!type)
        type = ah__mock_default_error_type(wire);
    if (strcmp(type, "overloaded_error") == 0)
        return f ? f->overloaded_status : 503;
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++)
        if (strcmp(type, t[i].type) == 0)
            return t[i].status;
    return 500;
}

/* ---- shared pieces ----------------------------------------------------------------- */

const char *ah__mock_call_id(char *buf, size_t size, const char *base, size_t call)
{
    if (call == 0)
        return base;
    snprintf(buf, size, "%.47s_%zu", base, call);
    return buf;
}

ah__wr_usage ah__mock_usage(const ah__mock_reply *r, long long output)
{
    ah__wr_usage u = {.input = r->input_tokens,
                      .output = output,
                      .cache_read = r->cache_read,
                      .cache_write = r->cache_write};
    if (r->input_excludes_cache)
        u.input = r->input_tokens - r->cache_read - r->cache_write;
    return u;
}
