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
 * carry a callback go to a writer thread with a connection of its own
 * (ledger_sqlite_writer.c), answered on the loop thread after the commit. Reads (lookup,
 * count, foreach) stay on the caller's connection: in WAL mode a reader does not wait
 * for the writer's commit. Nothing here logs when it runs on the writer's connection
 * (its errors go to c->el, a sink of the writer's own).
 */
#include "ledger_sqlite.h"

#include <errno.h>
#include <inttypes.h>
#include <signal.h>
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
 * under heavy contention on a loaded machine (the Redis ledger waits as long for its
 * receipts). A claim does not wait this long: a busy lock answers BUSY and the caller
 * asks again from its loop. */
#define LEDGER_PATIENCE_MS AH__LEDGER_PATIENCE_MS
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

/* The message says what went wrong; the caller, which knows what it was doing, says that
 * ("ledger claim failed: SQLite: database is locked"). */
static ah_status sql_fail(sql_conn *c)
{
    int rc = sqlite3_errcode(c->db);
    ah__ledger_seterr(c->el, "SQLite: %s", sqlite3_errmsg(c->db));
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
        st = sql_fail(c);
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
static int sql_begin(sql_conn *c, int patient)
{
    int rc = patient ? exec_patient(c->db, "BEGIN IMMEDIATE")
                     : sqlite3_exec(c->db, "BEGIN IMMEDIATE", NULL, NULL, NULL);
    if (rc == SQLITE_OK)
        return 1;
    sql_fail(c);
    return !patient && is_busy(rc) ? -1 : 0;
}

static int sql_commit(sql_conn *c)
{
    /* With synchronous=FULL, COMMIT returns after the WAL is fsynced: durable. */
    if (sqlite3_exec(c->db, "COMMIT", NULL, NULL, NULL) == SQLITE_OK)
        return 1;
    sql_fail(c);
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
int ah__sqlite_drop_mine(const sql_ledger *s, sql_conn *c, const char *key)
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
    int begun = sql_begin(c, 0);
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
        sql_fail(c);
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
        sql_fail(c);
        goto fail;
    }
    if (!sql_commit(c))
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
ah_ledger_answer ah__sqlite_claim_on(sql_ledger *s, sql_conn *c, const char *key,
                                     const char *fp, int64_t now_ms, int64_t lease_ms,
                                     ah_ledger_result *out)
{
    sqlite3_exec(c->db, "PRAGMA synchronous=NORMAL", NULL, NULL, NULL);
    ah_ledger_answer a = claim_tx(s, c, key, fp, now_ms, lease_ms, out);
    if (sqlite3_exec(c->db, "PRAGMA synchronous=FULL", NULL, NULL, NULL) != SQLITE_OK) {
        /* Never leave the connection recording receipts without the fsync. */
        sql_fail(c);
        if (a == AH_LEDGER_OWNED)
            ah__sqlite_drop_mine(s, c, key);
        out->reclaimed = 0;
        return out->answer = AH_LEDGER_FAILED;
    }
    return a;
}

/* One IMMEDIATE transaction: check, insert, drop our claim, commit. The write lock
 * serialises recorders across processes, so a key recorded by someone else is seen here
 * and costs no seq (an INSERT that hits the UNIQUE constraint would still burn an
 * AUTOINCREMENT value). On DONE, out->entry's strings are c's scratch. */
ah_ledger_answer ah__sqlite_complete_on(sql_ledger *s, sql_conn *c, const char *key,
                                        const char *fp, const char *receipt,
                                        int64_t now_ms, ah_ledger_result *out)
{
    ah_ledger_entry e;
    const char *stored = NULL;
    if (sql_begin(c, 1) != 1)
        return out->answer = AH_LEDGER_FAILED;
    ah_status st = conn_find(c, key, &e, &stored);
    if (st != AH_OK && st != AH_ERR_NOT_FOUND)
        goto fail;
    if (!ah__sqlite_drop_mine(s, c, key)) {
        sql_fail(c);
        goto fail;
    }
    if (st == AH_OK) {
        ah_ledger_answer a = ah__ledger_entry_answer(c->el, key, fp, stored, &e, out);
        if (!sql_commit(c))
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
        sql_fail(c);
        goto fail;
    }
    int64_t seq = sqlite3_last_insert_rowid(c->db);
    if (s->hold)
        s->hold(s->hold_ud);
    if (!sql_commit(c))
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

void ah__sqlite_log_takeover(const char *key)
{
    ah__log(AH_LOG_WARN,
            "ledger: took over the claim on key '%.80s' (its holder died "
            "or its lease ran out)",
            key);
}

/* ---- the backend operations -------------------------------------------------------- */

static ah_ledger_answer sql_claim(ah_ledger *l, const char *key, const char *fp,
                                  int64_t now_ms, ah_ledger_result *out, ah_ledger_fn cb,
                                  void *ud)
{
    sql_ledger *s = (sql_ledger *)l;
    if (s->loop && cb)
        return out->answer = ah__sqlite_submit(s, JOB_CLAIM, key, fp, NULL, now_ms, cb, ud)
                                 ? AH_LEDGER_PENDING
                                 : AH_LEDGER_FAILED;
    ah_ledger_answer a = ah__sqlite_claim_on(s, &s->rd, key, fp, now_ms, l->lease_ms, out);
    if (a == AH_LEDGER_OWNED && out->reclaimed)
        ah__sqlite_log_takeover(key);
    return a;
}

static ah_ledger_answer sql_complete(ah_ledger *l, const char *key, const char *fp,
                                     const char *receipt, int64_t now_ms,
                                     ah_ledger_result *out, ah_ledger_fn cb, void *ud)
{
    sql_ledger *s = (sql_ledger *)l;
    if (s->loop && cb)
        return out->answer = ah__sqlite_submit(s, JOB_COMPLETE, key, fp, receipt, now_ms, cb, ud)
                                 ? AH_LEDGER_PENDING
                                 : AH_LEDGER_FAILED;
    ah_ledger_answer a = ah__sqlite_complete_on(s, &s->rd, key, fp, receipt, now_ms, out);
    if (s->loop) {
        /* Answered inline (no callback), on a handle with a writer: its held BUSY
         * answers are woken here (the front end wakes only its own waiters). */
        ah_ledger_result keep = *out;
        ah__sqlite_wake_busy(s, key);
        *out = keep;
    }
    return a;
}

static void sql_abandon(ah_ledger *l, const char *key)
{
    sql_ledger *s = (sql_ledger *)l;
    if (s->loop) {
        if (!ah__sqlite_submit(s, JOB_ABANDON, key, NULL, NULL, 0, NULL, NULL))
            ah__log(AH_LOG_WARN, "ledger: cannot release the claim on key '%.80s': out of "
                                 "memory (it ends with its lease)", key);
        return;
    }
    if (!ah__sqlite_drop_mine(s, &s->rd, key))
        ah__log(AH_LOG_WARN, "ledger: cannot release the claim on key '%.80s': %s "
                             "(it ends with its lease)", key, sqlite3_errmsg(s->rd.db));
}


static ah_status sql_count_q(sql_conn *c, sqlite3_stmt *q, int64_t *n)
{
    ah_status st = AH_OK;
    if (sqlite3_step(q) != SQLITE_ROW)
        st = sql_fail(c);
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
        st = sql_fail(c);
    sqlite3_reset(c->all);
    return st;
}

void ah__sqlite_conn_close(sql_conn *c)
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
    ah__sqlite_writer_stop(s); /* first: it writes what it was handed */
    /* A clean close frees this handle's keys now rather than at lease expiry. */
    if (s->rd.claim_mine) {
        sqlite3_bind_int64(s->rd.claim_mine, 1, s->pid);
        sqlite3_bind_int64(s->rd.claim_mine, 2, s->holder);
        if (sqlite3_step(s->rd.claim_mine) != SQLITE_DONE)
            ah__log(AH_LOG_WARN, "ledger: close: cannot release claims: %s",
                    sqlite3_errmsg(s->rd.db));
        sql_reset(s->rd.claim_mine);
    }
    ah__sqlite_conn_close(&s->rd);
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
    "sqlite", sql_claim, sql_complete, sql_abandon, ah__sqlite_cancel,
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
int ah__sqlite_conn_open(sql_conn *c, const char *path, char *err, size_t errsize)
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
        ah__sqlite_conn_close(c);
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
    if (ah__sqlite_conn_open(&s->rd, path, err, errsize) != 0) {
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
    ah_status st = ah__sqlite_writer_start(s, loop);
    if (st == AH_OK)
        l->ops = &sql_async_ops;
    return st;
}

void ah__ledger_sqlite_hold(ah_ledger *l, void (*fn)(void *ud), void *ud)
{
    if (l && (l->ops == &sql_ops || l->ops == &sql_async_ops)) {
        ((sql_ledger *)l)->hold = fn;
        ((sql_ledger *)l)->hold_ud = ud;
    }
}
