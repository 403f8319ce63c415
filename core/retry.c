/* retry.c - the one retry machine (retry.h): what follows a failed attempt, for an LLM
 * request and for a tool body alike, and the public pure form of it, ah_backoff_decide().
 *
 * Nothing here reads a clock, sleeps or allocates: time comes in as now_ms (the owner's
 * loop clock), randomness through the injected RNG, and the owner turns a decision into
 * a loop timer, so whole schedules run on virtual time.
 * Invariants: every wait is in [0, INT64_MAX] with no signed overflow for any attempt
 * number or policy value; the jittered backoff is computed before the server hint is
 * applied, so jitter can never shorten what the server asked for; the retry-budget token
 * is the last check, so a token is spent only on a retry that will really happen.
 */
#include "retry.h"

#include "internal.h"

#include <math.h>

/* ---- the machine's bookkeeping ---------------------------------------------------- */

void ah__retry_init(ah__retry *r, const ah_policy *policy, ah__retry_class cls)
{
    r->policy = policy;
    r->cls = cls;
    r->attempts = 0;
    r->start_ms = 0;
    r->prev_wait_ms = 0;
    r->repeat_unknown = r->resumes = 0;
}

void ah__retry_start(ah__retry *r, int64_t now_ms)
{
    r->start_ms = now_ms;
}

void ah__retry_new_phase(ah__retry *r)
{
    r->attempts = 0;
    r->prev_wait_ms = 0;
}

int ah__retry_attempt(ah__retry *r)
{
    return ++r->attempts;
}

int64_t ah__retry_elapsed(const ah__retry *r, int64_t now_ms)
{
    return now_ms - r->start_ms;
}

int64_t ah__retry_wait(ah__retry *r, const ah_decision *d)
{
    r->prev_wait_ms = d->wait_ms;
    return d->wait_ms;
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

static int default_verdict(const ah__retry *r, const ah_error *err)
{
    if (r->cls != AH__RETRY_TOOL)
        return ah_error_is_retryable(err);
    return err->kind == AH_EK_TRANSIENT ||
           (err->kind == AH_EK_OUTCOME_UNKNOWN && r->repeat_unknown) ||
           (err->kind == AH_EK_STREAM && r->resumes);
}

ah_decision ah__retry_verdict(const ah__retry *r, const ah_error *err)
{
    ah_decision d = {0, 0, AH_WAIT_BACKOFF, AH_GIVEUP_COUNT_, 0, -1};
    const ah_policy *p = r ? r->policy : NULL;
    if (!p || !err)
        return give_up(d, AH_GIVEUP_NOT_RETRYABLE);
    d.hint_ms = err->retry_after_ms >= 0 ? err->retry_after_ms : -1;

    /* 1. Cancellation beats everything: not retried, not even offered to the hook. */
    if (err->kind == AH_EK_CANCELLED)
        return give_up(d, AH_GIVEUP_NOT_RETRYABLE);
    /* A spent spend limit, or a prompt longer than the context window, does not get
     * better by waiting: never retried, not even offered to the hook. */
    if (err->kind == AH_EK_SPEND_LIMIT)
        return give_up(d, AH_GIVEUP_SPEND_LIMIT);
    if (err->kind == AH_EK_CONTEXT_EXCEEDED)
        return give_up(d, AH_GIVEUP_NOT_RETRYABLE);

    /* 2. The class's default, then the user's predicate, which sees the default and may
     * keep it by failing (-1). */
    int verdict = default_verdict(r, err);
    if (p->retry_on) {
        int v = p->retry_on(p->retry_on_ud, err, verdict);
        if (v == 0 || v == 1)
            verdict = v;
    }
    /* 3. A tool's spent budget stays spent whatever the hook said. */
    if (r->cls == AH__RETRY_TOOL && err->kind == AH_EK_BUDGET)
        verdict = 0;
    if (!verdict)
        return give_up(d, AH_GIVEUP_NOT_RETRYABLE);

    /* 4. max_attempts counts every attempt, so after attempt n fails one more is allowed
     * only while n < max_attempts. */
    if (r->attempts >= p->max_attempts)
        return give_up(d, AH_GIVEUP_ATTEMPTS);
    d.retry = 1;
    return d;
}

ah_decision ah__retry_break_verdict(const ah__retry *r, const ah_error *err)
{
    ah_decision d = {0, 0, AH_WAIT_BACKOFF, AH_GIVEUP_COUNT_, 0, -1};
    const ah_policy *p = r ? r->policy : NULL;
    if (!p || !err || err->kind == AH_EK_CANCELLED)
        return give_up(d, AH_GIVEUP_NOT_RETRYABLE);
    d.hint_ms = err->retry_after_ms >= 0 ? err->retry_after_ms : -1;
    if (r->attempts >= p->max_attempts)
        return give_up(d, AH_GIVEUP_ATTEMPTS);
    d.retry = 1;
    return d;
}

ah_decision ah__retry_schedule(const ah__retry *r, ah_decision d, const ah_error *err,
                               int64_t now_ms, const ah_rng *rng, ah_retry_budget *budget)
{
    if (!d.retry)
        return d;
    const ah_policy *p = r->policy;
    (void)err; /* its hint is already in d.hint_ms */

    /* 5. Jitter first ... */
    d.jittered_ms = jittered_backoff(p, r->attempts, r->prev_wait_ms, rng);
    d.wait_ms = d.jittered_ms;

    /* 6. ... then the server's hint as a floor, so jitter never undercuts it. */
    if (p->retry_after == AH_RETRY_AFTER_FLOOR && d.hint_ms >= 0) {
        if (d.hint_ms >= d.jittered_ms) {
            d.wait_ms = d.hint_ms;
            d.wait_source = AH_WAIT_SERVER;
        }
        if (d.hint_ms > p->max_retry_after_ms)
            return give_up(d, AH_GIVEUP_RETRY_AFTER_TOO_LONG);
    }

    /* 7. The deadline covers attempts and waits together. Sleeping into (or up to) it
     * would only start an attempt with no time left, so give up now. The server is
     * blamed only when its hint is what does not fit: our own backoff alone would have
     * fitted. */
    if (p->deadline_ms > 0) {
        int64_t elapsed = ah__retry_elapsed(r, now_ms);
        if (elapsed < 0)
            elapsed = 0;
        int64_t left = elapsed < p->deadline_ms ? p->deadline_ms - elapsed : 0;
        if (d.wait_ms >= left)
            return give_up(d, d.jittered_ms < left ? AH_GIVEUP_RETRY_AFTER_TOO_LONG
                                                   : AH_GIVEUP_DEADLINE);
    }

    /* 8. The process-wide budget last: only a retry that will happen spends a token. */
    if (budget && !ah_retry_budget_try_spend(budget))
        return give_up(d, AH_GIVEUP_RETRY_BUDGET);

    d.retry = 1;
    return d;
}

ah_decision ah__retry_decide(const ah__retry *r, const ah_error *err, int64_t now_ms,
                             const ah_rng *rng, ah_retry_budget *budget)
{
    return ah__retry_schedule(r, ah__retry_verdict(r, err), err, now_ms, rng, budget);
}

/* The pure, public form: the machine in the state the arguments describe. */
ah_decision ah_backoff_decide(const ah_policy *p, const ah_error *err, int failed_attempt,
                              int64_t elapsed_ms, int64_t prev_wait_ms, const ah_rng *rng,
                              ah_retry_budget *budget)
{
    ah__retry r;
    ah__retry_init(&r, p, AH__RETRY_LLM);
    r.attempts = failed_attempt;
    r.prev_wait_ms = prev_wait_ms;
    return ah__retry_decide(&r, err, elapsed_ms, rng, budget);
}
