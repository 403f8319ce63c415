/* timeline.c - the neutral stream timeline: blocks open/closed, response fields, partial
 * drain.
 *
 * Invariants:
 *   - blocks[] is in stream order and only grows until reset; a block's public view (pub)
 * is re-synced from its buffers after every mutation, so accessors return it as is;
 *   - every string field is an owned growable buffer, NUL-terminated, exposed as "" when
 *     empty; text is appended in place (amortised doubling), never re-copied per delta;
 *   - a tool block's arguments are parsed exactly once, when it closes; a block never
 *     reopens.
 */
#include "decode_internal.h"
#include "error_internal.h"

#include <stdlib.h>
#include <string.h>

typedef struct ah__buf {
    char *p;
    size_t len, cap;
} ah__buf;

typedef struct tl_block {
    ah_block pub;
    ah__buf f[AH__F_COUNT_];
    cJSON *args;
    int64_t key, sub; /* provider indices (Anthropic index, Responses output/content) */
    int part_kind;    /* Responses reasoning: the part receiving content (0 = none) */
    int64_t part_idx;
} tl_block;

struct ah_timeline {
    tl_block *blocks;
    size_t count, cap;
    ah__buf stop_reason;
    int has_stop_reason;
    int64_t input_tokens, output_tokens;
    int64_t cache_read, cache_write;
    int input_excludes_cache;
    const char *stop_norm;
    ah__buf stop_category;
    int has_stop_category;
    ah__buf refusal;
    int has_refusal;
    int citations;
    int finished;
    /* the in-stream error, malloc'd by the first (a stream rarely has one; 664 bytes
     * inline were most of the struct); kept across resets, valid while has_error */
    ah_error *error;
    int has_error;
    ah__buf error_json;
};

static const char *const kind_names[] = {
#define AH__BK_NAME(name, s) s,
    AH_BLOCK_KIND_MAP(AH__BK_NAME)
#undef AH__BK_NAME
};

const char *ah_block_kind_name(ah_block_kind k)
{
    if ((unsigned)k >= AH_BLOCK_COUNT_)
        return "unknown";
    return kind_names[k];
}

/* ---- buffers
 * -------------------------------------------------------------------------------- */

static ah_status buf_append(ah__buf *b, const char *s, size_t n)
{
    if (b->len + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 32;
        while (cap < b->len + n + 1) {
            if (cap > SIZE_MAX / 2)
                return AH_ERR_NOMEM;
            cap *= 2;
        }
        char *p = realloc(b->p, cap);
        if (!p)
            return AH_ERR_NOMEM;
        b->p = p;
        b->cap = cap;
    }
    if (n)
        memcpy(b->p + b->len, s, n);
    b->len += n;
    b->p[b->len] = '\0';
    return AH_OK;
}

static void buf_free(ah__buf *b)
{
    free(b->p);
    b->p = NULL;
    b->len = b->cap = 0;
}

static const char *buf_str(const ah__buf *b)
{
    return b->p ? b->p : "";
}

/* ---- blocks
 * ----------------------------------------------------------------------------------- */

static void block_sync(tl_block *b)
{
    ah_block *v = &b->pub;
    v->text = buf_str(&b->f[AH__F_TEXT]);
    v->text_len = b->f[AH__F_TEXT].len;
    v->signature = buf_str(&b->f[AH__F_SIGNATURE]);
    v->signature_len = b->f[AH__F_SIGNATURE].len;
    v->encrypted = buf_str(&b->f[AH__F_ENCRYPTED]);
    v->encrypted_len = b->f[AH__F_ENCRYPTED].len;
    v->item_id = buf_str(&b->f[AH__F_ITEM_ID]);
    v->id = buf_str(&b->f[AH__F_ID]);
    v->name = buf_str(&b->f[AH__F_NAME]);
    v->arguments = buf_str(&b->f[AH__F_ARGS]);
    v->arguments_len = b->f[AH__F_ARGS].len;
    v->args = b->args;
    v->type = buf_str(&b->f[AH__F_TYPE]);
    v->raw = buf_str(&b->f[AH__F_RAW]);
    v->raw_len = b->f[AH__F_RAW].len;
}

static void block_free(tl_block *b)
{
    for (int f = 0; f < AH__F_COUNT_; f++)
        buf_free(&b->f[f]);
    cJSON_Delete(b->args);
    b->args = NULL;
}

/* ---- lifecycle
 * ---------------------------------------------------------------------------- */

ah_timeline *ah_timeline_new(void)
{
    ah_timeline *tl = calloc(1, sizeof *tl);
    if (!tl)
        return NULL;
    tl->input_tokens = tl->output_tokens = -1;
    tl->cache_read = tl->cache_write = -1;
    return tl;
}

void ah_timeline_reset(ah_timeline *tl)
{
    if (!tl)
        return;
    for (size_t i = 0; i < tl->count; i++)
        block_free(&tl->blocks[i]);
    tl->count = 0;
    tl->stop_reason.len = 0;
    tl->has_stop_reason = 0;
    tl->input_tokens = tl->output_tokens = -1;
    tl->cache_read = tl->cache_write = -1;
    tl->input_excludes_cache = 0;
    tl->stop_norm = NULL;
    tl->stop_category.len = 0;
    tl->has_stop_category = 0;
    tl->refusal.len = 0;
    tl->has_refusal = 0;
    tl->citations = 0;
    tl->finished = 0;
    tl->has_error = 0;
    tl->error_json.len = 0;
}

void ah_timeline_free(ah_timeline *tl)
{
    if (!tl)
        return;
    ah_timeline_reset(tl);
    free(tl->blocks);
    buf_free(&tl->stop_reason);
    buf_free(&tl->stop_category);
    buf_free(&tl->refusal);
    buf_free(&tl->error_json);
    free(tl->error);
    free(tl);
}

/* ---- accessors
 * ---------------------------------------------------------------------------- */

size_t ah_timeline_count(const ah_timeline *tl)
{
    return tl ? tl->count : 0;
}

const ah_block *ah_timeline_block(const ah_timeline *tl, size_t i)
{
    if (!tl || i >= tl->count)
        return NULL;
    return &tl->blocks[i].pub;
}

const char *ah_timeline_stop_reason(const ah_timeline *tl)
{
    return tl && tl->has_stop_reason ? buf_str(&tl->stop_reason) : NULL;
}

/* Raw provider stop reasons and what they mean (docs/providers-decoding.md). */
static const char *const stop_map[][2] = {
    {"end_turn", "end_turn"},       {"stop_sequence", "end_turn"},
    {"stop", "end_turn"},           {"completed", "end_turn"},
    {"STOP", "end_turn"},           {"tool_use", "tool_use"},
    {"tool_calls", "tool_use"},     {"function_call", "tool_use"},
    {"max_tokens", "max_tokens"},   {"length", "max_tokens"},
    {"MAX_TOKENS", "max_tokens"},   {"refusal", "refusal"},
    {"content_filter", "refusal"},  {"SAFETY", "refusal"},
    {"RECITATION", "refusal"},      {"PROHIBITED_CONTENT", "refusal"},
    {"BLOCKLIST", "refusal"},       {"SPII", "refusal"},
    {"IMAGE_SAFETY", "refusal"},    {"pause_turn", "pause_turn"},
    {"model_context_window_exceeded", "context_exceeded"},
};

const char *ah_timeline_stop(const ah_timeline *tl)
{
    if (!tl)
        return NULL;
    const char *raw = ah_timeline_stop_reason(tl);
    const char *norm = tl->stop_norm;
    for (size_t i = 0; !norm && raw && i < sizeof stop_map / sizeof stop_map[0]; i++)
        if (strcmp(raw, stop_map[i][0]) == 0)
            norm = stop_map[i][1];
    if (!norm)
        norm = raw;
    if (!norm)
        return NULL;
    int text = 0, tool = 0;
    for (size_t i = 0; i < tl->count; i++) {
        const ah_block *b = &tl->blocks[i].pub;
        if (!b->closed)
            continue;
        tool |= b->kind == AH_BLOCK_TOOL_USE;
        text |= b->kind == AH_BLOCK_TEXT && b->text_len > 0;
    }
    if (strcmp(norm, "end_turn") == 0 && tool)
        return "tool_use";
    if (strcmp(norm, "end_turn") == 0 && !text && !tool && tl->has_refusal &&
        tl->refusal.len > 0)
        return "refusal";
    return norm;
}

const char *ah_timeline_stop_category(const ah_timeline *tl)
{
    return tl && tl->has_stop_category ? buf_str(&tl->stop_category) : NULL;
}

int64_t ah_timeline_cache_read_tokens(const ah_timeline *tl)
{
    return tl ? tl->cache_read : -1;
}

int64_t ah_timeline_cache_write_tokens(const ah_timeline *tl)
{
    return tl ? tl->cache_write : -1;
}

int64_t ah_timeline_input_tokens(const ah_timeline *tl)
{
    if (!tl)
        return -1;
    if (!tl->input_excludes_cache || tl->input_tokens < 0)
        return tl->input_tokens;
    return tl->input_tokens + (tl->cache_read > 0 ? tl->cache_read : 0) +
           (tl->cache_write > 0 ? tl->cache_write : 0);
}

int64_t ah_timeline_output_tokens(const ah_timeline *tl)
{
    return tl ? tl->output_tokens : -1;
}

const char *ah_timeline_refusal(const ah_timeline *tl, size_t *len)
{
    if (!tl || !tl->has_refusal) {
        if (len)
            *len = 0;
        return NULL;
    }
    if (len)
        *len = tl->refusal.len;
    return buf_str(&tl->refusal);
}

int ah_timeline_citations(const ah_timeline *tl)
{
    return tl ? tl->citations : 0;
}

int ah_timeline_finished(const ah_timeline *tl)
{
    return tl ? tl->finished : 0;
}

const ah_error *ah_timeline_error(const ah_timeline *tl)
{
    return tl && tl->has_error ? tl->error : NULL;
}

const char *ah_timeline_error_json(const ah_timeline *tl)
{
    return tl && tl->has_error && tl->error_json.len ? buf_str(&tl->error_json) : NULL;
}

/* ---- partial drain
 * ------------------------------------------------------------------------ */

ah_status ah_timeline_partial_drain(const ah_timeline *tl, ah_partial *out)
{
    memset(out, 0, sizeof *out);
    if (!tl || tl->count == 0)
        return AH_OK;
    out->blocks = malloc(tl->count * sizeof *out->blocks);
    if (!out->blocks)
        return AH_ERR_NOMEM;
    for (size_t i = 0; i < tl->count; i++) {
        const ah_block *b = &tl->blocks[i].pub;
        int content = b->kind == AH_BLOCK_TEXT || b->kind == AH_BLOCK_REASONING;
        if (content && b->closed) {
            if (b->kind == AH_BLOCK_TEXT && b->text_len == 0)
                continue;
            out->blocks[out->count++] = b;
            out->kept_bytes += b->text_len;
            continue;
        }
        out->dropped_blocks++;
        if (b->kind == AH_BLOCK_TOOL_USE)
            out->dropped_tool_uses++;
        out->dropped_bytes += content ? b->text_len : b->arguments_len;
    }
    return AH_OK;
}

void ah_partial_clear(ah_partial *p)
{
    if (!p)
        return;
    free(p->blocks);
    memset(p, 0, sizeof *p);
}

/* ---- mutators (decode_internal.h)
 * ------------------------------------------------------------ */

ah_status ah__tl_open(ah_timeline *tl, ah_block_kind kind, int64_t key, int64_t sub,
                      size_t *index)
{
    if (tl->count == tl->cap) {
        /* 2 to start (2 x 416 bytes, under glibc's 1 KiB per-thread cache): most
         * answers are one text block, or a text and a tool call */
        size_t cap = tl->cap ? tl->cap * 2 : 2;
        tl_block *nb = realloc(tl->blocks, cap * sizeof *nb);
        if (!nb)
            return AH_ERR_NOMEM;
        tl->blocks = nb;
        tl->cap = cap;
    }
    tl_block *b = &tl->blocks[tl->count];
    memset(b, 0, sizeof *b);
    b->pub.kind = kind;
    b->key = key;
    b->sub = sub;
    block_sync(b);
    *index = tl->count++;
    return AH_OK;
}

size_t ah__tl_find(const ah_timeline *tl, int64_t key, int64_t sub, int open_only)
{
    for (size_t i = tl->count; i-- > 0;) {
        const tl_block *b = &tl->blocks[i];
        if (b->key == key && b->sub == sub && (!open_only || !b->pub.closed))
            return i;
    }
    return AH__NONE;
}

int64_t ah__tl_key(const ah_timeline *tl, size_t i)
{
    return tl->blocks[i].key;
}

ah_block_kind ah__tl_kind(const ah_timeline *tl, size_t i)
{
    return tl->blocks[i].pub.kind;
}

int ah__tl_is_open(const ah_timeline *tl, size_t i)
{
    return !tl->blocks[i].pub.closed;
}

size_t ah__tl_len(const ah_timeline *tl, size_t i, ah__field f)
{
    return tl->blocks[i].f[f].len;
}

ah_status ah__tl_append(ah_timeline *tl, size_t i, ah__field f, const char *s, size_t n)
{
    tl_block *b = &tl->blocks[i];
    ah_status st = buf_append(&b->f[f], s, n);
    block_sync(b);
    return st;
}

ah_status ah__tl_set(ah_timeline *tl, size_t i, ah__field f, const char *s, size_t n)
{
    tl->blocks[i].f[f].len = 0;
    return ah__tl_append(tl, i, f, s, n);
}

ah_status ah__tl_set_json(ah_timeline *tl, size_t i, ah__field f, const cJSON *v)
{
    char *s = cJSON_PrintUnformatted(v);
    if (!s)
        return AH_ERR_NOMEM;
    ah_status st = ah__tl_set(tl, i, f, s, strlen(s));
    cJSON_free(s);
    return st;
}

void ah__tl_set_redacted(ah_timeline *tl, size_t i)
{
    tl->blocks[i].pub.redacted = 1;
}

int ah__tl_part(ah_timeline *tl, size_t i, int part_kind, int64_t part_idx)
{
    tl_block *b = &tl->blocks[i];
    if (b->part_kind == part_kind && b->part_idx == part_idx)
        return 0;
    int had = b->part_kind != 0;
    b->part_kind = part_kind;
    b->part_idx = part_idx;
    return had;
}

static int all_space(const char *s, size_t n)
{
    for (size_t k = 0; k < n; k++)
        if (s[k] != ' ' && s[k] != '\t' && s[k] != '\n' && s[k] != '\r')
            return 0;
    return 1;
}

ah_status ah__tl_close(ah_timeline *tl, size_t i)
{
    tl_block *b = &tl->blocks[i];
    if (b->pub.closed)
        return AH_OK;
    if (b->pub.kind == AH_BLOCK_TOOL_USE || b->pub.kind == AH_BLOCK_SERVER_TOOL_USE) {
        ah__buf *a = &b->f[AH__F_ARGS];
        if (all_space(buf_str(a), a->len)) {
            /* A tool without arguments streams only "" (or nothing): that means {}. An
             * Anthropic block may instead carry its whole input in content_block_start.
             */
            const ah__buf *in = &b->f[AH__F_INPUT];
            a->len = 0;
            ah_status st =
                in->len ? buf_append(a, in->p, in->len) : buf_append(a, "{}", 2);
            if (st != AH_OK) {
                block_sync(b);
                return st;
            }
        }
        cJSON *v = cJSON_ParseWithLength(a->p, a->len);
        if (!v) {
            block_sync(b);
            return AH_ERR_PARSE;
        }
        b->args = v;
    }
    b->pub.closed = 1;
    block_sync(b);
    return AH_OK;
}

ah_status ah__tl_set_stop_reason(ah_timeline *tl, const char *s)
{
    tl->stop_reason.len = 0;
    tl->has_stop_reason = s != NULL;
    return s ? buf_append(&tl->stop_reason, s, strlen(s)) : AH_OK;
}

void ah__tl_set_usage(ah_timeline *tl, int64_t input, int64_t output)
{
    if (input >= 0)
        tl->input_tokens = input;
    if (output >= 0)
        tl->output_tokens = output;
}

void ah__tl_replace_usage(ah_timeline *tl, int64_t input, int64_t output)
{
    tl->input_tokens = input;
    tl->output_tokens = output;
}

void ah__tl_set_cache_usage(ah_timeline *tl, int64_t read, int64_t write)
{
    if (read >= 0)
        tl->cache_read = read;
    if (write >= 0)
        tl->cache_write = write;
}

void ah__tl_input_excludes_cache(ah_timeline *tl)
{
    tl->input_excludes_cache = 1;
}

void ah__tl_set_stop_norm(ah_timeline *tl, const char *norm)
{
    tl->stop_norm = norm;
}

ah_status ah__tl_set_stop_category(ah_timeline *tl, const char *category)
{
    tl->stop_category.len = 0;
    tl->has_stop_category = category != NULL;
    return category ? buf_append(&tl->stop_category, category, strlen(category)) : AH_OK;
}

ah_status ah__tl_refusal_append(ah_timeline *tl, const char *s, size_t n)
{
    tl->has_refusal = 1;
    return buf_append(&tl->refusal, s, n);
}

void ah__tl_add_citation(ah_timeline *tl)
{
    tl->citations++;
}

void ah__tl_set_finished(ah_timeline *tl)
{
    tl->finished = 1;
}

ah_status ah__tl_set_error(ah_timeline *tl, const char *provider_type,
                           const char *message, const char *json)
{
    if (tl->has_error)
        return AH_OK;
    if (!tl->error && !(tl->error = malloc(sizeof *tl->error)))
        return AH_ERR_NOMEM;
    tl->has_error = 1;
    /* The provider's text can quote anything (OpenAI's 401 echoes part of the key): the
     * record is built redacted and single-line, and the raw JSON is redacted too. */
    ah_error_set(tl->error, AH_EK_STREAM, 0, "in-stream provider error (%s): %s",
                 provider_type && *provider_type ? provider_type : "no type",
                 message && *message ? message : "no message");
    ah_error_set_provider_type(tl->error, provider_type);
    /* A 200's stream carries no Retry-After header: a wait the provider asks for is in
     * its text ("Please try again in 20s"), a floor under the retry's backoff. */
    int64_t hint = message ? ah__body_hint_parse(message, strlen(message)) : -1;
    if (hint >= 0) {
        tl->error->retry_after_ms = hint;
        tl->error->retry_after_source = AH_HINT_BODY_TEXT;
    }
    tl->error_json.len = 0;
    if (!json)
        return AH_OK;
    ah_status st = buf_append(&tl->error_json, json, strlen(json));
    if (st == AH_OK) {
        ah_redact(tl->error_json.p, tl->error_json.len + 1, NULL);
        tl->error_json.len = strlen(tl->error_json.p);
    }
    return st;
}
