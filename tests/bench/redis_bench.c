/* redis_bench.c - what a shared decision costs against the local one (docs/performance.md).
 * Starts its own redis-server on a unix socket (tests/support/redis_fixture.h) and
 * measures, on one loop:
 *   - retry budget: local try_spend vs a shared spend (one EVALSHA round trip), one at a
 *     time (latency) and 64 in flight (throughput);
 *   - pacing: local acquire vs shared acquire;
 *   - ledger: claim + complete on the memory ledger vs on Redis (two round trips);
 *   - the floor: a blocking hiredis PING round trip on the same socket (no loop, no
 *     script), measured in the same run, since the machine's speed varies.
 * Prints a markdown table. Numbers, never assertions.
 *   redis_bench [N]   (N shared operations per row, default 5000) */
#include "agenthost.h"
#include "support/redis_fixture.h"

#include <hiredis/hiredis.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

static int pending;

static void on_verdict(void *ud, int allowed)
{
    (void)ud;
    (void)allowed;
    pending--;
}

static void on_paced(void *ud, int64_t w, const char *limit)
{
    (void)ud;
    (void)w;
    (void)limit;
    pending--;
}

static void on_ledger(void *ud, const ah_ledger_result *r)
{
    *(ah_ledger_answer *)ud = r->answer;
    pending--;
}

static void drain(ah_loop *loop)
{
    while (pending > 0)
        ah_loop_run_once(loop, 100);
}

int main(int argc, char **argv)
{
    int n = argc > 1 ? atoi(argv[1]) : 5000;
    redis_fixture f;
    if (redis_fixture_start(&f, 0, NULL) != 0) {
        fprintf(stderr, "redis_bench: cannot start redis-server\n");
        return 1;
    }
    ah_loop *loop = ah_loop_new(NULL, NULL);
    char err[256];
    ah_redis *r = NULL;
    ah_redis_new(loop, f.url, NULL, &r, err, sizeof err);
    while (!ah_redis_ready(r))
        ah_loop_run_once(loop, 10);

    printf("| operation | local | shared (Redis, unix socket) |\n|---|---|---|\n");

    /* the floor: what one round trip costs without agenthost */
    redisContext *sync = redisConnectUnix(f.sock);
    double t_floor = now_us();
    for (int i = 0; sync && !sync->err && i < n; i++) {
        redisReply *rep = redisCommand(sync, "PING");
        freeReplyObject(rep);
    }
    printf("| floor: blocking hiredis PING round trip | | %.1f us |\n",
           (now_us() - t_floor) / n);
    if (sync)
        redisFree(sync);

    /* retry budget */
    ah_retry_budget *lb = NULL;
    ah_retry_budget_new(1e6, 1, &lb, NULL, 0);
    int local_n = 1000000;
    double t0 = now_us();
    for (int i = 0; i < local_n; i++)
        ah_retry_budget_try_spend(lb);
    double local_us = (now_us() - t0) / local_n;
    ah_retry_budget *sb = NULL;
    ah_retry_budget_new_redis(r, "bench:budget", 1e6, 1, &sb, err, sizeof err);
    t0 = now_us();
    for (int i = 0; i < n; i++) {
        ah_redis_req *q;
        pending = 1;
        if (ah_retry_budget_spend_async(sb, on_verdict, NULL, &q) < 0)
            drain(loop);
    }
    double seq_us = (now_us() - t0) / n;
    t0 = now_us();
    for (int i = 0; i < n; i += 64) {
        pending = 0;
        for (int k = 0; k < 64; k++) {
            ah_redis_req *q;
            pending++;
            if (ah_retry_budget_spend_async(sb, on_verdict, NULL, &q) >= 0)
                pending--;
        }
        drain(loop);
    }
    double pipe_us = (now_us() - t0) / n;
    printf("| retry decision (budget spend) | %.3f us | %.1f us one at a time, %.1f us each "
           "with 64 in flight |\n",
           local_us, seq_us, pipe_us);

    /* pacing */
    ah_rate_limit_config rc = {.requests_per_minute = 6e6, .burst = 1000000, .key = "bench:rl"};
    ah_rate_limit *lr = NULL;
    ah_rate_limit_new(&rc, NULL, &lr, err, sizeof err);
    ah_rate_limit *sr = NULL;
    ah_rate_limit_new(&rc, r, &sr, err, sizeof err);
    int64_t w;
    const char *lim;
    ah_redis_req *q;
    t0 = now_us();
    for (int i = 0; i < local_n; i++)
        ah_rate_limit_acquire(lr, loop, &w, &lim, NULL, NULL, &q);
    local_us = (now_us() - t0) / local_n;
    t0 = now_us();
    for (int i = 0; i < n; i++) {
        pending = 1;
        if (ah_rate_limit_acquire(sr, loop, &w, &lim, on_paced, NULL, &q))
            drain(loop);
    }
    seq_us = (now_us() - t0) / n;
    printf("| pacing decision (GCRA acquire) | %.3f us | %.1f us one at a time |\n", local_us,
           seq_us);

    /* ledger: claim + complete */
    ah_ledger *ml = ah_ledger_new_memory();
    int mem_n = 100000;
    char key[64];
    t0 = now_us();
    for (int i = 0; i < mem_n; i++) {
        ah_ledger_result res;
        snprintf(key, sizeof key, "m-%d", i);
        ah_ledger_claim(ml, key, "{}", &res, NULL, NULL);
        ah_ledger_complete(ml, key, "{}", "{\"ok\":true}", &res, NULL, NULL);
    }
    local_us = (now_us() - t0) / mem_n;
    ah_ledger_redis_config lc;
    ah_ledger_redis_config_init(&lc);
    lc.url = f.url;
    lc.prefix = "bench:";
    ah_ledger *rl = NULL;
    ah_ledger_new_redis(loop, &lc, &rl, err, sizeof err);
    while (!ah_redis_ready(ah_ledger_redis_connection(rl)))
        ah_loop_run_once(loop, 10);
    t0 = now_us();
    int owned = 0;
    for (int i = 0; i < n; i++) {
        ah_ledger_result res;
        ah_ledger_answer a = AH_LEDGER_FAILED;
        snprintf(key, sizeof key, "r-%d", i);
        pending = 1;
        if (ah_ledger_claim(rl, key, "{}", &res, on_ledger, &a) == AH_LEDGER_PENDING)
            drain(loop);
        owned += a == AH_LEDGER_OWNED;
        pending = 1;
        if (ah_ledger_complete(rl, key, "{}", "{\"ok\":true}", &res, on_ledger, &a) ==
            AH_LEDGER_PENDING)
            drain(loop);
    }
    seq_us = (now_us() - t0) / n;
    printf("| ledger claim + complete | %.2f us (memory) | %.1f us (%d/%d owned) |\n", local_us,
           seq_us, owned, n);

    ah_ledger_free(ml);
    ah_ledger_free(rl);
    ah_rate_limit_free(lr);
    ah_rate_limit_free(sr);
    ah_retry_budget_free(lb);
    ah_retry_budget_free(sb);
    ah_redis_free(r);
    ah_loop_free(loop);
    redis_fixture_stop(&f);
    return 0;
}
