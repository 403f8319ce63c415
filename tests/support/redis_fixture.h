/* redis_fixture.h - a real redis-server for one test, started and stopped by it.
 *
 * redis_fixture_start() runs `redis-server` with no persistence on a unix socket in a
 * fresh temp dir (or, with tcp = 1, on a free loopback port found by binding port 0 and
 * releasing it) and waits until it answers PING. redis_fixture_stop() kills it
 * (SIGTERM, then SIGKILL) and removes the dir. Header-only: include it in one test file.
 */
#ifndef AH_TEST_REDIS_FIXTURE_H
#define AH_TEST_REDIS_FIXTURE_H

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

typedef struct redis_fixture {
    pid_t pid;
    char dir[128];
    char sock[192];
    int port;       /* tcp only */
    char url[256];  /* redis://127.0.0.1:PORT/0 or unix:/.../redis.sock */
    char password[64];
} redis_fixture;

static void redis_fixture_sleep_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

static int redis_fixture_free_port(void)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a;
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof a;
    int port = -1;
    if (fd >= 0 && bind(fd, (struct sockaddr *)&a, sizeof a) == 0 &&
        getsockname(fd, (struct sockaddr *)&a, &len) == 0)
        port = ntohs(a.sin_port);
    if (fd >= 0)
        close(fd);
    return port;
}

/* A blocking connection to the fixture's address (-1 when nothing listens). */
static int redis_fixture_dial(const redis_fixture *f)
{
    int fd;
    if (f->port) {
        struct sockaddr_in a;
        memset(&a, 0, sizeof a);
        a.sin_family = AF_INET;
        a.sin_port = htons((unsigned short)f->port);
        a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        fd = socket(AF_INET, SOCK_STREAM, 0);
        if (fd < 0 || connect(fd, (struct sockaddr *)&a, sizeof a) != 0) {
            if (fd >= 0)
                close(fd);
            return -1;
        }
    } else {
        struct sockaddr_un a;
        memset(&a, 0, sizeof a);
        a.sun_family = AF_UNIX;
        size_t n = strlen(f->sock);
        if (n >= sizeof a.sun_path)
            return -1;
        memcpy(a.sun_path, f->sock, n + 1);
        fd = socket(AF_UNIX, SOCK_STREAM, 0);
        if (fd < 0 || connect(fd, (struct sockaddr *)&a, sizeof a) != 0) {
            if (fd >= 0)
                close(fd);
            return -1;
        }
    }
    return fd;
}

/* 1 when something answers +PONG on the fixture's address. */
static int redis_fixture_ping(const redis_fixture *f)
{
    int fd = redis_fixture_dial(f);
    if (fd < 0)
        return 0;
    char cmd[128];
    if (f->password[0])
        snprintf(cmd, sizeof cmd, "AUTH %s\r\nPING\r\n", f->password);
    else
        snprintf(cmd, sizeof cmd, "PING\r\n");
    int ok = 0;
    if (write(fd, cmd, strlen(cmd)) == (ssize_t)strlen(cmd)) {
        char buf[64] = {0};
        size_t got = 0;
        for (int i = 0; i < 50 && got < sizeof buf - 1; i++) {
            ssize_t n = read(fd, buf + got, sizeof buf - 1 - got);
            if (n <= 0)
                break;
            got += (size_t)n;
            if (strstr(buf, "+PONG"))
                break;
        }
        ok = strstr(buf, "+PONG") != NULL;
    }
    close(fd);
    return ok;
}

/* Send one inline command (e.g. "CLIENT KILL TYPE normal") on a connection of its own
 * and wait for the first line of the reply, blocking this thread (and so the test's
 * loop: what the server does meanwhile, the loop has not seen yet). The reply's first
 * line goes to out (without CRLF). 0 on success, -1 when nothing answered. */
static inline int redis_fixture_call(const redis_fixture *f, const char *cmd, char *out,
                              size_t size)
{
    int fd = redis_fixture_dial(f);
    if (fd < 0)
        return -1;
    char buf[512];
    if (f->password[0])
        snprintf(buf, sizeof buf, "AUTH %s\r\n%s\r\n", f->password, cmd);
    else
        snprintf(buf, sizeof buf, "%s\r\n", cmd);
    int lines = f->password[0] ? 2 : 1, rc = -1;
    if (write(fd, buf, strlen(buf)) == (ssize_t)strlen(buf)) {
        size_t got = 0;
        char rep[1024];
        while (got < sizeof rep - 1) {
            ssize_t n = read(fd, rep + got, sizeof rep - 1 - got);
            if (n <= 0)
                break;
            got += (size_t)n;
            rep[got] = '\0';
            int seen = 0;
            for (const char *p = rep; (p = strstr(p, "\r\n")) != NULL; p += 2)
                seen++;
            if (seen >= lines)
                break;
        }
        rep[got] = '\0';
        const char *line = rep;
        for (int i = 1; i < lines && line; i++) {
            line = strstr(line, "\r\n");
            line = line ? line + 2 : NULL;
        }
        if (line && strstr(line, "\r\n")) {
            size_t n = (size_t)(strstr(line, "\r\n") - line);
            if (out && size) {
                if (n >= size)
                    n = size - 1;
                memcpy(out, line, n);
                out[n] = '\0';
            }
            rc = 0;
        }
    }
    close(fd);
    return rc;
}

/* Drop every client connection but the caller's own, as Redis's idle `timeout`, a load
 * balancer's idle timeout or an operator's CLIENT KILL does. Returns how many (-1 when
 * the server did not answer). Blocking: see redis_fixture_call. */
static inline int redis_fixture_kill_clients(const redis_fixture *f)
{
    char out[64];
    if (redis_fixture_call(f, "CLIENT KILL TYPE normal", out, sizeof out) != 0 ||
        out[0] != ':')
        return -1;
    return atoi(out + 1);
}

/* (Re)start the server of an initialised fixture (same address). 0 on success. */
static int redis_fixture_spawn(redis_fixture *f)
{
    char port[16];
    snprintf(port, sizeof port, "%d", f->port);
    pid_t pid = fork();
    if (pid < 0)
        return -1;
    if (pid == 0) {
        int null = open("/dev/null", 1);
        if (null >= 0) {
            dup2(null, 1);
            dup2(null, 2);
        }
        if (f->password[0])
            execlp("redis-server", "redis-server", "--port", port, "--bind", "127.0.0.1",
                   "--unixsocket", f->sock, "--save", "", "--appendonly", "no", "--dir",
                   f->dir, "--requirepass", f->password, (char *)NULL);
        else
            execlp("redis-server", "redis-server", "--port", port, "--bind", "127.0.0.1",
                   "--unixsocket", f->sock, "--save", "", "--appendonly", "no", "--dir",
                   f->dir, (char *)NULL);
        _exit(127);
    }
    f->pid = pid;
    for (int i = 0; i < 500; i++) { /* up to 5 s */
        if (redis_fixture_ping(f))
            return 0;
        int st;
        if (waitpid(pid, &st, WNOHANG) == pid) {
            f->pid = 0;
            return -1;
        }
        redis_fixture_sleep_ms(10);
    }
    return -1;
}

static int redis_fixture_start(redis_fixture *f, int tcp, const char *password)
{
    memset(f, 0, sizeof *f);
    snprintf(f->dir, sizeof f->dir, "/tmp/ah-redis-XXXXXX");
    if (!mkdtemp(f->dir))
        return -1;
    snprintf(f->sock, sizeof f->sock, "%s/redis.sock", f->dir);
    if (password)
        snprintf(f->password, sizeof f->password, "%s", password);
    f->port = tcp ? redis_fixture_free_port() : 0;
    if (tcp && f->port <= 0)
        return -1;
    if (tcp)
        snprintf(f->url, sizeof f->url, "redis://%s%s%s127.0.0.1:%d/0",
                 f->password[0] ? ":" : "", f->password, f->password[0] ? "@" : "", f->port);
    else
        snprintf(f->url, sizeof f->url, "unix:%s", f->sock);
    return redis_fixture_spawn(f);
}

/* Stop the server (the dir stays for a restart). */
static void redis_fixture_kill(redis_fixture *f, int sig)
{
    if (f->pid <= 0)
        return;
    kill(f->pid, sig);
    if (sig == SIGSTOP || sig == SIGCONT)
        return;
    int st;
    for (int i = 0; i < 300; i++) {
        if (waitpid(f->pid, &st, WNOHANG) == f->pid) {
            f->pid = 0;
            return;
        }
        redis_fixture_sleep_ms(10);
    }
    kill(f->pid, SIGKILL);
    waitpid(f->pid, &st, 0);
    f->pid = 0;
}

static void redis_fixture_stop(redis_fixture *f)
{
    if (f->pid > 0) {
        kill(f->pid, SIGCONT);
        redis_fixture_kill(f, SIGTERM);
    }
    char cmd[300];
    if (f->dir[0]) {
        snprintf(cmd, sizeof cmd, "rm -rf '%s'", f->dir);
        if (system(cmd) != 0)
            fprintf(stderr, "redis fixture: could not remove %s\n", f->dir);
    }
}

#endif
