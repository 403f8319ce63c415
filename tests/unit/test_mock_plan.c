/* test_mock_plan.c - the mock's fault plan parser: every step kind with its fields, and
 * every validation error with the exact message naming the step and the field. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <string.h>

#include "mock/mock_internal.h"
#include "agenthost/mock.h"

static ah__mock_plan *parse_ok(const char *json)
{
    ah__mock_plan *p = NULL;
    char err[256] = "";
    ah_status st = ah__mock_plan_parse(json, &p, err, sizeof err);
    if (st != AH_OK)
        fprintf(stderr, "unexpected error: %s\n", err);
    assert_int_equal(st, AH_OK);
    assert_non_null(p);
    return p;
}

static void every_kind_parses(void **state)
{
    (void)state;
    ah__mock_plan *p =
        parse_ok("[{\"ok\": true},"
                 " {\"status\": 503, \"headers\": {\"Retry-After\": \"2\", "
                 "\"retry-after-ms\": 1500,"
                 "   \"x-should-retry\": \"true\", \"X-Date\": {\"date_in_seconds\": 3}},"
                 "   \"error_type\": \"overloaded_error\", \"message\": \"busy\"},"
                 " {\"reset\": true, \"delay_headers_ms\": 10},"
                 " {\"delay_headers_ms\": 250},"
                 " {\"cut_after_events\": 3},"
                 " {\"stall_after_events\": 2},"
                 " {\"stall_after_events\": 0, \"stall_ms\": 100},"
                 " {\"malformed_event_after\": 4},"
                 " {\"error_event_after\": 5, \"error_type\": \"rate_limit_error\"},"
                 " {\"ok\": true, \"text\": \"hi there\", \"text_deltas\": 7},"
                 " {\"cut_after_events\": 1, \"delta_bytes\": 3},"
                 " {\"status\": 429, \"body\": {\"error\": {\"type\": \"x\"}}},"
                 " {\"status\": 500, \"body\": \"raw text\"}]");
    assert_int_equal(p->count, 13);
    const ah__mock_step *s = p->steps;
    assert_int_equal(s[0].kind, AH__MOCK_OK);

    assert_int_equal(s[1].kind, AH__MOCK_STATUS);
    assert_int_equal(s[1].status, 503);
    assert_int_equal(s[1].header_count, 4);
    assert_string_equal(s[1].headers[0].name, "Retry-After");
    assert_string_equal(s[1].headers[0].value, "2");
    assert_string_equal(s[1].headers[1].name, "retry-after-ms");
    assert_string_equal(s[1].headers[1].value, "1500");
    assert_string_equal(s[1].headers[2].value, "true");
    assert_null(s[1].headers[3].value);
    assert_int_equal(s[1].headers[3].date_in, 3);
    assert_string_equal(s[1].error_type, "overloaded_error");
    assert_string_equal(s[1].message, "busy");
    assert_false(s[1].has_body);

    assert_int_equal(s[2].kind, AH__MOCK_RESET);
    assert_int_equal(s[2].delay_headers_ms, 10);
    assert_int_equal(s[3].kind, AH__MOCK_DELAY);
    assert_int_equal(s[3].delay_headers_ms, 250);
    assert_int_equal(s[4].kind, AH__MOCK_CUT);
    assert_int_equal(s[4].after_events, 3);
    assert_int_equal(s[5].kind, AH__MOCK_STALL);
    assert_int_equal(s[5].after_events, 2);
    assert_int_equal(s[5].stall_ms, -1); /* until close */
    assert_int_equal(s[6].stall_ms, 100);
    assert_int_equal(s[6].after_events, 0);
    assert_int_equal(s[7].kind, AH__MOCK_MALFORMED);
    assert_int_equal(s[7].after_events, 4);
    assert_int_equal(s[8].kind, AH__MOCK_ERROR_EVENT);
    assert_int_equal(s[8].after_events, 5);
    assert_string_equal(s[8].error_type, "rate_limit_error");
    assert_null(s[8].message);
    assert_string_equal(s[9].text, "hi there");
    assert_int_equal(s[9].text_deltas, 7);
    assert_int_equal(s[10].delta_bytes, 3);
    assert_true(s[11].has_body);
    assert_string_equal(s[11].body, "{\"error\":{\"type\":\"x\"}}");
    assert_int_equal(s[11].body_len, strlen(s[11].body));
    assert_string_equal(s[12].body, "raw text");
    /* No 'then': ok once the steps are used up. */
    assert_int_equal(p->then.kind, AH__MOCK_OK);
    ah__mock_plan_free(p);
}

static void object_form_with_then(void **state)
{
    (void)state;
    ah__mock_plan *p =
        parse_ok("{\"steps\": [{\"cut_after_events\": 2}], \"then\": {\"status\": 503}}");
    assert_int_equal(p->count, 1);
    assert_int_equal(p->steps[0].kind, AH__MOCK_CUT);
    assert_int_equal(p->then.kind, AH__MOCK_STATUS);
    assert_int_equal(p->then.status, 503);
    ah__mock_plan_free(p);

    p = parse_ok("[]");
    assert_int_equal(p->count, 0);
    assert_int_equal(p->then.kind, AH__MOCK_OK);
    ah__mock_plan_free(p);
}

static void kind_names(void **state)
{
    (void)state;
    static const char *const want[] = {"ok",  "status", "reset",     "delay",
                                       "cut", "stall",  "malformed", "error_event"};
    for (int k = 0; k < AH__MOCK_KIND_COUNT_; k++)
        assert_string_equal(ah__mock_step_kind_name((ah__mock_step_kind)k), want[k]);
    assert_string_equal(ah__mock_step_kind_name((ah__mock_step_kind)99), "unknown");
}

typedef struct bad_case {
    const char *json;
    const char *message;
} bad_case;

static const bad_case bad[] = {
    {"[{\"ok\": true}, {\"ok\": true}, {\"cut_after_event\": 3}]",
     "plan step 3: unknown field 'cut_after_event'"},
    {"[{\"status\": \"503\"}]", "plan step 1: field 'status' must be an integer"},
    {"[{\"status\": 503.5}]", "plan step 1: field 'status' must be an integer"},
    {"[{\"status\": 99}]", "plan step 1: field 'status' must be >= 200"},
    {"[{\"status\": 600}]", "plan step 1: field 'status' must be <= 599"},
    {"[{\"cut_after_events\": -1}]",
     "plan step 1: field 'cut_after_events' must be >= 0"},
    {"[{\"ok\": true}, {\"stall_after_events\": -2}]",
     "plan step 2: field 'stall_after_events' must be >= 0"},
    {"[{\"malformed_event_after\": true}]",
     "plan step 1: field 'malformed_event_after' must be an integer"},
    {"[{\"error_event_after\": null}]",
     "plan step 1: field 'error_event_after' must be an integer"},
    {"[{\"stall_after_events\": 1, \"stall_ms\": -5}]",
     "plan step 1: field 'stall_ms' must be >= 0"},
    {"[{\"delay_headers_ms\": -1}]",
     "plan step 1: field 'delay_headers_ms' must be >= 0"},
    {"[{\"delay_headers_ms\": 90000000}]",
     "plan step 1: field 'delay_headers_ms' must be <= 86400000"},
    {"[{\"ok\": false}]", "plan step 1: field 'ok' must be true"},
    {"[{\"reset\": 1}]", "plan step 1: field 'reset' must be true"},
    {"[{\"reset\": true, \"status\": 503}]",
     "plan step 1: fields 'reset' and 'status' cannot be combined"},
    {"[{\"cut_after_events\": 1, \"stall_after_events\": 1}]",
     "plan step 1: fields 'cut_after_events' and 'stall_after_events' cannot be "
     "combined"},
    {"[{}]", "plan step 1: no step kind (expected one of 'ok', 'status', 'reset', "
             "'delay_headers_ms', 'cut_after_events', 'stall_after_events', "
             "'malformed_event_after', 'error_event_after')"},
    {"[{\"text\": \"x\"}]", "plan step 1: no step kind (expected one of 'ok', 'status', "
                            "'reset', 'delay_headers_ms', 'cut_after_events', "
                            "'stall_after_events', 'malformed_event_after', "
                            "'error_event_after')"},
    {"[{\"cut_after_events\": 1, \"stall_ms\": 5}]",
     "plan step 1: field 'stall_ms' is not allowed in a 'cut_after_events' step"},
    {"[{\"reset\": true, \"headers\": {}}]",
     "plan step 1: field 'headers' is not allowed in a 'reset' step"},
    {"[{\"ok\": true, \"body\": \"x\"}]",
     "plan step 1: field 'body' is not allowed in a 'ok' step"},
    {"[{\"status\": 503, \"text\": \"x\"}]",
     "plan step 1: field 'text' is not allowed in a 'status' step"},
    {"[{\"delay_headers_ms\": 5, \"error_type\": \"x\"}]",
     "plan step 1: field 'error_type' is not allowed in a 'delay_headers_ms' step"},
    {"[{\"ok\": true, \"ok\": true}]", "plan step 1: duplicate field 'ok'"},
    {"[{\"ok\": true, \"text_deltas\": 0}]",
     "plan step 1: field 'text_deltas' must be >= 1"},
    {"[{\"ok\": true, \"delta_bytes\": 0}]",
     "plan step 1: field 'delta_bytes' must be >= 1"},
    {"[{\"ok\": true, \"tool_calls\": 0}]",
     "plan step 1: field 'tool_calls' must be >= 1"},
    {"[{\"ok\": true, \"tool_calls\": 17}]",
     "plan step 1: field 'tool_calls' must be <= 16"},
    {"[{\"status\": 503, \"tool_calls\": 2}]",
     "plan step 1: field 'tool_calls' is not allowed in a 'status' step"},
    {"[{\"ok\": true, \"text_deltas\": 2, \"delta_bytes\": 3}]",
     "plan step 1: fields 'text_deltas' and 'delta_bytes' cannot be combined"},
    {"[{\"ok\": true, \"text\": 5}]", "plan step 1: field 'text' must be a string"},
    {"[{\"error_event_after\": 1, \"error_type\": 5}]",
     "plan step 1: field 'error_type' must be a string"},
    {"[{\"status\": 503, \"message\": {}}]",
     "plan step 1: field 'message' must be a string"},
    {"[{\"status\": 503, \"headers\": \"Retry-After: 1\"}]",
     "plan step 1: field 'headers' must be an object"},
    {"[{\"status\": 503, \"headers\": {\"Retry-After\": [1]}}]",
     "plan step 1: header 'Retry-After' must be a string, a number or "
     "{\"date_in_seconds\": N}"},
    {"[{\"status\": 503, \"headers\": {\"Retry-After\": {\"date_in_seconds\": \"x\"}}}]",
     "plan step 1: header 'Retry-After' must be a string, a number or "
     "{\"date_in_seconds\": N}"},
    {"[{\"status\": 503, \"headers\": {\"Bad Name\": \"1\"}}]",
     "plan step 1: header name 'Bad Name' is not valid"},
    {"[{\"status\": 503, \"headers\": {\"\": \"1\"}}]",
     "plan step 1: header name '' is not valid"},
    {"[{\"status\": 503, \"headers\": {\"X-A\": \"a\\r\\nInjected: 1\"}}]",
     "plan step 1: header 'X-A' value contains a line break"},
    {"[1]", "plan step 1: expected an object"},
    {"[{\"ok\": true}, [\"status\", 503]]", "plan step 2: expected an object"},
    {"{\"steps\": [], \"bogus\": 1}", "plan: unknown field 'bogus'"},
    {"{\"steps\": [], \"steps\": []}", "plan: duplicate field 'steps'"},
    {"{\"then\": {\"ok\": true}}", "plan: missing field 'steps'"},
    {"{\"steps\": {\"ok\": true}}", "plan: field 'steps' must be an array"},
    {"[{\"ok\": true, \"tool_calls\": \"two\"}]",
     "plan step 1: field 'tool_calls' must be a number of calls or a list of "
     "{\"name\": ..., \"arguments\": {...}}"},
    {"[{\"ok\": true, \"tool_calls\": [{\"arguments\": {}}]}]",
     "plan step 1: tool_calls[1]: 'name' must be a non-empty string"},
    {"[{\"ok\": true, \"tool_calls\": [{\"name\": \"a\"}, {\"name\": \"b\", "
     "\"arguments\": [1]}]}]",
     "plan step 1: tool_calls[2]: 'arguments' must be an object"},
    {"[{\"ok\": true, \"tool_calls\": [{\"name\": \"a\", \"args\": {}}]}]",
     "plan step 1: tool_calls[1]: unknown field 'args' (name, arguments)"},
    {"[{\"ok\": true, \"tool_calls\": [7]}]", "plan step 1: tool_calls[1] must be an object"},
    {"{\"steps\": [], \"then\": {\"reset\": 1}}",
     "plan step 'then': field 'reset' must be true"},
    {"{\"steps\": [], \"then\": 7}", "plan step 'then': expected an object"},
    {"\"cut\"", "plan: expected a JSON array of steps or an object with 'steps'"},
    {"42", "plan: expected a JSON array of steps or an object with 'steps'"},
    {"[{\"ok\": true},", "plan: invalid JSON near line 1, column 15"},
    {"[\n  {\"ok\": true},\n  {\"status\": 503,}\n]",
     "plan: invalid JSON near line 3, column 19"},
    {"[] trailing", "plan: invalid JSON near line 1, column 4"},
    {"", "plan: invalid JSON near line 1, column 1"},
    {"[{\"ok\": true, \"restate\": \"all\"}]",
     "plan step 1: field 'restate' must be true, false or \"last_sentence\""},
    {"[{\"ok\": true, \"restate\": 1}]",
     "plan step 1: field 'restate' must be true, false or \"last_sentence\""},
    {"[{\"status\": 400, \"restate\": true}]",
     "plan step 1: field 'restate' is not allowed in a 'status' step"},
    {"[{\"ok\": true, \"refuse_prefill\": false}]",
     "plan step 1: field 'refuse_prefill' must be true"},
};

static void restate_and_refuse_prefill(void **state)
{
    (void)state;
    ah__mock_plan *p = parse_ok("[{\"ok\": true, \"restate\": true},"
                                " {\"cut_after_events\": 3, \"restate\": \"last_sentence\"},"
                                " {\"ok\": true, \"restate\": false, \"refuse_prefill\": true},"
                                " {\"ok\": true}]");
    assert_int_equal(p->steps[0].restate, AH__MOCK_RESTATE_ALL);
    assert_int_equal(p->steps[1].restate, AH__MOCK_RESTATE_LAST_SENTENCE);
    assert_int_equal(p->steps[2].restate, AH__MOCK_RESTATE_NONE);
    assert_true(p->steps[2].refuse_prefill);
    assert_false(p->steps[3].refuse_prefill);
    ah__mock_plan_free(p);
}

static void every_error_names_step_and_field(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        ah__mock_plan *p = (ah__mock_plan *)0x1;
        char err[512] = "";
        ah_status st = ah__mock_plan_parse(bad[i].json, &p, err, sizeof err);
        if (st != AH_ERR_PARSE || strcmp(err, bad[i].message) != 0)
            fprintf(stderr, "case %zu: %s\n  got:  %s\n  want: %s\n", i, bad[i].json, err,
                    bad[i].message);
        assert_int_equal(st, AH_ERR_PARSE);
        assert_null(p);
        assert_string_equal(err, bad[i].message);
        /* The public check gives the same verdict and message. */
        char err2[512] = "";
        assert_int_equal(ah_mock_plan_validate(bad[i].json, err2, sizeof err2),
                         AH_ERR_PARSE);
        assert_string_equal(err2, bad[i].message);
    }
}

/* An empty Lua table (or any map of a language that cannot tell {} from []) where a list
 * is expected is an empty list: the plan, its steps, a step's tool_calls. */
static void empty_tables_are_empty_lists(void **state)
{
    (void)state;
    const char *empty[] = {"{}", "[]", "{\"steps\": {}}",
                           "{\"steps\": {}, \"then\": {\"status\": 503}}"};
    for (size_t i = 0; i < sizeof empty / sizeof empty[0]; i++) {
        ah__mock_plan *p = parse_ok(empty[i]);
        assert_int_equal(p->count, 0);
        assert_int_equal(p->then.kind, i == 3 ? AH__MOCK_STATUS : AH__MOCK_OK);
        ah__mock_plan_free(p);
    }
    ah__mock_plan *p = parse_ok("[{\"ok\": true, \"tool_calls\": {}},"
                                " {\"ok\": true, \"tool_calls\": [{\"name\": \"charge\","
                                "   \"arguments\": {\"cents\": 5}}, {\"name\": \"log\"}]},"
                                " {\"ok\": true, \"tool_calls\": 3}]");
    assert_string_equal(p->steps[0].tool_calls_json, "[]");
    assert_string_equal(p->steps[1].tool_calls_json,
                        "[{\"name\":\"charge\",\"arguments\":{\"cents\":5}},{\"name\":\"log\"}]");
    assert_int_equal(p->steps[1].tool_calls, 0);
    assert_null(p->steps[2].tool_calls_json);
    assert_int_equal(p->steps[2].tool_calls, 3);
    ah__mock_plan_free(p);
}

static void null_and_small_buffers(void **state)
{
    (void)state;
    ah__mock_plan *p = NULL;
    char err[64] = "";
    assert_int_equal(ah__mock_plan_parse(NULL, &p, err, sizeof err), AH_ERR_INVALID);
    assert_null(p);
    assert_true(strlen(err) > 0);
    /* A tiny buffer truncates the message safely; a NULL buffer is allowed. */
    char tiny[12];
    assert_int_equal(ah_mock_plan_validate("[{\"bogus\": 1}]", tiny, sizeof tiny),
                     AH_ERR_PARSE);
    assert_int_equal(strlen(tiny), sizeof tiny - 1);
    assert_int_equal(strncmp(tiny, "plan step 1", sizeof tiny - 1), 0);
    assert_int_equal(ah_mock_plan_validate("[{\"bogus\": 1}]", NULL, 0), AH_ERR_PARSE);
    assert_int_equal(ah_mock_plan_validate("[{\"ok\": true}]", NULL, 0), AH_OK);
}

static void failure_after_good_steps_frees_them(void **state)
{
    (void)state;
    /* Strings of the steps parsed before the bad one must be released (leak check under
     * ASan/valgrind). */
    ah__mock_plan *p = NULL;
    char err[256];
    assert_int_equal(ah__mock_plan_parse("[{\"status\": 503, \"headers\": {\"a\": \"b\"},"
                                         " \"body\": \"x\", \"message\": \"m\"},"
                                         " {\"ok\": true, \"text\": \"t\"},"
                                         " {\"status\": 503, \"headers\": {\"ok\": \"1\","
                                         " \"bad\": []}}]",
                                         &p, err, sizeof err),
                     AH_ERR_PARSE);
    assert_null(p);
    assert_string_equal(err, "plan step 3: header 'bad' must be a string, a number or "
                             "{\"date_in_seconds\": N}");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(every_kind_parses),
        cmocka_unit_test(object_form_with_then),
        cmocka_unit_test(kind_names),
        cmocka_unit_test(every_error_names_step_and_field),
        cmocka_unit_test(restate_and_refuse_prefill),
        cmocka_unit_test(empty_tables_are_empty_lists),
        cmocka_unit_test(null_and_small_buffers),
        cmocka_unit_test(failure_after_good_steps_frees_them),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
