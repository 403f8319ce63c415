/* test_sse.c - the incremental SSE parser against the WHATWG event-stream rules.
 *
 * Every recorded provider stream is parsed whole, byte by byte and split in two at every
 * offset, and must give the same events; small hand-written streams pin each rule; random
 * streams are checked against the naive whole-buffer reference in fuzz/sse_reference.h.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "agenthost.h"
#include "agenthost/sse.h"
#include "fuzz/sse_reference.h"

/* ---- an owned copy of an event list
 * ---------------------------------------------------- */

typedef struct ev {
    char *type, *data, *id;
    size_t type_len, data_len, id_len;
    int64_t retry;
} ev;

typedef struct evlist {
    ev *v;
    size_t n, cap;
    ah_status st; /* final status of the parser */
} evlist;

static char *dupn(const char *s, size_t n)
{
    char *p = malloc(n + 1);
    assert_non_null(p);
    memcpy(p, s, n);
    p[n] = '\0';
    return p;
}

static void evlist_push(evlist *l, const ah_sse_event *e)
{
    /* The contract: strings are NUL-terminated as well as counted. */
    assert_int_equal(e->type[e->type_len], '\0');
    assert_int_equal(e->data[e->data_len], '\0');
    assert_int_equal(e->id[e->id_len], '\0');
    if (l->n == l->cap) {
        l->cap = l->cap ? l->cap * 2 : 16;
        l->v = realloc(l->v, l->cap * sizeof *l->v);
        assert_non_null(l->v);
    }
    ev *d = &l->v[l->n++];
    d->type = dupn(e->type, e->type_len);
    d->data = dupn(e->data, e->data_len);
    d->id = dupn(e->id, e->id_len);
    d->type_len = e->type_len;
    d->data_len = e->data_len;
    d->id_len = e->id_len;
    d->retry = e->retry_ms;
}

static void evlist_free(evlist *l)
{
    for (size_t i = 0; i < l->n; i++) {
        free(l->v[i].type);
        free(l->v[i].data);
        free(l->v[i].id);
    }
    free(l->v);
    memset(l, 0, sizeof *l);
}

static void drain(ah_sse *p, evlist *out)
{
    ah_sse_event e;
    int r;
    while ((r = ah_sse_next(p, &e)) == 1)
        evlist_push(out, &e);
    if (r < 0)
        assert_int_not_equal(ah_sse_status(p), AH_OK);
}

/* Parse s in pieces of `step` bytes (0 = whole), draining after every feed. */
static evlist parse_steps(const ah_sse_limits *lim, const char *s, size_t n, size_t step)
{
    evlist out = {0};
    ah_sse *p = ah_sse_new(lim);
    assert_non_null(p);
    if (step == 0)
        step = n ? n : 1;
    for (size_t i = 0; i < n; i += step) {
        size_t k = n - i < step ? n - i : step;
        if (ah_sse_feed(p, s + i, k) != AH_OK)
            break;
        drain(p, &out);
    }
    drain(p, &out);
    out.st = ah_sse_status(p);
    assert_int_equal(ah_sse_bytes_fed(p) <= n, 1);
    ah_sse_free(p);
    return out;
}

static evlist parse_str(const char *s)
{
    return parse_steps(NULL, s, strlen(s), 0);
}

static void assert_ev(const ev *e, const char *type, const char *data, const char *id,
                      int64_t retry)
{
    assert_string_equal(e->type, type);
    assert_int_equal(e->type_len, strlen(type));
    assert_string_equal(e->data, data);
    assert_int_equal(e->data_len, strlen(data));
    assert_string_equal(e->id, id);
    assert_int_equal(e->retry, retry);
}

static int ev_equal(const ev *a, const ev *b)
{
    return a->type_len == b->type_len && memcmp(a->type, b->type, a->type_len) == 0 &&
           a->data_len == b->data_len && memcmp(a->data, b->data, a->data_len) == 0 &&
           a->id_len == b->id_len && memcmp(a->id, b->id, a->id_len) == 0 &&
           a->retry == b->retry;
}

static void assert_same(const evlist *a, const evlist *b, const char *what)
{
    if (a->n != b->n || a->st != b->st)
        fail_msg("%s: %zu events (status %d) vs %zu (status %d)", what, a->n, a->st, b->n,
                 b->st);
    for (size_t i = 0; i < a->n; i++)
        if (!ev_equal(&a->v[i], &b->v[i]))
            fail_msg("%s: event %zu differs (data '%s' vs '%s')", what, i, a->v[i].data,
                     b->v[i].data);
}

/* Feed s split once at k, compare against `want` without copying each event. */
static void check_split(const char *s, size_t n, size_t k, const evlist *want,
                        const char *name)
{
    ah_sse *p = ah_sse_new(NULL);
    assert_non_null(p);
    size_t got = 0;
    ah_sse_event e;
    for (int part = 0; part < 2; part++) {
        const char *b = part ? s + k : s;
        size_t len = part ? n - k : k;
        assert_int_equal(ah_sse_feed(p, b, len), AH_OK);
        while (ah_sse_next(p, &e) == 1) {
            if (got >= want->n)
                fail_msg("%s split at %zu: extra event", name, k);
            const ev *w = &want->v[got++];
            if (e.type_len != w->type_len || memcmp(e.type, w->type, w->type_len) != 0 ||
                e.data_len != w->data_len || memcmp(e.data, w->data, w->data_len) != 0 ||
                e.id_len != w->id_len || memcmp(e.id, w->id, w->id_len) != 0 ||
                e.retry_ms != w->retry)
                fail_msg("%s split at %zu: event %zu differs", name, k, got - 1);
        }
    }
    assert_int_equal(ah_sse_status(p), AH_OK);
    if (got != want->n)
        fail_msg("%s split at %zu: %zu events, want %zu", name, k, got, want->n);
    ah_sse_free(p);
}

static char *read_file(const char *path, size_t *n)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        fail_msg("cannot open %s", path);
    fseek(f, 0, SEEK_END);
    long sz = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *b = malloc((size_t)sz + 1);
    assert_non_null(b);
    assert_int_equal(fread(b, 1, (size_t)sz, f), (size_t)sz);
    fclose(f);
    b[sz] = '\0';
    *n = (size_t)sz;
    return b;
}

/* ---- recorded provider streams
 * --------------------------------------------------------- */

static void check_fixture(const char *dir, const char *file)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/real-streams/%s/%s", AH_FIXTURES_DIR, dir, file);
    size_t n;
    char *s = read_file(path, &n);

    evlist whole = parse_steps(NULL, s, n, 0);
    assert_int_equal(whole.st, AH_OK);
    if (whole.n == 0)
        fail_msg("%s: no events", path);

    evlist bytes = parse_steps(NULL, s, n, 1);
    assert_same(&whole, &bytes, path);
    evlist_free(&bytes);
    evlist odd = parse_steps(NULL, s, n, 7);
    assert_same(&whole, &odd, path);
    evlist_free(&odd);

    for (size_t k = 0; k <= n; k++)
        check_split(s, n, k, &whole, path);

    /* Sanity that lines and blocks are cut right: where the stream names the event, its
     * JSON payload carries the same "type"; every non-sentinel payload is JSON. */
    int named = strcmp(dir, "anthropic") == 0 || strcmp(dir, "responses") == 0;
    for (size_t i = 0; i < whole.n; i++) {
        const ev *e = &whole.v[i];
        if (strcmp(e->data, "[DONE]") == 0)
            continue;
        cJSON *j = cJSON_ParseWithLength(e->data, e->data_len);
        if (!j)
            fail_msg("%s: event %zu data is not JSON", path, i);
        if (named && strcmp(e->type, "message") != 0) {
            const cJSON *t = cJSON_GetObjectItemCaseSensitive(j, "type");
            assert_true(cJSON_IsString(t));
            if (strcmp(t->valuestring, e->type) != 0)
                fail_msg("%s: event %zu type '%s' vs JSON type '%s'", path, i, e->type,
                         t->valuestring);
        }
        if (!named)
            assert_string_equal(e->type, "message");
        cJSON_Delete(j);
    }
    evlist_free(&whole);
    free(s);
}

static void fixtures_are_split_invariant(void **state)
{
    (void)state;
    const char *dirs[] = {"anthropic", "chat", "responses"};
    int files = 0;
    for (size_t d = 0; d < sizeof dirs / sizeof dirs[0]; d++) {
        char path[1024];
        snprintf(path, sizeof path, "%s/real-streams/%s", AH_FIXTURES_DIR, dirs[d]);
        DIR *dp = opendir(path);
        assert_non_null(dp);
        struct dirent *de;
        while ((de = readdir(dp)) != NULL) {
            size_t l = strlen(de->d_name);
            if (l > 4 && strcmp(de->d_name + l - 4, ".sse") == 0) {
                check_fixture(dirs[d], de->d_name);
                files++;
            }
        }
        closedir(dp);
    }
    assert_int_equal(files, 28);
}

/* ---- line ends -----------------------------------------------------------------------
 */

static void line_ends_lf_cr_crlf_mixed(void **state)
{
    (void)state;
    const char *streams[] = {
        "data: a\ndata: b\n\n",   "data: a\rdata: b\r\r",   "data: a\r\ndata: b\r\n\r\n",
        "data: a\rdata: b\r\n\n", "data: a\r\ndata: b\n\r",
    };
    for (size_t i = 0; i < sizeof streams / sizeof streams[0]; i++) {
        for (size_t step = 0; step < 4; step++) {
            evlist l = parse_steps(NULL, streams[i], strlen(streams[i]), step);
            assert_int_equal(l.n, 1);
            assert_ev(&l.v[0], "message", "a\nb", "", -1);
            evlist_free(&l);
        }
    }
    /* "\n\r" is two line ends: a blank line between two events. */
    evlist l = parse_str("data: a\n\rdata: b\r\r");
    assert_int_equal(l.n, 2);
    assert_ev(&l.v[0], "message", "a", "", -1);
    assert_ev(&l.v[1], "message", "b", "", -1);
    evlist_free(&l);
}

static void crlf_split_across_feeds(void **state)
{
    (void)state;
    ah_sse *p = ah_sse_new(NULL);
    ah_sse_event e;
    /* CR ends one feed, LF starts the next: one line end, not a blank line. */
    assert_int_equal(ah_sse_feed(p, "data: a\r", 8), AH_OK);
    assert_int_equal(ah_sse_next(p, &e), 0);
    assert_int_equal(ah_sse_feed(p, "", 0), AH_OK);
    assert_int_equal(ah_sse_next(p, &e), 0);
    assert_int_equal(ah_sse_feed(p, "\ndata: b\r", 9), AH_OK);
    assert_int_equal(ah_sse_next(p, &e), 0);
    assert_int_equal(ah_sse_feed(p, "\n", 1), AH_OK);
    assert_int_equal(ah_sse_next(p, &e), 0);
    assert_int_equal(ah_sse_feed(p, "\r", 1), AH_OK);
    /* "\r" is a blank line on its own: dispatch now, without waiting for a possible LF.
     */
    assert_int_equal(ah_sse_next(p, &e), 1);
    assert_string_equal(e.data, "a\nb");
    assert_int_equal(ah_sse_feed(p, "\ndata: c\r", 9), AH_OK);
    assert_int_equal(ah_sse_next(p, &e), 0);
    /* A CR at the end of a feed followed by something other than LF. */
    assert_int_equal(ah_sse_feed(p, "data: d\r\r", 9), AH_OK);
    assert_int_equal(ah_sse_next(p, &e), 1);
    assert_string_equal(e.data, "c\nd");
    assert_int_equal(ah_sse_next(p, &e), 0);
    ah_sse_free(p);
}

/* ---- fields --------------------------------------------------------------------------
 */

static void multi_line_data(void **state)
{
    (void)state;
    evlist l = parse_str("data: a\ndata:\ndata: b\n\ndata\ndata\n\ndata:\n\n");
    assert_int_equal(l.n, 3);
    assert_ev(&l.v[0], "message", "a\n\nb", "", -1);
    assert_ev(&l.v[1], "message", "\n", "", -1);
    assert_ev(&l.v[2], "message", "", "", -1); /* "data:" alone still dispatches */
    evlist_free(&l);
}

static void comments_are_ignored(void **state)
{
    (void)state;
    evlist l =
        parse_str(": keepalive\n\n:\ndata: x\n: in the middle\ndata: y\n\n:data: z\n\n");
    assert_int_equal(l.n, 1);
    assert_ev(&l.v[0], "message", "x\ny", "", -1);
    evlist_free(&l);
}

static void event_type(void **state)
{
    (void)state;
    evlist l = parse_str("event: ping\ndata: 1\n\n"
                         "data: 2\n\n"
                         "event:\ndata: 3\n\n"
                         "event: lost\n\n" /* empty data: no dispatch, type reset */
                         "data: 4\n\n"
                         "event: a\nevent: b\ndata: 5\n\n");
    assert_int_equal(l.n, 5);
    assert_ev(&l.v[0], "ping", "1", "", -1);
    assert_ev(&l.v[1], "message", "2", "", -1);
    assert_ev(&l.v[2], "message", "3", "", -1);
    assert_ev(&l.v[3], "message", "4", "", -1);
    assert_ev(&l.v[4], "b", "5", "", -1);
    evlist_free(&l);
}

static void id_persists_and_resets(void **state)
{
    (void)state;
    static const char s[] = "id: 1\ndata: a\n\n"
                            "data: b\n\n"
                            "id: 2\n\n" /* not dispatched, but sets the last event ID */
                            "data: c\n\n"
                            "id: x\0y\ndata: d\n\n" /* NUL: ignored */
                            "id\ndata: e\n\n"       /* empty id resets */
                            "id: 3\ndata: f\n\nid:\ndata: g\n\n";
    evlist l = parse_steps(NULL, s, sizeof s - 1, 0);
    assert_int_equal(l.n, 7);
    assert_ev(&l.v[0], "message", "a", "1", -1);
    assert_ev(&l.v[1], "message", "b", "1", -1);
    assert_ev(&l.v[2], "message", "c", "2", -1);
    assert_ev(&l.v[3], "message", "d", "2", -1);
    assert_ev(&l.v[4], "message", "e", "", -1);
    assert_ev(&l.v[5], "message", "f", "3", -1);
    assert_ev(&l.v[6], "message", "g", "", -1);
    evlist_free(&l);

    ah_sse *p = ah_sse_new(NULL);
    ah_sse_event e;
    assert_string_equal(ah_sse_last_id(p), "");
    assert_int_equal(ah_sse_feed(p, "id: 42\n\n", 8), AH_OK);
    assert_int_equal(ah_sse_next(p, &e), 0);
    assert_string_equal(ah_sse_last_id(p), "42");
    ah_sse_free(p);
}

static void retry_field(void **state)
{
    (void)state;
    evlist l = parse_str("retry: 1500\ndata: a\n\n"
                         "data: b\n\n"
                         "retry: 15x\ndata: c\n\n"
                         "retry: -5\nretry:\nretry: 1 2\nretry:  7\nretry\ndata: d\n\n"
                         "retry:0\ndata: e\n\n"
                         "retry: 99999999999999999999999\ndata: f\n\n");
    assert_int_equal(l.n, 6);
    assert_ev(&l.v[0], "message", "a", "", 1500);
    assert_ev(&l.v[1], "message", "b", "", -1);
    assert_ev(&l.v[2], "message", "c", "", -1);
    assert_ev(&l.v[3], "message", "d", "", -1);
    assert_ev(&l.v[4], "message", "e", "", 0);
    assert_ev(&l.v[5], "message", "f", "", INT64_MAX);
    evlist_free(&l);

    ah_sse *p = ah_sse_new(NULL);
    ah_sse_event e;
    assert_int_equal(ah_sse_retry_ms(p), -1);
    assert_int_equal(ah_sse_feed(p, "retry: 3000\n\nretry: bad\n\n", 25), AH_OK);
    assert_int_equal(ah_sse_next(p, &e), 0);
    assert_int_equal(ah_sse_retry_ms(p), 3000);
    ah_sse_free(p);
}

static void bom_skipped_once(void **state)
{
    (void)state;
    static const char s[] = "\xEF\xBB\xBF"
                            "data: a\n\n";
    for (size_t step = 0; step < 3; step++) {
        evlist l = parse_steps(NULL, s, sizeof s - 1, step);
        assert_int_equal(l.n, 1);
        assert_ev(&l.v[0], "message", "a", "", -1);
        evlist_free(&l);
    }
    /* A second BOM is part of the first field name, which is then unknown. */
    evlist two = parse_str("\xEF\xBB\xBF\xEF\xBB\xBF"
                           "data: a\n\ndata: b\n\n");
    assert_int_equal(two.n, 1);
    assert_ev(&two.v[0], "message", "b", "", -1);
    evlist_free(&two);
    /* A BOM prefix that turns out not to be one is kept, byte for byte. */
    const char *partial[] = {"\xEF"
                             "data: a\n\ndata: b\n\n",
                             "\xEF\xBB"
                             "data: a\n\ndata: b\n\n"};
    for (size_t i = 0; i < 2; i++) {
        for (size_t step = 0; step < 2; step++) {
            evlist l = parse_steps(NULL, partial[i], strlen(partial[i]), step);
            assert_int_equal(l.n, 1);
            assert_ev(&l.v[0], "message", "b", "", -1);
            evlist_free(&l);
        }
    }
    /* BOM not at the start: data bytes. */
    evlist mid = parse_str("data: \xEF\xBB\xBFx\n\n");
    assert_int_equal(mid.n, 1);
    assert_string_equal(mid.v[0].data, "\xEF\xBB\xBFx");
    evlist_free(&mid);
}

static void no_colon_and_unknown_fields(void **state)
{
    (void)state;
    evlist l = parse_str("data\n\n"
                         "event\ndata: x\n\n"
                         "foo: bar\nbaz\ndata : no\n\n" /* "data " is not "data" */
                         "DATA: no\nData: no\ndata: yes\n\n");
    assert_int_equal(l.n, 3);
    assert_ev(&l.v[0], "message", "", "", -1);
    assert_ev(&l.v[1], "message", "x", "", -1);
    assert_ev(&l.v[2], "message", "yes", "", -1);
    evlist_free(&l);
}

static void one_leading_space_stripped(void **state)
{
    (void)state;
    evlist l = parse_str("data:x\n\ndata: x\n\ndata:  x\n\ndata:\tx\n\nevent:  t\ndata: "
                         "y \n\ndata: a:b: c\n\n");
    assert_int_equal(l.n, 6);
    assert_ev(&l.v[0], "message", "x", "", -1);
    assert_ev(&l.v[1], "message", "x", "", -1);
    assert_ev(&l.v[2], "message", " x", "", -1);
    assert_ev(&l.v[3], "message", "\tx", "", -1);
    assert_ev(&l.v[4], " t", "y ", "", -1);
    assert_ev(&l.v[5], "message", "a:b: c", "", -1);
    evlist_free(&l);
}

static void unterminated_final_event_not_dispatched(void **state)
{
    (void)state;
    const char *streams[] = {"data: a\n\ndata: b\n", "data: a\n\ndata: b",
                             "data: a\n\ndata: b\r", "data: a\r\n\r\ndata: b\r\n"};
    for (size_t i = 0; i < 4; i++) {
        for (size_t step = 0; step < 3; step++) {
            evlist l = parse_steps(NULL, streams[i], strlen(streams[i]), step);
            assert_int_equal(l.n, 1);
            assert_ev(&l.v[0], "message", "a", "", -1);
            evlist_free(&l);
        }
    }
}

static void empty_data_not_dispatched(void **state)
{
    (void)state;
    evlist l = parse_str("\n\n\n\r\n\revent: x\n\nid: 1\n\nretry: 5\n\n: c\n\n");
    assert_int_equal(l.n, 0);
    assert_int_equal(l.st, AH_OK);
    evlist_free(&l);
}

static void embedded_nul_in_data(void **state)
{
    (void)state;
    static const char s[] = "data: a\0b\n\n";
    evlist l = parse_steps(NULL, s, sizeof s - 1, 1);
    assert_int_equal(l.n, 1);
    assert_int_equal(l.v[0].data_len, 3);
    assert_memory_equal(l.v[0].data, "a\0b", 3);
    evlist_free(&l);
}

/* ---- caps and errors ------------------------------------------------------------------
 */

static void oversize_line_is_sticky_error(void **state)
{
    (void)state;
    ah_sse_limits lim = {.max_line = 16, .max_event = 0};
    ah_sse_event e;

    /* A line of exactly max_line bytes is accepted. */
    evlist ok = parse_steps(&lim, "data: 0123456789\n\n", 18, 1);
    assert_int_equal(ok.st, AH_OK);
    assert_int_equal(ok.n, 1);
    evlist_free(&ok);

    /* Complete over-long line, found by next(). */
    ah_sse *p = ah_sse_new(&lim);
    const char s[] = "data: ok\n\ndata: 0123456789a\n\n";
    assert_int_equal(ah_sse_feed(p, s, sizeof s - 1), AH_OK);
    assert_int_equal(ah_sse_next(p, &e), 1);
    assert_string_equal(e.data, "ok");
    assert_int_equal(ah_sse_next(p, &e), -1);
    assert_int_equal(ah_sse_status(p), AH_ERR_TOO_LARGE);
    const char *msg = ah_sse_errmsg(p);
    assert_non_null(strstr(msg, "max_line"));
    assert_non_null(strstr(msg, "16"));
    assert_non_null(strstr(msg, "offset 10"));
    /* Sticky: feed and next keep failing. */
    assert_int_equal(ah_sse_feed(p, "data: x\n\n", 9), AH_ERR_TOO_LARGE);
    assert_int_equal(ah_sse_next(p, &e), -1);
    assert_int_equal(ah_sse_next(p, &e), -1);
    /* Reset clears it, keeps the limits. */
    ah_sse_reset(p);
    assert_int_equal(ah_sse_status(p), AH_OK);
    assert_string_equal(ah_sse_errmsg(p), "");
    assert_int_equal(ah_sse_bytes_fed(p), 0);
    assert_int_equal(ah_sse_feed(p, "data: x\n\n", 9), AH_OK);
    assert_int_equal(ah_sse_next(p, &e), 1);
    assert_string_equal(e.data, "x");
    assert_int_equal(ah_sse_feed(p, "data: 0123456789a\n", 18), AH_OK);
    assert_int_equal(ah_sse_next(p, &e), -1);
    ah_sse_free(p);

    /* An unterminated line fed byte by byte fails as soon as it passes the cap: memory
     * stays bounded while the line end never comes. */
    p = ah_sse_new(&lim);
    size_t i;
    ah_status st = AH_OK;
    for (i = 0; i < 1000 && st == AH_OK; i++)
        st = ah_sse_feed(p, "x", 1);
    assert_int_equal(st, AH_ERR_TOO_LARGE);
    assert_int_equal(i, 17);
    assert_non_null(strstr(ah_sse_errmsg(p), "offset 0"));
    assert_int_equal(ah_sse_next(p, &e), -1);
    ah_sse_free(p);

    /* The same in one big feed: refused before buffering. */
    p = ah_sse_new(&lim);
    char big[4096];
    memset(big, 'x', sizeof big);
    memcpy(big, "data: a\n\n", 9);
    assert_int_equal(ah_sse_feed(p, big, sizeof big), AH_ERR_TOO_LARGE);
    assert_non_null(strstr(ah_sse_errmsg(p), "offset 9"));
    ah_sse_free(p);
}

static void oversize_event_is_sticky_error(void **state)
{
    (void)state;
    ah_sse_limits lim = {.max_line = 0, .max_event = 10};
    /* Joined data of exactly max_event bytes is fine. */
    evlist ok = parse_steps(&lim, "data: 1234\ndata: 56789\n\n", 24, 0);
    assert_int_equal(ok.st, AH_OK);
    assert_int_equal(ok.n, 1);
    assert_int_equal(ok.v[0].data_len, 10);
    evlist_free(&ok);

    for (size_t step = 0; step < 2; step++) {
        const char s[] = "data: a\n\ndata: 12345\ndata: 67890\n\ndata: b\n\n";
        evlist l = parse_steps(&lim, s, sizeof s - 1, step);
        assert_int_equal(l.st, AH_ERR_TOO_LARGE);
        assert_int_equal(l.n, 1);
        assert_string_equal(l.v[0].data, "a");
        evlist_free(&l);
    }
    ah_sse *p = ah_sse_new(&lim);
    ah_sse_event e;
    const char s[] = "data: 0123456789abc\n\n";
    assert_int_equal(ah_sse_feed(p, s, sizeof s - 1), AH_OK);
    assert_int_equal(ah_sse_next(p, &e), -1);
    assert_int_equal(ah_sse_status(p), AH_ERR_TOO_LARGE);
    assert_non_null(strstr(ah_sse_errmsg(p), "max_event"));
    assert_non_null(strstr(ah_sse_errmsg(p), "10 bytes"));
    assert_non_null(strstr(ah_sse_errmsg(p), "offset 0"));
    assert_int_equal(ah_sse_feed(p, "data: x\n\n", 9), AH_ERR_TOO_LARGE);
    ah_sse_reset(p);
    assert_int_equal(ah_sse_feed(p, "data: x\n\n", 9), AH_OK);
    assert_int_equal(ah_sse_next(p, &e), 1);
    ah_sse_free(p);
}

static void null_and_misuse(void **state)
{
    (void)state;
    ah_sse_event e;
    ah_sse_free(NULL);
    ah_sse_reset(NULL);
    assert_int_equal(ah_sse_feed(NULL, "x", 1), AH_ERR_INVALID);
    assert_int_equal(ah_sse_next(NULL, &e), -1);
    assert_int_equal(ah_sse_bytes_fed(NULL), 0);
    ah_sse *p = ah_sse_new(NULL);
    assert_int_equal(ah_sse_feed(p, NULL, 0), AH_OK);
    assert_int_equal(ah_sse_feed(p, NULL, 1), AH_ERR_INVALID);
    assert_int_equal(ah_sse_next(p, &e), 0);
    assert_int_equal(ah_sse_feed(p, "data: x\n\n", 9), AH_OK);
    assert_int_equal(ah_sse_bytes_fed(p), 9);
    ah_sse_free(p);
}

/* ---- volume ---------------------------------------------------------------------------
 */

static void many_events_in_one_feed(void **state)
{
    (void)state;
    enum { N = 20000 };
    size_t cap = (size_t)N * 48, n = 0;
    char *s = malloc(cap);
    assert_non_null(s);
    for (int i = 0; i < N; i++)
        n += (size_t)snprintf(s + n, cap - n, "event: e%d\nid: %d\ndata: %d\n\n", i % 3,
                              i, i * 7);
    ah_sse *p = ah_sse_new(NULL);
    assert_int_equal(ah_sse_feed(p, s, n), AH_OK);
    ah_sse_event e;
    char want[32];
    for (int i = 0; i < N; i++) {
        assert_int_equal(ah_sse_next(p, &e), 1);
        snprintf(want, sizeof want, "e%d", i % 3);
        assert_string_equal(e.type, want);
        snprintf(want, sizeof want, "%d", i);
        assert_string_equal(e.id, want);
        snprintf(want, sizeof want, "%d", i * 7);
        assert_string_equal(e.data, want);
    }
    assert_int_equal(ah_sse_next(p, &e), 0);
    ah_sse_free(p);
    free(s);
}

/* A line far above the shrink size (a Responses closing event repeating a long answer):
 * once it is consumed the buffer goes back to its first size, and what follows still
 * parses, including a block that is pending while ah_sse_next finds nothing more (its
 * data still points into the buffer, which must stay) and one split after a CR. */
static void long_line_then_more_events(void **state)
{
    (void)state;
    enum { BIG = 600 * 1024 };
    char *big = malloc(BIG + 16);
    assert_non_null(big);
    memcpy(big, "data: ", 6);
    for (size_t i = 6; i < BIG; i++)
        big[i] = (char)('a' + i % 26);
    ah_sse *p = ah_sse_new(NULL);
    assert_non_null(p);
    ah_sse_event e;
    for (int round = 0; round < 3; round++) {
        /* the whole event in one feed; then it is consumed and the buffer idle */
        assert_int_equal(ah_sse_feed(p, big, BIG), AH_OK);
        assert_int_equal(ah_sse_feed(p, round == 2 ? "\r" : "\n", 1), AH_OK);
        assert_int_equal(ah_sse_next(p, &e), 0); /* pending: data refers to the buffer */
        assert_int_equal(ah_sse_feed(p, round == 2 ? "\n\r\n" : "\n", round == 2 ? 3 : 1),
                         AH_OK);
        assert_int_equal(ah_sse_next(p, &e), 1);
        assert_int_equal(e.data_len, BIG - 6);
        assert_memory_equal(e.data, big + 6, BIG - 6);
        assert_int_equal(ah_sse_next(p, &e), 0); /* all consumed: the buffer shrinks */
        /* a small event split over feeds, after the shrink */
        assert_int_equal(ah_sse_feed(p, "id: 7\nda", 8), AH_OK);
        assert_int_equal(ah_sse_next(p, &e), 0);
        assert_int_equal(ah_sse_feed(p, "ta: x\n\n", 7), AH_OK);
        assert_int_equal(ah_sse_next(p, &e), 1);
        assert_string_equal(e.data, "x");
        assert_string_equal(e.id, "7");
        assert_int_equal(ah_sse_next(p, &e), 0);
    }
    assert_int_equal(ah_sse_status(p), AH_OK);
    ah_sse_free(p);
    free(big);
}

static void event_split_over_thousands_of_feeds(void **state)
{
    (void)state;
    enum { LINE = 6000 };
    char *s = malloc(2 * LINE + 64);
    assert_non_null(s);
    size_t n = 0;
    n += (size_t)sprintf(s + n, "event: big\ndata: ");
    for (int i = 0; i < LINE; i++)
        s[n++] = (char)('a' + i % 26);
    n += (size_t)sprintf(s + n, "\r\ndata: ");
    for (int i = 0; i < LINE; i++)
        s[n++] = (char)('A' + i % 26);
    n += (size_t)sprintf(s + n, "\r\n\r\n");

    for (size_t step = 1; step <= 3; step++) {
        evlist l = parse_steps(NULL, s, n, step);
        assert_int_equal(l.st, AH_OK);
        assert_int_equal(l.n, 1);
        assert_string_equal(l.v[0].type, "big");
        assert_int_equal(l.v[0].data_len, 2 * LINE + 1);
        for (int i = 0; i < LINE; i++) {
            assert_int_equal(l.v[0].data[i], 'a' + i % 26);
            assert_int_equal(l.v[0].data[LINE + 1 + i], 'A' + i % 26);
        }
        assert_int_equal(l.v[0].data[LINE], '\n');
        evlist_free(&l);
    }
    free(s);
}

/* ---- random streams against a naive reference ---------------------------------------
 */

static void ref_emit(void *ud, const ah_sse_event *e)
{
    evlist_push(ud, e);
}

static evlist reference_parse(const char *s, size_t n)
{
    evlist out = {0};
    assert_true(sse_ref_parse(s, n, ref_emit, &out) >= 0);
    out.st = AH_OK;
    return out;
}

static uint32_t rng_next(uint64_t *s)
{
    *s = *s * 6364136223846793005ULL + 1442695040888963407ULL;
    return (uint32_t)(*s >> 33);
}

static void random_streams_match_reference(void **state)
{
    (void)state;
    static const char *const atoms[] = {
        "data", "data:", "data: ", "event: ",      "id: ",  "id:", "retry: ", "retry:",
        ":",    " ",     "x",      "yz",           "1",     "42",  "\r",      "\n",
        "\r\n", "\n\n",  "\0",     "\xEF\xBB\xBF", "event", "id",  "foo: ",   "\r\r"};
    static const size_t atom_len[] = {4, 5, 6, 7, 4, 3, 7, 6, 1, 1, 1, 2,
                                      1, 2, 1, 1, 2, 2, 1, 3, 5, 2, 5, 2};
    uint64_t seed = 12345;
    char s[512];
    for (int iter = 0; iter < 3000; iter++) {
        size_t n = 0;
        int atoms_n = (int)(rng_next(&seed) % 60);
        for (int a = 0; a < atoms_n; a++) {
            size_t k = rng_next(&seed) % (sizeof atom_len / sizeof atom_len[0]);
            if (n + atom_len[k] > sizeof s)
                break;
            memcpy(s + n, atoms[k], atom_len[k]);
            n += atom_len[k];
        }
        evlist want = reference_parse(s, n);
        evlist whole = parse_steps(NULL, s, n, 0);
        assert_same(&want, &whole, "random whole");
        evlist bytes = parse_steps(NULL, s, n, 1);
        assert_same(&want, &bytes, "random bytes");
        for (size_t k = 0; k <= n; k++)
            check_split(s, n, k, &want, "random");
        evlist_free(&want);
        evlist_free(&whole);
        evlist_free(&bytes);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(fixtures_are_split_invariant),
        cmocka_unit_test(line_ends_lf_cr_crlf_mixed),
        cmocka_unit_test(crlf_split_across_feeds),
        cmocka_unit_test(multi_line_data),
        cmocka_unit_test(comments_are_ignored),
        cmocka_unit_test(event_type),
        cmocka_unit_test(id_persists_and_resets),
        cmocka_unit_test(retry_field),
        cmocka_unit_test(bom_skipped_once),
        cmocka_unit_test(no_colon_and_unknown_fields),
        cmocka_unit_test(one_leading_space_stripped),
        cmocka_unit_test(unterminated_final_event_not_dispatched),
        cmocka_unit_test(empty_data_not_dispatched),
        cmocka_unit_test(embedded_nul_in_data),
        cmocka_unit_test(oversize_line_is_sticky_error),
        cmocka_unit_test(oversize_event_is_sticky_error),
        cmocka_unit_test(null_and_misuse),
        cmocka_unit_test(many_events_in_one_feed),
        cmocka_unit_test(event_split_over_thousands_of_feeds),
        cmocka_unit_test(long_line_then_more_events),
        cmocka_unit_test(random_streams_match_reference),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
