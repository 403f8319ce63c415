/* test_clock.c - the injected clock and RNG: the manual clock moves only when told, the
 * seeded RNG is deterministic per seed, and ah_rng_uniform / ah_rng_unit stay in bounds,
 * cover their range and have no modulo bias. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <string.h>

#include "agenthost.h"
#include "agenthost/manual_clock.h"

/* A scripted RNG: returns the given values in order, then repeats the last one. */
typedef struct script_rng {
    const uint64_t *v;
    int n, pos;
} script_rng;

static uint64_t script_next(void *ud)
{
    script_rng *s = ud;
    uint64_t x = s->v[s->pos < s->n ? s->pos : s->n - 1];
    s->pos++;
    return x;
}

static void real_clock_is_monotonic_and_wall_is_recent(void **state)
{
    (void)state;
    const ah_clock *c = ah_clock_real();
    assert_non_null(c);
    int64_t a = c->now_ms(c->ud);
    int64_t b = c->now_ms(c->ud);
    assert_true(b >= a);
    /* 2020-01-01 in Unix ms: a wall clock below it is not CLOCK_REALTIME. */
    assert_true(c->wall_ms(c->ud) > 1577836800000LL);
    assert_ptr_equal(ah_clock_real(), c);
}

static void manual_clock_moves_only_when_advanced(void **state)
{
    (void)state;
    ah_manual_clock *mc = ah_manual_clock_new(1000, 1700000000000LL);
    assert_non_null(mc);
    const ah_clock *c = ah_manual_clock_get(mc);
    assert_int_equal(c->now_ms(c->ud), 1000);
    assert_int_equal(c->now_ms(c->ud), 1000);
    assert_int_equal(c->wall_ms(c->ud), 1700000000000LL);

    ah_manual_clock_advance(mc, 5000);
    assert_int_equal(c->now_ms(c->ud), 6000);
    assert_int_equal(c->wall_ms(c->ud), 1700000005000LL);

    /* Monotonic time never goes back. */
    ah_manual_clock_advance(mc, -3000);
    assert_int_equal(c->now_ms(c->ud), 6000);

    /* Saturates instead of overflowing. */
    ah_manual_clock_advance(mc, INT64_MAX);
    assert_int_equal(c->now_ms(c->ud), INT64_MAX);
    ah_manual_clock_free(mc);
    ah_manual_clock_free(NULL);
    ah_manual_clock_advance(NULL, 5);
    assert_null(ah_manual_clock_get(NULL));
}

static void seeded_rng_is_deterministic_per_seed(void **state)
{
    (void)state;
    ah_seeded_rng *a = ah_seeded_rng_new(42), *b = ah_seeded_rng_new(42);
    ah_seeded_rng *c = ah_seeded_rng_new(43);
    const ah_rng *ra = ah_seeded_rng_get(a), *rb = ah_seeded_rng_get(b);
    const ah_rng *rc = ah_seeded_rng_get(c);
    int differ = 0;
    for (int i = 0; i < 1000; i++) {
        uint64_t x = ra->next_u64(ra->ud);
        assert_true(x == rb->next_u64(rb->ud));
        differ += x != rc->next_u64(rc->ud);
    }
    assert_true(differ > 990);
    ah_seeded_rng_free(a);

    /* Known answers of xoshiro256** seeded by splitmix64(42), computed with an
     * independent reimplementation of the published reference algorithms. */
    a = ah_seeded_rng_new(42);
    ra = ah_seeded_rng_get(a);
    assert_true(ra->next_u64(ra->ud) == 0x15780b2e0c2ec716ULL);
    assert_true(ra->next_u64(ra->ud) == 0x6104d9866d113a7eULL);
    assert_true(ra->next_u64(ra->ud) == 0xae17533239e499a1ULL);
    ah_seeded_rng_free(a);
    ah_seeded_rng_free(b);
    ah_seeded_rng_free(c);
    ah_seeded_rng_free(NULL);
}

static void seed_zero_draws_from_the_os(void **state)
{
    (void)state;
    /* Two OS-seeded generators agree only if the OS handed out the same 64 bits twice. */
    ah_seeded_rng *a = ah_seeded_rng_new(0), *b = ah_seeded_rng_new(0);
    assert_non_null(a);
    assert_non_null(b);
    const ah_rng *ra = ah_seeded_rng_get(a), *rb = ah_seeded_rng_get(b);
    int same = 0;
    for (int i = 0; i < 4; i++)
        same += ra->next_u64(ra->ud) == rb->next_u64(rb->ud);
    assert_true(same < 4);
    ah_seeded_rng_free(a);
    ah_seeded_rng_free(b);
}

static void seeded_bits_are_balanced(void **state)
{
    (void)state;
    /* Every bit position is set about half the time (xoshiro's low bits included). */
    ah_seeded_rng *r = ah_seeded_rng_new(7);
    const ah_rng *rng = ah_seeded_rng_get(r);
    int ones[64] = {0};
    enum { N = 20000 };
    for (int i = 0; i < N; i++) {
        uint64_t x = rng->next_u64(rng->ud);
        for (int bit = 0; bit < 64; bit++)
            ones[bit] += (int)((x >> bit) & 1);
    }
    for (int bit = 0; bit < 64; bit++) {
        assert_true(ones[bit] > N * 45 / 100);
        assert_true(ones[bit] < N * 55 / 100);
    }
    ah_seeded_rng_free(r);
}

static void uniform_bound_zero_and_negative_give_zero(void **state)
{
    (void)state;
    ah_seeded_rng *r = ah_seeded_rng_new(1);
    const ah_rng *rng = ah_seeded_rng_get(r);
    for (int i = 0; i < 100; i++) {
        assert_int_equal(ah_rng_uniform(rng, 0), 0);
        assert_int_equal(ah_rng_uniform(rng, -5), 0);
    }
    assert_int_equal(ah_rng_uniform(NULL, 10), 0);
    ah_seeded_rng_free(r);
}

static void uniform_small_bound_covers_every_value_evenly(void **state)
{
    (void)state;
    ah_seeded_rng *r = ah_seeded_rng_new(12345);
    const ah_rng *rng = ah_seeded_rng_get(r);
    enum { BOUND = 9, N = 100000 };
    int count[BOUND + 1] = {0};
    for (int i = 0; i < N; i++) {
        int64_t v = ah_rng_uniform(rng, BOUND);
        assert_true(v >= 0 && v <= BOUND);
        count[v]++;
    }
    /* Expected 10000 each; a fair generator stays well within +-5%. */
    for (int v = 0; v <= BOUND; v++) {
        assert_true(count[v] > 9500);
        assert_true(count[v] < 10500);
    }
    /* bound 1 yields both ends. */
    int seen[2] = {0, 0};
    for (int i = 0; i < 200; i++)
        seen[ah_rng_uniform(rng, 1)]++;
    assert_true(seen[0] > 0 && seen[1] > 0);
    ah_seeded_rng_free(r);
}

static void uniform_int64_max_uses_the_whole_range(void **state)
{
    (void)state;
    ah_seeded_rng *r = ah_seeded_rng_new(99);
    const ah_rng *rng = ah_seeded_rng_get(r);
    int top_quarter = 0, bottom_quarter = 0;
    for (int i = 0; i < 4000; i++) {
        int64_t v = ah_rng_uniform(rng, INT64_MAX);
        assert_true(v >= 0);
        top_quarter += v > INT64_MAX / 4 * 3;
        bottom_quarter += v < INT64_MAX / 4;
    }
    assert_true(top_quarter > 800 && top_quarter < 1200);
    assert_true(bottom_quarter > 800 && bottom_quarter < 1200);

    /* A raw draw of all ones maps to bound exactly: the top is reachable. */
    static const uint64_t ones[] = {UINT64_MAX};
    script_rng s = {ones, 1, 0};
    ah_rng fake = {script_next, &s};
    assert_true(ah_rng_uniform(&fake, INT64_MAX) == INT64_MAX);
    ah_seeded_rng_free(r);
}

static void uniform_rejects_the_biased_low_draws(void **state)
{
    (void)state;
    /* bound + 1 = 3 * 2^61: 2^64 mod 3*2^61 = 2^62, so raw draws below 2^62 would
     * favour the low residues and must be redrawn. A plain modulo would return 1. */
    const int64_t bound = 3 * ((int64_t)1 << 61) - 1;
    static const uint64_t draws[] = {1, (1ULL << 62) + 7};
    script_rng s = {draws, 2, 0};
    ah_rng fake = {script_next, &s};
    assert_true(ah_rng_uniform(&fake, bound) == (int64_t)((1ULL << 62) + 7));
    assert_int_equal(s.pos, 2);

    /* range 3: 2^64 mod 3 = 1, so only the draw 0 is rejected. */
    static const uint64_t small[] = {0, 5};
    script_rng t = {small, 2, 0};
    ah_rng fake2 = {script_next, &t};
    assert_int_equal(ah_rng_uniform(&fake2, 2), 5 % 3);
    assert_int_equal(t.pos, 2);
}

static void unit_is_in_half_open_interval_and_spread(void **state)
{
    (void)state;
    ah_seeded_rng *r = ah_seeded_rng_new(2024);
    const ah_rng *rng = ah_seeded_rng_get(r);
    double lo = 1.0, hi = 0.0, sum = 0.0;
    enum { N = 10000 };
    for (int i = 0; i < N; i++) {
        double u = ah_rng_unit(rng);
        assert_true(u >= 0.0 && u < 1.0);
        lo = u < lo ? u : lo;
        hi = u > hi ? u : hi;
        sum += u;
    }
    assert_true(lo < 0.01);
    assert_true(hi > 0.99);
    assert_true(sum / N > 0.48 && sum / N < 0.52);

    /* The extreme raw draws map to 0 and to just below 1. */
    static const uint64_t ext[] = {0, UINT64_MAX};
    script_rng s = {ext, 2, 0};
    ah_rng fake = {script_next, &s};
    assert_true(ah_rng_unit(&fake) == 0.0);
    double top = ah_rng_unit(&fake);
    assert_true(top < 1.0 && top > 0.9999999);
    assert_true(ah_rng_unit(NULL) == 0.0);
    ah_seeded_rng_free(r);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(real_clock_is_monotonic_and_wall_is_recent),
        cmocka_unit_test(manual_clock_moves_only_when_advanced),
        cmocka_unit_test(seeded_rng_is_deterministic_per_seed),
        cmocka_unit_test(seed_zero_draws_from_the_os),
        cmocka_unit_test(seeded_bits_are_balanced),
        cmocka_unit_test(uniform_bound_zero_and_negative_give_zero),
        cmocka_unit_test(uniform_small_bound_covers_every_value_evenly),
        cmocka_unit_test(uniform_int64_max_uses_the_whole_range),
        cmocka_unit_test(uniform_rejects_the_biased_low_draws),
        cmocka_unit_test(unit_is_in_half_open_interval_and_spread),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
