/* test_status.c - the status X-macro: every code has a distinct name and a message. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <string.h>

#include "agenthost.h"

static void names_are_unique_and_non_empty(void **state)
{
    (void)state;
    for (int i = 0; i < AH_STATUS_COUNT_; i++) {
        const char *a = ah_status_name((ah_status)i);
        assert_non_null(a);
        assert_true(strlen(a) > 0);
        assert_true(strlen(ah_status_message((ah_status)i)) > 0);
        for (int j = i + 1; j < AH_STATUS_COUNT_; j++)
            assert_string_not_equal(a, ah_status_name((ah_status)j));
    }
    assert_string_equal(ah_status_name(AH_OK), "ok");
}

static void out_of_range_is_safe(void **state)
{
    (void)state;
    assert_string_equal(ah_status_name((ah_status)9999), "unknown");
    assert_string_equal(ah_status_name((ah_status)-1), "unknown");
    assert_non_null(ah_status_message((ah_status)9999));
}

/* The version is written twice (CMake's project() for the .so version and agenthost.pc,
 * the header for the library and `agenthost --version`): they must agree. */
static void version_matches_the_build(void **state)
{
    (void)state;
    assert_string_equal(ah_version(), AH_PROJECT_VERSION);
    char parts[32];
    snprintf(parts, sizeof parts, "%d.%d.%d", AH_VERSION_MAJOR, AH_VERSION_MINOR,
             AH_VERSION_PATCH);
    assert_string_equal(parts, AH_PROJECT_VERSION);
    assert_int_equal(ah_version_num(), AH_VERSION_NUM);
    assert_int_equal(AH_VERSION_NUM,
                     AH_VERSION_MAJOR * 65536 + AH_VERSION_MINOR * 256 + AH_VERSION_PATCH);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(names_are_unique_and_non_empty),
        cmocka_unit_test(out_of_range_is_safe),
        cmocka_unit_test(version_matches_the_build),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
