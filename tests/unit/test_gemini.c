/* test_gemini.c - the Gemini wire format: the request body (contents, functionCall /
 * functionResponse by name, thought signatures back on their part, images, config), the
 * stream decoder (chunks split anywhere, usage and cache, finish reasons, refusals), the
 * in-stream error as a data: line and as the raw JSON tail after the events, RetryInfo
 * as the retry hint of an HTTP error, the request URL and the capability rows. */
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
#include "agenthost/capabilities.h"
#include "agenthost/conversation.h"
#include "agenthost/timeline.h"
#include "agenthost/worker.h"
#include "../../core/internal.h"

#define H "\"modelVersion\":\"gemini-2.5-flash\",\"responseId\":\"r1\""
#define U                                                                                 \
    "\"usageMetadata\":{\"promptTokenCount\":9,\"candidatesTokenCount\":4,"               \
    "\"thoughtsTokenCount\":3,\"totalTokenCount\":16,\"cachedContentTokenCount\":2}"
#define CHUNK(parts, extra)                                                               \
    "data: {\"candidates\":[{\"content\":{\"parts\":[" parts "],\"role\":\"model\"}" extra \
    ",\"index\":0}]," H "}\r\n\r\n"

/* Decode `s` fed in pieces of `step` bytes (0: whole); returns finish's status. */
static ah_status decode(const char *s, size_t step, ah_timeline *tl, ah_error *err)
{
    ah_decoder *d = NULL;
    ah_timeline_reset(tl);
    assert_int_equal(ah_decoder_new(AH_WIRE_GEMINI, tl, NULL, NULL, &d, NULL, 0), AH_OK);
    size_t n = strlen(s);
    for (size_t i = 0; i < n;) {
        size_t k = step && n - i > step ? step : n - i;
        ah_decoder_feed(d, s + i, k);
        i += k;
    }
    ah_status st = ah_decoder_finish(d, err);
    ah_decoder_free(d);
    return st;
}

static void text_and_usage_in_any_split(void **state)
{
    (void)state;
    static const char s[] =
        CHUNK("{\"text\":\"Hel\"}", "") CHUNK("{\"text\":\"lo\"}", "")
            "data: {\"candidates\":[{\"content\":{\"parts\":[{\"text\":\"!\"}],\"role\":"
            "\"model\"},\"finishReason\":\"STOP\",\"index\":0}]," U "," H "}\r\n\r\n";
    ah_timeline *tl = ah_timeline_new();
    ah_error e;
    for (size_t step = 0; step < 40; step += 7) {
        assert_int_equal(decode(s, step, tl, &e), AH_OK);
        assert_int_equal(ah_timeline_count(tl), 1);
        const ah_block *b = ah_timeline_block(tl, 0);
        assert_int_equal(b->kind, AH_BLOCK_TEXT);
        assert_string_equal(b->text, "Hello!");
        assert_true(b->closed);
        assert_string_equal(ah_timeline_stop(tl), "end_turn");
        assert_int_equal(ah_timeline_input_tokens(tl), 9);
        assert_int_equal(ah_timeline_output_tokens(tl), 7); /* thoughts are output */
        assert_int_equal(ah_timeline_cache_read_tokens(tl), 2);
        assert_int_equal(ah_timeline_cache_write_tokens(tl), 0);
    }
    ah_timeline_free(tl);
}

static void thought_call_and_signature(void **state)
{
    (void)state;
    static const char s[] =
        CHUNK("{\"thought\":true,\"text\":\"hmm\"}", "")
            CHUNK("{\"text\":\"Look.\"},{\"functionCall\":{\"name\":\"lookup\",\"args\":"
                  "{\"word\":\"x\"}},\"thoughtSignature\":\"c2ln\"}",
                  "")
                CHUNK("{\"functionCall\":{\"id\":\"call_7\",\"name\":\"lookup\"}}",
                      ",\"finishReason\":\"STOP\"");
    ah_timeline *tl = ah_timeline_new();
    ah_error e;
    assert_int_equal(decode(s, 0, tl, &e), AH_OK);
    assert_int_equal(ah_timeline_count(tl), 5);
    const ah_block *b = ah_timeline_block(tl, 0);
    assert_int_equal(b->kind, AH_BLOCK_REASONING);
    assert_string_equal(b->text, "hmm");
    assert_int_equal(ah_timeline_block(tl, 1)->kind, AH_BLOCK_TEXT);
    b = ah_timeline_block(tl, 2); /* the call's signature, just before it */
    assert_int_equal(b->kind, AH_BLOCK_REASONING);
    assert_string_equal(b->text, "");
    assert_string_equal(b->signature, "c2ln");
    b = ah_timeline_block(tl, 3);
    assert_int_equal(b->kind, AH_BLOCK_TOOL_USE);
    assert_string_equal(b->name, "lookup");
    assert_string_equal(b->id, "gc_r1_0"); /* Gemini 2.x sends no id: one is made */
    assert_string_equal(b->arguments, "{\"word\":\"x\"}");
    b = ah_timeline_block(tl, 4);
    assert_string_equal(b->id, "call_7");
    assert_string_equal(b->arguments, "{}");
    assert_string_equal(ah_timeline_stop(tl), "tool_use");
    ah_timeline_free(tl);
}

static void finish_reasons(void **state)
{
    (void)state;
    ah_timeline *tl = ah_timeline_new();
    ah_error e;
    assert_int_equal(decode(CHUNK("{\"text\":\"Lo\"}", ",\"finishReason\":\"MAX_TOKENS\""), 0,
                            tl, &e),
                     AH_OK);
    assert_string_equal(ah_timeline_stop(tl), "max_tokens");
    assert_int_equal(
        decode(CHUNK("{\"text\":\"\"}", ",\"finishReason\":\"SAFETY\",\"safetyRatings\":[{"
                                        "\"category\":\"HARM_CATEGORY_HARASSMENT\","
                                        "\"blocked\":true}]"),
               0, tl, &e),
        AH_OK);
    assert_string_equal(ah_timeline_stop(tl), "refusal");
    assert_string_equal(ah_timeline_stop_category(tl), "HARM_CATEGORY_HARASSMENT");
    static const char *const refusals[] = {"RECITATION", "PROHIBITED_CONTENT"};
    for (size_t i = 0; i < 2; i++) {
        char s[512];
        snprintf(s, sizeof s,
                 "data: {\"candidates\":[{\"content\":{\"parts\":[],\"role\":\"model\"},"
                 "\"finishReason\":\"%s\",\"index\":0}]}\r\n\r\n",
                 refusals[i]);
        assert_int_equal(decode(s, 0, tl, &e), AH_OK);
        assert_string_equal(ah_timeline_stop(tl), "refusal");
    }
    /* the prompt refused: no candidate at all */
    assert_int_equal(decode("data: {\"promptFeedback\":{\"blockReason\":\"PROHIBITED_CONTENT\"}"
                            "," U "}\r\n\r\n",
                            0, tl, &e),
                     AH_OK);
    assert_string_equal(ah_timeline_stop(tl), "refusal");
    /* no finishReason: cut */
    assert_int_equal(decode(CHUNK("{\"text\":\"Hi\"}", ""), 0, tl, &e), AH_ERR_TRUNCATED);
    assert_non_null(strstr(e.message, "finishReason"));
    ah_timeline_free(tl);
}

static void errors_as_a_data_line_and_as_a_raw_tail(void **state)
{
    (void)state;
    ah_timeline *tl = ah_timeline_new();
    ah_error e;
    static const char line[] =
        CHUNK("{\"text\":\"Hi\"}", "") "data: {\"error\":{\"code\":503,\"message\":\"The "
                                       "model is overloaded.\",\"status\":\"UNAVAILABLE\"}}"
                                       "\r\n\r\n";
    static const char tail[] = CHUNK("{\"text\":\"Hi\"}", "") "[{\n  \"error\": {\n"
                                                              "    \"code\": 500,\n"
                                                              "    \"message\": \"An internal "
                                                              "error has occurred.\",\n"
                                                              "    \"status\": \"INTERNAL\"\n"
                                                              "  }\n}\n]";
    for (size_t step = 0; step < 30; step += 3) {
        assert_int_equal(decode(line, step, tl, &e), AH_ERR_PROVIDER);
        assert_string_equal(e.provider_type, "UNAVAILABLE");
        assert_non_null(strstr(e.message, "overloaded"));
        assert_int_equal(decode(tail, step, tl, &e), AH_ERR_PROVIDER);
        assert_string_equal(e.provider_type, "INTERNAL");
        assert_non_null(strstr(e.message, "internal error"));
        /* what came before stays: the text block is closed by nothing, so it is open */
        assert_string_equal(ah_timeline_block(tl, 0)->text, "Hi");
    }
    /* a cut mid-event is a cut, not an error */
    assert_int_equal(decode(CHUNK("{\"text\":\"Hi\"}", "") "data: {\"candid", 0, tl, &e),
                     AH_ERR_TRUNCATED);
    ah_timeline_free(tl);
}

static void retry_info_is_the_hint(void **state)
{
    (void)state;
    static const char body[] =
        "{\"error\":{\"code\":429,\"message\":\"You exceeded your current quota.\","
        "\"status\":\"RESOURCE_EXHAUSTED\",\"details\":[{\"@type\":\"type.googleapis.com/"
        "google.rpc.Help\"},{\"@type\":\"type.googleapis.com/google.rpc.RetryInfo\","
        "\"retryDelay\":\"17.5s\"}]}}";
    ah_error e;
    ah_error_from_http(&e, 429, NULL, 0, body, strlen(body), 0, NULL);
    assert_int_equal(e.retry_after_ms, 17500);
    assert_int_equal(e.retry_after_source, AH_HINT_RETRY_INFO);
    assert_string_equal(e.provider_type, "RESOURCE_EXHAUSTED");
    assert_true(ah_error_is_retryable(&e));
    assert_string_equal(ah_hint_source_name(AH_HINT_RETRY_INFO), "retry-info");
    /* a header hint comes first */
    ah_header h = {"retry-after", "3"};
    ah_error_from_http(&e, 429, &h, 1, body, strlen(body), 0, NULL);
    assert_int_equal(e.retry_after_ms, 3000);
    /* in a one-element array, as some gateways wrap it */
    char arr[sizeof body + 2];
    snprintf(arr, sizeof arr, "[%s]", body);
    ah_error_from_http(&e, 503, NULL, 0, arr, strlen(arr), 0, NULL);
    assert_int_equal(e.retry_after_ms, 17500);
}

static void request_body(void **state)
{
    (void)state;
    ah_conversation *c = ah_conversation_new();
    ah_conversation_set_system(c, "Be brief.");
    ah_msg_block img = {.kind = AH_MSG_IMAGE, .media_type = "image/png", .data = "iVBORw0K"};
    ah_msg_block url = {.kind = AH_MSG_DOCUMENT, .media_type = "application/pdf",
                        .url = "https://example.com/a.pdf"};
    ah_msg_block txt = {.kind = AH_MSG_TEXT, .text = "Look these up"};
    ah_msg_block blocks[] = {txt, img, url};
    assert_int_equal(ah_conversation_add_user_blocks(c, blocks, 3, NULL, 0), AH_OK);
    ah_conversation_begin_assistant(c);
    ah_conversation_add_reasoning(c, "", "c2ln", NULL, NULL, 0);
    ah_conversation_add_tool_use(c, "gc_r1_0", "lookup", "{\"word\":\"x\"}");
    ah_conversation_add_tool_use(c, "call_7", "lookup", "{}");
    ah_conversation_add_tool_result(c, "gc_r1_0", "found", 0);
    ah_conversation_add_tool_result(c, "call_7", "nothing", 1);
    static const ah_tool_def tool = {"lookup", "Look a word up",
                                     "{\"type\":\"object\",\"additionalProperties\":false}"};
    ah_request_opts o;
    ah_request_opts_init(&o);
    o.model = "gemini-2.5-flash";
    o.max_tokens = 100;
    o.tools = &tool;
    o.n_tools = 1;
    o.tool_choice = AH_TOOL_CHOICE_NAMED;
    o.tool_choice_name = "lookup";
    o.thinking_budget = 512;
    o.stream = 1;
    char *body = NULL, err[200];
    assert_int_equal(ah_request_encode(AH_WIRE_GEMINI, c, &o, &body, NULL, err, sizeof err),
                     AH_OK);
    static const char want[] =
        "{\"contents\":[{\"role\":\"user\",\"parts\":[{\"text\":\"Look these up\"},"
        "{\"inlineData\":{\"mimeType\":\"image/png\",\"data\":\"iVBORw0K\"}},"
        "{\"fileData\":{\"mimeType\":\"application/pdf\",\"fileUri\":"
        "\"https://example.com/a.pdf\"}}]},"
        "{\"role\":\"model\",\"parts\":[{\"functionCall\":{\"name\":\"lookup\",\"args\":"
        "{\"word\":\"x\"}},\"thoughtSignature\":\"c2ln\"},{\"functionCall\":{\"name\":"
        "\"lookup\",\"args\":{},\"id\":\"call_7\"}}]},"
        "{\"role\":\"user\",\"parts\":[{\"functionResponse\":{\"name\":\"lookup\","
        "\"response\":{\"result\":\"found\"}}},{\"functionResponse\":{\"name\":\"lookup\","
        "\"id\":\"call_7\",\"response\":{\"error\":\"nothing\"}}}]}],"
        "\"systemInstruction\":{\"parts\":[{\"text\":\"Be brief.\"}]},"
        "\"tools\":[{\"functionDeclarations\":[{\"name\":\"lookup\",\"description\":"
        "\"Look a word up\",\"parametersJsonSchema\":{\"type\":\"object\","
        "\"additionalProperties\":false}}]}],"
        "\"toolConfig\":{\"functionCallingConfig\":{\"mode\":\"ANY\","
        "\"allowedFunctionNames\":[\"lookup\"]}},"
        "\"generationConfig\":{\"maxOutputTokens\":100,\"thinkingConfig\":"
        "{\"includeThoughts\":true,\"thinkingBudget\":512}}}";
    assert_string_equal(body, want);
    free(body);
    /* a result for a call no earlier message made: named */
    ah_conversation *bad = ah_conversation_new();
    ah_conversation_add_tool_result(bad, "nope", "x", 0);
    o.tools = NULL;
    o.n_tools = 0;
    o.tool_choice = AH_TOOL_CHOICE_DEFAULT;
    assert_int_equal(ah_request_encode(AH_WIRE_GEMINI, bad, &o, &body, NULL, err, sizeof err),
                     AH_ERR_INVALID);
    assert_non_null(strstr(err, "'nope'"));
    ah_conversation_free(bad);
    ah_conversation_free(c);
}

static void url_and_key(void **state)
{
    (void)state;
    char *p = ah__wire_request_path(AH_WIRE_GEMINI, "gemini-2.5-flash");
    assert_string_equal(p, "/v1beta/models/gemini-2.5-flash:streamGenerateContent");
    free(p);
    p = ah__wire_request_path(AH_WIRE_GEMINI, "tunedModels/my model");
    assert_string_equal(p, "/v1beta/models/tunedModels%2Fmy%20model:streamGenerateContent");
    free(p);
    char *q = ah__wire_request_query(AH_WIRE_GEMINI, "x=1");
    assert_string_equal(q, "alt=sse&x=1");
    free(q);
    q = ah__wire_request_query(AH_WIRE_ANTHROPIC, "x=1");
    assert_string_equal(q, "x=1");
    free(q);
    ah_client_config cfg = {.wire = AH_WIRE_GEMINI, .model = "gemini-2.5-flash",
                            .api_key = "k"};
    static const char *const bases[] = {"https://generativelanguage.googleapis.com",
                                        "https://generativelanguage.googleapis.com/v1beta/"};
    for (size_t i = 0; i < 2; i++) {
        cfg.base_url = bases[i];
        ah_client *cl = NULL;
        char err[200];
        assert_int_equal(ah_client_new(&cfg, &cl, err, sizeof err), AH_OK);
        assert_string_equal(ah_client_url(cl),
                            "https://generativelanguage.googleapis.com/v1beta/models/"
                            "gemini-2.5-flash:streamGenerateContent?alt=sse");
        ah_client_free(cl);
    }
    ah_header_list hl;
    assert_int_equal(ah_request_headers(AH_WIRE_GEMINI, "key-1", 1, &hl), AH_OK);
    int found = 0;
    for (size_t i = 0; i < hl.count; i++)
        found |= strcmp(hl.items[i].name, "x-goog-api-key") == 0 &&
                 strcmp(hl.items[i].value, "key-1") == 0;
    assert_true(found);
    ah_header_list_free(&hl);
    assert_string_equal(ah_wire_key_env(AH_WIRE_GEMINI), "GEMINI_API_KEY");
}

static void capability_rows(void **state)
{
    (void)state;
    static const struct {
        const char *model;
        int prefill;
    } t[] = {
        {"gemini-2.0-flash", 1},       {"gemini-2.5-flash", 1},
        {"gemini-2.5-pro", 1},         {"gemini-3-pro-preview", 1},
        {"gemini-3.1-pro-preview", 1}, {"gemini-3.5-flash", 1},
        {"gemini-3.5-flash-lite", 0},  {"gemini-3.6-flash", 0},
        {"gemini-3.8-flash", 0},       {"models/gemini-4-pro", 0},
        {"gemini-pro-latest", 0},
    };
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) {
        ah_model_caps m = ah_model_capabilities(AH_WIRE_GEMINI, t[i].model, 0);
        if (m.prefill != t[i].prefill)
            fail_msg("%s: prefill %d, want %d (%s)", t[i].model, m.prefill, t[i].prefill,
                     m.rule);
    }
    ah_error e;
    static const char refusal[] =
        "{\"error\":{\"code\":400,\"message\":\"Requests ending with a model turn are "
        "not supported.\",\"status\":\"INVALID_ARGUMENT\"}}";
    ah_error_from_http(&e, 400, NULL, 0, refusal, strlen(refusal), 0, NULL);
    assert_true(ah_error_is_prefill_refusal(&e));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(text_and_usage_in_any_split),
        cmocka_unit_test(thought_call_and_signature),
        cmocka_unit_test(finish_reasons),
        cmocka_unit_test(errors_as_a_data_line_and_as_a_raw_tail),
        cmocka_unit_test(retry_info_is_the_hint),
        cmocka_unit_test(request_body),
        cmocka_unit_test(url_and_key),
        cmocka_unit_test(capability_rows),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
