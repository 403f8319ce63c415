/* backend.c - what a Lua state's loop waits on: one epoll set that stands for all of
 * agenthost's sockets, timers and wake-ups, so a host with its own loop (Neovim's
 * vim.loop, a game loop, an OpenResty timer) can watch ONE file descriptor
 * (ah.backend_fd()) and call ah.step() when it is readable, and the binding's own
 * blocking waits sleep in epoll_wait on the same set.
 *
 * The state's ah_loop is a hooked loop (agenthost/loop.h): its watch hook adds, changes
 * and removes fds in the epoll set; its set_timeout hook records when the loop next needs
 * ah_loop_timeout(); its wakeup hook writes an eventfd that is in the set (thread-safe
 * and async-signal-safe: one write()).
 *
 * Invariants:
 *  - The set holds exactly the fds the loop asked to watch (registered[fd] says which,
 *    and with what), plus the eventfd and the timerfd.
 *  - Level-triggered: the epoll fd is readable while a watched fd is ready, a wake-up or
 *    pending Lua work is signalled (the eventfd holds a count), or the loop's timeout is
 *    due (the timerfd, armed at the end of each step only once a host asked for the fd:
 *    a binding that blocks in epoll_wait itself computes the timeout instead).
 *  - Nothing here calls Lua; the dispatch runs inside the caller's "in loop" bracket.
 */
#include "lah_backend.h"

#include "internal.h"

#include <errno.h>
#include <limits.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>

struct lah_backend {
    int epfd, efd, tfd;
    ah_loop *loop;
    int64_t due;       /* real monotonic ms the loop wants ah_loop_timeout, -1 none */
    int64_t armed_due; /* what the timerfd is armed to (-1 disarmed) */
    int external;      /* a host watches epfd: keep the timerfd and eventfd truthful */
    int stepping;      /* inside a step: its end arms the timerfd (lah_backend_idle) */
    unsigned char *registered; /* per fd: the AH_IO_* events asked for, 0 = not in set */
    size_t n_registered;
};

static int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static uint32_t epoll_events(int events)
{
    return (events & AH_IO_READ ? EPOLLIN : 0u) | (events & AH_IO_WRITE ? EPOLLOUT : 0u) |
           (events & AH_IO_HUP ? EPOLLRDHUP : 0u);
}

/* ---- the loop's hooks ------------------------------------------------------------------ */

static void hook_watch(void *ud, int fd, int events)
{
    lah_backend *b = ud;
    if (fd < 0)
        return;
    if ((size_t)fd >= b->n_registered) {
        if (events == 0)
            return;
        size_t n = b->n_registered ? b->n_registered : 64;
        while (n <= (size_t)fd)
            n *= 2;
        unsigned char *r = realloc(b->registered, n);
        if (!r) {
            ah__log(AH_LOG_ERROR, "lua backend: out of memory watching fd %d", fd);
            return;
        }
        memset(r + b->n_registered, 0, n - b->n_registered);
        b->registered = r;
        b->n_registered = n;
    }
    struct epoll_event ev = {.events = epoll_events(events), .data.fd = fd};
    if (events == 0) {
        if (b->registered[fd])
            (void)epoll_ctl(b->epfd, EPOLL_CTL_DEL, fd, NULL); /* ENOENT/EBADF: closed */
        b->registered[fd] = 0;
        return;
    }
    int op = b->registered[fd] ? EPOLL_CTL_MOD : EPOLL_CTL_ADD;
    int rc = epoll_ctl(b->epfd, op, fd, &ev);
    if (rc < 0 && errno == ENOENT) /* the fd was closed and its number reused */
        rc = epoll_ctl(b->epfd, EPOLL_CTL_ADD, fd, &ev);
    else if (rc < 0 && errno == EEXIST)
        rc = epoll_ctl(b->epfd, EPOLL_CTL_MOD, fd, &ev);
    if (rc < 0) {
        ah__log(AH_LOG_ERROR, "lua backend: cannot watch fd %d: %s", fd, strerror(errno));
        b->registered[fd] = 0;
        return;
    }
    b->registered[fd] = (unsigned char)events;
}

static void arm_timerfd(lah_backend *b);

static void hook_set_timeout(void *ud, int64_t ms)
{
    lah_backend *b = ud;
    b->due = ms < 0 ? -1 : now_ms() + ms;
    /* Outside a step (agent:start from the host's own code: a Neovim command) no step's
     * end will arm the timerfd, and a host watching only the fd would never step. */
    if (b->external && !b->stepping)
        arm_timerfd(b);
}

static void signal_efd(lah_backend *b)
{
    uint64_t one = 1;
    ssize_t n;
    do
        n = write(b->efd, &one, sizeof one);
    while (n < 0 && errno == EINTR);
}

static void hook_wakeup(void *ud)
{
    signal_efd(ud);
}

/* ---- life ------------------------------------------------------------------------------ */

lah_backend *lah_backend_new(char *err, size_t errsize)
{
    lah_backend *b = calloc(1, sizeof *b);
    if (!b) {
        ah__bufprintf(err, errsize, "out of memory");
        return NULL;
    }
    b->efd = b->tfd = -1;
    b->due = b->armed_due = -1;
    b->epfd = epoll_create1(EPOLL_CLOEXEC);
    if (b->epfd >= 0)
        b->efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (b->efd >= 0)
        b->tfd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
    if (b->tfd < 0) {
        ah__bufprintf(err, errsize, "cannot create the event loop's epoll set: %s",
                      strerror(errno));
        lah_backend_free(b);
        return NULL;
    }
    struct epoll_event ev = {.events = EPOLLIN, .data.fd = b->efd};
    int rc = epoll_ctl(b->epfd, EPOLL_CTL_ADD, b->efd, &ev);
    ev.data.fd = b->tfd;
    if (rc == 0)
        rc = epoll_ctl(b->epfd, EPOLL_CTL_ADD, b->tfd, &ev);
    ah_loop_hooks hooks = {.ud = b,
                           .watch = hook_watch,
                           .set_timeout = hook_set_timeout,
                           .wakeup = hook_wakeup};
    if (rc != 0 || ah_loop_new_hooked(NULL, NULL, &hooks, &b->loop, err, errsize) != AH_OK) {
        if (rc != 0)
            ah__bufprintf(err, errsize, "cannot set up the epoll set: %s", strerror(errno));
        lah_backend_free(b);
        return NULL;
    }
    ah_loop_hooks_caps(b->loop, AH_HOOKS_HUP | AH_HOOKS_IDLE_WATCH); /* an epoll set */
    return b;
}

ah_loop *lah_backend_loop(lah_backend *b)
{
    return b->loop;
}

void lah_backend_free(lah_backend *b)
{
    if (!b)
        return;
    ah_loop_free(b->loop); /* tells the hooks nothing more: its fds are its own */
    if (b->tfd >= 0)
        close(b->tfd);
    if (b->efd >= 0)
        close(b->efd);
    if (b->epfd >= 0)
        close(b->epfd);
    free(b->registered);
    free(b);
}

/* ---- waiting and dispatching ----------------------------------------------------------- */

int64_t lah_backend_timeout(const lah_backend *b)
{
    if (b->due < 0)
        return -1;
    int64_t left = b->due - now_ms();
    return left < 0 ? 0 : left;
}

static void drain(int fd)
{
    uint64_t v;
    while (read(fd, &v, sizeof v) > 0)
        ;
}

int lah_backend_poll(lah_backend *b, int64_t timeout_ms)
{
    enum { MAX_EVENTS = 64 };
    struct epoll_event evs[MAX_EVENTS];
    int64_t t = timeout_ms;
    int64_t loop_wait = lah_backend_timeout(b);
    if (loop_wait >= 0 && (t < 0 || loop_wait < t))
        t = loop_wait;
    int n = epoll_wait(b->epfd, evs, MAX_EVENTS, t < 0 ? -1 : t > INT_MAX ? INT_MAX : (int)t);
    if (n < 0) {
        if (errno != EINTR)
            ah__log(AH_LOG_ERROR, "lua backend: epoll_wait: %s", strerror(errno));
        n = 0;
    }
    int timeout = 0, dispatched = 0;
    for (int i = 0; i < n; i++) {
        int fd = evs[i].data.fd;
        if (fd == b->efd || fd == b->tfd) {
            drain(fd);
            if (fd == b->tfd)
                b->armed_due = -1; /* one-shot: it must be armed again */
            timeout = 1; /* a wake-up (asyncs to run) or the loop's time */
            continue;
        }
        /* fds the loop stopped watching during this pass are skipped */
        if ((size_t)fd >= b->n_registered || !b->registered[fd])
            continue;
        uint32_t e = evs[i].events;
        int events = (e & (EPOLLIN | EPOLLHUP | EPOLLERR) ? AH_IO_READ : 0) |
                     (e & (EPOLLOUT | EPOLLERR) ? AH_IO_WRITE : 0) |
                     (e & (EPOLLRDHUP | EPOLLHUP | EPOLLERR) ? AH_IO_HUP : 0);
        ah_loop_fd_ready(b->loop, fd, events);
        dispatched = 1;
    }
    /* a dispatched fd ran the wake-ups and due timers already (one pass per wait, as the
     * loop's own poll does: a timer armed in it fires at the next step) */
    if (!dispatched && (timeout || (b->due >= 0 && now_ms() >= b->due)))
        ah_loop_timeout(b->loop);
    return n;
}

int lah_backend_fd(lah_backend *b)
{
    b->external = 1;
    return b->epfd;
}

int lah_backend_is_external(const lah_backend *b)
{
    return b->external;
}

void lah_backend_stepping(lah_backend *b, int on)
{
    b->stepping = on;
}

void lah_backend_idle(lah_backend *b, int pending)
{
    if (!b->external)
        return;
    if (pending)
        signal_efd(b);
    arm_timerfd(b);
}

static void arm_timerfd(lah_backend *b)
{
    if (b->due == b->armed_due)
        return;
    struct itimerspec its;
    memset(&its, 0, sizeof its);
    if (b->due >= 0) {
        int64_t left = b->due - now_ms();
        if (left <= 0) { /* due now: a nanosecond, since all zeros would disarm it */
            its.it_value.tv_nsec = 1;
        } else {
            its.it_value.tv_sec = left / 1000;
            its.it_value.tv_nsec = (long)(left % 1000) * 1000000L;
        }
    }
    if (timerfd_settime(b->tfd, 0, &its, NULL) == 0)
        b->armed_due = b->due;
}
