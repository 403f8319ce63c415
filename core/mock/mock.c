/* mock.c - the mock provider's HTTP server: libmicrohttpd, fault injection, request log.
 *
 * One MHD daemon on 127.0.0.1 with a thread per connection, so a delay or a stall simply
 * blocks that connection's thread. Every wait is a timed wait on the mock's condition
 * variable in short slices: ah_mock_free sets `closing` and broadcasts, and a slice also
 * notices a client that hung up, so no thread ever sleeps past either.
 *
 * Per request: the body is collected, the next plan step is taken (under the lock, with a
 * reference on the plan so ah_mock_set_plan cannot free it underneath), the request is
 * logged (secrets redacted), then the step decides: reset (return MHD_NO before any
 * header), a status, a 400 for a bad body, or the model's reply. Stream faults act in the
 * content reader, counting whole events: MHD calls the reader again only after it has
 * sent what the reader returned, so "K events, then cut/stall" means K events on the
 * wire.
 *
 * Background responses (Responses with "background": true) are kept: their request body
 * and text options, under the response id. The model is deterministic, so a re-attach
 * (GET /v1/responses/{id}?stream=true&starting_after=N) rebuilds the same reply and
 * streams it from event N+1; it takes a plan step like any request, so a plan can cut it
 * or answer it with a status. POST /v1/responses/{id}/cancel marks one cancelled; it takes
 * no step. */
#include "mock_internal.h"

#include <errno.h>
#include <microhttpd.h>
#include <poll.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>
#include <zlib.h>

#include <arpa/inet.h>
#include <netinet/in.h>

enum {
    MAX_BODY = 64 << 20, /* larger request bodies get a 413 */
    MAX_PLAN_FILE = 16 << 20,
    MAX_KEPT = 4096, /* background responses kept; the oldest goes first */
    FILL_TARGET = 16384, /* bytes of events generated per reader refill */
    BLOCK_SIZE = 32768,
    SLICE_MS = 50, /* how often a wait checks for a hung-up client */
};

#define REDACTED "[REDACTED]"

/* A plan shared by the mock and the requests still using one of its steps. */
typedef struct planbox {
    ah__mock_plan *plan;
    unsigned refs;
} planbox;

/* A background response, kept so that its stream can be re-attached. */
typedef struct kept {
    char id[48];
    char *body; /* the request body, compact JSON */
    size_t body_len;
    char *text; /* the text options the reply was built with */
    size_t text_deltas, delta_bytes;
    char *tool_args;
    size_t tool_repeat;
    char *tool_calls_json;
    int restate;
    int cancelled;
} kept;

typedef struct record {
    ah_mock_request pub;
    char *method, *path, *body;
    ah_header *headers;
    size_t header_cap;
    ah_header *query;
    size_t query_cap;
} record;

struct ah_mock {
    struct MHD_Daemon *daemon;
    int port;
    char url[48];
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int closing;
    planbox *box;     /* current plan, NULL = none */
    size_t next_step; /* index of the next step of box->plan */
    double rl_tat;    /* the plan's rate limit: theoretical arrival time (monotonic ms) */
    unsigned long long seq;
    record **log;
    size_t log_len, log_cap;
    char *text;
    size_t text_deltas, delta_bytes;
    kept *kept;
    size_t n_kept, cap_kept;
    char *tls_cert, *tls_key; /* PEM text when serving HTTPS (MHD reads them for ever) */
    ah__mock_cache *cache;    /* the prompt cache (cache.c) */
};

/* Per-connection request state (MHD's con_cls). */
typedef struct req_ctx {
    ah_mock *m;
    ah__mock_buf body;
    int too_large;
} req_ctx;

/* The content reader's state for one response. */
typedef struct stream_ctx {
    ah_mock *m;
    planbox *box; /* keeps the step's strings alive */
    const ah__mock_step *step;
    ah__mock_reply reply;
    ah__mock_writer *w; /* NULL: a non-streaming body sent in two halves */
    ah__mock_buf body;
    size_t piece;
    ah__mock_buf out;
    size_t off;
    size_t units; /* events (or body halves) placed in `out` so far */
    size_t k;     /* the fault fires after this many units */
    int fault_pending, done, abort;
    int extra_sent;
    ah_wire wire;
    int fd;
    z_stream *z;       /* a "gzip" step: what the reader hands out is compressed */
    ah__mock_buf zout; /* the compressed form of `out`, swapped in */
    int z_done;
} stream_ctx;

static const ah__mock_step default_ok = {.kind = AH__MOCK_OK, .stall_ms = -1};
static const ah__mock_step rate_limited = {.kind = AH__MOCK_STATUS, .status = 429,
                                           .stall_ms = -1};

static double mono_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1000.0 + (double)ts.tv_nsec / 1e6;
}

/* ---- time and waiting -------------------------------------------------------------- */

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

static int ts_before(const struct timespec *a, const struct timespec *b)
{
    return a->tv_sec < b->tv_sec || (a->tv_sec == b->tv_sec && a->tv_nsec < b->tv_nsec);
}

/* 1 when the peer closed its side (an orderly FIN or a reset). */
static int peer_gone(int fd)
{
    if (fd < 0)
        return 0;
    struct pollfd p = {.fd = fd, .events = POLLIN};
    if (poll(&p, 1, 0) <= 0)
        return 0;
    if (p.revents & (POLLHUP | POLLERR))
        return 1;
    char c;
    ssize_t n = recv(fd, &c, 1, MSG_PEEK);
    return n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR);
}

/* Wait ms (-1 = without end). 0 when the time passed; -1 when the mock is closing or the
 * client went away first. */
static int wait_ms(ah_mock *m, long long ms, int fd)
{
    struct timespec deadline = mono_after(ms < 0 ? 0 : ms);
    int rc = -1;
    pthread_mutex_lock(&m->mu);
    while (!m->closing) {
        struct timespec slice = mono_after(SLICE_MS);
        if (ms >= 0 && ts_before(&deadline, &slice))
            slice = deadline;
        pthread_cond_timedwait(&m->cv, &m->mu, &slice);
        if (m->closing)
            break;
        struct timespec now = mono_after(0);
        if (ms >= 0 && !ts_before(&now, &deadline)) {
            rc = 0;
            break;
        }
        pthread_mutex_unlock(&m->mu);
        int gone = peer_gone(fd);
        pthread_mutex_lock(&m->mu);
        if (gone)
            break;
    }
    pthread_mutex_unlock(&m->mu);
    return rc;
}

/* ---- plan references --------------------------------------------------------------- */

static void box_release(ah_mock *m, planbox *b)
{
    if (!b)
        return;
    pthread_mutex_lock(&m->mu);
    int last = --b->refs == 0;
    pthread_mutex_unlock(&m->mu);
    if (last) {
        ah__mock_plan_free(b->plan);
        free(b);
    }
}

/* Take the next step; *box gets a reference the caller releases (NULL: no plan). */
static const ah__mock_step *take_step(ah_mock *m, planbox **box, size_t *index)
{
    const ah__mock_step *s = &default_ok;
    *box = NULL;
    *index = 0;
    pthread_mutex_lock(&m->mu);
    if (m->box && m->box->plan->rl_t_ms > 0) {
        /* GCRA: over the plan's rate limit -> 429, no step taken */
        const ah__mock_plan *p = m->box->plan;
        double now = mono_ms();
        if (now < m->rl_tat - p->rl_tau_ms) {
            pthread_mutex_unlock(&m->mu);
            return &rate_limited;
        }
        m->rl_tat = (m->rl_tat > now ? m->rl_tat : now) + p->rl_t_ms;
    }
    if (m->box) {
        ah__mock_plan *p = m->box->plan;
        if (m->next_step < p->count) {
            s = &p->steps[m->next_step++];
            *index = m->next_step;
        } else {
            s = &p->then;
        }
        *box = m->box;
        m->box->refs++;
    }
    pthread_mutex_unlock(&m->mu);
    return s;
}

/* ---- background responses ---------------------------------------------------------- */

static void kept_clear(kept *k)
{
    free(k->body);
    free(k->text);
    free(k->tool_args);
    free(k->tool_calls_json);
    memset(k, 0, sizeof *k);
}

/* Keep (or replace) response `id`: the request and the text options of its reply. */
static void keep_response(ah_mock *m, const char *id, const cJSON *req, size_t body_len,
                          const ah__mock_text_opts *opts)
{
    kept k = {0};
    ah__bufprintf(k.id, sizeof k.id, "%s", id);
    char *printed = cJSON_PrintUnformatted(req);
    k.body = printed ? ah__strdup(printed) : NULL;
    cJSON_free(printed);
    k.body_len = body_len;
    k.text = opts->text ? ah__strdup(opts->text) : NULL;
    k.text_deltas = opts->text_deltas;
    k.delta_bytes = opts->delta_bytes;
    k.tool_args = opts->tool_args ? ah__strdup(opts->tool_args) : NULL;
    k.tool_repeat = opts->tool_repeat;
    k.tool_calls_json = opts->tool_calls_json ? ah__strdup(opts->tool_calls_json) : NULL;
    k.restate = opts->restate;
    if (!k.body || (opts->text && !k.text) || (opts->tool_args && !k.tool_args) ||
        (opts->tool_calls_json && !k.tool_calls_json)) {
        kept_clear(&k);
        ah__log(AH_LOG_WARN, "mock: out of memory keeping a background response");
        return;
    }
    pthread_mutex_lock(&m->mu);
    size_t i = 0;
    while (i < m->n_kept && strcmp(m->kept[i].id, id) != 0)
        i++;
    if (i < m->n_kept) {
        kept_clear(&m->kept[i]);
        m->kept[i] = k;
    } else {
        if (m->n_kept == MAX_KEPT) {
            kept_clear(&m->kept[0]);
            memmove(m->kept, m->kept + 1, (m->n_kept - 1) * sizeof *m->kept);
            m->n_kept--;
        }
        if (m->n_kept == m->cap_kept) {
            size_t cap = m->cap_kept ? m->cap_kept * 2 : 16;
            kept *nk = realloc(m->kept, cap * sizeof *nk);
            if (!nk) {
                pthread_mutex_unlock(&m->mu);
                kept_clear(&k);
                return;
            }
            m->kept = nk;
            m->cap_kept = cap;
        }
        m->kept[m->n_kept++] = k;
    }
    pthread_mutex_unlock(&m->mu);
}

/* A copy of kept response `id` (the caller clears it); 0 when there is none. With
 * cancel, also mark it cancelled. */
static int find_kept(ah_mock *m, const char *id, int cancel, kept *out)
{
    int found = 0;
    memset(out, 0, sizeof *out);
    pthread_mutex_lock(&m->mu);
    for (size_t i = 0; i < m->n_kept; i++) {
        kept *k = &m->kept[i];
        if (strcmp(k->id, id) != 0)
            continue;
        if (cancel)
            k->cancelled = 1;
        *out = *k;
        out->body = ah__strdup(k->body);
        out->text = k->text ? ah__strdup(k->text) : NULL;
        out->tool_args = k->tool_args ? ah__strdup(k->tool_args) : NULL;
        out->tool_calls_json = k->tool_calls_json ? ah__strdup(k->tool_calls_json) : NULL;
        found = out->body && (!k->text || out->text) && (!k->tool_args || out->tool_args) &&
                        (!k->tool_calls_json || out->tool_calls_json)
                    ? 1
                    : -1;
        break;
    }
    pthread_mutex_unlock(&m->mu);
    if (found < 0) {
        kept_clear(out);
        found = 0;
    }
    return found;
}

/* ---- request log ------------------------------------------------------------------- */

static int is_secret_header(const char *name)
{
    static const char *const secret[] = {"authorization",  "proxy-authorization",
                                         "x-api-key",      "api-key",
                                         "x-goog-api-key", "cookie"};
    for (size_t i = 0; i < sizeof secret / sizeof secret[0]; i++)
        if (strcasecmp(name, secret[i]) == 0)
            return 1;
    return 0;
}

static void record_free(record *r)
{
    if (!r)
        return;
    for (size_t i = 0; i < r->pub.header_count; i++) {
        free((char *)r->headers[i].name);
        free((char *)r->headers[i].value);
    }
    free(r->headers);
    for (size_t i = 0; i < r->pub.query_count; i++) {
        free((char *)r->query[i].name);
        free((char *)r->query[i].value);
    }
    free(r->query);
    free(r->method);
    free(r->path);
    free(r->body);
    free(r);
}

static enum MHD_Result collect_header(void *cls, enum MHD_ValueKind kind, const char *key,
                                      const char *value)
{
    record *r = cls;
    (void)kind;
    if (r->pub.header_count == r->header_cap) {
        size_t cap = r->header_cap ? r->header_cap * 2 : 16;
        ah_header *h = realloc(r->headers, cap * sizeof *h);
        if (!h)
            return MHD_NO;
        r->headers = h;
        r->header_cap = cap;
    }
    /* The secret never reaches our memory: only the placeholder is copied. */
    char *n = ah__strdup(key ? key : "");
    char *v = ah__strdup(is_secret_header(key ? key : "") ? REDACTED
                         : value                          ? value
                                                          : "");
    if (!n || !v) {
        free(n);
        free(v);
        return MHD_NO;
    }
    r->headers[r->pub.header_count].name = n;
    r->headers[r->pub.header_count].value = v;
    r->pub.header_count++;
    return MHD_YES;
}

/* A query parameter that carries a credential (Gemini's ?key=, a SAS sig): redacted. */
static int is_secret_param(const char *name)
{
    static const char *const names[] = {"key",   "api_key",      "api-key", "apikey",
                                        "token", "access_token", "sig",     NULL};
    for (const char *const *n = names; *n; n++)
        if (strcasecmp(name, *n) == 0)
            return 1;
    return 0;
}

static enum MHD_Result collect_query(void *cls, enum MHD_ValueKind kind, const char *key,
                                     const char *value)
{
    record *r = cls;
    (void)kind;
    if (r->pub.query_count == r->query_cap) {
        size_t cap = r->query_cap ? r->query_cap * 2 : 8;
        ah_header *q = realloc(r->query, cap * sizeof *q);
        if (!q)
            return MHD_NO;
        r->query = q;
        r->query_cap = cap;
    }
    char *n = ah__strdup(key ? key : "");
    char *v = ah__strdup(is_secret_param(key ? key : "") ? REDACTED : value ? value : "");
    if (!n || !v) {
        free(n);
        free(v);
        return MHD_NO;
    }
    r->query[r->pub.query_count].name = n;
    r->query[r->pub.query_count].value = v;
    r->pub.query_count++;
    return MHD_YES;
}

static void log_request(ah_mock *m, struct MHD_Connection *conn, const char *method,
                        const char *path, int wire, int stream, const req_ctx *rc,
                        const char *step, size_t step_index, int status, size_t restated)
{
    record *r = calloc(1, sizeof *r);
    if (!r)
        goto fail;
    r->method = ah__strdup(method);
    r->path = ah__strdup(path);
    r->body = ah__strndup(rc->body.data ? rc->body.data : "", rc->body.len);
    if (!r->method || !r->path || !r->body)
        goto fail;
    MHD_get_connection_values(conn, MHD_HEADER_KIND, collect_header, r);
    MHD_get_connection_values(conn, MHD_GET_ARGUMENT_KIND, collect_query, r);
    r->pub.method = r->method;
    r->pub.path = r->path;
    r->pub.wire = wire;
    r->pub.stream = stream;
    r->pub.step = step;
    r->pub.step_index = step_index;
    r->pub.status = status;
    r->pub.restated = restated;
    r->pub.body = r->body;
    r->pub.body_len = rc->body.len;
    r->pub.headers = r->headers;
    r->pub.query = r->query;
    pthread_mutex_lock(&m->mu);
    if (m->log_len == m->log_cap) {
        size_t cap = m->log_cap ? m->log_cap * 2 : 32;
        record **l = realloc(m->log, cap * sizeof *l);
        if (!l) {
            pthread_mutex_unlock(&m->mu);
            goto fail;
        }
        m->log = l;
        m->log_cap = cap;
    }
    m->log[m->log_len++] = r;
    pthread_mutex_unlock(&m->mu);
    return;
fail:
    ah__log(AH_LOG_WARN, "mock: out of memory recording a request");
    record_free(r);
}

/* ---- responses --------------------------------------------------------------------- */

static void format_http_date(long long in_seconds, char *out, size_t size)
{
    static const char *const days[] = {"Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"};
    static const char *const months[] = {"Jan", "Feb", "Mar", "Apr", "May", "Jun",
                                         "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"};
    time_t t = time(NULL) + (time_t)in_seconds;
    struct tm tm;
    gmtime_r(&t, &tm);
    snprintf(out, size, "%s, %02d %s %04d %02d:%02d:%02d GMT", days[tm.tm_wday],
             tm.tm_mday, months[tm.tm_mon], tm.tm_year + 1900, tm.tm_hour, tm.tm_min,
             tm.tm_sec);
}

static void add_headers(struct MHD_Response *resp, ah_wire wire, const char *request_id,
                        const char *content_type, const ah__mock_step *step)
{
    MHD_add_response_header(resp, "Content-Type",
                            step && step->content_type ? step->content_type : content_type);
    MHD_add_response_header(
        resp, ah__mock_format_of(wire)->request_id_header, request_id);
    for (size_t i = 0; step && i < step->header_count; i++) {
        const ah__mock_header *h = &step->headers[i];
        char date[64];
        const char *v = h->value;
        if (!v) {
            format_http_date(h->date_in, date, sizeof date);
            v = date;
        }
        if (MHD_add_response_header(resp, h->name, v) != MHD_YES)
            ah__log(AH_LOG_WARN, "mock: header '%s' refused by the HTTP server", h->name);
    }
}

static struct MHD_Response *buffer_response(const char *data, size_t len)
{
    return MHD_create_response_from_buffer(len, (void *)data, MHD_RESPMEM_MUST_COPY);
}

static struct MHD_Response *error_response(ah_wire wire, int status, const char *type,
                                           const char *message, const char *request_id,
                                           const ah__mock_step *step)
{
    ah__mock_buf b = {0};
    ah__mock_error_body(wire, status, type, message, request_id, &b);
    struct MHD_Response *resp = b.failed ? NULL : buffer_response(b.data, b.len);
    ah__mock_buf_free(&b);
    if (resp)
        add_headers(resp, wire, request_id, "application/json", step);
    return resp;
}

/* The error bodies of a spent spend limit and of a prompt longer than the context
 * window, as each provider sends them (docs/providers-2026.md). */
static struct MHD_Response *limit_response(ah_wire wire, int status, const char *request_id,
                                           const ah__mock_step *step)
{
    ah__mock_buf b = {0};
    int anthropic = wire == AH_WIRE_ANTHROPIC;
    if (wire == AH_WIRE_GEMINI && step->spend_limit)
        /* Gemini has no spend-limit error of its own: its quota 429 (RESOURCE_EXHAUSTED)
         * is also what a per-minute quota sends, so it stays a rate limit, retried */
        ah__mock_buf_puts(
            &b, "{\"error\":{\"code\":429,\"message\":\"You exceeded your current quota, "
                "please check your plan and billing details.\",\"status\":"
                "\"RESOURCE_EXHAUSTED\"}}");
    else if (wire == AH_WIRE_GEMINI)
        ah__mock_buf_puts(
            &b, "{\"error\":{\"code\":400,\"message\":\"The input token count (212345) "
                "exceeds the maximum number of tokens allowed (1048576).\",\"status\":"
                "\"INVALID_ARGUMENT\"}}");
    else if (step->spend_limit && anthropic)
        ah__mock_buf_printf(
            &b,
            "{\"type\":\"error\",\"error\":{\"type\":\"rate_limit_error\",\"message\":"
            "\"You have reached your specified workspace API usage limits. You will regain "
            "access on 2026-12-01 at 00:00 UTC.\",\"details\":{\"error_code\":"
            "\"enforced_spend_limit_reached\"}},\"request_id\":\"%s\"}",
            request_id);
    else if (step->spend_limit)
        ah__mock_buf_puts(
            &b, "{\"error\":{\"message\":\"You exceeded your current quota, please check "
                "your plan and billing details.\",\"type\":\"insufficient_quota\",\"param\":"
                "null,\"code\":\"organization_spend_limit_exceeded\"}}");
    else if (anthropic)
        ah__mock_buf_printf(
            &b,
            "{\"type\":\"error\",\"error\":{\"type\":\"invalid_request_error\","
            "\"message\":\"prompt is too long: 212345 tokens > 200000 maximum\"},"
            "\"request_id\":\"%s\"}",
            request_id);
    else
        ah__mock_buf_puts(
            &b, "{\"error\":{\"message\":\"This model's maximum context length is 128000 "
                "tokens. However, your messages resulted in 212345 tokens.\",\"type\":"
                "\"invalid_request_error\",\"param\":\"messages\",\"code\":"
                "\"context_length_exceeded\"}}");
    struct MHD_Response *resp = b.failed ? NULL : buffer_response(b.data, b.len);
    ah__mock_buf_free(&b);
    if (resp)
        add_headers(resp, wire, request_id, "application/json", step);
    (void)status;
    return resp;
}

static void stream_free(void *cls)
{
    stream_ctx *s = cls;
    if (!s)
        return;
    ah__mock_writer_free(s->w);
    ah__mock_reply_free(&s->reply);
    ah__mock_buf_free(&s->body);
    ah__mock_buf_free(&s->out);
    ah__mock_buf_free(&s->zout);
    if (s->z) {
        deflateEnd(s->z);
        free(s->z);
    }
    box_release(s->m, s->box);
    free(s);
}

/* A "gzip" step: compress what fill() put in `out` (a sync flush, so each piece reaches
 * the client at once, as a compressing gateway that streams would send it; the gzip
 * trailer once the reply is done) and make that `out`. 0, or -1 when out of memory. */
static int gzip_out(stream_ctx *s)
{
    int finish = s->done && !s->abort;
    if (s->z_done || (s->out.len == 0 && !finish))
        return 0;
    ah__mock_buf_reset(&s->zout);
    s->z->next_in = (Bytef *)s->out.data;
    s->z->avail_in = (uInt)s->out.len;
    for (;;) {
        if (ah__mock_buf_reserve(&s->zout, 4096) != 0)
            return -1;
        uInt room = (uInt)(s->zout.cap - 1 - s->zout.len);
        s->z->next_out = (Bytef *)s->zout.data + s->zout.len;
        s->z->avail_out = room;
        int rc = deflate(s->z, finish ? Z_FINISH : Z_SYNC_FLUSH);
        if (rc == Z_STREAM_ERROR)
            return -1;
        s->zout.len += room - s->z->avail_out;
        if (rc == Z_STREAM_END) {
            s->z_done = 1;
            break;
        }
        if (s->z->avail_in == 0 && s->z->avail_out > 0 && !finish)
            break;
    }
    ah__mock_buf t = s->out;
    s->out = s->zout;
    s->zout = t;
    return 0;
}

/* Start compressing a "gzip" step's reply and say so in its head. 0 or -1. */
static int gzip_start(stream_ctx *s, struct MHD_Response *resp)
{
    s->z = calloc(1, sizeof *s->z);
    if (!s->z)
        return -1;
    /* windowBits 15 + 16: a gzip wrapper, not zlib's */
    if (deflateInit2(s->z, 6, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK) {
        free(s->z);
        s->z = NULL;
        return -1;
    }
    MHD_add_response_header(resp, "Content-Encoding", "gzip");
    return 0;
}

/* Append the next unit (an event, or half of a non-streaming body). 0 when none left. */
static int next_unit(stream_ctx *s)
{
    if (s->w)
        return ah__mock_writer_next(s->w, &s->out);
    if (s->piece >= 2)
        return 0;
    size_t half = ah__mock_utf8_floor(s->body.data, s->body.len / 2);
    if (s->piece == 0)
        ah__mock_buf_put(&s->out, s->body.data, half);
    else
        ah__mock_buf_put(&s->out, s->body.data + half, s->body.len - half);
    s->piece++;
    return 1;
}

/* Generate events into `out` until it is big enough, the stream ends, or the fault is
 * due. A cut or a stall waits until `out` has been handed over (and so sent) first. */
static void fill(stream_ctx *s)
{
    while (s->out.len < FILL_TARGET && !s->done && !s->abort && !s->out.failed) {
        if (s->fault_pending && s->units >= s->k) {
            ah__mock_step_kind kind = s->step->kind;
            if ((kind == AH__MOCK_CUT || kind == AH__MOCK_STALL) && s->out.len)
                return;
            s->fault_pending = 0;
            switch (kind) {
            case AH__MOCK_CUT:
                s->abort = 1;
                return;
            case AH__MOCK_STALL:
                if (wait_ms(s->m, s->step->stall_ms, s->fd) != 0) {
                    s->abort = 1;
                    return;
                }
                continue;
            case AH__MOCK_MALFORMED:
                ah__mock_writer_malformed(s->w, &s->out);
                s->done = 1;
                return;
            default:
                ah__mock_writer_error(s->w, &s->out, s->step->error_type,
                                      s->step->message);
                s->done = 1;
                return;
            }
        }
        if (!next_unit(s)) {
            if (s->fault_pending) { /* K past the end: fire after the last event */
                s->k = s->units;
                continue;
            }
            if (s->w && !s->extra_sent && (s->step->extra || s->step->extra_default)) {
                s->extra_sent = 1; /* content after the final event */
                if (s->step->extra)
                    ah__mock_buf_put(&s->out, s->step->extra, s->step->extra_len);
                else
                    ah__mock_buf_puts(&s->out, ah__mock_format_of(s->wire)->extra_after_end);
                continue;
            }
            s->done = 1;
            return;
        }
        s->units++;
    }
}

static ssize_t reader(void *cls, uint64_t pos, char *buf, size_t max)
{
    stream_ctx *s = cls;
    (void)pos;
    if (s->off == s->out.len) {
        ah__mock_buf_reset(&s->out);
        s->off = 0;
        if (!s->abort && !s->done)
            fill(s);
        if (s->out.failed || (s->z && gzip_out(s) != 0))
            return MHD_CONTENT_READER_END_WITH_ERROR;
        if (s->out.len == 0) {
            if (!s->abort && s->w && s->step->unclean != AH__MOCK_UNCLEAN_NONE) {
                /* The whole response went out; now end it as a proxy might. */
                if (s->step->unclean == AH__MOCK_UNCLEAN_RESET && s->fd >= 0) {
                    struct linger lg = {1, 0}; /* close() then sends an RST */
                    setsockopt(s->fd, SOL_SOCKET, SO_LINGER, &lg, sizeof lg);
                }
                return MHD_CONTENT_READER_END_WITH_ERROR;
            }
            return s->abort ? MHD_CONTENT_READER_END_WITH_ERROR
                            : MHD_CONTENT_READER_END_OF_STREAM;
        }
    }
    size_t n = s->out.len - s->off;
    if (n > max)
        n = max;
    memcpy(buf, s->out.data + s->off, n);
    s->off += n;
    return (ssize_t)n;
}

/* A STATUS step's error body with a body_fault: endless (chunked: the body, then spaces
 * for as long as the client reads) or stall (half the body,
 * then silence until the client or the mock goes away). */
typedef struct errbody_ctx {
    ah_mock *m;
    ah__mock_buf body;
    size_t off;
    int fault, fd;
} errbody_ctx;

static ssize_t errbody_reader(void *cls, uint64_t pos, char *buf, size_t max)
{
    errbody_ctx *e = cls;
    (void)pos;
    size_t limit = e->fault == AH__MOCK_BODY_STALL ? e->body.len / 2 : e->body.len;
    if (e->off < limit) {
        size_t n = limit - e->off < max ? limit - e->off : max;
        memcpy(buf, e->body.data + e->off, n);
        e->off += n;
        return (ssize_t)n;
    }
    if (e->fault == AH__MOCK_BODY_STALL) {
        wait_ms(e->m, -1, e->fd);
        return MHD_CONTENT_READER_END_WITH_ERROR;
    }
    if (e->m->closing)
        return MHD_CONTENT_READER_END_WITH_ERROR;
    memset(buf, ' ', max);
    return (ssize_t)max;
}

static void errbody_free(void *cls)
{
    errbody_ctx *e = cls;
    ah__mock_buf_free(&e->body);
    free(e);
}

static struct MHD_Response *faulty_error_response(ah_mock *m, struct MHD_Connection *conn,
                                                  ah_wire wire, int status,
                                                  const char *request_id,
                                                  const ah__mock_step *step)
{
    errbody_ctx *e = calloc(1, sizeof *e);
    if (!e)
        return NULL;
    e->m = m;
    e->fault = step->body_fault;
    e->fd = -1;
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CONNECTION_FD);
    if (ci)
        e->fd = ci->connect_fd;
    if (step->has_body)
        ah__mock_buf_put(&e->body, step->body, step->body_len);
    else
        ah__mock_error_body(wire, status, step->error_type, step->message, request_id,
                            &e->body);
    struct MHD_Response *resp =
        e->body.failed ? NULL
                       : MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, BLOCK_SIZE,
                                                           errbody_reader, e, errbody_free);
    if (!resp) {
        errbody_free(e);
        return NULL;
    }
    add_headers(resp, wire, request_id, "application/json", step);
    return resp;
}

/* The model's reply: SSE or JSON, with the step's stream fault if any. Returns the MHD
 * response and its status in *status, or NULL. */
static struct MHD_Response *reply_response(ah_mock *m, struct MHD_Connection *conn,
                                           ah_wire wire, const cJSON *req,
                                           size_t body_len, int stream,
                                           const ah__mock_step *step, planbox **box,
                                           const char *request_id, int *status,
                                           const kept *reattach, long long after,
                                           size_t *restated)
{
    char err[512]; /* a pairing 400 lists tool call ids */
    ah__mock_text_opts opts = {.text = m->text,
                               .text_deltas = m->text_deltas,
                               .delta_bytes = m->delta_bytes,
                               .tool_args = step->tool_args,
                               .tool_repeat = step->tool_calls,
                               .tool_calls_json = step->tool_calls_json,
                               .restate = step->restate,
                               .refuse_prefill = step->refuse_prefill};
    if (reattach) {
        /* The kept response's reply, rebuilt as it was. */
        opts.text = reattach->text;
        opts.text_deltas = reattach->text_deltas;
        opts.delta_bytes = reattach->delta_bytes;
        opts.tool_args = reattach->tool_args;
        opts.tool_repeat = reattach->tool_repeat;
        opts.tool_calls_json = reattach->tool_calls_json;
        opts.restate = reattach->restate;
        opts.refuse_prefill = 0;
    } else if (step->text || step->text_deltas || step->delta_bytes) {
        opts.text = step->text ? step->text : m->text;
        opts.text_deltas = step->text_deltas;
        opts.delta_bytes = step->delta_bytes;
        if (!step->text_deltas && !step->delta_bytes) {
            opts.text_deltas = m->text_deltas;
            opts.delta_bytes = m->delta_bytes;
        }
    }
    stream_ctx *s = calloc(1, sizeof *s);
    if (!s)
        return NULL;
    s->m = m;
    s->step = step;
    s->fd = -1;
    ah_status st =
        ah__mock_model_reply(wire, req, body_len, &opts, &s->reply, err, sizeof err);
    if (st != AH_OK) {
        free(s);
        *status = st == AH_ERR_INVALID ? 400 : 500;
        return error_response(wire, *status, NULL, err, request_id, step);
    }
    if (!reattach)
        ah__mock_cache_apply(m->cache, wire, req, &s->reply);
    s->reply.stop_reason = step->stop_reason;
    s->reply.stop_category = step->refusal_category;
    *restated = s->reply.restated;
    if (step->invalid_utf8 && s->reply.text_len >= 2) {
        s->reply.text[0] = (char)0xFF; /* never valid UTF-8, sent raw in the JSON */
        s->reply.text[1] = (char)0xFE;
    }
    if (!reattach && s->reply.background)
        keep_response(m, s->reply.msg_id, req, body_len, &opts);
    ah__mock_step_kind kind = step->kind;
    int fault = kind == AH__MOCK_CUT || kind == AH__MOCK_STALL ||
                kind == AH__MOCK_MALFORMED || kind == AH__MOCK_ERROR_EVENT;
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CONNECTION_FD);
    if (ci)
        s->fd = ci->connect_fd;

    struct MHD_Response *resp = NULL;
    *status = step->kind == AH__MOCK_STATUS ? step->status : 200;
    s->wire = wire;
    if (stream && !step->json_body) {
        s->w = ah__mock_writer_new(wire, &s->reply, request_id);
        if (!s->w)
            goto fail;
        if (reattach) {
            /* The stream goes on after event `after` (repeat_events earlier when the plan
             * says so: a server that repeats what the client already has). */
            long long skip = after + 1 - step->repeat_events;
            for (long long i = 0; i < skip && ah__mock_writer_next(s->w, &s->out); i++)
                ah__mock_buf_reset(&s->out);
        }
        s->fault_pending = fault;
        s->k = (size_t)step->after_events;
        /* A K past the end fires just before the final event: after it the response is
         * complete, and a client rightly ignores what follows. */
        size_t nev = ah__mock_writer_event_count(s->w);
        if (fault && nev > 0 && s->k >= nev)
            s->k = nev - 1;
        /* short_content_length: claim 1 GiB, send the stream, close. */
        uint64_t size = step->unclean == AH__MOCK_UNCLEAN_SHORT_CONTENT_LENGTH
                            ? (uint64_t)1 << 30
                            : MHD_SIZE_UNKNOWN;
        resp = MHD_create_response_from_callback(size, BLOCK_SIZE, reader, s, stream_free);
        if (!resp)
            goto fail;
        add_headers(resp, wire, request_id, "text/event-stream; charset=utf-8", step);
        MHD_add_response_header(resp, "Cache-Control", "no-cache");
        if (step->gzip && gzip_start(s, resp) != 0) {
            MHD_destroy_response(resp); /* frees s through stream_free */
            return NULL;
        }
        s->box = *box; /* the stream now holds the request's plan reference */
        *box = NULL;
        return resp;
    }

    /* Non-streaming: no events, so faults act on the body (see docs/mock.md). */
    if (kind == AH__MOCK_ERROR_EVENT) {
        *status = ah__mock_error_status(wire, step->error_type);
        resp = error_response(wire, *status,
                              step->error_type ? step->error_type
                                               : ah__mock_default_error_type(wire),
                              step->message, request_id, step);
        stream_free(s);
        return resp;
    }
    ah__mock_reply_body(wire, &s->reply, &s->body);
    if (s->body.failed)
        goto fail;
    if (kind == AH__MOCK_MALFORMED) {
        size_t half = ah__mock_utf8_floor(s->body.data, s->body.len / 2);
        resp = buffer_response(s->body.data, half);
        if (resp)
            add_headers(resp, wire, request_id, "application/json", step);
        stream_free(s);
        return resp;
    }
    s->fault_pending = kind == AH__MOCK_CUT || kind == AH__MOCK_STALL;
    s->k = step->after_events > 0 ? 1 : 0;
    resp = MHD_create_response_from_callback(step->gzip ? MHD_SIZE_UNKNOWN : s->body.len,
                                             BLOCK_SIZE, reader, s, stream_free);
    if (!resp)
        goto fail;
    add_headers(resp, wire, request_id, "application/json", step);
    if (step->gzip && gzip_start(s, resp) != 0) {
        MHD_destroy_response(resp);
        return NULL;
    }
    s->box = *box;
    *box = NULL;
    return resp;
fail:
    stream_free(s);
    return NULL;
}

/* ---- the request handler ----------------------------------------------------------- */

/* Does path match pattern, whose "{model}" matches a non-empty run without '/' (copied
 * to model, "" when the pattern has none)? */
static int path_match(const char *pattern, const char *path, char *model, size_t msize)
{
    const char *at = pattern ? strstr(pattern, "{model}") : NULL;
    model[0] = '\0';
    if (!pattern)
        return 0;
    if (!at)
        return strcmp(path, pattern) == 0;
    size_t pre = (size_t)(at - pattern), suf = strlen(at + 7), n = strlen(path);
    if (n <= pre + suf || strncmp(path, pattern, pre) != 0 ||
        strcmp(path + n - suf, at + 7) != 0)
        return 0;
    size_t mlen = n - pre - suf;
    if (mlen >= msize || memchr(path + pre, '/', mlen))
        return 0;
    memcpy(model, path + pre, mlen);
    model[mlen] = '\0';
    return 1;
}

/* The format serving path, or -1; *stream: 1 / 0 when the path says whether the request
 * streams, -1 when its body does; model: the path's model id, or "". */
static int wire_of_path(const char *path, int *stream, char *model, size_t msize)
{
    for (int w = 0; w < AH_WIRE_COUNT_; w++) {
        const ah__mock_format *f = ah__mock_format_of((ah_wire)w);
        if (path_match(f->stream_path, path, model, msize)) {
            *stream = 1;
            return w;
        }
        if (path_match(f->path, path, model, msize)) {
            *stream = f->stream_path ? 0 : -1;
            return w;
        }
    }
    return -1;
}

/* For an unknown path, answer in the shape of the provider the client seems to target:
 * the first format whose signature headers the request carries or whose endpoint
 * starts the path, else the guess_default one. */
static ah_wire guess_wire(struct MHD_Connection *conn, const char *path)
{
    int fallback = 0;
    for (int w = 0; w < AH_WIRE_COUNT_; w++) {
        const ah__mock_format *f = ah__mock_format_of((ah_wire)w);
        for (size_t i = 0; i < sizeof f->signature_headers / sizeof f->signature_headers[0];
             i++)
            if (f->signature_headers[i] &&
                MHD_lookup_connection_value(conn, MHD_HEADER_KIND, f->signature_headers[i]))
                return (ah_wire)w;
        if (strncmp(path, f->path, strlen(f->path)) == 0)
            return (ah_wire)w;
        if (f->guess_default)
            fallback = w;
    }
    return (ah_wire)fallback;
}

static enum MHD_Result queue(struct MHD_Connection *conn, int status,
                             struct MHD_Response *resp)
{
    if (!resp)
        return MHD_NO;
    enum MHD_Result r = MHD_queue_response(conn, (unsigned)status, resp);
    MHD_destroy_response(resp);
    return r;
}

static struct MHD_Response *json_response(const char *json, const char *request_id)
{
    struct MHD_Response *resp = buffer_response(json, strlen(json));
    if (resp)
        add_headers(resp, AH_WIRE_RESPONSES, request_id, "application/json", NULL);
    return resp;
}

/* The response endpoints of background mode: GET /v1/responses/{id}[?stream=true
 * &starting_after=N] (the re-attach: takes a plan step) and POST
 * /v1/responses/{id}/cancel (takes none). */
static enum MHD_Result handle_background(ah_mock *m, req_ctx *rc,
                                         struct MHD_Connection *conn, const char *path,
                                         const char *method, const char *request_id)
{
    const char *id = path + strlen("/v1/responses/");
    const char *slash = strchr(id, '/');
    char idbuf[64];
    size_t idlen = slash ? (size_t)(slash - id) : strlen(id);
    int cancel = slash && strcmp(slash, "/cancel") == 0;
    char msg[200];
    if (idlen == 0 || idlen >= sizeof idbuf || (slash && !cancel) ||
        strcmp(method, cancel ? "POST" : "GET") != 0) {
        int status = idlen && idlen < sizeof idbuf && (!slash || cancel) ? 405 : 404;
        snprintf(msg, sizeof msg, "Invalid URL (%.20s %.100s)", method, path);
        log_request(m, conn, method, path, AH_WIRE_RESPONSES, 0, rc, "none", 0, status, 0);
        return queue(conn, status,
                     error_response(AH_WIRE_RESPONSES, status, "invalid_request_error", msg,
                                    request_id, NULL));
    }
    memcpy(idbuf, id, idlen);
    idbuf[idlen] = '\0';
    kept k;
    int found;
    if (cancel) {
        found = find_kept(m, idbuf, 1, &k);
        kept_clear(&k);
        int status = found ? 200 : 404;
        log_request(m, conn, method, path, AH_WIRE_RESPONSES, 0, rc, "none", 0, status, 0);
        if (!found) {
            snprintf(msg, sizeof msg, "Response with id '%.60s' not found.", idbuf);
            return queue(conn, status,
                         error_response(AH_WIRE_RESPONSES, status, "invalid_request_error",
                                        msg, request_id, NULL));
        }
        char body[200];
        snprintf(body, sizeof body,
                 "{\"id\":\"%s\",\"object\":\"response\",\"status\":\"cancelled\","
                 "\"background\":true}",
                 idbuf);
        return queue(conn, status, json_response(body, request_id));
    }

    /* The re-attach. The query goes into the log with the path. */
    const char *qs = MHD_lookup_connection_value(conn, MHD_GET_ARGUMENT_KIND, "stream");
    const char *qa =
        MHD_lookup_connection_value(conn, MHD_GET_ARGUMENT_KIND, "starting_after");
    int stream = qs && strcmp(qs, "true") == 0;
    long long after = -1;
    char *end = NULL;
    if (qa && *qa) {
        after = strtoll(qa, &end, 10);
        if (*end || after < 0)
            after = -2; /* invalid */
    }
    char logged[256];
    snprintf(logged, sizeof logged, "%.160s%s%s%s%s", path, qs || qa ? "?" : "",
             qs ? "stream=" : "", qs ? qs : "",
             qa ? (qs ? "&starting_after=" : "starting_after=") : "");
    if (qa)
        snprintf(logged + strlen(logged), sizeof logged - strlen(logged), "%.40s", qa);
    planbox *box = NULL;
    size_t index = 0;
    const ah__mock_step *step = take_step(m, &box, &index);
    struct MHD_Response *resp = NULL;
    int status = 0;
    cJSON *req = NULL;
    size_t restated = 0;
    found = find_kept(m, idbuf, 0, &k);
    if (step->kind == AH__MOCK_RESET) {
        status = 0;
    } else if (step->kind == AH__MOCK_STATUS && (step->has_body || step->status >= 300)) {
        status = step->status;
        resp = step->has_body ? json_response(step->body, request_id)
                              : error_response(AH_WIRE_RESPONSES, status, step->error_type,
                                               step->message, request_id, step);
    } else if (!found) {
        status = 404;
        snprintf(msg, sizeof msg, "Response with id '%.60s' not found.", idbuf);
        resp = error_response(AH_WIRE_RESPONSES, status, "invalid_request_error", msg,
                              request_id, step);
    } else if (after == -2) {
        status = 400;
        resp = error_response(AH_WIRE_RESPONSES, status, "invalid_request_error",
                              "Invalid 'starting_after': expected a non-negative integer.",
                              request_id, step);
    } else if (!(req = cJSON_ParseWithLength(k.body, strlen(k.body)))) {
        status = 500;
        resp = error_response(AH_WIRE_RESPONSES, status, NULL, NULL, request_id, step);
    } else {
        resp = reply_response(m, conn, AH_WIRE_RESPONSES, req, k.body_len, stream, step,
                              &box, request_id, &status, &k, after, &restated);
    }
    log_request(m, conn, method, logged, AH_WIRE_RESPONSES, stream, rc,
                ah__mock_step_kind_name(step->kind), index, status, restated);
    enum MHD_Result result = MHD_NO;
    if (step->delay_headers_ms > 0) {
        const union MHD_ConnectionInfo *ci =
            MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CONNECTION_FD);
        if (wait_ms(m, step->delay_headers_ms, ci ? ci->connect_fd : -1) != 0)
            goto cleanup;
    }
    if (step->kind == AH__MOCK_RESET)
        goto cleanup;
    result = queue(conn, status, resp);
    resp = NULL;
cleanup:
    if (resp)
        MHD_destroy_response(resp);
    box_release(m, box);
    cJSON_Delete(req);
    kept_clear(&k);
    return result;
}

static enum MHD_Result handle(ah_mock *m, req_ctx *rc, struct MHD_Connection *conn,
                              const char *path, const char *method)
{
    char request_id[48];
    pthread_mutex_lock(&m->mu);
    unsigned long long seq = ++m->seq;
    pthread_mutex_unlock(&m->mu);
    snprintf(request_id, sizeof request_id, "req_mock%016llx", seq);

    if (strncmp(path, "/v1/responses/", 14) == 0)
        return handle_background(m, rc, conn, path, method, request_id);

    int path_stream = -1;
    char path_model[256];
    int wire = wire_of_path(path, &path_stream, path_model, sizeof path_model);
    if (wire < 0 || strcmp(method, "POST") != 0) {
        int status = wire < 0 ? 404 : 405;
        ah_wire shape = wire < 0 ? guess_wire(conn, path) : (ah_wire)wire;
        char msg[160];
        if (wire < 0)
            snprintf(msg, sizeof msg, "Invalid URL (%.20s %.100s)", method, path);
        else
            snprintf(msg, sizeof msg, "Method %.20s not allowed; use POST", method);
        log_request(m, conn, method, path, wire, 0, rc, "none", 0, status, 0);
        const ah__mock_format *f = ah__mock_format_of(shape);
        struct MHD_Response *resp =
            error_response(shape, status, wire < 0 ? f->not_found_type : f->bad_method_type,
                           msg, request_id, NULL);
        if (resp && wire >= 0)
            MHD_add_response_header(resp, "Allow", "POST");
        return queue(conn, status, resp);
    }

    cJSON *req = rc->too_large ? NULL
                               : cJSON_ParseWithLength(rc->body.data ? rc->body.data : "",
                                                       rc->body.len);
    if (path_model[0] && cJSON_IsObject(req) &&
        !cJSON_GetObjectItemCaseSensitive(req, "model"))
        cJSON_AddStringToObject(req, "model", path_model); /* the reader's one place */
    int stream = path_stream >= 0 ? path_stream
                                  : cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(req, "stream"));
    planbox *box = NULL;
    size_t index = 0;
    const ah__mock_step *step = take_step(m, &box, &index);
    struct MHD_Response *resp = NULL;
    int status = 0;
    size_t restated = 0;
    enum MHD_Result result = MHD_NO;

    if (step->kind == AH__MOCK_RESET) {
        status = 0;
    } else if (step->kind == AH__MOCK_STATUS && (step->has_body || step->status >= 300)) {
        status = step->status;
        if (step->body_fault) {
            resp = faulty_error_response(m, conn, (ah_wire)wire, status, request_id, step);
        } else if (step->has_body) {
            resp = buffer_response(step->body, step->body_len);
            if (resp)
                add_headers(resp, (ah_wire)wire, request_id, "application/json", step);
        } else if (step->spend_limit || step->context_exceeded) {
            resp = limit_response((ah_wire)wire, status, request_id, step);
        } else {
            resp = error_response((ah_wire)wire, status, step->error_type, step->message,
                                  request_id, step);
        }
    } else if (rc->too_large) {
        status = 413;
        resp = error_response((ah_wire)wire, status, NULL, NULL, request_id, step);
    } else if (!req) {
        status = 400;
        resp = error_response((ah_wire)wire, status, NULL,
                              ah__mock_format_of((ah_wire)wire)->bad_json_message,
                              request_id, step);
    } else {
        resp = reply_response(m, conn, (ah_wire)wire, req, rc->body.len, stream, step,
                              &box, request_id, &status, NULL, -1, &restated);
    }
    log_request(m, conn, method, path, wire, stream, rc,
                ah__mock_step_kind_name(step->kind), index, status, restated);

    if (step->delay_headers_ms > 0) {
        const union MHD_ConnectionInfo *ci =
            MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CONNECTION_FD);
        if (wait_ms(m, step->delay_headers_ms, ci ? ci->connect_fd : -1) != 0)
            goto cleanup; /* closing, or the client gave up: just drop the connection */
    }
    if (step->kind == AH__MOCK_RESET)
        goto cleanup; /* MHD_NO: MHD closes the connection without a response */
    result = queue(conn, status, resp);
    resp = NULL;
cleanup:
    if (resp)
        MHD_destroy_response(resp);
    box_release(m, box);
    cJSON_Delete(req);
    return result;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *conn, const char *url,
                                  const char *method, const char *version,
                                  const char *upload_data, size_t *upload_data_size,
                                  void **con_cls)
{
    ah_mock *m = cls;
    req_ctx *rc = *con_cls;
    (void)version;
    if (!rc) {
        rc = calloc(1, sizeof *rc);
        if (!rc)
            return MHD_NO;
        rc->m = m;
        *con_cls = rc;
        return MHD_YES;
    }
    if (*upload_data_size) {
        if (rc->body.len + *upload_data_size > MAX_BODY)
            rc->too_large = 1;
        else
            ah__mock_buf_put(&rc->body, upload_data, *upload_data_size);
        if (rc->body.failed)
            return MHD_NO;
        *upload_data_size = 0;
        return MHD_YES;
    }
    return handle(m, rc, conn, url, method);
}

static void on_completed(void *cls, struct MHD_Connection *conn, void **con_cls,
                         enum MHD_RequestTerminationCode toe)
{
    req_ctx *rc = *con_cls;
    (void)cls;
    (void)conn;
    (void)toe;
    if (rc) {
        ah__mock_buf_free(&rc->body);
        free(rc);
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
    ah__log(AH_LOG_DEBUG, "mock: microhttpd: %s", line);
}

/* ---- public API -------------------------------------------------------------------- */

void ah_mock_config_init(ah_mock_config *cfg)
{
    if (cfg)
        memset(cfg, 0, sizeof *cfg);
}

static char *read_file(const char *path, char *err, size_t errsize)
{
    FILE *f = fopen(path, "rb");
    ah__mock_buf b = {0};
    if (!f) {
        ah__bufprintf(err, errsize, "cannot open plan file '%s': %s", path,
                      strerror(errno));
        return NULL;
    }
    char chunk[8192];
    size_t n;
    while ((n = fread(chunk, 1, sizeof chunk, f)) > 0) {
        if (b.len + n > MAX_PLAN_FILE) {
            ah__bufprintf(err, errsize, "plan file '%s' is larger than %d bytes", path,
                          MAX_PLAN_FILE);
            fclose(f);
            ah__mock_buf_free(&b);
            return NULL;
        }
        ah__mock_buf_put(&b, chunk, n);
    }
    int bad = ferror(f);
    fclose(f);
    if (bad) {
        ah__bufprintf(err, errsize, "cannot read plan file '%s'", path);
        ah__mock_buf_free(&b);
        return NULL;
    }
    char *text = ah__mock_buf_take(&b);
    if (!text)
        ah__bufprintf(err, errsize, "out of memory reading plan file '%s'", path);
    return text;
}

static ah_status make_box(const char *json, planbox **out, char *err, size_t errsize)
{
    *out = NULL;
    if (!json)
        return AH_OK;
    ah__mock_plan *p = NULL;
    ah_status st = ah__mock_plan_parse(json, &p, err, errsize);
    if (st != AH_OK)
        return st;
    planbox *b = calloc(1, sizeof *b);
    if (!b) {
        ah__mock_plan_free(p);
        ah__bufprintf(err, errsize, "out of memory");
        return AH_ERR_NOMEM;
    }
    b->plan = p;
    b->refs = 1;
    *out = b;
    return AH_OK;
}

ah_status ah_mock_plan_validate(const char *plan_json, char *err, size_t errsize)
{
    ah__mock_plan *p = NULL;
    ah_status st = ah__mock_plan_parse(plan_json, &p, err, errsize);
    ah__mock_plan_free(p);
    return st;
}

static ah_mock *mock_make(const ah_mock_config *cfg, char *err, size_t errsize,
                          ah_status *st)
{
    *st = AH_ERR_INVALID;
    ah_mock_config defaults;
    char *file_text = NULL;
    char perr[256];
    ah_mock *m = NULL;
    int locks = 0;

    if (!cfg) {
        ah_mock_config_init(&defaults);
        cfg = &defaults;
    }
    if (cfg->port < 0 || cfg->port > 65535) {
        ah__bufprintf(err, errsize, "mock: port %d out of range", cfg->port);
        return NULL;
    }
    m = calloc(1, sizeof *m);
    if (!m)
        goto nomem;
    const char *plan_json = cfg->plan_json;
    if (!plan_json && cfg->plan_path) {
        file_text = read_file(cfg->plan_path, err, errsize);
        if (!file_text) {
            *st = AH_ERR_IO;
            goto fail;
        }
        plan_json = file_text;
    }
    if (make_box(plan_json, &m->box, perr, sizeof perr) != AH_OK) {
        if (cfg->plan_path && !cfg->plan_json)
            ah__bufprintf(err, errsize, "%s: %s", cfg->plan_path, perr);
        else
            ah__bufprintf(err, errsize, "%s", perr);
        goto fail;
    }
    m->text = cfg->text ? ah__strdup(cfg->text) : NULL;
    if (cfg->text && !m->text)
        goto nomem;
    m->text_deltas = cfg->text_deltas;
    m->delta_bytes = cfg->text_deltas ? 0 : cfg->delta_bytes;
    if (!(m->cache = ah__mock_cache_new()))
        goto nomem;

    pthread_condattr_t ca;
    if (pthread_mutex_init(&m->mu, NULL) != 0)
        goto nomem;
    if (pthread_condattr_init(&ca) != 0) {
        pthread_mutex_destroy(&m->mu);
        goto nomem;
    }
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    int cv_rc = pthread_cond_init(&m->cv, &ca);
    pthread_condattr_destroy(&ca);
    if (cv_rc != 0) {
        pthread_mutex_destroy(&m->mu);
        goto nomem;
    }
    locks = 1;

    struct sockaddr_in addr;
    memset(&addr, 0, sizeof addr);
    addr.sin_family = AF_INET;
    addr.sin_port = htons((uint16_t)cfg->port);
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    /* HTTPS: the certificate and key as PEM text, kept for the daemon's life. */
    unsigned int tls_flag = 0;
    struct MHD_OptionItem tls_opts[3] = {{MHD_OPTION_END, 0, NULL}};
    if (cfg->tls_cert || cfg->tls_key) {
        if (!cfg->tls_cert || !cfg->tls_key) {
            ah__bufprintf(err, errsize, "mock: HTTPS needs both tls_cert and tls_key");
            goto fail;
        }
        if (!MHD_is_feature_supported(MHD_FEATURE_TLS)) {
            ah__bufprintf(err, errsize, "mock: this libmicrohttpd has no TLS support");
            goto fail;
        }
        char ferr[256];
        if (!(m->tls_cert = read_file(cfg->tls_cert, ferr, sizeof ferr)) ||
            !(m->tls_key = read_file(cfg->tls_key, ferr, sizeof ferr))) {
            ah__bufprintf(err, errsize, "mock: %s", ferr);
            *st = AH_ERR_IO;
            goto fail;
        }
        tls_flag = MHD_USE_TLS;
        tls_opts[0] = (struct MHD_OptionItem){MHD_OPTION_HTTPS_MEM_CERT, 0, m->tls_cert};
        tls_opts[1] = (struct MHD_OptionItem){MHD_OPTION_HTTPS_MEM_KEY, 0, m->tls_key};
        tls_opts[2] = (struct MHD_OptionItem){MHD_OPTION_END, 0, NULL};
    }
    errno = 0;
    m->daemon = MHD_start_daemon(
        MHD_USE_THREAD_PER_CONNECTION | MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_POLL |
            MHD_USE_ERROR_LOG | tls_flag,
        0, NULL, NULL, on_request, m, MHD_OPTION_ARRAY, tls_opts, MHD_OPTION_SOCK_ADDR,
        (struct sockaddr *)&addr,
        /* Many clients at once (the scale bench holds 10 000 in flight): MHD's default
         * limit is about FD_SETSIZE, and a thread per connection needs little stack. */
        MHD_OPTION_CONNECTION_LIMIT, (unsigned int)16384, MHD_OPTION_THREAD_STACK_SIZE,
        (size_t)256 << 10, MHD_OPTION_LISTEN_BACKLOG_SIZE, (unsigned int)4096,
        MHD_OPTION_NOTIFY_COMPLETED, on_completed, m, MHD_OPTION_EXTERNAL_LOGGER,
        on_mhd_log, m, MHD_OPTION_END);
    if (!m->daemon) {
        int e = errno;
        ah__bufprintf(err, errsize, "mock: cannot listen on 127.0.0.1:%d%s%s", cfg->port,
                      e ? ": " : "", e ? strerror(e) : "");
        *st = AH_ERR_IO;
        goto fail;
    }
    const union MHD_DaemonInfo *di =
        MHD_get_daemon_info(m->daemon, MHD_DAEMON_INFO_BIND_PORT);
    m->port = di ? (int)di->port : cfg->port;
    snprintf(m->url, sizeof m->url, "%s://127.0.0.1:%d", tls_flag ? "https" : "http",
             m->port);
    free(file_text);
    ah__log(AH_LOG_INFO, "mock: listening on %s", m->url);
    return m;

nomem:
    *st = AH_ERR_NOMEM;
    *st = AH_ERR_NOMEM;
    ah__bufprintf(err, errsize, "mock: out of memory");
fail:
    free(file_text);
    if (m) {
        if (m->box) {
            ah__mock_plan_free(m->box->plan);
            free(m->box);
        }
        if (locks) {
            pthread_cond_destroy(&m->cv);
            pthread_mutex_destroy(&m->mu);
        }
        free(m->text);
        free(m->tls_cert);
        free(m->tls_key);
        ah__mock_cache_free(m->cache);
        free(m);
    }
    return NULL;
}

/* The public form (status, out-pointer, error buffer): see the header. */
ah_status ah_mock_new(const ah_mock_config *cfg, ah_mock **out, char *err, size_t errsize)
{
    ah_status st = AH_OK;
    if (!out) {
        if (err && errsize)
            ah__bufprintf(err, errsize, "ah_mock_new: out is NULL");
        return AH_ERR_INVALID;
    }
    *out = mock_make(cfg, err, errsize, &st);
    return *out ? AH_OK : st;
}

void ah_mock_free(ah_mock *m)
{
    if (!m)
        return;
    pthread_mutex_lock(&m->mu);
    m->closing = 1;
    pthread_cond_broadcast(&m->cv);
    pthread_mutex_unlock(&m->mu);
    /* Joins the listener and every connection thread; their waits see `closing`. */
    MHD_stop_daemon(m->daemon);
    box_release(m, m->box);
    for (size_t i = 0; i < m->n_kept; i++)
        kept_clear(&m->kept[i]);
    free(m->kept);
    for (size_t i = 0; i < m->log_len; i++)
        record_free(m->log[i]);
    free(m->log);
    free(m->text);
    free(m->tls_cert);
    free(m->tls_key);
    ah__mock_cache_free(m->cache);
    pthread_cond_destroy(&m->cv);
    pthread_mutex_destroy(&m->mu);
    free(m);
}

const char *ah_mock_url(const ah_mock *m)
{
    return m ? m->url : "";
}

int ah_mock_port(const ah_mock *m)
{
    return m ? m->port : 0;
}

ah_status ah_mock_set_plan(ah_mock *m, const char *plan_json, char *err, size_t errsize)
{
    if (!m)
        return AH_ERR_INVALID;
    planbox *nb = NULL;
    ah_status st = make_box(plan_json, &nb, err, errsize);
    if (st != AH_OK)
        return st;
    pthread_mutex_lock(&m->mu);
    planbox *old = m->box;
    m->box = nb;
    m->next_step = 0;
    m->rl_tat = 0;
    pthread_mutex_unlock(&m->mu);
    box_release(m, old);
    return AH_OK;
}

size_t ah_mock_request_count(ah_mock *m)
{
    if (!m)
        return 0;
    pthread_mutex_lock(&m->mu);
    size_t n = m->log_len;
    pthread_mutex_unlock(&m->mu);
    return n;
}

ah_status ah_mock_request_get(ah_mock *m, size_t i, ah_mock_request *out)
{
    if (!m || !out)
        return AH_ERR_INVALID;
    ah_status st = AH_ERR_NOT_FOUND;
    pthread_mutex_lock(&m->mu);
    if (i < m->log_len) {
        *out = m->log[i]->pub; /* records never move or change once logged */
        st = AH_OK;
    }
    pthread_mutex_unlock(&m->mu);
    return st;
}
