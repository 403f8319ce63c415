/* stream_bench.c - streaming throughput of the transport + SSE parser, measured beside
 * plain curl on the same loopback stream (SPEC §9). Driven by tests/bench/run.sh.
 *
 *   stream_bench serve DELTAS       start the mock (one long Anthropic reply of DELTAS
 * text deltas for every request), print its URL, serve until stdin closes. A separate
 * process, so its CPU is not billed to the clients. stream_bench client URL         one
 * streamed request through ah_call (libcurl multi, the loop) feeding ah_sse; prints
 *                                   "client bytes=B events=E call_s=S".
 *   stream_bench startup            create and free a loop, nothing else: the process
 *                                   start-up cost (libraries, curl_global_init).
 *   stream_bench exec CMD [ARGS]    run CMD and print "exec wall_s=W cpu_s=C rss_kb=R"
 * for it, from wait4()'s rusage of the child: the same whole-process measure for our
 * client and for curl.
 */
#define _DEFAULT_SOURCE /* wait4() */
#include "agenthost.h"
#include "agenthost/mock.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static const char BODY[] =
    "{\"model\":\"mock-bench\",\"max_tokens\":64000,\"stream\":true,"
    "\"messages\":[{\"role\":\"user\",\"content\":\"stream a long answer\"}]}";

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static double tv_s(struct timeval tv)
{
    return (double)tv.tv_sec + (double)tv.tv_usec / 1e6;
}

static int serve(const char *deltas)
{
    ah_mock_config cfg;
    ah_mock_config_init(&cfg);
    cfg.text_deltas = (size_t)strtoull(deltas, NULL, 10);
    char err[256] = "";
    ah_mock *m = ah_mock_new(&cfg, err, sizeof err);
    if (!m) {
        fprintf(stderr, "stream_bench: mock: %s\n", err);
        return 1;
    }
    printf("%s\n", ah_mock_url(m));
    fflush(stdout);
    char buf[256];
    while (read(0, buf, sizeof buf) > 0) {
    }
    ah_mock_free(m);
    return 0;
}

typedef struct client_stats {
    ah_sse *sse;
    unsigned long long bytes, events;
    int sse_failed;
} client_stats;

static int on_data(void *ud, const char *buf, size_t len, ah_error *err)
{
    client_stats *s = ud;
    s->bytes += len;
    if (ah_sse_feed(s->sse, buf, len) != AH_OK) {
        s->sse_failed = 1;
        return 1;
    }
    ah_sse_event ev;
    int r;
    while ((r = ah_sse_next(s->sse, &ev)) == 1)
        s->events++;
    if (r < 0) {
        s->sse_failed = 1;
        return 1;
    }
    return 0;
}

static int client(const char *base)
{
    int rc = 1;
    char url[512];
    snprintf(url, sizeof url, "%s/v1/messages", base);
    client_stats st = {0};
    ah_loop *loop = ah_loop_new(NULL, NULL);
    ah_call *call = NULL;
    st.sse = ah_sse_new(NULL);
    if (!loop || !st.sse)
        goto cleanup;
    static const ah_header headers[] = {
        {"content-type", "application/json"},
        {"anthropic-version", "2023-06-01"},
        {"x-api-key", "bench"},
    };
    ah_call_config cfg = {0};
    cfg.loop = loop;
    cfg.request.url = url;
    cfg.request.headers = headers;
    cfg.request.n_headers = 3;
    cfg.request.body = BODY;
    cfg.request.body_len = sizeof BODY - 1;
    cfg.stream.on_data = on_data;
    cfg.stream.ud = &st;
    char err[256];
    if (ah_call_new(&cfg, &call, err, sizeof err) != AH_OK) {
        fprintf(stderr, "stream_bench: %s\n", err);
        goto cleanup;
    }
    double t0 = now_s();
    ah_call_state s = ah_call_run(call);
    double wall = now_s() - t0;
    if (s != AH_CALL_DONE || st.sse_failed) {
        fprintf(stderr, "stream_bench: call ended %s: %s%s\n", ah_call_state_name(s),
                ah_call_error(call)->message, st.sse_failed ? " (SSE parse failed)" : "");
        goto cleanup;
    }
    printf("client bytes=%llu events=%llu call_s=%.6f\n", st.bytes, st.events, wall);
    rc = 0;
cleanup:
    ah_call_free(call);
    ah_sse_free(st.sse);
    ah_loop_free(loop);
    return rc;
}

static int exec_child(char **argv)
{
    double t0 = now_s();
    pid_t pid = fork();
    if (pid < 0) {
        perror("fork");
        return 1;
    }
    if (pid == 0) {
        execvp(argv[0], argv);
        _exit(127);
    }
    int status = 0;
    struct rusage ru;
    if (wait4(pid, &status, 0, &ru) < 0) {
        perror("wait4");
        return 1;
    }
    double wall = now_s() - t0;
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        fprintf(stderr, "stream_bench: %s failed (status %d)\n", argv[0], status);
        return 1;
    }
    printf("exec wall_s=%.6f cpu_s=%.6f rss_kb=%ld\n", wall,
           tv_s(ru.ru_utime) + tv_s(ru.ru_stime), ru.ru_maxrss);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc >= 3 && strcmp(argv[1], "serve") == 0)
        return serve(argv[2]);
    if (argc >= 3 && strcmp(argv[1], "client") == 0)
        return client(argv[2]);
    if (argc >= 2 && strcmp(argv[1], "startup") == 0) {
        ah_loop *loop = ah_loop_new(NULL, NULL);
        ah_loop_free(loop);
        return loop ? 0 : 1;
    }
    if (argc >= 3 && strcmp(argv[1], "exec") == 0)
        return exec_child(argv + 2);
    fprintf(
        stderr,
        "usage: stream_bench serve DELTAS | client URL | startup | exec CMD [ARGS...]\n");
    return 2;
}
