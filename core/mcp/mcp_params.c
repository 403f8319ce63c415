/* mcp_params.c - tool parameters mirrored into HTTP headers (2026-07-28 streamable HTTP,
 * "Custom Headers from Tool Parameters"; docs/mcp.md): a property of a tool's inputSchema
 * annotated `"x-mcp-header": "Region"` travels also as `Mcp-Param-Region: <value>` on
 * each tools/call POST, so intermediaries can route on it without reading the body.
 *
 * Declarations are checked when the tool list is installed: the annotation must sit on a
 * property reached from the root through `properties` keys only (never under items,
 * oneOf, $ref, ...), be an RFC 9110 token, be unique ignoring case, and be on a
 * property typed string, integer or boolean. A tool that breaks any rule is left out of
 * the list (the spec's MUST), with the reason. No I/O here.
 */
#include "mcp_internal.h"

#include <ctype.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

enum { MAX_PARAM_HEADERS = 16 };

static int tchar(int c)
{
    return isalnum(c) || (c && strchr("!#$%&'*+-.^_`|~", c));
}

typedef struct walk {
    cJSON *decls; /* [ { "h": name, "p": [ key, ... ] }, ... ] */
    char *why;
    size_t whysize;
    int failed;
} walk;

/* keys whose values are data, not schemas */
static int data_key(const char *k)
{
    return k && (strcmp(k, "const") == 0 || strcmp(k, "enum") == 0 ||
                 strcmp(k, "default") == 0 || strcmp(k, "examples") == 0);
}

static void visit(walk *w, const cJSON *node, cJSON *path, int reachable)
{
    if (w->failed || !(cJSON_IsObject(node) || cJSON_IsArray(node)))
        return;
    if (cJSON_IsObject(node)) {
        const cJSON *h = cJSON_GetObjectItemCaseSensitive(node, "x-mcp-header");
        if (h) {
            int depth = cJSON_GetArraySize(path);
            const cJSON *ty = cJSON_GetObjectItemCaseSensitive(node, "type");
            const char *t = cJSON_IsString(ty) ? ty->valuestring : NULL;
            int ok_name = cJSON_IsString(h) && h->valuestring[0];
            for (const char *p = ok_name ? h->valuestring : ""; ok_name && *p; p++)
                ok_name = tchar((unsigned char)*p);
            if (!reachable || depth == 0) {
                ah__bufprintf(w->why, w->whysize,
                              "x-mcp-header is allowed only on a property reached through "
                              "'properties' keys (not under items, oneOf/anyOf/allOf/not, "
                              "if/then/else or $ref)");
                w->failed = 1;
                return;
            }
            if (!ok_name) {
                ah__bufprintf(w->why, w->whysize,
                              "x-mcp-header must be a non-empty HTTP token (RFC 9110)");
                w->failed = 1;
                return;
            }
            if (!t || (strcmp(t, "string") != 0 && strcmp(t, "integer") != 0 &&
                       strcmp(t, "boolean") != 0)) {
                ah__bufprintf(w->why, w->whysize,
                              "x-mcp-header '%.60s' is on a property of type %.20s (only "
                              "string, integer or boolean may be mirrored)",
                              h->valuestring, t ? t : "(none)");
                w->failed = 1;
                return;
            }
            const cJSON *d;
            cJSON_ArrayForEach(d, w->decls)
            {
                const cJSON *other = cJSON_GetObjectItemCaseSensitive(d, "h");
                if (strcasecmp(other->valuestring, h->valuestring) == 0) {
                    ah__bufprintf(w->why, w->whysize,
                                  "x-mcp-header '%.60s' is declared twice (names are "
                                  "compared ignoring case)",
                                  h->valuestring);
                    w->failed = 1;
                    return;
                }
            }
            if (cJSON_GetArraySize(w->decls) >= MAX_PARAM_HEADERS) {
                ah__bufprintf(w->why, w->whysize,
                              "more than %d x-mcp-header declarations", MAX_PARAM_HEADERS);
                w->failed = 1;
                return;
            }
            cJSON *e = cJSON_CreateObject();
            cJSON_AddItemToArray(w->decls, e);
            if (!e || !cJSON_AddStringToObject(e, "h", h->valuestring) ||
                !cJSON_AddItemToObject(e, "p", cJSON_Duplicate(path, 1))) {
                ah__bufprintf(w->why, w->whysize, "out of memory");
                w->failed = 1;
                return;
            }
        }
    }
    const cJSON *c;
    cJSON_ArrayForEach(c, node)
    {
        if (cJSON_IsObject(node) && data_key(c->string))
            continue;
        if (cJSON_IsObject(node) && c->string && strcmp(c->string, "properties") == 0 &&
            cJSON_IsObject(c)) {
            const cJSON *prop;
            cJSON_ArrayForEach(prop, c)
            {
                cJSON *key = cJSON_CreateString(prop->string);
                if (!key) {
                    w->failed = 1;
                    return;
                }
                cJSON_AddItemToArray(path, key);
                visit(w, prop, path, reachable);
                cJSON_DeleteItemFromArray(path, cJSON_GetArraySize(path) - 1);
                if (w->failed)
                    return;
            }
            continue;
        }
        visit(w, c, path, 0);
    }
}

int ah__mcp_param_decls(const cJSON *schema, cJSON **out, char *why, size_t whysize)
{
    *out = NULL;
    walk w = {cJSON_CreateArray(), why, whysize, 0};
    cJSON *path = cJSON_CreateArray();
    if (!w.decls || !path) {
        cJSON_Delete(w.decls);
        cJSON_Delete(path);
        ah__bufprintf(why, whysize, "out of memory");
        return -1;
    }
    visit(&w, schema, path, 1);
    cJSON_Delete(path);
    if (w.failed) {
        cJSON_Delete(w.decls);
        return -1;
    }
    if (cJSON_GetArraySize(w.decls) == 0)
        cJSON_Delete(w.decls);
    else
        *out = w.decls;
    return 0;
}

/* the argument at the declaration's path, or NULL */
static const cJSON *at_path(const cJSON *args, const cJSON *path)
{
    const cJSON *v = args, *k;
    cJSON_ArrayForEach(k, path)
    {
        if (!cJSON_IsObject(v))
            return NULL;
        v = cJSON_GetObjectItemCaseSensitive(v, k->valuestring);
    }
    return v;
}

size_t ah__mcp_param_headers(const cJSON *decls, const cJSON *args, char **names,
                             char **values, size_t max)
{
    size_t n = 0;
    const cJSON *d;
    cJSON_ArrayForEach(d, decls)
    {
        if (n >= max)
            break;
        const cJSON *h = cJSON_GetObjectItemCaseSensitive(d, "h");
        const cJSON *v = at_path(args, cJSON_GetObjectItemCaseSensitive(d, "p"));
        char num[64];
        const char *text = NULL;
        if (cJSON_IsString(v)) {
            text = v->valuestring;
        } else if (cJSON_IsBool(v)) {
            text = cJSON_IsTrue(v) ? "true" : "false";
        } else if (cJSON_IsNumber(v)) {
            double x = v->valuedouble;
            if (x == floor(x) && fabs(x) <= 9007199254740991.0)
                ah__bufprintf(num, sizeof num, "%.0f", x);
            else
                ah__bufprintf(num, sizeof num, "%.17g", x);
            text = num;
        }
        if (!text) /* absent, null, or not a primitive: no header */
            continue;
        size_t len = strlen(h->valuestring);
        char *name = malloc(len + 11);
        char *value = ah__mcp_header_value(text);
        if (!name || !value) {
            free(name);
            free(value);
            continue;
        }
        memcpy(name, "Mcp-Param-", 10);
        memcpy(name + 10, h->valuestring, len + 1);
        names[n] = name;
        values[n] = value;
        n++;
    }
    return n;
}
