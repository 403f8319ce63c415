/* agenthost/ledger.h - the tool idempotency ledger (docs/tools-and-ledger.md).
 *
 * A ledger records each successful side effect under its idempotency key, so a second
 * call with the same key returns the ORIGINAL receipt and sequence number instead of
 * running the effect again. Two backends sit behind one handle:
 *   - memory (ah_ledger_new_memory): lives as long as the handle;
 *   - SQLite (ah_ledger_open): persistent; every record is COMMITTED (WAL journal,
 *     synchronous=FULL) before ah_ledger_record() returns or DONE is answered, so a
 *     crash, a kill or a power loss after that never re-runs that effect. Given a loop
 *     (ah_ledger_set_loop), it writes on a thread of its own so the fsync of a commit
 *     never stalls the loop. See docs/tools-and-ledger.md.
 *
 * An entry is: key (caller-chosen string), a fingerprint of the caller's canonical
 * arguments string (the arguments themselves are not stored), the receipt (an opaque
 * string; the Lua layer stores JSON), a sequence number (monotonic per ledger, starting
 * at 1, never reused) and its creation time (wall-clock ms). Entries are never changed or
 * removed. Besides entries, a ledger holds CLAIMS: keys whose body is running right now
 * (claim-then-execute, below).
 *
 * Threading: a handle is used from one thread at a time (with a loop set: the loop's
 * thread; the handle's own writer thread is internal). Two processes may open the same
 * SQLite file, one after the other or at once (writers wait on SQLite's lock).
 * Strings in an ah_ledger_entry filled by the ledger are BORROWED: valid until the next
 * call on the same ledger (or ah_ledger_free); copy what you keep.
 */
#ifndef AGENTHOST_LEDGER_H
#define AGENTHOST_LEDGER_H

#include "agenthost/export.h"

#include "agenthost/clock.h"
#include "agenthost/status.h"

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct ah_ledger ah_ledger;
typedef struct ah_loop ah_loop; /* agenthost/loop.h */

typedef struct ah_ledger_entry {
    const char *key;     /* borrowed, see above */
    const char *receipt; /* borrowed, see above */
    int64_t seq;         /* >= 1 */
    int64_t created_ms;  /* wall-clock ms since the Unix epoch */
} ah_ledger_entry;

/* "fnv1a64:" + 16 lowercase hex digits + NUL. */
enum { AH_LEDGER_FINGERPRINT_SIZE = 25 };

/* A new, empty in-memory ledger. NULL on allocation failure. */
AH_EXPORT ah_ledger *ah_ledger_new_memory(void);

/* Open (creating when absent) the SQLite ledger at `path`: AH_OK with *out set. On
 * failure *out = NULL and, when err is not NULL, err gets a message naming the path and
 * the cause: AH_ERR_INVALID (empty path), AH_ERR_IO (the file cannot be created or
 * opened, is read-only, is not an SQLite database, is an SQLite database that is not an
 * agenthost ledger, or has a newer ledger format), AH_ERR_NOMEM. */
AH_EXPORT ah_status ah_ledger_open(const char *path, ah_ledger **out, char *err, size_t errsize);

/* Close and free. Every recorded entry is already durable; nothing is lost here.
 * NULL is a no-op. */
AH_EXPORT void ah_ledger_free(ah_ledger *l);

/* Answer claims, completions and releases through `loop` from now on (borrowed; it must
 * outlive the ledger; call on the loop's thread before the first claim). SQLite: a
 * writer thread with a connection of its own runs them, one at a time in the order they
 * were asked, so the loop goes on running (streams, timers) while a commit waits for its
 * fsync; ah_ledger_claim and ah_ledger_complete WITH a callback then answer
 * AH_LEDGER_PENDING and the answer comes through the callback on the loop thread, after
 * the transaction committed (DONE means the receipt is on disk). Calls without a
 * callback (ah_ledger_record, a claim with cb NULL) and the reads still run on the
 * caller's thread. ah_ledger_free waits for the writes already asked for. Memory and
 * Redis ledgers: AH_OK, nothing changes (memory never waits; Redis answers through its
 * own loop). AH_OK; AH_ERR_INVALID (NULL); AH_ERR_STATE (another loop was set, or
 * claims are waiting); AH_ERR_IO (the second connection cannot be opened: errmsg);
 * AH_ERR_NOMEM; AH_ERR_INTERNAL (no thread). A blocking driver that does not step the
 * loop (ah_tool_call_run) needs a ledger without a loop. */
AH_EXPORT ah_status ah_ledger_set_loop(ah_ledger *l, ah_loop *loop);

/* Use this clock's wall_ms for created_ms (borrowed; must outlive the ledger).
 * NULL restores the real clock. */
AH_EXPORT void ah_ledger_set_clock(ah_ledger *l, const ah_clock *clock);

/* "memory" or "sqlite". */
AH_EXPORT const char *ah_ledger_backend(const ah_ledger *l);

/* The message of the last failed call on this ledger ("" when none). Borrowed. It says
 * what went wrong ("SQLite: database is locked", "missing key"), not which call failed:
 * the caller knows that and says it ("ledger claim failed: SQLite: ..."). */
AH_EXPORT const char *ah_ledger_errmsg(const ah_ledger *l);

/* Look up `key`. args_canonical is the caller's canonical arguments string (NULL is the
 * same as ""); only its fingerprint is compared.
 *   AH_OK            found with the same fingerprint; *out filled (strings borrowed).
 *   AH_ERR_NOT_FOUND no entry under key; *out untouched.
 *   AH_ERR_STATE     found, but recorded with different arguments; errmsg says
 *                    "idempotency key 'K' reused with different arguments".
 *   AH_ERR_INVALID   l, key or out is NULL.
 *   AH_ERR_IO / AH_ERR_NOMEM on a storage failure (errmsg says which). */
AH_EXPORT ah_status ah_ledger_lookup(ah_ledger *l, const char *key, const char *args_canonical,
                                     ah_ledger_entry *out);

/* Record a successful effect. receipt must not be NULL (use "null" for "no value").
 *   AH_OK with *duplicate_out = 0: inserted and committed; *seq_out is its new seq.
 *   AH_OK with *duplicate_out = 1: the key was already recorded with the same arguments
 *       (a repeat or a race); nothing was written and *seq_out is the ORIGINAL seq
 *       (ah_ledger_lookup gives its receipt).
 *   AH_ERR_STATE: the key was already recorded with different arguments; nothing written.
 *   AH_ERR_INVALID / AH_ERR_IO / AH_ERR_NOMEM as for lookup.
 * seq_out and duplicate_out may be NULL. */
AH_EXPORT ah_status ah_ledger_record(ah_ledger *l, const char *key, const char *args_canonical,
                                     const char *receipt, int64_t *seq_out, int *duplicate_out);

/* Number of entries, or -1 on a storage failure (errmsg says why). */
AH_EXPORT int64_t ah_ledger_count(ah_ledger *l);

/* Called once per entry in seq order; `e` is borrowed for that call only. Return 0 to go
 * on, non-zero to stop early. fn must not call into the same ledger. */
typedef int (*ah_ledger_entry_fn)(void *ud, const ah_ledger_entry *e);

/* Visit every entry in seq order. AH_OK (also when fn stopped early) or a storage
 * error. */
AH_EXPORT ah_status ah_ledger_foreach(ah_ledger *l, ah_ledger_entry_fn fn, void *ud);

/* ---- claim-then-execute ----------------------------------------------------------------
 *
 * ah_ledger_record() alone deduplicates only when the effect is recorded: two callers that
 * look a key up at once both run the body. A caller that must run the body AT MOST ONCE
 * per key claims the key first:
 *
 *   ah_ledger_claim(l, key, args, &r, cb, ud)
 *     OWNED    -> this caller holds the key: run the body, then
 *                 ah_ledger_complete(l, key, args, receipt, ...) on success (records the
 *                 receipt and drops the claim in one step) or ah_ledger_abandon(l, key)
 *                 when the body failed without an effect (the key becomes free again);
 *     DONE     -> already recorded with the same arguments: r.entry is the ORIGINAL
 *                 (receipt, seq); do not run the body;
 *     BUSY     -> another live holder has the key in flight: do not run the body; claim
 *                 again after r.retry_ms at the latest, or earlier when cb is called
 *                 with BUSY (the key was completed or abandoned in this process);
 *     MISMATCH -> the key is recorded or claimed with different arguments (errmsg says
 *                 so): do not run the body;
 *     FAILED   -> the ledger cannot answer (errmsg): do not run the body (fail closed);
 *     PENDING  -> only from an asynchronous backend (a network store): the answer comes
 *                 later through cb(ud, &answer), from the event loop, never from inside
 *                 ah_ledger_claim itself. Until then *out is untouched.
 *
 * A claim belongs to the handle that took it. A claim whose holder is dead may be taken
 * over (the answer is OWNED with reclaimed = 1): memory ledgers have no other process;
 * the SQLite ledger stores the holder's pid, boot id (/proc/sys/kernel/random/boot_id),
 * pid namespace and a lease: a claim is dead when its boot id differs from ours (the
 * machine rebooted), when it was taken on this boot in our pid namespace by a process
 * that no longer exists, or when its lease (lease_ms, default AH_LEDGER_DEFAULT_LEASE_MS,
 * counted from the claim) has run out. A holder in another pid namespace (another
 * container sharing the file) is never judged by its pid, only by its lease. An effect
 * whose holder was taken over because its lease ran out while it was still running may
 * run twice: give leases longer than the longest body, and pass the key on to the
 * downstream service.
 *
 * Callbacks: cb is called at most once per ah_ledger_claim / ah_ledger_complete that
 * returned PENDING or BUSY, with the answer (its strings borrowed for the call). A
 * callback must not call into the ledger except ah_ledger_cancel: it notes the answer
 * and tells its driver to step (the driver then claims again, completes...). It may run
 * from inside another caller's ah_ledger_complete / ah_ledger_abandon on this handle (the
 * in-process wake-up) or from the event loop (an asynchronous answer), never from inside
 * the ah_ledger_claim / _complete call that registered it. ah_ledger_cancel(l, ud) drops
 * every callback still due to ud: call it before freeing ud. */

enum { AH_LEDGER_DEFAULT_LEASE_MS = 30000 };

#define AH_LEDGER_ANSWER_MAP(X)                                                           \
    X(PENDING, "pending")                                                                 \
    X(OWNED, "owned")                                                                     \
    X(DONE, "done")                                                                       \
    X(BUSY, "busy")                                                                       \
    X(MISMATCH, "mismatch")                                                               \
    X(FAILED, "failed")

typedef enum ah_ledger_answer {
#define AH__LA_ENUM(name, s) AH_LEDGER_##name,
    AH_LEDGER_ANSWER_MAP(AH__LA_ENUM)
#undef AH__LA_ENUM
        AH_LEDGER_ANSWER_COUNT_
} ah_ledger_answer;

AH_EXPORT const char *ah_ledger_answer_name(ah_ledger_answer a); /* "unknown" out of range */

typedef struct ah_ledger_result {
    ah_ledger_answer answer;
    ah_ledger_entry entry; /* DONE: the recorded entry (borrowed, see above) */
    int duplicate;         /* DONE from complete/record: someone else recorded it first */
    int reclaimed;         /* OWNED: a dead holder's claim was taken over */
    int64_t retry_ms;      /* BUSY: ask again after at most this long */
    int64_t fence;         /* OWNED: the claim's fencing token, increasing with every
                              claim of the ledger (Redis); 0 when the backend has none */
} ah_ledger_result;

/* Borrowed result for the call only. */
typedef void (*ah_ledger_fn)(void *ud, const ah_ledger_result *r);

/* Claim `key` for running its body once (see above). args_canonical as for lookup.
 * cb may be NULL (then a BUSY caller must poll after retry_ms; an asynchronous backend
 * needs cb). Returns the answer, also stored in out->answer. */
AH_EXPORT ah_ledger_answer ah_ledger_claim(ah_ledger *l, const char *key, const char *args_canonical,
                                           ah_ledger_result *out, ah_ledger_fn cb, void *ud);

/* Record the receipt of an OWNED claim and drop the claim, atomically (SQLite: one
 * transaction, committed before DONE is returned). Also usable without a claim (that is
 * ah_ledger_record). DONE: out->entry.seq is the entry's seq, out->duplicate = 1 when
 * the key was already recorded (same arguments; out->entry is then the original);
 * MISMATCH; FAILED; PENDING (asynchronous backends: the answer comes through cb). Wakes
 * this handle's BUSY waiters on the key. */
AH_EXPORT ah_ledger_answer ah_ledger_complete(ah_ledger *l, const char *key, const char *args_canonical,
                                              const char *receipt, ah_ledger_result *out,
                                              ah_ledger_fn cb, void *ud);

/* Drop this handle's claim on key (no effect happened); no-op when it holds none. Never
 * fails visibly: a release that cannot be written is logged, and the claim then dies by
 * its lease. Wakes this handle's BUSY waiters on the key. */
AH_EXPORT void ah_ledger_abandon(ah_ledger *l, const char *key);

/* Drop every callback still due to ud. Safe with nothing due. */
AH_EXPORT void ah_ledger_cancel(ah_ledger *l, void *ud);

/* The claim lease in ms (> 0), for claims taken from now on. Default
 * AH_LEDGER_DEFAULT_LEASE_MS. AH_ERR_INVALID when ms <= 0. */
AH_EXPORT ah_status ah_ledger_set_lease_ms(ah_ledger *l, int64_t ms);
AH_EXPORT int64_t ah_ledger_lease_ms(const ah_ledger *l);

/* Number of claims held in flight (all holders, this ledger's storage), or -1. */
AH_EXPORT int64_t ah_ledger_claims(ah_ledger *l);

/* The fingerprint stored for an arguments string (NULL is ""): FNV-1a 64 over its bytes,
 * as text. It detects a key reused with different arguments; it is not a security
 * hash. */
AH_EXPORT void ah_ledger_fingerprint(const char *args_canonical,
                                     char out[AH_LEDGER_FINGERPRINT_SIZE]);

#ifdef __cplusplus
}
#endif
#endif
