/* loop.c - the event loop: CURLM handles driven by curl_multi_socket_action, a table of
 * watched fds (curl's sockets and the embedder's ah_io watchers), a min-heap of timers,
 * async wake-ups and the injected clock. Two backends share everything but the wait:
 * the loop's own poll() (ah_loop_run_once), or an application's loop told what to watch
 * through ah_loop_hooks (ah_loop_fd_ready / ah_loop_timeout call back in).
 *
 * Invariants:
 *   - heap[0..n_heap) is a binary min-heap ordered by (due, seq); every active timer is
 * in it exactly once and knows its index (idx == NOT_IN_HEAP when inactive).
 *   - A timer fires only if it was armed before the current firing pass began (its seq is
 *     below the pass's seq mark), so a callback that re-arms with delay 0 cannot starve
 *     the loop.
 *   - Transfers are spread over shards, each its own CURLM handle with at most shard_max
 *     transfers: libcurl looks for a reusable connection by walking every connection to
 *     the host in its multi handle, so one multi with N transfers to one host costs O(N)
 *     per new transfer, O(N^2) in all. A transfer goes to the first shard with room, so
 *     up to shard_max concurrent requests share one connection cache as before.
 *   - n_easy counts the easy handles attached to any shard (each shard counts its own);
 *     a finished transfer is removed from its multi handle before its owner hears about
 *     it. A curl socket's fd entry names the shard whose curl watches it.
 *   - fds[0..n_fds) holds each watched fd once, with what curl and what an ah_io want;
 *     an entry wanting nothing is removed. The hooks are told each change of the union.
 *     fd_slot[fd] is 1 + the entry's index (0: not watched), so finding an fd is O(1)
 *     however many are watched; port_head[port] is 1 + the fd of the first watched curl
 *     socket bound to that local TCP port (0: none), chained through port_next.
 *   - curl's own timer is on the real monotonic clock (its time-outs are real time); the
 *     loop's timers are on the injected clock.
 *   - Nothing here sleeps except poll() in ah_loop_run_once(), bounded by the next timer.
 *   - AH_IO_HUP (an ah_io's only) is POLLRDHUP on the own backend; a hooked loop is told it
 *     only when its hooks said they can watch it (ah_loop_hooks_caps), else
 *     ah_io_start refuses it, so an application's hooks never see a bit they do not know.
 */
#define _GNU_SOURCE /* POLLRDHUP */
#include "internal.h"
#include "loop_curl.h"

#include "agenthost/loop.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <sys/socket.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define NOT_IN_HEAP SIZE_MAX
#ifdef POLLRDHUP
#define AH__POLLRDHUP POLLRDHUP /* AH_IO_HUP on the own backend (Linux) */
#else
#define AH__POLLRDHUP 0
#endif
#define AH__IO_ERROR 8 /* poll() reported an error on the fd (internal to the own backend) */

struct ah_timer {
    ah_loop *loop;
    ah_timer_fn fn;
    void *ud;
    int64_t due;
    uint64_t seq;
    size_t idx;
};

struct ah_async {
    ah_loop *loop;
    ah_async_fn fn;
    void *ud;
    atomic_int pending;
    ah_async *prev, *next;
};

struct ah_io {
    ah_loop *loop;
    int fd;
    int events; /* AH_IO_* wanted; 0 = stopped */
    ah_io_fn fn;
    void *ud;
};

/* One watched fd: what curl wants (CURL_POLL_*) and what an ah_io wants (AH_IO_*). */
typedef struct fd_entry {
    int fd;
    int curl_ev; /* AH_IO_* translated from CURL_POLL_* */
    ah_io *io;
    int told; /* the union last told to the hooks */
    int port; /* a curl socket's local TCP port; 0 unknown, -1 none (not TCP) */
    int port_next; /* 1 + the next watched fd bound to the same port, 0 = last */
    int shard;     /* the shard whose curl wants it (while curl_ev is set) */
    int parked;    /* curl's TCP socket, not wanted now, still open: kept (see fd_changed) */
} fd_entry;

/* One CURLM handle and its transfers. */
typedef struct shard {
    ah_loop *loop;
    CURLM *multi;
    int idx;
    size_t n_easy;
    int64_t curl_due; /* real monotonic ms of this multi's timer, -1 when none */
} shard;

enum { PORTS = 65536 };

struct ah_loop {
    shard **shards; /* shards[0] always exists; the others are made when needed */
    size_t n_shards, cap_shards;
    size_t shard_max; /* transfers per shard */
    ah_loop_hooks hooks; /* hooks.watch NULL: the loop's own poll() */
    int hooked;
    int hooks_hup;  /* the hooks can watch AH_IO_HUP (ah_loop_hooks_caps) */
    int hooks_idle; /* the hooks may keep an idle fd watched (AH_HOOKS_IDLE_WATCH) */
    int wake_rd, wake_wr; /* own backend: the self-pipe ah_loop_wakeup() writes to */
    atomic_int wake_pending;
    fd_entry *fds;
    size_t n_fds, cap_fds;
    int *fd_slot; /* by fd: 1 + index into fds, 0 = not watched */
    size_t cap_slot;
    int *port_head; /* PORTS entries, by local port: 1 + fd, 0 = none; NULL until used */
    struct pollfd *pfds;
    size_t cap_pfds;
    int in_dispatch;  /* inside a step: hook updates wait until it ends */
    int64_t told_timeout_due; /* hooks: the absolute due last told (-2 = none told) */
    const ah_clock *clock;
    const ah_rng *rng;
    ah_seeded_rng *own_rng; /* when the embedder gave none */
    ah_timer **heap;
    size_t n_heap, cap_heap;
    size_t n_timers; /* timers created and not freed: cap_heap >= n_timers always */
    uint64_t next_seq;
    size_t n_easy;
    size_t refs;      /* ah_loop_ref: work in flight answering through an async */
    ah_async *asyncs; /* doubly linked, loop thread only */
    atomic_int async_pending;
    int in_curl; /* inside curl_multi_perform(): curl forbids removals now */
    struct discard {
        CURL *easy;
        void (*release)(void *ud);
        void *ud;
    } * discards; /* removals deferred until curl_multi_perform() returns */
    size_t n_discards, cap_discards;
    /* Easy handles of finished transfers for the next (ah__loop_easy_take): reset, or
     * kept with their last owner's options, who says which in easy_kept[i] (nonzero;
     * see loop_curl.h). */
    CURL *easy_pool[AH__EASY_POOL_MAX];
    unsigned char easy_kept[AH__EASY_POOL_MAX];
    size_t n_pool;
    size_t easy_made; /* handles ever created by ah__loop_easy_take */
};

/* ---- process-wide libcurl initialisation ----------------------------------------- */

static pthread_once_t curl_once = PTHREAD_ONCE_INIT;
static CURLcode curl_init_result = CURLE_FAILED_INIT;

static void curl_init_once(void)
{
    curl_init_result = curl_global_init(CURL_GLOBAL_DEFAULT);
}

/* ---- the heap -------------------------------------------------------------------- */

static int timer_before(const ah_timer *a, const ah_timer *b)
{
    return a->due < b->due || (a->due == b->due && a->seq < b->seq);
}

static void heap_set(ah_loop *l, size_t i, ah_timer *t)
{
    l->heap[i] = t;
    t->idx = i;
}

static void sift_up(ah_loop *l, size_t i)
{
    ah_timer *t = l->heap[i];
    while (i > 0) {
        size_t parent = (i - 1) / 2;
        if (!timer_before(t, l->heap[parent]))
            break;
        heap_set(l, i, l->heap[parent]);
        i = parent;
    }
    heap_set(l, i, t);
}

static void sift_down(ah_loop *l, size_t i)
{
    ah_timer *t = l->heap[i];
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= l->n_heap)
            break;
        if (c + 1 < l->n_heap && timer_before(l->heap[c + 1], l->heap[c]))
            c++;
        if (!timer_before(l->heap[c], t))
            break;
        heap_set(l, i, l->heap[c]);
        i = c;
    }
    heap_set(l, i, t);
}

static void heap_remove(ah_loop *l, ah_timer *t)
{
    size_t i = t->idx;
    ah_timer *last = l->heap[--l->n_heap];
    t->idx = NOT_IN_HEAP;
    if (last == t)
        return;
    heap_set(l, i, last);
    if (i > 0 && timer_before(last, l->heap[(i - 1) / 2]))
        sift_up(l, i);
    else
        sift_down(l, i);
}

/* ---- timers ---------------------------------------------------------------------- */

ah_timer *ah_timer_new(ah_loop *loop, ah_timer_fn fn, void *ud)
{
    if (!loop || !fn)
        return NULL;
    /* The heap gets a slot for every timer when the timer is made, so arming one later
     * never allocates and cannot fail: no timer is ever lost. */
    if (loop->n_timers == loop->cap_heap) {
        size_t cap = loop->cap_heap ? loop->cap_heap * 2 : 16;
        ah_timer **h = realloc(loop->heap, cap * sizeof *h);
        if (!h)
            return NULL;
        loop->heap = h;
        loop->cap_heap = cap;
    }
    ah_timer *t = calloc(1, sizeof *t);
    if (!t)
        return NULL;
    loop->n_timers++;
    t->loop = loop;
    t->fn = fn;
    t->ud = ud;
    t->idx = NOT_IN_HEAP;
    return t;
}

static void hooks_sync_timeout(ah_loop *l);

void ah_timer_stop(ah_timer *t)
{
    if (t && t->idx != NOT_IN_HEAP) {
        heap_remove(t->loop, t);
        hooks_sync_timeout(t->loop);
    }
}

void ah_timer_free(ah_timer *t)
{
    if (!t)
        return;
    ah_timer_stop(t);
    t->loop->n_timers--;
    free(t);
}

void ah_timer_start(ah_timer *t, int64_t delay_ms)
{
    if (!t)
        return;
    ah_loop *l = t->loop;
    if (delay_ms < 0)
        delay_ms = 0;
    int64_t now = ah_loop_now_ms(l);
    t->due = delay_ms > INT64_MAX - now ? INT64_MAX : now + delay_ms;
    t->seq = l->next_seq++;
    if (t->idx != NOT_IN_HEAP) {
        /* Re-arm in place: the key may move either way. */
        size_t i = t->idx;
        if (i > 0 && timer_before(t, l->heap[(i - 1) / 2]))
            sift_up(l, i);
        else
            sift_down(l, i);
        hooks_sync_timeout(l);
        return;
    }
    /* A slot was reserved by ah_timer_new: n_heap < n_timers <= cap_heap. */
    heap_set(l, l->n_heap++, t);
    sift_up(l, t->idx);
    hooks_sync_timeout(l);
}

int ah_timer_active(const ah_timer *t)
{
    return t && t->idx != NOT_IN_HEAP;
}

int64_t ah_timer_due_ms(const ah_timer *t)
{
    return t ? t->due : 0;
}

/* Fire every timer due at `now` that was armed before this pass. */
static void fire_timers(ah_loop *l)
{
    uint64_t mark = l->next_seq;
    int64_t now = ah_loop_now_ms(l);
    while (l->n_heap > 0) {
        ah_timer *t = l->heap[0];
        if (t->due > now || t->seq >= mark)
            break;
        heap_remove(l, t);
        t->fn(t->ud); /* may free t, or re-arm it */
    }
}

/* ---- async ----------------------------------------------------------------------- */

ah_async *ah_async_new(ah_loop *loop, ah_async_fn fn, void *ud)
{
    if (!loop || !fn)
        return NULL;
    ah_async *a = calloc(1, sizeof *a);
    if (!a)
        return NULL;
    a->loop = loop;
    a->fn = fn;
    a->ud = ud;
    atomic_init(&a->pending, 0);
    a->next = loop->asyncs;
    if (a->next)
        a->next->prev = a;
    loop->asyncs = a;
    return a;
}

void ah_async_free(ah_async *a)
{
    if (!a)
        return;
    if (a->prev)
        a->prev->next = a->next;
    else
        a->loop->asyncs = a->next;
    if (a->next)
        a->next->prev = a->prev;
    free(a);
}

void ah_async_send(ah_async *a)
{
    if (!a)
        return;
    atomic_store(&a->pending, 1);
    atomic_store(&a->loop->async_pending, 1);
    ah_loop_wakeup(a->loop);
}

static void run_asyncs(ah_loop *l)
{
    if (!atomic_exchange(&l->async_pending, 0))
        return;
    /* A callback may free its own handle (or others'): restart the scan after each call.
     * There are few async handles (one per live call), so this stays cheap. */
    for (;;) {
        ah_async *a = l->asyncs;
        while (a && !atomic_load(&a->pending))
            a = a->next;
        if (!a)
            break;
        atomic_store(&a->pending, 0);
        a->fn(a->ud);
    }
}

/* ---- time ----------------------------------------------------------------------- */

static int64_t real_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Milliseconds until the loop has something to do (0 = now), or -1 for nothing timed. */
static int64_t next_due_ms(ah_loop *l)
{
    if (atomic_load(&l->async_pending) || atomic_load(&l->wake_pending))
        return 0;
    int64_t wait = ah_loop_next_timer_ms(l);
    int64_t now = -1;
    for (size_t i = 0; i < l->n_shards; i++) {
        if (l->shards[i]->curl_due < 0)
            continue;
        if (now < 0)
            now = real_now_ms();
        int64_t c = l->shards[i]->curl_due - now;
        if (c < 0)
            c = 0;
        if (wait < 0 || c < wait)
            wait = c;
    }
    return wait;
}

/* Hooks: tell the application when to call ah_loop_timeout() next, if that changed. */
static void hooks_sync_timeout(ah_loop *l)
{
    if (!l->hooked || l->in_dispatch || !l->hooks.set_timeout)
        return;
    int64_t wait = next_due_ms(l);
    int64_t due = wait < 0 ? -1 : real_now_ms() + wait;
    if (due == l->told_timeout_due && wait != 0)
        return;
    l->told_timeout_due = due;
    l->hooks.set_timeout(l->hooks.ud, wait);
}

/* ---- the fd table ---------------------------------------------------------------- */

static fd_entry *fd_find(ah_loop *l, int fd)
{
    if (fd < 0 || (size_t)fd >= l->cap_slot || l->fd_slot[fd] == 0)
        return NULL;
    return &l->fds[l->fd_slot[fd] - 1];
}

static fd_entry *fd_get(ah_loop *l, int fd)
{
    fd_entry *e = fd_find(l, fd);
    if (e)
        return e;
    if (fd < 0)
        return NULL;
    if ((size_t)fd >= l->cap_slot) {
        size_t cap = l->cap_slot ? l->cap_slot : 64;
        while (cap <= (size_t)fd)
            cap *= 2;
        int *n = realloc(l->fd_slot, cap * sizeof *n);
        if (!n)
            return NULL;
        memset(n + l->cap_slot, 0, (cap - l->cap_slot) * sizeof *n);
        l->fd_slot = n;
        l->cap_slot = cap;
    }
    if (l->n_fds == l->cap_fds) {
        size_t cap = l->cap_fds ? 2 * l->cap_fds : 8;
        fd_entry *n = realloc(l->fds, cap * sizeof *n);
        if (!n)
            return NULL;
        l->fds = n;
        l->cap_fds = cap;
    }
    e = &l->fds[l->n_fds++];
    *e = (fd_entry){.fd = fd};
    l->fd_slot[fd] = (int)l->n_fds;
    return e;
}

/* Index e by its local port (curl sockets only; looked up once per watched socket). */
static void port_link(ah_loop *l, fd_entry *e)
{
    e->port = -1;
    struct sockaddr_storage ss;
    socklen_t len = sizeof ss;
    if (getsockname(e->fd, (struct sockaddr *)&ss, &len) != 0)
        return;
    int port = 0;
    if (ss.ss_family == AF_INET)
        port = ntohs(((struct sockaddr_in *)&ss)->sin_port);
    else if (ss.ss_family == AF_INET6)
        port = ntohs(((struct sockaddr_in6 *)&ss)->sin6_port);
    if (port <= 0)
        return;
    if (!l->port_head) {
        /* 256 KiB of address space; only the pages of ports in use are ever touched. */
        l->port_head = calloc(PORTS, sizeof *l->port_head);
        if (!l->port_head)
            return; /* ah__loop_sock_by_port finds nothing: only an ACK comes later */
    }
    e->port = port;
    e->port_next = l->port_head[port];
    l->port_head[port] = e->fd + 1;
}

static void port_unlink(ah_loop *l, fd_entry *e)
{
    if (e->port <= 0 || !l->port_head)
        return;
    int *link = &l->port_head[e->port]; /* 1 + fd, like every link of the chain */
    while (*link && *link - 1 != e->fd)
        link = &fd_find(l, *link - 1)->port_next;
    if (*link)
        *link = e->port_next;
    e->port = 0;
}

static int fd_wanted(const fd_entry *e)
{
    return e->curl_ev | (e->io ? e->io->events : 0);
}

/* After a change to e: tell the hooks, and drop the entry once nobody wants the fd.
 * A parked entry (curl stopped waiting on a kept-alive connection between two transfers)
 * stays, with its port and what the hooks were told: the next transfer on that connection
 * asks for it again, and would have cost an epoll_ctl to remove it, one to add it back
 * and a getsockname (docs/performance.md 11.3). It goes when curl closes the socket
 * (curl_close_cb), or, on a hooked loop, is unregistered if it becomes ready meanwhile
 * (dispatch_fd: the server closed the idle connection). */
static void fd_changed(ah_loop *l, fd_entry *e)
{
    int want = fd_wanted(e);
    if (want == 0 && e->parked)
        return;
    if (l->hooked && want != e->told) {
        e->told = want;
        l->hooks.watch(l->hooks.ud, e->fd, want);
    }
    if (want == 0 && !e->io) {
        port_unlink(l, e);
        l->fd_slot[e->fd] = 0;
        fd_entry *last = &l->fds[--l->n_fds];
        if (last != e) {
            *e = *last;
            l->fd_slot[e->fd] = (int)(e - l->fds) + 1;
        }
    }
}

/* CURLMOPT_SOCKETFUNCTION: curl says which sockets to wait on, and for what. */
static int curl_socket_cb(CURL *easy, curl_socket_t s, int what, void *userp, void *socketp)
{
    (void)easy;
    (void)socketp;
    shard *sh = userp;
    ah_loop *l = sh->loop;
    int ev = 0;
    if (what == CURL_POLL_IN || what == CURL_POLL_INOUT)
        ev |= AH_IO_READ;
    if (what == CURL_POLL_OUT || what == CURL_POLL_INOUT)
        ev |= AH_IO_WRITE;
    fd_entry *e = ev ? fd_get(l, (int)s) : fd_find(l, (int)s);
    if (!e) {
        if (ev) {
            ah__log(AH_LOG_ERROR, "loop: out of memory watching a socket");
            return -1;
        }
        return 0;
    }
    e->curl_ev = ev;
    e->shard = sh->idx;
    if (ev && e->port == 0)
        port_link(l, e); /* bound by now: curl watches a socket once it connect()ed */
    /* A TCP socket curl closes through curl_close_cb: parked until then. Others (a
     * resolver's socketpair) are closed without telling the loop: dropped now. */
    e->parked = !ev && !e->io && e->port > 0 && (!l->hooked || l->hooks_idle);
    fd_changed(l, e);
    return 0;
}

/* CURLOPT_CLOSESOCKETFUNCTION (every transfer's, so every connection's): curl closes one
 * of its sockets; curl said CURL_POLL_REMOVE for it before. A parked entry goes: the
 * hooks are told, the port is forgotten. */
static int curl_close_cb(void *clientp, curl_socket_t s)
{
    ah_loop *l = clientp;
    fd_entry *e = fd_find(l, (int)s);
    if (e && e->parked) {
        e->parked = 0;
        fd_changed(l, e);
    }
    return close((int)s);
}

/* CURLMOPT_TIMERFUNCTION: curl's one timer, on real time. */
static int curl_timer_cb(CURLM *multi, long timeout_ms, void *userp)
{
    (void)multi;
    shard *sh = userp;
    sh->curl_due = timeout_ms < 0 ? -1 : real_now_ms() + timeout_ms;
    hooks_sync_timeout(sh->loop);
    return 0;
}

/* ---- fd watchers ----------------------------------------------------------------- */

ah_io *ah_io_new(ah_loop *loop, int fd, ah_io_fn fn, void *ud)
{
    if (!loop || fd < 0 || !fn)
        return NULL;
    fd_entry *e = fd_find(loop, fd);
    if (e && e->io)
        return NULL; /* one watcher per fd */
    ah_io *io = calloc(1, sizeof *io);
    if (!io)
        return NULL;
    *io = (ah_io){.loop = loop, .fd = fd, .fn = fn, .ud = ud};
    return io;
}

ah_status ah_io_start(ah_io *io, int events)
{
    if (!io)
        return AH_ERR_INVALID;
    ah_loop *l = io->loop;
    events &= AH_IO_READ | AH_IO_WRITE | AH_IO_HUP;
#ifndef POLLRDHUP
    if (events & AH_IO_HUP && !l->hooked)
        return AH_ERR_INVALID;
#endif
    if (events & AH_IO_HUP && l->hooked && !l->hooks_hup)
        return AH_ERR_INVALID;
    fd_entry *e = events ? fd_get(l, io->fd) : fd_find(l, io->fd);
    if (!e)
        return events ? AH_ERR_NOMEM : AH_OK;
    if (e->io && e->io != io)
        return AH_ERR_STATE;
    if (e->parked) { /* never: curl's socket would still be open; be safe */
        port_unlink(l, e);
        e->parked = 0;
    }
    io->events = events;
    e->io = events ? io : NULL;
    fd_changed(l, e);
    return AH_OK;
}

void ah_io_stop(ah_io *io)
{
    (void)ah_io_start(io, 0);
}

void ah_io_free(ah_io *io)
{
    if (!io)
        return;
    ah_io_stop(io);
    free(io);
}

/* ---- the loop -------------------------------------------------------------------- */

/* A new shard at the end of l->shards, or NULL when out of memory. */
static shard *shard_new(ah_loop *l)
{
    if (l->n_shards == l->cap_shards) {
        size_t cap = l->cap_shards ? 2 * l->cap_shards : 4;
        shard **n = realloc(l->shards, cap * sizeof *n);
        if (!n)
            return NULL;
        l->shards = n;
        l->cap_shards = cap;
    }
    shard *sh = calloc(1, sizeof *sh);
    if (!sh)
        return NULL;
    sh->multi = curl_multi_init();
    if (!sh->multi) {
        free(sh);
        return NULL;
    }
    sh->loop = l;
    sh->idx = (int)l->n_shards;
    sh->curl_due = -1;
    curl_multi_setopt(sh->multi, CURLMOPT_SOCKETFUNCTION, curl_socket_cb);
    curl_multi_setopt(sh->multi, CURLMOPT_SOCKETDATA, sh);
    curl_multi_setopt(sh->multi, CURLMOPT_TIMERFUNCTION, curl_timer_cb);
    curl_multi_setopt(sh->multi, CURLMOPT_TIMERDATA, sh);
    l->shards[l->n_shards++] = sh;
    return sh;
}

static ah_loop *loop_new(const ah_clock *clock, const ah_rng *rng, const ah_loop_hooks *hooks)
{
    pthread_once(&curl_once, curl_init_once);
    if (curl_init_result != CURLE_OK) {
        ah__log(AH_LOG_ERROR, "loop: curl_global_init failed: %s",
                curl_easy_strerror(curl_init_result));
        return NULL;
    }
    ah_loop *l = calloc(1, sizeof *l);
    if (!l)
        return NULL;
    atomic_init(&l->async_pending, 0);
    atomic_init(&l->wake_pending, 0);
    l->wake_rd = l->wake_wr = -1;
    l->told_timeout_due = -2;
    l->shard_max = AH__SHARD_MAX;
    l->clock = clock ? clock : ah_clock_real();
    if (hooks) {
        l->hooks = *hooks;
        l->hooked = 1;
    } else {
        int p[2];
        if (pipe(p) != 0)
            goto fail;
        l->wake_rd = p[0];
        l->wake_wr = p[1];
        for (int i = 0; i < 2; i++) {
            fcntl(p[i], F_SETFL, fcntl(p[i], F_GETFL) | O_NONBLOCK);
            fcntl(p[i], F_SETFD, FD_CLOEXEC);
        }
    }
    if (rng) {
        l->rng = rng;
    } else {
        l->own_rng = ah_seeded_rng_new(0);
        if (!l->own_rng)
            goto fail;
        l->rng = ah_seeded_rng_get(l->own_rng);
    }
    if (!shard_new(l))
        goto fail;
    return l;
fail:
    if (l->wake_rd >= 0) {
        close(l->wake_rd);
        close(l->wake_wr);
    }
    ah_seeded_rng_free(l->own_rng);
    free(l);
    return NULL;
}

ah_loop *ah_loop_new(const ah_clock *clock, const ah_rng *rng)
{
    return loop_new(clock, rng, NULL);
}

ah_status ah_loop_new_hooked(const ah_clock *clock, const ah_rng *rng,
                             const ah_loop_hooks *hooks, ah_loop **out, char *err,
                             size_t errsize)
{
    if (!out) {
        ah__bufprintf(err, errsize, "ah_loop_new_hooked: out is NULL");
        return AH_ERR_INVALID;
    }
    *out = NULL;
    if (!hooks || !hooks->watch || !hooks->set_timeout || !hooks->wakeup) {
        ah__bufprintf(err, errsize, "loop: ah_loop_new_hooked needs watch, set_timeout and "
                                    "wakeup");
        return AH_ERR_INVALID;
    }
    *out = loop_new(clock, rng, hooks);
    if (!*out) {
        ah__bufprintf(err, errsize, "loop: out of memory (or libcurl cannot be "
                                    "initialised: logged)");
        return AH_ERR_NOMEM;
    }
    return AH_OK;
}

void ah_loop_free(ah_loop *loop)
{
    if (!loop)
        return;
    if (loop->n_heap || loop->n_easy || loop->asyncs || loop->refs)
        ah__log(AH_LOG_WARN,
                "loop: freed with %zu timer(s), %zu transfer(s), %zu reference(s) and "
                "async handles still attached",
                loop->n_heap, loop->n_easy, loop->refs);
    /* Detach what is left so nothing points into freed memory. */
    for (size_t i = 0; i < loop->n_heap; i++)
        loop->heap[i]->idx = NOT_IN_HEAP;
    for (size_t i = 0; i < loop->n_pool; i++)
        curl_easy_cleanup(loop->easy_pool[i]);
    for (size_t i = 0; i < loop->n_shards; i++) {
        /* closes the cached connections (their sockets leave the table) */
        curl_multi_cleanup(loop->shards[i]->multi);
        free(loop->shards[i]);
    }
    free(loop->shards);
    if (loop->wake_rd >= 0) {
        close(loop->wake_rd);
        close(loop->wake_wr);
    }
    free(loop->fds);
    free(loop->fd_slot);
    free(loop->port_head);
    free(loop->pfds);
    free(loop->discards);
    ah_seeded_rng_free(loop->own_rng);
    free(loop->heap);
    free(loop);
}

const ah_clock *ah_loop_clock(const ah_loop *loop)
{
    return loop->clock;
}

const ah_rng *ah_loop_rng(const ah_loop *loop)
{
    return loop->rng;
}

int64_t ah_loop_now_ms(const ah_loop *loop)
{
    return loop->clock->now_ms(loop->clock->ud);
}

int64_t ah_loop_wall_ms(const ah_loop *loop)
{
    return loop->clock->wall_ms(loop->clock->ud);
}

int64_t ah_loop_next_timer_ms(const ah_loop *loop)
{
    if (loop->n_heap == 0)
        return -1;
    int64_t d = loop->heap[0]->due - ah_loop_now_ms(loop);
    return d > 0 ? d : 0;
}

size_t ah_loop_transfer_count(const ah_loop *loop)
{
    return loop->n_easy;
}

void ah_loop_hooks_caps(ah_loop *loop, int caps)
{
    if (loop) {
        loop->hooks_hup = !!(caps & AH_HOOKS_HUP);
        loop->hooks_idle = !!(caps & AH_HOOKS_IDLE_WATCH);
    }
}

int ah__loop_steppable(const ah_loop *loop)
{
    return !loop->hooked && !loop->in_dispatch;
}

int ah_loop_alive(const ah_loop *loop)
{
    /* A send not yet delivered is work too: the next step runs it (a cancel asked for
     * from a hook when nothing else is in flight must still reach its worker). */
    return loop->n_heap > 0 || loop->n_easy > 0 || loop->refs > 0 ||
           atomic_load(&loop->async_pending);
}

void ah_loop_ref(ah_loop *loop)
{
    if (loop && loop->refs++ == 0 && loop->hooked && loop->hooks.keep_alive)
        loop->hooks.keep_alive(loop->hooks.ud, 1);
}

void ah_loop_unref(ah_loop *loop)
{
    if (!loop || loop->refs == 0)
        return;
    if (--loop->refs == 0 && loop->hooked && loop->hooks.keep_alive)
        loop->hooks.keep_alive(loop->hooks.ud, 0);
}

void ah_loop_wakeup(ah_loop *loop)
{
    if (!loop)
        return;
    /* One byte in the pipe is enough however many wake-ups come before the next step. */
    if (atomic_exchange(&loop->wake_pending, 1))
        return;
    if (loop->hooked) {
        loop->hooks.wakeup(loop->hooks.ud);
        return;
    }
    ssize_t n;
    do
        n = write(loop->wake_wr, "x", 1);
    while (n < 0 && errno == EINTR);
}

ah_status ah__loop_add_easy(ah_loop *loop, CURL *easy, ah__easy_link *link)
{
    /* The first shard with room: a few concurrent transfers all share shard 0's
     * connections, as they would one multi handle. */
    shard *sh = NULL;
    for (size_t i = 0; i < loop->n_shards && !sh; i++)
        if (loop->shards[i]->n_easy < loop->shard_max)
            sh = loop->shards[i];
    if (!sh && !(sh = shard_new(loop))) {
        ah__log(AH_LOG_ERROR, "loop: out of memory adding a transfer");
        return AH_ERR_NOMEM;
    }
    link->shard = sh->idx;
    curl_easy_setopt(easy, CURLOPT_PRIVATE, (void *)link);
    /* the connection it makes keeps these: its socket's close reaches curl_close_cb */
    curl_easy_setopt(easy, CURLOPT_CLOSESOCKETFUNCTION, curl_close_cb);
    curl_easy_setopt(easy, CURLOPT_CLOSESOCKETDATA, (void *)loop);
    CURLMcode mc = curl_multi_add_handle(sh->multi, easy);
    if (mc != CURLM_OK) {
        ah__log(AH_LOG_ERROR, "loop: curl_multi_add_handle: %s", curl_multi_strerror(mc));
        return AH_ERR_TRANSPORT;
    }
    sh->n_easy++;
    loop->n_easy++;
    return AH_OK;
}

void ah__loop_set_shard_max(ah_loop *loop, size_t n)
{
    loop->shard_max = n > 0 ? n : AH__SHARD_MAX;
}

size_t ah__loop_shard_count(const ah_loop *loop)
{
    return loop->n_shards;
}

CURL *ah__loop_easy_take(ah_loop *loop, int *kept)
{
    *kept = 0;
    if (loop->n_pool > 0) {
        loop->n_pool--;
        *kept = loop->easy_kept[loop->n_pool];
        return loop->easy_pool[loop->n_pool];
    }
    CURL *e = curl_easy_init();
    if (e)
        loop->easy_made++;
    return e;
}

void ah__loop_easy_give(ah_loop *loop, CURL *easy, int keep)
{
    if (!easy)
        return;
    if (loop->n_pool == AH__EASY_POOL_MAX) {
        curl_easy_cleanup(easy);
        return;
    }
    /* Unless kept: every option back to its default (the next owner sets its own); the
     * handle keeps what libcurl keeps across a reset: its TLS session cache and its
     * buffers. The connections and DNS cache are the multi handle's either way. */
    if (!keep)
        curl_easy_reset(easy);
    loop->easy_kept[loop->n_pool] = (unsigned char)keep;
    loop->easy_pool[loop->n_pool++] = easy;
}

size_t ah__loop_easy_made(const ah_loop *loop)
{
    return loop->easy_made;
}

static void remove_easy(ah_loop *loop, CURL *easy)
{
    void *priv = NULL;
    curl_easy_getinfo(easy, CURLINFO_PRIVATE, (char **)&priv);
    ah__easy_link *link = priv;
    shard *sh = loop->shards[link->shard];
    if (curl_multi_remove_handle(sh->multi, easy) == CURLM_OK) {
        sh->n_easy--;
        loop->n_easy--;
    }
}

void ah__loop_discard_easy(ah_loop *loop, CURL *easy, ah__easy_link *link,
                           void (*release)(void *ud), void *ud)
{
    link->done = NULL;
    if (loop->in_curl) {
        if (loop->n_discards == loop->cap_discards) {
            size_t cap = loop->cap_discards ? 2 * loop->cap_discards : 8;
            struct discard *d = realloc(loop->discards, cap * sizeof *d);
            if (d) {
                loop->discards = d;
                loop->cap_discards = cap;
            }
        }
        if (loop->n_discards < loop->cap_discards) {
            loop->discards[loop->n_discards++] = (struct discard){easy, release, ud};
            return;
        }
        /* Out of memory: the disarmed link keeps the transfer silent; it is dropped when
         * curl reports it finished. Logged because it may take until a timeout. */
        ah__log(AH_LOG_ERROR, "loop: out of memory deferring a transfer removal");
        return;
    }
    remove_easy(loop, easy);
    release(ud);
}

curl_socket_t ah__loop_sock_by_port(ah_loop *loop, int port)
{
    if (port <= 0 || port >= PORTS || !loop->port_head)
        return CURL_SOCKET_BAD;
    /* curl's sockets are in the fd table while it waits on them, as it does on the
     * connection a response head is arriving on. */
    for (int link = loop->port_head[port]; link;) {
        fd_entry *e = fd_find(loop, link - 1);
        if (e->curl_ev)
            return e->fd;
        link = e->port_next;
    }
    return CURL_SOCKET_BAD;
}

static void run_discards(ah_loop *l)
{
    for (size_t i = 0; i < l->n_discards; i++) {
        remove_easy(l, l->discards[i].easy);
        l->discards[i].release(l->discards[i].ud);
    }
    l->n_discards = 0;
}

/* Hand every finished transfer back to its transport. The message is copied before the
 * handle is removed: curl invalidates it on removal. */
static void read_done(ah_loop *l)
{
    /* A done callback may add a transfer, and so a shard: n_shards is read each time. */
    for (size_t i = 0; i < l->n_shards; i++) {
        CURLMsg *msg;
        int left;
        while ((msg = curl_multi_info_read(l->shards[i]->multi, &left)) != NULL) {
            if (msg->msg != CURLMSG_DONE)
                continue;
            CURL *easy = msg->easy_handle;
            CURLcode result = msg->data.result;
            void *priv = NULL;
            curl_easy_getinfo(easy, CURLINFO_PRIVATE, (char **)&priv);
            ah__easy_link *link = priv;
            if (!link || !link->done)
                continue; /* discarded: removed and released by run_discards() */
            remove_easy(l, easy);
            link->done(link->ud, result);
        }
    }
}

/* One curl_multi_socket_action; removals it asks for wait until it returns. */
static ah_status curl_action(ah_loop *l, shard *sh, curl_socket_t s, int mask)
{
    int running = 0;
    l->in_curl = 1;
    CURLMcode mc = curl_multi_socket_action(sh->multi, s, mask, &running);
    l->in_curl = 0;
    run_discards(l);
    if (mc != CURLM_OK) {
        ah__log(AH_LOG_ERROR, "loop: curl_multi_socket_action: %s", curl_multi_strerror(mc));
        return AH_ERR_TRANSPORT;
    }
    return AH_OK;
}

/* An fd is ready: curl's socket goes to curl, a watcher's to its callback. */
static ah_status dispatch_fd(ah_loop *l, int fd, int events)
{
    ah_status st = AH_OK;
    fd_entry *e = fd_find(l, fd);
    if (e && e->parked && !e->curl_ev && !e->io) {
        /* ready while curl does not wait on it (the server closed the idle connection):
         * out of the hooks' set, or a level-triggered loop would report it again and
         * again; the entry stays parked, so curl's next wait on it adds it back */
        if (l->hooked && e->told) {
            e->told = 0;
            l->hooks.watch(l->hooks.ud, e->fd, 0);
        }
        return st;
    }
    if (e && e->curl_ev) {
        int mask = (events & AH_IO_READ ? CURL_CSELECT_IN : 0) |
                   (events & AH_IO_WRITE ? CURL_CSELECT_OUT : 0) |
                   (events & AH__IO_ERROR ? CURL_CSELECT_ERR : 0);
        st = curl_action(l, l->shards[e->shard], fd, mask);
        e = fd_find(l, fd); /* the table may have changed */
    }
    if (e && e->io) {
        /* An error is reported as every event asked for, so a read or write sees it. */
        int ready = events & AH__IO_ERROR ? e->io->events : events & e->io->events;
        if (ready)
            e->io->fn(e->io->ud, fd, ready);
    }
    return st;
}

/* Whether sh's curl time-out is due; *now is read from the clock at the first need
 * (-1: not yet). */
static int curl_timeout_due(const shard *sh, int64_t *now)
{
    if (sh->curl_due < 0)
        return 0;
    if (*now < 0)
        *now = real_now_ms();
    return *now >= sh->curl_due;
}

/* Every shard's curl time-out that is due by now. */
static ah_status run_curl_timeouts(ah_loop *l, ah_status st)
{
    int64_t now = -1;
    for (size_t i = 0; i < l->n_shards; i++) {
        shard *sh = l->shards[i];
        if (curl_timeout_due(sh, &now)) {
            sh->curl_due = -1;
            if (curl_action(l, sh, CURL_SOCKET_TIMEOUT, 0) != AH_OK)
                st = AH_ERR_TRANSPORT;
        }
    }
    return st;
}

/* Everything after the wait, common to both backends: wake-ups first (a cancellation
 * must win over the attempt below), then curl's time-outs, then the loop's timers.
 * A timer that added a transfer (a call's first attempt, a retry) has curl asking for a
 * 0 ms time-out: that one is run in this same step, after the timers, so the request
 * goes out without a second wait (issue 22). Wake-ups that came in meanwhile run first,
 * so a cancellation still wins; and only one extra pass, so a timer cannot starve the
 * wait. */
static ah_status after_wait(ah_loop *l, ah_status st)
{
    atomic_store(&l->wake_pending, 0);
    run_asyncs(l);
    st = run_curl_timeouts(l, st);
    read_done(l);
    fire_timers(l);
    int due_now = 0;
    int64_t now = -1;
    for (size_t i = 0; i < l->n_shards && !due_now; i++)
        due_now = curl_timeout_due(l->shards[i], &now);
    if (due_now) {
        if (atomic_load(&l->async_pending)) {
            atomic_store(&l->wake_pending, 0);
            run_asyncs(l);
        }
        st = run_curl_timeouts(l, st);
        read_done(l);
    }
    return st;
}

static void drain_wake_pipe(ah_loop *l)
{
    char buf[64];
    while (read(l->wake_rd, buf, sizeof buf) > 0)
        ;
}

ah_status ah_loop_run_once(ah_loop *loop, int max_wait_ms)
{
    if (loop->hooked) {
        ah__log(AH_LOG_ERROR, "loop: ah_loop_run_once on a hooked loop: the application's "
                              "loop drives it (ah_loop_fd_ready, ah_loop_timeout)");
        return AH_ERR_STATE;
    }
    /* Wait bound: the caller's, the next timer's, curl's and pending wake-ups. */
    int64_t wait = max_wait_ms < 0 ? INT_MAX : max_wait_ms;
    int64_t next = next_due_ms(loop);
    if (next >= 0 && next < wait)
        wait = next;
    size_t n = loop->n_fds + 1;
    if (n > loop->cap_pfds) {
        size_t cap = loop->cap_pfds ? loop->cap_pfds : 16;
        while (cap < n)
            cap *= 2; /* doubling: thousands of transfers ramping up reallocate rarely */
        struct pollfd *p = realloc(loop->pfds, cap * sizeof *p);
        if (!p) {
            ah__log(AH_LOG_ERROR, "loop: out of memory polling");
            return AH_ERR_NOMEM;
        }
        loop->pfds = p;
        loop->cap_pfds = cap;
    }
    struct pollfd *p = loop->pfds;
    p[0] = (struct pollfd){.fd = loop->wake_rd, .events = POLLIN};
    for (size_t i = 0; i < loop->n_fds; i++) {
        int want = fd_wanted(&loop->fds[i]);
        p[i + 1] = (struct pollfd){.fd = want ? loop->fds[i].fd : -1, /* -1: a parked one */
                                   .events = (short)((want & AH_IO_READ ? POLLIN : 0) |
                                                     (want & AH_IO_WRITE ? POLLOUT : 0) |
                                                     (want & AH_IO_HUP ? AH__POLLRDHUP : 0))};
    }
    ah_status st = AH_OK;
    loop->in_dispatch = 1;
    int r = poll(p, (nfds_t)n, (int)(wait > INT_MAX ? INT_MAX : wait));
    if (r < 0 && errno != EINTR) {
        ah__log(AH_LOG_ERROR, "loop: poll: %s", strerror(errno));
        st = AH_ERR_IO;
    }
    if (r > 0 && (p[0].revents & POLLIN))
        drain_wake_pipe(loop);
    /* Wake-ups and cancellations before any socket is served. */
    atomic_store(&loop->wake_pending, 0);
    run_asyncs(loop);
    for (size_t i = 1; r > 0 && i < n; i++) {
        short re = p[i].revents;
        if (!re || (re & POLLNVAL))
            continue;
        int ev = (re & (POLLIN | POLLHUP) ? AH_IO_READ : 0) | (re & POLLOUT ? AH_IO_WRITE : 0) |
                 (re & (AH__POLLRDHUP | POLLHUP | POLLERR) ? AH_IO_HUP : 0) |
                 (re & POLLERR ? AH__IO_ERROR : 0);
        if (dispatch_fd(loop, p[i].fd, ev) != AH_OK)
            st = AH_ERR_TRANSPORT;
    }
    st = after_wait(loop, st);
    loop->in_dispatch = 0;
    return st;
}

void ah_loop_fd_ready(ah_loop *loop, int fd, int events)
{
    if (!loop)
        return;
    int outer = loop->in_dispatch;
    loop->in_dispatch = 1;
    atomic_store(&loop->wake_pending, 0);
    run_asyncs(loop);
    dispatch_fd(loop, fd, events & (AH_IO_READ | AH_IO_WRITE | AH_IO_HUP));
    (void)after_wait(loop, AH_OK);
    loop->in_dispatch = outer;
    hooks_sync_timeout(loop);
}

void ah_loop_timeout(ah_loop *loop)
{
    if (!loop)
        return;
    int outer = loop->in_dispatch;
    loop->in_dispatch = 1;
    loop->told_timeout_due = -2; /* the told timeout fired: tell the next one afresh */
    (void)after_wait(loop, AH_OK);
    loop->in_dispatch = outer;
    hooks_sync_timeout(loop);
}

ah_status ah_loop_run(ah_loop *loop)
{
    ah_status st = AH_OK;
    while (ah_loop_alive(loop)) {
        st = ah_loop_run_once(loop, -1);
        if (st != AH_OK)
            break;
    }
    return st;
}
