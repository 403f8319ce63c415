/* test_decode_fast.c - the decoder's fast path (core/decode_fast.c):
 *   - it takes the hot shapes (Anthropic text/thinking/input JSON deltas, padded as the
 *     API pads them, with escapes; Chat content chunks as OpenAI sends them) and gives
 *     near misses back to cJSON (\u escapes, control bytes, other keys or key orders,
 *     duplicate keys, numbers cJSON reads differently, a choice other than 0);
 *   - what it takes decodes to the same values (the text, escapes decoded), also through
 *     its shape cache (the bytes around the delta string of the last event it took);
 *   - Responses: output_text.delta in the key orders servers send is taken, near misses
 *     are not; the closing events that repeat the answer are parsed without it only
 *     when the decoder does not read it (ah__fast_parse), and the tree is otherwise
 *     cJSON's own;
 *   - the 28 recorded provider streams, and hand-made streams of near misses and errors,
 *     decode identically with and without it (tests/fuzz/decode_same.h compares every
 *     status, error message, hook call and timeline field), at many split points.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#define SAME_FAIL(what) fail_msg("fast and cJSON paths differ: %s", what)
#include "fuzz/decode_same.h"
#include "agenthost/timeline.h"

#include "unit/recorded_streams.h"

/* A decoder with block 0 open (text, or the given kind) and a recorded delta log. */
typedef struct fx {
    ah_timeline *tl;
    ah_decoder *d;
    same_log log;
} fx;

static void fx_init(fx *f, ah_wire wire, const char *start)
{
    static const ah_decoder_hooks hooks = {same_start, same_delta, same_end};
    memset(f, 0, sizeof *f);
    f->tl = ah_timeline_new();
    assert_non_null(f->tl);
    ah_decoder_new(wire, f->tl, &hooks, &f->log, &f->d, NULL, 0);
    assert_non_null(f->d);
    if (start)
        assert_int_equal(ah_decoder_feed(f->d, start, strlen(start)), AH_OK);
}

static void fx_free(fx *f)
{
    ah_decoder_free(f->d);
    ah_timeline_free(f->tl);
    free(f->log.p);
}

/* ah__fast_event's verdict on one event's data; when taken, *text gets the block's text
 * so far. */
static int takes(fx *f, const char *data, ah_status *st)
{
    *st = AH_OK;
    return ah__fast_event(f->d, data, strlen(data), st);
}

#define ANTHROPIC_TEXT_START                                                             \
    "event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,"  \
    "\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n"

static void anthropic_shapes_taken(void **state)
{
    (void)state;
    fx f;
    fx_init(&f, AH_WIRE_ANTHROPIC, ANTHROPIC_TEXT_START);
    ah_status st;
    assert_true(takes(&f, "{\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":"
                          "\"text_delta\",\"text\":\"Hello\"}}", &st));
    assert_int_equal(st, AH_OK);
    /* the API's padding, and escapes */
    assert_true(takes(&f, " {\"type\": \"content_block_delta\", \"index\": 0, \"delta\": "
                          "{\"type\": \"text_delta\", \"text\": \" a\\\"b\\\\c\\/d\\n\\t"
                          "\\r\\b\\f\"}   }\r\n trailing ignored", &st));
    assert_int_equal(st, AH_OK);
    const ah_block *b = ah_timeline_block(f.tl, 0);
    assert_string_equal(b->text, "Hello a\"b\\c/d\n\t\r\b\f");
    /* a delta for a block that is not open: taken, and the same error as cJSON's */
    assert_true(takes(&f, "{\"type\":\"content_block_delta\",\"index\":7,\"delta\":{\"type\":"
                          "\"text_delta\",\"text\":\"x\"}}", &st));
    assert_int_equal(st, AH_ERR_PARSE);
    fx_free(&f);
}

static void anthropic_near_misses_fall_back(void **state)
{
    (void)state;
    static const char *const misses[] = {
        /* \u escape, control byte, escaped key, other key order, extra key */
        "{\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\","
        "\"text\":\"\\u0041\"}}",
        "{\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\","
        "\"text\":\"a\x01\"}}",
        "{\"t\\u0079pe\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":"
        "\"text_delta\",\"text\":\"a\"}}",
        "{\"index\":0,\"type\":\"content_block_delta\",\"delta\":{\"type\":\"text_delta\","
        "\"text\":\"a\"}}",
        "{\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\","
        "\"text\":\"a\"},\"index\":1}",
        /* numbers cJSON reads its own way, a mismatched field, an unknown delta type */
        "{\"type\":\"content_block_delta\",\"index\":0.0,\"delta\":{\"type\":\"text_delta\","
        "\"text\":\"a\"}}",
        "{\"type\":\"content_block_delta\",\"index\":1e0,\"delta\":{\"type\":\"text_delta\","
        "\"text\":\"a\"}}",
        "{\"type\":\"content_block_delta\",\"index\":-0,\"delta\":{\"type\":\"text_delta\","
        "\"text\":\"a\"}}",
        "{\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\","
        "\"thinking\":\"a\"}}",
        "{\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"citations_delta\","
        "\"citation\":\"a\"}}",
        /* found by fuzz_decode_fast: one delta type's string, then another's field */
        "{\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\""
        "\"input_json_delta\",\"partial_json\":\"a\"}}",
        /* other event types, truncated, a byte-order mark, a form feed as whitespace */
        "{\"type\":\"content_block_stop\",\"index\":0}",
        "{\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\","
        "\"text\":\"a\"}",
        "\xef\xbb\xbf{\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":"
        "\"text_delta\",\"text\":\"a\"}}",
        "{\f\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\","
        "\"text\":\"a\"}}",
    };
    fx f;
    fx_init(&f, AH_WIRE_ANTHROPIC, ANTHROPIC_TEXT_START);
    /* first a delta it takes, so the shape cache holds the common shape: the near
     * misses share most of its bytes, and neither the cache nor the matcher take them */
    ah_status st;
    assert_true(takes(&f, "{\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":"
                          "\"text_delta\",\"text\":\"ok\"}}", &st));
    assert_int_equal(f.d->fast_kind, 1);
    for (size_t i = 0; i < sizeof misses / sizeof misses[0]; i++) {
        if (takes(&f, misses[i], &st))
            fail_msg("fast path took near miss #%zu: %s", i, misses[i]);
    }
    assert_string_equal(ah_timeline_block(f.tl, 0)->text, "ok");
    fx_free(&f);
}

#define CHAT_HEAD                                                                        \
    "{\"id\":\"chatcmpl-1\",\"object\":\"chat.completion.chunk\",\"created\":1782955818," \
    "\"model\":\"gpt-4o-mini\",\"service_tier\":\"default\",\"system_fingerprint\":"   \
    "\"fp_1\",\"choices\":[{\"index\":0,\"delta\":"

static void chat_shapes_taken(void **state)
{
    (void)state;
    fx f;
    fx_init(&f, AH_WIRE_OPENAI, NULL);
    ah_status st;
    assert_true(takes(&f, CHAT_HEAD "{\"content\":\"The\"},\"logprobs\":null,"
                          "\"finish_reason\":null}],\"usage\":null,\"obfuscation\":\"x\"}", &st));
    assert_int_equal(st, AH_OK);
    assert_true(takes(&f, CHAT_HEAD "{\"content\":\" c\\n\"},\"finish_reason\":null}]}", &st));
    assert_true(takes(&f, "{\"choices\":[{\"delta\":{\"content\":\"!\"}}]}", &st));
    assert_int_equal(ah_timeline_count(f.tl), 1);
    assert_string_equal(ah_timeline_block(f.tl, 0)->text, "The c\n!");
    fx_free(&f);
}

static void chat_near_misses_fall_back(void **state)
{
    (void)state;
    static const char *const misses[] = {
        CHAT_HEAD "{\"content\":\"a\"},\"logprobs\":null,\"finish_reason\":\"stop\"}]}",
        CHAT_HEAD "{\"content\":\"a\"},\"logprobs\":null,\"finish_reason\":null}]",
        CHAT_HEAD "{\"content\":\"a\" \"b\"},\"logprobs\":null,\"finish_reason\":null}]}",
        CHAT_HEAD "{\"role\":\"assistant\",\"content\":\"\"},\"finish_reason\":null}]}",
        CHAT_HEAD "{\"content\":\"a\"}}],\"usage\":{\"prompt_tokens\":1}}",
        CHAT_HEAD "{\"content\":\"a\"}}],\"error\":null}",
        CHAT_HEAD "{\"content\":\"a\"}}],\"choices\":[]}",
        CHAT_HEAD "{\"content\":\"a\"}},{\"index\":1,\"delta\":{\"content\":\"b\"}}]}",
        CHAT_HEAD "{\"content\":\"a\"},\"delta\":{\"content\":\"b\"}}]}",
        CHAT_HEAD "{\"reasoning_content\":\"a\"}}]}",
        CHAT_HEAD "{\"content\":\"\\ud83d\\ude00\"}}]}",
        "{\"choices\":[{\"index\":1,\"delta\":{\"content\":\"a\"}}]}",
        "{\"id\":\"a\\\"b\",\"choices\":[{\"delta\":{\"content\":\"a\"}}]}",
        "{\"x_groq\":{\"id\":\"1\"},\"choices\":[{\"delta\":{\"content\":\"a\"}}]}",
        "{\"created\":-1,\"choices\":[{\"delta\":{\"content\":\"a\"}}]}",
        "{\"id\":\"x\"}",
    };
    fx f;
    fx_init(&f, AH_WIRE_OPENAI, NULL);
    ah_status st;
    assert_true(takes(&f, CHAT_HEAD "{\"content\":\"ok\"},\"logprobs\":null,\"finish_reason\":"
                          "null}]}", &st));
    assert_int_equal(f.d->fast_kind, 2);
    for (size_t i = 0; i < sizeof misses / sizeof misses[0]; i++) {
        if (takes(&f, misses[i], &st))
            fail_msg("fast path took near miss #%zu: %s", i, misses[i]);
    }
    assert_int_equal(ah_timeline_count(f.tl), 1);
    assert_string_equal(ah_timeline_block(f.tl, 0)->text, "ok");
    fx_free(&f);
}

#define R_DELTA(rest) "{\"type\":\"response.output_text.delta\"," rest "}"

static void responses_shapes_taken(void **state)
{
    (void)state;
    fx f;
    fx_init(&f, AH_WIRE_RESPONSES, NULL);
    ah_status st;
    /* the three key orders of the recorded streams */
    assert_true(takes(&f, R_DELTA("\"content_index\":0,\"delta\":\"po\",\"item_id\":"
                                  "\"msg_1\",\"logprobs\":[],\"obfuscation\":\"mZh\","
                                  "\"output_index\":0,\"sequence_number\":4"), &st));
    assert_int_equal(st, AH_OK);
    assert_true(takes(&f, "{\"content_index\":0,\"delta\":\"n\\\"g\",\"item_id\":\"msg_2\","
                          "\"logprobs\":[],\"output_index\":0,\"sequence_number\":5,"
                          "\"type\":\"response.output_text.delta\"}", &st));
    assert_true(takes(&f, R_DELTA("\"logprobs\": null, \"output_index\":0,\"item_id\":"
                                  "\"msg_3\",\"content_index\":0,\"delta\":\"!\","
                                  "\"sequence_number\":6"), &st));
    /* OpenAI's order without obfuscation (the mock's), and with a space (key loop) */
    assert_true(takes(&f, R_DELTA("\"content_index\":0,\"delta\":\"?\",\"item_id\":"
                                  "\"msg_4\",\"logprobs\":[],\"output_index\":0,"
                                  "\"sequence_number\":7"), &st));
    assert_true(takes(&f, R_DELTA("\"content_index\":0,\"delta\":\"=\",\"item_id\":"
                                  "\"msg_5\",\"logprobs\":[], \"obfuscation\":\"q\","
                                  "\"output_index\":0,\"sequence_number\":8"), &st));
    assert_int_equal(ah_timeline_count(f.tl), 1);
    const ah_block *b = ah_timeline_block(f.tl, 0);
    assert_string_equal(b->text, "pon\"g!?=");
    assert_string_equal(b->item_id, "msg_5");
    assert_int_equal(f.d->last_seq, 8);
    /* the closing events: the repeated text is left out (the block has it); short ones
     * are parsed whole unless the threshold says otherwise */
    static const char done0[] = "{\"type\":\"response.output_text.done\",\"output_index\":0,"
                                "\"text\":\"pon\\\"g!\"}";
    assert_null(ah__fast_parse(f.d, done0, strlen(done0)));
    ah__decoder_set_skip_min(f.d, 0);
    static const char *const closing[] = {
        "{\"type\":\"response.output_text.done\",\"content_index\":0,\"item_id\":"
        "\"msg_3\",\"logprobs\":[],\"output_index\":0,\"sequence_number\":7,\"text\":"
        "\"pon\\\"g!\"}",
        "{\"type\":\"response.content_part.done\",\"content_index\":0,\"part\":{"
        "\"type\":\"output_text\",\"text\":\"pon\\u0022g!\"},\"sequence_number\":8}",
        "{\"type\":\"response.output_item.done\",\"item\":{\"type\":\"message\","
        "\"content\":[{\"type\":\"output_text\",\"text\":\"pon\\\"g!\"}]},"
        "\"output_index\":0,\"sequence_number\":9}",
        "{\"type\":\"response.completed\",\"response\":{\"status\":\"completed\","
        "\"output\":[{\"type\":\"message\",\"content\":[{\"type\":\"output_text\","
        "\"text\":\"pon\\\"g!\"}]}]},\"sequence_number\":10}",
    };
    for (size_t i = 0; i < sizeof closing / sizeof closing[0]; i++) {
        cJSON *root = ah__fast_parse(f.d, closing[i], strlen(closing[i]));
        if (!root)
            fail_msg("closing event #%zu not parsed without its text", i);
        const cJSON *t = cJSON_GetObjectItemCaseSensitive(root, "text");
        if (t)
            assert_string_equal(t->valuestring, "");
        cJSON_Delete(root);
    }
    /* nothing to leave out, a surrogate escape, an item of another type, text that
     * would fill a part no delta opened, an unbalanced or unterminated input */
    static const char *const whole[] = {
        "{\"type\":\"response.output_text.done\",\"output_index\":0,\"text\":\"\"}",
        "{\"type\":\"response.output_text.done\",\"output_index\":0,\"text\":"
        "\"\\ud83d\\ude00\"}",
        "{\"type\":\"response.output_item.done\",\"item\":{\"type\":\"reasoning\","
        "\"content\":[{\"type\":\"reasoning_text\",\"text\":\"r\"}]},\"output_index\":0}",
        "{\"type\":\"response.output_item.done\",\"item\":{\"type\":\"message\","
        "\"content\":[{\"text\":\"a\"},{\"type\":\"output_text\",\"text\":\"b\"}]},"
        "\"output_index\":0}",
        "{\"type\":\"response.output_text.done\",\"output_index\":1,\"text\":\"x\"}",
        "{\"type\":\"response.output_item.added\",\"item\":{\"type\":\"x\",\"content\":"
        "[{\"text\":\"a\"}]},\"output_index\":1}",
        "{\"type\":\"response.output_text.done\",\"output_index\":0,\"text\":\"x\"]",
        "{\"type\":\"response.output_text.done\",\"output_index\":0,\"text\":\"x",
    };
    for (size_t i = 0; i < sizeof whole / sizeof whole[0]; i++) {
        cJSON *root = ah__fast_parse(f.d, whole[i], strlen(whole[i]));
        if (root)
            fail_msg("event #%zu parsed without a text the decoder reads: %s", i, whole[i]);
    }
    fx_free(&f);
}

static void responses_near_misses_fall_back(void **state)
{
    (void)state;
    static const char *const misses[] = {
        R_DELTA("\"delta\":\"a\""),                               /* no output_index */
        R_DELTA("\"output_index\":0"),                              /* no delta */
        R_DELTA("\"output_index\":0,\"delta\":\"\\u0041\""),        /* \u escape */
        R_DELTA("\"output_index\":0,\"delta\":\"a\",\"delta\":\"b\""),
        R_DELTA("\"output_index\":0,\"delta\":\"a\",\"logprobs\":[{}]"),
        R_DELTA("\"output_index\":0,\"delta\":\"a\",\"item_id\":null"),
        R_DELTA("\"output_index\":0,\"delta\":\"a\",\"item_id\":\"m\\\"\""),
        R_DELTA("\"output_index\":1e0,\"delta\":\"a\""),
        R_DELTA("\"output_index\":0,\"delta\":\"a\",\"content_index\":-1"),
        R_DELTA("\"output_index\":0,\"delta\":\"a\",\"annotations\":[]"),
        "{\"type\":\"response.refusal.delta\",\"output_index\":0,\"delta\":\"a\"}",
        "{\"type\":\"response.output_text.delta\",\"output_index\":0,\"delta\":\"a\"",
        "{\"type\":\"response.output_text.delta\",\"type\":\"x\",\"output_index\":0,"
        "\"delta\":\"a\"}",
    };
    fx f;
    fx_init(&f, AH_WIRE_RESPONSES, NULL);
    ah_status st;
    for (size_t i = 0; i < sizeof misses / sizeof misses[0]; i++) {
        if (takes(&f, misses[i], &st))
            fail_msg("fast path took near miss #%zu: %s", i, misses[i]);
    }
    assert_int_equal(ah_timeline_count(f.tl), 0);
    fx_free(&f);
}

/* Whole streams, fast vs cJSON, cut into two feeds at every 7th byte (Responses: also
 * re-attached at the cut). */
static void same_all_splits(ah_wire wire, const char *s, size_t n)
{
    for (size_t cut = 0; cut <= n; cut += (n > 2000 ? 97 : 7)) {
        same_check(wire, (const uint8_t *)s, n, cut);
        if (wire == AH_WIRE_RESPONSES)
            same_check_reattach(wire, (const uint8_t *)s, n, cut, 1);
    }
    same_check(wire, (const uint8_t *)s, n, n);
}

static void fast_stream(ah_wire wire, const char *file, const char *sse, size_t len,
                        void *ud)
{
    (void)file;
    (void)ud;
    same_all_splits(wire, sse, len);
}

static void real_streams_decode_the_same(void **state)
{
    (void)state;
    assert_int_equal(each_recorded_stream(fast_stream, NULL), 28);
}

static void hand_streams_decode_the_same(void **state)
{
    (void)state;
    static const char *const anthropic[] = {
        /* every shape, near misses and errors in one stream */
        "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"usage\":"
        "{\"input_tokens\":3}}}\n\n" ANTHROPIC_TEXT_START
        "data: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":"
        "\"text_delta\",\"text\":\"a\\n\\\"\"}}\n\n"
        "data: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":"
        "\"text_delta\",\"text\":\"\\u00e9\"}}\n\n"
        "data: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":"
        "\"thinking_delta\",\"thinking\":\"x\"}}\n\n",
        ANTHROPIC_TEXT_START
        "data: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":"
        "\"input_json_delta\",\"partial_json\":\"{}\"}}\n\n",
        "event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":1,"
        "\"content_block\":{\"type\":\"tool_use\",\"id\":\"t\",\"name\":\"n\",\"input\":{}}}"
        "\n\ndata: {\"type\":\"content_block_delta\",\"index\":1,\"delta\":{\"type\":"
        "\"input_json_delta\",\"partial_json\":\"{\\\"a\\\":\"}}\n\n"
        "data: {\"type\":\"content_block_delta\",\"index\":1,\"delta\":{\"type\":"
        "\"input_json_delta\",\"partial_json\":\"1}\"}}\n\n"
        "data: {\"type\":\"content_block_stop\",\"index\":1}\n\n"
        "data: {\"type\":\"message_stop\"}\n\n",
        "data: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":"
        "\"text_delta\",\"text\":\"no block\"}}\n\n",
    };
    for (size_t i = 0; i < sizeof anthropic / sizeof anthropic[0]; i++)
        same_all_splits(AH_WIRE_ANTHROPIC, anthropic[i], strlen(anthropic[i]));
    static const char *const chat[] = {
        "data: " CHAT_HEAD "{\"role\":\"assistant\",\"content\":\"\"},\"finish_reason\":"
        "null}]}\n\ndata: " CHAT_HEAD "{\"content\":\"a\\tb\"},\"logprobs\":null,"
        "\"finish_reason\":null}],\"usage\":null}\n\ndata: " CHAT_HEAD "{\"reasoning_content"
        "\":\"r\"}}]}\n\ndata: " CHAT_HEAD "{\"content\":\"c\"}}]}\n\ndata: " CHAT_HEAD
        "{},\"finish_reason\":\"stop\"}]}\n\ndata: " CHAT_HEAD "{\"content\":\"late\"}}]}"
        "\n\ndata: [DONE]\n\n",
    };
    for (size_t i = 0; i < sizeof chat / sizeof chat[0]; i++)
        same_all_splits(AH_WIRE_OPENAI, chat[i], strlen(chat[i]));
#define R_EV(json) "data: " json "\n\n"
#define R_MSG_ADDED                                                                      \
    R_EV("{\"type\":\"response.output_item.added\",\"item\":{\"type\":\"message\",\"id\":" \
         "\"m\"},\"output_index\":0,\"sequence_number\":1}")
    static const char *const responses[] = {
        /* deltas, then every closing event repeating the text (escapes, \u) */
        R_MSG_ADDED R_EV(R_DELTA("\"output_index\":0,\"delta\":\"a\\n\",\"sequence_number"
                                 "\":2,\"item_id\":\"m\""))
        R_EV(R_DELTA("\"output_index\":0,\"delta\":\"\\u00e9\",\"sequence_number\":3"))
        R_EV("{\"type\":\"response.output_text.done\",\"output_index\":0,\"text\":"
             "\"a\\n\\u00e9\",\"sequence_number\":4}")
        R_EV("{\"type\":\"response.content_part.done\",\"output_index\":0,\"part\":{"
             "\"type\":\"output_text\",\"text\":\"a\\n\\u00e9\"},\"sequence_number\":5}")
        R_EV("{\"type\":\"response.output_item.done\",\"item\":{\"type\":\"message\","
             "\"id\":\"m\",\"content\":[{\"type\":\"output_text\",\"text\":\"a\\n\\u00e9\"},"
             "{\"type\":\"output_text\",\"text\":\"second part, no delta\"}]},"
             "\"output_index\":0,\"sequence_number\":6}")
        R_EV("{\"type\":\"response.completed\",\"response\":{\"id\":\"r\",\"status\":"
             "\"completed\",\"usage\":{\"input_tokens\":1,\"output_tokens\":2},\"output\":"
             "[{\"type\":\"message\",\"content\":[{\"type\":\"output_text\",\"text\":"
             "\"a\\n\\u00e9\"}]}]},\"sequence_number\":7}"),
        /* no deltas: the closing events' text is the answer */
        R_MSG_ADDED
        R_EV("{\"type\":\"response.output_text.done\",\"output_index\":0,\"text\":"
             "\"whole\",\"sequence_number\":2}")
        R_EV("{\"type\":\"response.output_item.done\",\"item\":{\"type\":\"message\","
             "\"content\":[{\"type\":\"output_text\",\"text\":\"whole\"},{\"type\":"
             "\"output_text\",\"text\":\"b\\ud83d\\ude00\"}]},\"output_index\":0}")
        R_EV("{\"type\":\"response.failed\",\"response\":{\"status\":\"failed\","
             "\"output\":[{\"content\":[{\"text\":\"t\"}]}]}}"),
        /* an opaque item and a reasoning item whose repeated text is kept */
        R_EV("{\"type\":\"response.output_item.done\",\"item\":{\"type\":\"web_x\","
             "\"id\":\"w\",\"content\":[{\"text\":\"kept verbatim\"}]},\"output_index\":0}")
        R_EV("{\"type\":\"response.output_item.done\",\"item\":{\"type\":\"reasoning\","
             "\"content\":[{\"type\":\"reasoning_text\",\"text\":\"think\"}]},"
             "\"output_index\":1}")
        R_EV("{\"type\":\"error\",\"text\":\"x\",\"message\":\"boom\"}"),
        /* repeats after a re-attach, a delta for a closed part, malformed data */
        R_MSG_ADDED R_EV(R_DELTA("\"output_index\":0,\"delta\":\"x\",\"sequence_number"
                                 "\":2")) R_MSG_ADDED
        R_EV(R_DELTA("\"output_index\":0,\"delta\":\"x\",\"sequence_number\":2"))
        R_EV("{\"type\":\"response.output_item.done\",\"item\":{\"type\":\"message\","
             "\"content\":[{\"type\":\"output_text\",\"text\":\"x\"}]},\"output_index\":0,"
             "\"sequence_number\":3}")
        R_EV(R_DELTA("\"output_index\":0,\"delta\":\"late\",\"sequence_number\":4"))
        R_EV("{\"type\":\"response.output_text.done\",\"output_index\":0,\"text\":\"x\"")
        "\n",
    };
    for (size_t i = 0; i < sizeof responses / sizeof responses[0]; i++)
        same_all_splits(AH_WIRE_RESPONSES, responses[i], strlen(responses[i]));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(anthropic_shapes_taken),
        cmocka_unit_test(anthropic_near_misses_fall_back),
        cmocka_unit_test(chat_shapes_taken),
        cmocka_unit_test(chat_near_misses_fall_back),
        cmocka_unit_test(responses_shapes_taken),
        cmocka_unit_test(responses_near_misses_fall_back),
        cmocka_unit_test(real_streams_decode_the_same),
        cmocka_unit_test(hand_streams_decode_the_same),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
