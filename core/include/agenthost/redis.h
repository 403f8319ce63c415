/* agenthost/redis.h - Redis as the shared store of a fleet: one connection driven by the
 * host's own loop, a fleet-wide retry budget, request pacing (GCRA) and the idempotency
 * ledger's Redis backend (docs/scale-out.md).
 *
 * The connection uses hiredis's asynchronous API on an ah_loop (fd watches, loop timers):
 * no thread, never a blocking call on the loop. It connects at creation and is up once
 * its handshake ([AUTH] [SELECT] PING) answered. Every command has a deadline
 * (command_timeout_ms): one that finds the connection down (an idle timeout, a killed
 * client, a failover) waits for the reconnect within it; after a connection that served
 * the reconnect is immediate, after a failed attempt it backs off, and while attempts
 * fail (an outage) commands do not wait: the budget and the pacer decide locally, the
 * ledger fails its claims closed. A command without a reply within command_timeout_ms
 * drops the connection, so a stalled server cannot hold a caller. A password in the URL
 * is never logged: messages show "redis://:***@host:port/db"; a refused one reads
 * "authentication failed (WRONGPASS ...)".
 *
 * Threads: an ah_redis and everything built on it belong to the loop's thread.
 */
#ifndef AGENTHOST_REDIS_H
#define AGENTHOST_REDIS_H

#include "agenthost/export.h"

#include "agenthost/loop.h"
#include "agenthost/policy.h"
#include "agenthost/status.h"

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The ledger of agenthost/ledger.h (the Redis backend below makes one); only a pointer
 * here, so the call layer, which uses the budget and the pacer, knows nothing of tools. */
typedef struct ah_ledger ah_ledger;

/* ---- URLs -------------------------------------------------------------------------- */

/* redis://[[user]:password@]host[:port][/db]  (port 6379, db 0 by default; host an IP
 * address or a name, [::1] for IPv6), or unix:/path/to/socket[?db=N] (also
 * unix:///path and redis+unix:///path). */
typedef struct ah_redis_url {
    int is_unix;
    char host[256]; /* TCP host (brackets removed) */
    int port;
    char path[256]; /* unix socket path */
    char password[256]; /* "" when none */
    int db;
} ah_redis_url;

/* AH_OK, or AH_ERR_INVALID with a message naming the bad part (never the password). */
AH_EXPORT ah_status ah_redis_url_parse(const char *url, ah_redis_url *out, char *err, size_t errsize);
/* The URL as it may be logged: the password replaced by "***". */
AH_EXPORT void ah_redis_url_display(const ah_redis_url *u, char *buf, size_t size);

/* ---- the connection ---------------------------------------------------------------- */

typedef struct ah_redis ah_redis;

typedef struct ah_redis_options {
    int connect_timeout_ms; /* default 1000 */
    int command_timeout_ms; /* default 1000: a command's deadline, and its reply's */
    int reconnect_min_ms;   /* first back-off after a loss, default 100 (doubles) */
    int reconnect_max_ms;   /* default 2000 */
} ah_redis_options;

AH_EXPORT void ah_redis_options_init(ah_redis_options *o);

/* Parse the URL and start connecting (non-blocking). AH_OK with *out set; AH_ERR_INVALID
 * (*out = NULL) with a message on a bad URL or no loop, or AH_ERR_NOMEM; an unreachable
 * server is not an error here (see ah_redis_ready). opts NULL = defaults. */
AH_EXPORT ah_status ah_redis_new(ah_loop *loop, const char *url, const ah_redis_options *opts,
                                 ah_redis **out, char *err, size_t errsize);
/* Close the connection. Pending commands are dropped without their callbacks: cancel
 * what you wait for first (the budget, pacer and ledger do). Not from inside a callback
 * of this connection. NULL is a no-op. */
AH_EXPORT void ah_redis_free(ah_redis *r);
/* 1 when connected (commands go to the server), 0 while connecting or down. */
AH_EXPORT int ah_redis_ready(const ah_redis *r);
/* The display URL (password hidden). */
AH_EXPORT const char *ah_redis_name(const ah_redis *r);
AH_EXPORT ah_loop *ah_redis_loop(const ah_redis *r);
/* Commands sent and connections made so far (for tests and stats). */
AH_EXPORT uint64_t ah_redis_commands(const ah_redis *r);
AH_EXPORT uint64_t ah_redis_connects(const ah_redis *r);

/* A command in flight; cancel it to stop its callback from running (the reply, when it
 * comes, is dropped). Handles stay valid until their callback ran or they were
 * cancelled, whichever is first. */
typedef struct ah_redis_req ah_redis_req;
AH_EXPORT void ah_redis_req_cancel(ah_redis_req *q); /* NULL is a no-op */

/* ---- the fleet-wide retry budget ---------------------------------------------------
 * The token bucket of ah_retry_budget_new() kept in Redis under `key`, shared by every
 * process that names the key: each decision is one server-side script (EVALSHA, loaded
 * on first use and again on NOSCRIPT), atomic on the server. When Redis cannot be
 * reached, the budget falls back to a local bucket with the same numbers (logged once
 * per outage) and goes back to Redis when it returns. The budget borrows r, which must
 * outlive it; it then belongs to r's loop thread. AH_OK with *out set; AH_ERR_INVALID
 * (*out = NULL, message in err) for a missing key or bad numbers; AH_ERR_NOMEM. */
AH_EXPORT ah_status ah_retry_budget_new_redis(ah_redis *r, const char *key, double max_tokens,
                                              double token_ratio, ah_retry_budget **out, char *err,
                                              size_t errsize);
/* 1 for a budget made by ah_retry_budget_new_redis. */
AH_EXPORT int ah_retry_budget_is_shared(const ah_retry_budget *b);
/* 1 while its decisions go to Redis, 0 while on the local fallback (or not shared). */
AH_EXPORT int ah_retry_budget_using_redis(const ah_retry_budget *b);

/* Spend a retry token. A local budget (or a shared one whose Redis is unreachable: the
 * last attempt to connect failed) decides at once: returns 1 (allowed) or 0 (throttled)
 * and fn is not called. Otherwise (connected, or reconnecting after a dropped
 * connection) it returns -1 and calls fn(ud, allowed) later on the loop, exactly once
 * unless *pending is cancelled first; a failed or timed-out command decides with the
 * local fallback. Never calls fn before returning. */
typedef void (*ah_retry_budget_fn)(void *ud, int allowed);
AH_EXPORT int ah_retry_budget_spend_async(ah_retry_budget *b, ah_retry_budget_fn fn, void *ud,
                                          ah_redis_req **pending);

/* ---- pacing: GCRA over requests and tokens ------------------------------------------
 * Generic cell rate algorithm: each request reserves the next slot of a schedule with
 * one slot every 60000 / requests_per_minute ms (burst slots may be used at once); a
 * caller whose slot is in the future waits until it. Tokens (input + output, as the
 * provider reports them after a response) are charged after the fact on a second
 * schedule of 60000 / tokens_per_minute ms per token with one minute of tolerance: a
 * request waits while the fleet is more than a minute of tokens ahead. Local (r NULL:
 * one process, thread-safe) or shared in Redis under key (one script per decision, on
 * the server's clock; falls back to local pacing while Redis is down, logged once). */
typedef struct ah_rate_limit ah_rate_limit;

typedef struct ah_rate_limit_config {
    double requests_per_minute; /* 0 = no request limit */
    double tokens_per_minute;   /* 0 = no token limit */
    int burst;                  /* requests allowed back to back, default (0) 1 */
    const char *key;            /* Redis key prefix; required with a connection */
    int ignore_headers;         /* 1: do not follow the providers' rate-limit headers */
} ah_rate_limit_config;

/* AH_OK with *out set; AH_ERR_INVALID (*out = NULL) with a message naming the field on a
 * bad config (both limits 0, a negative one, shared without key); AH_ERR_NOMEM. r
 * borrowed (NULL = local). */
AH_EXPORT ah_status ah_rate_limit_new(const ah_rate_limit_config *cfg, ah_redis *r,
                                      ah_rate_limit **out, char *err, size_t errsize);
AH_EXPORT void ah_rate_limit_free(ah_rate_limit *rl);
AH_EXPORT int ah_rate_limit_is_shared(const ah_rate_limit *rl);

/* Which limit made a request wait: "requests_per_minute" or "tokens_per_minute". */
typedef void (*ah_rate_limit_fn)(void *ud, int64_t wait_ms, const char *limit);
/* Reserve a slot for one request, times taken on `loop`'s clock when local. Decided at
 * once (local, or Redis unreachable): returns 0 and sets *wait_ms (0 = go now) and *limit.
 * Shared: returns 1 and calls fn later on the loop (never before returning), exactly once
 * unless *pending is cancelled; on a Redis error the local schedule decides. */
AH_EXPORT int ah_rate_limit_acquire(ah_rate_limit *rl, ah_loop *loop, int64_t *wait_ms,
                                    const char **limit, ah_rate_limit_fn fn, void *ud,
                                    ah_redis_req **pending);
/* Charge tokens a response used (no-op without a token limit). */
AH_EXPORT void ah_rate_limit_charge(ah_rate_limit *rl, ah_loop *loop, int64_t tokens);
/* Hold the schedule: no request slot before req_ms from now, no token slot before
 * tok_ms from now (< 0 = leave that one). The call state machine does this by itself
 * when a response's headers say a limit is exhausted (anthropic-ratelimit-*-remaining
 * or x-ratelimit-remaining-* = 0 with its reset time), unless ignore_headers: the fleet
 * then waits for the reset instead of collecting 429s; that hold is capped at the call's
 * max_retry_after_ms. A hold given here is taken as it is. */
AH_EXPORT void ah_rate_limit_hold(ah_rate_limit *rl, ah_loop *loop, int64_t req_ms, int64_t tok_ms);

/* ---- the idempotency ledger on Redis ------------------------------------------------
 * The claim-then-execute ledger of agenthost/ledger.h, shared by every process naming
 * the same prefix on one Redis database. Same semantics as memory and SQLite (a
 * duplicate gets the original receipt and seq; the same key with other arguments is
 * MISMATCH; a key in flight elsewhere is BUSY), plus what many hosts need: a claim is a
 * lease (lease_ms, on the server's clock) with a fencing token, and a claim whose
 * holder died is taken over once its lease is over (OWNED, reclaimed = 1): the one case
 * where an effect may run twice (pass the key on to the downstream service). Fencing
 * tokens of one prefix strictly increase in the order claims are granted, across keys,
 * also after Redis lost its data (max(last + 1, the server's clock in microseconds):
 * docs/scale-out.md). Entries expire after ttl_s (0 = never). claim and complete answer
 * asynchronously (PENDING, then the callback from the loop); a claim that gets no
 * answer within its deadline is FAILED: fail closed; a receipt (complete) waits for
 * Redis up to 60 s, as the SQLite ledger waits for its lock. The
 * synchronous reads (ah_ledger_lookup, _count, _claims, _foreach) read the snapshot of
 * the last ah_ledger_redis_refresh(); the synchronous ah_ledger_record() answers FAILED
 * (use ah_ledger_complete() with a callback); nothing blocks the loop. Durability is Redis's:
 * run it with appendonly yes / appendfsync always where a lost entry matters. */
typedef struct ah_ledger_redis_config {
    const char *url;                /* required */
    const char *prefix;             /* default "effects:" */
    int64_t ttl_s;                  /* entry lifetime, default 86400; 0 = forever */
    int64_t lease_ms;               /* default AH_LEDGER_DEFAULT_LEASE_MS */
    const ah_redis_options *redis;  /* NULL = defaults */
} ah_ledger_redis_config;

AH_EXPORT void ah_ledger_redis_config_init(ah_ledger_redis_config *c);
/* The ledger owns its connection (on loop). AH_OK with *out set; AH_ERR_INVALID
 * (*out = NULL) with a message on a bad URL or config, or AH_ERR_NOMEM; an unreachable
 * server is not an error here (calls then fail closed). */
AH_EXPORT ah_status ah_ledger_new_redis(ah_loop *loop, const ah_ledger_redis_config *cfg,
                                        ah_ledger **out, char *err, size_t errsize);
AH_EXPORT int ah_ledger_is_redis(const ah_ledger *l);
AH_EXPORT ah_redis *ah_ledger_redis_connection(const ah_ledger *l); /* borrowed, or NULL */
/* Take a snapshot of the entries (seq order) and the live claims for the synchronous
 * reads, page by page (one short script per 500 entries; an entry made or expired
 * during the walk may or may not be in it). AH_OK: fn(ud, status) comes later on the
 * loop, once, after the last page (unless *pending, valid until then, is cancelled);
 * otherwise an error at once (AH_ERR_IO when Redis is unreachable; errmsg says why). */
typedef void (*ah_ledger_refresh_fn)(void *ud, ah_status st);
AH_EXPORT ah_status ah_ledger_redis_refresh(ah_ledger *l, ah_ledger_refresh_fn fn, void *ud,
                                            ah_redis_req **pending);

#ifdef __cplusplus
}
#endif
#endif
