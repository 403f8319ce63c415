/* tool_call.c - the state machine of one tool call and its blocking driver
 * (docs/tools-and-ledger.md).
 *
 * Phases: START -> (ledger claim) -> [budget take] -> RUNNING -> REPORTED_OK | _FAIL
 *         START -> WAIT_CLAIM (key in flight elsewhere, or an asynchronous answer)
 *               -> START again (woken or polled) | DONE (in_progress, cancel)
 *         REPORTED_OK -> (ledger complete) -> DONE | WAIT_RECORD (asynchronous) -> DONE
 *         REPORTED_FAIL -> (retry decision) -> WAITING -> [budget take] -> RUNNING ...
 *         any -> DONE (final action kept in `final`).
 * Invariants:
 *   - a body runs only after a successful budget take, so budget used == executions;
 *   - with a ledger and a key, a body runs only while this call holds the key's claim;
 *     the claim is taken before the first take (a duplicate costs no budget) and
 *     either completed (receipt recorded, before SUCCEED is returned) or released when
 *     the call ends any other way (failure, budget, cancel, free);
 *   - every phase change goes through set_phase() so a call can be traced;
 *   - the call never sleeps and never calls the body: drivers do.
 */
#include "internal.h"

#include "agenthost/tool.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef enum phase {
    PH_START,
    PH_RUNNING,
    PH_REPORTED_OK,
    PH_REPORTED_FAIL,
    PH_WAITING,
    PH_WAIT_CLAIM,
    PH_WAIT_RECORD,
    PH_DONE
} phase;

static const char *const phase_names[] = {
    "start",   "running",    "reported_ok", "reported_fail",
    "waiting", "wait_claim", "wait_record", "done"};

struct ah_tool_call {
    phase ph;
    ah_tool_action final; /* valid in PH_DONE */
    ah_tool_policy policy;
    ah_ledger *ledger; /* borrowed */
    ah_budget *budget; /* one reference held */
    char *key, *args;
    int attempts;
    int64_t wait_ms;
    ah_tool_outcome outcome;
    ah_error error;
    char *receipt; /* the body's (pending) or the final one */
    int64_t seq;
    int64_t fence; /* the claim's fencing token (0: none) */
    int duplicate;
    int budget_first_refusal;
    int claimed;   /* this call holds the key's claim */
    int woken;     /* a ledger callback came while waiting */
    int has_async; /* an asynchronous ledger answer is in `async` */
    ah_ledger_result async;
    char *async_receipt; /* async.entry.receipt, copied */
};

const char *ah_tool_action_name(ah_tool_action a)
{
    static const char *const names[] = {
#define AH__TA_NAME(name, s) s,
        AH_TOOL_ACTION_MAP(AH__TA_NAME)
#undef AH__TA_NAME
    };
    if ((int)a < 0 || a >= AH_TOOL_DO_COUNT_)
        return "unknown";
    return names[a];
}

void ah_tool_policy_init(ah_tool_policy *p)
{
    memset(p, 0, sizeof *p);
    p->max_attempts = AH_TOOL_DEFAULT_MAX_ATTEMPTS;
}

static void set_phase(ah_tool_call *c, phase ph)
{
    if (ah__log_enabled(AH_LOG_DEBUG))
        ah__log(AH_LOG_DEBUG, "tool call %s: %s -> %s (attempt %d)",
                c->key ? c->key : "-", phase_names[c->ph], phase_names[ph], c->attempts);
    c->ph = ph;
}

/* Release the claim (no effect was recorded under it) and forget pending callbacks. */
static void release_claim(ah_tool_call *c)
{
    if (!c->ledger)
        return;
    ah_ledger_cancel(c->ledger, c);
    if (c->claimed) {
        c->claimed = 0;
        ah_ledger_abandon(c->ledger, c->key);
    }
}

static ah_tool_action finish(ah_tool_call *c, ah_tool_action a, ah_tool_outcome o)
{
    release_claim(c);
    c->final = a;
    c->outcome = o;
    if (o != AH_TOOL_OK) {
        free(c->receipt);
        c->receipt = NULL;
    }
    set_phase(c, PH_DONE);
    return a;
}

static int uses_ledger(const ah_tool_call *c)
{
    return c->ledger && c->key;
}

static ah_tool_call *tool_call_make(const ah_tool_policy *policy, ah_ledger *ledger,
                                    ah_budget *budget, const char *key,
                                    const char *args_canonical, char *err, size_t errsize,
                                    ah_status *st)
{
    ah_tool_call *c = NULL;
    if (policy && policy->max_attempts < 1) {
        ah__bufprintf(err, errsize, "tool policy: max_attempts must be >= 1 (got %d)",
                      policy->max_attempts);
        *st = AH_ERR_INVALID;
        return NULL;
    }
    *st = AH_ERR_NOMEM;
    c = calloc(1, sizeof *c);
    if (!c) {
        ah__bufprintf(err, errsize, "tool call: out of memory");
        return NULL;
    }
    if (policy)
        c->policy = *policy;
    else
        ah_tool_policy_init(&c->policy);
    c->key = key ? ah__strdup(key) : NULL;
    c->args = ah__strdup(args_canonical ? args_canonical : "");
    if ((key && !c->key) || !c->args) {
        free(c->key);
        free(c->args);
        free(c);
        ah__bufprintf(err, errsize, "tool call: out of memory");
        return NULL;
    }
    c->ledger = ledger;
    c->budget = ah_budget_ref(budget);
    c->ph = PH_START;
    c->outcome = AH_TOOL_ERROR;
    ah_error_clear(&c->error);
    return c;
}

/* The public form (status, out-pointer, error buffer): see the header. */
ah_status ah_tool_call_new(const ah_tool_policy *policy, ah_ledger *ledger, ah_budget *budget,
                           const char *key, const char *args_canonical, ah_tool_call **out,
                           char *err, size_t errsize)
{
    ah_status st = AH_OK;
    if (!out) {
        if (err && errsize)
            ah__bufprintf(err, errsize, "ah_tool_call_new: out is NULL");
        return AH_ERR_INVALID;
    }
    *out = tool_call_make(policy, ledger, budget, key, args_canonical, err, errsize, &st);
    return *out ? AH_OK : st;
}

void ah_tool_call_free(ah_tool_call *c)
{
    if (!c)
        return;
    /* Freed mid-call (e.g. its coroutine was dropped): whatever the body did, this call
     * will never record it, so the key goes back to the others. */
    release_claim(c);
    free(c->async_receipt);
    ah_budget_free(c->budget);
    free(c->key);
    free(c->args);
    free(c->receipt);
    free(c);
}

/* Copy the ledger entry into the call as its final, duplicate result. */
static ah_tool_action return_entry(ah_tool_call *c, const ah_ledger_entry *e)
{
    char *r = ah__strdup(e->receipt);
    if (!r) {
        ah_error_set(&c->error, AH_EK_PERMANENT, 0, "out of memory copying a receipt");
        return finish(c, AH_TOOL_DO_FAIL, AH_TOOL_ERROR);
    }
    free(c->receipt);
    c->receipt = r;
    c->seq = e->seq;
    c->duplicate = 1;
    ah_error_clear(&c->error);
    return finish(c, AH_TOOL_DO_RETURN_DUPLICATE, AH_TOOL_OK);
}

static ah_tool_action budget_exhausted(ah_tool_call *c)
{
    ah_error_set(&c->error, AH_EK_BUDGET, 0,
                 "call budget exhausted (%lld of %lld executions used)",
                 (long long)ah_budget_used(c->budget), (long long)ah_budget_limit(c->budget));
    return finish(c, AH_TOOL_DO_RETURN_BUDGET_EXHAUSTED, AH_TOOL_BUDGET_EXHAUSTED);
}

/* Take one unit of budget and start the next attempt. */
static ah_tool_action start_attempt(ah_tool_call *c)
{
    if (!ah_budget_try_take(c->budget)) {
        c->budget_first_refusal = ah_budget_refused(c->budget) == 1;
        return budget_exhausted(c);
    }
    c->attempts++;
    free(c->receipt);
    c->receipt = NULL;
    set_phase(c, PH_RUNNING);
    return AH_TOOL_DO_RUN_BODY;
}

/* A ledger callback: keep an asynchronous answer, note a wake-up, tell the driver. */
static void ledger_answered(void *ud, const ah_ledger_result *r)
{
    ah_tool_call *c = ud;
    if (c->ph != PH_WAIT_CLAIM && c->ph != PH_WAIT_RECORD)
        return;
    if (r->answer != AH_LEDGER_BUSY || c->ph == PH_WAIT_RECORD) {
        /* An asynchronous answer: copy it (its strings are borrowed for this call). */
        char *receipt = NULL;
        if (r->answer == AH_LEDGER_DONE) {
            receipt = ah__strdup(r->entry.receipt ? r->entry.receipt : "null");
            if (!receipt) {
                c->async.answer = AH_LEDGER_FAILED;
                c->has_async = 1;
                goto wake;
            }
        }
        free(c->async_receipt);
        c->async_receipt = receipt;
        c->async = *r;
        c->async.entry.key = c->key;
        c->async.entry.receipt = receipt;
        c->has_async = 1;
    }
wake:
    c->woken = 1;
    if (c->policy.notify)
        c->policy.notify(c->policy.notify_ud);
}

static ah_tool_action ledger_failed(ah_tool_call *c, ah_error_kind kind, const char *what)
{
    ah_error_set(&c->error, kind, 0, "%s%s", what, ah_ledger_errmsg(c->ledger));
    return finish(c, AH_TOOL_DO_FAIL, AH_TOOL_ERROR);
}

/* What a claim answer means for the call. */
static ah_tool_action on_claim(ah_tool_call *c, const ah_ledger_result *r)
{
    switch (r->answer) {
    case AH_LEDGER_OWNED:
        c->claimed = 1;
        c->fence = r->fence;
        return start_attempt(c);
    case AH_LEDGER_DONE:
        return return_entry(c, &r->entry);
    case AH_LEDGER_BUSY:
    case AH_LEDGER_PENDING:
        c->wait_ms = r->answer == AH_LEDGER_BUSY ? r->retry_ms : -1;
        set_phase(c, PH_WAIT_CLAIM);
        return AH_TOOL_DO_WAIT_CLAIM;
    case AH_LEDGER_MISMATCH:
        /* Running the body could repeat an effect under someone else's key: do not. */
        return ledger_failed(c, AH_EK_IDEMPOTENCY_MISMATCH, "");
    default:
        /* A ledger that cannot answer fails closed: the body does not run. */
        return ledger_failed(c, AH_EK_LEDGER, "ledger claim failed: ");
    }
}

static ah_tool_action step_start(ah_tool_call *c)
{
    if (!uses_ledger(c))
        return start_attempt(c);
    ah_ledger_result r;
    c->woken = 0;
    ah_ledger_claim(c->ledger, c->key, c->args, &r, ledger_answered, c);
    return on_claim(c, &r);
}

static ah_tool_action step_wait_claim(ah_tool_call *c)
{
    if (c->has_async) {
        c->has_async = 0;
        return on_claim(c, &c->async);
    }
    if (c->wait_ms < 0 && !c->woken)
        return AH_TOOL_DO_WAIT_CLAIM; /* an asynchronous answer is still due */
    ah_ledger_cancel(c->ledger, c);
    set_phase(c, PH_START);
    return step_start(c);
}

/* What the answer to recording our receipt means. */
static ah_tool_action on_recorded(ah_tool_call *c, const ah_ledger_result *r)
{
    c->claimed = 0; /* completing drops the claim, whatever the answer */
    if (r->answer == AH_LEDGER_PENDING) {
        c->wait_ms = -1;
        set_phase(c, PH_WAIT_RECORD);
        return AH_TOOL_DO_WAIT_CLAIM;
    }
    if (r->answer == AH_LEDGER_DONE && r->duplicate)
        return return_entry(c, &r->entry); /* recorded first by a taker-over: theirs */
    if (r->answer != AH_LEDGER_DONE) {
        ah__log(AH_LOG_ERROR, "tool call: the effect ran but was not recorded: %s",
                ah_ledger_errmsg(c->ledger));
        return ledger_failed(c,
                             r->answer == AH_LEDGER_MISMATCH ? AH_EK_IDEMPOTENCY_MISMATCH
                                                             : AH_EK_LEDGER,
                             "the effect ran but its receipt could not be recorded: ");
    }
    c->seq = r->entry.seq;
    ah_error_clear(&c->error);
    return finish(c, AH_TOOL_DO_SUCCEED, AH_TOOL_OK);
}

static ah_tool_action step_reported_ok(ah_tool_call *c)
{
    if (!uses_ledger(c)) {
        ah_error_clear(&c->error);
        return finish(c, AH_TOOL_DO_SUCCEED, AH_TOOL_OK);
    }
    ah_ledger_result r;
    ah_ledger_complete(c->ledger, c->key, c->args, c->receipt, &r, ledger_answered, c);
    return on_recorded(c, &r);
}

static ah_tool_action step_wait_record(ah_tool_call *c)
{
    if (!c->has_async)
        return AH_TOOL_DO_WAIT_CLAIM;
    c->has_async = 0;
    return on_recorded(c, &c->async);
}

/* After a failed attempt: retry (with a wait) or finish. The hook sees the error before
 * any cap is applied, so nothing between the body and the policy swallows it. */
static ah_tool_action step_reported_fail(ah_tool_call *c)
{
    ah_error_kind kind = c->error.kind;
    int retry = kind == AH_EK_TRANSIENT;
    if (c->policy.retry_on && kind != AH_EK_CANCELLED) {
        int v = c->policy.retry_on(c->policy.retry_on_ud, &c->error, retry);
        if (v == 0 || v == 1)
            retry = v;
    }
    if (kind == AH_EK_BUDGET || kind == AH_EK_CANCELLED)
        retry = 0;
    if (!retry || c->attempts >= c->policy.max_attempts)
        return finish(c, AH_TOOL_DO_FAIL, AH_TOOL_ERROR);
    /* Do not wait for an attempt the budget can no longer grant. */
    if (ah_budget_remaining(c->budget) <= 0)
        return start_attempt(c); /* refused and counted as a refusal, like any take */
    int64_t wait = 0;
    if (c->policy.wait) {
        wait = c->policy.wait(c->policy.wait_ud, &c->error, c->attempts);
        if (wait < 0)
            return finish(c, AH_TOOL_DO_FAIL, AH_TOOL_ERROR);
    }
    c->wait_ms = wait;
    set_phase(c, PH_WAITING);
    return AH_TOOL_DO_RETRY_AFTER;
}

ah_tool_action ah_tool_step(ah_tool_call *c)
{
    if (!c)
        return AH_TOOL_DO_FAIL;
    switch (c->ph) {
    case PH_START:
        return step_start(c);
    case PH_RUNNING:
        /* Stepped without a report: the body vanished without saying how it went. */
        ah_error_set(&c->error, AH_EK_PERMANENT, 0, "tool body reported no result");
        set_phase(c, PH_REPORTED_FAIL);
        return step_reported_fail(c);
    case PH_REPORTED_OK:
        return step_reported_ok(c);
    case PH_REPORTED_FAIL:
        return step_reported_fail(c);
    case PH_WAITING:
        return start_attempt(c);
    case PH_WAIT_CLAIM:
        return step_wait_claim(c);
    case PH_WAIT_RECORD:
        return step_wait_record(c);
    case PH_DONE:
        break;
    }
    return c->final;
}

ah_status ah_tool_call_body_ok(ah_tool_call *c, const char *receipt)
{
    if (!c || c->ph != PH_RUNNING)
        return AH_ERR_STATE;
    char *r = ah__strdup(receipt ? receipt : "null");
    if (!r)
        return AH_ERR_NOMEM;
    free(c->receipt);
    c->receipt = r;
    set_phase(c, PH_REPORTED_OK);
    return AH_OK;
}

ah_status ah_tool_call_body_failed(ah_tool_call *c, const ah_error *err)
{
    if (!c || c->ph != PH_RUNNING)
        return AH_ERR_STATE;
    if (err)
        c->error = *err;
    else
        ah_error_set(&c->error, AH_EK_PERMANENT, 0, "tool failed");
    set_phase(c, PH_REPORTED_FAIL);
    return AH_OK;
}

ah_status ah_tool_call_cancel(ah_tool_call *c)
{
    if (!c || (c->ph != PH_START && c->ph != PH_WAITING && c->ph != PH_WAIT_CLAIM))
        return AH_ERR_STATE;
    ah_error_set(&c->error, AH_EK_CANCELLED, 0, "tool call cancelled");
    finish(c, AH_TOOL_DO_FAIL, AH_TOOL_ERROR);
    return AH_OK;
}

ah_status ah_tool_call_stop_waiting(ah_tool_call *c)
{
    if (!c || c->ph != PH_WAIT_CLAIM)
        return AH_ERR_STATE;
    size_t n = strlen(c->key);
    ah_error_set(&c->error, AH_EK_TRANSIENT, 0,
                 "idempotency key '%.80s%s' is in flight in another call; its receipt did "
                 "not arrive in time",
                 c->key, n > 80 ? "..." : "");
    finish(c, AH_TOOL_DO_FAIL, AH_TOOL_IN_PROGRESS);
    return AH_OK;
}

int ah_tool_call_finished(const ah_tool_call *c)
{
    return c && c->ph == PH_DONE;
}

int ah_tool_call_attempts(const ah_tool_call *c)
{
    return c ? c->attempts : 0;
}

int64_t ah_tool_call_wait_ms(const ah_tool_call *c)
{
    return c ? c->wait_ms : 0;
}

ah_tool_outcome ah_tool_call_outcome(const ah_tool_call *c)
{
    return c ? c->outcome : AH_TOOL_ERROR;
}

const ah_error *ah_tool_call_error(const ah_tool_call *c)
{
    return c ? &c->error : NULL;
}

const char *ah_tool_call_receipt(const ah_tool_call *c)
{
    return c && c->ph == PH_DONE && c->outcome == AH_TOOL_OK ? c->receipt : NULL;
}

int64_t ah_tool_call_seq(const ah_tool_call *c)
{
    return c ? c->seq : 0;
}

int64_t ah_tool_call_fence(const ah_tool_call *c)
{
    return c ? c->fence : 0;
}

int ah_tool_call_duplicate(const ah_tool_call *c)
{
    return c ? c->duplicate : 0;
}

const char *ah_tool_call_key(const ah_tool_call *c)
{
    return c ? c->key : NULL;
}

const char *ah_tool_call_args(const ah_tool_call *c)
{
    return c ? c->args : NULL;
}

int ah_tool_call_budget_first_refusal(const ah_tool_call *c)
{
    return c ? c->budget_first_refusal : 0;
}

void ah_tool_call_end_event(const ah_tool_call *c, const char *id, const char *name,
                            ah_event *out)
{
    memset(out, 0, sizeof *out);
    out->type = AH_EV_TOOL_CALL_END;
    out->u.tool_call_end.id = id ? id : "";
    out->u.tool_call_end.name = name ? name : "";
    out->u.tool_call_end.outcome = ah_tool_call_outcome(c);
    out->u.tool_call_end.duplicate = ah_tool_call_duplicate(c);
    out->u.tool_call_end.attempts = ah_tool_call_attempts(c);
}

/* ---- the blocking driver --------------------------------------------------------- */

static void real_sleep_ms(int64_t ms)
{
    struct timespec ts = {(time_t)(ms / 1000), (long)(ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
        ;
}

ah_tool_outcome ah_tool_call_run(ah_tool_call *c, const ah_tool_driver *d)
{
    if (!c || !d || !d->body)
        return AH_TOOL_ERROR;
    int64_t waited = 0, bound = d->claim_wait_ms > 0 ? d->claim_wait_ms
                                                     : ah_ledger_lease_ms(c->ledger);
    for (;;) {
        ah_tool_action a = ah_tool_step(c);
        switch (a) {
        case AH_TOOL_DO_RUN_BODY:
            d->body(d->body_ud, c);
            continue; /* an unreported attempt is handled by the next step */
        case AH_TOOL_DO_RETRY_AFTER:
            if (c->wait_ms > 0) {
                if (d->sleep_ms)
                    d->sleep_ms(d->sleep_ud, c->wait_ms);
                else
                    real_sleep_ms(c->wait_ms);
            }
            continue;
        case AH_TOOL_DO_WAIT_CLAIM: {
            /* The blocking driver polls: it has nothing else to run meanwhile. */
            int64_t ms = c->wait_ms > 0 ? c->wait_ms : 10;
            if (waited >= bound) {
                ah_tool_call_stop_waiting(c);
                break;
            }
            if (ms > bound - waited)
                ms = bound - waited;
            if (d->sleep_ms)
                d->sleep_ms(d->sleep_ud, ms);
            else
                real_sleep_ms(ms);
            waited += ms;
            continue;
        }
        default:
            break;
        }
        break;
    }
    if (d->on_event) {
        ah_event ev;
        if (c->outcome == AH_TOOL_BUDGET_EXHAUSTED && c->budget_first_refusal) {
            ah_budget_exhausted_event(
                c->budget, d->budget_name ? d->budget_name : "tool_calls", &ev);
            ev.ts_ms = ah_clock_real()->wall_ms(ah_clock_real()->ud);
            d->on_event(d->event_ud, &ev);
        }
        ah_tool_call_end_event(c, d->id, d->name, &ev);
        ev.ts_ms = ah_clock_real()->wall_ms(ah_clock_real()->ud); /* this driver sleeps
                                                                     for real */
        d->on_event(d->event_ud, &ev);
    }
    return c->outcome;
}
