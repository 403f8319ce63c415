/* decode_util.c - the helpers the per-format decoders decode with: small cJSON accessors,
 * the checked tool name, and the block operations that fire the decoder's hooks
 * (ah__dec_open / _content / _close) and set its sticky error (ah__dec_fail).
 *
 * Layering (no cycle): timeline.c (the blocks) <- this file <- decode_anthropic.c,
 * decode_openai.c, decode_responses.c, decode_fast.c (the formats) <- decode.c (the
 * format-blind driver). A format calls down into this file and the timeline, never into
 * decode.c; nothing here calls a format. tests/cli/test_layers.sh checks it on the
 * objects.
 */
#include "decode_internal.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- cJSON accessors
 * ------------------------------------------------------------------------ */

static const char *skip_ws(const char *p, const char *end)
{
    while (p < end && (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r'))
        p++;
    return p;
}

const char *ah__dec_name(ah_decoder *d, const char *name)
{
    if (!name || !d->raw)
        return name;
    /* Look for "name" : "<name>\u0000 in the raw text (a name with other escapes before
     * its NUL is not recognised: no real provider sends either). */
    size_t n = strlen(name);
    const char *p = d->raw, *end = d->raw + d->raw_len;
    while ((p = memchr(p, '"', (size_t)(end - p))) != NULL) {
        const char *q = p + 1;
        p++;
        if ((size_t)(end - q) < 5 || memcmp(q, "name\"", 5) != 0)
            continue;
        q = skip_ws(q + 5, end);
        if (q >= end || *q != ':')
            continue;
        q = skip_ws(q + 1, end);
        if (q >= end || *q != '"')
            continue;
        q++;
        if ((size_t)(end - q) >= n + 6 && memcmp(q, name, n) == 0 &&
            memcmp(q + n, "\\u0000", 6) == 0) {
            enum { NAME_BUF_MAX = 160 };
            if (!d->name_buf && !(d->name_buf = malloc(NAME_BUF_MAX)))
                return name; /* out of memory: the name as it was cut */
            ah__bufprintf(d->name_buf, NAME_BUF_MAX, "%.120s\xEF\xBF\xBD", name);
            return d->name_buf;
        }
    }
    return name;
}

const char *ah__jstr(const cJSON *o, const char *key)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    return cJSON_IsString(v) ? v->valuestring : NULL;
}

int ah__jint(const cJSON *o, const char *key, int64_t *out)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    if (!cJSON_IsNumber(v) || v->valuedouble < 0 || v->valuedouble > 9.0e15)
        return 0;
    *out = (int64_t)v->valuedouble;
    return 1;
}

const cJSON *ah__jobj(const cJSON *o, const char *key)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    return cJSON_IsObject(v) ? v : NULL;
}

const cJSON *ah__jarr(const cJSON *o, const char *key)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    return cJSON_IsArray(v) ? v : NULL;
}

/* ---- errors
 * ----------------------------------------------------------------------------------- */

ah_error *ah__dec_err_slot(ah_error **slot)
{
    if (!*slot && (*slot = malloc(sizeof **slot)) != NULL)
        ah_error_clear(*slot);
    return *slot;
}

ah_status ah__dec_fail(ah_decoder *d, ah_status st, const char *fmt, ...)
{
    if (d->status != AH_OK)
        return d->status;
    char what[AH_ERROR_MESSAGE_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    d->status = st;
    /* ah_error_set makes the text single-line UTF-8 and redacted: it may quote what the
     * model or the provider sent (a tool name, an event type). */
    ah_error_kind kind = d->nonstream ? AH_EK_DECODE : AH_EK_STREAM;
    ah_error *e = ah__dec_err_slot(&d->err);
    if (!e)
        return st; /* ah_decoder_error answers "out of memory" */
    if (d->nonstream)
        ah_error_set(e, kind, 0, "%s response body: %s", ah_wire_name(d->wire),
                     what);
    else if (d->ev_end >= 0)
        ah_error_set(e, kind, 0,
                     "%s stream: %s (event '%s', #%llu, ending at byte %lld)",
                     ah_wire_name(d->wire), what, d->ev_type ? d->ev_type : "?",
                     (unsigned long long)d->events, (long long)d->ev_end);
    else
        ah_error_set(e, kind, 0, "%s stream: %s (event '%s', #%llu)",
                     ah_wire_name(d->wire), what, d->ev_type ? d->ev_type : "?",
                     (unsigned long long)d->events);
    ah__log(AH_LOG_DEBUG, "%s", e->message);
    return st;
}

ah_status ah__dec_provider_error(ah_decoder *d, const cJSON *e)
{
    /* Shapes seen: Anthropic {"type":"overloaded_error","message":...}; OpenAI Responses
     * {"type":"insufficient_quota","code":...,"message":...} or a flat event
     * {"type":"error","code":...,"message":...}; response.error {"code","message"};
     * Chat gateways {"message":...,"code":502}. */
    const char *type = ah__jstr(e, "type");
    if (!type || strcmp(type, "error") == 0) {
        const char *code = ah__jstr(e, "code");
        type = code ? code : type;
    }
    char numeric[32];
    const cJSON *code = cJSON_GetObjectItemCaseSensitive(e, "code");
    if (!type && cJSON_IsNumber(code)) {
        /* %.0f, not a cast: a hostile code such as 5e58 does not fit any integer. */
        snprintf(numeric, sizeof numeric, "%.0f", code->valuedouble);
        type = numeric;
    }
    char *json = e ? cJSON_PrintUnformatted(e) : NULL;
    ah_status st = ah__tl_set_error(d->tl, type, ah__jstr(e, "message"), json);
    cJSON_free(json);
    if (st != AH_OK)
        return ah__dec_fail(d, st, "out of memory");
    return AH_OK;
}

/* ---- block helpers (fire the hooks)
 * -------------------------------------------------------- */

ah_status ah__dec_open(ah_decoder *d, ah_block_kind kind, int64_t key, int64_t sub,
                       const char *id, const char *name, size_t *index)
{
    ah_status st = ah__tl_open(d->tl, kind, key, sub, index);
    if (st == AH_OK && id)
        st = ah__tl_set(d->tl, *index, AH__F_ID, id, strlen(id));
    if (st == AH_OK && name)
        st = ah__tl_set(d->tl, *index, AH__F_NAME, name, strlen(name));
    if (st != AH_OK)
        return ah__dec_fail(d, st, "out of memory");
    if (d->hooks.block_start)
        d->hooks.block_start(d->ud, *index, kind, id, name);
    return AH_OK;
}

ah_status ah__dec_content(ah_decoder *d, size_t i, const char *s, size_t n)
{
    if (n == 0)
        return AH_OK;
    ah_block_kind kind = ah__tl_kind(d->tl, i);
    ah__field f = (kind == AH_BLOCK_TOOL_USE || kind == AH_BLOCK_SERVER_TOOL_USE)
                      ? AH__F_ARGS
                      : AH__F_TEXT;
    if (ah__tl_append(d->tl, i, f, s, n) != AH_OK)
        return ah__dec_fail(d, AH_ERR_NOMEM, "out of memory");
    if (d->hooks.delta)
        d->hooks.delta(d->ud, i, kind, s, n);
    return AH_OK;
}

ah_status ah__dec_close(ah_decoder *d, size_t i)
{
    if (!ah__tl_is_open(d->tl, i))
        return AH_OK;
    ah_status st = ah__tl_close(d->tl, i);
    if (st == AH_ERR_PARSE) {
        const ah_block *b = ah_timeline_block(d->tl, i);
        return ah__dec_fail(
            d, AH_ERR_PARSE,
            "arguments of tool call '%s' (id '%s', block %zu) are not valid "
            "JSON at close (%zu bytes)",
            b->name, b->id, i, b->arguments_len);
    }
    if (st != AH_OK)
        return ah__dec_fail(d, st, "out of memory");
    if (d->hooks.block_end)
        d->hooks.block_end(d->ud, i, ah_timeline_block(d->tl, i));
    return AH_OK;
}

ah_status ah__dec_close_all(ah_decoder *d)
{
    size_t n = ah_timeline_count(d->tl);
    for (size_t i = 0; i < n; i++) {
        ah_status st = ah__dec_close(d, i);
        if (st != AH_OK)
            return st;
    }
    return AH_OK;
}
