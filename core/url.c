/* url.c - building request URLs from a base URL: the one place that appends a path or
 * query parameters, so a base URL that carries a query ("https://h/openai?api-version=
 * 2024-10-21", Azure's form) keeps it after the path instead of getting the path glued
 * onto its query.
 *
 * Invariants: the path goes at the end of the base URL's path (before '?'), parameters
 * are added to its query with '&', a fragment is dropped (it is never sent anyway), and
 * the result is a fresh malloc'd string.
 */
#include "internal.h"

#include <stdlib.h>
#include <string.h>

size_t ah__url_path_end(const char *url)
{
    return strcspn(url, "?#");
}

char *ah__url_append(const char *url, const char *path, const char *query)
{
    size_t end = ah__url_path_end(url), base = end;
    /* "https://h/v1/" + "/x": one slash, not two (but never eat the "//" of "http://") */
    while (base > 0 && url[base - 1] == '/' && !(base >= 2 && url[base - 2] == ':'))
        base--;
    const char *q = url[end] == '?' ? url + end + 1 : "";
    size_t qlen = strcspn(q, "#");
    if (!path)
        path = "";
    if (!query)
        query = "";
    size_t plen = strlen(path), xlen = strlen(query);
    char *out = malloc(base + plen + 1 + qlen + 1 + xlen + 1);
    if (!out)
        return NULL;
    char *p = out;
    memcpy(p, url, base);
    p += base;
    memcpy(p, path, plen);
    p += plen;
    if (qlen || xlen)
        *p++ = '?';
    memcpy(p, q, qlen);
    p += qlen;
    if (qlen && xlen)
        *p++ = '&';
    memcpy(p, query, xlen);
    p += xlen;
    *p = '\0';
    return out;
}
