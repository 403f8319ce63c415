/* fuzz_sse.c - libFuzzer target for the incremental SSE parser.
 *
 * The first input byte picks a split point; the rest is the stream. It is parsed whole,
 * in two feeds at that point, and byte by byte (draining after every feed), with default
 * caps and with tiny caps. Checked invariants:
 *   - every event is well formed: strings NUL-terminated at their lengths; type non-empty
 *     with no CR/LF; id with no CR/LF/NUL; data with no CR; retry >= -1; sizes within
 * caps;
 *   - with no error, every split gives exactly the events of the naive reference parser
 *     (tests/fuzz/sse_reference.h);
 *   - with tiny caps, whole and split either all succeed or all fail with
 *     AH_ERR_TOO_LARGE, a message naming the cap, and events that are a prefix of the
 *     reference's; next() returns -1 exactly when the status is an error;
 *   - reset makes the parser reusable and gives the same events again.
 * A violated invariant calls __builtin_trap() so libFuzzer records the input. */
#include "agenthost.h"
#include "agenthost/sse.h"
#include "sse_reference.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define CHECK(c)                                                                         \
    do {                                                                                 \
        if (!(c))                                                                        \
            __builtin_trap();                                                            \
    } while (0)

typedef struct run {
    char **v; /* each event serialised as type \x01 data \x01 id \x01 retry */
    size_t *len;
    size_t n, cap;
    ah_status st;
} run;

static void run_push(run *r, const ah_sse_event *e)
{
    if (r->n == r->cap) {
        r->cap = r->cap ? r->cap * 2 : 16;
        r->v = realloc(r->v, r->cap * sizeof *r->v);
        r->len = realloc(r->len, r->cap * sizeof *r->len);
        CHECK(r->v && r->len);
    }
    size_t n = e->type_len + e->data_len + e->id_len + 3 + sizeof e->retry_ms;
    char *s = malloc(n);
    CHECK(s);
    char *w = s;
    memcpy(w, e->type, e->type_len), w += e->type_len, *w++ = 1;
    memcpy(w, e->data, e->data_len), w += e->data_len, *w++ = 1;
    memcpy(w, e->id, e->id_len), w += e->id_len, *w++ = 1;
    memcpy(w, &e->retry_ms, sizeof e->retry_ms);
    r->v[r->n] = s;
    r->len[r->n++] = n;
}

static void run_free(run *r)
{
    for (size_t i = 0; i < r->n; i++)
        free(r->v[i]);
    free(r->v);
    free(r->len);
    memset(r, 0, sizeof *r);
}

static int same_event(const run *a, size_t i, const run *b, size_t j)
{
    return a->len[i] == b->len[j] && memcmp(a->v[i], b->v[j], a->len[i]) == 0;
}

/* a's events equal b's (exact) or are a prefix of them. */
static int is_prefix(const run *a, const run *b, int exact)
{
    if (a->n > b->n || (exact && a->n != b->n))
        return 0;
    for (size_t i = 0; i < a->n; i++)
        if (!same_event(a, i, b, i))
            return 0;
    return 1;
}

static void check_event(const ah_sse_event *e, const ah_sse_limits *lim)
{
    CHECK(e->type && e->data && e->id);
    CHECK(e->type[e->type_len] == '\0' && e->data[e->data_len] == '\0' &&
          e->id[e->id_len] == '\0');
    CHECK(e->type_len > 0);
    CHECK(!memchr(e->type, '\r', e->type_len) && !memchr(e->type, '\n', e->type_len));
    CHECK(!memchr(e->id, '\r', e->id_len) && !memchr(e->id, '\n', e->id_len));
    CHECK(strlen(e->id) == e->id_len); /* an id containing NUL is never taken */
    CHECK(!memchr(e->data, '\r', e->data_len));
    if (!memchr(e->data, '\0', e->data_len))
        CHECK(strlen(e->data) == e->data_len);
    CHECK(e->retry_ms >= -1);
    if (lim) {
        CHECK(e->data_len <= lim->max_event);
        CHECK(e->type_len <= lim->max_line && e->id_len <= lim->max_line);
    }
}

static void drain(ah_sse *p, run *r, const ah_sse_limits *lim)
{
    ah_sse_event e;
    int rc;
    while ((rc = ah_sse_next(p, &e)) == 1) {
        check_event(&e, lim);
        run_push(r, &e);
    }
    CHECK((rc == -1) == (ah_sse_status(p) != AH_OK));
    if (rc == -1) {
        CHECK(ah_sse_status(p) == AH_ERR_TOO_LARGE || ah_sse_status(p) == AH_ERR_NOMEM);
        CHECK(ah_sse_errmsg(p)[0] != '\0');
    }
}

/* Feed `data` in pieces ending at the offsets in cuts[] (the last must be n). */
static run parse(ah_sse *p, const ah_sse_limits *lim, const uint8_t *data, size_t n,
                 const size_t *cuts, size_t ncuts)
{
    run r = {0};
    size_t at = 0;
    for (size_t c = 0; c < ncuts; c++) {
        ah_status st = ah_sse_feed(p, data + at, cuts[c] - at);
        CHECK(st == ah_sse_status(p));
        at = cuts[c];
        drain(p, &r, lim);
        if (st != AH_OK) {
            CHECK(ah_sse_feed(p, "x", 1) == st); /* sticky */
            break;
        }
    }
    r.st = ah_sse_status(p);
    if (r.st == AH_OK)
        CHECK(ah_sse_bytes_fed(p) == n);
    return r;
}

static void ref_emit(void *ud, const ah_sse_event *e)
{
    run_push(ud, e);
}

static void one_config(const ah_sse_limits *lim, const uint8_t *data, size_t n, size_t k,
                       const run *ref)
{
    ah_sse *p = ah_sse_new(lim);
    CHECK(p);
    size_t whole_cut[1] = {n}, two_cuts[2] = {k, n};
    run whole = parse(p, lim, data, n, whole_cut, 1);
    ah_sse_reset(p);
    run again = parse(p, lim, data, n, whole_cut, 1);
    CHECK(again.st == whole.st && is_prefix(&again, &whole, 1));
    ah_sse_reset(p);
    run split = parse(p, lim, data, n, two_cuts, 2);
    ah_sse_free(p);

    p = ah_sse_new(lim);
    CHECK(p);
    size_t *cuts = malloc((n ? n : 1) * sizeof *cuts);
    CHECK(cuts);
    for (size_t i = 0; i < n; i++)
        cuts[i] = i + 1;
    run bytes = parse(p, lim, data, n, cuts, n);
    free(cuts);
    ah_sse_free(p);

    if (whole.st == AH_OK) {
        /* No cap hit: every way of feeding gives exactly the reference's events. */
        CHECK(split.st == AH_OK && bytes.st == AH_OK);
        CHECK(is_prefix(&whole, ref, 1));
        CHECK(is_prefix(&split, ref, 1));
        CHECK(is_prefix(&bytes, ref, 1));
    } else {
        /* A cap was hit: it is hit however the bytes arrive, and what was delivered
         * before it is a prefix of the true event sequence. */
        CHECK(whole.st == AH_ERR_TOO_LARGE);
        CHECK(split.st == AH_ERR_TOO_LARGE && bytes.st == AH_ERR_TOO_LARGE);
        CHECK(is_prefix(&whole, ref, 0));
        CHECK(is_prefix(&split, ref, 0));
        CHECK(is_prefix(&bytes, ref, 0));
    }
    run_free(&whole);
    run_free(&again);
    run_free(&split);
    run_free(&bytes);
}

int LLVMFuzzerTestOneInput(const uint8_t *in, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *in, size_t size)
{
    if (size == 0)
        return 0;
    const uint8_t *data = in + 1;
    size_t n = size - 1;
    size_t k = (size_t)in[0] * n / 255;

    run ref = {0};
    CHECK(sse_ref_parse((const char *)data, n, ref_emit, &ref) >= 0);

    one_config(NULL, data, n, k, &ref);
    ah_sse_limits tiny = {.max_line = 24, .max_event = 40};
    one_config(&tiny, data, n, k, &ref);

    run_free(&ref);
    return 0;
}
