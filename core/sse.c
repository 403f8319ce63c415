/* sse.c - incremental Server-Sent Events parser (WHATWG "event stream interpretation").
 *
 * Shape: ah_sse_feed() only appends bytes to one input buffer (skipping a leading BOM and
 * checking the unfinished last line against max_line); ah_sse_next() walks complete lines
 * from `pos` and returns at the first dispatched event. No I/O, no callbacks.
 *
 * Invariants:
 *   - buf[0..len) holds stream bytes from offset `base`; [0, pos) is consumed and may be
 *     dropped by the next feed (compaction happens only in feed, so pointers handed out
 * by next() stay valid until the caller's next call, as sse.h promises).
 *   - The line scan never rereads bytes: for each of CR and LF we remember where the last
 *     memchr() stopped (`*_scanned`) or what it found (`*_at`), so a line that arrives in
 *     many pieces costs O(its length) in total, not O(pieces * length).
 *   - A consumed line's terminator byte is overwritten with NUL, so every field value is
 * a NUL-terminated string in place. A block's first data line is referenced in place
 *     (data_mode REF) and only copied into `data` when a second data line arrives or when
 *     compaction would drop it; the common single-line event is returned without a copy.
 *   - The incomplete last line (from `tail`) is never longer than max_line: feed refuses
 *     the bytes instead of buffering them, so memory is bounded by the unconsumed
 * complete lines the caller has not pulled yet plus max_line.
 *   - Any error is sticky until ah_sse_reset(); events not yet pulled are dropped.
 */
#include "internal.h"

#include "agenthost/sse.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define DEFAULT_MAX_LINE  ((size_t)1 << 20)
#define DEFAULT_MAX_EVENT ((size_t)8 << 20)
#define INITIAL_CAP       4096
#define SHRINK_ABOVE      ((size_t)256 << 10) /* drop a big idle buffer back to INITIAL_CAP \
                                               */
#define NONE SIZE_MAX

enum data_mode { DATA_EMPTY, DATA_REF, DATA_OWNED };

typedef struct strbuf {
    char *p;
    size_t len, cap;
} strbuf;

struct ah_sse {
    ah_sse_limits lim;

    /* input */
    char *buf;
    size_t len, cap;
    size_t pos;    /* start of the next unconsumed line */
    size_t tail;   /* start of the unterminated last line (no CR/LF in [tail, len)) */
    uint64_t base; /* stream offset of buf[0] */
    uint64_t fed;  /* total bytes passed to feed */
    size_t cr_at,
        cr_scanned; /* next CR at/after pos if != NONE; else none in [pos, cr_scanned) */
    size_t lf_at, lf_scanned;
    int after_cr; /* the last line ended in CR at the end of the buffer: skip one LF */
    int bom_done; /* the BOM check at stream start is over */
    int bom_seen; /* bytes of a possible BOM withheld so far (0..2) */

    /* the block being parsed */
    enum data_mode data_mode;
    size_t ref_off, ref_len; /* DATA_REF: the single data value, in buf */
    strbuf data;             /* DATA_OWNED: data lines joined by '\n' */
    strbuf type;             /* event type buffer */
    int64_t block_retry;

    /* persists across events */
    strbuf id; /* last event ID buffer */
    int has_id;
    int64_t retry; /* reconnection time from the last valid retry:, -1 if none */

    ah_status err;
    char errmsg[160];
};

static const unsigned char BOM[3] = {0xEF, 0xBB, 0xBF};

/* ---- small helpers ------------------------------------------------------------------
 */

static int strbuf_set(strbuf *b, const char *s, size_t n, int append)
{
    size_t start = append ? b->len : 0;
    if (start + n + 1 > b->cap) {
        size_t ncap = b->cap ? b->cap : 64;
        while (ncap < start + n + 1)
            ncap *= 2;
        char *np = realloc(b->p, ncap);
        if (!np)
            return -1;
        b->p = np;
        b->cap = ncap;
    }
    memcpy(b->p + start, s, n);
    b->len = start + n;
    b->p[b->len] = '\0';
    return 0;
}

static void strbuf_free(strbuf *b)
{
    free(b->p);
    b->p = NULL;
    b->len = b->cap = 0;
}

static void fail(ah_sse *p, ah_status st, const char *what, size_t limit, uint64_t off)
{
    if (p->err != AH_OK)
        return;
    p->err = st;
    if (st == AH_ERR_TOO_LARGE)
        ah__bufprintf(p->errmsg, sizeof p->errmsg,
                      "SSE %s exceeds %s (%zu bytes) at byte offset %llu",
                      strcmp(what, "max_line") == 0 ? "line" : "event data", what, limit,
                      (unsigned long long)off);
    else
        ah__bufprintf(p->errmsg, sizeof p->errmsg, "SSE %s at byte offset %llu", what,
                      (unsigned long long)off);
    ah__log(AH_LOG_WARN, "%s", p->errmsg);
}

static void block_reset(ah_sse *p)
{
    p->data_mode = DATA_EMPTY;
    p->data.len = 0;
    p->type.len = 0;
    p->block_retry = -1;
}

/* Copy an in-place data value into the owned buffer before its bytes can be dropped. */
static int materialize(ah_sse *p)
{
    if (p->data_mode != DATA_REF)
        return 0;
    if (strbuf_set(&p->data, p->buf + p->ref_off, p->ref_len, 0) != 0)
        return -1;
    p->data_mode = DATA_OWNED;
    return 0;
}

/* Drop the consumed prefix [0, pos), shifting every index. */
static void drop_consumed(ah_sse *p)
{
    size_t s = p->pos;
    if (s == 0)
        return;
    if (p->len > s)
        memmove(p->buf, p->buf + s, p->len - s);
    p->len -= s;
    p->pos = 0;
    p->tail -= s;
    p->base += s;
    p->cr_at = p->cr_at == NONE ? NONE : (p->cr_at >= s ? p->cr_at - s : NONE);
    p->lf_at = p->lf_at == NONE ? NONE : (p->lf_at >= s ? p->lf_at - s : NONE);
    p->cr_scanned = p->cr_scanned > s ? p->cr_scanned - s : 0;
    p->lf_scanned = p->lf_scanned > s ? p->lf_scanned - s : 0;
}

/* Make room for n more bytes. Consumed bytes are dropped only when they are at least as
 * many as the live ones (or all bytes are consumed), so memmove cost is amortised against
 * consumption; otherwise the buffer grows geometrically. */
static int reserve(ah_sse *p, size_t n)
{
    size_t live = p->len - p->pos;
    if (p->pos > 0 && (p->pos == p->len || p->cap - p->len < n) && p->pos >= live) {
        if (materialize(p) != 0)
            return -1;
        drop_consumed(p);
        if (p->len == 0 && p->cap > SHRINK_ABOVE && n <= INITIAL_CAP) {
            char *np = realloc(p->buf, INITIAL_CAP);
            if (np) {
                p->buf = np;
                p->cap = INITIAL_CAP;
            }
        }
    }
    if (p->cap - p->len >= n)
        return 0;
    if (n > SIZE_MAX / 2 - p->len)
        return -1;
    size_t ncap = p->cap ? p->cap : INITIAL_CAP;
    while (ncap < p->len + n)
        ncap *= 2;
    char *np = realloc(p->buf, ncap);
    if (!np)
        return -1;
    p->buf = np;
    p->cap = ncap;
    return 0;
}

static ah_status append(ah_sse *p, const unsigned char *in, size_t n)
{
    if (n == 0)
        return AH_OK;
    /* The unterminated last line after this append: refuse it before buffering it. */
    size_t i = n;
    while (i > 0 && in[i - 1] != '\n' && in[i - 1] != '\r')
        i--;
    size_t tail_len = i > 0 ? n - i : (p->len - p->tail) + n;
    if (tail_len > p->lim.max_line) {
        uint64_t off = p->base + (i > 0 ? p->len + i : p->tail);
        fail(p, AH_ERR_TOO_LARGE, "max_line", p->lim.max_line, off);
        return p->err;
    }
    if (reserve(p, n) != 0) {
        fail(p, AH_ERR_NOMEM, "out of memory buffering input", 0, p->base + p->len);
        return p->err;
    }
    memcpy(p->buf + p->len, in, n);
    if (i > 0)
        p->tail = p->len + i;
    p->len += n;
    return AH_OK;
}

/* ---- public: lifecycle ----------------------------------------------------------------
 */

ah_sse *ah_sse_new(const ah_sse_limits *limits)
{
    ah_sse *p = calloc(1, sizeof *p);
    if (!p)
        return NULL;
    if (limits)
        p->lim = *limits;
    if (p->lim.max_line == 0)
        p->lim.max_line = DEFAULT_MAX_LINE;
    if (p->lim.max_event == 0)
        p->lim.max_event = DEFAULT_MAX_EVENT;
    ah_sse_reset(p);
    return p;
}

void ah_sse_free(ah_sse *p)
{
    if (!p)
        return;
    free(p->buf);
    strbuf_free(&p->data);
    strbuf_free(&p->type);
    strbuf_free(&p->id);
    free(p);
}

void ah_sse_reset(ah_sse *p)
{
    if (!p)
        return;
    p->len = p->pos = p->tail = 0;
    p->base = p->fed = 0;
    p->cr_at = p->lf_at = NONE;
    p->cr_scanned = p->lf_scanned = 0;
    p->after_cr = 0;
    p->bom_done = 0;
    p->bom_seen = 0;
    block_reset(p);
    p->id.len = 0;
    p->has_id = 0;
    p->retry = -1;
    p->err = AH_OK;
    p->errmsg[0] = '\0';
}

/* ---- public: feed -------------------------------------------------------------------
 */

ah_status ah_sse_feed(ah_sse *p, const void *buf, size_t len)
{
    if (!p || (!buf && len > 0))
        return AH_ERR_INVALID;
    if (p->err != AH_OK)
        return p->err;
    const unsigned char *in = buf;
    p->fed += len;

    /* One leading U+FEFF is skipped; a partial match is withheld until it is decided. */
    while (!p->bom_done && len > 0) {
        if (in[0] == BOM[p->bom_seen]) {
            in++;
            len--;
            if (++p->bom_seen == 3) {
                p->bom_done = 1;
                p->base = 3;
            }
            continue;
        }
        p->bom_done = 1;
        ah_status st = append(p, BOM, (size_t)p->bom_seen);
        if (st != AH_OK)
            return st;
    }
    return append(p, in, len);
}

/* ---- public: next -------------------------------------------------------------------
 */

/* Position of the next c at or after pos, or NONE; never rescans a byte. */
static size_t find_byte(const ah_sse *p, int c, size_t *at, size_t *scanned)
{
    if (*at != NONE && *at >= p->pos)
        return *at;
    size_t from = p->pos > *scanned ? p->pos : *scanned;
    const char *q = from < p->len ? memchr(p->buf + from, c, p->len - from) : NULL;
    if (q) {
        *at = (size_t)(q - p->buf);
        *scanned = *at;
        return *at;
    }
    *at = NONE;
    *scanned = p->len;
    return NONE;
}

static int field_is(const char *name, size_t n, const char *lit, size_t litn)
{
    return n == litn && memcmp(name, lit, n) == 0;
}

/* Parse a retry: value: ASCII digits only (at least one), saturating at INT64_MAX. */
static int64_t parse_retry(const char *v, size_t n)
{
    if (n == 0)
        return -1;
    int64_t r = 0;
    for (size_t i = 0; i < n; i++) {
        if (v[i] < '0' || v[i] > '9')
            return -1;
        int d = v[i] - '0';
        r = r > (INT64_MAX - d) / 10 ? INT64_MAX : r * 10 + d;
    }
    return r;
}

static int add_data(ah_sse *p, size_t voff, size_t vlen, uint64_t line_off)
{
    size_t cur = p->data_mode == DATA_REF ? p->ref_len : p->data.len;
    size_t total = p->data_mode == DATA_EMPTY ? vlen : cur + 1 + vlen;
    if (total > p->lim.max_event || total < vlen) {
        fail(p, AH_ERR_TOO_LARGE, "max_event", p->lim.max_event, line_off);
        return -1;
    }
    if (p->data_mode == DATA_EMPTY) {
        p->data_mode = DATA_REF;
        p->ref_off = voff;
        p->ref_len = vlen;
        return 0;
    }
    if (materialize(p) != 0 || strbuf_set(&p->data, "\n", 1, 1) != 0 ||
        strbuf_set(&p->data, p->buf + voff, vlen, 1) != 0) {
        fail(p, AH_ERR_NOMEM, "out of memory in event data", 0, line_off);
        return -1;
    }
    return 0;
}

/* Interpret one line [off, off+n) (NUL-terminated in place). Returns 1 when an event was
 * dispatched into *ev, 0 to go on, -1 on error. */
static int process_line(ah_sse *p, size_t off, size_t n, ah_sse_event *ev)
{
    const char *line = p->buf + off;
    uint64_t line_off = p->base + off;

    if (n == 0) {
        if (p->data_mode == DATA_EMPTY) {
            block_reset(p);
            return 0;
        }
        if (p->type.len > 0) {
            ev->type = p->type.p;
            ev->type_len = p->type.len;
        } else {
            ev->type = "message";
            ev->type_len = 7;
        }
        if (p->data_mode == DATA_REF) {
            ev->data = p->buf + p->ref_off;
            ev->data_len = p->ref_len;
        } else {
            ev->data = p->data.p;
            ev->data_len = p->data.len;
        }
        ev->id = p->has_id ? p->id.p : "";
        ev->id_len = p->has_id ? p->id.len : 0;
        ev->retry_ms = p->block_retry;
        /* Reset without touching the bytes just handed out (they stay valid until the
         * caller's next call). */
        p->data_mode = DATA_EMPTY;
        p->data.len = 0;
        p->type.len = 0;
        p->block_retry = -1;
        return 1;
    }
    if (line[0] == ':')
        return 0; /* comment */

    const char *colon = memchr(line, ':', n);
    size_t name_len = colon ? (size_t)(colon - line) : n;
    size_t voff = colon ? off + name_len + 1 : off + n;
    if (colon && voff < off + n && p->buf[voff] == ' ')
        voff++;
    size_t vlen = off + n - voff;
    const char *v = p->buf + voff;

    if (field_is(line, name_len, "data", 4))
        return add_data(p, voff, vlen, line_off);
    if (field_is(line, name_len, "event", 5)) {
        if (strbuf_set(&p->type, v, vlen, 0) != 0)
            goto nomem;
        return 0;
    }
    if (field_is(line, name_len, "id", 2)) {
        if (memchr(v, '\0', vlen))
            return 0; /* an id containing NUL is ignored */
        if (strbuf_set(&p->id, v, vlen, 0) != 0)
            goto nomem;
        p->has_id = 1;
        return 0;
    }
    if (field_is(line, name_len, "retry", 5)) {
        int64_t r = parse_retry(v, vlen);
        if (r >= 0)
            p->block_retry = p->retry = r;
        return 0;
    }
    return 0; /* unknown field */

nomem:
    fail(p, AH_ERR_NOMEM, "out of memory in event field", 0, line_off);
    return -1;
}

/* Once every byte is consumed and no pending data points into it, a big buffer goes
 * back to its first size: one long line (a Responses closing event repeats the whole
 * answer) would otherwise keep its size resident until the parser is freed. Called where
 * ah_sse_next finds no further event, so the last event's borrowed fields are dead. */
static void shrink_idle(ah_sse *p)
{
    if (p->pos != p->len || p->cap <= SHRINK_ABOVE || p->data_mode == DATA_REF)
        return;
    drop_consumed(p);
    char *np = realloc(p->buf, INITIAL_CAP);
    if (np) {
        p->buf = np;
        p->cap = INITIAL_CAP;
    }
}

int ah_sse_next(ah_sse *p, ah_sse_event *ev)
{
    if (!p || !ev)
        return -1;
    if (p->err != AH_OK)
        return -1;
    for (;;) {
        if (p->after_cr) {
            if (p->pos == p->len) {
                shrink_idle(p);
                return 0;
            }
            if (p->buf[p->pos] == '\n')
                p->pos++;
            p->after_cr = 0;
        }
        size_t cr = find_byte(p, '\r', &p->cr_at, &p->cr_scanned);
        size_t lf = find_byte(p, '\n', &p->lf_at, &p->lf_scanned);
        size_t end = cr < lf ? cr : lf;
        if (end == NONE) {
            /* feed already refused an over-long tail; this is the same check, kept so the
             * invariant does not depend on feed alone. */
            if (p->len - p->pos > p->lim.max_line) {
                fail(p, AH_ERR_TOO_LARGE, "max_line", p->lim.max_line, p->base + p->pos);
                return -1;
            }
            shrink_idle(p);
            return 0;
        }
        size_t start = p->pos;
        size_t n = end - start;
        if (n > p->lim.max_line) {
            fail(p, AH_ERR_TOO_LARGE, "max_line", p->lim.max_line, p->base + start);
            return -1;
        }
        if (p->buf[end] == '\r') {
            if (end + 1 < p->len) {
                p->pos = end + 1 + (p->buf[end + 1] == '\n');
            } else {
                p->pos = end + 1;
                p->after_cr = 1;
            }
        } else {
            p->pos = end + 1;
        }
        p->buf[end] = '\0';
        int r = process_line(p, start, n, ev);
        if (r != 0)
            return r;
    }
}

/* ---- public: accessors ----------------------------------------------------------------
 */

ah_status ah_sse_status(const ah_sse *p)
{
    return p ? p->err : AH_ERR_INVALID;
}

const char *ah_sse_errmsg(const ah_sse *p)
{
    return p ? p->errmsg : "";
}

uint64_t ah_sse_bytes_fed(const ah_sse *p)
{
    return p ? p->fed : 0;
}

uint64_t ah_sse_bytes_consumed(const ah_sse *p)
{
    return p ? p->base + p->pos : 0;
}

int64_t ah_sse_retry_ms(const ah_sse *p)
{
    return p ? p->retry : -1;
}

const char *ah_sse_last_id(const ah_sse *p)
{
    return p && p->has_id ? p->id.p : "";
}
