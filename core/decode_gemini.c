/* decode_gemini.c - the Gemini API (generateContent): stream chunks, the error tail and
 * non-stream bodies (facts and sources: docs/providers-gemini.md).
 *
 * Stream (streamGenerateContent?alt=sse): every event is one GenerateContentResponse,
 * {"candidates":[{"content":{"role":"model","parts":[...]},"finishReason",...}],
 * "usageMetadata",...}, with no "type" and no [DONE]. Only candidate 0 is decoded. A part
 * is {"text"} (with "thought": true a thought summary: reasoning), {"functionCall":
 * {"name","args","id"?}}, each perhaps with a "thoughtSignature".
 *
 * Completion rules: a text or reasoning block grows over consecutive parts of its kind
 * and closes when a part of another kind follows or the finish reason arrives; a
 * functionCall part arrives whole (its block opens and closes at once). A thought
 * signature on a functionCall part travels as a REASONING block with empty text placed
 * just before the call (the encoder puts it back on the call's part); one on a thought
 * part stays on that reasoning block; one on a plain text part is not kept (returning it
 * is optional). The stream is finished at the chunk with a finishReason (usage rides in
 * the same chunk) or at a promptFeedback.blockReason (the prompt refused: no candidate).
 *
 * Errors: a chunk {"error": google.rpc.Status} is the provider's in-stream error; so is
 * the raw JSON the API writes after its events when it fails mid-stream (lines without
 * "data:", the tail op). */
#include "decode_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define GEM_TOOL_SUB (-3) /* timeline sub-key marking Gemini functionCall blocks */

/* Record a google.rpc.Status {"code": 503, "message", "status": "UNAVAILABLE"} (or any
 * {"error"} object) as the provider's error. */
static ah_status status_error(ah_decoder *d, const cJSON *e)
{
    const char *type = ah__jstr(e, "status");
    char numeric[32];
    const cJSON *code = cJSON_GetObjectItemCaseSensitive(e, "code");
    if (!type)
        type = ah__jstr(e, "type");
    if (!type && cJSON_IsNumber(code)) {
        snprintf(numeric, sizeof numeric, "%.0f", code->valuedouble);
        type = numeric;
    }
    char *json = cJSON_PrintUnformatted(e);
    ah_status st = ah__tl_set_error(d->tl, type, ah__jstr(e, "message"), json);
    cJSON_free(json);
    return st == AH_OK ? AH_OK : ah__dec_fail(d, st, "out of memory");
}

static ah_status close_open(ah_decoder *d)
{
    if (d->gem_open == AH__NONE)
        return AH_OK;
    size_t i = d->gem_open;
    d->gem_open = AH__NONE;
    return ah__dec_close(d, i);
}

static ah_status set_signature(ah_decoder *d, size_t i, const char *sig)
{
    if (ah__tl_set(d->tl, i, AH__F_SIGNATURE, sig, strlen(sig)) != AH_OK)
        return ah__dec_fail(d, AH_ERR_NOMEM, "out of memory");
    return AH_OK;
}

static ah_status text_part(ah_decoder *d, ah_block_kind kind, const char *s, const char *sig)
{
    ah_status st;
    size_t n = strlen(s);
    if (n == 0 && !(kind == AH_BLOCK_REASONING && sig))
        return AH_OK; /* an empty text part (often the one carrying the signature) */
    if (d->gem_open != AH__NONE && ah__tl_kind(d->tl, d->gem_open) != kind &&
        (st = close_open(d)) != AH_OK)
        return st;
    if (d->gem_open == AH__NONE &&
        (st = ah__dec_open(d, kind, -1, -1, NULL, NULL, &d->gem_open)) != AH_OK)
        return st;
    if (kind == AH_BLOCK_REASONING && sig && (st = set_signature(d, d->gem_open, sig)) != AH_OK)
        return st;
    return ah__dec_content(d, d->gem_open, s, n);
}

static ah_status call_part(ah_decoder *d, const cJSON *fc, const char *sig,
                           const char *response_id)
{
    ah_status st;
    if ((st = close_open(d)) != AH_OK)
        return st;
    size_t i;
    if (sig) {
        /* the signature belongs to this call: an empty reasoning block just before it */
        if ((st = ah__dec_open(d, AH_BLOCK_REASONING, -1, -1, NULL, NULL, &i)) != AH_OK ||
            (st = set_signature(d, i, sig)) != AH_OK || (st = ah__dec_close(d, i)) != AH_OK)
            return st;
    }
    const char *name = ah__dec_name(d, ah__jstr(fc, "name"));
    if (!name || !*name)
        return ah__dec_fail(d, AH_ERR_PARSE, "functionCall has no \"name\"");
    char made[160];
    const char *id = ah__jstr(fc, "id");
    int64_t n = d->gem_calls++;
    if (!id || !*id) {
        /* Gemini 2.x sends no call id: one made here, "gc_" marking it as ours (the
         * encoder does not send it back) */
        snprintf(made, sizeof made, "gc_%.100s_%lld", response_id ? response_id : "call",
                 (long long)n);
        id = made;
    }
    if ((st = ah__dec_open(d, AH_BLOCK_TOOL_USE, n, GEM_TOOL_SUB, id, name, &i)) != AH_OK)
        return st;
    const cJSON *args = cJSON_GetObjectItemCaseSensitive(fc, "args");
    if (args) { /* absent: no arguments, {}; an explicit null is kept as null */
        /* any JSON value is kept as the call's arguments: one that is not an object is
         * the tool machine's to refuse (a tool error the model sees), as in the other
         * formats, not a broken stream */
        char *s = cJSON_PrintUnformatted(args);
        if (!s)
            return ah__dec_fail(d, AH_ERR_NOMEM, "out of memory");
        st = ah__dec_content(d, i, s, strlen(s));
        cJSON_free(s);
        if (st != AH_OK)
            return st;
    }
    return ah__dec_close(d, i);
}

/* The category of a refusal: the first blocked safety rating's, else the reason. */
static const char *refusal_category(const cJSON *cand, const char *reason)
{
    const cJSON *r;
    cJSON_ArrayForEach(r, ah__jarr(cand, "safetyRatings"))
    {
        if (cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(r, "blocked")) &&
            ah__jstr(r, "category"))
            return ah__jstr(r, "category");
    }
    return reason;
}

static ah_status finish(ah_decoder *d, const char *reason, const char *category)
{
    ah_status st;
    if (ah__tl_set_stop_reason(d->tl, reason) != AH_OK ||
        (category && ah__tl_set_stop_category(d->tl, category) != AH_OK))
        return ah__dec_fail(d, AH_ERR_NOMEM, "out of memory");
    d->gem_open = AH__NONE;
    if ((st = ah__dec_close_all(d)) != AH_OK)
        return st;
    ah__tl_set_finished(d->tl);
    return AH_OK;
}

static int is_refusal(const char *reason)
{
    static const char *const r[] = {"SAFETY", "RECITATION", "PROHIBITED_CONTENT",
                                    "BLOCKLIST", "SPII", "IMAGE_SAFETY"};
    for (size_t i = 0; i < sizeof r / sizeof r[0]; i++)
        if (strcmp(reason, r[i]) == 0)
            return 1;
    return 0;
}

static ah_status on_candidate(ah_decoder *d, const cJSON *c, const char *response_id)
{
    ah_status st;
    const cJSON *parts = cJSON_GetObjectItemCaseSensitive(ah__jobj(c, "content"), "parts");
    if (parts && !cJSON_IsArray(parts))
        return ah__dec_fail(d, AH_ERR_PARSE, "\"content.parts\" is not an array");
    int64_t pos = 0;
    const cJSON *p;
    cJSON_ArrayForEach(p, parts)
    {
        if (!cJSON_IsObject(p))
            return ah__dec_fail(d, AH_ERR_PARSE, "parts[%lld] is not an object",
                                (long long)pos);
        pos++;
        const char *sig = ah__jstr(p, "thoughtSignature");
        if (sig && !*sig)
            sig = NULL;
        const cJSON *fc = ah__jobj(p, "functionCall");
        const char *text = ah__jstr(p, "text");
        if (fc)
            st = call_part(d, fc, sig, response_id);
        else if (text)
            st = text_part(d,
                           cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(p, "thought"))
                               ? AH_BLOCK_REASONING
                               : AH_BLOCK_TEXT,
                           text, sig);
        else
            st = AH_OK; /* inlineData, executableCode ...: not an answer the host keeps */
        if (st != AH_OK)
            return st;
    }
    const char *fr = ah__jstr(c, "finishReason");
    if (fr && *fr)
        return finish(d, fr, is_refusal(fr) ? refusal_category(c, fr) : NULL);
    return AH_OK;
}

static void read_usage(ah_decoder *d, const cJSON *root)
{
    const cJSON *u = ah__jobj(root, "usageMetadata");
    if (!u)
        return;
    int64_t in = -1, out = -1, thoughts = 0, cached = -1;
    ah__jint(u, "promptTokenCount", &in);
    ah__jint(u, "candidatesTokenCount", &out);
    ah__jint(u, "thoughtsTokenCount", &thoughts);
    ah__jint(u, "cachedContentTokenCount", &cached);
    /* thinking tokens are billed as output; cached tokens are part of the prompt's, and
     * Gemini reports no cache-write figure: 0 */
    if (out >= 0 || thoughts > 0)
        out = (out > 0 ? out : 0) + (thoughts > 0 ? thoughts : 0);
    ah__tl_replace_usage(d->tl, in, out);
    ah__tl_set_cache_usage(d->tl, in >= 0 ? (cached > 0 ? cached : 0) : -1,
                           in >= 0 ? 0 : -1);
}

/* One GenerateContentResponse (a stream chunk, or a body). */
static ah_status chunk(ah_decoder *d, const cJSON *root)
{
    ah_status st;
    const cJSON *err = ah__jobj(root, "error");
    if (err)
        return status_error(d, err);
    const char *rid = ah__jstr(root, "responseId");
    const cJSON *cands = cJSON_GetObjectItemCaseSensitive(root, "candidates");
    if (cands && !cJSON_IsArray(cands))
        return ah__dec_fail(d, AH_ERR_PARSE, "\"candidates\" is not an array");
    read_usage(d, root);
    int64_t pos = 0;
    const cJSON *c;
    cJSON_ArrayForEach(c, cands)
    {
        int64_t ci = pos++;
        if (!cJSON_IsObject(c))
            return ah__dec_fail(d, AH_ERR_PARSE, "candidates[%lld] is not an object",
                                (long long)ci);
        ah__jint(c, "index", &ci);
        if (ci == 0 && (st = on_candidate(d, c, rid)) != AH_OK)
            return st;
    }
    const char *block = ah__jstr(ah__jobj(root, "promptFeedback"), "blockReason");
    if (block && *block && !ah_timeline_finished(d->tl)) {
        /* the prompt itself was refused: no candidate, the reason says why */
        ah__tl_set_stop_norm(d->tl, "refusal");
        return finish(d, block, block);
    }
    return AH_OK;
}

ah_status ah__gemini_event(ah_decoder *d, const cJSON *root, const char *type)
{
    (void)type; /* chunks carry none */
    return chunk(d, root);
}

/* The lines of the tail that are no SSE field (the SDKs' rule: a line not starting
 * with "data:" belongs to a JSON object written raw), joined and parsed; an {"error"}
 * in it (or in a one-element array of it) is the provider's error. */
ah_status ah__gemini_tail(ah_decoder *d, const char *bytes, size_t len)
{
    char *json = malloc(len + 1);
    if (!json)
        return AH_OK;
    size_t n = 0;
    for (size_t i = 0; i < len;) {
        size_t e = i;
        while (e < len && bytes[e] != '\n' && bytes[e] != '\r')
            e++;
        size_t l = e - i;
        const char *s = bytes + i;
        int field = (l >= 5 && memcmp(s, "data:", 5) == 0) || (l >= 1 && s[0] == ':') ||
                    (l >= 6 && memcmp(s, "event:", 6) == 0) ||
                    (l >= 3 && memcmp(s, "id:", 3) == 0) ||
                    (l >= 6 && memcmp(s, "retry:", 6) == 0);
        if (!field) {
            memcpy(json + n, s, l);
            n += l;
            json[n++] = '\n';
        }
        i = e + 1;
    }
    cJSON *root = n ? cJSON_ParseWithLength(json, n) : NULL;
    free(json);
    const cJSON *o = cJSON_IsArray(root) ? cJSON_GetArrayItem(root, 0) : root;
    const cJSON *err = ah__jobj(o, "error");
    ah_status st = err ? status_error(d, err) : AH_OK;
    if (err)
        ah__log(AH_LOG_DEBUG, "gemini stream: an error after the events (%zu bytes)", len);
    cJSON_Delete(root);
    return st;
}

/* A body: one GenerateContentResponse (generateContent), or an {"error"}. */
ah_status ah__gemini_body(ah_decoder *d, const cJSON *root)
{
    ah_status st;
    if (!ah__jobj(root, "error") && !cJSON_GetObjectItemCaseSensitive(root, "candidates") &&
        !ah__jobj(root, "promptFeedback"))
        return ah__dec_fail(d, AH_ERR_PARSE,
                            "not a generateContent response: no \"candidates\"");
    if ((st = chunk(d, root)) != AH_OK || ah_timeline_error(d->tl))
        return st;
    d->gem_open = AH__NONE;
    if ((st = ah__dec_close_all(d)) != AH_OK)
        return st;
    ah__tl_set_finished(d->tl);
    return AH_OK;
}
