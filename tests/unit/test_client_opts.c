/* test_client_opts.c - ah_client_config's headers, query and API key, as the official
 * SDKs take them (core/client_opts.c): checked when the client is built, the key read
 * from the provider's variable when none is given, no key for a public host refused
 * then, naming the variable; base_url NULL the public API, "" an error. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "agenthost.h"

static ah_status make(const ah_client_config *cc, char *err, size_t n)
{
    ah_client *c = NULL;
    ah_status st = ah_client_new(cc, &c, err, n);
    ah_client_free(c);
    return st;
}

static void headers_are_checked(void **state)
{
    (void)state;
    char err[256];
    ah_header bad_value[] = {{"anthropic-beta", "x\r\nInjected: 1"}};
    ah_client_config cc = {.wire = AH_WIRE_ANTHROPIC, .base_url = "http://127.0.0.1:9",
                           .model = "m", .headers = bad_value, .n_headers = 1};
    assert_int_equal(make(&cc, err, sizeof err), AH_ERR_INVALID);
    assert_non_null(strstr(err, "the value of 'anthropic-beta' holds a control character"));
    ah_header reserved[] = {{"Content-Length", "5"}};
    cc.headers = reserved;
    assert_int_equal(make(&cc, err, sizeof err), AH_ERR_INVALID);
    assert_non_null(strstr(err, "'Content-Length' is set by agenthost itself"));
    ah_header auth[] = {{"X-Api-Key", "k1"}};
    cc.headers = auth;
    cc.api_key = "k2";
    assert_int_equal(make(&cc, err, sizeof err), AH_ERR_INVALID);
    assert_non_null(strstr(err, "would authenticate beside api_key"));
    cc.api_key = NULL; /* the header is the authentication */
    assert_int_equal(make(&cc, err, sizeof err), AH_OK);
    ah_header twice[] = {{"a", "1"}, {"A", "2"}};
    cc.headers = twice;
    cc.n_headers = 2;
    assert_int_equal(make(&cc, err, sizeof err), AH_ERR_INVALID);
    assert_non_null(strstr(err, "'A' is given twice"));
}

static void query_goes_into_the_url(void **state)
{
    (void)state;
    char err[256];
    ah_header q[] = {{"api-version", "2024-10-21"}, {"x", "a b"}};
    ah_client_config cc = {.wire = AH_WIRE_OPENAI,
                           .base_url = "https://r.openai.azure.com/openai/deployments/d/"
                                       "chat/completions",
                           .model = "m", .api_key = "k", .query = q, .n_query = 2};
    ah_client *c = NULL;
    assert_int_equal(ah_client_new(&cc, &c, err, sizeof err), AH_OK);
    assert_string_equal(ah_client_url(c), "https://r.openai.azure.com/openai/deployments/d/"
                                          "chat/completions?api-version=2024-10-21&x=a%20b");
    ah_client_free(c);
}

static void the_key_comes_from_the_environment(void **state)
{
    (void)state;
    char err[256];
    const char *saved = getenv("ANTHROPIC_API_KEY");
    char *keep = saved ? strdup(saved) : NULL;
    unsetenv("ANTHROPIC_API_KEY");
    ah_client_config cc = {.wire = AH_WIRE_ANTHROPIC, .model = "m"}; /* the public API */
    assert_int_equal(make(&cc, err, sizeof err), AH_ERR_INVALID);
    assert_string_equal(err, "client.api_key: no API key for api.anthropic.com: set "
                             "ANTHROPIC_API_KEY (or pass api_key)");
    setenv("ANTHROPIC_API_KEY", "sk-ant-test-0123456789", 1);
    assert_int_equal(make(&cc, err, sizeof err), AH_OK);
    cc.api_key = ""; /* none, whatever the environment says */
    assert_int_equal(make(&cc, err, sizeof err), AH_ERR_INVALID);
    assert_non_null(strstr(err, "api_key is empty"));
    cc.base_url = "";
    cc.api_key = "k";
    assert_int_equal(make(&cc, err, sizeof err), AH_ERR_INVALID);
    assert_non_null(strstr(err, "client.base_url must not be empty"));
    if (keep) {
        setenv("ANTHROPIC_API_KEY", keep, 1);
        free(keep);
    } else {
        unsetenv("ANTHROPIC_API_KEY");
    }
    assert_string_equal(ah_wire_key_env(AH_WIRE_OPENAI), "OPENAI_API_KEY");
    assert_string_equal(ah_wire_key_env(AH_WIRE_RESPONSES), "OPENAI_API_KEY");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(headers_are_checked),
        cmocka_unit_test(query_goes_into_the_url),
        cmocka_unit_test(the_key_comes_from_the_environment),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
