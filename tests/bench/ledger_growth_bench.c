/* ledger_growth_bench.c - what a Redis ledger leaves behind and how long its longest
 * script holds the server (docs/scale-out.md). Starts its own redis-server on a unix
 * socket (tests/support/redis_fixture.h) and measures, with the public API only (so it
 * builds against any version of the library):
 *   - growth: N tool calls (claim + complete) with ttl_s = 1, then, once they have
 *     expired, N/8 more: the members of the index zset (P idx) after each phase, and the
 *     entries that are still alive;
 *   - listing: M entries (ttl_s = 0), then ledger:count() (ah_ledger_redis_refresh): its
 *     wall time, the number of scripts it ran and the longest one, as the server timed
 *     it (SLOWLOG with a 0 us threshold, so every command is timed by Redis itself;
 *     Redis 7.0.15 logs the commands a script calls as well: only EVAL/EVALSHA lines
 *     count).
 * Prints a markdown table. Numbers, never assertions.
 *   ledger_growth_bench [N [M]]   (default N = 10000, M = 150000) */
#include "agenthost.h"
#include "agenthost/redis.h"
#include "support/redis_fixture.h"

#include <hiredis/hiredis.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

enum { IN_FLIGHT = 64 };

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

typedef struct call {
    ah_ledger *l;
    char key[48];
    int phase; /* 0 claiming, 1 completing, 2 done */
    ah_ledger_answer answer;
} call;

static int pending, failed;

static void step(call *c);

static void answered(void *ud, const ah_ledger_result *r)
{
    call *c = ud;
    c->answer = r->answer;
    if (c->phase == 0 && r->answer == AH_LEDGER_OWNED) {
        c->phase = 1;
        step(c);
        return;
    }
    if (r->answer != AH_LEDGER_DONE)
        failed++;
    c->phase = 2;
    pending--;
}

static void step(call *c)
{
    ah_ledger_result r;
    ah_ledger_answer a =
        c->phase == 0 ? ah_ledger_claim(c->l, c->key, "{}", &r, answered, c)
                      : ah_ledger_complete(c->l, c->key, "{}", "{\"ok\":true}", &r, answered, c);
    if (a != AH_LEDGER_PENDING) {
        failed++;
        c->phase = 2;
        pending--;
    }
}

/* n calls with keys "<tag>-<i>" through l, IN_FLIGHT at a time (claim only when claim). */
static void run_calls(ah_loop *loop, ah_ledger *l, const char *tag, int n, int claim)
{
    call *cs = calloc(IN_FLIGHT, sizeof *cs);
    int next = 0;
    while (next < n || pending > 0) {
        for (int s = 0; s < IN_FLIGHT && next < n; s++) {
            if (cs[s].l && cs[s].phase != 2)
                continue;
            cs[s].l = l;
            cs[s].phase = claim ? 0 : 1;
            snprintf(cs[s].key, sizeof cs[s].key, "%s-%d", tag, next++);
            pending++;
            step(&cs[s]);
        }
        ah_loop_run_once(loop, 100);
    }
    free(cs);
}

static long long integer(redisContext *rc, const char *cmd)
{
    redisReply *r = redisCommand(rc, cmd);
    long long v = r && r->type == REDIS_REPLY_INTEGER ? r->integer : -1;
    freeReplyObject(r);
    return v;
}

static ah_ledger *open_ledger(ah_loop *loop, const char *url, const char *prefix, int ttl_s)
{
    ah_ledger_redis_config c;
    ah_ledger_redis_config_init(&c);
    c.url = url;
    c.prefix = prefix;
    c.ttl_s = ttl_s;
    ah_ledger *l = NULL;
    char err[256];
    if (ah_ledger_new_redis(loop, &c, &l, err, sizeof err) != AH_OK) {
        fprintf(stderr, "ledger_growth_bench: %s\n", err);
        exit(1);
    }
    return l;
}

static void on_refreshed(void *ud, ah_status st)
{
    *(int *)ud = st == AH_OK ? 1 : -1;
}

int main(int argc, char **argv)
{
    int n = argc > 1 ? atoi(argv[1]) : 10000;
    int m = argc > 2 ? atoi(argv[2]) : 150000;
    redis_fixture f;
    if (redis_fixture_start(&f, 0, NULL) != 0) {
        fprintf(stderr, "ledger_growth_bench: cannot start redis-server\n");
        return 1;
    }
    redisContext *rc = redisConnectUnix(f.sock);
    ah_loop *loop = ah_loop_new(NULL, NULL);

    /* ---- growth with ttl_s = 1 ---- */
    ah_ledger *g = open_ledger(loop, f.url, "grow:", 1);
    double t0 = now_ms();
    run_calls(loop, g, "a", n, 1);
    double calls_ms = now_ms() - t0;
    long long after_n = integer(rc, "ZCARD grow:idx");
    redis_fixture_sleep_ms(1200); /* every entry has expired */
    long long alive = integer(rc, "DBSIZE"); /* idx, exp, seq, fence + what lives */
    run_calls(loop, g, "b", n / 8, 1);
    long long after_more = integer(rc, "ZCARD grow:idx");
    long long exp_members = integer(rc, "ZCARD grow:exp");
    ah_ledger_free(g);

    /* ---- the listing at m entries ---- */
    ah_ledger *big = open_ledger(loop, f.url, "big:", 0);
    t0 = now_ms();
    run_calls(loop, big, "k", m, 0);
    double fill_ms = now_ms() - t0;
    freeReplyObject(redisCommand(rc, "CONFIG SET slowlog-log-slower-than 0"));
    freeReplyObject(redisCommand(rc, "CONFIG SET slowlog-max-len 2000000"));
    freeReplyObject(redisCommand(rc, "SLOWLOG RESET"));
    int done = 0;
    ah_redis_req *q = NULL;
    uint64_t sent0 = ah_redis_commands(ah_ledger_redis_connection(big));
    t0 = now_ms();
    if (ah_ledger_redis_refresh(big, on_refreshed, &done, &q) != AH_OK)
        done = -1;
    while (!done)
        ah_loop_run_once(loop, 100);
    double list_ms = now_ms() - t0;
    uint64_t sent = ah_redis_commands(ah_ledger_redis_connection(big)) - sent0;
    int64_t count = done == 1 ? ah_ledger_count(big) : -1;
    long long longest_us = 0, scripts = 0;
    if (getenv("BENCH_VERBOSE"))
        fprintf(stderr, "slowlog len %lld\n", integer(rc, "SLOWLOG LEN"));
    redisReply *sl = redisCommand(rc, "SLOWLOG GET 2000000");
    for (size_t i = 0; sl && sl->type == REDIS_REPLY_ARRAY && i < sl->elements; i++) {
        redisReply *e = sl->element[i];
        if (e->type != REDIS_REPLY_ARRAY || e->elements < 4 ||
            e->element[3]->type != REDIS_REPLY_ARRAY || e->element[3]->elements < 1)
            continue;
        const char *cmd = e->element[3]->element[0]->str;
        if (!cmd || (strcasecmp(cmd, "evalsha") != 0 && strcasecmp(cmd, "eval") != 0))
            continue;
        scripts++;
        if (getenv("BENCH_VERBOSE"))
            fprintf(stderr, "%lld us\n", (long long)e->element[2]->integer);
        if (e->element[2]->integer > longest_us)
            longest_us = e->element[2]->integer;
    }
    freeReplyObject(sl);
    ah_ledger_free(big);

    printf("| measure | value |\n|---|---|\n");
    printf("| growth: %d calls with ttl_s = 1 | %.0f ms, %d failed |\n", n, calls_ms, failed);
    printf("| index members after them | %lld |\n", after_n);
    printf("| keys in the database once they expired | %lld |\n", alive);
    printf("| index members after %d more calls | %lld (exp zset: %lld) |\n", n / 8,
           after_more, exp_members);
    printf("| listing: %d entries written | %.0f ms |\n", m, fill_ms);
    printf("| count() | %lld entries in %.0f ms |\n", (long long)count, list_ms);
    printf("| commands it sent / scripts the server logged | %llu / %lld |\n",
           (unsigned long long)sent, scripts);
    printf("| longest script (server time) | %.1f ms |\n", longest_us / 1000.0);
    ah_loop_free(loop);
    redisFree(rc);
    redis_fixture_stop(&f);
    return failed ? 1 : 0;
}
