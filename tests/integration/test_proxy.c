/* test_proxy.c - agenthost proxy over real loopback: a client (libcurl) talks to the
 * proxy, the proxy to the mock. For every wire format, fault kind and cut position, the
 * client reads one well-formed response whose text and tool calls equal the fault-free
 * one (tests/integration/proxy_rig.h reads it as a strict SDK would); failures before the
 * stream get the upstream's own answer, or a 502; secrets reach no event. The official
 * SDKs get the same matrix in tests/proxy/ (ctest proxy_sdk_*). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "integration/proxy_rig.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

static const char *const A_BODY =
    "{\"model\":\"claude-test\",\"max_tokens\":256,\"stream\":true,\"messages\":[{\"role\":"
    "\"user\",\"content\":\"Tell me about retries and streams\"}]}";
static const char *const A_BODY_46 =
    "{\"model\":\"claude-opus-4-6\",\"max_tokens\":256,\"stream\":true,\"messages\":[{\"role\":"
    "\"user\",\"content\":\"Tell me about retries and streams\"}]}";
static const char *const A_TOOL =
    "{\"model\":\"claude-test\",\"max_tokens\":256,\"stream\":true,\"tools\":[{\"name\":\"add\","
    "\"description\":\"Add\",\"input_schema\":{\"type\":\"object\",\"required\":[\"a\",\"b\"],"
    "\"properties\":{\"a\":{\"type\":\"integer\"},\"b\":{\"type\":\"integer\"}}}}],"
    "\"messages\":[{\"role\":\"user\",\"content\":\"What is 2 + 3?\"}]}";

/* The fault-free response through the mock directly; returns its number of events. */
static int baseline(int wire, const char *path, const char *body, pmsg *want)
{
    prig r;
    prig_open(&r, NULL, NULL);
    presp o = prig_fetch(ah_mock_url(r.mock), path, wire, body);
    assert_int_equal(o.status, 200);
    prig_read(wire, &o, want);
    assert_string_equal(want->anomaly, "");
    int events = 0;
    for (const char *q = o.body; (q = strstr(q, "\n\n")); q += 2)
        events++;
    presp_free(&o);
    prig_close(&r);
    return events;
}

static void same(const pmsg *want, const pmsg *got, const char *what)
{
    if (got->anomaly[0] || got->error || strcmp(want->text, got->text) != 0 ||
        want->n_tools != got->n_tools || strcmp(want->stop, got->stop) != 0 ||
        got->n_text_blocks > want->n_text_blocks) {
        fprintf(stderr, "%s:\n  anomaly: %s\n  error: %d\n  want: [%s] tools %d stop %s\n"
                        "  got:  [%s] tools %d stop %s text blocks %d/%d\n",
                what, got->anomaly, got->error, want->text, want->n_tools, want->stop,
                got->text, got->n_tools, got->stop, got->n_text_blocks, want->n_text_blocks);
        fail();
    }
    for (int i = 0; i < want->n_tools; i++) {
        assert_string_equal(want->tool_names[i], got->tool_names[i]);
        assert_string_equal(want->tool_args[i], got->tool_args[i]);
    }
}

/* Every fault of `kinds` after each K of the fault-free stream. */
static void matrix(int wire, const char *path, const char *body, const char *extra)
{
    pmsg want;
    int events = baseline(wire, path, body, &want);
    /* CI: every cut position for cuts, errors and malformed events, every third for
     * stalls (each waits for the idle time-out); AH_PROXY_FULL=1: every one. */
    int full = getenv("AH_PROXY_FULL") != NULL;
    /* under valgrind (ctest sets AH_PROXY_LAUNCHED): every third position of each kind */
    int launched = !full && getenv("AH_PROXY_LAUNCHED") != NULL;
    static const char *const kinds[] = {"cut_after_events", "error_event_after",
                                        "malformed_event_after", "stall_after_events"};
    ah_policy pol;
    ah_policy_init(&pol);
    pol.base_ms = 1;
    pol.cap_ms = 5;
    pol.idle_timeout_ms = 150;
    prig r;
    prig_open(&r, NULL, &pol);
    for (size_t k = 0; k < sizeof kinds / sizeof kinds[0]; k++) {
        for (int cut = 0; cut <= events; cut++) {
            if (!full && k == 3 && cut % 3 != 1)
                continue;
            if (launched && cut % 3 != 1)
                continue;
            char plan[256], err[256];
            snprintf(plan, sizeof plan, "[{\"%s\": %d%s}]", kinds[k], cut, extra ? extra : "");
            assert_int_equal(ah_mock_set_plan(r.mock, plan, err, sizeof err), AH_OK);
            size_t before = ah_mock_request_count(r.mock);
            struct timespec t0, t1;
            clock_gettime(CLOCK_MONOTONIC, &t0);
            presp o = prig_fetch(ah_proxy_url(r.proxy), path, wire, body);
            clock_gettime(CLOCK_MONOTONIC, &t1);
            if (getenv("AH_PROXY_TIMES"))
                fprintf(stderr, "%s %d: %.1f ms\n", kinds[k], cut,
                        (t1.tv_sec - t0.tv_sec) * 1e3 + (t1.tv_nsec - t0.tv_nsec) / 1e6);
            pmsg got;
            prig_read(wire, &o, &got);
            char what[320];
            snprintf(what, sizeof what, "%s %s", ah_wire_name((ah_wire)wire), plan);
            if (o.status != 200)
                fail_msg("%s: HTTP %ld: %s", what, o.status, o.body);
            same(&want, &got, what);
            /* the client's credentials appear in no event */
            assert_false(prig_events_contain(&r, "SECRET"));
            assert_true(ah_mock_request_count(r.mock) - before >= 2); /* it was cut */
            presp_free(&o);
        }
    }
    prig_close(&r);
}

static void anthropic_text(void **state)
{
    (void)state;
    matrix(AH_WIRE_ANTHROPIC, "/v1/messages", A_BODY, NULL);
}

static void anthropic_prompt_rung_restates(void **state)
{
    (void)state;
    matrix(AH_WIRE_ANTHROPIC, "/v1/messages", A_BODY_46, ",\"restate\": true");
}

static void anthropic_tool(void **state)
{
    (void)state;
    matrix(AH_WIRE_ANTHROPIC, "/v1/messages", A_TOOL, NULL);
}

#define C_TOOLS                                                                          \
    ",\"tools\":[{\"type\":\"function\",\"function\":{\"name\":\"add\",\"parameters\":"   \
    "{\"type\":\"object\",\"required\":[\"a\",\"b\"],\"properties\":{\"a\":{\"type\":"     \
    "\"integer\"},\"b\":{\"type\":\"integer\"}}}}}]"
#define R_TOOLS                                                                          \
    ",\"tools\":[{\"type\":\"function\",\"name\":\"add\",\"parameters\":{\"type\":"       \
    "\"object\",\"required\":[\"a\",\"b\"],\"properties\":{\"a\":{\"type\":\"integer\"},"  \
    "\"b\":{\"type\":\"integer\"}}}}]"

static void chat_text(void **state)
{
    (void)state;
    matrix(AH_WIRE_OPENAI, "/v1/chat/completions",
           "{\"model\":\"gpt-test\",\"stream\":true,\"stream_options\":{\"include_usage\":true},"
           "\"messages\":[{\"role\":\"user\",\"content\":\"Tell me about retries and streams\"}]}",
           ",\"restate\": true");
}

static void chat_tool(void **state)
{
    (void)state;
    matrix(AH_WIRE_OPENAI, "/v1/chat/completions",
           "{\"model\":\"gpt-test\",\"stream\":true" C_TOOLS ",\"messages\":[{\"role\":"
           "\"user\",\"content\":\"What is 2 + 3?\"}]}",
           ",\"tool_calls\": 2");
}

static void responses_text(void **state)
{
    (void)state;
    matrix(AH_WIRE_RESPONSES, "/v1/responses",
           "{\"model\":\"gpt-test\",\"stream\":true,\"input\":\"Tell me about retries and "
           "streams\"}",
           ",\"restate\": \"last_sentence\"");
}

static void responses_tool(void **state)
{
    (void)state;
    matrix(AH_WIRE_RESPONSES, "/v1/responses",
           "{\"model\":\"gpt-test\",\"stream\":true" R_TOOLS ",\"input\":\"What is 2 + 3?\"}",
           NULL);
}

/* One request through a proxy in front of a mock with `plan`. */
static presp through(const char *plan, const ah_policy *pol, int wire, const char *path,
                     const char *body, prig *r)
{
    prig_open(r, plan, pol);
    return prig_fetch(ah_proxy_url(r->proxy), path, wire, body);
}

static ah_policy fast_policy(void)
{
    ah_policy pol;
    ah_policy_init(&pol);
    pol.base_ms = 1;
    pol.cap_ms = 5;
    return pol;
}

/* A prefill the model refuses (the provider's 400): the prompt rung at once, and the
 * answer is still whole. */
static void refused_prefill_goes_to_prompt(void **state)
{
    (void)state;
    pmsg want, got;
    baseline(AH_WIRE_ANTHROPIC, "/v1/messages", A_BODY, &want);
    ah_policy pol = fast_policy();
    prig r;
    presp o = through("[{\"cut_after_events\": 6}, {\"ok\": true, \"refuse_prefill\": true}]",
                      &pol, AH_WIRE_ANTHROPIC, "/v1/messages", A_BODY, &r);
    assert_int_equal(o.status, 200);
    prig_read(AH_WIRE_ANTHROPIC, &o, &got);
    same(&want, &got, "refused prefill");
    assert_int_equal(ah_mock_request_count(r.mock), 3);
    ah_mock_request q;
    assert_int_equal(ah_mock_request_get(r.mock, 2, &q), AH_OK);
    assert_non_null(strstr(q.body, "Continue exactly where it stopped"));
    presp_free(&o);
    prig_close(&r);
}

/* An outage that shows as the provider's error in a 200's stream, before anything was
 * forwarded, is a failed attempt like a 529 (the in-stream retry storm of the library,
 * seen through the proxy): each waits its backoff, the continuation regenerates (nothing
 * was forwarded, so no rung), and a retry budget bounds the outage. Before, each was
 * continued at once: 4 requests for one client request however tight the budget. */
static void in_stream_overload_is_a_retry(void **state)
{
    (void)state;
    pmsg want, got;
    baseline(AH_WIRE_ANTHROPIC, "/v1/messages", A_BODY, &want);
    ah_policy pol = fast_policy();
    prig r;
    presp o = through("[{\"error_event_after\": 0}, {\"error_event_after\": 0}, {\"ok\": true}]",
                      &pol, AH_WIRE_ANTHROPIC, "/v1/messages", A_BODY, &r);
    assert_int_equal(o.status, 200);
    prig_read(AH_WIRE_ANTHROPIC, &o, &got);
    same(&want, &got, "in-stream overload, then the answer");
    assert_int_equal(ah_mock_request_count(r.mock), 3);
    assert_int_equal(prig_events_count(&r, "\"type\":\"llm_retry\""), 2);
    assert_int_equal(prig_events_count(&r, "\"mode\":\"regenerate\""), 2);
    assert_int_equal(prig_events_count(&r, "\"mode\":\"prefill\""), 0);
    assert_int_equal(prig_events_count(&r, "\"mode\":\"prompt\""), 0);
    presp_free(&o);
    prig_close(&r);

    /* an endless in-stream outage with a budget of 4 tokens (gRPC throttling: a failure
     * costs one, retries stop at half): one retry, then the give-up */
    ah_retry_budget *rb = NULL;
    assert_int_equal(ah_retry_budget_new(4, 0.1, &rb, NULL, 0), AH_OK);
    prig_open_with(&r, "{\"steps\": [], \"then\": {\"error_event_after\": 0}}", &pol, rb);
    o = prig_fetch(ah_proxy_url(r.proxy), "/v1/messages", AH_WIRE_ANTHROPIC, A_BODY);
    assert_int_equal(ah_mock_request_count(r.mock), 2);
    assert_int_equal(prig_events_count(&r, "\"type\":\"llm_retry\""), 1);
    assert_true(prig_events_contain(&r, "\"reason\":\"retry_budget\""));
    presp_free(&o);
    prig_close(&r);
    ah_retry_budget_free(rb);
}

/* Before the stream: a 529 is retried unseen; a 400 reaches the client unchanged; no
 * upstream at all is a 502 in the client's format. */
static void before_the_stream(void **state)
{
    (void)state;
    ah_policy pol = fast_policy();
    prig r;
    presp o = through("[{\"status\": 529}, {\"status\": 503}]", &pol, AH_WIRE_ANTHROPIC,
                      "/v1/messages", A_BODY, &r);
    assert_int_equal(o.status, 200);
    pmsg got;
    prig_read(AH_WIRE_ANTHROPIC, &o, &got);
    assert_string_equal(got.anomaly, "");
    assert_true(prig_events_contain(&r, "\"type\":\"llm_retry\""));
    assert_false(prig_events_contain(&r, "SECRET"));
    presp_free(&o);
    prig_close(&r);

    o = through("[{\"status\": 400, \"message\": \"bad thing\"}]", &pol, AH_WIRE_ANTHROPIC,
                "/v1/messages", A_BODY, &r);
    assert_int_equal(o.status, 400);
    assert_non_null(strstr(o.body, "\"message\":\"bad thing\""));
    assert_non_null(strstr(o.body, "\"request_id\":\"req_mock"));
    presp_free(&o);
    prig_close(&r);

    o = through("{\"steps\": [], \"then\": {\"status\": 503}}", &pol, AH_WIRE_OPENAI,
                "/v1/chat/completions",
                "{\"model\":\"m\",\"stream\":true,\"messages\":[{\"role\":\"user\","
                "\"content\":\"hi\"}]}",
                &r);
    assert_int_equal(o.status, 503); /* the last answer, after max_attempts */
    assert_int_equal(ah_mock_request_count(r.mock), 4);
    presp_free(&o);
    prig_close(&r);

    /* nothing listens upstream */
    prig_open(&r, NULL, &pol);
    ah_loop *l = r.loop;
    (void)l;
    prig_close(&r);
    ah_proxy_config pc = {0};
    ah_loop *loop = ah_loop_new(ah_clock_real(), NULL);
    prig r2;
    memset(&r2, 0, sizeof r2);
    pthread_mutex_init(&r2.mu, NULL);
    r2.loop = loop;
    pc.loop = loop;
    pc.anthropic_url = "http://127.0.0.1:1";
    pc.policy = &pol;
    char err[256];
    assert_int_equal(ah_proxy_new(&pc, &r2.proxy, err, sizeof err), AH_OK);
    atomic_init(&r2.stop, 0);
    assert_int_equal(pthread_create(&r2.th, NULL, prig_loop, &r2), 0);
    o = prig_fetch(ah_proxy_url(r2.proxy), "/v1/messages", AH_WIRE_ANTHROPIC, A_BODY);
    assert_int_equal(o.status, 502);
    cJSON *j = cJSON_Parse(o.body);
    assert_string_equal(pj_str(j, "type"), "error");
    assert_non_null(strstr(pj_str(cJSON_GetObjectItemCaseSensitive(j, "error"), "message"),
                           "no upstream response"));
    assert_null(strstr(o.body, "SECRET"));
    cJSON_Delete(j);
    presp_free(&o);
    atomic_store(&r2.stop, 1);
    ah_loop_wakeup(loop);
    pthread_join(r2.th, NULL);
    ah_proxy_free(r2.proxy);
    ah_loop_free(loop);
    pthread_mutex_destroy(&r2.mu);
}

/* Past max_continuations: the format's own in-band error. */
static void past_max_continuations(void **state)
{
    (void)state;
    ah_policy pol = fast_policy();
    pol.max_continuations = 2;
    const char *plan = "{\"steps\": [], \"then\": {\"cut_after_events\": 6}}";
    struct {
        int wire;
        const char *path, *body;
    } c[] = {
        {AH_WIRE_ANTHROPIC, "/v1/messages", A_BODY},
        {AH_WIRE_OPENAI, "/v1/chat/completions",
         "{\"model\":\"m\",\"stream\":true,\"messages\":[{\"role\":\"user\",\"content\":"
         "\"Tell me about retries and streams\"}]}"},
        {AH_WIRE_RESPONSES, "/v1/responses",
         "{\"model\":\"m\",\"stream\":true,\"input\":\"Tell me about retries and streams\"}"},
    };
    for (size_t i = 0; i < sizeof c / sizeof c[0]; i++) {
        prig r;
        presp o = through(plan, &pol, c[i].wire, c[i].path, c[i].body, &r);
        assert_int_equal(o.status, 200);
        pmsg got;
        prig_read(c[i].wire, &o, &got);
        if (got.anomaly[0])
            fail_msg("%s: %s\n%s", ah_wire_name((ah_wire)c[i].wire), got.anomaly, o.body);
        assert_true(got.error);
        assert_true(got.text_len > 0); /* what was forwarded stays the client's */
        if (c[i].wire == AH_WIRE_RESPONSES) {
            assert_non_null(strstr(o.body, "event: response.incomplete"));
            assert_non_null(strstr(o.body, "\"incomplete_details\":{\"reason\":\"interrupted\"}"));
        }
        assert_int_equal(ah_mock_request_count(r.mock), 3);
        presp_free(&o);
        prig_close(&r);
    }
}

/* Non-streaming: a cut body is asked for again; the client gets one whole body. */
static void non_streaming(void **state)
{
    (void)state;
    ah_policy pol = fast_policy();
    const char *body = "{\"model\":\"claude-test\",\"max_tokens\":64,\"messages\":[{\"role\":"
                       "\"user\",\"content\":\"hi\"}]}";
    prig r;
    prig_open(&r, NULL, &pol);
    presp want = prig_fetch(ah_mock_url(r.mock), "/v1/messages", AH_WIRE_ANTHROPIC, body);
    prig_close(&r);
    presp o = through("[{\"cut_after_events\": 1}, {\"status\": 529}]", &pol,
                      AH_WIRE_ANTHROPIC, "/v1/messages", body, &r);
    assert_int_equal(o.status, 200);
    assert_string_equal(o.body, want.body);
    assert_int_equal(ah_mock_request_count(r.mock), 3);
    presp_free(&o);
    presp_free(&want);
    prig_close(&r);
}

/* Other paths pass through, routed by the client's headers. */
static void pass_through(void **state)
{
    (void)state;
    ah_policy pol = fast_policy();
    prig r;
    presp o = through(NULL, &pol, AH_WIRE_ANTHROPIC, "/v1/models", NULL, &r);
    assert_int_equal(o.status, 404); /* the mock's own answer, unchanged */
    assert_non_null(strstr(o.body, "not_found_error"));
    presp_free(&o);
    prig_close(&r);
}

/* ---- the connection's end: a client that leaves, a proxy that stops ------------------ */

/* A raw client: the request sent, the socket open (SO_RCVTIMEO bounds every read). */
static int raw_request(int port, const char *body)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    assert_true(fd >= 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    assert_int_equal(connect(fd, (struct sockaddr *)&a, sizeof a), 0);
    struct timeval tv = {.tv_sec = 30};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    char head[512];
    int n = snprintf(head, sizeof head,
                     "POST /v1/messages HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                     "x-api-key: sk-ant-SECRET-proxytest\r\nanthropic-version: 2023-06-01\r\n"
                     "Content-Length: %zu\r\n\r\n",
                     strlen(body));
    assert_int_equal(send(fd, head, (size_t)n, MSG_NOSIGNAL), n);
    assert_int_equal(send(fd, body, strlen(body), MSG_NOSIGNAL), (ssize_t)strlen(body));
    return fd;
}

/* Read into buf until needle arrived (the response so far is kept in buf). */
static void raw_read_into(int fd, const char *needle, char *buf, size_t size)
{
    size_t len = 0;
    while (len + 1 < size) {
        ssize_t k = recv(fd, buf + len, size - 1 - len, 0);
        assert_true(k > 0);
        len += (size_t)k;
        buf[len] = '\0';
        if (strstr(buf, needle))
            return;
    }
    fail_msg("'%s' never arrived", needle);
}

static void raw_read_until(int fd, const char *needle)
{
    char buf[16384];
    raw_read_into(fd, needle, buf, sizeof buf);
}

static uint64_t in_flight(prig *r)
{
    ah_proxy_stats st;
    ah_proxy_get_stats(r->proxy, &st);
    return st.in_flight;
}

/* Wait (up to 30 s, the timeouts are 10 minutes) until in_flight is n. */
static void wait_in_flight(prig *r, uint64_t n)
{
    for (int i = 0; i < 3000 && in_flight(r) != n; i++)
        nanosleep(&(struct timespec){.tv_nsec = 10000000L}, NULL);
    assert_int_equal(in_flight(r), n);
}

/* Wait (up to 30 s) until the mock has seen n requests: the plan's steps go in the order
 * requests reach it. */
static void wait_mock_requests(prig *r, size_t n)
{
    for (int i = 0; i < 3000 && ah_mock_request_count(r->mock) < n; i++)
        nanosleep(&(struct timespec){.tv_nsec = 10000000L}, NULL);
    assert_int_equal(ah_mock_request_count(r->mock), n);
}

static ah_policy patient_policy(void)
{
    ah_policy pol = fast_policy();
    pol.idle_timeout_ms = 600000;
    pol.attempt_timeout_ms = 600000;
    return pol;
}

/* A client that hangs up while its connection waits, for the head (an upstream stream
 * that never sends its first event) or for the next bytes (a stall after some), or after
 * sending stray bytes, ends the upstream call at once: with every timeout at 10 minutes, only the cancel finishes it. */
static void client_hangup_cancels_upstream(void **state)
{
    (void)state;
    ah_policy pol = patient_policy();
    const char *plans[] = {"{\"steps\": [], \"then\": {\"stall_after_events\": 0}}",
                           "{\"steps\": [], \"then\": {\"stall_after_events\": 4}}",
                           "{\"steps\": [], \"then\": {\"stall_after_events\": 0}}"};
    for (int i = 0; i < 3; i++) {
        prig r;
        prig_open(&r, plans[i], &pol);
        int fd = raw_request(ah_proxy_port(r.proxy), A_BODY);
        if (i == 1)
            raw_read_until(fd, "content_block_delta"); /* the head and bytes came */
        wait_in_flight(&r, 1);
        wait_mock_requests(&r, 1); /* the upstream call is out */
        if (i == 2) {
            /* bytes after the request (the start of a pipelined one), then the hang-up:
             * seen through them (the socket is looked at, not only watched) */
            assert_int_equal(send(fd, "GET /", 5, MSG_NOSIGNAL), 5);
            nanosleep(&(struct timespec){.tv_nsec = 200000000L}, NULL);
        }
        close(fd);
        wait_in_flight(&r, 0);
        assert_int_equal(ah_mock_request_count(r.mock), 1); /* cancelled, not retried */
        /* the proxy still serves */
        presp o = prig_fetch(ah_proxy_url(r.proxy), "/v1/models", AH_WIRE_ANTHROPIC, NULL);
        assert_int_equal(o.status, 404);
        presp_free(&o);
        prig_close(&r);
    }
}

/* How many header lines of the response head in buf are named name (any case). */
static int head_count(const char *buf, const char *name)
{
    const char *end = strstr(buf, "\r\n\r\n");
    assert_non_null(end);
    int n = 0;
    size_t len = strlen(name);
    for (const char *l = strstr(buf, "\r\n"); l && l < end; l = strstr(l + 2, "\r\n"))
        n += strncasecmp(l + 2, name, len) == 0 && l[2 + len] == ':';
    return n;
}

/* A streamed answer has one Cache-Control: the upstream's when it sent one (the mock
 * does), never that and the proxy's too. Both ways an answer goes out: whole (a short
 * stream that is all there when the head goes) and chunked (a stream still coming). */
static void one_cache_control(void **state)
{
    (void)state;
    ah_policy pol = patient_policy();
    const char *plans[] = {"{\"steps\": []}", "{\"steps\": [], \"then\": {\"stall_after_events\": 4}}"};
    const char *until[] = {"message_stop", "content_block_delta"};
    for (int i = 0; i < 2; i++) {
        prig r;
        prig_open(&r, plans[i], &pol);
        int fd = raw_request(ah_proxy_port(r.proxy), A_BODY);
        char buf[16384];
        raw_read_into(fd, until[i], buf, sizeof buf);
        assert_int_equal(head_count(buf, "Cache-Control"), 1);
        close(fd);
        wait_in_flight(&r, 0);
        prig_close(&r);
    }
}

/* The hang-up watch is the connection's, for its life: the second request on a kept-alive
 * connection (the first answered in full) is cancelled at once when the client then
 * hangs up while it waits for its head. */
static void client_hangup_on_kept_alive_connection(void **state)
{
    (void)state;
    ah_policy pol = patient_policy();
    prig r;
    prig_open(&r, "{\"steps\": [{\"ok\": true}], \"then\": {\"stall_after_events\": 0}}",
              &pol);
    int fd = raw_request(ah_proxy_port(r.proxy), A_BODY);
    raw_read_until(fd, "message_stop"); /* the first answer, whole */
    wait_in_flight(&r, 0);
    char head[512];
    int n = snprintf(head, sizeof head,
                     "POST /v1/messages HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                     "x-api-key: sk-ant-SECRET-proxytest\r\nanthropic-version: 2023-06-01\r\n"
                     "Content-Length: %zu\r\n\r\n%s",
                     strlen(A_BODY), A_BODY);
    assert_int_equal(send(fd, head, (size_t)n, MSG_NOSIGNAL), n);
    wait_in_flight(&r, 1);
    wait_mock_requests(&r, 2); /* the second upstream call is out, and stalls */
    close(fd);
    wait_in_flight(&r, 0);
    assert_int_equal(ah_mock_request_count(r.mock), 2); /* cancelled, not retried */
    prig_close(&r);
}

/* ah_proxy_free with connections waiting (for the head, for bytes, and one still sending
 * its body): it returns, every client sees its connection close, nothing leaks
 * (ASan / valgrind). */
static void free_with_requests_in_flight(void **state)
{
    (void)state;
    ah_policy pol = patient_policy();
    prig r;
    prig_open(&r,
              "{\"steps\": [{\"stall_after_events\": 0}], "
              "\"then\": {\"stall_after_events\": 4}}",
              &pol);
    int port = ah_proxy_port(r.proxy);
    int head_wait = raw_request(port, A_BODY);
    wait_in_flight(&r, 1);
    wait_mock_requests(&r, 1); /* the stall-before-anything step is head_wait's */
    int byte_wait = raw_request(port, A_BODY);
    raw_read_until(byte_wait, "content_block_delta");
    wait_in_flight(&r, 2);
    int partial = socket(AF_INET, SOCK_STREAM, 0); /* its body never completes */
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    assert_int_equal(connect(partial, (struct sockaddr *)&a, sizeof a), 0);
    const char *half = "POST /v1/messages HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{\"mo";
    assert_int_equal(send(partial, half, strlen(half), MSG_NOSIGNAL), (ssize_t)strlen(half));
    assert_int_equal(ah_mock_request_count(r.mock), 2);
    prig_close(&r);
    int fds[] = {head_wait, byte_wait};
    for (size_t i = 0; i < 2; i++) {
        char buf[4096];
        ssize_t k;
        errno = 0;
        while ((k = recv(fds[i], buf, sizeof buf, 0)) > 0)
            ;
        assert_false(k < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)); /* not timed out */
        close(fds[i]);
    }
    close(partial);
}

static uint64_t shed(prig *r)
{
    ah_proxy_stats st;
    ah_proxy_get_stats(r->proxy, &st);
    return st.shed;
}

/* max_in_flight: with the bound's one request held open upstream, the next ones are
 * answered at once in their format's overload error, never reach the upstream and are
 * counted; once the held one ends, requests are forwarded again. */
static void max_in_flight_sheds(void **state)
{
    (void)state;
    ah_policy pol = patient_policy();
    prig r;
    prig_open_cfg(&r, "{\"steps\": [{\"stall_after_events\": 4}]}", &pol, NULL, 1);
    int held = raw_request(ah_proxy_port(r.proxy), A_BODY);
    raw_read_until(held, "content_block_delta");
    wait_in_flight(&r, 1);
    const char *url = ah_proxy_url(r.proxy);
    presp o = prig_fetch(url, "/v1/messages", AH_WIRE_ANTHROPIC, A_BODY);
    assert_int_equal(o.status, 529);
    assert_non_null(strstr(o.body, "\"error\":{\"type\":\"overloaded_error\""));
    assert_non_null(strstr(o.body, "--max-in-flight 1 reached"));
    assert_null(strstr(o.body, "SECRET"));
    presp_free(&o);
    o = prig_fetch(url, "/v1/chat/completions", AH_WIRE_OPENAI,
                   "{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]}");
    assert_int_equal(o.status, 503);
    assert_non_null(strstr(o.body, "\"type\":\"server_error\""));
    presp_free(&o);
    o = prig_fetch(url, "/v1/models", AH_WIRE_OPENAI, NULL); /* passed through: OpenAI's */
    assert_int_equal(o.status, 503);
    presp_free(&o);
    assert_int_equal(shed(&r), 3);
    assert_int_equal(ah_mock_request_count(r.mock), 1); /* none of them went upstream */
    assert_int_equal(in_flight(&r), 1);
    close(held);
    wait_in_flight(&r, 0);
    o = prig_fetch(url, "/v1/messages", AH_WIRE_ANTHROPIC, A_BODY);
    assert_int_equal(o.status, 200);
    presp_free(&o);
    assert_int_equal(shed(&r), 3);
    assert_int_equal(ah_mock_request_count(r.mock), 2);
    prig_close(&r);
}

int main(void)
{
    curl_global_init(CURL_GLOBAL_DEFAULT);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(anthropic_text),
        cmocka_unit_test(anthropic_prompt_rung_restates),
        cmocka_unit_test(anthropic_tool),
        cmocka_unit_test(chat_text),
        cmocka_unit_test(chat_tool),
        cmocka_unit_test(responses_text),
        cmocka_unit_test(responses_tool),
        cmocka_unit_test(refused_prefill_goes_to_prompt),
        cmocka_unit_test(before_the_stream),
        cmocka_unit_test(in_stream_overload_is_a_retry),
        cmocka_unit_test(past_max_continuations),
        cmocka_unit_test(non_streaming),
        cmocka_unit_test(pass_through),
        cmocka_unit_test(client_hangup_cancels_upstream),
        cmocka_unit_test(one_cache_control),
        cmocka_unit_test(client_hangup_on_kept_alive_connection),
        cmocka_unit_test(free_with_requests_in_flight),
        cmocka_unit_test(max_in_flight_sheds),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    curl_global_cleanup();
    return rc;
}
