/* overlap_bench.c - what trimming a continuation's restatement costs (core/overlap.c).
 *
 *   overlap_bench [REPS]
 *
 * For committed texts of several sizes and four continuation shapes (unrelated text, a
 * restatement of everything, of the last sentence, and a false start that matches most
 * of the committed text and then diverges), the continuation is fed in 4-byte deltas
 * (about one token each) and the bench reports, per continuation:
 *   - held:  the most bytes held back at once;
 *   - first: how many deltas arrive before the first byte is emitted (the delay a user
 *            sees, in tokens; at 50 tokens/s one delta is 20 ms), and how many of those
 *            deltas were held only to be dropped (a restatement is never shown at all);
 *   - ns:    CPU time of the trimmer for the whole continuation (new + feeds + finish).
 * Only continuations with committed text are trimmed: a normal response never builds
 * a trimmer, so its cost there is zero. Numbers, never assertions.
 */
#define _POSIX_C_SOURCE 200809L
#include "../../core/overlap.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

enum { DELTA = 4 };

static double now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

/* A committed text of about n bytes: sentences of 6-14 words drawn pseudo-randomly (so
 * no tail of it repeats its start), a newline now and then, ending with a full stop. */
static char *make_text(size_t n)
{
    static const char *const words[] = {"the", "plan", "is", "simple", "we", "add",
                                        "numbers", "and", "check", "result", "again",
                                        "first", "then", "every", "value", "carefully"};
    char *s = malloc(n + 256);
    size_t len = 0;
    unsigned long long x = 0x9E3779B97F4A7C15ULL;
    while (len < n) {
        size_t nw = 6 + (size_t)((x >> 33) % 9);
        for (size_t i = 0; i < nw; i++) {
            x = x * 6364136223846793005ULL + 1442695040888963407ULL;
            const char *word = words[(x >> 40) % 16];
            size_t k = strlen(word);
            if (i)
                s[len++] = ' ';
            memcpy(s + len, word, k);
            len += k;
        }
        s[len++] = '.';
        s[len++] = (x >> 20) % 4 == 0 ? '\n' : ' ';
    }
    len--; /* the last separator */
    s[len] = '\0';
    return s;
}

typedef struct shape_result {
    size_t held, first_delta, trimmed;
    double ns;
} shape_result;

static shape_result run(const char *c, const char *t, int reps)
{
    shape_result r = {0};
    size_t n = strlen(t);
    double best = 1e18;
    for (int rep = 0; rep < reps; rep++) {
        double t0 = now_ns();
        ah__overlap *o = ah__overlap_new(c, strlen(c));
        size_t first = (size_t)-1, d = 0;
        for (size_t i = 0; i < n; i += DELTA, d++) {
            size_t k = n - i < DELTA ? n - i : DELTA;
            const char *out;
            size_t len;
            ah__overlap_feed(o, t + i, k, &out, &len);
            if (len && first == (size_t)-1)
                first = d;
        }
        const char *out;
        size_t len;
        ah__overlap_finish(o, &out, &len);
        if (len && first == (size_t)-1)
            first = d;
        double t1 = now_ns();
        if (t1 - t0 < best)
            best = t1 - t0;
        r.held = ah__overlap_max_held(o);
        r.trimmed = ah__overlap_trimmed(o);
        r.first_delta = first;
        ah__overlap_free(o);
    }
    r.ns = best;
    return r;
}

int main(int argc, char **argv)
{
    int reps = argc > 1 ? atoi(argv[1]) : 200;
    const size_t sizes[] = {100, 2000, 20000};
    const char *const rest = " Then the tool is called and the answer follows in full.";
    printf("| committed | continuation | held (max bytes) | first byte after (deltas) | "
           "trimmed | trimmer CPU |\n|---|---|---|---|---|---|\n");
    for (size_t si = 0; si < sizeof sizes / sizeof sizes[0]; si++) {
        char *c = make_text(sizes[si]);
        size_t clen = strlen(c);
        size_t rlen = strlen(rest);
        char *t = malloc(2 * clen + rlen + 64);
        /* last sentence: the tail after the last ". " */
        const char *last = c;
        for (const char *p = c; *p; p++)
            if ((p[0] == '.' && p[1] == ' ') || p[0] == '\n')
                last = p + 1 + (p[0] == '.');
        struct {
            const char *name;
            size_t len;
        } shapes[4];
        const char *texts[4];
        char *bufs[4];
        /* unrelated */
        bufs[0] = strdup(rest + 1);
        /* restates everything */
        bufs[1] = malloc(clen + rlen + 1);
        sprintf(bufs[1], "%s%s", c, rest);
        /* restates the last sentence */
        bufs[2] = malloc(clen + rlen + 1);
        sprintf(bufs[2], "%s%s", last, rest);
        /* false start: 90% of the committed text, then something else */
        size_t cut = clen * 9 / 10;
        bufs[3] = malloc(cut + rlen + 8);
        memcpy(bufs[3], c, cut);
        sprintf(bufs[3] + cut, "XX%s", rest);
        const char *names[4] = {"unrelated", "restates all", "restates last sentence",
                                "false start at 90%"};
        for (int k = 0; k < 4; k++) {
            texts[k] = bufs[k];
            shapes[k].name = names[k];
            shapes[k].len = strlen(bufs[k]);
        }
        for (int k = 0; k < 4; k++) {
            shape_result r = run(c, texts[k], reps);
            printf("| %zu B | %s | %zu | %zu | %zu | %.1f us (%.1f ns/byte) |\n", clen,
                   shapes[k].name, r.held, r.first_delta, r.trimmed, r.ns / 1000.0,
                   r.ns / (double)shapes[k].len);
        }
        for (int k = 0; k < 4; k++)
            free(bufs[k]);
        free(t);
        free(c);
    }
    return 0;
}
