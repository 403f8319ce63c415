/* test_resume.c - OpenAI Responses background mode over real loopback sockets against the
 * built-in mock: a stream that breaks after its head is re-attached to the same response
 * at the last sequence number (GET /v1/responses/{id}?stream=true&starting_after=N) and
 * completes as if it had never broken; a refused re-attach falls back to a new request;
 * re-attaches count against max_continuations; a cancel asks the provider to cancel the
 * response (POST /v1/responses/{id}/cancel). */
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

#define KEY "sk-PLANTEDKEY-resume-0123456789"
#define TEXT "One two three four five six seven eight."

static const char *ADD_SCHEMA =
    "{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"integer\"},"
    "\"b\":{\"type\":\"integer\"}},\"required\":[\"a\",\"b\"]}";

/* ---- harness ------------------------------------------------------------------------------ */

typedef struct harness {
    ah_mock *mock;
    ah_loop *loop;
    ah_client *client;
    ah_worker *worker;
    event_log log; /* every event as JSON, in order */
    int tool_runs;
    int cancel_on_continuation; /* cancel at the n-th llm_continuation (1-based), 0 = never */
    int cancel_on_resumed_delta; /* cancel at the first text_delta after a resume */
    int continuations_seen, resumed;
    char last_args[256]; /* the arguments of the last tool call run */
    char deltas[4096]; /* every text_delta, concatenated */
    size_t deltas_len;
} harness;

static void record_event(void *ud, const ah_event *ev)
{
    harness *h = ud;
    event_log_add(&h->log, ev);
    if (ev->type == AH_EV_TEXT_DELTA) {
        assert_true(h->deltas_len + ev->u.delta.len < sizeof h->deltas);
        memcpy(h->deltas + h->deltas_len, ev->u.delta.text, ev->u.delta.len);
        h->deltas_len += ev->u.delta.len;
        h->deltas[h->deltas_len] = '\0';
        if (h->resumed && h->cancel_on_resumed_delta)
            ah_worker_cancel(h->worker);
    }
    if (ev->type == AH_EV_LLM_CONTINUATION) {
        h->continuations_seen++;
        h->resumed |= ev->u.llm_continuation.mode == AH_CONT_RESUME;
        if (h->cancel_on_continuation == h->continuations_seen)
            ah_worker_cancel(h->worker);
    }
}

static int add_tool(void *ud, ah_worker *w, const ah_tool_request *req, ah_tool_response *res)
{
    harness *h = ud;
    (void)w;
    cJSON *args = cJSON_Parse(req->arguments);
    assert_non_null(args);
    cJSON_Delete(args);
    snprintf(h->last_args, sizeof h->last_args, "%s", req->arguments);
    h->tool_runs++;
    res->outcome = AH_TOOL_OK;
    res->content = "3";
    res->attempts = 1;
    return 0;
}

typedef struct opts {
    const char *plan;
    const char *text; /* mock reply text, or NULL for the model's */
    size_t text_deltas;
    int tools;
    int max_continuations; /* 0 = default */
    int background;
    const char *extra_json;
    const char *continue_prompt;
    int64_t idle_timeout_ms;
} opts;

static void harness_start(harness *h, const opts *o)
{
    memset(h, 0, sizeof *h);
    ah_mock_config mc;
    ah_mock_config_init(&mc);
    mc.plan_json = o->plan;
    mc.text = o->text;
    mc.text_deltas = o->text_deltas;
    ah_client_config cc = {.wire = AH_WIRE_RESPONSES,
                           .api_key = KEY,
                           .model = "mock-model",
                           .max_tokens = 256,
                           .extra_json = o->extra_json,
                           .background = o->background};
    rig_open(&mc, &cc, &h->mock, &h->loop, &h->client);
    char err[256];
    ah_policy pol;
    ah_policy_init(&pol);
    pol.base_ms = 1;
    pol.cap_ms = 5;
    pol.idle_timeout_ms = o->idle_timeout_ms;
    if (o->max_continuations > 0)
        pol.max_continuations = o->max_continuations;
    ah_tool_def tool = {.name = "add", .description = "Add two integers",
                        .schema_json = ADD_SCHEMA};
    ah_worker_config wc = {.loop = h->loop,
                           .client = h->client,
                           .system = "You are a test.",
                           .policy = &pol,
                           .tools = o->tools ? &tool : NULL,
                           .n_tools = o->tools ? 1 : 0,
                           .tool_exec = add_tool,
                           .tool_ud = h,
                           .on_event = record_event,
                           .event_ud = h,
                           .continue_prompt = o->continue_prompt};
    ah_worker_new(&wc, &h->worker, err, sizeof err);
    if (!h->worker)
        fail_msg("worker: %s", err);
}

static void harness_stop(harness *h)
{
    rig_close(h->worker, h->client, h->loop, h->mock, &h->log);
}

/* The string field of the nth event of a type ("" if absent); static buffer. */
static const char *event_str(const harness *h, const char *type, size_t nth, const char *field)
{
    static char out[512];
    out[0] = '\0';
    cJSON *o = event_log_find(&h->log, type, nth);
    const cJSON *v = cJSON_GetObjectItem(o, field);
    if (cJSON_IsString(v))
        snprintf(out, sizeof out, "%s", v->valuestring);
    cJSON_Delete(o);
    return out;
}

/* Requests of the mock log with this method and path prefix. */
static size_t count_requests(harness *h, const char *method, const char *prefix)
{
    size_t n = 0;
    ah_mock_request r;
    for (size_t i = 0; i < ah_mock_request_count(h->mock); i++) {
        assert_int_equal(ah_mock_request_get(h->mock, i, &r), AH_OK);
        n += strcmp(r.method, method) == 0 && strncmp(r.path, prefix, strlen(prefix)) == 0;
    }
    return n;
}

/* The path of the nth request with this method (NULL if none). */
static const char *request_path(harness *h, const char *method, size_t nth)
{
    ah_mock_request r;
    for (size_t i = 0; i < ah_mock_request_count(h->mock); i++) {
        assert_int_equal(ah_mock_request_get(h->mock, i, &r), AH_OK);
        if (strcmp(r.method, method) == 0 && nth-- == 0)
            return r.path;
    }
    return NULL;
}

static long long starting_after(const char *path)
{
    const char *p = path ? strstr(path, "starting_after=") : NULL;
    return p ? strtoll(p + strlen("starting_after="), NULL, 10) : -1;
}

static void assert_no_secret(harness *h)
{
    for (size_t i = 0; i < h->log.n; i++)
        if (strstr(h->log.lines[i], "PLANTEDKEY"))
            fail_msg("secret in event: %s", h->log.lines[i]);
    ah_mock_request r;
    for (size_t i = 0; i < ah_mock_request_count(h->mock); i++) {
        assert_int_equal(ah_mock_request_get(h->mock, i, &r), AH_OK);
        for (size_t k = 0; k < r.header_count; k++)
            assert_null(strstr(r.headers[k].value, "PLANTEDKEY"));
    }
}

/* An uninterrupted background run: its final text. */
static void reference(const opts *base, char *text, size_t size)
{
    harness h;
    opts o = *base;
    o.plan = NULL;
    harness_start(&h, &o);
    assert_int_equal(ah_worker_run(h.worker, "add please"), AH_OUTCOME_COMPLETED);
    snprintf(text, size, "%s", ah_worker_text(h.worker));
    assert_int_equal(count_requests(&h, "GET", "/v1/responses/"), 0);
    harness_stop(&h);
}

/* ---- the request ---------------------------------------------------------------------------- */

static void background_request_says_background_and_store(void **state)
{
    (void)state;
    harness h;
    opts o = {.text = TEXT, .background = 1};
    harness_start(&h, &o);
    assert_int_equal(ah_worker_run(h.worker, "hi"), AH_OUTCOME_COMPLETED);
    ah_mock_request r;
    assert_int_equal(ah_mock_request_get(h.mock, 0, &r), AH_OK);
    cJSON *body = cJSON_Parse(r.body);
    assert_true(cJSON_IsTrue(cJSON_GetObjectItem(body, "background")));
    assert_true(cJSON_IsTrue(cJSON_GetObjectItem(body, "store")));
    assert_true(cJSON_IsTrue(cJSON_GetObjectItem(body, "stream")));
    cJSON_Delete(body);
    harness_stop(&h);

    /* Without background: stored nothing, no background member. */
    opts plain = {.text = TEXT};
    harness_start(&h, &plain);
    assert_int_equal(ah_worker_run(h.worker, "hi"), AH_OUTCOME_COMPLETED);
    assert_int_equal(ah_mock_request_get(h.mock, 0, &r), AH_OK);
    body = cJSON_Parse(r.body);
    assert_null(cJSON_GetObjectItem(body, "background"));
    assert_true(cJSON_IsFalse(cJSON_GetObjectItem(body, "store")));
    cJSON_Delete(body);
    harness_stop(&h);
}

static void background_without_store_is_a_400(void **state)
{
    (void)state;
    harness h;
    opts o = {.text = TEXT, .background = 1, .extra_json = "{\"store\":false}"};
    harness_start(&h, &o);
    assert_int_equal(ah_worker_run(h.worker, "hi"), AH_OUTCOME_FAILED);
    const ah_error *e = ah_worker_error(h.worker);
    assert_int_equal(e->kind, AH_EK_HTTP);
    assert_int_equal(e->status, 400);
    assert_non_null(strstr(e->message, "store"));
    assert_int_equal(ah_mock_request_count(h.mock), 1);
    harness_stop(&h);
}

static void background_needs_the_responses_provider(void **state)
{
    (void)state;
    char err[256];
    ah_client_config cc = {.wire = AH_WIRE_ANTHROPIC, .base_url = "http://127.0.0.1:1",
                           .model = "m", .background = 1};
    assert_int_not_equal(ah_client_new(&cc, &(ah_client *){NULL}, err, sizeof err), AH_OK);
    assert_non_null(strstr(err, "client.background"));
}

/* ---- resume at every cut position ------------------------------------------------------------ */

/* Cut the first response after every event index k it has (k = 1 .. events-1: the first
 * event, response.created, carries the id) and check: the run completes with exactly the
 * uninterrupted text, one POST, one GET whose starting_after is the last sequence number
 * received (k - 1), one llm_continuation with mode resume, and the text streamed to the
 * display exactly once (nothing emitted twice). Returns the number of cut positions. */
static int resume_every_cut(const opts *base, int expect_tool_runs, int *gets_total)
{
    char ref[512];
    reference(base, ref, sizeof ref);
    int positions = 0;
    for (int k = 1; k < 200; k++) {
        char plan[64];
        snprintf(plan, sizeof plan, "[{\"cut_after_events\":%d}]", k);
        harness h;
        opts o = *base;
        o.plan = plan;
        harness_start(&h, &o);
        ah_run_outcome out = ah_worker_run(h.worker, "add please");
        size_t gets = count_requests(&h, "GET", "/v1/responses/");
        if (gets == 0) {
            /* k was past the last event: the first response completed before the cut. */
            assert_int_equal(out, AH_OUTCOME_COMPLETED);
            harness_stop(&h);
            break;
        }
        if (out != AH_OUTCOME_COMPLETED)
            fail_msg("k=%d: outcome %s (%s)", k, ah_run_outcome_name(out),
                     ah_worker_error(h.worker)->message);
        if (strcmp(ah_worker_text(h.worker), ref) != 0)
            fail_msg("k=%d: text '%s' != reference '%s'", k, ah_worker_text(h.worker), ref);
        assert_int_equal(gets, 1);
        long long after = starting_after(request_path(&h, "GET", 0));
        if (k > 1 && after == k - 2) {
            /* k is past the end: the mock cuts just before the final event, as it did
             * for k - 1 (after the final event the response would be complete). */
            harness_stop(&h);
            break;
        }
        assert_int_equal(after, k - 1);
        assert_int_equal(count_requests(&h, "POST", "/v1/responses"),
                         expect_tool_runs ? 2 : 1);
        assert_int_equal(event_log_count(&h.log, "llm_continuation"), 1);
        assert_string_equal(event_str(&h, "llm_continuation", 0, "mode"), "resume");
        assert_int_equal(h.tool_runs, expect_tool_runs);
        /* What streamed past is the answer: every text once (the first response's text
         * and, with a tool, the second one's), never repeated. */
        if (!expect_tool_runs)
            assert_string_equal(h.deltas, ref);
        else
            assert_int_equal(h.deltas_len,
                             strlen("I will call add now.") + strlen(ref));
        assert_no_secret(&h);
        *gets_total += (int)gets;
        harness_stop(&h);
        positions++;
    }
    return positions;
}

static void resume_at_every_cut_position(void **state)
{
    (void)state;
    int gets = 0;
    opts o = {.text = TEXT, .text_deltas = 8, .background = 1};
    int n = resume_every_cut(&o, 0, &gets);
    print_message("text reply: %d cut positions, %d re-attaches\n", n, gets);
    assert_true(n >= 12); /* created, in_progress, item/part added, 8 deltas, ... */

    /* Cut before the first event: no response id yet, so nothing to re-attach to; the
     * ordinary continuation (a new request) takes over. */
    harness h;
    opts o0 = o;
    o0.plan = "[{\"cut_after_events\":0}]";
    harness_start(&h, &o0);
    assert_int_equal(ah_worker_run(h.worker, "hi"), AH_OUTCOME_COMPLETED);
    assert_string_equal(ah_worker_text(h.worker), TEXT);
    assert_int_equal(count_requests(&h, "GET", "/v1/responses/"), 0);
    assert_int_equal(count_requests(&h, "POST", "/v1/responses"), 2);
    assert_int_equal(event_log_count(&h.log, "llm_continuation"), 1);
    assert_string_not_equal(event_str(&h, "llm_continuation", 0, "mode"), "resume");
    harness_stop(&h);
}

static void resume_with_a_tool_call_runs_it_once(void **state)
{
    (void)state;
    int gets = 0;
    opts o = {.tools = 1, .background = 1};
    int n = resume_every_cut(&o, 1, &gets);
    print_message("tool reply: %d cut positions, %d re-attaches\n", n, gets);
    assert_true(n >= 10);
}

/* The re-attach is cut too, at every position, and the third stream (a second re-attach)
 * completes; the re-attaches may also repeat events. Each run: the exact text, streamed
 * once, one POST, two GETs, the second one's starting_after where the first re-attach
 * stopped. Then faults on the re-attach that end it otherwise (an in-stream error, a
 * malformed event, a 404, a reset): the run still completes, each tool once. */
static void resume_matrix(void **state)
{
    (void)state;
    int runs = 0;
    for (int repeat = 0; repeat <= 2; repeat += 2) {
        for (int k1 = 1; k1 <= 14; k1++) {
            for (int k2 = 1; k1 + k2 <= 14; k2++) {
                char plan[160];
                snprintf(plan, sizeof plan,
                         "[{\"cut_after_events\":%d},{\"cut_after_events\":%d,"
                         "\"repeat_events\":%d},{\"ok\":true,\"repeat_events\":%d}]",
                         k1, k2 + repeat, repeat, repeat);
                harness h;
                opts o = {.text = TEXT, .text_deltas = 8, .background = 1, .plan = plan};
                harness_start(&h, &o);
                ah_run_outcome out = ah_worker_run(h.worker, "hi");
                if (out != AH_OUTCOME_COMPLETED)
                    fail_msg("k1=%d k2=%d repeat=%d: %s (%s)", k1, k2, repeat,
                             ah_run_outcome_name(out), ah_worker_error(h.worker)->message);
                assert_string_equal(ah_worker_text(h.worker), TEXT);
                if (strcmp(h.deltas, TEXT) != 0)
                    fail_msg("k1=%d k2=%d repeat=%d: deltas '%s'", k1, k2, repeat, h.deltas);
                assert_int_equal(count_requests(&h, "POST", "/v1/responses"), 1);
                assert_int_equal(count_requests(&h, "GET", "/v1/responses/"), 2);
                assert_int_equal(starting_after(request_path(&h, "GET", 0)), k1 - 1);
                /* The first re-attach repeats min(repeat, k1) events (there are only
                 * k1 before it), then brings new ones until its cut. */
                int repeated = repeat < k1 ? repeat : k1;
                if (starting_after(request_path(&h, "GET", 1)) !=
                    k1 - 1 + k2 + repeat - repeated)
                    fail_msg("k1=%d k2=%d repeat=%d: second re-attach %s", k1, k2, repeat,
                             request_path(&h, "GET", 1));
                assert_int_equal(event_log_count(&h.log, "llm_continuation"), 2);
                harness_stop(&h);
                runs++;
            }
        }
    }
    static const char *const reattach_faults[] = {
        "{\"error_event_after\":2}", "{\"malformed_event_after\":2}",
        "{\"status\":404}", "{\"status\":400}", "{\"reset\":true}",
        "{\"cut_after_events\":0}",
    };
    for (size_t f = 0; f < sizeof reattach_faults / sizeof reattach_faults[0]; f++) {
        for (int k1 = 1; k1 <= 16; k1++) {
            char plan[160];
            snprintf(plan, sizeof plan, "[{\"cut_after_events\":%d},%s]", k1,
                     reattach_faults[f]);
            harness h;
            opts o = {.tools = 1, .background = 1, .plan = plan,
                      .continue_prompt = "Continue."};
            harness_start(&h, &o);
            ah_run_outcome out = ah_worker_run(h.worker, "add please");
            if (out != AH_OUTCOME_COMPLETED)
                fail_msg("k1=%d fault %s: %s (%s)", k1, reattach_faults[f],
                         ah_run_outcome_name(out), ah_worker_error(h.worker)->message);
            assert_int_equal(h.tool_runs, 1);
            assert_no_secret(&h);
            harness_stop(&h);
            runs++;
        }
    }
    print_message("resume matrix: %d runs\n", runs);
}

/* A re-attached stream that repeats events the client already has emits nothing twice. */
static void repeated_events_are_skipped(void **state)
{
    (void)state;
    harness h;
    opts o = {.text = TEXT, .text_deltas = 8, .background = 1,
              .plan = "[{\"cut_after_events\":7},{\"ok\":true,\"repeat_events\":4}]"};
    harness_start(&h, &o);
    assert_int_equal(ah_worker_run(h.worker, "hi"), AH_OUTCOME_COMPLETED);
    assert_string_equal(ah_worker_text(h.worker), TEXT);
    assert_string_equal(h.deltas, TEXT);
    assert_int_equal(starting_after(request_path(&h, "GET", 0)), 6);
    harness_stop(&h);
}

/* The re-attach rebuilds the reply the plan step shaped (here its tool arguments). */
static void reattach_keeps_the_steps_reply(void **state)
{
    (void)state;
    harness h;
    opts o = {.tools = 1, .background = 1,
              .plan = "[{\"cut_after_events\":12,\"tool_args\":\"{\\\"a\\\":40,"
                      "\\\"b\\\":2}\"}]"};
    harness_start(&h, &o);
    assert_int_equal(ah_worker_run(h.worker, "add please"), AH_OUTCOME_COMPLETED);
    assert_int_equal(count_requests(&h, "GET", "/v1/responses/"), 1);
    assert_int_equal(h.tool_runs, 1);
    assert_string_equal(h.last_args, "{\"a\":40,\"b\":2}");
    harness_stop(&h);
}

/* A stream that goes silent (the idle timeout) is a break like a cut. */
static void idle_stream_is_resumed(void **state)
{
    (void)state;
    harness h;
    opts o = {.text = TEXT, .text_deltas = 8, .background = 1, .idle_timeout_ms = 150,
              .plan = "[{\"stall_after_events\":6}]"};
    harness_start(&h, &o);
    assert_int_equal(ah_worker_run(h.worker, "hi"), AH_OUTCOME_COMPLETED);
    assert_string_equal(ah_worker_text(h.worker), TEXT);
    assert_string_equal(h.deltas, TEXT);
    assert_int_equal(starting_after(request_path(&h, "GET", 0)), 5);
    assert_non_null(strstr(event_str(&h, "llm_continuation", 0, "reason"), "idle"));
    harness_stop(&h);
}

/* ---- fallbacks, the cap, cancel ----------------------------------------------------------- */

static void refused_reattach_falls_back_to_a_new_request(void **state)
{
    (void)state;
    harness h;
    opts o = {.text = TEXT, .text_deltas = 8, .background = 1,
              .continue_prompt = "Continue.",
              .plan = "[{\"cut_after_events\":9},{\"status\":404}]"};
    harness_start(&h, &o);
    assert_int_equal(ah_worker_run(h.worker, "hi"), AH_OUTCOME_COMPLETED);
    assert_int_equal(count_requests(&h, "GET", "/v1/responses/"), 1);
    assert_int_equal(count_requests(&h, "POST", "/v1/responses"), 2);
    assert_int_equal(event_log_count(&h.log, "llm_continuation"), 2);
    assert_string_equal(event_str(&h, "llm_continuation", 0, "mode"), "resume");
    /* Nothing of the unfinished block was kept: the fallback sends the first request
     * again (regenerate), no prompt. */
    assert_string_equal(event_str(&h, "llm_continuation", 1, "mode"), "regenerate");
    assert_non_null(strstr(event_str(&h, "llm_continuation", 1, "reason"), "HTTP 404"));
    ah_worker_stats st;
    ah_worker_get_stats(h.worker, &st);
    assert_int_equal(st.continuations, 2);
    harness_stop(&h);
}

/* The response is gone on the provider (expired, or never kept): the mock's own 404.
 * extra_json turns background off in the body, so the mock keeps nothing while the
 * client still re-attaches. */
static void unknown_response_is_a_404_and_falls_back(void **state)
{
    (void)state;
    harness h;
    opts o = {.text = TEXT, .text_deltas = 8, .background = 1,
              .continue_prompt = "Continue.", .extra_json = "{\"background\":false}",
              .plan = "[{\"cut_after_events\":3}]"};
    harness_start(&h, &o);
    assert_int_equal(ah_worker_run(h.worker, "hi"), AH_OUTCOME_COMPLETED);
    assert_int_equal(count_requests(&h, "GET", "/v1/responses/"), 1);
    ah_mock_request r;
    assert_int_equal(ah_mock_request_get(h.mock, 1, &r), AH_OK);
    assert_string_equal(r.method, "GET");
    assert_int_equal(r.status, 404);
    assert_int_equal(count_requests(&h, "POST", "/v1/responses"), 2);
    assert_string_equal(event_str(&h, "llm_continuation", 1, "mode"), "regenerate");
    harness_stop(&h);
}

static void reattach_errors_before_the_head_are_retried(void **state)
{
    (void)state;
    harness h;
    opts o = {.text = TEXT, .text_deltas = 8, .background = 1,
              .plan = "[{\"cut_after_events\":5},{\"reset\":true},{\"status\":503}]"};
    harness_start(&h, &o);
    assert_int_equal(ah_worker_run(h.worker, "hi"), AH_OUTCOME_COMPLETED);
    assert_string_equal(ah_worker_text(h.worker), TEXT);
    assert_string_equal(h.deltas, TEXT);
    assert_int_equal(count_requests(&h, "GET", "/v1/responses/"), 3);
    assert_int_equal(count_requests(&h, "POST", "/v1/responses"), 1);
    assert_int_equal(event_log_count(&h.log, "llm_retry"), 2);
    assert_int_equal(event_log_count(&h.log, "llm_continuation"), 1);
    harness_stop(&h);
}

static void resumes_count_against_max_continuations(void **state)
{
    (void)state;
    harness h;
    opts o = {.text = TEXT, .text_deltas = 8, .background = 1, .max_continuations = 2,
              .plan = "[{\"cut_after_events\":3},{\"cut_after_events\":2},"
                      "{\"cut_after_events\":2},{\"cut_after_events\":2}]"};
    harness_start(&h, &o);
    assert_int_equal(ah_worker_run(h.worker, "hi"), AH_OUTCOME_FAILED);
    assert_int_equal(ah_worker_error(h.worker)->kind, AH_EK_STREAM);
    assert_int_equal(count_requests(&h, "GET", "/v1/responses/"), 2);
    assert_int_equal(count_requests(&h, "POST", "/v1/responses"), 1);
    assert_int_equal(event_log_count(&h.log, "llm_continuation"), 2);
    assert_string_equal(event_str(&h, "llm_continuation", 1, "mode"), "resume");
    /* Resumed twice from where each stream stopped: 3 events, then 2 more. */
    assert_int_equal(starting_after(request_path(&h, "GET", 0)), 2);
    assert_int_equal(starting_after(request_path(&h, "GET", 1)), 4);
    harness_stop(&h);
}

static void cancel_during_a_resume_cancels_the_response(void **state)
{
    (void)state;
    harness h;
    opts o = {.text = TEXT, .text_deltas = 8, .background = 1,
              .plan = "[{\"cut_after_events\":4}]"};
    harness_start(&h, &o);
    h.cancel_on_continuation = 1; /* cancelled as the re-attach is about to start */
    assert_int_equal(ah_worker_run(h.worker, "hi"), AH_OUTCOME_CANCELLED);
    assert_int_equal(event_log_count(&h.log, "run_end"), 1);
    assert_int_equal(count_requests(&h, "GET", "/v1/responses/"), 0);
    assert_int_equal(count_requests(&h, "POST", "/v1/responses/"), 1);
    const char *cancel = request_path(&h, "POST", 1);
    assert_non_null(cancel);
    assert_non_null(strstr(cancel, "/v1/responses/resp_mock"));
    assert_non_null(strstr(cancel, "/cancel"));
    harness_stop(&h);

    /* While the re-attached stream is flowing. */
    opts o2 = {.text = TEXT, .text_deltas = 8, .background = 1,
               .plan = "[{\"cut_after_events\":4},{\"stall_after_events\":3}]"};
    harness_start(&h, &o2);
    h.cancel_on_resumed_delta = 1;
    assert_int_equal(ah_worker_run(h.worker, "hi"), AH_OUTCOME_CANCELLED);
    assert_int_equal(count_requests(&h, "GET", "/v1/responses/"), 1);
    assert_int_equal(count_requests(&h, "POST", "/v1/responses/"), 1);
    assert_int_equal(event_log_count(&h.log, "run_end"), 1);
    harness_stop(&h);

    /* Without background nothing runs on the provider's side: no cancel request. */
    opts o3 = {.text = TEXT, .text_deltas = 8, .plan = "[{\"cut_after_events\":4}]"};
    harness_start(&h, &o3);
    h.cancel_on_continuation = 1;
    assert_int_equal(ah_worker_run(h.worker, "hi"), AH_OUTCOME_CANCELLED);
    assert_int_equal(count_requests(&h, "POST", "/v1/responses/"), 0);
    harness_stop(&h);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(background_request_says_background_and_store),
        cmocka_unit_test(background_without_store_is_a_400),
        cmocka_unit_test(background_needs_the_responses_provider),
        cmocka_unit_test(resume_at_every_cut_position),
        cmocka_unit_test(resume_with_a_tool_call_runs_it_once),
        cmocka_unit_test(resume_matrix),
        cmocka_unit_test(repeated_events_are_skipped),
        cmocka_unit_test(idle_stream_is_resumed),
        cmocka_unit_test(reattach_keeps_the_steps_reply),
        cmocka_unit_test(refused_reattach_falls_back_to_a_new_request),
        cmocka_unit_test(unknown_response_is_a_404_and_falls_back),
        cmocka_unit_test(reattach_errors_before_the_head_are_retried),
        cmocka_unit_test(resumes_count_against_max_continuations),
        cmocka_unit_test(cancel_during_a_resume_cancels_the_response),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
