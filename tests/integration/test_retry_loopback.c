/* test_retry_loopback.c - ah_call over the libcurl transport against the in-process mock
 * provider on real loopback sockets: retries on 503, server hints (Retry-After,
 * retry-after-ms), not-retryable 400, refused connections, delayed headers vs the attempt
 * timeout (no leaked transfer), resets before headers, cut and stalled streams (never
 * resent), and a cancel from another thread during a long backoff wait.
 * Timing is only asserted as lower bounds (a hint was honoured) or loose upper bounds (a
 * cancel did not sit out a 30 s wait); base_ms is small so the suite stays fast. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "agenthost.h"
#include "agenthost/mock.h"
#include "agenthost/call.h"

static const char BODY[] =
    "{\"model\":\"mock-1\",\"max_tokens\":64,\"stream\":true,"
    "\"messages\":[{\"role\":\"user\",\"content\":\"hello loopback\"}]}";
static const char API_KEY[] = "sk-ant-test-LOOPBACK-SECRET-42";

typedef struct harness {
    ah_mock *mock;
    ah_loop *loop;
    ah_policy policy;
    ah_call *call;
    char url[256];
    /* events */
    int starts, retries, gave_up;
    int64_t retry_wait[8];
    ah_wait_source retry_source[8];
    ah_error_kind retry_kind[8];
    int retry_status[8];
    size_t transfers_at_retry[8];
    ah_giveup_reason reason;
    atomic_int in_wait; /* set by the llm_retry event: the wait is about to start */
    /* stream */
    int opens, ends, open_status;
    int saw_event_stream;
    size_t bytes;
} harness;

static void on_event(void *ud, const ah_event *e)
{
    harness *h = ud;
    switch (e->type) {
    case AH_EV_LLM_CALL_START:
        h->starts++;
        assert_int_equal(e->u.llm_call_start.attempt, h->starts);
        break;
    case AH_EV_LLM_RETRY:
        assert_true(h->retries < 8);
        h->retry_wait[h->retries] = e->u.llm_retry.wait_ms;
        h->retry_source[h->retries] = e->u.llm_retry.wait_source;
        h->retry_kind[h->retries] = e->u.llm_retry.error->kind;
        h->retry_status[h->retries] = e->u.llm_retry.status;
        h->transfers_at_retry[h->retries] = ah_loop_transfer_count(h->loop);
        /* No secret in what an event carries. */
        assert_null(strstr(e->u.llm_retry.error->message, API_KEY));
        h->retries++;
        atomic_store(&h->in_wait, 1);
        break;
    case AH_EV_LLM_GAVE_UP:
        h->gave_up++;
        h->reason = e->u.llm_gave_up.reason;
        assert_null(strstr(e->u.llm_gave_up.error->message, API_KEY));
        break;
    default:
        fail_msg("unexpected event %s", ah_event_type_name(e->type));
    }
}

static int on_open(void *ud, int status, const ah_header *hd, size_t n, ah_error *err)
{
    harness *h = ud;
    assert_int_equal(h->bytes, 0); /* the head arrives before any body byte */
    h->opens++;
    h->open_status = status;
    for (size_t i = 0; i < n; i++)
        if (strcasecmp(hd[i].name, "content-type") == 0 &&
            strstr(hd[i].value, "text/event-stream"))
            h->saw_event_stream = 1;
    return 0;
}

static int on_data(void *ud, const char *buf, size_t len, ah_error *err)
{
    harness *h = ud;
    h->bytes += len;
    return 0;
}

static int on_end(void *ud, ah_error *err)
{
    ((harness *)ud)->ends++;
    return 0;
}

static int setup(void **state)
{
    harness *h = calloc(1, sizeof *h);
    atomic_init(&h->in_wait, 0);
    h->loop = ah_loop_new(NULL, NULL);
    assert_non_null(h->loop);
    ah_policy_init(&h->policy);
    h->policy.base_ms = 5;
    h->policy.cap_ms = 20;
    h->policy.attempt_timeout_ms = 10000;
    *state = h;
    return 0;
}

static int teardown(void **state)
{
    harness *h = *state;
    ah_call_free(h->call);
    assert_int_equal(ah_loop_transfer_count(h->loop), 0); /* no dangling request */
    ah_loop_free(h->loop);
    ah_mock_free(h->mock);
    free(h);
    return 0;
}

static void start_mock(harness *h, const char *plan)
{
    char err[256] = "";
    ah_mock_config cfg;
    ah_mock_config_init(&cfg);
    cfg.plan_json = plan;
    ah_mock_new(&cfg, &h->mock, err, sizeof err);
    if (!h->mock)
        fail_msg("mock: %s", err);
    snprintf(h->url, sizeof h->url, "%s/v1/messages", ah_mock_url(h->mock));
}

static ah_call *make_call(harness *h)
{
    static const ah_header headers[] = {
        {"content-type", "application/json"},
        {"anthropic-version", "2023-06-01"},
        {"x-api-key", API_KEY},
    };
    ah_call_config cfg = {0};
    cfg.loop = h->loop;
    cfg.request.url = h->url;
    cfg.request.headers = headers;
    cfg.request.n_headers = 3;
    cfg.request.body = BODY;
    cfg.request.body_len = sizeof BODY - 1;
    cfg.policy = &h->policy;
    cfg.stream = (ah_stream_fns){on_open, on_data, on_end, h, NULL, NULL};
    cfg.on_event = on_event;
    cfg.event_ud = h;
    cfg.llm_call = 1;
    char err[128];
    assert_int_equal(ah_call_new(&cfg, &h->call, err, sizeof err), AH_OK);
    return h->call;
}

static size_t requests(harness *h)
{
    return ah_mock_request_count(h->mock);
}

/* ---- tests ----------------------------------------------------------------------- */

static void retries_503_twice_then_succeeds(void **state)
{
    harness *h = *state;
    start_mock(h, "[{\"status\":503},{\"status\":503},{\"ok\":true}]");
    make_call(h);
    assert_int_equal(ah_call_run(h->call), AH_CALL_DONE);
    assert_int_equal(ah_call_attempts(h->call), 3);
    assert_int_equal(h->starts, 3);
    assert_int_equal(h->retries, 2);
    assert_int_equal(h->gave_up, 0);
    assert_int_equal(h->retry_status[0], 503);
    assert_int_equal(h->retry_status[1], 503);
    assert_int_equal(requests(h), 3);
    assert_int_equal(h->opens, 1);
    assert_int_equal(h->open_status, 200);
    assert_true(h->saw_event_stream);
    assert_true(h->bytes > 0);
    assert_int_equal(h->ends, 1);
    /* What the mock recorded is what we sent, with the key redacted on its side. */
    ah_mock_request r;
    assert_int_equal(ah_mock_request_get(h->mock, 2, &r), AH_OK);
    assert_string_equal(r.method, "POST");
    assert_string_equal(r.path, "/v1/messages");
    assert_int_equal(r.body_len, sizeof BODY - 1);
    assert_memory_equal(r.body, BODY, r.body_len);
}

static void retry_after_seconds_from_a_529_is_honoured(void **state)
{
    harness *h = *state;
    start_mock(h, "[{\"status\":529,\"headers\":{\"Retry-After\":\"1\"}},{\"ok\":true}]");
    make_call(h);
    assert_int_equal(ah_call_run(h->call), AH_CALL_DONE);
    assert_int_equal(h->retries, 1);
    assert_int_equal(h->retry_status[0], 529);
    assert_int_equal(h->retry_source[0], AH_WAIT_SERVER);
    assert_true(h->retry_wait[0] >= 1000);
    assert_true(ah_call_elapsed_ms(h->call) >= 1000); /* it really waited */
    assert_int_equal(requests(h), 2);
}

static void retry_after_ms_from_a_429_is_honoured(void **state)
{
    harness *h = *state;
    start_mock(
        h, "[{\"status\":429,\"headers\":{\"retry-after-ms\":\"300\"}},{\"ok\":true}]");
    make_call(h);
    assert_int_equal(ah_call_run(h->call), AH_CALL_DONE);
    assert_int_equal(h->retries, 1);
    assert_int_equal(h->retry_source[0], AH_WAIT_SERVER);
    assert_true(h->retry_wait[0] >= 300);
    assert_true(ah_call_elapsed_ms(h->call) >= 300);
    assert_int_equal(requests(h), 2);
}

static void bad_request_is_not_retried(void **state)
{
    harness *h = *state;
    start_mock(h, "[{\"status\":400},{\"ok\":true}]");
    make_call(h);
    assert_int_equal(ah_call_run(h->call), AH_CALL_GAVE_UP);
    assert_int_equal(requests(h), 1);
    assert_int_equal(h->gave_up, 1);
    assert_int_equal(h->reason, AH_GIVEUP_NOT_RETRYABLE);
    const ah_error *e = ah_call_error(h->call);
    assert_int_equal(e->kind, AH_EK_HTTP);
    assert_int_equal(e->status, 400);
    assert_string_equal(e->provider_type, "invalid_request_error"); /* body was read */
    assert_int_equal(h->opens, 0);
}

/* A port that was just bound and closed: connecting to it is refused. */
static int closed_port(void)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    assert_true(fd >= 0);
    struct sockaddr_in a = {.sin_family = AF_INET};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    assert_int_equal(bind(fd, (struct sockaddr *)&a, sizeof a), 0);
    socklen_t len = sizeof a;
    assert_int_equal(getsockname(fd, (struct sockaddr *)&a, &len), 0);
    close(fd);
    return ntohs(a.sin_port);
}

static void connection_refused_uses_every_attempt(void **state)
{
    harness *h = *state;
    h->policy.max_attempts = 3;
    snprintf(h->url, sizeof h->url, "http://127.0.0.1:%d/v1/messages", closed_port());
    make_call(h);
    assert_int_equal(ah_call_run(h->call), AH_CALL_GAVE_UP);
    assert_int_equal(h->starts, 3);
    assert_int_equal(h->retries, 2);
    assert_int_equal(h->retry_kind[0], AH_EK_CONNECT);
    assert_int_equal(h->gave_up, 1);
    assert_int_equal(h->reason, AH_GIVEUP_ATTEMPTS);
    assert_int_equal(ah_call_error(h->call)->kind, AH_EK_CONNECT);
    assert_int_equal(ah_call_error(h->call)->status, 0);
}

static void delayed_headers_hit_the_attempt_timeout(void **state)
{
    harness *h = *state;
    h->policy.attempt_timeout_ms = 300;
    start_mock(h, "[{\"delay_headers_ms\":3000},{\"ok\":true}]");
    make_call(h);
    assert_int_equal(ah_call_run(h->call), AH_CALL_DONE);
    assert_int_equal(ah_call_attempts(h->call), 2);
    assert_int_equal(h->retries, 1);
    assert_int_equal(h->retry_kind[0], AH_EK_TIMEOUT);
    assert_int_equal(h->retry_status[0], 0);
    /* The hung transfer was gone before the retry was announced: nothing dangling. */
    assert_int_equal(h->transfers_at_retry[0], 0);
    assert_int_equal(ah_loop_transfer_count(h->loop), 0);
    assert_int_equal(requests(h), 2);
}

static void reset_before_headers_is_retried(void **state)
{
    harness *h = *state;
    start_mock(h, "[{\"reset\":true},{\"ok\":true}]");
    make_call(h);
    assert_int_equal(ah_call_run(h->call), AH_CALL_DONE);
    assert_int_equal(h->retries, 1);
    assert_int_equal(h->retry_kind[0], AH_EK_CONNECT);
    assert_int_equal(requests(h), 2);
}

/* The 503 leaves a kept-alive connection that the next attempt reuses; the mock resets it
 * before any response byte. libcurl would resend such a request by itself on a fresh
 * connection, a request the policy never counted; it must be the policy's retry. */
static void reset_on_a_reused_connection_is_retried_by_the_policy_only(void **state)
{
    harness *h = *state;
    start_mock(h, "[{\"status\":503},{\"reset\":true},{\"ok\":true}]");
    make_call(h);
    assert_int_equal(ah_call_run(h->call), AH_CALL_DONE);
    assert_int_equal(requests(h), 3);
    assert_int_equal(ah_call_attempts(h->call), 3); /* every request was an attempt */
    assert_int_equal(h->retries, 2);
    assert_int_equal(h->retry_status[0], 503);
    assert_int_equal(h->retry_kind[1], AH_EK_CONNECT);
}

static void cut_stream_reaches_the_caller_and_is_not_resent(void **state)
{
    harness *h = *state;
    start_mock(h, "[{\"cut_after_events\":3},{\"ok\":true}]");
    make_call(h);
    assert_int_equal(ah_call_run(h->call), AH_CALL_INTERRUPTED);
    const ah_error *e = ah_call_error(h->call);
    assert_int_equal(e->kind, AH_EK_STREAM);
    assert_int_equal(h->opens, 1);
    assert_true(h->bytes > 0); /* the events before the cut were delivered */
    assert_int_equal(h->ends, 0);
    assert_int_equal(h->retries, 0);
    assert_int_equal(h->gave_up, 0);
    assert_int_equal(requests(h), 1);
    assert_int_equal(ah_loop_transfer_count(h->loop), 0);
}

static void stalled_stream_hits_the_idle_timeout(void **state)
{
    harness *h = *state;
    h->policy.idle_timeout_ms = 300;
    start_mock(h, "[{\"stall_after_events\":2,\"stall_ms\":20000},{\"ok\":true}]");
    make_call(h);
    assert_int_equal(ah_call_run(h->call), AH_CALL_INTERRUPTED);
    const ah_error *e = ah_call_error(h->call);
    assert_int_equal(e->kind, AH_EK_STREAM);
    assert_non_null(strstr(e->message, "idle"));
    assert_true(h->bytes > 0);
    assert_int_equal(h->retries, 0);
    assert_int_equal(requests(h), 1);
    assert_int_equal(ah_loop_transfer_count(h->loop),
                     0); /* the stalled transfer is gone */
}

static void *cancel_when_waiting(void *ud)
{
    harness *h = ud;
    while (!atomic_load(&h->in_wait)) {
        struct timespec ts = {0, 1000000};
        nanosleep(&ts, NULL);
    }
    struct timespec ts = {0, 50000000}; /* let the loop settle into its 30 s wait */
    nanosleep(&ts, NULL);
    ah_call_cancel(h->call);
    return NULL;
}

static void cancel_from_another_thread_during_a_long_wait(void **state)
{
    harness *h = *state;
    h->policy.max_retry_after_ms = 60000;
    start_mock(h,
               "[{\"status\":503,\"headers\":{\"Retry-After\":\"30\"}},{\"ok\":true}]");
    make_call(h);
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, cancel_when_waiting, h), 0);
    ah_call_state s = ah_call_run(h->call);
    pthread_join(th, NULL);
    assert_int_equal(s, AH_CALL_CANCELLED);
    assert_int_equal(h->retries, 1);
    assert_true(h->retry_wait[0] >= 30000);
    assert_int_equal(ah_call_error(h->call)->kind, AH_EK_CANCELLED);
    assert_true(ah_call_elapsed_ms(h->call) < 5000); /* loose: not the 30 s wait */
    assert_int_equal(h->starts, 1);
    assert_int_equal(requests(h), 1);
    assert_false(ah_loop_alive(h->loop)); /* the wait's timer is gone too */
}

#define T(fn) cmocka_unit_test_setup_teardown(fn, setup, teardown)

int main(void)
{
    const struct CMUnitTest tests[] = {
        T(retries_503_twice_then_succeeds),
        T(retry_after_seconds_from_a_529_is_honoured),
        T(retry_after_ms_from_a_429_is_honoured),
        T(bad_request_is_not_retried),
        T(connection_refused_uses_every_attempt),
        T(delayed_headers_hit_the_attempt_timeout),
        T(reset_before_headers_is_retried),
        T(reset_on_a_reused_connection_is_retried_by_the_policy_only),
        T(cut_stream_reaches_the_caller_and_is_not_resent),
        T(stalled_stream_hits_the_idle_timeout),
        T(cancel_from_another_thread_during_a_long_wait),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
