/* wire.c - the provider registry (one ops table per AH_WIRE_MAP line, see provider.h)
 * and the public wire functions, which read the tables and never branch on a format. */
#include "agenthost/wire.h"
#include "internal.h"
#include "provider.h"

#include <stdlib.h>
#include <string.h>

/* THE REGISTRY: one ops table per AH_WIRE_MAP line, in ah_wire order. */
static const ah__provider *const registry[] = {
#define X(name, s, path) &ah__provider_##name,
    AH_WIRE_MAP(X)
#undef X
};

const ah__provider *ah__provider_of(ah_wire w)
{
    return (unsigned)w < (unsigned)AH_WIRE_COUNT_ ? registry[w] : NULL;
}

const char *ah_wire_name(ah_wire w)
{
    const ah__provider *p = ah__provider_of(w);
    return p ? p->name : "unknown";
}

const char *ah_wire_path(ah_wire w)
{
    const ah__provider *p = ah__provider_of(w);
    return p ? p->path : "";
}

const char *ah_wire_base_url(ah_wire w)
{
    const ah__provider *p = ah__provider_of(w);
    return p ? p->base_url : NULL;
}

const char *ah_wire_key_env(ah_wire w)
{
    const ah__provider *p = ah__provider_of(w);
    return p ? p->key_env : NULL;
}

int ah_wire_from_name(const char *name)
{
    for (int i = 0; name && i < AH_WIRE_COUNT_; i++)
        if (strcmp(name, registry[i]->name) == 0)
            return i;
    return -1;
}

int ah_wire_has_background(ah_wire w)
{
    const ah__provider *p = ah__provider_of(w);
    return p && p->reattach_url != NULL;
}

/* s percent-encoded but for the unreserved characters (RFC 3986 section 2.3) into p,
 * which has room for 3 * strlen(s) + 1; returns the end. */
static char *pct_encode(char *p, const char *s)
{
    static const char hex[] = "0123456789ABCDEF";
    for (const unsigned char *c = (const unsigned char *)s; *c; c++) {
        if ((*c >= 'A' && *c <= 'Z') || (*c >= 'a' && *c <= 'z') || (*c >= '0' && *c <= '9') ||
            *c == '-' || *c == '_' || *c == '.' || *c == '~') {
            *p++ = (char)*c;
        } else {
            *p++ = '%';
            *p++ = hex[*c >> 4];
            *p++ = hex[*c & 15];
        }
    }
    *p = '\0';
    return p;
}

char *ah__wire_request_path(int wire, const char *model)
{
    const ah__provider *p = ah__provider_of((ah_wire)wire);
    const char *path = p ? p->path : "";
    const char *at = strstr(path, "{model}");
    if (!model)
        model = "";
    size_t n = strlen(path) + 3 * strlen(model) + 1;
    char *out = malloc(n);
    if (!out)
        return NULL;
    if (!at) {
        memcpy(out, path, strlen(path) + 1);
        return out;
    }
    memcpy(out, path, (size_t)(at - path));
    char *e = pct_encode(out + (at - path), model);
    strcpy(e, at + 7);
    return out;
}

char *ah__wire_request_query(int wire, const char *query)
{
    const ah__provider *p = ah__provider_of((ah_wire)wire);
    const char *own = p && p->query ? p->query : "";
    if (!query)
        query = "";
    size_t a = strlen(own), b = strlen(query);
    char *out = malloc(a + 1 + b + 1);
    if (!out)
        return NULL;
    memcpy(out, own, a);
    if (a && b)
        out[a++] = '&';
    memcpy(out + a, query, b + 1);
    return out;
}

/* request_url's path + "/" + id (percent-encoded) + tail, its query + query. */
char *ah__response_url(const char *request_url, const char *id, const char *tail,
                       const char *query)
{
    size_t n = 1 + 3 * strlen(id) + strlen(tail) + 1;
    char *seg = malloc(n);
    if (!seg)
        return NULL;
    char *p = seg;
    *p++ = '/';
    p = pct_encode(p, id);
    strcpy(p, tail);
    char *url = ah__url_append(request_url, seg, query);
    free(seg);
    return url;
}

char *ah_wire_reattach_url(ah_wire w, const char *request_url, const char *id,
                           int64_t after)
{
    const ah__provider *p = ah__provider_of(w);
    if (!p || !p->reattach_url || !request_url || !id || !*id || after < 0)
        return NULL;
    return p->reattach_url(request_url, id, after);
}

char *ah_wire_cancel_url(ah_wire w, const char *request_url, const char *id)
{
    const ah__provider *p = ah__provider_of(w);
    if (!p || !p->cancel_url || !request_url || !id || !*id)
        return NULL;
    return p->cancel_url(request_url, id);
}
