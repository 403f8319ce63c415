/* proxy.c - `agenthost proxy`: agenthost's retries and cut-stream continuation as a local
 * endpoint for programs that cannot embed the library (docs/proxy.md).
 *
 *   agenthost proxy [--listen 127.0.0.1:8787] [--anthropic-url URL] [--openai-url URL]
 *                   [--policy FILE.lua] [--events FILE] [--redis URL]
 *                   [--max-in-flight N]
 *
 * The program's verb, not part of the Lua module (it links the proxy library, which uses
 * the static core). A Lua state holds what --policy returns ({ policy = {...}, on_event =
 * fn, retry_budget = {...}, rate_limit = {...} }): the policy's retry_on and on_event run
 * as hooks through the gate, the budget and the pacer are the module's own
 * (ah.retry_budget, ah.rate_limit, on Redis with --redis), and the proxy's upstream calls
 * run on the state's loop, stepped here until SIGINT or SIGTERM. Without on_event the
 * default status display (agenthost.status) shows retries and continuations on stderr.
 * --events writes every event as JSON Lines. Nothing here sees a request's headers or
 * body. */
#include "lah.h"

#include "agenthost/proxy.h"

#include <lualib.h>

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <unistd.h>

int luaopen_agenthost(lua_State *L);
int lah_proxy_main(int argc, char **argv);

enum { EXIT_OK = 0, EXIT_FAIL = 1, EXIT_USAGE = 2 };

typedef struct pxopts {
    const char *listen, *anthropic_url, *openai_url, *policy, *events, *redis, *max_in_flight;
} pxopts;

typedef struct pxhost {
    pxopts o;
    lua_State *L;
    FILE *events;
    int events_failed;
    int on_event_ref, status_ref, retry_on_ref, budget_ref, rate_ref;
    /* the events the default display says it ignores on its output (its `ignores`) */
    unsigned char status_skips[AH_EV_COUNT_];
    int hook_failed, retry_on_failed;
    ah_proxy *proxy;
    unsigned max_in_flight; /* --max-in-flight, 0: none */
    int stop;
    int rc;
} pxhost;

static void proxy_usage(FILE *out)
{
    fputs("usage: agenthost proxy [--listen HOST:PORT] [--anthropic-url URL]\n"
          "                       [--openai-url URL] [--policy FILE.lua] [--events FILE]\n"
          "                       [--redis URL] [--max-in-flight N]\n"
          "\n"
          "A local endpoint for clients that cannot embed agenthost (the official SDKs,\n"
          "Claude Code, Codex): POST /v1/messages goes to the Anthropic upstream,\n"
          "/v1/chat/completions and /v1/responses to the OpenAI one, through agenthost's\n"
          "retries and cut-stream continuation; other paths are passed through. Point a\n"
          "client at it: ANTHROPIC_BASE_URL=http://127.0.0.1:8787 or\n"
          "OPENAI_BASE_URL=http://127.0.0.1:8787/v1. Prints its URL on one line, then\n"
          "runs until SIGINT or SIGTERM (docs/proxy.md).\n"
          "  --listen HOST:PORT    address to listen on (127.0.0.1:8787; port 0: any)\n"
          "  --anthropic-url URL   Anthropic upstream (https://api.anthropic.com)\n"
          "  --openai-url URL      OpenAI upstream (https://api.openai.com)\n"
          "  --policy FILE.lua     a Lua file returning { policy = {...}, on_event = fn,\n"
          "                        retry_budget = {...}, rate_limit = {...} }\n"
          "  --events FILE         write every event as JSON Lines (- for stdout)\n"
          "  --redis URL           share the retry budget and pacing across proxies\n"
          "  --max-in-flight N     answer a request past N in flight at once with the\n"
          "                        format's overload error (529 / 503) instead of queueing\n"
          "                        it (default: no bound)\n",
          out);
}

/* ---- hooks (loop thread, inside a step) ----------------------------------------------- */

static void write_event(pxhost *h, const ah_event *ev)
{
    if (!h->events || h->events_failed)
        return;
    char *j = ah_event_to_json(ev);
    if (!j)
        return;
    if (fputs(j, h->events) < 0 || fputc('\n', h->events) < 0 || fflush(h->events) != 0) {
        h->events_failed = 1;
        fprintf(stderr, "agenthost proxy: cannot write events to '%s': %s\n", h->o.events,
                strerror(errno));
    }
    free(j);
}

static void on_event(void *ud, const ah_event *ev)
{
    pxhost *h = ud;
    write_event(h, ev);
    lua_State *L = lah_running(h->L);
    if (!lua_checkstack(L, 8))
        return;
    if (h->on_event_ref != LUA_NOREF) {
        lua_rawgeti(L, LUA_REGISTRYINDEX, h->on_event_ref);
        lah_push_event(L, ev);
        lah_pcall_once(L, 1, 0, "proxy on_event", &h->hook_failed);
    } else if (h->status_ref != LUA_NOREF &&
               !((unsigned)ev->type < AH_EV_COUNT_ && h->status_skips[ev->type])) {
        /* an event the display ignores costs no Lua call (off a terminal a call's start
         * and end: two per request, ~6 % of the proxy's instructions per request) */
        lua_rawgeti(L, LUA_REGISTRYINDEX, h->status_ref);
        lua_getfield(L, -1, "update");
        lua_insert(L, -2);
        lah_push_event(L, ev);
        lah_pcall_once(L, 2, 0, "proxy status display", &h->hook_failed);
    }
}

static int run_retry_on(void *ud, const ah_error *err, int default_verdict)
{
    pxhost *h = ud;
    lua_State *L = lah_running(h->L);
    if (!lua_checkstack(L, 6))
        return -1;
    lua_rawgeti(L, LUA_REGISTRYINDEX, h->retry_on_ref);
    lah_push_error(L, err);
    lua_pushboolean(L, default_verdict);
    if (!lah_pcall_once(L, 2, 1, "proxy policy.retry_on", &h->retry_on_failed))
        return -1;
    int v = lua_isboolean(L, -1) ? lua_toboolean(L, -1) : -1;
    lua_pop(L, 1);
    return v;
}

/* ---- setting up ---------------------------------------------------------------------- */

/* Call ah.<fn>(t) with the table at idx (plus redis = --redis when it has none); leaves
 * the result on the stack. */
static void call_ah(lua_State *L, int ah, const char *fn, int idx, const char *redis,
                    const char *key)
{
    lua_getfield(L, ah, fn);
    lua_newtable(L);
    if (idx) {
        lua_pushnil(L);
        while (lua_next(L, idx)) {
            lua_pushvalue(L, -2);
            lua_insert(L, -2);
            lua_settable(L, -4);
        }
    }
    if (redis) {
        if (lua_getfield(L, -1, "redis") == LUA_TNIL) {
            lua_pushstring(L, redis);
            lua_setfield(L, -3, "redis");
        }
        lua_pop(L, 1);
        if (lua_getfield(L, -1, "key") == LUA_TNIL) {
            lua_pushstring(L, key);
            lua_setfield(L, -3, "key");
        }
        lua_pop(L, 1);
    }
    lah_gate_call_raising(L, 1, 1);
}

static int parse_listen(const char *s, char *host, size_t hsize, int *port)
{
    const char *colon = strrchr(s, ':');
    if (!colon || colon == s || (size_t)(colon - s) >= hsize)
        return -1;
    char *end = NULL;
    long p = strtol(colon + 1, &end, 10);
    if (!colon[1] || *end || p < 0 || p > 65535)
        return -1;
    memcpy(host, s, (size_t)(colon - s));
    host[colon - s] = '\0';
    *port = (int)p;
    return 0;
}

static void on_signal(void *ud, int fd, int events)
{
    pxhost *h = ud;
    (void)events;
    struct signalfd_siginfo si;
    if (read(fd, &si, sizeof si) > 0)
        h->stop = 1;
}

/* Everything that touches Lua, under the gate (as the host program runs a script). */
static int proxy_lmain(lua_State *L)
{
    pxhost *h = lua_touserdata(L, 1);
    lua_settop(L, 0);
    lua_pushboolean(L, 1);
    lua_rawsetp(L, LUA_REGISTRYINDEX, &lah_host_key); /* we own the log handler */
    luaL_openlibs(L);
    lah_add_script_searcher(L);
    luaL_getsubtable(L, LUA_REGISTRYINDEX, LUA_PRELOAD_TABLE);
    lua_pushcfunction(L, luaopen_agenthost);
    lua_setfield(L, -2, "agenthost");
    lua_pop(L, 1);
    lua_getglobal(L, "require");
    lua_pushliteral(L, "agenthost");
    lah_gate_call_raising(L, 1, 1);
    int ah = lua_gettop(L);
    h->L = L;

    int spec = 0;
    if (h->o.policy) {
        if (luaL_loadfile(L, h->o.policy) != LUA_OK)
            return luaL_error(L, "%s", lua_tostring(L, -1));
        lah_gate_call_raising(L, 0, 1);
        if (!lua_istable(L, -1))
            return luaL_error(L, "%s: must return a table { policy = {...}, on_event = fn, "
                                 "retry_budget = {...}, rate_limit = {...} }, got %s",
                              h->o.policy, luaL_typename(L, -1));
        spec = lua_gettop(L);
        static const char *const known[] = {"policy", "on_event", "retry_budget",
                                            "rate_limit", NULL};
        lah_check_fields(L, spec, h->o.policy, known);
    }

    ah_policy pol;
    ah_policy_init(&pol);
    if (spec) {
        lua_getfield(L, spec, "policy");
        int pidx = lua_gettop(L);
        if (!lua_isnil(L, pidx) && !lua_istable(L, pidx))
            return luaL_error(L, "%s: policy must be a table, got %s", h->o.policy,
                              luaL_typename(L, pidx));
        if (lah_policy_from_table(L, pidx, h->o.policy, &pol)) {
            h->retry_on_ref = luaL_ref(L, LUA_REGISTRYINDEX);
            pol.retry_on = run_retry_on;
            pol.retry_on_ud = h;
        }
        lua_settop(L, spec);
        if (lua_getfield(L, spec, "on_event") == LUA_TFUNCTION)
            h->on_event_ref = luaL_ref(L, LUA_REGISTRYINDEX);
        else if (!lua_isnil(L, -1))
            return luaL_error(L, "%s: on_event must be a function, got %s", h->o.policy,
                              luaL_typename(L, -1));
        lua_settop(L, spec);
    }
    /* retry budget and pacing: the module's own objects, shared on Redis with --redis */
    ah_retry_budget *budget = NULL;
    ah_rate_limit *rl = NULL;
    int rb = spec && lua_getfield(L, spec, "retry_budget") == LUA_TTABLE;
    if (!rb)
        lua_settop(L, spec ? spec : ah);
    if (rb || h->o.redis) {
        int idx = rb ? lua_gettop(L) : 0;
        if (!rb) {
            lua_newtable(L);
            lua_pushnumber(L, 10);
            lua_setfield(L, -2, "max_tokens");
            lua_pushnumber(L, 0.1);
            lua_setfield(L, -2, "token_ratio");
            idx = lua_gettop(L);
        }
        call_ah(L, ah, "retry_budget", idx, h->o.redis, "agenthost-proxy");
        budget = lah_push_retry_budget(L);
        h->budget_ref = luaL_ref(L, LUA_REGISTRYINDEX);
    }
    lua_settop(L, spec ? spec : ah);
    if (spec && lua_getfield(L, spec, "rate_limit") == LUA_TTABLE) {
        call_ah(L, ah, "rate_limit", lua_gettop(L), h->o.redis, "agenthost-proxy");
        rl = lah_check_rate_limit(L, -1);
        h->rate_ref = luaL_ref(L, LUA_REGISTRYINDEX);
    }
    lua_settop(L, spec ? spec : ah);
    if (h->on_event_ref == LUA_NOREF) {
        /* the default status display, as an agent without on_event gets */
        lua_getglobal(L, "require");
        lua_pushliteral(L, "agenthost.status");
        if (lah_pcall_once(L, 1, 1, NULL, &(int){1}) && lua_istable(L, -1)) {
            lua_getfield(L, -1, "new");
            if (lah_pcall(L, 0, 1, "agenthost.status.new") && !lua_isnil(L, -1)) {
                lua_getfield(L, -1, "ignores");
                if (lua_istable(L, -1))
                    for (int t = 0; t < AH_EV_COUNT_; t++) {
                        lua_getfield(L, -1, ah_event_type_name((ah_event_type)t));
                        h->status_skips[t] = (unsigned char)lua_toboolean(L, -1);
                        lua_pop(L, 1);
                    }
                lua_pop(L, 1);
                h->status_ref = luaL_ref(L, LUA_REGISTRYINDEX);
            }
        }
        lua_settop(L, spec ? spec : ah);
    }

    char host[64] = "127.0.0.1";
    int port = 8787;
    if (h->o.listen && parse_listen(h->o.listen, host, sizeof host, &port) != 0) {
        fprintf(stderr, "agenthost proxy: --listen '%s' is not HOST:PORT\n", h->o.listen);
        h->rc = EXIT_USAGE;
        return 0;
    }
    ah_loop *loop = lah_loop(L);
    ah_proxy_config pc = {0};
    pc.loop = loop;
    pc.max_in_flight = h->max_in_flight;
    pc.listen_host = host;
    pc.port = port;
    pc.anthropic_url = h->o.anthropic_url;
    pc.openai_url = h->o.openai_url;
    pc.policy = &pol;
    pc.retry_budget = budget;
    pc.rate_limit = rl;
    pc.on_event = on_event;
    pc.event_ud = h;
    char err[256];
    if (ah_proxy_new(&pc, &h->proxy, err, sizeof err) != AH_OK) {
        fprintf(stderr, "agenthost proxy: %s\n", err);
        h->rc = EXIT_FAIL;
        return 0;
    }
    printf("%s\n", ah_proxy_url(h->proxy));
    fflush(stdout);

    sigset_t stop;
    sigemptyset(&stop);
    sigaddset(&stop, SIGINT);
    sigaddset(&stop, SIGTERM);
    int sfd = signalfd(-1, &stop, SFD_CLOEXEC | SFD_NONBLOCK);
    ah_io *io = sfd >= 0 ? ah_io_new(loop, sfd, on_signal, h) : NULL;
    if (io)
        ah_io_start(io, AH_IO_READ);
    ah_loop_ref(loop); /* the proxy's fd watchers do not keep the loop alive: keep stepping */
    while (!h->stop)
        lah_step(L, 1);
    ah_loop_unref(loop);
    ah_proxy_stats st;
    ah_proxy_get_stats(h->proxy, &st);
    if (st.shed)
        fprintf(stderr, "agenthost proxy: %llu of %llu requests answered overloaded at "
                        "--max-in-flight %u\n",
                (unsigned long long)st.shed, (unsigned long long)(st.requests + st.shed),
                h->max_in_flight);
    ah_proxy_free(h->proxy);
    h->proxy = NULL;
    ah_io_free(io);
    if (sfd >= 0)
        close(sfd);
    h->rc = h->events_failed ? EXIT_FAIL : EXIT_OK;
    return 0;
}

int lah_proxy_main(int argc, char **argv)
{
    pxhost h;
    memset(&h, 0, sizeof h);
    h.on_event_ref = h.status_ref = h.retry_on_ref = h.budget_ref = h.rate_ref = LUA_NOREF;
    h.rc = EXIT_FAIL;
    for (int i = 2; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            proxy_usage(stdout);
            return EXIT_OK;
        }
        const char **slot = strcmp(a, "--listen") == 0          ? &h.o.listen
                            : strcmp(a, "--anthropic-url") == 0 ? &h.o.anthropic_url
                            : strcmp(a, "--openai-url") == 0    ? &h.o.openai_url
                            : strcmp(a, "--policy") == 0        ? &h.o.policy
                            : strcmp(a, "--events") == 0        ? &h.o.events
                            : strcmp(a, "--redis") == 0         ? &h.o.redis
                            : strcmp(a, "--max-in-flight") == 0 ? &h.o.max_in_flight
                                                                : NULL;
        if (!slot || i + 1 >= argc) {
            fprintf(stderr,
                    "agenthost proxy: unknown option or missing value '%s' (try --help)\n", a);
            return EXIT_USAGE;
        }
        *slot = argv[++i];
    }
    if (h.o.max_in_flight) {
        char *end = NULL;
        errno = 0;
        unsigned long n = strtoul(h.o.max_in_flight, &end, 10);
        if (errno || !end || *end || end == h.o.max_in_flight || h.o.max_in_flight[0] == '-' ||
            n < 1 || n > 1000000) {
            fprintf(stderr,
                    "agenthost proxy: --max-in-flight '%s' is not a number of requests from 1 "
                    "to 1000000\n",
                    h.o.max_in_flight);
            return EXIT_USAGE;
        }
        h.max_in_flight = (unsigned)n;
    }
    if (h.o.events) {
        h.events = strcmp(h.o.events, "-") == 0 ? stdout : fopen(h.o.events, "w");
        if (!h.events) {
            fprintf(stderr, "agenthost proxy: cannot open events file '%s': %s\n",
                    h.o.events, strerror(errno));
            return EXIT_USAGE;
        }
    }
    /* SIGINT / SIGTERM are read from a signalfd on the loop; sockets never kill us */
    sigset_t stop;
    sigemptyset(&stop);
    sigaddset(&stop, SIGINT);
    sigaddset(&stop, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &stop, NULL);
    signal(SIGPIPE, SIG_IGN);
    ah_log_set_handler(lah_log_to_stderr, NULL, AH_LOG_WARN);
    lua_State *L = luaL_newstate();
    if (!L) {
        fprintf(stderr, "agenthost proxy: cannot create a Lua state (out of memory)\n");
        return EXIT_FAIL;
    }
    lua_pushcfunction(L, proxy_lmain);
    lua_pushlightuserdata(L, &h);
    if (lah_gate_call(L, NULL, 1, 0, 0) != LUA_OK) {
        fprintf(stderr, "agenthost proxy: %s\n", lua_tostring(L, -1));
        lua_pop(L, 1);
        if (h.proxy) {
            ah_proxy_free(h.proxy);
            h.proxy = NULL;
        }
        h.rc = h.rc == EXIT_USAGE ? EXIT_USAGE : EXIT_FAIL;
    }
    lua_close(L);
    if (h.events && h.events != stdout)
        fclose(h.events);
    return h.rc;
}
