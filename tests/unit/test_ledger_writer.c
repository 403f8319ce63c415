/* test_ledger_writer.c - the SQLite ledger with a loop (ah_ledger_set_loop): claims and
 * receipts are written on the ledger's writer thread and answered through the loop.
 * Asserts that the loop keeps running (a timer fires) while a receipt's commit is held in
 * flight, that no DONE (and no finished tool call) is seen before that commit completed,
 * that BUSY waiters of this handle are woken by a release, that a cancelled claim gives
 * its key back, and that freeing the ledger writes what was already handed over.
 *
 * The commit is held by a blocking hook (ah__ledger_sqlite_hold) that waits on a
 * condition variable the test releases: no timed assertion anywhere; loops run until a
 * condition holds, bounded only so that a bug fails instead of hanging. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <pthread.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "agenthost.h"
#include "agenthost/ledger.h"
#include "agenthost/loop.h"
#include "agenthost/tool.h"
#include "ledger_internal.h"

/* Upper bound on loop steps of one wait: a bug fails the test instead of hanging it. */
enum { MAX_STEPS = 20000 };

typedef struct hold {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int entered; /* the commit reached the hook */
    int released;
} hold;

typedef struct fixture {
    char dir[256], path[300];
    ah_loop *loop;
    ah_ledger *l;
    ah_timer *tick;
    int ticks;
    hold h;
} fixture;

typedef struct answer {
    int n; /* answers received */
    ah_ledger_result r;
    char receipt[128];
} answer;

static void on_answer(void *ud, const ah_ledger_result *r)
{
    answer *a = ud;
    a->n++;
    a->r = *r;
    snprintf(a->receipt, sizeof a->receipt, "%s", r->entry.receipt ? r->entry.receipt : "");
    a->r.entry.receipt = a->receipt;
}

static void hold_fn(void *ud)
{
    hold *h = ud;
    pthread_mutex_lock(&h->mu);
    h->entered = 1;
    while (!h->released)
        pthread_cond_wait(&h->cv, &h->mu);
    pthread_mutex_unlock(&h->mu);
}

static int hold_entered(hold *h)
{
    pthread_mutex_lock(&h->mu);
    int e = h->entered;
    pthread_mutex_unlock(&h->mu);
    return e;
}

static void hold_release(hold *h)
{
    pthread_mutex_lock(&h->mu);
    h->released = 1;
    pthread_cond_signal(&h->cv);
    pthread_mutex_unlock(&h->mu);
}

static void on_tick(void *ud)
{
    fixture *f = ud;
    f->ticks++;
    ah_timer_start(f->tick, 1);
}

static int setup(void **state)
{
    fixture *f = calloc(1, sizeof *f);
    char err[512];
    if (!f)
        return -1;
    *state = f;
    const char *base = getenv("TMPDIR");
    snprintf(f->dir, sizeof f->dir, "%s/ah-lwriter-XXXXXX", base && *base ? base : "/tmp");
    if (!mkdtemp(f->dir))
        return -1;
    snprintf(f->path, sizeof f->path, "%s/effects.db", f->dir);
    pthread_mutex_init(&f->h.mu, NULL);
    pthread_cond_init(&f->h.cv, NULL);
    f->loop = ah_loop_new(NULL, NULL);
    ah_ledger_open(f->path, &f->l, err, sizeof err);
    if (!f->loop || !f->l) {
        print_error("open: %s\n", err);
        return -1;
    }
    if (ah_ledger_set_loop(f->l, f->loop) != AH_OK) {
        print_error("set_loop: %s\n", ah_ledger_errmsg(f->l));
        return -1;
    }
    f->tick = ah_timer_new(f->loop, on_tick, f);
    return f->tick ? 0 : -1;
}

static int teardown(void **state)
{
    fixture *f = *state;
    static const char *const sfx[] = {"", "-wal", "-shm", "-journal"};
    hold_release(&f->h); /* a failed assertion may have left a commit held */
    ah_timer_free(f->tick);
    ah_ledger_free(f->l);
    ah_loop_free(f->loop);
    pthread_cond_destroy(&f->h.cv);
    pthread_mutex_destroy(&f->h.mu);
    for (size_t i = 0; i < sizeof sfx / sizeof sfx[0]; i++) {
        char p[320];
        snprintf(p, sizeof p, "%s%s", f->path, sfx[i]);
        unlink(p);
    }
    rmdir(f->dir);
    free(f);
    return 0;
}

/* Step the loop until *n > have (an answer arrived). */
static void run_until_answer(fixture *f, const answer *a, int have)
{
    for (int i = 0; a->n <= have && i < MAX_STEPS; i++)
        ah_loop_run_once(f->loop, 10);
    assert_int_equal(a->n, have + 1);
}

/* Another connection (a plain read-only one: opening a ledger handle would wait for the
 * write lock the held commit keeps) sees only committed rows. */
static ah_status lookup_elsewhere(const fixture *f, const char *key, ah_ledger_entry *e,
                                  char *receipt, size_t size)
{
    sqlite3 *db = NULL;
    sqlite3_stmt *q = NULL;
    ah_status st = AH_ERR_NOT_FOUND;
    assert_int_equal(sqlite3_open_v2(f->path, &db, SQLITE_OPEN_READONLY, NULL), SQLITE_OK);
    assert_int_equal(sqlite3_prepare_v2(db,
                                        "SELECT receipt, seq FROM ah_ledger_entries"
                                        " WHERE key = ?1",
                                        -1, &q, NULL),
                     SQLITE_OK);
    sqlite3_bind_text(q, 1, key, -1, SQLITE_STATIC);
    int rc = sqlite3_step(q);
    if (rc == SQLITE_ROW) {
        snprintf(receipt, size, "%s", (const char *)sqlite3_column_text(q, 0));
        e->seq = sqlite3_column_int64(q, 1);
        st = AH_OK;
    } else {
        assert_int_equal(rc, SQLITE_DONE);
    }
    sqlite3_finalize(q);
    sqlite3_close(db);
    return st;
}

static void claim_owned(fixture *f, const char *key, answer *a)
{
    ah_ledger_result r;
    int have = a->n;
    assert_int_equal(ah_ledger_claim(f->l, key, "{}", &r, on_answer, a), AH_LEDGER_PENDING);
    assert_int_equal(a->n, have); /* never from inside the call */
    run_until_answer(f, a, have);
    assert_int_equal(a->r.answer, AH_LEDGER_OWNED);
}

/* The loop keeps firing its timer while a receipt's commit is held in the writer, and
 * DONE comes only after the commit: before it, nobody (not even another connection)
 * sees the receipt; after it, everybody does. */
static void loop_runs_while_commit_in_flight(void **state)
{
    fixture *f = *state;
    answer a = {0};
    ah_ledger_result r;
    ah_ledger_entry e;
    char receipt[64];
    claim_owned(f, "pay-1", &a);
    ah__ledger_sqlite_hold(f->l, hold_fn, &f->h);
    assert_int_equal(ah_ledger_complete(f->l, "pay-1", "{}", "{\"id\":7}", &r, on_answer, &a),
                     AH_LEDGER_PENDING);
    ah_timer_start(f->tick, 1);
    int ticks0 = f->ticks;
    for (int i = 0; (!hold_entered(&f->h) || f->ticks < ticks0 + 5) && i < MAX_STEPS; i++)
        ah_loop_run_once(f->loop, 10);
    assert_true(hold_entered(&f->h));
    assert_true(f->ticks >= ticks0 + 5); /* the loop ran on while the commit was held */
    assert_int_equal(a.n, 1);             /* no answer before the commit */
    assert_int_equal(lookup_elsewhere(f, "pay-1", &e, receipt, sizeof receipt),
                     AH_ERR_NOT_FOUND);
    hold_release(&f->h);
    run_until_answer(f, &a, 1);
    ah_timer_stop(f->tick);
    assert_int_equal(a.r.answer, AH_LEDGER_DONE);
    assert_int_equal(a.r.duplicate, 0);
    assert_int_equal(a.r.entry.seq, 1);
    assert_int_equal(lookup_elsewhere(f, "pay-1", &e, receipt, sizeof receipt), AH_OK);
    assert_string_equal(receipt, "{\"id\":7}");
    assert_int_equal(e.seq, 1);
    assert_int_equal(ah_ledger_claims(f->l), 0);
    /* A repeat claim is answered DONE with the original receipt. */
    assert_int_equal(ah_ledger_claim(f->l, "pay-1", "{}", &r, on_answer, &a),
                     AH_LEDGER_PENDING);
    run_until_answer(f, &a, 2);
    assert_int_equal(a.r.answer, AH_LEDGER_DONE);
    assert_string_equal(a.r.entry.receipt, "{\"id\":7}");
}

typedef struct notified {
    int n;
} notified;

static void on_notify(void *ud)
{
    ((notified *)ud)->n++;
}

/* A tool call on the ledger is not reported done (no SUCCEED, no receipt) until its
 * receipt's commit completed, while the loop runs on. */
static void tool_call_not_done_before_commit(void **state)
{
    fixture *f = *state;
    notified nt = {0};
    ah_tool_policy p;
    ah_tool_policy_init(&p);
    p.notify = on_notify;
    p.notify_ud = &nt;
    ah_tool_call *c = NULL;
    ah_tool_call_new(&p, f->l, NULL, "ship-9", "{}", &c, NULL, 0);
    assert_non_null(c);
    assert_int_equal(ah_tool_step(c), AH_TOOL_DO_WAIT_CLAIM); /* claim asked */
    for (int i = 0; nt.n < 1 && i < MAX_STEPS; i++)
        ah_loop_run_once(f->loop, 10);
    assert_int_equal(nt.n, 1);
    assert_int_equal(ah_tool_step(c), AH_TOOL_DO_RUN_BODY);
    assert_int_equal(ah_tool_call_body_ok(c, "\"shipped\""), AH_OK);
    ah__ledger_sqlite_hold(f->l, hold_fn, &f->h);
    assert_int_equal(ah_tool_step(c), AH_TOOL_DO_WAIT_CLAIM); /* recording */
    ah_timer_start(f->tick, 1);
    int ticks0 = f->ticks;
    for (int i = 0; (!hold_entered(&f->h) || f->ticks < ticks0 + 5) && i < MAX_STEPS; i++)
        ah_loop_run_once(f->loop, 10);
    assert_true(hold_entered(&f->h));
    assert_true(f->ticks >= ticks0 + 5);
    assert_int_equal(nt.n, 1); /* not woken: the commit is still in flight */
    assert_int_equal(ah_tool_step(c), AH_TOOL_DO_WAIT_CLAIM);
    assert_false(ah_tool_call_finished(c));
    assert_null(ah_tool_call_receipt(c));
    hold_release(&f->h);
    for (int i = 0; nt.n < 2 && i < MAX_STEPS; i++)
        ah_loop_run_once(f->loop, 10);
    ah_timer_stop(f->tick);
    assert_int_equal(nt.n, 2);
    assert_int_equal(ah_tool_step(c), AH_TOOL_DO_SUCCEED);
    assert_true(ah_tool_call_finished(c));
    assert_string_equal(ah_tool_call_receipt(c), "\"shipped\"");
    assert_int_equal(ah_tool_call_seq(c), 1);
    ah_tool_call_free(c);
    ah_ledger_entry e;
    char receipt[64];
    assert_int_equal(lookup_elsewhere(f, "ship-9", &e, receipt, sizeof receipt), AH_OK);
    assert_string_equal(receipt, "\"shipped\"");
}

/* A second claim of a key this handle holds is answered BUSY; the release wakes it and
 * the next claim owns the key. */
static void busy_then_woken_by_release(void **state)
{
    fixture *f = *state;
    answer a = {0}, b = {0};
    ah_ledger_result r;
    claim_owned(f, "K", &a);
    assert_int_equal(ah_ledger_claim(f->l, "K", "{}", &r, on_answer, &b), AH_LEDGER_PENDING);
    run_until_answer(f, &b, 0);
    assert_int_equal(b.r.answer, AH_LEDGER_BUSY);
    assert_true(b.r.retry_ms > 0);
    /* Ask again and release before the answer: the held BUSY is woken by the release. */
    assert_int_equal(ah_ledger_claim(f->l, "K", "{}", &r, on_answer, &b), AH_LEDGER_PENDING);
    ah_ledger_abandon(f->l, "K");
    run_until_answer(f, &b, 1);
    assert_int_equal(b.r.answer, AH_LEDGER_BUSY);
    claim_owned(f, "K", &b);
    ah_ledger_abandon(f->l, "K");
    /* Different arguments while in flight: MISMATCH. */
    claim_owned(f, "K2", &a);
    answer m = {0};
    assert_int_equal(ah_ledger_claim(f->l, "K2", "{\"x\":1}", &r, on_answer, &m),
                     AH_LEDGER_PENDING);
    run_until_answer(f, &m, 0);
    assert_int_equal(m.r.answer, AH_LEDGER_MISMATCH);
    assert_non_null(strstr(ah_ledger_errmsg(f->l), "in flight with different arguments"));
}

/* A claim cancelled before its answer came is given back: nobody will run its body. */
static void cancelled_claim_gives_key_back(void **state)
{
    fixture *f = *state;
    answer a = {0}, b = {0};
    ah_ledger_result r;
    assert_int_equal(ah_ledger_claim(f->l, "C", "{}", &r, on_answer, &a), AH_LEDGER_PENDING);
    ah_ledger_cancel(f->l, &a);
    /* Asked behind the cancelled claim: BUSY (ours, in flight), then woken when the
     * cancelled claim's key is released; then it owns the key. */
    assert_int_equal(ah_ledger_claim(f->l, "C", "{}", &r, on_answer, &b), AH_LEDGER_PENDING);
    run_until_answer(f, &b, 0);
    if (b.r.answer == AH_LEDGER_BUSY)
        claim_owned(f, "C", &b);
    assert_int_equal(b.r.answer, AH_LEDGER_OWNED);
    assert_int_equal(a.n, 0); /* the cancelled callback never ran */
    assert_int_equal(ah_ledger_claims(f->l), 1);
}

/* ah_ledger_free with a receipt handed over but not answered yet: it is written. And a
 * synchronous record (no callback) on a handle with a loop works as before. */
static void free_writes_what_was_handed_over(void **state)
{
    fixture *f = *state;
    answer a = {0};
    ah_ledger_result r;
    int64_t seq = 0;
    int dup = -1;
    assert_int_equal(ah_ledger_record(f->l, "sync-1", "{}", "\"s\"", &seq, &dup), AH_OK);
    assert_int_equal(seq, 1);
    assert_int_equal(dup, 0);
    claim_owned(f, "late", &a);
    assert_int_equal(ah_ledger_complete(f->l, "late", "{}", "\"l\"", &r, on_answer, &a),
                     AH_LEDGER_PENDING);
    ah_ledger_free(f->l); /* no loop step: the answer is never heard */
    f->l = NULL;
    assert_int_equal(a.n, 1);
    ah_ledger_entry e;
    char receipt[64];
    assert_int_equal(lookup_elsewhere(f, "late", &e, receipt, sizeof receipt), AH_OK);
    assert_string_equal(receipt, "\"l\"");
    assert_int_equal(e.seq, 2);
    /* Its claim was dropped with the entry (and the handle's close). */
    char err[512];
    ah_ledger *o = NULL;
    ah_ledger_open(f->path, &o, err, sizeof err);
    assert_non_null(o);
    assert_int_equal(ah_ledger_claims(o), 0);
    ah_ledger_free(o);
}

/* A pending claim or receipt is work in flight: ah_loop_run() waits for its answer
 * (before, the loop saw no timer and no transfer and returned at once, so an embedder
 * stepping it with ah_loop_run never heard the answer). No timer runs here. */
static void loop_run_waits_for_a_pending_answer(void **state)
{
    fixture *f = *state;
    answer a = {0};
    ah_ledger_result r;
    assert_false(ah_loop_alive(f->loop));
    assert_int_equal(ah_ledger_claim(f->l, "run-1", "{}", &r, on_answer, &a),
                     AH_LEDGER_PENDING);
    assert_true(ah_loop_alive(f->loop)); /* the answer will come */
    assert_int_equal(ah_loop_run(f->loop), AH_OK);
    assert_int_equal(a.n, 1);
    assert_int_equal(a.r.answer, AH_LEDGER_OWNED);
    assert_false(ah_loop_alive(f->loop)); /* answered: nothing holds the loop */
    assert_int_equal(ah_ledger_complete(f->l, "run-1", "{}", "\"r\"", &r, on_answer, &a),
                     AH_LEDGER_PENDING);
    assert_int_equal(ah_loop_run(f->loop), AH_OK);
    assert_int_equal(a.n, 2);
    assert_int_equal(a.r.answer, AH_LEDGER_DONE);
    assert_string_equal(a.r.entry.receipt, "\"r\"");
    assert_false(ah_loop_alive(f->loop));
    /* a cancelled claim still holds the loop until the writer is done with it */
    assert_int_equal(ah_ledger_claim(f->l, "run-2", "{}", &r, on_answer, &a),
                     AH_LEDGER_PENDING);
    ah_ledger_cancel(f->l, &a);
    assert_int_equal(ah_loop_run(f->loop), AH_OK);
    assert_int_equal(a.n, 2);                    /* never heard */
    assert_int_equal(ah_ledger_claims(f->l), 0); /* and given back */
    assert_false(ah_loop_alive(f->loop));
}

static void set_loop_rules(void **state)
{
    fixture *f = *state;
    ah_loop *other = ah_loop_new(NULL, NULL);
    assert_non_null(other);
    assert_int_equal(ah_ledger_set_loop(f->l, f->loop), AH_OK); /* same loop: no-op */
    assert_int_equal(ah_ledger_set_loop(f->l, other), AH_ERR_STATE);
    assert_int_equal(ah_ledger_set_loop(f->l, NULL), AH_ERR_INVALID);
    assert_int_equal(ah_ledger_set_loop(NULL, f->loop), AH_ERR_INVALID);
    ah_ledger *m = ah_ledger_new_memory();
    assert_int_equal(ah_ledger_set_loop(m, other), AH_OK); /* nothing to move */
    ah_ledger_free(m);
    ah_loop_free(other);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(loop_runs_while_commit_in_flight, setup, teardown),
        cmocka_unit_test_setup_teardown(tool_call_not_done_before_commit, setup, teardown),
        cmocka_unit_test_setup_teardown(busy_then_woken_by_release, setup, teardown),
        cmocka_unit_test_setup_teardown(cancelled_claim_gives_key_back, setup, teardown),
        cmocka_unit_test_setup_teardown(free_writes_what_was_handed_over, setup, teardown),
        cmocka_unit_test_setup_teardown(loop_run_waits_for_a_pending_answer, setup, teardown),
        cmocka_unit_test_setup_teardown(set_loop_rules, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
