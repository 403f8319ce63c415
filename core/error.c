/* error.c - the ah_error record: names, the default retry table, and building a record
 * from an HTTP response or a printf-style message.
 *
 * Invariants: a record's message is always single-line valid UTF-8 that fits its buffer
 * and has been redacted BEFORE it was truncated, so a secret cut in half by truncation
 * can never leave a visible prefix. Retry classification reads only kind, status and
 * should_retry (never the message): policies never parse strings.
 */
#include "error_internal.h"
#include "internal.h"

#include <cjson/cJSON.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* Longest text (provider message or raw body) kept before redaction. Enough for any
 * message we can show (AH_ERROR_MESSAGE_MAX) plus context for patterns that straddle the
 * end of what is shown. */
enum { TEXT_CAP = 4096, STACK_BUF = 2048 };

static const char *const kind_names[] = {
#define X(name, s) s,
    AH_ERROR_KIND_MAP(X)
#undef X
};

static const char *const hint_names[] = {
#define X(name, s) s,
    AH_HINT_SOURCE_MAP(X)
#undef X
};

void ah_error_clear(ah_error *e)
{
    if (!e)
        return;
    /* Field by field, the strings emptied by their first byte: a clear runs for every
     * attempt, body chunk and hand-off of a call (~15 per short request), and zeroing
     * the whole 664 bytes was ~100 instructions each. Every reader of the strings stops
     * at their NUL. */
    e->kind = AH_EK_NONE;
    e->status = 0;
    e->retry_after_ms = -1;
    e->retry_after_source = AH_HINT_NONE;
    e->should_retry = -1;
    e->provider_type[0] = '\0';
    e->message[0] = '\0';
    e->category[0] = '\0';
}

static const ah_error eslot_none = {.kind = AH_EK_NONE, .retry_after_ms = -1,
                                    .retry_after_source = AH_HINT_NONE, .should_retry = -1};
static const ah_error eslot_nomem = {.kind = AH_EK_PERMANENT, .retry_after_ms = -1,
                                     .retry_after_source = AH_HINT_NONE, .should_retry = -1,
                                     .message = "out of memory (keeping an error)"};

const ah_error *ah__eslot_get(const ah__error_slot *s)
{
    if (s->e)
        return s->e;
    return s->lost ? &eslot_nomem : &eslot_none;
}

ah_error *ah__eslot_own(ah__error_slot *s)
{
    if (!s->e) {
        s->e = malloc(sizeof *s->e);
        if (!s->e) {
            s->lost = 1;
            return NULL;
        }
        ah_error_clear(s->e);
    }
    s->lost = 0;
    return s->e;
}

void ah__eslot_set(ah__error_slot *s, const ah_error *e)
{
    ah_error *o = ah__eslot_own(s);
    if (o && o != e)
        *o = *e;
}

void ah__eslot_free(ah__error_slot *s)
{
    free(s->e);
    s->e = NULL;
    s->lost = 0;
}

const char *ah_error_kind_name(ah_error_kind kind)
{
    if ((unsigned)kind >= (unsigned)AH_EK_COUNT_)
        return "unknown";
    return kind_names[kind];
}

int ah_error_kind_from_name(const char *name)
{
    if (!name)
        return -1;
    for (int k = 0; k < AH_EK_COUNT_; k++)
        if (strcmp(name, kind_names[k]) == 0)
            return k;
    return -1;
}

const char *ah_hint_source_name(ah_hint_source src)
{
    if ((unsigned)src >= (unsigned)AH_HINT_COUNT_)
        return "unknown";
    return hint_names[src];
}

/* ---- the retry table (docs/errors.md) ----------------------------------------------------- */

static int status_is_retryable(int status)
{
    switch (status) {
    case 408: /* Request Timeout */
    case 425: /* Too Early */
    case 429: /* Too Many Requests */
    case 500: /* Internal Server Error */
    case 502: /* Bad Gateway */
    case 503: /* Service Unavailable */
    case 504: /* Gateway Timeout */
    case 529: /* Overloaded (Anthropic) */
        return 1;
    default:
        return 0;
    }
}

int ah_error_is_retryable(const ah_error *e)
{
    if (!e)
        return 0;
    switch (e->kind) {
    case AH_EK_CONNECT:
    case AH_EK_TIMEOUT:
        return e->should_retry != 0; /* only an explicit "false" stops these */
    case AH_EK_HTTP:
        if (e->should_retry == 0 || e->should_retry == 1)
            return e->should_retry;
        return status_is_retryable(e->status);
    case AH_EK_TRANSIENT:
        return 1;
    default:
        /* none, stream (continuation, never a resend), decode, cancelled, budget,
         * permanent, output, and anything out of range */
        return 0;
    }
}

/* ---- text hygiene ------------------------------------------------------------------ */

/* Copy src into dst as one line: control characters and runs of whitespace become one
 * space, invalid UTF-8 bytes become '?', and when it does not fit it is cut at a
 * character boundary and ends in "...". */
static void copy_line(char *dst, size_t size, const char *src)
{
    const unsigned char *p = (const unsigned char *)src;
    size_t o = 0;
    int pending_space = 0, truncated = 0;
    while (*p) {
        if (*p <= 0x20 || *p == 0x7F) {
            pending_space = o > 0;
            p++;
            continue;
        }
        /* p is NUL-terminated and a NUL is never a continuation byte, so the check
         * stops at the end of the string whatever n says. */
        size_t clen = ah__utf8_seq_len(p, 4);
        const char *out = (const char *)p;
        if (clen == 0) {
            out = "?";
            clen = 1;
        }
        if (o + (size_t)pending_space + clen > size - 1) {
            truncated = 1;
            break;
        }
        if (pending_space)
            dst[o++] = ' ';
        pending_space = 0;
        memcpy(dst + o, out, clen);
        o += clen;
        p += (out == (const char *)p) ? clen : 1;
    }
    if (truncated) {
        size_t written = o;
        /* step back until "..." fits and o is the start of a character */
        while (o > size - 4 ||
               (o > 0 && o < written && ((unsigned char)dst[o] & 0xC0) == 0x80))
            o--;
        while (o > 0 && dst[o - 1] == ' ')
            o--;
        memcpy(dst + o, "...", 3);
        o += 3;
    }
    dst[o] = '\0';
}

/* Provider types are identifiers: anything else becomes '_' (brackets are kept so a
 * mask stays legible and a second pass is idempotent). */
static void copy_ident(char *dst, size_t size, const char *src)
{
    size_t o = 0;
    for (const char *p = src; *p && o + 1 < size; p++) {
        char c = *p;
        int ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
                 (c >= '0' && c <= '9') || c == '_' || c == '.' || c == ':' || c == '-' ||
                 c == '[' || c == ']';
        dst[o++] = ok ? c : '_';
    }
    dst[o] = '\0';
}

/* How much of s[0..n) to keep: all of it when short, else up to TEXT_CAP bytes ending
 * just before an ASCII character that cannot be part of a key or token, or before the
 * first byte of a multi-byte character, so the cut never splits a secret (which would
 * leave a prefix no pattern recognises) nor a character. 0 when there is no such place:
 * the text is dropped rather than risked. */
static size_t safe_cap_at(const char *s, size_t n, size_t cap)
{
    if (n <= cap)
        return n;
    for (size_t i = cap; i > 0; i--) {
        unsigned char c = (unsigned char)s[i];
        int tok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
                  (c >= '0' && c <= '9') || (c != '\0' && strchr("-_.~+/=%", c) != NULL);
        if (c >= 0xC0 || (c < 0x80 && c != '\0' && !tok))
            return i;
    }
    return 0;
}

static size_t safe_cap(const char *s, size_t n)
{
    return safe_cap_at(s, n, TEXT_CAP);
}

/* ---- building ---------------------------------------------------------------------- */

/* Redact the NUL-terminated text in buf (capacity cap), then copy it into e->message. */
static void finish_message(ah_error *e, char *buf, size_t cap, const char *const *secrets)
{
    ah_redact(buf, cap, secrets);
    copy_line(e->message, sizeof e->message, buf);
}

static void set_type(ah_error *e, const char *type, size_t len,
                     const char *const *secrets)
{
    char small[256];
    char *buf = small;
    size_t cap = len + 1 + sizeof AH_REDACTED;
    e->provider_type[0] = '\0';
    if (!type || len == 0)
        return;
    if (cap > sizeof small && !(buf = malloc(cap)))
        return; /* no type rather than an unredacted one */
    memcpy(buf, type, len);
    buf[len] = '\0';
    /* Redaction first, on the raw bytes: sanitising first turned a key with '/', '+' or
     * '=' into something no pattern matched. Then the identifier characters (the mask's
     * brackets are kept), then truncation, so no secret is cut in half. */
    ah_redact(buf, cap, secrets);
    copy_ident(buf, strlen(buf) + 1, buf);
    ah__bufprintf(e->provider_type, sizeof e->provider_type, "%s", buf);
    if (buf != small)
        free(buf);
}

void ah_error_set_provider_type(ah_error *e, const char *type)
{
    if (!e)
        return;
    set_type(e, type, type ? strlen(type) : 0, NULL);
}

void ah_error_set(ah_error *e, ah_error_kind kind, int status, const char *fmt, ...)
{
    char small[STACK_BUF];
    char *buf = small;
    va_list ap;
    if (!e)
        return;
    ah_error_clear(e);
    e->kind = kind;
    e->status = status;
    if (!fmt)
        return;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (n < 0)
        return;
    /* room for the text and for masks longer than what they replace */
    size_t cap = (size_t)n + (size_t)n / 2 + 64;
    if (cap > sizeof small && !(buf = malloc(cap))) {
        ah__bufprintf(e->message, sizeof e->message,
                      "%s error (message lost: out of memory)", ah_error_kind_name(kind));
        return;
    }
    va_start(ap, fmt);
    vsnprintf(buf, cap, fmt, ap);
    va_end(ap);
    finish_message(e, buf, cap, NULL);
    if (buf != small)
        free(buf);
}

/* Whether `text` ends with the first k >= 4 bytes of a secret (a prefix left visible by
 * an earlier truncation); returns the prefix length, or 0. */
static size_t secret_prefix_at_end(const char *text, size_t len, const char *secret)
{
    size_t sl = strlen(secret);
    if (sl < 4)
        return 0;
    for (size_t k = sl - 1 < len ? sl - 1 : len; k >= 4; k--)
        if (memcmp(text + len - k, secret, k) == 0)
            return k;
    return 0;
}

void ah_error_redact(ah_error *e, const char *const *secrets)
{
    if (!e)
        return;
    char buf[AH_ERROR_MESSAGE_MAX + sizeof AH_REDACTED];
    ah__bufprintf(buf, sizeof buf, "%s", e->message);
    /* A message truncated before this second pass may end in part of a secret; mask
     * it too ("...", if present, is our truncation marker). */
    size_t len = strlen(buf);
    int dots = len >= 3 && memcmp(buf + len - 3, "...", 3) == 0;
    size_t body = dots ? len - 3 : len;
    for (const char *const *s = secrets; s && *s; s++) {
        size_t k = secret_prefix_at_end(buf, body, *s);
        if (k > 0) {
            memcpy(buf + body - k, AH_REDACTED "...", sizeof AH_REDACTED + 3);
            break;
        }
    }
    finish_message(e, buf, sizeof buf, secrets);
    if (e->provider_type[0]) {
        char type[AH_ERROR_PROVIDER_TYPE_MAX];
        memcpy(type, e->provider_type, sizeof type);
        set_type(e, type, strlen(type), secrets);
    }
}

/* ---- HTTP responses ---------------------------------------------------------------- */

static const char *reason_phrase(int status)
{
    switch (status) {
    case 301:
        return "Moved Permanently";
    case 302:
        return "Found";
    case 303:
        return "See Other";
    case 307:
        return "Temporary Redirect";
    case 308:
        return "Permanent Redirect";
    case 400:
        return "Bad Request";
    case 401:
        return "Unauthorized";
    case 402:
        return "Payment Required";
    case 403:
        return "Forbidden";
    case 404:
        return "Not Found";
    case 405:
        return "Method Not Allowed";
    case 408:
        return "Request Timeout";
    case 409:
        return "Conflict";
    case 413:
        return "Content Too Large";
    case 415:
        return "Unsupported Media Type";
    case 422:
        return "Unprocessable Content";
    case 425:
        return "Too Early";
    case 429:
        return "Too Many Requests";
    case 500:
        return "Internal Server Error";
    case 501:
        return "Not Implemented";
    case 502:
        return "Bad Gateway";
    case 503:
        return "Service Unavailable";
    case 504:
        return "Gateway Timeout";
    case 529:
        return "Overloaded";
    default:
        return NULL;
    }
}

static const char *json_string(const cJSON *obj, const char *key)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);
    return cJSON_IsString(v) && v->valuestring[0] ? v->valuestring : NULL;
}

/* The provider's error type and message, from either provider's error shape (or a bare
 * {"error":"text"} / {"message":"text"} from a gateway). Borrowed from root. */
static void extract(const cJSON *root, const char **type, const char **msg)
{
    *type = *msg = NULL;
    if (cJSON_IsArray(root)) /* some gateways wrap the error in a one-element array */
        root = cJSON_GetArrayItem(root, 0);
    if (!cJSON_IsObject(root))
        return;
    const cJSON *err = cJSON_GetObjectItemCaseSensitive(root, "error");
    if (cJSON_IsObject(err)) {
        *type = json_string(err, "type");
        if (!*type)
            *type = json_string(err, "code");
        if (!*type)
            *type = json_string(err, "status");
        *msg = json_string(err, "message");
    } else if (cJSON_IsString(err) && err->valuestring[0]) {
        *msg = err->valuestring;
    }
    if (!*msg)
        *msg = json_string(root, "message");
}

/* Does s contain needle, ignoring ASCII case? */
static int contains_ci(const char *s, const char *needle)
{
    size_t n = strlen(needle);
    for (; s && *s; s++)
        if (strncasecmp(s, needle, n) == 0)
            return 1;
    return 0;
}

/* A 429 that says a spend limit was reached (docs/errors.md, "Spend limits"): Anthropic
 * error.details.error_code "enforced_spend_limit_reached" (type rate_limit_error, no
 * retry-after), OpenAI error.code "organization_spend_limit_exceeded" /
 * "project_spend_limit_exceeded". */
static int is_spend_limit(int status, const cJSON *root, const char *msg)
{
    if (status != 429)
        return 0;
    const cJSON *err = cJSON_GetObjectItemCaseSensitive(root, "error");
    const char *code = json_string(err, "code");
    const char *ecode = json_string(cJSON_GetObjectItemCaseSensitive(err, "details"),
                                    "error_code");
    static const char *const codes[] = {"enforced_spend_limit_reached",
                                        "organization_spend_limit_exceeded",
                                        "project_spend_limit_exceeded", NULL};
    for (size_t i = 0; codes[i]; i++)
        if ((code && strcmp(code, codes[i]) == 0) || (ecode && strcmp(ecode, codes[i]) == 0) ||
            (msg && contains_ci(msg, codes[i])))
            return 1;
    return 0;
}

/* A 400 (or 413) that says the prompt does not fit the model's context window: OpenAI
 * error.code "context_length_exceeded", Anthropic "prompt is too long: N tokens > M
 * maximum", Gemini "The input token count (N) exceeds the maximum number of tokens
 * allowed (M)". */
static int is_context_exceeded(int status, const cJSON *root, const char *msg)
{
    if (status != 400 && status != 413)
        return 0;
    const char *code = json_string(cJSON_GetObjectItemCaseSensitive(root, "error"), "code");
    if (code && strcmp(code, "context_length_exceeded") == 0)
        return 1;
    return msg && (contains_ci(msg, "prompt is too long") ||
                   contains_ci(msg, "context_length_exceeded") ||
                   contains_ci(msg, "maximum context length") ||
                   contains_ci(msg, "context window") ||
                   contains_ci(msg, "exceeds the maximum number of tokens allowed"));
}

/* The Location of a redirect (301, 302, 303, 307, 308), or NULL. */
static const char *redirect_location(int status, const ah_header *h, size_t n)
{
    if (status != 301 && status != 302 && status != 303 && status != 307 && status != 308)
        return NULL;
    for (size_t i = 0; h && i < n; i++)
        if (h[i].name && h[i].value && h[i].value[0] && strcasecmp(h[i].name, "location") == 0)
            return h[i].value;
    return NULL;
}

void ah_error_from_http(ah_error *e, int status, const ah_header *h, size_t n,
                        const char *body, size_t body_len, int64_t now_wall_ms,
                        const char *const *secrets)
{
    cJSON *root = NULL;
    const char *type = NULL, *msg = NULL, *text = NULL;
    size_t text_len = 0;
    char small[STACK_BUF];
    char *buf = small;
    if (!e)
        return;
    ah_error_clear(e);
    e->kind = AH_EK_HTTP;
    e->status = status;
    ah_error_apply_headers(e, h, n, now_wall_ms);
    if (!body)
        body_len = 0;

    if (body_len > 0 && (root = cJSON_ParseWithLength(body, body_len)) != NULL)
        extract(root, &type, &msg);
    if (msg) {
        text = msg;
        text_len = strlen(msg);
    } else if (!type) {
        /* not JSON, or JSON of no known shape: the body itself is the best message */
        text = body;
        text_len = body_len;
    }

    if (e->retry_after_source == AH_HINT_NONE && root) {
        int64_t ms = ah__retry_info_ms(root); /* Gemini: no header, a RetryInfo */
        if (ms >= 0) {
            e->retry_after_ms = ms;
            e->retry_after_source = AH_HINT_RETRY_INFO;
        }
    }
    if (e->retry_after_source == AH_HINT_NONE && text_len > 0) {
        int64_t ms = ah__body_hint_parse(text, text_len);
        if (ms >= 0) {
            e->retry_after_ms = ms;
            e->retry_after_source = AH_HINT_BODY_TEXT;
        }
    }

    if (type)
        set_type(e, type, strlen(type), secrets);

    size_t shown = safe_cap(text ? text : "", text_len);
    size_t cap = 64 + sizeof e->provider_type + 2 * shown + 64;
    if (cap > sizeof small && !(buf = malloc(cap))) {
        buf = small; /* drop the text rather than show it unredacted */
        shown = 0;
        cap = sizeof small;
    }
    int o = snprintf(buf, cap, "HTTP %d", status);
    const char *loc = redirect_location(status, h, n);
    if (loc) {
        /* Redirects are not followed (a POST must not be re-sent somewhere else behind
         * the policy's back), so say where it points and what to change. */
        char rbuf[1024]; /* room for the masks of what the Location holds */
        size_t ll = strlen(loc), keep = safe_cap_at(loc, ll, 300);
        snprintf(rbuf, sizeof rbuf,
                 "HTTP %d %s to %.*s%s: the API is at another address; set the client's "
                 "base_url there (redirects are not followed)",
                 status, reason_phrase(status), (int)keep, loc, keep < ll ? "..." : "");
        finish_message(e, rbuf, sizeof rbuf, secrets);
        if (buf != small)
            free(buf);
        cJSON_Delete(root);
        return;
    }
    if (e->provider_type[0])
        o += snprintf(buf + o, cap - (size_t)o, " %s", e->provider_type);
    if (shown > 0)
        snprintf(buf + o, cap - (size_t)o, ": %.*s", (int)shown, text);
    else if (!e->provider_type[0] && reason_phrase(status))
        snprintf(buf + o, cap - (size_t)o, " %s", reason_phrase(status));
    finish_message(e, buf, cap, secrets);
    if (is_spend_limit(status, root, msg)) {
        /* not a rate limit: waiting does not help, so it is never retried */
        char m[AH_ERROR_MESSAGE_MAX];
        memcpy(m, e->message, sizeof m);
        e->kind = AH_EK_SPEND_LIMIT;
        ah__bufprintf(e->message, sizeof e->message,
                      "spend limit reached, not retried (requests fail until the limit is "
                      "raised or the period resets): %s",
                      m);
    } else if (is_context_exceeded(status, root, msg)) {
        char m[AH_ERROR_MESSAGE_MAX];
        memcpy(m, e->message, sizeof m);
        e->kind = AH_EK_CONTEXT_EXCEEDED;
        ah__bufprintf(e->message, sizeof e->message,
                      "the request does not fit the model's context window, not retried: %s",
                      m);
    }

    if (buf != small)
        free(buf);
    cJSON_Delete(root);
}
