/* server.c - agenthost proxy: the HTTP side, the hand-over to the loop, the upstream
 * calls (docs/proxy.md).
 *
 * Threads. libmicrohttpd runs a thread per connection. A connection's thread collects the
 * request, hands it to the loop (a queue under p->mu and an async wake-up) and then
 * waits on the request's condition variable: first for the response head, then, for a
 * streamed body, for bytes. Everything upstream (calls, decoders, the splice) runs on
 * the loop's thread, which sets the head and appends bytes under the same lock. A wait
 * is cut into slices that also look at the client's socket, so a client that hangs up
 * ends its upstream call at once (a cancel queued to the loop).
 *
 * One request:
 *   - an LLM route (POST /v1/messages, /v1/chat/completions, /v1/responses) with
 *     "stream": true: every attempt's bytes go through the splice (splice.c); the client
 *     gets its head only once an upstream stream opened and sent its first event; a cut
 *     (reset, idle time-out, malformed event, in-stream error, an end before the
 *     format's end) is continued by the ladder, up to policy.max_continuations;
 *   - an LLM route without "stream": the upstream's JSON body, forwarded as received; a
 *     cut body is asked for again (the same request);
 *   - any other path: passed through as one call (retried before its head like any
 *     request), its bytes as they come.
 *   A request that finally fails before anything was sent gets the upstream's last
 *   status, headers and body unchanged, or a 502 in the format's error shape when no
 *   upstream response ever arrived.
 *
 * Secrets: the client's headers are copied to the upstream request and nowhere else;
 * the call redacts their values (authorization, x-api-key, api-key) from every message,
 * and no event carries a header or a body. */
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
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>

enum {
    MAX_BODY = 64 << 20, /* larger request bodies get a 413 */
    BLOCK_SIZE = 32768,
    SLICE_MS = 100,      /* how often a wait looks at the client's socket */
    MAX_REFUSED = 64,    /* models remembered as refusing a prefill */
};

typedef enum route_mode { MODE_STREAM, MODE_JSON, MODE_RAW } route_mode;

typedef struct preq preq;
struct preq {
    ah_proxy *p;
    unsigned refs; /* under p->mu: the connection's thread and the loop */
    pthread_cond_t cv;
    preq *prev, *next; /* live requests (under p->mu) */
    preq *qnext;       /* the loop's inbox (under p->mu) */
    preq *cnext;       /* the loop's cancel queue (under p->mu) */
    int cancel_queued;
    char run_id[32];

    /* the request, immutable once handed over */
    char *method, *target, *body;
    size_t body_len;
    ah_header *hdrs;
    size_t nh;
    int route; /* an ah_wire, or -1: passed through */
    int anthropic_client; /* anthropic-version or x-api-key among the headers */

    /* the answer (under p->mu) */
    int head_ready;
    int status;
    ah_header *rh;
    size_t nrh;
    int streamed; /* the body comes through `out` as it is made */
    ah__wbuf out;
    size_t off;
    int out_end, out_abort;
    int client_gone;

    /* the loop's side */
    int started, done;
    route_mode mode;
    cJSON *req;
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
    int port;
    char url[64];
    char *anthropic_url, *openai_url, *prompt;
    ah_policy policy;
    ah_retry_budget *budget;
    ah_rate_limit *rate_limit;
    const ah_transport *transport;
    ah_event_fn on_event;
    void *event_ud;
    ah_async *async;

    pthread_mutex_t mu;
    int closing;
    preq *live;
    preq *inbox, *inbox_tail;
    preq *cancels; /* linked through cnext */
    unsigned long long seq;

    char *refused[MAX_REFUSED]; /* loop thread */
    size_t n_refused;
    ah_proxy_stats stats; /* under mu */
};

/* Per-connection state (MHD's con_cls, from the URI log callback). */
typedef struct conn_ctx {
    ah_proxy *p;
    char *target;
    ah__wbuf body;
    int too_large;
    int head_seen; /* MHD's first call (the head, before any body byte) came */
} conn_ctx;

/* ---- small helpers ----------------------------------------------------------------- */

static struct timespec mono_after(long long ms)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    t.tv_sec += (time_t)(ms / 1000);
    t.tv_nsec += (long)(ms % 1000) * 1000000L;
    if (t.tv_nsec >= 1000000000L) {
        t.tv_sec++;
        t.tv_nsec -= 1000000000L;
    }
    return t;
}

/* 1 when the peer closed its side (an orderly FIN or a reset). */
static int peer_gone(int fd)
{
    if (fd < 0)
        return 0;
    struct pollfd pf = {.fd = fd, .events = POLLIN};
    if (poll(&pf, 1, 0) <= 0)
        return 0;
    if (pf.revents & (POLLHUP | POLLERR))
        return 1;
    char c;
    ssize_t n = recv(fd, &c, 1, MSG_PEEK | MSG_DONTWAIT);
    return n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR);
}

static int conn_fd(struct MHD_Connection *conn)
{
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CONNECTION_FD);
    return ci ? ci->connect_fd : -1;
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
    ah_proxy *p = r->p;
    pthread_mutex_lock(&p->mu);
    int last = --r->refs == 0;
    if (last) {
        if (r->prev)
            r->prev->next = r->next;
        else if (p->live == r)
            p->live = r->next;
        if (r->next)
            r->next->prev = r->prev;
    }
    pthread_mutex_unlock(&p->mu);
    if (!last)
        return;
    free(r->method);
    free(r->target);
    free(r->body);
    free_headers(r->hdrs, r->nh);
    free_headers(r->rh, r->nrh);
    free_headers(r->pend_h, r->pend_n);
    ah__wbuf_free(&r->out);
    ah__wbuf_free(&r->jbuf);
    free(r->cbody);
    pthread_cond_destroy(&r->cv);
    free(r);
}

/* ---- the answer (loop thread) ------------------------------------------------------ */

/* Set the head: status, the headers that pass (h may be NULL), a body now (streamed 0)
 * or through `out`. */
static void set_head(preq *r, int status, const ah_header *h, size_t n, int streamed,
                     const char *content_type, const char *body, size_t len)
{
    ah_header *copy = NULL;
    size_t ncopy = 0;
    if (copy_headers(h, n, &copy, &ncopy) != 0) {
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
    pthread_mutex_lock(&r->p->mu);
    if (!r->head_ready) {
        r->status = status;
        r->rh = copy;
        r->nrh = ncopy;
        r->streamed = streamed;
        if (body)
            ah__wbuf_put(&r->out, body, len);
        r->head_ready = 1;
        copy = NULL;
        ncopy = 0;
    }
    pthread_mutex_unlock(&r->p->mu);
    /* Signalled after the unlock: the woken thread does not wake only to wait for the lock
     * (r lives on: the loop holds a reference). */
    pthread_cond_signal(&r->cv);
    free_headers(copy, ncopy);
}

static void push_bytes(preq *r, const char *buf, size_t len, int end, int abort_)
{
    pthread_mutex_lock(&r->p->mu);
    if (len)
        ah__wbuf_put(&r->out, buf, len);
    if (end)
        r->out_end = 1;
    if (abort_)
        r->out_abort = 1;
    pthread_mutex_unlock(&r->p->mu);
    pthread_cond_signal(&r->cv);
}

/* The splice's bytes to the client; its head once the response started. */
static void deliver(preq *r)
{
    if (!r->sp_ok)
        return;
    if (r->sp.started && !r->head_ready) {
        /* The head and the bytes spliced so far in one hand-over: one wake-up of the
         * connection's thread, not two (docs/performance.md, "agenthost proxy"). */
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

/* The error body of the client's format for a request nothing upstream answered. */
static void answer_502(preq *r, const ah_error *err)
{
    ah__wbuf b = {0};
    char msg[AH_ERROR_MESSAGE_MAX + 64];
    ah__bufprintf(msg, sizeof msg, "agenthost proxy: no upstream response: %s",
                  err && err->message[0] ? err->message : "unknown error");
    int wire = r->route >= 0 ? r->route : (r->anthropic_client ? AH_WIRE_ANTHROPIC : AH_WIRE_OPENAI);
    if (wire == AH_WIRE_ANTHROPIC)
        ah__wr_a_error_body(&b, 502, "api_error", msg, NULL);
    else
        ah__wr_openai_error_body(&b, 502, "server_error", msg);
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
    ah_header *h = NULL;
    size_t nh = 0;
    if (!url || copy_headers(r->hdrs, r->nh, &h, &nh) != 0) {
        free(url);
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
    cc.request.headers = h;
    cc.request.n_headers = nh;
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
    free_headers(h, nh);
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
        r->req = cJSON_ParseWithLength(r->body ? r->body : "", r->body_len);
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
    cJSON_Delete(r->req);
    r->req = NULL;
}

static void on_async(void *ud)
{
    ah_proxy *p = ud;
    pthread_mutex_lock(&p->mu);
    preq *in = p->inbox, *cancels = p->cancels;
    p->inbox = p->inbox_tail = NULL;
    p->cancels = NULL;
    pthread_mutex_unlock(&p->mu);
    while (in) {
        preq *next = in->qnext;
        in->qnext = NULL;
        start_request(in);
        in = next;
    }
    while (cancels) {
        preq *next = cancels->cnext;
        cancels->cnext = NULL;
        if (cancels->started && !cancels->done) {
            if (cancels->call)
                ah_call_cancel(cancels->call);
            else {
                finish_request(cancels, 0);
                loop_done(cancels);
            }
        }
        release(cancels); /* the cancel queue's reference */
        cancels = next;
    }
}

/* ---- the HTTP side (connection threads) ---------------------------------------------- */

static void queue_cancel(preq *r)
{
    ah_proxy *p = r->p;
    pthread_mutex_lock(&p->mu);
    int queue = !r->cancel_queued && !p->closing;
    if (queue) {
        r->cancel_queued = 1;
        r->refs++;
        r->cnext = p->cancels;
        p->cancels = r;
    }
    r->client_gone = 1;
    pthread_mutex_unlock(&p->mu);
    if (queue)
        ah_async_send(p->async);
}

static enum MHD_Result collect_header(void *cls, enum MHD_ValueKind kind, const char *key,
                                      const char *value)
{
    preq *r = cls;
    (void)kind;
    ah_header *h = realloc(r->hdrs, (r->nh + 1) * sizeof *h);
    if (!h)
        return MHD_NO;
    r->hdrs = h;
    char *k = ah__strdup(key ? key : ""), *v = ah__strdup(value ? value : "");
    if (!k || !v) {
        free(k);
        free(v);
        return MHD_NO;
    }
    h[r->nh].name = k;
    h[r->nh].value = v;
    r->nh++;
    if (strcasecmp(k, "anthropic-version") == 0 || strcasecmp(k, "x-api-key") == 0)
        r->anthropic_client = 1;
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

static ssize_t reader(void *cls, uint64_t pos, char *buf, size_t max)
{
    preq *r = cls;
    ah_proxy *p = r->p;
    (void)pos;
    pthread_mutex_lock(&p->mu);
    while (r->off == r->out.len && !r->out_end && !r->out_abort && !p->closing) {
        struct timespec t = mono_after(SLICE_MS);
        pthread_cond_timedwait(&r->cv, &p->mu, &t);
    }
    ssize_t n;
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
        n = (ssize_t)k;
    } else if (r->out_end && !r->out_abort && !p->closing) {
        n = MHD_CONTENT_READER_END_OF_STREAM;
    } else {
        n = MHD_CONTENT_READER_END_WITH_ERROR;
    }
    pthread_mutex_unlock(&p->mu);
    return n;
}

static void reader_free(void *cls)
{
    preq *r = cls;
    pthread_mutex_lock(&r->p->mu);
    int early = !r->out_end;
    pthread_mutex_unlock(&r->p->mu);
    if (early)
        queue_cancel(r); /* the client left before the end */
    release(r);
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

static enum MHD_Result handle(ah_proxy *p, conn_ctx *cc, struct MHD_Connection *conn,
                              const char *path, const char *method)
{
    if (cc->too_large)
        return reply_now(conn, 413, "application/json",
                         "{\"error\":{\"type\":\"request_too_large\",\"message\":\"agenthost "
                         "proxy: request body larger than 64 MiB\"}}");
    preq *r = calloc(1, sizeof *r);
    if (!r)
        return MHD_NO;
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    int cv_rc = pthread_cond_init(&r->cv, &ca);
    pthread_condattr_destroy(&ca);
    if (cv_rc != 0) {
        free(r);
        return MHD_NO;
    }
    r->p = p;
    r->refs = 2; /* this thread, the loop */
    r->method = ah__strdup(method);
    r->target = ah__strdup(cc->target ? cc->target : path);
    r->body_len = cc->body.len;
    r->body = ah__wbuf_take(&cc->body);
    r->route = route_of(path, method);
    if (!r->method || !r->target || (r->body_len && !r->body) ||
        MHD_get_connection_values(conn, MHD_HEADER_KIND, collect_header, r) < 0) {
        r->refs = 1;
        release(r);
        return MHD_NO;
    }
    pthread_mutex_lock(&p->mu);
    if (p->closing) {
        pthread_mutex_unlock(&p->mu);
        r->refs = 1;
        release(r);
        return MHD_NO;
    }
    snprintf(r->run_id, sizeof r->run_id, "px_%llu", ++p->seq);
    p->stats.requests++;
    p->stats.in_flight++;
    r->next = p->live;
    if (p->live)
        p->live->prev = r;
    p->live = r;
    if (p->inbox_tail)
        p->inbox_tail->qnext = r;
    else
        p->inbox = r;
    p->inbox_tail = r;
    pthread_mutex_unlock(&p->mu);
    ah_async_send(p->async);

    /* Wait for the head; a client that hangs up meanwhile cancels its request. */
    int fd = conn_fd(conn);
    pthread_mutex_lock(&p->mu);
    while (!r->head_ready && !p->closing) {
        struct timespec t = mono_after(SLICE_MS);
        pthread_cond_timedwait(&r->cv, &p->mu, &t);
        if (r->head_ready || p->closing)
            break;
        pthread_mutex_unlock(&p->mu);
        int gone = peer_gone(fd);
        pthread_mutex_lock(&p->mu);
        if (gone)
            break;
    }
    int ready = r->head_ready && !p->closing;
    pthread_mutex_unlock(&p->mu);
    if (!ready) {
        queue_cancel(r);
        release(r);
        return MHD_NO;
    }
    struct MHD_Response *resp;
    if (r->streamed) {
        resp = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, BLOCK_SIZE, reader, r,
                                                 reader_free);
    } else {
        pthread_mutex_lock(&p->mu);
        resp = MHD_create_response_from_buffer(r->out.len, r->out.data ? r->out.data : (void *)"",
                                               MHD_RESPMEM_MUST_COPY);
        pthread_mutex_unlock(&p->mu);
    }
    if (!resp) {
        queue_cancel(r);
        release(r);
        return MHD_NO;
    }
    for (size_t i = 0; i < r->nrh; i++)
        MHD_add_response_header(resp, r->rh[i].name, r->rh[i].value);
    if (r->streamed)
        MHD_add_response_header(resp, "Cache-Control", "no-cache");
    enum MHD_Result rc = MHD_queue_response(conn, (unsigned)r->status, resp);
    MHD_destroy_response(resp); /* a streamed response keeps r until reader_free */
    if (!r->streamed)
        release(r);
    return rc;
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

static void on_completed(void *cls, struct MHD_Connection *conn, void **con_cls,
                         enum MHD_RequestTerminationCode toe)
{
    (void)cls;
    (void)conn;
    (void)toe;
    conn_ctx *cc = *con_cls;
    if (cc) {
        free(cc->target);
        ah__wbuf_free(&cc->body);
        free(cc);
        *con_cls = NULL;
    }
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
    p->loop = cfg->loop;
    p->policy = pol;
    p->budget = cfg->retry_budget;
    p->rate_limit = cfg->rate_limit;
    p->transport = cfg->transport;
    p->on_event = cfg->on_event;
    p->event_ud = cfg->event_ud;
    p->anthropic_url =
        base_url(cfg->anthropic_url, "https://api.anthropic.com", "anthropic_url", err, errsize);
    p->openai_url = p->anthropic_url ? base_url(cfg->openai_url, "https://api.openai.com",
                                                "openai_url", err, errsize)
                                     : NULL;
    if (!p->anthropic_url || !p->openai_url) {
        free(p->anthropic_url);
        free(p->openai_url);
        free(p);
        return AH_ERR_INVALID;
    }
    p->prompt = ah__strdup(cfg->continue_prompt ? cfg->continue_prompt
                                                : AH_CONTINUE_PROMPT_DEFAULT);
    p->async = ah_async_new(p->loop, on_async, p);
    if (!p->prompt || !p->async || pthread_mutex_init(&p->mu, NULL) != 0) {
        ah_async_free(p->async);
        free(p->prompt);
        free(p->anthropic_url);
        free(p->openai_url);
        free(p);
        goto nomem;
    }
    errno = 0;
    p->daemon = MHD_start_daemon(
        MHD_USE_THREAD_PER_CONNECTION | MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_POLL |
            MHD_USE_ERROR_LOG,
        0, NULL, NULL, on_request, p, MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&addr,
        MHD_OPTION_CONNECTION_LIMIT, (unsigned int)4096, MHD_OPTION_THREAD_STACK_SIZE,
        (size_t)256 << 10, MHD_OPTION_LISTEN_BACKLOG_SIZE, (unsigned int)1024,
        MHD_OPTION_URI_LOG_CALLBACK, on_uri, p, MHD_OPTION_NOTIFY_COMPLETED, on_completed, p,
        MHD_OPTION_EXTERNAL_LOGGER, on_mhd_log, p, MHD_OPTION_END);
    if (!p->daemon) {
        int e = errno;
        ah__bufprintf(err, errsize, "proxy: cannot listen on %s:%d%s%s", host, cfg->port,
                      e ? ": " : "", e ? strerror(e) : "");
        ah_async_free(p->async);
        pthread_mutex_destroy(&p->mu);
        free(p->prompt);
        free(p->anthropic_url);
        free(p->openai_url);
        free(p);
        return AH_ERR_IO;
    }
    const union MHD_DaemonInfo *di = MHD_get_daemon_info(p->daemon, MHD_DAEMON_INFO_BIND_PORT);
    p->port = di ? (int)di->port : cfg->port;
    snprintf(p->url, sizeof p->url, "http://%s:%d", host, p->port);
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
    pthread_mutex_lock(&p->mu);
    p->closing = 1;
    for (preq *r = p->live; r; r = r->next)
        pthread_cond_broadcast(&r->cv);
    pthread_mutex_unlock(&p->mu);
    MHD_stop_daemon(p->daemon); /* joins every connection thread */
    /* What the loop still holds: requests never started, cancels, requests in flight. */
    /* Pin every live request so none is freed while the queues are emptied. */
    pthread_mutex_lock(&p->mu);
    preq *cancels = p->cancels;
    p->inbox = p->inbox_tail = p->cancels = NULL;
    size_t nlive = 0;
    for (preq *r = p->live; r; r = r->next)
        nlive++;
    preq **live = nlive ? calloc(nlive, sizeof *live) : NULL;
    nlive = 0;
    for (preq *r = p->live; r && live; r = r->next) {
        r->refs++;
        live[nlive++] = r;
    }
    pthread_mutex_unlock(&p->mu);
    while (cancels) {
        preq *next = cancels->cnext;
        release(cancels); /* the cancel queue's reference */
        cancels = next;
    }
    for (size_t i = 0; i < nlive; i++) {
        preq *r = live[i];
        if (!r->done) { /* never started, or in flight: the loop's reference */
            r->done = 1;
            loop_clear(r);
            release(r);
        }
        release(r); /* the pin */
    }
    free(live);
    ah_async_free(p->async);
    for (size_t i = 0; i < p->n_refused; i++)
        free(p->refused[i]);
    pthread_mutex_destroy(&p->mu);
    free(p->prompt);
    free(p->anthropic_url);
    free(p->openai_url);
    free(p);
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
