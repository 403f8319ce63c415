/* test_redis_url.c - Redis URL parsing (every accepted form, every refusal naming its part
 * and never echoing the password), the display form that hides the password, and the
 * SHA-1 behind EVALSHA (against known vectors). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <string.h>

#include "agenthost.h"
#include "agenthost/redis.h"
#include "redis_internal.h"

static void parses_tcp_forms(void **state)
{
    ah_redis_url u;
    char err[128];
    assert_int_equal(ah_redis_url_parse("redis://127.0.0.1:6380/2", &u, err, sizeof err),
                     AH_OK);
    assert_false(u.is_unix);
    assert_string_equal(u.host, "127.0.0.1");
    assert_int_equal(u.port, 6380);
    assert_int_equal(u.db, 2);
    assert_string_equal(u.password, "");

    assert_int_equal(ah_redis_url_parse("redis://localhost", &u, err, sizeof err), AH_OK);
    assert_string_equal(u.host, "localhost");
    assert_int_equal(u.port, 6379);
    assert_int_equal(u.db, 0);

    assert_int_equal(ah_redis_url_parse("redis://:s3cr%40t@10.0.0.1:7000/0", &u, err,
                                        sizeof err),
                     AH_OK);
    assert_string_equal(u.password, "s3cr@t");
    assert_string_equal(u.host, "10.0.0.1");
    assert_int_equal(u.port, 7000);

    /* user:password (ACL user ignored), and a password holding '@' unencoded */
    assert_int_equal(ah_redis_url_parse("redis://app:p@ss@h:1/", &u, err, sizeof err), AH_OK);
    assert_string_equal(u.password, "p@ss");
    assert_string_equal(u.host, "h");
    assert_int_equal(u.port, 1);

    assert_int_equal(ah_redis_url_parse("redis://[::1]:6379/3", &u, err, sizeof err), AH_OK);
    assert_string_equal(u.host, "::1");
    assert_int_equal(u.db, 3);
}

static void parses_unix_forms(void **state)
{
    ah_redis_url u;
    char err[128];
    assert_int_equal(ah_redis_url_parse("unix:/tmp/r.sock", &u, err, sizeof err), AH_OK);
    assert_true(u.is_unix);
    assert_string_equal(u.path, "/tmp/r.sock");
    assert_int_equal(ah_redis_url_parse("unix:///var/run/redis.sock?db=4", &u, err,
                                        sizeof err),
                     AH_OK);
    assert_string_equal(u.path, "/var/run/redis.sock");
    assert_int_equal(u.db, 4);
    assert_int_equal(ah_redis_url_parse("redis+unix:///x.sock", &u, err, sizeof err), AH_OK);
    assert_string_equal(u.path, "/x.sock");
}

static void refuses_bad_urls_without_the_password(void **state)
{
    struct {
        const char *url, *needle;
    } bad[] = {
        {"", "empty"},
        {"http://h:1", "redis://"},
        {"rediss://h:1", "TLS"},
        {"redis://:pw@:6379", "no host"},
        {"redis://:topsecret@h:0", "port"},
        {"redis://:topsecret@h:70000", "port"},
        {"redis://:topsecret@h:12x", "port"},
        {"redis://:topsecret@h:1/abc", "database"},
        {"redis://[::1:1", "'['"},
        {"unix:relative.sock", "absolute"},
        {"unix:/x.sock?timeout=3", "db=N"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        ah_redis_url u;
        char err[160];
        assert_int_equal(ah_redis_url_parse(bad[i].url, &u, err, sizeof err), AH_ERR_INVALID);
        if (!strstr(err, bad[i].needle))
            fail_msg("%s: message '%s' lacks '%s'", bad[i].url, err, bad[i].needle);
        assert_null(strstr(err, "topsecret"));
    }
    assert_int_equal(ah_redis_url_parse(NULL, NULL, NULL, 0), AH_ERR_INVALID);
}

static void display_hides_the_password(void **state)
{
    ah_redis_url u;
    char buf[300];
    assert_int_equal(ah_redis_url_parse("redis://:hunter2@127.0.0.1:6390/1", &u, NULL, 0),
                     AH_OK);
    ah_redis_url_display(&u, buf, sizeof buf);
    assert_string_equal(buf, "redis://:***@127.0.0.1:6390/1");
    assert_int_equal(ah_redis_url_parse("redis://[::1]", &u, NULL, 0), AH_OK);
    ah_redis_url_display(&u, buf, sizeof buf);
    assert_string_equal(buf, "redis://[::1]:6379/0");
    assert_int_equal(ah_redis_url_parse("unix:/s?db=2", &u, NULL, 0), AH_OK);
    ah_redis_url_display(&u, buf, sizeof buf);
    assert_string_equal(buf, "unix:/s?db=2");
}

static void sha1_known_vectors(void **state)
{
    char h[41];
    ah__sha1_hex("", 0, h);
    assert_string_equal(h, "da39a3ee5e6b4b0d3255bfef95601890afd80709");
    ah__sha1_hex("abc", 3, h);
    assert_string_equal(h, "a9993e364706816aba3e25717850c26c9cd0d89d");
    const char *m = "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"; /* 56 bytes */
    ah__sha1_hex(m, strlen(m), h);
    assert_string_equal(h, "84983e441c3bd26ebaae4aa1f95129e5e54670f1");
    /* Redis's own example: SCRIPT LOAD "return 1" */
    ah__sha1_hex("return 1", 8, h);
    assert_string_equal(h, "e0e1f9fabfc9d4800c877a703b823ac0578ff8db");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(parses_tcp_forms),
        cmocka_unit_test(parses_unix_forms),
        cmocka_unit_test(refuses_bad_urls_without_the_password),
        cmocka_unit_test(display_hides_the_password),
        cmocka_unit_test(sha1_known_vectors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
