/* fuzz_decode_tree_keys.c - libFuzzer target for the filtered-tree parser with the
 * proxy's key filters (ah__tree_parse_keys, core/decode_tree.c): the client's request
 * (core/proxy/splice.c, ah__px_request_parse) and the opening events' heads
 * (core/proxy/out_anthropic.c, out_openai.c). The filters are restated here (the proxy
 * is not linked into the fuzzers); keep them in step.
 *
 * The input is parsed by cJSON and by the tree parser with each filter. Invariants (a
 * violation traps): the tree parser gives a tree only when cJSON gives one; every member
 * the filter keeps is found in both or in neither, with the same type; a kept-whole
 * member is equal (in order, duplicates included); a filtered object's members are
 * compared again with its filter; a filtered array has the same size and its object
 * elements are compared.
 */
#include "decode_internal.h"

#include <cjson/cJSON.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define CHECK(c)                                                                         \
    do {                                                                                 \
        if (!(c))                                                                        \
            __builtin_trap();                                                            \
    } while (0)

/* splice.c req_keys */
static const ah__tree_key req_thinking[] = {AH__TK("type", AH__TK_DEEP, NULL),
                                            AH__TK_END};
static const ah__tree_key req_so[] = {AH__TK("include_usage", AH__TK_DEEP, NULL),
                                      AH__TK_END};
static const ah__tree_key req_keys[] = {
    AH__TK("model", AH__TK_DEEP, NULL),
    AH__TK("stream", AH__TK_DEEP, NULL),
    AH__TK("store", AH__TK_DEEP, NULL),
    AH__TK("background", AH__TK_DEEP, NULL),
    AH__TK("thinking", AH__TK_OBJ, req_thinking),
    AH__TK("stream_options", AH__TK_OBJ, req_so),
    AH__TK_END,
};
/* out_anthropic.c head_keys */
static const ah__tree_key a_usage[] = {AH__TK("service_tier", AH__TK_DEEP, NULL),
                                       AH__TK_END};
static const ah__tree_key a_message[] = {
    AH__TK("id", AH__TK_DEEP, NULL),
    AH__TK("model", AH__TK_DEEP, NULL),
    AH__TK("usage", AH__TK_OBJ, a_usage),
    AH__TK_END,
};
static const ah__tree_key a_keys[] = {
    AH__TK("type", AH__TK_DEEP, NULL),
    AH__TK("message", AH__TK_OBJ, a_message),
    AH__TK_END,
};
/* out_openai.c head_keys */
static const ah__tree_key c_none[] = {AH__TK_END};
static const ah__tree_key c_keys[] = {
    AH__TK("choices", AH__TK_EACH, c_none),
    AH__TK("error", AH__TK_DEEP, NULL),
    AH__TK("id", AH__TK_DEEP, NULL),
    AH__TK("model", AH__TK_DEEP, NULL),
    AH__TK("service_tier", AH__TK_DEEP, NULL),
    AH__TK("system_fingerprint", AH__TK_DEEP, NULL),
    AH__TK("created", AH__TK_DEEP, NULL),
    AH__TK_END,
};

static void same(const cJSON *c, const cJSON *t, int kind, const ah__tree_key *sub);

/* Equal in order, duplicate keys included (cJSON_Compare looks keys up, so it finds an
 * object with a duplicate key unequal even to itself). */
static int deep_eq(const cJSON *a, const cJSON *b)
{
    if ((a->type & 0xFF) != (b->type & 0xFF))
        return 0;
    if ((a->string == NULL) != (b->string == NULL) ||
        (a->string && strcmp(a->string, b->string) != 0))
        return 0;
    if (cJSON_IsString(a))
        return a->valuestring && b->valuestring &&
               strcmp(a->valuestring, b->valuestring) == 0;
    if (cJSON_IsNumber(a))
        return a->valueint == b->valueint && a->valuedouble == b->valuedouble;
    if (cJSON_IsArray(a) || cJSON_IsObject(a)) {
        const cJSON *x = a->child, *y = b->child;
        for (; x && y; x = x->next, y = y->next)
            if (!deep_eq(x, y))
                return 0;
        return !x && !y;
    }
    return 1;
}

/* Every key of the filter looked up in both objects. */
static void same_members(const cJSON *c, const cJSON *t, const ah__tree_key *keys)
{
    for (const ah__tree_key *k = keys; k->name; k++) {
        const cJSON *a = cJSON_GetObjectItemCaseSensitive(c, k->name);
        const cJSON *b = cJSON_GetObjectItemCaseSensitive(t, k->name);
        CHECK((a == NULL) == (b == NULL));
        if (a)
            same(a, b, k->kind, k->sub);
    }
}

static void same(const cJSON *c, const cJSON *t, int kind, const ah__tree_key *sub)
{
    CHECK((c->type & 0xFF) == (t->type & 0xFF));
    if (kind == AH__TK_OBJ && cJSON_IsObject(c)) {
        same_members(c, t, sub);
    } else if (kind == AH__TK_EACH && cJSON_IsArray(c)) {
        CHECK(cJSON_GetArraySize(c) == cJSON_GetArraySize(t));
        for (const cJSON *x = c->child, *y = t->child; x && y; x = x->next, y = y->next) {
            CHECK((x->type & 0xFF) == (y->type & 0xFF));
            if (cJSON_IsObject(x))
                same_members(x, y, sub);
            else
                CHECK(deep_eq(x, y));
        }
    } else {
        CHECK(deep_eq(c, t));
    }
}

static void check(const ah__tree_key *keys, int typed, const char *s, size_t n,
                  const cJSON *c)
{
    ah__tree_arena arena;
    ah__tree_arena_init(&arena);
    cJSON *t = ah__tree_parse_keys(keys, typed, &arena, s, n);
    if (t) {
        CHECK(c != NULL);
        CHECK(cJSON_IsObject(c) && cJSON_IsObject(t));
        same_members(c, t, keys);
        if (typed) {
            const char *type =
                cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(c, "type"));
            CHECK(type && strcmp(type, "error") != 0);
        }
    }
    ah__tree_arena_release(&arena);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *s = (const char *)data;
    cJSON *c = cJSON_ParseWithLength(s, size);
    check(req_keys, 0, s, size, c);
    check(a_keys, 1, s, size, c);
    check(c_keys, 0, s, size, c);
    cJSON_Delete(c);
    return 0;
}
