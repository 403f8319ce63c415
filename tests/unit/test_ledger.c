/* test_ledger.c - the idempotency ledger, memory and SQLite backends alike: record and
 * lookup, a repeat returns the original, a reused key with other arguments is refused,
 * seq is monotonic, entries come back in order; SQLite only: reopen keeps entries, a
 * process SIGKILLed right after record() returned loses nothing (and re-running its keys
 * runs no body), two handles on one file agree, and bad paths / foreign files are
 * refused with clear messages. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <sqlite3.h>

#include "agenthost.h"

typedef struct fixture {
    ah_ledger *l;
    int sqlite;
    char dir[256];
    char path[300];
} fixture;

/* ---- temp dir helpers ------------------------------------------------------------ */

static void make_tmpdir(fixture *f)
{
    const char *base = getenv("TMPDIR");
    snprintf(f->dir, sizeof f->dir, "%s/ah-ledger-XXXXXX", base && *base ? base : "/tmp");
    assert_non_null(mkdtemp(f->dir));
    snprintf(f->path, sizeof f->path, "%s/effects.db", f->dir);
}

static void tmp_path(const fixture *f, const char *name, char *out, size_t size)
{
    snprintf(out, size, "%s/%s", f->dir, name);
}

/* Remove every file of the temp dir (db, -wal, -shm, fixtures) and the dir itself. */
static void remove_tmpdir(fixture *f)
{
    static const char *const names[] = {
        "effects.db",        "effects.db-wal", "effects.db-shm", "effects.db-journal",
        "kill.db",           "kill.db-wal",    "kill.db-shm",    "kill.db-journal",
        "text.db",           "foreign.db",     "foreign.db-wal", "foreign.db-shm",
        "foreign.db-journal"};
    char p[400];
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        tmp_path(f, names[i], p, sizeof p);
        unlink(p);
    }
    tmp_path(f, "adir", p, sizeof p);
    rmdir(p);
    rmdir(f->dir);
}

static int setup_memory(void **state)
{
    fixture *f = calloc(1, sizeof *f);
    if (!f)
        return -1;
    f->l = ah_ledger_new_memory();
    *state = f;
    return f->l ? 0 : -1;
}

static int setup_sqlite(void **state)
{
    char err[512];
    fixture *f = calloc(1, sizeof *f);
    if (!f)
        return -1;
    *state = f;
    make_tmpdir(f);
    f->sqlite = 1;
    ah_ledger_open(f->path, &f->l, err, sizeof err);
    if (!f->l)
        print_error("open: %s\n", err);
    return f->l ? 0 : -1;
}

static int teardown(void **state)
{
    fixture *f = *state;
    ah_ledger_free(f->l);
    if (f->sqlite)
        remove_tmpdir(f);
    free(f);
    return 0;
}

/* ---- both backends --------------------------------------------------------------- */

static void record_then_lookup(void **state)
{
    fixture *f = *state;
    int64_t seq = -1;
    int dup = -1;
    ah_ledger_entry e;

    assert_string_equal(ah_ledger_backend(f->l), f->sqlite ? "sqlite" : "memory");
    assert_int_equal(ah_ledger_lookup(f->l, "A-1", "{\"amount\":1500}", &e),
                     AH_ERR_NOT_FOUND);
    assert_int_equal(ah_ledger_record(f->l, "A-1", "{\"amount\":1500}",
                                      "{\"id\":\"ch_1\"}", &seq, &dup),
                     AH_OK);
    assert_int_equal(seq, 1);
    assert_int_equal(dup, 0);
    assert_int_equal(ah_ledger_lookup(f->l, "A-1", "{\"amount\":1500}", &e), AH_OK);
    assert_string_equal(e.key, "A-1");
    assert_string_equal(e.receipt, "{\"id\":\"ch_1\"}");
    assert_int_equal(e.seq, 1);
    assert_int_equal(ah_ledger_lookup(f->l, "A-2", "{\"amount\":1500}", &e),
                     AH_ERR_NOT_FOUND);
    assert_int_equal(ah_ledger_count(f->l), 1);
}

static void repeat_returns_original(void **state)
{
    fixture *f = *state;
    int64_t seq = 0;
    int dup = 0;
    ah_ledger_entry e;

    assert_int_equal(ah_ledger_record(f->l, "B-0", "{}", "\"first b\"", &seq, &dup),
                     AH_OK);
    assert_int_equal(ah_ledger_record(f->l, "A-1", "{\"n\":1}", "\"first\"", &seq, &dup),
                     AH_OK);
    assert_int_equal(seq, 2);
    assert_int_equal(dup, 0);
    /* The same key and arguments again, with another receipt: nothing is overwritten. */
    assert_int_equal(ah_ledger_record(f->l, "A-1", "{\"n\":1}", "\"second\"", &seq, &dup),
                     AH_OK);
    assert_int_equal(seq, 2);
    assert_int_equal(dup, 1);
    assert_int_equal(ah_ledger_lookup(f->l, "A-1", "{\"n\":1}", &e), AH_OK);
    assert_string_equal(e.receipt, "\"first\"");
    assert_int_equal(e.seq, 2);
    assert_int_equal(ah_ledger_count(f->l), 2);
    /* Output pointers are optional. */
    assert_int_equal(ah_ledger_record(f->l, "A-1", "{\"n\":1}", "x", NULL, NULL), AH_OK);
    assert_int_equal(ah_ledger_count(f->l), 2);
}

static void same_key_different_args_is_refused(void **state)
{
    fixture *f = *state;
    int64_t seq = 0;
    int dup = 0;
    ah_ledger_entry e;

    assert_int_equal(
        ah_ledger_record(f->l, "A-1", "{\"amount\":1500}", "\"r\"", &seq, &dup), AH_OK);
    assert_int_equal(ah_ledger_lookup(f->l, "A-1", "{\"amount\":1600}", &e),
                     AH_ERR_STATE);
    assert_non_null(strstr(ah_ledger_errmsg(f->l),
                           "idempotency key 'A-1' reused with different arguments"));
    seq = 99;
    assert_int_equal(
        ah_ledger_record(f->l, "A-1", "{\"amount\":1600}", "\"other\"", &seq, &dup),
        AH_ERR_STATE);
    assert_non_null(strstr(ah_ledger_errmsg(f->l), "reused with different arguments"));
    assert_int_equal(ah_ledger_count(f->l), 1);
    /* The original is intact and the error is not sticky. */
    assert_int_equal(ah_ledger_lookup(f->l, "A-1", "{\"amount\":1500}", &e), AH_OK);
    assert_string_equal(e.receipt, "\"r\"");
    assert_string_equal(ah_ledger_errmsg(f->l), "");
}

static void long_key_is_shortened_in_message(void **state)
{
    fixture *f = *state;
    char key[600];
    ah_ledger_entry e;
    memset(key, 'k', sizeof key - 1);
    key[sizeof key - 1] = '\0';
    assert_int_equal(ah_ledger_record(f->l, key, "1", "r", NULL, NULL), AH_OK);
    assert_int_equal(ah_ledger_lookup(f->l, key, "2", &e), AH_ERR_STATE);
    const char *msg = ah_ledger_errmsg(f->l);
    assert_non_null(strstr(msg, "...' reused with different arguments"));
    assert_true(strlen(msg) < 200);
    /* The full key still works. */
    assert_int_equal(ah_ledger_lookup(f->l, key, "1", &e), AH_OK);
    assert_string_equal(e.key, key);
}

static void null_args_are_the_empty_string(void **state)
{
    fixture *f = *state;
    ah_ledger_entry e;
    assert_int_equal(ah_ledger_record(f->l, "k", NULL, "r", NULL, NULL), AH_OK);
    assert_int_equal(ah_ledger_lookup(f->l, "k", "", &e), AH_OK);
    assert_int_equal(ah_ledger_lookup(f->l, "k", "{}", &e), AH_ERR_STATE);
}

static void invalid_arguments(void **state)
{
    fixture *f = *state;
    ah_ledger_entry e;
    assert_int_equal(ah_ledger_record(f->l, NULL, "{}", "r", NULL, NULL), AH_ERR_INVALID);
    assert_int_equal(ah_ledger_record(f->l, "k", "{}", NULL, NULL, NULL), AH_ERR_INVALID);
    assert_int_equal(ah_ledger_record(NULL, "k", "{}", "r", NULL, NULL), AH_ERR_INVALID);
    assert_int_equal(ah_ledger_lookup(f->l, NULL, "{}", &e), AH_ERR_INVALID);
    assert_int_equal(ah_ledger_lookup(f->l, "k", "{}", NULL), AH_ERR_INVALID);
    assert_int_equal(ah_ledger_foreach(f->l, NULL, NULL), AH_ERR_INVALID);
    assert_int_equal(ah_ledger_count(NULL), -1);
    assert_int_equal(ah_ledger_count(f->l), 0);
    ah_ledger_free(NULL);
}

typedef struct collected {
    int n, stop_after;
    char keys[64][16];
    char receipts[64][32];
    int64_t seqs[64];
} collected;

static int collect(void *ud, const ah_ledger_entry *e)
{
    collected *c = ud;
    if (c->n < 64) {
        snprintf(c->keys[c->n], sizeof c->keys[0], "%s", e->key);
        snprintf(c->receipts[c->n], sizeof c->receipts[0], "%s", e->receipt);
        c->seqs[c->n] = e->seq;
    }
    c->n++;
    return c->stop_after && c->n >= c->stop_after;
}

/* Keys recorded in a scrambled order, with repeats mixed in: seq follows insertion,
 * repeats take no seq, and entries() lists insertion order. */
static void seq_is_monotonic_and_entries_in_order(void **state)
{
    fixture *f = *state;
    char key[16], receipt[32];
    int order[40];
    int64_t last = 0;
    for (int i = 0; i < 40; i++)
        order[i] = (i * 17) % 40; /* a permutation of 0..39 */
    for (int i = 0; i < 40; i++) {
        int64_t seq = 0;
        int dup = 0;
        snprintf(key, sizeof key, "key-%02d", order[i]);
        snprintf(receipt, sizeof receipt, "{\"n\":%d}", order[i]);
        assert_int_equal(ah_ledger_record(f->l, key, "{}", receipt, &seq, &dup), AH_OK);
        assert_int_equal(dup, 0);
        assert_true(seq > last);
        last = seq;
        if (i % 5 == 4) { /* repeat an earlier key: no new seq */
            snprintf(key, sizeof key, "key-%02d", order[i - 3]);
            assert_int_equal(ah_ledger_record(f->l, key, "{}", "x", &seq, &dup), AH_OK);
            assert_int_equal(dup, 1);
            assert_true(seq < last);
        }
    }
    assert_int_equal(ah_ledger_count(f->l), 40);

    collected c;
    memset(&c, 0, sizeof c);
    assert_int_equal(ah_ledger_foreach(f->l, collect, &c), AH_OK);
    assert_int_equal(c.n, 40);
    for (int i = 0; i < 40; i++) {
        snprintf(key, sizeof key, "key-%02d", order[i]);
        snprintf(receipt, sizeof receipt, "{\"n\":%d}", order[i]);
        assert_string_equal(c.keys[i], key);
        assert_string_equal(c.receipts[i], receipt);
        assert_int_equal(c.seqs[i], i + 1);
    }

    memset(&c, 0, sizeof c);
    c.stop_after = 3;
    assert_int_equal(ah_ledger_foreach(f->l, collect, &c), AH_OK);
    assert_int_equal(c.n, 3);
    /* The ledger is usable after an early stop. */
    assert_int_equal(ah_ledger_count(f->l), 40);
}

/* Enough keys to grow the memory backend's index several times. */
static void many_keys_all_found(void **state)
{
    fixture *f = *state;
    char key[32], receipt[32];
    ah_ledger_entry e;
    int n = f->sqlite ? 300 : 3000; /* SQLite: one fsync per record, by design */
    for (int i = 0; i < n; i++) {
        snprintf(key, sizeof key, "order/%d", i);
        snprintf(receipt, sizeof receipt, "r%d", i * 7);
        assert_int_equal(ah_ledger_record(f->l, key, key, receipt, NULL, NULL), AH_OK);
    }
    for (int i = n - 1; i >= 0; i--) {
        snprintf(key, sizeof key, "order/%d", i);
        snprintf(receipt, sizeof receipt, "r%d", i * 7);
        assert_int_equal(ah_ledger_lookup(f->l, key, key, &e), AH_OK);
        assert_string_equal(e.receipt, receipt);
        assert_int_equal(e.seq, i + 1);
    }
    assert_int_equal(ah_ledger_lookup(f->l, "order/x", "order/x", &e), AH_ERR_NOT_FOUND);
}

typedef struct fake_wall {
    int64_t wall;
} fake_wall;

static int64_t fake_wall_ms(void *ud)
{
    return ((fake_wall *)ud)->wall;
}

static void created_time_comes_from_the_clock(void **state)
{
    fixture *f = *state;
    fake_wall w = {1700000000123};
    ah_clock clk = {fake_wall_ms, fake_wall_ms, &w};
    ah_ledger_entry e;
    ah_ledger_set_clock(f->l, &clk);
    assert_int_equal(ah_ledger_record(f->l, "a", "", "r", NULL, NULL), AH_OK);
    w.wall += 4567;
    assert_int_equal(ah_ledger_record(f->l, "b", "", "r", NULL, NULL), AH_OK);
    assert_int_equal(ah_ledger_lookup(f->l, "a", "", &e), AH_OK);
    assert_int_equal(e.created_ms, 1700000000123);
    assert_int_equal(ah_ledger_lookup(f->l, "b", "", &e), AH_OK);
    assert_int_equal(e.created_ms, 1700000000123 + 4567);
    /* Back to the real clock: a plausible "now" (after 2020). */
    ah_ledger_set_clock(f->l, NULL);
    assert_int_equal(ah_ledger_record(f->l, "c", "", "r", NULL, NULL), AH_OK);
    assert_int_equal(ah_ledger_lookup(f->l, "c", "", &e), AH_OK);
    assert_true(e.created_ms > 1577836800000);
}

static void fingerprint_is_fnv1a64(void **state)
{
    (void)state;
    char a[AH_LEDGER_FINGERPRINT_SIZE], b[AH_LEDGER_FINGERPRINT_SIZE];
    /* Published FNV-1a 64 vectors: "" is the offset basis; "a" and "foobar". */
    ah_ledger_fingerprint("", a);
    assert_string_equal(a, "fnv1a64:cbf29ce484222325");
    ah_ledger_fingerprint(NULL, b);
    assert_string_equal(a, b);
    ah_ledger_fingerprint("a", a);
    assert_string_equal(a, "fnv1a64:af63dc4c8601ec8c");
    ah_ledger_fingerprint("foobar", a);
    assert_string_equal(a, "fnv1a64:85944171f73967e8");
    /* Any one-byte change of a same-length string changes it. */
    ah_ledger_fingerprint("{\"amount\":1500}", a);
    ah_ledger_fingerprint("{\"amount\":1501}", b);
    assert_string_not_equal(a, b);
}

/* ---- SQLite only ------------------------------------------------------------------- */

static void reopen_keeps_entries(void **state)
{
    fixture *f = *state;
    char err[512];
    ah_ledger_entry e;
    int64_t seq = 0;
    int dup = 0;
    assert_int_equal(ah_ledger_record(f->l, "A-1", "{\"a\":1}", "{\"id\":1}", NULL, NULL),
                     AH_OK);
    assert_int_equal(ah_ledger_record(f->l, "A-2", "{\"a\":2}", "{\"id\":2}", NULL, NULL),
                     AH_OK);
    ah_ledger_free(f->l);
    ah_ledger_open(f->path, &f->l, err, sizeof err);
    assert_non_null(f->l);
    assert_int_equal(ah_ledger_count(f->l), 2);
    assert_int_equal(ah_ledger_lookup(f->l, "A-2", "{\"a\":2}", &e), AH_OK);
    assert_string_equal(e.receipt, "{\"id\":2}");
    assert_int_equal(e.seq, 2);
    assert_int_equal(ah_ledger_lookup(f->l, "A-1", "{\"a\":9}", &e), AH_ERR_STATE);
    /* seq goes on from where it was, and a repeat is still a repeat. */
    assert_int_equal(ah_ledger_record(f->l, "A-3", "{}", "{}", &seq, &dup), AH_OK);
    assert_int_equal(seq, 3);
    assert_int_equal(ah_ledger_record(f->l, "A-1", "{\"a\":1}", "{}", &seq, &dup), AH_OK);
    assert_int_equal(seq, 1);
    assert_int_equal(dup, 1);
}

static void file_is_in_wal_mode(void **state)
{
    fixture *f = *state;
    sqlite3 *db = NULL;
    sqlite3_stmt *q = NULL;
    assert_int_equal(sqlite3_open_v2(f->path, &db, SQLITE_OPEN_READONLY, NULL),
                     SQLITE_OK);
    assert_int_equal(sqlite3_prepare_v2(db, "PRAGMA journal_mode", -1, &q, NULL),
                     SQLITE_OK);
    assert_int_equal(sqlite3_step(q), SQLITE_ROW);
    assert_string_equal((const char *)sqlite3_column_text(q, 0), "wal");
    sqlite3_finalize(q);
    sqlite3_close(db);
}

/* Two handles on one file (as two processes would have): each sees the other's
 * commits, and the second recorder of a key gets the first one's entry. */
static void two_handles_agree(void **state)
{
    fixture *f = *state;
    char err[512];
    ah_ledger_entry e;
    int64_t seq = 0;
    int dup = 0;
    ah_ledger *other = NULL;
    ah_ledger_open(f->path, &other, err, sizeof err);
    assert_non_null(other);
    assert_int_equal(ah_ledger_record(f->l, "A-1", "{}", "\"from one\"", &seq, &dup),
                     AH_OK);
    assert_int_equal(ah_ledger_lookup(other, "A-1", "{}", &e), AH_OK);
    assert_string_equal(e.receipt, "\"from one\"");
    assert_int_equal(ah_ledger_record(other, "A-1", "{}", "\"from two\"", &seq, &dup),
                     AH_OK);
    assert_int_equal(dup, 1);
    assert_int_equal(seq, 1);
    assert_int_equal(ah_ledger_record(other, "A-2", "{}", "\"two\"", &seq, &dup), AH_OK);
    assert_int_equal(seq, 2);
    assert_int_equal(ah_ledger_lookup(f->l, "A-2", "{}", &e), AH_OK);
    assert_int_equal(e.seq, 2);
    ah_ledger_free(other);
    assert_int_equal(ah_ledger_count(f->l), 2);
}

static void write_byte(int fd)
{
    char b = 'r';
    while (write(fd, &b, 1) < 0 && errno == EINTR)
        ;
}

static int count_bytes_until_eof(int fd)
{
    char buf[256];
    int n = 0;
    for (;;) {
        ssize_t r = read(fd, buf, sizeof buf);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            return n;
        n += (int)r;
    }
}

enum { KILL_N = 25 };

static void kill_key(int i, char *key, size_t size, char *args, size_t asize)
{
    snprintf(key, size, "charge-%d", i);
    snprintf(args, asize, "{\"amount\":%d}", 100 + i);
}

/* The child: record KILL_N effects, acknowledge each one on the pipe after record()
 * returned, then wait to be SIGKILLed by the parent (which does it the moment it reads
 * the last acknowledgement): no close, no checkpoint, no atexit. */
static void kill_child_records_then_dies(const char *path, int ack_fd)
{
    char err[512], key[32], args[48], receipt[48];
    ah_ledger *l = NULL;
    ah_ledger_open(path, &l, err, sizeof err);
    if (!l)
        _exit(2);
    for (int i = 0; i < KILL_N; i++) {
        kill_key(i, key, sizeof key, args, sizeof args);
        snprintf(receipt, sizeof receipt, "{\"charge\":\"ch_%d\"}", i);
        if (ah_ledger_record(l, key, args, receipt, NULL, NULL) != AH_OK)
            _exit(3);
        write_byte(ack_fd);
    }
    for (;;)
        pause();
}

typedef struct body_counter {
    int runs;
} body_counter;

static void counting_body(void *ud, ah_tool_call *call)
{
    ((body_counter *)ud)->runs++;
    ah_tool_call_body_ok(call, "\"ran again\"");
}

static void killed_after_record_loses_nothing(void **state)
{
    fixture *f = *state;
    char path[400], err[512], key[32], args[48], receipt[48];
    int fds[2];
    int status = 0;
    tmp_path(f, "kill.db", path, sizeof path);
    assert_int_equal(pipe(fds), 0);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        close(fds[0]);
        kill_child_records_then_dies(path, fds[1]);
    }
    close(fds[1]);
    char buf[1];
    int acked = 0;
    while (acked < KILL_N && read(fds[0], buf, 1) == 1)
        acked++;
    kill(pid, SIGKILL); /* right after the last record() returned */
    close(fds[0]);
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFSIGNALED(status));
    assert_int_equal(WTERMSIG(status), SIGKILL);
    assert_int_equal(acked, KILL_N);

    ah_ledger *l = NULL;
    ah_ledger_open(path, &l, err, sizeof err);
    assert_non_null(l);
    assert_int_equal(ah_ledger_count(l), KILL_N);

    /* "Re-run" every effect through the tool driver: no body runs, each call returns
     * the receipt the killed process recorded, with its seq, marked duplicate. */
    body_counter bc = {0};
    ah_tool_driver d = {0};
    d.body = counting_body;
    d.body_ud = &bc;
    for (int i = 0; i < KILL_N; i++) {
        kill_key(i, key, sizeof key, args, sizeof args);
        snprintf(receipt, sizeof receipt, "{\"charge\":\"ch_%d\"}", i);
        ah_tool_call *c = NULL;
        ah_tool_call_new(NULL, l, NULL, key, args, &c, NULL, 0);
        assert_non_null(c);
        assert_int_equal(ah_tool_call_run(c, &d), AH_TOOL_OK);
        assert_int_equal(ah_tool_call_duplicate(c), 1);
        assert_int_equal(ah_tool_call_seq(c), i + 1);
        assert_string_equal(ah_tool_call_receipt(c), receipt);
        assert_int_equal(ah_tool_call_attempts(c), 0);
        ah_tool_call_free(c);
    }
    assert_int_equal(bc.runs, 0);
    assert_int_equal(ah_ledger_count(l), KILL_N);
    ah_ledger_free(l);
}

/* The child records until it is killed at an arbitrary point; every effect it
 * acknowledged before the kill must be in the reopened ledger, with seqs 1..count. */
static void killed_mid_stream_keeps_every_acknowledged_entry(void **state)
{
    fixture *f = *state;
    char path[400], err[512], key[32], args[48];
    int fds[2];
    int status = 0;
    enum { WAIT_FOR = 12 };
    tmp_path(f, "kill.db", path, sizeof path);
    assert_int_equal(pipe(fds), 0);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        close(fds[0]);
        ah_ledger *l = NULL;
        ah_ledger_open(path, &l, err, sizeof err);
        if (!l)
            _exit(2);
        for (int i = 0;; i++) {
            kill_key(i, key, sizeof key, args, sizeof args);
            if (ah_ledger_record(l, key, args, "{}", NULL, NULL) != AH_OK)
                _exit(3);
            write_byte(fds[1]);
        }
    }
    close(fds[1]);
    char buf[1];
    int acked = 0;
    while (acked < WAIT_FOR && read(fds[0], buf, 1) == 1)
        acked++;
    assert_int_equal(kill(pid, SIGKILL), 0);
    acked += count_bytes_until_eof(fds[0]); /* acks written before the kill landed */
    close(fds[0]);
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFSIGNALED(status));

    ah_ledger *l = NULL;
    ah_ledger_open(path, &l, err, sizeof err);
    assert_non_null(l);
    int64_t n = ah_ledger_count(l);
    assert_true(n >= acked);
    assert_true(acked >= WAIT_FOR);
    for (int i = 0; i < n; i++) {
        ah_ledger_entry e;
        kill_key(i, key, sizeof key, args, sizeof args);
        assert_int_equal(ah_ledger_lookup(l, key, args, &e), AH_OK);
        assert_int_equal(e.seq, i + 1);
    }
    ah_ledger_free(l);
}

static void open_errors_are_clear(void **state)
{
    fixture *f = *state;
    char err[512], p[400];
    FILE *fp;

    /* A directory that does not exist. */
    tmp_path(f, "no/such/dir/x.db", p, sizeof p);
    assert_int_not_equal(ah_ledger_open(p, &(ah_ledger *){NULL}, err, sizeof err), AH_OK);
    assert_non_null(strstr(err, "cannot open ledger"));
    assert_non_null(strstr(err, p));

    /* A directory where the file should be. */
    tmp_path(f, "adir", p, sizeof p);
    assert_int_equal(mkdir(p, 0700), 0);
    assert_int_not_equal(ah_ledger_open(p, &(ah_ledger *){NULL}, err, sizeof err), AH_OK);
    assert_non_null(strstr(err, p));
    assert_true(strlen(err) > strlen(p) + 10);

    /* A text file. */
    tmp_path(f, "text.db", p, sizeof p);
    fp = fopen(p, "w");
    assert_non_null(fp);
    for (int i = 0; i < 200; i++)
        fputs("this is not a database, only text\n", fp);
    fclose(fp);
    /* The constructor convention: a status saying what kind of failure, *out NULL. */
    ah_ledger *out = (ah_ledger *)&out;
    assert_int_equal(ah_ledger_open(p, &out, err, sizeof err), AH_ERR_IO);
    assert_null(out);
    assert_non_null(strstr(err, "is not a ledger: not an SQLite database"));

    /* Empty path, and no error buffer at all. */
    out = (ah_ledger *)&out;
    assert_int_equal(ah_ledger_open("", &out, err, sizeof err), AH_ERR_INVALID);
    assert_null(out);
    assert_non_null(strstr(err, "empty"));
    assert_int_equal(ah_ledger_open(p, NULL, err, sizeof err), AH_ERR_INVALID);
    assert_int_not_equal(ah_ledger_open(NULL, &(ah_ledger *){NULL}, NULL, 0), AH_OK);
    assert_int_not_equal(ah_ledger_open(p, &(ah_ledger *){NULL}, NULL, 0), AH_OK);
}

static int sql_exec_file(const char *path, const char *sql)
{
    sqlite3 *db = NULL;
    int rc = sqlite3_open(path, &db);
    if (rc == SQLITE_OK)
        rc = sqlite3_exec(db, sql, NULL, NULL, NULL);
    sqlite3_close(db);
    return rc;
}

static void foreign_database_is_refused_and_left_alone(void **state)
{
    fixture *f = *state;
    char err[512], p[400];
    sqlite3 *db = NULL;
    sqlite3_stmt *q = NULL;
    tmp_path(f, "foreign.db", p, sizeof p);
    assert_int_equal(sql_exec_file(p, "CREATE TABLE notes(body TEXT);"
                                      "INSERT INTO notes VALUES('keep me');"),
                     SQLITE_OK);
    assert_int_not_equal(ah_ledger_open(p, &(ah_ledger *){NULL}, err, sizeof err), AH_OK);
    assert_non_null(strstr(err, "is not a ledger: an SQLite database of another"));
    /* Not converted to WAL, not given our schema. */
    assert_int_equal(sqlite3_open(p, &db), SQLITE_OK);
    assert_int_equal(sqlite3_prepare_v2(db, "PRAGMA journal_mode", -1, &q, NULL),
                     SQLITE_OK);
    assert_int_equal(sqlite3_step(q), SQLITE_ROW);
    assert_string_equal((const char *)sqlite3_column_text(q, 0), "delete");
    sqlite3_finalize(q);
    assert_int_equal(
        sqlite3_prepare_v2(db, "SELECT count(*) FROM sqlite_master", -1, &q, NULL),
        SQLITE_OK);
    assert_int_equal(sqlite3_step(q), SQLITE_ROW);
    assert_int_equal(sqlite3_column_int(q, 0), 1);
    sqlite3_finalize(q);
    sqlite3_close(db);
}

static void newer_format_is_refused(void **state)
{
    fixture *f = *state;
    char err[512];
    ah_ledger_free(f->l);
    f->l = NULL;
    assert_int_equal(sql_exec_file(f->path, "PRAGMA user_version = 7;"), SQLITE_OK);
    assert_int_not_equal(ah_ledger_open(f->path, &(ah_ledger *){NULL}, err, sizeof err),
                         AH_OK);
    assert_non_null(strstr(err, "format version 7"));
}

/* ---- claim-then-execute ------------------------------------------------------------ */

typedef struct wakes {
    int n;
    ah_ledger_answer last;
} wakes;

static void on_wake(void *ud, const ah_ledger_result *r)
{
    wakes *w = ud;
    w->n++;
    w->last = r->answer;
}

/* The second claimer of a key in flight waits (BUSY, woken by the completion) and then
 * gets the original receipt; nobody but the first ever holds the key. */
static void claim_is_exclusive_and_completion_wakes(void **state)
{
    fixture *f = *state;
    ah_ledger_result r;
    wakes w = {0};
    assert_int_equal(ah_ledger_claim(f->l, "K", "{}", &r, NULL, NULL), AH_LEDGER_OWNED);
    assert_int_equal(r.reclaimed, 0);
    assert_int_equal(ah_ledger_claims(f->l), 1);
    assert_int_equal(ah_ledger_claim(f->l, "K", "{}", &r, on_wake, &w), AH_LEDGER_BUSY);
    assert_true(r.retry_ms > 0);
    assert_int_equal(w.n, 0); /* never from inside the call that registered it */
    assert_int_equal(ah_ledger_complete(f->l, "K", "{}", "\"r1\"", &r, NULL, NULL),
                     AH_LEDGER_DONE);
    assert_int_equal(r.duplicate, 0);
    assert_int_equal(r.entry.seq, 1);
    assert_int_equal(w.n, 1);
    assert_int_equal(w.last, AH_LEDGER_BUSY); /* "ask again" */
    assert_int_equal(ah_ledger_claims(f->l), 0);
    assert_int_equal(ah_ledger_claim(f->l, "K", "{}", &r, on_wake, &w), AH_LEDGER_DONE);
    assert_string_equal(r.entry.receipt, "\"r1\"");
    assert_int_equal(r.entry.seq, 1);
    assert_int_equal(ah_ledger_count(f->l), 1);
}

/* A released claim (the body failed, no effect) frees the key for the next caller. */
static void abandon_frees_the_key(void **state)
{
    fixture *f = *state;
    ah_ledger_result r;
    wakes w = {0}, gone = {0};
    assert_int_equal(ah_ledger_claim(f->l, "K", "{}", &r, NULL, NULL), AH_LEDGER_OWNED);
    assert_int_equal(ah_ledger_claim(f->l, "K", "{}", &r, on_wake, &w), AH_LEDGER_BUSY);
    assert_int_equal(ah_ledger_claim(f->l, "K", "{}", &r, on_wake, &gone),
                     AH_LEDGER_BUSY);
    ah_ledger_cancel(f->l, &gone); /* a waiter that went away is never called */
    ah_ledger_abandon(f->l, "K");
    assert_int_equal(w.n, 1);
    assert_int_equal(gone.n, 0);
    assert_int_equal(ah_ledger_claims(f->l), 0);
    assert_int_equal(ah_ledger_claim(f->l, "K", "{}", &r, NULL, NULL), AH_LEDGER_OWNED);
    ah_ledger_abandon(f->l, "K");
    ah_ledger_abandon(f->l, "never-claimed"); /* a no-op */
    assert_int_equal(ah_ledger_count(f->l), 0);
}

/* The same key with other arguments is refused while in flight and once recorded. */
static void claim_mismatch_in_flight_and_recorded(void **state)
{
    fixture *f = *state;
    ah_ledger_result r;
    assert_int_equal(ah_ledger_claim(f->l, "K", "{\"a\":1}", &r, NULL, NULL),
                     AH_LEDGER_OWNED);
    assert_int_equal(ah_ledger_claim(f->l, "K", "{\"a\":2}", &r, NULL, NULL),
                     AH_LEDGER_MISMATCH);
    assert_non_null(strstr(ah_ledger_errmsg(f->l), "'K' is in flight with different"));
    assert_int_equal(ah_ledger_complete(f->l, "K", "{\"a\":1}", "1", &r, NULL, NULL),
                     AH_LEDGER_DONE);
    assert_int_equal(ah_ledger_claim(f->l, "K", "{\"a\":2}", &r, NULL, NULL),
                     AH_LEDGER_MISMATCH);
    assert_non_null(strstr(ah_ledger_errmsg(f->l), "reused with different arguments"));
    assert_string_equal(ah_ledger_answer_name(AH_LEDGER_MISMATCH), "mismatch");
    assert_string_equal(ah_ledger_answer_name((ah_ledger_answer)99), "unknown");
    assert_int_equal(ah_ledger_set_lease_ms(f->l, 0), AH_ERR_INVALID);
}

/* SQLite: another handle (another process, as far as the file knows) holding a live
 * claim makes us wait; once its lease is over the claim is ours (reclaimed). */
static int64_t now_of(void *ud)
{
    return *(int64_t *)ud;
}

static void expired_lease_is_reclaimed(void **state)
{
    fixture *f = *state;
    char err[512];
    int64_t now = 1000000;
    ah_clock clk;
    memset(&clk, 0, sizeof clk);
    clk.wall_ms = now_of;
    clk.ud = &now;
    ah_ledger *other = NULL;
    ah_ledger_open(f->path, &other, err, sizeof err);
    assert_non_null(other);
    ah_ledger_set_clock(f->l, &clk);
    ah_ledger_set_clock(other, &clk);
    assert_int_equal(ah_ledger_set_lease_ms(other, 500), AH_OK);
    ah_ledger_result r;
    assert_int_equal(ah_ledger_claim(other, "K", "{}", &r, NULL, NULL), AH_LEDGER_OWNED);
    assert_int_equal(ah_ledger_claim(f->l, "K", "{}", &r, NULL, NULL), AH_LEDGER_BUSY);
    assert_true(r.retry_ms > 0 && r.retry_ms <= 500);
    now += 499;
    assert_int_equal(ah_ledger_claim(f->l, "K", "{}", &r, NULL, NULL), AH_LEDGER_BUSY);
    assert_int_equal(r.retry_ms, 1); /* never poll past the lease end */
    now += 1;
    assert_int_equal(ah_ledger_claim(f->l, "K", "{}", &r, NULL, NULL), AH_LEDGER_OWNED);
    assert_int_equal(r.reclaimed, 1);
    /* The old holder finishing late records nothing twice: its claim is gone, the
     * first completion wins and the second is a duplicate. */
    assert_int_equal(ah_ledger_complete(f->l, "K", "{}", "\"new\"", &r, NULL, NULL),
                     AH_LEDGER_DONE);
    assert_int_equal(ah_ledger_complete(other, "K", "{}", "\"old\"", &r, NULL, NULL),
                     AH_LEDGER_DONE);
    assert_int_equal(r.duplicate, 1);
    assert_string_equal(r.entry.receipt, "\"new\"");
    assert_int_equal(ah_ledger_claims(f->l), 0);
    ah_ledger_free(other);
}

/* SQLite: a claim row left by a process that no longer exists (same boot) or by
 * another boot is dead at once, whatever its lease says. */
static void dead_holder_is_reclaimed_at_once(void **state)
{
    fixture *f = *state;
    ah_ledger_result r;
    pid_t child = fork();
    assert_true(child >= 0);
    if (child == 0)
        _exit(0);
    assert_int_equal(waitpid(child, NULL, 0), child);
    char boot[64] = "";
    FILE *bf = fopen("/proc/sys/kernel/random/boot_id", "r");
    if (bf) {
        if (fgets(boot, sizeof boot, bf))
            boot[strcspn(boot, "\r\n")] = '\0';
        fclose(bf);
    }
    if (!boot[0])
        skip();
    char ns[64] = "", host[200];
    ssize_t nl = readlink("/proc/self/ns/pid", ns, sizeof ns - 1);
    ns[nl > 0 ? nl : 0] = '\0';
    snprintf(host, sizeof host, "%s %s", boot, ns);
    char sql[1200];
    snprintf(sql, sizeof sql,
             "INSERT INTO ah_ledger_claims VALUES('dead-pid', 'fnv1a64:%016llx', %d, '%s',"
             " 7, 0, 9223372036854775000);"
             "INSERT INTO ah_ledger_claims VALUES('other-boot', 'x', %d, 'not-this-boot %s',"
             " 7, 0, 9223372036854775000);"
             "INSERT INTO ah_ledger_claims VALUES('alive', 'x', 1, '%s',"
             " 7, 0, 9223372036854775000);"
             /* a dead pid, but seen from another pid namespace: only its lease ends it */
             "INSERT INTO ah_ledger_claims VALUES('other-ns', 'x', %d, '%s pid:[1]',"
             " 7, 0, 9223372036854775000);",
             0ULL, (int)child, host, (int)getpid(), ns, host, (int)child, boot);
    assert_int_equal(sql_exec_file(f->path, sql), SQLITE_OK);
    assert_int_equal(ah_ledger_claim(f->l, "dead-pid", "{}", &r, NULL, NULL),
                     AH_LEDGER_OWNED);
    assert_int_equal(r.reclaimed, 1);
    assert_int_equal(ah_ledger_claim(f->l, "other-boot", "{}", &r, NULL, NULL),
                     AH_LEDGER_OWNED);
    assert_int_equal(r.reclaimed, 1);
    /* pid 1 exists on this boot: its claim is alive (and has other arguments). */
    assert_int_equal(ah_ledger_claim(f->l, "alive", "{}", &r, NULL, NULL),
                     AH_LEDGER_MISMATCH);
    assert_int_equal(ah_ledger_claim(f->l, "other-ns", "{}", &r, NULL, NULL),
                     AH_LEDGER_MISMATCH);
    assert_int_equal(ah_ledger_claims(f->l), 4);
    /* A clean close releases this handle's claims, not anyone else's. */
    ah_ledger_free(f->l);
    char err[512];
    ah_ledger_open(f->path, &f->l, err, sizeof err);
    assert_non_null(f->l);
    assert_int_equal(ah_ledger_claims(f->l), 2);
}

/* A format-1 file (before claims) is upgraded in place and keeps its entries. */
static void format_1_is_upgraded(void **state)
{
    fixture *f = *state;
    char err[512];
    ah_ledger_entry e;
    assert_int_equal(ah_ledger_record(f->l, "old", "{}", "\"kept\"", NULL, NULL), AH_OK);
    ah_ledger_free(f->l);
    f->l = NULL;
    assert_int_equal(sql_exec_file(f->path, "DROP TABLE ah_ledger_claims;"
                                            "PRAGMA user_version = 1;"),
                     SQLITE_OK);
    ah_ledger_open(f->path, &f->l, err, sizeof err);
    assert_non_null(f->l);
    assert_int_equal(ah_ledger_lookup(f->l, "old", "{}", &e), AH_OK);
    assert_string_equal(e.receipt, "\"kept\"");
    ah_ledger_result r;
    assert_int_equal(ah_ledger_claim(f->l, "new", "{}", &r, NULL, NULL), AH_LEDGER_OWNED);
}

int main(void)
{
#define BOTH(fn)                                                                         \
    cmocka_unit_test_setup_teardown(fn, setup_memory, teardown),                         \
        cmocka_unit_test_setup_teardown(fn, setup_sqlite, teardown)
#define SQLITE(fn) cmocka_unit_test_setup_teardown(fn, setup_sqlite, teardown)
    const struct CMUnitTest tests[] = {
        BOTH(record_then_lookup),
        BOTH(repeat_returns_original),
        BOTH(same_key_different_args_is_refused),
        BOTH(long_key_is_shortened_in_message),
        BOTH(null_args_are_the_empty_string),
        BOTH(invalid_arguments),
        BOTH(seq_is_monotonic_and_entries_in_order),
        BOTH(many_keys_all_found),
        BOTH(created_time_comes_from_the_clock),
        cmocka_unit_test(fingerprint_is_fnv1a64),
        SQLITE(reopen_keeps_entries),
        SQLITE(file_is_in_wal_mode),
        SQLITE(two_handles_agree),
        SQLITE(killed_after_record_loses_nothing),
        SQLITE(killed_mid_stream_keeps_every_acknowledged_entry),
        SQLITE(open_errors_are_clear),
        SQLITE(foreign_database_is_refused_and_left_alone),
        SQLITE(newer_format_is_refused),
        BOTH(claim_is_exclusive_and_completion_wakes),
        BOTH(abandon_frees_the_key),
        BOTH(claim_mismatch_in_flight_and_recorded),
        SQLITE(expired_lease_is_reclaimed),
        SQLITE(dead_holder_is_reclaimed_at_once),
        SQLITE(format_1_is_upgraded),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
