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

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(encodings_are_masked),
        cmocka_unit_test(http_error_type_is_redacted_before_sanitising),
        cmocka_unit_test(sanitised_type_is_redacted_later),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
