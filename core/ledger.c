/* ledger.c - the idempotency ledger: the front end over every backend, and the memory
 * backend (SQLite: ledger_sqlite.c).
 *
 * The front end owns the rules (fingerprints, "same key + different arguments is an
 * error", "a repeat returns the original entry", waking BUSY waiters in this process); a
 * backend only stores, atomically, through the ops table of ledger_internal.h (which a
 * network backend implements too).
 *
 * Invariants:
 *   - entries are never changed or removed; seq is assigned at insert, starts at 1 and
 *     only grows (SQLite: INTEGER PRIMARY KEY AUTOINCREMENT, so it is never reused even
 *     if someone deletes rows by hand);
 *   - a claim is taken, checked and dropped only inside one backend step (SQLite: one
 *     IMMEDIATE transaction), so two callers never both hold a key;
 *   - ah_ledger_complete() returns DONE only after the SQLite transaction that inserted
 *     the entry has committed with synchronous=FULL: the receipt outlives a crash before
 *     the caller ever sees it;
 *   - strings handed out in an ah_ledger_entry stay valid until the next call on the
 *     handle (memory: they live in the entry; SQLite: copied into per-handle scratch).
 */
#include "ledger_internal.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

enum { KEY_IN_MESSAGE_MAX = 80 };

/* A BUSY answer of the memory ledger: its holders always wake their waiters, so this is
 * only a safety poll. */
enum { MEM_BUSY_RETRY_MS = 1000 };

typedef ah__ledger_ops ledger_ops;

struct ah__ledger_waiter {
    char *key;
    ah_ledger_fn cb;
    void *ud;
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

const char *ah_ledger_answer_name(ah_ledger_answer a)
{
    static const char *const names[] = {
#define AH__LA_NAME(name, s) s,
        AH_LEDGER_ANSWER_MAP(AH__LA_NAME)
#undef AH__LA_NAME
    };
    if ((int)a < 0 || a >= AH_LEDGER_ANSWER_COUNT_)
        return "unknown";
    return names[a];
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

void ah__ledger_init(ah_ledger *l, const ah__ledger_ops *ops)
{
    memset(l, 0, sizeof *l);
    l->ops = ops;
    l->lease_ms = AH_LEDGER_DEFAULT_LEASE_MS;
}

void ah__ledger_seterr(ah_ledger *l, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(l->err, sizeof l->err, fmt, ap);
    va_end(ap);
}

/* Keys are caller-chosen labels (not secrets), but may be long: quote a prefix. */
void ah__ledger_key_error(ah_ledger *l, const char *fmt_before, const char *key,
                          const char *after)
{
    size_t n = strlen(key);
    int shown = n > KEY_IN_MESSAGE_MAX ? KEY_IN_MESSAGE_MAX : (int)n;
    ah__bufprintf(l->err, sizeof l->err, "%s'%.*s%s'%s", fmt_before, shown, key,
                  n > KEY_IN_MESSAGE_MAX ? "..." : "", after);
}

/* ---- memory backend ---------------------------------------------------------------- */

/* Entries live in a vector in seq order (seq = index + 1); an open-addressing table of
 * (index + 1) finds a key in O(1). The table is kept at most half full. Claims (keys in
 * flight: as many as calls run at once) are a small vector searched linearly; they all
 * belong to this handle, since nothing else can reach a memory ledger. */
typedef struct mem_entry {
    char *key;
    char *receipt;
    char fp[AH_LEDGER_FINGERPRINT_SIZE];
    int64_t created_ms;
} mem_entry;

typedef struct mem_claim {
    char *key;
    char fp[AH_LEDGER_FINGERPRINT_SIZE];
} mem_claim;

typedef struct mem_ledger {
    ah_ledger base;
    mem_entry *v;
    size_t n, cap;
    size_t *slots; /* 0 = empty, else index + 1 */
    size_t nslots; /* power of two */
    mem_claim *claims;
    size_t nclaims, capclaims;
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

static mem_claim *mem_claim_of(mem_ledger *m, const char *key)
{
    for (size_t i = 0; i < m->nclaims; i++)
        if (strcmp(m->claims[i].key, key) == 0)
            return &m->claims[i];
    return NULL;
}

static void mem_drop_claim(mem_ledger *m, const char *key)
{
    mem_claim *c = mem_claim_of(m, key);
    if (!c)
        return;
    free(c->key);
    *c = m->claims[--m->nclaims];
}

ah_ledger_answer ah__ledger_entry_answer(ah_ledger *l, const char *key, const char *fp,
                                        const char *stored, const ah_ledger_entry *e,
                                        ah_ledger_result *out)
{
    if (strcmp(fp, stored) != 0) {
        ah__ledger_key_error(l, "idempotency key ", key, " reused with different arguments");
        return out->answer = AH_LEDGER_MISMATCH;
    }
    out->entry = *e;
    return out->answer = AH_LEDGER_DONE;
}

static ah_ledger_answer mem_claim_key(ah_ledger *l, const char *key, const char *fp,
                                      int64_t now_ms, ah_ledger_result *out,
                                      ah_ledger_fn cb, void *ud)
{
    mem_ledger *m = (mem_ledger *)l;
    ah_ledger_entry e;
    const char *stored = NULL;
    (void)now_ms, (void)cb, (void)ud;
    if (mem_find(l, key, &e, &stored) == AH_OK)
        return ah__ledger_entry_answer(l, key, fp, stored, &e, out);
    mem_claim *c = mem_claim_of(m, key);
    if (c) {
        if (strcmp(c->fp, fp) != 0) {
            ah__ledger_key_error(l, "idempotency key ", key,
                          " is in flight with different arguments");
            return out->answer = AH_LEDGER_MISMATCH;
        }
        out->retry_ms = MEM_BUSY_RETRY_MS;
        return out->answer = AH_LEDGER_BUSY;
    }
    if (m->nclaims == m->capclaims) {
        size_t cap = m->capclaims ? m->capclaims * 2 : 8;
        mem_claim *v = realloc(m->claims, cap * sizeof *v);
        if (!v)
            goto nomem;
        m->claims = v;
        m->capclaims = cap;
    }
    char *k = ah__strdup(key);
    if (!k)
        goto nomem;
    m->claims[m->nclaims].key = k;
    memcpy(m->claims[m->nclaims].fp, fp, AH_LEDGER_FINGERPRINT_SIZE);
    m->nclaims++;
    return out->answer = AH_LEDGER_OWNED;
nomem:
    ah__ledger_seterr(l, "out of memory");
    return out->answer = AH_LEDGER_FAILED;
}

static ah_status mem_insert(mem_ledger *m, const char *key, const char *fp,
                            const char *receipt, int64_t created_ms)
{
    char *k = NULL, *r = NULL;
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
    return AH_OK;
nomem:
    free(k);
    free(r);
    ah__ledger_seterr(&m->base, "out of memory");
    return AH_ERR_NOMEM;
}

static ah_ledger_answer mem_complete(ah_ledger *l, const char *key, const char *fp,
                                     const char *receipt, int64_t now_ms,
                                     ah_ledger_result *out, ah_ledger_fn cb, void *ud)
{
    mem_ledger *m = (mem_ledger *)l;
    ah_ledger_entry e;
    const char *stored = NULL;
    (void)cb, (void)ud;
    mem_drop_claim(m, key);
    if (mem_find(l, key, &e, &stored) == AH_OK) {
        out->duplicate = 1;
        return ah__ledger_entry_answer(l, key, fp, stored, &e, out);
    }
    if (mem_insert(m, key, fp, receipt, now_ms) != AH_OK)
        return out->answer = AH_LEDGER_FAILED;
    mem_fill(m, m->n - 1, &out->entry);
    out->duplicate = 0;
    return out->answer = AH_LEDGER_DONE;
}

static void mem_abandon(ah_ledger *l, const char *key)
{
    mem_drop_claim((mem_ledger *)l, key);
}

static ah_status mem_count(ah_ledger *l, int64_t *n)
{
    *n = (int64_t)((mem_ledger *)l)->n;
    return AH_OK;
}

static ah_status mem_claims(ah_ledger *l, int64_t *n)
{
    *n = (int64_t)((mem_ledger *)l)->nclaims;
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
    for (size_t i = 0; i < m->nclaims; i++)
        free(m->claims[i].key);
    free(m->claims);
    free(m->v);
    free(m->slots);
    free(m);
}

static const ledger_ops mem_ops = {
    "memory", mem_claim_key, mem_complete, mem_abandon, NULL,
    mem_find, mem_count,     mem_claims,   mem_foreach, mem_close, NULL,
};

ah_ledger *ah_ledger_new_memory(void)
{
    mem_ledger *m = calloc(1, sizeof *m);
    if (!m)
        return NULL;
    ah__ledger_init(&m->base, &mem_ops);
    return &m->base;
}

/* ---- front end --------------------------------------------------------------------- */

static int add_waiter(ah_ledger *l, const char *key, ah_ledger_fn cb, void *ud)
{
    if (l->nwaiters == l->capwaiters) {
        size_t cap = l->capwaiters ? l->capwaiters * 2 : 8;
        ah__ledger_waiter *v = realloc(l->waiters, cap * sizeof *v);
        if (!v)
            return 0;
        l->waiters = v;
        l->capwaiters = cap;
    }
    char *k = ah__strdup(key);
    if (!k)
        return 0;
    l->waiters[l->nwaiters++] = (ah__ledger_waiter){k, cb, ud};
    return 1;
}

static void drop_waiter(ah_ledger *l, size_t i)
{
    free(l->waiters[i].key);
    l->waiters[i] = l->waiters[--l->nwaiters];
}

/* Wake this handle's BUSY waiters on key, one at a time: a callback may cancel others
 * (ah_ledger_cancel is the one ledger call it may make), so the list is searched afresh
 * each time. */
static void wake_waiters(ah_ledger *l, const char *key)
{
    for (;;) {
        size_t i = 0;
        while (i < l->nwaiters && strcmp(l->waiters[i].key, key) != 0)
            i++;
        if (i == l->nwaiters)
            return;
        ah_ledger_fn cb = l->waiters[i].cb;
        void *ud = l->waiters[i].ud;
        drop_waiter(l, i);
        ah_ledger_result r;
        memset(&r, 0, sizeof r);
        r.answer = AH_LEDGER_BUSY;
        cb(ud, &r);
    }
}

void ah_ledger_free(ah_ledger *l)
{
    if (!l)
        return;
    while (l->nwaiters)
        drop_waiter(l, l->nwaiters - 1);
    free(l->waiters);
    l->ops->close(l);
}

ah_status ah_ledger_set_loop(ah_ledger *l, ah_loop *loop)
{
    if (!l || !loop)
        return AH_ERR_INVALID;
    l->err[0] = '\0';
    return l->ops->set_loop ? l->ops->set_loop(l, loop) : AH_OK;
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

ah_status ah_ledger_set_lease_ms(ah_ledger *l, int64_t ms)
{
    if (!l || ms <= 0)
        return AH_ERR_INVALID;
    l->lease_ms = ms;
    return AH_OK;
}

int64_t ah_ledger_lease_ms(const ah_ledger *l)
{
    return l ? l->lease_ms : 0;
}

ah_status ah_ledger_lookup(ah_ledger *l, const char *key, const char *args_canonical,
                           ah_ledger_entry *out)
{
    char fp[AH_LEDGER_FINGERPRINT_SIZE];
    const char *stored = NULL;
    ah_ledger_entry e;
    if (!l || !key || !out) {
        if (l)
            ah__ledger_seterr(l, "missing key or output");
        return AH_ERR_INVALID;
    }
    l->err[0] = '\0';
    ah_status st = l->ops->find(l, key, &e, &stored);
    if (st != AH_OK)
        return st;
    ah_ledger_fingerprint(args_canonical, fp);
    if (strcmp(fp, stored) != 0) {
        ah__ledger_key_error(l, "idempotency key ", key, " reused with different arguments");
        return AH_ERR_STATE;
    }
    *out = e;
    return AH_OK;
}

ah_ledger_answer ah_ledger_claim(ah_ledger *l, const char *key, const char *args_canonical,
                                 ah_ledger_result *out, ah_ledger_fn cb, void *ud)
{
    char fp[AH_LEDGER_FINGERPRINT_SIZE];
    if (!out)
        return AH_LEDGER_FAILED;
    memset(out, 0, sizeof *out);
    if (!l || !key) {
        if (l)
            ah__ledger_seterr(l, "missing key");
        return out->answer = AH_LEDGER_FAILED;
    }
    l->err[0] = '\0';
    ah_ledger_fingerprint(args_canonical, fp);
    ah_ledger_answer a = l->ops->claim(l, key, fp, ledger_now(l), out, cb, ud);
    out->answer = a;
    /* Synchronous backends leave waking to us; asynchronous ones call cb themselves. */
    if (a == AH_LEDGER_BUSY && cb && !l->ops->cancel && !add_waiter(l, key, cb, ud))
        ah__log(AH_LOG_WARN, "ledger: out of memory registering a waiter (it polls)");
    return a;
}

ah_ledger_answer ah_ledger_complete(ah_ledger *l, const char *key, const char *args_canonical,
                                    const char *receipt, ah_ledger_result *out,
                                    ah_ledger_fn cb, void *ud)
{
    char fp[AH_LEDGER_FINGERPRINT_SIZE];
    if (!out)
        return AH_LEDGER_FAILED;
    memset(out, 0, sizeof *out);
    if (!l || !key || !receipt) {
        if (l)
            ah__ledger_seterr(l, "missing key or receipt");
        return out->answer = AH_LEDGER_FAILED;
    }
    l->err[0] = '\0';
    ah_ledger_fingerprint(args_canonical, fp);
    ah_ledger_answer a =
        l->ops->complete(l, key, fp, receipt, ledger_now(l), out, cb, ud);
    out->answer = a;
    if (a != AH_LEDGER_PENDING && l->nwaiters) {
        char *k = ah__strdup(key); /* key may be a string a waiter frees */
        if (k) {
            wake_waiters(l, k);
            free(k);
        }
    }
    return out->answer;
}

void ah_ledger_abandon(ah_ledger *l, const char *key)
{
    if (!l || !key)
        return;
    l->ops->abandon(l, key);
    if (l->nwaiters) {
        char *k = ah__strdup(key);
        if (k) {
            wake_waiters(l, k);
            free(k);
        }
    }
}

void ah_ledger_cancel(ah_ledger *l, void *ud)
{
    if (!l)
        return;
    for (size_t i = l->nwaiters; i-- > 0;)
        if (l->waiters[i].ud == ud)
            drop_waiter(l, i);
    if (l->ops->cancel)
        l->ops->cancel(l, ud);
}

ah_status ah_ledger_record(ah_ledger *l, const char *key, const char *args_canonical,
                           const char *receipt, int64_t *seq_out, int *duplicate_out)
{
    ah_ledger_result r;
    if (!l || !key || !receipt) {
        if (l)
            ah__ledger_seterr(l, "missing key or receipt");
        return AH_ERR_INVALID;
    }
    switch (ah_ledger_complete(l, key, args_canonical, receipt, &r, NULL, NULL)) {
    case AH_LEDGER_DONE:
        if (seq_out)
            *seq_out = r.entry.seq;
        if (duplicate_out)
            *duplicate_out = r.duplicate;
        return AH_OK;
    case AH_LEDGER_MISMATCH:
        return AH_ERR_STATE;
    case AH_LEDGER_PENDING:
        ah__ledger_seterr(l, "ledger record: this backend answers asynchronously; use "
                             "ah_ledger_complete with a callback");
        return AH_ERR_STATE;
    default:
        return strstr(l->err, "out of memory") ? AH_ERR_NOMEM : AH_ERR_IO;
    }
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

int64_t ah_ledger_claims(ah_ledger *l)
{
    int64_t n = -1;
    if (!l)
        return -1;
    l->err[0] = '\0';
    if (l->ops->claims(l, &n) != AH_OK)
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
