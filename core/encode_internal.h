/* encode_internal.h - what the per-format request encoders share (never installed).
 *
 * ah_request_encode() (encode.c) validates the options once, then hands one ah__enc to
 * the encoder of the chosen wire format, which fills a cJSON body object. Encoders read
 * the conversation only through its public read API.
 */
#ifndef AH_ENCODE_INTERNAL_H
#define AH_ENCODE_INTERNAL_H

#include "internal.h"
#include "agenthost/conversation.h"

#include <cjson/cJSON.h>

typedef struct ah__enc {
    const ah_conversation *conv;
    const ah_request_opts *opts;
    char *err; /* never NULL: encode.c points it at a scratch buffer when the caller has
                  none */
    size_t errsize;
} ah__enc;

/* One encoder per wire format: add the body's members to root. On failure they return
 * the status and have written a message naming the tool/block/option to e->err. */
ah_status ah__encode_anthropic(ah__enc *e, cJSON *root);
ah_status ah__encode_openai(ah__enc *e, cJSON *root);
ah_status ah__encode_responses(ah__enc *e, cJSON *root);
ah_status ah__encode_gemini(ah__enc *e, cJSON *root);
/* "gemini-M.N..." / "gemini-M-..." anywhere in model (provider_gemini.c): its version, 1
 * when found; *rest (when not NULL) points after it. */
int ah__gemini_version(const char *model, int *major, int *minor, const char **rest);

/* Record an error message and return st (for `return ah__enc_fail(...)`). */
ah_status ah__enc_fail(ah__enc *e, ah_status st, const char *fmt, ...) AH__PRINTF(3, 4);

/* ah__enc_fail(e, AH_ERR_NOMEM, "out of memory"). */
ah_status ah__enc_nomem(ah__enc *e);

/* tool_choice in the two OpenAI formats: "auto" / "none" / "required", or for a named
 * tool {"type":"function", ...} with the name nested in "function" (Chat Completions,
 * nested = 1) or beside "type" (Responses, nested = 0). Nothing for the default. */
ah_status ah__enc_openai_tool_choice(ah__enc *e, cJSON *root, int nested);

/* Tool i's schema as a cJSON raw item holding the caller's exact text (validated to be a
 * JSON object; NULL schema_json gives {"type":"object"}). NULL with e->err set on error:
 * *st_out tells AH_ERR_INVALID from AH_ERR_NOMEM. */
cJSON *ah__enc_tool_schema(ah__enc *e, size_t i, ah_status *st_out);

/* Tool i's "name", "description" (when it has one) and schema (under schema_key) added
 * to obj, the declaration object of the format (NULL obj: out of memory). */
ah_status ah__enc_tool_fields(ah__enc *e, cJSON *obj, size_t i, const char *schema_key);

/* The arguments of tool_use block (msg, blk), validated JSON. Returns the text to send,
 * borrowed from the block or static: "{}" when the block's arguments are empty or blank,
 * or valid JSON that is not an object (the model's mistake, answered by the worker as a
 * tool error); NULL with e->err set when they are not valid JSON. */
const char *ah__enc_arguments(ah__enc *e, size_t msg, size_t blk, const ah_msg_block *b);

/* 1 when message msg is an assistant message and the last message of the conversation
 * (Anthropic treats it as a prefill; the OpenAI formats as already-said text). */
int ah__enc_is_trailing_assistant(const ah__enc *e, size_t msg);

/* Images and documents (and an image tool result): the block's url as given, or a
 * data: URL "data:<media_type>;base64,<data>" built from its data. malloc'd; NULL when
 * out of memory. */
char *ah__enc_media_url(const ah_msg_block *b);
/* 1 when url is a base64 data: URL, with its media type copied out and *data pointing at
 * the base64 text in url; 0 otherwise. */
int ah__enc_split_data_url(const char *url, char *media_type, size_t mtsize,
                           const char **data);
/* "image", "document" or "tool_result image", for error messages. */
const char *ah__enc_media_what(const ah_msg_block *b);

/* A raw item holding validated JSON text, minified (whitespace between tokens dropped,
 * tokens untouched). NULL on allocation failure. */
cJSON *ah__json_raw(const char *json);

/* Small cJSON helpers returning 0 on allocation failure. */
int ah__json_put_str(cJSON *obj, const char *key, const char *s);
int ah__json_put_num(cJSON *obj, const char *key, double v);
int ah__json_put_bool(cJSON *obj, const char *key, int v);
/* Append a new object to array arr; NULL on allocation failure. */
cJSON *ah__json_push_object(cJSON *arr);

#endif
