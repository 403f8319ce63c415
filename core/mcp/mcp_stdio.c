/* mcp_stdio.c - an MCP server as a child process on the loop (docs/mcp.md, "stdio"):
 * its stdin a Unix socket (writes never raise SIGPIPE: send(MSG_NOSIGNAL)), stdout and
 * stderr pipes, all three fd watchers of the loop, and its exit noticed at once through
 * a pidfd (or, without one, stdout's end and a short waitpid poll).
 *
 * Invariants:
 *   - the child gets exactly the environment it was given, plus PATH (ours) when that
 *     is not given, in a process group of its own (a terminal's Ctrl-C is ours to
 *     handle, and closing signals the whole group: npx and the node it starts);
 *   - one message per line on stdin; a request counts as sent only once its whole line
 *     left our buffer (a child that dies before leaves it never sent);
 *   - stdout lines are capped (MCP_MAX_MESSAGE): a longer one is dropped whole, with a
 *     warning naming the server; stderr goes to the log line by line, each cut at
 *     4 KiB, at most 1 MiB a minute (what is left out is counted and said once);
 *   - at exit, what the child wrote to stdout is read before it is declared gone, so a
 *     last answer is not lost;
 *   - close is EOF on stdin, then SIGTERM after 2 s, then SIGKILL after 2 s more.
 */
#define _GNU_SOURCE
#include "mcp_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

enum { GRACE_MS = 2000, REAP_POLL_MS = 50 };

struct mcp_stdio {
    char **argv, **envp;
    char *cwd;
    pid_t pid; /* 0: no child */
    int in_fd, out_fd, err_fd, pidfd;
    ah_io *in_io, *out_io, *err_io, *pid_io;
    ah_timer *kill_timer, *reap_timer;
    int kill_stage;
    char *wbuf;
    size_t wlen, wcap, woff;
    uint64_t written, queued;
    ah__mcp_lines out, err;
    int64_t err_window;
    size_t err_bytes, err_dropped;
    int out_eof;
};

static void free_strv(char **v)
{
    for (char **p = v; p && *p; p++)
        free(*p);
    free(v);
}

static char **copy_strv(const char *const *v, const char *extra)
{
    size_t n = 0;
    while (v && v[n])
        n++;
    char **out = calloc(n + 2, sizeof *out);
    if (!out)
        return NULL;
    size_t k = 0;
    for (size_t i = 0; i < n; i++)
        if (!(out[k++] = ah__strdup(v[i])))
            goto fail;
    if (extra && !(out[k++] = ah__strdup(extra)))
        goto fail;
    return out;
fail:
    free_strv(out);
    return NULL;
}

static void kill_step(void *ud);

int ah__mcp_stdio_new(ah_mcp *s, const ah_mcp_config *cfg, char *err, size_t errsize)
{
    mcp_stdio *st = calloc(1, sizeof *st);
    if (!st) {
        ah__bufprintf(err, errsize, "out of memory");
        return -1;
    }
    s->stdio = st;
    st->in_fd = st->out_fd = st->err_fd = st->pidfd = -1;
    int has_path = 0;
    for (const char *const *e = cfg->env; e && *e; e++) {
        if (!strchr(*e, '=')) {
            ah__bufprintf(err, errsize, "ah.mcp '%s': env entry '%.60s' is not NAME=value",
                          cfg->name, *e);
            return -1;
        }
        has_path |= strncmp(*e, "PATH=", 5) == 0;
    }
    char *path = NULL;
    const char *ours = getenv("PATH");
    if (!has_path) {
        size_t n = strlen(ours ? ours : "/usr/local/bin:/usr/bin:/bin") + 6;
        path = malloc(n);
        if (path)
            snprintf(path, n, "PATH=%s", ours ? ours : "/usr/local/bin:/usr/bin:/bin");
    }
    st->argv = copy_strv(cfg->command, NULL);
    st->envp = copy_strv(cfg->env, path);
    free(path);
    st->cwd = cfg->cwd ? ah__strdup(cfg->cwd) : NULL;
    st->kill_timer = ah_timer_new(s->loop, kill_step, s);
    if (!st->argv || !st->envp || (cfg->cwd && !st->cwd) || !st->kill_timer) {
        ah__bufprintf(err, errsize, "out of memory");
        return -1;
    }
    ah__mcp_lines_init(&st->out, MCP_MAX_MESSAGE);
    ah__mcp_lines_init(&st->err, MCP_STDERR_LINE);
    return 0;
}

/* ---- the child's output ------------------------------------------------------------ */

static void on_out_line(void *ud, const char *line, size_t len)
{
    ah__mcp_receive(ud, line, len);
}

static void on_out_long(void *ud)
{
    ah_mcp *s = ud;
    ah__mcp_log(s, AH_LOG_WARN, "a line on its stdout is longer than %d bytes: dropped",
                MCP_MAX_MESSAGE);
}

static void on_err_line(void *ud, const char *line, size_t len)
{
    ah_mcp *s = ud;
    mcp_stdio *st = s->stdio;
    int64_t now = ah_loop_now_ms(s->loop);
    if (now - st->err_window >= 60000) {
        if (st->err_dropped)
            ah__mcp_log(s, AH_LOG_INFO, "stderr: %zu more bytes in the last minute were "
                                        "left out of the log",
                        st->err_dropped);
        st->err_window = now;
        st->err_bytes = st->err_dropped = 0;
    }
    if (st->err_bytes + len > MCP_STDERR_PER_MIN) {
        st->err_dropped += len;
        return;
    }
    st->err_bytes += len;
    if (s->on_stderr)
        s->on_stderr(s->stderr_ud, line, len);
    else
        ah__mcp_log(s, AH_LOG_INFO, "stderr: %.*s", (int)len, line);
}

/* A stderr line past 4 KiB: what came is logged, the rest dropped (the splitter keeps
 * only whole lines, so the cut is made by feeding it in pieces). */
static void on_err_long(void *ud)
{
    ah_mcp *s = ud;
    on_err_line(ud, "(a line longer than 4 KiB, left out)", 37);
    (void)s;
}

static void drain(ah_mcp *s, int fd, ah__mcp_lines *lines, int is_out)
{
    char buf[65536];
    for (;;) {
        ssize_t n = read(fd, buf, sizeof buf);
        if (n > 0) {
            if (ah__mcp_lines_feed(lines, buf, (size_t)n, is_out ? on_out_line : on_err_line,
                                   is_out ? on_out_long : on_err_long, s) != 0)
                ah__mcp_log(s, AH_LOG_WARN, "out of memory reading its output");
            if (!s->stdio || (is_out ? s->stdio->out_fd : s->stdio->err_fd) != fd)
                return; /* the handler closed us */
            continue;
        }
        if (n < 0 && errno == EINTR)
            continue;
        if (n == 0 && is_out)
            s->stdio->out_eof = 1;
        if (n == 0) {
            ah_io *io = is_out ? s->stdio->out_io : s->stdio->err_io;
            ah_io_stop(io);
        }
        return;
    }
}

static void reap(ah_mcp *s);

static void out_ready(void *ud, int fd, int events)
{
    (void)events;
    ah_mcp *s = ud;
    drain(s, fd, &s->stdio->out, 1);
    if (s->stdio && s->stdio->out_eof && s->stdio->pidfd < 0 && s->stdio->pid)
        ah_timer_start(s->stdio->reap_timer, 0);
}

static void err_ready(void *ud, int fd, int events)
{
    (void)events;
    ah_mcp *s = ud;
    drain(s, fd, &s->stdio->err, 0);
}

/* ---- the child's stdin ----------------------------------------------------------- */

static void mark_sent(ah_mcp *s)
{
    for (mcp_req *r = s->pending; r; r = r->next)
        if (r->state == RQ_SENDING && r->wend <= s->stdio->written)
            r->state = RQ_SENT;
}

static void flush(ah_mcp *s)
{
    mcp_stdio *st = s->stdio;
    while (st->woff < st->wlen && st->in_fd >= 0) {
        ssize_t n = send(st->in_fd, st->wbuf + st->woff, st->wlen - st->woff,
                         MSG_NOSIGNAL | MSG_DONTWAIT);
        if (n > 0) {
            st->woff += (size_t)n;
            st->written += (uint64_t)n;
            continue;
        }
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            ah_io_start(st->in_io, AH_IO_WRITE);
            mark_sent(s);
            return;
        }
        /* EPIPE / ECONNRESET: the child closed its stdin; its exit follows */
        ah__mcp_log(s, AH_LOG_DEBUG, "writing to its stdin failed: %s", strerror(errno));
        st->wlen = st->woff = 0;
        ah_io_stop(st->in_io);
        close(st->in_fd);
        st->in_fd = -1;
        return;
    }
    st->wlen = st->woff = 0;
    ah_io_stop(st->in_io);
    mark_sent(s);
}

static void in_ready(void *ud, int fd, int events)
{
    (void)fd, (void)events;
    flush(ud);
}

int ah__mcp_stdio_write(ah_mcp *s, const char *msg, mcp_req *r)
{
    mcp_stdio *st = s->stdio;
    if (!st || st->in_fd < 0 || !st->pid || s->closing)
        return -1;
    size_t n = strlen(msg);
    if (st->wlen + n + 1 > st->wcap) {
        size_t cap = st->wcap ? st->wcap : 8192;
        while (cap < st->wlen + n + 1)
            cap *= 2;
        char *b = realloc(st->wbuf, cap);
        if (!b)
            return -1;
        st->wbuf = b;
        st->wcap = cap;
    }
    memcpy(st->wbuf + st->wlen, msg, n);
    st->wbuf[st->wlen + n] = '\n';
    st->wlen += n + 1;
    st->queued += n + 1;
    if (r) {
        r->wend = st->queued;
        r->state = RQ_SENDING;
    }
    flush(s);
    return 0;
}

/* ---- the child's life ------------------------------------------------------------- */

static void close_fd(ah_io **io, int *fd)
{
    ah_io_free(*io);
    *io = NULL;
    if (*fd >= 0)
        close(*fd);
    *fd = -1;
}

/* Close everything of the process (not the configuration). */
static void proc_cleanup(mcp_stdio *st)
{
    close_fd(&st->in_io, &st->in_fd);
    close_fd(&st->out_io, &st->out_fd);
    close_fd(&st->err_io, &st->err_fd);
    close_fd(&st->pid_io, &st->pidfd);
    ah_timer_free(st->reap_timer);
    st->reap_timer = NULL;
    ah_timer_stop(st->kill_timer);
    st->kill_stage = 0;
    st->wlen = st->woff = 0;
    st->written = st->queued = 0;
    st->out_eof = 0;
    st->pid = 0; /* the line buffers are reset at the next spawn: a feed may be going */
}

/* The child ended (status from waitpid): read what it left, then tell the client. */
static void exited(ah_mcp *s, int status)
{
    mcp_stdio *st = s->stdio;
    if (st->out_fd >= 0)
        drain(s, st->out_fd, &st->out, 1);
    if (st->err_fd >= 0)
        drain(s, st->err_fd, &st->err, 0);
    char why[96];
    if (WIFEXITED(status))
        ah__bufprintf(why, sizeof why, "exited with status %d", WEXITSTATUS(status));
    else if (WIFSIGNALED(status))
        ah__bufprintf(why, sizeof why, "was killed by signal %d", WTERMSIG(status));
    else
        ah__bufprintf(why, sizeof why, "ended");
    proc_cleanup(st);
    if (s->closing) {
        ah__mcp_set_state(s, AH_MCP_CLOSED, NULL);
        return;
    }
    ah__mcp_log(s, AH_LOG_WARN, "%s", why);
    ah__mcp_child_gone(s, why);
}

static void reap(ah_mcp *s)
{
    mcp_stdio *st = s->stdio;
    if (!st || !st->pid)
        return;
    int status = 0;
    pid_t r = waitpid(st->pid, &status, WNOHANG);
    if (r == st->pid) {
        exited(s, status);
    } else if (r < 0 && errno == ECHILD) {
        exited(s, 0); /* reaped by someone else (a SIGCHLD handler of the host) */
    } else if (st->pidfd < 0 && st->reap_timer) {
        ah_timer_start(st->reap_timer, REAP_POLL_MS);
    }
}

static void pid_ready(void *ud, int fd, int events)
{
    (void)fd, (void)events;
    reap(ud);
}

static void reap_tick(void *ud)
{
    reap(ud);
}

static int nonblock(int fd)
{
    int fl = fcntl(fd, F_GETFL);
    return fl < 0 ? -1 : fcntl(fd, F_SETFL, fl | O_NONBLOCK);
}

int ah__mcp_stdio_spawn(ah_mcp *s, char *err, size_t errsize)
{
    mcp_stdio *st = s->stdio;
    int sv[2] = {-1, -1}, op[2] = {-1, -1}, ep[2] = {-1, -1};
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0 ||
        pipe2(op, O_CLOEXEC) != 0 || pipe2(ep, O_CLOEXEC) != 0) {
        ah__bufprintf(err, errsize, "cannot make pipes: %s", strerror(errno));
        goto fail;
    }
    posix_spawn_file_actions_t fa;
    posix_spawnattr_t attr;
    posix_spawn_file_actions_init(&fa);
    posix_spawnattr_init(&attr);
    posix_spawn_file_actions_adddup2(&fa, sv[1], 0);
    posix_spawn_file_actions_adddup2(&fa, op[1], 1);
    posix_spawn_file_actions_adddup2(&fa, ep[1], 2);
    if (st->cwd)
        posix_spawn_file_actions_addchdir_np(&fa, st->cwd);
    sigset_t none, all;
    sigemptyset(&none);
    sigfillset(&all);
    posix_spawnattr_setsigmask(&attr, &none);
    posix_spawnattr_setsigdefault(&attr, &all);
    posix_spawnattr_setpgroup(&attr, 0);
    posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF |
                                        POSIX_SPAWN_SETPGROUP);
    ah__mcp_lines_free(&st->out);
    ah__mcp_lines_free(&st->err);
    ah__mcp_lines_init(&st->out, MCP_MAX_MESSAGE);
    ah__mcp_lines_init(&st->err, MCP_STDERR_LINE);
    pid_t pid = 0;
    int rc = posix_spawnp(&pid, st->argv[0], &fa, &attr, st->argv, st->envp);
    posix_spawn_file_actions_destroy(&fa);
    posix_spawnattr_destroy(&attr);
    if (rc != 0) {
        ah__bufprintf(err, errsize, "cannot start '%.200s': %s", st->argv[0], strerror(rc));
        goto fail;
    }
    close(sv[1]);
    close(op[1]);
    close(ep[1]);
    st->pid = pid;
    st->in_fd = sv[0];
    st->out_fd = op[0];
    st->err_fd = ep[0];
    nonblock(st->in_fd);
    nonblock(st->out_fd);
    nonblock(st->err_fd);
#ifdef SYS_pidfd_open
    st->pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
    if (st->pidfd >= 0)
        fcntl(st->pidfd, F_SETFD, FD_CLOEXEC);
#endif
    st->in_io = ah_io_new(s->loop, st->in_fd, in_ready, s);
    st->out_io = ah_io_new(s->loop, st->out_fd, out_ready, s);
    st->err_io = ah_io_new(s->loop, st->err_fd, err_ready, s);
    st->reap_timer = ah_timer_new(s->loop, reap_tick, s);
    if (st->pidfd >= 0)
        st->pid_io = ah_io_new(s->loop, st->pidfd, pid_ready, s);
    if (!st->in_io || !st->out_io || !st->err_io || !st->reap_timer ||
        (st->pidfd >= 0 && !st->pid_io)) {
        ah__bufprintf(err, errsize, "out of memory");
        kill(-pid, SIGKILL);
        waitpid(pid, NULL, 0);
        proc_cleanup(st);
        return -1;
    }
    ah_io_start(st->out_io, AH_IO_READ);
    ah_io_start(st->err_io, AH_IO_READ);
    if (st->pid_io)
        ah_io_start(st->pid_io, AH_IO_READ);
    ah__mcp_log(s, AH_LOG_DEBUG, "started '%s' (pid %d)", st->argv[0], (int)pid);
    ah__mcp_connected(s);
    return 0;
fail:
    for (int i = 0; i < 2; i++) {
        if (sv[i] >= 0)
            close(sv[i]);
        if (op[i] >= 0)
            close(op[i]);
        if (ep[i] >= 0)
            close(ep[i]);
    }
    return -1;
}

int ah__mcp_stdio_alive(const ah_mcp *s)
{
    return s->stdio && s->stdio->pid != 0;
}

static void kill_step(void *ud)
{
    ah_mcp *s = ud;
    mcp_stdio *st = s->stdio;
    if (!st || !st->pid)
        return;
    st->kill_stage++;
    ah__mcp_log(s, AH_LOG_DEBUG, "still running after %d ms: %s", GRACE_MS,
                st->kill_stage == 1 ? "SIGTERM" : "SIGKILL");
    kill(-st->pid, st->kill_stage == 1 ? SIGTERM : SIGKILL);
    if (st->kill_stage == 1)
        ah_timer_start(st->kill_timer, GRACE_MS);
}

void ah__mcp_stdio_close(ah_mcp *s)
{
    mcp_stdio *st = s->stdio;
    if (!st || !st->pid)
        return;
    if (st->in_fd >= 0)
        shutdown(st->in_fd, SHUT_WR); /* EOF: the server's cue to exit */
    st->kill_stage = 0;
    ah_timer_start(st->kill_timer, GRACE_MS);
}

void ah__mcp_stdio_free(ah_mcp *s)
{
    mcp_stdio *st = s->stdio;
    if (!st)
        return;
    if (st->pid) {
        kill(-st->pid, SIGKILL);
        while (waitpid(st->pid, NULL, 0) < 0 && errno == EINTR)
            ;
    }
    proc_cleanup(st);
    if (s->closing) {
        ah_timer_free(st->kill_timer);
        free(st->wbuf);
        free_strv(st->argv);
        free_strv(st->envp);
        free(st->cwd);
        ah__mcp_lines_free(&st->out);
        ah__mcp_lines_free(&st->err);
        free(st);
        s->stdio = NULL;
    }
}
