/* test_continuation.c - the continuation ladder against a mock that behaves like real
 * models, over loopback: the prefill and prompt rungs, the capability table's choice, a
 * refused prefill switching an "auto" client to the prompt rung, and restatements trimmed.
 *
 * Ends with the matrix: 3 wire formats x 5 model behaviours (continues exactly, restates
 * everything, restates the last sentence, refuses prefill, a Claude 4.6 model id) x the
 * cut request (the tool call's, the answer's) x every cut position; each run asserts the
 * run completes, each committed text appears once in history and in the final answer, no
 * HTTP 400 reaches the user, the tool ran exactly once, and the bytes trimmed equal the
 * bytes the mock restated. */
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

static const char *ADD_SCHEMA =
    "{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"integer\"},"
    "\"b\":{\"type\":\"integer\"}},\"required\":[\"a\",\"b\"]}";

/* The mock's reply text: three sentences on two lines, so "the last sentence" differs
 * from "everything". */
#define TEXT "First, the plan is simple. Then I add the two numbers.\nThe last line ends here."

/* ---- harness ------------------------------------------------------------------------------ */

typedef struct harness {
    ah_mock *mock;
    ah_loop *loop;
    ah_client *client;
    ah_worker *worker;
    event_log log; /* every event as JSON, in order */
    int tool_runs;
} harness;

typedef struct opts {
    ah_wire wire;
    const char *model;
    ah_continuation continuation;
    const char *plan;
    const char *text; /* NULL = TEXT */
    int tools;
    const char *continue_prompt;
    const char *extra_json;
} opts;

static void record_event(void *ud, const ah_event *ev)
{
    harness *h = ud;
    event_log_add(&h->log, ev);
}

static int add_tool(void *ud, ah_worker *w, const ah_tool_request *req, ah_tool_response *res)
{
    harness *h = ud;
    (void)w;
    (void)req;
    h->tool_runs++;
    res->outcome = AH_TOOL_OK;
    res->content = "84";
    res->attempts = 1;
    return 0;
}

static void harness_start(harness *h, const opts *o)
{
    memset(h, 0, sizeof *h);
    ah_mock_config mc;
    ah_mock_config_init(&mc);
    mc.plan_json = o->plan;
    mc.text = o->text ? o->text : TEXT;
    ah_client_config cc = {.wire = o->wire,
                           .model = o->model ? o->model : "mock-model",
                           .max_tokens = 256,
                           .extra_json = o->extra_json,
                           .continuation = o->continuation};
    rig_open(&mc, &cc, &h->mock, &h->loop, &h->client);
    char err[256];
    ah_policy pol;
    ah_policy_init(&pol);
    pol.base_ms = 1;
    pol.cap_ms = 5;
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

static const char *event_str(const harness *h, const char *type, size_t nth, const char *field)
{
    static char buf[128];
    cJSON *o = event_log_find(&h->log, type, nth);
    assert_non_null(o);
    const cJSON *v = cJSON_GetObjectItem(o, field);
    assert_true(cJSON_IsString(v));
    snprintf(buf, sizeof buf, "%s", v->valuestring);
    cJSON_Delete(o);
    return buf;
}

/* Sum of an integer field over every event of a type. */
static long long sum_field(const harness *h, const char *type, const char *field)
{
    long long total = 0;
    for (size_t i = 0;; i++) {
        cJSON *o = event_log_find(&h->log, type, i);
        if (!o)
            return total;
        const cJSON *v = cJSON_GetObjectItem(o, field);
        assert_true(cJSON_IsNumber(v));
        total += (long long)v->valuedouble;
        cJSON_Delete(o);
    }
}

/* Every text_delta of the run, concatenated: what a user saw stream past. */
static char *streamed_text(const harness *h)
{
    size_t cap = 4096, len = 0;
    char *s = calloc(1, cap);
    for (size_t i = 0;; i++) {
        cJSON *o = event_log_find(&h->log, "text_delta", i);
        if (!o)
            return s;
        const char *t = cJSON_GetObjectItem(o, "text")->valuestring;
        size_t n = strlen(t);
        assert_true(len + n < cap);
        memcpy(s + len, t, n + 1);
        len += n;
        cJSON_Delete(o);
    }
}

static size_t mock_restated(harness *h)
{
    size_t total = 0;
    ah_mock_request r;
    for (size_t i = 0; i < ah_mock_request_count(h->mock); i++) {
        assert_int_equal(ah_mock_request_get(h->mock, i, &r), AH_OK);
        total += r.restated;
    }
    return total;
}

static size_t mock_status_count(harness *h, int status)
{
    size_t n = 0;
    ah_mock_request r;
    for (size_t i = 0; i < ah_mock_request_count(h->mock); i++) {
        assert_int_equal(ah_mock_request_get(h->mock, i, &r), AH_OK);
        n += r.status == status;
    }
    return n;
}

static const char *mock_body(harness *h, size_t i)
{
    ah_mock_request r;
    assert_int_equal(ah_mock_request_get(h->mock, i, &r), AH_OK);
    return r.body;
}

/* The assistant text of each stretch of history between tool-result messages, checked
 * against want: each committed piece of text is in history exactly once. */
static void assert_history_holds_once(const harness *h, const char *want, const char *ctx)
{
    const ah_conversation *c = ah_worker_history(h->worker);
    char seg[2048];
    size_t len = 0;
    int segments = 0;
    for (size_t m = 0; m <= ah_conversation_count(c); m++) {
        int boundary = m == ah_conversation_count(c);
        if (!boundary && ah_conversation_role(c, m) == AH_ROLE_USER)
            for (size_t i = 0; i < ah_conversation_block_count(c, m); i++)
                boundary |= ah_conversation_block(c, m, i)->kind == AH_MSG_TOOL_RESULT;
        if (boundary) {
            seg[len] = '\0';
            if (strcmp(seg, want) != 0)
                fail_msg("%s: history segment %d is '%s', want '%s'", ctx, segments, seg,
                         want);
            segments++;
            len = 0;
            continue;
        }
        if (ah_conversation_role(c, m) != AH_ROLE_ASSISTANT)
            continue;
        for (size_t i = 0; i < ah_conversation_block_count(c, m); i++) {
            const ah_msg_block *b = ah_conversation_block(c, m, i);
            if (b->kind != AH_MSG_TEXT)
                continue;
            size_t n = strlen(b->text);
            assert_true(len + n < sizeof seg);
            memcpy(seg + len, b->text, n);
            len += n;
        }
    }
}

/* Log lines, counted by what they say. */
static int refusal_lines, gave_up_lines;
static void count_logs(void *ud, ah_log_level level, int event, const char *line)
{
    (void)ud;
    (void)level;
    (void)event;
    refusal_lines += strstr(line, "refused an assistant-message prefill") != NULL;
    gave_up_lines += strstr(line, "gave up") != NULL;
}

/* ---- single cases -------------------------------------------------------------------------- */

/* anthropic: message_start, block_start, ping, N word deltas, block_stop: the text block
 * of TEXT (16 words) is complete after 3 + 16 + 1 = 20 events. */
#define ANTHROPIC_TEXT_DONE 20

static void claude_4_6_continues_on_the_prompt_rung_and_trims(void **state)
{
    (void)state;
    harness h;
    char plan[160];
    snprintf(plan, sizeof plan,
             "{\"steps\":[{\"cut_after_events\":%d}],\"then\":{\"ok\":true,\"restate\":true}}",
             ANTHROPIC_TEXT_DONE + 2);
    opts o = {.wire = AH_WIRE_ANTHROPIC, .model = "claude-opus-4-6", .plan = plan, .tools = 1};
    harness_start(&h, &o);
    assert_int_equal(ah_worker_run(h.worker, "What is 42 + 42?"), AH_OUTCOME_COMPLETED);
    assert_int_equal(h.tool_runs, 1);
    assert_string_equal(event_str(&h, "llm_continuation", 0, "mode"), "prompt");
    /* The table chose the prompt rung: no prefill was ever sent, so no 400 at all. */
    assert_int_equal(mock_status_count(&h, 400), 0);
    /* The continuation request ends with the visible default prompt. */
    cJSON *body = cJSON_Parse(mock_body(&h, 1));
    cJSON *msgs = cJSON_GetObjectItem(body, "messages");
    cJSON *last = cJSON_GetArrayItem(msgs, cJSON_GetArraySize(msgs) - 1);
    assert_string_equal(cJSON_GetObjectItem(last, "role")->valuestring, "user");
    char *lj = cJSON_PrintUnformatted(last);
    assert_non_null(strstr(lj, "Your previous reply was cut off. Continue exactly where it "
                               "stopped, without repeating what you already wrote."));
    free(lj);
    cJSON_Delete(body);
    /* The mock restated the whole text; it was dropped, before text_delta and history. */
    assert_int_equal(mock_restated(&h), strlen(TEXT));
    assert_int_equal(sum_field(&h, "llm_call_end", "trimmed_bytes"), strlen(TEXT));
    ah_worker_stats st;
    ah_worker_get_stats(h.worker, &st);
    assert_int_equal(st.trimmed_bytes, strlen(TEXT));
    assert_int_equal(st.continuations, 1);
    assert_int_equal(st.retries, 0);
    char *seen = streamed_text(&h);
    assert_string_equal(seen, TEXT TEXT); /* the first reply's text, then the answer */
    free(seen);
    assert_history_holds_once(&h, TEXT, "claude-opus-4-6");
    assert_string_equal(ah_worker_text(h.worker), TEXT);
    harness_stop(&h);
}

static void refused_prefill_switches_the_client_to_prompt(void **state)
{
    (void)state;
    harness h;
    char plan[200];
    snprintf(plan, sizeof plan,
             "{\"steps\":[{\"cut_after_events\":%d}],"
             "\"then\":{\"ok\":true,\"refuse_prefill\":true,\"restate\":\"last_sentence\"}}",
             ANTHROPIC_TEXT_DONE + 2);
    opts o = {.wire = AH_WIRE_ANTHROPIC, .model = "claude-sonnet-4-5", .plan = plan,
              .tools = 1};
    harness_start(&h, &o);
    refusal_lines = gave_up_lines = 0;
    ah_log_set_handler(count_logs, NULL, AH_LOG_WARN);
    assert_int_equal(ah_client_rung(h.client), AH_CONT_PREFILL);
    assert_int_equal(ah_worker_run(h.worker, "What is 42 + 42?"), AH_OUTCOME_COMPLETED);
    /* The prefill went out, was refused with the real 400, and was re-sent at once on the
     * prompt rung: not a retry, not a second continuation, no give-up event. */
    assert_int_equal(mock_status_count(&h, 400), 1);
    assert_int_equal(ah_mock_request_count(h.mock), 4);
    assert_int_equal(event_log_count(&h.log, "llm_gave_up"), 0);
    assert_int_equal(event_log_count(&h.log, "llm_retry"), 0);
    assert_int_equal(event_log_count(&h.log, "llm_continuation"), 1);
    assert_string_equal(event_str(&h, "llm_continuation", 0, "mode"), "prefill");
    ah_worker_stats st;
    ah_worker_get_stats(h.worker, &st);
    assert_int_equal(st.continuations, 1);
    assert_int_equal(st.retries, 0);
    /* The client keeps the lesson, and says so once. */
    assert_int_equal(ah_client_rung(h.client), AH_CONT_PROMPT);
    assert_int_equal(refusal_lines, 1);
    assert_int_equal(gave_up_lines, 0);
    assert_int_equal(h.tool_runs, 1);
    assert_int_equal(mock_restated(&h), strlen("The last line ends here."));
    assert_int_equal(sum_field(&h, "llm_call_end", "trimmed_bytes"),
                     strlen("The last line ends here."));
    assert_history_holds_once(&h, TEXT, "refused prefill");
    assert_string_equal(ah_worker_text(h.worker), TEXT);

    /* A second run on the same client: straight to the prompt rung, no 400, no line. */
    ah_worker_free(h.worker);
    ah_mock_set_plan(h.mock, plan, NULL, 0);
    size_t before = ah_mock_request_count(h.mock);
    ah_tool_def tool = {.name = "add", .description = "Add", .schema_json = ADD_SCHEMA};
    ah_worker_config wc = {.loop = h.loop, .client = h.client, .tools = &tool, .n_tools = 1,
                           .tool_exec = add_tool, .tool_ud = &h};
    ah_worker_new(&wc, &h.worker, NULL, 0);
    assert_non_null(h.worker);
    assert_int_equal(ah_worker_run(h.worker, "What is 42 + 42?"), AH_OUTCOME_COMPLETED);
    assert_int_equal(ah_mock_request_count(h.mock) - before, 3);
    assert_int_equal(mock_status_count(&h, 400), 1); /* still only the first one */
    assert_int_equal(refusal_lines, 1);
    ah_log_set_handler(NULL, NULL, AH_LOG_WARN);
    harness_stop(&h);
}

static void explicit_prefill_is_not_switched(void **state)
{
    (void)state;
    harness h;
    char plan[160];
    snprintf(plan, sizeof plan, "[{\"cut_after_events\":%d}]", ANTHROPIC_TEXT_DONE + 2);
    opts o = {.wire = AH_WIRE_ANTHROPIC, .model = "claude-opus-4-6", .plan = plan,
              .tools = 1, .continuation = AH_CONTINUATION_PREFILL};
    harness_start(&h, &o);
    /* The user insisted on prefill: the provider's refusal ends the run, as a 400 does. */
    assert_int_equal(ah_worker_run(h.worker, "What is 42 + 42?"), AH_OUTCOME_FAILED);
    assert_int_equal(ah_worker_error(h.worker)->status, 400);
    assert_non_null(strstr(ah_worker_error(h.worker)->message,
                           "does not support assistant message prefill"));
    assert_int_equal(event_log_count(&h.log, "llm_gave_up"), 1);
    assert_int_equal(ah_client_rung(h.client), AH_CONT_PREFILL);
    assert_int_equal(h.tool_runs, 0);
    harness_stop(&h);
}

static void thinking_means_prompt(void **state)
{
    (void)state;
    harness h;
    char plan[160];
    snprintf(plan, sizeof plan, "[{\"cut_after_events\":%d}]", ANTHROPIC_TEXT_DONE + 2);
    opts o = {.wire = AH_WIRE_ANTHROPIC, .model = "claude-sonnet-4-5", .plan = plan,
              .tools = 1, .extra_json = "{\"thinking\":{\"type\":\"adaptive\"}}"};
    harness_start(&h, &o);
    assert_int_equal(ah_client_rung(h.client), AH_CONT_PROMPT);
    assert_int_equal(ah_worker_run(h.worker, "What is 42 + 42?"), AH_OUTCOME_COMPLETED);
    assert_string_equal(event_str(&h, "llm_continuation", 0, "mode"), "prompt");
    assert_int_equal(mock_status_count(&h, 400), 0);
    assert_string_equal(ah_worker_text(h.worker), TEXT);
    harness_stop(&h);
}

static void prompt_setting_and_custom_prompt(void **state)
{
    (void)state;
    harness h;
    char plan[160];
    snprintf(plan, sizeof plan, "[{\"cut_after_events\":%d}]", ANTHROPIC_TEXT_DONE + 2);
    opts o = {.wire = AH_WIRE_ANTHROPIC, .model = "claude-sonnet-4-5", .plan = plan,
              .tools = 1, .continuation = AH_CONTINUATION_PROMPT,
              .continue_prompt = "Please continue from the cut."};
    harness_start(&h, &o);
    assert_int_equal(ah_worker_run(h.worker, "What is 42 + 42?"), AH_OUTCOME_COMPLETED);
    assert_string_equal(event_str(&h, "llm_continuation", 0, "mode"), "prompt");
    assert_non_null(strstr(mock_body(&h, 1), "Please continue from the cut."));
    assert_null(strstr(mock_body(&h, 1), "Your previous reply was cut off"));
    assert_int_equal(h.tool_runs, 1);
    assert_string_equal(ah_worker_text(h.worker), TEXT);
    harness_stop(&h);
}

/* A proxy that answers the continuation with a JSON body instead of a stream: the text
 * arrives whole, and its restatement is trimmed all the same, also when it ends in a
 * word (the match is only known at the end of the block). */
static void a_json_body_continuation_is_trimmed(void **state)
{
    (void)state;
    harness h;
    char plan[200];
#define WORDY "First the plan. Then I add the numbers"
    /* 8 words: 3 + 8 + 1 = 12 events complete the text block; 2 more open the tool call */
    snprintf(plan, sizeof plan,
             "{\"steps\":[{\"cut_after_events\":14}],"
             "\"then\":{\"ok\":true,\"restate\":true,\"json_body\":true}}");
    opts o = {.wire = AH_WIRE_ANTHROPIC, .model = "claude-opus-4-6", .plan = plan, .tools = 1,
              .text = WORDY};
    harness_start(&h, &o);
    assert_int_equal(ah_worker_run(h.worker, "What is 42 + 42?"), AH_OUTCOME_COMPLETED);
    assert_int_equal(h.tool_runs, 1);
    assert_int_equal(mock_restated(&h), strlen(WORDY));
    assert_int_equal(sum_field(&h, "llm_call_end", "trimmed_bytes"), strlen(WORDY));
    char *seen = streamed_text(&h);
    assert_string_equal(seen, WORDY WORDY); /* the cut reply's text, then the answer */
    free(seen);
    assert_history_holds_once(&h, WORDY, "json body");
    assert_string_equal(ah_worker_text(h.worker), WORDY);
    harness_stop(&h);
}

/* A false start: the reply begins like the committed text and then says something else;
 * nothing is trimmed and every byte reaches text_delta and history. */
static void a_false_start_flows_out_unchanged(void **state)
{
    (void)state;
    harness h;
    /* chat: role chunk, 4 content chunks, finish chunk, usage = 7: text closed, cut. The
     * rest of the reply, " Alpha beta gamma epsilon.", starts like the committed text
     * and then goes elsewhere: held for 17 bytes, then released whole. */
    opts o = {.wire = AH_WIRE_OPENAI,
              .plan = "[{\"cut_after_events\":7,\"text\":\"Alpha beta gamma delta.\"},"
                      "{\"ok\":true,\"text\":\"Alpha beta gamma delta. Alpha beta gamma "
                      "epsilon.\"}]"};
    harness_start(&h, &o);
    assert_int_equal(ah_worker_run(h.worker, "hello"), AH_OUTCOME_COMPLETED);
    assert_int_equal(sum_field(&h, "llm_call_end", "trimmed_bytes"), 0);
    const char *want = "Alpha beta gamma delta. Alpha beta gamma epsilon.";
    assert_string_equal(ah_worker_text(h.worker), want);
    char *seen = streamed_text(&h);
    assert_string_equal(seen, want);
    free(seen);
    harness_stop(&h);
}

/* ---- the matrix ------------------------------------------------------------------------------ */

typedef struct behaviour {
    const char *name;
    const char *model;
    const char *then; /* the step for every request after the cut */
    int restate;      /* 0 none, 1 all, 2 last sentence */
} behaviour;

static const behaviour BEHAVIOURS[] = {
    {"continues exactly", "claude-sonnet-4-5", "{\"ok\":true}", 0},
    {"restates all", "claude-sonnet-4-5", "{\"ok\":true,\"restate\":true}", 1},
    {"restates last sentence", "claude-sonnet-4-5",
     "{\"ok\":true,\"restate\":\"last_sentence\"}", 2},
    {"refuses prefill", "claude-sonnet-4-5",
     "{\"ok\":true,\"refuse_prefill\":true,\"restate\":true}", 1},
    {"claude 4.6 id", "claude-opus-4-6", "{\"ok\":true,\"restate\":true}", 1},
};

static void matrix(void **state)
{
    (void)state;
    int runs = 0, trimmed_runs = 0, prompt_runs = 0, refused_runs = 0;
    long long trimmed_total = 0;
    for (int wire = 0; wire < AH_WIRE_COUNT_; wire++)
        for (size_t bi = 0; bi < sizeof BEHAVIOURS / sizeof BEHAVIOURS[0]; bi++)
            for (int cut_req = 1; cut_req <= 2; cut_req++)
                for (int k = 0; k <= 32; k++) {
                    const behaviour *be = &BEHAVIOURS[bi];
                    char plan[400], ctx[160];
                    snprintf(plan, sizeof plan, "{\"steps\":[%s{\"cut_after_events\":%d}],"
                             "\"then\":%s}",
                             cut_req == 2 ? "{\"ok\":true}," : "", k, be->then);
                    snprintf(ctx, sizeof ctx, "%s / %s / cut in request %d after %d events",
                             ah_wire_name((ah_wire)wire), be->name, cut_req, k);
                    harness h;
                    opts o = {.wire = (ah_wire)wire, .model = be->model, .plan = plan,
                              .tools = 1};
                    harness_start(&h, &o);
                    ah_run_outcome out = ah_worker_run(h.worker, "What is 42 + 42?");
                    if (out != AH_OUTCOME_COMPLETED)
                        fail_msg("%s: outcome %s (%s)", ctx, ah_run_outcome_name(out),
                                 ah_worker_error(h.worker)->message);
                    /* No HTTP 400 reaches the user: no give-up, no retry but the one
                     * of a cut that kept nothing (the same request again), no error. */
                    assert_int_equal(event_log_count(&h.log, "llm_gave_up"), 0);
                    size_t regens = 0;
                    for (size_t i = 0; i < h.log.n; i++)
                        regens += event_log_is(&h.log, i, "llm_continuation") &&
                                  strstr(h.log.lines[i], "\"mode\":\"regenerate\"");
                    assert_int_equal(event_log_count(&h.log, "llm_retry"), regens);
                    for (size_t i = 0; i < h.log.n; i++)
                        if (strstr(h.log.lines[i], "\"status\":400"))
                            fail_msg("%s: a 400 reached an event: %s", ctx, h.log.lines[i]);
                    /* The tool ran once; each committed text is in history once and
                     * the answer is the uninterrupted one. */
                    if (h.tool_runs != 1)
                        fail_msg("%s: the tool ran %d times", ctx, h.tool_runs);
                    assert_history_holds_once(&h, TEXT, ctx);
                    if (strcmp(ah_worker_text(h.worker), TEXT) != 0)
                        fail_msg("%s: answer '%s'", ctx, ah_worker_text(h.worker));
                    /* What the mock restated is exactly what was trimmed. */
                    long long trimmed = sum_field(&h, "llm_call_end", "trimmed_bytes");
                    if ((size_t)trimmed != mock_restated(&h))
                        fail_msg("%s: trimmed %lld bytes, the mock restated %zu", ctx,
                                 trimmed, mock_restated(&h));
                    if (!be->restate)
                        assert_int_equal(trimmed, 0);
                    /* The rung: prefill only where the table allows it. */
                    size_t conts = event_log_count(&h.log, "llm_continuation");
                    assert_true(conts <= 1);
                    if (conts == 1) {
                        const char *mode = event_str(&h, "llm_continuation", 0, "mode");
                        int prefill = wire == AH_WIRE_ANTHROPIC &&
                                      strcmp(be->model, "claude-opus-4-6") != 0;
                        const char *want = regens ? "regenerate" : prefill ? "prefill"
                                                                           : "prompt";
                        if (strcmp(mode, want) != 0)
                            fail_msg("%s: mode %s", ctx, mode);
                        prompt_runs += !prefill && !regens;
                    }
                    /* Claude 4.6 never got a prefill; a refusal cost one request. */
                    if (strcmp(be->model, "claude-opus-4-6") == 0)
                        assert_int_equal(mock_status_count(&h, 400), 0);
                    refused_runs += mock_status_count(&h, 400) > 0;
                    trimmed_runs += trimmed > 0;
                    trimmed_total += trimmed;
                    harness_stop(&h);
                    runs++;
                }
    print_message("continuation matrix: %d runs (%d on the prompt rung, %d with a refused "
                  "prefill, %d trimmed, %lld bytes trimmed in all)\n",
                  runs, prompt_runs, refused_runs, trimmed_runs, trimmed_total);
    assert_true(trimmed_runs > 0);
    assert_true(refused_runs > 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(claude_4_6_continues_on_the_prompt_rung_and_trims),
        cmocka_unit_test(refused_prefill_switches_the_client_to_prompt),
        cmocka_unit_test(explicit_prefill_is_not_switched),
        cmocka_unit_test(thinking_means_prompt),
        cmocka_unit_test(prompt_setting_and_custom_prompt),
        cmocka_unit_test(a_false_start_flows_out_unchanged),
        cmocka_unit_test(a_json_body_continuation_is_trimmed),
        cmocka_unit_test(matrix),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
