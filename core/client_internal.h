/* client_internal.h - a client's extra headers, query and API key (client_opts.c), for
 * the client's constructor and the worker that builds each request from it. */
#ifndef AH_CLIENT_INTERNAL_H
#define AH_CLIENT_INTERNAL_H

#include "agenthost/worker.h"

#include <stddef.h>

typedef struct ah__client_opts {
    ah_header *headers; /* the given headers, copied (strings in buf) */
    size_t n_headers;
    char *buf;
    char *query;   /* "a=b&c=d", percent-encoded, or NULL */
    char *api_key; /* the key given, else the environment's; NULL = none */
    int key_from_env;
    int auth_header; /* a given header authenticates (Authorization, x-api-key, api-key) */
} ah__client_opts;

/* Check and copy cfg's headers, query and key for a client of base_url (the URL it was
 * given, or the provider's). 0; -1 with err naming the field (a bad header, no key for
 * a public host); -2 out of memory. err must not be NULL. On failure *o owns nothing. */
int ah__client_opts_make(ah__client_opts *o, const ah_client_config *cfg,
                         const char *base_url, char *err, size_t errsize);
void ah__client_opts_free(ah__client_opts *o);

/* A request's headers: base (agenthost's own and the provider's) without those the
 * client's headers replace, then the client's. Borrows every string; free() the array.
 * NULL when out of memory. */
ah_header *ah__client_request_headers(const ah_header *base, size_t n_base,
                                      const ah__client_opts *o, size_t *n_out);

/* Authorization, x-api-key or api-key (any case). */
int ah__header_is_auth(const char *name);

#endif
