/* test_mock_model.c - the mock's deterministic model and its per-format writers, without
 * sockets: reply rules, delta splitting, tool arguments from schemas, continuation,
 * request validation, and the SSE bytes each writer produces. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mock/mock_internal.h"

static const ah__mock_text_opts no_opts = {0};

/* Run the model on a JSON request; the reply must succeed. */
static void reply_for(ah_wire wire, const char *json, const ah__mock_text_opts *o,
                      ah__mock_reply *r)
{
    cJSON *req = cJSON_Parse(json);
    assert_non_null(req);
    char err[256] = "";
    ah_status st = ah__mock_model_reply(wire, req, strlen(json), o ? o : &no_opts, r, err,
                                        sizeof err);
    if (st != AH_OK)
        fprintf(stderr, "model error: %s\n", err);
    assert_int_equal(st, AH_OK);
    cJSON_Delete(req);
}

static void reply_fails(ah_wire wire, const char *json, const char *want)
{
    cJSON *req = cJSON_Parse(json);
    assert_non_null(req);
    ah__mock_reply r;
    char err[512] = "";
    assert_int_equal(
        ah__mock_model_reply(wire, req, strlen(json), &no_opts, &r, err, sizeof err),
        AH_ERR_INVALID);
    assert_string_equal(err, want);
    assert_null(r.text);
    cJSON_Delete(req);
}

/* The deltas, joined, must be the text; none may be empty. */
static void check_deltas(const ah__mock_reply *r)
{
    assert_int_equal(r->cuts[0], 0);
    assert_int_equal(r->cuts[r->ndeltas], r->text_len);
    for (size_t i = 0; i < r->ndeltas; i++)
        assert_true(r->cuts[i] < r->cuts[i + 1]);
}

#define A_USER(text)                                                                     \
    "{\"model\":\"claude-test\",\"max_tokens\":64,\"messages\":[{\"role\":\"user\","     \
    "\"content\":\"" text "\"}]}"

static void user_text_gets_digest(void **state)
{
    (void)state;
    ah__mock_reply r;
    reply_for(AH_WIRE_ANTHROPIC, A_USER("  Hello\\n\\n  there,   friend  "), NULL, &r);
    assert_string_equal(r.text,
                        "You said: \"Hello there, friend\". This is a deterministic "
                        "reply from the agenthost mock provider.");
    assert_string_equal(r.model, "claude-test");
    assert_false(r.has_tool);
    assert_false(r.continuation);
    check_deltas(&r);
    /* One delta per word, the space leading: "You", " said:", ... */
    assert_int_equal(r.ndeltas, 15);
    assert_memory_equal(r.text + r.cuts[1], " said:", 6);
    assert_int_equal(r.output_tokens, 15);
    assert_true(r.input_tokens > 0);
    ah__mock_reply_free(&r);

    /* The digest stops after 60 characters (code points, not bytes). */
    reply_for(
        AH_WIRE_ANTHROPIC,
        A_USER("\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9"
               "\xc3\xa9 0123456789012345678901234567890123456789012345678901234567"
               "89"),
        NULL, &r);
    const char *q = strchr(r.text, '"') + 1;
    const char *end = strchr(q, '"');
    size_t chars = 0;
    for (const char *c = q; c < end; c++)
        chars += ((unsigned char)*c & 0xC0) != 0x80;
    assert_int_equal(chars, 60);
    assert_memory_equal(q, "\xc3\xa9\xc3\xa9", 4);
    ah__mock_reply_free(&r);
}

static void same_request_same_reply(void **state)
{
    (void)state;
    ah__mock_reply a, b, c;
    reply_for(AH_WIRE_OPENAI,
              "{\"model\":\"g\",\"messages\":[{\"role\":\"user\",\"content\":\"x\"}]}",
              NULL, &a);
    reply_for(AH_WIRE_OPENAI,
              "{\"model\":\"g\",\"messages\":[{\"role\":\"user\",\"content\":\"x\"}]}",
              NULL, &b);
    reply_for(AH_WIRE_OPENAI,
              "{\"model\":\"g\",\"messages\":[{\"role\":\"user\",\"content\":\"y\"}]}",
              NULL, &c);
    assert_string_equal(a.text, b.text);
    assert_string_equal(a.msg_id, b.msg_id);
    assert_int_equal(a.input_tokens, b.input_tokens);
    assert_string_not_equal(a.msg_id, c.msg_id);
    assert_string_not_equal(a.text, c.text);
    assert_memory_equal(a.msg_id, "chatcmpl-", 9);
    ah__mock_reply_free(&a);
    ah__mock_reply_free(&b);
    ah__mock_reply_free(&c);
}

static void delta_options(void **state)
{
    (void)state;
    ah__mock_reply r;
    ah__mock_text_opts o = {.text = "ab\xe2\x82\xac"
                                    "cd",
                            .delta_bytes = 3};
    reply_for(AH_WIRE_ANTHROPIC, A_USER("x"), &o, &r);
    /* "ab€cd": 3-byte pieces never split the euro sign. */
    assert_string_equal(r.text, "ab\xe2\x82\xac"
                                "cd");
    check_deltas(&r);
    assert_int_equal(r.ndeltas, 3);
    assert_int_equal(r.cuts[1], 2);
    assert_int_equal(r.cuts[2], 5);
    ah__mock_reply_free(&r);

    /* text_deltas pads a short text with filler words to exactly N deltas. */
    ah__mock_text_opts pad = {.text = "one two", .text_deltas = 6};
    reply_for(AH_WIRE_ANTHROPIC, A_USER("x"), &pad, &r);
    check_deltas(&r);
    assert_int_equal(r.ndeltas, 6);
    assert_memory_equal(r.text, "one two ", 8);
    ah__mock_reply_free(&r);

    /* ... and groups the words of a long one into exactly N deltas. */
    ah__mock_text_opts group = {.text = "a b c d e f g", .text_deltas = 3};
    reply_for(AH_WIRE_ANTHROPIC, A_USER("x"), &group, &r);
    check_deltas(&r);
    assert_int_equal(r.ndeltas, 3);
    assert_string_equal(r.text, "a b c d e f g");
    ah__mock_reply_free(&r);

    /* A large N is cheap: the benchmark asks for ~200k deltas. */
    ah__mock_text_opts big = {.text_deltas = 200000};
    reply_for(AH_WIRE_OPENAI,
              "{\"model\":\"g\",\"messages\":[{\"role\":\"user\",\"content\":\"x\"}]}",
              &big, &r);
    assert_int_equal(r.ndeltas, 200000);
    check_deltas(&r);
    ah__mock_reply_free(&r);
}

static const char *const weather_tools =
    "\"tools\":[{\"name\":\"web\",\"type\":\"web_search_20250305\"},"
    "{\"name\":\"get_weather\",\"description\":\"d\",\"input_schema\":{\"type\":"
    "\"object\","
    "\"properties\":{\"city\":{\"type\":\"string\"},\"days\":{\"type\":\"integer\"},"
    "\"scale\":{\"type\":\"number\"},\"metric\":{\"type\":\"boolean\"},"
    "\"unit\":{\"enum\":[\"c\",\"f\"]},\"tags\":{\"type\":\"array\",\"minItems\":1,"
    "\"items\":{\"type\":\"string\"}},\"none\":{\"type\":\"array\"},"
    "\"opt\":{\"type\":[\"null\",\"integer\"]},\"alt\":{\"anyOf\":[{\"type\":\"boolean\"}"
    "]},"
    "\"where\":{\"type\":\"object\",\"properties\":{\"lat\":{\"type\":\"number\"},"
    "\"name\":{\"type\":\"string\"}},\"required\":[\"lat\"]},"
    "\"ignored\":{\"type\":\"string\"}},"
    "\"required\":[\"city\",\"days\",\"scale\",\"metric\",\"unit\",\"tags\",\"none\","
    "\"opt\","
    "\"alt\",\"where\"]}}]";

static void tool_call_from_schema(void **state)
{
    (void)state;
    char json[2048];
    snprintf(
        json, sizeof json,
        "{\"model\":\"m\",\"max_tokens\":9,\"messages\":[{\"role\":\"user\",\"content\":"
        "\"weather?\"}],%s}",
        weather_tools);
    ah__mock_reply r;
    reply_for(AH_WIRE_ANTHROPIC, json, NULL, &r);
    assert_true(r.has_tool);
    assert_string_equal(r.calls[0].name, "get_weather"); /* the server tool is skipped */
    assert_string_equal(r.text, "I will call get_weather now.");
    assert_memory_equal(r.tool_id, "toolu_", 6);
    assert_string_equal(
        r.calls[0].args, "{\"city\":\"mock_city\",\"days\":42,\"scale\":4.2,\"metric\":true,"
                     "\"unit\":\"c\",\"tags\":[\"mock_tags\"],\"none\":[],\"opt\":42,"
                     "\"alt\":true,\"where\":{\"lat\":4.2}}");
    /* Argument fragments cover the JSON exactly. */
    assert_int_equal(r.calls[0].arg_cuts[0], 0);
    assert_int_equal(r.calls[0].arg_cuts[r.calls[0].nargs], r.calls[0].args_len);
    assert_true(r.calls[0].nargs > 5);
    ah__mock_reply_free(&r);

    /* A schema without required properties gives {}. */
    reply_for(AH_WIRE_OPENAI,
              "{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"go\"}],"
              "\"tools\":[{\"type\":\"function\",\"function\":{\"name\":\"ping\","
              "\"parameters\":{\"type\":\"object\",\"properties\":{}}}}]}",
              NULL, &r);
    assert_true(r.has_tool);
    assert_string_equal(r.calls[0].args, "{}");
    assert_int_equal(r.calls[0].nargs, 1);
    ah__mock_reply_free(&r);

    /* tool_choice none: no call. */
    reply_for(
        AH_WIRE_RESPONSES,
        "{\"model\":\"m\",\"input\":\"go\",\"tool_choice\":\"none\",\"tools\":[{\"type\":"
        "\"function\",\"name\":\"ping\",\"parameters\":{}}]}",
        NULL, &r);
    assert_false(r.has_tool);
    ah__mock_reply_free(&r);
}

static void tool_results_are_quoted(void **state)
{
    (void)state;
    ah__mock_reply r;
    /* Anthropic: tool_result blocks, string and block content. */
    reply_for(
        AH_WIRE_ANTHROPIC,
        "{\"model\":\"m\",\"max_tokens\":9,\"tools\":[{\"name\":\"t\",\"input_schema\":"
        "{\"type\":\"object\"}}],\"messages\":[{\"role\":\"user\",\"content\":\"q\"},"
        "{\"role\":\"assistant\",\"content\":[{\"type\":\"tool_use\",\"id\":\"a\","
        "\"name\":\"t\",\"input\":{}},{\"type\":\"tool_use\",\"id\":\"b\",\"name\":"
        "\"t\",\"input\":{}}]},{\"role\":\"user\",\"content\":[{\"type\":"
        "\"tool_result\",\"tool_use_id\":\"a\",\"content\":\"21 degrees\"},{\"type\":"
        "\"tool_result\",\"tool_use_id\":\"b\",\"content\":[{\"type\":\"text\",\"text\":"
        "\"sunny\"}]}]}]}",
        NULL, &r);
    assert_false(r.has_tool);
    assert_string_equal(r.text, "The tool returned: 21 degrees | sunny");
    ah__mock_reply_free(&r);

    /* Chat: consecutive role:tool messages. */
    reply_for(
        AH_WIRE_OPENAI,
        "{\"model\":\"m\",\"tools\":[{\"type\":\"function\",\"function\":{\"name\":\"t\"}"
        "}],"
        "\"messages\":[{\"role\":\"system\",\"content\":\"s\"},{\"role\":\"user\","
        "\"content\":\"q\"},{\"role\":\"assistant\",\"content\":null,\"tool_calls\":["
        "{\"id\":\"1\",\"type\":\"function\",\"function\":{\"name\":\"t\",\"arguments\":"
        "\"{}\"}},{\"id\":\"2\",\"type\":\"function\",\"function\":{\"name\":\"t\","
        "\"arguments\":\"{}\"}}]},"
        "{\"role\":\"tool\",\"tool_call_id\":\"1\",\"content\":\"r1\"},{\"role\":"
        "\"tool\","
        "\"tool_call_id\":\"2\",\"content\":\"r2\"}]}",
        NULL, &r);
    assert_false(r.has_tool);
    assert_string_equal(r.text, "The tool returned: r1 | r2");
    ah__mock_reply_free(&r);

    /* Responses: function_call_output items. */
    reply_for(
        AH_WIRE_RESPONSES,
        "{\"model\":\"m\",\"tools\":[{\"type\":\"function\",\"name\":\"t\"}],\"input\":["
        "{\"role\":\"user\",\"content\":\"q\"},{\"type\":\"function_call\",\"call_id\":"
        "\"c\",\"name\":\"t\",\"arguments\":\"{}\"},{\"type\":\"function_call_output\","
        "\"call_id\":\"c\",\"output\":\"42\"}]}",
        NULL, &r);
    assert_string_equal(r.text, "The tool returned: 42");
    ah__mock_reply_free(&r);

    /* After a tool result, a new user message gets text, not another call. */
    reply_for(
        AH_WIRE_RESPONSES,
        "{\"model\":\"m\",\"tools\":[{\"type\":\"function\",\"name\":\"t\"}],\"input\":["
        "{\"type\":\"function_call\",\"call_id\":\"c\",\"name\":\"t\",\"arguments\":"
        "\"{}\"},{\"type\":\"function_call_output\",\"call_id\":\"c\",\"output\":\"42\"},"
        "{\"type\":\"message\",\"role\":\"user\",\"content\":[{\"type\":\"input_text\","
        "\"text\":\"thanks\"}]}]}",
        NULL, &r);
    assert_false(r.has_tool);
    assert_string_equal(r.text,
                        "You said: \"thanks\". This is a deterministic reply from "
                        "the agenthost mock provider.");
    ah__mock_reply_free(&r);
}

/* Like the real APIs, a tool call must be answered by the next message and a tool result
 * must answer a call: the 400 every provider gives a conversation whose run was stopped
 * in a tool round (the message texts are the providers' own, docs/mock.md). */
static void unanswered_tool_calls_are_refused_like_the_real_apis(void **state)
{
    (void)state;
    /* clang-format off */
#define A_TOOLS "{\"model\":\"m\",\"max_tokens\":9,\"messages\":[" \
                "{\"role\":\"user\",\"content\":\"q\"},"
#define A_CALL_A "{\"type\":\"tool_use\",\"id\":\"a\",\"name\":\"t\",\"input\":{}}"
#define A_CALL_B "{\"type\":\"tool_use\",\"id\":\"b\",\"name\":\"t\",\"input\":{}}"
#define A_CALL_C "{\"type\":\"tool_use\",\"id\":\"c\",\"name\":\"t\",\"input\":{}}"
#define A_RESULT_A "{\"type\":\"tool_result\",\"tool_use_id\":\"a\",\"content\":\"r\"}"
#define A_RESULT_B "{\"type\":\"tool_result\",\"tool_use_id\":\"b\",\"content\":\"r\"}"
#define A_RESULT_X "{\"type\":\"tool_result\",\"tool_use_id\":\"x\",\"content\":\"r\"}"
    reply_fails(AH_WIRE_ANTHROPIC,
                A_TOOLS "{\"role\":\"assistant\",\"content\":[" A_CALL_A "]},"
                "{\"role\":\"user\",\"content\":\"again\"}]}",
                "messages.1: `tool_use` ids were found without `tool_result` blocks "
                "immediately after: a. Each `tool_use` block must have a corresponding "
                "`tool_result` block in the next message.");
    reply_fails(AH_WIRE_ANTHROPIC,
                A_TOOLS "{\"role\":\"assistant\",\"content\":[" A_CALL_A "," A_CALL_B ","
                A_CALL_C "]},{\"role\":\"user\",\"content\":[" A_RESULT_B "]}]}",
                "messages.1: `tool_use` ids were found without `tool_result` blocks "
                "immediately after: a, c. Each `tool_use` block must have a corresponding "
                "`tool_result` block in the next message.");
    reply_fails(AH_WIRE_ANTHROPIC,
                A_TOOLS "{\"role\":\"assistant\",\"content\":[" A_CALL_A "]},"
                "{\"role\":\"user\",\"content\":[" A_RESULT_A "," A_RESULT_X "]}]}",
                "messages.2.content.1: unexpected `tool_use_id` found in `tool_result` "
                "blocks: x. Each `tool_result` block must have a corresponding `tool_use` "
                "block in the previous message.");
    /* answered, then a user message of its own: accepted (the API joins the two) */
    ah__mock_reply r;
    reply_for(AH_WIRE_ANTHROPIC,
              A_TOOLS "{\"role\":\"assistant\",\"content\":[" A_CALL_A "]},"
              "{\"role\":\"user\",\"content\":[" A_RESULT_A "]},"
              "{\"role\":\"user\",\"content\":\"next\"}]}",
              NULL, &r);
    ah__mock_reply_free(&r);
#undef A_TOOLS
#undef A_CALL_A
#undef A_CALL_B
#undef A_CALL_C
#undef A_RESULT_A
#undef A_RESULT_B
#undef A_RESULT_X

#define C_TOOLS "{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"q\"},"
#define C_CALLS "{\"role\":\"assistant\",\"content\":null,\"tool_calls\":[" \
    "{\"id\":\"call_1\",\"type\":\"function\",\"function\":{\"name\":\"t\",\"arguments\":\"{}\"}}," \
    "{\"id\":\"call_2\",\"type\":\"function\",\"function\":{\"name\":\"t\",\"arguments\":\"{}\"}}]}"
#define C_MISSING "An assistant message with 'tool_calls' must be followed by tool " \
    "messages responding to each 'tool_call_id'. The following tool_call_ids did not " \
    "have response messages: "
    reply_fails(AH_WIRE_OPENAI,
                C_TOOLS C_CALLS ",{\"role\":\"tool\",\"tool_call_id\":\"call_2\","
                "\"content\":\"r\"},{\"role\":\"user\",\"content\":\"again\"}]}",
                C_MISSING "call_1");
    reply_fails(AH_WIRE_OPENAI, C_TOOLS C_CALLS "]}", C_MISSING "call_1, call_2");
    reply_fails(AH_WIRE_OPENAI,
                C_TOOLS "{\"role\":\"tool\",\"tool_call_id\":\"call_1\",\"content\":\"r\"}]}",
                "Invalid parameter: messages with role 'tool' must be a response to a "
                "preceeding message with 'tool_calls'.");
#undef C_TOOLS
#undef C_CALLS
#undef C_MISSING

#define R_TOOLS "{\"model\":\"m\",\"input\":[{\"role\":\"user\",\"content\":\"q\"},"
    reply_fails(AH_WIRE_RESPONSES,
                R_TOOLS "{\"type\":\"function_call\",\"call_id\":\"call_1\",\"name\":\"t\","
                "\"arguments\":\"{}\"},{\"role\":\"user\",\"content\":\"again\"}]}",
                "No tool output found for function call call_1.");
    reply_fails(AH_WIRE_RESPONSES,
                R_TOOLS "{\"type\":\"function_call_output\",\"call_id\":\"call_1\","
                "\"output\":\"r\"}]}",
                "No tool call found for function call output with call_id call_1.");
#undef R_TOOLS
    /* clang-format on */
}

static void continuation_resumes_without_repeating(void **state)
{
    (void)state;
    ah__mock_reply full, cont;
    reply_for(AH_WIRE_ANTHROPIC, A_USER("hello"), NULL, &full);
    /* The client kept "You said: \"hel" (cut mid-delta) as a partial. */
    reply_for(
        AH_WIRE_ANTHROPIC,
        "{\"model\":\"claude-test\",\"max_tokens\":64,\"messages\":[{\"role\":\"user\","
        "\"content\":\"hello\"},{\"role\":\"assistant\",\"content\":[{\"type\":\"text\","
        "\"text\":\"You said: \\\"hel\"}]}]}",
        NULL, &cont);
    assert_true(cont.continuation);
    size_t p = strlen("You said: \"hel");
    assert_string_equal(cont.text, full.text + p);
    check_deltas(&cont);
    /* The first delta finishes the cut one ("lo\"."), then the original deltas. */
    assert_memory_equal(cont.text, "lo\".", cont.cuts[1]);
    assert_int_equal(cont.ndeltas, full.ndeltas - 2);
    /* Same conversation, same ids: the message and any tool call keep their identity. */
    assert_string_equal(cont.msg_id, full.msg_id);
    ah__mock_reply_free(&cont);

    /* Chat, with a tool call still to come after the text. */
    ah__mock_reply_free(&full);
    const char *tools = "\"tools\":[{\"type\":\"function\",\"function\":{\"name\":\"t\","
                        "\"parameters\":{\"type\":\"object\",\"required\":[\"q\"]}}}]";
    char a[512], b[512];
    snprintf(a, sizeof a,
             "{\"model\":\"m\",%s,\"messages\":[{\"role\":\"user\",\"content\":\"x\"}]}",
             tools);
    snprintf(b, sizeof b,
             "{\"model\":\"m\",%s,\"messages\":[{\"role\":\"user\",\"content\":\"x\"},"
             "{\"role\":\"assistant\",\"content\":\"I will call t now.\"}]}",
             tools);
    reply_for(AH_WIRE_OPENAI, a, NULL, &full);
    reply_for(AH_WIRE_OPENAI, b, NULL, &cont);
    assert_int_equal(cont.text_len, 0);
    assert_int_equal(cont.ndeltas, 0);
    assert_true(cont.has_tool);
    assert_string_equal(cont.tool_id, full.tool_id);
    assert_string_equal(cont.calls[0].args, "{\"q\":\"mock_q\"}");
    ah__mock_reply_free(&full);
    ah__mock_reply_free(&cont);

    /* A partial that is not a prefix of the reply: marked, nothing repeated. */
    reply_for(AH_WIRE_RESPONSES,
              "{\"model\":\"m\",\"input\":[{\"role\":\"user\",\"content\":\"x\"},"
              "{\"role\":\"assistant\",\"content\":[{\"type\":\"output_text\",\"text\":"
              "\"Something else\"}]}]}",
              NULL, &cont);
    assert_true(cont.continuation);
    assert_string_equal(cont.text, "[continued] The reply goes on after 14 bytes.");
    ah__mock_reply_free(&cont);
}

#define PREFILL_400                                                                      \
    "This model does not support assistant message prefill. The conversation must end "  \
    "with a user message."

static void prefill_refused_like_the_real_api(void **state)
{
    (void)state;
    const char *tail = "\"max_tokens\":64,\"messages\":[{\"role\":\"user\",\"content\":"
                       "\"hello\"},{\"role\":\"assistant\",\"content\":\"You said\"}]}";
    char j[512];
    const char *refused[] = {"claude-opus-4-6", "claude-sonnet-4-6", "claude-opus-4-7",
                             "claude-sonnet-5", "us.anthropic.claude-opus-4-6-v1:0"};
    for (size_t i = 0; i < sizeof refused / sizeof refused[0]; i++) {
        snprintf(j, sizeof j, "{\"model\":\"%s\",%s", refused[i], tail);
        reply_fails(AH_WIRE_ANTHROPIC, j, PREFILL_400);
    }
    /* ... before the whitespace rule, which only older models reach */
    snprintf(j, sizeof j,
             "{\"model\":\"claude-opus-4-6\",\"max_tokens\":1,\"messages\":[{\"role\":"
             "\"user\",\"content\":\"x\"},{\"role\":\"assistant\",\"content\":\"a \"}]}");
    reply_fails(AH_WIRE_ANTHROPIC, j, PREFILL_400);
    /* thinking on: refused on any model; thinking disabled: accepted */
    snprintf(j, sizeof j, "{\"model\":\"claude-sonnet-4-5\",\"thinking\":{\"type\":"
             "\"adaptive\"},%s", tail);
    reply_fails(AH_WIRE_ANTHROPIC, j, PREFILL_400);
    ah__mock_reply r;
    snprintf(j, sizeof j, "{\"model\":\"claude-sonnet-4-5\",\"thinking\":{\"type\":"
             "\"disabled\"},%s", tail);
    reply_for(AH_WIRE_ANTHROPIC, j, NULL, &r);
    assert_true(r.continuation);
    ah__mock_reply_free(&r);
    /* a user message last is fine for every model */
    snprintf(j, sizeof j, "{\"model\":\"claude-opus-4-6\",\"max_tokens\":64,"
             "\"messages\":[{\"role\":\"user\",\"content\":\"hello\"}]}");
    reply_for(AH_WIRE_ANTHROPIC, j, NULL, &r);
    ah__mock_reply_free(&r);
    /* refuse_prefill: any model, any format */
    ah__mock_text_opts o = {.refuse_prefill = 1};
    cJSON *req = cJSON_Parse("{\"model\":\"m\",\"messages\":[{\"role\":\"user\","
                             "\"content\":\"x\"},{\"role\":\"assistant\",\"content\":\"y\"}]}");
    char err[256];
    assert_int_equal(ah__mock_model_reply(AH_WIRE_OPENAI, req, 10, &o, &r, err, sizeof err),
                     AH_ERR_INVALID);
    assert_string_equal(err, PREFILL_400);
    cJSON_Delete(req);
}

/* The prompt rung: partial, then a user message asking to continue. */
static void continue_prompt_gets_the_rest_and_restates_on_request(void **state)
{
    (void)state;
    ah__mock_text_opts text = {.text = "One two three. Four five six seven. Eight nine."};
    ah__mock_reply full, cont;
    reply_for(AH_WIRE_OPENAI,
              "{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"x\"}]}",
              &text, &full);
    const char *prompted =
        "{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"x\"},"
        "{\"role\":\"assistant\",\"content\":\"One two three. Four five six seven.\"},"
        "{\"role\":\"user\",\"content\":\"Your previous reply was cut off. Continue "
        "exactly where it stopped.\"}]}";
    reply_for(AH_WIRE_OPENAI, prompted, &text, &cont);
    assert_true(cont.continuation);
    assert_string_equal(cont.text, " Eight nine.");
    assert_int_equal(cont.restated, 0);
    assert_string_equal(cont.msg_id, full.msg_id);
    check_deltas(&cont);
    ah__mock_reply_free(&cont);
    /* restate = all */
    text.restate = AH__MOCK_RESTATE_ALL;
    reply_for(AH_WIRE_OPENAI, prompted, &text, &cont);
    assert_string_equal(cont.text, "One two three. Four five six seven. Eight nine.");
    assert_int_equal(cont.restated, strlen("One two three. Four five six seven."));
    check_deltas(&cont);
    ah__mock_reply_free(&cont);
    /* restate = last sentence */
    text.restate = AH__MOCK_RESTATE_LAST_SENTENCE;
    reply_for(AH_WIRE_OPENAI, prompted, &text, &cont);
    assert_string_equal(cont.text, "Four five six seven. Eight nine.");
    assert_int_equal(cont.restated, strlen("Four five six seven."));
    check_deltas(&cont);
    ah__mock_reply_free(&cont);
    /* a request that continues nothing is not restated */
    reply_for(AH_WIRE_OPENAI,
              "{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"x\"}]}",
              &text, &cont);
    assert_false(cont.continuation);
    assert_int_equal(cont.restated, 0);
    assert_string_equal(cont.text, full.text);
    ah__mock_reply_free(&cont);
    /* a user message without "continue" after an assistant one is a new turn */
    ah__mock_text_opts plain = {0};
    reply_for(AH_WIRE_OPENAI,
              "{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"x\"},"
              "{\"role\":\"assistant\",\"content\":\"hi\"},{\"role\":\"user\","
              "\"content\":\"thanks\"}]}",
              &plain, &cont);
    assert_false(cont.continuation);
    ah__mock_reply_free(&cont);
    ah__mock_reply_free(&full);
}

static void invalid_requests(void **state)
{
    (void)state;
    reply_fails(AH_WIRE_ANTHROPIC, "{\"max_tokens\":1,\"messages\":[]}",
                "model: Field required");
    reply_fails(AH_WIRE_ANTHROPIC, "{\"model\":\"m\",\"messages\":[]}",
                "max_tokens: Field required");
    reply_fails(AH_WIRE_ANTHROPIC, "{\"model\":\"m\",\"max_tokens\":1}",
                "messages: Field required");
    reply_fails(AH_WIRE_ANTHROPIC, "{\"model\":\"m\",\"max_tokens\":1,\"messages\":[]}",
                "messages: at least one message is required");
    reply_fails(AH_WIRE_ANTHROPIC,
                "{\"model\":\"m\",\"max_tokens\":1,\"messages\":[{\"role\":\"system\","
                "\"content\":\"x\"}]}",
                "messages.0.role: Input should be 'user' or 'assistant'");
    reply_fails(AH_WIRE_ANTHROPIC,
                "{\"model\":\"m\",\"max_tokens\":1,\"messages\":[{\"role\":\"user\","
                "\"content\":\"x\"},{\"role\":\"assistant\",\"content\":\"You said \"}]}",
                "messages: final assistant content cannot end with trailing whitespace");
    reply_fails(AH_WIRE_OPENAI, "{\"messages\":[]}",
                "you must provide a model parameter");
    reply_fails(AH_WIRE_OPENAI, "{\"model\":\"m\"}",
                "Missing required parameter: 'messages'.");
    reply_fails(
        AH_WIRE_OPENAI, "{\"model\":\"m\",\"messages\":[]}",
        "Invalid 'messages': empty array. Expected an array with minimum length 1, "
        "but got an empty array instead.");
    reply_fails(AH_WIRE_RESPONSES, "{\"model\":\"m\"}",
                "Missing required parameter: 'input'.");
    reply_fails(AH_WIRE_RESPONSES, "[1]", "the request body must be a JSON object");
}

/* Split an SSE byte string into events; returns the count, data pointers into a copy. */
typedef struct sse_ev {
    char event[64];
    char *data;
} sse_ev;

static size_t split_sse(char *s, sse_ev *evs, size_t max)
{
    size_t n = 0;
    char *p = s;
    while (*p && n < max) {
        char *end = strstr(p, "\n\n");
        assert_non_null(end);
        *end = '\0';
        evs[n].event[0] = '\0';
        evs[n].data = NULL;
        for (char *line = p; line;) {
            char *nl = strchr(line, '\n');
            if (nl)
                *nl = '\0';
            if (strncmp(line, "event: ", 7) == 0)
                snprintf(evs[n].event, sizeof evs[n].event, "%s", line + 7);
            else if (strncmp(line, "data: ", 6) == 0)
                evs[n].data = line + 6;
            line = nl ? nl + 1 : NULL;
        }
        n++;
        p = end + 2;
    }
    return n;
}

static char *write_stream(ah_wire wire, const ah__mock_reply *r, size_t *count)
{
    ah__mock_writer *w = ah__mock_writer_new(wire, r, "req_test");
    assert_non_null(w);
    ah__mock_buf out = {0};
    size_t n = 0;
    while (ah__mock_writer_next(w, &out))
        n++;
    assert_int_equal(n, ah__mock_writer_event_count(w));
    ah__mock_writer_free(w);
    *count = n;
    return ah__mock_buf_take(&out);
}

static void anthropic_stream_bytes(void **state)
{
    (void)state;
    ah__mock_reply r;
    ah__mock_text_opts o = {.text = "Hi \"you\""};
    reply_for(AH_WIRE_ANTHROPIC, A_USER("x"), &o, &r);
    size_t n;
    char *sse = write_stream(AH_WIRE_ANTHROPIC, &r, &n);
    char want[4096];
    snprintf(
        want, sizeof want,
        "event: message_start\ndata: "
        "{\"type\":\"message_start\",\"message\":{\"id\":\"%s\","
        "\"type\":\"message\",\"role\":\"assistant\",\"model\":\"claude-test\","
        "\"content\":[],\"stop_reason\":null,\"stop_sequence\":null,\"usage\":{"
        "\"input_tokens\":%lld,\"cache_creation_input_tokens\":0,"
        "\"cache_read_input_tokens\":0,\"output_tokens\":1,\"service_tier\":"
        "\"standard\"}}}\n\n"
        "event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,"
        "\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n"
        "event: ping\ndata: {\"type\": \"ping\"}\n\n"
        "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,"
        "\"delta\":{\"type\":\"text_delta\",\"text\":\"Hi\"}}\n\n"
        "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,"
        "\"delta\":{\"type\":\"text_delta\",\"text\":\" \\\"you\\\"\"}}\n\n"
        "event: content_block_stop\ndata: "
        "{\"type\":\"content_block_stop\",\"index\":0}\n\n"
        "event: message_delta\ndata: "
        "{\"type\":\"message_delta\",\"delta\":{\"stop_reason\":"
        "\"end_turn\",\"stop_sequence\":null},\"usage\":{\"input_tokens\":%lld,"
        "\"cache_creation_input_tokens\":0,\"cache_read_input_tokens\":0,"
        "\"output_tokens\":2}}\n\n"
        "event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n",
        r.msg_id, r.input_tokens, r.input_tokens);
    assert_string_equal(sse, want);
    assert_int_equal(n, 8);
    free(sse);
    ah__mock_reply_free(&r);
}

/* Every writer: each event's data is JSON (Chat's [DONE] aside), event names equal the
 * data's type, Responses sequence numbers count from 0, and the stream ends properly. */
static void every_format_streams_json(void **state)
{
    (void)state;
    static const ah_wire wires[] = {AH_WIRE_ANTHROPIC, AH_WIRE_OPENAI, AH_WIRE_RESPONSES};
    static const char *const reqs[] = {
        "{\"model\":\"m\",\"max_tokens\":5,\"tools\":[{\"name\":\"t\",\"input_schema\":{"
        "\"type\":\"object\",\"required\":[\"a\"]}}],\"messages\":[{\"role\":\"user\","
        "\"content\":\"x\"}]}",
        "{\"model\":\"m\",\"stream_options\":{\"include_usage\":true},\"tools\":[{"
        "\"type\":"
        "\"function\",\"function\":{\"name\":\"t\",\"parameters\":{\"required\":[\"a\"]}}"
        "}],"
        "\"messages\":[{\"role\":\"user\",\"content\":\"x\"}]}",
        "{\"model\":\"m\",\"tools\":[{\"type\":\"function\",\"name\":\"t\","
        "\"parameters\":{"
        "\"required\":[\"a\"]}}],\"input\":\"x\"}",
    };
    for (int f = 0; f < 3; f++) {
        ah__mock_reply r;
        reply_for(wires[f], reqs[f], NULL, &r);
        assert_true(r.has_tool);
        size_t n;
        char *sse = write_stream(wires[f], &r, &n);
        sse_ev evs[128];
        assert_int_equal(split_sse(sse, evs, 128), n);
        ah__mock_buf text = {0}, args = {0};
        for (size_t i = 0; i < n; i++) {
            assert_non_null(evs[i].data);
            if (wires[f] == AH_WIRE_OPENAI && i == n - 1) {
                assert_string_equal(evs[i].data, "[DONE]");
                break;
            }
            cJSON *j = cJSON_Parse(evs[i].data);
            assert_non_null(j);
            const char *type = cJSON_GetStringValue(cJSON_GetObjectItem(j, "type"));
            if (wires[f] != AH_WIRE_OPENAI) {
                assert_non_null(type);
                assert_string_equal(evs[i].event, type);
            }
            if (wires[f] == AH_WIRE_RESPONSES)
                assert_int_equal(cJSON_GetObjectItem(j, "sequence_number")->valueint,
                                 (int)i);
            /* Gather text and arguments the way a client would. */
            const cJSON *d;
            if (wires[f] == AH_WIRE_ANTHROPIC && (d = cJSON_GetObjectItem(j, "delta"))) {
                const char *t = cJSON_GetStringValue(cJSON_GetObjectItem(d, "text"));
                const char *pj =
                    cJSON_GetStringValue(cJSON_GetObjectItem(d, "partial_json"));
                if (t)
                    ah__mock_buf_puts(&text, t);
                if (pj)
                    ah__mock_buf_puts(&args, pj);
            } else if (wires[f] == AH_WIRE_OPENAI) {
                const cJSON *ch =
                    cJSON_GetArrayItem(cJSON_GetObjectItem(j, "choices"), 0);
                d = cJSON_GetObjectItem(ch, "delta");
                const char *t = cJSON_GetStringValue(cJSON_GetObjectItem(d, "content"));
                const cJSON *tc =
                    cJSON_GetArrayItem(cJSON_GetObjectItem(d, "tool_calls"), 0);
                const char *a = cJSON_GetStringValue(cJSON_GetObjectItem(
                    cJSON_GetObjectItem(tc, "function"), "arguments"));
                if (t)
                    ah__mock_buf_puts(&text, t);
                if (a)
                    ah__mock_buf_puts(&args, a);
            } else if (type && strcmp(type, "response.output_text.delta") == 0) {
                ah__mock_buf_puts(&text,
                                  cJSON_GetStringValue(cJSON_GetObjectItem(j, "delta")));
            } else if (type &&
                       strcmp(type, "response.function_call_arguments.delta") == 0) {
                ah__mock_buf_puts(&args,
                                  cJSON_GetStringValue(cJSON_GetObjectItem(j, "delta")));
            }
            if (i == n - 1)
                assert_string_equal(type, wires[f] == AH_WIRE_ANTHROPIC
                                              ? "message_stop"
                                              : "response.completed");
            cJSON_Delete(j);
        }
        assert_string_equal(text.data, r.text);
        assert_string_equal(args.data, r.calls[0].args);
        ah__mock_buf_free(&text);
        ah__mock_buf_free(&args);
        free(sse);

        /* The in-stream error and the malformed event. */
        ah__mock_writer *w = ah__mock_writer_new(wires[f], &r, "req_x");
        ah__mock_buf out = {0};
        ah__mock_writer_next(w, &out);
        ah__mock_buf_reset(&out);
        ah__mock_writer_malformed(w, &out);
        sse_ev m[2];
        assert_int_equal(split_sse(out.data, m, 2), 1);
        cJSON *bad = cJSON_Parse(m[0].data);
        assert_null(bad);
        ah__mock_buf_reset(&out);
        ah__mock_writer_error(w, &out, NULL, NULL);
        sse_ev e[3];
        size_t ne = split_sse(out.data, e, 3);
        assert_int_equal(ne, wires[f] == AH_WIRE_ANTHROPIC ? 1 : 2);
        cJSON *ej = cJSON_Parse(e[0].data);
        assert_non_null(ej);
        if (wires[f] == AH_WIRE_OPENAI) {
            assert_string_equal(cJSON_GetStringValue(cJSON_GetObjectItem(
                                    cJSON_GetObjectItem(ej, "error"), "type")),
                                "server_error");
            assert_string_equal(e[1].data, "[DONE]");
        } else {
            assert_string_equal(e[0].event, "error");
        }
        if (wires[f] == AH_WIRE_ANTHROPIC) {
            const cJSON *err = cJSON_GetObjectItem(ej, "error");
            assert_true(cJSON_IsNull(cJSON_GetObjectItem(err, "details")));
            assert_string_equal(cJSON_GetStringValue(cJSON_GetObjectItem(err, "type")),
                                "overloaded_error");
            assert_string_equal(cJSON_GetStringValue(cJSON_GetObjectItem(err, "message")),
                                "Overloaded");
            assert_string_equal(
                cJSON_GetStringValue(cJSON_GetObjectItem(ej, "request_id")), "req_x");
        }
        if (wires[f] == AH_WIRE_RESPONSES) {
            assert_string_equal(e[1].event, "response.failed");
            cJSON *fj = cJSON_Parse(e[1].data);
            assert_non_null(fj);
            assert_string_equal(cJSON_GetStringValue(cJSON_GetObjectItem(
                                    cJSON_GetObjectItem(fj, "response"), "status")),
                                "failed");
            cJSON_Delete(fj);
        }
        cJSON_Delete(ej);
        ah__mock_buf_free(&out);
        ah__mock_writer_free(w);
        ah__mock_reply_free(&r);
    }
}

static void non_stream_bodies_and_errors(void **state)
{
    (void)state;
    static const ah_wire wires[] = {AH_WIRE_ANTHROPIC, AH_WIRE_OPENAI, AH_WIRE_RESPONSES};
    for (int f = 0; f < 3; f++) {
        ah__mock_reply r;
        ah__mock_text_opts o = {.text = "plain \xe2\x9c\x93"};
        reply_for(
            wires[f],
            f == 0 ? A_USER("x")
            : f == 1
                ? "{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":1}]}"
                : "{\"model\":\"m\",\"input\":\"x\"}",
            &o, &r);
        ah__mock_buf b = {0};
        ah__mock_reply_body(wires[f], &r, &b);
        cJSON *j = cJSON_Parse(b.data);
        assert_non_null(j);
        const char *text =
            f == 0
                ? cJSON_GetStringValue(cJSON_GetObjectItem(
                      cJSON_GetArrayItem(cJSON_GetObjectItem(j, "content"), 0), "text"))
            : f == 1
                ? cJSON_GetStringValue(cJSON_GetObjectItem(
                      cJSON_GetObjectItem(
                          cJSON_GetArrayItem(cJSON_GetObjectItem(j, "choices"), 0),
                          "message"),
                      "content"))
                : cJSON_GetStringValue(cJSON_GetObjectItem(
                      cJSON_GetArrayItem(
                          cJSON_GetObjectItem(
                              cJSON_GetArrayItem(cJSON_GetObjectItem(j, "output"), 0),
                              "content"),
                          0),
                      "text"));
        assert_string_equal(text, "plain \xe2\x9c\x93");
        cJSON_Delete(j);
        ah__mock_buf_free(&b);
        ah__mock_reply_free(&r);
    }
    /* Error bodies per provider shape and default type per status. */
    ah__mock_buf b = {0};
    ah__mock_error_body(AH_WIRE_ANTHROPIC, 529, NULL, NULL, "req_1", &b);
    assert_string_equal(b.data,
                        "{\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\","
                        "\"message\":\"Overloaded\"},\"request_id\":\"req_1\"}");
    ah__mock_buf_reset(&b);
    ah__mock_error_body(AH_WIRE_ANTHROPIC, 429, NULL, NULL, "req_2", &b);
    assert_non_null(strstr(b.data, "\"type\":\"rate_limit_error\""));
    ah__mock_buf_reset(&b);
    ah__mock_error_body(AH_WIRE_OPENAI, 429, NULL, NULL, "req_3", &b);
    assert_string_equal(b.data,
                        "{\"error\":{\"message\":\"Rate limit reached for requests\","
                        "\"type\":\"requests\",\"param\":null,\"code\":"
                        "\"rate_limit_exceeded\"}}");
    ah__mock_buf_reset(&b);
    ah__mock_error_body(AH_WIRE_RESPONSES, 503, "overloaded_error", "slow down", "r", &b);
    assert_string_equal(b.data, "{\"error\":{\"message\":\"slow down\",\"type\":"
                                "\"overloaded_error\",\"param\":null,\"code\":null}}");
    ah__mock_buf_free(&b);
    assert_int_equal(ah__mock_error_status(AH_WIRE_ANTHROPIC, NULL), 529);
    assert_int_equal(ah__mock_error_status(AH_WIRE_OPENAI, NULL), 500);
    assert_int_equal(ah__mock_error_status(AH_WIRE_OPENAI, "overloaded_error"), 503);
    assert_int_equal(ah__mock_error_status(AH_WIRE_ANTHROPIC, "rate_limit_error"), 429);
}

static void buf_escapes_and_utf8_floor(void **state)
{
    (void)state;
    ah__mock_buf b = {0};
    ah__mock_buf_json_str(&b, "a\"b\\c\n\t\x01\xc3\xa9", 10);
    assert_string_equal(b.data, "\"a\\\"b\\\\c\\n\\t\\u0001\xc3\xa9\"");
    ah__mock_buf_free(&b);
    const char *euro = "x\xe2\x82\xac";
    assert_int_equal(ah__mock_utf8_floor(euro, 4), 4);
    assert_int_equal(ah__mock_utf8_floor(euro, 3), 1);
    assert_int_equal(ah__mock_utf8_floor(euro, 2), 1);
    assert_int_equal(ah__mock_utf8_floor(euro, 1), 1);
    assert_int_equal(ah__mock_utf8_floor(euro, 0), 0);
}

/* The mock's format registry: one complete table per AH_WIRE_MAP line, serving the
 * format's default request path, and one format answering unknown paths by default. */
static void every_mock_format_is_complete(void **state)
{
    (void)state;
    int defaults = 0;
    for (int w = 0; w < AH_WIRE_COUNT_; w++) {
        const ah__mock_format *f = ah__mock_format_of((ah_wire)w);
        assert_non_null(f);
        /* the client streams: the format's streaming endpoint when it has one */
        assert_string_equal(f->stream_path ? f->stream_path : f->path,
                            ah_wire_path((ah_wire)w));
        assert_non_null(f->request_id_header);
        assert_non_null(f->not_found_type);
        assert_non_null(f->bad_method_type);
        assert_non_null(f->bad_json_message);
        assert_non_null(f->missing_model);
        assert_non_null(f->default_error_type);
        assert_non_null(f->extra_after_end);
        assert_non_null(f->msg_id);
        assert_non_null(f->tool_id);
        assert_true(f->overloaded_status >= 500 && f->overloaded_status <= 599);
        assert_non_null(f->read);
        assert_non_null(f->plan);
        assert_non_null(f->emit);
        assert_non_null(f->error_event);
        assert_non_null(f->body);
        assert_non_null(f->error_body);
        defaults += f->guess_default != 0;
    }
    assert_int_equal(defaults, 1);
    assert_null(ah__mock_format_of(AH_WIRE_COUNT_));
}

/* A plan's tool_calls list names the calls: any tool, offered or not, with the given
 * arguments (else the schema's for the offered tool, else {}), in every format's stream;
 * after tool results too; an empty list makes none. */
static void plan_names_the_tool_calls(void **state)
{
    (void)state;
    char json[1024];
    snprintf(json, sizeof json,
             "{\"model\":\"m\",\"max_tokens\":9,\"messages\":[{\"role\":\"user\","
             "\"content\":\"weather?\"}],%s}",
             weather_tools);
    ah__mock_text_opts o = {.tool_calls_json =
                                "[{\"name\":\"book\",\"arguments\":{\"seat\":\"12A\"}},"
                                "{\"name\":\"get_weather\"}]"};
    ah__mock_reply r;
    reply_for(AH_WIRE_ANTHROPIC, json, &o, &r);
    assert_true(r.has_tool);
    assert_int_equal(r.ncalls, 2);
    assert_string_equal(r.text, "I will call book now.");
    assert_string_equal(r.calls[0].name, "book");
    assert_string_equal(r.calls[0].args, "{\"seat\":\"12A\"}");
    assert_string_equal(r.calls[1].name, "get_weather");
    assert_memory_equal(r.calls[1].args, "{\"city\":\"mock_city\"", 19); /* the schema's */
    /* the stream carries both, each with its own name and arguments */
    ah__mock_writer *w = ah__mock_writer_new(AH_WIRE_ANTHROPIC, &r, "req_1");
    ah__mock_buf all = {0}, one = {0};
    while (ah__mock_writer_next(w, &one)) {
        ah__mock_buf_put(&all, one.data, one.len);
        ah__mock_buf_reset(&one);
    }
    ah__mock_buf_put(&all, "", 1);
    assert_non_null(strstr(all.data, "\"name\":\"book\""));
    assert_non_null(strstr(all.data, "\"name\":\"get_weather\""));
    assert_non_null(strstr(all.data, "12A"));
    ah__mock_buf_free(&all);
    ah__mock_buf_free(&one);
    ah__mock_writer_free(w);
    ah__mock_reply_free(&r);

    /* after the results: the model's text for them, and the listed call again */
    reply_for(AH_WIRE_OPENAI,
              "{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"go\"},"
              "{\"role\":\"assistant\",\"tool_calls\":[{\"id\":\"c1\",\"type\":\"function\","
              "\"function\":{\"name\":\"a\",\"arguments\":\"{}\"}}]},"
              "{\"role\":\"tool\",\"tool_call_id\":\"c1\",\"content\":\"7\"}]}",
              &(ah__mock_text_opts){.tool_calls_json = "[{\"name\":\"b\"}]"}, &r);
    assert_string_equal(r.text, "The tool returned: 7");
    assert_int_equal(r.ncalls, 1);
    assert_string_equal(r.calls[0].name, "b");
    assert_string_equal(r.calls[0].args, "{}");
    ah__mock_reply_free(&r);

    /* an empty list: no call, though a tool is offered */
    reply_for(AH_WIRE_ANTHROPIC, json, &(ah__mock_text_opts){.tool_calls_json = "[]"}, &r);
    assert_false(r.has_tool);
    assert_memory_equal(r.text, "You said: ", 10);
    ah__mock_reply_free(&r);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(every_mock_format_is_complete),
        cmocka_unit_test(user_text_gets_digest),
        cmocka_unit_test(same_request_same_reply),
        cmocka_unit_test(delta_options),
        cmocka_unit_test(tool_call_from_schema),
        cmocka_unit_test(tool_results_are_quoted),
        cmocka_unit_test(unanswered_tool_calls_are_refused_like_the_real_apis),
        cmocka_unit_test(continuation_resumes_without_repeating),
        cmocka_unit_test(prefill_refused_like_the_real_api),
        cmocka_unit_test(continue_prompt_gets_the_rest_and_restates_on_request),
        cmocka_unit_test(invalid_requests),
        cmocka_unit_test(anthropic_stream_bytes),
        cmocka_unit_test(every_format_streams_json),
        cmocka_unit_test(non_stream_bodies_and_errors),
        cmocka_unit_test(buf_escapes_and_utf8_floor),
        cmocka_unit_test(plan_names_the_tool_calls),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
