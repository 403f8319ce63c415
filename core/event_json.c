/* event_json.c - every event type encodes to one JSON object and decodes back unchanged
 * (round-trip tests). Field names are the documented ones (docs/lua.md, "Events"),
 * snake_case; an absent error or a status of 0 encodes as null. A decoded event lives in an ah_event_box that owns its strings.
 *
 * Invariant: the encoder only writes what the typed event holds; events never carry
 * request bodies or credentials, and error messages are already redacted (error.c). */
#include "internal.h"

#include "agenthost/event.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

struct ah_event_box {
    ah_event ev;
    ah_error err; /* storage for ev.u.*.error */
    char *strings[8]; /* run_id and the event's strings, in decoding order */
    int n_strings;
};

/* ---- encoding: a visitor sink that builds a cJSON object ---------------------------- */

typedef struct jsink {
    cJSON *o;
    int failed; /* an allocation failed somewhere */
} jsink;

static void check(jsink *j, const cJSON *added)
{
    if (!added)
        j->failed = 1;
}

static void j_str(void *ud, const char *key, const char *s, size_t len)
{
    jsink *j = ud;
    if (!s) {
        check(j, cJSON_AddNullToObject(j->o, key));
        return;
    }
    /* A delta is not NUL-terminated: copy exactly len bytes; JSON Lines stay valid
     * UTF-8 whatever a string held (invalid bytes become U+FFFD). */
    char *t = ah__utf8_dup(s, len, NULL);
    if (!t) {
        j->failed = 1;
        return;
    }
    check(j, cJSON_AddStringToObject(j->o, key, t));
    free(t);
}

static void j_num(void *ud, const char *key, int64_t v)
{
    jsink *j = ud;
    check(j, cJSON_AddNumberToObject(j->o, key, (double)v));
}

static void j_bool(void *ud, const char *key, int v)
{
    jsink *j = ud;
    check(j, cJSON_AddBoolToObject(j->o, key, v != 0));
}

static void j_null(void *ud, const char *key)
{
    jsink *j = ud;
    check(j, cJSON_AddNullToObject(j->o, key));
}

static void j_error(void *ud, const char *key, const ah_error *e)
{
    jsink *j = ud;
    if (!e) {
        j_null(ud, key);
        return;
    }
    jsink inner = {cJSON_CreateObject(), 0};
    if (!inner.o) {
        j->failed = 1;
        return;
    }
    cJSON_AddItemToObject(j->o, key, inner.o);
    j_str(&inner, "kind", ah_error_kind_name(e->kind), strlen(ah_error_kind_name(e->kind)));
    if (e->status)
        j_num(&inner, "status", e->status);
    else
        j_null(&inner, "status");
    j_str(&inner, "message", e->message, strlen(e->message));
    if (e->provider_type[0])
        j_str(&inner, "provider_type", e->provider_type, strlen(e->provider_type));
    else
        j_null(&inner, "provider_type");
    if (e->retry_after_ms >= 0)
        j_num(&inner, "retry_after_ms", e->retry_after_ms);
    else
        j_null(&inner, "retry_after_ms");
    if (e->category[0]) /* a refusal's category; absent otherwise */
        j_str(&inner, "category", e->category, strlen(e->category));
    j->failed |= inner.failed;
}

static void j_fraction(void *ud, const char *key, double v)
{
    jsink *j = ud;
    check(j, cJSON_AddNumberToObject(j->o, key, v));
}

static const ah_event_fields json_fields = {j_str,  j_num,   j_bool,
                                            j_null, j_error, j_fraction};

char *ah_event_to_json(const ah_event *ev)
{
    if (!ev || (unsigned)ev->type >= (unsigned)AH_EV_COUNT_)
        return NULL;
    jsink j = {cJSON_CreateObject(), 0};
    if (!j.o)
        return NULL;
    ah_event_visit(ev, &json_fields, &j);
    char *out = j.failed ? NULL : cJSON_PrintUnformatted(j.o);
    cJSON_Delete(j.o);
    return out;
}

/* ---- decoding ------------------------------------------------------------------------ */

typedef struct reader {
    const cJSON *o;
    char *err;
    size_t errsize;
    int failed;
} reader;

static const cJSON *field(reader *r, const char *key)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(r->o, key);
    if (!v && !r->failed) {
        ah__bufprintf(r->err, r->errsize, "event: missing field '%s'", key);
        r->failed = 1;
    }
    return v;
}

static int64_t get_int(reader *r, const char *key)
{
    const cJSON *v = field(r, key);
    if (!v)
        return 0;
    /* Integers only, within the range a double holds exactly: a cast of 1e300 to
     * int64_t would be undefined behaviour. */
    if (!cJSON_IsNumber(v) || v->valuedouble != floor(v->valuedouble) ||
        fabs(v->valuedouble) > 9007199254740992.0) {
        if (!r->failed)
            ah__bufprintf(r->err, r->errsize, "event: field '%s' must be a number", key);
        r->failed = 1;
        return 0;
    }
    return (int64_t)v->valuedouble;
}

/* A NUM field: any finite number, or null (NaN) */
static double get_num(reader *r, const char *key)
{
    const cJSON *v = field(r, key);
    if (!v || cJSON_IsNull(v))
        return NAN;
    if (!cJSON_IsNumber(v)) {
        if (!r->failed)
            ah__bufprintf(r->err, r->errsize, "event: field '%s' must be a number or null",
                          key);
        r->failed = 1;
        return NAN;
    }
    return v->valuedouble;
}

static int get_status(reader *r, const char *key)
{
    const cJSON *v = field(r, key);
    if (!v || cJSON_IsNull(v))
        return 0;
    if (!cJSON_IsNumber(v)) {
        if (!r->failed)
            ah__bufprintf(r->err, r->errsize, "event: field '%s' must be a number or null",
                          key);
        r->failed = 1;
        return 0;
    }
    return v->valueint;
}

/* Returns the string (borrowed from the cJSON tree) or NULL for JSON null. */
static const char *get_str(reader *r, const char *key, int nullable)
{
    const cJSON *v = field(r, key);
    if (!v)
        return NULL;
    if (cJSON_IsNull(v) && nullable)
        return NULL;
    if (!cJSON_IsString(v)) {
        if (!r->failed)
            ah__bufprintf(r->err, r->errsize, "event: field '%s' must be a string", key);
        r->failed = 1;
        return NULL;
    }
    return v->valuestring;
}

/* Match a name against a name table generated from an X-macro; -1 if unknown. */
static int get_enum(reader *r, const char *key, const char *(*name_of)(int), int count)
{
    const char *s = get_str(r, key, 0);
    if (!s)
        return 0;
    for (int i = 0; i < count; i++)
        if (strcmp(s, name_of(i)) == 0)
            return i;
    if (!r->failed)
        ah__bufprintf(r->err, r->errsize, "event: unknown %s '%.40s'", key, s);
    r->failed = 1;
    return 0;
}

#define ENUM_ADAPTER(fn, type)                                                            \
    static const char *fn##_i(int v)                                                      \
    {                                                                                     \
        return fn((type)v);                                                               \
    }
ENUM_ADAPTER(ah_event_type_name, ah_event_type)
ENUM_ADAPTER(ah_wait_source_name, ah_wait_source)
ENUM_ADAPTER(ah_giveup_reason_name, ah_giveup_reason)
ENUM_ADAPTER(ah_run_outcome_name, ah_run_outcome)
ENUM_ADAPTER(ah_tool_outcome_name, ah_tool_outcome)
ENUM_ADAPTER(ah_cont_mode_name, ah_cont_mode)
ENUM_ADAPTER(ah_error_kind_name, ah_error_kind)

/* Enum counts by the tag the event list names them with (AH_EVENT_MAP's ENUM arg) */
enum {
    COUNT_tool_outcome = AH_TOOL_COUNT_,
    COUNT_wait_source = AH_WAIT_COUNT_,
    COUNT_giveup_reason = AH_GIVEUP_COUNT_,
    COUNT_run_outcome = AH_OUTCOME_COUNT_,
    COUNT_cont_mode = AH_CONT_COUNT_,
};

/* A copy of s that lives with the box (NULL for NULL; fails the read when out of memory) */
static char *keep(reader *r, ah_event_box *b, const char *s)
{
    if (!s)
        return NULL;
    if (b->n_strings == (int)(sizeof b->strings / sizeof b->strings[0]) ||
        !(b->strings[b->n_strings] = ah__strdup(s))) {
        if (!r->failed)
            ah__bufprintf(r->err, r->errsize, "event: out of memory");
        r->failed = 1;
        return NULL;
    }
    return b->strings[b->n_strings++];
}

/* Decodes an error member into b->err; returns &b->err, or NULL for null. */
static const ah_error *get_error(reader *r, ah_event_box *b, const char *key)
{
    const cJSON *v = field(r, key);
    if (!v || cJSON_IsNull(v))
        return NULL;
    if (!cJSON_IsObject(v)) {
        if (!r->failed)
            ah__bufprintf(r->err, r->errsize, "event: field '%s' must be an object or null",
                          key);
        r->failed = 1;
        return NULL;
    }
    reader er = {v, r->err, r->errsize, 0};
    ah_error_clear(&b->err);
    b->err.kind = (ah_error_kind)get_enum(&er, "kind", ah_error_kind_name_i, AH_EK_COUNT_);
    b->err.status = get_status(&er, "status");
    const char *msg = get_str(&er, "message", 0);
    const char *pt = get_str(&er, "provider_type", 1);
    const cJSON *ra = field(&er, "retry_after_ms");
    if (ra && cJSON_IsNumber(ra) && ra->valuedouble >= -1 && ra->valuedouble <= 9.0e15)
        b->err.retry_after_ms = (int64_t)ra->valuedouble;
    if (msg)
        ah__bufprintf(b->err.message, sizeof b->err.message, "%s", msg);
    if (pt)
        ah__bufprintf(b->err.provider_type, sizeof b->err.provider_type, "%s", pt);
    const cJSON *cat = cJSON_GetObjectItemCaseSensitive(v, "category"); /* optional */
    if (cat && cJSON_IsString(cat))
        ah__bufprintf(b->err.category, sizeof b->err.category, "%s", cat->valuestring);
    if (er.failed)
        r->failed = 1;
    return &b->err;
}

/* One statement per field kind (agenthost/event.h, AH_EVENT_MAP), decoding into p */
#define D_INT(m, key, arg) p->m = (int)get_int(&r, key);
#define D_I64(m, key, arg) p->m = get_int(&r, key);
#define D_BOOL(m, key, arg)                                                               \
    {                                                                                     \
        const cJSON *d = field(&r, key);                                                  \
        p->m = d && cJSON_IsTrue(d);                                                      \
    }
#define D_STR(m, key, arg) p->m = keep(&r, b, get_str(&r, key, 1));
#define D_TEXT(m, key, arg)                                                               \
    p->m = keep(&r, b, get_str(&r, key, 0));                                              \
    p->len = p->m ? strlen(p->m) : 0;
#define D_STATUS(m, key, arg) p->m = get_status(&r, key);
#define D_ERROR(m, key, arg) p->m = get_error(&r, b, key);
#define D_NUM(m, key, arg) p->m = get_num(&r, key);
#define D_ENUM(m, key, arg)                                                               \
    p->m = (ah_##arg)get_enum(&r, key, ah_##arg##_name_i, COUNT_##arg);
#define D_RUN_ID(m, key, arg) p->m = ev->run_id;
#define D_FIELD(kind, m, arg) D_##kind(m, #m, arg)
#define D_CASE(name, s, member, own, ...)                                                 \
    case AH_EV_##name: {                                                                  \
        struct ah__ev_##member *p = &ev->u.member;                                        \
        __VA_ARGS__                                                                       \
        break;                                                                            \
    }

ah_event_box *ah_event_from_json(const char *json, size_t len, char *err, size_t errsize)
{
    char dummy[8];
    if (!err) {
        err = dummy;
        errsize = sizeof dummy;
    }
    err[0] = '\0';
    cJSON *o = cJSON_ParseWithLength(json, len);
    if (!o || !cJSON_IsObject(o)) {
        ah__bufprintf(err, errsize, "event: not a JSON object");
        cJSON_Delete(o);
        return NULL;
    }
    ah_event_box *b = calloc(1, sizeof *b);
    if (!b) {
        ah__bufprintf(err, errsize, "event: out of memory");
        cJSON_Delete(o);
        return NULL;
    }
    reader r = {o, err, errsize, 0};
    ah_event *ev = &b->ev;
    ev->type = (ah_event_type)get_enum(&r, "type", ah_event_type_name_i, AH_EV_COUNT_);
    if (r.failed)
        goto fail;
    /* run_id and ts_ms are on every event this library writes; a line written before
     * they existed decodes with NULL / 0 */
    if (cJSON_GetObjectItemCaseSensitive(o, "run_id"))
        ev->run_id = keep(&r, b, get_str(&r, "run_id", 1));
    if (cJSON_GetObjectItemCaseSensitive(o, "ts_ms"))
        ev->ts_ms = get_int(&r, "ts_ms");
    switch (ev->type) {
        AH_EVENT_MAP(D_CASE, D_FIELD)
    case AH_EV_COUNT_:
        break;
    }
    if (r.failed)
        goto fail;
    cJSON_Delete(o);
    return b;
fail:
    cJSON_Delete(o);
    ah_event_box_free(b);
    return NULL;
}

const ah_event *ah_event_box_get(const ah_event_box *b)
{
    return b ? &b->ev : NULL;
}

void ah_event_box_free(ah_event_box *b)
{
    if (!b)
        return;
    for (size_t i = 0; i < sizeof b->strings / sizeof b->strings[0]; i++)
        free(b->strings[i]);
    free(b);
}
