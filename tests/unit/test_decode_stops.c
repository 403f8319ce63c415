/* test_decode_stops.c - the stop reasons of 2026 as each decoder hands them to the
 * timeline (docs/providers-2026.md, "Stop reasons"): the provider's word
 * (ah_timeline_stop_reason), its normalised form (ah_timeline_stop: end_turn, tool_use,
 * max_tokens, refusal, pause_turn, context_exceeded) and a refusal's category
 * (ah_timeline_stop_category), which the worker turns into the outcome and
 * result.error.category. Every stream is decoded whole, byte by byte and at random
 * splits (the fast delta paths and the generic one must agree), and the non-stream body
 * of the same answer gives the same.
 *   - Anthropic: refusal with stop_details {type, category, explanation} (and with a
 *     null category, and with no content at all), pause_turn,
 * model_context_window_exceeded.
 *   - Chat: finish_reason content_filter, length.
 *   - Responses: an incomplete response for content_filter / max_output_tokens.
 *   - Gemini: finishReason SAFETY (category from the blocked safety rating), MAX_TOKENS,
 *     promptFeedback.blockReason (the prompt refused, no candidate).
 */
/* only the decode and recorder helpers of decode_util.h are used here */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-function"
#include "unit/decode_util.h"
#pragma GCC diagnostic pop
#include "agenthost/timeline.h"

#define EV(name, json) "event: " name "\ndata: " json "\n\n"
#define DATA(json)     "data: " json "\n\n"

/* What a decode must give. */
typedef struct want {
    const char *raw;      /* ah_timeline_stop_reason */
    const char *norm;     /* ah_timeline_stop */
    const char *category; /* ah_timeline_stop_category, NULL = none */
    const char *text;     /* the first block's text, NULL = no block */
} want;

static void check_tl(const ah_timeline *tl, const want *w, const char *what)
{
    if (!ah_timeline_finished(tl))
        fail_msg("%s: not finished", what);
    const char *raw = ah_timeline_stop_reason(tl), *norm = ah_timeline_stop(tl);
    const char *cat = ah_timeline_stop_category(tl);
    if (!raw || strcmp(raw, w->raw) != 0)
        fail_msg("%s: stop_reason '%s', want '%s'", what, raw ? raw : "(null)", w->raw);
    if (!norm || strcmp(norm, w->norm) != 0)
        fail_msg("%s: stop '%s', want '%s'", what, norm ? norm : "(null)", w->norm);
    if ((cat == NULL) != (w->category == NULL) || (cat && strcmp(cat, w->category) != 0))
        fail_msg("%s: category '%s', want '%s'", what, cat ? cat : "(null)",
                 w->category ? w->category : "(null)");
    if (!w->text) {
        assert_int_equal(ah_timeline_count(tl), 0);
        return;
    }
    const ah_block *b = ah_timeline_block(tl, 0);
    assert_non_null(b);
    assert_int_equal(b->kind, AH_BLOCK_TEXT);
    assert_true(b->closed);
    assert_string_equal(b->text, w->text);
}

/* The stream whole, byte by byte and at 4 random splits; then the body, if any. */
static void check(ah_wire wire, const char *stream, const char *body, const want *w)
{
    size_t len = strlen(stream);
    for (uint64_t mode = 0; mode < 6; mode++) {
        du_rec rec = {0};
        ah_status fin;
        ah_error err;
        uint64_t m = mode < 2 ? mode : mode * 7919;
        ah_timeline *tl = du_decode(wire, stream, len, m, &rec, &fin, &err);
        if (fin != AH_OK)
            fail_msg("%s stream (mode %llu): %s", ah_wire_name(wire),
                     (unsigned long long)mode, err.message);
        du_rec_check(&rec, tl);
        du_rec_free(&rec);
        char what[64];
        snprintf(what, sizeof what, "%s stream, mode %llu", ah_wire_name(wire),
                 (unsigned long long)mode);
        check_tl(tl, w, what);
        ah_timeline_free(tl);
    }
    if (!body)
        return;
    ah_timeline *tl = ah_timeline_new();
    assert_non_null(tl);
    ah_error err;
    ah_status st = ah_decode_response(wire, body, strlen(body), tl, &err);
    if (st != AH_OK)
        fail_msg("%s body: %s", ah_wire_name(wire), err.message);
    char what[64];
    snprintf(what, sizeof what, "%s body", ah_wire_name(wire));
    check_tl(tl, w, what);
    ah_timeline_free(tl);
}

/* ---- Anthropic ----------------------------------------------------------------------
 */

#define A_START                                                                          \
    EV("message_start", "{\"type\":\"message_start\",\"message\":{\"id\":\"msg_1\","     \
                        "\"type\":\"message\",\"role\":\"assistant\",\"content\":[],"    \
                        "\"model\":\"claude-sonnet-4-5\",\"stop_reason\":null,"          \
                        "\"usage\":{\"input_tokens\":43,\"output_tokens\":1}}}")
#define A_TEXT(t)                                                                        \
    EV("content_block_start", "{\"type\":\"content_block_start\",\"index\":0,"           \
                              "\"content_block\":{\"type\":\"text\",\"text\":\"\"}}")    \
    EV("content_block_delta", "{\"type\":\"content_block_delta\",\"index\":0,"           \
                              "\"delta\":{\"type\":\"text_delta\",\"text\":\"" t "\"}}") \
    EV("content_block_stop", "{\"type\":\"content_block_stop\",\"index\":0}")
#define A_END(delta)                                                                     \
    EV("message_delta", "{\"type\":\"message_delta\",\"delta\":" delta                   \
                        ",\"usage\":{\"output_tokens\":9}}")                             \
    EV("message_stop", "{\"type\":\"message_stop\"}")
#define A_BODY(content, tail)                                                            \
    "{\"id\":\"msg_1\",\"type\":\"message\",\"role\":\"assistant\",\"model\":"           \
    "\"claude-sonnet-4-5\",\"content\":" content "," tail                                \
    ",\"usage\":{\"input_tokens\":43,\"output_tokens\":9}}"

#define REFUSAL_DETAILS                                                                  \
    "\"stop_details\":{\"type\":\"refusal\",\"category\":\"cyber\",\"explanation\":"     \
    "\"This request asks for help with malware.\"}"

static void anthropic_refusal_with_stop_details(void **state)
{
    (void)state;
    want w = {"refusal", "refusal", "cyber", "I can't help with that."};
    check(AH_WIRE_ANTHROPIC,
          A_START A_TEXT("I can't help with that.") A_END(
              "{\"stop_reason\":\"refusal\",\"stop_sequence\":null," REFUSAL_DETAILS "}"),
          A_BODY("[{\"type\":\"text\",\"text\":\"I can't help with that.\"}]",
                 "\"stop_reason\":\"refusal\"," REFUSAL_DETAILS),
          &w);
    /* a null category (the API's for a refusal it does not classify): no category */
    want w2 = {"refusal", "refusal", NULL, NULL};
    check(AH_WIRE_ANTHROPIC,
          A_START A_END("{\"stop_reason\":\"refusal\",\"stop_details\":{\"type\":"
                        "\"refusal\",\"category\":null,\"explanation\":null}}"),
          A_BODY("[]",
                 "\"stop_reason\":\"refusal\",\"stop_details\":{\"type\":\"refusal\","
                 "\"category\":null,\"explanation\":null}"),
          &w2);
    /* stop_details that are not an object, or a category that is not a string: ignored */
    check(AH_WIRE_ANTHROPIC,
          A_START A_END("{\"stop_reason\":\"refusal\",\"stop_details\":\"cyber\"}"), NULL,
          &w2);
    check(AH_WIRE_ANTHROPIC,
          A_START A_END("{\"stop_reason\":\"refusal\",\"stop_details\":{\"type\":"
                        "\"refusal\",\"category\":7}}"),
          NULL, &w2);
}

/* A stop other than refusal keeps no category even if stop_details came along. */
static void anthropic_category_only_on_its_stop(void **state)
{
    (void)state;
    want w = {"end_turn", "end_turn", NULL, "Fine."};
    check(AH_WIRE_ANTHROPIC,
          A_START A_TEXT("Fine.") A_END("{\"stop_reason\":\"end_turn\"}"),
          A_BODY("[{\"type\":\"text\",\"text\":\"Fine.\"}]",
                 "\"stop_reason\":\"end_turn\""),
          &w);
}

static void anthropic_pause_turn(void **state)
{
    (void)state;
    want w = {"pause_turn", "pause_turn", NULL, "Searching"};
    check(AH_WIRE_ANTHROPIC,
          A_START A_TEXT("Searching") A_END("{\"stop_reason\":\"pause_turn\"}"),
          A_BODY("[{\"type\":\"text\",\"text\":\"Searching\"}]",
                 "\"stop_reason\":\"pause_turn\""),
          &w);
}

static void anthropic_context_window_exceeded(void **state)
{
    (void)state;
    want w = {"model_context_window_exceeded", "context_exceeded", NULL, "The end of"};
    check(AH_WIRE_ANTHROPIC,
          A_START A_TEXT("The end of")
              A_END("{\"stop_reason\":\"model_context_window_exceeded\"}"),
          A_BODY("[{\"type\":\"text\",\"text\":\"The end of\"}]",
                 "\"stop_reason\":\"model_context_window_exceeded\""),
          &w);
}

/* ---- Chat Completions ---------------------------------------------------------------
 */

#define C_CHUNK(choices)                                                                 \
    DATA("{\"id\":\"c1\",\"object\":\"chat.completion.chunk\",\"model\":\"gpt-5\","      \
         "\"choices\":" choices "}")
#define C_TEXT(t)                                                                        \
    C_CHUNK("[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"" t           \
            "\"},\"finish_reason\":null}]")
#define C_FINISH(reason)                                                                 \
    C_CHUNK("[{\"index\":0,\"delta\":{},\"finish_reason\":\"" reason "\"}]")             \
    "data: [DONE]\n\n"
#define C_BODY(t, reason)                                                                \
    "{\"id\":\"c1\",\"object\":\"chat.completion\",\"model\":\"gpt-5\",\"choices\":[{"   \
    "\"index\":0,\"message\":{\"role\":\"assistant\",\"content\":\"" t "\"},"            \
    "\"finish_reason\":\"" reason "\"}],\"usage\":{\"prompt_tokens\":5,"                 \
    "\"completion_tokens\":2,\"total_tokens\":7}}"

static void chat_content_filter(void **state)
{
    (void)state;
    want w = {"content_filter", "refusal", NULL, "Here is"};
    check(AH_WIRE_OPENAI, C_TEXT("Here is") C_FINISH("content_filter"),
          C_BODY("Here is", "content_filter"), &w);
}

static void chat_length(void **state)
{
    (void)state;
    want w = {"length", "max_tokens", NULL, "Once upon"};
    check(AH_WIRE_OPENAI, C_TEXT("Once upon") C_FINISH("length"),
          C_BODY("Once upon", "length"), &w);
}

/* ---- Responses ----------------------------------------------------------------------
 */

#define R_START                                                                          \
    DATA("{\"type\":\"response.created\",\"response\":{\"id\":\"resp_1\",\"status\":"    \
         "\"in_progress\",\"output\":[]}}")                                              \
    DATA("{\"type\":\"response.output_item.added\",\"output_index\":0,\"item\":{\"id\":" \
         "\"msg_1\",\"type\":\"message\",\"content\":[],\"role\":\"assistant\"}}")
#define R_TEXT(t)                                                                        \
    DATA("{\"type\":\"response.output_text.delta\",\"item_id\":\"msg_1\","               \
         "\"output_index\":0,\"content_index\":0,\"delta\":\"" t "\"}")
#define R_MSG(t)                                                                         \
    "{\"id\":\"msg_1\",\"type\":\"message\",\"status\":\"incomplete\",\"role\":"         \
    "\"assistant\",\"content\":[{\"type\":\"output_text\",\"text\":\"" t "\"}]}"
#define R_INCOMPLETE_OBJ(reason, output)                                                 \
    "{\"id\":\"resp_1\",\"object\":\"response\",\"status\":\"incomplete\","              \
    "\"incomplete_details\":{\"reason\":\"" reason "\"},\"output\":" output              \
    ",\"usage\":{\"input_tokens\":9,\"output_tokens\":16}}"
#define R_INCOMPLETE(reason, output)                                                     \
    DATA("{\"type\":\"response.incomplete\",\"response\":" R_INCOMPLETE_OBJ(reason,      \
                                                                            output) "}")

static void responses_incomplete_content_filter(void **state)
{
    (void)state;
    want w = {"incomplete", "refusal", NULL, "Part"};
    check(AH_WIRE_RESPONSES,
          R_START R_TEXT("Part") R_INCOMPLETE("content_filter", "[" R_MSG("Part") "]"),
          R_INCOMPLETE_OBJ("content_filter", "[" R_MSG("Part") "]"), &w);
}

static void responses_incomplete_max_output_tokens(void **state)
{
    (void)state;
    want w = {"incomplete", "max_tokens", NULL, "Trunc"};
    check(AH_WIRE_RESPONSES,
          R_START R_TEXT("Trunc")
              R_INCOMPLETE("max_output_tokens", "[" R_MSG("Trunc") "]"),
          R_INCOMPLETE_OBJ("max_output_tokens", "[" R_MSG("Trunc") "]"), &w);
}

/* ---- Gemini -------------------------------------------------------------------------
 */

#define G_TAIL                                                                           \
    "\"usageMetadata\":{\"promptTokenCount\":5,\"candidatesTokenCount\":2,"              \
    "\"totalTokenCount\":7},\"modelVersion\":\"gemini-2.5-flash\",\"responseId\":\"r1\""
#define G_CAND(parts, extra)                                                             \
    "{\"candidates\":[{\"content\":{\"parts\":" parts ",\"role\":\"model\"}" extra       \
    ",\"index\":0}]," G_TAIL "}"
#define G_CHUNK(parts, extra) DATA(G_CAND(parts, extra))

static void gemini_safety(void **state)
{
    (void)state;
#define SAFETY_EXTRA                                                                     \
    ",\"finishReason\":\"SAFETY\",\"safetyRatings\":[{\"category\":"                     \
    "\"HARM_CATEGORY_HATE_SPEECH\",\"probability\":\"NEGLIGIBLE\"},{\"category\":"       \
    "\"HARM_CATEGORY_DANGEROUS_CONTENT\",\"probability\":\"HIGH\",\"blocked\":true}]"
    want w = {"SAFETY", "refusal", "HARM_CATEGORY_DANGEROUS_CONTENT", "Sure, the"};
    check(AH_WIRE_GEMINI,
          G_CHUNK("[{\"text\":\"Sure, the\"}]", "")
              G_CHUNK("[{\"text\":\"\"}]", SAFETY_EXTRA),
          G_CAND("[{\"text\":\"Sure, the\"}]", SAFETY_EXTRA), &w);
    /* no blocked rating: the reason is the category */
    want w2 = {"SAFETY", "refusal", "SAFETY", NULL};
    check(AH_WIRE_GEMINI, G_CHUNK("[]", ",\"finishReason\":\"SAFETY\""),
          G_CAND("[]", ",\"finishReason\":\"SAFETY\""), &w2);
#undef SAFETY_EXTRA
}

static void gemini_max_tokens(void **state)
{
    (void)state;
    want w = {"MAX_TOKENS", "max_tokens", NULL, "Lorem ipsum"};
    check(AH_WIRE_GEMINI,
          G_CHUNK("[{\"text\":\"Lorem \"}]", "")
              G_CHUNK("[{\"text\":\"ipsum\"}]", ",\"finishReason\":\"MAX_TOKENS\""),
          G_CAND("[{\"text\":\"Lorem ipsum\"}]", ",\"finishReason\":\"MAX_TOKENS\""), &w);
}

/* The prompt itself refused: no candidate at all, promptFeedback says why. */
static void gemini_prompt_blocked(void **state)
{
    (void)state;
#define BLOCKED                                                                          \
    "{\"promptFeedback\":{\"blockReason\":\"PROHIBITED_CONTENT\",\"safetyRatings\":[]}"  \
    "," G_TAIL "}"
    want w = {"PROHIBITED_CONTENT", "refusal", "PROHIBITED_CONTENT", NULL};
    check(AH_WIRE_GEMINI, DATA(BLOCKED), BLOCKED, &w);
#undef BLOCKED
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(anthropic_refusal_with_stop_details),
        cmocka_unit_test(anthropic_category_only_on_its_stop),
        cmocka_unit_test(anthropic_pause_turn),
        cmocka_unit_test(anthropic_context_window_exceeded),
        cmocka_unit_test(chat_content_filter),
        cmocka_unit_test(chat_length),
        cmocka_unit_test(responses_incomplete_content_filter),
        cmocka_unit_test(responses_incomplete_max_output_tokens),
        cmocka_unit_test(gemini_safety),
        cmocka_unit_test(gemini_max_tokens),
        cmocka_unit_test(gemini_prompt_blocked),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
