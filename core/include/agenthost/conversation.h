/* agenthost/conversation.h - neutral conversation model and request encoding
 * (docs/providers-encoding.md, docs/worker.md).
 *
 * An ah_conversation is the history a worker owns: a system prompt plus an ordered list
 * of user and assistant messages made of blocks (text, reasoning, tool_use, tool_result).
 * It is wire-format neutral: each request is encoded from it by ah_request_encode() for
 * one of the three wire formats, so a continuation is nothing more than "history gained a
 * partial assistant message, encode the next request".
 *
 * Ownership: every string passed in is deep-copied; the caller keeps (and may free) its
 * own. Pointers handed out by the read functions are borrowed: valid until the
 * conversation is next modified or freed. A conversation is not thread-safe; use one per
 * thread or lock around it.
 */
#ifndef AGENTHOST_CONVERSATION_H
#define AGENTHOST_CONVERSATION_H

#include "agenthost/export.h"

#include "agenthost/error.h"
#include "agenthost/status.h"
#include "agenthost/wire.h"

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct ah_conversation ah_conversation;

typedef enum ah_role { AH_ROLE_USER = 0, AH_ROLE_ASSISTANT = 1 } ah_role;

/* X(NAME, "json name") */
#define AH_MSG_KIND_MAP(X)                                                             \
    X(TEXT, "text")                                                                      \
    X(REASONING, "reasoning")                                                            \
    X(TOOL_USE, "tool_use")                                                              \
    X(TOOL_RESULT, "tool_result")                                                        \
    X(IMAGE, "image")                                                                    \
    X(DOCUMENT, "document")

typedef enum ah_msg_kind {
#define AH__MK_ENUM(name, s) AH_MSG_##name,
    AH_MSG_KIND_MAP(AH__MK_ENUM)
#undef AH__MK_ENUM
        AH_MSG_KIND_COUNT_
} ah_msg_kind;

/* One block. As input (ah_conversation_add_block) it is copied; as output
 * (ah_conversation_block) it is a borrowed view. Fields a kind does not use are NULL / 0.
 *
 *   TEXT         text (never NULL; may be "")
 *   REASONING    text: the reasoning text or summary shown to the user (never NULL)
 *                signature: Anthropic thinking signature, or NULL
 *                item_id: Responses reasoning item id ("rs_..."), or NULL
 *                encrypted_content: Responses encrypted_content, or - when redacted - the
 *                  opaque data of an Anthropic redacted_thinking block; NULL when absent
 *                redacted: 1 for an Anthropic redacted_thinking block
 *   TOOL_USE     id, name (non-empty), arguments: the call's arguments as JSON text
 *                  (a JSON object; "" is treated as "{}")
 *   TOOL_RESULT  tool_use_id (non-empty), text: the result content, is_error; and, for a
 *                  result that carries an image (as MCP results may), media_type with
 *                  data or url as for IMAGE (all NULL: a text-only result)
 *   IMAGE        media_type: "image/jpeg", "image/png", "image/gif" or "image/webp"
 *                  (required with data, optional with url); exactly one of data (the
 *                  bytes in standard base64, no "data:" prefix) or url (http(s) or a
 *                  data: URL); user messages only
 *   DOCUMENT     media_type: "application/pdf"; data (base64) or url as for IMAGE; name:
 *                  an optional file name or title; user messages only
 * ah_msg_block_check() says which field is wrong.
 */
typedef struct ah_msg_block {
    ah_msg_kind kind;
    const char *text;
    const char *id;
    const char *name;
    const char *arguments;
    const char *tool_use_id;
    const char *signature;
    const char *item_id;
    const char *encrypted_content;
    int redacted;
    int is_error;
    const char *media_type; /* IMAGE, DOCUMENT, an image TOOL_RESULT */
    const char *data;       /* base64 */
    const char *url;
} ah_msg_block;

/* Is b complete and valid for its kind? AH_OK, or AH_ERR_INVALID with err naming the
 * field and why, e.g. "media_type: 'image/bmp' is not one of image/jpeg, image/png,
 * image/gif, image/webp" or "data: not base64 (byte 17)". err may be NULL. The role is
 * not checked here (ah_conversation_add_block does that). */
AH_EXPORT ah_status ah_msg_block_check(const ah_msg_block *b, char *err, size_t errsize);

AH_EXPORT const char *ah_role_name(ah_role role);             /* "user" / "assistant" / "unknown" */
AH_EXPORT const char *ah_msg_kind_name(ah_msg_kind kind); /* "text" ... / "unknown" */

/* ---- lifetime --------------------------------------------------------------------- */

/* Returns NULL on allocation failure. */
AH_EXPORT ah_conversation *ah_conversation_new(void);
AH_EXPORT void ah_conversation_free(ah_conversation *c);
/* A deep copy, or NULL on allocation failure (or c == NULL). */
AH_EXPORT ah_conversation *ah_conversation_copy(const ah_conversation *c);

/* ---- building --------------------------------------------------------------------- */

/* Set (or with NULL clear) the system prompt. AH_OK / AH_ERR_NOMEM / AH_ERR_INVALID. */
AH_EXPORT ah_status ah_conversation_set_system(ah_conversation *c, const char *system);

/* Start a new, empty message. */
AH_EXPORT ah_status ah_conversation_begin_user(ah_conversation *c);
AH_EXPORT ah_status ah_conversation_begin_assistant(ah_conversation *c);

/* Append a copy of *b to the LAST message. AH_ERR_STATE when there is no message or the
 * kind does not fit the role (tool_use only in assistant messages; tool_result only in
 * user messages); AH_ERR_INVALID when a required field is missing. */
AH_EXPORT ah_status ah_conversation_add_block(ah_conversation *c, const ah_msg_block *b);

/* Convenience forms of ah_conversation_add_block(), all on the last message.
 * add_text takes a length so stream deltas need no NUL-terminated copy. */
AH_EXPORT ah_status ah_conversation_add_text(ah_conversation *c, const char *text, size_t len);
AH_EXPORT ah_status ah_conversation_add_reasoning(ah_conversation *c, const char *text,
                                                  const char *signature, const char *item_id,
                                                  const char *encrypted_content, int redacted);
AH_EXPORT ah_status ah_conversation_add_tool_use(ah_conversation *c, const char *id,
                                                 const char *name, const char *arguments);

/* A NEW user message of n blocks (text, image, document; copies). AH_ERR_INVALID (err
 * names the block and field, "block 2 (image): media_type: ...") leaves c unchanged. */
AH_EXPORT ah_status ah_conversation_add_user_blocks(ah_conversation *c, const ah_msg_block *b,
                                                    size_t n, char *err, size_t errsize);

/* begin_user + add_text in one call: always a NEW user message. */
AH_EXPORT ah_status ah_conversation_add_user_text(ah_conversation *c, const char *text);

/* Append a tool result. It joins the last message when that is a user message holding
 * only tool results (so parallel calls' results travel together); otherwise it starts a
 * new user message. */
AH_EXPORT ah_status ah_conversation_add_tool_result(ah_conversation *c, const char *tool_use_id,
                                                    const char *content, int is_error);

/* Mark the last message (which must be an assistant message) as a continuation's partial
 * message: the blocks a cut stream had completed (docs/worker.md). AH_ERR_STATE otherwise. */
AH_EXPORT ah_status ah_conversation_set_partial(ah_conversation *c, int partial);

/* Drop messages from index n on (n >= count is a no-op). */
AH_EXPORT void ah_conversation_truncate(ah_conversation *c, size_t n);

/* ---- reading ---------------------------------------------------------------------- */

AH_EXPORT const char *ah_conversation_system(const ah_conversation *c); /* NULL when unset */
/* The conversation's id: set by the first run of a worker that has none (its run id), kept
 * by copies, the JSON and saved histories; the OpenAI formats' prompt_cache_key, stable
 * across the turns of one conversation. NULL when unset. set_id: NULL clears, "" is
 * AH_ERR_INVALID. */
AH_EXPORT ah_status ah_conversation_set_id(ah_conversation *c, const char *id);
AH_EXPORT const char *ah_conversation_id(const ah_conversation *c);
AH_EXPORT size_t ah_conversation_count(const ah_conversation *c);
/* Out-of-range indexes return AH_ROLE_USER / 0 / 0 / NULL respectively. */
AH_EXPORT ah_role ah_conversation_role(const ah_conversation *c, size_t msg);
AH_EXPORT int ah_conversation_is_partial(const ah_conversation *c, size_t msg);
AH_EXPORT size_t ah_conversation_block_count(const ah_conversation *c, size_t msg);
AH_EXPORT const ah_msg_block *ah_conversation_block(const ah_conversation *c, size_t msg, size_t i);

/* ---- neutral JSON (docs/providers-encoding.md, "Conversation JSON") --------------- */

/* Serialize to the neutral JSON document. *json_out is malloc'd (free with free()),
 * NUL-terminated, *len_out (may be NULL) its length. */
AH_EXPORT ah_status ah_conversation_to_json(const ah_conversation *c, char **json_out,
                                            size_t *len_out);

/* Parse a neutral JSON document into a new conversation (*out, owned by the caller).
 * AH_ERR_PARSE for malformed JSON, AH_ERR_INVALID for a well-formed document of the wrong
 * shape; err (may be NULL) then names the path, e.g. "messages[2].content[0].type". */
AH_EXPORT ah_status ah_conversation_from_json(const char *json, size_t len, ah_conversation **out,
                                              char *err, size_t errsize);

/* ---- request encoding ------------------------------------------------------------- */

typedef enum ah_tool_choice {
    AH_TOOL_CHOICE_DEFAULT =
        0, /* send nothing: the provider's default (auto with tools) */
    AH_TOOL_CHOICE_AUTO,
    AH_TOOL_CHOICE_NONE,
    AH_TOOL_CHOICE_REQUIRED, /* Anthropic "any", OpenAI "required" */
    AH_TOOL_CHOICE_NAMED     /* the tool named by tool_choice_name */
} ah_tool_choice;

typedef struct ah_tool_def {
    const char *name;        /* required */
    const char *description; /* may be NULL */
    const char *schema_json; /* a JSON Schema object as text; NULL = {"type":"object"} */
} ah_tool_def;

/* Is schema_json (NULL: the default) a tool's input schema, i.e. an object schema: a JSON
 * object whose "type", when given, is "object" (every provider takes a tool's arguments
 * as one JSON object)? AH_OK, or AH_ERR_INVALID with why in err, worded to follow the
 * field's name: "is not valid JSON at offset 7", "is not a JSON object (it is an
 * array)", "is not an object schema: its \"type\" is \"string\" (a tool's arguments are
 * one object: {\"type\": \"object\", \"properties\": ...})". ah_worker_new and
 * ah_request_encode check every tool with it, the Lua binding when an agent is built. */
AH_EXPORT ah_status ah_tool_schema_check(const char *schema_json, char *err, size_t errsize);

/* Request options. Zero-initialise (or call ah_request_opts_init) and fill what you need;
 * everything is borrowed for the duration of ah_request_encode() only. */
typedef struct ah_request_opts {
    const char *model;  /* required */
    int64_t max_tokens; /* > 0; required for anthropic, 0 = omit for the others */
    const ah_tool_def *tools;
    size_t n_tools;
    ah_tool_choice tool_choice;
    const char *tool_choice_name; /* for AH_TOOL_CHOICE_NAMED; must name one of tools */
    const char *const *stop;      /* stop sequences (not available on responses) */
    size_t n_stop;
    int has_temperature; /* temperature is sent only when this is set */
    double temperature;
    int stream; /* 1: ask for SSE */
    /* Reasoning. Each is sent only when set and only in the format that has it. */
    int64_t thinking_budget; /* anthropic: > 0 sends thinking {enabled, budget} */
    const char
        *reasoning_effort; /* openai: reasoning_effort; responses: reasoning.effort */
    int include_encrypted_reasoning; /* responses: include reasoning.encrypted_content */
    int chat_legacy_max_tokens; /* openai: send max_tokens, not max_completion_tokens */
    /* responses only: "background": true, "store": true (the provider runs the response
     * whatever happens to the connection and keeps it, so its stream can be re-attached).
     * An error on the other formats. */
    int background;
    /* A JSON object whose members are set on the body top level after encoding
     * (replacing a member of the same name): provider-specific knobs such as
     * {"thinking":{"type":"adaptive"}} or {"parallel_tool_calls":false}. May be NULL. */
    const char *extra_json;
    /* Prompt caching (docs/providers-encoding.md, "Prompt caching"). cache = 1 marks the
     * request's reusable prefix: anthropic puts cache_control breakpoints at the end of
     * tools + system and on the last message before the new turn (messages [0,
     * cache_history): a breakpoint on message cache_history - 1; 0 = none), at most
     * AH_CACHE_MAX_BREAKPOINTS; openai and responses send prompt_cache_key when set. */
    int cache;
    const char *cache_ttl; /* anthropic: NULL or "5m" (the default), or "1h" */
    size_t cache_history;
    const char *prompt_cache_key; /* openai, responses; NULL = none */
} ah_request_opts;

/* Anthropic accepts at most this many cache_control breakpoints in one request. */
#define AH_CACHE_MAX_BREAKPOINTS 4

AH_EXPORT void ah_request_opts_init(ah_request_opts *o);

/* Encode the request body for wire w from conversation c: unformatted JSON, malloc'd
 * (free with free()), NUL-terminated. Encoding reads c and opts only; nothing is added
 * that history does not show (docs/providers-encoding.md says per format what is sent).
 * Errors: AH_ERR_INVALID with err naming the offending tool, block or option (e.g.
 * "tool 'add': schema_json is not valid JSON at offset 7", "message 3 block 1 (tool_use
 * 'add' id 'call_1'): arguments are not a JSON object"); AH_ERR_NOMEM. The message never
 * contains an API key or block content. err may be NULL. */
AH_EXPORT ah_status ah_request_encode(ah_wire w, const ah_conversation *c,
                                      const ah_request_opts *opts, char **body_out, size_t *len_out,
                                      char *err, size_t errsize);

/* The request headers for wire w: content-type, accept (text/event-stream when stream,
 * else application/json) and authentication (anthropic: x-api-key + anthropic-version
 * 2023-06-01; openai and responses: Authorization: Bearer). api_key NULL or "" = no auth
 * header. The list owns its strings; free it with ah_header_list_free(). A key holding
 * CR, LF or other control bytes is rejected (AH_ERR_INVALID) so it cannot inject a
 * header. Never log the values: the auth header carries the key. */
typedef struct ah_header_list {
    ah_header items[6];
    size_t count;
    char *storage_; /* private: the auth value */
} ah_header_list;

AH_EXPORT ah_status ah_request_headers(ah_wire w, const char *api_key, int stream,
                                       ah_header_list *out);
AH_EXPORT void ah_header_list_free(ah_header_list *l);

#ifdef __cplusplus
}
#endif
#endif
