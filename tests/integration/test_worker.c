/* test_worker.c - the turn loop over real loopback sockets against the built-in mock:
 * retry before the stream, partial-commit continuation (docs/worker.md), tools from completed
 * responses only, the continuation cap, cancellation, and secrets kept out of events.
 * Ends with the fault matrix: every wire format x every fault kind of docs/mock.md x cut
 * positions, asserting the invariants of docs/testing.md. */
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

#define KEY "sk-ant-api03-PLANTEDKEY-0123456789abcdefXYZ"

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
    char keys_seen[8][160];
    int cancel_on_continuation;
} harness;

static void record_event(void *ud, const ah_event *ev)
{
    harness *h = ud;
    event_log_add(&h->log, ev);
    if (ev->type == AH_EV_LLM_CONTINUATION && h->cancel_on_continuation)
        ah_worker_cancel(h->worker);
}

static int add_tool(void *ud, ah_worker *w, const ah_tool_request *req, ah_tool_response *res)
{
    harness *h = ud;
    (void)w;
    cJSON *args = cJSON_Parse(req->arguments);
    assert_non_null(args);
    int a = cJSON_GetObjectItem(args, "a")->valueint;
    int b = cJSON_GetObjectItem(args, "b")->valueint;
    cJSON_Delete(args);
    static char out[32];
    snprintf(out, sizeof out, "%d", a + b);
    if (h->tool_runs < 8)
        snprintf(h->keys_seen[h->tool_runs], sizeof h->keys_seen[0], "%s", req->key);
    h->tool_runs++;
    res->outcome = AH_TOOL_OK;
    res->content = out;
    res->attempts = 1;
    return 0;
}

typedef struct opts {
    ah_wire wire;
    const char *plan;
    const char *text; /* mock reply text, or NULL for the model's */
    int tools;
    int max_continuations; /* -1 = default */
    int64_t idle_timeout_ms;
    const char *continue_prompt;
    const ah_conversation *history; /* a conversation to continue, or NULL */
    ah_partial_text partial;        /* policy.continue_partial_text */
} opts;

static void harness_start(harness *h, const opts *o)
{
    memset(h, 0, sizeof *h);
    ah_mock_config mc;
    ah_mock_config_init(&mc);
    mc.plan_json = o->plan;
    mc.text = o->text;
    ah_client_config cc = {.wire = o->wire,
                           .api_key = KEY,
                           .model = "mock-model",
                           .max_tokens = 256};
    rig_open(&mc, &cc, &h->mock, &h->loop, &h->client);
    char err[256];
    ah_policy pol;
    ah_policy_init(&pol);
    pol.base_ms = 1;
    pol.cap_ms = 5;
    pol.max_retry_after_ms = 5000;
    pol.idle_timeout_ms = o->idle_timeout_ms;
    if (o->max_continuations >= 0)
        pol.max_continuations = o->max_continuations;
    pol.continue_partial_text = o->partial;
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
                           .continue_prompt = o->continue_prompt,
                           .history = o->history};
    ah_worker_new(&wc, &h->worker, err, sizeof err);
    if (!h->worker)
        fail_msg("worker: %s", err);
}

static void harness_stop(harness *h)
{
    rig_close(h->worker, h->client, h->loop, h->mock, &h->log);
}

static int event_int(const harness *h, const char *type, size_t nth, const char *field)
{
    cJSON *o = event_log_find(&h->log, type, nth);
    assert_non_null(o);
    const cJSON *v = cJSON_GetObjectItem(o, field);
    assert_non_null(v);
    int x = v->valueint;
    cJSON_Delete(o);
    return x;
}

static const char *req_body(harness *h, size_t i)
{
    ah_mock_request r;
    assert_int_equal(ah_mock_request_get(h->mock, i, &r), AH_OK);
    return r.body;
}

/* Number of tool_use blocks in the run's history, and whether each has a result. */
static size_t history_tool_uses(const ah_conversation *c, int *all_answered)
{
    size_t uses = 0, results = 0;
    for (size_t m = 0; m < ah_conversation_count(c); m++)
        for (size_t i = 0; i < ah_conversation_block_count(c, m); i++) {
            const ah_msg_block *b = ah_conversation_block(c, m, i);
            uses += b->kind == AH_MSG_TOOL_USE;
            results += b->kind == AH_MSG_TOOL_RESULT;
        }
    *all_answered = uses == results;
    return uses;
}

static size_t occurrences(const char *hay, const char *needle)
{
    size_t n = 0, len = strlen(needle);
    for (const char *p = hay; (p = strstr(p, needle)) != NULL; p += len)
        n++;
    return n;
}

static void assert_no_secret(const harness *h)
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

#define TEXT4 "Alpha beta gamma delta."

/* ---- continuation cases (docs/worker.md) ------------------------------------------------ */

static void retry_before_stream_leaves_history_unchanged(void **state)
{
    (void)state;
    harness h;
    opts o = {.wire = AH_WIRE_ANTHROPIC, .plan = "[{\"status\":503},{\"ok\":true}]",
              .text = TEXT4, .max_continuations = -1};
    harness_start(&h, &o);
    assert_int_equal(ah_worker_run(h.worker, "hello"), AH_OUTCOME_COMPLETED);
    assert_int_equal(event_log_count(&h.log, "llm_retry"), 1);
    assert_int_equal(event_log_count(&h.log, "llm_continuation"), 0);
    assert_int_equal(ah_mock_request_count(h.mock), 2);
    /* The retry resent exactly the same request: history did not change. */
    assert_string_equal(req_body(&h, 0), req_body(&h, 1));
    assert_int_equal(ah_conversation_count(ah_worker_history(h.worker)), 2);
    assert_string_equal(ah_worker_text(h.worker), TEXT4);
    ah_worker_stats st;
    ah_worker_get_stats(h.worker, &st);
    assert_int_equal(st.attempts, 2);
    assert_int_equal(st.retries, 1);
    assert_int_equal(st.llm_calls, 1);
    harness_stop(&h);
}

static void cut_after_complete_text_block_commits_it_once(void **state)
{
    (void)state;
    harness h;
    /* anthropic: message_start, block_start, ping, 4 deltas, block_stop = 8 events */
    opts o = {.wire = AH_WIRE_ANTHROPIC, .plan = "[{\"cut_after_events\":8}]", .text = TEXT4,
              .max_continuations = -1};
    harness_start(&h, &o);
    assert_int_equal(ah_worker_run(h.worker, "hello"), AH_OUTCOME_COMPLETED);
    assert_int_equal(event_log_count(&h.log, "llm_continuation"), 1);
    assert_int_equal(event_int(&h, "llm_continuation", 0, "committed_blocks"), 1);
    assert_int_equal(event_int(&h, "llm_continuation", 0, "discarded_blocks"), 0);
    assert_int_equal(ah_mock_request_count(h.mock), 2);
    /* The next request carries the committed block as an assistant message. */
    cJSON *body = cJSON_Parse(req_body(&h, 1));
    cJSON *msgs = cJSON_GetObjectItem(body, "messages");
    cJSON *last = cJSON_GetArrayItem(msgs, cJSON_GetArraySize(msgs) - 1);
    assert_string_equal(cJSON_GetObjectItem(last, "role")->valuestring, "assistant");
    char *last_json = cJSON_PrintUnformatted(last);
    assert_non_null(strstr(last_json, "gamma delta."));
    free(last_json);
    cJSON_Delete(body);
    /* The final text has the block exactly once. */
    assert_string_equal(ah_worker_text(h.worker), TEXT4);
    assert_int_equal(occurrences(ah_worker_text(h.worker), "gamma"), 1);
    /* History: user, one assistant message (the partial was completed in place). */
    const ah_conversation *c = ah_worker_history(h.worker);
    assert_int_equal(ah_conversation_count(c), 2);
    assert_int_equal(ah_conversation_is_partial(c, 1), 0);
    harness_stop(&h);
}

static void cut_inside_text_block_drops_it(void **state)
{
    (void)state;
    harness h;
    /* 5 events: message_start, block_start, ping, "Alpha", " beta" -> block open */
    opts o = {.wire = AH_WIRE_ANTHROPIC, .plan = "[{\"cut_after_events\":5}]", .text = TEXT4,
              .max_continuations = -1};
    harness_start(&h, &o);
    assert_int_equal(ah_worker_run(h.worker, "hello"), AH_OUTCOME_COMPLETED);
    assert_int_equal(event_int(&h, "llm_continuation", 0, "committed_blocks"), 0);
    assert_int_equal(event_int(&h, "llm_continuation", 0, "discarded_blocks"), 1);
    assert_int_equal(event_int(&h, "llm_continuation", 0, "discarded_bytes"), 10);
    /* Nothing was committed, so the continuation request equals the first one, and the
     * event says so: regenerate, a retry of the same request (its backoff, its token). */
    assert_string_equal(req_body(&h, 0), req_body(&h, 1));
    assert_string_equal(ah_worker_text(h.worker), TEXT4);
    cJSON *ce = event_log_find(&h.log, "llm_continuation", 0);
    assert_string_equal(cJSON_GetObjectItem(ce, "mode")->valuestring, "regenerate");
    cJSON_Delete(ce);
    assert_int_equal(event_log_count(&h.log, "llm_retry"), 1);
    /* The cut request ended with its own llm_call_end, before the continuation. */
    assert_int_equal(event_log_count(&h.log, "llm_call_end"), 2);
    cJSON *end = event_log_find(&h.log, "llm_call_end", 0);
    assert_string_equal(cJSON_GetObjectItem(end, "stop_reason")->valuestring, "interrupted");
    assert_int_equal(cJSON_GetObjectItem(end, "llm_call")->valueint, 1);
    cJSON_Delete(end);
    ah_worker_stats st;
    ah_worker_get_stats(h.worker, &st);
    assert_int_equal(st.llm_calls, 1); /* one model turn */
    assert_int_equal(st.continuations, 1);
    assert_int_equal(st.retries, 1);
    assert_int_equal(st.attempts, 2);
    harness_stop(&h);
}

/* Three sentences on two lines: where a cut may keep a prefix. */
#define SENTENCES "Alpha beta. Gamma delta!\nEpsilon zeta eta theta iota kappa lambda."

/* policy.continue_partial_text: a cut inside the (only) text block keeps its complete
 * sentences (or lines) as a closed text block of the partial message; the continuation
 * goes on from there on the client's rung, and the answer holds each byte once. Every
 * cut position, every wire format, both modes. */
static void partial_text_keeps_complete_sentences_or_lines(void **state)
{
    (void)state;
    int kept_runs = 0, partial_runs = 0;
    for (int wire = 0; wire < AH_WIRE_COUNT_; wire++)
        for (int mode = AH_PARTIAL_TEXT_SENTENCE; mode <= AH_PARTIAL_TEXT_LINE; mode++)
            for (int k = 0; k <= 14; k++) {
                char plan[64];
                snprintf(plan, sizeof plan, "[{\"cut_after_events\":%d}]", k);
                harness h;
                opts o = {.wire = (ah_wire)wire, .plan = plan, .text = SENTENCES,
                          .max_continuations = -1, .partial = (ah_partial_text)mode};
                harness_start(&h, &o);
                assert_int_equal(ah_worker_run(h.worker, "hello"), AH_OUTCOME_COMPLETED);
                assert_string_equal(ah_worker_text(h.worker), SENTENCES);
                assert_int_equal(occurrences(ah_worker_text(h.worker), "Gamma"), 1);
                cJSON *ce = event_log_find(&h.log, "llm_continuation", 0);
                if (ce && cJSON_GetObjectItem(ce, "committed_blocks")->valueint > 0) {
                    kept_runs++;
                    const char *m = cJSON_GetObjectItem(ce, "mode")->valuestring;
                    assert_string_equal(m, wire == AH_WIRE_ANTHROPIC ? "prefill" : "prompt");
                    /* what was kept is a whole sentence (line), in history, and the next
                     * request carries it */
                    const ah_conversation *c = ah_worker_history(h.worker);
                    const char *kept = ah_conversation_block(c, 1, 0)->text;
                    assert_true(strncmp(SENTENCES, kept, strlen(kept)) == 0);
                    int whole = strcmp(kept, SENTENCES) == 0; /* cut after it closed */
                    partial_runs += !whole;
                    if (mode == AH_PARTIAL_TEXT_LINE)
                        assert_true(whole || strcmp(kept, "Alpha beta. Gamma delta!") == 0);
                    else
                        assert_true(whole || strcmp(kept, "Alpha beta.") == 0 ||
                                    strcmp(kept, "Alpha beta. Gamma delta!") == 0);
                    assert_non_null(strstr(req_body(&h, 1), "Alpha beta."));
                    /* only the unfinished rest was taken back */
                    long long shown = 0;
                    for (size_t i = 0; i < h.log.n; i++)
                        if (event_log_is(&h.log, i, "text_delta") &&
                            strstr(h.log.lines[i], "\"llm_call\":1,"))
                            shown++;
                    assert_true(shown > 0);
                    assert_true(cJSON_GetObjectItem(ce, "discarded_bytes")->valueint <=
                                (int)strlen(SENTENCES) - (int)strlen(kept));
                }
                cJSON_Delete(ce);
                harness_stop(&h);
            }
    print_message("partial text: %d of %d cuts kept something, %d of them a prefix of "
                  "the unfinished block\n",
                  kept_runs, AH_WIRE_COUNT_ * 2 * 15, partial_runs);
    assert_true(partial_runs >= AH_WIRE_COUNT_ * 2);
}

/* A cut inside a tool call discards no text: its arguments never streamed as text, so a
 * display has nothing to take back. */
static void a_cut_tool_call_discards_no_text(void **state)
{
    (void)state;
    harness h;
    opts o = {.wire = AH_WIRE_ANTHROPIC, .plan = "[{\"cut_after_events\":11}]", .tools = 1,
              .max_continuations = -1};
    harness_start(&h, &o);
    assert_int_equal(ah_worker_run(h.worker, "add please"), AH_OUTCOME_COMPLETED);
    assert_int_equal(event_int(&h, "llm_continuation", 0, "discarded_blocks"), 1);
    assert_int_equal(event_int(&h, "llm_continuation", 0, "discarded_bytes"), 0);
    harness_stop(&h);
}

static void cut_inside_tool_use_never_runs_it(void **state)
{
    (void)state;
    harness h;
    /* The model: "I will call add now." (5 deltas) then a tool_use. Events: 1 start,
     * 2 block_start, 3 ping, 4-8 deltas, 9 block_stop, 10 tool block_start,
     * 11 empty input_json_delta -> cut with the tool_use open. */
    opts o = {.wire = AH_WIRE_ANTHROPIC, .plan = "[{\"cut_after_events\":11}]", .tools = 1,
              .max_continuations = 0};
    harness_start(&h, &o);
    assert_int_equal(ah_worker_run(h.worker, "add please"), AH_OUTCOME_FAILED);
    assert_int_equal(ah_worker_error(h.worker)->kind, AH_EK_STREAM);
    assert_int_equal(h.tool_runs, 0);
    int answered;
    assert_int_equal(history_tool_uses(ah_worker_history(h.worker), &answered), 0);
    harness_stop(&h);

    /* With a continuation allowed, the tool runs once: from the completed response. */
    o.max_continuations = -1;
    harness_start(&h, &o);
    assert_int_equal(ah_worker_run(h.worker, "add please"), AH_OUTCOME_COMPLETED);
    assert_int_equal(h.tool_runs, 1);
    assert_int_equal(event_int(&h, "llm_continuation", 0, "committed_blocks"), 1);
    assert_int_equal(event_int(&h, "llm_continuation", 0, "discarded_blocks"), 1);
    assert_int_equal(history_tool_uses(ah_worker_history(h.worker), &answered), 1);
    assert_true(answered);
    assert_string_equal(ah_worker_text(h.worker), "The tool returned: 84");
    harness_stop(&h);
}

static void completed_response_runs_exactly_its_tool_calls(void **state)
{
    (void)state;
    harness h;
    opts o = {.wire = AH_WIRE_ANTHROPIC, .tools = 1, .max_continuations = -1};
    harness_start(&h, &o);
    assert_int_equal(ah_worker_run(h.worker, "add please"), AH_OUTCOME_COMPLETED);
    assert_int_equal(h.tool_runs, 1);
    assert_int_equal(event_log_count(&h.log, "tool_call_start"), 1);
    assert_int_equal(event_log_count(&h.log, "tool_call_end"), 1);
    assert_int_equal(ah_mock_request_count(h.mock), 2);
    /* The default idempotency key is run id + tool call id. */
    char prefix[64];
    snprintf(prefix, sizeof prefix, "%s:", ah_worker_run_id(h.worker));
    assert_int_equal(strncmp(h.keys_seen[0], prefix, strlen(prefix)), 0);
    assert_string_equal(ah_worker_text(h.worker), "The tool returned: 84");
    ah_worker_stats st;
    ah_worker_get_stats(h.worker, &st);
    assert_int_equal(st.tool_calls, 1);
    assert_int_equal(st.steps, 2);
    harness_stop(&h);
}

static void continuation_cap_fails_with_stream_error(void **state)
{
    (void)state;
    harness h;
    opts o = {.wire = AH_WIRE_ANTHROPIC,
              .plan = "{\"steps\":[],\"then\":{\"cut_after_events\":5}}",
              .text = TEXT4,
              .max_continuations = 2};
    harness_start(&h, &o);
    assert_int_equal(ah_worker_run(h.worker, "hello"), AH_OUTCOME_FAILED);
    assert_int_equal(ah_worker_error(h.worker)->kind, AH_EK_STREAM);
    assert_int_equal(event_log_count(&h.log, "llm_continuation"), 2);
    assert_int_equal(ah_mock_request_count(h.mock), 3);
    cJSON *end = event_log_find(&h.log, "run_end", 0);
    assert_string_equal(cJSON_GetObjectItem(end, "outcome")->valuestring, "failed");
    assert_string_equal(
        cJSON_GetObjectItem(cJSON_GetObjectItem(end, "error"), "kind")->valuestring, "stream");
    cJSON_Delete(end);
    harness_stop(&h);
}

static void cancel_during_continuation_sends_nothing_more(void **state)
{
    (void)state;
    harness h;
    opts o = {.wire = AH_WIRE_ANTHROPIC, .plan = "[{\"cut_after_events\":5}]", .text = TEXT4,
              .max_continuations = -1};
    harness_start(&h, &o);
    h.cancel_on_continuation = 1;
    assert_int_equal(ah_worker_run(h.worker, "hello"), AH_OUTCOME_CANCELLED);
    assert_int_equal(ah_mock_request_count(h.mock), 1);
    assert_int_equal(event_log_count(&h.log, "run_end"), 1);
    harness_stop(&h);
}

/* The C API continues a conversation: a second worker starts from the first's history
 * (copied), sends all of it, and its own history is the whole conversation. Each wire
 * format's encoder accepts the history with a tool round in it. */
static void run_continues_an_existing_conversation(void **state)
{
    (void)state;
    for (int wire = 0; wire < AH_WIRE_COUNT_; wire++) {
        harness h1, h2;
        opts o = {.wire = (ah_wire)wire, .tools = 1, .max_continuations = -1};
        harness_start(&h1, &o);
        assert_int_equal(ah_worker_run(h1.worker, "add 2 and 3"), AH_OUTCOME_COMPLETED);
        ah_conversation *first = ah_conversation_copy(ah_worker_history(h1.worker));
        size_t n1 = ah_conversation_count(first);
        assert_true(n1 >= 4); /* user, assistant tool_use, tool results, assistant */
        harness_stop(&h1);
        o.history = first;
        harness_start(&h2, &o);
        assert_int_equal(ah_worker_run(h2.worker, "and now?"), AH_OUTCOME_COMPLETED);
        const ah_conversation *c = ah_worker_history(h2.worker);
        assert_int_equal(ah_conversation_count(c), n1 + 2);
        assert_string_equal(ah_conversation_block(c, 0, 0)->text, "add 2 and 3");
        assert_string_equal(ah_conversation_block(c, n1, 0)->text, "and now?");
        assert_non_null(strstr(req_body(&h2, 0), "add 2 and 3"));
        assert_non_null(strstr(req_body(&h2, 0), "The tool returned"));
        assert_int_equal(ah_conversation_count(first), n1); /* the run worked on a copy */
        assert_int_equal(event_log_count(&h2.log, "run_end"), 1);
        harness_stop(&h2);
        ah_conversation_free(first);
    }
}

static void no_secret_reaches_events_or_the_wire_log(void **state)
{
    (void)state;
    harness h;
    opts o = {.wire = AH_WIRE_ANTHROPIC,
              .plan = "[{\"status\":503,\"message\":\"bad key " KEY "\"},"
                      "{\"status\":401,\"message\":\"invalid x-api-key " KEY "\"}]",
              .max_continuations = -1};
    harness_start(&h, &o);
    assert_int_equal(ah_worker_run(h.worker, "hello"), AH_OUTCOME_FAILED);
    assert_int_equal(event_log_count(&h.log, "llm_gave_up"), 1);
    assert_null(strstr(ah_worker_error(h.worker)->message, "PLANTEDKEY"));
    assert_no_secret(&h);
    harness_stop(&h);
}

static void continue_prompt_is_visible_history(void **state)
{
    (void)state;
    harness h;
    /* chat: role chunk, 4 content chunks, finish chunk, usage chunk = 7 events: the text
     * block closed at finish_reason, then the stream is cut before [DONE]. */
    opts o = {.wire = AH_WIRE_OPENAI, .plan = "[{\"cut_after_events\":7}]", .text = TEXT4,
              .max_continuations = -1, .continue_prompt = "Please continue."};
    harness_start(&h, &o);
    assert_int_equal(ah_worker_run(h.worker, "hello"), AH_OUTCOME_COMPLETED);
    assert_int_equal(event_int(&h, "llm_continuation", 0, "committed_blocks"), 1);
    /* openai is on the prompt rung: the mode says so and the prompt is the caller's. */
    cJSON *ce = event_log_find(&h.log, "llm_continuation", 0);
    assert_string_equal(cJSON_GetObjectItem(ce, "mode")->valuestring, "prompt");
    cJSON_Delete(ce);
    /* History: user, partial assistant, the visible prompt. The text block was complete,
     * so the continuation (the rest of the reply) is empty: no fourth message, and the
     * answer holds the text once. */
    const ah_conversation *c = ah_worker_history(h.worker);
    assert_int_equal(ah_conversation_count(c), 3);
    assert_string_equal(ah_worker_text(h.worker), TEXT4);
    assert_int_equal(ah_conversation_role(c, 1), AH_ROLE_ASSISTANT);
    assert_true(ah_conversation_is_partial(c, 1));
    assert_string_equal(ah_conversation_block(c, 1, 0)->text, TEXT4);
    assert_int_equal(ah_conversation_role(c, 2), AH_ROLE_USER);
    assert_string_equal(ah_conversation_block(c, 2, 0)->text, "Please continue.");
    /* ... and the request carried exactly what history shows, in that order. */
    const char *body = req_body(&h, 1);
    const char *partial = strstr(body, TEXT4), *prompt = strstr(body, "Please continue.");
    assert_non_null(partial);
    assert_non_null(prompt);
    assert_true(partial < prompt);
    harness_stop(&h);
}

/* ---- the fault matrix --------------------------------------------------------------------------- */

typedef struct fault {
    const char *name;
    const char *step; /* JSON object, %d replaced by K when present */
    int per_k;        /* iterate K over 0..max_k */
} fault;

static const fault FAULTS[] = {
    {"503", "{\"status\":503}", 0},
    {"529 retry-after", "{\"status\":529,\"headers\":{\"Retry-After\":\"0\"}}", 0},
    {"429 retry-after-ms", "{\"status\":429,\"headers\":{\"retry-after-ms\":\"20\"}}", 0},
    {"504", "{\"status\":504}", 0},
    {"reset", "{\"reset\":true}", 0},
    {"delayed headers", "{\"delay_headers_ms\":30}", 0},
    {"cut", "{\"cut_after_events\":%d}", 1},
    {"stall", "{\"stall_after_events\":%d}", 1},
    {"malformed", "{\"malformed_event_after\":%d}", 1},
    {"error event", "{\"error_event_after\":%d}", 1},
};

/* The reference: an uninterrupted run's final text and tool-result count. */
static void reference_run(ah_wire wire, char *text, size_t size)
{
    harness h;
    opts o = {.wire = wire, .tools = 1, .max_continuations = -1};
    harness_start(&h, &o);
    assert_int_equal(ah_worker_run(h.worker, "add please"), AH_OUTCOME_COMPLETED);
    snprintf(text, size, "%s", ah_worker_text(h.worker));
    assert_int_equal(h.tool_runs, 1);
    harness_stop(&h);
}

static void fault_matrix(void **state)
{
    (void)state;
    int runs = 0;
    for (int wire = 0; wire < AH_WIRE_COUNT_; wire++) {
        char ref[256];
        reference_run((ah_wire)wire, ref, sizeof ref);
        for (size_t f = 0; f < sizeof FAULTS / sizeof FAULTS[0]; f++) {
            int max_k = FAULTS[f].per_k ? 24 : 0;
            for (int k = 0; k <= max_k; k++) {
                char step[160], plan[200];
                snprintf(step, sizeof step, FAULTS[f].step, k);
                snprintf(plan, sizeof plan, "[%s]", step);
                harness h;
                opts o = {.wire = (ah_wire)wire, .plan = plan, .tools = 1,
                          .max_continuations = -1, .idle_timeout_ms = 150};
                harness_start(&h, &o);
                ah_run_outcome out = ah_worker_run(h.worker, "add please");
                if (out != AH_OUTCOME_COMPLETED)
                    fail_msg("%s / %s k=%d: outcome %s (%s)", ah_wire_name((ah_wire)wire),
                             FAULTS[f].name, k, ah_run_outcome_name(out),
                             ah_worker_error(h.worker)->message);
                /* No committed text duplicated or lost. */
                if (strcmp(ah_worker_text(h.worker), ref) != 0)
                    fail_msg("%s / %s k=%d: text '%s' != reference '%s'",
                             ah_wire_name((ah_wire)wire), FAULTS[f].name, k,
                             ah_worker_text(h.worker), ref);
                /* Exactly one execution of the one tool call; no incomplete tool_use
                 * executed or committed; every committed tool_use answered. */
                assert_int_equal(h.tool_runs, 1);
                int answered;
                assert_int_equal(history_tool_uses(ah_worker_history(h.worker), &answered), 1);
                assert_true(answered);
                /* Errors classified right: a fault before the stream is a retry, after
                 * it a continuation. */
                size_t retries = event_log_count(&h.log, "llm_retry");
                size_t conts = event_log_count(&h.log, "llm_continuation");
                if (!FAULTS[f].per_k && strcmp(FAULTS[f].name, "delayed headers") != 0)
                    assert_int_equal(retries, 1);
                assert_true(conts <= 1);
                if (FAULTS[f].per_k && conts == 1) {
                    /* A continuation that kept nothing new (the same request again), or
                     * one the provider's error caused, is also a retry: one llm_retry
                     * for the broken stream, after its llm_call_end. */
                    cJSON *ce = event_log_find(&h.log, "llm_continuation", 0);
                    const char *mode = cJSON_GetObjectItem(ce, "mode")->valuestring;
                    int regen = strcmp(mode, "regenerate") == 0;
                    assert_int_equal(regen,
                                     cJSON_GetObjectItem(ce, "committed_blocks")->valueint == 0);
                    int provider = strcmp(FAULTS[f].name, "error event") == 0;
                    if (retries != (size_t)(regen || provider))
                        fail_msg("%s / %s k=%d: %zu retries, mode %s",
                                 ah_wire_name((ah_wire)wire), FAULTS[f].name, k, retries,
                                 mode);
                    cJSON_Delete(ce);
                    if (retries) {
                        cJSON *re = event_log_find(&h.log, "llm_retry", 0);
                        assert_string_equal(
                            cJSON_GetObjectItem(cJSON_GetObjectItem(re, "error"), "kind")
                                ->valuestring,
                            "stream");
                        cJSON_Delete(re);
                    }
                } else if (FAULTS[f].per_k) {
                    assert_int_equal(retries, 0);
                }
                /* Every request that started either failed before its head (an
                 * llm_retry of kind other than stream) or ended (llm_call_end). */
                size_t stream_retries = 0;
                for (size_t i = 0; i < h.log.n; i++)
                    stream_retries += event_log_is(&h.log, i, "llm_retry") &&
                                      strstr(h.log.lines[i], "\"kind\":\"stream\"");
                assert_int_equal(event_log_count(&h.log, "llm_call_start"),
                                 event_log_count(&h.log, "llm_call_end") + retries -
                                     stream_retries);
                assert_no_secret(&h);
                harness_stop(&h);
                runs++;
            }
        }
    }
    print_message("fault matrix: %d runs\n", runs);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(retry_before_stream_leaves_history_unchanged),
        cmocka_unit_test(cut_after_complete_text_block_commits_it_once),
        cmocka_unit_test(cut_inside_text_block_drops_it),
        cmocka_unit_test(partial_text_keeps_complete_sentences_or_lines),
        cmocka_unit_test(a_cut_tool_call_discards_no_text),
        cmocka_unit_test(cut_inside_tool_use_never_runs_it),
        cmocka_unit_test(completed_response_runs_exactly_its_tool_calls),
        cmocka_unit_test(continuation_cap_fails_with_stream_error),
        cmocka_unit_test(cancel_during_continuation_sends_nothing_more),
        cmocka_unit_test(no_secret_reaches_events_or_the_wire_log),
        cmocka_unit_test(run_continues_an_existing_conversation),
        cmocka_unit_test(continue_prompt_is_visible_history),
        cmocka_unit_test(fault_matrix),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
