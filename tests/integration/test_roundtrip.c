/* test_roundtrip.c - each wire format end to end over loopback, streaming and not:
 * conversation -> ah_request_encode -> ah_call (libcurl) -> the built-in mock ->
 * decoder (stream) or ah_decode_response (body) -> timeline. The mock's model is
 * independent of our encoders and decoders (it shares no code with them), so a bug in
 * either shows up here as a wrong text or tool call. */
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
#include "../../core/internal.h" /* ah__wire_request_path / _query */
#include "agenthost/call.h"
#include "agenthost/mock.h"
#include "agenthost/timeline.h"

typedef struct rt {
    ah_decoder *dec;
    char *body;
    size_t len;
} rt;

static int on_data(void *ud, const char *buf, size_t len, ah_error *err)
{
    rt *r = ud;
    if (r->dec) {
        if (ah_decoder_feed(r->dec, buf, len) != AH_OK) {
            *err = *ah_decoder_error(r->dec);
            return 1;
        }
        return 0;
    }
    r->body = realloc(r->body, r->len + len + 1);
    assert_non_null(r->body);
    memcpy(r->body + r->len, buf, len);
    r->len += len;
    r->body[r->len] = '\0';
    return 0;
}

static int on_end(void *ud, ah_error *err)
{
    rt *r = ud;
    return r->dec ? ah_decoder_finish(r->dec, err) != AH_OK : 0;
}

/* Send conv over `wire` to the mock and decode the answer into tl. */
static void round_trip(ah_mock *m, ah_wire wire, int stream, const ah_conversation *conv,
                       int with_tool, ah_timeline *tl)
{
    static const ah_tool_def tool = {
        "lookup", "Look a word up",
        "{\"type\":\"object\",\"properties\":{\"word\":{\"type\":\"string\"},"
        "\"n\":{\"type\":\"integer\"}},\"required\":[\"word\",\"n\"]}"};
    ah_request_opts o;
    ah_request_opts_init(&o);
    o.model = "mock-model";
    o.max_tokens = 128;
    o.stream = stream;
    o.tools = with_tool ? &tool : NULL;
    o.n_tools = with_tool ? 1 : 0;
    char *body = NULL, err[256];
    size_t blen = 0;
    assert_int_equal(ah_request_encode(wire, conv, &o, &body, &blen, err, sizeof err), AH_OK);
    ah_header_list hl;
    assert_int_equal(ah_request_headers(wire, "sk-test-roundtrip-key", stream, &hl), AH_OK);
    char url[256];
    /* a path naming the model (Gemini) takes it, and there the path says whether the
     * answer streams (:streamGenerateContent?alt=sse or :generateContent) */
    char *path = ah__wire_request_path(wire, o.model);
    char *query = ah__wire_request_query(wire, NULL);
    char *colon = strstr(path, ":stream");
    if (colon && !stream)
        memmove(colon + 1, colon + 7, strlen(colon + 7) + 1), colon[1] = 'g';
    snprintf(url, sizeof url, "%s%s%s%s", ah_mock_url(m), path,
             *query && stream ? "?" : "", stream ? query : "");
    free(path);
    free(query);

    ah_loop *loop = ah_loop_new(ah_clock_real(), NULL);
    rt r = {0};
    if (stream)
        ah_decoder_new(wire, tl, NULL, NULL, &r.dec, NULL, 0);
    ah_call_config cc = {0};
    cc.loop = loop;
    cc.request.url = url;
    cc.request.headers = hl.items;
    cc.request.n_headers = hl.count;
    cc.request.body = body;
    cc.request.body_len = blen;
    cc.stream.on_data = on_data;
    cc.stream.on_end = on_end;
    cc.stream.ud = &r;
    ah_call *call = NULL;
    assert_int_equal(ah_call_new(&cc, &call, err, sizeof err), AH_OK);
    ah_call_state st = ah_call_run(call);
    if (st != AH_CALL_DONE)
        fail_msg("%s stream=%d: call ended %s: %s", ah_wire_name(wire), stream,
                 ah_call_state_name(st), ah_call_error(call)->message);
    if (!stream) {
        ah_error e;
        assert_int_equal(ah_decode_response(wire, r.body, r.len, tl, &e), AH_OK);
    }
    assert_true(ah_timeline_finished(tl));
    ah_call_free(call);
    ah_decoder_free(r.dec);
    ah_loop_free(loop);
    ah_header_list_free(&hl);
    free(r.body);
    free(body);
}

static const ah_block *first_of(const ah_timeline *tl, ah_block_kind kind)
{
    for (size_t i = 0; i < ah_timeline_count(tl); i++)
        if (ah_timeline_block(tl, i)->kind == kind)
            return ah_timeline_block(tl, i);
    return NULL;
}

static void every_format_round_trips(void **state)
{
    (void)state;
    char err[256];
    ah_mock *m = NULL;
    ah_mock_new(NULL, &m, err, sizeof err);
    assert_non_null(m);
    for (int wire = 0; wire < AH_WIRE_COUNT_; wire++) {
        for (int stream = 0; stream <= 1; stream++) {
            /* 1. Plain text: the model echoes a digest of the user's words. */
            ah_conversation *c = ah_conversation_new();
            ah_conversation_set_system(c, "Be brief.");
            ah_conversation_add_user_text(c, "hello round trip");
            ah_timeline *tl = ah_timeline_new();
            round_trip(m, (ah_wire)wire, stream, c, 0, tl);
            const ah_block *t = first_of(tl, AH_BLOCK_TEXT);
            assert_non_null(t);
            assert_true(t->closed);
            assert_non_null(strstr(t->text, "You said: \"hello round trip\""));
            assert_null(first_of(tl, AH_BLOCK_TOOL_USE));
            assert_true(ah_timeline_output_tokens(tl) > 0);

            /* 2. Tools offered: a text, then one call with schema-derived arguments. */
            ah_timeline_reset(tl);
            round_trip(m, (ah_wire)wire, stream, c, 1, tl);
            const ah_block *call = first_of(tl, AH_BLOCK_TOOL_USE);
            assert_non_null(call);
            assert_true(call->closed);
            assert_string_equal(call->name, "lookup");
            assert_true(call->id[0] != '\0');
            const cJSON *word = cJSON_GetObjectItem((cJSON *)call->args, "word");
            const cJSON *n = cJSON_GetObjectItem((cJSON *)call->args, "n");
            assert_string_equal(word->valuestring, "mock_word");
            assert_int_equal(n->valueint, 42);

            /* 3. The tool result goes back: the model quotes it. */
            ah_conversation_begin_assistant(c);
            ah_conversation_add_tool_use(c, call->id, call->name, call->arguments);
            ah_conversation_add_tool_result(c, call->id, "a small furry animal", 0);
            ah_timeline_reset(tl);
            round_trip(m, (ah_wire)wire, stream, c, 1, tl);
            t = first_of(tl, AH_BLOCK_TEXT);
            assert_non_null(t);
            assert_non_null(strstr(t->text, "The tool returned: a small furry animal"));
            assert_null(first_of(tl, AH_BLOCK_TOOL_USE));

            ah_timeline_free(tl);
            ah_conversation_free(c);
        }
    }
    /* every format x 2 modes x 3 requests, each logged with the key redacted. */
    assert_int_equal(ah_mock_request_count(m), (size_t)AH_WIRE_COUNT_ * 6);
    for (size_t i = 0; i < (size_t)AH_WIRE_COUNT_ * 6; i++) {
        ah_mock_request r;
        assert_int_equal(ah_mock_request_get(m, i, &r), AH_OK);
        assert_int_equal(r.stream, (int)((i / 3) % 2));
        for (size_t k = 0; k < r.header_count; k++)
            assert_null(strstr(r.headers[k].value, "sk-test-roundtrip-key"));
    }
    ah_mock_free(m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(every_format_round_trips),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
