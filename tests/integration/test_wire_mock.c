/* test_wire_mock.c - the worker against the built-in mock over loopback, at the edges of
 * the wire: a complete response followed by an unclean close (no final chunk, a reset, a
 * Content-Length larger than the body) is complete; content after the final event is
 * ignored; an error body that never ends is dropped at the cap; one that stalls is a
 * timeout; a 200 that is not an event stream is decoded as JSON or refused at once. All
 * three wire formats. */
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

static const char *ADD_SCHEMA =
    "{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"integer\"},"
    "\"b\":{\"type\":\"integer\"}},\"required\":[\"a\",\"b\"]}";

static const ah_wire WIRES[] = {AH_WIRE_ANTHROPIC, AH_WIRE_OPENAI, AH_WIRE_RESPONSES};

typedef struct harness {
    ah_mock *mock;
    ah_loop *loop;
    ah_client *client;
    ah_worker *worker;
    int events[AH_EV_COUNT_];
    int tool_runs;
    char tool_names[256];
    int invalid_lines; /* events whose JSON is not valid UTF-8 */
    int replacement_seen;
} harness;

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

static void on_event(void *ud, const ah_event *ev)
{
    harness *h = ud;
    h->events[ev->type]++;
    char *json = ah_event_to_json(ev); /* what --events writes, one line per event */
    assert_non_null(json);
    h->invalid_lines += !valid_utf8(json);
    h->replacement_seen |= strstr(json, "\xEF\xBF\xBD") != NULL;
    free(json);
}

static int run_tool(void *ud, ah_worker *w, const ah_tool_request *req, ah_tool_response *res)
{
    harness *h = ud;
    (void)w;
    h->tool_runs++;
    strncat(h->tool_names, req->name, sizeof h->tool_names - strlen(h->tool_names) - 2);
    strcat(h->tool_names, ",");
    res->outcome = AH_TOOL_OK;
    res->content = "5";
    res->attempts = 1;
    return 0;
}

typedef struct opts {
    ah_wire wire;
    const char *plan;
    int tools;
    int64_t attempt_timeout_ms;
    int64_t idle_timeout_ms;
    int max_attempts;
} opts;

static ah_run_outcome run(harness *h, const opts *o)
{
    memset(h, 0, sizeof *h);
    ah_mock_config mc;
    ah_mock_config_init(&mc);
    mc.plan_json = o->plan;
    char err[256];
    ah_mock_new(&mc, &h->mock, err, sizeof err);
    if (!h->mock)
        fail_msg("mock: %s", err);
    h->loop = ah_loop_new(ah_clock_real(), NULL);
    ah_client_config cc = {.wire = o->wire,
                           .base_url = ah_mock_url(h->mock),
                           .model = "mock-model",
                           .max_tokens = 256};
    ah_client_new(&cc, &h->client, err, sizeof err);
    assert_non_null(h->client);
    ah_policy pol;
    ah_policy_init(&pol);
    pol.base_ms = 1;
    pol.cap_ms = 5;
    pol.attempt_timeout_ms = o->attempt_timeout_ms;
    pol.idle_timeout_ms = o->idle_timeout_ms;
    if (o->max_attempts)
        pol.max_attempts = o->max_attempts;
    ah_tool_def tool = {.name = "add", .description = "Add", .schema_json = ADD_SCHEMA};
    ah_worker_config wc = {.loop = h->loop,
                           .client = h->client,
                           .policy = &pol,
                           .tools = o->tools ? &tool : NULL,
                           .n_tools = o->tools ? 1 : 0,
                           .tool_exec = run_tool,
                           .tool_ud = h,
                           .on_event = on_event,
                           .event_ud = h};
    ah_worker_new(&wc, &h->worker, err, sizeof err);
    if (!h->worker)
        fail_msg("worker: %s", err);
    return ah_worker_run(h->worker, "Add 2 and 3 please.");
}

static void done(harness *h)
{
    ah_worker_free(h->worker);
    ah_client_free(h->client);
    ah_loop_free(h->loop);
    ah_mock_free(h->mock);
}

static size_t count_str(const char *hay, const char *needle)
{
    size_t n = 0;
    for (const char *p = hay; (p = strstr(p, needle)) != NULL; p += strlen(needle))
        n++;
    return n;
}

/* ---- item: complete, then an unclean close ----------------------------------------- */

static void complete_then_unclean_close_is_complete(void **state)
{
    (void)state;
    static const char *const modes[] = {"no_final_chunk", "reset", "short_content_length"};
    for (size_t wi = 0; wi < 3; wi++) {
        for (size_t mi = 0; mi < 3; mi++) {
            char plan[160];
            snprintf(plan, sizeof plan,
                     "{\"steps\": [], \"then\": {\"ok\": true, "
                     "\"unclean_close_after_end\": \"%s\"}}",
                     modes[mi]);
            harness h;
            opts o = {.wire = WIRES[wi], .plan = plan, .tools = 1};
            ah_run_outcome out = run(&h, &o);
            const char *text = ah_worker_text(h.worker);
            if (out != AH_OUTCOME_COMPLETED || h.events[AH_EV_LLM_CONTINUATION] != 0)
                fail_msg("%s / %s: outcome %s, %d continuation(s), error '%s'",
                         ah_wire_name(WIRES[wi]), modes[mi], ah_run_outcome_name(out),
                         h.events[AH_EV_LLM_CONTINUATION],
                         ah_worker_error(h.worker)->message);
            assert_int_equal(h.tool_runs, 1); /* the completed tool call ran, once */
            assert_int_equal(h.events[AH_EV_LLM_CALL_START], 2);
            assert_int_equal(h.events[AH_EV_LLM_CALL_END], 2);
            assert_int_equal(count_str(text, "The tool returned: 5"), 1); /* not repeated */
            done(&h);
        }
    }
}

/* A tool call (and a second end) sent after the final event is not part of the answer:
 * no tool runs, no second request. */
static void content_after_the_end_is_ignored(void **state)
{
    (void)state;
    for (size_t wi = 0; wi < 3; wi++) {
        harness h;
        opts o = {.wire = WIRES[wi],
                  .plan = "{\"steps\": [], \"then\": {\"ok\": true, \"extra_after_end\": true}}"};
        ah_run_outcome out = run(&h, &o);
        if (out != AH_OUTCOME_COMPLETED)
            fail_msg("%s: outcome %s: %s", ah_wire_name(WIRES[wi]),
                     ah_run_outcome_name(out), ah_worker_error(h.worker)->message);
        assert_int_equal(h.events[AH_EV_TOOL_CALL_START], 0);
        assert_int_equal(h.events[AH_EV_LLM_CALL_START], 1);
        assert_null(strstr(ah_worker_text(h.worker), "extra"));
        done(&h);
    }
}

/* ---- item: error bodies ---------------------------------------------------------------- */

static void on_alarm(int sig)
{
    (void)sig;
    static const char msg[] = "test_wire_mock: the run hung (an error body read forever?)\n";
    ssize_t r = write(2, msg, sizeof msg - 1);
    (void)r;
    _exit(3);
}

/* A 503 whose body never ends: the connection is dropped at the 64 KiB
 * cap and the attempt classified from what was read (retried as a 503, then ok). */
static void endless_error_body_is_dropped_at_the_cap(void **state)
{
    (void)state;
    signal(SIGALRM, on_alarm);
    alarm(20);
    for (size_t wi = 0; wi < 3; wi++) {
        harness h;
        opts o = {.wire = WIRES[wi],
                  .plan = "[{\"status\": 503, \"body_fault\": \"endless\"}, "
                          "{\"status\": 503, \"body_fault\": \"endless\"}]"};
        ah_run_outcome out = run(&h, &o);
        if (out != AH_OUTCOME_COMPLETED)
            fail_msg("%s: outcome %s: %s", ah_wire_name(WIRES[wi]),
                     ah_run_outcome_name(out), ah_worker_error(h.worker)->message);
        assert_int_equal(h.events[AH_EV_LLM_RETRY], 2);
        assert_int_equal(h.events[AH_EV_LLM_CALL_START], 3);
        done(&h);
    }
    alarm(0);
}

/* A 503 whose body stops half way and stays silent: a timeout (idle_timeout_ms bounds
 * it), retried; the run completes. Without the bound it hung forever. */
static void stalled_error_body_is_a_timeout(void **state)
{
    (void)state;
    signal(SIGALRM, on_alarm);
    alarm(20);
    harness h;
    opts o = {.wire = AH_WIRE_ANTHROPIC,
              .idle_timeout_ms = 200,
              .plan = "[{\"status\": 503, \"body_fault\": \"stall\"}]"};
    ah_run_outcome out = run(&h, &o);
    if (out != AH_OUTCOME_COMPLETED)
        fail_msg("outcome %s: %s", ah_run_outcome_name(out),
                 ah_worker_error(h.worker)->message);
    assert_int_equal(h.events[AH_EV_LLM_RETRY], 1);
    done(&h);
    /* Every attempt stalls: the run gives up with a timeout naming the error body. */
    o.plan = "{\"steps\": [], \"then\": {\"status\": 503, \"body_fault\": \"stall\"}}";
    o.max_attempts = 2;
    out = run(&h, &o);
    assert_int_equal(out, AH_OUTCOME_FAILED);
    const ah_error *e = ah_worker_error(h.worker);
    assert_int_equal(e->kind, AH_EK_TIMEOUT);
    assert_non_null(strstr(e->message, "error body stalled"));
    done(&h);
    alarm(0);
}

/* ---- item: a 200 that is not an event stream -------------------------------------------- */

/* A proxy answered `stream: true` with the JSON body: decoded as the non-stream response
 * it is (tool call included), not resent as a broken stream. */
static void json_200_is_decoded_as_a_response(void **state)
{
    (void)state;
    for (size_t wi = 0; wi < 3; wi++) {
        harness h;
        opts o = {.wire = WIRES[wi],
                  .tools = 1,
                  .plan = "{\"steps\": [], \"then\": {\"ok\": true, \"json_body\": true}}"};
        ah_run_outcome out = run(&h, &o);
        if (out != AH_OUTCOME_COMPLETED)
            fail_msg("%s: outcome %s: %s", ah_wire_name(WIRES[wi]),
                     ah_run_outcome_name(out), ah_worker_error(h.worker)->message);
        assert_int_equal(h.tool_runs, 1);
        assert_int_equal(h.events[AH_EV_LLM_CONTINUATION], 0);
        assert_int_equal(h.events[AH_EV_LLM_CALL_START], 2);
        assert_true(h.events[AH_EV_TEXT_DELTA] >= 1); /* the text is shown */
        assert_non_null(strstr(ah_worker_text(h.worker), "The tool returned: 5"));
        done(&h);
    }
}

/* text/html or a 204: fails at once, naming what came, neither retried nor continued. */
static void non_stream_200_fails_at_once(void **state)
{
    (void)state;
    static const struct {
        const char *plan, *needle;
    } cases[] = {
        {"[{\"status\": 200, \"body\": \"<html>proxy login</html>\", "
         "\"content_type\": \"text/html; charset=utf-8\"}]",
         "text/html"},
        {"[{\"status\": 204}]", "204"},
    };
    for (size_t ci = 0; ci < 2; ci++) {
        for (size_t wi = 0; wi < 3; wi++) {
            harness h;
            opts o = {.wire = WIRES[wi], .plan = cases[ci].plan};
            ah_run_outcome out = run(&h, &o);
            const ah_error *e = ah_worker_error(h.worker);
            assert_int_equal(out, AH_OUTCOME_FAILED);
            if (!strstr(e->message, cases[ci].needle))
                fail_msg("%s: '%s' does not name %s", ah_wire_name(WIRES[wi]), e->message,
                         cases[ci].needle);
            assert_int_equal(e->kind, AH_EK_DECODE);
            assert_int_equal(h.events[AH_EV_LLM_CALL_START], 1);
            assert_int_equal(h.events[AH_EV_LLM_CONTINUATION], 0);
            assert_int_equal(ah_mock_request_count(h.mock), 1);
            done(&h);
        }
    }
}

/* ---- item: invalid UTF-8 from the provider ----------------------------------------------- */

/* The reply text starts with the bytes FF FE: every event line stays valid UTF-8 (the
 * bytes are U+FFFD), and so do the answer and the next request body. */
static void provider_invalid_utf8_becomes_replacement(void **state)
{
    (void)state;
    for (size_t wi = 0; wi < 3; wi++) {
        harness h;
        opts o = {.wire = WIRES[wi],
                  .tools = 1,
                  .plan = "{\"steps\": [], \"then\": {\"ok\": true, \"invalid_utf8\": true}}"};
        ah_run_outcome out = run(&h, &o);
        if (out != AH_OUTCOME_COMPLETED)
            fail_msg("%s: outcome %s: %s", ah_wire_name(WIRES[wi]),
                     ah_run_outcome_name(out), ah_worker_error(h.worker)->message);
        assert_int_equal(h.invalid_lines, 0);
        assert_true(h.replacement_seen);
        assert_true(valid_utf8(ah_worker_text(h.worker)));
        assert_non_null(strstr(ah_worker_text(h.worker), "\xEF\xBF\xBD"));
        ah_mock_request r;
        size_t n = ah_mock_request_count(h.mock);
        assert_int_equal(n, 2);
        ah_mock_request_get(h.mock, 1, &r); /* carries the first answer's text back */
        assert_true(valid_utf8(r.body));
        done(&h);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(complete_then_unclean_close_is_complete),
        cmocka_unit_test(content_after_the_end_is_ignored),
        cmocka_unit_test(endless_error_body_is_dropped_at_the_cap),
        cmocka_unit_test(stalled_error_body_is_a_timeout),
        cmocka_unit_test(json_200_is_decoded_as_a_response),
        cmocka_unit_test(non_stream_200_fails_at_once),
        cmocka_unit_test(provider_invalid_utf8_becomes_replacement),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
