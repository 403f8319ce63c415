/* test_resume_cursor.c - what a re-attach to an OpenAI Responses background stream rests
 * on: the decoder's cursor (response id + last sequence_number), skipping repeated events,
 * taking the rest of the stream from a new connection after a break at any byte, and the
 * re-attach / cancel URLs of the wire format. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agenthost.h"
#include "agenthost/timeline.h"

/* A background response's stream: created, in_progress, a message with `n` text deltas
 * ("w0 w1 ..."), a function call, completed; event i has sequence_number i. */
typedef struct stream {
    char *ev[64];
    size_t n;
    char text[256];
} stream;

static void add(stream *s, const char *fmt, ...)
{
    char data[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(data, sizeof data, fmt, ap);
    va_end(ap);
    char *e = malloc(strlen(data) + 64);
    assert_non_null(e);
    /* data ends with the sequence number's key: close it with this event's number */
    sprintf(e, "data: %s%zu}\n\n", data, s->n);
    s->ev[s->n++] = e;
}

static void build(stream *s, size_t n)
{
    memset(s, 0, sizeof *s);
    add(s, "{\"type\":\"response.created\",\"response\":{\"id\":\"resp_bg1\",\"status\":"
           "\"queued\",\"background\":true},\"sequence_number\":");
    add(s, "{\"type\":\"response.in_progress\",\"response\":{\"id\":\"resp_bg1\",\"status\":"
           "\"in_progress\"},\"sequence_number\":");
    add(s, "{\"type\":\"response.output_item.added\",\"output_index\":0,\"item\":{\"id\":"
           "\"msg_1\",\"type\":\"message\",\"content\":[]},\"sequence_number\":");
    for (size_t i = 0; i < n; i++) {
        char w[32];
        snprintf(w, sizeof w, "w%zu ", i);
        strcat(s->text, w);
        add(s, "{\"type\":\"response.output_text.delta\",\"output_index\":0,"
               "\"content_index\":0,\"item_id\":\"msg_1\",\"delta\":\"%s\","
               "\"sequence_number\":", w);
    }
    add(s, "{\"type\":\"response.output_item.done\",\"output_index\":0,\"item\":{\"id\":"
           "\"msg_1\",\"type\":\"message\",\"content\":[]},\"sequence_number\":");
    add(s, "{\"type\":\"response.output_item.added\",\"output_index\":1,\"item\":{\"id\":"
           "\"fc_1\",\"type\":\"function_call\",\"call_id\":\"call_1\",\"name\":\"add\","
           "\"arguments\":\"\"},\"sequence_number\":");
    add(s, "{\"type\":\"response.function_call_arguments.delta\",\"output_index\":1,"
           "\"delta\":\"{\\\"a\\\":1,\",\"sequence_number\":");
    add(s, "{\"type\":\"response.function_call_arguments.delta\",\"output_index\":1,"
           "\"delta\":\"\\\"b\\\":2}\",\"sequence_number\":");
    add(s, "{\"type\":\"response.output_item.done\",\"output_index\":1,\"item\":{\"id\":"
           "\"fc_1\",\"type\":\"function_call\",\"call_id\":\"call_1\",\"name\":\"add\","
           "\"arguments\":\"{\\\"a\\\":1,\\\"b\\\":2}\"},\"sequence_number\":");
    add(s, "{\"type\":\"response.completed\",\"response\":{\"id\":\"resp_bg1\",\"status\":"
           "\"completed\",\"output\":[]},\"sequence_number\":");
}

static void unbuild(stream *s)
{
    for (size_t i = 0; i < s->n; i++)
        free(s->ev[i]);
}

/* Text deltas as the display would see them. */
typedef struct seen {
    char text[512];
    size_t len;
    int tool_deltas;
} seen;

static void on_delta(void *ud, size_t i, ah_block_kind k, const char *t, size_t n)
{
    seen *s = ud;
    (void)i;
    if (k == AH_BLOCK_TOOL_USE) {
        s->tool_deltas++;
        return;
    }
    assert_true(s->len + n < sizeof s->text);
    memcpy(s->text + s->len, t, n);
    s->len += n;
    s->text[s->len] = '\0';
}

static const ah_decoder_hooks hooks = {.delta = on_delta};

static void feed(ah_decoder *d, const char *s, size_t n)
{
    assert_int_equal(ah_decoder_feed(d, s, n), AH_OK);
}

static void assert_complete(ah_decoder *d, ah_timeline *tl, const stream *st, const seen *sn)
{
    ah_error e;
    assert_int_equal(ah_decoder_finish(d, &e), AH_OK);
    assert_true(ah_timeline_finished(tl));
    assert_string_equal(sn->text, st->text);
    assert_int_equal(sn->tool_deltas, 2);
    assert_int_equal(ah_timeline_count(tl), 2);
    const ah_block *t = ah_timeline_block(tl, 0), *f = ah_timeline_block(tl, 1);
    assert_true(t->closed && f->closed);
    assert_string_equal(t->text, st->text);
    assert_string_equal(f->arguments, "{\"a\":1,\"b\":2}");
}

static void cursor_tracks_id_and_last_sequence(void **state)
{
    (void)state;
    stream st;
    build(&st, 4);
    ah_timeline *tl = ah_timeline_new();
    ah_decoder *d = NULL;
    ah_decoder_new(AH_WIRE_RESPONSES, tl, NULL, NULL, &d, NULL, 0);
    const char *id = "untouched";
    int64_t seq = -7;
    assert_int_equal(ah_decoder_cursor(d, &id, &seq), 0); /* nothing yet */
    assert_string_equal(id, "untouched");
    assert_null(ah_decoder_response_id(d));
    for (size_t i = 0; i + 1 < st.n; i++) {
        feed(d, st.ev[i], strlen(st.ev[i]));
        assert_int_equal(ah_decoder_cursor(d, &id, &seq), 1);
        assert_string_equal(id, "resp_bg1");
        assert_int_equal(seq, (int64_t)i);
        assert_string_equal(ah_decoder_response_id(d), "resp_bg1");
    }
    /* Completed: nothing to re-attach to, nothing to cancel. */
    feed(d, st.ev[st.n - 1], strlen(st.ev[st.n - 1]));
    assert_int_equal(ah_decoder_cursor(d, NULL, NULL), 0);
    assert_null(ah_decoder_response_id(d));
    ah_decoder_free(d);
    ah_timeline_free(tl);
    unbuild(&st);
}

/* Break after every event and at every byte of the next one; re-attach; the new stream
 * starts `repeat` events before the cursor (a server repeating events). The result is
 * the uninterrupted one, every delta seen once. */
static void reattach_after_a_break_at_every_byte(void **state)
{
    (void)state;
    stream st;
    build(&st, 5);
    int runs = 0;
    for (size_t k = 1; k < st.n; k++) {         /* events received whole */
        size_t next = strlen(st.ev[k]);
        for (size_t b = 0; b < next; b++) {      /* bytes of event k received */
            for (size_t repeat = 0; repeat <= 3; repeat += 3) {
                ah_timeline *tl = ah_timeline_new();
                seen sn = {0};
                ah_decoder *d = NULL;
                ah_decoder_new(AH_WIRE_RESPONSES, tl, &hooks, &sn, &d, NULL, 0);
                for (size_t i = 0; i < k; i++)
                    feed(d, st.ev[i], strlen(st.ev[i]));
                feed(d, st.ev[k], b);
                /* The transport reports the cut; the stream has not ended cleanly. */
                ah_error e;
                assert_int_not_equal(ah_decoder_finish(d, &e), AH_OK);
                int64_t seq;
                assert_int_equal(ah_decoder_cursor(d, NULL, &seq), 1);
                assert_int_equal(seq, (int64_t)k - 1);
                assert_int_equal(ah_decoder_reattach(d), AH_OK);
                size_t from = (size_t)seq + 1 > repeat ? (size_t)seq + 1 - repeat : 0;
                for (size_t i = from; i < st.n; i++)
                    feed(d, st.ev[i], strlen(st.ev[i]));
                assert_complete(d, tl, &st, &sn);
                assert_int_equal(ah_decoder_duplicates(d), (uint64_t)((size_t)seq + 1 - from));
                ah_decoder_free(d);
                ah_timeline_free(tl);
                runs++;
            }
        }
    }
    print_message("re-attach: %d break positions x repeats\n", runs);
    unbuild(&st);
}

static void no_cursor_without_id_or_after_errors(void **state)
{
    (void)state;
    /* No response.created: sequence numbers alone are not enough. */
    ah_timeline *tl = ah_timeline_new();
    ah_decoder *d = NULL;
    ah_decoder_new(AH_WIRE_RESPONSES, tl, NULL, NULL, &d, NULL, 0);
    const char *ev = "data: {\"type\":\"response.output_item.added\",\"output_index\":0,"
                     "\"item\":{\"type\":\"message\",\"id\":\"m\"},\"sequence_number\":4}\n\n";
    feed(d, ev, strlen(ev));
    assert_int_equal(ah_decoder_cursor(d, NULL, NULL), 0);
    ah_decoder_free(d);
    ah_timeline_free(tl);

    /* An in-stream provider error: the response failed; nothing to resume. */
    stream st;
    build(&st, 2);
    tl = ah_timeline_new();
    ah_decoder_new(AH_WIRE_RESPONSES, tl, NULL, NULL, &d, NULL, 0);
    feed(d, st.ev[0], strlen(st.ev[0]));
    const char *err = "data: {\"type\":\"error\",\"code\":\"server_error\",\"message\":\"x\","
                      "\"sequence_number\":1}\n\n";
    feed(d, err, strlen(err));
    assert_int_equal(ah_decoder_cursor(d, NULL, NULL), 0);
    ah_decoder_free(d);
    ah_timeline_free(tl);

    /* A malformed event: the decoder's error is sticky; re-attach refuses. */
    tl = ah_timeline_new();
    ah_decoder_new(AH_WIRE_RESPONSES, tl, NULL, NULL, &d, NULL, 0);
    feed(d, st.ev[0], strlen(st.ev[0]));
    const char *bad = "data: {\"type\":\n\n";
    assert_int_not_equal(ah_decoder_feed(d, bad, strlen(bad)), AH_OK);
    assert_int_equal(ah_decoder_cursor(d, NULL, NULL), 0);
    assert_int_equal(ah_decoder_reattach(d), AH_ERR_STATE);
    ah_decoder_free(d);
    ah_timeline_free(tl);
    assert_int_equal(ah_decoder_reattach(NULL), AH_ERR_INVALID);
    assert_int_equal(ah_decoder_cursor(NULL, NULL, NULL), 0);
    unbuild(&st);
}

/* A server that numbers every event 0: one stream is decoded whole, nothing skipped. */
static void loose_numbering_within_one_stream_is_not_deduped(void **state)
{
    (void)state;
    stream st;
    build(&st, 3);
    ah_timeline *tl = ah_timeline_new();
    seen sn = {0};
    ah_decoder *d = NULL;
    ah_decoder_new(AH_WIRE_RESPONSES, tl, &hooks, &sn, &d, NULL, 0);
    for (size_t i = 0; i < st.n; i++) {
        char *e = st.ev[i];
        char *num = strstr(e, "\"sequence_number\":") + strlen("\"sequence_number\":");
        char fixed[1200];
        snprintf(fixed, sizeof fixed, "%.*s0}\n\n", (int)(num - e), e);
        feed(d, fixed, strlen(fixed));
    }
    assert_complete(d, tl, &st, &sn);
    assert_int_equal(ah_decoder_duplicates(d), 0);
    ah_decoder_free(d);
    ah_timeline_free(tl);
    unbuild(&st);
}

/* A decoder makes its SSE parser at the first byte: one that has seen none has no
 * cursor, re-attaches (nothing to reset), then decodes a whole stream; ended empty, it
 * reports the stream cut before its first byte. */
static void a_decoder_before_its_first_byte(void **state)
{
    (void)state;
    stream st;
    build(&st, 3);
    ah_timeline *tl = ah_timeline_new();
    seen sn = {0};
    ah_decoder *d = NULL;
    ah_decoder_new(AH_WIRE_RESPONSES, tl, &hooks, &sn, &d, NULL, 0);
    assert_int_equal(ah_decoder_cursor(d, NULL, NULL), 0);
    assert_int_equal(ah_decoder_feed(d, "", 0), AH_OK);
    assert_int_equal(ah_decoder_reattach(d), AH_OK);
    for (size_t i = 0; i < st.n; i++)
        feed(d, st.ev[i], strlen(st.ev[i]));
    assert_complete(d, tl, &st, &sn);
    ah_decoder_free(d);
    ah_timeline_free(tl);

    tl = ah_timeline_new();
    ah_decoder_new(AH_WIRE_ANTHROPIC, tl, NULL, NULL, &d, NULL, 0);
    ah_error e;
    assert_int_equal(ah_decoder_finish(d, &e), AH_ERR_TRUNCATED);
    assert_int_equal(e.kind, AH_EK_STREAM);
    assert_non_null(strstr(e.message, "after 0 bytes, 0 events"));
    ah_decoder_free(d);
    ah_timeline_free(tl);
    unbuild(&st);
}

static void wire_urls(void **state)
{
    (void)state;
    char *u = ah_wire_reattach_url(AH_WIRE_RESPONSES, "https://api.openai.com/v1/responses",
                                   "resp_123", 42);
    assert_string_equal(u, "https://api.openai.com/v1/responses/resp_123?stream=true&"
                           "starting_after=42");
    free(u);
    u = ah_wire_reattach_url(AH_WIRE_RESPONSES, "http://h/v1/responses/", "a b/c?", 0);
    assert_string_equal(u, "http://h/v1/responses/a%20b%2Fc%3F?stream=true&starting_after=0");
    free(u);
    u = ah_wire_cancel_url(AH_WIRE_RESPONSES, "http://h/v1/responses", "resp_9");
    assert_string_equal(u, "http://h/v1/responses/resp_9/cancel");
    free(u);
    assert_null(ah_wire_reattach_url(AH_WIRE_ANTHROPIC, "http://h/v1/messages", "x", 1));
    assert_null(ah_wire_reattach_url(AH_WIRE_OPENAI, "http://h/v1/chat/completions", "x", 1));
    assert_null(ah_wire_cancel_url(AH_WIRE_OPENAI, "http://h", "x"));
    assert_null(ah_wire_reattach_url(AH_WIRE_RESPONSES, "http://h", "", 1));
    assert_null(ah_wire_reattach_url(AH_WIRE_RESPONSES, "http://h", "x", -1));
    assert_int_equal(ah_wire_has_background(AH_WIRE_RESPONSES), 1);
    assert_int_equal(ah_wire_has_background(AH_WIRE_ANTHROPIC), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(cursor_tracks_id_and_last_sequence),
        cmocka_unit_test(reattach_after_a_break_at_every_byte),
        cmocka_unit_test(no_cursor_without_id_or_after_errors),
        cmocka_unit_test(loose_numbering_within_one_stream_is_not_deduped),
        cmocka_unit_test(a_decoder_before_its_first_byte),
        cmocka_unit_test(wire_urls),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
