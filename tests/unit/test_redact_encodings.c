/* test_redact_encodings.c - a secret echoed back in another form is still masked: URL /
 * form percent-encoding (either hex case, only some characters escaped), JSON escapes,
 * and the '_' a provider error type shows for characters it cannot hold. And the order:
 * redaction first, on the raw bytes, before the error type is sanitised (a key with '/',
 * '+' or '=' in error.type came out as "..._with_chars_" instead of masked). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <string.h>

#include "agenthost.h"

#define KEY "PLANTEDcustom.token/with+chars="

static const char *const secrets[] = {KEY, NULL};

static void encodings_are_masked(void **state)
{
    (void)state;
    static const char *const echoes[] = {
        "key " KEY " rejected",
        "key PLANTEDcustom.token%2Fwith%2Bchars%3D rejected",
        "key PLANTEDcustom.token%2fwith%2bchars%3d rejected",
        "key PLANTEDcustom.token/with%2Bchars= rejected", /* only '+' escaped */
        "key %50LANTEDcustom.token%2Fwith%2Bchars%3D rejected", /* over-escaped */
        "key PLANTEDcustom.token\\/with+chars= rejected",     /* JSON "\/" */
        "key PLANTEDcustom.token\\u002fwith\\u002Bchars\\u003d rejected",
        "type PLANTEDcustom.token_with_chars_ rejected", /* a sanitised error type */
    };
    for (size_t i = 0; i < sizeof echoes / sizeof echoes[0]; i++) {
        char buf[256];
        snprintf(buf, sizeof buf, "%s", echoes[i]);
        size_t n = ah_redact(buf, sizeof buf, secrets);
        if (n != 1 || strstr(buf, "PLANTED") || strstr(buf, "LANTED"))
            fail_msg("not masked: '%s' -> '%s'", echoes[i], buf);
        assert_non_null(strstr(buf, AH_REDACTED));
        assert_non_null(strstr(buf, " rejected"));
    }
    /* A different token is left alone. */
    char other[] = "key PLANTEDcustom.token/with+charsX rejected";
    assert_int_equal(ah_redact(other, sizeof other, secrets), 0);
}

/* An error body whose type and message echo the key, raw and URL-encoded. */
static void http_error_type_is_redacted_before_sanitising(void **state)
{
    (void)state;
    const char *body = "{\"type\":\"error\",\"error\":{\"type\":\"" KEY
                       "\",\"message\":\"bad key PLANTEDcustom.token%2Fwith%2Bchars%3D\"}}";
    ah_error e;
    ah_error_from_http(&e, 401, NULL, 0, body, strlen(body), 0, secrets);
    if (strstr(e.message, "PLANTED") || strstr(e.provider_type, "PLANTED"))
        fail_msg("leaked: message '%s', provider_type '%s'", e.message, e.provider_type);
    assert_non_null(strstr(e.provider_type, AH_REDACTED));
}

/* The in-stream path: the type is set without the secrets (the decoder has none) and
 * sanitised; the call redacts later with the key and must still find it. */
static void sanitised_type_is_redacted_later(void **state)
{
    (void)state;
    ah_error e;
    ah_error_set(&e, AH_EK_STREAM, 0, "in-stream error %s", KEY);
    ah_error_set_provider_type(&e, KEY);
    assert_null(strchr(e.provider_type, '/')); /* sanitised */
    ah_error_redact(&e, secrets);
    if (strstr(e.message, "PLANTED") || strstr(e.provider_type, "PLANTED"))
        fail_msg("leaked: message '%s', provider_type '%s'", e.message, e.provider_type);
}

/* A key echoed with invisible characters inside (a soft hyphen U+00AD, a zero-width
 * space U+200B, a BOM, a word joiner), raw, percent-encoded or JSON-escaped, is still
 * the key; so is an "sk-" key or a Bearer token broken up the same way. */
static void invisible_characters_do_not_hide_a_key(void **state)
{
    (void)state;
    static const char *const sk_secrets[] = {"sk-live-0123456789abcdef", NULL};
    static const char *const echoes[] = {
        "key sk-live-01234\xC2\xAD""56789abcdef rejected",           /* soft hyphen */
        "key sk-live-\xE2\x80\x8B""0123456789ab\xE2\x80\x8B""cdef rejected", /* ZWSP */
        "key sk-live-0123\xEF\xBB\xBF""456789abcdef rejected",     /* BOM */
        "key sk-live-0123\xE2\x81\xA0""456789abcdef rejected",     /* word joiner */
        "key sk-live-0123%C2%AD456789abcdef rejected",             /* percent-encoded */
        "key sk-live-0123\\u00ad456789\\u200Babcdef rejected",    /* JSON escapes */
        "key sk-\xC2\xAD""live-0123456789abcdef rejected",
    };
    for (size_t i = 0; i < sizeof echoes / sizeof echoes[0]; i++) {
        char buf[256];
        snprintf(buf, sizeof buf, "%s", echoes[i]);
        ah_redact(buf, sizeof buf, sk_secrets);
        if (strstr(buf, "0123") || strstr(buf, "cdef") || strstr(buf, "live"))
            fail_msg("not masked: '%s' -> '%s'", echoes[i], buf);
        assert_non_null(strstr(buf, " rejected"));
    }
    /* not listed: the built-in "sk-" and Bearer patterns read through them too */
    char sk[] = "bad key sk-abcd\xC2\xAD""efghijklmnop here";
    ah_redact(sk, sizeof sk, NULL);
    assert_null(strstr(sk, "ijkl"));
    char bearer[] = "Authorization: Bearer abc\xE2\x80\x8B""defghijk, more";
    ah_redact(bearer, sizeof bearer, NULL);
    assert_null(strstr(bearer, "defg"));
    /* an invisible character between words is left alone */
    char plain[] = "soft\xC2\xAD""ware is fine";
    assert_int_equal(ah_redact(plain, sizeof plain, sk_secrets), 0);
}

/* A URL's userinfo password (or a lone user name, a token) and credential-like query
 * parameters are masked wherever a URL is shown. */
static void url_credentials_are_masked(void **state)
{
    (void)state;
    static const struct {
        const char *in, *gone, *kept;
    } cases[] = {
        {"http://bob:hunter22@proxy:3128/v1", "hunter22", "http://bob:"},
        {"https://ghp_TOKEN1234@h/v1", "ghp_TOKEN1234", "@h/v1"},
        {"https://h/v1?api-version=1&key=abcd1234", "abcd1234", "api-version=1"},
        {"https://h/v1?sig=abcd1234&se=2030", "abcd1234", "se=2030"},
        {"https://h/v1?password=abcd1234", "abcd1234", "https://h/v1"},
        {"https://h/v1?client_secret=abcd1234", "abcd1234", "https://h/v1"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char buf[256];
        snprintf(buf, sizeof buf, "%s", cases[i].in);
        ah_redact(buf, sizeof buf, NULL);
        if (strstr(buf, cases[i].gone) || !strstr(buf, cases[i].kept))
            fail_msg("'%s' -> '%s'", cases[i].in, buf);
        /* idempotent: a second pass masks nothing more */
        assert_int_equal(ah_redact(buf, sizeof buf, NULL), 0);
    }
    char mail[] = "see https://h/users/a@b.example and user@host";
    assert_int_equal(ah_redact(mail, sizeof mail, NULL), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(encodings_are_masked),
        cmocka_unit_test(http_error_type_is_redacted_before_sanitising),
        cmocka_unit_test(sanitised_type_is_redacted_later),
        cmocka_unit_test(invisible_characters_do_not_hide_a_key),
        cmocka_unit_test(url_credentials_are_masked),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
