/* worker.c - the agent turn loop: request from history, stream into a timeline, commit,
 * run tools, repeat; continuation of interrupted streams (docs/worker.md).
 *
 * Invariants:
 *  - Every request is encoded from the history and nothing else: a continuation changes
 *    the history (a partial assistant message, and on the prompt rung a visible user
 *    prompt) and then takes the same path as any other request.
 *  - The rung (prefill or prompt) comes from the client (ah_client_rung: its setting and
 *    the capability table); a prefill the provider refuses is re-sent on the prompt rung
 *    at once, neither a retry nor a continuation.
 *  - A continuation's first text block passes through an ah__overlap before it reaches
 *    text_delta or history: a restatement of the committed text is dropped; the block's
 *    timeline text keeps every byte, and commits skip the trimmed prefix.
 *  - The normal path commits a completed response whole; only an INTERRUPTED call takes
 *    the continuation branch, and it commits only the timeline's partial drain (closed
 *    text / reasoning; with policy.continue_partial_text also the complete sentences or
 *    lines of an unfinished text block, the part already shown). Tool calls run only
 *    from a completed response.
 *  - A break that is a failure of the request — the provider's error in the stream, or
 *    nothing of the response to keep — is decided by the call's retry machine like a
 *    failed attempt (break_is_retry); the granted retry rides on the next request
 *    (retry_of), which waits its backoff first. A continuation that kept nothing new
 *    sends the same request again and says so (mode regenerate).
 *  - Every request that streamed ends with one llm_call_end: stop_reason "interrupted"
 *    for a cut one (emitted when the break is known, before any retry or give-up).
 *  - The next request is always sent from a zero-delay timer ("kick"), never from inside
 *    a call's callback, so no call is created or freed re-entrantly.
 *  - Cancellation is routed through an ah_async to the loop thread and beats everything.
 */
#include "client_internal.h"
#include "error_internal.h"
#include "internal.h"
#include "overlap.h"

#include "agenthost/call.h"
#include "agenthost/redis.h"
#include "agenthost/timeline.h"
#include "agenthost/worker.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

/* ---- client ------------------------------------------------------------------------------ */

struct ah_client {
    ah_wire wire;
    char *url;
    char *api_key; /* opts.api_key */
    ah__client_opts opts; /* extra headers, query, the key (client_opts.c) */
    char *model;
    int64_t max_tokens;
    char *extra_json;
    ah_continuation continuation;
    int thinking;                /* extra_json enables Anthropic thinking */
    atomic_int prefill_refused;  /* auto: the provider refused a prefill; prompt from now */
    int background; /* responses: background mode, so a broken stream is re-attached */
    char *ca_file, *ca_path; /* TLS trust (the config's, else the environment's), or NULL */
    char *display_url;       /* url with its secrets masked, for messages and Lua */
    int cache;               /* prompt caching on (ah_cache_mode auto) */
    char *cache_ttl, *prompt_cache_key; /* or NULL */
};

/* TLS trust: the config's ca_file / ca_path (which must be readable), else what the
 * environment names as curl and OpenSSL read it: CURL_CA_BUNDLE (a file), else
 * SSL_CERT_FILE and SSL_CERT_DIR. 0, or -1 with err set (-2: out of memory). */
static int client_trust(ah_client *c, const ah_client_config *cfg, char *err, size_t errsize)
{
    const char *file = cfg->ca_file && *cfg->ca_file ? cfg->ca_file : NULL;
    const char *dir = cfg->ca_path && *cfg->ca_path ? cfg->ca_path : NULL;
    const char *fields[2] = {"ca_file", "ca_path"}, *vals[2] = {file, dir};
    for (int i = 0; i < 2; i++) {
        if (vals[i] && access(vals[i], R_OK) != 0) {
            ah__bufprintf(err, errsize, "client.%s '%.200s' cannot be read: %s", fields[i],
                          vals[i], strerror(errno));
            return -1;
        }
    }
    if (!file && !dir) {
        const char *b = getenv("CURL_CA_BUNDLE");
        if (b && *b) {
            file = b;
        } else {
            file = getenv("SSL_CERT_FILE");
            dir = getenv("SSL_CERT_DIR");
            file = file && *file ? file : NULL;
            dir = dir && *dir ? dir : NULL;
        }
    }
    if ((file && !(c->ca_file = ah__strdup(file))) || (dir && !(c->ca_path = ah__strdup(dir))))
        return -2;
    return 0;
}

/* The request URL as it may be shown: a password in its userinfo, a key in its query and
 * the API key masked (ah_redact). NULL when out of memory. */
static char *client_display_url(const char *url, const char *api_key)
{
    const char *secrets[] = {api_key, NULL};
    size_t size = strlen(url) * 6 + 16; /* room for every mask "[REDACTED]" */
    char *d = malloc(size);
    if (d) {
        memcpy(d, url, strlen(url) + 1);
        ah_redact(d, size, api_key ? secrets : NULL);
    }
    return d;
}

/* Does extra_json turn thinking on ({"thinking": {"type": "enabled" | "adaptive"}})? */
static int extra_enables_thinking(const char *extra_json)
{
    cJSON *o = extra_json ? cJSON_Parse(extra_json) : NULL;
    const cJSON *t = cJSON_GetObjectItemCaseSensitive(o, "thinking");
    const cJSON *type = cJSON_GetObjectItemCaseSensitive(t, "type");
    int on = cJSON_IsObject(t) &&
             !(cJSON_IsString(type) && strcmp(type->valuestring, "disabled") == 0);
    cJSON_Delete(o);
    return on;
}

/* Whether s[0..n) ends with suffix. */
static int ends_with(const char *s, size_t n, const char *suffix)
{
    size_t m = strlen(suffix);
    return n >= m && memcmp(s + n - m, suffix, m) == 0;
}

static ah_client *client_make(const ah_client_config *cfg, char *err, size_t errsize,
                              ah_status *st)
{
    *st = AH_ERR_INVALID;
    char dummy[8];
    if (!err) {
        err = dummy;
        errsize = sizeof dummy;
    }
    if (!cfg || (unsigned)cfg->wire >= (unsigned)AH_WIRE_COUNT_) {
        ah__bufprintf(err, errsize, "client.provider: unknown wire format");
        return NULL;
    }
    const char *base_url = cfg->base_url ? cfg->base_url : ah_wire_base_url(cfg->wire);
    if (!*base_url) {
        ah__bufprintf(err, errsize,
                      "client.base_url must not be empty (leave it out for the provider's "
                      "public API, %s)",
                      ah_wire_base_url(cfg->wire));
        return NULL;
    }
    if (strncmp(base_url, "http://", 7) != 0 && strncmp(base_url, "https://", 8) != 0) {
        ah__bufprintf(err, errsize, "client.base_url must start with http:// or https://");
        return NULL;
    }
    /* a host must follow the scheme: "http://" or "http:///v1" would only fail later,
     * as a DNS error about some other name */
    const char *host = strstr(base_url, "://") + 3;
    size_t hlen = strcspn(host, "/?#");
    if (hlen == 0 || host[0] == ':' || memchr(host, ' ', hlen)) {
        ah__bufprintf(err, errsize, "client.base_url '%.80s' has no host (e.g. "
                      "http://127.0.0.1:8080)", base_url);
        return NULL;
    }
    if (!cfg->model || !*cfg->model) {
        ah__bufprintf(err, errsize, "client.model is required");
        return NULL;
    }
    if ((unsigned)cfg->continuation >= (unsigned)AH_CONTINUATION_COUNT_) {
        ah__bufprintf(err, errsize,
                      "client.continuation: unknown setting (auto, prefill or prompt)");
        return NULL;
    }
    if (cfg->background && !ah_wire_has_background(cfg->wire)) {
        ah__bufprintf(err, errsize,
                      "client.background: only the responses provider has background mode "
                      "(provider is %s)",
                      ah_wire_name(cfg->wire));
        return NULL;
    }
    if ((unsigned)cfg->cache > (unsigned)AH_CACHE_OFF) {
        ah__bufprintf(err, errsize, "client.cache: unknown setting (\"auto\" or false)");
        return NULL;
    }
    if (cfg->cache_ttl && strcmp(cfg->cache_ttl, "5m") != 0 &&
        strcmp(cfg->cache_ttl, "1h") != 0) {
        ah__bufprintf(err, errsize, "client.cache_ttl '%.16s' is not \"5m\" or \"1h\"",
                      cfg->cache_ttl);
        return NULL;
    }
    if (cfg->prompt_cache_key && !*cfg->prompt_cache_key) {
        ah__bufprintf(err, errsize, "client.prompt_cache_key must not be empty");
        return NULL;
    }
    if (cfg->max_tokens < 0) {
        ah__bufprintf(err, errsize, "client.max_tokens must be >= 1 (got %lld)",
                      (long long)cfg->max_tokens);
        return NULL;
    }
    ah_client *c = calloc(1, sizeof *c);
    if (!c)
        goto nomem;
    c->wire = cfg->wire;
    c->continuation = cfg->continuation;
    c->thinking = extra_enables_thinking(cfg->extra_json);
    atomic_init(&c->prefill_refused, 0);
    c->background = cfg->background != 0;
    c->max_tokens = cfg->max_tokens ? cfg->max_tokens : 1024;
    int trust = client_trust(c, cfg, err, errsize);
    if (trust == -2)
        goto nomem;
    if (trust != 0) {
        ah_client_free(c);
        return NULL;
    }
    /* Headers, query and the key (given or from the environment), checked last: a
     * missing key is said once everything else is right. */
    int opts = ah__client_opts_make(&c->opts, cfg, base_url, err, errsize);
    if (opts == -2)
        goto nomem;
    if (opts != 0) {
        ah_client_free(c);
        return NULL;
    }
    c->api_key = c->opts.api_key;
    /* The format's path goes at the end of the base URL's path, before any query the
     * base URL carries; a base URL that already names the version ("https://host/v1",
     * ".../v1beta") gets only the rest of the path, one that names the whole path (with
     * or without the version: Azure's ".../deployments/NAME/chat/completions") nothing.
     * The provider's path may name the model ("{model}", Gemini), its query goes before
     * the client's own. */
    char *path = ah__wire_request_path(cfg->wire, cfg->model);
    char *query = ah__wire_request_query(cfg->wire, c->opts.query);
    if (!path || !query) {
        free(path);
        free(query);
        goto nomem;
    }
    size_t blen = ah__url_path_end(base_url);
    while (blen > 0 && base_url[blen - 1] == '/')
        blen--;
    /* the version segment: "/v1", "/v1beta" */
    size_t vlen = path[0] == '/' && path[1] == 'v' && path[2] >= '0' && path[2] <= '9'
                      ? strcspn(path + 1, "/") + 1
                      : 0;
    int versioned = vlen > 0 && path[vlen] == '/';
    char vseg[32] = "";
    if (versioned && vlen < sizeof vseg)
        memcpy(vseg, path, vlen), vseg[vlen] = '\0';
    else
        versioned = 0;
    const char *rest = ends_with(base_url, blen, path) ||
                               (versioned && ends_with(base_url, blen, path + vlen))
                           ? ""
                       : versioned && ends_with(base_url, blen, vseg) ? path + vlen
                                                                      : path;
    c->url = ah__url_append(base_url, rest, query);
    free(path);
    free(query);
    if (!c->url)
        goto nomem;
    c->model = ah__strdup(cfg->model);
    if (!c->model)
        goto nomem;
    if (cfg->extra_json && !(c->extra_json = ah__strdup(cfg->extra_json)))
        goto nomem;
    c->cache = cfg->cache == AH_CACHE_AUTO;
    if ((cfg->cache_ttl && !(c->cache_ttl = ah__strdup(cfg->cache_ttl))) ||
        (cfg->prompt_cache_key && !(c->prompt_cache_key = ah__strdup(cfg->prompt_cache_key))))
        goto nomem;
    if (!(c->display_url = client_display_url(c->url, c->api_key)))
        goto nomem;
    return c;
nomem:
    *st = AH_ERR_NOMEM;
    ah__bufprintf(err, errsize, "client: out of memory");
    ah_client_free(c);
    return NULL;
}

/* The public form (status, out-pointer, error buffer): see the header. */
ah_status ah_client_new(const ah_client_config *cfg, ah_client **out, char *err,
                        size_t errsize)
{
    ah_status st = AH_OK;
    if (!out) {
        if (err && errsize)
            ah__bufprintf(err, errsize, "ah_client_new: out is NULL");
        return AH_ERR_INVALID;
    }
    *out = client_make(cfg, err, errsize, &st);
    return *out ? AH_OK : st;
}

void ah_client_free(ah_client *c)
{
    if (!c)
        return;
    free(c->url);
    ah__client_opts_free(&c->opts); /* the key too, wiped */
    free(c->model);
    free(c->extra_json);
    free(c->ca_file);
    free(c->ca_path);
    free(c->display_url);
    free(c->cache_ttl);
    free(c->prompt_cache_key);
    free(c);
}

ah_wire ah_client_wire(const ah_client *c)
{
    return c->wire;
}

const char *ah_client_url(const ah_client *c)
{
    return c->url;
}

const char *ah_client_display_url(const ah_client *c)
{
    return c->display_url;
}

ah_continuation ah_client_continuation(const ah_client *c)
{
    return c->continuation;
}

ah_cont_mode ah_client_rung(const ah_client *c)
{
    switch (c->continuation) {
    case AH_CONTINUATION_PREFILL:
        return AH_CONT_PREFILL;
    case AH_CONTINUATION_PROMPT:
        return AH_CONT_PROMPT;
    default:
        if (atomic_load(&((ah_client *)c)->prefill_refused))
            return AH_CONT_PROMPT;
        return ah_model_capabilities(c->wire, c->model, c->thinking).prefill
                   ? AH_CONT_PREFILL
                   : AH_CONT_PROMPT;
    }
}

/* An "auto" client whose prefill was refused: prompt from now on; 1 the first time. */
static int client_learn_prompt(const ah_client *c)
{
    return atomic_exchange(&((ah_client *)c)->prefill_refused, 1) == 0;
}

/* ---- worker state --------------------------------------------------------------------------- */

typedef enum wstate { W_IDLE, W_CALLING, W_TOOLS, W_FINISHED } wstate;

typedef struct pending_tool {
    char *id, *name, *args;
    char *content;
    ah_tool_outcome outcome;
    int exclusive;
    int answered;
    const char *server; /* the tool's MCP server (borrowed from the worker), or NULL */
} pending_tool;

struct ah_worker {
    ah_loop *loop;
    const ah_client *client;
    ah_conversation *conv;
    ah_policy policy;
    ah_retry_budget *retry_budget;
    ah_rate_limit *rate_limit;
    ah_tool_def *tools;
    int *tool_exclusive; /* n_tools flags */
    char **tool_servers; /* n_tools MCP server names (NULL: not an MCP tool) */
    size_t n_tools;
    ah_tool_exec_fn tool_exec;
    void *tool_ud;
    ah_event_fn on_event;
    void *event_ud;
    char *continue_prompt;
    const ah_transport *transport;
    int max_steps;
    int (*check_output)(void *ud, const char *text, int refused, char *why,
                        size_t whysize);
    void *check_ud;
    int max_output_retries;
    char run_id[48];

    wstate state;
    ah_call *call;      /* the request in flight, or the finished one until the next kick */
    ah_timeline *tl;
    ah_decoder *dec;
    ah_timer *kick;
    ah_async *cancel_async;
    atomic_int cancel_requested;
    char *cancel_reason; /* ah_worker_cancel_with's (CANCEL_REASON_MAX bytes, malloc'd
                            by the first), loop thread; NULL or "" = none */

    int llm_call;      /* number of the current request, 1-based */
    int continuations; /* continuations of the current step */
    int next_is_continuation;
    size_t answer_start; /* history index where the current answer began */

    /* The request in flight is a continuation ... */
    int sent_prefill;    /* ... whose history ends with the partial assistant message */
    int call_end_sent;   /* the request in flight emitted its llm_call_end */
    int broke;           /* its stream broke and the break went to the retry machine */
    /* the retry granted to a broken request, which the next one carries; allocated
     * (a run rarely has one), NULL = none */
    ah_call_retry *carry;
    ah__overlap *ov;     /* ... with committed text: trims its first text block */
    size_t ov_block;     /* that block's timeline index, or NO_BLOCK before it opens */
    int ov_failed;       /* the trimmer ran out of memory: the run fails */

    pending_tool *pending;
    size_t n_pending, n_answered;
    size_t next_tool;     /* the next call to start, in call order */
    int running_tools;    /* started, not answered */
    int exclusive_running;
    int starting;         /* inside start_tools: answers do not re-enter it */
    int max_tool_concurrency;

    /* The response being received. */
    int json_mode;          /* a 2xx application/json body: decoded whole at the end */
    char *jbuf;             /* that body */
    size_t jlen, jcap;
    int64_t content_bytes;  /* text, reasoning and argument bytes decoded so far */
    int64_t step_start_ms;  /* when the step's first request was sent (deadline_ms) */

    ah_run_outcome outcome;
    /* the run's error, allocated when it ends with one (none: not ended, or no error) */
    ah__error_slot error;
    char *text;
    const char *text_ref; /* the answer's one text block, in history (not owned) */
    ah_worker_stats stats;
    const char *stop_reason; /* the last completed response's, normalised (static) */
    size_t cache_history;    /* the step's earlier history (prompt caching) */
    int max_tokens_conts;    /* continue_on_max_tokens continuations of this call */
    ah_conversation *(*on_context_exceeded)(void *ud, const ah_conversation *history);
    void *context_ud;
    int context_retried; /* on_context_exceeded gave its one more try */
};

#define NO_BLOCK ((size_t)-1)
#define CANCEL_REASON_MAX 160 /* "cancelled: <reason>", cut there (ah_worker_cancel_with) */

/* Every event of the run carries its id and the wall time (the call's own events are
 * stamped again here: the same values, one place that guarantees them). */
static void emit(ah_worker *w, const ah_event *ev)
{
    if (!w->on_event)
        return;
    ah_event e = *ev;
    e.run_id = w->run_id;
    e.ts_ms = ah_loop_wall_ms(w->loop);
    w->on_event(w->event_ud, &e);
}

static void set_state(ah_worker *w, wstate s)
{
    static const char *const names[] = {"idle", "calling", "tools", "finished"};
    ah__log(AH_LOG_DEBUG, "worker %s: %s -> %s", w->run_id, names[w->state], names[s]);
    w->state = s;
}

/* Concatenate the text blocks of the assistant messages of the current answer. An answer
 * of one text block is not copied: w->text_ref points at it in history (which only
 * grows until the worker is freed, so the pointer stays valid). */
static void build_text(ah_worker *w)
{
    size_t total = 0, n = ah_conversation_count(w->conv);
    const char *only = NULL;
    size_t n_text = 0;
    for (size_t m = w->answer_start; m < n; m++) {
        if (ah_conversation_role(w->conv, m) != AH_ROLE_ASSISTANT)
            continue;
        for (size_t i = 0; i < ah_conversation_block_count(w->conv, m); i++) {
            const ah_msg_block *b = ah_conversation_block(w->conv, m, i);
            if (b->kind == AH_MSG_TEXT && b->text[0]) {
                only = b->text;
                n_text++;
            }
        }
    }
    w->text_ref = NULL;
    if (n_text == 1) {
        free(w->text);
        w->text = NULL;
        w->text_ref = only;
        return;
    }
    for (int pass = 0; pass < 2; pass++) {
        size_t pos = 0;
        for (size_t m = w->answer_start; m < n; m++) {
            if (ah_conversation_role(w->conv, m) != AH_ROLE_ASSISTANT)
                continue;
            for (size_t i = 0; i < ah_conversation_block_count(w->conv, m); i++) {
                const ah_msg_block *b = ah_conversation_block(w->conv, m, i);
                if (b->kind != AH_MSG_TEXT)
                    continue;
                size_t len = strlen(b->text);
                if (pass == 1)
                    memcpy(w->text + pos, b->text, len);
                pos += len;
            }
        }
        if (pass == 0) {
            total = pos;
            free(w->text);
            w->text = malloc(total + 1);
            if (!w->text)
                return;
        } else {
            w->text[total] = '\0';
        }
    }
}

/* The trimmer of a continuation: what the model may restate is the answer so far, its
 * text blocks joined by a newline (a block's start is a boundary a restatement may start
 * from, like a line's). No committed text, no trimmer. */
static ah_status new_overlap(ah_worker *w)
{
    size_t total = 0, n = ah_conversation_count(w->conv);
    for (int pass = 0; pass < 2; pass++) {
        char *c = NULL;
        if (pass == 1) {
            if (total == 0)
                return AH_OK;
            if (!(c = malloc(total)))
                return AH_ERR_NOMEM;
        }
        size_t pos = 0;
        for (size_t m = w->answer_start; m < n; m++) {
            if (ah_conversation_role(w->conv, m) != AH_ROLE_ASSISTANT)
                continue;
            for (size_t i = 0; i < ah_conversation_block_count(w->conv, m); i++) {
                const ah_msg_block *b = ah_conversation_block(w->conv, m, i);
                size_t len = b->kind == AH_MSG_TEXT ? strlen(b->text) : 0;
                if (len == 0)
                    continue;
                if (pos > 0 && pass == 1)
                    c[pos] = '\n';
                pos += pos > 0;
                if (pass == 1)
                    memcpy(c + pos, b->text, len);
                pos += len;
            }
        }
        if (pass == 0) {
            total = pos;
        } else {
            w->ov = ah__overlap_new(c, pos);
            free(c);
            return w->ov ? AH_OK : AH_ERR_NOMEM;
        }
    }
    return AH_OK;
}

static void close_tool_round(ah_worker *w, ah_run_outcome outcome);

static void finish(ah_worker *w, ah_run_outcome outcome, const ah_error *err)
{
    if (w->state == W_FINISHED)
        return;
    if (w->state == W_TOOLS)
        close_tool_round(w, outcome);
    set_state(w, W_FINISHED);
    ah_timer_stop(w->kick);
    w->outcome = outcome;
    if (err && err->kind != AH_EK_NONE)
        ah__eslot_set(&w->error, err);
    else
        ah__eslot_free(&w->error);
    build_text(w);
    ah_event ev = {.type = AH_EV_RUN_END};
    ev.u.run_end.outcome = outcome;
    ev.u.run_end.error = ah_worker_error(w)->kind == AH_EK_NONE ? NULL : ah_worker_error(w);
    emit(w, &ev);
}

static void finish_cancelled(ah_worker *w)
{
    ah_error e;
    ah_error_set(&e, AH_EK_CANCELLED, 0, "%s",
                 w->cancel_reason && w->cancel_reason[0] ? w->cancel_reason : "cancelled");
    finish(w, AH_OUTCOME_CANCELLED, &e);
}

static void fail_nomem(ah_worker *w, const char *where)
{
    ah_error e;
    ah_error_set(&e, AH_EK_PERMANENT, 0, "out of memory (%s)", where);
    finish(w, AH_OUTCOME_FAILED, &e);
}

/* ---- streaming: decoder hooks and the call's stream consumer -------------------------------- */

static void emit_delta(ah_worker *w, size_t index, ah_block_kind kind, const char *text,
                       size_t len)
{
    ah_event ev = {.type = kind == AH_BLOCK_TEXT ? AH_EV_TEXT_DELTA : AH_EV_REASONING_DELTA};
    ev.u.delta.llm_call = w->llm_call;
    ev.u.delta.block = (int)index;
    ev.u.delta.text = text;
    ev.u.delta.len = len;
    emit(w, &ev);
}

static void hook_delta(void *ud, size_t index, ah_block_kind kind, const char *text, size_t len)
{
    ah_worker *w = ud;
    w->content_bytes += (int64_t)len; /* what the provider sent, trimmed or not */
    if (kind != AH_BLOCK_TEXT && kind != AH_BLOCK_REASONING)
        return;
    if (kind == AH_BLOCK_TEXT && w->ov && !w->ov_failed) {
        if (w->ov_block == NO_BLOCK)
            w->ov_block = index; /* the continuation's first text block */
        if (index == w->ov_block) {
            if (ah__overlap_feed(w->ov, text, len, &text, &len) != AH_OK) {
                w->ov_failed = 1;
                return;
            }
            if (len == 0)
                return; /* held while it may be a restatement, or dropped */
        }
    }
    emit_delta(w, index, kind, text, len);
}

/* The trimmed block closed: what it still holds is decided now. */
static void hook_block_end(void *ud, size_t index, const ah_block *b)
{
    ah_worker *w = ud;
    (void)b;
    if (!w->ov || w->ov_failed || index != w->ov_block)
        return;
    const char *out;
    size_t len;
    if (ah__overlap_finish(w->ov, &out, &len) != AH_OK) {
        w->ov_failed = 1;
        return;
    }
    if (len > 0)
        emit_delta(w, index, AH_BLOCK_TEXT, out, len);
}

/* Bytes to skip at the start of block b when committing it (the dropped restatement). */
static size_t trimmed_of(const ah_worker *w, const ah_block *b)
{
    if (!w->ov || w->ov_block == NO_BLOCK || ah_timeline_block(w->tl, w->ov_block) != b)
        return 0;
    return ah__overlap_trimmed(w->ov);
}

static int handles_give_up(void *ud, const ah_error *err);

/* ---- the end of a request's stream ------------------------------------------------------------ */

/* The request's llm_call_end, once: for a completed response (its stop reason, usage and
 * trimmed bytes) or a cut one ("interrupted", the usage reported so far, and what was
 * trimmed from a block that is kept). The tokens count in the run's stats either way:
 * a cut response was paid for too. */
/* The normalised stop reasons as static strings (the timeline's answer dies with its
 * response; an unknown raw one is kept as "other"). */
static const char *stop_norm_static(const char *s)
{
    static const char *const known[] = {"end_turn",  "tool_use",   "max_tokens",
                                        "refusal",   "pause_turn", "context_exceeded",
                                        NULL};
    if (!s)
        return NULL;
    for (size_t i = 0; known[i]; i++)
        if (strcmp(s, known[i]) == 0)
            return known[i];
    return "other";
}

static void emit_call_end(ah_worker *w, const char *stop_reason)
{
    if (w->call_end_sent)
        return;
    w->call_end_sent = 1;
    int64_t in = ah_timeline_input_tokens(w->tl), out = ah_timeline_output_tokens(w->tl);
    if (in > 0)
        w->stats.input_tokens += in;
    if (out > 0)
        w->stats.output_tokens += out;
    int64_t trimmed = 0;
    if (w->ov && w->ov_block != NO_BLOCK &&
        (!stop_reason || ah_timeline_block(w->tl, w->ov_block)->closed))
        trimmed = (int64_t)ah__overlap_trimmed(w->ov);
    ah_event ev = {.type = AH_EV_LLM_CALL_END};
    ev.u.llm_call_end.llm_call = w->llm_call;
    int64_t cr = ah_timeline_cache_read_tokens(w->tl), cw = ah_timeline_cache_write_tokens(w->tl);
    cr = cr > 0 ? cr : 0;
    cw = cw > 0 ? cw : 0;
    w->stats.cache_read_tokens += cr;
    w->stats.cache_write_tokens += cw;
    if (!stop_reason)
        w->stop_reason = stop_norm_static(ah_timeline_stop(w->tl));
    ev.u.llm_call_end.stop_reason = stop_reason ? stop_reason : ah_timeline_stop(w->tl);
    ev.u.llm_call_end.input_tokens = in;
    ev.u.llm_call_end.output_tokens = out;
    ev.u.llm_call_end.cache_read_tokens = cr;
    ev.u.llm_call_end.cache_write_tokens = cw;
    ev.u.llm_call_end.trimmed_bytes = trimmed;
    w->stats.trimmed_bytes += trimmed;
    emit(w, &ev);
}

static int is_space(char c)
{
    return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v';
}

/* The length of the prefix of t[0..n) that ends its last complete sentence or line
 * (policy.continue_partial_text), without trailing whitespace; 0 when there is none. A
 * sentence ends at '.', '!' or '?' (and closing quotes or brackets after it) followed by
 * whitespace that has arrived (so "3.14" cut after "3." is not one), at a CJK 。！？, or
 * at a line end. */
static size_t partial_text_cut(const char *t, size_t n, ah_partial_text mode)
{
    size_t end = 0;
    for (size_t i = 0; i < n; i++) {
        if (t[i] == '\n') {
            end = i;
            continue;
        }
        if (mode != AH_PARTIAL_TEXT_SENTENCE)
            continue;
        if (t[i] == '.' || t[i] == '!' || t[i] == '?') {
            size_t j = i + 1;
            while (j < n && (t[j] == '"' || t[j] == '\'' || t[j] == ')' || t[j] == ']'))
                j++;
            if (j < n && is_space(t[j]))
                end = j;
        } else if (i + 2 < n && (unsigned char)t[i] == 0xE3 &&
                   (unsigned char)t[i + 1] == 0x80 && (unsigned char)t[i + 2] == 0x82) {
            end = i + 3; /* 。 */
        } else if (i + 2 < n && (unsigned char)t[i] == 0xEF &&
                   (unsigned char)t[i + 1] == 0xBC &&
                   ((unsigned char)t[i + 2] == 0x81 || (unsigned char)t[i + 2] == 0x9F)) {
            end = i + 3; /* ！ ？ */
        }
    }
    while (end > 0 && is_space(t[end - 1]))
        end--;
    return end;
}

/* What policy.continue_partial_text keeps of the unfinished text block a cut left last in
 * the timeline: the part already shown (not what the trimmer holds or dropped), up to its
 * last complete sentence or line. 0 when nothing (off, no such block, no boundary). */
static size_t partial_text_keep(const ah_worker *w, const char **text)
{
    size_t n = ah_timeline_count(w->tl);
    if (w->policy.continue_partial_text == AH_PARTIAL_TEXT_OFF || n == 0)
        return 0;
    const ah_block *b = ah_timeline_block(w->tl, n - 1);
    if (b->kind != AH_BLOCK_TEXT || b->closed || b->text_len == 0)
        return 0;
    size_t skip = 0;
    if (w->ov && w->ov_block == n - 1) {
        if (w->ov_failed || !ah__overlap_decided(w->ov))
            return 0; /* nothing of it shown yet: it may be a restatement */
        skip = ah__overlap_trimmed(w->ov);
    }
    if (skip >= b->text_len)
        return 0;
    *text = b->text + skip;
    return partial_text_cut(b->text + skip, b->text_len - skip, w->policy.continue_partial_text);
}

/* Would a continuation commit anything new from this timeline? */
static int would_commit(const ah_worker *w)
{
    for (size_t i = 0; i < ah_timeline_count(w->tl); i++) {
        const ah_block *b = ah_timeline_block(w->tl, i);
        if (!b->closed)
            continue;
        if (b->kind == AH_BLOCK_REASONING ||
            (b->kind == AH_BLOCK_TEXT && b->text_len > trimmed_of(w, b)))
            return 1;
    }
    const char *t;
    return partial_text_keep(w, &t) > 0;
}

/* The call's question when the stream broke (no re-attach): is this a failure of the
 * request, for the retry machine, rather than a cut after content that is kept? The
 * provider's own error in the stream is (an overload seen through a 200 costs what a 529
 * costs), and so is a break that leaves nothing new to keep: the same request goes out
 * again, a retry. The stream is over either way: its llm_call_end goes out now, before
 * any retry or give-up. */
static int stream_break_is_retry(void *ud, const ah_error *err)
{
    ah_worker *w = ud;
    emit_call_end(w, "interrupted");
    w->broke = err->provider_type[0] != '\0' || ah_timeline_error(w->tl) != NULL ||
               !would_commit(w);
    return w->broke;
}

static int over_cap(ah_worker *w, int64_t n, ah_error *err)
{
    int64_t cap = w->policy.max_response_bytes;
    if (cap <= 0 || n <= cap)
        return 0;
    /* Not a cut: the same request would only produce the same oversized answer. */
    ah_error_set(err, AH_EK_BUDGET, 0,
                 "the response exceeded max_response_bytes (%lld bytes); the stream was "
                 "stopped",
                 (long long)cap);
    return 1;
}

static int header_is(const ah_header *h, const char *name)
{
    return h->name && strcasecmp(h->name, name) == 0;
}

static int media_is(const char *ct, const char *type)
{
    while (*ct == ' ' || *ct == '\t')
        ct++;
    size_t n = strlen(type);
    return strncasecmp(ct, type, n) == 0 &&
           (ct[n] == '\0' || ct[n] == ';' || ct[n] == ' ' || ct[n] == '\t');
}

/* The 2xx head: an event stream (or no Content-Type: taken as one), a JSON body (a proxy
 * that answered `stream: true` with the non-stream response: decoded as that), or
 * anything else, refused at once with the content type named (not retried, not
 * continued: resending gets the same page). */
/* The stream's decoder, made by the first event-stream head of a request and kept
 * through its retries and re-attachments (send_request and the step's end free it). */
static int make_decoder(ah_worker *w, ah_error *err)
{
    if (w->dec)
        return 0;
    ah_decoder_hooks hooks = {.delta = hook_delta, .block_end = hook_block_end};
    if (ah_decoder_new(w->client->wire, w->tl, &hooks, w, &w->dec, NULL, 0) == AH_OK)
        return 0;
    ah_error_set(err, AH_EK_PERMANENT, 0, "out of memory (decoder)");
    return 1;
}

static int stream_open(void *ud, int status, const ah_header *h, size_t n, ah_error *err)
{
    ah_worker *w = ud;
    w->json_mode = 0;
    w->jlen = 0;
    w->content_bytes = 0;
    if (status == 204 || status == 205) {
        ah_error_set(err, AH_EK_DECODE, 0,
                     "HTTP %d (no content) instead of an event stream", status);
        return 1;
    }
    const char *ct = NULL;
    for (size_t i = 0; i < n; i++)
        if (header_is(&h[i], "content-type"))
            ct = h[i].value;
    if (!ct || !*ct || media_is(ct, "text/event-stream"))
        return make_decoder(w, err);
    if (media_is(ct, "application/json")) {
        w->json_mode = 1;
        return 0;
    }
    ah_error_set(err, AH_EK_DECODE, 0,
                 "HTTP %d with Content-Type '%.80s', not an event stream "
                 "(text/event-stream) or JSON: something other than the provider answered",
                 status, ct);
    return 1;
}

static int stream_data(void *ud, const char *buf, size_t len, ah_error *err)
{
    ah_worker *w = ud;
    if (w->json_mode) {
        if (over_cap(w, (int64_t)(w->jlen + len), err))
            return 1;
        if (w->jlen + len + 1 > w->jcap) {
            size_t cap = w->jcap ? w->jcap : 4096;
            while (cap < w->jlen + len + 1)
                cap *= 2;
            char *p = realloc(w->jbuf, cap);
            if (!p) {
                ah_error_set(err, AH_EK_BUDGET, 0, "out of memory for the response body");
                return 1;
            }
            w->jbuf = p;
            w->jcap = cap;
        }
        memcpy(w->jbuf + w->jlen, buf, len);
        w->jlen += len;
        return 0;
    }
    if (ah_decoder_feed(w->dec, buf, len) == AH_OK)
        return over_cap(w, w->content_bytes, err);
    const ah_error *de = ah_decoder_error(w->dec);
    if (de)
        *err = *de;
    return 1;
}

static int stream_end(void *ud, ah_error *err)
{
    ah_worker *w = ud;
    if (!w->json_mode)
        return ah_decoder_finish(w->dec, err) != AH_OK;
    ah_status st = ah_decode_response(w->client->wire, w->jbuf ? w->jbuf : "", w->jlen,
                                      w->tl, err);
    free(w->jbuf);
    w->jbuf = NULL;
    w->jlen = w->jcap = 0;
    if (st != AH_OK)
        return 1;
    /* The text arrives whole: one delta per text block, so a display still shows it. */
    for (size_t i = 0; i < ah_timeline_count(w->tl); i++) {
        const ah_block *b = ah_timeline_block(w->tl, i);
        if ((b->kind == AH_BLOCK_TEXT || b->kind == AH_BLOCK_REASONING) && b->text_len)
            hook_delta(w, i, b->kind, b->text, b->text_len);
        if (b->closed)
            hook_block_end(w, i, b); /* a trimmed block decides what it held */
    }
    return 0;
}

static int stream_ended(void *ud)
{
    ah_worker *w = ud;
    return !w->json_mode && ah_decoder_ended(w->dec);
}

static void forward_event(void *ud, const ah_event *ev)
{
    ah_worker *w = ud;
    if (ev->type == AH_EV_LLM_RETRY)
        w->stats.retries++;
    else if (ev->type == AH_EV_LLM_CALL_START)
        w->stats.attempts++;
    emit(w, ev);
}

static void on_call_finish(void *ud, ah_call *call);

/* Background responses: the call re-attaches to the response, or cancels it, through
 * these; the decoder knows the response id and the last sequence number. */
static char *resume_reattach_url(void *ud)
{
    ah_worker *w = ud;
    const char *id = NULL;
    int64_t seq = -1;
    if (!ah_decoder_cursor(w->dec, &id, &seq))
        return NULL;
    char *url = ah_wire_reattach_url(w->client->wire, w->client->url, id, seq);
    if (url && ah_decoder_reattach(w->dec) != AH_OK) {
        free(url);
        return NULL;
    }
    return url;
}

static char *resume_cancel_url(void *ud)
{
    ah_worker *w = ud;
    const char *id = ah_decoder_response_id(w->dec);
    return id ? ah_wire_cancel_url(w->client->wire, w->client->url, id) : NULL;
}

/* ---- sending a request ------------------------------------------------------------------------ */

/* The earlier history of a step's request: the messages before its trailing user
 * messages (the new input, or the tool results it answers with). Its last message gets
 * the prompt-cache breakpoint; the step's continuations keep the same one. */
static size_t earlier_history(const ah_conversation *c)
{
    size_t i = ah_conversation_count(c);
    while (i > 0 && ah_conversation_role(c, i - 1) == AH_ROLE_USER)
        i--;
    return i;
}

static void send_request(ah_worker *w)
{
    ah_error e;
    char msg[256];
    int continuation = w->next_is_continuation;
    w->next_is_continuation = 0;
    if (!continuation) {
        if (w->stats.steps >= w->max_steps) {
            ah_error_set(&e, AH_EK_BUDGET, 0, "max_steps (%d) reached", w->max_steps);
            finish(w, AH_OUTCOME_MAX_STEPS, &e);
            return;
        }
        w->stats.steps++;
        w->continuations = 0;
        w->max_tokens_conts = 0;
        w->step_start_ms = ah_loop_now_ms(w->loop);
    }
    /* deadline_ms bounds the whole call, continuations included: a continuation gets
     * only what is left of it. */
    ah_policy pol = w->policy;
    if (continuation && pol.deadline_ms > 0) {
        int64_t left = pol.deadline_ms - (ah_loop_now_ms(w->loop) - w->step_start_ms);
        if (left <= 0) {
            ah_error_set(&e, AH_EK_TIMEOUT, 0,
                         "deadline of %lld ms reached before continuation %d",
                         (long long)pol.deadline_ms, w->continuations);
            finish(w, AH_OUTCOME_FAILED, &e);
            return;
        }
        pol.deadline_ms = left;
    }
    ah_request_opts opts;
    ah_request_opts_init(&opts);
    opts.model = w->client->model;
    opts.max_tokens = w->client->max_tokens;
    opts.tools = w->tools;
    opts.n_tools = w->n_tools;
    opts.stream = 1;
    opts.extra_json = w->client->extra_json;
    opts.background = w->client->background;
    if (!continuation)
        w->cache_history = earlier_history(w->conv);
    opts.cache = w->client->cache;
    opts.cache_ttl = w->client->cache_ttl;
    opts.cache_history = w->cache_history;
    opts.prompt_cache_key = w->client->prompt_cache_key ? w->client->prompt_cache_key
                                                        : ah_conversation_id(w->conv);
    char *body = NULL; /* ah_call_new copies it */
    size_t body_len = 0;
    msg[0] = '\0';
    ah_status st = ah_request_encode(w->client->wire, w->conv, &opts, &body, &body_len, msg,
                                     sizeof msg);
    if (st != AH_OK) {
        ah_error_set(&e, AH_EK_PERMANENT, 0, "cannot encode the request: %s",
                     msg[0] ? msg : ah_status_message(st));
        finish(w, AH_OUTCOME_FAILED, &e);
        return;
    }
    ah_header_list hl;
    if (ah_request_headers(w->client->wire, w->client->api_key, 1, &hl) != AH_OK) {
        free(body);
        ah_error_set(&e, AH_EK_PERMANENT, 0, "invalid API key (control characters)");
        finish(w, AH_OUTCOME_FAILED, &e);
        return;
    }
    size_t n_headers = 0; /* agenthost's and the provider's, then the client's own */
    ah_header *headers =
        ah__client_request_headers(hl.items, hl.count, &w->client->opts, &n_headers);
    if (!headers) {
        ah_header_list_free(&hl);
        free(body);
        fail_nomem(w, "request headers");
        return;
    }
    ah_timeline_reset(w->tl);
    ah__overlap_free(w->ov);
    w->ov = NULL;
    w->ov_block = NO_BLOCK;
    w->ov_failed = 0;
    w->sent_prefill = 0;
    w->call_end_sent = 0;
    w->broke = 0;
    if (continuation) {
        size_t n = ah_conversation_count(w->conv);
        w->sent_prefill = n > 0 && ah_conversation_role(w->conv, n - 1) == AH_ROLE_ASSISTANT;
        if (new_overlap(w) != AH_OK) {
            ah_header_list_free(&hl);
            free(headers);
            free(body);
            fail_nomem(w, "overlap");
            return;
        }
    }
    /* The decoder comes with the response head (stream_open): a run waiting for its
     * head holds none (docs/performance.md section 13, "Fourth pass"). */
    ah_decoder_free(w->dec);
    w->dec = NULL;
    ah_call_free(w->call);
    w->call = NULL;
    const char *secrets[] = {w->client->api_key, NULL};
    ah_call_config cc = {0};
    cc.loop = w->loop;
    cc.transport = w->transport;
    cc.request.method = "POST";
    cc.request.url = w->client->url;
    cc.request.headers = headers;
    cc.request.n_headers = n_headers;
    cc.request.body = body;
    cc.request.body_len = body_len;
    cc.request.ca_file = w->client->ca_file;
    cc.request.ca_path = w->client->ca_path;
    cc.policy = &pol;
    cc.retry_budget = w->retry_budget;
    cc.rate_limit = w->rate_limit;
    cc.secrets = w->client->api_key ? secrets : NULL;
    cc.stream.on_open = stream_open;
    cc.stream.on_data = stream_data;
    cc.stream.on_end = stream_end;
    cc.stream.ended = stream_ended;
    cc.stream.break_is_retry = stream_break_is_retry;
    cc.stream.ud = w;
    cc.retry_of = w->carry;
    if (w->client->background) {
        cc.resume.reattach_url = resume_reattach_url;
        cc.resume.cancel_url = resume_cancel_url;
        cc.resume.ud = w;
    }
    cc.on_event = forward_event;
    cc.event_ud = w;
    cc.handles_give_up = handles_give_up;
    cc.on_finish = on_call_finish;
    cc.finish_ud = w;
    cc.llm_call = ++w->llm_call;
    cc.continuation = continuation ? w->continuations : 0;
    cc.run_id = w->run_id;
    st = ah_call_new(&cc, &w->call, msg, sizeof msg);
    free(w->carry); /* copied into the call */
    w->carry = NULL;
    ah_header_list_free(&hl);
    free(headers);
    free(body);
    if (st == AH_OK)
        st = ah_call_start(w->call);
    if (st != AH_OK) {
        ah_error_set(&e, AH_EK_PERMANENT, 0, "cannot start the request: %s",
                     msg[0] ? msg : ah_status_message(st));
        finish(w, AH_OUTCOME_FAILED, &e);
        return;
    }
    if (!continuation)
        w->stats.llm_calls++; /* model turns: a continuation finishes the same turn */
    set_state(w, W_CALLING);
}

static void on_kick(void *ud)
{
    ah_worker *w = ud;
    if (w->state == W_FINISHED)
        return;
    if (atomic_load(&w->cancel_requested)) {
        finish_cancelled(w);
        return;
    }
    send_request(w);
}

/* ---- committing ------------------------------------------------------------------------------- */

/* Append one timeline block to the last (assistant) message. */
static ah_status commit_block(ah_worker *w, const ah_block *b)
{
    size_t skip = trimmed_of(w, b);
    switch (b->kind) {
    case AH_BLOCK_TEXT: {
        if (b->text_len <= skip)
            return AH_OK; /* providers reject empty text blocks; nothing is lost */
        /* The timeline's text is NUL-terminated (so is its tail after a trimmed
         * restatement): one copy into history, not two (a large answer briefly held three
         * times otherwise). */
        ah_msg_block mb = {.kind = AH_MSG_TEXT, .text = b->text + skip};
        return ah_conversation_add_block(w->conv, &mb);
    }
    case AH_BLOCK_REASONING:
        return ah_conversation_add_reasoning(w->conv, b->text,
                                             b->signature_len ? b->signature : NULL,
                                             b->item_id[0] ? b->item_id : NULL,
                                             b->encrypted_len ? b->encrypted : NULL,
                                             b->redacted);
    case AH_BLOCK_TOOL_USE:
        return ah_conversation_add_tool_use(w->conv, b->id, b->name, b->arguments);
    default:
        return AH_OK; /* server-side tool blocks are the provider's; not replayed */
    }
}

/* The assistant message to append to: the partial one a continuation left (so a
 * continued answer stays one message), or a new one. */
static ah_status open_assistant(ah_worker *w)
{
    size_t n = ah_conversation_count(w->conv);
    if (n > 0 && ah_conversation_role(w->conv, n - 1) == AH_ROLE_ASSISTANT &&
        ah_conversation_is_partial(w->conv, n - 1))
        return AH_OK;
    return ah_conversation_begin_assistant(w->conv);
}

static void run_tools(ah_worker *w, size_t msg);

/* Structured output: a completed answer without tool calls goes through check_output;
 * a rejection is shown to the model in history and the answer asked for again. */
static void check_answer(ah_worker *w, int refused)
{
    build_text(w);
    if (!w->text && !w->text_ref) {
        fail_nomem(w, "answer text");
        return;
    }
    char why[1024] = "";
    if (w->check_output(w->check_ud, ah_worker_text(w), refused, why, sizeof why) == 0) {
        finish(w, AH_OUTCOME_COMPLETED, NULL);
        return;
    }
    if (!why[0])
        ah__bufprintf(why, sizeof why, "The answer was rejected. Please answer again.");
    if (w->stats.output_retries >= w->max_output_retries) {
        ah_error e;
        ah_error_set(&e, AH_EK_OUTPUT, 0, "%s", why);
        finish(w, AH_OUTCOME_BAD_OUTPUT, &e);
        return;
    }
    if (ah_conversation_add_user_text(w->conv, why) != AH_OK) {
        fail_nomem(w, "history");
        return;
    }
    w->stats.output_retries++;
    w->answer_start = ah_conversation_count(w->conv);
    if (atomic_load(&w->cancel_requested)) {
        finish_cancelled(w);
        return;
    }
    set_state(w, W_IDLE);
    ah_timer_start(w->kick, 0);
}

/* The request does not fit the context window: on_context_exceeded may give a shorter
 * history for one more try; otherwise the outcome says so. */
static void context_exceeded(ah_worker *w, const ah_error *cause)
{
    if (w->on_context_exceeded && !w->context_retried) {
        w->context_retried = 1;
        ah_conversation *shorter = w->on_context_exceeded(w->context_ud, w->conv);
        if (shorter && w->state != W_FINISHED) {
            if ((!ah_conversation_id(shorter) &&
                 ah_conversation_set_id(shorter, ah_conversation_id(w->conv)) != AH_OK) ||
                (!ah_conversation_system(shorter) &&
                 ah_conversation_set_system(shorter, ah_conversation_system(w->conv)) !=
                     AH_OK)) {
                ah_conversation_free(shorter);
                fail_nomem(w, "history");
                return;
            }
            ah_conversation_free(w->conv);
            w->conv = shorter;
            w->answer_start = ah_conversation_count(w->conv);
            w->next_is_continuation = 0;
            set_state(w, W_IDLE);
            ah_timer_start(w->kick, 0);
            return;
        }
        ah_conversation_free(shorter);
        if (w->state == W_FINISHED)
            return;
    }
    finish(w, AH_OUTCOME_CONTEXT_EXCEEDED, cause);
}

/* A continuation on `mode`'s rung: the prompt rung's user turn, the counts and
 * llm_continuation. 0 when the run ended meanwhile (out of memory, or a hook's cancel),
 * else 1: the caller sends the next request. */
static int begin_continuation(ah_worker *w, ah_cont_mode mode, int committed, int discarded,
                              int64_t discarded_bytes, const char *reason)
{
    if (mode == AH_CONT_PROMPT &&
        ah_conversation_add_user_text(w->conv, w->continue_prompt) != AH_OK) {
        fail_nomem(w, "history");
        return 0;
    }
    w->continuations++;
    w->stats.continuations++;
    ah_event ev = {.type = AH_EV_LLM_CONTINUATION};
    ev.u.llm_continuation.llm_call = w->llm_call;
    ev.u.llm_continuation.continuation = w->continuations;
    ev.u.llm_continuation.max_continuations = w->policy.max_continuations;
    ev.u.llm_continuation.committed_blocks = committed;
    ev.u.llm_continuation.discarded_blocks = discarded;
    ev.u.llm_continuation.discarded_bytes = discarded_bytes;
    ev.u.llm_continuation.mode = mode;
    ev.u.llm_continuation.reason = reason;
    emit(w, &ev);
    return w->state != W_FINISHED;
}

/* A completed response that stopped at max_tokens, continued as if it were cut
 * (policy.continue_on_max_tokens): the message stays partial and the next request
 * continues it on the client's rung. 1 when a continuation was sent for. */
static int continue_max_tokens(ah_worker *w, size_t msg)
{
    if (w->policy.continue_on_max_tokens <= 0 ||
        w->max_tokens_conts >= w->policy.continue_on_max_tokens ||
        w->continuations >= w->policy.max_continuations ||
        msg >= ah_conversation_count(w->conv) ||
        ah_conversation_role(w->conv, msg) != AH_ROLE_ASSISTANT)
        return 0;
    if (ah_conversation_set_partial(w->conv, 1) != AH_OK)
        return 0;
    w->max_tokens_conts++;
    if (begin_continuation(w, ah_client_rung(w->client),
                           (int)ah_conversation_block_count(w->conv, msg), 0, 0,
                           "the response stopped at max_tokens "
                           "(policy.continue_on_max_tokens)")) {
        w->next_is_continuation = 1;
        ah_timer_start(w->kick, 0);
    }
    return 1;
}

static void commit_response(ah_worker *w)
{
    if (open_assistant(w) != AH_OK) {
        fail_nomem(w, "history");
        return;
    }
    size_t msg = ah_conversation_count(w->conv) - 1;
    size_t n_tools = 0;
    int has_text = 0;
    for (size_t i = 0; i < ah_timeline_count(w->tl); i++) {
        const ah_block *b = ah_timeline_block(w->tl, i);
        if (!b->closed)
            continue; /* a "complete" response with an open block: drop it */
        if (commit_block(w, b) != AH_OK) {
            fail_nomem(w, "history");
            return;
        }
        n_tools += b->kind == AH_BLOCK_TOOL_USE;
        has_text |= b->kind == AH_BLOCK_TEXT && b->text_len > trimmed_of(w, b);
    }
    size_t rlen = 0;
    const char *refusal = ah_timeline_refusal(w->tl, &rlen);
    if (!has_text && refusal && rlen > 0 && ah_conversation_add_text(w->conv, refusal, rlen) != AH_OK) {
        fail_nomem(w, "history");
        return;
    }
    if (ah_conversation_is_partial(w->conv, msg))
        ah_conversation_set_partial(w->conv, 0);
    if (ah_conversation_block_count(w->conv, msg) == 0)
        ah_conversation_truncate(w->conv, msg); /* nothing to keep: no empty message */

    int64_t in = ah_timeline_input_tokens(w->tl), out = ah_timeline_output_tokens(w->tl);
    if (w->rate_limit)
        ah_rate_limit_charge(w->rate_limit, w->loop, (in > 0 ? in : 0) + (out > 0 ? out : 0));
    emit_call_end(w, NULL);
    if (w->state == W_FINISHED)
        return;
    const char *stop = ah_timeline_stop(w->tl); /* normalised: Gemini SAFETY too */
    int refused =
        (!has_text && refusal && rlen > 0) || (stop && strcmp(stop, "refusal") == 0);
    const char *norm = w->stop_reason ? w->stop_reason : "";
    if (strcmp(norm, "refusal") == 0 && !w->check_output) {
        /* The model refused: the run ends so, with the category, never continued; the
         * refused turn is not kept in history. */
        const char *cat = ah_timeline_stop_category(w->tl);
        ah_error e;
        ah_error_set(&e, AH_EK_REFUSED, 0, "the model refused to answer%s%.64s%s",
                     cat ? " (category " : "", cat ? cat : "", cat ? ")" : "");
        if (cat)
            ah__bufprintf(e.category, sizeof e.category, "%s", cat);
        ah_conversation_truncate(w->conv, msg);
        finish(w, AH_OUTCOME_REFUSED, &e);
        return;
    }
    if (strcmp(norm, "context_exceeded") == 0) {
        ah_error e;
        ah_error_set(&e, AH_EK_CONTEXT_EXCEEDED, 0,
                     "the response stopped at the model's context window "
                     "(model_context_window_exceeded)");
        context_exceeded(w, &e);
        return;
    }
    int paused = strcmp(norm, "pause_turn") == 0;
    int max_tokens = strcmp(norm, "max_tokens") == 0;
    /* Everything is in history now: let the response's buffers go (a large answer
     * would otherwise be held twice until the next request). */
    ah_timeline_reset(w->tl);
    ah_decoder_free(w->dec);
    w->dec = NULL;
    ah__overlap_free(w->ov); /* it holds a copy of the committed text */
    w->ov = NULL;
    w->ov_block = NO_BLOCK;
    if (n_tools == 0 && paused) {
        /* pause_turn: the paused turn is sent back last to let it go on (a new step) */
        if (atomic_load(&w->cancel_requested)) {
            finish_cancelled(w);
            return;
        }
        set_state(w, W_IDLE);
        ah_timer_start(w->kick, 0);
        return;
    }
    if (n_tools == 0 && max_tokens && continue_max_tokens(w, msg))
        return;
    if (n_tools == 0) {
        if (w->check_output) {
            check_answer(w, refused);
            return;
        }
        finish(w, AH_OUTCOME_COMPLETED, NULL);
        return;
    }
    run_tools(w, msg);
}

/* What an interrupted response leaves in history: its closed text and reasoning blocks
 * (the timeline's partial drain) and, with policy.continue_partial_text, the complete
 * sentences or lines of its unfinished text block, as one partial assistant message.
 * Counts what was kept and what streamed past and is gone (for llm_continuation). */
static ah_status commit_partial(ah_worker *w, int *committed, int *discarded,
                                int64_t *discarded_bytes)
{
    ah_partial p;
    if (ah_timeline_partial_drain(w->tl, &p) != AH_OK)
        return AH_ERR_NOMEM;
    const char *keep = NULL;
    size_t keep_len = partial_text_keep(w, &keep);
    ah_status st = AH_OK;
    if (p.count > 0 || keep_len > 0) {
        st = open_assistant(w);
        for (size_t i = 0; st == AH_OK && i < p.count; i++)
            st = commit_block(w, p.blocks[i]);
        if (st == AH_OK && keep_len > 0)
            st = ah_conversation_add_text(w->conv, keep, keep_len);
        size_t last = ah_conversation_count(w->conv) - 1;
        if (st == AH_OK && ah_conversation_block_count(w->conv, last) > 0)
            st = ah_conversation_set_partial(w->conv, 1);
        else if (st == AH_OK)
            ah_conversation_truncate(w->conv, last);
    }
    *committed = (int)p.count + (keep_len > 0);
    *discarded = (int)p.dropped_blocks - (keep_len > 0);
    /* The text a display showed (text_delta) and must take back: the unfinished text
     * blocks as emitted — not what the trimmer held or dropped, not the prefix kept, and
     * never a tool call's arguments or reasoning, which were no text_delta. */
    int64_t shown = 0;
    for (size_t i = 0; i < ah_timeline_count(w->tl); i++) {
        const ah_block *b = ah_timeline_block(w->tl, i);
        if (b->kind != AH_BLOCK_TEXT || b->closed)
            continue;
        shown += (int64_t)b->text_len;
        if (w->ov && i == w->ov_block)
            shown -= (int64_t)(ah__overlap_held(w->ov) + ah__overlap_trimmed(w->ov));
    }
    *discarded_bytes = shown - (int64_t)keep_len;
    ah_partial_clear(&p);
    return st;
}

/* The interrupted branch: keep what was complete, tell, ask again (or give up). `granted`
 * is the retry the call's retry machine granted to the break (NULL: a cut after content,
 * continued at once). */
static void continue_stream(ah_worker *w, const ah_error *cause, const ah_call_retry *granted)
{
    int committed, discarded;
    int64_t discarded_bytes;
    if (commit_partial(w, &committed, &discarded, &discarded_bytes) != AH_OK) {
        fail_nomem(w, "history");
        return;
    }
    if (w->continuations >= w->policy.max_continuations) {
        finish(w, AH_OUTCOME_FAILED, cause);
        return;
    }
    /* RESUME (re-attaching to the same response) is decided before this point. Nothing
     * new kept: the history is unchanged, so the next request is this one again. */
    ah_cont_mode mode = committed > 0 ? ah_client_rung(w->client) : AH_CONT_REGENERATE;
    if (!begin_continuation(w, mode, committed, discarded, discarded_bytes, cause->message))
        return;
    if (granted) {
        if (!w->carry)
            w->carry = malloc(sizeof *w->carry);
        if (w->carry)
            *w->carry = *granted; /* the next request waits it out first */
        else
            ah__log(AH_LOG_ERROR, "worker: out of memory keeping a granted retry: the "
                                  "next request starts without its wait");
    }
    w->next_is_continuation = 1;
    ah_timer_start(w->kick, 0);
}

/* An "auto" client's prefill continuation refused with the provider's 400: this is not a
 * fault of the stream, so it is neither a retry nor a continuation. */
static int handles_give_up(void *ud, const ah_error *err)
{
    const ah_worker *w = ud;
    return w->sent_prefill && w->client->continuation == AH_CONTINUATION_AUTO &&
           ah_error_is_prefill_refusal(err);
}

/* ... so the client switches to the prompt rung and the continuation goes out again at
 * once, with the visible prompt after the partial message. */
static void prefill_refused(ah_worker *w)
{
    if (client_learn_prompt(w->client))
        ah__log(AH_LOG_WARN,
                "model '%s' refused an assistant-message prefill (HTTP 400); this client "
                "continues cut streams with a visible prompt from now on",
                w->client->model);
    if (ah_conversation_add_user_text(w->conv, w->continue_prompt) != AH_OK) {
        fail_nomem(w, "history");
        return;
    }
    set_state(w, W_IDLE);
    w->next_is_continuation = 1;
    ah_timer_start(w->kick, 0);
}

static void on_call_finish(void *ud, ah_call *call)
{
    ah_worker *w = ud;
    if (w->state != W_CALLING)
        return;
    if (w->ov_failed) {
        fail_nomem(w, "overlap");
        return;
    }
    /* Re-attaches to the same response were continuations too (they count against
     * max_continuations). */
    w->continuations += ah_call_resumes(call);
    w->stats.continuations += ah_call_resumes(call);
    ah_call_retry granted;
    switch (ah_call_get_state(call)) {
    case AH_CALL_DONE:
        commit_response(w);
        break;
    case AH_CALL_INTERRUPTED:
        emit_call_end(w, "interrupted"); /* a break the call did not ask about */
        if (atomic_load(&w->cancel_requested)) {
            finish_cancelled(w);
        } else if (ah_call_error(call)->kind != AH_EK_STREAM) {
            /* Only a cut stream is continued. The deadline (timeout), the response cap
             * (budget), a body that is not a stream (decode) or a provider error in a
             * JSON body (http) would end the same way again. */
            finish(w, AH_OUTCOME_FAILED, ah_call_error(call));
        } else {
            continue_stream(w, ah_call_error(call),
                            ah_call_retry_granted(call, &granted) ? &granted : NULL);
        }
        break;
    case AH_CALL_CANCELLED:
        finish_cancelled(w);
        break;
    default: /* GAVE_UP */
        if (w->broke) {
            /* A broken stream the retry machine would not let go on: what it completed
             * stays in history (marked partial), as past max_continuations. */
            int committed, discarded;
            int64_t bytes;
            if (commit_partial(w, &committed, &discarded, &bytes) != AH_OK)
                fail_nomem(w, "history");
            else
                finish(w, AH_OUTCOME_FAILED, ah_call_error(call));
        } else if (ah_call_error(call)->kind == AH_EK_CONTEXT_EXCEEDED) {
            context_exceeded(w, ah_call_error(call));
        } else if (!handles_give_up(w, ah_call_error(call))) {
            finish(w, AH_OUTCOME_FAILED, ah_call_error(call));
        } else if (atomic_load(&w->cancel_requested)) {
            finish_cancelled(w);
        } else {
            prefill_refused(w);
        }
        break;
    }
}

/* ---- tools ---------------------------------------------------------------------------------- */

static void free_pending(ah_worker *w)
{
    for (size_t i = 0; i < w->n_pending; i++) {
        free(w->pending[i].id);
        free(w->pending[i].name);
        free(w->pending[i].args);
        free(w->pending[i].content);
    }
    free(w->pending);
    w->pending = NULL;
    w->n_pending = w->n_answered = w->next_tool = 0;
    w->running_tools = w->exclusive_running = 0;
}

static const ah_tool_def *find_tool(const ah_worker *w, const char *name)
{
    for (size_t i = 0; i < w->n_tools; i++)
        if (strcmp(w->tools[i].name, name) == 0)
            return &w->tools[i];
    return NULL;
}

/* A run that ends inside a tool round (cancelled, or failed) still answers every call of
 * the round's assistant message, in call order: a call that answered with its result, one
 * that was running with a tool error saying its effect may or may not have happened, one
 * not started yet with one saying it did not run. Every provider refuses a tool call
 * without a result in the next message, so an unanswered call would make the
 * conversation unusable; and dropping the message instead would hide from the model what
 * the round did (a call that ran, or may have, would be asked for again under a new
 * idempotency key). Out of memory, the round's assistant message is dropped instead: no
 * unanswered call is ever left in history. */
static void close_tool_round(ah_worker *w, ah_run_outcome outcome)
{
    int cancelled = outcome == AH_OUTCOME_CANCELLED;
    const char *running = cancelled ? AH_TOOL_CANCELLED_RUNNING : AH_TOOL_STOPPED_RUNNING;
    const char *waiting = cancelled ? AH_TOOL_CANCELLED_WAITING : AH_TOOL_STOPPED_WAITING;
    size_t msg = ah_conversation_count(w->conv) - 1; /* the round's assistant message */
    for (size_t i = 0; i < w->n_pending; i++) {
        const pending_tool *t = &w->pending[i];
        int done = t->answered && t->content;
        const char *content = done ? t->content : i < w->next_tool ? running : waiting;
        int is_error = done ? t->outcome != AH_TOOL_OK : 1;
        if (ah_conversation_add_tool_result(w->conv, t->id, content, is_error) != AH_OK) {
            ah_conversation_truncate(w->conv, msg);
            ah__log(
                AH_LOG_WARN,
                "worker %s: out of memory answering the tool calls of a stopped round; "
                "its assistant message is left out of history",
                w->run_id);
            return;
        }
    }
}

/* All answers are in: results go to history in call order, then the next step. */
static void tools_complete(ah_worker *w)
{
    size_t before = ah_conversation_count(w->conv);
    for (size_t i = 0; i < w->n_pending; i++) {
        pending_tool *t = &w->pending[i];
        if (ah_conversation_add_tool_result(w->conv, t->id, t->content ? t->content : "",
                                            t->outcome != AH_TOOL_OK) != AH_OK) {
            ah_conversation_truncate(w->conv, before); /* the round is answered whole */
            fail_nomem(w, "tool result");
            return;
        }
    }
    free_pending(w);
    w->answer_start = ah_conversation_count(w->conv);
    if (atomic_load(&w->cancel_requested)) {
        finish_cancelled(w);
        return;
    }
    set_state(w, W_IDLE);
    ah_timer_start(w->kick, 0);
}

static void start_tools(ah_worker *w);

static ah_status answer(ah_worker *w, size_t index, const ah_tool_response *res)
{
    if (w->state != W_TOOLS || index >= w->n_pending || w->pending[index].answered)
        return AH_ERR_STATE;
    pending_tool *t = &w->pending[index];
    t->answered = 1;
    t->outcome = res->outcome;
    /* A tool's bytes go into the next request body: invalid UTF-8 becomes U+FFFD. */
    const char *content = res->content ? res->content : "";
    t->content = ah__utf8_dup(content, strlen(content), NULL);
    w->stats.tool_calls++;
    w->stats.tool_attempts += res->attempts;
    ah_event ev = {.type = AH_EV_TOOL_CALL_END};
    ev.u.tool_call_end.id = t->id;
    ev.u.tool_call_end.name = t->name;
    ev.u.tool_call_end.outcome = res->outcome;
    ev.u.tool_call_end.duplicate = res->duplicate;
    ev.u.tool_call_end.attempts = res->attempts;
    ev.u.tool_call_end.server = t->server;
    emit(w, &ev);
    if (!t->content) {
        fail_nomem(w, "tool result");
        return AH_ERR_NOMEM;
    }
    w->n_answered++;
    w->running_tools--;
    if (t->exclusive)
        w->exclusive_running = 0;
    if (!w->starting && w->state == W_TOOLS)
        start_tools(w); /* a slot is free: the next call, or the end of the round */
    return AH_OK;
}

ah_status ah_worker_tool_done(ah_worker *w, size_t index, const ah_tool_response *res)
{
    if (!w || !res)
        return AH_ERR_INVALID;
    return answer(w, index, res);
}

/* The arguments of a completed response's tool call are JSON already: the timeline
 * parsed them when the block closed (a response with invalid arguments fails). So an
 * object is text whose first non-blank byte is '{', and the tool (the Lua binding's
 * decoder, an embedder's) parses it once, not the worker a second time to look. */
static int args_are_object(const char *json)
{
    while (*json == ' ' || *json == '\t' || *json == '\n' || *json == '\r')
        json++;
    return *json == '{';
}

/* Start one call (its tool_call_start first); it may answer at once. */
static void exec_tool(ah_worker *w, size_t index)
{
    pending_tool *t = &w->pending[index];
    ah_event ev = {.type = AH_EV_TOOL_CALL_START};
    ev.u.tool_call_start.llm_call = w->llm_call;
    ev.u.tool_call_start.id = t->id;
    ev.u.tool_call_start.name = t->name;
    ev.u.tool_call_start.server = t->server;
    emit(w, &ev);
    if (w->state != W_TOOLS)
        return;
    if (atomic_load(&w->cancel_requested)) {
        /* cancelled from the event's hook: the call does not run (answered as not
         * started when the cancel closes the round) */
        w->next_tool = index;
        w->running_tools--;
        if (t->exclusive)
            w->exclusive_running = 0;
        return;
    }
    ah_tool_response res = {.outcome = AH_TOOL_ERROR};
    char why[160];
    const ah_tool_def *def = find_tool(w, t->name);
    if (!def || !w->tool_exec) {
        ah__bufprintf(why, sizeof why, "error: unknown tool '%.60s'", t->name);
        res.content = why;
        answer(w, index, &res);
    } else if (!args_are_object(t->args)) {
        ah__bufprintf(why, sizeof why,
                      "error: the arguments for tool '%.60s' are not a JSON object", t->name);
        res.content = why;
        answer(w, index, &res);
    } else {
        char key[160];
        snprintf(key, sizeof key, "%s:%s", w->run_id, t->id);
        ah_tool_request req = {.index = index,
                               .id = t->id,
                               .name = t->name,
                               .arguments = t->args,
                               .key = key,
                               .run_id = w->run_id,
                               .llm_call = w->llm_call};
        if (w->tool_exec(w->tool_ud, w, &req, &res) == 0)
            answer(w, index, &res);
    }
}

/* Start calls in call order while the bound and exclusivity allow; end the round when
 * every call is answered. Answers given meanwhile (also from inside an exec) only count:
 * this loop, not a nested one, starts the next call. Once a cancel is requested no call
 * starts (an answer may come before the cancel is handled at the loop's next step: the
 * slot it frees stays empty), as no LLM attempt starts after one. */
static void start_tools(ah_worker *w)
{
    w->starting = 1;
    while (w->state == W_TOOLS && w->next_tool < w->n_pending &&
           !atomic_load(&w->cancel_requested)) {
        pending_tool *t = &w->pending[w->next_tool];
        if (w->running_tools >= w->max_tool_concurrency)
            break;
        if (w->running_tools > 0 && (t->exclusive || w->exclusive_running))
            break;
        size_t index = w->next_tool++;
        w->running_tools++;
        if (t->exclusive)
            w->exclusive_running = 1;
        exec_tool(w, index);
    }
    w->starting = 0;
    if (w->state == W_TOOLS && w->n_answered == w->n_pending)
        tools_complete(w);
}

static void run_tools(ah_worker *w, size_t msg)
{
    size_t n = 0, nb = ah_conversation_block_count(w->conv, msg);
    for (size_t i = 0; i < nb; i++)
        n += ah_conversation_block(w->conv, msg, i)->kind == AH_MSG_TOOL_USE;
    w->pending = calloc(n, sizeof *w->pending);
    if (!w->pending) {
        fail_nomem(w, "tools");
        return;
    }
    w->n_pending = n;
    w->n_answered = w->next_tool = 0;
    w->running_tools = w->exclusive_running = 0;
    size_t k = 0;
    for (size_t i = 0; i < nb; i++) {
        const ah_msg_block *b = ah_conversation_block(w->conv, msg, i);
        if (b->kind != AH_MSG_TOOL_USE)
            continue;
        pending_tool *t = &w->pending[k++];
        t->id = ah__strdup(b->id);
        t->name = ah__strdup(b->name);
        t->args = ah__strdup(b->arguments && *b->arguments ? b->arguments : "{}");
        if (!t->id || !t->name || !t->args) {
            fail_nomem(w, "tools");
            return;
        }
        const ah_tool_def *def = find_tool(w, t->name);
        t->exclusive = def && w->tool_exclusive[def - w->tools];
        t->server = def ? w->tool_servers[def - w->tools] : NULL;
    }
    set_state(w, W_TOOLS);
    start_tools(w);
}

/* ---- lifetime and drivers ----------------------------------------------------------------------- */

static void on_cancel(void *ud)
{
    ah_worker *w = ud;
    if (w->state == W_FINISHED)
        return;
    if (w->state == W_CALLING && w->call && !ah_call_finished(w->call)) {
        ah_call_cancel(w->call); /* ends as CANCELLED -> on_call_finish */
        return;
    }
    /* Waiting for tools, between requests, before the first: the run ends now. Tool
     * answers that come later are refused (the round is over); the host stops the
     * bodies it runs (the Lua binding ends their coroutines at run_end). */
    finish_cancelled(w);
}

/* "run_" and the 16 lower-case hex digits of v (what "run_%016llx" gives), cut to size. */
static void run_id_from(char *buf, size_t size, uint64_t v)
{
    char id[21] = "run_";
    for (int i = 0; i < 16; i++)
        id[4 + i] = "0123456789abcdef"[(v >> (60 - 4 * i)) & 15];
    id[20] = '\0';
    ah__bufcpy(buf, size, id);
}

static ah_worker *worker_make(const ah_worker_config *cfg, char *err, size_t errsize,
                              ah_status *st)
{
    *st = AH_ERR_INVALID;
    char dummy[8];
    if (!err) {
        err = dummy;
        errsize = sizeof dummy;
    }
    if (!cfg || !cfg->loop || !cfg->client) {
        ah__bufprintf(err, errsize, "worker: loop and client are required");
        return NULL;
    }
    if (cfg->n_tools > 0 && !cfg->tool_exec) {
        ah__bufprintf(err, errsize, "worker: tools need a tool_exec callback");
        return NULL;
    }
    if (cfg->max_output_retries < 0) {
        ah__bufprintf(err, errsize, "max_output_retries must be >= 0 (got %d)",
                      cfg->max_output_retries);
        return NULL;
    }
    if (cfg->max_tool_concurrency < 0) {
        ah__bufprintf(err, errsize, "max_tool_concurrency must be >= 1 (got %d)",
                      cfg->max_tool_concurrency);
        return NULL;
    }
    if (cfg->max_steps < 0) {
        ah__bufprintf(err, errsize, "max_steps must be >= 1 (got %d)", cfg->max_steps);
        return NULL;
    }
    ah_policy pol;
    if (cfg->policy)
        pol = *cfg->policy;
    else
        ah_policy_init(&pol);
    if (ah_policy_validate(&pol, err, errsize) != AH_OK)
        return NULL;
    ah_worker *w = calloc(1, sizeof *w);
    if (!w)
        goto nomem;
    w->loop = cfg->loop;
    w->client = cfg->client;
    w->policy = pol;
    w->retry_budget = cfg->retry_budget;
    w->rate_limit = cfg->rate_limit;
    w->tool_exec = cfg->tool_exec;
    w->tool_ud = cfg->tool_ud;
    w->on_event = cfg->on_event;
    w->event_ud = cfg->event_ud;
    w->transport = cfg->transport;
    w->max_steps = cfg->max_steps ? cfg->max_steps : 20;
    w->check_output = cfg->check_output;
    w->check_ud = cfg->check_ud;
    w->on_context_exceeded = cfg->on_context_exceeded;
    w->context_ud = cfg->context_ud;
    w->max_output_retries = cfg->max_output_retries;
    w->max_tool_concurrency = cfg->max_tool_concurrency ? cfg->max_tool_concurrency : 8;
    atomic_init(&w->cancel_requested, 0);
    if (cfg->run_id)
        ah__bufcpy(w->run_id, sizeof w->run_id, cfg->run_id);
    else
        run_id_from(w->run_id, sizeof w->run_id,
                    ah_loop_rng(cfg->loop)->next_u64(ah_loop_rng(cfg->loop)->ud));
    w->conv = cfg->history ? ah_conversation_copy(cfg->history) : ah_conversation_new();
    if (!w->conv || !(w->tl = ah_timeline_new()) ||
        !(w->kick = ah_timer_new(w->loop, on_kick, w)) ||
        !(w->cancel_async = ah_async_new(w->loop, on_cancel, w)))
        goto nomem;
    if (cfg->system && ah_conversation_set_system(w->conv, cfg->system) != AH_OK)
        goto nomem;
    if (!(w->continue_prompt = ah__strdup(cfg->continue_prompt ? cfg->continue_prompt
                                                                : AH_CONTINUE_PROMPT_DEFAULT)))
        goto nomem;
    if (cfg->n_tools) {
        w->tools = calloc(cfg->n_tools, sizeof *w->tools);
        w->tool_exclusive = calloc(cfg->n_tools, sizeof *w->tool_exclusive);
        w->tool_servers = calloc(cfg->n_tools, sizeof *w->tool_servers);
        if (!w->tools || !w->tool_exclusive || !w->tool_servers)
            goto nomem;
        for (size_t i = 0; cfg->tool_exclusive && i < cfg->n_tools; i++)
            w->tool_exclusive[i] = cfg->tool_exclusive[i] != 0;
        w->n_tools = cfg->n_tools;
        for (size_t i = 0; cfg->tool_servers && i < cfg->n_tools; i++)
            if (cfg->tool_servers[i] &&
                !(w->tool_servers[i] = ah__strdup(cfg->tool_servers[i])))
                goto nomem;
        for (size_t i = 0; i < cfg->n_tools; i++) {
            const ah_tool_def *t = &cfg->tools[i];
            if (!t->name || !*t->name) {
                ah__bufprintf(err, errsize, "tools[%zu]: name is required", i + 1);
                goto fail;
            }
            char why[200];
            if (ah_tool_schema_check(t->schema_json, why, sizeof why) != AH_OK) {
                ah__bufprintf(err, errsize, "tool '%.64s': schema_json %s", t->name, why);
                goto fail;
            }
            w->tools[i].name = ah__strdup(t->name);
            w->tools[i].description = t->description ? ah__strdup(t->description) : NULL;
            w->tools[i].schema_json = t->schema_json ? ah__strdup(t->schema_json) : NULL;
            if (!w->tools[i].name || (t->description && !w->tools[i].description) ||
                (t->schema_json && !w->tools[i].schema_json))
                goto nomem;
        }
    }
    return w;
nomem:
    *st = AH_ERR_NOMEM;
    ah__bufprintf(err, errsize, "worker: out of memory");
fail:
    ah_worker_free(w);
    return NULL;
}

/* The public form (status, out-pointer, error buffer): see the header. */
ah_status ah_worker_new(const ah_worker_config *cfg, ah_worker **out, char *err,
                        size_t errsize)
{
    ah_status st = AH_OK;
    if (!out) {
        if (err && errsize)
            ah__bufprintf(err, errsize, "ah_worker_new: out is NULL");
        return AH_ERR_INVALID;
    }
    *out = worker_make(cfg, err, errsize, &st);
    return *out ? AH_OK : st;
}

void ah_worker_free(ah_worker *w)
{
    if (!w)
        return;
    ah_call_free(w->call);
    free(w->carry);
    ah_decoder_free(w->dec);
    ah__overlap_free(w->ov);
    ah_timeline_free(w->tl);
    ah_timer_free(w->kick);
    ah_async_free(w->cancel_async);
    ah_conversation_free(w->conv);
    free_pending(w);
    for (size_t i = 0; i < w->n_tools; i++) {
        free((char *)w->tools[i].name);
        free((char *)w->tools[i].description);
        free((char *)w->tools[i].schema_json);
        if (w->tool_servers)
            free(w->tool_servers[i]);
    }
    free(w->tools);
    free(w->tool_exclusive);
    free(w->tool_servers);
    free(w->continue_prompt);
    free(w->text);
    free(w->jbuf);
    ah__eslot_free(&w->error);
    free(w->cancel_reason);
    free(w);
}

static ah_status start_run(ah_worker *w);

ah_status ah_worker_start(ah_worker *w, const char *input)
{
    if (!w || !input)
        return AH_ERR_INVALID;
    if (w->state != W_IDLE || w->llm_call != 0)
        return AH_ERR_STATE;
    if (ah_conversation_add_user_text(w->conv, input) != AH_OK)
        return AH_ERR_NOMEM;
    return start_run(w);
}

ah_status ah_worker_start_blocks(ah_worker *w, const ah_msg_block *blocks, size_t n,
                                 char *err, size_t errsize)
{
    if (!w)
        return AH_ERR_INVALID;
    if (w->state != W_IDLE || w->llm_call != 0)
        return AH_ERR_STATE;
    ah_status st = ah_conversation_add_user_blocks(w->conv, blocks, n, err, errsize);
    if (st != AH_OK)
        return st;
    return start_run(w);
}

static ah_status start_run(ah_worker *w)
{
    /* a conversation's id is its first run's: the prompt_cache_key of all its turns */
    if (!ah_conversation_id(w->conv) && ah_conversation_set_id(w->conv, w->run_id) != AH_OK)
        return AH_ERR_NOMEM;
    w->answer_start = ah_conversation_count(w->conv);
    ah_event ev = {.type = AH_EV_RUN_START};
    ev.u.run_start.run_id = w->run_id;
    emit(w, &ev);
    ah_timer_start(w->kick, 0);
    return AH_OK;
}

ah_run_outcome ah_worker_run(ah_worker *w, const char *input)
{
    if (input && ah_worker_start(w, input) != AH_OK && w->state != W_FINISHED) {
        ah_error e;
        ah_error_set(&e, AH_EK_PERMANENT, 0, "the run could not start");
        finish(w, AH_OUTCOME_FAILED, &e);
    }
    /* The same driver as ah_call_run: step the loop until the run is over. */
    while (w->state != W_FINISHED) {
        if (ah_loop_run_once(w->loop, -1) != AH_OK) {
            ah_error e;
            ah_error_set(&e, AH_EK_PERMANENT, 0, "event loop failed");
            finish(w, AH_OUTCOME_FAILED, &e);
        }
    }
    return w->outcome;
}

void ah_worker_cancel(ah_worker *w)
{
    if (!w)
        return;
    atomic_store(&w->cancel_requested, 1);
    ah_async_send(w->cancel_async);
}

void ah_worker_cancel_with(ah_worker *w, const char *reason)
{
    if (!w)
        return;
    if (!atomic_load(&w->cancel_requested) && reason && *reason &&
        (w->cancel_reason || (w->cancel_reason = malloc(CANCEL_REASON_MAX))))
        ah__bufprintf(w->cancel_reason, CANCEL_REASON_MAX, "cancelled: %s", reason);
    ah_worker_cancel(w);
}

int ah_worker_finished(const ah_worker *w)
{
    return w->state == W_FINISHED;
}

ah_run_outcome ah_worker_outcome(const ah_worker *w)
{
    return w->outcome;
}

const char *ah_worker_stop_reason(const ah_worker *w)
{
    return w ? w->stop_reason : NULL;
}

const ah_error *ah_worker_error(const ah_worker *w)
{
    return ah__eslot_get(&w->error);
}

const char *ah_worker_text(const ah_worker *w)
{
    return w->text_ref ? w->text_ref : w->text ? w->text : "";
}

const ah_conversation *ah_worker_history(const ah_worker *w)
{
    return w->conv;
}

const char *ah_worker_run_id(const ah_worker *w)
{
    return w->run_id;
}

void ah_worker_get_stats(const ah_worker *w, ah_worker_stats *out)
{
    *out = w->stats;
}
