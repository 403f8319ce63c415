/* decode_fast.c - the fast path for the hot event shapes: a long answer is 99.99 % text
 * deltas, and building and freeing a cJSON tree for each was most of the decoder's work.
 *
 * This is not a JSON parser: it recognises, byte for byte, the few event shapes that
 * carry a delta, and gives every other input back to the cJSON path (decode.c) untouched.
 * It accepts only inputs for which it can prove the cJSON path gives the same result:
 *   - a fixed sequence of tokens: `{ } [ ] : ,`, strings, unsigned integers of up to 15
 * digits, `null`; whitespace between tokens is space, tab, CR or LF only;
 *   - keys and ignored strings without a backslash or a control byte (bytes < 0x20), so
 *     their bytes are their value; the one delta string may contain the two-character
 * escapes (\" \\ \/ \b \f \n \r \t), decoded here; \u escapes and control bytes go to
 * cJSON (a \u0000 would change what strlen() sees there);
 *   - keys in the order providers send them, each of the significant ones at most once;
 *     anything else, including a key this file does not know, a nested value where a
 * scalar is expected, or a second choice, is not recognised.
 * cJSON ignores what follows the closing brace; so does this. The value found is then
 * handed to the same function the cJSON path uses (ah__anthropic_delta,
 * ah__openai_content), so what happens to it cannot differ.
 *
 * Shapes:
 *   Anthropic {"type":"content_block_delta","index":N,"delta":{"type":T,F:"..."}} with
 *     (T, F) one of (text_delta, text), (thinking_delta, thinking),
 *     (input_json_delta, partial_json);
 *   Chat      {...,"choices":[{"index":0,"delta":{"content":"..."},"logprobs":null,
 *     "finish_reason":null}],...} where the other top-level keys are ones the Chat
 * decoder does not read (id, object, created, model, ...) with string, integer or null
 * values, and "usage" (if present) is null.
 * tests/fuzz/fuzz_decode_fast.c decodes every input both ways and compares everything
 * (statuses, errors, timeline, hook calls); tests/unit/test_decode_fast.c does the same
 * on the recorded provider streams.
 */
#include "decode_internal.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

typedef struct cur {
    const char *p, *end;
    const char *start;  /* the event's data */
    const char *tq, *te; /* the delta string token: its opening quote, just past its end */
} cur;

static void ws(cur *c)
{
    while (c->p < c->end && (*c->p == ' ' || *c->p == '\t' || *c->p == '\n' || *c->p == '\r'))
        c->p++;
}

static int lit(cur *c, char ch)
{
    ws(c);
    if (c->p < c->end && *c->p == ch) {
        c->p++;
        return 1;
    }
    return 0;
}

/* The first byte in [p, end) that is '"', '\\' or a control byte (< 0x20), or end.
 * Eight bytes at a time (the classic has-zero-byte / has-byte-less-than tests, exact for
 * "is there one"), then byte by byte in the word that has one: string scanning is most
 * of the matcher's time on a Chat chunk. */
static const char *scan_plain(const char *p, const char *end)
{
    const uint64_t ones = 0x0101010101010101u, highs = 0x8080808080808080u;
    while (end - p >= 8) {
        uint64_t x;
        memcpy(&x, p, 8);
        uint64_t q = x ^ (ones * '"'), b = x ^ (ones * '\\');
        uint64_t hit = ((q - ones) & ~q) | ((b - ones) & ~b) | ((x - ones * 0x20) & ~x);
        if (hit & highs)
            break;
        p += 8;
    }
    while (p < end && *p != '"' && *p != '\\' && (unsigned char)*p >= 0x20)
        p++;
    return p;
}

/* A string whose bytes are its value (no backslash, no control byte). */
static int raw_str(cur *c, const char **s, size_t *n)
{
    ws(c);
    const char *p = c->p, *end = c->end;
    if (p >= end || *p != '"')
        return 0;
    const char *b = ++p;
    p = scan_plain(p, end);
    if (p >= end || *p != '"')
        return 0;
    *s = b;
    *n = (size_t)(p - b);
    c->p = p + 1;
    return 1;
}

static int str_is(const char *s, size_t n, const char *want)
{
    return strlen(want) == n && memcmp(s, want, n) == 0;
}

/* "key" : */
static int key(cur *c, const char **k, size_t *n)
{
    return raw_str(c, k, n) && lit(c, ':');
}

/* Exactly these bytes (a quoted key or value written out), after whitespace: the same
 * as raw_str() + str_is() for a string without backslash or control byte, cheaper. */
static int bytes_are(cur *c, const char *b, size_t n)
{
    ws(c);
    if ((size_t)(c->end - c->p) < n || memcmp(c->p, b, n) != 0)
        return 0;
    c->p += n;
    return 1;
}
#define QUOTED(c, s) bytes_are(c, "\"" s "\"", sizeof(s) + 1)
#define KEY(c, k)    (QUOTED(c, k) && lit(c, ':'))

static int is_num_byte(char ch)
{
    return (ch >= '0' && ch <= '9') || ch == '+' || ch == '-' || ch == '.' || ch == 'e' ||
           ch == 'E';
}

/* An unsigned integer of 1..15 digits not followed by another byte cJSON would read as
 * part of a number. */
static int uint_val(cur *c, int64_t *v)
{
    ws(c);
    const char *b = c->p;
    int64_t x = 0;
    while (c->p < c->end && *c->p >= '0' && *c->p <= '9' && c->p - b < 16)
        x = x * 10 + (*c->p++ - '0');
    size_t n = (size_t)(c->p - b);
    if (n == 0 || n > 15 || (c->p < c->end && is_num_byte(*c->p)))
        return 0;
    *v = x;
    return 1;
}

static int null_val(cur *c)
{
    ws(c);
    if (c->end - c->p >= 4 && memcmp(c->p, "null", 4) == 0) {
        c->p += 4;
        return 1;
    }
    return 0;
}

/* A value the decoder does not read: a plain string, an unsigned integer or null. */
static int skip_scalar(cur *c)
{
    const char *s;
    size_t n;
    int64_t v;
    ws(c);
    if (c->p >= c->end)
        return 0;
    if (*c->p == '"')
        return raw_str(c, &s, &n);
    if (*c->p == 'n')
        return null_val(c);
    return uint_val(c, &v);
}

/* The delta string: points into the data when it has no escape, else is decoded into
 * the decoder's scratch buffer. */
static int text_val(ah_decoder *d, cur *c, const char **s, size_t *n)
{
    ws(c);
    const char *p = c->p, *end = c->end;
    if (p >= end || *p != '"')
        return 0;
    c->tq = p;
    const char *b = ++p;
    size_t escapes = 0;
    for (;; p++) {
        p = scan_plain(p, end);
        if (p >= end)
            return 0;
        unsigned char ch = (unsigned char)*p;
        if (ch == '"')
            break;
        if (ch < 0x20)
            return 0;
        if (ch == '\\') {
            if (end - p < 2)
                return 0;
            switch (p[1]) {
            case '"': case '\\': case '/': case 'b': case 'f': case 'n': case 'r': case 't':
                break;
            default:
                return 0; /* \u and anything invalid: cJSON decides */
            }
            escapes++;
            p++;
        }
    }
    size_t len = (size_t)(p - b);
    c->p = p + 1;
    c->te = c->p;
    if (!escapes) {
        *s = b;
        *n = len;
        return 1;
    }
    size_t out = len - escapes;
    if (out + 1 > d->scratch_cap) {
        size_t cap = d->scratch_cap ? d->scratch_cap : 256;
        while (cap < out + 1)
            cap *= 2;
        char *np = realloc(d->scratch, cap);
        if (!np)
            return 0; /* cJSON will report the out-of-memory, or manage */
        d->scratch = np;
        d->scratch_cap = cap;
    }
    char *o = d->scratch;
    for (const char *q = b; q < b + len; q++) {
        if (*q != '\\') {
            *o++ = *q;
            continue;
        }
        q++;
        switch (*q) {
        case 'b': *o++ = '\b'; break;
        case 'f': *o++ = '\f'; break;
        case 'n': *o++ = '\n'; break;
        case 'r': *o++ = '\r'; break;
        case 't': *o++ = '\t'; break;
        default: *o++ = *q; break; /* " \ / */
        }
    }
    *o = '\0';
    *s = d->scratch;
    *n = out;
    return 1;
}

/* The shape cache. Within a stream the bytes around the delta string repeat from event
 * to event (Anthropic: everything but the text; Chat: id, model, created ... too), so the
 * bytes before and after the string of the last event the matcher took are kept: an
 * event that has exactly those bytes around a string text_val() accepts has the same
 * structure, so it decodes as that event did with its own string. Anything else goes
 * through the matcher again. */
static void remember(ah_decoder *d, const cur *c, int kind, int64_t idx, const char *dt)
{
    size_t pre = (size_t)(c->tq - c->start), suf = (size_t)(c->p - c->te);
    d->fast_kind = 0;
    if (pre + suf > d->fast_cap) {
        char *np = realloc(d->fast_bytes, pre + suf);
        if (!np)
            return;
        d->fast_bytes = np;
        d->fast_cap = pre + suf;
    }
    memcpy(d->fast_bytes, c->start, pre);
    memcpy(d->fast_bytes + pre, c->te, suf);
    d->fast_pre = pre;
    d->fast_suf = suf;
    d->fast_kind = kind;
    d->fast_idx = idx;
    d->fast_dt = dt;
}

static int replay(ah_decoder *d, cur *c, ah_status *st)
{
    const char *s;
    size_t n, pre = d->fast_pre, suf = d->fast_suf;
    if ((size_t)(c->end - c->start) < pre + suf + 2 ||
        memcmp(c->start, d->fast_bytes, pre) != 0 || c->start[pre] != '"')
        return 0;
    c->p = c->start + pre;
    if (!text_val(d, c, &s, &n) || (size_t)(c->end - c->p) < suf ||
        memcmp(c->p, d->fast_bytes + pre, suf) != 0)
        return 0;
    if (d->fast_kind == 1) {
        d->ev_type = "content_block_delta";
        *st = ah__anthropic_delta(d, d->fast_idx, d->fast_dt, NULL, s, n);
    } else {
        d->ev_type = "chat.completion.chunk";
        *st = ah__openai_content(d, AH_BLOCK_TEXT, s, n);
    }
    return 1;
}

static int anthropic(ah_decoder *d, cur *c, ah_status *st)
{
    const char *s;
    size_t n;
    int64_t idx;
    if (!lit(c, '{') || !KEY(c, "type") || !QUOTED(c, "content_block_delta") ||
        !lit(c, ',') || !KEY(c, "index") || !uint_val(c, &idx) || !lit(c, ',') ||
        !KEY(c, "delta") || !lit(c, '{') || !KEY(c, "type"))
        return 0;
    /* Each alternative starts from the same place (a failed one may have moved c). */
    const char *type = NULL;
    const cur at = *c;
    if (QUOTED(c, "text_delta") && lit(c, ',') && KEY(c, "text"))
        type = "text_delta";
    else if ((*c = at, QUOTED(c, "thinking_delta") && lit(c, ',') && KEY(c, "thinking")))
        type = "thinking_delta";
    else if ((*c = at, QUOTED(c, "input_json_delta") && lit(c, ',') &&
              KEY(c, "partial_json")))
        type = "input_json_delta";
    else
        return 0;
    if (!text_val(d, c, &s, &n) || !lit(c, '}') || !lit(c, '}'))
        return 0;
    remember(d, c, 1, idx, type);
    d->ev_type = "content_block_delta";
    *st = ah__anthropic_delta(d, idx, type, NULL, s, n);
    return 1;
}

/* [{"index":0,"delta":{"content":"..."},"logprobs":null,"finish_reason":null}] in any
 * key order, "index" and "delta" optional, each key once. */
static int chat_choices(ah_decoder *d, cur *c, const char **text, size_t *tn)
{
    unsigned seen = 0;
    if (!lit(c, '[') || !lit(c, '{'))
        return 0;
    do {
        const char *k;
        size_t kn;
        unsigned bit;
        if (!key(c, &k, &kn))
            return 0;
        if (str_is(k, kn, "index")) {
            int64_t v;
            if (!uint_val(c, &v) || v != 0)
                return 0;
            bit = 1;
        } else if (str_is(k, kn, "delta")) {
            if (!lit(c, '{') || !KEY(c, "content") || !text_val(d, c, text, tn) ||
                !lit(c, '}'))
                return 0;
            bit = 2;
        } else if (str_is(k, kn, "logprobs")) {
            if (!null_val(c))
                return 0;
            bit = 4;
        } else if (str_is(k, kn, "finish_reason")) {
            if (!null_val(c))
                return 0;
            bit = 8;
        } else {
            return 0;
        }
        if (seen & bit)
            return 0;
        seen |= bit;
    } while (lit(c, ','));
    return lit(c, '}') && lit(c, ']') && (seen & 2);
}

/* Top-level keys the Chat decoder does not read, whose scalar values are skipped. */
static int chat_ignored(const char *k, size_t n)
{
    switch (n) {
    case 2:
        return memcmp(k, "id", 2) == 0;
    case 5:
        return memcmp(k, "model", 5) == 0;
    case 6:
        return memcmp(k, "object", 6) == 0;
    case 7:
        return memcmp(k, "created", 7) == 0;
    case 11:
        return memcmp(k, "obfuscation", 11) == 0;
    case 12:
        return memcmp(k, "service_tier", 12) == 0;
    case 18:
        return memcmp(k, "system_fingerprint", 18) == 0;
    default:
        return 0;
    }
}

static int chat(ah_decoder *d, cur *c, ah_status *st)
{
    const char *text = NULL;
    size_t tn = 0;
    int choices = 0, usage = 0;
    if (!lit(c, '{'))
        return 0;
    do {
        const char *k;
        size_t kn;
        if (!key(c, &k, &kn))
            return 0;
        if (str_is(k, kn, "choices")) {
            if (choices++ || !chat_choices(d, c, &text, &tn))
                return 0;
        } else if (str_is(k, kn, "usage")) {
            if (usage++ || !null_val(c))
                return 0;
        } else if (!chat_ignored(k, kn) || !skip_scalar(c)) {
            return 0;
        }
    } while (lit(c, ','));
    if (!lit(c, '}') || !choices)
        return 0;
    remember(d, c, 2, 0, NULL);
    /* text may point into the scratch buffer: nothing above reused it after the delta. */
    d->ev_type = "chat.completion.chunk";
    *st = ah__openai_content(d, AH_BLOCK_TEXT, text, tn);
    return 1;
}

int ah__fast_event(ah_decoder *d, const char *data, size_t len, ah_status *st)
{
    cur c = {data, data + len, data, NULL, NULL};
    if (d->fast_kind && replay(d, &c, st))
        return 1;
    c.p = data;
    switch (d->wire) {
    case AH_WIRE_ANTHROPIC:
        return anthropic(d, &c, st);
    case AH_WIRE_OPENAI:
        return chat(d, &c, st);
    default:
        /* Responses events all go through ah__responses_event: it keeps the resume
         * cursor (each event's sequence_number) and skips repeats after a re-attach; a
         * fast path for them would have to do the same. */
        return 0;
    }
}
