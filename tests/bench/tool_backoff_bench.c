/* tool_backoff_bench.c - does a tool's retry backoff stall a stream on the same loop?
 *
 *   tool_backoff_bench [WAIT_MS]   (default 200)
 *
 * A loopback server (a thread here) streams one small SSE event every 5 ms for 1.5 s. An
 * LLM call on the loop reads it; once its first bytes arrived, a tool call whose first
 * attempt fails (transient) runs through the blocking driver ah_tool_call_run with a
 * WAIT_MS backoff ("none" jitter) on the same loop. Prints how many times the stream's
 * consumer ran while the tool call was in progress and the longest gap between two of
 * its runs there:
 *
 *   tool_backoff_bench wait_ms=200 tool_ms=T stream_callbacks_during=N max_gap_ms=G
 *                      stream_callbacks_total=M
 *
 * With the retry machine's WAIT as a loop timer the stream keeps being read during the
 * backoff (N ~ WAIT_MS / 5, G ~ 5). Built with -DOLD_TOOL_API against the tree before it
 * (the tool policy's `wait` hook and a nanosleep in the driver), N was 0 and G ~ WAIT_MS:
 * see docs/transport-and-retry.md.
 */
#define _DEFAULT_SOURCE
#include "agenthost.h"
#include "agenthost/call.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

enum { EVENT_EVERY_MS = 5, STREAM_MS = 1500, MAX_CB = 4096 };

static int listen_fd = -1;

static void nap_ms(int ms) /* the server thread's pacing: not the library */
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

static void *server(void *arg)
{
    (void)arg;
    int fd = accept(listen_fd, NULL, NULL);
    if (fd < 0)
        return NULL;
    char req[4096];
    ssize_t got = 0, n;
    while (got < (ssize_t)sizeof req - 1 &&
           (n = read(fd, req + got, sizeof req - 1 - got)) > 0) {
        got += n;
        req[got] = '\0';
        char *end = strstr(req, "\r\n\r\n");
        if (end) {
            const char *cl = strstr(req, "Content-Length: ");
            long body = cl ? strtol(cl + 16, NULL, 10) : 0;
            if (got - (end + 4 - req) >= body)
                break;
        }
    }
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    const char head[] = "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
                        "Connection: close\r\n\r\n";
    if (write(fd, head, sizeof head - 1) < 0)
        goto out;
    for (int t = 0; t < STREAM_MS; t += EVENT_EVERY_MS) {
        const char ev[] = "event: ping\ndata: {}\n\n";
        if (write(fd, ev, sizeof ev - 1) < 0)
            break;
        nap_ms(EVENT_EVERY_MS);
    }
out:
    close(fd);
    return NULL;
}

typedef struct stream {
    ah_loop *loop;
    int n;
    int64_t at[MAX_CB];
} stream;

static int on_open(void *ud, int status, const ah_header *h, size_t n, ah_error *err)
{
    (void)ud, (void)h, (void)n, (void)err;
    return status == 200 ? 0 : 1;
}

static int on_data(void *ud, const char *buf, size_t len, ah_error *err)
{
    stream *s = ud;
    (void)buf, (void)len, (void)err;
    if (s->n < MAX_CB)
        s->at[s->n++] = ah_loop_now_ms(s->loop);
    return 0;
}

static void flaky_once(void *ud, ah_tool_call *c)
{
    (void)ud;
    if (ah_tool_call_attempts(c) == 1) {
        ah_error e;
        ah_error_set(&e, AH_EK_TRANSIENT, 0, "try again");
        ah_tool_call_body_failed(c, &e);
    } else {
        ah_tool_call_body_ok(c, "\"done\"");
    }
}

#ifdef OLD_TOOL_API
static int64_t g_wait_ms;
static int64_t fixed_wait(void *ud, const ah_error *err, int failed_attempt)
{
    (void)ud, (void)err, (void)failed_attempt;
    return g_wait_ms;
}
#endif

int main(int argc, char **argv)
{
    int64_t wait_ms = argc > 1 ? strtoll(argv[1], NULL, 10) : 200;
    struct sockaddr_in a;
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    listen_fd = socket(AF_INET, SOCK_STREAM, 0);
    socklen_t al = sizeof a;
    if (listen_fd < 0 || bind(listen_fd, (struct sockaddr *)&a, sizeof a) != 0 ||
        listen(listen_fd, 1) != 0 ||
        getsockname(listen_fd, (struct sockaddr *)&a, &al) != 0) {
        perror("listen");
        return 1;
    }
    pthread_t th;
    pthread_create(&th, NULL, server, NULL);
    char url[64];
    snprintf(url, sizeof url, "http://127.0.0.1:%d/v1/messages", ntohs(a.sin_port));

    ah_loop *loop = ah_loop_new(NULL, NULL);
    stream s;
    memset(&s, 0, sizeof s);
    s.loop = loop;
    ah_call_config cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.loop = loop;
    cfg.request.url = url;
    cfg.request.body = "{}";
    cfg.request.body_len = 2;
    cfg.stream.on_open = on_open;
    cfg.stream.on_data = on_data;
    cfg.stream.ud = &s;
    ah_call *call = NULL;
    char err[256];
    if (!loop || ah_call_new(&cfg, &call, err, sizeof err) != AH_OK) {
        fprintf(stderr, "call: %s\n", err);
        return 1;
    }
    ah_call_start(call);
    while (s.n == 0 && !ah_call_finished(call))
        ah_loop_run_once(loop, -1);

    /* The stream is flowing: now a tool call with one retry, on the same thread. */
    ah_policy p;
    ah_policy_init(&p);
    p.base_ms = wait_ms;
    p.cap_ms = wait_ms;
    p.jitter = AH_JITTER_NONE;
    ah_tool_policy tp;
    ah_tool_policy_init(&tp);
    tp.max_attempts = 2;
#ifdef OLD_TOOL_API
    g_wait_ms = wait_ms;
    tp.wait = fixed_wait;
#else
    tp.backoff = &p;
    tp.loop = loop;
#endif
    ah_tool_driver d;
    memset(&d, 0, sizeof d);
    d.body = flaky_once;
#ifdef OLD_TOOL_API
    ah_tool_call *tc = ah_tool_call_new(&tp, NULL, NULL, NULL, "{}");
#else
    ah_tool_call *tc = NULL;
    if (ah_tool_call_new(&tp, NULL, NULL, NULL, "{}", &tc, err, sizeof err) != AH_OK) {
        fprintf(stderr, "tool call: %s\n", err);
        return 1;
    }
#endif
    int before = s.n;
    int64_t t0 = ah_loop_now_ms(loop);
    ah_tool_outcome o = ah_tool_call_run(tc, &d);
    int64_t t1 = ah_loop_now_ms(loop);
    int during = s.n - before;
    ah_tool_call_free(tc);

    ah_call_run(call);
    /* The longest gap between the consumer's runs while the tool call was in progress
     * (from its start to the first run after it ended). */
    int64_t gap = 0, prev = t0;
    for (int i = before; i < s.n; i++) {
        if (s.at[i] - prev > gap)
            gap = s.at[i] - prev;
        prev = s.at[i];
        if (s.at[i] > t1)
            break;
    }
    printf("tool_backoff_bench wait_ms=%lld tool_ms=%lld outcome=%s "
           "stream_callbacks_during=%d "
           "max_gap_ms=%lld stream_callbacks_total=%d call=%s\n",
           (long long)wait_ms, (long long)(t1 - t0), ah_tool_outcome_name(o), during,
           (long long)gap, s.n, ah_call_state_name(ah_call_get_state(call)));
    ah_call_free(call);
    ah_loop_free(loop);
    pthread_join(th, NULL);
    close(listen_fd);
    return 0;
}
