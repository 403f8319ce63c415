/* buf.c - the writers' growable byte buffer and JSON string escaping.
 *
 * The SSE writers append hundreds of thousands of small events per reply, so appends are
 * memcpy into amortised-doubling storage and escaping copies runs of safe bytes at once.
 * Invariant: data[len] == '\0' whenever data != NULL; `failed` is sticky. */
#include "writer.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int ah__wbuf_reserve(ah__wbuf *b, size_t extra)
{
    if (b->failed)
        return -1;
    if (b->len + extra + 1 <= b->cap)
        return 0;
    size_t cap = b->cap ? b->cap : 256;
    while (cap < b->len + extra + 1) {
        if (cap > SIZE_MAX / 2) {
            b->failed = 1;
            return -1;
        }
        cap *= 2;
    }
    char *p = realloc(b->data, cap);
    if (!p) {
        b->failed = 1;
        return -1;
    }
    b->data = p;
    b->cap = cap;
    return 0;
}

void ah__wbuf_put(ah__wbuf *b, const char *s, size_t n)
{
    if (ah__wbuf_reserve(b, n) != 0)
        return;
    if (n)
        memcpy(b->data + b->len, s, n);
    b->len += n;
    b->data[b->len] = '\0';
}

void ah__wbuf_puts(ah__wbuf *b, const char *s)
{
    ah__wbuf_put(b, s, strlen(s));
}

void ah__wbuf_printf(ah__wbuf *b, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    va_list ap2;
    va_copy(ap2, ap);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (n < 0 || ah__wbuf_reserve(b, (size_t)n) != 0) {
        b->failed = 1;
        va_end(ap2);
        return;
    }
    vsnprintf(b->data + b->len, (size_t)n + 1, fmt, ap2);
    va_end(ap2);
    b->len += (size_t)n;
}

void ah__wbuf_json_str(ah__wbuf *b, const char *s, size_t n)
{
    static const char hex[] = "0123456789abcdef";
    /* Worst case every byte becomes \u00XX: reserve once, then write without checks. */
    if (n > (SIZE_MAX - 2) / 6 || ah__wbuf_reserve(b, n * 6 + 2) != 0) {
        b->failed = 1;
        return;
    }
    char *o = b->data + b->len;
    *o++ = '"';
    size_t run = 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c >= 0x20 && c != '"' && c != '\\')
            continue;
        memcpy(o, s + run, i - run);
        o += i - run;
        run = i + 1;
        *o++ = '\\';
        /* clang-format off */
        switch (c) {
        case '"': *o++ = '"'; break;
        case '\\': *o++ = '\\'; break;
        case '\n': *o++ = 'n'; break;
        case '\r': *o++ = 'r'; break;
        case '\t': *o++ = 't'; break;
        case '\b': *o++ = 'b'; break;
        case '\f': *o++ = 'f'; break;
        default:
            *o++ = 'u';
            *o++ = '0';
            *o++ = '0';
            *o++ = hex[c >> 4];
            *o++ = hex[c & 15];
        }
        /* clang-format on */
    }
    memcpy(o, s + run, n - run);
    o += n - run;
    *o++ = '"';
    *o = '\0';
    b->len = (size_t)(o - b->data);
}

void ah__wbuf_json_cstr(ah__wbuf *b, const char *s)
{
    if (s)
        ah__wbuf_json_str(b, s, strlen(s));
    else
        ah__wbuf_put(b, "null", 4);
}

void ah__wbuf_reset(ah__wbuf *b)
{
    b->len = 0;
    if (b->data)
        b->data[0] = '\0';
}

void ah__wbuf_free(ah__wbuf *b)
{
    free(b->data);
    memset(b, 0, sizeof *b);
}

char *ah__wbuf_take(ah__wbuf *b)
{
    char *p = NULL;
    if (!b->failed) {
        if (!b->data)
            ah__wbuf_put(b, "", 0);
        p = b->failed ? NULL : b->data;
        if (p)
            b->data = NULL;
    }
    ah__wbuf_free(b);
    return p;
}

size_t ah__wr_utf8_floor(const char *s, size_t n)
{
    /* Find the lead byte of the last sequence (at most 3 continuation bytes back) and
     * drop that sequence if it is incomplete. Invalid UTF-8 keeps the cut as is. */
    size_t i = n;
    int back = 0;
    while (i > 0 && back < 3 && ((unsigned char)s[i - 1] & 0xC0) == 0x80) {
        i--;
        back++;
    }
    if (i == 0)
        return n;
    unsigned char lead = (unsigned char)s[i - 1];
    size_t need = lead >= 0xF0 ? 4 : lead >= 0xE0 ? 3 : lead >= 0xC0 ? 2 : 1;
    size_t have = n - (i - 1);
    if (need == 1 || have >= need)
        return n;
    return i - 1;
}

uint64_t ah__wr_fnv1a(uint64_t h, const void *data, size_t n)
{
    const unsigned char *p = data;
    for (size_t i = 0; i < n; i++) {
        h ^= p[i];
        h *= 0x100000001b3ULL;
    }
    return h;
}

void ah__wbuf_int(ah__wbuf *o, long long v)
{
    /* Hot path (usage counts in every message_start / message_delta): avoid printf.
     * The magnitude as unsigned, so LLONG_MIN has one. */
    unsigned long long u = v < 0 ? 0ULL - (unsigned long long)v : (unsigned long long)v;
    char tmp[24];
    size_t n = 0;
    do {
        tmp[n++] = (char)('0' + u % 10);
        u /= 10;
    } while (u);
    if (v < 0)
        tmp[n++] = '-';
    if (ah__wbuf_reserve(o, n) != 0)
        return;
    while (n)
        o->data[o->len++] = tmp[--n];
    o->data[o->len] = '\0';
}

void ah__wbuf_size(ah__wbuf *o, size_t v)
{
    /* Hot path (sequence numbers): avoid printf. */
    char tmp[24];
    size_t n = 0;
    do {
        tmp[n++] = (char)('0' + v % 10);
        v /= 10;
    } while (v);
    if (ah__wbuf_reserve(o, n) != 0)
        return;
    while (n)
        o->data[o->len++] = tmp[--n];
    o->data[o->len] = '\0';
}

void ah__wr_begin_event(ah__wbuf *o, const char *name)
{
    AH__WR_PUT(o, "event: ");
    ah__wbuf_puts(o, name);
    AH__WR_PUT(o, "\ndata: ");
}

const char *ah__wr_default_message(const char *type)
{
    static const struct {
        const char *type, *message;
    } t[] = {
        {"overloaded_error", "Overloaded"},
        {"rate_limit_error", "Number of requests has exceeded your rate limit"},
        {"api_error", "Internal server error"},
        {"timeout_error", "Request timed out"},
        {"invalid_request_error", "Invalid request"},
        {"authentication_error", "invalid x-api-key"},
        {"permission_error", "Your API key does not have permission to use the specified "
                             "resource."},
        {"not_found_error", "Not found"},
        {"billing_error", "Your credit balance is too low"},
        {"request_too_large", "Request exceeds the maximum allowed number of bytes."},
        {"server_error", "The server had an error while processing your request. Sorry "
                         "about that!"},
        {"requests", "Rate limit reached for requests"},
        {"insufficient_quota", "You exceeded your current quota, please check your plan "
                               "and billing details."},
    };
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++)
        if (strcmp(type, t[i].type) == 0)
            return t[i].message;
    return "Mock provider error";
}
