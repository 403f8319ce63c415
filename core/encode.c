/* encode.c - request encoding entry point: option validation, dispatch to the wire
 * format's encoder, the extra_json merge, printing, and the request headers.
 *
 * A format-blind driver: what differs between formats is in the provider's table
 * (provider.h); nothing here branches on the format.
 *
 * Invariants: encoding only reads the conversation and the options (a request never
 * contains anything history does not show); an error message names the tool, block or
 * option at fault and never contains an API key or block content; on failure nothing is
 * returned and nothing leaks.
 */
#include "encode_internal.h"
#include "provider.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void ah_request_opts_init(ah_request_opts *o)
{
    if (o)
        memset(o, 0, sizeof *o);
}

ah_status ah__enc_fail(ah__enc *e, ah_status st, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    if (e->errsize) {
        int n = vsnprintf(e->err, e->errsize, fmt, ap);
        if (n < 0)
            e->err[0] = '\0';
    }
    va_end(ap);
    return st;
}

int ah__json_put_str(cJSON *obj, const char *key, const char *s)
{
    return cJSON_AddStringToObject(obj, key, s ? s : "") != NULL;
}

int ah__json_put_num(cJSON *obj, const char *key, double v)
{
    return cJSON_AddNumberToObject(obj, key, v) != NULL;
}

int ah__json_put_bool(cJSON *obj, const char *key, int v)
{
    return cJSON_AddBoolToObject(obj, key, v ? 1 : 0) != NULL;
}

cJSON *ah__json_push_object(cJSON *arr)
{
    cJSON *o = cJSON_CreateObject();
    if (o && !cJSON_AddItemToArray(arr, o)) {
        cJSON_Delete(o);
        return NULL;
    }
    return o;
}

int ah__enc_is_trailing_assistant(const ah__enc *e, size_t msg)
{
    size_t n = ah_conversation_count(e->conv);
    return n > 0 && msg == n - 1 &&
           ah_conversation_role(e->conv, msg) == AH_ROLE_ASSISTANT;
}

/* Parse text and classify it: 1 = a JSON object, 0 = valid JSON of another type,
 * -1 = not valid JSON (*offset = where parsing stopped). cJSON reports an allocation
 * failure as a parse failure; that is rare enough to leave as "not valid JSON". */
static int classify_json(const char *text, size_t *offset)
{
    const char *end = NULL;
    cJSON *v = cJSON_ParseWithOpts(text, &end, 1);
    if (!v) {
        *offset = end && end >= text ? (size_t)(end - text) : 0;
        return -1;
    }
    int is_obj = cJSON_IsObject(v);
    cJSON_Delete(v);
    return is_obj ? 1 : 0;
}

static int is_blank(const char *s)
{
    for (; s && *s; s++)
        if (*s != ' ' && *s != '\t' && *s != '\n' && *s != '\r')
            return 0;
    return 1;
}

ah_status ah_tool_schema_check(const char *schema_json, char *err, size_t errsize)
{
    char dummy[8];
    if (!err) {
        err = dummy;
        errsize = sizeof dummy;
    }
    if (!schema_json)
        return AH_OK; /* the default, {"type":"object"} */
    const char *end = NULL;
    cJSON *v = cJSON_ParseWithOpts(schema_json, &end, 1);
    if (!v) {
        size_t off = end && end >= schema_json ? (size_t)(end - schema_json) : 0;
        ah__bufprintf(err, errsize, "is not valid JSON at offset %zu", off);
        return AH_ERR_INVALID;
    }
    ah_status st = AH_OK;
    const cJSON *type = cJSON_GetObjectItemCaseSensitive(v, "type");
    if (!cJSON_IsObject(v)) {
        ah__bufprintf(err, errsize, "is not a JSON object (it is %s)",
                      cJSON_IsArray(v)    ? "an array"
                      : cJSON_IsString(v) ? "a string"
                      : cJSON_IsNumber(v) ? "a number"
                                          : "not an object");
        st = AH_ERR_INVALID;
    } else if (type && !(cJSON_IsString(type) && strcmp(type->valuestring, "object") == 0)) {
        char *t = cJSON_PrintUnformatted(type);
        ah__bufprintf(err, errsize,
                      "is not an object schema: its \"type\" is %.40s (a tool's arguments "
                      "are one object: {\"type\": \"object\", \"properties\": ...})",
                      t ? t : "not \"object\"");
        cJSON_free(t);
        st = AH_ERR_INVALID;
    }
    cJSON_Delete(v);
    return st;
}

cJSON *ah__enc_tool_schema(ah__enc *e, size_t i, ah_status *st_out)
{
    const ah_tool_def *t = &e->opts->tools[i];
    const char *schema = t->schema_json ? t->schema_json : "{\"type\":\"object\"}";
    char why[200];
    if (ah_tool_schema_check(schema, why, sizeof why) != AH_OK) {
        *st_out = ah__enc_fail(e, AH_ERR_INVALID, "tool '%.64s': schema_json %s", t->name, why);
        return NULL;
    }
    cJSON *raw = ah__json_raw(schema);
    if (!raw)
        *st_out = ah__enc_fail(e, AH_ERR_NOMEM, "out of memory");
    return raw;
}

ah_status ah__enc_tool_fields(ah__enc *e, cJSON *obj, size_t i, const char *schema_key)
{
    const ah_tool_def *t = &e->opts->tools[i];
    if (!obj || !ah__json_put_str(obj, "name", t->name) ||
        (t->description && !ah__json_put_str(obj, "description", t->description)))
        return ah__enc_nomem(e);
    ah_status st = AH_OK;
    cJSON *schema = ah__enc_tool_schema(e, i, &st);
    if (!schema)
        return st;
    cJSON_AddItemToObject(obj, schema_key, schema);
    return AH_OK;
}

cJSON *ah__json_raw(const char *json)
{
    /* Raw keeps the caller's exact tokens (no number re-formatting through a double);
     * minifying a copy only drops whitespace between tokens, so the body stays one
     * unformatted line. json has been validated, so it holds no comments to strip. */
    char *copy = ah__strdup(json);
    if (!copy)
        return NULL;
    cJSON_Minify(copy);
    cJSON *raw = cJSON_CreateRaw(copy);
    free(copy);
    return raw;
}

const char *ah__enc_arguments(ah__enc *e, size_t msg, size_t blk, const ah_msg_block *b)
{
    const char *args = b->arguments;
    if (is_blank(args))
        return "{}";
    size_t off = 0;
    int k = classify_json(args, &off);
    if (k == 1)
        return args;
    if (k == 0) {
        /* Valid JSON that is not an object ([1,2,3], 42, "s", null): what a model sent,
         * kept in history as sent, but no provider takes it back as a call's arguments.
         * The worker answered that call with a tool error, so the call goes out as {}. */
        return "{}";
    }
    ah__enc_fail(e, AH_ERR_INVALID,
                 "message %zu block %zu (tool_use '%.64s' id '%.64s'): arguments are not "
                 "valid JSON at offset %zu",
                 msg, blk, b->name, b->id, off);
    return NULL;
}

/* The checks, the same for every format but for what the provider's table says. */
static ah_status validate_opts(ah__enc *e, const ah__provider *p)
{
    const ah_request_opts *o = e->opts;
    if (!o->model || !*o->model)
        return ah__enc_fail(e, AH_ERR_INVALID, "opts.model is required");
    if (o->max_tokens < 0)
        return ah__enc_fail(e, AH_ERR_INVALID, "opts.max_tokens must not be negative");
    if (p->needs_max_tokens && o->max_tokens == 0)
        return ah__enc_fail(e, AH_ERR_INVALID,
                            "opts.max_tokens is required by the %s wire format", p->name);
    if (o->n_tools && !o->tools)
        return ah__enc_fail(e, AH_ERR_INVALID, "opts.tools is NULL but n_tools is %zu",
                            o->n_tools);
    for (size_t i = 0; i < o->n_tools; i++) {
        if (!o->tools[i].name || !*o->tools[i].name)
            return ah__enc_fail(e, AH_ERR_INVALID, "opts.tools[%zu] has no name", i);
        for (size_t j = 0; j < i; j++)
            if (strcmp(o->tools[i].name, o->tools[j].name) == 0)
                return ah__enc_fail(e, AH_ERR_INVALID, "tool '%.64s' is declared twice",
                                    o->tools[i].name);
    }
    switch (o->tool_choice) {
    case AH_TOOL_CHOICE_DEFAULT:
    case AH_TOOL_CHOICE_AUTO:
    case AH_TOOL_CHOICE_NONE:
        break;
    case AH_TOOL_CHOICE_REQUIRED:
        if (!o->n_tools)
            return ah__enc_fail(
                e, AH_ERR_INVALID,
                "opts.tool_choice is 'required' but no tools are declared");
        break;
    case AH_TOOL_CHOICE_NAMED: {
        int found = 0;
        for (size_t i = 0; o->tool_choice_name && i < o->n_tools; i++)
            found |= strcmp(o->tools[i].name, o->tool_choice_name) == 0;
        if (!found)
            return ah__enc_fail(e, AH_ERR_INVALID,
                                "opts.tool_choice_name '%.64s' is not a declared tool",
                                o->tool_choice_name ? o->tool_choice_name : "(null)");
        break;
    }
    default:
        return ah__enc_fail(e, AH_ERR_INVALID, "opts.tool_choice %d is unknown",
                            (int)o->tool_choice);
    }
    if (o->n_stop && !o->stop)
        return ah__enc_fail(e, AH_ERR_INVALID, "opts.stop is NULL but n_stop is %zu",
                            o->n_stop);
    for (size_t i = 0; i < o->n_stop; i++)
        if (!o->stop[i] || !*o->stop[i])
            return ah__enc_fail(e, AH_ERR_INVALID, "opts.stop[%zu] is empty", i);
    if (o->has_temperature && !isfinite(o->temperature))
        return ah__enc_fail(e, AH_ERR_INVALID, "opts.temperature is not a finite number");
    if (o->thinking_budget < 0)
        return ah__enc_fail(e, AH_ERR_INVALID,
                            "opts.thinking_budget must not be negative");
    if (o->background && !p->reattach_url)
        return ah__enc_fail(e, AH_ERR_INVALID,
                            "opts.background is not available on the %s wire format "
                            "(it has no background responses)",
                            p->name);
    if (o->reasoning_effort && !*o->reasoning_effort)
        return ah__enc_fail(e, AH_ERR_INVALID, "opts.reasoning_effort is empty");
    if (o->cache_ttl && strcmp(o->cache_ttl, "5m") != 0 && strcmp(o->cache_ttl, "1h") != 0)
        return ah__enc_fail(e, AH_ERR_INVALID,
                            "opts.cache_ttl '%.16s' is not \"5m\" or \"1h\"", o->cache_ttl);
    if (o->prompt_cache_key && !*o->prompt_cache_key)
        return ah__enc_fail(e, AH_ERR_INVALID, "opts.prompt_cache_key is empty");
    if (o->cache_history > ah_conversation_count(e->conv))
        return ah__enc_fail(e, AH_ERR_INVALID,
                            "opts.cache_history %zu is past the conversation's %zu messages",
                            o->cache_history, ah_conversation_count(e->conv));
    return AH_OK;
}

/* Set every member of the extra_json object on root, replacing same-named members. */
static ah_status merge_extra(ah__enc *e, cJSON *root)
{
    const char *text = e->opts->extra_json;
    if (!text)
        return AH_OK;
    const char *end = NULL;
    cJSON *extra = cJSON_ParseWithOpts(text, &end, 1);
    if (!extra)
        return ah__enc_fail(e, AH_ERR_INVALID,
                            "opts.extra_json is not valid JSON at offset %zu",
                            end && end >= text ? (size_t)(end - text) : (size_t)0);
    ah_status st = AH_OK;
    if (!cJSON_IsObject(extra)) {
        st = ah__enc_fail(e, AH_ERR_INVALID, "opts.extra_json is not a JSON object");
        goto cleanup;
    }
    while (extra->child) {
        cJSON *item = cJSON_DetachItemViaPointer(extra, extra->child);
        /* Replace frees the item's own key before copying the new one: copy it first. */
        char *key = ah__strdup(item->string ? item->string : "");
        int ok = key != NULL;
        if (ok && cJSON_GetObjectItemCaseSensitive(root, key))
            ok = cJSON_ReplaceItemInObjectCaseSensitive(root, key, item);
        else if (ok)
            ok = cJSON_AddItemToObject(root, key, item);
        free(key);
        if (!ok) {
            cJSON_Delete(item);
            st = ah__enc_fail(e, AH_ERR_NOMEM, "out of memory");
            goto cleanup;
        }
    }
cleanup:
    cJSON_Delete(extra);
    return st;
}

ah_status ah_request_encode(ah_wire w, const ah_conversation *c,
                            const ah_request_opts *opts, char **body_out, size_t *len_out,
                            char *err, size_t errsize)
{
    char scratch[1];
    ah__enc e = {.conv = c, .opts = opts, .err = err, .errsize = err ? errsize : 0};
    if (!err || !errsize) {
        e.err = scratch;
        e.errsize = sizeof scratch;
    }
    e.err[0] = '\0';
    if (body_out)
        *body_out = NULL;
    if (len_out)
        *len_out = 0;
    if (!c || !opts || !body_out)
        return ah__enc_fail(&e, AH_ERR_INVALID,
                            "conversation, opts and body_out are required");
    const ah__provider *p = ah__provider_of(w);
    if (!p)
        return ah__enc_fail(&e, AH_ERR_INVALID, "unknown wire format %d", (int)w);

    ah_status st = validate_opts(&e, p);
    if (st != AH_OK)
        return st;
    cJSON *root = cJSON_CreateObject();
    if (!root)
        return ah__enc_fail(&e, AH_ERR_NOMEM, "out of memory");
    st = p->encode(&e, root);
    if (st == AH_OK)
        st = merge_extra(&e, root);
    if (st == AH_OK) {
        /* cJSON_PrintUnformatted's text, written in one pass (json_print.c) */
        char *s = ah__json_print(root, len_out);
        if (!s)
            st = ah__enc_fail(&e, AH_ERR_NOMEM, "out of memory");
        else
            *body_out = s;
    }
    cJSON_Delete(root);
    return st;
}

/* ---- headers ---------------------------------------------------------------------- */

void ah_header_list_free(ah_header_list *l)
{
    if (!l)
        return;
    free(l->storage_);
    memset(l, 0, sizeof *l);
}

static void push_header(ah_header_list *l, const char *name, const char *value)
{
    l->items[l->count].name = name;
    l->items[l->count].value = value;
    l->count++;
}

ah_status ah_request_headers(ah_wire w, const char *api_key, int stream,
                             ah_header_list *out)
{
    if (!out)
        return AH_ERR_INVALID;
    memset(out, 0, sizeof *out);
    const ah__provider *p = ah__provider_of(w);
    if (!p)
        return AH_ERR_INVALID;
    for (const char *c = api_key; c && *c; c++)
        if ((unsigned char)*c < 0x20 || *c == 0x7f)
            return AH_ERR_INVALID; /* would split or corrupt the header line */

    push_header(out, "Content-Type", "application/json");
    push_header(out, "Accept", stream ? "text/event-stream" : "application/json");
    for (size_t i = 0; i < sizeof p->fixed_headers / sizeof p->fixed_headers[0]; i++)
        if (p->fixed_headers[i].name)
            push_header(out, p->fixed_headers[i].name, p->fixed_headers[i].value);
    if (api_key && *api_key) {
        size_t pl = strlen(p->key_prefix), kl = strlen(api_key);
        if (!(out->storage_ = malloc(pl + kl + 1))) {
            ah_header_list_free(out);
            return AH_ERR_NOMEM;
        }
        memcpy(out->storage_, p->key_prefix, pl);
        memcpy(out->storage_ + pl, api_key, kl + 1);
        push_header(out, p->key_header, out->storage_);
    }
    return AH_OK;
}

ah_status ah__enc_nomem(ah__enc *e)
{
    return ah__enc_fail(e, AH_ERR_NOMEM, "out of memory");
}

ah_status ah__enc_openai_tool_choice(ah__enc *e, cJSON *root, int nested)
{
    const char *mode = NULL;
    switch (e->opts->tool_choice) {
    case AH_TOOL_CHOICE_AUTO:
        mode = "auto";
        break;
    case AH_TOOL_CHOICE_NONE:
        mode = "none";
        break;
    case AH_TOOL_CHOICE_REQUIRED:
        mode = "required";
        break;
    case AH_TOOL_CHOICE_NAMED: {
        cJSON *tc = cJSON_AddObjectToObject(root, "tool_choice");
        cJSON *named = tc;
        if (!tc || !ah__json_put_str(tc, "type", "function") ||
            (nested && !(named = cJSON_AddObjectToObject(tc, "function"))) ||
            !ah__json_put_str(named, "name", e->opts->tool_choice_name))
            return ah__enc_nomem(e);
        return AH_OK;
    }
    default:
        return AH_OK;
    }
    return ah__json_put_str(root, "tool_choice", mode) ? AH_OK : ah__enc_nomem(e);
}

/* ---- media (images, documents) ------------------------------------------------------ */

char *ah__enc_media_url(const ah_msg_block *b)
{
    if (b->url)
        return ah__strdup(b->url);
    const char *mt = b->media_type ? b->media_type : "application/octet-stream";
    size_t n = strlen("data:;base64,") + strlen(mt) + strlen(b->data ? b->data : "") + 1;
    char *s = malloc(n);
    if (s)
        snprintf(s, n, "data:%s;base64,%s", mt, b->data ? b->data : "");
    return s;
}

int ah__enc_split_data_url(const char *url, char *media_type, size_t mtsize,
                           const char **data)
{
    if (!url || strncmp(url, "data:", 5) != 0)
        return 0;
    const char *semi = strstr(url + 5, ";base64,");
    if (!semi || (size_t)(semi - (url + 5)) >= mtsize)
        return 0;
    memcpy(media_type, url + 5, (size_t)(semi - (url + 5)));
    media_type[semi - (url + 5)] = '\0';
    *data = semi + strlen(";base64,");
    return 1;
}

const char *ah__enc_media_what(const ah_msg_block *b)
{
    return b->kind == AH_MSG_DOCUMENT ? "document"
           : b->kind == AH_MSG_IMAGE  ? "image"
                                      : "tool_result image";
}
