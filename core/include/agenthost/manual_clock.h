/* agenthost/manual_clock.h - a clock for tests: it starts at the given times and moves
 * only when advanced, so a 30 s backoff schedule runs in microseconds. An advanced tier
 * (not included by agenthost.h); the functions are in libagenthost. */
#ifndef AGENTHOST_MANUAL_CLOCK_H
#define AGENTHOST_MANUAL_CLOCK_H

#include "agenthost/export.h"

#include "agenthost/clock.h"

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ah_manual_clock_new returns NULL on allocation failure. */
typedef struct ah_manual_clock ah_manual_clock;
AH_EXPORT ah_manual_clock *ah_manual_clock_new(int64_t now_ms, int64_t wall_ms);
AH_EXPORT void ah_manual_clock_free(ah_manual_clock *c);
AH_EXPORT void ah_manual_clock_advance(ah_manual_clock *c, int64_t ms);
/* The ah_clock view of it; borrowed, valid while c lives. */
AH_EXPORT const ah_clock *ah_manual_clock_get(ah_manual_clock *c);

#ifdef __cplusplus
}
#endif
#endif
