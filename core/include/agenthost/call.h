/* agenthost/call.h - one LLM request as a state machine: attempts, backoff waits, the
 * stream, and exactly one terminal state (docs/transport-and-retry.md).
 *
 *   ATTEMPT ──head 2xx──▶ STREAMING ──complete──▶ DONE
 *      │                      └──cut / idle / consumer error / deadline──▶ INTERRUPTED
 *      └──error before the stream──▶ decide ──retry──▶ WAIT (a timer) ──▶ ATTEMPT
 *                                      └──no──▶ GAVE_UP
 *   (any state) ──cancel──▶ CANCELLED
 *   STREAMING ──break, resume hook gives a URL──▶ WAIT (0 ms) ──▶ ATTEMPT (GET) ──▶ …
 *   STREAMING ──break the consumer calls a failed attempt──▶ decide ──▶ INTERRUPTED with
 *                                           a granted retry (ah_call_retry_granted)
 *                                                         └──no──▶ GAVE_UP
 *
 * The call never resends once the stream is open: a failure after the response head
 * reaches the caller as a `stream` error (INTERRUPTED) so the worker can continue from
 * what was committed. A break that is a failure of the request (the provider's own error
 * in the stream, or nothing of the response kept: the consumer's break_is_retry says so)
 * is first decided by the retry machine like a failed attempt — attempts, backoff,
 * Retry-After, deadline, a retry-budget token — and the next request (built by the
 * caller, a continuation or the same request again) carries that decision: it emits the
 * llm_retry and waits before its first attempt (ah_call_config.retry_of).
 *
 * It does not parse provider formats: the stream's bytes go to the caller's
 * ah_stream_fns (the decoder plugs in there).
 *
 * Two drivers over the same steps: a non-blocking one (ah_call_start, then step the loop;
 * on_finish tells when it is over) and a blocking wrapper, ah_call_run().
 *
 * Threads: everything on the loop's thread, except ah_call_cancel() (any thread).
 */
#ifndef AGENTHOST_CALL_H
#define AGENTHOST_CALL_H

#include "agenthost/export.h"

#include "agenthost/error.h"
#include "agenthost/event.h"
#include "agenthost/loop.h"
#include "agenthost/policy.h"
#include "agenthost/status.h"
#include "agenthost/transport.h"

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* X(NAME, "name") */
#define AH_CALL_STATE_MAP(X)                                                              \
    X(IDLE, "idle")                                                                       \
    X(ATTEMPT, "attempt")                                                                 \
    X(WAIT, "wait")                                                                       \
    X(STREAMING, "streaming")                                                             \
    X(DONE, "done")                                                                       \
    X(INTERRUPTED, "interrupted")                                                         \
    X(GAVE_UP, "gave_up")                                                                 \
    X(CANCELLED, "cancelled")

typedef enum ah_call_state {
#define AH__CS_ENUM(name, s) AH_CALL_##name,
    AH_CALL_STATE_MAP(AH__CS_ENUM)
#undef AH__CS_ENUM
        AH_CALL_STATE_COUNT_
} ah_call_state;

AH_EXPORT const char *ah_call_state_name(ah_call_state s); /* "unknown" out of range */

typedef struct ah_call ah_call;

/* The stream consumer. All optional. Data passed in is borrowed for the call only.
 *   on_open  the 2xx head arrived: the stream is open (the commit point). Nonzero ends
 *            the call as INTERRUPTED with *err (e.g. a proxy's text/html 200).
 *   on_data  body bytes of the open stream. Return 0 to go on; nonzero ends the call as
 *            INTERRUPTED with the error the consumer wrote to *err (kind `stream` is
 *            filled in when it left err untouched), e.g. a malformed or an in-stream
 *            provider error event.
 *   on_end   the response ended cleanly at the HTTP level. Return 0 if the stream was
 *            complete (DONE), nonzero with *err if the format says it was cut short
 *            (INTERRUPTED).
 *   ended    (after each on_data) 1 once the stream's final event has arrived (Anthropic
 *            message_stop, Chat [DONE], Responses response.completed/incomplete/failed).
 *            From then on the response is complete: later bytes are not passed on, and
 *            an unclean end (no final chunk, a reset, a short Content-Length) or a
 *            connection held open past a 1 s grace still ends the call DONE (after
 *            on_end). NULL = only a clean HTTP end completes the stream.
 *   break_is_retry  the open stream broke with a `stream` error (a cut, a reset, the idle
 *            timeout, an end before the format's end, a malformed or in-stream error
 *            event) and is not re-attached: return nonzero when the break is a failure of
 *            the request rather than a cut after content that is kept (the provider's
 *            own error, or nothing of the response would be kept). The call then decides
 *            it as a failed attempt (retry.h: the attempt bound, the continuation cap,
 *            the schedule, a budget token): GAVE_UP when it may not go on, else
 *            INTERRUPTED with the granted retry. 0 or NULL: INTERRUPTED at once.
 *            Called once per break, the stream being over; err is borrowed.
 * They run on the loop thread and may call ah_call_cancel(), never ah_call_free(). */
typedef struct ah_stream_fns {
    int (*on_open)(void *ud, int status, const ah_header *headers, size_t n,
                   ah_error *err);
    int (*on_data)(void *ud, const char *buf, size_t len, ah_error *err);
    int (*on_end)(void *ud, ah_error *err);
    void *ud;
    int (*ended)(void *ud);
    int (*break_is_retry)(void *ud, const ah_error *err);
} ah_stream_fns;

/* A retry the retry machine granted to a broken stream (ah_call_retry_granted), for the
 * request that follows it (ah_call_config.retry_of): plain data, copied. */
typedef struct ah_call_retry {
    int llm_call;       /* the request whose stream broke */
    int failed_attempt; /* its attempt number (the attempts of a chain go on from it) */
    int max_attempts;
    int64_t wait_ms; /* the wait before the next attempt (its budget token is spent) */
    ah_wait_source wait_source;
    int64_t elapsed_ms; /* of the broken request, at the decision */
    ah_error error;     /* the break (redacted) */
} ah_call_retry;

/* Re-attaching to the same response after its stream broke (OpenAI Responses in
 * background mode: the provider keeps generating whatever happens to the connection).
 * Optional; both functions return a malloc'd URL the call frees, or NULL.
 *   reattach_url  the open stream broke: a cut or reset reported by the transport, a clean
 *                 end before the format's end (on_end nonzero), or the idle timeout; never
 *                 a consumer's error, the deadline or a cancel. Called only while
 *                 cfg.continuation + the resumes so far < policy.max_continuations. Return
 *                 the URL to GET the rest of the response from (same headers, no body),
 *                 after getting the stream consumer ready for bytes that go on where the
 *                 last ones stopped; NULL = cannot (the call ends INTERRUPTED as without
 *                 this hook). Before each re-attach the call emits llm_continuation with
 *                 mode resume, then llm_call_start for each of its attempts. The
 *                 re-attach is a request of its own under the policy (its attempts are
 *                 counted from 1 and retried like any request's); if it is refused (a
 *                 non-retryable answer such as 404: the response is gone) or its retries
 *                 give up, the call ends INTERRUPTED with the stream error, so the caller
 *                 takes its next rung. A re-attached stream that completes ends the call
 *                 DONE, as if it had never broken.
 *   cancel_url    the call is being cancelled: the URL to POST to stop the response on the
 *                 provider's side, or NULL (nothing running there). Best effort: the
 *                 transfer is torn down at once and the cancel request sent; the call
 *                 reaches CANCELLED when it is answered or after AH_CALL_CANCEL_WAIT_MS,
 *                 whichever comes first. */
typedef struct ah_call_resume {
    char *(*reattach_url)(void *ud);
    char *(*cancel_url)(void *ud);
    void *ud;
} ah_call_resume;

#define AH_CALL_CANCEL_WAIT_MS 2000

/* llm_waiting (agenthost/event.h): a call says it is waiting once a second, during a
 * retry's or pacing's wait of more than a second, and while a request or a stream has
 * received nothing for at least this long. */
#define AH_CALL_SILENCE_NOTICE_MS 5000

/* Called once, when the call reaches a terminal state (DONE, INTERRUPTED, GAVE_UP,
 * CANCELLED), on the loop thread. It may free the call, except under ah_call_run(),
 * which reads the call's state after each step. */
typedef void (*ah_call_finish_fn)(void *ud, ah_call *call);

typedef struct ah_call_config {
    ah_loop *loop;                 /* required; borrowed, must outlive the call */
    const ah_transport *transport; /* NULL = ah_transport_curl() */
    ah_http_request request;       /* copied (url, headers, body) at ah_call_new */
    const ah_policy *policy;       /* copied; NULL = ah_policy_init() defaults */
    ah_retry_budget *retry_budget; /* shared across calls; optional, borrowed */
    /* Pacing before each attempt (agenthost/redis.h); optional, borrowed. A paced attempt
     * emits llm_paced, then waits on a timer. */
    struct ah_rate_limit *rate_limit;
    /* Strings never to appear in an error message (the API key): NULL-terminated list,
     * copied. Header values named authorization / x-api-key / api-key are added
     * automatically from the request. */
    const char *const *secrets;
    ah_stream_fns stream;
    ah_call_resume resume; /* optional (all NULL = never re-attach) */
    ah_event_fn on_event; /* llm_call_start, llm_retry, llm_paced, llm_waiting,
                             llm_gave_up, llm_continuation (resume); optional */
    void *event_ud;
    ah_call_finish_fn on_finish; /* optional */
    void *finish_ud;
    const char *run_id; /* the run this call belongs to, for events and log lines, or
                           NULL; copied */
    int llm_call;     /* this request's number within its run, for events */
    int continuation; /* 0 for a fresh request, n for the n-th continuation */
    /* Optional: this request follows a broken one whose retry was granted (copied). The
     * call then starts with that retry instead of an attempt: llm_retry (with the broken
     * request's llm_call, failed_attempt and error), the wait as a timer (WAIT), then
     * attempt failed_attempt + 1, the attempts of the chain bounded by max_attempts. */
    const ah_call_retry *retry_of;
    /* Optional: a give-up the caller handles itself (a continuation's refused prefill,
     * which it re-sends another way). Return nonzero and the call gives up silently: no
     * warning is logged and no llm_gave_up event is emitted. Same ud as on_event. */
    int (*handles_give_up)(void *ud, const ah_error *err);
} ah_call_config;

/* Create a call in state IDLE. Validates the policy: AH_ERR_INVALID with a message naming
 * the field in errbuf (may be NULL). AH_ERR_NOMEM on allocation failure. */
AH_EXPORT ah_status ah_call_new(const ah_call_config *cfg, ah_call **out, char *errbuf,
                                size_t errsize);
/* Abort whatever is in flight (no callbacks) and free. NULL is a no-op. Not from inside
 * the call's own stream/event callbacks (on_finish is fine). */
AH_EXPORT void ah_call_free(ah_call *call);

/* Schedule IDLE -> ATTEMPT 1 for the next loop step and return. Nothing else happens
 * inside this call: no event, no transport start() and never on_finish, even when the
 * first attempt fails at once and the policy gives up (the rule of libuv: no completion
 * callback fires from inside the call that started the work). AH_ERR_STATE if already
 * started. */
AH_EXPORT ah_status ah_call_start(ah_call *call);

/* Blocking driver: start the call if needed and step its loop until the call is finished.
 * Returns the terminal state. With a manual clock this advances nothing; use the
 * non-blocking driver there. */
AH_EXPORT ah_call_state ah_call_run(ah_call *call);

/* Request cancellation. Thread-safe and idempotent; callable from any callback. The call
 * reaches CANCELLED at the loop's next step (it wakes the loop), from any state: the
 * transfer is torn down, a backoff wait ends, no further attempt starts. A call that has
 * already finished is unaffected. */
AH_EXPORT void ah_call_cancel(ah_call *call);

AH_EXPORT ah_call_state ah_call_get_state(const ah_call *call);
AH_EXPORT int ah_call_finished(const ah_call *call); /* 1 in a terminal state */
/* The terminal error (kind NONE while running and after DONE). Borrowed. */
AH_EXPORT const ah_error *ah_call_error(const ah_call *call);
AH_EXPORT int ah_call_attempts(const ah_call *call);       /* attempts started so far (all) */
AH_EXPORT int ah_call_resumes(const ah_call *call);        /* re-attaches started (resume hook) */
AH_EXPORT int ah_call_http_status(const ah_call *call);    /* status of the last head, or 0 */
AH_EXPORT int64_t ah_call_elapsed_ms(const ah_call *call); /* since start (frozen when finished) */
/* INTERRUPTED after a break that break_is_retry called a failed attempt and the retry
 * machine let go on: 1 with *out filled (for the next request's retry_of); else 0. */
AH_EXPORT int ah_call_retry_granted(const ah_call *call, ah_call_retry *out);
/* The last complete non-2xx response any attempt received (a proxy answers a request
 * that finally failed with it): returns its status, 0 when no attempt got one (connect
 * errors, time-outs). Headers and body (at most 64 KiB of it, as received) are borrowed
 * until the call is freed; any pointer may be NULL. */
AH_EXPORT int ah_call_last_response(const ah_call *call, const ah_header **headers,
                                    size_t *n, const char **body, size_t *len);
/* Why the call gave up (GAVE_UP only; AH_GIVEUP_COUNT_ otherwise). */
AH_EXPORT ah_giveup_reason ah_call_giveup_reason(const ah_call *call);

#ifdef __cplusplus
}
#endif
#endif
