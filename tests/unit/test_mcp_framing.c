/* test_mcp_framing.c - MCP's JSON-RPC framing without I/O (core/mcp/mcp_jsonrpc.c):
 * newline-delimited messages fed whole, byte by byte and split anywhere, a line past the
 * cap dropped whole (and only it), what a message is, the 2026 era's per-request _meta,
 * which errors name a modern server (the era negotiation's rule), and the 2026 era's
 * x-mcp-header declarations (mcp_params.c): which are valid, and the headers a call gets. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdlib.h>
#include <string.h>

#include "mcp/mcp_internal.h"

typedef struct got {
    char lines[8][64];
    int n, longs;
} got;

static void on_line(void *ud, const char *line, size_t len)
{
    got *g = ud;
    assert_true(g->n < 8 && len < 64);
    memcpy(g->lines[g->n], line, len);
    g->lines[g->n][len] = '\0';
    g->n++;
}

static void on_long(void *ud)
{
    ((got *)ud)->longs++;
}

static const char STREAM[] = "{\"a\":1}\n\r\n{\"b\":2}\r\n0123456789ABCDEF\n{\"c\":3}\n{\"d\"";

static void check_stream(const got *g)
{
    assert_int_equal(g->n, 3);
    assert_string_equal(g->lines[0], "{\"a\":1}");
    assert_string_equal(g->lines[1], "{\"b\":2}"); /* the \r of CRLF is not the message's */
    assert_string_equal(g->lines[2], "{\"c\":3}");
    assert_int_equal(g->longs, 1); /* the 16-byte line past the cap of 12, alone */
}

static void lines_any_split(void **state)
{
    (void)state;
    size_t n = strlen(STREAM);
    for (size_t cut = 0; cut <= n; cut++) {
        ah__mcp_lines l;
        got g;
        memset(&g, 0, sizeof g);
        ah__mcp_lines_init(&l, 12);
        assert_int_equal(ah__mcp_lines_feed(&l, STREAM, cut, on_line, on_long, &g), 0);
        assert_int_equal(ah__mcp_lines_feed(&l, STREAM + cut, n - cut, on_line, on_long, &g), 0);
        check_stream(&g);
        assert_int_equal(l.len, 4); /* {"d" waits for its newline */
        ah__mcp_lines_free(&l);
    }
    ah__mcp_lines l; /* byte by byte */
    got g;
    memset(&g, 0, sizeof g);
    ah__mcp_lines_init(&l, 12);
    for (size_t i = 0; i < n; i++)
        assert_int_equal(ah__mcp_lines_feed(&l, STREAM + i, 1, on_line, on_long, &g), 0);
    check_stream(&g);
    ah__mcp_lines_free(&l);
}

static mcp_kind kind_of(const char *json, int64_t *id)
{
    cJSON *m = cJSON_Parse(json);
    mcp_kind k = ah__mcp_classify(m, id);
    cJSON_Delete(m);
    return k;
}

static void classify_messages(void **state)
{
    (void)state;
    int64_t id;
    assert_int_equal(kind_of("{\"jsonrpc\":\"2.0\",\"id\":7,\"result\":{}}", &id), MCP_MSG_RESPONSE);
    assert_int_equal(id, 7);
    assert_int_equal(kind_of("{\"id\":\"8\",\"error\":{\"code\":-32601}}", &id), MCP_MSG_ERROR);
    assert_int_equal(id, 8); /* a string id of ours is tolerated */
    assert_int_equal(kind_of("{\"error\":{\"code\":-32600}}", &id), MCP_MSG_ERROR);
    assert_int_equal(id, -1);
    assert_int_equal(kind_of("{\"method\":\"notifications/progress\"}", &id),
                     MCP_MSG_NOTIFICATION);
    assert_int_equal(kind_of("{\"id\":1,\"method\":\"ping\"}", &id), MCP_MSG_REQUEST);
    assert_int_equal(kind_of("{\"id\":1,\"result\":3}", &id), MCP_MSG_INVALID);
    assert_int_equal(kind_of("[1,2]", &id), MCP_MSG_INVALID);
    assert_int_equal(kind_of("{\"id\":\"x\",\"result\":{}}", &id), MCP_MSG_RESPONSE);
    assert_int_equal(id, -1); /* not one of ours */
}

static void encode_both_eras(void **state)
{
    (void)state;
    cJSON *p = cJSON_Parse("{\"name\":\"t\",\"_meta\":{\"progressToken\":5}}");
    char *legacy = ah__mcp_encode(3, "tools/call", p, 0);
    assert_string_equal(legacy, "{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"tools/call\","
                                "\"params\":{\"name\":\"t\",\"_meta\":{\"progressToken\":5}}}");
    char *modern = ah__mcp_encode(3, "tools/call", p, 1);
    cJSON *m = cJSON_Parse(modern);
    cJSON *meta = cJSON_GetObjectItem(cJSON_GetObjectItem(m, "params"), "_meta");
    assert_int_equal(cJSON_GetObjectItem(meta, "progressToken")->valueint, 5);
    assert_string_equal(
        cJSON_GetObjectItem(meta, "io.modelcontextprotocol/protocolVersion")->valuestring,
        "2026-07-28");
    assert_true(cJSON_IsObject(cJSON_GetObjectItem(meta, "io.modelcontextprotocol/clientCapabilities")));
    assert_string_equal(cJSON_GetObjectItem(cJSON_GetObjectItem(meta, "io.modelcontextprotocol/clientInfo"),
                                            "name")->valuestring,
                        "agenthost");
    /* params untouched by the modern form; a notification has no id */
    assert_null(cJSON_GetObjectItem(cJSON_GetObjectItem(p, "_meta"),
                                    "io.modelcontextprotocol/protocolVersion"));
    char *note = ah__mcp_encode(-1, "notifications/initialized", NULL, 0);
    assert_string_equal(note, "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}");
    cJSON_Delete(m);
    cJSON_Delete(p);
    free(legacy);
    free(modern);
    free(note);
}

static void era_rules(void **state)
{
    (void)state;
    /* the errors 2026-07-28 defines name a modern server; anything else (-32601 from a
     * legacy server asked server/discover, -32000) means fall back to initialize */
    assert_true(ah__mcp_modern_error(-32022));
    assert_true(ah__mcp_modern_error(-32020));
    assert_true(ah__mcp_modern_error(-32021));
    assert_false(ah__mcp_modern_error(-32601));
    assert_false(ah__mcp_modern_error(-32000));
    assert_true(ah__mcp_is_legacy_version("2025-11-25"));
    assert_true(ah__mcp_is_legacy_version("2025-06-18"));
    assert_false(ah__mcp_is_legacy_version("2026-07-28"));
    assert_false(ah__mcp_is_legacy_version("2024-11-05"));
}

static int decls_of(const char *schema_json, cJSON **out, char *why, size_t n)
{
    cJSON *schema = cJSON_Parse(schema_json);
    assert_non_null(schema);
    int rc = ah__mcp_param_decls(schema, out, why, n);
    cJSON_Delete(schema);
    return rc;
}

static void param_header_rules(void **state)
{
    (void)state;
    char why[200];
    cJSON *d = NULL;
    /* none: fine, nothing to mirror */
    assert_int_equal(decls_of("{\"type\":\"object\",\"properties\":{\"a\":{\"type\":"
                              "\"string\"}}}", &d, why, sizeof why), 0);
    assert_null(d);
    /* invalid: under items, under oneOf, at the root, on a number, not a token, twice
     * ignoring case */
    static const char *const bad[] = {
        "{\"properties\":{\"l\":{\"type\":\"array\",\"items\":{\"type\":\"string\","
        "\"x-mcp-header\":\"L\"}}}}",
        "{\"properties\":{\"o\":{\"oneOf\":[{\"type\":\"string\",\"x-mcp-header\":"
        "\"O\"}]}}}",
        "{\"type\":\"object\",\"x-mcp-header\":\"Root\"}",
        "{\"properties\":{\"n\":{\"type\":\"number\",\"x-mcp-header\":\"N\"}}}",
        "{\"properties\":{\"s\":{\"type\":\"string\",\"x-mcp-header\":\"a b\"}}}",
        "{\"properties\":{\"s\":{\"type\":\"string\",\"x-mcp-header\":\"\"}}}",
        "{\"properties\":{\"a\":{\"type\":\"string\",\"x-mcp-header\":\"Id\"},"
        "\"b\":{\"type\":\"integer\",\"x-mcp-header\":\"ID\"}}}",
        "{\"$defs\":{\"x\":{\"type\":\"string\",\"x-mcp-header\":\"X\"}},"
        "\"properties\":{\"x\":{\"$ref\":\"#/$defs/x\"}}}",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        why[0] = '\0';
        assert_int_equal(decls_of(bad[i], &d, why, sizeof why), -1);
        assert_null(d);
        assert_true(strstr(why, "x-mcp-header") != NULL);
    }
    /* valid, nested through properties; a property named x-mcp-header is only a name */
    assert_int_equal(
        decls_of("{\"properties\":{\"region\":{\"type\":\"string\",\"x-mcp-header\":"
                 "\"Region\"},\"w\":{\"type\":\"object\",\"properties\":{\"zone\":{"
                 "\"type\":\"string\",\"x-mcp-header\":\"Zone\"}}},\"k\":{\"type\":"
                 "\"integer\",\"x-mcp-header\":\"K\"},\"b\":{\"type\":\"boolean\","
                 "\"x-mcp-header\":\"B\"},\"x-mcp-header\":{\"type\":\"string\"}}}",
                 &d, why, sizeof why),
        0);
    assert_int_equal(cJSON_GetArraySize(d), 4);
    cJSON *args = cJSON_Parse("{\"region\":\"=?base64?x?=\",\"w\":{\"zone\":\"eu\"},"
                              "\"k\":-7,\"b\":true}");
    char *names[8], *values[8];
    size_t n = ah__mcp_param_headers(d, args, names, values, 8);
    assert_int_equal(n, 4);
    assert_string_equal(names[0], "Mcp-Param-Region");
    assert_string_equal(values[0], "=?base64?PT9iYXNlNjQ/eD89?="); /* looks like the sentinel */
    assert_string_equal(names[1], "Mcp-Param-Zone");
    assert_string_equal(values[1], "eu");
    assert_string_equal(values[2], "-7");
    assert_string_equal(values[3], "true");
    for (size_t i = 0; i < n; i++) {
        free(names[i]);
        free(values[i]);
    }
    cJSON_Delete(args);
    /* absent and null arguments: no header */
    args = cJSON_Parse("{\"region\":null}");
    assert_int_equal(ah__mcp_param_headers(d, args, names, values, 8), 0);
    cJSON_Delete(args);
    cJSON_Delete(d);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(lines_any_split),
        cmocka_unit_test(classify_messages),
        cmocka_unit_test(encode_both_eras),
        cmocka_unit_test(era_rules),
        cmocka_unit_test(param_header_rules),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
