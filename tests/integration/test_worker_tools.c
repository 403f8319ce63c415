/* test_worker_tools.c - the tool calls of one response, run concurrently and bounded:
 * max_tool_concurrency caps the calls in flight, an exclusive tool runs alone, results
 * enter history in call order whatever order they are answered in, and a cancel ends a
 * round that waits for tools at once (late answers are refused).
 *
 * A scripted transport answers the first request with N tool_use blocks (Anthropic SSE)
 * and any request holding tool results with a short text, so a response can carry as
 * many calls as a case needs; the tools answer later (exec returns 1), in the order the
 * test chooses. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agenthost.h"

/* ---- the scripted transport -------------------------------------------------------- */

typedef struct script {
    const char *const *names; /* the tool of each call of the first response */
    size_t n;
    int requests;
} script;

typedef struct attempt {
    ah_timer *timer;
    const ah_transport_sink *sink;
    void *sink_ud;
    char *body;
} attempt;

static void append(char **buf, size_t *len, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    char tmp[1024];
    int n = vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    *buf = realloc(*buf, *len + (size_t)n + 1);
    assert_non_null(*buf);
    memcpy(*buf + *len, tmp, (size_t)n + 1);
    *len += (size_t)n;
}

static char *sse_reply(const script *s, int with_results)
{
    char *b = NULL;
    size_t len = 0;
    append(&b, &len,
           "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":"
           "\"msg_1\",\"type\":\"message\",\"role\":\"assistant\",\"model\":\"m\","
           "\"content\":[],\"stop_reason\":null,\"usage\":{\"input_tokens\":3,"
           "\"output_tokens\":1}}}\n\n");
    if (with_results) {
        append(&b, &len,
               "event: content_block_start\ndata: {\"type\":\"content_block_start\","
               "\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n"
               "event: content_block_delta\ndata: {\"type\":\"content_block_delta\","
               "\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"done\"}}\n\n"
               "event: content_block_stop\ndata: {\"type\":\"content_block_stop\","
               "\"index\":0}\n\n");
    } else {
        for (size_t i = 0; i < s->n; i++)
            append(&b, &len,
                   "event: content_block_start\ndata: {\"type\":\"content_block_start\","
                   "\"index\":%zu,\"content_block\":{\"type\":\"tool_use\",\"id\":"
                   "\"toolu_%zu\",\"name\":\"%s\",\"input\":{}}}\n\n"
                   "event: content_block_delta\ndata: {\"type\":\"content_block_delta\","
                   "\"index\":%zu,\"delta\":{\"type\":\"input_json_delta\","
                   "\"partial_json\":\"{}\"}}\n\n"
                   "event: content_block_stop\ndata: {\"type\":\"content_block_stop\","
                   "\"index\":%zu}\n\n",
                   i, i, s->names[i], i, i);
    }
    append(&b, &len,
           "event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{"
           "\"stop_reason\":\"%s\",\"stop_sequence\":null},\"usage\":{\"output_tokens\":"
           "5}}\n\nevent: message_stop\ndata: {\"type\":\"message_stop\"}\n\n",
           with_results ? "end_turn" : "tool_use");
    return b;
}

static void attempt_free(attempt *a)
{
    ah_timer_free(a->timer);
    free(a->body);
    free(a);
}

static void deliver(void *ud)
{
    attempt *a = ud;
    ah_header h = {"content-type", "text/event-stream"};
    ah_error ok;
    ah_error_clear(&ok);
    if (a->sink->on_head(a->sink_ud, 200, &h, 1) == 0)
        a->sink->on_body(a->sink_ud, a->body, strlen(a->body));
    const ah_transport_sink *sink = a->sink;
    void *sud = a->sink_ud;
    attempt_free(a);
    sink->on_done(sud, &ok);
}

static ah_status fake_start(void *self, ah_loop *loop, const ah_http_request *req,
                            const ah_transport_sink *sink, void *sink_ud, void **out,
                            ah_error *err)
{
    (void)err;
    script *s = self;
    s->requests++;
    attempt *a = calloc(1, sizeof *a);
    assert_non_null(a);
    a->sink = sink;
    a->sink_ud = sink_ud;
    a->body = sse_reply(s, strstr(req->body, "tool_result") != NULL);
    a->timer = ah_timer_new(loop, deliver, a);
    ah_timer_start(a->timer, 0);
    *out = a;
    return AH_OK;
}

static void fake_abort(void *self, void *handle)
{
    (void)self;
    attempt_free(handle);
}

static const ah_transport_ops fake_ops = {"scripted", fake_start, fake_abort};

/* ---- tools that answer when the test says so --------------------------------------- */

typedef struct world {
    ah_loop *loop;
    ah_client *client;
    ah_worker *w;
    script s;
    ah_transport tr;
    size_t started[32]; /* call indexes, in start order */
    int in_flight_at_start[32];
    size_t n_started;
    int in_flight, max_in_flight;
    int answered[32];
    char contents[32][24];
} world;

static int exec_later(void *ud, ah_worker *w, const ah_tool_request *req,
                      ah_tool_response *res)
{
    (void)w, (void)res;
    world *x = ud;
    x->in_flight++;
    if (x->in_flight > x->max_in_flight)
        x->max_in_flight = x->in_flight;
    x->in_flight_at_start[x->n_started] = x->in_flight;
    x->started[x->n_started++] = req->index;
    return 1;
}

static void answer(world *x, size_t index)
{
    snprintf(x->contents[index], sizeof x->contents[index], "r%zu", index);
    ah_tool_response res = {.outcome = AH_TOOL_OK, .content = x->contents[index],
                            .attempts = 1};
    x->answered[index] = 1;
    x->in_flight--;
    assert_int_equal(ah_worker_tool_done(x->w, index, &res), AH_OK);
}

static void world_start(world *x, const char *const *names, size_t n, int max_conc,
                        const int *exclusive)
{
    memset(x, 0, sizeof *x);
    x->loop = ah_loop_new(NULL, NULL);
    assert_non_null(x->loop);
    char err[256];
    ah_client_config cc = {.wire = AH_WIRE_ANTHROPIC,
                           .base_url = "http://127.0.0.1:9",
                           .model = "m"};
    ah_client_new(&cc, &x->client, err, sizeof err);
    assert_non_null(x->client);
    x->s.names = names;
    x->s.n = n;
    x->tr.ops = &fake_ops;
    x->tr.self = &x->s;
    ah_tool_def tools[2] = {{.name = "fast"}, {.name = "solo"}};
    ah_worker_config wc = {.loop = x->loop,
                           .client = x->client,
                           .tools = tools,
                           .n_tools = 2,
                           .tool_exec = exec_later,
                           .tool_ud = x,
                           .transport = &x->tr,
                           .max_tool_concurrency = max_conc,
                           .tool_exclusive = exclusive};
    ah_worker_new(&wc, &x->w, err, sizeof err);
    if (!x->w)
        fail_msg("worker: %s", err);
    assert_int_equal(ah_worker_start(x->w, "go"), AH_OK);
}

static void world_stop(world *x)
{
    ah_worker_free(x->w);
    ah_client_free(x->client);
    ah_loop_free(x->loop);
}

/* Step until every started call is waiting and nothing else moves. */
static void settle(world *x)
{
    for (int i = 0; i < 50 && !ah_worker_finished(x->w); i++)
        ah_loop_run_once(x->loop, 0);
}

/* Answer the most recently started unanswered call (so answers come out of order). */
static int answer_last(world *x)
{
    for (size_t i = x->n_started; i-- > 0;) {
        if (!x->answered[x->started[i]]) {
            answer(x, x->started[i]);
            return 1;
        }
    }
    return 0;
}

static void run_to_end(world *x)
{
    for (int guard = 0; guard < 1000 && !ah_worker_finished(x->w); guard++) {
        settle(x);
        if (!answer_last(x))
            ah_loop_run_once(x->loop, 10);
    }
    assert_true(ah_worker_finished(x->w));
}

static void results_in_call_order(world *x, size_t n)
{
    const ah_conversation *c = ah_worker_history(x->w);
    /* user, assistant (n tool_use), user (n tool_result), assistant text */
    assert_int_equal(ah_conversation_count(c), 4);
    assert_int_equal(ah_conversation_block_count(c, 2), n);
    for (size_t i = 0; i < n; i++) {
        const ah_msg_block *b = ah_conversation_block(c, 2, i);
        char id[32], content[32];
        snprintf(id, sizeof id, "toolu_%zu", i);
        snprintf(content, sizeof content, "r%zu", i);
        assert_string_equal(b->tool_use_id, id);
        assert_string_equal(b->text, content);
    }
}

static void bound_caps_calls_in_flight(void **state)
{
    (void)state;
    static const char *const names[] = {"fast", "fast", "fast", "fast", "fast", "fast"};
    world x;
    world_start(&x, names, 6, 2, NULL);
    run_to_end(&x);
    assert_int_equal(ah_worker_outcome(x.w), AH_OUTCOME_COMPLETED);
    assert_int_equal(x.n_started, 6);
    assert_int_equal(x.max_in_flight, 2);
    for (size_t i = 0; i < 6; i++)
        assert_int_equal(x.started[i], i); /* started in call order */
    results_in_call_order(&x, 6);
    ah_worker_stats st;
    ah_worker_get_stats(x.w, &st);
    assert_int_equal(st.tool_calls, 6);
    assert_int_equal(x.s.requests, 2);
    world_stop(&x);
}

static void default_bound_is_eight(void **state)
{
    (void)state;
    static const char *const names[] = {"fast", "fast", "fast", "fast", "fast",
                                        "fast", "fast", "fast", "fast", "fast"};
    world x;
    world_start(&x, names, 10, 0, NULL);
    settle(&x);
    assert_int_equal(x.n_started, 8); /* the first 8 at once, then wait */
    run_to_end(&x);
    assert_int_equal(x.max_in_flight, 8);
    results_in_call_order(&x, 10);
    world_stop(&x);
}

static void exclusive_tool_runs_alone(void **state)
{
    (void)state;
    static const char *const names[] = {"fast", "fast", "solo", "fast", "fast"};
    static const int exclusive[] = {0, 1}; /* fast, solo */
    world x;
    world_start(&x, names, 5, 8, exclusive);
    settle(&x);
    assert_int_equal(x.n_started, 2); /* fast, fast; solo waits for them */
    run_to_end(&x);
    assert_int_equal(x.n_started, 5);
    for (size_t i = 0; i < 5; i++)
        assert_int_equal(x.started[i], i);
    assert_int_equal(x.in_flight_at_start[1], 2); /* the two fast ones together */
    assert_int_equal(x.in_flight_at_start[2], 1); /* solo alone */
    assert_int_equal(x.in_flight_at_start[3], 1); /* nothing beside solo */
    assert_int_equal(x.in_flight_at_start[4], 2);
    results_in_call_order(&x, 5);
    world_stop(&x);
}

static void cancel_ends_a_round_of_waiting_tools(void **state)
{
    (void)state;
    static const char *const names[] = {"fast", "fast", "fast"};
    world x;
    world_start(&x, names, 3, 0, NULL);
    settle(&x);
    assert_int_equal(x.n_started, 3);
    answer(&x, 1);
    ah_worker_cancel_with(x.w, "stop");
    settle(&x);
    assert_true(ah_worker_finished(x.w));
    assert_int_equal(ah_worker_outcome(x.w), AH_OUTCOME_CANCELLED);
    assert_string_equal(ah_worker_error(x.w)->message, "cancelled: stop");
    ah_tool_response res = {.outcome = AH_TOOL_OK, .content = "late"};
    assert_int_equal(ah_worker_tool_done(x.w, 0, &res), AH_ERR_STATE);
    assert_int_equal(x.s.requests, 1); /* no further request */
    world_stop(&x);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(bound_caps_calls_in_flight),
        cmocka_unit_test(default_bound_is_eight),
        cmocka_unit_test(exclusive_tool_runs_alone),
        cmocka_unit_test(cancel_ends_a_round_of_waiting_tools),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
