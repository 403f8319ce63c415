/* agenthost/log.h - the one logging function of the library, redirectable by embedders.
 * The library never writes to stdout/stderr by itself: with no handler set, log lines are
 * dropped. The host program installs a handler that prints to stderr. */
#ifndef AGENTHOST_LOG_H
#define AGENTHOST_LOG_H

#include "agenthost/export.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum ah_log_level {
    AH_LOG_DEBUG = 0,
    AH_LOG_INFO = 1,
    AH_LOG_WARN = 2,
    AH_LOG_ERROR = 3
} ah_log_level;

/* `line` is one formatted line without a trailing newline, borrowed for the call.
 * `event` is the type (an ah_event_type, agenthost/event.h) of the event this line
 * restates — AH_EV_LLM_RETRY / AH_EV_LLM_GAVE_UP for the retry loop's warnings — or -1
 * for a line of its own, so a handler whose program already shows those events (a
 * status display) can drop the duplicate without parsing the text. */
typedef void (*ah_log_fn)(void *ud, ah_log_level level, int event, const char *line);

/* The `event` of the lines that show HTTP heads, at AH_LOG_DEBUG (`agenthost -v`): one
 * line per line of a request's head as sent ("> POST /v1/messages HTTP/1.1", "> Host:
 * ...") and of a response's head as received ("< HTTP/1.1 529 ...", "< retry-after: 1"),
 * as curl -v shows them. Authentication and cookie values are [REDACTED] (Authorization,
 * x-api-key, api-key, Cookie, Set-Cookie, ...) and key-like text masked (ah_redact);
 * bodies are never shown. */
#define AH_LOG_HTTP_HEAD (-2)

/* Install (or with fn == NULL remove) the process-wide log handler. Lines below
 * `min_level` are not formatted at all. Not thread-safe against concurrent logging:
 * set it once at start-up. */
AH_EXPORT void ah_log_set_handler(ah_log_fn fn, void *ud, ah_log_level min_level);

AH_EXPORT const char *ah_log_level_name(ah_log_level level);

/* 1 when a handler is set and `level` reaches its min_level: a line at this level would
 * be delivered (format it only then). */
AH_EXPORT int ah_log_enabled(ah_log_level level);
/* Hand one line (borrowed; no trailing newline) to the handler, as the library's own lines
 * are; nothing when !ah_log_enabled(level). `event` as for ah_log_fn (-1: a line of its
 * own). For code beside the library that logs through the same handler, such as the Lua
 * binding and the mock provider. */
AH_EXPORT void ah_log_line(ah_log_level level, int event, const char *line);

#ifdef __cplusplus
}
#endif
#endif
