/* test_utf8.c - the boundary rule for text that is not UTF-8 (core/utf8.c): every byte
 * that does not start a valid sequence becomes U+FFFD; in provider JSON a lone surrogate
 * escape becomes \ufffd; valid input is left alone (and not copied). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "../../core/internal.h"

#define R "\xEF\xBF\xBD"

static void dup_replaces_each_invalid_byte(void **state)
{
    (void)state;
    static const struct {
        const char *in, *out;
    } cases[] = {
        {"plain", "plain"},
        {"caf\xC3\xA9 \xF0\x9F\x98\x80", "caf\xC3\xA9 \xF0\x9F\x98\x80"}, /* valid, kept */
        {"\xFF\xFE", R R},
        {"a\xC3", "a" R},                   /* truncated sequence */
        {"\xC0\xAF", R R},                  /* overlong */
        {"\xED\xA0\x80", R R R},            /* a UTF-16 surrogate encoded */
        {"\xF4\x90\x80\x80", R R R R},      /* past U+10FFFF */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        size_t n = 0;
        char *o = ah__utf8_dup(cases[i].in, strlen(cases[i].in), &n);
        assert_non_null(o);
        assert_string_equal(o, cases[i].out);
        assert_int_equal(n, strlen(cases[i].out));
        assert_true(ah__utf8_valid(o, n));
        free(o);
    }
    /* NUL bytes are kept (the length says where the text ends) */
    char *o = ah__utf8_dup("a\0b", 3, NULL);
    assert_memory_equal(o, "a\0b", 4);
    free(o);
}

static void json_fix(const char *in, const char *want)
{
    char *out = NULL;
    size_t n = 0;
    int r = ah__json_text_fix(in, strlen(in), &out, &n);
    if (!want) {
        assert_int_equal(r, 0); /* unchanged, nothing allocated */
        assert_null(out);
        return;
    }
    assert_int_equal(r, 1);
    assert_string_equal(out, want);
    assert_int_equal(n, strlen(want));
    free(out);
}

static void json_text_fix_cases(void **state)
{
    (void)state;
    json_fix("{\"t\":\"hello\"}", NULL);
    json_fix("{\"t\":\"caf\xC3\xA9\"}", NULL);
    json_fix("{\"t\":\"\\u00e9 \\ud83d\\ude00\"}", NULL);   /* a valid pair is kept */
    json_fix("{\"t\":\"a\\\\udc00\"}", NULL);               /* an escaped backslash */
    json_fix("{\"t\":\"a\\udc00b\"}", "{\"t\":\"a\\ufffdb\"}"); /* lone low */
    json_fix("{\"t\":\"\\ud83dx\"}", "{\"t\":\"\\ufffdx\"}");    /* lone high */
    json_fix("{\"t\":\"\\ud83d\\u0041\"}", "{\"t\":\"\\ufffd\\u0041\"}");
    json_fix("{\"t\":\"\xFF\"}", "{\"t\":\"" R "\"}");
    json_fix("{\"t\":\"\\ud83d", "{\"t\":\"\\ufffd"); /* cut at the end */
    json_fix("{\"t\":\"\\u12", NULL);                 /* not an escape we change */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(dup_replaces_each_invalid_byte),
        cmocka_unit_test(json_text_fix_cases),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
