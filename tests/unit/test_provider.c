/* test_provider.c - the provider registry (core/provider.h, core/wire.c): one complete
 * ops table per AH_WIRE_MAP line, agreeing with the map's public names and paths, and
 * the format-blind drivers taking what differs (headers, end marker, background, the
 * required max_tokens, capabilities) from the table. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../core/provider.h"
#include "agenthost/capabilities.h"
#include "agenthost/conversation.h"
#include "agenthost/worker.h"

static const struct {
    const char *name, *path;
} map[] = {
#define X(N, s, p) {s, p},
    AH_WIRE_MAP(X)
#undef X
};

static void registry_agrees_with_the_wire_map(void **state)
{
    (void)state;
    assert_int_equal(sizeof map / sizeof map[0], AH_WIRE_COUNT_);
    for (int w = 0; w < AH_WIRE_COUNT_; w++) {
        const ah__provider *p = ah__provider_of((ah_wire)w);
        assert_non_null(p);
        assert_string_equal(p->name, map[w].name);
        assert_string_equal(p->path, map[w].path);
        assert_string_equal(ah_wire_name((ah_wire)w), map[w].name);
        assert_string_equal(ah_wire_path((ah_wire)w), map[w].path);
        assert_ptr_equal(ah_wire_base_url((ah_wire)w), p->base_url);
        assert_int_equal(ah_wire_from_name(map[w].name), w);
    }
    assert_null(ah__provider_of(AH_WIRE_COUNT_));
    assert_null(ah__provider_of((ah_wire)-1));
    assert_null(ah_wire_base_url(AH_WIRE_COUNT_));
    assert_string_equal(ah_wire_name(AH_WIRE_COUNT_), "unknown");
    assert_int_equal(ah_wire_from_name("nosuch"), -1);
}

static void every_table_is_complete(void **state)
{
    (void)state;
    for (int w = 0; w < AH_WIRE_COUNT_; w++) {
        const ah__provider *p = ah__provider_of((ah_wire)w);
        assert_non_null(p->base_url);
        assert_true(strncmp(p->base_url, "https://", 8) == 0);
        assert_non_null(p->key_header);
        assert_non_null(p->key_prefix);
        assert_non_null(p->encode);
        assert_non_null(p->event);
        assert_non_null(p->body);
        assert_non_null(p->end_marker);
        /* re-attach and cancel come together */
        assert_int_equal(p->reattach_url != NULL, p->cancel_url != NULL);
        assert_int_equal(ah_wire_has_background((ah_wire)w), p->reattach_url != NULL);
        /* a capability table ends, and its last row decides for any model */
        assert_non_null(p->caps);
        const ah__cap_row *r = p->caps;
        while (r->when)
            r++;
        assert_true(r > p->caps);
        assert_true(r[-1].when("no-such-model", 0) && r[-1].when("", 1));
    }
}

static const char *header(const ah_header_list *l, const char *name)
{
    for (size_t i = 0; i < l->count; i++)
        if (strcmp(l->items[i].name, name) == 0)
            return l->items[i].value;
    return NULL;
}

static void headers_come_from_the_table(void **state)
{
    (void)state;
    for (int w = 0; w < AH_WIRE_COUNT_; w++) {
        const ah__provider *p = ah__provider_of((ah_wire)w);
        ah_header_list l;
        assert_int_equal(ah_request_headers((ah_wire)w, "sk-test", 1, &l), AH_OK);
        char want[64];
        snprintf(want, sizeof want, "%ssk-test", p->key_prefix);
        assert_non_null(header(&l, p->key_header));
        assert_string_equal(header(&l, p->key_header), want);
        assert_string_equal(header(&l, "Accept"), "text/event-stream");
        for (size_t i = 0; i < 2; i++)
            if (p->fixed_headers[i].name)
                assert_string_equal(header(&l, p->fixed_headers[i].name),
                                    p->fixed_headers[i].value);
        ah_header_list_free(&l);
        /* no key, no auth header */
        assert_int_equal(ah_request_headers((ah_wire)w, NULL, 0, &l), AH_OK);
        assert_null(header(&l, p->key_header));
        ah_header_list_free(&l);
    }
    ah_header_list l;
    assert_int_equal(ah_request_headers(AH_WIRE_COUNT_, "k", 1, &l), AH_ERR_INVALID);
}

/* The drivers' per-format rules come from the table: max_tokens, background, the end
 * marker named when a stream stops short. */
static void drivers_follow_the_table(void **state)
{
    (void)state;
    for (int w = 0; w < AH_WIRE_COUNT_; w++) {
        const ah__provider *p = ah__provider_of((ah_wire)w);
        ah_conversation *c = ah_conversation_new();
        assert_non_null(c);
        assert_int_equal(ah_conversation_begin_user(c), AH_OK);
        assert_int_equal(ah_conversation_add_text(c, "hi", 2), AH_OK);
        ah_request_opts o;
        ah_request_opts_init(&o);
        o.model = "m";
        char *body = NULL, err[256];
        ah_status st = ah_request_encode((ah_wire)w, c, &o, &body, NULL, err, sizeof err);
        assert_int_equal(st, p->needs_max_tokens ? AH_ERR_INVALID : AH_OK);
        free(body);
        o.max_tokens = 16;
        o.background = 1;
        st = ah_request_encode((ah_wire)w, c, &o, &body, NULL, err, sizeof err);
        assert_int_equal(st, p->reattach_url ? AH_OK : AH_ERR_INVALID);
        if (st != AH_OK)
            assert_non_null(strstr(err, p->name));
        free(body);
        ah_conversation_free(c);

        ah_timeline *tl = ah_timeline_new();
        ah_decoder *d = NULL;
        assert_int_equal(ah_decoder_new((ah_wire)w, tl, NULL, NULL, &d, NULL, 0), AH_OK);
        ah_error e;
        assert_int_equal(ah_decoder_finish(d, &e), AH_ERR_TRUNCATED);
        assert_non_null(strstr(e.message, p->end_marker));
        assert_non_null(strstr(e.message, p->name));
        ah_decoder_free(d);
        ah_timeline_free(tl);
    }
}

/* The request URL from a base URL: the format's path goes at the end of the base URL's
 * path, before any query it carries (Azure's "?api-version=..."); a fragment is never
 * sent and is dropped. */
static void client_url_puts_the_path_before_the_query(void **state)
{
    (void)state;
    static const struct {
        ah_wire wire;
        const char *base, *want;
    } cases[] = {
        {AH_WIRE_OPENAI, "http://h", "http://h/v1/chat/completions"},
        {AH_WIRE_OPENAI, "http://h/", "http://h/v1/chat/completions"},
        {AH_WIRE_OPENAI, "http://h/v1", "http://h/v1/chat/completions"},
        {AH_WIRE_OPENAI, "http://h/v1/chat/completions", "http://h/v1/chat/completions"},
        {AH_WIRE_OPENAI, "http://h/v1?api-version=2024-10-21",
         "http://h/v1/chat/completions?api-version=2024-10-21"},
        {AH_WIRE_OPENAI, "http://h/v1/?api-version=1&x=2",
         "http://h/v1/chat/completions?api-version=1&x=2"},
        {AH_WIRE_OPENAI, "http://h?a=1", "http://h/v1/chat/completions?a=1"},
        {AH_WIRE_OPENAI, "http://h/openai/v1/chat/completions?a=1",
         "http://h/openai/v1/chat/completions?a=1"},
        {AH_WIRE_ANTHROPIC, "http://h/v1#frag", "http://h/v1/messages"},
        {AH_WIRE_ANTHROPIC, "http://h/x?q=1#frag", "http://h/x/v1/messages?q=1"},
        {AH_WIRE_RESPONSES, "https://h/v1?", "https://h/v1/responses"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        ah_client_config cc = {.wire = cases[i].wire, .base_url = cases[i].base, .model = "m"};
        ah_client *c = NULL;
        char err[128];
        assert_int_equal(ah_client_new(&cc, &c, err, sizeof err), AH_OK);
        assert_string_equal(ah_client_url(c), cases[i].want);
        ah_client_free(c);
    }
    /* the background URLs keep the request URL's query too, after their own path */
    char *u = ah_wire_reattach_url(AH_WIRE_RESPONSES, "http://h/v1/responses?api-version=1",
                                   "resp_1", 7);
    assert_string_equal(u, "http://h/v1/responses/resp_1?api-version=1&stream=true&"
                           "starting_after=7");
    free(u);
    u = ah_wire_cancel_url(AH_WIRE_RESPONSES, "http://h/v1/responses?api-version=1", "r");
    assert_string_equal(u, "http://h/v1/responses/r/cancel?api-version=1");
    free(u);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(registry_agrees_with_the_wire_map),
        cmocka_unit_test(every_table_is_complete),
        cmocka_unit_test(headers_come_from_the_table),
        cmocka_unit_test(drivers_follow_the_table),
        cmocka_unit_test(client_url_puts_the_path_before_the_query),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
