/* error_internal.h - helpers shared by error.c and error_hints.c, never installed. */
#ifndef AH_ERROR_INTERNAL_H
#define AH_ERROR_INTERNAL_H

#include "agenthost/error.h"

#include <stddef.h>
#include <stdint.h>

/* A retry hint in free text ("Please try again in 17.2s.", "retry after 20 seconds"):
 * milliseconds (rounded up, clamped to AH_RETRY_AFTER_MAX_MS) or -1 when the text holds
 * none. text need not be NUL-terminated; only len bytes are read. */
int64_t ah__body_hint_parse(const char *text, size_t len);

#endif
