/* test_json_print.c - ah__json_print (core/json_print.c) writes what cJSON_PrintUnformatted
 * writes, byte for byte, for every kind of value the encoders build: numbers of every
 * shape (integers, -0, fractions that need 17 digits, huge and tiny, NaN), strings with
 * every byte cJSON escapes and UTF-8 it does not, raw values, nesting, empty containers,
 * a NULL key; and reports the length. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <cjson/cJSON.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../../core/internal.h"

static void same_as_cjson(const cJSON *v)
{
    char *want = cJSON_PrintUnformatted(v);
    size_t len = 12345;
    char *got = ah__json_print(v, &len);
    assert_non_null(want);
    assert_non_null(got);
    assert_string_equal(got, want);
    assert_int_equal(len, strlen(want));
    cJSON_free(want);
    free(got);
}

static void numbers_as_cjson(void **state)
{
    (void)state;
    static const double v[] = {0.0, -0.0, 1, -1, 7, 256, 100000, 2147483647.0, 2147483648.0,
                               -2147483649.0, 999999999999999.0, 1e15, -1e15, 1e16,
                               123456789012345678.0, 1e300, -1e300, 0.1, 0.2, 0.3, 1.0 / 3,
                               2.0 / 3, 0.7, 1.5, -2.25, 3.14159, 1e-7, 5e-324, 1e-300,
                               4503599627370496.5, 9007199254740993.0, 0.1 + 0.2};
    for (size_t i = 0; i < sizeof v / sizeof v[0]; i++) {
        cJSON *n = cJSON_CreateNumber(v[i]);
        same_as_cjson(n);
        cJSON_Delete(n);
    }
    cJSON *a = cJSON_CreateArray();
    cJSON_AddItemToArray(a, cJSON_CreateNumber(NAN));
    cJSON_AddItemToArray(a, cJSON_CreateNumber(INFINITY));
    cJSON_AddItemToArray(a, cJSON_CreateNumber(-INFINITY));
    same_as_cjson(a);
    cJSON_Delete(a);
}

static void strings_as_cjson(void **state)
{
    (void)state;
    char all[128];
    for (int i = 1; i < 128; i++)
        all[i - 1] = (char)i;
    all[127] = '\0';
    const char *s[] = {"", "plain", "a\"b\\c/d", "\b\f\n\r\t", "\x01\x1f\x7f",
                       "caf\xC3\xA9 \xF0\x9F\x98\x80", "\xFF\xFE not UTF-8", all,
                       "ends with an escape\n", "\"", "\\\\"};
    for (size_t i = 0; i < sizeof s / sizeof s[0]; i++) {
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, s[i], s[i]); /* keys go through the same escaping */
        same_as_cjson(o);
        cJSON_Delete(o);
    }
}

static void trees_as_cjson(void **state)
{
    (void)state;
    const char *texts[] = {
        "{}", "[]", "[[],{},[{}]]", "null", "true", "false", "\"x\"",
        "{\"model\":\"m\",\"max_tokens\":256,\"stream\":true,\"messages\":[{\"role\":\"user\","
        "\"content\":[{\"type\":\"text\",\"text\":\"hi\\nthere \\u0001\"}]}],"
        "\"temperature\":0.7,\"tools\":[],\"metadata\":{\"a\":null,\"b\":false}}",
        "[1,2.5,-3e-9,\"\\u00e9\",[true,[false,[null]]]]",
    };
    for (size_t i = 0; i < sizeof texts / sizeof texts[0]; i++) {
        cJSON *v = cJSON_Parse(texts[i]);
        assert_non_null(v);
        same_as_cjson(v);
        cJSON_Delete(v);
    }
    /* a raw value is copied as it is (the encoders keep a caller's exact tokens) */
    cJSON *o = cJSON_CreateObject();
    cJSON_AddItemToObject(o, "x", cJSON_CreateRaw("{\"n\":1.000000000000000000001}"));
    cJSON_AddItemToObject(o, "y", cJSON_CreateRaw(""));
    same_as_cjson(o);
    cJSON_Delete(o);
    /* a NULL key prints as "" in both */
    o = cJSON_CreateObject();
    cJSON *n = cJSON_CreateNumber(1);
    cJSON_AddItemToObject(o, "k", n);
    free(n->string);
    n->string = NULL;
    same_as_cjson(o);
    cJSON_Delete(o);
    /* a long string grows the buffer past its first size */
    char *big = malloc(100001);
    assert_non_null(big);
    for (int i = 0; i < 100000; i++)
        big[i] = (char)(i % 7 == 0 ? '\n' : 'a' + i % 26);
    big[100000] = '\0';
    cJSON *s = cJSON_CreateString(big);
    same_as_cjson(s);
    cJSON_Delete(s);
    free(big);
}

static void unprintable_is_null(void **state)
{
    (void)state;
    assert_null(ah__json_print(NULL, NULL));
    cJSON *raw = cJSON_CreateRaw("x");
    free(raw->valuestring);
    raw->valuestring = NULL;
    assert_null(cJSON_PrintUnformatted(raw)); /* cJSON refuses it too */
    assert_null(ah__json_print(raw, NULL));
    cJSON_Delete(raw);
    cJSON *bad = cJSON_CreateNull();
    bad->type = cJSON_Invalid;
    assert_null(ah__json_print(bad, NULL));
    cJSON_Delete(bad);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(numbers_as_cjson),
        cmocka_unit_test(strings_as_cjson),
        cmocka_unit_test(trees_as_cjson),
        cmocka_unit_test(unprintable_is_null),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
