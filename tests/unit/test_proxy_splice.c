/* test_proxy_splice.c - the proxy's splicer without sockets: upstream streams written by
 * the shared writers (core/writer/, as the mock writes them) fed to the splice in every
 * byte split give the same client bytes as one feed; a stream cut after every event and
 * continued by the rest (with and without a restatement) gives the client exactly the
 * text of the whole stream, in one text block, with indexes and sequence numbers that
 * keep counting. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "proxy/proxy_internal.h"
#include "decode_internal.h"

static const char *const TEXT = "Retries are safe before the stream. After it, continue.";

/* An upstream Anthropic stream of TEXT from byte `from` on, in deltas of 5 bytes. */
static void upstream_a(ah__wbuf *o, size_t from, const char *restate)
{
    ah__wr_anthropic_head h = {.id = "msg_1", .model = "claude-test"};
    ah__wr_usage u = {.input = 10, .output = 1};
    ah__wr_a_message_start(o, &h, &u);
    ah__wr_block b = {.kind = AH__WR_TEXT};
    ah__wr_a_block_start(o, 0, &b);
    if (restate)
        ah__wr_a_delta(o, 0, AH__WR_A_TEXT, restate, strlen(restate));
    for (size_t i = from; i < strlen(TEXT); i += 5)
        ah__wr_a_delta(o, 0, AH__WR_A_TEXT, TEXT + i, strlen(TEXT + i) < 5 ? strlen(TEXT + i) : 5);
    ah__wr_a_block_stop(o, 0);
    u.output = 12;
    ah__wr_a_message_delta(o, "end_turn", &u);
    ah__wr_a_message_stop(o);
}

static void upstream_r(ah__wbuf *o, size_t from, const char *restate)
{
    ah__wr_resp_head h = {.id = "resp_1", .model = "gpt-test", .created_at = 1};
    size_t seq = 0;
    ah__wr_r_lifecycle(o, "response.created", &h, seq++);
    ah__wr_r_lifecycle(o, "response.in_progress", &h, seq++);
    ah__wr_block m = {.kind = AH__WR_TEXT, .id = "msg_1", .text = TEXT, .text_len = strlen(TEXT)};
    ah__wr_r_item_event(o, 0, &m, 0, seq++);
    ah__wr_r_part_event(o, 0, "msg_1", 0, NULL, 0, seq++);
    if (restate)
        ah__wr_r_text_delta(o, "msg_1", 0, restate, strlen(restate), seq++);
    for (size_t i = from; i < strlen(TEXT); i += 5)
        ah__wr_r_text_delta(o, "msg_1", 0, TEXT + i,
                            strlen(TEXT + i) < 5 ? strlen(TEXT + i) : 5, seq++);
    ah__wr_r_text_done(o, "msg_1", 0, TEXT, strlen(TEXT), seq++);
    ah__wr_r_part_event(o, 1, "msg_1", 0, TEXT, strlen(TEXT), seq++);
    ah__wr_r_item_event(o, 1, &m, 0, seq++);
    ah__wr_usage u = {.input = 10, .output = 12};
    ah__wr_resp_end end = {.items = &m, .n_items = 1, .usage = &u};
    ah__wr_r_terminal(o, &h, AH__WR_RS_COMPLETED, &end, seq++);
}

static const char REQ_A[] = "{\"model\":\"claude-test\",\"max_tokens\":9,\"stream\":true,"
                            "\"messages\":[{\"role\":\"user\",\"content\":\"q\"}]}";
static const char REQ_R[] = "{\"model\":\"gpt-test\",\"stream\":true,\"input\":\"q\"}";

/* The client's bytes for one upstream stream fed in pieces of `step` bytes. */
static char *splice_once(ah_wire wire, const char *req, const ah__wbuf *up, size_t step)
{
    cJSON *r = cJSON_Parse(req);
    ah__px_splice s;
    assert_int_equal(ah__px_splice_init(&s, wire, r), AH_OK);
    assert_int_equal(ah__px_splice_attempt(&s, 0), AH_OK);
    ah_error e;
    for (size_t off = 0; off < up->len; off += step) {
        size_t n = up->len - off < step ? up->len - off : step;
        assert_int_equal(ah__px_splice_feed(&s, up->data + off, n, &e), AH_OK);
    }
    assert_true(ah__px_splice_ended(&s));
    assert_int_equal(ah__px_splice_eof(&s, &e), AH_OK);
    ah__px_splice_finish(&s);
    char *out = ah__wbuf_take(&s.o);
    ah__px_splice_clear(&s);
    cJSON_Delete(r);
    return out;
}

static void every_byte_split_gives_the_same_bytes(void **state)
{
    (void)state;
    for (int w = 0; w < 2; w++) {
        ah_wire wire = w ? AH_WIRE_RESPONSES : AH_WIRE_ANTHROPIC;
        ah__wbuf up = {0};
        if (w)
            upstream_r(&up, 0, NULL);
        else
            upstream_a(&up, 0, NULL);
        char *whole = splice_once(wire, w ? REQ_R : REQ_A, &up, up.len);
        assert_non_null(strstr(whole, "\"Retri\""));
        for (size_t step = 1; step < 64; step++) {
            char *split = splice_once(wire, w ? REQ_R : REQ_A, &up, step);
            assert_string_equal(whole, split);
            free(split);
        }
        free(whole);
        ah__wbuf_free(&up);
    }
}

/* The text of the client's stream (text deltas joined), its text blocks, and that its
 * indexes / sequence numbers keep counting. */
static void client_text(ah_wire wire, const char *bytes, char *text, size_t size, int *blocks)
{
    ah_sse *p = ah_sse_new(NULL);
    ah_sse_feed(p, bytes, strlen(bytes));
    ah_sse_event ev;
    text[0] = '\0';
    *blocks = 0;
    long long seq = -1;
    while (ah_sse_next(p, &ev) == 1) {
        cJSON *j = cJSON_Parse(ev.data);
        assert_non_null(j);
        const char *type = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(j, "type"));
        if (wire == AH_WIRE_RESPONSES) {
            const cJSON *sn = cJSON_GetObjectItemCaseSensitive(j, "sequence_number");
            assert_true(cJSON_IsNumber(sn) && sn->valuedouble > (double)seq);
            seq = (long long)sn->valuedouble;
            if (strcmp(type, "response.output_item.added") == 0)
                (*blocks)++;
            if (strcmp(type, "response.output_text.delta") == 0)
                strncat(text, cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(j, "delta")),
                        size - strlen(text) - 1);
        } else {
            if (strcmp(type, "content_block_start") == 0)
                (*blocks)++;
            if (strcmp(type, "content_block_delta") == 0)
                strncat(text,
                        cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(
                            cJSON_GetObjectItemCaseSensitive(j, "delta"), "text")),
                        size - strlen(text) - 1);
        }
        cJSON_Delete(j);
    }
    ah_sse_free(p);
}

/* Cut after every event of the first attempt; the second attempt continues from the text
 * forwarded (restating the last sentence of it, or not): the client sees the whole text
 * once, in one block. */
static void every_cut_is_continued_exactly(void **state)
{
    (void)state;
    for (int w = 0; w < 2; w++) {
        ah_wire wire = w ? AH_WIRE_RESPONSES : AH_WIRE_ANTHROPIC;
        ah__wbuf up = {0};
        if (w)
            upstream_r(&up, 0, NULL);
        else
            upstream_a(&up, 0, NULL);
        /* event boundaries */
        size_t cuts[256], nc = 0;
        for (size_t i = 0; i + 1 < up.len && nc < 256; i++)
            if (up.data[i] == '\n' && up.data[i + 1] == '\n')
                cuts[nc++] = i + 2;
        for (size_t c = 0; c + 1 < nc; c++) {
            for (int restate = 0; restate < 2; restate++) {
                cJSON *r = cJSON_Parse(w ? REQ_R : REQ_A);
                ah__px_splice s;
                assert_int_equal(ah__px_splice_init(&s, wire, r), AH_OK);
                assert_int_equal(ah__px_splice_attempt(&s, 0), AH_OK);
                ah_error e;
                assert_int_equal(ah__px_splice_feed(&s, up.data, cuts[c], &e), AH_OK);
                ah__px_splice_break(&s);
                /* what was forwarded: the continuation's model goes on from there */
                size_t fwd = 0;
                for (size_t i = 0; i < s.n; i++)
                    if (s.blocks[i]->kind == AH__WR_TEXT)
                        fwd += s.blocks[i]->text.len;
                assert_memory_equal(TEXT, s.blocks && s.n ? s.blocks[0]->text.data : TEXT,
                                    s.n ? s.blocks[0]->text.len : 0);
                char said[128] = "";
                if (restate && fwd)
                    memcpy(said, TEXT, fwd); /* it restates all it said */
                ah__wbuf rest = {0};
                if (w)
                    upstream_r(&rest, fwd, said[0] ? said : NULL);
                else
                    upstream_a(&rest, fwd, said[0] ? said : NULL);
                assert_int_equal(ah__px_splice_attempt(&s, fwd > 0), AH_OK);
                for (size_t i = 0; i < rest.len; i += 7)
                    assert_int_equal(
                        ah__px_splice_feed(&s, rest.data + i, rest.len - i < 7 ? rest.len - i : 7, &e),
                        AH_OK);
                ah__px_splice_finish(&s);
                char *out = ah__wbuf_take(&s.o);
                char text[512];
                int blocks;
                client_text(wire, out, text, sizeof text, &blocks);
                if (strcmp(text, TEXT) != 0 || blocks != 1)
                    fail_msg("%s cut after event %zu (restate %d): '%s', %d blocks",
                             ah_wire_name(wire), c + 1, restate, text, blocks);
                free(out);
                ah__wbuf_free(&rest);
                ah__px_splice_clear(&s);
                cJSON_Delete(r);
            }
        }
        ah__wbuf_free(&up);
    }
}

/* The opening event's head read from the filtered tree (ah__tree_parse_keys, what
 * ah__px_splice_feed tries first) is the head read from cJSON's tree, for well-formed,
 * odd and malformed events: the same answer (opening or not) and the same fields. */
static int str_eq(const char *a, const char *b)
{
    return (!a && !b) || (a && b && strcmp(a, b) == 0);
}

static void head_case(ah_wire wire, const char *data, int want_tree)
{
    const ah__px_out *out = ah__px_out_of(wire);
    cJSON *req = cJSON_Parse("{\"model\":\"m\",\"stream\":true,"
                             "\"stream_options\":{\"include_usage\":true}}");
    ah__px_splice a, b;
    assert_int_equal(ah__px_splice_init(&a, wire, req), AH_OK);
    assert_int_equal(ah__px_splice_init(&b, wire, req), AH_OK);
    ah_sse_event ev = {0};
    ev.data = data;
    ev.data_len = strlen(data);
    cJSON *c = cJSON_ParseWithLength(data, ev.data_len);
    int ra = c && out->head(&a, &ev, c);
    cJSON_Delete(c);
    ah__tree_arena arena;
    ah__tree_arena_init(&arena);
    cJSON *t = ah__tree_parse_keys(out->head_keys, out->head_typed, &arena, data, ev.data_len);
    if (want_tree >= 0 && (t != NULL) != want_tree)
        fail_msg("tree %s for %s", t ? "taken" : "refused", data);
    int rb;
    if (t) {
        rb = out->head(&b, &ev, t);
    } else {
        cJSON *c2 = cJSON_ParseWithLength(data, ev.data_len);
        rb = c2 && out->head(&b, &ev, c2);
        cJSON_Delete(c2);
    }
    ah__tree_arena_release(&arena);
    if (ra != rb || !str_eq(a.id, b.id) || !str_eq(a.model, b.model) ||
        !str_eq(a.service_tier, b.service_tier) || !str_eq(a.fingerprint, b.fingerprint) ||
        a.created != b.created || a.include_usage != b.include_usage)
        fail_msg("head differs for %s: %d/%d id %s/%s model %s/%s", data, ra, rb,
                 a.id ? a.id : "-", b.id ? b.id : "-", a.model ? a.model : "-",
                 b.model ? b.model : "-");
    ah__px_splice_clear(&a);
    ah__px_splice_clear(&b);
    cJSON_Delete(req);
}

static void opening_head_tree_equals_cjson(void **state)
{
    (void)state;
    static const char *const anthropic[] = {
        "{\"type\":\"message_start\",\"message\":{\"id\":\"msg_1\",\"type\":\"message\","
        "\"role\":\"assistant\",\"model\":\"claude-x\",\"content\":[],\"stop_reason\":null,"
        "\"usage\":{\"input_tokens\":12,\"output_tokens\":1,\"service_tier\":\"standard\","
        "\"cache_creation\":{\"ephemeral_5m_input_tokens\":0}}}}",
        /* duplicate keys: the first wins in both */
        "{\"type\":\"message_start\",\"message\":{\"model\":\"a\",\"model\":\"b\",\"id\":\"1\","
        "\"id\":\"2\"}}",
        "{\"type\":\"message_start\",\"type\":\"ping\",\"message\":{\"model\":\"a\"}}",
        "{\"type\":\"ping\",\"type\":\"message_start\",\"message\":{\"model\":\"a\"}}",
        "{\"type\":\"message_start\",\"message\":{\"model\":\"a\"},\"message\":{\"model\":\"b\"}}",
        /* unicode escapes in "model", in keys, a surrogate pair, \u0000 */
        "{\"type\":\"message_start\",\"message\":{\"model\":\"caf\\u00e9 \\u4e2d\\n\\\"\"}}",
        "{\"type\":\"message_start\",\"message\":{\"mod\\u0065l\":\"esc-key\"}}",
        "{\"type\":\"message_start\",\"message\":{\"model\":\"\\ud83d\\ude00\"}}",
        "{\"type\":\"message_start\",\"message\":{\"model\":\"a\\u0000b\"}}",
        "{\"type\":\"message_start\",\"message\":{\"model\\u0000x\":\"nul-key\"}}",
        "{\"type\":\"message_start\",\"message\":{\"model\":\"raw\xc3\xa9 bytes\"}}",
        "{\"type\":\"message_start\",\"message\":{\"model\":\"bad\\u12\"}}",
        /* odd types */
        "{\"type\":\"message_start\",\"message\":{\"model\":7,\"id\":null}}",
        "{\"type\":\"message_start\",\"message\":[1,2]}",
        "{\"type\":\"message_start\",\"message\":\"s\"}",
        "{\"type\":\"message_start\"}",
        "{\"type\":\"message_start\",\"message\":{\"usage\":\"x\"}}",
        "{\"type\":\"message_start\",\"message\":{\"usage\":{\"service_tier\":5}}}",
        "{\"type\":\"message_start\",\"message\":{\"usage\":{\"input_tokens\":1.5e3}}}",
        "{\"type\":1,\"message\":{}}",
        "{\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\",\"message\":\"x\"}}",
        "{\"type\":\"ping\"}",
        "{\"message\":{\"model\":\"no type\"}}",
        /* whitespace, trailing bytes, malformed, truncated */
        " \r\n\t{ \"type\" : \"message_start\" , \"message\" : { \"model\" : \"w\" } } ",
        "{\"type\":\"message_start\",\"message\":{\"model\":\"t\"}} trailing",
        "{\"type\":\"message_start\",\"message\":{\"model\":\"t\"}",
        "{\"type\":\"message_start\",\"message\":{\"model\":\"t",
        "{\"type\":\"message_start\",",
        "{\"type\":\"message_start\",\"message\":{\"model\":\"t\",}}",
        "{\"type\":\"message_start\" \"message\":{}}",
        "{\"type\":\"message_start\",\"message\":{\"x\":tru}}",
        "{\"type\":\"message_start\",\"message\":{\"x\":[1,{\"a\":[]},\"s\",null,false]}}",
        "",
        "null",
        "[]",
        "{}",
        "{",
    };
    for (size_t i = 0; i < sizeof anthropic / sizeof anthropic[0]; i++)
        head_case(AH_WIRE_ANTHROPIC, anthropic[i], -1);
    head_case(AH_WIRE_ANTHROPIC, anthropic[0], 1);
    head_case(AH_WIRE_ANTHROPIC, anthropic[1], 1);
    head_case(AH_WIRE_ANTHROPIC, anthropic[5], 1);
    static const char *const chat[] = {
        "{\"id\":\"chatcmpl-1\",\"object\":\"chat.completion.chunk\",\"created\":1700000000,"
        "\"model\":\"gpt-x\",\"system_fingerprint\":\"fp_1\",\"service_tier\":\"default\","
        "\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"\"},"
        "\"logprobs\":null,\"finish_reason\":null}]}",
        "{\"id\":\"a\",\"id\":\"b\",\"model\":\"m\\u00e9\",\"choices\":[]}",
        "{\"choices\":[],\"created\":1.5}",
        "{\"choices\":[],\"created\":-3}",
        "{\"choices\":[],\"created\":12345678901234567890}",
        "{\"choices\":[],\"created\":\"1\"}",
        "{\"choices\":[1,\"x\",null,{\"a\":{}}]}",
        "{\"choices\":{}}",
        "{\"choices\":[],\"error\":null}",
        "{\"choices\":[],\"error\":{\"message\":\"x\"}}",
        "{\"error\":{\"message\":\"overloaded\"}}",
        "{\"choices\":[],\"system_fingerprint\":\"\\ud800\"}",
        "{\"choices\":[],\"type\":\"error\"}",
        "{\"choices\":[]",
        "{\"choices\":[],\"id\":\"x\\u0000y\"}",
        "[{\"choices\":[]}]",
        "",
    };
    for (size_t i = 0; i < sizeof chat / sizeof chat[0]; i++)
        head_case(AH_WIRE_OPENAI, chat[i], -1);
    head_case(AH_WIRE_OPENAI, chat[0], 1);
    head_case(AH_WIRE_OPENAI, chat[1], 1);
}

/* The client's request read from ah__px_request_parse's filtered tree answers every
 * lookup the proxy makes as cJSON's whole tree does, for well-formed, odd and malformed
 * bodies; and a continuation's body built from it (a whole re-parse of the body) is the
 * one built from cJSON's tree. */
static void req_lookups_equal(const char *body, const cJSON *a, const cJSON *b)
{
    const char *ma = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(a, "model"));
    const char *mb = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(b, "model"));
    const cJSON *ta = cJSON_GetObjectItemCaseSensitive(a, "thinking");
    const cJSON *tb = cJSON_GetObjectItemCaseSensitive(b, "thinking");
    const cJSON *sa = cJSON_GetObjectItemCaseSensitive(a, "store");
    const cJSON *sb = cJSON_GetObjectItemCaseSensitive(b, "store");
    if ((a == NULL) != (b == NULL) || cJSON_IsObject(a) != cJSON_IsObject(b) ||
        !str_eq(ma, mb) ||
        cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(a, "stream")) !=
            cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(b, "stream")) ||
        (sa == NULL) != (sb == NULL) || cJSON_IsTrue(sa) != cJSON_IsTrue(sb) ||
        cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(a, "background")) !=
            cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(b, "background")) ||
        cJSON_IsObject(ta) != cJSON_IsObject(tb) ||
        !str_eq(cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(ta, "type")),
                cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(tb, "type"))) ||
        cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(
            cJSON_GetObjectItemCaseSensitive(a, "stream_options"), "include_usage")) !=
            cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(
                cJSON_GetObjectItemCaseSensitive(b, "stream_options"), "include_usage")))
        fail_msg("request lookups differ for %s", body);
}

/* The continuation body after a stream cut after its first text delta. */
static char *cont_body(ah_wire wire, const cJSON *req, const char *body, ah_cont_mode mode)
{
    ah__wbuf up = {0};
    if (wire == AH_WIRE_RESPONSES)
        upstream_r(&up, 0, NULL);
    else
        upstream_a(&up, 0, NULL);
    ah__px_splice s;
    assert_int_equal(ah__px_splice_init(&s, wire, req), AH_OK);
    if (body) {
        s.req_body = body;
        s.req_body_len = strlen(body);
    }
    assert_int_equal(ah__px_splice_attempt(&s, 0), AH_OK);
    ah_error e;
    const char *cut = strstr(up.data, "Retri");
    assert_non_null(cut);
    cut = strstr(cut, "\n\n");
    assert_non_null(cut);
    assert_int_equal(ah__px_splice_feed(&s, up.data, (size_t)(cut + 2 - up.data), &e), AH_OK);
    assert_true(ah__px_splice_has_partial(&s));
    char *out = NULL;
    size_t len = 0;
    assert_int_equal(ah__px_continuation_body(&s, mode, "go on", &out, &len), AH_OK);
    ah__px_splice_clear(&s);
    ah__wbuf_free(&up);
    return out;
}

static void request_tree_equals_cjson(void **state)
{
    (void)state;
    static const char *const bodies[] = {
        REQ_A,
        REQ_R,
        "{\"model\":\"claude-x\",\"max_tokens\":1024,\"stream\":true,\"temperature\":0.7,"
        "\"thinking\":{\"type\":\"enabled\",\"budget_tokens\":2000},\"system\":[{\"type\":"
        "\"text\",\"text\":\"be \\\"brief\\\" \\u00e9\"}],\"messages\":[{\"role\":"
        "\"user\",\"content\":[{\"type\":\"text\",\"text\":\"q\",\"cache_control\":{\"type\":"
        "\"ephemeral\"}}]}],\"tools\":[{\"name\":\"t\",\"input_schema\":{\"type\":\"object\"}}]}",
        "{\"model\":\"a\",\"model\":\"b\",\"stream\":false,\"stream\":true}",
        /* a surrogate pair: skipped, or (in "model") left to cJSON */
        "{\"model\":\"m\",\"stream\":true,\"system\":\"\\ud83d\\ude00\"}",
        "{\"stream\":true,\"stream\":false,\"model\":\"m\"}",
        "{\"mod\\u0065l\":\"esc-key\",\"str\\u0065am\":true}",
        "{\"model\":\"caf\\u00e9\\u4e2d\",\"stream\":true}",
        "{\"model\":\"\\ud83d\\ude00\",\"stream\":true}",
        "{\"model\":\"a\\u0000b\",\"stream\\u0000x\":true}",
        "{\"model\":\"raw \xc3\xa9\",\"stream\":1}",
        "{\"model\":7,\"stream\":\"true\",\"store\":null,\"background\":true}",
        "{\"model\":\"m\",\"stream\":true,\"store\":false,\"background\":true}",
        "{\"model\":\"m\",\"stream\":true,\"store\":true,\"background\":true}",
        "{\"model\":\"m\",\"stream\":true,\"store\":1.5,\"background\":true}",
        "{\"model\":\"m\",\"stream\":true,\"background\":1e2}",
        "{\"thinking\":{\"type\":\"disabled\"},\"stream\":true}",
        "{\"thinking\":{\"type\":3},\"stream\":true}",
        "{\"thinking\":[],\"stream\":true}",
        "{\"thinking\":\"on\",\"stream\":true}",
        "{\"stream_options\":{\"include_usage\":true},\"stream\":true}",
        "{\"stream_options\":{\"include_usage\":false,\"include_usage\":true},\"stream\":true}",
        "{\"stream_options\":[true],\"stream\":true}",
        "{\"messages\":[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[["
        "[[[[[[[]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]],"
        "\"stream\":true}",
        "{\"n\":-0.5e-3,\"big\":123456789012345678901234567890,\"stream\":true}",
        "\xef\xbb\xbf{\"stream\":true}",
        " \t\r\n{\"stream\":true} ",
        "\f{\"stream\":true}",
        "{\"stream\":true}trailing",
        "{\"stream\":true",
        "{\"stream\":tru}",
        "{\"stream\":true,}",
        "{\"stream\" true}",
        "{\"model\":\"m\\x\"}",
        "{\"model\":\"m\\u12\"}",
        "{\"model\":\"m\\ud800\"}",
        "[{\"stream\":true}]",
        "\"stream\"",
        "true",
        "null",
        "{}",
        "",
        "{",
    };
    for (size_t i = 0; i < sizeof bodies / sizeof bodies[0]; i++) {
        const char *body = bodies[i];
        cJSON *c = cJSON_ParseWithLength(body, strlen(body));
        ah__tree_arena *arena = NULL;
        cJSON *t = ah__px_request_parse(body, strlen(body), &arena);
        req_lookups_equal(body, c, t);
        ah__px_request_free(t, arena);
        cJSON_Delete(c);
    }
    /* the usual bodies take the tree, a surrogate pair in a skipped member too */
    static const char *const usual[] = {
        REQ_A, REQ_R, NULL,
        "{\"model\":\"m\",\"stream\":true,\"system\":\"\\ud83d\\ude00\"}",
    };
    for (size_t i = 0; i < sizeof usual / sizeof usual[0]; i++) {
        const char *b = usual[i] ? usual[i] : bodies[2];
        ah__tree_arena *arena = NULL;
        cJSON *t = ah__px_request_parse(b, strlen(b), &arena);
        assert_non_null(t);
        assert_non_null(arena);
        ah__px_request_free(t, arena);
    }
    /* a continuation from the tree and the body is the one from cJSON's tree */
    static const struct {
        ah_wire wire;
        const char *body;
    } conts[] = {
        {AH_WIRE_ANTHROPIC, REQ_A},
        {AH_WIRE_ANTHROPIC,
         "{\"model\":\"claude-x\",\"max_tokens\":9,\"stream\":true,\"temperature\":0.25,"
         "\"messages\":[{\"role\":\"user\",\"content\":\"q \\u00e9\"},{\"role\":"
         "\"assistant\",\"content\":\"a\"},{\"role\":\"user\",\"content\":[{\"type\":\"text\","
         "\"text\":\"r\"}]}],\"metadata\":{\"user_id\":\"u\"},\"messages\":[]}"},
        {AH_WIRE_RESPONSES, REQ_R},
        {AH_WIRE_RESPONSES,
         "{\"model\":\"gpt-x\",\"stream\":true,\"input\":[{\"role\":\"user\",\"content\":"
         "\"q\"}],\"reasoning\":{\"effort\":\"low\"},\"top_p\":0.5}"},
    };
    for (size_t i = 0; i < sizeof conts / sizeof conts[0]; i++) {
        const char *body = conts[i].body;
        cJSON *c = cJSON_Parse(body);
        ah__tree_arena *arena = NULL;
        cJSON *t = ah__px_request_parse(body, strlen(body), &arena);
        assert_non_null(arena);
        for (int m = 0; m < 2; m++) {
            ah_cont_mode mode = m ? AH_CONT_PROMPT : AH_CONT_PREFILL;
            char *want = cont_body(conts[i].wire, c, NULL, mode);
            char *got = cont_body(conts[i].wire, t, body, mode);
            assert_string_equal(got, want);
            free(want);
            free(got);
        }
        ah__px_request_free(t, arena);
        cJSON_Delete(c);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(every_byte_split_gives_the_same_bytes),
        cmocka_unit_test(every_cut_is_continued_exactly),
        cmocka_unit_test(opening_head_tree_equals_cjson),
        cmocka_unit_test(request_tree_equals_cjson),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
