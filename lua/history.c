/* history.c - conversations in Lua: result.history tables, the check that turns one back
 * into an ah_conversation (agent:run(input, { history = h })), and the history file
 * (ah.history_save / ah.history_load).
 *
 * A Lua history is the conversation JSON of docs/providers-encoding.md as a Lua list:
 *   { { role = "user" | "assistant", partial = bool, content = { block, ... } }, ... }
 *   text        { type = "text", text }
 *   reasoning   { type = "reasoning", text, signature?, item_id?, encrypted_content?,
 *                 redacted? }
 *   tool_use    { type = "tool_use", id, name, arguments (JSON text), input? (decoded) }
 *   tool_result { type = "tool_result", tool_use_id, content, is_error? }
 * The file is {"format":"agenthost.history","version":1,"messages":[...]}.
 *
 * Invariants:
 *  - Nothing half-understood reaches a provider: the check refuses an unknown role, block
 *    type or field, a wrong type, a block in the wrong role, and a tool result that
 *    answers no tool call of the assistant message before it, naming the first bad
 *    element (history[3].content[1].type) - and, for a file, the file.
 *  - No tool call is sent unanswered (every provider refuses one): a tool_use that the
 *    next message does not answer (a history saved by an agenthost from before stopped
 *    tool rounds were answered, or edited) gets a tool error result at the start of the
 *    next message, with one warning naming the first such call.
 *  - push -> check -> push is the identity (every field a block has is pushed), so a
 *    history round-trips exactly through a run, a file, or both.
 *  - A save is atomic: a temporary file in the same directory, flushed, then renamed.
 */
#include "lah.h"
#include "internal.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define HISTORY_FORMAT  "agenthost.history"
#define HISTORY_VERSION 1
#define HISTORY_MAX_BYTES (256u << 20) /* a history file larger than this is refused */
/* The result given to a tool call that a history holds without one. */
#define AH_HISTORY_UNANSWERED                                                            \
    "error: the tool call has no result (the run that made it ended before the tool "    \
    "answered); its effect may or may not have happened"

/* ---- Lua table <- conversation ------------------------------------------------------- */

static void set_str(lua_State *L, const char *k, const char *v)
{
    if (!v)
        return;
    lua_pushstring(L, v);
    lua_setfield(L, -2, k);
}

static void set_bool(lua_State *L, const char *k, int v)
{
    lua_pushboolean(L, v);
    lua_setfield(L, -2, k);
}

void lah_push_history(lua_State *L, const ah_conversation *c, int shared)
{
    size_t shared_len = 0;
    const char *shared_s = shared ? lua_tolstring(L, shared, &shared_len) : NULL;
    size_t n = ah_conversation_count(c);
    lua_createtable(L, (int)n, 1);
    if (ah_conversation_id(c))
        set_str(L, "id", ah_conversation_id(c)); /* the conversation's prompt_cache_key */
    for (size_t m = 0; m < n; m++) {
        luaL_checkstack(L, 6, "history");
        size_t nb = ah_conversation_block_count(c, m);
        lua_createtable(L, 0, 3);
        set_str(L, "role", ah_role_name(ah_conversation_role(c, m)));
        set_bool(L, "partial", ah_conversation_is_partial(c, m));
        lua_createtable(L, (int)nb, 0);
        for (size_t i = 0; i < nb; i++) {
            const ah_msg_block *b = ah_conversation_block(c, m, i);
            lua_createtable(L, 0, 4);
            set_str(L, "type", ah_msg_kind_name(b->kind));
            switch (b->kind) {
            case AH_MSG_TEXT:
                if (shared_s && shared_len > 4096 && strlen(b->text) == shared_len &&
                    memcmp(b->text, shared_s, shared_len) == 0) {
                    lua_pushvalue(L, shared); /* a large answer: one string, not two */
                    lua_setfield(L, -2, "text");
                } else {
                    set_str(L, "text", b->text);
                }
                break;
            case AH_MSG_REASONING:
                set_str(L, "text", b->text);
                set_str(L, "signature", b->signature);
                set_str(L, "item_id", b->item_id);
                set_str(L, "encrypted_content", b->encrypted_content);
                if (b->redacted)
                    set_bool(L, "redacted", 1);
                break;
            case AH_MSG_TOOL_USE:
                set_str(L, "id", b->id);
                set_str(L, "name", b->name);
                set_str(L, "arguments",
                        b->arguments && *b->arguments ? b->arguments : "{}");
                if (b->arguments && *b->arguments &&
                    lah_json_decode(L, b->arguments, strlen(b->arguments)))
                    lua_setfield(L, -2, "input");
                else
                    lua_pop(L, 1);
                break;
            case AH_MSG_TOOL_RESULT:
                set_str(L, "tool_use_id", b->tool_use_id);
                set_str(L, "content", b->text);
                set_bool(L, "is_error", b->is_error);
                break;
            default:
                break;
            }
            lua_rawseti(L, -2, (lua_Integer)i + 1);
        }
        lua_setfield(L, -2, "content");
        lua_rawseti(L, -2, (lua_Integer)m + 1);
    }
}

/* ---- Lua table -> conversation (the check) ------------------------------------------- */

typedef struct checker {
    lua_State *L;
    char *err;
    size_t errsize;
    char path[96]; /* "history[3].content[1]" */
} checker;

static int bad(checker *k, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int bad(checker *k, const char *fmt, ...)
{
    char msg[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    ah__bufprintf(k->err, k->errsize, "%s%s", k->path, msg);
    return 0;
}

/* The string field `key` of the table at idx: *out borrowed (anchored by the table),
 * NULL when absent and optional. Returns 0 after bad() on a wrong type or NUL byte. */
static int get_string(checker *k, int idx, const char *key, int required, const char **out)
{
    lua_State *L = k->L;
    *out = NULL;
    int ty = lua_getfield(L, idx, key);
    if (ty == LUA_TNIL) {
        lua_pop(L, 1);
        return required ? bad(k, ".%s: missing (a string is required)", key) : 1;
    }
    if (ty != LUA_TSTRING) {
        int r = bad(k, ".%s: must be a string, got %s", key, luaL_typename(L, -1));
        lua_pop(L, 1);
        return r;
    }
    size_t len;
    const char *s = lua_tolstring(L, -1, &len);
    lua_pop(L, 1); /* the table keeps it alive */
    if (strlen(s) != len)
        return bad(k, ".%s: contains a NUL byte", key);
    *out = s;
    return 1;
}

static int get_flag(checker *k, int idx, const char *key, int *out)
{
    lua_State *L = k->L;
    int ty = lua_getfield(L, idx, key);
    *out = ty == LUA_TBOOLEAN && lua_toboolean(L, -1);
    lua_pop(L, 1);
    if (ty != LUA_TNIL && ty != LUA_TBOOLEAN)
        return bad(k, ".%s: must be a boolean, got %s", key, lua_typename(L, ty));
    return 1;
}

/* Every key of the table at idx is in known (NULL-terminated). */
static int only_fields(checker *k, int idx, const char *const *known)
{
    lua_State *L = k->L;
    lua_pushnil(L);
    while (lua_next(L, idx)) {
        lua_pop(L, 1);
        if (lua_type(L, -1) != LUA_TSTRING) {
            int r = bad(k, ": unexpected %s key", luaL_typename(L, -1));
            lua_pop(L, 1);
            return r;
        }
        const char *name = lua_tostring(L, -1);
        int found = 0;
        for (size_t i = 0; known[i] && !found; i++)
            found = strcmp(known[i], name) == 0;
        if (!found) {
            int r = bad(k, ": unknown field '%.40s'", name);
            lua_pop(L, 1);
            return r;
        }
    }
    return 1;
}

/* The list length of the table at idx; 0 after bad() when it is not a list. */
static int list_len(checker *k, int idx, lua_Integer *n)
{
    lua_State *L = k->L;
    *n = (lua_Integer)lua_rawlen(L, idx);
    lua_Integer count = 0;
    lua_pushnil(L);
    while (lua_next(L, idx)) {
        lua_pop(L, 1);
        if (lua_type(L, -1) == LUA_TSTRING && strcmp(lua_tostring(L, -1), "id") == 0)
            continue; /* a history's conversation id (checked by the caller) */
        count++;
        if (!lua_isinteger(L, -1) || lua_tointeger(L, -1) < 1 ||
            lua_tointeger(L, -1) > *n) {
            lua_pop(L, 1);
            return bad(k, ": must be a list (found a key that is not 1..n)");
        }
    }
    if (count != *n)
        return bad(k, ": must be a list without holes");
    return 1;
}

/* The media fields of an image, a document or an image tool result, checked by the
 * core (one rule for Lua, JSON and C): the message names the field. */
static int check_media(checker *k, const ah_msg_block *b)
{
    char why[200];
    if (ah_msg_block_check(b, why, sizeof why) != AH_OK)
        return bad(k, ".%s", why);
    return 1;
}

static int check_block(checker *k, int blk, ah_role role, ah_msg_block *b)
{
    static const char *const f_text[] = {"type", "text", NULL};
    static const char *const f_reasoning[] = {"type",      "text",    "signature",
                                              "item_id",   "encrypted_content",
                                              "redacted",  NULL};
    static const char *const f_tool_use[] = {"type", "id", "name", "arguments", "input",
                                             NULL};
    static const char *const f_tool_result[] = {"type",       "tool_use_id", "content",
                                                "is_error",   "media_type",  "data",
                                                "url",        NULL};
    static const char *const f_image[] = {"type", "media_type", "data", "url", NULL};
    static const char *const f_document[] = {"type", "media_type", "data", "url", "name",
                                             NULL};
    lua_State *L = k->L;
    memset(b, 0, sizeof *b);
    const char *type;
    if (!get_string(k, blk, "type", 1, &type))
        return 0;
    if (strcmp(type, "text") == 0) {
        b->kind = AH_MSG_TEXT;
        return only_fields(k, blk, f_text) && get_string(k, blk, "text", 1, &b->text);
    }
    if (strcmp(type, "reasoning") == 0) {
        b->kind = AH_MSG_REASONING;
        if (role != AH_ROLE_ASSISTANT)
            return bad(k, ": a reasoning block belongs to an assistant message");
        return only_fields(k, blk, f_reasoning) &&
               get_string(k, blk, "text", 1, &b->text) &&
               get_string(k, blk, "signature", 0, &b->signature) &&
               get_string(k, blk, "item_id", 0, &b->item_id) &&
               get_string(k, blk, "encrypted_content", 0, &b->encrypted_content) &&
               get_flag(k, blk, "redacted", &b->redacted);
    }
    if (strcmp(type, "tool_use") == 0) {
        b->kind = AH_MSG_TOOL_USE;
        if (role != AH_ROLE_ASSISTANT)
            return bad(k, ": a tool_use block belongs to an assistant message");
        if (!only_fields(k, blk, f_tool_use) || !get_string(k, blk, "id", 1, &b->id) ||
            !get_string(k, blk, "name", 1, &b->name) ||
            !get_string(k, blk, "arguments", 0, &b->arguments))
            return 0;
        if (!*b->id || !*b->name)
            return bad(k, ".%s: must not be empty", *b->id ? "name" : "id");
        if (!b->arguments) { /* only the decoded form: encode it */
            if (lua_getfield(L, blk, "input") == LUA_TNIL) {
                lua_pop(L, 1);
                return bad(k, ".arguments: missing (JSON text, or input as a table)");
            }
            if (!lah_json_encode(L, -1)) {
                int r = bad(k, ".input: %s", lua_tostring(L, -1));
                lua_pop(L, 2);
                return r;
            }
            /* anchor the JSON text in the block table itself */
            lua_pushvalue(L, -1);
            lua_setfield(L, blk, "arguments");
            b->arguments = lua_tostring(L, -1);
            lua_pop(L, 2);
        }
        cJSON *args = cJSON_Parse(*b->arguments ? b->arguments : "{}");
        int is_obj = cJSON_IsObject(args);
        cJSON_Delete(args);
        if (!is_obj)
            return bad(k, ".arguments: not a JSON object");
        return 1;
    }
    if (strcmp(type, "tool_result") == 0) {
        b->kind = AH_MSG_TOOL_RESULT;
        if (role != AH_ROLE_USER)
            return bad(k, ": a tool_result block belongs to a user message");
        if (!only_fields(k, blk, f_tool_result) ||
            !get_string(k, blk, "tool_use_id", 1, &b->tool_use_id) ||
            !get_string(k, blk, "content", 1, &b->text) ||
            !get_flag(k, blk, "is_error", &b->is_error) ||
            !get_string(k, blk, "media_type", 0, &b->media_type) ||
            !get_string(k, blk, "data", 0, &b->data) || !get_string(k, blk, "url", 0, &b->url))
            return 0;
        return check_media(k, b);
    }
    if (strcmp(type, "image") == 0 || strcmp(type, "document") == 0) {
        int doc = type[0] == 'd';
        b->kind = doc ? AH_MSG_DOCUMENT : AH_MSG_IMAGE;
        if (role != AH_ROLE_USER)
            return bad(k, ": an %s block belongs to a user message", doc ? "document" : "image");
        if (!only_fields(k, blk, doc ? f_document : f_image) ||
            !get_string(k, blk, "media_type", 0, &b->media_type) ||
            !get_string(k, blk, "data", 0, &b->data) ||
            !get_string(k, blk, "url", 0, &b->url) ||
            (doc && !get_string(k, blk, "name", 0, &b->name)))
            return 0;
        return check_media(k, b);
    }
    return bad(k, ".type: unknown block type '%.40s'", type);
}

/* Does the message before msg (an assistant message) hold a tool_use with this id? */
static int answers_a_call(const ah_conversation *c, size_t msg, const char *id)
{
    if (msg == 0 || ah_conversation_role(c, msg - 1) != AH_ROLE_ASSISTANT)
        return 0;
    for (size_t i = 0; i < ah_conversation_block_count(c, msg - 1); i++) {
        const ah_msg_block *b = ah_conversation_block(c, msg - 1, i);
        if (b->kind == AH_MSG_TOOL_USE && strcmp(b->id, id) == 0)
            return 1;
    }
    return 0;
}

/* ---- unanswered tool calls (repaired) ----------------------------------------------- */

/* Does the Lua content list at idx (of a user message) hold a tool_result for id? A block
 * of the wrong shape answers nothing here; the check of the block then names it. */
static int lua_answers(lua_State *L, int content, lua_Integer nb, const char *id)
{
    int found = 0;
    for (lua_Integer i = 1; i <= nb && !found; i++) {
        lua_rawgeti(L, content, i);
        if (lua_istable(L, -1)) {
            lua_getfield(L, -1, "type");
            lua_getfield(L, -2, "tool_use_id");
            found = lua_type(L, -2) == LUA_TSTRING && lua_type(L, -1) == LUA_TSTRING &&
                    strcmp(lua_tostring(L, -2), "tool_result") == 0 &&
                    strcmp(lua_tostring(L, -1), id) == 0;
            lua_pop(L, 2);
        }
        lua_pop(L, 1);
    }
    return found;
}

/* Every provider refuses a tool call without a tool_result in the next message. A history
 * saved by an agenthost from before runs stopped in a tool round answered their calls
 * (or edited by hand) can hold one: each such call gets a tool error result, AH_HISTORY_
 * UNANSWERED, at the start of the next message (a new user message when the next one is
 * not a user message, or there is none), and one warning names the first. `next` is the
 * next message's content list (nb blocks; 0 = none) and `user` its role. Returns 0 after
 * bad() when out of memory; *opened says whether a user message was begun for it. */
static int answer_unanswered(checker *k, ah_conversation *c, lua_Integer m, int next,
                             lua_Integer nb, int user, int *repaired, int *opened)
{
    *opened = 0;
    size_t last = ah_conversation_count(c);
    if (last == 0 || ah_conversation_role(c, last - 1) != AH_ROLE_ASSISTANT)
        return 1;
    last--;
    for (size_t i = 0; i < ah_conversation_block_count(c, last); i++) {
        const ah_msg_block *b = ah_conversation_block(c, last, i);
        if (b->kind != AH_MSG_TOOL_USE || (user && lua_answers(k->L, next, nb, b->id)))
            continue;
        if (!*opened && ah_conversation_begin_user(c) != AH_OK)
            return bad(k, ": out of memory");
        *opened = 1;
        b = ah_conversation_block(c, last, i); /* views are borrowed until a change */
        ah_msg_block r = {.kind = AH_MSG_TOOL_RESULT,
                          .tool_use_id = b->id,
                          .text = AH_HISTORY_UNANSWERED,
                          .is_error = 1};
        if (!*repaired)
            ah__log(AH_LOG_WARN,
                    "history[%lld].content[%zu]: tool call '%.60s' (%.60s) has no "
                    "tool_result in the next message; answered it as not finished (its "
                    "effect may or may not have happened)",
                    (long long)m - 1, i + 1, b->id, b->name);
        (*repaired)++;
        if (ah_conversation_add_block(c, &r) != AH_OK) /* copies the id */
            return bad(k, ": out of memory");
    }
    return 1;
}

int lah_history_check(lua_State *L, int idx, ah_conversation **out, char *err,
                      size_t errsize)
{
    static const char *const f_msg[] = {"role", "partial", "content", NULL};
    checker k = {L, err, errsize, "history"};
    idx = lua_absindex(L, idx);
    *out = NULL;
    luaL_checkstack(L, 10, "history");
    if (!lua_istable(L, idx))
        return bad(&k, ": must be a list of messages (a result.history), got %s",
                   luaL_typename(L, idx));
    if (lua_getfield(L, idx, "history") == LUA_TTABLE) { /* a run's result */
        lua_pop(L, 1);
        return bad(&k, ": got a run result; pass its .history");
    }
    lua_pop(L, 1);
    lua_Integer n;
    if (!list_len(&k, idx, &n))
        return 0;
    ah_conversation *c = ah_conversation_new();
    if (!c)
        return bad(&k, ": out of memory");
    int idt = lua_getfield(L, idx, "id");
    if (idt != LUA_TNIL && (idt != LUA_TSTRING || !*lua_tostring(L, -1))) {
        ah_conversation_free(c);
        return bad(&k, ".id: must be a non-empty string (the conversation's id), got %s",
                   luaL_typename(L, -1));
    }
    if (idt == LUA_TSTRING && ah_conversation_set_id(c, lua_tostring(L, -1)) != AH_OK) {
        ah_conversation_free(c);
        return bad(&k, ": out of memory");
    }
    lua_pop(L, 1);
    int top = lua_gettop(L);
    int repaired = 0;
    for (lua_Integer m = 1; m <= n; m++) {
        snprintf(k.path, sizeof k.path, "history[%lld]", (long long)m);
        lua_rawgeti(L, idx, m);
        int msg = lua_gettop(L);
        if (!lua_istable(L, msg)) {
            bad(&k, ": must be a message table, got %s", luaL_typename(L, msg));
            goto fail;
        }
        const char *role;
        int partial;
        if (!only_fields(&k, msg, f_msg) || !get_string(&k, msg, "role", 1, &role) ||
            !get_flag(&k, msg, "partial", &partial))
            goto fail;
        ah_role r;
        if (strcmp(role, "user") == 0)
            r = AH_ROLE_USER;
        else if (strcmp(role, "assistant") == 0)
            r = AH_ROLE_ASSISTANT;
        else {
            bad(&k, ".role: unknown role '%.40s' (user or assistant)", role);
            goto fail;
        }
        if (partial && r != AH_ROLE_ASSISTANT) {
            bad(&k, ".partial: only an assistant message can be partial");
            goto fail;
        }
        if (lua_getfield(L, msg, "content") != LUA_TTABLE) {
            bad(&k, ".content: must be a list of blocks, got %s", luaL_typename(L, -1));
            goto fail;
        }
        int content = lua_gettop(L);
        size_t base = strlen(k.path);
        snprintf(k.path + base, sizeof k.path - base, ".content");
        lua_Integer nb;
        if (!list_len(&k, content, &nb))
            goto fail;
        if (nb == 0) {
            k.path[base] = '\0';
            bad(&k, ".content: empty (providers refuse an empty message)");
            goto fail;
        }
        int opened;
        if (!answer_unanswered(&k, c, m, content, nb, r == AH_ROLE_USER, &repaired,
                               &opened))
            goto fail;
        /* a user message joins the results given for the message before it */
        if (!(opened && r == AH_ROLE_USER) &&
            (r == AH_ROLE_USER ? ah_conversation_begin_user(c)
                               : ah_conversation_begin_assistant(c)) != AH_OK) {
            bad(&k, ": out of memory");
            goto fail;
        }
        for (lua_Integer i = 1; i <= nb; i++) {
            snprintf(k.path + base, sizeof k.path - base, ".content[%lld]", (long long)i);
            lua_rawgeti(L, content, i);
            int blk = lua_gettop(L);
            ah_msg_block b;
            if (!lua_istable(L, blk)) {
                bad(&k, ": must be a block table, got %s", luaL_typename(L, blk));
                goto fail;
            }
            if (!check_block(&k, blk, r, &b))
                goto fail;
            if (b.kind == AH_MSG_TOOL_RESULT &&
                !answers_a_call(c, ah_conversation_count(c) - 1, b.tool_use_id)) {
                bad(&k, ".tool_use_id: '%.60s' answers no tool_use of the message before",
                    b.tool_use_id);
                goto fail;
            }
            ah_status st = ah_conversation_add_block(c, &b);
            if (st != AH_OK) {
                bad(&k, ": %s", ah_status_message(st));
                goto fail;
            }
            lua_settop(L, content);
        }
        if (partial && ah_conversation_set_partial(c, 1) != AH_OK) {
            k.path[base] = '\0';
            bad(&k, ".partial: cannot be set here");
            goto fail;
        }
        lua_settop(L, top);
    }
    snprintf(k.path, sizeof k.path, "history[%lld]", (long long)n + 1);
    int opened;
    if (!answer_unanswered(&k, c, n + 1, 0, 0, 0, &repaired, &opened))
        goto fail;
    *out = c;
    return 1;
fail:
    lua_settop(L, top);
    ah_conversation_free(c);
    return 0;
}

int lah_input_blocks_check(lua_State *L, int idx, ah_msg_block **out, size_t *n_out,
                           char *err, size_t errsize)
{
    checker k = {L, err, errsize, "input"};
    idx = lua_absindex(L, idx);
    *out = NULL;
    *n_out = 0;
    luaL_checkstack(L, 6, "input");
    lua_Integer n;
    if (!list_len(&k, idx, &n))
        return 0;
    if (n == 0)
        return bad(&k, ": empty (a string, or a list of text, image and document blocks)");
    /* the array is a userdata (collected, so no raise between here and the worker's
     * copy can leak it), left on the stack on success */
    ah_msg_block *bs = lua_newuserdatauv(L, (size_t)n * sizeof *bs, 0);
    memset(bs, 0, (size_t)n * sizeof *bs);
    int top = lua_gettop(L);
    for (lua_Integer i = 1; i <= n; i++) {
        snprintf(k.path, sizeof k.path, "input[%lld]", (long long)i);
        lua_rawgeti(L, idx, i);
        int blk = lua_gettop(L);
        ah_msg_block *b = &bs[i - 1];
        if (lua_type(L, blk) == LUA_TSTRING) { /* a bare string is a text block */
            b->kind = AH_MSG_TEXT;
            b->text = lua_tostring(L, blk);
        } else if (!lua_istable(L, blk)) {
            bad(&k, ": must be a block table, got %s", luaL_typename(L, blk));
            goto fail;
        } else if (!check_block(&k, blk, AH_ROLE_USER, b)) {
            goto fail;
        } else if (b->kind == AH_MSG_TOOL_RESULT) {
            bad(&k, ".type: a tool_result is no input (text, image or document)");
            goto fail;
        }
        lua_settop(L, top); /* the strings live in the input table, which stays */
    }
    *out = bs;
    *n_out = (size_t)n;
    return 1;
fail:
    lua_settop(L, top - 1);
    return 0;
}

/* ---- the file ------------------------------------------------------------------------ */

/* ah.history_save(h, path) -> true, or nil, msg when the file cannot be written. A
 * history that does not pass the check raises (it is the caller's bug). */
static int l_history_save(lua_State *L)
{
    const char *path = luaL_checkstring(L, 2);
    char err[320];
    ah_conversation *c;
    if (!lah_history_check(L, 1, &c, err, sizeof err))
        return luaL_error(L, "ah.history_save: %s", err);
    char *json = NULL;
    size_t len = 0;
    ah_status st = ah_conversation_to_json(c, &json, &len);
    ah_conversation_free(c);
    if (st != AH_OK)
        return luaL_error(L, "ah.history_save: %s", ah_status_message(st));
    /* {"messages":[...]} -> {"format":...,"version":1,"messages":[...]} */
    static const char head[] = "{\"format\":\"" HISTORY_FORMAT "\",\"version\":1,";
    size_t tlen = strlen(path) + 16;
    char *tmp = malloc(tlen);
    if (!tmp) {
        free(json);
        return luaL_error(L, "ah.history_save: out of memory");
    }
    snprintf(tmp, tlen, "%s.tmpXXXXXX", path);
    int fd = mkstemp(tmp);
    FILE *f = fd >= 0 ? fdopen(fd, "w") : NULL;
    int ok = f && fwrite(head, 1, sizeof head - 1, f) == sizeof head - 1 &&
             fwrite(json + 1, 1, len - 1, f) == len - 1 && fputc('\n', f) != EOF &&
             fflush(f) == 0 && fsync(fileno(f)) == 0;
    int saved_errno = errno;
    if (f)
        ok = fclose(f) == 0 && ok;
    else if (fd >= 0)
        close(fd);
    free(json);
    if (ok && rename(tmp, path) != 0) {
        saved_errno = errno;
        ok = 0;
    }
    if (!ok) {
        if (fd >= 0)
            unlink(tmp);
        free(tmp);
        lua_pushnil(L);
        lua_pushfstring(L, "cannot save the history to '%s': %s", path,
                        strerror(saved_errno ? saved_errno : EIO));
        return 2;
    }
    free(tmp);
    lua_pushboolean(L, 1);
    return 1;
}

static int load_fail(lua_State *L, const char *path, const char *msg)
{
    lua_pushnil(L);
    lua_pushfstring(L, "%s: %s", path, msg);
    return 2;
}

/* ah.history_load(path) -> h, or nil, "path: what is wrong" */
static int l_history_load(lua_State *L)
{
    const char *path = luaL_checkstring(L, 1);
    char msg[400];
    FILE *f = fopen(path, "rb");
    if (!f) {
        lua_pushnil(L);
        lua_pushfstring(L, "cannot open history '%s': %s", path, strerror(errno));
        return 2;
    }
    luaL_Buffer buf;
    luaL_buffinit(L, &buf);
    size_t total = 0, n;
    char chunk[8192];
    while ((n = fread(chunk, 1, sizeof chunk, f)) > 0 && total <= HISTORY_MAX_BYTES) {
        luaL_addlstring(&buf, chunk, n);
        total += n;
    }
    int rerr = ferror(f);
    fclose(f);
    luaL_pushresult(&buf);
    if (rerr)
        return load_fail(L, path, "read error");
    if (total > HISTORY_MAX_BYTES)
        return load_fail(L, path, "too large for a history file");
    size_t len;
    const char *text = lua_tolstring(L, -1, &len);
    const char *end = NULL;
    /* len + 1: the terminating NUL (Lua strings have one) is where the document must end */
    cJSON *doc = cJSON_ParseWithLengthOpts(text, len + 1, &end, 1);
    if (!doc) {
        ah__bufprintf(msg, sizeof msg, "not a JSON document (error at byte %lld)",
                      end ? (long long)(end - text) : 0LL);
        return load_fail(L, path, msg);
    }
    const cJSON *fmt = cJSON_GetObjectItemCaseSensitive(doc, "format");
    const cJSON *ver = cJSON_GetObjectItemCaseSensitive(doc, "version");
    const cJSON *msgs = cJSON_GetObjectItemCaseSensitive(doc, "messages");
    if (!cJSON_IsObject(doc) || !cJSON_IsString(fmt) ||
        strcmp(fmt->valuestring, HISTORY_FORMAT) != 0) {
        cJSON_Delete(doc);
        return load_fail(L, path,
                         "not an agenthost history (no \"format\": \"" HISTORY_FORMAT "\")");
    }
    if (!cJSON_IsNumber(ver) || ver->valuedouble != HISTORY_VERSION) {
        cJSON_Delete(doc);
        return load_fail(L, path, "unsupported history version (this agenthost reads "
                                  "version 1)");
    }
    for (const cJSON *it = doc->child; it; it = it->next) {
        if (strcmp(it->string, "format") && strcmp(it->string, "version") &&
            strcmp(it->string, "messages") && strcmp(it->string, "id")) {
            ah__bufprintf(msg, sizeof msg, "unknown member '%.40s'", it->string);
            cJSON_Delete(doc);
            return load_fail(L, path, msg);
        }
    }
    if (!cJSON_IsArray(msgs)) {
        cJSON_Delete(doc);
        return load_fail(L, path, "\"messages\" must be a list");
    }
    const cJSON *fid = cJSON_GetObjectItemCaseSensitive(doc, "id");
    if (fid && (!cJSON_IsString(fid) || !*fid->valuestring)) {
        cJSON_Delete(doc);
        return load_fail(L, path, "\"id\" must be a non-empty string");
    }
    cJSON *detached = cJSON_DetachItemFromObjectCaseSensitive(doc, "messages");
    lah_push_cjson(L, detached); /* frees it */
    int raw = lua_gettop(L);
    if (fid) {
        lua_pushstring(L, fid->valuestring);
        lua_setfield(L, raw, "id");
    }
    cJSON_Delete(doc);
    ah_conversation *c;
    if (!lah_history_check(L, raw, &c, msg, sizeof msg))
        return load_fail(L, path, msg);
    lah_push_history(L, c, 0);
    ah_conversation_free(c);
    return 1;
}

void lah_open_history(lua_State *L)
{
    static const luaL_Reg fns[] = {
        {"history_save", l_history_save}, {"history_load", l_history_load}, {NULL, NULL}};
    luaL_setfuncs(L, fns, 0);
}
