/* test_retry.c - the one retry machine (core/retry.c) seen from both of its owners.
 *
 * An LLM call (on a fake transport) and a tool call (through the blocking driver), each
 * on its own loop with a manual clock and an RNG of the same seed, given the same policy
 * and the same failures, make the same decisions: the same waits (jittered, with the
 * server's hint as a floor), the same number of attempts and the same reason to stop.
 * And a tool's backoff is a timer on its loop: another timer of that loop fires during
 * it. No real waits anywhere: virtual time jumps to the next timer. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agenthost.h"
#include "agenthost/manual_clock.h"
#include "agenthost/call.h"
#include "retry.h"

enum { MAX_STEPS = 16, ATTEMPT_MS = 30 };

/* The failures both owners see: attempt i fails as transient after ATTEMPT_MS, with a
 * server hint of hints[i] ms (-1: none). */
typedef struct failures {
    int64_t hints[MAX_STEPS];
} failures;

static ah_error failure(const failures *f, int attempt)
{
    ah_error e;
    ah_error_set(&e, AH_EK_TRANSIENT, 0, "overloaded (attempt %d)", attempt);
    int i = attempt - 1 < MAX_STEPS ? attempt - 1 : MAX_STEPS - 1;
    e.retry_after_ms = f->hints[i];
    return e;
}

/* What one owner decided, in order. */
typedef struct schedule {
    int n_waits;
    int64_t waits[MAX_STEPS];
    int attempts;
    char gave_up[32]; /* the give-up reason's name */
} schedule;

/* A tool call with no ledger, no budget and no key (the new form, asserted to work). */
static ah_tool_call *new_call(const ah_tool_policy *tp, const char *key)
{
    ah_tool_call *c = NULL;
    char err[160];
    assert_int_equal(ah_tool_call_new(tp, NULL, NULL, key, "{}", &c, err, sizeof err), AH_OK);
    assert_non_null(c);
    return c;
}

static ah_policy the_policy(void)
{
    ah_policy p;
    ah_policy_init(&p);
    p.max_attempts = 6;
    p.base_ms = 100;
    p.cap_ms = 2000;
    p.jitter = AH_JITTER_FULL;
    p.deadline_ms = 2500;
    return p;
}

/* ---- an LLM call on a transport whose every attempt fails ----------------------------
 */

typedef struct fake {
    const failures *fails;
    int started;
} fake;

typedef struct fake_attempt {
    fake *f;
    int number;
    ah_timer *t;
    ah_transport_sink sink;
    void *ud;
} fake_attempt;

static void fa_fail(void *ud)
{
    fake_attempt *a = ud;
    ah_error e = failure(a->f->fails, a->number);
    ah_transport_sink sink = a->sink;
    void *sink_ud = a->ud;
    ah_timer_free(a->t);
    free(a);
    sink.on_done(sink_ud, &e);
}

static ah_status fake_start(void *self, ah_loop *loop, const ah_http_request *req,
                            const ah_transport_sink *sink, void *sink_ud, void **out,
                            ah_error *err)
{
    fake *f = self;
    (void)req, (void)err;
    fake_attempt *a = calloc(1, sizeof *a);
    assert_non_null(a);
    a->f = f;
    a->number = ++f->started;
    a->sink = *sink;
    a->ud = sink_ud;
    a->t = ah_timer_new(loop, fa_fail, a);
    ah_timer_start(a->t, ATTEMPT_MS);
    *out = a;
    return AH_OK;
}

static void fake_abort(void *self, void *attempt)
{
    fake_attempt *a = attempt;
    (void)self;
    ah_timer_free(a->t);
    free(a);
}

static const ah_transport_ops fake_ops = {"fake", fake_start, fake_abort};

static void llm_event(void *ud, const ah_event *e)
{
    schedule *s = ud;
    if (e->type == AH_EV_LLM_RETRY && s->n_waits < MAX_STEPS)
        s->waits[s->n_waits++] = e->u.llm_retry.wait_ms;
    if (e->type == AH_EV_LLM_GAVE_UP)
        snprintf(s->gave_up, sizeof s->gave_up, "%s",
                 ah_giveup_reason_name(e->u.llm_gave_up.reason));
}

static int no_open(void *ud, int status, const ah_header *h, size_t n, ah_error *err)
{
    (void)ud, (void)status, (void)h, (void)n, (void)err;
    fail_msg("no attempt should open a stream");
    return 1;
}

static int no_data(void *ud, const char *buf, size_t len, ah_error *err)
{
    (void)ud, (void)buf, (void)len, (void)err;
    return 1;
}

static schedule llm_schedule(const ah_policy *p, const failures *fails, uint64_t seed)
{
    schedule s;
    memset(&s, 0, sizeof s);
    ah_manual_clock *clock = ah_manual_clock_new(5000, 1700000000000);
    ah_seeded_rng *rng = ah_seeded_rng_new(seed);
    ah_loop *loop = ah_loop_new(ah_manual_clock_get(clock), ah_seeded_rng_get(rng));
    assert_non_null(loop);
    fake f = {fails, 0};
    ah_transport tr = {&fake_ops, &f};
    ah_call_config cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.loop = loop;
    cfg.transport = &tr;
    cfg.request.url = "http://fake/v1/messages";
    cfg.request.body = "{}";
    cfg.request.body_len = 2;
    cfg.policy = p;
    cfg.stream.on_open = no_open;
    cfg.stream.on_data = no_data;
    cfg.on_event = llm_event;
    cfg.event_ud = &s;
    cfg.llm_call = 1;
    ah_call *c = NULL;
    char err[256];
    assert_int_equal(ah_call_new(&cfg, &c, err, sizeof err), AH_OK);
    assert_int_equal(ah_call_start(c), AH_OK);
    while (!ah_call_finished(c)) {
        assert_int_equal(ah_loop_run_once(loop, 0), AH_OK);
        int64_t next = ah_loop_next_timer_ms(loop);
        if (!ah_call_finished(c) && next > 0)
            ah_manual_clock_advance(clock, next);
    }
    assert_int_equal(ah_call_get_state(c), AH_CALL_GAVE_UP);
    s.attempts = ah_call_attempts(c);
    ah_call_free(c);
    ah_loop_free(loop);
    ah_seeded_rng_free(rng);
    ah_manual_clock_free(clock);
    return s;
}

/* ---- a tool call whose every attempt fails the same way ------------------------------
 */

typedef struct tool_run {
    const failures *fails;
    ah_manual_clock *clock;
    schedule *s;
} tool_run;

static void failing_body(void *ud, ah_tool_call *c)
{
    tool_run *r = ud;
    ah_manual_clock_advance(r->clock, ATTEMPT_MS); /* the attempt takes as long */
    ah_error e = failure(r->fails, ah_tool_call_attempts(c));
    assert_int_equal(ah_tool_call_body_failed(c, &e), AH_OK);
}

static void tool_advance(void *ud, int64_t ms)
{
    tool_run *r = ud;
    ah_manual_clock_advance(r->clock, ms);
}

/* A tool call states each decision in a log line ("...; retrying in <ms> ms (...)" or
 * "...; giving up: <reason>"), as an LLM call does in its events. */
static char g_tool_log[256];
static void capture_log(void *ud, ah_log_level level, int event, const char *line)
{
    schedule *s = ud;
    const char *r = strstr(line, "retrying in ");
    (void)level, (void)event;
    if (r && s->n_waits < MAX_STEPS)
        s->waits[s->n_waits++] = strtoll(r + 12, NULL, 10);
    if (strstr(line, "giving up: "))
        snprintf(g_tool_log, sizeof g_tool_log, "%s", strstr(line, "giving up: ") + 11);
}

static schedule tool_schedule(const ah_policy *p, const failures *fails, uint64_t seed)
{
    schedule s;
    memset(&s, 0, sizeof s);
    ah_manual_clock *clock = ah_manual_clock_new(5000, 1700000000000);
    ah_seeded_rng *rng = ah_seeded_rng_new(seed);
    ah_loop *loop = ah_loop_new(ah_manual_clock_get(clock), ah_seeded_rng_get(rng));
    assert_non_null(loop);
    tool_run r = {fails, clock, &s};
    ah_tool_policy tp;
    ah_tool_policy_init(&tp);
    tp.max_attempts = p->max_attempts;
    tp.backoff = p;
    tp.loop = loop;
    tp.name = "charge";
    ah_tool_driver d;
    memset(&d, 0, sizeof d);
    d.body = failing_body;
    d.body_ud = &r;
    d.advance_ms = tool_advance;
    d.advance_ud = &r;
    ah_tool_call *c = new_call(&tp, "k");
    g_tool_log[0] = '\0';
    ah_log_set_handler(capture_log, &s, AH_LOG_INFO);
    assert_int_equal(ah_tool_call_run(c, &d), AH_TOOL_ERROR);
    ah_log_set_handler(NULL, NULL, AH_LOG_ERROR);
    s.attempts = ah_tool_call_attempts(c);
    assert_int_equal(ah_tool_call_error(c)->kind, AH_EK_TRANSIENT);
    snprintf(s.gave_up, sizeof s.gave_up, "%.31s", g_tool_log);
    ah_tool_call_free(c);
    ah_loop_free(loop);
    ah_seeded_rng_free(rng);
    ah_manual_clock_free(clock);
    return s;
}

static void assert_same(const schedule *a, const schedule *b)
{
    assert_int_equal(a->n_waits, b->n_waits);
    for (int i = 0; i < a->n_waits; i++)
        assert_int_equal(a->waits[i], b->waits[i]);
    assert_int_equal(a->attempts, b->attempts);
    assert_string_equal(a->gave_up, b->gave_up);
}

/* ---- the tests -----------------------------------------------------------------------
 */

/* Same seed, same policy, same failures: the same decisions, for several seeds, ending on
 * the deadline (or the attempt count), with the server's hint honoured as a floor. */
static void llm_and_tool_decide_alike(void **state)
{
    (void)state;
    ah_policy p = the_policy();
    failures f;
    for (int i = 0; i < MAX_STEPS; i++)
        f.hints[i] = -1;
    f.hints[1] = 700; /* the second failure carries Retry-After: 0.7 s */
    int saw_deadline = 0;
    for (uint64_t seed = 1; seed <= 40; seed++) {
        schedule llm = llm_schedule(&p, &f, seed);
        schedule tool = tool_schedule(&p, &f, seed);
        assert_same(&llm, &tool);
        assert_true(llm.n_waits >= 2);
        assert_true(llm.waits[0] <= 100); /* full jitter: U(0, 100) */
        assert_true(llm.waits[1] >= 700); /* the hint as a floor */
        assert_int_equal(llm.attempts, llm.n_waits + 1);
        saw_deadline += strcmp(llm.gave_up, "deadline") == 0;
    }
    assert_true(saw_deadline > 0); /* the 2.5 s deadline ended some of them */

    /* A hint past max_retry_after_ms stops both at once, with the same reason. */
    p.max_retry_after_ms = 500;
    schedule llm = llm_schedule(&p, &f, 7);
    schedule tool = tool_schedule(&p, &f, 7);
    assert_same(&llm, &tool);
    assert_string_equal(llm.gave_up, "retry_after_too_long");
    assert_int_equal(llm.attempts, 2);

    /* Without a deadline, the attempt count ends both. */
    p = the_policy();
    p.deadline_ms = 0;
    llm = llm_schedule(&p, &f, 3);
    tool = tool_schedule(&p, &f, 3);
    assert_same(&llm, &tool);
    assert_string_equal(llm.gave_up, "attempts");
    assert_int_equal(llm.attempts, 6);
}

/* The machine itself: its two classes differ only in the default verdict. */
static int say_yes(void *ud, const ah_error *err, int default_verdict)
{
    (void)ud, (void)err, (void)default_verdict;
    return 1;
}

static void classes_differ_only_in_the_default(void **state)
{
    (void)state;
    ah_policy p = the_policy();
    ah__retry llm, tool;
    ah__retry_init(&llm, &p, AH__RETRY_LLM);
    ah__retry_init(&tool, &p, AH__RETRY_TOOL);
    ah__retry_start(&llm, 0);
    ah__retry_start(&tool, 0);
    assert_int_equal(ah__retry_attempt(&llm), 1);
    assert_int_equal(ah__retry_attempt(&tool), 1);
    ah_error e503;
    ah_error_set(&e503, AH_EK_HTTP, 503, "overloaded");
    assert_true(ah__retry_verdict(&llm, &e503).retry);   /* the HTTP table */
    assert_false(ah__retry_verdict(&tool, &e503).retry); /* a tool: transient only */
    ah_error budget, cancelled;
    ah_error_set(&budget, AH_EK_BUDGET, 0, "spent");
    ah_error_set(&cancelled, AH_EK_CANCELLED, 0, "stop");
    p.retry_on = say_yes;
    assert_true(ah__retry_verdict(&llm, &e503).retry);
    assert_true(ah__retry_verdict(&tool, &e503).retry);      /* the hook decides */
    assert_false(ah__retry_verdict(&tool, &budget).retry);   /* ... but not this */
    assert_false(ah__retry_verdict(&llm, &cancelled).retry); /* cancellation first */
    assert_false(ah__retry_verdict(&tool, &cancelled).retry);
    /* The wait remembered for decorrelated jitter is the one the owner armed. */
    ah_decision d = ah__retry_decide(&llm, &e503, 0, NULL, NULL);
    assert_true(d.retry);
    assert_int_equal(ah__retry_wait(&llm, &d), 100); /* no RNG: exp(1) = base */
    assert_int_equal(llm.prev_wait_ms, 100);
    ah__retry_new_phase(&llm);
    assert_int_equal(llm.attempts, 0);
    assert_int_equal(llm.prev_wait_ms, 0);
}

/* A tool's backoff is a timer on its loop, so the loop's other work goes on during it:
 * a 200 ms backoff with a 50 ms timer of someone else's armed on the same loop. Before
 * the retry machine's waits were loop timers, the blocking driver slept through it. */
typedef struct ticker {
    ah_timer *t;
    int ticks;
    int ticks_at_attempt[4];
    ah_manual_clock *clock;
    int64_t advanced[8];
    int n_adv;
} ticker;

static void tick(void *ud)
{
    ticker *k = ud;
    k->ticks++;
}

static void flaky_once(void *ud, ah_tool_call *c)
{
    ticker *k = ud;
    int n = ah_tool_call_attempts(c);
    k->ticks_at_attempt[n < 4 ? n : 3] = k->ticks;
    if (n == 1) {
        ah_error e;
        ah_error_set(&e, AH_EK_TRANSIENT, 0, "try again");
        ah_tool_call_body_failed(c, &e);
    } else {
        ah_tool_call_body_ok(c, "\"ok\"");
    }
}

static void ticker_advance(void *ud, int64_t ms)
{
    ticker *k = ud;
    if (k->n_adv < 8)
        k->advanced[k->n_adv++] = ms;
    ah_manual_clock_advance(k->clock, ms);
}

static void tool_backoff_lets_other_timers_fire(void **state)
{
    (void)state;
    ah_manual_clock *clock = ah_manual_clock_new(0, 1700000000000);
    ah_loop *loop = ah_loop_new(ah_manual_clock_get(clock), NULL);
    ticker k;
    memset(&k, 0, sizeof k);
    k.clock = clock;
    k.t = ah_timer_new(loop, tick, &k);
    ah_policy p;
    ah_policy_init(&p);
    p.base_ms = 200;
    p.jitter = AH_JITTER_NONE;
    ah_tool_policy tp;
    ah_tool_policy_init(&tp);
    tp.backoff = &p;
    tp.loop = loop;
    ah_tool_driver d;
    memset(&d, 0, sizeof d);
    d.body = flaky_once;
    d.body_ud = &k;
    d.advance_ms = ticker_advance;
    d.advance_ud = &k;
    ah_tool_call *c = new_call(&tp, NULL);
    ah_timer_start(k.t, 50); /* another owner's timer, due inside the backoff */
    assert_int_equal(ah_tool_call_run(c, &d), AH_TOOL_OK);
    assert_int_equal(ah_tool_call_attempts(c), 2);
    assert_int_equal(k.ticks_at_attempt[1], 0); /* not before the first attempt */
    assert_int_equal(k.ticks_at_attempt[2], 1); /* it fired during the backoff */
    /* The driver stepped the loop from timer to timer: 50 ms, then the rest of 200. */
    assert_int_equal(k.n_adv, 2);
    assert_int_equal(k.advanced[0], 50);
    assert_int_equal(k.advanced[1], 150);
    assert_int_equal(ah_loop_now_ms(loop), 200);
    ah_tool_call_free(c);
    ah_timer_free(k.t);
    ah_loop_free(loop);
    ah_manual_clock_free(clock);
}

/* Without a loop of its own, a call with a backoff makes a private one (real clock) and
 * still never sleeps: the wait is that loop's timer. 1 ms keeps the test quick. */
static void private_loop_when_none_is_given(void **state)
{
    (void)state;
    ah_policy p;
    ah_policy_init(&p);
    p.base_ms = 1;
    p.cap_ms = 1;
    p.jitter = AH_JITTER_NONE;
    ah_tool_policy tp;
    ah_tool_policy_init(&tp);
    tp.backoff = &p;
    ticker k;
    memset(&k, 0, sizeof k);
    ah_tool_driver d;
    memset(&d, 0, sizeof d);
    d.body = flaky_once;
    d.body_ud = &k;
    ah_tool_call *c = new_call(&tp, NULL);
    assert_int_equal(ah_tool_call_run(c, &d), AH_TOOL_OK);
    assert_int_equal(ah_tool_call_attempts(c), 2);
    assert_int_equal(ah_tool_call_wait_ms(c), 1);
    ah_tool_call_free(c);

    /* An invalid backoff is refused when the call is made. */
    p.cap_ms = 0;
    p.base_ms = 10;
    ah_tool_call *bad = (ah_tool_call *)&tp;
    char err[160];
    assert_int_equal(ah_tool_call_new(&tp, NULL, NULL, NULL, "{}", &bad, err, sizeof err),
                     AH_ERR_INVALID);
    assert_null(bad);
    assert_non_null(strstr(err, "tool policy.backoff: policy.cap_ms must be >= policy.base_ms"));
}

/* Called from a timer callback of its own loop, the blocking driver must not step that
 * loop re-entrantly: the wait runs on the call's private loop (1 ms of real time). */
typedef struct nested {
    ah_loop *loop;
    ah_policy backoff;
    ticker k;
    ah_tool_outcome outcome;
    int attempts, ran;
} nested;

static void run_tool_in_callback(void *ud)
{
    nested *n = ud;
    ah_tool_policy tp;
    ah_tool_policy_init(&tp);
    tp.backoff = &n->backoff;
    tp.loop = n->loop;
    ah_tool_driver d;
    memset(&d, 0, sizeof d);
    d.body = flaky_once;
    d.body_ud = &n->k;
    ah_tool_call *c = new_call(&tp, NULL);
    n->outcome = ah_tool_call_run(c, &d);
    n->attempts = ah_tool_call_attempts(c);
    n->ran = 1;
    ah_tool_call_free(c);
}

static void blocking_driver_in_a_callback_does_not_reenter_its_loop(void **state)
{
    (void)state;
    ah_manual_clock *clock = ah_manual_clock_new(0, 1700000000000);
    nested n;
    memset(&n, 0, sizeof n);
    n.loop = ah_loop_new(ah_manual_clock_get(clock), NULL);
    ah_policy_init(&n.backoff);
    n.backoff.base_ms = n.backoff.cap_ms = 1;
    n.backoff.jitter = AH_JITTER_NONE;
    ah_timer *t = ah_timer_new(n.loop, run_tool_in_callback, &n);
    ah_timer *other = ah_timer_new(n.loop, tick, &n.k);
    ah_timer_start(t, 0);
    ah_timer_start(other, 1); /* due when the nested wait is over: must not fire inside */
    assert_int_equal(ah_loop_run_once(n.loop, 0), AH_OK);
    assert_true(n.ran);
    assert_int_equal(n.outcome, AH_TOOL_OK);
    assert_int_equal(n.attempts, 2);
    assert_int_equal(n.k.ticks, 0);              /* the outer loop was not stepped */
    assert_int_equal(ah_loop_now_ms(n.loop), 0); /* nor its (manual) clock moved */
    ah_timer_free(t);
    ah_timer_free(other);
    ah_loop_free(n.loop);
    ah_manual_clock_free(clock);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(llm_and_tool_decide_alike),
        cmocka_unit_test(classes_differ_only_in_the_default),
        cmocka_unit_test(tool_backoff_lets_other_timers_fire),
        cmocka_unit_test(private_loop_when_none_is_given),
        cmocka_unit_test(blocking_driver_in_a_callback_does_not_reenter_its_loop),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
