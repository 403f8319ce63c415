/* ledger_sqlite.c - the SQLite backend of the idempotency ledger (ledger_internal.h has
 * the contract every backend keeps; docs/tools-and-ledger.md the user-facing rules).
 *
 * Invariants: every claim, completion and takeover is one IMMEDIATE transaction, so the
 * write lock orders them across processes; a receipt is committed with
 * synchronous=FULL before DONE is answered; a claim row names its holder (pid, boot id,
 * pid namespace, a per-handle nonce) and a lease end; strings handed out stay valid
 * until the next call on the handle (copied into per-handle scratch).
 *
 * Threads. Without a loop every operation runs on the caller's thread, on the handle's
 * connection. With a loop (ah_ledger_set_loop) claims, completions and releases that
 * carry a callback go to a writer thread with a connection of its own, one at a time in
 * the order they were asked; each answer comes back through an ah_async and is handed to
 * its callback on the loop thread, after its transaction committed (so a receipt is on
 * disk before anyone hears DONE) and never from inside the call that asked. The writer
 * thread touches only its connection, the job it runs and the two queues (under `mu`);
 * it never logs and never calls back: what it has to say travels in the job. Reads
 * (lookup, count, foreach) stay on the caller's connection: in WAL mode a reader does
 * not wait for the writer's commit.
 */
#include "ledger_internal.h"

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>

/* Holders in other processes cannot wake a waiter: it polls the row this often. */
enum { SQL_BUSY_POLL_MS = 10 };

/* ---- SQLite backend -------------------------------------------------------------------
 *
 * Durability: WAL journal with synchronous=FULL. Each record is one transaction; in WAL
 * mode SQLite appends the commit to the -wal file and, with FULL, fsyncs it before
 * COMMIT returns, so a committed receipt survives a process kill AND a power
 * loss. (NORMAL would survive a kill but could lose the last commits on power loss: a
 * ledger exists to stop a real-world effect from running twice, which is worth one fsync
 * per effect.) WAL also lets readers proceed while a writer commits. WAL needs a local
 * filesystem (shared memory); a ledger on a network filesystem is not supported.
 */

/* Claims. A claim row names its holder: pid, boot id (a pid means nothing on another
 * boot) and a per-handle nonce (two handles of one process are two holders), plus a lease
 * end. Claim rows are written in the same IMMEDIATE transactions as entries, so the
 * write lock orders every claim, completion and takeover across processes. */

/* PRAGMA application_id marks the file as ours: 0x41484c47, "AHLG". Format 2 added the
 * claims table; a format-1 file is upgraded in place when opened (and an older build
 * then refuses it: it would not honour claims). */
#define LEDGER_APP_ID  1095257159
#define LEDGER_VERSION 2
#define LEDGER_BUSY_MS 5000
/* How long a write that must not be lost (recording a receipt whose effect happened,
 * creating the schema) keeps retrying a lock that stays busy past LEDGER_BUSY_MS, e.g.
 * under heavy contention on a loaded machine. A claim does not wait this long: a busy
 * lock answers BUSY and the caller asks again from its loop. */
#define LEDGER_PATIENCE_MS 60000
#define LEDGER_STR_(x) #x
#define LEDGER_STR(x)  LEDGER_STR_(x)

/* clang-format off */
static const char claims_sql[] =
    "CREATE TABLE ah_ledger_claims ("
    " key TEXT PRIMARY KEY,"
    " fingerprint TEXT NOT NULL,"
    " pid INTEGER NOT NULL,"
    " boot_id TEXT NOT NULL,"
    " holder INTEGER NOT NULL,"
    " claimed_ms INTEGER NOT NULL,"
    " lease_until_ms INTEGER NOT NULL);"
    "PRAGMA user_version = " LEDGER_STR(LEDGER_VERSION) ";";
static const char schema_sql[] =
    "CREATE TABLE ah_ledger_entries ("
    " seq INTEGER PRIMARY KEY AUTOINCREMENT,"
    " key TEXT NOT NULL UNIQUE,"
    " fingerprint TEXT NOT NULL,"
    " receipt TEXT NOT NULL,"
    " created_ms INTEGER NOT NULL);"
    "PRAGMA application_id = " LEDGER_STR(LEDGER_APP_ID) ";";
/* clang-format on */

enum { BOOT_ID_MAX = 64, HOST_ID_MAX = 128 };

/* One connection and its prepared statements. Used by one thread at a time: the
 * handle's by the caller, the writer's by the writer thread. */
typedef struct sql_conn {
    sqlite3 *db;
    sqlite3_stmt *find, *insert, *count, *all;
    sqlite3_stmt *claim_get, *claim_put, *claim_drop, *claim_count, *claim_mine;
    ah_ledger *el; /* where this connection's error messages go (el->err) */
    /* scratch for the strings of the last found entry (valid until the next call) */
    char *key_buf, *receipt_buf;
    char fp_buf[AH_LEDGER_FINGERPRINT_SIZE];
} sql_conn;

typedef enum job_kind { JOB_CLAIM, JOB_COMPLETE, JOB_ABANDON } job_kind;

typedef struct sql_ledger sql_ledger;

/* One claim, completion or release for the writer thread. Created and freed on the loop
 * thread; between being queued and coming back in `done`, only the writer touches the
 * answer part. */
typedef struct sql_job {
    job_kind kind;
    sql_ledger *s;
    char *key, *fp, *receipt;
    int64_t now_ms, lease_ms;
    ah_ledger_fn cb;
    void *ud;
    int cancelled;        /* loop thread: ah_ledger_cancel(ud) came first */
    ah_timer *busy_timer; /* loop thread: a BUSY answer held back (poll delay) */
    /* the answer, written by the writer thread */
    ah_ledger_result res;
    char *res_key, *res_receipt;
    char err[AH__LEDGER_ERR_MAX];
    struct sql_job *next;  /* todo / done queue (under mu) */
    struct sql_job *inext; /* s->jobs: every job not yet freed (loop thread) */
} sql_job;

struct sql_ledger {
    ah_ledger base;
    sql_conn rd; /* the caller's: reads, and everything when there is no writer */
    char *path;
    int64_t pid, holder;
    /* "<boot id> <pid namespace>" (the boot_id column): a pid can be checked only by a
     * process of the same boot AND the same pid namespace (containers sharing a volume
     * see each other's pids as absent). Either part may be "" when unknown. */
    char host_id[HOST_ID_MAX];
    size_t boot_len; /* length of the boot id part */
    /* tests: called before each receipt's COMMIT (on the thread that commits it) */
    void (*hold)(void *ud);
    void *hold_ud;
    /* ---- the writer (ah_ledger_set_loop) ---- */
    ah_loop *loop;
    ah_async *wake;
    pthread_t thread;
    int started; /* thread, mu and cv exist */
    pthread_mutex_t mu;
    pthread_cond_t cv;
    sql_job *todo, *todo_tail; /* mu: for the writer */
    sql_job *done, *done_tail; /* mu: answered, for the loop */
    int stop;                  /* mu: finish the queue, then exit */
    sql_conn wr;               /* writer thread only */
    ah_ledger werr;            /* writer thread only: the error sink of wr */
    sql_job *jobs;             /* loop thread */
    char *ans_key, *ans_receipt; /* the strings of the last asynchronous answer */
};

/* The kernel's boot id and this process's pid namespace, as "<boot> <ns>"; a part is ""
 * where it cannot be read (then only leases end such claims). */
static void read_host_id(sql_ledger *s)
{
    char boot[BOOT_ID_MAX] = "", ns[64] = "";
    FILE *f = fopen("/proc/sys/kernel/random/boot_id", "r");
    if (f) {
        if (fgets(boot, sizeof boot, f))
            boot[strcspn(boot, "\r\n ")] = '\0';
        else
            boot[0] = '\0';
        fclose(f);
    }
    ssize_t n = readlink("/proc/self/ns/pid", ns, sizeof ns - 1);
    ns[n > 0 ? n : 0] = '\0';
    ah__bufprintf(s->host_id, sizeof s->host_id, "%s %s", boot, ns);
    s->boot_len = strlen(boot);
}

static int64_t new_nonce(const void *seed)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    uint64_t x = (uint64_t)ts.tv_nsec ^ ((uint64_t)ts.tv_sec << 30) ^
                 ((uint64_t)getpid() << 40) ^ (uint64_t)(uintptr_t)seed;
    /* splitmix64 finaliser */
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
    x ^= x >> 31;
    return (int64_t)(x & 0x7fffffffffffffffULL);
}

static ah_status sql_fail(sql_conn *c, const char *what)
{
    int rc = sqlite3_errcode(c->db);
    ah__ledger_seterr(c->el, "ledger %s failed: %s", what, sqlite3_errmsg(c->db));
    return rc == SQLITE_NOMEM ? AH_ERR_NOMEM : AH_ERR_IO;
}

static void sql_reset(sqlite3_stmt *q)
{
    sqlite3_reset(q);
    sqlite3_clear_bindings(q);
}

static char *replace_str(char **slot, const unsigned char *text)
{
    free(*slot);
    *slot = ah__strdup(text ? (const char *)text : "");
    return *slot;
}

static ah_status conn_find(sql_conn *c, const char *key, ah_ledger_entry *e,
                           const char **fp)
{
    ah_status st = AH_OK;
    sqlite3_stmt *q = c->find;
    sqlite3_bind_text(q, 1, key, -1, SQLITE_STATIC);
    int rc = sqlite3_step(q);
    if (rc == SQLITE_DONE) {
        st = AH_ERR_NOT_FOUND;
        goto cleanup;
    }
    if (rc != SQLITE_ROW) {
        st = sql_fail(c, "lookup");
        goto cleanup;
    }
    if (!replace_str(&c->key_buf, sqlite3_column_text(q, 0)) ||
        !replace_str(&c->receipt_buf, sqlite3_column_text(q, 2))) {
        ah__ledger_seterr(c->el, "out of memory reading a ledger entry");
        st = AH_ERR_NOMEM;
        goto cleanup;
    }
    const unsigned char *f = sqlite3_column_text(q, 3);
    ah__bufprintf(c->fp_buf, sizeof c->fp_buf, "%s", f ? (const char *)f : "");
    e->key = c->key_buf;
    e->receipt = c->receipt_buf;
    e->seq = sqlite3_column_int64(q, 1);
    e->created_ms = sqlite3_column_int64(q, 4);
    *fp = c->fp_buf;
cleanup:
    sql_reset(q);
    return st;
}

static ah_status sql_find(ah_ledger *l, const char *key, ah_ledger_entry *e,
                          const char **fp)
{
    return conn_find(&((sql_ledger *)l)->rd, key, e, fp);
}

static int is_busy(int rc)
{
    rc &= 0xff;
    return rc == SQLITE_BUSY || rc == SQLITE_LOCKED;
}

static int64_t elapsed_ms(const struct timespec *t0)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (t.tv_sec - t0->tv_sec) * 1000 + (t.tv_nsec - t0->tv_nsec) / 1000000;
}

/* Run sql, retrying while the database stays locked, for up to LEDGER_PATIENCE_MS. No
 * pause between tries: each try already waited up to LEDGER_BUSY_MS in SQLite's busy
 * handler before it answered busy. */
static int exec_patient(sqlite3 *db, const char *sql)
{
    struct timespec t0;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (;;) {
        int rc = sqlite3_exec(db, sql, NULL, NULL, NULL);
        if (!is_busy(rc) || elapsed_ms(&t0) > LEDGER_PATIENCE_MS)
            return rc;
    }
}

/* 1 in a write transaction; 0 with err set; -1 (claims only) when the lock is busy. */
static int sql_begin(sql_conn *c, const char *what, int patient)
{
    int rc = patient ? exec_patient(c->db, "BEGIN IMMEDIATE")
                     : sqlite3_exec(c->db, "BEGIN IMMEDIATE", NULL, NULL, NULL);
    if (rc == SQLITE_OK)
        return 1;
    sql_fail(c, what);
    return !patient && is_busy(rc) ? -1 : 0;
}

static int sql_commit(sql_conn *c, const char *what)
{
    /* With synchronous=FULL, COMMIT returns after the WAL is fsynced: durable. */
    if (sqlite3_exec(c->db, "COMMIT", NULL, NULL, NULL) == SQLITE_OK)
        return 1;
    sql_fail(c, what);
    sqlite3_exec(c->db, "ROLLBACK", NULL, NULL, NULL);
    return 0;
}

static void sql_rollback(sql_conn *c)
{
    sqlite3_exec(c->db, "ROLLBACK", NULL, NULL, NULL);
}

/* Is the claim row at the current step of claim_get dead (its holder gone or its lease
 * over)? Columns: fingerprint, pid, boot_id, holder, lease_until_ms. */
static int claim_dead(const sql_ledger *s, sqlite3_stmt *q, int64_t now_ms)
{
    int64_t pid = sqlite3_column_int64(q, 1);
    const unsigned char *boot = sqlite3_column_text(q, 2);
    int64_t holder = sqlite3_column_int64(q, 3);
    int64_t lease_until = sqlite3_column_int64(q, 4);
    if (now_ms >= lease_until)
        return 1;
    if (holder == s->holder && pid == s->pid)
        return 0; /* ours: another call of this handle has it in flight */
    const char *theirs = boot ? (const char *)boot : "";
    size_t their_boot = strcspn(theirs, " ");
    if (s->boot_len && their_boot &&
        (their_boot != s->boot_len || memcmp(theirs, s->host_id, s->boot_len) != 0))
        return 1; /* taken on another boot: its holder is gone */
    /* Same boot and pid namespace: the pid says whether the holder lives. */
    if (s->boot_len && strcmp(theirs, s->host_id) == 0 && pid != s->pid && pid > 0 &&
        kill((pid_t)pid, 0) != 0 && errno == ESRCH)
        return 1;
    return 0;
}

/* Drop this handle's claim on key: inside a transaction of the caller's, or on its own
 * (autocommit: one statement is its own transaction). */
static int sql_drop_mine(const sql_ledger *s, sql_conn *c, const char *key)
{
    sqlite3_stmt *q = c->claim_drop;
    sqlite3_bind_text(q, 1, key, -1, SQLITE_STATIC);
    sqlite3_bind_int64(q, 2, s->pid);
    sqlite3_bind_int64(q, 3, s->holder);
    int rc = sqlite3_step(q);
    sql_reset(q);
    return rc == SQLITE_DONE;
}

static ah_ledger_answer claim_tx(sql_ledger *s, sql_conn *c, const char *key,
                                 const char *fp, int64_t now_ms, int64_t lease_ms,
                                 ah_ledger_result *out)
{
    ah_ledger_entry e;
    const char *stored = NULL;
    int reclaimed = 0;
    int begun = sql_begin(c, "claim", 0);
    if (begun < 0) {
        /* Someone holds the write lock for longer than the busy timeout: no claim was
         * taken, so the caller may simply ask again (from its loop, not blocking it). */
        out->retry_ms = SQL_BUSY_POLL_MS;
        return out->answer = AH_LEDGER_BUSY;
    }
    if (!begun)
        return out->answer = AH_LEDGER_FAILED;
    ah_status st = conn_find(c, key, &e, &stored);
    if (st == AH_OK) {
        sql_rollback(c); /* nothing written */
        return ah__ledger_entry_answer(c->el, key, fp, stored, &e, out);
    }
    if (st != AH_ERR_NOT_FOUND)
        goto fail;
    sqlite3_stmt *q = c->claim_get;
    sqlite3_bind_text(q, 1, key, -1, SQLITE_STATIC);
    int rc = sqlite3_step(q);
    if (rc == SQLITE_ROW) {
        if (!claim_dead(s, q, now_ms)) {
            const unsigned char *cfp = sqlite3_column_text(q, 0);
            int same = cfp && strcmp((const char *)cfp, fp) == 0;
            int64_t left = sqlite3_column_int64(q, 4) - now_ms;
            sql_reset(q);
            sql_rollback(c);
            if (!same) {
                ah__ledger_key_error(c->el, "idempotency key ", key,
                                     " is in flight with different arguments");
                return out->answer = AH_LEDGER_MISMATCH;
            }
            out->retry_ms = left < SQL_BUSY_POLL_MS ? (left > 0 ? left : 1)
                                                    : SQL_BUSY_POLL_MS;
            return out->answer = AH_LEDGER_BUSY;
        }
        reclaimed = 1;
    } else if (rc != SQLITE_DONE) {
        sql_reset(q);
        sql_fail(c, "claim");
        goto fail;
    }
    sql_reset(q);
    /* INSERT OR REPLACE: a dead claim is replaced by ours in the same transaction. */
    q = c->claim_put;
    sqlite3_bind_text(q, 1, key, -1, SQLITE_STATIC);
    sqlite3_bind_text(q, 2, fp, -1, SQLITE_STATIC);
    sqlite3_bind_int64(q, 3, s->pid);
    sqlite3_bind_text(q, 4, s->host_id, -1, SQLITE_STATIC);
    sqlite3_bind_int64(q, 5, s->holder);
    sqlite3_bind_int64(q, 6, now_ms);
    sqlite3_bind_int64(q, 7, now_ms + lease_ms);
    rc = sqlite3_step(q);
    sql_reset(q);
    if (rc != SQLITE_DONE) {
        sql_fail(c, "claim");
        goto fail;
    }
    if (!sql_commit(c, "claim"))
        return out->answer = AH_LEDGER_FAILED;
    out->reclaimed = reclaimed;
    return out->answer = AH_LEDGER_OWNED;
fail:
    sql_rollback(c);
    return out->answer = AH_LEDGER_FAILED;
}

/* A claim on connection c. It need not survive a power loss: after a reboot its boot id
 * marks it dead anyway. So its commit skips the fsync (synchronous=NORMAL: in WAL mode
 * the commit is written, not flushed; the next FULL commit flushes it too), and a call
 * costs one fsync, for its receipt, not two. Does not log (the writer thread must not):
 * the caller logs a takeover (out->reclaimed). */
static ah_ledger_answer claim_on(sql_ledger *s, sql_conn *c, const char *key,
                                 const char *fp, int64_t now_ms, int64_t lease_ms,
                                 ah_ledger_result *out)
{
    sqlite3_exec(c->db, "PRAGMA synchronous=NORMAL", NULL, NULL, NULL);
    ah_ledger_answer a = claim_tx(s, c, key, fp, now_ms, lease_ms, out);
    if (sqlite3_exec(c->db, "PRAGMA synchronous=FULL", NULL, NULL, NULL) != SQLITE_OK) {
        /* Never leave the connection recording receipts without the fsync. */
        sql_fail(c, "claim");
        if (a == AH_LEDGER_OWNED)
            sql_drop_mine(s, c, key);
        out->reclaimed = 0;
        return out->answer = AH_LEDGER_FAILED;
    }
    return a;
}

/* One IMMEDIATE transaction: check, insert, drop our claim, commit. The write lock
 * serialises recorders across processes, so a key recorded by someone else is seen here
 * and costs no seq (an INSERT that hits the UNIQUE constraint would still burn an
 * AUTOINCREMENT value). On DONE, out->entry's strings are c's scratch. */
static ah_ledger_answer complete_on(sql_ledger *s, sql_conn *c, const char *key,
                                    const char *fp, const char *receipt, int64_t now_ms,
                                    ah_ledger_result *out)
{
    ah_ledger_entry e;
    const char *stored = NULL;
    if (sql_begin(c, "record", 1) != 1)
        return out->answer = AH_LEDGER_FAILED;
    ah_status st = conn_find(c, key, &e, &stored);
    if (st != AH_OK && st != AH_ERR_NOT_FOUND)
        goto fail;
    if (!sql_drop_mine(s, c, key)) {
        sql_fail(c, "record");
        goto fail;
    }
    if (st == AH_OK) {
        ah_ledger_answer a = ah__ledger_entry_answer(c->el, key, fp, stored, &e, out);
        if (!sql_commit(c, "record"))
            return out->answer = AH_LEDGER_FAILED;
        out->duplicate = 1;
        return a;
    }
    sqlite3_stmt *q = c->insert;
    sqlite3_bind_text(q, 1, key, -1, SQLITE_STATIC);
    sqlite3_bind_text(q, 2, fp, -1, SQLITE_STATIC);
    sqlite3_bind_text(q, 3, receipt, -1, SQLITE_STATIC);
    sqlite3_bind_int64(q, 4, now_ms);
    int rc = sqlite3_step(q);
    sql_reset(q);
    if (rc != SQLITE_DONE) {
        sql_fail(c, "record");
        goto fail;
    }
    int64_t seq = sqlite3_last_insert_rowid(c->db);
    if (s->hold)
        s->hold(s->hold_ud);
    if (!sql_commit(c, "record"))
        return out->answer = AH_LEDGER_FAILED;
    /* The entry's strings: ours (the caller's, valid for the call) are what was stored. */
    if (!replace_str(&c->key_buf, (const unsigned char *)key) ||
        !replace_str(&c->receipt_buf, (const unsigned char *)receipt)) {
        ah__ledger_seterr(c->el, "out of memory after recording a ledger entry");
        return out->answer = AH_LEDGER_FAILED;
    }
    out->entry.key = c->key_buf;
    out->entry.receipt = c->receipt_buf;
    out->entry.seq = seq;
    out->entry.created_ms = now_ms;
    out->duplicate = 0;
    return out->answer = AH_LEDGER_DONE;
fail:
    sql_rollback(c);
    return out->answer = AH_LEDGER_FAILED;
}

static void log_takeover(const char *key)
{
    ah__log(AH_LOG_WARN, "ledger: took over the claim on key '%.80s' (its holder died "
                         "or its lease ran out)", key);
}

/* ---- the writer thread ------------------------------------------------------------- */

static void job_free(sql_job *j)
{
    if (!j)
        return;
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
        claim_on(s, &s->wr, j->key, j->fp, j->now_ms, j->lease_ms, &j->res);
        break;
    case JOB_COMPLETE:
        complete_on(s, &s->wr, j->key, j->fp, j->receipt, j->now_ms, &j->res);
        break;
    case JOB_ABANDON:
        if (!sql_drop_mine(s, &s->wr, j->key))
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
static int submit(sql_ledger *s, job_kind kind, const char *key, const char *fp,
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
static void wake_busy(sql_ledger *s, const char *key)
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
    if (j->kind == JOB_ABANDON) {
        if (j->err[0])
            ah__log(AH_LOG_WARN, "ledger: cannot release the claim on key '%.80s': %s "
                                 "(it ends with its lease)", j->key, j->err);
        char *key = j->key;
        j->key = NULL;
        job_drop(s, j);
        wake_busy(s, key);
        free(key);
        return;
    }
    if (j->res.answer == AH_LEDGER_OWNED && j->res.reclaimed)
        log_takeover(j->key);
    if (j->cancelled) {
        /* Nobody will run the body: give the key back at once. */
        if (j->kind == JOB_CLAIM && j->res.answer == AH_LEDGER_OWNED)
            submit(s, JOB_ABANDON, j->key, NULL, NULL, 0, NULL, NULL);
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
    wake_busy(s, key);
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

/* ---- the backend operations -------------------------------------------------------- */

static ah_ledger_answer sql_claim(ah_ledger *l, const char *key, const char *fp,
                                  int64_t now_ms, ah_ledger_result *out, ah_ledger_fn cb,
                                  void *ud)
{
    sql_ledger *s = (sql_ledger *)l;
    if (s->loop && cb)
        return out->answer = submit(s, JOB_CLAIM, key, fp, NULL, now_ms, cb, ud)
                                 ? AH_LEDGER_PENDING
                                 : AH_LEDGER_FAILED;
    ah_ledger_answer a = claim_on(s, &s->rd, key, fp, now_ms, l->lease_ms, out);
    if (a == AH_LEDGER_OWNED && out->reclaimed)
        log_takeover(key);
    return a;
}

static ah_ledger_answer sql_complete(ah_ledger *l, const char *key, const char *fp,
                                     const char *receipt, int64_t now_ms,
                                     ah_ledger_result *out, ah_ledger_fn cb, void *ud)
{
    sql_ledger *s = (sql_ledger *)l;
    if (s->loop && cb)
        return out->answer = submit(s, JOB_COMPLETE, key, fp, receipt, now_ms, cb, ud)
                                 ? AH_LEDGER_PENDING
                                 : AH_LEDGER_FAILED;
    ah_ledger_answer a = complete_on(s, &s->rd, key, fp, receipt, now_ms, out);
    if (s->loop) {
        /* Answered inline (no callback), on a handle with a writer: its held BUSY
         * answers are woken here (the front end wakes only its own waiters). */
        ah_ledger_result keep = *out;
        wake_busy(s, key);
        *out = keep;
    }
    return a;
}

static void sql_abandon(ah_ledger *l, const char *key)
{
    sql_ledger *s = (sql_ledger *)l;
    if (s->loop) {
        if (!submit(s, JOB_ABANDON, key, NULL, NULL, 0, NULL, NULL))
            ah__log(AH_LOG_WARN, "ledger: cannot release the claim on key '%.80s': out of "
                                 "memory (it ends with its lease)", key);
        return;
    }
    if (!sql_drop_mine(s, &s->rd, key))
        ah__log(AH_LOG_WARN, "ledger: cannot release the claim on key '%.80s': %s "
                             "(it ends with its lease)", key, sqlite3_errmsg(s->rd.db));
}

static void sql_cancel(ah_ledger *l, void *ud)
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

static ah_status sql_count_q(sql_conn *c, sqlite3_stmt *q, int64_t *n)
{
    ah_status st = AH_OK;
    if (sqlite3_step(q) != SQLITE_ROW)
        st = sql_fail(c, "count");
    else
        *n = sqlite3_column_int64(q, 0);
    sqlite3_reset(q);
    return st;
}

static ah_status sql_count(ah_ledger *l, int64_t *n)
{
    sql_conn *c = &((sql_ledger *)l)->rd;
    return sql_count_q(c, c->count, n);
}

static ah_status sql_claims(ah_ledger *l, int64_t *n)
{
    sql_conn *c = &((sql_ledger *)l)->rd;
    return sql_count_q(c, c->claim_count, n);
}

static ah_status sql_foreach(ah_ledger *l, ah_ledger_entry_fn fn, void *ud)
{
    sql_conn *c = &((sql_ledger *)l)->rd;
    ah_status st = AH_OK;
    int rc;
    while ((rc = sqlite3_step(c->all)) == SQLITE_ROW) {
        const unsigned char *k = sqlite3_column_text(c->all, 0);
        const unsigned char *r = sqlite3_column_text(c->all, 2);
        ah_ledger_entry e = {k ? (const char *)k : "", r ? (const char *)r : "",
                             sqlite3_column_int64(c->all, 1),
                             sqlite3_column_int64(c->all, 3)};
        if (fn(ud, &e)) {
            rc = SQLITE_DONE;
            break;
        }
    }
    if (rc != SQLITE_DONE)
        st = sql_fail(c, "listing");
    sqlite3_reset(c->all);
    return st;
}

static void conn_close(sql_conn *c)
{
    sqlite3_stmt *all[] = {c->find,      c->insert,    c->count,
                           c->all,       c->claim_get, c->claim_put,
                           c->claim_drop, c->claim_count, c->claim_mine};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        sqlite3_finalize(all[i]);
    /* The last connection to close checkpoints the WAL; every commit was durable
     * already, so a close that cannot checkpoint loses nothing. */
    if (c->db && sqlite3_close(c->db) != SQLITE_OK)
        ah__log(AH_LOG_WARN, "ledger: close: %s", sqlite3_errmsg(c->db));
    free(c->key_buf);
    free(c->receipt_buf);
    memset(c, 0, sizeof *c);
}

static void sql_close(ah_ledger *l)
{
    sql_ledger *s = (sql_ledger *)l;
    if (s->started) {
        /* The writer finishes what is queued first: a receipt handed over is written
         * even when nobody waits for its answer any more. */
        pthread_mutex_lock(&s->mu);
        s->stop = 1;
        pthread_cond_signal(&s->cv);
        pthread_mutex_unlock(&s->mu);
        pthread_join(s->thread, NULL);
        pthread_mutex_destroy(&s->mu);
        pthread_cond_destroy(&s->cv);
    }
    while (s->jobs)
        job_drop(s, s->jobs); /* answers nobody will hear (no callbacks from free) */
    ah_async_free(s->wake);
    conn_close(&s->wr);
    /* A clean close frees this handle's keys now rather than at lease expiry. */
    if (s->rd.claim_mine) {
        sqlite3_bind_int64(s->rd.claim_mine, 1, s->pid);
        sqlite3_bind_int64(s->rd.claim_mine, 2, s->holder);
        if (sqlite3_step(s->rd.claim_mine) != SQLITE_DONE)
            ah__log(AH_LOG_WARN, "ledger: close: cannot release claims: %s",
                    sqlite3_errmsg(s->rd.db));
        sql_reset(s->rd.claim_mine);
    }
    conn_close(&s->rd);
    free(s->ans_key);
    free(s->ans_receipt);
    free(s->path);
    free(s);
}

static ah_status sql_set_loop(ah_ledger *l, ah_loop *loop);

/* Without a writer: synchronous (cancel NULL: the front end keeps BUSY waiters). */
static const ah__ledger_ops sql_ops = {
    "sqlite", sql_claim, sql_complete, sql_abandon, NULL,
    sql_find, sql_count, sql_claims,   sql_foreach, sql_close, sql_set_loop,
};
/* With a writer: claims and completions with a callback answer PENDING, then through
 * it; BUSY waiters are kept here (held BUSY answers). */
static const ah__ledger_ops sql_async_ops = {
    "sqlite", sql_claim, sql_complete, sql_abandon, sql_cancel,
    sql_find, sql_count, sql_claims,   sql_foreach, sql_close, sql_set_loop,
};

/* Run one single-integer query (a PRAGMA or a count). */
static int sql_int(sqlite3 *db, const char *sql, int64_t *out)
{
    sqlite3_stmt *q = NULL;
    int rc = sqlite3_prepare_v2(db, sql, -1, &q, NULL);
    if (rc == SQLITE_OK) {
        rc = sqlite3_step(q);
        if (rc == SQLITE_ROW) {
            *out = sqlite3_column_int64(q, 0);
            rc = SQLITE_OK;
        }
    }
    sqlite3_finalize(q);
    return rc;
}

/* Make sure the open file is an agenthost ledger, creating the schema in an empty
 * database and upgrading a format-1 file. Runs in one IMMEDIATE transaction so two
 * processes opening a fresh file at once create the schema exactly once. Returns 0 or
 * -1 with err set. */
static int sql_check_schema(sqlite3 *db, const char *path, char *err, size_t errsize)
{
    int64_t app = 0, version = 0, objects = 0;
    int rc = exec_patient(db, "BEGIN IMMEDIATE");
    if (rc == SQLITE_OK)
        rc = sql_int(db, "PRAGMA application_id", &app);
    if (rc == SQLITE_OK)
        rc = sql_int(db, "PRAGMA user_version", &version);
    if (rc == SQLITE_OK)
        rc = sql_int(db, "SELECT count(*) FROM sqlite_master", &objects);
    if (rc != SQLITE_OK) {
        if (rc == SQLITE_NOTADB)
            ah__bufprintf(err, errsize, "'%s' is not a ledger: not an SQLite database",
                          path);
        else
            ah__bufprintf(err, errsize, "cannot read ledger '%s': %s", path,
                          sqlite3_errmsg(db));
        goto fail;
    }
    const char *create = NULL;
    if (app == 0 && version == 0 && objects == 0) {
        create = schema_sql;
    } else if (app != LEDGER_APP_ID) {
        ah__bufprintf(err, errsize,
                      "'%s' is not a ledger: an SQLite database of another application",
                      path);
        goto fail;
    } else if (version == 1) {
        create = ""; /* format 1: entries only; add the claims table */
    } else if (version != LEDGER_VERSION) {
        ah__bufprintf(err, errsize,
                      "ledger '%s' has format version %" PRId64 "; this build reads %d",
                      path, version, LEDGER_VERSION);
        goto fail;
    }
    if (create && ((*create && sqlite3_exec(db, create, NULL, NULL, NULL) != SQLITE_OK) ||
                   sqlite3_exec(db, claims_sql, NULL, NULL, NULL) != SQLITE_OK)) {
        ah__bufprintf(err, errsize, "cannot create ledger '%s': %s", path,
                      sqlite3_errmsg(db));
        goto fail;
    }
    if (sqlite3_exec(db, "COMMIT", NULL, NULL, NULL) != SQLITE_OK) {
        ah__bufprintf(err, errsize, "cannot create ledger '%s': %s", path,
                      sqlite3_errmsg(db));
        goto fail;
    }
    return 0;
fail:
    sqlite3_exec(db, "ROLLBACK", NULL, NULL, NULL);
    return -1;
}

/* Switch to WAL + synchronous=FULL (persistent in the file; per connection for
 * synchronous). Falls back, with a warning, to the rollback journal if WAL is refused:
 * synchronous=FULL still makes every commit durable before it returns. */
static int sql_set_durability(sqlite3 *db, const char *path, char *err, size_t errsize)
{
    sqlite3_stmt *q = NULL;
    int ok = 0;
    struct timespec t0;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    /* Switching a fresh file to WAL needs it to itself: with several processes opening
     * it at once, the others are told "busy" at once, whatever the busy timeout. */
    for (;;) {
        int rc = sqlite3_prepare_v2(db, "PRAGMA journal_mode=WAL", -1, &q, NULL);
        if (rc == SQLITE_OK)
            rc = sqlite3_step(q);
        if (rc == SQLITE_ROW) {
            const unsigned char *mode = sqlite3_column_text(q, 0);
            if (!mode || strcmp((const char *)mode, "wal") != 0)
                ah__log(AH_LOG_WARN, "ledger '%s': journal mode %s (WAL refused)", path,
                        mode ? (const char *)mode : "?");
            ok = 1;
            break;
        }
        sqlite3_finalize(q);
        q = NULL;
        if (!is_busy(rc) || elapsed_ms(&t0) > LEDGER_PATIENCE_MS)
            break;
        sqlite3_sleep(10); /* blocking-ok: only in ledger open, busy at once on WAL */
    }
    sqlite3_finalize(q);
    if (ok && sqlite3_exec(db, "PRAGMA synchronous=FULL", NULL, NULL, NULL) == SQLITE_OK)
        return 0;
    ah__bufprintf(err, errsize, "cannot configure ledger '%s': %s", path,
                  sqlite3_errmsg(db));
    return -1;
}

/* Open path on c: check (or create) the schema, set the durability, prepare the
 * statements. 0, or -1 with err set (c is then closed). */
static int conn_open(sql_conn *c, const char *path, char *err, size_t errsize)
{
    sqlite3 *db = NULL;
    int rc = sqlite3_open_v2(path, &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, NULL);
    if (rc != SQLITE_OK) {
        int sys = db ? sqlite3_system_errno(db) : 0;
        ah__bufprintf(err, errsize, "cannot open ledger '%s': %s%s%s%s", path,
                      db ? sqlite3_errmsg(db) : sqlite3_errstr(rc), sys ? " (" : "",
                      sys ? strerror(sys) : "", sys ? ")" : "");
        goto fail;
    }
    c->db = db;
    /* SQLite silently opens a write-protected file read-only; a ledger that cannot
     * record is useless, so say so now rather than at the first effect. */
    if (sqlite3_db_readonly(db, "main") == 1) {
        ah__bufprintf(err, errsize, "cannot open ledger '%s': file is read-only", path);
        goto fail;
    }
    sqlite3_busy_timeout(db, LEDGER_BUSY_MS);
    /* Validate before changing the journal mode: never convert someone else's
     * database to WAL. */
    if (sql_check_schema(db, path, err, errsize) != 0 ||
        sql_set_durability(db, path, err, errsize) != 0)
        goto fail;
    static const struct {
        size_t off;
        const char *sql;
    } stmts[] = {
        {offsetof(sql_conn, find), "SELECT key, seq, receipt, fingerprint, created_ms"
                                   " FROM ah_ledger_entries WHERE key = ?1"},
        {offsetof(sql_conn, insert),
         "INSERT INTO ah_ledger_entries (key, fingerprint, receipt, created_ms)"
         " VALUES (?1, ?2, ?3, ?4)"},
        {offsetof(sql_conn, count), "SELECT count(*) FROM ah_ledger_entries"},
        {offsetof(sql_conn, all), "SELECT key, seq, receipt, created_ms"
                                  " FROM ah_ledger_entries ORDER BY seq"},
        {offsetof(sql_conn, claim_get),
         "SELECT fingerprint, pid, boot_id, holder, lease_until_ms"
         " FROM ah_ledger_claims WHERE key = ?1"},
        {offsetof(sql_conn, claim_put),
         "INSERT OR REPLACE INTO ah_ledger_claims"
         " (key, fingerprint, pid, boot_id, holder, claimed_ms, lease_until_ms)"
         " VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)"},
        {offsetof(sql_conn, claim_drop),
         "DELETE FROM ah_ledger_claims WHERE key = ?1 AND pid = ?2 AND holder = ?3"},
        {offsetof(sql_conn, claim_count), "SELECT count(*) FROM ah_ledger_claims"},
        {offsetof(sql_conn, claim_mine),
         "DELETE FROM ah_ledger_claims WHERE pid = ?1 AND holder = ?2"},
    };
    for (size_t i = 0; i < sizeof stmts / sizeof stmts[0]; i++) {
        sqlite3_stmt **slot = (sqlite3_stmt **)((char *)c + stmts[i].off);
        if (sqlite3_prepare_v2(db, stmts[i].sql, -1, slot, NULL) != SQLITE_OK) {
            ah__bufprintf(err, errsize, "'%s' is not a usable ledger: %s", path,
                          sqlite3_errmsg(db));
            goto fail;
        }
    }
    return 0;
fail:
    if (c->db)
        conn_close(c);
    else
        sqlite3_close(db);
    return -1;
}

ah_status ah_ledger_open(const char *path, ah_ledger **out, char *err, size_t errsize)
{
    char dummy[1];
    sql_ledger *s = NULL;
    if (!err || errsize == 0) {
        err = dummy;
        errsize = sizeof dummy;
    }
    err[0] = '\0';
    if (!out) {
        ah__bufprintf(err, errsize, "ah_ledger_open: out is NULL");
        return AH_ERR_INVALID;
    }
    *out = NULL;
    if (!path || !*path) {
        ah__bufprintf(err, errsize, "ledger path is empty");
        return AH_ERR_INVALID;
    }
    s = calloc(1, sizeof *s);
    if (!s || !(s->path = ah__strdup(path))) {
        free(s);
        ah__bufprintf(err, errsize, "out of memory opening ledger '%s'", path);
        return AH_ERR_NOMEM;
    }
    ah__ledger_init(&s->base, &sql_ops);
    s->rd.el = &s->base;
    if (conn_open(&s->rd, path, err, errsize) != 0) {
        free(s->path);
        free(s);
        return AH_ERR_IO;
    }
    s->pid = (int64_t)getpid();
    s->holder = new_nonce(s);
    read_host_id(s);
    *out = &s->base;
    return AH_OK;
}

/* Give the handle its writer: a second connection, an async handle on loop and the
 * thread. Loop thread; before any claim is in flight. */
static ah_status sql_set_loop(ah_ledger *l, ah_loop *loop)
{
    sql_ledger *s = (sql_ledger *)l;
    if (s->loop)
        return s->loop == loop ? AH_OK : AH_ERR_STATE;
    if (l->nwaiters) {
        ah__ledger_seterr(l, "ledger: set the loop before claiming keys");
        return AH_ERR_STATE;
    }
    char err[AH__LEDGER_ERR_MAX];
    ah__ledger_init(&s->werr, &sql_ops);
    s->wr.el = &s->werr;
    if (conn_open(&s->wr, s->path, err, sizeof err) != 0) {
        ah__ledger_seterr(l, "%s", err);
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
        conn_close(&s->wr);
        ah__ledger_seterr(l, "ledger: cannot start the writer thread: %s", strerror(rc));
        return AH_ERR_INTERNAL;
    }
    s->started = 1;
    s->loop = loop;
    l->ops = &sql_async_ops;
    return AH_OK;
nomem:
    ah_async_free(s->wake);
    s->wake = NULL;
    conn_close(&s->wr);
    ah__ledger_seterr(l, "out of memory starting the ledger writer");
    return AH_ERR_NOMEM;
}

void ah__ledger_sqlite_hold(ah_ledger *l, void (*fn)(void *ud), void *ud)
{
    if (l && (l->ops == &sql_ops || l->ops == &sql_async_ops)) {
        ((sql_ledger *)l)->hold = fn;
        ((sql_ledger *)l)->hold_ud = ud;
    }
}
