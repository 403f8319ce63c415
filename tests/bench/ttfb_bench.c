/* ttfb_bench.c URL [N [BODY_BYTES]] - time to first byte of N sequential POSTs through agenthost's
 * transport (ah_call on the real clock): from ah_call_start to the response head, and to
 * the end. Prints the median and the 90th percentile in ms. Used against a stock server
 * (tests/bench/ttfb_server.py) to see whether the request leaves in one write. */
#include "agenthost.h"
#include "agenthost/call.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

static double head_at;

static int on_open(void *ud, int status, const ah_header *h, size_t n, ah_error *err)
{
    (void)ud, (void)status, (void)h, (void)n, (void)err;
    head_at = now_ms();
    return 0;
}

static int cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: ttfb_bench URL [N]\n");
        return 2;
    }
    int n = argc > 2 ? atoi(argv[2]) : 50;
    double *ttfb = calloc((size_t)n, sizeof *ttfb), *total = calloc((size_t)n, sizeof *total);
    ah_loop *loop = ah_loop_new(NULL, NULL);
    size_t blen = argc > 3 ? (size_t)atol(argv[3]) : 2048;
    if (blen < 16)
        blen = 16;
    char *body = malloc(blen + 1);
    memset(body, 'x', blen);
    memcpy(body, "{\"p\":\"", 6);
    memcpy(body + blen - 2, "\"}", 2);
    body[blen] = '\0';
    const ah_header hd[] = {{"content-type", "application/json"}};
    int ok = 0;
    for (int i = 0; i < n; i++) {
        ah_call_config cfg = {0};
        cfg.loop = loop;
        cfg.request.url = argv[1];
        cfg.request.headers = hd;
        cfg.request.n_headers = 1;
        cfg.request.body = body;
        cfg.request.body_len = strlen(body);
        cfg.stream.on_open = on_open;
        ah_call *c = NULL;
        if (ah_call_new(&cfg, &c, NULL, 0) != AH_OK)
            return 1;
        double t0 = now_ms();
        head_at = 0;
        ah_call_state s = ah_call_run(c);
        double t1 = now_ms();
        ok += s == AH_CALL_DONE;
        ttfb[i] = head_at - t0;
        total[i] = t1 - t0;
        ah_call_free(c);
    }
    qsort(ttfb, (size_t)n, sizeof *ttfb, cmp);
    qsort(total, (size_t)n, sizeof *total, cmp);
    printf("%d/%d done; time to first byte: median %.2f ms, p90 %.2f ms; whole request: "
           "median %.2f ms\n",
           ok, n, ttfb[n / 2], ttfb[n * 9 / 10], total[n / 2]);
    ah_loop_free(loop);
    free(ttfb);
    free(total);
    free(body);
    return ok == n ? 0 : 1;
}
