/* retry_budget.c - the shared retry budget: a token bucket in the style of gRPC retry
 * throttling (proposal A6), thread-safe, optionally backed by Redis (redis_budget.c).
 * The retry machine (retry.c) spends its tokens, last, only for a retry that will happen.
 * Invariant: the count stays in [0, max_milli].
 */
#include "internal.h"
#include "redis_internal.h"

#include "agenthost/policy.h"

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
    int64_t milli;             /* guarded by mu; always in [0, max_milli] */
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
