/* model.c - the mock's deterministic model: a request body -> one reply (docs/mock.md).
 *
 * Each wire format's request is reduced to one neutral conversation (user text, tool
 * results, assistant text), then one rule picks the reply:
 *   - last message holds tool results   -> text quoting them;
 *   - tools offered, no tool result yet -> a short text, then one call to the first tool
 *                                          with arguments built from its schema;
 *   - otherwise                         -> "You said: \"<digest>\". ..." text;
 *   - last message is the assistant's   -> a continuation: the reply R the model gives
 *     (a partial), or a user message          for the conversation without it; if the
 *     asking to "continue" right after        partial is a prefix of R, only the rest of R
 *     the assistant's (the prompt rung)       (so partial + continuation == R), else
 *                                          "[continued] ..."; a step's `restate` puts
 *                                          the partial (or its last sentence) first, as
 *                                          real models do.
 * Like the real Anthropic API, a trailing assistant message is refused with HTTP 400 for
 * Claude 4.6 and later model ids and with thinking on ("does not support assistant
 * message prefill"), and for older models when it ends in whitespace.
 * Everything (text, delta boundaries, ids, usage) depends on the request alone, so the
 * same request always gets the same bytes. Delta boundaries are computed on R, so a
 * continuation streams exactly the deltas an uninterrupted reply would have had left. */
#include "mock_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { DIGEST_CHARS = 60, RESULT_MAX = 2000, ARG_FRAGMENT = 8, SCHEMA_DEPTH = 8 };

typedef enum { M_USER, M_TOOL_RESULTS, M_ASSISTANT } msg_kind;

typedef struct nmsg {
    msg_kind kind;
    ah__mock_buf text;
    const cJSON *item; /* first raw item of this message (where hashing stops) */
} nmsg;

typedef struct conv {
    nmsg *v;
    size_t n, cap;
    const cJSON *items;       /* the raw messages / input array, or NULL */
    const char *tool_name;    /* first function tool, or NULL */
    const cJSON *tool_schema; /* its JSON schema, or NULL */
} conv;

static int is_space_c(char ch)
{
    return ch == ' ' || ch == '\n' || ch == '\t' || ch == '\r';
}

static const cJSON *get(const cJSON *o, const char *key)
{
    return cJSON_IsObject(o) ? cJSON_GetObjectItemCaseSensitive(o, key) : NULL;
}

static const char *get_str(const cJSON *o, const char *key)
{
    const cJSON *v = get(o, key);
    return cJSON_IsString(v) ? v->valuestring : NULL;
}

static int str_is(const cJSON *o, const char *key, const char *want)
{
    const char *s = get_str(o, key);
    return s && strcmp(s, want) == 0;
}

static void conv_free(conv *c)
{
    for (size_t i = 0; i < c->n; i++)
        ah__mock_buf_free(&c->v[i].text);
    free(c->v);
    memset(c, 0, sizeof *c);
}

/* Start a message of `kind`; consecutive tool results merge into one message. */
static nmsg *conv_push(conv *c, msg_kind kind, const cJSON *item)
{
    if (kind == M_TOOL_RESULTS && c->n && c->v[c->n - 1].kind == M_TOOL_RESULTS)
        return &c->v[c->n - 1];
    if (c->n == c->cap) {
        size_t cap = c->cap ? c->cap * 2 : 8;
        nmsg *v = realloc(c->v, cap * sizeof *v);
        if (!v)
            return NULL;
        c->v = v;
        c->cap = cap;
    }
    nmsg *m = &c->v[c->n++];
    memset(m, 0, sizeof *m);
    m->kind = kind;
    m->item = item;
    return m;
}

static void add_result(nmsg *m, const char *s)
{
    if (m->text.len)
        ah__mock_buf_puts(&m->text, " | ");
    ah__mock_buf_puts(&m->text, s);
}

/* Text of a content value: a string, or an array of parts whose "text" is taken when the
 * part's type is one of `types` (space-separated list). */
static void append_parts(ah__mock_buf *out, const cJSON *content, const char *types)
{
    if (cJSON_IsString(content)) {
        ah__mock_buf_puts(out, content->valuestring);
        return;
    }
    const cJSON *part;
    cJSON_ArrayForEach(part, content)
    {
        const char *type = get_str(part, "type");
        const char *text = get_str(part, "text");
        if (!type || !text)
            continue;
        size_t tl = strlen(type);
        for (const char *t = types; *t;) {
            size_t n = strcspn(t, " ");
            if (n == tl && strncmp(t, type, n) == 0) {
                ah__mock_buf_puts(out, text);
                break;
            }
            t += n + (t[n] == ' ');
        }
    }
}

/* ---- each wire format -> the neutral conversation ---------------------------------- */

static int conv_anthropic(const cJSON *req, conv *c, char *err, size_t errsize)
{
    const cJSON *msgs = get(req, "messages");
    if (!cJSON_IsNumber(get(req, "max_tokens"))) {
        ah__bufprintf(err, errsize, "max_tokens: Field required");
        return -1;
    }
    if (!cJSON_IsArray(msgs)) {
        ah__bufprintf(err, errsize, "messages: Field required");
        return -1;
    }
    if (!msgs->child) {
        ah__bufprintf(err, errsize, "messages: at least one message is required");
        return -1;
    }
    c->items = msgs;
    int i = 0;
    for (const cJSON *m = msgs->child; m; m = m->next, i++) {
        const cJSON *content = get(m, "content");
        int user = str_is(m, "role", "user");
        if (!user && !str_is(m, "role", "assistant")) {
            ah__bufprintf(err, errsize,
                          "messages.%d.role: Input should be 'user' or 'assistant'", i);
            return -1;
        }
        int results = 0;
        const cJSON *b;
        if (user && cJSON_IsArray(content)) {
            cJSON_ArrayForEach(b, content)
            {
                results |= str_is(b, "type", "tool_result");
            }
        }
        nmsg *n = conv_push(c,
                            !user     ? M_ASSISTANT
                            : results ? M_TOOL_RESULTS
                                      : M_USER,
                            m);
        if (!n)
            return -2;
        if (!results) {
            append_parts(&n->text, content, "text");
            continue;
        }
        cJSON_ArrayForEach(b, content)
        {
            if (!str_is(b, "type", "tool_result"))
                continue;
            ah__mock_buf one = {0};
            append_parts(&one, get(b, "content"), "text");
            add_result(n, one.data ? one.data : "");
            ah__mock_buf_free(&one);
        }
    }
    /* Server tools (web search, ...) have no input_schema: only client tools count. */
    const cJSON *t;
    if (!str_is(get(req, "tool_choice"), "type", "none")) {
        cJSON_ArrayForEach(t, get(req, "tools"))
        {
            if (get_str(t, "name") && cJSON_IsObject(get(t, "input_schema"))) {
                c->tool_name = get_str(t, "name");
                c->tool_schema = get(t, "input_schema");
                break;
            }
        }
    }
    return 0;
}

/* A trailing assistant message, as the real APIs take it: Anthropic refuses it outright
 * for Claude 4.6 and later and with thinking on, and for older models when it ends in
 * whitespace; a step's refuse_prefill refuses it on any format. 0 = accepted. */
static int check_prefill(ah_wire wire, const cJSON *req, const conv *c,
                         const ah__mock_text_opts *o, char *err, size_t errsize)
{
    const nmsg *last = &c->v[c->n - 1];
    if (last->kind != M_ASSISTANT)
        return 0;
    int refuse = o->refuse_prefill;
    if (wire == AH_WIRE_ANTHROPIC) {
        int maj, min;
        const cJSON *th = get(req, "thinking");
        refuse |= ah_claude_version(get_str(req, "model"), &maj, &min) &&
                  (maj > 4 || (maj == 4 && min >= 6));
        refuse |= cJSON_IsObject(th) && !str_is(th, "type", "disabled");
    }
    if (refuse) {
        ah__bufprintf(err, errsize, "%s", AH__MOCK_PREFILL_REFUSAL);
        return -1;
    }
    if (wire == AH_WIRE_ANTHROPIC && last->text.len) {
        char e = last->text.data[last->text.len - 1];
        if (e == ' ' || e == '\n' || e == '\t' || e == '\r') {
            ah__bufprintf(err, errsize,
                          "messages: final assistant content cannot end with trailing "
                          "whitespace");
            return -1;
        }
    }
    return 0;
}

/* The prompt rung: a user message asking to continue ("continue", any case). */
static int asks_to_continue(const nmsg *m)
{
    static const char word[] = "continue";
    for (size_t i = 0; m->text.data && i + sizeof word - 1 <= m->text.len; i++) {
        size_t k = 0;
        while (k < sizeof word - 1 &&
               (m->text.data[i + k] | 0x20) == word[k])
            k++;
        if (k == sizeof word - 1)
            return 1;
    }
    return 0;
}

/* Where the restatement of `p` starts: 0 for all of it, else the start of its last
 * sentence or line (after ". ", "! ", "? " or a newline). */
static size_t last_sentence(const char *p, size_t n)
{
    while (n > 0 && is_space_c(p[n - 1]))
        n--;
    size_t start = 0;
    for (size_t i = 0; i + 1 < n; i++)
        if (p[i] == '\n' || ((p[i] == '.' || p[i] == '!' || p[i] == '?') && is_space_c(p[i + 1])))
            start = i + 1;
    while (start < n && is_space_c(p[start]))
        start++;
    return start;
}

static void openai_tool(const cJSON *req, conv *c, int responses)
{
    const cJSON *t;
    const cJSON *tc = get(req, "tool_choice");
    if (cJSON_IsString(tc) && strcmp(tc->valuestring, "none") == 0)
        return;
    cJSON_ArrayForEach(t, get(req, "tools"))
    {
        const cJSON *fn = responses ? t : get(t, "function");
        if (str_is(t, "type", "function") && get_str(fn, "name")) {
            c->tool_name = get_str(fn, "name");
            c->tool_schema = get(fn, "parameters");
            return;
        }
    }
}

static int conv_chat(const cJSON *req, conv *c, char *err, size_t errsize)
{
    const cJSON *msgs = get(req, "messages");
    if (!cJSON_IsArray(msgs)) {
        ah__bufprintf(err, errsize, "Missing required parameter: 'messages'.");
        return -1;
    }
    if (!msgs->child) {
        ah__bufprintf(err, errsize,
                      "Invalid 'messages': empty array. Expected an array with minimum "
                      "length 1, but got an empty array instead.");
        return -1;
    }
    c->items = msgs;
    for (const cJSON *m = msgs->child; m; m = m->next) {
        const char *role = get_str(m, "role");
        if (!role) {
            ah__bufprintf(err, errsize, "Missing required parameter: 'messages[].role'.");
            return -1;
        }
        msg_kind kind;
        if (strcmp(role, "user") == 0)
            kind = M_USER;
        else if (strcmp(role, "assistant") == 0)
            kind = M_ASSISTANT;
        else if (strcmp(role, "tool") == 0)
            kind = M_TOOL_RESULTS;
        else
            continue; /* system / developer */
        nmsg *n = conv_push(c, kind, m);
        if (!n)
            return -2;
        if (kind == M_TOOL_RESULTS) {
            ah__mock_buf one = {0};
            append_parts(&one, get(m, "content"), "text");
            add_result(n, one.data ? one.data : "");
            ah__mock_buf_free(&one);
        } else {
            append_parts(&n->text, get(m, "content"), "text");
        }
    }
    openai_tool(req, c, 0);
    return 0;
}

static int conv_responses(const cJSON *req, conv *c, char *err, size_t errsize)
{
    const cJSON *input = get(req, "input");
    if (cJSON_IsString(input)) {
        nmsg *n = conv_push(c, M_USER, NULL);
        if (!n)
            return -2;
        ah__mock_buf_puts(&n->text, input->valuestring);
        openai_tool(req, c, 1);
        return 0;
    }
    if (!cJSON_IsArray(input)) {
        ah__bufprintf(err, errsize, "Missing required parameter: 'input'.");
        return -1;
    }
    c->items = input;
    for (const cJSON *it = input->child; it; it = it->next) {
        const char *type = get_str(it, "type");
        const char *role = get_str(it, "role");
        if (type && strcmp(type, "function_call_output") == 0) {
            nmsg *n = conv_push(c, M_TOOL_RESULTS, it);
            if (!n)
                return -2;
            const cJSON *out = get(it, "output");
            ah__mock_buf one = {0};
            append_parts(&one, out, "input_text output_text text");
            add_result(n, one.data ? one.data : "");
            ah__mock_buf_free(&one);
        } else if ((!type || strcmp(type, "message") == 0) && role) {
            msg_kind kind;
            if (strcmp(role, "user") == 0)
                kind = M_USER;
            else if (strcmp(role, "assistant") == 0)
                kind = M_ASSISTANT;
            else
                continue; /* system / developer */
            nmsg *n = conv_push(c, kind, it);
            if (!n)
                return -2;
            append_parts(&n->text, get(it, "content"), "input_text output_text text");
        }
        /* function_call, reasoning and other items carry no text the model answers */
    }
    if (c->n == 0) {
        ah__bufprintf(err, errsize, "Invalid 'input': no message to answer.");
        return -1;
    }
    openai_tool(req, c, 1);
    return 0;
}

/* ---- the reply --------------------------------------------------------------------- */

static int is_space(char ch)
{
    return ch == ' ' || ch == '\n' || ch == '\t' || ch == '\r';
}

/* First DIGEST_CHARS code points of s with whitespace runs collapsed to one space. */
static void digest(ah__mock_buf *out, const char *s, size_t n)
{
    size_t chars = 0, i = 0;
    while (i < n && is_space(s[i]))
        i++;
    int pending_space = 0;
    while (i < n && chars < DIGEST_CHARS) {
        if (is_space(s[i])) {
            pending_space = 1;
            i++;
            continue;
        }
        if (pending_space) {
            ah__mock_buf_put(out, " ", 1);
            chars++;
            pending_space = 0;
            if (chars == DIGEST_CHARS)
                break;
        }
        size_t len = 1;
        while (i + len < n && ((unsigned char)s[i + len] & 0xC0) == 0x80)
            len++;
        ah__mock_buf_put(out, s + i, len);
        chars++;
        i += len;
    }
}

static cJSON *value_for(const char *name, const cJSON *schema, int depth);

static cJSON *object_for(const cJSON *schema, int depth)
{
    cJSON *obj = cJSON_CreateObject();
    const cJSON *props = get(schema, "properties");
    const cJSON *r;
    cJSON_ArrayForEach(r, get(schema, "required"))
    {
        if (!cJSON_IsString(r) || !obj)
            continue;
        cJSON *v = value_for(r->valuestring, get(props, r->valuestring), depth + 1);
        if (!v) {
            cJSON_Delete(obj);
            return NULL;
        }
        cJSON_AddItemToObject(obj, r->valuestring, v);
    }
    return obj;
}

/* A deterministic value satisfying (the simple parts of) a JSON schema. */
static cJSON *value_for(const char *name, const cJSON *schema, int depth)
{
    const cJSON *e;
    if (depth > SCHEMA_DEPTH)
        return cJSON_CreateNull();
    if ((e = get(schema, "const")))
        return cJSON_Duplicate(e, 1);
    if ((e = get(schema, "enum")) && cJSON_IsArray(e) && e->child)
        return cJSON_Duplicate(e->child, 1);
    const char *type = NULL;
    const cJSON *t = get(schema, "type");
    if (cJSON_IsString(t)) {
        type = t->valuestring;
    } else if (cJSON_IsArray(t)) {
        cJSON_ArrayForEach(e, t)
        {
            if (cJSON_IsString(e) && strcmp(e->valuestring, "null") != 0) {
                type = e->valuestring;
                break;
            }
        }
    }
    if (!type) {
        const cJSON *alt = get(schema, "anyOf");
        if (!alt)
            alt = get(schema, "oneOf");
        if (cJSON_IsArray(alt) && alt->child)
            return value_for(name, alt->child, depth + 1);
        type = get(schema, "properties") ? "object" : "string";
    }
    if (strcmp(type, "integer") == 0)
        return cJSON_CreateNumber(42);
    if (strcmp(type, "number") == 0)
        return cJSON_CreateNumber(4.2);
    if (strcmp(type, "boolean") == 0)
        return cJSON_CreateTrue();
    if (strcmp(type, "null") == 0)
        return cJSON_CreateNull();
    if (strcmp(type, "object") == 0)
        return object_for(schema, depth);
    if (strcmp(type, "array") == 0) {
        cJSON *arr = cJSON_CreateArray();
        const cJSON *min = get(schema, "minItems");
        if (arr && cJSON_IsNumber(min) && min->valuedouble >= 1) {
            cJSON *v = value_for(name, get(schema, "items"), depth + 1);
            if (!v) {
                cJSON_Delete(arr);
                return NULL;
            }
            cJSON_AddItemToArray(arr, v);
        }
        return arr;
    }
    char s[96];
    snprintf(s, sizeof s, "mock_%.80s", name ? name : "value");
    return cJSON_CreateString(s);
}

/* Delta boundaries of text per the options. Returns the number of deltas, or -1. */
static const char *const filler[] = {"lorem", "ipsum",       "dolor",      "sit",
                                     "amet",  "consectetur", "adipiscing", "elit"};

static size_t *word_starts(const char *t, size_t len, size_t *nwords)
{
    size_t n = 0, cap = 16;
    size_t *w = malloc(cap * sizeof *w);
    if (!w)
        return NULL;
    for (size_t i = 0; i < len; i++) {
        if (i == 0 || (is_space(t[i]) && !is_space(t[i - 1]))) {
            if (n == cap) {
                size_t *nw = realloc(w, 2 * cap * sizeof *w);
                if (!nw) {
                    free(w);
                    return NULL;
                }
                w = nw;
                cap *= 2;
            }
            w[n++] = i;
        }
    }
    *nwords = n;
    return w;
}

static int split_text(ah__mock_buf *text, const ah__mock_text_opts *o, size_t **cuts_out,
                      size_t *n_out)
{
    size_t *cuts = NULL, n = 0, nwords = 0;
    size_t *words = NULL;

    if (o->text_deltas) {
        /* Pad with filler words up to text_deltas words, then group words evenly. */
        words = word_starts(text->data ? text->data : "", text->len, &nwords);
        if (!words)
            return -1;
        if (nwords < o->text_deltas) {
            size_t need = o->text_deltas - nwords;
            if (ah__mock_buf_reserve(text, need * 12) != 0) {
                free(words);
                return -1;
            }
            for (size_t i = 0; i < need; i++) {
                const char *f = filler[(nwords + i) % (sizeof filler / sizeof *filler)];
                if (text->len)
                    ah__mock_buf_put(text, " ", 1);
                ah__mock_buf_puts(text, f);
            }
            free(words);
            words = word_starts(text->data, text->len, &nwords);
            if (!words || text->failed) {
                free(words);
                return -1;
            }
        }
        n = o->text_deltas;
        cuts = malloc((n + 1) * sizeof *cuts);
        if (!cuts) {
            free(words);
            return -1;
        }
        for (size_t i = 0; i < n; i++)
            cuts[i] = words[(size_t)((unsigned long long)i * nwords / n)];
        cuts[n] = text->len;
        free(words);
    } else if (o->delta_bytes) {
        size_t cap = text->len / o->delta_bytes + 2;
        cuts = malloc(cap * sizeof *cuts);
        if (!cuts)
            return -1;
        size_t pos = 0;
        while (pos < text->len) {
            cuts[n++] = pos;
            size_t end = pos + o->delta_bytes;
            if (end >= text->len) {
                pos = text->len;
                break;
            }
            size_t fl = ah__mock_utf8_floor(text->data + pos, o->delta_bytes);
            if (fl == 0) /* one character wider than delta_bytes: take it whole */
                while (end < text->len && ((unsigned char)text->data[end] & 0xC0) == 0x80)
                    end++;
            else
                end = pos + fl;
            pos = end;
        }
        cuts[n] = text->len;
    } else {
        words = word_starts(text->data ? text->data : "", text->len, &nwords);
        if (!words)
            return -1;
        cuts = realloc(words, (nwords + 1) * sizeof *cuts);
        if (!cuts) {
            free(words);
            return -1;
        }
        n = nwords;
        cuts[n] = text->len;
    }
    *cuts_out = cuts;
    *n_out = n;
    return 0;
}

static uint64_t hash_items(const conv *c, const cJSON *stop)
{
    uint64_t h = AH__MOCK_FNV_INIT;
    if (!c->items) { /* Responses string input: the text itself */
        if (c->n && c->v[0].text.data)
            h = ah__mock_fnv1a(h, c->v[0].text.data, c->v[0].text.len);
        return h;
    }
    for (const cJSON *it = c->items->child; it && it != stop; it = it->next) {
        char *s = cJSON_PrintUnformatted(it);
        if (s) {
            h = ah__mock_fnv1a(h, s, strlen(s));
            cJSON_free(s);
        }
        h = ah__mock_fnv1a(h, "\n", 1);
    }
    return h;
}

void ah__mock_reply_free(ah__mock_reply *r)
{
    if (!r)
        return;
    free(r->model);
    free(r->text);
    free(r->cuts);
    free(r->tool_name);
    free(r->tool_args);
    free(r->arg_cuts);
    free(r->tools_json);
    memset(r, 0, sizeof *r);
}

ah_status ah__mock_model_reply(ah_wire wire, const cJSON *req, size_t body_len,
                               const ah__mock_text_opts *opts, ah__mock_reply *out,
                               char *err, size_t errsize)
{
    ah_status st = AH_ERR_NOMEM;
    conv c = {0};
    ah__mock_buf text = {0};
    size_t *cuts = NULL, ncuts = 0;
    char *args = NULL;

    memset(out, 0, sizeof *out);
    if (!cJSON_IsObject(req)) {
        ah__bufprintf(err, errsize, "the request body must be a JSON object");
        return AH_ERR_INVALID;
    }
    const char *model = get_str(req, "model");
    if (!model) {
        ah__bufprintf(err, errsize,
                      wire == AH_WIRE_ANTHROPIC ? "model: Field required"
                                                : "you must provide a model parameter");
        return AH_ERR_INVALID;
    }
    if (wire == AH_WIRE_RESPONSES && cJSON_IsTrue(get(req, "background"))) {
        /* store defaults to true in this API; an explicit false cannot run in the
         * background (docs/mock.md: the text is ours, not OpenAI's verbatim). */
        const cJSON *store = get(req, "store");
        if (store && !cJSON_IsTrue(store)) {
            ah__bufprintf(err, errsize,
                          "Background mode requires store to be true: set 'store' to "
                          "true (or leave it out) when 'background' is true.");
            return AH_ERR_INVALID;
        }
        out->background = 1;
    }
    int rc = wire == AH_WIRE_ANTHROPIC ? conv_anthropic(req, &c, err, errsize)
             : wire == AH_WIRE_OPENAI  ? conv_chat(req, &c, err, errsize)
                                       : conv_responses(req, &c, err, errsize);
    if (rc != 0) {
        st = rc == -1 ? AH_ERR_INVALID : AH_ERR_NOMEM;
        if (rc == -2)
            ah__bufprintf(err, errsize, "out of memory");
        goto cleanup;
    }

    if (check_prefill(wire, req, &c, opts, err, errsize) != 0) {
        st = AH_ERR_INVALID;
        goto cleanup;
    }
    /* The conversation the reply answers: without a trailing assistant partial (prefill)
     * or without the partial and the user's request to continue it (prompt). */
    size_t upto = c.n;
    const nmsg *partial = NULL;
    if (upto && c.v[upto - 1].kind == M_ASSISTANT) {
        partial = &c.v[upto - 1];
        upto--;
    } else if (upto >= 2 && c.v[upto - 1].kind == M_USER && asks_to_continue(&c.v[upto - 1]) &&
               c.v[upto - 2].kind == M_ASSISTANT) {
        partial = &c.v[upto - 2];
        upto -= 2;
    }
    const nmsg *last = upto ? &c.v[upto - 1] : NULL;
    int had_result = 0;
    for (size_t i = 0; i < upto; i++)
        had_result |= c.v[i].kind == M_TOOL_RESULTS;
    int call_tool = c.tool_name && !had_result && (!last || last->kind != M_TOOL_RESULTS);

    if (opts->text) {
        ah__mock_buf_puts(&text, opts->text);
    } else if (last && last->kind == M_TOOL_RESULTS) {
        size_t n = ah__mock_utf8_floor(last->text.data ? last->text.data : "",
                                       last->text.len < RESULT_MAX ? last->text.len
                                                                   : RESULT_MAX);
        ah__mock_buf_puts(&text, "The tool returned: ");
        ah__mock_buf_put(&text, last->text.data ? last->text.data : "", n);
        if (n < last->text.len)
            ah__mock_buf_puts(&text, "...");
    } else if (call_tool) {
        ah__mock_buf_printf(&text, "I will call %s now.", c.tool_name);
    } else {
        ah__mock_buf_puts(&text, "You said: \"");
        if (last)
            digest(&text, last->text.data ? last->text.data : "", last->text.len);
        ah__mock_buf_puts(&text,
                          "\". This is a deterministic reply from the agenthost mock "
                          "provider.");
    }
    if (text.failed || split_text(&text, opts, &cuts, &ncuts) != 0)
        goto cleanup;

    if (partial) {
        size_t p = partial->text.len;
        if (p <= text.len && (p == 0 || memcmp(text.data, partial->text.data, p) == 0)) {
            /* Keep R's boundaries after p; the first delta may start mid-delta. */
            size_t k = 0;
            for (size_t i = 0; i < ncuts; i++)
                if (cuts[i + 1] > p)
                    cuts[k++] = (cuts[i] > p ? cuts[i] : p) - p;
            ncuts = k;
            cuts[k] = text.len - p;
            memmove(text.data, text.data + p, text.len - p + 1);
            text.len -= p;
        } else {
            ah__mock_buf cont = {0};
            ah__mock_buf_printf(&cont, "[continued] The reply goes on after %zu bytes.",
                                partial->text.len);
            free(cuts);
            cuts = NULL;
            ah__mock_buf_free(&text);
            text = cont;
            ah__mock_text_opts plain = {0};
            if (text.failed || split_text(&text, &plain, &cuts, &ncuts) != 0)
                goto cleanup;
        }
        out->continuation = 1;
        if (opts->restate && partial->text.len) {
            /* Real models begin by repeating what they said: the partial or its last
             * sentence, then the rest, in one text block. */
            const char *pt = partial->text.data;
            size_t plen = partial->text.len;
            while (plen > 0 && is_space_c(pt[plen - 1]))
                plen--;
            size_t from = opts->restate == AH__MOCK_RESTATE_LAST_SENTENCE
                              ? last_sentence(pt, plen)
                              : 0;
            size_t rlen = plen - from, nw = 0;
            size_t *w = rlen ? word_starts(pt + from, rlen, &nw) : NULL;
            size_t *nc = malloc((nw + ncuts + 1) * sizeof *nc);
            ah__mock_buf joined = {0};
            ah__mock_buf_put(&joined, pt + from, rlen);
            ah__mock_buf_put(&joined, text.data ? text.data : "", text.len);
            if ((rlen && !w) || !nc || joined.failed) {
                free(w);
                free(nc);
                ah__mock_buf_free(&joined);
                goto cleanup;
            }
            for (size_t i = 0; i < nw; i++)
                nc[i] = w[i];
            for (size_t i = 0; i <= ncuts; i++)
                nc[nw + i] = cuts[i] + rlen;
            free(w);
            free(cuts);
            cuts = nc;
            ncuts += nw;
            ah__mock_buf_free(&text);
            text = joined;
            out->restated = rlen;
        }
    }

    uint64_t h = hash_items(&c, partial ? partial->item : NULL);
    if (call_tool) {
        if (opts->tool_args) {
            args = ah__strdup(opts->tool_args);
        } else {
            cJSON *a = object_for(c.tool_schema, 0);
            char *printed = a ? cJSON_PrintUnformatted(a) : NULL;
            cJSON_Delete(a);
            if (!printed)
                goto cleanup;
            args = ah__strdup(printed);
            cJSON_free(printed);
        }
        out->tool_name = ah__strdup(c.tool_name);
        if (!args || !out->tool_name)
            goto cleanup;
        out->has_tool = 1;
        out->args_len = strlen(args);
        out->arg_cuts =
            malloc((out->args_len / ARG_FRAGMENT + 2) * sizeof *out->arg_cuts);
        if (!out->arg_cuts)
            goto cleanup;
        size_t pos = 0;
        while (pos < out->args_len) {
            out->arg_cuts[out->nargs++] = pos;
            size_t take =
                out->args_len - pos < ARG_FRAGMENT ? out->args_len - pos : ARG_FRAGMENT;
            size_t fl = ah__mock_utf8_floor(args + pos, take);
            pos += fl ? fl : take;
        }
        out->arg_cuts[out->nargs] = out->args_len;
        out->tool_args = args;
        args = NULL;
    }
    const cJSON *tools = get(req, "tools");
    char *tj = cJSON_IsArray(tools) ? cJSON_PrintUnformatted(tools) : NULL;
    out->tools_json = ah__strdup(tj ? tj : "[]");
    cJSON_free(tj);
    out->model = ah__strdup(model);
    if (!out->tools_json || !out->model)
        goto cleanup;

    const cJSON *so = get(req, "stream_options");
    out->include_usage = cJSON_IsTrue(get(so, "include_usage"));
    out->input_tokens = (long long)(body_len + 3) / 4;
    if (out->input_tokens < 1)
        out->input_tokens = 1;
    out->output_tokens = (long long)(ncuts + out->nargs);
    if (out->output_tokens < 1)
        out->output_tokens = 1;

    unsigned long long h1 = (unsigned long long)h;
    unsigned long long h2 = (unsigned long long)ah__mock_fnv1a(h, "tool", 4);
    unsigned long long h3 = (unsigned long long)ah__mock_fnv1a(h, "item", 4);
    switch (wire) {
    case AH_WIRE_ANTHROPIC:
        snprintf(out->msg_id, sizeof out->msg_id, "msg_mock%016llx", h1);
        snprintf(out->tool_id, sizeof out->tool_id, "toolu_mock%016llx", h2);
        break;
    case AH_WIRE_OPENAI:
        snprintf(out->msg_id, sizeof out->msg_id, "chatcmpl-mock%016llx", h1);
        snprintf(out->tool_id, sizeof out->tool_id, "call_mock%016llx", h2);
        break;
    default:
        snprintf(out->msg_id, sizeof out->msg_id, "resp_mock%016llx", h1);
        snprintf(out->item_id, sizeof out->item_id, "msg_mock%016llx", h3);
        snprintf(out->tool_id, sizeof out->tool_id, "fc_mock%016llx", h2);
        snprintf(out->call_id, sizeof out->call_id, "call_mock%016llx", h2);
        break;
    }

    out->text_len = text.len;
    out->text = ah__mock_buf_take(&text);
    if (!out->text)
        goto cleanup;
    out->cuts = cuts;
    out->ndeltas = ncuts;
    cuts = NULL;
    st = AH_OK;
cleanup:
    if (st == AH_ERR_NOMEM)
        ah__bufprintf(err, errsize, "out of memory");
    if (st != AH_OK)
        ah__mock_reply_free(out);
    free(args);
    free(cuts);
    ah__mock_buf_free(&text);
    conv_free(&c);
    return st;
}
