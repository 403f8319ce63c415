/* test_writer_golden.c - the mock's bytes do not change when its writers change.
 *
 * For 3 formats x many replies (text only, a tool call, parallel calls, continuations
 * with and without a restatement, fixed texts with every delta split, Unicode, usage
 * chunks, background responses), every byte the mock writes for a reply: the whole SSE
 * stream, every malformed event a `malformed` step can produce, the in-stream error, the
 * non-stream body and the HTTP error bodies. Each case is hashed (FNV-1a 64) and compared
 * with tests/fixtures/writer_golden.txt, recorded from the mock's writers before they
 * became the writers the proxy shares (core/writer/). AH_WRITE_GOLDEN=FILE rewrites the
 * table instead (only when a change of the bytes is meant). */
#include <limits.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mock/mock_internal.h"

typedef struct golden {
    FILE *out;      /* writing a new table */
    char **lines;   /* the recorded table */
    size_t n, used, bad;
} golden;

static golden G;

static void load_table(void)
{
    const char *write = getenv("AH_WRITE_GOLDEN");
    if (write && *write) {
        G.out = fopen(write, "w");
        assert_non_null(G.out);
        return;
    }
    FILE *f = fopen(AH_FIXTURES_DIR "/writer_golden.txt", "r");
    assert_non_null(f);
    char line[512];
    while (fgets(line, sizeof line, f)) {
        line[strcspn(line, "\n")] = '\0';
        if (!line[0] || line[0] == '#')
            continue;
        G.lines = realloc(G.lines, (G.n + 1) * sizeof *G.lines);
        assert_non_null(G.lines);
        G.lines[G.n++] = strdup(line);
    }
    fclose(f);
}

/* One case: its name and the hash of its bytes, checked against the table in order. */
static void check(const char *name, const ah__mock_buf *b)
{
    assert_false(b->failed);
    char line[512];
    snprintf(line, sizeof line, "%s %016llx %zu", name,
             (unsigned long long)ah__mock_fnv1a(AH__MOCK_FNV_INIT, b->data ? b->data : "",
                                                b->len),
             b->len);
    if (G.out) {
        fprintf(G.out, "%s\n", line);
        return;
    }
    if (G.used >= G.n || strcmp(G.lines[G.used], line) != 0) {
        fprintf(stderr, "writer_golden: case %zu: got '%s', recorded '%s'\n", G.used, line,
                G.used < G.n ? G.lines[G.used] : "(none)");
        G.bad++;
    }
    G.used++;
}

typedef struct variant {
    const char *name;
    ah_wire wire;
    const char *json;
    ah__mock_text_opts opts;
    size_t ntools;
} variant;

#define A_REQ(msgs, extra)                                                              \
    "{\"model\":\"claude-test\",\"max_tokens\":64,\"stream\":true" extra                 \
    ",\"messages\":[" msgs "]}"
#define A_TOOLS                                                                          \
    ",\"tools\":[{\"name\":\"add\",\"description\":\"Add\",\"input_schema\":{\"type\":"  \
    "\"object\",\"required\":[\"a\",\"b\"],\"properties\":{\"a\":{\"type\":\"integer\"},"  \
    "\"b\":{\"type\":\"integer\"}}}}]"
#define C_REQ(msgs, extra)                                                              \
    "{\"model\":\"gpt-test\",\"stream\":true" extra ",\"messages\":[" msgs "]}"
#define C_TOOLS                                                                          \
    ",\"tools\":[{\"type\":\"function\",\"function\":{\"name\":\"add\",\"parameters\":"   \
    "{\"type\":\"object\",\"required\":[\"a\",\"b\"],\"properties\":{\"a\":{\"type\":"     \
    "\"integer\"},\"b\":{\"type\":\"integer\"}}}}}]"
#define R_REQ(input, extra) "{\"model\":\"gpt-test\",\"stream\":true" extra ",\"input\":" input "}"
#define R_TOOLS                                                                          \
    ",\"tools\":[{\"type\":\"function\",\"name\":\"add\",\"parameters\":{\"type\":"       \
    "\"object\",\"required\":[\"a\",\"b\"],\"properties\":{\"a\":{\"type\":\"integer\"},"  \
    "\"b\":{\"type\":\"integer\"}}}}]"

static const variant variants[] = {
    {"a_text", AH_WIRE_ANTHROPIC, A_REQ("{\"role\":\"user\",\"content\":\"Hello there\"}", ""), {0}, 0},
    {"a_tool", AH_WIRE_ANTHROPIC, A_REQ("{\"role\":\"user\",\"content\":\"What is 2+3?\"}", A_TOOLS), {0}, 0},
    {"a_tool3", AH_WIRE_ANTHROPIC, A_REQ("{\"role\":\"user\",\"content\":\"What is 2+3?\"}", A_TOOLS), {0}, 3},
    {"a_result", AH_WIRE_ANTHROPIC,
     A_REQ("{\"role\":\"user\",\"content\":\"add\"},{\"role\":\"assistant\",\"content\":[{"
           "\"type\":\"tool_use\",\"id\":\"t1\",\"name\":\"add\",\"input\":{}}]},{\"role\":"
           "\"user\",\"content\":[{\"type\":\"tool_result\",\"tool_use_id\":\"t1\","
           "\"content\":\"5\"}]}",
           A_TOOLS),
     {0}, 0},
    {"a_prefill", AH_WIRE_ANTHROPIC,
     A_REQ("{\"role\":\"user\",\"content\":\"Tell me a story\"},{\"role\":\"assistant\","
           "\"content\":\"Once upon a time.\"}",
           ""),
     {0}, 0},
    {"a_restate", AH_WIRE_ANTHROPIC,
     A_REQ("{\"role\":\"user\",\"content\":\"Tell me a story\"},{\"role\":\"assistant\","
           "\"content\":\"Once upon a time. There was a fox.\"},{\"role\":\"user\",\"content\":"
           "\"Your previous reply was cut off. Continue exactly where it stopped.\"}",
           ""),
     {.restate = AH__MOCK_RESTATE_LAST_SENTENCE}, 0},
    {"a_fixed", AH_WIRE_ANTHROPIC, A_REQ("{\"role\":\"user\",\"content\":\"x\"}", ""),
     {.text = "Gr\xc3\xbc\xc3\x9f \"quoted\" \\ back\nline \xe2\x9c\x93 tab\there", .delta_bytes = 3}, 0},
    {"a_fixed1", AH_WIRE_ANTHROPIC, A_REQ("{\"role\":\"user\",\"content\":\"x\"}", ""),
     {.text = "One delta only.", .text_deltas = 1}, 0},
    {"a_args", AH_WIRE_ANTHROPIC, A_REQ("{\"role\":\"user\",\"content\":\"x\"}", A_TOOLS),
     {.tool_args = "{\"a\": 1, \"b\": [1,2,{\"c\":\"d\"}]}"}, 0},
    {"c_text", AH_WIRE_OPENAI, C_REQ("{\"role\":\"user\",\"content\":\"Hello there\"}", ""), {0}, 0},
    {"c_usage", AH_WIRE_OPENAI,
     C_REQ("{\"role\":\"user\",\"content\":\"Hello there\"}",
           ",\"stream_options\":{\"include_usage\":true}"),
     {0}, 0},
    {"c_tool", AH_WIRE_OPENAI, C_REQ("{\"role\":\"user\",\"content\":\"What is 2+3?\"}", C_TOOLS), {0}, 0},
    {"c_tool_usage", AH_WIRE_OPENAI,
     C_REQ("{\"role\":\"user\",\"content\":\"What is 2+3?\"}",
           C_TOOLS ",\"stream_options\":{\"include_usage\":true}"),
     {0}, 0},
    {"c_tool3", AH_WIRE_OPENAI, C_REQ("{\"role\":\"user\",\"content\":\"What is 2+3?\"}", C_TOOLS), {0}, 3},
    {"c_result", AH_WIRE_OPENAI,
     C_REQ("{\"role\":\"user\",\"content\":\"add\"},{\"role\":\"assistant\",\"content\":null,"
           "\"tool_calls\":[{\"id\":\"c1\",\"type\":\"function\",\"function\":{\"name\":\"add\","
           "\"arguments\":\"{}\"}}]},{\"role\":\"tool\",\"tool_call_id\":\"c1\",\"content\":\"5\"}",
           C_TOOLS),
     {0}, 0},
    {"c_restate", AH_WIRE_OPENAI,
     C_REQ("{\"role\":\"user\",\"content\":\"Tell me a story\"},{\"role\":\"assistant\","
           "\"content\":\"Once upon a time. There was a fox.\"},{\"role\":\"user\",\"content\":"
           "\"Your previous reply was cut off. Continue exactly where it stopped.\"}",
           ""),
     {.restate = AH__MOCK_RESTATE_ALL}, 0},
    {"c_fixed", AH_WIRE_OPENAI, C_REQ("{\"role\":\"user\",\"content\":\"x\"}", ""),
     {.text = "Gr\xc3\xbc\xc3\x9f \"quoted\" \\ back\nline \xe2\x9c\x93 tab\there", .delta_bytes = 2}, 0},
    {"r_text", AH_WIRE_RESPONSES, R_REQ("\"Hello there\"", ""), {0}, 0},
    {"r_items", AH_WIRE_RESPONSES,
     R_REQ("[{\"role\":\"user\",\"content\":[{\"type\":\"input_text\",\"text\":\"Hello\"}]}]", ""),
     {0}, 0},
    {"r_tool", AH_WIRE_RESPONSES, R_REQ("\"What is 2+3?\"", R_TOOLS), {0}, 0},
    {"r_tool3", AH_WIRE_RESPONSES, R_REQ("\"What is 2+3?\"", R_TOOLS), {0}, 3},
    {"r_bg", AH_WIRE_RESPONSES, R_REQ("\"Hello there\"", ",\"background\":true"), {0}, 0},
    {"r_bg_tool", AH_WIRE_RESPONSES, R_REQ("\"What is 2+3?\"", R_TOOLS ",\"background\":true,\"store\":true"), {0}, 0},
    {"r_result", AH_WIRE_RESPONSES,
     R_REQ("[{\"role\":\"user\",\"content\":\"add\"},{\"type\":\"function_call\",\"call_id\":"
           "\"k1\",\"name\":\"add\",\"arguments\":\"{}\"},{\"type\":\"function_call_output\","
           "\"call_id\":\"k1\",\"output\":\"5\"}]",
           R_TOOLS),
     {0}, 0},
    {"r_restate", AH_WIRE_RESPONSES,
     R_REQ("[{\"role\":\"user\",\"content\":\"Tell me a story\"},{\"role\":\"assistant\","
           "\"content\":\"Once upon a time. There was a fox.\"},{\"role\":\"user\",\"content\":"
           "\"Your previous reply was cut off. Continue exactly where it stopped.\"}]",
           ""),
     {.restate = AH__MOCK_RESTATE_LAST_SENTENCE}, 0},
    {"r_fixed", AH_WIRE_RESPONSES, R_REQ("\"x\"", ""),
     {.text = "Gr\xc3\xbc\xc3\x9f \"quoted\" \\ back\nline \xe2\x9c\x93 tab\there", .text_deltas = 5}, 0},
};

static void one_variant(const variant *v)
{
    char name[160];
    cJSON *req = cJSON_Parse(v->json);
    assert_non_null(req);
    ah__mock_reply r;
    char err[512] = "";
    ah__mock_text_opts opts = v->opts;
    if (v->ntools > 1)
        opts.tool_repeat = v->ntools; /* a step's tool_calls: N */
    ah_status st = ah__mock_model_reply(v->wire, req, strlen(v->json), &opts, &r, err,
                                        sizeof err);
    if (st != AH_OK)
        fprintf(stderr, "%s: %s\n", v->name, err);
    assert_int_equal(st, AH_OK);

    /* the whole stream, event by event */
    ah__mock_buf all = {0}, one = {0};
    ah__mock_writer *w = ah__mock_writer_new(v->wire, &r, "req_golden");
    assert_non_null(w);
    size_t nev = ah__mock_writer_event_count(w);
    while (ah__mock_writer_next(w, &one)) {
        ah__mock_buf_put(&all, one.data, one.len);
        ah__mock_buf_put(&all, "\x01", 1); /* event boundaries count too */
        ah__mock_buf_reset(&one);
    }
    snprintf(name, sizeof name, "%s.stream.%zu", v->name, nev);
    check(name, &all);
    ah__mock_writer_free(w);

    /* a malformed event and the in-stream error after every K */
    for (size_t k = 0; k < nev; k++) {
        for (int kind = 0; kind < 3; kind++) {
            w = ah__mock_writer_new(v->wire, &r, "req_golden");
            assert_non_null(w);
            ah__mock_buf_reset(&all);
            for (size_t i = 0; i < k; i++)
                assert_true(ah__mock_writer_next(w, &all));
            if (kind == 0)
                ah__mock_writer_malformed(w, &all);
            else if (kind == 1)
                ah__mock_writer_error(w, &all, NULL, NULL);
            else
                ah__mock_writer_error(w, &all, "rate_limit_error", "Slow \"down\"");
            snprintf(name, sizeof name, "%s.%s.%zu", v->name,
                     kind == 0 ? "malformed" : kind == 1 ? "error" : "error2", k);
            check(name, &all);
            ah__mock_writer_free(w);
        }
    }

    ah__mock_buf_reset(&all);
    ah__mock_reply_body(v->wire, &r, &all);
    snprintf(name, sizeof name, "%s.body", v->name);
    check(name, &all);

    ah__mock_buf_free(&all);
    ah__mock_buf_free(&one);
    ah__mock_reply_free(&r);
    cJSON_Delete(req);
}

static void every_reply_is_byte_identical(void **state)
{
    (void)state;
    load_table();
    for (size_t i = 0; i < sizeof variants / sizeof variants[0]; i++)
        one_variant(&variants[i]);

    static const int statuses[] = {400, 401, 402, 403, 404, 405, 408, 413, 429,
                                   500, 502, 503, 504, 529};
    static const char *const types[] = {NULL, "overloaded_error", "rate_limit_error",
                                        "server_error", "insufficient_quota"};
    for (int wire = 0; wire < AH_WIRE_COUNT_; wire++) {
        for (size_t s = 0; s < sizeof statuses / sizeof statuses[0]; s++) {
            for (size_t t = 0; t < sizeof types / sizeof types[0]; t++) {
                for (int m = 0; m < 2; m++) {
                    ah__mock_buf b = {0};
                    ah__mock_error_body((ah_wire)wire, statuses[s], types[t],
                                        m ? "Custom \"message\"" : NULL, "req_golden", &b);
                    char name[96];
                    snprintf(name, sizeof name, "%s.error_body.%d.%s.%d",
                             ah_wire_name((ah_wire)wire), statuses[s],
                             types[t] ? types[t] : "default", m);
                    check(name, &b);
                    ah__mock_buf_free(&b);
                }
            }
        }
        char name[96];
        snprintf(name, sizeof name, "%s.error_status", ah_wire_name((ah_wire)wire));
        ah__mock_buf b = {0};
        for (size_t t = 0; t < sizeof types / sizeof types[0]; t++)
            ah__mock_buf_printf(&b, "%d,", ah__mock_error_status((ah_wire)wire, types[t]));
        ah__mock_buf_puts(&b, ah__mock_default_error_type((ah_wire)wire));
        ah__mock_buf_puts(&b, ah__mock_format_of((ah_wire)wire)->extra_after_end);
        check(name, &b);
        ah__mock_buf_free(&b);
    }
    if (G.out) {
        fclose(G.out);
        return;
    }
    if (G.used != G.n)
        fprintf(stderr, "writer_golden: %zu cases checked, %zu recorded\n", G.used, G.n);
    assert_int_equal(G.bad, 0);
    assert_int_equal(G.used, G.n);
    for (size_t i = 0; i < G.n; i++)
        free(G.lines[i]);
    free(G.lines);
}

/* ah__wbuf_int formats by hand (no printf): the same digits as "%lld" at the edges. */
static void ints_match_printf(void **state)
{
    (void)state;
    const long long v[] = {0, 1, -1, 9, 10, -10, 99, 100, 123456789, -987654321,
                           2147483647LL, -2147483648LL, 4294967296LL, LLONG_MAX, LLONG_MIN,
                           LLONG_MIN + 1, LLONG_MAX - 1};
    for (size_t i = 0; i < sizeof v / sizeof v[0]; i++) {
        ah__wbuf b = {0};
        ah__wbuf_puts(&b, "x");
        ah__wbuf_int(&b, v[i]);
        char want[32];
        snprintf(want, sizeof want, "x%lld", v[i]);
        assert_string_equal(b.data, want);
        assert_int_equal(b.len, strlen(want));
        ah__wbuf_free(&b);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(every_reply_is_byte_identical),
        cmocka_unit_test(ints_match_printf),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
