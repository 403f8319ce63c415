/* log.c - the library's single logging path and a few string helpers.
 * Invariant: nothing in the core prints; everything goes through ah__log(). */
#include "internal.h"

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

void ah__log(ah_log_level level, const char *fmt, ...)
{
    if (!ah__log_enabled(level))
        return;
    char line[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    log_fn(log_ud, level, line);
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
