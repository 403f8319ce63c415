/* ledger_internal.h - the backend interface of the idempotency ledger (core/ledger.c).
 *
 * A backend (memory and SQLite in ledger.c; a network store such as Redis in a file of
 * its own) is one ops table plus a struct that begins with `struct ah_ledger`. The front
 * end (ledger.c) owns what is the same for every backend: argument checks, fingerprints
 * (backends compare the strings they are given, never hash), error messages naming the
 * key, the clock, the lease value, and the in-process wake-ups of BUSY waiters (a
 * complete or abandon through this handle wakes the callers that got BUSY for that key
 * from this handle). A backend owns only storage and atomicity.
 *
 * Contract of every backend operation (l is the backend's own handle):
 *   - claim(l, key, fp, now_ms, out, cb, ud): ONE atomic step (SQLite: one IMMEDIATE
 *     transaction; Redis: one server-side script):
 *       an entry under key       -> DONE (out->entry filled, fp equal) or MISMATCH;
 *       a live claim by another  -> BUSY (out->retry_ms = when to ask again, > 0) or
 *                                   MISMATCH when its fingerprint differs;
 *       a live claim by THIS handle (another call of this process) -> BUSY likewise;
 *       a dead claim (holder gone, lease over) or none -> take it for this handle with
 *                                   lease l->lease_ms from now_ms: OWNED (reclaimed = 1
 *                                   when a dead claim was replaced);
 *       storage failure          -> FAILED with l->err set (ah__ledger_seterr).
 *     An asynchronous backend may instead return PENDING and later call cb(ud, answer)
 *     from the event loop (never before claim returns), unless cancel(l, ud) came first.
 *     A synchronous backend never returns PENDING and ignores cb (the front end keeps
 *     BUSY waiters).
 *   - complete(l, key, fp, receipt, now_ms, out, cb, ud): ONE atomic step, durable
 *     before DONE is reported: when an entry exists -> DONE with duplicate = 1 (same fp)
 *     or MISMATCH; else insert the entry (seq = next, created_ms = now_ms) -> DONE with
 *     duplicate = 0 and out->entry.seq. In both DONE cases, and on MISMATCH, the claim
 *     of THIS handle on key (if any) is dropped in the same step. PENDING as for claim.
 *   - abandon(l, key): drop this handle's claim on key, if any; never fails visibly (log
 *     a failure with ah__log; the lease then ends the claim). May be asynchronous
 *     (fire and forget).
 *   - cancel(l, ud): forget every callback due to ud (NULL for synchronous backends).
 *   - find / count / claims / foreach: synchronous reads (AH_OK, AH_ERR_NOT_FOUND for
 *     find, or a storage error with l->err set). find fills *fp with the stored
 *     fingerprint. foreach visits entries in seq order.
 *   - set_loop(l, loop): optional; see the field.
 *   - close(l): free everything, the handle included. Claims still held by this handle
 *     are dropped first where the storage outlives the process (so a clean exit frees
 *     its keys at once instead of at lease expiry).
 * Strings a backend hands out (entry key/receipt) stay valid until the next operation
 * on the handle.
 */
#ifndef AH_LEDGER_INTERNAL_H
#define AH_LEDGER_INTERNAL_H

#include "internal.h"

#include "agenthost/ledger.h"

#include <stddef.h>

typedef struct ah__ledger_ops {
    const char *name; /* "memory", "sqlite", "redis" */
    ah_ledger_answer (*claim)(ah_ledger *l, const char *key, const char *fp,
                              int64_t now_ms, ah_ledger_result *out, ah_ledger_fn cb,
                              void *ud);
    ah_ledger_answer (*complete)(ah_ledger *l, const char *key, const char *fp,
                                 const char *receipt, int64_t now_ms,
                                 ah_ledger_result *out, ah_ledger_fn cb, void *ud);
    void (*abandon)(ah_ledger *l, const char *key);
    void (*cancel)(ah_ledger *l, void *ud); /* NULL: synchronous backend */
    ah_status (*find)(ah_ledger *l, const char *key, ah_ledger_entry *e, const char **fp);
    ah_status (*count)(ah_ledger *l, int64_t *n);
    ah_status (*claims)(ah_ledger *l, int64_t *n);
    ah_status (*foreach)(ah_ledger *l, ah_ledger_entry_fn fn, void *ud);
    void (*close)(ah_ledger *l);
    /* Optional (NULL: ah_ledger_set_loop has nothing to do): answer claims, completions
     * and releases that carry a callback through this loop from now on (SQLite: on a
     * writer thread, so the loop never waits for a commit). */
    ah_status (*set_loop)(ah_ledger *l, ah_loop *loop);
} ah__ledger_ops;

typedef struct ah__ledger_waiter ah__ledger_waiter; /* front end's BUSY waiters */

enum { AH__LEDGER_ERR_MAX = 512 };

/* How long a backend keeps trying to record a receipt whose effect already happened
 * (SQLite: a write lock that stays busy; Redis: a connection that is down, a stalled
 * or restarting server) before it reports the receipt lost: losing a receipt costs more
 * than waiting (the key may run its effect again). A claim never waits this long. */
#define AH__LEDGER_PATIENCE_MS 60000

struct ah_ledger {
    const ah__ledger_ops *ops;
    const ah_clock *clock; /* borrowed; NULL = real wall clock */
    int64_t lease_ms;
    ah__ledger_waiter *waiters;
    size_t nwaiters, capwaiters;
    char err[AH__LEDGER_ERR_MAX];
};

/* Initialise the front-end part of a backend's handle (lease = default). */
void ah__ledger_init(ah_ledger *l, const ah__ledger_ops *ops);
/* Set l->err, printf-style. */
void ah__ledger_seterr(ah_ledger *l, const char *fmt, ...) AH__PRINTF(2, 3);
/* Set l->err to fmt_before + 'key' (cut to 80 bytes) + after. */
void ah__ledger_key_error(ah_ledger *l, const char *fmt_before, const char *key,
                          const char *after);
/* An entry found under key with stored fingerprint `stored`: fills out and answers DONE
 * when fp equals it, else sets the mismatch message and answers MISMATCH. */
ah_ledger_answer ah__ledger_entry_answer(ah_ledger *l, const char *key, const char *fp,
                                        const char *stored, const ah_ledger_entry *e,
                                        ah_ledger_result *out);

/* Tests (ledger_sqlite.c): call fn(ud) before each receipt's COMMIT, on the thread that
 * commits it (the writer thread once a loop is set); fn may block to hold the commit in
 * flight. NULL removes it. No-op on other backends. */
void ah__ledger_sqlite_hold(ah_ledger *l, void (*fn)(void *ud), void *ud);

#endif
