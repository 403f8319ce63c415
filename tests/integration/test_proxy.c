/* test_proxy.c - agenthost proxy over real loopback: a client (libcurl) talks to the
 * proxy, the proxy to the mock. For every wire format, fault kind and cut position, the
 * client reads one well-formed response whose text and tool calls equal the fault-free
 * one (tests/integration/proxy_rig.h reads it as a strict SDK would); failures before the
 * stream get the upstream's own answer, or a 502; secrets reach no event. The official
 * SDKs get the same matrix in tests/proxy/ (ctest proxy_sdk_*). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "integration/proxy_rig.h"

static const char *const A_BODY =
    "{\"model\":\"claude-test\",\"max_tokens\":256,\"stream\":true,\"messages\":[{\"role\":"
    "\"user\",\"content\":\"Tell me about retries and streams\"}]}";
static const char *const A_BODY_46 =
    "{\"model\":\"claude-opus-4-6\",\"max_tokens\":256,\"stream\":true,\"messages\":[{\"role\":"
    "\"user\",\"content\":\"Tell me about retries and streams\"}]}";
static const char *const A_TOOL =
    "{\"model\":\"claude-test\",\"max_tokens\":256,\"stream\":true,\"tools\":[{\"name\":\"add\","
    "\"description\":\"Add\",\"input_schema\":{\"type\":\"object\",\"required\":[\"a\",\"b\"],"
    "\"properties\":{\"a\":{\"type\":\"integer\"},\"b\":{\"type\":\"integer\"}}}}],"
    "\"messages\":[{\"role\":\"user\",\"content\":\"What is 2 + 3?\"}]}";

static void baseline(int wire, const char *path, const char *body, pmsg *want)
{
    prig r;
    prig_open(&r, NULL, NULL);
    presp o = prig_fetch(ah_mock_url(r.mock), path, wire, body);
    assert_int_equal(o.status, 200);
    prig_read(wire, &o, want);
    assert_string_equal(want->anomaly, "");
    presp_free(&o);
    prig_close(&r);
}

static void same(const pmsg *want, const pmsg *got, const char *what)
{
    if (got->anomaly[0] || got->error || strcmp(want->text, got->text) != 0 ||
        want->n_tools != got->n_tools || strcmp(want->stop, got->stop) != 0 ||
        got->n_text_blocks > want->n_text_blocks) {
        fprintf(stderr, "%s:\n  anomaly: %s\n  error: %d\n  want: [%s] tools %d stop %s\n"
                        "  got:  [%s] tools %d stop %s text blocks %d/%d\n",
                what, got->anomaly, got->error, want->text, want->n_tools, want->stop,
                got->text, got->n_tools, got->stop, got->n_text_blocks, want->n_text_blocks);
        fail();
    }
    for (int i = 0; i < want->n_tools; i++) {
        assert_string_equal(want->tool_names[i], got->tool_names[i]);
        assert_string_equal(want->tool_args[i], got->tool_args[i]);
    }
}

/* Every fault of `kinds` after each K of the fault-free stream. */
static void matrix(int wire, const char *path, const char *body, const char *extra)
{
    pmsg want;
    baseline(wire, path, body, &want);
    static const char *const kinds[] = {"cut_after_events", "error_event_after",
                                        "malformed_event_after", "stall_after_events"};
    ah_policy pol;
    ah_policy_init(&pol);
    pol.base_ms = 1;
    pol.cap_ms = 5;
    pol.idle_timeout_ms = 300;
    for (size_t k = 0; k < sizeof kinds / sizeof kinds[0]; k++) {
        for (int cut = 0; cut < 40; cut++) {
            char plan[256];
            snprintf(plan, sizeof plan, "[{\"%s\": %d%s}]", kinds[k], cut, extra ? extra : "");
            prig r;
            prig_open(&r, plan, &pol);
            presp o = prig_fetch(ah_proxy_url(r.proxy), path, wire, body);
            pmsg got;
            prig_read(wire, &o, &got);
            char what[320];
            snprintf(what, sizeof what, "%s %s", ah_wire_name((ah_wire)wire), plan);
            if (o.status != 200)
                fail_msg("%s: HTTP %ld: %s", what, o.status, o.body);
            same(&want, &got, what);
            /* the client's credentials appear in no event */
            assert_null(strstr(r.events ? r.events : "", "SECRET"));
            size_t nreq = ah_mock_request_count(r.mock);
            presp_free(&o);
            prig_close(&r);
            if (nreq <= 1 && cut > 0)
                break; /* K past the end: the stream was whole */
        }
    }
}

static void anthropic_text(void **state)
{
    (void)state;
    matrix(AH_WIRE_ANTHROPIC, "/v1/messages", A_BODY, NULL);
}

static void anthropic_prompt_rung_restates(void **state)
{
    (void)state;
    matrix(AH_WIRE_ANTHROPIC, "/v1/messages", A_BODY_46, ",\"restate\": true");
}

static void anthropic_tool(void **state)
{
    (void)state;
    matrix(AH_WIRE_ANTHROPIC, "/v1/messages", A_TOOL, NULL);
}

int main(void)
{
    curl_global_init(CURL_GLOBAL_DEFAULT);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(anthropic_text),
        cmocka_unit_test(anthropic_prompt_rung_restates),
        cmocka_unit_test(anthropic_tool),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    curl_global_cleanup();
    return rc;
}
