/* agenthost/clock.h - injected time and randomness.
 *
 * The core reads time and random numbers only through these interfaces, so tests run
 * backoff schedules on virtual time (a 5 s Retry-After verified without waiting 5 s).
 */
#ifndef AGENTHOST_CLOCK_H
#define AGENTHOST_CLOCK_H

#include "agenthost/export.h"

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct ah_clock {
    /* Monotonic milliseconds (arbitrary epoch). */
    int64_t (*now_ms)(void *ud);
    /* Wall-clock milliseconds since the Unix epoch (for HTTP-date Retry-After). */
    int64_t (*wall_ms)(void *ud);
    void *ud;
} ah_clock;

typedef struct ah_rng {
    /* Uniform 64 random bits. */
    uint64_t (*next_u64)(void *ud);
    void *ud;
} ah_rng;

/* The real clock (CLOCK_MONOTONIC / CLOCK_REALTIME). Static storage; never free it.
 * A clock that moves only when told, for tests: agenthost/manual_clock.h. */
AH_EXPORT const ah_clock *ah_clock_real(void);

/* A seeded RNG (xoshiro256** or similar). seed 0 = seed from the OS. Deterministic for
 * a given non-zero seed. Returns NULL on allocation failure. */
typedef struct ah_seeded_rng ah_seeded_rng;
AH_EXPORT ah_seeded_rng *ah_seeded_rng_new(uint64_t seed);
AH_EXPORT void ah_seeded_rng_free(ah_seeded_rng *r);
AH_EXPORT const ah_rng *ah_seeded_rng_get(ah_seeded_rng *r);

/* Uniform integer in [0, bound] inclusive (bound >= 0), without modulo bias. */
AH_EXPORT int64_t ah_rng_uniform(const ah_rng *rng, int64_t bound);
/* Uniform double in [0, 1). */
AH_EXPORT double ah_rng_unit(const ah_rng *rng);

#ifdef __cplusplus
}
#endif
#endif
