/* encode_responses.c - the OpenAI Responses API request body (POST /v1/responses).
 *
 * Shape: {model, instructions?, input[], max_output_tokens?, tools?, tool_choice?,
 * temperature?, reasoning?, include?, store, background?, stream?}.
 *
 * The request is stateless: the whole history travels in "input" every time, nothing
 * refers to a stored response, and "store" is false (a caller may override it through
 * extra_json) unless background mode is on (opts.background: "background": true,
 * "store": true). Mapping from the neutral model (see docs/providers-encoding.md):
 *   - the system prompt is "instructions";
 *   - user text blocks become one message item with input_text parts; tool_result
 *     blocks become function_call_output items (call_id + output), placed first;
 *   - assistant blocks become items in order: consecutive text blocks one message item
 *     with output_text parts, tool_use a function_call item (arguments as a JSON
 *     STRING), reasoning a reasoning item (id, summary, encrypted_content);
 *   - a reasoning block without encrypted_content is left out: with store false the
 *     server cannot resolve it by id alone. Anthropic redacted data is not sent here;
 *   - there are no stop sequences in this API: opts.stop is an error, not silently lost;
 *   - a trailing assistant message is sent like any other: its message item is last;
 *   - images are input_image parts (image_url: the URL or a data: URL), documents
 *     input_file parts (file_url, or filename + file_data as a data: URL); a tool
 *     result that carries an image has an output list [input_text, input_image];
 *   - prompt caching: prompt_cache_key when opts.cache and the key are set.
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
        ah_status st = ah__enc_tool_fields(e, t, i, "parameters");
        if (st != AH_OK)
            return st;
        /* Function tools default to strict here, which rejects ordinary schemas (strict
         * needs additionalProperties false and every property required): ask for the
         * same non-strict behaviour the other formats have. */
        if (!ah__json_put_bool(t, "strict", 0))
            return ah__enc_nomem(e);
    }
    return AH_OK;
}

/* Append a message item {type: message, role, content: []}; returns its content array. */
static cJSON *push_message(cJSON *input, const char *role)
{
    cJSON *m = ah__json_push_object(input);
    if (!m || !ah__json_put_str(m, "type", "message") ||
        !ah__json_put_str(m, "role", role))
        return NULL;
    return cJSON_AddArrayToObject(m, "content");
}

/* input_image (image_url: the url or a data: URL) or input_file (file_url, or file_data
 * as a data: URL with a filename). */
static ah_status put_media(ah__enc *e, cJSON *parts, const ah_msg_block *b)
{
    int doc = b->kind == AH_MSG_DOCUMENT;
    int by_url = b->url && strncmp(b->url, "data:", 5) != 0;
    char *url = ah__enc_media_url(b);
    cJSON *p = url ? ah__json_push_object(parts) : NULL;
    int ok = p && ah__json_put_str(p, "type", doc ? "input_file" : "input_image");
    if (ok && !doc)
        ok = ah__json_put_str(p, "image_url", url) && ah__json_put_str(p, "detail", "auto");
    else if (ok && by_url)
        ok = ah__json_put_str(p, "file_url", url);
    else if (ok)
        ok = ah__json_put_str(p, "filename", b->name && *b->name ? b->name : "document.pdf") &&
             ah__json_put_str(p, "file_data", url);
    free(url);
    return ok ? AH_OK : ah__enc_nomem(e);
}

static ah_status encode_user(ah__enc *e, size_t mi, cJSON *input)
{
    size_t n = ah_conversation_block_count(e->conv, mi);
    for (size_t bi = 0; bi < n; bi++) {
        const ah_msg_block *b = ah_conversation_block(e->conv, mi, bi);
        if (b->kind != AH_MSG_TOOL_RESULT)
            continue;
        cJSON *it = ah__json_push_object(input);
        if (!it || !ah__json_put_str(it, "type", "function_call_output") ||
            !ah__json_put_str(it, "call_id", b->tool_use_id))
            return ah__enc_nomem(e);
        if (!b->data && !b->url) {
            if (!ah__json_put_str(it, "output", b->text))
                return ah__enc_nomem(e);
            continue;
        }
        /* a result that carries an image: output as a list of input parts */
        cJSON *out = cJSON_AddArrayToObject(it, "output");
        cJSON *t = NULL;
        if (!out || (*b->text && (!(t = ah__json_push_object(out)) ||
                                  !ah__json_put_str(t, "type", "input_text") ||
                                  !ah__json_put_str(t, "text", b->text))))
            return ah__enc_nomem(e);
        ah_msg_block img = *b;
        img.kind = AH_MSG_IMAGE;
        ah_status st = put_media(e, out, &img);
        if (st != AH_OK)
            return st;
    }
    cJSON *content = NULL;
    for (size_t bi = 0; bi < n; bi++) {
        const ah_msg_block *b = ah_conversation_block(e->conv, mi, bi);
        int media = b->kind == AH_MSG_IMAGE || b->kind == AH_MSG_DOCUMENT;
        if (!media && (b->kind != AH_MSG_TEXT || !*b->text))
            continue;
        if (!content && !(content = push_message(input, "user")))
            return ah__enc_nomem(e);
        if (media) {
            ah_status st = put_media(e, content, b);
            if (st != AH_OK)
                return st;
            continue;
        }
        cJSON *p = ah__json_push_object(content);
        if (!p || !ah__json_put_str(p, "type", "input_text") ||
            !ah__json_put_str(p, "text", b->text))
            return ah__enc_nomem(e);
    }
    return AH_OK;
}

static ah_status encode_assistant(ah__enc *e, size_t mi, cJSON *input)
{
    size_t n = ah_conversation_block_count(e->conv, mi);
    cJSON *content = NULL; /* the open assistant message item, while texts follow texts */
    for (size_t bi = 0; bi < n; bi++) {
        const ah_msg_block *b = ah_conversation_block(e->conv, mi, bi);
        cJSON *it = NULL;
        switch (b->kind) {
        case AH_MSG_TEXT: {
            if (!*b->text)
                break;
            if (!content && !(content = push_message(input, "assistant")))
                return ah__enc_nomem(e);
            cJSON *p = ah__json_push_object(content);
            if (!p || !ah__json_put_str(p, "type", "output_text") ||
                !ah__json_put_str(p, "text", b->text) ||
                !cJSON_AddArrayToObject(p, "annotations"))
                return ah__enc_nomem(e);
            break;
        }
        case AH_MSG_REASONING: {
            if (b->redacted || !b->encrypted_content || !*b->encrypted_content)
                break;
            cJSON *summary = NULL;
            content = NULL;
            if (!(it = ah__json_push_object(input)) ||
                !ah__json_put_str(it, "type", "reasoning") ||
                (b->item_id && *b->item_id && !ah__json_put_str(it, "id", b->item_id)) ||
                !(summary = cJSON_AddArrayToObject(it, "summary")))
                return ah__enc_nomem(e);
            if (*b->text) {
                cJSON *s = ah__json_push_object(summary);
                if (!s || !ah__json_put_str(s, "type", "summary_text") ||
                    !ah__json_put_str(s, "text", b->text))
                    return ah__enc_nomem(e);
            }
            if (!ah__json_put_str(it, "encrypted_content", b->encrypted_content))
                return ah__enc_nomem(e);
            break;
        }
        case AH_MSG_TOOL_USE: {
            const char *args = ah__enc_arguments(e, mi, bi, b);
            if (!args)
                return AH_ERR_INVALID;
            content = NULL;
            if (!(it = ah__json_push_object(input)) ||
                !ah__json_put_str(it, "type", "function_call") ||
                !ah__json_put_str(it, "call_id", b->id) ||
                !ah__json_put_str(it, "name", b->name) ||
                !ah__json_put_str(it, "arguments", args))
                return ah__enc_nomem(e);
            break;
        }
        default:
            break;
        }
    }
    return AH_OK;
}

ah_status ah__encode_responses(ah__enc *e, cJSON *root)
{
    const ah_request_opts *o = e->opts;
    const char *system = ah_conversation_system(e->conv);
    ah_status st;

    if (o->n_stop)
        return ah__enc_fail(e, AH_ERR_INVALID,
                            "opts.stop: the responses wire format has no stop sequences");
    if (!ah__json_put_str(root, "model", o->model) ||
        (system && *system && !ah__json_put_str(root, "instructions", system)))
        return ah__enc_nomem(e);
    cJSON *input = cJSON_AddArrayToObject(root, "input");
    if (!input)
        return ah__enc_nomem(e);
    size_t n = ah_conversation_count(e->conv);
    for (size_t mi = 0; mi < n; mi++) {
        st = ah_conversation_role(e->conv, mi) == AH_ROLE_USER
                 ? encode_user(e, mi, input)
                 : encode_assistant(e, mi, input);
        if (st != AH_OK)
            return st;
    }
    if (o->max_tokens > 0 &&
        !ah__json_put_num(root, "max_output_tokens", (double)o->max_tokens))
        return ah__enc_nomem(e);
    if ((st = encode_tools(e, root)) != AH_OK ||
        (st = ah__enc_openai_tool_choice(e, root, 0)) != AH_OK)
        return st;
    if (o->has_temperature && !ah__json_put_num(root, "temperature", o->temperature))
        return ah__enc_nomem(e);
    if (o->cache && o->prompt_cache_key &&
        !ah__json_put_str(root, "prompt_cache_key", o->prompt_cache_key))
        return ah__enc_nomem(e);
    if (o->reasoning_effort) {
        cJSON *r = cJSON_AddObjectToObject(root, "reasoning");
        if (!r || !ah__json_put_str(r, "effort", o->reasoning_effort))
            return ah__enc_nomem(e);
    }
    if (o->include_encrypted_reasoning) {
        const char *inc[] = {"reasoning.encrypted_content"};
        cJSON *arr = cJSON_CreateStringArray(inc, 1);
        if (!arr)
            return ah__enc_nomem(e);
        cJSON_AddItemToObject(root, "include", arr);
    }
    /* Background mode runs the response on the provider's side whatever happens to the
     * connection, and keeps it so that its stream can be re-attached at a sequence
     * number: it needs the response stored. The history still travels whole in
     * "input": nothing refers to the stored response. */
    if (!ah__json_put_bool(root, "store", o->background) ||
        (o->background && !ah__json_put_bool(root, "background", 1)) ||
        (o->stream && !ah__json_put_bool(root, "stream", 1)))
        return ah__enc_nomem(e);
    return AH_OK;
}
