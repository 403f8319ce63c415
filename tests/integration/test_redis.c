/* test_redis.c - the Redis store against a real redis-server started by the test: the
 * hiredis adapter on the loop (TCP with a password, unix socket), the shared retry
 * budget (one bucket across connections; NOSCRIPT reload; fallback logged once when the
 * server dies, shared again after it returns; a stalled server times out into the
 * fallback), GCRA pacing shared by two limiters, a password that never reaches a log
 * line, and the ledger backend (claims, BUSY, mismatches, a lease taken over with the
 * fencing token guarding the new holder's claim, cancel, fail closed).
 * A connection the server drops (CLIENT KILL, as Redis's idle `timeout` or a load
 * balancer does), seen by the loop or not: claims, receipts, releases, budget and
 * pacing wait for the reconnect, and a tool body the drop happened under runs once; a
 * receipt outlasts a stalled and a restarted server; a wrong password says
 * "authentication failed (WRONGPASS ...)"; fences grow across data loss; expired
 * entries leave the index as the ledger is used; listings are paged. */
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
    o.command_timeout_ms = 150; /* the spend that finds the server gone waits this long */
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
    /* Every decision now comes from the local bucket (the first after waiting for the
     * reconnect that fails); the fallback is said once. */
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
    for (int i = 0; i < 100 && !count_in_log("authentication failed"); i++)
        ah_loop_run_once(loop, 10);
    assert_false(ah_redis_ready(r)); /* up only once the handshake answered */
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
    ah_redis_options o;
    ah_redis_options_init(&o);
    o.command_timeout_ms = 200; /* a claim waits this long for a server that is gone */
    c.url = f.url;
    c.prefix = "lt:";
    c.lease_ms = 60000; /* no lease runs out by itself, however slow the machine */
    c.redis = &o;
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
    /* the first waits for a reconnect that fails; the next fails at once (an outage) */
    assert_int_equal(lclaim(loop, a, "k4", "{}", &x), AH_LEDGER_FAILED);
    assert_non_null(strstr(ah_ledger_errmsg(a), "no connection within 200 ms"));
    ah_ledger_result r5;
    assert_int_equal(ah_ledger_claim(a, "k5", "{}", &r5, on_lanswer, &x), AH_LEDGER_FAILED);
    assert_non_null(strstr(ah_ledger_errmsg(a), "failing closed"));
    ah_ledger_free(a);
    ah_ledger_free(b);
    ah_loop_free(loop);
    redis_fixture_stop(&f);
}

/* ---- a connection Redis dropped (idle timeout, load balancer, CLIENT KILL) ---------- */

static ah_redis *ledger_conn(ah_ledger *l)
{
    return ah_ledger_redis_connection(l);
}

/* Step the loop until r has seen its connection go (the server's FIN). */
static void wait_down(ah_loop *loop, ah_redis *r)
{
    for (int i = 0; i < 500 && ah_redis_ready(r); i++)
        ah_loop_run_once(loop, 10);
    assert_false(ah_redis_ready(r));
}

typedef struct kill_body {
    const redis_fixture *f;
    int runs;
    int step_loop; /* 1: let the loop see the drop before the body returns */
    ah_loop *loop;
    ah_redis *conn;
} kill_body;

/* A tool body during which Redis drops every connection (what its `timeout` does to a
 * connection idle for longer than the body takes). */
static void body_with_idle_drop(void *ud, ah_tool_call *call)
{
    kill_body *k = ud;
    k->runs++;
    assert_true(redis_fixture_kill_clients(k->f) >= 1);
    if (k->step_loop)
        wait_down(k->loop, k->conn);
    ah_tool_call_body_ok(call, "{\"charged\":1}");
}

static void idle_drop_is_not_a_failure(void **state)
{
    redis_fixture f;
    assert_int_equal(redis_fixture_start(&f, 0, NULL), 0);
    ah_loop *loop = ah_loop_new(NULL, NULL);
    char err[256];
    ah_ledger_redis_config c;
    ah_ledger_redis_config_init(&c);
    c.url = f.url;
    c.prefix = "idle:";
    c.lease_ms = 300;
    ah_ledger *a = NULL, *b = NULL;
    ah_ledger_new_redis(loop, &c, &a, err, sizeof err);
    ah_ledger_new_redis(loop, &c, &b, err, sizeof err);
    assert_non_null(a);
    assert_non_null(b);
    wait_ready(loop, ledger_conn(a));
    wait_ready(loop, ledger_conn(b));
    lanswer x;

    /* The loop saw the drop: the next claim and the receipt wait for the reconnect
     * instead of failing closed. */
    assert_int_equal(lclaim(loop, a, "k1", "{}", &x), AH_LEDGER_OWNED);
    assert_true(redis_fixture_kill_clients(&f) >= 2);
    wait_down(loop, ledger_conn(a));
    assert_int_equal(lcomplete(loop, a, "k1", "{}", "\"r1\"", &x), AH_LEDGER_DONE);
    assert_int_equal(x.r.duplicate, 0);
    assert_true(redis_fixture_kill_clients(&f) >= 1);
    wait_down(loop, ledger_conn(a));
    assert_int_equal(lclaim(loop, a, "k2", "{}", &x), AH_LEDGER_OWNED);

    /* The loop did not run (a body blocking the thread): the command finds a socket the
     * server has closed, and still gets through. */
    assert_true(redis_fixture_kill_clients(&f) >= 1);
    assert_int_equal(lcomplete(loop, a, "k2", "{}", "\"r2\"", &x), AH_LEDGER_DONE);
    assert_true(redis_fixture_kill_clients(&f) >= 1);
    assert_int_equal(lclaim(loop, a, "k3", "{}", &x), AH_LEDGER_OWNED);

    /* A release after a drop reaches the server: the other handle gets the key at once. */
    assert_true(redis_fixture_kill_clients(&f) >= 1);
    wait_down(loop, ledger_conn(a));
    ah_ledger_abandon(a, "k3");
    for (int i = 0; i < 50; i++)
        ah_loop_run_once(loop, 5);
    assert_int_equal(lclaim(loop, b, "k3", "{}", &x), AH_LEDGER_OWNED);
    assert_int_equal(lcomplete(loop, b, "k3", "{}", "\"r3\"", &x), AH_LEDGER_DONE);

    /* The repro: a body that outlasts the idle timeout, two callers of one key:
     * the body runs once, the second caller gets the first one's receipt. */
    for (int step_loop = 0; step_loop < 2; step_loop++) {
        kill_body k = {&f, 0, step_loop, loop, ledger_conn(a)};
        ah_tool_policy tp;
        ah_tool_policy_init(&tp);
        tp.loop = loop;
        const char *key = step_loop ? "order-2" : "order-1";
        for (int caller = 0; caller < 2; caller++) {
            ah_tool_call *t = NULL;
            ah_tool_call_new(&tp, caller ? b : a, NULL, key, "{\"amount\":5}", &t, err,
                             sizeof err);
            assert_non_null(t);
            ah_tool_driver d = {.body = body_with_idle_drop, .body_ud = &k};
            ah_tool_outcome o = ah_tool_call_run(t, &d);
            if (o != AH_TOOL_OK)
                fail_msg("caller %d: %s", caller, ah_tool_call_error(t)->message);
            assert_int_equal(ah_tool_call_duplicate(t), caller);
            assert_string_equal(ah_tool_call_receipt(t), "{\"charged\":1}");
            ah_tool_call_free(t);
        }
        assert_int_equal(k.runs, 1);
    }
    assert_int_equal(count_in_log("could not be recorded"), 0);
    ah_ledger_free(a);
    ah_ledger_free(b);
    ah_loop_free(loop);
    redis_fixture_stop(&f);
}

static void idle_drop_keeps_budget_and_pacing_shared(void **state)
{
    redis_fixture f;
    assert_int_equal(redis_fixture_start(&f, 0, NULL), 0);
    ah_loop *loop = ah_loop_new(NULL, NULL);
    char err[256];
    ah_redis *r = NULL;
    ah_redis_new(loop, f.url, NULL, &r, err, sizeof err);
    wait_ready(loop, r);
    ah_retry_budget *b = NULL;
    ah_retry_budget_new_redis(r, "idle:budget", 100, 0.1, &b, err, sizeof err);
    ah_rate_limit_config rc = {.requests_per_minute = 6000, .burst = 100, .key = "idle:rl"};
    ah_rate_limit *rl = NULL;
    ah_rate_limit_new(&rc, r, &rl, err, sizeof err);
    int async;
    assert_int_equal(spend(loop, b, &async), 1);
    assert_true(async);
    for (int blocked = 0; blocked < 2; blocked++) {
        assert_true(redis_fixture_kill_clients(&f) >= 1);
        if (!blocked)
            wait_down(loop, r);
        assert_int_equal(spend(loop, b, &async), 1);
        assert_true(async);
        assert_true(ah_retry_budget_tokens(b) == 100.0); /* the local bucket: untouched */
        assert_true(redis_fixture_kill_clients(&f) >= 1);
        if (!blocked)
            wait_down(loop, r);
        verdict v = {0};
        int64_t w;
        const char *lim;
        ah_redis_req *q;
        assert_int_equal(ah_rate_limit_acquire(rl, loop, &w, &lim, on_paced, &v, &q), 1);
        run_until(loop, &v.done);
    }
    assert_true(ah_retry_budget_using_redis(b));
    assert_int_equal(count_in_log("falls back"), 0);
    ah_rate_limit_free(rl);
    ah_retry_budget_free(b);
    ah_redis_free(r);
    ah_loop_free(loop);
    redis_fixture_stop(&f);
}

/* A receipt (the effect ran) is retried like the SQLite ledger's: through a stalled
 * server (each attempt times out and the connection is made again) and a restart. */
static void receipt_outlasts_a_stall_and_a_restart(void **state)
{
    redis_fixture f;
    assert_int_equal(redis_fixture_start(&f, 0, NULL), 0);
    ah_loop *loop = ah_loop_new(NULL, NULL);
    char err[256];
    ah_redis_options o;
    ah_redis_options_init(&o);
    o.command_timeout_ms = 100;
    o.connect_timeout_ms = 100;
    o.reconnect_min_ms = 20;
    o.reconnect_max_ms = 50;
    ah_ledger_redis_config c;
    ah_ledger_redis_config_init(&c);
    c.url = f.url;
    c.prefix = "st:";
    c.redis = &o;
    ah_ledger *a = NULL;
    ah_ledger_new_redis(loop, &c, &a, err, sizeof err);
    wait_ready(loop, ledger_conn(a));
    lanswer x;
    ah_ledger_result r;

    /* stalled: several command timeouts pass before the server answers again */
    assert_int_equal(lclaim(loop, a, "s1", "{}", &x), AH_LEDGER_OWNED);
    redis_fixture_kill(&f, SIGSTOP);
    memset(&x, 0, sizeof x);
    assert_int_equal(ah_ledger_complete(a, "s1", "{}", "\"r\"", &r, on_lanswer, &x),
                     AH_LEDGER_PENDING);
    int64_t until = ah_loop_now_ms(loop) + 5 * o.command_timeout_ms;
    while (ah_loop_now_ms(loop) < until && !x.done)
        ah_loop_run_once(loop, 10);
    assert_int_equal(x.done, 0); /* still trying, not "could not be recorded" */
    redis_fixture_kill(&f, SIGCONT);
    run_until(loop, &x.done);
    assert_int_equal(x.r.answer, AH_LEDGER_DONE);
    assert_int_equal(x.r.duplicate, 0); /* a resend of our own write is not a duplicate */
    assert_int_equal(x.r.entry.seq, 1);

    /* restarted (empty): the receipt waits for the server and is recorded there */
    assert_int_equal(lclaim(loop, a, "s2", "{}", &x), AH_LEDGER_OWNED);
    redis_fixture_kill(&f, SIGKILL);
    memset(&x, 0, sizeof x);
    assert_int_equal(ah_ledger_complete(a, "s2", "{}", "\"r2\"", &r, on_lanswer, &x),
                     AH_LEDGER_PENDING);
    until = ah_loop_now_ms(loop) + 5 * o.command_timeout_ms;
    while (ah_loop_now_ms(loop) < until && !x.done)
        ah_loop_run_once(loop, 10);
    assert_int_equal(x.done, 0);
    assert_int_equal(redis_fixture_spawn(&f), 0);
    run_until(loop, &x.done);
    assert_int_equal(x.r.answer, AH_LEDGER_DONE);
    int refreshed = 0;
    ah_redis_req *q;
    assert_int_equal(ah_ledger_redis_refresh(a, on_refreshed, &refreshed, &q), AH_OK);
    run_until(loop, &refreshed);
    assert_int_equal(ah_ledger_count(a), 1); /* the new server has the receipt */
    ah_ledger_entry e;
    assert_int_equal(ah_ledger_lookup(a, "s2", "{}", &e), AH_OK);
    assert_string_equal(e.receipt, "\"r2\"");
    ah_ledger_free(a);
    ah_loop_free(loop);
    redis_fixture_stop(&f);
}

/* A wrong password says so (WRONGPASS, authentication failed), naming the URL without
 * the password; the commands behind AUTH never reach the server unauthenticated. */
static void wrong_password_says_authentication_failed(void **state)
{
    redis_fixture f;
    assert_int_equal(redis_fixture_start(&f, 1, "right-pass"), 0);
    char url[256];
    snprintf(url, sizeof url, "redis://:wrong-pass-xyz@127.0.0.1:%d/0", f.port);
    ah_loop *loop = ah_loop_new(NULL, NULL);
    char err[256];
    ah_ledger_redis_config c;
    ah_ledger_redis_config_init(&c);
    c.url = url;
    ah_ledger *a = NULL;
    ah_ledger_new_redis(loop, &c, &a, err, sizeof err);
    assert_non_null(a);
    lanswer x;
    for (int i = 0; i < 2; i++) { /* the first use and one in the outage that follows */
        assert_int_equal(lclaim(loop, a, "w1", "{}", &x), AH_LEDGER_FAILED);
        const char *m = ah_ledger_errmsg(a);
        if (!strstr(m, "authentication failed") || !strstr(m, "WRONGPASS") ||
            !strstr(m, ":***@127.0.0.1:") || strstr(m, "wrong-pass-xyz") ||
            strstr(m, "Protocol error"))
            fail_msg("message: %s", m);
    }
    ah_ledger_free(a);
    /* no password at all, where one is required */
    snprintf(url, sizeof url, "redis://127.0.0.1:%d/0", f.port);
    ah_ledger_new_redis(loop, &c, &a, err, sizeof err);
    assert_int_equal(lclaim(loop, a, "w2", "{}", &x), AH_LEDGER_FAILED);
    if (!strstr(ah_ledger_errmsg(a), "authentication required (NOAUTH"))
        fail_msg("message: %s", ah_ledger_errmsg(a));
    ah_ledger_free(a);
    ah_loop_free(loop);
    redis_fixture_stop(&f);
    assert_null(strstr(logbuf, "wrong-pass-xyz"));
    assert_int_equal(count_in_log("Protocol error"), 0);
}

/* Fences keep growing when Redis loses its data (a restart without persistence, a
 * failover to an empty replica): a downstream that keeps the highest one still accepts
 * the next holder. */
static void fences_survive_data_loss(void **state)
{
    redis_fixture f;
    assert_int_equal(redis_fixture_start(&f, 0, NULL), 0);
    ah_loop *loop = ah_loop_new(NULL, NULL);
    char err[256];
    ah_ledger_redis_config c;
    ah_ledger_redis_config_init(&c);
    c.url = f.url;
    c.prefix = "fence:";
    ah_ledger *a = NULL;
    ah_ledger_new_redis(loop, &c, &a, err, sizeof err);
    wait_ready(loop, ledger_conn(a));
    lanswer x;
    int64_t last = 0;
    for (int round = 0; round < 3; round++) {
        for (int i = 0; i < 3; i++) {
            char key[16];
            snprintf(key, sizeof key, "f%d-%d", round, i);
            assert_int_equal(lclaim(loop, a, key, "{}", &x), AH_LEDGER_OWNED);
            if (x.r.fence <= last)
                fail_msg("round %d: fence %lld after %lld", round, (long long)x.r.fence,
                         (long long)last);
            last = x.r.fence;
        }
        if (round == 0) { /* the data is gone: restart without persistence */
            redis_fixture_kill(&f, SIGKILL);
            assert_int_equal(redis_fixture_spawn(&f), 0);
        } else {
            char out[64];
            assert_int_equal(redis_fixture_call(&f, "FLUSHALL", out, sizeof out), 0);
        }
    }
    ah_ledger_free(a);
    ah_loop_free(loop);
    redis_fixture_stop(&f);
}

/* Expired entries leave the index as the ledger is used (a few per completion), not
 * only when someone lists it. */
static void expired_entries_are_trimmed_as_you_go(void **state)
{
    redis_fixture f;
    assert_int_equal(redis_fixture_start(&f, 0, NULL), 0);
    ah_loop *loop = ah_loop_new(NULL, NULL);
    char err[256];
    ah_ledger_redis_config c;
    ah_ledger_redis_config_init(&c);
    c.url = f.url;
    c.prefix = "trim:";
    c.ttl_s = 1;
    ah_ledger *a = NULL;
    ah_ledger_new_redis(loop, &c, &a, err, sizeof err);
    wait_ready(loop, ledger_conn(a));
    lanswer x;
    char key[32], out[64];
    for (int i = 0; i < 40; i++) {
        snprintf(key, sizeof key, "old-%d", i);
        assert_int_equal(lcomplete(loop, a, key, "{}", "1", &x), AH_LEDGER_DONE);
    }
    assert_int_equal(redis_fixture_call(&f, "ZCARD trim:idx", out, sizeof out), 0);
    assert_string_equal(out, ":40");
    /* wait (real time: the TTL is on the server's clock) until they have expired */
    for (int i = 0; i < 100; i++) {
        assert_int_equal(redis_fixture_call(&f, "EXISTS trim:e:old-39", out, sizeof out), 0);
        if (strcmp(out, ":0") == 0)
            break;
        redis_fixture_sleep_ms(50);
    }
    assert_string_equal(out, ":0");
    for (int i = 0; i < 10; i++) {
        snprintf(key, sizeof key, "new-%d", i);
        assert_int_equal(lcomplete(loop, a, key, "{}", "1", &x), AH_LEDGER_DONE);
    }
    /* 10 completions trim up to 80 expired members: only the 10 live ones are left */
    assert_int_equal(redis_fixture_call(&f, "ZCARD trim:idx", out, sizeof out), 0);
    assert_string_equal(out, ":10");
    ah_ledger_free(a);
    ah_loop_free(loop);
    redis_fixture_stop(&f);
}

/* A listing is paged: several short scripts, never one over the whole index; the
 * snapshot still holds every entry in seq order, and lookups find them. */
static void listing_is_paged(void **state)
{
    enum { N = 1234 };
    redis_fixture f;
    assert_int_equal(redis_fixture_start(&f, 0, NULL), 0);
    ah_loop *loop = ah_loop_new(NULL, NULL);
    char err[256];
    ah_ledger_redis_config c;
    ah_ledger_redis_config_init(&c);
    c.url = f.url;
    c.prefix = "page:";
    ah_ledger *a = NULL;
    ah_ledger_new_redis(loop, &c, &a, err, sizeof err);
    wait_ready(loop, ledger_conn(a));
    int refreshed = 0;
    ah_redis_req *q;
    assert_int_equal(ah_ledger_redis_refresh(a, on_refreshed, &refreshed, &q), AH_OK);
    run_until(loop, &refreshed); /* an empty ledger: one page, nothing in it */
    assert_int_equal(ah_ledger_count(a), 0);
    lanswer *xs = calloc(N, sizeof *xs);
    assert_non_null(xs);
    for (int i = 0; i < N; i++) { /* pipelined */
        char key[32], receipt[32];
        snprintf(key, sizeof key, "p-%d", i);
        snprintf(receipt, sizeof receipt, "%d", i);
        ah_ledger_result r;
        assert_int_equal(ah_ledger_complete(a, key, "{}", receipt, &r, on_lanswer, &xs[i]),
                         AH_LEDGER_PENDING);
    }
    run_until(loop, &xs[N - 1].done);
    for (int i = 0; i < N; i++)
        assert_int_equal(xs[i].r.answer, AH_LEDGER_DONE);
    free(xs);
    uint64_t before = ah_redis_commands(ledger_conn(a));
    refreshed = 0;
    assert_int_equal(ah_ledger_redis_refresh(a, on_refreshed, &refreshed, &q), AH_OK);
    run_until(loop, &refreshed);
    assert_int_equal(refreshed, 1);
    assert_true(ah_redis_commands(ledger_conn(a)) - before >= 3); /* 500 a page */
    assert_int_equal(ah_ledger_count(a), N);
    ah_ledger_entry e;
    assert_int_equal(ah_ledger_lookup(a, "p-0", "{}", &e), AH_OK);
    assert_string_equal(e.receipt, "0");
    assert_int_equal(ah_ledger_lookup(a, "p-1233", "{}", &e), AH_OK);
    assert_int_equal(e.seq, N);
    assert_int_equal(ah_ledger_lookup(a, "p-1234", "{}", &e), AH_ERR_NOT_FOUND);
    /* a listing cancelled before its first page, and one after it: never called back,
     * and the ledger closes cleanly with the second still walking */
    int cancelled = 0;
    assert_int_equal(ah_ledger_redis_refresh(a, on_refreshed, &cancelled, &q), AH_OK);
    ah_redis_req_cancel(q);
    assert_int_equal(ah_ledger_redis_refresh(a, on_refreshed, &cancelled, &q), AH_OK);
    for (int i = 0; i < 400 && ah_redis_commands(ledger_conn(a)) < before + 6; i++)
        ah_loop_run_once(loop, 5);
    ah_redis_req_cancel(q); /* the same handle, some pages in */
    for (int i = 0; i < 20; i++)
        ah_loop_run_once(loop, 5);
    assert_int_equal(cancelled, 0);
    assert_int_equal(ah_ledger_redis_refresh(a, on_refreshed, &cancelled, &q), AH_OK);
    ah_loop_run_once(loop, 5);
    ah_ledger_free(a);
    assert_int_equal(cancelled, 0);
    ah_loop_free(loop);
    redis_fixture_stop(&f);
}

typedef struct stall_body {
    redis_fixture *f;
    ah_timer *resume;
    int runs;
} stall_body;

static void resume_server(void *ud)
{
    redis_fixture_kill(ud, SIGCONT);
}

/* The body's effect happens, then the server stalls for longer than the driver waits
 * for a claim; the server resumes from a loop timer. */
static void body_then_stall(void *ud, ah_tool_call *call)
{
    stall_body *k = ud;
    k->runs++;
    redis_fixture_kill(k->f, SIGSTOP);
    ah_timer_start(k->resume, 300);
    ah_tool_call_body_ok(call, "\"done\"");
}

/* The blocking driver waits for its own receipt past its claim-wait bound: the effect
 * happened, so the call ends with the receipt recorded, not as an error. */
static void driver_waits_for_its_receipt(void **state)
{
    redis_fixture f;
    assert_int_equal(redis_fixture_start(&f, 0, NULL), 0);
    ah_loop *loop = ah_loop_new(NULL, NULL);
    char err[256];
    ah_ledger_redis_config c;
    ah_ledger_redis_config_init(&c);
    c.url = f.url;
    c.prefix = "drv:";
    ah_ledger *a = NULL;
    ah_ledger_new_redis(loop, &c, &a, err, sizeof err);
    wait_ready(loop, ledger_conn(a));
    stall_body k = {&f, ah_timer_new(loop, resume_server, &f), 0};
    ah_tool_policy tp;
    ah_tool_policy_init(&tp);
    tp.loop = loop;
    ah_tool_call *t = NULL;
    ah_tool_call_new(&tp, a, NULL, "slow-receipt", "{}", &t, err, sizeof err);
    ah_tool_driver d = {.body = body_then_stall, .body_ud = &k, .claim_wait_ms = 100};
    ah_tool_outcome o = ah_tool_call_run(t, &d);
    if (o != AH_TOOL_OK)
        fail_msg("outcome %d: %s", (int)o, ah_tool_call_error(t)->message);
    assert_int_equal(ah_tool_call_seq(t), 1);
    assert_int_equal(ah_tool_call_duplicate(t), 0);
    ah_tool_call_free(t);
    assert_int_equal(k.runs, 1);
    ah_timer_free(k.resume);
    ah_ledger_free(a);
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
        cmocka_unit_test_setup_teardown(idle_drop_is_not_a_failure, setup, teardown),
        cmocka_unit_test_setup_teardown(idle_drop_keeps_budget_and_pacing_shared, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(receipt_outlasts_a_stall_and_a_restart, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(wrong_password_says_authentication_failed, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(fences_survive_data_loss, setup, teardown),
        cmocka_unit_test_setup_teardown(expired_entries_are_trimmed_as_you_go, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(listing_is_paged, setup, teardown),
        cmocka_unit_test_setup_teardown(driver_waits_for_its_receipt, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
