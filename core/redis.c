/* redis.c - one Redis connection on the host's loop: URL parsing, the hiredis adapter
 * (the loop's fd watchers + loop timers), timeouts, lazy reconnection and scripts.
 *
 * Invariants:
 *   - r->ac is the live hiredis context or NULL. It is set to NULL (conn_lost) before
 *     anything can free it, so a hiredis callback for a dying context is recognised by
 *     ac != r->ac and only its commands' callbacks run.
 *   - Every command sent has one ah_redis_req, freed in reply_cb (hiredis calls it exactly
 *     once per command: with the reply, or NULL when the context goes away). A request
 *     whose user callback already ran (timeout) or was cancelled has fn == NULL.
 *   - A command's timeout drops the whole connection: the replies behind a stalled one
 *     would be as late.
 *   - Nothing blocks: connect is non-blocking (hiredis); a host name is resolved by
 *     hiredis with getaddrinfo, so use an address (or /etc/hosts) where that matters.
 */
#include "internal.h"
#include "redis_internal.h"

#include <hiredis/async.h>

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- URLs -------------------------------------------------------------------------- */

static ah_status url_err(char *err, size_t size, const char *what)
{
    ah__bufprintf(err, size, "redis url: %s", what);
    return AH_ERR_INVALID;
}

static int parse_uint(const char *s, size_t n, long max, long *out)
{
    if (n == 0 || n > 9)
        return -1;
    long v = 0;
    for (size_t i = 0; i < n; i++) {
        if (!isdigit((unsigned char)s[i]))
            return -1;
        v = v * 10 + (s[i] - '0');
    }
    if (v > max)
        return -1;
    *out = v;
    return 0;
}

static int copy_part(char *dst, size_t size, const char *s, size_t n)
{
    if (n >= size)
        return -1;
    memcpy(dst, s, n);
    dst[n] = '\0';
    return 0;
}

/* Percent-decoding for the password (a password may hold '@' or ':' encoded). */
static int copy_decoded(char *dst, size_t size, const char *s, size_t n)
{
    size_t j = 0;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        if (c == '%' && i + 2 < n && isxdigit((unsigned char)s[i + 1]) &&
            isxdigit((unsigned char)s[i + 2])) {
            char hex[3] = {s[i + 1], s[i + 2], 0};
            c = (char)strtol(hex, NULL, 16);
            i += 2;
        }
        if (j + 1 >= size)
            return -1;
        dst[j++] = c;
    }
    dst[j] = '\0';
    return 0;
}

ah_status ah_redis_url_parse(const char *url, ah_redis_url *out, char *err, size_t errsize)
{
    if (err && errsize)
        err[0] = '\0';
    if (!out)
        return AH_ERR_INVALID;
    memset(out, 0, sizeof *out);
    out->port = 6379;
    if (!url || !*url)
        return url_err(err, errsize, "empty");
    const char *p = NULL;
    if (strncmp(url, "unix://", 7) == 0)
        p = url + 7;
    else if (strncmp(url, "redis+unix://", 13) == 0)
        p = url + 13;
    else if (strncmp(url, "unix:", 5) == 0)
        p = url + 5;
    if (p) {
        out->is_unix = 1;
        if (*p != '/')
            return url_err(err, errsize, "a unix socket path must be absolute (unix:/path)");
        const char *q = strchr(p, '?');
        size_t n = q ? (size_t)(q - p) : strlen(p);
        if (copy_part(out->path, sizeof out->path, p, n) != 0)
            return url_err(err, errsize, "socket path too long");
        if (q) {
            long db;
            if (strncmp(q, "?db=", 4) != 0 || parse_uint(q + 4, strlen(q + 4), 1000000, &db))
                return url_err(err, errsize, "unix socket options: only ?db=N is known");
            out->db = (int)db;
        }
        return AH_OK;
    }
    if (strncmp(url, "redis://", 8) != 0)
        return url_err(err, errsize,
                       "must start with redis:// or unix: (rediss:// (TLS) is not supported)");
    p = url + 8;
    const char *end = p + strlen(p);
    const char *slash = strchr(p, '/');
    const char *auth_end = NULL;
    /* The userinfo ends at the LAST '@' before the path. */
    for (const char *s = p; s < (slash ? slash : end); s++)
        if (*s == '@')
            auth_end = s;
    if (auth_end) {
        const char *colon = memchr(p, ':', (size_t)(auth_end - p));
        const char *pw = colon ? colon + 1 : p; /* redis://password@host is accepted too */
        if (copy_decoded(out->password, sizeof out->password, pw,
                         (size_t)(auth_end - pw)) != 0)
            return url_err(err, errsize, "password too long");
        p = auth_end + 1;
    }
    const char *hostend = slash ? slash : end;
    const char *portsep = NULL;
    if (*p == '[') {
        const char *rb = memchr(p, ']', (size_t)(hostend - p));
        if (!rb)
            return url_err(err, errsize, "unclosed '[' in the host");
        if (copy_part(out->host, sizeof out->host, p + 1, (size_t)(rb - p - 1)) != 0)
            return url_err(err, errsize, "host too long");
        if (rb + 1 < hostend) {
            if (rb[1] != ':')
                return url_err(err, errsize, "junk after ']' in the host");
            portsep = rb + 1;
        }
    } else {
        portsep = memchr(p, ':', (size_t)(hostend - p));
        size_t hl = (size_t)((portsep ? portsep : hostend) - p);
        if (copy_part(out->host, sizeof out->host, p, hl) != 0)
            return url_err(err, errsize, "host too long");
    }
    if (!out->host[0])
        return url_err(err, errsize, "no host (redis://host:port/db)");
    if (portsep) {
        long port;
        if (parse_uint(portsep + 1, (size_t)(hostend - portsep - 1), 65535, &port) != 0 ||
            port == 0)
            return url_err(err, errsize, "port must be 1..65535");
        out->port = (int)port;
    }
    if (slash && slash[1]) {
        long db;
        if (parse_uint(slash + 1, strlen(slash + 1), 1000000, &db) != 0)
            return url_err(err, errsize, "the database after '/' must be a number");
        out->db = (int)db;
    }
    return AH_OK;
}

void ah_redis_url_display(const ah_redis_url *u, char *buf, size_t size)
{
    if (u->is_unix) {
        if (u->db)
            ah__bufprintf(buf, size, "unix:%s?db=%d", u->path, u->db);
        else
            ah__bufprintf(buf, size, "unix:%s", u->path);
        return;
    }
    int v6 = strchr(u->host, ':') != NULL;
    ah__bufprintf(buf, size, "redis://%s%s%s%s:%d/%d", u->password[0] ? ":***@" : "",
                  v6 ? "[" : "", u->host, v6 ? "]" : "", u->port, u->db);
}

/* ---- SHA-1 (for EVALSHA) ------------------------------------------------------------ */

static uint32_t rol(uint32_t v, int n)
{
    return (v << n) | (v >> (32 - n));
}

static void sha1_block(uint32_t h[5], const unsigned char *b)
{
    uint32_t w[80];
    for (int i = 0; i < 16; i++)
        w[i] = (uint32_t)b[4 * i] << 24 | (uint32_t)b[4 * i + 1] << 16 |
               (uint32_t)b[4 * i + 2] << 8 | b[4 * i + 3];
    for (int i = 16; i < 80; i++)
        w[i] = rol(w[i - 3] ^ w[i - 8] ^ w[i - 14] ^ w[i - 16], 1);
    uint32_t a = h[0], bb = h[1], c = h[2], d = h[3], e = h[4];
    for (int i = 0; i < 80; i++) {
        uint32_t f, k;
        if (i < 20) {
            f = (bb & c) | (~bb & d);
            k = 0x5A827999;
        } else if (i < 40) {
            f = bb ^ c ^ d;
            k = 0x6ED9EBA1;
        } else if (i < 60) {
            f = (bb & c) | (bb & d) | (c & d);
            k = 0x8F1BBCDC;
        } else {
            f = bb ^ c ^ d;
            k = 0xCA62C1D6;
        }
        uint32_t t = rol(a, 5) + f + e + k + w[i];
        e = d;
        d = c;
        c = rol(bb, 30);
        bb = a;
        a = t;
    }
    h[0] += a;
    h[1] += bb;
    h[2] += c;
    h[3] += d;
    h[4] += e;
}

void ah__sha1_hex(const void *data, size_t len, char out[41])
{
    uint32_t h[5] = {0x67452301, 0xEFCDAB89, 0x98BADCFE, 0x10325476, 0xC3D2E1F0};
    const unsigned char *p = data;
    size_t i = 0;
    for (; i + 64 <= len; i += 64)
        sha1_block(h, p + i);
    unsigned char tail[128] = {0};
    size_t rest = len - i;
    memcpy(tail, p + i, rest);
    tail[rest] = 0x80;
    size_t tl = rest + 1 + 8 <= 64 ? 64 : 128;
    uint64_t bits = (uint64_t)len * 8;
    for (int k = 0; k < 8; k++)
        tail[tl - 1 - k] = (unsigned char)(bits >> (8 * k));
    sha1_block(h, tail);
    if (tl == 128)
        sha1_block(h, tail + 64);
    for (int k = 0; k < 5; k++)
        snprintf(out + 8 * k, 9, "%08x", (unsigned)h[k]);
}

void ah__redis_script_init(ah__redis_script *s, const char *src)
{
    s->src = src;
    ah__sha1_hex(src, strlen(src), s->sha);
}

/* ---- the connection ---------------------------------------------------------------- */

typedef enum conn_state { CONN_DOWN, CONN_CONNECTING, CONN_UP } conn_state;

struct ah_redis_req {
    ah_redis *r;
    ah__redis_fn fn;
    void *ud;
    ah__redis_user user;
    int done; /* its callback ran (timeout) or it was cancelled: nothing more to do */
    ah_timer *timer;
    const ah__redis_script *script; /* for the NOSCRIPT resend */
    int resent;
    int argc;
    char **argv; /* owned copies, for the resend */
    size_t *lens;
    ah_redis_req *prev, *next; /* r->reqs: every request hiredis still holds */
};

struct ah_redis {
    ah_loop *loop;
    ah_redis_url url;
    char name[320];
    ah_redis_options opt;
    redisAsyncContext *ac;
    conn_state state;
    ah_io *watch;
    int watch_events; /* what the watcher waits for (AH_IO_*) */
    ah_timer *connect_timer;
    int64_t retry_at;   /* DOWN: no reconnect before this (loop clock) */
    int64_t backoff_ms; /* the next back-off after a failure */
    int ever_up;
    uint64_t outage;    /* increments on every loss */
    uint64_t n_commands, n_connects;
    ah_redis_req *reqs;
    int freeing;
};

void ah_redis_options_init(ah_redis_options *o)
{
    o->connect_timeout_ms = 1000;
    o->command_timeout_ms = 1000;
    o->reconnect_min_ms = 100;
    o->reconnect_max_ms = 2000;
}

static void req_unlink(ah_redis_req *q)
{
    ah_redis *r = q->r;
    if (q->prev)
        q->prev->next = q->next;
    else if (r->reqs == q)
        r->reqs = q->next;
    if (q->next)
        q->next->prev = q->prev;
    q->prev = q->next = NULL;
}

static void req_free(ah_redis_req *q)
{
    req_unlink(q);
    ah_timer_free(q->timer);
    free(q->argv); /* one block: pointers, lengths and bytes */
    free(q);
}

static void deliver(ah_redis_req *q, const redisReply *reply, const char *err)
{
    ah__redis_fn fn = q->fn;
    q->fn = NULL;
    q->done = 1;
    ah_timer_stop(q->timer);
    if (fn)
        fn(q->ud, &q->user, reply, err);
}

/* Forget the context (it is being freed, or about to be by the caller). */
static void conn_lost(ah_redis *r, const char *why)
{
    if (!r->ac && r->state == CONN_DOWN)
        return;
    int was_up = r->state == CONN_UP;
    r->ac = NULL;
    r->state = CONN_DOWN;
    ah_io_free(r->watch); /* the dying context's hooks no longer reach it */
    r->watch = NULL;
    ah_timer_stop(r->connect_timer);
    if (r->freeing)
        return;
    r->outage++;
    r->retry_at = ah_loop_now_ms(r->loop) + r->backoff_ms;
    r->backoff_ms = r->backoff_ms * 2 > r->opt.reconnect_max_ms ? r->opt.reconnect_max_ms
                                                                : r->backoff_ms * 2;
    if (was_up)
        ah__log(AH_LOG_WARN, "redis %s: connection lost (%s)", r->name, why);
    else
        ah__log(AH_LOG_DEBUG, "redis %s: cannot connect (%s)", r->name, why);
}

/* Drop the live context from outside hiredis's callbacks (timeouts). */
static void drop_connection(ah_redis *r, const char *why)
{
    redisAsyncContext *ac = r->ac;
    conn_lost(r, why);
    if (ac)
        redisAsyncFree(ac); /* every pending reply_cb runs with NULL */
}

static void reply_cb(redisAsyncContext *ac, void *reply_v, void *privdata)
{
    ah_redis_req *q = privdata;
    ah_redis *r = q->r;
    redisReply *reply = reply_v;
    if (!reply) {
        if (ac == r->ac)
            conn_lost(r, ac->errstr[0] ? ac->errstr : "connection closed");
        deliver(q, NULL, "connection lost");
        req_free(q);
        return;
    }
    if (reply->type == REDIS_REPLY_ERROR) {
        /* (fire-and-forget commands too: a refund or a claim release must still run) */
        if (q->script && !q->resent && !q->done && strncmp(reply->str, "NOSCRIPT", 8) == 0 &&
            ac == r->ac) {
            /* The server lost the script (restart, SCRIPT FLUSH): send it whole once. */
            q->resent = 1;
            q->argv[0] = (char *)"EVAL";
            q->lens[0] = 4;
            q->argv[1] = (char *)q->script->src;
            q->lens[1] = strlen(q->script->src);
            if (redisAsyncCommandArgv(ac, reply_cb, q, q->argc, (const char **)q->argv,
                                      q->lens) == REDIS_OK) {
                r->n_commands++;
                return;
            }
        }
        char msg[256];
        ah__bufprintf(msg, sizeof msg, "%s", reply->str ? reply->str : "error reply");
        deliver(q, NULL, msg);
        req_free(q);
        return;
    }
    deliver(q, reply, NULL);
    req_free(q);
}

static void on_req_timeout(void *ud)
{
    ah_redis_req *q = ud;
    ah_redis *r = q->r;
    deliver(q, NULL, "timeout");
    /* q stays until hiredis lets it go: dropping the connection does that now. */
    char why[64];
    ah__bufprintf(why, sizeof why, "no reply within %d ms", r->opt.command_timeout_ms);
    drop_connection(r, why);
}

/* ---- the hiredis event hooks ------------------------------------------------------- */

static void on_fd(void *ud, int fd, int events)
{
    ah_redis *r = ud;
    redisAsyncContext *ac = r->ac;
    if (!ac)
        return;
    if (events & AH_IO_READ)
        redisAsyncHandleRead(ac);
    if ((events & AH_IO_WRITE) && r->ac == ac)
        redisAsyncHandleWrite(ac);
}

/* The hooks' privdata is the context itself, so hooks of a context being freed (no
 * longer r->ac) touch nothing: conn_lost already freed its watch. */
static void ev_set(void *p, int add, int del)
{
    redisAsyncContext *ac = p;
    ah_redis *r = ac->data;
    if (ac != r->ac)
        return;
    if (!r->watch) {
        r->watch = ah_io_new(r->loop, ac->c.fd, on_fd, r);
        r->watch_events = 0;
        if (!r->watch) {
            ah__log(AH_LOG_ERROR, "redis %s: cannot watch the socket", r->name);
            return;
        }
    }
    int ev = (r->watch_events | add) & ~del;
    if (ev == r->watch_events)
        return;
    r->watch_events = ev;
    if (ah_io_start(r->watch, ev) != AH_OK)
        ah__log(AH_LOG_ERROR, "redis %s: cannot watch the socket", r->name);
}

static void ev_add_read(void *p)
{
    ev_set(p, AH_IO_READ, 0);
}
static void ev_del_read(void *p)
{
    ev_set(p, 0, AH_IO_READ);
}
static void ev_add_write(void *p)
{
    ev_set(p, AH_IO_WRITE, 0);
}
static void ev_del_write(void *p)
{
    ev_set(p, 0, AH_IO_WRITE);
}
static void ev_cleanup(void *p)
{
    redisAsyncContext *ac = p;
    ah_redis *r = ac->data;
    if (ac != r->ac)
        return;
    ah_io_free(r->watch);
    r->watch = NULL;
}

static void on_connect(const redisAsyncContext *ac, int status)
{
    ah_redis *r = ac->data;
    if (ac != r->ac)
        return;
    if (status != REDIS_OK) {
        conn_lost(r, ac->errstr[0] ? ac->errstr : "connect failed");
        return; /* hiredis frees the context after this */
    }
    ah_timer_stop(r->connect_timer);
    r->state = CONN_UP;
    r->ever_up = 1;
    r->n_connects++;
    r->backoff_ms = r->opt.reconnect_min_ms;
    ah__log(AH_LOG_DEBUG, "redis %s: connected", r->name);
}

static void on_disconnect(const redisAsyncContext *ac, int status)
{
    ah_redis *r = ac->data;
    if (ac == r->ac)
        conn_lost(r, ac->errstr[0] ? ac->errstr : "disconnected");
}

static void on_connect_timeout(void *ud)
{
    ah_redis *r = ud;
    if (r->state != CONN_CONNECTING)
        return;
    char why[64];
    ah__bufprintf(why, sizeof why, "connect timed out after %d ms", r->opt.connect_timeout_ms);
    drop_connection(r, why);
}

static void auth_cb(void *ud, const ah__redis_user *user, const redisReply *reply,
                    const char *err)
{
    ah_redis *r = ud;
    if (err && strcmp(err, "connection lost") != 0 && strcmp(err, "timeout") != 0) {
        /* The server's text, never the password. The connection is useless: drop it
         * once the commands queued behind have failed. */
        ah__log(AH_LOG_ERROR, "redis %s: %s", r->name, err);
        if (r->ac)
            redisAsyncDisconnect(r->ac);
    }
}

static ah_redis_req *send_argv(ah_redis *r, const ah__redis_script *script, int argc,
                               const char **argv, const size_t *lens, ah__redis_fn fn,
                               void *ud, ah__redis_user user);

static void start_connect(ah_redis *r)
{
    redisAsyncContext *ac = r->url.is_unix ? redisAsyncConnectUnix(r->url.path)
                                           : redisAsyncConnect(r->url.host, r->url.port);
    if (!ac) {
        conn_lost(r, "out of memory");
        return;
    }
    if (ac->err) {
        char why[128];
        ah__bufprintf(why, sizeof why, "%s", ac->errstr);
        redisAsyncFree(ac);
        r->state = CONN_CONNECTING; /* so conn_lost records the failure */
        conn_lost(r, why);
        return;
    }
    r->ac = ac;
    r->state = CONN_CONNECTING;
    ac->data = r;
    ac->ev.data = ac;
    ac->ev.addRead = ev_add_read;
    ac->ev.delRead = ev_del_read;
    ac->ev.addWrite = ev_add_write;
    ac->ev.delWrite = ev_del_write;
    ac->ev.cleanup = ev_cleanup;
    redisAsyncSetConnectCallback(ac, on_connect);
    redisAsyncSetDisconnectCallback(ac, on_disconnect);
    ev_add_write(ac); /* the connect completes on the first writable event */
    ah_timer_start(r->connect_timer, r->opt.connect_timeout_ms);
    if (r->url.password[0]) {
        const char *argv[] = {"AUTH", r->url.password};
        size_t lens[] = {4, strlen(r->url.password)};
        send_argv(r, NULL, 2, argv, lens, auth_cb, r, (ah__redis_user){0});
    }
    if (r->url.db) {
        char db[16];
        snprintf(db, sizeof db, "%d", r->url.db);
        const char *argv[] = {"SELECT", db};
        size_t lens[] = {6, strlen(db)};
        send_argv(r, NULL, 2, argv, lens, auth_cb, r, (ah__redis_user){0});
    }
}

static ah_redis *redis_make(ah_loop *loop, const char *url, const ah_redis_options *opts,
                            char *err, size_t errsize, ah_status *st)
{
    *st = AH_ERR_INVALID;
    if (!loop) {
        ah__bufprintf(err, errsize, "redis: a loop is required");
        return NULL;
    }
    ah_redis *r = calloc(1, sizeof *r);
    if (!r) {
        *st = AH_ERR_NOMEM;
        ah__bufprintf(err, errsize, "out of memory");
        return NULL;
    }
    if (ah_redis_url_parse(url, &r->url, err, errsize) != AH_OK) {
        free(r);
        return NULL;
    }
    r->loop = loop;
    if (opts)
        r->opt = *opts;
    else
        ah_redis_options_init(&r->opt);
    if (r->opt.connect_timeout_ms <= 0)
        r->opt.connect_timeout_ms = 1000;
    if (r->opt.command_timeout_ms <= 0)
        r->opt.command_timeout_ms = 1000;
    if (r->opt.reconnect_min_ms <= 0)
        r->opt.reconnect_min_ms = 100;
    if (r->opt.reconnect_max_ms < r->opt.reconnect_min_ms)
        r->opt.reconnect_max_ms = r->opt.reconnect_min_ms;
    r->backoff_ms = r->opt.reconnect_min_ms;
    ah_redis_url_display(&r->url, r->name, sizeof r->name);
    r->connect_timer = ah_timer_new(loop, on_connect_timeout, r);
    if (!r->connect_timer) {
        free(r);
        *st = AH_ERR_NOMEM;
        ah__bufprintf(err, errsize, "out of memory");
        return NULL;
    }
    start_connect(r);
    return r;
}

/* The public form (status, out-pointer, error buffer): see the header. */
ah_status ah_redis_new(ah_loop *loop, const char *url, const ah_redis_options *opts,
                       ah_redis **out, char *err, size_t errsize)
{
    ah_status st = AH_OK;
    if (!out) {
        if (err && errsize)
            ah__bufprintf(err, errsize, "ah_redis_new: out is NULL");
        return AH_ERR_INVALID;
    }
    *out = redis_make(loop, url, opts, err, errsize, &st);
    return *out ? AH_OK : st;
}

void ah_redis_free(ah_redis *r)
{
    if (!r)
        return;
    r->freeing = 1;
    for (ah_redis_req *q = r->reqs; q; q = q->next) {
        q->fn = NULL;
        q->done = 1;
        ah_timer_stop(q->timer);
    }
    redisAsyncContext *ac = r->ac;
    /* Write what is buffered (a ledger's claim releases) without waiting for replies:
     * one non-blocking write; whatever the socket does not take is lost. */
    if (ac && r->state == CONN_UP && (r->watch_events & AH_IO_WRITE))
        redisAsyncHandleWrite(ac);
    ac = r->ac;
    r->ac = NULL;
    r->state = CONN_DOWN;
    if (ac)
        redisAsyncFree(ac);
    while (r->reqs) /* not sent to hiredis (cannot happen), or left by it */
        req_free(r->reqs);
    ah_io_free(r->watch);
    ah_timer_free(r->connect_timer);
    memset(r->url.password, 0, sizeof r->url.password);
    free(r);
}

int ah_redis_ready(const ah_redis *r)
{
    return r && r->state == CONN_UP;
}

const char *ah_redis_name(const ah_redis *r)
{
    return r ? r->name : "";
}

ah_loop *ah_redis_loop(const ah_redis *r)
{
    return r ? r->loop : NULL;
}

uint64_t ah_redis_commands(const ah_redis *r)
{
    return r ? r->n_commands : 0;
}

uint64_t ah_redis_connects(const ah_redis *r)
{
    return r ? r->n_connects : 0;
}

void ah_redis_req_cancel(ah_redis_req *q)
{
    if (!q)
        return;
    q->fn = NULL;
    q->done = 1;
    ah_timer_stop(q->timer);
}

static ah_redis_req *send_argv(ah_redis *r, const ah__redis_script *script, int argc,
                               const char **argv, const size_t *lens, ah__redis_fn fn,
                               void *ud, ah__redis_user user)
{
    if (!r->ac || argc <= 0)
        return NULL;
    size_t bytes = 0;
    for (int i = 0; i < argc; i++)
        bytes += lens[i];
    ah_redis_req *q = calloc(1, sizeof *q);
    char *block = malloc((size_t)argc * (sizeof(char *) + sizeof(size_t)) + bytes + 1);
    if (!q || !block) {
        free(q);
        free(block);
        return NULL;
    }
    q->argv = (char **)(void *)block;
    q->lens = (size_t *)(void *)(block + (size_t)argc * sizeof(char *));
    char *p = block + (size_t)argc * (sizeof(char *) + sizeof(size_t));
    for (int i = 0; i < argc; i++) {
        memcpy(p, argv[i], lens[i]);
        q->argv[i] = p;
        q->lens[i] = lens[i];
        p += lens[i];
    }
    q->r = r;
    q->fn = fn;
    q->ud = ud;
    q->user = user;
    q->script = script;
    q->argc = argc;
    q->timer = ah_timer_new(r->loop, on_req_timeout, q);
    if (!q->timer) {
        free(block);
        free(q);
        return NULL;
    }
    if (redisAsyncCommandArgv(r->ac, reply_cb, q, argc, (const char **)q->argv, q->lens) !=
        REDIS_OK) {
        ah_timer_free(q->timer);
        free(block);
        free(q);
        return NULL;
    }
    r->n_commands++;
    q->next = r->reqs;
    if (q->next)
        q->next->prev = q;
    r->reqs = q;
    ah_timer_start(q->timer, r->opt.command_timeout_ms);
    return q;
}

ah_redis_req *ah__redis_command(ah_redis *r, const ah__redis_script *script, int argc,
                                const char **argv, const size_t *lens, ah__redis_fn fn,
                                void *ud, ah__redis_user user)
{
    if (!r || r->freeing)
        return NULL;
    if (r->state == CONN_DOWN) {
        /* Lazy reconnect: a first use after the back-off starts it; this command does
         * not wait for it (the caller decides without Redis, as while it was down). */
        if (ah_loop_now_ms(r->loop) >= r->retry_at)
            start_connect(r);
        return NULL;
    }
    return send_argv(r, script, argc, argv, lens, fn, ud, user);
}

ah_redis_req *ah__redis_eval(ah_redis *r, const ah__redis_script *script, int nkeys,
                             const char *const *keys, int nargs, const char *const *args,
                             ah__redis_fn fn, void *ud, ah__redis_user user)
{
    enum { MAX_ARGS = 16 };
    if (nkeys < 0 || nargs < 0 || 3 + nkeys + nargs > MAX_ARGS)
        return NULL;
    const char *argv[MAX_ARGS];
    size_t lens[MAX_ARGS];
    char nk[16];
    snprintf(nk, sizeof nk, "%d", nkeys);
    int n = 0;
    argv[n] = "EVALSHA";
    lens[n++] = 7;
    argv[n] = script->sha;
    lens[n++] = 40;
    argv[n] = nk;
    lens[n++] = strlen(nk);
    for (int i = 0; i < nkeys; i++, n++) {
        argv[n] = keys[i];
        lens[n] = strlen(keys[i]);
    }
    for (int i = 0; i < nargs; i++, n++) {
        argv[n] = args[i];
        lens[n] = strlen(args[i]);
    }
    return ah__redis_command(r, script, n, argv, lens, fn, ud, user);
}

int ah__redis_note_down(ah_redis *r, int *flag, const char *what)
{
    if (*flag)
        return 0;
    *flag = 1;
    ah__log(AH_LOG_WARN, "redis %s unreachable: %s", r->name, what);
    return 1;
}

void ah__redis_note_up(ah_redis *r, int *flag, const char *what)
{
    if (!*flag)
        return;
    *flag = 0;
    ah__log(AH_LOG_INFO, "redis %s is back: %s", r->name, what);
}
