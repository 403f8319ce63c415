/* ledger_sqlite.h - what the SQLite ledger's two files share (never installed):
 * ledger_sqlite.c (the connection work: schema, transactions, the backend ops) and
 * ledger_sqlite_writer.c (the writer thread a loop gives it, its queues and the answers
 * it hands back on the loop thread). The invariants are in ledger_sqlite.c's opening
 * comment. */
#ifndef AH_LEDGER_SQLITE_H
#define AH_LEDGER_SQLITE_H

#include "ledger_internal.h"

#include "agenthost/loop.h" /* the writer answers through an ah_async and an ah_timer */

#include <pthread.h>
#include <sqlite3.h>
#include <stddef.h>
#include <stdint.h>

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
    int held;             /* loop thread: holds an ah_loop_ref until its answer is in */
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

/* ledger_sqlite.c: the work on one connection (any thread; the writer's own never logs).
 * claim_on / complete_on: ONE transaction each, answer in out (complete_on: entry
 * strings are c's scratch); drop_mine: drop this handle's claim on key (1 = done). */
ah_ledger_answer ah__sqlite_claim_on(sql_ledger *s, sql_conn *c, const char *key,
                                     const char *fp, int64_t now_ms, int64_t lease_ms,
                                     ah_ledger_result *out);
ah_ledger_answer ah__sqlite_complete_on(sql_ledger *s, sql_conn *c, const char *key,
                                        const char *fp, const char *receipt,
                                        int64_t now_ms, ah_ledger_result *out);
int ah__sqlite_drop_mine(const sql_ledger *s, sql_conn *c, const char *key);
void ah__sqlite_log_takeover(const char *key);
/* Open path on c (schema checked, durability set, statements prepared): 0, or -1 with
 * err set and c closed. Close: finalize, close, free scratch; c zeroed. */
int ah__sqlite_conn_open(sql_conn *c, const char *path, char *err, size_t errsize);
void ah__sqlite_conn_close(sql_conn *c);

/* ledger_sqlite_writer.c, loop thread. start: the writer's connection, async handle and
 * thread (AH_OK; AH_ERR_IO / _NOMEM / _INTERNAL with s->base.err set). stop: let the
 * writer finish its queue, join it, free every job without calling back; a no-op
 * without a writer. submit: queue a job (1; 0 with err set when out of memory).
 * wake_busy: deliver now the BUSY answers held for key. cancel: the ops' cancel. */
ah_status ah__sqlite_writer_start(sql_ledger *s, ah_loop *loop);
void ah__sqlite_writer_stop(sql_ledger *s);
int ah__sqlite_submit(sql_ledger *s, job_kind kind, const char *key, const char *fp,
                      const char *receipt, int64_t now_ms, ah_ledger_fn cb, void *ud);
void ah__sqlite_wake_busy(sql_ledger *s, const char *key);
void ah__sqlite_cancel(ah_ledger *l, void *ud);

#endif
