/* latency_bench.c MODE URL WIRE N [WARMUP] - time to the first text delta and to the end
 * of N short streamed requests, one after the other, against a server at URL (the
 * built-in mock, `agenthost mock`, in its own process: tests/bench/latency.sh):
 *
 *   MODE agenthost  each request is one agent run on one loop and one client (an
 *                   ah_worker per request, as a program runs one agent turn): from
 *                   ah_worker_start to the first text_delta event reaching on_event,
 *                   and to the run's end;
 *   MODE curl       plain libcurl on the same server: one easy handle reused for every
 *                   request (its connection kept, as libcurl intends), the same body and
 *                   headers, from curl_easy_perform to the first received bytes that
 *                   hold a text delta event, and to the end of the transfer.
 *
 *   MODE both       the two in turn, one request of each, in one process: a busy moment
 *                   of the machine (other work on its cores) then hits both sides, which
 *                   is what makes their difference meaningful on a shared machine.
 *
 *   MODE proxy      plain libcurl twice: to URL (the mock) and to PROXY_URL (an `agenthost
 *                   proxy` in front of the same mock), one request of each in turn, each
 *                   side with its own reused easy handle: what the proxy adds
 *                   (tests/bench/proxy_latency.sh). With CONC > 1, rounds of CONC requests
 *                   at once on one curl multi handle (CONC reused easy handles per side),
 *                   a direct round then a proxied one; a request's times count from its
 *                   round's start. Prints mode=direct and mode=proxy.
 *                   latency_bench proxy URL WIRE N WARMUP PROXY_URL [CONC]
 *
 *   MODE rate       open loop at a fixed rate, as vegeta (and the published gateway
 *                   figures) measure: request k is due at k / RATE, sent then whatever the
 *                   earlier ones are doing, and its times count from when it was due (no
 *                   coordinated omission). One curl multi handle driven by epoll and a
 *                   timerfd (slots 200 µs apart at 5000/s: curl_multi_poll's milliseconds
 *                   are too coarse); reused easy handles per side, a new one when all are
 *                   busy, at most 4096 in flight per side (beyond: dropped); sent more than
 *                   1 ms after its slot: late; a 1 s limit per request (vegeta's -timeout=1s)
 *                   is an error. PHASES pairs of SECONDS straight to URL then through
 *                   PROXY_URL, after 0.5 s of each not counted; each phase drains before the
 *                   next. nostream sends the non-streaming body (Chat: TensorZero's load
 *                   test's), whose "first" is the first bytes holding the reply's text.
 *                   NAME=PID: that process's CPU (utime + stime, /proc) per phase, in % of
 *                   one core, beside the client's own. Prints "rate phase=N mode=direct|proxy
 *                   ... achieved_rps= n= errors= dropped= late= timeouts= error_max_us=
 *                   (errors past the 1 s limit; the longest of the others) first_{mean,p50,p90,p95,p99,
 *                   max}_us= total_...= cpu_NAME_pct=", then phase=all (each mode pooled) and
 *                   phase=median mode=added (the median over the pairs of proxy - direct).
 *                   latency_bench rate URL WIRE RATE SECONDS PHASES PROXY_URL
 *                                 [stream|nostream] [NAME=PID...]
 *
 * WIRE anthropic|openai|responses. The first WARMUP requests (default 20) are not
 * counted. Prints one line per mode: "latency mode=M wire=W n=N first_p50_us=... first_p90_us=
 * first_p99_us= total_p50_us= total_p90_us= total_p99_us=". The same program under
 * callgrind gives instructions per request (latency.sh: the difference of two N).
 * Numbers, never assertions (docs/testing.md).
 */
#define _GNU_SOURCE /* memmem */
#include "agenthost.h"
#include "agenthost/worker.h"

#include <curl/curl.h>

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#ifdef __linux__ /* MODE rate */
#include <errno.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <strings.h>
#include <sys/epoll.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <sys/timerfd.h>
#include <unistd.h>
#endif

static double now_us(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e6 + (double)t.tv_nsec / 1e3;
}

static int cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double pct(double *v, int n, double p)
{
    int i = (int)(p * (n - 1) + 0.5);
    return v[i < 0 ? 0 : i >= n ? n - 1 : i];
}

/* ---- agenthost ---- */

typedef struct run_state {
    double first;
} run_state;

static void on_event(void *ud, const ah_event *ev)
{
    run_state *s = ud;
    if (ev->type == AH_EV_TEXT_DELTA && s->first == 0)
        s->first = now_us();
}

typedef struct ah_ctx {
    ah_loop *loop;
    ah_client *client;
} ah_ctx;

static int ah_open(ah_ctx *x, const char *url, ah_wire wire)
{
    ah_client_config cc = {0};
    cc.wire = wire;
    cc.base_url = url;
    cc.api_key = "bench";
    cc.model = "mock-bench";
    cc.max_tokens = 256;
    char err[256];
    x->loop = ah_loop_new(NULL, NULL);
    x->client = NULL;
    if (!x->loop || ah_client_new(&cc, &x->client, err, sizeof err) != AH_OK) {
        fprintf(stderr, "latency_bench: %s\n", x->loop ? err : "no loop");
        return 1;
    }
    return 0;
}

static void ah_close(ah_ctx *x)
{
    ah_client_free(x->client);
    ah_loop_free(x->loop);
}

/* One agent run: its times to the first text_delta and to the end, in µs. */
static int ah_one(ah_ctx *x, int i, double *first, double *total)
{
    run_state s = {0};
    ah_worker_config wc = {0};
    wc.loop = x->loop;
    wc.client = x->client;
    wc.on_event = on_event;
    wc.event_ud = &s;
    ah_worker *w = NULL;
    char err[256];
    if (ah_worker_new(&wc, &w, err, sizeof err) != AH_OK) {
        fprintf(stderr, "latency_bench: %s\n", err);
        return 1;
    }
    int rc = 0;
    double t0 = now_us();
    ah_run_outcome o = ah_worker_run(w, "hi");
    double t1 = now_us();
    if (o != AH_OUTCOME_COMPLETED || s.first == 0) {
        fprintf(stderr, "latency_bench: run %d ended %s: %s\n", i, ah_run_outcome_name(o),
                ah_worker_error(w)->message);
        rc = 1;
    }
    *first = s.first - t0;
    *total = t1 - t0;
    ah_worker_free(w);
    return rc;
}

/* ---- plain libcurl ---- */

typedef struct curl_state {
    const char *marker; /* bytes that only a text delta event holds */
    char carry[64];     /* the end of the previous chunk: a marker may straddle two */
    size_t carried;
    double first;
} curl_state;

static size_t on_write(char *p, size_t size, size_t nmemb, void *ud)
{
    curl_state *s = ud;
    size_t n = size * nmemb;
    if (s->first == 0) {
        size_t m = strlen(s->marker);
        char buf[64 + 4096];
        size_t take = n < 4096 ? n : 4096;
        memcpy(buf, s->carry, s->carried);
        memcpy(buf + s->carried, p, take);
        size_t len = s->carried + take;
        if (memmem(buf, len, s->marker, m)) /* libc's: the floor's search costs little */
            s->first = now_us();
        if (n > 4096) /* a first chunk this long holds a delta anyway */
            s->first = s->first ? s->first : now_us();
        s->carried = len < m ? len : m;
        memcpy(s->carry, buf + len - s->carried, s->carried);
    }
    return n;
}

static const char BODY_ANTHROPIC[] =
    "{\"model\":\"mock-bench\",\"max_tokens\":256,\"stream\":true,"
    "\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]}";
static const char BODY_CHAT[] =
    "{\"model\":\"mock-bench\",\"max_tokens\":256,\"stream\":true,"
    "\"stream_options\":{\"include_usage\":true},"
    "\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]}";
static const char BODY_RESPONSES[] =
    "{\"model\":\"mock-bench\",\"max_output_tokens\":256,\"stream\":true,"
    "\"input\":[{\"role\":\"user\",\"content\":\"hi\"}]}";
/* Not streamed (MODE rate nostream): the Chat one is TensorZero's load test's body. */
static const char BODY_ANTHROPIC_JSON[] =
    "{\"model\":\"mock-bench\",\"max_tokens\":256,\"stream\":false,"
    "\"messages\":[{\"role\":\"user\",\"content\":\"Is Santa real?\"}]}";
static const char BODY_CHAT_JSON[] =
    "{\"model\":\"mock-bench\",\"messages\":[{\"role\":\"user\",\"content\":"
    "\"Is Santa real?\"}],\"stream\":false}";
static const char BODY_RESPONSES_JSON[] =
    "{\"model\":\"mock-bench\",\"max_output_tokens\":256,\"stream\":false,"
    "\"input\":[{\"role\":\"user\",\"content\":\"Is Santa real?\"}]}";

typedef struct curl_ctx {
    CURL *h;
    struct curl_slist *hd;
    curl_state s;
    char url[512];
} curl_ctx;

/* stream 0: the non-streaming body; its "first delta" is the first bytes holding the
 * reply's text (the mock's text starts "You said" in every format). */
static int curl_open(curl_ctx *x, const char *base, ah_wire wire, int stream)
{
    memset(x, 0, sizeof *x);
    snprintf(x->url, sizeof x->url, "%s%s", base, ah_wire_path(wire));
    curl_global_init(CURL_GLOBAL_DEFAULT);
    x->h = curl_easy_init();
    struct curl_slist *hd = curl_slist_append(NULL, "content-type: application/json");
    const char *body;
    if (wire == AH_WIRE_ANTHROPIC) {
        hd = curl_slist_append(hd, "x-api-key: bench");
        hd = curl_slist_append(hd, "anthropic-version: 2023-06-01");
        body = stream ? BODY_ANTHROPIC : BODY_ANTHROPIC_JSON;
        x->s.marker = "\"text_delta\"";
    } else {
        hd = curl_slist_append(hd, "authorization: Bearer bench");
        if (wire == AH_WIRE_OPENAI)
            body = stream ? BODY_CHAT : BODY_CHAT_JSON;
        else
            body = stream ? BODY_RESPONSES : BODY_RESPONSES_JSON;
        x->s.marker = wire == AH_WIRE_OPENAI ? "\"delta\":{\"content\":\"Y"
                                             : "\"response.output_text.delta\"";
    }
    if (!stream)
        x->s.marker = "\"You said";
    x->hd = hd = curl_slist_append(hd, stream ? "accept: text/event-stream" : "accept: */*");
    if (!x->h || !hd)
        return 1;
    curl_easy_setopt(x->h, CURLOPT_URL, x->url);
    curl_easy_setopt(x->h, CURLOPT_HTTPHEADER, hd);
    curl_easy_setopt(x->h, CURLOPT_POSTFIELDS, body);
    curl_easy_setopt(x->h, CURLOPT_WRITEFUNCTION, on_write);
    curl_easy_setopt(x->h, CURLOPT_WRITEDATA, &x->s);
    return 0;
}

static void curl_close(curl_ctx *x)
{
    curl_slist_free_all(x->hd);
    curl_easy_cleanup(x->h);
    curl_global_cleanup();
}

/* One request on the reused handle: its times to the first text delta and to the end. */
static int curl_one(curl_ctx *x, int i, double *first, double *total)
{
    x->s.first = 0;
    x->s.carried = 0;
    double t0 = now_us();
    CURLcode c = curl_easy_perform(x->h);
    double t1 = now_us();
    long status = 0;
    curl_easy_getinfo(x->h, CURLINFO_RESPONSE_CODE, &status);
    int rc = 0;
    if (c != CURLE_OK || status != 200 || x->s.first == 0) {
        fprintf(stderr, "latency_bench: curl request %d: %s, HTTP %ld%s\n", i,
                curl_easy_strerror(c), status, x->s.first == 0 ? ", no text delta" : "");
        rc = 1;
    }
    *first = x->s.first - t0;
    *total = t1 - t0;
    return rc;
}

/* ---- plain libcurl, CONC at once (MODE proxy with CONC > 1) ---- */

typedef struct multi_side {
    CURLM *m;
    curl_ctx *x; /* CONC handles on the same URL */
    int conc;
} multi_side;

static int multi_open(multi_side *ms, const char *base, ah_wire wire, int conc)
{
    ms->conc = conc;
    ms->m = curl_multi_init();
    ms->x = calloc((size_t)conc, sizeof *ms->x);
    if (!ms->m || !ms->x)
        return 1;
    for (int i = 0; i < conc; i++)
        if (curl_open(&ms->x[i], base, wire, 1))
            return 1;
    return 0;
}

static void multi_close(multi_side *ms)
{
    for (int i = 0; ms->x && i < ms->conc; i++)
        curl_close(&ms->x[i]);
    free(ms->x);
    curl_multi_cleanup(ms->m);
}

/* One round: CONC requests at once; each one's times from the round's start. */
static int multi_round(multi_side *ms, int round, double *first, double *total)
{
    for (int i = 0; i < ms->conc; i++) {
        ms->x[i].s.first = 0;
        ms->x[i].s.carried = 0;
        total[i] = 0;
        curl_easy_setopt(ms->x[i].h, CURLOPT_PRIVATE, (void *)(intptr_t)i);
    }
    double t0 = now_us();
    for (int i = 0; i < ms->conc; i++)
        curl_multi_add_handle(ms->m, ms->x[i].h);
    int running = ms->conc, rc = 0;
    while (running > 0) {
        if (curl_multi_perform(ms->m, &running) != CURLM_OK)
            return 1;
        CURLMsg *msg;
        int left;
        while ((msg = curl_multi_info_read(ms->m, &left))) {
            if (msg->msg != CURLMSG_DONE)
                continue;
            void *pv = NULL;
            curl_easy_getinfo(msg->easy_handle, CURLINFO_PRIVATE, &pv);
            int i = (int)(intptr_t)pv;
            long status = 0;
            curl_easy_getinfo(msg->easy_handle, CURLINFO_RESPONSE_CODE, &status);
            total[i] = now_us() - t0;
            if (msg->data.result != CURLE_OK || status != 200 || ms->x[i].s.first == 0) {
                fprintf(stderr, "latency_bench: round %d request %d: %s, HTTP %ld\n", round, i,
                        curl_easy_strerror(msg->data.result), status);
                rc = 1;
            }
            first[i] = ms->x[i].s.first - t0;
        }
        if (running > 0 && curl_multi_poll(ms->m, NULL, 0, 1000, NULL) != CURLM_OK)
            return 1;
    }
    for (int i = 0; i < ms->conc; i++)
        curl_multi_remove_handle(ms->m, ms->x[i].h);
    return rc;
}

static void report(const char *mode, const char *wire, int n, double *f, double *t)
{
    qsort(f, (size_t)n, sizeof *f, cmp);
    qsort(t, (size_t)n, sizeof *t, cmp);
    printf("latency mode=%s wire=%s n=%d first_p50_us=%.1f first_p90_us=%.1f "
           "first_p99_us=%.1f total_p50_us=%.1f total_p90_us=%.1f total_p99_us=%.1f\n",
           mode, wire, n, pct(f, n, .5), pct(f, n, .9), pct(f, n, .99), pct(t, n, .5),
           pct(t, n, .9), pct(t, n, .99));
}

/* MODE proxy: the mock straight and through the proxy, in turn (one request, or one
 * round of CONC, of each). */
static int proxy_main(const char *url, const char *wire_name, ah_wire wire, int n, int warm,
                      const char *purl, int conc)
{
    if (conc < 1)
        conc = 1;
    int rounds = (n + conc - 1) / conc, wrounds = (warm + conc - 1) / conc;
    int all = (rounds + wrounds) * conc;
    double *df = calloc((size_t)all, sizeof *df), *dt = calloc((size_t)all, sizeof *dt);
    double *pf = calloc((size_t)all, sizeof *pf), *pt = calloc((size_t)all, sizeof *pt);
    int rc = !df || !dt || !pf || !pt;
    if (conc == 1) {
        curl_ctx d, p;
        memset(&d, 0, sizeof d);
        memset(&p, 0, sizeof p);
        rc = rc || curl_open(&d, url, wire, 1) || curl_open(&p, purl, wire, 1);
        for (int i = 0; i < all && rc == 0; i++) {
            rc = curl_one(&d, i, &df[i], &dt[i]);
            if (rc == 0)
                rc = curl_one(&p, i, &pf[i], &pt[i]);
        }
        curl_close(&d);
        curl_close(&p);
    } else {
        multi_side d = {0}, p = {0};
        rc = rc || multi_open(&d, url, wire, conc) || multi_open(&p, purl, wire, conc);
        for (int r = 0; r < rounds + wrounds && rc == 0; r++) {
            rc = multi_round(&d, r, df + r * conc, dt + r * conc);
            if (rc == 0)
                rc = multi_round(&p, r, pf + r * conc, pt + r * conc);
        }
        multi_close(&d);
        multi_close(&p);
    }
    int skip = wrounds * conc, counted = rounds * conc;
    if (rc == 0) {
        report("direct", wire_name, counted, df + skip, dt + skip);
        report("proxy", wire_name, counted, pf + skip, pt + skip);
    }
    free(df);
    free(dt);
    free(pf);
    free(pt);
    return rc;
}

/* ---- MODE rate: open loop at a fixed rate (vegeta's way) ---- */
#ifdef __linux__
enum {
    RATE_CAP = 4096,        /* requests in flight at most, per side; beyond: dropped */
    RATE_LATE_US = 1000,    /* sent this long after its slot: late */
    RATE_TIMEOUT_MS = 1000, /* a request's limit: vegeta's -timeout=1s in TensorZero's run */
};
#define RATE_WARM_US 500000.0 /* each side's warm-up, not counted */
#define RATE_PIDS 4           /* NAME=PID arguments whose CPU is reported */

static const char *const LAT_KEYS[] = {"mean", "p50", "p90", "p95", "p99", "max"};
enum { LAT_N = sizeof LAT_KEYS / sizeof *LAT_KEYS };

typedef struct rate_phase {
    double *f, *t; /* the answered requests' times from their scheduled send, µs */
    int n, sent, errors, dropped, late;
    int timeouts;   /* of errors: past the 1 s limit */
    double err_max; /* of the other errors (a status not 200, a reset): the longest, µs */
    double t0, end; /* the first slot; the last answer */
    double cpu[RATE_PIDS + 1]; /* % of one core over the phase: self, then the pids */
} rate_phase;

typedef struct rate_req {
    curl_ctx x;
    double due; /* its scheduled send time */
    int side;
    rate_phase *ph;
} rate_req;

typedef struct rate_side {
    const char *base;
    rate_req *idle[RATE_CAP];
    int nidle, made;
} rate_side;

typedef struct rate_run {
    CURLM *m;
    int ep, tfd;
    double curl_due; /* curl's timer, < 0 when none */
    ah_wire wire;
    int stream, inflight, npid;
    rate_side side[2];
    rate_req *all[2 * RATE_CAP];
    int made;
    const char *pid_name[RATE_PIDS];
    int pid[RATE_PIDS];
} rate_run;

static int rate_on_socket(CURL *e, curl_socket_t fd, int what, void *ud, void *sp)
{
    (void)e;
    (void)sp;
    rate_run *r = ud;
    if (what == CURL_POLL_REMOVE) {
        epoll_ctl(r->ep, EPOLL_CTL_DEL, fd, NULL); /* fails when curl closed it first */
        return 0;
    }
    struct epoll_event ev = {0};
    ev.events = (what & CURL_POLL_IN ? (unsigned)EPOLLIN : 0u) |
                (what & CURL_POLL_OUT ? (unsigned)EPOLLOUT : 0u);
    ev.data.fd = fd;
    if (epoll_ctl(r->ep, EPOLL_CTL_MOD, fd, &ev) != 0 && errno == ENOENT)
        epoll_ctl(r->ep, EPOLL_CTL_ADD, fd, &ev);
    return 0;
}

static int rate_on_timer(CURLM *m, long ms, void *ud)
{
    (void)m;
    rate_run *r = ud;
    r->curl_due = ms < 0 ? -1 : now_us() + (double)ms * 1e3;
    return 0;
}

static void rate_action(rate_run *r, curl_socket_t fd, int mask)
{
    int running;
    curl_multi_socket_action(r->m, fd, mask, &running);
}

/* The finished transfers: their times, their handles back to their side's idle list. */
static void rate_reap(rate_run *r)
{
    CURLMsg *msg;
    int left;
    while ((msg = curl_multi_info_read(r->m, &left))) {
        if (msg->msg != CURLMSG_DONE)
            continue;
        CURL *h = msg->easy_handle;
        CURLcode res = msg->data.result;
        void *pv = NULL;
        long status = 0;
        curl_easy_getinfo(h, CURLINFO_PRIVATE, &pv);
        curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &status);
        rate_req *q = pv;
        rate_phase *ph = q->ph;
        double t = now_us();
        if (res != CURLE_OK || status != 200 || q->x.s.first == 0) {
            if (res == CURLE_OPERATION_TIMEDOUT)
                ph->timeouts++;
            else if (t - q->due > ph->err_max)
                ph->err_max = t - q->due;
            if (ph->errors++ < 3)
                fprintf(stderr, "latency_bench: rate request: %s, HTTP %ld%s\n",
                        curl_easy_strerror(res), status, q->x.s.first == 0 ? ", no text" : "");
        } else {
            ph->f[ph->n] = q->x.s.first - q->due;
            ph->t[ph->n++] = t - q->due;
        }
        ph->end = t;
        curl_multi_remove_handle(r->m, h); /* msg is gone from here on */
        rate_side *sd = &r->side[q->side];
        sd->idle[sd->nidle++] = q;
        r->inflight--;
    }
}

/* One request on an idle handle of side si (a new one when all are busy, up to the cap). */
static void rate_send(rate_run *r, int si, double due, double now, rate_phase *ph)
{
    rate_side *sd = &r->side[si];
    rate_req *q = NULL;
    if (sd->nidle > 0) {
        q = sd->idle[--sd->nidle];
    } else if (sd->made < RATE_CAP && (q = calloc(1, sizeof *q))) {
        r->all[r->made++] = q;
        sd->made++;
        q->side = si;
        if (curl_open(&q->x, sd->base, r->wire, r->stream)) {
            sd->idle[sd->nidle++] = q; /* a handle that fails stays: an error per use */
            q = NULL;
        } else {
            curl_easy_setopt(q->x.h, CURLOPT_PRIVATE, q);
            curl_easy_setopt(q->x.h, CURLOPT_TIMEOUT_MS, (long)RATE_TIMEOUT_MS);
        }
    }
    if (!q) {
        ph->dropped++;
        return;
    }
    q->x.s.first = 0;
    q->x.s.carried = 0;
    q->due = due;
    q->ph = ph;
    ph->sent++;
    ph->late += now - due > RATE_LATE_US;
    if (curl_multi_add_handle(r->m, q->x.h) != CURLM_OK) {
        ph->errors++;
        sd->idle[sd->nidle++] = q;
        return;
    }
    r->inflight++;
}

/* Until `due` (µs, CLOCK_MONOTONIC) or a socket's event, to the microsecond (timerfd:
 * curl_multi_poll counts in milliseconds, five slots at 5000/s). */
static void rate_wait(rate_run *r, double due)
{
    int timeout = 0;
    if (due > now_us()) {
        long long ns = (long long)(due * 1e3);
        struct itimerspec its = {{0, 0}, {(time_t)(ns / 1000000000), (long)(ns % 1000000000)}};
        timerfd_settime(r->tfd, TFD_TIMER_ABSTIME, &its, NULL);
        timeout = -1;
    }
    struct epoll_event ev[64];
    int k = epoll_wait(r->ep, ev, 64, timeout);
    for (int i = 0; i < k; i++) {
        if (ev[i].data.fd == r->tfd) {
            uint64_t n;
            if (read(r->tfd, &n, sizeof n) < 0 && errno != EAGAIN)
                perror("latency_bench: timerfd");
            continue;
        }
        unsigned e = ev[i].events;
        rate_action(r, ev[i].data.fd,
                    (e & EPOLLIN ? CURL_CSELECT_IN : 0) | (e & EPOLLOUT ? CURL_CSELECT_OUT : 0) |
                        (e & (EPOLLERR | EPOLLHUP) ? CURL_CSELECT_ERR : 0));
    }
    if (r->curl_due >= 0 && now_us() >= r->curl_due) {
        r->curl_due = -1;
        rate_action(r, CURL_SOCKET_TIMEOUT, 0);
    }
}

/* utime + stime of a process (pid 0: this one), in clock ticks; -1 if unreadable. */
static double cpu_ticks(int pid)
{
    char path[64], buf[1024];
    snprintf(path, sizeof path, pid ? "/proc/%d/stat" : "/proc/self/stat", pid);
    FILE *fp = fopen(path, "r");
    size_t n = fp ? fread(buf, 1, sizeof buf - 1, fp) : 0;
    if (fp)
        fclose(fp);
    buf[n] = 0;
    char *p = strrchr(buf, ')'); /* the name may hold spaces */
    unsigned long ut, st;
    /* after ") ": state ppid pgrp session tty tpgid flags minflt cminflt majflt cmajflt
     * utime stime */
    if (!p || sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %lu %lu", &ut, &st) != 2)
        return -1;
    return (double)ut + (double)st;
}

static void rate_cpu(const rate_run *r, double *ticks)
{
    ticks[0] = cpu_ticks(0);
    for (int i = 0; i < r->npid; i++)
        ticks[i + 1] = cpu_ticks(r->pid[i]);
}

/* One phase: rate requests a second for `us` µs on side si, then until the last answers. */
static int rate_phase_run(rate_run *r, int si, double rate, double us, rate_phase *ph)
{
    int total = (int)(rate * us / 1e6 + 0.5);
    memset(ph, 0, sizeof *ph);
    ph->f = calloc((size_t)total + 1, sizeof *ph->f);
    ph->t = calloc((size_t)total + 1, sizeof *ph->t);
    if (!ph->f || !ph->t)
        return 1;
    double c0[RATE_PIDS + 1], c1[RATE_PIDS + 1];
    rate_cpu(r, c0);
    double step = 1e6 / rate, t0 = now_us() + 1000;
    ph->t0 = ph->end = t0;
    int k = 0;
    while (k < total || r->inflight > 0) {
        double now = now_us();
        int added = 0;
        for (; k < total && t0 + k * step <= now; k++, added++)
            rate_send(r, si, t0 + k * step, now, ph);
        if (added)
            rate_action(r, CURL_SOCKET_TIMEOUT, 0); /* starts them */
        rate_reap(r);
        double due = k < total ? t0 + k * step : now + 1e5;
        if (r->curl_due >= 0 && r->curl_due < due)
            due = r->curl_due;
        rate_wait(r, due);
        rate_reap(r);
    }
    rate_cpu(r, c1);
    double secs = (now_us() - t0) / 1e6, tck = (double)sysconf(_SC_CLK_TCK);
    for (int i = 0; i <= r->npid; i++)
        ph->cpu[i] = c0[i] < 0 || c1[i] < 0 ? -1 : (c1[i] - c0[i]) / tck / secs * 100;
    return 0;
}

/* mean, then LAT_KEYS' percentiles and max of v (sorted here); zeros when n is 0. */
static void lat_sum(double *v, int n, double *out)
{
    memset(out, 0, LAT_N * sizeof *out);
    if (n <= 0)
        return;
    qsort(v, (size_t)n, sizeof *v, cmp);
    for (int i = 0; i < n; i++)
        out[0] += v[i] / n;
    out[1] = pct(v, n, .5);
    out[2] = pct(v, n, .9);
    out[3] = pct(v, n, .95);
    out[4] = pct(v, n, .99);
    out[5] = v[n - 1];
}

typedef struct rate_sum {
    double rps, f[LAT_N], t[LAT_N], err_max;
    int n, sent, errors, dropped, late, timeouts;
} rate_sum;

static void rate_print(const rate_run *r, const char *phase, const char *mode, const char *wire,
                       double rate, const rate_sum *s, const double *cpu)
{
    printf("rate phase=%s mode=%s wire=%s stream=%d rate=%.0f achieved_rps=%.0f n=%d sent=%d "
           "errors=%d dropped=%d late=%d timeouts=%d error_max_us=%.1f",
           phase, mode, wire, r->stream, rate, s->rps, s->n, s->sent, s->errors, s->dropped,
           s->late, s->timeouts, s->err_max);
    for (int k = 0; k < LAT_N; k++)
        printf(" first_%s_us=%.1f", LAT_KEYS[k], s->f[k]);
    for (int k = 0; k < LAT_N; k++)
        printf(" total_%s_us=%.1f", LAT_KEYS[k], s->t[k]);
    for (int i = 0; cpu && i <= r->npid; i++)
        printf(" cpu_%s_pct=%.1f", i ? r->pid_name[i - 1] : "client", cpu[i]);
    printf("\n");
}

/* The phases' answered requests pooled (phases ph[0], ph[2], ...: stride 2). */
static int rate_pool(const rate_phase *ph, int count, rate_sum *s)
{
    memset(s, 0, sizeof *s);
    int all = 0;
    double secs = 0;
    for (int i = 0; i < count; i++)
        all += ph[2 * i].n;
    double *f = calloc((size_t)all + 1, sizeof *f), *t = calloc((size_t)all + 1, sizeof *t);
    if (!f || !t) {
        free(f);
        free(t);
        return 1;
    }
    for (int i = 0; i < count; i++) {
        const rate_phase *p = &ph[2 * i];
        memcpy(f + s->n, p->f, (size_t)p->n * sizeof *f);
        memcpy(t + s->n, p->t, (size_t)p->n * sizeof *t);
        s->n += p->n;
        s->sent += p->sent;
        s->errors += p->errors;
        s->dropped += p->dropped;
        s->late += p->late;
        s->timeouts += p->timeouts;
        if (p->err_max > s->err_max)
            s->err_max = p->err_max;
        secs += (p->end - p->t0) / 1e6;
    }
    s->rps = secs > 0 ? s->n / secs : 0;
    lat_sum(f, s->n, s->f);
    lat_sum(t, s->n, s->t);
    free(f);
    free(t);
    return 0;
}

/* MODE rate: PHASES pairs of a direct phase then a proxied one, SECONDS each, after a
 * warm-up of each; prints each phase, each mode pooled, and added = proxy - direct per pair
 * with its median over the pairs. */
static int rate_main(rate_run *r, const char *wire_name, double rate, double secs, int phases)
{
    int rc = 0;
    rate_phase warm[2], *ph = calloc(2 * (size_t)phases, sizeof *ph);
    rate_sum *ps = calloc(2 * (size_t)phases, sizeof *ps);
    double *add = calloc((size_t)phases, sizeof *add);
    if (!ph || !ps || !add)
        rc = 1;
    for (int si = 0; si < 2 && rc == 0; si++) {
        rc = rate_phase_run(r, si, rate, RATE_WARM_US, &warm[si]);
        free(warm[si].f);
        free(warm[si].t);
    }
    for (int i = 0; i < 2 * phases && rc == 0; i++) {
        rc = rate_phase_run(r, i % 2, rate, secs * 1e6, &ph[i]);
        if (rc == 0)
            rc = rate_pool(&ph[i], 1, &ps[i]);
        char name[16];
        snprintf(name, sizeof name, "%d", i / 2 + 1);
        if (rc == 0)
            rate_print(r, name, i % 2 ? "proxy" : "direct", wire_name, rate, &ps[i], ph[i].cpu);
        fflush(stdout);
    }
    rate_sum pool[2], med = {0};
    for (int si = 0; si < 2 && rc == 0; si++) {
        rc = rate_pool(&ph[si], phases, &pool[si]);
        if (rc == 0)
            rate_print(r, "all", si ? "proxy" : "direct", wire_name, rate, &pool[si], NULL);
    }
    /* added: the median over the pairs of proxy - direct, statistic by statistic */
    for (int k = 0; k < 2 * LAT_N + 1 && rc == 0; k++) {
        for (int i = 0; i < phases; i++) {
            const rate_sum *d = &ps[2 * i], *p = &ps[2 * i + 1];
            add[i] = k == 2 * LAT_N ? p->rps - d->rps
                     : k < LAT_N    ? p->f[k] - d->f[k]
                                    : p->t[k - LAT_N] - d->t[k - LAT_N];
        }
        qsort(add, (size_t)phases, sizeof *add, cmp);
        double m = (add[(phases - 1) / 2] + add[phases / 2]) / 2 + 0.0; /* + 0.0: no "-0" */
        if (k == 2 * LAT_N)
            med.rps = m;
        else if (k < LAT_N)
            med.f[k] = m;
        else
            med.t[k - LAT_N] = m;
    }
    if (rc == 0) {
        med.n = pool[1].n - pool[0].n;
        med.errors = pool[1].errors - pool[0].errors;
        med.dropped = pool[1].dropped - pool[0].dropped;
        med.late = pool[1].late - pool[0].late;
        med.timeouts = pool[1].timeouts - pool[0].timeouts;
        med.sent = pool[1].sent - pool[0].sent;
        rate_print(r, "median", "added", wire_name, rate, &med, NULL);
    }
    for (int i = 0; ph && i < 2 * phases; i++) {
        free(ph[i].f);
        free(ph[i].t);
    }
    free(ph);
    free(ps);
    free(add);
    return rc;
}

static int rate_cmd(int argc, char **argv)
{
    int wire = ah_wire_from_name(argv[3]);
    double rate = atof(argv[4]), secs = atof(argv[5]);
    int phases = atoi(argv[6]);
    int stream = argc <= 8 || strcmp(argv[8], "nostream") != 0;
    if (wire < 0 || rate <= 0 || secs <= 0 || phases <= 0 ||
        (argc > 8 && stream && strcmp(argv[8], "stream") != 0)) {
        fprintf(stderr, "latency_bench: rate URL WIRE RATE SECONDS PHASES PROXY_URL "
                        "[stream|nostream] [NAME=PID...]\n");
        return 2;
    }
    static rate_run r; /* big (the idle lists): not on the stack */
    r.wire = (ah_wire)wire;
    r.stream = stream;
    r.side[0].base = argv[2];
    r.side[1].base = argv[7];
    r.curl_due = -1;
    for (int i = 9; i < argc && r.npid < RATE_PIDS; i++) {
        char *eq = strchr(argv[i], '=');
        if (eq) {
            *eq = 0;
            r.pid_name[r.npid] = argv[i];
            r.pid[r.npid++] = atoi(eq + 1);
        }
    }
    prctl(PR_SET_TIMERSLACK, 1UL); /* the timer to the microsecond, not 50 µs late */
    r.m = curl_multi_init();
    r.ep = epoll_create1(EPOLL_CLOEXEC);
    r.tfd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
    int rc = !r.m || r.ep < 0 || r.tfd < 0;
    if (rc == 0) {
        struct epoll_event ev = {0};
        ev.events = EPOLLIN;
        ev.data.fd = r.tfd;
        epoll_ctl(r.ep, EPOLL_CTL_ADD, r.tfd, &ev);
        curl_multi_setopt(r.m, CURLMOPT_SOCKETFUNCTION, rate_on_socket);
        curl_multi_setopt(r.m, CURLMOPT_SOCKETDATA, &r);
        curl_multi_setopt(r.m, CURLMOPT_TIMERFUNCTION, rate_on_timer);
        curl_multi_setopt(r.m, CURLMOPT_TIMERDATA, &r);
        /* keep every connection: the default cache follows the handles added at the time */
        curl_multi_setopt(r.m, CURLMOPT_MAXCONNECTS, (long)(2 * RATE_CAP));
        rc = rate_main(&r, argv[3], rate, secs, phases);
    }
    for (int i = 0; i < r.made; i++) {
        curl_close(&r.all[i]->x);
        free(r.all[i]);
    }
    curl_multi_cleanup(r.m);
    if (r.ep >= 0)
        close(r.ep);
    if (r.tfd >= 0)
        close(r.tfd);
    return rc;
}

/* MODE serve: an upstream that cannot be the bottleneck of a rate run (the mock runs a
 * thread per connection, and a proxy that falls behind opens more of them). It asks the
 * mock at URL once for each canned answer (the three wires, streamed and not, for the
 * bodies above), then listens on 127.0.0.1 (an ephemeral port; its URL on stdout) and
 * answers every request with the stored bytes of its path and "stream":true or not, with
 * a Content-Length: one thread, epoll, kept-alive connections. Until SIGTERM. */
typedef struct canned {
    char *body;
    size_t len;
    char ctype[128];
} canned;

static size_t canned_write(char *p, size_t size, size_t nmemb, void *ud)
{
    canned *c = ud;
    size_t n = size * nmemb;
    char *b = realloc(c->body, c->len + n + 1);
    if (!b)
        return 0;
    memcpy(b + c->len, p, n);
    c->body = b;
    c->len += n;
    return n;
}

static int canned_fetch(const char *base, ah_wire wire, int stream, canned *c)
{
    curl_ctx x;
    if (curl_open(&x, base, wire, stream))
        return 1;
    curl_easy_setopt(x.h, CURLOPT_WRITEFUNCTION, canned_write);
    curl_easy_setopt(x.h, CURLOPT_WRITEDATA, c);
    long code = 0;
    char *ct = NULL;
    int rc = curl_easy_perform(x.h) != CURLE_OK;
    curl_easy_getinfo(x.h, CURLINFO_RESPONSE_CODE, &code);
    curl_easy_getinfo(x.h, CURLINFO_CONTENT_TYPE, &ct);
    snprintf(c->ctype, sizeof c->ctype, "%s", ct ? ct : "application/json");
    curl_close(&x);
    if (rc || code != 200 || !c->len) {
        fprintf(stderr, "latency_bench serve: %s %s from %s: HTTP %ld\n", ah_wire_path(wire),
                stream ? "stream" : "nostream", base, code);
        return 1;
    }
    return 0;
}

typedef struct sconn {
    int fd;
    char *in;
    size_t len, cap;
} sconn;

/* One complete request at the start of c->in: its length, else 0. */
static size_t serve_request_len(const sconn *c)
{
    const char *end = memmem(c->in, c->len, "\r\n\r\n", 4);
    if (!end)
        return 0;
    size_t head = (size_t)(end - c->in) + 4, body = 0;
    for (const char *l = c->in; l < end; l = memchr(l, '\n', (size_t)(end - l)) + 1) {
        if (strncasecmp(l, "content-length:", 15) == 0)
            body = strtoul(l + 15, NULL, 10);
        if (!memchr(l, '\n', (size_t)(end - l)))
            break;
    }
    return c->len >= head + body ? head + body : 0;
}

static int serve_answer(sconn *c, size_t n, canned *ans)
{
    const char *p = c->in;
    ah_wire w = AH_WIRE_ANTHROPIC;
    if (n > 30 && memmem(p, 64, "/v1/chat/completions", 20))
        w = AH_WIRE_OPENAI;
    else if (n > 30 && memmem(p, 64, "/v1/responses", 13))
        w = AH_WIRE_RESPONSES;
    int stream = memmem(p, n, "\"stream\":true", 13) != NULL;
    canned *a = &ans[(int)w * 2 + stream];
    char head[256];
    int hl = snprintf(head, sizeof head,
                      "HTTP/1.1 200 OK\r\ncontent-type: %s\r\ncontent-length: %zu\r\n\r\n",
                      a->ctype, a->len);
    struct iovec iov[2] = {{head, (size_t)hl}, {a->body, a->len}};
    size_t want = (size_t)hl + a->len;
    ssize_t sent = writev(c->fd, iov, 2);
    /* a short write of a few KB to loopback: finish it blocking (never happens here) */
    while (sent >= 0 && (size_t)sent < want) {
        size_t off = (size_t)sent;
        const char *rest = off < (size_t)hl ? head + off : a->body + (off - (size_t)hl);
        size_t left = off < (size_t)hl ? (size_t)hl - off : want - off;
        ssize_t k = send(c->fd, rest, left, MSG_NOSIGNAL);
        if (k < 0 && errno == EAGAIN)
            continue;
        if (k < 0)
            return 1;
        sent += k;
    }
    memmove(c->in, c->in + n, c->len - n);
    c->len -= n;
    return sent < 0;
}

static volatile sig_atomic_t serve_stop;
static void serve_on_term(int sig)
{
    (void)sig;
    serve_stop = 1;
}

static int serve_cmd(const char *mock_url)
{
    canned ans[6];
    memset(ans, 0, sizeof ans);
    for (int w = 0; w < 3; w++)
        for (int s = 0; s < 2; s++)
            if (canned_fetch(mock_url, (ah_wire)w, s, &ans[w * 2 + s]))
                return 1;
    int lfd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0), one = 1;
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t al = sizeof a;
    setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (lfd < 0 || bind(lfd, (struct sockaddr *)&a, sizeof a) || listen(lfd, 4096) ||
        getsockname(lfd, (struct sockaddr *)&a, &al)) {
        perror("latency_bench serve: listen");
        return 1;
    }
    printf("http://127.0.0.1:%d\n", ntohs(a.sin_port));
    fflush(stdout);
    signal(SIGTERM, serve_on_term);
    signal(SIGPIPE, SIG_IGN);
    int ep = epoll_create1(0);
    struct epoll_event ev = {.events = EPOLLIN, .data.ptr = NULL};
    epoll_ctl(ep, EPOLL_CTL_ADD, lfd, &ev);
    struct epoll_event evs[256];
    while (!serve_stop) {
        int k = epoll_wait(ep, evs, 256, 200);
        for (int i = 0; i < k; i++) {
            sconn *c = evs[i].data.ptr;
            if (!c) { /* the listener */
                int fd;
                while ((fd = accept4(lfd, NULL, NULL, SOCK_NONBLOCK)) >= 0) {
                    sconn *n = calloc(1, sizeof *n);
                    if (!n) {
                        close(fd);
                        continue;
                    }
                    n->fd = fd;
                    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
                    struct epoll_event ce = {.events = EPOLLIN, .data.ptr = n};
                    epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ce);
                }
                continue;
            }
            int dead = 0;
            for (;;) {
                if (c->cap - c->len < 4096) {
                    size_t cap = c->cap ? c->cap * 2 : 8192;
                    char *in = realloc(c->in, cap);
                    if (!in) {
                        dead = 1;
                        break;
                    }
                    c->in = in;
                    c->cap = cap;
                }
                ssize_t r = recv(c->fd, c->in + c->len, c->cap - c->len, 0);
                if (r > 0) {
                    c->len += (size_t)r;
                    size_t n;
                    while (!dead && (n = serve_request_len(c)) > 0)
                        dead = serve_answer(c, n, ans);
                    if (dead)
                        break;
                    continue;
                }
                dead = r == 0 || errno != EAGAIN;
                break;
            }
            if (dead) {
                close(c->fd); /* closing takes it out of the epoll set */
                free(c->in);
                free(c);
            }
        }
    }
    close(ep);
    close(lfd);
    for (int i = 0; i < 6; i++)
        free(ans[i].body);
    return 0;
}
#else
static int serve_cmd(const char *mock_url)
{
    (void)mock_url;
    fprintf(stderr, "latency_bench: MODE serve needs Linux (epoll)\n");
    return 2;
}

static int rate_cmd(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    fprintf(stderr, "latency_bench: MODE rate needs Linux (epoll, timerfd)\n");
    return 2;
}
#endif

int main(int argc, char **argv)
{
    if (argc == 3 && strcmp(argv[1], "serve") == 0) {
        curl_global_init(CURL_GLOBAL_DEFAULT);
        int rc = serve_cmd(argv[2]);
        curl_global_cleanup();
        return rc;
    }
    if (argc < 5) {
        fprintf(stderr, "usage: latency_bench agenthost|curl|both URL WIRE N [WARMUP]\n"
                        "       latency_bench proxy URL WIRE N WARMUP PROXY_URL [CONC]\n"
                        "       latency_bench rate URL WIRE RATE SECONDS PHASES PROXY_URL "
                        "[stream|nostream] [NAME=PID...]\n"
                        "       latency_bench serve MOCK_URL\n");
        return 2;
    }
    if (strcmp(argv[1], "rate") == 0) {
        if (argc < 8) {
            fprintf(stderr, "latency_bench: rate URL WIRE RATE SECONDS PHASES PROXY_URL "
                            "[stream|nostream] [NAME=PID...]\n");
            return 2;
        }
        curl_global_init(CURL_GLOBAL_DEFAULT);
        int rc = rate_cmd(argc, argv);
        curl_global_cleanup();
        return rc;
    }
    if (strcmp(argv[1], "proxy") == 0) {
        int pw = ah_wire_from_name(argv[3]);
        if (argc < 7 || pw < 0 || atoi(argv[4]) <= 0) {
            fprintf(stderr, "latency_bench: proxy URL WIRE N WARMUP PROXY_URL [CONC]\n");
            return 2;
        }
        curl_global_init(CURL_GLOBAL_DEFAULT);
        int rc = proxy_main(argv[2], argv[3], (ah_wire)pw, atoi(argv[4]), atoi(argv[5]),
                            argv[6], argc > 7 ? atoi(argv[7]) : 1);
        curl_global_cleanup();
        return rc;
    }
    const char *mode = argv[1], *url = argv[2];
    int wire = ah_wire_from_name(argv[3]);
    int n = atoi(argv[4]), warm = argc > 5 ? atoi(argv[5]) : 20;
    int use_ah = strcmp(mode, "agenthost") == 0 || strcmp(mode, "both") == 0;
    int use_curl = strcmp(mode, "curl") == 0 || strcmp(mode, "both") == 0;
    if (wire < 0 || n <= 0 || warm < 0 || (!use_ah && !use_curl)) {
        fprintf(stderr, "latency_bench: bad MODE '%s', WIRE '%s' or N\n", mode, argv[3]);
        return 2;
    }
    int all = n + warm;
    double *af = calloc((size_t)all, sizeof *af), *at = calloc((size_t)all, sizeof *at);
    double *cf = calloc((size_t)all, sizeof *cf), *ct = calloc((size_t)all, sizeof *ct);
    if (!af || !at || !cf || !ct)
        return 1;
    ah_ctx ax = {0};
    curl_ctx cx;
    memset(&cx, 0, sizeof cx);
    int rc = (use_ah && ah_open(&ax, url, (ah_wire)wire)) ||
             (use_curl && curl_open(&cx, url, (ah_wire)wire, 1));
    /* both: one of each in turn, so that a busy moment of the machine hits both sides */
    for (int i = 0; i < all && rc == 0; i++) {
        if (use_ah)
            rc = ah_one(&ax, i, &af[i], &at[i]);
        if (rc == 0 && use_curl)
            rc = curl_one(&cx, i, &cf[i], &ct[i]);
    }
    if (rc == 0 && use_ah)
        report("agenthost", argv[3], n, af + warm, at + warm);
    if (rc == 0 && use_curl)
        report("curl", argv[3], n, cf + warm, ct + warm);
    if (use_ah)
        ah_close(&ax);
    if (use_curl)
        curl_close(&cx);
    free(af);
    free(at);
    free(cf);
    free(ct);
    return rc;
}
