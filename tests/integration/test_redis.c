/* test_redis.c - the Redis store against a real redis-server started by the test: the
 * hiredis adapter on the loop (TCP with a password, unix socket), the shared retry
 * budget (one bucket across connections; NOSCRIPT reload; fallback logged once when the
 * server dies, shared again after it returns; a stalled server times out into the
 * fallback), GCRA pacing shared by two limiters, a password that never reaches a log
 * line, and the ledger backend (claims, BUSY, mismatches, a lease taken over with the
 * fencing token guarding the new holder's claim, cancel, fail closed). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "agenthost.h"
#include "agenthost/redis.h"
#include "redis_internal.h"
#include "support/redis_fixture.h"

/* ---- log capture ------------------------------------------------------------------- */

static char logbuf[64 * 1024];
static size_t loglen;

static void capture(void *ud, ah_log_level level, int event, const char *line)
{
    size_t n = strlen(line);
    if (loglen + n + 2 < sizeof logbuf) {
        memcpy(logbuf + loglen, line, n);
        loglen += n;
        logbuf[loglen++] = '\n';
        logbuf[loglen] = '\0';
    }
}

static int count_in_log(const char *needle)
{
    int n = 0;
    for (const char *p = logbuf; (p = strstr(p, needle)) != NULL; p += strlen(needle))
        n++;
    return n;
}

static void log_reset(void)
{
    loglen = 0;
    logbuf[0] = '\0';
}

/* ---- helpers ----------------------------------------------------------------------- */

typedef struct verdict {
    int done, allowed;
    int64_t wait_ms;
    const char *limit;
} verdict;

static void on_verdict(void *ud, int allowed)
{
    verdict *v = ud;
    v->done = 1;
    v->allowed = allowed;
}

static void on_paced(void *ud, int64_t wait_ms, const char *limit)
{
    verdict *v = ud;
    v->done = 1;
    v->wait_ms = wait_ms;
    v->limit = limit;
}

static void run_until(ah_loop *loop, const int *flag)
{
    for (int i = 0; i < 2000 && !*flag; i++)
        assert_int_equal(ah_loop_run_once(loop, 10), AH_OK);
    assert_true(*flag);
}

static void wait_ready(ah_loop *loop, ah_redis *r)
{
    for (int i = 0; i < 500 && !ah_redis_ready(r); i++)
        ah_loop_run_once(loop, 10);
    assert_true(ah_redis_ready(r));
}

/* Spend once; the verdict whichever way it comes. *async tells which. */
static int spend(ah_loop *loop, ah_retry_budget *b, int *async)
{
    verdict v = {0};
    ah_redis_req *q = NULL;
    int r = ah_retry_budget_spend_async(b, on_verdict, &v, &q);
    *async = r < 0;
    if (r >= 0) {
        assert_int_equal(v.done, 0); /* never called back when decided at once */
        return r;
    }
    assert_non_null(q);
    assert_int_equal(v.done, 0); /* never before returning */
    run_until(loop, &v.done);
    return v.allowed;
}

static void raw(ah_loop *loop, ah_redis *r, int argc, const char **argv)
{
    size_t lens[8];
    for (int i = 0; i < argc; i++)
        lens[i] = strlen(argv[i]);
    ah_redis_req *q = ah__redis_command(r, NULL, argc, argv, lens, NULL, NULL,
                                        (ah__redis_user){0});
    assert_non_null(q);
    /* fire and forget: step until the command's timer is gone */
    for (int i = 0; i < 50; i++)
        ah_loop_run_once(loop, 5);
}

static int setup(void **state)
{
    ah_log_set_handler(capture, NULL, AH_LOG_DEBUG);
    log_reset();
    return 0;
}

static int teardown(void **state)
{
    ah_log_set_handler(NULL, NULL, AH_LOG_ERROR);
    return 0;
}

/* ---- tests ------------------------------------------------------------------------- */

static void shared_budget_is_one_bucket(void **state)
{
    redis_fixture f;
    assert_int_equal(redis_fixture_start(&f, 1, "pw-hunter2"), 0);
    ah_loop *loop = ah_loop_new(NULL, NULL);
    char err[256];
    ah_redis *r1 = NULL;
    ah_redis_new(loop, f.url, NULL, &r1, err, sizeof err);
    ah_redis *r2 = NULL;
    ah_redis_new(loop, f.url, NULL, &r2, err, sizeof err);
    assert_non_null(r1);
    assert_non_null(r2);
    assert_non_null(strstr(ah_redis_name(r1), ":***@127.0.0.1:"));
    wait_ready(loop, r1);
    wait_ready(loop, r2);
    /* max 10: a retry is allowed while more than 5 tokens remain after taking one, so
     * with no success 4 are allowed, whichever process asks. */
    ah_retry_budget *a = NULL;
    ah_retry_budget_new_redis(r1, "t:budget", 10, 0.5, &a, err, sizeof err);
    ah_retry_budget *b = NULL;
    ah_retry_budget_new_redis(r2, "t:budget", 10, 0.5, &b, err, sizeof err);
    assert_non_null(a);
    assert_true(ah_retry_budget_is_shared(a));
    int allowed = 0, async;
    for (int i = 0; i < 10; i++) {
        allowed += spend(loop, i % 2 ? a : b, &async);
        assert_true(async);
    }
    assert_int_equal(allowed, 4);
    /* two refunds of 0.5 make one token: one more retry, from either side */
    ah_retry_budget_on_success(a);
    ah_retry_budget_on_success(b);
    for (int i = 0; i < 50; i++)
        ah_loop_run_once(loop, 2);
    assert_int_equal(spend(loop, a, &async), 0); /* 0 + 1000 milli: 0 left after -> no */
    /* The local buckets were never touched. */
    assert_true(ah_retry_budget_tokens(a) == 10.0);

    /* The script is reloaded when the server forgets it. */
    const char *flush[] = {"SCRIPT", "FLUSH"};
    raw(loop, r1, 2, flush);
    uint64_t before = ah_redis_commands(r1);
    spend(loop, a, &async);
    assert_true(async);
    assert_int_equal(ah_redis_commands(r1) - before, 2); /* EVALSHA, then EVAL */
    assert_true(ah_retry_budget_using_redis(a));

    ah_retry_budget_free(a);
    ah_retry_budget_free(b);
    ah_redis_free(r1);
    ah_redis_free(r2);
    ah_loop_free(loop);
    redis_fixture_stop(&f);
    assert_null(strstr(logbuf, "pw-hunter2"));
}

static void budget_falls_back_once_and_comes_back(void **state)
{
    redis_fixture f;
    assert_int_equal(redis_fixture_start(&f, 0, NULL), 0);
    ah_loop *loop = ah_loop_new(NULL, NULL);
    char err[256];
    ah_redis_options o;
    ah_redis_options_init(&o);
    o.reconnect_min_ms = 20;
    o.reconnect_max_ms = 40;
    ah_redis *r = NULL;
    ah_redis_new(loop, f.url, &o, &r, err, sizeof err);
    assert_non_null(r);
    wait_ready(loop, r);
    ah_retry_budget *b = NULL;
    ah_retry_budget_new_redis(r, "t:fb", 100, 0.1, &b, err, sizeof err);
    int async;
    assert_int_equal(spend(loop, b, &async), 1);
    assert_true(async);

    redis_fixture_kill(&f, SIGKILL);
    log_reset();
    /* Every decision now comes from the local bucket; the fallback is said once. */
    int local = 0;
    for (int i = 0; i < 6; i++) {
        spend(loop, b, &async);
        local += !async;
    }
    assert_true(local >= 5); /* the first may still find the dying connection */
    assert_int_equal(count_in_log("falls back to a local one"), 1);
    assert_true(ah_retry_budget_tokens(b) < 100.0);
    assert_false(ah_retry_budget_using_redis(b));

    /* The server returns: after the reconnect back-off, decisions are shared again. */
    assert_int_equal(redis_fixture_spawn(&f), 0);
    int back = 0;
    for (int i = 0; i < 200 && !back; i++) {
        spend(loop, b, &async);
        back = async;
        ah_loop_run_once(loop, 10);
    }
    assert_true(back);
    for (int i = 0; i < 20 && !ah_retry_budget_using_redis(b); i++)
        spend(loop, b, &async);
    assert_true(ah_retry_budget_using_redis(b));
    assert_int_equal(count_in_log("is back"), 1);
    assert_int_equal(count_in_log("falls back to a local one"), 1);

    /* A stalled server: the command times out and the local bucket decides. */
    ah_retry_budget_free(b);
    ah_redis_free(r);
    o.command_timeout_ms = 150;
    ah_redis_new(loop, f.url, &o, &r, err, sizeof err);
    wait_ready(loop, r);
    ah_retry_budget_new_redis(r, "t:fb", 100, 0.1, &b, err, sizeof err);
    redis_fixture_kill(&f, SIGSTOP);
    log_reset();
    double before = ah_retry_budget_tokens(b);
    assert_int_equal(spend(loop, b, &async), 1);
    assert_true(async);
    assert_true(ah_retry_budget_tokens(b) < before); /* decided locally */
    assert_int_equal(count_in_log("falls back to a local one"), 1);
    assert_false(ah_redis_ready(r));
    redis_fixture_kill(&f, SIGCONT);

    ah_retry_budget_free(b);
    ah_redis_free(r);
    ah_loop_free(loop);
    redis_fixture_stop(&f);
}

static void unreachable_from_the_start(void **state)
{
    ah_loop *loop = ah_loop_new(NULL, NULL);
    char err[256];
    ah_redis *r = NULL;
    ah_redis_new(loop, "unix:/nonexistent/ah-redis.sock", NULL, &r, err, sizeof err);
    assert_non_null(r); /* not an error: the budget falls back */
    ah_retry_budget *b = NULL;
    ah_retry_budget_new_redis(r, "k", 4, 0.1, &b, err, sizeof err);
    int async, allowed = 0;
    for (int i = 0; i < 5; i++) {
        allowed += spend(loop, b, &async);
        assert_false(async);
    }
    assert_int_equal(allowed, 1); /* 4 tokens: one retry leaves 3 > 2 */
    assert_int_equal(count_in_log("falls back to a local one"), 1);

    ah_rate_limit_config rc = {.requests_per_minute = 600, .key = "k"};
    ah_rate_limit *rl = NULL;
    ah_rate_limit_new(&rc, r, &rl, err, sizeof err);
    assert_non_null(rl);
    int64_t w;
    const char *lim;
    ah_redis_req *q;
    verdict v = {0};
    int64_t t0 = ah_loop_now_ms(loop);
    assert_int_equal(ah_rate_limit_acquire(rl, loop, &w, &lim, on_paced, &v, &q), 0);
    assert_int_equal(w, 0);
    assert_int_equal(ah_rate_limit_acquire(rl, loop, &w, &lim, on_paced, &v, &q), 0);
    /* the local schedule: one slot per 100 ms, less the time between the two asks */
    assert_true(w <= 100 && w >= 100 - (ah_loop_now_ms(loop) - t0) - 1);
    assert_string_equal(lim, "requests_per_minute");
    assert_int_equal(count_in_log("pacing falls back"), 1);
    assert_int_equal(v.done, 0);
    ah_rate_limit_free(rl);
    ah_retry_budget_free(b);
    ah_redis_free(r);
    ah_loop_free(loop);
}

static void bad_password_is_named_not_shown(void **state)
{
    redis_fixture f;
    assert_int_equal(redis_fixture_start(&f, 1, "right-pass"), 0);
    char url[256];
    snprintf(url, sizeof url, "redis://:wrong-pass-xyz@127.0.0.1:%d/0", f.port);
    ah_loop *loop = ah_loop_new(NULL, NULL);
    char err[256];
    ah_redis *r = NULL;
    ah_redis_new(loop, url, NULL, &r, err, sizeof err);
    ah_retry_budget *b = NULL;
    ah_retry_budget_new_redis(r, "k", 10, 0.1, &b, err, sizeof err);
    int async;
    for (int i = 0; i < 100 && !ah_redis_ready(r); i++)
        ah_loop_run_once(loop, 10);
    spend(loop, b, &async); /* refused by the server (NOAUTH/WRONGPASS): decided locally */
    for (int i = 0; i < 20; i++)
        ah_loop_run_once(loop, 5);
    assert_null(strstr(logbuf, "wrong-pass-xyz"));
    assert_true(count_in_log("WRONGPASS") + count_in_log("invalid password") +
                    count_in_log("NOAUTH") >= 1);
    assert_true(ah_retry_budget_tokens(b) < 10.0);
    ah_retry_budget_free(b);
    ah_redis_free(r);
    ah_loop_free(loop);
    redis_fixture_stop(&f);
}

static void shared_pacing_spaces_requests(void **state)
{
    redis_fixture f;
    assert_int_equal(redis_fixture_start(&f, 0, NULL), 0);
    ah_loop *loop = ah_loop_new(NULL, NULL);
    char err[256];
    ah_redis *r1 = NULL;
    ah_redis_new(loop, f.url, NULL, &r1, err, sizeof err);
    ah_redis *r2 = NULL;
    ah_redis_new(loop, f.url, NULL, &r2, err, sizeof err);
    wait_ready(loop, r1);
    wait_ready(loop, r2);
    /* 600/min = one slot per 100 ms, burst 2: two go at once, then 100 ms apart */
    ah_rate_limit_config rc = {.requests_per_minute = 600, .burst = 2, .key = "t:rl"};
    ah_rate_limit *a = NULL;
    ah_rate_limit_new(&rc, r1, &a, err, sizeof err);
    ah_rate_limit *b = NULL;
    ah_rate_limit_new(&rc, r2, &b, err, sizeof err);
    assert_non_null(a);
    assert_true(ah_rate_limit_is_shared(a));
    int64_t waits[6], asked[6];
    int64_t t0 = ah_loop_now_ms(loop);
    for (int i = 0; i < 6; i++) {
        verdict v = {0};
        int64_t w;
        const char *lim;
        ah_redis_req *q;
        assert_int_equal(
            ah_rate_limit_acquire(i % 2 ? a : b, loop, &w, &lim, on_paced, &v, &q), 1);
        run_until(loop, &v.done);
        waits[i] = v.wait_ms;
        asked[i] = ah_loop_now_ms(loop) - t0; /* ask i was answered by now */
        assert_string_equal(v.limit, "requests_per_minute");
    }
    assert_int_equal(waits[0], 0);
    assert_true(waits[1] <= 1);
    /* slot k (k >= 2) is (k - 1) * 100 ms after the first, less the time the asking took
     * (measured: the asks are slow under valgrind on a busy machine) */
    for (int i = 2; i < 6; i++) {
        assert_true(waits[i] <= (i - 1) * 100);
        assert_true(waits[i] >= (i - 1) * 100 - asked[i] - 1);
    }
    /* tokens: 6000/min, charged 6000 -> a minute ahead at once: the next waits */
    ah_rate_limit_config tc = {.tokens_per_minute = 6000, .key = "t:tok"};
    ah_rate_limit *t = NULL;
    ah_rate_limit_new(&tc, r1, &t, err, sizeof err);
    ah_rate_limit_charge(t, loop, 6000 + 600);
    verdict v = {0};
    int64_t w;
    const char *lim;
    ah_redis_req *q;
    assert_int_equal(ah_rate_limit_acquire(t, loop, &w, &lim, on_paced, &v, &q), 1);
    run_until(loop, &v.done);
    assert_string_equal(v.limit, "tokens_per_minute");
    assert_true(v.wait_ms > 500 && v.wait_ms <= 6000);
    ah_rate_limit_free(t);
    ah_rate_limit_free(a);
    ah_rate_limit_free(b);
    ah_redis_free(r1);
    ah_redis_free(r2);
    ah_loop_free(loop);
    redis_fixture_stop(&f);
}

static void cancelled_request_never_calls_back(void **state)
{
    redis_fixture f;
    assert_int_equal(redis_fixture_start(&f, 0, NULL), 0);
    ah_loop *loop = ah_loop_new(NULL, NULL);
    char err[256];
    ah_redis *r = NULL;
    ah_redis_new(loop, f.url, NULL, &r, err, sizeof err);
    wait_ready(loop, r);
    ah_retry_budget *b = NULL;
    ah_retry_budget_new_redis(r, "t:c", 10, 0.1, &b, err, sizeof err);
    verdict v = {0};
    ah_redis_req *q;
    assert_int_equal(ah_retry_budget_spend_async(b, on_verdict, &v, &q), -1);
    ah_redis_req_cancel(q);
    for (int i = 0; i < 30; i++)
        ah_loop_run_once(loop, 5);
    assert_int_equal(v.done, 0);
    /* and a budget freed with a request in flight: the connection drops it */
    assert_int_equal(ah_retry_budget_spend_async(b, on_verdict, &v, &q), -1);
    ah_redis_req_cancel(q);
    ah_retry_budget_free(b);
    ah_redis_free(r);
    ah_loop_free(loop);
    redis_fixture_stop(&f);
}

/* ---- the ledger backend -------------------------------------------------------------- */

typedef struct lanswer {
    int done;
    ah_ledger_result r;
    char receipt[64];
} lanswer;

static void on_lanswer(void *ud, const ah_ledger_result *r)
{
    lanswer *a = ud;
    a->done = 1;
    a->r = *r;
    snprintf(a->receipt, sizeof a->receipt, "%s", r->entry.receipt ? r->entry.receipt : "");
}

static ah_ledger_answer lclaim(ah_loop *loop, ah_ledger *l, const char *key, const char *args,
                               lanswer *a)
{
    memset(a, 0, sizeof *a);
    ah_ledger_result r;
    ah_ledger_answer x = ah_ledger_claim(l, key, args, &r, on_lanswer, a);
    if (x != AH_LEDGER_PENDING)
        return x;
    assert_int_equal(a->done, 0);
    run_until(loop, &a->done);
    return a->r.answer;
}

static ah_ledger_answer lcomplete(ah_loop *loop, ah_ledger *l, const char *key,
                                  const char *args, const char *receipt, lanswer *a)
{
    memset(a, 0, sizeof *a);
    ah_ledger_result r;
    ah_ledger_answer x = ah_ledger_complete(l, key, args, receipt, &r, on_lanswer, a);
    if (x != AH_LEDGER_PENDING)
        return x;
    run_until(loop, &a->done);
    return a->r.answer;
}

static void on_refreshed(void *ud, ah_status st)
{
    *(int *)ud = st == AH_OK ? 1 : -1;
}

static void ledger_claims_leases_and_fencing(void **state)
{
    redis_fixture f;
    assert_int_equal(redis_fixture_start(&f, 0, NULL), 0);
    ah_loop *loop = ah_loop_new(NULL, NULL);
    char err[256];
    ah_ledger_redis_config c;
    ah_ledger_redis_config_init(&c);
    c.url = f.url;
    c.prefix = "lt:";
    c.lease_ms = 60000; /* no lease runs out by itself, however slow the machine */
    ah_ledger *a = NULL;
    ah_ledger_new_redis(loop, &c, &a, err, sizeof err);
    ah_ledger *b = NULL;
    ah_ledger_new_redis(loop, &c, &b, err, sizeof err);
    assert_non_null(a);
    assert_true(ah_ledger_is_redis(a));
    assert_string_equal(ah_ledger_backend(a), "redis");
    lanswer x;
    /* a claims; b (another holder) is told BUSY; a completes; b gets a's receipt */
    assert_int_equal(lclaim(loop, a, "k1", "{\"n\":1}", &x), AH_LEDGER_OWNED);
    assert_int_equal(lclaim(loop, b, "k1", "{\"n\":1}", &x), AH_LEDGER_BUSY);
    assert_true(x.r.retry_ms > 0 && x.r.retry_ms <= 100);
    assert_int_equal(lclaim(loop, b, "k1", "{\"n\":2}", &x), AH_LEDGER_MISMATCH);
    assert_non_null(strstr(ah_ledger_errmsg(b), "in flight with different arguments"));
    assert_int_equal(lcomplete(loop, a, "k1", "{\"n\":1}", "\"r1\"", &x), AH_LEDGER_DONE);
    assert_int_equal(x.r.entry.seq, 1);
    assert_int_equal(x.r.duplicate, 0);
    assert_int_equal(lclaim(loop, b, "k1", "{\"n\":1}", &x), AH_LEDGER_DONE);
    assert_string_equal(x.receipt, "\"r1\"");
    assert_int_equal(x.r.entry.seq, 1);
    assert_int_equal(lclaim(loop, b, "k1", "{\"n\":9}", &x), AH_LEDGER_MISMATCH);

    /* fencing: a's lease runs out, b takes over; a's late record is kept (its effect
     * happened) but does not drop b's claim; b's record is then a duplicate */
    assert_int_equal(ah_ledger_set_lease_ms(a, 150), AH_OK);
    assert_int_equal(lclaim(loop, a, "k2", "{}", &x), AH_LEDGER_OWNED);
    int64_t fence_a = x.r.fence;
    assert_true(fence_a > 0);
    redis_fixture_sleep_ms(200);
    assert_int_equal(lclaim(loop, b, "k2", "{}", &x), AH_LEDGER_OWNED);
    assert_true(x.r.reclaimed);
    assert_true(x.r.fence > fence_a); /* the new holder's token supersedes */
    assert_int_equal(lcomplete(loop, a, "k2", "{}", "\"late\"", &x), AH_LEDGER_DONE);
    assert_int_equal(x.r.duplicate, 0);
    int refreshed = 0;
    ah_redis_req *q;
    assert_int_equal(ah_ledger_redis_refresh(b, on_refreshed, &refreshed, &q), AH_OK);
    run_until(loop, &refreshed);
    assert_int_equal(refreshed, 1);
    assert_int_equal(ah_ledger_claims(b), 1); /* b's claim stands */
    assert_int_equal(ah_ledger_count(b), 2);
    assert_int_equal(lcomplete(loop, b, "k2", "{}", "\"b\"", &x), AH_LEDGER_DONE);
    assert_int_equal(x.r.duplicate, 1);
    assert_string_equal(x.receipt, "\"late\"");
    ah_ledger_entry e;
    assert_int_equal(ah_ledger_lookup(b, "k1", "{\"n\":1}", &e), AH_OK); /* the snapshot */
    assert_int_equal(e.seq, 1);

    /* a cancelled claim never calls back */
    memset(&x, 0, sizeof x);
    ah_ledger_result r;
    assert_int_equal(ah_ledger_claim(a, "k3", "{}", &r, on_lanswer, &x), AH_LEDGER_PENDING);
    ah_ledger_cancel(a, &x);
    for (int i = 0; i < 20; i++)
        ah_loop_run_once(loop, 5);
    assert_int_equal(x.done, 0);

    /* Redis gone: FAILED at once, with a message */
    redis_fixture_kill(&f, SIGKILL);
    for (int i = 0; i < 20; i++)
        ah_loop_run_once(loop, 5);
    assert_int_equal(lclaim(loop, a, "k4", "{}", &x), AH_LEDGER_FAILED); /* the loss */
    assert_int_equal(lclaim(loop, a, "k5", "{}", &x), AH_LEDGER_FAILED);
    assert_non_null(strstr(ah_ledger_errmsg(a), "failing closed"));
    ah_ledger_free(a);
    ah_ledger_free(b);
    ah_loop_free(loop);
    redis_fixture_stop(&f);
}

int main(void)
{
    signal(SIGPIPE, SIG_IGN);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(shared_budget_is_one_bucket, setup, teardown),
        cmocka_unit_test_setup_teardown(budget_falls_back_once_and_comes_back, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(unreachable_from_the_start, setup, teardown),
        cmocka_unit_test_setup_teardown(bad_password_is_named_not_shown, setup, teardown),
        cmocka_unit_test_setup_teardown(shared_pacing_spaces_requests, setup, teardown),
        cmocka_unit_test_setup_teardown(cancelled_request_never_calls_back, setup, teardown),
        cmocka_unit_test_setup_teardown(ledger_claims_leases_and_fencing, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
