/* test_backoff.c - the retry policy (defaults, validation, name-based setters), the pure
 * backoff decision (jitter formulas, Retry-After floor, deadline, attempts, predicate)
 * and the shared retry budget, all on a manual clock and seeded RNGs: no real waiting. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <limits.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "agenthost.h"
#include "agenthost/manual_clock.h"

/* ---- helpers ----------------------------------------------------------------------- */

static ah_error make_err(ah_error_kind kind, int status, int64_t retry_after_ms)
{
    ah_error e;
    memset(&e, 0, sizeof e);
    e.kind = kind;
    e.status = status;
    e.retry_after_ms = retry_after_ms;
    e.retry_after_source =
        retry_after_ms >= 0 ? AH_HINT_RETRY_AFTER_SECONDS : AH_HINT_NONE;
    e.should_retry = -1;
    return e;
}

static ah_error http(int status, int64_t retry_after_ms)
{
    return make_err(AH_EK_HTTP, status, retry_after_ms);
}

static ah_policy policy_with(ah_jitter jitter, int max_attempts)
{
    ah_policy p;
    ah_policy_init(&p);
    p.jitter = jitter;
    p.max_attempts = max_attempts;
    return p;
}

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

static int64_t expected_exp(int64_t base, int64_t cap, int n)
{
    int64_t e = base;
    for (int i = 1; i < n && e < cap; i++)
        e *= 2;
    return e < cap ? e : cap;
}

/* ---- defaults, validation, setters ------------------------------------------------- */

static void defaults_match_the_spec(void **state)
{
    (void)state;
    ah_policy p;
    memset(&p, 0xab, sizeof p);
    ah_policy_init(&p);
    assert_int_equal(p.max_attempts, 4);
    assert_int_equal(p.base_ms, 500);
    assert_int_equal(p.cap_ms, 30000);
    assert_int_equal(p.jitter, AH_JITTER_FULL);
    assert_int_equal(p.retry_after, AH_RETRY_AFTER_FLOOR);
    assert_int_equal(p.max_retry_after_ms, 60000);
    assert_int_equal(p.attempt_timeout_ms, 0);
    assert_int_equal(p.deadline_ms, 0);
    /* a stalled stream is cut after 5 minutes of silence, not waited for forever */
    assert_int_equal(p.idle_timeout_ms, 300000);
    assert_int_equal(p.max_continuations, 3);
    assert_null(p.retry_on);
    assert_null(p.retry_on_ud);
    char err[128] = "untouched";
    assert_int_equal(ah_policy_validate(&p, err, sizeof err), AH_OK);
    assert_string_equal(ah_jitter_name(p.jitter), "full");
    assert_string_equal(ah_retry_after_mode_name(p.retry_after), "floor");
    assert_string_equal(ah_jitter_name((ah_jitter)42), "unknown");
}

typedef struct bad_row {
    const char *field; /* the name the message must carry */
    void (*spoil)(ah_policy *p);
} bad_row;

static void spoil_attempts_zero(ah_policy *p)
{
    p->max_attempts = 0;
}
static void spoil_attempts_neg(ah_policy *p)
{
    p->max_attempts = -3;
}
static void spoil_base(ah_policy *p)
{
    p->base_ms = -1;
}
static void spoil_cap(ah_policy *p)
{
    p->cap_ms = -1;
}
static void spoil_cap_below_base(ah_policy *p)
{
    p->cap_ms = 100;
}
static void spoil_jitter(ah_policy *p)
{
    p->jitter = (ah_jitter)17;
}
static void spoil_retry_after(ah_policy *p)
{
    p->retry_after = (ah_retry_after_mode)-1;
}
static void spoil_max_ra(ah_policy *p)
{
    p->max_retry_after_ms = -1;
}
static void spoil_attempt_timeout(ah_policy *p)
{
    p->attempt_timeout_ms = -5;
}
static void spoil_deadline(ah_policy *p)
{
    p->deadline_ms = -1;
}
static void spoil_idle(ah_policy *p)
{
    p->idle_timeout_ms = INT64_MIN;
}
static void spoil_continuations(ah_policy *p)
{
    p->max_continuations = -1;
}

static void invalid_policy_is_rejected_naming_the_field(void **state)
{
    (void)state;
    static const bad_row rows[] = {
        {"policy.max_attempts", spoil_attempts_zero},
        {"policy.max_attempts", spoil_attempts_neg},
        {"policy.base_ms", spoil_base},
        {"policy.cap_ms", spoil_cap},
        {"policy.cap_ms", spoil_cap_below_base},
        {"policy.jitter", spoil_jitter},
        {"policy.retry_after", spoil_retry_after},
        {"policy.max_retry_after_ms", spoil_max_ra},
        {"policy.attempt_timeout_ms", spoil_attempt_timeout},
        {"policy.deadline_ms", spoil_deadline},
        {"policy.idle_timeout_ms", spoil_idle},
        {"policy.max_continuations", spoil_continuations},
    };
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        ah_policy p;
        ah_policy_init(&p);
        rows[i].spoil(&p);
        char err[128] = "";
        assert_int_equal(ah_policy_validate(&p, err, sizeof err), AH_ERR_INVALID);
        if (strstr(err, rows[i].field) != err) {
            print_error("row %zu: '%s' does not start with '%s'\n", i, err,
                        rows[i].field);
            fail();
        }
    }
    ah_policy p;
    ah_policy_init(&p);
    p.max_attempts = 0;
    char err[128];
    ah_policy_validate(&p, err, sizeof err);
    assert_string_equal(err, "policy.max_attempts must be >= 1 (got 0)");
    p.max_attempts = 4;
    p.cap_ms = 100;
    ah_policy_validate(&p, err, sizeof err);
    assert_string_equal(err, "policy.cap_ms must be >= policy.base_ms (got 100 < 500)");
    /* No buffer, or a tiny one, is fine. */
    assert_int_equal(ah_policy_validate(&p, NULL, 0), AH_ERR_INVALID);
    assert_int_equal(ah_policy_validate(&p, err, 4), AH_ERR_INVALID);
    assert_int_equal(strlen(err), 3);
    assert_int_equal(ah_policy_validate(NULL, err, sizeof err), AH_ERR_INVALID);

    /* Edges that are valid: zero durations, cap == base, zero continuations. */
    ah_policy_init(&p);
    p.base_ms = 0;
    p.cap_ms = 0;
    p.max_retry_after_ms = 0;
    p.max_continuations = 0;
    p.max_attempts = 1;
    assert_int_equal(ah_policy_validate(&p, err, sizeof err), AH_OK);
}

static void setters_set_every_field_by_name(void **state)
{
    (void)state;
    ah_policy p;
    ah_policy_init(&p);
    char err[160];
    assert_int_equal(ah_policy_set_int(&p, "max_attempts", 7, err, sizeof err), AH_OK);
    assert_int_equal(ah_policy_set_int(&p, "base_ms", 100, err, sizeof err), AH_OK);
    assert_int_equal(ah_policy_set_int(&p, "cap_ms", 9000, err, sizeof err), AH_OK);
    assert_int_equal(ah_policy_set_int(&p, "max_retry_after_ms", 1234, err, sizeof err),
                     AH_OK);
    assert_int_equal(ah_policy_set_int(&p, "attempt_timeout_ms", 30000, err, sizeof err),
                     AH_OK);
    assert_int_equal(ah_policy_set_int(&p, "deadline_ms", 120000, err, sizeof err),
                     AH_OK);
    assert_int_equal(ah_policy_set_int(&p, "idle_timeout_ms", 15000, err, sizeof err),
                     AH_OK);
    assert_int_equal(ah_policy_set_int(&p, "max_continuations", 0, err, sizeof err),
                     AH_OK);
    assert_int_equal(ah_policy_set_str(&p, "jitter", "decorrelated", err, sizeof err),
                     AH_OK);
    assert_int_equal(ah_policy_set_str(&p, "retry_after", "ignore", err, sizeof err),
                     AH_OK);
    assert_int_equal(p.max_attempts, 7);
    assert_int_equal(p.base_ms, 100);
    assert_int_equal(p.cap_ms, 9000);
    assert_int_equal(p.max_retry_after_ms, 1234);
    assert_int_equal(p.attempt_timeout_ms, 30000);
    assert_int_equal(p.deadline_ms, 120000);
    assert_int_equal(p.idle_timeout_ms, 15000);
    assert_int_equal(p.max_continuations, 0);
    assert_int_equal(p.jitter, AH_JITTER_DECORRELATED);
    assert_int_equal(p.retry_after, AH_RETRY_AFTER_IGNORE);
    assert_int_equal(ah_policy_validate(&p, err, sizeof err), AH_OK);

    /* Every jitter name round-trips. */
    for (int j = 0; j < AH_JITTER_COUNT_; j++) {
        assert_int_equal(ah_policy_set_str(&p, "jitter", ah_jitter_name((ah_jitter)j),
                                           err, sizeof err),
                         AH_OK);
        assert_int_equal(p.jitter, j);
    }
    /* Order does not matter: cap below base is only a validate() error. */
    assert_int_equal(ah_policy_set_int(&p, "base_ms", 20000, err, sizeof err), AH_OK);
    assert_int_equal(ah_policy_validate(&p, err, sizeof err), AH_ERR_INVALID);
    assert_int_equal(ah_policy_set_int(&p, "cap_ms", 40000, err, sizeof err), AH_OK);
    assert_int_equal(ah_policy_validate(&p, err, sizeof err), AH_OK);
}

static void setters_reject_unknown_fields_types_and_values(void **state)
{
    (void)state;
    ah_policy p, before;
    ah_policy_init(&p);
    before = p;
    char err[160];

    assert_int_equal(ah_policy_set_int(&p, "max_attempt", 3, err, sizeof err),
                     AH_ERR_INVALID);
    assert_string_equal(
        err, "unknown policy field 'max_attempt' (did you mean 'max_attempts'?)");
    assert_int_equal(ah_policy_set_int(&p, "retries", 3, err, sizeof err),
                     AH_ERR_INVALID);
    assert_string_equal(err, "unknown policy field 'retries'");
    assert_int_equal(ah_policy_set_str(&p, "jiter", "full", err, sizeof err),
                     AH_ERR_INVALID);
    assert_non_null(strstr(err, "unknown policy field 'jiter'"));
    assert_int_equal(ah_policy_set_int(&p, NULL, 3, err, sizeof err), AH_ERR_INVALID);
    assert_non_null(strstr(err, "unknown policy field"));
    assert_int_equal(ah_policy_set_int(&p, "", 3, err, sizeof err), AH_ERR_INVALID);
    assert_string_equal(err, "unknown policy field ''");

    /* Wrong types. */
    assert_int_equal(ah_policy_set_str(&p, "base_ms", "500", err, sizeof err),
                     AH_ERR_INVALID);
    assert_string_equal(err, "policy.base_ms expects an integer, not a string");
    assert_int_equal(ah_policy_set_int(&p, "jitter", 1, err, sizeof err), AH_ERR_INVALID);
    assert_string_equal(err, "policy.jitter expects a string, not an integer");
    assert_int_equal(ah_policy_set_int(&p, "retry_on", 1, err, sizeof err),
                     AH_ERR_INVALID);
    assert_non_null(strstr(err, "policy.retry_on expects a function"));
    assert_int_equal(ah_policy_set_str(&p, "retry_on", "x", err, sizeof err),
                     AH_ERR_INVALID);

    /* Unknown mode names. */
    assert_int_equal(ah_policy_set_str(&p, "jitter", "fulll", err, sizeof err),
                     AH_ERR_INVALID);
    assert_string_equal(
        err,
        "policy.jitter must be one of full, equal, decorrelated, none (got 'fulll')");
    assert_int_equal(ah_policy_set_str(&p, "retry_after", "max", err, sizeof err),
                     AH_ERR_INVALID);
    assert_string_equal(err,
                        "policy.retry_after must be one of floor, ignore (got 'max')");
    assert_int_equal(ah_policy_set_str(&p, "jitter", NULL, err, sizeof err),
                     AH_ERR_INVALID);

    /* Out of range, checked at once. */
    assert_int_equal(ah_policy_set_int(&p, "max_attempts", 0, err, sizeof err),
                     AH_ERR_INVALID);
    assert_string_equal(err, "policy.max_attempts must be >= 1 (got 0)");
    assert_int_equal(
        ah_policy_set_int(&p, "max_attempts", (int64_t)1 << 40, err, sizeof err),
        AH_ERR_INVALID);
    assert_non_null(strstr(err, "policy.max_attempts must be <= 2147483647"));
    assert_int_equal(ah_policy_set_int(&p, "deadline_ms", -1, err, sizeof err),
                     AH_ERR_INVALID);
    assert_string_equal(err, "policy.deadline_ms must be >= 0 (got -1)");

    /* Nothing above changed the policy. */
    assert_memory_equal(&p, &before, sizeof p);
}

static void is_field_knows_exactly_the_spec_fields(void **state)
{
    (void)state;
    static const char *const spec[] = {
        "max_attempts",
        "base_ms",
        "cap_ms",
        "jitter",
        "retry_after",
        "max_retry_after_ms",
        "attempt_timeout_ms",
        "deadline_ms",
        "idle_timeout_ms",
        "max_continuations",
        "retry_on",
    };
    for (size_t i = 0; i < sizeof spec / sizeof spec[0]; i++)
        assert_true(ah_policy_is_field(spec[i]));
    assert_false(ah_policy_is_field("max_attempt"));
    assert_false(ah_policy_is_field("MAX_ATTEMPTS"));
    assert_false(ah_policy_is_field(""));
    assert_false(ah_policy_is_field(NULL));
    assert_false(ah_policy_is_field("retry_on_ud"));
}

/* ---- jitter formulas --------------------------------------------------------------- */

static void full_jitter_stays_in_bounds_and_covers_the_range(void **state)
{
    (void)state;
    ah_policy p = policy_with(AH_JITTER_FULL, 100);
    ah_error e = http(503, -1);
    for (int n = 1; n <= 9; n++) {
        int64_t bound = expected_exp(p.base_ms, p.cap_ms, n);
        int64_t lo = INT64_MAX, hi = -1;
        for (uint64_t seed = 1; seed <= 100; seed++) {
            ah_seeded_rng *r = ah_seeded_rng_new(seed * 7919 + (uint64_t)n);
            for (int i = 0; i < 100; i++) {
                ah_decision d =
                    ah_backoff_decide(&p, &e, n, 0, 0, ah_seeded_rng_get(r), NULL);
                assert_true(d.retry);
                assert_int_equal(d.wait_source, AH_WAIT_BACKOFF);
                assert_int_equal(d.reason, AH_GIVEUP_COUNT_);
                assert_true(d.wait_ms >= 0 && d.wait_ms <= bound);
                assert_int_equal(d.wait_ms, d.jittered_ms);
                lo = d.wait_ms < lo ? d.wait_ms : lo;
                hi = d.wait_ms > hi ? d.wait_ms : hi;
            }
            ah_seeded_rng_free(r);
        }
        /* 10k samples: the spread really covers [0, bound]. */
        assert_true(lo < bound / 10);
        assert_true(hi > bound * 9 / 10);
    }
}

static void none_jitter_is_the_capped_exponential_even_for_huge_n(void **state)
{
    (void)state;
    ah_policy p = policy_with(AH_JITTER_NONE, INT_MAX);
    ah_error e = http(503, -1);
    static const int64_t want[] = {500, 1000, 2000, 4000, 8000, 16000, 30000, 30000};
    for (int n = 1; n <= 8; n++) {
        ah_decision d = ah_backoff_decide(&p, &e, n, 0, 0, NULL, NULL);
        assert_true(d.retry);
        assert_int_equal(d.wait_ms, want[n - 1]);
    }
    /* Shifts past 63 bits must saturate at cap, not overflow. */
    p.base_ms = 1;
    p.cap_ms = INT64_MAX;
    assert_true(ah_backoff_decide(&p, &e, 63, 0, 0, NULL, NULL).wait_ms == (int64_t)1
                                                                               << 62);
    assert_true(ah_backoff_decide(&p, &e, 64, 0, 0, NULL, NULL).wait_ms == INT64_MAX);
    assert_true(ah_backoff_decide(&p, &e, INT_MAX - 1, 0, 0, NULL, NULL).wait_ms ==
                INT64_MAX);
    p.base_ms = INT64_MAX / 2 + 1; /* doubling once overflows */
    assert_true(ah_backoff_decide(&p, &e, 2, 0, 0, NULL, NULL).wait_ms == INT64_MAX);
    p.base_ms = 0;
    p.cap_ms = 0;
    assert_int_equal(ah_backoff_decide(&p, &e, 5, 0, 0, NULL, NULL).wait_ms, 0);
    /* A NULL rng makes every mode deterministic at exp(n). */
    p = policy_with(AH_JITTER_FULL, 10);
    assert_int_equal(ah_backoff_decide(&p, &e, 3, 0, 0, NULL, NULL).wait_ms, 2000);
}

static void equal_jitter_is_exp_times_0_8_to_1_2(void **state)
{
    (void)state;
    ah_policy p = policy_with(AH_JITTER_EQUAL, 100);
    ah_error e = http(503, -1);
    /* Draw 0 gives factor 0.8 exactly; the largest draw gives just under 1.2. */
    static const uint64_t draws[] = {0, UINT64_MAX};
    script_rng s = {draws, 2, 0};
    ah_rng fake = {script_next, &s};
    assert_int_equal(ah_backoff_decide(&p, &e, 3, 0, 0, &fake, NULL).wait_ms, 1600);
    assert_int_equal(ah_backoff_decide(&p, &e, 3, 0, 0, &fake, NULL).wait_ms, 2400);

    ah_seeded_rng *r = ah_seeded_rng_new(5);
    for (int n = 1; n <= 9; n++) {
        int64_t ex = expected_exp(p.base_ms, p.cap_ms, n);
        int64_t lo = INT64_MAX, hi = -1;
        for (int i = 0; i < 2000; i++) {
            int64_t w =
                ah_backoff_decide(&p, &e, n, 0, 0, ah_seeded_rng_get(r), NULL).wait_ms;
            assert_true(w >= ex * 8 / 10 && w <= ex * 12 / 10);
            lo = w < lo ? w : lo;
            hi = w > hi ? w : hi;
        }
        assert_true(lo < ex * 82 / 100);
        assert_true(hi > ex * 118 / 100);
    }
    /* Documented: equal jitter may exceed cap_ms by up to 20%. */
    assert_int_equal(ah_backoff_decide(&p, &e, 20, 0, 0, &fake, NULL).wait_ms, 36000);
    ah_seeded_rng_free(r);
}

static void decorrelated_jitter_follows_the_previous_wait(void **state)
{
    (void)state;
    ah_policy p = policy_with(AH_JITTER_DECORRELATED, 100);
    ah_error e = http(503, -1);
    ah_seeded_rng *r = ah_seeded_rng_new(11);
    const ah_rng *rng = ah_seeded_rng_get(r);
    /* No previous wait: U(base, base) = base. */
    assert_int_equal(ah_backoff_decide(&p, &e, 1, 0, 0, rng, NULL).wait_ms, 500);
    /* prev 1000: U(500, 3000), spread over the range. */
    int64_t lo = INT64_MAX, hi = -1;
    for (int i = 0; i < 5000; i++) {
        int64_t w = ah_backoff_decide(&p, &e, 2, 0, 1000, rng, NULL).wait_ms;
        assert_true(w >= 500 && w <= 3000);
        lo = w < lo ? w : lo;
        hi = w > hi ? w : hi;
    }
    assert_true(lo < 600 && hi > 2900);
    /* prev below base/3: still at least base. */
    for (int i = 0; i < 100; i++)
        assert_int_equal(ah_backoff_decide(&p, &e, 2, 0, 100, rng, NULL).wait_ms, 500);
    /* Capped, and no overflow from a huge previous wait. */
    for (int i = 0; i < 1000; i++) {
        int64_t w = ah_backoff_decide(&p, &e, 2, 0, 25000, rng, NULL).wait_ms;
        assert_true(w >= 500 && w <= 30000);
    }
    p.cap_ms = INT64_MAX;
    for (int i = 0; i < 100; i++) {
        int64_t w = ah_backoff_decide(&p, &e, 2, 0, INT64_MAX - 1, rng, NULL).wait_ms;
        assert_true(w >= 500);
    }
    /* A chained schedule: each wait feeds the next, all within [base, cap]. */
    p.cap_ms = 30000;
    int64_t prev = 0;
    for (int n = 1; n < 50; n++) {
        ah_decision d = ah_backoff_decide(&p, &e, n, 0, prev, rng, NULL);
        assert_true(d.wait_ms >= 500 && d.wait_ms <= 30000);
        assert_true(d.wait_ms <= (prev * 3 > 500 ? prev * 3 : 500));
        prev = d.wait_ms;
    }
    ah_seeded_rng_free(r);
}

/* ---- the server's hint ------------------------------------------------------------- */

static void retry_after_is_a_floor_applied_after_jitter(void **state)
{
    (void)state;
    ah_policy p = policy_with(AH_JITTER_FULL, 10);
    ah_error slow = http(429, 5000);
    /* Full jitter on attempt 1 is <= 500, so a 5000 hint always wins, exactly. */
    for (uint64_t seed = 1; seed <= 200; seed++) {
        ah_seeded_rng *r = ah_seeded_rng_new(seed);
        ah_decision d = ah_backoff_decide(&p, &slow, 1, 0, 0, ah_seeded_rng_get(r), NULL);
        assert_true(d.retry);
        assert_int_equal(d.wait_ms, 5000);
        assert_int_equal(d.wait_source, AH_WAIT_SERVER);
        assert_int_equal(d.hint_ms, 5000);
        assert_true(d.jittered_ms <= 500);
        ah_seeded_rng_free(r);
    }
    /* A small hint under a larger jittered wait leaves the jittered wait. */
    p.jitter = AH_JITTER_NONE;
    ah_error quick = http(503, 100);
    ah_decision d = ah_backoff_decide(&p, &quick, 3, 0, 0, NULL, NULL);
    assert_true(d.retry);
    assert_int_equal(d.wait_ms, 2000);
    assert_int_equal(d.jittered_ms, 2000);
    assert_int_equal(d.hint_ms, 100);
    assert_int_equal(d.wait_source, AH_WAIT_BACKOFF);
    /* A tie goes to the server: its floor is what binds. */
    ah_error tie = http(503, 2000);
    d = ah_backoff_decide(&p, &tie, 3, 0, 0, NULL, NULL);
    assert_int_equal(d.wait_ms, 2000);
    assert_int_equal(d.wait_source, AH_WAIT_SERVER);
    /* With full jitter, whichever is larger wins, and the source says which. */
    p.jitter = AH_JITTER_FULL;
    ah_seeded_rng *r = ah_seeded_rng_new(77);
    int saw_server = 0, saw_backoff = 0;
    ah_error mid = http(503, 1000);
    for (int i = 0; i < 1000; i++) {
        d = ah_backoff_decide(&p, &mid, 3, 0, 0, ah_seeded_rng_get(r), NULL);
        assert_int_equal(d.wait_ms, d.jittered_ms > 1000 ? d.jittered_ms : 1000);
        assert_int_equal(d.wait_source,
                         d.jittered_ms > 1000 ? AH_WAIT_BACKOFF : AH_WAIT_SERVER);
        saw_server += d.wait_source == AH_WAIT_SERVER;
        saw_backoff += d.wait_source == AH_WAIT_BACKOFF;
    }
    assert_true(saw_server > 0 && saw_backoff > 0);
    ah_seeded_rng_free(r);
}

static void retry_after_ignore_uses_backoff_alone(void **state)
{
    (void)state;
    ah_policy p = policy_with(AH_JITTER_NONE, 10);
    p.retry_after = AH_RETRY_AFTER_IGNORE;
    ah_error e = http(429, 5000);
    ah_decision d = ah_backoff_decide(&p, &e, 1, 0, 0, NULL, NULL);
    assert_true(d.retry);
    assert_int_equal(d.wait_ms, 500);
    assert_int_equal(d.wait_source, AH_WAIT_BACKOFF);
    assert_int_equal(d.hint_ms, 5000); /* still reported */
    /* Ignored hints cannot be "too long" either. */
    e.retry_after_ms = 3600000;
    d = ah_backoff_decide(&p, &e, 1, 0, 0, NULL, NULL);
    assert_true(d.retry);
    assert_int_equal(d.wait_ms, 500);
}

static void hint_beyond_max_retry_after_gives_up_at_once(void **state)
{
    (void)state;
    ah_policy p = policy_with(AH_JITTER_FULL, 10);
    ah_seeded_rng *r = ah_seeded_rng_new(3);
    ah_error e = http(429, 60001);
    ah_decision d = ah_backoff_decide(&p, &e, 1, 0, 0, ah_seeded_rng_get(r), NULL);
    assert_false(d.retry);
    assert_int_equal(d.reason, AH_GIVEUP_RETRY_AFTER_TOO_LONG);
    assert_int_equal(d.hint_ms, 60001);
    assert_int_equal(d.wait_ms, 60001); /* what the server wanted, for the message */
    /* Exactly the limit is accepted. */
    e.retry_after_ms = 60000;
    d = ah_backoff_decide(&p, &e, 1, 0, 0, ah_seeded_rng_get(r), NULL);
    assert_true(d.retry);
    assert_int_equal(d.wait_ms, 60000);
    /* The limit is the policy's. */
    p.max_retry_after_ms = 1000;
    e.retry_after_ms = 1500;
    d = ah_backoff_decide(&p, &e, 1, 0, 0, ah_seeded_rng_get(r), NULL);
    assert_false(d.retry);
    assert_int_equal(d.reason, AH_GIVEUP_RETRY_AFTER_TOO_LONG);
    /* Retry-After: 0 means "now": wait 0... or the jittered wait if larger. */
    e.retry_after_ms = 0;
    d = ah_backoff_decide(&p, &e, 1, 0, 0, ah_seeded_rng_get(r), NULL);
    assert_true(d.retry);
    assert_int_equal(d.wait_ms, d.jittered_ms);
    ah_seeded_rng_free(r);
}

static void deadline_ends_the_call_instead_of_sleeping_past_it(void **state)
{
    (void)state;
    ah_policy p = policy_with(AH_JITTER_NONE, 10);
    p.deadline_ms = 10000;
    /* A hint beyond the remaining deadline: the server's wait does not fit. */
    ah_error e = http(503, 5000);
    ah_decision d = ah_backoff_decide(&p, &e, 1, 8000, 0, NULL, NULL);
    assert_false(d.retry);
    assert_int_equal(d.reason, AH_GIVEUP_RETRY_AFTER_TOO_LONG);
    assert_int_equal(d.wait_ms, 5000);
    assert_int_equal(d.wait_source, AH_WAIT_SERVER);
    /* The same hint with time left is fine. */
    d = ah_backoff_decide(&p, &e, 1, 4000, 0, NULL, NULL);
    assert_true(d.retry);
    /* Our own backoff does not fit: DEADLINE. */
    ah_error plain = http(503, -1);
    d = ah_backoff_decide(&p, &plain, 4, 6000, 0, NULL, NULL); /* 4000 ms backoff */
    assert_false(d.retry);
    assert_int_equal(d.reason, AH_GIVEUP_DEADLINE);
    assert_int_equal(d.wait_ms, 4000);
    d = ah_backoff_decide(&p, &plain, 4, 5999, 0, NULL, NULL);
    assert_true(d.retry);
    /* Ending exactly at the deadline leaves no time for the attempt. */
    d = ah_backoff_decide(&p, &plain, 4, 6000 - 0, 0, NULL, NULL);
    assert_false(d.retry);
    /* Already past it: even a "retry now" hint is the deadline's case, not the
     * server's. */
    ah_error zero = http(503, 0);
    p.base_ms = 0;
    p.cap_ms = 0;
    d = ah_backoff_decide(&p, &zero, 1, 10000, 0, NULL, NULL);
    assert_false(d.retry);
    assert_int_equal(d.reason, AH_GIVEUP_DEADLINE);
    d = ah_backoff_decide(&p, &zero, 1, 12000, 0, NULL, NULL);
    assert_int_equal(d.reason, AH_GIVEUP_DEADLINE);
    /* A small hint under a big backoff that does not fit is our wait's fault. */
    p.base_ms = 500;
    p.cap_ms = 30000;
    e.retry_after_ms = 100;
    d = ah_backoff_decide(&p, &e, 5, 3000, 0, NULL, NULL); /* 8000 ms backoff */
    assert_false(d.retry);
    assert_int_equal(d.reason, AH_GIVEUP_DEADLINE);
    /* No deadline: nothing is too late. */
    p.deadline_ms = 0;
    d = ah_backoff_decide(&p, &plain, 4, INT64_MAX, 0, NULL, NULL);
    assert_true(d.retry);
}

/* ---- simulated retry loops on the manual clock ------------------------------------- */

typedef struct sim {
    ah_manual_clock *clock;
    const ah_error *script; /* outcome of attempt i; kind NONE = success */
    int nscript;
    int attempts;
} sim;

/* One attempt: takes 50 ms of virtual time and returns the scripted outcome. */
static const ah_error *sim_attempt(sim *s)
{
    const ah_error *e =
        &s->script[s->attempts < s->nscript ? s->attempts : s->nscript - 1];
    s->attempts++;
    ah_manual_clock_advance(s->clock, 50);
    return e;
}

/* The retry loop the call state machine runs, with the wait as a clock advance. Returns
 * the last decision (retry == 1 means the call succeeded). */
static ah_decision sim_run(sim *s, const ah_policy *p, const ah_rng *rng,
                           ah_retry_budget *budget, int64_t *total_wait)
{
    const ah_clock *c = ah_manual_clock_get(s->clock);
    int64_t start = c->now_ms(c->ud), prev = 0;
    *total_wait = 0;
    for (;;) {
        const ah_error *e = sim_attempt(s);
        if (e->kind == AH_EK_NONE) {
            ah_retry_budget_on_success(budget);
            ah_decision ok = {1, 0, AH_WAIT_BACKOFF, AH_GIVEUP_COUNT_, 0, -1};
            return ok;
        }
        ah_decision d = ah_backoff_decide(p, e, s->attempts, c->now_ms(c->ud) - start,
                                          prev, rng, budget);
        if (!d.retry)
            return d;
        ah_manual_clock_advance(s->clock, d.wait_ms);
        *total_wait += d.wait_ms;
        prev = d.wait_ms;
    }
}

static void a_503_with_retry_after_5s_waits_5s_of_virtual_time(void **state)
{
    (void)state;
    ah_manual_clock *mc = ah_manual_clock_new(0, 1700000000000LL);
    ah_seeded_rng *r = ah_seeded_rng_new(2);
    ah_error script[2];
    script[0] = http(503, 5000);
    script[1] = make_err(AH_EK_NONE, 0, -1);
    sim s = {mc, script, 2, 0};
    ah_policy p;
    ah_policy_init(&p);
    int64_t waited;
    ah_decision d = sim_run(&s, &p, ah_seeded_rng_get(r), NULL, &waited);
    assert_true(d.retry);
    assert_int_equal(s.attempts, 2);
    assert_int_equal(waited, 5000);
    const ah_clock *c = ah_manual_clock_get(mc);
    assert_true(c->now_ms(c->ud) >= 5000);
    assert_int_equal(c->now_ms(c->ud), 5000 + 2 * 50);
    ah_seeded_rng_free(r);
    ah_manual_clock_free(mc);
}

static void max_attempts_counts_every_attempt(void **state)
{
    (void)state;
    for (int max = 1; max <= 6; max++) {
        ah_manual_clock *mc = ah_manual_clock_new(0, 0);
        ah_seeded_rng *r = ah_seeded_rng_new((uint64_t)max);
        ah_error fail = http(503, -1);
        sim s = {mc, &fail, 1, 0};
        ah_policy p = policy_with(AH_JITTER_FULL, max);
        int64_t waited;
        ah_decision d = sim_run(&s, &p, ah_seeded_rng_get(r), NULL, &waited);
        assert_false(d.retry);
        assert_int_equal(d.reason, AH_GIVEUP_ATTEMPTS);
        assert_int_equal(s.attempts, max); /* 3 = the first try plus two retries */
        ah_seeded_rng_free(r);
        ah_manual_clock_free(mc);
    }
    /* Success on the last allowed attempt is a success. */
    ah_manual_clock *mc = ah_manual_clock_new(0, 0);
    ah_error script[3];
    script[0] = http(503, -1);
    script[1] = make_err(AH_EK_CONNECT, 0, -1);
    script[2] = make_err(AH_EK_NONE, 0, -1);
    sim s = {mc, script, 3, 0};
    ah_policy p = policy_with(AH_JITTER_NONE, 3);
    int64_t waited;
    assert_true(sim_run(&s, &p, NULL, NULL, &waited).retry);
    assert_int_equal(s.attempts, 3);
    assert_int_equal(waited, 500 + 1000);
    ah_manual_clock_free(mc);
}

static void a_long_outage_stops_at_the_deadline_on_virtual_time(void **state)
{
    (void)state;
    ah_manual_clock *mc = ah_manual_clock_new(100000, 0);
    ah_seeded_rng *r = ah_seeded_rng_new(9);
    ah_error fail = http(529, -1);
    sim s = {mc, &fail, 1, 0};
    ah_policy p = policy_with(AH_JITTER_FULL, 1000);
    p.deadline_ms = 120000;
    int64_t waited;
    ah_decision d = sim_run(&s, &p, ah_seeded_rng_get(r), NULL, &waited);
    assert_false(d.retry);
    assert_int_equal(d.reason, AH_GIVEUP_DEADLINE);
    const ah_clock *c = ah_manual_clock_get(mc);
    /* It never slept past the deadline. */
    assert_true(c->now_ms(c->ud) - 100000 < 120000);
    assert_true(s.attempts > 3);
    ah_seeded_rng_free(r);
    ah_manual_clock_free(mc);
}

/* ---- the retry predicate ----------------------------------------------------------- */

typedef struct hook_state {
    int answer;
    int calls;
    int last_default;
    const ah_error *last_err;
} hook_state;

static int hook(void *ud, const ah_error *err, int default_verdict)
{
    hook_state *h = ud;
    h->calls++;
    h->last_default = default_verdict;
    h->last_err = err;
    return h->answer;
}

static void retry_on_overrides_both_ways_and_minus_one_keeps_default(void **state)
{
    (void)state;
    ah_policy p = policy_with(AH_JITTER_NONE, 4);
    hook_state h = {1, 0, -9, NULL};
    p.retry_on = hook;
    p.retry_on_ud = &h;
    ah_error bad_request = http(400, -1), unavailable = http(503, -1);

    /* 1: retry what the table would not. */
    ah_decision d = ah_backoff_decide(&p, &bad_request, 1, 0, 0, NULL, NULL);
    assert_true(d.retry);
    assert_int_equal(h.calls, 1);
    assert_int_equal(h.last_default, 0);
    assert_ptr_equal(h.last_err, &bad_request);
    /* ... but max_attempts still holds. */
    d = ah_backoff_decide(&p, &bad_request, 4, 0, 0, NULL, NULL);
    assert_false(d.retry);
    assert_int_equal(d.reason, AH_GIVEUP_ATTEMPTS);

    /* 0: refuse what the table would retry. */
    h.answer = 0;
    d = ah_backoff_decide(&p, &unavailable, 1, 0, 0, NULL, NULL);
    assert_false(d.retry);
    assert_int_equal(d.reason, AH_GIVEUP_NOT_RETRYABLE);
    assert_int_equal(h.last_default, 1);

    /* -1 (the predicate failed): the default decides, either way. */
    h.answer = -1;
    assert_true(ah_backoff_decide(&p, &unavailable, 1, 0, 0, NULL, NULL).retry);
    assert_false(ah_backoff_decide(&p, &bad_request, 1, 0, 0, NULL, NULL).retry);
    /* Any other value is treated as a failure too. */
    h.answer = 7;
    assert_true(ah_backoff_decide(&p, &unavailable, 1, 0, 0, NULL, NULL).retry);
    assert_false(ah_backoff_decide(&p, &bad_request, 1, 0, 0, NULL, NULL).retry);

    /* Cancellation beats the predicate: it is not even asked. */
    h.answer = 1;
    int before = h.calls;
    ah_error cancelled = make_err(AH_EK_CANCELLED, 0, -1);
    d = ah_backoff_decide(&p, &cancelled, 1, 0, 0, NULL, NULL);
    assert_false(d.retry);
    assert_int_equal(d.reason, AH_GIVEUP_NOT_RETRYABLE);
    assert_int_equal(h.calls, before);
}

static void checks_run_in_the_documented_order(void **state)
{
    (void)state;
    ah_policy p = policy_with(AH_JITTER_NONE, 3);
    p.deadline_ms = 1000;
    ah_retry_budget *b = NULL;
    ah_retry_budget_new(2, 0.1, &b, NULL, 0); /* spend -> 1 <= 1: throttled */
    /* Not retryable beats attempts, hint, deadline and budget. */
    ah_error e = http(400, 999999);
    ah_decision d = ah_backoff_decide(&p, &e, 99, 99999, 0, NULL, b);
    assert_int_equal(d.reason, AH_GIVEUP_NOT_RETRYABLE);
    assert_int_equal(d.wait_ms, 0);
    assert_int_equal(d.jittered_ms, 0);
    /* Attempts beat a too-long hint. */
    e = http(503, 999999);
    d = ah_backoff_decide(&p, &e, 3, 99999, 0, NULL, b);
    assert_int_equal(d.reason, AH_GIVEUP_ATTEMPTS);
    /* A too-long hint beats the deadline. */
    d = ah_backoff_decide(&p, &e, 1, 99999, 0, NULL, b);
    assert_int_equal(d.reason, AH_GIVEUP_RETRY_AFTER_TOO_LONG);
    /* The deadline beats the budget, and none of the above spent a token. */
    e = http(503, -1);
    d = ah_backoff_decide(&p, &e, 1, 900, 0, NULL, b);
    assert_int_equal(d.reason, AH_GIVEUP_DEADLINE);
    assert_true(ah_retry_budget_tokens(b) == 2.0);
    /* Finally the budget. */
    d = ah_backoff_decide(&p, &e, 1, 0, 0, NULL, b);
    assert_false(d.retry);
    assert_int_equal(d.reason, AH_GIVEUP_RETRY_BUDGET);
    assert_int_equal(d.wait_ms, 500);
    /* NULL arguments give up cleanly. */
    assert_int_equal(ah_backoff_decide(NULL, &e, 1, 0, 0, NULL, NULL).reason,
                     AH_GIVEUP_NOT_RETRYABLE);
    assert_int_equal(ah_backoff_decide(&p, NULL, 1, 0, 0, NULL, NULL).reason,
                     AH_GIVEUP_NOT_RETRYABLE);
    ah_retry_budget_free(b);
}

/* ---- the shared retry budget ------------------------------------------------------- */

static void budget_throttles_after_failures_and_recovers_after_successes(void **state)
{
    (void)state;
    ah_retry_budget *b = NULL;
    ah_retry_budget_new(10, 0.1, &b, NULL, 0);
    assert_non_null(b);
    assert_true(ah_retry_budget_tokens(b) == 10.0);
    /* Tokens 9, 8, 7, 6 stay above 10/2; the fifth retry brings it to 5: throttled. */
    for (int i = 0; i < 4; i++)
        assert_true(ah_retry_budget_try_spend(b));
    assert_false(ah_retry_budget_try_spend(b));
    assert_true(ah_retry_budget_tokens(b) == 5.0);
    /* While failures continue the budget stays shut and bottoms out at 0. */
    for (int i = 0; i < 20; i++)
        assert_false(ah_retry_budget_try_spend(b));
    assert_true(ah_retry_budget_tokens(b) == 0.0);
    /* 61 successes refund 6.1 exactly (milli-tokens do not drift); the next retry
     * leaves 5.1 > 5 and goes ahead, the one after does not. */
    for (int i = 0; i < 60; i++)
        ah_retry_budget_on_success(b);
    assert_false(ah_retry_budget_try_spend(b)); /* 6.0 -> 5.0 */
    for (int i = 0; i < 11; i++)
        ah_retry_budget_on_success(b);
    assert_true(ah_retry_budget_tokens(b) > 6.0999 && ah_retry_budget_tokens(b) < 6.1001);
    assert_true(ah_retry_budget_try_spend(b));
    assert_false(ah_retry_budget_try_spend(b));
    /* Refunds stop at max_tokens. */
    for (int i = 0; i < 1000; i++)
        ah_retry_budget_on_success(b);
    assert_true(ah_retry_budget_tokens(b) == 10.0);
    ah_retry_budget_free(b);
    ah_retry_budget_free(NULL);
    assert_true(ah_retry_budget_try_spend(NULL)); /* no budget: never throttles */
}

static void budget_shared_by_loops_throttles_an_outage(void **state)
{
    (void)state;
    /* Ten calls in a row against a dead provider, max_attempts 4: without a budget that
     * is 40 attempts; with max_tokens 10 only the first retries get through. */
    ah_retry_budget *b = NULL;
    ah_retry_budget_new(10, 0.1, &b, NULL, 0);
    ah_manual_clock *mc = ah_manual_clock_new(0, 0);
    ah_seeded_rng *r = ah_seeded_rng_new(4);
    ah_error fail = http(503, -1);
    ah_policy p = policy_with(AH_JITTER_FULL, 4);
    int total = 0, throttled = 0;
    for (int call = 0; call < 10; call++) {
        sim s = {mc, &fail, 1, 0};
        int64_t waited;
        ah_decision d = sim_run(&s, &p, ah_seeded_rng_get(r), b, &waited);
        total += s.attempts;
        throttled += d.reason == AH_GIVEUP_RETRY_BUDGET;
    }
    assert_int_equal(total, 10 + 4); /* one try each plus the four retries allowed */
    assert_int_equal(throttled, 9);
    /* Recovery: successes refill it and a later call retries again. */
    for (int i = 0; i < 100; i++)
        ah_retry_budget_on_success(b);
    ah_error script[2];
    script[0] = http(503, -1);
    script[1] = make_err(AH_EK_NONE, 0, -1);
    sim s = {mc, script, 2, 0};
    int64_t waited;
    assert_true(sim_run(&s, &p, ah_seeded_rng_get(r), b, &waited).retry);
    assert_int_equal(s.attempts, 2);
    ah_seeded_rng_free(r);
    ah_manual_clock_free(mc);
    ah_retry_budget_free(b);
}

static void budget_parameters_are_checked(void **state)
{
    (void)state;
    char err[128];
    assert_int_equal(ah_retry_budget_check(10, 0.1, err, sizeof err), AH_OK);
    assert_int_equal(ah_retry_budget_check(0, 0.1, err, sizeof err), AH_ERR_INVALID);
    assert_non_null(strstr(err, "retry_budget.max_tokens"));
    assert_int_equal(ah_retry_budget_check(-1, 0.1, err, sizeof err), AH_ERR_INVALID);
    assert_int_equal(ah_retry_budget_check(NAN, 0.1, err, sizeof err), AH_ERR_INVALID);
    assert_int_equal(ah_retry_budget_check(10, 0, err, sizeof err), AH_ERR_INVALID);
    assert_non_null(strstr(err, "retry_budget.token_ratio"));
    assert_int_equal(ah_retry_budget_check(10, 0.0001, err, sizeof err), AH_ERR_INVALID);
    assert_int_equal(ah_retry_budget_check(10, 11, err, sizeof err), AH_ERR_INVALID);
    assert_int_equal(ah_retry_budget_new(0, 0.1, &(ah_retry_budget *){NULL}, NULL, 0),
                     AH_ERR_INVALID);
    assert_int_equal(ah_retry_budget_new(10, -1, &(ah_retry_budget *){NULL}, NULL, 0),
                     AH_ERR_INVALID);
}

typedef struct spender {
    ah_retry_budget *b;
    int n;
} spender;

static void *spend_and_refund(void *arg)
{
    spender *s = arg;
    for (int i = 0; i < s->n; i++) {
        ah_retry_budget_try_spend(s->b);
        ah_retry_budget_try_spend(s->b);
        ah_retry_budget_on_success(s->b);
    }
    return NULL;
}

static void budget_is_consistent_under_concurrent_runs(void **state)
{
    (void)state;
    /* Far from both bounds, so each spend takes exactly 1 and each refund adds 0.5:
     * any lost update would show in the final count. */
    ah_retry_budget *b = NULL;
    ah_retry_budget_new(1000000, 0.5, &b, NULL, 0);
    enum { THREADS = 4, N = 100000 };
    pthread_t t[THREADS];
    spender s = {b, N};
    for (int i = 0; i < THREADS; i++)
        assert_int_equal(pthread_create(&t[i], NULL, spend_and_refund, &s), 0);
    for (int i = 0; i < THREADS; i++)
        pthread_join(t[i], NULL);
    assert_true(ah_retry_budget_tokens(b) == 1000000.0 - THREADS * N * 1.5);
    ah_retry_budget_free(b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(defaults_match_the_spec),
        cmocka_unit_test(invalid_policy_is_rejected_naming_the_field),
        cmocka_unit_test(setters_set_every_field_by_name),
        cmocka_unit_test(setters_reject_unknown_fields_types_and_values),
        cmocka_unit_test(is_field_knows_exactly_the_spec_fields),
        cmocka_unit_test(full_jitter_stays_in_bounds_and_covers_the_range),
        cmocka_unit_test(none_jitter_is_the_capped_exponential_even_for_huge_n),
        cmocka_unit_test(equal_jitter_is_exp_times_0_8_to_1_2),
        cmocka_unit_test(decorrelated_jitter_follows_the_previous_wait),
        cmocka_unit_test(retry_after_is_a_floor_applied_after_jitter),
        cmocka_unit_test(retry_after_ignore_uses_backoff_alone),
        cmocka_unit_test(hint_beyond_max_retry_after_gives_up_at_once),
        cmocka_unit_test(deadline_ends_the_call_instead_of_sleeping_past_it),
        cmocka_unit_test(a_503_with_retry_after_5s_waits_5s_of_virtual_time),
        cmocka_unit_test(max_attempts_counts_every_attempt),
        cmocka_unit_test(a_long_outage_stops_at_the_deadline_on_virtual_time),
        cmocka_unit_test(retry_on_overrides_both_ways_and_minus_one_keeps_default),
        cmocka_unit_test(checks_run_in_the_documented_order),
        cmocka_unit_test(budget_throttles_after_failures_and_recovers_after_successes),
        cmocka_unit_test(budget_shared_by_loops_throttles_an_outage),
        cmocka_unit_test(budget_parameters_are_checked),
        cmocka_unit_test(budget_is_consistent_under_concurrent_runs),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
