/* loop_uv.c - the libuv adapter (agenthost/uv.h): ah_loop_hooks over uv handles.
 *
 * Invariants: polls[0..n_polls) holds one uv_poll_t per fd agenthost watches; a poll is
 * stopped and closed the moment agenthost stops watching its fd (curl may close the fd
 * right after). The wake-up handle is referenced exactly while the loop holds a
 * reference (keep_alive on). The adapter's memory is freed by the last close callback
 * (`closing` counts the handles whose close is pending), never before libuv is done with
 * them.
 */
#include "agenthost/uv.h"

#include <stdio.h>
#include <stdlib.h>

typedef struct poll_entry {
    int fd;
    uv_poll_t *h;
} poll_entry;

struct ah_uv {
    uv_loop_t *uv;
    ah_loop *loop;
    uv_timer_t timer;
    uv_async_t wake;
    poll_entry *polls;
    size_t n_polls, cap_polls;
    int closing; /* handles whose close callback is still due */
    int freed;   /* ah_uv_free was called */
};

static void maybe_release(ah_uv *a)
{
    if (a->freed && a->closing == 0) {
        free(a->polls);
        free(a);
    }
}

static void poll_closed(uv_handle_t *h)
{
    ah_uv *a = h->data;
    free(h);
    a->closing--;
    maybe_release(a);
}

static void own_closed(uv_handle_t *h)
{
    ah_uv *a = h->data;
    a->closing--;
    maybe_release(a);
}

static void on_poll(uv_poll_t *h, int status, int events)
{
    ah_uv *a = h->data;
    int fd;
    if (uv_fileno((uv_handle_t *)h, &fd) != 0)
        return;
    int ev = status < 0 ? (AH_IO_READ | AH_IO_WRITE)
                        : ((events & UV_READABLE ? AH_IO_READ : 0) |
                           (events & UV_WRITABLE ? AH_IO_WRITE : 0));
    ah_loop_fd_ready(a->loop, fd, ev);
}

static void hook_watch(void *ud, int fd, int events)
{
    ah_uv *a = ud;
    size_t i = 0;
    while (i < a->n_polls && a->polls[i].fd != fd)
        i++;
    if (events == 0) {
        if (i == a->n_polls)
            return;
        uv_poll_t *h = a->polls[i].h;
        a->polls[i] = a->polls[--a->n_polls];
        uv_poll_stop(h);
        a->closing++;
        uv_close((uv_handle_t *)h, poll_closed);
        return;
    }
    if (i == a->n_polls) {
        if (a->n_polls == a->cap_polls) {
            size_t cap = a->cap_polls ? 2 * a->cap_polls : 8;
            poll_entry *p = realloc(a->polls, cap * sizeof *p);
            if (!p)
                return; /* the transfer then ends by its time-out */
            a->polls = p;
            a->cap_polls = cap;
        }
        uv_poll_t *h = malloc(sizeof *h);
        if (!h || uv_poll_init_socket(a->uv, h, fd) != 0) {
            free(h);
            return;
        }
        h->data = a;
        a->polls[a->n_polls++] = (poll_entry){fd, h};
    }
    uv_poll_start(a->polls[i].h,
                  (events & AH_IO_READ ? UV_READABLE : 0) | (events & AH_IO_WRITE ? UV_WRITABLE : 0),
                  on_poll);
}

static void on_timer(uv_timer_t *t)
{
    ah_uv *a = t->data;
    ah_loop_timeout(a->loop);
}

static void hook_set_timeout(void *ud, int64_t ms)
{
    ah_uv *a = ud;
    if (ms < 0)
        uv_timer_stop(&a->timer);
    else
        uv_timer_start(&a->timer, on_timer, (uint64_t)ms, 0);
}

static void on_wake(uv_async_t *h)
{
    ah_uv *a = h->data;
    ah_loop_timeout(a->loop);
}

static void hook_wakeup(void *ud)
{
    ah_uv *a = ud;
    uv_async_send(&a->wake);
}

/* Work in flight answers through the wake-up handle: referenced meanwhile, so uv_run
 * does not return before the answer is in (a SQLite ledger's commit on its thread). */
static void hook_keep_alive(void *ud, int on)
{
    ah_uv *a = ud;
    if (on)
        uv_ref((uv_handle_t *)&a->wake);
    else
        uv_unref((uv_handle_t *)&a->wake);
}

static void say(char *err, size_t errsize, const char *msg)
{
    if (err && errsize)
        snprintf(err, errsize, "%s", msg);
}

static ah_uv *uv_make(uv_loop_t *uv, const ah_clock *clock, const ah_rng *rng, char *err,
                      size_t errsize, ah_status *st)
{
    *st = AH_ERR_INVALID;
    if (!uv) {
        say(err, errsize, "uv: a uv_loop_t is required");
        return NULL;
    }
    *st = AH_ERR_NOMEM;
    ah_uv *a = calloc(1, sizeof *a);
    if (!a) {
        say(err, errsize, "uv: out of memory");
        return NULL;
    }
    a->uv = uv;
    if (uv_timer_init(uv, &a->timer) != 0) {
        free(a);
        *st = AH_ERR_INTERNAL;
        say(err, errsize, "uv: uv_timer_init failed");
        return NULL;
    }
    a->timer.data = a;
    if (uv_async_init(uv, &a->wake, on_wake) != 0) {
        a->freed = 1;
        a->closing = 1;
        uv_close((uv_handle_t *)&a->timer, own_closed);
        *st = AH_ERR_INTERNAL;
        say(err, errsize, "uv: uv_async_init failed");
        return NULL;
    }
    a->wake.data = a;
    /* A wake-up handle alone keeps nothing running, only while work in flight will
     * answer through it (hook_keep_alive). */
    uv_unref((uv_handle_t *)&a->wake);
    ah_loop_hooks hooks = {.ud = a,
                           .watch = hook_watch,
                           .set_timeout = hook_set_timeout,
                           .wakeup = hook_wakeup,
                           .keep_alive = hook_keep_alive};
    *st = ah_loop_new_hooked(clock, rng, &hooks, &a->loop, err, errsize);
    if (!a->loop) {
        ah_uv_free(a);
        return NULL;
    }
    return a;
}

/* The public form (status, out-pointer, error buffer): see the header. */
ah_status ah_uv_new(uv_loop_t *uv, const ah_clock *clock, const ah_rng *rng, ah_uv **out,
                    char *err, size_t errsize)
{
    ah_status st = AH_OK;
    if (!out) {
        say(err, errsize, "ah_uv_new: out is NULL");
        return AH_ERR_INVALID;
    }
    *out = uv_make(uv, clock, rng, err, errsize, &st);
    return *out ? AH_OK : st;
}

ah_loop *ah_uv_loop(ah_uv *a)
{
    return a ? a->loop : NULL;
}

void ah_uv_free(ah_uv *a)
{
    if (!a)
        return;
    ah_loop_free(a->loop); /* curl's sockets are closed here and unwatched */
    a->loop = NULL;
    for (size_t i = 0; i < a->n_polls; i++) {
        uv_poll_stop(a->polls[i].h);
        a->closing++;
        uv_close((uv_handle_t *)a->polls[i].h, poll_closed);
    }
    a->n_polls = 0;
    uv_timer_stop(&a->timer);
    a->closing += 2;
    a->freed = 1;
    uv_close((uv_handle_t *)&a->timer, own_closed);
    uv_close((uv_handle_t *)&a->wake, own_closed);
}
