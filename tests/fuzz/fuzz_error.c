/* fuzz_error.c - libFuzzer target for the error model's parsers and redaction.
 *
 * The input is used as a Retry-After value, as "name: value" header lines, as an HTTP
 * response body and as text to redact. Invariants checked (a violation traps):
 *   - every hint is -1 or within [0, AH_RETRY_AFTER_MAX_MS];
 *   - a message is NUL-terminated in its buffer, single-line and valid UTF-8;
 *   - a listed secret never survives ah_redact or ah_error_from_http.
 */
#include "agenthost.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define NOW INT64_C(1735689600000)
#define CHECK(c)                                                                          \
    do {                                                                                  \
        if (!(c))                                                                         \
            __builtin_trap();                                                             \
    } while (0)

static const char *const secrets[] = {"PLANTEDKEY1", NULL};

static int hint_ok(int64_t v)
{
    return v == -1 || (v >= 0 && v <= AH_RETRY_AFTER_MAX_MS);
}

static void check_message(const ah_error *e)
{
    size_t n = strnlen(e->message, sizeof e->message);
    CHECK(n < sizeof e->message);
    const unsigned char *p = (const unsigned char *)e->message;
    while (*p) {
        CHECK(*p >= 0x20 && *p != 0x7F);
        size_t len = *p < 0x80 ? 1 : (*p & 0xE0) == 0xC0 ? 2 : (*p & 0xF0) == 0xE0 ? 3 : 4;
        CHECK(*p < 0x80 || *p >= 0xC2);
        for (size_t i = 1; i < len; i++)
            CHECK((p[i] & 0xC0) == 0x80);
        p += len;
    }
    CHECK(strnlen(e->provider_type, sizeof e->provider_type) < sizeof e->provider_type);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *s = malloc(size + 1);
    char *lines = malloc(size + 1);
    char *red = malloc(size + 32);
    ah_header h[16];
    size_t nh = 0;
    ah_error e;
    if (!s || !lines || !red)
        goto cleanup;
    memcpy(s, data, size);
    s[size] = '\0';

    CHECK(hint_ok(ah_retry_after_parse(s, NOW)));

    /* header lines "name: value" */
    memcpy(lines, s, size + 1);
    for (char *line = lines; line && nh < 16;) {
        char *next = strchr(line, '\n');
        if (next)
            *next++ = '\0';
        char *colon = strchr(line, ':');
        if (colon) {
            *colon = '\0';
            h[nh].name = line;
            h[nh].value = colon + 1;
            nh++;
        }
        line = next;
    }
    for (int status = 428; status <= 429; status++) {
        ah_error_clear(&e);
        e.status = status;
        ah_error_apply_headers(&e, h, nh, NOW);
        CHECK(hint_ok(e.retry_after_ms));
    }

    /* body (exact length, may hold NULs) */
    ah_error_from_http(&e, 429, h, nh, (const char *)data, size, NOW, secrets);
    CHECK(hint_ok(e.retry_after_ms));
    check_message(&e);
    CHECK(strstr(e.message, secrets[0]) == NULL);
    CHECK(strstr(e.provider_type, secrets[0]) == NULL);

    ah_error_set(&e, AH_EK_STREAM, 0, "x %s", s);
    check_message(&e);
    ah_error_redact(&e, secrets);
    check_message(&e);
    CHECK(strstr(e.message, secrets[0]) == NULL);

    /* redaction in place, with a little room and with none */
    memcpy(red, s, size + 1);
    ah_redact(red, size + 32, secrets);
    CHECK(strnlen(red, size + 32) < size + 32);
    CHECK(strstr(red, secrets[0]) == NULL);
    memcpy(red, s, size + 1);
    ah_redact(red, size + 1, secrets);
    CHECK(strnlen(red, size + 1) <= size);
    CHECK(strstr(red, secrets[0]) == NULL);

cleanup:
    free(s);
    free(lines);
    free(red);
    return 0;
}
