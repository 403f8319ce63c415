/* util.c - the helpers every part of agenthost shares (ah__ prefix, internal.h): the
 * printf-style log front ends, allocation-checked string copies, safe snprintf, "did you
 * mean" hints. They hold no state (the log handler is log.c's, reached through the
 * exported ah_log_line()), so this file is compiled into libagenthost and again into the
 * code outside it that uses them — the mock library and the Lua module — without giving
 * a process two copies of anything that matters. */
#include "internal.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int ah__log_enabled(ah_log_level level)
{
    return ah_log_enabled(level);
}

static void vlog(ah_log_level level, int event, const char *fmt, va_list ap)
{
    char line[1024];
    vsnprintf(line, sizeof line, fmt, ap);
    ah_log_line(level, event, line);
}

void ah__log(ah_log_level level, const char *fmt, ...)
{
    if (!ah_log_enabled(level))
        return;
    va_list ap;
    va_start(ap, fmt);
    vlog(level, -1, fmt, ap);
    va_end(ap);
}

void ah__log_event(ah_log_level level, int event, const char *fmt, ...)
{
    if (!ah_log_enabled(level))
        return;
    va_list ap;
    va_start(ap, fmt);
    vlog(level, event, fmt, ap);
    va_end(ap);
}

char *ah__strndup(const char *s, size_t n)
{
    if (!s)
        return NULL;
    char *p = malloc(n + 1);
    if (!p)
        return NULL;
    memcpy(p, s, n);
    p[n] = '\0';
    return p;
}

char *ah__strdup(const char *s)
{
    return s ? ah__strndup(s, strlen(s)) : NULL;
}

void ah__bufprintf(char *buf, size_t size, const char *fmt, ...)
{
    if (size == 0)
        return;
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(buf, size, fmt, ap);
    va_end(ap);
    if (n < 0)
        buf[0] = '\0';
}

void ah__bufcpy(char *buf, size_t size, const char *s)
{
    if (size == 0)
        return;
    size_t n = strnlen(s, size - 1);
    memcpy(buf, s, n);
    buf[n] = '\0';
}

/* Levenshtein distance, capped: names are short. SIZE_MAX for names over 40 bytes. */
static size_t edit_distance(const char *a, const char *b)
{
    size_t la = strlen(a), lb = strlen(b);
    if (la > 40 || lb > 40)
        return SIZE_MAX;
    size_t row[41];
    for (size_t j = 0; j <= lb; j++)
        row[j] = j;
    for (size_t i = 1; i <= la; i++) {
        size_t diag = row[0];
        row[0] = i;
        for (size_t j = 1; j <= lb; j++) {
            size_t up = row[j];
            size_t best = diag + (a[i - 1] != b[j - 1]);
            if (up + 1 < best)
                best = up + 1;
            if (row[j - 1] + 1 < best)
                best = row[j - 1] + 1;
            row[j] = best;
            diag = up;
        }
    }
    return row[lb];
}

const char *ah__did_you_mean(const char *name, const void *table, size_t count,
                             size_t stride)
{
    const char *best = NULL;
    size_t best_d = 3; /* only near misses: at most two edits */
    for (size_t i = 0; name && i < count; i++) {
        const char *cand = *(const char *const *)((const char *)table + i * stride);
        size_t d = edit_distance(name, cand);
        if (d < best_d) {
            best_d = d;
            best = cand;
        }
    }
    return best;
}
