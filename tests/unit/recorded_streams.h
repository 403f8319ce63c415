/* recorded_streams.h - the recorded provider streams under tests/fixtures/real-streams
 * (anthropic/, chat/, responses/ *.sse) for the decoder tests that compare paths on them
 * (header-only, static inline; AH_FIXTURES_DIR comes from the build). */
#ifndef AH_TEST_RECORDED_STREAMS_H
#define AH_TEST_RECORDED_STREAMS_H

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agenthost.h"

#define REAL_DIR AH_FIXTURES_DIR "/real-streams"

/* A whole file, NUL-terminated; *len its size. Fails the test if it cannot be read. */
static inline char *read_file(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    assert_int_equal(fseek(f, 0, SEEK_END), 0);
    long n = ftell(f);
    assert_true(n >= 0);
    rewind(f);
    char *p = malloc((size_t)n + 1);
    assert_non_null(p);
    assert_int_equal(fread(p, 1, (size_t)n, f), (size_t)n);
    fclose(f);
    p[n] = '\0';
    *len = (size_t)n;
    return p;
}

/* fn on every recorded stream, in directory order; returns how many there were. */
static inline size_t each_recorded_stream(void (*fn)(ah_wire wire, const char *file,
                                                     const char *sse, size_t len, void *ud),
                                          void *ud)
{
    static const struct {
        const char *dir;
        ah_wire wire;
    } dirs[] = {{"anthropic", AH_WIRE_ANTHROPIC},
                {"chat", AH_WIRE_OPENAI},
                {"responses", AH_WIRE_RESPONSES}};
    size_t count = 0;
    for (size_t k = 0; k < sizeof dirs / sizeof dirs[0]; k++) {
        char path[512];
        snprintf(path, sizeof path, "%s/%s", REAL_DIR, dirs[k].dir);
        DIR *dh = opendir(path);
        assert_non_null(dh);
        struct dirent *de;
        while ((de = readdir(dh))) {
            size_t n = strlen(de->d_name);
            if (n < 5 || strcmp(de->d_name + n - 4, ".sse") != 0)
                continue;
            char file[800];
            snprintf(file, sizeof file, "%s/%s", path, de->d_name);
            size_t len = 0;
            char *sse = read_file(file, &len);
            fn(dirs[k].wire, file, sse, len, ud);
            free(sse);
            count++;
        }
        closedir(dh);
    }
    return count;
}

#endif
