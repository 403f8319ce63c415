/* retry_bench.c - the success-path cost of the retry machinery (docs/testing.md), for
 * tests/bench/run.sh, which runs it under callgrind:
 *
 *   valgrind --tool=callgrind --toggle-collect=measured_call \
 *       retry_bench BASE_URL WIRE default|single|bare
 *
 * One warm-up run, then one measured run: ah_worker_new + ah_worker_run (one LLM call
 * that succeeds on its first attempt) + ah_worker_free, against a mock in another
 * process. Only measured_call() is collected, so process start-up, the loop and the
 * warm-up (first connection, lazy library set-up) are not counted. Policies:
 *   default  ah_policy_init(): 4 attempts, backoff, 3 continuations
 *   single   max_attempts = 1 (no retry can happen)
 *   bare     max_attempts = 1 and max_continuations = 0 (no retry, no continuation)
 * Prints "retry_bench policy=P outcome=O text_bytes=N"; exits 1 unless completed in one
 * attempt. The instruction counts come from callgrind, not from this program.
 */
#include "agenthost.h"
#include "agenthost/worker.h"

#include <stdio.h>
#include <string.h>

typedef struct bench {
    ah_loop *loop;
    ah_client *client;
    ah_policy policy;
} bench;

/* One whole run; returns its attempts (0 on failure) and the answer's length. */
static int one_call(const bench *b, size_t *text_bytes)
{
    int attempts = 0;
    ah_worker_config wc = {0};
    wc.loop = b->loop;
    wc.client = b->client;
    wc.policy = &b->policy;
    char err[256];
    ah_worker *w = NULL;
    ah_worker_new(&wc, &w, err, sizeof err);
    if (!w) {
        fprintf(stderr, "retry_bench: %s\n", err);
        return 0;
    }
    if (ah_worker_run(w, "how much does a retry cost when nothing fails?") ==
        AH_OUTCOME_COMPLETED) {
        ah_worker_stats st;
        ah_worker_get_stats(w, &st);
        attempts = st.attempts;
        *text_bytes = strlen(ah_worker_text(w));
    } else {
        fprintf(stderr, "retry_bench: run ended %s: %s\n",
                ah_run_outcome_name(ah_worker_outcome(w)), ah_worker_error(w)->message);
    }
    ah_worker_free(w);
    return attempts;
}

/* Separate, never-inlined entry points so callgrind can collect the second alone. */
__attribute__((noinline)) int warm_call(const bench *b, size_t *text_bytes);
__attribute__((noinline)) int measured_call(const bench *b, size_t *text_bytes);

int warm_call(const bench *b, size_t *text_bytes)
{
    return one_call(b, text_bytes);
}

int measured_call(const bench *b, size_t *text_bytes)
{
    return one_call(b, text_bytes);
}

int main(int argc, char **argv)
{
    if (argc != 4) {
        fprintf(stderr, "usage: retry_bench BASE_URL WIRE default|single|bare\n");
        return 2;
    }
    int rc = 1;
    bench b = {0};
    ah_policy_init(&b.policy);
    if (strcmp(argv[3], "single") == 0) {
        b.policy.max_attempts = 1;
    } else if (strcmp(argv[3], "bare") == 0) {
        b.policy.max_attempts = 1;
        b.policy.max_continuations = 0;
    } else if (strcmp(argv[3], "default") != 0) {
        fprintf(stderr, "retry_bench: unknown policy '%s'\n", argv[3]);
        return 2;
    }
    int wire = ah_wire_from_name(argv[2]);
    if (wire < 0) {
        fprintf(stderr, "retry_bench: unknown wire '%s'\n", argv[2]);
        return 2;
    }
    char err[256];
    ah_client_config cc = {0};
    cc.wire = (ah_wire)wire;
    cc.base_url = argv[1];
    cc.model = "mock-bench";
    ah_client_new(&cc, &b.client, err, sizeof err);
    b.loop = ah_loop_new(NULL, NULL);
    if (!b.client || !b.loop) {
        fprintf(stderr, "retry_bench: %s\n", b.client ? "cannot create the loop" : err);
        goto cleanup;
    }
    size_t bytes = 0;
    if (warm_call(&b, &bytes) != 1)
        goto cleanup;
    if (measured_call(&b, &bytes) != 1)
        goto cleanup;
    printf("retry_bench policy=%s outcome=completed text_bytes=%zu\n", argv[3], bytes);
    rc = 0;
cleanup:
    ah_loop_free(b.loop);
    ah_client_free(b.client);
    return rc;
}
