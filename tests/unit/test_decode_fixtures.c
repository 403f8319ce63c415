/* test_decode_fixtures.c - the 28 recorded provider streams (tests/fixtures/real-streams)
 * decode to exactly their .expect.json, whole, byte by byte, at seeded random split
 * points and through ah_decoder_feed_event; and every prefix of each stream (cut at each
 * event boundary and at random offsets) drains to complete blocks only.
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

static du_stream load(const fixture *f)
{
    return du_load(f->path, f->name, f->wire);
}

static void fixture_decodes_exactly(void **state)
{
    du_stream l = load(*state);
    du_check_all_splits(&l, SPLIT_SEEDS);
    du_unload(&l);
}

/* The same stream through a caller-owned SSE parser and ah_decoder_feed_event. */
static void fixture_decodes_via_feed_event(void **state)
{
    du_stream l = load(*state);
    du_check_feed_event(&l);
    du_unload(&l);
}

/* Cut the stream after every event (and at random offsets inside events): the partial
 * drain holds only blocks that are complete and final, never a tool call. */
static void fixture_truncations_drain_complete_blocks(void **state)
{
    du_stream l = load(*state);
    du_check_truncations(&l, MID_CUTS);
    du_unload(&l);
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
    } kinds[] = {
        {"decodes_exactly", fixture_decodes_exactly},
        {"decodes_via_feed_event", fixture_decodes_via_feed_event},
        {"truncations_drain_complete_blocks", fixture_truncations_drain_complete_blocks}};
    for (size_t k = 0; k < 3; k++) {
        for (size_t i = 0; i < n_fixtures; i++) {
            char *name = names[k * MAX_FIXTURES + i];
            snprintf(name, sizeof names[0], "%s:%.160s", kinds[k].label, fixtures[i].name);
            tests[t++] = (struct CMUnitTest){name, kinds[k].fn, NULL, NULL, &fixtures[i]};
        }
    }
    return _cmocka_run_group_tests("decode_fixtures", tests, t, NULL, NULL);
}
