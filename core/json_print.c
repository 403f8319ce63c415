/* json_print.c - a cJSON tree to compact JSON text, byte for byte what
 * cJSON_PrintUnformatted (cJSON 1.7.15, cJSON.c: print_value, print_string_ptr,
 * print_number) writes, in one growing buffer.
 *
 * The request body of every call goes through it (encode.c): cJSON's printer costs ~7k
 * instructions on a short request, most of it a sprintf("%1.15g") and sscanf round trip
 * for every number (max_tokens included) and two passes over every string. Here an
 * integral number below 1e15 is written digit by digit (what "%1.15g" gives for it), and
 * any other number the way cJSON writes it; strings are copied in runs between the
 * bytes cJSON escapes (", \, and the controls below 0x20: \b \f \n \r \t by name, the
 * rest as \u00xx in lowercase hex). */
#include "internal.h"

#include <cjson/cJSON.h>

#include <locale.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct jout {
    char *p;
    size_t len, cap;
    int failed;
} jout;

static char *room(jout *o, size_t n)
{
    if (o->failed)
        return NULL;
    if (o->len + n + 1 > o->cap) {
        size_t cap = o->cap ? o->cap : 256;
        while (cap < o->len + n + 1) {
            if (cap > (size_t)-1 / 2) {
                o->failed = 1;
                return NULL;
            }
            cap *= 2;
        }
        char *p = realloc(o->p, cap);
        if (!p) {
            o->failed = 1;
            return NULL;
        }
        o->p = p;
        o->cap = cap;
    }
    return o->p + o->len;
}

static void put(jout *o, const char *s, size_t n)
{
    char *d = room(o, n);
    if (!d)
        return;
    memcpy(d, s, n);
    o->len += n;
}

static void put_string(jout *o, const char *s)
{
    static const char hex[] = "0123456789abcdef";
    put(o, "\"", 1);
    if (s) {
        const unsigned char *u = (const unsigned char *)s, *run = u;
        for (; *u; u++) {
            unsigned char c = *u;
            if (c >= 0x20 && c != '"' && c != '\\')
                continue;
            put(o, (const char *)run, (size_t)(u - run));
            char esc[6] = {'\\', 0};
            size_t n = 2;
            switch (c) {
            case '"': esc[1] = '"'; break;
            case '\\': esc[1] = '\\'; break;
            case '\b': esc[1] = 'b'; break;
            case '\f': esc[1] = 'f'; break;
            case '\n': esc[1] = 'n'; break;
            case '\r': esc[1] = 'r'; break;
            case '\t': esc[1] = 't'; break;
            default:
                esc[1] = 'u';
                esc[2] = '0';
                esc[3] = '0';
                esc[4] = hex[c >> 4];
                esc[5] = hex[c & 15];
                n = 6;
            }
            put(o, esc, n);
            run = u + 1;
        }
        put(o, (const char *)run, (size_t)(u - run));
    }
    put(o, "\"", 1);
}

static void put_number(jout *o, double d)
{
    char buf[32];
    size_t n;
    if (isnan(d) || isinf(d)) {
        put(o, "null", 4);
        return;
    }
    if (d == floor(d) && fabs(d) < 1e15) {
        /* "%1.15g" of an integer of at most 15 digits is its digits ("-0" for -0.0) */
        long long v = (long long)d;
        char *e = buf + sizeof buf, *q = e;
        unsigned long long u = v < 0 ? 0ULL - (unsigned long long)v : (unsigned long long)v;
        do
            *--q = (char)('0' + u % 10);
        while (u /= 10);
        if (v < 0 || signbit(d))
            *--q = '-';
        put(o, q, (size_t)(e - q));
        return;
    }
    /* cJSON's way: 15 significant digits when they read back as the same double, else
     * 17, with the locale's decimal point made a '.'. */
    int k = snprintf(buf, sizeof buf, "%1.15g", d);
    double test = 0;
    if (sscanf(buf, "%lg", &test) != 1 || fabs(test - d) > ((fabs(test) > fabs(d) ? fabs(test)
                                                                                   : fabs(d)) *
                                                            2.220446049250313e-16))
        k = snprintf(buf, sizeof buf, "%1.17g", d);
    if (k < 0 || (size_t)k >= sizeof buf) {
        o->failed = 1;
        return;
    }
    n = (size_t)k;
    const char *dp = localeconv()->decimal_point;
    for (size_t i = 0; i < n; i++)
        if (dp && dp[0] && buf[i] == dp[0])
            buf[i] = '.';
    put(o, buf, n);
}

static void put_value(jout *o, const cJSON *v, int depth)
{
    if (depth > 1000) { /* cJSON's CJSON_NESTING_LIMIT bounds what it parses; a built
                           tree this deep is a bug: fail, not overflow the stack */
        o->failed = 1;
        return;
    }
    switch (v->type & 0xFF) {
    case cJSON_NULL: put(o, "null", 4); return;
    case cJSON_False: put(o, "false", 5); return;
    case cJSON_True: put(o, "true", 4); return;
    case cJSON_Number: put_number(o, v->valuedouble); return;
    case cJSON_Raw:
        if (!v->valuestring) {
            o->failed = 1;
            return;
        }
        put(o, v->valuestring, strlen(v->valuestring));
        return;
    case cJSON_String: put_string(o, v->valuestring); return;
    case cJSON_Array:
        put(o, "[", 1);
        for (const cJSON *c = v->child; c; c = c->next) {
            put_value(o, c, depth + 1);
            if (c->next)
                put(o, ",", 1);
        }
        put(o, "]", 1);
        return;
    case cJSON_Object:
        put(o, "{", 1);
        for (const cJSON *c = v->child; c; c = c->next) {
            put_string(o, c->string); /* a NULL key is "" in cJSON's text too */
            put(o, ":", 1);
            put_value(o, c, depth + 1);
            if (c->next)
                put(o, ",", 1);
        }
        put(o, "}", 1);
        return;
    default: o->failed = 1; return;
    }
}

char *ah__json_print(const cJSON *v, size_t *len)
{
    jout o = {0};
    if (!v)
        return NULL;
    put_value(&o, v, 0);
    if (!room(&o, 0)) {
        free(o.p);
        return NULL;
    }
    o.p[o.len] = '\0';
    if (len)
        *len = o.len;
    return o.p;
}
