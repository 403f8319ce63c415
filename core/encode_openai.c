/* encode_openai.c - the OpenAI Chat Completions request body (POST /v1/chat/completions).
 *
 * Shape: {model, messages[], max_completion_tokens? (or max_tokens), tools?,
 * tool_choice?, stop?, temperature?, reasoning_effort?, stream?, stream_options?}.
 *
 * Mapping from the neutral model (see docs/providers-encoding.md):
 *   - the system prompt is the first message, role "system";
 *   - a user message's tool_result blocks become one role "tool" message each
 *     (tool_call_id + content), placed first so they directly follow the assistant
 *     message that asked for them; its text blocks become one role "user" message;
 *   - an assistant message's text blocks are concatenated into "content" (null when
 *     there is none) and its tool_use blocks become "tool_calls", whose
 *     function.arguments is the arguments JSON as a STRING;
 *   - reasoning blocks are not sent: Chat Completions has no field to round-trip them;
 *   - is_error of a tool result has no field either; the content text must say it;
 *   - images are image_url parts (base64 data as a data: URL), documents file parts
 *     (file_data, a data: URL; a document URL is an error); a tool message holds text
 *     only, so a tool result's image goes in the user message after the tool messages;
 *   - prompt caching: prompt_cache_key when opts.cache and the key are set;
 *   - a trailing assistant message is sent as it is: the model treats it as already
 *     said and starts a new message after it.
 */
#include "encode_internal.h"

#include <stdlib.h>
#include <string.h>

static ah_status encode_tools(ah__enc *e, cJSON *root)
{
    const ah_request_opts *o = e->opts;
    if (!o->n_tools)
        return AH_OK;
    cJSON *tools = cJSON_AddArrayToObject(root, "tools");
    if (!tools)
        return ah__enc_nomem(e);
    for (size_t i = 0; i < o->n_tools; i++) {
        cJSON *t = ah__json_push_object(tools);
        if (!t || !ah__json_put_str(t, "type", "function"))
            return ah__enc_nomem(e);
        ah_status st =
            ah__enc_tool_fields(e, cJSON_AddObjectToObject(t, "function"), i, "parameters");
        if (st != AH_OK)
            return st;
    }
    return AH_OK;
}

/* An image_url part (a data: URL for base64 data) or, for a document, a file part
 * (file_data as a data: URL; Chat takes no document URL). */
static ah_status put_media(ah__enc *e, cJSON *parts, size_t mi, size_t bi,
                           const ah_msg_block *b)
{
    int doc = b->kind == AH_MSG_DOCUMENT;
    if (doc && b->url && strncmp(b->url, "data:", 5) != 0)
        return ah__enc_fail(e, AH_ERR_INVALID,
                            "message %zu block %zu (document): url: the openai wire format "
                            "takes a document only as data (base64), not a URL",
                            mi, bi);
    char *url = ah__enc_media_url(b);
    cJSON *p = url ? ah__json_push_object(parts) : NULL;
    cJSON *in = NULL;
    int ok = p && ah__json_put_str(p, "type", doc ? "file" : "image_url") &&
             (in = cJSON_AddObjectToObject(p, doc ? "file" : "image_url")) &&
             (!doc || ah__json_put_str(in, "filename",
                                       b->name && *b->name ? b->name : "document.pdf")) &&
             ah__json_put_str(in, doc ? "file_data" : "url", url);
    free(url);
    return ok ? AH_OK : ah__enc_nomem(e);
}

static ah_status encode_user(ah__enc *e, size_t mi, cJSON *msgs)
{
    size_t n = ah_conversation_block_count(e->conv, mi);
    size_t n_text = 0, n_media = 0;
    for (size_t bi = 0; bi < n; bi++) {
        const ah_msg_block *b = ah_conversation_block(e->conv, mi, bi);
        if (b->kind == AH_MSG_TEXT && *b->text)
            n_text++;
        /* a tool message holds text only: a result's image travels in the user message
         * that follows the tool messages */
        n_media += b->kind == AH_MSG_IMAGE || b->kind == AH_MSG_DOCUMENT ||
                   (b->kind == AH_MSG_TOOL_RESULT && (b->data || b->url));
        if (b->kind != AH_MSG_TOOL_RESULT)
            continue;
        cJSON *m = ah__json_push_object(msgs);
        if (!m || !ah__json_put_str(m, "role", "tool") ||
            !ah__json_put_str(m, "tool_call_id", b->tool_use_id) ||
            !ah__json_put_str(m, "content", b->text))
            return ah__enc_nomem(e);
    }
    if (n_text == 0 && n_media == 0)
        return AH_OK;
    cJSON *m = ah__json_push_object(msgs);
    if (!m || !ah__json_put_str(m, "role", "user"))
        return ah__enc_nomem(e);
    if (n_text == 1 && n_media == 0) { /* the plain string form every compatible server accepts */
        for (size_t bi = 0; bi < n; bi++) {
            const ah_msg_block *b = ah_conversation_block(e->conv, mi, bi);
            if (b->kind == AH_MSG_TEXT && *b->text)
                return ah__json_put_str(m, "content", b->text) ? AH_OK : ah__enc_nomem(e);
        }
    }
    cJSON *parts = cJSON_AddArrayToObject(m, "content");
    if (!parts)
        return ah__enc_nomem(e);
    for (size_t bi = 0; bi < n; bi++) {
        const ah_msg_block *b = ah_conversation_block(e->conv, mi, bi);
        if (b->kind == AH_MSG_IMAGE || b->kind == AH_MSG_DOCUMENT ||
            (b->kind == AH_MSG_TOOL_RESULT && (b->data || b->url))) {
            ah_msg_block img = *b;
            if (b->kind == AH_MSG_TOOL_RESULT)
                img.kind = AH_MSG_IMAGE;
            ah_status st = put_media(e, parts, mi, bi, &img);
            if (st != AH_OK)
                return st;
            continue;
        }
        if (b->kind != AH_MSG_TEXT || !*b->text)
            continue;
        cJSON *p = ah__json_push_object(parts);
        if (!p || !ah__json_put_str(p, "type", "text") ||
            !ah__json_put_str(p, "text", b->text))
            return ah__enc_nomem(e);
    }
    return AH_OK;
}

static ah_status encode_assistant(ah__enc *e, size_t mi, cJSON *msgs)
{
    size_t n = ah_conversation_block_count(e->conv, mi);
    size_t text_len = 0, n_calls = 0;
    for (size_t bi = 0; bi < n; bi++) {
        const ah_msg_block *b = ah_conversation_block(e->conv, mi, bi);
        if (b->kind == AH_MSG_TEXT)
            text_len += strlen(b->text);
        else if (b->kind == AH_MSG_TOOL_USE)
            n_calls++;
    }
    /* Only reasoning, or nothing: Chat Completions has no message to send for it. */
    if (text_len == 0 && n_calls == 0)
        return AH_OK;

    ah_status st = AH_OK;
    char *text = NULL;
    cJSON *m = cJSON_CreateObject();
    if (!m || !ah__json_put_str(m, "role", "assistant"))
        goto oom;
    if (text_len) {
        /* Text blocks joined with nothing in between: the text the user saw stream. */
        if (!(text = malloc(text_len + 1)))
            goto oom;
        size_t off = 0;
        for (size_t bi = 0; bi < n; bi++) {
            const ah_msg_block *b = ah_conversation_block(e->conv, mi, bi);
            if (b->kind == AH_MSG_TEXT) {
                size_t l = strlen(b->text);
                memcpy(text + off, b->text, l);
                off += l;
            }
        }
        text[off] = '\0';
        if (!ah__json_put_str(m, "content", text))
            goto oom;
    } else if (!cJSON_AddNullToObject(m, "content")) {
        goto oom;
    }
    if (n_calls) {
        cJSON *calls = cJSON_AddArrayToObject(m, "tool_calls");
        if (!calls)
            goto oom;
        for (size_t bi = 0; bi < n; bi++) {
            const ah_msg_block *b = ah_conversation_block(e->conv, mi, bi);
            if (b->kind != AH_MSG_TOOL_USE)
                continue;
            const char *args = ah__enc_arguments(e, mi, bi, b);
            if (!args) {
                st = AH_ERR_INVALID;
                goto cleanup;
            }
            cJSON *call = ah__json_push_object(calls);
            cJSON *fn = NULL;
            if (!call || !ah__json_put_str(call, "id", b->id) ||
                !ah__json_put_str(call, "type", "function") ||
                !(fn = cJSON_AddObjectToObject(call, "function")) ||
                !ah__json_put_str(fn, "name", b->name) ||
                !ah__json_put_str(fn, "arguments", args))
                goto oom;
        }
    }
    cJSON_AddItemToArray(msgs, m);
    m = NULL;
    goto cleanup;
oom:
    st = ah__enc_nomem(e);
cleanup:
    cJSON_Delete(m);
    free(text);
    return st;
}

ah_status ah__encode_openai(ah__enc *e, cJSON *root)
{
    const ah_request_opts *o = e->opts;
    const char *system = ah_conversation_system(e->conv);
    ah_status st;

    if (!ah__json_put_str(root, "model", o->model))
        return ah__enc_nomem(e);
    cJSON *msgs = cJSON_AddArrayToObject(root, "messages");
    if (!msgs)
        return ah__enc_nomem(e);
    if (system && *system) {
        cJSON *m = ah__json_push_object(msgs);
        if (!m || !ah__json_put_str(m, "role", "system") ||
            !ah__json_put_str(m, "content", system))
            return ah__enc_nomem(e);
    }
    size_t n = ah_conversation_count(e->conv);
    for (size_t mi = 0; mi < n; mi++) {
        st = ah_conversation_role(e->conv, mi) == AH_ROLE_USER
                 ? encode_user(e, mi, msgs)
                 : encode_assistant(e, mi, msgs);
        if (st != AH_OK)
            return st;
    }
    if (o->max_tokens > 0 &&
        !ah__json_put_num(
            root, o->chat_legacy_max_tokens ? "max_tokens" : "max_completion_tokens",
            (double)o->max_tokens))
        return ah__enc_nomem(e);
    if ((st = encode_tools(e, root)) != AH_OK ||
        (st = ah__enc_openai_tool_choice(e, root, 1)) != AH_OK)
        return st;
    if (o->n_stop) {
        cJSON *stop = cJSON_CreateStringArray(o->stop, (int)o->n_stop);
        if (!stop)
            return ah__enc_nomem(e);
        cJSON_AddItemToObject(root, "stop", stop);
    }
    if (o->has_temperature && !ah__json_put_num(root, "temperature", o->temperature))
        return ah__enc_nomem(e);
    if (o->reasoning_effort &&
        !ah__json_put_str(root, "reasoning_effort", o->reasoning_effort))
        return ah__enc_nomem(e);
    if (o->cache && o->prompt_cache_key &&
        !ah__json_put_str(root, "prompt_cache_key", o->prompt_cache_key))
        return ah__enc_nomem(e);
    if (o->stream) {
        /* include_usage: the last chunk then carries token usage (for llm_call_end). */
        cJSON *so = NULL;
        if (!ah__json_put_bool(root, "stream", 1) ||
            !(so = cJSON_AddObjectToObject(root, "stream_options")) ||
            !ah__json_put_bool(so, "include_usage", 1))
            return ah__enc_nomem(e);
    }
    return AH_OK;
}
