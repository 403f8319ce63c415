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
    char *strings[4]; /* [3]: run_id */
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
    j->failed |= inner.failed;
}

static const ah_event_fields json_fields = {j_str, j_num, j_bool, j_null, j_error};

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

static int get_status(reader *r)
{
    const cJSON *v = field(r, "status");
    if (!v || cJSON_IsNull(v))
        return 0;
    if (!cJSON_IsNumber(v)) {
        if (!r->failed)
            ah__bufprintf(r->err, r->errsize, "event: field 'status' must be a number or null");
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

static char *keep(ah_event_box *b, int slot, const char *s)
{
    if (!s)
        return NULL;
    b->strings[slot] = ah__strdup(s);
    return b->strings[slot];
}

/* Decodes the "error" member into b->err; returns &b->err, or NULL for null. */
static const ah_error *get_error(reader *r, ah_event_box *b)
{
    const cJSON *v = field(r, "error");
    if (!v || cJSON_IsNull(v))
        return NULL;
    if (!cJSON_IsObject(v)) {
        if (!r->failed)
            ah__bufprintf(r->err, r->errsize, "event: field 'error' must be an object or null");
        r->failed = 1;
        return NULL;
    }
    reader er = {v, r->err, r->errsize, 0};
    ah_error_clear(&b->err);
    b->err.kind = (ah_error_kind)get_enum(&er, "kind", ah_error_kind_name_i, AH_EK_COUNT_);
    b->err.status = get_status(&er);
    const char *msg = get_str(&er, "message", 0);
    const char *pt = get_str(&er, "provider_type", 1);
    const cJSON *ra = field(&er, "retry_after_ms");
    if (ra && cJSON_IsNumber(ra) && ra->valuedouble >= -1 && ra->valuedouble <= 9.0e15)
        b->err.retry_after_ms = (int64_t)ra->valuedouble;
    if (msg)
        ah__bufprintf(b->err.message, sizeof b->err.message, "%s", msg);
    if (pt)
        ah__bufprintf(b->err.provider_type, sizeof b->err.provider_type, "%s", pt);
    if (er.failed)
        r->failed = 1;
    return &b->err;
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
        ev->run_id = keep(b, 3, get_str(&r, "run_id", 1));
    if (cJSON_GetObjectItemCaseSensitive(o, "ts_ms"))
        ev->ts_ms = get_int(&r, "ts_ms");
    switch (ev->type) {
    case AH_EV_RUN_START:
        ev->u.run_start.run_id = ev->run_id;
        break;
    case AH_EV_LLM_CALL_START:
        ev->u.llm_call_start.llm_call = (int)get_int(&r, "llm_call");
        ev->u.llm_call_start.attempt = (int)get_int(&r, "attempt");
        ev->u.llm_call_start.continuation = (int)get_int(&r, "continuation");
        break;
    case AH_EV_TEXT_DELTA:
    case AH_EV_REASONING_DELTA: {
        ev->u.delta.llm_call = (int)get_int(&r, "llm_call");
        ev->u.delta.block = (int)get_int(&r, "block");
        const char *t = keep(b, 0, get_str(&r, "text", 0));
        ev->u.delta.text = t;
        ev->u.delta.len = t ? strlen(t) : 0;
        break;
    }
    case AH_EV_TOOL_CALL_START:
        ev->u.tool_call_start.llm_call = (int)get_int(&r, "llm_call");
        ev->u.tool_call_start.id = keep(b, 0, get_str(&r, "id", 1));
        ev->u.tool_call_start.name = keep(b, 1, get_str(&r, "name", 1));
        break;
    case AH_EV_TOOL_CALL_END: {
        ev->u.tool_call_end.id = keep(b, 0, get_str(&r, "id", 1));
        ev->u.tool_call_end.name = keep(b, 1, get_str(&r, "name", 1));
        ev->u.tool_call_end.outcome =
            (ah_tool_outcome)get_enum(&r, "outcome", ah_tool_outcome_name_i, AH_TOOL_COUNT_);
        const cJSON *d = field(&r, "duplicate");
        ev->u.tool_call_end.duplicate = d && cJSON_IsTrue(d);
        ev->u.tool_call_end.attempts = (int)get_int(&r, "attempts");
        break;
    }
    case AH_EV_LLM_RETRY:
        ev->u.llm_retry.llm_call = (int)get_int(&r, "llm_call");
        ev->u.llm_retry.failed_attempt = (int)get_int(&r, "failed_attempt");
        ev->u.llm_retry.max_attempts = (int)get_int(&r, "max_attempts");
        ev->u.llm_retry.wait_ms = get_int(&r, "wait_ms");
        ev->u.llm_retry.wait_source =
            (ah_wait_source)get_enum(&r, "wait_source", ah_wait_source_name_i, AH_WAIT_COUNT_);
        ev->u.llm_retry.elapsed_ms = get_int(&r, "elapsed_ms");
        ev->u.llm_retry.status = get_status(&r);
        ev->u.llm_retry.error = get_error(&r, b);
        break;
    case AH_EV_LLM_PACED:
        ev->u.llm_paced.llm_call = (int)get_int(&r, "llm_call");
        ev->u.llm_paced.wait_ms = get_int(&r, "wait_ms");
        ev->u.llm_paced.limit = keep(b, 0, get_str(&r, "limit", 1));
        break;
    case AH_EV_LLM_GAVE_UP:
        ev->u.llm_gave_up.llm_call = (int)get_int(&r, "llm_call");
        ev->u.llm_gave_up.attempts = (int)get_int(&r, "attempts");
        ev->u.llm_gave_up.elapsed_ms = get_int(&r, "elapsed_ms");
        ev->u.llm_gave_up.status = get_status(&r);
        ev->u.llm_gave_up.error = get_error(&r, b);
        ev->u.llm_gave_up.reason =
            (ah_giveup_reason)get_enum(&r, "reason", ah_giveup_reason_name_i, AH_GIVEUP_COUNT_);
        break;
    case AH_EV_LLM_CONTINUATION:
        ev->u.llm_continuation.llm_call = (int)get_int(&r, "llm_call");
        ev->u.llm_continuation.continuation = (int)get_int(&r, "continuation");
        ev->u.llm_continuation.max_continuations = (int)get_int(&r, "max_continuations");
        ev->u.llm_continuation.committed_blocks = (int)get_int(&r, "committed_blocks");
        ev->u.llm_continuation.discarded_blocks = (int)get_int(&r, "discarded_blocks");
        ev->u.llm_continuation.discarded_bytes = get_int(&r, "discarded_bytes");
        ev->u.llm_continuation.mode =
            (ah_cont_mode)get_enum(&r, "mode", ah_cont_mode_name_i, AH_CONT_COUNT_);
        ev->u.llm_continuation.reason = keep(b, 0, get_str(&r, "reason", 1));
        break;
    case AH_EV_LLM_CALL_END:
        ev->u.llm_call_end.llm_call = (int)get_int(&r, "llm_call");
        ev->u.llm_call_end.stop_reason = keep(b, 0, get_str(&r, "stop_reason", 1));
        ev->u.llm_call_end.input_tokens = get_int(&r, "input_tokens");
        ev->u.llm_call_end.output_tokens = get_int(&r, "output_tokens");
        ev->u.llm_call_end.trimmed_bytes = get_int(&r, "trimmed_bytes");
        break;
    case AH_EV_BUDGET_EXHAUSTED:
        ev->u.budget_exhausted.budget = keep(b, 0, get_str(&r, "budget", 1));
        ev->u.budget_exhausted.used = get_int(&r, "used");
        ev->u.budget_exhausted.limit = get_int(&r, "limit");
        break;
    case AH_EV_RUN_END:
        ev->u.run_end.outcome =
            (ah_run_outcome)get_enum(&r, "outcome", ah_run_outcome_name_i, AH_OUTCOME_COUNT_);
        ev->u.run_end.error = get_error(&r, b);
        break;
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
