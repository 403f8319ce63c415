/* test_encode_cache.c - prompt caching and media in the request bodies of the three wire
 * formats (docs/providers-encoding.md, "Prompt caching" and "Images and documents"):
 * where Anthropic's cache_control breakpoints go (never more than 4), prompt_cache_key
 * in the OpenAI formats, and image / document blocks, base64 and URL, per format (Gemini
 * included: inlineData / fileData, a tool result's image inside its functionResponse on
 * Gemini 3). */
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
#include "encode_util.h"

/* Every object holding "cache_control", anywhere in the body. */
static int count_breakpoints(const cJSON *v)
{
    int n = 0;
    const cJSON *it;
    if (cJSON_IsObject(v) && cJSON_GetObjectItemCaseSensitive(v, "cache_control"))
        n++;
    cJSON_ArrayForEach(it, v) n += count_breakpoints(it);
    return n;
}

static const ah_tool_def TOOLS[] = {{"add", "Add.", NULL}, {"mul", NULL, NULL}};

static void opts_init(ah_request_opts *o)
{
    ah_request_opts_init(o);
    o->model = "m";
    o->max_tokens = 100;
    o->cache = 1;
}

/* system + earlier history (user, assistant with thinking + tool call, results,
 * assistant answer) + new user input. */
static ah_conversation *history(int with_system)
{
    ah_conversation *c = ah_conversation_new();
    if (with_system)
        ah_conversation_set_system(c, "You are exact.");
    ah_conversation_add_user_text(c, "2+3?");
    ah_conversation_begin_assistant(c);
    ah_conversation_add_reasoning(c, "add", "SIG", NULL, NULL, 0);
    ah_conversation_add_tool_use(c, "t1", "add", "{\"a\":2,\"b\":3}");
    ah_conversation_add_tool_result(c, "t1", "5", 0);
    ah_conversation_begin_assistant(c);
    ah_conversation_add_reasoning(c, "done", "SIG2", NULL, NULL, 0);
    ah_conversation_add_text(c, "5.", 2);
    ah_conversation_add_user_text(c, "and 4*5?");
    return c;
}

static void anthropic_breakpoints_on_system_and_earlier_history(void **state)
{
    (void)state;
    ah_conversation *c = history(1);
    ah_request_opts o;
    opts_init(&o);
    o.tools = TOOLS;
    o.n_tools = 2;
    o.cache_history = 4; /* messages 0..3 are the earlier history; 4 is the new turn */
    cJSON *r = encode(AH_WIRE_ANTHROPIC, c, &o, NULL);
    /* tools + system: the system in its block form carries it */
    check_str(r, "system[0].type", "text");
    check_str(r, "system[0].text", "You are exact.");
    check_str(r, "system[0].cache_control.type", "ephemeral");
    check_absent(r, "system[0].cache_control.ttl");
    check_absent(r, "tools[1].cache_control");
    /* the last block of message 3 (not its thinking block), nothing on the new turn */
    check_str(r, "messages[3].content[-1].type", "text");
    check_str(r, "messages[3].content[-1].cache_control.type", "ephemeral");
    check_absent(r, "messages[3].content[0].cache_control");
    check_absent(r, "messages[4].content[0].cache_control");
    assert_int_equal(count_breakpoints(r), 2);
    cJSON_Delete(r);

    /* 1h ttl on every breakpoint */
    o.cache_ttl = "1h";
    r = encode(AH_WIRE_ANTHROPIC, c, &o, NULL);
    check_str(r, "system[0].cache_control.ttl", "1h");
    check_str(r, "messages[3].content[-1].cache_control.ttl", "1h");
    cJSON_Delete(r);

    /* the breakpoint on a message of tool results */
    o.cache_ttl = NULL;
    o.cache_history = 3;
    r = encode(AH_WIRE_ANTHROPIC, c, &o, NULL);
    check_str(r, "messages[2].content[0].type", "tool_result");
    check_str(r, "messages[2].content[0].cache_control.type", "ephemeral");
    assert_int_equal(count_breakpoints(r), 2);
    cJSON_Delete(r);

    /* an assistant message of thinking + tool_use: on the tool_use */
    o.cache_history = 2;
    r = encode(AH_WIRE_ANTHROPIC, c, &o, NULL);
    check_str(r, "messages[1].content[1].type", "tool_use");
    check_str(r, "messages[1].content[1].cache_control.type", "ephemeral");
    check_absent(r, "messages[1].content[0].cache_control");
    cJSON_Delete(r);
    ah_conversation_free(c);
}

static void anthropic_first_turn_has_only_tools_and_system(void **state)
{
    (void)state;
    ah_conversation *c = ah_conversation_new();
    ah_conversation_add_user_text(c, "hi");
    ah_request_opts o;
    opts_init(&o);
    o.tools = TOOLS;
    o.n_tools = 2;
    cJSON *r = encode(AH_WIRE_ANTHROPIC, c, &o, NULL);
    /* no system: the last tool carries the breakpoint */
    check_str(r, "tools[1].cache_control.type", "ephemeral");
    check_absent(r, "tools[0].cache_control");
    check_absent(r, "messages[0].content[0].cache_control");
    assert_int_equal(count_breakpoints(r), 1);
    cJSON_Delete(r);

    /* no tools, no system, first turn: nothing to mark */
    o.n_tools = 0;
    o.tools = NULL;
    r = encode(AH_WIRE_ANTHROPIC, c, &o, NULL);
    assert_int_equal(count_breakpoints(r), 0);
    cJSON_Delete(r);

    /* cache off: the system stays a string, no breakpoint */
    ah_conversation_set_system(c, "S");
    o.cache = 0;
    o.tools = TOOLS;
    o.n_tools = 2;
    r = encode(AH_WIRE_ANTHROPIC, c, &o, NULL);
    check_str(r, "system", "S");
    assert_int_equal(count_breakpoints(r), 0);
    cJSON_Delete(r);
    ah_conversation_free(c);
}

/* Whatever the history and options, never more than 4 breakpoints, and never one on a
 * thinking block or on the new turn. */
static void anthropic_never_more_than_four(void **state)
{
    (void)state;
    for (int sys = 0; sys < 2; sys++) {
        ah_conversation *c = history(sys);
        size_t n = ah_conversation_count(c);
        for (size_t h = 0; h <= n; h++) {
            for (int tools = 0; tools < 2; tools++) {
                ah_request_opts o;
                opts_init(&o);
                o.tools = tools ? TOOLS : NULL;
                o.n_tools = tools ? 2 : 0;
                o.cache_history = h;
                cJSON *r = encode(AH_WIRE_ANTHROPIC, c, &o, NULL);
                int bp = count_breakpoints(r);
                assert_true(bp <= AH_CACHE_MAX_BREAKPOINTS);
                assert_int_equal(bp, (sys || tools) + (h > 0));
                const cJSON *m, *b;
                int idx = 0;
                cJSON_ArrayForEach(m, jp(r, "messages"))
                {
                    cJSON_ArrayForEach(b, cJSON_GetObjectItemCaseSensitive(m, "content"))
                    {
                        if (!cJSON_GetObjectItemCaseSensitive(b, "cache_control"))
                            continue;
                        assert_int_equal(idx, (int)h - 1);
                        assert_string_not_equal(
                            cJSON_GetObjectItemCaseSensitive(b, "type")->valuestring,
                            "thinking");
                    }
                    idx++;
                }
                cJSON_Delete(r);
            }
        }
        ah_conversation_free(c);
    }
}

static void openai_formats_send_prompt_cache_key(void **state)
{
    (void)state;
    ah_conversation *c = history(1);
    ah_request_opts o;
    opts_init(&o);
    o.prompt_cache_key = "run_abc";
    o.cache_history = 4;
    ah_wire ws[] = {AH_WIRE_OPENAI, AH_WIRE_RESPONSES};
    for (size_t i = 0; i < 2; i++) {
        cJSON *r = encode(ws[i], c, &o, NULL);
        check_str(r, "prompt_cache_key", "run_abc");
        assert_int_equal(count_breakpoints(r), 0);
        cJSON_Delete(r);
    }
    o.cache = 0;
    for (size_t i = 0; i < 2; i++) {
        cJSON *r = encode(ws[i], c, &o, NULL);
        check_absent(r, "prompt_cache_key");
        cJSON_Delete(r);
    }
    cJSON *r = encode(AH_WIRE_ANTHROPIC, c, &o, NULL);
    check_absent(r, "prompt_cache_key");
    cJSON_Delete(r);
    ah_conversation_free(c);
}

static void cache_options_are_checked(void **state)
{
    (void)state;
    ah_conversation *c = history(0);
    ah_request_opts o;
    opts_init(&o);
    o.cache_ttl = "10m";
    encode_fails(AH_WIRE_ANTHROPIC, c, &o, AH_ERR_INVALID, "opts.cache_ttl '10m'");
    o.cache_ttl = NULL;
    o.prompt_cache_key = "";
    encode_fails(AH_WIRE_OPENAI, c, &o, AH_ERR_INVALID, "opts.prompt_cache_key is empty");
    o.prompt_cache_key = NULL;
    o.cache_history = 99;
    encode_fails(AH_WIRE_RESPONSES, c, &o, AH_ERR_INVALID, "opts.cache_history 99");
    ah_conversation_free(c);
}

/* ---- images and documents ------------------------------------------------------------ */

#define PNG "iVBORw0KGgo="
#define PDF "JVBERi0xLjQ="

static ah_conversation *media_conv(void)
{
    ah_conversation *c = ah_conversation_new();
    ah_msg_block b[5] = {
        {.kind = AH_MSG_TEXT, .text = "What is in these?"},
        {.kind = AH_MSG_IMAGE, .media_type = "image/png", .data = PNG},
        {.kind = AH_MSG_IMAGE, .url = "https://example.com/cat.jpg"},
        {.kind = AH_MSG_DOCUMENT, .media_type = "application/pdf", .data = PDF,
         .name = "report.pdf"},
        {.kind = AH_MSG_IMAGE, .url = "data:image/gif;base64,R0lGOD=="},
    };
    char err[200];
    assert_int_equal(ah_conversation_add_user_blocks(c, b, 5, err, sizeof err), AH_OK);
    return c;
}

static void anthropic_images_and_documents(void **state)
{
    (void)state;
    ah_conversation *c = media_conv();
    ah_request_opts o;
    opts_init(&o);
    o.cache = 0;
    cJSON *r = encode(AH_WIRE_ANTHROPIC, c, &o, NULL);
    check_str(r, "messages[0].content[0].type", "text");
    check_str(r, "messages[0].content[1].type", "image");
    check_str(r, "messages[0].content[1].source.type", "base64");
    check_str(r, "messages[0].content[1].source.media_type", "image/png");
    check_str(r, "messages[0].content[1].source.data", PNG);
    check_str(r, "messages[0].content[2].source.type", "url");
    check_str(r, "messages[0].content[2].source.url", "https://example.com/cat.jpg");
    check_str(r, "messages[0].content[3].type", "document");
    check_str(r, "messages[0].content[3].source.type", "base64");
    check_str(r, "messages[0].content[3].source.media_type", "application/pdf");
    check_str(r, "messages[0].content[3].title", "report.pdf");
    /* a data: URL is sent as its base64 source (the API's url source is http(s)) */
    check_str(r, "messages[0].content[4].source.type", "base64");
    check_str(r, "messages[0].content[4].source.media_type", "image/gif");
    check_str(r, "messages[0].content[4].source.data", "R0lGOD==");
    cJSON_Delete(r);
    ah_conversation_free(c);
}

static void chat_images_and_documents(void **state)
{
    (void)state;
    ah_conversation *c = media_conv();
    ah_request_opts o;
    opts_init(&o);
    cJSON *r = encode(AH_WIRE_OPENAI, c, &o, NULL);
    check_str(r, "messages[0].role", "user");
    check_str(r, "messages[0].content[0].type", "text");
    check_str(r, "messages[0].content[1].type", "image_url");
    check_str(r, "messages[0].content[1].image_url.url", "data:image/png;base64," PNG);
    check_str(r, "messages[0].content[2].image_url.url", "https://example.com/cat.jpg");
    check_str(r, "messages[0].content[3].type", "file");
    check_str(r, "messages[0].content[3].file.filename", "report.pdf");
    check_str(r, "messages[0].content[3].file.file_data", "data:application/pdf;base64," PDF);
    check_str(r, "messages[0].content[4].image_url.url", "data:image/gif;base64,R0lGOD==");
    cJSON_Delete(r);
    ah_conversation_free(c);

    /* Chat takes no document by URL: the error names the block and the field */
    c = ah_conversation_new();
    ah_msg_block d = {.kind = AH_MSG_DOCUMENT, .media_type = "application/pdf",
                      .url = "https://example.com/a.pdf"};
    assert_int_equal(ah_conversation_add_user_blocks(c, &d, 1, NULL, 0), AH_OK);
    encode_fails(AH_WIRE_OPENAI, c, &o, AH_ERR_INVALID, "message 0 block 0 (document): url:");
    /* the other two take it */
    r = encode(AH_WIRE_ANTHROPIC, c, &o, NULL);
    check_str(r, "messages[0].content[0].source.type", "url");
    cJSON_Delete(r);
    r = encode(AH_WIRE_RESPONSES, c, &o, NULL);
    check_str(r, "input[0].content[0].type", "input_file");
    check_str(r, "input[0].content[0].file_url", "https://example.com/a.pdf");
    cJSON_Delete(r);
    ah_conversation_free(c);
}

static void responses_images_and_documents(void **state)
{
    (void)state;
    ah_conversation *c = media_conv();
    ah_request_opts o;
    opts_init(&o);
    cJSON *r = encode(AH_WIRE_RESPONSES, c, &o, NULL);
    check_str(r, "input[0].type", "message");
    check_str(r, "input[0].content[0].type", "input_text");
    check_str(r, "input[0].content[1].type", "input_image");
    check_str(r, "input[0].content[1].image_url", "data:image/png;base64," PNG);
    check_str(r, "input[0].content[2].image_url", "https://example.com/cat.jpg");
    check_str(r, "input[0].content[3].type", "input_file");
    check_str(r, "input[0].content[3].filename", "report.pdf");
    check_str(r, "input[0].content[3].file_data", "data:application/pdf;base64," PDF);
    cJSON_Delete(r);
    ah_conversation_free(c);
}

/* A tool result that carries an image (as MCP results may), in each format. */
static void tool_result_with_an_image(void **state)
{
    (void)state;
    ah_conversation *c = ah_conversation_new();
    ah_conversation_add_user_text(c, "screenshot please");
    ah_conversation_begin_assistant(c);
    ah_conversation_add_tool_use(c, "t1", "shot", "{}");
    ah_conversation_begin_user(c);
    ah_msg_block b = {.kind = AH_MSG_TOOL_RESULT, .tool_use_id = "t1", .text = "the screen",
                      .media_type = "image/png", .data = PNG};
    assert_int_equal(ah_conversation_add_block(c, &b), AH_OK);
    ah_request_opts o;
    opts_init(&o);
    o.cache = 0;

    cJSON *r = encode(AH_WIRE_ANTHROPIC, c, &o, NULL);
    check_str(r, "messages[2].content[0].type", "tool_result");
    check_str(r, "messages[2].content[0].content[0].type", "text");
    check_str(r, "messages[2].content[0].content[0].text", "the screen");
    check_str(r, "messages[2].content[0].content[1].type", "image");
    check_str(r, "messages[2].content[0].content[1].source.data", PNG);
    cJSON_Delete(r);

    r = encode(AH_WIRE_OPENAI, c, &o, NULL);
    check_str(r, "messages[2].role", "tool");
    check_str(r, "messages[2].content", "the screen");
    check_str(r, "messages[3].role", "user"); /* the image follows the tool messages */
    check_str(r, "messages[3].content[0].type", "image_url");
    check_str(r, "messages[3].content[0].image_url.url", "data:image/png;base64," PNG);
    cJSON_Delete(r);

    r = encode(AH_WIRE_RESPONSES, c, &o, NULL);
    check_str(r, "input[2].type", "function_call_output");
    check_str(r, "input[2].output[0].type", "input_text");
    check_str(r, "input[2].output[1].type", "input_image");
    check_str(r, "input[2].output[1].image_url", "data:image/png;base64," PNG);
    cJSON_Delete(r);
    ah_conversation_free(c);
}

/* Gemini: inlineData for base64 (data, or a data: URL taken apart: its own media type),
 * fileData for an http(s) URL (mimeType only when given); in the new input and in the
 * history alike (the images of an earlier turn are resent as they were). */
static void gemini_images_and_documents(void **state)
{
    (void)state;
    ah_conversation *c = media_conv();
    ah_conversation_begin_assistant(c);
    ah_conversation_add_text(c, "A cat and a report.", 19);
    ah_msg_block b[2] = {
        {.kind = AH_MSG_TEXT, .text = "And this one?"},
        {.kind = AH_MSG_DOCUMENT,
         .media_type = "application/pdf",
         .url = "https://example.com/a.pdf"},
    };
    char err[200];
    assert_int_equal(ah_conversation_add_user_blocks(c, b, 2, err, sizeof err), AH_OK);
    ah_request_opts o;
    opts_init(&o);
    o.model = "gemini-2.5-flash";
    cJSON *r = encode(AH_WIRE_GEMINI, c, &o, NULL);
    /* the earlier turn, in the history */
    check_str(r, "contents[0].role", "user");
    check_str(r, "contents[0].parts[0].text", "What is in these?");
    check_str(r, "contents[0].parts[1].inlineData.mimeType", "image/png");
    check_str(r, "contents[0].parts[1].inlineData.data", PNG);
    check_str(r, "contents[0].parts[2].fileData.fileUri", "https://example.com/cat.jpg");
    check_absent(r, "contents[0].parts[2].fileData.mimeType");
    check_absent(r, "contents[0].parts[2].inlineData");
    check_str(r, "contents[0].parts[3].inlineData.mimeType", "application/pdf");
    check_str(r, "contents[0].parts[3].inlineData.data", PDF);
    check_str(r, "contents[0].parts[4].inlineData.mimeType", "image/gif");
    check_str(r, "contents[0].parts[4].inlineData.data", "R0lGOD==");
    check_str(r, "contents[1].role", "model");
    /* the new input */
    check_str(r, "contents[2].parts[1].fileData.mimeType", "application/pdf");
    check_str(r, "contents[2].parts[1].fileData.fileUri", "https://example.com/a.pdf");
    cJSON_Delete(r);
    ah_conversation_free(c);
}

/* A tool result's image on Gemini: inside the functionResponse ("parts") for Gemini 3 and
 * later, a part of its own after it for Gemini 2.x, an unversioned model, or an image by
 * URL (the Gemini API takes no fileData inside a functionResponse). */
static void gemini_tool_result_with_an_image(void **state)
{
    (void)state;
    static const char *const urls[] = {NULL, "data:image/jpeg;base64,/9j/4AAQ",
                                       "https://example.com/shot.png"};
    for (size_t k = 0; k < 3; k++) {
        ah_conversation *c = ah_conversation_new();
        ah_conversation_add_user_text(c, "screenshot please");
        ah_conversation_begin_assistant(c);
        ah_conversation_add_tool_use(c, "t1", "shot", "{}");
        ah_conversation_begin_user(c);
        ah_msg_block b = {
            .kind = AH_MSG_TOOL_RESULT, .tool_use_id = "t1", .text = "the screen"};
        if (urls[k])
            b.url = urls[k];
        else
            b.media_type = "image/png", b.data = PNG;
        assert_int_equal(ah_conversation_add_block(c, &b), AH_OK);
        const char *mime = k == 1 ? "image/jpeg" : "image/png";
        const char *data = k == 1 ? "/9j/4AAQ" : PNG;
        ah_request_opts o;
        opts_init(&o);

        o.model = "gemini-3.1-pro-preview";
        cJSON *r = encode(AH_WIRE_GEMINI, c, &o, NULL);
        check_str(r, "contents[2].parts[0].functionResponse.name", "shot");
        check_str(r, "contents[2].parts[0].functionResponse.id", "t1");
        check_str(r, "contents[2].parts[0].functionResponse.response.result",
                  "the screen");
        if (k < 2) {
            check_str(
                r, "contents[2].parts[0].functionResponse.parts[0].inlineData.mimeType",
                mime);
            check_str(r, "contents[2].parts[0].functionResponse.parts[0].inlineData.data",
                      data);
            check_absent(r, "contents[2].parts[1]");
        } else {
            check_absent(r, "contents[2].parts[0].functionResponse.parts");
            check_str(r, "contents[2].parts[1].fileData.fileUri", urls[k]);
        }
        cJSON_Delete(r);

        for (int m = 0; m < 2; m++) {
            o.model = m ? "gemini-pro-latest" : "gemini-2.5-flash";
            r = encode(AH_WIRE_GEMINI, c, &o, NULL);
            check_absent(r, "contents[2].parts[0].functionResponse.parts");
            if (k < 2) {
                check_str(r, "contents[2].parts[1].inlineData.mimeType", mime);
                check_str(r, "contents[2].parts[1].inlineData.data", data);
            } else {
                check_str(r, "contents[2].parts[1].fileData.fileUri", urls[k]);
            }
            cJSON_Delete(r);
        }
        ah_conversation_free(c);
    }
}

/* A bad block never reaches an encoder: the conversation names the field. */
static void bad_media_names_the_field(void **state)
{
    (void)state;
    ah_conversation *c = ah_conversation_new();
    char err[200] = "";
    ah_msg_block b[2] = {{.kind = AH_MSG_TEXT, .text = "x"},
                         {.kind = AH_MSG_IMAGE, .media_type = "image/bmp", .data = PNG}};
    assert_int_equal(ah_conversation_add_user_blocks(c, b, 2, err, sizeof err),
                     AH_ERR_INVALID);
    assert_non_null(strstr(err, "block 2 (image): media_type"));
    assert_int_equal(ah_conversation_count(c), 0);
    /* a data: URL is data:<media type>;base64,<data>, of an allowed type, in base64 */
    static const struct {
        const char *url, *needle;
    } bad[] = {
        {"data:image/png,rawbytes", "block 2 (image): url: a data: URL must be"},
        {"data:image/bmp;base64,Qk0=", "block 2 (image): url: the data: URL's media type "
                                       "'image/bmp' is not one of"},
        {"data:image/png;base64,not base64!",
         "block 2 (image): url: the data: URL's data "
         "is not base64 (at byte 3)"},
        {"ftp://example.com/a.png",
         "block 2 (image): url: 'ftp://example.com/a.png' is not"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        b[1] = (ah_msg_block){.kind = AH_MSG_IMAGE, .url = bad[i].url};
        assert_int_equal(ah_conversation_add_user_blocks(c, b, 2, err, sizeof err),
                         AH_ERR_INVALID);
        if (!strstr(err, bad[i].needle))
            fail_msg("'%s': '%s' has no '%s'", bad[i].url, err, bad[i].needle);
    }
    /* and a tool result's image, added alone */
    ah_conversation_add_user_text(c, "x");
    ah_conversation_begin_assistant(c);
    ah_conversation_add_tool_use(c, "t1", "shot", "{}");
    ah_conversation_begin_user(c);
    ah_msg_block tr = {.kind = AH_MSG_TOOL_RESULT,
                       .tool_use_id = "t1",
                       .url = "data:text/plain;base64,eA=="};
    assert_int_equal(ah_conversation_add_block(c, &tr), AH_ERR_INVALID);
    ah_conversation_free(c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(anthropic_breakpoints_on_system_and_earlier_history),
        cmocka_unit_test(anthropic_first_turn_has_only_tools_and_system),
        cmocka_unit_test(anthropic_never_more_than_four),
        cmocka_unit_test(openai_formats_send_prompt_cache_key),
        cmocka_unit_test(cache_options_are_checked),
        cmocka_unit_test(anthropic_images_and_documents),
        cmocka_unit_test(chat_images_and_documents),
        cmocka_unit_test(responses_images_and_documents),
        cmocka_unit_test(tool_result_with_an_image),
        cmocka_unit_test(gemini_images_and_documents),
        cmocka_unit_test(gemini_tool_result_with_an_image),
        cmocka_unit_test(bad_media_names_the_field),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
