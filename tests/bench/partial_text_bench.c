/* partial_text_bench.c - what a cut inside a single-block answer costs, with and without
 * policy.continue_partial_text (docs/worker.md, "A cut inside an unfinished block").
 *
 *   partial_text_bench
 *
 * A 2 KB answer of sentences, one text block, streamed in 100 deltas by the in-process
 * mock; the first request is cut once 90 % of the text has streamed (the first cut
 * position at which that much was shown), then the stream completes. For each wire
 * format, default (continue_partial_text = false) and opt-in ("sentence"), it prints:
 *   - shown:        bytes of text_delta before the cut
 *   - kept:         what the continuation kept of them (committed)
 *   - regenerated:  bytes the model is asked for again and streams a second time
 *                   (llm_continuation.discarded_bytes: the mock says them again exactly)
 *   - shown again:  bytes a display that prints every text_delta and takes nothing back
 *                   shows twice (all text_delta bytes minus the final answer); a display
 *                   that handles discarded_bytes (agenthost.status with `text`) shows 0
 *   - requests, mode of the continuation.
 * Numbers, never assertions; the answer must still be the uninterrupted one.
 */
#include "agenthost.h"
#include "agenthost/mock.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct counts {
    size_t shown_first, shown_total, discarded, committed;
    char mode[16];
} counts;

static void on_event(void *ud, const ah_event *ev)
{
    counts *c = ud;
    if (ev->type == AH_EV_TEXT_DELTA) {
        c->shown_total += ev->u.delta.len;
        if (ev->u.delta.llm_call == 1)
            c->shown_first += ev->u.delta.len;
    } else if (ev->type == AH_EV_LLM_CONTINUATION && !c->mode[0]) {
        c->discarded = (size_t)ev->u.llm_continuation.discarded_bytes;
        c->committed = (size_t)ev->u.llm_continuation.committed_blocks;
        snprintf(c->mode, sizeof c->mode, "%s", ah_cont_mode_name(ev->u.llm_continuation.mode));
    }
}

/* A ~2 KB answer: sentences of varied length, no newline. */
static void make_answer(char *buf, size_t size)
{
    static const char *const words[] = {"the", "plan", "is", "simple", "we", "add",
                                        "numbers", "and", "check", "result", "again",
                                        "first", "then", "every", "value", "carefully"};
    size_t n = 0;
    unsigned seed = 7;
    while (n < 2000) {
        int len = 6 + (int)(seed % 9);
        for (int w = 0; w < len && n + 16 < size; w++) {
            seed = seed * 1103515245u + 12345u;
            const char *word = words[(seed >> 16) % 16];
            n += (size_t)snprintf(buf + n, size - n, "%s%s", w ? " " : (n ? " " : ""), word);
        }
        n += (size_t)snprintf(buf + n, size - n, ".");
    }
}

static int run(ah_wire wire, const char *answer, int cut, ah_partial_text partial, counts *c,
               size_t *requests, int *same_answer)
{
    char plan[96], err[256];
    snprintf(plan, sizeof plan, "[{\"cut_after_events\":%d}]", cut);
    ah_mock_config mc;
    ah_mock_config_init(&mc);
    mc.plan_json = plan;
    mc.text = answer;
    mc.text_deltas = 100;
    ah_mock *mock = NULL;
    if (ah_mock_new(&mc, &mock, err, sizeof err) != AH_OK) {
        fprintf(stderr, "mock: %s\n", err);
        return -1;
    }
    ah_loop *loop = ah_loop_new(NULL, NULL);
    ah_client_config cc = {.wire = wire, .base_url = ah_mock_url(mock), .model = "mock-model",
                           .max_tokens = 4096};
    ah_client *client = NULL;
    ah_client_new(&cc, &client, err, sizeof err);
    ah_policy pol;
    ah_policy_init(&pol);
    pol.base_ms = 0;
    pol.continue_partial_text = partial;
    memset(c, 0, sizeof *c);
    ah_worker_config wc = {.loop = loop, .client = client, .policy = &pol,
                           .on_event = on_event, .event_ud = c};
    ah_worker *w = NULL;
    int rc = -1;
    if (client && loop && ah_worker_new(&wc, &w, err, sizeof err) == AH_OK &&
        ah_worker_run(w, "Explain.") == AH_OUTCOME_COMPLETED) {
        *same_answer = strcmp(ah_worker_text(w), answer) == 0;
        *requests = ah_mock_request_count(mock);
        rc = 0;
    }
    ah_worker_free(w);
    ah_client_free(client);
    ah_loop_free(loop);
    ah_mock_free(mock);
    return rc;
}

int main(void)
{
    static char answer[4096];
    make_answer(answer, sizeof answer);
    size_t len = strlen(answer);
    printf("a %zu-byte answer in one text block, 100 deltas, cut once 90%% has streamed\n\n",
           len);
    printf("%-10s %-9s %7s %5s %12s %12s %9s  %s\n", "format", "policy", "shown", "kept",
           "regenerated", "shown again", "requests", "mode");
    for (int wire = 0; wire < AH_WIRE_COUNT_; wire++) {
        /* the first cut position at which 90 % of the text was shown */
        int cut = -1;
        counts c;
        size_t reqs;
        int same;
        for (int k = 1; k < 200 && cut < 0; k++) {
            if (run((ah_wire)wire, answer, k, AH_PARTIAL_TEXT_OFF, &c, &reqs, &same) != 0)
                return 1;
            if (c.shown_first * 10 >= len * 9 && c.mode[0])
                cut = k;
        }
        if (cut < 0) {
            fprintf(stderr, "%s: no cut position reaches 90%%\n", ah_wire_name((ah_wire)wire));
            return 1;
        }
        for (int p = 0; p < 2; p++) {
            ah_partial_text mode = p ? AH_PARTIAL_TEXT_SENTENCE : AH_PARTIAL_TEXT_OFF;
            if (run((ah_wire)wire, answer, cut, mode, &c, &reqs, &same) != 0)
                return 1;
            printf("%-10s %-9s %7zu %5zu %12zu %12zu %9zu  %s%s\n",
                   ah_wire_name((ah_wire)wire), p ? "sentence" : "default", c.shown_first,
                   c.shown_first - c.discarded, c.discarded, c.shown_total - len, reqs,
                   c.mode, same ? "" : "  (ANSWER DIFFERS)");
        }
        /* every other cut inside the block's second half: the typical figure */
        size_t n = 0, sum[2] = {0, 0};
        for (int k = 1; k < 200; k++) {
            size_t got[2];
            int inside = 1;
            for (int p = 0; p < 2 && inside; p++) {
                if (run((ah_wire)wire, answer, k, p ? AH_PARTIAL_TEXT_SENTENCE
                                                    : AH_PARTIAL_TEXT_OFF,
                        &c, &reqs, &same) != 0)
                    return 1;
                inside = c.mode[0] && c.shown_first * 2 >= len && c.shown_first < len;
                got[p] = c.discarded;
            }
            if (inside) {
                n++;
                sum[0] += got[0];
                sum[1] += got[1];
            }
        }
        if (n)
            printf("%-10s mean over %zu cuts in the second half: regenerated %zu bytes "
                   "(default), %zu (sentence)\n",
                   ah_wire_name((ah_wire)wire), n, sum[0] / n, sum[1] / n);
    }
    printf("\nregenerated: streamed again by the model (paid again); shown again: what a "
           "display\nthat prints every delta and ignores discarded_bytes shows twice "
           "(agenthost.status\nwith `text` erases it, or marks the seam off a terminal: "
           "0 shown twice)\n");
    return 0;
}
