/* test_redis_call.c - ah_call with a shared retry budget and a pacer, against the
 * in-process mock and a real redis-server: the budget's verdict arrives on the loop and
 * bounds the attempts of a run of failing calls exactly as the local bucket would; a
 * paced attempt emits llm_paced before its llm_call_start and waits; a response whose
 * rate-limit headers say the limit is exhausted holds the schedule until the reset (local
 * and shared), never past the call's max_retry_after_ms; a cancel while the
 * verdict is awaited ends the call with no further attempt; with Redis gone the same
 * calls decide locally. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "agenthost.h"
#include "agenthost/call.h"
#include "agenthost/mock.h"
#include "agenthost/redis.h"
#include "support/redis_fixture.h"

static const char BODY[] =
    "{\"model\":\"mock-1\",\"max_tokens\":64,\"stream\":true,"
    "\"messages\":[{\"role\":\"user\",\"content\":\"hello\"}]}";

typedef struct harness {
    redis_fixture f;
    ah_mock *mock;
    ah_loop *loop;
    ah_redis *r;
    char url[256];
    ah_policy policy;
    /* events of the current call, in order */
    ah_event_type order[32];
    int n_events;
    int paced;
    int64_t paced_wait;
    const char *paced_limit;
    ah_giveup_reason reason;
    ah_call *cancel_on_retry_verdict; /* cancel from the llm_call_start ... */
    int64_t first_event_ms; /* loop time of the current call's first event */
} harness;

static void on_event(void *ud, const ah_event *e)
{
    harness *h = ud;
    if (h->n_events == 0)
        h->first_event_ms = ah_loop_now_ms(h->loop);
    if (h->n_events < 32)
        h->order[h->n_events++] = e->type;
    if (e->type == AH_EV_LLM_PACED) {
        h->paced++;
        h->paced_wait = e->u.llm_paced.wait_ms;
        h->paced_limit = e->u.llm_paced.limit;
    }
    if (e->type == AH_EV_LLM_GAVE_UP)
        h->reason = e->u.llm_gave_up.reason;
}

static int setup(void **state)
{
    harness *h = calloc(1, sizeof *h);
    assert_int_equal(redis_fixture_start(&h->f, 0, NULL), 0);
    h->loop = ah_loop_new(NULL, NULL);
    char err[256];
    ah_redis_new(h->loop, h->f.url, NULL, &h->r, err, sizeof err);
    assert_non_null(h->r);
    for (int i = 0; i < 500 && !ah_redis_ready(h->r); i++)
        ah_loop_run_once(h->loop, 10);
    assert_true(ah_redis_ready(h->r));
    ah_policy_init(&h->policy);
    h->policy.base_ms = 1;
    h->policy.cap_ms = 2;
    h->policy.max_attempts = 6;
    *state = h;
    return 0;
}

static int teardown(void **state)
{
    harness *h = *state;
    ah_redis_free(h->r);
    assert_int_equal(ah_loop_transfer_count(h->loop), 0);
    ah_loop_free(h->loop);
    ah_mock_free(h->mock);
    redis_fixture_stop(&h->f);
    free(h);
    return 0;
}

static void start_mock(harness *h, const char *plan)
{
    char err[256] = "";
    ah_mock_config cfg;
    ah_mock_config_init(&cfg);
    cfg.plan_json = plan;
    ah_mock_new(&cfg, &h->mock, err, sizeof err);
    if (!h->mock)
        fail_msg("mock: %s", err);
    snprintf(h->url, sizeof h->url, "%s/v1/messages", ah_mock_url(h->mock));
}

static ah_call *make_call(harness *h, ah_retry_budget *b, ah_rate_limit *rl)
{
    static const ah_header headers[] = {
        {"content-type", "application/json"},
        {"anthropic-version", "2023-06-01"},
    };
    ah_call_config cfg = {0};
    cfg.loop = h->loop;
    cfg.request.url = h->url;
    cfg.request.headers = headers;
    cfg.request.n_headers = 2;
    cfg.request.body = BODY;
    cfg.request.body_len = sizeof BODY - 1;
    cfg.policy = &h->policy;
    cfg.retry_budget = b;
    cfg.rate_limit = rl;
    cfg.on_event = on_event;
    cfg.event_ud = h;
    cfg.llm_call = 1;
    h->n_events = 0;
    ah_call *c = NULL;
    char err[128];
    assert_int_equal(ah_call_new(&cfg, &c, err, sizeof err), AH_OK);
    return c;
}

static int run_calls(harness *h, ah_retry_budget *b, int n, int *budget_refusals)
{
    int attempts = 0;
    *budget_refusals = 0;
    for (int i = 0; i < n; i++) {
        ah_call *c = make_call(h, b, NULL);
        assert_int_equal(ah_call_run(c), AH_CALL_GAVE_UP);
        attempts += ah_call_attempts(c);
        if (ah_call_giveup_reason(c) == AH_GIVEUP_RETRY_BUDGET)
            (*budget_refusals)++;
        ah_call_free(c);
    }
    return attempts;
}

static void shared_budget_bounds_failing_calls(void **state)
{
    harness *h = *state;
    start_mock(h, "{\"steps\": [], \"then\": {\"status\": 503}}");
    char err[256];
    /* 10 tokens, no success: 4 retries in all, then every call stops after its first
     * attempt. 8 calls x 6 attempts would be 48 without a budget. */
    ah_retry_budget *b = NULL;
    ah_retry_budget_new_redis(h->r, "call:budget", 10, 0.1, &b, err,
                                                   sizeof err);
    int refusals;
    int attempts = run_calls(h, b, 8, &refusals);
    assert_int_equal(attempts, 8 + 4);
    assert_int_equal(ah_mock_request_count(h->mock), 12);
    assert_true(refusals >= 7);
    assert_true(ah_retry_budget_using_redis(b));
    assert_true(ah_retry_budget_tokens(b) == 10.0); /* the local bucket was not used */
    /* A second budget on the same key sees the spent bucket: no retry at all. */
    ah_retry_budget *b2 = NULL;
    ah_retry_budget_new_redis(h->r, "call:budget", 10, 0.1, &b2, err,
                                                    sizeof err);
    assert_int_equal(run_calls(h, b2, 2, &refusals), 2);
    assert_int_equal(refusals, 2);

    /* Redis gone: the same calls decide on the local bucket (full: 4 retries again). */
    redis_fixture_kill(&h->f, SIGKILL);
    ah_retry_budget *b3 = NULL;
    ah_retry_budget_new_redis(h->r, "call:budget", 10, 0.1, &b3, err,
                                                    sizeof err);
    int a3 = run_calls(h, b3, 4, &refusals);
    assert_true(a3 >= 4 + 3 && a3 <= 4 + 4);
    assert_false(ah_retry_budget_using_redis(b3));
    ah_retry_budget_free(b);
    ah_retry_budget_free(b2);
    ah_retry_budget_free(b3);
}

static void paced_attempt_says_so_first(void **state)
{
    harness *h = *state;
    start_mock(h, NULL);
    char err[256];
    /* 60/min: one slot per second; the second call is paced close to a second. */
    ah_rate_limit_config rc = {.requests_per_minute = 120, .key = "call:rl"};
    ah_rate_limit *shared = NULL;
    ah_rate_limit_new(&rc, h->r, &shared, err, sizeof err);
    ah_rate_limit *local = NULL;
    ah_rate_limit_new(&rc, NULL, &local, err, sizeof err);
    ah_rate_limit *both[] = {local, shared};
    for (int k = 0; k < 2; k++) {
        int64_t t0 = ah_loop_now_ms(h->loop); /* the first slot is taken after this */
        ah_call *c = make_call(h, NULL, both[k]);
        assert_int_equal(ah_call_run(c), AH_CALL_DONE);
        ah_call_free(c);
        h->paced = 0;
        c = make_call(h, NULL, both[k]);
        assert_int_equal(ah_call_run(c), AH_CALL_DONE);
        /* the second slot is 500 ms after the first: the wait is that, less the time
         * the first call took (at most first_event_ms - t0); a first call slower than a
         * slot (valgrind on a busy machine) leaves nothing to wait for */
        int64_t took = h->first_event_ms - t0;
        assert_true(h->paced_wait <= 500);
        if (took < 495) {
            assert_int_equal(h->paced, 1);
            assert_true(h->paced_wait >= 500 - took - 1);
            assert_string_equal(h->paced_limit, "requests_per_minute");
            assert_int_equal(h->order[0], AH_EV_LLM_PACED);
            assert_int_equal(h->order[1], AH_EV_LLM_CALL_START);
            assert_true(ah_call_elapsed_ms(c) >= h->paced_wait);
        }
        ah_call_free(c);
    }
    /* A paced wait that does not fit the deadline gives up at once, no attempt made. */
    h->policy.deadline_ms = 100;
    int64_t w;
    const char *lim;
    ah_redis_req *q;
    assert_int_equal(ah_rate_limit_acquire(local, h->loop, &w, &lim, NULL, NULL, &q), 0);
    ah_call *c = make_call(h, NULL, local); /* the next slot is ~500 ms away */
    assert_int_equal(ah_call_run(c), AH_CALL_GAVE_UP);
    assert_int_equal(ah_call_attempts(c), 0);
    assert_int_equal(ah_call_giveup_reason(c), AH_GIVEUP_DEADLINE);
    assert_non_null(strstr(ah_call_error(c)->message, "paced"));
    ah_call_free(c);
    ah_rate_limit_free(shared);
    ah_rate_limit_free(local);
}

static void provider_headers_slow_the_fleet(void **state)
{
    harness *h = *state;
    /* the first response says the request limit is exhausted for 300 ms */
    start_mock(h, "[{\"ok\": true, \"headers\": {\"x-ratelimit-remaining-requests\": "
                  "\"0\", \"x-ratelimit-reset-requests\": \"300ms\"}}, {\"ok\": true}, "
                  "{\"ok\": true, \"headers\": {\"x-ratelimit-remaining-requests\": "
                  "\"0\", \"x-ratelimit-reset-requests\": \"300ms\"}}, {\"ok\": true}]");
    char err[256];
    ah_rate_limit_config rc = {.requests_per_minute = 600000, .key = "call:hdr"};
    ah_rate_limit *shared = NULL;
    ah_rate_limit_new(&rc, h->r, &shared, err, sizeof err);
    ah_rate_limit *local = NULL;
    ah_rate_limit_new(&rc, NULL, &local, err, sizeof err);
    ah_rate_limit *both[] = {local, shared};
    for (int k = 0; k < 2; k++) {
        int64_t t0 = ah_loop_now_ms(h->loop); /* the hold starts after this */
        ah_call *c = make_call(h, NULL, both[k]);
        assert_int_equal(ah_call_run(c), AH_CALL_DONE);
        ah_call_free(c);
        for (int i = 0; i < 10; i++) /* the shared hold is fire and forget */
            ah_loop_run_once(h->loop, 2);
        h->paced = 0;
        h->paced_wait = 0;
        c = make_call(h, NULL, both[k]);
        assert_int_equal(ah_call_run(c), AH_CALL_DONE);
        /* held 300 ms from the first response's head, less what passed since */
        int64_t took = h->first_event_ms - t0;
        assert_true(h->paced_wait <= 300);
        if (took < 295) {
            assert_int_equal(h->paced, 1);
            assert_true(h->paced_wait >= 300 - took - 1);
        }
        ah_call_free(c);
    }
    ah_rate_limit_free(shared);
    ah_rate_limit_free(local);
}

/* A reset far ahead ("1000000h") holds the schedule, local or shared by the fleet, no
 * longer than the call's max_retry_after_ms: the next call is paced at most that long
 * (it used to be paced 114 years, so it gave up at its deadline without an attempt). */
static void a_far_reset_holds_no_longer_than_the_cap(void **state)
{
    harness *h = *state;
    start_mock(h, "{\"steps\": [], \"then\": {\"ok\": true, \"headers\": "
                  "{\"x-ratelimit-remaining-requests\": \"0\", "
                  "\"x-ratelimit-reset-requests\": \"1000000h\"}}}");
    char err[256];
    ah_rate_limit_config rc = {.requests_per_minute = 600000, .key = "call:far"};
    ah_rate_limit *shared = NULL;
    ah_rate_limit_new(&rc, h->r, &shared, err, sizeof err);
    ah_rate_limit *local = NULL;
    ah_rate_limit_new(&rc, NULL, &local, err, sizeof err);
    ah_rate_limit *both[] = {local, shared};
    h->policy.max_retry_after_ms = 50;
    h->policy.deadline_ms = 30000;
    for (int k = 0; k < 2; k++) {
        ah_call *c = make_call(h, NULL, both[k]);
        assert_int_equal(ah_call_run(c), AH_CALL_DONE);
        ah_call_free(c);
        h->paced = 0;
        h->paced_wait = 0;
        c = make_call(h, NULL, both[k]);
        assert_int_equal(ah_call_run(c), AH_CALL_DONE);
        assert_int_equal(ah_call_attempts(c), 1);
        assert_true(h->paced_wait <= 50);
        ah_call_free(c);
    }
    ah_rate_limit_free(shared);
    ah_rate_limit_free(local);
}

static void cancel_while_the_verdict_is_awaited(void **state)
{
    harness *h = *state;
    start_mock(h, "{\"steps\": [], \"then\": {\"status\": 503}}");
    char err[256];
    ah_retry_budget *b = NULL;
    ah_retry_budget_new_redis(h->r, "call:cancel", 10, 0.1, &b, err,
                                                   sizeof err);
    ah_call *c = make_call(h, b, NULL);
    assert_int_equal(ah_call_start(c), AH_OK);
    /* Step until the first attempt failed and the call waits for Redis's verdict. */
    for (int i = 0; i < 1000 && ah_call_attempts(c) < 1; i++)
        ah_loop_run_once(h->loop, 10);
    for (int i = 0; i < 1000 && ah_call_get_state(c) != AH_CALL_WAIT; i++)
        ah_loop_run_once(h->loop, 1);
    assert_int_equal(ah_call_get_state(c), AH_CALL_WAIT);
    ah_call_cancel(c);
    assert_int_equal(ah_call_run(c), AH_CALL_CANCELLED);
    assert_int_equal(ah_call_attempts(c), 1);
    for (int i = 0; i < 20; i++) /* the dropped verdict arrives and is ignored */
        ah_loop_run_once(h->loop, 5);
    assert_int_equal(ah_call_attempts(c), 1);
    assert_int_equal(ah_mock_request_count(h->mock), 1);
    ah_call_free(c);
    ah_retry_budget_free(b);
}

int main(void)
{
    signal(SIGPIPE, SIG_IGN);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(shared_budget_bounds_failing_calls, setup, teardown),
        cmocka_unit_test_setup_teardown(paced_attempt_says_so_first, setup, teardown),
        cmocka_unit_test_setup_teardown(provider_headers_slow_the_fleet, setup, teardown),
        cmocka_unit_test_setup_teardown(a_far_reset_holds_no_longer_than_the_cap, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(cancel_while_the_verdict_is_awaited, setup,
                                        teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
