/* loop.c - the event loop: one CURLM handle, a min-heap of timers, async wake-ups and the
 * injected clock.
 *
 * Invariants:
 *   - heap[0..n_heap) is a binary min-heap ordered by (due, seq); every active timer is
 * in it exactly once and knows its index (idx == NOT_IN_HEAP when inactive).
 *   - A timer fires only if it was armed before the current firing pass began (its seq is
 *     below the pass's seq mark), so a callback that re-arms with delay 0 cannot starve
 *     the loop.
 *   - n_easy counts the easy handles attached to the multi handle; a finished transfer is
 *     removed from the multi handle before its owner hears about it.
 *   - Nothing here sleeps except curl_multi_poll(), bounded by the next timer.
 */
#include "internal.h"
#include "loop_curl.h"

#include "agenthost/loop.h"

#include <arpa/inet.h>
#include <limits.h>
#include <netinet/in.h>
#include <pthread.h>
#include <sys/socket.h>
#include <stdatomic.h>
#include <stdlib.h>

#define NOT_IN_HEAP SIZE_MAX

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

struct ah_loop {
    CURLM *multi;
    const ah_clock *clock;
    const ah_rng *rng;
    ah_seeded_rng *own_rng; /* when the embedder gave none */
    ah_timer **heap;
    size_t n_heap, cap_heap;
    size_t n_timers; /* timers created and not freed: cap_heap >= n_timers always */
    uint64_t next_seq;
    size_t n_easy;
    ah_async *asyncs; /* doubly linked, loop thread only */
    atomic_int async_pending;
    int in_curl; /* inside curl_multi_perform(): curl forbids removals now */
    struct sock {
        curl_socket_t fd;
        int port; /* local port, 0 until looked up */
    } * socks;
    size_t n_socks, cap_socks;
    struct discard {
        CURL *easy;
        void (*release)(void *ud);
        void *ud;
    } * discards; /* removals deferred until curl_multi_perform() returns */
    size_t n_discards, cap_discards;
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

void ah_timer_stop(ah_timer *t)
{
    if (t && t->idx != NOT_IN_HEAP)
        heap_remove(t->loop, t);
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
        return;
    }
    /* A slot was reserved by ah_timer_new: n_heap < n_timers <= cap_heap. */
    heap_set(l, l->n_heap++, t);
    sift_up(l, t->idx);
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

/* ---- the loop -------------------------------------------------------------------- */

ah_loop *ah_loop_new(const ah_clock *clock, const ah_rng *rng)
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
    l->clock = clock ? clock : ah_clock_real();
    if (rng) {
        l->rng = rng;
    } else {
        l->own_rng = ah_seeded_rng_new(0);
        if (!l->own_rng)
            goto fail;
        l->rng = ah_seeded_rng_get(l->own_rng);
    }
    l->multi = curl_multi_init();
    if (!l->multi)
        goto fail;
    return l;
fail:
    ah_seeded_rng_free(l->own_rng);
    free(l);
    return NULL;
}

void ah_loop_free(ah_loop *loop)
{
    if (!loop)
        return;
    if (loop->n_heap || loop->n_easy || loop->asyncs)
        ah__log(AH_LOG_WARN,
                "loop: freed with %zu timer(s), %zu transfer(s) and async handles still "
                "attached",
                loop->n_heap, loop->n_easy);
    /* Detach what is left so nothing points into freed memory. */
    for (size_t i = 0; i < loop->n_heap; i++)
        loop->heap[i]->idx = NOT_IN_HEAP;
    curl_multi_cleanup(loop->multi); /* closes the cached connections (sock_remove) */
    free(loop->socks);
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

int ah_loop_alive(const ah_loop *loop)
{
    return loop->n_heap > 0 || loop->n_easy > 0;
}

void ah_loop_wakeup(ah_loop *loop)
{
    if (loop)
        curl_multi_wakeup(loop->multi);
}

ah_status ah__loop_add_easy(ah_loop *loop, CURL *easy, ah__easy_link *link)
{
    curl_easy_setopt(easy, CURLOPT_PRIVATE, (void *)link);
    CURLMcode mc = curl_multi_add_handle(loop->multi, easy);
    if (mc != CURLM_OK) {
        ah__log(AH_LOG_ERROR, "loop: curl_multi_add_handle: %s", curl_multi_strerror(mc));
        return AH_ERR_TRANSPORT;
    }
    loop->n_easy++;
    return AH_OK;
}

static void remove_easy(ah_loop *loop, CURL *easy)
{
    if (curl_multi_remove_handle(loop->multi, easy) == CURLM_OK)
        loop->n_easy--;
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

void ah__loop_sock_add(ah_loop *loop, curl_socket_t fd)
{
    if (loop->n_socks == loop->cap_socks) {
        size_t cap = loop->cap_socks ? 2 * loop->cap_socks : 8;
        struct sock *s = realloc(loop->socks, cap * sizeof *s);
        if (!s)
            return; /* only an optimisation (the early ACK) is lost for this socket */
        loop->socks = s;
        loop->cap_socks = cap;
    }
    loop->socks[loop->n_socks++] = (struct sock){fd, 0};
}

void ah__loop_sock_remove(ah_loop *loop, curl_socket_t fd)
{
    for (size_t i = 0; i < loop->n_socks; i++) {
        if (loop->socks[i].fd == fd) {
            loop->socks[i] = loop->socks[--loop->n_socks];
            return;
        }
    }
}

static int local_port(curl_socket_t fd)
{
    struct sockaddr_storage ss;
    socklen_t len = sizeof ss;
    if (getsockname(fd, (struct sockaddr *)&ss, &len) != 0)
        return 0;
    if (ss.ss_family == AF_INET)
        return ntohs(((struct sockaddr_in *)&ss)->sin_port);
    if (ss.ss_family == AF_INET6)
        return ntohs(((struct sockaddr_in6 *)&ss)->sin6_port);
    return 0;
}

curl_socket_t ah__loop_sock_by_port(ah_loop *loop, int port)
{
    if (port <= 0)
        return CURL_SOCKET_BAD;
    for (size_t i = 0; i < loop->n_socks; i++) {
        struct sock *s = &loop->socks[i];
        if (s->port == 0)
            s->port = local_port(s->fd); /* bound by now: the connection is up */
        if (s->port == port)
            return s->fd;
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
    CURLMsg *msg;
    int left;
    while ((msg = curl_multi_info_read(l->multi, &left)) != NULL) {
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

ah_status ah_loop_run_once(ah_loop *loop, int max_wait_ms)
{
    /* Wait bound: the caller's, the next timer's, and (inside curl) curl's own timers. */
    int64_t wait = max_wait_ms < 0 ? INT_MAX : max_wait_ms;
    int64_t next = ah_loop_next_timer_ms(loop);
    if (next >= 0 && next < wait)
        wait = next;
    if (atomic_load(&loop->async_pending))
        wait = 0;
    ah_status st = AH_OK;
    CURLMcode mc = curl_multi_poll(loop->multi, NULL, 0, (int)wait, NULL);
    if (mc != CURLM_OK) {
        ah__log(AH_LOG_ERROR, "loop: curl_multi_poll: %s", curl_multi_strerror(mc));
        st = AH_ERR_TRANSPORT;
    }
    /* Cancellations first, so a cancelled call never starts another attempt below. */
    run_asyncs(loop);
    if (loop->n_easy > 0) {
        int running = 0;
        loop->in_curl = 1;
        mc = curl_multi_perform(loop->multi, &running);
        loop->in_curl = 0;
        if (mc != CURLM_OK) {
            ah__log(AH_LOG_ERROR, "loop: curl_multi_perform: %s",
                    curl_multi_strerror(mc));
            st = AH_ERR_TRANSPORT;
        }
        run_discards(loop);
        read_done(loop);
    }
    fire_timers(loop);
    return st;
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
