/* test_decode.c - the three stream decoders on hand-written input: the streams under
 * tests/fixtures/streams/<format>/ (whole, split, truncated), one named test per wire
 * detail of tests/fixtures/real-streams/README.md, the completion rules and hook order,
 * the partial drain, malformed input (always a clear error, never a crash or leak), and
 * non-stream bodies. Leak checking is the sanitizer/valgrind runs of this binary.
 */
#include "unit/decode_util.h"

#define STREAMS_DIR AH_FIXTURES_DIR "/streams"

#define EV(name, json) "event: " name "\ndata: " json "\n\n"
#define DATA(json)     "data: " json "\n\n"

/* ---- helpers
 * ------------------------------------------------------------------------------ */

/* Decode `s` whole, and check that byte-by-byte and random splits decode to the same
 * result with a consistent hook stream. Returns the whole-fed timeline. */
static ah_timeline *decode(ah_wire wire, const char *s, ah_status *fin, ah_error *err)
{
    size_t len = strlen(s);
    du_rec rec = {0};
    ah_timeline *tl = du_decode(wire, s, len, DU_WHOLE, &rec, fin, err);
    du_rec_check(&rec, tl);
    du_rec_free(&rec);
    cJSON *want = du_to_expect(wire, tl);
    for (uint64_t mode = 1; mode < 6; mode++) {
        ah_status f2;
        ah_timeline *t2 = du_decode(wire, s, len, mode == 1 ? DU_BYTES : mode * 104729,
                                    &rec, &f2, NULL);
        du_rec_check(&rec, t2);
        du_rec_free(&rec);
        cJSON *got = du_to_expect(wire, t2);
        du_assert_json_equal(want, got, "split decode");
        if (fin)
            assert_int_equal(f2, *fin);
        cJSON_Delete(got);
        ah_timeline_free(t2);
    }
    cJSON_Delete(want);
    return tl;
}

/* Decode and require a clean end. */
static ah_timeline *decode_ok(ah_wire wire, const char *s)
{
    ah_status fin;
    ah_error err;
    ah_timeline *tl = decode(wire, s, &fin, &err);
    if (fin != AH_OK)
        print_error("finish: %s\n", err.message);
    assert_int_equal(fin, AH_OK);
    assert_true(ah_timeline_finished(tl));
    return tl;
}

/* Decode whole and return the finish status and error (no split checks: for bad input).
 */
static ah_status decode_status(ah_wire wire, const char *s, ah_error *err)
{
    ah_status fin;
    ah_timeline *tl = du_decode(wire, s, strlen(s), DU_WHOLE, NULL, &fin, err);
    ah_timeline_free(tl);
    return fin;
}

static const ah_block *blk(const ah_timeline *tl, size_t i)
{
    const ah_block *b = ah_timeline_block(tl, i);
    assert_non_null(b);
    return b;
}

static const char *arg_str(const ah_block *b, const char *key)
{
    assert_non_null(b->args);
    const cJSON *v = cJSON_GetObjectItemCaseSensitive((const cJSON *)b->args, key);
    return cJSON_GetStringValue(v);
}

static void assert_text(const ah_block *b, ah_block_kind kind, const char *text)
{
    assert_int_equal(b->kind, kind);
    assert_int_equal(b->text_len, strlen(text));
    assert_string_equal(b->text, text);
}

/* ---- hand-written streams
 * ----------------------------------------------------------------- */

typedef struct hand_stream {
    const char *dir, *name;
    ah_wire wire;
    const char
        *provider_type; /* for Chat error streams (expect.py does not record them) */
    char label[96];
    char path[400];
} hand_stream;

static hand_stream hand[] = {
    {"anthropic", "text-only", AH_WIRE_ANTHROPIC, NULL, "", ""},
    {"anthropic", "text-tool", AH_WIRE_ANTHROPIC, NULL, "", ""},
    {"anthropic", "parallel-tools", AH_WIRE_ANTHROPIC, NULL, "", ""},
    {"anthropic", "reasoning", AH_WIRE_ANTHROPIC, NULL, "", ""},
    {"anthropic", "error-overloaded", AH_WIRE_ANTHROPIC, NULL, "", ""},
    {"openai", "text-only", AH_WIRE_OPENAI, NULL, "", ""},
    {"openai", "text-tool", AH_WIRE_OPENAI, NULL, "", ""},
    {"openai", "parallel-tools", AH_WIRE_OPENAI, NULL, "", ""},
    {"openai", "reasoning", AH_WIRE_OPENAI, NULL, "", ""},
    {"openai", "error-midstream", AH_WIRE_OPENAI, "502", "", ""},
    {"openai", "content-filter", AH_WIRE_OPENAI, NULL, "", ""},
    {"responses", "text-only", AH_WIRE_RESPONSES, NULL, "", ""},
    {"responses", "text-tool", AH_WIRE_RESPONSES, NULL, "", ""},
    {"responses", "parallel-tools", AH_WIRE_RESPONSES, NULL, "", ""},
    {"responses", "reasoning", AH_WIRE_RESPONSES, NULL, "", ""},
    {"responses", "error-midstream", AH_WIRE_RESPONSES, NULL, "", ""},
};
enum { N_HAND = sizeof hand / sizeof hand[0] };

static du_stream hand_load(const hand_stream *h)
{
    du_stream l = du_load(h->path, h->label, h->wire);
    if (h->provider_type)
        l.provider_type = h->provider_type;
    return l;
}

static void hand_stream_decodes(void **state)
{
    du_stream l = hand_load(*state);
    du_check_all_splits(&l, 16);
    du_check_feed_event(&l);
    du_unload(&l);
}

static void hand_stream_truncations(void **state)
{
    du_stream l = hand_load(*state);
    du_check_truncations(&l, 30);
    du_unload(&l);
}

/* The same streams with CRLF and with CR line ends decode identically. */
static void hand_streams_with_crlf_and_cr_line_ends(void **state)
{
    (void)state;
    for (size_t k = 0; k < N_HAND; k++) {
        du_stream l = hand_load(&hand[k]);
        for (int mode = 0; mode < 2; mode++) {
            char *conv = malloc(l.len * 2 + 1);
            assert_non_null(conv);
            size_t n = 0;
            for (size_t i = 0; i < l.len; i++) {
                if (l.sse[i] == '\n') {
                    conv[n++] = '\r';
                    if (mode == 0)
                        conv[n++] = '\n';
                } else {
                    conv[n++] = l.sse[i];
                }
            }
            du_stream c = l;
            c.sse = conv;
            c.len = n;
            du_check_decode(&c, DU_WHOLE);
            du_check_decode(&c, DU_BYTES);
            du_check_decode(&c, 31337);
            free(conv);
        }
        du_unload(&l);
    }
}

/* ---- Anthropic wire details
 * ---------------------------------------------------------------- */

static const char *const A_START = EV(
    "message_start", "{\"type\":\"message_start\",\"message\":{\"id\":\"msg_1\",\"type\":"
                     "\"message\",\"role\":\"assistant\",\"content\":[],\"usage\":{"
                     "\"input_tokens\":43,\"output_tokens\":1}}}");
#define A_END(stop)                                                                      \
    EV("message_delta", "{\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"" stop \
                        "\"},\"usage\":{\"output_tokens\":9}}")                          \
    EV("message_stop", "{\"type\":\"message_stop\"}")
#define A_TEXT_START(i)                                                                  \
    EV("content_block_start", "{\"type\":\"content_block_start\",\"index\":" #i          \
                              ",\"content_block\":{\"type\":\"text\",\"text\":\"\"}}")
#define A_TEXT(i, t)                                                                     \
    EV("content_block_delta",                                                            \
       "{\"type\":\"content_block_delta\",\"index\":" #i                                 \
       ",\"delta\":{\"type\":\"text_delta\",\"text\":\"" t "\"}}")
#define A_STOP(i)                                                                        \
    EV("content_block_stop", "{\"type\":\"content_block_stop\",\"index\":" #i "}")
#define A_TOOL_START(i, id, name)                                                        \
    EV("content_block_start", "{\"type\":\"content_block_start\",\"index\":" #i          \
                              ",\"content_block\":{\"type\":\"tool_use\",\"id\":\"" id   \
                              "\",\"name\":\"" name "\",\"input\":{}}}")
#define A_JSON(i, frag)                                                                  \
    EV("content_block_delta",                                                            \
       "{\"type\":\"content_block_delta\",\"index\":" #i                                 \
       ",\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":\"" frag "\"}}")
#define PING EV("ping", "{\"type\": \"ping\"}")

/* "The API pads JSON with whitespace inside the data line: parse JSON, never match
 * strings." */
static void anthropic_whitespace_padded_json(void **state)
{
    (void)state;
    const char *s = EV("message_start",
                       "{ \"type\" : \"message_start\" , \"message\" : { \"usage\" : {"
                       " \"input_tokens\" : 7 , \"output_tokens\" : 1 } }    }")
        EV("content_block_start",
           "{\"type\":\"content_block_start\",\"index\" :0,"
           "\"content_block\":{\"type\":\"text\",\"text\":\"\"}      }")
            EV("content_block_delta",
               "{\"type\":\"content_block_delta\",\"index\":0,\"delta\":{"
               "\"type\":\"text_delta\",\"text\":\"a}  \\\"b\\\"\"}     }")
                EV("content_block_stop",
                   "{\"type\":\"content_block_stop\",\"index\":0     }")
                    EV("message_delta",
                       "{\"type\":\"message_delta\",\"delta\":{\"stop_reason\":"
                       "\"end_turn\"} ,\"usage\":{\"output_tokens\":3}  }")
                        EV("message_stop", "{\"type\":\"message_stop\"   }");
    ah_timeline *tl = decode_ok(AH_WIRE_ANTHROPIC, s);
    assert_int_equal(ah_timeline_count(tl), 1);
    assert_text(blk(tl, 0), AH_BLOCK_TEXT, "a}  \"b\"");
    assert_string_equal(ah_timeline_stop_reason(tl), "end_turn");
    assert_int_equal(ah_timeline_input_tokens(tl), 7);
    assert_int_equal(ah_timeline_output_tokens(tl), 3);
    ah_timeline_free(tl);
}

/* "A tool with no arguments streams only partial_json: "" ... default to {}." Also no
 * delta at all, and whitespace only. */
static void anthropic_empty_partial_json_means_empty_object(void **state)
{
    (void)state;
    char s[4096];
    snprintf(s, sizeof s, "%s%s%s%s%s%s%s%s%s%s", A_START,
             A_TOOL_START(0, "toolu_A", "noargs"), A_JSON(0, ""), A_STOP(0),
             A_TOOL_START(1, "toolu_B", "nodelta"), A_STOP(1),
             A_TOOL_START(2, "toolu_C", "spaces"), A_JSON(2, "  "), A_STOP(2),
             A_END("tool_use"));
    ah_timeline *tl = decode_ok(AH_WIRE_ANTHROPIC, s);
    assert_int_equal(ah_timeline_count(tl), 3);
    for (size_t i = 0; i < 3; i++) {
        const ah_block *b = blk(tl, i);
        assert_int_equal(b->kind, AH_BLOCK_TOOL_USE);
        assert_true(b->closed);
        assert_string_equal(b->arguments, "{}");
        assert_true(cJSON_IsObject((const cJSON *)b->args));
        assert_null(((const cJSON *)b->args)->child);
    }
    assert_string_equal(blk(tl, 1)->name, "nodelta");
    ah_timeline_free(tl);
}

/* "Fragments split inside escape sequences: buffer the raw string, parse once at
 * content_block_stop." Fed in steps: before the stop the block is open, unparsed, holding
 * the exact concatenation; after it the arguments are parsed. */
static void anthropic_args_split_inside_escapes_parse_once_at_stop(void **state)
{
    (void)state;
    const char *head = A_TOOL_START(0, "toolu_E", "search");
    const char *frags = A_JSON(0, "{\\\"q\\\": \\\"caf\\\\u00") A_JSON(0, "e9 \\\\")
        A_JSON(0, "\\\"x\\\\\\\"\\\"}");
    ah_timeline *tl = ah_timeline_new();
    du_rec rec = {0};
    ah_decoder *d = NULL;
    ah_decoder_new(AH_WIRE_ANTHROPIC, tl, &du_hooks, &rec, &d, NULL, 0);
    assert_int_equal(ah_decoder_feed(d, A_START, strlen(A_START)), AH_OK);
    assert_int_equal(ah_decoder_feed(d, head, strlen(head)), AH_OK);
    assert_int_equal(ah_decoder_feed(d, frags, strlen(frags)), AH_OK);
    const ah_block *b = blk(tl, 0);
    assert_false(b->closed);
    assert_null(b->args);
    assert_string_equal(b->arguments, "{\"q\": \"caf\\u00e9 \\\"x\\\"\"}");
    /* the hook saw the same three fragments, unparsed */
    assert_int_equal(rec.delta_len[0], b->arguments_len);
    assert_string_equal(rec.deltas[0], b->arguments);
    assert_string_equal(rec.start_id[0], "toolu_E");
    assert_string_equal(rec.start_name[0], "search");
    assert_int_equal(ah_decoder_feed(d, A_STOP(0), strlen(A_STOP(0))), AH_OK);
    b = blk(tl, 0);
    assert_true(b->closed);
    assert_string_equal(arg_str(b, "q"), "caf\xc3\xa9 \"x\"");
    assert_int_equal(rec.ended[0], 1);
    du_rec_free(&rec);
    ah_decoder_free(d);
    ah_timeline_free(tl);
}

/* "message_start.usage.output_tokens is a placeholder; message_delta.usage is cumulative
 * and may also change input_tokens." */
static void anthropic_message_delta_usage_overrides_field_by_field(void **state)
{
    (void)state;
    const char *changes_input =
        EV("message_start", "{\"type\":\"message_start\",\"message\":{\"usage\":{"
                            "\"input_tokens\":43,\"output_tokens\":1}}}") A_TEXT_START(0)
            A_TEXT(0, "pong") A_STOP(0)
                EV("message_delta",
                   "{\"type\":\"message_delta\",\"delta\":{\"stop_reason\":"
                   "\"end_turn\"},\"usage\":{\"input_tokens\":61,\"output_tokens\":2}}")
                    EV("message_stop", "{\"type\":\"message_stop\"}");
    ah_timeline *tl = decode_ok(AH_WIRE_ANTHROPIC, changes_input);
    assert_int_equal(ah_timeline_input_tokens(tl), 61);
    assert_int_equal(ah_timeline_output_tokens(tl), 2);
    ah_timeline_free(tl);
    /* output only: input_tokens from message_start stays */
    char s[2048];
    snprintf(s, sizeof s, "%s%s%s%s%s", A_START, A_TEXT_START(0), A_TEXT(0, "x"),
             A_STOP(0), A_END("end_turn"));
    tl = decode_ok(AH_WIRE_ANTHROPIC, s);
    assert_int_equal(ah_timeline_input_tokens(tl), 43);
    assert_int_equal(ah_timeline_output_tokens(tl), 9);
    ah_timeline_free(tl);
}

/* "A refusal can arrive with zero content blocks; stop_details explains it." */
static void anthropic_refusal_with_zero_blocks(void **state)
{
    (void)state;
    const char *s =
        EV("message_start", "{\"type\":\"message_start\",\"message\":{\"usage\":{"
                            "\"input_tokens\":97,\"output_tokens\":5}}}")
            EV("message_delta",
               "{\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"refusal"
               "\",\"stop_details\":{\"type\":\"refusal\",\"category\":\"cyber\"}"
               "},\"usage\":{\"output_tokens\":0}}")
                EV("message_stop", "{\"type\":\"message_stop\"}");
    ah_timeline *tl = decode_ok(AH_WIRE_ANTHROPIC, s);
    assert_int_equal(ah_timeline_count(tl), 0);
    assert_string_equal(ah_timeline_stop_reason(tl), "refusal");
    assert_int_equal(ah_timeline_output_tokens(tl), 0);
    ah_partial p;
    assert_int_equal(ah_timeline_partial_drain(tl, &p), AH_OK);
    assert_int_equal(p.count, 0);
    assert_int_equal(p.dropped_blocks, 0);
    ah_partial_clear(&p);
    ah_timeline_free(tl);
}

/* "Server-tool result blocks and some server_tool_use blocks arrive complete in
 * content_block_start with no deltas; caller nests tool calls inside code execution."
 * They are recorded, never client tool calls, never committed by a drain. */
static void anthropic_server_tool_blocks_arrive_whole(void **state)
{
    (void)state;
    char s[4096];
    snprintf(
        s, sizeof s, "%s%s%s%s%s%s%s%s%s%s", A_START,
        EV("content_block_start",
           "{\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":"
           "\"server_tool_use\",\"id\":\"srvtoolu_1\",\"name\":\"web_fetch\",\"input\":{"
           "\"url\":\"https://"
           "example.com\"},\"caller\":{\"type\":\"code_execution_20260120\","
           "\"tool_id\":\"srvtoolu_0\"}}}"),
        A_STOP(0),
        EV("content_block_start",
           "{\"type\":\"content_block_start\",\"index\":1,\"content_block\":{\"type\":"
           "\"web_fetch_tool_result\",\"tool_use_id\":\"srvtoolu_1\",\"content\":{"
           "\"type\":"
           "\"web_fetch_tool_result_error\",\"error_code\":\"url_not_accessible\"}}}"),
        A_STOP(1),
        EV("content_block_start",
           "{\"type\":\"content_block_start\",\"index\":2,\"content_block\":{\"type\":"
           "\"container_upload\",\"file_id\":\"file_1\"}}"),
        A_STOP(2), A_TEXT_START(3), A_TEXT(3, "Done.") A_STOP(3), A_END("end_turn"));
    ah_timeline *tl = decode_ok(AH_WIRE_ANTHROPIC, s);
    assert_int_equal(ah_timeline_count(tl), 4);
    const ah_block *st = blk(tl, 0);
    assert_int_equal(st->kind, AH_BLOCK_SERVER_TOOL_USE);
    assert_string_equal(st->id, "srvtoolu_1");
    assert_string_equal(st->name, "web_fetch");
    assert_string_equal(arg_str(st, "url"), "https://example.com");
    const ah_block *res = blk(tl, 1);
    assert_int_equal(res->kind, AH_BLOCK_OPAQUE);
    assert_string_equal(res->type, "web_fetch_tool_result");
    cJSON *raw = cJSON_Parse(res->raw);
    assert_string_equal(cJSON_GetStringValue(cJSON_GetObjectItem(raw, "tool_use_id")),
                        "srvtoolu_1");
    cJSON_Delete(raw);
    assert_int_equal(blk(tl, 2)->kind, AH_BLOCK_OPAQUE); /* an unknown block type */
    assert_string_equal(blk(tl, 2)->type, "container_upload");
    ah_partial p;
    assert_int_equal(ah_timeline_partial_drain(tl, &p), AH_OK);
    assert_int_equal(p.count, 1);
    assert_ptr_equal(p.blocks[0], blk(tl, 3));
    assert_int_equal(p.dropped_blocks, 3);
    assert_int_equal(p.dropped_tool_uses, 0);
    ah_partial_clear(&p);
    ah_timeline_free(tl);
}

/* "With citations the answer is split over many text blocks and citations_delta precedes
 * the text it belongs to." */
static void anthropic_citations_precede_text_over_many_blocks(void **state)
{
    (void)state;
#define CITE(i)                                                                          \
    EV("content_block_delta",                                                            \
       "{\"type\":\"content_block_delta\",\"index\":" #i                                 \
       ",\"delta\":{\"type\":\"citations_delta\",\"citation\":{\"type\":"                \
       "\"web_search_result_location\",\"cited_text\":\"x\"}}}")
#define CTEXT_START(i)                                                                   \
    EV("content_block_start", "{\"type\":\"content_block_start\",\"index\":" #i          \
                              ",\"content_block\":{\"citations\":[],\"type\":\"text\","  \
                              "\"text\":\"\"}}")
    char s[4096];
    snprintf(s, sizeof s, "%s%s%s%s%s%s%s%s%s%s%s%s%s%s", A_START, A_TEXT_START(0),
             A_TEXT(0, "Intro. "), A_STOP(0), CTEXT_START(1), CITE(1),
             A_TEXT(1, "Fact one."), A_STOP(1), CTEXT_START(2), CITE(2), CITE(2),
             A_TEXT(2, " Fact two."), A_STOP(2), A_END("end_turn"));
    ah_timeline *tl = decode_ok(AH_WIRE_ANTHROPIC, s);
    assert_int_equal(ah_timeline_count(tl), 3);
    assert_int_equal(ah_timeline_citations(tl), 3);
    assert_text(blk(tl, 1), AH_BLOCK_TEXT, "Fact one.");
    assert_text(blk(tl, 2), AH_BLOCK_TEXT, " Fact two.");
    ah_timeline_free(tl);
#undef CITE
#undef CTEXT_START
}

/* "ping can appear between any two events, including inside a block." */
static void anthropic_ping_anywhere(void **state)
{
    (void)state;
    char s[4096];
    snprintf(s, sizeof s, "%s%s%s%s%s%s%s%s%s%s%s", PING, A_START, PING, A_TEXT_START(0),
             PING, A_TEXT(0, "a"), PING, A_TEXT(0, "b"), A_STOP(0), A_END("end_turn"),
             PING);
    ah_timeline *tl = decode_ok(AH_WIRE_ANTHROPIC, s);
    assert_int_equal(ah_timeline_count(tl), 1);
    assert_text(blk(tl, 0), AH_BLOCK_TEXT, "ab");
    ah_timeline_free(tl);
}

/* Thinking keeps its signature; redacted thinking keeps its data; both drain. */
static void anthropic_thinking_signature_and_redacted(void **state)
{
    (void)state;
    char path[512];
    snprintf(path, sizeof path, "%s/anthropic/reasoning", STREAMS_DIR);
    du_stream l = du_load(path, "reasoning", AH_WIRE_ANTHROPIC);
    ah_timeline *tl =
        du_decode(AH_WIRE_ANTHROPIC, l.sse, l.len, DU_WHOLE, NULL, NULL, NULL);
    assert_int_equal(ah_timeline_count(tl), 3);
    assert_text(blk(tl, 0), AH_BLOCK_REASONING, "Two plus two is four.");
    assert_string_equal(blk(tl, 0)->signature, "EqQBCkYIBxgCKkBhand");
    assert_int_equal(blk(tl, 1)->kind, AH_BLOCK_REASONING);
    assert_true(blk(tl, 1)->redacted);
    assert_string_equal(blk(tl, 1)->encrypted, "EmwKAhgBEgy3handred");
    ah_partial p;
    assert_int_equal(ah_timeline_partial_drain(tl, &p), AH_OK);
    assert_int_equal(p.count, 3);
    ah_partial_clear(&p);
    ah_timeline_free(tl);
    du_unload(&l);
}

/* ---- Chat Completions wire details
 * ------------------------------------------------------------ */

#define C_CHUNK(choices)                                                                 \
    DATA("{\"id\":\"c1\",\"object\":\"chat.completion.chunk\",\"choices\":" choices "}")
#define C_DELTA(delta)                                                                   \
    C_CHUNK("[{\"index\":0,\"delta\":" delta ",\"finish_reason\":null}]")
#define C_FINISH(reason)                                                                 \
    C_CHUNK("[{\"index\":0,\"delta\":{},\"finish_reason\":\"" reason "\"}]")
#define C_USAGE(p, c)                                                                    \
    DATA("{\"id\":\"c1\",\"choices\":[],\"usage\":{\"prompt_tokens\":" #p                \
         ",\"completion_tokens\":" #c ",\"total_tokens\":999}}")
#define C_DONE "data: [DONE]\n\n"

/* "The usage chunk has choices: [] (and Azure's first chunk too, with id: "", created:
 * 0): never index choices[0] blindly." */
static void chat_empty_choices_chunks(void **state)
{
    (void)state;
    const char *s = DATA(
        "{\"choices\":[],\"created\":0,\"id\":\"\",\"model\":\"\",\"object\":\"\","
        "\"prompt_filter_results\":[{\"prompt_index\":0,\"content_filter_results\":{}}]}")
        C_DELTA("{\"role\":\"assistant\",\"content\":\"\"}")
            C_DELTA("{\"content\":\"Hi\"}") C_FINISH("stop") C_USAGE(15, 3) C_DONE;
    ah_timeline *tl = decode_ok(AH_WIRE_OPENAI, s);
    assert_int_equal(ah_timeline_count(tl), 1);
    assert_text(blk(tl, 0), AH_BLOCK_TEXT, "Hi");
    assert_int_equal(ah_timeline_input_tokens(tl), 15);
    assert_int_equal(ah_timeline_output_tokens(tl), 3);
    ah_timeline_free(tl);
}

/* "Usage placement varies: separate empty-choices chunk, on the finish chunk (DeepSeek,
 * Groq — also duplicated in x_groq.usage), or on a later chunk with non-empty choices."
 */
static void chat_usage_placement_variants(void **state)
{
    (void)state;
    const char *streams[] = {
        /* separate chunk */
        C_DELTA("{\"content\":\"a\"}") C_FINISH("stop") C_USAGE(10, 2) C_DONE,
        /* on the finish chunk */
        C_DELTA("{\"content\":\"a\"}")
            DATA("{\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}],"
                 "\"usage\":{\"prompt_tokens\":10,\"completion_tokens\":2}}") C_DONE,
        /* only in x_groq.usage */
        C_DELTA("{\"content\":\"a\"}")
            DATA("{\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}],"
                 "\"x_groq\":{\"id\":\"req_1\",\"usage\":{\"prompt_tokens\":10,"
                 "\"completion_tokens\":2}}}") C_DONE,
        /* on a later chunk whose choices are not empty (OpenRouter) */
        C_DELTA("{\"content\":\"a\"}") C_FINISH("stop")
            DATA("{\"choices\":[{\"index\":0,\"delta\":{\"content\":\"\"},\"finish_"
                 "reason\":null,"
                 "\"native_finish_reason\":null}],\"usage\":{\"prompt_tokens\":10,"
                 "\"completion_tokens\":2}}") C_DONE,
    };
    for (size_t k = 0; k < sizeof streams / sizeof streams[0]; k++) {
        ah_timeline *tl = decode_ok(AH_WIRE_OPENAI, streams[k]);
        assert_int_equal(ah_timeline_input_tokens(tl), 10);
        assert_int_equal(ah_timeline_output_tokens(tl), 2);
        assert_string_equal(ah_timeline_stop_reason(tl), "stop");
        assert_text(blk(tl, 0), AH_BLOCK_TEXT, "a");
        ah_timeline_free(tl);
    }
}

/* "Tool-call fragments: merge by tool_calls[].index; id/name come once or together with
 * complete arguments in a single chunk, the first fragment may lack arguments entirely;
 * ids are not always call_…" */
static void chat_tool_fragments_merge_by_index(void **state)
{
    (void)state;
    const char *s = C_DELTA(
        "{\"role\":\"assistant\",\"content\":null,\"tool_calls\":[{\"index\":0,\"id\":"
        "\"call_A\",\"type\":\"function\",\"function\":{\"name\":\"alpha\","
        "\"arguments\":\"\"}}]}")
        C_DELTA(
            "{\"tool_calls\":[{\"index\":1,\"id\":\"llm_version:0\",\"function\":{"
            "\"name\":\"beta\"}}]}") C_DELTA("{\"tool_calls\":[{\"index\":0,\"function\":"
                                             "{\"arguments\":\"{\\\"x\\\":\"}}]}")
            C_DELTA("{\"tool_calls\":[{\"index\":1,\"type\":\"function\",\"function\":{"
                    "\"arguments\":\"{}\"}}]}")
                C_DELTA("{\"tool_calls\":[{\"index\":0,\"function\":{\"name\":\"alpha\","
                        "\"arguments\":"
                        "\" 1}\"}}]}") C_DELTA("{\"tool_calls\":[{\"index\":2,\"id\":"
                                               "\"tk85n1k4m\",\"type\":\"function\","
                                               "\"function\":{\"name\":\"gamma\","
                                               "\"arguments\":\"{\\\"y\\\":[true]}\"}}]}")
                    C_FINISH("tool_calls") C_DONE;
    ah_timeline *tl = decode_ok(AH_WIRE_OPENAI, s);
    assert_int_equal(ah_timeline_count(tl), 3);
    const ah_block *a = blk(tl, 0), *b = blk(tl, 1), *c = blk(tl, 2);
    assert_string_equal(a->id, "call_A");
    assert_string_equal(a->name, "alpha"); /* a repeated name is not appended */
    assert_string_equal(a->arguments, "{\"x\": 1}");
    assert_int_equal(cJSON_GetObjectItem((const cJSON *)a->args, "x")->valueint, 1);
    assert_string_equal(b->id, "llm_version:0");
    assert_string_equal(b->name, "beta");
    assert_string_equal(b->arguments, "{}");
    assert_string_equal(c->id, "tk85n1k4m");
    assert_true(cJSON_IsArray(cJSON_GetObjectItem((const cJSON *)c->args, "y")));
    ah_timeline_free(tl);
}

/* "delta.refusal (not content) carries refusals, with finish_reason stop." */
static void chat_refusal_field(void **state)
{
    (void)state;
    const char *s = C_DELTA("{\"role\":\"assistant\",\"content\":null,\"refusal\":\"\"}")
        C_DELTA("{\"content\":null,\"refusal\":\"I'm sorry\"}")
            C_DELTA("{\"refusal\":\", no.\"}") C_FINISH("stop") C_DONE;
    ah_timeline *tl = decode_ok(AH_WIRE_OPENAI, s);
    size_t n;
    assert_string_equal(ah_timeline_refusal(tl, &n), "I'm sorry, no.");
    assert_int_equal(n, strlen("I'm sorry, no."));
    assert_int_equal(ah_timeline_count(tl), 0);
    assert_string_equal(ah_timeline_stop_reason(tl), "stop");
    ah_timeline_free(tl);
}

/* "Reasoning arrives as delta.reasoning_content; xAI sends no finish_reason key until the
 * end" — and the reasoning block closes when the text starts. */
static void chat_reasoning_content_and_missing_finish_key(void **state)
{
    (void)state;
    const char *s = C_CHUNK("[{\"index\":0,\"delta\":{\"reasoning_content\":\"Think\"}}]")
        C_CHUNK("[{\"index\":0,\"delta\":{\"reasoning\":\"ing.\"}}]")
            C_CHUNK("[{\"index\":0,\"delta\":{\"content\":\"Answer\"}}]") C_FINISH("stop")
                C_DONE;
    ah_timeline *tl = decode_ok(AH_WIRE_OPENAI, s);
    assert_int_equal(ah_timeline_count(tl), 2);
    assert_text(blk(tl, 0), AH_BLOCK_REASONING, "Thinking.");
    assert_text(blk(tl, 1), AH_BLOCK_TEXT, "Answer");
    ah_timeline_free(tl);
    /* cut before finish_reason: the reasoning block is closed (text started), text is not
     */
    const char *cut =
        C_CHUNK("[{\"index\":0,\"delta\":{\"reasoning_content\":\"Think\"}}]")
            C_CHUNK("[{\"index\":0,\"delta\":{\"content\":\"Ans\"}}]");
    ah_status fin;
    tl = decode(AH_WIRE_OPENAI, cut, &fin, NULL);
    assert_int_equal(fin, AH_ERR_TRUNCATED);
    assert_true(blk(tl, 0)->closed);
    assert_false(blk(tl, 1)->closed);
    ah_timeline_free(tl);
}

/* "data: [DONE] is not JSON; obfuscation is random padding to ignore." Only choice 0. */
static void chat_done_sentinel_obfuscation_and_other_choices(void **state)
{
    (void)state;
    const char *s = C_CHUNK(
        "[{\"index\":1,\"delta\":{\"content\":\"other choice\"}},{\"index\":0,"
        "\"delta\":{\"content\":\"mine\"},\"obfuscation\":\"k3J9\"}]")
        DATA("{\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"length\"}],"
             "\"obfuscation\":\"Zq\"}") "data:[DONE]\n\n" DATA("{\"choices\":[{\"index\":"
                                                               "0,\"delta\":{\"content\":"
                                                               "\"after done\"}}]}");
    ah_timeline *tl = decode_ok(AH_WIRE_OPENAI, s);
    assert_int_equal(ah_timeline_count(tl), 1);
    assert_text(blk(tl, 0), AH_BLOCK_TEXT, "mine");
    assert_string_equal(ah_timeline_stop_reason(tl), "length");
    ah_timeline_free(tl);
}

/* ---- Responses wire details
 * ------------------------------------------------------------------ */

#define R_ADDED_MSG(oi, id)                                                              \
    "{\"type\":\"response.output_item.added\",\"output_index\":" #oi                     \
    ",\"item\":{\"id\":\"" id                                                            \
    "\",\"type\":\"message\",\"content\":[],\"role\":\"assistant\"}}"
#define R_TEXT(oi, id, t)                                                                \
    "{\"type\":\"response.output_text.delta\",\"item_id\":\"" id                         \
    "\",\"output_index\":" #oi ",\"content_index\":0,\"delta\":\"" t "\"}"
#define R_DONE_MSG(oi, id, t)                                                            \
    "{\"type\":\"response.output_item.done\",\"output_index\":" #oi                      \
    ",\"item\":{\"id\":\"" id                                                            \
    "\",\"type\":\"message\",\"content\":[{\"type\":\"output_text\",\"text\":\"" t       \
    "\"}]}}"
#define R_COMPLETED(output)                                                              \
    "{\"type\":\"response.completed\",\"response\":{\"status\":\"completed\","           \
    "\"output\":" output ",\"usage\":{\"input_tokens\":5,\"output_tokens\":6}}}"
#define REV(json)                                                                        \
    "event: x\n" DATA(json) /* the event name is not what is dispatched on */

/* "Not every server sends event: lines (OpenRouter) or omits [DONE]; comments occur:
 * dispatch on data.type." */
static void responses_no_event_lines_comments_and_done(void **state)
{
    (void)state;
    const char *s = ": OPENROUTER PROCESSING\n\n" DATA(
        R_ADDED_MSG(0, "msg_1")) ": keep-alive\n" DATA(R_TEXT(0, "msg_1", "4"))
        DATA(R_DONE_MSG(0, "msg_1", "4")) DATA(R_COMPLETED("[]")) "data: [DONE]\n\n";
    ah_timeline *tl = decode_ok(AH_WIRE_RESPONSES, s);
    assert_int_equal(ah_timeline_count(tl), 1);
    assert_text(blk(tl, 0), AH_BLOCK_TEXT, "4");
    assert_string_equal(ah_timeline_stop_reason(tl), "completed");
    ah_timeline_free(tl);
    /* event names that disagree with data.type do not matter either */
    const char *named = REV(R_ADDED_MSG(0, "msg_1")) REV(R_TEXT(0, "msg_1", "4"))
        REV(R_DONE_MSG(0, "msg_1", "4")) REV(R_COMPLETED("[]"));
    tl = decode_ok(AH_WIRE_RESPONSES, named);
    assert_text(blk(tl, 0), AH_BLOCK_TEXT, "4");
    ah_timeline_free(tl);
}

/* "Item ids are not stable on every server (Copilot rotates them per event): key on
 * output_index / content_index / summary_index." */
static void responses_rotating_item_ids_keyed_by_output_index(void **state)
{
    (void)state;
    const char *s = DATA(
        "{\"type\":\"response.output_item.added\",\"output_index\":0,\"item\":{\"id\":"
        "\"capture-id-3\",\"type\":\"reasoning\",\"summary\":[],\"encrypted_content\":"
        "null}}") DATA("{\"type\":\"response.reasoning_summary_text.delta\",\"item_id\":"
                       "\"capture-id-4\","
                       "\"output_index\":0,\"summary_index\":0,\"delta\":\"Counting\"}")
        DATA(
            "{\"type\":\"response.output_item.done\",\"output_index\":0,\"item\":{\"id\":"
            "\"capture-id-5\",\"type\":\"reasoning\",\"summary\":[{\"type\":\"summary_"
            "text\","
            "\"text\":\"Counting\"}]}}") DATA(R_ADDED_MSG(1, "capture-id-6"))
            DATA(R_TEXT(1, "capture-id-7", "There are ")) DATA(
                R_TEXT(1, "capture-id-8", "3."))
                DATA(R_DONE_MSG(1, "capture-id-9", "There are 3.")) DATA(R_COMPLETED(
                    "[{\"id\":\"capture-id-70\",\"type\":\"reasoning\",\"summary\":[]},"
                    "{\"id\":\"capture-id-71\",\"type\":\"message\"}]"));
    ah_timeline *tl = decode_ok(AH_WIRE_RESPONSES, s);
    assert_int_equal(ah_timeline_count(tl), 2);
    assert_text(blk(tl, 0), AH_BLOCK_REASONING, "Counting");
    assert_string_equal(blk(tl, 0)->item_id, "capture-id-70"); /* the last one seen */
    assert_text(blk(tl, 1), AH_BLOCK_TEXT, "There are 3.");
    ah_timeline_free(tl);
}

/* "encrypted_content of a reasoning item changes between output_item.added,
 * output_item.done and response.completed: keep the last one." Checked at each step. */
static void responses_encrypted_content_last_one_wins(void **state)
{
    (void)state;
    const char *steps[] = {
        DATA("{\"type\":\"response.output_item.added\",\"output_index\":0,\"item\":{"
             "\"id\":"
             "\"rs_1\",\"type\":\"reasoning\",\"summary\":[],\"encrypted_content\":"
             "\"one\"}}"),
        DATA(
            "{\"type\":\"response.output_item.done\",\"output_index\":0,\"item\":{\"id\":"
            "\"rs_1\",\"type\":\"reasoning\",\"summary\":[],\"encrypted_content\":"
            "\"two\"}}"),
        DATA(R_COMPLETED("[{\"id\":\"rs_1\",\"type\":\"reasoning\",\"summary\":[],"
                         "\"encrypted_content\":\"three\"}]")),
    };
    const char *want[] = {"one", "two", "three"};
    ah_timeline *tl = ah_timeline_new();
    ah_decoder *d = NULL;
    ah_decoder_new(AH_WIRE_RESPONSES, tl, NULL, NULL, &d, NULL, 0);
    for (size_t k = 0; k < 3; k++) {
        assert_int_equal(ah_decoder_feed(d, steps[k], strlen(steps[k])), AH_OK);
        assert_string_equal(blk(tl, 0)->encrypted, want[k]);
    }
    assert_int_equal(ah_decoder_finish(d, NULL), AH_OK);
    /* a reasoning item with no summary text is still a (closed, empty) reasoning block
     * that a drain keeps: its encrypted_content is what the next request needs */
    ah_partial p;
    assert_int_equal(ah_timeline_partial_drain(tl, &p), AH_OK);
    assert_int_equal(p.count, 1);
    ah_partial_clear(&p);
    ah_decoder_free(d);
    ah_timeline_free(tl);
}

/* "Function calls have two ids: item id (fc_…) and call_id (call_…); the tool result must
 * reference call_id." Also: .done repeats the full arguments. */
static void responses_call_id_is_the_tool_id(void **state)
{
    (void)state;
    const char *s = DATA(
        "{\"type\":\"response.output_item.added\",\"output_index\":0,\"item\":{\"id\":"
        "\"fc_1\",\"type\":\"function_call\",\"status\":\"in_progress\",\"arguments\":"
        "\"\","
        "\"call_id\":\"call_1\",\"name\":\"multiply\"}}")
        DATA("{\"type\":\"response.function_call_arguments.delta\",\"item_id\":\"fc_1\","
             "\"output_index\":0,\"delta\":\"{\\\"a\\\":\"}")
            DATA("{\"type\":\"response.function_call_arguments.delta\",\"item_id\":\"fc_"
                 "1\","
                 "\"output_index\":0,\"delta\":\"2}\"}")
                DATA("{\"type\":\"response.function_call_arguments.done\",\"item_id\":"
                     "\"fc_1\","
                     "\"output_index\":0,\"arguments\":\"{\\\"a\\\":2}\"}")
                    DATA("{\"type\":\"response.output_item.done\",\"output_index\":0,"
                         "\"item\":{\"id\":"
                         "\"fc_1\",\"type\":\"function_call\",\"arguments\":\"{\\\"a\\\":"
                         "2}\",\"call_id\":"
                         "\"call_1\",\"name\":\"multiply\"}}") DATA(R_COMPLETED("[]"));
    ah_timeline *tl = decode_ok(AH_WIRE_RESPONSES, s);
    const ah_block *b = blk(tl, 0);
    assert_int_equal(b->kind, AH_BLOCK_TOOL_USE);
    assert_string_equal(b->id, "call_1");
    assert_string_equal(b->item_id, "fc_1");
    assert_string_equal(b->name, "multiply");
    assert_int_equal(cJSON_GetObjectItem((const cJSON *)b->args, "a")->valueint, 2);
    ah_timeline_free(tl);
}

/* A tool name with an escaped NUL ("rec\u0000evil": cJSON stops at the NUL, so it would
 * have been the tool "rec") comes back as its prefix + U+FFFD in all three formats, a
 * name no declared tool has; a NUL elsewhere in the event leaves the name alone. */
static void tool_name_with_nul_is_not_its_prefix(void **state)
{
    (void)state;
    char s[4096];
    snprintf(s, sizeof s, "%s%s%s%s%s", A_START,
             A_TOOL_START(0, "toolu_A", "rec\\u0000evil"), A_JSON(0, "{}"), A_STOP(0),
             A_END("tool_use"));
    ah_timeline *tl = decode_ok(AH_WIRE_ANTHROPIC, s);
    assert_string_equal(blk(tl, 0)->name, "rec\xEF\xBF\xBD");
    ah_timeline_free(tl);
    snprintf(s, sizeof s, "%s%s%s%s%s", A_START,
             EV("content_block_start",
                "{\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":"
                "\"tool_use\",\"id\":\"toolu_B\",\"name\":\"rec\",\"input\":{\"note\":"
                "\"rec\\u0000\"}}}"),
             A_STOP(0), A_END("tool_use"), "");
    tl = decode_ok(AH_WIRE_ANTHROPIC, s);
    assert_string_equal(blk(tl, 0)->name, "rec"); /* the NUL is not in the name */
    ah_timeline_free(tl);

    const char *chat =
        C_DELTA("{\"role\":\"assistant\",\"content\":null,\"tool_calls\":[{\"index\":0,"
                "\"id\":\"call_A\",\"type\":\"function\",\"function\":{\"name\":"
                "\"rec\\u0000evil\",\"arguments\":\"{}\"}}]}") C_FINISH("tool_calls") C_DONE;
    tl = decode_ok(AH_WIRE_OPENAI, chat);
    assert_string_equal(blk(tl, 0)->name, "rec\xEF\xBF\xBD");
    ah_timeline_free(tl);

    const char *resp = DATA(
        "{\"type\":\"response.output_item.added\",\"output_index\":0,\"item\":{\"id\":"
        "\"fc_1\",\"type\":\"function_call\",\"status\":\"in_progress\",\"arguments\":"
        "\"\",\"call_id\":\"call_1\",\"name\":\"rec\\u0000evil\"}}")
        DATA("{\"type\":\"response.output_item.done\",\"output_index\":0,\"item\":{\"id\":"
             "\"fc_1\",\"type\":\"function_call\",\"arguments\":\"{}\",\"call_id\":"
             "\"call_1\",\"name\":\"rec\\u0000evil\"}}") DATA(R_COMPLETED("[]"));
    tl = decode_ok(AH_WIRE_RESPONSES, resp);
    assert_string_equal(blk(tl, 0)->name, "rec\xEF\xBF\xBD");
    ah_timeline_free(tl);
}

/* "Errors come as an error event followed by response.failed; usage is then null." */
static void responses_error_then_failed(void **state)
{
    (void)state;
    const char *s = DATA(
        "{\"type\":\"error\",\"sequence_number\":2,\"error\":{\"type\":\"insufficient_"
        "quota"
        "\",\"code\":\"insufficient_quota\",\"message\":\"You exceeded your quota.\","
        "\"param\":null}}") DATA("{\"type\":\"response.failed\",\"response\":{\"status\":"
                                 "\"failed\",\"error\":{"
                                 "\"code\":\"insufficient_quota\",\"message\":\"quota\"},"
                                 "\"output\":[],\"usage\":"
                                 "null}}");
    ah_status fin;
    ah_error err;
    ah_timeline *tl = decode(AH_WIRE_RESPONSES, s, &fin, &err);
    assert_int_equal(fin, AH_ERR_PROVIDER);
    assert_int_equal(err.kind, AH_EK_STREAM);
    assert_string_equal(err.provider_type, "insufficient_quota");
    assert_non_null(strstr(err.message, "You exceeded your quota."));
    assert_true(ah_timeline_finished(tl));
    assert_string_equal(ah_timeline_stop_reason(tl), "failed");
    assert_int_equal(ah_timeline_input_tokens(tl), -1);
    assert_int_equal(ah_timeline_output_tokens(tl), -1);
    ah_timeline_free(tl);
    /* response.failed alone still says why */
    const char *alone =
        DATA("{\"type\":\"response.failed\",\"response\":{\"status\":\"failed\","
             "\"error\":{\"code\":\"server_error\",\"message\":\"boom\"}}}");
    tl = decode(AH_WIRE_RESPONSES, alone, &fin, &err);
    assert_int_equal(fin, AH_ERR_PROVIDER);
    assert_string_equal(err.provider_type, "server_error");
    ah_timeline_free(tl);
}

/* "Reasoning may be a summary or raw text, and its .done events can arrive after later
 * items have finished." The reasoning block stays open until its own output_item.done. */
static void responses_raw_reasoning_done_after_later_items(void **state)
{
    (void)state;
    const char *s = DATA(
        "{\"type\":\"response.output_item.added\",\"output_index\":0,\"item\":{\"type\":"
        "\"reasoning\",\"id\":\"rs_tmp\",\"summary\":[]}}")
        DATA("{\"type\":\"response.reasoning_text.delta\",\"output_index\":0,\"item_id\":"
             "\"rs_tmp\",\"content_index\":0,\"delta\":\"The user\"}")
            DATA(R_ADDED_MSG(1, "msg_tmp")) DATA(R_TEXT(1, "msg_tmp", "4"))
                DATA(R_DONE_MSG(1, "msg_tmp", "4"))
                    DATA("{\"type\":\"response.reasoning_text.done\",\"output_index\":0,"
                         "\"item_id\":"
                         "\"rs_tmp\",\"content_index\":0,\"text\":\"The user\"}")
                        DATA("{\"type\":\"response.output_item.done\",\"output_index\":0,"
                             "\"item\":{\"type\":"
                             "\"reasoning\",\"id\":\"rs_tmp\",\"summary\":[],\"content\":"
                             "[{\"type\":"
                             "\"reasoning_text\",\"text\":\"The user\"}]}}")
                            DATA(R_COMPLETED(
                                "[{\"type\":\"reasoning\",\"id\":\"rs_final\"}]"));
    ah_timeline *tl = decode_ok(AH_WIRE_RESPONSES, s);
    assert_int_equal(ah_timeline_count(tl), 2);
    assert_text(blk(tl, 0), AH_BLOCK_REASONING,
                "The user"); /* .done not appended again */
    assert_text(blk(tl, 1), AH_BLOCK_TEXT, "4");
    assert_string_equal(blk(tl, 0)->item_id, "rs_final");
    ah_timeline_free(tl);
    /* cut before the reasoning item is done: the text is complete, the reasoning is not
     */
    size_t cut = strstr(s, "response.reasoning_text.done") - s;
    while (cut > 0 && !(s[cut - 1] == '\n' && s[cut - 2] == '\n'))
        cut--;
    ah_status fin;
    tl = du_decode(AH_WIRE_RESPONSES, s, cut, DU_WHOLE, NULL, &fin, NULL);
    assert_int_equal(fin, AH_ERR_TRUNCATED);
    assert_false(blk(tl, 0)->closed);
    assert_true(blk(tl, 1)->closed);
    ah_partial p;
    assert_int_equal(ah_timeline_partial_drain(tl, &p), AH_OK);
    assert_int_equal(p.count, 1);
    assert_ptr_equal(p.blocks[0], blk(tl, 1));
    assert_int_equal(p.dropped_blocks, 1);
    assert_int_equal(p.dropped_bytes, strlen("The user"));
    ah_partial_clear(&p);
    ah_timeline_free(tl);
}

/* Several summary parts of one reasoning item are one block joined by "\n\n". */
static void responses_summary_parts_join(void **state)
{
    (void)state;
    char path[512];
    snprintf(path, sizeof path, "%s/responses/reasoning", STREAMS_DIR);
    du_stream l = du_load(path, "reasoning", AH_WIRE_RESPONSES);
    ah_timeline *tl =
        du_decode(AH_WIRE_RESPONSES, l.sse, l.len, DU_BYTES, NULL, NULL, NULL);
    assert_text(blk(tl, 0), AH_BLOCK_REASONING,
                "**Adding** numbers\n\nTwo plus two is four.");
    assert_string_equal(blk(tl, 0)->encrypted, "gAAAA-three");
    assert_string_equal(blk(tl, 0)->item_id, "rs_HandD");
    ah_timeline_free(tl);
    du_unload(&l);
}

/* response.incomplete (max_output_tokens) ends the stream cleanly; the truncated message
 * is complete as far as the format goes, and the stop reason says why. */
static void responses_incomplete_is_a_clean_end(void **state)
{
    (void)state;
    const char *s = DATA(R_ADDED_MSG(0, "m")) DATA(R_TEXT(0, "m", "Trunc"))
        DATA("{\"type\":\"response.incomplete\",\"response\":{\"status\":\"incomplete\","
             "\"incomplete_details\":{\"reason\":\"max_output_tokens\"},\"usage\":{"
             "\"input_tokens\":9,\"output_tokens\":16}}}");
    ah_timeline *tl = decode_ok(AH_WIRE_RESPONSES, s);
    assert_string_equal(ah_timeline_stop_reason(tl), "incomplete");
    assert_true(blk(tl, 0)->closed);
    assert_int_equal(ah_timeline_output_tokens(tl), 16);
    ah_timeline_free(tl);
}

/* ---- completion rules and hook order
 * --------------------------------------------------------- */

typedef struct order_log {
    char s[2048];
} order_log;

static void log_start(void *ud, size_t i, ah_block_kind k, const char *id,
                      const char *name)
{
    order_log *l = ud;
    size_t n = strlen(l->s);
    snprintf(l->s + n, sizeof l->s - n, "S%zu:%s%s%s;", i, ah_block_kind_name(k),
             id ? ":" : "", id ? id : "");
    (void)name;
}

static void log_delta(void *ud, size_t i, ah_block_kind k, const char *t, size_t len)
{
    order_log *l = ud;
    size_t n = strlen(l->s);
    snprintf(l->s + n, sizeof l->s - n, "D%zu:%.*s;", i, (int)len, t);
    (void)k;
}

static void log_end(void *ud, size_t i, const ah_block *b)
{
    order_log *l = ud;
    size_t n = strlen(l->s);
    snprintf(l->s + n, sizeof l->s - n, "E%zu;", i);
    (void)b;
}

static const ah_decoder_hooks order_hooks = {log_start, log_delta, log_end};

static void hook_order(ah_wire wire, const char *s, const char *want)
{
    order_log log = {{0}};
    ah_timeline *tl = ah_timeline_new();
    ah_decoder *d = NULL;
    ah_decoder_new(wire, tl, &order_hooks, &log, &d, NULL, 0);
    assert_int_equal(ah_decoder_feed(d, s, strlen(s)), AH_OK);
    ah_decoder_finish(d, NULL);
    assert_string_equal(log.s, want);
    ah_decoder_free(d);
    ah_timeline_free(tl);
}

/* Chat: a text block closes when a tool call starts; tool calls close at finish_reason.
 */
static void chat_text_closes_when_tool_starts(void **state)
{
    (void)state;
    hook_order(
        AH_WIRE_OPENAI,
        C_DELTA("{\"content\":\"Hi\"}") C_DELTA(
            "{\"tool_calls\":[{\"index\":0,\"id\":\"c0\",\"function\":{\"name\":"
            "\"f\",\"arguments\":\"{}\"}}]}")
            C_DELTA("{\"tool_calls\":[{\"index\":1,\"id\":\"c1\",\"function\":{\"name\":"
                    "\"g\",\"arguments\":\"[]\"}}]}") C_FINISH("tool_calls") C_DONE,
        "S0:text;D0:Hi;E0;S1:tool_use:c0;D1:{};S2:tool_use:c1;D2:[];E1;E2;");
}

/* Anthropic: blocks close exactly at content_block_stop, not before. */
static void anthropic_blocks_close_at_stop(void **state)
{
    (void)state;
    char s[2048];
    snprintf(s, sizeof s, "%s%s%s%s%s%s%s%s", A_START, A_TEXT_START(0), A_TEXT(0, "a"),
             A_TOOL_START(1, "t1", "f"), A_JSON(1, "{}"), A_STOP(0), A_STOP(1),
             A_END("tool_use"));
    hook_order(AH_WIRE_ANTHROPIC, s, "S0:text;D0:a;S1:tool_use:t1;D1:{};E0;E1;");
}

/* Responses: text closes at output_item.done, not at output_text.done /
 * content_part.done. */
static void responses_blocks_close_at_item_done(void **state)
{
    (void)state;
    hook_order(AH_WIRE_RESPONSES,
               DATA(R_ADDED_MSG(0, "m")) DATA(R_TEXT(0, "m", "a")) DATA(
                   "{\"type\":\"response.output_text.done\",\"output_index\":0,"
                   "\"content_index\":0,\"text\":\"a\"}")
                   DATA("{\"type\":\"response.content_part.done\",\"output_index\":0,"
                        "\"content_index\":0,\"part\":{\"type\":\"output_text\",\"text\":"
                        "\"a\"}}") "data: "
                                   "{\"type\":\"response.in_progress\",\"response\":{}}"
                                   "\n\n" DATA(R_DONE_MSG(0, "m", "a")),
               "S0:text;D0:a;E0;");
}

/* A server that sends only the .done events (no deltas) still yields the content. */
static void responses_done_events_fill_missing_content(void **state)
{
    (void)state;
    const char *s = DATA(R_ADDED_MSG(0, "m")) DATA(
        "{\"type\":\"response.output_text.done\",\"output_index\":0,\"content_index\":0,"
        "\"text\":\"whole\"}") DATA(R_DONE_MSG(0, "m", "whole"))
        DATA("{\"type\":\"response.output_item.done\",\"output_index\":1,\"item\":{"
             "\"id\":\"fc"
             "\",\"type\":\"function_call\",\"arguments\":\"{\\\"k\\\":1}\",\"call_id\":"
             "\"c\","
             "\"name\":\"f\"}}")
            DATA("{\"type\":\"response.output_item.done\",\"output_index\":2,\"item\":{"
                 "\"id\":\"ws"
                 "\",\"type\":\"web_search_call\",\"status\":\"completed\"}}")
                DATA(R_COMPLETED("[]"));
    ah_timeline *tl = decode_ok(AH_WIRE_RESPONSES, s);
    assert_int_equal(ah_timeline_count(tl), 3);
    assert_text(blk(tl, 0), AH_BLOCK_TEXT, "whole");
    assert_string_equal(blk(tl, 1)->id, "c");
    assert_string_equal(blk(tl, 1)->arguments, "{\"k\":1}");
    assert_int_equal(blk(tl, 2)->kind, AH_BLOCK_OPAQUE);
    assert_string_equal(blk(tl, 2)->type, "web_search_call");
    ah_timeline_free(tl);
}

/* ---- partial drain
 * --------------------------------------------------------------------------- */

/* Cut inside a tool call after a complete text: one text kept; the tool call, its bytes
 * and the open text after it are dropped and counted. */
static void drain_keeps_closed_text_drops_tools(void **state)
{
    (void)state;
    char s[4096];
    snprintf(s, sizeof s, "%s%s%s%s%s%s%s%s%s%s%s", A_START, A_TEXT_START(0),
             A_TEXT(0, "Complete."), A_STOP(0), A_TOOL_START(1, "t1", "done_tool"),
             A_JSON(1, "{}"), A_STOP(1), A_TOOL_START(2, "t2", "open_tool"),
             A_JSON(2, "{\\\"a\\\":"), A_TEXT_START(3), A_TEXT(3, "open text"));
    ah_status fin;
    ah_error err;
    ah_timeline *tl = decode(AH_WIRE_ANTHROPIC, s, &fin, &err);
    assert_int_equal(fin, AH_ERR_TRUNCATED);
    assert_int_equal(err.kind, AH_EK_STREAM);
    assert_non_null(strstr(err.message, "ended before message_stop"));
    ah_partial p;
    assert_int_equal(ah_timeline_partial_drain(tl, &p), AH_OK);
    assert_int_equal(p.count, 1);
    assert_text(p.blocks[0], AH_BLOCK_TEXT, "Complete.");
    assert_int_equal(p.kept_bytes, 9);
    assert_int_equal(p.dropped_blocks, 3);
    assert_int_equal(p.dropped_tool_uses, 2);
    assert_int_equal(p.dropped_bytes, 2 + 5 + 9); /* "{}", "{\"a\":", "open text" */
    ah_partial_clear(&p);
    ah_partial_clear(NULL);
    ah_timeline_free(tl);
}

static void drain_omits_empty_closed_text_and_handles_empty_timeline(void **state)
{
    (void)state;
    char s[2048];
    snprintf(s, sizeof s, "%s%s%s%s%s%s", A_START, A_TEXT_START(0), A_STOP(0),
             A_TEXT_START(1), A_TEXT(1, "x"), A_STOP(1));
    ah_timeline *tl =
        du_decode(AH_WIRE_ANTHROPIC, s, strlen(s), DU_WHOLE, NULL, NULL, NULL);
    ah_partial p;
    assert_int_equal(ah_timeline_partial_drain(tl, &p), AH_OK);
    assert_int_equal(p.count, 1);
    assert_ptr_equal(p.blocks[0], blk(tl, 1));
    assert_int_equal(p.dropped_blocks, 0);
    ah_partial_clear(&p);
    ah_timeline_reset(tl);
    assert_int_equal(ah_timeline_count(tl), 0);
    assert_int_equal(ah_timeline_partial_drain(tl, &p), AH_OK);
    assert_int_equal(p.count, 0);
    assert_null(p.blocks);
    ah_partial_clear(&p);
    assert_int_equal(ah_timeline_partial_drain(NULL, &p), AH_OK);
    assert_int_equal(p.count, 0);
    ah_timeline_free(tl);
}

/* A timeline is reusable after reset: the same stream decodes to the same result. */
static void timeline_reset_and_reuse(void **state)
{
    (void)state;
    char path[512];
    snprintf(path, sizeof path, "%s/openai/text-tool", STREAMS_DIR);
    du_stream l = du_load(path, "text-tool", AH_WIRE_OPENAI);
    ah_timeline *tl = ah_timeline_new();
    for (int round = 0; round < 3; round++) {
        ah_timeline_reset(tl);
        assert_int_equal(ah_timeline_count(tl), 0);
        assert_null(ah_timeline_stop_reason(tl));
        assert_int_equal(ah_timeline_input_tokens(tl), -1);
        assert_false(ah_timeline_finished(tl));
        ah_decoder *d = NULL;
        ah_decoder_new(AH_WIRE_OPENAI, tl, NULL, NULL, &d, NULL, 0);
        assert_int_equal(ah_decoder_feed(d, l.sse, l.len), AH_OK);
        assert_int_equal(ah_decoder_finish(d, NULL), AH_OK);
        ah_decoder_free(d);
        cJSON *got = du_to_expect(AH_WIRE_OPENAI, tl);
        du_assert_json_equal(l.expect, got, "reused timeline");
        cJSON_Delete(got);
    }
    ah_timeline_free(tl);
    du_unload(&l);
}

/* ---- malformed input
 * --------------------------------------------------------------------------- */

/* Bad JSON: AH_ERR_PARSE naming the format, the event type and the byte offset where the
 * event ended; sticky for further feeds and for finish; what came before stays in the
 * timeline. */
static void bad_json_names_event_and_offset(void **state)
{
    (void)state;
    static const struct {
        ah_wire wire;
        const char *good, *bad, *type;
    } cases[] = {
        {AH_WIRE_ANTHROPIC,
         EV("message_start", "{\"type\":\"message_start\",\"message\":{}}")
             EV("content_block_start",
                "{\"type\":\"content_block_start\",\"index\":0,"
                "\"content_block\":{\"type\":\"text\",\"text\":\"kept\"}}"),
         EV("content_block_delta",
            "{\"type\":\"content_block_delta\",\"index\":0,\"delta\":{"),
         "content_block_delta"},
        {AH_WIRE_OPENAI, C_DELTA("{\"content\":\"kept\"}"),
         "data: {\"choices\":[{\"index\":0,}\n\n", "message"},
        {AH_WIRE_RESPONSES, DATA(R_ADDED_MSG(0, "m")) DATA(R_TEXT(0, "m", "kept")),
         "event: response.output_text.delta\ndata: "
         "{\"type\":\"response.output_text.delta\"\n\n",
         "response.output_text.delta"},
    };
    for (size_t k = 0; k < 3; k++) {
        char s[2048];
        snprintf(s, sizeof s, "%s%s", cases[k].good, cases[k].bad);
        ah_timeline *tl = ah_timeline_new();
        ah_decoder *d = NULL;
        ah_decoder_new(cases[k].wire, tl, NULL, NULL, &d, NULL, 0);
        assert_int_equal(ah_decoder_feed(d, s, strlen(s)), AH_ERR_PARSE);
        const ah_error *e = ah_decoder_error(d);
        assert_non_null(e);
        assert_int_equal(e->kind, AH_EK_STREAM);
        char want[64];
        snprintf(want, sizeof want, "ending at byte %zu", strlen(s));
        if (!strstr(e->message, want) || !strstr(e->message, cases[k].type) ||
            !strstr(e->message, "malformed JSON") ||
            !strstr(e->message, ah_wire_name(cases[k].wire)))
            print_error("message: %s\n", e->message);
        assert_non_null(strstr(e->message, want));
        assert_non_null(strstr(e->message, cases[k].type));
        assert_non_null(strstr(e->message, "malformed JSON"));
        assert_non_null(strstr(e->message, ah_wire_name(cases[k].wire)));
        /* sticky */
        assert_int_equal(ah_decoder_feed(d, cases[k].good, strlen(cases[k].good)),
                         AH_ERR_PARSE);
        ah_error fe;
        assert_int_equal(ah_decoder_finish(d, &fe), AH_ERR_PARSE);
        assert_string_equal(fe.message, e->message);
        assert_string_equal(blk(tl, 0)->text, "kept");
        ah_decoder_free(d);
        ah_timeline_free(tl);
    }
}

/* Unknown event types, delta types and block types are ignored (providers add new ones);
 * the result is as if they were absent. */
static void unknown_types_are_ignored(void **state)
{
    (void)state;
    char s[4096];
    snprintf(s, sizeof s, "%s%s%s%s%s%s%s", A_START,
             EV("message_sparkle", "{\"type\":\"message_sparkle\",\"x\":[1,2]}"),
             A_TEXT_START(0),
             EV("content_block_delta", "{\"type\":\"content_block_delta\",\"index\":0,"
                                       "\"delta\":{\"type\":\"glitter_delta\",\"g\":1}}"),
             A_TEXT(0, "ok"), A_STOP(0), A_END("end_turn"));
    ah_timeline *tl = decode_ok(AH_WIRE_ANTHROPIC, s);
    assert_int_equal(ah_timeline_count(tl), 1);
    assert_text(blk(tl, 0), AH_BLOCK_TEXT, "ok");
    ah_timeline_free(tl);

    tl = decode_ok(AH_WIRE_RESPONSES,
                   DATA("{\"type\":\"response.brand_new.delta\",\"output_index\":0}")
                       DATA("{\"type\":\"codex.rate_limits\",\"x\":1}")
                           DATA(R_ADDED_MSG(0, "m")) DATA(R_TEXT(0, "m", "ok"))
                               DATA(R_DONE_MSG(0, "m", "ok")) DATA(R_COMPLETED("[]")));
    assert_text(blk(tl, 0), AH_BLOCK_TEXT, "ok");
    ah_timeline_free(tl);

    tl = decode_ok(
        AH_WIRE_OPENAI,
        DATA("{\"choices\":[{\"index\":0,\"delta\":{\"content\":\"ok\",\"audio\":{"
             "\"id\":1},\"annotations\":[]},\"weird\":true}],\"system_fingerprint\":"
             "\"fp\"}") C_FINISH("stop") C_DONE);
    assert_text(blk(tl, 0), AH_BLOCK_TEXT, "ok");
    ah_timeline_free(tl);
}

/* A malformed event of a known type is an error naming what is wrong. */
static void malformed_known_events_are_errors(void **state)
{
    (void)state;
    static const struct {
        ah_wire wire;
        const char *stream, *needle;
    } cases[] = {
        {AH_WIRE_ANTHROPIC, DATA("{\"x\":1}"), "no \"type\""},
        {AH_WIRE_ANTHROPIC, DATA("[1,2]"), "not an object"},
        {AH_WIRE_ANTHROPIC, DATA("\"content_block_delta\""), "not an object"},
        {AH_WIRE_ANTHROPIC, DATA("{\"type\":\"message_start\"}"), "\"message\""},
        {AH_WIRE_ANTHROPIC, DATA("{\"type\":\"content_block_start\",\"index\":0}"),
         "content_block"},
        {AH_WIRE_ANTHROPIC, A_TEXT(0, "x"), "not open"},
        {AH_WIRE_ANTHROPIC,
         A_TEXT_START(0) DATA("{\"type\":\"content_block_delta\",\"delta\":{"
                              "\"type\":\"text_delta\",\"text\":\"x\"}}"),
         "index"},
        {AH_WIRE_ANTHROPIC,
         A_TEXT_START(0) DATA("{\"type\":\"content_block_delta\",\"index\":"
                              "-1,\"delta\":{\"type\":\"text_delta\"}}"),
         "index"},
        {AH_WIRE_ANTHROPIC,
         A_TEXT_START(0) DATA("{\"type\":\"content_block_delta\",\"index\":0}"), "delta"},
        {AH_WIRE_ANTHROPIC,
         A_TEXT_START(0) DATA("{\"type\":\"content_block_delta\",\"index\":0,"
                              "\"delta\":{\"type\":\"text_delta\",\"text\":5}}"),
         "text_delta without"},
        {AH_WIRE_ANTHROPIC, A_TEXT_START(0) A_JSON(0, "{}"), "input_json_delta for text"},
        {AH_WIRE_ANTHROPIC, A_TOOL_START(0, "t", "f") A_TEXT(0, "x"),
         "text_delta for tool_use"},
        {AH_WIRE_ANTHROPIC,
         A_TOOL_START(0, "t", "f")
             DATA("{\"type\":\"content_block_delta\",\"index\":0,\"delta\""
                  ":{\"type\":\"input_json_delta\",\"partial_json\":{}}}"),
         "partial_json"},
        {AH_WIRE_ANTHROPIC, A_TEXT_START(0) A_TEXT_START(0), "still open"},
        {AH_WIRE_ANTHROPIC, A_STOP(3), "not open"},
        {AH_WIRE_ANTHROPIC, A_TEXT_START(0) A_STOP(0) A_TEXT(0, "late"), "not open"},
        {AH_WIRE_ANTHROPIC,
         DATA("{\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":"
              "\"tool_use\",\"name\":\"f\"}}"),
         "without \"id\""},
        {AH_WIRE_ANTHROPIC,
         DATA("{\"type\":\"content_block_start\",\"index\":0,\"content_block\":{}}"),
         "no \"type\""},
        {AH_WIRE_OPENAI, DATA("{\"choices\":{}}"), "not an array"},
        {AH_WIRE_OPENAI, DATA("{\"choices\":[7]}"), "not an object"},
        {AH_WIRE_OPENAI, C_DELTA("{\"tool_calls\":{}}"), "not an array"},
        {AH_WIRE_OPENAI, C_DELTA("{\"tool_calls\":[3]}"), "not an object"},
        {AH_WIRE_OPENAI,
         C_DELTA(
             "{\"tool_calls\":[{\"index\":0,\"id\":\"a\",\"function\":{\"name\":\"f\","
             "\"arguments\":\"{}\"}}]}") C_FINISH("tool_calls")
             C_DELTA(
                 "{\"tool_calls\":[{\"index\":0,\"function\":{\"arguments\":\"x\"}}]}"),
         "after it closed"},
        {AH_WIRE_OPENAI,
         C_DELTA("{\"content\":\"a\"}") C_FINISH("stop") C_DELTA("{\"content\":\"b\"}"),
         "content after finish_reason"},
        {AH_WIRE_RESPONSES,
         DATA("{\"type\":\"response.output_text.delta\",\"output_index\":0}"),
         "\"delta\""},
        {AH_WIRE_RESPONSES,
         DATA("{\"type\":\"response.output_text.delta\",\"delta\":\"x\"}"),
         "output_index"},
        {AH_WIRE_RESPONSES,
         DATA("{\"type\":\"response.function_call_arguments.delta\",\"output_index\":4,"
              "\"delta\":\"{\"}"),
         "no function_call"},
        {AH_WIRE_RESPONSES,
         DATA("{\"type\":\"response.output_item.added\",\"output_index\":0}"),
         "\"item\""},
        {AH_WIRE_RESPONSES,
         DATA("{\"type\":\"response.output_item.added\",\"output_index\":0,\"item\":{}}"),
         "no \"type\""},
        {AH_WIRE_RESPONSES,
         DATA("{\"type\":\"response.output_item.added\",\"output_index\":0,\"item\":{"
              "\"type\":"
              "\"reasoning\"}}")
             DATA("{\"type\":\"response.output_item.added\",\"output_index\""
                  ":0,\"item\":{\"type\":\"reasoning\"}}"),
         "added twice"},
        {AH_WIRE_RESPONSES,
         DATA(R_ADDED_MSG(0, "m")) DATA(R_DONE_MSG(0, "m", "a"))
             DATA(R_TEXT(0, "m", "late")),
         "after it was done"},
        {AH_WIRE_RESPONSES, DATA("{\"type\":\"response.completed\"}"), "\"response\""},
        {AH_WIRE_RESPONSES,
         DATA("{\"type\":\"response.output_item.added\",\"output_index\":0,\"item\":{"
              "\"type\":"
              "\"function_call\",\"call_id\":\"c\",\"name\":\"f\"}}")
             DATA(
                 "{\"type\":\"response.reasoning_summary_text.delta\",\"output_index\":0,"
                 "\"delta\":\"x\"}"),
         "reasoning text for output 0"},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        ah_error err;
        ah_status st = decode_status(cases[k].wire, cases[k].stream, &err);
        if (st != AH_ERR_PARSE || !strstr(err.message, cases[k].needle))
            print_error("case %zu: status %s, message: %s\n", k, ah_status_name(st),
                        err.message);
        assert_int_equal(st, AH_ERR_PARSE);
        assert_int_equal(err.kind, AH_EK_STREAM);
        assert_non_null(strstr(err.message, cases[k].needle));
        assert_non_null(strstr(err.message, "ending at byte"));
    }
}

/* Tool arguments that never become valid JSON are an error at close, naming the tool; the
 * block stays open, so a drain drops it. */
static void never_closing_tool_arguments(void **state)
{
    (void)state;
    char a[2048];
    snprintf(a, sizeof a, "%s%s%s%s", A_START, A_TOOL_START(0, "toolu_X", "broken"),
             A_JSON(0, "{\\\"a\\\": \\\"unterminated"), A_STOP(0));
    static const struct {
        ah_wire wire;
        const char *stream;
    } cases[] = {
        {AH_WIRE_ANTHROPIC, NULL},
        {AH_WIRE_OPENAI,
         C_DELTA("{\"tool_calls\":[{\"index\":0,\"id\":\"call_X\",\"function\""
                 ":{\"name\":\"broken\",\"arguments\":\"{\\\"a\\\": [1,\"}}]}")
             C_FINISH("tool_calls") C_DONE},
        {AH_WIRE_RESPONSES,
         DATA(
             "{\"type\":\"response.output_item.added\",\"output_index\":0,\"item\":{"
             "\"type\":"
             "\"function_call\",\"id\":\"fc\",\"call_id\":\"call_X\",\"name\":\"broken\","
             "\"arguments\":\"\"}}") DATA("{\"type\":\"response.function_call_arguments."
                                          "delta\",\"output_index\":0,"
                                          "\"delta\":\"{\\\"a\\\"\"}")
             DATA("{\"type\":\"response.output_item.done\",\"output_index\":0,\"item\":{"
                  "\"type\":"
                  "\"function_call\",\"id\":\"fc\",\"call_id\":\"call_X\",\"name\":"
                  "\"broken\"}}")},
    };
    for (size_t k = 0; k < 3; k++) {
        const char *s = cases[k].stream ? cases[k].stream : a;
        ah_status fin;
        ah_error err;
        ah_timeline *tl =
            du_decode(cases[k].wire, s, strlen(s), DU_BYTES, NULL, &fin, &err);
        assert_int_equal(fin, AH_ERR_PARSE);
        assert_int_equal(err.kind, AH_EK_STREAM);
        if (!strstr(err.message, "'broken'"))
            print_error("message: %s\n", err.message);
        assert_non_null(strstr(err.message, "'broken'"));
        assert_non_null(strstr(err.message, "not valid JSON"));
        const ah_block *b = blk(tl, 0);
        assert_int_equal(b->kind, AH_BLOCK_TOOL_USE);
        assert_false(b->closed);
        assert_null(b->args);
        ah_partial p;
        assert_int_equal(ah_timeline_partial_drain(tl, &p), AH_OK);
        assert_int_equal(p.count, 0);
        assert_int_equal(p.dropped_tool_uses, 1);
        ah_partial_clear(&p);
        ah_timeline_free(tl);
    }
}

/* [DONE]: ends Chat only after a finish_reason; tolerated (not finishing) elsewhere;
 * events after it are ignored. */
static void done_sentinel_handling(void **state)
{
    (void)state;
    ah_error err;
    assert_int_equal(
        decode_status(AH_WIRE_OPENAI, C_DELTA("{\"content\":\"x\"}") C_DONE, &err),
        AH_ERR_TRUNCATED);
    assert_non_null(strstr(err.message, "ended before a finish_reason"));
    /* a finish_reason and then the end of the stream without [DONE] is a clean end */
    ah_timeline *tl =
        decode_ok(AH_WIRE_OPENAI, C_DELTA("{\"content\":\"x\"}") C_FINISH("stop"));
    ah_timeline_free(tl);
    /* whitespace around the sentinel */
    tl = decode_ok(AH_WIRE_OPENAI, C_FINISH("stop") "data:   [DONE]  \n\n");
    ah_timeline_free(tl);
    /* garbage after [DONE] is never parsed */
    tl = decode_ok(AH_WIRE_OPENAI, C_FINISH("stop") C_DONE "data: {not json\n\n");
    ah_timeline_free(tl);
    /* Anthropic: [DONE] from a gateway does not replace message_stop */
    char s[2048];
    snprintf(s, sizeof s, "%s%s%s%s%s", A_START, A_TEXT_START(0), A_TEXT(0, "x"),
             A_STOP(0), C_DONE);
    assert_int_equal(decode_status(AH_WIRE_ANTHROPIC, s, &err), AH_ERR_TRUNCATED);
    assert_non_null(strstr(err.message, "ended before message_stop"));
    assert_int_equal(decode_status(AH_WIRE_RESPONSES, C_DONE, &err), AH_ERR_TRUNCATED);
    assert_non_null(strstr(err.message, "response.completed"));
}

/* Garbage bytes never crash or leak: every result is a clean error or an unfinished
 * stream. */
static void garbage_bytes_are_contained(void **state)
{
    (void)state;
    uint64_t seed = 42;
    char buf[1024];
    static const char *const pieces[] = {
        "data: ",      "event: ",   "\n",
        "\n\n",        "{",         "}",
        "[DONE]",      "\"type\":", "\"content_block_delta\"",
        "\"index\":0", ",",         "\"delta\":",
        ":",           "\r",        "\x00",
        "\xff\xfe"};
    for (int round = 0; round < 3000; round++) {
        size_t n = 0;
        size_t len = du_rand(&seed) % sizeof buf;
        while (n < len) {
            uint64_t r = du_rand(&seed);
            if (r & 1) {
                buf[n++] = (char)(r >> 8);
            } else {
                const char *p = pieces[(r >> 8) % (sizeof pieces / sizeof pieces[0])];
                size_t pl = p[0] ? strlen(p) : 1;
                for (size_t i = 0; i < pl && n < len; i++)
                    buf[n++] = p[i];
            }
        }
        for (int w = 0; w < AH_WIRE_COUNT_; w++) {
            ah_status fin;
            ah_error err;
            ah_timeline *tl =
                du_decode((ah_wire)w, buf, n, round & 1 ? DU_WHOLE : round * 7ull, NULL,
                          &fin, &err);
            if (fin != AH_OK) {
                assert_int_equal(err.kind, AH_EK_STREAM);
                assert_true(strlen(err.message) > 0);
            } else {
                assert_true(ah_timeline_finished(tl));
            }
            ah_timeline_free(tl);
        }
    }
    /* a non-UTF-8, non-JSON data line */
    ah_error err;
    assert_int_equal(decode_status(AH_WIRE_OPENAI, "data: \xff\xfe\x01\n\n", &err),
                     AH_ERR_PARSE);
}

/* A line beyond the decoder's SSE cap (16 MiB) is AH_ERR_TOO_LARGE, not unbounded
 * growth. */
static void oversized_line_is_too_large(void **state)
{
    (void)state;
    size_t n = (17u << 20) + 16;
    char *s = malloc(n);
    assert_non_null(s);
    memcpy(s, "data: ", 6);
    memset(s + 6, 'x', n - 6);
    ah_timeline *tl = ah_timeline_new();
    ah_decoder *d = NULL;
    ah_decoder_new(AH_WIRE_OPENAI, tl, NULL, NULL, &d, NULL, 0);
    ah_status st = AH_OK;
    for (size_t off = 0; off < n && st == AH_OK; off += 65536)
        st = ah_decoder_feed(d, s + off, n - off < 65536 ? n - off : 65536);
    assert_int_equal(st, AH_ERR_TOO_LARGE);
    assert_non_null(strstr(ah_decoder_error(d)->message, "SSE"));
    ah_error err;
    assert_int_equal(ah_decoder_finish(d, &err), AH_ERR_TOO_LARGE);
    assert_int_equal(err.kind, AH_EK_STREAM);
    ah_decoder_free(d);
    ah_timeline_free(tl);
    free(s);
}

/* API misuse: clear statuses, no crashes. */
static void api_edges(void **state)
{
    (void)state;
    ah_timeline *tl = ah_timeline_new();
    assert_int_equal(
        ah_decoder_new((ah_wire)99, tl, NULL, NULL, &(ah_decoder *){NULL}, NULL, 0),
        AH_ERR_INVALID);
    assert_int_equal(
        ah_decoder_new(AH_WIRE_OPENAI, NULL, NULL, NULL, &(ah_decoder *){NULL}, NULL, 0),
        AH_ERR_INVALID);
    ah_decoder_free(NULL);
    ah_timeline_free(NULL);
    ah_timeline_reset(NULL);
    assert_null(ah_timeline_block(tl, 0));
    assert_null(ah_timeline_refusal(tl, NULL));
    assert_null(ah_timeline_error(tl));
    assert_null(ah_timeline_error_json(tl));
    assert_string_equal(ah_block_kind_name(AH_BLOCK_SERVER_TOOL_USE), "server_tool_use");
    assert_string_equal(ah_block_kind_name((ah_block_kind)77), "unknown");
    ah_decoder *d = NULL;
    ah_decoder_new(AH_WIRE_ANTHROPIC, tl, NULL, NULL, &d, NULL, 0);
    assert_int_equal(ah_decoder_feed(NULL, "x", 1), AH_ERR_INVALID);
    assert_int_equal(ah_decoder_feed(d, NULL, 1), AH_ERR_INVALID);
    assert_int_equal(ah_decoder_feed(d, NULL, 0), AH_OK);
    assert_int_equal(ah_decoder_feed_event(d, NULL), AH_ERR_INVALID);
    assert_null(ah_decoder_error(d));
    ah_error e1, e2;
    assert_int_equal(ah_decoder_finish(d, &e1), AH_ERR_TRUNCATED);
    assert_int_equal(ah_decoder_finish(d, &e2), AH_ERR_TRUNCATED); /* idempotent */
    assert_string_equal(e1.message, e2.message);
    assert_int_equal(ah_decoder_feed(d, A_START, strlen(A_START)), AH_ERR_STATE);
    assert_int_equal(ah_decoder_finish(NULL, NULL), AH_ERR_INVALID);
    ah_decoder_free(d);
    ah_timeline_free(tl);
}

/* Anthropic in-stream overloaded_error: recorded as the provider's STREAM error, with the
 * partial text still drainable. */
static void anthropic_overloaded_error_event(void **state)
{
    (void)state;
    char path[512];
    snprintf(path, sizeof path, "%s/anthropic/error-overloaded", STREAMS_DIR);
    du_stream l = du_load(path, "error-overloaded", AH_WIRE_ANTHROPIC);
    ah_status fin;
    ah_error err;
    ah_timeline *tl =
        du_decode(AH_WIRE_ANTHROPIC, l.sse, l.len, DU_WHOLE, NULL, &fin, &err);
    assert_int_equal(fin, AH_ERR_PROVIDER);
    assert_int_equal(err.kind, AH_EK_STREAM);
    assert_string_equal(err.provider_type, "overloaded_error");
    assert_non_null(strstr(err.message, "Overloaded"));
    assert_false(ah_timeline_finished(tl));
    cJSON *ej = cJSON_Parse(ah_timeline_error_json(tl));
    assert_string_equal(cJSON_GetStringValue(cJSON_GetObjectItem(ej, "type")),
                        "overloaded_error");
    cJSON_Delete(ej);
    ah_partial p;
    assert_int_equal(ah_timeline_partial_drain(tl, &p), AH_OK);
    assert_int_equal(p.count, 1);
    assert_text(p.blocks[0], AH_BLOCK_TEXT, "Here is the first part.");
    assert_int_equal(p.dropped_blocks, 1);
    assert_int_equal(p.dropped_bytes, strlen("And then"));
    ah_partial_clear(&p);
    ah_timeline_free(tl);
    du_unload(&l);
}

/* A provider error that quotes a key (OpenAI's 401 does) is redacted in the record, and
 * in the raw error JSON kept by the timeline; the message stays one line. */
static void provider_error_text_is_redacted(void **state)
{
    (void)state;
    const char *s =
        EV("error", "{\"type\":\"error\",\"error\":{\"type\":\"authentication_error\","
                    "\"message\":\"Incorrect API key provided: sk-proj-abcdefghijklmnop."
                    "\\nSecond line.\"}}");
    ah_status fin;
    ah_error err;
    ah_timeline *tl =
        du_decode(AH_WIRE_ANTHROPIC, s, strlen(s), DU_WHOLE, NULL, &fin, &err);
    assert_int_equal(fin, AH_ERR_PROVIDER);
    assert_string_equal(err.provider_type, "authentication_error");
    assert_null(strstr(err.message, "abcdefghijklmnop"));
    assert_non_null(strstr(err.message, "Incorrect API key provided"));
    assert_null(strchr(err.message, '\n'));
    const char *ej = ah_timeline_error_json(tl);
    assert_non_null(ej);
    assert_null(strstr(ej, "abcdefghijklmnop"));
    cJSON *j = cJSON_Parse(ej); /* still JSON after redaction */
    assert_non_null(j);
    cJSON_Delete(j);
    ah_timeline_free(tl);
}

/* ---- non-stream bodies
 * ----------------------------------------------------------------------- */

static ah_timeline *body_ok(ah_wire wire, const char *body)
{
    ah_timeline *tl = ah_timeline_new();
    ah_error err;
    ah_status st = ah_decode_response(wire, body, strlen(body), tl, &err);
    if (st != AH_OK)
        print_error("body: %s\n", err.message);
    assert_int_equal(st, AH_OK);
    assert_int_equal(err.kind, AH_EK_NONE);
    assert_true(ah_timeline_finished(tl));
    for (size_t i = 0; i < ah_timeline_count(tl); i++)
        assert_true(blk(tl, i)->closed);
    return tl;
}

static void body_anthropic(void **state)
{
    (void)state;
    ah_timeline *tl = body_ok(
        AH_WIRE_ANTHROPIC,
        "{\"id\":\"msg_1\",\"type\":\"message\",\"role\":\"assistant\",\"content\":["
        "{\"type\":\"thinking\",\"thinking\":\"Hmm.\",\"signature\":\"sig\"},"
        "{\"type\":\"redacted_thinking\",\"data\":\"enc\"},"
        "{\"type\":\"text\",\"text\":\"Answer\",\"citations\":[{\"type\":\"x\"},{"
        "\"type\":\"y\"}]},"
        "{\"type\":\"server_tool_use\",\"id\":\"srv_1\",\"name\":\"web_search\","
        "\"input\":{\"query\":\"q\"}},"
        "{\"type\":\"web_search_tool_result\",\"tool_use_id\":\"srv_1\",\"content\":[]},"
        "{\"type\":\"tool_use\",\"id\":\"toolu_1\",\"name\":\"get\",\"input\":{\"k\":"
        "\"v\"}}],"
        "\"stop_reason\":\"tool_use\",\"usage\":{\"input_tokens\":10,\"output_tokens\":"
        "20}}");
    assert_int_equal(ah_timeline_count(tl), 6);
    assert_text(blk(tl, 0), AH_BLOCK_REASONING, "Hmm.");
    assert_string_equal(blk(tl, 0)->signature, "sig");
    assert_true(blk(tl, 1)->redacted);
    assert_text(blk(tl, 2), AH_BLOCK_TEXT, "Answer");
    assert_int_equal(ah_timeline_citations(tl), 2);
    assert_int_equal(blk(tl, 3)->kind, AH_BLOCK_SERVER_TOOL_USE);
    assert_string_equal(arg_str(blk(tl, 3), "query"), "q");
    assert_int_equal(blk(tl, 4)->kind, AH_BLOCK_OPAQUE);
    assert_string_equal(blk(tl, 5)->id, "toolu_1");
    assert_string_equal(arg_str(blk(tl, 5), "k"), "v");
    assert_string_equal(ah_timeline_stop_reason(tl), "tool_use");
    assert_int_equal(ah_timeline_input_tokens(tl), 10);
    assert_int_equal(ah_timeline_output_tokens(tl), 20);
    ah_timeline_free(tl);
}

static void body_openai(void **state)
{
    (void)state;
    ah_timeline *tl = body_ok(
        AH_WIRE_OPENAI,
        "{\"id\":\"chatcmpl-1\",\"object\":\"chat.completion\",\"choices\":[{\"index\":0,"
        "\"message\":{\"role\":\"assistant\",\"content\":\"Sure.\",\"reasoning_content\":"
        "\"Think.\",\"refusal\":null,\"tool_calls\":[{\"id\":\"call_1\",\"type\":"
        "\"function\","
        "\"function\":{\"name\":\"f\",\"arguments\":\"{\\\"a\\\":1}\"}},{\"id\":\"call_"
        "2\","
        "\"type\":\"function\",\"function\":{\"name\":\"g\",\"arguments\":\"\"}}]},"
        "\"finish_reason\":\"tool_calls\"}],\"usage\":{\"prompt_tokens\":5,"
        "\"completion_tokens\":7}}");
    assert_int_equal(ah_timeline_count(tl), 4);
    assert_text(blk(tl, 0), AH_BLOCK_REASONING, "Think.");
    assert_text(blk(tl, 1), AH_BLOCK_TEXT, "Sure.");
    assert_string_equal(blk(tl, 2)->id, "call_1");
    assert_string_equal(blk(tl, 3)->arguments, "{}");
    assert_string_equal(ah_timeline_stop_reason(tl), "tool_calls");
    assert_int_equal(ah_timeline_output_tokens(tl), 7);
    assert_null(ah_timeline_refusal(tl, NULL));
    ah_timeline_free(tl);
    tl = body_ok(
        AH_WIRE_OPENAI,
        "{\"choices\":[{\"index\":0,\"message\":{\"content\":null,\"refusal\":\"No.\"},"
        "\"finish_reason\":\"stop\"}]}");
    assert_string_equal(ah_timeline_refusal(tl, NULL), "No.");
    assert_int_equal(ah_timeline_count(tl), 0);
    ah_timeline_free(tl);
}

static void body_responses(void **state)
{
    (void)state;
    ah_timeline *tl = body_ok(
        AH_WIRE_RESPONSES,
        "{\"id\":\"resp_1\",\"object\":\"response\",\"status\":\"completed\",\"output\":["
        "{\"id\":\"rs_1\",\"type\":\"reasoning\",\"encrypted_content\":\"enc\","
        "\"summary\":["
        "{\"type\":\"summary_text\",\"text\":\"One\"},{\"type\":\"summary_text\","
        "\"text\":\"Two\"}]},"
        "{\"id\":\"ws_1\",\"type\":\"web_search_call\",\"status\":\"completed\"},"
        "{\"id\":\"msg_1\",\"type\":\"message\",\"content\":[{\"type\":\"output_text\","
        "\"text\":"
        "\"Hi\"},{\"type\":\"refusal\",\"refusal\":\"Nope\"}]},"
        "{\"id\":\"fc_1\",\"type\":\"function_call\",\"call_id\":\"call_1\",\"name\":"
        "\"f\","
        "\"arguments\":\"{\\\"x\\\":[1]}\"}],"
        "\"usage\":{\"input_tokens\":3,\"output_tokens\":4}}");
    assert_int_equal(ah_timeline_count(tl), 4);
    assert_text(blk(tl, 0), AH_BLOCK_REASONING, "One\n\nTwo");
    assert_string_equal(blk(tl, 0)->encrypted, "enc");
    assert_int_equal(blk(tl, 1)->kind, AH_BLOCK_OPAQUE);
    assert_text(blk(tl, 2), AH_BLOCK_TEXT, "Hi");
    assert_string_equal(blk(tl, 2)->item_id, "msg_1");
    assert_string_equal(ah_timeline_refusal(tl, NULL), "Nope");
    assert_string_equal(blk(tl, 3)->id, "call_1");
    assert_string_equal(blk(tl, 3)->item_id, "fc_1");
    assert_string_equal(ah_timeline_stop_reason(tl), "completed");
    assert_int_equal(ah_timeline_input_tokens(tl), 3);
    ah_timeline_free(tl);
}

/* The response object of each recorded Responses stream's terminal event, decoded as a
 * non-stream body, gives the same text and tool calls as the stream. */
static void body_responses_matches_recorded_streams(void **state)
{
    (void)state;
    static const char *const names[] = {"copilot-rotating-item-ids",
                                        "function-call",
                                        "parallel-function-calls",
                                        "reasoning-summary-encrypted-then-call",
                                        "text-basic",
                                        "openrouter-raw-reasoning-no-event-lines"};
    for (size_t k = 0; k < sizeof names / sizeof names[0]; k++) {
        char path[512];
        snprintf(path, sizeof path, "%s/real-streams/responses/%s", AH_FIXTURES_DIR,
                 names[k]);
        du_stream l = du_load(path, names[k], AH_WIRE_RESPONSES);
        const char *at = strstr(l.sse, "{\"type\":\"response.completed\"");
        if (!at)
            at = strstr(l.sse, "\"type\":\"response.completed\"");
        assert_non_null(at);
        while (at > l.sse && at[-1] != '\n')
            at--;
        at += strlen("data: ");
        const char *end = strchr(at, '\n');
        cJSON *ev = cJSON_ParseWithLength(at, (size_t)(end - at));
        assert_non_null(ev);
        char *body = cJSON_PrintUnformatted(cJSON_GetObjectItem(ev, "response"));
        ah_timeline *tl = body_ok(AH_WIRE_RESPONSES, body);
        cJSON *got = du_to_expect(AH_WIRE_RESPONSES, tl);
        /* compare what the final response object carries: text, tool calls, stop, usage
         * (reasoning summaries are often omitted from it) */
        static const char *const keys[] = {"text", "tool_calls", "stop_reason", "usage"};
        for (size_t j = 0; j < 4; j++)
            du_assert_json_equal(cJSON_GetObjectItem(l.expect, keys[j]),
                                 cJSON_GetObjectItem(got, keys[j]), names[k]);
        cJSON_Delete(got);
        ah_timeline_free(tl);
        cJSON_free(body);
        cJSON_Delete(ev);
        du_unload(&l);
    }
}

/* Error bodies are the provider's (HTTP kind, provider_type); bad bodies are DECODE
 * errors. */
static void body_errors(void **state)
{
    (void)state;
    static const struct {
        ah_wire wire;
        const char *body, *type;
    } provider[] = {
        {AH_WIRE_ANTHROPIC,
         "{\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\","
         "\"message\":\"Overloaded\"},\"request_id\":\"req_1\"}",
         "overloaded_error"},
        {AH_WIRE_OPENAI,
         "{\"error\":{\"message\":\"Rate limit\",\"type\":\"requests\","
         "\"code\":\"rate_limit_exceeded\"}}",
         "requests"},
        {AH_WIRE_RESPONSES, "{\"error\":{\"code\":\"server_error\",\"message\":\"x\"}}",
         "server_error"},
        {AH_WIRE_RESPONSES,
         "{\"status\":\"failed\",\"output\":[],\"error\":{\"code\":"
         "\"rate_limit_exceeded\",\"message\":\"slow down\"}}",
         "rate_limit_exceeded"},
    };
    for (size_t k = 0; k < sizeof provider / sizeof provider[0]; k++) {
        ah_timeline *tl = ah_timeline_new();
        ah_error err;
        assert_int_equal(ah_decode_response(provider[k].wire, provider[k].body,
                                            strlen(provider[k].body), tl, &err),
                         AH_ERR_PROVIDER);
        assert_int_equal(err.kind, AH_EK_HTTP);
        assert_string_equal(err.provider_type, provider[k].type);
        assert_non_null(ah_timeline_error(tl));
        ah_timeline_free(tl);
    }
    static const struct {
        ah_wire wire;
        const char *body, *needle;
    } bad[] = {
        {AH_WIRE_ANTHROPIC, "{\"content\":[", "invalid JSON"},
        {AH_WIRE_ANTHROPIC, "[]", "not an object"},
        {AH_WIRE_ANTHROPIC, "{\"type\":\"message\"}", "no \"content\""},
        {AH_WIRE_ANTHROPIC, "{\"content\":[5]}", "content[0]"},
        {AH_WIRE_ANTHROPIC, "", "invalid JSON"},
        {AH_WIRE_OPENAI, "{\"id\":1}", "no \"choices\""},
        {AH_WIRE_OPENAI, "{\"choices\":[{\"index\":0}]}", "\"message\""},
        {AH_WIRE_OPENAI,
         "{\"choices\":[{\"index\":0,\"message\":{\"tool_calls\":[{\"id\":\"c\","
         "\"function\":{"
         "\"name\":\"broken\",\"arguments\":\"{x\"}}]}}]}",
         "'broken'"},
        {AH_WIRE_RESPONSES, "{\"status\":\"completed\"}", "no \"output\""},
        {AH_WIRE_RESPONSES, "{\"output\":[1]}", "output[0]"},
        {AH_WIRE_RESPONSES, "nul", "invalid JSON"},
    };
    for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
        ah_timeline *tl = ah_timeline_new();
        ah_error err;
        ah_status st =
            ah_decode_response(bad[k].wire, bad[k].body, strlen(bad[k].body), tl, &err);
        if (st != AH_ERR_PARSE || !strstr(err.message, bad[k].needle))
            print_error("case %zu: %s: %s\n", k, ah_status_name(st), err.message);
        assert_int_equal(st, AH_ERR_PARSE);
        assert_int_equal(err.kind, AH_EK_DECODE);
        assert_non_null(strstr(err.message, bad[k].needle));
        assert_non_null(strstr(err.message, "response body"));
        ah_timeline_free(tl);
    }
    ah_timeline *tl = ah_timeline_new();
    assert_int_equal(ah_decode_response(AH_WIRE_OPENAI, NULL, 3, tl, NULL),
                     AH_ERR_INVALID);
    assert_int_equal(ah_decode_response((ah_wire)9, "{}", 2, tl, NULL), AH_ERR_INVALID);
    ah_timeline_free(tl);
}

/* ---- registration
 * ------------------------------------------------------------------------------- */

int main(void)
{
    static const struct CMUnitTest fixed[] = {
        cmocka_unit_test(hand_streams_with_crlf_and_cr_line_ends),
        cmocka_unit_test(anthropic_whitespace_padded_json),
        cmocka_unit_test(anthropic_empty_partial_json_means_empty_object),
        cmocka_unit_test(anthropic_args_split_inside_escapes_parse_once_at_stop),
        cmocka_unit_test(anthropic_message_delta_usage_overrides_field_by_field),
        cmocka_unit_test(anthropic_refusal_with_zero_blocks),
        cmocka_unit_test(anthropic_server_tool_blocks_arrive_whole),
        cmocka_unit_test(anthropic_citations_precede_text_over_many_blocks),
        cmocka_unit_test(anthropic_ping_anywhere),
        cmocka_unit_test(anthropic_thinking_signature_and_redacted),
        cmocka_unit_test(anthropic_overloaded_error_event),
        cmocka_unit_test(provider_error_text_is_redacted),
        cmocka_unit_test(chat_empty_choices_chunks),
        cmocka_unit_test(chat_usage_placement_variants),
        cmocka_unit_test(chat_tool_fragments_merge_by_index),
        cmocka_unit_test(chat_refusal_field),
        cmocka_unit_test(chat_reasoning_content_and_missing_finish_key),
        cmocka_unit_test(chat_done_sentinel_obfuscation_and_other_choices),
        cmocka_unit_test(responses_no_event_lines_comments_and_done),
        cmocka_unit_test(responses_rotating_item_ids_keyed_by_output_index),
        cmocka_unit_test(responses_encrypted_content_last_one_wins),
        cmocka_unit_test(tool_name_with_nul_is_not_its_prefix),
        cmocka_unit_test(responses_call_id_is_the_tool_id),
        cmocka_unit_test(responses_error_then_failed),
        cmocka_unit_test(responses_raw_reasoning_done_after_later_items),
        cmocka_unit_test(responses_summary_parts_join),
        cmocka_unit_test(responses_incomplete_is_a_clean_end),
        cmocka_unit_test(chat_text_closes_when_tool_starts),
        cmocka_unit_test(anthropic_blocks_close_at_stop),
        cmocka_unit_test(responses_blocks_close_at_item_done),
        cmocka_unit_test(responses_done_events_fill_missing_content),
        cmocka_unit_test(drain_keeps_closed_text_drops_tools),
        cmocka_unit_test(drain_omits_empty_closed_text_and_handles_empty_timeline),
        cmocka_unit_test(timeline_reset_and_reuse),
        cmocka_unit_test(bad_json_names_event_and_offset),
        cmocka_unit_test(unknown_types_are_ignored),
        cmocka_unit_test(malformed_known_events_are_errors),
        cmocka_unit_test(never_closing_tool_arguments),
        cmocka_unit_test(done_sentinel_handling),
        cmocka_unit_test(garbage_bytes_are_contained),
        cmocka_unit_test(oversized_line_is_too_large),
        cmocka_unit_test(api_edges),
        cmocka_unit_test(body_anthropic),
        cmocka_unit_test(body_openai),
        cmocka_unit_test(body_responses),
        cmocka_unit_test(body_responses_matches_recorded_streams),
        cmocka_unit_test(body_errors),
    };
    enum { N_FIXED = sizeof fixed / sizeof fixed[0] };
    static struct CMUnitTest tests[N_FIXED + 2 * N_HAND];
    static char names[2 * N_HAND][128];
    size_t t = 0;
    for (size_t k = 0; k < N_HAND; k++) {
        snprintf(hand[k].label, sizeof hand[k].label, "%s/%s", hand[k].dir, hand[k].name);
        snprintf(hand[k].path, sizeof hand[k].path, "%s/%s/%s", STREAMS_DIR, hand[k].dir,
                 hand[k].name);
        snprintf(names[2 * k], sizeof names[0], "stream_decodes:%s", hand[k].label);
        snprintf(names[2 * k + 1], sizeof names[0], "stream_truncations:%s",
                 hand[k].label);
        tests[t++] =
            (struct CMUnitTest){names[2 * k], hand_stream_decodes, NULL, NULL, &hand[k]};
        tests[t++] = (struct CMUnitTest){names[2 * k + 1], hand_stream_truncations, NULL,
                                         NULL, &hand[k]};
    }
    for (size_t k = 0; k < N_FIXED; k++)
        tests[t++] = fixed[k];
    return _cmocka_run_group_tests("decode", tests, t, NULL, NULL);
}
