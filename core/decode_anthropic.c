/* decode_anthropic.c - Anthropic Messages API: stream events and non-stream bodies.
 *
 * Stream: message_start (usage placeholder), content_block_start/delta/stop keyed by
 * "index", message_delta (stop_reason; usage is cumulative and overrides message_start
 * field by field, input_tokens included), message_stop (the end), ping (anywhere,
 * ignored), error (the provider's in-stream error). Dispatch is on the payload's "type"
 * and fields are read from parsed JSON, never matched as strings: the API pads its JSON
 * with whitespace.
 *
 * Invariants: a block is closed only by its content_block_stop; tool input is buffered
 * raw and parsed once at close ("" means {}; a server_tool_use that arrives whole keeps
 * its "input"); server tool blocks are recorded, never treated as client tool calls;
 * unknown event, block and delta types are ignored, a known event missing what it needs
 * is an error.
 */
#include "decode_internal.h"

#include <string.h>

static ah_status need_index(ah_decoder *d, const cJSON *root, int64_t *idx)
{
    if (!ah__jint(root, "index", idx))
        return ah__dec_fail(d, AH_ERR_PARSE, "missing or invalid \"index\"");
    return AH_OK;
}

static void read_usage(ah_decoder *d, const cJSON *usage)
{
    int64_t in = -1, out = -1;
    if (!usage)
        return;
    ah__jint(usage, "input_tokens", &in);
    ah__jint(usage, "output_tokens", &out);
    ah__tl_set_usage(d->tl, in, out);
    /* input_tokens counts only what came after the last cache breakpoint: the cache
     * figures are added to it (ah_timeline_input_tokens) */
    int64_t cr = -1, cw = -1;
    ah__jint(usage, "cache_read_input_tokens", &cr);
    ah__jint(usage, "cache_creation_input_tokens", &cw);
    ah__tl_set_cache_usage(d->tl, cr, cw);
    ah__tl_input_excludes_cache(d->tl);
}

static int ends_with(const char *s, const char *suffix)
{
    size_t n = strlen(s), m = strlen(suffix);
    return n >= m && memcmp(s + n - m, suffix, m) == 0;
}

static int has_members(const cJSON *o)
{
    return cJSON_IsObject(o) && o->child != NULL;
}

/* Open the block described by `cb` (a content_block_start's content_block, or one element
 * of a non-stream body's content[]). whole = 1 for a non-stream body: tool input goes
 * straight into the arguments and citations are counted from the block. */
static ah_status open_block(ah_decoder *d, int64_t idx, const cJSON *cb, int whole,
                            size_t *out)
{
    const char *type = ah__jstr(cb, "type");
    ah_status st;
    size_t i;
    if (!type)
        return ah__dec_fail(d, AH_ERR_PARSE, "content block %lld has no \"type\"",
                            (long long)idx);
    if (strcmp(type, "text") == 0) {
        const char *text = ah__jstr(cb, "text");
        if ((st = ah__dec_open(d, AH_BLOCK_TEXT, idx, -1, NULL, NULL, &i)) != AH_OK)
            return st;
        if (text && (st = ah__dec_content(d, i, text, strlen(text))) != AH_OK)
            return st;
        const cJSON *cites = ah__jarr(cb, "citations");
        if (whole && cites)
            for (int k = cJSON_GetArraySize(cites); k > 0; k--)
                ah__tl_add_citation(d->tl);
    } else if (strcmp(type, "thinking") == 0) {
        const char *text = ah__jstr(cb, "thinking");
        const char *sig = ah__jstr(cb, "signature");
        if ((st = ah__dec_open(d, AH_BLOCK_REASONING, idx, -1, NULL, NULL, &i)) != AH_OK)
            return st;
        if (text && (st = ah__dec_content(d, i, text, strlen(text))) != AH_OK)
            return st;
        if (sig && ah__tl_set(d->tl, i, AH__F_SIGNATURE, sig, strlen(sig)) != AH_OK)
            return ah__dec_fail(d, AH_ERR_NOMEM, "out of memory");
    } else if (strcmp(type, "redacted_thinking") == 0) {
        const char *data = ah__jstr(cb, "data");
        if ((st = ah__dec_open(d, AH_BLOCK_REASONING, idx, -1, NULL, NULL, &i)) != AH_OK)
            return st;
        ah__tl_set_redacted(d->tl, i);
        if (data && ah__tl_set(d->tl, i, AH__F_ENCRYPTED, data, strlen(data)) != AH_OK)
            return ah__dec_fail(d, AH_ERR_NOMEM, "out of memory");
    } else if (strcmp(type, "tool_use") == 0 || strcmp(type, "server_tool_use") == 0 ||
               strcmp(type, "mcp_tool_use") == 0) {
        ah_block_kind kind =
            type[0] == 't' ? AH_BLOCK_TOOL_USE : AH_BLOCK_SERVER_TOOL_USE;
        const char *id = ah__jstr(cb, "id"), *name = ah__dec_name(d, ah__jstr(cb, "name"));
        if (!id || !name)
            return ah__dec_fail(d, AH_ERR_PARSE,
                                "%s block %lld without \"id\" and \"name\"", type,
                                (long long)idx);
        if ((st = ah__dec_open(d, kind, idx, -1, id, name, &i)) != AH_OK)
            return st;
        const cJSON *input = cJSON_GetObjectItemCaseSensitive(cb, "input");
        /* Streamed input arrives as input_json_delta; "input" is then {} and only a
         * fallback for a block that arrives whole (server_tool_use called from code). */
        if (whole && input && ah__tl_set_json(d->tl, i, AH__F_ARGS, input) != AH_OK)
            return ah__dec_fail(d, AH_ERR_NOMEM, "out of memory");
        if (!whole && has_members(input) &&
            ah__tl_set_json(d->tl, i, AH__F_INPUT, input) != AH_OK)
            return ah__dec_fail(d, AH_ERR_NOMEM, "out of memory");
    } else {
        /* *_tool_result blocks of server tools, and types added after this was written:
         * kept verbatim, never executed, never committed by a partial drain. */
        if (!ends_with(type, "_tool_result"))
            ah__log(AH_LOG_DEBUG,
                    "anthropic: unknown content block type '%s' kept opaque", type);
        if ((st = ah__dec_open(d, AH_BLOCK_OPAQUE, idx, -1, NULL, NULL, &i)) != AH_OK)
            return st;
        if (ah__tl_set(d->tl, i, AH__F_TYPE, type, strlen(type)) != AH_OK ||
            ah__tl_set_json(d->tl, i, AH__F_RAW, cb) != AH_OK)
            return ah__dec_fail(d, AH_ERR_NOMEM, "out of memory");
    }
    *out = i;
    return AH_OK;
}

static ah_status on_block_start(ah_decoder *d, const cJSON *root)
{
    int64_t idx;
    size_t i;
    ah_status st = need_index(d, root, &idx);
    if (st != AH_OK)
        return st;
    const cJSON *cb = ah__jobj(root, "content_block");
    if (!cb)
        return ah__dec_fail(d, AH_ERR_PARSE, "missing \"content_block\" object");
    if (ah__tl_find(d->tl, idx, -1, 1) != AH__NONE)
        return ah__dec_fail(d, AH_ERR_PARSE, "block %lld started again while still open",
                            (long long)idx);
    return open_block(d, idx, cb, 0, &i);
}

/* A content_block_delta once its index and delta type are known. `delta` is the parsed
 * delta object, or NULL from the fast path (decode_fast.c), which passes the string
 * field of a text_delta / thinking_delta / input_json_delta as fs (fn bytes) instead.
 * One body for both, so they cannot disagree. */
ah_status ah__anthropic_delta(ah_decoder *d, int64_t idx, const char *dt,
                              const cJSON *delta, const char *fs, size_t fn)
{
    size_t i = ah__tl_find(d->tl, idx, -1, 1);
    if (i == AH__NONE)
        return ah__dec_fail(d, AH_ERR_PARSE, "%s for block %lld, which is not open", dt,
                            (long long)idx);
    ah_block_kind kind = ah__tl_kind(d->tl, i);
    const char *field = NULL;
    ah_block_kind want = AH_BLOCK_TEXT;
    if (strcmp(dt, "text_delta") == 0) {
        field = "text";
    } else if (strcmp(dt, "thinking_delta") == 0) {
        field = "thinking";
        want = AH_BLOCK_REASONING;
    } else if (strcmp(dt, "input_json_delta") == 0) {
        if (kind != AH_BLOCK_TOOL_USE && kind != AH_BLOCK_SERVER_TOOL_USE)
            return ah__dec_fail(d, AH_ERR_PARSE, "input_json_delta for %s block %lld",
                                ah_block_kind_name(kind), (long long)idx);
        if (!delta)
            return ah__dec_content(d, i, fs, fn);
        const cJSON *pj = cJSON_GetObjectItemCaseSensitive(delta, "partial_json");
        if (pj && !cJSON_IsString(pj))
            return ah__dec_fail(d, AH_ERR_PARSE, "\"partial_json\" is not a string");
        return pj ? ah__dec_content(d, i, pj->valuestring, strlen(pj->valuestring))
                  : AH_OK;
    } else if (strcmp(dt, "signature_delta") == 0) {
        const char *sig = ah__jstr(delta, "signature");
        if (!sig || kind != AH_BLOCK_REASONING)
            return ah__dec_fail(d, AH_ERR_PARSE,
                                "signature_delta without a signature or "
                                "for a non-thinking block");
        if (ah__tl_append(d->tl, i, AH__F_SIGNATURE, sig, strlen(sig)) != AH_OK)
            return ah__dec_fail(d, AH_ERR_NOMEM, "out of memory");
        return AH_OK;
    } else if (strcmp(dt, "citations_delta") == 0) {
        /* Citations arrive before the text they cite; only their number is kept. */
        ah__tl_add_citation(d->tl);
        return AH_OK;
    } else {
        ah__log(AH_LOG_DEBUG, "anthropic: unknown delta type '%s' ignored", dt);
        return AH_OK;
    }
    const char *s = delta ? ah__jstr(delta, field) : fs;
    if (!s)
        return ah__dec_fail(d, AH_ERR_PARSE, "%s without a \"%s\" string", dt, field);
    if (kind != want)
        return ah__dec_fail(d, AH_ERR_PARSE, "%s for %s block %lld", dt,
                            ah_block_kind_name(kind), (long long)idx);
    return ah__dec_content(d, i, s, delta ? strlen(s) : fn);
}

static ah_status on_block_delta(ah_decoder *d, const cJSON *root)
{
    int64_t idx;
    ah_status st = need_index(d, root, &idx);
    if (st != AH_OK)
        return st;
    const cJSON *delta = ah__jobj(root, "delta");
    const char *dt = ah__jstr(delta, "type");
    if (!dt)
        return ah__dec_fail(d, AH_ERR_PARSE, "missing \"delta\" object with a \"type\"");
    return ah__anthropic_delta(d, idx, dt, delta, NULL, 0);
}

static ah_status on_block_stop(ah_decoder *d, const cJSON *root)
{
    int64_t idx;
    ah_status st = need_index(d, root, &idx);
    if (st != AH_OK)
        return st;
    size_t i = ah__tl_find(d->tl, idx, -1, 1);
    if (i == AH__NONE)
        return ah__dec_fail(d, AH_ERR_PARSE,
                            "content_block_stop for block %lld, which is "
                            "not open",
                            (long long)idx);
    return ah__dec_close(d, i);
}

static ah_status set_stop_reason(ah_decoder *d, const cJSON *holder)
{
    const cJSON *sr = cJSON_GetObjectItemCaseSensitive(holder, "stop_reason");
    if (!sr)
        return AH_OK;
    if (ah__tl_set_stop_reason(d->tl, cJSON_IsString(sr) ? sr->valuestring : NULL) !=
        AH_OK)
        return ah__dec_fail(d, AH_ERR_NOMEM, "out of memory");
    /* a refusal's stop_details: {"type":"refusal","category":...,"explanation":...} */
    const cJSON *sd = ah__jobj(holder, "stop_details");
    const char *cat = sd ? ah__jstr(sd, "category") : NULL;
    if (cat && ah__tl_set_stop_category(d->tl, cat) != AH_OK)
        return ah__dec_fail(d, AH_ERR_NOMEM, "out of memory");
    return AH_OK;
}

ah_status ah__anthropic_event(ah_decoder *d, const cJSON *root, const char *type)
{
    switch (type[0]) {
    case 'c':
        if (strcmp(type, "content_block_delta") == 0)
            return on_block_delta(d, root);
        if (strcmp(type, "content_block_start") == 0)
            return on_block_start(d, root);
        if (strcmp(type, "content_block_stop") == 0)
            return on_block_stop(d, root);
        break;
    case 'p':
        if (strcmp(type, "ping") == 0)
            return AH_OK;
        break;
    case 'm':
        if (strcmp(type, "message_start") == 0) {
            const cJSON *msg = ah__jobj(root, "message");
            if (!msg)
                return ah__dec_fail(d, AH_ERR_PARSE, "missing \"message\" object");
            read_usage(d, ah__jobj(msg, "usage"));
            return AH_OK;
        }
        if (strcmp(type, "message_delta") == 0) {
            const cJSON *delta = ah__jobj(root, "delta");
            if (delta && set_stop_reason(d, delta) != AH_OK)
                return d->status;
            read_usage(d, ah__jobj(root, "usage"));
            return AH_OK;
        }
        if (strcmp(type, "message_stop") == 0) {
            ah__tl_set_finished(d->tl);
            return AH_OK;
        }
        break;
    case 'e':
        if (strcmp(type, "error") == 0) {
            const cJSON *e = ah__jobj(root, "error");
            return ah__dec_provider_error(d, e ? e : root);
        }
        break;
    default:
        break;
    }
    ah__log(AH_LOG_DEBUG, "anthropic: unknown event type '%s' ignored", type);
    return AH_OK;
}

ah_status ah__anthropic_body(ah_decoder *d, const cJSON *root)
{
    const char *type = ah__jstr(root, "type");
    if (type && strcmp(type, "error") == 0) {
        const cJSON *e = ah__jobj(root, "error");
        return ah__dec_provider_error(d, e ? e : root);
    }
    const cJSON *content = ah__jarr(root, "content");
    if (!content)
        return ah__dec_fail(d, AH_ERR_PARSE, "not a message: no \"content\" array");
    int64_t idx = 0;
    const cJSON *cb;
    cJSON_ArrayForEach(cb, content)
    {
        size_t i;
        ah_status st;
        if (!cJSON_IsObject(cb))
            return ah__dec_fail(d, AH_ERR_PARSE, "content[%lld] is not an object",
                                (long long)idx);
        if ((st = open_block(d, idx, cb, 1, &i)) != AH_OK ||
            (st = ah__dec_close(d, i)) != AH_OK)
            return st;
        idx++;
    }
    if (set_stop_reason(d, root) != AH_OK)
        return d->status;
    read_usage(d, ah__jobj(root, "usage"));
    ah__tl_set_finished(d->tl);
    return AH_OK;
}

/* What the event handlers above read (decode_tree.c builds only this): the root's
 * "type", "index", the content_block and delta objects whole (an unknown block is
 * kept as JSON, a tool's input whole), message.usage and usage whole, "error" whole.
 * The root and "message" are only looked up by key; an "error" event is never decoded
 * from the filtered tree (it may print the root). */
static const ah__tree_key message_keys[] = {
    AH__TK("usage", AH__TK_DEEP, NULL),
    AH__TK_END,
};
const ah__tree_key ah__tree_anthropic[] = {
    AH__TK("type", AH__TK_DEEP, NULL),
    AH__TK("index", AH__TK_DEEP, NULL),
    AH__TK("content_block", AH__TK_DEEP, NULL),
    AH__TK("delta", AH__TK_DEEP, NULL),
    AH__TK("message", AH__TK_OBJ, message_keys),
    AH__TK("usage", AH__TK_DEEP, NULL),
    AH__TK("error", AH__TK_DEEP, NULL),
    AH__TK_END,
};
