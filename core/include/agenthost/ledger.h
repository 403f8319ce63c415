/* agenthost/ledger.h - the tool idempotency ledger (docs/tools-and-ledger.md).
 *
 * A ledger records each successful side effect under its idempotency key, so a second
 * call with the same key returns the ORIGINAL receipt and sequence number instead of
 * running the effect again. Two backends sit behind one handle:
 *   - memory (ah_ledger_new_memory): lives as long as the handle;
 *   - SQLite (ah_ledger_open): persistent; every record is COMMITTED (WAL journal,
 *     synchronous=FULL) before ah_ledger_record() returns, so a crash, a kill or a power
 *     loss after it returns never re-runs that effect. See docs/tools-and-ledger.md.
 *
 * An entry is: key (caller-chosen string), a fingerprint of the caller's canonical
 * arguments string (the arguments themselves are not stored), the receipt (an opaque
 * string; the Lua layer stores JSON), a sequence number (monotonic per ledger, starting
 * at 1, never reused) and its creation time (wall-clock ms). Entries are never changed or
 * removed.
 *
 * Threading: a handle is used from one thread at a time. Two processes may open the same
 * SQLite file, one after the other or at once (writers wait on SQLite's lock).
 * Strings in an ah_ledger_entry filled by the ledger are BORROWED: valid until the next
 * call on the same ledger (or ah_ledger_free); copy what you keep.
 */
#ifndef AGENTHOST_LEDGER_H
#define AGENTHOST_LEDGER_H

#include "agenthost/clock.h"
#include "agenthost/status.h"

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct ah_ledger ah_ledger;

typedef struct ah_ledger_entry {
    const char *key;     /* borrowed, see above */
    const char *receipt; /* borrowed, see above */
    int64_t seq;         /* >= 1 */
    int64_t created_ms;  /* wall-clock ms since the Unix epoch */
} ah_ledger_entry;

/* "fnv1a64:" + 16 lowercase hex digits + NUL. */
enum { AH_LEDGER_FINGERPRINT_SIZE = 25 };

/* A new, empty in-memory ledger. NULL on allocation failure. */
ah_ledger *ah_ledger_new_memory(void);

/* Open (creating when absent) the SQLite ledger at `path`. On failure returns NULL and,
 * when err is not NULL, writes a message naming the path and the cause to err: the file
 * cannot be created or opened, is read-only, is not an SQLite database, is an SQLite
 * database that is not an agenthost ledger, or has a newer ledger format. */
ah_ledger *ah_ledger_open(const char *path, char *err, size_t errsize);

/* Close and free. Every recorded entry is already durable; nothing is lost here.
 * NULL is a no-op. */
void ah_ledger_free(ah_ledger *l);

/* Use this clock's wall_ms for created_ms (borrowed; must outlive the ledger).
 * NULL restores the real clock. */
void ah_ledger_set_clock(ah_ledger *l, const ah_clock *clock);

/* "memory" or "sqlite". */
const char *ah_ledger_backend(const ah_ledger *l);

/* The message of the last failed call on this ledger ("" when none). Borrowed. */
const char *ah_ledger_errmsg(const ah_ledger *l);

/* Look up `key`. args_canonical is the caller's canonical arguments string (NULL is the
 * same as ""); only its fingerprint is compared.
 *   AH_OK            found with the same fingerprint; *out filled (strings borrowed).
 *   AH_ERR_NOT_FOUND no entry under key; *out untouched.
 *   AH_ERR_STATE     found, but recorded with different arguments; errmsg says
 *                    "idempotency key 'K' reused with different arguments".
 *   AH_ERR_INVALID   l, key or out is NULL.
 *   AH_ERR_IO / AH_ERR_NOMEM on a storage failure (errmsg says which). */
ah_status ah_ledger_lookup(ah_ledger *l, const char *key, const char *args_canonical,
                           ah_ledger_entry *out);

/* Record a successful effect. receipt must not be NULL (use "null" for "no value").
 *   AH_OK with *duplicate_out = 0: inserted and committed; *seq_out is its new seq.
 *   AH_OK with *duplicate_out = 1: the key was already recorded with the same arguments
 *       (a repeat or a race); nothing was written and *seq_out is the ORIGINAL seq
 *       (ah_ledger_lookup gives its receipt).
 *   AH_ERR_STATE: the key was already recorded with different arguments; nothing written.
 *   AH_ERR_INVALID / AH_ERR_IO / AH_ERR_NOMEM as for lookup.
 * seq_out and duplicate_out may be NULL. */
ah_status ah_ledger_record(ah_ledger *l, const char *key, const char *args_canonical,
                           const char *receipt, int64_t *seq_out, int *duplicate_out);

/* Number of entries, or -1 on a storage failure (errmsg says why). */
int64_t ah_ledger_count(ah_ledger *l);

/* Called once per entry in seq order; `e` is borrowed for that call only. Return 0 to go
 * on, non-zero to stop early. fn must not call into the same ledger. */
typedef int (*ah_ledger_entry_fn)(void *ud, const ah_ledger_entry *e);

/* Visit every entry in seq order. AH_OK (also when fn stopped early) or a storage
 * error. */
ah_status ah_ledger_foreach(ah_ledger *l, ah_ledger_entry_fn fn, void *ud);

/* The fingerprint stored for an arguments string (NULL is ""): FNV-1a 64 over its bytes,
 * as text. It detects a key reused with different arguments; it is not a security
 * hash. */
void ah_ledger_fingerprint(const char *args_canonical,
                           char out[AH_LEDGER_FINGERPRINT_SIZE]);

#ifdef __cplusplus
}
#endif
#endif
