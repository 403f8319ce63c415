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

typedef struct curl_ctx {
    CURL *h;
    struct curl_slist *hd;
    curl_state s;
    char url[512];
} curl_ctx;

static int curl_open(curl_ctx *x, const char *base, ah_wire wire)
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
        body = BODY_ANTHROPIC;
        x->s.marker = "\"text_delta\"";
    } else {
        hd = curl_slist_append(hd, "authorization: Bearer bench");
        body = wire == AH_WIRE_OPENAI ? BODY_CHAT : BODY_RESPONSES;
        x->s.marker = wire == AH_WIRE_OPENAI ? "\"delta\":{\"content\":\"Y"
                                             : "\"response.output_text.delta\"";
    }
    x->hd = hd = curl_slist_append(hd, "accept: text/event-stream");
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
        if (curl_open(&ms->x[i], base, wire))
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
        rc = rc || curl_open(&d, url, wire) || curl_open(&p, purl, wire);
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

int main(int argc, char **argv)
{
    if (argc < 5) {
        fprintf(stderr, "usage: latency_bench agenthost|curl|both URL WIRE N [WARMUP]\n"
                        "       latency_bench proxy URL WIRE N WARMUP PROXY_URL [CONC]\n");
        return 2;
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
             (use_curl && curl_open(&cx, url, (ah_wire)wire));
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
