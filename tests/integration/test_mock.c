/* test_mock.c - the mock provider over real loopback sockets, seen from a libcurl client:
 * every wire format streaming and not, every fault kind as a client observes it, the
 * request log (with secret redaction), plan replacement and exhaustion, and shutdown
 * while a connection is stalled. No timed assertions: timeouts only bound a stall or a
 * delay that would otherwise last far longer. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <curl/curl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "agenthost.h"

/* ---- a small client ---------------------------------------------------------------- */

typedef struct resp {
    CURLcode rc;
    long status;
    char *body;
    size_t len, cap;
    char headers[8192];
    size_t hlen;
    atomic_int events; /* complete SSE events received so far */
} resp;

static size_t on_body(char *p, size_t sz, size_t n, void *ud)
{
    resp *r = ud;
    size_t add = sz * n;
    if (r->len + add + 1 > r->cap) {
        size_t cap = r->cap ? r->cap : 4096;
        while (cap < r->len + add + 1)
            cap *= 2;
        char *b = realloc(r->body, cap);
        if (!b)
            return 0;
        r->body = b;
        r->cap = cap;
    }
    /* Count blank lines in the new bytes only (one byte back: a "\n\n" may straddle). */
    size_t from = r->len ? r->len - 1 : 0;
    memcpy(r->body + r->len, p, add);
    r->len += add;
    r->body[r->len] = '\0';
    int ev = atomic_load(&r->events);
    for (const char *s = r->body + from; (s = strstr(s, "\n\n")); s += 2)
        ev++;
    atomic_store(&r->events, ev);
    return add;
}

static size_t on_header(char *p, size_t sz, size_t n, void *ud)
{
    resp *r = ud;
    size_t add = sz * n;
    if (r->hlen + add < sizeof r->headers) {
        memcpy(r->headers + r->hlen, p, add);
        r->hlen += add;
        r->headers[r->hlen] = '\0';
    }
    return add;
}

static void resp_free(resp *r)
{
    free(r->body);
    memset(r, 0, sizeof *r);
}

/* POST body to url+path. method NULL = POST. extra: NULL-terminated header lines. */
static void request(const char *url, const char *path, const char *method,
                    const char *body, long timeout_ms, const char *const *extra, resp *r)
{
    char full[256];
    snprintf(full, sizeof full, "%s%s", url, path);
    /* Field by field: another thread may be polling r->events already. */
    r->rc = CURLE_OK;
    r->status = 0;
    r->body = NULL;
    r->len = r->cap = r->hlen = 0;
    r->headers[0] = '\0';
    atomic_store(&r->events, 0);
    CURL *c = curl_easy_init();
    assert_non_null(c);
    struct curl_slist *h = curl_slist_append(NULL, "Content-Type: application/json");
    for (size_t i = 0; extra && extra[i]; i++)
        h = curl_slist_append(h, extra[i]);
    curl_easy_setopt(c, CURLOPT_URL, full);
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, h);
    if (method)
        curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, method);
    else
        curl_easy_setopt(c, CURLOPT_POSTFIELDS, body);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, r);
    curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(c, CURLOPT_HEADERDATA, r);
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, timeout_ms ? timeout_ms : 30000L);
    r->rc = curl_easy_perform(c);
    curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &r->status);
    curl_easy_cleanup(c);
    curl_slist_free_all(h);
}

/* The value of a response header (name case-insensitive), copied to out; 0 if absent. */
static int header_value(const resp *r, const char *name, char *out, size_t size)
{
    size_t nl = strlen(name);
    for (const char *line = r->headers; line && *line;) {
        const char *end = strstr(line, "\r\n");
        if (!end)
            break;
        if (strncasecmp(line, name, nl) == 0 && line[nl] == ':') {
            const char *v = line + nl + 1;
            while (*v == ' ')
                v++;
            snprintf(out, size, "%.*s", (int)(end - v), v);
            return 1;
        }
        line = end + 2;
    }
    return 0;
}

/* ---- SSE helpers ------------------------------------------------------------------- */

typedef struct ev {
    char name[64];
    char *data; /* points into a copy owned by the caller's evlist */
} ev;

typedef struct evlist {
    char *copy;
    ev v[4096];
    size_t n;
    int trailing; /* bytes after the last complete event */
} evlist;

static void split(const char *body, evlist *l)
{
    l->copy = strdup(body ? body : "");
    l->n = 0;
    char *p = l->copy;
    char *end;
    while ((end = strstr(p, "\n\n")) && l->n < 4096) {
        *end = '\0';
        ev *e = &l->v[l->n++];
        e->name[0] = '\0';
        e->data = NULL;
        for (char *line = p; line;) {
            char *nl = strchr(line, '\n');
            if (nl)
                *nl = '\0';
            if (strncmp(line, "event: ", 7) == 0)
                snprintf(e->name, sizeof e->name, "%s", line + 7);
            else if (strncmp(line, "data: ", 6) == 0)
                e->data = line + 6;
            line = nl ? nl + 1 : NULL;
        }
        p = end + 2;
    }
    l->trailing = (int)strlen(p);
}

static evlist *evlist_new(const char *body)
{
    evlist *l = calloc(1, sizeof *l);
    assert_non_null(l);
    split(body, l);
    return l;
}

static void evlist_free(evlist *l)
{
    if (l)
        free(l->copy);
    free(l);
}

static int is_json(const char *s)
{
    cJSON *j = s ? cJSON_Parse(s) : NULL;
    int ok = j != NULL;
    cJSON_Delete(j);
    return ok;
}

/* Text of a stream per format, as a client would assemble it. */
static char *stream_text(ah_wire wire, const evlist *l)
{
    size_t cap = 1 << 16, len = 0;
    char *out = calloc(1, cap);
    for (size_t i = 0; i < l->n; i++) {
        cJSON *j = cJSON_Parse(l->v[i].data);
        if (!j)
            continue;
        const char *t = NULL;
        if (wire == AH_WIRE_ANTHROPIC) {
            t = cJSON_GetStringValue(
                cJSON_GetObjectItem(cJSON_GetObjectItem(j, "delta"), "text"));
        } else if (wire == AH_WIRE_OPENAI) {
            const cJSON *ch = cJSON_GetArrayItem(cJSON_GetObjectItem(j, "choices"), 0);
            t = cJSON_GetStringValue(
                cJSON_GetObjectItem(cJSON_GetObjectItem(ch, "delta"), "content"));
        } else if (strcmp(l->v[i].name, "response.output_text.delta") == 0) {
            t = cJSON_GetStringValue(cJSON_GetObjectItem(j, "delta"));
        }
        if (t) {
            size_t n = strlen(t);
            while (len + n + 1 > cap)
                out = realloc(out, cap *= 2);
            memcpy(out + len, t, n + 1);
            len += n;
        }
        cJSON_Delete(j);
    }
    return out;
}

/* Text of a non-streaming body per format. */
static char *body_text(ah_wire wire, const char *body)
{
    cJSON *j = cJSON_Parse(body);
    assert_non_null(j);
    const cJSON *t;
    if (wire == AH_WIRE_ANTHROPIC)
        t = cJSON_GetObjectItem(cJSON_GetArrayItem(cJSON_GetObjectItem(j, "content"), 0),
                                "text");
    else if (wire == AH_WIRE_OPENAI)
        t = cJSON_GetObjectItem(
            cJSON_GetObjectItem(cJSON_GetArrayItem(cJSON_GetObjectItem(j, "choices"), 0),
                                "message"),
            "content");
    else
        t = cJSON_GetObjectItem(
            cJSON_GetArrayItem(
                cJSON_GetObjectItem(
                    cJSON_GetArrayItem(cJSON_GetObjectItem(j, "output"), 0), "content"),
                0),
            "text");
    char *s = strdup(cJSON_GetStringValue(t) ? cJSON_GetStringValue(t) : "");
    cJSON_Delete(j);
    return s;
}

static const ah_wire wires[] = {AH_WIRE_ANTHROPIC, AH_WIRE_OPENAI, AH_WIRE_RESPONSES};

/* A minimal valid request of each format. */
static void make_body(ah_wire wire, int stream, const char *user, char *out, size_t size)
{
    const char *s = stream ? "true" : "false";
    if (wire == AH_WIRE_ANTHROPIC)
        snprintf(out, size,
                 "{\"model\":\"claude-mock\",\"max_tokens\":256,\"stream\":%s,"
                 "\"messages\":[{\"role\":\"user\",\"content\":\"%s\"}]}",
                 s, user);
    else if (wire == AH_WIRE_OPENAI)
        snprintf(
            out, size,
            "{\"model\":\"gpt-mock\",\"stream\":%s,\"stream_options\":{\"include_usage\":"
            "true},\"messages\":[{\"role\":\"user\",\"content\":\"%s\"}]}",
            s, user);
    else
        snprintf(out, size, "{\"model\":\"gpt-mock\",\"stream\":%s,\"input\":\"%s\"}", s,
                 user);
}

static ah_mock *start(const char *plan)
{
    ah_mock_config cfg;
    ah_mock_config_init(&cfg);
    cfg.plan_json = plan;
    char err[256] = "";
    ah_mock *m = NULL;
    ah_mock_new(&cfg, &m, err, sizeof err);
    if (!m)
        fprintf(stderr, "ah_mock_new: %s\n", err);
    assert_non_null(m);
    return m;
}

/* The last event marks a proper end of the stream in each format. */
static void assert_ends_properly(ah_wire wire, const evlist *l)
{
    assert_true(l->n > 0);
    assert_int_equal(l->trailing, 0);
    const ev *last = &l->v[l->n - 1];
    if (wire == AH_WIRE_ANTHROPIC)
        assert_string_equal(last->name, "message_stop");
    else if (wire == AH_WIRE_OPENAI)
        assert_string_equal(last->data, "[DONE]");
    else
        assert_string_equal(last->name, "response.completed");
}

static void assert_all_json(ah_wire wire, const evlist *l, size_t upto)
{
    for (size_t i = 0; i < upto; i++) {
        if (wire == AH_WIRE_OPENAI && l->v[i].data && strcmp(l->v[i].data, "[DONE]") == 0)
            continue;
        if (!is_json(l->v[i].data))
            fprintf(stderr, "event %zu is not JSON: %s\n", i, l->v[i].data);
        assert_true(is_json(l->v[i].data));
    }
}

/* ---- tests ------------------------------------------------------------------------- */

static void each_format_streams_and_not(void **state)
{
    (void)state;
    ah_mock *m = start(NULL);
    assert_int_equal(strncmp(ah_mock_url(m), "http://127.0.0.1:", 17), 0);
    assert_int_equal(atoi(ah_mock_url(m) + 17), ah_mock_port(m));
    assert_true(ah_mock_port(m) > 0);
    for (int f = 0; f < 3; f++) {
        char body[512], hv[256];
        resp rs, rn;
        make_body(wires[f], 1, "Tell me a story", body, sizeof body);
        request(ah_mock_url(m), ah_wire_path(wires[f]), NULL, body, 0, NULL, &rs);
        assert_int_equal(rs.rc, CURLE_OK);
        assert_int_equal(rs.status, 200);
        assert_true(header_value(&rs, "Content-Type", hv, sizeof hv));
        assert_string_equal(hv, "text/event-stream; charset=utf-8");
        assert_true(header_value(
            &rs, wires[f] == AH_WIRE_ANTHROPIC ? "request-id" : "x-request-id", hv,
            sizeof hv));
        assert_int_equal(strncmp(hv, "req_", 4), 0);
        evlist *l = evlist_new(rs.body);
        assert_ends_properly(wires[f], l);
        assert_all_json(wires[f], l, l->n);
        char *st = stream_text(wires[f], l);
        assert_string_equal(
            st, "You said: \"Tell me a story\". This is a deterministic reply "
                "from the agenthost mock provider.");

        make_body(wires[f], 0, "Tell me a story", body, sizeof body);
        request(ah_mock_url(m), ah_wire_path(wires[f]), NULL, body, 0, NULL, &rn);
        assert_int_equal(rn.rc, CURLE_OK);
        assert_int_equal(rn.status, 200);
        assert_true(header_value(&rn, "Content-Type", hv, sizeof hv));
        assert_string_equal(hv, "application/json");
        char *nt = body_text(wires[f], rn.body);
        assert_string_equal(nt, st);
        free(nt);
        free(st);
        evlist_free(l);
        resp_free(&rs);
        resp_free(&rn);
    }
    assert_int_equal(ah_mock_request_count(m), 6);
    ah_mock_free(m);
}

static void tool_call_then_result(void **state)
{
    (void)state;
    ah_mock *m = start(NULL);
    resp r;
    const char *ask =
        "{\"model\":\"m\",\"max_tokens\":99,\"stream\":true,\"tools\":[{\"name\":"
        "\"get_weather\",\"input_schema\":{\"type\":\"object\",\"properties\":{"
        "\"city\":{\"type\":\"string\"}},\"required\":[\"city\"]}}],\"messages\":"
        "[{\"role\":\"user\",\"content\":\"weather?\"}]}";
    request(ah_mock_url(m), "/v1/messages", NULL, ask, 0, NULL, &r);
    assert_int_equal(r.status, 200);
    evlist *l = evlist_new(r.body);
    assert_ends_properly(AH_WIRE_ANTHROPIC, l);
    /* The tool_use block, its input assembled from the input_json_delta fragments. */
    char id[64] = "", args[256] = "";
    char stop[32] = "";
    for (size_t i = 0; i < l->n; i++) {
        cJSON *j = cJSON_Parse(l->v[i].data);
        const cJSON *cb = cJSON_GetObjectItem(j, "content_block");
        if (cJSON_GetStringValue(cJSON_GetObjectItem(cb, "id")))
            snprintf(id, sizeof id, "%s",
                     cJSON_GetStringValue(cJSON_GetObjectItem(cb, "id")));
        const cJSON *d = cJSON_GetObjectItem(j, "delta");
        const char *pj = cJSON_GetStringValue(cJSON_GetObjectItem(d, "partial_json"));
        if (pj)
            strncat(args, pj, sizeof args - strlen(args) - 1);
        const char *sr = cJSON_GetStringValue(cJSON_GetObjectItem(d, "stop_reason"));
        if (sr)
            snprintf(stop, sizeof stop, "%s", sr);
        cJSON_Delete(j);
    }
    assert_int_equal(strncmp(id, "toolu_", 6), 0);
    assert_string_equal(args, "{\"city\":\"mock_city\"}");
    assert_string_equal(stop, "tool_use");
    evlist_free(l);
    resp_free(&r);

    char answer[1024];
    snprintf(
        answer, sizeof answer,
        "{\"model\":\"m\",\"max_tokens\":99,\"stream\":false,\"tools\":[{\"name\":"
        "\"get_weather\",\"input_schema\":{\"type\":\"object\"}}],\"messages\":["
        "{\"role\":\"user\",\"content\":\"weather?\"},{\"role\":\"assistant\","
        "\"content\":"
        "[{\"type\":\"tool_use\",\"id\":\"%s\",\"name\":\"get_weather\",\"input\":{}}]},"
        "{\"role\":\"user\",\"content\":[{\"type\":\"tool_result\",\"tool_use_id\":\"%"
        "s\","
        "\"content\":\"18C and windy\"}]}]}",
        id, id);
    request(ah_mock_url(m), "/v1/messages", NULL, answer, 0, NULL, &r);
    assert_int_equal(r.status, 200);
    char *t = body_text(AH_WIRE_ANTHROPIC, r.body);
    assert_string_equal(t, "The tool returned: 18C and windy");
    free(t);
    resp_free(&r);
    ah_mock_free(m);
}

static void status_steps_send_headers_and_error_shapes(void **state)
{
    (void)state;
    ah_mock *m = start("[{\"status\": 529, \"headers\": {\"retry-after\": 3, "
                       "\"retry-after-ms\": \"2500\", \"x-should-retry\": \"false\"}},"
                       " {\"status\": 503, \"headers\": {\"Retry-After\": "
                       "{\"date_in_seconds\": 30}}},"
                       " {\"status\": 429, \"error_type\": \"rate_limit_error\","
                       "  \"message\": \"slow down\"},"
                       " {\"status\": 502, \"body\": \"<html>bad gateway</html>\"}]");
    char body[512], hv[128];
    resp r;
    make_body(AH_WIRE_ANTHROPIC, 1, "x", body, sizeof body);
    request(ah_mock_url(m), "/v1/messages", NULL, body, 0, NULL, &r);
    assert_int_equal(r.rc, CURLE_OK);
    assert_int_equal(r.status, 529);
    assert_true(header_value(&r, "retry-after", hv, sizeof hv));
    assert_string_equal(hv, "3");
    assert_true(header_value(&r, "retry-after-ms", hv, sizeof hv));
    assert_string_equal(hv, "2500");
    assert_true(header_value(&r, "x-should-retry", hv, sizeof hv));
    assert_string_equal(hv, "false");
    cJSON *j = cJSON_Parse(r.body);
    assert_string_equal(cJSON_GetStringValue(cJSON_GetObjectItem(j, "type")), "error");
    const cJSON *e = cJSON_GetObjectItem(j, "error");
    assert_string_equal(cJSON_GetStringValue(cJSON_GetObjectItem(e, "type")),
                        "overloaded_error");
    assert_string_equal(cJSON_GetStringValue(cJSON_GetObjectItem(e, "message")),
                        "Overloaded");
    assert_non_null(cJSON_GetStringValue(cJSON_GetObjectItem(j, "request_id")));
    cJSON_Delete(j);
    resp_free(&r);

    make_body(AH_WIRE_OPENAI, 1, "x", body, sizeof body);
    request(ah_mock_url(m), "/v1/chat/completions", NULL, body, 0, NULL, &r);
    assert_int_equal(r.status, 503);
    assert_true(header_value(&r, "Retry-After", hv, sizeof hv));
    time_t when = curl_getdate(hv, NULL);
    time_t now = time(NULL);
    assert_true(when >= now + 20 && when <= now + 40); /* an HTTP-date ~30 s ahead */
    j = cJSON_Parse(r.body);
    e = cJSON_GetObjectItem(j, "error");
    assert_string_equal(cJSON_GetStringValue(cJSON_GetObjectItem(e, "type")),
                        "server_error");
    assert_true(cJSON_IsNull(cJSON_GetObjectItem(e, "param")));
    cJSON_Delete(j);
    resp_free(&r);

    make_body(AH_WIRE_RESPONSES, 0, "x", body, sizeof body);
    request(ah_mock_url(m), "/v1/responses", NULL, body, 0, NULL, &r);
    assert_int_equal(r.status, 429);
    assert_string_equal(r.body, "{\"error\":{\"message\":\"slow down\",\"type\":"
                                "\"rate_limit_error\",\"param\":null,\"code\":null}}");
    resp_free(&r);

    request(ah_mock_url(m), "/v1/responses", NULL, body, 0, NULL, &r);
    assert_int_equal(r.status, 502);
    assert_string_equal(r.body, "<html>bad gateway</html>");
    resp_free(&r);
    ah_mock_free(m);
}

static void reset_and_delayed_headers(void **state)
{
    (void)state;
    ah_mock *m = start(
        "[{\"reset\": true}, {\"delay_headers_ms\": 20000},"
        " {\"delay_headers_ms\": 30}, {\"status\": 503, \"delay_headers_ms\": 30}]");
    char body[512];
    resp r;
    make_body(AH_WIRE_OPENAI, 1, "x", body, sizeof body);
    request(ah_mock_url(m), "/v1/chat/completions", NULL, body, 0, NULL, &r);
    assert_int_equal(r.rc, CURLE_GOT_NOTHING); /* closed before any response byte */
    assert_int_equal(r.status, 0);
    assert_int_equal(r.len, 0);
    resp_free(&r);

    /* Headers held back far longer than the client waits. */
    request(ah_mock_url(m), "/v1/chat/completions", NULL, body, 300, NULL, &r);
    assert_int_equal(r.rc, CURLE_OPERATION_TIMEDOUT);
    assert_int_equal(r.status, 0);
    assert_int_equal(r.hlen, 0);
    resp_free(&r);

    /* A short delay, then a normal reply; a delay combined with a status. */
    request(ah_mock_url(m), "/v1/chat/completions", NULL, body, 0, NULL, &r);
    assert_int_equal(r.rc, CURLE_OK);
    assert_int_equal(r.status, 200);
    evlist *l = evlist_new(r.body);
    assert_ends_properly(AH_WIRE_OPENAI, l);
    evlist_free(l);
    resp_free(&r);
    request(ah_mock_url(m), "/v1/chat/completions", NULL, body, 0, NULL, &r);
    assert_int_equal(r.status, 503);
    resp_free(&r);

    ah_mock_request q;
    assert_int_equal(ah_mock_request_get(m, 0, &q), AH_OK);
    assert_string_equal(q.step, "reset");
    assert_int_equal(q.status, 0);
    assert_int_equal(q.step_index, 1);
    assert_int_equal(ah_mock_request_get(m, 1, &q), AH_OK);
    assert_string_equal(q.step, "delay");
    assert_int_equal(ah_mock_request_get(m, 3, &q), AH_OK);
    assert_string_equal(q.step, "status");
    assert_int_equal(q.status, 503);
    ah_mock_free(m);
}

static void cut_after_k_events(void **state)
{
    (void)state;
    ah_mock *m = start("[{\"cut_after_events\": 3}, {\"cut_after_events\": 3},"
                       " {\"cut_after_events\": 3}, {\"cut_after_events\": 0},"
                       " {\"cut_after_events\": 100000}, {\"cut_after_events\": 1}]");
    char body[512];
    for (int f = 0; f < 3; f++) {
        resp r;
        make_body(wires[f], 1, "x", body, sizeof body);
        request(ah_mock_url(m), ah_wire_path(wires[f]), NULL, body, 0, NULL, &r);
        assert_int_equal(r.status, 200);
        assert_int_equal(r.rc, CURLE_PARTIAL_FILE); /* chunked body never terminated */
        evlist *l = evlist_new(r.body);
        assert_int_equal(l->n, 3);
        assert_int_equal(l->trailing, 0); /* whole events only */
        assert_all_json(wires[f], l, l->n);
        evlist_free(l);
        resp_free(&r);
    }
    /* K = 0: headers, then nothing. */
    resp r;
    make_body(AH_WIRE_ANTHROPIC, 1, "x", body, sizeof body);
    request(ah_mock_url(m), "/v1/messages", NULL, body, 0, NULL, &r);
    assert_int_equal(r.status, 200);
    assert_int_equal(r.rc, CURLE_PARTIAL_FILE);
    assert_int_equal(r.len, 0);
    resp_free(&r);
    /* K past the end: the cut comes just before the final event (after it the response
     * would be complete), so the stream still never ends. */
    request(ah_mock_url(m), "/v1/messages", NULL, body, 0, NULL, &r);
    assert_int_equal(r.rc, CURLE_PARTIAL_FILE);
    evlist *l = evlist_new(r.body);
    assert_string_equal(l->v[l->n - 1].name, "message_delta");
    evlist_free(l);
    resp_free(&r);
    /* Non-streaming: half the body, then the cut (Content-Length not reached). */
    make_body(AH_WIRE_OPENAI, 0, "x", body, sizeof body);
    request(ah_mock_url(m), "/v1/chat/completions", NULL, body, 0, NULL, &r);
    assert_int_equal(r.status, 200);
    assert_int_equal(r.rc, CURLE_PARTIAL_FILE);
    assert_true(r.len > 0);
    assert_false(is_json(r.body));
    resp_free(&r);
    ah_mock_free(m);
}

static void stall_after_k_events(void **state)
{
    (void)state;
    ah_mock *m = start("[{\"stall_after_events\": 2}, {\"stall_after_events\": 4, "
                       "\"stall_ms\": 50}]");
    char body[512];
    resp r;
    make_body(AH_WIRE_RESPONSES, 1, "x", body, sizeof body);
    /* Stalled without end: the client's own timeout ends it, with exactly 2 events. */
    request(ah_mock_url(m), "/v1/responses", NULL, body, 1500, NULL, &r);
    assert_int_equal(r.status, 200);
    assert_int_equal(r.rc, CURLE_OPERATION_TIMEDOUT);
    evlist *l = evlist_new(r.body);
    assert_int_equal(l->n, 2);
    assert_string_equal(l->v[0].name, "response.created");
    assert_string_equal(l->v[1].name, "response.in_progress");
    evlist_free(l);
    resp_free(&r);
    /* A bounded stall is a pause: the stream then completes. */
    request(ah_mock_url(m), "/v1/responses", NULL, body, 0, NULL, &r);
    assert_int_equal(r.rc, CURLE_OK);
    l = evlist_new(r.body);
    assert_ends_properly(AH_WIRE_RESPONSES, l);
    assert_all_json(AH_WIRE_RESPONSES, l, l->n);
    evlist_free(l);
    resp_free(&r);
    ah_mock_free(m);
}

static void malformed_and_error_events(void **state)
{
    (void)state;
    ah_mock *m = start("[{\"malformed_event_after\": 2}, {\"malformed_event_after\": 2},"
                       " {\"malformed_event_after\": 2},"
                       " {\"error_event_after\": 3}, {\"error_event_after\": 3},"
                       " {\"error_event_after\": 3, \"error_type\": \"rate_limit_error\","
                       "  \"message\": \"too fast\"},"
                       " {\"error_event_after\": 1}]");
    char body[512];
    for (int f = 0; f < 3; f++) {
        resp r;
        make_body(wires[f], 1, "x", body, sizeof body);
        request(ah_mock_url(m), ah_wire_path(wires[f]), NULL, body, 0, NULL, &r);
        assert_int_equal(r.rc, CURLE_OK); /* the stream itself ends cleanly */
        evlist *l = evlist_new(r.body);
        assert_int_equal(l->n, 3);
        assert_all_json(wires[f], l, 2);
        assert_non_null(l->v[2].data);
        assert_false(is_json(l->v[2].data));
        evlist_free(l);
        resp_free(&r);
    }
    for (int f = 0; f < 3; f++) {
        resp r;
        make_body(wires[f], 1, "x", body, sizeof body);
        request(ah_mock_url(m), ah_wire_path(wires[f]), NULL, body, 0, NULL, &r);
        assert_int_equal(r.rc, CURLE_OK);
        evlist *l = evlist_new(r.body);
        assert_all_json(wires[f], l, l->n);
        cJSON *j = cJSON_Parse(l->v[3].data);
        const cJSON *e = cJSON_GetObjectItem(j, "error");
        assert_non_null(e);
        if (wires[f] == AH_WIRE_ANTHROPIC) {
            assert_int_equal(l->n, 4);
            assert_string_equal(l->v[3].name, "error");
            assert_string_equal(cJSON_GetStringValue(cJSON_GetObjectItem(j, "type")),
                                "error");
            assert_true(cJSON_IsNull(cJSON_GetObjectItem(e, "details")));
            assert_string_equal(cJSON_GetStringValue(cJSON_GetObjectItem(e, "type")),
                                "overloaded_error");
            assert_string_equal(cJSON_GetStringValue(cJSON_GetObjectItem(e, "message")),
                                "Overloaded");
            assert_int_equal(
                strncmp(cJSON_GetStringValue(cJSON_GetObjectItem(j, "request_id")),
                        "req_", 4),
                0);
        } else if (wires[f] == AH_WIRE_OPENAI) {
            assert_int_equal(l->n, 5);
            assert_string_equal(cJSON_GetStringValue(cJSON_GetObjectItem(e, "type")),
                                "server_error");
            assert_string_equal(l->v[4].data, "[DONE]");
        } else {
            assert_int_equal(l->n, 5);
            assert_string_equal(l->v[3].name, "error");
            assert_string_equal(cJSON_GetStringValue(cJSON_GetObjectItem(e, "type")),
                                "rate_limit_error");
            assert_string_equal(cJSON_GetStringValue(cJSON_GetObjectItem(e, "message")),
                                "too fast");
            assert_int_equal(cJSON_GetObjectItem(j, "sequence_number")->valueint, 3);
            assert_string_equal(l->v[4].name, "response.failed");
            cJSON *fj = cJSON_Parse(l->v[4].data);
            const cJSON *resp_obj = cJSON_GetObjectItem(fj, "response");
            assert_string_equal(
                cJSON_GetStringValue(cJSON_GetObjectItem(resp_obj, "status")), "failed");
            assert_true(cJSON_IsNull(cJSON_GetObjectItem(resp_obj, "usage")));
            cJSON_Delete(fj);
        }
        cJSON_Delete(j);
        evlist_free(l);
        resp_free(&r);
    }
    /* Non-streaming: no events, so the error is the HTTP answer. */
    resp r;
    make_body(AH_WIRE_ANTHROPIC, 0, "x", body, sizeof body);
    request(ah_mock_url(m), "/v1/messages", NULL, body, 0, NULL, &r);
    assert_int_equal(r.status, 529);
    resp_free(&r);
    ah_mock_free(m);
}

static void request_log_redacts_secrets(void **state)
{
    (void)state;
    ah_mock *m = start("[{\"status\": 503}]");
    static const char *const secrets[] = {
        "x-api-key: sk-ant-PLANTED-1234", "Authorization: Bearer sk-PLANTED-5678",
        "api-key: PLANTED-90", "anthropic-version: 2023-06-01", NULL};
    char body[512];
    resp r;
    make_body(AH_WIRE_ANTHROPIC, 1, "secret question", body, sizeof body);
    request(ah_mock_url(m), "/v1/messages", NULL, body, 0, secrets, &r);
    assert_int_equal(r.status, 503);
    resp_free(&r);
    request(ah_mock_url(m), "/v1/messages", NULL, body, 0, secrets, &r);
    assert_int_equal(r.status, 200);
    resp_free(&r);

    assert_int_equal(ah_mock_request_count(m), 2);
    for (size_t i = 0; i < 2; i++) {
        ah_mock_request q;
        assert_int_equal(ah_mock_request_get(m, i, &q), AH_OK);
        assert_string_equal(q.method, "POST");
        assert_string_equal(q.path, "/v1/messages");
        assert_int_equal(q.wire, AH_WIRE_ANTHROPIC);
        assert_int_equal(q.stream, 1);
        assert_string_equal(q.step, i == 0 ? "status" : "ok");
        assert_int_equal(q.step_index, i == 0 ? 1 : 0);
        assert_int_equal(q.status, i == 0 ? 503 : 200);
        assert_string_equal(q.body, body);
        assert_int_equal(q.body_len, strlen(body));
        int seen = 0, version = 0;
        for (size_t h = 0; h < q.header_count; h++) {
            assert_null(strstr(q.headers[h].value, "PLANTED"));
            if (strcasecmp(q.headers[h].name, "x-api-key") == 0 ||
                strcasecmp(q.headers[h].name, "authorization") == 0 ||
                strcasecmp(q.headers[h].name, "api-key") == 0) {
                assert_string_equal(q.headers[h].value, "[REDACTED]");
                seen++;
            }
            if (strcasecmp(q.headers[h].name, "anthropic-version") == 0) {
                assert_string_equal(q.headers[h].value, "2023-06-01");
                version = 1;
            }
        }
        assert_int_equal(seen, 3);
        assert_true(version);
    }
    ah_mock_request q;
    assert_int_equal(ah_mock_request_get(m, 2, &q), AH_ERR_NOT_FOUND);
    assert_int_equal(ah_mock_request_get(m, 0, NULL), AH_ERR_INVALID);
    ah_mock_free(m);
}

static void plan_exhaustion_then_and_replacement(void **state)
{
    (void)state;
    ah_mock *m = start("[{\"status\": 503}, {\"status\": 500}]");
    char body[512], err[256];
    resp r;
    make_body(AH_WIRE_OPENAI, 0, "x", body, sizeof body);
    static const long want1[] = {503, 500, 200, 200};
    for (int i = 0; i < 4; i++) {
        request(ah_mock_url(m), "/v1/chat/completions", NULL, body, 0, NULL, &r);
        assert_int_equal(r.status, want1[i]);
        resp_free(&r);
    }
    /* A 'then' step applies to every request after the steps. */
    assert_int_equal(ah_mock_set_plan(m,
                                      "{\"steps\": [{\"status\": 429}],"
                                      " \"then\": {\"status\": 503}}",
                                      err, sizeof err),
                     AH_OK);
    static const long want2[] = {429, 503, 503};
    for (int i = 0; i < 3; i++) {
        request(ah_mock_url(m), "/v1/chat/completions", NULL, body, 0, NULL, &r);
        assert_int_equal(r.status, want2[i]);
        resp_free(&r);
    }
    /* A bad plan is refused and the running plan stays. */
    assert_int_equal(ah_mock_set_plan(m, "[{\"stauts\": 500}]", err, sizeof err),
                     AH_ERR_PARSE);
    assert_string_equal(err, "plan step 1: unknown field 'stauts'");
    request(ah_mock_url(m), "/v1/chat/completions", NULL, body, 0, NULL, &r);
    assert_int_equal(r.status, 503);
    resp_free(&r);
    /* NULL: no plan, every request ok. */
    assert_int_equal(ah_mock_set_plan(m, NULL, err, sizeof err), AH_OK);
    request(ah_mock_url(m), "/v1/chat/completions", NULL, body, 0, NULL, &r);
    assert_int_equal(r.status, 200);
    resp_free(&r);
    ah_mock_request q;
    assert_int_equal(ah_mock_request_get(m, ah_mock_request_count(m) - 1, &q), AH_OK);
    assert_string_equal(q.step, "ok");
    assert_int_equal(ah_mock_request_get(m, 5, &q), AH_OK);
    assert_string_equal(q.step, "status");
    assert_int_equal(q.step_index, 0); /* the 'then' step */
    ah_mock_free(m);
}

static void wrong_path_method_and_body(void **state)
{
    (void)state;
    ah_mock *m = start("[{\"status\": 503}]");
    resp r;
    char hv[64];
    request(ah_mock_url(m), "/v1/nope", NULL, "{}", 0, NULL, &r);
    assert_int_equal(r.status, 404);
    cJSON *j = cJSON_Parse(r.body);
    assert_string_equal(cJSON_GetStringValue(
                            cJSON_GetObjectItem(cJSON_GetObjectItem(j, "error"), "type")),
                        "invalid_request_error");
    cJSON_Delete(j);
    resp_free(&r);
    static const char *const anth[] = {"anthropic-version: 2023-06-01", NULL};
    request(ah_mock_url(m), "/v1/nope", NULL, "{}", 0, anth, &r);
    assert_int_equal(r.status, 404);
    j = cJSON_Parse(r.body);
    assert_string_equal(cJSON_GetStringValue(cJSON_GetObjectItem(j, "type")), "error");
    assert_string_equal(cJSON_GetStringValue(
                            cJSON_GetObjectItem(cJSON_GetObjectItem(j, "error"), "type")),
                        "not_found_error");
    cJSON_Delete(j);
    resp_free(&r);
    request(ah_mock_url(m), "/v1/responses", "GET", NULL, 0, NULL, &r);
    assert_int_equal(r.status, 405);
    assert_true(header_value(&r, "Allow", hv, sizeof hv));
    assert_string_equal(hv, "POST");
    assert_true(is_json(r.body));
    resp_free(&r);
    /* None of those consumed the plan's step: */
    request(ah_mock_url(m), "/v1/messages", NULL, "{not json", 0, NULL, &r);
    assert_int_equal(r.status, 503);
    resp_free(&r);
    request(ah_mock_url(m), "/v1/messages", NULL, "{not json", 0, NULL, &r);
    assert_int_equal(r.status, 400);
    j = cJSON_Parse(r.body);
    assert_string_equal(cJSON_GetStringValue(
                            cJSON_GetObjectItem(cJSON_GetObjectItem(j, "error"), "type")),
                        "invalid_request_error");
    cJSON_Delete(j);
    resp_free(&r);
    request(ah_mock_url(m), "/v1/messages", NULL,
            "{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"x\"}]}", 0,
            NULL, &r);
    assert_int_equal(r.status, 400);
    assert_non_null(strstr(r.body, "max_tokens: Field required"));
    resp_free(&r);
    ah_mock_request q;
    assert_int_equal(ah_mock_request_get(m, 0, &q), AH_OK);
    assert_string_equal(q.step, "none");
    assert_int_equal(q.wire, -1);
    assert_int_equal(q.status, 404);
    assert_int_equal(ah_mock_request_get(m, 2, &q), AH_OK);
    assert_string_equal(q.method, "GET");
    assert_int_equal(q.status, 405);
    ah_mock_free(m);
}

static void continuation_request_completes_the_text(void **state)
{
    (void)state;
    ah_mock *m = start("[{\"cut_after_events\": 6}]");
    char body[512];
    resp r;
    make_body(AH_WIRE_ANTHROPIC, 1, "continue me", body, sizeof body);
    request(ah_mock_url(m), "/v1/messages", NULL, body, 0, NULL, &r);
    assert_int_equal(r.rc, CURLE_PARTIAL_FILE);
    evlist *l = evlist_new(r.body);
    char *partial = stream_text(AH_WIRE_ANTHROPIC, l);
    evlist_free(l);
    resp_free(&r);
    assert_string_equal(partial, "You said: \"continue");

    /* The client commits the partial and asks for the rest. */
    char cont[1024];
    snprintf(
        cont, sizeof cont,
        "{\"model\":\"claude-mock\",\"max_tokens\":256,\"stream\":true,\"messages\":["
        "{\"role\":\"user\",\"content\":\"continue me\"},{\"role\":\"assistant\","
        "\"content\":[{\"type\":\"text\",\"text\":\"You said: \\\"continue\"}]}]}");
    request(ah_mock_url(m), "/v1/messages", NULL, cont, 0, NULL, &r);
    assert_int_equal(r.rc, CURLE_OK);
    l = evlist_new(r.body);
    assert_ends_properly(AH_WIRE_ANTHROPIC, l);
    char *rest = stream_text(AH_WIRE_ANTHROPIC, l);
    evlist_free(l);
    resp_free(&r);
    char joined[512];
    snprintf(joined, sizeof joined, "%s%s", partial, rest);
    assert_string_equal(joined,
                        "You said: \"continue me\". This is a deterministic reply "
                        "from the agenthost mock provider.");
    free(partial);
    free(rest);
    /* The log holds the continuation request exactly as sent. */
    ah_mock_request q;
    assert_int_equal(ah_mock_request_get(m, 1, &q), AH_OK);
    assert_string_equal(q.body, cont);
    ah_mock_free(m);
}

static void long_reply_many_deltas(void **state)
{
    (void)state;
    ah_mock_config cfg;
    ah_mock_config_init(&cfg);
    cfg.text_deltas = 50000;
    char err[128];
    ah_mock *m = NULL;
    ah_mock_new(&cfg, &m, err, sizeof err);
    assert_non_null(m);
    char body[512];
    resp r;
    make_body(AH_WIRE_OPENAI, 1, "x", body, sizeof body);
    request(ah_mock_url(m), "/v1/chat/completions", NULL, body, 0, NULL, &r);
    assert_int_equal(r.rc, CURLE_OK);
    assert_int_equal(atomic_load(&r.events), 50000 + 4); /* role, finish, usage, [DONE] */
    resp_free(&r);
    ah_mock_free(m);
}

/* ---- shutdown while connections are stalled ---------------------------------------- */

typedef struct client_arg {
    const char *url;
    const char *path;
    const char *body;
    resp r;
} client_arg;

/* Background responses: kept, re-attached from a sequence number, cancelled; and what
 * the mock refuses. */
static void background_responses_reattach_and_cancel(void **state)
{
    (void)state;
    ah_mock *m = start("[{\"ok\":true},{\"ok\":true},{\"cut_after_events\":2}]");
    const char *bg = "{\"model\":\"gpt-mock\",\"stream\":true,\"background\":true,"
                     "\"store\":true,\"input\":\"hello\"}";
    resp full;
    request(ah_mock_url(m), "/v1/responses", NULL, bg, 0, NULL, &full);
    assert_int_equal(full.status, 200);
    evlist *l = evlist_new(full.body);
    assert_true(l->n > 6);
    cJSON *first = cJSON_Parse(l->v[0].data);
    char id[64];
    snprintf(id, sizeof id, "%s",
             cJSON_GetObjectItem(cJSON_GetObjectItem(first, "response"), "id")->valuestring);
    assert_true(cJSON_IsTrue(
        cJSON_GetObjectItem(cJSON_GetObjectItem(first, "response"), "background")));
    cJSON_Delete(first);
    /* The rest after sequence number 3: byte for byte the original stream's tail. */
    char path[160];
    snprintf(path, sizeof path, "/v1/responses/%s?stream=true&starting_after=3", id);
    resp r;
    request(ah_mock_url(m), path, "GET", NULL, 0, NULL, &r);
    assert_int_equal(r.status, 200);
    const char *tail = full.body;
    for (int i = 0; i < 4; i++)
        tail = strstr(tail, "\n\n") + 2;
    assert_string_equal(r.body, tail);
    resp_free(&r);
    /* The re-attach took plan step 3: cut after 2 events. */
    snprintf(path, sizeof path, "/v1/responses/%s?stream=true&starting_after=0", id);
    request(ah_mock_url(m), path, "GET", NULL, 0, NULL, &r);
    assert_int_equal(r.rc, CURLE_PARTIAL_FILE);
    evlist *cut = evlist_new(r.body);
    assert_int_equal(cut->n, 2);
    assert_string_equal(cut->v[0].data, l->v[1].data);
    evlist_free(cut);
    resp_free(&r);
    /* Without stream=true: the response object. */
    snprintf(path, sizeof path, "/v1/responses/%s", id);
    request(ah_mock_url(m), path, "GET", NULL, 0, NULL, &r);
    assert_int_equal(r.status, 200);
    assert_non_null(strstr(r.body, "\"status\":\"completed\""));
    resp_free(&r);
    /* A cursor that is not a number; an id never kept. */
    snprintf(path, sizeof path, "/v1/responses/%s?stream=true&starting_after=x", id);
    request(ah_mock_url(m), path, "GET", NULL, 0, NULL, &r);
    assert_int_equal(r.status, 400);
    resp_free(&r);
    request(ah_mock_url(m), "/v1/responses/resp_nope?stream=true", "GET", NULL, 0, NULL, &r);
    assert_int_equal(r.status, 404);
    assert_non_null(strstr(r.body, "Response with id 'resp_nope' not found."));
    resp_free(&r);
    /* Cancel: recorded, takes no plan step; unknown ids are a 404. */
    size_t before = ah_mock_request_count(m);
    snprintf(path, sizeof path, "/v1/responses/%s/cancel", id);
    request(ah_mock_url(m), path, "POST", NULL, 0, NULL, &r);
    assert_int_equal(r.status, 200);
    assert_non_null(strstr(r.body, "\"status\":\"cancelled\""));
    resp_free(&r);
    request(ah_mock_url(m), "/v1/responses/resp_nope/cancel", "POST", NULL, 0, NULL, &r);
    assert_int_equal(r.status, 404);
    resp_free(&r);
    ah_mock_request q;
    assert_int_equal(ah_mock_request_get(m, before, &q), AH_OK);
    assert_string_equal(q.method, "POST");
    assert_string_equal(q.step, "none");
    assert_int_equal(q.wire, AH_WIRE_RESPONSES);
    assert_int_equal(ah_mock_request_get(m, 1, &q), AH_OK);
    assert_string_equal(q.method, "GET");
    assert_non_null(strstr(q.path, "?stream=true&starting_after=3"));
    assert_int_equal(q.step_index, 2);
    /* Background with store false is refused; a plain response is not kept. */
    const char *nostore = "{\"model\":\"gpt-mock\",\"stream\":true,\"background\":true,"
                          "\"store\":false,\"input\":\"hello\"}";
    request(ah_mock_url(m), "/v1/responses", NULL, nostore, 0, NULL, &r);
    assert_int_equal(r.status, 400);
    assert_non_null(strstr(r.body, "invalid_request_error"));
    assert_non_null(strstr(r.body, "store"));
    resp_free(&r);
    const char *plain = "{\"model\":\"gpt-mock\",\"stream\":true,\"input\":\"plain one\"}";
    request(ah_mock_url(m), "/v1/responses", NULL, plain, 0, NULL, &r);
    evlist *pl = evlist_new(r.body);
    first = cJSON_Parse(pl->v[0].data);
    snprintf(path, sizeof path, "/v1/responses/%s?stream=true",
             cJSON_GetObjectItem(cJSON_GetObjectItem(first, "response"), "id")->valuestring);
    cJSON_Delete(first);
    evlist_free(pl);
    resp_free(&r);
    request(ah_mock_url(m), path, "GET", NULL, 0, NULL, &r);
    assert_int_equal(r.status, 404);
    resp_free(&r);
    evlist_free(l);
    resp_free(&full);
    ah_mock_free(m);
}

static void *client_thread(void *p)
{
    client_arg *a = p;
    request(a->url, a->path, NULL, a->body, 60000, NULL, &a->r);
    return NULL;
}

static void sleep_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

static void free_while_stalled_returns(void **state)
{
    (void)state;
    ah_mock *m = start("[{\"stall_after_events\": 3}, {\"delay_headers_ms\": 60000}]");
    char body[512];
    make_body(AH_WIRE_ANTHROPIC, 1, "x", body, sizeof body);
    client_arg a = {ah_mock_url(m), "/v1/messages", body, {0}};
    client_arg b = {ah_mock_url(m), "/v1/messages", body, {0}};
    pthread_t ta, tb;
    assert_int_equal(pthread_create(&ta, NULL, client_thread, &a), 0);
    /* Wait until the first client holds its 3 events, i.e. it is inside the stall. */
    for (int i = 0; i < 2000 && atomic_load(&a.r.events) < 3; i++)
        sleep_ms(5);
    assert_int_equal(atomic_load(&a.r.events), 3);
    assert_int_equal(pthread_create(&tb, NULL, client_thread, &b), 0);
    for (int i = 0; i < 2000 && ah_mock_request_count(m) < 2; i++)
        sleep_ms(5);
    assert_int_equal(ah_mock_request_count(m), 2);

    ah_mock_free(m); /* must wake both waits and join every thread */
    pthread_join(ta, NULL);
    pthread_join(tb, NULL);
    assert_int_not_equal(a.r.rc, CURLE_OK);
    assert_int_equal(a.r.status, 200);
    assert_int_not_equal(b.r.rc, CURLE_OK);
    assert_int_equal(b.r.status, 0);
    resp_free(&a.r);
    resp_free(&b.r);
}

static void concurrent_requests(void **state)
{
    (void)state;
    ah_mock *m = start("[{\"stall_after_events\": 2, \"stall_ms\": 100}]");
    char body[512];
    make_body(AH_WIRE_RESPONSES, 1, "x", body, sizeof body);
    enum { N = 8 };
    client_arg a[N];
    pthread_t t[N];
    for (int i = 0; i < N; i++) {
        a[i] = (client_arg){ah_mock_url(m), "/v1/responses", body, {0}};
        assert_int_equal(pthread_create(&t[i], NULL, client_thread, &a[i]), 0);
    }
    for (int i = 0; i < N; i++) {
        pthread_join(t[i], NULL);
        assert_int_equal(a[i].r.rc, CURLE_OK);
        evlist *l = evlist_new(a[i].r.body);
        assert_ends_properly(AH_WIRE_RESPONSES, l);
        evlist_free(l);
        resp_free(&a[i].r);
    }
    assert_int_equal(ah_mock_request_count(m), N);
    int stalls = 0;
    for (size_t i = 0; i < N; i++) {
        ah_mock_request q;
        assert_int_equal(ah_mock_request_get(m, i, &q), AH_OK);
        stalls += strcmp(q.step, "stall") == 0;
    }
    assert_int_equal(stalls, 1); /* one step, consumed by exactly one request */
    ah_mock_free(m);
}

static void plan_file_and_start_errors(void **state)
{
    (void)state;
    char path[] = "/tmp/ah_mock_plan_XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    const char *plan = "[{\"status\": 418}]";
    assert_int_equal(write(fd, plan, strlen(plan)), (ssize_t)strlen(plan));
    close(fd);
    ah_mock_config cfg;
    ah_mock_config_init(&cfg);
    cfg.plan_path = path;
    char err[512] = "";
    ah_mock *m = NULL;
    ah_mock_new(&cfg, &m, err, sizeof err);
    assert_non_null(m);
    char body[512];
    resp r;
    make_body(AH_WIRE_OPENAI, 0, "x", body, sizeof body);
    request(ah_mock_url(m), "/v1/chat/completions", NULL, body, 0, NULL, &r);
    assert_int_equal(r.status, 418);
    resp_free(&r);

    /* The same port twice: the second mock cannot listen and says so. */
    ah_mock_config busy;
    ah_mock_config_init(&busy);
    busy.port = ah_mock_port(m);
    ah_mock *second = (ah_mock *)&second;
    assert_int_equal(ah_mock_new(&busy, &second, err, sizeof err), AH_ERR_IO);
    assert_null(second);
    assert_non_null(strstr(err, "cannot listen on 127.0.0.1:"));
    ah_mock_free(m);

    /* A bad plan in a file names the file, the step and the field. */
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs("[{\"ok\": true}, {\"cut_after_events\": -3}]", f);
    fclose(f);
    assert_int_equal(ah_mock_new(&cfg, &(ah_mock *){NULL}, err, sizeof err), AH_ERR_INVALID);
    char want[600];
    snprintf(want, sizeof want, "%s: plan step 2: field 'cut_after_events' must be >= 0",
             path);
    assert_string_equal(err, want);
    unlink(path);
    assert_int_equal(ah_mock_new(&cfg, &(ah_mock *){NULL}, err, sizeof err), AH_ERR_IO);
    assert_non_null(strstr(err, "cannot open plan file"));

    ah_mock_config bad;
    ah_mock_config_init(&bad);
    bad.plan_json = "[{\"reset\": false}]";
    assert_int_not_equal(ah_mock_new(&bad, &(ah_mock *){NULL}, err, sizeof err), AH_OK);
    assert_string_equal(err, "plan step 1: field 'reset' must be true");
    bad.plan_json = NULL;
    bad.port = 70000;
    assert_int_not_equal(ah_mock_new(&bad, &(ah_mock *){NULL}, err, sizeof err), AH_OK);
    ah_mock_free(NULL);
}

static int group_setup(void **state)
{
    (void)state;
    return curl_global_init(CURL_GLOBAL_DEFAULT) == CURLE_OK ? 0 : -1;
}

static int group_teardown(void **state)
{
    (void)state;
    curl_global_cleanup();
    return 0;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(each_format_streams_and_not),
        cmocka_unit_test(tool_call_then_result),
        cmocka_unit_test(status_steps_send_headers_and_error_shapes),
        cmocka_unit_test(reset_and_delayed_headers),
        cmocka_unit_test(cut_after_k_events),
        cmocka_unit_test(stall_after_k_events),
        cmocka_unit_test(malformed_and_error_events),
        cmocka_unit_test(request_log_redacts_secrets),
        cmocka_unit_test(plan_exhaustion_then_and_replacement),
        cmocka_unit_test(wrong_path_method_and_body),
        cmocka_unit_test(continuation_request_completes_the_text),
        cmocka_unit_test(long_reply_many_deltas),
        cmocka_unit_test(background_responses_reattach_and_cancel),
        cmocka_unit_test(free_while_stalled_returns),
        cmocka_unit_test(concurrent_requests),
        cmocka_unit_test(plan_file_and_start_errors),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
