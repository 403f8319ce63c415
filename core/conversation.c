/* conversation.c - the neutral conversation model: owning storage, append helpers, read
 * access and the neutral JSON export/import.
 *
 * Invariants: every string reachable from a conversation is owned by it (deep copies
 * in, borrowed views out); a stored block only carries the fields its kind uses (the
 * others are NULL), and the fields its kind requires are never NULL; tool_use blocks
 * live only in assistant messages and tool_result blocks only in user messages.
 */
#include "internal.h"
#include "agenthost/conversation.h"

#include <cjson/cJSON.h>
#include <stdlib.h>
#include <string.h>

typedef struct message {
    ah_role role;
    int partial;
    ah_msg_block *blocks; /* strings owned (cast from const on free) */
    size_t n, cap;
} message;

struct ah_conversation {
    char *system;
    char *id; /* the conversation's id (its first run's), or NULL */
    message *msgs;
    size_t n, cap;
};

static const char *const kind_names[] = {
#define X(name, s) s,
    AH_MSG_KIND_MAP(X)
#undef X
};

const char *ah_role_name(ah_role role)
{
    switch (role) {
    case AH_ROLE_USER:
        return "user";
    case AH_ROLE_ASSISTANT:
        return "assistant";
    }
    return "unknown";
}

const char *ah_msg_kind_name(ah_msg_kind kind)
{
    return (unsigned)kind < (unsigned)AH_MSG_KIND_COUNT_ ? kind_names[kind] : "unknown";
}

/* ---- storage ---------------------------------------------------------------------- */

static void block_clear(ah_msg_block *b)
{
    free((void *)b->text);
    free((void *)b->id);
    free((void *)b->name);
    free((void *)b->arguments);
    free((void *)b->tool_use_id);
    free((void *)b->signature);
    free((void *)b->item_id);
    free((void *)b->encrypted_content);
    free((void *)b->media_type);
    free((void *)b->data);
    free((void *)b->url);
    memset(b, 0, sizeof *b);
}

static void message_clear(message *m)
{
    for (size_t i = 0; i < m->n; i++)
        block_clear(&m->blocks[i]);
    free(m->blocks);
    memset(m, 0, sizeof *m);
}

ah_conversation *ah_conversation_new(void)
{
    return calloc(1, sizeof(ah_conversation));
}

void ah_conversation_truncate(ah_conversation *c, size_t n)
{
    if (!c)
        return;
    while (c->n > n)
        message_clear(&c->msgs[--c->n]);
}

void ah_conversation_free(ah_conversation *c)
{
    if (!c)
        return;
    ah_conversation_truncate(c, 0);
    free(c->msgs);
    free(c->id);
    free(c->system);
    free(c);
}

/* Copy s (NULL stays NULL when !required, becomes "" when required). Returns 0 on OOM. */
static int dup_field(const char **dst, const char *s, int required)
{
    if (!s && !required) {
        *dst = NULL;
        return 1;
    }
    *dst = ah__strdup(s ? s : "");
    return *dst != NULL;
}

static int is_empty(const char *s)
{
    return !s || !*s;
}

static const char *const image_types[] = {"image/jpeg", "image/png", "image/gif",
                                          "image/webp", NULL};

static int one_of(const char *s, const char *const *list)
{
    for (size_t i = 0; list[i]; i++)
        if (strcmp(s, list[i]) == 0)
            return 1;
    return 0;
}

/* Standard base64 (RFC 4648 §4): the alphabet, '=' padding only at the end, a length
 * that is a multiple of 4. Returns the offset of the first bad byte, or -1. */
static long base64_bad(const char *s)
{
    size_t n = strlen(s), pad = 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char ch = (unsigned char)s[i];
        int alpha = (ch >= 'A' && ch <= 'Z') || (ch >= 'a' && ch <= 'z') ||
                    (ch >= '0' && ch <= '9') || ch == '+' || ch == '/';
        if (ch == '=' && i + 2 >= n && n % 4 == 0) {
            pad++;
            continue;
        }
        if (!alpha || pad)
            return (long)i;
    }
    return n % 4 == 0 && n > 0 ? -1 : (long)n;
}

/* The media fields of an image or document (or an image tool result). */
static ah_status media_check(const ah_msg_block *b, const char *const *types,
                             const char *types_text, char *err, size_t errsize)
{
    int has_data = b->data != NULL, has_url = b->url != NULL;
    if (has_data == has_url) {
        ah__bufprintf(err, errsize, "%s", has_data ? "data and url: give one, not both"
                                                    : "data or url: one is required");
        return AH_ERR_INVALID;
    }
    if (b->media_type && !one_of(b->media_type, types)) {
        ah__bufprintf(err, errsize, "media_type: '%.60s' is not %s", b->media_type,
                      types_text);
        return AH_ERR_INVALID;
    }
    if (has_data) {
        if (!b->media_type) {
            ah__bufprintf(err, errsize, "media_type: required with data (%s)", types_text);
            return AH_ERR_INVALID;
        }
        if (strncmp(b->data, "data:", 5) == 0) {
            ah__bufprintf(err, errsize,
                          "data: the bytes in base64, without a \"data:\" prefix (or "
                          "give the data: URL as url)");
            return AH_ERR_INVALID;
        }
        long bad = base64_bad(b->data);
        if (bad >= 0) {
            ah__bufprintf(err, errsize, "data: not base64 (at byte %ld)", bad);
            return AH_ERR_INVALID;
        }
    } else if (strncmp(b->url, "data:", 5) == 0) {
        /* data:<media type>;base64,<data>: the only form every format can take apart */
        const char *semi = strstr(b->url + 5, ";base64,");
        if (!semi) {
            ah__bufprintf(err, errsize,
                          "url: a data: URL must be data:<media type>;base64,<data>");
            return AH_ERR_INVALID;
        }
        char mt[64];
        size_t mlen = (size_t)(semi - (b->url + 5));
        if (mlen >= sizeof mt) {
            ah__bufprintf(err, errsize, "url: the data: URL's media type is too long");
            return AH_ERR_INVALID;
        }
        memcpy(mt, b->url + 5, mlen);
        mt[mlen] = '\0';
        if (!one_of(mt, types)) {
            ah__bufprintf(err, errsize, "url: the data: URL's media type '%s' is not %s", mt,
                          types_text);
            return AH_ERR_INVALID;
        }
        long bad = base64_bad(semi + 8);
        if (bad >= 0) {
            ah__bufprintf(err, errsize, "url: the data: URL's data is not base64 (at byte %ld)",
                          bad);
            return AH_ERR_INVALID;
        }
    } else if (strncmp(b->url, "https://", 8) != 0 && strncmp(b->url, "http://", 7) != 0) {
        ah__bufprintf(err, errsize, "url: '%.60s' is not an http(s) or data: URL", b->url);
        return AH_ERR_INVALID;
    }
    return AH_OK;
}

ah_status ah_msg_block_check(const ah_msg_block *b, char *err, size_t errsize)
{
    if (err && errsize)
        err[0] = '\0';
    if (!b) {
        ah__bufprintf(err, errsize, "no block");
        return AH_ERR_INVALID;
    }
    switch (b->kind) {
    case AH_MSG_TEXT:
    case AH_MSG_REASONING:
        return AH_OK;
    case AH_MSG_TOOL_USE:
        if (is_empty(b->id) || is_empty(b->name)) {
            ah__bufprintf(err, errsize, "%s: must not be empty", is_empty(b->id) ? "id" : "name");
            return AH_ERR_INVALID;
        }
        return AH_OK;
    case AH_MSG_TOOL_RESULT:
        if (is_empty(b->tool_use_id)) {
            ah__bufprintf(err, errsize, "tool_use_id: must not be empty");
            return AH_ERR_INVALID;
        }
        if (!b->media_type && !b->data && !b->url)
            return AH_OK;
        return media_check(b, image_types,
                           "one of image/jpeg, image/png, image/gif, image/webp", err,
                           errsize);
    case AH_MSG_IMAGE:
        return media_check(b, image_types,
                           "one of image/jpeg, image/png, image/gif, image/webp", err,
                           errsize);
    case AH_MSG_DOCUMENT: {
        static const char *const doc_types[] = {"application/pdf", NULL};
        if (!b->media_type && b->url == NULL) {
            ah__bufprintf(err, errsize, "media_type: required (application/pdf)");
            return AH_ERR_INVALID;
        }
        return media_check(b, doc_types, "application/pdf", err, errsize);
    }
    default:
        ah__bufprintf(err, errsize, "type: unknown block kind %d", (int)b->kind);
        return AH_ERR_INVALID;
    }
}

/* Check that *b is complete for its kind; never touches storage. */
static ah_status block_validate(const ah_msg_block *b)
{
    return ah_msg_block_check(b, NULL, 0);
}

/* Deep-copy the fields b's kind uses into *dst (zeroed first). On OOM *dst is cleared. */
static ah_status block_copy(ah_msg_block *dst, const ah_msg_block *b)
{
    int ok = 1;
    memset(dst, 0, sizeof *dst);
    dst->kind = b->kind;
    switch (b->kind) {
    case AH_MSG_TEXT:
        ok = dup_field(&dst->text, b->text, 1);
        break;
    case AH_MSG_REASONING:
        ok = dup_field(&dst->text, b->text, 1) &&
             dup_field(&dst->signature, b->signature, 0) &&
             dup_field(&dst->item_id, b->item_id, 0) &&
             dup_field(&dst->encrypted_content, b->encrypted_content, 0);
        dst->redacted = b->redacted ? 1 : 0;
        break;
    case AH_MSG_TOOL_USE:
        ok = dup_field(&dst->id, b->id, 1) && dup_field(&dst->name, b->name, 1) &&
             dup_field(&dst->arguments, b->arguments, 1);
        break;
    case AH_MSG_TOOL_RESULT:
        ok = dup_field(&dst->tool_use_id, b->tool_use_id, 1) &&
             dup_field(&dst->text, b->text, 1) &&
             dup_field(&dst->media_type, b->media_type, 0) &&
             dup_field(&dst->data, b->data, 0) && dup_field(&dst->url, b->url, 0);
        dst->is_error = b->is_error ? 1 : 0;
        break;
    case AH_MSG_IMAGE:
    case AH_MSG_DOCUMENT:
        ok = dup_field(&dst->media_type, b->media_type, 0) &&
             dup_field(&dst->data, b->data, 0) && dup_field(&dst->url, b->url, 0) &&
             (b->kind != AH_MSG_DOCUMENT || dup_field(&dst->name, b->name, 0));
        break;
    default:
        return AH_ERR_INVALID;
    }
    if (!ok) {
        block_clear(dst);
        return AH_ERR_NOMEM;
    }
    return AH_OK;
}

static ah_status begin_message(ah_conversation *c, ah_role role)
{
    if (!c)
        return AH_ERR_INVALID;
    if (c->n == c->cap) {
        /* 4 to start: a run's first turn has one or two messages (held by every
         * run in flight, so its memory per run) */
        size_t cap = c->cap ? c->cap * 2 : 4;
        message *m = realloc(c->msgs, cap * sizeof *m);
        if (!m)
            return AH_ERR_NOMEM;
        c->msgs = m;
        c->cap = cap;
    }
    memset(&c->msgs[c->n], 0, sizeof c->msgs[c->n]);
    c->msgs[c->n].role = role;
    c->n++;
    return AH_OK;
}

ah_status ah_conversation_begin_user(ah_conversation *c)
{
    return begin_message(c, AH_ROLE_USER);
}

ah_status ah_conversation_begin_assistant(ah_conversation *c)
{
    return begin_message(c, AH_ROLE_ASSISTANT);
}

ah_status ah_conversation_add_block(ah_conversation *c, const ah_msg_block *b)
{
    if (!c || !b)
        return AH_ERR_INVALID;
    if (c->n == 0)
        return AH_ERR_STATE;
    ah_status st = block_validate(b);
    if (st != AH_OK)
        return st;
    message *m = &c->msgs[c->n - 1];
    if ((b->kind == AH_MSG_TOOL_USE && m->role != AH_ROLE_ASSISTANT) ||
        ((b->kind == AH_MSG_TOOL_RESULT || b->kind == AH_MSG_IMAGE ||
          b->kind == AH_MSG_DOCUMENT) &&
         m->role != AH_ROLE_USER))
        return AH_ERR_STATE;
    if (m->n == m->cap) {
        /* most messages are one block (a prompt, a text reply) */
        size_t cap = m->cap ? m->cap * 2 : 1;
        ah_msg_block *nb = realloc(m->blocks, cap * sizeof *nb);
        if (!nb)
            return AH_ERR_NOMEM;
        m->blocks = nb;
        m->cap = cap;
    }
    st = block_copy(&m->blocks[m->n], b);
    if (st == AH_OK)
        m->n++;
    return st;
}

ah_status ah_conversation_add_text(ah_conversation *c, const char *text, size_t len)
{
    if (!c || (!text && len))
        return AH_ERR_INVALID;
    /* One copy (a long answer is committed here): the block is added with an empty
     * text, which then takes the NUL-terminated copy. */
    char *tmp = ah__strndup(text ? text : "", len);
    if (!tmp)
        return AH_ERR_NOMEM;
    ah_msg_block b = {.kind = AH_MSG_TEXT, .text = ""};
    ah_status st = ah_conversation_add_block(c, &b);
    if (st != AH_OK) {
        free(tmp);
        return st;
    }
    ah_msg_block *added = &c->msgs[c->n - 1].blocks[c->msgs[c->n - 1].n - 1];
    free((char *)added->text);
    added->text = tmp;
    return AH_OK;
}

ah_status ah_conversation_add_reasoning(ah_conversation *c, const char *text,
                                        const char *signature, const char *item_id,
                                        const char *encrypted_content, int redacted)
{
    ah_msg_block b = {.kind = AH_MSG_REASONING,
                  .text = text,
                  .signature = signature,
                  .item_id = item_id,
                  .encrypted_content = encrypted_content,
                  .redacted = redacted};
    return ah_conversation_add_block(c, &b);
}

ah_status ah_conversation_add_tool_use(ah_conversation *c, const char *id,
                                       const char *name, const char *arguments)
{
    ah_msg_block b = {
        .kind = AH_MSG_TOOL_USE, .id = id, .name = name, .arguments = arguments};
    return ah_conversation_add_block(c, &b);
}

ah_status ah_conversation_add_user_text(ah_conversation *c, const char *text)
{
    if (!c || !text)
        return AH_ERR_INVALID;
    ah_status st = ah_conversation_begin_user(c);
    if (st != AH_OK)
        return st;
    st = ah_conversation_add_text(c, text, strlen(text));
    if (st != AH_OK)
        ah_conversation_truncate(c, c->n - 1); /* no half-added message */
    return st;
}

ah_status ah_conversation_add_user_blocks(ah_conversation *c, const ah_msg_block *b,
                                         size_t n, char *err, size_t errsize)
{
    if (err && errsize)
        err[0] = '\0';
    if (!c || (!b && n))
        return AH_ERR_INVALID;
    if (n == 0) {
        ah__bufprintf(err, errsize, "no blocks (providers refuse an empty message)");
        return AH_ERR_INVALID;
    }
    for (size_t i = 0; i < n; i++) {
        char why[200];
        if (b[i].kind != AH_MSG_TEXT && b[i].kind != AH_MSG_IMAGE &&
            b[i].kind != AH_MSG_DOCUMENT) {
            ah__bufprintf(err, errsize, "block %zu (%s): type: not an input block (text, "
                          "image or document)", i + 1, ah_msg_kind_name(b[i].kind));
            return AH_ERR_INVALID;
        }
        if (b[i].kind == AH_MSG_TEXT && !b[i].text) {
            ah__bufprintf(err, errsize, "block %zu (text): text: missing", i + 1);
            return AH_ERR_INVALID;
        }
        if (ah_msg_block_check(&b[i], why, sizeof why) != AH_OK) {
            ah__bufprintf(err, errsize, "block %zu (%s): %s", i + 1,
                          ah_msg_kind_name(b[i].kind), why);
            return AH_ERR_INVALID;
        }
    }
    ah_status st = ah_conversation_begin_user(c);
    for (size_t i = 0; st == AH_OK && i < n; i++)
        st = ah_conversation_add_block(c, &b[i]);
    if (st != AH_OK && st != AH_ERR_INVALID)
        ah_conversation_truncate(c, c->n - 1);
    return st;
}

static int only_tool_results(const message *m)
{
    if (m->role != AH_ROLE_USER || m->n == 0)
        return 0;
    for (size_t i = 0; i < m->n; i++)
        if (m->blocks[i].kind != AH_MSG_TOOL_RESULT)
            return 0;
    return 1;
}

ah_status ah_conversation_add_tool_result(ah_conversation *c, const char *tool_use_id,
                                          const char *content, int is_error)
{
    if (!c || is_empty(tool_use_id))
        return AH_ERR_INVALID;
    int began = 0;
    if (c->n == 0 || !only_tool_results(&c->msgs[c->n - 1])) {
        ah_status st = ah_conversation_begin_user(c);
        if (st != AH_OK)
            return st;
        began = 1;
    }
    ah_msg_block b = {.kind = AH_MSG_TOOL_RESULT,
                  .tool_use_id = tool_use_id,
                  .text = content,
                  .is_error = is_error};
    ah_status st = ah_conversation_add_block(c, &b);
    if (st != AH_OK && began)
        ah_conversation_truncate(c, c->n - 1);
    return st;
}

ah_status ah_conversation_set_partial(ah_conversation *c, int partial)
{
    if (!c)
        return AH_ERR_INVALID;
    if (c->n == 0 || c->msgs[c->n - 1].role != AH_ROLE_ASSISTANT)
        return AH_ERR_STATE;
    c->msgs[c->n - 1].partial = partial ? 1 : 0;
    return AH_OK;
}

ah_status ah_conversation_set_system(ah_conversation *c, const char *system)
{
    if (!c)
        return AH_ERR_INVALID;
    char *s = NULL;
    if (system && !(s = ah__strdup(system)))
        return AH_ERR_NOMEM;
    free(c->system);
    c->system = s;
    return AH_OK;
}

ah_conversation *ah_conversation_copy(const ah_conversation *c)
{
    if (!c)
        return NULL;
    ah_conversation *d = ah_conversation_new();
    if (!d)
        return NULL;
    if (ah_conversation_set_system(d, c->system) != AH_OK ||
        ah_conversation_set_id(d, c->id) != AH_OK)
        goto fail;
    for (size_t i = 0; i < c->n; i++) {
        if (begin_message(d, c->msgs[i].role) != AH_OK)
            goto fail;
        d->msgs[i].partial = c->msgs[i].partial;
        for (size_t j = 0; j < c->msgs[i].n; j++)
            if (ah_conversation_add_block(d, &c->msgs[i].blocks[j]) != AH_OK)
                goto fail;
    }
    return d;
fail:
    ah_conversation_free(d);
    return NULL;
}

/* ---- reading ---------------------------------------------------------------------- */

const char *ah_conversation_system(const ah_conversation *c)
{
    return c ? c->system : NULL;
}

ah_status ah_conversation_set_id(ah_conversation *c, const char *id)
{
    if (!c || (id && !*id))
        return AH_ERR_INVALID;
    char *s = NULL;
    if (id && !(s = ah__strdup(id)))
        return AH_ERR_NOMEM;
    free(c->id);
    c->id = s;
    return AH_OK;
}

const char *ah_conversation_id(const ah_conversation *c)
{
    return c ? c->id : NULL;
}

size_t ah_conversation_count(const ah_conversation *c)
{
    return c ? c->n : 0;
}

ah_role ah_conversation_role(const ah_conversation *c, size_t msg)
{
    return c && msg < c->n ? c->msgs[msg].role : AH_ROLE_USER;
}

int ah_conversation_is_partial(const ah_conversation *c, size_t msg)
{
    return c && msg < c->n ? c->msgs[msg].partial : 0;
}

size_t ah_conversation_block_count(const ah_conversation *c, size_t msg)
{
    return c && msg < c->n ? c->msgs[msg].n : 0;
}

const ah_msg_block *ah_conversation_block(const ah_conversation *c, size_t msg, size_t i)
{
    if (!c || msg >= c->n || i >= c->msgs[msg].n)
        return NULL;
    return &c->msgs[msg].blocks[i];
}

/* ---- JSON export ------------------------------------------------------------------ */

/* Add a string member; s NULL adds nothing. Returns 0 on OOM. */
static int put_str(cJSON *obj, const char *key, const char *s)
{
    return !s || cJSON_AddStringToObject(obj, key, s) != NULL;
}

static cJSON *block_to_json(const ah_msg_block *b)
{
    cJSON *o = cJSON_CreateObject();
    if (!o || !put_str(o, "type", ah_msg_kind_name(b->kind)))
        goto fail;
    int ok = 1;
    switch (b->kind) {
    case AH_MSG_TEXT:
        ok = put_str(o, "text", b->text);
        break;
    case AH_MSG_REASONING:
        ok = put_str(o, "text", b->text) && put_str(o, "signature", b->signature) &&
             put_str(o, "item_id", b->item_id) &&
             put_str(o, "encrypted_content", b->encrypted_content) &&
             (!b->redacted || cJSON_AddTrueToObject(o, "redacted"));
        break;
    case AH_MSG_TOOL_USE:
        ok = put_str(o, "id", b->id) && put_str(o, "name", b->name) &&
             put_str(o, "arguments", b->arguments);
        break;
    case AH_MSG_TOOL_RESULT:
        ok = put_str(o, "tool_use_id", b->tool_use_id) &&
             put_str(o, "content", b->text) &&
             (!b->is_error || cJSON_AddTrueToObject(o, "is_error")) &&
             put_str(o, "media_type", b->media_type) && put_str(o, "data", b->data) &&
             put_str(o, "url", b->url);
        break;
    case AH_MSG_IMAGE:
    case AH_MSG_DOCUMENT:
        ok = put_str(o, "media_type", b->media_type) && put_str(o, "data", b->data) &&
             put_str(o, "url", b->url) && put_str(o, "name", b->name);
        break;
    default:
        ok = 0;
    }
    if (ok)
        return o;
fail:
    cJSON_Delete(o);
    return NULL;
}

ah_status ah_conversation_to_json(const ah_conversation *c, char **json_out,
                                  size_t *len_out)
{
    if (!c || !json_out)
        return AH_ERR_INVALID;
    *json_out = NULL;
    ah_status st = AH_ERR_NOMEM;
    cJSON *root = cJSON_CreateObject();
    cJSON *msgs = NULL;
    if (!root || (c->id && !put_str(root, "id", c->id)) ||
        !put_str(root, "system", c->system) ||
        !(msgs = cJSON_AddArrayToObject(root, "messages")))
        goto cleanup;
    for (size_t i = 0; i < c->n; i++) {
        const message *m = &c->msgs[i];
        cJSON *mo = cJSON_CreateObject();
        if (!mo)
            goto cleanup;
        cJSON_AddItemToArray(msgs, mo);
        cJSON *content = NULL;
        if (!put_str(mo, "role", ah_role_name(m->role)) ||
            (m->partial && !cJSON_AddTrueToObject(mo, "partial")) ||
            !(content = cJSON_AddArrayToObject(mo, "content")))
            goto cleanup;
        for (size_t j = 0; j < m->n; j++) {
            cJSON *bo = block_to_json(&m->blocks[j]);
            if (!bo)
                goto cleanup;
            cJSON_AddItemToArray(content, bo);
        }
    }
    char *s = cJSON_PrintUnformatted(root);
    if (!s)
        goto cleanup;
    *json_out = s;
    if (len_out)
        *len_out = strlen(s);
    st = AH_OK;
cleanup:
    cJSON_Delete(root);
    return st;
}

/* ---- JSON import ------------------------------------------------------------------ */

/* Reject any member of obj not in the NULL-terminated allowed list; names the first. */
static const char *unknown_member(const cJSON *obj, const char *const *allowed)
{
    for (const cJSON *it = obj->child; it; it = it->next) {
        int found = 0;
        for (size_t i = 0; allowed[i]; i++)
            if (it->string && strcmp(it->string, allowed[i]) == 0)
                found = 1;
        if (!found)
            return it->string ? it->string : "?";
    }
    return NULL;
}

/* Fetch an optional string member. Returns 0 when present but not a string. */
static int opt_string(const cJSON *obj, const char *key, const char **out)
{
    const cJSON *it = cJSON_GetObjectItemCaseSensitive(obj, key);
    *out = NULL;
    if (!it || cJSON_IsNull(it))
        return 1;
    if (!cJSON_IsString(it))
        return 0;
    *out = it->valuestring;
    return 1;
}

static int opt_bool(const cJSON *obj, const char *key, int *out)
{
    const cJSON *it = cJSON_GetObjectItemCaseSensitive(obj, key);
    *out = 0;
    if (!it)
        return 1;
    if (!cJSON_IsBool(it))
        return 0;
    *out = cJSON_IsTrue(it) ? 1 : 0;
    return 1;
}

static ah_status import_block(ah_conversation *c, const cJSON *bo, char *err,
                              size_t errsize, size_t mi, size_t bi)
{
    static const char *const text_keys[] = {"type", "text", NULL};
    static const char *const reasoning_keys[] = {
        "type", "text", "signature", "item_id", "encrypted_content", "redacted", NULL};
    static const char *const tool_use_keys[] = {"type", "id", "name", "arguments", NULL};
    static const char *const tool_result_keys[] = {
        "type", "tool_use_id", "content", "is_error", "media_type", "data", "url", NULL};
    static const char *const image_keys[] = {"type", "media_type", "data", "url", NULL};
    static const char *const document_keys[] = {"type", "media_type", "data", "url",
                                                "name", NULL};
    const char *const *allowed = NULL;
    const char *type = NULL;
    char *args_text = NULL;
    ah_status st = AH_ERR_INVALID;
    ah_msg_block b = {0};

    if (!cJSON_IsObject(bo)) {
        ah__bufprintf(err, errsize, "messages[%zu].content[%zu]: expected an object", mi,
                      bi);
        return AH_ERR_INVALID;
    }
    if (!opt_string(bo, "type", &type) || !type) {
        ah__bufprintf(err, errsize, "messages[%zu].content[%zu].type: expected a string",
                      mi, bi);
        return AH_ERR_INVALID;
    }
    const char *bad = NULL; /* the member that has the wrong type */
    if (strcmp(type, "text") == 0) {
        b.kind = AH_MSG_TEXT;
        allowed = text_keys;
        if (!opt_string(bo, "text", &b.text) || !b.text)
            bad = "text";
    } else if (strcmp(type, "reasoning") == 0) {
        b.kind = AH_MSG_REASONING;
        allowed = reasoning_keys;
        if (!opt_string(bo, "text", &b.text))
            bad = "text";
        else if (!opt_string(bo, "signature", &b.signature))
            bad = "signature";
        else if (!opt_string(bo, "item_id", &b.item_id))
            bad = "item_id";
        else if (!opt_string(bo, "encrypted_content", &b.encrypted_content))
            bad = "encrypted_content";
        else if (!opt_bool(bo, "redacted", &b.redacted))
            bad = "redacted";
    } else if (strcmp(type, "tool_use") == 0) {
        b.kind = AH_MSG_TOOL_USE;
        allowed = tool_use_keys;
        const cJSON *args = cJSON_GetObjectItemCaseSensitive(bo, "arguments");
        if (!opt_string(bo, "id", &b.id) || is_empty(b.id))
            bad = "id";
        else if (!opt_string(bo, "name", &b.name) || is_empty(b.name))
            bad = "name";
        else if (cJSON_IsObject(args)) {
            /* Friendlier for hand-written history: an object is kept as its JSON text. */
            if (!(args_text = cJSON_PrintUnformatted(args))) {
                st = AH_ERR_NOMEM;
                goto cleanup;
            }
            b.arguments = args_text;
        } else if (!opt_string(bo, "arguments", &b.arguments))
            bad = "arguments";
    } else if (strcmp(type, "tool_result") == 0) {
        b.kind = AH_MSG_TOOL_RESULT;
        allowed = tool_result_keys;
        if (!opt_string(bo, "tool_use_id", &b.tool_use_id) || is_empty(b.tool_use_id))
            bad = "tool_use_id";
        else if (!opt_string(bo, "content", &b.text))
            bad = "content";
        else if (!opt_bool(bo, "is_error", &b.is_error))
            bad = "is_error";
        else if (!opt_string(bo, "media_type", &b.media_type))
            bad = "media_type";
        else if (!opt_string(bo, "data", &b.data))
            bad = "data";
        else if (!opt_string(bo, "url", &b.url))
            bad = "url";
    } else if (strcmp(type, "image") == 0 || strcmp(type, "document") == 0) {
        int doc = type[0] == 'd';
        b.kind = doc ? AH_MSG_DOCUMENT : AH_MSG_IMAGE;
        allowed = doc ? document_keys : image_keys;
        if (!opt_string(bo, "media_type", &b.media_type))
            bad = "media_type";
        else if (!opt_string(bo, "data", &b.data))
            bad = "data";
        else if (!opt_string(bo, "url", &b.url))
            bad = "url";
        else if (doc && !opt_string(bo, "name", &b.name))
            bad = "name";
    } else {
        ah__bufprintf(err, errsize,
                      "messages[%zu].content[%zu].type: unknown block type '%.40s'", mi,
                      bi, type);
        return AH_ERR_INVALID;
    }
    if (bad) {
        ah__bufprintf(err, errsize,
                      "messages[%zu].content[%zu].%s: missing or wrong type", mi, bi,
                      bad);
        goto cleanup;
    }
    const char *unknown = unknown_member(bo, allowed);
    if (unknown) {
        ah__bufprintf(err, errsize, "messages[%zu].content[%zu].%.40s: unknown member",
                      mi, bi, unknown);
        goto cleanup;
    }
    char why[200];
    if (ah_msg_block_check(&b, why, sizeof why) != AH_OK) {
        ah__bufprintf(err, errsize, "messages[%zu].content[%zu].%s", mi, bi, why);
        goto cleanup;
    }
    st = ah_conversation_add_block(c, &b);
    if (st == AH_ERR_STATE) {
        ah__bufprintf(err, errsize,
                      "messages[%zu].content[%zu]: a %s block cannot be in a %s "
                      "message",
                      mi, bi, type, ah_role_name(ah_conversation_role(c, mi)));
        st = AH_ERR_INVALID;
    }
cleanup:
    free(args_text);
    return st;
}

ah_status ah_conversation_from_json(const char *json, size_t len, ah_conversation **out,
                                    char *err, size_t errsize)
{
    static const char *const root_keys[] = {"id", "system", "messages", NULL};
    static const char *const msg_keys[] = {"role", "partial", "content", NULL};
    ah_conversation *c = NULL;
    cJSON *root = NULL;
    ah_status st = AH_ERR_INVALID;

    if (!err)
        errsize = 0;
    if (errsize)
        err[0] = '\0';
    if (!json || !out)
        return AH_ERR_INVALID;
    *out = NULL;
    const char *end = NULL;
    root = cJSON_ParseWithLengthOpts(json, len, &end, 0);
    if (!root) {
        ah__bufprintf(err, errsize, "conversation JSON is malformed at offset %zu",
                      end && end >= json ? (size_t)(end - json) : (size_t)0);
        return AH_ERR_PARSE;
    }
    if (!cJSON_IsObject(root)) {
        ah__bufprintf(err, errsize, "conversation JSON: expected an object");
        goto cleanup;
    }
    const char *unknown = unknown_member(root, root_keys);
    if (unknown) {
        ah__bufprintf(err, errsize, "%.40s: unknown member", unknown);
        goto cleanup;
    }
    if (!(c = ah_conversation_new())) {
        st = AH_ERR_NOMEM;
        goto cleanup;
    }
    const char *system = NULL;
    if (!opt_string(root, "system", &system)) {
        ah__bufprintf(err, errsize, "system: expected a string");
        goto cleanup;
    }
    if ((st = ah_conversation_set_system(c, system)) != AH_OK)
        goto cleanup;
    st = AH_ERR_INVALID;
    const char *cid = NULL;
    if (!opt_string(root, "id", &cid) || (cid && !*cid)) {
        ah__bufprintf(err, errsize, "id: expected a non-empty string");
        goto cleanup;
    }
    if (cid && (st = ah_conversation_set_id(c, cid)) != AH_OK)
        goto cleanup;
    st = AH_ERR_INVALID;
    const cJSON *msgs = cJSON_GetObjectItemCaseSensitive(root, "messages");
    if (msgs && !cJSON_IsArray(msgs)) {
        ah__bufprintf(err, errsize, "messages: expected an array");
        goto cleanup;
    }
    size_t mi = 0;
    for (const cJSON *mo = msgs ? msgs->child : NULL; mo; mo = mo->next, mi++) {
        const char *role = NULL;
        int partial = 0;
        if (!cJSON_IsObject(mo)) {
            ah__bufprintf(err, errsize, "messages[%zu]: expected an object", mi);
            goto cleanup;
        }
        if ((unknown = unknown_member(mo, msg_keys))) {
            ah__bufprintf(err, errsize, "messages[%zu].%.40s: unknown member", mi,
                          unknown);
            goto cleanup;
        }
        if (!opt_string(mo, "role", &role) || !role ||
            (strcmp(role, "user") != 0 && strcmp(role, "assistant") != 0)) {
            ah__bufprintf(err, errsize,
                          "messages[%zu].role: expected \"user\" or "
                          "\"assistant\"",
                          mi);
            goto cleanup;
        }
        int is_user = strcmp(role, "user") == 0;
        if (!opt_bool(mo, "partial", &partial) || (partial && is_user)) {
            ah__bufprintf(err, errsize,
                          "messages[%zu].partial: only an assistant message "
                          "may be partial (a boolean)",
                          mi);
            goto cleanup;
        }
        const cJSON *content = cJSON_GetObjectItemCaseSensitive(mo, "content");
        if (!cJSON_IsArray(content)) {
            ah__bufprintf(err, errsize, "messages[%zu].content: expected an array", mi);
            goto cleanup;
        }
        st = is_user ? ah_conversation_begin_user(c) : ah_conversation_begin_assistant(c);
        if (st != AH_OK)
            goto cleanup;
        if (partial && (st = ah_conversation_set_partial(c, 1)) != AH_OK)
            goto cleanup;
        size_t bi = 0;
        for (const cJSON *bo = content->child; bo; bo = bo->next, bi++)
            if ((st = import_block(c, bo, err, errsize, mi, bi)) != AH_OK)
                goto cleanup;
        st = AH_ERR_INVALID;
    }
    *out = c;
    c = NULL;
    st = AH_OK;
cleanup:
    if (st == AH_ERR_NOMEM)
        ah__bufprintf(err, errsize, "out of memory");
    ah_conversation_free(c);
    cJSON_Delete(root);
    return st;
}
