/* event_log.h - every event of a run, as JSON lines, for the integration tests.
 *
 * The harnesses of test_worker.c, test_continuation.c and test_resume.c record each event
 * their worker emits with event_log_add() and ask for them by type. Header-only: each test
 * is its own program.
 */
#ifndef AH_TEST_EVENT_LOG_H
#define AH_TEST_EVENT_LOG_H

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agenthost.h"

typedef struct event_log {
    char **lines; /* ah_event_to_json of each event, in order */
    size_t n, cap;
} event_log;

static void event_log_add(event_log *l, const ah_event *ev)
{
    char *json = ah_event_to_json(ev);
    assert_non_null(json);
    if (l->n == l->cap) {
        l->cap = l->cap ? l->cap * 2 : 64;
        l->lines = realloc(l->lines, l->cap * sizeof *l->lines);
        assert_non_null(l->lines);
    }
    l->lines[l->n++] = json;
}

static void event_log_free(event_log *l)
{
    for (size_t i = 0; i < l->n; i++)
        free(l->lines[i]);
    free(l->lines);
    *l = (event_log){0};
}

/* Whether line i is an event of this type. */
static int event_log_is(const event_log *l, size_t i, const char *type)
{
    char needle[64];
    snprintf(needle, sizeof needle, "{\"type\":\"%s\"", type);
    return strncmp(l->lines[i], needle, strlen(needle)) == 0;
}

static size_t event_log_count(const event_log *l, const char *type)
{
    size_t n = 0;
    for (size_t i = 0; i < l->n; i++)
        n += event_log_is(l, i, type);
    return n;
}

/* The nth (0-based) event of a type, parsed (the caller deletes it), or NULL. */
static cJSON *event_log_find(const event_log *l, const char *type, size_t nth)
{
    for (size_t i = 0; i < l->n; i++)
        if (event_log_is(l, i, type) && nth-- == 0)
            return cJSON_Parse(l->lines[i]);
    return NULL;
}

#endif
