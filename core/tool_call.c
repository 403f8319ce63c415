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
 *   - whether and when to retry is decided by the retry machine (retry.h), the same one
 *     an LLM call steps, with the tool class (transient only, budget errors never);
 *   - the call never sleeps and never calls the body: drivers do, and both wait on loop
 *     timers (the blocking driver below steps the call's loop; nothing here sleeps).
 */
#include "internal.h"
#include "retry.h"

#include "agenthost/tool.h"

#include <stdlib.h>
#include <string.h>

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
    ah_tool_policy policy; /* name points at `name` */
    ah_policy backoff; /* the schedule the retry machine runs (policy.backoff or none) */
    ah__retry retry;   /* attempts (body executions), start, previous wait */
    int started;       /* the first step happened: the deadline runs from there */
    ah_loop *own_loop; /* made when policy.loop is NULL and a wait or a draw needs one */
    char *name;
    char *id; /* policy.id, copied (tool_retry) */
    ah_ledger *ledger; /* borrowed */
    ah_budget *budget; /* one reference held */
    char *key, *args;
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
    int resume_next; /* the next attempt resumes the last one (a `stream` error) */
    int resuming;    /* the running attempt is a resume */
    int saw_busy;  /* the ledger said BUSY: the key is (or was) in flight elsewhere */
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
                c->key ? c->key : "-", phase_names[c->ph], phase_names[ph],
                c->retry.attempts);
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

/* The schedule the retry machine runs: the policy's backoff, or none at all (retry at
 * once, hints ignored); the attempt bound and the predicate are the tool policy's.
 * 0 with err set when the backoff is not a valid policy. */
static int set_backoff(ah_tool_call *c, char *err, size_t errsize)
{
    if (c->policy.backoff) {
        c->backoff = *c->policy.backoff;
    } else {
        ah_policy_init(&c->backoff);
        c->backoff.base_ms = c->backoff.cap_ms = 0;
        c->backoff.jitter = AH_JITTER_NONE;
        c->backoff.retry_after = AH_RETRY_AFTER_IGNORE;
    }
    c->policy.backoff = NULL; /* copied: nothing borrowed is kept */
    c->backoff.max_attempts = c->policy.max_attempts;
    c->backoff.retry_on = c->policy.retry_on;
    c->backoff.retry_on_ud = c->policy.retry_on_ud;
    char why[160];
    if (ah_policy_validate(&c->backoff, why, sizeof why) != AH_OK) {
        ah__bufprintf(err, errsize, "tool policy.backoff: %s", why);
        return 0;
    }
    ah__retry_init(&c->retry, &c->backoff, AH__RETRY_TOOL);
    c->retry.repeat_unknown = c->policy.repeat_unknown;
    c->retry.resumes = c->policy.resumes;
    return 1;
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
    c->name = c->policy.name ? ah__strdup(c->policy.name) : NULL;
    c->id = c->policy.id ? ah__strdup(c->policy.id) : NULL;
    int named = (!c->policy.name || c->name) && (!c->policy.id || c->id);
    c->policy.name = c->name;
    c->policy.id = c->id;
    int valid = 1;
    if ((key && !c->key) || !c->args || !named ||
        !(valid = set_backoff(c, err, errsize))) {
        free(c->name);
        free(c->id);
        free(c->key);
        free(c->args);
        free(c);
        if (valid)
            ah__bufprintf(err, errsize, "tool call: out of memory");
        else
            *st = AH_ERR_INVALID;
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
    ah_loop_free(c->own_loop);
    free(c->name);
    free(c->id);
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

/* Take one unit of budget and start the next attempt (a resume executes nothing again:
 * it takes none). */
static ah_tool_action start_attempt(ah_tool_call *c)
{
    c->resuming = c->resume_next;
    c->resume_next = 0;
    if (!c->resuming && !ah_budget_try_take(c->budget)) {
        c->budget_first_refusal = ah_budget_refused(c->budget) == 1;
        return budget_exhausted(c);
    }
    ah__retry_attempt(&c->retry);
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
    if (r->answer == AH_LEDGER_BUSY && c->ph == PH_WAIT_CLAIM)
        c->saw_busy = 1;
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
        if (r->answer == AH_LEDGER_BUSY)
            c->saw_busy = 1;
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

/* The call's loop: policy.loop, else its own, made on first need (NULL if out of
 * memory, when create). */
static ah_loop *call_loop(ah_tool_call *c, int create)
{
    if (c->policy.loop)
        return c->policy.loop;
    if (!c->own_loop && create)
        c->own_loop = ah_loop_new(NULL, NULL);
    return c->own_loop;
}

static int64_t now_ms(ah_tool_call *c)
{
    ah_loop *l = call_loop(c, 0);
    if (l)
        return ah_loop_now_ms(l);
    const ah_clock *real = ah_clock_real(); /* the clock a private loop will use */
    return real->now_ms(real->ud);
}

static ah_tool_action step_start(ah_tool_call *c)
{
    if (!c->started) {
        c->started = 1;
        ah__retry_start(&c->retry, now_ms(c));
    }
    if (!uses_ledger(c))
        return start_attempt(c);
    ah_ledger_result r;
    c->woken = 0;
    c->resume_next = 0;
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

static const char *log_name(const ah_tool_call *c)
{
    return c->name ? c->name : c->key ? c->key : "-";
}

static int64_t wall_ms(ah_tool_call *c)
{
    ah_loop *l = call_loop(c, 0);
    if (l)
        return ah_loop_wall_ms(l);
    const ah_clock *real = ah_clock_real();
    return real->wall_ms(real->ud);
}

/* A retry goes ahead: tool_retry, before the wait starts (a display shows it at once). */
static void emit_retry(ah_tool_call *c, int64_t wait_ms)
{
    if (!c->policy.on_event)
        return;
    ah_event ev = {.type = AH_EV_TOOL_RETRY};
    ev.ts_ms = wall_ms(c);
    ev.u.tool_retry.id = c->id ? c->id : "";
    ev.u.tool_retry.name = c->name ? c->name : "";
    ev.u.tool_retry.failed_attempt = c->retry.attempts;
    ev.u.tool_retry.max_attempts = c->backoff.max_attempts;
    ev.u.tool_retry.wait_ms = wait_ms;
    ev.u.tool_retry.error = &c->error;
    c->policy.on_event(c->policy.event_ud, &ev);
}

/* After a failed attempt: the retry machine's verdict, the call budget, then its
 * schedule; retry (after a wait) or finish. The hook sees the error before any cap is
 * applied, so nothing between the body and the policy swallows it. */
static ah_tool_action step_reported_fail(ah_tool_call *c)
{
    ah_decision d = ah__retry_verdict(&c->retry, &c->error);
    c->resume_next = d.retry && c->policy.resumes && c->error.kind == AH_EK_STREAM;
    if (d.retry) {
        /* Do not wait for an attempt the budget can no longer grant. */
        if (!c->resume_next && ah_budget_remaining(c->budget) <= 0)
            return start_attempt(c); /* refused and counted as a refusal, like any take */
        /* Draws need an RNG: the loop's (a schedule without jitter draws nothing). */
        const ah_rng *rng = NULL;
        if (c->backoff.base_ms > 0 && c->backoff.jitter != AH_JITTER_NONE) {
            ah_loop *l = call_loop(c, 1);
            rng = l ? ah_loop_rng(l) : NULL;
        }
        d = ah__retry_schedule(&c->retry, d, &c->error, now_ms(c), rng, NULL);
        if (d.retry) {
            ah__log(AH_LOG_INFO,
                    "tool '%s' attempt %d/%d failed (%s: %s); retrying in %lld ms (%s)",
                    log_name(c), c->retry.attempts, c->backoff.max_attempts,
                    ah_error_kind_name(c->error.kind), c->error.message,
                    (long long)d.wait_ms, ah_wait_source_name(d.wait_source));
            c->wait_ms = ah__retry_wait(&c->retry, &d);
            set_phase(c, PH_WAITING);
            emit_retry(c, c->wait_ms);
            return AH_TOOL_DO_RETRY_AFTER;
        }
    }
    if (d.reason != AH_GIVEUP_NOT_RETRYABLE)
        ah__log(AH_LOG_INFO, "tool '%s' attempt %d/%d failed (%s: %s); giving up: %s",
                log_name(c), c->retry.attempts, c->backoff.max_attempts,
                ah_error_kind_name(c->error.kind), c->error.message,
                ah_giveup_reason_name(d.reason));
    c->resume_next = 0;
    /* The request reached its server and no answer came back (not even by resuming):
     * whether its effect happened is unknown, and the call says so. */
    if (c->error.kind == AH_EK_OUTCOME_UNKNOWN ||
        (c->error.kind == AH_EK_STREAM && c->policy.resumes)) {
        c->error.kind = AH_EK_OUTCOME_UNKNOWN;
        return finish(c, AH_TOOL_DO_FAIL, AH_TOOL_OUTCOME_UNKNOWN);
    }
    return finish(c, AH_TOOL_DO_FAIL, AH_TOOL_ERROR);
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

/* Whether the call waits for its own ledger's first answer to its claim (PENDING: a
 * SQLite writer thread, a Redis round trip) and nothing has said the key is in flight
 * elsewhere yet. (Once a BUSY came, a PENDING re-claim may be a BUSY in the making: the
 * Redis backend answers BUSY only after its poll delay.) */
static int own_answer_due(const ah_tool_call *c)
{
    return c->ph == PH_WAIT_CLAIM && c->wait_ms < 0 && !c->woken && !c->has_async &&
           !c->saw_busy;
}

/* End a wait for a key in flight elsewhere with IN_PROGRESS. Not while the ledger's own
 * answer is due (unless force: the driver cannot wait any more): a claim that is slow
 * to commit (fsync, a loaded machine, valgrind) is not someone else's, and giving up on
 * it said "in flight in another call" when no other call existed. */
static ah_status stop_waiting(ah_tool_call *c, int force)
{
    if (!c || c->ph != PH_WAIT_CLAIM || (own_answer_due(c) && !force))
        return AH_ERR_STATE;
    ah_ledger_cancel(c->ledger, c);
    size_t n = strlen(c->key);
    ah_error_set(&c->error, AH_EK_TRANSIENT, 0,
                 "idempotency key '%.80s%s' is in flight in another call; its receipt did "
                 "not arrive in time",
                 c->key, n > 80 ? "..." : "");
    finish(c, AH_TOOL_DO_FAIL, AH_TOOL_IN_PROGRESS);
    return AH_OK;
}

ah_status ah_tool_call_stop_waiting(ah_tool_call *c)
{
    return stop_waiting(c, 0);
}

int ah_tool_call_finished(const ah_tool_call *c)
{
    return c && c->ph == PH_DONE;
}

int ah_tool_call_attempts(const ah_tool_call *c)
{
    return c ? c->retry.attempts : 0;
}

int ah_tool_call_resuming(const ah_tool_call *c)
{
    return c && c->ph == PH_RUNNING ? c->resuming : 0;
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

/* A small loop driver over the same steps (curl's easy over multi): every wait is a
 * timer on the call's loop, and the loop runs meanwhile. */
typedef struct blocking {
    ah_tool_call *c;
    const ah_tool_driver *d;
    ah_loop *loop;
    ah_timer *timer;
    int ready; /* the wait's timer fired, or the ledger notified */
    void (*user_notify)(void *ud);
    void *user_notify_ud;
} blocking;

static void blocking_ready(void *ud)
{
    ((blocking *)ud)->ready = 1;
}

/* policy.notify, seen by this driver first: the wait ends, then the owner hears it. */
static void blocking_notified(void *ud)
{
    blocking *b = ud;
    b->ready = 1;
    if (b->user_notify)
        b->user_notify(b->user_notify_ud);
}

/* The loop the waits run on: the call's, unless this thread cannot step it (the driver
 * was called from inside one of its callbacks, or an application's loop drives it):
 * then the call's private one, and the wait blocks this thread as any blocking call in
 * a callback does, instead of stepping a loop re-entrantly. */
static ah_loop *wait_loop(ah_tool_call *c)
{
    ah_loop *l = call_loop(c, 1);
    if (l && !ah__loop_steppable(l)) {
        if (!c->own_loop)
            c->own_loop = ah_loop_new(NULL, NULL);
        l = c->own_loop;
    }
    return l;
}

/* Wait on the loop for ms (or a notification). 0 when no loop could be had (out of
 * memory: the call then steps at once, as if the wait were over). */
static int blocking_wait(blocking *b, int64_t ms)
{
    if (!b->timer) {
        b->loop = wait_loop(b->c);
        b->timer = b->loop ? ah_timer_new(b->loop, blocking_ready, b) : NULL;
        if (!b->timer)
            return 0;
    }
    b->ready = 0;
    ah_timer_start(b->timer, ms);
    while (!b->ready) {
        ah_status st;
        if (b->d->advance_ms) {
            int64_t next = ah_loop_next_timer_ms(b->loop);
            if (next > 0)
                b->d->advance_ms(b->d->advance_ud, next);
            st = ah_loop_run_once(b->loop, 0);
        } else {
            st = ah_loop_run_once(b->loop, -1);
        }
        if (st != AH_OK)
            break; /* the loop failed (it logged why): stop waiting */
    }
    ah_timer_stop(b->timer);
    return 1;
}

/* How often a wait for our own receipt re-checks when no answer woke it. */
enum { RECORD_RECHECK_MS = 100 };

static ah_tool_outcome blocking_run(blocking *b)
{
    ah_tool_call *c = b->c;
    const ah_tool_driver *d = b->d;
    int64_t bound =
        d->claim_wait_ms > 0 ? d->claim_wait_ms : ah_ledger_lease_ms(c->ledger);
    int64_t claim_since = -1;
    for (;;) {
        ah_tool_action a = ah_tool_step(c);
        switch (a) {
        case AH_TOOL_DO_RUN_BODY:
            d->body(d->body_ud, c);
            continue; /* an unreported attempt is handled by the next step */
        case AH_TOOL_DO_RETRY_AFTER:
            if (c->wait_ms > 0)
                blocking_wait(b, c->wait_ms);
            continue;
        case AH_TOOL_DO_WAIT_CLAIM: {
            /* Until the holder answers (notify) or the ledger's hint passes (it may be
             * another process), within the bound. */
            int64_t now = now_ms(c);
            if (claim_since < 0)
                claim_since = now;
            int64_t left = bound - (now - claim_since);
            if (left <= 0) {
                if (ah_tool_call_stop_waiting(c) == AH_OK)
                    break;
                /* Not a claim but our own receipt being recorded (the effect happened):
                 * that is waited for past the bound; the ledger's answer wakes us, the
                 * timer only re-checks. */
                left = RECORD_RECHECK_MS;
            }
            int64_t ms = c->wait_ms > 0 ? c->wait_ms : 10;
            if (!blocking_wait(b, left > 0 && ms > left ? left : ms)) {
                stop_waiting(c, 1); /* no loop to wait on */
                break;
            }
            continue;
        }
        default:
            break;
        }
        break;
    }
    return c->outcome;
}

ah_tool_outcome ah_tool_call_run(ah_tool_call *c, const ah_tool_driver *d)
{
    if (!c || !d || !d->body)
        return AH_TOOL_ERROR;
    blocking b = {c, d, NULL, NULL, 0, c->policy.notify, c->policy.notify_ud};
    c->policy.notify = blocking_notified;
    c->policy.notify_ud = &b;
    /* The driver's events include the retries, unless the policy has its own sink. */
    int own_events = !c->policy.on_event && d->on_event;
    if (own_events) {
        c->policy.on_event = d->on_event;
        c->policy.event_ud = d->event_ud;
        /* the call owns these copies; without memory the event says "" */
        if (!c->id && d->id)
            c->id = ah__strdup(d->id);
        if (!c->name && d->name)
            c->name = ah__strdup(d->name);
    }
    ah_tool_outcome o = blocking_run(&b);
    if (own_events) {
        c->policy.on_event = NULL;
        c->policy.event_ud = NULL;
    }
    c->policy.notify = b.user_notify;
    c->policy.notify_ud = b.user_notify_ud;
    ah_timer_free(b.timer);
    if (d->on_event) {
        ah_loop *l = call_loop(c, 0);
        const ah_clock *real = ah_clock_real();
        int64_t wall = l ? ah_loop_wall_ms(l) : real->wall_ms(real->ud);
        ah_event ev;
        if (c->outcome == AH_TOOL_BUDGET_EXHAUSTED && c->budget_first_refusal) {
            ah_budget_exhausted_event(
                c->budget, d->budget_name ? d->budget_name : "tool_calls", &ev);
            ev.ts_ms = wall;
            d->on_event(d->event_ud, &ev);
        }
        ah_tool_call_end_event(c, d->id, d->name, &ev);
        ev.ts_ms = wall;
        d->on_event(d->event_ud, &ev);
    }
    return o;
}
