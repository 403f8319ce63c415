/* fuzz_overlap.c - libFuzzer target for the restatement trimmer (core/overlap.c).
 *
 * Input: one byte seeding the split, then the committed text, a NUL, the continuation.
 * The continuation is fed in pieces of pseudo-random sizes (1..16 bytes, from the seed).
 * Invariants checked (a violation traps):
 *   - what comes out is exactly the continuation without its first `trimmed` bytes: a
 *     trim only ever drops a prefix, and nothing else is lost, added or reordered;
 *   - no more than len(committed) + AH__OVERLAP_WS_SLACK bytes are ever held;
 *   - the dropped prefix, with whitespace normalised, is a suffix of the normalised
 *     committed text (it restates the committed text or a tail of it);
 *   - the verdict does not depend on the split: one piece gives the same trimmed count.
 */
#include "overlap.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define CHECK(c)                                                                          \
    do {                                                                                  \
        if (!(c))                                                                         \
            __builtin_trap();                                                             \
    } while (0)

static int ws(unsigned char b)
{
    return b == ' ' || b == '\t' || b == '\n' || b == '\r' || b == '\v' || b == '\f';
}

/* Whitespace runs collapsed to one space, leading and trailing ones dropped. */
static size_t normalise(const char *s, size_t n, char *out)
{
    size_t k = 0;
    int pending = 0;
    for (size_t i = 0; i < n; i++) {
        if (ws((unsigned char)s[i])) {
            pending = k > 0;
            continue;
        }
        if (pending)
            out[k++] = ' ';
        pending = 0;
        out[k++] = s[i];
    }
    return k;
}

static size_t run(const char *c, size_t clen, const char *t, size_t tlen, unsigned seed,
                  char *out, size_t *max_held)
{
    ah__overlap *o = ah__overlap_new(c, clen);
    if (!o)
        return (size_t)-1;
    size_t olen = 0, i = 0;
    unsigned x = seed * 2654435761u + 1;
    while (i < tlen) {
        x = x * 1103515245u + 12345u;
        size_t k = seed ? 1 + (x >> 16) % 16 : tlen;
        if (k > tlen - i)
            k = tlen - i;
        const char *p;
        size_t n;
        CHECK(ah__overlap_feed(o, t + i, k, &p, &n) == AH_OK);
        memcpy(out + olen, p, n);
        olen += n;
        i += k;
        CHECK(ah__overlap_held(o) <= clen + AH__OVERLAP_WS_SLACK);
    }
    const char *p;
    size_t n;
    CHECK(ah__overlap_finish(o, &p, &n) == AH_OK);
    memcpy(out + olen, p, n);
    olen += n;
    size_t trimmed = ah__overlap_trimmed(o);
    *max_held = ah__overlap_max_held(o);
    CHECK(trimmed <= tlen);
    CHECK(olen == tlen - trimmed);
    CHECK(memcmp(out, t + trimmed, olen) == 0);
    ah__overlap_free(o);
    return trimmed;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 2)
        return 0;
    unsigned seed = data[0];
    const char *rest = (const char *)data + 1;
    size_t n = size - 1;
    const char *nul = memchr(rest, 0, n);
    if (!nul)
        return 0;
    const char *c = rest, *t = nul + 1;
    size_t clen = (size_t)(nul - rest), tlen = n - clen - 1;
    char *out = malloc(tlen + 1), *a = malloc(tlen + 1), *b = malloc(clen + 1);
    if (!out || !a || !b)
        goto done;
    size_t held = 0, held1 = 0;
    size_t trimmed = run(c, clen, t, tlen, seed | 1, out, &held);
    if (trimmed == (size_t)-1)
        goto done;
    CHECK(held <= clen + AH__OVERLAP_WS_SLACK);
    CHECK(run(c, clen, t, tlen, 0, out, &held1) == trimmed);
    if (trimmed > 0) {
        size_t na = normalise(t, trimmed, a), nb = normalise(c, clen, b);
        CHECK(na > 0 && na <= nb && memcmp(a, b + nb - na, na) == 0);
    }
done:
    free(out);
    free(a);
    free(b);
    return 0;
}
