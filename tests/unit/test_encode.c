/* test_encode.c - request bodies and headers for the three wire formats, checked field by
 * field against the providers' documented shapes (docs/providers-encoding.md lists the
 * pages): the produced JSON is parsed back with cJSON and its structure asserted. */
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
#include "encode_util.h"

/* ---- helpers ---------------------------------------------------------------------- */

/* Pretty-printed on purpose: the body must still be one unformatted line. */
static const char *const ADD_SCHEMA =
    "{\n  \"type\": \"object\",\n  \"properties\": {\"a\": {\"type\": \"integer\"},\n"
    "    \"b\": {\"type\": \"integer\", \"maximum\": 12345678901234567890}},\n"
    "  \"required\": [\"a\", \"b\"]\n}";

static const ah_tool_def TOOLS[] = {
    {"add", "Add two integers.", NULL},
    {"mul", NULL, "{\"type\":\"object\"}"},
};

static void base_opts(ah_request_opts *o)
{
    ah_request_opts_init(o);
    o->model = "model-x";
    o->max_tokens = 1024;
}

/* user question -> assistant (thinking, text, two tool calls) -> two tool results. */
static ah_conversation *tool_round(void)
{
    ah_conversation *c = ah_conversation_new();
    assert_int_equal(ah_conversation_set_system(c, "Be exact."), AH_OK);
    assert_int_equal(ah_conversation_add_user_text(c, "2+3 and 4*5?"), AH_OK);
    assert_int_equal(ah_conversation_begin_assistant(c), AH_OK);
    assert_int_equal(
        ah_conversation_add_reasoning(c, "Use both tools.", "SIG==", "rs_9", "ENC==", 0),
        AH_OK);
    assert_int_equal(ah_conversation_add_text(c, "Let me compute.", 15), AH_OK);
    assert_int_equal(
        ah_conversation_add_tool_use(c, "call_1", "add", "{\"a\": 2,\n \"b\": 3}"),
        AH_OK);
    assert_int_equal(ah_conversation_add_tool_use(c, "call_2", "mul", ""), AH_OK);
    assert_int_equal(ah_conversation_add_tool_result(c, "call_1", "5", 0), AH_OK);
    assert_int_equal(ah_conversation_add_tool_result(c, "call_2", "mul failed", 1),
                     AH_OK);
    return c;
}

/* ---- anthropic -------------------------------------------------------------------- */

static void anthropic_basic_shape(void **state)
{
    (void)state;
    ah_conversation *c = ah_conversation_new();
    ah_conversation_set_system(c, "Be brief.");
    ah_conversation_add_user_text(c, "Hi");
    ah_request_opts o;
    base_opts(&o);
    cJSON *r = encode(AH_WIRE_ANTHROPIC, c, &o, NULL);
    check_str(r, "model", "model-x");
    check_num(r, "max_tokens", 1024);
    check_str(r, "system", "Be brief."); /* top level, not a message */
    check_size(r, "messages", 1);
    check_str(r, "messages[0].role", "user");
    check_size(r, "messages[0].content", 1);
    check_str(r, "messages[0].content[0].type", "text");
    check_str(r, "messages[0].content[0].text", "Hi");
    check_absent(r, "stream");
    check_absent(r, "temperature");
    check_absent(r, "tools");
    check_absent(r, "tool_choice");
    check_absent(r, "stop_sequences");
    check_absent(r, "thinking");
    cJSON_Delete(r);

    o.stream = 1;
    o.has_temperature = 1;
    o.temperature = 0.25;
    o.thinking_budget = 2048;
    const char *stops[] = {"END", "\n\nHuman:"};
    o.stop = stops;
    o.n_stop = 2;
    r = encode(AH_WIRE_ANTHROPIC, c, &o, NULL);
    check_bool(r, "stream", 1);
    check_num(r, "temperature", 0.25);
    check_str(r, "thinking.type", "enabled");
    check_num(r, "thinking.budget_tokens", 2048);
    check_size(r, "stop_sequences", 2);
    check_str(r, "stop_sequences[1]", "\n\nHuman:");
    check_absent(r, "stop");
    check_absent(r, "stream_options"); /* an OpenAI member only */
    cJSON_Delete(r);

    o.max_tokens = 0;
    encode_fails(AH_WIRE_ANTHROPIC, c, &o, AH_ERR_INVALID, "max_tokens");
    ah_conversation_free(c);
}

static void anthropic_tool_round(void **state)
{
    (void)state;
    ah_conversation *c = tool_round();
    ah_request_opts o;
    base_opts(&o);
    cJSON *r = encode(AH_WIRE_ANTHROPIC, c, &o, NULL);
    check_size(r, "messages", 3);
    check_str(r, "messages[1].role", "assistant");
    check_size(r, "messages[1].content", 4);
    check_str(r, "messages[1].content[0].type", "thinking");
    check_str(r, "messages[1].content[0].thinking", "Use both tools.");
    check_str(r, "messages[1].content[0].signature", "SIG==");
    check_str(r, "messages[1].content[1].type", "text");
    check_str(r, "messages[1].content[1].text", "Let me compute.");
    check_str(r, "messages[1].content[2].type", "tool_use");
    check_str(r, "messages[1].content[2].id", "call_1");
    check_str(r, "messages[1].content[2].name", "add");
    /* input is an OBJECT, not a string */
    assert_true(cJSON_IsObject(jp(r, "messages[1].content[2].input")));
    check_num(r, "messages[1].content[2].input.a", 2);
    check_num(r, "messages[1].content[2].input.b", 3);
    /* empty arguments become an empty object */
    assert_true(cJSON_IsObject(jp(r, "messages[1].content[3].input")));
    assert_null(jp(r, "messages[1].content[3].input")->child);

    check_str(r, "messages[2].role", "user");
    check_size(r, "messages[2].content", 2);
    check_str(r, "messages[2].content[0].type", "tool_result");
    check_str(r, "messages[2].content[0].tool_use_id", "call_1");
    check_str(r, "messages[2].content[0].content", "5");
    check_absent(r, "messages[2].content[0].is_error");
    check_str(r, "messages[2].content[1].tool_use_id", "call_2");
    check_bool(r, "messages[2].content[1].is_error", 1);
    /* the Responses-only reasoning fields never leak into this format */
    check_absent(r, "messages[1].content[0].encrypted_content");
    cJSON_Delete(r);
    ah_conversation_free(c);
}

static void anthropic_tool_results_come_before_text(void **state)
{
    (void)state;
    ah_conversation *c = ah_conversation_new();
    ah_conversation_begin_assistant(c);
    ah_conversation_add_tool_use(c, "t1", "add", "{}");
    ah_conversation_begin_user(c);
    ah_conversation_add_text(c, "also, hurry", 11);
    ah_msg_block tr = {.kind = AH_MSG_TOOL_RESULT, .tool_use_id = "t1", .text = ""};
    assert_int_equal(ah_conversation_add_block(c, &tr), AH_OK);
    ah_request_opts o;
    base_opts(&o);
    cJSON *r = encode(AH_WIRE_ANTHROPIC, c, &o, NULL);
    check_str(r, "messages[1].content[0].type", "tool_result");
    check_absent(r, "messages[1].content[0].content"); /* empty content is left out */
    check_str(r, "messages[1].content[1].type", "text");
    check_str(r, "messages[1].content[1].text", "also, hurry");
    cJSON_Delete(r);
    ah_conversation_free(c);
}

static void anthropic_reasoning_variants(void **state)
{
    (void)state;
    ah_conversation *c = ah_conversation_new();
    ah_conversation_add_user_text(c, "q");
    ah_conversation_begin_assistant(c);
    ah_conversation_add_reasoning(c, "", NULL, NULL, "REDACTED-DATA", 1);
    ah_conversation_add_reasoning(c, "unsigned summary", NULL, "rs_1", "ENC", 0);
    ah_conversation_add_text(c, "answer", 6);
    ah_conversation_add_user_text(c, "next");
    ah_request_opts o;
    base_opts(&o);
    char *body = NULL;
    cJSON *r = encode(AH_WIRE_ANTHROPIC, c, &o, &body);
    check_size(r, "messages[1].content", 2);
    check_str(r, "messages[1].content[0].type", "redacted_thinking");
    check_str(r, "messages[1].content[0].data", "REDACTED-DATA");
    check_str(r, "messages[1].content[1].type", "text");
    assert_null(strstr(body, "unsigned summary")); /* cannot be verified: not sent */
    free(body);
    cJSON_Delete(r);
    ah_conversation_free(c);
}

static void anthropic_tools_and_tool_choice(void **state)
{
    (void)state;
    ah_conversation *c = ah_conversation_new();
    ah_conversation_add_user_text(c, "q");
    ah_tool_def tools[] = {{"add", "Add two integers.", ADD_SCHEMA}, {"mul", NULL, NULL}};
    ah_request_opts o;
    base_opts(&o);
    o.tools = tools;
    o.n_tools = 2;
    char *body = NULL;
    cJSON *r = encode(AH_WIRE_ANTHROPIC, c, &o, &body);
    check_size(r, "tools", 2);
    check_str(r, "tools[0].name", "add");
    check_str(r, "tools[0].description", "Add two integers.");
    check_str(r, "tools[0].input_schema.type", "object");
    check_str(r, "tools[0].input_schema.required[1]", "b");
    check_absent(r, "tools[1].description");
    check_str(r, "tools[1].input_schema.type", "object"); /* default schema */
    check_absent(r, "tools[0].type");
    check_absent(r, "tool_choice");
    /* the schema text is inserted verbatim: a big integer keeps every digit */
    assert_non_null(strstr(body, "12345678901234567890"));
    free(body);
    cJSON_Delete(r);

    static const struct {
        ah_tool_choice tc;
        const char *type;
    } forms[] = {{AH_TOOL_CHOICE_AUTO, "auto"},
                 {AH_TOOL_CHOICE_NONE, "none"},
                 {AH_TOOL_CHOICE_REQUIRED, "any"},
                 {AH_TOOL_CHOICE_NAMED, "tool"}};
    for (size_t i = 0; i < 4; i++) {
        o.tool_choice = forms[i].tc;
        o.tool_choice_name = "mul";
        r = encode(AH_WIRE_ANTHROPIC, c, &o, NULL);
        check_str(r, "tool_choice.type", forms[i].type);
        if (forms[i].tc == AH_TOOL_CHOICE_NAMED)
            check_str(r, "tool_choice.name", "mul");
        else
            check_absent(r, "tool_choice.name");
        cJSON_Delete(r);
    }
    ah_conversation_free(c);
}

static void anthropic_trailing_partial_is_a_trimmed_prefill(void **state)
{
    (void)state;
    ah_conversation *c = ah_conversation_new();
    ah_conversation_add_user_text(c, "Write a haiku");
    ah_conversation_begin_assistant(c);
    ah_conversation_add_reasoning(c, "Think.", "SIG", NULL, NULL, 0);
    ah_conversation_add_text(c, "Old pond,  ", 11);
    ah_conversation_add_text(c, " \n\t", 3);
    ah_conversation_set_partial(c, 1);
    ah_request_opts o;
    base_opts(&o);
    cJSON *r = encode(AH_WIRE_ANTHROPIC, c, &o, NULL);
    check_size(r, "messages", 2);
    check_str(r, "messages[1].role", "assistant"); /* the prefill the model continues */
    check_size(r, "messages[1].content", 1);       /* no thinking block in a prefill */
    check_str(r, "messages[1].content[0].type", "text");
    check_str(r, "messages[1].content[0].text",
              "Old pond,"); /* trailing whitespace trimmed */
    cJSON_Delete(r);
    /* history itself is unchanged */
    assert_string_equal(ah_conversation_block(c, 1, 1)->text, "Old pond,  ");
    assert_string_equal(ah_conversation_block(c, 1, 2)->text, " \n\t");

    /* The same message, no longer last, is sent whole: thinking kept, nothing trimmed. */
    ah_conversation_add_user_text(c, "go on");
    r = encode(AH_WIRE_ANTHROPIC, c, &o, NULL);
    check_size(r, "messages", 3);
    check_size(r, "messages[1].content", 3);
    check_str(r, "messages[1].content[0].type", "thinking");
    check_str(r, "messages[1].content[1].text", "Old pond,  ");
    check_str(r, "messages[1].content[2].text", " \n\t");
    cJSON_Delete(r);
    ah_conversation_free(c);

    /* A partial holding only reasoning and whitespace sends nothing for it. */
    c = ah_conversation_new();
    ah_conversation_add_user_text(c, "q");
    ah_conversation_begin_assistant(c);
    ah_conversation_add_reasoning(c, "Think.", "SIG", NULL, NULL, 0);
    ah_conversation_add_text(c, "   ", 3);
    ah_conversation_set_partial(c, 1);
    r = encode(AH_WIRE_ANTHROPIC, c, &o, NULL);
    check_size(r, "messages", 1);
    check_str(r, "messages[0].role", "user");
    cJSON_Delete(r);
    ah_conversation_free(c);
}

static void anthropic_skips_empty_blocks_and_messages(void **state)
{
    (void)state;
    ah_conversation *c = ah_conversation_new();
    ah_conversation_begin_user(c); /* empty message */
    ah_conversation_begin_user(c);
    ah_conversation_add_text(c, "", 0);
    ah_conversation_add_text(c, "real", 4);
    ah_request_opts o;
    base_opts(&o);
    cJSON *r = encode(AH_WIRE_ANTHROPIC, c, &o, NULL);
    check_size(r, "messages", 1);
    check_size(r, "messages[0].content", 1);
    check_str(r, "messages[0].content[0].text", "real");
    cJSON_Delete(r);
    ah_conversation_free(c);
}

/* ---- openai chat completions ------------------------------------------------------ */

static void chat_basic_shape(void **state)
{
    (void)state;
    ah_conversation *c = ah_conversation_new();
    ah_conversation_set_system(c, "Be brief.");
    ah_conversation_add_user_text(c, "Hi");
    ah_request_opts o;
    base_opts(&o);
    cJSON *r = encode(AH_WIRE_OPENAI, c, &o, NULL);
    check_str(r, "model", "model-x");
    check_str(r, "messages[0].role", "system"); /* system is the first message */
    check_str(r, "messages[0].content", "Be brief.");
    check_str(r, "messages[1].role", "user");
    check_str(r, "messages[1].content", "Hi"); /* plain string for one text block */
    check_num(r, "max_completion_tokens", 1024);
    check_absent(r, "max_tokens");
    check_absent(r, "system");
    check_absent(r, "stream");
    check_absent(r, "stream_options");
    check_absent(r, "stop");
    cJSON_Delete(r);

    o.stream = 1;
    o.chat_legacy_max_tokens = 1;
    o.has_temperature = 1;
    o.temperature = 0;
    o.reasoning_effort = "low";
    o.thinking_budget = 999; /* an anthropic knob: not sent here */
    const char *stops[] = {"STOP"};
    o.stop = stops;
    o.n_stop = 1;
    r = encode(AH_WIRE_OPENAI, c, &o, NULL);
    check_bool(r, "stream", 1);
    check_bool(r, "stream_options.include_usage", 1);
    check_num(r, "max_tokens", 1024);
    check_absent(r, "max_completion_tokens");
    check_num(r, "temperature", 0);
    check_str(r, "reasoning_effort", "low");
    check_absent(r, "thinking");
    check_size(r, "stop", 1);
    check_str(r, "stop[0]", "STOP");
    check_absent(r, "stop_sequences");
    cJSON_Delete(r);

    o.max_tokens = 0; /* optional here */
    r = encode(AH_WIRE_OPENAI, c, &o, NULL);
    check_absent(r, "max_tokens");
    check_absent(r, "max_completion_tokens");
    cJSON_Delete(r);
    ah_conversation_free(c);
}

static void chat_tool_round(void **state)
{
    (void)state;
    ah_conversation *c = tool_round();
    ah_request_opts o;
    base_opts(&o);
    char *body = NULL;
    cJSON *r = encode(AH_WIRE_OPENAI, c, &o, &body);
    check_size(r, "messages", 5); /* system, user, assistant, tool, tool */
    check_str(r, "messages[2].role", "assistant");
    check_str(r, "messages[2].content", "Let me compute.");
    check_size(r, "messages[2].tool_calls", 2);
    check_str(r, "messages[2].tool_calls[0].id", "call_1");
    check_str(r, "messages[2].tool_calls[0].type", "function");
    check_str(r, "messages[2].tool_calls[0].function.name", "add");
    /* arguments travel as a JSON STRING, byte for byte */
    check_str(r, "messages[2].tool_calls[0].function.arguments",
              "{\"a\": 2,\n \"b\": 3}");
    check_str(r, "messages[2].tool_calls[1].function.arguments", "{}");
    check_str(r, "messages[3].role", "tool");
    check_str(r, "messages[3].tool_call_id", "call_1");
    check_str(r, "messages[3].content", "5");
    check_str(r, "messages[4].tool_call_id", "call_2");
    check_str(r, "messages[4].content", "mul failed");
    check_absent(r, "messages[4].is_error"); /* no such field in this format */
    /* reasoning has no place in Chat Completions */
    assert_null(strstr(body, "SIG=="));
    assert_null(strstr(body, "ENC=="));
    assert_null(strstr(body, "Use both tools."));
    free(body);
    cJSON_Delete(r);
    ah_conversation_free(c);
}

static void chat_message_details(void **state)
{
    (void)state;
    ah_conversation *c = ah_conversation_new();
    ah_conversation_begin_user(c);
    ah_conversation_add_text(c, "part one", 8);
    ah_conversation_add_text(c, "part two", 8);
    ah_conversation_begin_assistant(c);
    ah_conversation_add_tool_use(c, "c1", "add", "{\"a\":1}");
    ah_conversation_begin_user(c);
    ah_conversation_add_text(c, "and text", 8);
    ah_msg_block tr = {.kind = AH_MSG_TOOL_RESULT, .tool_use_id = "c1", .text = "1"};
    ah_conversation_add_block(c, &tr);
    ah_conversation_begin_assistant(c); /* only reasoning: nothing to send */
    ah_conversation_add_reasoning(c, "hmm", "S", NULL, NULL, 0);
    ah_request_opts o;
    base_opts(&o);
    cJSON *r = encode(AH_WIRE_OPENAI, c, &o, NULL);
    check_size(r, "messages", 4);
    check_size(r, "messages[0].content", 2); /* several texts: array of text parts */
    check_str(r, "messages[0].content[0].type", "text");
    check_str(r, "messages[0].content[1].text", "part two");
    assert_true(cJSON_IsNull(jp(r, "messages[1].content"))); /* tool calls only */
    check_str(r, "messages[1].tool_calls[0].function.arguments", "{\"a\":1}");
    check_str(r, "messages[2].role", "tool"); /* tool message right after the call */
    check_str(r, "messages[3].role", "user");
    check_str(r, "messages[3].content", "and text");
    cJSON_Delete(r);
    ah_conversation_free(c);
}

static void chat_tools_and_tool_choice(void **state)
{
    (void)state;
    ah_conversation *c = ah_conversation_new();
    ah_conversation_add_user_text(c, "q");
    ah_tool_def tools[] = {{"add", "Add two integers.", ADD_SCHEMA}, {"mul", NULL, NULL}};
    ah_request_opts o;
    base_opts(&o);
    o.tools = tools;
    o.n_tools = 2;
    cJSON *r = encode(AH_WIRE_OPENAI, c, &o, NULL);
    check_str(r, "tools[0].type", "function");
    check_str(r, "tools[0].function.name", "add");
    check_str(r, "tools[0].function.description", "Add two integers.");
    check_str(r, "tools[0].function.parameters.properties.a.type", "integer");
    check_absent(r, "tools[1].function.description");
    check_absent(r, "tools[0].function.strict");
    check_absent(r, "tool_choice");
    cJSON_Delete(r);
    const struct {
        ah_tool_choice tc;
        const char *s;
    } forms[] = {{AH_TOOL_CHOICE_AUTO, "auto"},
                 {AH_TOOL_CHOICE_NONE, "none"},
                 {AH_TOOL_CHOICE_REQUIRED, "required"}};
    for (size_t i = 0; i < 3; i++) {
        o.tool_choice = forms[i].tc;
        r = encode(AH_WIRE_OPENAI, c, &o, NULL);
        check_str(r, "tool_choice", forms[i].s);
        cJSON_Delete(r);
    }
    o.tool_choice = AH_TOOL_CHOICE_NAMED;
    o.tool_choice_name = "add";
    r = encode(AH_WIRE_OPENAI, c, &o, NULL);
    check_str(r, "tool_choice.type", "function");
    check_str(r, "tool_choice.function.name", "add");
    cJSON_Delete(r);
    ah_conversation_free(c);
}

static void chat_trailing_partial_is_sent_as_said(void **state)
{
    (void)state;
    ah_conversation *c = ah_conversation_new();
    ah_conversation_add_user_text(c, "Write a haiku");
    ah_conversation_begin_assistant(c);
    ah_conversation_add_text(c, "Old pond, ", 10);
    ah_conversation_set_partial(c, 1);
    ah_request_opts o;
    base_opts(&o);
    cJSON *r = encode(AH_WIRE_OPENAI, c, &o, NULL);
    check_size(r, "messages", 2);
    check_str(r, "messages[1].role", "assistant");
    check_str(r, "messages[1].content", "Old pond, "); /* untouched */
    check_absent(r, "messages[1].tool_calls");
    cJSON_Delete(r);
    ah_conversation_free(c);
}

/* ---- openai responses ------------------------------------------------------------- */

static void responses_basic_shape(void **state)
{
    (void)state;
    ah_conversation *c = ah_conversation_new();
    ah_conversation_set_system(c, "Be brief.");
    ah_conversation_add_user_text(c, "Hi");
    ah_request_opts o;
    base_opts(&o);
    o.stream = 1;
    cJSON *r = encode(AH_WIRE_RESPONSES, c, &o, NULL);
    check_str(r, "model", "model-x");
    check_str(r, "instructions", "Be brief."); /* system prompt */
    check_size(r, "input", 1);
    check_str(r, "input[0].type", "message");
    check_str(r, "input[0].role", "user");
    check_str(r, "input[0].content[0].type", "input_text");
    check_str(r, "input[0].content[0].text", "Hi");
    check_num(r, "max_output_tokens", 1024);
    check_bool(r, "store", 0); /* stateless: the history travels in input */
    check_bool(r, "stream", 1);
    check_absent(r, "stream_options");
    check_absent(r, "messages");
    check_absent(r, "max_tokens");
    check_absent(r, "include");
    check_absent(r, "reasoning");
    cJSON_Delete(r);

    o.reasoning_effort = "high";
    o.include_encrypted_reasoning = 1;
    o.has_temperature = 1;
    o.temperature = 1.5;
    r = encode(AH_WIRE_RESPONSES, c, &o, NULL);
    check_str(r, "reasoning.effort", "high");
    check_size(r, "include", 1);
    check_str(r, "include[0]", "reasoning.encrypted_content");
    check_num(r, "temperature", 1.5);
    cJSON_Delete(r);

    const char *stops[] = {"STOP"};
    o.stop = stops;
    o.n_stop = 1;
    encode_fails(AH_WIRE_RESPONSES, c, &o, AH_ERR_INVALID, "opts.stop");
    ah_conversation_free(c);
}

static void responses_tool_round(void **state)
{
    (void)state;
    ah_conversation *c = tool_round();
    ah_request_opts o;
    base_opts(&o);
    cJSON *r = encode(AH_WIRE_RESPONSES, c, &o, NULL);
    /* user msg, reasoning, assistant msg, call, call, output, output */
    check_size(r, "input", 7);
    check_str(r, "input[1].type", "reasoning");
    check_str(r, "input[1].id", "rs_9");
    check_str(r, "input[1].encrypted_content", "ENC==");
    check_str(r, "input[1].summary[0].type", "summary_text");
    check_str(r, "input[1].summary[0].text", "Use both tools.");
    check_absent(r, "input[1].signature");
    check_str(r, "input[2].type", "message");
    check_str(r, "input[2].role", "assistant");
    check_str(r, "input[2].content[0].type", "output_text");
    check_str(r, "input[2].content[0].text", "Let me compute.");
    check_size(r, "input[2].content[0].annotations", 0);
    check_str(r, "input[3].type", "function_call");
    check_str(r, "input[3].call_id", "call_1");
    check_str(r, "input[3].name", "add");
    check_str(r, "input[3].arguments", "{\"a\": 2,\n \"b\": 3}"); /* a STRING */
    check_str(r, "input[4].arguments", "{}");
    check_str(r, "input[5].type", "function_call_output");
    check_str(r, "input[5].call_id", "call_1");
    check_str(r, "input[5].output", "5");
    check_str(r, "input[6].call_id", "call_2");
    check_str(r, "input[6].output", "mul failed");
    cJSON_Delete(r);
    ah_conversation_free(c);
}

static void responses_reasoning_needs_encrypted_content(void **state)
{
    (void)state;
    ah_conversation *c = ah_conversation_new();
    ah_conversation_add_user_text(c, "q");
    ah_conversation_begin_assistant(c);
    ah_conversation_add_reasoning(c, "anthropic thinking", "SIG", NULL, NULL, 0);
    ah_conversation_add_reasoning(c, "", NULL, NULL, "ANTHROPIC-REDACTED", 1);
    ah_conversation_add_reasoning(c, "", NULL, "rs_only_id", NULL, 0);
    ah_conversation_add_reasoning(c, "", NULL, "rs_2", "ENC2", 0);
    ah_conversation_add_text(c, "a", 1);
    ah_conversation_add_text(c, "b", 1);
    ah_request_opts o;
    base_opts(&o);
    char *body = NULL;
    cJSON *r = encode(AH_WIRE_RESPONSES, c, &o, &body);
    check_size(r, "input", 3);
    check_str(r, "input[1].type", "reasoning");
    check_str(r, "input[1].id", "rs_2");
    check_size(r, "input[1].summary", 0); /* required, empty when there is no text */
    check_str(r, "input[2].type", "message");
    check_size(r, "input[2].content", 2); /* consecutive texts share one message item */
    check_str(r, "input[2].content[1].text", "b");
    assert_null(strstr(body, "ANTHROPIC-REDACTED"));
    assert_null(strstr(body, "rs_only_id"));
    assert_null(strstr(body, "anthropic thinking"));
    free(body);
    cJSON_Delete(r);
    ah_conversation_free(c);
}

static void responses_tools_and_tool_choice(void **state)
{
    (void)state;
    ah_conversation *c = ah_conversation_new();
    ah_conversation_add_user_text(c, "q");
    ah_tool_def tools[] = {{"add", "Add two integers.", ADD_SCHEMA}, {"mul", NULL, NULL}};
    ah_request_opts o;
    base_opts(&o);
    o.tools = tools;
    o.n_tools = 2;
    cJSON *r = encode(AH_WIRE_RESPONSES, c, &o, NULL);
    check_str(r, "tools[0].type", "function"); /* flat, no nested "function" */
    check_str(r, "tools[0].name", "add");
    check_str(r, "tools[0].description", "Add two integers.");
    check_str(r, "tools[0].parameters.required[0]", "a");
    check_bool(r, "tools[0].strict", 0);
    check_absent(r, "tools[0].function");
    check_absent(r, "tools[1].description");
    cJSON_Delete(r);
    const struct {
        ah_tool_choice tc;
        const char *s;
    } forms[] = {{AH_TOOL_CHOICE_AUTO, "auto"},
                 {AH_TOOL_CHOICE_NONE, "none"},
                 {AH_TOOL_CHOICE_REQUIRED, "required"}};
    for (size_t i = 0; i < 3; i++) {
        o.tool_choice = forms[i].tc;
        r = encode(AH_WIRE_RESPONSES, c, &o, NULL);
        check_str(r, "tool_choice", forms[i].s);
        cJSON_Delete(r);
    }
    o.tool_choice = AH_TOOL_CHOICE_NAMED;
    o.tool_choice_name = "mul";
    r = encode(AH_WIRE_RESPONSES, c, &o, NULL);
    check_str(r, "tool_choice.type", "function");
    check_str(r, "tool_choice.name", "mul");
    check_absent(r, "tool_choice.function");
    cJSON_Delete(r);
    ah_conversation_free(c);
}

static void responses_trailing_partial_is_last_item(void **state)
{
    (void)state;
    ah_conversation *c = ah_conversation_new();
    ah_conversation_add_user_text(c, "Write a haiku");
    ah_conversation_begin_assistant(c);
    ah_conversation_add_text(c, "Old pond, ", 10);
    ah_conversation_set_partial(c, 1);
    ah_request_opts o;
    base_opts(&o);
    cJSON *r = encode(AH_WIRE_RESPONSES, c, &o, NULL);
    check_size(r, "input", 2);
    check_str(r, "input[1].type", "message");
    check_str(r, "input[1].role", "assistant");
    check_str(r, "input[1].content[0].type", "output_text");
    check_str(r, "input[1].content[0].text", "Old pond, ");
    cJSON_Delete(r);
    ah_conversation_free(c);
}

/* ---- errors and options ----------------------------------------------------------- */

static void bad_schema_names_the_tool(void **state)
{
    (void)state;
    ah_conversation *c = ah_conversation_new();
    ah_conversation_add_user_text(c, "q");
    ah_tool_def bad_json[] = {{"ok", NULL, NULL},
                              {"weather", NULL, "{\"type\":\"object\",}"}};
    ah_tool_def not_object[] = {{"lookup", NULL, "[1,2]"}};
    ah_request_opts o;
    base_opts(&o);
    for (int w = 0; w < AH_WIRE_COUNT_; w++) {
        o.tools = bad_json;
        o.n_tools = 2;
        encode_fails((ah_wire)w, c, &o, AH_ERR_INVALID,
                     "tool 'weather': schema_json is not valid JSON at offset");
        o.tools = not_object;
        o.n_tools = 1;
        encode_fails((ah_wire)w, c, &o, AH_ERR_INVALID,
                     "tool 'lookup': schema_json is not a JSON object");
    }
    ah_conversation_free(c);
}

static void bad_arguments_name_the_block(void **state)
{
    (void)state;
    ah_conversation *c = ah_conversation_new();
    ah_conversation_add_user_text(c, "q");
    ah_conversation_begin_assistant(c);
    ah_conversation_add_text(c, "x", 1);
    ah_conversation_add_tool_use(c, "call_7", "transfer", "{\"secret_token\": ");
    ah_conversation_add_tool_result(c, "call_7", "r", 0);
    ah_request_opts o;
    base_opts(&o);
    for (int w = 0; w < AH_WIRE_COUNT_; w++) {
        char err[256] = "";
        char *body = NULL;
        assert_int_equal(
            ah_request_encode((ah_wire)w, c, &o, &body, NULL, err, sizeof err),
            AH_ERR_INVALID);
        assert_null(body);
        assert_non_null(
            strstr(err, "message 1 block 1 (tool_use 'transfer' id 'call_7')"));
        assert_non_null(strstr(err, "not valid JSON"));
        assert_null(strstr(err, "secret_token")); /* content never lands in the message */
    }
    ah_conversation_free(c);

    /* Valid JSON that is not an object (what a model may send: the worker answers the
     * call with a tool error) goes out as {}, in every format: no provider takes an
     * array, a number, a string or null back as a call's arguments. History keeps what
     * the model sent. */
    static const char *const not_objects[] = {"[1]", "42", "\"s\"", "null", "true"};
    for (size_t k = 0; k < sizeof not_objects / sizeof not_objects[0]; k++) {
        c = ah_conversation_new();
        ah_conversation_begin_assistant(c);
        ah_conversation_add_tool_use(c, "c", "f", not_objects[k]);
        for (int w = 0; w < AH_WIRE_COUNT_; w++) {
            char *body = NULL;
            cJSON *root = encode((ah_wire)w, c, &o, &body);
            const char *want = w == AH_WIRE_ANTHROPIC ? "\"input\":{}"
                               : w == AH_WIRE_GEMINI  ? "\"args\":{}"
                                                      : "\"arguments\":\"{}\"";
            if (!strstr(body, want))
                fail_msg("%s, arguments %s: %s has no %s", ah_wire_name((ah_wire)w),
                         not_objects[k], body, want);
            free(body);
            cJSON_Delete(root);
        }
        assert_string_equal(ah_conversation_block(c, 0, 0)->arguments, not_objects[k]);
        ah_conversation_free(c);
    }
}

static void invalid_options_are_named(void **state)
{
    (void)state;
    ah_conversation *c = ah_conversation_new();
    ah_conversation_add_user_text(c, "q");
    ah_request_opts o;
    const char *empty_stop[] = {""};
    ah_tool_def dup[] = {{"a", NULL, NULL}, {"a", NULL, NULL}};
    for (int w = 0; w < AH_WIRE_COUNT_; w++) {
        base_opts(&o);
        o.model = NULL;
        encode_fails((ah_wire)w, c, &o, AH_ERR_INVALID, "opts.model");
        base_opts(&o);
        o.tool_choice = AH_TOOL_CHOICE_REQUIRED;
        encode_fails((ah_wire)w, c, &o, AH_ERR_INVALID, "no tools");
        base_opts(&o);
        o.tools = TOOLS;
        o.n_tools = 2;
        o.tool_choice = AH_TOOL_CHOICE_NAMED;
        o.tool_choice_name = "div";
        encode_fails((ah_wire)w, c, &o, AH_ERR_INVALID, "'div' is not a declared tool");
        base_opts(&o);
        o.tools = dup;
        o.n_tools = 2;
        encode_fails((ah_wire)w, c, &o, AH_ERR_INVALID, "tool 'a' is declared twice");
        base_opts(&o);
        o.stop = empty_stop;
        o.n_stop = 1;
        encode_fails((ah_wire)w, c, &o, AH_ERR_INVALID,
                     w == AH_WIRE_RESPONSES ? "opts.stop" : "opts.stop[0] is empty");
        base_opts(&o);
        o.has_temperature = 1;
        o.temperature = NAN;
        encode_fails((ah_wire)w, c, &o, AH_ERR_INVALID, "opts.temperature");
        base_opts(&o);
        o.extra_json = "{\"a\":";
        encode_fails((ah_wire)w, c, &o, AH_ERR_INVALID,
                     "opts.extra_json is not valid JSON");
        o.extra_json = "[]";
        encode_fails((ah_wire)w, c, &o, AH_ERR_INVALID,
                     "opts.extra_json is not a JSON object");
    }
    base_opts(&o);
    encode_fails((ah_wire)7, c, &o, AH_ERR_INVALID, "unknown wire format");
    char *body = NULL;
    assert_int_equal(ah_request_encode(AH_WIRE_OPENAI, NULL, &o, &body, NULL, NULL, 0),
                     AH_ERR_INVALID);
    assert_int_equal(ah_request_encode(AH_WIRE_OPENAI, c, &o, NULL, NULL, NULL, 0),
                     AH_ERR_INVALID);
    ah_conversation_free(c);
}

static void extra_json_adds_and_replaces_members(void **state)
{
    (void)state;
    ah_conversation *c = ah_conversation_new();
    ah_conversation_add_user_text(c, "q");
    ah_request_opts o;
    base_opts(&o);
    o.thinking_budget = 1024;
    o.extra_json = "{\"thinking\":{\"type\":\"adaptive\"},\"max_tokens\":64,"
                   "\"metadata\":{\"user_id\":\"u1\"}}";
    cJSON *r = encode(AH_WIRE_ANTHROPIC, c, &o, NULL);
    check_str(r, "thinking.type", "adaptive"); /* replaced */
    check_absent(r, "thinking.budget_tokens");
    check_num(r, "max_tokens", 64);         /* replaced */
    check_str(r, "metadata.user_id", "u1"); /* added */
    assert_int_equal(cJSON_GetArraySize(r),
                     5); /* model max_tokens messages thinking metadata */
    cJSON_Delete(r);

    o.extra_json = "{\"store\":true}";
    r = encode(AH_WIRE_RESPONSES, c, &o, NULL);
    check_bool(r, "store", 1);
    cJSON_Delete(r);
    ah_conversation_free(c);
}

static void opts_are_only_borrowed(void **state)
{
    (void)state;
    ah_conversation *c = ah_conversation_new();
    ah_conversation_add_user_text(c, "q");
    ah_tool_def *t = calloc(1, sizeof *t);
    t->name = strdup("heap_tool");
    t->schema_json = strdup("{\"type\":\"object\"}");
    ah_request_opts o;
    base_opts(&o);
    char *model = strdup("heap-model");
    o.model = model;
    o.tools = t;
    o.n_tools = 1;
    char *body = NULL;
    assert_int_equal(ah_request_encode(AH_WIRE_OPENAI, c, &o, &body, NULL, NULL, 0),
                     AH_OK);
    free((void *)t->name);
    free((void *)t->schema_json);
    free(t);
    free(model);
    ah_conversation_free(c);
    cJSON *r = cJSON_Parse(body); /* the body owns everything it holds */
    check_str(r, "model", "heap-model");
    check_str(r, "tools[0].function.name", "heap_tool");
    cJSON_Delete(r);
    free(body);
}

/* ---- headers ---------------------------------------------------------------------- */

static const char *header(const ah_header_list *l, const char *name)
{
    for (size_t i = 0; i < l->count; i++)
        if (strcmp(l->items[i].name, name) == 0)
            return l->items[i].value;
    return NULL;
}

static size_t headers_holding(const ah_header_list *l, const char *needle)
{
    size_t n = 0;
    for (size_t i = 0; i < l->count; i++)
        n +=
            strstr(l->items[i].value, needle) != NULL || strstr(l->items[i].name, needle);
    return n;
}

static void anthropic_headers(void **state)
{
    (void)state;
    ah_header_list l;
    assert_int_equal(ah_request_headers(AH_WIRE_ANTHROPIC, "sk-ant-KEY123", 1, &l),
                     AH_OK);
    assert_string_equal(header(&l, "Content-Type"), "application/json");
    assert_string_equal(header(&l, "Accept"), "text/event-stream");
    assert_string_equal(header(&l, "anthropic-version"), "2023-06-01");
    assert_string_equal(header(&l, "x-api-key"), "sk-ant-KEY123");
    assert_null(header(&l, "Authorization"));
    assert_int_equal(headers_holding(&l, "sk-ant-KEY123"), 1);
    ah_header_list_free(&l);
    ah_header_list_free(&l); /* idempotent */

    assert_int_equal(ah_request_headers(AH_WIRE_ANTHROPIC, NULL, 0, &l), AH_OK);
    assert_string_equal(header(&l, "Accept"), "application/json");
    assert_null(header(&l, "x-api-key"));
    assert_string_equal(header(&l, "anthropic-version"), "2023-06-01");
    ah_header_list_free(&l);
}

static void openai_headers(void **state)
{
    (void)state;
    for (int w = AH_WIRE_OPENAI; w <= AH_WIRE_RESPONSES; w++) {
        ah_header_list l;
        assert_int_equal(ah_request_headers((ah_wire)w, "sk-KEY456", 1, &l), AH_OK);
        assert_string_equal(header(&l, "Content-Type"), "application/json");
        assert_string_equal(header(&l, "Accept"), "text/event-stream");
        assert_string_equal(header(&l, "Authorization"), "Bearer sk-KEY456");
        assert_null(header(&l, "x-api-key"));
        assert_null(header(&l, "anthropic-version"));
        assert_int_equal(headers_holding(&l, "sk-KEY456"), 1);
        ah_header_list_free(&l);

        assert_int_equal(ah_request_headers((ah_wire)w, "", 0, &l), AH_OK);
        assert_null(header(&l, "Authorization"));
        assert_string_equal(header(&l, "Accept"), "application/json");
        ah_header_list_free(&l);
    }
}

static void header_injection_is_refused(void **state)
{
    (void)state;
    ah_header_list l;
    assert_int_equal(ah_request_headers(AH_WIRE_OPENAI, "key\r\nX-Evil: 1", 0, &l),
                     AH_ERR_INVALID);
    assert_int_equal(l.count, 0);
    assert_null(l.storage_);
    assert_int_equal(ah_request_headers(AH_WIRE_ANTHROPIC, "key\n", 0, &l),
                     AH_ERR_INVALID);
    assert_int_equal(ah_request_headers((ah_wire)9, "key", 0, &l), AH_ERR_INVALID);
    assert_int_equal(ah_request_headers(AH_WIRE_ANTHROPIC, "key", 0, NULL),
                     AH_ERR_INVALID);
}

static void key_never_reaches_the_body(void **state)
{
    (void)state;
    /* The encoder has no key parameter at all; make sure a key-looking string set only
     * in headers does not appear in any body built alongside it. */
    ah_conversation *c = tool_round();
    ah_request_opts o;
    base_opts(&o);
    for (int w = 0; w < AH_WIRE_COUNT_; w++) {
        ah_header_list l;
        assert_int_equal(ah_request_headers((ah_wire)w, "sk-SECRET-789", 1, &l), AH_OK);
        char *body = NULL;
        assert_int_equal(ah_request_encode((ah_wire)w, c, &o, &body, NULL, NULL, 0),
                         AH_OK);
        assert_null(strstr(body, "sk-SECRET-789"));
        free(body);
        ah_header_list_free(&l);
    }
    ah_conversation_free(c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(anthropic_basic_shape),
        cmocka_unit_test(anthropic_tool_round),
        cmocka_unit_test(anthropic_tool_results_come_before_text),
        cmocka_unit_test(anthropic_reasoning_variants),
        cmocka_unit_test(anthropic_tools_and_tool_choice),
        cmocka_unit_test(anthropic_trailing_partial_is_a_trimmed_prefill),
        cmocka_unit_test(anthropic_skips_empty_blocks_and_messages),
        cmocka_unit_test(chat_basic_shape),
        cmocka_unit_test(chat_tool_round),
        cmocka_unit_test(chat_message_details),
        cmocka_unit_test(chat_tools_and_tool_choice),
        cmocka_unit_test(chat_trailing_partial_is_sent_as_said),
        cmocka_unit_test(responses_basic_shape),
        cmocka_unit_test(responses_tool_round),
        cmocka_unit_test(responses_reasoning_needs_encrypted_content),
        cmocka_unit_test(responses_tools_and_tool_choice),
        cmocka_unit_test(responses_trailing_partial_is_last_item),
        cmocka_unit_test(bad_schema_names_the_tool),
        cmocka_unit_test(bad_arguments_name_the_block),
        cmocka_unit_test(invalid_options_are_named),
        cmocka_unit_test(extra_json_adds_and_replaces_members),
        cmocka_unit_test(opts_are_only_borrowed),
        cmocka_unit_test(anthropic_headers),
        cmocka_unit_test(openai_headers),
        cmocka_unit_test(header_injection_is_refused),
        cmocka_unit_test(key_never_reaches_the_body),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
