/* test_retry_storm.c - an outage seen through the stream must cost what the same outage
 * costs before the stream: 20 concurrent runs sharing one retry budget (max_tokens 4)
 * against a mock that fails every request, counted at the mock.
 *
 * A 529 outage makes 21 requests: 20 first attempts and the one retry the budget grants
 * (4 tokens; a retry needs more than half left after taking its token). The same outage
 * as a 200 whose stream carries the provider's overloaded error at event 0 (Anthropic
 * `overloaded_error`, OpenAI `server_is_overloaded`) made 80 requests with no wait, each
 * continued at once: a continuation caused by a provider error is a retry (its backoff,
 * its budget token), and so is a continuation that kept nothing. Requests are counted by
 * the mock, so the numbers hold at any speed. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "agenthost.h"
#include "agenthost/mock.h"
#include "rig.h"

enum { RUNS = 20 };

typedef struct storm {
    ah_mock *mock;
    ah_loop *loop;
    ah_client *client;
    ah_retry_budget *budget;
    ah_worker *w[RUNS];
    event_log log;
} storm;

static void record(void *ud, const ah_event *ev)
{
    event_log_add(ud, ev);
}

/* RUNS runs on one loop, all failing against `then`, at once (or one after the other
 * when sequential); returns the mock's count. */
static size_t run_storm_as(storm *s, ah_wire wire, const char *then, int with_budget,
                           int sequential)
{
    memset(s, 0, sizeof *s);
    char plan[256];
    snprintf(plan, sizeof plan, "{\"steps\":[],\"then\":%s}", then);
    ah_mock_config mc;
    ah_mock_config_init(&mc);
    mc.plan_json = plan;
    ah_client_config cc = {.wire = wire, .model = "mock-model", .max_tokens = 64};
    rig_open(&mc, &cc, &s->mock, &s->loop, &s->client);
    char err[256];
    if (with_budget)
        assert_int_equal(ah_retry_budget_new(4, 0.1, &s->budget, err, sizeof err), AH_OK);
    ah_policy pol;
    ah_policy_init(&pol); /* max_attempts 4, max_continuations 3 */
    pol.base_ms = 1;
    pol.cap_ms = 4;
    for (int i = 0; i < RUNS; i++) {
        ah_worker_config wc = {.loop = s->loop, .client = s->client, .policy = &pol,
                               .retry_budget = s->budget, .on_event = record,
                               .event_ud = &s->log};
        ah_worker_new(&wc, &s->w[i], err, sizeof err);
        if (!s->w[i])
            fail_msg("worker: %s", err);
        if (sequential)
            assert_int_equal(ah_worker_run(s->w[i], "hello"), AH_OUTCOME_FAILED);
        else
            assert_int_equal(ah_worker_start(s->w[i], "hello"), AH_OK);
    }
    for (;;) {
        int done = 1;
        for (int i = 0; i < RUNS; i++)
            done &= ah_worker_finished(s->w[i]);
        if (done)
            break;
        assert_int_equal(ah_loop_run_once(s->loop, -1), AH_OK);
    }
    for (int i = 0; i < RUNS; i++)
        assert_int_equal(ah_worker_outcome(s->w[i]), AH_OUTCOME_FAILED);
    return ah_mock_request_count(s->mock);
}

static size_t run_storm(storm *s, ah_wire wire, const char *then, int with_budget)
{
    return run_storm_as(s, wire, then, with_budget, 0);
}

static void storm_free(storm *s)
{
    for (int i = 0; i < RUNS; i++)
        ah_worker_free(s->w[i]);
    ah_retry_budget_free(s->budget);
    rig_close(NULL, s->client, s->loop, s->mock, &s->log);
}

/* Every llm_retry waited its backoff: the wait is the retry machine's (backoff, or the
 * server's), and there is one give-up per run. */
static void assert_retries_scheduled(const storm *s, size_t want_retries)
{
    size_t retries = 0;
    for (size_t i = 0; i < s->log.n; i++) {
        if (!event_log_is(&s->log, i, "llm_retry"))
            continue;
        cJSON *e = cJSON_Parse(s->log.lines[i]);
        const char *src = cJSON_GetObjectItem(e, "wait_source")->valuestring;
        assert_true(strcmp(src, "backoff") == 0 || strcmp(src, "server") == 0);
        assert_true(cJSON_GetObjectItem(e, "wait_ms")->valuedouble >= 0);
        cJSON_Delete(e);
        retries++;
    }
    assert_int_equal(retries, want_retries);
    assert_int_equal(event_log_count(&s->log, "llm_gave_up"), RUNS);
}

static void outage_529_makes_21_requests(void **state)
{
    (void)state;
    storm s;
    size_t n = run_storm(&s, AH_WIRE_ANTHROPIC, "{\"status\":529}", 1);
    print_message("529 outage: %zu requests for %d runs\n", n, RUNS);
    assert_int_equal(n, RUNS + 1);
    assert_retries_scheduled(&s, 1);
    storm_free(&s);
}

/* The regression: the same outage through the stream, in each wire format. */
static void in_stream_overload_makes_21_requests(void **state)
{
    (void)state;
    static const struct {
        ah_wire wire;
        const char *then;
    } cases[] = {
        {AH_WIRE_ANTHROPIC, "{\"error_event_after\":0}"}, /* overloaded_error */
        {AH_WIRE_OPENAI, "{\"error_event_after\":0,\"error_type\":\"server_is_overloaded\"}"},
        {AH_WIRE_RESPONSES,
         "{\"error_event_after\":0,\"error_type\":\"server_is_overloaded\"}"},
        /* after a few events: content arrived, nothing of it complete */
        {AH_WIRE_ANTHROPIC, "{\"error_event_after\":4}"},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        storm s;
        size_t n = run_storm(&s, cases[c].wire, cases[c].then, 1);
        print_message("%s %s: %zu requests for %d runs\n", ah_wire_name(cases[c].wire),
                      cases[c].then, n, RUNS);
        assert_int_equal(n, RUNS + 1);
        assert_retries_scheduled(&s, 1);
        /* the budget refused: the runs failed with the provider's error, in words */
        cJSON *g = event_log_find(&s.log, "llm_gave_up", RUNS - 1);
        assert_string_equal(cJSON_GetObjectItem(g, "reason")->valuestring, "retry_budget");
        assert_string_equal(
            cJSON_GetObjectItem(cJSON_GetObjectItem(g, "error"), "kind")->valuestring,
            "stream");
        cJSON_Delete(g);
        storm_free(&s);
    }
}

/* One run after the other: a 200 whose stream then fails is no success, so it refunds
 * no token (it did, at the head, and the outage then got a second retry per
 * 0.9 token: 22 requests). */
static void sequential_runs_get_no_refund_from_a_failing_200(void **state)
{
    (void)state;
    storm s;
    size_t n529 = run_storm_as(&s, AH_WIRE_ANTHROPIC, "{\"status\":529}", 1, 1);
    storm_free(&s);
    size_t n = run_storm_as(&s, AH_WIRE_ANTHROPIC, "{\"error_event_after\":0}", 1, 1);
    print_message("one after the other: 529 %zu, in-stream %zu requests\n", n529, n);
    assert_int_equal(n529, RUNS + 1);
    assert_int_equal(n, RUNS + 1);
    storm_free(&s);
}

/* Without a budget the in-stream outage is bounded like the 529 one: max_attempts (4)
 * per run, the backoff before each retry, and a give-up that says so. */
static void in_stream_overload_without_budget_is_bounded_by_attempts(void **state)
{
    (void)state;
    storm s;
    size_t n529 = run_storm(&s, AH_WIRE_ANTHROPIC, "{\"status\":529}", 0);
    storm_free(&s);
    size_t n = run_storm(&s, AH_WIRE_ANTHROPIC, "{\"error_event_after\":0}", 0);
    print_message("without a budget: 529 %zu, in-stream %zu requests\n", n529, n);
    assert_int_equal(n529, RUNS * 4);
    assert_int_equal(n, RUNS * 4);
    assert_retries_scheduled(&s, RUNS * 3);
    cJSON *g = event_log_find(&s.log, "llm_gave_up", 0);
    assert_string_equal(cJSON_GetObjectItem(g, "reason")->valuestring, "attempts");
    assert_int_equal(cJSON_GetObjectItem(g, "attempts")->valueint, 4);
    cJSON_Delete(g);
    storm_free(&s);
}

/* A 200's stream carries no Retry-After header; the wait the provider asks for in its
 * error's text is the floor of the retry's wait, as a body hint is for a 529. */
static void in_stream_error_text_hint_floors_the_wait(void **state)
{
    (void)state;
    ah_mock *mock;
    ah_loop *loop;
    ah_client *client;
    event_log log = {0};
    ah_mock_config mc;
    ah_mock_config_init(&mc);
    mc.plan_json = "[{\"error_event_after\":2,\"message\":\"Overloaded. Please try again "
                   "in 0.05s.\"}]";
    ah_client_config cc = {.wire = AH_WIRE_ANTHROPIC, .model = "mock-model"};
    rig_open(&mc, &cc, &mock, &loop, &client);
    ah_policy pol;
    ah_policy_init(&pol);
    pol.base_ms = 1;
    pol.cap_ms = 2;
    ah_worker_config wc = {.loop = loop, .client = client, .policy = &pol,
                           .on_event = record, .event_ud = &log};
    ah_worker *w = NULL;
    char err[256];
    ah_worker_new(&wc, &w, err, sizeof err);
    assert_non_null(w);
    assert_int_equal(ah_worker_run(w, "hello"), AH_OUTCOME_COMPLETED);
    cJSON *r = event_log_find(&log, "llm_retry", 0);
    assert_non_null(r);
    assert_string_equal(cJSON_GetObjectItem(r, "wait_source")->valuestring, "server");
    assert_int_equal(cJSON_GetObjectItem(r, "wait_ms")->valueint, 50);
    cJSON *e = cJSON_GetObjectItem(r, "error");
    assert_string_equal(cJSON_GetObjectItem(e, "provider_type")->valuestring,
                        "overloaded_error");
    assert_int_equal(cJSON_GetObjectItem(e, "retry_after_ms")->valueint, 50);
    cJSON_Delete(r);
    rig_close(w, client, loop, mock, &log);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(outage_529_makes_21_requests),
        cmocka_unit_test(in_stream_overload_makes_21_requests),
        cmocka_unit_test(sequential_runs_get_no_refund_from_a_failing_200),
        cmocka_unit_test(in_stream_overload_without_budget_is_bounded_by_attempts),
        cmocka_unit_test(in_stream_error_text_hint_floors_the_wait),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
