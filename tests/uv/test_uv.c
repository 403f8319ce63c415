/* test_uv.c - agenthost driven by an application's own loop.
 *
 * The hooks backend on its own (a recording "application" and a manual clock): which fds
 * and time-outs the loop asks for, and that it refuses to be stepped by ah_loop_run_once.
 * An ah_io watcher on the default backend. Then the libuv adapter against a real
 * uv_loop_t and the in-process mock over loopback: three agents through faults at once
 * beside the application's own repeating timer, uv_run returning by itself when the work
 * is done, and no busy polling while a response is delayed. A SQLite ledger's answer,
 * computed on its writer thread, keeps uv_run going until it is delivered.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "agenthost.h"
#include "agenthost/uv.h"
#include "agenthost/manual_clock.h"
#include "agenthost/mock.h"

/* ---- the hooks backend, on a recording application ------------------------------ */

typedef struct app {
    int watch_fd[16], watch_ev[16], n_watch;
    int64_t timeouts[16];
    int n_timeouts;
    int wakeups;
    int keep_alive[8], n_keep; /* keep_alive(on) calls, in order */
} app;

static void rec_watch(void *ud, int fd, int events)
{
    app *a = ud;
    if (a->n_watch < 16) {
        a->watch_fd[a->n_watch] = fd;
        a->watch_ev[a->n_watch++] = events;
    }
}

static void rec_timeout(void *ud, int64_t ms)
{
    app *a = ud;
    if (a->n_timeouts < 16)
        a->timeouts[a->n_timeouts++] = ms;
}

static void rec_wakeup(void *ud)
{
    ((app *)ud)->wakeups++;
}

static void rec_keep_alive(void *ud, int on)
{
    app *a = ud;
    if (a->n_keep < 8)
        a->keep_alive[a->n_keep++] = on;
}

static int fired;
static void count_fire(void *ud)
{
    (void)ud;
    fired++;
}

static int io_events;
static void on_io(void *ud, int fd, int events)
{
    (void)ud;
    char buf[16];
    if (events & AH_IO_READ)
        (void)!read(fd, buf, sizeof buf);
    io_events |= events;
}

static void hooks_are_told_fds_and_timeouts(void **state)
{
    (void)state;
    app a = {0};
    ah_manual_clock *clock = ah_manual_clock_new(1000, 1700000000000);
    ah_loop_hooks hooks = {.ud = &a,
                           .watch = rec_watch,
                           .set_timeout = rec_timeout,
                           .wakeup = rec_wakeup,
                           .keep_alive = rec_keep_alive};
    ah_loop *loop = NULL;
    ah_loop_new_hooked(ah_manual_clock_get(clock), NULL, &hooks, &loop, NULL, 0);
    assert_non_null(loop);
    assert_int_equal(ah_loop_run_once(loop, 0), AH_ERR_STATE);

    /* References (work in flight answering through a wake-up) keep the loop alive; the
     * application is told when the first is taken and the last given back. */
    assert_false(ah_loop_alive(loop));
    ah_loop_ref(loop);
    ah_loop_ref(loop);
    assert_true(ah_loop_alive(loop));
    ah_loop_unref(loop);
    assert_true(ah_loop_alive(loop));
    ah_loop_unref(loop);
    assert_false(ah_loop_alive(loop));
    ah_loop_unref(loop); /* unmatched: ignored */
    assert_int_equal(a.n_keep, 2);
    assert_int_equal(a.keep_alive[0], 1);
    assert_int_equal(a.keep_alive[1], 0);

    int p[2];
    assert_int_equal(pipe(p), 0);
    ah_io *io = ah_io_new(loop, p[0], on_io, NULL);
    assert_non_null(io);
    assert_int_equal(ah_io_start(io, AH_IO_READ), AH_OK);
    assert_null(ah_io_new(loop, p[0], on_io, NULL)); /* one watcher per fd */
    assert_int_equal(a.n_watch, 1);
    assert_int_equal(a.watch_fd[0], p[0]);
    assert_int_equal(a.watch_ev[0], AH_IO_READ);
    io_events = 0;
    assert_int_equal(write(p[1], "x", 1), 1);
    ah_loop_fd_ready(loop, p[0], AH_IO_READ);
    assert_int_equal(io_events, AH_IO_READ);
    ah_io_stop(io);
    assert_int_equal(a.n_watch, 2);
    assert_int_equal(a.watch_ev[1], 0);

    /* A timer started outside a dispatch is told at once; firing it takes the app's
     * timeout call after the (virtual) time has passed, not before. */
    fired = 0;
    ah_timer *t = ah_timer_new(loop, count_fire, NULL);
    ah_timer_start(t, 500);
    assert_true(a.n_timeouts >= 1);
    assert_int_equal(a.timeouts[a.n_timeouts - 1], 500);
    ah_loop_timeout(loop);
    assert_int_equal(fired, 0);
    ah_manual_clock_advance(clock, 500);
    ah_loop_timeout(loop);
    assert_int_equal(fired, 1);
    assert_int_equal(a.timeouts[a.n_timeouts - 1], -1); /* nothing timed is left */

    /* A wake-up reaches the application's hook (from any thread; here this one). */
    ah_loop_wakeup(loop);
    assert_int_equal(a.wakeups, 1);
    ah_loop_timeout(loop);

    ah_timer_free(t);
    ah_io_free(io);
    close(p[0]);
    close(p[1]);
    ah_loop_free(loop);
    ah_manual_clock_free(clock);
}

static void io_watcher_on_the_own_backend(void **state)
{
    (void)state;
    ah_loop *loop = ah_loop_new(NULL, NULL);
    int p[2];
    assert_int_equal(pipe(p), 0);
    ah_io *io = ah_io_new(loop, p[0], on_io, NULL);
    assert_int_equal(ah_io_start(io, AH_IO_READ), AH_OK);
    assert_false(ah_loop_alive(loop)); /* a watcher does not keep the loop alive */
    io_events = 0;
    assert_int_equal(ah_loop_run_once(loop, 0), AH_OK);
    assert_int_equal(io_events, 0); /* nothing to read yet */
    assert_int_equal(write(p[1], "x", 1), 1);
    assert_int_equal(ah_loop_run_once(loop, 1000), AH_OK);
    assert_int_equal(io_events, AH_IO_READ);
    ah_io_free(io);
    close(p[0]);

    /* An error alone (poll() says POLLERR for a pipe whose reader is gone, whatever was
     * asked) reaches the watcher as the events it asked for, so it can see it, instead of
     * waking the loop again and again with nothing delivered. */
    io = ah_io_new(loop, p[1], on_io, NULL);
    assert_int_equal(ah_io_start(io, AH_IO_READ), AH_OK);
    io_events = 0;
    assert_int_equal(ah_loop_run_once(loop, 1000), AH_OK);
    assert_int_equal(io_events, AH_IO_READ);
    ah_io_free(io);
    close(p[1]);
    ah_loop_free(loop);
}

/* ---- the libuv adapter against a real uv loop and the mock ---------------------- */

typedef struct run_state {
    int done, completed;
    int64_t ticks_at_end;
} run_state;

static int64_t app_ticks;
static int iterations;

static void on_tick(uv_timer_t *t)
{
    (void)t;
    app_ticks++;
}

static void on_prepare(uv_prepare_t *p)
{
    (void)p;
    iterations++;
}

/* Stop the app's own timer once every worker has finished, so uv_run can end. */
typedef struct watch_ctx {
    ah_worker **w;
    int n;
    uv_timer_t *tick;
    uv_prepare_t *prep;
} watch_ctx;

static void on_check(uv_check_t *c)
{
    watch_ctx *x = c->data;
    for (int i = 0; i < x->n; i++)
        if (!ah_worker_finished(x->w[i]))
            return;
    uv_timer_stop(x->tick);
    uv_prepare_stop(x->prep);
    uv_check_stop(c);
}

static void run_agents_on_uv(const char *plan, int n, int *completed, int *iters,
                             char texts[][512])
{
    char err[256];
    ah_mock_config mc;
    ah_mock_config_init(&mc);
    mc.plan_json = plan;
    ah_mock *mock = NULL;
    ah_mock_new(&mc, &mock, err, sizeof err);
    assert_non_null(mock);

    uv_loop_t uv;
    assert_int_equal(uv_loop_init(&uv), 0);
    ah_uv *a = NULL;
    ah_uv_new(&uv, NULL, NULL, &a, NULL, 0);
    assert_non_null(a);
    ah_client_config cc = {.wire = AH_WIRE_ANTHROPIC, .base_url = ah_mock_url(mock),
                           .model = "mock-model", .max_tokens = 256};
    ah_client *client = NULL;
    ah_client_new(&cc, &client, err, sizeof err);
    assert_non_null(client);
    ah_policy policy;
    ah_policy_init(&policy);
    policy.base_ms = 5;
    policy.cap_ms = 20;
    ah_worker *w[8];
    assert_true(n <= 8);
    for (int i = 0; i < n; i++) {
        ah_worker_config wc = {.loop = ah_uv_loop(a), .client = client, .policy = &policy};
        ah_worker_new(&wc, &w[i], err, sizeof err);
        assert_non_null(w[i]);
        char input[32];
        snprintf(input, sizeof input, "question %d", i);
        assert_int_equal(ah_worker_start(w[i], input), AH_OK);
    }

    uv_timer_t tick;
    uv_timer_init(&uv, &tick);
    uv_timer_start(&tick, on_tick, 5, 5);
    uv_prepare_t prep;
    uv_prepare_init(&uv, &prep);
    uv_prepare_start(&prep, on_prepare);
    uv_check_t check;
    watch_ctx x = {w, n, &tick, &prep};
    uv_check_init(&uv, &check);
    check.data = &x;
    uv_check_start(&check, on_check);
    app_ticks = 0;
    iterations = 0;
    /* Returns by itself: once the workers finish, no agenthost handle stays active. */
    uv_run(&uv, UV_RUN_DEFAULT);
    *iters = iterations;

    *completed = 0;
    for (int i = 0; i < n; i++) {
        assert_true(ah_worker_finished(w[i]));
        if (ah_worker_outcome(w[i]) == AH_OUTCOME_COMPLETED)
            (*completed)++;
        snprintf(texts[i], 512, "%s", ah_worker_text(w[i]));
        ah_worker_free(w[i]);
    }
    ah_client_free(client);
    ah_uv_free(a);
    uv_close((uv_handle_t *)&tick, NULL);
    uv_close((uv_handle_t *)&prep, NULL);
    uv_close((uv_handle_t *)&check, NULL);
    uv_run(&uv, UV_RUN_DEFAULT); /* the close callbacks */
    assert_int_equal(uv_loop_close(&uv), 0); /* every handle is closed: nothing leaked */
    ah_mock_free(mock);
}

static void three_agents_through_faults_on_a_uv_loop(void **state)
{
    (void)state;
    int completed = 0, iters = 0;
    char texts[3][512];
    run_agents_on_uv("[{\"status\":503},{\"status\":529,\"headers\":{\"retry-after-ms\":\"30\"}},"
                     "{\"cut_after_events\":5}]",
                     3, &completed, &iters, texts);
    assert_int_equal(completed, 3);
    for (int i = 0; i < 3; i++) {
        char want[32];
        snprintf(want, sizeof want, "question %d", i);
        assert_non_null(strstr(texts[i], want)); /* the mock's reply quotes the input */
    }
    assert_true(app_ticks > 0); /* the application's own timer ran meanwhile */
}

static void no_busy_polling_while_a_response_is_delayed(void **state)
{
    (void)state;
    int completed = 0, iters = 0;
    char texts[1][512];
    run_agents_on_uv("[{\"delay_headers_ms\":400}]", 1, &completed, &iters, texts);
    assert_int_equal(completed, 1);
    /* 400 ms of waiting with a 5 ms application timer: about 80 ticks, so about 80 loop
     * iterations plus a few for the transfer. A busy-polling adapter would spin
     * thousands of times. */
    print_message("400 ms delayed response: %d uv loop iterations, %lld app timer ticks\n",
                  iters, (long long)app_ticks);
    assert_true(app_ticks >= 20);
    assert_true(iters < 4 * app_ticks + 100);
}

/* ---- work in flight on another thread keeps uv_run going ------------------------- */

typedef struct ledger_answer {
    int n;
    ah_ledger_answer answer;
} ledger_answer;

static void on_ledger_answer(void *ud, const ah_ledger_result *r)
{
    ledger_answer *a = ud;
    a->n++;
    a->answer = r->answer;
}

/* A SQLite ledger on the adapter's loop commits on its writer thread. While a claim or a
 * receipt is pending no timer and no transfer is active, yet uv_run must not return
 * before the answer is delivered (it used to return at once, and the answer, sent to an
 * unreferenced async handle, was never delivered). Then nothing keeps uv_run going. */
static void uv_run_waits_for_a_sqlite_ledger_answer(void **state)
{
    (void)state;
    char dir[] = "/tmp/ah-uvledger-XXXXXX", path[64], err[512];
    assert_non_null(mkdtemp(dir));
    snprintf(path, sizeof path, "%s/effects.db", dir);
    uv_loop_t uv;
    assert_int_equal(uv_loop_init(&uv), 0);
    ah_uv *a = NULL;
    ah_uv_new(&uv, NULL, NULL, &a, NULL, 0);
    assert_non_null(a);
    ah_ledger *l = NULL;
    ah_ledger_open(path, &l, err, sizeof err);
    assert_non_null(l);
    assert_int_equal(ah_ledger_set_loop(l, ah_uv_loop(a)), AH_OK);

    ledger_answer got = {0};
    ah_ledger_result r;
    assert_int_equal(ah_ledger_claim(l, "uv-1", "{}", &r, on_ledger_answer, &got),
                     AH_LEDGER_PENDING);
    uv_run(&uv, UV_RUN_DEFAULT);
    assert_int_equal(got.n, 1);
    assert_int_equal(got.answer, AH_LEDGER_OWNED);
    assert_int_equal(
        ah_ledger_complete(l, "uv-1", "{}", "\"r\"", &r, on_ledger_answer, &got),
        AH_LEDGER_PENDING);
    uv_run(&uv, UV_RUN_DEFAULT);
    assert_int_equal(got.n, 2);
    assert_int_equal(got.answer, AH_LEDGER_DONE);
    assert_false(ah_loop_alive(ah_uv_loop(a)));
    assert_int_equal(uv_run(&uv, UV_RUN_NOWAIT), 0); /* nothing left that keeps uv up */

    ah_ledger_free(l);
    ah_uv_free(a);
    uv_run(&uv, UV_RUN_DEFAULT);
    assert_int_equal(uv_loop_close(&uv), 0);
    static const char *const sfx[] = {"", "-wal", "-shm", "-journal"};
    for (size_t i = 0; i < sizeof sfx / sizeof sfx[0]; i++) {
        char p[96];
        snprintf(p, sizeof p, "%s%s", path, sfx[i]);
        unlink(p);
    }
    rmdir(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(hooks_are_told_fds_and_timeouts),
        cmocka_unit_test(io_watcher_on_the_own_backend),
        cmocka_unit_test(three_agents_through_faults_on_a_uv_loop),
        cmocka_unit_test(no_busy_polling_while_a_response_is_delayed),
        cmocka_unit_test(uv_run_waits_for_a_sqlite_ledger_answer),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
