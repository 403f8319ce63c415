/* test_transport.c - what lies between the client and the provider, over real loopback
 * sockets: TLS with a private CA (generated with the openssl program when the test
 * starts; the mock serves HTTPS with it), trusted through ca_file, ca_path,
 * CURL_CA_BUNDLE or SSL_CERT_FILE, and a certificate that does not verify failing at
 * once instead of being retried; a gzip-encoded stream read as the stream it is; a
 * redirect named with its Location; an unreachable proxy named as the proxy; a base_url
 * with a query reaching the provider's path. Every run is a worker run against the
 * built-in mock. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

#include "agenthost.h"
#include "agenthost/mock.h"

static char dir[] = "/tmp/ah-tls-XXXXXX";
static char ca_pem[128], ca_dir[128], srv_pem[128], srv_key[128];
static int have_certs;

/* A private CA and a server certificate for IP 127.0.0.1 that it signed. */
static int make_certs(void **state)
{
    (void)state;
    if (!mkdtemp(dir))
        return -1;
    snprintf(ca_pem, sizeof ca_pem, "%s/ca.pem", dir);
    snprintf(ca_dir, sizeof ca_dir, "%s/cadir", dir);
    snprintf(srv_pem, sizeof srv_pem, "%s/server.pem", dir);
    snprintf(srv_key, sizeof srv_key, "%s/server.key", dir);
    char cmd[2048];
    snprintf(cmd, sizeof cmd,
             "cd %s && "
             "openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes "
             "-keyout ca.key -out ca.pem -days 2 -subj /CN=agenthost-test-ca "
             "-addext basicConstraints=critical,CA:TRUE "
             "-addext keyUsage=critical,keyCertSign,cRLSign && "
             "openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes "
             "-keyout server.key -out server.csr -subj /CN=127.0.0.1 && "
             "printf 'subjectAltName=IP:127.0.0.1\\nbasicConstraints=CA:FALSE\\n"
             "extendedKeyUsage=serverAuth\\n' > ext.cnf && "
             "openssl x509 -req -in server.csr -CA ca.pem -CAkey ca.key -CAcreateserial "
             "-out server.pem -days 2 -extfile ext.cnf && "
             "mkdir cadir && cp ca.pem cadir/ && openssl rehash cadir",
             dir);
    char quiet[2200];
    snprintf(quiet, sizeof quiet, "(%s) >/dev/null 2>&1", cmd);
    have_certs = system(quiet) == 0;
    return 0;
}

static int remove_certs(void **state)
{
    (void)state;
    char cmd[256];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    return system(cmd) == 0 ? 0 : -1;
}

/* The variables libcurl and OpenSSL read are the test's to set: none from outside. */
static int clean_env(void **state)
{
    (void)state;
    static const char *const vars[] = {"CURL_CA_BUNDLE", "SSL_CERT_FILE", "SSL_CERT_DIR",
                                       "http_proxy",     "https_proxy",   "HTTPS_PROXY",
                                       "all_proxy",      "ALL_PROXY",     "no_proxy",
                                       "NO_PROXY"};
    for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++)
        unsetenv(vars[i]);
    return 0;
}

typedef struct run {
    ah_run_outcome outcome;
    ah_worker_stats stats;
    ah_error err;
    char text[256];
} run;

/* One worker run of "hi" through a client made from cc (base_url, ca_* set by the
 * caller), with up to 4 attempts and short backoff. */
static run run_once(ah_client_config *cc)
{
    run r = {0};
    char err[256];
    ah_client *client = NULL;
    if (!cc->model)
        cc->model = "mock-model";
    ah_client_new(cc, &client, err, sizeof err);
    if (!client)
        fail_msg("client: %s", err);
    ah_loop *loop = ah_loop_new(NULL, NULL);
    ah_policy pol;
    ah_policy_init(&pol);
    pol.max_attempts = 4;
    pol.base_ms = 1;
    pol.cap_ms = 5;
    pol.attempt_timeout_ms = 20000;
    ah_worker_config wc = {.loop = loop, .client = client, .policy = &pol};
    ah_worker *w = NULL;
    ah_worker_new(&wc, &w, err, sizeof err);
    if (!w)
        fail_msg("worker: %s", err);
    r.outcome = ah_worker_run(w, "hi");
    ah_worker_get_stats(w, &r.stats);
    r.err = *ah_worker_error(w);
    snprintf(r.text, sizeof r.text, "%s", ah_worker_text(w));
    ah_worker_free(w);
    ah_client_free(client);
    ah_loop_free(loop);
    return r;
}

static ah_mock *start_mock(const char *plan, int tls)
{
    ah_mock_config mc;
    ah_mock_config_init(&mc);
    mc.plan_json = plan;
    mc.text = "pong";
    if (tls) {
        mc.tls_cert = srv_pem;
        mc.tls_key = srv_key;
    }
    ah_mock *m = NULL;
    char err[256];
    ah_mock_new(&mc, &m, err, sizeof err);
    if (!m)
        fail_msg("mock: %s", err);
    return m;
}

/* ---- TLS ------------------------------------------------------------------------------ */

static void private_ca_through_the_client_fields(void **state)
{
    (void)state;
    if (!have_certs)
        skip();
    ah_mock *m = start_mock(NULL, 1);
    assert_int_equal(strncmp(ah_mock_url(m), "https://", 8), 0);
    ah_client_config cc = {.wire = AH_WIRE_ANTHROPIC, .base_url = ah_mock_url(m)};
    cc.ca_file = ca_pem;
    run r = run_once(&cc);
    assert_int_equal(r.outcome, AH_OUTCOME_COMPLETED);
    assert_string_equal(r.text, "pong");
    assert_int_equal(r.stats.attempts, 1);
    cc.ca_file = NULL;
    cc.ca_path = ca_dir;
    r = run_once(&cc);
    assert_int_equal(r.outcome, AH_OUTCOME_COMPLETED);
    /* an explicit field wins over the environment */
    setenv("CURL_CA_BUNDLE", "/nonexistent/bundle.pem", 1);
    cc.ca_path = NULL;
    cc.ca_file = ca_pem;
    r = run_once(&cc);
    assert_int_equal(r.outcome, AH_OUTCOME_COMPLETED);
    unsetenv("CURL_CA_BUNDLE");
    ah_mock_free(m);
}

static void private_ca_through_the_environment(void **state)
{
    (void)state;
    if (!have_certs)
        skip();
    ah_mock *m = start_mock(NULL, 1);
    ah_client_config cc = {.wire = AH_WIRE_OPENAI, .base_url = ah_mock_url(m)};
    static const char *const vars[] = {"CURL_CA_BUNDLE", "SSL_CERT_FILE"};
    for (size_t i = 0; i < 2; i++) {
        setenv(vars[i], ca_pem, 1);
        run r = run_once(&cc);
        if (r.outcome != AH_OUTCOME_COMPLETED)
            fail_msg("%s: %s", vars[i], r.err.message);
        unsetenv(vars[i]);
    }
    setenv("SSL_CERT_DIR", ca_dir, 1);
    run r = run_once(&cc);
    assert_int_equal(r.outcome, AH_OUTCOME_COMPLETED);
    unsetenv("SSL_CERT_DIR");
    ah_mock_free(m);
}

/* A certificate that does not verify fails the same way on every attempt: one attempt,
 * not max_attempts (it was retried as a connect error). */
static void a_certificate_failure_is_not_retried(void **state)
{
    (void)state;
    if (!have_certs)
        skip();
    ah_mock *m = start_mock(NULL, 1);
    ah_client_config cc = {.wire = AH_WIRE_ANTHROPIC, .base_url = ah_mock_url(m)};
    run r = run_once(&cc); /* the system's store does not know the private CA */
    assert_int_equal(r.outcome, AH_OUTCOME_FAILED);
    assert_int_equal(r.stats.attempts, 1);
    assert_int_equal(r.err.kind, AH_EK_CONNECT);
    assert_int_equal(r.err.should_retry, 0);
    assert_false(ah_error_is_retryable(&r.err));
    assert_non_null(strstr(r.err.message, "certificate"));
    assert_non_null(strstr(r.err.message, "ca_file"));
    assert_int_equal(ah_mock_request_count(m), 0);
    /* the wrong CA bundle in the environment: the same */
    setenv("SSL_CERT_FILE", srv_pem, 1);
    r = run_once(&cc);
    assert_int_equal(r.stats.attempts, 1);
    unsetenv("SSL_CERT_FILE");
    ah_mock_free(m);
}

static void an_unreadable_ca_file_is_refused_by_name(void **state)
{
    (void)state;
    ah_client_config cc = {.wire = AH_WIRE_ANTHROPIC, .base_url = "https://h",
                           .model = "m", .ca_file = "/nonexistent/ca.pem"};
    ah_client *c = NULL;
    char err[256];
    assert_int_equal(ah_client_new(&cc, &c, err, sizeof err), AH_ERR_INVALID);
    assert_null(c);
    assert_non_null(strstr(err, "client.ca_file '/nonexistent/ca.pem' cannot be read"));
    cc.ca_file = NULL;
    cc.ca_path = "/nonexistent/dir";
    assert_int_equal(ah_client_new(&cc, &c, err, sizeof err), AH_ERR_INVALID);
    assert_non_null(strstr(err, "client.ca_path"));
}

/* ---- what comes back ------------------------------------------------------------------ */

/* A gateway that gzips the event stream (asked or not): libcurl decodes it. It used to
 * reach the decoder compressed and end as "stream ended before message_stop". */
static void a_gzip_encoded_stream_is_decoded(void **state)
{
    (void)state;
    static const ah_wire wires[] = {AH_WIRE_ANTHROPIC, AH_WIRE_OPENAI, AH_WIRE_RESPONSES};
    ah_mock *m = start_mock("{\"steps\": [], \"then\": {\"ok\": true, \"gzip\": true}}", 0);
    for (size_t i = 0; i < 3; i++) {
        ah_client_config cc = {.wire = wires[i], .base_url = ah_mock_url(m)};
        run r = run_once(&cc);
        if (r.outcome != AH_OUTCOME_COMPLETED)
            fail_msg("%s: %s", ah_wire_name(wires[i]), r.err.message);
        assert_string_equal(r.text, "pong");
        assert_int_equal(r.stats.attempts, 1);
    }
    ah_mock_request req;
    assert_int_equal(ah_mock_request_get(m, 0, &req), AH_OK);
    int offered = 0;
    for (size_t i = 0; i < req.header_count; i++)
        if (strcasecmp(req.headers[i].name, "accept-encoding") == 0 &&
            strstr(req.headers[i].value, "gzip"))
            offered = 1;
    assert_true(offered);
    ah_mock_free(m);
}

static void a_redirect_names_where_it_points(void **state)
{
    (void)state;
    ah_mock *m = start_mock("[{\"status\": 307, \"headers\": {\"Location\": "
                            "\"https://api2.example.com/v1/messages\"}}]",
                            0);
    ah_client_config cc = {.wire = AH_WIRE_ANTHROPIC, .base_url = ah_mock_url(m)};
    run r = run_once(&cc);
    assert_int_equal(r.outcome, AH_OUTCOME_FAILED);
    assert_int_equal(r.stats.attempts, 1);
    if (!strstr(r.err.message, "HTTP 307 Temporary Redirect to "
                               "https://api2.example.com/v1/messages") ||
        !strstr(r.err.message, "base_url"))
        fail_msg("message: %s", r.err.message);
    ah_mock_free(m);
}

/* A port nothing listens on. */
static int closed_port(void)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof a;
    assert_int_equal(bind(fd, (struct sockaddr *)&a, sizeof a), 0);
    assert_int_equal(getsockname(fd, (struct sockaddr *)&a, &len), 0);
    close(fd);
    return ntohs(a.sin_port);
}

static void an_unreachable_proxy_is_named(void **state)
{
    (void)state;
    ah_mock *m = start_mock(NULL, 0);
    char proxy[64];
    snprintf(proxy, sizeof proxy, "http://user:pw123456@127.0.0.1:%d", closed_port());
    setenv("http_proxy", proxy, 1);
    ah_client_config cc = {.wire = AH_WIRE_ANTHROPIC, .base_url = ah_mock_url(m)};
    run r = run_once(&cc);
    assert_int_equal(r.outcome, AH_OUTCOME_FAILED);
    assert_int_equal(r.err.kind, AH_EK_CONNECT);
    if (!strstr(r.err.message, "through the proxy 127.0.0.1:") ||
        !strstr(r.err.message, "from $http_proxy"))
        fail_msg("message: %s", r.err.message);
    assert_null(strstr(r.err.message, "pw123456"));
    assert_int_equal(ah_mock_request_count(m), 0);
    /* no_proxy naming the host: straight to the mock */
    setenv("no_proxy", "localhost,127.0.0.1", 1);
    r = run_once(&cc);
    assert_int_equal(r.outcome, AH_OUTCOME_COMPLETED);
    unsetenv("no_proxy");
    unsetenv("http_proxy");
    /* and a connection refused without any proxy says nothing of one */
    char url[64];
    snprintf(url, sizeof url, "http://127.0.0.1:%d", closed_port());
    ah_client_config direct = {.wire = AH_WIRE_ANTHROPIC, .base_url = url};
    r = run_once(&direct);
    assert_int_equal(r.outcome, AH_OUTCOME_FAILED);
    assert_null(strstr(r.err.message, "proxy"));
    ah_mock_free(m);
}

/* base_url with a query (Azure's api-version): the request reaches the format's path and
 * carries the query. */
static void a_base_url_query_stays_a_query(void **state)
{
    (void)state;
    ah_mock *m = start_mock(NULL, 0);
    char base[128];
    snprintf(base, sizeof base, "%s/v1?api-version=2024-10-21", ah_mock_url(m));
    ah_client_config cc = {.wire = AH_WIRE_OPENAI, .base_url = base};
    run r = run_once(&cc);
    if (r.outcome != AH_OUTCOME_COMPLETED)
        fail_msg("%s", r.err.message);
    ah_mock_request req;
    assert_int_equal(ah_mock_request_get(m, 0, &req), AH_OK);
    assert_string_equal(req.path, "/v1/chat/completions");
    ah_mock_free(m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(private_ca_through_the_client_fields, clean_env),
        cmocka_unit_test_setup(private_ca_through_the_environment, clean_env),
        cmocka_unit_test_setup(a_certificate_failure_is_not_retried, clean_env),
        cmocka_unit_test_setup(an_unreadable_ca_file_is_refused_by_name, clean_env),
        cmocka_unit_test_setup(a_gzip_encoded_stream_is_decoded, clean_env),
        cmocka_unit_test_setup(a_redirect_names_where_it_points, clean_env),
        cmocka_unit_test_setup(an_unreachable_proxy_is_named, clean_env),
        cmocka_unit_test_setup(a_base_url_query_stays_a_query, clean_env),
    };
    return cmocka_run_group_tests(tests, make_certs, remove_certs);
}
