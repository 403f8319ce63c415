/* ledger_stall_bench.c - how long SQLite ledger writes stall the event loop
 * (docs/tools-and-ledger.md, "Durability and the event loop").
 *
 *   ledger_stall_bench [DIR [N [RUNS [MODE]]]]
 *
 * One loop runs a repeating 1 ms timer (a stand-in for every stream and timer sharing the
 * loop) while N tool receipts go through the ledger one after another, the way a tool
 * call records them: claim the key, then complete it with the receipt (synchronous=FULL:
 * one fsync per receipt). The ledger file lives in DIR (default "."; it must be a real
 * disk, not tmpfs, or there is no fsync to measure). MODE:
 *   loop     the ledger writes on its writer thread and answers through the loop
 *            (ah_ledger_set_loop; what the Lua host does);
 *   inline   no loop attached: every claim and commit runs on the loop's thread;
 *   idle     no ledger at all: the timer alone for N ticks (the machine's noise floor).
 * For each run it measures the gaps between consecutive timer firings and the time the
 * loop's thread spent inside ah_ledger_claim / ah_ledger_complete (blocked: the stall
 * itself, independent of how busy the machine is); it prints, per run and as the median
 * over RUNS (default 5), the largest gap, the 99th percentile gap, the largest and the
 * summed blocked time and the total time for the N (default 200) receipts. A loop that is never stalled
 * shows gaps of about 1 ms. Numbers, not assertions.
 */
#include "agenthost.h"
#include "agenthost/ledger.h"
#include "agenthost/loop.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

typedef struct bench {
    ah_loop *loop;
    ah_ledger *ledger;
    ah_timer *tick, *next;
    double last_tick;
    double *gaps;
    size_t ngaps, capgaps;
    int n, done, failed, waiting;
    double blocked_max, blocked_total; /* time the loop thread spent inside ledger calls */
    char key[64];
} bench;

static ah_ledger_answer timed_claim(bench *b, ah_ledger_result *r);
static ah_ledger_answer timed_complete(bench *b, ah_ledger_result *r);

static void on_tick(void *ud)
{
    bench *b = ud;
    double t = now_ms();
    if (b->last_tick > 0 && b->ngaps < b->capgaps)
        b->gaps[b->ngaps++] = t - b->last_tick;
    b->last_tick = t;
    if (!b->ledger && ++b->done >= b->n)
        return; /* idle: N ticks */
    if (b->done < b->n)
        ah_timer_start(b->tick, 1);
}

static void step(bench *b);

static void answered(void *ud, const ah_ledger_result *r);

/* Claim, then complete: answered inline (no loop) or through `answered` (loop). */
static void step(bench *b)
{
    ah_ledger_result r;
    for (;;) {
        if (b->done >= b->n)
            return;
        snprintf(b->key, sizeof b->key, "receipt-%d", b->done);
        ah_ledger_answer a = timed_claim(b, &r);
        if (a == AH_LEDGER_PENDING) {
            b->waiting = 1; /* claim */
            return;
        }
        if (a != AH_LEDGER_OWNED)
            goto fail;
        a = timed_complete(b, &r);
        if (a == AH_LEDGER_PENDING) {
            b->waiting = 2; /* complete */
            return;
        }
        if (a != AH_LEDGER_DONE)
            goto fail;
        b->done++;
        /* Inline: go back to the loop between receipts, as a tool call would. */
        ah_timer_start(b->next, 0);
        return;
    }
fail:
    fprintf(stderr, "ledger_stall_bench: %s\n", ah_ledger_errmsg(b->ledger));
    b->failed = 1;
    b->done = b->n;
}

static void answered(void *ud, const ah_ledger_result *r)
{
    bench *b = ud;
    int was = b->waiting;
    ah_ledger_answer a = r->answer;
    b->waiting = 0;
    if (was == 1 && a == AH_LEDGER_OWNED) {
        ah_ledger_result x;
        a = timed_complete(b, &x);
        if (a == AH_LEDGER_PENDING) {
            b->waiting = 2;
            return;
        }
    }
    if (a != AH_LEDGER_DONE) {
        fprintf(stderr, "ledger_stall_bench: answer %s: %s\n", ah_ledger_answer_name(a),
                ah_ledger_errmsg(b->ledger));
        b->failed = 1;
        b->done = b->n;
        return;
    }
    b->done++;
    step(b);
}

static void blocked(bench *b, double t0)
{
    double d = now_ms() - t0;
    b->blocked_total += d;
    if (d > b->blocked_max)
        b->blocked_max = d;
}

static ah_ledger_answer timed_claim(bench *b, ah_ledger_result *r)
{
    double t0 = now_ms();
    ah_ledger_answer a = ah_ledger_claim(b->ledger, b->key, "{}", r, answered, b);
    blocked(b, t0);
    return a;
}

static ah_ledger_answer timed_complete(bench *b, ah_ledger_result *r)
{
    double t0 = now_ms();
    ah_ledger_answer a =
        ah_ledger_complete(b->ledger, b->key, "{}", "{\"id\":1}", r, answered, b);
    blocked(b, t0);
    return a;
}

static void on_next(void *ud)
{
    step(ud);
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

typedef struct result {
    double max_gap, p99_gap, total_ms, blocked_max, blocked_total;
    size_t ticks;
} result;

static int one_run(const char *dir, int n, int use_loop, int idle, int run, result *res)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/ledger_stall_bench.%d.%d.db", dir, (int)getpid(), run);
    char err[512];
    bench b;
    memset(&b, 0, sizeof b);
    b.n = n;
    b.capgaps = 1000000;
    b.gaps = malloc(b.capgaps * sizeof *b.gaps);
    b.loop = ah_loop_new(NULL, NULL);
    if (!idle)
        ah_ledger_open(path, &b.ledger, err, sizeof err);
    if (!b.gaps || !b.loop || (!idle && !b.ledger)) {
        fprintf(stderr, "ledger_stall_bench: %s\n", b.ledger ? "out of memory" : err);
        return -1;
    }
    if (use_loop && ah_ledger_set_loop(b.ledger, b.loop) != AH_OK) {
        fprintf(stderr, "ledger_stall_bench: set_loop: %s\n", ah_ledger_errmsg(b.ledger));
        return -1;
    }
    b.tick = ah_timer_new(b.loop, on_tick, &b);
    b.next = ah_timer_new(b.loop, on_next, &b);
    ah_timer_start(b.tick, 1);
    double t0 = now_ms();
    if (!idle)
        step(&b);
    while (b.done < b.n || b.waiting)
        ah_loop_run_once(b.loop, 100);
    res->total_ms = now_ms() - t0;
    res->ticks = b.ngaps;
    res->blocked_max = b.blocked_max;
    res->blocked_total = b.blocked_total;
    if (b.ngaps) {
        qsort(b.gaps, b.ngaps, sizeof *b.gaps, cmp_double);
        res->max_gap = b.gaps[b.ngaps - 1];
        res->p99_gap = b.gaps[(size_t)((double)(b.ngaps - 1) * 0.99)];
    }
    int64_t count = idle ? n : ah_ledger_count(b.ledger);
    ah_timer_free(b.tick);
    ah_timer_free(b.next);
    ah_ledger_free(b.ledger);
    ah_loop_free(b.loop);
    free(b.gaps);
    char side[4200];
    unlink(path);
    snprintf(side, sizeof side, "%s-wal", path);
    unlink(side);
    snprintf(side, sizeof side, "%s-shm", path);
    unlink(side);
    if (b.failed || count != n) {
        fprintf(stderr, "ledger_stall_bench: %lld of %d receipts recorded\n",
                (long long)count, n);
        return -1;
    }
    return 0;
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

int main(int argc, char **argv)
{
    const char *dir = argc > 1 ? argv[1] : ".";
    int n = argc > 2 ? atoi(argv[2]) : 200;
    int runs = argc > 3 ? atoi(argv[3]) : 5;
    const char *mode = argc > 4 ? argv[4] : "loop";
    int use_loop = strcmp(mode, "loop") == 0, idle = strcmp(mode, "idle") == 0;
    if (n < 1 || runs < 1 || (!use_loop && !idle && strcmp(mode, "inline") != 0)) {
        fprintf(stderr, "usage: ledger_stall_bench [DIR [N [RUNS [loop|inline|idle]]]]\n");
        return 2;
    }
    double maxg[64], p99[64], total[64], bmax[64], btot[64];
    if (runs > 64)
        runs = 64;
    for (int i = 0; i < runs; i++) {
        result r = {0};
        if (one_run(dir, n, use_loop, idle, i, &r) != 0)
            return 1;
        printf("ledger_stall_bench mode=%s run=%d receipts=%d ticks=%zu max_gap_ms=%.2f "
               "p99_gap_ms=%.2f total_ms=%.1f blocked_max_ms=%.3f blocked_total_ms=%.1f\n",
               mode, i, n, r.ticks, r.max_gap, r.p99_gap, r.total_ms, r.blocked_max,
               r.blocked_total);
        bmax[i] = r.blocked_max;
        btot[i] = r.blocked_total;
        maxg[i] = r.max_gap;
        p99[i] = r.p99_gap;
        total[i] = r.total_ms;
    }
    printf("ledger_stall_bench mode=%s median of %d: max_gap_ms=%.2f p99_gap_ms=%.2f "
           "total_ms=%.1f (%.2f ms per receipt) blocked_max_ms=%.3f blocked_total_ms=%.1f\n",
           mode, runs, median(maxg, runs), median(p99, runs), median(total, runs),
           median(total, runs) / n, median(bmax, runs), median(btot, runs));
    return 0;
}
