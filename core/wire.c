/* wire.c - names and request paths of the wire formats, from AH_WIRE_MAP. */
#include "agenthost/wire.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const names[] = {
#define X(name, s, path) s,
    AH_WIRE_MAP(X)
#undef X
};
static const char *const paths[] = {
#define X(name, s, path) path,
    AH_WIRE_MAP(X)
#undef X
};

const char *ah_wire_name(ah_wire w)
{
    return (unsigned)w < (unsigned)AH_WIRE_COUNT_ ? names[w] : "unknown";
}

const char *ah_wire_path(ah_wire w)
{
    return (unsigned)w < (unsigned)AH_WIRE_COUNT_ ? paths[w] : "";
}

int ah_wire_from_name(const char *name)
{
    for (int i = 0; name && i < AH_WIRE_COUNT_; i++)
        if (strcmp(name, names[i]) == 0)
            return i;
    return -1;
}

int ah_wire_has_background(ah_wire w)
{
    return w == AH_WIRE_RESPONSES;
}

/* request_url + "/" + id (percent-encoded) + tail. */
static char *response_url(const char *request_url, const char *id, const char *tail)
{
    static const char hex[] = "0123456789ABCDEF";
    size_t base = strlen(request_url);
    while (base > 0 && request_url[base - 1] == '/')
        base--;
    size_t n = base + 1 + 3 * strlen(id) + strlen(tail) + 1;
    char *url = malloc(n);
    if (!url)
        return NULL;
    memcpy(url, request_url, base);
    char *p = url + base;
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
    return url;
}

char *ah_wire_reattach_url(ah_wire w, const char *request_url, const char *id,
                           int64_t after)
{
    if (!ah_wire_has_background(w) || !request_url || !id || !*id || after < 0)
        return NULL;
    char tail[64];
    snprintf(tail, sizeof tail, "?stream=true&starting_after=%lld", (long long)after);
    return response_url(request_url, id, tail);
}

char *ah_wire_cancel_url(ah_wire w, const char *request_url, const char *id)
{
    if (!ah_wire_has_background(w) || !request_url || !id || !*id)
        return NULL;
    return response_url(request_url, id, "/cancel");
}
