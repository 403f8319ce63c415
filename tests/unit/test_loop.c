/* test_loop.c - the event loop: timer heap order, stop/restart, callbacks that re-arm or
 * free timers, async wake-ups from another thread, and run() ending when work runs out.
 * Timers run on a manual clock; only the async test uses real time (without timing
 * assertions). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "agenthost.h"
#include "agenthost/manual_clock.h"
#include "loop_curl.h"

typedef struct fixture {
    ah_manual_clock *clock;
    ah_seeded_rng *rng;
    ah_loop *loop;
} fixture;

static int setup(void **state)
{
    fixture *f = calloc(1, sizeof *f);
    f->clock = ah_manual_clock_new(1000, 1700000000000);
    f->rng = ah_seeded_rng_new(42);
    f->loop = ah_loop_new(ah_manual_clock_get(f->clock), ah_seeded_rng_get(f->rng));
    assert_non_null(f->loop);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    fixture *f = *state;
    assert_int_equal(ah_loop_transfer_count(f->loop), 0);
    ah_loop_free(f->loop);
    ah_seeded_rng_free(f->rng);
    ah_manual_clock_free(f->clock);
    free(f);
    return 0;
}

/* Advance virtual time to each next timer and step, until no timer is left. */
static void drain(fixture *f)
{
    for (int guard = 0; guard < 100000; guard++) {
        ah_loop_run_once(f->loop, 0);
        int64_t d = ah_loop_next_timer_ms(f->loop);
        if (d < 0)
            return;
        ah_manual_clock_advance(f->clock, d);
    }
    fail_msg("timers never drained");
}

typedef struct record {
    int order[64];
    int64_t at[64];
    int n;
    fixture *f;
} record;

typedef struct tctx {
    record *r;
    int id;
    ah_timer *t;
    int rearm; /* times left to re-arm itself */
    int free_self;
} tctx;

static void note(void *ud)
{
    tctx *c = ud;
    c->r->order[c->r->n] = c->id;
    c->r->at[c->r->n] = ah_loop_now_ms(c->r->f->loop);
    c->r->n++;
    if (c->rearm > 0) {
        c->rearm--;
        ah_timer_start(c->t, 0);
    }
    if (c->free_self) {
        ah_timer_free(c->t);
        c->t = NULL;
    }
}

static void timers_fire_in_due_order(void **state)
{
    fixture *f = *state;
    record r = {.f = f};
    enum { N = 40 };
    tctx c[N];
    /* A shuffled set of delays, with ties: ties fire in start order. */
    const ah_rng *rng = ah_seeded_rng_get(f->rng);
    int64_t delay[N];
    for (int i = 0; i < N; i++) {
        delay[i] = ah_rng_uniform(rng, 20) * 50;
        c[i] = (tctx){.r = &r, .id = i};
        c[i].t = ah_timer_new(f->loop, note, &c[i]);
        ah_timer_start(c[i].t, delay[i]);
    }
    int64_t min = delay[0];
    for (int i = 1; i < N; i++)
        if (delay[i] < min)
            min = delay[i];
    assert_int_equal(ah_loop_next_timer_ms(f->loop), min);
    drain(f);
    assert_int_equal(r.n, N);
    for (int k = 1; k < N; k++) {
        int a = r.order[k - 1], b = r.order[k];
        assert_true(delay[a] < delay[b] || (delay[a] == delay[b] && a < b));
        assert_true(r.at[k - 1] <= r.at[k]);
    }
    for (int k = 0; k < N; k++)
        assert_int_equal(r.at[k], 1000 + delay[r.order[k]]);
    for (int i = 0; i < N; i++) {
        assert_false(ah_timer_active(c[i].t));
        ah_timer_free(c[i].t);
    }
}

static void stopped_and_restarted_timers(void **state)
{
    fixture *f = *state;
    record r = {.f = f};
    tctx a = {.r = &r, .id = 1}, b = {.r = &r, .id = 2}, c = {.r = &r, .id = 3};
    a.t = ah_timer_new(f->loop, note, &a);
    b.t = ah_timer_new(f->loop, note, &b);
    c.t = ah_timer_new(f->loop, note, &c);
    ah_timer_start(a.t, 100);
    ah_timer_start(b.t, 200);
    ah_timer_start(c.t, 300);
    ah_timer_stop(b.t);       /* never fires */
    ah_timer_start(a.t, 500); /* moved later, past c */
    ah_timer_stop(b.t);       /* stopping twice is harmless */
    assert_true(ah_timer_active(a.t));
    assert_false(ah_timer_active(b.t));
    assert_int_equal(ah_timer_due_ms(a.t), 1500);
    drain(f);
    assert_int_equal(r.n, 2);
    assert_int_equal(r.order[0], 3);
    assert_int_equal(r.order[1], 1);
    assert_int_equal(r.at[1], 1500);
    ah_timer_free(a.t);
    ah_timer_free(b.t);
    ah_timer_free(c.t);
    ah_timer_free(NULL);
}

static void rearm_zero_waits_for_next_step(void **state)
{
    fixture *f = *state;
    record r = {.f = f};
    tctx a = {.r = &r, .id = 7, .rearm = 3};
    a.t = ah_timer_new(f->loop, note, &a);
    ah_timer_start(a.t, 0);
    /* Each step fires it once: a callback re-arming with 0 cannot starve the loop. */
    for (int step = 1; step <= 4; step++) {
        ah_loop_run_once(f->loop, 0);
        assert_int_equal(r.n, step);
    }
    ah_loop_run_once(f->loop, 0);
    assert_int_equal(r.n, 4);
    assert_false(ah_loop_alive(f->loop));
    ah_timer_free(a.t);
}

static void timer_may_free_itself(void **state)
{
    fixture *f = *state;
    record r = {.f = f};
    tctx a = {.r = &r, .id = 1, .free_self = 1}, b = {.r = &r, .id = 2};
    a.t = ah_timer_new(f->loop, note, &a);
    b.t = ah_timer_new(f->loop, note, &b);
    ah_timer_start(a.t, 10);
    ah_timer_start(b.t, 10);
    drain(f);
    assert_int_equal(r.n, 2);
    assert_null(a.t);
    ah_timer_free(b.t);
}

/* The real clock, except that it stands still while `held`: timers started then are
 * all counted from one `now`, however long the starts themselves take (valgrind on a
 * busy machine can spend more than a millisecond between two calls). */
typedef struct held_clock {
    int held;
    int64_t at;
} held_clock;

static int64_t held_now(void *ud)
{
    held_clock *h = ud;
    const ah_clock *real = ah_clock_real();
    return h->held ? h->at : real->now_ms(real->ud);
}

static int64_t held_wall(void *ud)
{
    (void)ud;
    const ah_clock *real = ah_clock_real();
    return real->wall_ms(real->ud);
}

static void run_returns_when_no_work(void **state)
{
    (void)state;
    /* Real time: two short timers, then run() must return on its own. Both are started
     * from one `now`, so their deadlines are 1 ms apart at any speed and the earlier one
     * fires first (order within a step is deadline order). */
    const ah_clock *real = ah_clock_real();
    held_clock h = {1, real->now_ms(real->ud)};
    ah_clock clock = {held_now, held_wall, &h};
    ah_loop *loop = ah_loop_new(&clock, NULL);
    assert_non_null(loop);
    record r = {0};
    fixture f = {.loop = loop};
    r.f = &f;
    tctx a = {.r = &r, .id = 1}, b = {.r = &r, .id = 2};
    a.t = ah_timer_new(loop, note, &a);
    b.t = ah_timer_new(loop, note, &b);
    ah_timer_start(a.t, 2);
    ah_timer_start(b.t, 1);
    h.held = 0;
    assert_true(ah_loop_alive(loop));
    assert_int_equal(ah_loop_run(loop), AH_OK);
    assert_false(ah_loop_alive(loop));
    assert_int_equal(r.n, 2);
    assert_int_equal(r.order[0], 2);
    ah_timer_free(a.t);
    ah_timer_free(b.t);
    ah_loop_free(loop);
}

typedef struct async_ctx {
    int calls;
    ah_async *a;
} async_ctx;

static void on_async(void *ud)
{
    ((async_ctx *)ud)->calls++;
}

static void *sender(void *ud)
{
    ah_async_send(((async_ctx *)ud)->a);
    return NULL;
}

static void async_wakes_a_blocked_step(void **state)
{
    (void)state;
    ah_loop *loop = ah_loop_new(NULL, NULL);
    async_ctx ctx = {0};
    ctx.a = ah_async_new(loop, on_async, &ctx);
    assert_non_null(ctx.a);
    assert_false(ah_loop_alive(loop)); /* an async handle keeps nothing alive */
    /* Several sends coalesce into one call. */
    ah_async_send(ctx.a);
    ah_async_send(ctx.a);
    assert_true(ah_loop_alive(loop)); /* ... a send does, until it is delivered */
    ah_loop_run_once(loop, 0);
    assert_int_equal(ctx.calls, 1);
    assert_false(ah_loop_alive(loop));
    /* ah_loop_run delivers a send made when nothing else is in flight */
    ah_async_send(ctx.a);
    assert_int_equal(ah_loop_run(loop), AH_OK);
    assert_int_equal(ctx.calls, 2);
    ctx.calls = 1;
    ah_loop_run_once(loop, 0);
    assert_int_equal(ctx.calls, 1);
    /* A step with no bound but the wake-up: returns only because the thread sent. */
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, sender, &ctx), 0);
    while (ctx.calls < 2)
        ah_loop_run_once(loop, -1);
    pthread_join(th, NULL);
    assert_int_equal(ctx.calls, 2);
    ah_async_free(ctx.a);
    ah_async_free(NULL);
    ah_loop_free(loop);
}

static void loop_free_null_and_accessors(void **state)
{
    fixture *f = *state;
    ah_loop_free(NULL);
    assert_ptr_equal(ah_loop_clock(f->loop), ah_manual_clock_get(f->clock));
    assert_ptr_equal(ah_loop_rng(f->loop), ah_seeded_rng_get(f->rng));
    assert_int_equal(ah_loop_now_ms(f->loop), 1000);
    assert_int_equal(ah_loop_wall_ms(f->loop), 1700000000000);
    assert_int_equal(ah_loop_next_timer_ms(f->loop), -1);
    assert_false(ah_loop_alive(f->loop));
}

/* A transfer a timer adds (a call's first attempt, a retry) starts in the same step: curl
 * asks for a 0 ms time-out when the handle is added, and the loop runs it after the
 * timers instead of waiting a step for it (issue 22). A file:// transfer completes inside
 * that one time-out, so it is done after exactly one step. Nothing runs inside the call
 * that armed the timer. */
typedef struct add_ctx {
    ah_loop *loop;
    CURL *easy;
    ah__easy_link link;
    int added, done;
    CURLcode result;
} add_ctx;

static void add_done(void *ud, CURLcode result)
{
    add_ctx *a = ud;
    a->done++;
    a->result = result;
}

static void add_on_timer(void *ud)
{
    add_ctx *a = ud;
    a->added++;
    assert_int_equal(ah__loop_add_easy(a->loop, a->easy, &a->link), AH_OK);
}

static void timer_added_transfer_runs_in_its_step(void **state)
{
    fixture *f = *state;
    add_ctx a = {.loop = f->loop};
    a.easy = curl_easy_init();
    assert_non_null(a.easy);
    curl_easy_setopt(a.easy, CURLOPT_URL, "file:///dev/null");
    a.link = (ah__easy_link){.done = add_done, .ud = &a};
    ah_timer *t = ah_timer_new(f->loop, add_on_timer, &a);
    ah_timer_start(t, 0);
    assert_int_equal(a.added, 0);
    assert_int_equal(ah_loop_run_once(f->loop, 0), AH_OK);
    assert_int_equal(a.added, 1);
    assert_int_equal(a.done, 1);
    assert_int_equal(a.result, CURLE_OK);
    assert_int_equal(ah_loop_transfer_count(f->loop), 0);
    ah_timer_free(t);
    curl_easy_cleanup(a.easy);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(timers_fire_in_due_order, setup, teardown),
        cmocka_unit_test_setup_teardown(stopped_and_restarted_timers, setup, teardown),
        cmocka_unit_test_setup_teardown(rearm_zero_waits_for_next_step, setup, teardown),
        cmocka_unit_test_setup_teardown(timer_may_free_itself, setup, teardown),
        cmocka_unit_test_setup_teardown(timer_added_transfer_runs_in_its_step, setup, teardown),
        cmocka_unit_test_setup_teardown(loop_free_null_and_accessors, setup, teardown),
        cmocka_unit_test(run_returns_when_no_work),
        cmocka_unit_test(async_wakes_a_blocked_step),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
