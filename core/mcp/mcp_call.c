/* mcp_call.c - one MCP tool call, driven by the tool-call machine (agenthost/tool.h,
 * docs/mcp.md "The failure rule"): an asynchronous driver on the loop whose body is one
 * tools/call request (or the resume of one).
 *
 * The machine decides, from the error kind the transport set: transient (never sent) is
 * retried by the policy; stream (cut after acceptance, with an event id) is resumed,
 * taking no budget; outcome_unknown is repeated only when the tool is safe to repeat,
 * else the call ends OUTCOME_UNKNOWN. The key travels in
 * params._meta["io.agenthost/idempotency-key"], the receipt (the CallToolResult) goes to
 * the ledger like any tool's, and a result with isError true is an answer.
 *
 * Time: each attempt has timeout_ms (progress never extends it) and, with the policy's
 * idle_timeout_ms, an idle bound that progress resets; at either the server is told
 * (notifications/cancelled; in the 2026 era over HTTP, the stream is closed) and the
 * attempt's outcome is unknown. The policy's deadline_ms bounds the whole call: the
 * retries (the machine's decision) and the attempt in flight (its timer is the sooner of
 * timeout_ms and what is left of the deadline, so no progress outlives it).
 * Invariants: the done callback runs once, from a loop timer (never inside
 * ah_mcp_call_start or ah_mcp_call_cancel); every timer and request belongs to the call
 * and goes with ah_mcp_call_free.
 */
#include "mcp_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

struct ah_mcp_call {
    ah_mcp *s;
    char *tool, *display, *id, *run_id, *meta_key;
    cJSON *args;
    ah_tool_call *tc;
    ah_policy policy;
    int64_t timeout_ms, claim_until;
    int64_t started_ms;   /* when the call started: policy.deadline_ms runs from here */
    int by_deadline;      /* the attempt's timer is the deadline's, not timeout_ms */
    ah_timer *step_timer, *wait_timer, *timeout_timer, *idle_timer;
    mcp_req *req; /* the attempt's request (kept across a resume) */
    int running, finished, is_error, done_called;
    char *result_json;
    ah_error error; /* is_error: what the tool said */
    ah_event_fn on_event;
    void *event_ud;
    ah_mcp_done_fn done;
    void *done_ud;
};

static void schedule(ah_mcp_call *c)
{
    ah_timer_start(c->step_timer, 0);
}

static void stop_timers(ah_mcp_call *c)
{
    ah_timer_stop(c->timeout_timer);
    ah_timer_stop(c->idle_timer);
}

static void drop_req(ah_mcp_call *c)
{
    if (c->req) {
        ah__mcp_req_drop(c->req);
        ah__mcp_req_free(c->req);
        c->req = NULL;
    }
}

/* Tell the server to stop the request in flight, and stop waiting for it. */
static void abandon(ah_mcp_call *c, const char *reason)
{
    mcp_req *r = c->req;
    if (!r)
        return;
    if (r->state != RQ_DONE && r->state >= RQ_SENT) {
        if (c->s->http && c->s->modern)
            ; /* 2026-07-28 over HTTP: closing the stream is the cancellation */
        else
            ah__mcp_send_cancelled(c->s, r, reason);
    }
    drop_req(c);
}

static void body_failed(ah_mcp_call *c, const ah_error *e)
{
    stop_timers(c);
    c->running = 0;
    ah_tool_call_body_failed(c->tc, e);
    schedule(c);
}

/* ---- the answer ------------------------------------------------------------------ */

static void on_answer(void *ud, mcp_req *r, const cJSON *result, const cJSON *rpc_error,
                      const ah_error *fail)
{
    ah_mcp_call *c = ud;
    (void)r;
    if (!c->running)
        return;
    if (result) {
        const cJSON *rt = cJSON_GetObjectItemCaseSensitive(result, "resultType");
        if (cJSON_IsString(rt) && strcmp(rt->valuestring, "complete") != 0) {
            ah_error e;
            ah_error_set(&e, AH_EK_PERMANENT, 0,
                         "server '%s' answered tool '%s' with resultType '%.40s' (it asks "
                         "for input, which agenthost does not provide)",
                         c->s->name, c->tool, rt->valuestring);
            body_failed(c, &e);
            return;
        }
        char *receipt = cJSON_PrintUnformatted(result);
        stop_timers(c);
        c->running = 0;
        if (!receipt || ah_tool_call_body_ok(c->tc, receipt) != AH_OK) {
            ah_error e;
            ah_error_set(&e, AH_EK_PERMANENT, 0, "out of memory keeping the result");
            ah_tool_call_body_failed(c->tc, &e);
        }
        free(receipt);
        schedule(c);
        return;
    }
    ah_error e;
    if (rpc_error) {
        const cJSON *m = cJSON_GetObjectItemCaseSensitive(rpc_error, "message");
        const cJSON *code = cJSON_GetObjectItemCaseSensitive(rpc_error, "code");
        /* A JSON-RPC error is the server's answer (the call did not run as asked): not
         * a fault of the way there, so not retried. */
        ah_error_set(&e, AH_EK_PERMANENT, 0, "server '%s' refused tool '%s': %s (code %d)",
                     c->s->name, c->tool, cJSON_IsString(m) ? m->valuestring : "error",
                     cJSON_IsNumber(code) ? code->valueint : 0);
    } else {
        e = *fail;
    }
    /* c->req (kept) stays until the next attempt: a resume picks it up again */
    body_failed(c, &e);
}

static void on_progress(void *ud, mcp_req *r, double progress, double total,
                        const char *message)
{
    (void)r;
    ah_mcp_call *c = ud;
    if (c->policy.idle_timeout_ms > 0)
        ah_timer_start(c->idle_timer, c->policy.idle_timeout_ms); /* never the deadline */
    if (!c->on_event)
        return;
    ah_event ev;
    memset(&ev, 0, sizeof ev);
    ev.type = AH_EV_MCP_PROGRESS;
    ev.run_id = c->run_id;
    ev.ts_ms = ah_loop_wall_ms(c->s->loop);
    ev.u.mcp_progress.server = c->s->name;
    ev.u.mcp_progress.id = c->id ? c->id : c->meta_key;
    ev.u.mcp_progress.name = c->display ? c->display : c->tool;
    ev.u.mcp_progress.progress = progress;
    ev.u.mcp_progress.total = total;
    ev.u.mcp_progress.message = message;
    c->on_event(c->event_ud, &ev);
}

static void expired(ah_mcp_call *c, const char *what, int64_t ms)
{
    if (!c->running)
        return;
    ah_error e;
    mcp_req *r = c->req;
    if (r && (r->state == RQ_QUEUED || (r->state == RQ_SENDING && !c->s->http))) {
        ah_error_set(&e, AH_EK_TRANSIENT, 0,
                     "never sent: server '%s' was not ready within %lld ms (%s)",
                     c->s->name, (long long)ms,
                     ah_mcp_state_name(ah_mcp_state_of(c->s)));
    } else {
        ah_error_set(&e, AH_EK_OUTCOME_UNKNOWN, 0,
                     "server '%s' gave no answer for tool '%s' within %s %lld ms (it was "
                     "told to cancel); its effect may or may not have happened",
                     c->s->name, c->tool, what, (long long)ms);
    }
    abandon(c, "timed out");
    body_failed(c, &e);
}

static void timeout_fired(void *ud)
{
    ah_mcp_call *c = ud;
    if (c->by_deadline)
        expired(c, "policy.deadline_ms", c->policy.deadline_ms);
    else
        expired(c, "timeout_ms", c->timeout_ms);
}

static void idle_fired(void *ud)
{
    ah_mcp_call *c = ud;
    expired(c, "idle_timeout_ms", c->policy.idle_timeout_ms);
}

/* ---- an attempt -------------------------------------------------------------------- */

static void run_attempt(ah_mcp_call *c)
{
    ah_mcp *s = c->s;
    ah_error e;
    c->running = 1;
    ah_mcp_state st = ah_mcp_state_of(s);
    if (st == AH_MCP_FAILED || st == AH_MCP_CLOSED) {
        ah_error_set(&e, AH_EK_PERMANENT, 0, "never sent: server '%s' is %s%s%s", s->name,
                     ah_mcp_state_name(st), s->reason ? ": " : "", s->reason ? s->reason : "");
        drop_req(c);
        body_failed(c, &e);
        return;
    }
    if (st == AH_MCP_READY && !ah_mcp_tool_find(s, c->tool)) {
        ah_error_set(&e, AH_EK_PERMANENT, 0, "never sent: server '%s' has no tool '%.100s'",
                     s->name, c->tool);
        drop_req(c);
        body_failed(c, &e);
        return;
    }
    /* the attempt ends by timeout_ms or by what is left of the call's deadline, whichever
     * comes first (the machine starts no attempt past the deadline, but one that started
     * before it must not outlive it) */
    int64_t bound = c->timeout_ms;
    c->by_deadline = 0;
    if (c->policy.deadline_ms > 0) {
        int64_t left = c->started_ms + c->policy.deadline_ms - ah_loop_now_ms(s->loop);
        if (left <= 0) {
            ah_error_set(&e, AH_EK_TIMEOUT, 0,
                         "never sent: server '%s' tool '%s': policy.deadline_ms %lld ms "
                         "reached before the attempt",
                         s->name, c->tool, (long long)c->policy.deadline_ms);
            drop_req(c);
            body_failed(c, &e);
            return;
        }
        if (left < bound) {
            bound = left;
            c->by_deadline = 1;
        }
    }
    ah_timer_start(c->timeout_timer, bound);
    if (c->policy.idle_timeout_ms > 0)
        ah_timer_start(c->idle_timer, c->policy.idle_timeout_ms);
    if (ah_tool_call_resuming(c->tc) && c->req && c->req->last_event_id && s->http) {
        ah__mcp_log(s, AH_LOG_INFO, "tool '%s': resuming the answer's stream after event %s",
                    c->tool, c->req->last_event_id);
        ah__mcp_req_resume(c->req, on_answer);
        return;
    }
    drop_req(c);
    cJSON *p = cJSON_CreateObject();
    cJSON *meta = p ? cJSON_AddObjectToObject(p, "_meta") : NULL;
    if (p) {
        cJSON_AddStringToObject(p, "name", c->tool);
        cJSON_AddItemToObject(p, "arguments", cJSON_Duplicate(c->args, 1));
    }
    if (meta) {
        cJSON_AddNumberToObject(meta, "progressToken", (double)++s->next_id);
        cJSON_AddStringToObject(meta, "io.agenthost/idempotency-key", c->meta_key);
    }
    if (!meta) {
        cJSON_Delete(p);
        ah_error_set(&e, AH_EK_PERMANENT, 0, "out of memory");
        body_failed(c, &e);
        return;
    }
    mcp_req *r = ah__mcp_request(s, "tools/call", p, 0, on_answer, on_progress, c);
    if (!r) {
        ah_error_set(&e, AH_EK_PERMANENT, 0, "out of memory");
        body_failed(c, &e);
        return;
    }
    /* ah__mcp_request may have ended it already (a write that failed): then on_answer
     * ran and c->running is 0 */
    if (c->running) {
        r->keep = 1;
        c->req = r;
    }
}

/* ---- the driver -------------------------------------------------------------------- */

static void finish(ah_mcp_call *c)
{
    c->finished = 1;
    stop_timers(c);
    drop_req(c);
    const char *receipt = ah_tool_call_receipt(c->tc);
    if (receipt) {
        c->result_json = ah__strdup(receipt);
        cJSON *r = cJSON_Parse(receipt);
        const cJSON *ie = r ? cJSON_GetObjectItemCaseSensitive(r, "isError") : NULL;
        c->is_error = cJSON_IsTrue(ie);
        if (c->is_error) {
            char *t = ah_mcp_call_text(c);
            ah_error_set(&c->error, AH_EK_PERMANENT, 0, "tool '%s' reported an error: %s",
                         c->tool, t ? t + (strncmp(t, "error: ", 7) == 0 ? 7 : 0) : "?");
            free(t);
        }
        cJSON_Delete(r);
    }
    if (!c->done_called) {
        c->done_called = 1;
        c->done(c->done_ud, c);
    }
}

static void claim_notified(void *ud)
{
    schedule(ud);
}

static void step(void *ud)
{
    ah_mcp_call *c = ud;
    if (c->finished || c->running)
        return;
    for (;;) {
        ah_tool_action a = ah_tool_step(c->tc);
        if (a == AH_TOOL_DO_RUN_BODY) {
            run_attempt(c);
            return;
        }
        if (a == AH_TOOL_DO_RETRY_AFTER) {
            int64_t ms = ah_tool_call_wait_ms(c->tc);
            if (ms <= 0)
                continue;
            ah_timer_start(c->wait_timer, ms);
            return;
        }
        if (a == AH_TOOL_DO_WAIT_CLAIM) {
            int64_t ms = ah_tool_call_wait_ms(c->tc);
            int64_t left = c->claim_until - ah_loop_now_ms(c->s->loop);
            if (left <= 0) {
                if (ah_tool_call_stop_waiting(c->tc) == AH_OK)
                    continue;
                left = 1000; /* our own receipt's commit: waited for, re-checked */
            }
            ah_timer_start(c->wait_timer, ms < 0 || ms > left ? left : ms);
            return;
        }
        finish(c);
        return;
    }
}

static int safe_to_repeat(const ah_mcp *s, const char *tool, int override)
{
    if (override >= 0)
        return override != 0;
    const ah_mcp_tool *t = ah_mcp_tool_find(s, tool);
    return s->trust && t && (t->read_only == 1 || t->idempotent == 1);
}

ah_status ah_mcp_call_start(ah_mcp *s, const char *name, const char *args_json,
                            const ah_mcp_call_opts *o, ah_mcp_call **out, char *err,
                            size_t errsize)
{
    char dummy[8];
    if (!err || !errsize) {
        err = dummy;
        errsize = sizeof dummy;
    }
    if (!out || !s || !name || !o || !o->done) {
        ah__bufprintf(err, errsize, "ah_mcp_call_start: server, name, opts and opts->done "
                                    "are required");
        return AH_ERR_INVALID;
    }
    *out = NULL;
    cJSON *args = cJSON_Parse(args_json ? args_json : "{}");
    if (!cJSON_IsObject(args)) {
        cJSON_Delete(args);
        ah__bufprintf(err, errsize, "server '%s' tool '%.80s': the arguments are not a JSON "
                                    "object",
                      s->name, name);
        return AH_ERR_INVALID;
    }
    ah_mcp_call *c = calloc(1, sizeof *c);
    if (!c) {
        cJSON_Delete(args);
        ah__bufprintf(err, errsize, "out of memory");
        return AH_ERR_NOMEM;
    }
    c->s = s;
    c->args = args;
    c->policy = o->policy ? *o->policy : s->policy;
    if (o->policy) {
        char why[200];
        if (ah_policy_validate(o->policy, why, sizeof why) != AH_OK) {
            ah__bufprintf(err, errsize, "server '%s' tool '%.80s': policy: %s", s->name,
                          name, why);
            ah_mcp_call_free(c);
            return AH_ERR_INVALID;
        }
    }
    c->policy.retry_on = NULL;
    c->timeout_ms = o->timeout_ms > 0 ? o->timeout_ms : s->timeout_ms;
    c->tool = ah__strdup(name);
    c->display = o->display_name ? ah__strdup(o->display_name) : NULL;
    c->id = o->id ? ah__strdup(o->id) : NULL;
    c->run_id = o->run_id ? ah__strdup(o->run_id) : NULL;
    if (o->key) {
        c->meta_key = ah__strdup(o->key);
    } else {
        /* no key of the caller's: one for this call, so a server that deduplicates can */
        char k[48];
        const ah_rng *rng = ah_loop_rng(s->loop);
        ah__bufprintf(k, sizeof k, "ah-%016llx%08llx",
                      (unsigned long long)ah_rng_uniform(rng, INT64_MAX),
                      (unsigned long long)ah_rng_uniform(rng, 0xffffffffLL));
        c->meta_key = ah__strdup(k);
    }
    c->on_event = o->on_event;
    c->event_ud = o->event_ud;
    c->done = o->done;
    c->done_ud = o->done_ud;
    c->step_timer = ah_timer_new(s->loop, step, c);
    c->wait_timer = ah_timer_new(s->loop, step, c);
    c->timeout_timer = ah_timer_new(s->loop, timeout_fired, c);
    c->idle_timer = ah_timer_new(s->loop, idle_fired, c);
    char *canon = NULL;
    cJSON *fp = cJSON_CreateObject();
    if (fp) {
        cJSON_AddItemToObject(fp, "args", cJSON_Duplicate(args, 1));
        cJSON_AddStringToObject(fp, "server", s->name);
        cJSON_AddStringToObject(fp, "tool", name);
        canon = cJSON_PrintUnformatted(fp);
        cJSON_Delete(fp);
    }
    if (!c->tool || !c->meta_key || !c->step_timer || !c->wait_timer || !c->timeout_timer ||
        !c->idle_timer || !canon || (o->display_name && !c->display) || (o->id && !c->id) ||
        (o->run_id && !c->run_id)) {
        free(canon);
        ah_mcp_call_free(c);
        ah__bufprintf(err, errsize, "out of memory");
        return AH_ERR_NOMEM;
    }
    ah_tool_policy tp;
    ah_tool_policy_init(&tp);
    tp.max_attempts = c->policy.max_attempts;
    tp.backoff = &c->policy;
    tp.loop = s->loop;
    tp.name = c->display ? c->display : c->tool;
    tp.retry_on = o->retry_on;
    tp.retry_on_ud = o->retry_on_ud;
    tp.notify = claim_notified;
    tp.notify_ud = c;
    tp.repeat_unknown = safe_to_repeat(s, name, o->idempotent);
    tp.resumes = 1;
    ah_status st = ah_tool_call_new(&tp, o->key ? o->ledger : NULL, o->budget, o->key, canon,
                                    &c->tc, err, errsize);
    free(canon);
    if (st != AH_OK) {
        ah_mcp_call_free(c);
        return st;
    }
    c->started_ms = ah_loop_now_ms(s->loop);
    c->claim_until = c->started_ms +
                     (c->policy.deadline_ms > 0 ? c->policy.deadline_ms
                      : o->ledger && o->key     ? ah_ledger_lease_ms(o->ledger)
                                                : 0);
    s->calls++;
    schedule(c);
    *out = c;
    return AH_OK;
}

void ah_mcp_call_cancel(ah_mcp_call *c, const char *reason)
{
    if (!c || c->finished)
        return;
    ah_error e;
    ah_error_set(&e, AH_EK_CANCELLED, 0, "tool call cancelled%s%s", reason ? ": " : "",
                 reason ? reason : "");
    if (c->running) {
        abandon(c, reason ? reason : "cancelled");
        body_failed(c, &e); /* its effect may have happened: the error says cancelled */
    } else {
        ah_tool_call_cancel(c->tc);
        schedule(c);
    }
}

void ah_mcp_call_free(ah_mcp_call *c)
{
    if (!c)
        return;
    if (c->running)
        abandon(c, "the call was abandoned");
    drop_req(c);
    ah_timer_free(c->step_timer);
    ah_timer_free(c->wait_timer);
    ah_timer_free(c->timeout_timer);
    ah_timer_free(c->idle_timer);
    if (c->tc)
        c->s->calls--;
    ah_tool_call_free(c->tc);
    cJSON_Delete(c->args);
    free(c->tool);
    free(c->display);
    free(c->id);
    free(c->run_id);
    free(c->meta_key);
    free(c->result_json);
    free(c);
}

int ah_mcp_call_finished(const ah_mcp_call *c)
{
    return c && c->finished;
}

ah_tool_outcome ah_mcp_call_outcome(const ah_mcp_call *c)
{
    if (!c || !c->finished)
        return AH_TOOL_ERROR;
    ah_tool_outcome o = ah_tool_call_outcome(c->tc);
    return o == AH_TOOL_OK && c->is_error ? AH_TOOL_ERROR : o;
}

const ah_error *ah_mcp_call_error(const ah_mcp_call *c)
{
    if (!c)
        return NULL;
    return c->is_error ? &c->error : ah_tool_call_error(c->tc);
}

const char *ah_mcp_call_result_json(const ah_mcp_call *c)
{
    return c ? c->result_json : NULL;
}

int ah_mcp_call_is_error(const ah_mcp_call *c)
{
    return c ? c->is_error : 0;
}

int ah_mcp_call_attempts(const ah_mcp_call *c)
{
    return c ? ah_tool_call_attempts(c->tc) : 0;
}

int ah_mcp_call_duplicate(const ah_mcp_call *c)
{
    return c ? ah_tool_call_duplicate(c->tc) : 0;
}

int64_t ah_mcp_call_seq(const ah_mcp_call *c)
{
    return c ? ah_tool_call_seq(c->tc) : 0;
}

const char *ah_mcp_call_key(const ah_mcp_call *c)
{
    return c ? ah_tool_call_key(c->tc) : NULL;
}

int ah_mcp_call_budget_first_refusal(const ah_mcp_call *c)
{
    return c ? ah_tool_call_budget_first_refusal(c->tc) : 0;
}

/* ---- the text for a model ---------------------------------------------------------- */

typedef struct sbuf {
    char *p;
    size_t n, cap;
    int failed;
} sbuf;

static void put(sbuf *b, const char *s, size_t n)
{
    if (b->failed)
        return;
    if (b->n + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->n + n + 1)
            cap *= 2;
        char *q = realloc(b->p, cap);
        if (!q) {
            b->failed = 1;
            return;
        }
        b->p = q;
        b->cap = cap;
    }
    memcpy(b->p + b->n, s, n);
    b->n += n;
    b->p[b->n] = '\0';
}

static void puts_(sbuf *b, const char *s)
{
    put(b, s, strlen(s));
}

static const char *str_of(const cJSON *o, const char *k)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
    return cJSON_IsString(v) ? v->valuestring : NULL;
}

char *ah_mcp_call_text(const ah_mcp_call *c)
{
    sbuf b = {0};
    const char *json = c ? c->result_json : NULL;
    cJSON *r = json ? cJSON_Parse(json) : NULL;
    if (!r) {
        const ah_error *e = ah_mcp_call_error(c);
        puts_(&b, "error: ");
        puts_(&b, e && e->message[0] ? e->message : "the tool failed");
        return b.failed ? (free(b.p), NULL) : b.p;
    }
    if (cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(r, "isError")))
        puts_(&b, "error: ");
    const cJSON *content = cJSON_GetObjectItemCaseSensitive(r, "content");
    const cJSON *item;
    int n = 0;
    cJSON_ArrayForEach(item, content)
    {
        const char *type = str_of(item, "type");
        if (n++)
            puts_(&b, "\n");
        if (type && strcmp(type, "text") == 0 && str_of(item, "text")) {
            puts_(&b, str_of(item, "text"));
        } else if (type && strcmp(type, "resource") == 0) {
            const cJSON *res = cJSON_GetObjectItemCaseSensitive(item, "resource");
            const char *t = str_of(res, "text");
            if (t) {
                puts_(&b, t);
            } else {
                puts_(&b, "[resource ");
                puts_(&b, str_of(res, "uri") ? str_of(res, "uri") : "?");
                puts_(&b, "]");
            }
        } else if (type && strcmp(type, "resource_link") == 0) {
            puts_(&b, "[resource link ");
            puts_(&b, str_of(item, "uri") ? str_of(item, "uri") : "?");
            puts_(&b, "]");
        } else {
            char d[160];
            const char *data = str_of(item, "data");
            ah__bufprintf(d, sizeof d, "[%s%s%s, %zu bytes of base64]", type ? type : "content",
                          str_of(item, "mimeType") ? " " : "",
                          str_of(item, "mimeType") ? str_of(item, "mimeType") : "",
                          data ? strlen(data) : (size_t)0);
            puts_(&b, d);
        }
    }
    const cJSON *sc = cJSON_GetObjectItemCaseSensitive(r, "structuredContent");
    if (n == 0 && sc) {
        char *t = cJSON_PrintUnformatted(sc);
        if (t)
            puts_(&b, t);
        free(t);
    }
    cJSON_Delete(r);
    if (b.failed) {
        free(b.p);
        return NULL;
    }
    if (!b.p)
        return ah__strdup("");
    return b.p;
}

void ah_mcp_call_end_event(const ah_mcp_call *c, const char *id, const char *name,
                           ah_event *out)
{
    memset(out, 0, sizeof *out);
    out->type = AH_EV_TOOL_CALL_END;
    out->u.tool_call_end.id = id ? id : "";
    out->u.tool_call_end.name = name ? name : "";
    out->u.tool_call_end.outcome = ah_mcp_call_outcome(c);
    out->u.tool_call_end.duplicate = ah_mcp_call_duplicate(c);
    out->u.tool_call_end.attempts = ah_mcp_call_attempts(c);
    out->u.tool_call_end.server = c ? c->s->name : NULL;
}
