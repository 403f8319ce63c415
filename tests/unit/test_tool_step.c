/* test_tool_step.c - one tool call's state machine and its blocking driver: what is
 * retried (transient only by default; retry_on sees every error and decides, except that
 * budget and cancelled errors never retry), max_attempts counting all attempts, the
 * backoff schedule of the shared retry machine (waits are loop timers, run here on a
 * manual clock), duplicates returning the original receipt without running the body,
 * receipts recorded before success is reported, cancellation and misuse. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "agenthost.h"
#include "agenthost/manual_clock.h"
#include "ledger_internal.h"

/* ---- a scripted body ------------------------------------------------------------- */

enum { SCRIPT_MAX = 16 };

/* Attempt i (0-based) fails with script[i] unless it is AH_EK_NONE (success); past the
 * end, the last entry repeats. */
typedef struct scripted {
    ah_error_kind script[SCRIPT_MAX];
    int n;
    int runs;
    int attempts_seen[SCRIPT_MAX];
    int silent; /* report nothing */
    long charged_total;
    ah_ledger *record_behind_our_back; /* simulate a racing recorder */
} scripted;

static ah_error make_error(ah_error_kind kind, const char *msg)
{
    ah_error e;
    ah_error_set(&e, kind, 0, "%s", msg);
    return e;
}

static void scripted_body(void *ud, ah_tool_call *c)
{
    scripted *s = ud;
    int i = s->runs < s->n ? s->runs : s->n - 1;
    if (s->runs < SCRIPT_MAX)
        s->attempts_seen[s->runs] = ah_tool_call_attempts(c);
    s->runs++;
    if (s->silent)
        return;
    if (s->n == 0 || s->script[i] == AH_EK_NONE) {
        char receipt[64];
        s->charged_total += 1500;
        snprintf(receipt, sizeof receipt, "{\"charge\":\"ch_%d\"}", s->runs);
        if (s->record_behind_our_back)
            ah_ledger_record(s->record_behind_our_back, ah_tool_call_key(c),
                             ah_tool_call_args(c), "{\"charge\":\"theirs\"}", NULL, NULL);
        assert_int_equal(ah_tool_call_body_ok(c, receipt), AH_OK);
        return;
    }
    ah_error e;
    ah_error_set(&e, s->script[i], 0, "failure %d", s->runs);
    assert_int_equal(ah_tool_call_body_failed(c, &e), AH_OK);
}

/* ---- hooks ----------------------------------------------------------------------- */

typedef struct hook_log {
    int calls;
    int answer; /* what retry_on returns */
    ah_error_kind kinds[SCRIPT_MAX];
    int verdicts[SCRIPT_MAX];
    char last_message[AH_ERROR_MESSAGE_MAX];
    /* The backoff: jitter "none" from base wait_answer, so the n-th wait is
     * wait_answer * 2^(n-1); < 0: a base of 100 ms past a 50 ms deadline. */
    int64_t wait_answer;
    ah_policy backoff;
} hook_log;

static int retry_on_hook(void *ud, const ah_error *err, int default_verdict)
{
    hook_log *h = ud;
    if (h->calls < SCRIPT_MAX) {
        h->kinds[h->calls] = err->kind;
        h->verdicts[h->calls] = default_verdict;
    }
    snprintf(h->last_message, sizeof h->last_message, "%s", err->message);
    h->calls++;
    return h->answer;
}

/* Every call's waits are timers on this loop, whose manual clock the driver's
 * advance_ms hook moves: a schedule runs in microseconds and each wait is recorded. */
static ah_manual_clock *g_clock;
static ah_loop *g_loop;

static int setup_loop(void **state)
{
    (void)state;
    g_clock = ah_manual_clock_new(1000, 1700000000000);
    g_loop = g_clock ? ah_loop_new(ah_manual_clock_get(g_clock), NULL) : NULL;
    return g_loop ? 0 : -1;
}

static int teardown_loop(void **state)
{
    (void)state;
    ah_loop_free(g_loop);
    ah_manual_clock_free(g_clock);
    return 0;
}

typedef struct sleeps {
    int n;
    int64_t total, each[SCRIPT_MAX];
} sleeps;

static void fake_sleep(void *ud, int64_t ms)
{
    sleeps *s = ud;
    if (s->n < SCRIPT_MAX)
        s->each[s->n] = ms;
    s->n++;
    s->total += ms;
    ah_manual_clock_advance(g_clock, ms);
}

static ah_tool_driver driver(scripted *body, sleeps *sl)
{
    ah_tool_driver d;
    memset(&d, 0, sizeof d);
    d.body = scripted_body;
    d.body_ud = body;
    d.advance_ms = fake_sleep;
    d.advance_ud = sl;
    return d;
}

static scripted script_of(int n, ...)
{
    scripted s;
    va_list ap;
    memset(&s, 0, sizeof s);
    va_start(ap, n);
    for (int i = 0; i < n && i < SCRIPT_MAX; i++)
        s.script[i] = (ah_error_kind)va_arg(ap, int);
    va_end(ap);
    s.n = n;
    return s;
}

static ah_tool_policy policy_of(int max_attempts, hook_log *h, int with_retry_on)
{
    ah_tool_policy p;
    ah_tool_policy_init(&p);
    p.max_attempts = max_attempts;
    p.loop = g_loop;
    if (h) {
        ah_policy_init(&h->backoff);
        h->backoff.jitter = AH_JITTER_NONE;
        h->backoff.base_ms = h->wait_answer >= 0 ? h->wait_answer : 100;
        h->backoff.cap_ms = 1000000;
        h->backoff.deadline_ms = h->wait_answer >= 0 ? 0 : 50;
        p.backoff = &h->backoff;
        if (with_retry_on) {
            p.retry_on = retry_on_hook;
            p.retry_on_ud = h;
        }
    }
    return p;
}

/* ---- the step function, driven by hand -------------------------------------------- */

static void manual_steps_success(void **state)
{
    (void)state;
    ah_ledger *l = ah_ledger_new_memory();
    ah_tool_call *c = NULL;
    ah_tool_call_new(NULL, l, NULL, "A-1", "{\"amount\":1500}", &c, NULL, 0);
    assert_non_null(c);
    assert_string_equal(ah_tool_call_key(c), "A-1");
    assert_string_equal(ah_tool_call_args(c), "{\"amount\":1500}");
    assert_int_equal(ah_tool_step(c), AH_TOOL_DO_RUN_BODY);
    assert_int_equal(ah_tool_call_attempts(c), 1);
    assert_false(ah_tool_call_finished(c));
    assert_null(ah_tool_call_receipt(c));
    assert_int_equal(ah_tool_call_body_ok(c, "{\"id\":\"ch_1\"}"), AH_OK);
    /* Reported once only. */
    assert_int_equal(ah_tool_call_body_ok(c, "again"), AH_ERR_STATE);
    assert_int_equal(ah_ledger_count(l), 0); /* recorded by the next step, not before */
    assert_int_equal(ah_tool_step(c), AH_TOOL_DO_SUCCEED);
    assert_int_equal(ah_ledger_count(l), 1);
    assert_true(ah_tool_call_finished(c));
    assert_int_equal(ah_tool_call_outcome(c), AH_TOOL_OK);
    assert_string_equal(ah_tool_call_receipt(c), "{\"id\":\"ch_1\"}");
    assert_int_equal(ah_tool_call_seq(c), 1);
    assert_int_equal(ah_tool_call_duplicate(c), 0);
    assert_int_equal(ah_tool_call_error(c)->kind, AH_EK_NONE);
    /* A finished call keeps answering the same. */
    assert_int_equal(ah_tool_step(c), AH_TOOL_DO_SUCCEED);
    assert_int_equal(ah_tool_call_attempts(c), 1);
    assert_int_equal(ah_tool_call_cancel(c), AH_ERR_STATE);
    ah_tool_call_free(c);
    ah_ledger_free(l);
}

static void manual_steps_retry_then_cancel(void **state)
{
    (void)state;
    hook_log h;
    memset(&h, 0, sizeof h);
    h.wait_answer = 250;
    ah_tool_policy p = policy_of(3, &h, 0);
    ah_error e = make_error(AH_EK_TRANSIENT, "503 upstream");
    ah_tool_call *c = NULL;
    ah_tool_call_new(&p, NULL, NULL, "k", "{}", &c, NULL, 0);
    assert_int_equal(ah_tool_step(c), AH_TOOL_DO_RUN_BODY);
    assert_int_equal(ah_tool_call_cancel(c), AH_ERR_STATE); /* a body is running */
    assert_int_equal(ah_tool_call_body_failed(c, &e), AH_OK);
    assert_int_equal(ah_tool_step(c), AH_TOOL_DO_RETRY_AFTER);
    assert_int_equal(ah_tool_call_wait_ms(c), 250);
    assert_int_equal(ah_tool_call_body_ok(c, "x"), AH_ERR_STATE); /* nothing running */
    assert_int_equal(ah_tool_call_cancel(c), AH_OK);
    assert_int_equal(ah_tool_step(c), AH_TOOL_DO_FAIL);
    assert_int_equal(ah_tool_call_outcome(c), AH_TOOL_ERROR);
    assert_int_equal(ah_tool_call_error(c)->kind, AH_EK_CANCELLED);
    assert_int_equal(ah_tool_call_attempts(c), 1);
    ah_tool_call_free(c);
}

static void invalid_policy_and_names(void **state)
{
    (void)state;
    ah_tool_policy p;
    ah_tool_policy_init(&p);
    assert_int_equal(p.max_attempts, AH_TOOL_DEFAULT_MAX_ATTEMPTS);
    p.max_attempts = 0;
    ah_tool_call *none = (ah_tool_call *)&none;
    char err[128];
    assert_int_equal(ah_tool_call_new(&p, NULL, NULL, "k", "{}", &none, err, sizeof err),
                     AH_ERR_INVALID);
    assert_null(none);
    assert_non_null(strstr(err, "max_attempts"));
    assert_string_equal(ah_tool_action_name(AH_TOOL_DO_RUN_BODY), "run_body");
    assert_string_equal(ah_tool_action_name(AH_TOOL_DO_RETURN_BUDGET_EXHAUSTED),
                        "return_budget_exhausted");
    assert_string_equal(ah_tool_action_name((ah_tool_action)99), "unknown");
    assert_int_equal(ah_tool_step(NULL), AH_TOOL_DO_FAIL);
    assert_int_equal(ah_tool_call_run(NULL, NULL), AH_TOOL_ERROR);
    ah_tool_call_free(NULL);
}

/* ---- retry rules through the blocking driver ------------------------------------- */

static void transient_twice_then_success_takes_three(void **state)
{
    (void)state;
    hook_log h;
    sleeps sl;
    memset(&h, 0, sizeof h);
    memset(&sl, 0, sizeof sl);
    h.wait_answer = 100;
    scripted s = script_of(3, AH_EK_TRANSIENT, AH_EK_TRANSIENT, AH_EK_NONE);
    ah_tool_policy p = policy_of(3, &h, 0);
    ah_tool_driver d = driver(&s, &sl);
    ah_tool_call *c = NULL;
    ah_tool_call_new(&p, NULL, NULL, "k", "{}", &c, NULL, 0);
    assert_int_equal(ah_tool_call_run(c, &d), AH_TOOL_OK);
    assert_int_equal(ah_tool_call_attempts(c), 3);
    assert_int_equal(s.runs, 3);
    for (int i = 0; i < 3; i++) /* the body saw attempts 1, 2, 3 */
        assert_int_equal(s.attempts_seen[i], i + 1);
    /* The schedule gave a wait after failures 1 and 2 (base * 2^(n-1)), each waited for
     * on the loop. */
    assert_int_equal(sl.n, 2);
    assert_int_equal(sl.each[0], 100);
    assert_int_equal(sl.each[1], 200);
    assert_string_equal(ah_tool_call_receipt(c), "{\"charge\":\"ch_3\"}");
    ah_tool_call_free(c);
}

typedef struct retry_events {
    int n, ends;
    char id[32], name[32];
    int failed[SCRIPT_MAX], max[SCRIPT_MAX];
    int64_t wait[SCRIPT_MAX], at[SCRIPT_MAX];
    ah_error_kind kind[SCRIPT_MAX];
    int sleeps_before[SCRIPT_MAX];
    sleeps *sl;
} retry_events;

static void on_tool_event(void *ud, const ah_event *ev)
{
    retry_events *r = ud;
    if (ev->type == AH_EV_TOOL_CALL_END) {
        r->ends++;
        return;
    }
    assert_int_equal(ev->type, AH_EV_TOOL_RETRY);
    assert_true(r->n < SCRIPT_MAX);
    snprintf(r->id, sizeof r->id, "%s", ev->u.tool_retry.id);
    snprintf(r->name, sizeof r->name, "%s", ev->u.tool_retry.name);
    r->failed[r->n] = ev->u.tool_retry.failed_attempt;
    r->max[r->n] = ev->u.tool_retry.max_attempts;
    r->wait[r->n] = ev->u.tool_retry.wait_ms;
    r->kind[r->n] = ev->u.tool_retry.error->kind;
    r->at[r->n] = ev->ts_ms;
    r->sleeps_before[r->n] = r->sl->n;
    r->n++;
}

/* A tool retry is an event: tool_retry with the call's id and name, the attempt that
 * failed, the bound, the wait and the error, emitted before the wait starts. */
static void each_retry_is_a_tool_retry_event(void **state)
{
    (void)state;
    hook_log h;
    sleeps sl;
    memset(&h, 0, sizeof h);
    memset(&sl, 0, sizeof sl);
    h.wait_answer = 100;
    scripted s = script_of(3, AH_EK_TRANSIENT, AH_EK_TRANSIENT, AH_EK_NONE);
    ah_tool_policy p = policy_of(3, &h, 0);
    ah_tool_driver d = driver(&s, &sl);
    retry_events r;
    memset(&r, 0, sizeof r);
    r.sl = &sl;
    d.on_event = on_tool_event;
    d.event_ud = &r;
    d.id = "toolu_1";
    d.name = "charge";
    ah_tool_call *c = NULL;
    ah_tool_call_new(&p, NULL, NULL, "k", "{}", &c, NULL, 0);
    assert_int_equal(ah_tool_call_run(c, &d), AH_TOOL_OK);
    assert_int_equal(r.n, 2);
    assert_int_equal(r.ends, 1);
    assert_string_equal(r.id, "toolu_1");
    assert_string_equal(r.name, "charge");
    for (int i = 0; i < 2; i++) {
        assert_int_equal(r.failed[i], i + 1);
        assert_int_equal(r.max[i], 3);
        assert_int_equal(r.wait[i], 100 << i);
        assert_int_equal(r.kind[i], AH_EK_TRANSIENT);
        assert_int_equal(r.sleeps_before[i], i); /* before its wait */
    }
    assert_int_equal(r.at[1] - r.at[0], 100); /* the loop's wall time moved by the wait */
    ah_tool_call_free(c);

    /* The policy's own sink, without the blocking driver's: stepped by hand. */
    memset(&r, 0, sizeof r);
    r.sl = &sl;
    sl.n = 0;
    p.on_event = on_tool_event;
    p.event_ud = &r;
    p.id = "call_9";
    p.name = "add";
    ah_tool_call_new(&p, NULL, NULL, "k2", "{}", &c, NULL, 0);
    assert_int_equal(ah_tool_step(c), AH_TOOL_DO_RUN_BODY);
    ah_error e = make_error(AH_EK_TRANSIENT, "flaky");
    ah_tool_call_body_failed(c, &e);
    assert_int_equal(ah_tool_step(c), AH_TOOL_DO_RETRY_AFTER);
    assert_int_equal(r.n, 1);
    assert_string_equal(r.id, "call_9");
    assert_string_equal(r.name, "add");
    assert_int_equal(r.wait[0], ah_tool_call_wait_ms(c));
    ah_tool_call_free(c);
}

static void transient_forever_stops_at_max_attempts(void **state)
{
    (void)state;
    sleeps sl;
    memset(&sl, 0, sizeof sl);
    scripted s = script_of(1, AH_EK_TRANSIENT);
    ah_tool_policy p = policy_of(3, NULL, 0);
    ah_tool_driver d = driver(&s, &sl);
    ah_tool_call *c = NULL;
    ah_tool_call_new(&p, NULL, NULL, "k", "{}", &c, NULL, 0);
    assert_int_equal(ah_tool_call_run(c, &d), AH_TOOL_ERROR);
    assert_int_equal(ah_tool_call_attempts(c), 3);
    assert_int_equal(s.runs, 3);
    assert_int_equal(ah_tool_call_error(c)->kind, AH_EK_TRANSIENT);
    assert_string_equal(ah_tool_call_error(c)->message, "failure 3"); /* the last one */
    assert_null(ah_tool_call_receipt(c));
    assert_int_equal(sl.n, 0); /* no backoff: retried at once, nothing waited */
    ah_tool_call_free(c);
}

static void permanent_runs_once_by_default(void **state)
{
    (void)state;
    sleeps sl;
    memset(&sl, 0, sizeof sl);
    scripted s = script_of(1, AH_EK_PERMANENT);
    ah_tool_policy p = policy_of(5, NULL, 0);
    ah_tool_driver d = driver(&s, &sl);
    ah_tool_call *c = NULL;
    ah_tool_call_new(&p, NULL, NULL, "k", "{}", &c, NULL, 0);
    assert_int_equal(ah_tool_call_run(c, &d), AH_TOOL_ERROR);
    assert_int_equal(s.runs, 1);
    assert_int_equal(ah_tool_call_error(c)->kind, AH_EK_PERMANENT);
    ah_tool_call_free(c);
}

static void unknown_kind_is_not_retried_by_default(void **state)
{
    (void)state;
    sleeps sl;
    memset(&sl, 0, sizeof sl);
    /* An HTTP 503 is retryable for an LLM request, but a tool body's errors are
     * retried only when they say transient. */
    scripted s = script_of(1, AH_EK_HTTP);
    ah_tool_policy p = policy_of(5, NULL, 0);
    ah_tool_driver d = driver(&s, &sl);
    ah_tool_call *c = NULL;
    ah_tool_call_new(&p, NULL, NULL, "k", "{}", &c, NULL, 0);
    assert_int_equal(ah_tool_call_run(c, &d), AH_TOOL_ERROR);
    assert_int_equal(s.runs, 1);
    assert_int_equal(ah_tool_call_error(c)->kind, AH_EK_HTTP);
    ah_tool_call_free(c);
}

/* A retry-everything retry_on makes the same permanent failure run max_attempts times;
 * it saw every error, with the default verdict "no". */
static void permanent_under_retry_everything_takes_max_attempts(void **state)
{
    (void)state;
    hook_log h;
    sleeps sl;
    memset(&h, 0, sizeof h);
    memset(&sl, 0, sizeof sl);
    h.answer = 1;
    scripted s = script_of(1, AH_EK_PERMANENT);
    ah_tool_policy p = policy_of(4, &h, 1);
    ah_tool_driver d = driver(&s, &sl);
    ah_tool_call *c = NULL;
    ah_tool_call_new(&p, NULL, NULL, "k", "{}", &c, NULL, 0);
    assert_int_equal(ah_tool_call_run(c, &d), AH_TOOL_ERROR);
    assert_int_equal(s.runs, 4);
    assert_int_equal(ah_tool_call_attempts(c), 4);
    assert_int_equal(h.calls, 4);
    for (int i = 0; i < 4; i++) {
        assert_int_equal(h.kinds[i], AH_EK_PERMANENT);
        assert_int_equal(h.verdicts[i], 0);
    }
    assert_string_equal(h.last_message, "failure 4");
    ah_tool_call_free(c);
}

static void retry_on_can_refuse_a_transient(void **state)
{
    (void)state;
    hook_log h;
    sleeps sl;
    memset(&h, 0, sizeof h);
    memset(&sl, 0, sizeof sl);
    h.answer = 0;
    scripted s = script_of(2, AH_EK_TRANSIENT, AH_EK_NONE);
    ah_tool_policy p = policy_of(4, &h, 1);
    ah_tool_driver d = driver(&s, &sl);
    ah_tool_call *c = NULL;
    ah_tool_call_new(&p, NULL, NULL, "k", "{}", &c, NULL, 0);
    assert_int_equal(ah_tool_call_run(c, &d), AH_TOOL_ERROR);
    assert_int_equal(s.runs, 1);
    assert_int_equal(h.calls, 1);
    assert_int_equal(h.verdicts[0], 1);
    ah_tool_call_free(c);
}

/* A hook that failed (-1, or any other value) leaves the default in charge. */
static void failing_retry_on_falls_back_to_default(void **state)
{
    (void)state;
    hook_log h;
    sleeps sl;
    memset(&h, 0, sizeof h);
    memset(&sl, 0, sizeof sl);
    h.answer = -1;
    scripted s = script_of(3, AH_EK_TRANSIENT, AH_EK_PERMANENT, AH_EK_NONE);
    ah_tool_policy p = policy_of(4, &h, 1);
    ah_tool_driver d = driver(&s, &sl);
    ah_tool_call *c = NULL;
    ah_tool_call_new(&p, NULL, NULL, "k", "{}", &c, NULL, 0);
    assert_int_equal(ah_tool_call_run(c, &d), AH_TOOL_ERROR);
    assert_int_equal(s.runs, 2); /* transient retried, permanent not */
    assert_int_equal(ah_tool_call_error(c)->kind, AH_EK_PERMANENT);
    ah_tool_call_free(c);

    h.answer = 7;
    memset(&s, 0, sizeof s);
    s = script_of(2, AH_EK_TRANSIENT, AH_EK_NONE);
    ah_tool_call_new(&p, NULL, NULL, "k", "{}", &c, NULL, 0);
    assert_int_equal(ah_tool_call_run(c, &d), AH_TOOL_OK);
    assert_int_equal(s.runs, 2);
    ah_tool_call_free(c);
}

/* A budget error raised by the body is never retried, whatever retry_on says (it still
 * sees it); a cancelled one is not even offered to the hook. */
static void budget_and_cancelled_errors_never_retry(void **state)
{
    (void)state;
    hook_log h;
    sleeps sl;
    memset(&h, 0, sizeof h);
    memset(&sl, 0, sizeof sl);
    h.answer = 1;
    scripted s = script_of(1, AH_EK_BUDGET);
    ah_tool_policy p = policy_of(5, &h, 1);
    ah_tool_driver d = driver(&s, &sl);
    ah_tool_call *c = NULL;
    ah_tool_call_new(&p, NULL, NULL, "k", "{}", &c, NULL, 0);
    assert_int_equal(ah_tool_call_run(c, &d), AH_TOOL_ERROR);
    assert_int_equal(s.runs, 1);
    assert_int_equal(h.calls, 1);
    assert_int_equal(h.kinds[0], AH_EK_BUDGET);
    assert_int_equal(sl.n, 0);
    assert_int_equal(ah_tool_call_error(c)->kind, AH_EK_BUDGET);
    ah_tool_call_free(c);

    memset(&h, 0, sizeof h);
    h.answer = 1;
    s = script_of(1, AH_EK_CANCELLED);
    ah_tool_call_new(&p, NULL, NULL, "k", "{}", &c, NULL, 0);
    assert_int_equal(ah_tool_call_run(c, &d), AH_TOOL_ERROR);
    assert_int_equal(s.runs, 1);
    assert_int_equal(h.calls, 0);
    assert_int_equal(ah_tool_call_error(c)->kind, AH_EK_CANCELLED);
    ah_tool_call_free(c);
}

/* The budget is checked before each attempt, and a retry the budget cannot grant is
 * not waited for. */
static void budget_checked_before_each_attempt(void **state)
{
    (void)state;
    hook_log h;
    sleeps sl;
    memset(&h, 0, sizeof h);
    memset(&sl, 0, sizeof sl);
    h.wait_answer = 1000;
    scripted s = script_of(1, AH_EK_TRANSIENT);
    ah_tool_policy p = policy_of(5, &h, 0);
    ah_tool_driver d = driver(&s, &sl);
    ah_budget *b = NULL;
    ah_budget_new(2, &b, NULL, 0);
    ah_tool_call *c = NULL;
    ah_tool_call_new(&p, NULL, b, "k", "{}", &c, NULL, 0);
    ah_budget_free(b); /* the call holds its own reference */
    assert_int_equal(ah_tool_call_run(c, &d), AH_TOOL_BUDGET_EXHAUSTED);
    assert_int_equal(s.runs, 2);
    assert_int_equal(ah_tool_call_attempts(c), 2);
    assert_int_equal(sl.n, 1); /* after the first failure only */
    assert_int_equal(sl.each[0], 1000);
    assert_int_equal(ah_tool_call_error(c)->kind, AH_EK_BUDGET);
    assert_non_null(strstr(ah_tool_call_error(c)->message, "2 of 2"));
    assert_int_equal(ah_tool_call_budget_first_refusal(c), 1);
    ah_tool_call_free(c);
}

/* A wait that would end past the deadline ends the call now, with the body's error. */
static void backoff_past_the_deadline_gives_up(void **state)
{
    (void)state;
    hook_log h;
    sleeps sl;
    memset(&h, 0, sizeof h);
    memset(&sl, 0, sizeof sl);
    h.wait_answer = -1; /* a 100 ms wait, a 50 ms deadline */
    scripted s = script_of(2, AH_EK_TRANSIENT, AH_EK_NONE);
    ah_tool_policy p = policy_of(5, &h, 0);
    ah_tool_driver d = driver(&s, &sl);
    ah_tool_call *c = NULL;
    ah_tool_call_new(&p, NULL, NULL, "k", "{}", &c, NULL, 0);
    assert_int_equal(ah_tool_call_run(c, &d), AH_TOOL_ERROR);
    assert_int_equal(s.runs, 1);
    assert_int_equal(sl.n, 0);
    assert_int_equal(ah_tool_call_error(c)->kind, AH_EK_TRANSIENT);
    ah_tool_call_free(c);
}

static void silent_body_is_a_permanent_failure(void **state)
{
    (void)state;
    sleeps sl;
    memset(&sl, 0, sizeof sl);
    scripted s = script_of(1, AH_EK_NONE);
    s.silent = 1;
    ah_tool_driver d = driver(&s, &sl);
    ah_tool_call *c = NULL;
    ah_tool_call_new(NULL, NULL, NULL, "k", "{}", &c, NULL, 0);
    assert_int_equal(ah_tool_call_run(c, &d), AH_TOOL_ERROR);
    assert_int_equal(s.runs, 1);
    assert_int_equal(ah_tool_call_error(c)->kind, AH_EK_PERMANENT);
    assert_non_null(strstr(ah_tool_call_error(c)->message, "no result"));
    ah_tool_call_free(c);
}

/* ---- idempotency ------------------------------------------------------------------ */

/* The same call delivered twice: one body execution, one ledger row, one charge; the
 * second delivery returns the original receipt and seq marked duplicate. */
static void duplicate_delivery_runs_once(void **state)
{
    (void)state;
    sleeps sl;
    memset(&sl, 0, sizeof sl);
    scripted s = script_of(1, AH_EK_NONE);
    ah_tool_driver d = driver(&s, &sl);
    ah_ledger *l = ah_ledger_new_memory();
    ah_budget *b = NULL;
    ah_budget_new(10, &b, NULL, 0);
    int64_t seqs[2];
    char receipts[2][64];
    assert_int_equal(ah_ledger_record(l, "earlier", "{}", "\"e\"", NULL, NULL), AH_OK);
    for (int i = 0; i < 2; i++) {
        ah_tool_call *c = NULL;
        ah_tool_call_new(NULL, l, b, "A-1", "{\"amount\":1500}", &c, NULL, 0);
        assert_int_equal(ah_tool_call_run(c, &d), AH_TOOL_OK);
        assert_int_equal(ah_tool_call_duplicate(c), i == 1);
        assert_int_equal(ah_tool_call_attempts(c), i == 0 ? 1 : 0);
        seqs[i] = ah_tool_call_seq(c);
        snprintf(receipts[i], sizeof receipts[i], "%s", ah_tool_call_receipt(c));
        ah_tool_call_free(c);
    }
    assert_int_equal(s.runs, 1);
    assert_int_equal(s.charged_total, 1500);
    assert_int_equal(ah_ledger_count(l), 2);
    assert_int_equal(seqs[0], 2);
    assert_int_equal(seqs[1], 2);
    assert_string_equal(receipts[0], receipts[1]);
    assert_int_equal(ah_budget_used(b), 1); /* a duplicate costs no budget */
    ah_budget_free(b);
    ah_ledger_free(l);
}

/* A duplicate returns even when the budget is spent: nothing would run anyway. */
static void duplicate_needs_no_budget(void **state)
{
    (void)state;
    ah_ledger *l = ah_ledger_new_memory();
    ah_budget *b = NULL;
    ah_budget_new(0, &b, NULL, 0);
    assert_int_equal(ah_ledger_record(l, "A-1", "{}", "\"orig\"", NULL, NULL), AH_OK);
    ah_tool_call *c = NULL;
    ah_tool_call_new(NULL, l, b, "A-1", "{}", &c, NULL, 0);
    assert_int_equal(ah_tool_step(c), AH_TOOL_DO_RETURN_DUPLICATE);
    assert_string_equal(ah_tool_call_receipt(c), "\"orig\"");
    assert_int_equal(ah_tool_call_seq(c), 1);
    assert_int_equal(ah_budget_refused(b), 0);
    ah_tool_call_free(c);
    ah_budget_free(b);
    ah_ledger_free(l);
}

static void same_key_other_args_fails_without_running(void **state)
{
    (void)state;
    sleeps sl;
    memset(&sl, 0, sizeof sl);
    scripted s = script_of(1, AH_EK_NONE);
    ah_tool_driver d = driver(&s, &sl);
    ah_ledger *l = ah_ledger_new_memory();
    ah_budget *b = NULL;
    ah_budget_new(5, &b, NULL, 0);
    assert_int_equal(ah_ledger_record(l, "A-1", "{\"amount\":1500}", "\"r\"", NULL, NULL),
                     AH_OK);
    ah_tool_call *c = NULL;
    ah_tool_call_new(NULL, l, b, "A-1", "{\"amount\":9999}", &c, NULL, 0);
    assert_int_equal(ah_tool_call_run(c, &d), AH_TOOL_ERROR);
    assert_int_equal(s.runs, 0);
    assert_int_equal(ah_budget_used(b), 0);
    assert_int_equal(ah_tool_call_error(c)->kind, AH_EK_IDEMPOTENCY_MISMATCH);
    assert_non_null(strstr(ah_tool_call_error(c)->message,
                           "idempotency key 'A-1' reused with different arguments"));
    ah_tool_call_free(c);
    ah_budget_free(b);
    ah_ledger_free(l);
}

/* Another recorder wins the key while our body runs: we report its entry. */
static void racing_record_returns_the_winner(void **state)
{
    (void)state;
    sleeps sl;
    memset(&sl, 0, sizeof sl);
    scripted s = script_of(1, AH_EK_NONE);
    ah_tool_driver d = driver(&s, &sl);
    ah_ledger *l = ah_ledger_new_memory();
    s.record_behind_our_back = l;
    ah_tool_call *c = NULL;
    ah_tool_call_new(NULL, l, NULL, "A-1", "{}", &c, NULL, 0);
    assert_int_equal(ah_tool_call_run(c, &d), AH_TOOL_OK);
    assert_int_equal(s.runs, 1);
    assert_int_equal(ah_tool_call_duplicate(c), 1);
    assert_string_equal(ah_tool_call_receipt(c), "{\"charge\":\"theirs\"}");
    assert_int_equal(ah_tool_call_seq(c), 1);
    assert_int_equal(ah_ledger_count(l), 1);
    ah_tool_call_free(c);
    ah_ledger_free(l);
}

/* Two calls with one key at once: the second waits for the first's claim and gets its
 * receipt as a duplicate; the body runs once. A holder that fails releases the key and
 * the waiter runs the body itself. Stepped by hand, as a loop driver would. */
static void notified(void *ud)
{
    (*(int *)ud)++;
}

static void concurrent_same_key_runs_once(void **state)
{
    (void)state;
    ah_ledger *l = ah_ledger_new_memory();
    int notes = 0;
    ah_tool_policy p;
    ah_tool_policy_init(&p);
    p.max_attempts = 1;
    p.notify = notified;
    p.notify_ud = &notes;
    ah_tool_call *a = NULL;
    ah_tool_call_new(&p, l, NULL, "K", "{}", &a, NULL, 0);
    ah_tool_call *b = NULL;
    ah_tool_call_new(&p, l, NULL, "K", "{}", &b, NULL, 0);
    assert_int_equal(ah_tool_step(a), AH_TOOL_DO_RUN_BODY);
    assert_int_equal(ah_tool_step(b), AH_TOOL_DO_WAIT_CLAIM);
    assert_true(ah_tool_call_wait_ms(b) > 0);
    assert_int_equal(ah_tool_step(b), AH_TOOL_DO_WAIT_CLAIM); /* still in flight */
    assert_int_equal(ah_tool_call_body_ok(a, "\"once\""), AH_OK);
    assert_int_equal(notes, 0);
    assert_int_equal(ah_tool_step(a), AH_TOOL_DO_SUCCEED);
    assert_int_equal(notes, 1); /* b's driver was told to step */
    assert_int_equal(ah_tool_step(b), AH_TOOL_DO_RETURN_DUPLICATE);
    assert_int_equal(ah_tool_call_duplicate(b), 1);
    assert_int_equal(ah_tool_call_attempts(b), 0);
    assert_string_equal(ah_tool_call_receipt(b), "\"once\"");
    assert_int_equal(ah_tool_call_seq(b), ah_tool_call_seq(a));
    ah_tool_call_free(a);
    ah_tool_call_free(b);

    /* The holder fails: the waiter is woken and runs the body. */
    ah_tool_call_new(&p, l, NULL, "K2", "{}", &a, NULL, 0);
    ah_tool_call_new(&p, l, NULL, "K2", "{}", &b, NULL, 0);
    assert_int_equal(ah_tool_step(a), AH_TOOL_DO_RUN_BODY);
    assert_int_equal(ah_tool_step(b), AH_TOOL_DO_WAIT_CLAIM);
    ah_error e = make_error(AH_EK_PERMANENT, "declined");
    ah_tool_call_body_failed(a, &e);
    assert_int_equal(ah_tool_step(a), AH_TOOL_DO_FAIL);
    assert_int_equal(notes, 2);
    assert_int_equal(ah_tool_step(b), AH_TOOL_DO_RUN_BODY);
    ah_tool_call_body_ok(b, "\"second\"");
    assert_int_equal(ah_tool_step(b), AH_TOOL_DO_SUCCEED);
    assert_int_equal(ah_tool_call_duplicate(b), 0);
    ah_tool_call_free(a);
    ah_tool_call_free(b);

    /* A waiter that gives up: outcome in_progress, nothing run; a holder freed
     * mid-body (its coroutine dropped) releases the key. */
    ah_tool_call_new(&p, l, NULL, "K3", "{}", &a, NULL, 0);
    ah_tool_call_new(&p, l, NULL, "K3", "{}", &b, NULL, 0);
    assert_int_equal(ah_tool_step(a), AH_TOOL_DO_RUN_BODY);
    assert_int_equal(ah_tool_step(b), AH_TOOL_DO_WAIT_CLAIM);
    assert_int_equal(ah_tool_call_stop_waiting(a), AH_ERR_STATE);
    assert_int_equal(ah_tool_call_stop_waiting(b), AH_OK);
    assert_int_equal(ah_tool_call_outcome(b), AH_TOOL_IN_PROGRESS);
    assert_string_equal(ah_tool_outcome_name(AH_TOOL_IN_PROGRESS), "in_progress");
    assert_non_null(strstr(ah_tool_call_error(b)->message, "'K3' is in flight"));
    ah_tool_call_free(b);
    assert_int_equal(ah_ledger_claims(l), 1);
    ah_tool_call_free(a);
    assert_int_equal(ah_ledger_claims(l), 0);
    assert_int_equal(ah_ledger_count(l), 2);
    ah_ledger_free(l);
}

/* The blocking driver polls a key held elsewhere and gives up after claim_wait_ms. */
static void blocking_driver_gives_up_with_in_progress(void **state)
{
    (void)state;
    sleeps sl;
    memset(&sl, 0, sizeof sl);
    scripted s = script_of(1, AH_EK_NONE);
    ah_tool_driver d = driver(&s, &sl);
    d.claim_wait_ms = 50;
    ah_ledger *l = ah_ledger_new_memory();
    ah_ledger_result r;
    assert_int_equal(ah_ledger_claim(l, "K", "{}", &r, NULL, NULL), AH_LEDGER_OWNED);
    ah_tool_policy p = policy_of(4, NULL, 0);
    ah_tool_call *c = NULL;
    ah_tool_call_new(&p, l, NULL, "K", "{}", &c, NULL, 0);
    assert_int_equal(ah_tool_call_run(c, &d), AH_TOOL_IN_PROGRESS);
    assert_int_equal(s.runs, 0);
    assert_true(sl.n >= 1);
    assert_int_equal(sl.total, 50); /* waited on loop timers exactly up to the bound */
    ah_tool_call_free(c);
    ah_ledger_free(l);
}

/* Without a key there is nothing to deduplicate on: each delivery runs. */
static void no_key_means_no_idempotency(void **state)
{
    (void)state;
    sleeps sl;
    memset(&sl, 0, sizeof sl);
    scripted s = script_of(1, AH_EK_NONE);
    ah_tool_driver d = driver(&s, &sl);
    ah_ledger *l = ah_ledger_new_memory();
    for (int i = 0; i < 2; i++) {
        ah_tool_call *c = NULL;
        ah_tool_call_new(NULL, l, NULL, NULL, "{}", &c, NULL, 0);
        assert_null(ah_tool_call_key(c));
        assert_int_equal(ah_tool_call_run(c, &d), AH_TOOL_OK);
        assert_int_equal(ah_tool_call_seq(c), 0);
        ah_tool_call_free(c);
    }
    assert_int_equal(s.runs, 2);
    assert_int_equal(ah_ledger_count(l), 0);
    ah_ledger_free(l);
}

/* ---- events ------------------------------------------------------------------------ */

typedef struct seen_events {
    int n;
    ah_event_type types[8];
    char id[16], name[16];
    ah_tool_outcome outcome;
    int duplicate, attempts;
} seen_events;

/* The failure rule of a body that reaches a server (docs/mcp.md): an outcome_unknown
 * error is never repeated unless the tool is safe to repeat, and the call then says the
 * outcome is unknown; a safe tool is repeated like a transient failure. */
static void outcome_unknown_repeats_only_when_safe(void **state)
{
    (void)state;
    sleeps sl;
    memset(&sl, 0, sizeof sl);
    scripted s = script_of(2, AH_EK_OUTCOME_UNKNOWN, AH_EK_NONE);
    ah_tool_policy p = policy_of(4, NULL, 0);
    ah_tool_driver d = driver(&s, &sl);
    ah_tool_call *c = NULL;
    ah_tool_call_new(&p, NULL, NULL, "k", "{}", &c, NULL, 0);
    assert_int_equal(ah_tool_call_run(c, &d), AH_TOOL_OUTCOME_UNKNOWN);
    assert_int_equal(s.runs, 1);
    assert_int_equal(ah_tool_call_error(c)->kind, AH_EK_OUTCOME_UNKNOWN);
    ah_tool_call_free(c);

    s = script_of(2, AH_EK_OUTCOME_UNKNOWN, AH_EK_NONE);
    p.repeat_unknown = 1;
    ah_tool_call_new(&p, NULL, NULL, "k", "{}", &c, NULL, 0);
    assert_int_equal(ah_tool_call_run(c, &d), AH_TOOL_OK);
    assert_int_equal(s.runs, 2);
    ah_tool_call_free(c);
}

/* A resumable cut (kind stream, policy.resumes): the next attempt is a resume that takes
 * no budget; once resumes run out the outcome is unknown, never a silent repeat. */
typedef struct resumer {
    int runs, resumes, fail_until;
} resumer;

static void resuming_body(void *ud, ah_tool_call *c)
{
    resumer *r = ud;
    r->runs++;
    r->resumes += ah_tool_call_resuming(c);
    assert_int_equal(ah_tool_call_resuming(c), r->runs > 1);
    if (r->runs <= r->fail_until) {
        ah_error e;
        ah_error_set(&e, AH_EK_STREAM, 0, "cut after event 3");
        ah_tool_call_body_failed(c, &e);
    } else {
        ah_tool_call_body_ok(c, "\"done\"");
    }
}

static void stream_cut_is_resumed_without_budget(void **state)
{
    (void)state;
    sleeps sl;
    memset(&sl, 0, sizeof sl);
    resumer r = {0, 0, 2};
    ah_tool_policy p = policy_of(4, NULL, 0);
    p.resumes = 1;
    ah_tool_driver d = driver(NULL, &sl);
    d.body = resuming_body;
    d.body_ud = &r;
    ah_budget *b = NULL;
    ah_budget_new(1, &b, NULL, 0);
    ah_tool_call *c = NULL;
    ah_tool_call_new(&p, NULL, b, "k", "{}", &c, NULL, 0);
    assert_int_equal(ah_tool_call_run(c, &d), AH_TOOL_OK);
    assert_int_equal(r.runs, 3);
    assert_int_equal(r.resumes, 2);
    assert_int_equal(ah_budget_used(b), 1); /* one execution, two resumes */
    ah_tool_call_free(c);

    ah_budget_free(b);
    ah_budget_new(5, &b, NULL, 0);
    r = (resumer){0, 0, 99};
    ah_tool_call_new(&p, NULL, b, "k3", "{}", &c, NULL, 0);
    assert_int_equal(ah_tool_call_run(c, &d), AH_TOOL_OUTCOME_UNKNOWN);
    assert_int_equal(r.runs, 4); /* max_attempts bounds the resumes */
    assert_int_equal(ah_budget_used(b), 1);
    assert_int_equal(ah_tool_call_error(c)->kind, AH_EK_OUTCOME_UNKNOWN);
    ah_tool_call_free(c);
    ah_budget_free(b);
}

static void on_event(void *ud, const ah_event *ev)
{
    seen_events *se = ud;
    if (se->n < 8)
        se->types[se->n] = ev->type;
    se->n++;
    if (ev->type == AH_EV_TOOL_CALL_END) {
        snprintf(se->id, sizeof se->id, "%s", ev->u.tool_call_end.id);
        snprintf(se->name, sizeof se->name, "%s", ev->u.tool_call_end.name);
        se->outcome = ev->u.tool_call_end.outcome;
        se->duplicate = ev->u.tool_call_end.duplicate;
        se->attempts = ev->u.tool_call_end.attempts;
    }
}

static void tool_call_end_event_fields(void **state)
{
    (void)state;
    sleeps sl;
    seen_events se;
    memset(&sl, 0, sizeof sl);
    memset(&se, 0, sizeof se);
    scripted s = script_of(2, AH_EK_TRANSIENT, AH_EK_NONE);
    ah_tool_driver d = driver(&s, &sl);
    d.on_event = on_event;
    d.event_ud = &se;
    d.id = "toolu_1";
    d.name = "charge";
    ah_ledger *l = ah_ledger_new_memory();
    ah_tool_call *c = NULL;
    ah_tool_call_new(NULL, l, NULL, "A-1", "{}", &c, NULL, 0);
    assert_int_equal(ah_tool_call_run(c, &d), AH_TOOL_OK);
    ah_tool_call_free(c);
    assert_int_equal(se.n, 2); /* the retry of the transient failure, then the end */
    assert_int_equal(se.types[0], AH_EV_TOOL_RETRY);
    assert_int_equal(se.types[1], AH_EV_TOOL_CALL_END);
    assert_string_equal(se.id, "toolu_1");
    assert_string_equal(se.name, "charge");
    assert_int_equal(se.outcome, AH_TOOL_OK);
    assert_int_equal(se.duplicate, 0);
    assert_int_equal(se.attempts, 2);

    ah_tool_call_new(NULL, l, NULL, "A-1", "{}", &c, NULL, 0);
    assert_int_equal(ah_tool_call_run(c, &d), AH_TOOL_OK);
    ah_tool_call_free(c);
    assert_int_equal(se.n, 3);
    assert_int_equal(se.duplicate, 1);
    assert_int_equal(se.attempts, 0);

    /* budget_exhausted comes before tool_call_end */
    ah_budget *b = NULL;
    ah_budget_new(0, &b, NULL, 0);
    ah_tool_call_new(NULL, l, b, "A-2", "{}", &c, NULL, 0);
    assert_int_equal(ah_tool_call_run(c, &d), AH_TOOL_BUDGET_EXHAUSTED);
    ah_tool_call_free(c);
    ah_budget_free(b);
    assert_int_equal(se.n, 5);
    assert_int_equal(se.types[3], AH_EV_BUDGET_EXHAUSTED);
    assert_int_equal(se.types[4], AH_EV_TOOL_CALL_END);
    assert_int_equal(se.outcome, AH_TOOL_BUDGET_EXHAUSTED);
    ah_ledger_free(l);
}

/* A ledger that cannot answer a claim (here a SQLite file whose tables another program
 * dropped) fails the call closed, and its message says "ledger claim failed" once: the
 * backend's message says what went wrong, the call what it was doing (it read "ledger
 * claim failed: ledger claim failed: no such table: ..."). */
static void a_failed_claim_is_named_once(void **state)
{
    (void)state;
    char path[] = "/tmp/ah-ledger-XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    close(fd);
    unlink(path);
    ah_ledger *l = NULL;
    char err[256];
    assert_int_equal(ah_ledger_open(path, &l, err, sizeof err), AH_OK);
    sqlite3 *db = NULL;
    assert_int_equal(sqlite3_open(path, &db), SQLITE_OK);
    assert_int_equal(sqlite3_exec(db, "DROP TABLE ah_ledger_claims", NULL, NULL, NULL),
                     SQLITE_OK);
    sqlite3_close(db);
    ah_tool_call *c = NULL;
    ah_tool_call_new(NULL, l, NULL, "k", "{}", &c, NULL, 0);
    assert_int_equal(ah_tool_step(c), AH_TOOL_DO_FAIL);
    const ah_error *e = ah_tool_call_error(c);
    assert_int_equal(e->kind, AH_EK_LEDGER);
    const char *first = strstr(e->message, "ledger claim failed");
    if (!first || strstr(first + 1, "ledger claim") || strstr(e->message, "failed: ledger"))
        fail_msg("message: %s", e->message);
    assert_non_null(strstr(e->message, "no such table"));
    assert_int_equal(ah_tool_call_attempts(c), 0); /* the body did not run */
    ah_tool_call_free(c);
    ah_ledger_free(l);
    char side[64];
    unlink(path);
    snprintf(side, sizeof side, "%s-wal", path);
    unlink(side);
    snprintf(side, sizeof side, "%s-shm", path);
    unlink(side);
}

/* An asynchronous ledger whose answers the test delivers by hand: claim answers PENDING
 * and keeps the callback (as the SQLite writer thread or a Redis round trip does);
 * complete answers DONE at once. */
typedef struct slow_ledger {
    ah_ledger base;
    ah_ledger_fn cb;
    void *ud;
    int claims;
} slow_ledger;

static ah_ledger_answer slow_claim(ah_ledger *l, const char *key, const char *fp,
                                   int64_t now_ms, ah_ledger_result *out, ah_ledger_fn cb,
                                   void *ud)
{
    (void)key, (void)fp, (void)now_ms, (void)out;
    slow_ledger *s = (slow_ledger *)l;
    s->cb = cb;
    s->ud = ud;
    s->claims++;
    return AH_LEDGER_PENDING;
}

static ah_ledger_answer slow_complete(ah_ledger *l, const char *key, const char *fp,
                                      const char *receipt, int64_t now_ms,
                                      ah_ledger_result *out, ah_ledger_fn cb, void *ud)
{
    (void)l, (void)fp, (void)cb, (void)ud;
    out->entry.key = key;
    out->entry.receipt = receipt;
    out->entry.seq = 1;
    out->entry.created_ms = now_ms;
    return AH_LEDGER_DONE;
}

static void slow_cancel(ah_ledger *l, void *ud)
{
    slow_ledger *s = (slow_ledger *)l;
    if (s->ud == ud)
        s->cb = NULL;
}

static void slow_abandon(ah_ledger *l, const char *key)
{
    (void)l, (void)key;
}

static void slow_close(ah_ledger *l)
{
    (void)l; /* on the test's stack */
}

static const ah__ledger_ops slow_ops = {.name = "slow",
                                        .claim = slow_claim,
                                        .complete = slow_complete,
                                        .abandon = slow_abandon,
                                        .cancel = slow_cancel,
                                        .close = slow_close};

/* A claim whose answer is slow to come (a fsync, a loaded machine, valgrind) is not a key
 * in flight in another call: giving up on it ended the call IN_PROGRESS ("in flight in
 * another call; its receipt did not arrive in time") though no other call existed. */
static void a_slow_claim_answer_is_not_another_holder(void **state)
{
    (void)state;
    slow_ledger sl = {0};
    ah__ledger_init(&sl.base, &slow_ops);
    ah_tool_call *c = NULL;
    ah_tool_call_new(NULL, &sl.base, NULL, "k", "{}", &c, NULL, 0);
    assert_int_equal(ah_tool_step(c), AH_TOOL_DO_WAIT_CLAIM);
    assert_int_equal(sl.claims, 1);
    /* the driver's bound has passed: it may not give up on our own answer */
    assert_int_equal(ah_tool_call_stop_waiting(c), AH_ERR_STATE);
    assert_false(ah_tool_call_finished(c));
    assert_int_equal(ah_tool_step(c), AH_TOOL_DO_WAIT_CLAIM); /* still due */
    /* the answer comes: the key is ours, the body runs */
    ah_ledger_result r = {.answer = AH_LEDGER_OWNED, .fence = 1};
    assert_non_null(sl.cb);
    sl.cb(sl.ud, &r);
    assert_int_equal(ah_tool_step(c), AH_TOOL_DO_RUN_BODY);
    assert_int_equal(ah_tool_call_body_ok(c, "{}"), AH_OK);
    assert_int_equal(ah_tool_step(c), AH_TOOL_DO_SUCCEED);
    assert_int_equal(ah_tool_call_outcome(c), AH_TOOL_OK);
    ah_tool_call_free(c);

    /* a key another call holds (BUSY) is still given up on when asked */
    ah_tool_call_new(NULL, &sl.base, NULL, "k2", "{}", &c, NULL, 0);
    assert_int_equal(ah_tool_step(c), AH_TOOL_DO_WAIT_CLAIM);
    r = (ah_ledger_result){.answer = AH_LEDGER_BUSY, .retry_ms = 50};
    sl.cb(sl.ud, &r);
    /* ... also while its re-claim is pending: after a BUSY, a PENDING answer may be the
     * next BUSY in the making (the Redis backend answers BUSY after its poll delay) */
    assert_int_equal(ah_tool_step(c), AH_TOOL_DO_WAIT_CLAIM);
    assert_int_equal(sl.claims, 3);
    assert_int_equal(ah_tool_call_stop_waiting(c), AH_OK);
    assert_int_equal(ah_tool_call_outcome(c), AH_TOOL_IN_PROGRESS);
    ah_tool_call_free(c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(manual_steps_success),
        cmocka_unit_test(manual_steps_retry_then_cancel),
        cmocka_unit_test(invalid_policy_and_names),
        cmocka_unit_test(transient_twice_then_success_takes_three),
        cmocka_unit_test(each_retry_is_a_tool_retry_event),
        cmocka_unit_test(transient_forever_stops_at_max_attempts),
        cmocka_unit_test(permanent_runs_once_by_default),
        cmocka_unit_test(unknown_kind_is_not_retried_by_default),
        cmocka_unit_test(permanent_under_retry_everything_takes_max_attempts),
        cmocka_unit_test(retry_on_can_refuse_a_transient),
        cmocka_unit_test(failing_retry_on_falls_back_to_default),
        cmocka_unit_test(budget_and_cancelled_errors_never_retry),
        cmocka_unit_test(budget_checked_before_each_attempt),
        cmocka_unit_test(backoff_past_the_deadline_gives_up),
        cmocka_unit_test(silent_body_is_a_permanent_failure),
        cmocka_unit_test(duplicate_delivery_runs_once),
        cmocka_unit_test(duplicate_needs_no_budget),
        cmocka_unit_test(same_key_other_args_fails_without_running),
        cmocka_unit_test(racing_record_returns_the_winner),
        cmocka_unit_test(no_key_means_no_idempotency),
        cmocka_unit_test(concurrent_same_key_runs_once),
        cmocka_unit_test(blocking_driver_gives_up_with_in_progress),
        cmocka_unit_test(tool_call_end_event_fields),
        cmocka_unit_test(outcome_unknown_repeats_only_when_safe),
        cmocka_unit_test(stream_cut_is_resumed_without_budget),
        cmocka_unit_test(a_failed_claim_is_named_once),
        cmocka_unit_test(a_slow_claim_answer_is_not_another_holder),
    };
    return cmocka_run_group_tests(tests, setup_loop, teardown_loop);
}
