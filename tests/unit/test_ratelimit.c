/* test_ratelimit.c - local GCRA pacing on a manual clock: the request schedule (burst,
 * slots reserved in order, idle time not banked beyond the burst), token charges that
 * make the next request wait and name the limit, and config errors naming the field. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <string.h>

#include "agenthost.h"
#include "agenthost/manual_clock.h"
#include "agenthost/redis.h"
#include "internal.h"
#include "redis_internal.h"

typedef struct fx {
    ah_manual_clock *clock;
    ah_loop *loop;
} fx;

static int setup(void **state)
{
    static fx f;
    f.clock = ah_manual_clock_new(1000, 1700000000000);
    f.loop = ah_loop_new(ah_manual_clock_get(f.clock), NULL);
    *state = &f;
    return 0;
}

static int teardown(void **state)
{
    fx *f = *state;
    ah_loop_free(f->loop);
    ah_manual_clock_free(f->clock);
    return 0;
}

static int64_t acquire(fx *f, ah_rate_limit *rl, const char **limit)
{
    int64_t w = -1;
    ah_redis_req *q = NULL;
    assert_int_equal(ah_rate_limit_acquire(rl, f->loop, &w, limit, NULL, NULL, &q), 0);
    assert_null(q);
    return w;
}

static void request_schedule(void **state)
{
    fx *f = *state;
    char err[128];
    ah_rate_limit_config c = {.requests_per_minute = 60, .burst = 2};
    ah_rate_limit *rl = NULL;
    ah_rate_limit_new(&c, NULL, &rl, err, sizeof err);
    assert_non_null(rl);
    assert_false(ah_rate_limit_is_shared(rl));
    const char *lim;
    /* one slot per second, two back to back */
    assert_int_equal(acquire(f, rl, &lim), 0);
    assert_int_equal(acquire(f, rl, &lim), 0);
    assert_int_equal(acquire(f, rl, &lim), 1000);
    assert_string_equal(lim, "requests_per_minute");
    assert_int_equal(acquire(f, rl, &lim), 2000); /* reserved behind the previous one */
    ah_manual_clock_advance(f->clock, 500);
    assert_int_equal(acquire(f, rl, &lim), 2500);
    /* a long idle time banks no more than the burst */
    ah_manual_clock_advance(f->clock, 60000);
    assert_int_equal(acquire(f, rl, &lim), 0);
    assert_int_equal(acquire(f, rl, &lim), 0);
    assert_int_equal(acquire(f, rl, &lim), 1000);
    ah_rate_limit_free(rl);
}

static void token_charges(void **state)
{
    fx *f = *state;
    char err[128];
    /* 6000 tokens a minute: 10 ms per token, one minute of tolerance */
    ah_rate_limit_config c = {.tokens_per_minute = 6000};
    ah_rate_limit *rl = NULL;
    ah_rate_limit_new(&c, NULL, &rl, err, sizeof err);
    const char *lim;
    assert_int_equal(acquire(f, rl, &lim), 0);
    ah_rate_limit_charge(rl, f->loop, 5000); /* within the minute: no wait */
    assert_int_equal(acquire(f, rl, &lim), 0);
    ah_rate_limit_charge(rl, f->loop, 1100); /* 100 tokens past the minute: 1 s */
    assert_int_equal(acquire(f, rl, &lim), 1000);
    assert_string_equal(lim, "tokens_per_minute");
    ah_manual_clock_advance(f->clock, 1000);
    assert_int_equal(acquire(f, rl, &lim), 0);
    ah_rate_limit_charge(rl, f->loop, 0);  /* no-ops */
    ah_rate_limit_charge(rl, f->loop, -5);
    assert_int_equal(acquire(f, rl, &lim), 0);
    ah_rate_limit_free(rl);

    /* both limits: the larger wait names its limit */
    ah_rate_limit_config b = {.requests_per_minute = 600, .tokens_per_minute = 6000};
    ah_rate_limit_new(&b, NULL, &rl, err, sizeof err);
    assert_int_equal(acquire(f, rl, &lim), 0);
    assert_int_equal(acquire(f, rl, &lim), 100);
    assert_string_equal(lim, "requests_per_minute");
    ah_rate_limit_charge(rl, f->loop, 6500);
    assert_int_equal(acquire(f, rl, &lim), 5000);
    assert_string_equal(lim, "tokens_per_minute");
    ah_rate_limit_free(rl);
}

static void config_errors_name_the_field(void **state)
{
    fx *f = *state;
    struct {
        ah_rate_limit_config c;
        const char *needle;
    } bad[] = {
        {{0}, "requests_per_minute or tokens_per_minute is required"},
        {{.requests_per_minute = -1}, "requests_per_minute must be >= 0"},
        {{.requests_per_minute = 10, .tokens_per_minute = -2}, "tokens_per_minute"},
        {{.requests_per_minute = 10, .burst = -1}, "burst"},
        {{.requests_per_minute = 1e9}, "too large"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char err[160] = "";
        assert_int_not_equal(
            ah_rate_limit_new(&bad[i].c, NULL, &(ah_rate_limit *){NULL}, err, sizeof err),
            AH_OK);
        if (!strstr(err, bad[i].needle))
            fail_msg("case %zu: '%s' lacks '%s'", i, err, bad[i].needle);
    }
    /* shared without a key */
    char err[160];
    ah_redis *r = NULL;
    ah_redis_new(f->loop, "unix:/nonexistent/r.sock", NULL, &r, err, sizeof err);
    assert_non_null(r);
    ah_rate_limit_config c = {.requests_per_minute = 10};
    assert_int_not_equal(
        ah_rate_limit_new(&c, r, &(ah_rate_limit *){NULL}, err, sizeof err), AH_OK);
    assert_non_null(strstr(err, "key is required"));
    assert_int_not_equal(ah_retry_budget_new_redis(
                             r, "", 10, 0.1, &(ah_retry_budget *){NULL}, err, sizeof err),
                         AH_OK);
    assert_non_null(strstr(err, "key"));
    assert_int_not_equal(ah_retry_budget_new_redis(
                             r, "k", 0, 0.1, &(ah_retry_budget *){NULL}, err, sizeof err),
                         AH_OK);
    assert_non_null(strstr(err, "max_tokens"));
    ah_redis_free(r);
    assert_int_not_equal(ah_redis_new(f->loop, "redis://:pw@host:99999", NULL,
                                      &(ah_redis *){NULL}, err, sizeof err),
                         AH_OK);
    assert_non_null(strstr(err, "port"));
    assert_null(strstr(err, "pw"));
}

static void provider_headers_hold_the_schedule(void **state)
{
    fx *f = *state;
    /* what the providers send: OpenAI durations, Anthropic RFC 3339 instants */
    const int64_t now = 1700000000000; /* 2023-11-14T22:13:20Z */
    ah_header oa[] = {{"x-ratelimit-remaining-requests", "0"},
                      {"x-ratelimit-reset-requests", "1.5s"},
                      {"x-ratelimit-remaining-tokens", "1200"},
                      {"x-ratelimit-reset-tokens", "6m0s"}};
    int64_t rq, tk;
    ah__ratelimit_exhausted(oa, 4, now, &rq, &tk);
    assert_int_equal(rq, 1500);
    assert_int_equal(tk, -1); /* tokens left: no hold */
    ah_header an[] = {{"anthropic-ratelimit-requests-remaining", "10"},
                      {"anthropic-ratelimit-requests-reset", "2023-11-14T22:13:25Z"},
                      {"anthropic-ratelimit-output-tokens-remaining", "0"},
                      {"anthropic-ratelimit-output-tokens-reset", "2023-11-14T22:13:22Z"}};
    ah__ratelimit_exhausted(an, 4, now, &rq, &tk);
    assert_int_equal(rq, -1);
    assert_int_equal(tk, 2000);
    ah__ratelimit_exhausted(NULL, 0, now, &rq, &tk);
    assert_int_equal(rq + tk, -2);

    char err[128];
    ah_rate_limit_config c = {.requests_per_minute = 6000, .tokens_per_minute = 60000};
    ah_rate_limit *rl = NULL;
    ah_rate_limit_new(&c, NULL, &rl, err, sizeof err);
    const char *lim;
    assert_int_equal(acquire(f, rl, &lim), 0);
    ah_rate_limit_hold(rl, f->loop, 300, -1);
    assert_int_equal(acquire(f, rl, &lim), 300);
    assert_string_equal(lim, "requests_per_minute");
    ah_manual_clock_advance(f->clock, 1000);
    ah_rate_limit_hold(rl, f->loop, -1, 700);
    assert_int_equal(acquire(f, rl, &lim), 700);
    assert_string_equal(lim, "tokens_per_minute");
    ah_rate_limit_free(rl);
}

/* A reset far ahead (OpenAI's "1000000h") holds the schedule no longer than the call's
 * max_retry_after_ms, like a Retry-After would: without the cap one response froze every
 * later request (and, on Redis, the whole fleet) for 114 years. */
static void header_holds_are_capped(void **state)
{
    fx *f = *state;
    char err[128];
    ah_rate_limit_config c = {.requests_per_minute = 6000, .tokens_per_minute = 60000};
    ah_rate_limit *rl = NULL;
    ah_rate_limit_new(&c, NULL, &rl, err, sizeof err);
    const char *lim;
    ah_header far[] = {{"x-ratelimit-remaining-requests", "0"},
                       {"x-ratelimit-reset-requests", "1000000h"},
                       {"x-ratelimit-remaining-tokens", "0"},
                       {"x-ratelimit-reset-tokens", "99999999s"}};
    ah__rate_limit_observe(rl, f->loop, far, 4, 60000);
    assert_int_equal(acquire(f, rl, &lim), 60000);
    /* a hold within the cap is kept as it is */
    ah_manual_clock_advance(f->clock, 120000);
    ah_header near[] = {{"x-ratelimit-remaining-requests", "0"},
                        {"x-ratelimit-reset-requests", "2s"}};
    ah__rate_limit_observe(rl, f->loop, near, 2, 60000);
    assert_int_equal(acquire(f, rl, &lim), 2000);
    /* max_retry_after_ms 0: nothing a header says holds the schedule */
    ah_manual_clock_advance(f->clock, 120000);
    ah__rate_limit_observe(rl, f->loop, far, 4, 0);
    assert_int_equal(acquire(f, rl, &lim), 0);
    ah_rate_limit_free(rl);
}

/* An Anthropic reset is an instant: read on a clock a day behind (or ahead) it would hold
 * for a day (or not at all). With the response's Date more than 2 s away from the local
 * clock, the reset is measured from the server's Date. */
static void reset_instants_follow_the_servers_clock(void **state)
{
    (void)state;
    const int64_t server = 1700000000000; /* 2023-11-14T22:13:20Z */
    ah_header h[] = {{"date", "Tue, 14 Nov 2023 22:13:20 GMT"},
                     {"anthropic-ratelimit-requests-remaining", "0"},
                     {"anthropic-ratelimit-requests-reset", "2023-11-14T22:14:20Z"}};
    int64_t rq, tk;
    const int64_t day = 86400000;
    ah__ratelimit_exhausted(h, 3, server - day, &rq, &tk); /* local clock a day behind */
    assert_int_equal(rq, 60000);
    ah__ratelimit_exhausted(h, 3, server + day, &rq, &tk); /* a day ahead */
    assert_int_equal(rq, 60000);
    /* within the slack the local clock (ms, not whole seconds) is the better one */
    ah__ratelimit_exhausted(h, 3, server + 1500, &rq, &tk);
    assert_int_equal(rq, 58500);
    /* no Date, or a malformed one: the local clock */
    ah__ratelimit_exhausted(h + 1, 2, server + 1500, &rq, &tk);
    assert_int_equal(rq, 58500);
    ah_header bad[] = {{"Date", "yesterday"}, h[1], h[2]};
    ah__ratelimit_exhausted(bad, 3, server - 30000, &rq, &tk);
    assert_int_equal(rq, 90000);

    /* the same for the hints of a 429: an HTTP-date Retry-After and a reset instant */
    ah_error e;
    ah_error_clear(&e);
    e.status = 429;
    ah_header ra[] = {{"Date", "Tue, 14 Nov 2023 22:13:20 GMT"},
                      {"Retry-After", "Tue, 14 Nov 2023 22:13:50 GMT"}};
    ah_error_apply_headers(&e, ra, 2, server - day);
    assert_int_equal(e.retry_after_ms, 30000);
    ah_error_clear(&e);
    e.status = 429;
    ah_error_apply_headers(&e, h, 3, server + day);
    assert_int_equal(e.retry_after_ms, 60000);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(request_schedule, setup, teardown),
        cmocka_unit_test_setup_teardown(token_charges, setup, teardown),
        cmocka_unit_test_setup_teardown(config_errors_name_the_field, setup, teardown),
        cmocka_unit_test_setup_teardown(provider_headers_hold_the_schedule, setup, teardown),
        cmocka_unit_test_setup_teardown(header_holds_are_capped, setup, teardown),
        cmocka_unit_test(reset_instants_follow_the_servers_clock),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
