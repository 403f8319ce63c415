/* redis_url.c - what Redis support needs without a connection: redis:// URLs (parsed,
 * and shown with the password masked) and the SHA-1 of a script (its EVALSHA name).
 * No hiredis here: built whether or not the library has Redis (AH_WITH_REDIS).
 *
 * Invariants: a URL's password never appears in a display string or an error message. */
#include "internal.h"
#include "redis_internal.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- URLs -------------------------------------------------------------------------- */

static ah_status url_err(char *err, size_t size, const char *what)
{
    ah__bufprintf(err, size, "redis url: %s", what);
    return AH_ERR_INVALID;
}

static int parse_uint(const char *s, size_t n, long max, long *out)
{
    if (n == 0 || n > 9)
        return -1;
    long v = 0;
    for (size_t i = 0; i < n; i++) {
        if (!isdigit((unsigned char)s[i]))
            return -1;
        v = v * 10 + (s[i] - '0');
    }
    if (v > max)
        return -1;
    *out = v;
    return 0;
}

static int copy_part(char *dst, size_t size, const char *s, size_t n)
{
    if (n >= size)
        return -1;
    memcpy(dst, s, n);
    dst[n] = '\0';
    return 0;
}

/* Percent-decoding for the password (a password may hold '@' or ':' encoded). */
static int copy_decoded(char *dst, size_t size, const char *s, size_t n)
{
    size_t j = 0;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        if (c == '%' && i + 2 < n && isxdigit((unsigned char)s[i + 1]) &&
            isxdigit((unsigned char)s[i + 2])) {
            char hex[3] = {s[i + 1], s[i + 2], 0};
            c = (char)strtol(hex, NULL, 16);
            i += 2;
        }
        if (j + 1 >= size)
            return -1;
        dst[j++] = c;
    }
    dst[j] = '\0';
    return 0;
}

ah_status ah_redis_url_parse(const char *url, ah_redis_url *out, char *err, size_t errsize)
{
    if (err && errsize)
        err[0] = '\0';
    if (!out)
        return AH_ERR_INVALID;
    memset(out, 0, sizeof *out);
    out->port = 6379;
    if (!url || !*url)
        return url_err(err, errsize, "empty");
    const char *p = NULL;
    if (strncmp(url, "unix://", 7) == 0)
        p = url + 7;
    else if (strncmp(url, "redis+unix://", 13) == 0)
        p = url + 13;
    else if (strncmp(url, "unix:", 5) == 0)
        p = url + 5;
    if (p) {
        out->is_unix = 1;
        if (*p != '/')
            return url_err(err, errsize, "a unix socket path must be absolute (unix:/path)");
        const char *q = strchr(p, '?');
        size_t n = q ? (size_t)(q - p) : strlen(p);
        if (copy_part(out->path, sizeof out->path, p, n) != 0)
            return url_err(err, errsize, "socket path too long");
        if (q) {
            long db;
            if (strncmp(q, "?db=", 4) != 0 || parse_uint(q + 4, strlen(q + 4), 1000000, &db))
                return url_err(err, errsize, "unix socket options: only ?db=N is known");
            out->db = (int)db;
        }
        return AH_OK;
    }
    if (strncmp(url, "redis://", 8) != 0)
        return url_err(err, errsize,
                       "must start with redis:// or unix: (rediss:// (TLS) is not supported)");
    p = url + 8;
    const char *end = p + strlen(p);
    const char *slash = strchr(p, '/');
    const char *auth_end = NULL;
    /* The userinfo ends at the LAST '@' before the path. */
    for (const char *s = p; s < (slash ? slash : end); s++)
        if (*s == '@')
            auth_end = s;
    if (auth_end) {
        const char *colon = memchr(p, ':', (size_t)(auth_end - p));
        const char *pw = colon ? colon + 1 : p; /* redis://password@host is accepted too */
        if (copy_decoded(out->password, sizeof out->password, pw,
                         (size_t)(auth_end - pw)) != 0)
            return url_err(err, errsize, "password too long");
        p = auth_end + 1;
    }
    const char *hostend = slash ? slash : end;
    const char *portsep = NULL;
    if (*p == '[') {
        const char *rb = memchr(p, ']', (size_t)(hostend - p));
        if (!rb)
            return url_err(err, errsize, "unclosed '[' in the host");
        if (copy_part(out->host, sizeof out->host, p + 1, (size_t)(rb - p - 1)) != 0)
            return url_err(err, errsize, "host too long");
        if (rb + 1 < hostend) {
            if (rb[1] != ':')
                return url_err(err, errsize, "junk after ']' in the host");
            portsep = rb + 1;
        }
    } else {
        portsep = memchr(p, ':', (size_t)(hostend - p));
        size_t hl = (size_t)((portsep ? portsep : hostend) - p);
        if (copy_part(out->host, sizeof out->host, p, hl) != 0)
            return url_err(err, errsize, "host too long");
    }
    if (!out->host[0])
        return url_err(err, errsize, "no host (redis://host:port/db)");
    if (portsep) {
        long port;
        if (parse_uint(portsep + 1, (size_t)(hostend - portsep - 1), 65535, &port) != 0 ||
            port == 0)
            return url_err(err, errsize, "port must be 1..65535");
        out->port = (int)port;
    }
    if (slash && slash[1]) {
        long db;
        if (parse_uint(slash + 1, strlen(slash + 1), 1000000, &db) != 0)
            return url_err(err, errsize, "the database after '/' must be a number");
        out->db = (int)db;
    }
    return AH_OK;
}

void ah_redis_url_display(const ah_redis_url *u, char *buf, size_t size)
{
    if (u->is_unix) {
        if (u->db)
            ah__bufprintf(buf, size, "unix:%s?db=%d", u->path, u->db);
        else
            ah__bufprintf(buf, size, "unix:%s", u->path);
        return;
    }
    int v6 = strchr(u->host, ':') != NULL;
    ah__bufprintf(buf, size, "redis://%s%s%s%s:%d/%d", u->password[0] ? ":***@" : "",
                  v6 ? "[" : "", u->host, v6 ? "]" : "", u->port, u->db);
}

/* ---- SHA-1 (for EVALSHA) ------------------------------------------------------------ */

static uint32_t rol(uint32_t v, int n)
{
    return (v << n) | (v >> (32 - n));
}

static void sha1_block(uint32_t h[5], const unsigned char *b)
{
    uint32_t w[80];
    for (int i = 0; i < 16; i++)
        w[i] = (uint32_t)b[4 * i] << 24 | (uint32_t)b[4 * i + 1] << 16 |
               (uint32_t)b[4 * i + 2] << 8 | b[4 * i + 3];
    for (int i = 16; i < 80; i++)
        w[i] = rol(w[i - 3] ^ w[i - 8] ^ w[i - 14] ^ w[i - 16], 1);
    uint32_t a = h[0], bb = h[1], c = h[2], d = h[3], e = h[4];
    for (int i = 0; i < 80; i++) {
        uint32_t f, k;
        if (i < 20) {
            f = (bb & c) | (~bb & d);
            k = 0x5A827999;
        } else if (i < 40) {
            f = bb ^ c ^ d;
            k = 0x6ED9EBA1;
        } else if (i < 60) {
            f = (bb & c) | (bb & d) | (c & d);
            k = 0x8F1BBCDC;
        } else {
            f = bb ^ c ^ d;
            k = 0xCA62C1D6;
        }
        uint32_t t = rol(a, 5) + f + e + k + w[i];
        e = d;
        d = c;
        c = rol(bb, 30);
        bb = a;
        a = t;
    }
    h[0] += a;
    h[1] += bb;
    h[2] += c;
    h[3] += d;
    h[4] += e;
}

void ah__sha1_hex(const void *data, size_t len, char out[41])
{
    uint32_t h[5] = {0x67452301, 0xEFCDAB89, 0x98BADCFE, 0x10325476, 0xC3D2E1F0};
    const unsigned char *p = data;
    size_t i = 0;
    for (; i + 64 <= len; i += 64)
        sha1_block(h, p + i);
    unsigned char tail[128] = {0};
    size_t rest = len - i;
    memcpy(tail, p + i, rest);
    tail[rest] = 0x80;
    size_t tl = rest + 1 + 8 <= 64 ? 64 : 128;
    uint64_t bits = (uint64_t)len * 8;
    for (int k = 0; k < 8; k++)
        tail[tl - 1 - k] = (unsigned char)(bits >> (8 * k));
    sha1_block(h, tail);
    if (tl == 128)
        sha1_block(h, tail + 64);
    for (int k = 0; k < 5; k++)
        snprintf(out + 8 * k, 9, "%08x", (unsigned)h[k]);
}

void ah__redis_script_init(ah__redis_script *s, const char *src)
{
    s->src = src;
    ah__sha1_hex(src, strlen(src), s->sha);
}

void ah_redis_options_init(ah_redis_options *o)
{
    o->connect_timeout_ms = 1000;
    o->command_timeout_ms = 1000;
    o->reconnect_min_ms = 100;
    o->reconnect_max_ms = 2000;
}
