/* test_loop_fds.c - the loop's fd table, indexed by fd and by local port, and its
 * transfers spread over several multi handles (shards): hundreds of
 * watchers on pipes started, stopped and freed in shuffled order, each ready fd reaching
 * exactly its own watcher (an entry moved by a removal must still be found); and every
 * socket curl waits on found by its local port while 64 transfers hold their heads at
 * the built-in mock (real loopback sockets), nothing found for a port nobody uses or
 * once the transfers are gone; 40 concurrent transfers over 10 shards of 4 and 10
 * sequential ones after them all answered in full; AH_IO_HUP: a peer that closes (or shuts
 * its side down) is reported, one that stays and sends bytes is not, and a hooked loop's
 * hooks are told it only once they said they can watch it; a kept-alive upstream socket
 * stays told to hooks that can keep an idle watch between transfers, and is removed when
 * curl closes it. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <dirent.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "agenthost.h"
#include "agenthost/mock.h"
#include "agenthost/transport.h"
#include "loop_curl.h"

enum { NP = 300 };

typedef struct watch {
    int rd, wr;
    ah_io *io;
    int started;
    int hits;
} watch;

static void on_ready(void *ud, int fd, int events)
{
    watch *w = ud;
    assert_int_equal(fd, w->rd);
    assert_true(events & AH_IO_READ);
    w->hits++;
}

/* Step until nothing more is ready; every watcher's count of callbacks since the last
 * call must be 1 for those marked ready and 0 for the rest. */
static void expect_ready(ah_loop *loop, watch *w, const int *ready)
{
    for (int i = 0; i < NP; i++)
        w[i].hits = 0;
    assert_int_equal(ah_loop_run_once(loop, 0), AH_OK);
    for (int i = 0; i < NP; i++) {
        if (w[i].hits != (ready[i] ? 1 : 0))
            fail_msg("watcher %d (fd %d): %d callbacks, expected %d", i, w[i].rd, w[i].hits,
                     ready[i] ? 1 : 0);
    }
}

static void drain(watch *w)
{
    char b[16];
    while (read(w->rd, b, sizeof b) > 0)
        ;
}

static void many_watchers_each_reach_their_own(void **state)
{
    (void)state;
    ah_seeded_rng *seed = ah_seeded_rng_new(7);
    const ah_rng *rng = ah_seeded_rng_get(seed);
    ah_loop *loop = ah_loop_new(NULL, NULL);
    assert_non_null(loop);
    static watch w[NP];
    static int ready[NP];
    for (int i = 0; i < NP; i++) {
        int p[2];
        assert_int_equal(pipe(p), 0);
        fcntl(p[0], F_SETFL, O_NONBLOCK);
        w[i] = (watch){.rd = p[0], .wr = p[1]};
        w[i].io = ah_io_new(loop, p[0], on_ready, &w[i]);
        assert_non_null(w[i].io);
        assert_int_equal(ah_io_start(w[i].io, AH_IO_READ), AH_OK);
        w[i].started = 1;
    }
    /* a second watcher on a watched fd is refused */
    assert_null(ah_io_new(loop, w[5].rd, on_ready, &w[5]));
    for (int round = 0; round < 20; round++) {
        /* stop or restart a random third of them: removals move entries around */
        for (int k = 0; k < NP / 3; k++) {
            int i = (int)ah_rng_uniform(rng, NP - 1);
            if (!w[i].io)
                continue;
            if (w[i].started)
                ah_io_stop(w[i].io);
            else
                assert_int_equal(ah_io_start(w[i].io, AH_IO_READ), AH_OK);
            w[i].started = !w[i].started;
        }
        /* and free a few for good */
        for (int k = 0; k < 3; k++) {
            int i = (int)ah_rng_uniform(rng, NP - 1);
            ah_io_free(w[i].io);
            w[i].io = NULL;
            w[i].started = 0;
        }
        /* write to a random quarter */
        for (int i = 0; i < NP; i++) {
            ready[i] = 0;
            if (ah_rng_uniform(rng, 3) == 0) {
                assert_int_equal(write(w[i].wr, "x", 1), 1);
                ready[i] = w[i].started;
            }
        }
        expect_ready(loop, w, ready);
        for (int i = 0; i < NP; i++)
            drain(&w[i]);
    }
    for (int i = 0; i < NP; i++) {
        ah_io_free(w[i].io);
        close(w[i].rd);
        close(w[i].wr);
    }
    ah_loop_free(loop);
    ah_seeded_rng_free(seed);
}

/* ---- by port: the sockets curl waits on ------------------------------------------ */

static int sink_head(void *ud, int status, const ah_header *h, size_t n)
{
    (void)ud, (void)status, (void)h, (void)n;
    return 0;
}
static int sink_body(void *ud, const char *b, size_t n)
{
    (void)ud, (void)b, (void)n;
    return 0;
}
static void sink_done(void *ud, const ah_error *e)
{
    (void)e;
    (*(int *)ud)++;
}

static int port_of(int fd, int peer)
{
    struct sockaddr_in sa;
    socklen_t len = sizeof sa;
    int r = peer ? getpeername(fd, (struct sockaddr *)&sa, &len)
                 : getsockname(fd, (struct sockaddr *)&sa, &len);
    if (r != 0 || sa.sin_family != AF_INET)
        return -1;
    return ntohs(sa.sin_port);
}

static void every_curl_socket_is_found_by_its_port(void **state)
{
    (void)state;
    enum { NT = 64 };
    ah_mock_config mc;
    ah_mock_config_init(&mc);
    mc.plan_json = "{\"steps\": [], \"then\": {\"delay_headers_ms\": 20000}}";
    ah_mock *m = NULL;
    char err[256];
    assert_int_equal(ah_mock_new(&mc, &m, err, sizeof err), AH_OK);
    char url[128];
    snprintf(url, sizeof url, "%s/v1/messages", ah_mock_url(m));
    ah_loop *loop = ah_loop_new(NULL, NULL);
    assert_non_null(loop);
    ah__loop_set_shard_max(loop, 8); /* 8 multi handles: fds of every one are found */
    const ah_transport *tr = ah_transport_curl();
    const char *body = "{\"model\":\"m\",\"stream\":true,\"max_tokens\":5,"
                       "\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]}";
    ah_header hdr[] = {{"content-type", "application/json"}};
    ah_http_request req = {.url = url, .headers = hdr, .n_headers = 1, .body = body,
                           .body_len = strlen(body)};
    ah_transport_sink sink = {.on_head = sink_head, .on_body = sink_body,
                              .on_done = sink_done};
    int done = 0;
    void *att[NT];
    for (int i = 0; i < NT; i++) {
        ah_error e;
        assert_int_equal(tr->ops->start(tr->self, loop, &req, &sink, &done, &att[i], &e),
                         AH_OK);
    }
    /* Every request has reached the mock: curl waits for each head on its socket. */
    for (int guard = 0; ah_mock_request_count(m) < NT && guard < 20000; guard++)
        ah_loop_run_once(loop, 5);
    assert_int_equal(ah_mock_request_count(m), NT);
    for (int k = 0; k < 5; k++)
        ah_loop_run_once(loop, 1); /* curl has registered what it waits on */
    int found = 0;
    DIR *d = opendir("/proc/self/fd");
    assert_non_null(d);
    struct dirent *de;
    while ((de = readdir(d)) != NULL) {
        int fd = atoi(de->d_name);
        if (de->d_name[0] == '.' || fd == dirfd(d))
            continue;
        if (port_of(fd, 1) != ah_mock_port(m))
            continue; /* not one of curl's connections to the mock */
        int lport = port_of(fd, 0);
        assert_true(lport > 0);
        assert_int_equal(ah__loop_sock_by_port(loop, lport), fd);
        found++;
    }
    closedir(d);
    assert_int_equal(found, NT);
    assert_int_equal(ah__loop_shard_count(loop), NT / 8);
    assert_int_equal(ah__loop_sock_by_port(loop, 0), CURL_SOCKET_BAD);
    assert_int_equal(ah__loop_sock_by_port(loop, ah_mock_port(m)), CURL_SOCKET_BAD);
    assert_int_equal(ah__loop_sock_by_port(loop, 70000), CURL_SOCKET_BAD);
    for (int i = 0; i < NT; i++)
        tr->ops->abort(tr->self, att[i]);
    assert_int_equal(done, 0); /* aborted: no callback */
    assert_int_equal(ah_loop_transfer_count(loop), 0);
    ah_loop_free(loop);
    ah_mock_free(m);
}

/* ---- shards: more multi handles as more transfers are in flight ------------------- */

typedef struct xfer {
    int status, done;
    ah_error err;
    char body[8192];
    size_t len;
} xfer;

static int x_head(void *ud, int status, const ah_header *h, size_t n)
{
    (void)h, (void)n;
    ((xfer *)ud)->status = status;
    return 0;
}
static int x_body(void *ud, const char *b, size_t n)
{
    xfer *x = ud;
    if (x->len + n < sizeof x->body) {
        memcpy(x->body + x->len, b, n);
        x->len += n;
        x->body[x->len] = '\0';
    }
    return 0;
}
static void x_done(void *ud, const ah_error *e)
{
    xfer *x = ud;
    x->err = *e;
    x->done++;
}

static void transfers_spread_over_shards_all_complete(void **state)
{
    (void)state;
    enum { NT = 40, SEQ = 10 };
    ah_mock_config mc;
    ah_mock_config_init(&mc);
    mc.text = "pong";
    ah_mock *m = NULL;
    char err[256];
    assert_int_equal(ah_mock_new(&mc, &m, err, sizeof err), AH_OK);
    char url[128];
    snprintf(url, sizeof url, "%s/v1/messages", ah_mock_url(m));
    ah_loop *loop = ah_loop_new(NULL, NULL);
    assert_non_null(loop);
    ah__loop_set_shard_max(loop, 4);
    const ah_transport *tr = ah_transport_curl();
    const char *body = "{\"model\":\"m\",\"stream\":true,\"max_tokens\":5,"
                       "\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]}";
    ah_header hdr[] = {{"content-type", "application/json"}};
    ah_http_request req = {.url = url, .headers = hdr, .n_headers = 1, .body = body,
                           .body_len = strlen(body)};
    ah_transport_sink sink = {.on_head = x_head, .on_body = x_body, .on_done = x_done};
    static xfer x[NT + SEQ];
    memset(x, 0, sizeof x);
    void *att;
    ah_error e;
    for (int i = 0; i < NT; i++)
        assert_int_equal(tr->ops->start(tr->self, loop, &req, &sink, &x[i], &att, &e), AH_OK);
    assert_int_equal(ah__loop_shard_count(loop), NT / 4);
    assert_int_equal(ah_loop_run(loop), AH_OK);
    /* then one at a time: each goes to the first shard, whose connections it reuses */
    for (int i = NT; i < NT + SEQ; i++) {
        assert_int_equal(tr->ops->start(tr->self, loop, &req, &sink, &x[i], &att, &e), AH_OK);
        assert_int_equal(ah_loop_run(loop), AH_OK);
    }
    for (int i = 0; i < NT + SEQ; i++) {
        if (x[i].done != 1 || x[i].err.kind != AH_EK_NONE || x[i].status != 200)
            fail_msg("transfer %d: done %d, status %d, error %s", i, x[i].done, x[i].status,
                     x[i].err.message);
        assert_non_null(strstr(x[i].body, "\"pong\""));
        assert_non_null(strstr(x[i].body, "message_stop"));
    }
    assert_int_equal(ah__loop_shard_count(loop), NT / 4);
    assert_int_equal(ah_loop_transfer_count(loop), 0);
    ah_loop_free(loop);
    ah_mock_free(m);
}

/* ---- AH_IO_HUP: a peer that closes is reported, one that stays (and sends) is not ---- */

typedef struct hup_watch {
    int hits, events;
} hup_watch;

static void on_hup(void *ud, int fd, int events)
{
    (void)fd;
    hup_watch *h = ud;
    h->hits++;
    h->events = events;
}

static void hup_is_a_peer_leaving_not_bytes(void **state)
{
    (void)state;
    ah_loop *loop = ah_loop_new(NULL, NULL);
    assert_non_null(loop);
    int a[2], b[2];
    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, a), 0);
    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, b), 0);
    hup_watch ha = {0}, hb = {0};
    ah_io *ia = ah_io_new(loop, a[0], on_hup, &ha);
    ah_io *ib = ah_io_new(loop, b[0], on_hup, &hb);
    assert_int_equal(ah_io_start(ia, AH_IO_HUP), AH_OK);
    assert_int_equal(ah_io_start(ib, AH_IO_HUP), AH_OK);
    /* bytes arriving, unread: no hang-up */
    assert_int_equal(write(a[1], "x", 1), 1);
    assert_int_equal(write(b[1], "y", 1), 1);
    assert_int_equal(ah_loop_run_once(loop, 0), AH_OK);
    assert_int_equal(ha.hits, 0);
    assert_int_equal(hb.hits, 0);
    /* a's peer leaves (its byte still unread): a is told, b is not */
    close(a[1]);
    assert_int_equal(ah_loop_run_once(loop, 0), AH_OK);
    assert_int_equal(ha.hits, 1);
    assert_true(ha.events & AH_IO_HUP);
    assert_int_equal(hb.hits, 0);
    /* level-triggered: still ready until stopped */
    assert_int_equal(ah_loop_run_once(loop, 0), AH_OK);
    assert_int_equal(ha.hits, 2);
    ah_io_stop(ia);
    assert_int_equal(ah_loop_run_once(loop, 0), AH_OK);
    assert_int_equal(ha.hits, 2);
    /* a shut-down write side is a hang-up too (POLLRDHUP) */
    assert_int_equal(shutdown(b[1], SHUT_WR), 0);
    assert_int_equal(ah_loop_run_once(loop, 0), AH_OK);
    assert_int_equal(hb.hits, 1);
    ah_io_free(ia);
    ah_io_free(ib);
    close(a[0]);
    close(b[0]);
    close(b[1]);
    ah_loop_free(loop);
}

typedef struct told {
    int fd, events, n;
} told;

static void hk_watch(void *ud, int fd, int events)
{
    told *t = ud;
    t->fd = fd;
    t->events = events;
    t->n++;
}
static void hk_timeout(void *ud, int64_t ms)
{
    (void)ud;
    (void)ms;
}
static void hk_wakeup(void *ud)
{
    (void)ud;
}

/* Hooks never see AH_IO_HUP unless they said they can watch it. */
static void hup_reaches_hooks_only_when_they_watch_it(void **state)
{
    (void)state;
    told t = {0};
    ah_loop_hooks hooks = {.ud = &t, .watch = hk_watch, .set_timeout = hk_timeout,
                           .wakeup = hk_wakeup};
    ah_loop *loop = NULL;
    assert_int_equal(ah_loop_new_hooked(NULL, NULL, &hooks, &loop, NULL, 0), AH_OK);
    int a[2];
    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, a), 0);
    hup_watch h = {0};
    ah_io *io = ah_io_new(loop, a[0], on_hup, &h);
    assert_non_null(io);
    assert_int_equal(ah_io_start(io, AH_IO_HUP), AH_ERR_INVALID);
    assert_int_equal(t.n, 0);
    ah_loop_hooks_caps(loop, AH_HOOKS_HUP);
    assert_int_equal(ah_io_start(io, AH_IO_HUP), AH_OK);
    assert_int_equal(t.n, 1);
    assert_int_equal(t.fd, a[0]);
    assert_int_equal(t.events, AH_IO_HUP);
    ah_loop_fd_ready(loop, a[0], AH_IO_HUP);
    assert_int_equal(h.hits, 1);
    assert_int_equal(h.events, AH_IO_HUP);
    ah_loop_fd_ready(loop, a[0], AH_IO_READ); /* not asked for: not told */
    assert_int_equal(h.hits, 1);
    ah_io_free(io);
    assert_int_equal(t.events, 0);
    close(a[0]);
    close(a[1]);
    ah_loop_free(loop);
}

/* ---- a kept-alive upstream socket between transfers, on a hooked loop ---------------- */

enum { MAXFD = 1024 };
typedef struct mini {
    int watched[MAXFD]; /* what the hooks were told, by fd */
    int adds, removes;  /* 0 -> nonzero, nonzero -> 0 */
    int64_t timeout;
} mini;

static void mini_watch(void *ud, int fd, int events)
{
    mini *m = ud;
    assert_true(fd >= 0 && fd < MAXFD);
    if (!m->watched[fd] && events)
        m->adds++;
    if (m->watched[fd] && !events)
        m->removes++;
    m->watched[fd] = events;
}
static void mini_timeout(void *ud, int64_t ms)
{
    ((mini *)ud)->timeout = ms;
}

static int mini_count(const mini *m)
{
    int n = 0;
    for (int fd = 0; fd < MAXFD; fd++)
        n += m->watched[fd] != 0;
    return n;
}

/* The application's loop: poll what the hooks were told until x is done. */
static void mini_drive(ah_loop *loop, mini *m, xfer *x)
{
    for (int spins = 0; !x->done && spins < 100000; spins++) {
        struct pollfd p[64];
        int n = 0;
        for (int fd = 0; fd < MAXFD && n < 64; fd++)
            if (m->watched[fd])
                p[n++] = (struct pollfd){
                    .fd = fd,
                    .events = (short)((m->watched[fd] & AH_IO_READ ? POLLIN : 0) |
                                      (m->watched[fd] & AH_IO_WRITE ? POLLOUT : 0))};
        int t = m->timeout < 0 || m->timeout > 50 ? 50 : (int)m->timeout;
        int r = poll(p, (nfds_t)n, t);
        int any = 0;
        for (int i = 0; r > 0 && i < n; i++) {
            short re = p[i].revents;
            if (!re)
                continue;
            any = 1;
            ah_loop_fd_ready(loop, p[i].fd,
                             (re & (POLLIN | POLLHUP | POLLERR) ? AH_IO_READ : 0) |
                                 (re & (POLLOUT | POLLERR) ? AH_IO_WRITE : 0));
        }
        if (!any)
            ah_loop_timeout(loop);
    }
    assert_int_equal(x->done, 1);
}

/* With AH_HOOKS_IDLE_WATCH, the connection's socket stays told between sequential
 * transfers that reuse it (one add, no remove) and is removed when curl closes it (the
 * loop's end); without it, it is removed at each transfer's end. */
static void idle_upstream_socket_stays_watched_where_free(void **state)
{
    (void)state;
    enum { SEQ = 5 };
    ah_mock_config mc;
    ah_mock_config_init(&mc);
    mc.text = "pong";
    ah_mock *mk = NULL;
    char err[256];
    assert_int_equal(ah_mock_new(&mc, &mk, err, sizeof err), AH_OK);
    char url[128];
    snprintf(url, sizeof url, "%s/v1/messages", ah_mock_url(mk));
    const ah_transport *tr = ah_transport_curl();
    const char *body = "{\"model\":\"m\",\"stream\":true,\"max_tokens\":5,"
                       "\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]}";
    ah_header hdr[] = {{"content-type", "application/json"}};
    ah_http_request req = {.url = url, .headers = hdr, .n_headers = 1, .body = body,
                           .body_len = strlen(body)};
    ah_transport_sink sink = {.on_head = x_head, .on_body = x_body, .on_done = x_done};
    for (int idle = 0; idle < 2; idle++) {
        static mini m;
        memset(&m, 0, sizeof m);
        m.timeout = -1;
        ah_loop_hooks hooks = {.ud = &m, .watch = mini_watch, .set_timeout = mini_timeout,
                               .wakeup = hk_wakeup};
        ah_loop *loop = NULL;
        assert_int_equal(ah_loop_new_hooked(NULL, NULL, &hooks, &loop, NULL, 0), AH_OK);
        if (idle)
            ah_loop_hooks_caps(loop, AH_HOOKS_IDLE_WATCH);
        static xfer x[SEQ];
        memset(x, 0, sizeof x);
        for (int i = 0; i < SEQ; i++) {
            void *att;
            ah_error e;
            assert_int_equal(tr->ops->start(tr->self, loop, &req, &sink, &x[i], &att, &e),
                             AH_OK);
            mini_drive(loop, &m, &x[i]);
            if (x[i].err.kind != AH_EK_NONE || x[i].status != 200)
                fail_msg("transfer %d: status %d, error %s", i, x[i].status, x[i].err.message);
            assert_non_null(strstr(x[i].body, "message_stop"));
            /* done: curl waits on nothing now */
            assert_int_equal(mini_count(&m), idle ? 1 : 0);
        }
        if (idle) {
            assert_int_equal(m.adds, 1); /* the one connection, kept told */
            assert_int_equal(m.removes, 0);
        } else {
            assert_int_equal(m.removes, m.adds);
        }
        ah_loop_free(loop); /* closes the connection: a parked socket is told 0 first */
        assert_int_equal(mini_count(&m), 0);
        assert_int_equal(m.removes, m.adds);
    }
    ah_mock_free(mk);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(many_watchers_each_reach_their_own),
        cmocka_unit_test(every_curl_socket_is_found_by_its_port),
        cmocka_unit_test(transfers_spread_over_shards_all_complete),
        cmocka_unit_test(hup_is_a_peer_leaving_not_bytes),
        cmocka_unit_test(hup_reaches_hooks_only_when_they_watch_it),
        cmocka_unit_test(idle_upstream_socket_stays_watched_where_free),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
