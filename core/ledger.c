/* ledger.c - the idempotency ledger: one front end over two backends (memory, SQLite).
 *
 * The front end owns the rules (fingerprints, "same key + different arguments is an
 * error", "a repeat returns the original entry"); a backend only finds, inserts (unless
 * the key exists) and lists entries, through one ops table.
 *
 * Invariants:
 *   - entries are never changed or removed; seq is assigned at insert, starts at 1 and
 *     only grows (SQLite: INTEGER PRIMARY KEY AUTOINCREMENT, so it is never reused even
 *     if someone deletes rows by hand);
 *   - ah_ledger_record() returns only after the SQLite transaction that inserted the
 *     entry has committed with synchronous=FULL: the receipt outlives a crash before the
 *     caller ever sees it;
 *   - strings handed out in an ah_ledger_entry stay valid until the next call on the
 *     handle (memory: they live in the entry; SQLite: copied into per-handle scratch).
 */
#include "internal.h"

#include "agenthost/ledger.h"

#include <errno.h>
#include <inttypes.h>
#include <sqlite3.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

enum { LEDGER_ERR_MAX = 512, KEY_IN_MESSAGE_MAX = 80 };

typedef struct ledger_ops {
    const char *name;
    /* AH_OK: *e filled (borrowed strings) and *fp points at the stored fingerprint;
     * AH_ERR_NOT_FOUND; or a storage error with l->err set. */
    ah_status (*find)(ah_ledger *l, const char *key, ah_ledger_entry *e, const char **fp);
    /* Insert unless `key` exists. *inserted = 1 and *seq set when it inserted. */
    ah_status (*insert)(ah_ledger *l, const char *key, const char *fp,
                        const char *receipt, int64_t created_ms, int64_t *seq,
                        int *inserted);
    ah_status (*count)(ah_ledger *l, int64_t *n);
    ah_status (*foreach)(ah_ledger *l, ah_ledger_entry_fn fn, void *ud);
    void (*close)(ah_ledger *l);
} ledger_ops;

struct ah_ledger {
    const ledger_ops *ops;
    const ah_clock *clock; /* borrowed; NULL = real wall clock */
    char err[LEDGER_ERR_MAX];
};

/* ---- shared helpers -------------------------------------------------------------- */

static uint64_t fnv1a64(const char *s)
{
    uint64_t h = 0xcbf29ce484222325ULL;
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        h ^= *p;
        h *= 0x100000001b3ULL;
    }
    return h;
}

void ah_ledger_fingerprint(const char *args_canonical,
                           char out[AH_LEDGER_FINGERPRINT_SIZE])
{
    uint64_t h = fnv1a64(args_canonical ? args_canonical : "");
    ah__bufprintf(out, AH_LEDGER_FINGERPRINT_SIZE, "fnv1a64:%016" PRIx64, h);
}

static int64_t real_wall_ms(void)
{
    struct timespec ts;
    if (clock_gettime(CLOCK_REALTIME, &ts) != 0)
        return 0;
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static int64_t ledger_now(const ah_ledger *l)
{
    if (l->clock && l->clock->wall_ms)
        return l->clock->wall_ms(l->clock->ud);
    return real_wall_ms();
}

/* Keys are caller-chosen labels (not secrets), but may be long: quote a prefix. */
static void set_key_error(ah_ledger *l, const char *fmt_before, const char *key,
                          const char *after)
{
    size_t n = strlen(key);
    int shown = n > KEY_IN_MESSAGE_MAX ? KEY_IN_MESSAGE_MAX : (int)n;
    ah__bufprintf(l->err, sizeof l->err, "%s'%.*s%s'%s", fmt_before, shown, key,
                  n > KEY_IN_MESSAGE_MAX ? "..." : "", after);
}

/* ---- memory backend ---------------------------------------------------------------- */

/* Entries live in a vector in seq order (seq = index + 1); an open-addressing table of
 * (index + 1) finds a key in O(1). The table is kept at most half full. */
typedef struct mem_entry {
    char *key;
    char *receipt;
    char fp[AH_LEDGER_FINGERPRINT_SIZE];
    int64_t created_ms;
} mem_entry;

typedef struct mem_ledger {
    ah_ledger base;
    mem_entry *v;
    size_t n, cap;
    size_t *slots; /* 0 = empty, else index + 1 */
    size_t nslots; /* power of two */
} mem_ledger;

static size_t mem_slot_of(const mem_ledger *m, const char *key)
{
    size_t mask = m->nslots - 1;
    size_t i = (size_t)fnv1a64(key) & mask;
    while (m->slots[i] && strcmp(m->v[m->slots[i] - 1].key, key) != 0)
        i = (i + 1) & mask;
    return i;
}

static ah_status mem_grow_slots(mem_ledger *m)
{
    size_t nslots = m->nslots ? m->nslots * 2 : 16;
    size_t *slots = calloc(nslots, sizeof *slots);
    if (!slots)
        return AH_ERR_NOMEM;
    free(m->slots);
    m->slots = slots;
    m->nslots = nslots;
    for (size_t k = 0; k < m->n; k++)
        m->slots[mem_slot_of(m, m->v[k].key)] = k + 1;
    return AH_OK;
}

static void mem_fill(const mem_ledger *m, size_t idx, ah_ledger_entry *e)
{
    e->key = m->v[idx].key;
    e->receipt = m->v[idx].receipt;
    e->seq = (int64_t)idx + 1;
    e->created_ms = m->v[idx].created_ms;
}

static ah_status mem_find(ah_ledger *l, const char *key, ah_ledger_entry *e,
                          const char **fp)
{
    mem_ledger *m = (mem_ledger *)l;
    if (m->nslots == 0)
        return AH_ERR_NOT_FOUND;
    size_t slot = mem_slot_of(m, key);
    if (!m->slots[slot])
        return AH_ERR_NOT_FOUND;
    mem_fill(m, m->slots[slot] - 1, e);
    *fp = m->v[m->slots[slot] - 1].fp;
    return AH_OK;
}

static ah_status mem_insert(ah_ledger *l, const char *key, const char *fp,
                            const char *receipt, int64_t created_ms, int64_t *seq,
                            int *inserted)
{
    mem_ledger *m = (mem_ledger *)l;
    char *k = NULL, *r = NULL;
    *inserted = 0;
    if (m->nslots && m->slots[mem_slot_of(m, key)])
        return AH_OK;
    if ((m->n + 1) * 2 > m->nslots && mem_grow_slots(m) != AH_OK)
        goto nomem;
    if (m->n == m->cap) {
        size_t cap = m->cap ? m->cap * 2 : 16;
        mem_entry *v = realloc(m->v, cap * sizeof *v);
        if (!v)
            goto nomem;
        m->v = v;
        m->cap = cap;
    }
    k = ah__strdup(key);
    r = ah__strdup(receipt);
    if (!k || !r)
        goto nomem;
    mem_entry *e = &m->v[m->n];
    e->key = k;
    e->receipt = r;
    memcpy(e->fp, fp, sizeof e->fp);
    e->created_ms = created_ms;
    m->slots[mem_slot_of(m, key)] = m->n + 1;
    m->n++;
    *seq = (int64_t)m->n;
    *inserted = 1;
    return AH_OK;
nomem:
    free(k);
    free(r);
    ah__bufprintf(l->err, sizeof l->err, "out of memory recording a ledger entry");
    return AH_ERR_NOMEM;
}

static ah_status mem_count(ah_ledger *l, int64_t *n)
{
    *n = (int64_t)((mem_ledger *)l)->n;
    return AH_OK;
}

static ah_status mem_foreach(ah_ledger *l, ah_ledger_entry_fn fn, void *ud)
{
    mem_ledger *m = (mem_ledger *)l;
    for (size_t i = 0; i < m->n; i++) {
        ah_ledger_entry e;
        mem_fill(m, i, &e);
        if (fn(ud, &e))
            break;
    }
    return AH_OK;
}

static void mem_close(ah_ledger *l)
{
    mem_ledger *m = (mem_ledger *)l;
    for (size_t i = 0; i < m->n; i++) {
        free(m->v[i].key);
        free(m->v[i].receipt);
    }
    free(m->v);
    free(m->slots);
    free(m);
}

static const ledger_ops mem_ops = {"memory",  mem_find,    mem_insert,
                                   mem_count, mem_foreach, mem_close};

ah_ledger *ah_ledger_new_memory(void)
{
    mem_ledger *m = calloc(1, sizeof *m);
    if (!m)
        return NULL;
    m->base.ops = &mem_ops;
    return &m->base;
}

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

/* PRAGMA application_id marks the file as ours: 0x41484c47, "AHLG". */
#define LEDGER_APP_ID  1095257159
#define LEDGER_VERSION 1
#define LEDGER_BUSY_MS 5000
#define LEDGER_STR_(x) #x
#define LEDGER_STR(x)  LEDGER_STR_(x)

/* clang-format off */
static const char schema_sql[] =
    "CREATE TABLE ah_ledger_entries ("
    " seq INTEGER PRIMARY KEY AUTOINCREMENT,"
    " key TEXT NOT NULL UNIQUE,"
    " fingerprint TEXT NOT NULL,"
    " receipt TEXT NOT NULL,"
    " created_ms INTEGER NOT NULL);"
    "PRAGMA application_id = " LEDGER_STR(LEDGER_APP_ID) ";"
    "PRAGMA user_version = " LEDGER_STR(LEDGER_VERSION) ";";
/* clang-format on */

typedef struct sql_ledger {
    ah_ledger base;
    sqlite3 *db;
    sqlite3_stmt *find, *exists, *insert, *count, *all;
    /* scratch for the strings of the last found entry (valid until the next call) */
    char *key_buf, *receipt_buf;
    char fp_buf[AH_LEDGER_FINGERPRINT_SIZE];
} sql_ledger;

static ah_status sql_fail(sql_ledger *s, const char *what)
{
    int rc = sqlite3_errcode(s->db);
    ah__bufprintf(s->base.err, sizeof s->base.err, "ledger %s failed: %s", what,
                  sqlite3_errmsg(s->db));
    return rc == SQLITE_NOMEM ? AH_ERR_NOMEM : AH_ERR_IO;
}

static char *replace_str(char **slot, const unsigned char *text)
{
    free(*slot);
    *slot = ah__strdup(text ? (const char *)text : "");
    return *slot;
}

static ah_status sql_find(ah_ledger *l, const char *key, ah_ledger_entry *e,
                          const char **fp)
{
    sql_ledger *s = (sql_ledger *)l;
    ah_status st = AH_OK;
    sqlite3_stmt *q = s->find;
    sqlite3_bind_text(q, 1, key, -1, SQLITE_STATIC);
    int rc = sqlite3_step(q);
    if (rc == SQLITE_DONE) {
        st = AH_ERR_NOT_FOUND;
        goto cleanup;
    }
    if (rc != SQLITE_ROW) {
        st = sql_fail(s, "lookup");
        goto cleanup;
    }
    if (!replace_str(&s->key_buf, sqlite3_column_text(q, 0)) ||
        !replace_str(&s->receipt_buf, sqlite3_column_text(q, 2))) {
        ah__bufprintf(l->err, sizeof l->err, "out of memory reading a ledger entry");
        st = AH_ERR_NOMEM;
        goto cleanup;
    }
    const unsigned char *f = sqlite3_column_text(q, 3);
    ah__bufprintf(s->fp_buf, sizeof s->fp_buf, "%s", f ? (const char *)f : "");
    e->key = s->key_buf;
    e->receipt = s->receipt_buf;
    e->seq = sqlite3_column_int64(q, 1);
    e->created_ms = sqlite3_column_int64(q, 4);
    *fp = s->fp_buf;
cleanup:
    sqlite3_reset(q);
    sqlite3_clear_bindings(q);
    return st;
}

/* One IMMEDIATE transaction: check, insert, commit. The write lock serialises recorders
 * across processes, so a key recorded by someone else is seen here and costs no seq
 * (an INSERT that hits the UNIQUE constraint would still burn an AUTOINCREMENT value). */
static ah_status sql_insert(ah_ledger *l, const char *key, const char *fp,
                            const char *receipt, int64_t created_ms, int64_t *seq,
                            int *inserted)
{
    sql_ledger *s = (sql_ledger *)l;
    ah_status st = AH_OK;
    int in_tx = 0, rc;
    *inserted = 0;
    if (sqlite3_exec(s->db, "BEGIN IMMEDIATE", NULL, NULL, NULL) != SQLITE_OK) {
        st = sql_fail(s, "record");
        goto cleanup;
    }
    in_tx = 1;
    sqlite3_bind_text(s->exists, 1, key, -1, SQLITE_STATIC);
    rc = sqlite3_step(s->exists);
    if (rc != SQLITE_ROW && rc != SQLITE_DONE) {
        st = sql_fail(s, "record");
        goto cleanup;
    }
    if (rc == SQLITE_DONE) {
        sqlite3_stmt *q = s->insert;
        sqlite3_bind_text(q, 1, key, -1, SQLITE_STATIC);
        sqlite3_bind_text(q, 2, fp, -1, SQLITE_STATIC);
        sqlite3_bind_text(q, 3, receipt, -1, SQLITE_STATIC);
        sqlite3_bind_int64(q, 4, created_ms);
        if (sqlite3_step(q) != SQLITE_DONE) {
            st = sql_fail(s, "record");
            goto cleanup;
        }
        *seq = sqlite3_last_insert_rowid(s->db);
        *inserted = sqlite3_changes(s->db) == 1;
    }
    /* With synchronous=FULL, COMMIT returns after the WAL is fsynced: durable. */
    if (sqlite3_exec(s->db, "COMMIT", NULL, NULL, NULL) != SQLITE_OK) {
        st = sql_fail(s, "record");
        *inserted = 0;
        goto cleanup;
    }
    in_tx = 0;
cleanup:
    sqlite3_reset(s->exists);
    sqlite3_clear_bindings(s->exists);
    sqlite3_reset(s->insert);
    sqlite3_clear_bindings(s->insert);
    if (in_tx)
        sqlite3_exec(s->db, "ROLLBACK", NULL, NULL, NULL);
    return st;
}

static ah_status sql_count(ah_ledger *l, int64_t *n)
{
    sql_ledger *s = (sql_ledger *)l;
    ah_status st = AH_OK;
    if (sqlite3_step(s->count) != SQLITE_ROW)
        st = sql_fail(s, "count");
    else
        *n = sqlite3_column_int64(s->count, 0);
    sqlite3_reset(s->count);
    return st;
}

static ah_status sql_foreach(ah_ledger *l, ah_ledger_entry_fn fn, void *ud)
{
    sql_ledger *s = (sql_ledger *)l;
    ah_status st = AH_OK;
    int rc;
    while ((rc = sqlite3_step(s->all)) == SQLITE_ROW) {
        const unsigned char *k = sqlite3_column_text(s->all, 0);
        const unsigned char *r = sqlite3_column_text(s->all, 2);
        ah_ledger_entry e = {k ? (const char *)k : "", r ? (const char *)r : "",
                             sqlite3_column_int64(s->all, 1),
                             sqlite3_column_int64(s->all, 3)};
        if (fn(ud, &e)) {
            rc = SQLITE_DONE;
            break;
        }
    }
    if (rc != SQLITE_DONE)
        st = sql_fail(s, "listing");
    sqlite3_reset(s->all);
    return st;
}

static void sql_close(ah_ledger *l)
{
    sql_ledger *s = (sql_ledger *)l;
    sqlite3_finalize(s->find);
    sqlite3_finalize(s->exists);
    sqlite3_finalize(s->insert);
    sqlite3_finalize(s->count);
    sqlite3_finalize(s->all);
    /* The last connection to close checkpoints the WAL; every commit was durable
     * already, so a close that cannot checkpoint loses nothing. */
    if (sqlite3_close(s->db) != SQLITE_OK)
        ah__log(AH_LOG_WARN, "ledger: close: %s", sqlite3_errmsg(s->db));
    free(s->key_buf);
    free(s->receipt_buf);
    free(s);
}

static const ledger_ops sql_ops = {"sqlite",  sql_find,    sql_insert,
                                   sql_count, sql_foreach, sql_close};

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
 * database. Runs in one IMMEDIATE transaction so two processes opening a fresh file at
 * once create the schema exactly once. Returns 0 or -1 with err set. */
static int sql_check_schema(sqlite3 *db, const char *path, char *err, size_t errsize)
{
    int64_t app = 0, version = 0, objects = 0;
    int rc = sqlite3_exec(db, "BEGIN IMMEDIATE", NULL, NULL, NULL);
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
    if (app == 0 && version == 0 && objects == 0) {
        if (sqlite3_exec(db, schema_sql, NULL, NULL, NULL) != SQLITE_OK) {
            ah__bufprintf(err, errsize, "cannot create ledger '%s': %s", path,
                          sqlite3_errmsg(db));
            goto fail;
        }
    } else if (app != LEDGER_APP_ID) {
        ah__bufprintf(err, errsize,
                      "'%s' is not a ledger: an SQLite database of another application",
                      path);
        goto fail;
    } else if (version != LEDGER_VERSION) {
        ah__bufprintf(err, errsize,
                      "ledger '%s' has format version %" PRId64 "; this build reads %d",
                      path, version, LEDGER_VERSION);
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
    if (sqlite3_prepare_v2(db, "PRAGMA journal_mode=WAL", -1, &q, NULL) == SQLITE_OK &&
        sqlite3_step(q) == SQLITE_ROW) {
        const unsigned char *mode = sqlite3_column_text(q, 0);
        if (!mode || strcmp((const char *)mode, "wal") != 0)
            ah__log(AH_LOG_WARN, "ledger '%s': journal mode %s (WAL refused)", path,
                    mode ? (const char *)mode : "?");
        ok = 1;
    }
    sqlite3_finalize(q);
    if (ok && sqlite3_exec(db, "PRAGMA synchronous=FULL", NULL, NULL, NULL) == SQLITE_OK)
        return 0;
    ah__bufprintf(err, errsize, "cannot configure ledger '%s': %s", path,
                  sqlite3_errmsg(db));
    return -1;
}

ah_ledger *ah_ledger_open(const char *path, char *err, size_t errsize)
{
    char dummy[1];
    sql_ledger *s = NULL;
    sqlite3 *db = NULL;
    if (!err || errsize == 0) {
        err = dummy;
        errsize = sizeof dummy;
    }
    err[0] = '\0';
    if (!path || !*path) {
        ah__bufprintf(err, errsize, "ledger path is empty");
        return NULL;
    }
    int rc = sqlite3_open_v2(path, &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, NULL);
    if (rc != SQLITE_OK) {
        int sys = db ? sqlite3_system_errno(db) : 0;
        ah__bufprintf(err, errsize, "cannot open ledger '%s': %s%s%s%s", path,
                      db ? sqlite3_errmsg(db) : sqlite3_errstr(rc), sys ? " (" : "",
                      sys ? strerror(sys) : "", sys ? ")" : "");
        goto fail;
    }
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

    s = calloc(1, sizeof *s);
    if (!s) {
        ah__bufprintf(err, errsize, "out of memory opening ledger '%s'", path);
        goto fail;
    }
    s->base.ops = &sql_ops;
    s->db = db;
    if (sqlite3_prepare_v2(db,
                           "SELECT key, seq, receipt, fingerprint, created_ms"
                           " FROM ah_ledger_entries WHERE key = ?1",
                           -1, &s->find, NULL) != SQLITE_OK ||
        sqlite3_prepare_v2(db, "SELECT 1 FROM ah_ledger_entries WHERE key = ?1", -1,
                           &s->exists, NULL) != SQLITE_OK ||
        sqlite3_prepare_v2(
            db,
            "INSERT INTO ah_ledger_entries"
            " (key, fingerprint, receipt, created_ms) VALUES (?1, ?2, ?3, ?4)"
            " ON CONFLICT(key) DO NOTHING",
            -1, &s->insert, NULL) != SQLITE_OK ||
        sqlite3_prepare_v2(db, "SELECT count(*) FROM ah_ledger_entries", -1, &s->count,
                           NULL) != SQLITE_OK ||
        sqlite3_prepare_v2(db,
                           "SELECT key, seq, receipt, created_ms FROM ah_ledger_entries"
                           " ORDER BY seq",
                           -1, &s->all, NULL) != SQLITE_OK) {
        ah__bufprintf(err, errsize, "'%s' is not a usable ledger: %s", path,
                      sqlite3_errmsg(db));
        goto fail;
    }
    return &s->base;
fail:
    if (s) {
        sql_close(&s->base); /* closes db too */
        return NULL;
    }
    sqlite3_close(db);
    return NULL;
}

/* ---- front end --------------------------------------------------------------------- */

void ah_ledger_free(ah_ledger *l)
{
    if (l)
        l->ops->close(l);
}

void ah_ledger_set_clock(ah_ledger *l, const ah_clock *clock)
{
    if (l)
        l->clock = clock;
}

const char *ah_ledger_backend(const ah_ledger *l)
{
    return l ? l->ops->name : "none";
}

const char *ah_ledger_errmsg(const ah_ledger *l)
{
    return l ? l->err : "no ledger";
}

ah_status ah_ledger_lookup(ah_ledger *l, const char *key, const char *args_canonical,
                           ah_ledger_entry *out)
{
    char fp[AH_LEDGER_FINGERPRINT_SIZE];
    const char *stored = NULL;
    ah_ledger_entry e;
    if (!l || !key || !out) {
        if (l)
            ah__bufprintf(l->err, sizeof l->err, "ledger lookup: missing key or output");
        return AH_ERR_INVALID;
    }
    l->err[0] = '\0';
    ah_status st = l->ops->find(l, key, &e, &stored);
    if (st != AH_OK)
        return st;
    ah_ledger_fingerprint(args_canonical, fp);
    if (strcmp(fp, stored) != 0) {
        set_key_error(l, "idempotency key ", key, " reused with different arguments");
        return AH_ERR_STATE;
    }
    *out = e;
    return AH_OK;
}

ah_status ah_ledger_record(ah_ledger *l, const char *key, const char *args_canonical,
                           const char *receipt, int64_t *seq_out, int *duplicate_out)
{
    char fp[AH_LEDGER_FINGERPRINT_SIZE];
    int64_t seq = 0;
    int inserted = 0;
    if (!l || !key || !receipt) {
        if (l)
            ah__bufprintf(l->err, sizeof l->err, "ledger record: missing key or receipt");
        return AH_ERR_INVALID;
    }
    l->err[0] = '\0';
    ah_ledger_fingerprint(args_canonical, fp);
    /* The backend inserts unless the key is there, atomically across processes; when it
     * did not insert, the entry that is there decides: repeat or misuse. */
    ah_status st = l->ops->insert(l, key, fp, receipt, ledger_now(l), &seq, &inserted);
    if (st != AH_OK)
        return st;
    if (!inserted) {
        ah_ledger_entry e;
        const char *stored = NULL;
        st = l->ops->find(l, key, &e, &stored);
        if (st == AH_ERR_NOT_FOUND) { /* impossible unless rows were deleted by hand */
            set_key_error(l, "ledger entry ", key, " vanished while recording");
            return AH_ERR_IO;
        }
        if (st != AH_OK)
            return st;
        if (strcmp(fp, stored) != 0) {
            set_key_error(l, "idempotency key ", key, " reused with different arguments");
            return AH_ERR_STATE;
        }
        seq = e.seq;
    }
    if (seq_out)
        *seq_out = seq;
    if (duplicate_out)
        *duplicate_out = !inserted;
    return AH_OK;
}

int64_t ah_ledger_count(ah_ledger *l)
{
    int64_t n = -1;
    if (!l)
        return -1;
    l->err[0] = '\0';
    if (l->ops->count(l, &n) != AH_OK)
        return -1;
    return n;
}

ah_status ah_ledger_foreach(ah_ledger *l, ah_ledger_entry_fn fn, void *ud)
{
    if (!l || !fn)
        return AH_ERR_INVALID;
    l->err[0] = '\0';
    return l->ops->foreach (l, fn, ud);
}
