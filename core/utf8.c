/* utf8.c - making text valid UTF-8 where it enters the core (provider streams and
 * bodies, tool results, event strings).
 *
 * Rule (docs/providers-decoding.md): every byte that does not start a valid UTF-8
 * sequence becomes U+FFFD (EF BF BD); in JSON text received from a provider, a lone
 * surrogate escape (\udc00, or \ud800-\udbff not followed by \udc00-\udfff) becomes
 * \ufffd, so one bad character never makes a whole event unparseable. Valid input is
 * never copied or changed (the fast path is a scan).
 */
#include "internal.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static const char REPL[3] = {(char)0xEF, (char)0xBF, (char)0xBD};

size_t ah__utf8_seq_len(const unsigned char *p, size_t n)
{
    if (n == 0)
        return 0;
    unsigned char c = p[0];
    if (c < 0x80)
        return 1;
    size_t len;
    unsigned char lo = 0x80, hi = 0xBF;
    if (c >= 0xC2 && c <= 0xDF)
        len = 2;
    else if (c >= 0xE0 && c <= 0xEF)
        len = 3;
    else if (c >= 0xF0 && c <= 0xF4)
        len = 4;
    else
        return 0;
    if (len > n)
        return 0;
    if (c == 0xE0)
        lo = 0xA0; /* overlong */
    else if (c == 0xED)
        hi = 0x9F; /* surrogates */
    else if (c == 0xF0)
        lo = 0x90; /* overlong */
    else if (c == 0xF4)
        hi = 0x8F; /* past U+10FFFF */
    if (p[1] < lo || p[1] > hi)
        return 0;
    for (size_t i = 2; i < len; i++)
        if ((p[i] & 0xC0) != 0x80)
            return 0;
    return len;
}

/* Offset of the first invalid byte, or n. */
static size_t first_invalid(const char *s, size_t n)
{
    const unsigned char *p = (const unsigned char *)s;
    size_t i = 0;
    while (i < n) {
        if (p[i] < 0x80) {
            i++;
            continue;
        }
        size_t l = ah__utf8_seq_len(p + i, n - i);
        if (l == 0)
            return i;
        i += l;
    }
    return n;
}

int ah__utf8_valid(const char *s, size_t n)
{
    return first_invalid(s, n) == n;
}

char *ah__utf8_dup(const char *s, size_t n, size_t *outlen)
{
    size_t bad = 0;
    const unsigned char *p = (const unsigned char *)s;
    size_t valid = first_invalid(s, n); /* the usual case: all of it, one scan, one copy */
    for (size_t i = valid; i < n;) {
        size_t l = ah__utf8_seq_len(p + i, n - i);
        if (l == 0) {
            bad++;
            l = 1;
        }
        i += l;
    }
    char *out = malloc(n + 2 * bad + 1);
    if (!out)
        return NULL;
    memcpy(out, s, valid);
    size_t o = valid;
    for (size_t i = valid; i < n;) {
        size_t l = ah__utf8_seq_len(p + i, n - i);
        if (l == 0) {
            memcpy(out + o, REPL, 3);
            o += 3;
            i++;
        } else {
            memcpy(out + o, s + i, l);
            o += l;
            i += l;
        }
    }
    out[o] = '\0';
    if (outlen)
        *outlen = o;
    return out;
}

static int hex4(const char *s, size_t n, unsigned *v)
{
    if (n < 4)
        return 0;
    unsigned x = 0;
    for (int k = 0; k < 4; k++) {
        char c = s[k];
        x <<= 4;
        if (c >= '0' && c <= '9')
            x |= (unsigned)(c - '0');
        else if (c >= 'a' && c <= 'f')
            x |= (unsigned)(c - 'a' + 10);
        else if (c >= 'A' && c <= 'F')
            x |= (unsigned)(c - 'A' + 10);
        else
            return 0;
    }
    *v = x;
    return 1;
}

/* One pass; with out == NULL only says whether anything needs replacing. */
static int json_fix_pass(const char *s, size_t n, char *out, size_t *olen)
{
    const unsigned char *p = (const unsigned char *)s;
    size_t o = 0;
    int changed = 0;
#define EMIT(src, len)                                                                   \
    do {                                                                                 \
        if (out)                                                                         \
            memcpy(out + o, (src), (len));                                               \
        o += (len);                                                                      \
    } while (0)
    for (size_t i = 0; i < n;) {
        if (p[i] == '\\' && i + 1 < n) {
            unsigned v, w;
            if (s[i + 1] == 'u' && hex4(s + i + 2, n - i - 2, &v)) {
                if (v >= 0xD800 && v <= 0xDBFF && i + 11 < n + 0 && s[i + 6] == '\\' &&
                    s[i + 7] == 'u' && hex4(s + i + 8, n - i - 8, &w) && w >= 0xDC00 &&
                    w <= 0xDFFF) {
                    EMIT(s + i, 12); /* a valid pair */
                    i += 12;
                } else if (v >= 0xD800 && v <= 0xDFFF) {
                    EMIT("\\ufffd", 6); /* a lone surrogate */
                    changed = 1;
                    i += 6;
                } else {
                    EMIT(s + i, 6);
                    i += 6;
                }
            } else {
                EMIT(s + i, 2); /* any other escape, the escaped byte included */
                i += 2;
            }
            continue;
        }
        if (p[i] < 0x80) {
            EMIT(s + i, 1);
            i++;
            continue;
        }
        size_t l = ah__utf8_seq_len(p + i, n - i);
        if (l == 0) {
            EMIT(REPL, 3);
            changed = 1;
            i++;
        } else {
            EMIT(s + i, l);
            i += l;
        }
    }
#undef EMIT
    if (olen)
        *olen = o;
    return changed;
}

int ah__json_text_fix(const char *s, size_t n, char **out, size_t *outlen)
{
    /* Fast path (every event goes through here): ASCII only, checked a word at a time,
     * and no "\u" escape (memchr for the backslashes). */
    uint64_t acc = 0;
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        uint64_t w;
        memcpy(&w, s + i, 8);
        acc |= w;
    }
    for (; i < n; i++)
        acc |= (unsigned char)s[i];
    int suspicious = (acc & 0x8080808080808080ULL) != 0;
    for (const char *p = s, *end = s + n; !suspicious && p < end;) {
        const char *b = memchr(p, '\\', (size_t)(end - p));
        if (!b || b + 1 >= end)
            break;
        suspicious = b[1] == 'u';
        p = b + 2; /* the escaped character is skipped: "\\u" is not an escape */
    }
    if (!suspicious)
        return 0;
    size_t len = 0;
    if (!json_fix_pass(s, n, NULL, &len))
        return 0;
    char *buf = malloc(len + 1);
    if (!buf)
        return -1;
    json_fix_pass(s, n, buf, &len);
    buf[len] = '\0';
    *out = buf;
    *outlen = len;
    return 1;
}
