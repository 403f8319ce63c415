/* soak.c - many agent runs in one process against the in-process mock, each with a random
 * fault plan, checking the docs/testing.md invariants on every run and that memory does not grow.
 *
 *   soak [--runs N] [--seed S] [--only I] [--verbose]      (env: AH_SOAK_RUNS,
 * AH_SOAK_SEED)
 *
 * Run i draws everything (wire format, policy limits, delta size, the plan) from its own
 * generator, seeded from (S, i), so a failure is reproduced alone with `--seed S --only
 * I` (the failure message prints that command). Without --seed the seed is fixed: the
 * soak is the same on every machine. One loop serves every run, as in a host process that
 * runs many agents; each run gets a fresh mock, client, worker and in-memory ledger.
 *
 * The oracle: a fault plan is a list of mock steps consumed one per request. simulate()
 * walks it with the rules of docs/retry-policy.md and docs/worker.md (max_attempts counts
 * every attempt of one call;
 * a fault after the stream opened costs one continuation of the step; a non-retryable
 * status or a Retry-After beyond max_retry_after_ms ends the run at once; a stream fault
 * that is the provider's own error, or that kept nothing new, is also a retry: it counts
 * an attempt of the chain, waits and emits llm_retry, and gives up when the attempts are
 * spent) and predicts
 * the outcome, the error kind, status and give-up reason, the number of requests, retries
 * and continuations, and whether the tool's step was reached. Whether a cut kept anything
 * depends on where in the stream it fell, which the oracle does not model: it reads it
 * from the run (the cut request's llm_continuation: committed_blocks 0 and mode
 * regenerate, or a give-up right after it) and predicts everything that follows. Every stream fault in a
 * plan fires: the mock fires a K past the end just before the stream's final event
 * (after it the response is complete and anything more is rightly ignored); for OpenAI
 * the malformed and error faults are drawn before the shortest stream's end (3 events:
 * a reply with no text). Faults after the final event (an unclean close, a tool call
 * sent after the end) are benign; invalid UTF-8 is benign but changes the answer's
 * bytes, so its text is only checked to be valid UTF-8, like every event line.
 *
 * Two faults are not the provider's: a tool call whose arguments are valid JSON but not an
 * object (a plan step's tool_args; the worker answers it as a tool error, the body never
 * runs, history keeps the arguments as sent, the next request carries {} for them, and
 * the final text is that of a reference run with the same step), and the same key delivered twice at once (a draw per run: a second tool call
 * with the run's key starts while the first's body is in flight; it must wait for the
 * claim and return the first's receipt as a duplicate, the body running once).
 *
 * Redis idle drops: when a redis-server is installed (the soak starts its own), one run
 * in eight (a draw of its own, so the other draws stay those of earlier versions) keeps
 * its ledger in Redis and Redis drops every connection during the body (CLIENT KILL,
 * what its idle `timeout` or a load balancer does) and again before a second delivery of
 * the key: the receipt must still be recorded, the second delivery must get it as a
 * duplicate and the body must run once. The tool call is then driven on the shared loop
 * (ah_tool_step, answered through ah_worker_tool_done), as an embedder with a network
 * ledger does.
 *
 * Memory: the heap in use (mallinfo2, or the sanitizer allocator's count under ASan) and
 * the RSS are taken after run CHECKPOINT (100) and after the last run. Every run frees
 * everything it made, so the live heap must come back to the same level: growth beyond
 * HEAP_GROWTH_MAX fails (it allows the process-wide caches that fill slowly, such as
 * libcurl's connection cache of the shared loop, and nothing per run: 900 runs leaking
 * even 64 bytes each would exceed it). RSS also carries allocator fragmentation and
 * glibc's per-thread arenas for the mock's threads, so its bound is looser.
 */
#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <malloc.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "agenthost.h"
#include "agenthost/mock.h"
#include "agenthost/redis.h"
#include "support/redis_fixture.h"

#if defined(__SANITIZE_ADDRESS__)
#define SOAK_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define SOAK_ASAN 1
#endif
#endif
#ifdef SOAK_ASAN
/* From the sanitizer runtime (GCC ships no header for it): bytes currently allocated. */
size_t __sanitizer_get_current_allocated_bytes(void);
#endif

#define KEY         "sk-ant-api03-SOAKPLANTED-0123456789abcdefXYZ"
#define SECRET_MARK "SOAKPLANTED"

enum {
    DEFAULT_RUNS = 1000,
    CHECKPOINT = 100,
    MAX_FAULTS = 6,
    IDLE_TIMEOUT_MS = 80,      /* a stall costs this much */
    ATTEMPT_TIMEOUT_MS = 150,  /* headers held longer than this are a timeout fault */
    HUNG_HEADERS_MS = 300,     /* what the timeout fault holds them for */
    MAX_RETRY_AFTER_MS = 5000, /* hints of an hour and two hours exceed it */
};
/* AH_SOAK_TIME_SCALE multiplies the three durations above, for slow runs (valgrind: 20).
 */
static int g_time_scale = 1;
static const uint64_t DEFAULT_SEED = 20240917;
static const int64_t HEAP_GROWTH_MAX = 8 * 1024;
static const int64_t RSS_GROWTH_MAX = 2 * 1024 * 1024;
enum { FD_GROWTH_MAX = 2 };
#ifdef SOAK_ASAN
enum { RSS_CHECKED = 0 }; /* ASan's quarantine keeps freed memory resident on purpose */
#else
enum { RSS_CHECKED = 1 };
#endif
static int g_heap_exact; /* the heap figure has no allocator cache in it */

static const char *ADD_SCHEMA =
    "{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"integer\"},"
    "\"b\":{\"type\":\"integer\"}},\"required\":[\"a\",\"b\"]}";

/* ---- the generator: splitmix64, one stream per run ------------------------------------
 */

static uint64_t splitmix(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

static int draw(uint64_t *s, int n) /* uniform in [0, n) */
{
    return (int)(splitmix(s) % (uint64_t)n);
}

/* ---- the fault catalogue -------------------------------------------------------------
 */

typedef enum fclass {
    F_BENIGN, /* the request is answered normally */
    F_RETRY,  /* fails before the stream opens; retryable */
    F_FATAL,  /* fails before the stream opens; not retryable */
    F_HINT,   /* retryable, but its Retry-After exceeds max_retry_after_ms */
    F_STREAM, /* the stream opens and then breaks: a continuation */
} fclass;

typedef enum kmode { K_NONE, K_WIDE, K_HEAD } kmode;

typedef struct fault {
    const char *name;
    const char *json; /* the plan step; %d is K when kmode != K_NONE */
    fclass cls;
    kmode k;
    ah_error_kind kind; /* for pre-stream faults: the error kind and status expected */
    int status;
    int server_wait; /* a retry after it must say wait_source "server" */
    int weight;
} fault;

/* Valid JSON that is not an object, as a mock step's tool_args (a JSON string). */
static const char *const BAD_ARGS[] = {"[1,2,3]", "42", "\"s\"", "null"};
enum { N_BAD_ARGS = 4 };

static const fault FAULTS[] = {
    {"ok", "{\"ok\":true}", F_BENIGN, K_NONE, AH_EK_NONE, 0, 0, 3},
    {"delay 20ms", "{\"delay_headers_ms\":20}", F_BENIGN, K_NONE, AH_EK_NONE, 0, 0, 3},
    {"503", "{\"status\":503}", F_RETRY, K_NONE, AH_EK_HTTP, 503, 0, 4},
    {"500", "{\"status\":500}", F_RETRY, K_NONE, AH_EK_HTTP, 500, 0, 2},
    {"502", "{\"status\":502}", F_RETRY, K_NONE, AH_EK_HTTP, 502, 0, 2},
    {"504", "{\"status\":504}", F_RETRY, K_NONE, AH_EK_HTTP, 504, 0, 2},
    {"408", "{\"status\":408}", F_RETRY, K_NONE, AH_EK_HTTP, 408, 0, 1},
    {"529 Retry-After 0", "{\"status\":529,\"headers\":{\"Retry-After\":\"0\"}}", F_RETRY,
     K_NONE, AH_EK_HTTP, 529, 0, 3},
    {"429 retry-after-ms 20", "{\"status\":429,\"headers\":{\"retry-after-ms\":\"20\"}}",
     F_RETRY, K_NONE, AH_EK_HTTP, 429, 1, 3},
    {"503 with the key in its message",
     "{\"status\":503,\"message\":\"upstream rejected key " KEY "\"}", F_RETRY, K_NONE,
     AH_EK_HTTP, 503, 0, 2},
    {"reset", "{\"reset\":true}", F_RETRY, K_NONE, AH_EK_CONNECT, 0, 0, 3},
    {"headers held past attempt_timeout", "{\"delay_headers_ms\":%d}", F_RETRY, K_NONE,
     AH_EK_TIMEOUT, 0, 0, 1},
    {"400", "{\"status\":400}", F_FATAL, K_NONE, AH_EK_HTTP, 400, 0, 1},
    {"401 with the key in its message",
     "{\"status\":401,\"message\":\"invalid x-api-key " KEY "\"}", F_FATAL, K_NONE,
     AH_EK_HTTP, 401, 0, 1},
    {"503 x-should-retry false",
     "{\"status\":503,\"headers\":{\"x-should-retry\":\"false\"}}", F_FATAL, K_NONE,
     AH_EK_HTTP, 503, 0, 1},
    {"429 Retry-After 3600", "{\"status\":429,\"headers\":{\"Retry-After\":\"3600\"}}",
     F_HINT, K_NONE, AH_EK_HTTP, 429, 0, 1},
    {"529 Retry-After date +2h",
     "{\"status\":529,\"headers\":{\"Retry-After\":{\"date_in_seconds\":7200}}}", F_HINT,
     K_NONE, AH_EK_HTTP, 529, 0, 1},
    {"cut", "{\"cut_after_events\":%d}", F_STREAM, K_WIDE, AH_EK_STREAM, 0, 0, 9},
    {"stall", "{\"stall_after_events\":%d}", F_STREAM, K_WIDE, AH_EK_STREAM, 0, 0, 2},
    {"malformed event", "{\"malformed_event_after\":%d}", F_STREAM, K_HEAD, AH_EK_STREAM,
     0, 0, 3},
    {"in-stream error",
     "{\"error_event_after\":%d,\"message\":\"overloaded for " KEY "\"}", F_STREAM,
     K_HEAD, AH_EK_STREAM, 0, 0, 3},
    {"non-object arguments [1,2,3]", "{\"ok\":true,\"tool_args\":\"[1,2,3]\"}", F_BENIGN,
     K_NONE, AH_EK_NONE, 0, 0, 1},
    {"non-object arguments 42", "{\"ok\":true,\"tool_args\":\"42\"}", F_BENIGN, K_NONE,
     AH_EK_NONE, 0, 0, 1},
    {"non-object arguments \"s\"", "{\"ok\":true,\"tool_args\":\"\\\"s\\\"\"}",
     F_BENIGN, K_NONE, AH_EK_NONE, 0, 0, 1},
    {"non-object arguments null", "{\"ok\":true,\"tool_args\":\"null\"}", F_BENIGN,
     K_NONE, AH_EK_NONE, 0, 0, 1},
    /* i12-wire: the end of a complete response, error bodies, invalid UTF-8 */
    {"unclean close after the end (no final chunk)",
     "{\"ok\":true,\"unclean_close_after_end\":\"no_final_chunk\"}", F_BENIGN, K_NONE,
     AH_EK_NONE, 0, 0, 1},
    {"unclean close after the end (reset)",
     "{\"ok\":true,\"unclean_close_after_end\":\"reset\"}", F_BENIGN, K_NONE, AH_EK_NONE,
     0, 0, 1},
    {"unclean close after the end (short Content-Length)",
     "{\"ok\":true,\"unclean_close_after_end\":\"short_content_length\"}", F_BENIGN,
     K_NONE, AH_EK_NONE, 0, 0, 1},
    {"a tool call after the end", "{\"ok\":true,\"extra_after_end\":true}", F_BENIGN,
     K_NONE, AH_EK_NONE, 0, 0, 1},
    {"invalid UTF-8 in the answer", "{\"ok\":true,\"invalid_utf8\":true}", F_BENIGN,
     K_NONE, AH_EK_NONE, 0, 0, 1},
    {"503 with an endless body", "{\"status\":503,\"body_fault\":\"endless\"}", F_RETRY,
     K_NONE, AH_EK_HTTP, 503, 0, 1},
    {"503 whose body stalls", "{\"status\":503,\"body_fault\":\"stall\"}", F_RETRY,
     K_NONE, AH_EK_TIMEOUT, 0, 0, 1},
};
enum { N_FAULTS = sizeof FAULTS / sizeof FAULTS[0] };

/* For each fault, 1 + the index in BAD_ARGS of its step's tool_args, or 0 (set_bad_args). */
static int g_bad_args[N_FAULTS];

static void set_bad_args(void)
{
    for (int f = 0; f < N_FAULTS; f++) {
        cJSON *step = cJSON_Parse(FAULTS[f].json);
        const cJSON *a = cJSON_GetObjectItem(step, "tool_args");
        for (int b = 0; b < N_BAD_ARGS && cJSON_IsString(a); b++)
            if (strcmp(a->valuestring, BAD_ARGS[b]) == 0)
                g_bad_args[f] = b + 1;
        cJSON_Delete(step);
    }
}

/* ---- one run's parameters and the oracle's prediction
 * ---------------------------------- */

typedef struct params {
    uint64_t seed;
    ah_wire wire;
    int max_attempts, max_continuations;
    size_t delta_bytes;
    int n;
    int f[MAX_FAULTS]; /* indexes into FAULTS */
    int k[MAX_FAULTS];
    int same_key_twice; /* deliver the tool call twice at once, one key */
    int redis_drop;     /* a Redis ledger that loses its connection during the body */
    char plan[1024];
} params;

typedef struct retry_expect {
    int status;
    ah_error_kind kind;
    int server_wait;
} retry_expect;

typedef struct prediction {
    ah_run_outcome outcome;
    ah_error_kind kind; /* NONE when completed */
    int status;
    int gave_up; /* the run ended in an llm_gave_up (pre-stream failure) */
    ah_giveup_reason reason;
    int requests, continuations;
    int failed_step;  /* 1 or 2 when failed */
    int tool_reached; /* step 1 completed: the tool was called */
    int bad_args;     /* ... with arguments that are not an object (1..N_BAD_ARGS) */
    int text_unchecked; /* a fault changed the answer's bytes */
    int n_retries;
    retry_expect retries[MAX_FAULTS];
} prediction;

static void draw_params(uint64_t seed, size_t run, params *p)
{
    memset(p, 0, sizeof *p);
    uint64_t s = seed ^ (0xd1b54a32d192ed03ULL * (uint64_t)(run + 1));
    splitmix(&s);
    p->seed = s;
    p->wire = (ah_wire)draw(&s, AH_WIRE_COUNT_);
    p->max_attempts = 1 + draw(&s, 4);
    p->max_continuations = draw(&s, 4);
    static const size_t deltas[] = {0, 0, 1, 2, 5, 11};
    p->delta_bytes = deltas[draw(&s, 6)];
    p->same_key_twice = draw(&s, 4) == 0;
    uint64_t s2 = p->seed ^ 0x5bd1e9955bd1e995ULL; /* its own stream: s stays as it was */
    p->redis_drop = draw(&s2, 8) == 0; /* main keeps it only with a Redis server */
    static const int nweights[] = {10, 22, 25, 20, 13, 7, 3}; /* 0..6 faults */
    int total = 0, w;
    for (int i = 0; i <= MAX_FAULTS; i++)
        total += nweights[i];
    w = draw(&s, total);
    for (p->n = 0; w >= nweights[p->n]; p->n++)
        w -= nweights[p->n];
    int fweight = 0;
    for (int i = 0; i < N_FAULTS; i++)
        fweight += FAULTS[i].weight;
    size_t off = 0;
    off += (size_t)snprintf(p->plan + off, sizeof p->plan - off, "[");
    for (int i = 0; i < p->n; i++) {
        int x = draw(&s, fweight), f = 0;
        while (x >= FAULTS[f].weight)
            x -= FAULTS[f++].weight;
        p->f[i] = f;
        /* Past the shortest stream (3 events: a reply with no text) the malformed and
         * error faults may land after OpenAI's [DONE], which is rightly ignored. */
        p->k[i] = FAULTS[f].k == K_WIDE   ? draw(&s, 41)
                  : FAULTS[f].k == K_HEAD ? draw(&s, p->wire == AH_WIRE_OPENAI ? 3 : 41)
                                          : HUNG_HEADERS_MS * g_time_scale;
        off += (size_t)snprintf(p->plan + off, sizeof p->plan - off, "%s", i ? "," : "");
        off += (size_t)snprintf(p->plan + off, sizeof p->plan - off, FAULTS[f].json,
                                p->k[i]);
    }
    snprintf(p->plan + off, sizeof p->plan - off, "]");
}

/* like[i]: the stream fault of request i (0-based; one plan step per request) kept
 * nothing new, as the run showed (NULL: none did). */
static void simulate(const params *p, const int *like, prediction *o)
{
    memset(o, 0, sizeof *o);
    o->reason = AH_GIVEUP_COUNT_;
    int step = 1, attempt = 0, conts = 0, i = 0;
    for (;;) {
        int f = i < p->n ? p->f[i] : 0; /* an exhausted plan answers ok */
        i++;
        o->requests++;
        attempt++;
        const fault *ft = &FAULTS[f];
        /* its bytes become U+FFFD: the answer's text differs from the reference */
        o->text_unchecked |= strstr(ft->json, "invalid_utf8") != NULL;
        switch (ft->cls) {
        case F_BENIGN:
            if (step == 2) {
                o->outcome = AH_OUTCOME_COMPLETED;
                return;
            }
            o->tool_reached = 1;
            o->bad_args = g_bad_args[f]; /* step 2 has a tool result: no tool call */
            step = 2;
            attempt = conts = 0;
            continue;
        case F_RETRY:
        case F_HINT:
            if (attempt < p->max_attempts && ft->cls == F_RETRY) {
                o->retries[o->n_retries++] =
                    (retry_expect){ft->status, ft->kind, ft->server_wait};
                continue;
            }
            o->reason = attempt >= p->max_attempts ? AH_GIVEUP_ATTEMPTS
                                                   : AH_GIVEUP_RETRY_AFTER_TOO_LONG;
            goto failed;
        case F_FATAL:
            o->reason = AH_GIVEUP_NOT_RETRYABLE;
            goto failed;
        case F_STREAM: {
            /* the provider's own error, or nothing new kept: a retry too */
            int retry = strstr(ft->json, "error_event_after") != NULL ||
                        (like && like[o->requests - 1]);
            if (retry && attempt >= p->max_attempts) {
                o->reason = AH_GIVEUP_ATTEMPTS;
                o->gave_up = 1;
                goto failed;
            }
            if (conts >= p->max_continuations)
                goto failed;
            conts++;
            o->continuations++;
            if (retry)
                o->retries[o->n_retries++] = (retry_expect){0, AH_EK_STREAM, 0};
            else
                attempt = 0;
            continue;
        }
        }
    failed:
        o->outcome = AH_OUTCOME_FAILED;
        o->kind = ft->kind;
        o->status = ft->status;
        o->gave_up |= ft->cls != F_STREAM;
        o->failed_step = step;
        return;
    }
}

/* ---- the harness ---------------------------------------------------------------------
 */

typedef struct redis_exec redis_exec;

typedef struct run_state {
    const params *p;
    ah_loop *loop;
    redis_exec *rx; /* a Redis run's tool call in flight (or done) */
    ah_worker *worker;
    char **events;
    size_t n_events, cap_events;
    int exec_calls, body_runs;
    int twice_ran, twice_dup; /* the second delivery: completed, and as a duplicate */
    char key[160];
    ah_ledger *ledger;
    int oom;
} run_state;

/* The Redis server of the idle-drop runs (started by main when redis-server exists). */
static redis_fixture g_redis;
static int g_redis_up;

static atomic_long log_lines;
static atomic_int log_leak;

static void log_handler(void *ud, ah_log_level level, int event, const char *line)
{
    (void)ud;
    (void)level;
    (void)event;
    atomic_fetch_add(&log_lines, 1);
    if (strstr(line, SECRET_MARK) && !atomic_exchange(&log_leak, 1))
        fprintf(stderr, "soak: secret in a log line: %s\n", line);
}

static void on_event(void *ud, const ah_event *ev)
{
    run_state *r = ud;
    char *json = ah_event_to_json(ev);
    if (!json) {
        r->oom = 1;
        return;
    }
    if (r->n_events == r->cap_events) {
        size_t cap = r->cap_events ? r->cap_events * 2 : 64;
        char **e = realloc(r->events, cap * sizeof *e);
        if (!e) {
            free(json);
            r->oom = 1;
            return;
        }
        r->events = e;
        r->cap_events = cap;
    }
    r->events[r->n_events++] = json;
}

static void add_body(void *ud, ah_tool_call *call)
{
    run_state *r = ud;
    r->body_runs++;
    if (r->p->redis_drop && redis_fixture_kill_clients(&g_redis) < 1)
        r->oom = 1; /* (the harness failed: reported as such) */
    cJSON *args = cJSON_Parse(ah_tool_call_args(call));
    const cJSON *a = cJSON_GetObjectItem(args, "a"), *b = cJSON_GetObjectItem(args, "b");
    if (!cJSON_IsNumber(a) || !cJSON_IsNumber(b)) {
        cJSON_Delete(args);
        ah_tool_call_body_failed(call, NULL);
        return;
    }
    char out[32];
    snprintf(out, sizeof out, "%d", a->valueint + b->valueint);
    cJSON_Delete(args);
    ah_tool_call_body_ok(call, out);
}

/* ---- a Redis run's tool call, driven on the shared loop -------------------------------
 * The first delivery runs the body (during which Redis drops the connections); once it
 * is answered, Redis drops them again and a second delivery of the key must return the
 * first's receipt as a duplicate. Then the worker gets the first's answer. */
struct redis_exec {
    run_state *r;
    ah_worker *w;
    size_t index;
    char key[160], args[256];
    ah_tool_call *c, *c2;
    ah_timer *tick;
    ah_tool_response res;
    char content[600];
};

static void rx_notify(void *ud)
{
    ah_timer_start(((redis_exec *)ud)->tick, 0); /* step from the loop, not from here */
}

static ah_tool_call *rx_call(redis_exec *x)
{
    ah_tool_policy tp;
    ah_tool_policy_init(&tp);
    tp.loop = x->r->loop;
    tp.notify = rx_notify;
    tp.notify_ud = x;
    ah_tool_call *c = NULL;
    ah_tool_call_new(&tp, x->r->ledger, NULL, x->key, x->args, &c, NULL, 0);
    return c;
}

static void rx_step(void *ud)
{
    redis_exec *x = ud;
    run_state *r = x->r;
    ah_tool_call *c = x->c2 ? x->c2 : x->c;
    for (;;) {
        ah_tool_action a = ah_tool_step(c);
        if (a == AH_TOOL_DO_RUN_BODY) {
            add_body(r, c);
            continue;
        }
        if (a == AH_TOOL_DO_RETRY_AFTER || a == AH_TOOL_DO_WAIT_CLAIM) {
            /* a notify (the ledger answered) comes first; the timer only re-checks */
            int64_t ms = ah_tool_call_wait_ms(c);
            ah_timer_start(x->tick, a == AH_TOOL_DO_RETRY_AFTER ? ms : (ms > 0 ? ms : 100));
            return;
        }
        break;
    }
    if (!x->c2) {
        x->res.outcome = ah_tool_call_outcome(c);
        snprintf(x->content, sizeof x->content, "%s",
                 x->res.outcome == AH_TOOL_OK ? ah_tool_call_receipt(c)
                                              : ah_tool_call_error(c)->message);
        x->res.content = x->content;
        x->res.duplicate = ah_tool_call_duplicate(c);
        x->res.attempts = ah_tool_call_attempts(c);
        if (redis_fixture_kill_clients(&g_redis) < 0 || !(x->c2 = rx_call(x))) {
            r->oom = 1;
            ah_worker_tool_done(x->w, x->index, &x->res);
            return;
        }
        ah_timer_start(x->tick, 0);
        return;
    }
    r->twice_ran = 1;
    r->twice_dup = ah_tool_call_outcome(c) == AH_TOOL_OK && ah_tool_call_duplicate(c) &&
                   ah_tool_call_attempts(c) == 0 && x->res.outcome == AH_TOOL_OK &&
                   strcmp(ah_tool_call_receipt(c), ah_tool_call_receipt(x->c)) == 0;
    ah_worker_tool_done(x->w, x->index, &x->res);
}

static void rx_free(redis_exec *x)
{
    if (!x)
        return;
    ah_timer_free(x->tick);
    ah_tool_call_free(x->c);
    ah_tool_call_free(x->c2);
    free(x);
}

static int add_exec(void *ud, ah_worker *w, const ah_tool_request *req,
                    ah_tool_response *res)
{
    run_state *r = ud;
    if (r->p->redis_drop) {
        r->exec_calls++;
        snprintf(r->key, sizeof r->key, "%s", req->key);
        redis_exec *x = calloc(1, sizeof *x);
        if (x) {
            x->r = r;
            x->w = w;
            x->index = req->index;
            snprintf(x->key, sizeof x->key, "%s", req->key);
            snprintf(x->args, sizeof x->args, "%s", req->arguments);
            x->tick = ah_timer_new(r->loop, rx_step, x);
        }
        if (!x || !x->tick || r->rx || !(x->c = rx_call(x))) {
            rx_free(x);
            r->oom = 1;
            res->outcome = AH_TOOL_ERROR;
            res->content = "error: the harness could not start the call";
            return 0;
        }
        r->rx = x;
        ah_timer_start(x->tick, 0);
        return 1; /* answered through ah_worker_tool_done */
    }
    (void)w;
    r->exec_calls++;
    snprintf(r->key, sizeof r->key, "%s", req->key);
    ah_tool_call *c = NULL;
    ah_tool_call_new(NULL, r->ledger, NULL, req->key, req->arguments, &c, NULL, 0);
    ah_tool_driver d = {.body = add_body, .body_ud = r};
    static char content[64];
    if (!c) {
        r->oom = 1;
        res->outcome = AH_TOOL_ERROR;
        res->content = "out of memory";
        return 0;
    }
    if (r->p->same_key_twice) {
        /* A second delivery of this call (one key) arrives while the first's body is in
         * flight: step both by hand, as a loop driver would. */
        ah_tool_call *c2 = NULL;
        ah_tool_call_new(NULL, r->ledger, NULL, req->key, req->arguments, &c2, NULL, 0);
        if (!c2 || ah_tool_step(c) != AH_TOOL_DO_RUN_BODY ||
            ah_tool_step(c2) != AH_TOOL_DO_WAIT_CLAIM) {
            r->oom = !c2;
            ah_tool_call_free(c2);
            ah_tool_call_free(c);
            res->outcome = AH_TOOL_ERROR;
            res->content = "error: the second delivery did not wait for the claim";
            return 0;
        }
        add_body(r, c); /* reports; the next step (in ah_tool_call_run) records */
        res->outcome = ah_tool_call_run(c, &d);
        ah_tool_action a2 = ah_tool_step(c2);
        r->twice_ran = 1;
        r->twice_dup = a2 == AH_TOOL_DO_RETURN_DUPLICATE && ah_tool_call_duplicate(c2) &&
                       ah_tool_call_attempts(c2) == 0 &&
                       strcmp(ah_tool_call_receipt(c2), ah_tool_call_receipt(c)) == 0;
        ah_tool_call_free(c2);
    } else {
        res->outcome = ah_tool_call_run(c, &d);
    }
    snprintf(content, sizeof content, "%s",
             res->outcome == AH_TOOL_OK ? ah_tool_call_receipt(c) : "error");
    res->content = content;
    res->duplicate = ah_tool_call_duplicate(c);
    res->attempts = ah_tool_call_attempts(c);
    ah_tool_call_free(c);
    return 0;
}

/* ---- checking ------------------------------------------------------------------------
 */

static int g_verbose;
static int g_port; /* the mock's port, shared by every run */
static char g_why[4096];

static int fail(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(g_why, sizeof g_why, fmt, ap);
    va_end(ap);
    return 1;
}

static cJSON *event_at(const run_state *r, size_t i, const char **type)
{
    cJSON *o = cJSON_Parse(r->events[i]);
    const cJSON *t = cJSON_GetObjectItem(o, "type");
    *type = cJSON_IsString(t) ? t->valuestring : "";
    return o;
}

static const char *jstr(const cJSON *o, const char *k)
{
    const cJSON *v = cJSON_GetObjectItem(o, k);
    return cJSON_IsString(v) ? v->valuestring : "";
}

static int jint(const cJSON *o, const char *k)
{
    const cJSON *v = cJSON_GetObjectItem(o, k);
    return cJSON_IsNumber(v) ? v->valueint : 0;
}

static int valid_utf8(const char *s)
{
    const unsigned char *p = (const unsigned char *)s;
    while (*p) {
        int n = *p < 0x80           ? 1
                : (*p >> 5) == 6    ? 2
                : (*p >> 4) == 14   ? 3
                : (*p >> 3) == 30   ? 4
                                    : 0;
        if (!n || (n == 2 && *p < 0xC2))
            return 0;
        for (int i = 1; i < n; i++)
            if ((p[i] & 0xC0) != 0x80)
                return 0;
        p += n;
    }
    return 1;
}

/* The events against the prediction: retries (in order, with their status, kind and
 * wait source), continuations, the give-up, the end. */
static int check_events(const run_state *r, const prediction *o)
{
    int retries = 0, conts = 0, gave_up = 0, ends = 0, starts = 0, rc = 0;
    for (size_t i = 0; i < r->n_events && !rc; i++) {
        if (strstr(r->events[i], SECRET_MARK))
            return fail("secret in event: %s", r->events[i]);
        if (!valid_utf8(r->events[i])) /* what --events writes must stay JSON Lines */
            return fail("event %zu is not valid UTF-8", i);
        const char *type;
        cJSON *e = event_at(r, i, &type);
        if (!e)
            return fail("event %zu is not JSON: %s", i, r->events[i]);
        const cJSON *err = cJSON_GetObjectItem(e, "error");
        if (strcmp(type, "llm_call_start") == 0) {
            starts++;
        } else if (strcmp(type, "llm_retry") == 0) {
            if (retries >= o->n_retries) {
                rc = fail("unexpected llm_retry: %s", r->events[i]);
            } else {
                const retry_expect *x = &o->retries[retries];
                if (jint(e, "status") != x->status ||
                    strcmp(jstr(err, "kind"), ah_error_kind_name(x->kind)) != 0)
                    rc = fail("retry %d: expected %s %d, got %s", retries + 1,
                              ah_error_kind_name(x->kind), x->status, r->events[i]);
                else if (x->server_wait && strcmp(jstr(e, "wait_source"), "server") != 0)
                    rc = fail("retry %d: the wait should be the server's: %s",
                              retries + 1, r->events[i]);
            }
            retries++;
        } else if (strcmp(type, "llm_continuation") == 0) {
            conts++;
            if (jint(e, "continuation") < 1 ||
                jint(e, "continuation") > r->p->max_continuations)
                rc = fail("continuation number out of range: %s", r->events[i]);
            else if ((jint(e, "committed_blocks") == 0) !=
                     (strcmp(jstr(e, "mode"), "regenerate") == 0))
                rc = fail("mode regenerate is for a continuation that kept nothing: %s",
                          r->events[i]);
        } else if (strcmp(type, "llm_gave_up") == 0) {
            gave_up++;
            if (strcmp(jstr(e, "reason"), ah_giveup_reason_name(o->reason)) != 0)
                rc = fail("gave up for '%s', expected '%s'", jstr(e, "reason"),
                          ah_giveup_reason_name(o->reason));
        } else if (strcmp(type, "run_end") == 0) {
            ends++;
            if (strcmp(jstr(e, "outcome"), ah_run_outcome_name(o->outcome)) != 0)
                rc = fail("run_end says %s", r->events[i]);
        }
        cJSON_Delete(e);
    }
    if (rc)
        return rc;
    if (retries != o->n_retries)
        return fail("%d llm_retry events, expected %d", retries, o->n_retries);
    if (conts != o->continuations)
        return fail("%d llm_continuation events, expected %d", conts, o->continuations);
    if (gave_up != o->gave_up)
        return fail("%d llm_gave_up events, expected %d", gave_up, o->gave_up);
    if (ends != 1)
        return fail("%d run_end events", ends);
    if (starts != o->requests)
        return fail("%d llm_call_start events, expected %d", starts, o->requests);
    return 0;
}

/* History: every tool_use complete (arguments {"a":42,"b":42}) and answered, exactly as
 * many as the tool rounds that happened; in a completed run, a message still marked
 * partial is one a continuation prompt followed (the prompt rung keeps the cut message as
 * it was and adds the visible prompt after it); on the prefill rung none is left. */
static int check_history(const run_state *r, const prediction *o)
{
    const ah_conversation *c = ah_worker_history(r->worker);
    int uses = 0, results = 0;
    for (size_t m = 0; m < ah_conversation_count(c); m++) {
        if (o->outcome == AH_OUTCOME_COMPLETED && ah_conversation_is_partial(c, m) &&
            (m + 1 >= ah_conversation_count(c) ||
             ah_conversation_role(c, m + 1) != AH_ROLE_USER))
            return fail("message %zu still partial after a completed run, and no "
                        "continuation prompt follows it", m);
        for (size_t i = 0; i < ah_conversation_block_count(c, m); i++) {
            const ah_msg_block *b = ah_conversation_block(c, m, i);
            if (b->kind == AH_MSG_TOOL_RESULT)
                results++;
            if (b->kind != AH_MSG_TOOL_USE)
                continue;
            uses++;
            cJSON *args = cJSON_Parse(b->arguments ? b->arguments : "");
            /* Arguments that are not an object stay in history as the model sent them
             * (the request carries {} for them). */
            int ok = o->bad_args ? b->arguments &&
                                       strcmp(b->arguments, BAD_ARGS[o->bad_args - 1]) == 0
                                 : args && jint(args, "a") == 42 && jint(args, "b") == 42 &&
                                       cJSON_GetArraySize(args) == 2;
            cJSON_Delete(args);
            if (!ok)
                return fail("incomplete tool_use committed: %s", b->arguments);
        }
    }
    if (uses != o->tool_reached || results != o->tool_reached)
        return fail("history has %d tool_use and %d tool_result blocks, expected %d",
                    uses, results, o->tool_reached);
    return 0;
}

typedef struct reference {
    char step1[256], final[256];
    char bad_final[N_BAD_ARGS][512]; /* after a tool call with BAD_ARGS[i] */
} reference;

static void refreshed(void *ud, ah_status st)
{
    *(int *)ud = st == AH_OK ? 1 : -1;
}

static int check_run(run_state *r, ah_mock *mock, const prediction *o,
                     const reference *ref, ah_run_outcome out)
{
    const ah_error *err = ah_worker_error(r->worker);
    if (r->oom)
        return fail("out of memory in the harness");
    if (out != o->outcome)
        return fail("outcome %s (%s: %s), expected %s", ah_run_outcome_name(out),
                    ah_error_kind_name(err->kind), err->message,
                    ah_run_outcome_name(o->outcome));
    if (out == AH_OUTCOME_FAILED &&
        (err->kind != o->kind || (o->status && err->status != o->status)))
        return fail("failed with %s %d (%s), expected %s %d",
                    ah_error_kind_name(err->kind), err->status, err->message,
                    ah_error_kind_name(o->kind), o->status);
    /* No committed text duplicated or lost: a completed run says exactly what an
     * uninterrupted one says; a failed one, at most a prefix of its step's answer. */
    const char *text = ah_worker_text(r->worker);
    const char *want = o->outcome == AH_OUTCOME_COMPLETED || o->failed_step == 2
                           ? (o->bad_args ? ref->bad_final[o->bad_args - 1] : ref->final)
                           : ref->step1;
    if (!o->text_unchecked &&
        (o->outcome == AH_OUTCOME_COMPLETED ? strcmp(text, want) != 0
                                            : strncmp(text, want, strlen(text)) != 0))
        return fail("final text '%s', reference '%s'", text, want);
    if (!valid_utf8(text))
        return fail("final text is not valid UTF-8");
    /* The tool: asked for once per key and run once, from the completed response only;
     * never with arguments that are not an object. */
    int runs = o->tool_reached && !o->bad_args;
    if (ah_ledger_is_redis(r->ledger)) { /* the counts read a snapshot: take one */
        int done = 0;
        ah_redis_req *q = NULL;
        if (ah_ledger_redis_refresh(r->ledger, refreshed, &done, &q) != AH_OK)
            return fail("redis ledger: %s", ah_ledger_errmsg(r->ledger));
        while (!done)
            ah_loop_run_once(r->loop, 100);
        if (done < 0)
            return fail("redis ledger: %s", ah_ledger_errmsg(r->ledger));
    }
    if (r->exec_calls != runs || r->body_runs != runs)
        return fail("tool asked %d times and run %d times, expected %d", r->exec_calls,
                    r->body_runs, runs);
    if (ah_ledger_count(r->ledger) != runs)
        return fail("ledger holds %" PRId64 " entries", ah_ledger_count(r->ledger));
    if (ah_ledger_claims(r->ledger) != 0)
        return fail("ledger holds %" PRId64 " claims after the run",
                    ah_ledger_claims(r->ledger));
    if (runs && r->rx && r->rx->res.outcome != AH_TOOL_OK)
        return fail("the tool call across a Redis idle drop failed: %s", r->rx->content);
    if (runs && (r->p->same_key_twice || r->p->redis_drop) && (!r->twice_ran || !r->twice_dup))
        return fail("the second delivery of one key did not get the first's receipt as a "
                    "duplicate");
    if (runs) {
        char prefix[64];
        snprintf(prefix, sizeof prefix, "%s:", ah_worker_run_id(r->worker));
        if (strncmp(r->key, prefix, strlen(prefix)) != 0)
            return fail("idempotency key '%s' is not run id + tool call id", r->key);
    }
    if (g_verbose)
        fprintf(stderr, "  the mock saw %zu requests\n", ah_mock_request_count(mock));
    if (check_history(r, o) || check_events(r, o))
        return 1;
    if (strstr(err->message, SECRET_MARK))
        return fail("secret in the run's error: %s", err->message);
    if ((int)ah_mock_request_count(mock) != o->requests)
        return fail("the mock saw %zu requests, expected %d", ah_mock_request_count(mock),
                    o->requests);
    ah_mock_request mr;
    for (size_t i = 0; i < ah_mock_request_count(mock); i++) {
        if (ah_mock_request_get(mock, i, &mr) != AH_OK)
            return fail("mock request %zu missing", i);
        for (size_t h = 0; h < mr.header_count; h++)
            if (strstr(mr.headers[h].value, SECRET_MARK))
                return fail("secret reached the mock's request log");
    }
    ah_worker_stats st;
    ah_worker_get_stats(r->worker, &st);
    if (st.attempts != o->requests || st.continuations != o->continuations ||
        st.retries != o->n_retries || st.tool_calls != o->tool_reached)
        return fail("stats: attempts %d retries %d continuations %d tool_calls %d",
                    st.attempts, st.retries, st.continuations, st.tool_calls);
    return 0;
}

/* ---- one run -------------------------------------------------------------------------
 */

static void free_events(run_state *r)
{
    for (size_t i = 0; i < r->n_events; i++)
        free(r->events[i]);
    free(r->events);
    r->events = NULL;
    r->n_events = r->cap_events = 0;
}

/* Which requests' stream faults kept nothing new, from the run's events: the request's
 * llm_continuation says committed_blocks 0, or the run gave up right after it (a cut
 * that kept something is never given up on; only the cap ends it). */
static void observed_regenerations(const run_state *r, int *like)
{
    int req = -1;
    for (size_t i = 0; i < r->n_events; i++) {
        const char *type;
        cJSON *e = event_at(r, i, &type);
        if (!e)
            continue;
        if (strcmp(type, "llm_call_start") == 0)
            req++;
        else if (req >= 0 && req < MAX_FAULTS && strcmp(type, "llm_continuation") == 0)
            like[req] = jint(e, "committed_blocks") == 0;
        else if (req >= 0 && req < MAX_FAULTS && strcmp(type, "llm_gave_up") == 0)
            like[req] = 1;
        cJSON_Delete(e);
    }
}

/* Returns 0 on success, 1 when an invariant failed (g_why says which), 2 when the harness
 * itself could not start. With ref_out the run is a fault-free reference run; else pred
 * receives the oracle's prediction it was checked against. */
static int one_run(ah_loop *loop, const params *p, const reference *ref,
                   reference *ref_out, ah_run_outcome *out_outcome, prediction *pred)
{
    int rc = 2;
    char err[256];
    run_state r = {.p = p, .loop = loop};
    ah_client *client = NULL;
    ah_mock_config mc;
    ah_mock_config_init(&mc);
    mc.plan_json = p->plan;
    mc.delta_bytes = p->delta_bytes;
    /* Every run's mock listens on the same port, as one provider would: a new port per
     * run would leave one entry per port in libcurl's DNS and connection caches (they
     * expire after 60 s), growth the memory check would wrongly blame on the core. If
     * something else took the port meanwhile, any free port will do. */
    mc.port = g_port;
    ah_mock *mock = NULL;
    ah_mock_new(&mc, &mock, err, sizeof err);
    if (!mock && g_port) {
        mc.port = 0;
        ah_mock_new(&mc, &mock, err, sizeof err);
    }
    if (!mock) {
        fail("mock: %s", err);
        goto cleanup;
    }
    g_port = ah_mock_port(mock);
    ah_client_config cc = {.wire = p->wire,
                           .base_url = ah_mock_url(mock),
                           .api_key = KEY,
                           .model = "mock-model",
                           .max_tokens = 256};
    if (ah_client_new(&cc, &client, err, sizeof err) != AH_OK) {
        fail("client: %s", err);
        goto cleanup;
    }
    if (p->redis_drop) {
        char prefix[64];
        snprintf(prefix, sizeof prefix, "soak:%016" PRIx64 ":", p->seed);
        ah_ledger_redis_config lc;
        ah_ledger_redis_config_init(&lc);
        lc.url = g_redis.url;
        lc.prefix = prefix;
        if (ah_ledger_new_redis(loop, &lc, &r.ledger, err, sizeof err) != AH_OK) {
            fail("redis ledger: %s", err);
            goto cleanup;
        }
    } else if (!(r.ledger = ah_ledger_new_memory())) {
        fail("ledger: out of memory");
        goto cleanup;
    }
    ah_policy pol;
    ah_policy_init(&pol);
    pol.max_attempts = p->max_attempts;
    pol.max_continuations = p->max_continuations;
    pol.base_ms = 1;
    pol.cap_ms = 5;
    pol.max_retry_after_ms = MAX_RETRY_AFTER_MS;
    pol.idle_timeout_ms = IDLE_TIMEOUT_MS * g_time_scale;
    pol.attempt_timeout_ms = ATTEMPT_TIMEOUT_MS * g_time_scale;
    ah_tool_def tool = {
        .name = "add", .description = "Add two integers", .schema_json = ADD_SCHEMA};
    ah_worker_config wc = {.loop = loop,
                           .client = client,
                           .system = "You are a soak test.",
                           .policy = &pol,
                           .tools = &tool,
                           .n_tools = 1,
                           .tool_exec = add_exec,
                           .tool_ud = &r,
                           .on_event = on_event,
                           .event_ud = &r};
    if (ah_worker_new(&wc, &r.worker, err, sizeof err) != AH_OK) {
        fail("worker: %s", err);
        goto cleanup;
    }
    ah_run_outcome out = ah_worker_run(r.worker, "add please");
    if (out_outcome)
        *out_outcome = out;
    if (ref_out) {
        const ah_conversation *c = ah_worker_history(r.worker);
        rc = out != AH_OUTCOME_COMPLETED || ah_conversation_count(c) < 4;
        if (rc) {
            fail("the fault-free reference run ended %s (%s)", ah_run_outcome_name(out),
                 ah_worker_error(r.worker)->message);
        } else {
            const ah_msg_block *b = ah_conversation_block(c, 1, 0);
            snprintf(ref_out->step1, sizeof ref_out->step1, "%s",
                     b && b->kind == AH_MSG_TEXT ? b->text : "");
            snprintf(ref_out->final, sizeof ref_out->final, "%s",
                     ah_worker_text(r.worker));
        }
    } else {
        int like[MAX_FAULTS] = {0};
        observed_regenerations(&r, like);
        simulate(p, like, pred);
        rc = check_run(&r, mock, pred, ref, out);
    }
    if (g_verbose || (rc && !ref_out)) {
        for (size_t i = 0; i < r.n_events; i++)
            if (!strstr(r.events[i], "\"text_delta\""))
                fprintf(stderr, "  event: %s\n", r.events[i]);
    }
cleanup:
    ah_worker_free(r.worker);
    rx_free(r.rx);
    ah_ledger_free(r.ledger);
    ah_client_free(client);
    ah_mock_free(mock);
    free_events(&r);
    return rc;
}

/* ---- memory --------------------------------------------------------------------------
 */

typedef struct mem {
    int64_t heap, rss;
    int fds;
} mem;

static int count_fds(void)
{
    int n = 0;
    DIR *d = opendir("/proc/self/fd");
    if (!d)
        return -1;
    for (struct dirent *e; (e = readdir(d)) != NULL;)
        n += e->d_name[0] != '.';
    closedir(d);
    return n - 1; /* the directory's own descriptor */
}

static mem measure(void)
{
    mem m = {0, 0, count_fds()};
#ifdef SOAK_ASAN
    m.heap = (int64_t)__sanitizer_get_current_allocated_bytes();
#else
    struct mallinfo2 mi = mallinfo2(); /* all arenas: the mock's threads allocate too */
    m.heap = (int64_t)(mi.uordblks + mi.hblkhd);
#endif
    FILE *f = fopen("/proc/self/statm", "r");
    long pages = 0, resident = 0;
    if (f) {
        if (fscanf(f, "%ld %ld", &pages, &resident) != 2)
            resident = 0;
        fclose(f);
    }
    m.rss = (int64_t)resident * sysconf(_SC_PAGESIZE);
    return m;
}

/* ---- main ----------------------------------------------------------------------------
 */

/* glibc's per-thread cache keeps up to 7 freed chunks per size class, and mallinfo2
 * counts them as in use: the heap figure would creep up as more size classes fill (by
 * ~50 KB over 1000 runs here, levelling off). With the cache off (a tunable, read only at
 * start-up) the figure is exact, so the soak re-executes itself once with it set. Not
 * under valgrind: the new image would run outside it (and valgrind's malloc has no such
 * cache; its mallinfo is not glibc's, so memory is then reported, not checked). */
static void exact_heap_or_reexec(char **argv)
{
#ifdef SOAK_ASAN
    (void)argv;
    g_heap_exact = 1; /* the sanitizer allocator's count has no cache in it */
#else
    static const char off[] = "glibc.malloc.tcache_count=0";
    const char *t = getenv("GLIBC_TUNABLES"), *pre = getenv("LD_PRELOAD");
    if (t && strstr(t, off)) {
        g_heap_exact = 1;
        return;
    }
    if (getenv("AH_SOAK_REEXEC") || (pre && strstr(pre, "vgpreload")))
        return;
    char buf[1024];
    snprintf(buf, sizeof buf, "%s%s%s", t ? t : "", t && *t ? ":" : "", off);
    if (setenv("GLIBC_TUNABLES", buf, 1) != 0 || setenv("AH_SOAK_REEXEC", "1", 1) != 0)
        return;
    execv("/proc/self/exe", argv);
    /* exec failed: go on, reporting memory without checking it */
#endif
}

static int parse_u64(const char *s, uint64_t *out)
{
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 0);
    if (errno || end == s || *end)
        return -1;
    *out = v;
    return 0;
}

static void describe(const params *p)
{
    fprintf(stderr, "  wire %s, max_attempts %d, max_continuations %d, delta_bytes %zu%s%s\n",
            ah_wire_name(p->wire), p->max_attempts, p->max_continuations, p->delta_bytes,
            p->same_key_twice ? ", the key delivered twice at once" : "",
            p->redis_drop ? ", a Redis ledger whose connections drop during the body" : "");
    for (int i = 0; i < p->n; i++) {
        if (FAULTS[p->f[i]].k != K_NONE)
            fprintf(stderr, "  plan step %d: %s after %d events\n", i + 1,
                    FAULTS[p->f[i]].name, p->k[i]);
        else
            fprintf(stderr, "  plan step %d: %s\n", i + 1, FAULTS[p->f[i]].name);
    }
    fprintf(stderr, "  plan: %s\n", p->plan);
}

int main(int argc, char **argv)
{
    uint64_t runs = DEFAULT_RUNS, seed = DEFAULT_SEED, only = UINT64_MAX;
    const char *e;
    exact_heap_or_reexec(argv);
    set_bad_args();
    if ((e = getenv("AH_SOAK_RUNS")) && *e && parse_u64(e, &runs) != 0) {
        fprintf(stderr, "soak: AH_SOAK_RUNS must be a number\n");
        return 2;
    }
    if ((e = getenv("AH_SOAK_SEED")) && *e && parse_u64(e, &seed) != 0) {
        fprintf(stderr, "soak: AH_SOAK_SEED must be a number\n");
        return 2;
    }
    uint64_t scale = 1;
    if ((e = getenv("AH_SOAK_TIME_SCALE")) && *e &&
        (parse_u64(e, &scale) != 0 || scale < 1 || scale > 1000)) {
        fprintf(stderr, "soak: AH_SOAK_TIME_SCALE must be a number from 1 to 1000\n");
        return 2;
    }
    g_time_scale = (int)scale;
    for (int i = 1; i < argc; i++) {
        uint64_t *dst = NULL;
        if (strcmp(argv[i], "--runs") == 0)
            dst = &runs;
        else if (strcmp(argv[i], "--seed") == 0)
            dst = &seed;
        else if (strcmp(argv[i], "--only") == 0)
            dst = &only;
        else if (strcmp(argv[i], "--verbose") == 0) {
            g_verbose = 1;
            continue;
        }
        if (!dst || i + 1 >= argc || parse_u64(argv[++i], dst) != 0) {
            fprintf(stderr, "usage: soak [--runs N] [--seed S] [--only I] [--verbose]\n");
            return 2;
        }
    }
    printf("soak: seed %" PRIu64 ", %" PRIu64 " runs (reproduce: soak --seed %" PRIu64
           ")\n",
           seed, only == UINT64_MAX ? runs : 1, seed);
    g_redis_up = redis_fixture_start(&g_redis, 0, NULL) == 0;
    if (!g_redis_up)
        printf("soak: no redis-server: the Redis idle-drop runs use the memory ledger\n");
    fflush(stdout);
    ah_log_set_handler(log_handler, NULL, AH_LOG_DEBUG);

    int rc = 1;
    ah_seeded_rng *rng = ah_seeded_rng_new(seed);
    ah_loop *loop = rng ? ah_loop_new(ah_clock_real(), ah_seeded_rng_get(rng)) : NULL;
    if (!loop) {
        fprintf(stderr, "soak: cannot create the loop\n");
        goto cleanup;
    }
    /* The reference: an uninterrupted run per wire format. */
    reference ref[AH_WIRE_COUNT_];
    for (int w = 0; w < AH_WIRE_COUNT_; w++) {
        params p = {.wire = (ah_wire)w, .max_attempts = 1, .plan = "[]"};
        if (one_run(loop, &p, NULL, &ref[w], NULL, NULL) != 0) {
            fprintf(stderr, "soak: %s reference: %s\n", ah_wire_name((ah_wire)w), g_why);
            goto cleanup;
        }
        /* ... and one per kind of non-object arguments: what the model says after the
         * tool error. */
        for (int b = 0; b < N_BAD_ARGS; b++) {
            reference tmp;
            int f = 0;
            while (g_bad_args[f] != b + 1)
                f++;
            snprintf(p.plan, sizeof p.plan, "[%s]", FAULTS[f].json);
            if (one_run(loop, &p, NULL, &tmp, NULL, NULL) != 0) {
                fprintf(stderr, "soak: %s reference with %s: %s\n",
                        ah_wire_name((ah_wire)w), FAULTS[f].name, g_why);
                goto cleanup;
            }
            snprintf(ref[w].bad_final[b], sizeof ref[w].bad_final[b], "%s", tmp.final);
        }
    }
    size_t same_key_twice = 0, redis_drops = 0;
    size_t outcomes[AH_OUTCOME_COUNT_] = {0}, fired[N_FAULTS] = {0}, conts = 0,
           retries = 0;
    mem at_checkpoint = {0, 0, 0}, at_end;
    uint64_t first = only == UINT64_MAX ? 0 : only;
    uint64_t last = only == UINT64_MAX ? runs : only + 1;
    for (uint64_t i = first; i < last; i++) {
        params p;
        draw_params(seed, (size_t)i, &p);
        p.redis_drop &= g_redis_up;
        if (p.redis_drop)
            p.same_key_twice = 0; /* its second delivery comes after the first */
        prediction o;
        if (g_verbose || only != UINT64_MAX)
            describe(&p);
        ah_run_outcome out = AH_OUTCOME_COUNT_;
        int r = one_run(loop, &p, &ref[p.wire], NULL, &out, &o);
        if (r != 0) {
            fprintf(stderr, "soak: run %" PRIu64 " FAILED: %s\n", i, g_why);
            describe(&p);
            fprintf(stderr, "  reproduce: soak --seed %" PRIu64 " --only %" PRIu64 "\n",
                    seed, i);
            goto cleanup;
        }
        outcomes[out]++;
        same_key_twice += p.same_key_twice && o.tool_reached && !o.bad_args;
        redis_drops += p.redis_drop && o.tool_reached && !o.bad_args;
        conts += (size_t)o.continuations;
        retries += (size_t)o.n_retries;
        for (int k = 0; k < o.requests && k < p.n; k++)
            fired[p.f[k]]++;
        if (i + 1 == CHECKPOINT)
            at_checkpoint = measure();
        if (g_verbose && (i + 1) % 100 == 0) {
            mem m = measure();
            fprintf(stderr,
                    "soak: after run %" PRIu64 ": heap %" PRId64 " B, RSS %" PRId64
                    " KiB, %d fds\n",
                    i + 1, m.heap, m.rss / 1024, m.fds);
        }
    }
    at_end = measure();
    if (atomic_load(&log_leak)) {
        fprintf(stderr, "soak: FAILED: a secret reached a log line\n");
        goto cleanup;
    }
    printf("soak: %" PRIu64
           " runs ok: %zu completed, %zu failed as predicted; %zu retries, "
           "%zu continuations; %ld log lines, none with the key\n",
           last - first, outcomes[AH_OUTCOME_COMPLETED], outcomes[AH_OUTCOME_FAILED],
           retries, conts, atomic_load(&log_lines));
    for (int f = 0; f < N_FAULTS; f++)
        printf("  %-36s %5zu requests\n", FAULTS[f].name, fired[f]);
    printf("  %-36s %5zu runs (body once, second a duplicate)\n", "same key delivered twice",
           same_key_twice);
    printf("  %-36s %5zu runs (receipt kept, body once, second a duplicate)\n",
           "Redis idle drop during the body", redis_drops);
    rc = 0;
    printf("soak: after run %d: heap %" PRId64 " B, RSS %" PRId64 " KiB, %d fds\n",
           CHECKPOINT, at_checkpoint.heap, at_checkpoint.rss / 1024, at_checkpoint.fds);
    printf("soak: after run %" PRIu64 ": heap %" PRId64 " B, RSS %" PRId64
           " KiB, %d fds\n",
           last, at_end.heap, at_end.rss / 1024, at_end.fds);
    if (last - first < CHECKPOINT * 5) {
        printf("soak: memory not checked (fewer than %d runs)\n", CHECKPOINT * 5);
    } else if (!g_heap_exact) {
        printf("soak: memory not checked (glibc's thread cache is on: see the top of "
               "soak.c)\n");
    } else {
        int64_t dheap = at_end.heap - at_checkpoint.heap;
        int64_t drss = at_end.rss - at_checkpoint.rss;
        int dfds = at_end.fds - at_checkpoint.fds;
        printf("soak: growth %+" PRId64 " B heap (bound %" PRId64 "), %+" PRId64
               " KiB RSS (bound %" PRId64 "%s), %+d fds (bound %d)\n",
               dheap, HEAP_GROWTH_MAX, drss / 1024, RSS_GROWTH_MAX / 1024,
               RSS_CHECKED ? "" : ", not checked under ASan", dfds, FD_GROWTH_MAX);
        if (dheap > HEAP_GROWTH_MAX || (RSS_CHECKED && drss > RSS_GROWTH_MAX) ||
            dfds > FD_GROWTH_MAX) {
            fprintf(stderr,
                    "soak: FAILED: memory or descriptors grew between run %d and run "
                    "%" PRIu64 "\n",
                    CHECKPOINT, last);
            rc = 1;
        }
    }
cleanup:
    ah_loop_free(loop);
    ah_seeded_rng_free(rng);
    if (g_redis_up)
        redis_fixture_stop(&g_redis);
    ah_log_set_handler(NULL, NULL, AH_LOG_ERROR);
    fflush(stdout);
    return rc;
}
