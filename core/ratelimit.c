/* ratelimit.c - pacing with GCRA (generic cell rate algorithm), in one process or on
 * Redis for a fleet.
 *
 * Requests: a theoretical arrival time (TAT) advances by T = 60000 / rpm ms per request;
 * a request may start at TAT - tau (tau = (burst - 1) * T) and reserves its slot at once,
 * so callers queue rather than retry. Tokens: a second TAT advances by tokens * 60000 /
 * tpm after a response reports its usage; a request waits while that TAT is more than a
 * minute ahead. The wait is the larger of the two; the limit named is the one that set it.
 * Local state is guarded by a mutex (thread-safe); the shared form is one script per
 * decision on the server's clock (TIME), with the local schedule as the fallback.
 */
#include "internal.h"
#include "redis_internal.h"

#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const LIMIT_REQ = "requests_per_minute";
static const char *const LIMIT_TOK = "tokens_per_minute";

/* KEYS[1] request TAT, KEYS[2] token TAT (microseconds on the server's clock).
 * ARGV op ("acquire" | "charge" | "hold"), T_us, tau_us, token T_us, token tau_us,
 * tokens (charge) or request hold us (hold), token hold us (hold).
 * acquire returns {wait_us, which (0 none, 1 requests, 2 tokens)}; the others {0, 0}. */
static const char RATE_SRC[] =
    "local t = redis.call('TIME')\n"
    "local now = tonumber(t[1]) * 1000000 + tonumber(t[2])\n"
    "local T, tau = tonumber(ARGV[2]), tonumber(ARGV[3])\n"
    "local tT, ttau = tonumber(ARGV[4]), tonumber(ARGV[5])\n"
    "if ARGV[1] == 'hold' then\n"
    "  local h = {tonumber(ARGV[6]), tonumber(ARGV[7])}\n"
    "  local tol = {tau, ttau}\n"
    "  for i = 1, 2 do\n"
    "    if h[i] >= 0 then\n"
    "      local v = tonumber(redis.call('GET', KEYS[i]) or now)\n"
    "      local want = now + h[i] + tol[i]\n"
    "      if want > v then\n"
    "        redis.call('SET', KEYS[i], string.format('%.0f', want), 'PX',\n"
    "                   math.floor((want - now) / 1000) + 60000)\n"
    "      end\n"
    "    end\n"
    "  end\n"
    "  return {0, 0}\n"
    "end\n"
    "if ARGV[1] == 'charge' then\n"
    "  if tT > 0 then\n"
    "    local tt = tonumber(redis.call('GET', KEYS[2]) or now)\n"
    "    if tt < now then tt = now end\n"
    "    tt = tt + tonumber(ARGV[6]) * tT\n"
    "    redis.call('SET', KEYS[2], string.format('%.0f', tt), 'PX',\n"
    "               math.floor((tt - now) / 1000) + 60000)\n"
    "  end\n"
    "  return {0, 0}\n"
    "end\n"
    "local wait, which = 0, 0\n"
    "if T > 0 then\n"
    "  local tat = tonumber(redis.call('GET', KEYS[1]) or now)\n"
    "  if tat < now then tat = now end\n"
    "  local w = tat - tau - now\n"
    "  if w > 0 then wait, which = w, 1 end\n"
    "  redis.call('SET', KEYS[1], string.format('%.0f', tat + T), 'PX',\n"
    "             math.floor((tat + T - now) / 1000) + 1000)\n"
    "end\n"
    "if tT > 0 then\n"
    "  local tt = tonumber(redis.call('GET', KEYS[2]) or now)\n"
    "  local w = tt - ttau - now\n"
    "  if w > wait then wait, which = w, 2 end\n"
    "end\n"
    "return {math.floor(wait), which}\n";

static ah__redis_script rate_script;
static pthread_once_t rate_script_once = PTHREAD_ONCE_INIT;

static void rate_script_init(void)
{
    ah__redis_script_init(&rate_script, RATE_SRC);
}

struct ah_rate_limit {
    pthread_mutex_t mu;
    double t_ms, tau_ms;         /* requests: interval and tolerance; t_ms 0 = none */
    double tok_t_ms, tok_tau_ms; /* tokens: per token and tolerance; 0 = none */
    int have_clock;
    double tat, tok_tat; /* local schedule, ms on the clock it was first used with */
    ah_redis *r;
    char *keys[2];
    char args[5][40];
    int down_logged;
    int ignore_headers;
};

static ah_rate_limit *rate_limit_make(const ah_rate_limit_config *cfg, ah_redis *r,
                                      char *err, size_t errsize, ah_status *st)
{
    *st = AH_ERR_INVALID;
    if (!cfg) {
        ah__bufprintf(err, errsize, "rate_limit: no config");
        return NULL;
    }
    if (!(cfg->requests_per_minute >= 0) || !(cfg->tokens_per_minute >= 0)) {
        ah__bufprintf(err, errsize, "rate_limit.%s must be >= 0",
                      !(cfg->requests_per_minute >= 0) ? "requests_per_minute"
                                                       : "tokens_per_minute");
        return NULL;
    }
    if (cfg->requests_per_minute == 0 && cfg->tokens_per_minute == 0) {
        ah__bufprintf(err, errsize,
                      "rate_limit: requests_per_minute or tokens_per_minute is required");
        return NULL;
    }
    if (cfg->requests_per_minute > 6e6 || cfg->tokens_per_minute > 1e12) {
        ah__bufprintf(err, errsize, "rate_limit.%s is too large",
                      cfg->requests_per_minute > 6e6 ? "requests_per_minute"
                                                     : "tokens_per_minute");
        return NULL;
    }
    if (cfg->burst < 0 || cfg->burst > 1000000) {
        ah__bufprintf(err, errsize, "rate_limit.burst must be 1..1000000 (got %d)",
                      cfg->burst);
        return NULL;
    }
    if (r && (!cfg->key || !*cfg->key)) {
        ah__bufprintf(err, errsize, "rate_limit.key is required with redis");
        return NULL;
    }
    ah_rate_limit *rl = calloc(1, sizeof *rl);
    if (!rl || pthread_mutex_init(&rl->mu, NULL) != 0) {
        free(rl);
        *st = AH_ERR_NOMEM;
        ah__bufprintf(err, errsize, "out of memory");
        return NULL;
    }
    int burst = cfg->burst > 0 ? cfg->burst : 1;
    rl->ignore_headers = cfg->ignore_headers;
    if (cfg->requests_per_minute > 0) {
        rl->t_ms = 60000.0 / cfg->requests_per_minute;
        rl->tau_ms = (burst - 1) * rl->t_ms;
    }
    if (cfg->tokens_per_minute > 0) {
        rl->tok_t_ms = 60000.0 / cfg->tokens_per_minute;
        rl->tok_tau_ms = 60000.0;
    }
    if (r) {
        size_t n = strlen(cfg->key) + 5;
        rl->keys[0] = malloc(n);
        rl->keys[1] = malloc(n);
        if (!rl->keys[0] || !rl->keys[1]) {
            ah_rate_limit_free(rl);
            *st = AH_ERR_NOMEM;
            ah__bufprintf(err, errsize, "out of memory");
            return NULL;
        }
        snprintf(rl->keys[0], n, "%s:req", cfg->key);
        snprintf(rl->keys[1], n, "%s:tok", cfg->key);
        snprintf(rl->args[0], sizeof rl->args[0], "%.0f", rl->t_ms * 1000);
        snprintf(rl->args[1], sizeof rl->args[1], "%.0f", rl->tau_ms * 1000);
        snprintf(rl->args[2], sizeof rl->args[2], "%.6f", rl->tok_t_ms * 1000);
        snprintf(rl->args[3], sizeof rl->args[3], "%.0f", rl->tok_tau_ms * 1000);
        rl->r = r;
        pthread_once(&rate_script_once, rate_script_init);
    }
    return rl;
}

/* The public form (status, out-pointer, error buffer): see the header. */
ah_status ah_rate_limit_new(const ah_rate_limit_config *cfg, ah_redis *r,
                            ah_rate_limit **out, char *err, size_t errsize)
{
    ah_status st = AH_OK;
    if (!out) {
        if (err && errsize)
            ah__bufprintf(err, errsize, "ah_rate_limit_new: out is NULL");
        return AH_ERR_INVALID;
    }
    *out = rate_limit_make(cfg, r, err, errsize, &st);
    return *out ? AH_OK : st;
}

void ah_rate_limit_free(ah_rate_limit *rl)
{
    if (!rl)
        return;
    free(rl->keys[0]);
    free(rl->keys[1]);
    pthread_mutex_destroy(&rl->mu);
    free(rl);
}

int ah_rate_limit_is_shared(const ah_rate_limit *rl)
{
    return rl && rl->r;
}

/* The local schedule (also the fallback of the shared one). */
static int64_t local_acquire(ah_rate_limit *rl, ah_loop *loop, const char **limit)
{
    double now = (double)ah_loop_now_ms(loop);
    double wait = 0;
    const char *which = NULL;
    pthread_mutex_lock(&rl->mu);
    if (!rl->have_clock) {
        rl->tat = rl->tok_tat = now;
        rl->have_clock = 1;
    }
    if (rl->t_ms > 0) {
        double tat = rl->tat > now ? rl->tat : now;
        double w = tat - rl->tau_ms - now;
        if (w > 0) {
            wait = w;
            which = LIMIT_REQ;
        }
        rl->tat = tat + rl->t_ms;
    }
    if (rl->tok_t_ms > 0) {
        double w = rl->tok_tat - rl->tok_tau_ms - now;
        if (w > wait) {
            wait = w;
            which = LIMIT_TOK;
        }
    }
    pthread_mutex_unlock(&rl->mu);
    if (limit)
        *limit = which ? which : (rl->t_ms > 0 ? LIMIT_REQ : LIMIT_TOK);
    return (int64_t)ceil(wait);
}

static void acquire_cb(void *ud, const ah__redis_user *user, const redisReply *reply,
                       const char *err)
{
    ah_rate_limit *rl = ud;
    ah_rate_limit_fn fn = (ah_rate_limit_fn)user->fn;
    int64_t wait = 0;
    const char *limit = rl->t_ms > 0 ? LIMIT_REQ : LIMIT_TOK;
    if (reply && reply->type == REDIS_REPLY_ARRAY && reply->elements == 2 &&
        reply->element[0]->type == REDIS_REPLY_INTEGER) {
        ah__redis_note_up(rl->r, &rl->down_logged, "pacing is shared again");
        long long us = reply->element[0]->integer;
        wait = us > 0 ? (us + 999) / 1000 : 0;
        if (reply->element[1]->integer == 2)
            limit = LIMIT_TOK;
    } else {
        ah__redis_note_down(rl->r, &rl->down_logged, "pacing falls back to this process");
        wait = local_acquire(rl, ah_redis_loop(rl->r), &limit);
    }
    fn(user->ud, wait, limit);
}

int ah_rate_limit_acquire(ah_rate_limit *rl, ah_loop *loop, int64_t *wait_ms,
                          const char **limit, ah_rate_limit_fn fn, void *ud,
                          ah_redis_req **pending)
{
    if (pending)
        *pending = NULL;
    *wait_ms = 0;
    if (limit)
        *limit = LIMIT_REQ;
    if (!rl)
        return 0;
    if (rl->r && fn && pending) {
        const char *args[] = {"acquire", rl->args[0], rl->args[1], rl->args[2],
                              rl->args[3], "0"};
        ah_redis_req *q = ah__redis_eval(rl->r, &rate_script, 2,
                                         (const char *const *)rl->keys, 6, args, acquire_cb,
                                         rl, (ah__redis_user){(void (*)(void))fn, ud});
        if (q) {
            *pending = q;
            return 1;
        }
        ah__redis_note_down(rl->r, &rl->down_logged, "pacing falls back to this process");
    }
    *wait_ms = local_acquire(rl, loop, limit);
    return 0;
}

void ah_rate_limit_charge(ah_rate_limit *rl, ah_loop *loop, int64_t tokens)
{
    if (!rl || rl->tok_t_ms <= 0 || tokens <= 0)
        return;
    if (rl->r) {
        char n[32];
        snprintf(n, sizeof n, "%lld", (long long)tokens);
        const char *args[] = {"charge", rl->args[0], rl->args[1], rl->args[2],
                              rl->args[3], n};
        if (ah__redis_eval(rl->r, &rate_script, 2, (const char *const *)rl->keys, 6, args,
                           NULL, NULL, (ah__redis_user){0}))
            return;
    }
    double now = (double)ah_loop_now_ms(loop);
    pthread_mutex_lock(&rl->mu);
    if (!rl->have_clock) {
        rl->tat = rl->tok_tat = now;
        rl->have_clock = 1;
    }
    if (rl->tok_tat < now)
        rl->tok_tat = now;
    rl->tok_tat += (double)tokens * rl->tok_t_ms;
    pthread_mutex_unlock(&rl->mu);
}

void ah_rate_limit_hold(ah_rate_limit *rl, ah_loop *loop, int64_t req_ms, int64_t tok_ms)
{
    if (!rl || (req_ms < 0 && tok_ms < 0))
        return;
    if (rl->t_ms <= 0)
        req_ms = -1;
    if (rl->tok_t_ms <= 0)
        tok_ms = -1;
    if (req_ms < 0 && tok_ms < 0)
        return;
    if (req_ms >= 0 || tok_ms >= 0)
        ah__log(AH_LOG_INFO, "rate limit: the provider says a limit is exhausted; pacing "
                             "holds %lld ms (requests) / %lld ms (tokens)",
                (long long)req_ms, (long long)tok_ms);
    if (rl->r) {
        char a[32], b[32];
        snprintf(a, sizeof a, "%lld", (long long)(req_ms >= 0 ? req_ms * 1000 : -1));
        snprintf(b, sizeof b, "%lld", (long long)(tok_ms >= 0 ? tok_ms * 1000 : -1));
        const char *args[] = {"hold", rl->args[0], rl->args[1], rl->args[2], rl->args[3],
                              a, b};
        if (ah__redis_eval(rl->r, &rate_script, 2, (const char *const *)rl->keys, 7, args,
                           NULL, NULL, (ah__redis_user){0}))
            return;
    }
    double now = (double)ah_loop_now_ms(loop);
    pthread_mutex_lock(&rl->mu);
    if (!rl->have_clock) {
        rl->tat = rl->tok_tat = now;
        rl->have_clock = 1;
    }
    if (req_ms >= 0 && rl->tat < now + (double)req_ms + rl->tau_ms)
        rl->tat = now + (double)req_ms + rl->tau_ms;
    if (tok_ms >= 0 && rl->tok_tat < now + (double)tok_ms + rl->tok_tau_ms)
        rl->tok_tat = now + (double)tok_ms + rl->tok_tau_ms;
    pthread_mutex_unlock(&rl->mu);
}

/* A hold a header asks for, capped: a reset far ahead ("1000000h", or an instant read
 * on a skewed clock) must not stop the fleet for longer than the call would wait for a
 * Retry-After. The limit is then asked again by the next request after the cap. */
static int64_t cap_hold(int64_t ms, int64_t max_ms, const char *which)
{
    if (ms < 0 || max_ms < 0 || ms <= max_ms)
        return ms;
    ah__log(AH_LOG_WARN,
            "rate limit: the provider's %s limit resets in %lld ms; pacing holds only "
            "max_retry_after_ms (%lld ms)",
            which, (long long)ms, (long long)max_ms);
    return max_ms;
}

void ah__rate_limit_observe(ah_rate_limit *rl, ah_loop *loop, const ah_header *h, size_t n,
                            int64_t max_hold_ms)
{
    if (!rl || rl->ignore_headers || n == 0)
        return;
    int64_t req_ms, tok_ms;
    ah__ratelimit_exhausted(h, n, ah_loop_wall_ms(loop), &req_ms, &tok_ms);
    ah_rate_limit_hold(rl, loop, cap_hold(req_ms, max_hold_ms, "request"),
                       cap_hold(tok_ms, max_hold_ms, "token"));
}
