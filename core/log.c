/* log.c - the library's single logging path and a few string helpers.
 * Invariant: nothing in the core prints; everything goes through ah__log(). */
#include "internal.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static ah_log_fn log_fn;
static void *log_ud;
static ah_log_level log_min = AH_LOG_INFO;

void ah_log_set_handler(ah_log_fn fn, void *ud, ah_log_level min_level)
{
    log_fn = fn;
    log_ud = ud;
    log_min = min_level;
}

const char *ah_log_level_name(ah_log_level level)
{
    switch (level) {
    case AH_LOG_DEBUG: return "debug";
    case AH_LOG_INFO: return "info";
    case AH_LOG_WARN: return "warning";
    case AH_LOG_ERROR: return "error";
    }
    return "unknown";
}

int ah__log_enabled(ah_log_level level)
{
    return log_fn != NULL && level >= log_min;
}

static void vlog(ah_log_level level, int event, const char *fmt, va_list ap)
{
    char line[1024];
    vsnprintf(line, sizeof line, fmt, ap);
    log_fn(log_ud, level, event, line);
}

void ah__log(ah_log_level level, const char *fmt, ...)
{
    if (!ah__log_enabled(level))
        return;
    va_list ap;
    va_start(ap, fmt);
    vlog(level, -1, fmt, ap);
    va_end(ap);
}

void ah__log_event(ah_log_level level, int event, const char *fmt, ...)
{
    if (!ah__log_enabled(level))
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
