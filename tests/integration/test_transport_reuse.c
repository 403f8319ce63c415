/* test_transport_reuse.c - the libcurl transport reuses its easy handles and its
 * connection across a client's requests on one loop, and every answer stays right: 40
 * sequential worker runs against the built-in mock (real loopback sockets) need one easy
 * handle; the runs before a fault share one connection, and so do the runs after it; a
 * 500, a cut stream, a reset connection and an attempt aborted half-way each fail only
 * their own run, and the next run is answered in full on a handle that was reset (its
 * previous owner's options, a GET's method or an error's state, do not leak into it); a
 * plain POST's handle keeps only the options every plain POST sets alike. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <dirent.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

#include "agenthost.h"
#include "agenthost/mock.h"
#include "agenthost/transport.h"
#include "loop_curl.h"

static int port_of(int fd, int peer)
{
    struct sockaddr_in sa;
    socklen_t len = sizeof sa;
    int r = peer ? getpeername(fd, (struct sockaddr *)&sa, &len)
                 : getsockname(fd, (struct sockaddr *)&sa, &len);
    if (r != 0 || sa.sin_family != AF_INET)
        return -1;
    return ntohs(sa.sin_port);
}

/* The local port of the one connection this process has open to the mock (0: none);
 * fails if there are several. */
static int the_connection(int mock_port)
{
    int found = 0, n = 0;
    DIR *d = opendir("/proc/self/fd");
    assert_non_null(d);
    struct dirent *de;
    while ((de = readdir(d)) != NULL) {
        int fd = atoi(de->d_name);
        if (de->d_name[0] == '.' || fd == dirfd(d) || port_of(fd, 1) != mock_port)
            continue;
        found = port_of(fd, 0);
        n++;
    }
    closedir(d);
    if (n > 1)
        fail_msg("%d connections open to the mock, expected at most one", n);
    return found;
}

typedef struct fixture {
    ah_mock *mock;
    ah_client *client;
    ah_loop *loop;
} fixture;

static int setup(void **state)
{
    /* runs 1-5 ok, 6: 500, 7 ok, 8: cut after 2 events, 9: reset, then ok */
    static const char plan[] =
        "[{\"ok\": true}, {\"ok\": true}, {\"ok\": true}, {\"ok\": true}, {\"ok\": true},"
        " {\"status\": 500}, {\"ok\": true}, {\"cut_after_events\": 2}, {\"reset\": true}]";
    fixture *f = calloc(1, sizeof *f);
    ah_mock_config mc;
    ah_mock_config_init(&mc);
    mc.plan_json = plan;
    mc.text = "pong";
    char err[256];
    if (ah_mock_new(&mc, &f->mock, err, sizeof err) != AH_OK)
        fail_msg("mock: %s", err);
    ah_client_config cc = {.wire = AH_WIRE_ANTHROPIC, .model = "mock-model",
                           .base_url = ah_mock_url(f->mock)};
    if (ah_client_new(&cc, &f->client, err, sizeof err) != AH_OK)
        fail_msg("client: %s", err);
    f->loop = ah_loop_new(NULL, NULL);
    assert_non_null(f->loop);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    fixture *f = *state;
    ah_loop_free(f->loop);
    ah_client_free(f->client);
    ah_mock_free(f->mock);
    free(f);
    return 0;
}

/* One worker run of "hi", one attempt: a fault fails the run instead of being retried. */
static ah_run_outcome run_once(fixture *f, char *text, size_t size)
{
    char err[256];
    ah_policy pol;
    ah_policy_init(&pol);
    pol.max_attempts = 1;
    pol.attempt_timeout_ms = 20000;
    ah_worker_config wc = {.loop = f->loop, .client = f->client, .policy = &pol};
    ah_worker *w = NULL;
    if (ah_worker_new(&wc, &w, err, sizeof err) != AH_OK)
        fail_msg("worker: %s", err);
    ah_run_outcome o = ah_worker_run(w, "hi");
    snprintf(text, size, "%s", ah_worker_text(w));
    ah_worker_free(w);
    return o;
}

static void sequential_runs_share_a_handle_and_a_connection(void **state)
{
    fixture *f = *state;
    int mport = ah_mock_port(f->mock);
    int first_conn = 0, after_conn = 0;
    for (int i = 1; i <= 40; i++) {
        char text[256];
        ah_run_outcome o = run_once(f, text, sizeof text);
        int faulty = i == 6 || i == 8 || i == 9;
        if (faulty) {
            if (o == AH_OUTCOME_COMPLETED)
                fail_msg("run %d (a fault) completed", i);
        } else {
            if (o != AH_OUTCOME_COMPLETED)
                fail_msg("run %d: outcome %d", i, (int)o);
            assert_string_equal(text, "pong");
        }
        int conn = the_connection(mport);
        if (i <= 5) {
            assert_true(conn > 0); /* kept open for the next request */
            if (!first_conn)
                first_conn = conn;
            if (conn != first_conn)
                fail_msg("run %d on a new connection (port %d, the first was %d)", i, conn,
                         first_conn);
        } else if (i >= 10) {
            assert_true(conn > 0);
            if (!after_conn)
                after_conn = conn;
            if (conn != after_conn)
                fail_msg("run %d on a new connection (port %d, run 10's was %d)", i, conn,
                         after_conn);
        }
    }
    assert_int_equal(ah_mock_request_count(f->mock), 40);
    /* one at a time: each attempt takes the handle the previous one gave back */
    assert_int_equal(ah__loop_easy_made(f->loop), 1);
}

static int count_body(void *ud, const char *b, size_t n)
{
    (void)b;
    *(size_t *)ud += n;
    return 0;
}
static void no_done(void *ud, const ah_error *e)
{
    (void)ud, (void)e;
    fail_msg("an aborted attempt reported its end");
}

/* An attempt aborted while its response streams gives its handle back reset: the next
 * run on the same handle sends none of the aborted request's headers. */
static void an_aborted_attempt_leaves_a_clean_handle(void **state)
{
    fixture *f = *state;
    char err[256];
    assert_int_equal(ah_mock_set_plan(f->mock,
                                      "[{\"stall_after_events\": 6,"
                                      " \"text_deltas\": 50}]",
                                      err, sizeof err),
                     AH_OK);
    char url[128];
    snprintf(url, sizeof url, "%s/v1/messages", ah_mock_url(f->mock));
    const char *body = "{\"model\":\"m\",\"stream\":true,\"max_tokens\":5,"
                       "\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]}";
    ah_header hdr[] = {{"content-type", "application/json"}, {"x-test", "first"}};
    ah_http_request req = {.url = url, .headers = hdr, .n_headers = 2,
                           .body = body, .body_len = strlen(body)};
    size_t got = 0;
    ah_transport_sink sink = {.on_body = count_body, .on_done = no_done};
    const ah_transport *tr = ah_transport_curl();
    void *att = NULL;
    ah_error e;
    assert_int_equal(tr->ops->start(tr->self, f->loop, &req, &sink, &got, &att, &e), AH_OK);
    for (int guard = 0; got == 0 && guard < 20000; guard++)
        ah_loop_run_once(f->loop, 5);
    assert_true(got > 0);
    tr->ops->abort(tr->self, att);
    assert_int_equal(ah_loop_transfer_count(f->loop), 0);
    size_t made = ah__loop_easy_made(f->loop);

    assert_int_equal(ah_mock_set_plan(f->mock, NULL, err, sizeof err), AH_OK);
    char text[256];
    assert_int_equal(run_once(f, text, sizeof text), AH_OUTCOME_COMPLETED);
    assert_string_equal(text, "pong");
    assert_int_equal(ah__loop_easy_made(f->loop), made); /* the aborted one's handle */
    ah_mock_request r;
    size_t n = ah_mock_request_count(f->mock);
    assert_int_equal(ah_mock_request_get(f->mock, n - 1, &r), AH_OK);
    for (size_t i = 0; i < r.header_count; i++)
        if (strcmp(r.headers[i].name, "x-test") == 0)
            fail_msg("the previous owner's header was sent again");
}

static void set_done(void *ud, const ah_error *e)
{
    (void)e;
    *(int *)ud = 1;
}

/* One request on the transport, run to its end; the mock's record of it. */
static void one_request(fixture *f, const char *method, const ah_header *hdr, size_t nh,
                        ah_mock_request *r)
{
    char url[128];
    snprintf(url, sizeof url, "%s/v1/messages", ah_mock_url(f->mock));
    const char *body = "{\"model\":\"m\",\"stream\":true,\"max_tokens\":5,"
                       "\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]}";
    ah_http_request req = {.method = method, .url = url, .headers = hdr, .n_headers = nh};
    if (!method || strcmp(method, "GET") != 0) {
        req.body = body;
        req.body_len = strlen(body);
    }
    int done = 0;
    ah_transport_sink sink = {.on_done = set_done};
    const ah_transport *tr = ah_transport_curl();
    void *att = NULL;
    ah_error e;
    assert_int_equal(tr->ops->start(tr->self, f->loop, &req, &sink, &done, &att, &e), AH_OK);
    for (int guard = 0; !done && guard < 20000; guard++)
        ah_loop_run_once(f->loop, 5);
    assert_true(done);
    size_t n = ah_mock_request_count(f->mock);
    assert_int_equal(ah_mock_request_get(f->mock, n - 1, r), AH_OK);
}

/* The request's headers go out as given, in order, an empty value as an empty header, and
 * with no "Expect" (the transport builds libcurl's header list itself, one block). */
static void request_headers_go_out_as_given(void **state)
{
    fixture *f = *state;
    char err[256];
    assert_int_equal(ah_mock_set_plan(f->mock, NULL, err, sizeof err), AH_OK);
    ah_header hdr[] = {{"content-type", "application/json"},
                       {"x-one", "1"},
                       {"x-empty", ""},
                       {"x-two", "two words: and a colon"}};
    ah_mock_request r;
    one_request(f, NULL, hdr, 4, &r);
    int one = -1, empty = -1, two = -1;
    for (size_t i = 0; i < r.header_count; i++) {
        const char *name = r.headers[i].name, *value = r.headers[i].value;
        if (strcasecmp(name, "x-one") == 0) {
            assert_string_equal(value, "1");
            one = (int)i;
        } else if (strcasecmp(name, "x-empty") == 0) {
            assert_string_equal(value, "");
            empty = (int)i;
        } else if (strcasecmp(name, "x-two") == 0) {
            assert_string_equal(value, "two words: and a colon");
            two = (int)i;
        } else if (strcasecmp(name, "expect") == 0) {
            fail_msg("an Expect header was sent");
        }
    }
    assert_true(one >= 0 && empty > one && two > empty);
}

static int has_header(const ah_mock_request *r, const char *name)
{
    for (size_t i = 0; i < r->header_count; i++)
        if (strcasecmp(r->headers[i].name, name) == 0)
            return 1;
    return 0;
}

/* A plain POST keeps its handle's fixed options for the next plain one (no reset); a
 * GET on that handle resets it first; each request goes out with its own method and
 * headers only, on the one handle. */
static void a_kept_handle_carries_only_the_fixed_options(void **state)
{
    fixture *f = *state;
    char err[256];
    assert_int_equal(ah_mock_set_plan(f->mock, NULL, err, sizeof err), AH_OK);
    ah_header first[] = {{"content-type", "application/json"}, {"x-first", "1"}};
    ah_header plain[] = {{"content-type", "application/json"}};
    ah_mock_request r;
    one_request(f, NULL, first, 2, &r);
    assert_string_equal(r.method, "POST");
    assert_true(has_header(&r, "x-first"));
    one_request(f, "POST", plain, 1, &r); /* on the kept handle */
    assert_string_equal(r.method, "POST");
    assert_false(has_header(&r, "x-first"));
    one_request(f, "GET", plain, 1, &r); /* a kept handle reset for a GET */
    assert_string_equal(r.method, "GET");
    one_request(f, "POST", first, 2, &r); /* after a GET: reset again, a POST */
    assert_string_equal(r.method, "POST");
    assert_true(has_header(&r, "x-first"));
    one_request(f, "POST", plain, 1, &r);
    assert_string_equal(r.method, "POST");
    assert_false(has_header(&r, "x-first"));
    assert_int_equal(ah__loop_easy_made(f->loop), 1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(sequential_runs_share_a_handle_and_a_connection,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(an_aborted_attempt_leaves_a_clean_handle, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(request_headers_go_out_as_given, setup, teardown),
        cmocka_unit_test_setup_teardown(a_kept_handle_carries_only_the_fixed_options, setup,
                                        teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
