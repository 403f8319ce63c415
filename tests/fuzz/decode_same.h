/* decode_same.h - decode one stream twice, through the fast path (decode_fast.c) and
 * through cJSON alone, and check that nothing differs: every feed's status, the finish
 * status, the decoder's error and the finish error (kind and message), every hook call
 * in order with its arguments, and the timelines (every block field, stop reason, usage,
 * citations, refusal, the provider error), and for Responses the resume cursor, the
 * repeats skipped and the end. Shared by tests/fuzz/fuzz_decode_fast.c and
 * tests/unit/test_decode_fast.c. A difference calls SAME_FAIL(what).
 */
#ifndef AH_DECODE_SAME_H
#define AH_DECODE_SAME_H

#include "agenthost.h"
#include "agenthost/timeline.h"
#include "decode_internal.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifndef SAME_FAIL
#define SAME_FAIL(what) __builtin_trap()
#endif
#define SAME(c, what)                                                                    \
    do {                                                                                 \
        if (!(c))                                                                        \
            SAME_FAIL(what);                                                             \
    } while (0)

typedef struct same_log {
    char *p;
    size_t len, cap;
} same_log;

static void same_put(same_log *l, const void *s, size_t n)
{
    if (l->len + n > l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 1024;
        while (cap < l->len + n)
            cap *= 2;
        l->p = realloc(l->p, cap);
        SAME(l->p != NULL, "out of memory");
        l->cap = cap;
    }
    memcpy(l->p + l->len, s, n);
    l->len += n;
}

static void same_putf(same_log *l, const char *tag, size_t i, int k, const char *s,
                      size_t n)
{
    char head[64];
    int h = snprintf(head, sizeof head, "%s %zu %d %zu:", tag, i, k, n);
    same_put(l, head, (size_t)h);
    if (n)
        same_put(l, s, n);
    same_put(l, "\n", 1);
}

static void same_start(void *ud, size_t i, ah_block_kind k, const char *id,
                       const char *name)
{
    same_putf(ud, "start", i, (int)k, id ? id : "(null)", strlen(id ? id : "(null)"));
    same_putf(ud, "name", i, (int)k, name ? name : "(null)",
              strlen(name ? name : "(null)"));
}

static void same_delta(void *ud, size_t i, ah_block_kind k, const char *t, size_t n)
{
    same_putf(ud, "delta", i, (int)k, t, n);
}

static void same_end(void *ud, size_t i, const ah_block *b)
{
    same_putf(ud, "end", i, (int)b->kind, b->text, b->text_len);
}

typedef struct same_run {
    ah_timeline *tl;
    same_log log;
    ah_status feed[3], fin;
    ah_error dec_err, fin_err;
    int has_dec_err;
    /* Responses: the resume cursor, repeats skipped, the end */
    int cursor, ended;
    char response_id[160];
    int64_t last_seq, skip_upto;
    uint64_t duplicates;
    uint64_t tree_events; /* events decoded from ah__tree_parse's tree */
} same_run;

enum { SAME_FAST = 0, SAME_SLOW = 1, SAME_NO_TREE = 2 };

/* reattach: between the two feeds the stream breaks and goes on (Responses). mode:
 * SAME_FAST (every fast path, as shipped), SAME_SLOW (cJSON alone), SAME_NO_TREE (the
 * fast paths but decode_tree.c's, ah__fast_parse on every event it applies to). */
static void same_decode(same_run *r, ah_wire wire, int mode, const uint8_t *data,
                        size_t size, size_t split, int reattach)
{
    static const ah_decoder_hooks hooks = {same_start, same_delta, same_end};
    memset(r, 0, sizeof *r);
    r->tl = ah_timeline_new();
    SAME(r->tl != NULL, "out of memory");
    ah_decoder *d = NULL;
    ah_decoder_new(wire, r->tl, &hooks, &r->log, &d, NULL, 0);
    SAME(d != NULL, "out of memory");
    int slow = mode == SAME_SLOW;
    ah__decoder_set_slow(d, slow);
    ah__decoder_set_no_tree(d, mode == SAME_NO_TREE);
    /* without the tree, every event the skip applies to takes it; with it, the skip
     * keeps its default size (64 KiB) and the tree gets the smaller ones */
    if (mode == SAME_NO_TREE)
        ah__decoder_set_skip_min(d, 0);
    r->feed[0] = ah_decoder_feed(d, data, split);
    if (reattach)
        (void)ah_decoder_reattach(d);
    r->feed[1] = ah_decoder_feed(d, data + split, size - split);
    const ah_error *e = ah_decoder_error(d);
    if (e) {
        r->has_dec_err = 1;
        r->dec_err = *e;
    }
    r->cursor = ah_decoder_cursor(d, NULL, NULL);
    r->last_seq = d->last_seq;
    r->skip_upto = d->skip_upto;
    snprintf(r->response_id, sizeof r->response_id, "%s", d->response_id);
    r->duplicates = ah_decoder_duplicates(d);
    r->ended = ah_decoder_ended(d);
    r->tree_events = d->tree_events;
    r->fin = ah_decoder_finish(d, &r->fin_err);
    r->feed[2] = ah_decoder_feed(d, "x", 1);
    ah_decoder_free(d);
}

static void same_str(const char *a, const char *b, const char *what)
{
    SAME((a == NULL) == (b == NULL), what);
    SAME(!a || strcmp(a, b) == 0, what);
}

static void same_mem(const char *a, size_t an, const char *b, size_t bn, const char *what)
{
    SAME(an == bn, what);
    SAME(an == 0 || memcmp(a, b, an) == 0, what);
}

static void same_error(const ah_error *a, const ah_error *b, const char *what)
{
    SAME(a->kind == b->kind && a->status == b->status, what);
    SAME(strcmp(a->message, b->message) == 0, what);
}

static void same_timeline(const ah_timeline *a, const ah_timeline *b)
{
    SAME(ah_timeline_count(a) == ah_timeline_count(b), "block count");
    for (size_t i = 0; i < ah_timeline_count(a); i++) {
        const ah_block *x = ah_timeline_block(a, i), *y = ah_timeline_block(b, i);
        SAME(x->kind == y->kind && x->closed == y->closed && x->redacted == y->redacted,
             "block kind/closed/redacted");
        same_mem(x->text, x->text_len, y->text, y->text_len, "block text");
        same_mem(x->arguments, x->arguments_len, y->arguments, y->arguments_len,
                 "block arguments");
        same_mem(x->signature, x->signature_len, y->signature, y->signature_len,
                 "block signature");
        same_mem(x->encrypted, x->encrypted_len, y->encrypted, y->encrypted_len,
                 "block encrypted");
        same_mem(x->raw, x->raw_len, y->raw, y->raw_len, "block raw");
        same_str(x->id, y->id, "block id");
        same_str(x->name, y->name, "block name");
        same_str(x->item_id, y->item_id, "block item_id");
        same_str(x->type, y->type, "block type");
        SAME((x->args == NULL) == (y->args == NULL), "block args parsed");
    }
    same_str(ah_timeline_stop_reason(a), ah_timeline_stop_reason(b), "stop reason");
    SAME(ah_timeline_input_tokens(a) == ah_timeline_input_tokens(b), "input tokens");
    SAME(ah_timeline_output_tokens(a) == ah_timeline_output_tokens(b), "output tokens");
    SAME(ah_timeline_finished(a) == ah_timeline_finished(b), "finished");
    SAME(ah_timeline_citations(a) == ah_timeline_citations(b), "citations");
    const ah_error *ea = ah_timeline_error(a), *eb = ah_timeline_error(b);
    SAME((ea == NULL) == (eb == NULL), "provider error");
    if (ea)
        same_error(ea, eb, "provider error");
    same_str(ah_timeline_error_json(a), ah_timeline_error_json(b), "provider error JSON");
    size_t ra, rb;
    const char *fa = ah_timeline_refusal(a, &ra), *fb = ah_timeline_refusal(b, &rb);
    SAME((fa == NULL) == (fb == NULL), "refusal");
    if (fa)
        same_mem(fa, ra, fb, rb, "refusal");
}

/* Two runs of one stream: everything observable must be equal. */
static void same_compare(const same_run *fast, const same_run *slow)
{
    SAME(fast->cursor == slow->cursor, "cursor");
    SAME(fast->last_seq == slow->last_seq && fast->skip_upto == slow->skip_upto,
         "cursor sequence numbers");
    SAME(strcmp(fast->response_id, slow->response_id) == 0, "cursor response id");
    SAME(fast->duplicates == slow->duplicates, "duplicates");
    SAME(fast->ended == slow->ended, "ended");
    for (int k = 0; k < 3; k++)
        SAME(fast->feed[k] == slow->feed[k], "feed status");
    SAME(fast->fin == slow->fin, "finish status");
    SAME(fast->has_dec_err == slow->has_dec_err, "decoder error");
    if (fast->has_dec_err)
        same_error(&fast->dec_err, &slow->dec_err, "decoder error");
    same_error(&fast->fin_err, &slow->fin_err, "finish error");
    same_mem(fast->log.p, fast->log.len, slow->log.p, slow->log.len, "hook calls");
    same_timeline(fast->tl, slow->tl);
}

static void same_run_free(same_run *r)
{
    ah_timeline_free(r->tl);
    free(r->log.p);
}

/* Decode data three ways (fed in two pieces cut at split, re-attached there when
 * reattach): every fast path, none, every one but decode_tree.c's; and compare. Returns
 * how many events the first run decoded from ah__tree_parse's tree. */
static uint64_t same_check_reattach(ah_wire wire, const uint8_t *data, size_t size,
                                    size_t split, int reattach)
{
    same_run fast, slow, notree;
    if (split > size)
        split = size;
    same_decode(&fast, wire, SAME_FAST, data, size, split, reattach);
    same_decode(&slow, wire, SAME_SLOW, data, size, split, reattach);
    same_decode(&notree, wire, SAME_NO_TREE, data, size, split, reattach);
    same_compare(&fast, &slow);
    same_compare(&notree, &slow);
    uint64_t tree = fast.tree_events;
    same_run_free(&fast);
    same_run_free(&slow);
    same_run_free(&notree);
    return tree;
}

static inline void same_check(ah_wire wire, const uint8_t *data, size_t size,
                              size_t split)
{
    same_check_reattach(wire, data, size, split, 0);
}

#endif
