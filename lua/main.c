/* main.c - the agenthost program.
 *
 * Today it answers --help and --version and runs the built-in mock provider
 * (`agenthost mock ...`); it grows into the Lua host (`agenthost SCRIPT.lua [ARGS...]`).
 * Exit codes: 0 success, 1 the script or run failed, 2 usage error (bad arguments or a
 * bad plan). */
#include "agenthost.h"

#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { EXIT_OK = 0, EXIT_FAIL = 1, EXIT_USAGE = 2 };

static void usage(FILE *out)
{
    fputs("usage: agenthost [OPTIONS] SCRIPT.lua [ARGS...]\n"
          "       agenthost mock [--port N] [--plan PLAN.json] [--text-deltas N]\n"
          "                      [--delta-bytes N]\n"
          "\n"
          "Runs an agent script written in Lua against an LLM provider, retrying what is\n"
          "safe to retry and continuing interrupted streams.\n"
          "\n"
          "options:\n"
          "  --events FILE   also write every event as JSON Lines to FILE\n"
          "                  (or set AGENTHOST_EVENTS=FILE)\n"
          "  --help          show this help and exit\n"
          "  --version       print the version and exit\n"
          "\n"
          "mock: serve the Anthropic, OpenAI Chat and OpenAI Responses APIs on 127.0.0.1\n"
          "with a deterministic model and the faults of PLAN.json (see docs/mock.md).\n"
          "Prints its URL on one line, then runs until SIGINT or SIGTERM.\n"
          "  --port N          port to listen on; 0 (the default) picks a free one\n"
          "  --plan FILE       fault plan: a JSON array of steps, one per request\n"
          "  --text-deltas N   stream every reply's text in N deltas\n"
          "  --delta-bytes N   or split it every N bytes\n",
          out);
}

static void log_to_stderr(void *ud, ah_log_level level, const char *line)
{
    (void)ud;
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
        fprintf(stderr, "agenthost: cannot open plan file '%s': %s\n", path, strerror(errno));
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
            fprintf(stderr, "agenthost mock: unknown option or missing value '%s' (try "
                            "--help)\n", opt);
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
    ah_mock *m = ah_mock_new(&cfg, err, sizeof err);
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

int main(int argc, char **argv)
{
    if (argc < 2) {
        usage(stderr);
        return EXIT_USAGE;
    }
    if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0) {
        usage(stdout);
        return EXIT_OK;
    }
    if (strcmp(argv[1], "--version") == 0) {
        printf("agenthost %s\n", ah_version());
        return EXIT_OK;
    }
    if (strcmp(argv[1], "mock") == 0)
        return run_mock(argc, argv);
    fprintf(stderr, "agenthost: unknown option or command '%s' (try --help)\n", argv[1]);
    return EXIT_USAGE;
}
