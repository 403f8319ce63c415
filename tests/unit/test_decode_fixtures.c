/* test_decode_fixtures.c - the 28 recorded provider streams (tests/fixtures/real-streams)
 * decode to exactly their .expect.json, whole, byte by byte, at seeded random split points
 * and through ah_decoder_feed_event; and every prefix of each stream (cut at each event
 * boundary and at random offsets) drains to complete blocks only.
 *
 * One cmocka test per stream and property, registered at run time from the directory
 * listing, so a new recording is picked up without editing this file.
 */
#include "unit/decode_util.h"

#include <dirent.h>

#define REAL_DIR AH_FIXTURES_DIR "/real-streams"
enum { MAX_FIXTURES = 64, SPLIT_SEEDS = 24, MID_CUTS = 40 };

typedef struct fixture {
    char name[160]; /* "anthropic/text-ping" */
    char path[512]; /* without extension */
    ah_wire wire;
} fixture;

static fixture fixtures[MAX_FIXTURES];
static size_t n_fixtures;

static int cmp_fixture(const void *a, const void *b)
{
    return strcmp(((const fixture *)a)->name, ((const fixture *)b)->name);
}

static void discover(void)
{
    static const struct {
        const char *dir;
        ah_wire wire;
    } dirs[] = {{"anthropic", AH_WIRE_ANTHROPIC},
                {"chat", AH_WIRE_OPENAI},
                {"responses", AH_WIRE_RESPONSES}};
    for (size_t k = 0; k < 3; k++) {
        char path[512];
        snprintf(path, sizeof path, "%s/%s", REAL_DIR, dirs[k].dir);
        DIR *dh = opendir(path);
        if (!dh)
            continue;
        struct dirent *de;
        while ((de = readdir(dh)) && n_fixtures < MAX_FIXTURES) {
            size_t n = strlen(de->d_name);
            if (n < 5 || strcmp(de->d_name + n - 4, ".sse") != 0)
                continue;
            fixture *f = &fixtures[n_fixtures++];
            char name[sizeof f->name];
            snprintf(name, sizeof name, "%s/%.*s", dirs[k].dir, (int)(n - 4), de->d_name);
            memcpy(f->name, name, sizeof name);
            snprintf(f->path, sizeof f->path, "%s/%s", REAL_DIR, name);
            f->wire = dirs[k].wire;
        }
        closedir(dh);
    }
    qsort(fixtures, n_fixtures, sizeof fixtures[0], cmp_fixture);
}

typedef struct loaded {
    char *sse;
    size_t len;
    cJSON *expect;
} loaded;

static loaded load(const fixture *f)
{
    loaded l = {0};
    char path[600];
    size_t n;
    snprintf(path, sizeof path, "%s.sse", f->path);
    l.sse = du_read_file(path, &l.len);
    assert_non_null(l.sse);
    snprintf(path, sizeof path, "%s.expect.json", f->path);
    char *js = du_read_file(path, &n);
    assert_non_null(js);
    l.expect = cJSON_Parse(js);
    free(js);
    assert_non_null(l.expect);
    return l;
}

static void unload(loaded *l)
{
    free(l->sse);
    cJSON_Delete(l->expect);
}

/* One decode in `mode`, checked against the expectation and the hook contract. */
static void decode_and_check(const fixture *f, const loaded *l, uint64_t mode)
{
    du_rec rec = {0};
    ah_status fin;
    ah_error err;
    ah_timeline *tl = du_decode(f->wire, l->sse, l->len, mode, &rec, &fin, &err);
    char what[256];
    snprintf(what, sizeof what, "%s (split mode %llu)", f->name, (unsigned long long)mode);
    cJSON *got = du_to_expect(f->wire, tl);
    du_assert_json_equal(l->expect, got, what);
    cJSON_Delete(got);
    du_rec_check(&rec, tl);
    /* a complete recording is finished, with every block closed */
    assert_true(ah_timeline_finished(tl));
    for (size_t i = 0; i < ah_timeline_count(tl); i++)
        assert_true(ah_timeline_block(tl, i)->closed);
    int has_error = cJSON_GetObjectItem(l->expect, "error") != NULL;
    if (has_error) {
        assert_int_equal(fin, AH_ERR_TRANSPORT);
        assert_int_equal(err.kind, AH_EK_STREAM);
        const cJSON *et = cJSON_GetObjectItem(cJSON_GetObjectItem(l->expect, "error"), "type");
        assert_string_equal(err.provider_type, et->valuestring);
        assert_non_null(ah_timeline_error(tl));
    } else {
        if (fin != AH_OK)
            print_error("%s: finish: %s\n", what, err.message);
        assert_int_equal(fin, AH_OK);
        assert_int_equal(err.kind, AH_EK_NONE);
        assert_null(ah_timeline_error(tl));
    }
    du_rec_free(&rec);
    ah_timeline_free(tl);
}

static void fixture_decodes_exactly(void **state)
{
    const fixture *f = *state;
    loaded l = load(f);
    decode_and_check(f, &l, DU_WHOLE);
    decode_and_check(f, &l, DU_BYTES);
    for (uint64_t seed = 2; seed < 2 + SPLIT_SEEDS; seed++)
        decode_and_check(f, &l, seed * 7919);
    unload(&l);
}

/* The same stream through a caller-owned SSE parser and ah_decoder_feed_event. */
static void fixture_decodes_via_feed_event(void **state)
{
    const fixture *f = *state;
    loaded l = load(f);
    ah_timeline *tl = ah_timeline_new();
    ah_decoder *d = ah_decoder_new(f->wire, tl, NULL, NULL);
    ah_sse *sse = ah_sse_new(NULL);
    assert_true(tl && d && sse);
    assert_int_equal(ah_sse_feed(sse, l.sse, l.len), AH_OK);
    ah_sse_event ev;
    int r;
    while ((r = ah_sse_next(sse, &ev)) == 1)
        assert_int_equal(ah_decoder_feed_event(d, &ev), AH_OK);
    assert_int_equal(r, 0);
    ah_decoder_finish(d, NULL);
    cJSON *got = du_to_expect(f->wire, tl);
    du_assert_json_equal(l.expect, got, f->name);
    cJSON_Delete(got);
    ah_sse_free(sse);
    ah_decoder_free(d);
    ah_timeline_free(tl);
    unload(&l);
}

/* Cut the stream after every event (and at random offsets inside events): the partial drain
 * holds only blocks that are complete and final, never a tool call. */
static void fixture_truncations_drain_complete_blocks(void **state)
{
    const fixture *f = *state;
    loaded l = load(f);
    ah_timeline *full = du_decode(f->wire, l.sse, l.len, DU_WHOLE, NULL, NULL, NULL);
    size_t *ends = malloc(4096 * sizeof *ends);
    assert_non_null(ends);
    size_t n = du_event_ends(l.sse, l.len, ends, 4096);
    assert_true(n > 2);
    size_t drained_total = 0;
    uint64_t seed = 0xC0FFEE ^ l.len;
    for (size_t k = 0; k <= n + MID_CUTS; k++) {
        size_t cut = k == 0 ? 0 : k <= n ? ends[k - 1] : (size_t)(du_rand(&seed) % l.len);
        du_rec rec = {0};
        ah_status fin;
        ah_error err;
        ah_timeline *part = du_decode(f->wire, l.sse, cut, DU_WHOLE, &rec, &fin, &err);
        du_rec_check(&rec, part);
        drained_total += du_check_drain(part, full);
        if (fin == AH_OK) {
            assert_true(ah_timeline_finished(part));
        } else {
            /* an interrupted stream is a STREAM error that says where it ended */
            assert_int_equal(err.kind, AH_EK_STREAM);
            assert_true(strlen(err.message) > 0);
        }
        if (cut < l.len && !ah_timeline_finished(part))
            assert_int_not_equal(fin, AH_OK);
        du_rec_free(&rec);
        ah_timeline_free(part);
    }
    /* the whole stream cut at its last event equals the full decode */
    ah_timeline *last = du_decode(f->wire, l.sse, ends[n - 1], DU_WHOLE, NULL, NULL, NULL);
    cJSON *a = du_to_expect(f->wire, last), *b = du_to_expect(f->wire, full);
    du_assert_json_equal(b, a, f->name);
    cJSON_Delete(a);
    cJSON_Delete(b);
    ah_timeline_free(last);
    /* a stream with a complete text or reasoning block drains something at some cut */
    int has_content = 0;
    for (size_t i = 0; i < ah_timeline_count(full); i++) {
        const ah_block *fb = ah_timeline_block(full, i);
        has_content |= (fb->kind == AH_BLOCK_TEXT && fb->text_len > 0) ||
                       fb->kind == AH_BLOCK_REASONING;
    }
    if (has_content)
        assert_true(drained_total > 0);
    free(ends);
    ah_timeline_free(full);
    unload(&l);
}

static void all_recordings_present(void **state)
{
    (void)state;
    assert_int_equal(n_fixtures, 28);
    size_t per[3] = {0};
    for (size_t i = 0; i < n_fixtures; i++)
        per[fixtures[i].wire]++;
    assert_int_equal(per[AH_WIRE_ANTHROPIC], 11);
    assert_int_equal(per[AH_WIRE_OPENAI], 10);
    assert_int_equal(per[AH_WIRE_RESPONSES], 7);
}

int main(void)
{
    discover();
    static struct CMUnitTest tests[1 + 3 * MAX_FIXTURES];
    static char names[3 * MAX_FIXTURES][220];
    size_t t = 0;
    tests[t++] = (struct CMUnitTest)cmocka_unit_test(all_recordings_present);
    static const struct {
        const char *label;
        CMUnitTestFunction fn;
    } kinds[] = {{"decodes_exactly", fixture_decodes_exactly},
                 {"decodes_via_feed_event", fixture_decodes_via_feed_event},
                 {"truncations_drain_complete_blocks", fixture_truncations_drain_complete_blocks}};
    for (size_t k = 0; k < 3; k++) {
        for (size_t i = 0; i < n_fixtures; i++) {
            char *name = names[k * MAX_FIXTURES + i];
            snprintf(name, sizeof names[0], "%s:%s", kinds[k].label, fixtures[i].name);
            tests[t++] = (struct CMUnitTest){name, kinds[k].fn, NULL, NULL, &fixtures[i]};
        }
    }
    return _cmocka_run_group_tests("decode_fixtures", tests, t, NULL, NULL);
}
