/* ledger_sqlite_writer.c - the SQLite ledger's writer thread (ledger_sqlite.h).
 *
 * With a loop (ah_ledger_set_loop), claims, completions and releases that carry a
 * callback are queued here and run one at a time, in the order asked, on a thread with a
 * connection of its own; each answer comes back through an ah_async and is handed to its
 * callback on the loop thread, after its transaction committed (a receipt is on disk
 * before anyone hears DONE) and never from inside the call that asked.
 * Invariants:
 *   - the writer thread touches only its connection (wr, werr), the job it runs and the
 *     two queues (under mu); it never logs and never calls back: what it has to say
 *     travels in the job;
 *   - a job is created and freed on the loop thread and is on s->jobs until freed; while
 *     queued or running, only the writer writes its answer part;
 *   - stop finishes the queue before the thread ends: a receipt handed over is written
 *     even when nobody waits for its answer any more;
 *   - a job holds a reference on the loop (ah_loop_ref) from its submission until its
 *     answer is back on the loop thread (or it is freed), so ah_loop_run and an
 *     application's loop (uv_run) wait for it: nothing else of it is active meanwhile.
 */
#include "ledger_sqlite.h"

#include <stdlib.h>
#include <string.h>

/* The job's answer is in (or will never be heard): the loop may end without it. */
static void job_unhold(sql_job *j)
{
    if (j->held) {
        j->held = 0;
        ah_loop_unref(j->s->loop);
    }
}

static void job_free(sql_job *j)
{
    if (!j)
        return;
    job_unhold(j);
    ah_timer_free(j->busy_timer);
    free(j->key);
    free(j->fp);
    free(j->receipt);
    free(j->res_key);
    free(j->res_receipt);
    free(j);
}

/* Unlink j from s->jobs and free it. Loop thread. */
static void job_drop(sql_ledger *s, sql_job *j)
{
    for (sql_job **pp = &s->jobs; *pp; pp = &(*pp)->inext)
        if (*pp == j) {
            *pp = j->inext;
            break;
        }
    job_free(j);
}

/* Copy an answer's entry strings into the job (the writer's scratch is reused). */
static int keep_entry(sql_job *j)
{
    if (j->res.answer != AH_LEDGER_DONE)
        return 1;
    j->res_key = ah__strdup(j->res.entry.key ? j->res.entry.key : j->key);
    j->res_receipt = ah__strdup(j->res.entry.receipt ? j->res.entry.receipt : "null");
    j->res.entry.key = j->res.entry.receipt = NULL;
    if (j->res_key && j->res_receipt)
        return 1;
    /* Recorded (or found), but the answer cannot be carried: the caller hears FAILED,
     * which for a completion means "the receipt may be recorded" (it is). */
    ah__bufprintf(j->err, sizeof j->err, "out of memory reading a ledger answer");
    j->res.answer = AH_LEDGER_FAILED;
    return 0;
}

/* Writer thread: run one job on the writer's connection. */
static void run_job(sql_ledger *s, sql_job *j)
{
    s->werr.err[0] = '\0';
    switch (j->kind) {
    case JOB_CLAIM:
        ah__sqlite_claim_on(s, &s->wr, j->key, j->fp, j->now_ms, j->lease_ms, &j->res);
        break;
    case JOB_COMPLETE:
        ah__sqlite_complete_on(s, &s->wr, j->key, j->fp, j->receipt, j->now_ms, &j->res);
        break;
    case JOB_ABANDON:
        if (!ah__sqlite_drop_mine(s, &s->wr, j->key))
            ah__bufprintf(s->werr.err, sizeof s->werr.err, "%s",
                          sqlite3_errmsg(s->wr.db));
        break;
    }
    ah__bufprintf(j->err, sizeof j->err, "%s", s->werr.err);
    keep_entry(j);
}

static void *writer_main(void *arg)
{
    sql_ledger *s = arg;
    pthread_mutex_lock(&s->mu);
    for (;;) {
        while (!s->todo && !s->stop)
            pthread_cond_wait(&s->cv, &s->mu);
        sql_job *j = s->todo;
        if (!j)
            break; /* stopping, and every queued job (every receipt) was written */
        s->todo = j->next;
        if (!s->todo)
            s->todo_tail = NULL;
        pthread_mutex_unlock(&s->mu);
        run_job(s, j);
        pthread_mutex_lock(&s->mu);
        j->next = NULL;
        if (s->done_tail)
            s->done_tail->next = j;
        else
            s->done = j;
        s->done_tail = j;
        /* Under mu: close() sets stop under mu and joins before freeing `wake`. */
        ah_async_send(s->wake);
    }
    pthread_mutex_unlock(&s->mu);
    return NULL;
}

/* Loop thread: queue a job for the writer. Returns 0 (err set) when out of memory. */
int ah__sqlite_submit(sql_ledger *s, job_kind kind, const char *key, const char *fp,
                      const char *receipt, int64_t now_ms, ah_ledger_fn cb, void *ud)
{
    sql_job *j = calloc(1, sizeof *j);
    if (!j)
        goto nomem;
    j->kind = kind;
    j->s = s;
    j->key = ah__strdup(key);
    j->fp = ah__strdup(fp ? fp : "");
    j->receipt = receipt ? ah__strdup(receipt) : NULL;
    if (!j->key || !j->fp || (receipt && !j->receipt))
        goto nomem;
    j->now_ms = now_ms;
    j->lease_ms = s->base.lease_ms;
    j->cb = cb;
    j->ud = ud;
    j->inext = s->jobs;
    s->jobs = j;
    /* Work in flight: its answer comes through s->wake with no timer or transfer of its
     * own, so the loop (ah_loop_run, uv_run) must not end before it is in. */
    j->held = 1;
    ah_loop_ref(s->loop);
    pthread_mutex_lock(&s->mu);
    if (s->todo_tail)
        s->todo_tail->next = j;
    else
        s->todo = j;
    s->todo_tail = j;
    pthread_cond_signal(&s->cv);
    pthread_mutex_unlock(&s->mu);
    return 1;
nomem:
    job_free(j);
    ah__ledger_seterr(&s->base, "out of memory queueing a ledger write");
    return 0;
}

/* Hand a job's answer to its callback (loop thread) and free the job. */
static void deliver(sql_ledger *s, sql_job *j)
{
    ah_ledger_result r = j->res;
    ah_ledger_fn cb = j->cb;
    void *ud = j->ud;
    if (r.answer == AH_LEDGER_DONE) {
        free(s->ans_key);
        free(s->ans_receipt);
        s->ans_key = j->res_key;
        s->ans_receipt = j->res_receipt;
        j->res_key = j->res_receipt = NULL;
        r.entry.key = s->ans_key;
        r.entry.receipt = s->ans_receipt;
    }
    if (j->err[0])
        ah__bufprintf(s->base.err, sizeof s->base.err, "%s", j->err);
    job_drop(s, j);
    cb(ud, &r);
}

/* In-process wake-up: key was completed or released by this handle, so the BUSY answers
 * held back for it go out now (searched afresh each time: a callback may cancel). */
void ah__sqlite_wake_busy(sql_ledger *s, const char *key)
{
    for (;;) {
        sql_job *j = s->jobs;
        while (j && !(j->busy_timer && strcmp(j->key, key) == 0))
            j = j->inext;
        if (!j)
            return;
        deliver(s, j);
    }
}

static void busy_due(void *ud)
{
    sql_job *j = ud;
    deliver(j->s, j);
}

/* Loop thread: one answer back from the writer. */
static void answered(sql_ledger *s, sql_job *j)
{
    job_unhold(j); /* what follows is timed (a held BUSY) or delivered now */
    if (j->kind == JOB_ABANDON) {
        if (j->err[0])
            ah__log(AH_LOG_WARN, "ledger: cannot release the claim on key '%.80s': %s "
                                 "(it ends with its lease)", j->key, j->err);
        char *key = j->key;
        j->key = NULL;
        job_drop(s, j);
        ah__sqlite_wake_busy(s, key);
        free(key);
        return;
    }
    if (j->res.answer == AH_LEDGER_OWNED && j->res.reclaimed)
        ah__sqlite_log_takeover(j->key);
    if (j->cancelled) {
        /* Nobody will run the body: give the key back at once. */
        if (j->kind == JOB_CLAIM && j->res.answer == AH_LEDGER_OWNED)
            ah__sqlite_submit(s, JOB_ABANDON, j->key, NULL, NULL, 0, NULL, NULL);
        job_drop(s, j);
        return;
    }
    if (j->kind == JOB_CLAIM && j->res.answer == AH_LEDGER_BUSY) {
        /* Held back until the poll delay is over, or a wake-up of this handle, so a
         * waiter does not hammer the file. */
        j->busy_timer = ah_timer_new(s->loop, busy_due, j);
        if (j->busy_timer) {
            ah_timer_start(j->busy_timer, j->res.retry_ms > 0 ? j->res.retry_ms : 1);
            return;
        }
    }
    if (j->kind != JOB_COMPLETE) {
        deliver(s, j);
        return;
    }
    char *key = j->key;
    j->key = NULL;
    deliver(s, j);
    ah__sqlite_wake_busy(s, key);
    free(key);
}

static void on_wake(void *ud)
{
    sql_ledger *s = ud;
    pthread_mutex_lock(&s->mu);
    sql_job *list = s->done;
    s->done = s->done_tail = NULL;
    pthread_mutex_unlock(&s->mu);
    while (list) {
        sql_job *j = list;
        list = j->next;
        j->next = NULL;
        answered(s, j);
    }
}

void ah__sqlite_cancel(ah_ledger *l, void *ud)
{
    sql_ledger *s = (sql_ledger *)l;
    for (sql_job **pp = &s->jobs; *pp;) {
        sql_job *j = *pp;
        if (!j->cb || j->ud != ud || j->cancelled) {
            pp = &j->inext;
        } else if (j->busy_timer) {
            *pp = j->inext; /* a held BUSY answer: nothing else refers to it */
            job_free(j);
        } else {
            j->cancelled = 1; /* queued or being written: dropped when it comes back */
            pp = &j->inext;
        }
    }
}

ah_status ah__sqlite_writer_start(sql_ledger *s, ah_loop *loop)
{
    char err[AH__LEDGER_ERR_MAX];
    ah__ledger_init(&s->werr, s->base.ops);
    s->wr.el = &s->werr;
    if (ah__sqlite_conn_open(&s->wr, s->path, err, sizeof err) != 0) {
        ah__ledger_seterr(&s->base, "%s", err);
        return AH_ERR_IO;
    }
    s->wake = ah_async_new(loop, on_wake, s);
    if (!s->wake)
        goto nomem;
    if (pthread_mutex_init(&s->mu, NULL) != 0)
        goto nomem;
    if (pthread_cond_init(&s->cv, NULL) != 0) {
        pthread_mutex_destroy(&s->mu);
        goto nomem;
    }
    int rc = pthread_create(&s->thread, NULL, writer_main, s);
    if (rc != 0) {
        pthread_cond_destroy(&s->cv);
        pthread_mutex_destroy(&s->mu);
        ah_async_free(s->wake);
        s->wake = NULL;
        ah__sqlite_conn_close(&s->wr);
        ah__ledger_seterr(&s->base, "ledger: cannot start the writer thread: %s",
                          strerror(rc));
        return AH_ERR_INTERNAL;
    }
    s->started = 1;
    s->loop = loop;
    return AH_OK;
nomem:
    ah_async_free(s->wake);
    s->wake = NULL;
    ah__sqlite_conn_close(&s->wr);
    ah__ledger_seterr(&s->base, "out of memory starting the ledger writer");
    return AH_ERR_NOMEM;
}

void ah__sqlite_writer_stop(sql_ledger *s)
{
    if (s->started) {
        pthread_mutex_lock(&s->mu);
        s->stop = 1;
        pthread_cond_signal(&s->cv);
        pthread_mutex_unlock(&s->mu);
        pthread_join(s->thread, NULL);
        pthread_mutex_destroy(&s->mu);
        pthread_cond_destroy(&s->cv);
        s->started = 0;
    }
    while (s->jobs)
        job_drop(s, s->jobs); /* answers nobody will hear (no callbacks from free) */
    ah_async_free(s->wake);
    s->wake = NULL;
    if (s->wr.db)
        ah__sqlite_conn_close(&s->wr);
}
