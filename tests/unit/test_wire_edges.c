/* test_wire_edges.c - the worker and the call at the edges of the wire, on a scripted fake
 * transport and (mostly) a manual clock: a transport whose start() fails (the
 * synchronous-completion hang), a complete response followed by an unclean close, the
 * deadline across continuations, error bodies that never end, a 200 that is not an event
 * stream, the response cap. No real waits except where a blocking driver is the subject. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "agenthost.h"
#include "agenthost/call.h"
#include "agenthost/manual_clock.h"

/* ---- the fake transport ---------------------------------------------------------- */

enum { END_CLEAN, END_CUT, END_STALL };

typedef struct step {
    int start_fails;          /* start() itself fails */
    ah_error_kind fail_kind;  /* its error kind (CONNECT when 0) */
    int fail_should_retry;    /* -1 unknown, 0 no, 1 yes */
    int status;               /* the head's status (200 when 0) */
    const char *content_type; /* NULL = text/event-stream */
    const char *chunks[16];
    size_t repeat_last;       /* send the last chunk this many more times */
    int end;                  /* after the chunks */
} step;

typedef struct fake {
    const step *steps;
    int n_steps;
    int started, aborted, live;
    char last_body[8192];
} fake;

typedef struct fattempt {
    fake *f;
    const step *s;
    ah_timer *t;
    int phase;
    size_t repeated;
    ah_transport_sink sink;
    void *ud;
} fattempt;

static void fa_free(fattempt *a)
{
    a->f->live--;
    ah_timer_free(a->t);
    free(a);
}

static void fa_done(fattempt *a, ah_error_kind kind)
{
    ah_error e;
    ah_error_clear(&e);
    if (kind != AH_EK_NONE)
        ah_error_set(&e, kind, 0, "scripted %s", ah_error_kind_name(kind));
    ah_transport_sink sink = a->sink;
    void *ud = a->ud;
    fa_free(a);
    sink.on_done(ud, &e);
}

static void fa_tick(void *ud)
{
    fattempt *a = ud;
    const step *s = a->s;
    if (a->phase == 0) {
        ah_header h[1] = {{"content-type", s->content_type ? s->content_type
                                                           : "text/event-stream"}};
        a->phase = 1;
        if (a->sink.on_head(a->ud, s->status ? s->status : 200, h, 1) != 0) {
            fa_done(a, AH_EK_CANCELLED);
            return;
        }
    } else {
        const char *c = s->chunks[a->phase - 1];
        if (!s->chunks[a->phase] && a->repeated < s->repeat_last)
            a->repeated++;
        else
            a->phase++;
        if (a->sink.on_body(a->ud, c, strlen(c)) != 0) {
            fa_done(a, AH_EK_CANCELLED);
            return;
        }
    }
    if (a->phase - 1 < 16 && s->chunks[a->phase - 1]) {
        ah_timer_start(a->t, 1);
        return;
    }
    if (s->end == END_CLEAN)
        fa_done(a, AH_EK_NONE);
    else if (s->end == END_CUT)
        fa_done(a, AH_EK_STREAM);
    /* END_STALL: silent until aborted */
}

static ah_status fake_start(void *self, ah_loop *loop, const ah_http_request *req,
                            const ah_transport_sink *sink, void *sink_ud, void **out,
                            ah_error *err)
{
    fake *f = self;
    assert_true(f->started < f->n_steps);
    snprintf(f->last_body, sizeof f->last_body, "%.*s", (int)req->body_len,
             req->body ? req->body : "");
    const step *s = &f->steps[f->started++];
    if (s->start_fails) {
        ah_error_set(err, s->fail_kind ? s->fail_kind : AH_EK_CONNECT, 0,
                     "scripted start failure");
        err->should_retry = s->fail_should_retry;
        return AH_ERR_TRANSPORT;
    }
    fattempt *a = calloc(1, sizeof *a);
    a->f = f;
    a->s = s;
    a->sink = *sink;
    a->ud = sink_ud;
    a->t = ah_timer_new(loop, fa_tick, a);
    f->live++;
    ah_timer_start(a->t, 1);
    *out = a;
    return AH_OK;
}

static void fake_abort(void *self, void *handle)
{
    fake *f = self;
    f->aborted++;
    fa_free(handle);
}

static const ah_transport_ops fake_ops = {"fake", fake_start, fake_abort};

/* ---- the harness ----------------------------------------------------------------- */

typedef struct harness {
    ah_manual_clock *clock;
    ah_seeded_rng *rng;
    ah_loop *loop;
    fake f;
    ah_transport tr;
    ah_policy policy;
    ah_client *client;
    ah_worker *w;
    ah_retry_budget *budget;
    ah_tool_def tools[1];
    size_t n_tools;
    int tool_runs;
    int events[AH_EV_COUNT_];
    char last_error[AH_ERROR_MESSAGE_MAX];
} harness;

static void on_event(void *ud, const ah_event *e)
{
    harness *h = ud;
    h->events[e->type]++;
}

static int tool_exec(void *ud, ah_worker *w, const ah_tool_request *req,
                     ah_tool_response *res)
{
    (void)w;
    (void)req;
    harness *h = ud;
    h->tool_runs++;
    res->outcome = AH_TOOL_OK;
    res->content = "bad \xff\xfe bytes"; /* not UTF-8 */
    res->attempts = 1;
    return 0;
}

static harness *new_harness(int real_clock, ah_wire wire)
{
    harness *h = calloc(1, sizeof *h);
    if (!real_clock) {
        h->clock = ah_manual_clock_new(50000, 1700000000000);
        h->rng = ah_seeded_rng_new(7);
        h->loop = ah_loop_new(ah_manual_clock_get(h->clock), ah_seeded_rng_get(h->rng));
    } else {
        h->loop = ah_loop_new(NULL, NULL);
    }
    assert_non_null(h->loop);
    h->tr.ops = &fake_ops;
    h->tr.self = &h->f;
    ah_policy_init(&h->policy);
    h->policy.base_ms = 100;
    h->policy.cap_ms = 1000;
    ah_client_config cc = {.wire = wire, .base_url = "http://fake.invalid", .model = "m"};
    char err[128];
    ah_client_new(&cc, &h->client, err, sizeof err);
    assert_non_null(h->client);
    return h;
}

static void make_worker(harness *h, const step *steps, int n)
{
    h->f.steps = steps;
    h->f.n_steps = n;
    ah_worker_config wc = {0};
    wc.loop = h->loop;
    wc.client = h->client;
    wc.policy = &h->policy;
    wc.retry_budget = h->budget;
    wc.transport = &h->tr;
    wc.on_event = on_event;
    wc.event_ud = h;
    if (h->n_tools) {
        wc.tools = h->tools;
        wc.n_tools = h->n_tools;
        wc.tool_exec = tool_exec;
        wc.tool_ud = h;
    }
    char err[256];
    ah_worker_new(&wc, &h->w, err, sizeof err);
    assert_non_null(h->w);
}

static void free_harness(harness *h)
{
    ah_worker_free(h->w);
    assert_int_equal(h->f.live, 0);
    ah_client_free(h->client);
    ah_retry_budget_free(h->budget);
    assert_int_equal(ah_loop_next_timer_ms(h->loop), -1);
    ah_loop_free(h->loop);
    ah_seeded_rng_free(h->rng);
    ah_manual_clock_free(h->clock);
    free(h);
}

/* Virtual-time driver: step; when idle jump to the next timer. */
static ah_run_outcome drive(harness *h, const char *input)
{
    assert_int_equal(ah_worker_start(h->w, input), AH_OK);
    for (int guard = 0; guard < 1000000; guard++) {
        ah_loop_run_once(h->loop, 0);
        if (ah_worker_finished(h->w)) {
            snprintf(h->last_error, sizeof h->last_error, "%s",
                     ah_worker_error(h->w)->message);
            return ah_worker_outcome(h->w);
        }
        int64_t d = ah_loop_next_timer_ms(h->loop);
        if (d < 0)
            fail_msg("run stuck with nothing scheduled (the hang)");
        ah_manual_clock_advance(h->clock, d);
    }
    fail_msg("run never finished");
    return AH_OUTCOME_FAILED;
}

static void on_alarm(int sig)
{
    (void)sig;
    static const char msg[] = "test_wire_edges: ah_worker_run hung\n";
    ssize_t r = write(2, msg, sizeof msg - 1);
    (void)r;
    _exit(3);
}

/* ---- the synchronous-completion hang --------------------------------------------- */

static int retry_on_no(void *ud, const ah_error *err, int def)
{
    (void)ud;
    (void)err;
    (void)def;
    return 0;
}

/* A transport whose start() fails made ah_call_start finish the call (and fire
 * on_finish) before it returned: the worker was not yet CALLING, ignored it, and
 * ah_worker_run never returned. Three ways to give up at once: a non-retryable start
 * failure, an empty retry budget, a retry_on that says no. */
static void start_failure_does_not_hang(void **state)
{
    (void)state;
    signal(SIGALRM, on_alarm);
    for (int variant = 0; variant < 3; variant++) {
        harness *h = new_harness(1, AH_WIRE_ANTHROPIC);
        step steps[4] = {{.start_fails = 1, .fail_should_retry = variant == 0 ? 0 : -1}};
        for (int i = 1; i < 4; i++)
            steps[i] = steps[0];
        if (variant == 1) {
            ah_retry_budget_new(2, 0.1, &h->budget, NULL, 0);
            for (int i = 0; i < 4; i++) /* drain it: no retry is allowed */
                ah_retry_budget_try_spend(h->budget);
        }
        if (variant == 2)
            h->policy.retry_on = retry_on_no;
        make_worker(h, steps, 4);
        alarm(10);
        ah_run_outcome o = ah_worker_run(h->w, "hi");
        alarm(0);
        assert_int_equal(o, AH_OUTCOME_FAILED);
        assert_int_equal(h->f.started, 1);
        assert_int_equal(h->events[AH_EV_LLM_CALL_START], 1);
        assert_int_equal(h->events[AH_EV_LLM_GAVE_UP], 1);
        assert_int_equal(h->events[AH_EV_RUN_END], 1);
        assert_non_null(strstr(ah_worker_error(h->w)->message, "scripted start failure"));
        free_harness(h);
    }
}

/* ah_call_start fires nothing itself: no event and no on_finish before it returns. */
static int finishes;
static void count_finish(void *ud, ah_call *c)
{
    (void)ud;
    (void)c;
    finishes++;
}

static void call_start_completes_later(void **state)
{
    (void)state;
    harness *h = new_harness(0, AH_WIRE_ANTHROPIC);
    step steps[1] = {{.start_fails = 1, .fail_should_retry = 0}};
    h->f.steps = steps;
    h->f.n_steps = 1;
    ah_call_config cfg = {0};
    cfg.loop = h->loop;
    cfg.transport = &h->tr;
    cfg.request.url = "http://fake.invalid/v1/messages";
    cfg.on_event = on_event;
    cfg.event_ud = h;
    cfg.on_finish = count_finish;
    ah_call *c = NULL;
    assert_int_equal(ah_call_new(&cfg, &c, NULL, 0), AH_OK);
    finishes = 0;
    assert_int_equal(ah_call_start(c), AH_OK);
    assert_int_equal(finishes, 0);
    assert_int_equal(h->f.started, 0);
    assert_int_equal(h->events[AH_EV_LLM_CALL_START], 0);
    assert_int_equal(ah_call_start(c), AH_ERR_STATE);
    ah_loop_run_once(h->loop, 0);
    assert_int_equal(finishes, 1);
    assert_int_equal(ah_call_get_state(c), AH_CALL_GAVE_UP);
    ah_call_free(c);
    free_harness(h);
}

/* ---- Anthropic stream pieces ----------------------------------------------------- */

#define ANT_START                                                                        \
    "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":"         \
    "\"msg_1\",\"type\":\"message\",\"role\":\"assistant\",\"model\":\"m\",\"content\":[],"  \
    "\"usage\":{\"input_tokens\":1,\"output_tokens\":1}}}\n\n"                              \
    "event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,"       \
    "\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n"
#define ANT_DELTA                                                                        \
    "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,"       \
    "\"delta\":{\"type\":\"text_delta\",\"text\":\"hello \"}}\n\n"
#define ANT_END                                                                          \
    "event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":0}\n\n"     \
    "event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":"  \
    "\"end_turn\",\"stop_sequence\":null},\"usage\":{\"output_tokens\":2}}\n\n"             \
    "event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n"

#define ANT_TOOL_USE                                                                     \
    "event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":1,"       \
    "\"content_block\":{\"type\":\"tool_use\",\"id\":\"toolu_1\",\"name\":\"t\","           \
    "\"input\":{}}}\n\n"                                                                  \
    "event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":1}\n\n"     \
    "event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":"  \
    "\"tool_use\",\"stop_sequence\":null},\"usage\":{\"output_tokens\":2}}\n\n"             \
    "event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n"

/* ---- deadline_ms across continuations ---------------------------------------------- */

/* Every response stalls after some text. The deadline hit mid-stream ends the call: it
 * is not continued (it was, max_continuations times, each with a fresh deadline). */
static void deadline_mid_stream_is_not_continued(void **state)
{
    (void)state;
    harness *h = new_harness(0, AH_WIRE_ANTHROPIC);
    h->policy.deadline_ms = 1000;
    h->policy.max_continuations = 3;
    step st = {.chunks = {ANT_START, ANT_DELTA}, .end = END_STALL};
    step steps[4] = {st, st, st, st};
    make_worker(h, steps, 4);
    int64_t t0 = ah_loop_now_ms(h->loop);
    assert_int_equal(drive(h, "hi"), AH_OUTCOME_FAILED);
    assert_int_equal(ah_worker_error(h->w)->kind, AH_EK_TIMEOUT);
    assert_non_null(strstr(h->last_error, "deadline"));
    assert_int_equal(h->events[AH_EV_LLM_CALL_START], 1);
    assert_int_equal(h->events[AH_EV_LLM_CONTINUATION], 0);
    assert_true(ah_loop_now_ms(h->loop) - t0 <= 1000); /* virtual time */
    free_harness(h);
}

/* Stalls caught by idle_timeout_ms are continued, but every continuation gets only what
 * is left of the one deadline: the 4th request runs into it and the run fails with a
 * timeout, though max_continuations (5) would allow more. */
static void deadline_spans_continuations(void **state)
{
    (void)state;
    harness *h = new_harness(0, AH_WIRE_ANTHROPIC);
    h->policy.deadline_ms = 1000;
    h->policy.idle_timeout_ms = 300;
    h->policy.max_continuations = 5;
    /* Each stall keeps nothing, so each continuation is a retry with its backoff: no
     * backoff here, so the stalls alone spend the deadline. */
    h->policy.base_ms = 0;
    step st = {.chunks = {ANT_START, ANT_DELTA}, .end = END_STALL};
    step steps[6] = {st, st, st, st, st, st};
    make_worker(h, steps, 6);
    int64_t t0 = ah_loop_now_ms(h->loop);
    assert_int_equal(drive(h, "hi"), AH_OUTCOME_FAILED);
    assert_int_equal(ah_worker_error(h->w)->kind, AH_EK_TIMEOUT);
    assert_int_equal(h->events[AH_EV_LLM_CALL_START], 4);
    assert_int_equal(h->events[AH_EV_LLM_CONTINUATION], 3);
    assert_true(ah_loop_now_ms(h->loop) - t0 <= 1000);
    free_harness(h);
}

/* ---- complete, then the connection misbehaves ---------------------------------------- */

/* message_stop arrived, then the connection is held open (no terminator, no close): the
 * call ends DONE after the grace, not at the idle timeout as a cut. And a reset right
 * after the end, with a tool_use in the same chunk after message_stop: DONE, no tool. */
static void held_open_or_reset_after_the_end_is_complete(void **state)
{
    (void)state;
    for (int v = 0; v < 2; v++) {
        harness *h = new_harness(0, AH_WIRE_ANTHROPIC);
        h->policy.idle_timeout_ms = 5000;
        h->tools[0] = (ah_tool_def){.name = "t", .schema_json = "{\"type\":\"object\"}"};
        h->n_tools = 1;
        step steps[1] = {{.chunks = {ANT_START, ANT_DELTA, v ? ANT_END ANT_TOOL_USE : ANT_END},
                          .end = v ? END_CUT : END_STALL}};
        make_worker(h, steps, 1);
        int64_t t0 = ah_loop_now_ms(h->loop);
        ah_run_outcome o = drive(h, "hi");
        if (o != AH_OUTCOME_COMPLETED)
            fail_msg("variant %d: outcome %s: %s", v, ah_run_outcome_name(o), h->last_error);
        assert_int_equal(h->events[AH_EV_LLM_CONTINUATION], 0);
        assert_int_equal(h->tool_runs, 0);
        assert_string_equal(ah_worker_text(h->w), "hello ");
        if (!v) /* the 1 s grace, well before the 5 s idle timeout */
            assert_true(ah_loop_now_ms(h->loop) - t0 < 2000);
        free_harness(h);
    }
}

/* ---- the response cap ---------------------------------------------------------------- */

static void response_cap_ends_the_stream(void **state)
{
    (void)state;
    harness *h = new_harness(0, AH_WIRE_ANTHROPIC);
    h->policy.max_response_bytes = 1000; /* "hello " x 200 = 1200 bytes of text */
    step steps[2] = {{.chunks = {ANT_START, ANT_DELTA}, .repeat_last = 200, .end = END_CLEAN}};
    make_worker(h, steps, 2);
    assert_int_equal(drive(h, "hi"), AH_OUTCOME_FAILED);
    assert_int_equal(ah_worker_error(h->w)->kind, AH_EK_BUDGET);
    assert_non_null(strstr(h->last_error, "max_response_bytes"));
    assert_int_equal(h->events[AH_EV_LLM_CALL_START], 1); /* neither retried nor continued */
    assert_int_equal(h->events[AH_EV_LLM_CONTINUATION], 0);
    assert_int_equal(h->f.started, 1);
    free_harness(h);
}

/* The default cap is 32 MiB: a 33 MiB answer is refused, a 1 MiB one is not. */
static void default_response_cap_is_32_mib(void **state)
{
    (void)state;
    ah_policy p;
    ah_policy_init(&p);
    assert_int_equal(p.max_response_bytes, (int64_t)32 << 20);
    enum { TEXT = 64 * 1024 };
    static char delta[TEXT + 256];
    int n = snprintf(delta, sizeof delta,
                     "event: content_block_delta\ndata: {\"type\":\"content_block_delta\","
                     "\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"");
    memset(delta + n, 'x', TEXT);
    snprintf(delta + n + TEXT, sizeof delta - n - TEXT, "\"}}\n\n");
    for (int big = 0; big < 2; big++) {
        harness *h = new_harness(0, AH_WIRE_ANTHROPIC);
        h->policy.max_continuations = 0;
        step steps[1] = {{.chunks = {ANT_START, delta, ANT_END}, .end = END_CLEAN}};
        /* 528 x 64 KiB = 33 MiB; 16 x 64 KiB = 1 MiB */
        steps[0].chunks[2] = NULL;
        steps[0].repeat_last = big ? 528 : 16;
        make_worker(h, steps, 1);
        ah_run_outcome o = drive(h, "hi");
        if (big) {
            assert_int_equal(o, AH_OUTCOME_FAILED);
            assert_int_equal(ah_worker_error(h->w)->kind, AH_EK_BUDGET);
        } else {
            /* ended without message_stop: a cut (not continued here), not a budget error */
            assert_int_equal(ah_worker_error(h->w)->kind, AH_EK_STREAM);
        }
        free_harness(h);
    }
}

/* ---- invalid UTF-8 -------------------------------------------------------------------- */

static int valid_utf8(const char *s)
{
    const unsigned char *p = (const unsigned char *)s;
    while (*p) {
        int n = *p < 0x80 ? 1 : (*p >> 5) == 6 ? 2 : (*p >> 4) == 14 ? 3 : (*p >> 3) == 30 ? 4 : 0;
        if (!n || (n == 2 && *p < 0xC2))
            return 0;
        for (int i = 1; i < n; i++)
            if ((p[i] & 0xC0) != 0x80)
                return 0;
        p += n;
    }
    return 1;
}

#define ANT_DELTA_OF(t)                                                                  \
    "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,"       \
    "\"delta\":{\"type\":\"text_delta\",\"text\":\"" t "\"}}\n\n"

/* A lone low surrogate escape made the event unparseable ("malformed") on every
 * continuation until the run failed; now it is U+FFFD, like raw invalid bytes. */
static void lone_surrogate_and_invalid_bytes_become_replacement(void **state)
{
    (void)state;
    harness *h = new_harness(0, AH_WIRE_ANTHROPIC);
    step steps[1] = {{.chunks = {ANT_START, ANT_DELTA_OF("a\\udc00b \xff\xfe c \\ud83d\\ude00"),
                                  ANT_END}}};
    make_worker(h, steps, 1);
    ah_run_outcome o = drive(h, "hi");
    if (o != AH_OUTCOME_COMPLETED)
        fail_msg("outcome %s: %s", ah_run_outcome_name(o), h->last_error);
    assert_string_equal(ah_worker_text(h->w),
                        "a\xEF\xBF\xBD" "b \xEF\xBF\xBD\xEF\xBF\xBD c \xF0\x9F\x98\x80");
    assert_int_equal(h->events[AH_EV_LLM_CONTINUATION], 0);
    free_harness(h);
}

/* A tool returning bytes that are not UTF-8 made the next request body invalid (the
 * provider answered 400): they reach the body as U+FFFD. */
static void tool_result_bytes_keep_the_next_body_valid(void **state)
{
    (void)state;
    harness *h = new_harness(0, AH_WIRE_ANTHROPIC);
    h->tools[0] = (ah_tool_def){.name = "t", .schema_json = "{\"type\":\"object\"}"};
    h->n_tools = 1;
    step steps[2] = {{.chunks = {ANT_START, ANT_DELTA, ANT_TOOL_USE}},
                     {.chunks = {ANT_START, ANT_DELTA, ANT_END}}};
    make_worker(h, steps, 2);
    ah_run_outcome o = drive(h, "hi");
    if (o != AH_OUTCOME_COMPLETED)
        fail_msg("outcome %s: %s", ah_run_outcome_name(o), h->last_error);
    assert_int_equal(h->tool_runs, 1);
    assert_true(valid_utf8(h->f.last_body));
    assert_non_null(strstr(h->f.last_body, "bad \xEF\xBF\xBD\xEF\xBF\xBD bytes"));
    free_harness(h);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(start_failure_does_not_hang),
        cmocka_unit_test(call_start_completes_later),
        cmocka_unit_test(deadline_mid_stream_is_not_continued),
        cmocka_unit_test(deadline_spans_continuations),
        cmocka_unit_test(held_open_or_reset_after_the_end_is_complete),
        cmocka_unit_test(response_cap_ends_the_stream),
        cmocka_unit_test(default_response_cap_is_32_mib),
        cmocka_unit_test(lone_surrogate_and_invalid_bytes_become_replacement),
        cmocka_unit_test(tool_result_bytes_keep_the_next_body_valid),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
