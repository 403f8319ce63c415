/* fuzz_decode.h - the body shared by the three decoder fuzz targets (one wire format
 * each).
 *
 * Input: one control byte, then the data. Control bit 7 set: the data is a non-stream
 * response body for ah_decode_response(). Otherwise the data is a stream, decoded whole,
 * in two feeds at a split point chosen by the control byte, and (for inputs up to 4 KiB)
 * byte by byte, each with hooks recording what they see. Checked invariants (a violation
 * calls
 * __builtin_trap() so libFuzzer records the input):
 *   - every split gives the same feed/finish statuses and the same timeline;
 *   - the hook stream agrees with the timeline: one start per block in order, deltas
 *     concatenating to the text of text/reasoning blocks, one end per closed block and
 * none for an open one, nothing after a block ended;
 *   - a closed tool block has parsed arguments, an open one has none;
 *   - finish is AH_OK only when the timeline is finished and no error was seen; an error
 *     always carries kind STREAM (DECODE for bodies) and a non-empty message;
 *   - the partial drain holds only closed text/reasoning blocks, in order, and its counts
 *     add up; every string of every block is NUL-terminated at its length;
 *   - Responses streams numbered like a real background stream (every event a
 *     sequence_number, strictly increasing): a break at the split point, then a re-attach
 *     replaying the whole stream gives the uninterrupted timeline, every delta once.
 */
#ifndef AH_FUZZ_DECODE_H
#define AH_FUZZ_DECODE_H

#include "agenthost.h"

#include <cjson/cJSON.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define CHECK(c)                                                                         \
    do {                                                                                 \
        if (!(c))                                                                        \
            __builtin_trap();                                                            \
    } while (0)

enum { FZ_MAX_BLOCKS = 4096 };

typedef struct fz_rec {
    size_t started, ended_count;
    unsigned char *ended;
    char **text;
    size_t *len;
    size_t cap;
} fz_rec;

static void fz_grow(fz_rec *r, size_t need)
{
    if (need <= r->cap)
        return;
    size_t cap = r->cap ? r->cap * 2 : 16;
    while (cap < need)
        cap *= 2;
    r->ended = realloc(r->ended, cap);
    r->text = realloc(r->text, cap * sizeof *r->text);
    r->len = realloc(r->len, cap * sizeof *r->len);
    CHECK(r->ended && r->text && r->len);
    for (size_t i = r->cap; i < cap; i++) {
        r->ended[i] = 0;
        r->text[i] = NULL;
        r->len[i] = 0;
    }
    r->cap = cap;
}

static void fz_start(void *ud, size_t i, ah_block_kind k, const char *id,
                     const char *name)
{
    fz_rec *r = ud;
    CHECK(i == r->started); /* blocks start in order, once */
    CHECK((unsigned)k < AH_BLOCK_COUNT_);
    (void)id;
    (void)name;
    fz_grow(r, i + 1);
    r->started++;
}

static void fz_delta(void *ud, size_t i, ah_block_kind k, const char *t, size_t n)
{
    fz_rec *r = ud;
    CHECK(i < r->started && !r->ended[i] && n > 0);
    (void)k;
    r->text[i] = realloc(r->text[i], r->len[i] + n);
    CHECK(r->text[i]);
    memcpy(r->text[i] + r->len[i], t, n);
    r->len[i] += n;
}

static void fz_end(void *ud, size_t i, const ah_block *b)
{
    fz_rec *r = ud;
    CHECK(i < r->started && !r->ended[i] && b->closed);
    r->ended[i] = 1;
    r->ended_count++;
}

static void fz_rec_free(fz_rec *r)
{
    for (size_t i = 0; i < r->cap; i++)
        free(r->text[i]);
    free(r->ended);
    free(r->text);
    free(r->len);
    memset(r, 0, sizeof *r);
}

static void fz_check_str(const char *s, size_t n)
{
    CHECK(s != NULL && s[n] == '\0');
}

static void fz_check_timeline(const ah_timeline *tl, const fz_rec *r)
{
    size_t n = ah_timeline_count(tl);
    if (r) {
        CHECK(r->started == n);
    }
    for (size_t i = 0; i < n; i++) {
        const ah_block *b = ah_timeline_block(tl, i);
        CHECK(b && (unsigned)b->kind < AH_BLOCK_COUNT_);
        fz_check_str(b->text, b->text_len);
        fz_check_str(b->signature, b->signature_len);
        fz_check_str(b->encrypted, b->encrypted_len);
        fz_check_str(b->arguments, b->arguments_len);
        fz_check_str(b->raw, b->raw_len);
        CHECK(b->id && b->name && b->item_id && b->type);
        int tool = b->kind == AH_BLOCK_TOOL_USE || b->kind == AH_BLOCK_SERVER_TOOL_USE;
        if (tool)
            CHECK((b->args != NULL) == (b->closed != 0));
        else
            CHECK(b->args == NULL);
        if (r) {
            CHECK(r->ended[i] == (b->closed != 0));
            if (b->kind == AH_BLOCK_TEXT || b->kind == AH_BLOCK_REASONING) {
                CHECK(r->len[i] == b->text_len);
                CHECK(b->text_len == 0 || memcmp(r->text[i], b->text, b->text_len) == 0);
            }
        }
    }
    ah_partial p;
    CHECK(ah_timeline_partial_drain(tl, &p) == AH_OK);
    size_t k = 0, empties = 0, tools = 0;
    for (size_t i = 0; i < n; i++) {
        const ah_block *b = ah_timeline_block(tl, i);
        tools += b->kind == AH_BLOCK_TOOL_USE;
        if (b->closed && (b->kind == AH_BLOCK_TEXT || b->kind == AH_BLOCK_REASONING)) {
            if (b->kind == AH_BLOCK_TEXT && b->text_len == 0) {
                empties++;
                continue;
            }
            CHECK(k < p.count && p.blocks[k] == b);
            k++;
        }
    }
    CHECK(k == p.count && p.count + p.dropped_blocks + empties == n);
    CHECK(p.dropped_tool_uses == tools);
    ah_partial_clear(&p);
}

/* Two timelines hold the same decode. */
static void fz_same(const ah_timeline *a, const ah_timeline *b)
{
    CHECK(ah_timeline_count(a) == ah_timeline_count(b));
    for (size_t i = 0; i < ah_timeline_count(a); i++) {
        const ah_block *x = ah_timeline_block(a, i), *y = ah_timeline_block(b, i);
        CHECK(x->kind == y->kind && x->closed == y->closed && x->redacted == y->redacted);
        CHECK(x->text_len == y->text_len && memcmp(x->text, y->text, x->text_len) == 0);
        CHECK(x->arguments_len == y->arguments_len &&
              memcmp(x->arguments, y->arguments, x->arguments_len) == 0);
        CHECK(strcmp(x->id, y->id) == 0 && strcmp(x->name, y->name) == 0);
        CHECK(strcmp(x->signature, y->signature) == 0 &&
              strcmp(x->encrypted, y->encrypted) == 0);
        CHECK(strcmp(x->item_id, y->item_id) == 0 && strcmp(x->raw, y->raw) == 0);
    }
    const char *sa = ah_timeline_stop_reason(a), *sb = ah_timeline_stop_reason(b);
    CHECK((sa == NULL) == (sb == NULL) && (!sa || strcmp(sa, sb) == 0));
    CHECK(ah_timeline_input_tokens(a) == ah_timeline_input_tokens(b));
    CHECK(ah_timeline_output_tokens(a) == ah_timeline_output_tokens(b));
    CHECK(ah_timeline_finished(a) == ah_timeline_finished(b));
    CHECK(ah_timeline_citations(a) == ah_timeline_citations(b));
    CHECK((ah_timeline_error(a) == NULL) == (ah_timeline_error(b) == NULL));
    size_t ra, rb;
    const char *fa = ah_timeline_refusal(a, &ra), *fb = ah_timeline_refusal(b, &rb);
    CHECK((fa == NULL) == (fb == NULL) && ra == rb && (!fa || memcmp(fa, fb, ra) == 0));
}

typedef struct fz_run {
    ah_timeline *tl;
    ah_status feed, fin;
} fz_run;

/* Feed `data` in pieces ending at the offsets in cuts[] (the last must be size). */
static fz_run fz_decode(ah_wire wire, const uint8_t *data, size_t size,
                        const size_t *cuts, size_t ncuts, int bytewise)
{
    fz_run r = {ah_timeline_new(), AH_OK, AH_OK};
    fz_rec rec = {0};
    static const ah_decoder_hooks hooks = {fz_start, fz_delta, fz_end};
    CHECK(r.tl);
    ah_decoder *d = NULL;
    ah_decoder_new(wire, r.tl, &hooks, &rec, &d, NULL, 0);
    CHECK(d);
    size_t off = 0;
    if (bytewise) {
        for (; off < size && r.feed == AH_OK; off++)
            r.feed = ah_decoder_feed(d, data + off, 1);
    } else {
        for (size_t k = 0; k < ncuts && r.feed == AH_OK; k++) {
            r.feed = ah_decoder_feed(d, data + off, cuts[k] - off);
            off = cuts[k];
        }
    }
    ah_error err;
    r.fin = ah_decoder_finish(d, &err);
    if (r.fin == AH_OK) {
        CHECK(ah_timeline_finished(r.tl) && !ah_timeline_error(r.tl) && r.feed == AH_OK);
        CHECK(err.kind == AH_EK_NONE);
    } else {
        CHECK(err.kind == AH_EK_STREAM && err.message[0] != '\0');
        CHECK(memchr(err.message, '\0', sizeof err.message) != NULL);
        if (r.feed != AH_OK)
            CHECK(r.fin == r.feed && ah_decoder_error(d) != NULL);
    }
    CHECK(ah_decoder_feed(d, "x", 1) != AH_OK); /* nothing after finish */
    fz_check_timeline(r.tl, &rec);
    fz_rec_free(&rec);
    ah_decoder_free(d);
    return r;
}

/* Responses: 1 when every event of the stream carries a sequence_number and they
 * strictly increase (what a real background stream does), so a replay of the whole
 * stream after a break repeats exactly the events already decoded. */
static int fz_monotonic(const uint8_t *data, size_t size)
{
    static const ah_sse_limits limits = {.max_line = 16u << 20, .max_event = 16u << 20};
    ah_sse *p = ah_sse_new(&limits);
    CHECK(p);
    int ok = ah_sse_feed(p, data, size) == AH_OK;
    int64_t last = -1;
    ah_sse_event ev;
    int r;
    while (ok && (r = ah_sse_next(p, &ev)) != 0) {
        if (r < 0) {
            ok = 0;
            break;
        }
        cJSON *root = cJSON_ParseWithLength(ev.data, ev.data_len);
        const cJSON *n = cJSON_GetObjectItemCaseSensitive(root, "sequence_number");
        ok = cJSON_IsNumber(n) && n->valuedouble >= 0 && n->valuedouble <= 9.0e15 &&
             (int64_t)n->valuedouble > last;
        if (ok)
            last = (int64_t)n->valuedouble;
        cJSON_Delete(root);
    }
    ah_sse_free(p);
    return ok && last >= 0;
}

/* A break at `split` then a re-attach whose stream replays everything from the start:
 * the same timeline as the uninterrupted decode, and the hook contract holds across
 * both streams (nothing emitted twice). */
static void fz_resume(const uint8_t *data, size_t size, size_t split, const fz_run *whole)
{
    ah_timeline *tl = ah_timeline_new();
    fz_rec rec = {0};
    static const ah_decoder_hooks hooks = {fz_start, fz_delta, fz_end};
    CHECK(tl);
    ah_decoder *d = NULL;
    ah_decoder_new(AH_WIRE_RESPONSES, tl, &hooks, &rec, &d, NULL, 0);
    CHECK(d);
    ah_status feed = ah_decoder_feed(d, data, split);
    ah_error err;
    (void)ah_decoder_finish(d, &err);
    int64_t last;
    if (feed == AH_OK && ah_decoder_cursor(d, NULL, &last)) {
        CHECK(ah_decoder_reattach(d) == AH_OK);
        feed = ah_decoder_feed(d, data, size);
        ah_status fin = ah_decoder_finish(d, &err);
        CHECK(feed == whole->feed && fin == whole->fin);
        fz_same(whole->tl, tl);
        fz_check_timeline(tl, &rec);
    }
    fz_rec_free(&rec);
    ah_decoder_free(d);
    ah_timeline_free(tl);
}

static int fz_decode_input(ah_wire wire, const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    uint8_t ctl = data[0];
    data++;
    size--;
    if (ctl & 0x80) {
        ah_timeline *tl = ah_timeline_new();
        ah_error err;
        CHECK(tl);
        ah_status st = ah_decode_response(wire, (const char *)data, size, tl, &err);
        if (st == AH_OK) {
            CHECK(ah_timeline_finished(tl) && err.kind == AH_EK_NONE);
            for (size_t i = 0; i < ah_timeline_count(tl); i++)
                CHECK(ah_timeline_block(tl, i)->closed);
        } else {
            CHECK(st == AH_ERR_PARSE || st == AH_ERR_PROVIDER || st == AH_ERR_NOMEM);
            CHECK(err.message[0] != '\0');
            CHECK(st == AH_ERR_PROVIDER ? err.kind == AH_EK_HTTP
                                        : err.kind == AH_EK_DECODE);
        }
        fz_check_timeline(tl, NULL);
        ah_timeline_free(tl);
        return 0;
    }
    size_t whole[1] = {size};
    size_t split = size ? (size_t)(((uint64_t)ctl * 2654435761u) % (size + 1)) : 0;
    size_t two[2] = {split, size};
    fz_run a = fz_decode(wire, data, size, whole, 1, 0);
    fz_run b = fz_decode(wire, data, size, two, 2, 0);
    CHECK(a.feed == b.feed && a.fin == b.fin);
    fz_same(a.tl, b.tl);
    if (wire == AH_WIRE_RESPONSES && fz_monotonic(data, size))
        fz_resume(data, size, split, &a);
    if (size <= 4096) {
        fz_run c = fz_decode(wire, data, size, NULL, 0, 1);
        CHECK(a.feed == c.feed && a.fin == c.fin);
        fz_same(a.tl, c.tl);
        ah_timeline_free(c.tl);
    }
    ah_timeline_free(a.tl);
    ah_timeline_free(b.tl);
    return 0;
}

#endif
