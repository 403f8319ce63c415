/* encode_util.h - helpers shared by the request-encoder tests (header-only, static
 * inline; included by one test file each): a path walker over the parsed body and checks
 * on what it finds, and encoding that must succeed or fail. */
#ifndef AH_TEST_ENCODE_UTIL_H
#define AH_TEST_ENCODE_UTIL_H

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "agenthost.h"

/* Walk a path like "messages[1].content[0].input.a" ([-1]: the last element); NULL when
 * any step is missing. */
static inline cJSON *jp(cJSON *root, const char *path)
{
    cJSON *cur = root;
    const char *p = path;
    while (cur && *p) {
        if (*p == '.') {
            p++;
            continue;
        }
        if (*p == '[') {
            int idx = atoi(p + 1);
            if (idx < 0 && cJSON_IsArray(cur))
                idx += cJSON_GetArraySize(cur);
            cur = cJSON_IsArray(cur) ? cJSON_GetArrayItem(cur, idx) : NULL;
            p = strchr(p, ']');
            if (!p)
                return NULL;
            p++;
            continue;
        }
        char key[64];
        size_t n = strcspn(p, ".[");
        if (n >= sizeof key)
            return NULL;
        memcpy(key, p, n);
        key[n] = '\0';
        cur = cJSON_IsObject(cur) ? cJSON_GetObjectItemCaseSensitive(cur, key) : NULL;
        p += n;
    }
    return cur;
}

static inline void check_str(cJSON *root, const char *path, const char *want)
{
    cJSON *v = jp(root, path);
    if (!cJSON_IsString(v))
        fail_msg("%s: not a string", path);
    if (strcmp(v->valuestring, want) != 0)
        fail_msg("%s: '%s' != '%s'", path, v->valuestring, want);
}

static inline void check_num(cJSON *root, const char *path, double want)
{
    cJSON *v = jp(root, path);
    if (!cJSON_IsNumber(v))
        fail_msg("%s: not a number", path);
    if (fabs(v->valuedouble - want) > 1e-9)
        fail_msg("%s: %g != %g", path, v->valuedouble, want);
}

static inline void check_bool(cJSON *root, const char *path, int want)
{
    cJSON *v = jp(root, path);
    if (!cJSON_IsBool(v))
        fail_msg("%s: not a boolean", path);
    if (cJSON_IsTrue(v) != want)
        fail_msg("%s: %d != %d", path, cJSON_IsTrue(v), want);
}

static inline void check_absent(cJSON *root, const char *path)
{
    if (jp(root, path))
        fail_msg("%s: present but must be absent", path);
}

static inline void check_size(cJSON *root, const char *path, int want)
{
    cJSON *v = jp(root, path);
    if (!cJSON_IsArray(v))
        fail_msg("%s: not an array", path);
    if (cJSON_GetArraySize(v) != want)
        fail_msg("%s: %d items, want %d", path, cJSON_GetArraySize(v), want);
}

/* Encode and parse back; the body must be unformatted JSON. *body_out (optional) keeps
 * the raw text for substring checks (free it). */
static inline cJSON *encode(ah_wire w, const ah_conversation *c, const ah_request_opts *o,
                            char **body_out)
{
    char *body = NULL;
    size_t len = 0;
    char err[256] = "";
    ah_status st = ah_request_encode(w, c, o, &body, &len, err, sizeof err);
    if (st != AH_OK)
        fail_msg("encode(%s) failed: %s: %s", ah_wire_name(w), ah_status_name(st), err);
    assert_int_equal(len, strlen(body));
    assert_null(strchr(body, '\n'));
    cJSON *root = cJSON_Parse(body);
    assert_non_null(root);
    if (body_out)
        *body_out = body;
    else
        free(body);
    return root;
}

/* Encoding must fail with st and an error message containing needle. */
static inline void encode_fails(ah_wire w, const ah_conversation *c,
                                const ah_request_opts *o, ah_status want, const char *needle)
{
    char *body = (char *)"sentinel";
    char err[256] = "";
    ah_status st = ah_request_encode(w, c, o, &body, NULL, err, sizeof err);
    if (st != want || !strstr(err, needle))
        fail_msg("%s: got %s '%s', want %s with '%s'", ah_wire_name(w),
                 ah_status_name(st), err, ah_status_name(want), needle);
    assert_null(body);
}

#endif
