/* encode_anthropic.c - the Anthropic Messages API request body (POST /v1/messages).
 *
 * Shape: {model, max_tokens, system?, messages[], tools?, tool_choice?, stop_sequences?,
 * temperature?, thinking?, stream?}. Every message uses the content-block array form.
 *
 * Invariants (each from the Messages API docs, see docs/providers-encoding.md):
 *   - the system prompt is the top-level "system", never a message;
 *   - in a user message, tool_result blocks come first, text after them;
 *   - tool_use "input" is a JSON object (the neutral arguments text, inserted verbatim);
 *   - thinking blocks travel with their signature, unmodified; a reasoning block without
 *     a signature (e.g. from another wire format) cannot be verified and is left out;
 *   - empty text blocks are left out (the API rejects them), and so is a message left
 *     with no block;
 *   - a trailing assistant message is a prefill the model continues: its last text block
 *     is sent without trailing whitespace (rejected otherwise) and its reasoning blocks
 *     are left out (prefill is not supported together with thinking). History itself is
 *     never changed;
 *   - images and documents are image / document blocks whose source is base64 (data
 *     given, or a data: URL) or url; a tool result that carries an image sends its
 *     content as [text, image];
 *   - prompt caching (opts.cache): cache_control breakpoints at the end of tools +
 *     system (on the system text, sent in its block form, or on the last tool when there
 *     is no system) and on the last block of message cache_history - 1 that is not a
 *     thinking block (the API refuses cache_control on thinking blocks); never more than
 *     AH_CACHE_MAX_BREAKPOINTS.
 */
#include "encode_internal.h"

#include <stdlib.h>
#include <string.h>

static int is_ws(char ch)
{
    return ch == ' ' || ch == '\t' || ch == '\n' || ch == '\r' || ch == '\v' ||
           ch == '\f';
}

/* {"type":"ephemeral"} with the ttl when it is "1h" ("5m" is the API's default). */
static int add_cache_control(const ah__enc *e, cJSON *obj)
{
    cJSON *cc = cJSON_AddObjectToObject(obj, "cache_control");
    return cc && ah__json_put_str(cc, "type", "ephemeral") &&
           (!e->opts->cache_ttl || strcmp(e->opts->cache_ttl, "1h") != 0 ||
            ah__json_put_str(cc, "ttl", "1h"));
}

/* A block's "source": base64 (data, or a data: URL) or url. */
static int put_source(cJSON *obj, const ah_msg_block *b)
{
    cJSON *src = cJSON_AddObjectToObject(obj, "source");
    char mt[128];
    const char *data = NULL;
    if (!src)
        return 0;
    if (b->data)
        return ah__json_put_str(src, "type", "base64") &&
               ah__json_put_str(src, "media_type", b->media_type) &&
               ah__json_put_str(src, "data", b->data);
    if (ah__enc_split_data_url(b->url, mt, sizeof mt, &data))
        return ah__json_put_str(src, "type", "base64") &&
               ah__json_put_str(src, "media_type", mt) && ah__json_put_str(src, "data", data);
    return ah__json_put_str(src, "type", "url") && ah__json_put_str(src, "url", b->url);
}

/* An image or document block (for a tool result, its image). */
static ah_status put_media(ah__enc *e, cJSON *content, const ah_msg_block *b)
{
    cJSON *o = ah__json_push_object(content);
    int doc = b->kind == AH_MSG_DOCUMENT;
    if (!o || !ah__json_put_str(o, "type", doc ? "document" : "image") || !put_source(o, b) ||
        (doc && b->name && *b->name && !ah__json_put_str(o, "title", b->name)))
        return ah__enc_nomem(e);
    return AH_OK;
}

static ah_status encode_tools(ah__enc *e, cJSON *root)
{
    const ah_request_opts *o = e->opts;
    if (!o->n_tools)
        return AH_OK;
    cJSON *tools = cJSON_AddArrayToObject(root, "tools");
    if (!tools)
        return ah__enc_nomem(e);
    for (size_t i = 0; i < o->n_tools; i++) {
        ah_status st = ah__enc_tool_fields(e, ah__json_push_object(tools), i, "input_schema");
        if (st != AH_OK)
            return st;
    }
    return AH_OK;
}

static ah_status encode_tool_choice(ah__enc *e, cJSON *root)
{
    const char *type = NULL;
    switch (e->opts->tool_choice) {
    case AH_TOOL_CHOICE_AUTO:
        type = "auto";
        break;
    case AH_TOOL_CHOICE_NONE:
        type = "none";
        break;
    case AH_TOOL_CHOICE_REQUIRED:
        type = "any";
        break;
    case AH_TOOL_CHOICE_NAMED:
        type = "tool";
        break;
    default:
        return AH_OK;
    }
    cJSON *tc = cJSON_AddObjectToObject(root, "tool_choice");
    if (!tc || !ah__json_put_str(tc, "type", type) ||
        (e->opts->tool_choice == AH_TOOL_CHOICE_NAMED &&
         !ah__json_put_str(tc, "name", e->opts->tool_choice_name)))
        return ah__enc_nomem(e);
    return AH_OK;
}

static ah_status encode_user(ah__enc *e, size_t mi, cJSON *content)
{
    size_t n = ah_conversation_block_count(e->conv, mi);
    /* Two passes: the API wants every tool_result before any text in the message. */
    for (size_t pass = 0; pass < 2; pass++) {
        for (size_t bi = 0; bi < n; bi++) {
            const ah_msg_block *b = ah_conversation_block(e->conv, mi, bi);
            if (pass == 0 && b->kind == AH_MSG_TOOL_RESULT) {
                cJSON *o = ah__json_push_object(content);
                if (!o || !ah__json_put_str(o, "type", "tool_result") ||
                    !ah__json_put_str(o, "tool_use_id", b->tool_use_id) ||
                    (b->is_error && !ah__json_put_bool(o, "is_error", 1)))
                    return ah__enc_nomem(e);
                if (b->data || b->url) { /* a result that carries an image */
                    cJSON *parts = cJSON_AddArrayToObject(o, "content");
                    cJSON *t = NULL;
                    if (!parts || (*b->text && (!(t = ah__json_push_object(parts)) ||
                                                !ah__json_put_str(t, "type", "text") ||
                                                !ah__json_put_str(t, "text", b->text))))
                        return ah__enc_nomem(e);
                    ah_msg_block img = *b;
                    img.kind = AH_MSG_IMAGE;
                    ah_status st = put_media(e, parts, &img);
                    if (st != AH_OK)
                        return st;
                } else if (*b->text && !ah__json_put_str(o, "content", b->text)) {
                    return ah__enc_nomem(e);
                }
            } else if (pass == 1 &&
                       (b->kind == AH_MSG_IMAGE || b->kind == AH_MSG_DOCUMENT)) {
                ah_status st = put_media(e, content, b);
                if (st != AH_OK)
                    return st;
            } else if (pass == 1 && b->kind == AH_MSG_TEXT && *b->text) {
                cJSON *o = ah__json_push_object(content);
                if (!o || !ah__json_put_str(o, "type", "text") ||
                    !ah__json_put_str(o, "text", b->text))
                    return ah__enc_nomem(e);
            }
        }
    }
    return AH_OK;
}

static ah_status encode_assistant(ah__enc *e, size_t mi, cJSON *content, int trailing)
{
    size_t n = ah_conversation_block_count(e->conv, mi);
    for (size_t bi = 0; bi < n; bi++) {
        const ah_msg_block *b = ah_conversation_block(e->conv, mi, bi);
        cJSON *o = NULL;
        switch (b->kind) {
        case AH_MSG_TEXT:
            if (!*b->text)
                break;
            if (!(o = ah__json_push_object(content)) ||
                !ah__json_put_str(o, "type", "text") ||
                !ah__json_put_str(o, "text", b->text))
                return ah__enc_nomem(e);
            break;
        case AH_MSG_REASONING:
            if (trailing)
                break;
            if (b->redacted) {
                if (!b->encrypted_content || !*b->encrypted_content)
                    break;
                if (!(o = ah__json_push_object(content)) ||
                    !ah__json_put_str(o, "type", "redacted_thinking") ||
                    !ah__json_put_str(o, "data", b->encrypted_content))
                    return ah__enc_nomem(e);
            } else if (b->signature && *b->signature) {
                if (!(o = ah__json_push_object(content)) ||
                    !ah__json_put_str(o, "type", "thinking") ||
                    !ah__json_put_str(o, "thinking", b->text) ||
                    !ah__json_put_str(o, "signature", b->signature))
                    return ah__enc_nomem(e);
            }
            break;
        case AH_MSG_TOOL_USE: {
            const char *args = ah__enc_arguments(e, mi, bi, b);
            if (!args)
                return AH_ERR_INVALID;
            cJSON *input = NULL;
            if (!(o = ah__json_push_object(content)) ||
                !ah__json_put_str(o, "type", "tool_use") ||
                !ah__json_put_str(o, "id", b->id) ||
                !ah__json_put_str(o, "name", b->name) || !(input = ah__json_raw(args)))
                return ah__enc_nomem(e);
            cJSON_AddItemToObject(o, "input", input);
            break;
        }
        default:
            break; /* tool_result cannot be in an assistant message */
        }
    }
    if (!trailing)
        return AH_OK;
    /* Prefill: the final content block must not end in whitespace. Trim a copy in the
     * request only; a text block that trims to nothing is dropped and the one before it
     * is checked in turn. */
    for (;;) {
        int last = cJSON_GetArraySize(content) - 1;
        cJSON *blk = last >= 0 ? cJSON_GetArrayItem(content, last) : NULL;
        cJSON *type = blk ? cJSON_GetObjectItemCaseSensitive(blk, "type") : NULL;
        if (!cJSON_IsString(type) || strcmp(type->valuestring, "text") != 0)
            return AH_OK;
        cJSON *text = cJSON_GetObjectItemCaseSensitive(blk, "text");
        size_t len = strlen(text->valuestring);
        while (len && is_ws(text->valuestring[len - 1]))
            len--;
        if (len == 0) {
            cJSON_DeleteItemFromArray(content, last);
            continue;
        }
        text->valuestring[len] = '\0'; /* shortening in place is safe for cJSON */
        return AH_OK;
    }
}

/* The breakpoint of the earlier history: on the last block of message m that may carry
 * one (thinking blocks may not). 1 when placed. */
static int mark_message(const ah__enc *e, cJSON *m, int *ok)
{
    cJSON *content = cJSON_GetObjectItemCaseSensitive(m, "content");
    for (int i = cJSON_GetArraySize(content) - 1; i >= 0; i--) {
        cJSON *blk = cJSON_GetArrayItem(content, i);
        const cJSON *type = cJSON_GetObjectItemCaseSensitive(blk, "type");
        if (cJSON_IsString(type) && (strcmp(type->valuestring, "thinking") == 0 ||
                                     strcmp(type->valuestring, "redacted_thinking") == 0))
            continue;
        *ok = add_cache_control(e, blk);
        return 1;
    }
    return 0;
}

static ah_status encode_messages(ah__enc *e, cJSON *root, int *breakpoints)
{
    cJSON *msgs = cJSON_AddArrayToObject(root, "messages");
    if (!msgs)
        return ah__enc_nomem(e);
    size_t n = ah_conversation_count(e->conv);
    cJSON *mark = NULL; /* the last message sent of the earlier history */
    for (size_t mi = 0; mi < n; mi++) {
        ah_role role = ah_conversation_role(e->conv, mi);
        cJSON *m = cJSON_CreateObject();
        cJSON *content = NULL;
        if (!m || !ah__json_put_str(m, "role", ah_role_name(role)) ||
            !(content = cJSON_AddArrayToObject(m, "content"))) {
            cJSON_Delete(m);
            return ah__enc_nomem(e);
        }
        ah_status st =
            role == AH_ROLE_USER
                ? encode_user(e, mi, content)
                : encode_assistant(e, mi, content, ah__enc_is_trailing_assistant(e, mi));
        if (st != AH_OK || cJSON_GetArraySize(content) == 0) {
            cJSON_Delete(m); /* nothing to send for this message, or an error */
            if (st != AH_OK)
                return st;
            continue;
        }
        cJSON_AddItemToArray(msgs, m);
        if (mi < e->opts->cache_history)
            mark = m;
    }
    int ok = 1;
    if (e->opts->cache && mark && *breakpoints < AH_CACHE_MAX_BREAKPOINTS &&
        mark_message(e, mark, &ok))
        ++*breakpoints;
    return ok ? AH_OK : ah__enc_nomem(e);
}

ah_status ah__encode_anthropic(ah__enc *e, cJSON *root)
{
    const ah_request_opts *o = e->opts;
    const char *system = ah_conversation_system(e->conv);
    ah_status st;

    int breakpoints = 0;
    int has_system = system && *system;
    if (!ah__json_put_str(root, "model", o->model) ||
        !ah__json_put_num(root, "max_tokens", (double)o->max_tokens))
        return ah__enc_nomem(e);
    if (has_system && !o->cache && !ah__json_put_str(root, "system", system))
        return ah__enc_nomem(e);
    if (has_system && o->cache) {
        /* the block form, which can carry the breakpoint of tools + system */
        cJSON *arr = cJSON_AddArrayToObject(root, "system");
        cJSON *t = arr ? ah__json_push_object(arr) : NULL;
        if (!t || !ah__json_put_str(t, "type", "text") ||
            !ah__json_put_str(t, "text", system) || !add_cache_control(e, t))
            return ah__enc_nomem(e);
        breakpoints++;
    }
    if ((st = encode_messages(e, root, &breakpoints)) != AH_OK ||
        (st = encode_tools(e, root)) != AH_OK ||
        (st = encode_tool_choice(e, root)) != AH_OK)
        return st;
    if (o->cache && !has_system && o->n_tools && breakpoints < AH_CACHE_MAX_BREAKPOINTS) {
        cJSON *tools = cJSON_GetObjectItemCaseSensitive(root, "tools");
        if (!add_cache_control(e, cJSON_GetArrayItem(tools, cJSON_GetArraySize(tools) - 1)))
            return ah__enc_nomem(e);
        breakpoints++;
    }
    if (o->n_stop) {
        cJSON *stop = cJSON_CreateStringArray(o->stop, (int)o->n_stop);
        if (!stop)
            return ah__enc_nomem(e);
        cJSON_AddItemToObject(root, "stop_sequences", stop);
    }
    if (o->has_temperature && !ah__json_put_num(root, "temperature", o->temperature))
        return ah__enc_nomem(e);
    if (o->thinking_budget > 0) {
        cJSON *th = cJSON_AddObjectToObject(root, "thinking");
        if (!th || !ah__json_put_str(th, "type", "enabled") ||
            !ah__json_put_num(th, "budget_tokens", (double)o->thinking_budget))
            return ah__enc_nomem(e);
    }
    if (o->stream && !ah__json_put_bool(root, "stream", 1))
        return ah__enc_nomem(e);
    return AH_OK;
}
