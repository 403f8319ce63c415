/* decode_util.h - helpers shared by the decoder tests (header-only, static; included by
 * one test file each): file loading, feeding a stream in chosen splits with a hook
 * recorder, turning a timeline into the expect.py schema, and the partial-drain
 * invariants.
 *
 * The recorder checks the hook contract on every decode: each block starts once, its
 * deltas concatenate to its final text, and it ends once, after which it receives
 * nothing.
 */
#ifndef AH_TEST_DECODE_UTIL_H
#define AH_TEST_DECODE_UTIL_H

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agenthost.h"

/* ---- files
 * --------------------------------------------------------------------------------- */

static char *du_read_file(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *buf = malloc((size_t)n + 1);
    if (buf && fread(buf, 1, (size_t)n, f) != (size_t)n) {
        free(buf);
        buf = NULL;
    }
    fclose(f);
    if (buf) {
        buf[n] = '\0';
        *len = (size_t)n;
    }
    return buf;
}

/* ---- deterministic RNG (independent of the core's clock module)
 * ----------------------------- */

static uint64_t du_rand(uint64_t *s)
{
    /* splitmix64 */
    uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* ---- hook recorder
 * ------------------------------------------------------------------------- */

enum { DU_MAX_BLOCKS = 256 };

typedef struct du_rec {
    int started[DU_MAX_BLOCKS];
    int ended[DU_MAX_BLOCKS];
    ah_block_kind kind[DU_MAX_BLOCKS];
    char *deltas[DU_MAX_BLOCKS];
    size_t delta_len[DU_MAX_BLOCKS];
    char start_id[DU_MAX_BLOCKS][80];
    char start_name[DU_MAX_BLOCKS][80];
    int n_start, n_end, n_delta;
    int violations; /* hook-order contract breaches */
} du_rec;

static void du_on_start(void *ud, size_t index, ah_block_kind kind, const char *id,
                        const char *name)
{
    du_rec *r = ud;
    r->n_start++;
    if (index >= DU_MAX_BLOCKS || r->started[index]) {
        r->violations++;
        return;
    }
    r->started[index] = 1;
    r->kind[index] = kind;
    snprintf(r->start_id[index], sizeof r->start_id[index], "%s", id ? id : "");
    snprintf(r->start_name[index], sizeof r->start_name[index], "%s", name ? name : "");
}

static void du_on_delta(void *ud, size_t index, ah_block_kind kind, const char *text,
                        size_t len)
{
    du_rec *r = ud;
    r->n_delta++;
    if (index >= DU_MAX_BLOCKS || !r->started[index] || r->ended[index] || len == 0 ||
        kind != r->kind[index]) {
        r->violations++;
        return;
    }
    char *p = realloc(r->deltas[index], r->delta_len[index] + len + 1);
    assert_non_null(p);
    memcpy(p + r->delta_len[index], text, len);
    r->delta_len[index] += len;
    p[r->delta_len[index]] = '\0';
    r->deltas[index] = p;
}

static void du_on_end(void *ud, size_t index, const ah_block *b)
{
    du_rec *r = ud;
    r->n_end++;
    if (index >= DU_MAX_BLOCKS || !r->started[index] || r->ended[index] || !b->closed)
        r->violations++;
    else
        r->ended[index] = 1;
}

static const ah_decoder_hooks du_hooks = {du_on_start, du_on_delta, du_on_end};

static void du_rec_free(du_rec *r)
{
    for (int i = 0; i < DU_MAX_BLOCKS; i++)
        free(r->deltas[i]);
    memset(r, 0, sizeof *r);
}

/* The hook stream agrees with the timeline. */
static void du_rec_check(const du_rec *r, const ah_timeline *tl)
{
    assert_int_equal(r->violations, 0);
    size_t n = ah_timeline_count(tl);
    assert_true(n <= DU_MAX_BLOCKS);
    assert_int_equal(r->n_start, (int)n);
    for (size_t i = 0; i < n; i++) {
        const ah_block *b = ah_timeline_block(tl, i);
        assert_true(r->started[i]);
        assert_int_equal(r->kind[i], b->kind);
        assert_int_equal(r->ended[i], b->closed);
        if (b->kind == AH_BLOCK_TEXT || b->kind == AH_BLOCK_REASONING) {
            assert_int_equal(r->delta_len[i], b->text_len);
            if (b->text_len)
                assert_memory_equal(r->deltas[i], b->text, b->text_len);
        }
    }
}

/* ---- feeding
 * -------------------------------------------------------------------------------- */

/* Split modes for du_decode. */
enum { DU_WHOLE = 0, DU_BYTES = 1 };

/* Decode `len` bytes of `data` into a fresh timeline (returned; caller frees). mode:
 * DU_WHOLE, DU_BYTES (one byte per feed) or any other value = RNG seed for random split
 * points. Returns the finish status in *fin (and its error in *err when not NULL). When
 * rec is not NULL the hooks are recorded into it. */
static ah_timeline *du_decode(ah_wire wire, const char *data, size_t len, uint64_t mode,
                              du_rec *rec, ah_status *fin, ah_error *err)
{
    ah_timeline *tl = ah_timeline_new();
    assert_non_null(tl);
    ah_decoder *d = NULL;
    ah_decoder_new(wire, tl, rec ? &du_hooks : NULL, rec, &d, NULL, 0);
    assert_non_null(d);
    ah_status st = AH_OK;
    if (mode == DU_WHOLE) {
        st = ah_decoder_feed(d, data, len);
    } else if (mode == DU_BYTES) {
        for (size_t i = 0; i < len && st == AH_OK; i++)
            st = ah_decoder_feed(d, data + i, 1);
    } else {
        uint64_t s = mode;
        size_t off = 0;
        while (off < len && st == AH_OK) {
            /* mostly small pieces, sometimes large ones, sometimes empty feeds */
            uint64_t r = du_rand(&s);
            size_t take = (r & 3) == 0 ? (size_t)(r >> 8) % 2048 : (size_t)(r >> 8) % 24;
            if (take > len - off)
                take = len - off;
            st = ah_decoder_feed(d, data + off, take);
            off += take;
        }
    }
    ah_error e;
    ah_status f = ah_decoder_finish(d, &e);
    if (st != AH_OK)
        assert_int_equal(f, st); /* a feed error is what finish reports */
    if (fin)
        *fin = f;
    if (err)
        *err = e;
    ah_decoder_free(d);
    return tl;
}

/* ---- the expect.py schema
 * -------------------------------------------------------------------- */

static cJSON *du_str_or_null(const char *s)
{
    return s && *s ? cJSON_CreateString(s) : cJSON_CreateNull();
}

static cJSON *du_calls(const ah_timeline *tl, ah_block_kind kind)
{
    cJSON *arr = cJSON_CreateArray();
    for (size_t i = 0; i < ah_timeline_count(tl); i++) {
        const ah_block *b = ah_timeline_block(tl, i);
        if (b->kind != kind)
            continue;
        cJSON *c = cJSON_CreateObject();
        cJSON_AddItemToObject(c, "id", du_str_or_null(b->id));
        cJSON_AddItemToObject(c, "name", du_str_or_null(b->name));
        cJSON_AddItemToObject(c, "arguments",
                              b->args ? cJSON_Duplicate((const cJSON *)b->args, 1)
                                      : cJSON_CreateString("<open>"));
        cJSON_AddItemToArray(arr, c);
    }
    return arr;
}

/* The decoded timeline in the schema of expect.py (see its docstring). */
static cJSON *du_to_expect(ah_wire wire, const ah_timeline *tl)
{
    cJSON *o = cJSON_CreateObject();
    size_t n = ah_timeline_count(tl);
    size_t tlen = 0, rlen = 0;
    for (size_t i = 0; i < n; i++) {
        const ah_block *b = ah_timeline_block(tl, i);
        tlen += b->kind == AH_BLOCK_TEXT ? b->text_len : 0;
        rlen += b->kind == AH_BLOCK_REASONING ? b->text_len + 2 : 0;
    }
    char *text = calloc(1, tlen + 1), *reasoning = calloc(1, rlen + 1);
    assert_true(text && reasoning);
    int nreason = 0;
    /* Joints as expect.py: Chat reasoning concatenates; Anthropic joins thinking blocks
     * (even empty ones) and Responses joins non-empty parts with "\n\n". */
    const char *joint = wire == AH_WIRE_OPENAI ? "" : "\n\n";
    for (size_t i = 0; i < n; i++) {
        const ah_block *b = ah_timeline_block(tl, i);
        if (b->kind == AH_BLOCK_TEXT)
            strncat(text, b->text, b->text_len);
        if (b->kind != AH_BLOCK_REASONING || b->redacted)
            continue;
        if (wire != AH_WIRE_ANTHROPIC && b->text_len == 0)
            continue;
        if (nreason++)
            strcat(reasoning, joint);
        strncat(reasoning, b->text, b->text_len);
    }
    cJSON_AddStringToObject(o, "text", text);
    if (nreason && (wire == AH_WIRE_ANTHROPIC || reasoning[0]))
        cJSON_AddStringToObject(o, "reasoning", reasoning);
    else
        cJSON_AddNullToObject(o, "reasoning");
    free(text);
    free(reasoning);
    cJSON_AddItemToObject(o, "tool_calls", du_calls(tl, AH_BLOCK_TOOL_USE));
    const char *sr = ah_timeline_stop_reason(tl);
    cJSON_AddItemToObject(o, "stop_reason",
                          sr ? cJSON_CreateString(sr) : cJSON_CreateNull());
    int64_t in = ah_timeline_input_tokens(tl), out = ah_timeline_output_tokens(tl);
    if (in < 0 && out < 0) {
        cJSON_AddNullToObject(o, "usage");
    } else {
        cJSON *u = cJSON_AddObjectToObject(o, "usage");
        cJSON_AddItemToObject(u, "input_tokens",
                              in < 0 ? cJSON_CreateNull()
                                     : cJSON_CreateNumber((double)in));
        cJSON_AddItemToObject(u, "output_tokens",
                              out < 0 ? cJSON_CreateNull()
                                      : cJSON_CreateNumber((double)out));
    }
    const char *refusal = ah_timeline_refusal(tl, NULL);
    if (refusal)
        cJSON_AddStringToObject(o, "refusal", refusal);
    cJSON *server = du_calls(tl, AH_BLOCK_SERVER_TOOL_USE);
    if (cJSON_GetArraySize(server) > 0)
        cJSON_AddItemToObject(o, "server_tool_calls", server);
    else
        cJSON_Delete(server);
    if (ah_timeline_citations(tl) > 0)
        cJSON_AddNumberToObject(o, "citations", ah_timeline_citations(tl));
    /* expect.py records in-stream errors for Anthropic and Responses only */
    const char *ej = ah_timeline_error_json(tl);
    if (ej && wire != AH_WIRE_OPENAI)
        cJSON_AddItemToObject(o, "error", cJSON_Parse(ej));
    return o;
}

/* Compare with a clear failure message naming the stream. */
static void du_assert_json_equal(const cJSON *want, const cJSON *got, const char *what)
{
    if (!cJSON_Compare(want, got, 1)) {
        char *w = cJSON_Print(want), *g = cJSON_Print(got);
        print_error("%s: decoded result differs\n--- expected\n%s\n--- got\n%s\n", what,
                    w, g);
        free(w);
        free(g);
        fail();
    }
}

/* ---- partial drain invariants
 * --------------------------------------------------------------- */

/* `part` was decoded from a prefix of the stream that decoded to `full`. The drain of
 * `part` keeps only blocks complete in `part`, each identical to the same block of the
 * full decode; every tool_use is dropped; the counts add up. Returns the number of
 * drained blocks. */
static size_t du_check_drain(const ah_timeline *part, const ah_timeline *full)
{
    ah_partial p;
    assert_int_equal(ah_timeline_partial_drain(part, &p), AH_OK);
    size_t n = ah_timeline_count(part), empties = 0;
    assert_true(n <= ah_timeline_count(full));
    size_t k = 0;
    uint64_t kept = 0;
    for (size_t i = 0; i < n; i++) {
        const ah_block *b = ah_timeline_block(part, i), *fb = ah_timeline_block(full, i);
        assert_int_equal(b->kind, fb->kind); /* a prefix decodes to a prefix */
        int keep =
            b->closed && (b->kind == AH_BLOCK_TEXT || b->kind == AH_BLOCK_REASONING);
        if (keep && b->kind == AH_BLOCK_TEXT && b->text_len == 0) {
            empties++;
            continue;
        }
        if (!keep)
            continue;
        assert_true(k < p.count);
        assert_ptr_equal(p.blocks[k], b); /* in order */
        assert_true(fb->closed);
        assert_int_equal(b->text_len, fb->text_len);
        assert_memory_equal(b->text, fb->text, b->text_len);
        assert_int_equal(b->signature_len, fb->signature_len);
        kept += b->text_len;
        k++;
    }
    assert_int_equal(k, p.count);
    assert_int_equal(p.kept_bytes, kept);
    for (size_t j = 0; j < p.count; j++) {
        assert_true(p.blocks[j]->closed);
        assert_int_not_equal(p.blocks[j]->kind, AH_BLOCK_TOOL_USE);
        assert_int_not_equal(p.blocks[j]->kind, AH_BLOCK_SERVER_TOOL_USE);
    }
    assert_int_equal(p.count + p.dropped_blocks + empties, n);
    size_t tools = 0;
    for (size_t i = 0; i < n; i++)
        tools += ah_timeline_block(part, i)->kind == AH_BLOCK_TOOL_USE;
    assert_int_equal(p.dropped_tool_uses, tools);
    size_t count = p.count;
    ah_partial_clear(&p);
    assert_null(p.blocks);
    return count;
}

/* Byte offsets just after each event: after each LF that ends a blank line (the fixtures
 * use LF line ends; the CR and CRLF cases have their own tests). */
static size_t du_event_ends(const char *s, size_t len, size_t *ends, size_t max)
{
    size_t n = 0;
    for (size_t i = 1; i < len && n < max; i++)
        if (s[i] == '\n' && s[i - 1] == '\n')
            ends[n++] = i + 1;
    return n;
}

/* ---- whole-stream checks
 * ------------------------------------------------------------------ */

/* A recorded or hand-written stream and its expected decode (expect.py schema). */
typedef struct du_stream {
    const char *name;
    ah_wire wire;
    char *sse;
    size_t len;
    cJSON *expect;
    /* The provider error the stream must end with: from the expectation's "error" (type,
     * or code for a flat error event), or set by the caller for Chat, whose reference
     * decoder does not record errors. NULL = must end cleanly. */
    const char *provider_type;
} du_stream;

/* Load <path>.sse and <path>.expect.json. */
static du_stream du_load(const char *path, const char *name, ah_wire wire)
{
    du_stream l = {name, wire, NULL, 0, NULL, NULL};
    char p[700];
    size_t n;
    snprintf(p, sizeof p, "%s.sse", path);
    l.sse = du_read_file(p, &l.len);
    if (!l.sse)
        print_error("cannot read %s\n", p);
    assert_non_null(l.sse);
    snprintf(p, sizeof p, "%s.expect.json", path);
    char *js = du_read_file(p, &n);
    if (!js)
        print_error("cannot read %s\n", p);
    assert_non_null(js);
    l.expect = cJSON_Parse(js);
    free(js);
    assert_non_null(l.expect);
    const cJSON *e = cJSON_GetObjectItem(l.expect, "error");
    if (e) {
        l.provider_type = cJSON_GetStringValue(cJSON_GetObjectItem(e, "type"));
        if (!l.provider_type || strcmp(l.provider_type, "error") == 0)
            l.provider_type = cJSON_GetStringValue(cJSON_GetObjectItem(e, "code"));
        assert_non_null(l.provider_type);
    }
    return l;
}

static void du_unload(du_stream *l)
{
    free(l->sse);
    cJSON_Delete(l->expect);
    memset(l, 0, sizeof *l);
}

/* One decode in `mode`, checked against the expectation and the hook contract. A stream
 * whose expectation has no "error" must finish cleanly with every block closed; one with
 * an error must report it from ah_decoder_finish as the provider's. */
static void du_check_decode(const du_stream *l, uint64_t mode)
{
    du_rec rec = {0};
    ah_status fin;
    ah_error err;
    ah_timeline *tl = du_decode(l->wire, l->sse, l->len, mode, &rec, &fin, &err);
    char what[256];
    snprintf(what, sizeof what, "%s (split mode %llu)", l->name,
             (unsigned long long)mode);
    cJSON *got = du_to_expect(l->wire, tl);
    du_assert_json_equal(l->expect, got, what);
    cJSON_Delete(got);
    du_rec_check(&rec, tl);
    if (l->provider_type) {
        assert_int_equal(fin, AH_ERR_PROVIDER);
        assert_int_equal(err.kind, AH_EK_STREAM);
        assert_string_equal(err.provider_type, l->provider_type);
        assert_non_null(ah_timeline_error(tl));
        assert_string_equal(ah_timeline_error(tl)->provider_type, l->provider_type);
    } else {
        if (fin != AH_OK)
            print_error("%s: finish: %s\n", what, err.message);
        assert_int_equal(fin, AH_OK);
        assert_int_equal(err.kind, AH_EK_NONE);
        assert_null(ah_timeline_error(tl));
        assert_true(ah_timeline_finished(tl));
        for (size_t i = 0; i < ah_timeline_count(tl); i++)
            assert_true(ah_timeline_block(tl, i)->closed);
    }
    du_rec_free(&rec);
    ah_timeline_free(tl);
}

/* Whole, byte by byte, and `seeds` seeded random splittings. */
static void du_check_all_splits(const du_stream *l, int seeds)
{
    du_check_decode(l, DU_WHOLE);
    du_check_decode(l, DU_BYTES);
    for (uint64_t seed = 2; seed < 2 + (uint64_t)seeds; seed++)
        du_check_decode(l, seed * 7919);
}

/* The same stream through a caller-owned SSE parser and ah_decoder_feed_event. */
static void du_check_feed_event(const du_stream *l)
{
    ah_timeline *tl = ah_timeline_new();
    ah_decoder *d = NULL;
    ah_decoder_new(l->wire, tl, NULL, NULL, &d, NULL, 0);
    ah_sse *sse = ah_sse_new(NULL);
    assert_true(tl && d && sse);
    assert_int_equal(ah_sse_feed(sse, l->sse, l->len), AH_OK);
    ah_sse_event ev;
    int r;
    while ((r = ah_sse_next(sse, &ev)) == 1)
        assert_int_equal(ah_decoder_feed_event(d, &ev), AH_OK);
    assert_int_equal(r, 0);
    ah_decoder_finish(d, NULL);
    cJSON *got = du_to_expect(l->wire, tl);
    du_assert_json_equal(l->expect, got, l->name);
    cJSON_Delete(got);
    ah_sse_free(sse);
    ah_decoder_free(d);
    ah_timeline_free(tl);
}

/* Cut the stream after every event and at `mid_cuts` random offsets: each prefix decodes
 * to a prefix of the full timeline, drains only complete final text/reasoning (never a
 * tool call), and an unfinished prefix is a STREAM error at finish. */
static void du_check_truncations(const du_stream *l, int mid_cuts)
{
    ah_timeline *full = du_decode(l->wire, l->sse, l->len, DU_WHOLE, NULL, NULL, NULL);
    size_t *ends = malloc(4096 * sizeof *ends);
    assert_non_null(ends);
    size_t n = du_event_ends(l->sse, l->len, ends, 4096);
    assert_true(n >= 2);
    size_t drained_total = 0;
    uint64_t seed = 0xC0FFEE ^ l->len;
    for (size_t k = 0; k <= n + (size_t)mid_cuts; k++) {
        size_t cut = k == 0   ? 0
                     : k <= n ? ends[k - 1]
                              : (size_t)(du_rand(&seed) % l->len);
        du_rec rec = {0};
        ah_status fin;
        ah_error err;
        ah_timeline *part = du_decode(l->wire, l->sse, cut, DU_WHOLE, &rec, &fin, &err);
        du_rec_check(&rec, part);
        drained_total += du_check_drain(part, full);
        if (fin == AH_OK) {
            assert_true(ah_timeline_finished(part));
        } else {
            /* an interrupted stream is a STREAM error with a message */
            assert_int_equal(err.kind, AH_EK_STREAM);
            assert_true(strlen(err.message) > 0);
        }
        if (!ah_timeline_finished(part))
            assert_int_not_equal(fin, AH_OK);
        du_rec_free(&rec);
        ah_timeline_free(part);
    }
    /* the stream cut after its last event equals the full decode */
    ah_timeline *last =
        du_decode(l->wire, l->sse, ends[n - 1], DU_WHOLE, NULL, NULL, NULL);
    cJSON *a = du_to_expect(l->wire, last), *b = du_to_expect(l->wire, full);
    du_assert_json_equal(b, a, l->name);
    cJSON_Delete(a);
    cJSON_Delete(b);
    ah_timeline_free(last);
    /* a stream with a closed text or reasoning block drains something at some cut */
    int has_content = 0;
    for (size_t i = 0; i < ah_timeline_count(full); i++) {
        const ah_block *fb = ah_timeline_block(full, i);
        has_content |= fb->closed && ((fb->kind == AH_BLOCK_TEXT && fb->text_len > 0) ||
                                      fb->kind == AH_BLOCK_REASONING);
    }
    if (has_content)
        assert_true(drained_total > 0);
    free(ends);
    ah_timeline_free(full);
}

#endif
