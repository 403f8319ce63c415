/* test_capabilities.c - the model capability table that picks a continuation's rung:
 * Claude version parsing from every id shape in use, the table's rows, the refusal
 * detector and the names of the client setting. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <string.h>

#include "agenthost.h"

static void version(const char *id, int maj, int min)
{
    int a = -1, b = -1;
    if (!ah_claude_version(id, &a, &b))
        fail_msg("%s: no version found", id);
    if (a != maj || b != min)
        fail_msg("%s: got %d.%d, want %d.%d", id, a, b, maj, min);
}

static void claude_versions_from_every_id_shape(void **state)
{
    (void)state;
    version("claude-opus-4-6", 4, 6);
    version("claude-sonnet-4-6", 4, 6);
    version("claude-opus-4-7", 4, 7);
    version("claude-sonnet-4-5", 4, 5);
    version("claude-haiku-4-5-20251001", 4, 5);
    version("claude-opus-4-1-20250805", 4, 1);
    version("claude-sonnet-4-20250514", 4, 0);
    version("claude-3-5-sonnet-20241022", 3, 5);
    version("claude-3-7-sonnet-latest", 3, 7);
    version("claude-3-opus-20240229", 3, 0);
    version("claude-2.1", 2, 1);
    version("claude-instant-1.2", 1, 2);
    version("claude-sonnet-5", 5, 0);
    version("Claude-Opus-4-6", 4, 6);
    version("anthropic.claude-opus-4-7-v1:0", 4, 7);
    version("us.anthropic.claude-sonnet-4-5-20250929-v1:0", 4, 5);
    version("claude-opus-4-6@20260101", 4, 6);
    int a, b;
    assert_false(ah_claude_version("mock-model", &a, &b));
    assert_false(ah_claude_version("claude-latest", &a, &b));
    assert_false(ah_claude_version(NULL, &a, &b));
    assert_false(ah_claude_version("gpt-4.1", &a, &b));
}

static void the_table_picks_prefill_only_where_it_works(void **state)
{
    (void)state;
    const char *no_prefill[] = {"claude-opus-4-6", "claude-sonnet-4-6", "claude-opus-4-7",
                                "claude-haiku-4-6", "claude-opus-4-10", "claude-sonnet-5",
                                "claude-opus-5-1-20270101", "anthropic.claude-opus-4-6-v1:0"};
    for (size_t i = 0; i < sizeof no_prefill / sizeof no_prefill[0]; i++) {
        ah_model_caps c = ah_model_capabilities(AH_WIRE_ANTHROPIC, no_prefill[i], 0);
        if (c.prefill)
            fail_msg("%s should not prefill", no_prefill[i]);
        assert_non_null(strstr(c.rule, "4.6"));
    }
    const char *prefill[] = {"claude-sonnet-4-5", "claude-opus-4-1", "claude-3-5-haiku-latest",
                             "claude-sonnet-4-20250514", "mock-model", "my-proxy"};
    for (size_t i = 0; i < sizeof prefill / sizeof prefill[0]; i++)
        if (!ah_model_capabilities(AH_WIRE_ANTHROPIC, prefill[i], 0).prefill)
            fail_msg("%s should prefill", prefill[i]);
    /* thinking turns prefill off on every Anthropic model */
    ah_model_caps t = ah_model_capabilities(AH_WIRE_ANTHROPIC, "claude-sonnet-4-5", 1);
    assert_false(t.prefill);
    assert_non_null(strstr(t.rule, "thinking"));
    /* OpenAI formats answer after an assistant message instead of continuing it */
    assert_false(ah_model_capabilities(AH_WIRE_OPENAI, "gpt-4.1", 0).prefill);
    assert_false(ah_model_capabilities(AH_WIRE_RESPONSES, "gpt-5", 0).prefill);
    assert_false(ah_model_capabilities(AH_WIRE_OPENAI, "claude-sonnet-4-5", 0).prefill);
    assert_true(ah_model_capabilities(AH_WIRE_ANTHROPIC, NULL, 0).prefill);
}

static void refusal_detection(void **state)
{
    (void)state;
    ah_error e;
    ah_error_set(&e, AH_EK_HTTP, 400,
                 "HTTP 400 invalid_request_error: This model does not support assistant "
                 "message prefill. The conversation must end with a user message.");
    assert_true(ah_error_is_prefill_refusal(&e));
    ah_error_set(&e, AH_EK_HTTP, 400, "HTTP 400: the conversation must end with a user message");
    assert_true(ah_error_is_prefill_refusal(&e));
    ah_error_set(&e, AH_EK_HTTP, 400,
                 "HTTP 400 invalid_request_error: messages: final assistant content cannot "
                 "end with trailing whitespace");
    assert_false(ah_error_is_prefill_refusal(&e));
    ah_error_set(&e, AH_EK_HTTP, 529, "does not support assistant message prefill");
    assert_false(ah_error_is_prefill_refusal(&e));
    assert_false(ah_error_is_prefill_refusal(NULL));
}

static void setting_names(void **state)
{
    (void)state;
    assert_string_equal(ah_continuation_name(AH_CONTINUATION_AUTO), "auto");
    assert_string_equal(ah_continuation_name(AH_CONTINUATION_PREFILL), "prefill");
    assert_string_equal(ah_continuation_name(AH_CONTINUATION_PROMPT), "prompt");
    assert_string_equal(ah_continuation_name(AH_CONTINUATION_COUNT_), "unknown");
    assert_int_equal(ah_continuation_from_name("prompt"), AH_CONTINUATION_PROMPT);
    assert_int_equal(ah_continuation_from_name("resume"), -1);
    assert_int_equal(ah_continuation_from_name(NULL), -1);
    assert_string_equal(ah_cont_mode_name(AH_CONT_RESUME), "resume");
    assert_string_equal(ah_cont_mode_name(AH_CONT_PREFILL), "prefill");
    assert_string_equal(ah_cont_mode_name(AH_CONT_PROMPT), "prompt");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(claude_versions_from_every_id_shape),
        cmocka_unit_test(the_table_picks_prefill_only_where_it_works),
        cmocka_unit_test(refusal_detection),
        cmocka_unit_test(setting_names),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
