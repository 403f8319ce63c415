/* test_decode_tree.c - the non-delta events decoded from a filtered tree without cJSON
 * (core/decode_tree.c):
 *   - it takes the hot non-delta shapes of every format (Anthropic message_start,
 *     content_block_start/stop, ping, message_delta, message_stop; Chat role, finish and
 *     usage chunks; the Responses lifecycle events, the big `response` objects included)
 *     and the recorded provider streams' non-delta events;
 *   - it gives back to cJSON what it cannot prove cJSON reads the same (a kept float, a
 *     surrogate pair outside a skipped string, exotic whitespace, a BOM, deep nesting, an "error" event, a root
 *     without "type"), and what cJSON rejects (trailing commas, bad escapes, bad numbers,
 *     unterminated input) so that cJSON's own message is reported;
 *   - everything it takes decodes exactly as cJSON alone does (tests/fuzz/decode_same.h:
 *     statuses, errors, hook calls, timelines; at many split points), and so does the
 *     decoder without it (ah__fast_parse then gets Responses' closing events).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#define SAME_FAIL(what) fail_msg("tree and cJSON paths differ: %s", what)
#include "fuzz/decode_same.h"

#include "unit/recorded_streams.h"

/* The stream prefix + "data: " + ev + "\n\n", compared three ways at every 5th split;
 * returns how many of ev's events the tree took (0 or 1). */
static int taken(ah_wire wire, const char *prefix, const char *ev)
{
    size_t pn = strlen(prefix), en = strlen(ev);
    char *s = malloc(pn + en + 9);
    assert_non_null(s);
    memcpy(s, prefix, pn);
    memcpy(s + pn, "data: ", 6);
    memcpy(s + pn + 6, ev, en);
    memcpy(s + pn + 6 + en, "\n\n", 3);
    size_t n = pn + en + 8;
    uint64_t before = same_check_reattach(wire, (const uint8_t *)prefix, pn, pn, 0);
    uint64_t all = 0;
    for (size_t cut = 0; cut <= n; cut += n > 4000 ? n / 40 : 5)
        all = same_check_reattach(wire, (const uint8_t *)s, n, cut, 0);
    all = same_check_reattach(wire, (const uint8_t *)s, n, n, 0);
    free(s);
    assert_true(all >= before);
    return (int)(all - before);
}

#define A_START                                                                          \
    "data: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":"   \
    "\"text\",\"text\":\"\"}}\n\n"

static void anthropic_shapes(void **state)
{
    (void)state;
    const ah_wire w = AH_WIRE_ANTHROPIC;
    /* taken: the API's events, padded as it pads them */
    assert_int_equal(taken(w, "", "{\"type\":\"message_start\",\"message\":{\"id\":\"msg_1"
                                  "\",\"type\":\"message\",\"role\":\"assistant\",\"model\":"
                                  "\"claude\",\"content\":[],\"stop_reason\":null,"
                                  "\"stop_sequence\":null,\"usage\":{\"input_tokens\":25,"
                                  "\"cache_creation_input_tokens\":0,"
                                  "\"cache_read_input_tokens\":7,\"output_tokens\":1}}}"),
                     1);
    assert_int_equal(taken(w, "", "{\"type\": \"content_block_start\", \"index\": 0, "
                                  "\"content_block\": {\"type\": \"text\", \"text\": \"\"}}"),
                     1);
    assert_int_equal(taken(w, "", "{\"type\":\"ping\"}"), 1);
    assert_int_equal(taken(w, A_START, "{\"type\":\"content_block_stop\",\"index\":0}"), 1);
    assert_int_equal(taken(w, A_START, "{\"type\":\"message_delta\",\"delta\":{"
                                       "\"stop_reason\":\"end_turn\",\"stop_sequence\":null},"
                                       "\"usage\":{\"output_tokens\":15}}"),
                     1);
    assert_int_equal(taken(w, A_START, "{\"type\":\"message_stop\"}"), 1);
    /* tool blocks, opaque blocks (kept whole as JSON), unknown events */
    assert_int_equal(taken(w, "", "{\"type\":\"content_block_start\",\"index\":0,"
                                  "\"content_block\":{\"type\":\"tool_use\",\"id\":\"t1\","
                                  "\"name\":\"get\",\"input\":{\"a\":[1,true,false,null,"
                                  "-3,\"\\u00e9\\n\"]}}}"),
                     1);
    assert_int_equal(taken(w, "", "{\"type\":\"content_block_start\",\"index\":2,"
                                  "\"content_block\":{\"type\":\"web_search_tool_result\","
                                  "\"tool_use_id\":\"s\",\"content\":[{\"type\":\"x\",\"n\":"
                                  "-0,\"big\":2147483648}]}}"),
                     1);
    assert_int_equal(taken(w, "", "{\"type\":\"future_event\",\"x\":{\"y\":[1.5e3,2E-2]}}"),
                     1);
    /* skipped members may hold what kept ones may not */
    assert_int_equal(taken(w, "", "{\"type\":\"message_start\",\"message\":{\"t\":0.7,"
                                  "\"s\":\"\\ud83d\\ude00\",\"usage\":{\"input_tokens\":1}}}"),
                     1); /* a surrogate pair in a skipped string */
    assert_int_equal(taken(w, "", "{\"type\":\"message_start\",\"message\":{\"a\":[\"x\\uDBFF"
                                  "\\uDFFFy\",{\"k\":\"\\ud800\\udc00\"}],\"usage\":{}}}"),
                     1);
    /* lone, misordered or cut surrogates (the decoder's text fix may have replaced them
     * before either parser sees them): whichever path takes them decodes as cJSON */
    static const char *const lone[] = {
        "{\"type\":\"message_start\",\"message\":{\"s\":\"\\ud83d\",\"usage\":{}}}",
        "{\"type\":\"message_start\",\"message\":{\"s\":\"\\ude00\",\"usage\":{}}}",
        "{\"type\":\"message_start\",\"message\":{\"s\":\"\\ude00\\ud83d\",\"usage\":{}}}",
        "{\"type\":\"message_start\",\"message\":{\"s\":\"\\ud83d\\u0041\",\"usage\":{}}}",
        "{\"type\":\"message_start\",\"message\":{\"s\":\"\\ud83d\\ud83d\",\"usage\":{}}}",
        "{\"type\":\"message_start\",\"message\":{\"s\":\"\\ud83d\\n\",\"usage\":{}}}",
        "{\"type\":\"message_start\",\"message\":{\"s\":\"\\ud83d\\ude0\",\"usage\":{}}}",
        "{\"type\":\"message_start\",\"message\":{\"s\":\"\\ud83d\\ude0g\",\"usage\":{}}}",
        "{\"type\":\"message_start\",\"message\":{\"s\":\"\\ud83d",
    };
    for (size_t i = 0; i < sizeof lone / sizeof lone[0]; i++)
        (void)taken(w, "", lone[i]);
    /* a pair in a kept string or in a key: cJSON decides */
    static const char *const kept[] = {
        "{\"type\":\"message_start\",\"message\":{\"s\\ud83d\\ude00\":1,\"usage\":{}}}",
        "{\"type\":\"message_start\",\"message\":{\"usage\":{\"service_tier\":"
        "\"\\ud83d\\ude00\"}}}",
        "{\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":"
        "\"text\",\"text\":\"\\ud83d\\ude00\"}}",
    };
    for (size_t i = 0; i < sizeof kept / sizeof kept[0]; i++)
        if (taken(w, "", kept[i]) != 0)
            fail_msg("taken: %s", kept[i]);
    assert_int_equal(taken(w, "", "{\"type\":\"message_start\",\"message\":{\"t\":0.7,"
                                  "\"x\":[[{}]],\"usage\":{\"input_tokens\":1}}}"),
                     1);
    /* duplicate keys: the first one counts, as in cJSON */
    assert_int_equal(taken(w, "", "{\"type\":\"message_start\",\"type\":\"ping\",\"message\":"
                                  "{\"usage\":{\"input_tokens\":1}},\"message\":{\"usage\":"
                                  "{\"input_tokens\":9}}}"),
                     1);
    /* keys with escapes or a NUL decoded before they are compared ("type\u0000x" is
     * "type" to cJSON) */
    assert_int_equal(taken(w, "", "{\"typ\\u0065\":\"message_stop\"}"), 1);
    assert_int_equal(taken(w, "", "{\"type\\u0000x\":\"message_stop\"}"), 1);
    /* a kept value with \u0000 ends there, as in cJSON */
    assert_int_equal(taken(w, "", "{\"type\":\"content_block_start\",\"index\":0,"
                                  "\"content_block\":{\"type\":\"tool_use\",\"id\":\"t\","
                                  "\"name\":\"rec\\u0000evil\",\"input\":{}}}"),
                     1);
    /* given back: kept floats, big kept numbers, the error event, no type, not ours */
    assert_int_equal(taken(w, "", "{\"type\":\"message_start\",\"message\":{\"usage\":{"
                                  "\"input_tokens\":1.0}}}"),
                     0);
    assert_int_equal(taken(w, "", "{\"type\":\"message_start\",\"message\":{\"usage\":{"
                                  "\"input_tokens\":1234567890123456}}}"),
                     0);
    assert_int_equal(taken(w, "", "{\"type\":\"error\",\"error\":{\"type\":\"overloaded_error"
                                  "\",\"message\":\"Overloaded\"}}"),
                     0);
    assert_int_equal(taken(w, "", "{\"message\":{}}"), 0);
    assert_int_equal(taken(w, "", "{\"type\":7}"), 0);
    assert_int_equal(taken(w, "", "[1]"), 0);
    assert_int_equal(taken(w, "", "\xEF\xBB\xBF{\"type\":\"ping\"}"), 0);
    assert_int_equal(taken(w, "", "{\"type\":\f\"ping\"}"), 0);
    /* trailing bytes after the root are ignored, as cJSON ignores them */
    assert_int_equal(taken(w, "", "{\"type\":\"ping\"} trailing }}"), 1);
    /* what cJSON rejects: its message, from cJSON */
    static const char *const bad[] = {
        "{\"type\":\"ping\",}",
        "{\"type\":\"ping\"",
        "{\"type\":\"ping\",\"x\":01.}",
        "{\"type\":\"ping\",\"x\":-}",
        "{\"type\":\"ping\",\"x\":1e}",
        "{\"type\":\"ping\",\"x\":\"\\x\"}",
        "{\"type\":\"ping\",\"x\":\"\\u12\"}",
        "{\"type\":\"ping\",\"x\":nul}",
        "{\"type\":\"ping\",\"x\":[1,]}",
        "{\"type\":\"ping\" \"x\":1}",
        "{\"type\":\"ping\",\"x\":1-2}",
        "{\"type\":\"ping\",\"x\":truex}",
        "{\"type\":\"ping\",\"x\":\"\\",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        assert_int_equal(taken(w, "", bad[i]), 0);
    /* raw control bytes inside strings are taken as they are (cJSON does) */
    assert_int_equal(taken(w, "", "{\"type\":\"ping\",\"x\":\"a\x01\tb\"}"), 1);
    /* deep nesting: given back */
    char deep[400];
    size_t k = 0;
    k += (size_t)snprintf(deep, sizeof deep, "{\"type\":\"ping\",\"x\":");
    for (int i = 0; i < 70; i++)
        deep[k++] = '[';
    for (int i = 0; i < 70; i++)
        deep[k++] = ']';
    deep[k++] = '}';
    deep[k] = '\0';
    assert_int_equal(taken(w, "", deep), 0);
}

#define C_HEAD                                                                           \
    "{\"id\":\"chatcmpl-1\",\"object\":\"chat.completion.chunk\",\"created\":1782955818," \
    "\"model\":\"gpt-4o-mini\",\"service_tier\":\"default\",\"system_fingerprint\":"   \
    "\"fp_1\",\"choices\":"

static void chat_shapes(void **state)
{
    (void)state;
    const ah_wire w = AH_WIRE_OPENAI;
    const char *text = "data: " C_HEAD "[{\"index\":0,\"delta\":{\"content\":\"hi\"},"
                       "\"logprobs\":null,\"finish_reason\":null}]}\n\n";
    /* the role chunk, the finish chunk, the usage chunk */
    assert_int_equal(taken(w, "", C_HEAD "[{\"index\":0,\"delta\":{\"role\":\"assistant\","
                                  "\"content\":\"\",\"refusal\":null},\"logprobs\":null,"
                                  "\"finish_reason\":null}],\"usage\":null,"
                                  "\"obfuscation\":\"ab\"}"),
                     1);
    assert_int_equal(taken(w, text, C_HEAD "[{\"index\":0,\"delta\":{},\"logprobs\":null,"
                                    "\"finish_reason\":\"stop\"}],\"usage\":null}"),
                     1);
    assert_int_equal(taken(w, text, C_HEAD "[],\"usage\":{\"prompt_tokens\":9,"
                                    "\"completion_tokens\":2,\"total_tokens\":11,"
                                    "\"prompt_tokens_details\":{\"cached_tokens\":0,"
                                    "\"audio_tokens\":0},\"completion_tokens_details\":{"
                                    "\"reasoning_tokens\":0}}}"),
                     1);
    /* tool calls (arguments as a string and as an object), x_groq usage, choice 1 */
    assert_int_equal(taken(w, "", C_HEAD "[{\"index\":0,\"delta\":{\"tool_calls\":[{"
                                  "\"index\":0,\"id\":\"c1\",\"type\":\"function\","
                                  "\"function\":{\"name\":\"f\",\"arguments\":{\"a\":1}}}]},"
                                  "\"finish_reason\":null}]}"),
                     1);
    assert_int_equal(taken(w, text, C_HEAD "[],\"x_groq\":{\"id\":\"g\",\"usage\":{"
                                    "\"prompt_tokens\":3,\"completion_tokens\":4}}}"),
                     1);
    assert_int_equal(taken(w, text, C_HEAD "[{\"index\":1,\"delta\":{\"content\":\"x\"}}]}"),
                     1);
    /* choices that are not objects or not an array: the same errors */
    assert_int_equal(taken(w, "", C_HEAD "[7]}"), 1);
    assert_int_equal(taken(w, "", C_HEAD "{\"a\":1}}"), 1);
    assert_int_equal(taken(w, "", C_HEAD "null}"), 1);
    /* a gateway's error chunk (its object printed whole) */
    assert_int_equal(taken(w, text, "{\"error\":{\"message\":\"upstream\",\"code\":502},"
                                    "\"choices\":[]}"),
                     1);
    /* x_groq or a choice of another type: kept whole */
    assert_int_equal(taken(w, text, C_HEAD "[],\"x_groq\":[{\"usage\":{\"prompt_tokens\":3}}]}"),
                     1);
    assert_int_equal(taken(w, text, C_HEAD "[[{\"index\":0,\"delta\":{\"content\":\"x\"}}],"
                                    "\"s\"]}"),
                     1);
    /* given back */
    assert_int_equal(taken(w, text, C_HEAD "[{\"index\":0,\"delta\":{},\"logprobs\":{"
                                    "\"p\":-0.25},\"finish_reason\":\"stop\"}]}"),
                     1); /* a float in a member nobody reads: skipped */
    assert_int_equal(taken(w, text, C_HEAD "[{\"index\":0.0,\"delta\":{},"
                                    "\"finish_reason\":\"stop\"}]}"),
                     0);
}

#define R(json) "data: " json "\n\n"
#define R_RESPONSE                                                                       \
    "{\"id\":\"resp_1\",\"object\":\"response\",\"created_at\":1741290958,\"status\":"   \
    "\"in_progress\",\"background\":false,\"error\":null,\"incomplete_details\":null,"    \
    "\"instructions\":\"You are a helpful assistant.\",\"max_output_tokens\":null,"      \
    "\"model\":\"gpt-4.1\",\"output\":[],\"parallel_tool_calls\":true,"                 \
    "\"previous_response_id\":null,\"reasoning\":{\"effort\":null,\"summary\":null},"    \
    "\"store\":true,\"temperature\":1.0,\"text\":{\"format\":{\"type\":\"text\"}},"      \
    "\"tool_choice\":\"auto\",\"tools\":[],\"top_p\":1.0,\"truncation\":\"disabled\","   \
    "\"usage\":null,\"user\":null,\"metadata\":{}}"
#define R_ADDED                                                                          \
    R("{\"type\":\"response.output_item.added\",\"output_index\":0,\"item\":{\"id\":"    \
      "\"msg_1\",\"type\":\"message\",\"status\":\"in_progress\",\"content\":[],"        \
      "\"role\":\"assistant\"},\"sequence_number\":2}")
#define R_DELTA1                                                                         \
    R("{\"type\":\"response.output_text.delta\",\"content_index\":0,\"delta\":\"Hi\","   \
      "\"item_id\":\"msg_1\",\"logprobs\":[],\"output_index\":0,\"sequence_number\":4}")

static void responses_shapes(void **state)
{
    (void)state;
    const ah_wire w = AH_WIRE_RESPONSES;
    assert_int_equal(taken(w, "", "{\"type\":\"response.created\",\"sequence_number\":0,"
                                  "\"response\":" R_RESPONSE "}"),
                     1);
    assert_int_equal(taken(w, "", "{\"type\":\"response.in_progress\",\"sequence_number\":1,"
                                  "\"response\":" R_RESPONSE "}"),
                     1);
    assert_int_equal(taken(w, "", "{\"type\":\"response.output_item.added\",\"output_index\":0,"
                                  "\"item\":{\"id\":\"msg_1\",\"type\":\"message\","
                                  "\"status\":\"in_progress\",\"content\":[],\"role\":"
                                  "\"assistant\"},\"sequence_number\":2}"),
                     1);
    assert_int_equal(taken(w, R_ADDED, "{\"type\":\"response.content_part.added\","
                                       "\"content_index\":0,\"item_id\":\"msg_1\","
                                       "\"output_index\":0,\"part\":{\"type\":\"output_text\","
                                       "\"annotations\":[],\"logprobs\":[],\"text\":\"\"},"
                                       "\"sequence_number\":3}"),
                     1);
    const char *pre = R_ADDED R_DELTA1;
    assert_int_equal(taken(w, pre, "{\"type\":\"response.output_text.done\",\"content_index\":0,"
                                   "\"item_id\":\"msg_1\",\"logprobs\":[],\"output_index\":0,"
                                   "\"sequence_number\":5,\"text\":\"Hi\"}"),
                     1);
    assert_int_equal(taken(w, pre, "{\"type\":\"response.content_part.done\",\"content_index\":0,"
                                   "\"item_id\":\"msg_1\",\"output_index\":0,\"part\":{\"type\":"
                                   "\"output_text\",\"annotations\":[],\"logprobs\":[],"
                                   "\"text\":\"Hi\"},\"sequence_number\":6}"),
                     1);
    assert_int_equal(taken(w, pre, "{\"type\":\"response.output_item.done\",\"output_index\":0,"
                                   "\"item\":{\"id\":\"msg_1\",\"type\":\"message\",\"status\":"
                                   "\"completed\",\"content\":[{\"type\":\"output_text\","
                                   "\"annotations\":[],\"logprobs\":[],\"text\":\"Hi\"}],"
                                   "\"role\":\"assistant\"},\"sequence_number\":7}"),
                     1);
    /* the completed response: usage, cached tokens, reasoning items' metadata */
    assert_int_equal(
        taken(w, pre,
              "{\"type\":\"response.completed\",\"sequence_number\":8,\"response\":{\"id\":"
              "\"resp_1\",\"status\":\"completed\",\"temperature\":1.0,\"output\":[{\"id\":"
              "\"rs_1\",\"type\":\"reasoning\",\"encrypted_content\":\"enc\",\"summary\":[]},"
              "{\"id\":\"msg_1\",\"type\":\"message\",\"content\":[{\"type\":\"output_text\","
              "\"text\":\"Hi\",\"logprobs\":[{\"p\":-0.5}]}]},7,\"x\"],\"usage\":{"
              "\"input_tokens\":36,\"input_tokens_details\":{\"cached_tokens\":4},"
              "\"output_tokens\":87,\"total_tokens\":123}}}"),
        1);
    assert_int_equal(taken(w, pre, "{\"type\":\"response.incomplete\",\"response\":{\"status\":"
                                   "\"incomplete\",\"incomplete_details\":{\"reason\":"
                                   "\"max_output_tokens\"},\"output\":[]}}"),
                     1);
    assert_int_equal(taken(w, pre, "{\"type\":\"response.failed\",\"response\":{\"status\":"
                                   "\"failed\",\"error\":{\"code\":\"server_error\",\"message\":"
                                   "\"boom\"},\"output\":[]}}"),
                     1);
    /* function calls, reasoning, opaque items kept whole */
    assert_int_equal(taken(w, "", "{\"type\":\"response.output_item.added\",\"output_index\":0,"
                                  "\"item\":{\"type\":\"function_call\",\"id\":\"fc_1\","
                                  "\"call_id\":\"call_1\",\"name\":\"f\",\"arguments\":\"\"}}"),
                     1);
    assert_int_equal(taken(w, "", "{\"type\":\"response.output_item.done\",\"output_index\":0,"
                                  "\"item\":{\"type\":\"web_search_call\",\"id\":\"ws\","
                                  "\"action\":{\"query\":\"q\",\"n\":[1,2]}}}"),
                     1);
    /* a filtered member of another type than its filter expects is kept whole, so the
     * handler sees the type cJSON would give it */
    assert_int_equal(taken(w, pre, "{\"type\":\"response.completed\",\"response\":{\"status\":"
                                   "\"completed\",\"output\":{\"type\":\"reasoning\"}}}"),
                     1);
    assert_int_equal(taken(w, pre, "{\"type\":\"response.completed\",\"response\":{\"status\":"
                                   "\"completed\",\"output\":[[{\"type\":\"reasoning\"}],"
                                   "null,{\"type\":\"message\",\"content\":[]}]}}"),
                     1);
    assert_int_equal(taken(w, "", "{\"type\":\"response.completed\",\"response\":[1,2]}"), 1);
    assert_int_equal(taken(w, R_ADDED, "{\"type\":\"response.content_part.added\","
                                       "\"output_index\":0,\"part\":\"output_text\"}"),
                     1);
    assert_int_equal(taken(w, R_ADDED, "{\"type\":\"response.content_part.added\","
                                       "\"output_index\":0,\"p\\u0061rt\":{\"type\":"
                                       "\"output_text\",\"text\":\"\"}}"),
                     1); /* an escaped key is decoded, then filtered */
    /* given back: the error event, a kept float */
    assert_int_equal(taken(w, pre, "{\"type\":\"error\",\"code\":\"x\",\"message\":\"m\"}"), 0);
    assert_int_equal(taken(w, pre, "{\"type\":\"response.completed\",\"response\":{\"status\":"
                                   "\"completed\",\"usage\":{\"input_tokens\":1.5}}}"),
                     0);
}

/* Every recorded stream decodes the same with and without the tree, and the tree takes
 * non-delta events in each. */
static void tree_stream(ah_wire wire, const char *file, const char *sse, size_t len,
                        void *ud)
{
    (void)ud;
    uint64_t tree = same_check_reattach(wire, (const uint8_t *)sse, len, len, 0);
    if (tree == 0)
        fail_msg("%s: no event decoded from the tree", file);
    for (size_t cut = 0; cut <= len; cut += 61)
        same_check_reattach(wire, (const uint8_t *)sse, len, cut, wire == AH_WIRE_RESPONSES);
}

static void real_streams(void **state)
{
    (void)state;
    assert_int_equal(each_recorded_stream(tree_stream, NULL), 28);
}

/* An event larger than the arena's first block, then small ones: the arena grows, gives
 * the extra memory back, and the next events decode from it again. */
static void big_events(void **state)
{
    (void)state;
    size_t big = 200u << 10;
    char *ev = malloc(big + 256);
    assert_non_null(ev);
    int n = snprintf(ev, 256, "{\"type\":\"content_block_start\",\"index\":0,"
                              "\"content_block\":{\"type\":\"text\",\"text\":\"");
    memset(ev + n, 'a', big);
    snprintf(ev + n + big, 256, "\"}}");
    assert_int_equal(taken(AH_WIRE_ANTHROPIC, "", ev), 1);
    free(ev);
    char *s = malloc(big + 1024);
    assert_non_null(s);
    n = snprintf(s, 1024, "data: {\"type\":\"content_block_start\",\"index\":0,"
                          "\"content_block\":{\"type\":\"text\",\"text\":\"");
    memset(s + n, 'b', big);
    n += (int)big;
    n += snprintf(s + n, 1024, "\"}}\n\ndata: {\"type\":\"content_block_stop\","
                               "\"index\":0}\n\ndata: {\"type\":\"message_stop\"}\n\n");
    assert_int_equal(same_check_reattach(AH_WIRE_ANTHROPIC, (const uint8_t *)s, (size_t)n,
                                         (size_t)n, 0),
                     3);
    free(s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(anthropic_shapes),
        cmocka_unit_test(chat_shapes),
        cmocka_unit_test(responses_shapes),
        cmocka_unit_test(real_streams),
        cmocka_unit_test(big_events),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
