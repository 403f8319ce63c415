/* mcp_client.c - one MCP server on the loop (docs/mcp.md): its state, the era and the
 * handshake, the tool list, the requests in flight and what the server sends.
 *
 * States (mcp_server events): STARTING -> READY; a stdio child that exits -> RESTARTING
 * (the policy's backoff) -> READY again, or FAILED after restart_max restarts within the
 * window; ah_mcp_close -> CLOSED. The handshake, in phases:
 *   PROBE  (auto era) server/discover with the 2026 _meta: a DiscoverResult listing
 *          2026-07-28 means modern; any other answer, or none within the probe's time,
 *          means legacy (stdio: the specification's fallback rule; HTTP: a 4xx whose body
 *          is not a modern JSON-RPC error)
 *   INIT   (legacy) initialize, then notifications/initialized
 *   LIST   tools/list, page by page (nextCursor)
 * Invariants:
 *   - a request is on the pending list from creation until it is answered, failed or
 *     dropped; it is answered at most once (ah__mcp_req_end takes it off first);
 *   - requests of tools wait (QUEUED) while the server is not READY and are sent when it
 *     is; one never sent when the server fails ends as never sent;
 *   - nothing here waits: deadlines and backoffs are loop timers.
 */
#include "mcp_internal.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { PH_NONE, PH_PROBE, PH_INIT, PH_LIST };

const char *ah_mcp_state_name(ah_mcp_state st)
{
    static const char *const names[] = {
#define AH__MCP_ST_NAME(name, s) s,
        AH_MCP_STATE_MAP(AH__MCP_ST_NAME)
#undef AH__MCP_ST_NAME
    };
    if ((int)st < 0 || st >= AH_MCP_STATE_COUNT_)
        return "unknown";
    return names[st];
}

void ah__mcp_log(ah_mcp *s, ah_log_level lvl, const char *fmt, ...)
{
    if (!ah__log_enabled(lvl))
        return;
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    ah__log(lvl, "mcp server '%s': %s", s->name, msg);
}

static void set_reason(ah_mcp *s, const char *why)
{
    free(s->reason);
    s->reason = why ? ah__strdup(why) : NULL;
}

void ah__mcp_set_state(ah_mcp *s, ah_mcp_state st, const char *reason)
{
    if (reason)
        set_reason(s, reason);
    s->state = st;
    ah__mcp_log(s, st == AH_MCP_FAILED ? AH_LOG_WARN : AH_LOG_DEBUG, "%s%s%s",
                ah_mcp_state_name(st), reason ? ": " : "", reason ? reason : "");
    if (!s->on_event)
        return;
    ah_event ev;
    memset(&ev, 0, sizeof ev);
    ev.type = AH_EV_MCP_SERVER;
    ev.ts_ms = ah_loop_wall_ms(s->loop);
    ev.u.mcp_server.server = s->name;
    ev.u.mcp_server.state = ah_mcp_state_name(st);
    ev.u.mcp_server.attempt = s->restarts;
    ev.u.mcp_server.max_attempts = s->restart_max;
    ev.u.mcp_server.protocol = s->protocol[0] ? s->protocol : NULL;
    ev.u.mcp_server.reason = reason;
    s->on_event(s->event_ud, &ev);
}

/* ---- requests ---------------------------------------------------------------------- */

static void link_req(ah_mcp *s, mcp_req *r)
{
    r->prev = NULL;
    r->next = s->pending;
    if (s->pending)
        s->pending->prev = r;
    s->pending = r;
}

static void unlink_req(mcp_req *r)
{
    ah_mcp *s = r->s;
    if (!s)
        return;
    if (r->prev)
        r->prev->next = r->next;
    else if (s->pending == r)
        s->pending = r->next;
    if (r->next)
        r->next->prev = r->prev;
    r->prev = r->next = NULL;
}

static int on_list(const mcp_req *r)
{
    for (const mcp_req *x = r->s ? r->s->pending : NULL; x; x = x->next)
        if (x == r)
            return 1;
    return 0;
}

mcp_req *ah__mcp_req_find(ah_mcp *s, int64_t id)
{
    for (mcp_req *r = s->pending; r; r = r->next)
        if (r->id == id && r->state != RQ_QUEUED)
            return r;
    return NULL;
}

static mcp_req *find_token(ah_mcp *s, int64_t token)
{
    for (mcp_req *r = s->pending; r; r = r->next)
        if (r->progress_token == token)
            return r;
    return NULL;
}

void ah__mcp_req_resume(mcp_req *r, mcp_answer_fn fn)
{
    r->on_answer = fn;
    r->state = RQ_ACCEPTED;
    link_req(r->s, r);
    ah__mcp_http_resume(r->s, r);
}

void ah__mcp_req_free(mcp_req *r)
{
    if (!r)
        return;
    if (r->http && r->s)
        ah__mcp_http_abort(r->s, r);
    if (on_list(r))
        unlink_req(r);
    cJSON_Delete(r->params);
    free(r->method);
    free(r->name);
    free(r->last_event_id);
    free(r);
}

void ah__mcp_req_drop(mcp_req *r)
{
    if (!r)
        return;
    if (r->http && r->s)
        ah__mcp_http_abort(r->s, r);
    if (on_list(r))
        unlink_req(r);
    r->state = RQ_DONE;
    r->on_answer = NULL;
    r->on_progress = NULL;
}

void ah__mcp_req_end(mcp_req *r, const cJSON *result, const cJSON *rpc_error,
                     const ah_error *fail)
{
    if (r->state == RQ_DONE)
        return;
    if (r->http && r->s)
        ah__mcp_http_abort(r->s, r);
    unlink_req(r);
    r->state = RQ_DONE;
    mcp_answer_fn fn = r->on_answer;
    r->on_answer = NULL;
    int keep = r->keep;
    if (fn)
        fn(r->ud, r, result, rpc_error, fail);
    if (!keep)
        ah__mcp_req_free(r);
}

void ah__mcp_req_send(mcp_req *r)
{
    ah_mcp *s = r->s;
    r->state = RQ_SENDING;
    if (s->http) {
        ah__mcp_http_send(s, r);
        return;
    }
    char *msg = ah__mcp_encode(r->id, r->method, r->params, s->modern);
    if (!msg) {
        ah_error e;
        ah_error_set(&e, AH_EK_PERMANENT, 0, "out of memory encoding a request");
        ah__mcp_req_end(r, NULL, NULL, &e);
        return;
    }
    int rc = ah__mcp_stdio_write(s, msg, r);
    free(msg);
    if (rc != 0) {
        ah_error e;
        ah_error_set(&e, AH_EK_TRANSIENT, 0,
                     "never sent: server '%s' is not running (its stdin is closed)", s->name);
        ah__mcp_req_end(r, NULL, NULL, &e);
    }
}

mcp_req *ah__mcp_request(ah_mcp *s, const char *method, cJSON *params, int internal,
                         mcp_answer_fn fn, mcp_progress_fn progress, void *ud)
{
    mcp_req *r = calloc(1, sizeof *r);
    if (!r || !(r->method = ah__strdup(method))) {
        free(r);
        cJSON_Delete(params);
        return NULL;
    }
    r->s = s;
    r->id = ++s->next_id;
    r->params = params;
    r->internal = internal;
    r->retry_ms = -1;
    r->on_answer = fn;
    r->on_progress = progress;
    r->ud = ud;
    const cJSON *n = params ? cJSON_GetObjectItemCaseSensitive(params, "name") : NULL;
    if (cJSON_IsString(n))
        r->name = ah__strdup(n->valuestring);
    const cJSON *meta = params ? cJSON_GetObjectItemCaseSensitive(params, "_meta") : NULL;
    const cJSON *tok = meta ? cJSON_GetObjectItemCaseSensitive(meta, "progressToken") : NULL;
    if (cJSON_IsNumber(tok))
        r->progress_token = (int64_t)tok->valuedouble;
    r->state = RQ_QUEUED;
    link_req(s, r);
    if (internal || s->state == AH_MCP_READY)
        ah__mcp_req_send(r);
    return r;
}

void ah__mcp_send_cancelled(ah_mcp *s, mcp_req *r, const char *reason)
{
    if (s->state == AH_MCP_CLOSED || r->state == RQ_QUEUED ||
        (r->state == RQ_SENDING && !s->http))
        return; /* it never reached the server */
    cJSON *p = cJSON_CreateObject();
    if (!p)
        return;
    cJSON_AddNumberToObject(p, "requestId", (double)r->id);
    cJSON_AddStringToObject(p, "reason", reason ? reason : "cancelled");
    char *msg = ah__mcp_encode(-1, "notifications/cancelled", p, 0);
    cJSON_Delete(p);
    if (!msg)
        return;
    if (s->http)
        ah__mcp_http_post(s, msg, "notifications/cancelled");
    else
        ah__mcp_stdio_write(s, msg, NULL);
    free(msg);
}

/* Fail every pending request of the tools (never the server's own) with e, or only the
 * queued ones (never sent). */
static void fail_pending(ah_mcp *s, const ah_error *sent_err, const ah_error *queued_err)
{
    mcp_req *r = s->pending;
    while (r) {
        mcp_req *next = r->next;
        if (r->internal) {
            ah__mcp_req_free(r);
        } else if (r->state == RQ_QUEUED || r->state == RQ_SENDING) {
            if (queued_err)
                ah__mcp_req_end(r, NULL, NULL, queued_err);
            else
                r->state = RQ_QUEUED; /* sent again once the server is back */
        } else if (sent_err) {
            ah__mcp_req_end(r, NULL, NULL, sent_err);
        }
        r = next;
    }
}

/* ---- tools -------------------------------------------------------------------------- */

static void free_tools(mcp_tool_rec *t, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        free(t[i].name);
        free(t[i].title);
        free(t[i].description);
        free(t[i].schema);
        free(t[i].annotations);
        cJSON_Delete(t[i].param_headers);
    }
    free(t);
}

static int hint(const cJSON *ann, const char *k)
{
    const cJSON *v = ann ? cJSON_GetObjectItemCaseSensitive(ann, k) : NULL;
    return cJSON_IsBool(v) ? cJSON_IsTrue(v) : -1;
}

static char *opt_str(const cJSON *o, const char *k)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
    return cJSON_IsString(v) ? ah__strdup(v->valuestring) : NULL;
}

/* Install the gathered list: a tool without a name or whose inputSchema is not an
 * object is left out, with a warning naming it; a repeated name keeps the first. */
static void install_tools(ah_mcp *s)
{
    int n = cJSON_GetArraySize(s->listing);
    mcp_tool_rec *recs = calloc(n > 0 ? (size_t)n : 1, sizeof *recs);
    size_t k = 0;
    if (!recs)
        return;
    const cJSON *t;
    cJSON_ArrayForEach(t, s->listing)
    {
        const cJSON *name = cJSON_GetObjectItemCaseSensitive(t, "name");
        const cJSON *schema = cJSON_GetObjectItemCaseSensitive(t, "inputSchema");
        if (!cJSON_IsString(name) || !name->valuestring[0]) {
            ah__mcp_log(s, AH_LOG_WARN, "a listed tool has no name: left out");
            continue;
        }
        if (!cJSON_IsObject(schema)) {
            ah__mcp_log(s, AH_LOG_WARN,
                        "tool '%.80s': its inputSchema is not a JSON object: left out",
                        name->valuestring);
            continue;
        }
        int dup = 0;
        for (size_t i = 0; i < k; i++)
            dup |= strcmp(recs[i].name, name->valuestring) == 0;
        if (dup) {
            ah__mcp_log(s, AH_LOG_WARN, "tool '%.80s' is listed twice: the first is kept",
                        name->valuestring);
            continue;
        }
        /* 2026-07-28 over HTTP: parameters mirrored into Mcp-Param-* headers; a tool
         * whose declarations break the rules must be left out */
        cJSON *params = NULL;
        char why[200];
        if (s->http && s->modern && ah__mcp_param_decls(schema, &params, why, sizeof why)) {
            ah__mcp_log(s, AH_LOG_WARN, "tool '%.80s': %s: left out", name->valuestring, why);
            continue;
        }
        mcp_tool_rec *r = &recs[k];
        r->param_headers = params;
        const cJSON *ann = cJSON_GetObjectItemCaseSensitive(t, "annotations");
        r->name = ah__strdup(name->valuestring);
        r->title = opt_str(t, "title");
        if (!r->title && cJSON_IsObject(ann))
            r->title = opt_str(ann, "title");
        r->description = opt_str(t, "description");
        r->schema = cJSON_PrintUnformatted(schema);
        r->annotations = cJSON_IsObject(ann) ? cJSON_PrintUnformatted(ann) : NULL;
        if (!r->name || !r->schema) {
            free_tools(recs, k + 1);
            return;
        }
        r->t.name = r->name;
        r->t.title = r->title;
        r->t.description = r->description;
        r->t.schema_json = r->schema;
        r->t.annotations_json = r->annotations;
        r->t.read_only = hint(ann, "readOnlyHint");
        r->t.idempotent = hint(ann, "idempotentHint");
        r->t.destructive = hint(ann, "destructiveHint");
        r->t.open_world = hint(ann, "openWorldHint");
        k++;
    }
    free_tools(s->tools, s->n_tools);
    s->tools = recs;
    s->n_tools = k;
    s->tools_version++;
}

/* ---- the handshake ------------------------------------------------------------------ */

static void begin_handshake(ah_mcp *s);
static void list_tools(ah_mcp *s, const char *cursor);

/* The server became usable: queued requests go out. */
static void became_ready(ah_mcp *s)
{
    ah_timer_stop(s->timer);
    s->phase = PH_NONE;
    s->ever_ready = 1;
    int was_ready = s->state == AH_MCP_READY;
    s->state = AH_MCP_READY;
    if (!was_ready) {
        set_reason(s, NULL);
        ah__mcp_set_state(s, AH_MCP_READY, NULL);
    }
    for (mcp_req *r = s->pending; r;) {
        mcp_req *next = r->next;
        if (r->state == RQ_QUEUED)
            ah__mcp_req_send(r);
        r = next;
    }
}

static void restart_or_fail(ah_mcp *s, const char *why);

/* The handshake cannot go on: a fault of the way there (never sent, cut) may be
 * retried like a crash; an answer that refuses us fails the server. */
static void handshake_failed(ah_mcp *s, const char *what, const cJSON *rpc_error,
                             const ah_error *fail)
{
    char why[600];
    if (rpc_error) {
        const cJSON *m = cJSON_GetObjectItemCaseSensitive(rpc_error, "message");
        const cJSON *c = cJSON_GetObjectItemCaseSensitive(rpc_error, "code");
        ah__bufprintf(why, sizeof why, "%s refused: %s (code %d)", what,
                      cJSON_IsString(m) ? m->valuestring : "?",
                      cJSON_IsNumber(c) ? c->valueint : 0);
    } else {
        ah__bufprintf(why, sizeof why, "%s failed: %s", what, fail ? fail->message : "?");
    }
    if (s->stdio && !rpc_error && !(fail && fail->kind == AH_EK_PERMANENT))
        return; /* the child is gone: its exit restarts it (ah__mcp_child_gone) */
    s->phase = PH_NONE;
    if (rpc_error || (fail && fail->kind == AH_EK_PERMANENT)) {
        ah_timer_stop(s->timer);
        if (s->stdio)
            ah__mcp_stdio_free(s);
        ah_error e;
        ah_error_set(&e, AH_EK_PERMANENT, 0, "server '%s' failed: %s", s->name, why);
        ah__mcp_set_state(s, AH_MCP_FAILED, why);
        fail_pending(s, &e, &e);
        return;
    }
    restart_or_fail(s, why);
}

static void on_list_page(void *ud, mcp_req *r, const cJSON *result, const cJSON *rpc_error,
                         const ah_error *fail)
{
    (void)r;
    ah_mcp *s = ud;
    if (!result) {
        handshake_failed(s, "tools/list", rpc_error, fail);
        return;
    }
    const cJSON *tools = cJSON_GetObjectItemCaseSensitive(result, "tools");
    const cJSON *t;
    if (!s->listing)
        s->listing = cJSON_CreateArray();
    cJSON_ArrayForEach(t, tools)
    {
        cJSON *c = cJSON_Duplicate(t, 1);
        if (c && s->listing)
            cJSON_AddItemToArray(s->listing, c);
        else
            cJSON_Delete(c);
    }
    const cJSON *next = cJSON_GetObjectItemCaseSensitive(result, "nextCursor");
    if (cJSON_IsString(next) && next->valuestring[0] && cJSON_GetArraySize(s->listing) < 10000) {
        list_tools(s, next->valuestring);
        return;
    }
    install_tools(s);
    cJSON_Delete(s->listing);
    s->listing = NULL;
    became_ready(s);
}

static void list_tools(ah_mcp *s, const char *cursor)
{
    cJSON *p = cJSON_CreateObject();
    if (p && cursor)
        cJSON_AddStringToObject(p, "cursor", cursor);
    if (!cursor) {
        cJSON_Delete(s->listing);
        s->listing = NULL;
    }
    s->phase = PH_LIST;
    if (!ah__mcp_request(s, "tools/list", p, 1, on_list_page, NULL, s)) {
        ah_error e;
        ah_error_set(&e, AH_EK_PERMANENT, 0, "out of memory");
        handshake_failed(s, "tools/list", NULL, &e);
    }
}

static void on_initialize(void *ud, mcp_req *r, const cJSON *result,
                          const cJSON *rpc_error, const ah_error *fail)
{
    (void)r;
    ah_mcp *s = ud;
    if (!result) {
        handshake_failed(s, "initialize", rpc_error, fail);
        return;
    }
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(result, "protocolVersion");
    if (!cJSON_IsString(v) || !ah__mcp_is_legacy_version(v->valuestring)) {
        ah_error e;
        ah_error_set(&e, AH_EK_PERMANENT, 0,
                     "the server answered with protocol version %.40s, which agenthost "
                     "does not speak (it speaks 2025-11-25, 2025-06-18, 2025-03-26 and "
                     "2026-07-28)",
                     cJSON_IsString(v) ? v->valuestring : "(none)");
        handshake_failed(s, "initialize", NULL, &e);
        return;
    }
    ah__bufprintf(s->protocol, sizeof s->protocol, "%s", v->valuestring);
    const cJSON *info = cJSON_GetObjectItemCaseSensitive(result, "serverInfo");
    const cJSON *nm = cJSON_GetObjectItemCaseSensitive(info, "name");
    const cJSON *ver = cJSON_GetObjectItemCaseSensitive(info, "version");
    if (cJSON_IsString(nm)) {
        char buf[256];
        ah__bufprintf(buf, sizeof buf, "%s%s%s", nm->valuestring, cJSON_IsString(ver) ? " " : "",
                      cJSON_IsString(ver) ? ver->valuestring : "");
        free(s->server_info);
        s->server_info = ah__strdup(buf);
    }
    char *msg = ah__mcp_encode(-1, "notifications/initialized", NULL, 0);
    if (msg) {
        if (s->http)
            ah__mcp_http_post(s, msg, "notifications/initialized");
        else
            ah__mcp_stdio_write(s, msg, NULL);
        free(msg);
    }
    list_tools(s, NULL);
}

static void initialize(ah_mcp *s)
{
    s->modern = 0;
    s->phase = PH_INIT;
    cJSON *p = cJSON_CreateObject();
    if (p) {
        cJSON_AddStringToObject(p, "protocolVersion",
                                s->want && ah__mcp_is_legacy_version(s->want)
                                    ? s->want
                                    : AH_MCP_PROTOCOL_2025);
        cJSON_AddObjectToObject(p, "capabilities");
        cJSON *info = cJSON_AddObjectToObject(p, "clientInfo");
        if (info) {
            cJSON_AddStringToObject(info, "name", "agenthost");
            cJSON_AddStringToObject(info, "version", AH_VERSION_STRING);
        }
    }
    if (!ah__mcp_request(s, "initialize", p, 1, on_initialize, NULL, s)) {
        ah_error e;
        ah_error_set(&e, AH_EK_PERMANENT, 0, "out of memory");
        handshake_failed(s, "initialize", NULL, &e);
    }
}

static int lists(const cJSON *arr, const char *v)
{
    const cJSON *x;
    cJSON_ArrayForEach(x, arr)
    {
        if (cJSON_IsString(x) && strcmp(x->valuestring, v) == 0)
            return 1;
    }
    return 0;
}

static void on_discover(void *ud, mcp_req *r, const cJSON *result, const cJSON *rpc_error,
                        const ah_error *fail)
{
    (void)r;
    ah_mcp *s = ud;
    if (result && lists(cJSON_GetObjectItemCaseSensitive(result, "supportedVersions"),
                        AH_MCP_PROTOCOL_2026)) {
        s->modern = 1;
        ah__bufprintf(s->protocol, sizeof s->protocol, "%s", AH_MCP_PROTOCOL_2026);
        const cJSON *meta = cJSON_GetObjectItemCaseSensitive(result, "_meta");
        const cJSON *info =
            cJSON_GetObjectItemCaseSensitive(meta, "io.modelcontextprotocol/serverInfo");
        const cJSON *nm = cJSON_GetObjectItemCaseSensitive(info, "name");
        if (cJSON_IsString(nm)) {
            free(s->server_info);
            s->server_info = ah__strdup(nm->valuestring);
        }
        list_tools(s, NULL);
        return;
    }
    const cJSON *code = rpc_error ? cJSON_GetObjectItemCaseSensitive(rpc_error, "code") : NULL;
    if (cJSON_IsNumber(code) && ah__mcp_modern_error(code->valueint)) {
        /* A modern server that does not speak our modern revision: the specification
         * says not to fall back, unless it offers a legacy one we speak. */
        const cJSON *data = cJSON_GetObjectItemCaseSensitive(rpc_error, "data");
        const cJSON *sup = cJSON_GetObjectItemCaseSensitive(data, "supported");
        if (!lists(sup, AH_MCP_PROTOCOL_2025) && !lists(sup, "2025-06-18")) {
            handshake_failed(s, "server/discover", rpc_error, NULL);
            return;
        }
    }
    if (fail && fail->kind == AH_EK_TRANSIENT && s->http) {
        /* never reached the server (connect refused, 429/503): not an answer */
        handshake_failed(s, "server/discover", NULL, fail);
        return;
    }
    if (s->want && strcmp(s->want, AH_MCP_PROTOCOL_2026) == 0) {
        handshake_failed(s, "server/discover (protocol 2026-07-28 required)", rpc_error,
                         fail);
        return;
    }
    ah__mcp_log(s, AH_LOG_DEBUG, "server/discover: not a modern server; initialize");
    initialize(s);
}

static void handshake_timeout(void *ud)
{
    ah_mcp *s = ud;
    if (s->state == AH_MCP_CLOSED || s->state == AH_MCP_FAILED)
        return;
    if (s->phase == PH_NONE) {
        /* the restart's backoff is over */
        char err[256];
        if (s->stdio) {
            if (ah__mcp_stdio_spawn(s, err, sizeof err) != 0) {
                ah_error e;
                ah_error_set(&e, AH_EK_PERMANENT, 0, "server '%s' failed: %s", s->name,
                             err);
                ah__mcp_set_state(s, AH_MCP_FAILED, err);
                fail_pending(s, &e, &e);
            }
            /* ah__mcp_connected begins the handshake */
        } else {
            begin_handshake(s);
        }
        return;
    }
    if (s->phase == PH_PROBE && s->stdio) {
        /* A legacy server may ignore a method it does not know before initialize:
         * silence is its answer (the specification's fallback), on the same process. */
        for (mcp_req *r = s->pending; r; r = r->next)
            if (r->internal) {
                ah__mcp_req_drop(r);
                ah__mcp_req_free(r);
                break;
            }
        ah_timer_start(s->timer, s->init_timeout_ms);
        initialize(s);
        return;
    }
    char why[200];
    ah__bufprintf(why, sizeof why, "no answer to %s within %lld ms",
                  s->phase == PH_LIST   ? "tools/list"
                  : s->phase == PH_INIT ? "initialize"
                                        : "server/discover",
                  (long long)s->init_timeout_ms);
    for (mcp_req *r = s->pending; r;) {
        mcp_req *next = r->next;
        if (r->internal)
            ah__mcp_req_free(r);
        r = next;
    }
    s->phase = PH_NONE;
    if (s->stdio)
        ah__mcp_stdio_free(s);
    ah_error e;
    ah_error_set(&e, AH_EK_PERMANENT, 0, "server '%s' failed: %s", s->name, why);
    ah__mcp_set_state(s, AH_MCP_FAILED, why);
    fail_pending(s, &e, &e);
}

static void begin_handshake(ah_mcp *s)
{
    int probe = !s->want || strcmp(s->want, AH_MCP_PROTOCOL_2026) == 0;
    if (s->http)
        ah__mcp_http_forget_session(s); /* a new handshake is a new session */
    s->modern = 0;
    s->protocol[0] = '\0';
    /* a silent probe on stdio falls back sooner than a whole handshake times out */
    ah_timer_start(s->timer, probe && s->stdio && s->init_timeout_ms > 5000
                                 ? 5000
                                 : s->init_timeout_ms);
    if (!probe) {
        initialize(s);
        return;
    }
    s->phase = PH_PROBE;
    s->modern = 1; /* the probe itself carries the modern _meta */
    mcp_req *r = ah__mcp_request(s, "server/discover", NULL, 1, on_discover, NULL, s);
    s->modern = 0;
    if (!r) {
        ah_error e;
        ah_error_set(&e, AH_EK_PERMANENT, 0, "out of memory");
        handshake_failed(s, "server/discover", NULL, &e);
    }
}

void ah__mcp_connected(ah_mcp *s)
{
    begin_handshake(s);
}

/* ---- supervision -------------------------------------------------------------------- */

/* Restarts within the window, this one included. */
static int count_restart(ah_mcp *s)
{
    int64_t now = ah_loop_now_ms(s->loop);
    int n = (int)(sizeof s->restarts_at / sizeof s->restarts_at[0]);
    int in = 0, slot = -1;
    for (int i = 0; i < n; i++) {
        if (s->restarts_at[i] && now - s->restarts_at[i] < s->restart_window_ms)
            in++;
        else if (slot < 0)
            slot = i;
    }
    if (slot < 0)
        slot = 0;
    s->restarts_at[slot] = now ? now : 1;
    return in + 1;
}

static void restart_or_fail(ah_mcp *s, const char *why)
{
    if (s->closing) {
        ah__mcp_set_state(s, AH_MCP_CLOSED, why);
        ah_error e;
        ah_error_set(&e, AH_EK_CANCELLED, 0, "server '%s' was closed", s->name);
        fail_pending(s, &e, &e);
        return;
    }
    int n = count_restart(s);
    if (n > s->restart_max) {
        char r[700];
        ah__bufprintf(r, sizeof r, "%s; %d restarts within %lld s: given up", why,
                      s->restart_max, (long long)(s->restart_window_ms / 1000));
        ah_error e;
        ah_error_set(&e, AH_EK_PERMANENT, 0, "server '%s' failed: %s", s->name, r);
        ah_timer_stop(s->timer);
        ah__mcp_set_state(s, AH_MCP_FAILED, r);
        fail_pending(s, &e, &e);
        return;
    }
    s->restarts = n;
    s->total_restarts++;
    /* the same retry machine as every call: the policy's backoff for restart n */
    ah_error e;
    ah_error_set(&e, AH_EK_TRANSIENT, 0, "%s", why);
    ah_policy p = s->policy;
    p.max_attempts = s->restart_max + 1;
    p.deadline_ms = 0;
    p.retry_on = NULL;
    ah_decision d = ah_backoff_decide(&p, &e, n, 0, 0, ah_loop_rng(s->loop), NULL);
    int64_t wait = d.retry ? d.wait_ms : p.base_ms;
    s->phase = PH_NONE;
    ah__mcp_set_state(s, AH_MCP_RESTARTING, why);
    ah_timer_start(s->timer, wait);
}

void ah__mcp_child_gone(ah_mcp *s, const char *why)
{
    char msg[400];
    ah__bufprintf(msg, sizeof msg,
                  "server '%s' %s while the call was in flight; its effect may or may not "
                  "have happened",
                  s->name, why);
    ah_error unknown;
    ah_error_set(&unknown, AH_EK_OUTCOME_UNKNOWN, 0, "%s", msg);
    int in_handshake = s->phase != PH_NONE;
    fail_pending(s, &unknown, NULL); /* the queued ones wait for the next process */
    if (s->state == AH_MCP_FAILED)
        return;
    if (in_handshake)
        s->phase = PH_NONE;
    restart_or_fail(s, why);
}

void ah__mcp_session_lost(ah_mcp *s, mcp_req *r)
{
    if (r->internal || r->session_retries >= 1) {
        ah_error e;
        ah_error_set(&e, r->internal ? AH_EK_TRANSIENT : AH_EK_MCP_SESSION, 404,
                     "never sent: server '%s' answered 404 for the session twice in a row",
                     s->name);
        ah__mcp_req_end(r, NULL, NULL, &e);
        return;
    }
    r->session_retries++;
    r->state = RQ_QUEUED;
    ah__mcp_http_forget_session(s);
    if (s->phase == PH_NONE) {
        ah__mcp_log(s, AH_LOG_INFO, "the session expired (HTTP 404): a new session");
        s->state = AH_MCP_STARTING; /* quietly: calls wait for the new session */
        for (mcp_req *x = s->pending; x; x = x->next)
            if (!x->internal && x->state != RQ_QUEUED && x != r && !x->http)
                x->state = RQ_QUEUED;
        begin_handshake(s);
    }
}

int ah__mcp_header_mismatch(ah_mcp *s, mcp_req *r)
{
    if (r->internal || r->header_retried || !s->http || !s->modern ||
        strcmp(r->method, "tools/call") != 0)
        return -1;
    r->header_retried = 1;
    r->state = RQ_QUEUED;
    if (s->phase == PH_NONE) {
        ah__mcp_log(s, AH_LOG_INFO, "tool '%.80s': the server says its Mcp-Param headers do "
                                    "not match (-32020): listing the tools again",
                    r->name ? r->name : "?");
        s->state = AH_MCP_STARTING; /* quietly: calls wait for the new list */
        list_tools(s, NULL);
    }
    return 0;
}

/* ---- what the server sends --------------------------------------------------------- */

static void reply(ah_mcp *s, const cJSON *id, int ok)
{
    cJSON *m = cJSON_CreateObject();
    if (!m)
        return;
    cJSON_AddStringToObject(m, "jsonrpc", "2.0");
    cJSON_AddItemToObject(m, "id", cJSON_Duplicate(id, 0));
    if (ok) {
        cJSON_AddObjectToObject(m, "result");
    } else {
        cJSON *e = cJSON_AddObjectToObject(m, "error");
        if (e) {
            cJSON_AddNumberToObject(e, "code", -32601);
            cJSON_AddStringToObject(e, "message", "Method not found (agenthost offers no "
                                                  "client features)");
        }
    }
    char *msg = cJSON_PrintUnformatted(m);
    cJSON_Delete(m);
    if (!msg)
        return;
    if (s->http)
        ah__mcp_http_post(s, msg, NULL);
    else
        ah__mcp_stdio_write(s, msg, NULL);
    free(msg);
}

static double num_or_nan(const cJSON *o, const char *k)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
    return cJSON_IsNumber(v) ? v->valuedouble : NAN;
}

static void on_notification(ah_mcp *s, const char *method, const cJSON *params)
{
    if (strcmp(method, "notifications/progress") == 0) {
        const cJSON *tok = cJSON_GetObjectItemCaseSensitive(params, "progressToken");
        int64_t id = -1;
        if (cJSON_IsNumber(tok))
            id = (int64_t)tok->valuedouble;
        else if (cJSON_IsString(tok))
            id = strtoll(tok->valuestring, NULL, 10);
        mcp_req *r = id > 0 ? find_token(s, id) : NULL;
        const cJSON *m = cJSON_GetObjectItemCaseSensitive(params, "message");
        if (r && r->on_progress)
            r->on_progress(r->ud, r, num_or_nan(params, "progress"),
                           num_or_nan(params, "total"), cJSON_IsString(m) ? m->valuestring : NULL);
    } else if (strcmp(method, "notifications/tools/list_changed") == 0) {
        if (s->state == AH_MCP_READY && s->phase == PH_NONE)
            list_tools(s, NULL);
    } else if (strcmp(method, "notifications/message") == 0) {
        const cJSON *d = cJSON_GetObjectItemCaseSensitive(params, "data");
        char *t = d ? cJSON_PrintUnformatted(d) : NULL;
        ah__mcp_log(s, AH_LOG_INFO, "%.1000s", t ? t : "(log message)");
        free(t);
    }
}

void ah__mcp_receive(ah_mcp *s, const char *json, size_t len)
{
    cJSON *m = cJSON_ParseWithLength(json, len);
    if (!m) {
        ah__mcp_log(s, AH_LOG_WARN, "sent something that is not JSON (%zu bytes): dropped",
                    len);
        return;
    }
    int64_t id;
    mcp_kind k = ah__mcp_classify(m, &id);
    switch (k) {
    case MCP_MSG_RESPONSE:
    case MCP_MSG_ERROR: {
        mcp_req *r = id >= 0 ? ah__mcp_req_find(s, id) : NULL;
        if (!r) {
            ah__mcp_log(s, AH_LOG_DEBUG, "an answer to no request in flight (id %lld)",
                        (long long)id);
            break;
        }
        if (k == MCP_MSG_RESPONSE)
            ah__mcp_req_end(r, cJSON_GetObjectItemCaseSensitive(m, "result"), NULL, NULL);
        else
            ah__mcp_req_end(r, NULL, cJSON_GetObjectItemCaseSensitive(m, "error"), NULL);
        break;
    }
    case MCP_MSG_NOTIFICATION:
        on_notification(s, cJSON_GetObjectItemCaseSensitive(m, "method")->valuestring,
                        cJSON_GetObjectItemCaseSensitive(m, "params"));
        break;
    case MCP_MSG_REQUEST: {
        const char *method = cJSON_GetObjectItemCaseSensitive(m, "method")->valuestring;
        reply(s, cJSON_GetObjectItemCaseSensitive(m, "id"), strcmp(method, "ping") == 0);
        break;
    }
    default:
        ah__mcp_log(s, AH_LOG_WARN, "sent a JSON value that is not a JSON-RPC message: "
                                    "dropped");
        break;
    }
    cJSON_Delete(m);
}

/* ---- the public surface ------------------------------------------------------------ */

static int valid_name(const char *n)
{
    size_t len = n ? strlen(n) : 0;
    if (len < 1 || len > 64)
        return 0;
    for (const char *p = n; *p; p++)
        if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
              (*p >= '0' && *p <= '9') || *p == '_' || *p == '-'))
            return 0;
    return 1;
}

ah_status ah_mcp_new(const ah_mcp_config *cfg, ah_mcp **out, char *err, size_t errsize)
{
    char dummy[8];
    if (!err || !errsize) {
        err = dummy;
        errsize = sizeof dummy;
    }
    if (!out) {
        ah__bufprintf(err, errsize, "ah_mcp_new: out is NULL");
        return AH_ERR_INVALID;
    }
    *out = NULL;
    if (!cfg || !cfg->loop) {
        ah__bufprintf(err, errsize, "ah.mcp: loop is required");
        return AH_ERR_INVALID;
    }
    if (!valid_name(cfg->name)) {
        ah__bufprintf(err, errsize,
                      "ah.mcp: name must be 1 to 64 of [A-Za-z0-9_-] (got '%.80s')",
                      cfg->name ? cfg->name : "");
        return AH_ERR_INVALID;
    }
    if ((!cfg->command || !cfg->command[0]) == !cfg->url) {
        ah__bufprintf(err, errsize, "ah.mcp '%s': give exactly one of command and url",
                      cfg->name);
        return AH_ERR_INVALID;
    }
    if (cfg->protocol && strcmp(cfg->protocol, "auto") != 0 &&
        strcmp(cfg->protocol, AH_MCP_PROTOCOL_2026) != 0 &&
        !ah__mcp_is_legacy_version(cfg->protocol)) {
        ah__bufprintf(err, errsize,
                      "ah.mcp '%s': protocol must be \"auto\", \"2026-07-28\", "
                      "\"2025-11-25\" or \"2025-06-18\" (got '%.40s')",
                      cfg->name, cfg->protocol);
        return AH_ERR_INVALID;
    }
    if (cfg->policy) {
        char why[200];
        if (ah_policy_validate(cfg->policy, why, sizeof why) != AH_OK) {
            ah__bufprintf(err, errsize, "ah.mcp '%s': policy: %s", cfg->name, why);
            return AH_ERR_INVALID;
        }
    }
    ah_mcp *s = calloc(1, sizeof *s);
    if (!s) {
        ah__bufprintf(err, errsize, "out of memory");
        return AH_ERR_NOMEM;
    }
    s->loop = cfg->loop;
    s->name = ah__strdup(cfg->name);
    s->want = cfg->protocol && strcmp(cfg->protocol, "auto") != 0 ? ah__strdup(cfg->protocol)
                                                                   : NULL;
    s->trust = cfg->trust;
    if (cfg->policy)
        s->policy = *cfg->policy;
    else
        ah_policy_init(&s->policy);
    s->policy.retry_on = NULL; /* a call's own */
    s->timeout_ms = cfg->timeout_ms > 0 ? cfg->timeout_ms : 60000;
    s->init_timeout_ms = cfg->init_timeout_ms > 0 ? cfg->init_timeout_ms : 30000;
    s->restart_max = cfg->restart_max > 0 ? cfg->restart_max : 5;
    if (s->restart_max > 15)
        s->restart_max = 15;
    s->restart_window_ms = cfg->restart_window_ms > 0 ? cfg->restart_window_ms : 60000;
    s->on_event = cfg->on_event;
    s->event_ud = cfg->event_ud;
    s->on_stderr = cfg->on_stderr;
    s->stderr_ud = cfg->stderr_ud;
    s->timer = ah_timer_new(s->loop, handshake_timeout, s);
    s->state = AH_MCP_STARTING;
    if (!s->name || !s->timer || (cfg->protocol && strcmp(cfg->protocol, "auto") && !s->want)) {
        ah__bufprintf(err, errsize, "out of memory");
        ah_mcp_free(s);
        return AH_ERR_NOMEM;
    }
    int rc = cfg->url ? ah__mcp_http_new(s, cfg, err, errsize)
                      : ah__mcp_stdio_new(s, cfg, err, errsize);
    if (rc != 0) {
        ah_mcp_free(s);
        return AH_ERR_INVALID;
    }
    ah__mcp_set_state(s, AH_MCP_STARTING, NULL);
    if (s->http) {
        begin_handshake(s);
    } else {
        char why[300];
        if (ah__mcp_stdio_spawn(s, why, sizeof why) != 0) {
            /* a server that cannot be started is a failed server, not a crashed run */
            ah__mcp_set_state(s, AH_MCP_FAILED, why);
        }
    }
    *out = s;
    return AH_OK;
}

static void session_ended(ah_mcp *s)
{
    if (s->state != AH_MCP_CLOSED)
        ah__mcp_set_state(s, AH_MCP_CLOSED, NULL);
}

void ah_mcp_close(ah_mcp *s)
{
    if (!s || s->closing)
        return;
    s->closing = 1;
    ah_timer_stop(s->timer);
    ah_error e;
    ah_error_set(&e, AH_EK_CANCELLED, 0, "server '%s' was closed", s->name);
    fail_pending(s, &e, &e);
    if (s->stdio && ah__mcp_stdio_alive(s)) {
        ah__mcp_stdio_close(s); /* CLOSED once the child has exited */
        return;
    }
    /* a 2025 session is ended with DELETE (2025-11-25 basic/transports.mdx, "Session
     * Management"): CLOSED once it was answered, or after 2 s */
    if (s->http && ah__mcp_http_end_session(s, 2000, session_ended) == 0)
        return;
    if (s->state != AH_MCP_CLOSED)
        ah__mcp_set_state(s, AH_MCP_CLOSED, NULL);
}

void ah_mcp_free(ah_mcp *s)
{
    if (!s)
        return;
    s->closing = 1;
    s->on_event = NULL;
    while (s->pending)
        ah__mcp_req_free(s->pending);
    if (s->stdio)
        ah__mcp_stdio_free(s);
    if (s->http)
        ah__mcp_http_free(s);
    ah_timer_free(s->timer);
    free_tools(s->tools, s->n_tools);
    cJSON_Delete(s->listing);
    free(s->name);
    free(s->want);
    free(s->reason);
    free(s->server_info);
    free(s);
}

ah_mcp_state ah_mcp_state_of(const ah_mcp *s)
{
    return s ? s->state : AH_MCP_FAILED;
}

const char *ah_mcp_name(const ah_mcp *s)
{
    return s ? s->name : NULL;
}

const char *ah_mcp_protocol(const ah_mcp *s)
{
    return s && s->protocol[0] ? s->protocol : NULL;
}

const char *ah_mcp_reason(const ah_mcp *s)
{
    return s ? s->reason : NULL;
}

const char *ah_mcp_server_info(const ah_mcp *s)
{
    return s ? s->server_info : NULL;
}

int ah_mcp_restarts(const ah_mcp *s)
{
    return s ? s->total_restarts : 0;
}

size_t ah_mcp_tool_count(const ah_mcp *s)
{
    return s ? s->n_tools : 0;
}

const ah_mcp_tool *ah_mcp_tool_at(const ah_mcp *s, size_t i)
{
    return s && i < s->n_tools ? &s->tools[i].t : NULL;
}

const ah_mcp_tool *ah_mcp_tool_find(const ah_mcp *s, const char *name)
{
    for (size_t i = 0; s && name && i < s->n_tools; i++)
        if (strcmp(s->tools[i].name, name) == 0)
            return &s->tools[i].t;
    return NULL;
}

unsigned ah_mcp_tools_version(const ah_mcp *s)
{
    return s ? s->tools_version : 0;
}
