/* test_worker_cancel.c - a run stopped inside a tool round leaves a conversation that can
 * go on (docs/worker.md, "Cancellation"): every call of the round's assistant message is
 * answered in history - the one that answered with its result, the one still running
 * with AH_TOOL_CANCELLED_RUNNING, the one not started with AH_TOOL_CANCELLED_WAITING -
 * and the next run with that history is accepted by the mock, which refuses an
 * unanswered tool call with each provider's own 400, for each wire format.
 *
 * Real loopback sockets against the built-in mock; the tool answers when the test says
 * (exec returns 1), so the round is stopped at a known point whatever the speed. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agenthost.h"
#include "agenthost/mock.h"
#include "rig.h"

typedef struct world {
    ah_mock *mock;
    ah_loop *loop;
    ah_client *client;
    ah_worker *worker;
    event_log log;
    size_t started[8]; /* index of each call the worker started */
    int n_started;
    int cancel_at_start; /* cancel from the hook at this tool_call_start (1-based; 0: no) */
    int tool_starts;
} world;

static void record_event(void *ud, const ah_event *ev)
{
    world *x = ud;
    event_log_add(&x->log, ev);
    if (ev->type == AH_EV_TOOL_CALL_START && ++x->tool_starts == x->cancel_at_start)
        ah_worker_cancel(x->worker);
}

/* Every call waits for the test to answer it. */
static int waiting_tool(void *ud, ah_worker *w, const ah_tool_request *req,
                        ah_tool_response *res)
{
    (void)w;
    (void)res;
    world *x = ud;
    assert_true(x->n_started < 8);
    x->started[x->n_started++] = req->index;
    return 1;
}

static void world_open(world *x, ah_wire wire, const char *plan, int concurrency,
                       const ah_conversation *history)
{
    memset(x, 0, sizeof *x);
    ah_mock_config mc;
    ah_mock_config_init(&mc);
    mc.plan_json = plan;
    ah_client_config cc = {
        .wire = wire, .api_key = "k", .model = "mock-model", .max_tokens = 256};
    rig_open(&mc, &cc, &x->mock, &x->loop, &x->client);
    ah_policy pol;
    ah_policy_init(&pol);
    ah_tool_def tool = {
        .name = "slow", .description = "waits", .schema_json = "{\"type\":\"object\"}"};
    ah_worker_config wc = {.loop = x->loop,
                           .client = x->client,
                           .policy = &pol,
                           .tools = &tool,
                           .n_tools = 1,
                           .tool_exec = waiting_tool,
                           .tool_ud = x,
                           .on_event = record_event,
                           .event_ud = x,
                           .max_tool_concurrency = concurrency,
                           .history = history};
    char err[256];
    ah_worker_new(&wc, &x->worker, err, sizeof err);
    if (!x->worker)
        fail_msg("worker: %s", err);
}

static void world_close(world *x)
{
    rig_close(x->worker, x->client, x->loop, x->mock, &x->log);
}

/* Step the loop until n calls have started (the response completed, the round began). */
static void until_started(world *x, int n)
{
    while (x->n_started < n && !ah_worker_finished(x->worker))
        ah_loop_run_once(x->loop, 100);
    assert_int_equal(x->n_started, n);
}

static void until_finished(world *x)
{
    while (!ah_worker_finished(x->worker))
        ah_loop_run_once(x->loop, 100);
}

static const ah_msg_block *block(const ah_conversation *c, size_t m, size_t i)
{
    assert_true(m < ah_conversation_count(c));
    assert_true(i < ah_conversation_block_count(c, m));
    return ah_conversation_block(c, m, i);
}

/* Three calls, one at a time: call 0 answers, call 1 is running and call 2 has not
 * started when the run is cancelled. */
static void cancel_in_a_tool_round_answers_every_call(void **state)
{
    (void)state;
    for (int wire = 0; wire < AH_WIRE_COUNT_; wire++) {
        world x;
        world_open(&x, (ah_wire)wire, "[{\"ok\":true,\"tool_calls\":3}]", 1, NULL);
        assert_int_equal(ah_worker_start(x.worker, "use slow"), AH_OK);
        until_started(&x, 1);
        ah_tool_response ok = {
            .outcome = AH_TOOL_OK, .content = "first done", .attempts = 1};
        assert_int_equal(ah_worker_tool_done(x.worker, 0, &ok), AH_OK);
        assert_int_equal(x.n_started, 2); /* the slot went to call 1 */
        ah_worker_cancel_with(x.worker, "stop");
        until_finished(&x);
        assert_int_equal(ah_worker_outcome(x.worker), AH_OUTCOME_CANCELLED);

        const ah_conversation *c = ah_worker_history(x.worker);
        assert_int_equal(ah_conversation_count(c), 3); /* question, calls, results */
        assert_int_equal(ah_conversation_role(c, 2), AH_ROLE_USER);
        assert_int_equal(ah_conversation_block_count(c, 2), 3);
        size_t k = 0; /* the calls follow the text block "I will call slow now." */
        for (size_t i = 0; i < ah_conversation_block_count(c, 1); i++) {
            const ah_msg_block *use = block(c, 1, i);
            if (use->kind != AH_MSG_TOOL_USE)
                continue;
            const ah_msg_block *res = block(c, 2, k++);
            assert_int_equal(res->kind, AH_MSG_TOOL_RESULT);
            assert_string_equal(res->tool_use_id, use->id); /* in call order */
        }
        assert_int_equal(k, 3);
        assert_string_equal(block(c, 2, 0)->text, "first done");
        assert_false(block(c, 2, 0)->is_error);
        assert_string_equal(block(c, 2, 1)->text, AH_TOOL_CANCELLED_RUNNING);
        assert_true(block(c, 2, 1)->is_error);
        assert_string_equal(block(c, 2, 2)->text, AH_TOOL_CANCELLED_WAITING);
        assert_true(block(c, 2, 2)->is_error);
        assert_int_equal(event_log_count(&x.log, "run_end"), 1);
        cJSON *end = event_log_find(&x.log, "run_end", 0);
        assert_string_equal(cJSON_GetObjectItem(end, "outcome")->valuestring,
                            "cancelled");
        cJSON_Delete(end);
        assert_int_equal(ah_mock_request_count(x.mock), 1);

        /* The conversation goes on: the mock (like the providers) takes it. */
        ah_conversation *h = ah_conversation_copy(c);
        world_close(&x);
        world y;
        world_open(&y, (ah_wire)wire, NULL, 0, h);
        assert_int_equal(ah_worker_run(y.worker, "and now?"), AH_OUTCOME_COMPLETED);
        assert_int_equal(y.n_started, 0);
        ah_mock_request r;
        assert_int_equal(ah_mock_request_get(y.mock, 0, &r), AH_OK);
        assert_int_equal(r.status, 200);
        assert_non_null(strstr(r.body, "its effect may or may not have happened"));
        world_close(&y);
        ah_conversation_free(h);
    }
}

/* Every call running at the cancel is answered as cancelled; a late answer adds nothing
 * to the closed round. */
static void late_answers_leave_the_closed_round_alone(void **state)
{
    (void)state;
    world x;
    world_open(&x, AH_WIRE_ANTHROPIC, "[{\"ok\":true,\"tool_calls\":2}]", 0, NULL);
    assert_int_equal(ah_worker_start(x.worker, "use slow"), AH_OK);
    until_started(&x, 2);
    ah_worker_cancel(x.worker);
    until_finished(&x);
    const ah_conversation *c = ah_worker_history(x.worker);
    assert_int_equal(ah_conversation_count(c), 3);
    assert_string_equal(block(c, 2, 0)->text, AH_TOOL_CANCELLED_RUNNING);
    assert_string_equal(block(c, 2, 1)->text, AH_TOOL_CANCELLED_RUNNING);
    ah_tool_response late = {.outcome = AH_TOOL_OK, .content = "late"};
    assert_int_equal(ah_worker_tool_done(x.worker, 0, &late), AH_ERR_STATE);
    assert_int_equal(ah_conversation_count(c), 3);
    assert_int_equal(ah_conversation_block_count(c, 2), 2);
    assert_string_equal(block(c, 2, 0)->text, AH_TOOL_CANCELLED_RUNNING);
    world_close(&x);
}

/* A cancel is handled at the loop's next step; an answer that comes before that frees a
 * slot, and no call may start in it: the run was cancelled (the soak found call 1 started
 * after a cancel from call 0's exec, when call 0's answer came first). */
static void no_call_starts_after_a_cancel(void **state)
{
    (void)state;
    world x;
    world_open(&x, AH_WIRE_ANTHROPIC, "[{\"ok\":true,\"tool_calls\":3}]", 1, NULL);
    assert_int_equal(ah_worker_start(x.worker, "use slow"), AH_OK);
    until_started(&x, 1);
    ah_worker_cancel(x.worker);
    ah_tool_response ok = {.outcome = AH_TOOL_OK, .content = "first done", .attempts = 1};
    assert_int_equal(ah_worker_tool_done(x.worker, 0, &ok), AH_OK); /* the round is open */
    assert_int_equal(x.n_started, 1);
    until_finished(&x);
    assert_int_equal(x.n_started, 1);
    assert_int_equal(ah_worker_outcome(x.worker), AH_OUTCOME_CANCELLED);
    const ah_conversation *c = ah_worker_history(x.worker);
    assert_int_equal(ah_conversation_block_count(c, 2), 3);
    assert_string_equal(block(c, 2, 0)->text, "first done");
    assert_string_equal(block(c, 2, 1)->text, AH_TOOL_CANCELLED_WAITING);
    assert_string_equal(block(c, 2, 2)->text, AH_TOOL_CANCELLED_WAITING);
    world_close(&x);
}

/* A cancel from the on_event hook at a call's tool_call_start: that call does not run
 * (and neither do the ones after it), and history says it did not. */
static void a_cancel_at_tool_call_start_keeps_the_call_from_running(void **state)
{
    (void)state;
    world x;
    world_open(&x, AH_WIRE_OPENAI, "[{\"ok\":true,\"tool_calls\":3}]", 0, NULL);
    x.cancel_at_start = 2;
    assert_int_equal(ah_worker_start(x.worker, "use slow"), AH_OK);
    until_finished(&x);
    assert_int_equal(ah_worker_outcome(x.worker), AH_OUTCOME_CANCELLED);
    assert_int_equal(x.n_started, 1); /* call 0 only */
    assert_int_equal(x.started[0], 0);
    const ah_conversation *c = ah_worker_history(x.worker);
    assert_int_equal(ah_conversation_block_count(c, 2), 3);
    assert_string_equal(block(c, 2, 0)->text, AH_TOOL_CANCELLED_RUNNING);
    assert_string_equal(block(c, 2, 1)->text, AH_TOOL_CANCELLED_WAITING);
    assert_string_equal(block(c, 2, 2)->text, AH_TOOL_CANCELLED_WAITING);
    world_close(&x);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(cancel_in_a_tool_round_answers_every_call),
        cmocka_unit_test(late_answers_leave_the_closed_round_alone),
        cmocka_unit_test(no_call_starts_after_a_cancel),
        cmocka_unit_test(a_cancel_at_tool_call_start_keeps_the_call_from_running),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
