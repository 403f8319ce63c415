/* redis_none.c - the connection functions of a library built without Redis
 * (AH_WITH_REDIS=OFF, no hiredis; redis.c is left out): a connection cannot be made, so
 * every Redis-backed budget, pacer and ledger is refused when it is built, with a message
 * that says why, and nothing else changes (their local forms work as always).
 *
 * Invariants: ah_redis_new never succeeds, so no request, reply or callback exists; the
 * functions that take a connection are never reached with one and answer as for none. */
#ifdef AH_NO_REDIS
#include "internal.h"
#include "redis_internal.h"

ah_status ah_redis_new(ah_loop *loop, const char *url, const ah_redis_options *opts,
                       ah_redis **out, char *err, size_t errsize)
{
    (void)loop;
    (void)url;
    (void)opts;
    if (out)
        *out = NULL;
    if (err && errsize)
        ah__bufprintf(err, errsize,
                      "agenthost was built without Redis (AH_WITH_REDIS=OFF): no shared "
                      "budget, pacing or ledger");
    return AH_ERR_INVALID;
}

void ah_redis_free(ah_redis *r)
{
    (void)r;
}

int ah_redis_ready(const ah_redis *r)
{
    (void)r;
    return 0;
}

const char *ah_redis_name(const ah_redis *r)
{
    (void)r;
    return "";
}

ah_loop *ah_redis_loop(const ah_redis *r)
{
    (void)r;
    return NULL;
}

uint64_t ah_redis_commands(const ah_redis *r)
{
    (void)r;
    return 0;
}

uint64_t ah_redis_connects(const ah_redis *r)
{
    (void)r;
    return 0;
}

const char *ah__redis_last_error(const ah_redis *r)
{
    (void)r;
    return "built without Redis";
}

void ah_redis_req_cancel(ah_redis_req *q)
{
    (void)q;
}

ah_redis_req *ah__redis_command_ex(ah_redis *r, const ah__redis_script *script, int argc,
                                   const char **argv, const size_t *lens, unsigned flags,
                                   int timeout_ms, ah__redis_fn fn, void *ud,
                                   ah__redis_user user)
{
    (void)r, (void)script, (void)argc, (void)argv, (void)lens, (void)flags;
    (void)timeout_ms, (void)fn, (void)ud, (void)user;
    return NULL;
}

ah_redis_req *ah__redis_command(ah_redis *r, const ah__redis_script *script, int argc,
                                const char **argv, const size_t *lens, ah__redis_fn fn,
                                void *ud, ah__redis_user user)
{
    return ah__redis_command_ex(r, script, argc, argv, lens, 0, 0, fn, ud, user);
}

ah_redis_req *ah__redis_eval_ex(ah_redis *r, const ah__redis_script *script, int nkeys,
                                const char *const *keys, int nargs, const char *const *args,
                                unsigned flags, int timeout_ms, ah__redis_fn fn, void *ud,
                                ah__redis_user user)
{
    (void)r, (void)script, (void)nkeys, (void)keys, (void)nargs, (void)args, (void)flags;
    (void)timeout_ms, (void)fn, (void)ud, (void)user;
    return NULL;
}

ah_redis_req *ah__redis_eval(ah_redis *r, const ah__redis_script *script, int nkeys,
                             const char *const *keys, int nargs, const char *const *args,
                             ah__redis_fn fn, void *ud, ah__redis_user user)
{
    return ah__redis_eval_ex(r, script, nkeys, keys, nargs, args, 0, 0, fn, ud, user);
}

int ah__redis_eval_again(ah_redis_req *q, int nkeys, const char *const *keys, int nargs,
                         const char *const *args)
{
    (void)q, (void)nkeys, (void)keys, (void)nargs, (void)args;
    return 0;
}

int ah__redis_note_down(ah_redis *r, int *flag, const char *what)
{
    (void)r, (void)flag, (void)what;
    return 0;
}

void ah__redis_note_up(ah_redis *r, int *flag, const char *what)
{
    (void)r, (void)flag, (void)what;
}
#else
typedef int ah__redis_none_unused; /* built with Redis: redis.c is the connection */
#endif
