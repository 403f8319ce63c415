/* test_call.c - the one-LLM-request state machine on a scripted fake transport and a
 * manual clock: retries, server hints, give-up reasons, deadline, attempt and idle
 * timeouts, the shared retry budget, cancellation, the stream commit point and the order
 * of events. No real waits: virtual time jumps straight to the next timer. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agenthost.h"
#include "agenthost/call.h"
#include "agenthost/manual_clock.h"

/* ---- the fake transport ---------------------------------------------------------- */

enum { END_CLEAN, END_CUT, END_STALL };

typedef struct fake_step {
    ah_error_kind fail; /* fail before any head with this kind (CONNECT, TIMEOUT) */
    int hang;           /* never answer (until aborted) */
    int64_t delay_ms;   /* before the head (or the failure) */
    int status;         /* the head's status */
    const char *headers[4][2];
    const char *chunks[8];
    int64_t gap_ms; /* between chunks */
    int end;        /* after the chunks */
} fake_step;

typedef struct fake {
    ah_loop *loop;
    const fake_step *steps;
    int n_steps;
    int started, aborted, live;
    int64_t started_at[16];
    char last_url[256];
    char last_method[8];
    size_t last_body_len;
    size_t last_n_headers;
    int saw_api_key_header;
} fake;

typedef struct fake_attempt {
    fake *f;
    const fake_step *s;
    ah_timer *t;
    int phase; /* 0: head pending, then 1 + index of the next chunk */
    ah_transport_sink sink;
    void *ud;
} fake_attempt;

static void fa_free(fake_attempt *a)
{
    a->f->live--;
    ah_timer_free(a->t);
    free(a);
}

static void fa_done(fake_attempt *a, ah_error_kind kind, const char *msg)
{
    ah_error e;
    ah_error_clear(&e);
    if (kind != AH_EK_NONE)
        ah_error_set(&e, kind, 0, "%s", msg);
    ah_transport_sink sink = a->sink;
    void *ud = a->ud;
    fa_free(a);
    sink.on_done(ud, &e);
}

static void fa_tick(void *ud)
{
    fake_attempt *a = ud;
    const fake_step *s = a->s;
    if (a->phase == 0) {
        if (s->fail != AH_EK_NONE) {
            fa_done(a, s->fail, "scripted failure");
            return;
        }
        ah_header h[4];
        size_t n = 0;
        while (n < 4 && s->headers[n][0]) {
            h[n].name = s->headers[n][0];
            h[n].value = s->headers[n][1];
            n++;
        }
        a->phase = 1;
        if (a->sink.on_head(a->ud, s->status, h, n) != 0) {
            fa_done(a, AH_EK_CANCELLED, "aborted by consumer");
            return;
        }
    } else {
        const char *c = s->chunks[a->phase - 1];
        a->phase++;
        if (a->sink.on_body(a->ud, c, strlen(c)) != 0) {
            fa_done(a, AH_EK_CANCELLED, "aborted by consumer");
            return;
        }
    }
    if (a->phase - 1 < 8 && s->chunks[a->phase - 1]) {
        ah_timer_start(a->t, s->gap_ms);
        return;
    }
    if (s->end == END_CLEAN)
        fa_done(a, AH_EK_NONE, "");
    else if (s->end == END_CUT)
        fa_done(a, AH_EK_STREAM, "scripted cut");
    /* END_STALL: nothing more, ever */
}

static ah_status fake_start(void *self, ah_loop *loop, const ah_http_request *req,
                            const ah_transport_sink *sink, void *sink_ud, void **out,
                            ah_error *err)
{
    fake *f = self;
    assert_true(f->started < f->n_steps); /* the script covers every attempt */
    assert_true(f->started < 16);
    f->started_at[f->started] = ah_loop_now_ms(loop);
    snprintf(f->last_url, sizeof f->last_url, "%s", req->url);
    snprintf(f->last_method, sizeof f->last_method, "%s", req->method ? req->method : "POST");
    f->last_body_len = req->body_len;
    f->last_n_headers = req->n_headers;
    for (size_t i = 0; i < req->n_headers; i++)
        if (strcmp(req->headers[i].name, "x-api-key") == 0)
            f->saw_api_key_header = 1;
    fake_attempt *a = calloc(1, sizeof *a);
    a->f = f;
    a->s = &f->steps[f->started++];
    a->sink = *sink;
    a->ud = sink_ud;
    a->t = ah_timer_new(loop, fa_tick, a);
    f->live++;
    if (!a->s->hang)
        ah_timer_start(a->t, a->s->delay_ms);
    *out = a;
    (void)err;
    return AH_OK;
}

static void fake_abort(void *self, void *handle)
{
    fake *f = self;
    f->aborted++;
    fa_free(handle);
}

static const ah_transport_ops fake_ops = {"fake", fake_start, fake_abort};

/* ---- recording events and the stream --------------------------------------------- */

typedef struct rec_event {
    ah_event_type type;
    int attempt, failed_attempt, max_attempts, status, attempts;
    int64_t wait_ms, elapsed_ms, at;
    ah_wait_source source;
    ah_giveup_reason reason;
    ah_error_kind kind;
    ah_call_state state_at_emit;
    char message[AH_ERROR_MESSAGE_MAX];
} rec_event;

/* llm_waiting, recorded apart from the other events (whose order the tests check). */
typedef struct rec_wait {
    char what[16];
    int64_t waited, remaining, at;
} rec_wait;

typedef struct harness {
    ah_manual_clock *clock;
    ah_seeded_rng *rng;
    ah_loop *loop;
    fake f;
    ah_transport tr;
    ah_policy policy;
    ah_call *call;
    rec_event ev[64];
    int n_ev;
    rec_wait waits[32];
    int n_waits;
    char data[256];
    size_t data_len;
    int opens, ends, finishes;
    int cancel_on_retry;   /* call ah_call_cancel from inside the llm_retry callback */
    int consumer_abort_at; /* on_data returns nonzero at this chunk (1-based), 0 = never
                            */
    int end_incomplete;    /* on_end reports an incomplete stream */
    int reattach_calls, cancel_calls;
    int chunks_seen;
    int break_retry;            /* break_is_retry's answer */
    int breaks;                 /* times it was asked */
    int64_t abort_hint_ms;      /* the consumer's error carries this retry hint (>= 0) */
    const ah_call_retry *retry_of; /* the next make_call starts with this retry */
} harness;

static void on_event(void *ud, const ah_event *e)
{
    harness *h = ud;
    if (e->type == AH_EV_LLM_WAITING) {
        assert_true(h->n_waits < 32);
        rec_wait *w = &h->waits[h->n_waits++];
        snprintf(w->what, sizeof w->what, "%s", e->u.llm_waiting.wait);
        w->waited = e->u.llm_waiting.waited_ms;
        w->remaining = e->u.llm_waiting.remaining_ms;
        w->at = ah_loop_now_ms(h->loop);
        assert_int_equal(e->u.llm_waiting.llm_call, 1);
        return;
    }
    assert_true(h->n_ev < 64);
    rec_event *r = &h->ev[h->n_ev++];
    memset(r, 0, sizeof *r);
    r->type = e->type;
    r->at = ah_loop_now_ms(h->loop);
    r->state_at_emit = ah_call_get_state(h->call);
    switch (e->type) {
    case AH_EV_LLM_CALL_START:
        r->attempt = e->u.llm_call_start.attempt;
        break;
    case AH_EV_LLM_RETRY:
        r->failed_attempt = e->u.llm_retry.failed_attempt;
        r->max_attempts = e->u.llm_retry.max_attempts;
        r->wait_ms = e->u.llm_retry.wait_ms;
        r->source = e->u.llm_retry.wait_source;
        r->elapsed_ms = e->u.llm_retry.elapsed_ms;
        r->status = e->u.llm_retry.status;
        r->kind = e->u.llm_retry.error->kind;
        snprintf(r->message, sizeof r->message, "%s", e->u.llm_retry.error->message);
        if (h->cancel_on_retry)
            ah_call_cancel(h->call);
        break;
    case AH_EV_LLM_GAVE_UP:
        r->attempts = e->u.llm_gave_up.attempts;
        r->elapsed_ms = e->u.llm_gave_up.elapsed_ms;
        r->status = e->u.llm_gave_up.status;
        r->reason = e->u.llm_gave_up.reason;
        r->kind = e->u.llm_gave_up.error->kind;
        snprintf(r->message, sizeof r->message, "%s", e->u.llm_gave_up.error->message);
        break;
    case AH_EV_LLM_CONTINUATION:
        assert_int_equal(e->u.llm_continuation.mode, AH_CONT_RESUME);
        r->attempt = e->u.llm_continuation.continuation;
        snprintf(r->message, sizeof r->message, "%s", e->u.llm_continuation.reason);
        break;
    default:
        fail_msg("unexpected event %s", ah_event_type_name(e->type));
    }
}

static int on_open(void *ud, int status, const ah_header *hd, size_t n, ah_error *err)
{
    harness *h = ud;
    assert_true(status >= 200 && status < 300);
    assert_int_equal(h->data_len, 0); /* the head comes before any byte */
    h->opens++;
    return 0;
}

static int on_data(void *ud, const char *buf, size_t len, ah_error *err)
{
    harness *h = ud;
    assert_int_equal(h->opens, 1);
    h->chunks_seen++;
    if (h->consumer_abort_at && h->chunks_seen == h->consumer_abort_at) {
        ah_error_set(err, AH_EK_STREAM, 0, "in-stream error event");
        ah_error_set_provider_type(err, "overloaded_error");
        if (h->abort_hint_ms > 0)
            err->retry_after_ms = h->abort_hint_ms;
        return 1;
    }
    assert_true(h->data_len + len < sizeof h->data);
    memcpy(h->data + h->data_len, buf, len);
    h->data_len += len;
    return 0;
}

/* A resumed call opens more than once. */
static int on_open_any(void *ud, int status, const ah_header *hd, size_t n, ah_error *err)
{
    harness *h = ud;
    (void)status;
    (void)hd;
    (void)n;
    (void)err;
    h->opens++;
    return 0;
}

static int on_data_any(void *ud, const char *buf, size_t len, ah_error *err)
{
    harness *h = ud;
    (void)err;
    assert_true(h->data_len + len < sizeof h->data);
    memcpy(h->data + h->data_len, buf, len);
    h->data_len += len;
    h->data[h->data_len] = '\0';
    return 0;
}

static int on_end(void *ud, ah_error *err)
{
    harness *h = ud;
    h->ends++;
    if (h->end_incomplete) {
        ah_error_set(err, AH_EK_STREAM, 0, "stream ended before message_stop");
        return 1;
    }
    return 0;
}

static int on_break(void *ud, const ah_error *err)
{
    harness *h = ud;
    assert_int_equal(err->kind, AH_EK_STREAM);
    h->breaks++;
    return h->break_retry;
}

static void on_finish(void *ud, ah_call *call)
{
    harness *h = ud;
    assert_ptr_equal(call, h->call);
    assert_true(ah_call_finished(call));
    h->finishes++;
}

static int setup(void **state)
{
    harness *h = calloc(1, sizeof *h);
    h->clock = ah_manual_clock_new(50000, 1700000000000);
    h->rng = ah_seeded_rng_new(7);
    h->loop = ah_loop_new(ah_manual_clock_get(h->clock), ah_seeded_rng_get(h->rng));
    assert_non_null(h->loop);
    h->f.loop = h->loop;
    h->tr.ops = &fake_ops;
    h->tr.self = &h->f;
    ah_policy_init(&h->policy);
    h->policy.base_ms = 100;
    h->policy.cap_ms = 1000;
    *state = h;
    return 0;
}

static int teardown(void **state)
{
    harness *h = *state;
    ah_call_free(h->call);
    /* Nothing left behind: no live fake attempt, no timer, no curl transfer. */
    assert_int_equal(h->f.live, 0);
    assert_int_equal(ah_loop_next_timer_ms(h->loop), -1);
    assert_int_equal(ah_loop_transfer_count(h->loop), 0);
    ah_loop_free(h->loop);
    ah_seeded_rng_free(h->rng);
    ah_manual_clock_free(h->clock);
    free(h);
    return 0;
}

static const ah_header req_headers[] = {
    {"content-type", "application/json"},
    {"x-api-key", "sk-test-SECRET-0123456789"},
};

static ah_call *make_call(harness *h, const fake_step *steps, int n, ah_retry_budget *b)
{
    h->f.steps = steps;
    h->f.n_steps = n;
    ah_call_config cfg = {0};
    cfg.loop = h->loop;
    cfg.transport = &h->tr;
    cfg.request.url = "http://fake.invalid/v1/messages";
    cfg.request.headers = req_headers;
    cfg.request.n_headers = 2;
    cfg.request.body = "{\"model\":\"m\"}";
    cfg.request.body_len = strlen(cfg.request.body);
    cfg.policy = &h->policy;
    cfg.retry_budget = b;
    cfg.stream = (ah_stream_fns){on_open, on_data, on_end, h, NULL, on_break};
    cfg.retry_of = h->retry_of;
    cfg.on_event = on_event;
    cfg.event_ud = h;
    cfg.on_finish = on_finish;
    cfg.finish_ud = h;
    cfg.llm_call = 1;
    char err[128];
    ah_call *c = NULL;
    assert_int_equal(ah_call_new(&cfg, &c, err, sizeof err), AH_OK);
    h->call = c;
    return c;
}

/* A resume hook that always can (the decoder would check its cursor). */
static char *test_reattach_url(void *ud)
{
    harness *h = ud;
    h->reattach_calls++;
    char url[96];
    snprintf(url, sizeof url, "http://fake.invalid/v1/responses/r1?stream=true&starting_after=%d",
             h->reattach_calls);
    char *u = malloc(strlen(url) + 1);
    strcpy(u, url);
    return u;
}

static char *test_cancel_url(void *ud)
{
    harness *h = ud;
    h->cancel_calls++;
    const char *url = "http://fake.invalid/v1/responses/r1/cancel";
    char *u = malloc(strlen(url) + 1);
    strcpy(u, url);
    return u;
}

static ah_call *make_resumable_call(harness *h, const fake_step *steps, int n)
{
    ah_call *c = make_call(h, steps, n, NULL);
    ah_call_free(c); /* rebuilt with the hooks */
    h->f.steps = steps;
    h->f.n_steps = n;
    ah_call_config cfg = {0};
    cfg.loop = h->loop;
    cfg.transport = &h->tr;
    cfg.request.url = "http://fake.invalid/v1/responses";
    cfg.request.headers = req_headers;
    cfg.request.n_headers = 2;
    cfg.request.body = "{\"model\":\"m\"}";
    cfg.request.body_len = strlen(cfg.request.body);
    cfg.policy = &h->policy;
    cfg.stream = (ah_stream_fns){on_open_any, on_data_any, on_end, h, NULL, NULL};
    cfg.resume = (ah_call_resume){test_reattach_url, test_cancel_url, h};
    cfg.on_event = on_event;
    cfg.event_ud = h;
    cfg.on_finish = on_finish;
    cfg.finish_ud = h;
    cfg.llm_call = 1;
    char err[128];
    assert_int_equal(ah_call_new(&cfg, &c, err, sizeof err), AH_OK);
    h->call = c;
    return c;
}

/* The virtual-time driver: step, and when idle jump the clock to the next timer. */
static ah_call_state drive(harness *h)
{
    if (ah_call_get_state(h->call) == AH_CALL_IDLE)
        assert_int_equal(ah_call_start(h->call), AH_OK);
    for (int guard = 0; guard < 100000; guard++) {
        ah_loop_run_once(h->loop, 0);
        if (ah_call_finished(h->call))
            return ah_call_get_state(h->call);
        int64_t d = ah_loop_next_timer_ms(h->loop);
        if (d < 0)
            fail_msg("call stuck in %s with nothing scheduled",
                     ah_call_state_name(ah_call_get_state(h->call)));
        ah_manual_clock_advance(h->clock, d);
    }
    fail_msg("call never finished");
    return AH_CALL_IDLE;
}

/* Drive until the call reaches `s` (not terminal). */
static void drive_until(harness *h, ah_call_state s)
{
    if (ah_call_get_state(h->call) == AH_CALL_IDLE)
        assert_int_equal(ah_call_start(h->call), AH_OK);
    for (int guard = 0; guard < 100000 && ah_call_get_state(h->call) != s; guard++) {
        ah_loop_run_once(h->loop, 0);
        if (ah_call_get_state(h->call) == s)
            return;
        assert_false(ah_call_finished(h->call));
        int64_t d = ah_loop_next_timer_ms(h->loop);
        assert_true(d >= 0);
        ah_manual_clock_advance(h->clock, d);
    }
    assert_int_equal(ah_call_get_state(h->call), s);
}

static int count(const harness *h, ah_event_type t)
{
    int n = 0;
    for (int i = 0; i < h->n_ev; i++)
        n += h->ev[i].type == t;
    return n;
}

static const rec_event *nth(const harness *h, ah_event_type t, int k)
{
    for (int i = 0; i < h->n_ev; i++)
        if (h->ev[i].type == t && k-- == 0)
            return &h->ev[i];
    fail_msg("no event %s #%d", ah_event_type_name(t), k);
    return NULL;
}

#define S503                                                                             \
    {                                                                                    \
        .status = 503, .delay_ms = 20, .chunks = { "{\"error\":\"busy\"}" }              \
    }
#define SOK                                                                              \
    {                                                                                    \
        .status = 200, .delay_ms = 20, .gap_ms = 5, .chunks = {                          \
            "data: a\n\n",                                                               \
            "data: b\n\n"                                                                \
        }                                                                                \
    }

/* ---- tests ----------------------------------------------------------------------- */

static void retries_503_503_then_streams(void **state)
{
    harness *h = *state;
    const fake_step steps[] = {S503, S503, SOK};
    make_call(h, steps, 3, NULL);
    assert_int_equal(drive(h), AH_CALL_DONE);
    assert_int_equal(ah_call_attempts(h->call), 3);
    assert_int_equal(h->f.started, 3);
    assert_int_equal(ah_call_error(h->call)->kind, AH_EK_NONE);
    assert_int_equal(ah_call_http_status(h->call), 200);
    assert_int_equal(h->data_len, strlen("data: a\n\ndata: b\n\n"));
    assert_memory_equal(h->data, "data: a\n\ndata: b\n\n", h->data_len);
    assert_int_equal(h->opens, 1);
    assert_int_equal(h->ends, 1);
    assert_int_equal(h->finishes, 1);
    /* start(1) retry(1) start(2) retry(2) start(3): nothing else. */
    assert_int_equal(h->n_ev, 5);
    const ah_event_type order[] = {AH_EV_LLM_CALL_START, AH_EV_LLM_RETRY,
                                   AH_EV_LLM_CALL_START, AH_EV_LLM_RETRY,
                                   AH_EV_LLM_CALL_START};
    for (int i = 0; i < 5; i++)
        assert_int_equal(h->ev[i].type, order[i]);
    for (int k = 0; k < 2; k++) {
        const rec_event *r = nth(h, AH_EV_LLM_RETRY, k);
        assert_int_equal(r->failed_attempt, k + 1);
        assert_int_equal(r->max_attempts, 4);
        assert_int_equal(r->status, 503);
        assert_int_equal(r->kind, AH_EK_HTTP);
        assert_int_equal(r->source, AH_WAIT_BACKOFF);
        /* The next attempt starts exactly when the announced wait is over. */
        assert_int_equal(h->f.started_at[k + 1], r->at + r->wait_ms);
        assert_int_equal(nth(h, AH_EV_LLM_CALL_START, k + 1)->attempt, k + 2);
    }
    /* The request went out as given, with the key header (it is only kept out of logs).
     */
    assert_string_equal(h->f.last_url, "http://fake.invalid/v1/messages");
    assert_int_equal(h->f.last_body_len, strlen("{\"model\":\"m\"}"));
    assert_true(h->f.saw_api_key_header);
}

static void retry_after_is_a_floor(void **state)
{
    harness *h = *state;
    const fake_step steps[] = {
        {.status = 529, .headers = {{"Retry-After", "5"}}, .chunks = {"overloaded"}},
        SOK};
    make_call(h, steps, 2, NULL);
    assert_int_equal(drive(h), AH_CALL_DONE);
    const rec_event *r = nth(h, AH_EV_LLM_RETRY, 0);
    /* base 100 ms, cap 1 s: the jittered wait is below the server's 5 s, which wins. */
    assert_int_equal(r->wait_ms, 5000);
    assert_int_equal(r->source, AH_WAIT_SERVER);
    assert_int_equal(r->status, 529);
    assert_true(h->f.started_at[1] - h->f.started_at[0] >= 5000);
}

static void retry_after_beyond_the_limit_gives_up_at_once(void **state)
{
    harness *h = *state;
    h->policy.max_retry_after_ms = 2000;
    const fake_step steps[] = {{.status = 429, .headers = {{"retry-after-ms", "90000"}}}};
    make_call(h, steps, 1, NULL);
    assert_int_equal(drive(h), AH_CALL_GAVE_UP);
    assert_int_equal(ah_call_giveup_reason(h->call), AH_GIVEUP_RETRY_AFTER_TOO_LONG);
    assert_int_equal(count(h, AH_EV_LLM_RETRY), 0);
    assert_int_equal(count(h, AH_EV_LLM_GAVE_UP), 1);
    assert_true(ah_call_elapsed_ms(h->call) < 1000); /* virtual: no 90 s sleep */
}

static void not_retryable_400_gives_up_after_one_attempt(void **state)
{
    harness *h = *state;
    const fake_step steps[] = {
        {.status = 400,
         .headers = {{"content-type", "application/json"}},
         .chunks = {"{\"type\":\"error\",\"error\":{\"type\":\"invalid_request_error\",",
                    "\"message\":\"max_tokens: must be positive\"}}"}}};
    make_call(h, steps, 1, NULL);
    assert_int_equal(drive(h), AH_CALL_GAVE_UP);
    assert_int_equal(h->f.started, 1);
    assert_int_equal(ah_call_giveup_reason(h->call), AH_GIVEUP_NOT_RETRYABLE);
    const ah_error *e = ah_call_error(h->call);
    assert_int_equal(e->kind, AH_EK_HTTP);
    assert_int_equal(e->status, 400);
    /* The error body was read (across chunks) and classified. */
    assert_string_equal(e->provider_type, "invalid_request_error");
    assert_non_null(strstr(e->message, "max_tokens"));
    assert_int_equal(count(h, AH_EV_LLM_RETRY), 0);
    assert_int_equal(count(h, AH_EV_LLM_GAVE_UP), 1);
    const rec_event *g = nth(h, AH_EV_LLM_GAVE_UP, 0);
    assert_int_equal(g->reason, AH_GIVEUP_NOT_RETRYABLE);
    assert_int_equal(g->attempts, 1);
    assert_int_equal(g->status, 400);
    assert_int_equal(h->opens,
                     0); /* an error response never reaches the stream consumer */
    assert_int_equal(h->data_len, 0);
    assert_int_equal(h->finishes, 1);
}

static void attempts_exhausted(void **state)
{
    harness *h = *state;
    h->policy.max_attempts = 3;
    const fake_step steps[] = {S503, {.fail = AH_EK_CONNECT, .delay_ms = 1}, S503};
    make_call(h, steps, 3, NULL);
    assert_int_equal(drive(h), AH_CALL_GAVE_UP);
    assert_int_equal(h->f.started, 3);
    assert_int_equal(ah_call_giveup_reason(h->call), AH_GIVEUP_ATTEMPTS);
    assert_int_equal(count(h, AH_EV_LLM_CALL_START), 3);
    assert_int_equal(count(h, AH_EV_LLM_RETRY), 2);
    assert_int_equal(count(h, AH_EV_LLM_GAVE_UP), 1);
    assert_int_equal(nth(h, AH_EV_LLM_RETRY, 1)->kind, AH_EK_CONNECT);
    assert_int_equal(nth(h, AH_EV_LLM_RETRY, 1)->status, 0);
    const rec_event *g = nth(h, AH_EV_LLM_GAVE_UP, 0);
    assert_int_equal(g->attempts, 3);
    assert_int_equal(g->status, 503);
    assert_int_equal(g->elapsed_ms, ah_call_elapsed_ms(h->call));
    /* gave_up is the very last event */
    assert_int_equal(h->ev[h->n_ev - 1].type, AH_EV_LLM_GAVE_UP);
}

static void deadline_stops_retrying(void **state)
{
    harness *h = *state;
    h->policy.deadline_ms = 1000;
    h->policy.base_ms = 400;
    h->policy.cap_ms = 400;
    h->policy.jitter = AH_JITTER_NONE;
    h->policy.max_attempts = 10;
    /* fails at 20, 20 + 400 < 1000: retry; fails at 440, 440 + 400 < 1000: retry;
     * fails at 860, 860 + 400 >= 1000: give up before waiting. */
    const fake_step steps[] = {S503, S503, S503, S503};
    make_call(h, steps, 4, NULL);
    assert_int_equal(drive(h), AH_CALL_GAVE_UP);
    assert_int_equal(ah_call_giveup_reason(h->call), AH_GIVEUP_DEADLINE);
    assert_int_equal(h->f.started, 3);
    assert_true(ah_call_elapsed_ms(h->call) <= 1000);
    assert_int_equal(nth(h, AH_EV_LLM_GAVE_UP, 0)->reason, AH_GIVEUP_DEADLINE);
}

static void deadline_bounds_a_hung_attempt(void **state)
{
    harness *h = *state;
    h->policy.deadline_ms = 1500;
    h->policy.attempt_timeout_ms =
        0; /* no per-attempt limit: the deadline must bound it */
    const fake_step steps[] = {{.hang = 1}};
    make_call(h, steps, 1, NULL);
    assert_int_equal(drive(h), AH_CALL_GAVE_UP);
    assert_int_equal(ah_call_giveup_reason(h->call), AH_GIVEUP_DEADLINE);
    assert_int_equal(ah_call_elapsed_ms(h->call), 1500);
    assert_int_equal(h->f.aborted, 1);
    assert_int_equal(ah_call_error(h->call)->kind, AH_EK_TIMEOUT);
    assert_non_null(strstr(ah_call_error(h->call)->message, "deadline"));
}

static void retry_budget_is_shared_and_throttles(void **state)
{
    harness *h = *state;
    h->policy.max_attempts = 10;
    /* 4 tokens: a retry may go ahead while more than 2 remain after taking one. */
    ah_retry_budget *b = NULL;
    ah_retry_budget_new(4, 0.5, &b, NULL, 0);
    const fake_step steps[] = {S503, S503, S503};
    make_call(h, steps, 3, b);
    assert_int_equal(drive(h), AH_CALL_GAVE_UP);
    /* 4 -> 3 (retry), 3 -> 2 (throttled): two attempts. */
    assert_int_equal(h->f.started, 2);
    assert_int_equal(ah_call_giveup_reason(h->call), AH_GIVEUP_RETRY_BUDGET);
    assert_int_equal(count(h, AH_EV_LLM_RETRY), 1);
    ah_call_free(h->call);
    h->call = NULL;

    /* A second call sharing the budget: a success refunds half a token (2 -> 2.5), and
     * the following failure is throttled at once. */
    h->f.started = 0;
    h->n_ev = 0;
    const fake_step steps2[] = {SOK};
    make_call(h, steps2, 1, b);
    assert_int_equal(drive(h), AH_CALL_DONE);
    assert_true(ah_retry_budget_tokens(b) > 2.4 && ah_retry_budget_tokens(b) < 2.6);
    ah_call_free(h->call);
    h->call = NULL;
    h->f.started = 0;
    h->n_ev = 0;
    const fake_step steps3[] = {S503};
    make_call(h, steps3, 1, b);
    assert_int_equal(drive(h), AH_CALL_GAVE_UP);
    assert_int_equal(h->f.started, 1);
    assert_int_equal(ah_call_giveup_reason(h->call), AH_GIVEUP_RETRY_BUDGET);
    ah_retry_budget_free(b);
}

static void cancel_during_backoff_wait(void **state)
{
    harness *h = *state;
    h->policy.base_ms = 30000;
    h->policy.cap_ms = 30000;
    h->policy.jitter = AH_JITTER_NONE;
    const fake_step steps[] = {S503, SOK};
    make_call(h, steps, 2, NULL);
    drive_until(h, AH_CALL_WAIT);
    /* the first of the wait's llm_waiting pulses; the wait itself ends at 30000 */
    assert_int_equal(ah_loop_next_timer_ms(h->loop), 1000);
    int64_t t0 = ah_loop_now_ms(h->loop);
    ah_call_cancel(h->call);
    ah_loop_run_once(h->loop, 0); /* one step, no virtual time passes */
    assert_int_equal(ah_call_get_state(h->call), AH_CALL_CANCELLED);
    assert_int_equal(ah_loop_now_ms(h->loop), t0);
    assert_int_equal(ah_call_error(h->call)->kind, AH_EK_CANCELLED);
    assert_int_equal(ah_loop_next_timer_ms(h->loop), -1); /* the wait's timer is gone */
    assert_int_equal(h->f.started, 1);                    /* no further attempt */
    assert_int_equal(count(h, AH_EV_LLM_GAVE_UP), 0);
    assert_int_equal(h->finishes, 1);
    /* Cancelling again, or after the end, changes nothing. */
    ah_call_cancel(h->call);
    ah_loop_run_once(h->loop, 0);
    assert_int_equal(ah_call_get_state(h->call), AH_CALL_CANCELLED);
    assert_int_equal(h->finishes, 1);
}

static void cancel_from_the_retry_event(void **state)
{
    harness *h = *state;
    h->cancel_on_retry = 1;
    const fake_step steps[] = {S503, SOK};
    make_call(h, steps, 2, NULL);
    assert_int_equal(drive(h), AH_CALL_CANCELLED);
    assert_int_equal(h->f.started, 1);
    assert_int_equal(count(h, AH_EV_LLM_RETRY), 1);
}

static void cancel_while_streaming_is_not_an_interruption(void **state)
{
    harness *h = *state;
    const fake_step steps[] = {
        {.status = 200, .chunks = {"data: a\n\n"}, .end = END_STALL}};
    make_call(h, steps, 1, NULL);
    drive_until(h, AH_CALL_STREAMING);
    ah_loop_run_once(h->loop, 0); /* the chunk */
    ah_call_cancel(h->call);
    ah_loop_run_once(h->loop, 0);
    assert_int_equal(ah_call_get_state(h->call), AH_CALL_CANCELLED);
    assert_int_equal(h->f.aborted, 1);
    assert_int_equal(h->ends, 0);
}

static void cancel_before_start(void **state)
{
    harness *h = *state;
    const fake_step steps[] = {SOK};
    make_call(h, steps, 1, NULL);
    ah_call_cancel(h->call);
    assert_int_equal(drive(h), AH_CALL_CANCELLED);
    assert_int_equal(h->f.started, 0);
    assert_int_equal(count(h, AH_EV_LLM_CALL_START), 0);
    assert_int_equal(ah_call_start(h->call), AH_ERR_STATE);
}

/* ---- resume (a re-attach to the same response) ------------------------------------ */

static void resume_reattaches_with_a_get_and_completes(void **state)
{
    harness *h = *state;
    const fake_step steps[] = {
        {.status = 200, .chunks = {"data: a\n\n"}, .end = END_CUT},
        {.status = 200, .chunks = {"data: b\n\n"}, .end = END_CLEAN}};
    make_resumable_call(h, steps, 2);
    assert_int_equal(drive(h), AH_CALL_DONE);
    assert_string_equal(h->data, "data: a\n\ndata: b\n\n");
    assert_int_equal(h->f.started, 2);
    assert_string_equal(h->f.last_method, "GET");
    assert_string_equal(h->f.last_url,
                        "http://fake.invalid/v1/responses/r1?stream=true&starting_after=1");
    assert_int_equal(h->f.last_body_len, 0);
    assert_int_equal(h->f.last_n_headers, 1); /* the auth header, no content-type */
    assert_int_equal(ah_call_resumes(h->call), 1);
    assert_int_equal(ah_call_attempts(h->call), 2);
    assert_int_equal(count(h, AH_EV_LLM_CONTINUATION), 1);
    assert_int_equal(nth(h, AH_EV_LLM_CONTINUATION, 0)->attempt, 1);
    assert_non_null(strstr(nth(h, AH_EV_LLM_CONTINUATION, 0)->message, "scripted cut"));
    /* The re-attach's attempts count from 1. */
    assert_int_equal(count(h, AH_EV_LLM_CALL_START), 2);
    assert_int_equal(nth(h, AH_EV_LLM_CALL_START, 1)->attempt, 1);
    assert_int_equal(h->cancel_calls, 0);
}

static void refused_reattach_is_an_interruption_not_a_give_up(void **state)
{
    harness *h = *state;
    const fake_step steps[] = {
        {.status = 200, .chunks = {"data: a\n\n"}, .end = END_CUT},
        {.status = 404, .chunks = {"{\"error\":{\"message\":\"gone\"}}"}, .end = END_CLEAN}};
    make_resumable_call(h, steps, 2);
    assert_int_equal(drive(h), AH_CALL_INTERRUPTED);
    assert_int_equal(count(h, AH_EV_LLM_GAVE_UP), 0);
    assert_int_equal(count(h, AH_EV_LLM_RETRY), 0);
    const ah_error *e = ah_call_error(h->call);
    assert_int_equal(e->kind, AH_EK_STREAM);
    assert_non_null(strstr(e->message, "scripted cut"));
    assert_non_null(strstr(e->message, "HTTP 404"));
}

static void reattach_failures_before_the_head_are_retried(void **state)
{
    harness *h = *state;
    const fake_step steps[] = {
        {.status = 200, .chunks = {"data: a\n\n"}, .end = END_CUT},
        {.fail = AH_EK_CONNECT},
        {.status = 503, .end = END_CLEAN},
        {.status = 200, .chunks = {"data: b\n\n"}, .end = END_CLEAN}};
    make_resumable_call(h, steps, 4);
    assert_int_equal(drive(h), AH_CALL_DONE);
    assert_int_equal(count(h, AH_EV_LLM_RETRY), 2);
    assert_int_equal(nth(h, AH_EV_LLM_RETRY, 1)->failed_attempt, 2);
    assert_int_equal(ah_call_resumes(h->call), 1);
    assert_string_equal(h->data, "data: a\n\ndata: b\n\n");
}

static void resumes_stop_at_max_continuations(void **state)
{
    harness *h = *state;
    h->policy.max_continuations = 2;
    const fake_step steps[] = {
        {.status = 200, .chunks = {"data: a\n\n"}, .end = END_CUT},
        {.status = 200, .chunks = {"data: b\n\n"}, .end = END_CUT},
        {.status = 200, .chunks = {"data: c\n\n"}, .end = END_CUT}};
    make_resumable_call(h, steps, 3);
    assert_int_equal(drive(h), AH_CALL_INTERRUPTED);
    assert_int_equal(h->reattach_calls, 2);
    assert_int_equal(ah_call_resumes(h->call), 2);
    assert_int_equal(h->f.started, 3);
}

static void consumer_errors_and_deadlines_are_not_resumed(void **state)
{
    harness *h = *state;
    h->consumer_abort_at = 0;
    h->policy.deadline_ms = 1000;
    const fake_step steps[] = {
        {.status = 200, .chunks = {"data: a\n\n"}, .end = END_STALL}};
    make_resumable_call(h, steps, 1);
    assert_int_equal(drive(h), AH_CALL_INTERRUPTED);
    assert_int_equal(h->reattach_calls, 0);
    assert_non_null(strstr(ah_call_error(h->call)->message, "deadline"));
}

static void cancel_asks_the_provider_and_waits_at_most_the_cap(void **state)
{
    harness *h = *state;
    const fake_step steps[] = {
        {.status = 200, .chunks = {"data: a\n\n"}, .end = END_STALL},
        {.hang = 1}}; /* the cancel request is never answered */
    make_resumable_call(h, steps, 2);
    drive_until(h, AH_CALL_STREAMING);
    ah_loop_run_once(h->loop, 0);
    int64_t t0 = ah_loop_now_ms(h->loop);
    ah_call_cancel(h->call);
    assert_int_equal(drive(h), AH_CALL_CANCELLED);
    assert_int_equal(h->cancel_calls, 1);
    assert_int_equal(h->f.started, 2);
    assert_string_equal(h->f.last_method, "POST");
    assert_string_equal(h->f.last_url, "http://fake.invalid/v1/responses/r1/cancel");
    assert_int_equal(h->f.aborted, 2); /* the stream at once, the cancel at the cap */
    assert_int_equal(ah_loop_now_ms(h->loop) - t0, AH_CALL_CANCEL_WAIT_MS);
    assert_int_equal(ah_call_error(h->call)->kind, AH_EK_CANCELLED);
}

static void cancel_answered_finishes_at_once(void **state)
{
    harness *h = *state;
    const fake_step steps[] = {
        {.status = 200, .chunks = {"data: a\n\n"}, .end = END_STALL},
        {.status = 200, .delay_ms = 30, .chunks = {"{}"}, .end = END_CLEAN}};
    make_resumable_call(h, steps, 2);
    drive_until(h, AH_CALL_STREAMING);
    ah_loop_run_once(h->loop, 0);
    int64_t t0 = ah_loop_now_ms(h->loop);
    ah_call_cancel(h->call);
    assert_int_equal(drive(h), AH_CALL_CANCELLED);
    assert_int_equal(ah_loop_now_ms(h->loop) - t0, 30);
    assert_int_equal(h->f.aborted, 1);
    assert_int_equal(h->cancel_calls, 1);
}

static void attempt_timeout_fires_on_virtual_time(void **state)
{
    harness *h = *state;
    h->policy.attempt_timeout_ms = 2000;
    const fake_step steps[] = {{.hang = 1}, SOK};
    make_call(h, steps, 2, NULL);
    assert_int_equal(drive(h), AH_CALL_DONE);
    assert_int_equal(h->f.started, 2);
    assert_int_equal(h->f.aborted, 1); /* the hung attempt was torn down */
    const rec_event *r = nth(h, AH_EV_LLM_RETRY, 0);
    assert_int_equal(r->kind, AH_EK_TIMEOUT);
    assert_int_equal(r->status, 0);
    assert_int_equal(r->at - h->f.started_at[0], 2000);
    assert_true(h->f.started_at[1] - h->f.started_at[0] >= 2000);
}

static void attempt_timeout_stops_at_the_head(void **state)
{
    harness *h = *state;
    /* A stream that runs longer than attempt_timeout_ms is fine once its head arrived. */
    h->policy.attempt_timeout_ms = 100;
    const fake_step steps[] = {
        {.status = 200, .delay_ms = 50, .gap_ms = 80, .chunks = {"a", "b", "c", "d"}}};
    make_call(h, steps, 1, NULL);
    assert_int_equal(drive(h), AH_CALL_DONE);
    assert_true(ah_call_elapsed_ms(h->call) > 100);
    assert_int_equal(h->data_len, 4);
}

static void idle_timeout_interrupts_a_silent_stream(void **state)
{
    harness *h = *state;
    h->policy.idle_timeout_ms = 1000;
    /* Head at 10, chunks at 910, 1810, 2710 (900 ms apart keep it alive), then silence.
     */
    const fake_step steps[] = {{.status = 200,
                                .delay_ms = 10,
                                .gap_ms = 900,
                                .chunks = {"a", "b", "c"},
                                .end = END_STALL}};
    make_call(h, steps, 1, NULL);
    assert_int_equal(drive(h), AH_CALL_INTERRUPTED);
    assert_int_equal(h->data_len, 3);
    const ah_error *e = ah_call_error(h->call);
    assert_int_equal(e->kind, AH_EK_STREAM);
    assert_non_null(strstr(e->message, "idle"));
    /* the last chunk came at 2710; idle fires 1000 ms later */
    assert_int_equal(ah_call_elapsed_ms(h->call), 3710);
    assert_int_equal(h->f.started, 1); /* never resent */
    assert_int_equal(h->f.aborted, 1);
    assert_int_equal(count(h, AH_EV_LLM_RETRY), 0);
    assert_int_equal(count(h, AH_EV_LLM_GAVE_UP), 0);
}

static void cut_stream_is_interrupted_not_retried(void **state)
{
    harness *h = *state;
    const fake_step steps[] = {
        {.status = 200, .chunks = {"data: a\n\n", "data: b\n\n"}, .end = END_CUT}, SOK};
    make_call(h, steps, 2, NULL);
    assert_int_equal(drive(h), AH_CALL_INTERRUPTED);
    assert_int_equal(h->f.started, 1);
    assert_int_equal(ah_call_error(h->call)->kind, AH_EK_STREAM);
    assert_int_equal(h->data_len, 18); /* what arrived was delivered */
    assert_int_equal(h->ends, 0);
    assert_int_equal(count(h, AH_EV_LLM_RETRY), 0);
    assert_int_equal(count(h, AH_EV_LLM_GAVE_UP), 0);
}

static void consumer_error_interrupts_with_its_error(void **state)
{
    harness *h = *state;
    h->consumer_abort_at = 2;
    const fake_step steps[] = {{.status = 200, .chunks = {"x", "y", "z"}}};
    make_call(h, steps, 1, NULL);
    assert_int_equal(drive(h), AH_CALL_INTERRUPTED);
    const ah_error *e = ah_call_error(h->call);
    assert_int_equal(e->kind, AH_EK_STREAM);
    assert_string_equal(e->provider_type, "overloaded_error");
    assert_int_equal(h->f.started, 1);
    assert_int_equal(h->chunks_seen, 2);
}

static void incomplete_end_is_interrupted(void **state)
{
    harness *h = *state;
    h->end_incomplete = 1;
    const fake_step steps[] = {SOK};
    make_call(h, steps, 1, NULL);
    assert_int_equal(drive(h), AH_CALL_INTERRUPTED);
    assert_int_equal(h->ends, 1);
    assert_non_null(strstr(ah_call_error(h->call)->message, "message_stop"));
}

static void deadline_while_streaming_interrupts(void **state)
{
    harness *h = *state;
    h->policy.deadline_ms = 500;
    const fake_step steps[] = {
        {.status = 200, .gap_ms = 300, .chunks = {"a", "b", "c"}, .end = END_CLEAN}};
    make_call(h, steps, 1, NULL);
    assert_int_equal(drive(h), AH_CALL_INTERRUPTED);
    assert_int_equal(ah_call_elapsed_ms(h->call), 500);
    /* timeout, not stream: the deadline covers continuations, so it is not continued */
    assert_int_equal(ah_call_error(h->call)->kind, AH_EK_TIMEOUT);
    assert_non_null(strstr(ah_call_error(h->call)->message, "deadline"));
    assert_int_equal(h->f.aborted, 1);
}

static void retry_event_precedes_the_wait(void **state)
{
    harness *h = *state;
    h->policy.max_attempts = 2;
    const fake_step steps[] = {S503, S503};
    make_call(h, steps, 2, NULL);
    assert_int_equal(drive(h), AH_CALL_GAVE_UP);
    const rec_event *r = nth(h, AH_EV_LLM_RETRY, 0);
    /* Emitted when the attempt failed (at 20 ms), while still in ATTEMPT: before WAIT. */
    assert_int_equal(r->state_at_emit, AH_CALL_ATTEMPT);
    assert_int_equal(r->at - h->f.started_at[0], 20);
    assert_int_equal(r->elapsed_ms, 20);
    assert_int_equal(count(h, AH_EV_LLM_GAVE_UP), 1);
    assert_int_equal(nth(h, AH_EV_LLM_GAVE_UP, 0)->state_at_emit, AH_CALL_GAVE_UP);
    assert_int_equal(h->ev[h->n_ev - 1].type, AH_EV_LLM_GAVE_UP);
}

static void secrets_never_reach_errors(void **state)
{
    harness *h = *state;
    const fake_step steps[] = {
        {.status = 401,
         .chunks = {"{\"error\":{\"message\":\"invalid key sk-test-SECRET-0123456789\","
                    "\"type\":\"authentication_error\"}}"}}};
    make_call(h, steps, 1, NULL);
    assert_int_equal(drive(h), AH_CALL_GAVE_UP);
    const ah_error *e = ah_call_error(h->call);
    assert_int_equal(e->status, 401);
    assert_null(strstr(e->message, "SECRET-0123456789"));
    assert_null(strstr(nth(h, AH_EV_LLM_GAVE_UP, 0)->message, "SECRET-0123456789"));
}

/* Every transition is traced through set_state() at debug level. */
static char trace[2048];
static void capture(void *ud, ah_log_level level, int event, const char *line)
{
    (void)ud;
    (void)event;
    char from[32], to[32];
    if (level == AH_LOG_DEBUG &&
        sscanf(line, "llm_call 1: %31s -> %31s", from, to) == 2) {
        size_t n = strlen(trace);
        snprintf(trace + n, sizeof trace - n, "%s>%s;", from, to);
    }
}

static void transitions_are_traced(void **state)
{
    harness *h = *state;
    trace[0] = '\0';
    ah_log_set_handler(capture, NULL, AH_LOG_DEBUG);
    const fake_step steps[] = {S503, SOK};
    make_call(h, steps, 2, NULL);
    assert_int_equal(drive(h), AH_CALL_DONE);
    ah_log_set_handler(NULL, NULL, AH_LOG_INFO);
    assert_string_equal(trace, "idle>attempt;attempt>wait;wait>attempt;attempt>streaming;"
                               "streaming>done;");
}

/* The retry loop's warning lines say which event they restate, so a host whose status
 * display shows those events can drop the duplicate lines without parsing text. */
static int warn_tags[8], n_warn;

static void capture_tags(void *ud, ah_log_level level, int event, const char *line)
{
    (void)ud;
    (void)line;
    if (level == AH_LOG_WARN && n_warn < 8)
        warn_tags[n_warn++] = event;
}

static void warnings_are_tagged_with_their_event(void **state)
{
    harness *h = *state;
    h->policy.max_attempts = 2;
    n_warn = 0;
    ah_log_set_handler(capture_tags, NULL, AH_LOG_WARN);
    const fake_step steps[] = {S503, S503};
    make_call(h, steps, 2, NULL);
    assert_int_equal(drive(h), AH_CALL_GAVE_UP);
    ah_log_set_handler(NULL, NULL, AH_LOG_INFO);
    assert_int_equal(n_warn, 2);
    assert_int_equal(warn_tags[0], AH_EV_LLM_RETRY);
    assert_int_equal(warn_tags[1], AH_EV_LLM_GAVE_UP);
}

static void invalid_policy_is_named(void **state)
{
    harness *h = *state;
    h->policy.max_attempts = 0;
    ah_call_config cfg = {0};
    cfg.loop = h->loop;
    cfg.request.url = "http://x.invalid/";
    cfg.policy = &h->policy;
    char err[128];
    ah_call *c = (ah_call *)1;
    assert_int_equal(ah_call_new(&cfg, &c, err, sizeof err), AH_ERR_INVALID);
    assert_null(c);
    assert_non_null(strstr(err, "max_attempts"));
    cfg.loop = NULL;
    assert_int_equal(ah_call_new(&cfg, &c, err, sizeof err), AH_ERR_INVALID);
    assert_non_null(strstr(err, "loop"));
    ah_call_free(NULL);
    assert_string_equal(ah_call_state_name(AH_CALL_INTERRUPTED), "interrupted");
    assert_string_equal(ah_call_state_name((ah_call_state)99), "unknown");
}


/* ---- a broken stream decided as a failed attempt (the in-stream overload storm) ---- */

/* Forget the finished call and what its stream did, keeping the script's counters. */
static void next_call(harness *h)
{
    ah_call_free(h->call);
    h->call = NULL;
    h->f.started = 0;
    h->n_ev = 0;
    h->opens = h->ends = h->finishes = 0;
    h->chunks_seen = 0;
    h->data_len = 0;
}

/* The provider's error in a 200's stream (the consumer calls it a failure of the
 * request): the retry machine decides it like a failed attempt. The call ends
 * INTERRUPTED with the retry granted (its budget token taken, no refund for the 200),
 * and the next request announces that retry and waits its backoff on the clock before
 * its first attempt, numbered 2. Before the fix the next request went out at once. */
static void an_in_stream_error_waits_its_backoff_before_the_next_request(void **state)
{
    harness *h = *state;
    h->policy.jitter = AH_JITTER_NONE; /* waits 100, 200, ... */
    h->break_retry = 1;
    h->consumer_abort_at = 1;
    ah_retry_budget *b = NULL;
    ah_retry_budget_new(4, 0.5, &b, NULL, 0);
    const fake_step s1[] = {SOK};
    make_call(h, s1, 1, b);
    assert_int_equal(drive(h), AH_CALL_INTERRUPTED);
    assert_int_equal(h->breaks, 1);
    ah_call_retry r;
    assert_int_equal(ah_call_retry_granted(h->call, &r), 1);
    assert_int_equal(r.llm_call, 1);
    assert_int_equal(r.failed_attempt, 1);
    assert_int_equal(r.max_attempts, 4);
    assert_int_equal(r.wait_ms, 100);
    assert_int_equal(r.wait_source, AH_WAIT_BACKOFF);
    assert_int_equal(r.error.kind, AH_EK_STREAM);
    assert_string_equal(r.error.provider_type, "overloaded_error");
    assert_int_equal(count(h, AH_EV_LLM_RETRY), 0);   /* the next request announces it */
    assert_int_equal(count(h, AH_EV_LLM_GAVE_UP), 0);
    assert_true(ah_retry_budget_tokens(b) > 2.9 && ah_retry_budget_tokens(b) < 3.1);

    next_call(h);
    h->consumer_abort_at = 0;
    h->retry_of = &r;
    const fake_step s2[] = {SOK};
    make_call(h, s2, 1, b);
    int64_t t0 = ah_loop_now_ms(h->loop);
    drive_until(h, AH_CALL_WAIT);
    assert_int_equal(count(h, AH_EV_LLM_RETRY), 1);
    const rec_event *e = nth(h, AH_EV_LLM_RETRY, 0);
    assert_int_equal(e->failed_attempt, 1);
    assert_int_equal(e->wait_ms, 100);
    assert_int_equal(e->kind, AH_EK_STREAM);
    assert_int_equal(e->source, AH_WAIT_BACKOFF);
    assert_int_equal(h->f.started, 0);
    assert_int_equal(ah_loop_next_timer_ms(h->loop), 100);
    ah_manual_clock_advance(h->clock, 99);
    ah_loop_run_once(h->loop, 0);
    assert_int_equal(h->f.started, 0); /* not a millisecond early */
    assert_int_equal(drive(h), AH_CALL_DONE);
    assert_int_equal(h->f.started, 1);
    assert_int_equal(h->f.started_at[0], t0 + 100);
    assert_int_equal(nth(h, AH_EV_LLM_CALL_START, 0)->attempt, 2);
    /* the completed response refunds half a token: 3 -> 3.5 */
    assert_true(ah_retry_budget_tokens(b) > 3.4 && ah_retry_budget_tokens(b) < 3.6);
    h->retry_of = NULL;
    ah_retry_budget_free(b);
}

/* The storm's bound: the second break finds the budget closed (4 -> 3 -> 2) and the
 * call gives up, saying why in words; max_attempts bounds a chain without a budget. */
static void broken_streams_give_up_on_the_budget_and_on_attempts(void **state)
{
    harness *h = *state;
    h->policy.jitter = AH_JITTER_NONE;
    h->break_retry = 1;
    h->consumer_abort_at = 1;
    ah_retry_budget *b = NULL;
    ah_retry_budget_new(4, 0.5, &b, NULL, 0);
    const fake_step s1[] = {SOK};
    make_call(h, s1, 1, b);
    assert_int_equal(drive(h), AH_CALL_INTERRUPTED);
    ah_call_retry r;
    assert_int_equal(ah_call_retry_granted(h->call, &r), 1);
    next_call(h);
    h->retry_of = &r;
    make_call(h, s1, 1, b);
    assert_int_equal(drive(h), AH_CALL_GAVE_UP);
    assert_int_equal(ah_call_giveup_reason(h->call), AH_GIVEUP_RETRY_BUDGET);
    assert_int_equal(ah_call_retry_granted(h->call, NULL), 0);
    const rec_event *g = nth(h, AH_EV_LLM_GAVE_UP, 0);
    assert_int_equal(g->attempts, 2);
    assert_int_equal(g->kind, AH_EK_STREAM);
    assert_non_null(strstr(g->message, "not retried: the retry budget is spent"));
    ah_retry_budget_free(b);

    /* No budget, max_attempts 2: the break of attempt 2 is the last. */
    next_call(h);
    h->policy.max_attempts = 2;
    h->retry_of = NULL;
    make_call(h, s1, 1, NULL);
    assert_int_equal(drive(h), AH_CALL_INTERRUPTED);
    assert_int_equal(ah_call_retry_granted(h->call, &r), 1);
    next_call(h);
    h->retry_of = &r;
    make_call(h, s1, 1, NULL);
    assert_int_equal(drive(h), AH_CALL_GAVE_UP);
    assert_int_equal(ah_call_giveup_reason(h->call), AH_GIVEUP_ATTEMPTS);
    assert_int_equal(nth(h, AH_EV_LLM_GAVE_UP, 0)->attempts, 2);
    h->retry_of = NULL;
}

/* The continuation cap comes before any token is spent; a server hint in the stream's
 * error is a floor under the wait, as for any retry; a break the consumer does not call
 * a failure (content kept) is interrupted at once. */
static void broken_stream_cap_hint_and_plain_cuts(void **state)
{
    harness *h = *state;
    h->policy.jitter = AH_JITTER_NONE;
    h->break_retry = 1;
    h->consumer_abort_at = 1;
    h->policy.max_continuations = 0;
    ah_retry_budget *b = NULL;
    ah_retry_budget_new(4, 0.5, &b, NULL, 0);
    const fake_step s1[] = {SOK};
    make_call(h, s1, 1, b);
    assert_int_equal(drive(h), AH_CALL_INTERRUPTED);
    assert_int_equal(ah_call_retry_granted(h->call, NULL), 0);
    assert_true(ah_retry_budget_tokens(b) > 3.9); /* untouched */

    next_call(h);
    h->policy.max_continuations = 3;
    h->abort_hint_ms = 5000;
    make_call(h, s1, 1, b);
    assert_int_equal(drive(h), AH_CALL_INTERRUPTED);
    ah_call_retry r;
    assert_int_equal(ah_call_retry_granted(h->call, &r), 1);
    assert_int_equal(r.wait_ms, 5000);
    assert_int_equal(r.wait_source, AH_WAIT_SERVER);

    next_call(h);
    h->abort_hint_ms = 0;
    h->break_retry = 0;
    make_call(h, s1, 1, b);
    double before = ah_retry_budget_tokens(b);
    assert_int_equal(drive(h), AH_CALL_INTERRUPTED);
    assert_int_equal(h->breaks, 3);
    assert_int_equal(ah_call_retry_granted(h->call, NULL), 0);
    assert_true(ah_retry_budget_tokens(b) == before);
    ah_retry_budget_free(b);
}

/* ---- llm_waiting ------------------------------------------------------------------ */

static void assert_wait(const harness *h, int i, const char *what, int64_t waited,
                        int64_t remaining)
{
    assert_true(i < h->n_waits);
    assert_string_equal(h->waits[i].what, what);
    assert_int_equal(h->waits[i].waited, waited);
    assert_int_equal(h->waits[i].remaining, remaining);
}

/* A 5 s wait says so at 4, 3, 2 and 1 s left; a 2.5 s one at 2 and 1 s left, its first
 * pulse 500 ms in; a wait of a second or less says nothing. */
static void waiting_counts_down_a_retry_wait(void **state)
{
    harness *h = *state;
    const fake_step steps[] = {
        {.status = 529, .headers = {{"Retry-After", "5"}}, .chunks = {"overloaded"}},
        {.status = 429, .headers = {{"retry-after-ms", "2500"}}, .chunks = {"slow down"}},
        {.status = 503, .headers = {{"retry-after-ms", "1000"}}, .chunks = {"busy"}},
        SOK};
    make_call(h, steps, 4, NULL);
    assert_int_equal(drive(h), AH_CALL_DONE);
    assert_int_equal(h->n_waits, 6);
    const rec_event *r = nth(h, AH_EV_LLM_RETRY, 0);
    for (int k = 0; k < 4; k++) {
        assert_wait(h, k, "retry", 1000 * (k + 1), 4000 - 1000 * k);
        assert_int_equal(h->waits[k].at, r->at + 1000 * (k + 1));
    }
    r = nth(h, AH_EV_LLM_RETRY, 1);
    assert_wait(h, 4, "retry", 500, 2000);
    assert_int_equal(h->waits[4].at, r->at + 500);
    assert_wait(h, 5, "retry", 1500, 1000);
    /* every pulse came inside its wait, before the attempt it waited for */
    assert_true(h->waits[3].at < h->f.started_at[1]);
    assert_true(h->waits[5].at < h->f.started_at[2]);
}

/* Silence: the stream says it has had no byte for 5 s, then every second, with what is
 * left before idle_timeout_ms cuts it; never once the cut is due. A gap shorter than
 * the notice says nothing; a longer one that ends says it once. */
static void waiting_says_a_silent_stream(void **state)
{
    harness *h = *state;
    h->policy.idle_timeout_ms = 8000;
    /* head at 10, "a" 5500 ms later and "b" 5500 ms after it (one pulse each, at
     * 5000 ms of silence), then silence until the idle time-out */
    const fake_step steps[] = {{.status = 200,
                                .delay_ms = 10,
                                .gap_ms = 5500,
                                .chunks = {"a", "b"},
                                .end = END_STALL}};
    make_call(h, steps, 1, NULL);
    assert_int_equal(drive(h), AH_CALL_INTERRUPTED);
    assert_non_null(strstr(ah_call_error(h->call)->message, "idle"));
    /* each silence that ends is said to have ended (waited_ms 0) at the next pulse */
    assert_int_equal(h->n_waits, 7);
    assert_wait(h, 0, "stream", 5000, 3000);
    assert_wait(h, 1, "stream", 0, -1);
    assert_wait(h, 2, "stream", 5000, 3000);
    assert_wait(h, 3, "stream", 0, -1);
    assert_wait(h, 4, "stream", 5000, 3000);
    assert_wait(h, 5, "stream", 6000, 2000);
    assert_wait(h, 6, "stream", 7000, 1000);
}

/* No head yet: "response", bounded by the attempt's time-out; the next attempt starts
 * its own count. Without any time-out, remaining_ms is -1. */
static void waiting_says_a_request_without_an_answer(void **state)
{
    harness *h = *state;
    h->policy.attempt_timeout_ms = 7000;
    const fake_step steps[] = {{.hang = 1}, SOK};
    make_call(h, steps, 2, NULL);
    assert_int_equal(drive(h), AH_CALL_DONE);
    assert_int_equal(h->n_waits, 2); /* a time-out, not an answer, ended the silence */
    assert_wait(h, 0, "response", 5000, 2000);
    assert_wait(h, 1, "response", 6000, 1000);
    assert_int_equal(h->waits[0].at, h->f.started_at[0] + 5000);

    ah_call_free(h->call);
    h->call = NULL;
    h->n_waits = 0;
    h->opens = 0;
    h->data_len = 0;
    h->f.started = 0;
    h->policy.attempt_timeout_ms = 0;
    h->policy.idle_timeout_ms = 0;
    const fake_step stalls[] = {{.status = 200, .delay_ms = 6500, .chunks = {"a"}}};
    make_call(h, stalls, 1, NULL);
    assert_int_equal(drive(h), AH_CALL_DONE);
    assert_int_equal(h->n_waits, 2); /* the head at 6500, the body and end with it */
    assert_wait(h, 0, "response", 5000, -1);
    assert_wait(h, 1, "response", 6000, -1);
}

#define T(fn) cmocka_unit_test_setup_teardown(fn, setup, teardown)

int main(void)
{
    const struct CMUnitTest tests[] = {
        T(retries_503_503_then_streams),
        T(retry_after_is_a_floor),
        T(retry_after_beyond_the_limit_gives_up_at_once),
        T(not_retryable_400_gives_up_after_one_attempt),
        T(attempts_exhausted),
        T(deadline_stops_retrying),
        T(deadline_bounds_a_hung_attempt),
        T(retry_budget_is_shared_and_throttles),
        T(cancel_during_backoff_wait),
        T(cancel_from_the_retry_event),
        T(cancel_while_streaming_is_not_an_interruption),
        T(cancel_before_start),
        T(resume_reattaches_with_a_get_and_completes),
        T(refused_reattach_is_an_interruption_not_a_give_up),
        T(reattach_failures_before_the_head_are_retried),
        T(resumes_stop_at_max_continuations),
        T(consumer_errors_and_deadlines_are_not_resumed),
        T(cancel_asks_the_provider_and_waits_at_most_the_cap),
        T(cancel_answered_finishes_at_once),
        T(attempt_timeout_fires_on_virtual_time),
        T(attempt_timeout_stops_at_the_head),
        T(idle_timeout_interrupts_a_silent_stream),
        T(cut_stream_is_interrupted_not_retried),
        T(consumer_error_interrupts_with_its_error),
        T(incomplete_end_is_interrupted),
        T(deadline_while_streaming_interrupts),
        T(retry_event_precedes_the_wait),
        T(secrets_never_reach_errors),
        T(transitions_are_traced),
        T(warnings_are_tagged_with_their_event),
        T(invalid_policy_is_named),
        T(an_in_stream_error_waits_its_backoff_before_the_next_request),
        T(broken_streams_give_up_on_the_budget_and_on_attempts),
        T(broken_stream_cap_hint_and_plain_cuts),
        T(waiting_counts_down_a_retry_wait),
        T(waiting_says_a_silent_stream),
        T(waiting_says_a_request_without_an_answer),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
