/* redis_budget.c - the retry budget's token bucket kept in Redis, shared by a fleet.
 *
 * The bucket is the local one's (backoff.c), in milli-tokens, as one server-side script:
 * read, spend or refund, write back, in one atomic step. The key expires after a day
 * without decisions (an abandoned key starts full again). Invariants: every decision is
 * either Redis's or the local fallback's, never both; a spend whose command fails is
 * decided locally, so a verdict always comes; the fallback is logged once per outage.
 */
#include "internal.h"
#include "redis_internal.h"

#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* KEYS[1] bucket; ARGV op ("spend" | "refund"), max milli, ratio milli, idle ttl ms.
 * Returns {allowed, milli after}. */
static const char BUDGET_SRC[] =
    "local max = tonumber(ARGV[2])\n"
    "local v = tonumber(redis.call('GET', KEYS[1]) or max)\n"
    "if v > max then v = max end\n"
    "local ok = 1\n"
    "if ARGV[1] == 'spend' then\n"
    "  v = v - 1000\n"
    "  if v < 0 then v = 0 end\n"
    "  if 2 * v > max then ok = 1 else ok = 0 end\n"
    "else\n"
    "  v = v + tonumber(ARGV[3])\n"
    "  if v > max then v = max end\n"
    "end\n"
    "redis.call('SET', KEYS[1], v, 'PX', ARGV[4])\n"
    "return {ok, v}\n";

static ah__redis_script budget_script;
static pthread_once_t budget_script_once = PTHREAD_ONCE_INIT;

static void budget_script_init(void)
{
    ah__redis_script_init(&budget_script, BUDGET_SRC);
}

struct ah__budget_shared {
    ah_redis *r;
    ah_retry_budget *b; /* the owner, whose local bucket is the fallback */
    char *key;
    char max[24], ratio[24];
    int down_logged;
};

static const ah__redis_script *script(void)
{
    pthread_once(&budget_script_once, budget_script_init);
    return &budget_script;
}

void ah__budget_shared_free(ah__budget_shared *s)
{
    if (!s)
        return;
    free(s->key);
    free(s);
}

static ah_retry_budget *budget_redis_make(ah_redis *r, const char *key, double max_tokens,
                                          double token_ratio, char *err, size_t errsize,
                                          ah_status *st)
{
    *st = AH_ERR_INVALID;
    if (!r || !key || !*key) {
        ah__bufprintf(err, errsize, "retry_budget: %s is required with redis",
                      !r ? "a connection" : "key");
        return NULL;
    }
    if (ah_retry_budget_check(max_tokens, token_ratio, err, errsize) != AH_OK)
        return NULL;
    ah_retry_budget *b = NULL;
    ah_retry_budget_new(max_tokens, token_ratio, &b, NULL, 0);
    ah__budget_shared *s = calloc(1, sizeof *s);
    if (!b || !s || !(s->key = ah__strdup(key))) {
        ah_retry_budget_free(b);
        free(s);
        *st = AH_ERR_NOMEM;
        ah__bufprintf(err, errsize, "out of memory");
        return NULL;
    }
    s->r = r;
    s->b = b;
    snprintf(s->max, sizeof s->max, "%lld", llround(max_tokens * 1000));
    snprintf(s->ratio, sizeof s->ratio, "%lld", llround(token_ratio * 1000));
    ah__retry_budget_attach(b, s);
    (void)script();
    return b;
}

/* The public form (status, out-pointer, error buffer): see the header. */
ah_status ah_retry_budget_new_redis(ah_redis *r, const char *key, double max_tokens,
                                    double token_ratio, ah_retry_budget **out, char *err,
                                    size_t errsize)
{
    ah_status st = AH_OK;
    if (!out) {
        if (err && errsize)
            ah__bufprintf(err, errsize, "ah_retry_budget_new_redis: out is NULL");
        return AH_ERR_INVALID;
    }
    *out = budget_redis_make(r, key, max_tokens, token_ratio, err, errsize, &st);
    return *out ? AH_OK : st;
}

int ah_retry_budget_is_shared(const ah_retry_budget *b)
{
    return ah__retry_budget_shared(b) != NULL;
}

int ah_retry_budget_using_redis(const ah_retry_budget *b)
{
    ah__budget_shared *s = ah__retry_budget_shared(b);
    return s && ah_redis_ready(s->r) && !s->down_logged;
}

static ah_redis_req *send_op(ah__budget_shared *s, const char *op, ah__redis_fn fn,
                             ah__redis_user user)
{
    const char *keys[] = {s->key};
    const char *args[] = {op, s->max, s->ratio, "86400000"};
    return ah__redis_eval(s->r, script(), 1, keys, 4, args, fn, s, user);
}

static void refund_cb(void *ud, const ah__redis_user *user, const redisReply *reply,
                      const char *err)
{
    ah__budget_shared *s = ud;
    if (reply)
        ah__redis_note_up(s->r, &s->down_logged, "the retry budget is shared again");
}

int ah__budget_shared_refund(ah__budget_shared *s)
{
    /* Fire and forget: a refund lost to an outage only makes the budget stricter. */
    if (send_op(s, "refund", refund_cb, (ah__redis_user){0}))
        return 1;
    ah__redis_note_down(s->r, &s->down_logged, "the retry budget falls back to a local one");
    return 0;
}

static void spend_cb(void *ud, const ah__redis_user *user, const redisReply *reply,
                     const char *err)
{
    ah__budget_shared *s = ud;
    ah_retry_budget_fn fn = (ah_retry_budget_fn)user->fn;
    int allowed;
    if (reply && reply->type == REDIS_REPLY_ARRAY && reply->elements >= 1 &&
        reply->element[0]->type == REDIS_REPLY_INTEGER) {
        ah__redis_note_up(s->r, &s->down_logged, "the retry budget is shared again");
        allowed = reply->element[0]->integer != 0;
    } else {
        if (!ah__redis_note_down(s->r, &s->down_logged,
                                 "the retry budget falls back to a local one"))
            ah__log(AH_LOG_DEBUG, "retry budget: redis said %s; deciding locally",
                    err ? err : "something unexpected");
        allowed = ah_retry_budget_try_spend(s->b);
    }
    fn(user->ud, allowed);
}

int ah_retry_budget_spend_async(ah_retry_budget *b, ah_retry_budget_fn fn, void *ud,
                                ah_redis_req **pending)
{
    if (pending)
        *pending = NULL;
    if (!b)
        return 1;
    ah__budget_shared *s = ah__retry_budget_shared(b);
    if (!s || !fn || !pending)
        return ah_retry_budget_try_spend(b);
    ah_redis_req *q = send_op(s, "spend", spend_cb, (ah__redis_user){(void (*)(void))fn, ud});
    if (!q) {
        ah__redis_note_down(s->r, &s->down_logged,
                            "the retry budget falls back to a local one");
        return ah_retry_budget_try_spend(b);
    }
    *pending = q;
    return -1;
}
