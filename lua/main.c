/* main.c - the agenthost program.
 *
 * Today it answers --help and --version; it grows into the Lua host
 * (`agenthost SCRIPT.lua [ARGS...]`) and `agenthost mock ...`.
 * Exit codes: 0 success, 1 the script or run failed, 2 usage error. */
#include "agenthost.h"

#include <stdio.h>
#include <string.h>

enum { EXIT_OK = 0, EXIT_FAIL = 1, EXIT_USAGE = 2 };

static void usage(FILE *out)
{
    fputs("usage: agenthost [OPTIONS] SCRIPT.lua [ARGS...]\n"
          "       agenthost mock --port N --plan PLAN.json\n"
          "\n"
          "Runs an agent script written in Lua against an LLM provider, retrying what is\n"
          "safe to retry and continuing interrupted streams.\n"
          "\n"
          "options:\n"
          "  --events FILE   also write every event as JSON Lines to FILE\n"
          "                  (or set AGENTHOST_EVENTS=FILE)\n"
          "  --help          show this help and exit\n"
          "  --version       print the version and exit\n",
          out);
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
    fprintf(stderr, "agenthost: unknown option or command '%s' (try --help)\n", argv[1]);
    return EXIT_USAGE;
}
