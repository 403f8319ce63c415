/* redis_internal.h - commands on an ah_redis for the core's own users (budget, pacer,
 * ledger). Replies are hiredis's redisReply; nothing here is installed. */
#ifndef AH_REDIS_INTERNAL_H
#define AH_REDIS_INTERNAL_H

#include "agenthost/redis.h"

#ifdef AH_NO_REDIS
/* Built without hiredis (AH_WITH_REDIS=OFF, redis_none.c): no reply ever arrives, but the
 * code that reads replies still compiles against hiredis's shape of one. */
typedef struct redisReply {
    int type;
    long long integer;
    double dval;
    size_t len;
    char *str;
    size_t elements;
    struct redisReply **element;
} redisReply;
enum { REDIS_REPLY_STRING = 1, REDIS_REPLY_ARRAY = 2, REDIS_REPLY_INTEGER = 3 };
#else
#include <hiredis/hiredis.h>
#endif

/* A server-side script: its source and SHA-1 (computed once, from the source). */
typedef struct ah__redis_script {
    const char *src;
    char sha[41];
} ah__redis_script;

void ah__redis_script_init(ah__redis_script *s, const char *src);

/* The caller's own callback, carried by the request so nothing else is allocated (a
 * cancelled request then leaks nothing). fn is cast back to its real type by its user. */
typedef struct ah__redis_user {
    void (*fn)(void);
    void *ud;
} ah__redis_user;

/* The outcome of one command: reply non-NULL on success (never an error reply); else
 * err says why (an error reply's text, "timeout", "connection lost ..."). */
typedef void (*ah__redis_fn)(void *ud, const ah__redis_user *user, const redisReply *reply,
                             const char *err);

/* What a command may do (flags of the _ex forms):
 *   AH__REDIS_RESEND   its effect is idempotent: lost in flight with the connection (or
 *                      answered BUSY, LOADING, READONLY, ... while a failover or a long
 *                      script elsewhere runs), it is sent again until its deadline;
 *   AH__REDIS_PATIENT  it waits for a connection even in an outage (every attempt to
 *                      connect failing) until its deadline; others fail at once then;
 *   AH__REDIS_KEEP     it is still sent when its caller cancels it (the write matters:
 *                      a receipt, a claim's release). */
enum { AH__REDIS_RESEND = 1, AH__REDIS_PATIENT = 2, AH__REDIS_KEEP = 4 };

/* Send one command (argv with lengths). While the connection is down or being made, it
 * waits for it (reconnecting at once after a connection that served was lost); its
 * deadline is timeout_ms from now (0 = the connection's command_timeout_ms), after
 * which fn gets an error ("no connection within ...", "no reply within ..."). Returns
 * NULL when it cannot be sent: in an outage (the last attempt to connect failed; not
 * for PATIENT commands), out of memory: the caller decides without Redis. Otherwise fn
 * runs later on the loop, exactly once unless cancelled, never from inside this call.
 * fn may be NULL (fire and forget). When script is non-NULL, argv must start
 * "EVALSHA", "<sha>": on NOSCRIPT the command is sent again once as EVAL with the
 * source. */
ah_redis_req *ah__redis_command_ex(ah_redis *r, const ah__redis_script *script, int argc,
                                   const char **argv, const size_t *lens, unsigned flags,
                                   int timeout_ms, ah__redis_fn fn, void *ud,
                                   ah__redis_user user);
ah_redis_req *ah__redis_command(ah_redis *r, const ah__redis_script *script, int argc,
                                const char **argv, const size_t *lens, ah__redis_fn fn,
                                void *ud, ah__redis_user user);

/* EVALSHA script with keys and args given as C strings. */
ah_redis_req *ah__redis_eval_ex(ah_redis *r, const ah__redis_script *script, int nkeys,
                                const char *const *keys, int nargs, const char *const *args,
                                unsigned flags, int timeout_ms, ah__redis_fn fn, void *ud,
                                ah__redis_user user);
ah_redis_req *ah__redis_eval(ah_redis *r, const ah__redis_script *script, int nkeys,
                             const char *const *keys, int nargs, const char *const *args,
                             ah__redis_fn fn, void *ud, ah__redis_user user);

/* From inside the callback of q (an EVALSHA request that got its reply): send another
 * EVALSHA of the same script under the same handle, with a fresh deadline, so that a
 * caller's handle stays valid across a sequence of commands (a paged listing): q's
 * callback runs again with that reply. 1 when it will be sent; 0 (nothing sent) when q
 * was cancelled, is not in its callback, or out of memory. */
int ah__redis_eval_again(ah_redis_req *q, int nkeys, const char *const *keys, int nargs,
                         const char *const *args);

/* Why the connection is not up: the last attempt's failure or the loss ("authentication
 * failed (WRONGPASS ...)", "connection refused", ...), or "unreachable". */
const char *ah__redis_last_error(const ah_redis *r);

/* SHA-1 of data as 40 lowercase hex digits + NUL. */
void ah__sha1_hex(const void *data, size_t len, char out[41]);

/* Log "what" once per outage of r (the first call after each loss); returns 1 when it
 * logged. Each caller passes its own flag so budget, pacer and ledger each say it once. */
int ah__redis_note_down(ah_redis *r, int *logged_flag, const char *what);
/* Reset the flag when r is up again (logs "back on Redis" when it had been set). */
void ah__redis_note_up(ah_redis *r, int *logged_flag, const char *what);

/* ratelimit.c: feed a response's headers to the pacer (call.c, on every response head);
 * a hold they ask for is capped at max_hold_ms (the call's max_retry_after_ms). */
void ah__rate_limit_observe(ah_rate_limit *rl, ah_loop *loop, const ah_header *h, size_t n,
                            int64_t max_hold_ms);

/* The shared retry budget's hooks used by retry_budget.c. */
typedef struct ah__budget_shared ah__budget_shared;
void ah__budget_shared_free(ah__budget_shared *s);
/* Refund on success through Redis; 0 when Redis is down (then refund locally). */
int ah__budget_shared_refund(ah__budget_shared *s);
void ah__retry_budget_attach(ah_retry_budget *b, ah__budget_shared *s);
ah__budget_shared *ah__retry_budget_shared(const ah_retry_budget *b);

#endif
