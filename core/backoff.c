/* backoff.c - the backoff decision (pure) and the shared retry budget.
 *
 * ah_backoff_decide() reads no clock and never sleeps: time comes in as elapsed_ms and
 * randomness through the injected RNG, so the call state machine turns its answer into a
 * timer and tests run whole schedules on virtual time.
 * Invariants: every wait is in [0, INT64_MAX] with no signed overflow for any attempt
 * number or policy value; the jittered backoff is computed before the server hint is
 * applied, so jitter can never shorten what the server asked for; the budget is the last
 * check, so a token is spent only on a retry that will really happen.
 */
#include "internal.h"
#include "redis_internal.h"

#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

/* ---- the shared retry budget ------------------------------------------------------- */

/* Counts in thousandths of a token, like gRPC's milli-tokens: integer arithmetic keeps
 * "ten refunds of 0.1 make one token" exact. */
struct ah_retry_budget {
    pthread_mutex_t mu;
    int64_t max_milli;
    int64_t ratio_milli;
    int64_t milli; /* guarded by mu; always in [0, max_milli] */
    ah__budget_shared *shared; /* the Redis side (redis_budget.c), or NULL */
};

void ah__retry_budget_attach(ah_retry_budget *b, ah__budget_shared *s)
{
    b->shared = s;
}

ah__budget_shared *ah__retry_budget_shared(const ah_retry_budget *b)
{
    return b ? b->shared : NULL;
}

enum { MILLI = 1000 };
#define BUDGET_MAX_TOKENS 1000000.0

ah_status ah_retry_budget_check(double max_tokens, double token_ratio, char *err,
                                size_t errsize)
{
    /* The negated comparisons also reject NaN. */
    if (!(max_tokens > 0 && max_tokens <= BUDGET_MAX_TOKENS)) {
        if (err && errsize > 0)
            snprintf(err, errsize,
                     "retry_budget.max_tokens must be > 0 and <= 1000000 (got %g)",
                     max_tokens);
        return AH_ERR_INVALID;
    }
    if (!(token_ratio >= 0.001 && token_ratio <= max_tokens)) {
        if (err && errsize > 0)
            snprintf(
                err, errsize,
                "retry_budget.token_ratio must be >= 0.001 and <= max_tokens (got %g)",
                token_ratio);
        return AH_ERR_INVALID;
    }
    return AH_OK;
}

ah_status ah_retry_budget_new(double max_tokens, double token_ratio, ah_retry_budget **out,
                              char *err, size_t errsize)
{
    if (!out) {
        ah__bufprintf(err, errsize, "ah_retry_budget_new: out is NULL");
        return AH_ERR_INVALID;
    }
    *out = NULL;
    ah_status st = ah_retry_budget_check(max_tokens, token_ratio, err, errsize);
    if (st != AH_OK)
        return st;
    ah_retry_budget *b = calloc(1, sizeof *b);
    if (!b || pthread_mutex_init(&b->mu, NULL) != 0) {
        free(b);
        ah__bufprintf(err, errsize, "retry_budget: out of memory");
        return AH_ERR_NOMEM;
    }
    b->max_milli = llround(max_tokens * MILLI);
    b->ratio_milli = llround(token_ratio * MILLI);
    b->milli = b->max_milli;
    *out = b;
    return AH_OK;
}

void ah_retry_budget_free(ah_retry_budget *b)
{
    if (!b)
        return;
    ah__budget_shared_free(b->shared);
    pthread_mutex_destroy(&b->mu);
    free(b);
}

int ah_retry_budget_try_spend(ah_retry_budget *b)
{
    if (!b)
        return 1;
    pthread_mutex_lock(&b->mu);
    b->milli = b->milli > MILLI ? b->milli - MILLI : 0;
    /* A6: retries stop once the count is <= max_tokens / 2; doubled to stay exact. */
    int ok = 2 * b->milli > b->max_milli;
    pthread_mutex_unlock(&b->mu);
    return ok;
}

void ah_retry_budget_on_success(ah_retry_budget *b)
{
    if (!b)
        return;
    if (b->shared && ah__budget_shared_refund(b->shared))
        return;
    pthread_mutex_lock(&b->mu);
    b->milli += b->ratio_milli;
    if (b->milli > b->max_milli)
        b->milli = b->max_milli;
    pthread_mutex_unlock(&b->mu);
}

double ah_retry_budget_tokens(ah_retry_budget *b)
{
    if (!b)
        return 0.0;
    pthread_mutex_lock(&b->mu);
    int64_t m = b->milli;
    pthread_mutex_unlock(&b->mu);
    return (double)m / MILLI;
}

/* ---- the jittered backoff ---------------------------------------------------------- */

/* min(cap, base * 2^(n-1)) without overflow for any n: base * 2^k > cap exactly when
 * base > cap >> k, so the shift is only done when the result fits under cap. */
static int64_t exp_backoff(const ah_policy *p, int n)
{
    int64_t base = p->base_ms > 0 ? p->base_ms : 0;
    int64_t cap = p->cap_ms > 0 ? p->cap_ms : 0;
    int k = n > 1 ? n - 1 : 0;
    if (base == 0)
        return 0;
    if (k >= 63 || base > (cap >> k))
        return cap;
    return base << k;
}

static int64_t jittered_backoff(const ah_policy *p, int n, int64_t prev_wait_ms,
                                const ah_rng *rng)
{
    int64_t e = exp_backoff(p, n);
    if (!rng)
        return e; /* no randomness supplied: the deterministic upper bound */
    switch (p->jitter) {
    case AH_JITTER_FULL:
        return ah_rng_uniform(rng, e);
    case AH_JITTER_EQUAL: {
        double w = (double)e * (0.8 + 0.4 * ah_rng_unit(rng));
        /* 2^63 as a double; anything at or above it does not fit an int64_t. */
        return w >= 9223372036854775808.0 ? INT64_MAX : (int64_t)llround(w);
    }
    case AH_JITTER_DECORRELATED: {
        int64_t base = p->base_ms > 0 ? p->base_ms : 0;
        int64_t prev = prev_wait_ms > 0 ? prev_wait_ms : 0;
        int64_t hi = prev > INT64_MAX / 3 ? INT64_MAX : prev * 3;
        if (hi < base)
            hi = base;
        int64_t w = base + ah_rng_uniform(rng, hi - base);
        return w < p->cap_ms ? w : p->cap_ms;
    }
    case AH_JITTER_NONE:
    default:
        return e;
    }
}

/* ---- the decision ------------------------------------------------------------------ */

static ah_decision give_up(ah_decision d, ah_giveup_reason reason)
{
    d.retry = 0;
    d.reason = reason;
    return d;
}

ah_decision ah_backoff_decide(const ah_policy *p, const ah_error *err, int failed_attempt,
                              int64_t elapsed_ms, int64_t prev_wait_ms, const ah_rng *rng,
                              ah_retry_budget *budget)
{
    ah_decision d = {0, 0, AH_WAIT_BACKOFF, AH_GIVEUP_COUNT_, 0, -1};
    if (!p || !err)
        return give_up(d, AH_GIVEUP_NOT_RETRYABLE);
    d.hint_ms = err->retry_after_ms >= 0 ? err->retry_after_ms : -1;

    /* 1. Retryable? The default table first, then the user's predicate, which sees the
     * default and may keep it by failing (-1). Cancellation is never offered to it. */
    int verdict = ah_error_is_retryable(err) ? 1 : 0;
    if (p->retry_on && err->kind != AH_EK_CANCELLED) {
        int v = p->retry_on(p->retry_on_ud, err, verdict);
        if (v == 0 || v == 1)
            verdict = v;
    }
    if (!verdict)
        return give_up(d, AH_GIVEUP_NOT_RETRYABLE);

    /* 2. max_attempts counts every attempt, so after attempt n fails one more is allowed
     * only while n < max_attempts. */
    if (failed_attempt >= p->max_attempts)
        return give_up(d, AH_GIVEUP_ATTEMPTS);

    /* 3. Jitter first ... */
    d.jittered_ms = jittered_backoff(p, failed_attempt, prev_wait_ms, rng);
    d.wait_ms = d.jittered_ms;

    /* 4. ... then the server's hint as a floor, so jitter never undercuts it. */
    if (p->retry_after == AH_RETRY_AFTER_FLOOR && d.hint_ms >= 0) {
        if (d.hint_ms >= d.jittered_ms) {
            d.wait_ms = d.hint_ms;
            d.wait_source = AH_WAIT_SERVER;
        }
        if (d.hint_ms > p->max_retry_after_ms)
            return give_up(d, AH_GIVEUP_RETRY_AFTER_TOO_LONG);
    }

    /* 5. The deadline covers attempts and waits together. Sleeping into (or up to) it
     * would only start an attempt with no time left, so give up now. The server is
     * blamed only when its hint is what does not fit: our own backoff alone would have
     * fitted. */
    if (p->deadline_ms > 0) {
        int64_t elapsed = elapsed_ms > 0 ? elapsed_ms : 0;
        int64_t left = elapsed < p->deadline_ms ? p->deadline_ms - elapsed : 0;
        if (d.wait_ms >= left)
            return give_up(d, d.jittered_ms < left ? AH_GIVEUP_RETRY_AFTER_TOO_LONG
                                                   : AH_GIVEUP_DEADLINE);
    }

    /* 6. The process-wide budget last: only a retry that will happen spends a token. */
    if (budget && !ah_retry_budget_try_spend(budget))
        return give_up(d, AH_GIVEUP_RETRY_BUDGET);

    d.retry = 1;
    return d;
}
