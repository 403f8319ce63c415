/* test_worker_trim.c - trimming inside the worker on scripted Anthropic streams (a fake
 * transport, no sockets): shapes the mock does not produce, such as a partial message
 * with two text blocks whose second one is restated, and a restatement cut again while
 * it is held. Each attempt's response is delivered from a loop timer, never inside
 * start(). */
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
#include "agenthost/transport.h"

/* ---- SSE builders ------------------------------------------------------------------------ */

static void add(char *buf, size_t size, const char *event, const char *data)
{
    size_t n = strlen(buf);
    snprintf(buf + n, size - n, "event: %s\ndata: %s\n\n", event, data);
}

static void text_block(char *buf, size_t size, int index, const char *text)
{
    char d[512];
    snprintf(d, sizeof d,
             "{\"type\":\"content_block_start\",\"index\":%d,\"content_block\":{\"type\":"
             "\"text\",\"text\":\"\"}}",
             index);
    add(buf, size, "content_block_start", d);
    /* one delta per word, as providers send roughly */
    const char *p = text;
    while (*p) {
        const char *q = p + 1;
        while (*q && *q != ' ')
            q++;
        snprintf(d, sizeof d,
                 "{\"type\":\"content_block_delta\",\"index\":%d,\"delta\":{\"type\":"
                 "\"text_delta\",\"text\":\"%.*s\"}}",
                 index, (int)(q - p), p);
        add(buf, size, "content_block_delta", d);
        p = q;
    }
    snprintf(d, sizeof d, "{\"type\":\"content_block_stop\",\"index\":%d}", index);
    add(buf, size, "content_block_stop", d);
}

static void start_msg(char *buf, size_t size)
{
    buf[0] = '\0';
    add(buf, size, "message_start",
        "{\"type\":\"message_start\",\"message\":{\"id\":\"msg_1\",\"type\":\"message\","
        "\"role\":\"assistant\",\"content\":[],\"model\":\"claude-opus-4-6\",\"usage\":"
        "{\"input_tokens\":5,\"output_tokens\":1}}}");
}

static void end_msg(char *buf, size_t size)
{
    add(buf, size, "message_delta",
        "{\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\"},\"usage\":"
        "{\"output_tokens\":9}}");
    add(buf, size, "message_stop", "{\"type\":\"message_stop\"}");
}

/* ---- the fake transport: one scripted response per attempt ---------------------------------- */

typedef struct script {
    const char *body;
    int cut; /* 1: the stream breaks after the body */
} script;

typedef struct fake {
    ah_loop *loop;
    const script *scripts;
    size_t n, next;
    char bodies[4][8192]; /* request bodies seen */
    /* the attempt in flight */
    ah_timer *timer;
    const ah_transport_sink *sink;
    void *sink_ud;
    const script *cur;
} fake;

static void deliver(void *ud)
{
    fake *f = ud;
    ah_header h = {"content-type", "text/event-stream"};
    const ah_transport_sink *sink = f->sink;
    void *sud = f->sink_ud;
    const script *s = f->cur;
    f->cur = NULL;
    if (sink->on_head(sud, 200, &h, 1) != 0)
        return;
    if (sink->on_body(sud, s->body, strlen(s->body)) != 0)
        return;
    ah_error e;
    ah_error_clear(&e);
    if (s->cut)
        ah_error_set(&e, AH_EK_STREAM, 0, "response stream broken: test cut");
    sink->on_done(sud, &e);
}

static ah_status fake_start(void *self, ah_loop *loop, const ah_http_request *req,
                            const ah_transport_sink *sink, void *sink_ud, void **attempt,
                            ah_error *err)
{
    fake *f = self;
    (void)loop;
    (void)err;
    assert_true(f->next < f->n);
    if (f->next < 4)
        snprintf(f->bodies[f->next], sizeof f->bodies[0], "%.*s", (int)req->body_len,
                 req->body);
    f->cur = &f->scripts[f->next++];
    f->sink = sink;
    f->sink_ud = sink_ud;
    ah_timer_start(f->timer, 0);
    *attempt = f;
    return AH_OK;
}

static void fake_abort(void *self, void *attempt)
{
    fake *f = self;
    (void)attempt;
    ah_timer_stop(f->timer);
    f->cur = NULL;
}

static const ah_transport_ops fake_ops = {"fake", fake_start, fake_abort};

/* ---- harness ---------------------------------------------------------------------------------- */

typedef struct run {
    char shown[4096]; /* every text_delta, joined */
    long long trimmed;
    int continuations;
    long long discarded_bytes;
    char mode[16]; /* the last llm_continuation's */
} run;

static ah_partial_text g_partial; /* policy.continue_partial_text of the next run */

static void on_event(void *ud, const ah_event *ev)
{
    run *r = ud;
    if (ev->type == AH_EV_TEXT_DELTA) {
        size_t n = strlen(r->shown);
        assert_true(n + ev->u.delta.len < sizeof r->shown);
        memcpy(r->shown + n, ev->u.delta.text, ev->u.delta.len);
        r->shown[n + ev->u.delta.len] = '\0';
    } else if (ev->type == AH_EV_LLM_CALL_END) {
        r->trimmed += ev->u.llm_call_end.trimmed_bytes;
    } else if (ev->type == AH_EV_LLM_CONTINUATION) {
        r->continuations++;
        r->discarded_bytes += ev->u.llm_continuation.discarded_bytes;
        snprintf(r->mode, sizeof r->mode, "%s",
                 ah_cont_mode_name(ev->u.llm_continuation.mode));
    }
}

static ah_run_outcome run_scripts(const script *s, size_t n, run *r, char *text,
                                  size_t size, fake *f)
{
    memset(r, 0, sizeof *r);
    memset(f, 0, sizeof *f);
    ah_loop *loop = ah_loop_new(ah_clock_real(), NULL);
    assert_non_null(loop);
    f->loop = loop;
    f->scripts = s;
    f->n = n;
    f->timer = ah_timer_new(loop, deliver, f);
    ah_transport tr = {&fake_ops, f};
    ah_client_config cc = {.wire = AH_WIRE_ANTHROPIC, .base_url = "http://fake.invalid",
                           .model = "claude-opus-4-6"};
    char err[256];
    ah_client *client = NULL;
    ah_client_new(&cc, &client, err, sizeof err);
    assert_non_null(client);
    ah_policy pol;
    ah_policy_init(&pol);
    pol.base_ms = 1;
    pol.cap_ms = 2;
    pol.continue_partial_text = g_partial;
    ah_worker_config wc = {.loop = loop, .client = client, .policy = &pol,
                           .on_event = on_event, .event_ud = r, .transport = &tr};
    ah_worker *w = NULL;
    ah_worker_new(&wc, &w, err, sizeof err);
    assert_non_null(w);
    ah_run_outcome out = ah_worker_run(w, "hello");
    snprintf(text, size, "%s", ah_worker_text(w));
    ah_worker_free(w);
    ah_client_free(client);
    ah_timer_free(f->timer);
    ah_loop_free(loop);
    return out;
}

/* ---- cases ------------------------------------------------------------------------------------ */

static void a_restated_second_block_is_trimmed(void **state)
{
    (void)state;
    static char first[8192], second[8192];
    /* Two complete text blocks, then the stream breaks (no message_stop). */
    start_msg(first, sizeof first);
    text_block(first, sizeof first, 0, "First part.");
    text_block(first, sizeof first, 1, "The second block is here.");
    /* The continuation restates the second block (no sentence end joins them in the
     * committed text: "First part.The second..."), then goes on. */
    start_msg(second, sizeof second);
    text_block(second, sizeof second, 0, "The second block is here. And then more.");
    end_msg(second, sizeof second);
    script s[] = {{first, 1}, {second, 0}};
    run r;
    fake f;
    char text[512];
    assert_int_equal(run_scripts(s, 2, &r, text, sizeof text, &f), AH_OUTCOME_COMPLETED);
    assert_int_equal(r.continuations, 1);
    assert_int_equal(r.trimmed, strlen("The second block is here."));
    assert_string_equal(text, "First part.The second block is here. And then more.");
    assert_string_equal(r.shown, "First part.The second block is here. And then more.");
    /* the prompt rung: the continuation request ends with the visible prompt */
    assert_non_null(strstr(f.bodies[1], "Your previous reply was cut off."));
}

static void a_restatement_cut_while_held_is_not_counted_as_shown(void **state)
{
    (void)state;
    static char first[8192], second[8192], third[8192];
    start_msg(first, sizeof first);
    text_block(first, sizeof first, 0, "Alpha beta gamma delta.");
    /* The continuation starts restating and breaks inside the held text: the open block
     * is dropped, and since nothing of it was shown, discarded_bytes is 0. */
    start_msg(second, sizeof second);
    add(second, sizeof second, "content_block_start",
        "{\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\","
        "\"text\":\"\"}}");
    add(second, sizeof second, "content_block_delta",
        "{\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\","
        "\"text\":\"Alpha beta\"}}");
    start_msg(third, sizeof third);
    text_block(third, sizeof third, 0, "Alpha beta gamma delta. Epsilon.");
    end_msg(third, sizeof third);
    script s[] = {{first, 1}, {second, 1}, {third, 0}};
    run r;
    fake f;
    char text[512];
    assert_int_equal(run_scripts(s, 3, &r, text, sizeof text, &f), AH_OUTCOME_COMPLETED);
    assert_int_equal(r.continuations, 2);
    assert_int_equal(r.discarded_bytes, 0);
    assert_int_equal(r.trimmed, strlen("Alpha beta gamma delta."));
    assert_string_equal(text, "Alpha beta gamma delta. Epsilon.");
    assert_string_equal(r.shown, "Alpha beta gamma delta. Epsilon.");
}

/* An unfinished text block, cut: what continue_partial_text = "sentence" keeps of it. */
static void cut_open_block(char *buf, size_t size, const char *text)
{
    char d[512];
    start_msg(buf, size);
    add(buf, size, "content_block_start",
        "{\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\","
        "\"text\":\"\"}}");
    snprintf(d, sizeof d,
             "{\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":"
             "\"text_delta\",\"text\":\"%s\"}}",
             text);
    add(buf, size, "content_block_delta", d);
}

static void sentence_ends_are_found_where_they_are(void **state)
{
    (void)state;
    static const struct {
        const char *cut;  /* JSON-escaped text of the cut block */
        const char *kept; /* what the answer starts with, "" = nothing */
        const char *mode;
    } cases[] = {
        {"Pi is 3.14 and e is 2.71. Also", "Pi is 3.14 and e is 2.71.", "prompt"},
        {"He said \\\"stop.\\\" Then", "He said \"stop.\"", "prompt"},
        {"Version 3.", "", "regenerate"}, /* no whitespace after it yet: maybe 3.14 */
        {"Ask why? Because", "Ask why?", "prompt"},
        {"\u4f60\u597d\u3002\u518d", "\xe4\xbd\xa0\xe5\xa5\xbd\xe3\x80\x82", "prompt"},
        {"One line\\n  more", "One line", "prompt"},
        {"no end at all", "", "regenerate"},
    };
    g_partial = AH_PARTIAL_TEXT_SENTENCE;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        static char first[8192], second[8192];
        cut_open_block(first, sizeof first, cases[i].cut);
        start_msg(second, sizeof second);
        text_block(second, sizeof second, 0, "REST");
        end_msg(second, sizeof second);
        script s[] = {{first, 1}, {second, 0}};
        run r;
        fake f;
        char text[512], want[512];
        assert_int_equal(run_scripts(s, 2, &r, text, sizeof text, &f), AH_OUTCOME_COMPLETED);
        snprintf(want, sizeof want, "%sREST", cases[i].kept);
        if (strcmp(text, want) != 0)
            fail_msg("case %zu: answer '%s', want '%s'", i, text, want);
        assert_string_equal(r.mode, cases[i].mode);
    }
    g_partial = AH_PARTIAL_TEXT_OFF;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(a_restated_second_block_is_trimmed),
        cmocka_unit_test(a_restatement_cut_while_held_is_not_counted_as_shown),
        cmocka_unit_test(sentence_ends_are_found_where_they_are),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
