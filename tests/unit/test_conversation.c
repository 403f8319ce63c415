/* test_conversation.c - the neutral conversation model: building, role rules, deep-copy
 * ownership, read access and the neutral JSON export/import round trip. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdlib.h>
#include <string.h>

#include "agenthost.h"

static int str_eq(const char *a, const char *b)
{
    if (!a || !b)
        return a == b;
    return strcmp(a, b) == 0;
}

static void assert_block_eq(const ah_msg_block *a, const ah_msg_block *b)
{
    assert_int_equal(a->kind, b->kind);
    assert_true(str_eq(a->text, b->text));
    assert_true(str_eq(a->id, b->id));
    assert_true(str_eq(a->name, b->name));
    assert_true(str_eq(a->arguments, b->arguments));
    assert_true(str_eq(a->tool_use_id, b->tool_use_id));
    assert_true(str_eq(a->signature, b->signature));
    assert_true(str_eq(a->item_id, b->item_id));
    assert_true(str_eq(a->encrypted_content, b->encrypted_content));
    assert_int_equal(a->redacted, b->redacted);
    assert_int_equal(a->is_error, b->is_error);
}

static void assert_conv_eq(const ah_conversation *a, const ah_conversation *b)
{
    assert_true(str_eq(ah_conversation_system(a), ah_conversation_system(b)));
    assert_int_equal(ah_conversation_count(a), ah_conversation_count(b));
    for (size_t i = 0; i < ah_conversation_count(a); i++) {
        assert_int_equal(ah_conversation_role(a, i), ah_conversation_role(b, i));
        assert_int_equal(ah_conversation_is_partial(a, i),
                         ah_conversation_is_partial(b, i));
        assert_int_equal(ah_conversation_block_count(a, i),
                         ah_conversation_block_count(b, i));
        for (size_t j = 0; j < ah_conversation_block_count(a, i); j++)
            assert_block_eq(ah_conversation_block(a, i, j),
                            ah_conversation_block(b, i, j));
    }
}

/* A conversation with every block kind and flag. */
static ah_conversation *full_conversation(void)
{
    ah_conversation *c = ah_conversation_new();
    assert_non_null(c);
    assert_int_equal(ah_conversation_set_system(c, "You are terse."), AH_OK);
    assert_int_equal(ah_conversation_add_user_text(c, "What is 2+3 and 4*5?"), AH_OK);
    assert_int_equal(ah_conversation_begin_assistant(c), AH_OK);
    assert_int_equal(
        ah_conversation_add_reasoning(c, "Two tools.", "sig-1", "rs_1", "enc-1", 0),
        AH_OK);
    assert_int_equal(ah_conversation_add_reasoning(c, "", NULL, NULL, "redacted-data", 1),
                     AH_OK);
    assert_int_equal(ah_conversation_add_text(c, "Let me compute.", 15), AH_OK);
    assert_int_equal(
        ah_conversation_add_tool_use(c, "call_1", "add", "{\"a\":2,\"b\":3}"), AH_OK);
    assert_int_equal(
        ah_conversation_add_tool_use(c, "call_2", "mul", "{\"a\":4,\"b\":5}"), AH_OK);
    assert_int_equal(ah_conversation_add_tool_result(c, "call_1", "5", 0), AH_OK);
    assert_int_equal(
        ah_conversation_add_tool_result(c, "call_2", "overflow \"quoted\"", 1), AH_OK);
    assert_int_equal(ah_conversation_begin_assistant(c), AH_OK);
    assert_int_equal(ah_conversation_add_text(c, "2+3 is 5; ", 10), AH_OK);
    assert_int_equal(ah_conversation_set_partial(c, 1), AH_OK);
    return c;
}

static void builds_and_reads_back(void **state)
{
    (void)state;
    ah_conversation *c = full_conversation();
    assert_string_equal(ah_conversation_system(c), "You are terse.");
    assert_int_equal(ah_conversation_count(c), 4);
    assert_int_equal(ah_conversation_role(c, 0), AH_ROLE_USER);
    assert_int_equal(ah_conversation_role(c, 1), AH_ROLE_ASSISTANT);
    assert_int_equal(ah_conversation_role(c, 2), AH_ROLE_USER);
    assert_int_equal(ah_conversation_role(c, 3), AH_ROLE_ASSISTANT);
    assert_int_equal(ah_conversation_is_partial(c, 1), 0);
    assert_int_equal(ah_conversation_is_partial(c, 3), 1);

    assert_int_equal(ah_conversation_block_count(c, 1), 5);
    const ah_msg_block *r = ah_conversation_block(c, 1, 0);
    assert_int_equal(r->kind, AH_MSG_REASONING);
    assert_string_equal(r->text, "Two tools.");
    assert_string_equal(r->signature, "sig-1");
    assert_string_equal(r->item_id, "rs_1");
    assert_string_equal(r->encrypted_content, "enc-1");
    assert_int_equal(r->redacted, 0);
    const ah_msg_block *rd = ah_conversation_block(c, 1, 1);
    assert_int_equal(rd->redacted, 1);
    assert_null(rd->signature);
    const ah_msg_block *tu = ah_conversation_block(c, 1, 3);
    assert_int_equal(tu->kind, AH_MSG_TOOL_USE);
    assert_string_equal(tu->id, "call_1");
    assert_string_equal(tu->name, "add");
    assert_string_equal(tu->arguments, "{\"a\":2,\"b\":3}");
    assert_null(tu->text); /* fields a kind does not use are NULL */
    assert_null(tu->tool_use_id);

    /* Both results joined one user message (parallel calls travel together). */
    assert_int_equal(ah_conversation_block_count(c, 2), 2);
    const ah_msg_block *tr = ah_conversation_block(c, 2, 1);
    assert_int_equal(tr->kind, AH_MSG_TOOL_RESULT);
    assert_string_equal(tr->tool_use_id, "call_2");
    assert_string_equal(tr->text, "overflow \"quoted\"");
    assert_int_equal(tr->is_error, 1);
    assert_null(tr->id);

    /* Out of range reads are safe. */
    assert_null(ah_conversation_block(c, 9, 0));
    assert_null(ah_conversation_block(c, 0, 9));
    assert_int_equal(ah_conversation_block_count(c, 9), 0);
    assert_string_equal(ah_msg_kind_name(AH_MSG_TOOL_RESULT), "tool_result");
    assert_string_equal(ah_msg_kind_name((ah_msg_kind)99), "unknown");
    assert_string_equal(ah_role_name(AH_ROLE_ASSISTANT), "assistant");
    ah_conversation_free(c);
}

static void copies_every_string_it_is_given(void **state)
{
    (void)state;
    char *sys = strdup("system prompt");
    char *text = strdup("hello there");
    char *id = strdup("toolu_01");
    char *name = strdup("lookup");
    char *args = strdup("{\"q\":\"x\"}");
    char *sig = strdup("signature-bytes");
    ah_conversation *c = ah_conversation_new();
    assert_int_equal(ah_conversation_set_system(c, sys), AH_OK);
    assert_int_equal(ah_conversation_add_user_text(c, text), AH_OK);
    assert_int_equal(ah_conversation_begin_assistant(c), AH_OK);
    assert_int_equal(ah_conversation_add_reasoning(c, text, sig, NULL, NULL, 0), AH_OK);
    assert_int_equal(ah_conversation_add_tool_use(c, id, name, args), AH_OK);
    assert_int_equal(ah_conversation_add_tool_result(c, id, text, 0), AH_OK);
    /* Scribble over and free every source. */
    char *all[] = {sys, text, id, name, args, sig};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) {
        memset(all[i], 'X', strlen(all[i]));
        free(all[i]);
    }
    assert_string_equal(ah_conversation_system(c), "system prompt");
    assert_string_equal(ah_conversation_block(c, 0, 0)->text, "hello there");
    assert_string_equal(ah_conversation_block(c, 1, 0)->signature, "signature-bytes");
    assert_string_equal(ah_conversation_block(c, 1, 1)->id, "toolu_01");
    assert_string_equal(ah_conversation_block(c, 1, 1)->name, "lookup");
    assert_string_equal(ah_conversation_block(c, 1, 1)->arguments, "{\"q\":\"x\"}");
    assert_string_equal(ah_conversation_block(c, 2, 0)->tool_use_id, "toolu_01");
    ah_conversation_free(c);
}

static void add_text_takes_a_length(void **state)
{
    (void)state;
    ah_conversation *c = ah_conversation_new();
    assert_int_equal(ah_conversation_begin_assistant(c), AH_OK);
    const char *delta = "Hello, world! and more";
    assert_int_equal(ah_conversation_add_text(c, delta, 5), AH_OK);
    assert_int_equal(ah_conversation_add_text(c, NULL, 0), AH_OK);
    assert_int_equal(ah_conversation_add_text(c, NULL, 3), AH_ERR_INVALID);
    assert_string_equal(ah_conversation_block(c, 0, 0)->text, "Hello");
    assert_string_equal(ah_conversation_block(c, 0, 1)->text, "");
    assert_int_equal(ah_conversation_block_count(c, 0), 2);
    ah_conversation_free(c);
}

static void enforces_roles_and_required_fields(void **state)
{
    (void)state;
    ah_conversation *c = ah_conversation_new();
    /* No message yet. */
    assert_int_equal(ah_conversation_add_text(c, "x", 1), AH_ERR_STATE);
    assert_int_equal(ah_conversation_set_partial(c, 1), AH_ERR_STATE);
    assert_int_equal(ah_conversation_begin_user(c), AH_OK);
    assert_int_equal(ah_conversation_add_tool_use(c, "id", "name", "{}"), AH_ERR_STATE);
    assert_int_equal(ah_conversation_set_partial(c, 1), AH_ERR_STATE);
    assert_int_equal(ah_conversation_begin_assistant(c), AH_OK);
    ah_msg_block tr = {.kind = AH_MSG_TOOL_RESULT, .tool_use_id = "id", .text = "r"};
    assert_int_equal(ah_conversation_add_block(c, &tr), AH_ERR_STATE);
    assert_int_equal(ah_conversation_add_tool_use(c, "", "name", "{}"), AH_ERR_INVALID);
    assert_int_equal(ah_conversation_add_tool_use(c, "id", NULL, "{}"), AH_ERR_INVALID);
    ah_msg_block bad = {.kind = (ah_msg_kind)42, .text = "x"};
    assert_int_equal(ah_conversation_add_block(c, &bad), AH_ERR_INVALID);
    assert_int_equal(ah_conversation_add_tool_result(c, "", "r", 0), AH_ERR_INVALID);
    /* Failed adds left nothing behind. */
    assert_int_equal(ah_conversation_count(c), 2);
    assert_int_equal(ah_conversation_block_count(c, 0), 0);
    assert_int_equal(ah_conversation_block_count(c, 1), 0);
    /* A NULL arguments text is kept as "" (encoders send {}). */
    assert_int_equal(ah_conversation_add_tool_use(c, "id", "name", NULL), AH_OK);
    assert_string_equal(ah_conversation_block(c, 1, 0)->arguments, "");
    ah_conversation_free(c);
}

static void tool_results_group_only_with_tool_results(void **state)
{
    (void)state;
    ah_conversation *c = ah_conversation_new();
    assert_int_equal(ah_conversation_add_tool_result(c, "a", "1", 0),
                     AH_OK); /* starts one */
    assert_int_equal(ah_conversation_add_tool_result(c, "b", "2", 0), AH_OK); /* joins */
    assert_int_equal(ah_conversation_count(c), 1);
    assert_int_equal(ah_conversation_add_user_text(c, "and?"), AH_OK); /* always new */
    assert_int_equal(ah_conversation_count(c), 2);
    assert_int_equal(ah_conversation_add_tool_result(c, "c", "3", 0),
                     AH_OK); /* after text */
    assert_int_equal(ah_conversation_count(c), 3);
    assert_int_equal(ah_conversation_begin_assistant(c), AH_OK);
    assert_int_equal(ah_conversation_add_tool_result(c, "d", "4", 0),
                     AH_OK); /* after asst */
    assert_int_equal(ah_conversation_count(c), 5);
    assert_int_equal(ah_conversation_role(c, 4), AH_ROLE_USER);
    assert_int_equal(ah_conversation_block_count(c, 0), 2);
    ah_conversation_free(c);
}

static void copy_is_independent_and_truncate_drops(void **state)
{
    (void)state;
    ah_conversation *c = full_conversation();
    ah_conversation *d = ah_conversation_copy(c);
    assert_non_null(d);
    assert_conv_eq(c, d);
    ah_conversation_truncate(c, 1);
    assert_int_equal(ah_conversation_count(c), 1);
    assert_int_equal(ah_conversation_count(d), 4);
    assert_int_equal(ah_conversation_set_system(c, NULL), AH_OK);
    assert_null(ah_conversation_system(c));
    assert_string_equal(ah_conversation_system(d), "You are terse.");
    ah_conversation_truncate(c, 7); /* beyond the end: no-op */
    assert_int_equal(ah_conversation_count(c), 1);
    ah_conversation_free(c);
    ah_conversation_free(d);
}

static void null_handles_are_safe(void **state)
{
    (void)state;
    ah_conversation_free(NULL);
    ah_conversation_truncate(NULL, 0);
    assert_null(ah_conversation_copy(NULL));
    assert_int_equal(ah_conversation_count(NULL), 0);
    assert_null(ah_conversation_system(NULL));
    assert_null(ah_conversation_block(NULL, 0, 0));
    assert_int_equal(ah_conversation_begin_user(NULL), AH_ERR_INVALID);
    assert_int_equal(ah_conversation_add_block(NULL, NULL), AH_ERR_INVALID);
    char *json = NULL;
    assert_int_equal(ah_conversation_to_json(NULL, &json, NULL), AH_ERR_INVALID);
    ah_conversation *out = NULL;
    assert_int_equal(ah_conversation_from_json(NULL, 0, &out, NULL, 0), AH_ERR_INVALID);
}

static void json_round_trip_keeps_everything(void **state)
{
    (void)state;
    ah_conversation *c = full_conversation();
    char *json = NULL;
    size_t len = 0;
    assert_int_equal(ah_conversation_to_json(c, &json, &len), AH_OK);
    assert_int_equal(len, strlen(json));
    /* A few members of the documented shape. */
    assert_non_null(strstr(json, "\"partial\":true"));
    assert_non_null(strstr(json, "\"arguments\":\"{\\\"a\\\":2,\\\"b\\\":3}\""));
    assert_non_null(strstr(json, "\"is_error\":true"));
    assert_non_null(strstr(json, "\"redacted\":true"));

    ah_conversation *back = NULL;
    char err[256];
    assert_int_equal(ah_conversation_from_json(json, len, &back, err, sizeof err), AH_OK);
    assert_conv_eq(c, back);
    char *json2 = NULL;
    assert_int_equal(ah_conversation_to_json(back, &json2, NULL), AH_OK);
    assert_string_equal(json, json2);
    free(json);
    free(json2);
    ah_conversation_free(back);
    ah_conversation_free(c);
}

static void json_import_accepts_object_arguments(void **state)
{
    (void)state;
    const char *doc =
        "{\"messages\":[{\"role\":\"assistant\",\"content\":[{\"type\":\"tool_use\","
        "\"id\":\"c1\",\"name\":\"f\",\"arguments\":{\"x\":[1,2]}}]}]}";
    ah_conversation *c = NULL;
    assert_int_equal(ah_conversation_from_json(doc, strlen(doc), &c, NULL, 0), AH_OK);
    assert_null(ah_conversation_system(c));
    assert_string_equal(ah_conversation_block(c, 0, 0)->arguments, "{\"x\":[1,2]}");
    ah_conversation_free(c);
}

static void json_import_errors_name_the_path(void **state)
{
    (void)state;
    static const struct {
        const char *doc;
        ah_status st;
        const char *needle;
    } cases[] = {
        {"{\"messages\":[", AH_ERR_PARSE, "malformed at offset"},
        {"[]", AH_ERR_INVALID, "expected an object"},
        {"{\"sytem\":\"x\"}", AH_ERR_INVALID, "sytem: unknown member"},
        {"{\"system\":3}", AH_ERR_INVALID, "system: expected a string"},
        {"{\"messages\":{}}", AH_ERR_INVALID, "messages: expected an array"},
        {"{\"messages\":[{\"role\":\"tool\",\"content\":[]}]}", AH_ERR_INVALID,
         "messages[0].role"},
        {"{\"messages\":[{\"role\":\"user\"}]}", AH_ERR_INVALID, "messages[0].content"},
        {"{\"messages\":[{\"role\":\"user\",\"partial\":true,\"content\":[]}]}",
         AH_ERR_INVALID, "messages[0].partial"},
        {"{\"messages\":[{\"role\":\"user\",\"content\":[],\"x\":1}]}", AH_ERR_INVALID,
         "messages[0].x: unknown member"},
        {"{\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"video\"}]}]}",
         AH_ERR_INVALID, "messages[0].content[0].type: unknown block type 'video'"},
        {"{\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"image\"}]}]}",
         AH_ERR_INVALID, "messages[0].content[0].data or url: one is required"},
        {"{\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"image\","
         "\"media_type\":\"image/bmp\",\"data\":\"AAAA\"}]}]}",
         AH_ERR_INVALID, "messages[0].content[0].media_type: 'image/bmp' is not one of"},
        {"{\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"image\","
         "\"media_type\":\"image/png\",\"data\":\"AA*A\"}]}]}",
         AH_ERR_INVALID, "messages[0].content[0].data: not base64 (at byte 2)"},
        {"{\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"document\","
         "\"media_type\":\"text/html\",\"url\":\"https://x/y\"}]}]}",
         AH_ERR_INVALID, "messages[0].content[0].media_type: 'text/html' is not application/pdf"},
        {"{\"messages\":[{\"role\":\"assistant\",\"content\":[{\"type\":\"image\","
         "\"url\":\"https://x/y.png\"}]}]}",
         AH_ERR_INVALID, "messages[0].content[0]: a image block cannot be in a assistant"},
        {"{\"messages\":[{\"role\":\"user\",\"content\":[{\"text\":\"x\"}]}]}",
         AH_ERR_INVALID, "messages[0].content[0].type"},
        {"{\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"text\"}]}]}",
         AH_ERR_INVALID, "messages[0].content[0].text"},
        {"{\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":"
         "\"a\","
         "\"txt\":1}]}]}",
         AH_ERR_INVALID, "messages[0].content[0].txt: unknown member"},
        {"{\"messages\":[{\"role\":\"user\",\"content\":[]},{\"role\":\"user\","
         "\"content\":"
         "[{\"type\":\"tool_use\",\"id\":\"a\",\"name\":\"b\"}]}]}",
         AH_ERR_INVALID, "messages[1].content[0]: a tool_use block cannot be in a user"},
        {"{\"messages\":[{\"role\":\"assistant\",\"content\":[{\"type\":\"tool_use\","
         "\"name\":\"b\"}]}]}",
         AH_ERR_INVALID, "messages[0].content[0].id"},
        {"{\"messages\":[{\"role\":\"assistant\",\"content\":[{\"type\":\"tool_use\","
         "\"id\":\"a\",\"name\":\"b\",\"arguments\":7}]}]}",
         AH_ERR_INVALID, "messages[0].content[0].arguments"},
        {"{\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"tool_result\","
         "\"tool_use_id\":\"a\",\"is_error\":\"yes\"}]}]}",
         AH_ERR_INVALID, "messages[0].content[0].is_error"},
        {"{\"messages\":[{\"role\":\"assistant\",\"content\":[{\"type\":\"reasoning\","
         "\"redacted\":1}]}]}",
         AH_ERR_INVALID, "messages[0].content[0].redacted"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        ah_conversation *c = (ah_conversation *)&cases; /* must be reset to NULL */
        char err[256] = "";
        ah_status st = ah_conversation_from_json(cases[i].doc, strlen(cases[i].doc), &c,
                                                 err, sizeof err);
        if (st != cases[i].st || !strstr(err, cases[i].needle))
            fail_msg("case %zu: status %s, err '%s', wanted %s with '%s'", i,
                     ah_status_name(st), err, ah_status_name(cases[i].st),
                     cases[i].needle);
        assert_null(c);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(builds_and_reads_back),
        cmocka_unit_test(copies_every_string_it_is_given),
        cmocka_unit_test(add_text_takes_a_length),
        cmocka_unit_test(enforces_roles_and_required_fields),
        cmocka_unit_test(tool_results_group_only_with_tool_results),
        cmocka_unit_test(copy_is_independent_and_truncate_drops),
        cmocka_unit_test(null_handles_are_safe),
        cmocka_unit_test(json_round_trip_keeps_everything),
        cmocka_unit_test(json_import_accepts_object_arguments),
        cmocka_unit_test(json_import_errors_name_the_path),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
