/* server.c - agenthost proxy: the HTTP side, the upstream calls (docs/proxy.md).
 *
 * One thread. libmicrohttpd runs on the caller's loop, without a thread of its own: its
 * epoll fd (MHD_USE_EPOLL, external polling) is an fd watcher of the loop (p->mio), and
 * MHD_run() runs when that fd is readable and when p->run_t fires (armed from
 * MHD_get_timeout(), and at 0 whenever a suspended connection was resumed). Everything,
 * the HTTP side, the upstream calls, the decoders and the splice, runs on the loop's
 * thread: no queue, no lock, no thread hand-over (p->mu guards only the counters, which
 * ah_proxy_get_stats may read from any thread).
 *
 * One request, on its connection:
 *   - the request's last call of the access handler (its body complete) makes the preq
 *     and starts its upstream call (ah_call_start only arms a timer: nothing calls back
 *     from inside it); a head not ready yet suspends the connection
 *     (MHD_ALLOW_SUSPEND_RESUME);
 *   - the loop side sets the head (set_head) or appends bytes (push_bytes) and calls
 *     wake(): a suspended connection is resumed and MHD_run() is deferred to p->run_t at
 *     0 ms, never called from inside a curl callback. Resumed, MHD calls the handler again
 *     (it queues the response) or the content reader (it copies the bytes);
 *   - the content reader, when it has no bytes and the stream has not ended, suspends the
 *     connection and returns 0 (the only way to return 0 without MHD calling it again at
 *     once: microhttpd.h, MHD_ContentReaderCallback);
 *   - while suspended, MHD does not look at the socket, so the connection's pconn
 *     watches it for AH_IO_HUP alone (from MHD_CONNECTION_NOTIFY_STARTED to _CLOSED; bytes
 *     arriving do not fire it): a hang-up (or a reset) cancels the request in flight at
 *     once and resumes the connection, which MHD then closes. Where the loop cannot watch
 *     AH_IO_HUP (hooks without AH_HOOKS_HUP), or the peer left between two requests,
 *     r->hup watches the socket for reading from the request's start to its end; bytes
 *     that are not a hang-up (a pipelined request) stop that watch (it is
 *     level-triggered) and p->sweep looks at the socket every SLICE_MS instead.
 *     A client that leaves while MHD handles its connection (a failed write, a read of 0)
 *     reaches on_completed, which cancels the same way.
 *   The answers: an LLM route (POST /v1/messages, /v1/chat/completions, /v1/responses)
 *   with "stream": true: every attempt's bytes go through the splice (splice.c); the
 *   client gets its head only once an upstream stream opened and sent its first event; a
 *   cut (reset, idle time-out, malformed event, in-stream error, an end before the
 *   format's end) is continued by the ladder, up to policy.max_continuations. An LLM
 *   route without "stream": the upstream's JSON body, forwarded as received; a cut body
 *   is asked for again. Any other path: passed through as one call (retried before its
 *   head like any request), its bytes as they come. A request that finally fails before
 *   anything was sent gets the upstream's last status, headers and body unchanged, or a
 *   502 in the format's error shape when no upstream response ever arrived.
 *
 * Lifetimes (all on the loop thread):
 *   conn_ctx  MHD's per-request context: made by the URI callback (on_uri), freed by
 *             on_completed. MHD calls on_completed for every request whose URI callback
 *             ran (client_aware), at the end of the response, when the client leaves,
 *             and in MHD_stop_daemon.
 *   preq      two references (refs): the connection's (cc->r, dropped in on_completed)
 *             and the upstream side's (dropped by loop_done once the request is finished:
 *             r->done). r->conn / r->cc are valid until on_completed clears them; nothing
 *             touches the connection after that (wake() looks at r->conn). The content
 *             reader gets r without a free callback: MHD calls it only before
 *             on_completed. A request whose client left is finished by its call's
 *             on_finish (CANCELLED), or at once when no call is in flight (a continuation
 *             waiting on r->kick).
 *   pconn     MHD's socket_context: made at NOTIFY_STARTED with its AH_IO_HUP watch, freed
 *             at NOTIFY_CLOSED (after on_completed, before MHD closes the fd); pc->r is
 *             the request in flight (set by new_request, cleared by on_completed).
 *   r->hup    (no pconn watch) made and started with the preq, stopped by a hang-up or stray bytes, freed
 *             by on_completed: before MHD closes the fd (MHD calls on_completed first,
 *             then closes), so it never watches a number the fd's next owner got.
 *   p->run_t  the deferred MHD_run(): armed by wake() (at 0), re-armed after each run
 *             (at 0 when a resume came during it, else MHD's time-out, else stopped).
 *   free      ah_proxy_free: stop the watcher and the timers (no more MHD_run), resume
 *             every suspended connection (MHD_stop_daemon refuses suspended ones), stop
 *             the daemon (on_completed for each: the connections' references go, their
 *             calls are cancelled), then finish every request left: loop_done frees its
 *             call, timers and splice, and the last reference frees it.
 *
 * Secrets: the client's headers are copied to the upstream request and nowhere else;
 * the call redacts their values (authorization, x-api-key, api-key) from every message,
 * and no event carries a header or a body. */
#define _GNU_SOURCE /* POLLRDHUP: a peer that shut down with bytes unread */
#include "proxy_internal.h"

#include "agenthost/call.h"
#include "agenthost/redis.h"

#include <arpa/inet.h>
#include <errno.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>

enum {
    MAX_BODY = 64 << 20, /* larger request bodies get a 413 */
    /* the content reader's block: MHD callocs (and so clears) it with every streamed
     * response, and a chunked one (HTTP/1.1) is read straight into the connection's
     * write buffer instead, so only HTTP/1.0 clients' writes are this size at most */
    BLOCK_SIZE = 4096,
    SLICE_MS = 100,      /* how often p->sweep looks at a socket that had stray bytes */
    RUNS_PER_STEP = 4,   /* MHD_run() calls in one loop step while MHD has work ready */
    MAX_REFUSED = 64,    /* models remembered as refusing a prefill */
};

typedef enum route_mode { MODE_STREAM, MODE_JSON, MODE_RAW } route_mode;

typedef struct conn_ctx conn_ctx;
typedef struct preq preq;
typedef struct pconn pconn;
struct preq {
    ah_proxy *p;
    int refs;          /* the connection's and the upstream side's */
    preq *prev, *next; /* p->live */
    char run_id[32];

    /* the connection (until on_completed) */
    conn_ctx *cc;
    struct MHD_Connection *conn;
    int fd;
    int suspended; /* suspended by us, not resumed yet */
    pconn *pc;     /* the connection's hang-up watch, when it watches for r */
    ah_io *hup;    /* else: the client's socket, for its hang-up (AH_IO_READ) */
    int hup_poll;  /* p->sweep looks at the socket instead (stray bytes) */

    /* the request, immutable once started */
    char *method, *target, *body;
    size_t body_len;
    ah_header *hdrs;
    size_t nh;
    int route; /* an ah_wire, or -1: passed through */
    int anthropic_client; /* anthropic-version or x-api-key among the headers */

    /* the answer */
    int head_ready;
    int status;
    ah_header *rh;
    size_t nrh;
    int streamed; /* the body comes through `out` as it is made */
    ah__wbuf out;
    size_t off;
    int out_end, out_abort;
    int client_gone;

    /* the upstream side */
    int started, done;
    route_mode mode;
    cJSON *req;
    struct ah__tree_arena *req_arena; /* req is a filtered tree there (ah__px_request_parse) */
    ah__px_splice sp;
    int sp_ok;
    ah_call *call;
    ah_timer *kick;
    char *cbody; /* the current attempt's body (NULL: the client's) */
    size_t cbody_len;
    int continuations, llm_call, sent_prefill;
    /* a retry the retry machine granted a broken stream, for the next request to wait
     * out first (ah_call_config.retry_of) */
    int has_carry;
    ah_call_retry carry;
    int background; /* Responses: the client asked background + store: resume rung */
    ah_header *pend_h; /* the current attempt's response head, for the client's head */
    size_t pend_n;
    int json_fallback; /* a JSON answer to a stream request: forwarded as it is */
    ah__wbuf jbuf;
    int64_t start_ms;
};

struct ah_proxy {
    ah_loop *loop;
    struct MHD_Daemon *daemon;
    ah_io *mio;      /* MHD's epoll fd */
    ah_timer *run_t; /* the deferred MHD_run() */
    ah_timer *sweep; /* sockets with stray bytes, every SLICE_MS */
    int in_run, rerun;
    size_t n_hup_poll;
    int port;
    char url[64];
    char *anthropic_url, *openai_url, *prompt;
    ah_policy policy;
    ah_retry_budget *budget;
    ah_rate_limit *rate_limit;
    const ah_transport *transport;
    ah_event_fn on_event;
    void *event_ud;
    unsigned max_in_flight; /* 0: no bound */

    int closing;
    preq *live;
    unsigned long long seq;

    char *refused[MAX_REFUSED];
    size_t n_refused;
    pthread_mutex_t mu;   /* stats only: ah_proxy_get_stats from any thread */
    ah_proxy_stats stats; /* under mu */
};

/* Per-connection state (MHD's socket_context, from MHD_OPTION_NOTIFY_CONNECTION): one
 * AH_IO_HUP watch on the client's socket for the connection's whole life, so a request on
 * a kept-alive connection adds and removes nothing in the loop's set (two epoll_ctl per
 * request saved, docs/performance.md 11.3). Bytes arriving (the next request) do not fire
 * it; a hang-up fires it once (it is stopped then: it stays ready). */
struct pconn {
    ah_io *hup;   /* NULL: the loop cannot watch AH_IO_HUP; each request watches itself */
    int hup_seen; /* the peer left (the watch fired and was stopped) */
    preq *r;      /* the request the watch is for, between new_request and on_completed */
};

/* Per-request state (MHD's con_cls, from the URI log callback). */
struct conn_ctx {
    ah_proxy *p;
    char *target;
    ah__wbuf body;
    int too_large;
    int head_seen; /* MHD's first call (the head, before any body byte) came */
    preq *r;       /* the request, once its body is complete (a reference) */
};

/* ---- small helpers ----------------------------------------------------------------- */

/* 1 when the peer closed its side (an orderly FIN, a reset), even with bytes unread. */
static int peer_gone(int fd)
{
    if (fd < 0)
        return 0;
#ifndef POLLRDHUP
#define POLLRDHUP 0
#endif
    struct pollfd pf = {.fd = fd, .events = POLLIN | POLLRDHUP};
    if (poll(&pf, 1, 0) <= 0)
        return 0;
    if (pf.revents & (POLLHUP | POLLERR | POLLRDHUP | POLLNVAL))
        return 1;
    char c;
    ssize_t n = recv(fd, &c, 1, MSG_PEEK | MSG_DONTWAIT);
    return n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR);
}

static void free_headers(ah_header *h, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        free((char *)h[i].name);
        free((char *)h[i].value);
    }
    free(h);
}

/* Hop-by-hop and framing headers: never copied from one side to the other. */
static int hop_header(const char *name)
{
    static const char *const hop[] = {"host",          "content-length", "transfer-encoding",
                                      "connection",    "keep-alive",     "proxy-connection",
                                      "te",            "trailer",        "upgrade",
                                      "accept-encoding", "content-encoding", "expect"};
    for (size_t i = 0; i < sizeof hop / sizeof hop[0]; i++)
        if (strcasecmp(name, hop[i]) == 0)
            return 1;
    return 0;
}

/* Copy the headers that pass, as owned strings. -1 out of memory. */
static int copy_headers(const ah_header *h, size_t n, ah_header **out, size_t *nout)
{
    *out = n ? calloc(n, sizeof **out) : NULL;
    *nout = 0;
    if (n && !*out)
        return -1;
    for (size_t i = 0; i < n; i++) {
        if (!h[i].name || hop_header(h[i].name))
            continue;
        char *k = ah__strdup(h[i].name), *v = ah__strdup(h[i].value ? h[i].value : "");
        if (!k || !v) {
            free(k);
            free(v);
            free_headers(*out, *nout);
            *out = NULL;
            *nout = 0;
            return -1;
        }
        (*out)[*nout].name = k;
        (*out)[*nout].value = v;
        (*nout)++;
    }
    return 0;
}

static void release(preq *r)
{
    if (--r->refs > 0)
        return;
    ah_proxy *p = r->p;
    if (r->prev)
        r->prev->next = r->next;
    else if (p->live == r)
        p->live = r->next;
    if (r->next)
        r->next->prev = r->prev;
    ah_io_free(r->hup);
    free(r->method);
    free(r->target);
    free(r->body);
    free_headers(r->hdrs, r->nh);
    free_headers(r->rh, r->nrh);
    free_headers(r->pend_h, r->pend_n);
    ah__wbuf_free(&r->out);
    ah__wbuf_free(&r->jbuf);
    free(r->cbody);
    free(r);
}

/* ---- the connection: suspend, wake, the deferred MHD_run --------------------------- */

/* MHD_run() soon: from the loop, never from inside a curl callback or MHD itself. */
static void schedule_run(ah_proxy *p)
{
    if (p->in_run)
        p->rerun = 1;
    else if (p->run_t)
        ah_timer_start(p->run_t, 0);
}

static void hup_poll_off(preq *r)
{
    if (r->hup_poll) {
        r->hup_poll = 0;
        r->p->n_hup_poll--;
    }
}

/* The answer changed: a suspended connection goes back to MHD, which calls the handler
 * (the head) or the content reader (bytes, the end) at its next run. */
static void wake(preq *r)
{
    if (!r->conn || !r->suspended)
        return;
    r->suspended = 0;
    MHD_resume_connection(r->conn);
    schedule_run(r->p);
}

/* The socket is looked at every SLICE_MS instead of watched. */
static void hup_poll_on(preq *r)
{
    ah_io_stop(r->hup);
    if (!r->hup_poll) {
        r->hup_poll = 1;
        r->p->n_hup_poll++;
        if (!ah_timer_active(r->p->sweep))
            ah_timer_start(r->p->sweep, SLICE_MS);
    }
}

static void on_hup(void *ud, int fd, int events);

/* Watch the client's socket from the request's start to on_completed: while the
 * connection is suspended MHD does not look at it, and keeping the watch while MHD runs
 * the connection costs nothing (the client sends nothing more) and saves two epoll_ctl
 * per suspension. */
static void watch_hup(preq *r, pconn *pc)
{
    if (pc && pc->hup && !pc->hup_seen) {
        pc->r = r;
        r->pc = pc;
        return;
    }
    /* No connection watch, or it fired already between requests (the peer shut its side
     * down while idle): the request watches for itself, as it fires at once then. */
    if (r->fd >= 0)
        r->hup = ah_io_new(r->p->loop, r->fd, on_hup, r);
    if (!r->hup || ah_io_start(r->hup, AH_IO_READ) != AH_OK)
        hup_poll_on(r);
}

/* From the handler or the content reader only (MHD's rule). */
static void suspend(preq *r)
{
    MHD_suspend_connection(r->conn);
    r->suspended = 1;
}

static void finish_request(preq *r, int failed);
static void loop_done(preq *r);

/* The client left: its upstream call ends now (the call's on_finish sees CANCELLED), or
 * the request is finished at once when no call is in flight. */
static void cancel_upstream(preq *r)
{
    r->client_gone = 1;
    if (!r->started || r->done)
        return;
    if (r->call) {
        ah_call_cancel(r->call);
    } else {
        finish_request(r, 0);
        loop_done(r);
    }
}

/* The client hung up: cancel, and let MHD close the connection (a suspended one is
 * resumed: the handler answers MHD_NO, the reader an error; on_completed follows). */
static void client_left(preq *r)
{
    r->refs++; /* loop_done may drop the upstream side's reference meanwhile */
    cancel_upstream(r);
    wake(r);
    release(r);
}

static void on_hup(void *ud, int fd, int events)
{
    preq *r = ud;
    (void)fd;
    (void)events;
    if (peer_gone(r->fd)) {
        ah_io_stop(r->hup); /* a hang-up stays readable: once is enough */
        client_left(r);
        return;
    }
    /* Bytes that are not a hang-up (a pipelined request): the watch is level-triggered,
     * so it would fire again at once; the sweep looks instead. */
    hup_poll_on(r);
}

/* The connection's watch: the peer shut its side down or reset. A request in flight is
 * cancelled, as on_hup does; without one MHD sees the end itself. */
static void on_conn_hup(void *ud, int fd, int events)
{
    pconn *pc = ud;
    (void)fd;
    (void)events;
    ah_io_stop(pc->hup); /* it stays ready: once is enough */
    pc->hup_seen = 1;
    preq *r = pc->r;
    if (r && r->conn && !r->client_gone)
        client_left(r);
}

static void on_connection(void *cls, struct MHD_Connection *conn, void **socket_context,
                          enum MHD_ConnectionNotificationCode toe)
{
    ah_proxy *p = cls;
    if (toe == MHD_CONNECTION_NOTIFY_STARTED) {
        pconn *pc = calloc(1, sizeof *pc);
        *socket_context = pc;
        if (!pc)
            return; /* each request watches itself */
        const union MHD_ConnectionInfo *ci =
            MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CONNECTION_FD);
        if (ci && ci->connect_fd >= 0)
            pc->hup = ah_io_new(p->loop, ci->connect_fd, on_conn_hup, pc);
        if (pc->hup && ah_io_start(pc->hup, AH_IO_HUP) != AH_OK) {
            ah_io_free(pc->hup); /* a loop that cannot watch a hang-up */
            pc->hup = NULL;
        }
        return;
    }
    /* MHD_CONNECTION_NOTIFY_CLOSED: after on_completed, before MHD closes the fd. */
    pconn *pc = *socket_context;
    *socket_context = NULL;
    if (!pc)
        return;
    if (pc->r)
        pc->r->pc = NULL;
    ah_io_free(pc->hup);
    free(pc);
}

static void on_sweep(void *ud)
{
    ah_proxy *p = ud;
    for (preq *r = p->live, *next; r; r = next) {
        r->refs++; /* client_left may end r; `next` is read once r is held */
        if (r->hup_poll && r->conn && !r->client_gone && peer_gone(r->fd))
            client_left(r);
        next = r->next;
        release(r);
    }
    if (p->n_hup_poll > 0)
        ah_timer_start(p->sweep, SLICE_MS);
}

/* MHD_run() until MHD has nothing ready (at most RUNS_PER_STEP times): MHD writes a
 * resumed connection's head in one run and its body in the next, and its end (the last
 * chunk) in a third; each had cost a loop step of its own (an epoll_wait and a timer
 * pass) between the head and the first delta (docs/performance.md, "agenthost proxy"). */
static void run_mhd(ah_proxy *p)
{
    if (p->closing)
        return;
    MHD_UNSIGNED_LONG_LONG to = 0;
    int have_to = 0;
    for (int i = 0; i < RUNS_PER_STEP && !p->closing; i++) {
        p->in_run = 1;
        p->rerun = 0;
        MHD_run(p->daemon);
        p->in_run = 0;
        have_to = MHD_get_timeout(p->daemon, &to) == MHD_YES;
        if (!p->rerun && !(have_to && to == 0))
            break;
    }
    if (p->closing)
        return;
    if (p->rerun)
        ah_timer_start(p->run_t, 0);
    else if (have_to)
        ah_timer_start(p->run_t,
                       to > (MHD_UNSIGNED_LONG_LONG)INT32_MAX ? INT32_MAX : (int64_t)to);
    else
        ah_timer_stop(p->run_t);
}

static void on_run_timer(void *ud)
{
    run_mhd(ud);
}

static void on_mhd_io(void *ud, int fd, int events)
{
    (void)fd;
    (void)events;
    run_mhd(ud);
}

/* ---- the answer (loop thread) ------------------------------------------------------ */

/* Set the head: status, the headers that pass (h may be NULL), a body now (streamed 0)
 * or through `out`. */
static void set_head(preq *r, int status, const ah_header *h, size_t n, int streamed,
                     const char *content_type, const char *body, size_t len)
{
    if (r->head_ready)
        return;
    ah_header *copy = NULL;
    size_t ncopy = 0;
    if (h && h == r->pend_h) { /* the attempt's head, filtered already: taken, not copied */
        copy = r->pend_h;
        ncopy = r->pend_n;
        r->pend_h = NULL;
        r->pend_n = 0;
    } else if (copy_headers(h, n, &copy, &ncopy) != 0) {
        copy = NULL;
        ncopy = 0;
    }
    if (content_type) {
        ah_header *grown = realloc(copy, (ncopy + 1) * sizeof *grown);
        if (grown) {
            copy = grown;
            size_t k = ncopy;
            for (size_t i = 0; i < ncopy; i++)
                if (strcasecmp(copy[i].name, "content-type") == 0)
                    k = i;
            if (k == ncopy) {
                copy[k].name = ah__strdup("Content-Type");
                copy[k].value = ah__strdup(content_type);
                if (copy[k].name && copy[k].value)
                    ncopy++;
                else {
                    free((char *)copy[k].name);
                    free((char *)copy[k].value);
                }
            }
        }
    }
    r->status = status;
    r->rh = copy;
    r->nrh = ncopy;
    r->streamed = streamed;
    if (body)
        ah__wbuf_put(&r->out, body, len);
    r->head_ready = 1;
    wake(r);
}

static void push_bytes(preq *r, const char *buf, size_t len, int end, int abort_)
{
    if (len)
        ah__wbuf_put(&r->out, buf, len);
    if (end)
        r->out_end = 1;
    if (abort_)
        r->out_abort = 1;
    if (len || end || abort_)
        wake(r);
}

static void deliver(preq *r)
{
    if (!r->sp_ok)
        return;
    if (r->sp.started && !r->head_ready) {
        /* The head and the bytes spliced so far together: one resume of the connection,
         * and MHD writes them in one run (docs/performance.md, "agenthost proxy"). */
        set_head(r, 200, r->pend_h, r->pend_n, 1, "text/event-stream; charset=utf-8",
                 r->sp.o.data, r->sp.o.len);
        ah__wbuf_reset(&r->sp.o);
        return;
    }
    if (r->sp.o.len) {
        push_bytes(r, r->sp.o.data, r->sp.o.len, 0, 0);
        ah__wbuf_reset(&r->sp.o);
    }
}

static void emit(preq *r, const ah_event *ev)
{
    ah_proxy *p = r->p;
    if (ev->type == AH_EV_LLM_RETRY || ev->type == AH_EV_LLM_CONTINUATION) {
        pthread_mutex_lock(&p->mu);
        if (ev->type == AH_EV_LLM_RETRY)
            p->stats.retries++;
        else
            p->stats.continuations++;
        pthread_mutex_unlock(&p->mu);
    }
    if (!p->on_event)
        return;
    ah_event e = *ev;
    e.run_id = r->run_id;
    e.ts_ms = ah_loop_wall_ms(p->loop);
    p->on_event(p->event_ud, &e);
}

static void on_call_event(void *ud, const ah_event *ev)
{
    emit(ud, ev);
}

static void finish_request(preq *r, int failed)
{
    if (r->done)
        return;
    r->done = 1;
    ah_timer_stop(r->kick);
    pthread_mutex_lock(&r->p->mu);
    r->p->stats.in_flight--;
    if (failed)
        r->p->stats.failed++;
    pthread_mutex_unlock(&r->p->mu);
}

/* The format of the proxy's own answers to a request: its route's, or for a path of
 * neither API the client's (Anthropic when it sent anthropic-version or x-api-key). */
static int answer_wire(int route, int anthropic_client)
{
    return route >= 0 ? route : anthropic_client ? AH_WIRE_ANTHROPIC : AH_WIRE_OPENAI;
}

/* The proxy's own error body in wire's format: Anthropic's {"type":"error",...} with
 * a_type, else OpenAI's {"error":{...}} (Chat and Responses share it) with "server_error". */
static void own_error_body(ah__wbuf *b, int wire, int status, const char *a_type,
                           const char *msg)
{
    if (wire == AH_WIRE_ANTHROPIC)
        ah__wr_a_error_body(b, status, a_type, msg, NULL);
    else
        ah__wr_openai_error_body(b, status, "server_error", msg);
}

/* The error body of the client's format for a request nothing upstream answered. */
static void answer_502(preq *r, const ah_error *err)
{
    ah__wbuf b = {0};
    char msg[AH_ERROR_MESSAGE_MAX + 64];
    ah__bufprintf(msg, sizeof msg, "agenthost proxy: no upstream response: %s",
                  err && err->message[0] ? err->message : "unknown error");
    own_error_body(&b, answer_wire(r->route, r->anthropic_client), 502, "api_error", msg);
    set_head(r, 502, NULL, 0, 0, "application/json", b.data ? b.data : "", b.len);
    ah__wbuf_free(&b);
}

/* A request that ends in failure: the in-band error when the response started, else
 * the upstream's last answer unchanged, else a 502. */
static void fail_request(preq *r, ah_call *call, const ah_error *err)
{
    if (r->mode == MODE_STREAM && r->sp_ok && r->sp.started) {
        ah__px_splice_fail(&r->sp, err);
        deliver(r);
        push_bytes(r, NULL, 0, 1, 0);
    } else if (r->head_ready) {
        push_bytes(r, NULL, 0, 0, 1); /* a passed-through body cut: the client sees it cut */
    } else {
        const ah_header *h = NULL;
        size_t n = 0;
        const char *body = NULL;
        size_t len = 0;
        int status = call ? ah_call_last_response(call, &h, &n, &body, &len) : 0;
        if (status)
            set_head(r, status, h, n, 0, NULL, body ? body : "", len);
        else
            answer_502(r, err);
    }
    finish_request(r, 1);
}

/* ---- the upstream call ------------------------------------------------------------- */

static void begin_call(preq *r);
static void loop_clear(preq *r);

/* The loop is finished with a request: its resources go, then its reference. */
static void loop_done(preq *r)
{
    loop_clear(r);
    release(r);
}

static int header_is(const ah_header *h, const char *name)
{
    return h->name && strcasecmp(h->name, name) == 0;
}

static int media_is(const char *ct, const char *type)
{
    while (*ct == ' ' || *ct == '\t')
        ct++;
    size_t n = strlen(type);
    return strncasecmp(ct, type, n) == 0 &&
           (ct[n] == '\0' || ct[n] == ';' || ct[n] == ' ' || ct[n] == '\t');
}

static int stream_open(void *ud, int status, const ah_header *h, size_t n, ah_error *err)
{
    preq *r = ud;
    (void)err;
    if (r->mode == MODE_RAW) {
        set_head(r, status, h, n, 1, NULL, NULL, 0);
        return 0;
    }
    const char *ct = NULL;
    for (size_t i = 0; i < n; i++)
        if (header_is(&h[i], "content-type"))
            ct = h[i].value;
    r->json_fallback = r->mode == MODE_STREAM && ct && media_is(ct, "application/json");
    ah__wbuf_reset(&r->jbuf);
    if (!r->head_ready) {
        free_headers(r->pend_h, r->pend_n);
        if (copy_headers(h, n, &r->pend_h, &r->pend_n) != 0) {
            r->pend_h = NULL;
            r->pend_n = 0;
        }
    }
    return 0;
}

static int stream_data(void *ud, const char *buf, size_t len, ah_error *err)
{
    preq *r = ud;
    if (r->mode == MODE_RAW) {
        push_bytes(r, buf, len, 0, 0);
        return 0;
    }
    if (r->mode == MODE_JSON || r->json_fallback) {
        ah__wbuf_put(&r->jbuf, buf, len);
        if (r->jbuf.failed) {
            ah_error_set(err, AH_EK_BUDGET, 0, "out of memory for the response body");
            return 1;
        }
        return 0;
    }
    if (ah__px_splice_feed(&r->sp, buf, len, err) != AH_OK)
        return 1;
    deliver(r);
    return 0;
}

static int stream_end(void *ud, ah_error *err)
{
    preq *r = ud;
    if (r->mode != MODE_STREAM || r->json_fallback)
        return 0;
    return ah__px_splice_eof(&r->sp, err) != AH_OK;
}

static int stream_ended(void *ud)
{
    preq *r = ud;
    return r->mode == MODE_STREAM && !r->json_fallback && r->sp_ok && ah__px_splice_ended(&r->sp);
}

/* base + path, where a base that names the version already ("/v1") gets the rest. */
static char *join_url(const char *base, const char *path)
{
    size_t blen = strlen(base);
    if (blen >= 3 && strcmp(base + blen - 3, "/v1") == 0 && strncmp(path, "/v1", 3) == 0 &&
        (path[3] == '/' || path[3] == '?' || path[3] == '\0'))
        path += 3;
    size_t n = blen + strlen(path) + 1;
    char *u = malloc(n);
    if (u)
        snprintf(u, n, "%s%s", base, path);
    return u;
}

static void responses_url(const ah_proxy *p, char *buf, size_t size)
{
    char *u = join_url(p->openai_url, "/v1/responses");
    ah__bufprintf(buf, size, "%s", u ? u : "");
    free(u);
}

/* Background responses: re-attach to the same response, or cancel it. */
static char *reattach_url(void *ud)
{
    preq *r = ud;
    const char *id = NULL;
    int64_t seq = -1;
    if (!r->sp.dec || !ah_decoder_cursor(r->sp.dec, &id, &seq))
        return NULL;
    char url[2048];
    responses_url(r->p, url, sizeof url);
    char *u = ah_wire_reattach_url(AH_WIRE_RESPONSES, url, id, seq);
    if (u && ah_decoder_reattach(r->sp.dec) != AH_OK) {
        free(u);
        return NULL;
    }
    if (u)
        ah_sse_reset(r->sp.sse); /* a partial event of the broken stream is dropped */
    return u;
}

static char *cancel_url(void *ud)
{
    preq *r = ud;
    const char *id = r->sp.dec ? ah_decoder_response_id(r->sp.dec) : NULL;
    if (!id)
        return NULL;
    char url[2048];
    responses_url(r->p, url, sizeof url);
    return ah_wire_cancel_url(AH_WIRE_RESPONSES, url, id);
}

static const char *model_of(const preq *r)
{
    return cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(r->req, "model"));
}

static int refused_prefill(const ah_proxy *p, const char *model)
{
    for (size_t i = 0; model && i < p->n_refused; i++)
        if (strcmp(p->refused[i], model) == 0)
            return 1;
    return 0;
}

static int handles_give_up(void *ud, const ah_error *err)
{
    preq *r = ud;
    return r->sent_prefill && ah_error_is_prefill_refusal(err);
}

static int thinking_on(const cJSON *req)
{
    const cJSON *t = cJSON_GetObjectItemCaseSensitive(req, "thinking");
    const char *type = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(t, "type"));
    return cJSON_IsObject(t) && !(type && strcmp(type, "disabled") == 0);
}

static ah_cont_mode rung(const preq *r)
{
    const char *model = model_of(r);
    if (refused_prefill(r->p, model))
        return AH_CONT_PROMPT;
    return ah_model_capabilities((ah_wire)r->route, model, thinking_on(r->req)).prefill
               ? AH_CONT_PREFILL
               : AH_CONT_PROMPT;
}

static void on_kick(void *ud)
{
    preq *r = ud;
    if (r->done)
        return;
    if (r->client_gone) {
        finish_request(r, 0);
        loop_done(r);
        return;
    }
    begin_call(r);
}

/* The call's question when the stream broke: is this a failed attempt, for the retry
 * machine (its backoff, Retry-After and retry-budget token), rather than a cut after
 * content the client already has? The provider's own error in the stream is (an overload
 * through a 200 costs what a 529 costs), and so is a break that forwarded nothing: the
 * same request goes out again. Without this the next request went out at once: a retry
 * storm in an in-stream outage. Pass-through paths are never continued. */
static int stream_break_is_retry(void *ud, const ah_error *err)
{
    preq *r = ud;
    if (r->mode == MODE_RAW)
        return 0;
    if (r->mode == MODE_JSON || r->json_fallback)
        return 1; /* a cut body is simply sent again */
    return err->provider_type[0] != '\0' ||
           (r->sp_ok && ah__px_splice_provider_error(&r->sp)) ||
           !(r->sp_ok && ah__px_splice_has_partial(&r->sp));
}

/* Send the next attempt with `mode`: the same request when nothing was forwarded. */
static int prepare_continuation(preq *r, ah_cont_mode mode)
{
    free(r->cbody);
    r->cbody = NULL;
    r->cbody_len = 0;
    r->sent_prefill = 0;
    if (r->mode != MODE_STREAM || !ah__px_splice_has_partial(&r->sp))
        return 0;
    if (ah__px_continuation_body(&r->sp, mode, r->p->prompt, &r->cbody, &r->cbody_len) !=
        AH_OK)
        return -1;
    r->sent_prefill = mode == AH_CONT_PREFILL;
    return 0;
}

static void continue_request(preq *r, const ah_error *cause)
{
    int partial = r->mode == MODE_STREAM && ah__px_splice_has_partial(&r->sp);
    /* nothing forwarded: the same request again, a regeneration (not a rung) */
    ah_cont_mode mode = partial ? rung(r) : AH_CONT_REGENERATE;
    if (prepare_continuation(r, mode) != 0) {
        ah_error e;
        ah_error_set(&e, AH_EK_PERMANENT, 0, "cannot build the continuation request");
        fail_request(r, NULL, &e);
        return;
    }
    r->continuations++;
    ah_event ev = {.type = AH_EV_LLM_CONTINUATION};
    ev.u.llm_continuation.llm_call = r->llm_call;
    ev.u.llm_continuation.continuation = r->continuations;
    ev.u.llm_continuation.max_continuations = r->p->policy.max_continuations;
    size_t committed = 0;
    for (size_t i = 0; r->mode == MODE_STREAM && i < r->sp.n; i++)
        committed += r->sp.blocks[i]->kind != AH__WR_TOOL;
    ev.u.llm_continuation.committed_blocks = (int)committed;
    ev.u.llm_continuation.discarded_blocks = 0;
    ev.u.llm_continuation.discarded_bytes = 0;
    ev.u.llm_continuation.mode = mode;
    ev.u.llm_continuation.reason = cause->message;
    emit(r, &ev);
    ah_timer_start(r->kick, 0);
}

static void call_end_event(preq *r)
{
    ah_event ev = {.type = AH_EV_LLM_CALL_END};
    ev.u.llm_call_end.llm_call = r->llm_call;
    ev.u.llm_call_end.stop_reason = r->sp_ok ? r->sp.stop_reason : NULL;
    ev.u.llm_call_end.input_tokens = r->sp_ok ? r->sp.input_tokens : -1;
    ev.u.llm_call_end.output_tokens = r->sp_ok ? r->sp.output_tokens : -1;
    ev.u.llm_call_end.trimmed_bytes = r->sp_ok ? (int64_t)r->sp.trimmed : 0;
    emit(r, &ev);
}

static void on_call_finish(void *ud, ah_call *call)
{
    preq *r = ud;
    ah_call_state st = ah_call_get_state(call);
    ah_error err = *ah_call_error(call);
    r->continuations += ah_call_resumes(call);
    if (r->done || r->client_gone) {
        finish_request(r, 0);
        goto out;
    }
    switch (st) {
    case AH_CALL_DONE:
        if (r->mode == MODE_RAW) {
            push_bytes(r, NULL, 0, 1, 0);
        } else if (r->mode == MODE_JSON || r->json_fallback) {
            set_head(r, ah_call_http_status(call), r->pend_h, r->pend_n, 0, "application/json",
                     r->jbuf.data ? r->jbuf.data : "", r->jbuf.len);
        } else {
            ah__px_splice_finish(&r->sp);
            deliver(r);
            push_bytes(r, NULL, 0, 1, 0);
            call_end_event(r);
        }
        finish_request(r, 0);
        break;
    case AH_CALL_INTERRUPTED:
        if (r->sp_ok)
            ah__px_splice_break(&r->sp);
        deliver(r);
        if (r->mode == MODE_RAW || err.kind != AH_EK_STREAM ||
            r->continuations >= r->p->policy.max_continuations) {
            fail_request(r, call, &err);
            break;
        }
        r->has_carry = ah_call_retry_granted(call, &r->carry);
        continue_request(r, &err);
        break;
    case AH_CALL_GAVE_UP:
        if (handles_give_up(r, &err)) {
            /* A prefill refused (Claude 4.6+): the prompt rung from now on for this
             * model, and the continuation goes out again at once. */
            const char *model = model_of(r);
            if (model && !refused_prefill(r->p, model) && r->p->n_refused < MAX_REFUSED) {
                r->p->refused[r->p->n_refused++] = ah__strdup(model);
                ah__log(AH_LOG_WARN,
                        "proxy: model '%s' refused an assistant-message prefill; cut streams "
                        "of this model are continued with a visible prompt from now on",
                        model);
            }
            if (prepare_continuation(r, AH_CONT_PROMPT) != 0) {
                fail_request(r, call, &err);
                break;
            }
            ah_timer_start(r->kick, 0);
            break;
        }
        fail_request(r, call, &err);
        break;
    default: /* CANCELLED */
        push_bytes(r, NULL, 0, 0, 1);
        finish_request(r, 0);
        break;
    }
out:
    if (r->call == call) {
        r->call = NULL;
        ah_call_free(call);
    }
    if (r->done)
        loop_done(r);
}

static char *upstream_url(const preq *r)
{
    const char *base;
    if (r->route == AH_WIRE_ANTHROPIC)
        base = r->p->anthropic_url;
    else if (r->route >= 0)
        base = r->p->openai_url;
    else
        base = r->anthropic_client ? r->p->anthropic_url : r->p->openai_url;
    return join_url(base, r->target);
}

static void begin_call(preq *r)
{
    ah_proxy *p = r->p;
    ah_error e;
    char msg[256] = "";
    if (r->mode == MODE_STREAM &&
        ah__px_splice_attempt(&r->sp, r->continuations > 0 && ah__px_splice_has_partial(&r->sp)) !=
            AH_OK) {
        ah_error_set(&e, AH_EK_BUDGET, 0, "out of memory starting an attempt");
        fail_request(r, NULL, &e);
        loop_done(r);
        return;
    }
    char *url = upstream_url(r);
    if (!url) {
        ah_error_set(&e, AH_EK_BUDGET, 0, "out of memory building the upstream request");
        fail_request(r, NULL, &e);
        loop_done(r);
        return;
    }
    ah_policy pol = p->policy;
    if (pol.deadline_ms > 0) {
        int64_t left = pol.deadline_ms - (ah_loop_now_ms(p->loop) - r->start_ms);
        pol.deadline_ms = left > 0 ? left : 1;
    }
    ah_call_config cc = {0};
    cc.loop = p->loop;
    cc.transport = p->transport;
    cc.request.method = r->method;
    cc.request.url = url;
    cc.request.headers = r->hdrs; /* hop headers dropped already; the call copies them */
    cc.request.n_headers = r->nh;
    cc.request.body = r->cbody ? r->cbody : r->body;
    cc.request.body_len = r->cbody ? r->cbody_len : r->body_len;
    cc.policy = &pol;
    cc.retry_budget = p->budget;
    cc.rate_limit = p->rate_limit;
    cc.stream.on_open = stream_open;
    cc.stream.on_data = stream_data;
    cc.stream.on_end = stream_end;
    cc.stream.ended = stream_ended;
    cc.stream.break_is_retry = stream_break_is_retry;
    cc.stream.ud = r;
    cc.retry_of = r->has_carry ? &r->carry : NULL;
    if (r->background && r->mode == MODE_STREAM) {
        cc.resume.reattach_url = reattach_url;
        cc.resume.cancel_url = cancel_url;
        cc.resume.ud = r;
    }
    cc.on_event = on_call_event;
    cc.event_ud = r;
    cc.handles_give_up = handles_give_up;
    cc.on_finish = on_call_finish;
    cc.finish_ud = r;
    cc.run_id = r->run_id;
    cc.llm_call = ++r->llm_call;
    cc.continuation = r->continuations;
    ah_status st = ah_call_new(&cc, &r->call, msg, sizeof msg);
    r->has_carry = 0; /* copied into the call */
    free(url);
    if (st == AH_OK)
        st = ah_call_start(r->call);
    if (st != AH_OK) {
        ah_call_free(r->call);
        r->call = NULL;
        ah_error_set(&e, AH_EK_PERMANENT, 0, "cannot start the upstream request: %s",
                     msg[0] ? msg : ah_status_message(st));
        fail_request(r, NULL, &e);
        loop_done(r);
    }
}

static void start_request(preq *r)
{
    ah_proxy *p = r->p;
    r->started = 1;
    r->start_ms = ah_loop_now_ms(p->loop);
    r->kick = ah_timer_new(p->loop, on_kick, r);
    r->mode = MODE_RAW;
    if (r->route >= 0) {
        r->req = ah__px_request_parse(r->body ? r->body : "", r->body_len, &r->req_arena);
        if (cJSON_IsObject(r->req)) {
            r->mode = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(r->req, "stream"))
                          ? MODE_STREAM
                          : MODE_JSON;
            const cJSON *store = cJSON_GetObjectItemCaseSensitive(r->req, "store");
            r->background =
                r->route == AH_WIRE_RESPONSES &&
                cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(r->req, "background")) &&
                !(store && !cJSON_IsTrue(store));
        }
    }
    if (r->mode == MODE_STREAM) {
        r->sp_ok = ah__px_splice_init(&r->sp, (ah_wire)r->route, r->req) == AH_OK;
        if (r->req_arena) {
            r->sp.req_body = r->body ? r->body : "";
            r->sp.req_body_len = r->body_len;
        }
        pthread_mutex_lock(&p->mu);
        p->stats.spliced++;
        pthread_mutex_unlock(&p->mu);
    }
    if (!r->kick || (r->mode == MODE_STREAM && !r->sp_ok)) {
        ah_error e;
        ah_error_set(&e, AH_EK_BUDGET, 0, "out of memory");
        fail_request(r, NULL, &e);
        loop_done(r);
        return;
    }
    begin_call(r);
}

/* The loop's side of a request, once it is over. */
static void loop_clear(preq *r)
{
    ah_call_free(r->call);
    r->call = NULL;
    ah_timer_free(r->kick);
    r->kick = NULL;
    if (r->sp_ok)
        ah__px_splice_clear(&r->sp);
    r->sp_ok = 0;
    ah__px_request_free(r->req, r->req_arena);
    r->req = NULL;
    r->req_arena = NULL;
}
/* A header only an Anthropic client sends (answer_wire, and which upstream a path of
 * both APIs goes to). */
static int anthropic_header(const char *key)
{
    return key && (strcasecmp(key, "anthropic-version") == 0 || strcasecmp(key, "x-api-key") == 0);
}

static enum MHD_Result collect_header(void *cls, enum MHD_ValueKind kind, const char *key,
                                      const char *value)
{
    preq *r = cls;
    (void)kind;
    if (anthropic_header(key))
        r->anthropic_client = 1;
    if (!key || hop_header(key))
        return MHD_YES; /* never sent upstream */
    ah_header *h = realloc(r->hdrs, (r->nh + 1) * sizeof *h);
    if (!h)
        return MHD_NO;
    r->hdrs = h;
    char *k = ah__strdup(key), *v = ah__strdup(value ? value : "");
    if (!k || !v) {
        free(k);
        free(v);
        return MHD_NO;
    }
    h[r->nh].name = k;
    h[r->nh].value = v;
    r->nh++;
    return MHD_YES;
}

static int route_of(const char *path, const char *method)
{
    if (strcmp(method, "POST") != 0)
        return -1;
    if (strcmp(path, "/v1/messages") == 0)
        return AH_WIRE_ANTHROPIC;
    if (strcmp(path, "/v1/chat/completions") == 0)
        return AH_WIRE_OPENAI;
    if (strcmp(path, "/v1/responses") == 0)
        return AH_WIRE_RESPONSES;
    return -1;
}

static enum MHD_Result reply_now(struct MHD_Connection *conn, int status, const char *ct,
                                 const char *body)
{
    struct MHD_Response *resp =
        MHD_create_response_from_buffer(strlen(body), (void *)body, MHD_RESPMEM_MUST_COPY);
    if (!resp)
        return MHD_NO;
    MHD_add_response_header(resp, "Content-Type", ct);
    enum MHD_Result rc = MHD_queue_response(conn, (unsigned)status, resp);
    MHD_destroy_response(resp);
    return rc;
}


/* ---- the HTTP side (MHD's callbacks, inside MHD_run on the loop thread) ------------- */

static ssize_t reader(void *cls, uint64_t pos, char *buf, size_t max)
{
    preq *r = cls;
    (void)pos;
    if (r->off < r->out.len) {
        size_t k = r->out.len - r->off;
        if (k > max)
            k = max;
        memcpy(buf, r->out.data + r->off, k);
        r->off += k;
        if (r->off == r->out.len) {
            ah__wbuf_reset(&r->out);
            r->off = 0;
        }
        return (ssize_t)k;
    }
    if (r->out_abort || r->client_gone || r->p->closing || !r->conn)
        return MHD_CONTENT_READER_END_WITH_ERROR;
    if (r->out_end)
        return MHD_CONTENT_READER_END_OF_STREAM;
    suspend(r); /* push_bytes resumes it */
    return 0;
}

/* The head is ready: queue the response (a streamed one reads r until on_completed).
 * A streamed answer that is whole already (a short stream that came in one read: its end
 * is there before MHD takes the head) goes as one buffer: MHD writes the head and the
 * body with one send (a Content-Length instead of chunks), where a chunked answer costs
 * three MHD runs, each a send and an epoll_wait: the head, the chunk, the last chunk
 * (libmicrohttpd 0.9.75 sends a chunked head alone; docs/performance.md 11.3). */
static enum MHD_Result queue_answer(preq *r)
{
    struct MHD_Response *resp;
    int whole = !r->streamed || (r->out_end && !r->out_abort && r->off == 0);
    if (!whole)
        resp = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, BLOCK_SIZE, reader, r, NULL);
    else
        resp = MHD_create_response_from_buffer(r->out.len, r->out.data ? r->out.data : (void *)"",
                                               MHD_RESPMEM_MUST_COPY);
    if (!resp)
        return MHD_NO;
    int cache_control = 0; /* the upstream's own, else ours: never two */
    for (size_t i = 0; i < r->nrh; i++) {
        MHD_add_response_header(resp, r->rh[i].name, r->rh[i].value);
        cache_control |= strcasecmp(r->rh[i].name, "cache-control") == 0;
    }
    if (r->streamed && !cache_control)
        MHD_add_response_header(resp, "Cache-Control", "no-cache");
    enum MHD_Result rc = MHD_queue_response(r->conn, (unsigned)r->status, resp);
    MHD_destroy_response(resp);
    if (whole)
        ah__wbuf_free(&r->out); /* copied */
    return rc;
}

/* The request with its body: a preq, its upstream call started. NULL out of memory. */
static preq *new_request(ah_proxy *p, conn_ctx *cc, struct MHD_Connection *conn,
                         const char *path, const char *method)
{
    preq *r = calloc(1, sizeof *r);
    if (!r)
        return NULL;
    r->p = p;
    r->refs = 1; /* the connection's */
    r->fd = -1;
    r->next = p->live;
    if (p->live)
        p->live->prev = r;
    p->live = r;
    r->method = ah__strdup(method);
    r->target = ah__strdup(cc->target ? cc->target : path);
    r->body_len = cc->body.len;
    r->body = ah__wbuf_take(&cc->body);
    r->route = route_of(path, method);
    if (!r->method || !r->target || (r->body_len && !r->body) ||
        MHD_get_connection_values(conn, MHD_HEADER_KIND, collect_header, r) < 0) {
        release(r);
        return NULL;
    }
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CONNECTION_FD);
    r->fd = ci ? ci->connect_fd : -1;
    r->conn = conn;
    r->cc = cc;
    cc->r = r;
    const union MHD_ConnectionInfo *si =
        MHD_get_connection_info(conn, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
    watch_hup(r, si ? si->socket_context : NULL);
    snprintf(r->run_id, sizeof r->run_id, "px_%llu", ++p->seq);
    pthread_mutex_lock(&p->mu);
    p->stats.requests++;
    p->stats.in_flight++;
    pthread_mutex_unlock(&p->mu);
    r->refs++; /* the upstream side's, until loop_done */
    start_request(r);
    return r;
}

/* At max_in_flight: 1 (the shed counted) when this request is to be turned away. */
static int at_bound(ah_proxy *p)
{
    if (!p->max_in_flight)
        return 0;
    pthread_mutex_lock(&p->mu);
    int full = p->stats.in_flight >= p->max_in_flight;
    if (full)
        p->stats.shed++;
    pthread_mutex_unlock(&p->mu);
    return full;
}

static enum MHD_Result find_anthropic_header(void *cls, enum MHD_ValueKind kind,
                                             const char *key, const char *value)
{
    (void)kind;
    (void)value;
    if (!anthropic_header(key))
        return MHD_YES;
    *(int *)cls = 1;
    return MHD_NO; /* found: stop */
}

/* The format's own overload answer, which the official SDKs retry with their backoff
 * (Anthropic: 529 overloaded_error; OpenAI: 503), in the format a 502 would have. */
static enum MHD_Result reply_overloaded(ah_proxy *p, struct MHD_Connection *conn, const char *path,
                                        const char *method)
{
    int anthropic_client = 0;
    MHD_get_connection_values(conn, MHD_HEADER_KIND, find_anthropic_header, &anthropic_client);
    int wire = answer_wire(route_of(path, method), anthropic_client);
    char msg[128];
    ah__bufprintf(msg, sizeof msg, "agenthost proxy: overloaded: --max-in-flight %u reached",
                  p->max_in_flight);
    ah__wbuf b = {0};
    int status = wire == AH_WIRE_ANTHROPIC ? 529 : 503;
    own_error_body(&b, wire, status, "overloaded_error", msg);
    enum MHD_Result rc =
        b.failed ? MHD_NO : reply_now(conn, status, "application/json", b.data ? b.data : "");
    ah__wbuf_free(&b);
    return rc;
}

static enum MHD_Result handle(ah_proxy *p, conn_ctx *cc, struct MHD_Connection *conn,
                              const char *path, const char *method)
{
    preq *r = cc->r;
    if (!r) {
        if (cc->too_large)
            return reply_now(conn, 413, "application/json",
                             "{\"error\":{\"type\":\"request_too_large\",\"message\":\"agenthost "
                             "proxy: request body larger than 64 MiB\"}}");
        if (p->closing)
            return MHD_NO;
        if (at_bound(p))
            return reply_overloaded(p, conn, path, method);
        if (!(r = new_request(p, cc, conn, path, method)))
            return MHD_NO;
    }
    /* Called again once resumed: the head, or the client left meanwhile. */
    if (r->client_gone || p->closing)
        return MHD_NO;
    if (!r->head_ready) {
        suspend(r); /* set_head resumes it */
        return MHD_YES;
    }
    return queue_answer(r);
}

static void *on_uri(void *cls, const char *uri, struct MHD_Connection *conn)
{
    (void)conn;
    conn_ctx *cc = calloc(1, sizeof *cc);
    if (cc) {
        cc->p = cls;
        cc->target = ah__strdup(uri ? uri : "/");
    }
    return cc;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *conn, const char *url,
                                  const char *method, const char *version,
                                  const char *upload_data, size_t *upload_data_size,
                                  void **con_cls)
{
    ah_proxy *p = cls;
    conn_ctx *cc = *con_cls;
    (void)version;
    if (!cc)
        return MHD_NO;
    if (*upload_data_size && cc->head_seen) {
        if (cc->body.len + *upload_data_size > MAX_BODY)
            cc->too_large = 1;
        else
            ah__wbuf_put(&cc->body, upload_data, *upload_data_size);
        *upload_data_size = 0;
        return cc->body.failed ? MHD_NO : MHD_YES;
    }
    if (!cc->head_seen) { /* the first call has the head; the body follows */
        cc->head_seen = 1;
        return MHD_YES;
    }
    if (!cc->target)
        return MHD_NO;
    return handle(p, cc, conn, url, method);
}

/* The request's end on its connection (answered, the client gone, or the daemon
 * stopping): the connection's reference goes; an upstream call still running is
 * cancelled (the client cannot get its answer any more). */
static void on_completed(void *cls, struct MHD_Connection *conn, void **con_cls,
                         enum MHD_RequestTerminationCode toe)
{
    (void)cls;
    (void)conn;
    (void)toe;
    conn_ctx *cc = *con_cls;
    if (!cc)
        return;
    *con_cls = NULL;
    preq *r = cc->r;
    if (r) {
        cc->r = NULL;
        r->cc = NULL;
        r->conn = NULL;
        r->suspended = 0;
        if (r->pc) {
            r->pc->r = NULL;
            r->pc = NULL;
        }
        ah_io_free(r->hup); /* before MHD closes the fd */
        r->hup = NULL;
        hup_poll_off(r);
        if (!r->done)
            cancel_upstream(r);
        release(r);
    }
    free(cc->target);
    ah__wbuf_free(&cc->body);
    free(cc);
}

static void on_mhd_log(void *cls, const char *fmt, va_list ap)
{
    char line[512];
    (void)cls;
    vsnprintf(line, sizeof line, fmt, ap);
    size_t n = strlen(line);
    while (n && (line[n - 1] == '\n' || line[n - 1] == '\r'))
        line[--n] = '\0';
    ah__log(AH_LOG_DEBUG, "proxy: microhttpd: %s", line);
}

/* ---- public API -------------------------------------------------------------------- */

static char *base_url(const char *u, const char *def, const char *what, char *err,
                      size_t errsize)
{
    if (!u)
        u = def;
    if (strncmp(u, "http://", 7) != 0 && strncmp(u, "https://", 8) != 0) {
        ah__bufprintf(err, errsize, "proxy: %s '%.80s' must start with http:// or https://",
                      what, u);
        return NULL;
    }
    size_t n = strlen(u);
    while (n > 0 && u[n - 1] == '/')
        n--;
    return ah__strndup(u, n);
}


static void proxy_destroy(ah_proxy *p)
{
    ah_io_free(p->mio);
    ah_timer_free(p->run_t);
    ah_timer_free(p->sweep);
    for (size_t i = 0; i < p->n_refused; i++)
        free(p->refused[i]);
    pthread_mutex_destroy(&p->mu);
    free(p->prompt);
    free(p->anthropic_url);
    free(p->openai_url);
    free(p);
}

ah_status ah_proxy_new(const ah_proxy_config *cfg, ah_proxy **out, char *err, size_t errsize)
{
    char dummy[8];
    if (!err) {
        err = dummy;
        errsize = sizeof dummy;
    }
    if (!out)
        return AH_ERR_INVALID;
    *out = NULL;
    if (!cfg || !cfg->loop) {
        ah__bufprintf(err, errsize, "proxy: a loop is required");
        return AH_ERR_INVALID;
    }
    if (cfg->port < 0 || cfg->port > 65535) {
        ah__bufprintf(err, errsize, "proxy: port %d out of range", cfg->port);
        return AH_ERR_INVALID;
    }
    struct sockaddr_in addr;
    memset(&addr, 0, sizeof addr);
    addr.sin_family = AF_INET;
    addr.sin_port = htons((uint16_t)cfg->port);
    const char *host = cfg->listen_host ? cfg->listen_host : "127.0.0.1";
    if (inet_pton(AF_INET, host, &addr.sin_addr) != 1) {
        ah__bufprintf(err, errsize, "proxy: listen address '%.60s' is not an IPv4 address",
                      host);
        return AH_ERR_INVALID;
    }
    ah_policy pol;
    if (cfg->policy)
        pol = *cfg->policy;
    else
        ah_policy_init(&pol);
    if (ah_policy_validate(&pol, err, errsize) != AH_OK)
        return AH_ERR_INVALID;
    ah_proxy *p = calloc(1, sizeof *p);
    if (!p)
        goto nomem;
    if (pthread_mutex_init(&p->mu, NULL) != 0) {
        free(p);
        goto nomem;
    }
    p->loop = cfg->loop;
    p->policy = pol;
    p->budget = cfg->retry_budget;
    p->rate_limit = cfg->rate_limit;
    p->transport = cfg->transport;
    p->on_event = cfg->on_event;
    p->event_ud = cfg->event_ud;
    p->max_in_flight = cfg->max_in_flight;
    p->anthropic_url =
        base_url(cfg->anthropic_url, "https://api.anthropic.com", "anthropic_url", err, errsize);
    p->openai_url = p->anthropic_url ? base_url(cfg->openai_url, "https://api.openai.com",
                                                "openai_url", err, errsize)
                                     : NULL;
    if (!p->anthropic_url || !p->openai_url) {
        proxy_destroy(p);
        return AH_ERR_INVALID;
    }
    p->prompt = ah__strdup(cfg->continue_prompt ? cfg->continue_prompt
                                                : AH_CONTINUE_PROMPT_DEFAULT);
    p->run_t = ah_timer_new(p->loop, on_run_timer, p);
    p->sweep = ah_timer_new(p->loop, on_sweep, p);
    if (!p->prompt || !p->run_t || !p->sweep) {
        proxy_destroy(p);
        goto nomem;
    }
    /* No thread of MHD's own: its epoll fd is watched by the loop (external polling), and
     * connections wait for the upstream suspended. */
    errno = 0;
    p->daemon = MHD_start_daemon(
        MHD_USE_EPOLL | MHD_ALLOW_SUSPEND_RESUME | MHD_USE_ERROR_LOG, 0, NULL, NULL,
        on_request, p, MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&addr,
        MHD_OPTION_CONNECTION_LIMIT, (unsigned int)4096, MHD_OPTION_LISTEN_BACKLOG_SIZE,
        (unsigned int)1024, MHD_OPTION_URI_LOG_CALLBACK, on_uri, p,
        MHD_OPTION_NOTIFY_COMPLETED, on_completed, p, MHD_OPTION_NOTIFY_CONNECTION, on_connection,
        p, MHD_OPTION_EXTERNAL_LOGGER, on_mhd_log,
        p, MHD_OPTION_END);
    if (!p->daemon) {
        int e = errno;
        ah__bufprintf(err, errsize, "proxy: cannot listen on %s:%d%s%s", host, cfg->port,
                      e ? ": " : "", e ? strerror(e) : "");
        proxy_destroy(p);
        return AH_ERR_IO;
    }
    const union MHD_DaemonInfo *ei = MHD_get_daemon_info(p->daemon, MHD_DAEMON_INFO_EPOLL_FD);
    p->mio = ei ? ah_io_new(p->loop, ei->epoll_fd, on_mhd_io, p) : NULL;
    if (!p->mio || ah_io_start(p->mio, AH_IO_READ) != AH_OK) {
        MHD_stop_daemon(p->daemon);
        proxy_destroy(p);
        goto nomem;
    }
    const union MHD_DaemonInfo *di = MHD_get_daemon_info(p->daemon, MHD_DAEMON_INFO_BIND_PORT);
    p->port = di ? (int)di->port : cfg->port;
    snprintf(p->url, sizeof p->url, "http://%s:%d", host, p->port);
    ah_timer_start(p->run_t, 0); /* the first run puts the listening socket in its set */
    *out = p;
    return AH_OK;
nomem:
    ah__bufprintf(err, errsize, "proxy: out of memory");
    return AH_ERR_NOMEM;
}

void ah_proxy_free(ah_proxy *p)
{
    if (!p)
        return;
    p->closing = 1;
    /* No MHD_run from here on. */
    ah_io_free(p->mio);
    p->mio = NULL;
    ah_timer_stop(p->run_t);
    ah_timer_stop(p->sweep);
    /* MHD_stop_daemon refuses suspended connections: resume them all first. */
    for (preq *r = p->live; r; r = r->next)
        if (r->conn && r->suspended) {
            r->suspended = 0;
            ah_io_stop(r->hup);
            MHD_resume_connection(r->conn);
        }
    /* Closes every connection: on_completed for each (their references go, their calls
     * are cancelled). */
    MHD_stop_daemon(p->daemon);
    /* What is left is the upstream side of requests not finished yet. */
    for (preq *r = p->live, *next; r; r = next) {
        next = r->next;
        if (!r->done) {
            r->done = 1;
            loop_done(r);
        }
    }
    if (p->live)
        ah__log(AH_LOG_ERROR, "proxy: a request outlived the proxy (a reference leaked)");
    proxy_destroy(p);
}

const char *ah_proxy_url(const ah_proxy *p)
{
    return p ? p->url : "";
}

int ah_proxy_port(const ah_proxy *p)
{
    return p ? p->port : 0;
}

void ah_proxy_get_stats(const ah_proxy *p, ah_proxy_stats *out)
{
    if (!out)
        return;
    memset(out, 0, sizeof *out);
    if (!p)
        return;
    pthread_mutex_lock((pthread_mutex_t *)&p->mu);
    *out = p->stats;
    pthread_mutex_unlock((pthread_mutex_t *)&p->mu);
}
