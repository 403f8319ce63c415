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
 *   Responses {"type":"response.output_text.delta","delta":"...",...} in any key order
 *     (see responses());
 * and, for Responses' closing events that repeat the answer, ah__fast_parse (below).
 * tests/fuzz/fuzz_decode_fast.c decodes every input both ways and compares everything
 * (statuses, errors, timeline, hook calls); tests/unit/test_decode_fast.c does the same
 * on the recorded provider streams.
 */
#include "decode_internal.h"
#include "provider.h"

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
const char *ah__scan_plain(const char *p, const char *end)
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
    p = ah__scan_plain(p, end);
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
        p = ah__scan_plain(p, end);
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

/* Responses: {"type":"response.output_text.delta","content_index":N,"delta":"...",
 * "item_id":"...","logprobs":[],"obfuscation":"...","output_index":N,
 * "sequence_number":N} in any key order (servers differ), each key once; type, delta and
 * output_index required, logprobs [] or null. No shape cache: sequence_number (and
 * OpenAI's obfuscation) change on every event. */
static int responses(ah_decoder *d, cur *c, ah_status *st)
{
    const char *text = NULL, *id = NULL;
    size_t tn = 0, idn = 0;
    int64_t oi = 0, ci = 0, seq = -1;
    unsigned seen = 0;
    if (!lit(c, '{'))
        return 0;
    do {
        const char *k, *s;
        size_t kn, n;
        unsigned bit;
        if (!key(c, &k, &kn))
            return 0;
        if (str_is(k, kn, "type")) {
            if (!QUOTED(c, "response.output_text.delta"))
                return 0;
            bit = 1;
        } else if (str_is(k, kn, "delta")) {
            if (!text_val(d, c, &text, &tn))
                return 0;
            bit = 2;
        } else if (str_is(k, kn, "output_index")) {
            if (!uint_val(c, &oi))
                return 0;
            bit = 4;
        } else if (str_is(k, kn, "content_index")) {
            if (!uint_val(c, &ci))
                return 0;
            bit = 8;
        } else if (str_is(k, kn, "sequence_number")) {
            if (!uint_val(c, &seq))
                return 0;
            bit = 16;
        } else if (str_is(k, kn, "item_id")) {
            if (!raw_str(c, &id, &idn))
                return 0;
            bit = 32;
        } else if (str_is(k, kn, "logprobs")) {
            if (!null_val(c) && !(lit(c, '[') && lit(c, ']')))
                return 0;
            bit = 64;
        } else if (str_is(k, kn, "obfuscation")) {
            if (!raw_str(c, &s, &n))
                return 0;
            bit = 128;
        } else {
            return 0;
        }
        if (seen & bit)
            return 0;
        seen |= bit;
    } while (lit(c, ','));
    if (!lit(c, '}') || (seen & 7) != 7)
        return 0;
    /* text may point into the scratch buffer: only the delta used it. */
    d->ev_type = "response.output_text.delta";
    *st = ah__responses_text_delta(d, seq, oi, ci, id, idn, text, tn);
    return 1;
}

#define LIT(c, s) bytes_are(c, s, sizeof(s) - 1)

/* The same event in the order OpenAI (and the mock) send it, no whitespace inside:
 * matched as a few fixed byte runs, a quarter of the key loop's work. Anything else
 * goes to responses(), which takes every order. */
static int responses_ordered(ah_decoder *d, cur *c, ah_status *st)
{
    const char *text, *id, *s;
    size_t tn, idn, n;
    int64_t oi, ci, seq;
    if (!LIT(c, "{\"type\":\"response.output_text.delta\",\"content_index\":") ||
        !uint_val(c, &ci) || !LIT(c, ",\"delta\":") || !text_val(d, c, &text, &tn) ||
        !LIT(c, ",\"item_id\":") || !raw_str(c, &id, &idn) ||
        !LIT(c, ",\"logprobs\":[],"))
        return 0;
    if (LIT(c, "\"obfuscation\":") && !(raw_str(c, &s, &n) && lit(c, ',')))
        return 0;
    if (!LIT(c, "\"output_index\":") || !uint_val(c, &oi) ||
        !LIT(c, ",\"sequence_number\":") || !uint_val(c, &seq) || !lit(c, '}'))
        return 0;
    d->ev_type = "response.output_text.delta";
    *st = ah__responses_text_delta(d, seq, oi, ci, id, idn, text, tn);
    return 1;
}

/* The shape cache first (any format), then the format's own shapes. */
static int fast(ah_decoder *d, const char *data, size_t len, ah_status *st,
                int (*shapes)(ah_decoder *, cur *, ah_status *))
{
    cur c = {data, data + len, data, NULL, NULL};
    if (d->fast_kind && replay(d, &c, st))
        return 1;
    c.p = data;
    return shapes(d, &c, st);
}

static int responses_any(ah_decoder *d, cur *c, ah_status *st)
{
    const char *start = c->p;
    if (responses_ordered(d, c, st))
        return 1;
    c->p = start;
    return responses(d, c, st);
}

int ah__fast_event(ah_decoder *d, const char *data, size_t len, ah_status *st)
{
    return d->p->fast ? d->p->fast(d, data, len, st) : 0;
}

int ah__fast_anthropic(ah_decoder *d, const char *data, size_t len, ah_status *st)
{
    return fast(d, data, len, st, anthropic);
}

int ah__fast_chat(ah_decoder *d, const char *data, size_t len, ah_status *st)
{
    return fast(d, data, len, st, chat);
}

int ah__fast_responses(ah_decoder *d, const char *data, size_t len, ah_status *st)
{
    return fast(d, data, len, st, responses_any);
}

/* ---- Responses: the answer repeated by the closing events
 * ------------------------------------------------------------------------------------
 * output_text.done ("text"), content_part.done ("part"."text"), output_item.done
 * ("item"."content"[i]."text") and response.completed ("response"."output"[i]."content"
 * [j]."text") each carry the whole answer again, and the decoder reads it only when no
 * delta delivered it. ah__fast_parse finds those strings with a scan that follows
 * cJSON's tokenising (a string starts at a quote outside a string and ends at the next
 * quote not taken by a backslash) and tracks where each string is (the key path), then
 * has cJSON parse a copy of the data without their contents. Why that tree is the
 * original one but for those strings being "":
 *   - only strings cJSON decodes without failing are left out (their escapes are the
 * two-character ones or \u of four hex digits outside the surrogates), so the copy is
 * valid JSON exactly when the data is, with the same keys, values and order;
 *   - the tree is used only when the event's type and the timeline show that the
 * decoder does not read what was left out (below); otherwise the caller parses the data
 * itself, as without the fast path.
 * The scan gives up (NULL) on anything it does not follow: unbalanced brackets, an
 * unterminated string. */

enum { SK_TEXT = 1, SK_PART, SK_ITEM, SK_OUTPUT };
#define SK_DEPTH 6  /* the deepest path above: response.output[i].content[j].text */
#define SK_MAX   16 /* strings left out, at most */

typedef struct sk_frame {
    char kind;     /* '{' or '[' */
    int want_key;  /* object: the next string is a key */
    const char *k; /* object: the current key's bytes, NULL when it has an escape */
    size_t kn;
    int64_t idx; /* array: the current element */
} sk_frame;

typedef struct sk_span {
    size_t off, len; /* the string's contents, between its quotes */
    int what;
    int64_t ci; /* SK_ITEM: the content index */
} sk_span;

static int sk_key(const sk_frame *f, const char *k)
{
    return f->kind == '{' && f->k && str_is(f->k, f->kn, k);
}

/* Which of the repeated texts a string value inside frames f[0..depth) is (0: none). */
static int sk_what(const sk_frame *f, int depth, int64_t *ci)
{
    switch (depth) {
    case 1:
        return sk_key(&f[0], "text") ? SK_TEXT : 0;
    case 2:
        return sk_key(&f[0], "part") && sk_key(&f[1], "text") ? SK_PART : 0;
    case 4:
        if (sk_key(&f[0], "item") && sk_key(&f[1], "content") && f[2].kind == '[' &&
            sk_key(&f[3], "text")) {
            *ci = f[2].idx;
            return SK_ITEM;
        }
        return 0;
    case 6:
        return sk_key(&f[0], "response") && sk_key(&f[1], "output") && f[2].kind == '[' &&
                       sk_key(&f[3], "content") && f[4].kind == '[' &&
                       sk_key(&f[5], "text")
                   ? SK_OUTPUT
                   : 0;
    default:
        return 0;
    }
}

int ah__hex4(const char *p, unsigned *v)
{
    unsigned x = 0;
    for (int i = 0; i < 4; i++) {
        char ch = p[i];
        x <<= 4;
        if (ch >= '0' && ch <= '9')
            x |= (unsigned)(ch - '0');
        else if (ch >= 'a' && ch <= 'f')
            x |= (unsigned)(ch - 'a' + 10);
        else if (ch >= 'A' && ch <= 'F')
            x |= (unsigned)(ch - 'A' + 10);
        else
            return 0;
    }
    *v = x;
    return 1;
}

/* The string whose opening quote is at p: *e is just past its closing quote, *esc says
 * whether it has a backslash. Returns 1 when cJSON decodes it without failing, 0 when it
 * may not, -1 when it is not terminated. */
static int sk_string(const char *p, const char *end, const char **e, int *esc)
{
    int ok = 1;
    *esc = 0;
    for (p++;;) {
        p = ah__scan_plain(p, end);
        if (p >= end)
            return -1;
        if (*p == '"')
            break;
        if (*p != '\\') { /* a control byte: cJSON takes it as it is */
            p++;
            continue;
        }
        *esc = 1;
        if (end - p < 2)
            return -1;
        unsigned u;
        switch (p[1]) {
        case '"': case '\\': case '/': case 'b': case 'f': case 'n': case 'r': case 't':
            break;
        case 'u':
            if (end - p < 6 || !ah__hex4(p + 2, &u) || (u >= 0xD800 && u <= 0xDFFF))
                ok = 0;
            break;
        default:
            ok = 0;
        }
        p += 2; /* cJSON's end search skips the byte after a backslash, whatever it is */
    }
    *e = p + 1;
    return ok;
}

/* 1 when the decoder does not read the left-out strings of this event: its type's
 * handler never reads them, or the timeline shows the text they would fill is there. */
static int sk_unread(ah_decoder *d, const cJSON *root, const char *type, const sk_span *sp,
                     int n)
{
    int64_t oi, ci = 0;
    if (strcmp(type, "response.content_part.done") == 0 ||
        strcmp(type, "response.completed") == 0 ||
        strcmp(type, "response.incomplete") == 0 || strcmp(type, "response.failed") == 0)
        return 1; /* they read none of these strings */
    if (strcmp(type, "response.output_text.done") == 0) {
        int text = 0;
        for (int k = 0; k < n; k++)
            text |= sp[k].what == SK_TEXT;
        if (!text || !ah__jint(root, "output_index", &oi))
            return 1; /* nothing read, or the same error either way */
        ah__jint(root, "content_index", &ci);
        size_t i = ah__tl_find(d->tl, oi, ci, 0);
        return i != AH__NONE && (!ah__tl_is_open(d->tl, i) || ah__tl_len(d->tl, i, AH__F_TEXT) > 0);
    }
    if (strcmp(type, "response.output_item.done") == 0) {
        const cJSON *item = ah__jobj(root, "item");
        int parts = 0;
        for (int k = 0; k < n; k++)
            parts |= sp[k].what == SK_ITEM;
        if (!parts || !item || !ah__jint(root, "output_index", &oi))
            return 1;
        const char *it = ah__jstr(item, "type");
        if (!it || strcmp(it, "message") != 0)
            return 0; /* other items are kept whole or read further */
        /* a message's part fills its text only when no block for it was ever opened */
        for (int k = 0; k < n; k++)
            if (sp[k].what == SK_ITEM && ah__tl_find(d->tl, oi, sp[k].ci, 0) == AH__NONE)
                return 0;
        return 1;
    }
    return 0;
}

cJSON *ah__fast_parse(ah_decoder *d, const char *data, size_t len)
{
    sk_frame f[SK_DEPTH];
    sk_span sp[SK_MAX];
    int depth = 0, n = 0;
    size_t removed = 0;
    const char *p = data, *end = data + len;
    if (len < d->skip_min)
        return NULL; /* short: nothing worth leaving out */
    while (p < end) {
        char ch = *p;
        if (ch == '"') {
            const char *e;
            int esc, ok = sk_string(p, end, &e, &esc);
            if (ok < 0)
                return NULL;
            sk_frame *t = depth > 0 && depth <= SK_DEPTH ? &f[depth - 1] : NULL;
            size_t sn = (size_t)(e - p) - 2;
            if (t && t->kind == '{' && t->want_key) {
                t->want_key = 0;
                t->k = esc ? NULL : p + 1;
                t->kn = sn;
            } else if (ok && sn > 0 && n < SK_MAX && depth <= SK_DEPTH) {
                int64_t ci = 0;
                int what = sk_what(f, depth, &ci);
                if (what) {
                    sp[n++] = (sk_span){(size_t)(p + 1 - data), sn, what, ci};
                    removed += sn;
                }
            }
            p = e;
            if (depth == 0)
                break;
            continue;
        }
        if (ch == '{' || ch == '[') {
            if (depth < SK_DEPTH)
                f[depth] = (sk_frame){ch, ch == '{', NULL, 0, 0};
            depth++;
        } else if (ch == '}' || ch == ']') {
            if (depth == 0 || (depth <= SK_DEPTH && f[depth - 1].kind != (ch == '}' ? '{' : '[')))
                return NULL;
            if (--depth == 0)
                break;
        } else if (ch == ',' && depth > 0 && depth <= SK_DEPTH) {
            sk_frame *t = &f[depth - 1];
            if (t->kind == '[') {
                t->idx++;
            } else {
                t->want_key = 1;
                t->k = NULL;
            }
        }
        p++;
    }
    if (n == 0)
        return NULL;
    char *copy = malloc(len - removed);
    if (!copy)
        return NULL;
    size_t at = 0, w = 0;
    for (int k = 0; k < n; k++) {
        memcpy(copy + w, data + at, sp[k].off - at);
        w += sp[k].off - at;
        at = sp[k].off + sp[k].len;
    }
    memcpy(copy + w, data + at, len - at);
    w += len - at;
    cJSON *root = cJSON_ParseWithLength(copy, w);
    free(copy);
    const char *type = ah__jstr(root, "type");
    if (!cJSON_IsObject(root) || !type || !sk_unread(d, root, type, sp, n)) {
        cJSON_Delete(root);
        return NULL;
    }
    return root;
}
