/* client_opts.c - what a client adds to every request as the official SDKs do: extra
 * headers (`anthropic-beta`, `OpenAI-Organization`, Azure's `api-key`), query parameters
 * (Azure's `api-version`), and the API key read from the provider's environment variable
 * when none is given. Checked once, when the client is built (docs/lua.md, "ah.client").
 *
 * Invariants:
 *   - a header name is an HTTP token and a value holds no CR, LF or other control byte
 *     but HTAB, so nothing given here can split a request's head;
 *   - the headers agenthost writes itself (Content-Type, Accept, Content-Length, Host,
 *     Transfer-Encoding, Connection, Expect) cannot be given; an authentication header
 *     (Authorization, x-api-key, api-key) can only stand instead of an API key, never
 *     beside one, and then no key is read from the environment;
 *   - a client aimed at a provider's public host (api.anthropic.com, api.openai.com, ...)
 *     has a key or an authentication header, or is not built: the error names the
 *     variable to set, before any request goes out;
 *   - every string is copied: the client owns it; no message quotes a header's value.
 */
#include "client_internal.h"
#include "internal.h"

#include <stdlib.h>
#include <string.h>
#include <strings.h>

static int is_tchar(unsigned char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
           (c != '\0' && strchr("!#$%&'*+-.^_`|~", c) != NULL);
}

int ah__header_is_auth(const char *name)
{
    return strcasecmp(name, "authorization") == 0 || strcasecmp(name, "x-api-key") == 0 ||
           strcasecmp(name, "api-key") == 0;
}

static int is_reserved(const char *name)
{
    static const char *const own[] = {"content-type",      "accept",     "content-length",
                                      "host",              "connection", "expect",
                                      "transfer-encoding", NULL};
    for (const char *const *o = own; *o; o++)
        if (strcasecmp(name, *o) == 0)
            return 1;
    return 0;
}

/* 0, or -1 with err set: the names and values of the headers. */
static int check_headers(const ah_header *h, size_t n, int has_key, char *err, size_t errsize)
{
    for (size_t i = 0; i < n; i++) {
        const char *name = h[i].name, *value = h[i].value;
        if (!name || !*name || !value) {
            ah__bufprintf(err, errsize, "client.headers: header %zu has no %s", i + 1,
                          !name || !*name ? "name" : "value");
            return -1;
        }
        for (const unsigned char *c = (const unsigned char *)name; *c; c++) {
            if (!is_tchar(*c)) {
                ah__bufprintf(err, errsize,
                              "client.headers: '%.60s' is not a header name (letters, "
                              "digits and !#$%%&'*+-.^_`|~ only)",
                              name);
                return -1;
            }
        }
        for (const unsigned char *c = (const unsigned char *)value; *c; c++) {
            if ((*c < 0x20 && *c != '\t') || *c == 0x7f) {
                ah__bufprintf(err, errsize,
                              "client.headers: the value of '%.60s' holds a control "
                              "character (CR, LF, ...): it could split the request",
                              name);
                return -1;
            }
        }
        if (is_reserved(name)) {
            ah__bufprintf(err, errsize,
                          "client.headers: '%.60s' is set by agenthost itself and cannot "
                          "be given",
                          name);
            return -1;
        }
        if (has_key && ah__header_is_auth(name)) {
            ah__bufprintf(err, errsize,
                          "client.headers: '%.60s' would authenticate beside api_key: give "
                          "the key or the header, not both",
                          name);
            return -1;
        }
        for (size_t j = 0; j < i; j++) {
            if (strcasecmp(h[j].name, name) == 0) {
                ah__bufprintf(err, errsize, "client.headers: '%.60s' is given twice", name);
                return -1;
            }
        }
    }
    return 0;
}

/* "a=b&c=d", each part percent-encoded (RFC 3986 unreserved kept). NULL when n is 0 or
 * out of memory (*nomem). */
static char *encode_query(const ah_header *q, size_t n, char *err, size_t errsize,
                          int *nomem)
{
    static const char hex[] = "0123456789ABCDEF";
    size_t total = 1;
    for (size_t i = 0; i < n; i++) {
        if (!q[i].name || !*q[i].name || !q[i].value) {
            ah__bufprintf(err, errsize, "client.query: parameter %zu has no %s", i + 1,
                          !q[i].name || !*q[i].name ? "name" : "value");
            return NULL;
        }
        total += 3 * (strlen(q[i].name) + strlen(q[i].value)) + 2;
    }
    if (n == 0)
        return NULL;
    char *out = malloc(total), *p = out;
    if (!out) {
        *nomem = 1;
        return NULL;
    }
    for (size_t i = 0; i < n; i++) {
        if (i)
            *p++ = '&';
        for (int part = 0; part < 2; part++) {
            if (part)
                *p++ = '=';
            const unsigned char *s =
                (const unsigned char *)(part ? q[i].value : q[i].name);
            for (; *s; s++) {
                if ((*s >= 'A' && *s <= 'Z') || (*s >= 'a' && *s <= 'z') ||
                    (*s >= '0' && *s <= '9') || *s == '-' || *s == '_' || *s == '.' ||
                    *s == '~') {
                    *p++ = (char)*s;
                } else {
                    *p++ = '%';
                    *p++ = hex[*s >> 4];
                    *p++ = hex[*s & 15];
                }
            }
        }
    }
    *p = '\0';
    return out;
}

/* The host of url, lower-cased into buf (no userinfo, no port). */
static void url_host(const char *url, char *buf, size_t size)
{
    const char *h = strstr(url, "://");
    h = h ? h + 3 : url;
    size_t n = strcspn(h, "/?#");
    const char *at = memchr(h, '@', n);
    if (at) {
        n -= (size_t)(at + 1 - h);
        h = at + 1;
    }
    size_t k = 0;
    for (; k < n && k + 1 < size && h[k] != ':'; k++)
        buf[k] = (char)(h[k] >= 'A' && h[k] <= 'Z' ? h[k] + 32 : h[k]);
    buf[k] = '\0';
}

/* Is url's host the public API host of a provider (its default base URL's)? */
static int is_public_host(const char *url)
{
    char host[256], pub[256];
    url_host(url, host, sizeof host);
    for (int w = 0; w < AH_WIRE_COUNT_; w++) {
        const char *b = ah_wire_base_url((ah_wire)w);
        if (!b)
            continue;
        url_host(b, pub, sizeof pub);
        if (strcmp(host, pub) == 0)
            return 1;
    }
    return 0;
}

int ah__client_opts_make(ah__client_opts *o, const ah_client_config *cfg,
                         const char *base_url, char *err, size_t errsize)
{
    memset(o, 0, sizeof *o);
    int given_key = cfg->api_key != NULL;
    if (check_headers(cfg->headers, cfg->headers ? cfg->n_headers : 0,
                      given_key && *cfg->api_key, err, errsize) != 0)
        return -1;
    size_t n = cfg->headers ? cfg->n_headers : 0, total = 0;
    for (size_t i = 0; i < n; i++) {
        total += strlen(cfg->headers[i].name) + strlen(cfg->headers[i].value) + 2;
        o->auth_header |= ah__header_is_auth(cfg->headers[i].name);
    }
    if (n) {
        o->headers = calloc(n, sizeof *o->headers);
        o->buf = malloc(total);
        if (!o->headers || !o->buf)
            goto nomem;
        char *p = o->buf;
        for (size_t i = 0; i < n; i++) {
            size_t nl = strlen(cfg->headers[i].name) + 1, vl = strlen(cfg->headers[i].value) + 1;
            memcpy(p, cfg->headers[i].name, nl);
            o->headers[i].name = p;
            p += nl;
            memcpy(p, cfg->headers[i].value, vl);
            o->headers[i].value = p;
            p += vl;
        }
        o->n_headers = n;
    }
    int nomem = 0;
    err[0] = '\0';
    o->query = encode_query(cfg->query, cfg->query ? cfg->n_query : 0, err, errsize, &nomem);
    if (nomem)
        goto nomem;
    if (!o->query && err[0]) {
        ah__client_opts_free(o);
        return -1;
    }
    /* The key: the one given ("" = none), else the provider's variable, as the SDKs
     * read it; an authentication header given instead is the authentication. */
    const char *key = cfg->api_key;
    const char *env = ah_wire_key_env(cfg->wire);
    if (!given_key && !o->auth_header && env) {
        key = getenv(env);
        o->key_from_env = key && *key;
    }
    if (key && *key && !(o->api_key = ah__strdup(key)))
        goto nomem;
    if (!o->api_key && !o->auth_header && is_public_host(base_url)) {
        char host[256];
        url_host(base_url, host, sizeof host);
        if (given_key)
            ah__bufprintf(err, errsize, "client.api_key is empty, and %s needs a key", host);
        else if (env)
            ah__bufprintf(err, errsize,
                          "client.api_key: no API key for %s: set %s (or pass api_key)", host,
                          env);
        else
            ah__bufprintf(err, errsize, "client.api_key: no API key for %s", host);
        ah__client_opts_free(o);
        return -1;
    }
    return 0;
nomem:
    ah__client_opts_free(o);
    ah__bufprintf(err, errsize, "client: out of memory");
    return -2;
}

void ah__client_opts_free(ah__client_opts *o)
{
    if (!o)
        return;
    free(o->headers);
    free(o->buf);
    free(o->query);
    if (o->api_key) {
        memset(o->api_key, 0, strlen(o->api_key));
        free(o->api_key);
    }
    memset(o, 0, sizeof *o);
}

ah_header *ah__client_request_headers(const ah_header *base, size_t n_base,
                                      const ah__client_opts *o, size_t *n_out)
{
    ah_header *out = malloc((n_base + o->n_headers + 1) * sizeof *out);
    if (!out)
        return NULL;
    size_t n = 0;
    for (size_t i = 0; i < n_base; i++) {
        int replaced = 0;
        for (size_t j = 0; j < o->n_headers && !replaced; j++)
            replaced = strcasecmp(base[i].name, o->headers[j].name) == 0;
        if (!replaced) /* a provider's fixed header (anthropic-version) given anew */
            out[n++] = base[i];
    }
    for (size_t j = 0; j < o->n_headers; j++)
        out[n++] = o->headers[j];
    *n_out = n;
    return out;
}
