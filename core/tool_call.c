/* tool_call.c - the state machine of one tool call and its blocking driver
 * (docs/tools-and-ledger.md).
 *
 * Phases: START -> (ledger lookup) -> [budget take] -> RUNNING -> REPORTED_OK | _FAIL
 *         REPORTED_FAIL -> (retry decision) -> WAITING -> [budget take] -> RUNNING ...
 *         any -> DONE (final action kept in `final`).
 * Invariants:
 *   - a body runs only after a successful budget take, so budget used == executions;
 *   - the ledger is consulted before the first take (a duplicate costs no budget) and
 *     written before SUCCEED is returned;
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
    PH_DONE
} phase;

static const char *const phase_names[] = {"start",         "running", "reported_ok",
                                          "reported_fail", "waiting", "done"};

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
    int duplicate;
    int budget_first_refusal;
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

static ah_tool_action finish(ah_tool_call *c, ah_tool_action a, ah_tool_outcome o)
{
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

ah_tool_call *ah_tool_call_new(const ah_tool_policy *policy, ah_ledger *ledger,
                               ah_budget *budget, const char *key,
                               const char *args_canonical)
{
    ah_tool_call *c = NULL;
    if (policy && policy->max_attempts < 1)
        return NULL;
    c = calloc(1, sizeof *c);
    if (!c)
        return NULL;
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
        return NULL;
    }
    c->ledger = ledger;
    c->budget = ah_budget_ref(budget);
    c->ph = PH_START;
    c->outcome = AH_TOOL_ERROR;
    ah_error_clear(&c->error);
    return c;
}

void ah_tool_call_free(ah_tool_call *c)
{
    if (!c)
        return;
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

static ah_tool_action step_start(ah_tool_call *c)
{
    if (uses_ledger(c)) {
        ah_ledger_entry e;
        ah_status st = ah_ledger_lookup(c->ledger, c->key, c->args, &e);
        if (st == AH_OK)
            return return_entry(c, &e);
        if (st != AH_ERR_NOT_FOUND) {
            /* Mismatched arguments, or a ledger we cannot read: running the body could
             * repeat an effect, so do not. */
            if (st == AH_ERR_STATE)
                ah_error_set(&c->error, AH_EK_PERMANENT, 0, "%s",
                             ah_ledger_errmsg(c->ledger));
            else
                ah_error_set(&c->error, AH_EK_PERMANENT, 0, "ledger lookup failed: %s",
                             ah_ledger_errmsg(c->ledger));
            return finish(c, AH_TOOL_DO_FAIL, AH_TOOL_ERROR);
        }
    }
    return start_attempt(c);
}

static ah_tool_action step_reported_ok(ah_tool_call *c)
{
    if (uses_ledger(c)) {
        int64_t seq = 0;
        int dup = 0;
        ah_status st =
            ah_ledger_record(c->ledger, c->key, c->args, c->receipt, &seq, &dup);
        if (st == AH_OK && dup) {
            /* Someone recorded this key while our body ran: theirs is the receipt. */
            ah_ledger_entry e;
            st = ah_ledger_lookup(c->ledger, c->key, c->args, &e);
            if (st == AH_OK)
                return return_entry(c, &e);
        }
        if (st != AH_OK) {
            ah__log(AH_LOG_ERROR, "tool call: the effect ran but was not recorded: %s",
                    ah_ledger_errmsg(c->ledger));
            ah_error_set(&c->error, AH_EK_PERMANENT, 0,
                         "the effect ran but its receipt could not be recorded: %s",
                         ah_ledger_errmsg(c->ledger));
            return finish(c, AH_TOOL_DO_FAIL, AH_TOOL_ERROR);
        }
        c->seq = seq;
    }
    ah_error_clear(&c->error);
    return finish(c, AH_TOOL_DO_SUCCEED, AH_TOOL_OK);
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
    if (!c || (c->ph != PH_START && c->ph != PH_WAITING))
        return AH_ERR_STATE;
    ah_error_set(&c->error, AH_EK_CANCELLED, 0, "tool call cancelled");
    finish(c, AH_TOOL_DO_FAIL, AH_TOOL_ERROR);
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
