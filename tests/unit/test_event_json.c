/* test_event_json.c - every event type round-trips through JSON unchanged, names come
 * from the X-macros, and malformed JSON is refused with a message naming the field. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "agenthost.h"

static ah_error sample_error(void)
{
    ah_error e;
    ah_error_clear(&e);
    e.kind = AH_EK_HTTP;
    e.status = 529;
    e.retry_after_ms = 1000;
    strcpy(e.provider_type, "overloaded_error");
    strcpy(e.message, "HTTP 529 overloaded_error: Overloaded \"quoted\" \xc3\xa9");
    return e;
}

/* One event of every type, with values that differ from the zero defaults. */
static int make_events(ah_event *evs, const ah_error *err)
{
    int n = 0;
    evs[n].type = AH_EV_RUN_START;
    evs[n++].u.run_start.run_id = "run-42";
    evs[n].type = AH_EV_LLM_CALL_START;
    evs[n].u.llm_call_start.llm_call = 3;
    evs[n].u.llm_call_start.attempt = 2;
    evs[n++].u.llm_call_start.continuation = 1;
    evs[n].type = AH_EV_TEXT_DELTA;
    evs[n].u.delta.llm_call = 3;
    evs[n].u.delta.block = 1;
    evs[n].u.delta.text = "Hello\n\"world\" \xe2\x9c\x93 and more that is cut";
    evs[n++].u.delta.len = 24; /* a prefix: deltas need not be NUL-terminated */
    evs[n].type = AH_EV_REASONING_DELTA;
    evs[n].u.delta.llm_call = 3;
    evs[n].u.delta.block = 0;
    evs[n].u.delta.text = "thinking\ttab";
    evs[n++].u.delta.len = strlen("thinking\ttab");
    evs[n].type = AH_EV_TOOL_CALL_START;
    evs[n].u.tool_call_start.llm_call = 4;
    evs[n].u.tool_call_start.id = "toolu_01";
    evs[n++].u.tool_call_start.name = "add";
    evs[n].type = AH_EV_TOOL_CALL_END;
    evs[n].u.tool_call_end.id = "toolu_01";
    evs[n].u.tool_call_end.name = "add";
    evs[n].u.tool_call_end.outcome = AH_TOOL_BUDGET_EXHAUSTED;
    evs[n].u.tool_call_end.duplicate = 1;
    evs[n++].u.tool_call_end.attempts = 2;
    evs[n].type = AH_EV_LLM_RETRY;
    evs[n].u.llm_retry.llm_call = 1;
    evs[n].u.llm_retry.failed_attempt = 2;
    evs[n].u.llm_retry.max_attempts = 4;
    evs[n].u.llm_retry.wait_ms = 1200;
    evs[n].u.llm_retry.wait_source = AH_WAIT_SERVER;
    evs[n].u.llm_retry.elapsed_ms = 3456;
    evs[n].u.llm_retry.status = 529;
    evs[n++].u.llm_retry.error = err;
    evs[n].type = AH_EV_LLM_PACED;
    evs[n].u.llm_paced.llm_call = 3;
    evs[n].u.llm_paced.wait_ms = 250;
    evs[n++].u.llm_paced.limit = "requests_per_minute";
    evs[n].type = AH_EV_LLM_WAITING;
    evs[n].u.llm_waiting.llm_call = 2;
    evs[n].u.llm_waiting.wait = "stream";
    evs[n].u.llm_waiting.waited_ms = 12000;
    evs[n++].u.llm_waiting.remaining_ms = -1;
    evs[n].type = AH_EV_LLM_GAVE_UP;
    evs[n].u.llm_gave_up.llm_call = 1;
    evs[n].u.llm_gave_up.attempts = 4;
    evs[n].u.llm_gave_up.elapsed_ms = 9000;
    evs[n].u.llm_gave_up.status = 0;
    evs[n].u.llm_gave_up.error = err;
    evs[n++].u.llm_gave_up.reason = AH_GIVEUP_RETRY_AFTER_TOO_LONG;
    evs[n].type = AH_EV_LLM_CONTINUATION;
    evs[n].u.llm_continuation.llm_call = 2;
    evs[n].u.llm_continuation.continuation = 1;
    evs[n].u.llm_continuation.max_continuations = 3;
    evs[n].u.llm_continuation.committed_blocks = 2;
    evs[n].u.llm_continuation.discarded_blocks = 1;
    evs[n].u.llm_continuation.discarded_bytes = 17;
    evs[n].u.llm_continuation.mode = AH_CONT_PROMPT;
    evs[n++].u.llm_continuation.reason = "stream cut";
    evs[n].type = AH_EV_LLM_CALL_END;
    evs[n].u.llm_call_end.llm_call = 2;
    evs[n].u.llm_call_end.stop_reason = "end_turn";
    evs[n].u.llm_call_end.input_tokens = 123;
    evs[n].u.llm_call_end.output_tokens = 45;
    evs[n++].u.llm_call_end.trimmed_bytes = 21;
    evs[n].type = AH_EV_TOOL_RETRY;
    evs[n].u.tool_retry.id = "toolu_01";
    evs[n].u.tool_retry.name = "charge";
    evs[n].u.tool_retry.failed_attempt = 1;
    evs[n].u.tool_retry.max_attempts = 3;
    evs[n].u.tool_retry.wait_ms = 250;
    evs[n++].u.tool_retry.error = err;
    evs[n].type = AH_EV_BUDGET_EXHAUSTED;
    evs[n].u.budget_exhausted.budget = "tool_calls";
    evs[n].u.budget_exhausted.used = 4;
    evs[n++].u.budget_exhausted.limit = 4;
    evs[n].type = AH_EV_RUN_END;
    evs[n].u.run_end.outcome = AH_OUTCOME_FAILED;
    evs[n++].u.run_end.error = err;
    evs[n].type = AH_EV_RUN_END;
    evs[n].u.run_end.outcome = AH_OUTCOME_COMPLETED;
    evs[n++].u.run_end.error = NULL;
    evs[n].type = AH_EV_MCP_SERVER;
    evs[n].u.mcp_server.server = "fs";
    evs[n].u.mcp_server.state = "restarting";
    evs[n].u.mcp_server.attempt = 2;
    evs[n].u.mcp_server.max_attempts = 5;
    evs[n].u.mcp_server.protocol = "2025-11-25";
    evs[n++].u.mcp_server.reason = "exited with status 1";
    evs[n].type = AH_EV_MCP_PROGRESS;
    evs[n].u.mcp_progress.server = "fs";
    evs[n].u.mcp_progress.id = "toolu_1";
    evs[n].u.mcp_progress.name = "fs__search";
    evs[n].u.mcp_progress.progress = 0.25;
    evs[n].u.mcp_progress.total = NAN;
    evs[n++].u.mcp_progress.message = NULL;
    return n;
}

static void assert_str_eq_nullable(const char *a, const char *b)
{
    if (!a || !b)
        assert_ptr_equal(a, b);
    else
        assert_string_equal(a, b);
}

static void assert_error_eq(const ah_error *a, const ah_error *b)
{
    if (!a || !b) {
        assert_ptr_equal(a, b);
        return;
    }
    assert_int_equal(a->kind, b->kind);
    assert_int_equal(a->status, b->status);
    assert_int_equal(a->retry_after_ms, b->retry_after_ms);
    assert_string_equal(a->provider_type, b->provider_type);
    assert_string_equal(a->message, b->message);
}

static void assert_event_eq(const ah_event *a, const ah_event *b)
{
    assert_int_equal(a->type, b->type);
    assert_str_eq_nullable(a->run_id, b->run_id);
    assert_int_equal(a->ts_ms, b->ts_ms);
    switch (a->type) {
    case AH_EV_RUN_START:
        assert_str_eq_nullable(a->u.run_start.run_id, b->u.run_start.run_id);
        break;
    case AH_EV_LLM_CALL_START:
        assert_memory_equal(&a->u.llm_call_start, &b->u.llm_call_start,
                            sizeof a->u.llm_call_start);
        break;
    case AH_EV_TEXT_DELTA:
    case AH_EV_REASONING_DELTA:
        assert_int_equal(a->u.delta.llm_call, b->u.delta.llm_call);
        assert_int_equal(a->u.delta.block, b->u.delta.block);
        assert_int_equal(a->u.delta.len, b->u.delta.len);
        assert_memory_equal(a->u.delta.text, b->u.delta.text, a->u.delta.len);
        break;
    case AH_EV_TOOL_CALL_START:
        assert_int_equal(a->u.tool_call_start.llm_call, b->u.tool_call_start.llm_call);
        assert_str_eq_nullable(a->u.tool_call_start.id, b->u.tool_call_start.id);
        assert_str_eq_nullable(a->u.tool_call_start.name, b->u.tool_call_start.name);
        break;
    case AH_EV_TOOL_CALL_END:
        assert_str_eq_nullable(a->u.tool_call_end.id, b->u.tool_call_end.id);
        assert_str_eq_nullable(a->u.tool_call_end.name, b->u.tool_call_end.name);
        assert_int_equal(a->u.tool_call_end.outcome, b->u.tool_call_end.outcome);
        assert_int_equal(a->u.tool_call_end.duplicate, b->u.tool_call_end.duplicate);
        assert_int_equal(a->u.tool_call_end.attempts, b->u.tool_call_end.attempts);
        break;
    case AH_EV_LLM_RETRY:
        assert_int_equal(a->u.llm_retry.llm_call, b->u.llm_retry.llm_call);
        assert_int_equal(a->u.llm_retry.failed_attempt, b->u.llm_retry.failed_attempt);
        assert_int_equal(a->u.llm_retry.max_attempts, b->u.llm_retry.max_attempts);
        assert_int_equal(a->u.llm_retry.wait_ms, b->u.llm_retry.wait_ms);
        assert_int_equal(a->u.llm_retry.wait_source, b->u.llm_retry.wait_source);
        assert_int_equal(a->u.llm_retry.elapsed_ms, b->u.llm_retry.elapsed_ms);
        assert_int_equal(a->u.llm_retry.status, b->u.llm_retry.status);
        assert_error_eq(a->u.llm_retry.error, b->u.llm_retry.error);
        break;
    case AH_EV_LLM_PACED:
        assert_int_equal(a->u.llm_paced.llm_call, b->u.llm_paced.llm_call);
        assert_int_equal(a->u.llm_paced.wait_ms, b->u.llm_paced.wait_ms);
        assert_str_eq_nullable(a->u.llm_paced.limit, b->u.llm_paced.limit);
        break;
    case AH_EV_LLM_WAITING:
        assert_int_equal(a->u.llm_waiting.llm_call, b->u.llm_waiting.llm_call);
        assert_str_eq_nullable(a->u.llm_waiting.wait, b->u.llm_waiting.wait);
        assert_int_equal(a->u.llm_waiting.waited_ms, b->u.llm_waiting.waited_ms);
        assert_int_equal(a->u.llm_waiting.remaining_ms, b->u.llm_waiting.remaining_ms);
        break;
    case AH_EV_LLM_GAVE_UP:
        assert_int_equal(a->u.llm_gave_up.llm_call, b->u.llm_gave_up.llm_call);
        assert_int_equal(a->u.llm_gave_up.attempts, b->u.llm_gave_up.attempts);
        assert_int_equal(a->u.llm_gave_up.elapsed_ms, b->u.llm_gave_up.elapsed_ms);
        assert_int_equal(a->u.llm_gave_up.status, b->u.llm_gave_up.status);
        assert_int_equal(a->u.llm_gave_up.reason, b->u.llm_gave_up.reason);
        assert_error_eq(a->u.llm_gave_up.error, b->u.llm_gave_up.error);
        break;
    case AH_EV_LLM_CONTINUATION:
        assert_int_equal(a->u.llm_continuation.llm_call, b->u.llm_continuation.llm_call);
        assert_int_equal(a->u.llm_continuation.continuation,
                         b->u.llm_continuation.continuation);
        assert_int_equal(a->u.llm_continuation.max_continuations,
                         b->u.llm_continuation.max_continuations);
        assert_int_equal(a->u.llm_continuation.committed_blocks,
                         b->u.llm_continuation.committed_blocks);
        assert_int_equal(a->u.llm_continuation.discarded_blocks,
                         b->u.llm_continuation.discarded_blocks);
        assert_int_equal(a->u.llm_continuation.discarded_bytes,
                         b->u.llm_continuation.discarded_bytes);
        assert_int_equal(a->u.llm_continuation.mode, b->u.llm_continuation.mode);
        assert_str_eq_nullable(a->u.llm_continuation.reason, b->u.llm_continuation.reason);
        break;
    case AH_EV_LLM_CALL_END:
        assert_int_equal(a->u.llm_call_end.llm_call, b->u.llm_call_end.llm_call);
        assert_str_eq_nullable(a->u.llm_call_end.stop_reason, b->u.llm_call_end.stop_reason);
        assert_int_equal(a->u.llm_call_end.input_tokens, b->u.llm_call_end.input_tokens);
        assert_int_equal(a->u.llm_call_end.output_tokens, b->u.llm_call_end.output_tokens);
        assert_int_equal(a->u.llm_call_end.trimmed_bytes, b->u.llm_call_end.trimmed_bytes);
        break;
    case AH_EV_TOOL_RETRY:
        assert_str_eq_nullable(a->u.tool_retry.id, b->u.tool_retry.id);
        assert_str_eq_nullable(a->u.tool_retry.name, b->u.tool_retry.name);
        assert_int_equal(a->u.tool_retry.failed_attempt, b->u.tool_retry.failed_attempt);
        assert_int_equal(a->u.tool_retry.max_attempts, b->u.tool_retry.max_attempts);
        assert_int_equal(a->u.tool_retry.wait_ms, b->u.tool_retry.wait_ms);
        assert_error_eq(a->u.tool_retry.error, b->u.tool_retry.error);
        break;
    case AH_EV_BUDGET_EXHAUSTED:
        assert_str_eq_nullable(a->u.budget_exhausted.budget, b->u.budget_exhausted.budget);
        assert_int_equal(a->u.budget_exhausted.used, b->u.budget_exhausted.used);
        assert_int_equal(a->u.budget_exhausted.limit, b->u.budget_exhausted.limit);
        break;
    case AH_EV_RUN_END:
        assert_int_equal(a->u.run_end.outcome, b->u.run_end.outcome);
        assert_error_eq(a->u.run_end.error, b->u.run_end.error);
        break;
    case AH_EV_MCP_SERVER:
        assert_str_eq_nullable(a->u.mcp_server.server, b->u.mcp_server.server);
        assert_str_eq_nullable(a->u.mcp_server.state, b->u.mcp_server.state);
        assert_int_equal(a->u.mcp_server.attempt, b->u.mcp_server.attempt);
        assert_int_equal(a->u.mcp_server.max_attempts, b->u.mcp_server.max_attempts);
        assert_str_eq_nullable(a->u.mcp_server.protocol, b->u.mcp_server.protocol);
        assert_str_eq_nullable(a->u.mcp_server.reason, b->u.mcp_server.reason);
        break;
    case AH_EV_MCP_PROGRESS:
        assert_str_eq_nullable(a->u.mcp_progress.server, b->u.mcp_progress.server);
        assert_str_eq_nullable(a->u.mcp_progress.id, b->u.mcp_progress.id);
        assert_str_eq_nullable(a->u.mcp_progress.name, b->u.mcp_progress.name);
        assert_true(a->u.mcp_progress.progress == b->u.mcp_progress.progress);
        assert_true(isnan(a->u.mcp_progress.total) == isnan(b->u.mcp_progress.total));
        assert_str_eq_nullable(a->u.mcp_progress.message, b->u.mcp_progress.message);
        break;
    default:
        fail_msg("unexpected type %d", a->type);
    }
}

static void every_type_round_trips(void **state)
{
    (void)state;
    ah_error err = sample_error();
    ah_event evs[24];
    memset(evs, 0, sizeof evs);
    int n = make_events(evs, &err);
    int seen[AH_EV_COUNT_] = {0};
    for (int i = 0; i < n; i++) {
        /* every event carries its run and wall time; a bare call's run_id is null */
        evs[i].run_id = i % 3 == 2 ? NULL : "run_00c0ffee";
        evs[i].ts_ms = 1764583200123LL + i;
        if (evs[i].type == AH_EV_RUN_START)
            evs[i].run_id = evs[i].u.run_start.run_id;
        char *json = ah_event_to_json(&evs[i]);
        assert_non_null(json);
        assert_null(strchr(json, '\n')); /* one line: JSON Lines */
        char msg[128];
        ah_event_box *box = ah_event_from_json(json, strlen(json), msg, sizeof msg);
        if (!box)
            fail_msg("decode of %s failed: %s", json, msg);
        assert_event_eq(&evs[i], ah_event_box_get(box));
        /* Encoding the decoded event gives the same bytes. */
        char *again = ah_event_to_json(ah_event_box_get(box));
        assert_string_equal(json, again);
        seen[evs[i].type] = 1;
        free(again);
        free(json);
        ah_event_box_free(box);
    }
    for (int t = 0; t < AH_EV_COUNT_; t++)
        if (!seen[t])
            fail_msg("event type %s has no round-trip case", ah_event_type_name((ah_event_type)t));
}

static void json_uses_spec_names(void **state)
{
    (void)state;
    ah_error err = sample_error();
    ah_event ev;
    memset(&ev, 0, sizeof ev);
    ev.type = AH_EV_LLM_RETRY;
    ev.u.llm_retry.wait_source = AH_WAIT_BACKOFF;
    ev.u.llm_retry.status = 0;
    ev.u.llm_retry.error = &err;
    char *json = ah_event_to_json(&ev);
    cJSON *o = cJSON_Parse(json);
    assert_non_null(o);
    assert_string_equal(cJSON_GetObjectItem(o, "type")->valuestring, "llm_retry");
    assert_string_equal(cJSON_GetObjectItem(o, "wait_source")->valuestring, "backoff");
    assert_true(cJSON_IsNull(cJSON_GetObjectItem(o, "status"))); /* 0 -> null */
    const char *fields[] = {"llm_call", "failed_attempt", "max_attempts", "wait_ms",
                            "elapsed_ms", "error"};
    for (size_t i = 0; i < sizeof fields / sizeof fields[0]; i++)
        assert_non_null(cJSON_GetObjectItem(o, fields[i]));
    cJSON *e = cJSON_GetObjectItem(o, "error");
    assert_string_equal(cJSON_GetObjectItem(e, "kind")->valuestring, "http");
    assert_int_equal(cJSON_GetObjectItem(e, "status")->valueint, 529);
    cJSON_Delete(o);
    free(json);
}

static void malformed_json_names_the_problem(void **state)
{
    (void)state;
    static const struct {
        const char *json, *expect;
    } cases[] = {
        {"not json", "not a JSON object"},
        {"[1,2]", "not a JSON object"},
        {"{}", "missing field 'type'"},
        {"{\"type\":\"nope\"}", "unknown type 'nope'"},
        {"{\"type\":\"llm_call_start\",\"attempt\":1,\"continuation\":0}",
         "missing field 'llm_call'"},
        {"{\"type\":\"llm_call_start\",\"llm_call\":\"x\",\"attempt\":1,\"continuation\":0}",
         "field 'llm_call' must be a number"},
        {"{\"type\":\"llm_call_start\",\"llm_call\":1e300,\"attempt\":1,"
         "\"continuation\":0}",
         "field 'llm_call' must be a number"},
        {"{\"type\":\"llm_call_start\",\"llm_call\":1.5,\"attempt\":1,\"continuation\":0}",
         "field 'llm_call' must be a number"},
        {"{\"type\":\"run_end\",\"outcome\":\"exploded\",\"error\":null}",
         "unknown outcome 'exploded'"},
        {"{\"type\":\"run_end\",\"outcome\":\"failed\",\"error\":7}",
         "field 'error' must be an object or null"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char msg[128];
        ah_event_box *b =
            ah_event_from_json(cases[i].json, strlen(cases[i].json), msg, sizeof msg);
        assert_null(b);
        if (!strstr(msg, cases[i].expect))
            fail_msg("case %zu: message '%s' lacks '%s'", i, msg, cases[i].expect);
    }
}

/* run_id and ts_ms come right after type on every event; run_start's run_id is the
 * same field (not written twice); a line without them (older files) still decodes. */
static void run_id_and_ts_on_every_event(void **state)
{
    (void)state;
    ah_error err = sample_error();
    ah_event evs[24];
    memset(evs, 0, sizeof evs);
    int n = make_events(evs, &err);
    for (int i = 0; i < n; i++) {
        evs[i].run_id = "run_1";
        evs[i].ts_ms = 1764583200123LL;
        if (evs[i].type == AH_EV_RUN_START)
            evs[i].u.run_start.run_id = "run_1";
        char *json = ah_event_to_json(&evs[i]);
        char want[96];
        snprintf(want, sizeof want, "{\"type\":\"%s\",\"run_id\":\"run_1\",\"ts_ms\":1764583200123",
                 ah_event_type_name(evs[i].type));
        if (strncmp(json, want, strlen(want)) != 0)
            fail_msg("%s does not start with %s", json, want);
        assert_null(strstr(json + strlen(want), "run_id"));
        free(json);
    }
    const char *old = "{\"type\":\"run_start\",\"run_id\":\"r\"}";
    ah_event_box *b = ah_event_from_json(old, strlen(old), NULL, 0);
    assert_non_null(b);
    assert_string_equal(ah_event_box_get(b)->u.run_start.run_id, "r");
    assert_int_equal(ah_event_box_get(b)->ts_ms, 0);
    ah_event_box_free(b);
    const char *bad = "{\"type\":\"run_end\",\"run_id\":7,\"outcome\":\"failed\",\"error\":null}";
    char msg[128];
    assert_null(ah_event_from_json(bad, strlen(bad), msg, sizeof msg));
    assert_non_null(strstr(msg, "run_id"));
}

static void bad_type_does_not_encode(void **state)
{
    (void)state;
    ah_event ev;
    memset(&ev, 0, sizeof ev);
    ev.type = AH_EV_COUNT_;
    assert_null(ah_event_to_json(&ev));
    assert_null(ah_event_to_json(NULL));
    ah_event_box_free(NULL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(every_type_round_trips),
        cmocka_unit_test(json_uses_spec_names),
        cmocka_unit_test(malformed_json_names_the_problem),
        cmocka_unit_test(bad_type_does_not_encode),
        cmocka_unit_test(run_id_and_ts_on_every_event),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
