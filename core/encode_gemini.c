/* encode_gemini.c - the Gemini API request body (POST /v1beta/models/{model}:
 * streamGenerateContent?alt=sse; the model is in the path, not the body).
 *
 * Shape: {contents[], systemInstruction?, tools?: [{functionDeclarations[]}],
 * toolConfig?, generationConfig?: {maxOutputTokens, temperature, stopSequences,
 * thinkingConfig}}. A content is {role: "user" | "model", parts[]}.
 *
 * Invariants (docs/providers-gemini.md, with sources):
 *   - the system prompt is systemInstruction, never a content;
 *   - a tool_use is a functionCall part {name, args (the JSON object), id?}; its result a
 *     functionResponse part {name, response: {"result": text} or {"error": text}, id?}
 *     in the next user content, the name looked up from the call it answers; an id the
 *     decoder made ("gc_...", Gemini 2.x sends none) is not sent;
 *   - a thought signature goes back on the part it came with: a reasoning block with a
 *     signature and no text gives it to the part after it (a functionCall), one with
 *     text is a thought part {"text", "thought": true, "thoughtSignature"};
 *   - images and documents are inlineData {mimeType, data} (base64, or a data: URL
 *     taken apart) or fileData {mimeType?, fileUri} for an http(s) URL; a tool result's
 *     image goes inside its functionResponse ("parts": [{inlineData}]) for Gemini 3 and
 *     later, else (earlier models, or an image by URL) as a part after it;
 *   - empty text parts and contents left without a part are not sent.
 */
#include "encode_internal.h"

#include <stdlib.h>
#include <string.h>

static int is_ours(const char *id)
{
    return !id || !*id || strncmp(id, "gc_", 3) == 0;
}

static ah_status put_text(ah__enc *e, cJSON *parts, const char *text)
{
    if (!text || !*text)
        return AH_OK;
    cJSON *o = ah__json_push_object(parts);
    return o && ah__json_put_str(o, "text", text) ? AH_OK : ah__enc_nomem(e);
}

/* An image or document as the fields of a part: inlineData {mimeType, data} for base64
 * (data, or a data: URL taken apart), fileData {mimeType?, fileUri} for an http(s) URL.
 */
static ah_status put_media_fields(ah__enc *e, cJSON *o, const ah_msg_block *b)
{
    char mt[128];
    const char *data = b->data, *media_type = b->media_type;
    if (!data && ah__enc_split_data_url(b->url, mt, sizeof mt, &data))
        media_type = mt;
    if (data) {
        cJSON *in = cJSON_AddObjectToObject(o, "inlineData");
        if (!in || !ah__json_put_str(in, "mimeType", media_type) ||
            !ah__json_put_str(in, "data", data))
            return ah__enc_nomem(e);
        return AH_OK;
    }
    cJSON *fd = cJSON_AddObjectToObject(o, "fileData");
    if (!fd || (media_type && !ah__json_put_str(fd, "mimeType", media_type)) ||
        !ah__json_put_str(fd, "fileUri", b->url))
        return ah__enc_nomem(e);
    return AH_OK;
}

/* An image or document part. A data: URL ah_msg_block_check let through is always
 * data:<type>;base64,<data>; anything else here is named, never sent half-encoded. */
static ah_status put_media(ah__enc *e, cJSON *parts, size_t mi, size_t bi,
                           const ah_msg_block *b)
{
    char mt[128];
    const char *data;
    if (!b->data && (!b->url || (strncmp(b->url, "data:", 5) == 0 &&
                                 !ah__enc_split_data_url(b->url, mt, sizeof mt, &data))))
        return ah__enc_fail(
            e, AH_ERR_INVALID,
            "message %zu block %zu (%s): url: not a base64 data: URL or an "
            "http(s) URL",
            mi, bi, ah__enc_media_what(b));
    cJSON *o = ah__json_push_object(parts);
    return o ? put_media_fields(e, o, b) : ah__enc_nomem(e);
}

/* Gemini 3 and later take a tool result's image inside the functionResponse (its
 * "parts", inlineData only: the Gemini API takes no fileData there); earlier models
 * only as a part of their own beside it (docs/providers-gemini.md). */
static int image_in_function_response(const ah__enc *e, const ah_msg_block *b)
{
    int maj, min;
    char mt[128];
    const char *data;
    return ah__gemini_version(e->opts->model, &maj, &min, NULL) && maj >= 3 &&
           (b->data || ah__enc_split_data_url(b->url, mt, sizeof mt, &data));
}

/* The name of the call `id` answers: the latest tool_use with that id before message mi. */
static const char *call_name(const ah__enc *e, size_t mi, const char *id)
{
    for (size_t m = mi; m-- > 0;) {
        if (ah_conversation_role(e->conv, m) != AH_ROLE_ASSISTANT)
            continue;
        size_t n = ah_conversation_block_count(e->conv, m);
        for (size_t b = 0; b < n; b++) {
            const ah_msg_block *k = ah_conversation_block(e->conv, m, b);
            if (k->kind == AH_MSG_TOOL_USE && k->id && strcmp(k->id, id) == 0)
                return k->name;
        }
    }
    return NULL;
}

static ah_status encode_user(ah__enc *e, size_t mi, cJSON *parts)
{
    ah_status st;
    size_t n = ah_conversation_block_count(e->conv, mi);
    for (size_t bi = 0; bi < n; bi++) {
        const ah_msg_block *b = ah_conversation_block(e->conv, mi, bi);
        switch (b->kind) {
        case AH_MSG_TEXT:
            if ((st = put_text(e, parts, b->text)) != AH_OK)
                return st;
            break;
        case AH_MSG_IMAGE:
        case AH_MSG_DOCUMENT:
            if ((st = put_media(e, parts, mi, bi, b)) != AH_OK)
                return st;
            break;
        case AH_MSG_TOOL_RESULT: {
            const char *name = call_name(e, mi, b->tool_use_id);
            if (!name)
                return ah__enc_fail(e, AH_ERR_INVALID,
                                    "message %zu block %zu (tool_result for '%.64s'): no "
                                    "earlier tool_use has that id (Gemini answers a call "
                                    "by its function name)",
                                    mi, bi, b->tool_use_id);
            cJSON *o = ah__json_push_object(parts);
            cJSON *fr = o ? cJSON_AddObjectToObject(o, "functionResponse") : NULL;
            cJSON *resp = NULL;
            if (!fr || !ah__json_put_str(fr, "name", name) ||
                (!is_ours(b->tool_use_id) && !ah__json_put_str(fr, "id", b->tool_use_id)) ||
                !(resp = cJSON_AddObjectToObject(fr, "response")) ||
                !ah__json_put_str(resp, b->is_error ? "error" : "result",
                                  b->text ? b->text : ""))
                return ah__enc_nomem(e);
            if (!b->data && !b->url)
                break;
            if (image_in_function_response(e, b)) {
                cJSON *fparts = cJSON_AddArrayToObject(fr, "parts");
                cJSON *fp = fparts ? ah__json_push_object(fparts) : NULL;
                if (!fp)
                    return ah__enc_nomem(e);
                if ((st = put_media_fields(e, fp, b)) != AH_OK)
                    return st;
            } else if ((st = put_media(e, parts, mi, bi, b)) != AH_OK) {
                return st;
            }
            break;
        }
        default:
            break; /* tool_use and reasoning cannot be in a user message */
        }
    }
    return AH_OK;
}

static ah_status encode_model(ah__enc *e, size_t mi, cJSON *parts)
{
    size_t n = ah_conversation_block_count(e->conv, mi);
    const char *sig = NULL; /* a signature waiting for the part after it */
    for (size_t bi = 0; bi < n; bi++) {
        const ah_msg_block *b = ah_conversation_block(e->conv, mi, bi);
        cJSON *o = NULL;
        switch (b->kind) {
        case AH_MSG_TEXT:
            if (!*b->text)
                break;
            if (!(o = ah__json_push_object(parts)) || !ah__json_put_str(o, "text", b->text))
                return ah__enc_nomem(e);
            break;
        case AH_MSG_REASONING:
            if (!*b->text) {
                if (b->signature && *b->signature)
                    sig = b->signature;
                continue; /* keeps sig for the next part */
            }
            if (!(o = ah__json_push_object(parts)) || !ah__json_put_str(o, "text", b->text) ||
                !ah__json_put_bool(o, "thought", 1) ||
                (b->signature && *b->signature &&
                 !ah__json_put_str(o, "thoughtSignature", b->signature)))
                return ah__enc_nomem(e);
            break;
        case AH_MSG_TOOL_USE: {
            const char *args = ah__enc_arguments(e, mi, bi, b);
            if (!args)
                return AH_ERR_INVALID;
            cJSON *fc = NULL, *raw = NULL;
            if (!(o = ah__json_push_object(parts)) ||
                !(fc = cJSON_AddObjectToObject(o, "functionCall")) ||
                !ah__json_put_str(fc, "name", b->name) || !(raw = ah__json_raw(args)))
                return ah__enc_nomem(e);
            cJSON_AddItemToObject(fc, "args", raw);
            if (!is_ours(b->id) && !ah__json_put_str(fc, "id", b->id))
                return ah__enc_nomem(e);
            break;
        }
        default:
            break;
        }
        if (o && sig && !cJSON_GetObjectItemCaseSensitive(o, "thoughtSignature") &&
            !ah__json_put_str(o, "thoughtSignature", sig))
            return ah__enc_nomem(e);
        if (o)
            sig = NULL;
    }
    return AH_OK;
}

static ah_status encode_contents(ah__enc *e, cJSON *root)
{
    cJSON *contents = cJSON_AddArrayToObject(root, "contents");
    if (!contents)
        return ah__enc_nomem(e);
    size_t n = ah_conversation_count(e->conv);
    for (size_t mi = 0; mi < n; mi++) {
        ah_role role = ah_conversation_role(e->conv, mi);
        cJSON *c = cJSON_CreateObject();
        cJSON *parts = NULL;
        if (!c || !ah__json_put_str(c, "role", role == AH_ROLE_USER ? "user" : "model") ||
            !(parts = cJSON_AddArrayToObject(c, "parts"))) {
            cJSON_Delete(c);
            return ah__enc_nomem(e);
        }
        ah_status st = role == AH_ROLE_USER ? encode_user(e, mi, parts)
                                            : encode_model(e, mi, parts);
        if (st != AH_OK || cJSON_GetArraySize(parts) == 0) {
            cJSON_Delete(c);
            if (st != AH_OK)
                return st;
            continue;
        }
        cJSON_AddItemToArray(contents, c);
    }
    return AH_OK;
}

static ah_status encode_tools(ah__enc *e, cJSON *root)
{
    const ah_request_opts *o = e->opts;
    if (!o->n_tools)
        return AH_OK;
    cJSON *tools = cJSON_AddArrayToObject(root, "tools");
    cJSON *t = tools ? ah__json_push_object(tools) : NULL;
    cJSON *decls = t ? cJSON_AddArrayToObject(t, "functionDeclarations") : NULL;
    if (!decls)
        return ah__enc_nomem(e);
    for (size_t i = 0; i < o->n_tools; i++) {
        /* parametersJsonSchema takes a JSON Schema as written; "parameters" is the
         * OpenAPI subset, which rejects keywords such as additionalProperties */
        ah_status st =
            ah__enc_tool_fields(e, ah__json_push_object(decls), i, "parametersJsonSchema");
        if (st != AH_OK)
            return st;
    }
    const char *mode = NULL;
    switch (o->tool_choice) {
    case AH_TOOL_CHOICE_AUTO:
        mode = "AUTO";
        break;
    case AH_TOOL_CHOICE_NONE:
        mode = "NONE";
        break;
    case AH_TOOL_CHOICE_REQUIRED:
    case AH_TOOL_CHOICE_NAMED:
        mode = "ANY";
        break;
    default:
        return AH_OK;
    }
    cJSON *tc = cJSON_AddObjectToObject(root, "toolConfig");
    cJSON *fcc = tc ? cJSON_AddObjectToObject(tc, "functionCallingConfig") : NULL;
    if (!fcc || !ah__json_put_str(fcc, "mode", mode))
        return ah__enc_nomem(e);
    if (o->tool_choice == AH_TOOL_CHOICE_NAMED) {
        const char *one[1] = {o->tool_choice_name};
        cJSON *names = cJSON_CreateStringArray(one, 1);
        if (!names)
            return ah__enc_nomem(e);
        cJSON_AddItemToObject(fcc, "allowedFunctionNames", names);
    }
    return AH_OK;
}

ah_status ah__encode_gemini(ah__enc *e, cJSON *root)
{
    const ah_request_opts *o = e->opts;
    const char *system = ah_conversation_system(e->conv);
    ah_status st;
    if ((st = encode_contents(e, root)) != AH_OK)
        return st;
    if (system && *system) {
        cJSON *si = cJSON_AddObjectToObject(root, "systemInstruction");
        cJSON *parts = si ? cJSON_AddArrayToObject(si, "parts") : NULL;
        if (!parts || put_text(e, parts, system) != AH_OK)
            return ah__enc_nomem(e);
    }
    if ((st = encode_tools(e, root)) != AH_OK)
        return st;
    if (!o->max_tokens && !o->has_temperature && !o->n_stop && !o->thinking_budget &&
        !o->reasoning_effort)
        return AH_OK;
    cJSON *gc = cJSON_AddObjectToObject(root, "generationConfig");
    if (!gc || (o->max_tokens && !ah__json_put_num(gc, "maxOutputTokens", (double)o->max_tokens)) ||
        (o->has_temperature && !ah__json_put_num(gc, "temperature", o->temperature)))
        return ah__enc_nomem(e);
    if (o->n_stop) {
        cJSON *stop = cJSON_CreateStringArray(o->stop, (int)o->n_stop);
        if (!stop)
            return ah__enc_nomem(e);
        cJSON_AddItemToObject(gc, "stopSequences", stop);
    }
    if (o->thinking_budget > 0 || o->reasoning_effort) {
        cJSON *th = cJSON_AddObjectToObject(gc, "thinkingConfig");
        if (!th || !ah__json_put_bool(th, "includeThoughts", 1) ||
            (o->thinking_budget > 0 &&
             !ah__json_put_num(th, "thinkingBudget", (double)o->thinking_budget)) ||
            (o->reasoning_effort && !ah__json_put_str(th, "thinkingLevel", o->reasoning_effort)))
            return ah__enc_nomem(e);
    }
    return AH_OK;
}
