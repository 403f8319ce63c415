/* overlap.c - drop a continuation's restatement of committed text (see overlap.h).
 *
 * Invariants:
 *   - undecided: every byte fed so far is in `held`, nothing was emitted, and at least
 *     one candidate is live (still matching) or pending (matched, waiting for the next
 *     byte to show the match ends at a word boundary);
 *   - decided: `trimmed` bytes of the block's start were dropped, everything after them
 *     was or is being emitted exactly once, in order; later bytes pass through untouched;
 *   - `best` only grows: a longer candidate (one that starts earlier in C) matches more
 *     of the continuation, so the furthest completion is the longest match.
 */
#include "overlap.h"

#include "internal.h"

#include <stdlib.h>
#include <string.h>

enum { C_LIVE = 1, C_PENDING = 2 };

typedef struct cand {
    size_t pos;    /* next byte of C to match (always a non-space byte, or clen) */
    int need_ws;   /* C has whitespace between the last matched byte and pos */
    int state;     /* C_LIVE, C_PENDING or 0 (dead or complete) */
} cand;

struct ah__overlap {
    char *c;
    size_t clen;
    int word_end; /* C's last non-space byte is an ASCII word byte: lookahead needed */
    cand *cands;
    size_t ncands, nactive;
    size_t *active; /* indices of the live and pending candidates, in start order */

    char *held;
    size_t held_len, held_cap, max_held;
    int t_started; /* a non-space byte of the continuation was seen */
    int t_ws;      /* ... followed by whitespace since the last non-space byte */
    int have_best;
    size_t best; /* bytes of the block to drop if nothing longer completes */

    int decided;
    size_t trimmed;
    char *out;
    size_t out_cap;
};

static int is_ws(unsigned char b)
{
    return b == ' ' || b == '\t' || b == '\n' || b == '\r' || b == '\v' || b == '\f';
}

static int is_word(unsigned char b)
{
    return (b >= '0' && b <= '9') || (b >= 'a' && b <= 'z') || (b >= 'A' && b <= 'Z') ||
           b == '_';
}

/* Length of a CJK sentence end (。！？) at s[i..n), or 0. */
static size_t cjk_stop(const char *s, size_t i, size_t n)
{
    static const char *const stops[] = {"\xE3\x80\x82", "\xEF\xBC\x81", "\xEF\xBC\x9F"};
    for (size_t k = 0; k < sizeof stops / sizeof stops[0]; k++)
        if (i + 3 <= n && memcmp(s + i, stops[k], 3) == 0)
            return 3;
    return 0;
}

static size_t skip_ws(const char *s, size_t i, size_t n)
{
    while (i < n && is_ws((unsigned char)s[i]))
        i++;
    return i;
}

/* Bytes of C from `start` to its last non-space byte. */
static size_t tail_len(const ah__overlap *o, size_t start)
{
    size_t end = o->clen;
    while (end > start && is_ws((unsigned char)o->c[end - 1]))
        end--;
    return end - start;
}

static int add_cand(ah__overlap *o, size_t start, size_t *cap)
{
    if (start >= o->clen || tail_len(o, start) == 0)
        return 0;
    if (o->ncands > 0) {
        if (o->cands[o->ncands - 1].pos == start)
            return 0;
        if (tail_len(o, start) < AH__OVERLAP_MIN_TAIL)
            return 0; /* a short tail ("Yes.") is too likely to be said again on purpose */
    }
    if (o->ncands == *cap) {
        size_t ncap = *cap ? *cap * 2 : 8;
        cand *v = realloc(o->cands, ncap * sizeof *v);
        if (!v)
            return -1;
        o->cands = v;
        *cap = ncap;
    }
    o->cands[o->ncands++] = (cand){.pos = start, .need_ws = 0, .state = C_LIVE};
    return 0;
}

ah__overlap *ah__overlap_new(const char *committed, size_t len)
{
    ah__overlap *o = calloc(1, sizeof *o);
    if (!o)
        return NULL;
    o->c = malloc(len + 1);
    if (!o->c)
        goto fail;
    if (len)
        memcpy(o->c, committed, len);
    o->c[len] = '\0';
    o->clen = len;
    size_t cap = 0;
    if (add_cand(o, skip_ws(o->c, 0, len), &cap) != 0)
        goto fail;
    for (size_t i = 0; i < len; i++) {
        unsigned char b = (unsigned char)o->c[i];
        size_t next = 0;
        if (b == '\n')
            next = i + 1;
        else if ((b == '.' || b == '!' || b == '?') && (i + 1 == len || is_ws((unsigned char)o->c[i + 1])))
            next = i + 1;
        else if (cjk_stop(o->c, i, len))
            next = i + 3;
        if (next && add_cand(o, skip_ws(o->c, next, len), &cap) != 0)
            goto fail;
    }
    o->nactive = o->ncands;
    if (!(o->active = malloc((o->ncands ? o->ncands : 1) * sizeof *o->active)))
        goto fail;
    for (size_t i = 0; i < o->ncands; i++)
        o->active[i] = i;
    size_t end = tail_len(o, 0);
    o->word_end = end > 0 && is_word((unsigned char)o->c[end - 1]);
    if (o->nactive == 0)
        o->decided = 1; /* nothing committed: nothing to trim */
    return o;
fail:
    ah__overlap_free(o);
    return NULL;
}

ah__overlap *ah__overlap_new_cut(const char *committed, size_t len)
{
    ah__overlap *o = ah__overlap_new(committed, len);
    if (o)
        o->word_end = 0; /* the cut is a boundary: no lookahead */
    return o;
}

void ah__overlap_free(ah__overlap *o)
{
    if (!o)
        return;
    free(o->c);
    free(o->cands);
    free(o->active);
    free(o->held);
    free(o->out);
    free(o);
}

static int hold(ah__overlap *o, char b)
{
    if (o->held_len == o->held_cap) {
        size_t ncap = o->held_cap ? o->held_cap * 2 : 64;
        char *v = realloc(o->held, ncap);
        if (!v)
            return -1;
        o->held = v;
        o->held_cap = ncap;
    }
    o->held[o->held_len++] = b;
    if (o->held_len > o->max_held)
        o->max_held = o->held_len;
    return 0;
}

static void complete(ah__overlap *o, cand *k, size_t at)
{
    k->state = 0;
    o->nactive--;
    o->have_best = 1;
    if (at > o->best)
        o->best = at;
}

static void kill(ah__overlap *o, cand *k)
{
    k->state = 0;
    o->nactive--;
}

/* One byte of the continuation while undecided (it is not yet held). */
static void step(ah__overlap *o, unsigned char b)
{
    size_t at = o->held_len; /* bytes of the block before b */
    size_t n = o->nactive;
    for (size_t i = 0; i < n; i++) {
        cand *k = &o->cands[o->active[i]];
        if (k->state == C_PENDING) {
            if (is_word(b))
                kill(o, k); /* "I said 4" + "2": not a boundary */
            else
                complete(o, k, at);
            continue;
        }
        if (k->state != C_LIVE || is_ws(b))
            continue;
        if ((o->t_started && k->need_ws != o->t_ws) || (unsigned char)o->c[k->pos] != b) {
            kill(o, k);
            continue;
        }
        size_t next = skip_ws(o->c, k->pos + 1, o->clen);
        k->need_ws = next > k->pos + 1;
        k->pos = next;
        if (next == o->clen) {
            if (o->word_end)
                k->state = C_PENDING;
            else
                complete(o, k, at + 1);
        }
    }
    /* Keep only the candidates still in play: most die on the first byte. */
    size_t kept = 0;
    for (size_t i = 0; i < n; i++)
        if (o->cands[o->active[i]].state)
            o->active[kept++] = o->active[i];
    if (is_ws(b)) {
        if (o->t_started)
            o->t_ws = 1;
    } else {
        o->t_started = 1;
        o->t_ws = 0;
    }
}

/* Stop matching: drop the best match, release the rest of what is held into out. */
static void decide(ah__overlap *o, char *out, size_t *pos)
{
    size_t drop = o->have_best ? o->best : 0;
    if (o->held_len > drop) {
        memcpy(out + *pos, o->held + drop, o->held_len - drop);
        *pos += o->held_len - drop;
    }
    o->trimmed = drop;
    o->held_len = 0;
    o->decided = 1;
    o->nactive = 0;
}

static int reserve_out(ah__overlap *o, size_t need)
{
    if (need <= o->out_cap)
        return 0;
    char *v = realloc(o->out, need);
    if (!v)
        return -1;
    o->out = v;
    o->out_cap = need;
    return 0;
}

ah_status ah__overlap_feed(ah__overlap *o, const char *in, size_t n, const char **out,
                           size_t *out_len)
{
    *out = in;
    *out_len = n;
    if (o->decided || n == 0)
        return AH_OK;
    *out_len = 0;
    size_t cap = o->clen + AH__OVERLAP_WS_SLACK;
    size_t i = 0;
    int stop = 0;
    while (i < n && !stop) {
        if (o->held_len >= cap) {
            stop = 1; /* held as much as allowed: decide on what matched so far */
            break;
        }
        step(o, (unsigned char)in[i]);
        if (hold(o, in[i]) != 0)
            return AH_ERR_NOMEM;
        i++;
        stop = o->nactive == 0;
    }
    if (!stop)
        return AH_OK; /* still matching: everything is held */
    /* Released: what is held after the dropped match, then the rest of this feed. */
    if (reserve_out(o, o->held_len + (n - i)) != 0)
        return AH_ERR_NOMEM;
    size_t pos = 0;
    decide(o, o->out, &pos);
    memcpy(o->out + pos, in + i, n - i);
    *out = o->out;
    *out_len = pos + (n - i);
    return AH_OK;
}

ah_status ah__overlap_finish(ah__overlap *o, const char **out, size_t *out_len)
{
    *out = "";
    *out_len = 0;
    if (o->decided)
        return AH_OK;
    /* The end of the block is a boundary: a pending match counts. */
    for (size_t i = 0, n = o->nactive; i < n; i++)
        if (o->cands[o->active[i]].state == C_PENDING)
            complete(o, &o->cands[o->active[i]], o->held_len);
    if (reserve_out(o, o->held_len + 1) != 0)
        return AH_ERR_NOMEM;
    size_t pos = 0;
    decide(o, o->out, &pos);
    *out = o->out;
    *out_len = pos;
    return AH_OK;
}

int ah__overlap_decided(const ah__overlap *o)
{
    return o->decided;
}

size_t ah__overlap_trimmed(const ah__overlap *o)
{
    return o->trimmed;
}

size_t ah__overlap_held(const ah__overlap *o)
{
    return o->held_len;
}

size_t ah__overlap_max_held(const ah__overlap *o)
{
    return o->max_held;
}
