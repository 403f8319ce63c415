/* agenthost/policy.h - the retry policy, the backoff decision and the shared retry
 * budget (docs/retry-policy.md).
 *
 * A policy is plain data with public fields: fill it with ah_policy_init(), change fields
 * directly (C) or by name (bindings: ah_policy_set_int / _set_str), then check it once
 * with ah_policy_validate() before use. ah_backoff_decide() is a pure function of its
 * arguments (plus the draws it takes from the RNG and the token it may take from the
 * budget): it never sleeps, reads no clock and allocates nothing, so a whole retry
 * schedule can be tested on virtual time. docs/retry-policy.md has every formula.
 */
#ifndef AGENTHOST_POLICY_H
#define AGENTHOST_POLICY_H

#include "agenthost/export.h"

#include "agenthost/clock.h"
#include "agenthost/error.h"
#include "agenthost/event.h"
#include "agenthost/status.h"

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Jitter modes. X(NAME, "name"). n is the 1-based number of the failed attempt and
 * exp(n) = min(cap_ms, base_ms * 2^(n-1)):
 *   full          U(0, exp(n))                              (the default)
 *   equal         exp(n) * U(0.8, 1.2)      (may exceed cap_ms by up to 20%)
 *   decorrelated  min(cap_ms, U(base_ms, max(base_ms, 3 * prev_wait_ms)))
 *   none          exp(n)
 * U(a, b) is uniform over [a, b]; full and decorrelated draw whole milliseconds. */
#define AH_JITTER_MAP(X)                                                                 \
    X(FULL, "full") X(EQUAL, "equal") X(DECORRELATED, "decorrelated") X(NONE, "none")
typedef enum ah_jitter {
#define AH__JITTER_ENUM(name, s) AH_JITTER_##name,
    AH_JITTER_MAP(AH__JITTER_ENUM)
#undef AH__JITTER_ENUM
        AH_JITTER_COUNT_
} ah_jitter;

/* What to do with the server's retry hint (err->retry_after_ms). X(NAME, "name") */
#define AH_RETRY_AFTER_MAP(X) X(FLOOR, "floor") X(IGNORE, "ignore")
typedef enum ah_retry_after_mode {
#define AH__RA_ENUM(name, s) AH_RETRY_AFTER_##name,
    AH_RETRY_AFTER_MAP(AH__RA_ENUM)
#undef AH__RA_ENUM
        AH_RETRY_AFTER_COUNT_
} ah_retry_after_mode;

/* What a continuation keeps of the text block a cut left unfinished
 * (policy.continue_partial_text). X(NAME, "name"):
 *   false     nothing: only complete blocks are committed (the default)
 *   sentence  the block up to its last complete sentence (a '.', '!' or '?' followed by
 *             whitespace, a CJK 。！？, or a line end), committed as a closed text block
 *   line      the block up to its last line end
 * The kept prefix never ends in whitespace. Reasoning and tool calls are never kept
 * unfinished. */
#define AH_PARTIAL_TEXT_MAP(X) X(OFF, "false") X(SENTENCE, "sentence") X(LINE, "line")
typedef enum ah_partial_text {
#define AH__PT_ENUM(name, s) AH_PARTIAL_TEXT_##name,
    AH_PARTIAL_TEXT_MAP(AH__PT_ENUM)
#undef AH__PT_ENUM
        AH_PARTIAL_TEXT_COUNT_
} ah_partial_text;

/* The replaceable retry predicate. Called inside ah_backoff_decide() with the error and
 * the default verdict (1 retryable, 0 not, from ah_error_is_retryable). Returns 1 to
 * retry, 0 not to, or -1 when it failed (e.g. a Lua error, already logged by the caller):
 * the default verdict is then used. Any other value is treated like -1. `err` is borrowed
 * for the call. Never called for a cancelled error: cancellation beats every predicate.
 */
typedef int (*ah_retry_on_fn)(void *ud, const ah_error *err, int default_verdict);

/* Defaults, also restated in docs/retry-policy.md and scripts/policy.lua. */
enum {
    AH_POLICY_DEFAULT_MAX_ATTEMPTS = 4,
    AH_POLICY_DEFAULT_BASE_MS = 500,
    AH_POLICY_DEFAULT_CAP_MS = 30000,
    AH_POLICY_DEFAULT_MAX_RETRY_AFTER_MS = 60000,
    AH_POLICY_DEFAULT_MAX_CONTINUATIONS = 3,
    /* 5 minutes of silence: longer than any reasoning model's quiet stretch that a
     * provider keeps open (Codex CLI's stream_idle_timeout_ms is the same), so a real
     * answer is never cut, and a dead stream is still not waited for forever
     * (docs/retry-policy.md, "idle_timeout_ms") */
    AH_POLICY_DEFAULT_IDLE_TIMEOUT_MS = 300000
};
/* 32 MiB: the default cap on one response's content (max_response_bytes). */
#define AH_POLICY_DEFAULT_MAX_RESPONSE_BYTES ((int64_t)32 << 20)

/* All durations are milliseconds. Each field comment gives its range and default;
 * "0 = none" means that limit is off. */
typedef struct ah_policy {
    /* ALL attempts, the first included: 3 = one try plus two retries. >= 1; 4 */
    int max_attempts;
    /* Backoff base and cap: exp(n) = min(cap_ms, base_ms * 2^(n-1)). >= 0; 500, 30000;
     * cap_ms >= base_ms. */
    int64_t base_ms;
    int64_t cap_ms;
    ah_jitter jitter;                /* AH_JITTER_FULL */
    ah_retry_after_mode retry_after; /* AH_RETRY_AFTER_FLOOR */
    /* A server hint longer than this ends the call instead of sleeping. >= 0; 60000 */
    int64_t max_retry_after_ms;
    /* Per attempt, inside the retry loop: a hung attempt is aborted as a retryable
     * timeout. >= 0; 0 = none */
    int64_t attempt_timeout_ms;
    /* The whole call, attempts and waits together, outside the loop. >= 0; 0 = none */
    int64_t deadline_ms;
    /* A started stream silent this long is a stream error. >= 0; 300000 (5 min);
     * 0 = none */
    int64_t idle_timeout_ms;
    /* Continuations of cut streams per call. >= 0; 3 */
    int max_continuations;
    /* A response that stopped at max_tokens (length) is continued like a cut one, up to
     * this many times per call (they count against max_continuations too). >= 0; 0 =
     * the run completes with stop_reason "max_tokens" */
    int continue_on_max_tokens;
    /* One response's content (text, reasoning and tool-call arguments as decoded, or a
     * JSON body as received): past it the stream is stopped and the run fails with a
     * `budget` error, not continued. >= 0; 32 MiB; 0 = none */
    int64_t max_response_bytes;
    /* A cut inside a text block keeps its complete sentences or lines (see
     * AH_PARTIAL_TEXT_MAP) instead of asking for the whole block again. OFF */
    ah_partial_text continue_partial_text;
    /* The retry predicate (NULL = the default table alone) and its data (not owned). */
    ah_retry_on_fn retry_on;
    void *retry_on_ud;
} ah_policy;

/* Fill every field with its default. */
AH_EXPORT void ah_policy_init(ah_policy *p);

/* Check every field and the relations between them. Returns AH_OK, or AH_ERR_INVALID
 * with a message naming the first offending field written to err (when err is non-NULL
 * and errsize > 0), e.g. "policy.max_attempts must be >= 1 (got 0)". */
AH_EXPORT ah_status ah_policy_validate(const ah_policy *p, char *err, size_t errsize);

/* 1 when `name` is a policy field ("max_attempts", ..., "retry_on"), else 0. */
AH_EXPORT int ah_policy_is_field(const char *name);

/* Set a field by name, for bindings. set_int takes the integer fields, set_str takes
 * "jitter" ("full"|"equal"|"decorrelated"|"none"), "retry_after" ("floor"|"ignore") and
 * "continue_partial_text" ("sentence"|"line"|"false"; a binding passes a boolean false
 * as "false").
 * Single-field ranges are checked here; relations between fields (cap_ms >= base_ms) are
 * checked by ah_policy_validate(), so fields may be set in any order. Errors return
 * AH_ERR_INVALID and leave the policy unchanged: an unknown field
 * ("unknown policy field 'max_attempt' (did you mean 'max_attempts'?)"), a value of the
 * wrong type, a value out of range, an unknown mode name. "retry_on" is a field but is
 * set directly (it is a function), so both setters reject it. */
AH_EXPORT ah_status ah_policy_set_int(ah_policy *p, const char *field, int64_t v, char *err,
                                      size_t errsize);
AH_EXPORT ah_status ah_policy_set_str(ah_policy *p, const char *field, const char *v, char *err,
                                      size_t errsize);

AH_EXPORT const char *ah_jitter_name(ah_jitter j); /* "unknown" out of range */
AH_EXPORT const char *ah_retry_after_mode_name(ah_retry_after_mode m);
AH_EXPORT const char *ah_partial_text_name(ah_partial_text m); /* "false", ... */

/* ---- the shared retry budget ----------------------------------------------------------
 * Retry throttling in the style of gRPC (proposal A6): a token count starts at
 * max_tokens and stays within [0, max_tokens]; each retry the core wants to make takes
 * one token away, each successful attempt gives token_ratio back; a retry is allowed only
 * while, after taking its token, more than max_tokens / 2 remain. One budget may be
 * shared by every concurrent run of a process: all functions are thread-safe. Counts are
 * kept in thousandths of a token (as gRPC does) so refunds of 0.1 do not drift. */
typedef struct ah_retry_budget ah_retry_budget;

/* Check budget parameters: 0 < max_tokens <= 1000000, 0.001 <= token_ratio <= max_tokens.
 * AH_ERR_INVALID with a message naming the parameter, like ah_policy_validate. */
AH_EXPORT ah_status ah_retry_budget_check(double max_tokens, double token_ratio, char *err,
                                          size_t errsize);
/* Starts full. AH_OK with *out set; else *out = NULL and AH_ERR_INVALID (the message of
 * ah_retry_budget_check in err) or AH_ERR_NOMEM. err may be NULL. */
AH_EXPORT ah_status ah_retry_budget_new(double max_tokens, double token_ratio, ah_retry_budget **out,
                                        char *err, size_t errsize);
AH_EXPORT void ah_retry_budget_free(ah_retry_budget *b);
/* Take one token for a retry (never below 0). Returns 1 when the retry may go ahead, 0
 * when retries are throttled. A throttled call still takes its token, as in A6: while
 * failures keep coming the budget stays closed. */
AH_EXPORT int ah_retry_budget_try_spend(ah_retry_budget *b);
/* Record a successful attempt: refund token_ratio, capped at max_tokens. */
AH_EXPORT void ah_retry_budget_on_success(ah_retry_budget *b);
/* The current token count (for events, stats and tests). */
AH_EXPORT double ah_retry_budget_tokens(ah_retry_budget *b);

/* ---- the decision ------------------------------------------------------------------ */

typedef struct ah_decision {
    int retry;                  /* 1: wait wait_ms then make the next attempt */
    int64_t wait_ms;            /* the wait; when retry == 0 the wait that was needed
                                   (0 if giving up came before it was computed) */
    ah_wait_source wait_source; /* SERVER when the server's hint set the wait */
    ah_giveup_reason reason;    /* why not; AH_GIVEUP_COUNT_ when retry == 1 */
    int64_t jittered_ms;        /* the jittered backoff alone (0 if not computed) */
    int64_t hint_ms;            /* err->retry_after_ms as seen, -1 when absent */
} ah_decision;

/* Decide what follows a failed attempt. Checks, in order:
 *   1. retryable?  ah_error_is_retryable(err), then p->retry_on may override it
 *                  (cancelled errors skip the hook)            -> NOT_RETRYABLE
 *   2. failed_attempt >= p->max_attempts                        -> ATTEMPTS
 *   3. jittered backoff (formula of p->jitter, on rng)
 *   4. server hint (retry_after == FLOOR and err->retry_after_ms >= 0):
 *      hint > max_retry_after_ms                                -> RETRY_AFTER_TOO_LONG
 *      wait = max(jittered, hint), source SERVER when hint >= jittered
 *   5. deadline (deadline_ms > 0): the next attempt must start before it, i.e.
 *      elapsed_ms + wait >= deadline_ms gives up at once        -> RETRY_AFTER_TOO_LONG
 *      when the jittered wait alone would have fitted (the server's hint is what does
 *      not fit), else DEADLINE
 *   6. budget (when non-NULL): ah_retry_budget_try_spend()      -> RETRY_BUDGET
 * failed_attempt is 1-based (1 = the first try failed). elapsed_ms is the time since the
 * call began (attempts and waits). prev_wait_ms is the wait_ms of this call's previous
 * retry (0 before the first), used by decorrelated jitter. rng NULL skips the draws:
 * every mode then waits the unjittered exp(n), as "none" does. p must be valid (see
 * ah_policy_validate); p or err NULL gives up as NOT_RETRYABLE. Reentrant: the only
 * shared state touched is the budget, under its lock. */
AH_EXPORT ah_decision ah_backoff_decide(const ah_policy *p, const ah_error *err, int failed_attempt,
                                        int64_t elapsed_ms, int64_t prev_wait_ms, const ah_rng *rng,
                                        ah_retry_budget *budget);

#ifdef __cplusplus
}
#endif
#endif
