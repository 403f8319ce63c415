/* call.c - one LLM request: the ATTEMPT -> (WAIT -> ATTEMPT)* -> STREAMING -> terminal
 * state machine (docs/retry-policy.md; docs/transport-and-retry.md).
 *
 * Invariants:
 *   - Every state change goes through set_state(), which logs it at debug level.
 *   - At most one attempt is in flight (c->attempt), only in ATTEMPT or STREAMING.
 *   - c->timer has one meaning at a time (c->timer_role): the first attempt's start
 *     (ah_call_start only arms it), the end of a backoff wait (WAIT), the attempt's
 *     timeout (ATTEMPT), the deadline (STREAMING), the grace after the final event, or
 *     a paced attempt's wait for its slot (WAIT).
 *   - Nothing fires from inside ah_call_start(): no event, no start(), no on_finish.
 *   - Once the consumer saw the final event (end_seen) the call ends DONE, whatever the
 *     connection does next.
 *   - Retrying is decided only by the retry machine (retry.h, the same one a tool call
 *     uses; a shared budget's verdict is awaited in WAIT with c->pending), and its WAIT
 *     is c->timer. Once a 2xx head arrived the call ends DONE, INTERRUPTED, GAVE_UP or
 *     CANCELLED: never resent. A break its consumer calls a failed attempt
 *     (break_is_retry) is decided like one (`breaking`), and a granted retry is handed to
 *     the next request (retry_of), which emits its llm_retry and waits it out.
 *   - A retry-budget token is refunded only for a response that completed (DONE): a 2xx
 *     head whose stream then fails is no success.
 *   - finish() is the last thing any handler does: on_finish may free the call.
 *   - A cancel request is an atomic flag plus an async wake-up; it is honoured at the
 *     next loop step and checked again after every callback into user code, so no
 *     attempt starts after it.
 *   - The transport is aborted only from timer and async handlers, never from inside a
 *     transport callback (there we return nonzero and let the attempt complete).
 *   - Resume (a re-attach to the same response after a break) is a new phase of the same
 *     call: c->retry.attempts counts the phase's attempts (what the policy bounds),
 *     total_attempts all of them. It starts from a zero-delay WAIT, never from inside a
 *     transport callback, and a re-attach that fails ends the call INTERRUPTED with the
 *     break's error (the caller's next rung), never GAVE_UP.
 *   - c->pulse only says the call is waiting (llm_waiting, once a second): during a
 *     WAIT of more than a second (wait_end_ms) and once an ATTEMPT or STREAMING has had
 *     no byte for AH_CALL_SILENCE_NOTICE_MS (last_rx_ms). It never changes a state; the
 *     timers that do (c->timer, c->idle) are separate, so a pulse cannot move a decision.
 *   - A cancel with a response running on the provider's side (the cancel_url hook)
 *     first sends the cancel request, from a timer, and finishes when it is answered or
 *     after AH_CALL_CANCEL_WAIT_MS; `cancelling` keeps everything else out meanwhile.
 */
#include "error_internal.h"
#include "internal.h"
#include "redis_internal.h"
#include "retry.h"

#include "agenthost/call.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

enum {
    ERROR_BODY_MAX = 64 * 1024, /* bytes of a non-2xx body kept for the error */
    /* After the stream's final event, how long the rest of the response (the chunked
     * terminator, a proxy's trailing bytes) may take before the call ends DONE anyway. */
    END_GRACE_MS = 1000,
    /* An error body silent this long is a timeout when idle_timeout_ms is off. */
    ERROR_BODY_IDLE_MS = 30000
};

typedef enum timer_role {
    ROLE_NONE,
    ROLE_START, /* ah_call_start() was called: the first attempt begins at the next step */
    ROLE_WAIT,
    ROLE_ATTEMPT_TIMEOUT,
    ROLE_DEADLINE,
    ROLE_AFTER_END,   /* the final event arrived; the transfer has END_GRACE_MS to end */
    ROLE_CANCEL_SEND, /* a cancel request goes out */
    ROLE_CANCEL_WAIT, /* the cancel request's answer is waited for, or the end */
    ROLE_PACE         /* a paced attempt waits for its slot */
} timer_role;

struct ah_call {
    ah_loop *loop;
    const ah_transport *tr;
    ah_policy policy;
    ah_retry_budget *budget;
    ah_rate_limit *rate_limit;
    /* A shared budget's or pacer's verdict being awaited (state WAIT), and for the budget
     * the decision it completes. */
    ah_redis_req *pending;
    ah_decision pending_d;
    int paced; /* this attempt's pacing is done */
    ah_stream_fns stream;
    ah_call_resume resume;
    ah_event_fn on_event;
    void *event_ud;
    int (*handles_give_up)(void *ud, const ah_error *err);
    ah_call_finish_fn on_finish;
    void *finish_ud;
    int llm_call, continuation;
    char run_id[48]; /* "" outside a run */

    /* The request, owned: its header arrays (req_headers, reattach_headers) and strings
     * live in reqbuf, one block. */
    ah_http_request req;
    ah_header *req_headers;
    char *reqbuf;
    char **secrets; /* NULL-terminated, owned */

    ah_call_state state;
    int started; /* ah_call_start() was called (the state stays IDLE until the first step) */
    void *attempt;
    ah_timer *timer;
    timer_role timer_role;
    ah_timer *idle;
    ah_timer *pulse;     /* llm_waiting */
    int64_t wait_start_ms, wait_end_ms; /* the WAIT in progress, for its pulses */
    const char *wait_what; /* "retry" or "pace" */
    const char *silence_said; /* the silence an llm_waiting said ("response", "stream"),
                                 until it said its end; NULL */
    ah_async *async;
    atomic_int cancel_requested;

    int total_attempts; /* every attempt of the call */
    /* The retry machine: attempts in the current phase (the request, or one re-attach),
     * the call's start, the previous wait. */
    ah__retry retry;
    int64_t end_ms;
    int64_t last_rx_ms;
    int status;
    /* The terminal error, or the last attempt's while retrying: allocated by the first
     * failure (a call that succeeds at once has none). Read through cerr(). */
    ah__error_slot err;
    ah_giveup_reason reason;

    /* Resume: the re-attach request (GET, the request's headers without Content-Type),
     * the number of re-attaches, and the break that started the first. */
    int resumes;
    int resuming;
    char *reattach_url;
    ah_http_request reattach_req;
    ah_header *reattach_headers;
    ah_error *break_err; /* allocated on the first re-attach (a call rarely has one) */

    /* Cancel on the provider's side (the cancel_url hook). */
    int cancel_checked, cancelling;
    char *cancel_url;
    void *cancel_attempt;

    /* A stream consumer's verdict, recorded in a transport callback, acted on at done. */
    int consumer_failed;
    ah_error *consumer_err; /* its verdict, allocated when it fails (NULL: no memory) */
    /* The consumer saw the stream's final event: the response is complete whatever the
     * connection does next (an unclean close, more bytes). */
    int end_seen;

    /* A break being decided as a failed attempt (break_is_retry), and its outcome: a
     * retry granted for the next request. The retry this call starts with (retry_of). */
    int breaking;
    int granted;
    struct {
        int failed_attempt, max_attempts;
        int64_t wait_ms;
        ah_wait_source wait_source;
        int64_t elapsed_ms;
    } granted_retry; /* its error is c->err, which a finished call keeps */
    ah_call_retry *retry_of; /* allocated; freed once its first step took it */

    /* A non-2xx response being read: its headers (copied) and capped body. */
    ah_header *eh;
    size_t neh;
    char *ehbuf;
    char *ebody;
    size_t elen, ecap;
    int ebody_full; /* the cap was reached: the transfer was dropped there */
    /* The last complete non-2xx response of any attempt (ah_call_last_response): its
     * status, headers and (capped) body, kept when a later attempt starts. */
    int last_status;
    ah_header *last_h;
    size_t last_n;
    char *last_hbuf;
    char *last_body;
    size_t last_len;
};

const char *ah_call_state_name(ah_call_state s)
{
    static const char *const names[] = {
#define AH__CS_NAME(name, str) str,
        AH_CALL_STATE_MAP(AH__CS_NAME)
#undef AH__CS_NAME
    };
    return (unsigned)s < (unsigned)AH_CALL_STATE_COUNT_ ? names[s] : "unknown";
}

static int is_terminal(ah_call_state s)
{
    return s == AH_CALL_DONE || s == AH_CALL_INTERRUPTED || s == AH_CALL_GAVE_UP ||
           s == AH_CALL_CANCELLED;
}

static const ah_error *cerr(const ah_call *c)
{
    return ah__eslot_get(&c->err);
}

static int64_t now_ms(const ah_call *c)
{
    return ah_loop_now_ms(c->loop);
}

static int64_t elapsed(const ah_call *c)
{
    return ah__retry_elapsed(&c->retry, now_ms(c));
}

static int cancel_pending(ah_call *c)
{
    return atomic_load(&c->cancel_requested) != 0;
}

/* The one place a state changes: traceable at debug level. */
static void set_state(ah_call *c, ah_call_state s, const char *why)
{
    if (ah__log_enabled(AH_LOG_DEBUG))
        ah__log(AH_LOG_DEBUG, "llm_call %d: %s -> %s (attempt %d, %s)", c->llm_call,
                ah_call_state_name(c->state), ah_call_state_name(s), c->retry.attempts,
                why);
    c->state = s;
}

/* "LLM request 2 of run_ab12" (or without the run outside one), for log lines. */
static const char *label(const ah_call *c, char *buf, size_t size)
{
    if (c->run_id[0])
        ah__bufprintf(buf, size, "LLM request %d of %s", c->llm_call, c->run_id);
    else
        ah__bufprintf(buf, size, "LLM request %d", c->llm_call);
    return buf;
}

static void emit(ah_call *c, const ah_event *ev)
{
    if (!c->on_event)
        return;
    ah_event e = *ev;
    e.run_id = c->run_id[0] ? c->run_id : NULL;
    e.ts_ms = ah_loop_wall_ms(c->loop);
    c->on_event(c->event_ud, &e);
}

/* ---- per-attempt scratch --------------------------------------------------------- */

static void clear_error_response(ah_call *c)
{
    free(c->eh);
    free(c->ehbuf);
    c->eh = NULL;
    c->ehbuf = NULL;
    c->neh = 0;
    c->elen = 0;
}

/* Copy a non-2xx head so ah_error_from_http can read its hints once the body is in. */
static void keep_error_head(ah_call *c, const ah_header *h, size_t n)
{
    clear_error_response(c);
    size_t total = 0;
    for (size_t i = 0; i < n; i++)
        total += strlen(h[i].name) + strlen(h[i].value) + 2;
    c->eh = n ? malloc(n * sizeof *c->eh) : NULL;
    c->ehbuf = total ? malloc(total) : NULL;
    if ((n && !c->eh) || (total && !c->ehbuf)) {
        clear_error_response(c); /* the status alone still makes a usable error */
        return;
    }
    char *p = c->ehbuf;
    for (size_t i = 0; i < n; i++) {
        size_t nl = strlen(h[i].name) + 1, vl = strlen(h[i].value) + 1;
        memcpy(p, h[i].name, nl);
        c->eh[i].name = p;
        p += nl;
        memcpy(p, h[i].value, vl);
        c->eh[i].value = p;
        p += vl;
    }
    c->neh = n;
}

/* A complete non-2xx response: it becomes the call's last response (moved, not copied). */
static void keep_last_response(ah_call *c)
{
    free(c->last_h);
    free(c->last_hbuf);
    free(c->last_body);
    c->last_status = c->status;
    c->last_h = c->eh;
    c->last_n = c->neh;
    c->last_hbuf = c->ehbuf;
    c->eh = NULL;
    c->ehbuf = NULL;
    c->neh = 0;
    c->last_body = c->elen ? malloc(c->elen) : NULL;
    c->last_len = c->last_body ? c->elen : 0;
    if (c->last_body)
        memcpy(c->last_body, c->ebody, c->elen);
}

static void keep_error_body(ah_call *c, const char *buf, size_t len)
{
    if (c->elen >= ERROR_BODY_MAX)
        return;
    if (len > ERROR_BODY_MAX - c->elen)
        len = ERROR_BODY_MAX - c->elen;
    if (c->elen + len > c->ecap) {
        size_t cap = c->ecap ? c->ecap : 1024;
        while (cap < c->elen + len)
            cap *= 2;
        char *p = realloc(c->ebody, cap);
        if (!p)
            return;
        c->ebody = p;
        c->ecap = cap;
    }
    memcpy(c->ebody + c->elen, buf, len);
    c->elen += len;
}

/* ---- terminal states ------------------------------------------------------------- */

static void abort_attempt(ah_call *c)
{
    if (c->attempt) {
        void *a = c->attempt;
        c->attempt = NULL;
        c->tr->ops->abort(c->tr->self, a);
    }
}

static void stop_timers(ah_call *c)
{
    ah_redis_req_cancel(c->pending);
    c->pending = NULL;
    ah_timer_stop(c->timer);
    c->timer_role = ROLE_NONE;
    ah_timer_stop(c->idle);
    ah_timer_stop(c->pulse);
}

/* Enter a terminal state. Must be the last statement of its caller's path: on_finish may
 * free the call. */
static void finish(ah_call *c, ah_call_state s, const ah_error *err, const char *why)
{
    abort_attempt(c);
    stop_timers(c);
    clear_error_response(c);
    if (err)
        ah__eslot_set(&c->err, err);
    else
        ah__eslot_free(&c->err);
    c->end_ms = now_ms(c);
    set_state(c, s, why);
    if (s == AH_CALL_DONE && c->budget)
        ah_retry_budget_on_success(c->budget);
    if (s == AH_CALL_GAVE_UP &&
        !(c->handles_give_up && c->handles_give_up(c->event_ud, cerr(c)))) {
        char who[80];
        ah__log_event(AH_LOG_WARN, AH_EV_LLM_GAVE_UP, "%s gave up after %d attempt%s%s: %s",
                      label(c, who, sizeof who), c->retry.attempts,
                      c->retry.attempts == 1 ? "" : "s",
                      c->reason == AH_GIVEUP_NOT_RETRYABLE ? " (not retryable)" : "",
                      cerr(c)->message[0] ? cerr(c)->message
                                          : ah_error_kind_name(cerr(c)->kind));
        ah_event ev = {.type = AH_EV_LLM_GAVE_UP};
        ev.u.llm_gave_up.llm_call = c->llm_call;
        ev.u.llm_gave_up.attempts = c->retry.attempts;
        ev.u.llm_gave_up.elapsed_ms = c->end_ms - c->retry.start_ms;
        ev.u.llm_gave_up.status = cerr(c)->status;
        ev.u.llm_gave_up.error = cerr(c);
        ev.u.llm_gave_up.reason = c->reason;
        emit(c, &ev);
    }
    if (c->on_finish)
        c->on_finish(c->finish_ud, c);
}

static void finish_cancelled(ah_call *c)
{
    if (!c->cancel_checked) {
        /* Once: a response that runs on the provider's side is asked to stop first. */
        c->cancel_checked = 1;
        c->cancel_url = c->resume.cancel_url ? c->resume.cancel_url(c->resume.ud) : NULL;
        if (c->cancel_url) {
            abort_attempt(c);
            stop_timers(c);
            c->cancelling = 1;
            c->timer_role = ROLE_CANCEL_SEND;
            ah_timer_start(c->timer, 0);
            return;
        }
    }
    ah_error e;
    ah_error_set(&e, AH_EK_CANCELLED, 0, "LLM request cancelled");
    finish(c, AH_CALL_CANCELLED, &e, "cancel requested");
}

/* ---- the provider-side cancel (best effort) -------------------------------------- */

static int cancel_head(void *ud, int status, const ah_header *h, size_t n)
{
    ah_call *c = ud;
    (void)h;
    (void)n;
    ah__log(AH_LOG_INFO, "LLM request %d: the provider answered the cancel with HTTP %d",
            c->llm_call, status);
    return 0;
}

static int cancel_body(void *ud, const char *buf, size_t len)
{
    (void)ud;
    (void)buf;
    (void)len;
    return 0;
}

static void cancel_done(void *ud, const ah_error *err)
{
    ah_call *c = ud;
    c->cancel_attempt = NULL;
    if (err->kind != AH_EK_NONE)
        ah__log(AH_LOG_INFO, "LLM request %d: the cancel request failed (%s)", c->llm_call,
                ah_error_kind_name(err->kind));
    /* Finish from the timer, not from inside the transport's callback. */
    c->timer_role = ROLE_CANCEL_WAIT;
    ah_timer_start(c->timer, 0);
}

static const ah_transport_sink cancel_sink = {cancel_head, cancel_body, cancel_done, NULL};

static void send_cancel(ah_call *c)
{
    ah_http_request r = c->reattach_req; /* the request's headers, for the auth */
    r.method = "POST";
    r.url = c->cancel_url;
    r.body = NULL;
    r.body_len = 0;
    ah_error e;
    ah_error_clear(&e);
    c->timer_role = ROLE_CANCEL_WAIT;
    if (c->tr->ops->start(c->tr->self, c->loop, &r, &cancel_sink, c, &c->cancel_attempt,
                          &e) != AH_OK) {
        c->cancel_attempt = NULL;
        ah_timer_start(c->timer, 0);
        return;
    }
    ah__log(AH_LOG_INFO, "LLM request %d: asking the provider to cancel the response",
            c->llm_call);
    ah_timer_start(c->timer, AH_CALL_CANCEL_WAIT_MS);
}

static void finish_interrupted(ah_call *c, ah_error *e, const char *why)
{
    if (e->kind == AH_EK_NONE || e->kind == AH_EK_CANCELLED)
        ah_error_set(e, AH_EK_STREAM, 0, "response stream ended abnormally");
    ah_error_redact(e, (const char *const *)c->secrets);
    finish(c, AH_CALL_INTERRUPTED, e, why);
}

static void stream_broke(ah_call *c, ah_error *e, const char *why);
static void stream_failed(ah_call *c, ah_error *e, const char *why);

/* The stream is over at the HTTP level, or its final event arrived (end_seen): ask the
 * consumer whether it was complete. terr is the transport's error, or NULL. A break
 * (a cut, or an end before the format's end) may re-attach (stream_broke). */
static void finish_complete(ah_call *c, const ah_error *terr)
{
    ah_error e;
    if (terr && terr->kind != AH_EK_NONE && !c->end_seen) {
        e = *terr;
        stream_broke(c, &e, "transport");
        return;
    }
    if (terr && terr->kind != AH_EK_NONE && ah__log_enabled(AH_LOG_DEBUG))
        ah__log(AH_LOG_DEBUG,
                "llm_call %d: complete response, then the connection ended uncleanly (%s)",
                c->llm_call, terr->message);
    ah_error_clear(&e);
    if (c->stream.on_end && c->stream.on_end(c->stream.ud, &e) != 0) {
        if (e.kind == AH_EK_NONE)
            ah_error_set(&e, AH_EK_STREAM, 0, "the stream ended incomplete");
        stream_broke(c, &e, "stream incomplete");
    } else {
        finish(c, AH_CALL_DONE, NULL, "complete");
    }
}

/* ---- llm_waiting: the call says it is waiting ----------------------------------- */

static void emit_waiting(ah_call *c, const char *what, int64_t waited, int64_t remaining)
{
    ah_event ev = {.type = AH_EV_LLM_WAITING};
    ev.u.llm_waiting.llm_call = c->llm_call;
    ev.u.llm_waiting.wait = what;
    ev.u.llm_waiting.waited_ms = waited;
    ev.u.llm_waiting.remaining_ms = remaining;
    emit(c, &ev);
}

/* A WAIT of wait_ms begins: its pulses come when a whole number of seconds is left
 * (7.3 s: at 7 s, 6 s, ... 1 s left), none for a wait of a second or less. */
static void pulse_wait(ah_call *c, const char *what, int64_t wait_ms)
{
    c->wait_start_ms = now_ms(c);
    c->wait_end_ms = c->wait_start_ms + wait_ms;
    c->wait_what = what;
    ah_timer_stop(c->pulse);
    if (wait_ms > 1000)
        ah_timer_start(c->pulse, wait_ms % 1000 ? wait_ms % 1000 : 1000);
}

/* An attempt begins: its silence is counted from now. */
static void pulse_attempt(ah_call *c)
{
    c->last_rx_ms = now_ms(c);
    c->silence_said = NULL;
    ah_timer_start(c->pulse, AH_CALL_SILENCE_NOTICE_MS);
}

/* What is left before a time-out ends this silence: the idle time-out of a stream, the
 * attempt's time-out (or the deadline) before the head; -1 when nothing will. */
static int64_t silence_left(ah_call *c, int64_t silent)
{
    int64_t left = -1;
    if (c->state == AH_CALL_STREAMING && c->policy.idle_timeout_ms > 0)
        left = c->policy.idle_timeout_ms - silent;
    if ((c->timer_role == ROLE_ATTEMPT_TIMEOUT || c->timer_role == ROLE_DEADLINE) &&
        ah_timer_active(c->timer)) {
        int64_t t = ah_timer_due_ms(c->timer) - now_ms(c);
        if (left < 0 || t < left)
            left = t;
    }
    return left < 0 ? -1 : left;
}

static void on_pulse(void *ud)
{
    ah_call *c = ud;
    if (cancel_pending(c))
        return; /* the cancel is on its way: nothing to say */
    int64_t now = now_ms(c);
    if (c->state == AH_CALL_WAIT && c->timer_role != ROLE_NONE) {
        int64_t left = c->wait_end_ms - now, secs = (left + 500) / 1000;
        if (secs < 1)
            return; /* the wait is over (or nearly): the attempt says so */
        emit_waiting(c, c->wait_what, now - c->wait_start_ms, left);
        if (secs > 1)
            ah_timer_start(c->pulse, left - (secs - 1) * 1000);
        return;
    }
    if ((c->state != AH_CALL_ATTEMPT && c->state != AH_CALL_STREAMING) || c->end_seen)
        return;
    int64_t silent = now - c->last_rx_ms;
    if (silent < AH_CALL_SILENCE_NOTICE_MS) { /* bytes came: lazily, from the last one */
        if (c->silence_said) {
            /* The silence it said is over (bytes that make no event, such as a tool
             * call's arguments, may be all that came): said once, with waited_ms 0. */
            const char *what = c->silence_said;
            c->silence_said = NULL;
            emit_waiting(c, what, 0, -1);
            if (cancel_pending(c) || is_terminal(c->state))
                return;
        }
        ah_timer_start(c->pulse, AH_CALL_SILENCE_NOTICE_MS - silent);
        return;
    }
    int64_t left = silence_left(c, silent);
    if (left >= 0 && left < 500)
        return; /* a time-out ends this silence now: that is what will be said */
    c->silence_said = c->state == AH_CALL_STREAMING ? "stream" : "response";
    emit_waiting(c, c->silence_said, silent, left);
    if (!cancel_pending(c))
        ah_timer_start(c->pulse, 1000 - silent % 1000);
}

/* ---- attempts and waits ---------------------------------------------------------- */

static void begin_attempt(ah_call *c);
static const char *describe(const ah_error *e, char *buf, size_t size);

/* The open stream broke (e: why, not yet redacted). Re-attach to the same response when
 * the resume hook can, else end INTERRUPTED. Called with no attempt in flight or from a
 * timer (the idle timeout), never with the transport in a callback of ours pending. */
static void stream_broke(ah_call *c, ah_error *e, const char *why)
{
    if (e->kind == AH_EK_NONE || e->kind == AH_EK_CANCELLED)
        ah_error_set(e, AH_EK_STREAM, 0, "response stream ended abnormally");
    ah_error_redact(e, (const char *const *)c->secrets);
    char *url = NULL;
    if (c->resume.reattach_url && !cancel_pending(c) &&
        c->continuation + c->resumes < c->policy.max_continuations)
        url = c->resume.reattach_url(c->resume.ud);
    if (!url) {
        stream_failed(c, e, why);
        return;
    }
    if (!c->break_err && !(c->break_err = malloc(sizeof *c->break_err))) {
        free(url);
        stream_failed(c, e, why); /* out of memory: no re-attach */
        return;
    }
    abort_attempt(c);
    stop_timers(c);
    *c->break_err = *e;
    free(c->reattach_url);
    c->reattach_url = url;
    c->reattach_req.url = url;
    c->resumes++;
    c->resuming = 1;
    ah__retry_new_phase(&c->retry);
    /* Info, not a warning: the llm_continuation event is what displays show (the
     * worker's continuations do not log either). */
    ah__log_event(AH_LOG_INFO, AH_EV_LLM_CONTINUATION,
                  "LLM request %d: %s; re-attaching to the response (%d/%d)", c->llm_call,
                  e->message, c->continuation + c->resumes, c->policy.max_continuations);
    ah_event ev = {.type = AH_EV_LLM_CONTINUATION};
    ev.u.llm_continuation.llm_call = c->llm_call;
    ev.u.llm_continuation.continuation = c->continuation + c->resumes;
    ev.u.llm_continuation.max_continuations = c->policy.max_continuations;
    ev.u.llm_continuation.mode = AH_CONT_RESUME;
    ev.u.llm_continuation.reason = e->message;
    emit(c, &ev);
    if (cancel_pending(c)) {
        finish_cancelled(c);
        return;
    }
    set_state(c, AH_CALL_WAIT, "re-attach");
    c->timer_role = ROLE_WAIT;
    ah_timer_start(c->timer, 0);
}

/* A re-attach was refused or gave up: the caller continues from the break, by its next
 * rung. */
static void resume_failed(ah_call *c, const char *what)
{
    ah__log(AH_LOG_INFO, "LLM request %d: re-attach %s (%s); continuing without it",
            c->llm_call, what,
            cerr(c)->message[0] ? cerr(c)->message : ah_error_kind_name(cerr(c)->kind));
    ah_error e = *c->break_err; /* set before the first re-attach */
    char cause[64], reason[AH_ERROR_MESSAGE_MAX];
    ah__bufprintf(reason, sizeof reason, "%s (re-attach %s: %s)", c->break_err->message,
                  what, describe(cerr(c), cause, sizeof cause));
    ah_error_set(&e, AH_EK_STREAM, 0, "%s", reason);
    finish(c, AH_CALL_INTERRUPTED, &e, "re-attach failed");
}

static const char *describe(const ah_error *e, char *buf, size_t size)
{
    if (e->kind == AH_EK_HTTP || (e->status && (e->kind == AH_EK_SPEND_LIMIT ||
                                                 e->kind == AH_EK_CONTEXT_EXCEEDED)))
        ah__bufprintf(buf, size, "HTTP %d", e->status);
    else if (e->kind == AH_EK_STREAM && e->provider_type[0])
        ah__bufprintf(buf, size, "in-stream %s", e->provider_type);
    else if (e->kind == AH_EK_STREAM)
        ah__bufprintf(buf, size, "stream cut");
    else
        ah__bufprintf(buf, size, "%s error", ah_error_kind_name(e->kind));
    return buf;
}

static void on_budget_verdict(void *ud, int allowed);
static void retry_or_give_up(ah_call *c, ah_decision d);
static void attempt_failed(ah_call *c, const ah_error *e);

/* The open stream is over with e and is not re-attached. A break its consumer calls a
 * failure of the request (the provider's own error, nothing of it kept) is decided by
 * the retry machine like a failed attempt; anything else ends INTERRUPTED at once. */
static void stream_failed(ah_call *c, ah_error *e, const char *why)
{
    if (e->kind == AH_EK_NONE || e->kind == AH_EK_CANCELLED)
        ah_error_set(e, AH_EK_STREAM, 0, "response stream ended abnormally");
    ah_error_redact(e, (const char *const *)c->secrets);
    if (e->kind == AH_EK_STREAM && c->stream.break_is_retry && !cancel_pending(c) &&
        c->stream.break_is_retry(c->stream.ud, e)) {
        abort_attempt(c); /* the idle timer's break: the transfer is still there */
        c->breaking = 1;
        attempt_failed(c, e);
        return;
    }
    finish(c, AH_CALL_INTERRUPTED, e, why);
}

/* "90 s", "1.5 s", "250 ms": a wait in words. */
static const char *words_ms(int64_t ms, char *buf, size_t size)
{
    if (ms < 1000)
        ah__bufprintf(buf, size, "%lld ms", (long long)ms);
    else if (ms % 1000 == 0 || ms >= 100000)
        ah__bufprintf(buf, size, "%lld s", (long long)((ms + 500) / 1000));
    else
        ah__bufprintf(buf, size, "%.1f s", (double)ms / 1000.0);
    return buf;
}

/* "<the error>; not retried: <why>" as the call's error message. */
static void append_why(ah_call *c, const char *why)
{
    char msg[AH_ERROR_MESSAGE_MAX];
    ah_error *e = c->err.e;
    if (!e)
        return; /* none, or not kept (out of memory) */
    ah__bufprintf(msg, sizeof msg, "%s; not retried: %s", e->message, why);
    memcpy(e->message, msg, sizeof msg);
}

/* A give-up whose cause is not the error itself (a hint too long, the deadline, the
 * retry budget) says why in the error's message, so the run's error and every line
 * that shows it tell the whole story: "HTTP 429 ...; not retried: the server asked to
 * wait 90 s, more than the 60 s allowed". */
static void explain_give_up(ah_call *c, const ah_decision *d)
{
    char why[160], a[32], b[32];
    int64_t left = c->policy.deadline_ms - elapsed(c);
    switch (d->reason) {
    case AH_GIVEUP_RETRY_AFTER_TOO_LONG:
        if (d->hint_ms > c->policy.max_retry_after_ms)
            ah__bufprintf(why, sizeof why,
                          "the server asked to wait %s, more than the %s allowed",
                          words_ms(d->hint_ms, a, sizeof a),
                          words_ms(c->policy.max_retry_after_ms, b, sizeof b));
        else
            ah__bufprintf(why, sizeof why,
                          "the server asked to wait %s, more than the %s left before the "
                          "deadline",
                          words_ms(d->hint_ms, a, sizeof a),
                          words_ms(left > 0 ? left : 0, b, sizeof b));
        break;
    case AH_GIVEUP_DEADLINE:
        ah__bufprintf(why, sizeof why,
                      "the next attempt, in %s, would start after the deadline of %s",
                      words_ms(d->wait_ms, a, sizeof a),
                      words_ms(c->policy.deadline_ms, b, sizeof b));
        break;
    case AH_GIVEUP_RETRY_BUDGET:
        ah__bufprintf(why, sizeof why,
                      "the retry budget is spent (too many retries across the runs that "
                      "share it)");
        break;
    default:
        return;
    }
    append_why(c, why);
}

/* A retry goes ahead: its warning line and llm_retry event, BEFORE the wait starts (so a
 * display shows it at once). Numbered like the status display: the attempt that comes
 * next. The failed attempt may be another request's (a broken stream's, retry_of). */
static void announce_retry(ah_call *c, int llm_call, int failed_attempt,
                           const ah_decision *d, int64_t elapsed_ms)
{
    char what[64];
    char who[80];
    int saved = c->llm_call;
    c->llm_call = llm_call; /* the label names the request that failed */
    ah__log_event(AH_LOG_WARN, AH_EV_LLM_RETRY,
                  "%s: %s, retrying (attempt %d/%d in %lld ms, %s): %s",
                  label(c, who, sizeof who), describe(cerr(c), what, sizeof what),
                  failed_attempt + 1, c->policy.max_attempts, (long long)d->wait_ms,
                  ah_wait_source_name(d->wait_source), cerr(c)->message);
    c->llm_call = saved;
    ah_event ev = {.type = AH_EV_LLM_RETRY};
    ev.u.llm_retry.llm_call = llm_call;
    ev.u.llm_retry.failed_attempt = failed_attempt;
    ev.u.llm_retry.max_attempts = c->policy.max_attempts;
    ev.u.llm_retry.wait_ms = d->wait_ms;
    ev.u.llm_retry.wait_source = d->wait_source;
    ev.u.llm_retry.elapsed_ms = elapsed_ms;
    ev.u.llm_retry.status = cerr(c)->status;
    ev.u.llm_retry.error = cerr(c);
    emit(c, &ev);
}

/* The first step of a call that follows a broken request whose retry was granted: its
 * llm_retry, then its wait, then attempt failed_attempt + 1. */
static void start_with_retry(ah_call *c)
{
    ah_call_retry taken = *c->retry_of, *r = &taken;
    free(c->retry_of);
    c->retry_of = NULL;
    c->retry.attempts = r->failed_attempt;
    ah__eslot_set(&c->err, &r->error);
    ah_decision d = {1, r->wait_ms, r->wait_source, AH_GIVEUP_COUNT_, r->wait_ms, -1};
    announce_retry(c, r->llm_call, r->failed_attempt, &d, r->elapsed_ms);
    if (cancel_pending(c)) {
        finish_cancelled(c);
        return;
    }
    set_state(c, AH_CALL_WAIT, ah_wait_source_name(d.wait_source));
    c->timer_role = ROLE_WAIT;
    int64_t wait = ah__retry_wait(&c->retry, &d);
    ah_timer_start(c->timer, wait);
    pulse_wait(c, "retry", wait);
}

static ah_decision budget_refused(ah_decision d)
{
    d.retry = 0;
    d.reason = AH_GIVEUP_RETRY_BUDGET;
    return d;
}

/* An attempt failed before any stream opened: decide, then WAIT or GAVE_UP. */
static void attempt_failed(ah_call *c, const ah_error *e)
{
    ah_timer_stop(c->idle);
    ah_timer_stop(c->pulse);
    ah_timer_stop(c->timer);
    c->timer_role = ROLE_NONE;
    clear_error_response(c);
    ah__eslot_set(&c->err, e);
    if (c->err.e)
        ah_error_redact(c->err.e, (const char *const *)c->secrets);
    if (cancel_pending(c)) {
        finish_cancelled(c);
        return;
    }
    ah_decision d = c->breaking ? ah__retry_break_verdict(&c->retry, cerr(c))
                                : ah__retry_verdict(&c->retry, cerr(c));
    if (d.retry && c->breaking &&
        c->continuation + c->resumes >= c->policy.max_continuations) {
        /* The continuation cap, before any token is spent: the caller fails with it. */
        c->breaking = 0;
        finish(c, AH_CALL_INTERRUPTED, cerr(c), "continuation cap");
        return;
    }
    /* A shared budget decides last, asynchronously: the rest of the decision first. */
    int shared = c->budget && ah_retry_budget_is_shared(c->budget);
    d = ah__retry_schedule(&c->retry, d, cerr(c), now_ms(c), ah_loop_rng(c->loop),
                           shared ? NULL : c->budget);
    if (d.retry && shared) {
        ah_redis_req *q = NULL;
        int v = ah_retry_budget_spend_async(c->budget, on_budget_verdict, c, &q);
        if (v < 0) {
            c->pending = q;
            c->pending_d = d;
            set_state(c, AH_CALL_WAIT, "retry budget verdict");
            return;
        }
        if (!v)
            d = budget_refused(d);
    }
    retry_or_give_up(c, d);
}

static void on_budget_verdict(void *ud, int allowed)
{
    ah_call *c = ud;
    c->pending = NULL;
    if (cancel_pending(c)) {
        finish_cancelled(c);
        return;
    }
    retry_or_give_up(c, allowed ? c->pending_d : budget_refused(c->pending_d));
}

static void retry_or_give_up(ah_call *c, ah_decision d)
{
    if (!d.retry) {
        if (c->resuming && !c->breaking) {
            resume_failed(c, d.reason == AH_GIVEUP_NOT_RETRYABLE ? "refused" : "gave up");
            return;
        }
        c->breaking = 0;
        c->reason = d.reason;
        explain_give_up(c, &d);
        finish(c, AH_CALL_GAVE_UP, cerr(c), ah_giveup_reason_name(d.reason));
        return;
    }
    if (c->breaking) {
        /* The break may go on: the next request (built by the caller) carries the
         * decision, announces it and waits it out. */
        c->breaking = 0;
        c->granted = 1;
        c->granted_retry.failed_attempt = c->retry.attempts;
        c->granted_retry.max_attempts = c->policy.max_attempts;
        c->granted_retry.wait_ms = d.wait_ms;
        c->granted_retry.wait_source = d.wait_source;
        c->granted_retry.elapsed_ms = elapsed(c);
        finish(c, AH_CALL_INTERRUPTED, cerr(c), "retry granted");
        return;
    }
    announce_retry(c, c->llm_call, c->retry.attempts, &d, elapsed(c));
    if (cancel_pending(c)) {
        finish_cancelled(c);
        return;
    }
    set_state(c, AH_CALL_WAIT, ah_wait_source_name(d.wait_source));
    c->timer_role = ROLE_WAIT;
    int64_t wait = ah__retry_wait(&c->retry, &d);
    ah_timer_start(c->timer, wait);
    pulse_wait(c, "retry", wait);
}

static void on_timer(void *ud)
{
    ah_call *c = ud;
    timer_role role = c->timer_role;
    c->timer_role = ROLE_NONE;
    if (role == ROLE_CANCEL_SEND) {
        send_cancel(c);
        return;
    }
    if (role == ROLE_CANCEL_WAIT) {
        if (c->cancel_attempt) {
            void *a = c->cancel_attempt;
            c->cancel_attempt = NULL;
            c->tr->ops->abort(c->tr->self, a);
        }
        finish_cancelled(c);
        return;
    }
    if (cancel_pending(c)) {
        finish_cancelled(c);
        return;
    }
    ah_error e;
    switch (role) {
    case ROLE_START:
        if (c->retry_of) {
            start_with_retry(c);
            return;
        }
        begin_attempt(c);
        return;
    case ROLE_WAIT:
    case ROLE_PACE:
        begin_attempt(c);
        return;
    case ROLE_ATTEMPT_TIMEOUT:
        abort_attempt(c); /* removed from the loop now: no dangling request */
        if (c->policy.deadline_ms > 0 && elapsed(c) >= c->policy.deadline_ms)
            ah_error_set(&e, AH_EK_TIMEOUT, 0,
                         "deadline of %lld ms reached during attempt %d",
                         (long long)c->policy.deadline_ms, c->retry.attempts);
        else
            ah_error_set(&e, AH_EK_TIMEOUT, 0, "attempt %d timed out after %lld ms",
                         c->retry.attempts, (long long)c->policy.attempt_timeout_ms);
        attempt_failed(c, &e);
        return;
    case ROLE_DEADLINE:
        /* A timeout, not a stream cut: the deadline covers the continuations too, so
         * the worker does not continue this one. */
        ah_error_set(&e, AH_EK_TIMEOUT, 0, "deadline of %lld ms reached while streaming",
                     (long long)c->policy.deadline_ms);
        finish_interrupted(c, &e, "deadline");
        return;
    case ROLE_AFTER_END:
        abort_attempt(c); /* a connection held open after the end: drop it */
        finish_complete(c, NULL);
        return;
    case ROLE_NONE:
    case ROLE_CANCEL_SEND:
    case ROLE_CANCEL_WAIT:
        return;
    }
}

static int64_t error_body_idle_ms(const ah_call *c)
{
    return c->policy.idle_timeout_ms > 0 ? c->policy.idle_timeout_ms : ERROR_BODY_IDLE_MS;
}

/* The idle timer is lazy: chunks only record their arrival time; when the timer fires
 * early it re-arms for the rest, so the hot path costs one clock read per chunk. It also
 * bounds a non-2xx body that stalls (ATTEMPT). */
static void on_idle(void *ud)
{
    ah_call *c = ud;
    if (c->state == AH_CALL_ATTEMPT && c->attempt && c->status != 0) {
        /* A non-2xx body is being read: one that stalls is a (retryable) timeout. */
        int64_t silent = now_ms(c) - c->last_rx_ms, limit = error_body_idle_ms(c);
        if (silent < limit) {
            ah_timer_start(c->idle, limit - silent);
            return;
        }
        abort_attempt(c);
        ah_error e;
        ah_error_set(&e, AH_EK_TIMEOUT, 0,
                     "the HTTP %d error body stalled for %lld ms (after %zu bytes)",
                     c->status, (long long)silent, c->elen);
        attempt_failed(c, &e);
        return;
    }
    if (c->state != AH_CALL_STREAMING || c->end_seen)
        return;
    int64_t silent = now_ms(c) - c->last_rx_ms;
    if (silent < c->policy.idle_timeout_ms) {
        ah_timer_start(c->idle, c->policy.idle_timeout_ms - silent);
        return;
    }
    ah_error e;
    ah_error_set(&e, AH_EK_STREAM, 0, "stream idle for %lld ms (idle_timeout_ms %lld)",
                 (long long)silent, (long long)c->policy.idle_timeout_ms);
    stream_broke(c, &e, "idle timeout");
}

static void on_async(void *ud)
{
    ah_call *c = ud;
    if (cancel_pending(c) && !is_terminal(c->state) && c->state != AH_CALL_IDLE &&
        !c->cancelling)
        finish_cancelled(c);
    /* Cancelled between ah_call_start() and its first step: the start timer finishes it
     * as cancelled (begin_attempt checks first). */
}

/* ---- transport sink -------------------------------------------------------------- */

/* Keep the stream consumer's verdict for sink_done (the transfer ends first). */
static void consumer_failed(ah_call *c, const ah_error *e)
{
    c->consumer_failed = 1;
    if (!c->consumer_err)
        c->consumer_err = malloc(sizeof *c->consumer_err);
    if (c->consumer_err)
        *c->consumer_err = *e;
}

static int sink_head(void *ud, int status, const ah_header *h, size_t n)
{
    ah_call *c = ud;
    c->status = status;
    if (c->rate_limit) /* a limit the provider says is exhausted holds the schedule */
        ah__rate_limit_observe(c->rate_limit, c->loop, h, n, c->policy.max_retry_after_ms);
    if (status < 200 || status > 299) {
        keep_error_head(c, h, n); /* the body follows; the attempt timer still runs */
        c->last_rx_ms = now_ms(c);
        ah_timer_start(c->idle, error_body_idle_ms(c));
        return cancel_pending(c);
    }
    /* The commit point: from here on this request is never resent. */
    ah_timer_stop(c->timer);
    c->timer_role = ROLE_NONE;
    set_state(c, AH_CALL_STREAMING, "response head");
    if (c->policy.deadline_ms > 0) {
        c->timer_role = ROLE_DEADLINE;
        ah_timer_start(c->timer, c->policy.deadline_ms - elapsed(c));
    }
    c->last_rx_ms = now_ms(c); /* the silence of the stream counts from its head */
    if (c->policy.idle_timeout_ms > 0)
        ah_timer_start(c->idle, c->policy.idle_timeout_ms);
    if (c->stream.on_open) {
        ah_error ce;
        ah_error_clear(&ce);
        if (c->stream.on_open(c->stream.ud, status, h, n, &ce) != 0) {
            if (ce.kind == AH_EK_NONE)
                ah_error_set(&ce, AH_EK_STREAM, 0,
                             "the stream consumer rejected the response (HTTP %d)",
                             status);
            consumer_failed(c, &ce);
            return 1;
        }
    }
    return cancel_pending(c);
}

static int sink_body(void *ud, const char *buf, size_t len)
{
    ah_call *c = ud;
    if (c->state != AH_CALL_STREAMING) {
        c->last_rx_ms = now_ms(c);
        keep_error_body(c, buf, len);
        if (c->elen >= ERROR_BODY_MAX) {
            /* Enough to classify it: drop the connection rather than drain the rest. */
            c->ebody_full = 1;
            return 1;
        }
        return cancel_pending(c);
    }
    if (c->end_seen)
        return cancel_pending(c); /* bytes after the final event are not the answer */
    c->last_rx_ms = now_ms(c); /* for the idle time-out and llm_waiting */
    if (c->stream.on_data) {
        ah_error ce;
        ah_error_clear(&ce);
        if (c->stream.on_data(c->stream.ud, buf, len, &ce) != 0) {
            if (ce.kind == AH_EK_NONE)
                ah_error_set(&ce, AH_EK_STREAM, 0, "the stream consumer stopped the stream");
            consumer_failed(c, &ce);
            return 1;
        }
    }
    if (c->stream.ended && c->stream.ended(c->stream.ud)) {
        /* The final event: the answer is complete. The connection gets a short grace to
         * end cleanly (so it can be reused); after that, or on any error, it is DONE. */
        c->end_seen = 1;
        ah_timer_stop(c->idle);
        c->timer_role = ROLE_AFTER_END;
        ah_timer_start(c->timer, END_GRACE_MS);
    }
    return cancel_pending(c);
}

static void sink_done(void *ud, const ah_error *terr)
{
    ah_call *c = ud;
    c->attempt = NULL; /* the transport has released it */
    if (cancel_pending(c)) {
        finish_cancelled(c);
        return;
    }
    ah_error e;
    if (c->state == AH_CALL_STREAMING) {
        if (c->consumer_failed) {
            if (c->consumer_err) {
                e = *c->consumer_err;
            } else {
                ah_error_clear(&e);
                ah_error_set(&e, AH_EK_STREAM, 0,
                             "the stream consumer stopped the stream (its error was lost: "
                             "out of memory)");
            }
            stream_failed(c, &e, "stream consumer");
        } else {
            finish_complete(c, terr); /* a cut, unless the final event arrived */
        }
        return;
    }
    if (terr->kind == AH_EK_NONE || (c->ebody_full && terr->kind == AH_EK_CANCELLED)) {
        /* A complete non-2xx response (or its first 64 KiB): classify it with its hints
         * and body. */
        ah_error_from_http(&e, c->status, c->eh, c->neh, c->ebody, c->elen,
                           ah_loop_wall_ms(c->loop), (const char *const *)c->secrets);
        keep_last_response(c);
    } else {
        e = *terr;
    }
    attempt_failed(c, &e);
}

static const ah_transport_sink call_sink = {sink_head, sink_body, sink_done, NULL};

/* A paced attempt: say so, then wait on the timer (1), or go now (0), or give up when the
 * wait does not fit the deadline (1). */
static int pace_wait(ah_call *c, int64_t wait_ms, const char *limit)
{
    c->paced = 1;
    if (wait_ms <= 0)
        return 0;
    if (c->policy.deadline_ms > 0 && wait_ms >= c->policy.deadline_ms - elapsed(c)) {
        ah_error_set(ah__eslot_own(&c->err), AH_EK_TIMEOUT, 0,
                     "rate limit: a paced wait of %lld ms (%s) does not fit the deadline of "
                     "%lld ms",
                     (long long)wait_ms, limit, (long long)c->policy.deadline_ms);
        c->reason = AH_GIVEUP_DEADLINE;
        finish(c, AH_CALL_GAVE_UP, cerr(c), "paced past the deadline");
        return 1;
    }
    ah__log_event(AH_LOG_INFO, AH_EV_LLM_PACED, "LLM request %d: paced %lld ms (%s)",
                  c->llm_call, (long long)wait_ms, limit);
    ah_event ev = {.type = AH_EV_LLM_PACED};
    ev.u.llm_paced.llm_call = c->llm_call;
    ev.u.llm_paced.wait_ms = wait_ms;
    ev.u.llm_paced.limit = limit;
    emit(c, &ev);
    if (cancel_pending(c)) {
        finish_cancelled(c);
        return 1;
    }
    set_state(c, AH_CALL_WAIT, "paced");
    c->timer_role = ROLE_PACE;
    ah_timer_start(c->timer, wait_ms);
    pulse_wait(c, "pace", wait_ms);
    return 1;
}

static void on_pace_verdict(void *ud, int64_t wait_ms, const char *limit)
{
    ah_call *c = ud;
    c->pending = NULL;
    if (cancel_pending(c)) {
        finish_cancelled(c);
        return;
    }
    if (pace_wait(c, wait_ms, limit))
        return;
    begin_attempt(c);
}

static void begin_attempt(ah_call *c)
{
    if (cancel_pending(c)) {
        finish_cancelled(c);
        return;
    }
    int64_t remaining = -1;
    if (c->policy.deadline_ms > 0) {
        remaining = c->policy.deadline_ms - elapsed(c);
        if (remaining <= 0) {
            /* A wait ended (late) on the deadline: no attempt could finish in time. */
            if (cerr(c)->kind == AH_EK_NONE) {
                ah_error_set(ah__eslot_own(&c->err), AH_EK_TIMEOUT, 0, "deadline of %lld ms reached",
                             (long long)c->policy.deadline_ms);
            } else {
                char why[96], a[32];
                ah__bufprintf(why, sizeof why, "the deadline of %s was reached",
                              words_ms(c->policy.deadline_ms, a, sizeof a));
                append_why(c, why);
            }
            c->reason = AH_GIVEUP_DEADLINE;
            finish(c, AH_CALL_GAVE_UP, cerr(c), "deadline");
            return;
        }
    }
    if (c->rate_limit && !c->paced) {
        int64_t w = 0;
        const char *limit = NULL;
        ah_redis_req *q = NULL;
        if (ah_rate_limit_acquire(c->rate_limit, c->loop, &w, &limit, on_pace_verdict, c,
                                  &q)) {
            c->pending = q;
            set_state(c, AH_CALL_WAIT, "pacing verdict");
            return;
        }
        if (pace_wait(c, w, limit))
            return;
    }
    c->paced = 0;
    ah__retry_attempt(&c->retry);
    c->total_attempts++;
    c->status = 0;
    c->consumer_failed = 0;
    c->end_seen = 0;
    c->ebody_full = 0;
    clear_error_response(c);
    set_state(c, AH_CALL_ATTEMPT, "start");
    ah_event ev = {.type = AH_EV_LLM_CALL_START};
    ev.u.llm_call_start.llm_call = c->llm_call;
    ev.u.llm_call_start.attempt = c->retry.attempts;
    ev.u.llm_call_start.continuation = c->continuation + c->resumes;
    emit(c, &ev);
    if (cancel_pending(c)) {
        finish_cancelled(c);
        return;
    }
    /* The attempt's timeout, bounded by what is left of the deadline. */
    int64_t t = c->policy.attempt_timeout_ms > 0 ? c->policy.attempt_timeout_ms : -1;
    if (remaining > 0 && (t < 0 || remaining < t))
        t = remaining;
    if (t > 0) {
        c->timer_role = ROLE_ATTEMPT_TIMEOUT;
        ah_timer_start(c->timer, t);
    }
    ah_error e;
    ah_error_clear(&e);
    void *a = NULL;
    const ah_http_request *req = c->resuming ? &c->reattach_req : &c->req;
    if (c->tr->ops->start(c->tr->self, c->loop, req, &call_sink, c, &a, &e) != AH_OK) {
        if (e.kind == AH_EK_NONE)
            ah_error_set(&e, AH_EK_CONNECT, 0, "cannot start the request");
        attempt_failed(c, &e);
        return;
    }
    c->attempt = a;
    pulse_attempt(c);
}

/* ---- construction ---------------------------------------------------------------- */

static int add_secret(char ***list, size_t *n, const char *s, size_t len)
{
    if (len == 0)
        return 0;
    char **l = realloc(*list, (*n + 2) * sizeof *l);
    if (!l)
        return -1;
    *list = l;
    l[*n] = ah__strndup(s, len);
    if (!l[*n])
        return -1;
    l[++*n] = NULL;
    return 0;
}

static int is_secret_header(const char *name)
{
    int c0 = name[0] | 0x20; /* the first letter in lower case: most headers stop here */
    if (c0 != 'a' && c0 != 'x' && c0 != 'p')
        return 0;
    return strcasecmp(name, "authorization") == 0 || strcasecmp(name, "x-api-key") == 0 ||
           strcasecmp(name, "api-key") == 0 ||
           strcasecmp(name, "proxy-authorization") == 0;
}

/* Copy the request into one buffer the call owns, and collect the secrets. */
static ah_status copy_request(ah_call *c, const ah_call_config *cfg)
{
    const ah_http_request *r = &cfg->request;
    size_t total = strlen(r->method ? r->method : "POST") + 1 + strlen(r->url) + 1 +
                   r->body_len + 1 + (r->ca_file ? strlen(r->ca_file) + 1 : 0) +
                   (r->ca_path ? strlen(r->ca_path) + 1 : 0);
    for (size_t i = 0; i < r->n_headers; i++) {
        if (!r->headers[i].name || !r->headers[i].value)
            return AH_ERR_INVALID;
        total += strlen(r->headers[i].name) + strlen(r->headers[i].value) + 2;
    }
    /* One block: the header arrays of the request and of its re-attach, then the
     * strings (reqbuf is its start, freed alone). */
    size_t arrays = 2 * r->n_headers * sizeof(ah_header);
    c->reqbuf = malloc(arrays + total);
    if (!c->reqbuf)
        return AH_ERR_NOMEM;
    c->req_headers = r->n_headers ? (ah_header *)(void *)c->reqbuf : NULL;
    c->reattach_headers = r->n_headers ? c->req_headers + r->n_headers : NULL;
    char *p = c->reqbuf + arrays;
#define COPY(dst, src, len)                                                              \
    do {                                                                                 \
        memcpy(p, (src), (len));                                                         \
        p[(len)] = '\0';                                                                 \
        (dst) = p;                                                                       \
        p += (len) + 1;                                                                  \
    } while (0)
    const char *m = r->method ? r->method : "POST";
    COPY(c->req.method, m, strlen(m));
    COPY(c->req.url, r->url, strlen(r->url));
    if (r->ca_file)
        COPY(c->req.ca_file, r->ca_file, strlen(r->ca_file));
    if (r->ca_path)
        COPY(c->req.ca_path, r->ca_path, strlen(r->ca_path));
    if (r->body) {
        char *b;
        COPY(b, r->body, r->body_len);
        c->req.body = b;
        c->req.body_len = r->body_len;
    }
    size_t nsec = 0;
    c->secrets = calloc(1, sizeof *c->secrets);
    if (!c->secrets)
        return AH_ERR_NOMEM;
    for (size_t i = 0; i < r->n_headers; i++) {
        const ah_header *h = &r->headers[i];
        COPY(c->req_headers[i].name, h->name, strlen(h->name));
        COPY(c->req_headers[i].value, h->value, strlen(h->value));
        if (is_secret_header(h->name)) {
            /* The whole value, and the token after a scheme ("Bearer sk-..."). */
            const char *sp = strchr(h->value, ' ');
            if (add_secret(&c->secrets, &nsec, h->value, strlen(h->value)) != 0 ||
                (sp && add_secret(&c->secrets, &nsec, sp + 1, strlen(sp + 1)) != 0))
                return AH_ERR_NOMEM;
        }
    }
#undef COPY
    c->req.headers = c->req_headers;
    c->req.n_headers = r->n_headers;
    /* The re-attach (and cancel) request: no body, so no Content-Type; same auth. */
    size_t nr = 0;
    for (size_t i = 0; i < r->n_headers; i++)
        if (strcasecmp(c->req_headers[i].name, "content-type") != 0)
            c->reattach_headers[nr++] = c->req_headers[i];
    c->reattach_req.method = "GET";
    c->reattach_req.headers = c->reattach_headers;
    c->reattach_req.n_headers = nr;
    c->reattach_req.ca_file = c->req.ca_file;
    c->reattach_req.ca_path = c->req.ca_path;
    for (const char *const *s = cfg->secrets; s && *s; s++)
        if (add_secret(&c->secrets, &nsec, *s, strlen(*s)) != 0)
            return AH_ERR_NOMEM;
    return AH_OK;
}

ah_status ah_call_new(const ah_call_config *cfg, ah_call **out, char *errbuf,
                      size_t errsize)
{
    ah_status st = AH_ERR_NOMEM;
    if (errbuf && errsize)
        errbuf[0] = '\0';
    if (!out)
        return AH_ERR_INVALID;
    *out = NULL;
    if (!cfg || !cfg->loop || !cfg->request.url) {
        if (errbuf && errsize)
            ah__bufprintf(errbuf, errsize, "call: %s is required",
                          !cfg || !cfg->loop ? "loop" : "request.url");
        return AH_ERR_INVALID;
    }
    ah_call *c = calloc(1, sizeof *c);
    if (!c)
        return AH_ERR_NOMEM;
    atomic_init(&c->cancel_requested, 0);
    c->loop = cfg->loop;
    c->tr = cfg->transport ? cfg->transport : ah_transport_curl();
    if (cfg->policy)
        c->policy = *cfg->policy;
    else
        ah_policy_init(&c->policy);
    st = ah_policy_validate(&c->policy, errbuf, errsize);
    if (st != AH_OK)
        goto fail;
    ah__retry_init(&c->retry, &c->policy, AH__RETRY_LLM);
    c->budget = cfg->retry_budget;
    c->rate_limit = cfg->rate_limit;
    c->stream = cfg->stream;
    c->resume = cfg->resume;
    c->on_event = cfg->on_event;
    c->event_ud = cfg->event_ud;
    c->handles_give_up = cfg->handles_give_up;
    c->on_finish = cfg->on_finish;
    c->finish_ud = cfg->finish_ud;
    c->llm_call = cfg->llm_call;
    if (cfg->run_id)
        ah__bufcpy(c->run_id, sizeof c->run_id, cfg->run_id);
    c->continuation = cfg->continuation;
    if (cfg->retry_of) {
        c->retry_of = malloc(sizeof *c->retry_of);
        if (!c->retry_of) {
            st = AH_ERR_NOMEM;
            goto fail;
        }
        *c->retry_of = *cfg->retry_of;
    }
    c->state = AH_CALL_IDLE;
    c->reason = AH_GIVEUP_COUNT_;
    st = copy_request(c, cfg);
    if (st != AH_OK) {
        if (st == AH_ERR_INVALID && errbuf && errsize)
            ah__bufprintf(errbuf, errsize, "call: a request header has no name or value");
        goto fail;
    }
    st = AH_ERR_NOMEM;
    c->timer = ah_timer_new(c->loop, on_timer, c);
    c->idle = ah_timer_new(c->loop, on_idle, c);
    c->pulse = ah_timer_new(c->loop, on_pulse, c);
    c->async = ah_async_new(c->loop, on_async, c);
    if (!c->timer || !c->idle || !c->pulse || !c->async)
        goto fail;
    *out = c;
    return AH_OK;
fail:
    ah_call_free(c);
    return st;
}

void ah_call_free(ah_call *c)
{
    if (!c)
        return;
    abort_attempt(c);
    ah_redis_req_cancel(c->pending);
    if (c->cancel_attempt)
        c->tr->ops->abort(c->tr->self, c->cancel_attempt);
    ah_timer_free(c->timer);
    ah_timer_free(c->idle);
    ah_timer_free(c->pulse);
    ah_async_free(c->async);
    clear_error_response(c);
    free(c->ebody);
    free(c->last_h);
    free(c->last_hbuf);
    free(c->last_body);
    for (char **s = c->secrets; s && *s; s++)
        free(*s);
    free(c->secrets);
    free(c->reattach_url);
    free(c->cancel_url);
    free(c->reqbuf);
    free(c->break_err);
    free(c->consumer_err);
    free(c->retry_of);
    ah__eslot_free(&c->err);
    free(c);
}

ah_status ah_call_start(ah_call *c)
{
    if (!c)
        return AH_ERR_INVALID;
    if (c->state != AH_CALL_IDLE || c->started)
        return AH_ERR_STATE;
    /* Nothing happens inside this function but arming a zero-delay timer: the first
     * attempt, and so every event and on_finish (a transport whose start() fails, a
     * policy that refuses at once), come from a later loop step, never from inside the
     * call that started the work (libuv's rule). A caller may therefore change its own
     * state after ah_call_start() returns and still see the completion. */
    c->started = 1;
    ah__retry_start(&c->retry, now_ms(c));
    c->timer_role = ROLE_START;
    ah_timer_start(c->timer, 0);
    return AH_OK;
}

ah_call_state ah_call_run(ah_call *c)
{
    if (c->state == AH_CALL_IDLE && !c->started && ah_call_start(c) != AH_OK)
        return c->state;
    while (!is_terminal(c->state)) {
        if (ah_loop_run_once(c->loop, -1) != AH_OK)
            break; /* the loop failed (logged); the call is left as it is */
    }
    return c->state;
}

void ah_call_cancel(ah_call *c)
{
    if (!c)
        return;
    atomic_store(&c->cancel_requested, 1);
    ah_async_send(c->async);
}

ah_call_state ah_call_get_state(const ah_call *c)
{
    return c->state;
}

int ah_call_finished(const ah_call *c)
{
    return is_terminal(c->state);
}

const ah_error *ah_call_error(const ah_call *c)
{
    return cerr(c);
}

int ah_call_attempts(const ah_call *c)
{
    return c->total_attempts;
}

int ah_call_resumes(const ah_call *c)
{
    return c->resumes;
}

int ah_call_http_status(const ah_call *c)
{
    return c->status;
}

int64_t ah_call_elapsed_ms(const ah_call *c)
{
    if (c->state == AH_CALL_IDLE)
        return 0;
    return (is_terminal(c->state) ? c->end_ms : now_ms(c)) - c->retry.start_ms;
}

int ah_call_retry_granted(const ah_call *c, ah_call_retry *out)
{
    if (!c || c->state != AH_CALL_INTERRUPTED || !c->granted)
        return 0;
    if (out)
        *out = (ah_call_retry){.llm_call = c->llm_call,
                               .failed_attempt = c->granted_retry.failed_attempt,
                               .max_attempts = c->granted_retry.max_attempts,
                               .wait_ms = c->granted_retry.wait_ms,
                               .wait_source = c->granted_retry.wait_source,
                               .elapsed_ms = c->granted_retry.elapsed_ms,
                               .error = *cerr(c)};
    return 1;
}

ah_giveup_reason ah_call_giveup_reason(const ah_call *c)
{
    return c->state == AH_CALL_GAVE_UP ? c->reason : AH_GIVEUP_COUNT_;
}

int ah_call_last_response(const ah_call *call, const ah_header **headers, size_t *n,
                          const char **body, size_t *len)
{
    if (headers)
        *headers = call ? call->last_h : NULL;
    if (n)
        *n = call ? call->last_n : 0;
    if (body)
        *body = call ? call->last_body : NULL;
    if (len)
        *len = call ? call->last_len : 0;
    return call ? call->last_status : 0;
}
