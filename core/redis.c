/* redis.c - one Redis connection on the host's loop: the hiredis adapter (the loop's fd
 * watchers + loop timers), time-outs, reconnection and scripts. URLs and script hashes
 * are redis_url.c's (built without hiredis too); built with AH_WITH_REDIS=OFF, this file
 * is left out and redis_none.c stands in.
 *
 * Invariants:
 *   - r->ac is the live hiredis context or NULL. It is set to NULL (conn_lost) before
 *     anything can free it, so a hiredis callback for a dying context is recognised by
 *     ac != r->ac and only its commands' callbacks run.
 *   - Every request has one ah_redis_req and one timer (its deadline, its attempt's
 *     time-out, its resend). A request waits in r->queue until the connection is up
 *     (the handshake, [AUTH] [SELECT] PING, answered), so a command on a connection
 *     that is down waits for the reconnect within its own deadline; hiredis holds a
 *     request (r->sent) from its send to its reply_cb, which hiredis calls exactly once
 *     (with the reply, or NULL when the context goes away).
 *   - A connection lost after it served is made again at once; a failed attempt backs
 *     off (reconnect_min_ms doubling to reconnect_max_ms). While attempts fail (an
 *     outage) a new command fails at once (the caller decides without Redis) unless it
 *     is AH__REDIS_PATIENT.
 *   - A request lost in flight with its connection is sent again on the next one only
 *     when it is AH__REDIS_RESEND (its script is idempotent); others are told.
 *   - A command's attempt time-out drops the whole connection: the replies behind a
 *     stalled one would be as late.
 *   - No callback runs inside the call that made the request: a connection found dead
 *     while sending is dropped from the loop (doom), never from inside that call.
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
#include <sys/socket.h>

/* ---- the connection ---------------------------------------------------------------- */

/* DOWN: no context. CONNECTING: a context, connecting or in its handshake ([AUTH]
 * [SELECT] PING); commands wait in the queue. UP: the handshake answered; commands go
 * to the server. */
typedef enum conn_state { CONN_DOWN, CONN_CONNECTING, CONN_UP } conn_state;

/* Where a request is: waiting in r->queue (QUEUED, or DELAYED until retry_at after a
 * transient error reply), held by hiredis (SENT, in r->sent), or nowhere (being
 * delivered or freed). */
typedef enum req_where { Q_NONE, Q_QUEUED, Q_DELAYED, Q_SENT } req_where;

/* How long a resend waits after a transient error reply (BUSY, LOADING, ...); how long
 * a connection that answered nothing of ours must have lived for its loss to be
 * reconnected at once (else it may be a server that closes what it accepts). */
enum { TRANSIENT_RETRY_MS = 100, SERVED_MS = 1000 };

struct ah_redis_req {
    ah_redis *r;
    ah__redis_fn fn; /* NULL once delivered or cancelled (or fire and forget) */
    void *ud;
    ah__redis_user user;
    int want;        /* the command must still reach the server */
    int in_cb;       /* its callback is running */
    int again;       /* the callback asked for another command under this handle */
    int cancelled;
    unsigned flags;  /* AH__REDIS_* */
    req_where where;
    uint64_t order;  /* creation order: the queue keeps it */
    int timeout_ms;      /* its patience, from when it was made */
    int64_t deadline;    /* loop ms: the caller's answer is due by then */
    int64_t attempt_due; /* SENT: no reply by then drops the connection */
    int64_t retry_at;    /* DELAYED: back in the queue then */
    char last_err[160];  /* DELAYED: the error reply it got */
    ah_timer *timer;
    const ah__redis_script *script; /* for the NOSCRIPT resend */
    int resent;
    int argc;
    char **argv; /* owned copies, for the resends */
    size_t *lens;
    ah_redis_req *prev, *next; /* r->queue or r->sent */
};

typedef struct req_list {
    ah_redis_req *head, *tail;
} req_list;

struct ah_redis {
    ah_loop *loop;
    ah_redis_url url;
    char name[320];
    ah_redis_options opt;
    redisAsyncContext *ac;
    conn_state state;
    int handshake_n, handshake_left; /* the handshake's commands, and replies due */
    int doomed;         /* the server closed the socket: drop it from the loop */
    ah_io *watch;
    int watch_events; /* what the watcher waits for (AH_IO_*) */
    ah_timer *connect_timer; /* connect + handshake time-out */
    ah_timer *retry_timer;   /* DOWN: the next connection attempt */
    ah_timer *drop_timer;    /* doomed: drop the connection from the loop */
    int64_t retry_at;   /* DOWN: no reconnect before this (loop clock) */
    int64_t backoff_ms; /* the next back-off after a failure */
    int64_t up_since;
    int served;         /* the connection answered one of our commands */
    int failures;       /* connection attempts failed since the last one that came up */
    char last_err[256]; /* why the last attempt failed, or why the connection went */
    char loss[160];     /* what a request lost with the connection is told */
    uint64_t n_commands, n_connects, n_orders;
    req_list queue, sent;
    int freeing;
};

static int64_t now_ms(const ah_redis *r)
{
    return ah_loop_now_ms(r->loop);
}

static void list_unlink(req_list *l, ah_redis_req *q)
{
    if (q->prev)
        q->prev->next = q->next;
    else if (l->head == q)
        l->head = q->next;
    if (q->next)
        q->next->prev = q->prev;
    else if (l->tail == q)
        l->tail = q->prev;
    q->prev = q->next = NULL;
}

static void req_unlink(ah_redis_req *q)
{
    ah_redis *r = q->r;
    if (q->where == Q_SENT)
        list_unlink(&r->sent, q);
    else if (q->where == Q_QUEUED || q->where == Q_DELAYED)
        list_unlink(&r->queue, q);
    q->where = Q_NONE;
}

/* Into the queue in creation order (a request lost in flight goes back before those
 * made after it). */
static void enqueue(ah_redis_req *q, req_where where)
{
    req_list *l = &q->r->queue;
    ah_redis_req *after = l->tail;
    while (after && after->order > q->order)
        after = after->prev;
    q->prev = after;
    q->next = after ? after->next : l->head;
    if (q->next)
        q->next->prev = q;
    else
        l->tail = q;
    if (after)
        after->next = q;
    else
        l->head = q;
    q->where = where;
}

static void req_free(ah_redis_req *q)
{
    req_unlink(q);
    ah_timer_free(q->timer);
    free(q->argv); /* one block: pointers, lengths and bytes */
    free(q);
}

/* Arm the request's one timer for the first of its deadline, its attempt's time-out
 * (SENT) and its resend (DELAYED). */
static void req_arm(ah_redis_req *q)
{
    int64_t due = q->deadline;
    if (q->where == Q_SENT && q->attempt_due < due)
        due = q->attempt_due;
    if (q->where == Q_DELAYED && q->retry_at < due)
        due = q->retry_at;
    int64_t left = due - now_ms(q->r);
    ah_timer_start(q->timer, left > 0 ? left : 0);
}

/* The caller's answer (once): reply on success, else err. The request no longer needs
 * to reach the server; it is freed unless hiredis still holds it. */
static void dispatch(ah_redis *r, ah_redis_req *q);

static void finish(ah_redis_req *q, const redisReply *reply, const char *err)
{
    ah__redis_fn fn = q->fn;
    q->fn = NULL;
    q->want = 0;
    ah_timer_stop(q->timer);
    if (fn) {
        q->in_cb = 1;
        fn(q->ud, &q->user, reply, err);
        q->in_cb = 0;
    }
    if (q->again && !q->cancelled && q->where == Q_NONE) {
        /* the next command of a sequence (ah__redis_eval_again), same handle */
        q->again = 0;
        q->fn = fn;
        q->want = 1;
        q->resent = 0;
        q->order = ++q->r->n_orders;
        q->deadline = now_ms(q->r) + q->timeout_ms;
        dispatch(q->r, q);
        return;
    }
    if (q->where != Q_SENT)
        req_free(q);
}

static void schedule_reconnect(ah_redis *r)
{
    if (r->freeing || r->state != CONN_DOWN)
        return;
    int64_t left = r->retry_at - now_ms(r);
    ah_timer_start(r->retry_timer, left > 0 ? left : 0);
}

/* Forget the context (it is being freed, or about to be by the caller). */
static void conn_lost(ah_redis *r, const char *why)
{
    if (!r->ac && r->state == CONN_DOWN)
        return;
    int was_up = r->state == CONN_UP;
    int busy = r->sent.head != NULL;
    r->ac = NULL;
    r->state = CONN_DOWN;
    r->doomed = 0;
    r->handshake_n = r->handshake_left = 0;
    ah_io_free(r->watch); /* the dying context's hooks no longer reach it */
    r->watch = NULL;
    ah_timer_stop(r->connect_timer);
    ah_timer_stop(r->drop_timer);
    if (r->freeing)
        return;
    int64_t now = now_ms(r);
    if (was_up && (r->served || now - r->up_since >= SERVED_MS)) {
        /* A connection that served: make the next one at once (an idle drop, a killed
         * client, a failover), so what waits for it waits for one round trip. */
        r->retry_at = now;
        r->backoff_ms = r->opt.reconnect_min_ms;
    } else {
        /* A failed attempt, or a connection that went as soon as it came: back off. */
        if (!was_up)
            r->failures++;
        r->retry_at = now + r->backoff_ms;
        r->backoff_ms = r->backoff_ms * 2 > r->opt.reconnect_max_ms ? r->opt.reconnect_max_ms
                                                                    : r->backoff_ms * 2;
    }
    ah__bufprintf(r->last_err, sizeof r->last_err, "%s", why);
    ah__bufprintf(r->loss, sizeof r->loss, "connection lost (%s)", why);
    if (was_up && busy)
        ah__log(AH_LOG_WARN, "redis %s: connection lost (%s); reconnecting", r->name, why);
    else if (was_up)
        ah__log(AH_LOG_DEBUG, "redis %s: connection closed while idle (%s); reconnects on "
                              "next use", r->name, why);
    else
        ah__log(AH_LOG_DEBUG, "redis %s: cannot connect (%s)", r->name, why);
    if (r->queue.head || r->sent.head)
        schedule_reconnect(r);
}

/* Drop the live context from outside hiredis's callbacks (time-outs, a doomed socket). */
static void drop_connection(ah_redis *r, const char *why)
{
    redisAsyncContext *ac = r->ac;
    conn_lost(r, why);
    if (ac)
        redisAsyncFree(ac); /* every pending reply_cb runs with NULL */
}

/* The server closed the socket (or must be left): drop the connection from the loop,
 * not from inside the call that noticed. */
static void doom(ah_redis *r, const char *why)
{
    if (r->doomed || !r->ac)
        return;
    r->doomed = 1;
    ah__bufprintf(r->loss, sizeof r->loss, "%s", why);
    ah_timer_start(r->drop_timer, 0);
}

static void on_drop_timer(void *ud)
{
    ah_redis *r = ud;
    if (r->doomed && r->ac) {
        char why[160];
        ah__bufprintf(why, sizeof why, "%s", r->loss);
        drop_connection(r, why);
    }
}

/* 1 unless the socket says the server has closed it (EOF or an error waiting to be
 * read): what the loop would have seen had it run since (a body that blocked it). */
static int socket_alive(const ah_redis *r)
{
    int fd = r->ac ? r->ac->c.fd : -1;
    if (fd < 0)
        return 0;
    char c;
    ssize_t n = recv(fd, &c, 1, MSG_PEEK | MSG_DONTWAIT);
    if (n > 0)
        return 1;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
        return 1;
    return 0;
}

/* Error replies a resend may outlive: a script running too long elsewhere, a server
 * loading its data, a failover in progress. */
static int transient_reply(const char *s)
{
    static const char *const kinds[] = {"BUSY ", "LOADING ", "TRYAGAIN ", "MASTERDOWN ",
                                        "READONLY ", "CLUSTERDOWN "};
    for (size_t i = 0; i < sizeof kinds / sizeof *kinds; i++)
        if (strncmp(s, kinds[i], strlen(kinds[i])) == 0)
            return 1;
    return 0;
}

static void pump(ah_redis *r);

static void reply_cb(redisAsyncContext *ac, void *reply_v, void *privdata)
{
    ah_redis_req *q = privdata;
    ah_redis *r = q->r;
    redisReply *reply = reply_v;
    if (r->freeing) {
        req_free(q);
        return;
    }
    if (reply && ac == r->ac)
        r->served = 1;
    if (!reply) {
        if (ac == r->ac)
            conn_lost(r, ac->errstr[0] ? ac->errstr : "connection closed");
        req_unlink(q);
        if (!q->want) {
            req_free(q);
        } else if ((q->flags & AH__REDIS_RESEND) && now_ms(r) < q->deadline) {
            enqueue(q, Q_QUEUED); /* sent again on the next connection */
            req_arm(q);
            schedule_reconnect(r);
        } else {
            finish(q, NULL, r->loss);
        }
        return;
    }
    if (reply->type == REDIS_REPLY_ERROR) {
        const char *msg = reply->str ? reply->str : "error reply";
        /* (fire-and-forget commands too: a refund or a claim release must still run) */
        if (q->script && !q->resent && q->want && strncmp(msg, "NOSCRIPT", 8) == 0 &&
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
        req_unlink(q);
        if (q->want && (q->flags & AH__REDIS_RESEND) && transient_reply(msg) &&
            now_ms(r) + TRANSIENT_RETRY_MS < q->deadline) {
            ah__bufprintf(q->last_err, sizeof q->last_err, "%s", msg);
            q->retry_at = now_ms(r) + TRANSIENT_RETRY_MS;
            enqueue(q, Q_DELAYED);
            req_arm(q);
            if (strncmp(msg, "READONLY", 8) == 0 && ac == r->ac)
                doom(r, "the server is a read-only replica now");
            return;
        }
        char buf[300];
        if (strncmp(msg, "NOAUTH", 6) == 0) { /* (the handshake's PING says it first) */
            ah__bufprintf(buf, sizeof buf, "authentication required (%s)", msg);
            msg = buf;
        }
        if (!q->want)
            req_free(q);
        else
            finish(q, NULL, msg);
        return;
    }
    req_unlink(q);
    if (!q->want)
        req_free(q);
    else
        finish(q, reply, NULL);
}

static void on_req_timer(void *ud)
{
    ah_redis_req *q = ud;
    ah_redis *r = q->r;
    int64_t now = now_ms(r);
    if (q->where == Q_SENT) {
        if (now < q->deadline && now < q->attempt_due) {
            req_arm(q);
            return;
        }
        char why[64];
        ah__bufprintf(why, sizeof why, "no reply within %d ms", r->opt.command_timeout_ms);
        ah__bufprintf(r->last_err, sizeof r->last_err, "%s", why); /* for what fn logs */
        if (now >= q->deadline) {
            ah__redis_fn fn = q->fn; /* answered now; hiredis lets it go below */
            q->fn = NULL;
            q->want = 0;
            if (fn) {
                q->in_cb = 1;
                fn(q->ud, &q->user, NULL, why);
                q->in_cb = 0;
            }
        }
        /* A stalled server: what is queued behind this command would be as late. The
         * drop lets q go (and sends a resendable one again on the next connection). */
        drop_connection(r, why);
        return;
    }
    if (q->where == Q_DELAYED && now < q->deadline && now >= q->retry_at) {
        list_unlink(&r->queue, q);
        enqueue(q, Q_QUEUED);
        req_arm(q);
        pump(r);
        return;
    }
    if (now < q->deadline) {
        req_arm(q);
        return;
    }
    char why[400];
    if (q->where == Q_DELAYED)
        ah__bufprintf(why, sizeof why, "%s", q->last_err);
    else
        ah__bufprintf(why, sizeof why, "no connection within %d ms (%s)", q->timeout_ms,
                      r->last_err[0] ? r->last_err : "connecting");
    finish(q, NULL, why);
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

static void became_up(ah_redis *r)
{
    ah_timer_stop(r->connect_timer);
    r->state = CONN_UP;
    r->up_since = now_ms(r);
    r->served = 0;
    r->failures = 0;
    r->last_err[0] = '\0';
    r->n_connects++;
    ah__log(AH_LOG_DEBUG, "redis %s: connected", r->name);
    pump(r);
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
    /* Probes keep a load balancer's idle timer from dropping a quiet connection and
     * find one that vanished without a word. */
    if (!r->url.is_unix)
        redisEnableKeepAlive((redisContext *)&ac->c);
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

/* The handshake's replies ([AUTH] [SELECT] PING). privdata is r: a context is freed
 * before its ah_redis. */
static void handshake_cb(redisAsyncContext *ac, void *reply_v, void *privdata)
{
    ah_redis *r = privdata;
    redisReply *reply = reply_v;
    if (r->freeing || ac != r->ac || r->doomed)
        return;
    if (!reply) {
        conn_lost(r, ac->errstr[0] ? ac->errstr : "connection closed");
        return;
    }
    int which = r->handshake_n - r->handshake_left--; /* 0 = the first sent */
    if (reply->type == REDIS_REPLY_ERROR) {
        /* The server's text, never the password; the connection is useless (dropped
         * from the loop). What does not wait through an outage hears why now. */
        const char *msg = reply->str ? reply->str : "error reply";
        char why[256];
        if (which == 0 && r->url.password[0])
            ah__bufprintf(why, sizeof why, "authentication failed (%s)", msg);
        else if (strncmp(msg, "NOAUTH", 6) == 0)
            ah__bufprintf(why, sizeof why, "authentication required (%s): the URL gives no "
                                           "password (redis://:PASSWORD@host:port/db)", msg);
        else
            ah__bufprintf(why, sizeof why, "the server refused the connection (%s)", msg);
        ah__log(AH_LOG_ERROR, "redis %s: %s", r->name, why);
        doom(r, why);
        for (ah_redis_req *q = r->queue.head, *next; q; q = next) {
            next = q->next;
            if (q->want && !(q->flags & AH__REDIS_PATIENT))
                finish(q, NULL, why);
        }
        return;
    }
    if (r->handshake_left == 0 && r->state == CONN_CONNECTING)
        became_up(r);
}

static void start_connect(ah_redis *r)
{
    redisAsyncContext *ac = r->url.is_unix ? redisAsyncConnectUnix(r->url.path)
                                           : redisAsyncConnect(r->url.host, r->url.port);
    if (!ac) {
        r->state = CONN_CONNECTING; /* so conn_lost records the failure */
        conn_lost(r, "out of memory");
        return;
    }
    if (ac->err) {
        char why[128];
        ah__bufprintf(why, sizeof why, "%s", ac->errstr);
        redisAsyncFree(ac);
        r->state = CONN_CONNECTING;
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
    /* The handshake: commands wait in the queue until it answered, so nothing reaches
     * a server that has not accepted the password (it would answer them with a
     * protocol error, not with why). PING proves the server answers at all. */
    r->handshake_left = 0;
    if (r->url.password[0]) {
        const char *argv[] = {"AUTH", r->url.password};
        size_t lens[] = {4, strlen(r->url.password)};
        if (redisAsyncCommandArgv(ac, handshake_cb, r, 2, argv, lens) == REDIS_OK)
            r->handshake_left++;
    }
    if (r->url.db) {
        char db[16];
        snprintf(db, sizeof db, "%d", r->url.db);
        const char *argv[] = {"SELECT", db};
        size_t lens[] = {6, strlen(db)};
        if (redisAsyncCommandArgv(ac, handshake_cb, r, 2, argv, lens) == REDIS_OK)
            r->handshake_left++;
    }
    const char *ping[] = {"PING"};
    size_t ping_len[] = {4};
    if (redisAsyncCommandArgv(ac, handshake_cb, r, 1, ping, ping_len) == REDIS_OK)
        r->handshake_left++;
    r->handshake_n = r->handshake_left;
}

static void on_retry_timer(void *ud)
{
    ah_redis *r = ud;
    if (r->state == CONN_DOWN && !r->freeing)
        start_connect(r);
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
    r->retry_timer = ah_timer_new(loop, on_retry_timer, r);
    r->drop_timer = ah_timer_new(loop, on_drop_timer, r);
    if (!r->connect_timer || !r->retry_timer || !r->drop_timer) {
        ah_timer_free(r->connect_timer);
        ah_timer_free(r->retry_timer);
        ah_timer_free(r->drop_timer);
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
    for (ah_redis_req *q = r->sent.head; q; q = q->next) {
        q->fn = NULL;
        q->want = 0;
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
        redisAsyncFree(ac); /* frees what it held (reply_cb, freeing) */
    while (r->sent.head) /* left by it (cannot happen) */
        req_free(r->sent.head);
    while (r->queue.head) /* never sent: dropped without their callbacks */
        req_free(r->queue.head);
    ah_io_free(r->watch);
    ah_timer_free(r->connect_timer);
    ah_timer_free(r->retry_timer);
    ah_timer_free(r->drop_timer);
    memset(r->url.password, 0, sizeof r->url.password);
    free(r);
}

int ah_redis_ready(const ah_redis *r)
{
    return r && r->state == CONN_UP && !r->doomed;
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

const char *ah__redis_last_error(const ah_redis *r)
{
    return r && r->last_err[0] ? r->last_err : "unreachable";
}

void ah_redis_req_cancel(ah_redis_req *q)
{
    if (!q)
        return;
    q->fn = NULL;
    if (q->in_cb) { /* from its own callback: finish() lets it go */
        q->cancelled = 1;
        q->again = 0;
        return;
    }
    if (q->flags & AH__REDIS_KEEP)
        return; /* still sent (its write matters), answered to no one */
    q->want = 0;
    if (q->where == Q_SENT)
        ah_timer_stop(q->timer); /* hiredis lets it go with its reply */
    else
        req_free(q);
}

/* Hand a queued request to hiredis on the live connection. 0 when it would not take it. */
static int send_now(ah_redis *r, ah_redis_req *q)
{
    if (redisAsyncCommandArgv(r->ac, reply_cb, q, q->argc, (const char **)q->argv,
                              q->lens) != REDIS_OK)
        return 0;
    r->n_commands++;
    req_unlink(q);
    q->where = Q_SENT;
    q->prev = r->sent.tail;
    if (q->prev)
        q->prev->next = q;
    else
        r->sent.head = q;
    r->sent.tail = q;
    q->attempt_due = now_ms(r) + r->opt.command_timeout_ms;
    req_arm(q);
    return 1;
}

/* Send what waits, in order, once the connection is up; else make sure a connection is
 * on its way. */
static void pump(ah_redis *r)
{
    if (r->freeing)
        return;
    if (r->state == CONN_UP && !r->doomed) {
        for (ah_redis_req *q = r->queue.head, *next; q; q = next) {
            next = q->next;
            if (q->where != Q_QUEUED)
                continue;
            if (!send_now(r, q)) {
                doom(r, "the connection refused a command");
                return;
            }
        }
    } else if (r->state == CONN_DOWN && r->queue.head) {
        schedule_reconnect(r);
    }
}

static ah_redis_req *req_make(ah_redis *r, const ah__redis_script *script, int argc,
                              const char **argv, const size_t *lens, unsigned flags,
                              int timeout_ms, ah__redis_fn fn, void *ud, ah__redis_user user)
{
    size_t bytes = 0;
    for (int i = 0; i < argc; i++)
        bytes += lens[i];
    ah_redis_req *q = calloc(1, sizeof *q);
    char *block = malloc((size_t)argc * (sizeof(char *) + sizeof(size_t)) + bytes + 1);
    if (q)
        q->timer = ah_timer_new(r->loop, on_req_timer, q);
    if (!q || !block || !q->timer) {
        if (q)
            ah_timer_free(q->timer);
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
    q->want = 1;
    q->flags = flags;
    q->script = script;
    q->argc = argc;
    q->order = ++r->n_orders;
    q->timeout_ms = timeout_ms > 0 ? timeout_ms : r->opt.command_timeout_ms;
    q->deadline = now_ms(r) + q->timeout_ms;
    return q;
}

ah_redis_req *ah__redis_command_ex(ah_redis *r, const ah__redis_script *script, int argc,
                                   const char **argv, const size_t *lens, unsigned flags,
                                   int timeout_ms, ah__redis_fn fn, void *ud,
                                   ah__redis_user user)
{
    if (!r || r->freeing || argc <= 0)
        return NULL;
    if (r->state == CONN_DOWN && r->failures > 0 && !(flags & AH__REDIS_PATIENT)) {
        /* An outage (the last attempt to connect failed): the caller decides without
         * Redis at once; a use after the back-off starts the next attempt. */
        if (now_ms(r) >= r->retry_at)
            schedule_reconnect(r);
        return NULL;
    }
    ah_redis_req *q = req_make(r, script, argc, argv, lens, flags, timeout_ms, fn, ud, user);
    if (!q)
        return NULL;
    dispatch(r, q);
    return q;
}

/* Send q now when the connection is up and nothing waits before it; else queue it. */
static void dispatch(ah_redis *r, ah_redis_req *q)
{
    if (r->state == CONN_UP && !r->doomed && !r->queue.head) {
        if (socket_alive(r) && send_now(r, q))
            return;
        /* The server closed it while the loop was not looking: wait for the next. */
        doom(r, "connection closed by the server");
    }
    enqueue(q, Q_QUEUED);
    req_arm(q);
    pump(r);
}

ah_redis_req *ah__redis_command(ah_redis *r, const ah__redis_script *script, int argc,
                                const char **argv, const size_t *lens, ah__redis_fn fn,
                                void *ud, ah__redis_user user)
{
    return ah__redis_command_ex(r, script, argc, argv, lens, 0, 0, fn, ud, user);
}

enum { MAX_EVAL_ARGS = 24 };

/* EVALSHA sha nkeys keys... args... into argv/lens (nk holds the count's digits);
 * the number of arguments, or -1 when too many. */
static int eval_argv(const ah__redis_script *script, int nkeys, const char *const *keys,
                     int nargs, const char *const *args, const char **argv, size_t *lens,
                     char nk[16])
{
    if (nkeys < 0 || nargs < 0 || 3 + nkeys + nargs > MAX_EVAL_ARGS)
        return -1;
    snprintf(nk, 16, "%d", nkeys);
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
    return n;
}

ah_redis_req *ah__redis_eval_ex(ah_redis *r, const ah__redis_script *script, int nkeys,
                                const char *const *keys, int nargs, const char *const *args,
                                unsigned flags, int timeout_ms, ah__redis_fn fn, void *ud,
                                ah__redis_user user)
{
    const char *argv[MAX_EVAL_ARGS];
    size_t lens[MAX_EVAL_ARGS];
    char nk[16];
    int n = eval_argv(script, nkeys, keys, nargs, args, argv, lens, nk);
    if (n < 0)
        return NULL;
    return ah__redis_command_ex(r, script, n, argv, lens, flags, timeout_ms, fn, ud, user);
}

int ah__redis_eval_again(ah_redis_req *q, int nkeys, const char *const *keys, int nargs,
                         const char *const *args)
{
    if (!q || !q->in_cb || q->cancelled || !q->script)
        return 0;
    const char *argv[MAX_EVAL_ARGS];
    size_t lens[MAX_EVAL_ARGS];
    char nk[16];
    int n = eval_argv(q->script, nkeys, keys, nargs, args, argv, lens, nk);
    if (n < 0)
        return 0;
    ah_redis_req *fresh = req_make(q->r, q->script, n, argv, lens, q->flags, q->timeout_ms,
                                   NULL, NULL, q->user);
    if (!fresh)
        return 0;
    /* take the new arguments, leave the rest */
    free(q->argv);
    q->argv = fresh->argv;
    q->lens = fresh->lens;
    q->argc = n;
    fresh->argv = NULL;
    req_free(fresh);
    q->again = 1;
    return 1;
}

ah_redis_req *ah__redis_eval(ah_redis *r, const ah__redis_script *script, int nkeys,
                             const char *const *keys, int nargs, const char *const *args,
                             ah__redis_fn fn, void *ud, ah__redis_user user)
{
    return ah__redis_eval_ex(r, script, nkeys, keys, nargs, args, 0, 0, fn, ud, user);
}

int ah__redis_note_down(ah_redis *r, int *flag, const char *what)
{
    if (*flag)
        return 0;
    *flag = 1;
    ah__log(AH_LOG_WARN, "redis %s unreachable (%s): %s", r->name, ah__redis_last_error(r),
            what);
    return 1;
}

void ah__redis_note_up(ah_redis *r, int *flag, const char *what)
{
    if (!*flag)
        return;
    *flag = 0;
    ah__log(AH_LOG_INFO, "redis %s is back: %s", r->name, what);
}
