/* redact.c - mask secrets in text that may be shown, logged or put in events.
 *
 * A listed secret is found as it is and in the encodings an echo may use: percent-
 * encoded (URL, form), JSON-escaped, or with the characters an identifier cannot hold
 * shown as '_' (match_encoded), and with invisible characters (a soft hyphen, a
 * zero-width space) inside it.
 *
 * One left-to-right pass over a NUL-terminated buffer. At each position the first rule
 * that matches (a listed secret, a credential name with its value, "Bearer <token>", a
 * URL's userinfo password, an "sk-" key) masks its value and the scan resumes AFTER the mask, so a mask is never
 * scanned again and the pass always terminates.
 * Invariants: the string stays NUL-terminated within `size`; text is never dropped (when
 * "[REDACTED]" would not fit, the value is overwritten with the same number of '*');
 * no allocation.
 */
#include "agenthost/error.h"

#include <string.h>

enum { MIN_SECRET_LEN = 4, MIN_SK_BODY = 8 };

/* A credential name and whether it may be followed by ':' (header / JSON style) as well
 * as '='. "key", "token", "secret" and "sig" are only taken as query parameters:
 * "key: x" is too common in ordinary error text to mask. need_boundary: the name must not continue a word. */
static const struct cred_name {
    const char *name;
    size_t len;
    int colon_ok;
    int need_boundary;
} cred_names[] = {
    {"authorization", 13, 1, 0},
    {"x-api-key", 9, 1, 0},
    {"api-key", 7, 1, 0},
    {"api_key", 7, 1, 1},
    {"apikey", 6, 1, 1},
    {"access_token", 12, 1, 1},
    {"client_secret", 13, 1, 1},
    {"password", 8, 1, 1},
    {"key", 3, 0, 1},
    {"token", 5, 0, 1},
    {"secret", 6, 0, 1},
    {"sig", 3, 0, 1}, /* an Azure SAS signature */
};

typedef struct rbuf {
    char *buf;
    size_t size; /* capacity including the NUL */
    size_t len;  /* strlen(buf) */
} rbuf;

static int lower(int c)
{
    return (c >= 'A' && c <= 'Z') ? c + ('a' - 'A') : c;
}

static int is_alnum(int c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
}

static int is_word(int c)
{
    return is_alnum(c) || c == '_' || c == '-';
}

static int is_token68(int c)
{
    return is_alnum(c) || c == '-' || c == '.' || c == '_' || c == '~' || c == '+' ||
           c == '/' || c == '=';
}

static int is_eol(int c)
{
    return c == '\0' || c == '\r' || c == '\n';
}

/* Case-insensitive prefix test of an ASCII name at s (s is NUL-terminated). */
static int has_name_ci(const char *s, const char *name, size_t len)
{
    for (size_t i = 0; i < len; i++)
        if (s[i] == '\0' || lower((unsigned char)s[i]) != name[i])
            return 0;
    return 1;
}

/* Whether [at, at+n) already is a mask (so redacting twice counts nothing). */
static int is_masked(const rbuf *b, size_t at, size_t n)
{
    size_t m = sizeof AH_REDACTED - 1;
    if (n == m && memcmp(b->buf + at, AH_REDACTED, m) == 0)
        return 1;
    for (size_t i = 0; i < n; i++)
        if (b->buf[at + i] != '*')
            return 0;
    return 1;
}

/* Replace [at, at+n) (n >= 1) with the mask; returns where the scan resumes. */
static size_t mask_range(rbuf *b, size_t at, size_t n, size_t *count)
{
    size_t m = sizeof AH_REDACTED - 1;
    if (is_masked(b, at, n))
        return at + n;
    (*count)++;
    if (n >= m || b->len - n + m < b->size) {
        memmove(b->buf + at + m, b->buf + at + n, b->len - at - n + 1);
        memcpy(b->buf + at, AH_REDACTED, m);
        b->len = b->len - n + m;
        return at + m;
    }
    memset(b->buf + at, '*', n);
    return at + n;
}

static int hexval(int c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    c = lower(c);
    return c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

/* Whether s (NUL-terminated) starts with `n` hex digits encoding byte c. */
static int hex_is(const char *s, int n, unsigned c)
{
    unsigned v = 0;
    for (int k = 0; k < n; k++) {
        int h = hexval((unsigned char)s[k]);
        if (h < 0)
            return 0;
        v = v * 16 + (unsigned)h;
    }
    return v == c;
}

/* Characters a provider's error type keeps (the rest it shows as '_'). */
static int is_ident(int c)
{
    return is_alnum(c) || c == '_' || c == '.' || c == ':' || c == '-' || c == '[' ||
           c == ']';
}

/* Whether code point cp shows as nothing: the soft hyphen, the zero-width and bidi
 * format characters, the word joiner and invisible operators, the BOM, the Mongolian
 * vowel separator and the combining grapheme joiner. An echo (a gateway, a terminal
 * copy, a word processor) may put one inside a key; it must not hide the key. */
static int is_invisible(unsigned cp)
{
    return cp == 0xAD || cp == 0x34F || cp == 0x180E || (cp >= 0x200B && cp <= 0x200F) ||
           (cp >= 0x202A && cp <= 0x202E) || (cp >= 0x2060 && cp <= 0x2064) ||
           (cp >= 0x2066 && cp <= 0x206F) || cp == 0xFEFF;
}

/* One byte at q: as is, or percent-encoded ("%C2"). Its length in *len, or -1. */
static int byte_at(const char *q, size_t *len)
{
    if (q[0] == '%' && hexval((unsigned char)q[1]) >= 0 && hexval((unsigned char)q[2]) >= 0) {
        *len = 3;
        return hexval((unsigned char)q[1]) * 16 + hexval((unsigned char)q[2]);
    }
    if (q[0] == '\0')
        return -1;
    *len = 1;
    return (unsigned char)q[0];
}

/* Length of an invisible character at q (NUL-terminated): in UTF-8, percent-encoded
 * UTF-8 or a JSON "\uXXXX" escape; 0 when there is none. */
static size_t invisible_len(const char *q)
{
    if (q[0] == '\\' && q[1] == 'u') {
        unsigned cp = 0;
        for (int k = 2; k < 6; k++) {
            int h = hexval((unsigned char)q[k]);
            if (h < 0)
                return 0;
            cp = cp * 16 + (unsigned)h;
        }
        return is_invisible(cp) ? 6 : 0;
    }
    size_t o = 0, l;
    int b0 = byte_at(q, &l);
    if (b0 < 0xC2 || b0 > 0xEF)
        return 0;
    o += l;
    int need = b0 >= 0xE0 ? 2 : 1;
    unsigned cp = (unsigned)b0 & (b0 >= 0xE0 ? 0x0F : 0x1F);
    for (int k = 0; k < need; k++) {
        int b = byte_at(q + o, &l);
        if (b < 0 || (b & 0xC0) != 0x80)
            return 0;
        cp = cp << 6 | ((unsigned)b & 0x3F);
        o += l;
    }
    return is_invisible(cp) ? o : 0;
}

/* Length of the text at p (NUL-terminated) that is the secret sec in one of the
 * encodings it may come back in, or 0. Per character: as is; percent-encoded (any
 * case: a URL or form echo, whichever characters the encoder chose to escape);
 * JSON-escaped ("\/", "\\", "\"", "\u00XX"); or '_' for a character an identifier
 * cannot hold (an error type sanitised before it reached us). Longer forms are tried
 * first. Invisible characters (is_invisible) between two of its characters are part of
 * the match. */
static size_t match_encoded(const char *p, const char *sec)
{
    size_t o = 0;
    for (const unsigned char *c = (const unsigned char *)sec; *c; c++) {
        if (c != (const unsigned char *)sec) {
            size_t inv;
            while ((inv = invisible_len(p + o)) > 0)
                o += inv;
        }
        const char *q = p + o;
        if (q[0] == '%' && hex_is(q + 1, 2, *c))
            o += 3;
        else if (q[0] == '\\' && q[1] == 'u' && hex_is(q + 2, 4, *c))
            o += 6;
        else if (q[0] == '\\' && (*c == '/' || *c == '\\' || *c == '"') && q[1] == (char)*c)
            o += 2;
        else if ((unsigned char)q[0] == *c)
            o += 1;
        else if (q[0] == '_' && !is_ident(*c))
            o += 1;
        else
            return 0;
    }
    return o;
}

/* Longest listed secret (in any of its encodings) starting at i, or 0. */
static size_t match_secret(const rbuf *b, size_t i, const char *const *secrets)
{
    size_t best = 0;
    if (!secrets)
        return 0;
    for (const char *const *s = secrets; *s; s++) {
        size_t n = strlen(*s);
        if (n < MIN_SECRET_LEN || n > b->len - i)
            continue;
        size_t m = memcmp(b->buf + i, *s, n) == 0 ? n : match_encoded(b->buf + i, *s);
        if (m > best)
            best = m;
    }
    return best;
}

/* A credential name at i followed by a separator and a non-empty value: sets the value
 * range and returns 1. */
static int match_cred(const rbuf *b, size_t i, size_t *vs, size_t *ve)
{
    const char *s = b->buf;
    for (size_t k = 0; k < sizeof cred_names / sizeof cred_names[0]; k++) {
        const struct cred_name *cn = &cred_names[k];
        if (!has_name_ci(s + i, cn->name, cn->len))
            continue;
        if (cn->need_boundary && i > 0 && is_word((unsigned char)s[i - 1]))
            continue;
        size_t j = i + cn->len;
        int quoted_name = 0;
        if (s[j] == '"' || s[j] == '\'') {
            quoted_name = 1;
            j++;
        }
        while (s[j] == ' ' || s[j] == '\t')
            j++;
        char sep = s[j];
        if (sep == ':' && !cn->colon_ok && !quoted_name)
            continue;
        if (sep != '=' && sep != ':')
            continue;
        j++;
        while (s[j] == ' ' || s[j] == '\t')
            j++;
        char q = 0;
        if (s[j] == '"' || s[j] == '\'')
            q = s[j++];
        size_t start = j;
        if (q) {
            while (!is_eol(s[j]) && s[j] != q)
                j++;
        } else if (sep == ':') {
            while (!is_eol(s[j]))
                j++;
        } else {
            while (!is_eol(s[j]) && !strchr("&# \t\"'<>", s[j]))
                j++;
        }
        if (j == start)
            continue;
        *vs = start;
        *ve = j;
        return 1;
    }
    return 0;
}

/* "Bearer <token68>" at i. */
static int match_bearer(const rbuf *b, size_t i, size_t *vs, size_t *ve)
{
    const char *s = b->buf;
    if (!has_name_ci(s + i, "bearer", 6))
        return 0;
    if (i > 0 && is_alnum((unsigned char)s[i - 1]))
        return 0;
    size_t j = i + 6;
    if (s[j] != ' ' && s[j] != '\t')
        return 0;
    while (s[j] == ' ' || s[j] == '\t')
        j++;
    size_t start = j;
    for (;;) {
        size_t inv; /* set on the only branch that reads it (GCC's -Wmaybe-uninitialized
                       could not see that through the old ternary) */
        if (is_token68((unsigned char)s[j]))
            j++;
        else if (j > start && (inv = invisible_len(s + j)) > 0)
            j += inv;
        else
            break;
    }
    if (j == start)
        return 0;
    *vs = start;
    *ve = j;
    return 1;
}

/* "sk-" + at least MIN_SK_BODY key characters, as a whole token. */
static size_t match_sk(const rbuf *b, size_t i)
{
    const char *s = b->buf;
    if (s[i] != 's' || s[i + 1] != 'k' || s[i + 2] != '-')
        return 0;
    if (i > 0 && is_alnum((unsigned char)s[i - 1]))
        return 0;
    size_t j = i + 3, body = 0, inv;
    for (;;) {
        if (is_word((unsigned char)s[j])) {
            j++;
            body++;
        } else if (body > 0 && (inv = invisible_len(s + j)) > 0) {
            j += inv; /* "sk-ab<U+00AD>cd..." is still one key */
        } else {
            break;
        }
    }
    return body >= MIN_SK_BODY ? j - i : 0;
}

/* The userinfo of a URL at i ("://user:password@host"): the password, or the whole
 * userinfo when it has no ':' (a token used as the user name). */
static int match_userinfo(const rbuf *b, size_t i, size_t *vs, size_t *ve)
{
    const char *s = b->buf;
    if (s[i] != ':' || s[i + 1] != '/' || s[i + 2] != '/')
        return 0;
    size_t start = i + 3, j = start, colon = 0;
    while (!is_eol(s[j]) && !strchr("/?#@ \t\"'<>", s[j])) {
        if (s[j] == ':' && !colon)
            colon = j;
        j++;
    }
    if (s[j] != '@' || j == start)
        return 0;
    *vs = colon ? colon + 1 : start;
    *ve = j;
    return *ve > *vs;
}

size_t ah_redact(char *buf, size_t size, const char *const *secrets)
{
    if (!buf || size == 0)
        return 0;
    rbuf b = {buf, size, strnlen(buf, size)};
    if (b.len == size) { /* not terminated within size: terminate rather than overrun */
        b.len = size - 1;
        buf[b.len] = '\0';
    }
    size_t count = 0;
    size_t i = 0;
    while (i < b.len) {
        size_t n, vs, ve;
        if (strncmp(buf + i, AH_REDACTED, sizeof AH_REDACTED - 1) == 0)
            i += sizeof AH_REDACTED -
                 1; /* an earlier pass's mask: keeps this idempotent */
        else if ((n = match_secret(&b, i, secrets)) > 0)
            i = mask_range(&b, i, n, &count);
        else if (match_cred(&b, i, &vs, &ve) || match_bearer(&b, i, &vs, &ve) ||
                 match_userinfo(&b, i, &vs, &ve))
            i = mask_range(&b, vs, ve - vs, &count);
        else if ((n = match_sk(&b, i)) > 0)
            i = mask_range(&b, i, n, &count);
        else
            i++;
    }
    return count;
}
