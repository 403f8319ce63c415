/* embed.c - libagenthost inside a C program, no Lua and no API key.
 *
 * It starts the built-in mock provider in-process with a fault plan (a 503, a 529 with
 * a server hint, then a stream cut in the middle of a tool call), runs one agent with
 * one C tool against it, prints each retry and continuation as it happens, then the
 * answer and the run's counters. Exit status 0 when the run completed, 1 otherwise.
 *
 * Build: CMake builds it as `agenthost-embed`. Against an installed library (the
 * example parses tool arguments with cJSON, hence libcjson):
 *   cc embed.c $(pkg-config --cflags --libs agenthost libcjson)
 * or, in CMake, find_package(agenthost) and link agenthost::agenthost (shared) or
 * agenthost::static.
 */
#include <agenthost.h>

#include <cjson/cJSON.h>

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

/* One request per step, in order: refused twice, then a reply whose stream dies inside
 * the tool call (event 11 of the Anthropic stream: the text block is closed, the
 * tool_use block is not), then everything succeeds. */
static const char *PLAN = "["
                          "{\"status\": 503},"
                          "{\"status\": 529, \"headers\": {\"retry-after-ms\": 300}},"
                          "{\"cut_after_events\": 11}"
                          "]";

static const char *ADD_SCHEMA = "{\"type\": \"object\","
                                " \"properties\": {\"a\": {\"type\": \"integer\"},"
                                "                  \"b\": {\"type\": \"integer\"}},"
                                " \"required\": [\"a\", \"b\"]}";

/* The tool body. res->content must stay valid until this function has returned (the
 * worker copies it then), so the text lives in the caller's buffer passed as ud, not on
 * this function's stack. */
static int run_tool(void *ud, ah_worker *w, const ah_tool_request *req,
                    ah_tool_response *res)
{
    (void)w;
    char *out = ud;
    enum { OUT_SIZE = 64 };
    cJSON *args = cJSON_Parse(req->arguments);
    const cJSON *a = cJSON_GetObjectItemCaseSensitive(args, "a");
    const cJSON *b = cJSON_GetObjectItemCaseSensitive(args, "b");
    if (cJSON_IsNumber(a) && cJSON_IsNumber(b)) {
        snprintf(out, OUT_SIZE, "%.15g", a->valuedouble + b->valuedouble);
        res->outcome = AH_TOOL_OK;
    } else {
        snprintf(out, OUT_SIZE, "add needs two numbers a and b");
        res->outcome = AH_TOOL_ERROR;
    }
    cJSON_Delete(args);
    printf("  tool %s(%s) -> %s\n", req->name, req->arguments, out);
    res->content = out;
    res->attempts = 1;
    return 0;
}

/* Operational events only: they never enter the history the model sees. */
static void on_event(void *ud, const ah_event *ev)
{
    (void)ud;
    switch (ev->type) {
    case AH_EV_LLM_RETRY: {
        const ah_error *e = ev->u.llm_retry.error;
        char what[64];
        if (ev->u.llm_retry.status)
            snprintf(what, sizeof what, "HTTP %d", ev->u.llm_retry.status);
        else
            snprintf(what, sizeof what, "%s error", ah_error_kind_name(e->kind));
        printf("  retry: %s, attempt %d/%d in %" PRId64 " ms (%s)\n", what,
               ev->u.llm_retry.failed_attempt + 1, ev->u.llm_retry.max_attempts,
               ev->u.llm_retry.wait_ms,
               ev->u.llm_retry.wait_source == AH_WAIT_SERVER ? "server asked"
                                                             : "backoff");
        break;
    }
    case AH_EV_LLM_CONTINUATION:
        printf("  stream cut: continuing (%d/%d), kept %d block(s), discarded %d\n",
               ev->u.llm_continuation.continuation,
               ev->u.llm_continuation.max_continuations,
               ev->u.llm_continuation.committed_blocks,
               ev->u.llm_continuation.discarded_blocks);
        break;
    case AH_EV_LLM_GAVE_UP:
        printf("  gave up after %d attempts (%s)\n", ev->u.llm_gave_up.attempts,
               ah_giveup_reason_name(ev->u.llm_gave_up.reason));
        break;
    default:
        break;
    }
}

int main(void)
{
    int rc = 1;
    char err[256];
    ah_mock *mock = NULL;
    ah_loop *loop = NULL;
    ah_client *client = NULL;
    ah_worker *worker = NULL;
    char tool_out[64]; /* run_tool's result text */

    ah_mock_config mc;
    ah_mock_config_init(&mc);
    mc.plan_json = PLAN;
    ah_mock_new(&mc, &mock, err, sizeof err);
    if (!mock) {
        fprintf(stderr, "embed: mock: %s\n", err);
        goto cleanup;
    }

    loop = ah_loop_new(NULL, NULL); /* the real clock and an OS-seeded RNG */
    if (!loop) {
        fprintf(stderr, "embed: out of memory\n");
        goto cleanup;
    }

    ah_client_config cc = {.wire = AH_WIRE_ANTHROPIC,
                           .base_url = ah_mock_url(mock),
                           .model = "mock-model",
                           .max_tokens = 256};
    ah_client_new(&cc, &client, err, sizeof err);
    if (!client) {
        fprintf(stderr, "embed: client: %s\n", err);
        goto cleanup;
    }

    ah_policy policy;
    ah_policy_init(&policy); /* the defaults of docs/retry-policy.md */
    policy.base_ms = 100; /* short backoffs for a demo; the 529's hint still floors it */
    policy.deadline_ms = 30000;
    if (ah_policy_validate(&policy, err, sizeof err) != AH_OK) {
        fprintf(stderr, "embed: %s\n", err);
        goto cleanup;
    }

    ah_tool_def tool = {.name = "add",
                        .description = "Add two integers a and b.",
                        .schema_json = ADD_SCHEMA};
    ah_worker_config wc = {.loop = loop,
                           .client = client,
                           .system = "You are a careful calculator.",
                           .policy = &policy,
                           .tools = &tool,
                           .n_tools = 1,
                           .tool_exec = run_tool,
                           .tool_ud = tool_out,
                           .on_event = on_event};
    ah_worker_new(&wc, &worker, err, sizeof err);
    if (!worker) {
        fprintf(stderr, "embed: worker: %s\n", err);
        goto cleanup;
    }

    printf("agenthost %s, mock provider at %s\n", ah_version(), ah_mock_url(mock));
    ah_run_outcome outcome = ah_worker_run(worker, "What is 42 + 42?");

    ah_worker_stats st;
    ah_worker_get_stats(worker, &st);
    printf("outcome: %s\n", ah_run_outcome_name(outcome));
    if (outcome != AH_OUTCOME_COMPLETED)
        printf("error: %s\n", ah_worker_error(worker)->message);
    printf("answer: %s\n", ah_worker_text(worker));
    printf(
        "llm_calls: %d, attempts: %d, retries: %d, continuations: %d, tool_calls: %d\n",
        st.llm_calls, st.attempts, st.retries, st.continuations, st.tool_calls);
    rc = outcome == AH_OUTCOME_COMPLETED ? 0 : 1;

cleanup:
    ah_worker_free(worker); /* the worker before the client and the loop it borrows */
    ah_client_free(client);
    ah_loop_free(loop);
    ah_mock_free(mock);
    return rc;
}
