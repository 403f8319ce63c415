/* clock.c - the injected clock and RNG: the real clock, a manual clock for tests, and a
 * seeded xoshiro256** generator.
 *
 * Invariants: the core never calls clock_gettime() or a random source anywhere else, so
 * swapping these views puts every schedule on virtual time. A manual clock only moves
 * forward. A seeded RNG's state is never all-zero (xoshiro would then emit only zeros):
 * it is expanded from the seed through splitmix64, whose outputs are a bijection of its
 * counter and so cannot all be zero. Neither the manual clock nor a seeded RNG is
 * thread-safe: give each loop/thread its own.
 */
#include "internal.h"

#include "agenthost/manual_clock.h"

#include <fcntl.h>
#include <stdlib.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

/* ---- the real clock ---------------------------------------------------------------- */

static int64_t clock_ms(clockid_t id)
{
    struct timespec ts;
    if (clock_gettime(id, &ts) != 0)
        return 0; /* cannot happen for these two clocks on POSIX; never abort */
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static int64_t real_now_ms(void *ud)
{
    (void)ud;
    return clock_ms(CLOCK_MONOTONIC);
}

static int64_t real_wall_ms(void *ud)
{
    (void)ud;
    return clock_ms(CLOCK_REALTIME);
}

static const ah_clock real_clock = {real_now_ms, real_wall_ms, NULL};

const ah_clock *ah_clock_real(void)
{
    return &real_clock;
}

/* ---- the manual clock -------------------------------------------------------------- */

struct ah_manual_clock {
    ah_clock view; /* ud points back at this struct */
    int64_t now_ms;
    int64_t wall_ms;
};

static int64_t manual_now_ms(void *ud)
{
    return ((const ah_manual_clock *)ud)->now_ms;
}

static int64_t manual_wall_ms(void *ud)
{
    return ((const ah_manual_clock *)ud)->wall_ms;
}

ah_manual_clock *ah_manual_clock_new(int64_t now_ms, int64_t wall_ms)
{
    ah_manual_clock *c = calloc(1, sizeof *c);
    if (!c)
        return NULL;
    c->view.now_ms = manual_now_ms;
    c->view.wall_ms = manual_wall_ms;
    c->view.ud = c;
    c->now_ms = now_ms;
    c->wall_ms = wall_ms;
    return c;
}

void ah_manual_clock_free(ah_manual_clock *c)
{
    free(c);
}

void ah_manual_clock_advance(ah_manual_clock *c, int64_t ms)
{
    /* Monotonic time never goes back, so a negative step is ignored rather than
     * honoured; saturate instead of overflowing on absurd steps. */
    if (!c || ms <= 0)
        return;
    c->now_ms = (c->now_ms > INT64_MAX - ms) ? INT64_MAX : c->now_ms + ms;
    c->wall_ms = (c->wall_ms > INT64_MAX - ms) ? INT64_MAX : c->wall_ms + ms;
}

const ah_clock *ah_manual_clock_get(ah_manual_clock *c)
{
    return c ? &c->view : NULL;
}

/* ---- the seeded RNG (xoshiro256**, seeded through splitmix64) ---------------------- */

struct ah_seeded_rng {
    ah_rng view; /* ud points back at this struct */
    uint64_t s[4];
};

static uint64_t splitmix64(uint64_t *x)
{
    uint64_t z = (*x += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

static uint64_t rotl(uint64_t x, int k)
{
    return (x << k) | (x >> (64 - k));
}

static uint64_t xoshiro_next(void *ud)
{
    uint64_t *s = ((ah_seeded_rng *)ud)->s;
    uint64_t result = rotl(s[1] * 5, 7) * 9;
    uint64_t t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 45);
    return result;
}

/* 64 bits from the OS. getrandom() first; /dev/urandom when the syscall is missing
 * (old kernels, seccomp); as a last resort time and an address, which is weak but still
 * decorrelates processes — jitter needs spread, not secrecy. */
static uint64_t os_seed(void)
{
    uint64_t v = 0;
    if (getrandom(&v, sizeof v, GRND_NONBLOCK) == (ssize_t)sizeof v)
        return v;
    int fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
    if (fd >= 0) {
        ssize_t n = read(fd, &v, sizeof v);
        close(fd);
        if (n == (ssize_t)sizeof v)
            return v;
    }
    ah__log(AH_LOG_WARN, "rng: no OS randomness, seeding from time");
    uint64_t mix =
        (uint64_t)clock_ms(CLOCK_REALTIME) ^ (uint64_t)clock_ms(CLOCK_MONOTONIC);
    return mix ^ (uint64_t)(uintptr_t)&v ^ ((uint64_t)getpid() << 32);
}

ah_seeded_rng *ah_seeded_rng_new(uint64_t seed)
{
    ah_seeded_rng *r = calloc(1, sizeof *r);
    if (!r)
        return NULL;
    uint64_t x = seed ? seed : os_seed();
    for (int i = 0; i < 4; i++)
        r->s[i] = splitmix64(&x);
    r->view.next_u64 = xoshiro_next;
    r->view.ud = r;
    return r;
}

void ah_seeded_rng_free(ah_seeded_rng *r)
{
    free(r);
}

const ah_rng *ah_seeded_rng_get(ah_seeded_rng *r)
{
    return r ? &r->view : NULL;
}

/* ---- drawing from any ah_rng ------------------------------------------------------- */

int64_t ah_rng_uniform(const ah_rng *rng, int64_t bound)
{
    if (!rng || !rng->next_u64 || bound <= 0)
        return 0;
    /* range <= 2^63, so it fits. Rejection sampling: drop the lowest (2^64 mod range)
     * draws so every residue is equally likely; at most half the draws are rejected. */
    uint64_t range = (uint64_t)bound + 1;
    uint64_t threshold = (0 - range) % range; /* == 2^64 mod range */
    uint64_t x;
    do {
        x = rng->next_u64(rng->ud);
    } while (x < threshold);
    return (int64_t)(x % range);
}

double ah_rng_unit(const ah_rng *rng)
{
    if (!rng || !rng->next_u64)
        return 0.0;
    /* The top 53 bits fill a double's mantissa exactly: multiples of 2^-53 in [0, 1). */
    return (double)(rng->next_u64(rng->ud) >> 11) * (1.0 / 9007199254740992.0);
}
