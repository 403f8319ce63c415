/* test_worker_output.c - the worker's structured-output check (docs/worker.md) over loopback
 * against the built-in mock: an accepted answer completes, a rejected one is shown to
 * the model as a user message and asked for again, max_output_retries bounds it (then
 * bad_output with an `output` error), and max_steps still bounds the whole run. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agenthost.h"

typedef struct checker {
    int calls;
    int accept_from; /* accept on this call (1-based); 0 = never */
    char last_text[256];
    int last_refused;
    int ends;
    ah_run_outcome end_outcome;
} checker;

static int check(void *ud, const char *text, int refused, char *why, size_t whysize)
{
    checker *c = ud;
    c->calls++;
    snprintf(c->last_text, sizeof c->last_text, "%s", text);
    c->last_refused = refused;
    if (c->accept_from && c->calls >= c->accept_from)
        return 0;
    snprintf(why, whysize, "Rejection %d: answer with JSON only.", c->calls);
    return 1;
}

static void on_event(void *ud, const ah_event *ev)
{
    checker *c = ud;
    if (ev->type == AH_EV_RUN_END) {
        c->ends++;
        c->end_outcome = ev->u.run_end.outcome;
    }
}

typedef struct rig {
    ah_mock *mock;
    ah_loop *loop;
    ah_client *client;
    ah_worker *worker;
} rig;

static void rig_start(rig *r, checker *c, int max_retries, int max_steps)
{
    memset(r, 0, sizeof *r);
    ah_mock_config mc;
    ah_mock_config_init(&mc);
    mc.text = "{\"answer\": 42}";
    char err[256];
    ah_mock_new(&mc, &r->mock, err, sizeof err);
    if (!r->mock)
        fail_msg("mock: %s", err);
    r->loop = ah_loop_new(NULL, NULL);
    assert_non_null(r->loop);
    ah_client_config cc = {.wire = AH_WIRE_ANTHROPIC,
                           .base_url = ah_mock_url(r->mock),
                           .model = "mock-model"};
    ah_client_new(&cc, &r->client, err, sizeof err);
    assert_non_null(r->client);
    ah_worker_config wc = {.loop = r->loop,
                           .client = r->client,
                           .max_steps = max_steps,
                           .on_event = on_event,
                           .event_ud = c,
                           .check_output = check,
                           .check_ud = c,
                           .max_output_retries = max_retries};
    ah_worker_new(&wc, &r->worker, err, sizeof err);
    if (!r->worker)
        fail_msg("worker: %s", err);
}

static void rig_stop(rig *r)
{
    ah_worker_free(r->worker);
    ah_client_free(r->client);
    ah_loop_free(r->loop);
    ah_mock_free(r->mock);
}

static void test_accepted_answer_completes(void **state)
{
    (void)state;
    checker c = {.accept_from = 1};
    rig r;
    rig_start(&r, &c, 2, 0);
    assert_int_equal(ah_worker_run(r.worker, "give JSON"), AH_OUTCOME_COMPLETED);
    assert_int_equal(c.calls, 1);
    assert_string_equal(c.last_text, "{\"answer\": 42}");
    assert_int_equal(c.last_refused, 0);
    ah_worker_stats st;
    ah_worker_get_stats(r.worker, &st);
    assert_int_equal(st.output_retries, 0);
    assert_int_equal(st.llm_calls, 1);
    assert_int_equal(c.ends, 1);
    rig_stop(&r);
}

static void test_rejection_is_shown_and_asked_again(void **state)
{
    (void)state;
    checker c = {.accept_from = 2};
    rig r;
    rig_start(&r, &c, 2, 0);
    assert_int_equal(ah_worker_run(r.worker, "give JSON"), AH_OUTCOME_COMPLETED);
    assert_int_equal(c.calls, 2);
    ah_worker_stats st;
    ah_worker_get_stats(r.worker, &st);
    assert_int_equal(st.output_retries, 1);
    assert_int_equal(st.llm_calls, 2);
    /* history: user, assistant, user (the rejection), assistant */
    const ah_conversation *h = ah_worker_history(r.worker);
    assert_int_equal(ah_conversation_count(h), 4);
    assert_int_equal(ah_conversation_role(h, 2), AH_ROLE_USER);
    assert_string_equal(ah_conversation_block(h, 2, 0)->text,
                        "Rejection 1: answer with JSON only.");
    /* the second request carried it: it is in history, not injected */
    assert_int_equal(ah_mock_request_count(r.mock), 2);
    ah_mock_request req;
    assert_int_equal(ah_mock_request_get(r.mock, 1, &req), AH_OK);
    assert_non_null(strstr(req.body, "Rejection 1: answer with JSON only."));
    assert_int_equal(ah_mock_request_get(r.mock, 0, &req), AH_OK);
    assert_null(strstr(req.body, "Rejection"));
    /* the final text is the last answer only */
    assert_string_equal(ah_worker_text(r.worker), "{\"answer\": 42}");
    assert_int_equal(c.ends, 1);
    rig_stop(&r);
}

static void test_bad_output_after_max_retries(void **state)
{
    (void)state;
    checker c = {.accept_from = 0};
    rig r;
    rig_start(&r, &c, 2, 0);
    assert_int_equal(ah_worker_run(r.worker, "give JSON"), AH_OUTCOME_BAD_OUTPUT);
    assert_int_equal(c.calls, 3); /* the answer and two retries */
    ah_worker_stats st;
    ah_worker_get_stats(r.worker, &st);
    assert_int_equal(st.output_retries, 2);
    assert_int_equal(st.llm_calls, 3);
    const ah_error *e = ah_worker_error(r.worker);
    assert_int_equal(e->kind, AH_EK_OUTPUT);
    assert_string_equal(e->message, "Rejection 3: answer with JSON only.");
    assert_int_equal(c.ends, 1);
    assert_int_equal(c.end_outcome, AH_OUTCOME_BAD_OUTPUT);
    rig_stop(&r);
}

static void test_zero_retries_fails_at_once(void **state)
{
    (void)state;
    checker c = {.accept_from = 0};
    rig r;
    rig_start(&r, &c, 0, 0);
    assert_int_equal(ah_worker_run(r.worker, "give JSON"), AH_OUTCOME_BAD_OUTPUT);
    assert_int_equal(c.calls, 1);
    assert_int_equal(ah_mock_request_count(r.mock), 1);
    rig_stop(&r);
}

static void test_max_steps_bounds_output_retries(void **state)
{
    (void)state;
    checker c = {.accept_from = 0};
    rig r;
    rig_start(&r, &c, 5, 2);
    assert_int_equal(ah_worker_run(r.worker, "give JSON"), AH_OUTCOME_MAX_STEPS);
    assert_int_equal(c.calls, 2);
    assert_int_equal(ah_mock_request_count(r.mock), 2);
    rig_stop(&r);
}

static void test_negative_max_output_retries_is_refused(void **state)
{
    (void)state;
    ah_loop *loop = ah_loop_new(NULL, NULL);
    ah_client_config cc = {
        .wire = AH_WIRE_OPENAI, .base_url = "http://127.0.0.1:1", .model = "m"};
    char err[256];
    ah_client *client = NULL;
    ah_client_new(&cc, &client, err, sizeof err);
    assert_non_null(client);
    ah_worker_config wc = {.loop = loop, .client = client, .max_output_retries = -1};
    assert_int_not_equal(ah_worker_new(&wc, &(ah_worker *){NULL}, err, sizeof err), AH_OK);
    assert_non_null(strstr(err, "max_output_retries"));
    ah_client_free(client);
    ah_loop_free(loop);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_accepted_answer_completes),
        cmocka_unit_test(test_rejection_is_shown_and_asked_again),
        cmocka_unit_test(test_bad_output_after_max_retries),
        cmocka_unit_test(test_zero_retries_fails_at_once),
        cmocka_unit_test(test_max_steps_bounds_output_retries),
        cmocka_unit_test(test_negative_max_output_retries_is_refused),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
