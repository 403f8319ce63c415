/* mcp_http.c - streamable HTTP (docs/mcp.md, "Streamable HTTP"): one POST per message
 * through the loop's HTTP transport (libcurl by default), answered with one JSON body or
 * an SSE stream (parsed by sse.c) that carries notifications and then the response.
 *
 * What a failure means is decided here, where the bytes are:
 *   - before the request left (connect refused, DNS; the transport's on_sent never
 *     came), or HTTP 429 / 502 / 503: never sent (kind transient, the server's
 *     Retry-After kept as the hint);
 *   - HTTP 404 on a 2025 session: the session expired: one new session, then the request
 *     again (ah__mcp_session_lost); a second 404 in a row: kind mcp_session;
 *   - HTTP 400 with -32020 HeaderMismatch (2026 era, tools/call): the tools are listed
 *     again and the request sent again, once (it did not run);
 *   - another 4xx: refused (a JSON-RPC error body is the answer; else permanent);
 *   - sent and then no answer (a reset, a 500 or 504, a 2xx without the response): the
 *     outcome is unknown (kind outcome_unknown);
 *   - an SSE stream cut after an event id, in the 2025 era: resumable (kind stream; the
 *     server's retry field as the hint), picked up by GET with Last-Event-ID.
 * Invariants: a transfer's sink never aborts its own transfer (it detaches and returns
 * nonzero); headers and bodies are never logged.
 */
#include "mcp_internal.h"

#include <stdlib.h>
#include <string.h>
#include <strings.h>

typedef struct xfer xfer;

/* What a transfer delivered, handed to the client from a loop timer: a sink runs inside
 * libcurl's callbacks, where no other transfer may be started, and an answer often
 * starts one (the next handshake step, a notification). In order: messages, then the
 * transfer's end. */
typedef struct qitem {
    xfer *x;
    char *msg; /* NULL: the transfer's end */
    size_t len;
    struct qitem *next;
} qitem;

struct mcp_http {
    char *url;
    ah_header *headers;
    size_t n_headers;
    char **hstore;
    const ah_transport *tr;
    char *session;
    xfer *posts; /* fire-and-forget transfers (notifications, replies) */
    qitem *qhead, *qtail;
    ah_timer *qtimer;
    /* the session's DELETE at close (2025 era): its transfer (on posts) until it ended,
     * a timer that bounds it and hands its end to the client outside libcurl's
     * callbacks, and what to call then */
    xfer *del;
    ah_timer *deltimer;
    void (*del_done)(ah_mcp *s);
};

struct xfer {
    ah_mcp *s;
    mcp_req *r; /* NULL: fire and forget, or detached */
    void *attempt;
    int is_get, sent, status, sse, detached;
    int in_cb;   /* its queued items are being handed over (x stays until they end) */
    int in_sink; /* inside a sink callback of the transport */
    int queued;   /* items of it in the queue */
    int finished; /* the transfer ended (on_done came, or it was aborted) */
    ah_error end; /* how it ended */
    ah_sse *parser;
    char *body;
    size_t blen, bcap;
    char *msg; /* the request body, alive until the attempt ends */
    ah_header hdr[48];
    size_t nh;
    char *vals[8]; /* header values made here */
    char *pnames[16], *pvals[16]; /* Mcp-Param-* headers (2026 era tools/call) */
    size_t np;
    ah_error hint; /* retry hints of a non-2xx head */
    xfer *next;
};

static void drain(void *ud);
static void delete_ended(void *ud);

int ah__mcp_http_new(ah_mcp *s, const ah_mcp_config *cfg, char *err, size_t errsize)
{
    if (strncmp(cfg->url, "http://", 7) != 0 && strncmp(cfg->url, "https://", 8) != 0) {
        ah__bufprintf(err, errsize, "ah.mcp '%s': url must be http:// or https://",
                      cfg->name);
        return -1;
    }
    if (cfg->n_headers > 16) {
        ah__bufprintf(err, errsize, "ah.mcp '%s': at most 16 headers", cfg->name);
        return -1;
    }
    mcp_http *h = calloc(1, sizeof *h);
    if (!h) {
        ah__bufprintf(err, errsize, "out of memory");
        return -1;
    }
    s->http = h;
    h->tr = cfg->transport ? cfg->transport : ah_transport_curl();
    h->qtimer = ah_timer_new(s->loop, drain, s);
    h->deltimer = ah_timer_new(s->loop, delete_ended, s);
    if (!h->qtimer || !h->deltimer) {
        ah__bufprintf(err, errsize, "out of memory");
        return -1;
    }
    h->url = ah__strdup(cfg->url);
    h->headers = calloc(cfg->n_headers + 1, sizeof *h->headers);
    h->hstore = calloc(2 * cfg->n_headers + 1, sizeof *h->hstore);
    if (!h->url || !h->headers || !h->hstore) {
        ah__bufprintf(err, errsize, "out of memory");
        return -1;
    }
    for (size_t i = 0; i < cfg->n_headers; i++) {
        const ah_header *x = &cfg->headers[i];
        if (!x->name || !x->value || strpbrk(x->name, "\r\n:") || strpbrk(x->value, "\r\n")) {
            ah__bufprintf(err, errsize, "ah.mcp '%s': header %zu is not a valid header",
                          cfg->name, i + 1);
            return -1;
        }
        h->hstore[2 * i] = ah__strdup(x->name);
        h->hstore[2 * i + 1] = ah__strdup(x->value);
        if (!h->hstore[2 * i] || !h->hstore[2 * i + 1]) {
            ah__bufprintf(err, errsize, "out of memory");
            return -1;
        }
        h->headers[i].name = h->hstore[2 * i];
        h->headers[i].value = h->hstore[2 * i + 1];
        h->n_headers++;
    }
    return 0;
}

static void xfer_free(xfer *x)
{
    if (!x)
        return;
    ah_sse_free(x->parser);
    free(x->body);
    free(x->msg);
    for (size_t i = 0; i < sizeof x->vals / sizeof x->vals[0]; i++)
        free(x->vals[i]);
    for (size_t i = 0; i < x->np; i++) {
        free(x->pnames[i]);
        free(x->pvals[i]);
    }
    free(x);
}

static void unlink_post(mcp_http *h, xfer *x)
{
    for (xfer **p = &h->posts; *p; p = &(*p)->next)
        if (*p == x) {
            *p = x->next;
            return;
        }
}

/* ---- the head, the body, the end ------------------------------------------------- */

static const char *header(const ah_header *h, size_t n, const char *name)
{
    for (size_t i = 0; i < n; i++)
        if (h[i].name && strcasecmp(h[i].name, name) == 0)
            return h[i].value;
    return NULL;
}

static int x_body_(xfer *x, const char *buf, size_t len);

static int x_head(void *ud, int status, const ah_header *h, size_t n)
{
    xfer *x = ud;
    if (x->detached)
        return 1;
    x->status = status;
    const char *ct = header(h, n, "content-type");
    x->sse = ct && strncasecmp(ct, "text/event-stream", 17) == 0;
    ah_error_clear(&x->hint);
    if (status < 200 || status >= 300) {
        ah_error_apply_headers(&x->hint, h, n, ah_loop_wall_ms(x->s->loop));
        return 0;
    }
    mcp_req *r = x->r;
    const char *sid = header(h, n, "mcp-session-id");
    if (r && sid && strcmp(r->method, "initialize") == 0 && !x->s->modern) {
        mcp_http *hh = x->s->http;
        free(hh->session);
        hh->session = ah__strdup(sid);
    }
    if (r && r->state < RQ_ACCEPTED)
        r->state = RQ_ACCEPTED;
    if (x->sse && !x->parser) {
        x->parser = ah_sse_new(NULL);
        if (!x->parser)
            return 1;
    }
    return 0;
}

static int add_body(xfer *x, const char *buf, size_t len)
{
    if (x->blen + len > MCP_MAX_MESSAGE)
        return -1;
    if (x->blen + len + 1 > x->bcap) {
        size_t cap = x->bcap ? x->bcap : 4096;
        while (cap < x->blen + len + 1)
            cap *= 2;
        char *b = realloc(x->body, cap);
        if (!b)
            return -1;
        x->body = b;
        x->bcap = cap;
    }
    memcpy(x->body + x->blen, buf, len);
    x->blen += len;
    x->body[x->blen] = '\0';
    return 0;
}

static int enqueue(xfer *x, const char *msg, size_t len)
{
    mcp_http *h = x->s->http;
    qitem *q = calloc(1, sizeof *q);
    if (!q || (msg && !(q->msg = ah__strndup(msg, len)))) {
        free(q);
        return -1;
    }
    q->x = x;
    q->len = len;
    x->queued++;
    if (h->qtail)
        h->qtail->next = q;
    else
        h->qhead = q;
    h->qtail = q;
    ah_timer_start(h->qtimer, 0);
    return 0;
}

/* Queue the complete SSE events: each data is one JSON-RPC message. */
static int pump_sse(xfer *x)
{
    ah_sse_event ev;
    int rc;
    while ((rc = ah_sse_next(x->parser, &ev)) == 1) {
        mcp_req *r = x->r;
        if (r && ev.id_len) {
            free(r->last_event_id);
            r->last_event_id = ah__strndup(ev.id, ev.id_len);
        }
        if (r && ev.retry_ms >= 0)
            r->retry_ms = ev.retry_ms;
        if (ev.data_len && enqueue(x, ev.data, ev.data_len) != 0)
            return 1;
    }
    if (x->r && ah_sse_retry_ms(x->parser) >= 0)
        x->r->retry_ms = ah_sse_retry_ms(x->parser);
    return rc < 0 ? 1 : 0;
}

static int x_body(void *ud, const char *buf, size_t len)
{
    xfer *x = ud;
    if (x->detached)
        return 1;
    x->in_sink = 1;
    int rc = x_body_(x, buf, len);
    x->in_sink = 0;
    return rc;
}

static int x_body_(xfer *x, const char *buf, size_t len)
{
    if (x->status < 200 || x->status >= 300 || !x->sse)
        return add_body(x, buf, len) == 0 ? 0 : 1;
    if (ah_sse_feed(x->parser, buf, len) != AH_OK)
        return 1;
    return pump_sse(x);
}

static void x_sent(void *ud)
{
    ((xfer *)ud)->sent = 1;
}

static void fail(mcp_req *r, ah_error_kind kind, int status, int64_t hint,
                 const char *fmt, const char *a, const char *b)
{
    ah_error e;
    ah_error_set(&e, kind, status, fmt, a, b);
    if (hint >= 0)
        e.retry_after_ms = hint;
    ah__mcp_req_end(r, NULL, NULL, &e);
}

/* A non-2xx answer: its body may be the JSON-RPC error that is the answer. */
static void refused(xfer *x, mcp_req *r)
{
    ah_mcp *s = x->s;
    int st = x->status;
    char what[64];
    ah__bufprintf(what, sizeof what, "HTTP %d", st);
    if (st == 404 && !s->modern && ah__mcp_http_has_session(s)) {
        ah__mcp_session_lost(s, r);
        return;
    }
    if (st == 429 || st == 502 || st == 503) {
        fail(r, AH_EK_TRANSIENT, st, x->hint.retry_after_ms,
             "never sent: server '%s' answered %s before accepting the request", s->name,
             what);
        return;
    }
    cJSON *m = x->blen ? cJSON_ParseWithLength(x->body, x->blen) : NULL;
    const cJSON *err = m ? cJSON_GetObjectItemCaseSensitive(m, "error") : NULL;
    const cJSON *code = cJSON_IsObject(err) ? cJSON_GetObjectItemCaseSensitive(err, "code")
                                            : NULL;
    if (st == 400 && cJSON_IsNumber(code) && code->valueint == -32020 &&
        ah__mcp_header_mismatch(s, r) == 0) {
        /* not run: listed again, then sent again */
    } else if (st >= 400 && st < 500 && cJSON_IsObject(err)) {
        ah__mcp_req_end(r, NULL, err, NULL);
    } else if (st >= 400 && st < 500) {
        fail(r, AH_EK_PERMANENT, st, -1, "server '%s' refused the request: %s", s->name,
             what);
    } else {
        fail(r, r->internal ? AH_EK_TRANSIENT : AH_EK_OUTCOME_UNKNOWN, st, -1,
             "server '%s' answered %s after the request was sent; its effect may or may "
             "not have happened",
             s->name, what);
    }
    cJSON_Delete(m);
}

static void x_done(void *ud, const ah_error *err)
{
    xfer *x = ud;
    ah_mcp *s = x->s;
    x->finished = 1;
    if (!x->r) { /* fire and forget, or its request ended */
        if (!x->detached)
            unlink_post(s->http, x);
        if (x == s->http->del) { /* the session's DELETE: any answer will do */
            s->http->del = NULL;
            ah_timer_start(s->http->deltimer, 0);
        }
        if (!x->queued)
            xfer_free(x);
        return;
    }
    if (err)
        x->end = *err;
    else
        ah_error_clear(&x->end);
    if (x->status >= 200 && x->status < 300 && !x->sse && x->blen)
        enqueue(x, x->body, x->blen);
    else if (x->status >= 200 && x->status < 300 && x->sse && x->parser) {
        ah_sse_feed(x->parser, "\n\n", 2); /* a last event without its blank line */
        pump_sse(x);
    }
    if (enqueue(x, NULL, 0) != 0) {
        /* out of memory: end it now, as an unknown outcome */
        mcp_req *r = x->r;
        r->http = NULL;
        x->r = NULL;
        x->detached = 1;
        ah__mcp_req_end(r, NULL, NULL, &x->end);
        if (!x->queued)
            xfer_free(x);
    }
}

/* The transfer's end, once what it delivered was handed over. */
static void finish_xfer(xfer *x)
{
    ah_mcp *s = x->s;
    mcp_req *r = x->r;
    const ah_error *err = &x->end;
    r->http = NULL;
    x->r = NULL;
    x->detached = 1;
    char detail[300];
    ah__bufprintf(detail, sizeof detail, "%s",
                  err && err->kind != AH_EK_NONE ? err->message : "the answer ended");
    if (x->status >= 300 || (x->status > 0 && x->status < 200)) {
        refused(x, r);
    } else if (x->status == 0) {
        /* no head at all */
        if (!x->sent && err && err->kind == AH_EK_CONNECT)
            fail(r, AH_EK_TRANSIENT, 0, -1, "never sent: server '%s': %s", s->name, detail);
        else
            fail(r, r->internal ? AH_EK_TRANSIENT : AH_EK_OUTCOME_UNKNOWN, 0, -1,
                 "server '%s' did not answer after the request was sent (%s); its effect "
                 "may or may not have happened",
                 s->name, detail);
    } else if (x->is_get && !x->sse) {
        fail(r, AH_EK_OUTCOME_UNKNOWN, x->status, -1,
             "server '%s' did not resume the stream (%s); its effect may or may not have "
             "happened",
             s->name, "no event stream");
    } else if (x->sse && !s->modern && r->last_event_id && r->last_event_id[0]) {
        /* resumable: GET with Last-Event-ID (the server's retry field as the wait) */
        ah_error e;
        ah_error_set(&e, AH_EK_STREAM, 0,
                     "server '%s': the answer's stream ended before the response (%s); "
                     "resumable from event %.60s",
                     s->name, detail, r->last_event_id);
        e.retry_after_ms = r->retry_ms;
        ah__mcp_req_end(r, NULL, NULL, &e);
    } else {
        fail(r, r->internal ? AH_EK_TRANSIENT : AH_EK_OUTCOME_UNKNOWN, 0, -1,
             "server '%s' accepted the request but its answer never came (%s); its effect "
             "may or may not have happened",
             s->name, detail);
    }
}

static void drain(void *ud)
{
    ah_mcp *s = ud;
    mcp_http *h = s->http;
    int budget = 64; /* a long stream does not hold the loop: the rest on the next step */
    while (h->qhead && budget-- > 0) {
        qitem *q = h->qhead;
        h->qhead = q->next;
        if (!h->qhead)
            h->qtail = NULL;
        xfer *x = q->x;
        x->queued--;
        if (!x->detached && x->r) {
            x->in_cb = 1;
            if (q->msg)
                ah__mcp_receive(s, q->msg, q->len);
            else
                finish_xfer(x);
            x->in_cb = 0;
        }
        free(q->msg);
        free(q);
        if (x->detached && !x->queued && x->finished)
            xfer_free(x);
    }
    if (h->qhead)
        ah_timer_start(h->qtimer, 0);
}

static const ah_transport_sink sink = {x_head, x_body, x_done, x_sent};

/* ---- starting a transfer --------------------------------------------------------- */

static void add(xfer *x, const char *name, const char *value)
{
    if (x->nh < sizeof x->hdr / sizeof x->hdr[0]) {
        x->hdr[x->nh].name = name;
        x->hdr[x->nh].value = value;
        x->nh++;
    }
}

static char *b64(const char *s)
{
    static const char t[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    size_t n = strlen(s), k = 0;
    char *o = malloc(4 * ((n + 2) / 3) + 14);
    if (!o)
        return NULL;
    memcpy(o, "=?base64?", 9);
    k = 9;
    for (size_t i = 0; i < n; i += 3) {
        unsigned v = (unsigned char)s[i] << 16;
        if (i + 1 < n)
            v |= (unsigned char)s[i + 1] << 8;
        if (i + 2 < n)
            v |= (unsigned char)s[i + 2];
        o[k++] = t[(v >> 18) & 63];
        o[k++] = t[(v >> 12) & 63];
        o[k++] = i + 1 < n ? t[(v >> 6) & 63] : '=';
        o[k++] = i + 2 < n ? t[v & 63] : '=';
    }
    memcpy(o + k, "?=", 3);
    return o;
}

/* Mcp-Name and Mcp-Param-*: as is when it is plain visible ASCII, else the Base64
 * sentinel form. */
char *ah__mcp_header_value(const char *n)
{
    size_t len = strlen(n);
    int safe = len > 0 && n[0] != ' ' && n[len - 1] != ' ' &&
               !(strncmp(n, "=?base64?", 9) == 0 && len >= 11 && strcmp(n + len - 2, "?=") == 0);
    for (const unsigned char *p = (const unsigned char *)n; safe && *p; p++)
        safe = *p >= 0x20 && *p <= 0x7e;
    return safe ? ah__strdup(n) : b64(n);
}

static int start(ah_mcp *s, xfer *x, const char *method, const char *rpc_method,
                 const char *name, const char *last_event_id)
{
    mcp_http *h = s->http;
    add(x, "Accept", x->is_get ? "text/event-stream" : "application/json, text/event-stream");
    if (!x->is_get && x->msg)
        add(x, "Content-Type", "application/json");
    const char *ver = s->modern ? AH_MCP_PROTOCOL_2026 : s->protocol[0] ? s->protocol : NULL;
    if (ver) {
        x->vals[0] = ah__strdup(ver);
        if (x->vals[0])
            add(x, "MCP-Protocol-Version", x->vals[0]);
    }
    if (!s->modern && h->session)
        add(x, "Mcp-Session-Id", h->session);
    if (s->modern && rpc_method)
        add(x, "Mcp-Method", rpc_method);
    if (s->modern && name && rpc_method &&
        (strcmp(rpc_method, "tools/call") == 0 || strcmp(rpc_method, "prompts/get") == 0)) {
        x->vals[1] = ah__mcp_header_value(name);
        if (x->vals[1])
            add(x, "Mcp-Name", x->vals[1]);
    }
    for (size_t i = 0; i < x->np; i++)
        add(x, x->pnames[i], x->pvals[i]);
    if (last_event_id) {
        x->vals[2] = ah__strdup(last_event_id);
        if (x->vals[2])
            add(x, "Last-Event-ID", x->vals[2]);
    }
    for (size_t i = 0; i < h->n_headers; i++)
        add(x, h->headers[i].name, h->headers[i].value);
    ah_http_request req = {.method = method, .url = h->url, .headers = x->hdr, .n_headers = x->nh,
                           .body = x->msg, .body_len = x->msg ? strlen(x->msg) : 0};
    ah_error err;
    ah_error_clear(&err);
    if (h->tr->ops->start(h->tr->self, s->loop, &req, &sink, x, &x->attempt, &err) != AH_OK)
        return -1;
    return 0;
}

void ah__mcp_http_send(ah_mcp *s, mcp_req *r)
{
    xfer *x = calloc(1, sizeof *x);
    if (x) {
        x->s = s;
        x->r = r;
        x->msg = ah__mcp_encode(r->id, r->method, r->params, s->modern);
        if (s->modern && r->name && strcmp(r->method, "tools/call") == 0) {
            for (size_t i = 0; i < s->n_tools; i++)
                if (strcmp(s->tools[i].name, r->name) == 0 && s->tools[i].param_headers)
                    x->np = ah__mcp_param_headers(
                        s->tools[i].param_headers,
                        cJSON_GetObjectItemCaseSensitive(r->params, "arguments"), x->pnames,
                        x->pvals, sizeof x->pnames / sizeof x->pnames[0]);
        }
    }
    if (!x || !x->msg || start(s, x, "POST", r->method, r->name, NULL) != 0) {
        xfer_free(x);
        fail(r, AH_EK_TRANSIENT, 0, -1, "never sent: server '%s': %s", s->name,
             "the request could not be started");
        return;
    }
    r->http = x;
    r->state = RQ_SENDING;
}

void ah__mcp_http_resume(ah_mcp *s, mcp_req *r)
{
    xfer *x = calloc(1, sizeof *x);
    if (x) {
        x->s = s;
        x->r = r;
        x->is_get = 1;
        x->sent = 1;
    }
    if (!x || start(s, x, "GET", NULL, NULL, r->last_event_id) != 0) {
        xfer_free(x);
        fail(r, AH_EK_OUTCOME_UNKNOWN, 0, -1,
             "server '%s': the stream could not be resumed (%s); its effect may or may not "
             "have happened",
             s->name, "the request could not be started");
        return;
    }
    r->http = x;
    r->state = RQ_ACCEPTED;
}

void ah__mcp_http_post(ah_mcp *s, const char *msg, const char *method)
{
    mcp_http *h = s->http;
    xfer *x = calloc(1, sizeof *x);
    if (!x)
        return;
    x->s = s;
    x->msg = ah__strdup(msg);
    if (!x->msg || start(s, x, "POST", method, NULL, NULL) != 0) {
        xfer_free(x);
        return;
    }
    x->next = h->posts;
    h->posts = x;
}

int ah__mcp_http_end_session(ah_mcp *s, int64_t bound_ms, void (*done)(ah_mcp *s))
{
    mcp_http *h = s->http;
    if (!h || s->modern || !h->session || h->del || h->del_done)
        return -1;
    xfer *x = calloc(1, sizeof *x);
    if (!x)
        return -1;
    x->s = s;
    x->is_get = 0;
    if (start(s, x, "DELETE", NULL, NULL, NULL) != 0) {
        xfer_free(x);
        return -1;
    }
    x->next = h->posts;
    h->posts = x;
    h->del = x;
    h->del_done = done;
    ah_timer_start(h->deltimer, bound_ms);
    return 0;
}

/* Stop a fire-and-forget transfer already off the posts list and free it once nothing
 * of it is queued. */
static void drop_post(mcp_http *h, xfer *x)
{
    if (!x->finished)
        h->tr->ops->abort(h->tr->self, x->attempt);
    x->finished = 1;
    x->detached = 1;
    if (!x->queued)
        xfer_free(x);
}

/* The DELETE ended (or its bound came first: then it is stopped). */
static void delete_ended(void *ud)
{
    ah_mcp *s = ud;
    mcp_http *h = s->http;
    xfer *x = h->del;
    if (x) {
        h->del = NULL;
        unlink_post(h, x);
        drop_post(h, x);
    }
    free(h->session);
    h->session = NULL;
    void (*done)(ah_mcp *) = h->del_done;
    h->del_done = NULL;
    if (done)
        done(s);
}

int ah__mcp_http_ending_session(const ah_mcp *s)
{
    return s->http && s->http->del_done;
}

void ah__mcp_http_abort(ah_mcp *s, mcp_req *r)
{
    xfer *x = r->http;
    if (!x)
        return;
    r->http = NULL;
    x->r = NULL;
    x->detached = 1;
    if (x->in_sink)
        return; /* inside its own sink: it stops itself (returns nonzero), x_done frees */
    if (!x->finished) {
        s->http->tr->ops->abort(s->http->tr->self, x->attempt);
        x->finished = 1;
    }
    if (!x->queued && !x->in_cb)
        xfer_free(x);
}

void ah__mcp_http_forget_session(ah_mcp *s)
{
    free(s->http->session);
    s->http->session = NULL;
}

int ah__mcp_http_has_session(const ah_mcp *s)
{
    return s->http && s->http->session;
}

void ah__mcp_http_free(ah_mcp *s)
{
    mcp_http *h = s->http;
    if (!h)
        return;
    while (h->posts) {
        xfer *x = h->posts;
        h->posts = x->next;
        drop_post(h, x);
    }
    while (h->qhead) {
        qitem *q = h->qhead;
        h->qhead = q->next;
        xfer *x = q->x;
        if (--x->queued == 0 && x->detached && x->finished)
            xfer_free(x);
        free(q->msg);
        free(q);
    }
    h->del = NULL; /* it was on posts */
    ah_timer_free(h->qtimer);
    ah_timer_free(h->deltimer);
    for (size_t i = 0; h->hstore && i < 2 * h->n_headers; i++)
        free(h->hstore[i]);
    free(h->hstore);
    free(h->headers);
    free(h->url);
    free(h->session);
    free(h);
    s->http = NULL;
}
