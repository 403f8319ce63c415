/* main.c - the agenthost program: the Lua host (`agenthost [-v] [--events FILE]
 * SCRIPT.lua [ARGS...]`), one question without a script (`agenthost -p QUESTION
 * [--provider P] [--model M]`: scripts/oneshot.lua as the main chunk), the built-in mock
 * provider (`agenthost mock ...`), the proxy, --help and --version.
 *
 * The host is `lua` plus the agenthost module: full standard library, `arg` as lua sets
 * it, `require "agenthost"` preloaded, and the main chunk run as a coroutine of the
 * binding's scheduler so that agent:run / ah.parallel yield to the one event loop.
 * Exit codes: 0 success, 1 the script failed (syntax or runtime error: "file:line:
 * message" plus a traceback on stderr) or events could not be written (said once), 2
 * usage error (bad arguments, a script or events file that cannot be opened, a bad
 * plan), 130 interrupted (Ctrl-C); killed by SIGPIPE when the reader of a pipe on stdout
 * went away (the script ends at once, as lua's next write would end it).
 *
 * Ctrl-C: the first SIGINT cancels every run in flight (each ends `cancelled` with one
 * run_end) and the script goes on; a second one within 3 s, or one while no run is in
 * flight, ends the program with status 130. The signal handler only writes a byte to a
 * pipe (async-signal-safe); a watcher thread reads it, decides, and wakes the loop with
 * an ah_async, whose callback cancels the runs on the loop thread. No Lua runs outside
 * the loop thread. */
#include "agenthost.h"
#ifndef AH_NO_MOCK
#include "agenthost/mock.h"
#endif
#include "lah.h"

#include <lualib.h>

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#ifdef __GLIBC__
#include <malloc.h>
#endif
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { EXIT_OK = 0, EXIT_FAIL = 1, EXIT_USAGE = 2, EXIT_SIGPIPE = 128 + SIGPIPE };

static void usage(FILE *out)
{
    fputs(
        "usage: agenthost [OPTIONS] SCRIPT.lua [ARGS...]\n"
        "       agenthost [OPTIONS] -p QUESTION [--provider P] [--model M]\n"
        "       agenthost mock [--port N] [--plan PLAN.json] [--text-deltas N]\n"
        "                      [--delta-bytes N]\n"
        "       agenthost proxy [--listen HOST:PORT] [--anthropic-url URL] [--openai-url URL]\n"
        "                       [--policy FILE.lua] [--events FILE] [--redis URL]\n"
        "\n"
        "Runs an agent script written in Lua against an LLM provider, retrying what is\n"
        "safe to retry and continuing interrupted streams. The script sees its\n"
        "arguments in `arg` and `...` as with lua (SCRIPT - reads it from stdin);\n"
        "require \"agenthost\" needs no setup (see docs/lua.md). Ctrl-C cancels the\n"
        "agent runs in flight and the script goes on; a second Ctrl-C within 3 s, or\n"
        "one with no run in flight, exits with status 130.\n"
        "\n"
        "options:\n"
        "  -p QUESTION     answer one question, no script needed: the answer streams\n"
        "                  to stdout, the status line to stderr; the key comes from\n"
        "                  ANTHROPIC_API_KEY or OPENAI_API_KEY (the provider is the\n"
        "                  one whose key is set, Anthropic first)\n"
        "  --provider P    with -p: anthropic, openai (Chat Completions), responses,\n"
        "                  or mock (the built-in mock provider, no key)\n"
        "  --model M       with -p: the model (default: $AGENTHOST_MODEL, else\n"
        "                  claude-sonnet-4-5 / gpt-4o-mini)\n"
        "  -v, --verbose   print each request's and response's head on stderr, as\n"
        "                  curl -v does (keys and auth headers redacted, no body)\n"
        "  --events FILE   also write every event as JSON Lines to FILE (- for\n"
        "                  stdout; or set AGENTHOST_EVENTS=FILE)\n"
        "  --              end of options: the next argument is the script\n"
        "  --help          show this help and exit\n"
        "  --version       print the version and exit\n"
        "\n"
        "mock: serve the Anthropic, OpenAI Chat and OpenAI Responses APIs on 127.0.0.1\n"
        "with a deterministic model and the faults of PLAN.json (see docs/mock.md).\n"
        "Prints its URL on one line, then runs until SIGINT or SIGTERM.\n"
        "  --port N          port to listen on; 0 (the default) picks a free one\n"
        "  --plan FILE       fault plan: a JSON array of steps, one per request\n"
        "  --text-deltas N   stream every reply's text in N deltas\n"
        "  --delta-bytes N   or split it every N bytes\n"
        "\n"
        "proxy: agenthost's retries and cut-stream continuation for clients that cannot\n"
        "embed it (agenthost proxy --help, docs/proxy.md).\n",
        out);
}

/* -v: the heads as curl -v prints them ("> ..." sent, "< ..." received; the library has
 * masked the secrets), the other lines as without -v (warnings and errors). */
static void log_verbose(void *ud, ah_log_level level, int event, const char *line)
{
    if (event == AH_LOG_HTTP_HEAD)
        fprintf(stderr, "%s\n", line);
    else if (level >= AH_LOG_WARN)
        lah_log_to_stderr(ud, level, event, line);
}

int luaopen_agenthost(lua_State *L);

#ifdef AH_NO_MOCK
/* Built without libmicrohttpd (AH_WITH_MOCK=OFF): no mock provider, no proxy. */
static int run_mock(int argc, char **argv)
{
    (void)argc;
    fprintf(stderr, "agenthost %s: this agenthost was built without the mock provider and "
                    "the proxy (AH_WITH_MOCK=OFF)\n",
            argv[1]);
    return EXIT_USAGE;
}
#define lah_proxy_main run_mock
#else
int lah_proxy_main(int argc, char **argv); /* lua/proxy.c */

static void log_to_stderr(void *ud, ah_log_level level, int event, const char *line)
{
    (void)ud;
    (void)event;
    fprintf(stderr, "agenthost: %s: %s\n", ah_log_level_name(level), line);
}

/* A whole non-negative number no larger than max, or -1. */
static long parse_count(const char *s, long max)
{
    char *end = NULL;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || !*s || *end || v < 0 || v > max)
        return -1;
    return v;
}

static char *read_file(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        fprintf(stderr, "agenthost: cannot open plan file '%s': %s\n", path,
                strerror(errno));
        return NULL;
    }
    size_t len = 0, cap = 4096, n;
    char *text = malloc(cap);
    while (text && (n = fread(text + len, 1, cap - len - 1, f)) > 0) {
        len += n;
        if (len + 1 == cap) {
            char *bigger = realloc(text, cap * 2);
            if (!bigger)
                free(text);
            text = bigger;
            cap *= 2;
        }
    }
    if (!text || ferror(f)) {
        fprintf(stderr, "agenthost: cannot read plan file '%s'\n", path);
        free(text);
        fclose(f);
        return NULL;
    }
    fclose(f);
    text[len] = '\0';
    return text;
}

static int run_mock(int argc, char **argv)
{
    ah_mock_config cfg;
    const char *plan_path = NULL;
    char *plan = NULL;
    char err[512];

    ah_mock_config_init(&cfg);
    for (int i = 2; i < argc; i++) {
        const char *opt = argv[i];
        if (strcmp(opt, "--help") == 0 || strcmp(opt, "-h") == 0) {
            usage(stdout);
            return EXIT_OK;
        }
        if (i + 1 >= argc) {
            fprintf(stderr,
                    "agenthost mock: unknown option or missing value '%s' (try "
                    "--help)\n",
                    opt);
            return EXIT_USAGE;
        }
        const char *val = argv[++i];
        long v = 0;
        if (strcmp(opt, "--plan") == 0) {
            plan_path = val;
            continue;
        }
        if (strcmp(opt, "--port") == 0 && (v = parse_count(val, 65535)) >= 0) {
            cfg.port = (int)v;
        } else if (strcmp(opt, "--text-deltas") == 0 &&
                   (v = parse_count(val, 10000000)) > 0) {
            cfg.text_deltas = (size_t)v;
        } else if (strcmp(opt, "--delta-bytes") == 0 &&
                   (v = parse_count(val, 1 << 20)) > 0) {
            cfg.delta_bytes = (size_t)v;
        } else {
            fprintf(stderr, "agenthost mock: bad option or value '%s %s' (try --help)\n",
                    opt, val);
            return EXIT_USAGE;
        }
    }
    if (plan_path) {
        plan = read_file(plan_path);
        if (!plan)
            return EXIT_USAGE;
        if (ah_mock_plan_validate(plan, err, sizeof err) != AH_OK) {
            fprintf(stderr, "agenthost: %s: %s\n", plan_path, err);
            free(plan);
            return EXIT_USAGE;
        }
        cfg.plan_json = plan;
    }

    /* Block the stop signals before the server threads exist, so they inherit the mask
     * and only sigwait below receives them. */
    sigset_t stop;
    sigemptyset(&stop);
    sigaddset(&stop, SIGINT);
    sigaddset(&stop, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &stop, NULL);
    signal(SIGPIPE, SIG_IGN);

    ah_log_set_handler(log_to_stderr, NULL, AH_LOG_WARN);
    ah_mock *m = NULL;
    ah_mock_new(&cfg, &m, err, sizeof err);
    free(plan);
    if (!m) {
        fprintf(stderr, "agenthost: %s\n", err);
        return EXIT_FAIL;
    }
    printf("%s\n", ah_mock_url(m));
    fflush(stdout);
    int sig = 0;
    sigwait(&stop, &sig);
    ah_mock_free(m);
    return EXIT_OK;
}
#endif /* AH_NO_MOCK */

/* ---- the Lua host ------------------------------------------------------------------ */

typedef struct host {
    /* --events: the sink. fd -1 = none; once a write fails it stays failed (said once on
     * stderr, and the exit status is 1). On a regular file, events_good is the length of
     * the complete lines written, where a failed write cuts the file back to. */
    int events_fd;
    const char *events_path;
    int events_regular, events_failed;
    off_t events_good;
    int stdout_broken; /* the reader of a pipe on stdout went away: the script ends */
    ah_io *stdout_watch;
    int done, ok;
    lua_State *L;
    ah_async *cancel_async, *exit_async;
    atomic_int exit_requested;
} host;

/* ---- Ctrl-C ------------------------------------------------------------------------ */

enum { SECOND_INTERRUPT_MS = 3000, EXIT_GRACE_MS = 300 };

static int sig_pipe[2] = {-1, -1};

static void on_sigint(int sig)
{
    (void)sig;
    int saved = errno;
    char c = 'i';
    ssize_t n = write(sig_pipe[1], &c, 1); /* full pipe: that interrupt is dropped */
    (void)n;
    errno = saved;
}

static int64_t mono_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* On the loop thread, inside a step. */
static void cancel_runs_now(void *ud)
{
    host *h = ud;
    lah_cancel_runs(h->L, "interrupted (Ctrl-C)");
}

static void exit_now(void *ud)
{
    host *h = ud;
    atomic_store(&h->exit_requested, 1);
}

/* Ending on Ctrl-C: the terminal shows "^C" where the cursor was (after a prompt such
 * as "you> "); end that line, so the shell's prompt starts on a line of its own (a
 * process killed by SIGINT gets this from the shell; one that exits 130 does not).
 * Async-signal-safe: the watcher calls it just before _exit. */
static void end_terminal_line(void)
{
    if (!isatty(0))
        return; /* nobody typed the Ctrl-C on this terminal's line */
    int fd = isatty(2) ? 2 : isatty(1) ? 1 : -1;
    if (fd >= 0) {
        ssize_t n = write(fd, "\n", 1);
        (void)n;
    }
}

/* The watcher: one byte per SIGINT ('q' from the main thread ends it). */
static void *interrupt_watcher(void *ud)
{
    host *h = ud;
    int64_t last = INT64_MIN / 2;
    for (;;) {
        char c;
        ssize_t n = read(sig_pipe[0], &c, 1);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0 || c == 'q')
            return NULL;
        int64_t now = mono_ms();
        if (lah_runs_in_flight() > 0 && now - last >= SECOND_INTERRUPT_MS) {
            last = now;
            ah_async_send(h->cancel_async);
            continue;
        }
        /* Exit: let the loop unwind and close the state (flushing the script's files);
         * if it is not stepping (the script is blocked reading a line, or computing),
         * end the process after a short grace. */
        atomic_store(&h->exit_requested, 1);
        ah_async_send(h->exit_async);
        int64_t until = mono_ms() + EXIT_GRACE_MS;
        for (int64_t left; (left = until - mono_ms()) > 0;) {
            struct pollfd pfd = {sig_pipe[0], POLLIN, 0};
            if (poll(&pfd, 1, (int)left) > 0 && read(sig_pipe[0], &c, 1) == 1 && c == 'q')
                return NULL; /* the main thread is closing down: status 130 from there */
        }
        if (ftrylockfile(stdout) == 0) {
            fflush(stdout);
            funlockfile(stdout);
        }
        end_terminal_line();
        _exit(130);
    }
}

/* Install the handler and start the watcher; 0 on failure (then Ctrl-C keeps its
 * default action). */
static int interrupts_start(host *h, pthread_t *th)
{
    if (pipe(sig_pipe) != 0)
        return 0;
    for (int i = 0; i < 2; i++) {
        fcntl(sig_pipe[i], F_SETFD, FD_CLOEXEC);
    }
    fcntl(sig_pipe[1], F_SETFL, O_NONBLOCK);
    h->cancel_async = ah_async_new(lah_loop(h->L), cancel_runs_now, h);
    h->exit_async = ah_async_new(lah_loop(h->L), exit_now, h);
    if (!h->cancel_async || !h->exit_async ||
        pthread_create(th, NULL, interrupt_watcher, h) != 0) {
        ah_async_free(h->cancel_async);
        ah_async_free(h->exit_async);
        h->cancel_async = h->exit_async = NULL;
        close(sig_pipe[0]);
        close(sig_pipe[1]);
        sig_pipe[0] = sig_pipe[1] = -1;
        return 0;
    }
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_sigint;
    sa.sa_flags = SA_RESTART; /* a script blocked in io.read() goes on reading */
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    return 1;
}

/* Before the loop goes away: no send may race with the asyncs' free. */
static void interrupts_stop(host *h, pthread_t th)
{
    signal(SIGINT, SIG_DFL);
    char q = 'q';
    while (write(sig_pipe[1], &q, 1) < 0 && (errno == EAGAIN || errno == EINTR)) {
        /* The pipe is full: wait until the watcher has read some, not for a fixed time.
         */
        struct pollfd pw = {sig_pipe[1], POLLOUT, 0};
        poll(&pw, 1, -1);
    }
    pthread_join(th, NULL);
    ah_async_free(h->cancel_async);
    ah_async_free(h->exit_async);
    h->cancel_async = h->exit_async = NULL;
    close(sig_pipe[0]);
    close(sig_pipe[1]);
    sig_pipe[0] = sig_pipe[1] = -1;
}

/* ---- stdout: a pipe whose reader went away ------------------------------------------ */

/* Is fd 1 a pipe whose reader has gone (poll says POLLERR on the write end)? */
static int stdout_is_broken(void)
{
    struct pollfd p = {1, POLLOUT, 0};
    return poll(&p, 1, 0) == 1 && (p.revents & (POLLERR | POLLHUP));
}

/* The script ends as it ends lua, whose next write would raise SIGPIPE: the loop stops
 * stepping it, so no run in flight sends anything more, and the program then dies of
 * SIGPIPE. Detected at once, not at a next write (a pipe's output is buffered, and a
 * script may go on making LLM calls for a long time before it prints again). */
static void stdout_broke(host *h)
{
    if (h->stdout_broken)
        return;
    h->stdout_broken = 1;
    ah_io_stop(h->stdout_watch);
    lah_cancel_runs(h->L, "standard output was closed (broken pipe)");
}

static void on_stdout_ready(void *ud, int fd, int events)
{
    (void)fd;
    (void)events;
    if (stdout_is_broken())
        stdout_broke(ud);
}

/* When stdout is a pipe we only write to, watch it for its reader going away: the write
 * end of a pipe is never readable, so asking for "read" reports only POLLERR. */
static void stdout_watch_start(host *h)
{
    struct stat st;
    int fl = fcntl(1, F_GETFL);
    if (fstat(1, &st) != 0 || !S_ISFIFO(st.st_mode) || fl < 0 ||
        (fl & O_ACCMODE) != O_WRONLY)
        return;
    h->stdout_watch = ah_io_new(lah_loop(h->L), 1, on_stdout_ready, h);
    if (h->stdout_watch && ah_io_start(h->stdout_watch, AH_IO_READ) != AH_OK) {
        ah_io_free(h->stdout_watch);
        h->stdout_watch = NULL;
    }
    if (stdout_is_broken())
        stdout_broke(h);
}

/* ---- --events ----------------------------------------------------------------------- */

/* The first failed write is said once and ends the sink: no later event is written (a
 * line after a lost one would be a lie by omission), a torn line is cut off a regular
 * file, and the program exits 1 at the end. A broken pipe on stdout ends the script. */
static void events_failed(host *h, int err)
{
    if (h->events_fd == 1 && err == EPIPE) {
        stdout_broke(h);
        h->events_failed = 1;
        return;
    }
    h->events_failed = 1;
    int torn = h->events_regular && ftruncate(h->events_fd, h->events_good) == 0;
    fprintf(stderr,
            "agenthost: cannot write events to '%s': %s; no more events are written%s\n",
            h->events_path, strerror(err),
            torn ? " (the file ends with the last complete event)" : "");
}

/* --events: one JSON object per line, written as each event happens, one write(2) per
 * line (no stdio buffer between an event and the file). */
static void write_event(void *ud, const ah_event *ev)
{
    host *h = ud;
    if (h->events_failed)
        return;
    char *json = ah_event_to_json(ev);
    size_t len = json ? strlen(json) : 0;
    char *line = json ? realloc(json, len + 2) : NULL;
    if (!line) {
        free(json);
        events_failed(h, ENOMEM);
        return;
    }
    line[len++] = '\n';
    if (h->events_fd == 1)
        fflush(stdout); /* "-": after what the script printed before it */
    for (size_t off = 0; off < len;) {
        ssize_t n = write(h->events_fd, line + off, len - off);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) {
            events_failed(h, n < 0 ? errno : EIO);
            free(line);
            return;
        }
        off += (size_t)n;
    }
    h->events_good += (off_t)len;
    free(line);
}

/* Open the sink: "-" is standard output. 0 (said on stderr) when it cannot be opened. */
static int events_open(host *h, const char *path)
{
    h->events_path = path;
    if (strcmp(path, "-") == 0) {
        h->events_fd = 1;
        return 1;
    }
    h->events_fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
    if (h->events_fd < 0) {
        fprintf(stderr, "agenthost: cannot open events file '%s': %s\n", path,
                strerror(errno));
        return 0;
    }
    struct stat st;
    h->events_regular = fstat(h->events_fd, &st) == 0 && S_ISREG(st.st_mode);
    return 1;
}

static void events_close(host *h)
{
    if (h->events_fd > 1 && close(h->events_fd) != 0 && !h->events_failed)
        events_failed(h, errno);
    h->events_fd = -1;
}

static void main_done(void *ud, lua_State *co, int ok)
{
    host *h = ud;
    h->done = 1;
    h->ok = ok;
    if (!ok)
        fprintf(stderr, "agenthost: %s\n", lua_tostring(co, -1));
}

/* arg[0] = the script, arg[1..] its arguments, arg[-1..] what came before (as lua). */
static void create_arg_table(lua_State *L, int argc, char **argv, int script)
{
    lua_createtable(L, argc - script - 1, script + 1);
    for (int i = 0; i < argc; i++) {
        lua_pushstring(L, argv[i]);
        lua_rawseti(L, -2, i - script);
    }
    lua_setglobal(L, "arg");
}

/* What the protected main function (host_main) works with. */
typedef struct host_run {
    host *h;
    int argc, script; /* script -1: -p, the question in oneshot[0] */
    char **argv;
    const char *oneshot[3]; /* -p's question, --provider, --model (NULL: not given) */
    int rc;
    pthread_t watcher;
    int watching;
} host_run;

/* Everything that touches Lua, run through the gate (lah_gate_call, as lua.c runs its
 * pmain): the libraries, the script's loading, and the steps of the loop that drive
 * the main chunk's coroutine. Whatever raises here (out of memory, a failure of the
 * scheduler itself) is an error with a traceback and exit status 1, never a panic. */
static int host_main(lua_State *L)
{
    host_run *hr = lua_touserdata(L, 1);
    host *h = hr->h;
    int argc = hr->argc, script = hr->script;
    char **argv = hr->argv;
    const char *path = script >= 0 ? argv[script] : "agenthost -p";
    lua_settop(L, 0);
    lua_pushboolean(L, 1);
    lua_rawsetp(L, LUA_REGISTRYINDEX, &lah_host_key); /* we own the log handler */
    luaL_openlibs(L);
    lah_add_script_searcher(L); /* require "agenthost.status" before require "agenthost" */
    luaL_getsubtable(L, LUA_REGISTRYINDEX, LUA_PRELOAD_TABLE);
    lua_pushcfunction(L, luaopen_agenthost);
    lua_setfield(L, -2, "agenthost");
    lua_pop(L, 1);
    if (h->events_fd >= 0)
        lah_set_event_sink(L, write_event, h);
    int st, nargs;
    if (script < 0) {
        /* -p: the shipped one-shot script is the main chunk, the same Lua API a script
         * uses; arg[0] says so, arg[1] is the question. */
        lua_createtable(L, 1, 1);
        lua_pushliteral(L, "agenthost.oneshot");
        lua_rawseti(L, -2, 0);
        lua_pushstring(L, hr->oneshot[0]);
        lua_rawseti(L, -2, 1);
        lua_setglobal(L, "arg");
        static const char chunk[] = "return require('agenthost.oneshot').run(...)";
        st = luaL_loadbuffer(L, chunk, sizeof chunk - 1, "=agenthost -p");
        if (st != LUA_OK) {
            fprintf(stderr, "agenthost: %s\n", lua_tostring(L, -1));
            return 0;
        }
        for (int i = 0; i < 3; i++) {
            if (hr->oneshot[i])
                lua_pushstring(L, hr->oneshot[i]);
            else
                lua_pushnil(L);
        }
        lah_spawn(L, 3, main_done, h);
        goto loop;
    }
    create_arg_table(L, argc, argv, script);

    st = luaL_loadfile(L, strcmp(path, "-") == 0 ? NULL : path);
    if (st == LUA_ERRFILE) {
        fprintf(stderr, "agenthost: cannot open script '%s': %s\n", path,
                errno ? strerror(errno) : "cannot read it");
        hr->rc = EXIT_USAGE;
        return 0;
    }
    if (st != LUA_OK) {
        fprintf(stderr, "agenthost: %s\n", lua_tostring(L, -1));
        return 0;
    }
    nargs = argc - script - 1;
    luaL_checkstack(L, nargs, "too many arguments");
    for (int i = script + 1; i < argc; i++)
        lua_pushstring(L, argv[i]);
    lah_spawn(L, nargs, main_done, h);
loop:
    h->L = L;
    hr->watching = interrupts_start(h, &hr->watcher);
    stdout_watch_start(h);
    while (!h->done && !atomic_load(&h->exit_requested) && !h->stdout_broken) {
        if (lah_step(L, 1) < 0 && !h->done) {
            fprintf(stderr,
                    "agenthost: %s: the script waits for work that nothing is left "
                    "to do (deadlock)\n",
                    path);
            break;
        }
    }
    ah_io_free(h->stdout_watch);
    h->stdout_watch = NULL;
    hr->rc = atomic_load(&h->exit_requested) ? 130
             : h->stdout_broken              ? EXIT_SIGPIPE
             : h->done && h->ok              ? EXIT_OK
                                             : EXIT_FAIL;
    return 0;
}

static int run_script(int argc, char **argv, int script, const char *events_path,
                      int verbose, const char *const oneshot[3])
{
    host h = {.events_fd = -1};
    host_run hr = {
        .h = &h, .argc = argc, .argv = argv, .script = script, .rc = EXIT_FAIL};
    if (oneshot)
        memcpy(hr.oneshot, oneshot, sizeof hr.oneshot);
    if (events_path && !events_open(&h, events_path))
        return EXIT_USAGE;
    /* Sockets (libcurl's, hiredis's) must never kill the process; a broken stdout ends
     * the script through its watcher instead (stdout_watch_start). */
    signal(SIGPIPE, SIG_IGN);
    if (verbose)
        ah_log_set_handler(log_verbose, NULL, AH_LOG_DEBUG);
    else
        ah_log_set_handler(lah_log_to_stderr, NULL, AH_LOG_WARN);
    lua_State *L = luaL_newstate();
    if (!L) {
        fprintf(stderr, "agenthost: cannot create a Lua state (out of memory)\n");
        goto cleanup;
    }
    lua_pushcfunction(L, host_main);
    lua_pushlightuserdata(L, &hr);
    if (lah_gate_call(L, NULL, 1, 0, 0) != LUA_OK) {
        fprintf(stderr, "agenthost: %s\n", lua_tostring(L, -1));
        lua_pop(L, 1);
        hr.rc = EXIT_FAIL;
    }
cleanup:
    if (hr.watching)
        interrupts_stop(&h, hr.watcher);
    if (L)
        lua_close(L);
    events_close(&h);
    if (hr.rc == EXIT_SIGPIPE) {
        /* as lua ends on a write to a pipe nobody reads: killed by SIGPIPE */
        fflush(NULL);
        signal(SIGPIPE, SIG_DFL);
        raise(SIGPIPE);
    }
    if (h.events_failed && hr.rc == EXIT_OK)
        hr.rc = EXIT_FAIL; /* events were lost: said on stderr */
    if (hr.rc == 130) {
        fflush(NULL);
        end_terminal_line();
    }
    return hr.rc;
}

/* Many runs at once: large blocks placed in the heap between the small allocations of
 * the runs keep pages of both resident; from 64 KiB on they are mapped on their own and
 * only the pages written are resident (docs/performance.md). libcurl's receive buffer
 * (60 KiB, core/transport_curl.c) stays below it: mapped, it cost an mmap and a munmap
 * per request. The user's own setting
 * (GLIBC_TUNABLES, MALLOC_MMAP_THRESHOLD_) wins. A program embedding the library
 * decides this for itself. */
static void tune_malloc(void)
{
#if defined(__GLIBC__) && defined(M_MMAP_THRESHOLD)
    if (!getenv("GLIBC_TUNABLES") && !getenv("MALLOC_MMAP_THRESHOLD_"))
        mallopt(M_MMAP_THRESHOLD, 64 * 1024);
#endif
}

int main(int argc, char **argv)
{
    tune_malloc();
    if (argc < 2) {
        usage(stderr);
        return EXIT_USAGE;
    }
    if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0) {
        usage(stdout);
        return EXIT_OK;
    }
    if (strcmp(argv[1], "--version") == 0 || strcmp(argv[1], "-V") == 0) {
        printf("agenthost %s\n", ah_version());
        return EXIT_OK;
    }
    if (strcmp(argv[1], "mock") == 0)
        return run_mock(argc, argv);
    if (strcmp(argv[1], "proxy") == 0)
        return lah_proxy_main(argc, argv);
    const char *events = NULL;
    const char *oneshot[3] = {NULL, NULL, NULL}; /* -p, --provider, --model */
    int verbose = 0, i = 1;
    for (; i < argc; i++) {
        const char *a = argv[i];
        int which = strcmp(a, "-p") == 0 ? 0 : strcmp(a, "--provider") == 0 ? 1
                    : strcmp(a, "--model") == 0                      ? 2
                                                                     : -1;
        if (which >= 0) {
            if (i + 1 >= argc) {
                fprintf(stderr, "agenthost: %s needs a value (try --help)\n", a);
                return EXIT_USAGE;
            }
            oneshot[which] = argv[++i];
        } else if (strcmp(a, "-v") == 0 || strcmp(a, "--verbose") == 0) {
            verbose = 1;
        } else if (strcmp(a, "--events") == 0) {
            if (i + 1 >= argc) {
                fprintf(stderr, "agenthost: --events needs a file name (try --help)\n");
                return EXIT_USAGE;
            }
            events = argv[++i];
        } else if (strncmp(a, "--events=", 9) == 0) {
            events = a + 9;
        } else if (strcmp(a, "--") == 0) {
            i++;
            break;
        } else if (a[0] == '-' && a[1] != '\0') {
            fprintf(stderr, "agenthost: unknown option '%s' (try --help)\n", a);
            return EXIT_USAGE;
        } else {
            break;
        }
    }
    if (!oneshot[0] && (oneshot[1] || oneshot[2])) {
        fprintf(stderr, "agenthost: %s goes with -p QUESTION (try --help)\n",
                oneshot[1] ? "--provider" : "--model");
        return EXIT_USAGE;
    }
    if (oneshot[0] && i < argc) {
        fprintf(stderr, "agenthost: -p answers a question without a script; got the "
                        "script '%s' too (try --help)\n",
                argv[i]);
        return EXIT_USAGE;
    }
    if (!oneshot[0] && i >= argc) {
        fprintf(stderr, "agenthost: no script given (try --help)\n");
        return EXIT_USAGE;
    }
    if (!events || !*events) {
        const char *env = getenv("AGENTHOST_EVENTS");
        events = env && *env ? env : NULL;
    }
    return run_script(argc, argv, oneshot[0] ? -1 : i, events, verbose,
                      oneshot[0] ? oneshot : NULL);
}
