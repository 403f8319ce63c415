/* test_overlap.c - the restatement trimmer (core/overlap.c): every case is fed in every
 * split of the continuation into three pieces (so every byte position is a boundary,
 * including inside UTF-8 sequences) and byte by byte, and must give the same output and
 * the same trimmed count each time. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "overlap.h"

typedef struct result {
    char out[1024];
    size_t len;
    size_t trimmed, max_held;
} result;

static void put(result *r, const char *s, size_t n)
{
    assert_true(r->len + n < sizeof r->out);
    memcpy(r->out + r->len, s, n);
    r->len += n;
    r->out[r->len] = '\0';
}

/* Feed t split at a and b (a <= b), then finish. */
static void run3(const char *c, const char *t, size_t a, size_t b, result *r)
{
    memset(r, 0, sizeof *r);
    ah__overlap *o = ah__overlap_new(c, strlen(c));
    assert_non_null(o);
    size_t n = strlen(t);
    size_t cuts[4] = {0, a, b, n};
    for (int i = 0; i < 3; i++) {
        const char *out;
        size_t len;
        assert_int_equal(ah__overlap_feed(o, t + cuts[i], cuts[i + 1] - cuts[i], &out, &len),
                         AH_OK);
        put(r, out, len);
    }
    const char *out;
    size_t len;
    assert_int_equal(ah__overlap_finish(o, &out, &len), AH_OK);
    put(r, out, len);
    assert_true(ah__overlap_decided(o));
    assert_int_equal(ah__overlap_held(o), 0);
    r->trimmed = ah__overlap_trimmed(o);
    r->max_held = ah__overlap_max_held(o);
    ah__overlap_free(o);
}

/* Every split gives `want` and `trimmed`; nothing is held beyond the cap. */
static void check(const char *c, const char *t, const char *want, size_t trimmed)
{
    size_t n = strlen(t);
    for (size_t a = 0; a <= n; a++)
        for (size_t b = a; b <= n; b++) {
            result r;
            run3(c, t, a, b, &r);
            if (strcmp(r.out, want) != 0 || r.trimmed != trimmed)
                fail_msg("C='%s' T='%s' split %zu/%zu: got '%s' (trimmed %zu), want '%s' "
                         "(trimmed %zu)",
                         c, t, a, b, r.out, r.trimmed, want, trimmed);
            assert_true(r.max_held <= strlen(c) + AH__OVERLAP_WS_SLACK);
        }
    /* The trimmed bytes are exactly the start of t: out == t minus its first trimmed. */
    assert_string_equal(t + trimmed, want);
}

/* Byte by byte: the bytes of a false start come out at the byte that ends the match. */
static void check_release_at(const char *c, const char *t, size_t mismatch)
{
    ah__overlap *o = ah__overlap_new(c, strlen(c));
    assert_non_null(o);
    result r;
    memset(&r, 0, sizeof r);
    for (size_t i = 0; t[i]; i++) {
        const char *out;
        size_t len;
        assert_int_equal(ah__overlap_feed(o, t + i, 1, &out, &len), AH_OK);
        put(&r, out, len);
        if (i < mismatch)
            assert_int_equal(r.len, 0); /* still matching: held */
        else
            assert_int_equal(r.len, i + 1); /* released, in order, nothing lost */
    }
    assert_memory_equal(r.out, t, strlen(t));
    ah__overlap_free(o);
}

#define C1 "I will call add now."

static void exact_continuation_flows_through(void **state)
{
    (void)state;
    check(C1, " Then I add them.", " Then I add them.", 0);
    check(C1, "Then more.", "Then more.", 0);
    check("", "anything at all", "anything at all", 0);
    check("   \n", "anything", "anything", 0);
}

static void whole_restatement_is_dropped(void **state)
{
    (void)state;
    check(C1, C1 " Then I add them.", " Then I add them.", strlen(C1));
    check(C1, C1 "\n\nNext.", "\n\nNext.", strlen(C1));
}

static void continuation_that_is_only_a_restatement(void **state)
{
    (void)state;
    check(C1, C1, "", strlen(C1));
    /* ... ending in a word: the end of the block is the boundary */
    check("The total is 84", "The total is 84", "", 15);
}

static void last_sentence_and_last_line(void **state)
{
    (void)state;
    const char *c = "First part is done. The second sentence here.";
    check(c, "The second sentence here. Next.", " Next.", 25);
    check(c, "The second sentence here.", "", 25);
    check("Step one\nStep two is next", "Step two is next, then three", ", then three", 16);
    check("Sure! Here is the plan now", "Here is the plan now and more", " and more", 20);
    /* the whole text beats its last sentence when both match */
    const char *rep = "Yes. Yes it is done. Yes it is done.";
    check(rep, "Yes it is done. Yes it is done. More", " More", 31);
    check(rep, "Yes it is done. Other", " Other", 15);
}

static void whitespace_differences_are_ignored(void **state)
{
    (void)state;
    const char *c = "Line one.\nLine two is here.";
    check(c, "Line one. Line  two is here.\r\nNext", "\r\nNext", 28);
    check(c, " \n Line one.\n\nLine two is here. X", " X", 31);
    /* committed text with trailing whitespace (a prefill is sent trimmed) */
    check("Hello there. ", "Hello there. Go on", " Go on", 12);
    /* whitespace never matches its absence */
    check("Hello, world.", "Hello,world. x", "Hello,world. x", 0);
    check("Hello,world.", "Hello, world. x", "Hello, world. x", 0);
}

static void false_starts_flow_out_unchanged(void **state)
{
    (void)state;
    check(C1, "I will call the other tool.", "I will call the other tool.", 0);
    check(C1, "I will call add now! Sure.", "I will call add now! Sure.", 0);
    check(C1, "I will", "I will", 0); /* the block ended mid-match */
    check_release_at(C1, "I will call the other tool.", 12);
    check_release_at(C1, "Something else", 0);
    /* a match that ends inside a word is not one */
    check("The answer is 4", "The answer is 42.", "The answer is 42.", 0);
    check("The answer is 4", "The answer is 4.", ".", 15);
    check("The answer is 4", "The answer is 4 indeed", " indeed", 15);
    /* a tail shorter than the minimum is not a candidate: "Yes." said again is kept */
    check("It is done. Yes.", "Yes. Next", "Yes. Next", 0);
}

static void utf8_is_matched_whole(void **state)
{
    (void)state;
    const char *c = "Ça marche très bien. Voilà l'été.";
    check(c, "Voilà l'été. Ensuite…", " Ensuite…", strlen("Voilà l'été."));
    check(c, c, "", strlen(c));
    /* é (C3 A9) vs è (C3 A8): the mismatch is in the second byte; all of it comes out */
    check("Un café.", "Un cafè. Oui", "Un cafè. Oui", 0);
    check_release_at("Un café.", "Un cafè. Oui", 7);
    /* CJK sentences end without whitespace */
    check("你好。我很好，谢谢。", "我很好，谢谢。然后", "然后", strlen("我很好，谢谢。"));
    check("你好。我很好，谢谢。", "你好。我很好，谢谢。", "", strlen("你好。我很好，谢谢。"));
}

static void holding_is_bounded(void **state)
{
    (void)state;
    char t[128];
    /* 30 spaces of lead-in exceed the whitespace slack: given up, all flows out */
    snprintf(t, sizeof t, "%30sHello.", "");
    check("Hello.", t, t, 0);
    /* a few leading spaces are within it and dropped with the restatement */
    snprintf(t, sizeof t, "%3sHello. Go", "");
    check("Hello.", t, " Go", 9);
    /* a long continuation that starts like the committed text holds at most its length */
    result r;
    run3(C1, C1 C1 C1, 1, 2, &r);
    assert_true(r.max_held <= strlen(C1) + AH__OVERLAP_WS_SLACK);
    assert_string_equal(r.out, C1 C1);
}

static void feeding_after_finish_passes_through(void **state)
{
    (void)state;
    ah__overlap *o = ah__overlap_new(C1, strlen(C1));
    const char *out;
    size_t len;
    assert_int_equal(ah__overlap_feed(o, "I will", 6, &out, &len), AH_OK);
    assert_int_equal(len, 0);
    assert_int_equal(ah__overlap_finish(o, &out, &len), AH_OK);
    assert_int_equal(len, 6);
    assert_int_equal(ah__overlap_finish(o, &out, &len), AH_OK);
    assert_int_equal(len, 0);
    assert_int_equal(ah__overlap_feed(o, " x", 2, &out, &len), AH_OK);
    assert_int_equal(len, 2);
    assert_memory_equal(out, " x", 2);
    ah__overlap_free(o);
    ah__overlap_free(NULL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(exact_continuation_flows_through),
        cmocka_unit_test(whole_restatement_is_dropped),
        cmocka_unit_test(continuation_that_is_only_a_restatement),
        cmocka_unit_test(last_sentence_and_last_line),
        cmocka_unit_test(whitespace_differences_are_ignored),
        cmocka_unit_test(false_starts_flow_out_unchanged),
        cmocka_unit_test(utf8_is_matched_whole),
        cmocka_unit_test(holding_is_bounded),
        cmocka_unit_test(feeding_after_finish_passes_through),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
