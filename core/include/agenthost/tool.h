/* agenthost/tool.h - one tool call: idempotency, budget and retries (docs/tools-and-ledger.md).
 *
 * ah_tool_call is the state of ONE call of a side-effecting body. It never runs the body
 * and never waits itself: ah_tool_step() says what to do next and the driver does it.
 * Two drivers share it, and both wait on loop timers: the blocking ah_tool_call_run()
 * below (C embedders; a short loop over the same steps, like curl's easy interface over
 * multi), and the Lua layer, which runs each body in a coroutine.
 *
 *   c = ah_tool_call_new(&policy, ledger, budget, key, args);
 *   for (;;) switch (ah_tool_step(c)) {
 *   case AH_TOOL_DO_RUN_BODY:    run attempt ah_tool_call_attempts(c), then report it
 *                                with ah_tool_call_body_ok(c, receipt) or
 *                                ah_tool_call_body_failed(c, &err)
 *   case AH_TOOL_DO_RETRY_AFTER: wait ah_tool_call_wait_ms(c) ms on a loop timer (or
 *                                cancel)
 *   case AH_TOOL_DO_WAIT_CLAIM:  the key is in flight in another call (or the ledger
 *                                answers later): wait until policy.notify is called or
 *                                ah_tool_call_wait_ms(c) ms pass (< 0: notify only),
 *                                then step again; past the caller's own bound, call
 *                                ah_tool_call_stop_waiting(c) (outcome in_progress)
 *   default:                     finished: read outcome, receipt, seq, duplicate, error
 *   }
 *
 * The rules (each tested in tests/unit/test_tool_step.c):
 *   - With a ledger and a key, the key is CLAIMED before the body runs (ledger.h): an
 *     entry already recorded under the key is returned at once (DUPLICATE: original
 *     receipt and seq, duplicate = 1) and the body never runs; a key another call holds
 *     is waited for (WAIT_CLAIM) and its receipt returned as a duplicate, or the claim
 *     taken over if that call gives up without an effect; the same key with different
 *     arguments fails with kind `idempotency_mismatch`, body not run; a ledger that
 *     cannot answer fails with kind `ledger`, body not run. A call that ends without
 *     recording (failure, budget, cancel, free) releases its claim.
 *   - The budget is checked BEFORE each body execution, every attempt takes one unit;
 *     when it is spent the body does not run and the call ends BUDGET_EXHAUSTED (an
 *     outcome with a `budget` error, never retried). A retry is not even waited for when
 *     the budget is already spent.
 *   - Only `transient` errors are retried by default; `permanent` and every other kind
 *     are not, except as the policy's repeat_unknown and resumes say (a body that
 *     reaches a server, such as an MCP tool: docs/mcp.md): an `outcome_unknown` error
 *     (the request reached the server, its answer was lost) is retried only when
 *     repeat_unknown is set, else the call ends with outcome OUTCOME_UNKNOWN; a
 *     `stream` error (the answer's stream was cut and can be picked up again without
 *     sending the request again) is retried as a RESUME when resumes is set: the attempt
 *     takes no budget (nothing is executed again) and ah_tool_call_resuming() says so;
 *     when no retry follows it, the call ends OUTCOME_UNKNOWN as well (kind
 *     `outcome_unknown`). policy.retry_on, when set, sees every error a body reported (except
 *     `cancelled`) and decides; a `budget` or `cancelled` error is never retried whatever
 *     it says. max_attempts counts ALL attempts (3 = first try + 2 retries). The wait
 *     before a retry comes from the same retry machine as an LLM call's (policy.backoff:
 *     full jitter, the error's retry_after_ms as a floor, the deadline).
 *   - On success the receipt is recorded in the ledger (committed, for SQLite) BEFORE the
 *     call reports SUCCEED; if another caller recorded the key first, the call reports
 *     DUPLICATE with that original entry. A receipt that cannot be recorded fails the
 *     call (never retried: the effect did happen).
 *
 * Not thread-safe; use from one thread (the host's loop).
 */
#ifndef AGENTHOST_TOOL_H
#define AGENTHOST_TOOL_H

#include "agenthost/export.h"

#include "agenthost/budget.h"
#include "agenthost/error.h"
#include "agenthost/event.h"
#include "agenthost/ledger.h"
#include "agenthost/loop.h"
#include "agenthost/policy.h"
#include "agenthost/status.h"

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* What the driver does next. X(NAME, "name") */
#define AH_TOOL_ACTION_MAP(X)                                                             \
    X(RUN_BODY, "run_body")                                                               \
    X(RETRY_AFTER, "retry_after")                                                         \
    X(SUCCEED, "succeed")                                                                 \
    X(RETURN_DUPLICATE, "return_duplicate")                                               \
    X(RETURN_BUDGET_EXHAUSTED, "return_budget_exhausted")                                 \
    X(FAIL, "fail")                                                                       \
    X(WAIT_CLAIM, "wait_claim")

typedef enum ah_tool_action {
#define AH__TA_ENUM(name, s) AH_TOOL_DO_##name,
    AH_TOOL_ACTION_MAP(AH__TA_ENUM)
#undef AH__TA_ENUM
        AH_TOOL_DO_COUNT_
} ah_tool_action;

AH_EXPORT const char *ah_tool_action_name(ah_tool_action a); /* "unknown" out of range */

/* The retry predicate; the same shape as the LLM policy's retry_on. Sees the body's
 * error (borrowed for the call) and the default verdict (1 only for `transient`).
 * Returns 1 retry, 0 do not, -1 the hook itself failed (already logged by its owner):
 * the default verdict is used. Any other value counts as -1. */
typedef int (*ah_tool_retry_on_fn)(void *ud, const ah_error *err, int default_verdict);

enum { AH_TOOL_DEFAULT_MAX_ATTEMPTS = 4 }; /* docs/retry-policy.md */

typedef struct ah_tool_policy {
    int max_attempts;             /* ALL attempts, >= 1 */
    ah_tool_retry_on_fn retry_on; /* NULL = default: retry only `transient` */
    void *retry_on_ud;            /* not owned */
    /* The wait before each retry, decided by the same retry machine as an LLM call's
     * (docs/retry-policy.md): base_ms, cap_ms, jitter, retry_after (the error's
     * retry_after_ms as a floor), max_retry_after_ms and deadline_ms (counted from the
     * call's first step; a wait that does not fit ends the call with the body's error).
     * Copied by ah_tool_call_new, which refuses an invalid one; its max_attempts and
     * retry_on are not used (the fields above are). NULL = retry at once. */
    const ah_policy *backoff;
    /* The loop the call's time and randomness come from, and the blocking driver's waits
     * run on (borrowed; it must outlive the call). NULL = the real clock, and a private
     * loop the call makes only when it must wait or draw jitter. */
    ah_loop *loop;
    const char *name; /* for log lines ("tool 'name' ..."); copied; NULL = the key */
    /* Called when a call in WAIT_CLAIM may step again (the key was released or recorded
     * in this process, or an asynchronous ledger answered); from inside another call's
     * ledger step or from the event loop, never from inside ah_tool_step of this call.
     * It must not step or free the call itself: note it and step later. NULL = the
     * driver polls after ah_tool_call_wait_ms. */
    void (*notify)(void *ud);
    void *notify_ud; /* not owned */
    /* Optional: tool_retry, when a failed attempt is to be run again, emitted before the
     * wait starts (ts_ms from the call's loop, run_id NULL: the driver's sink stamps
     * it). id is the tool call's id for the event (copied; NULL = ""), name the tool's
     * (above). Called from inside ah_tool_step; it must not step or free the call. */
    ah_event_fn on_event;
    void *event_ud; /* not owned */
    const char *id;
    /* Bodies that reach a server (the rule above): 1 = an `outcome_unknown` error may be
     * repeated (the tool is safe to repeat); resumes 1 = a `stream` error is resumed. */
    int repeat_unknown;
    int resumes;
} ah_tool_policy;

/* max_attempts = AH_TOOL_DEFAULT_MAX_ATTEMPTS, no hooks, no backoff, no loop. */
AH_EXPORT void ah_tool_policy_init(ah_tool_policy *p);

typedef struct ah_tool_call ah_tool_call;

/* Start one call. policy is copied (NULL = defaults). ledger is BORROWED and must outlive
 * the call (NULL = no idempotency); budget gets its own reference (NULL = unlimited).
 * key and args_canonical are copied; with key NULL the ledger is not used. AH_OK with
 * *out set; else *out = NULL and AH_ERR_INVALID (policy->max_attempts < 1, or a
 * policy->backoff that ah_policy_validate refuses: said in err) or AH_ERR_NOMEM. err may
 * be NULL. */
AH_EXPORT ah_status ah_tool_call_new(const ah_tool_policy *policy, ah_ledger *ledger, ah_budget *budget,
                           const char *key, const char *args_canonical, ah_tool_call **out,
                           char *err, size_t errsize);
/* Free the call and drop its budget reference. NULL is a no-op. */
AH_EXPORT void ah_tool_call_free(ah_tool_call *c);

/* Advance the call. Never blocks, never runs the body. Once finished (SUCCEED,
 * RETURN_DUPLICATE, RETURN_BUDGET_EXHAUSTED, FAIL) it keeps returning the same action. */
AH_EXPORT ah_tool_action ah_tool_step(ah_tool_call *c);

/* Report the attempt that RUN_BODY started. receipt is copied (NULL is stored as
 * "null"); err is copied (NULL = a permanent error "tool failed"). AH_ERR_STATE when no
 * attempt is running or it was already reported. */
AH_EXPORT ah_status ah_tool_call_body_ok(ah_tool_call *c, const char *receipt);
AH_EXPORT ah_status ah_tool_call_body_failed(ah_tool_call *c, const ah_error *err);

/* Cancel a call that is not running a body (before it starts or during a retry wait):
 * it finishes FAIL with a `cancelled` error. AH_ERR_STATE while a body runs (report it
 * first: its effect may have happened) or after the call finished. */
AH_EXPORT ah_status ah_tool_call_cancel(ah_tool_call *c);

/* Give up waiting for a key in flight elsewhere (after WAIT_CLAIM): the call finishes
 * with outcome IN_PROGRESS (error kind `transient`, message naming the key), the body
 * never having run here. AH_ERR_STATE unless the call is waiting for a claim, and while
 * it waits for its own ledger's answer (a PENDING claim: that is not a key in flight
 * elsewhere, and the answer comes; keep stepping the loop). */
AH_EXPORT ah_status ah_tool_call_stop_waiting(ah_tool_call *c);

/* Results and progress. Strings are borrowed and live as long as the call. */
AH_EXPORT int ah_tool_call_finished(const ah_tool_call *c);
/* Body executions so far (resumes included); during RUN_BODY, the number of the
 * running attempt. */
AH_EXPORT int ah_tool_call_attempts(const ah_tool_call *c);
/* During RUN_BODY: 1 when this attempt resumes the previous one (its `stream` error,
 * policy.resumes): pick the answer up again, do not send the request again. */
AH_EXPORT int ah_tool_call_resuming(const ah_tool_call *c);
AH_EXPORT int64_t ah_tool_call_wait_ms(const ah_tool_call *c);         /* after RETRY_AFTER */
AH_EXPORT ah_tool_outcome ah_tool_call_outcome(const ah_tool_call *c); /* once finished */
AH_EXPORT const ah_error *ah_tool_call_error(const ah_tool_call *c);   /* kind NONE on success */
AH_EXPORT const char *ah_tool_call_receipt(const ah_tool_call *c);     /* NULL unless ok */
AH_EXPORT int64_t ah_tool_call_seq(const ah_tool_call *c);             /* 0 without a ledger */
/* The fencing token of the claim the body runs under (a Redis ledger), else 0: pass it
 * to a downstream service so it can refuse a holder whose lease was taken over. */
AH_EXPORT int64_t ah_tool_call_fence(const ah_tool_call *c);
AH_EXPORT int ah_tool_call_duplicate(const ah_tool_call *c);
AH_EXPORT const char *ah_tool_call_key(const ah_tool_call *c); /* NULL when none */
AH_EXPORT const char *ah_tool_call_args(const ah_tool_call *c);
/* 1 when this call's refusal was its budget's first (emit budget_exhausted once). */
AH_EXPORT int ah_tool_call_budget_first_refusal(const ah_tool_call *c);

/* Fill a tool_call_end event (docs/lua.md) from a finished call; id and name are borrowed
 * into the event. */
AH_EXPORT void ah_tool_call_end_event(const ah_tool_call *c, const char *id, const char *name,
                                      ah_event *out);

/* ---- the blocking driver ----------------------------------------------------------- */

/* One attempt of the body. Read ah_tool_call_attempts / _key / _args from the call and
 * report exactly once with ah_tool_call_body_ok or _body_failed; a body that reports
 * nothing counts as a permanent failure. It must not free the call. */
typedef void (*ah_tool_body_fn)(void *ud, ah_tool_call *call);

typedef struct ah_tool_driver {
    ah_tool_body_fn body; /* required */
    void *body_ud;
    /* Virtual time, for a call whose policy.loop runs on a manual clock: when set, the
     * driver never blocks; where it would wait for the loop's next timer it calls
     * advance_ms(ud, ms) instead (advance the manual clock by ms there) and steps the
     * loop without blocking. NULL = the loop waits in real time (its timers, never a
     * sleep). */
    void (*advance_ms)(void *ud, int64_t ms);
    void *advance_ud;
    /* Optional events: budget_exhausted (at the budget's first refusal) and
     * tool_call_end (always, once). */
    ah_event_fn on_event;
    void *event_ud;
    const char *id, *name;   /* tool_call_end fields; NULL = "" */
    const char *budget_name; /* budget_exhausted.budget; NULL = "tool_calls" */
    /* How long to wait for a key in flight in another call before giving up with
     * IN_PROGRESS. 0 = the ledger's lease. The call's own receipt (its body ran) is
     * waited for past it, for as long as the ledger keeps trying to record it. */
    int64_t claim_wait_ms;
} ah_tool_driver;

/* Drive the call to its end: a short loop over ah_tool_step() whose waits (a retry's
 * backoff, a key in flight elsewhere) are timers on the call's loop, which is stepped
 * meanwhile, so its other timers and transfers keep running. A key in flight is waited
 * for until policy.notify would fire (this driver wakes on it) or the ledger's retry hint
 * passes. Returns the outcome (details through the getters). When c, d or d->body is
 * NULL returns AH_TOOL_ERROR at once and touches nothing. Called from inside a callback
 * of the call's loop (or on a loop an application's loop drives), it cannot step that
 * loop: its waits then run on a private loop of the call and block this thread, as any
 * blocking call in a callback does. */
AH_EXPORT ah_tool_outcome ah_tool_call_run(ah_tool_call *c, const ah_tool_driver *d);

#ifdef __cplusplus
}
#endif
#endif
