/* sse_reference.h - a naive whole-buffer SSE parser, written straight from the WHATWG
 * "event stream interpretation" steps with no incremental cleverness and no caps. Shared
 * by test_sse.c and fuzz_sse.c as the oracle the real parser is compared against.
 * Header-only (static functions) so each test binary compiles its own copy. */
#ifndef AH_TEST_SSE_REFERENCE_H
#define AH_TEST_SSE_REFERENCE_H

#include "agenthost/sse.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

typedef void (*sse_ref_emit)(void *ud, const ah_sse_event *e);

/* Calls emit for every event the stream dispatches; returns the count, or -1 if out of
 * memory. Event strings are valid only during the emit call. */
static long sse_ref_parse(const char *s, size_t n, sse_ref_emit emit, void *ud)
{
    size_t i = 0;
    long count = 0;
    if (n >= 3 && memcmp(s, "\xEF\xBB\xBF", 3) == 0)
        i = 3;
    char *data = malloc(n + 2), *type = malloc(n + 1), *id = malloc(n + 1);
    if (!data || !type || !id) {
        free(data), free(type), free(id);
        return -1;
    }
    size_t dl = 0, tl = 0, il = 0;
    int64_t retry = -1;
    id[0] = '\0';
    while (i < n) {
        size_t e = i;
        while (e < n && s[e] != '\r' && s[e] != '\n')
            e++;
        if (e == n)
            break; /* an unterminated last line is discarded */
        const char *line = s + i;
        size_t ll = e - i;
        i = e + 1;
        if (s[e] == '\r' && i < n && s[i] == '\n')
            i++;
        if (ll == 0) {
            if (dl > 0) {
                data[dl - 1] = '\0'; /* drop the trailing LF */
                type[tl] = '\0';
                id[il] = '\0';
                ah_sse_event ev = {
                    tl ? type : "message", tl ? tl : 7, data, dl - 1, id, il, retry};
                emit(ud, &ev);
                count++;
            }
            dl = tl = 0;
            retry = -1;
            continue;
        }
        if (line[0] == ':')
            continue;
        const char *c = memchr(line, ':', ll);
        size_t nl = c ? (size_t)(c - line) : ll;
        const char *v = c ? c + 1 : line + ll;
        size_t vl = (size_t)(line + ll - v);
        if (vl && v[0] == ' ')
            v++, vl--;
        if (nl == 4 && memcmp(line, "data", 4) == 0) {
            memcpy(data + dl, v, vl);
            dl += vl;
            data[dl++] = '\n';
        } else if (nl == 5 && memcmp(line, "event", 5) == 0) {
            memcpy(type, v, vl);
            tl = vl;
        } else if (nl == 2 && memcmp(line, "id", 2) == 0) {
            if (!memchr(v, 0, vl)) {
                memcpy(id, v, vl);
                il = vl;
            }
        } else if (nl == 5 && memcmp(line, "retry", 5) == 0) {
            int ok = vl > 0;
            int64_t r = 0;
            for (size_t k = 0; k < vl && ok; k++) {
                int d = v[k] - '0';
                if (d < 0 || d > 9)
                    ok = 0;
                else
                    r = r > (INT64_MAX - d) / 10 ? INT64_MAX : r * 10 + d;
            }
            if (ok)
                retry = r;
        }
    }
    free(data);
    free(type);
    free(id);
    return count;
}

#endif
