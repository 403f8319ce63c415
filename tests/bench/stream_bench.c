/* stream_bench.c - helpers for tests/bench/run.sh (docs/testing.md):
 *
 *   stream_bench client URL WIRE   one streamed request through the transport and the SSE
 *                                  parser only (ah_call on the loop feeding ah_sse; no
 *                                  decoder, no worker, no Lua): the layer under the
 *                                  whole-stack client. WIRE anthropic|openai|responses
 *                                  picks the path; prints "client bytes=B events=E".
 *   stream_bench startup           create and free a loop, nothing else: that layer's
 *                                  process start-up cost (libraries, curl_global_init).
 *   stream_bench exec CMD [ARGS]   run CMD and print "exec wall_s=W cpu_s=C user_s=U
 *                                  sys_s=S rss_kb=R" from wait4()'s rusage of the child
 *                                  (CPU = user + system, peak RSS): one whole-process
 *                                  measure for every client.
 *                                  A child still running after AH_BENCH_TIMEOUT seconds
 *                                  (default 300) is killed and the exec fails.
 * The mock runs in its own process (`agenthost mock`), so its CPU is never billed here.
 */
#define _DEFAULT_SOURCE /* wait4() */
#include "agenthost.h"
#include "agenthost/call.h"
#include "agenthost/sse.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* One body every format of the mock accepts (Chat and Responses ignore the other's
 * fields), so the three streams differ only in their wire format. */
static const char BODY[] =
    "{\"model\":\"mock-bench\",\"max_tokens\":64000,\"stream\":true,"
    "\"messages\":[{\"role\":\"user\",\"content\":\"stream a long answer\"}],"
    "\"input\":\"stream a long answer\"}";

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

static int client(const char *base, const char *wire_name)
{
    int rc = 1;
    int wire = ah_wire_from_name(wire_name);
    if (wire < 0) {
        fprintf(stderr, "stream_bench: unknown wire '%s'\n", wire_name);
        return 2;
    }
    char url[512];
    snprintf(url, sizeof url, "%s%s", base, ah_wire_path((ah_wire)wire));
    client_stats st = {0};
    ah_loop *loop = ah_loop_new(NULL, NULL);
    ah_call *call = NULL;
    st.sse = ah_sse_new(NULL);
    if (!loop || !st.sse)
        goto cleanup;
    static const ah_header anthropic_headers[] = {
        {"content-type", "application/json"},
        {"anthropic-version", "2023-06-01"},
        {"x-api-key", "bench"},
    };
    static const ah_header openai_headers[] = {
        {"content-type", "application/json"},
        {"authorization", "Bearer bench"},
    };
    ah_call_config cfg = {0};
    cfg.loop = loop;
    cfg.request.url = url;
    if (wire == AH_WIRE_ANTHROPIC) {
        cfg.request.headers = anthropic_headers;
        cfg.request.n_headers = sizeof anthropic_headers / sizeof *anthropic_headers;
    } else {
        cfg.request.headers = openai_headers;
        cfg.request.n_headers = sizeof openai_headers / sizeof *openai_headers;
    }
    cfg.request.body = BODY;
    cfg.request.body_len = sizeof BODY - 1;
    cfg.stream.on_data = on_data;
    cfg.stream.ud = &st;
    char err[256];
    if (ah_call_new(&cfg, &call, err, sizeof err) != AH_OK) {
        fprintf(stderr, "stream_bench: %s\n", err);
        goto cleanup;
    }
    ah_call_state s = ah_call_run(call);
    if (s != AH_CALL_DONE || st.sse_failed) {
        fprintf(stderr, "stream_bench: call ended %s: %s%s\n", ah_call_state_name(s),
                ah_call_error(call)->message, st.sse_failed ? " (SSE parse failed)" : "");
        goto cleanup;
    }
    printf("client bytes=%llu events=%llu\n", st.bytes, st.events);
    rc = 0;
cleanup:
    ah_call_free(call);
    ah_sse_free(st.sse);
    ah_loop_free(loop);
    return rc;
}

static volatile sig_atomic_t timed_out;

static void on_alarm(int sig)
{
    (void)sig;
    timed_out = 1;
}

static int exec_child(char **argv)
{
    const char *t = getenv("AH_BENCH_TIMEOUT");
    unsigned timeout_s = t && *t ? (unsigned)strtoul(t, NULL, 10) : 300;
    fflush(stdout); /* the child's output follows ours, never before it */
    double t0 = now_s();
    pid_t pid = fork();
    if (pid < 0) {
        perror("stream_bench: fork");
        return 1;
    }
    if (pid == 0) {
        execvp(argv[0], argv);
        fprintf(stderr, "stream_bench: cannot run %s\n", argv[0]);
        _exit(127);
    }
    /* No SA_RESTART: the alarm interrupts wait4, then the child is killed. */
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_alarm;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGALRM, &sa, NULL);
    alarm(timeout_s);
    int status = 0;
    struct rusage ru;
    while (wait4(pid, &status, 0, &ru) < 0) {
        if (errno != EINTR) {
            perror("stream_bench: wait4");
            return 1;
        }
        if (timed_out) {
            kill(pid, SIGKILL);
            timed_out = 0;
        }
    }
    alarm(0);
    double wall = now_s() - t0;
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        fprintf(stderr, "stream_bench: %s failed (%s %d)\n", argv[0],
                WIFSIGNALED(status) ? "signal" : "exit status",
                WIFSIGNALED(status) ? WTERMSIG(status) : WEXITSTATUS(status));
        return 1;
    }
    printf("exec wall_s=%.6f cpu_s=%.6f user_s=%.6f sys_s=%.6f rss_kb=%ld\n", wall,
           tv_s(ru.ru_utime) + tv_s(ru.ru_stime), tv_s(ru.ru_utime), tv_s(ru.ru_stime),
           ru.ru_maxrss);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc >= 4 && strcmp(argv[1], "client") == 0)
        return client(argv[2], argv[3]);
    if (argc >= 2 && strcmp(argv[1], "startup") == 0) {
        ah_loop *loop = ah_loop_new(NULL, NULL);
        ah_loop_free(loop);
        return loop ? 0 : 1;
    }
    if (argc >= 3 && strcmp(argv[1], "exec") == 0)
        return exec_child(argv + 2);
    fprintf(stderr,
            "usage: stream_bench client URL WIRE | startup | exec CMD [ARGS...]\n");
    return 2;
}
