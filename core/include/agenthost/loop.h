/* agenthost/loop.h - the event loop: curl multi (socket API) + fd watchers + a timer heap +
 * the injected clock.
 *
 * One ah_loop runs every transfer, timer and cross-thread wake-up of the calls attached
 * to it, on the one thread that steps it. Nothing in the core sleeps: a backoff wait is a
 * timer, a stream is a transfer, a cancel is a flag plus a wake-up (ah_async).
 *
 * Two ways to wait. By default the loop waits itself, in poll(), inside
 * ah_loop_run_once() (the blocking calls and the Lua host step it). An application with
 * its own event loop (libuv, libev, epoll, a GUI main loop) creates it with
 * ah_loop_new_hooked() instead: the loop then tells the application which fds to watch and
 * when it next needs the time, and the application calls ah_loop_fd_ready() and
 * ah_loop_timeout() when its own loop sees them. No thread, no busy polling.
 * agenthost/uv.h is a ready adapter for libuv.
 *
 * Threads: every function here must be called on the loop's thread, except
 * ah_loop_wakeup() and ah_async_send(), which may be called from any thread.
 *
 * Virtual time: with a manual clock (ah_manual_clock) the loop never advances time by
 * itself. Drive it with ah_loop_run_once(loop, 0), read ah_loop_next_timer_ms() and advance
 * the clock: a 30 s backoff is then tested in microseconds.
 */
#ifndef AGENTHOST_LOOP_H
#define AGENTHOST_LOOP_H

#include "agenthost/export.h"

#include "agenthost/clock.h"
#include "agenthost/status.h"

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct ah_loop ah_loop;

/* Create a loop. clock NULL = the real clock; rng NULL = a private RNG seeded from the OS.
 * Both are borrowed and must outlive the loop. Returns NULL on allocation failure (or if
 * libcurl cannot be initialised). */
AH_EXPORT ah_loop *ah_loop_new(const ah_clock *clock, const ah_rng *rng);
/* ---- an application's own loop ----------------------------------------------------- */

#define AH_IO_READ 1
#define AH_IO_WRITE 2
/* The peer shut its side down or the connection failed (POLLRDHUP, POLLHUP, POLLERR), even
 * with bytes unread; watched alone, bytes arriving do not fire it. For an ah_io on the
 * loop's own backend, and on a hooked loop only when its hooks can watch it (the Lua
 * binding's epoll set can); else ah_io_start refuses it (AH_ERR_INVALID). Level-triggered
 * like the others: it stays ready once the peer left. */
#define AH_IO_HUP 4

/* What a hooked loop asks of the application's loop: watch, set_timeout and wakeup are
 * required, keep_alive is optional. */
typedef struct ah_loop_hooks {
    void *ud;
    /* Watch fd for AH_IO_READ and/or AH_IO_WRITE, replacing what was asked for it before;
     * events 0: stop watching it (it may be closed right after). Loop thread. When the
     * application's loop sees the fd ready it calls ah_loop_fd_ready(). */
    void (*watch)(void *ud, int fd, int events);
    /* Call ah_loop_timeout() once after ms milliseconds (0: as soon as possible), replacing
     * the previous request; ms -1: nothing timed is pending. Loop thread. */
    void (*set_timeout)(void *ud, int64_t ms);
    /* Make the application's loop call ah_loop_timeout() soon, from its own thread. Called
     * from ANY thread (ah_loop_wakeup, ah_async_send): it must be thread-safe
     * (uv_async_send is). */
    void (*wakeup)(void *ud);
    /* Optional (NULL: nothing is told). on 1: work is in flight that will answer through
     * a wake-up with nothing timed and no fd watched for it (a SQLite ledger's commit on
     * its writer thread, an ah_loop_ref), so an application's loop that ends when it has
     * nothing active (uv_run, ev_run) must stay up; on 0: that is over. Loop thread; told
     * on each change. The libuv adapter references its wake-up handle meanwhile. */
    void (*keep_alive)(void *ud, int on);
} ah_loop_hooks;

/* A loop driven by the application's loop through hooks (copied). AH_OK with *out set;
 * else *out = NULL and AH_ERR_INVALID (a hook is missing: said in err) or AH_ERR_NOMEM
 * (or libcurl cannot be initialised); err may be NULL. ah_loop_run_once() and
 * ah_loop_run() refuse such a loop (AH_ERR_STATE), and so the blocking ah_call_run /
 * ah_worker_run do: start the work and let the application's loop run. */
AH_EXPORT ah_status ah_loop_new_hooked(const ah_clock *clock, const ah_rng *rng,
                                       const ah_loop_hooks *hooks, ah_loop **out, char *err,
                                       size_t errsize);
/* The application's loop saw fd ready for events (AH_IO_*; report an error or hang-up as
 * AH_IO_READ | AH_IO_WRITE). Runs what is due, then updates the hooks. */
AH_EXPORT void ah_loop_fd_ready(ah_loop *loop, int fd, int events);
/* What the hooks can do beyond the required (ah_loop_hooks_caps; before any watcher):
 *   AH_HOOKS_HUP        watch AH_IO_HUP: the watch hook may be told it among the events
 *                       (EPOLLRDHUP, POLLRDHUP, UV_DISCONNECT) and ah_loop_fd_ready must
 *                       report it (with AH_IO_READ | AH_IO_WRITE on an error). Without it
 *                       no AH_IO_HUP reaches the hooks: ah_io_start refuses it.
 *   AH_HOOKS_IDLE_WATCH a watched fd that is not ready costs nothing and keeps nothing
 *                       alive (an epoll set; not uv_poll, which keeps uv_run running): the
 *                       loop may leave a kept-alive upstream connection's socket watched
 *                       between two transfers on it, and stops watching it when it becomes
 *                       ready meanwhile or is closed. */
#define AH_HOOKS_HUP 1
#define AH_HOOKS_IDLE_WATCH 2
AH_EXPORT void ah_loop_hooks_caps(ah_loop *loop, int caps);
/* The time asked for with set_timeout has come, or a wake-up asked for it. */
AH_EXPORT void ah_loop_timeout(ah_loop *loop);

/* Free the loop. Every timer, async handle and transfer attached to it must have been
 * freed first (calls own theirs: free the calls, then the loop). NULL is a no-op. */
AH_EXPORT void ah_loop_free(ah_loop *loop);

/* One step: wait for socket activity, the next timer or a wake-up, at most max_wait_ms
 * (< 0 = no bound but the next timer; 0 = do not block), then deliver pending
 * async signals, drive the transfers and fire the timers that are due. Returns AH_OK, or
 * AH_ERR_TRANSPORT if curl's multi interface failed (logged). */
AH_EXPORT ah_status ah_loop_run_once(ah_loop *loop, int max_wait_ms);
/* Step until the loop has no work left (no active timer, no transfer, no reference). */
AH_EXPORT ah_status ah_loop_run(ah_loop *loop);
/* 1 while there is work that will produce a callback: an active timer, a transfer, a
 * reference (ah_loop_ref: work in flight on another thread, e.g. a SQLite ledger's
 * pending claim or receipt, which answers through an ah_async), or an ah_async_send the
 * next step has not delivered yet. */
AH_EXPORT int ah_loop_alive(const ah_loop *loop);
/* Keep the loop alive while work in flight will still answer through it without a timer
 * or a transfer of its own (a job another thread runs, whose answer comes back through an
 * ah_async): ah_loop_alive() is 1, ah_loop_run() waits for it, and a hooked loop tells
 * hooks.keep_alive. Each ah_loop_ref is matched by one ah_loop_unref once the answer is
 * in. Loop thread. */
AH_EXPORT void ah_loop_ref(ah_loop *loop);
AH_EXPORT void ah_loop_unref(ah_loop *loop);

/* Wake a blocked ah_loop_run_once() (or, hooked, ask the application's loop for a
 * timeout). Thread-safe; on the default backend also async-signal-safe (one write() to a
 * pipe), so a signal handler may call it. */
AH_EXPORT void ah_loop_wakeup(ah_loop *loop);

/* The loop's clock and RNG (borrowed). ah_loop_now_ms() reads the monotonic time. */
AH_EXPORT const ah_clock *ah_loop_clock(const ah_loop *loop);
AH_EXPORT const ah_rng *ah_loop_rng(const ah_loop *loop);
AH_EXPORT int64_t ah_loop_now_ms(const ah_loop *loop);
AH_EXPORT int64_t ah_loop_wall_ms(const ah_loop *loop);

/* Milliseconds until the earliest active timer is due (0 if already due), or -1 when no
 * timer is active. For drivers on virtual time. */
AH_EXPORT int64_t ah_loop_next_timer_ms(const ah_loop *loop);
/* Transfers currently attached to the loop's curl multi handle (a leak check for tests:
 * an aborted attempt leaves none behind). */
AH_EXPORT size_t ah_loop_transfer_count(const ah_loop *loop);

/* ---- timers ---------------------------------------------------------------------- */

/* A timer is owned by its creator and reusable: start it, stop it, restart it. The callback
 * runs on the loop thread during ah_loop_run_once(); it may start, stop or free any timer,
 * including its own. Timers due at the same time fire in the order they were started. */
typedef struct ah_timer ah_timer;
typedef void (*ah_timer_fn)(void *ud);

/* NULL when out of memory. The timer's slot in the loop's heap is reserved here, so
 * ah_timer_start() never allocates and never fails: an armed timer is never lost. */
AH_EXPORT ah_timer *ah_timer_new(ah_loop *loop, ah_timer_fn fn, void *ud);
/* Stops it first. NULL is a no-op. */
AH_EXPORT void ah_timer_free(ah_timer *t);
/* (Re)arm: fire once, delay_ms (clamped to >= 0) from now. A timer (re)started during the
 * step that fires timers is not fired before the next step. */
AH_EXPORT void ah_timer_start(ah_timer *t, int64_t delay_ms);
AH_EXPORT void ah_timer_stop(ah_timer *t);
AH_EXPORT int ah_timer_active(const ah_timer *t);
/* Absolute due time on the loop's clock (only meaningful while active). */
AH_EXPORT int64_t ah_timer_due_ms(const ah_timer *t);

/* ---- fd watchers ------------------------------------------------------------------ */

/* Watch one of your own fds on the loop (a database connection, a pipe): fn(ud, fd,
 * events) runs on the loop thread when it is ready for the AH_IO_* events asked for (an
 * error or hang-up is reported as every event asked for, so a read or write sees it).
 * One watcher per fd. A watcher does not keep the loop alive (ah_loop_alive). Owned by
 * its creator; fn may start, stop or free it. */
typedef struct ah_io ah_io;
typedef void (*ah_io_fn)(void *ud, int fd, int events);

/* NULL on bad arguments, or when another watcher is watching fd. */
AH_EXPORT ah_io *ah_io_new(ah_loop *loop, int fd, ah_io_fn fn, void *ud);
/* Watch for events (AH_IO_READ | AH_IO_WRITE | AH_IO_HUP; 0 stops). AH_OK, AH_ERR_NOMEM,
 * AH_ERR_STATE when another watcher is watching the fd, or AH_ERR_INVALID for AH_IO_HUP on
 * a loop that cannot watch it. */
AH_EXPORT ah_status ah_io_start(ah_io *io, int events);
AH_EXPORT void ah_io_stop(ah_io *io);
AH_EXPORT void ah_io_free(ah_io *io); /* stops it first; NULL is a no-op */

/* ---- async: wake the loop from another thread ------------------------------------ */

/* ah_async_send() (any thread) makes the loop run fn(ud) once on its own thread at the
 * next step; several sends before that step coalesce into one call. An async handle does
 * not keep the loop alive, a send does until that step delivers it: hold an ah_loop_ref
 * while an answer that is still to be sent is awaited. The creator must guarantee no
 * send races with ah_async_free. */
typedef struct ah_async ah_async;
typedef void (*ah_async_fn)(void *ud);

AH_EXPORT ah_async *ah_async_new(ah_loop *loop, ah_async_fn fn, void *ud);
AH_EXPORT void ah_async_free(ah_async *a); /* NULL is a no-op; loop thread only */
AH_EXPORT void ah_async_send(ah_async *a); /* thread-safe */

#ifdef __cplusplus
}
#endif
#endif
