/* decode_openai.c - OpenAI Chat Completions: stream chunks and non-stream bodies.
 *
 * Stream: "data:" chunks with choices[].delta {content, reasoning_content | reasoning,
 * refusal, tool_calls[]} and finish_reason, then "data: [DONE]". Only choice 0 is decoded
 * (matched by its "index", not by position: a usage chunk and Azure's first chunk have
 * "choices": []). Usage is taken from the LAST chunk that carries it, wherever it sits
 * (a separate empty-choices chunk, the finish chunk, a later chunk, or x_groq.usage).
 *
 * Completion rules (the format has no explicit block ends): a text or reasoning
 * block closes when content of another kind or a tool call starts, or when finish_reason
 * arrives; a tool call closes at finish_reason. Tool-call fragments merge by
 * tool_calls[].index; id and name are taken from the first fragment that has them (a name
 * is never appended); arguments are appended and parsed once, at close. The stream is
 * finished when a finish_reason was seen and [DONE] or the end of the stream followed.
 */
#include "decode_internal.h"

#include <string.h>

#define CHAT_TOOL_SUB (-2) /* timeline sub-key marking Chat tool-call blocks */

/* Append text or reasoning (n bytes), switching blocks when the kind changes; shared
 * with the fast path (decode_fast.c). */
ah_status ah__openai_content(ah_decoder *d, ah_block_kind kind, const char *s, size_t n)
{
    ah_status st;
    if (n == 0)
        return AH_OK; /* the role chunk's "content": "" opens nothing */
    if (d->chat_finish_seen)
        return ah__dec_fail(d, AH_ERR_PARSE, "%s after finish_reason",
                            kind == AH_BLOCK_TEXT ? "content" : "reasoning");
    if (d->chat_open != AH__NONE && ah__tl_kind(d->tl, d->chat_open) != kind) {
        if ((st = ah__dec_close(d, d->chat_open)) != AH_OK)
            return st;
        d->chat_open = AH__NONE;
    }
    if (d->chat_open == AH__NONE &&
        (st = ah__dec_open(d, kind, -1, -1, NULL, NULL, &d->chat_open)) != AH_OK)
        return st;
    return ah__dec_content(d, d->chat_open, s, n);
}

static ah_status chat_content(ah_decoder *d, ah_block_kind kind, const char *s)
{
    return ah__openai_content(d, kind, s, strlen(s));
}

static const char *nonempty(const char *s)
{
    return s && *s ? s : NULL;
}

static ah_status append_args(ah_decoder *d, size_t i, const cJSON *a)
{
    if (cJSON_IsString(a))
        return ah__dec_content(d, i, a->valuestring, strlen(a->valuestring));
    if (cJSON_IsObject(a)) {
        /* Some servers send the arguments as an object, not as a JSON string. */
        char *s = cJSON_PrintUnformatted(a);
        if (!s)
            return ah__dec_fail(d, AH_ERR_NOMEM, "out of memory");
        ah_status st = ah__dec_content(d, i, s, strlen(s));
        cJSON_free(s);
        return st;
    }
    return AH_OK; /* absent or null: the first fragment may lack arguments entirely */
}

static ah_status tool_fragment(ah_decoder *d, const cJSON *tc, int64_t pos)
{
    ah_status st;
    int64_t tidx = pos;
    if (!cJSON_IsObject(tc))
        return ah__dec_fail(d, AH_ERR_PARSE, "tool_calls[%lld] is not an object",
                            (long long)pos);
    ah__jint(tc, "index", &tidx);
    const cJSON *fn = ah__jobj(tc, "function");
    const char *id = nonempty(ah__jstr(tc, "id"));
    const char *name = nonempty(ah__dec_name(d, ah__jstr(fn, "name")));
    size_t i = ah__tl_find(d->tl, tidx, CHAT_TOOL_SUB, 0);
    if (i != AH__NONE && !ah__tl_is_open(d->tl, i))
        return ah__dec_fail(d, AH_ERR_PARSE,
                            "fragment for tool call %lld after it closed",
                            (long long)tidx);
    if (i == AH__NONE) {
        /* A tool call starting closes the open text/reasoning block. */
        if (d->chat_open != AH__NONE) {
            if ((st = ah__dec_close(d, d->chat_open)) != AH_OK)
                return st;
            d->chat_open = AH__NONE;
        }
        if ((st = ah__dec_open(d, AH_BLOCK_TOOL_USE, tidx, CHAT_TOOL_SUB, id, name,
                               &i)) != AH_OK)
            return st;
    } else {
        if (id && ah__tl_len(d->tl, i, AH__F_ID) == 0 &&
            ah__tl_set(d->tl, i, AH__F_ID, id, strlen(id)) != AH_OK)
            return ah__dec_fail(d, AH_ERR_NOMEM, "out of memory");
        if (name && ah__tl_len(d->tl, i, AH__F_NAME) == 0 &&
            ah__tl_set(d->tl, i, AH__F_NAME, name, strlen(name)) != AH_OK)
            return ah__dec_fail(d, AH_ERR_NOMEM, "out of memory");
    }
    return append_args(d, i, cJSON_GetObjectItemCaseSensitive(fn, "arguments"));
}

static ah_status on_choice(ah_decoder *d, const cJSON *c)
{
    ah_status st;
    const cJSON *delta = ah__jobj(c, "delta");
    if (delta) {
        static const char *const rkeys[] = {"reasoning_content", "reasoning"};
        for (size_t k = 0; k < 2; k++) {
            const char *r = ah__jstr(delta, rkeys[k]);
            if (r && (st = chat_content(d, AH_BLOCK_REASONING, r)) != AH_OK)
                return st;
        }
        const char *text = ah__jstr(delta, "content");
        if (text && (st = chat_content(d, AH_BLOCK_TEXT, text)) != AH_OK)
            return st;
        const char *refusal = ah__jstr(delta, "refusal");
        if (refusal && ah__tl_refusal_append(d->tl, refusal, strlen(refusal)) != AH_OK)
            return ah__dec_fail(d, AH_ERR_NOMEM, "out of memory");
        const cJSON *tcs = cJSON_GetObjectItemCaseSensitive(delta, "tool_calls");
        if (tcs && !cJSON_IsArray(tcs) && !cJSON_IsNull(tcs))
            return ah__dec_fail(d, AH_ERR_PARSE, "\"tool_calls\" is not an array");
        int64_t pos = 0;
        const cJSON *tc;
        const cJSON *arr = cJSON_IsArray(tcs) ? tcs : NULL;
        cJSON_ArrayForEach(tc, arr)
        {
            if ((st = tool_fragment(d, tc, pos++)) != AH_OK)
                return st;
        }
    }
    const char *fr = ah__jstr(c, "finish_reason");
    if (fr) {
        if (ah__tl_set_stop_reason(d->tl, fr) != AH_OK)
            return ah__dec_fail(d, AH_ERR_NOMEM, "out of memory");
        d->chat_finish_seen = 1;
        d->chat_open = AH__NONE;
        if ((st = ah__dec_close_all(d)) != AH_OK)
            return st;
    }
    return AH_OK;
}

static void read_usage(ah_decoder *d, const cJSON *root)
{
    const cJSON *u = ah__jobj(root, "usage");
    if (!u)
        u = ah__jobj(ah__jobj(root, "x_groq"), "usage");
    if (!u)
        return;
    int64_t in = -1, out = -1;
    ah__jint(u, "prompt_tokens", &in);
    ah__jint(u, "completion_tokens", &out);
    ah__tl_replace_usage(d->tl, in, out);
    /* cached_tokens are part of prompt_tokens; Chat has no cache-write figure: 0 */
    int64_t cached = -1;
    ah__jint(ah__jobj(u, "prompt_tokens_details"), "cached_tokens", &cached);
    ah__tl_set_cache_usage(d->tl, cached, in >= 0 ? 0 : -1);
}

ah_status ah__openai_event(ah_decoder *d, const cJSON *root)
{
    ah_status st;
    /* Gateways (OpenRouter ...) report a mid-stream failure as a chunk with "error". */
    const cJSON *err = ah__jobj(root, "error");
    if (err && (st = ah__dec_provider_error(d, err)) != AH_OK)
        return st;
    const cJSON *choices = cJSON_GetObjectItemCaseSensitive(root, "choices");
    if (choices && !cJSON_IsArray(choices) && !cJSON_IsNull(choices))
        return ah__dec_fail(d, AH_ERR_PARSE, "\"choices\" is not an array");
    int64_t pos = 0;
    const cJSON *c;
    const cJSON *arr = cJSON_IsArray(choices) ? choices : NULL;
    cJSON_ArrayForEach(c, arr)
    {
        int64_t ci = pos++;
        if (!cJSON_IsObject(c))
            return ah__dec_fail(d, AH_ERR_PARSE, "choices[%lld] is not an object",
                                (long long)ci);
        ah__jint(c, "index", &ci);
        if (ci != 0)
            continue;
        if ((st = on_choice(d, c)) != AH_OK)
            return st;
    }
    read_usage(d, root);
    return AH_OK;
}

void ah__openai_end(ah_decoder *d)
{
    if (d->chat_finish_seen)
        ah__tl_set_finished(d->tl);
}

static ah_status body_block(ah_decoder *d, ah_block_kind kind, const char *s)
{
    size_t i;
    ah_status st;
    if (!s || !*s)
        return AH_OK;
    if ((st = ah__dec_open(d, kind, -1, -1, NULL, NULL, &i)) != AH_OK ||
        (st = ah__dec_content(d, i, s, strlen(s))) != AH_OK)
        return st;
    return ah__dec_close(d, i);
}

ah_status ah__openai_body(ah_decoder *d, const cJSON *root)
{
    ah_status st;
    const cJSON *choices = ah__jarr(root, "choices");
    const cJSON *err = ah__jobj(root, "error");
    if (!choices && err)
        return ah__dec_provider_error(d, err);
    if (!choices)
        return ah__dec_fail(d, AH_ERR_PARSE,
                            "not a chat completion: no \"choices\" array");
    const cJSON *c, *choice = NULL;
    int64_t pos = 0;
    cJSON_ArrayForEach(c, choices)
    {
        int64_t ci = pos++;
        ah__jint(c, "index", &ci);
        if (ci == 0 && cJSON_IsObject(c)) {
            choice = c;
            break;
        }
    }
    if (choice) {
        const cJSON *msg = ah__jobj(choice, "message");
        if (!msg)
            return ah__dec_fail(d, AH_ERR_PARSE, "choice 0 has no \"message\" object");
        const char *r = ah__jstr(msg, "reasoning_content");
        if (!r)
            r = ah__jstr(msg, "reasoning");
        if ((st = body_block(d, AH_BLOCK_REASONING, r)) != AH_OK ||
            (st = body_block(d, AH_BLOCK_TEXT, ah__jstr(msg, "content"))) != AH_OK)
            return st;
        const char *refusal = ah__jstr(msg, "refusal");
        if (refusal && ah__tl_refusal_append(d->tl, refusal, strlen(refusal)) != AH_OK)
            return ah__dec_fail(d, AH_ERR_NOMEM, "out of memory");
        const cJSON *tcs = ah__jarr(msg, "tool_calls");
        const cJSON *tc;
        pos = 0;
        cJSON_ArrayForEach(tc, tcs)
        {
            if ((st = tool_fragment(d, tc, pos++)) != AH_OK)
                return st;
        }
        const char *fr = ah__jstr(choice, "finish_reason");
        if (fr && ah__tl_set_stop_reason(d->tl, fr) != AH_OK)
            return ah__dec_fail(d, AH_ERR_NOMEM, "out of memory");
        if ((st = ah__dec_close_all(d)) != AH_OK)
            return st;
    }
    read_usage(d, root);
    ah__tl_set_finished(d->tl);
    return AH_OK;
}

/* What the stream handlers above read (decode_tree.c builds only this): "error",
 * "usage" and x_groq.usage whole, and of each choices[] object its "index", "delta"
 * (whole) and "finish_reason". The root, x_groq and each choice are only looked up by
 * key. */
static const ah__tree_key choice_keys[] = {
    AH__TK("index", AH__TK_DEEP, NULL),
    AH__TK("delta", AH__TK_DEEP, NULL),
    AH__TK("finish_reason", AH__TK_DEEP, NULL),
    AH__TK_END,
};
static const ah__tree_key groq_keys[] = {
    AH__TK("usage", AH__TK_DEEP, NULL),
    AH__TK_END,
};
const ah__tree_key ah__tree_chat[] = {
    AH__TK("choices", AH__TK_EACH, choice_keys),
    AH__TK("usage", AH__TK_DEEP, NULL),
    AH__TK("x_groq", AH__TK_OBJ, groq_keys),
    AH__TK("error", AH__TK_DEEP, NULL),
    AH__TK_END,
};
