/* proxy_rig.h - the mock, a proxy in front of it (its loop on a thread of its own) and a
 * blocking HTTP client, for the proxy's integration tests; and a checker that reads a
 * client's whole response the way a strict SDK would: one well-formed response per
 * format, or a protocol anomaly named. Header-only: each test is its own program. */
#ifndef AH_TEST_PROXY_RIG_H
#define AH_TEST_PROXY_RIG_H

#include "agenthost.h"
#include "agenthost/mock.h"
#include "agenthost/proxy.h"
#include "agenthost/sse.h"

#include <cjson/cJSON.h>
#include <curl/curl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct prig {
    ah_mock *mock;
    ah_loop *loop;
    ah_proxy *proxy;
    pthread_t th;
    atomic_int stop;
    /* events seen by the proxy's on_event, as JSON lines (written on the loop thread,
     * read with prig_events_contain: both under mu) */
    pthread_mutex_t mu;
    char *events;
    size_t events_len;
} prig;

static void prig_event(void *ud, const ah_event *ev)
{
    prig *r = ud;
    char *j = ah_event_to_json(ev);
    if (!j)
        return;
    pthread_mutex_lock(&r->mu);
    size_t n = strlen(j);
    char *grown = realloc(r->events, r->events_len + n + 2);
    if (grown) {
        r->events = grown;
        memcpy(r->events + r->events_len, j, n);
        r->events[r->events_len + n] = '\n';
        r->events_len += n + 1;
        r->events[r->events_len] = '\0';
    }
    pthread_mutex_unlock(&r->mu);
    free(j);
}

/* 1 when the events seen so far contain needle. The proxy's thread may still be
 * emitting (a call's end comes after the client has its response): read under the lock. */
static int prig_events_contain(prig *r, const char *needle)
{
    pthread_mutex_lock(&r->mu);
    int found = r->events && strstr(r->events, needle) != NULL;
    pthread_mutex_unlock(&r->mu);
    return found;
}

static void *prig_loop(void *ud)
{
    prig *r = ud;
    while (!atomic_load(&r->stop))
        ah_loop_run_once(r->loop, 20);
    return NULL;
}

/* How many times needle occurs in the events seen so far (under the lock). */
static int prig_events_count(prig *r, const char *needle)
{
    int n = 0;
    pthread_mutex_lock(&r->mu);
    for (const char *p = r->events; p && (p = strstr(p, needle)); p += strlen(needle))
        n++;
    pthread_mutex_unlock(&r->mu);
    return n;
}

static void prig_open_cfg(prig *r, const char *plan, const ah_policy *pol,
                          ah_retry_budget *rb, unsigned max_in_flight);

static void prig_open(prig *r, const char *plan, const ah_policy *pol)
{
    prig_open_cfg(r, plan, pol, NULL, 0);
}

static void prig_open_with(prig *r, const char *plan, const ah_policy *pol,
                           ah_retry_budget *rb)
{
    prig_open_cfg(r, plan, pol, rb, 0);
}

static void prig_open_cfg(prig *r, const char *plan, const ah_policy *pol,
                          ah_retry_budget *rb, unsigned max_in_flight)
{
    memset(r, 0, sizeof *r);
    pthread_mutex_init(&r->mu, NULL);
    char err[256];
    ah_mock_config mc;
    ah_mock_config_init(&mc);
    mc.plan_json = plan;
    ah_mock_new(&mc, &r->mock, err, sizeof err);
    if (!r->mock)
        fail_msg("mock: %s", err);
    r->loop = ah_loop_new(ah_clock_real(), NULL);
    assert_non_null(r->loop);
    ah_proxy_config pc = {0};
    pc.loop = r->loop;
    pc.anthropic_url = ah_mock_url(r->mock);
    pc.openai_url = ah_mock_url(r->mock);
    pc.policy = pol;
    pc.retry_budget = rb;
    pc.max_in_flight = max_in_flight;
    pc.on_event = prig_event;
    pc.event_ud = r;
    ah_proxy_new(&pc, &r->proxy, err, sizeof err);
    if (!r->proxy)
        fail_msg("proxy: %s", err);
    atomic_init(&r->stop, 0);
    assert_int_equal(pthread_create(&r->th, NULL, prig_loop, r), 0);
}

static void prig_close(prig *r)
{
    atomic_store(&r->stop, 1);
    ah_loop_wakeup(r->loop);
    pthread_join(r->th, NULL);
    ah_proxy_free(r->proxy);
    ah_loop_free(r->loop);
    ah_mock_free(r->mock);
    free(r->events);
    pthread_mutex_destroy(&r->mu);
}

typedef struct presp {
    long status;
    char *body;
    size_t len;
    char *ctype;
} presp;

static size_t presp_write(char *p, size_t sz, size_t n, void *ud)
{
    presp *o = ud;
    size_t k = sz * n;
    char *g = realloc(o->body, o->len + k + 1);
    if (!g)
        return 0;
    o->body = g;
    memcpy(o->body + o->len, p, k);
    o->len += k;
    o->body[o->len] = '\0';
    return k;
}

/* POST (body) or GET (NULL) base + path with the wire's credentials. */
static presp prig_fetch(const char *base, const char *path, int wire, const char *body)
{
    presp o = {0};
    char url[512];
    snprintf(url, sizeof url, "%s%s", base, path);
    CURL *c = curl_easy_init();
    struct curl_slist *h = NULL;
    h = curl_slist_append(h, "Content-Type: application/json");
    if (wire == AH_WIRE_ANTHROPIC) {
        h = curl_slist_append(h, "x-api-key: sk-ant-SECRET-proxytest");
        h = curl_slist_append(h, "anthropic-version: 2023-06-01");
    } else {
        h = curl_slist_append(h, "Authorization: Bearer sk-SECRET-proxytest");
    }
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, h);
    if (body)
        curl_easy_setopt(c, CURLOPT_POSTFIELDS, body);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, presp_write);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, &o);
    curl_easy_setopt(c, CURLOPT_TIMEOUT, 60L);
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    CURLcode rc = curl_easy_perform(c);
    if (rc != CURLE_OK && o.len == 0)
        o.status = -1;
    else
        curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &o.status);
    char *ct = NULL;
    curl_easy_getinfo(c, CURLINFO_CONTENT_TYPE, &ct);
    o.ctype = ct ? strdup(ct) : NULL;
    curl_slist_free_all(h);
    curl_easy_cleanup(c);
    if (!o.body)
        o.body = calloc(1, 1);
    return o;
}

static void presp_free(presp *o)
{
    free(o->body);
    free(o->ctype);
}

/* ---- what a strict client reads -------------------------------------------------------- */

typedef struct pmsg {
    char text[65536];
    size_t text_len;
    int n_text_blocks;
    int n_tools;
    char tool_names[8][64];
    char tool_args[8][512];
    char stop[64];
    long long in_tokens, out_tokens;
    int error;        /* the format's in-band error ended it */
    char anomaly[256]; /* "" when the response is well-formed */
} pmsg;

static void PANOM(pmsg *m, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void PANOM(pmsg *m, const char *fmt, ...)
{
    if (m->anomaly[0])
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(m->anomaly, sizeof m->anomaly, fmt, ap);
    va_end(ap);
}

static const char *pj_str(const cJSON *o, const char *k)
{
    return cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(o, k));
}

static long long pj_int(const cJSON *o, const char *k)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
    return cJSON_IsNumber(v) ? (long long)v->valuedouble : -1;
}

static void pm_text(pmsg *m, const char *s)
{
    size_t n = strlen(s);
    if (m->text_len + n < sizeof m->text) {
        memcpy(m->text + m->text_len, s, n);
        m->text_len += n;
        m->text[m->text_len] = '\0';
    }
}

static void pm_tool(pmsg *m, const char *name, const char *args)
{
    if (m->n_tools >= 8)
        return;
    snprintf(m->tool_names[m->n_tools], 64, "%s", name ? name : "");
    snprintf(m->tool_args[m->n_tools], 512, "%s", args ? args : "");
    cJSON *a = cJSON_Parse(args ? args : "");
    if (!cJSON_IsObject(a))
        PANOM(m, "tool call %d: arguments are not a JSON object: %.80s", m->n_tools, args);
    cJSON_Delete(a);
    m->n_tools++;
}

/* Anthropic: one message_start first, indexes 0,1,.. each started once, deltas to the
 * open block, one message_delta, message_stop last. */
static void read_anthropic(pmsg *m, const cJSON *ev, int *state, int *open, int *next,
                           char *args, size_t args_size, char *tname)
{
    const char *type = pj_str(ev, "type");
    if (!type)
        return PANOM(m, "event without type");
    if (*state == 3)
        return PANOM(m, "event '%s' after message_stop", type);
    if (strcmp(type, "message_start") == 0) {
        if (*state != 0)
            return PANOM(m, "second message_start");
        *state = 1;
        m->in_tokens = pj_int(cJSON_GetObjectItemCaseSensitive(
                                  cJSON_GetObjectItemCaseSensitive(ev, "message"), "usage"),
                              "input_tokens");
        return;
    }
    if (*state == 0)
        return PANOM(m, "'%s' before message_start", type);
    if (strcmp(type, "ping") == 0)
        return;
    long long idx = pj_int(ev, "index");
    if (strcmp(type, "content_block_start") == 0) {
        if (*open >= 0)
            return PANOM(m, "block %lld starts while block %d is open", idx, *open);
        if (idx != *next)
            return PANOM(m, "block index %lld, expected %d", idx, *next);
        if (*state == 2)
            return PANOM(m, "block after message_delta");
        *open = (int)idx;
        (*next)++;
        const cJSON *cb = cJSON_GetObjectItemCaseSensitive(ev, "content_block");
        const char *bt = pj_str(cb, "type");
        args[0] = '\0';
        tname[0] = '\0';
        if (bt && strcmp(bt, "text") == 0)
            m->n_text_blocks++;
        if (bt && strcmp(bt, "tool_use") == 0)
            snprintf(tname, 64, "%s", pj_str(cb, "name") ? pj_str(cb, "name") : "");
        return;
    }
    if (strcmp(type, "content_block_delta") == 0) {
        if (idx != *open)
            return PANOM(m, "delta for block %lld, open is %d", idx, *open);
        const cJSON *d = cJSON_GetObjectItemCaseSensitive(ev, "delta");
        const char *dt = pj_str(d, "type");
        if (dt && strcmp(dt, "text_delta") == 0)
            pm_text(m, pj_str(d, "text") ? pj_str(d, "text") : "");
        else if (dt && strcmp(dt, "input_json_delta") == 0) {
            const char *pj = pj_str(d, "partial_json");
            if (pj && strlen(args) + strlen(pj) < args_size)
                strcat(args, pj);
        }
        return;
    }
    if (strcmp(type, "content_block_stop") == 0) {
        if (idx != *open)
            return PANOM(m, "stop of block %lld, open is %d", idx, *open);
        if (tname[0])
            pm_tool(m, tname, args[0] ? args : "{}");
        tname[0] = '\0';
        *open = -1;
        return;
    }
    if (strcmp(type, "message_delta") == 0) {
        if (*state == 2)
            return PANOM(m, "second message_delta");
        if (*open >= 0)
            return PANOM(m, "message_delta while block %d is open", *open);
        *state = 2;
        const char *sr = pj_str(cJSON_GetObjectItemCaseSensitive(ev, "delta"), "stop_reason");
        snprintf(m->stop, sizeof m->stop, "%s", sr ? sr : "");
        m->out_tokens = pj_int(cJSON_GetObjectItemCaseSensitive(ev, "usage"), "output_tokens");
        return;
    }
    if (strcmp(type, "message_stop") == 0) {
        if (*state != 2)
            return PANOM(m, "message_stop without message_delta");
        *state = 3;
        return;
    }
    if (strcmp(type, "error") == 0) {
        m->error = 1;
        *state = 3;
        return;
    }
}

/* Read a response body of `wire` (SSE when stream) into m. */
static void prig_read(int wire, const presp *r, pmsg *m)
{
    memset(m, 0, sizeof *m);
    m->in_tokens = m->out_tokens = -1;
    ah_sse *p = ah_sse_new(NULL);
    ah_sse_feed(p, r->body, r->len);
    ah_sse_event ev;
    int state = 0, open = -1, next = 0, done = 0;
    char args[4096] = "", tname[64] = "";
    long long seq = -1, next_out = 0;
    int chat_tools = 0, chat_finish = 0, chat_usage = 0;
    char chat_args[8][512] = {{0}}, chat_names[8][64] = {{0}};
    while (ah_sse_next(p, &ev) == 1) {
        if (done) {
            PANOM(m, "data after the end");
            break;
        }
        if (wire == AH_WIRE_OPENAI && strcmp(ev.data, "[DONE]") == 0) {
            done = 1;
            continue;
        }
        cJSON *j = cJSON_Parse(ev.data);
        if (!j) {
            PANOM(m, "event data is not JSON: %.60s", ev.data);
            break;
        }
        if (wire == AH_WIRE_ANTHROPIC) {
            if (strcmp(ev.type, "error") == 0) {
                m->error = 1;
                state = 3;
            } else {
                read_anthropic(m, j, &state, &open, &next, args, sizeof args, tname);
            }
        } else if (wire == AH_WIRE_OPENAI) {
            if (cJSON_GetObjectItemCaseSensitive(j, "error")) {
                m->error = 1;
                done = 2;
            }
            const cJSON *ch;
            cJSON_ArrayForEach(ch, cJSON_GetObjectItemCaseSensitive(j, "choices"))
            {
                if (pj_int(ch, "index") != 0)
                    PANOM(m, "choice index %lld", pj_int(ch, "index"));
                const cJSON *d = cJSON_GetObjectItemCaseSensitive(ch, "delta");
                if (chat_finish && d && d->child)
                    PANOM(m, "delta after the finish chunk");
                if (pj_str(d, "content"))
                    pm_text(m, pj_str(d, "content"));
                const cJSON *tc;
                cJSON_ArrayForEach(tc, cJSON_GetObjectItemCaseSensitive(d, "tool_calls"))
                {
                    long long ti = pj_int(tc, "index");
                    if (ti < 0 || ti > 7 || ti > chat_tools) {
                        PANOM(m, "tool call index %lld", ti);
                        continue;
                    }
                    if (ti == chat_tools) {
                        if (!pj_str(tc, "id"))
                            PANOM(m, "tool call %lld without id", ti);
                        chat_tools++;
                    }
                    const cJSON *fn = cJSON_GetObjectItemCaseSensitive(tc, "function");
                    if (pj_str(fn, "name"))
                        snprintf(chat_names[ti], 64, "%s", pj_str(fn, "name"));
                    if (pj_str(fn, "arguments"))
                        strncat(chat_args[ti], pj_str(fn, "arguments"),
                                sizeof chat_args[ti] - strlen(chat_args[ti]) - 1);
                }
                const char *fr = pj_str(ch, "finish_reason");
                if (fr) {
                    if (chat_finish)
                        PANOM(m, "second finish chunk");
                    chat_finish = 1;
                    snprintf(m->stop, sizeof m->stop, "%s", fr);
                }
            }
            const cJSON *u = cJSON_GetObjectItemCaseSensitive(j, "usage");
            if (cJSON_IsObject(u)) {
                if (chat_usage)
                    PANOM(m, "second usage chunk");
                chat_usage = 1;
                m->in_tokens = pj_int(u, "prompt_tokens");
                m->out_tokens = pj_int(u, "completion_tokens");
            }
        } else {
            long long s = pj_int(j, "sequence_number");
            if (s <= seq)
                PANOM(m, "sequence_number %lld after %lld", s, seq);
            seq = s;
            const char *type = pj_str(j, "type");
            if (!type)
                type = "";
            if (state == 0 && strcmp(type, "response.created") != 0)
                PANOM(m, "'%s' before response.created", type);
            if (strcmp(type, "response.created") == 0) {
                if (state != 0)
                    PANOM(m, "second response.created");
                state = 1;
            } else if (state == 3) {
                PANOM(m, "'%s' after the terminal event", type);
            } else if (strcmp(type, "response.output_item.added") == 0) {
                long long oi = pj_int(j, "output_index");
                if (oi != next_out)
                    PANOM(m, "output_index %lld, expected %lld", oi, next_out);
                next_out++;
                const cJSON *it = cJSON_GetObjectItemCaseSensitive(j, "item");
                if (pj_str(it, "type") && strcmp(pj_str(it, "type"), "message") == 0)
                    m->n_text_blocks++;
            } else if (strcmp(type, "response.output_text.delta") == 0) {
                if (pj_int(j, "output_index") != next_out - 1)
                    PANOM(m, "text delta for output %lld", pj_int(j, "output_index"));
                pm_text(m, pj_str(j, "delta") ? pj_str(j, "delta") : "");
            } else if (strcmp(type, "response.output_item.done") == 0) {
                const cJSON *it = cJSON_GetObjectItemCaseSensitive(j, "item");
                if (pj_str(it, "type") && strcmp(pj_str(it, "type"), "function_call") == 0)
                    pm_tool(m, pj_str(it, "name"), pj_str(it, "arguments"));
            } else if (strcmp(type, "response.completed") == 0 ||
                       strcmp(type, "response.incomplete") == 0 ||
                       strcmp(type, "response.failed") == 0) {
                state = 3;
                const cJSON *resp = cJSON_GetObjectItemCaseSensitive(j, "response");
                snprintf(m->stop, sizeof m->stop, "%s", pj_str(resp, "status") ? pj_str(resp, "status") : "");
                const cJSON *u = cJSON_GetObjectItemCaseSensitive(resp, "usage");
                m->in_tokens = pj_int(u, "input_tokens");
                m->out_tokens = pj_int(u, "output_tokens");
                if (strcmp(type, "response.completed") != 0)
                    m->error = 1;
                /* the final object must hold what the events said */
                size_t tl = 0;
                const cJSON *it;
                cJSON_ArrayForEach(it, cJSON_GetObjectItemCaseSensitive(resp, "output"))
                {
                    const cJSON *c;
                    cJSON_ArrayForEach(c, cJSON_GetObjectItemCaseSensitive(it, "content"))
                    {
                        if (pj_str(c, "text"))
                            tl += strlen(pj_str(c, "text"));
                    }
                }
                if (tl != m->text_len)
                    PANOM(m, "response object holds %zu text bytes, the deltas %zu", tl,
                          m->text_len);
            } else if (strcmp(type, "error") == 0) {
                m->error = 1;
            }
        }
        cJSON_Delete(j);
    }
    if (wire == AH_WIRE_OPENAI) {
        for (int i = 0; i < chat_tools; i++)
            pm_tool(m, chat_names[i], chat_args[i]);
        if (!m->error && done != 1)
            PANOM(m, "no [DONE]");
        if (m->error && done == 1)
            PANOM(m, "[DONE] after an in-band error");
        if (!m->error && !chat_finish)
            PANOM(m, "no finish chunk");
        if (chat_tools || chat_finish)
            m->n_text_blocks = m->text_len > 0;
        else
            m->n_text_blocks = m->text_len > 0;
    } else if (wire == AH_WIRE_ANTHROPIC) {
        if (!m->error && state != 3)
            PANOM(m, "the stream ended without message_stop");
    } else if (!m->error && state != 3) {
        PANOM(m, "the stream ended without a terminal event");
    }
    ah_sse_free(p);
}

#endif
