/* ledger_redis.c - the idempotency ledger on Redis, shared by every process naming the
 * same prefix: claim-then-execute with a lease and a fencing token, fingerprints,
 * receipts with a TTL (docs/scale-out.md).
 *
 * Layout under the prefix P (one Redis database, not a cluster: the scripts touch keys
 * they derive from the prefix):
 *   P e:<key>  hash {fp, receipt, seq, created, by}  the entry (expires after ttl)
 *   P c:<key>  hash {fp, holder, until, token, rec}  a claim (lease until `until`,
 *                                                     server ms)
 *   P seq      counter of entry seqs              P fence  the last claim token
 *   P idx      zset seq -> key (entries())        P claims zset until -> key
 *   P exp      zset expiry (server ms) -> key of the entries that have a ttl
 * Every operation is one script (atomic on the server, the server's clock for leases).
 *
 * Invariants:
 *   - claim and complete answer asynchronously (PENDING, then cb from the loop), never
 *     from inside the call; a BUSY answer is delivered after a poll delay (<= 100 ms,
 *     the lease's end at the latest) so a waiter does not hammer the server; any Redis
 *     error is FAILED (the tool call fails closed with kind `ledger`, the body does not
 *     run); a claim is dropped only by the holder whose token it carries.
 *   - Every script is idempotent for its caller, so the connection may send it again
 *     when it was lost in flight: a claim names its attempt (holder/nonce) and answers
 *     the same token to a resend of itself; a completion names its writer (`by`) and
 *     answers its own seq to a resend of itself; a release drops only its token.
 *   - A receipt (the effect ran) waits for Redis up to AH__LEDGER_PATIENCE_MS, as the
 *     SQLite ledger does, and is sent even when its caller stopped waiting.
 *   - Fencing tokens only grow, also across a Redis that lost its data: a new token is
 *     max(last + 1, the server's clock in microseconds).
 *   - No script walks more than a bounded number of members: a completion trims up to
 *     TRIM index members whose entry expired (P exp), a claim up to TRIM dead claims,
 *     and a listing is paged (PAGE entries per script).
 *   - The synchronous reads of the backend interface (find, count, claims, foreach)
 *     read the snapshot taken by the last ah_ledger_redis_refresh(): nothing here
 *     blocks the loop.
 */
#include "ledger_internal.h"
#include "redis_internal.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

enum { BUSY_POLL_MS = 100, PAGE = 500 };
/* Members a completion or a claim trims at most (a macro: the scripts spell it). */
#define TRIM 8
#define STR_(x) #x
#define STR(x)  STR_(x)

/* KEYS e, c, fence, claims; ARGV fp, holder (this attempt), lease ms, key. */
static const char CLAIM_SRC[] =
    "local t = redis.call('TIME')\n"
    "local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)\n"
    "local e = redis.call('HMGET', KEYS[1], 'fp', 'receipt', 'seq', 'created')\n"
    "if e[1] then\n"
    "  if e[1] == ARGV[1] then return {'done', e[2], tonumber(e[3]), tonumber(e[4])} end\n"
    "  return {'mismatch'}\n"
    "end\n"
    "local c = redis.call('HMGET', KEYS[2], 'fp', 'holder', 'until', 'token', 'rec')\n"
    "local reclaimed = 0\n"
    "if c[1] then\n"
    "  if c[2] == ARGV[2] then return {'owned', tonumber(c[4]), tonumber(c[5] or '0')} end\n"
    "  local left = tonumber(c[3]) - now\n"
    "  if left > 0 then\n"
    "    if c[1] ~= ARGV[1] then return {'busy_mismatch'} end\n"
    "    return {'busy', left}\n"
    "  end\n"
    "  reclaimed = 1\n"
    "end\n"
    "local tok = tonumber(redis.call('GET', KEYS[3]) or '0') + 1\n"
    "local us = tonumber(t[1]) * 1000000 + tonumber(t[2])\n"
    "if tok < us then tok = us end\n"
    "local stok = string.format('%.0f', tok)\n"
    "redis.call('SET', KEYS[3], stok)\n"
    "local untl = now + tonumber(ARGV[3])\n"
    "redis.call('HSET', KEYS[2], 'fp', ARGV[1], 'holder', ARGV[2], 'until', untl,\n"
    "           'token', stok, 'rec', reclaimed)\n"
    "redis.call('PEXPIRE', KEYS[2], tonumber(ARGV[3]) + 60000)\n"
    "redis.call('ZADD', KEYS[4], untl, ARGV[4])\n"
    "for _, k in ipairs(redis.call('ZRANGEBYSCORE', KEYS[4], '-inf', now - 60000,\n"
    "                              'LIMIT', 0, " STR(TRIM) ")) do\n"
    "  redis.call('ZREM', KEYS[4], k)\n"
    "end\n"
    "return {'owned', tok, reclaimed}\n";

/* KEYS e, c, seq, claims, idx, exp; ARGV fp, receipt, token, ttl ms, key, created,
 * writer, entry-key prefix. */
static const char COMPLETE_SRC[] =
    "local e = redis.call('HMGET', KEYS[1], 'fp', 'receipt', 'seq', 'created', 'by')\n"
    "local tok = redis.call('HGET', KEYS[2], 'token')\n"
    "if tok and tok == ARGV[3] then\n"
    "  redis.call('DEL', KEYS[2])\n"
    "  redis.call('ZREM', KEYS[4], ARGV[5])\n"
    "end\n"
    "if e[1] then\n"
    "  if e[5] == ARGV[7] then return {'done', tonumber(e[3])} end\n"
    "  if e[1] == ARGV[1] then return {'dup', e[2], tonumber(e[3]), tonumber(e[4])} end\n"
    "  return {'mismatch'}\n"
    "end\n"
    "local seq = redis.call('INCR', KEYS[3])\n"
    "redis.call('HSET', KEYS[1], 'fp', ARGV[1], 'receipt', ARGV[2], 'seq', seq,\n"
    "           'created', ARGV[6], 'by', ARGV[7])\n"
    "redis.call('ZADD', KEYS[5], seq, ARGV[5])\n"
    "local t = redis.call('TIME')\n"
    "local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)\n"
    "local ttl = tonumber(ARGV[4])\n"
    "if ttl > 0 then\n"
    "  redis.call('PEXPIRE', KEYS[1], ttl)\n"
    "  redis.call('ZADD', KEYS[6], now + ttl, ARGV[5])\n"
    "else\n"
    "  redis.call('ZREM', KEYS[6], ARGV[5])\n"
    "end\n"
    "for _, k in ipairs(redis.call('ZRANGEBYSCORE', KEYS[6], '-inf', now,\n"
    "                              'LIMIT', 0, " STR(TRIM) ")) do\n"
    "  redis.call('ZREM', KEYS[6], k)\n"
    "  if redis.call('EXISTS', ARGV[8] .. k) == 0 then redis.call('ZREM', KEYS[5], k) end\n"
    "end\n"
    "return {'done', seq}\n";

static const char ABANDON_SRC[] =
    "if redis.call('HGET', KEYS[1], 'token') == ARGV[1] then\n"
    "  redis.call('DEL', KEYS[1])\n"
    "  redis.call('ZREM', KEYS[2], ARGV[2])\n"
    "end\n"
    "return 0\n";

/* One page of the listing. KEYS idx, claims, exp; ARGV entry-key prefix, cursor (the
 * last seq seen), page size. Returns {live claims, next cursor or -1 at the end,
 * key, fp, receipt, seq, created, ...}; members whose entry is gone are dropped. */
static const char FETCH_SRC[] =
    "local t = redis.call('TIME')\n"
    "local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)\n"
    "local n = tonumber(ARGV[3])\n"
    "local out = {redis.call('ZCOUNT', KEYS[2], '(' .. string.format('%.0f', now), '+inf'),\n"
    "             -1}\n"
    "local page = redis.call('ZRANGEBYSCORE', KEYS[1], '(' .. ARGV[2], '+inf',\n"
    "                        'WITHSCORES', 'LIMIT', 0, n)\n"
    "for i = 1, #page, 2 do\n"
    "  local k = page[i]\n"
    "  local e = redis.call('HMGET', ARGV[1] .. k, 'fp', 'receipt', 'seq', 'created')\n"
    "  if e[1] then\n"
    "    out[#out + 1] = k\n"
    "    out[#out + 1] = e[1]\n"
    "    out[#out + 1] = e[2]\n"
    "    out[#out + 1] = tonumber(e[3])\n"
    "    out[#out + 1] = tonumber(e[4])\n"
    "  else\n"
    "    redis.call('ZREM', KEYS[1], k)\n"
    "    redis.call('ZREM', KEYS[3], k)\n"
    "  end\n"
    "end\n"
    "if #page == 2 * n then out[2] = tonumber(page[#page]) end\n"
    "return out\n";

static ah__redis_script s_claim, s_complete, s_abandon, s_fetch;
static pthread_once_t scripts_once = PTHREAD_ONCE_INIT;

static void scripts_init(void)
{
    ah__redis_script_init(&s_claim, CLAIM_SRC);
    ah__redis_script_init(&s_complete, COMPLETE_SRC);
    ah__redis_script_init(&s_abandon, ABANDON_SRC);
    ah__redis_script_init(&s_fetch, FETCH_SRC);
}

typedef struct snap_entry {
    char *key, *fp, *receipt;
    int64_t seq, created_ms;
} snap_entry;

typedef struct owned {
    char *key;
    char token[24];
    struct owned *next;
} owned;

typedef struct rl_ledger rl_ledger;

/* A listing in progress (ah_ledger_redis_refresh): the pages so far. Owned by the
 * ledger until its last page (or its failure) is told, or the ledger closes (a listing
 * whose handle the caller cancelled is freed then). */
typedef struct refresh_op {
    rl_ledger *s;
    ah_redis_req *q; /* the caller's handle, one request per page */
    snap_entry *items;
    size_t n, cap;
    struct refresh_op *next;
} refresh_op;

/* One asynchronous claim or complete waiting for its answer (or its BUSY poll delay). */
typedef struct rop {
    rl_ledger *s;
    int is_complete;
    ah_ledger_fn cb;
    void *ud;
    ah_redis_req *q;
    ah_timer *timer;
    char *key;
    ah_ledger_result busy;
    struct rop *next;
} rop;

struct rl_ledger {
    struct ah_ledger base;
    ah_loop *loop;
    ah_redis *r;
    char *prefix;
    int64_t ttl_ms;
    char holder[96];
    uint64_t nonce; /* names each claim attempt and each completion */
    rop *ops;
    refresh_op *refreshes;
    owned *own;
    snap_entry *snap; /* seq order */
    snap_entry **by_key; /* into snap, in key order (lookups) */
    size_t nsnap;
    int64_t snap_claims;
    int down_logged;
    /* the strings of the last answer handed out (borrowed by the caller) */
    char *kbuf, *rbuf;
};

/* ---- helpers ----------------------------------------------------------------------- */

static char *pkey(const rl_ledger *s, const char *kind, const char *key)
{
    size_t n = strlen(s->prefix) + strlen(kind) + (key ? strlen(key) : 0) + 1;
    char *p = malloc(n);
    if (p)
        snprintf(p, n, "%s%s%s", s->prefix, kind, key ? key : "");
    return p;
}

static void key_error(ah_ledger *l, const char *key, const char *after)
{
    size_t n = strlen(key);
    int shown = n > 80 ? 80 : (int)n;
    ah__ledger_seterr(l, "idempotency key '%.*s%s'%s", shown, key, n > 80 ? "..." : "",
                      after);
}

static int set_str(char **slot, const char *s, size_t n)
{
    char *p = malloc(n + 1);
    if (!p)
        return 0;
    memcpy(p, s, n);
    p[n] = '\0';
    free(*slot);
    *slot = p;
    return 1;
}

static const char *owned_token(rl_ledger *s, const char *key)
{
    for (owned *o = s->own; o; o = o->next)
        if (strcmp(o->key, key) == 0)
            return o->token;
    return "0";
}

static void owned_drop(rl_ledger *s, const char *key)
{
    for (owned **pp = &s->own; *pp; pp = &(*pp)->next) {
        if (strcmp((*pp)->key, key) == 0) {
            owned *o = *pp;
            *pp = o->next;
            free(o->key);
            free(o);
            return;
        }
    }
}

static void owned_add(rl_ledger *s, const char *key, long long token)
{
    owned_drop(s, key);
    owned *o = calloc(1, sizeof *o);
    if (!o || !(o->key = ah__strdup(key))) {
        free(o);
        ah__log(AH_LOG_WARN, "ledger: out of memory noting a claim (it ends by its lease)");
        return;
    }
    snprintf(o->token, sizeof o->token, "%lld", token);
    o->next = s->own;
    s->own = o;
}

static void rop_free(rop *o)
{
    rl_ledger *s = o->s;
    for (rop **pp = &s->ops; *pp; pp = &(*pp)->next)
        if (*pp == o) {
            *pp = o->next;
            break;
        }
    ah_redis_req_cancel(o->q);
    ah_timer_free(o->timer);
    free(o->key);
    free(o);
}

static const redisReply *elem(const redisReply *r, size_t i, int type)
{
    if (!r || r->type != REDIS_REPLY_ARRAY || i >= r->elements)
        return NULL;
    const redisReply *e = r->element[i];
    return e && e->type == type ? e : NULL;
}

static int64_t elem_int(const redisReply *r, size_t i)
{
    const redisReply *e = elem(r, i, REDIS_REPLY_INTEGER);
    return e ? (int64_t)e->integer : 0;
}

/* A command that could not be sent (an outage): say why the connection is down. */
static void fail_unsent(rl_ledger *s)
{
    char why[300];
    ah__bufprintf(why, sizeof why, "Redis unreachable: %s", ah__redis_last_error(s->r));
    ah__ledger_seterr(&s->base, "redis ledger %s: %s (failing closed)", ah_redis_name(s->r),
                      why);
    ah__redis_note_down(s->r, &s->down_logged, "ledger calls fail (kind ledger)");
}

static void fail_down(rl_ledger *s, const char *what)
{
    ah__ledger_seterr(&s->base, "redis ledger %s: %s (failing closed)", ah_redis_name(s->r),
                      what);
    ah__redis_note_down(s->r, &s->down_logged, "ledger calls fail (kind ledger)");
}

/* ---- asynchronous answers ---------------------------------------------------------- */

static void deliver(rop *o, const ah_ledger_result *res)
{
    ah_ledger_fn cb = o->cb;
    void *ud = o->ud;
    rop_free(o);
    cb(ud, res);
}

static void on_busy_delay(void *ud)
{
    rop *o = ud;
    ah_ledger_result res = o->busy;
    deliver(o, &res);
}

/* The entry part of a done/dup reply: {tag, receipt, seq, created}. */
static int fill_entry(rl_ledger *s, const char *key, const redisReply *r,
                      ah_ledger_result *res)
{
    const redisReply *rc = elem(r, 1, REDIS_REPLY_STRING);
    if (!rc || !set_str(&s->rbuf, rc->str, rc->len) || !set_str(&s->kbuf, key, strlen(key)))
        return 0;
    res->entry.key = s->kbuf;
    res->entry.receipt = s->rbuf;
    res->entry.seq = elem_int(r, 2);
    res->entry.created_ms = elem_int(r, 3);
    return 1;
}

static void op_answered(void *ud, const ah__redis_user *user, const redisReply *reply,
                        const char *err)
{
    rop *o = ud;
    rl_ledger *s = o->s;
    o->q = NULL;
    ah_ledger_result res;
    memset(&res, 0, sizeof res);
    res.answer = AH_LEDGER_FAILED;
    const redisReply *tag = elem(reply, 0, REDIS_REPLY_STRING);
    if (!tag) {
        fail_down(s, err ? err : "unexpected reply");
        deliver(o, &res);
        return;
    }
    ah__redis_note_up(s->r, &s->down_logged, "the ledger answers again");
    const char *t = tag->str;
    if (strcmp(t, "owned") == 0) {
        owned_add(s, o->key, (long long)elem_int(reply, 1));
        res.answer = AH_LEDGER_OWNED;
        res.fence = elem_int(reply, 1);
        res.reclaimed = elem_int(reply, 2) != 0;
        if (res.reclaimed)
            ah__log(AH_LOG_WARN,
                    "ledger: took over the claim on key '%.80s' (its lease ran out)",
                    o->key);
    } else if (strcmp(t, "done") == 0 && !o->is_complete) {
        res.answer = fill_entry(s, o->key, reply, &res) ? AH_LEDGER_DONE : AH_LEDGER_FAILED;
    } else if (strcmp(t, "done") == 0) {
        owned_drop(s, o->key);
        if (!set_str(&s->kbuf, o->key, strlen(o->key))) {
            ah__ledger_seterr(&s->base, "out of memory after recording a ledger entry");
        } else {
            res.answer = AH_LEDGER_DONE;
            res.entry.key = s->kbuf;
            res.entry.receipt = NULL; /* the caller's own receipt */
            res.entry.seq = elem_int(reply, 1);
            res.duplicate = 0;
        }
    } else if (strcmp(t, "dup") == 0) {
        owned_drop(s, o->key);
        res.answer = fill_entry(s, o->key, reply, &res) ? AH_LEDGER_DONE : AH_LEDGER_FAILED;
        res.duplicate = 1;
    } else if (strcmp(t, "mismatch") == 0) {
        if (o->is_complete)
            owned_drop(s, o->key);
        key_error(&s->base, o->key, " reused with different arguments");
        res.answer = AH_LEDGER_MISMATCH;
    } else if (strcmp(t, "busy_mismatch") == 0) {
        key_error(&s->base, o->key, " is in flight with different arguments");
        res.answer = AH_LEDGER_MISMATCH;
    } else if (strcmp(t, "busy") == 0) {
        int64_t left = elem_int(reply, 1);
        int64_t delay = left < BUSY_POLL_MS ? (left > 0 ? left : 1) : BUSY_POLL_MS;
        o->busy.answer = AH_LEDGER_BUSY;
        o->busy.retry_ms = delay;
        o->timer = ah_timer_new(s->loop, on_busy_delay, o);
        if (o->timer) {
            ah_timer_start(o->timer, delay);
            return; /* delivered when the delay is over */
        }
        res.answer = AH_LEDGER_BUSY;
        res.retry_ms = delay;
    } else {
        ah__ledger_seterr(&s->base, "redis ledger: unexpected answer '%.40s'", t);
    }
    deliver(o, &res);
}

static ah_ledger_answer submit(rl_ledger *s, int is_complete, const char *key,
                               const ah__redis_script *sc, int nkeys,
                               const char *const *keys, int nargs, const char *const *args,
                               unsigned flags, int timeout_ms, ah_ledger_fn cb, void *ud)
{
    if (!cb) {
        ah__ledger_seterr(&s->base, "redis ledger: an answer callback is required");
        return AH_LEDGER_FAILED;
    }
    rop *o = calloc(1, sizeof *o);
    if (!o || !(o->key = ah__strdup(key))) {
        free(o);
        ah__ledger_seterr(&s->base, "out of memory");
        return AH_LEDGER_FAILED;
    }
    o->s = s;
    o->is_complete = is_complete;
    o->cb = cb;
    o->ud = ud;
    o->q = ah__redis_eval_ex(s->r, sc, nkeys, keys, nargs, args, flags, timeout_ms,
                             op_answered, o, (ah__redis_user){0});
    if (!o->q) {
        free(o->key);
        free(o);
        fail_unsent(s);
        return AH_LEDGER_FAILED;
    }
    o->next = s->ops;
    s->ops = o;
    return AH_LEDGER_PENDING;
}

/* ---- the backend operations -------------------------------------------------------- */

static ah_ledger_answer rl_claim(ah_ledger *l, const char *key, const char *fp,
                                 int64_t now_ms, ah_ledger_result *out, ah_ledger_fn cb,
                                 void *ud)
{
    rl_ledger *s = (rl_ledger *)l;
    char *ke = pkey(s, "e:", key), *kc = pkey(s, "c:", key), *kf = pkey(s, "fence", NULL),
         *kz = pkey(s, "claims", NULL);
    char lease[24], attempt[128];
    snprintf(lease, sizeof lease, "%lld", (long long)l->lease_ms);
    /* names this attempt, so a resend of it (lost in flight) gets its own claim back */
    snprintf(attempt, sizeof attempt, "%s/%llu", s->holder, (unsigned long long)++s->nonce);
    ah_ledger_answer a = AH_LEDGER_FAILED;
    if (ke && kc && kf && kz) {
        const char *keys[] = {ke, kc, kf, kz};
        const char *args[] = {fp, attempt, lease, key};
        a = submit(s, 0, key, &s_claim, 4, keys, 4, args, AH__REDIS_RESEND, 0, cb, ud);
    } else {
        ah__ledger_seterr(l, "out of memory");
    }
    free(ke);
    free(kc);
    free(kf);
    free(kz);
    return out->answer = a;
}

static ah_ledger_answer rl_complete(ah_ledger *l, const char *key, const char *fp,
                                    const char *receipt, int64_t now_ms,
                                    ah_ledger_result *out, ah_ledger_fn cb, void *ud)
{
    rl_ledger *s = (rl_ledger *)l;
    char *ke = pkey(s, "e:", key), *kc = pkey(s, "c:", key), *ks = pkey(s, "seq", NULL),
         *kz = pkey(s, "claims", NULL), *ki = pkey(s, "idx", NULL),
         *kx = pkey(s, "exp", NULL), *kp = pkey(s, "e:", NULL);
    char ttl[24], now[24], writer[128];
    snprintf(ttl, sizeof ttl, "%lld", (long long)s->ttl_ms);
    snprintf(now, sizeof now, "%lld", (long long)now_ms);
    /* names this write, so a resend of it (lost in flight) is not its own duplicate */
    snprintf(writer, sizeof writer, "%s/w%llu", s->holder, (unsigned long long)++s->nonce);
    ah_ledger_answer a = AH_LEDGER_FAILED;
    if (ke && kc && ks && kz && ki && kx && kp) {
        const char *keys[] = {ke, kc, ks, kz, ki, kx};
        const char *args[] = {fp, receipt, owned_token(s, key), ttl, key, now, writer, kp};
        /* The effect ran: wait for Redis as long as the SQLite ledger waits for its
         * lock, and record it even if the caller stops waiting. */
        a = submit(s, 1, key, &s_complete, 6, keys, 8, args,
                   AH__REDIS_RESEND | AH__REDIS_PATIENT | AH__REDIS_KEEP,
                   AH__LEDGER_PATIENCE_MS, cb, ud);
    } else {
        ah__ledger_seterr(l, "out of memory");
    }
    free(ke);
    free(kc);
    free(ks);
    free(kz);
    free(ki);
    free(kx);
    free(kp);
    return out->answer = a;
}

static void send_abandon(rl_ledger *s, const char *key, const char *token)
{
    char *kc = pkey(s, "c:", key), *kz = pkey(s, "claims", NULL);
    int sent = 0;
    if (kc && kz) {
        const char *keys[] = {kc, kz};
        const char *args[] = {token, key};
        /* Sent through an outage too (until the lease would end it anyway), so other
         * callers need not wait for the lease. */
        int patience = s->base.lease_ms < AH__LEDGER_PATIENCE_MS ? (int)s->base.lease_ms
                                                                 : AH__LEDGER_PATIENCE_MS;
        sent = ah__redis_eval_ex(s->r, &s_abandon, 2, keys, 2, args,
                                 AH__REDIS_RESEND | AH__REDIS_PATIENT | AH__REDIS_KEEP,
                                 patience, NULL, NULL, (ah__redis_user){0}) != NULL;
    }
    if (!sent)
        ah__log(AH_LOG_WARN, "ledger: cannot release the claim on key '%.80s' (it ends "
                             "with its lease)", key);
    free(kc);
    free(kz);
}

static void rl_abandon(ah_ledger *l, const char *key)
{
    rl_ledger *s = (rl_ledger *)l;
    const char *tok = owned_token(s, key);
    if (strcmp(tok, "0") == 0)
        return;
    send_abandon(s, key, tok);
    owned_drop(s, key);
}

static void rl_cancel(ah_ledger *l, void *ud)
{
    rl_ledger *s = (rl_ledger *)l;
    for (rop **pp = &s->ops; *pp;) {
        if ((*pp)->ud == ud)
            rop_free(*pp);
        else
            pp = &(*pp)->next;
    }
}

static ah_status rl_find(ah_ledger *l, const char *key, ah_ledger_entry *e, const char **fp)
{
    rl_ledger *s = (rl_ledger *)l;
    size_t lo = 0, hi = s->nsnap;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        const snap_entry *x = s->by_key[mid];
        int c = strcmp(x->key, key);
        if (c == 0) {
            e->key = x->key;
            e->receipt = x->receipt;
            e->seq = x->seq;
            e->created_ms = x->created_ms;
            *fp = x->fp;
            return AH_OK;
        }
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return AH_ERR_NOT_FOUND;
}

static ah_status rl_count(ah_ledger *l, int64_t *n)
{
    *n = (int64_t)((rl_ledger *)l)->nsnap;
    return AH_OK;
}

static ah_status rl_claims(ah_ledger *l, int64_t *n)
{
    *n = ((rl_ledger *)l)->snap_claims;
    return AH_OK;
}

static ah_status rl_foreach(ah_ledger *l, ah_ledger_entry_fn fn, void *ud)
{
    rl_ledger *s = (rl_ledger *)l;
    for (size_t i = 0; i < s->nsnap; i++) {
        ah_ledger_entry e = {s->snap[i].key, s->snap[i].receipt, s->snap[i].seq,
                             s->snap[i].created_ms};
        if (fn(ud, &e))
            break;
    }
    return AH_OK;
}

static void entries_free(snap_entry *v, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        free(v[i].key);
        free(v[i].fp);
        free(v[i].receipt);
    }
    free(v);
}

static void snap_clear(rl_ledger *s)
{
    entries_free(s->snap, s->nsnap);
    free(s->by_key);
    s->snap = NULL;
    s->by_key = NULL;
    s->nsnap = 0;
}

static void refresh_free(refresh_op *op)
{
    rl_ledger *s = op->s;
    for (refresh_op **pp = &s->refreshes; *pp; pp = &(*pp)->next)
        if (*pp == op) {
            *pp = op->next;
            break;
        }
    entries_free(op->items, op->n);
    free(op);
}

static void rl_close(ah_ledger *l)
{
    rl_ledger *s = (rl_ledger *)l;
    while (s->ops)
        rop_free(s->ops);
    /* (their requests go with the connection below, without their callbacks; a
     * handle the caller cancelled may be gone already, so it is not touched) */
    while (s->refreshes)
        refresh_free(s->refreshes);
    /* Release what we still hold, so other processes need not wait for the leases; the
     * connection writes what it can without waiting before it closes. */
    while (s->own) {
        send_abandon(s, s->own->key, s->own->token);
        owned_drop(s, s->own->key);
    }
    ah_redis_free(s->r);
    snap_clear(s);
    free(s->prefix);
    free(s->kbuf);
    free(s->rbuf);
    free(s);
}

static const ah__ledger_ops redis_ops = {
    "redis",   rl_claim,  rl_complete, rl_abandon, rl_cancel,
    rl_find,   rl_count,  rl_claims,   rl_foreach, rl_close, NULL,
};

/* ---- public ------------------------------------------------------------------------ */

void ah_ledger_redis_config_init(ah_ledger_redis_config *c)
{
    memset(c, 0, sizeof *c);
    c->prefix = "effects:";
    c->ttl_s = 86400;
    c->lease_ms = AH_LEDGER_DEFAULT_LEASE_MS;
}

static ah_ledger *ledger_redis_make(ah_loop *loop, const ah_ledger_redis_config *cfg,
                                    char *err, size_t errsize, ah_status *st)
{
    *st = AH_ERR_INVALID;
    if (!loop || !cfg || !cfg->url) {
        ah__bufprintf(err, errsize, "redis ledger: %s is required", !loop ? "a loop" : "url");
        return NULL;
    }
    if (cfg->ttl_s < 0 || cfg->lease_ms < 0) {
        ah__bufprintf(err, errsize, "redis ledger: %s must be >= 0",
                      cfg->ttl_s < 0 ? "ttl_s" : "lease_ms");
        return NULL;
    }
    pthread_once(&scripts_once, scripts_init);
    rl_ledger *s = calloc(1, sizeof *s);
    if (!s) {
        *st = AH_ERR_NOMEM;
        ah__bufprintf(err, errsize, "out of memory");
        return NULL;
    }
    ah__ledger_init(&s->base, &redis_ops);
    if (cfg->lease_ms > 0)
        s->base.lease_ms = cfg->lease_ms;
    s->loop = loop;
    s->ttl_ms = cfg->ttl_s * 1000;
    s->prefix = ah__strdup(cfg->prefix ? cfg->prefix : "effects:");
    char host[64] = "";
    gethostname(host, sizeof host - 1);
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    snprintf(s->holder, sizeof s->holder, "%.60s:%ld:%lx", host, (long)getpid(),
             (unsigned long)(ts.tv_nsec ^ (long)(uintptr_t)s));
    if (s->prefix)
        *st = ah_redis_new(loop, cfg->url, cfg->redis, &s->r, err, errsize);
    if (!s->r) {
        if (!s->prefix) {
            *st = AH_ERR_NOMEM;
            ah__bufprintf(err, errsize, "out of memory");
        }
        free(s->prefix);
        free(s);
        return NULL;
    }
    return &s->base;
}

/* The public form (status, out-pointer, error buffer): see the header. */
ah_status ah_ledger_new_redis(ah_loop *loop, const ah_ledger_redis_config *cfg,
                              ah_ledger **out, char *err, size_t errsize)
{
    ah_status st = AH_OK;
    if (!out) {
        if (err && errsize)
            ah__bufprintf(err, errsize, "ah_ledger_new_redis: out is NULL");
        return AH_ERR_INVALID;
    }
    *out = ledger_redis_make(loop, cfg, err, errsize, &st);
    return *out ? AH_OK : st;
}

int ah_ledger_is_redis(const ah_ledger *l)
{
    return l && l->ops == &redis_ops;
}

ah_redis *ah_ledger_redis_connection(const ah_ledger *l)
{
    return ah_ledger_is_redis(l) ? ((const rl_ledger *)l)->r : NULL;
}

/* The listing is paged: one script per PAGE entries (its cursor the last seq seen),
 * all under the caller's one handle (ah__redis_eval_again), so no script holds the
 * server for long whatever the ledger's size. The snapshot is replaced when the last
 * page came; an entry made or gone during the walk may or may not be in it. */

static int page_keys(rl_ledger *s, char **ki, char **kz, char **kx, char **ke)
{
    *ki = pkey(s, "idx", NULL);
    *kz = pkey(s, "claims", NULL);
    *kx = pkey(s, "exp", NULL);
    *ke = pkey(s, "e:", NULL);
    return *ki && *kz && *kx && *ke;
}

/* Ask for the page after cursor (under op->q when again, else a new request). */
static ah_redis_req *ask_page(rl_ledger *s, refresh_op *op, int64_t cursor, int again,
                              ah__redis_fn fn, ah__redis_user user)
{
    char *ki, *kz, *kx, *ke;
    char cur[24], n[16];
    snprintf(cur, sizeof cur, "%lld", (long long)cursor);
    snprintf(n, sizeof n, "%d", PAGE);
    ah_redis_req *q = NULL;
    if (page_keys(s, &ki, &kz, &kx, &ke)) {
        const char *keys[] = {ki, kz, kx};
        const char *args[] = {ke, cur, n};
        if (again)
            q = ah__redis_eval_again(op->q, 3, keys, 3, args) ? op->q : NULL;
        else
            q = ah__redis_eval_ex(s->r, &s_fetch, 3, keys, 3, args, AH__REDIS_RESEND, 0, fn,
                                  op, user);
    }
    free(ki);
    free(kz);
    free(kx);
    free(ke);
    return q;
}

static int cmp_by_key(const void *a, const void *b)
{
    const snap_entry *x = *(snap_entry *const *)a, *y = *(snap_entry *const *)b;
    int c = strcmp(x->key, y->key);
    if (c)
        return c;
    return x->seq < y->seq ? -1 : x->seq > y->seq;
}

/* Make op's pages the snapshot: a key seen twice (made again during the walk) keeps its
 * latest entry; the key index is built. 0 when out of memory. */
static int install_snapshot(rl_ledger *s, refresh_op *op, int64_t claims)
{
    size_t n = op->n;
    snap_entry **idx = n ? malloc(n * sizeof *idx) : NULL;
    if (n && !idx)
        return 0;
    for (size_t i = 0; i < n; i++)
        idx[i] = &op->items[i];
    if (n > 1)
        qsort(idx, n, sizeof *idx, cmp_by_key);
    int dups = 0;
    for (size_t i = 0; i + 1 < n; i++) {
        if (strcmp(idx[i]->key, idx[i + 1]->key) == 0) {
            snap_entry *old = idx[i];
            free(old->key);
            free(old->fp);
            free(old->receipt);
            old->key = NULL;
            dups = 1;
        }
    }
    if (dups) { /* compact (seq order stays) and index again */
        size_t m = 0;
        for (size_t i = 0; i < n; i++)
            if (op->items[i].key)
                op->items[m++] = op->items[i];
        n = m;
        for (size_t i = 0; i < n; i++)
            idx[i] = &op->items[i];
        if (n > 1)
            qsort(idx, n, sizeof *idx, cmp_by_key);
    }
    snap_clear(s);
    s->snap = op->items;
    s->nsnap = n;
    s->by_key = idx;
    s->snap_claims = claims;
    op->items = NULL;
    op->n = op->cap = 0;
    return 1;
}

static void page_answered(void *ud, const ah__redis_user *user, const redisReply *reply,
                          const char *err)
{
    refresh_op *op = ud;
    rl_ledger *s = op->s;
    ah_ledger_refresh_fn fn = (ah_ledger_refresh_fn)user->fn;
    if (!reply || reply->type != REDIS_REPLY_ARRAY || reply->elements < 2 ||
        (reply->elements - 2) % 5 != 0) {
        fail_down(s, err ? err : "unexpected reply to a listing");
        refresh_free(op);
        fn(user->ud, AH_ERR_IO);
        return;
    }
    size_t n = (reply->elements - 2) / 5;
    if (op->n + n > op->cap) {
        size_t cap = op->cap ? op->cap * 2 : PAGE;
        while (cap < op->n + n)
            cap *= 2;
        snap_entry *v = realloc(op->items, cap * sizeof *v);
        if (!v)
            goto oom;
        op->items = v;
        op->cap = cap;
    }
    for (size_t i = 0; i < n; i++) {
        const redisReply *k = elem(reply, 2 + 5 * i, REDIS_REPLY_STRING);
        const redisReply *f = elem(reply, 3 + 5 * i, REDIS_REPLY_STRING);
        const redisReply *r = elem(reply, 4 + 5 * i, REDIS_REPLY_STRING);
        snap_entry *e = &op->items[op->n];
        memset(e, 0, sizeof *e);
        if (!k || !f || !r)
            continue;
        if (!set_str(&e->key, k->str, k->len) || !set_str(&e->fp, f->str, f->len) ||
            !set_str(&e->receipt, r->str, r->len)) {
            free(e->key);
            free(e->fp);
            free(e->receipt);
            goto oom;
        }
        e->seq = elem_int(reply, 5 + 5 * i);
        e->created_ms = elem_int(reply, 6 + 5 * i);
        op->n++;
    }
    int64_t next = elem_int(reply, 1);
    if (next > 0) {
        if (ask_page(s, op, next, 1, NULL, *user))
            return; /* the next page comes to this callback */
        goto oom;
    }
    ah__redis_note_up(s->r, &s->down_logged, "the ledger answers again");
    if (!install_snapshot(s, op, elem_int(reply, 0)))
        goto oom;
    refresh_free(op);
    fn(user->ud, AH_OK);
    return;
oom:
    ah__ledger_seterr(&s->base, "out of memory listing the ledger");
    refresh_free(op);
    fn(user->ud, AH_ERR_NOMEM);
}

ah_status ah_ledger_redis_refresh(ah_ledger *l, ah_ledger_refresh_fn fn, void *ud,
                                  ah_redis_req **pending)
{
    if (pending)
        *pending = NULL;
    if (!ah_ledger_is_redis(l) || !fn || !pending)
        return AH_ERR_INVALID;
    rl_ledger *s = (rl_ledger *)l;
    refresh_op *op = calloc(1, sizeof *op);
    if (!op) {
        ah__ledger_seterr(l, "out of memory");
        return AH_ERR_NOMEM;
    }
    op->s = s;
    op->q = ask_page(s, op, 0, 0, page_answered, (ah__redis_user){(void (*)(void))fn, ud});
    if (!op->q) {
        free(op);
        fail_unsent(s);
        return AH_ERR_IO;
    }
    op->next = s->refreshes;
    s->refreshes = op;
    *pending = op->q;
    return AH_OK;
}
