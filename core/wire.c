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

/* request_url's path + "/" + id (percent-encoded) + tail, its query + query. */
char *ah__response_url(const char *request_url, const char *id, const char *tail,
                       const char *query)
{
    static const char hex[] = "0123456789ABCDEF";
    size_t n = 1 + 3 * strlen(id) + strlen(tail) + 1;
    char *seg = malloc(n);
    if (!seg)
        return NULL;
    char *p = seg;
    *p++ = '/';
    for (const unsigned char *s = (const unsigned char *)id; *s; s++) {
        if ((*s >= 'A' && *s <= 'Z') || (*s >= 'a' && *s <= 'z') || (*s >= '0' && *s <= '9') ||
            *s == '-' || *s == '_' || *s == '.' || *s == '~') {
            *p++ = (char)*s;
        } else {
            *p++ = '%';
            *p++ = hex[*s >> 4];
            *p++ = hex[*s & 15];
        }
    }
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
