/* embed_uv.c - several agents on an application's own libuv loop, beside its own timer.
 *
 * The application owns the loop (uv_default_loop()) and keeps doing its own work (here a
 * timer that prints a heartbeat every 100 ms) while three agents run through provider
 * faults against the in-process mock: no thread for agenthost, no busy polling. uv_run
 * returns when the agents are done and the heartbeat is stopped.
 *
 * Build: CMake builds it as `agenthost-embed_uv` when libuv is found. Against an
 * installed library:
 *   cc embed_uv.c $(pkg-config --cflags --libs agenthost-uv)
 * or, in CMake, find_package(agenthost) and link agenthost::uv.
 */
#include <agenthost.h>
#include <agenthost/uv.h>

#include <inttypes.h>
#include <stdio.h>

#define AGENTS 3
/* One request each fails before its stream, one stream is cut: each agent's run goes
 * through whichever of them it meets, since the three share the mock's plan. */
#define PLAN                                                                              \
    "[{\"status\": 503}, {\"status\": 529, \"headers\": {\"retry-after-ms\": \"200\"}},"  \
    " {\"cut_after_events\": 5}]"

typedef struct app {
    ah_worker *w[AGENTS];
    uv_timer_t heartbeat;
    int beats;
} app;

static void on_event(void *ud, const ah_event *ev)
{
    int i = (int)(intptr_t)ud;
    if (ev->type == AH_EV_LLM_RETRY)
        printf("  agent %d: retrying after %s%d, in %" PRId64 " ms\n", i,
               ev->u.llm_retry.status ? "HTTP " : "error ", ev->u.llm_retry.status,
               ev->u.llm_retry.wait_ms);
    else if (ev->type == AH_EV_LLM_CONTINUATION)
        printf("  agent %d: stream cut, continuing (%d/%d)\n", i,
               ev->u.llm_continuation.continuation, ev->u.llm_continuation.max_continuations);
    else if (ev->type == AH_EV_RUN_END)
        printf("  agent %d: %s\n", i, ah_run_outcome_name(ev->u.run_end.outcome));
}

/* The application's own work: a heartbeat, stopped once every agent has finished. */
static void on_heartbeat(uv_timer_t *t)
{
    app *a = t->data;
    a->beats++;
    int running = 0;
    for (int i = 0; i < AGENTS; i++)
        running += !ah_worker_finished(a->w[i]);
    printf("heartbeat %d: %d agent(s) running\n", a->beats, running);
    if (!running)
        uv_timer_stop(t);
}

int main(void)
{
    char err[256] = "out of memory";
    int rc = 1;
    uv_loop_t *uv = uv_default_loop();
    app a = {0};

    ah_mock_config mc;
    ah_mock_config_init(&mc);
    mc.plan_json = PLAN;
    ah_mock *mock = NULL;
    ah_mock_new(&mc, &mock, err, sizeof err);
    ah_uv *adapter = NULL;
    if (mock)
        ah_uv_new(uv, NULL, NULL, &adapter, err, sizeof err);
    ah_client_config cc = {.wire = AH_WIRE_ANTHROPIC,
                           .base_url = mock ? ah_mock_url(mock) : "",
                           .model = "mock-model",
                           .max_tokens = 256};
    ah_client *client = NULL;
    if (adapter)
        ah_client_new(&cc, &client, err, sizeof err);
    if (!client) {
        fprintf(stderr, "embed_uv: %s\n", err);
        goto cleanup;
    }
    ah_policy policy;
    ah_policy_init(&policy);
    policy.base_ms = 100;
    for (int i = 0; i < AGENTS; i++) {
        ah_worker_config wc = {.loop = ah_uv_loop(adapter), .client = client,
                               .policy = &policy, .on_event = on_event,
                               .event_ud = (void *)(intptr_t)i};
        ah_worker_new(&wc, &a.w[i], err, sizeof err);
        if (!a.w[i] || ah_worker_start(a.w[i], "What is a retry budget?") != AH_OK) {
            fprintf(stderr, "embed_uv: agent %d: %s\n", i, err);
            goto cleanup;
        }
    }
    uv_timer_init(uv, &a.heartbeat);
    a.heartbeat.data = &a;
    uv_timer_start(&a.heartbeat, on_heartbeat, 100, 100);

    uv_run(uv, UV_RUN_DEFAULT); /* the application's loop; agenthost rides on it */

    rc = 0;
    for (int i = 0; i < AGENTS; i++) {
        ah_worker_stats st;
        ah_worker_get_stats(a.w[i], &st);
        printf("agent %d: %s, %d attempts, %d continuation(s): %.40s...\n", i,
               ah_run_outcome_name(ah_worker_outcome(a.w[i])), st.attempts,
               st.continuations, ah_worker_text(a.w[i]));
        if (ah_worker_outcome(a.w[i]) != AH_OUTCOME_COMPLETED)
            rc = 1;
    }
    printf("the application's heartbeat ran %d times meanwhile\n", a.beats);
    uv_close((uv_handle_t *)&a.heartbeat, NULL);
cleanup:
    for (int i = 0; i < AGENTS; i++)
        ah_worker_free(a.w[i]);
    ah_client_free(client);
    ah_uv_free(adapter);
    uv_run(uv, UV_RUN_DEFAULT); /* let libuv finish closing the handles */
    uv_loop_close(uv);
    ah_mock_free(mock);
    return rc;
}
