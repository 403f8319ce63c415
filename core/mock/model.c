/* model.c - the mock's deterministic model: a request body -> one reply (docs/mock.md).
 *
 * Each wire format's request is reduced to one neutral conversation (user text, tool
 * results, assistant text) by the format's reader (format_<name>.c, through its
 * ah__mock_format table: nothing here branches on the format), then one rule picks the
 * reply:
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
 * Like the real Anthropic API (format_anthropic.c), a trailing assistant message is
 * refused with HTTP 400 for Claude 4.6 and later model ids and with thinking on ("does
 * not support assistant message prefill"), and for older models when it ends in
 * whitespace.
 * Everything (text, delta boundaries, ids, usage) depends on the request alone, so the
 * same request always gets the same bytes. Delta boundaries are computed on R, so a
 * continuation streams exactly the deltas an uninterrupted reply would have had left. */
#include "mock_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { DIGEST_CHARS = 60, RESULT_MAX = 2000, ARG_FRAGMENT = 8, SCHEMA_DEPTH = 8 };

typedef ah__mock_msg_kind msg_kind;
typedef ah__mock_nmsg nmsg;
typedef ah__mock_conv conv;
#define M_USER AH__MOCK_M_USER
#define M_TOOL_RESULTS AH__MOCK_M_TOOL_RESULTS
#define M_ASSISTANT AH__MOCK_M_ASSISTANT

static int is_space_c(char ch)
{
    return ch == ' ' || ch == '\n' || ch == '\t' || ch == '\r';
}

const cJSON *ah__mock_get(const cJSON *o, const char *key)
{
    return cJSON_IsObject(o) ? cJSON_GetObjectItemCaseSensitive(o, key) : NULL;
}

const char *ah__mock_get_str(const cJSON *o, const char *key)
{
    const cJSON *v = ah__mock_get(o, key);
    return cJSON_IsString(v) ? v->valuestring : NULL;
}

int ah__mock_str_is(const cJSON *o, const char *key, const char *want)
{
    const char *s = ah__mock_get_str(o, key);
    return s && strcmp(s, want) == 0;
}

static void conv_free(conv *c)
{
    for (size_t i = 0; i < c->n; i++)
        ah__mock_buf_free(&c->v[i].text);
    free(c->v);
    memset(c, 0, sizeof *c);
}

nmsg *ah__mock_conv_push(conv *c, msg_kind kind, const cJSON *item)
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

void ah__mock_add_result(nmsg *m, const char *s)
{
    if (m->text.len)
        ah__mock_buf_puts(&m->text, " | ");
    ah__mock_buf_puts(&m->text, s);
}

void ah__mock_append_parts(ah__mock_buf *out, const cJSON *content, const char *types)
{
    if (cJSON_IsString(content)) {
        ah__mock_buf_puts(out, content->valuestring);
        return;
    }
    const cJSON *part;
    cJSON_ArrayForEach(part, content)
    {
        const char *type = ah__mock_get_str(part, "type");
        const char *text = ah__mock_get_str(part, "text");
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

/* A trailing assistant message, as the real APIs take it: the format's own rule (the
 * Anthropic one refuses it for Claude 4.6 and later, with thinking on, and when it ends
 * in whitespace); a step's refuse_prefill refuses it on any format. 0 = accepted. */
static int check_prefill(const ah__mock_format *f, const cJSON *req, const conv *c,
                         const ah__mock_text_opts *o, char *err, size_t errsize)
{
    const nmsg *last = &c->v[c->n - 1];
    if (last->kind != M_ASSISTANT)
        return 0;
    if (o->refuse_prefill) {
        ah__bufprintf(err, errsize, "%s", AH__MOCK_PREFILL_REFUSAL);
        return -1;
    }
    return f->refuses_prefill && f->refuses_prefill(req, last, err, errsize) ? -1 : 0;
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
    const cJSON *props = ah__mock_get(schema, "properties");
    const cJSON *r;
    cJSON_ArrayForEach(r, ah__mock_get(schema, "required"))
    {
        if (!cJSON_IsString(r) || !obj)
            continue;
        cJSON *v = value_for(r->valuestring, ah__mock_get(props, r->valuestring), depth + 1);
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
    if ((e = ah__mock_get(schema, "const")))
        return cJSON_Duplicate(e, 1);
    if ((e = ah__mock_get(schema, "enum")) && cJSON_IsArray(e) && e->child)
        return cJSON_Duplicate(e->child, 1);
    const char *type = NULL;
    const cJSON *t = ah__mock_get(schema, "type");
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
        const cJSON *alt = ah__mock_get(schema, "anyOf");
        if (!alt)
            alt = ah__mock_get(schema, "oneOf");
        if (cJSON_IsArray(alt) && alt->child)
            return value_for(name, alt->child, depth + 1);
        type = ah__mock_get(schema, "properties") ? "object" : "string";
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
        const cJSON *min = ah__mock_get(schema, "minItems");
        if (arr && cJSON_IsNumber(min) && min->valuedouble >= 1) {
            cJSON *v = value_for(name, ah__mock_get(schema, "items"), depth + 1);
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
    for (size_t i = 0; i < r->ncalls; i++) {
        free(r->calls[i].name);
        free(r->calls[i].args);
        free(r->calls[i].arg_cuts);
    }
    free(r->calls);
    free(r->tools_json);
    memset(r, 0, sizeof *r);
}

/* Add a call of `name` with `args` (compact JSON, copied), cut into fragments of about
 * ARG_FRAGMENT bytes, never inside a UTF-8 sequence. 0, or -1 out of memory. */
static int add_call(ah__mock_reply *out, const char *name, const char *args)
{
    struct ah__mock_call *calls = realloc(out->calls, (out->ncalls + 1) * sizeof *calls);
    if (!calls)
        return -1;
    out->calls = calls;
    struct ah__mock_call *cl = &calls[out->ncalls];
    memset(cl, 0, sizeof *cl);
    cl->name = ah__strdup(name);
    cl->args = ah__strdup(args);
    cl->args_len = strlen(args);
    cl->arg_cuts = malloc((cl->args_len / ARG_FRAGMENT + 2) * sizeof *cl->arg_cuts);
    out->ncalls++; /* freed with the reply from here on */
    if (!cl->name || !cl->args || !cl->arg_cuts)
        return -1;
    size_t pos = 0;
    while (pos < cl->args_len) {
        cl->arg_cuts[cl->nargs++] = pos;
        size_t take = cl->args_len - pos < ARG_FRAGMENT ? cl->args_len - pos : ARG_FRAGMENT;
        size_t fl = ah__mock_utf8_floor(args + pos, take);
        pos += fl ? fl : take;
    }
    cl->arg_cuts[cl->nargs] = cl->args_len;
    return 0;
}

/* The arguments the model makes for the offered tool's schema, or for a listed call
 * (its own "arguments", else the schema's if it names the offered tool, else {}):
 * malloc'd compact JSON, NULL out of memory. */
static char *make_args(const cJSON *schema, const cJSON *given)
{
    cJSON *a = given ? cJSON_Duplicate(given, 1) : object_for(schema, 0);
    char *printed = a ? cJSON_PrintUnformatted(a) : NULL;
    cJSON_Delete(a);
    char *args = printed ? ah__strdup(printed) : NULL;
    cJSON_free(printed);
    return args;
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
    cJSON *listed = NULL; /* a plan's tool_calls list */

    memset(out, 0, sizeof *out);
    const ah__mock_format *f = ah__mock_format_of(wire);
    if (!f) {
        ah__bufprintf(err, errsize, "unknown wire format");
        return AH_ERR_INVALID;
    }
    if (!cJSON_IsObject(req)) {
        ah__bufprintf(err, errsize, "the request body must be a JSON object");
        return AH_ERR_INVALID;
    }
    const char *model = ah__mock_get_str(req, "model");
    if (!model) {
        ah__bufprintf(err, errsize, "%s", f->missing_model);
        return AH_ERR_INVALID;
    }
    int rc = f->read(req, &c, out, err, errsize);
    if (rc != 0) {
        st = rc == -1 ? AH_ERR_INVALID : AH_ERR_NOMEM;
        if (rc == -2)
            ah__bufprintf(err, errsize, "out of memory");
        goto cleanup;
    }

    if (check_prefill(f, req, &c, opts, err, errsize) != 0) {
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
    /* A plan's tool_calls list names the calls: they are made whatever the model would
     * do (plan.c checked the list). */
    listed = opts->tool_calls_json ? cJSON_Parse(opts->tool_calls_json) : NULL;
    if (opts->tool_calls_json && !listed)
        goto cleanup;
    const char *first_listed = ah__mock_get_str(cJSON_GetArrayItem(listed, 0), "name");
    int call_tool = first_listed ||
                    (!listed && c.tool_name && !had_result &&
                     (!last || last->kind != M_TOOL_RESULTS)); /* an empty list: none */

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
        ah__mock_buf_printf(&text, "I will call %s now.",
                            first_listed ? first_listed : c.tool_name);
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
    size_t arg_tokens = 0; /* output tokens of the calls: one call's, or the list's */
    if (call_tool && first_listed) {
        const cJSON *it;
        cJSON_ArrayForEach(it, listed)
        {
            const char *name = ah__mock_get_str(it, "name");
            const cJSON *given = ah__mock_get(it, "arguments");
            int offered = c.tool_name && strcmp(name, c.tool_name) == 0;
            args = make_args(offered ? c.tool_schema : NULL, given);
            if (!args || add_call(out, name, args) != 0)
                goto cleanup;
            free(args);
            args = NULL;
            arg_tokens += out->calls[out->ncalls - 1].nargs;
        }
        out->has_tool = 1;
    } else if (call_tool) {
        args = opts->tool_args ? ah__strdup(opts->tool_args) : make_args(c.tool_schema, NULL);
        if (!args)
            goto cleanup;
        /* tool_calls: N, parallel calls of the one tool with the same arguments */
        for (size_t k = 0; k < (opts->tool_repeat > 1 ? opts->tool_repeat : 1); k++)
            if (add_call(out, c.tool_name, args) != 0)
                goto cleanup;
        out->has_tool = 1;
        arg_tokens = out->calls[0].nargs;
    }
    const cJSON *tools = ah__mock_get(req, "tools");
    char *tj = cJSON_IsArray(tools) ? cJSON_PrintUnformatted(tools) : NULL;
    out->tools_json = ah__strdup(tj ? tj : "[]");
    cJSON_free(tj);
    out->model = ah__strdup(model);
    if (!out->tools_json || !out->model)
        goto cleanup;

    out->input_tokens = (long long)(body_len + 3) / 4;
    if (out->input_tokens < 1)
        out->input_tokens = 1;
    out->output_tokens = (long long)(ncuts + arg_tokens);
    if (out->output_tokens < 1)
        out->output_tokens = 1;

    unsigned long long h1 = (unsigned long long)h;
    unsigned long long h2 = (unsigned long long)ah__mock_fnv1a(h, "tool", 4);
    unsigned long long h3 = (unsigned long long)ah__mock_fnv1a(h, "item", 4);
    if (f->msg_id)
        snprintf(out->msg_id, sizeof out->msg_id, "%s%016llx", f->msg_id, h1);
    if (f->tool_id)
        snprintf(out->tool_id, sizeof out->tool_id, "%s%016llx", f->tool_id, h2);
    if (f->item_id)
        snprintf(out->item_id, sizeof out->item_id, "%s%016llx", f->item_id, h3);
    if (f->call_id)
        snprintf(out->call_id, sizeof out->call_id, "%s%016llx", f->call_id, h2);

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
    cJSON_Delete(listed);
    ah__mock_buf_free(&text);
    conv_free(&c);
    return st;
}
