/* test_error.c - the error model of docs/errors.md: names, the retry table, every retry-hint
 * form and its precedence, provider bodies, message truncation and redaction.
 *
 * Every time-dependent case passes a fixed now_wall_ms. Expected epoch values were
 * computed independently (Python calendar.timegm) and are noted next to their use.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agenthost.h"

#define ARRAY_LEN(a) (sizeof(a) / sizeof((a)[0]))

/* Sun, 06 Nov 1994 08:49:37 GMT (the RFC 9110 example date) = 784111777 s */
#define NOW_1994 INT64_C(784111777000)
/* 2025-01-01T00:00:00Z = 1735689600 s */
#define NOW_2025 INT64_C(1735689600000)

/* ---- helpers ----------------------------------------------------------------------- */

static int valid_utf8(const char *s)
{
    const unsigned char *p = (const unsigned char *)s;
    while (*p) {
        size_t n = *p < 0x80             ? 1
                   : (*p & 0xE0) == 0xC0 ? 2
                   : (*p & 0xF0) == 0xE0 ? 3
                   : (*p & 0xF8) == 0xF0 ? 4
                                         : 0;
        if (n == 0 || (n > 1 && *p < 0xC2))
            return 0;
        for (size_t i = 1; i < n; i++)
            if ((p[i] & 0xC0) != 0x80)
                return 0;
        p += n;
    }
    return 1;
}

/* Fails when any 6-byte window of secret occurs in text. */
static void assert_no_piece_of(const char *text, const char *secret, const char *where)
{
    size_t sl = strlen(secret);
    for (size_t i = 0; i + 6 <= sl; i++) {
        char piece[7];
        memcpy(piece, secret + i, 6);
        piece[6] = '\0';
        if (strstr(text, piece))
            fail_msg("%s: secret piece '%s' visible in: %s", where, piece, text);
    }
}

static void assert_single_line(const char *s)
{
    for (const char *p = s; *p; p++)
        if ((unsigned char)*p < 0x20 || *p == 0x7F)
            fail_msg("control character 0x%02x in message: %s", (unsigned char)*p, s);
    assert_true(valid_utf8(s));
}

/* ---- names ------------------------------------------------------------------------- */

static void kind_names_round_trip(void **state)
{
    (void)state;
    for (int k = 0; k < AH_EK_COUNT_; k++) {
        const char *name = ah_error_kind_name((ah_error_kind)k);
        assert_non_null(name);
        assert_string_not_equal(name, "unknown");
        assert_int_equal(ah_error_kind_from_name(name), k);
        for (int j = k + 1; j < AH_EK_COUNT_; j++)
            assert_string_not_equal(name, ah_error_kind_name((ah_error_kind)j));
    }
    assert_string_equal(ah_error_kind_name(AH_EK_HTTP), "http");
    assert_string_equal(ah_error_kind_name(AH_EK_TRANSIENT), "transient");
    assert_string_equal(ah_error_kind_name((ah_error_kind)AH_EK_COUNT_), "unknown");
    assert_string_equal(ah_error_kind_name((ah_error_kind)-1), "unknown");
    assert_int_equal(ah_error_kind_from_name("HTTP"), -1); /* names are exact */
    assert_int_equal(ah_error_kind_from_name("nope"), -1);
    assert_int_equal(ah_error_kind_from_name(NULL), -1);
}

static void hint_source_names(void **state)
{
    (void)state;
    for (int k = 0; k < AH_HINT_COUNT_; k++) {
        assert_string_not_equal(ah_hint_source_name((ah_hint_source)k), "unknown");
        for (int j = k + 1; j < AH_HINT_COUNT_; j++)
            assert_string_not_equal(ah_hint_source_name((ah_hint_source)k),
                                    ah_hint_source_name((ah_hint_source)j));
    }
    assert_string_equal(ah_hint_source_name(AH_HINT_BODY_TEXT), "body");
    assert_string_equal(ah_hint_source_name((ah_hint_source)AH_HINT_COUNT_), "unknown");
}

static void clear_resets_every_field(void **state)
{
    (void)state;
    ah_error e;
    memset(&e, 0x5A, sizeof e);
    ah_error_clear(&e);
    assert_int_equal(e.kind, AH_EK_NONE);
    assert_int_equal(e.status, 0);
    assert_int_equal(e.retry_after_ms, -1);
    assert_int_equal(e.retry_after_source, AH_HINT_NONE);
    assert_int_equal(e.should_retry, -1);
    assert_string_equal(e.provider_type, "");
    assert_string_equal(e.message, "");
    ah_error_clear(NULL); /* no-op */
}

/* ---- the retry table --------------------------------------------------------------- */

static void retryable_statuses(void **state)
{
    (void)state;
    static const struct {
        int status;
        int want;
    } rows[] = {
        /* clang-format off */
        {408, 1}, {425, 1}, {429, 1}, {500, 1}, {502, 1}, {503, 1}, {504, 1}, {529, 1},
        {400, 0}, {401, 0}, {403, 0}, {404, 0}, {409, 0}, {413, 0}, {422, 0}, {501, 0},
        {505, 0}, {200, 0}, {0, 0},   {-1, 0},  {599, 0}, {530, 0}, {428, 0}, {999, 0},
    };
    /* clang-format on */
    for (size_t i = 0; i < ARRAY_LEN(rows); i++) {
        ah_error e;
        ah_error_clear(&e);
        e.kind = AH_EK_HTTP;
        e.status = rows[i].status;
        if (ah_error_is_retryable(&e) != rows[i].want)
            fail_msg("HTTP %d: want retryable=%d", rows[i].status, rows[i].want);
    }
}

static void retryable_kinds(void **state)
{
    (void)state;
    static const struct {
        int kind;
        int status;
        int should_retry;
        int want;
    } rows[] = {
        /* clang-format off */
        {AH_EK_NONE, 0, -1, 0},
        {AH_EK_CONNECT, 0, -1, 1},
        {AH_EK_CONNECT, 0, 0, 0}, /* explicit server verdict overrides */
        {AH_EK_CONNECT, 0, 1, 1},
        {AH_EK_TIMEOUT, 0, -1, 1},
        {AH_EK_TIMEOUT, 0, 0, 0},
        {AH_EK_HTTP, 503, -1, 1},
        {AH_EK_HTTP, 503, 0, 0}, /* x-should-retry: false on a 503 */
        {AH_EK_HTTP, 400, 1, 1}, /* x-should-retry: true on a 400 */
        {AH_EK_HTTP, 400, -1, 0},
        {AH_EK_HTTP, 400, 7, 0}, /* a junk should_retry value is "absent" */
        {AH_EK_STREAM, 0, -1, 0},
        {AH_EK_STREAM, 503, 1, 0}, /* streams go to continuation, never a resend */
        {AH_EK_DECODE, 0, -1, 0},
        {AH_EK_DECODE, 0, 1, 0},
        {AH_EK_CANCELLED, 0, -1, 0},
        {AH_EK_CANCELLED, 0, 1, 0},
        {AH_EK_BUDGET, 0, -1, 0},
        {AH_EK_BUDGET, 429, 1, 0},
        {AH_EK_TRANSIENT, 0, -1, 1},
        {AH_EK_TRANSIENT, 0, 0, 1}, /* x-should-retry is an HTTP verdict, not a tool's */
        {AH_EK_PERMANENT, 0, -1, 0},
        {AH_EK_PERMANENT, 503, 1, 0},
        {AH_EK_OUTPUT, 0, -1, 0},
        {AH_EK_IDEMPOTENCY_MISMATCH, 0, -1, 0},
        {AH_EK_LEDGER, 0, -1, 0}, /* a ledger that cannot answer: the effect must not run */
        {AH_EK_OUTCOME_UNKNOWN, 0, 1, 0}, /* may have happened: only a tool's safety repeats it */
        {AH_EK_MCP_SESSION, 404, -1, 0},
        {AH_EK_SPEND_LIMIT, 429, -1, 0}, /* a spend limit does not lift by waiting */
        {AH_EK_SPEND_LIMIT, 429, 1, 0},
        {AH_EK_REFUSED, 0, -1, 0},
        {AH_EK_CONTEXT_EXCEEDED, 400, -1, 0},
        {AH_EK_COUNT_, 503, -1, 0}, /* unknown kinds are not retryable */
        {99, 0, 1, 0},
        {-1, 503, 1, 0},
    };
    /* clang-format on */
    int seen[AH_EK_COUNT_] = {0};
    for (size_t i = 0; i < ARRAY_LEN(rows); i++) {
        ah_error e;
        ah_error_clear(&e);
        e.kind = (ah_error_kind)rows[i].kind;
        e.status = rows[i].status;
        e.should_retry = rows[i].should_retry;
        if (ah_error_is_retryable(&e) != rows[i].want)
            fail_msg("row %zu (kind %d, status %d, should_retry %d): want %d", i,
                     rows[i].kind, rows[i].status, rows[i].should_retry, rows[i].want);
        if (rows[i].kind >= 0 && rows[i].kind < AH_EK_COUNT_)
            seen[rows[i].kind] = 1;
    }
    for (int k = 0; k < AH_EK_COUNT_; k++)
        if (!seen[k])
            fail_msg("kind %s has no row", ah_error_kind_name((ah_error_kind)k));
    assert_int_equal(ah_error_is_retryable(NULL), 0);
}

/* ---- Retry-After ------------------------------------------------------------------- */

typedef struct ra_row {
    const char *value;
    int64_t now;
    int64_t want;
} ra_row;

static void retry_after_values(void **state)
{
    (void)state;
    /* clang-format off */
    static const ra_row rows[] = {
        /* delta-seconds */
        {"120", NOW_1994, 120000},
        {"0", NOW_1994, 0},
        {"007", NOW_1994, 7000},
        {"  7  ", NOW_1994, 7000},
        {"\t3\r\n", NOW_1994, 3000},
        /* fractional: accepted, rounded up to the next ms */
        {"1.5", NOW_1994, 1500},
        {"0.0001", NOW_1994, 1},
        {"2.0005", NOW_1994, 2001},
        /* huge: clamped to 2^31 s, never overflowing */
        {"2147483647", NOW_1994, INT64_C(2147483647000)},
        {"2147483648", NOW_1994, AH_RETRY_AFTER_MAX_MS},
        {"9223372036854775807", NOW_1994, AH_RETRY_AFTER_MAX_MS},
        {"99999999999999999999999999999", NOW_1994, AH_RETRY_AFTER_MAX_MS},
        /* malformed */
        {"", NOW_1994, -1},
        {"   ", NOW_1994, -1},
        {"-5", NOW_1994, -1},
        {"+5", NOW_1994, -1},
        {"5s", NOW_1994, -1},
        {"1e3", NOW_1994, -1},
        {"5, 6", NOW_1994, -1},
        {"5 6", NOW_1994, -1},
        {"1.", NOW_1994, -1},
        {".5", NOW_1994, -1},
        {"abc", NOW_1994, -1},
        {"0x10", NOW_1994, -1},
        /* IMF-fixdate */
        {"Sun, 06 Nov 1994 08:49:47 GMT", NOW_1994, 10000},
        {"sun, 06 nov 1994 08:49:47 gmt", NOW_1994, 10000},
        {"  Sun, 06 Nov 1994 08:49:47 GMT \r\n", NOW_1994, 10000},
        {"Sun, 06 Nov 1994 08:49:37 GMT", NOW_1994, 0}, /* now */
        {"Sun, 06 Nov 1994 08:49:27 GMT", NOW_1994, 0}, /* past */
        {"Sat, 01 Jan 1960 00:00:00 GMT", NOW_1994, 0}, /* before the epoch */
        {"Mon, 07 Nov 1994 08:49:37 GMT", NOW_1994, 86400000},
        {"Thu, 29 Feb 2024 00:00:00 GMT", NOW_2025, 0}, /* leap day exists */
        {"Wed, 01 Jan 2025 00:00:01 GMT", NOW_2025, 1000},
        {"Fri, 31 Dec 9999 23:59:59 GMT", 0, AH_RETRY_AFTER_MAX_MS},
        {"Fri, 31 Dec 9999 23:59:59 GMT", INT64_MIN, AH_RETRY_AFTER_MAX_MS},
        {"Sun, 06 Nov 1994 08:49:47 GMT", INT64_MAX, 0},
        /* rfc850 (obsolete, must be accepted) */
        {"Sunday, 06-Nov-94 08:49:47 GMT", NOW_1994, 10000},
        {"Sunday, 06-Nov-1994 08:49:47 GMT", NOW_1994, 10000},
        /* 2026-01-01T00:00:10Z = 1767225610 s: within 50 years, so 2026 */
        {"Thursday, 01-Jan-26 00:00:10 GMT", NOW_2025, INT64_C(31536010000)},
        /* 2075 is exactly 50 years ahead: still the future (2075-01-01 = 3313526400 s) */
        {"Tuesday, 01-Jan-75 00:00:00 GMT", NOW_2025, INT64_C(1577836800000)},
        /* 2080 would be more than 50 years ahead: it is 1980, the past */
        {"Tuesday, 01-Jan-80 00:00:00 GMT", NOW_2025, 0},
        /* asctime (obsolete, must be accepted) */
        {"Sun Nov  6 08:49:47 1994", NOW_1994, 10000},
        {"Sun Nov 6 08:49:47 1994", NOW_1994, 10000},
        {"Sun Nov 06 08:49:47 1994", NOW_1994, 10000},
        /* malformed dates */
        {"Thu, 29 Feb 2023 00:00:00 GMT", NOW_2025, -1},
        {"Sun, 31 Nov 1994 08:49:47 GMT", NOW_1994, -1},
        {"Sun, 06 Nov 1994 24:00:00 GMT", NOW_1994, -1},
        {"Sun, 06 Nov 1994 08:60:00 GMT", NOW_1994, -1},
        {"Sun, 06 Nov 1994 08:49:47 PST", NOW_1994, -1},
        {"Sun, 06 Nov 1994 08:49:47", NOW_1994, -1},
        {"Sun, 06 Nov 1994 08:49:47 GMT x", NOW_1994, -1},
        {"Sun, 06 Nov 94 08:49:47 GMT", NOW_1994, -1},
        {"Foo, 06 Nov 1994 08:49:47 GMT", NOW_1994, -1},
        {"Sun, 06 Xyz 1994 08:49:47 GMT", NOW_1994, -1},
        {"Sun 06 Nov 1994 08:49:47 GMT", NOW_1994, -1},
        {"Sunday, 06-Nov-994 08:49:47 GMT", NOW_1994, -1},
        {"Sun Nov  6 08:49:47 94", NOW_1994, -1},
        {"Sun, 06 Nov 1994 8:49:47 GMT", NOW_1994, -1},
        {"1994-11-06T08:49:47Z", NOW_1994, -1}, /* RFC 3339 is not an HTTP-date */
    };
    /* clang-format on */
    for (size_t i = 0; i < ARRAY_LEN(rows); i++) {
        int64_t got = ah_retry_after_parse(rows[i].value, rows[i].now);
        if (got != rows[i].want)
            fail_msg("Retry-After '%s': got %lld, want %lld", rows[i].value,
                     (long long)got, (long long)rows[i].want);
    }
    assert_int_equal(ah_retry_after_parse(NULL, NOW_1994), -1);
}

/* ---- header hints ------------------------------------------------------------------ */

enum { MAXH = 6 };

typedef struct hdr_row {
    const char *what;
    int status;
    ah_header h[MAXH]; /* terminated by a NULL name */
    int64_t want_ms;
    ah_hint_source want_src;
    int want_should_retry;
} hdr_row;

#define RA_MS AH_HINT_RETRY_AFTER_MS
#define RA_S  AH_HINT_RETRY_AFTER_SECONDS
#define RA_D  AH_HINT_RETRY_AFTER_DATE
#define RL    AH_HINT_RATELIMIT_RESET
#define NONE  AH_HINT_NONE

/* clang-format off */
static const hdr_row hdr_rows[] = {
    {"no headers", 503, {{0}}, -1, NONE, -1},
    {"unrelated headers", 503, {{"content-type", "application/json"}}, -1, NONE, -1},
    /* retry-after-ms */
    {"ms", 503, {{"retry-after-ms", "1500"}}, 1500, RA_MS, -1},
    {"ms fractional", 503, {{"retry-after-ms", "1500.2"}}, 1501, RA_MS, -1},
    {"ms case", 503, {{"Retry-After-Ms", "20"}}, 20, RA_MS, -1},
    {"ms huge", 503, {{"retry-after-ms", "99999999999999999999"}}, AH_RETRY_AFTER_MAX_MS,
         RA_MS, -1},
    {"ms negative", 503, {{"retry-after-ms", "-1"}}, -1, NONE, -1},
    {"ms garbage", 503, {{"retry-after-ms", "soon"}}, -1, NONE, -1},
    {"ms empty", 503, {{"retry-after-ms", ""}}, -1, NONE, -1},
    /* Retry-After */
    {"seconds", 503, {{"Retry-After", "3"}}, 3000, RA_S, -1},
    {"seconds upper", 503, {{"RETRY-AFTER", "3"}}, 3000, RA_S, -1},
    {"date future", 503, {{"retry-after", "Sun, 06 Nov 1994 08:50:37 GMT"}}, 60000, RA_D,
         -1},
    {"date past", 503, {{"retry-after", "Sun, 06 Nov 1994 08:00:00 GMT"}}, 0, RA_D, -1},
    {"rfc850", 503, {{"retry-after", "Sunday, 06-Nov-94 08:49:38 GMT"}}, 1000, RA_D, -1},
    {"asctime", 503, {{"retry-after", "Sun Nov  6 08:49:38 1994"}}, 1000, RA_D, -1},
    {"first valid wins", 503, {{"retry-after", "bogus"}, {"retry-after", "4"}}, 4000, RA_S,
         -1},
    {"first of two valid", 503, {{"retry-after", "4"}, {"retry-after", "9"}}, 4000, RA_S,
         -1},
    /* precedence */
    {"ms beats seconds", 503, {{"Retry-After", "3"}, {"retry-after-ms", "250"}}, 250, RA_MS,
         -1},
    {"ms beats seconds (order)", 503, {{"retry-after-ms", "250"}, {"Retry-After", "3"}},
         250, RA_MS, -1},
    {"bad ms falls back", 503, {{"retry-after-ms", "abc"}, {"Retry-After", "3"}}, 3000,
         RA_S, -1},
    {"negative ms falls back", 503, {{"retry-after-ms", "-5"}, {"Retry-After", "2"}}, 2000,
         RA_S, -1},
    {"retry-after beats reset", 429, {{"anthropic-ratelimit-requests-reset",
         "1994-11-06T08:59:37Z"}, {"retry-after", "5"}}, 5000, RA_S, -1},
    {"ms beats reset", 429, {{"x-ratelimit-reset-tokens", "6m0s"}, {"retry-after-ms", "7"}},
         7, RA_MS, -1},
    {"bad retry-after falls to reset", 429, {{"retry-after", "later"},
         {"x-ratelimit-reset-requests", "2s"}}, 2000, RL, -1},
    /* Anthropic resets (RFC 3339) on a 429 */
    {"anthropic requests", 429, {{"anthropic-ratelimit-requests-reset",
         "1994-11-06T08:50:37Z"}}, 60000, RL, -1},
    {"anthropic tokens", 429, {{"anthropic-ratelimit-tokens-reset",
         "1994-11-06T08:49:40Z"}}, 3000, RL, -1},
    {"anthropic input", 429, {{"Anthropic-RateLimit-Input-Tokens-Reset",
         "1994-11-06T08:49:42Z"}}, 5000, RL, -1},
    {"anthropic output", 429, {{"anthropic-ratelimit-output-tokens-reset",
         "1994-11-06T08:49:44Z"}}, 7000, RL, -1},
    {"rfc3339 offset", 429, {{"anthropic-ratelimit-requests-reset",
         "1994-11-06T09:50:37+01:00"}}, 60000, RL, -1},
    {"rfc3339 negative offset", 429, {{"anthropic-ratelimit-requests-reset",
         "1994-11-06T03:50:37-05:00"}}, 60000, RL, -1},
    {"rfc3339 fraction", 429, {{"anthropic-ratelimit-requests-reset",
         "1994-11-06T08:49:38.0001Z"}}, 1001, RL, -1},
    {"rfc3339 lower case", 429, {{"anthropic-ratelimit-requests-reset",
         "1994-11-06t08:49:38z"}}, 1000, RL, -1},
    {"rfc3339 past", 429, {{"anthropic-ratelimit-requests-reset", "1994-11-06T08:00:00Z"}},
         0, RL, -1},
    {"rfc3339 bad month", 429, {{"anthropic-ratelimit-requests-reset",
         "1994-13-06T08:50:37Z"}}, -1, NONE, -1},
    {"rfc3339 no zone", 429, {{"anthropic-ratelimit-requests-reset",
         "1994-11-06T08:50:37"}}, -1, NONE, -1},
    {"rfc3339 garbage", 429, {{"anthropic-ratelimit-tokens-reset", "tomorrow"}}, -1, NONE,
         -1},
    {"anthropic reset as duration is not RFC 3339", 429,
         {{"anthropic-ratelimit-tokens-reset", "5s"}}, -1, NONE, -1},
    /* OpenAI resets (durations) on a 429 */
    {"openai 1s", 429, {{"x-ratelimit-reset-requests", "1s"}}, 1000, RL, -1},
    {"openai 6m0s", 429, {{"x-ratelimit-reset-tokens", "6m0s"}}, 360000, RL, -1},
    {"openai 20ms", 429, {{"x-ratelimit-reset-requests", "20ms"}}, 20, RL, -1},
    {"openai 1h2m3.5s", 429, {{"x-ratelimit-reset-tokens", "1h2m3.5s"}}, 3723500, RL, -1},
    {"openai 17.2s", 429, {{"x-ratelimit-reset-tokens", "17.2s"}}, 17200, RL, -1},
    {"openai 250us", 429, {{"x-ratelimit-reset-tokens", "250us"}}, 1, RL, -1},
    {"openai 1500000ns", 429, {{"x-ratelimit-reset-tokens", "1500000ns"}}, 2, RL, -1},
    {"openai bare seconds (Azure)", 429, {{"x-ratelimit-reset-tokens", "12"}}, 12000, RL,
         -1},
    {"openai zero (Azure)", 429, {{"x-ratelimit-reset-tokens", "0"}}, 0, RL, -1},
    {"openai huge", 429, {{"x-ratelimit-reset-tokens", "99999999999h"}},
         AH_RETRY_AFTER_MAX_MS, RL, -1},
    {"openai negative", 429, {{"x-ratelimit-reset-tokens", "-1s"}}, -1, NONE, -1},
    {"openai bad unit", 429, {{"x-ratelimit-reset-tokens", "5x"}}, -1, NONE, -1},
    {"openai trailing number", 429, {{"x-ratelimit-reset-tokens", "1s2"}}, -1, NONE, -1},
    {"openai empty", 429, {{"x-ratelimit-reset-tokens", ""}}, -1, NONE, -1},
    {"openai space inside", 429, {{"x-ratelimit-reset-tokens", "1m 2s"}}, -1, NONE, -1},
    /* resets only count on a 429 */
    {"503 ignores reset", 503, {{"x-ratelimit-reset-requests", "1s"}}, -1, NONE, -1},
    {"503 ignores anthropic reset", 503, {{"anthropic-ratelimit-requests-reset",
         "1994-11-06T08:50:37Z"}}, -1, NONE, -1},
    {"500 ignores reset but keeps retry-after", 500, {{"x-ratelimit-reset-requests", "9s"},
         {"retry-after", "1"}}, 1000, RA_S, -1},
    /* several resets: the latest of the limits that are (or may be) exhausted */
    {"latest of unknown", 429, {{"x-ratelimit-reset-requests", "1s"},
         {"x-ratelimit-reset-tokens", "6m0s"}}, 360000, RL, -1},
    {"latest of all four anthropic", 429, {{"anthropic-ratelimit-requests-reset",
         "1994-11-06T08:49:40Z"}, {"anthropic-ratelimit-tokens-reset",
         "1994-11-06T08:49:50Z"}, {"anthropic-ratelimit-input-tokens-reset",
         "1994-11-06T08:49:45Z"}, {"anthropic-ratelimit-output-tokens-reset",
         "1994-11-06T08:49:39Z"}}, 13000, RL, -1},
    {"requests with capacity are skipped", 429, {{"x-ratelimit-remaining-requests", "5"},
         {"x-ratelimit-reset-requests", "10s"}, {"x-ratelimit-remaining-tokens", "0"},
         {"x-ratelimit-reset-tokens", "2s"}}, 2000, RL, -1},
    {"anthropic exhausted tokens chosen over later requests", 429,
         {{"anthropic-ratelimit-requests-remaining", "49"},
         {"anthropic-ratelimit-requests-reset", "1994-11-06T08:50:37Z"},
         {"anthropic-ratelimit-tokens-remaining", "0"}, {"anthropic-ratelimit-tokens-reset",
         "1994-11-06T08:49:41Z"}}, 4000, RL, -1},
    {"all report capacity: latest of all", 429, {{"x-ratelimit-remaining-requests", "5"},
         {"x-ratelimit-reset-requests", "10s"}, {"x-ratelimit-remaining-tokens", "100"},
         {"x-ratelimit-reset-tokens", "2s"}}, 10000, RL, -1},
    {"garbage remaining counts as unknown", 429, {{"x-ratelimit-remaining-requests",
         "lots"}, {"x-ratelimit-reset-requests", "10s"}, {"x-ratelimit-remaining-tokens",
         "0"}, {"x-ratelimit-reset-tokens", "2s"}}, 10000, RL, -1},
    {"malformed reset ignored among valid", 429, {{"x-ratelimit-reset-requests", "never"},
         {"x-ratelimit-reset-tokens", "3s"}}, 3000, RL, -1},
    /* x-should-retry */
    {"should-retry true", 400, {{"x-should-retry", "true"}}, -1, NONE, 1},
    {"should-retry false", 503, {{"x-should-retry", "false"}}, -1, NONE, 0},
    {"should-retry case and space", 503, {{"X-Should-Retry", " FALSE "}}, -1, NONE, 0},
    {"should-retry junk", 503, {{"x-should-retry", "yes"}}, -1, NONE, -1},
    {"should-retry 1 is junk", 503, {{"x-should-retry", "1"}}, -1, NONE, -1},
    {"should-retry with hint", 503, {{"x-should-retry", "true"}, {"retry-after", "2"}},
         2000, RA_S, 1},
    /* entries with NULL parts are skipped */
    {"null value", 503, {{"x", NULL}, {"retry-after", "2"}}, 2000, RA_S, -1},
};
/* clang-format on */

static size_t count_headers(const ah_header *h)
{
    size_t n = 0;
    while (n < MAXH && (h[n].name || h[n].value))
        n++;
    return n;
}

static void header_hints(void **state)
{
    (void)state;
    for (size_t i = 0; i < ARRAY_LEN(hdr_rows); i++) {
        const hdr_row *r = &hdr_rows[i];
        ah_error e;
        ah_error_clear(&e);
        e.kind = AH_EK_HTTP;
        e.status = r->status;
        ah_error_apply_headers(&e, r->h, count_headers(r->h), NOW_1994);
        if (e.retry_after_ms != r->want_ms || e.retry_after_source != r->want_src ||
            e.should_retry != r->want_should_retry)
            fail_msg("%s: got ms=%lld src=%s should_retry=%d; want ms=%lld src=%s %d",
                     r->what, (long long)e.retry_after_ms,
                     ah_hint_source_name(e.retry_after_source), e.should_retry,
                     (long long)r->want_ms, ah_hint_source_name(r->want_src),
                     r->want_should_retry);
    }
}

static void header_hints_edge_cases(void **state)
{
    (void)state;
    ah_error e;
    ah_error_clear(&e);
    e.status = 429;
    /* no hint found: existing fields are left alone */
    e.retry_after_ms = 42;
    e.retry_after_source = AH_HINT_BODY_TEXT;
    ah_header junk[] = {{"retry-after", "later"}};
    ah_error_apply_headers(&e, junk, 1, NOW_1994);
    assert_int_equal(e.retry_after_ms, 42);
    assert_int_equal(e.retry_after_source, AH_HINT_BODY_TEXT);
    /* NULL header array with n == 0, NULL array with n > 0, NULL record: no crash */
    ah_error_apply_headers(&e, NULL, 0, NOW_1994);
    ah_error_apply_headers(&e, NULL, 3, NOW_1994);
    ah_error_apply_headers(NULL, junk, 1, NOW_1994);
    assert_int_equal(e.retry_after_ms, 42);
    /* a NULL name is skipped */
    ah_header nul[] = {{NULL, "5"}, {"retry-after", "6"}};
    ah_error_apply_headers(&e, nul, 2, NOW_1994);
    assert_int_equal(e.retry_after_ms, 6000);
}

/* ---- HTTP responses ---------------------------------------------------------------- */

typedef struct http_row {
    const char *what;
    int status;
    const char *body; /* NUL-terminated here; passed with its strlen */
    const char *want_type;
    const char *want_message;
} http_row;

/* clang-format off */
static const http_row http_rows[] = {
    {"anthropic overloaded", 529,
         "{\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\",\"message\":" "\"Overloaded\"}}",
         "overloaded_error", "HTTP 529 overloaded_error: Overloaded"},
    {"anthropic rate limit", 429,
         "{\"type\":\"error\",\"error\":{\"type\":\"rate_limit_error\",\"message\":\"Number " "of " "request tokens has exceeded your per-minute rate limit\"}}",
         "rate_limit_error",
         "HTTP 429 rate_limit_error: Number of request tokens has exceeded your per-minute " "rate " "limit"},
    {"openai with type", 429,
         "{\"error\":{\"message\":\"Rate limit " "reached\",\"type\":\"requests\",\"param\":null," "\"code\":\"rate_limit_exceeded\"}}",
         "requests", "HTTP 429 requests: Rate limit reached"},
    {"openai null type falls back to code", 401,
         "{\"error\":{\"message\":\"Incorrect API key " "provided\",\"type\":null,\"param\":null," "\"code\":\"invalid_api_key\"}}",
         "invalid_api_key", "HTTP 401 invalid_api_key: Incorrect API key provided"},
    {"openai server error", 500,
         "{\"error\":{\"message\":\"The server had an error\",\"type\":\"server_error\"," "\"param\":null,\"code\":null}}\n",
         "server_error", "HTTP 500 server_error: The server had an error"},
    {"google-style status in an array", 503,
         "[{\"error\":{\"code\":503,\"message\":\"The model is overloaded.\",\"status\":" "\"UNAVAILABLE\"}}]",
         "UNAVAILABLE", "HTTP 503 UNAVAILABLE: The model is overloaded."},
    {"error as a string", 402, "{\"error\":\"quota exceeded\"}", "",
         "HTTP 402: quota exceeded"},
    {"top-level message", 404, "{\"message\":\"no such model\"}", "",
         "HTTP 404: no such model"},
    {"type without message", 529, "{\"error\":{\"type\":\"overloaded_error\"}}",
         "overloaded_error", "HTTP 529 overloaded_error"},
    {"wrong JSON types: shown as text", 500, "{\"error\":{\"type\":42,\"message\":[1]}}",
         "", "HTTP 500: {\"error\":{\"type\":42,\"message\":[1]}}"},
    {"HTML from a gateway", 502,
         "<html>\n<body>\n<h1>502 Bad Gateway</h1>\n</body>\n</html>", "",
         "HTTP 502: <html> <body> <h1>502 Bad Gateway</h1> </body> </html>"},
    {"plain text", 503, "upstream connect error", "", "HTTP 503: upstream connect error"},
    {"truncated JSON", 500, "{\"error\":{\"type\":\"api_er", "",
         "HTTP 500: {\"error\":{\"type\":\"api_er"},
    {"empty body", 503, "", "", "HTTP 503 Service Unavailable"},
    {"empty body, 529", 529, "", "", "HTTP 529 Overloaded"},
    {"empty body, unknown status", 599, "", "", "HTTP 599"},
    {"whitespace and control characters", 500, "line1\r\n\r\nline2\tx\x01y", "",
         "HTTP 500: line1 line2 x y"},
    {"invalid UTF-8", 500, "bad \xff\xfe bytes, good \xc3\xa9", "",
         "HTTP 500: bad ?? bytes, good \xc3\xa9"},
    {"odd characters in type", 400,
         "{\"error\":{\"type\":\"bad type\\n!\",\"message\":\"m\"}}", "bad_type__",
         "HTTP 400 bad_type__: m"},
};
/* clang-format on */

static void http_bodies(void **state)
{
    (void)state;
    for (size_t i = 0; i < ARRAY_LEN(http_rows); i++) {
        const http_row *r = &http_rows[i];
        ah_error e;
        memset(&e, 0x7E, sizeof e);
        ah_error_from_http(&e, r->status, NULL, 0, r->body, strlen(r->body), NOW_1994,
                           NULL);
        if (e.kind != AH_EK_HTTP || e.status != r->status)
            fail_msg("%s: kind/status not set", r->what);
        if (strcmp(e.provider_type, r->want_type) != 0)
            fail_msg("%s: type '%s', want '%s'", r->what, e.provider_type, r->want_type);
        if (strcmp(e.message, r->want_message) != 0)
            fail_msg("%s: message '%s', want '%s'", r->what, e.message, r->want_message);
        assert_single_line(e.message);
        assert_int_equal(e.retry_after_ms, -1);
        assert_int_equal(e.should_retry, -1);
    }
}

/* A redirect is not followed (the request is a POST): the message gives the Location
 * and says base_url should change, instead of a bare "HTTP 307". */
static void redirects_name_their_location(void **state)
{
    (void)state;
    static const int statuses[] = {301, 302, 303, 307, 308};
    for (size_t i = 0; i < ARRAY_LEN(statuses); i++) {
        ah_header h[] = {{"Content-Type", "text/html"},
                         {"Location", "https://api2.example.com/v1/messages?key=abcd1234"}};
        ah_error e;
        const char *body = "<html>Moved</html>";
        ah_error_from_http(&e, statuses[i], h, 2, body, strlen(body), NOW_1994, NULL);
        char want[64];
        snprintf(want, sizeof want, "HTTP %d ", statuses[i]);
        assert_true(strncmp(e.message, want, strlen(want)) == 0);
        assert_non_null(strstr(e.message, " to https://api2.example.com/v1/messages?key="));
        assert_non_null(strstr(e.message, "base_url"));
        assert_null(strstr(e.message, "abcd1234")); /* the Location is redacted too */
        assert_false(ah_error_is_retryable(&e));
    }
    /* without a Location: the status and its reason, as before */
    ah_error e;
    ah_error_from_http(&e, 307, NULL, 0, "", 0, NOW_1994, NULL);
    assert_string_equal(e.message, "HTTP 307 Temporary Redirect");
    /* a long Location is cut where no token is split */
    char loc[600];
    memset(loc, 'a', sizeof loc - 1);
    memcpy(loc, "https://h/", 10);
    loc[sizeof loc - 1] = '\0';
    ah_header h[] = {{"location", loc}};
    ah_error_from_http(&e, 308, h, 1, "", 0, NOW_1994, NULL);
    assert_non_null(strstr(e.message, "HTTP 308 Permanent Redirect to https"));
    assert_non_null(strstr(e.message, "...: the API is at another address"));
    assert_true(strlen(e.message) < 300 + 200);
    assert_single_line(e.message);
}

static void http_body_null_and_unterminated(void **state)
{
    (void)state;
    ah_error e;
    ah_error_from_http(&e, 504, NULL, 0, NULL, 1234, NOW_1994, NULL);
    assert_string_equal(e.message, "HTTP 504 Gateway Timeout");
    /* only body_len bytes are read: what follows must not show up */
    const char buf[] = "{\"error\":{\"type\":\"x\",\"message\":\"m\"}}TRAILING";
    ah_error_from_http(&e, 500, NULL, 0, buf, strlen(buf) - strlen("TRAILING"), NOW_1994,
                       NULL);
    assert_string_equal(e.message, "HTTP 500 x: m");
    const char raw[] = "short text, then MORE";
    ah_error_from_http(&e, 500, NULL, 0, raw, 10, NOW_1994, NULL);
    assert_string_equal(e.message, "HTTP 500: short text");
    ah_error_from_http(NULL, 500, NULL, 0, raw, 10, NOW_1994, NULL); /* no crash */
}

static void http_headers_applied(void **state)
{
    (void)state;
    ah_error e;
    ah_header h[] = {{"Retry-After", "30"}, {"x-should-retry", "false"}};
    const char *body = "{\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\","
                       "\"message\":\"Overloaded\"}}";
    ah_error_from_http(&e, 529, h, 2, body, strlen(body), NOW_1994, NULL);
    assert_int_equal(e.retry_after_ms, 30000);
    assert_int_equal(e.retry_after_source, AH_HINT_RETRY_AFTER_SECONDS);
    assert_int_equal(e.should_retry, 0);
    assert_false(ah_error_is_retryable(&e)); /* the server's verdict beats the table */
    ah_error_from_http(&e, 529, NULL, 0, body, strlen(body), NOW_1994, NULL);
    assert_true(ah_error_is_retryable(&e));
}

typedef struct body_hint_row {
    const char *what;
    int status;
    const char *body;
    const char *header_name; /* optional */
    const char *header_value;
    int64_t want_ms;
    ah_hint_source want_src;
} body_hint_row;

static void body_text_hints(void **state)
{
    (void)state;
    /* clang-format off */
    static const body_hint_row rows[] = {
        {"openai 17.2s", 429,
             "{\"error\":{\"message\":\"Rate limit reached for gpt-4o in organization org-x " "on " "tokens per min (TPM): Limit 30000, Used 29000, Requested 2000. Please try " "again " "in 17.2s. Visit https://platform.openai.com/account/rate-limits to learn " "more.\"," "\"type\":\"tokens\",\"param\":null,\"code\":\"rate_limit_exceeded\"}}",
             NULL, NULL, 17200, AH_HINT_BODY_TEXT},
        {"20ms", 429, "{\"error\":{\"message\":\"Please try again in 20ms.\"}}", NULL, NULL,
             20, AH_HINT_BODY_TEXT},
        {"compound", 429, "{\"error\":{\"message\":\"Please try again in 1m30s.\"}}", NULL,
             NULL, 90000, AH_HINT_BODY_TEXT},
        {"6m0s", 429, "Try again in 6m0s", NULL, NULL, 360000, AH_HINT_BODY_TEXT},
        {"words", 429, "Please retry after 20 seconds.", NULL, NULL, 20000,
             AH_HINT_BODY_TEXT},
        {"words, one minute", 503, "busy; try again in 1 minute", NULL, NULL, 60000,
             AH_HINT_BODY_TEXT},
        {"fraction words", 503, "retry in 1.5 sec, thanks", NULL, NULL, 1500,
             AH_HINT_BODY_TEXT},
        {"plain text body", 503, "upstream busy, try again in 3s", NULL, NULL, 3000,
             AH_HINT_BODY_TEXT},
        {"first phrase without number, second with", 429,
             "try again in a moment (try again in 2s)", NULL, NULL, 2000,
             AH_HINT_BODY_TEXT},
        {"no unit", 429, "try again in 5", NULL, NULL, -1, AH_HINT_NONE},
        {"no duration", 429, "Please try again in a moment.", NULL, NULL, -1, AH_HINT_NONE},
        {"unit glued to a word", 429, "try again in 5sec0nds", NULL, NULL, -1,
             AH_HINT_NONE},
        {"negative", 429, "try again in -5s", NULL, NULL, -1, AH_HINT_NONE},
        {"phrase inside a word", 429, "mretry after 5s", NULL, NULL, -1, AH_HINT_NONE},
        {"header wins over body", 429, "Please try again in 17.2s.", "retry-after", "2",
             2000, AH_HINT_RETRY_AFTER_SECONDS},
        {"malformed header: body used", 429, "Please try again in 17.2s.", "retry-after",
             "-2", 17200, AH_HINT_BODY_TEXT},
        {"reset header wins over body on 429", 429, "Please try again in 17.2s.",
             "x-ratelimit-reset-tokens", "1s", 1000, AH_HINT_RATELIMIT_RESET},
        {"reset header ignored on 503: body used", 503, "Please try again in 17.2s.",
             "x-ratelimit-reset-tokens", "1s", 17200, AH_HINT_BODY_TEXT},
    };
    /* clang-format on */
    for (size_t i = 0; i < ARRAY_LEN(rows); i++) {
        const body_hint_row *r = &rows[i];
        ah_header h[1] = {{r->header_name, r->header_value}};
        ah_error e;
        ah_error_from_http(&e, r->status, h, r->header_name ? 1 : 0, r->body,
                           strlen(r->body), NOW_1994, NULL);
        if (e.retry_after_ms != r->want_ms || e.retry_after_source != r->want_src)
            fail_msg("%s: got %lld (%s), want %lld (%s)", r->what,
                     (long long)e.retry_after_ms,
                     ah_hint_source_name(e.retry_after_source), (long long)r->want_ms,
                     ah_hint_source_name(r->want_src));
    }
}

static void long_body_is_truncated_safely(void **state)
{
    (void)state;
    /* 3000 two-byte characters: the cut must land on a character boundary */
    size_t n = 3000;
    char *msg = malloc(2 * n + 1);
    char *body = malloc(2 * n + 64);
    assert_non_null(msg);
    assert_non_null(body);
    for (size_t i = 0; i < n; i++)
        memcpy(msg + 2 * i, "\xc3\xa9", 2);
    msg[2 * n] = '\0';
    int len = snprintf(body, 2 * n + 64,
                       "{\"error\":{\"type\":\"t\",\"message\":\"%s\"}}", msg);
    ah_error e;
    ah_error_from_http(&e, 400, NULL, 0, body, (size_t)len, NOW_1994, NULL);
    size_t ml = strlen(e.message);
    assert_true(ml < sizeof e.message);
    assert_true(ml > sizeof e.message - 8); /* filled, not dropped */
    assert_memory_equal(e.message + ml - 3, "...", 3);
    assert_memory_equal(e.message, "HTTP 400 t: \xc3\xa9", 14);
    assert_true(valid_utf8(e.message));

    /* a plain ASCII body longer than everything */
    memset(body, 'w', 2 * n);
    for (size_t i = 5; i < 2 * n; i += 6)
        body[i] = ' ';
    ah_error_from_http(&e, 500, NULL, 0, body, 2 * n, NOW_1994, NULL);
    ml = strlen(e.message);
    assert_true(ml < sizeof e.message && ml > sizeof e.message - 8);
    assert_memory_equal(e.message + ml - 3, "...", 3);
    assert_memory_equal(e.message, "HTTP 500: wwwww wwwww", 21);

    /* one giant token with nowhere safe to cut: dropped rather than risked */
    memset(body, 'a', 2 * n);
    ah_error_from_http(&e, 500, NULL, 0, body, 2 * n, NOW_1994, NULL);
    assert_string_equal(e.message, "HTTP 500 Internal Server Error");
    free(msg);
    free(body);
}

/* ---- ah_error_set ------------------------------------------------------------------ */

static void set_formats_and_resets(void **state)
{
    (void)state;
    ah_error e;
    ah_error_clear(&e);
    e.retry_after_ms = 5;
    e.retry_after_source = AH_HINT_BODY_TEXT;
    e.should_retry = 1;
    ah_error_set_provider_type(&e, "old");
    ah_error_set(&e, AH_EK_CONNECT, 0, "connect to %s:%d failed: %s", "api.example.com",
                 443, "Connection refused");
    assert_int_equal(e.kind, AH_EK_CONNECT);
    assert_int_equal(e.status, 0);
    assert_string_equal(e.message,
                        "connect to api.example.com:443 failed: Connection refused");
    assert_int_equal(e.retry_after_ms, -1);
    assert_int_equal(e.retry_after_source, AH_HINT_NONE);
    assert_int_equal(e.should_retry, -1);
    assert_string_equal(e.provider_type, "");

    ah_error_set(&e, AH_EK_DECODE, 200, "bad\nline");
    assert_string_equal(e.message, "bad line");
    ah_error_set(&e, AH_EK_TIMEOUT, 0, NULL);
    assert_int_equal(e.kind, AH_EK_TIMEOUT);
    assert_string_equal(e.message, "");
    ah_error_set(NULL, AH_EK_TIMEOUT, 0, "x"); /* no crash */

    /* longer than the stack buffer: heap path, still truncated safely */
    char *big = malloc(5001);
    assert_non_null(big);
    memset(big, 'z', 5000);
    big[5000] = '\0';
    ah_error_set(&e, AH_EK_STREAM, 0, "stream broke: %s", big);
    assert_int_equal(strlen(e.message), sizeof e.message - 1);
    assert_memory_equal(e.message, "stream broke: zzz", 17);
    free(big);
}

static void provider_type_setter(void **state)
{
    (void)state;
    ah_error e;
    ah_error_clear(&e);
    ah_error_set_provider_type(&e, "overloaded_error");
    assert_string_equal(e.provider_type, "overloaded_error");
    ah_error_set_provider_type(&e, "a b/c\"d");
    assert_string_equal(e.provider_type, "a_b_c_d");
    char longt[200];
    memset(longt, 'q', sizeof longt - 1);
    longt[sizeof longt - 1] = '\0';
    ah_error_set_provider_type(&e, longt);
    assert_int_equal(strlen(e.provider_type), sizeof e.provider_type - 1);
    ah_error_set_provider_type(&e, "sk-ant-api03-abcdefghijklmnop");
    assert_string_equal(e.provider_type, AH_REDACTED);
    ah_error_set_provider_type(&e, NULL);
    assert_string_equal(e.provider_type, "");
    ah_error_set_provider_type(NULL, "x"); /* no crash */
}

/* ---- redaction --------------------------------------------------------------------- */

typedef struct redact_row {
    const char *in;
    const char *secrets[3];
    const char *want;
    size_t want_count;
} redact_row;

static void redact_patterns(void **state)
{
    (void)state;
    /* clang-format off */
    static const redact_row rows[] = {
        {"Authorization: Bearer abc.def\nnext", {0}, "Authorization: [REDACTED]\nnext", 1},
        {"authorization:Basic dXNlcjpwYXNz", {0}, "authorization:[REDACTED]", 1},
        {"Proxy-Authorization: Basic x\r\nHost: h", {0},
             "Proxy-Authorization: [REDACTED]\r\nHost: h", 1},
        {"sent Bearer abc.def-ghi_j~k+l/m= ok", {0}, "sent Bearer [REDACTED] ok", 1},
        {"bearer    tok", {0}, "bearer    [REDACTED]", 1},
        {"x-api-key: abcd1234", {0}, "x-api-key: [REDACTED]", 1},
        {"X-Api-Key:abcd1234 and more\nrest", {0}, "X-Api-Key:[REDACTED]\nrest", 1},
        {"api-key: abcd1234", {0}, "api-key: [REDACTED]", 1},
        {"{\"x-api-key\":\"k123456\",\"a\":1}", {0},
             "{\"x-api-key\":\"[REDACTED]\",\"a\":1}", 1},
        {"{\"authorization\": \"Bearer x\"}", {0}, "{\"authorization\": \"[REDACTED]\"}",
             1},
        {"{\"api_key\": \"abc\"}", {0}, "{\"api_key\": \"[REDACTED]\"}", 1},
        {"{\"token\": \"abc\"}", {0}, "{\"token\": \"[REDACTED]\"}", 1},
        {"https://h/v1?key=AIzaSy123&alt=sse", {0}, "https://h/v1?key=[REDACTED]&alt=sse",
             1},
        {"https://h/?api_key=abc", {0}, "https://h/?api_key=[REDACTED]", 1},
        {"https://h/?apikey=abc&x=1", {0}, "https://h/?apikey=[REDACTED]&x=1", 1},
        {"https://h/?a=1&access_token=abc", {0}, "https://h/?a=1&access_token=[REDACTED]",
             1},
        {"https://h/?token=abc#frag", {0}, "https://h/?token=[REDACTED]#frag", 1},
        {"https://h/?KEY=abc x", {0}, "https://h/?KEY=[REDACTED] x", 1},
        {"use sk-proj-ABCDEFGH12 now", {0}, "use [REDACTED] now", 1},
        {"sk-ant-api03-xyzXYZ012_-abc.", {0}, "[REDACTED].", 1},
        {"sk-abcdefgh", {0}, "[REDACTED]", 1},
        /* not secrets */
        {"sk-short", {0}, "sk-short", 0},
        {"task-abcdefghijk", {0}, "task-abcdefghijk", 0},
        {"ask-abcdefghijkl", {0}, "ask-abcdefghijkl", 0},
        {"monkey=banana", {0}, "monkey=banana", 0},
        {"max_token=5 tokens=6", {0}, "max_token=5 tokens=6", 0},
        {"missing key: model", {0}, "missing key: model", 0},
        {"the token: expired", {0}, "the token: expired", 0},
        {"Authorization header missing", {0}, "Authorization header missing", 0},
        {"Authorization:", {0}, "Authorization:", 0},
        {"Bearer", {0}, "Bearer", 0},
        {"", {0}, "", 0},
        /* listed secrets */
        {"the key is hunter2hunter2!", {"hunter2hunter2"}, "the key is [REDACTED]!", 1},
        {"a1b2 and a1b2", {"a1b2"}, "[REDACTED] and [REDACTED]", 2},
        {"abc stays", {"abc"}, "abc stays", 0}, /* shorter than 4: ignored */
        {"xxabcdefghyy", {"abcd", "abcdefgh"}, "xx[REDACTED]yy", 1},
        {"xxabcdefghyy", {"abcdefgh", "abcd"}, "xx[REDACTED]yy", 1},
        {"p=1 REDACTED x", {"REDACTED"}, "p=1 [REDACTED] x", 1},
    };
    /* clang-format on */
    for (size_t i = 0; i < ARRAY_LEN(rows); i++) {
        char buf[256];
        snprintf(buf, sizeof buf, "%s", rows[i].in);
        const char *const *secrets = rows[i].secrets[0] ? rows[i].secrets : NULL;
        size_t count = ah_redact(buf, sizeof buf, secrets);
        if (strcmp(buf, rows[i].want) != 0 || count != rows[i].want_count)
            fail_msg("redact '%s': got '%s' (%zu), want '%s' (%zu)", rows[i].in, buf,
                     count, rows[i].want, rows[i].want_count);
        /* idempotent: a second pass finds nothing new */
        char again[256];
        memcpy(again, buf, sizeof again);
        size_t count2 = ah_redact(again, sizeof again, secrets);
        if (count2 != 0 || strcmp(again, buf) != 0)
            fail_msg("redact '%s' is not idempotent: '%s'", rows[i].in, again);
    }
}

static void redact_small_buffers(void **state)
{
    (void)state;
    char exact[] = "Bearer abc"; /* no room to grow: same-length mask */
    assert_int_equal(ah_redact(exact, sizeof exact, NULL), 1);
    assert_string_equal(exact, "Bearer ***");
    char room[32] = "Bearer abc";
    assert_int_equal(ah_redact(room, sizeof room, NULL), 1);
    assert_string_equal(room, "Bearer [REDACTED]");
    char unterminated[5] = {'x', 'x', 'x', 'x', 'x'};
    ah_redact(unterminated, sizeof unterminated, NULL);
    assert_string_equal(unterminated, "xxxx");
    assert_int_equal(ah_redact(NULL, 10, NULL), 0);
    char one[1] = {'\0'};
    assert_int_equal(ah_redact(one, 0, NULL), 0);
    assert_int_equal(ah_redact(one, 1, NULL), 0);
}

/* A key planted in a URL, a header line and a JSON body must not survive anywhere. */
static void planted_key_never_shown(void **state)
{
    (void)state;
    /* not key-shaped: only the secrets list can catch it */
    const char *key = "zq9X7PLANTEDKEY77aaBBcc";
    const char *secrets[] = {key, NULL};
    char body[1024];
    int n =
        snprintf(body, sizeof body,
                 "{\"error\":{\"type\":\"%s\",\"message\":\"invalid key %s for "
                 "https://api.example.com/v1/models?key=%s&x=1 (header x-api-key: %s; "
                 "Authorization: Bearer %s)\"}}",
                 key, key, key, key, key);
    ah_error e;
    ah_error_from_http(&e, 401, NULL, 0, body, (size_t)n, NOW_1994, secrets);
    assert_no_piece_of(e.message, key, "from_http message");
    assert_no_piece_of(e.provider_type, key, "from_http type");
    assert_non_null(strstr(e.message, "invalid key [REDACTED]"));
    assert_non_null(strstr(e.message, "?key=[REDACTED]&x=1"));

    /* a key-shaped key caught by the built-in patterns, with no secrets list */
    const char *sk = "sk-ant-api03-PLANTEDplanted0123456789";
    n = snprintf(body, sizeof body,
                 "echo: x-api-key: %s\nurl https://h/?api_key=%s and %s", sk, sk, sk);
    ah_error_from_http(&e, 400, NULL, 0, body, (size_t)n, NOW_1994, NULL);
    assert_no_piece_of(e.message, sk + 3, "built-in patterns");

    /* ah_error_set with a URL and a header */
    ah_error_set(&e, AH_EK_CONNECT, 0,
                 "GET https://h/v1?key=%s failed; Authorization: %s", key, key);
    assert_no_piece_of(e.message, key, "ah_error_set");

    /* a key straddling the truncation point */
    char pad[600];
    memset(pad, 'x', 490);
    pad[490] = ' ';
    pad[491] = '\0';
    n = snprintf(body, sizeof body, "%s%s tail", pad, key);
    ah_error_from_http(&e, 400, NULL, 0, body, (size_t)n, NOW_1994, secrets);
    assert_no_piece_of(e.message, key, "straddling key");
}

static void error_redact_second_pass(void **state)
{
    (void)state;
    const char *key = "Zq9X7PLANTEDKEY77aa";
    const char *secrets[] = {key, NULL};
    ah_error e;
    ah_error_set(&e, AH_EK_HTTP, 401, "upstream said: bad key %s here", key);
    assert_non_null(strstr(e.message, key)); /* not key-shaped: survives built-ins */
    ah_error_redact(&e, secrets);
    assert_no_piece_of(e.message, key, "second pass");
    assert_string_equal(e.message, "upstream said: bad key [REDACTED] here");

    /* a message already cut in the middle of the key: the visible prefix is masked */
    ah_error_clear(&e);
    snprintf(e.message, sizeof e.message, "prefix Zq9X7PLAN...");
    ah_error_redact(&e, secrets);
    assert_string_equal(e.message, "prefix [REDACTED]...");
    ah_error_redact(NULL, secrets); /* no crash */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(kind_names_round_trip),
        cmocka_unit_test(hint_source_names),
        cmocka_unit_test(clear_resets_every_field),
        cmocka_unit_test(retryable_statuses),
        cmocka_unit_test(retryable_kinds),
        cmocka_unit_test(retry_after_values),
        cmocka_unit_test(header_hints),
        cmocka_unit_test(header_hints_edge_cases),
        cmocka_unit_test(http_bodies),
        cmocka_unit_test(redirects_name_their_location),
        cmocka_unit_test(http_body_null_and_unterminated),
        cmocka_unit_test(http_headers_applied),
        cmocka_unit_test(body_text_hints),
        cmocka_unit_test(long_body_is_truncated_safely),
        cmocka_unit_test(set_formats_and_resets),
        cmocka_unit_test(provider_type_setter),
        cmocka_unit_test(redact_patterns),
        cmocka_unit_test(redact_small_buffers),
        cmocka_unit_test(planted_key_never_shown),
        cmocka_unit_test(error_redact_second_pass),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
