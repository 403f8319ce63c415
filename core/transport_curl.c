/* transport_curl.c - the libcurl transport: one easy handle per HTTP attempt (taken from
 * the loop's pool of handles, given back when the attempt ends: reset, or with a plain
 * request's options kept for the next plain one, see curl_start), driven by
 * the loop's multi handle, reporting head, body and a classified completion (docs/errors.md).
 *
 * Invariants:
 *   - The head (status + headers) reaches the sink once, when the blank line ending the
 *     final (non-1xx) header block arrives, and always before the first body byte.
 *   - libcurl's own retry-ish behaviour stays off: no redirects, no 100-continue, and
 * only http/https. TLS peer and host verification stay on. libcurl silently resends a
 * request whose reused keep-alive connection died before any response byte ("Connection
 * died, retrying a fresh connect"), which would be a second request the retry policy
 * never counted (the core's loop is the one retry owner). The body is given
 * with CURLOPT_POSTFIELDS, so headers and body leave in one write (a read callback sent
 * them in two), and a CURLOPT_PREREQFUNCTION refuses any second send of the same
 * attempt: the resend fails at once and the core decides whether to retry.
 *   - After abort() or on_done() the attempt is gone; no sink call follows either.
 *   - Errors name the curl failure only; never the request's headers or body.
 */
#include "internal.h"
#include "loop_curl.h"

#include "agenthost/transport.h"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

enum {
    HEAD_MAX = 256 * 1024, /* raw bytes of response header lines kept; the rest dropped */
    HEADERS_MAX = 256,     /* header fields kept */
    RECV_BUFFER = 60 * 1024 /* see set_fixed_options */
};

/* What a pooled handle kept (ah__loop_easy_give's keep): a plain request's options, and
 * whether they include a CA file or directory (set again by every request that has one;
 * a request without one needs a reset handle, libcurl's default CAs back). */
enum { KEPT_PLAIN = 1, KEPT_CAINFO = 2, KEPT_CAPATH = 4 };

typedef struct attempt {
    ah__easy_link link; /* first: the loop finds us through CURLOPT_PRIVATE */
    ah_loop *loop;
    CURL *easy;
    struct curl_slist *req_headers; /* one malloc block, see build_req_headers */
    ah_transport_sink sink;
    void *ud;
    int head_done;
    int sink_abort; /* the sink returned nonzero */
    int sends;          /* times libcurl was about to send the request (on_prereq) */
    int local_port;     /* of the connection the request went out on */
    int resend_refused; /* on_prereq refused a second send */
    int status;
    /* A plain request's options (KEPT_* bits, see curl_start), and whether the transfer
     * ended cleanly (on_done): then the handle goes back to the pool with them kept. */
    int plain, clean_end;
    const char *url; /* borrowed from the request, like the body */
    /* The request body, borrowed from the request (the caller keeps it alive until the
     * attempt ends). */
    const char *body;
    size_t body_len;
    /* The current header block: "name\0value\0" pairs in hbuf, offsets in hoff. */
    char *hbuf;
    size_t hlen, hcap;
    size_t (*hoff)[2]; /* grown as fields arrive (a head has ~10; 4 KiB inline was most
                          of an idle attempt), at most HEADERS_MAX */
    size_t nh, hoff_cap;
    char errbuf[CURL_ERROR_SIZE];
} attempt;

static void attempt_release(void *ud)
{
    attempt *a = ud;
    if (!a)
        return;
    /* out of the multi handle by now */
    ah__loop_easy_give(a->loop, a->easy, a->clean_end ? a->plain : 0);
    free(a->req_headers); /* one block: build_req_headers */
    free(a->hbuf);
    free(a->hoff);
    free(a);
}

/* ---- the response head ----------------------------------------------------------- */

static int hbuf_append(attempt *a, const char *s, size_t n)
{
    if (a->hlen + n + 1 > HEAD_MAX)
        return -1;
    if (a->hlen + n + 1 > a->hcap) {
        size_t cap = a->hcap ? a->hcap : 1024;
        while (cap < a->hlen + n + 1)
            cap *= 2;
        char *p = realloc(a->hbuf, cap);
        if (!p)
            return -1;
        a->hbuf = p;
        a->hcap = cap;
    }
    memcpy(a->hbuf + a->hlen, s, n);
    a->hbuf[a->hlen + n] = '\0';
    a->hlen += n + 1;
    return 0;
}

static void store_header(attempt *a, const char *line, size_t len)
{
    const char *colon = memchr(line, ':', len);
    if (!colon || colon == line || a->nh == HEADERS_MAX)
        return;
    size_t nlen = (size_t)(colon - line);
    const char *v = colon + 1, *end = line + len;
    while (v < end && (*v == ' ' || *v == '\t'))
        v++;
    while (end > v && (end[-1] == ' ' || end[-1] == '\t'))
        end--;
    if (a->nh == a->hoff_cap) {
        size_t cap = a->hoff_cap ? a->hoff_cap * 2 : 16;
        void *np = realloc(a->hoff, cap * sizeof *a->hoff);
        if (!np)
            return; /* this field is dropped, the head still arrives */
        a->hoff = np;
        a->hoff_cap = cap;
    }
    size_t save = a->hlen;
    if (hbuf_append(a, line, nlen) != 0 || hbuf_append(a, v, (size_t)(end - v)) != 0) {
        a->hlen = save; /* over the cap: this field is dropped, the head still arrives */
        return;
    }
    a->hoff[a->nh][0] = save;
    a->hoff[a->nh][1] = save + nlen + 1;
    a->nh++;
}

/* Acknowledge the head at once instead of after the delayed-ACK timer (40 ms on
 * Linux). A server that writes its head and its body in two writes with Nagle on (the
 * usual Python http.server handler, some proxies) holds the body until the head is
 * acknowledged: on a reused connection every response then waited ~44 ms. Setting
 * TCP_QUICKACK sends the pending ACK now. Elsewhere a no-op. */
static void ack_now(attempt *a)
{
#ifdef TCP_QUICKACK
    curl_socket_t fd = ah__loop_sock_by_port(a->loop, a->local_port);
    if (fd != CURL_SOCKET_BAD) {
        int one = 1;
        (void)setsockopt(fd, IPPROTO_TCP, TCP_QUICKACK, &one, sizeof one);
    }
#else
    (void)a;
#endif
}

/* Deliver the head to the sink. Returns nonzero if the sink asked to abort. */
static int deliver_head(attempt *a)
{
    ack_now(a);
    long code = 0;
    curl_easy_getinfo(a->easy, CURLINFO_RESPONSE_CODE, &code);
    a->status = (int)code;
    a->head_done = 1;
    if (!a->sink.on_head)
        return 0;
    ah_header h[HEADERS_MAX];
    for (size_t i = 0; i < a->nh; i++) {
        h[i].name = a->hbuf + a->hoff[i][0];
        h[i].value = a->hbuf + a->hoff[i][1];
    }
    if (a->sink.on_head(a->ud, a->status, h, a->nh) != 0) {
        a->sink_abort = 1;
        return 1;
    }
    return 0;
}

static size_t on_header(char *buf, size_t size, size_t nitems, void *ud)
{
    attempt *a = ud;
    size_t total = size * nitems, len = total;
    if (a->head_done)
        return total; /* trailers: not part of the head we report */
    while (len > 0 && (buf[len - 1] == '\n' || buf[len - 1] == '\r'))
        len--;
    if (len == 0) {
        long code = 0;
        curl_easy_getinfo(a->easy, CURLINFO_RESPONSE_CODE, &code);
        if (code >= 100 && code < 200) { /* an interim response: the real head follows */
            a->hlen = a->nh = 0;
            return total;
        }
        return deliver_head(a) ? 0 : total;
    }
    if (len >= 5 && memcmp(buf, "HTTP/", 5) == 0) {
        a->hlen = a->nh = 0; /* a new status line starts a new header block */
        return total;
    }
    if (buf[0] != ' ' && buf[0] != '\t') /* obsolete line folding is ignored */
        store_header(a, buf, len);
    return total;
}

/* Called by libcurl before the request goes out on a connection. A second call for the
 * same attempt is libcurl's silent resend on a fresh connection after a reused one died
 * before any response byte (see the top): refused here, so the attempt fails and the
 * core's retry policy decides, and counts, whether the request is sent again. */
static int on_prereq(void *ud, char *conn_primary_ip, char *conn_local_ip,
                     int conn_primary_port, int conn_local_port)
{
    (void)conn_primary_ip, (void)conn_local_ip, (void)conn_primary_port,
        (void)conn_local_port;
    attempt *a = ud;
    a->local_port = conn_local_port;
    if (a->sends++ > 0) {
        a->resend_refused = 1;
        return CURL_PREREQFUNC_ABORT;
    }
    if (a->sink.on_sent)
        a->sink.on_sent(a->ud);
    return CURL_PREREQFUNC_OK;
}

static size_t on_write(char *buf, size_t size, size_t nitems, void *ud)
{
    attempt *a = ud;
    size_t total = size * nitems;
    if (!a->head_done && deliver_head(a))
        return 0;
    if (total == 0 || !a->sink.on_body)
        return total;
    if (a->sink.on_body(a->ud, buf, total) != 0) {
        a->sink_abort = 1;
        return 0; /* curl ends the transfer with CURLE_WRITE_ERROR */
    }
    return total;
}

/* ---- -v: the heads as curl -v shows them (AH_LOG_HTTP_HEAD) ------------------------ */

static int is_secret_name(const char *line, size_t n)
{
    static const char *const names[] = {"authorization", "proxy-authorization", "x-api-key",
                                        "api-key",       "x-goog-api-key",      "cookie",
                                        "set-cookie",    NULL};
    for (const char *const *s = names; *s; s++) {
        size_t k = strlen(*s);
        if (n == k && strncasecmp(line, *s, k) == 0)
            return 1;
    }
    return 0;
}

/* One head line to the log: "> " sent, "< " received; a secret header's value masked,
 * then anything key-like in the rest (a key= in the request line's query). */
static void log_head_line(char dir, const char *s, size_t n)
{
    char line[1024];
    if (n > sizeof line - 32)
        n = sizeof line - 32; /* a huge header: its start says enough */
    const char *colon = memchr(s, ':', n);
    if (colon && is_secret_name(s, (size_t)(colon - s)))
        ah__bufprintf(line, sizeof line, "%c %.*s: " AH_REDACTED, dir, (int)(colon - s), s);
    else
        ah__bufprintf(line, sizeof line, "%c %.*s", dir, (int)n, s);
    ah_redact(line, sizeof line, NULL);
    ah__log_event(AH_LOG_DEBUG, AH_LOG_HTTP_HEAD, "%s", line);
}

static int on_debug(CURL *e, curl_infotype type, char *data, size_t size, void *ud)
{
    (void)e;
    (void)ud;
    if (type != CURLINFO_HEADER_OUT && type != CURLINFO_HEADER_IN)
        return 0; /* never the bodies (DATA_*, SSL_DATA_*), nor curl's own chatter */
    char dir = type == CURLINFO_HEADER_OUT ? '>' : '<';
    while (size > 0) {
        const char *nl = memchr(data, '\n', size);
        size_t len = nl ? (size_t)(nl - data) : size, next = nl ? len + 1 : len;
        size_t n = len;
        while (n > 0 && data[n - 1] == '\r')
            n--;
        if (n > 0)
            log_head_line(dir, data, n);
        data += next;
        size -= next;
    }
    return 0;
}

/* ---- completion ------------------------------------------------------------------ */

static int is_connect_failure(CURLcode rc)
{
    switch (rc) {
    case CURLE_COULDNT_CONNECT:
    case CURLE_COULDNT_RESOLVE_HOST:
    case CURLE_COULDNT_RESOLVE_PROXY:
    case CURLE_SSL_CONNECT_ERROR:
    case CURLE_PROXY:
        return 1;
    default:
        return 0;
    }
}

/* TLS failures a retry cannot fix: the peer's certificate does not verify (unknown CA,
 * expired, wrong host name), the CA bundle cannot be read, a pinned key or the
 * certificate status does not match, no usable cipher. A handshake cut half-way
 * (CURLE_SSL_CONNECT_ERROR) stays a connect error: that one can be transient. */
static int is_certificate_failure(CURLcode rc)
{
    switch (rc) {
    case CURLE_PEER_FAILED_VERIFICATION:
    case CURLE_SSL_CERTPROBLEM:
    case CURLE_SSL_CIPHER:
    case CURLE_SSL_CACERT_BADFILE:
    case CURLE_SSL_ISSUER_ERROR:
    case CURLE_SSL_PINNEDPUBKEYNOTMATCH:
    case CURLE_SSL_INVALIDCERTSTATUS:
        return 1;
    default:
        return 0;
    }
}

/* ---- the proxy a URL goes through (for messages) -------------------------------- */

/* Whether host matches one entry of a no_proxy list (libcurl's rules, simplified: "*"
 * matches every host; an entry matches the same name or a name ending in "." + entry;
 * a leading dot in the entry is ignored; names compare case-insensitively). */
static int no_proxy_matches(const char *list, const char *host, size_t hlen)
{
    const char *p = list;
    while (*p) {
        p += strspn(p, ", \t");
        size_t n = strcspn(p, ", \t");
        const char *e = p;
        p += n;
        if (n == 1 && e[0] == '*')
            return 1;
        if (n > 0 && e[0] == '.') {
            e++;
            n--;
        }
        if (n == 0 || n > hlen)
            continue;
        if (strncasecmp(host + hlen - n, e, n) == 0 &&
            (n == hlen || host[hlen - n - 1] == '.'))
            return 1;
    }
    return 0;
}

/* The proxy libcurl takes for url from the environment (<scheme>_proxy, HTTPS_PROXY,
 * all_proxy / ALL_PROXY, unless no_proxy / NO_PROXY names the host): its variable's
 * name in *var and its host[:port] (no scheme, no credentials) in buf. 0 when none. */
static int proxy_for(const char *url, const char **var, char *buf, size_t size)
{
    int https = strncasecmp(url, "https://", 8) == 0;
    const char *host = strstr(url, "://");
    if (!host)
        return 0;
    host += 3;
    size_t hlen = strcspn(host, "/?#");
    const char *at = memchr(host, '@', hlen);
    if (at) {
        hlen -= (size_t)(at + 1 - host);
        host = at + 1;
    }
    if (hlen > 0 && host[0] == '[') { /* [v6]:port */
        const char *close = memchr(host, ']', hlen);
        hlen = close ? (size_t)(close - host) + 1 : hlen;
    } else {
        const char *colon = memchr(host, ':', hlen);
        if (colon)
            hlen = (size_t)(colon - host);
    }
    const char *np = getenv("no_proxy");
    if (!np || !*np)
        np = getenv("NO_PROXY");
    if (np && no_proxy_matches(np, host, hlen))
        return 0;
    /* libcurl reads http_proxy in lower case only (HTTP_PROXY may be set by a CGI
     * request's Proxy header); the others in either case */
    static const char *const http_vars[] = {"http_proxy", "all_proxy", "ALL_PROXY"};
    static const char *const https_vars[] = {"https_proxy", "HTTPS_PROXY", "all_proxy",
                                             "ALL_PROXY"};
    const char *const *vars = https ? https_vars : http_vars;
    size_t nv = https ? 4 : 3;
    for (size_t i = 0; i < nv; i++) {
        const char *v = getenv(vars[i]);
        if (!v || !*v)
            continue;
        const char *h = strstr(v, "://");
        h = h ? h + 3 : v;
        size_t n = strcspn(h, "/?#");
        const char *a = memchr(h, '@', n);
        if (a) {
            n -= (size_t)(a + 1 - h);
            h = a + 1;
        }
        *var = vars[i];
        ah__bufprintf(buf, size, "%.*s", (int)(n > 200 ? 200 : n), h);
        return 1;
    }
    return 0;
}

/* Map a curl result to the error kinds of docs/errors.md. A failure after the head was delivered
 * is always `stream`: the response had started, so it is never resent as is. */
static void classify(const attempt *a, CURLcode rc, ah_error *err)
{
    ah_error_clear(err);
    if (rc == CURLE_OK)
        return;
    const char *detail = a->errbuf[0] ? a->errbuf : curl_easy_strerror(rc);
    if (a->resend_refused && !a->head_done) {
        /* libcurl wanted to resend on a fresh connection (see the top); the request may
         * have reached the server, so the retry policy decides, and counts it. */
        ah_error_set(err, AH_EK_CONNECT, 0,
                     "connection lost before the response (a reused connection closed)");
    } else if (a->sink_abort || rc == CURLE_ABORTED_BY_CALLBACK) {
        ah_error_set(err, AH_EK_CANCELLED, 0, "attempt aborted by its consumer");
    } else if (rc == CURLE_URL_MALFORMAT || rc == CURLE_UNSUPPORTED_PROTOCOL) {
        ah_error_set(err, AH_EK_CONNECT, 0, "cannot start the request: %s", detail);
        err->should_retry = 0; /* a bad URL stays bad: explicit "do not retry" */
    } else if (a->head_done) {
        ah_error_set(err, AH_EK_STREAM, 0, "response stream broken: %s", detail);
    } else if (rc == CURLE_SEND_FAIL_REWIND) {
        /* libcurl wanted to resend on a fresh connection (see the top); the request may
         * have reached the server, so the retry policy decides, and counts it. */
        ah_error_set(err, AH_EK_CONNECT, 0,
                     "connection lost before the response (a reused connection closed)");
    } else if (is_certificate_failure(rc)) {
        /* The same certificate fails the same way on every attempt: not retried. */
        ah_error_set(err, AH_EK_CONNECT, 0,
                     "TLS: %s (a certificate failure is not retried; for a private CA "
                     "set the client's ca_file or ca_path, or SSL_CERT_FILE)",
                     detail);
        err->should_retry = 0;
    } else {
        if (rc == CURLE_OPERATION_TIMEDOUT)
            ah_error_set(err, AH_EK_TIMEOUT, 0, "timed out before the response: %s", detail);
        else if (is_connect_failure(rc))
            ah_error_set(err, AH_EK_CONNECT, 0, "connection failed: %s", detail);
        else
            /* Reset, closed or garbled before any response head: the request may not
             * have reached the server's application; treat it as a failed connection. */
            ah_error_set(err, AH_EK_CONNECT, 0, "connection lost before the response: %s",
                         detail);
        /* Through a proxy, libcurl's message names only an address: say it was the
         * proxy's, so nobody hunts for a provider outage. */
        const char *var = NULL;
        char proxy[256];
        if (a->url && !strstr(detail, "proxy") && proxy_for(a->url, &var, proxy, sizeof proxy)) {
            size_t len = strlen(err->message);
            ah__bufprintf(err->message + len, sizeof err->message - len,
                          " (through the proxy %s, from $%s)", proxy,
                          var);
            ah_redact(err->message, sizeof err->message, NULL);
        }
    }
}

static void on_done(void *ud, CURLcode rc)
{
    attempt *a = ud;
    ah_error err;
    /* A body-less response still has a head; make sure the sink saw it. */
    if (rc == CURLE_OK && !a->head_done && deliver_head(a))
        rc = CURLE_WRITE_ERROR;
    /* A transfer that resent (refused by on_prereq) or failed leaves libcurl state a
     * reset clears (its retry count among it): its handle is reset. */
    a->clean_end = rc == CURLE_OK && a->sends <= 1 && !a->resend_refused && !a->sink_abort;
    classify(a, rc, &err);
    ah_transport_sink sink = a->sink;
    void *sud = a->ud;
    attempt_release(a); /* gone before the sink runs: it may start the next attempt */
    if (sink.on_done)
        sink.on_done(sud, &err);
}

/* ---- start / abort --------------------------------------------------------------- */

static int header_is_safe(const ah_header *h)
{
    if (!h->name || !h->value || !h->name[0])
        return 0;
    for (const char *p = h->name; *p; p++)
        if (*p == ':' || *p == '\r' || *p == '\n' || *p == ' ')
            return 0;
    return strpbrk(h->value, "\r\n") == NULL;
}

/* The request's header lines and their list nodes in one block (a->req_headers points
 * at its start, freed with it): libcurl only reads a CURLOPT_HTTPHEADER list, which is
 * any chain of the public struct curl_slist, so one malloc replaces curl_slist_append's
 * two per line and the formatting of each line. "Expect:" (empty) ends the list: it
 * suppresses 100-continue, so the body goes out at once. Every header passed
 * header_is_safe. */
static ah_status build_req_headers(attempt *a, const ah_http_request *req)
{
    static const char expect[] = "Expect:";
    size_t n = req->n_headers, size = (n + 1) * sizeof(struct curl_slist) + sizeof expect;
    for (size_t i = 0; i < n; i++)
        size += strlen(req->headers[i].name) + strlen(req->headers[i].value) + 3;
    struct curl_slist *nodes = malloc(size);
    if (!nodes)
        return AH_ERR_NOMEM;
    char *p = (char *)(nodes + n + 1);
    for (size_t i = 0; i < n; i++) {
        const ah_header *h = &req->headers[i];
        size_t nl = strlen(h->name), vl = strlen(h->value);
        nodes[i].data = p;
        nodes[i].next = &nodes[i + 1];
        memcpy(p, h->name, nl);
        p += nl;
        /* curl sends "Name;" as a header with an empty value ("Name:" would remove it). */
        if (vl == 0) {
            *p++ = ';';
        } else {
            *p++ = ':';
            *p++ = ' ';
            memcpy(p, h->value, vl);
            p += vl;
        }
        *p++ = '\0';
    }
    nodes[n].data = p;
    nodes[n].next = NULL;
    memcpy(p, expect, sizeof expect);
    a->req_headers = nodes;
    return AH_OK;
}

/* The options that are the same for every request of its kind (method, debug log), on a
 * reset handle; curl_start sets the per-request ones (URL, CAs, headers, body, the
 * attempt's pointers). A plain request's handle keeps these (see curl_start). */
static void set_fixed_options(CURL *e, const char *method, int debug)
{
    curl_easy_setopt(e, CURLOPT_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(e, CURLOPT_HTTP_VERSION, (long)CURL_HTTP_VERSION_2TLS);
    curl_easy_setopt(e, CURLOPT_SSL_VERIFYPEER, 1L);
    curl_easy_setopt(e, CURLOPT_SSL_VERIFYHOST, 2L);
    curl_easy_setopt(e, CURLOPT_FOLLOWLOCATION, 0L);
    curl_easy_setopt(e, CURLOPT_SUPPRESS_CONNECT_HEADERS, 1L);
    curl_easy_setopt(e, CURLOPT_TCP_KEEPALIVE, 1L);
    /* libcurl allocates its receive buffer when a transfer starts and frees it when the
     * transfer ends (7.88 lib/multi.c: Curl_preconnect, multi_done), whatever the easy
     * handle's reuse. 60 KiB stays below the 64 KiB mmap threshold the agenthost
     * program sets (lua/main.c): the buffer comes from the heap, not an mmap and
     * munmap per request. */
    curl_easy_setopt(e, CURLOPT_BUFFERSIZE, (long)RECV_BUFFER);
    /* Every encoding this libcurl decodes (gzip, deflate, br, zstd as built) is offered
     * and decoded before the sink, as the official SDKs do (httpx, fetch): a gateway
     * that compresses the event stream anyway is then read, not taken for a cut. One
     * that sends an encoding libcurl does not know fails with libcurl's message naming
     * it ("Unrecognized content encoding type"). */
    curl_easy_setopt(e, CURLOPT_ACCEPT_ENCODING, "");
    if (strcmp(method, "POST") == 0) {
        curl_easy_setopt(e, CURLOPT_POST, 1L);
    } else if (strcmp(method, "GET") == 0) {
        curl_easy_setopt(e, CURLOPT_HTTPGET, 1L);
    } else {
        curl_easy_setopt(e, CURLOPT_CUSTOMREQUEST, method);
    }
    curl_easy_setopt(e, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, on_write);
    curl_easy_setopt(e, CURLOPT_PREREQFUNCTION, on_prereq);
    if (debug) {
        /* the function first: VERBOSE without one would print to stderr itself */
        curl_easy_setopt(e, CURLOPT_DEBUGFUNCTION, on_debug);
        curl_easy_setopt(e, CURLOPT_VERBOSE, 1L);
    }
}

static ah_status curl_start(void *self, ah_loop *loop, const ah_http_request *req,
                            const ah_transport_sink *sink, void *sink_ud, void **out,
                            ah_error *err)
{
    (void)self;
    ah_status st = AH_ERR_NOMEM;
    ah_error_clear(err);
    *out = NULL;
    if (!loop || !req || !req->url || !sink) {
        ah_error_set(err, AH_EK_CONNECT, 0, "invalid request: no URL");
        err->should_retry = 0;
        return AH_ERR_INVALID;
    }
    attempt *a = calloc(1, sizeof *a);
    if (!a)
        goto fail;
    a->link.done = on_done;
    a->link.ud = a;
    a->loop = loop;
    a->sink = *sink;
    a->ud = sink_ud;
    int kept = 0;
    a->easy = ah__loop_easy_take(loop, &kept);
    if (!a->easy)
        goto fail;

    for (size_t i = 0; i < req->n_headers; i++) {
        if (!header_is_safe(&req->headers[i])) {
            /* The name only: a value may be a secret. */
            ah_error_set(err, AH_EK_CONNECT, 0, "invalid request header %zu (%s)", i,
                         req->headers[i].name ? req->headers[i].name : "(null)");
            err->should_retry = 0;
            st = AH_ERR_INVALID;
            goto fail;
        }
    }
    if (build_req_headers(a, req) != AH_OK)
        goto fail;

    CURL *e = a->easy;
    const char *method = req->method ? req->method : "POST";
    int debug = ah__log_enabled(AH_LOG_DEBUG);
    /* A plain request (a POST without the debug log) sets the same options as every
     * other plain one but for the per-request ones and its CAs: a handle the last plain
     * request kept (ah__loop_easy_give) has the rest already. Any other request, or one
     * without the CA option a kept handle has, starts from a reset handle and sets them
     * all. */
    a->plain = strcmp(method, "POST") == 0 && !debug
                   ? KEPT_PLAIN | (req->ca_file ? KEPT_CAINFO : 0) |
                         (req->ca_path ? KEPT_CAPATH : 0)
                   : 0;
    if (kept && (!a->plain || (kept & ~a->plain) != 0)) {
        curl_easy_reset(e);
        kept = 0;
    }
    if (!kept)
        set_fixed_options(e, method, debug);
    if (req->ca_file)
        curl_easy_setopt(e, CURLOPT_CAINFO, req->ca_file);
    if (req->ca_path)
        curl_easy_setopt(e, CURLOPT_CAPATH, req->ca_path);
    a->url = req->url;
    curl_easy_setopt(e, CURLOPT_URL, req->url);
    curl_easy_setopt(e, CURLOPT_HTTPHEADER, a->req_headers);
    if (req->body || strcmp(method, "POST") == 0) {
        a->body = req->body ? req->body : "";
        a->body_len = req->body ? req->body_len : 0;
        /* A body is sent as a POST's (CUSTOMREQUEST still names the method), as
         * CURLOPT_POSTFIELDS would; the read callback makes it non-rewindable. */
        curl_easy_setopt(e, CURLOPT_POST, 1L);
        curl_easy_setopt(e, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)a->body_len);
        /* Borrowed, not copied (the call keeps it until the attempt ends). libcurl puts
         * headers and body in one send; on_prereq refuses its silent resend. */
        curl_easy_setopt(e, CURLOPT_POSTFIELDS, a->body);
    }
    curl_easy_setopt(e, CURLOPT_HEADERDATA, a);
    curl_easy_setopt(e, CURLOPT_WRITEDATA, a);
    curl_easy_setopt(e, CURLOPT_ERRORBUFFER, a->errbuf);
    curl_easy_setopt(e, CURLOPT_PREREQDATA, a);

    st = ah__loop_add_easy(loop, e, &a->link);
    if (st != AH_OK) {
        ah_error_set(err, AH_EK_CONNECT, 0, "cannot attach the transfer to the loop");
        goto fail;
    }
    *out = a;
    return AH_OK;
fail:
    if (err->kind == AH_EK_NONE)
        ah_error_set(err, AH_EK_CONNECT, 0, "cannot start the request: %s",
                     ah_status_message(st));
    attempt_release(a);
    return st;
}

static void curl_abort(void *self, void *handle)
{
    (void)self;
    attempt *a = handle;
    if (a)
        ah__loop_discard_easy(a->loop, a->easy, &a->link, attempt_release, a);
}

static const ah_transport_ops curl_ops = {"curl", curl_start, curl_abort};
static const ah_transport curl_transport = {&curl_ops, NULL};

const ah_transport *ah_transport_curl(void)
{
    return &curl_transport;
}
