/* log.c - the library's single logging path: the process-wide handler and the one
 * function that hands it a line. Invariant: nothing in the core prints; every line goes
 * through ah_log_line() (the ah__log() formatters of util.c call it). The handler is the
 * library's one piece of process-wide state, so it lives here, in libagenthost, alone:
 * the Lua module and the mock library log through ah_log_line() instead of a copy. */
#include "internal.h"

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

int ah_log_enabled(ah_log_level level)
{
    return log_fn != NULL && level >= log_min;
}

void ah_log_line(ah_log_level level, int event, const char *line)
{
    if (ah_log_enabled(level))
        log_fn(log_ud, level, event, line ? line : "");
}
