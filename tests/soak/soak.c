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
 * In-stream overload storms: one run in five (its own draw) gets 2-4 steps in a row, at a
 * drawn place in its plan, whose 200 stream carries the provider's overload error at
 * event 0 (Anthropic overloaded_error, OpenAI server_is_overloaded; now and then with
 * "try again in 15ms", a floor on the wait, or "in 2 hours", which ends the run with
 * retry_after_too_long). Each is a retry of the one retry machine: an attempt of the
 * chain (llm_retry's failed_attempt), the full-jitter backoff of that attempt with the
 * hint as a floor (wait_ms, wait_source), a retry-budget token. Half the storm runs and
 * one in eight others get a retry budget of their own (2-8 tokens, refunds of 0.1-1 per
 * completed response); the oracle spends and refunds it as ah_retry_budget does and
 * predicts the give-up reason retry_budget and the requests that stop there.
 *
 * Cancel during tools: one run in six (its own draw) makes its tool round 1-3 calls
 * (tool_calls on the step that answers), run one at a time or together, whose bodies are
 * in flight on the loop (a timer finishes each) when the exec of call c or that body's
 * timer cancels the run. Predicted: outcome cancelled. Checked: every call of the round
 * answered in history in call order (the result the worker took, or the cancelled texts
 * of worker.h, as tool errors); the bodies still in flight finish, record their receipts
 * (no claim left) and are refused (AH_ERR_STATE) when they answer; and the next turn from
 * that history (a new worker, the mock's plan cleared) completes: the mock refuses an
 * unanswered tool call with the provider's 400.
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
    MAX_STORM = 4,                     /* in-stream overloads in a row */
    MAX_STEPS = MAX_FAULTS + MAX_STORM + 1, /* + the tool round of a cancel run */
    MAX_CALLS = 3,                     /* tool calls in a cancel run's round */
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

/* K_STORM: an in-stream error at event 0, its error_type the wire's overload type */
typedef enum kmode { K_NONE, K_WIDE, K_HEAD, K_STORM } kmode;

typedef struct fault {
    const char *name;
    const char *json; /* the plan step; %d is K when kmode != K_NONE */
    fclass cls;
    kmode k;
    ah_error_kind kind; /* for pre-stream faults: the error kind and status expected */
    int status;
    int server_wait; /* a retry after it must say wait_source "server" */
    int weight;      /* 0: never drawn from the catalogue (the storm's steps) */
    int64_t hint_ms; /* the server's retry hint it carries (0: none; HINT_0: 0 ms) */
} fault;
#define HINT_0 (-1)

/* Valid JSON that is not an object, as a mock step's tool_args (a JSON string). */
static const char *const BAD_ARGS[] = {"[1,2,3]", "42", "\"s\"", "null"};
enum { N_BAD_ARGS = 4 };

static const fault FAULTS[] = {
    {"ok", "{\"ok\":true}", F_BENIGN, K_NONE, AH_EK_NONE, 0, 0, 3, 0},
    {"delay 20ms", "{\"delay_headers_ms\":20}", F_BENIGN, K_NONE, AH_EK_NONE, 0, 0, 3, 0},
    {"503", "{\"status\":503}", F_RETRY, K_NONE, AH_EK_HTTP, 503, 0, 4, 0},
    {"500", "{\"status\":500}", F_RETRY, K_NONE, AH_EK_HTTP, 500, 0, 2, 0},
    {"502", "{\"status\":502}", F_RETRY, K_NONE, AH_EK_HTTP, 502, 0, 2, 0},
    {"504", "{\"status\":504}", F_RETRY, K_NONE, AH_EK_HTTP, 504, 0, 2, 0},
    {"408", "{\"status\":408}", F_RETRY, K_NONE, AH_EK_HTTP, 408, 0, 1, 0},
    {"529 Retry-After 0", "{\"status\":529,\"headers\":{\"Retry-After\":\"0\"}}", F_RETRY,
     K_NONE, AH_EK_HTTP, 529, 0, 3, HINT_0},
    {"429 retry-after-ms 20", "{\"status\":429,\"headers\":{\"retry-after-ms\":\"20\"}}",
     F_RETRY, K_NONE, AH_EK_HTTP, 429, 1, 3, 20},
    {"503 with the key in its message",
     "{\"status\":503,\"message\":\"upstream rejected key " KEY "\"}", F_RETRY, K_NONE,
     AH_EK_HTTP, 503, 0, 2, 0},
    {"reset", "{\"reset\":true}", F_RETRY, K_NONE, AH_EK_CONNECT, 0, 0, 3, 0},
    {"headers held past attempt_timeout", "{\"delay_headers_ms\":%d}", F_RETRY, K_NONE,
     AH_EK_TIMEOUT, 0, 0, 1, 0},
    {"400", "{\"status\":400}", F_FATAL, K_NONE, AH_EK_HTTP, 400, 0, 1, 0},
    {"401 with the key in its message",
     "{\"status\":401,\"message\":\"invalid x-api-key " KEY "\"}", F_FATAL, K_NONE,
     AH_EK_HTTP, 401, 0, 1, 0},
    {"503 x-should-retry false",
     "{\"status\":503,\"headers\":{\"x-should-retry\":\"false\"}}", F_FATAL, K_NONE,
     AH_EK_HTTP, 503, 0, 1, 0},
    {"429 Retry-After 3600", "{\"status\":429,\"headers\":{\"Retry-After\":\"3600\"}}",
     F_HINT, K_NONE, AH_EK_HTTP, 429, 0, 1, 0},
    {"529 Retry-After date +2h",
     "{\"status\":529,\"headers\":{\"Retry-After\":{\"date_in_seconds\":7200}}}", F_HINT,
     K_NONE, AH_EK_HTTP, 529, 0, 1, 0},
    {"cut", "{\"cut_after_events\":%d}", F_STREAM, K_WIDE, AH_EK_STREAM, 0, 0, 9, 0},
    {"stall", "{\"stall_after_events\":%d}", F_STREAM, K_WIDE, AH_EK_STREAM, 0, 0, 2, 0},
    {"malformed event", "{\"malformed_event_after\":%d}", F_STREAM, K_HEAD, AH_EK_STREAM,
     0, 0, 3, 0},
    {"in-stream error",
     "{\"error_event_after\":%d,\"message\":\"overloaded for " KEY "\"}", F_STREAM,
     K_HEAD, AH_EK_STREAM, 0, 0, 3, 0},
    {"non-object arguments [1,2,3]", "{\"ok\":true,\"tool_args\":\"[1,2,3]\"}", F_BENIGN,
     K_NONE, AH_EK_NONE, 0, 0, 1, 0},
    {"non-object arguments 42", "{\"ok\":true,\"tool_args\":\"42\"}", F_BENIGN, K_NONE,
     AH_EK_NONE, 0, 0, 1, 0},
    {"non-object arguments \"s\"", "{\"ok\":true,\"tool_args\":\"\\\"s\\\"\"}",
     F_BENIGN, K_NONE, AH_EK_NONE, 0, 0, 1, 0},
    {"non-object arguments null", "{\"ok\":true,\"tool_args\":\"null\"}", F_BENIGN,
     K_NONE, AH_EK_NONE, 0, 0, 1, 0},
    /* i12-wire: the end of a complete response, error bodies, invalid UTF-8 */
    {"unclean close after the end (no final chunk)",
     "{\"ok\":true,\"unclean_close_after_end\":\"no_final_chunk\"}", F_BENIGN, K_NONE,
     AH_EK_NONE, 0, 0, 1, 0},
    {"unclean close after the end (reset)",
     "{\"ok\":true,\"unclean_close_after_end\":\"reset\"}", F_BENIGN, K_NONE, AH_EK_NONE,
     0, 0, 1, 0},
    {"unclean close after the end (short Content-Length)",
     "{\"ok\":true,\"unclean_close_after_end\":\"short_content_length\"}", F_BENIGN,
     K_NONE, AH_EK_NONE, 0, 0, 1, 0},
    {"a tool call after the end", "{\"ok\":true,\"extra_after_end\":true}", F_BENIGN,
     K_NONE, AH_EK_NONE, 0, 0, 1, 0},
    {"invalid UTF-8 in the answer", "{\"ok\":true,\"invalid_utf8\":true}", F_BENIGN,
     K_NONE, AH_EK_NONE, 0, 0, 1, 0},
    {"503 with an endless body", "{\"status\":503,\"body_fault\":\"endless\"}", F_RETRY,
     K_NONE, AH_EK_HTTP, 503, 0, 1, 0},
    {"503 whose body stalls", "{\"status\":503,\"body_fault\":\"stall\"}", F_RETRY,
     K_NONE, AH_EK_TIMEOUT, 0, 0, 1, 0},
    /* The in-stream overload storm (weight 0: inserted by a draw of its own, 2-4 in a
     * row): a 200 whose stream carries the provider's overload error at event 0, each a
     * retry of the one retry machine. %s is the wire's type: Anthropic overloaded_error,
     * OpenAI server_is_overloaded. The body hint "try again in 15ms" is a floor on the
     * wait (source server); one of two hours ends the run (retry_after_too_long). */
    {"in-stream overload (storm)", "{\"error_event_after\":0,\"error_type\":\"%s\"}",
     F_STREAM, K_STORM, AH_EK_STREAM, 0, 0, 0, 0},
    {"in-stream overload, try again in 15ms (storm)",
     "{\"error_event_after\":0,\"error_type\":\"%s\",\"message\":\"Overloaded. Please "
     "try again in 15ms.\"}",
     F_STREAM, K_STORM, AH_EK_STREAM, 0, 1, 0, 15},
    {"in-stream overload, try again in 2 hours (storm)",
     "{\"error_event_after\":0,\"error_type\":\"%s\",\"message\":\"Overloaded; try "
     "again in 2 hours\"}",
     F_STREAM, K_STORM, AH_EK_STREAM, 0, 0, 0, 7200000},
};
enum { N_FAULTS = sizeof FAULTS / sizeof FAULTS[0] };
enum { STORM_PLAIN = N_FAULTS - 3, STORM_HINT, STORM_LONG_HINT }; /* the last three */

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

/* How a cancel run stops its tool round. */
typedef enum cancel_mode {
    CANCEL_NONE,
    CANCEL_FROM_EXEC, /* the tool exec of call cancel_at cancels as it starts the body */
    CANCEL_FROM_BODY, /* the body of call cancel_at cancels from its loop timer */
} cancel_mode;

typedef struct params {
    uint64_t seed;
    ah_wire wire;
    int max_attempts, max_continuations;
    size_t delta_bytes;
    int n;
    int f[MAX_STEPS]; /* indexes into FAULTS */
    int k[MAX_STEPS];
    int same_key_twice; /* deliver the tool call twice at once, one key */
    int redis_drop;     /* a Redis ledger that loses its connection during the body */
    int storm;          /* in-stream overloads in a row in the plan (0: none) */
    int budget_tokens;  /* the run's retry budget: max_tokens (0: no budget) */
    double budget_ratio; /* ... and what each completed response refunds */
    cancel_mode cancel; /* cancel during tools */
    int cancel_at;      /* the call (0-based) whose exec or body cancels */
    int n_calls;        /* the calls of the tool round (the step's tool_calls) */
    int one_at_a_time;  /* max_tool_concurrency 1 (else the default, 8) */
    int calls_step;     /* the plan step that carries tool_calls (-1: none) */
    char plan[2048];
} params;

typedef struct retry_expect {
    int status;
    ah_error_kind kind;
    int server_wait;
    int attempt;     /* its failed_attempt */
    int64_t hint_ms; /* the server's hint (as in fault): the wait is at least this */
} retry_expect;

typedef struct prediction {
    ah_run_outcome outcome;
    ah_error_kind kind; /* NONE when completed */
    int status;
    int gave_up; /* the run ended in an llm_gave_up */
    ah_giveup_reason reason;
    int gave_up_attempts; /* ... after this many attempts of its chain */
    int requests, continuations;
    int failed_step;  /* 1 or 2 when failed (1 when cancelled in the tool round) */
    int tool_reached; /* step 1 completed: the tool was called */
    int bad_args;     /* ... with arguments that are not an object (1..N_BAD_ARGS) */
    int text_unchecked; /* a fault changed the answer's bytes */
    int storm_retries;  /* retries the storm's steps caused */
    int n_retries;
    retry_expect retries[MAX_STEPS];
} prediction;

/* The Redis server of the idle-drop runs (started by main when redis-server exists). */
static redis_fixture g_redis;
static int g_redis_up;

/* Plan step i as JSON: the fault's text with its K (or the wire's overload type), and
 * the cancel run's tool_calls on the step that answers with the tool round. */
static void step_json(const params *p, int i, char *buf, size_t size)
{
    const fault *ft = &FAULTS[p->f[i]];
    if (ft->k == K_STORM)
        snprintf(buf, size, ft->json,
                 p->wire == AH_WIRE_ANTHROPIC ? "overloaded_error" : "server_is_overloaded");
    else
        snprintf(buf, size, ft->json, p->k[i]);
    size_t len = strlen(buf);
    if (i == p->calls_step && len > 0 && buf[len - 1] == '}')
        snprintf(buf + len - 1, size - (len - 1), ",\"tool_calls\":%d}", p->n_calls);
}

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
    p->redis_drop = draw(&s2, 8) == 0 && g_redis_up;
    if (p->redis_drop)
        p->same_key_twice = 0; /* its second delivery comes after the first */
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
    }
    /* The storm, the retry budget and the cancel come from streams of their own too, so
     * a run without them has the plan and parameters earlier versions drew. */
    uint64_t s3 = p->seed ^ 0x2545f4914f6cdd1dULL;
    if (draw(&s3, 5) == 0) {
        int at = draw(&s3, p->n + 1);
        p->storm = 2 + draw(&s3, MAX_STORM - 1);
        memmove(&p->f[at + p->storm], &p->f[at], (size_t)(p->n - at) * sizeof p->f[0]);
        memmove(&p->k[at + p->storm], &p->k[at], (size_t)(p->n - at) * sizeof p->k[0]);
        for (int j = 0; j < p->storm; j++) {
            int v = draw(&s3, 8);
            p->f[at + j] = v == 0 ? STORM_HINT : v == 1 ? STORM_LONG_HINT : STORM_PLAIN;
            p->k[at + j] = 0;
        }
        p->n += p->storm;
    }
    /* Half the storm runs and one in eight others share nothing but have a retry budget:
     * each retry takes a token, each completed response refunds budget_ratio. */
    if (draw(&s3, p->storm ? 2 : 8) == 0) {
        static const int tokens[] = {2, 3, 4, 5, 8};
        static const double ratios[] = {0.1, 0.5, 1};
        p->budget_tokens = tokens[draw(&s3, 5)];
        p->budget_ratio = ratios[draw(&s3, 3)];
    }
    uint64_t s4 = p->seed ^ 0x9fb21c651e98df25ULL;
    p->calls_step = -1;
    if (draw(&s4, 6) == 0 && !p->redis_drop) {
        p->cancel = draw(&s4, 2) ? CANCEL_FROM_BODY : CANCEL_FROM_EXEC;
        p->n_calls = 1 + draw(&s4, MAX_CALLS);
        p->cancel_at = draw(&s4, p->n_calls);
        p->one_at_a_time = draw(&s4, 2);
        /* The tool round is the answer of the plan's first step that answers (an
         * exhausted plan answers ok: that step is then written out). */
        int i = 0;
        while (i < p->n && FAULTS[p->f[i]].cls != F_BENIGN)
            i++;
        if (i == p->n) {
            p->f[i] = 0;
            p->k[i] = 0;
            p->n++;
        }
        if (g_bad_args[p->f[i]]) { /* the worker answers those itself: no body runs */
            p->cancel = CANCEL_NONE;
        } else {
            p->calls_step = i;
            p->same_key_twice = 0;
        }
    }
    size_t off = 0;
    off += (size_t)snprintf(p->plan + off, sizeof p->plan - off, "[");
    for (int i = 0; i < p->n && off < sizeof p->plan; i++) {
        char step[512];
        step_json(p, i, step, sizeof step);
        off += (size_t)snprintf(p->plan + off, sizeof p->plan - off, "%s%s", i ? "," : "",
                                step);
    }
    if (off < sizeof p->plan)
        snprintf(p->plan + off, sizeof p->plan - off, "]");
}

/* The run's retry budget, as ah_retry_budget keeps it: thousandths of a token. A retry
 * takes one token and goes ahead while more than half the tokens are left. */
static int budget_spend(const params *p, int64_t *milli)
{
    *milli = *milli > 1000 ? *milli - 1000 : 0;
    return 2 * *milli > (int64_t)p->budget_tokens * 1000;
}

static void budget_refund(const params *p, int64_t *milli)
{
    int64_t max = (int64_t)p->budget_tokens * 1000;
    *milli += (int64_t)(p->budget_ratio * 1000 + 0.5);
    if (*milli > max)
        *milli = max;
}

/* like[i]: the stream fault of request i (0-based; one plan step per request) kept
 * nothing new, as the run showed (NULL: none did). */
static void simulate(const params *p, const int *like, prediction *o)
{
    memset(o, 0, sizeof *o);
    o->reason = AH_GIVEUP_COUNT_;
    int step = 1, attempt = 0, conts = 0, i = 0;
    int64_t tokens = (int64_t)p->budget_tokens * 1000;
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
            if (p->budget_tokens) /* a completed response */
                budget_refund(p, &tokens);
            if (step == 2) {
                o->outcome = AH_OUTCOME_COMPLETED;
                return;
            }
            o->tool_reached = 1;
            o->bad_args = g_bad_args[f]; /* step 2 has a tool result: no tool call */
            if (p->cancel != CANCEL_NONE && !o->bad_args) {
                o->outcome = AH_OUTCOME_CANCELLED;
                o->kind = AH_EK_CANCELLED;
                o->failed_step = 1;
                return;
            }
            step = 2;
            attempt = conts = 0;
            continue;
        case F_RETRY:
        case F_HINT:
            if (attempt < p->max_attempts && ft->cls == F_RETRY) {
                if (p->budget_tokens && !budget_spend(p, &tokens)) {
                    o->reason = AH_GIVEUP_RETRY_BUDGET;
                    goto failed;
                }
                o->retries[o->n_retries++] = (retry_expect){
                    ft->status, ft->kind, ft->server_wait, attempt, ft->hint_ms};
                continue;
            }
            o->reason = attempt >= p->max_attempts ? AH_GIVEUP_ATTEMPTS
                                                   : AH_GIVEUP_RETRY_AFTER_TOO_LONG;
            goto failed;
        case F_FATAL:
            o->reason = AH_GIVEUP_NOT_RETRYABLE;
            goto failed;
        case F_STREAM: {
            /* the provider's own error, or nothing new kept: a retry too, decided by the
             * retry machine: the attempt bound, the continuation cap, the hint, the
             * budget */
            int retry = strstr(ft->json, "error_event_after") != NULL ||
                        (like && like[o->requests - 1]);
            if (retry && attempt >= p->max_attempts) {
                o->reason = AH_GIVEUP_ATTEMPTS;
                o->gave_up = 1;
                goto failed;
            }
            if (conts >= p->max_continuations)
                goto failed;
            if (retry && ft->hint_ms > MAX_RETRY_AFTER_MS) {
                o->reason = AH_GIVEUP_RETRY_AFTER_TOO_LONG;
                o->gave_up = 1;
                goto failed;
            }
            if (retry && p->budget_tokens && !budget_spend(p, &tokens)) {
                o->reason = AH_GIVEUP_RETRY_BUDGET;
                o->gave_up = 1;
                goto failed;
            }
            conts++;
            o->continuations++;
            if (retry) {
                o->retries[o->n_retries++] = (retry_expect){
                    0, AH_EK_STREAM, ft->server_wait, attempt, ft->hint_ms};
                o->storm_retries += ft->k == K_STORM;
            } else {
                attempt = 0;
            }
            continue;
        }
        }
    failed:
        o->outcome = AH_OUTCOME_FAILED;
        o->kind = ft->kind;
        o->status = ft->status;
        o->gave_up |= ft->cls != F_STREAM;
        o->gave_up_attempts = attempt;
        o->failed_step = step;
        return;
    }
}

/* ---- the harness ---------------------------------------------------------------------
 */

typedef struct redis_exec redis_exec;

typedef struct run_state run_state;

static int fail(const char *fmt, ...); /* sets g_why; returns 1 */

/* A cancel run's tool call: its body is in flight on the loop (a timer finishes it), as
 * an embedder's asynchronous tool is, when the run is cancelled. */
typedef struct cancel_body {
    run_state *r;
    ah_worker *w;
    size_t index;
    ah_tool_call *c;
    ah_timer *t;
    int ticks;       /* timer firings */
    int cancels;     /* its first tick cancels the run (CANCEL_FROM_BODY) */
    int finished;    /* the body reported and its receipt was recorded */
    int done_status; /* what ah_worker_tool_done answered (-1: not called) */
    int done_late;   /* ... called once the run had ended */
    char content[64];
} cancel_body;

struct run_state {
    const params *p;
    ah_loop *loop;
    cancel_body calls[MAX_CALLS]; /* a cancel run's tool round */
    redis_exec *rx; /* a Redis run's tool call in flight (or done) */
    ah_worker *worker;
    char **events;
    size_t n_events, cap_events;
    int exec_calls, body_runs;
    int twice_ran, twice_dup; /* the second delivery: completed, and as a duplicate */
    char key[160];
    ah_ledger *ledger;
    int oom;
    const char *broken; /* the harness itself went wrong: what */
};

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

/* ---- a cancel run's tool round: bodies in flight on the loop ---------------------------
 * Each call claims its key and starts its body, which a loop timer finishes (the body
 * reports, the receipt is recorded, the worker is answered). The run is cancelled by the
 * exec of call cancel_at as it starts that body, or by that body's first timer tick (the
 * body then goes on and finishes at a later step). Bodies still in flight when the run
 * ends finish afterwards: their answers must be refused (AH_ERR_STATE), and history must
 * answer their calls as cancelled. */
static void cancel_body_tick(void *ud)
{
    cancel_body *b = ud;
    b->ticks++;
    if (b->cancels && b->ticks == 1) {
        ah_worker_cancel(b->w);
        ah_timer_start(b->t, 0); /* the body is still running */
        return;
    }
    add_body(b->r, b->c);
    if (ah_tool_step(b->c) != AH_TOOL_DO_SUCCEED) {
        b->r->broken = "a cancel run's tool call did not record its receipt";
        return;
    }
    b->finished = 1;
    snprintf(b->content, sizeof b->content, "%s", ah_tool_call_receipt(b->c));
    ah_tool_response res = {.outcome = AH_TOOL_OK, .content = b->content, .attempts = 1};
    b->done_late = ah_worker_finished(b->w);
    b->done_status = (int)ah_worker_tool_done(b->w, b->index, &res);
}

static int cancel_exec(run_state *r, ah_worker *w, const ah_tool_request *req,
                       ah_tool_response *res)
{
    r->exec_calls++;
    snprintf(r->key, sizeof r->key, "%s", req->key);
    cancel_body *b = req->index < MAX_CALLS ? &r->calls[req->index] : NULL;
    if (!b || b->c) {
        r->broken = "a tool call index beyond the round, or asked for twice";
        res->outcome = AH_TOOL_ERROR;
        res->content = "error: the harness could not start the call";
        return 0;
    }
    b->r = r;
    b->w = w;
    b->index = req->index;
    b->done_status = -1;
    ah_tool_call_new(NULL, r->ledger, NULL, req->key, req->arguments, &b->c, NULL, 0);
    b->t = b->c ? ah_timer_new(r->loop, cancel_body_tick, b) : NULL;
    if (!b->t || ah_tool_step(b->c) != AH_TOOL_DO_RUN_BODY) {
        r->broken = "a cancel run's tool call could not claim its key";
        res->outcome = AH_TOOL_ERROR;
        res->content = "error: the harness could not start the call";
        return 0;
    }
    int here = (int)req->index == r->p->cancel_at;
    b->cancels = here && r->p->cancel == CANCEL_FROM_BODY;
    ah_timer_start(b->t, 0);
    if (here && r->p->cancel == CANCEL_FROM_EXEC)
        ah_worker_cancel(w);
    return 1; /* answered from the timer, or refused there once the run has ended */
}

/* After a cancel run: let every body still in flight finish (each is a timer due now). */
static int finish_bodies(run_state *r)
{
    for (int guard = 0; guard < 10000; guard++) {
        int pending = 0;
        for (int i = 0; i < MAX_CALLS; i++)
            pending |= r->calls[i].c && !r->calls[i].finished;
        if (!pending || r->broken)
            return 0;
        ah_loop_run_once(r->loop, 100);
    }
    return fail("the bodies in flight of a cancelled run never finished");
}

static void free_bodies(run_state *r)
{
    for (int i = 0; i < MAX_CALLS; i++) {
        ah_timer_free(r->calls[i].t);
        ah_tool_call_free(r->calls[i].c);
    }
}

/* The follow-up turn of a cancelled run: the model has every result, so no tool call. */
static int followup_exec(void *ud, ah_worker *w, const ah_tool_request *req,
                         ah_tool_response *res)
{
    (void)w;
    (void)req;
    ((run_state *)ud)->broken = "the follow-up turn of a cancelled run called the tool";
    res->outcome = AH_TOOL_ERROR;
    res->content = "error: not expected";
    return 0;
}

static int add_exec(void *ud, ah_worker *w, const ah_tool_request *req,
                    ah_tool_response *res)
{
    run_state *r = ud;
    if (r->p->cancel != CANCEL_NONE)
        return cancel_exec(r, w, req, res);
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

/* The backoff waits of broken streams sent again (no hint), across the soak: each may be
 * 0 (full jitter draws from 0), but not all of them (main checks). */
static struct {
    size_t n;
    int64_t sum_ms;
} g_break_waits;

/* A retry's wait is the retry machine's: the full-jitter backoff of its failed attempt
 * n, U(0, min(cap_ms, base_ms * 2^(n-1))), with the server's hint as a floor (exactly the
 * hint, source server, when the hint is the longer). */
static int check_wait(const cJSON *e, const retry_expect *x, int nth, const char *line)
{
    int64_t hint = x->hint_ms == HINT_0 ? 0 : x->hint_ms, backoff = 1; /* base_ms */
    for (int i = 1; i < x->attempt && backoff < 5; i++)
        backoff *= 2;
    if (backoff > 5) /* cap_ms */
        backoff = 5;
    const cJSON *v = cJSON_GetObjectItem(e, "wait_ms");
    int64_t wait = cJSON_IsNumber(v) ? (int64_t)v->valuedouble : -1;
    int server = strcmp(jstr(e, "wait_source"), "server") == 0;
    if (wait < hint || wait > (hint > backoff ? hint : backoff))
        return fail("retry %d: waits %" PRId64 " ms, not the backoff of attempt %d (0..%" PRId64
                    " ms) with the hint %" PRId64 " ms as a floor: %s",
                    nth, wait, x->attempt, backoff, hint, line);
    if (hint > backoff && !server)
        return fail("retry %d: the hint set the wait, the source should be server: %s", nth,
                    line);
    if (!x->hint_ms && server)
        return fail("retry %d: no hint, yet the source is server: %s", nth, line);
    if (x->kind == AH_EK_STREAM && !x->hint_ms) {
        g_break_waits.n++;
        g_break_waits.sum_ms += wait;
    }
    return 0;
}

/* The events against the prediction: retries (in order, with their status, kind, wait
 * and attempt), continuations, the give-up (reason, attempts), the end. */
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
                else if (jint(e, "failed_attempt") != x->attempt ||
                         jint(e, "max_attempts") != r->p->max_attempts)
                    rc = fail("retry %d: expected failed_attempt %d of %d: %s", retries + 1,
                              x->attempt, r->p->max_attempts, r->events[i]);
                else
                    rc = check_wait(e, x, retries + 1, r->events[i]);
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
            else if (jint(e, "attempts") != o->gave_up_attempts)
                rc = fail("gave up after %d attempts, expected %d", jint(e, "attempts"),
                          o->gave_up_attempts);
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
    int calls = o->tool_reached * (r->p->cancel != CANCEL_NONE ? r->p->n_calls : 1);
    if (uses != calls || results != calls)
        return fail("history has %d tool_use and %d tool_result blocks, expected %d",
                    uses, results, calls);
    return 0;
}

/* A run cancelled in its tool round: history ends with the round, every call answered
 * in call order (the model's ids), each as what happened to it: a call whose answer the
 * worker took keeps its result; one whose body was still running when the run ended
 * says it was cancelled before it finished, one never started that it did not run (both
 * tool errors). The bodies in flight went on and were refused when they answered; each
 * recorded its receipt, and no claim is left. */
/* What the cancelled rounds held, for the summary. */
static struct {
    size_t runs, from_exec, answered, running, waiting, refused_late, followups;
} g_cancel;

static int check_cancel_round(const run_state *r)
{
    const params *p = r->p;
    const ah_conversation *c = ah_worker_history(r->worker);
    size_t n = ah_conversation_count(c);
    if (n < 3 || ah_conversation_role(c, n - 2) != AH_ROLE_ASSISTANT ||
        ah_conversation_role(c, n - 1) != AH_ROLE_USER)
        return fail("a run cancelled in its tool round: history has %zu messages, not "
                    "ending with the calls and their results", n);
    const char *ids[MAX_CALLS];
    int k = 0;
    for (size_t i = 0; i < ah_conversation_block_count(c, n - 2); i++) {
        const ah_msg_block *b = ah_conversation_block(c, n - 2, i);
        if (b->kind == AH_MSG_TOOL_USE && k < MAX_CALLS)
            ids[k++] = b->id ? b->id : "";
    }
    if (k != p->n_calls || ah_conversation_block_count(c, n - 1) != (size_t)k)
        return fail("the cancelled round has %d calls and %zu results, expected %d each", k,
                    ah_conversation_block_count(c, n - 1), p->n_calls);
    int started = 0;
    for (int i = 0; i < k; i++) {
        const cancel_body *cb = &r->calls[i];
        const ah_msg_block *b = ah_conversation_block(c, n - 1, (size_t)i);
        int answered = cb->c && cb->done_status == AH_OK;
        const char *want = !cb->c     ? AH_TOOL_CANCELLED_WAITING
                           : answered ? cb->content
                                      : AH_TOOL_CANCELLED_RUNNING;
        started += cb->c != NULL;
        if (b->kind != AH_MSG_TOOL_RESULT || !b->tool_use_id ||
            strcmp(b->tool_use_id, ids[i]) != 0)
            return fail("result %d of the cancelled round answers '%s', not call '%s'", i + 1,
                        b->tool_use_id ? b->tool_use_id : "(none)", ids[i]);
        if (!b->text || strcmp(b->text, want) != 0 ||
            b->is_error != !answered)
            return fail("result %d of the cancelled round is '%s'%s, expected '%s'", i + 1,
                        b->text ? b->text : "(null)", b->is_error ? " (an error)" : "", want);
        if (cb->c && (!cb->finished || (cb->done_status != AH_OK &&
                                        cb->done_status != AH_ERR_STATE) ||
                      (cb->done_late && cb->done_status != AH_ERR_STATE)))
            return fail("call %d's answer %s the run ended was answered %d", i + 1,
                        cb->done_late ? "after" : "before", cb->done_status);
    }
    /* No call starts once the cancel is asked for: one at a time, or cancelled by an
     * exec, the calls up to the cancelling one; else all of them (started together,
     * before any body's timer). */
    int want_started = p->one_at_a_time || p->cancel == CANCEL_FROM_EXEC ? p->cancel_at + 1
                                                                         : p->n_calls;
    if (started != want_started)
        return fail("%d calls started, expected %d: the cancel came in call %d%s", started,
                    want_started, p->cancel_at + 1, p->one_at_a_time ? " (one at a time)" : "");
    if (r->exec_calls != started || r->body_runs != started ||
        ah_ledger_count(r->ledger) != started)
        return fail("cancelled round: %d started, %d asked, %d bodies, %" PRId64
                    " receipts", started, r->exec_calls, r->body_runs,
                    ah_ledger_count(r->ledger));
    if (ah_ledger_claims(r->ledger) != 0)
        return fail("ledger holds %" PRId64 " claims after the cancelled round",
                    ah_ledger_claims(r->ledger));
    g_cancel.runs++;
    g_cancel.from_exec += p->cancel == CANCEL_FROM_EXEC;
    for (int i = 0; i < k; i++) {
        const cancel_body *cb = &r->calls[i];
        g_cancel.waiting += !cb->c;
        g_cancel.answered += cb->c && cb->done_status == AH_OK;
        g_cancel.running += cb->c && cb->done_status != AH_OK;
        g_cancel.refused_late += cb->c && cb->done_late && cb->done_status == AH_ERR_STATE;
    }
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
    if (r->broken)
        return fail("%s", r->broken);
    if (out != o->outcome)
        return fail("outcome %s (%s: %s), expected %s", ah_run_outcome_name(out),
                    ah_error_kind_name(err->kind), err->message,
                    ah_run_outcome_name(o->outcome));
    if (out == AH_OUTCOME_FAILED &&
        (err->kind != o->kind || (o->status && err->status != o->status)))
        return fail("failed with %s %d (%s), expected %s %d",
                    ah_error_kind_name(err->kind), err->status, err->message,
                    ah_error_kind_name(o->kind), o->status);
    if (out == AH_OUTCOME_CANCELLED && err->kind != AH_EK_CANCELLED)
        return fail("cancelled with error kind %s (%s)", ah_error_kind_name(err->kind),
                    err->message);
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
    if (out == AH_OUTCOME_CANCELLED) {
        if (check_cancel_round(r))
            return 1;
        runs = 0; /* checked there */
    } else if (r->exec_calls != runs || r->body_runs != runs) {
        return fail("tool asked %d times and run %d times, expected %d", r->exec_calls,
                    r->body_runs, runs);
    } else if (ah_ledger_count(r->ledger) != runs)
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
    int tool_calls = o->tool_reached; /* a cancelled round: the answers the worker took */
    if (out == AH_OUTCOME_CANCELLED) {
        tool_calls = 0;
        for (int i = 0; i < MAX_CALLS; i++)
            tool_calls += r->calls[i].c && r->calls[i].done_status == AH_OK;
    }
    if (st.attempts != o->requests || st.continuations != o->continuations ||
        st.retries != o->n_retries || st.tool_calls != tool_calls)
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
        else if (req >= 0 && req < MAX_STEPS && strcmp(type, "llm_continuation") == 0)
            like[req] = jint(e, "committed_blocks") == 0;
        else if (req >= 0 && req < MAX_STEPS && strcmp(type, "llm_gave_up") == 0)
            like[req] = 1;
        cJSON_Delete(e);
    }
}

/* The next turn of a run cancelled in its tool round, from its history, against a plan
 * that no longer faults: every provider refuses a tool call left unanswered (the mock
 * with the provider's own 400), so it completes only when the round was answered. */
static int check_followup(run_state *r, ah_mock *mock, const ah_worker_config *wc)
{
    char err[256];
    if (ah_mock_set_plan(mock, "[]", err, sizeof err) != AH_OK)
        return fail("mock: %s", err);
    size_t before = ah_mock_request_count(mock);
    ah_worker_config fc = *wc;
    fc.history = ah_worker_history(r->worker);
    fc.tool_exec = followup_exec;
    fc.on_event = NULL;
    ah_worker *w = NULL;
    if (ah_worker_new(&fc, &w, err, sizeof err) != AH_OK)
        return fail("follow-up worker: %s", err);
    ah_run_outcome out = ah_worker_run(w, "go on");
    int rc = 0;
    ah_mock_request mr;
    if (out != AH_OUTCOME_COMPLETED)
        rc = fail("the next turn after a cancelled tool round ended %s: %s",
                  ah_run_outcome_name(out), ah_worker_error(w)->message);
    else if (ah_mock_request_count(mock) != before + 1 ||
             ah_mock_request_get(mock, before, &mr) != AH_OK || mr.status != 200)
        rc = fail("the next turn after a cancelled tool round: %zu requests",
                  ah_mock_request_count(mock) - before);
    else if (r->broken)
        rc = fail("%s", r->broken);
    g_cancel.followups += !rc;
    ah_worker_free(w);
    return rc;
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
    ah_retry_budget *budget = NULL;
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
    if (p->budget_tokens &&
        ah_retry_budget_new(p->budget_tokens, p->budget_ratio, &budget, err, sizeof err) !=
            AH_OK) {
        fail("retry budget: %s", err);
        goto cleanup;
    }
    ah_tool_def tool = {
        .name = "add", .description = "Add two integers", .schema_json = ADD_SCHEMA};
    ah_worker_config wc = {.loop = loop,
                           .client = client,
                           .system = "You are a soak test.",
                           .policy = &pol,
                           .retry_budget = budget,
                           .tools = &tool,
                           .n_tools = 1,
                           .tool_exec = add_exec,
                           .tool_ud = &r,
                           .max_tool_concurrency = p->one_at_a_time ? 1 : 0,
                           .on_event = on_event,
                           .event_ud = &r};
    if (ah_worker_new(&wc, &r.worker, err, sizeof err) != AH_OK) {
        fail("worker: %s", err);
        goto cleanup;
    }
    ah_run_outcome out = ah_worker_run(r.worker, "add please");
    if (out_outcome)
        *out_outcome = out;
    if (finish_bodies(&r)) { /* a cancel run's bodies still in flight */
        rc = 1;
        goto cleanup;
    }
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
        int like[MAX_STEPS] = {0};
        observed_regenerations(&r, like);
        simulate(p, like, pred);
        rc = check_run(&r, mock, pred, ref, out);
        if (!rc && out == AH_OUTCOME_CANCELLED)
            rc = check_followup(&r, mock, &wc);
    }
    if (g_verbose || (rc && !ref_out)) {
        for (size_t i = 0; i < r.n_events; i++)
            if (!strstr(r.events[i], "\"text_delta\""))
                fprintf(stderr, "  event: %s\n", r.events[i]);
    }
cleanup:
    free_bodies(&r);
    ah_worker_free(r.worker);
    ah_retry_budget_free(budget);
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
    if (p->budget_tokens)
        fprintf(stderr, "  a retry budget of %d tokens, %.1f refunded per completed response\n",
                p->budget_tokens, p->budget_ratio);
    if (p->cancel != CANCEL_NONE)
        fprintf(stderr, "  cancel during tools: %d calls%s, cancelled by the %s of call %d\n",
                p->n_calls, p->one_at_a_time ? " one at a time" : "",
                p->cancel == CANCEL_FROM_EXEC ? "exec" : "body", p->cancel_at + 1);
    for (int i = 0; i < p->n; i++) {
        if (FAULTS[p->f[i]].k == K_STORM)
            fprintf(stderr, "  plan step %d: %s\n", i + 1, FAULTS[p->f[i]].name);
        else if (FAULTS[p->f[i]].k != K_NONE)
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
    /* the storm runs; the budget runs, and their give-ups by reason */
    size_t storms = 0, storm_retries = 0, budgets = 0, storm_gave_up[AH_GIVEUP_COUNT_ + 1] = {0},
           budget_gave_up = 0;
    size_t outcomes[AH_OUTCOME_COUNT_] = {0}, fired[N_FAULTS] = {0}, conts = 0,
           retries = 0;
    mem at_checkpoint = {0, 0, 0}, at_end;
    uint64_t first = only == UINT64_MAX ? 0 : only;
    uint64_t last = only == UINT64_MAX ? runs : only + 1;
    for (uint64_t i = first; i < last; i++) {
        params p;
        draw_params(seed, (size_t)i, &p);
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
        storms += p.storm > 0;
        storm_retries += (size_t)o.storm_retries;
        if (p.storm && o.gave_up)
            storm_gave_up[o.reason]++;
        budgets += p.budget_tokens > 0;
        budget_gave_up += o.gave_up && o.reason == AH_GIVEUP_RETRY_BUDGET;
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
    if (g_break_waits.n >= 20 && g_break_waits.sum_ms == 0) {
        fprintf(stderr, "soak: FAILED: none of the %zu broken streams sent again waited a "
                        "backoff (every wait_ms 0)\n", g_break_waits.n);
        goto cleanup;
    }
    if (atomic_load(&log_leak)) {
        fprintf(stderr, "soak: FAILED: a secret reached a log line\n");
        goto cleanup;
    }
    printf("soak: %" PRIu64
           " runs ok: %zu completed, %zu failed, %zu cancelled as predicted; %zu retries, "
           "%zu continuations; %ld log lines, none with the key\n",
           last - first, outcomes[AH_OUTCOME_COMPLETED], outcomes[AH_OUTCOME_FAILED],
           outcomes[AH_OUTCOME_CANCELLED], retries, conts, atomic_load(&log_lines));
    for (int f = 0; f < N_FAULTS; f++)
        printf("  %-36s %5zu requests\n", FAULTS[f].name, fired[f]);
    printf("  %-36s %5zu runs (body once, second a duplicate)\n", "same key delivered twice",
           same_key_twice);
    printf("  %-36s %5zu runs (receipt kept, body once, second a duplicate)\n",
           "Redis idle drop during the body", redis_drops);
    printf("  %-36s %5zu runs (%zu retries of the storm's; gave up: %zu attempts, %zu "
           "retry_budget, %zu retry_after_too_long)\n",
           "in-stream overload storm", storms, storm_retries,
           storm_gave_up[AH_GIVEUP_ATTEMPTS], storm_gave_up[AH_GIVEUP_RETRY_BUDGET],
           storm_gave_up[AH_GIVEUP_RETRY_AFTER_TOO_LONG]);
    printf("  %-36s %5zu runs (%zu gave up for retry_budget)\n", "a retry budget", budgets,
           budget_gave_up);
    printf("  %-36s %5zu retries (backoff waits %" PRId64 " ms in all)\n",
           "broken streams sent again", g_break_waits.n, g_break_waits.sum_ms);
    printf("  %-36s %5zu runs (%zu cancelled by the exec, %zu by the body; calls answered "
           "%zu, cancelled running %zu, not started %zu; %zu late answers refused; next "
           "turn accepted %zu)\n",
           "cancel during tools", g_cancel.runs, g_cancel.from_exec,
           g_cancel.runs - g_cancel.from_exec, g_cancel.answered, g_cancel.running,
           g_cancel.waiting, g_cancel.refused_late, g_cancel.followups);
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
