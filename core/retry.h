/* retry.h - the one retry machine, shared by an LLM call (call.c) and a tool call
 * (tool_call.c). Internal: never installed.
 *
 * What it owns: the attempt count of the current phase, the time the operation began
 * (for the deadline), the previous wait (for decorrelated jitter), and the decision that
 * follows a failed attempt, in one fixed order:
 *
 *   verdict   1. cancelled: never retried, never offered to retry_on (cancellation first)
 *             2. the default verdict of the owner's class (an LLM request: the transport
 *                and HTTP table, ah_error_is_retryable; a tool body: `transient`, and
 *                `outcome_unknown` / `stream` where the tool says it may repeat / resume),
 *                then policy->retry_on, which may override it (-1 keeps the default)
 *             3. a tool's `budget` error: never retried, whatever retry_on said
 *             4. the attempt count: failed_attempt >= max_attempts gives up
 *   schedule  5. the jittered backoff (full jitter by default), on the injected RNG
 *             6. the server's Retry-After as a floor (never shortened by jitter); a hint
 *                past max_retry_after_ms gives up at once
 *             7. the deadline: a wait that does not end before it gives up now
 *             8. the retry-budget token, last, so only a retry that happens spends one
 *                (a budget kept in Redis answers asynchronously: the LLM call decides
 *                with NULL here and asks it after, in WAIT)
 *
 * A broken stream (an LLM call whose open stream failed and whose consumer asks for the
 * failure to be decided as an attempt: the provider's own error, or nothing of it kept)
 * has a verdict of its own, ah__retry_break_verdict: steps 1 and 4 only. A break always
 * went on (continued or asked again), so it is retryable by default and retry_on, which
 * is about errors before a stream, is not asked; what it gets from the machine is the
 * attempt bound and the schedule: backoff, the hint, the deadline and a budget token.
 *
 * Callers may run something of their own between verdict and schedule (a tool call
 * checks its call budget there, an LLM call its continuation cap). The WAIT that follows is always a loop timer armed by
 * the owner (ah__retry_wait returns its length): nothing here sleeps, reads a clock or
 * allocates, so a whole schedule runs on virtual time (tests/unit/test_retry.c).
 */
#ifndef AH_RETRY_H
#define AH_RETRY_H

#include "agenthost/clock.h"
#include "agenthost/error.h"
#include "agenthost/policy.h"

#include <stdint.h>

typedef enum ah__retry_class {
    AH__RETRY_LLM, /* default verdict: ah_error_is_retryable */
    AH__RETRY_TOOL /* default verdict: `transient` only; `budget` never retried */
} ah__retry_class;

typedef struct ah__retry {
    const ah_policy *policy; /* borrowed from the owner; must stay valid */
    ah__retry_class cls;
    int attempts;     /* attempts made in the current phase (what max_attempts bounds) */
    int64_t start_ms; /* when the operation began, on the owner's monotonic clock */
    int64_t prev_wait_ms; /* the wait before the latest retry (0 before the first) */
    /* AH__RETRY_TOOL only: an `outcome_unknown` error is retried (the body is safe to
     * repeat); a `stream` error is retried (resumed) */
    int repeat_unknown, resumes;
} ah__retry;

/* Attach a policy (borrowed) and a class; attempts 0, start 0, no previous wait. */
void ah__retry_init(ah__retry *r, const ah_policy *policy, ah__retry_class cls);
/* The operation begins now: elapsed time is counted from here. */
void ah__retry_start(ah__retry *r, int64_t now_ms);
/* A new phase of the same operation (an LLM call's re-attach): attempts and the
 * previous wait start again; the operation's clock does not. */
void ah__retry_new_phase(ah__retry *r);
/* An attempt starts: returns its 1-based number in the phase. */
int ah__retry_attempt(ah__retry *r);
int64_t ah__retry_elapsed(const ah__retry *r, int64_t now_ms);

/* Steps 1-4 after attempt r->attempts failed with err: retry = 1 when it may be retried
 * (wait not yet computed), else retry = 0 with the reason. */
ah_decision ah__retry_verdict(const ah__retry *r, const ah_error *err);
/* Steps 1 and 4 for a broken stream (above): cancelled gives up, attempt r->attempts
 * failing at max_attempts gives up (ATTEMPTS), anything else may be retried. */
ah_decision ah__retry_break_verdict(const ah__retry *r, const ah_error *err);
/* Steps 5-8 for a verdict that said retry (a refusal is returned unchanged). rng NULL:
 * no draws, every jitter mode waits the unjittered exp(n). budget NULL: no token. */
ah_decision ah__retry_schedule(const ah__retry *r, ah_decision d, const ah_error *err,
                               int64_t now_ms, const ah_rng *rng,
                               ah_retry_budget *budget);
/* Both, in order. */
ah_decision ah__retry_decide(const ah__retry *r, const ah_error *err, int64_t now_ms,
                             const ah_rng *rng, ah_retry_budget *budget);
/* The owner enters WAIT for a decision that said retry: remembers the wait (the next
 * decorrelated draw depends on it) and returns the ms to arm its loop timer with. */
int64_t ah__retry_wait(ah__retry *r, const ah_decision *d);

#endif
