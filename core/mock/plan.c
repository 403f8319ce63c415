/* plan.c - the mock's fault plan: JSON text -> validated steps (docs/mock.md).
 *
 * A plan is a JSON array of steps, or {"steps": [...], "then": STEP} where "then" is
 * applied to every request once the steps are used up (default: ok). A step has exactly
 * one kind field (ok, status, reset, cut_after_events, stall_after_events,
 * malformed_event_after, error_event_after) or only delay_headers_ms, plus the fields
 * that kind allows. Validation is strict: an unknown or duplicate field, a wrong type, a
 * negative number or a field the kind does not take is an error naming the step (1-based,
 * as a Lua table would count it) and the field. Nothing of a rejected plan survives. */
#include "mock_internal.h"

#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { MAX_TEXT_DELTAS = 10000000, MAX_MS = 86400000 };

const char *ah__mock_step_kind_name(ah__mock_step_kind k)
{
    static const char *const names[] = {
#define X(name, s) s,
        AH__MOCK_STEP_KIND_MAP(X)
#undef X
    };
    return (unsigned)k < (unsigned)AH__MOCK_KIND_COUNT_ ? names[k] : "unknown";
}

/* Which step kinds take a field: one bit per ah__mock_step_kind. */
#define K(kind)    (1u << AH__MOCK_##kind)
#define ALL_KINDS  ((1u << AH__MOCK_KIND_COUNT_) - 1)
#define TEXT_KINDS (K(OK) | K(DELAY) | K(CUT) | K(STALL) | K(MALFORMED) | K(ERROR_EVENT))

typedef enum { F_TRUE, F_INT, F_STRING, F_OBJECT, F_ANY } field_type;

typedef struct field {
    const char *name;
    field_type type;
    int kind;         /* the step kind this field selects, or -1 */
    unsigned allowed; /* kinds that accept this field */
    long long min, max;
} field;

static const field fields[] = {
    {"ok", F_TRUE, AH__MOCK_OK, K(OK), 0, 0},
    {"status", F_INT, AH__MOCK_STATUS, K(STATUS), 200, 599},
    {"reset", F_TRUE, AH__MOCK_RESET, K(RESET), 0, 0},
    {"cut_after_events", F_INT, AH__MOCK_CUT, K(CUT), 0, LLONG_MAX},
    {"stall_after_events", F_INT, AH__MOCK_STALL, K(STALL), 0, LLONG_MAX},
    {"malformed_event_after", F_INT, AH__MOCK_MALFORMED, K(MALFORMED), 0, LLONG_MAX},
    {"error_event_after", F_INT, AH__MOCK_ERROR_EVENT, K(ERROR_EVENT), 0, LLONG_MAX},
    {"delay_headers_ms", F_INT, -1, ALL_KINDS, 0, MAX_MS},
    {"headers", F_OBJECT, -1, ALL_KINDS & ~K(RESET), 0, 0},
    {"body", F_ANY, -1, K(STATUS), 0, 0},
    {"error_type", F_STRING, -1, K(STATUS) | K(ERROR_EVENT), 0, 0},
    {"message", F_STRING, -1, K(STATUS) | K(ERROR_EVENT), 0, 0},
    {"stall_ms", F_INT, -1, K(STALL), 0, MAX_MS},
    {"tool_calls", F_ANY, -1, TEXT_KINDS, 1, AH__MOCK_MAX_TOOL_CALLS},
    {"text", F_STRING, -1, TEXT_KINDS, 0, 0},
    {"text_deltas", F_INT, -1, TEXT_KINDS, 1, MAX_TEXT_DELTAS},
    {"delta_bytes", F_INT, -1, TEXT_KINDS, 1, 1 << 20},
    {"restate", F_ANY, -1, TEXT_KINDS, 0, 0},
    {"refuse_prefill", F_TRUE, -1, TEXT_KINDS, 0, 0},
    {"tool_args", F_ANY, -1, TEXT_KINDS, 0, 0},
    {"unclean_close_after_end", F_ANY, -1, K(OK) | K(DELAY), 0, 0},
    {"extra_after_end", F_ANY, -1, K(OK) | K(DELAY), 0, 0},
    {"content_type", F_STRING, -1, ALL_KINDS & ~K(RESET), 0, 0},
    {"json_body", F_TRUE, -1, K(OK) | K(DELAY), 0, 0},
    {"body_fault", F_STRING, -1, K(STATUS), 0, 0},
    {"invalid_utf8", F_TRUE, -1, K(OK) | K(DELAY), 0, 0},
    {"gzip", F_TRUE, -1, K(OK) | K(DELAY), 0, 0},
    {"repeat_events", F_INT, -1, TEXT_KINDS, 0, LLONG_MAX},
    {"stop_reason", F_STRING, -1, TEXT_KINDS, 0, 0},
    {"refusal_category", F_STRING, -1, TEXT_KINDS, 0, 0},
    {"spend_limit", F_TRUE, -1, K(STATUS), 0, 0},
    {"context_exceeded", F_TRUE, -1, K(STATUS), 0, 0},
};
enum { NFIELDS = sizeof fields / sizeof fields[0] };

/* The field that names a kind, for messages: "a 'cut_after_events' step". */
static const char *kind_field(ah__mock_step_kind k)
{
    if (k == AH__MOCK_DELAY)
        return "delay_headers_ms";
    for (int i = 0; i < NFIELDS; i++)
        if (fields[i].kind == (int)k)
            return fields[i].name;
    return "?";
}

static int field_index(const char *name)
{
    for (int i = 0; i < NFIELDS; i++)
        if (strcmp(name, fields[i].name) == 0)
            return i;
    return -1;
}

static void step_free(ah__mock_step *s)
{
    for (size_t i = 0; i < s->header_count; i++) {
        free(s->headers[i].name);
        free(s->headers[i].value);
    }
    free(s->headers);
    free(s->body);
    free(s->error_type);
    free(s->message);
    free(s->text);
    free(s->refusal_category);
    free(s->tool_args);
    free(s->tool_calls_json);
    free(s->extra);
    free(s->content_type);
    memset(s, 0, sizeof *s);
}

void ah__mock_plan_free(ah__mock_plan *p)
{
    if (!p)
        return;
    for (size_t i = 0; i < p->count; i++)
        step_free(&p->steps[i]);
    free(p->steps);
    step_free(&p->then);
    free(p);
}

/* A list: a JSON array, or an empty object — what an empty Lua table (or any map type
 * of a language that cannot tell {} from []) is serialised as. */
static int is_list(const cJSON *v)
{
    return cJSON_IsArray(v) || (cJSON_IsObject(v) && !v->child);
}

/* Read a whole integer from a JSON number; 0 when it is not one. */
static int get_int(const cJSON *v, long long *out)
{
    if (!cJSON_IsNumber(v))
        return 0;
    double d = v->valuedouble;
    if (!isfinite(d) || d != floor(d) || fabs(d) > 9007199254740992.0)
        return 0;
    *out = (long long)d;
    return 1;
}

static int is_tchar(unsigned char c)
{
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
           (c && strchr("!#$%&'*+-.^_`|~", c));
}

static int parse_headers(const cJSON *obj, ah__mock_step *s, const char *where, char *err,
                         size_t errsize)
{
    size_t n = (size_t)cJSON_GetArraySize(obj);
    if (n == 0)
        return 0;
    s->headers = calloc(n, sizeof *s->headers);
    if (!s->headers) {
        ah__bufprintf(err, errsize, "%s: out of memory", where);
        return -1;
    }
    for (const cJSON *h = obj->child; h; h = h->next) {
        const char *name = h->string;
        if (!*name || strlen(name) > 256) {
            ah__bufprintf(err, errsize, "%s: header name '%.64s' is not valid", where,
                          name);
            return -1;
        }
        for (const char *c = name; *c; c++)
            if (!is_tchar((unsigned char)*c)) {
                ah__bufprintf(err, errsize, "%s: header name '%.64s' is not valid", where,
                              name);
                return -1;
            }
        ah__mock_header *hd = &s->headers[s->header_count];
        char num[64];
        const char *value = NULL;
        long long iv;
        if (cJSON_IsString(h)) {
            value = h->valuestring;
            for (const char *c = value; *c; c++)
                if (*c == '\r' || *c == '\n') {
                    ah__bufprintf(err, errsize,
                                  "%s: header '%.64s' value contains a line break", where,
                                  name);
                    return -1;
                }
        } else if (get_int(h, &iv)) {
            snprintf(num, sizeof num, "%lld", iv);
            value = num;
        } else if (cJSON_IsNumber(h) && isfinite(h->valuedouble)) {
            snprintf(num, sizeof num, "%.17g", h->valuedouble);
            value = num;
        } else if (cJSON_IsObject(h) && cJSON_GetArraySize(h) == 1 &&
                   strcmp(h->child->string, "date_in_seconds") == 0 &&
                   get_int(h->child, &iv)) {
            hd->date_in = iv;
        } else {
            ah__bufprintf(err, errsize,
                          "%s: header '%.64s' must be a string, a number or "
                          "{\"date_in_seconds\": N}",
                          where, name);
            return -1;
        }
        hd->name = ah__strdup(name);
        if (value)
            hd->value = ah__strdup(value);
        s->header_count++;
        if (!hd->name || (value && !hd->value)) {
            ah__bufprintf(err, errsize, "%s: out of memory", where);
            return -1;
        }
    }
    return 0;
}

static int set_string(char **dst, const char *src, const char *where, char *err,
                      size_t errsize)
{
    *dst = ah__strdup(src);
    if (!*dst) {
        ah__bufprintf(err, errsize, "%s: out of memory", where);
        return -1;
    }
    return 0;
}

/* tool_calls: N parallel calls of the tool the model picks (1-16), or the list of calls
 * the reply makes, [{"name": "x", "arguments": {...}}, ...] (arguments optional; an
 * empty list: no call). */
static int parse_tool_calls(const cJSON *v, ah__mock_step *s, const char *where, char *err,
                            size_t errsize)
{
    long long iv;
    if (get_int(v, &iv)) {
        if (iv < 1 || iv > AH__MOCK_MAX_TOOL_CALLS) {
            ah__bufprintf(err, errsize, "%s: field 'tool_calls' must be %s %d", where,
                          iv < 1 ? ">=" : "<=", iv < 1 ? 1 : AH__MOCK_MAX_TOOL_CALLS);
            return -1;
        }
        s->tool_calls = (size_t)iv;
        return 0;
    }
    if (!is_list(v)) {
        ah__bufprintf(err, errsize,
                      "%s: field 'tool_calls' must be a number of calls or a list of "
                      "{\"name\": ..., \"arguments\": {...}}",
                      where);
        return -1;
    }
    if (cJSON_GetArraySize(v) > AH__MOCK_MAX_TOOL_CALLS) {
        ah__bufprintf(err, errsize, "%s: field 'tool_calls' lists more than %d calls", where,
                      AH__MOCK_MAX_TOOL_CALLS);
        return -1;
    }
    int i = 0;
    for (const cJSON *c = cJSON_IsArray(v) ? v->child : NULL; c; c = c->next) {
        i++;
        if (!cJSON_IsObject(c)) {
            ah__bufprintf(err, errsize, "%s: tool_calls[%d] must be an object", where, i);
            return -1;
        }
        for (const cJSON *f = c->child; f; f = f->next) {
            if (strcmp(f->string, "name") != 0 && strcmp(f->string, "arguments") != 0) {
                ah__bufprintf(err, errsize,
                              "%s: tool_calls[%d]: unknown field '%.64s' (name, arguments)",
                              where, i, f->string);
                return -1;
            }
        }
        const cJSON *name = cJSON_GetObjectItemCaseSensitive(c, "name");
        const cJSON *args = cJSON_GetObjectItemCaseSensitive(c, "arguments");
        if (!cJSON_IsString(name) || !name->valuestring[0]) {
            ah__bufprintf(err, errsize, "%s: tool_calls[%d]: 'name' must be a non-empty string",
                          where, i);
            return -1;
        }
        if (args && !cJSON_IsObject(args)) {
            ah__bufprintf(err, errsize, "%s: tool_calls[%d]: 'arguments' must be an object",
                          where, i);
            return -1;
        }
    }
    char *a = cJSON_IsArray(v) ? cJSON_PrintUnformatted(v) : NULL;
    s->tool_calls_json = ah__strdup(a ? a : "[]");
    cJSON_free(a);
    if (!s->tool_calls_json) {
        ah__bufprintf(err, errsize, "%s: out of memory", where);
        return -1;
    }
    return 0;
}

/* Parse one step object into *s. `where` is "plan step 3" or "plan step 'then'". */
static int parse_step(const cJSON *obj, ah__mock_step *s, const char *where, char *err,
                      size_t errsize)
{
    const cJSON *seen[NFIELDS] = {0};
    int kind = -1, kind_field_i = -1;

    memset(s, 0, sizeof *s);
    s->stall_ms = -1;
    if (!cJSON_IsObject(obj)) {
        ah__bufprintf(err, errsize, "%s: expected an object", where);
        return -1;
    }
    /* Pass 1: every field known, once, with the right type and range. */
    for (const cJSON *v = obj->child; v; v = v->next) {
        int fi = field_index(v->string);
        if (fi < 0) {
            ah__bufprintf(err, errsize, "%s: unknown field '%.64s'", where, v->string);
            return -1;
        }
        const field *f = &fields[fi];
        if (seen[fi]) {
            ah__bufprintf(err, errsize, "%s: duplicate field '%s'", where, f->name);
            return -1;
        }
        seen[fi] = v;
        long long iv = 0;
        switch (f->type) {
        case F_TRUE:
            if (!cJSON_IsTrue(v)) {
                ah__bufprintf(err, errsize, "%s: field '%s' must be true", where,
                              f->name);
                return -1;
            }
            break;
        case F_INT:
            if (!get_int(v, &iv)) {
                ah__bufprintf(err, errsize, "%s: field '%s' must be an integer", where,
                              f->name);
                return -1;
            }
            if (iv < f->min) {
                ah__bufprintf(err, errsize, "%s: field '%s' must be >= %lld", where,
                              f->name, f->min);
                return -1;
            }
            if (iv > f->max) {
                ah__bufprintf(err, errsize, "%s: field '%s' must be <= %lld", where,
                              f->name, f->max);
                return -1;
            }
            break;
        case F_STRING:
            if (!cJSON_IsString(v)) {
                ah__bufprintf(err, errsize, "%s: field '%s' must be a string", where,
                              f->name);
                return -1;
            }
            break;
        case F_OBJECT:
            if (!cJSON_IsObject(v)) {
                ah__bufprintf(err, errsize, "%s: field '%s' must be an object", where,
                              f->name);
                return -1;
            }
            break;
        case F_ANY:
            break;
        }
        if (f->kind >= 0) {
            if (kind >= 0) {
                ah__bufprintf(err, errsize, "%s: fields '%s' and '%s' cannot be combined",
                              where, fields[kind_field_i].name, f->name);
                return -1;
            }
            kind = f->kind;
            kind_field_i = fi;
        }
    }
    /* Pass 2: the kind, and the fields it takes. */
    if (kind < 0) {
        if (!seen[field_index("delay_headers_ms")]) { /* alone: a delayed ok */
            ah__bufprintf(err, errsize,
                          "%s: no step kind (expected one of 'ok', 'status', 'reset', "
                          "'delay_headers_ms', 'cut_after_events', 'stall_after_events', "
                          "'malformed_event_after', 'error_event_after')",
                          where);
            return -1;
        }
        kind = AH__MOCK_DELAY;
    }
    s->kind = (ah__mock_step_kind)kind;
    for (int i = 0; i < NFIELDS; i++) {
        if (seen[i] && !(fields[i].allowed & (1u << kind))) {
            ah__bufprintf(err, errsize, "%s: field '%s' is not allowed in a '%s' step",
                          where, fields[i].name, kind_field(s->kind));
            return -1;
        }
    }
    const cJSON *text_deltas = cJSON_GetObjectItemCaseSensitive(obj, "text_deltas");
    const cJSON *delta_bytes = cJSON_GetObjectItemCaseSensitive(obj, "delta_bytes");
    if (text_deltas && delta_bytes) {
        ah__bufprintf(err, errsize,
                      "%s: fields 'text_deltas' and 'delta_bytes' cannot be combined",
                      where);
        return -1;
    }
    /* Pass 3: copy the values out. */
    long long iv;
    const cJSON *v;
    if ((v = cJSON_GetObjectItemCaseSensitive(obj, "status")) && get_int(v, &iv))
        s->status = (int)iv;
    if ((v = cJSON_GetObjectItemCaseSensitive(obj, "delay_headers_ms")) &&
        get_int(v, &iv))
        s->delay_headers_ms = iv;
    if ((v = cJSON_GetObjectItemCaseSensitive(obj, "tool_calls")) &&
        parse_tool_calls(v, s, where, err, errsize) != 0)
        return -1;
    if ((v = cJSON_GetObjectItemCaseSensitive(obj, kind_field(s->kind))) &&
        s->kind >= AH__MOCK_CUT && get_int(v, &iv))
        s->after_events = iv;
    if ((v = cJSON_GetObjectItemCaseSensitive(obj, "stall_ms")) && get_int(v, &iv))
        s->stall_ms = iv;
    if ((v = cJSON_GetObjectItemCaseSensitive(obj, "repeat_events")) && get_int(v, &iv))
        s->repeat_events = iv;
    if (text_deltas && get_int(text_deltas, &iv))
        s->text_deltas = (size_t)iv;
    if (delta_bytes && get_int(delta_bytes, &iv))
        s->delta_bytes = (size_t)iv;
    if ((v = cJSON_GetObjectItemCaseSensitive(obj, "text")) &&
        set_string(&s->text, v->valuestring, where, err, errsize) != 0)
        return -1;
    if ((v = cJSON_GetObjectItemCaseSensitive(obj, "restate"))) {
        if (cJSON_IsTrue(v))
            s->restate = AH__MOCK_RESTATE_ALL;
        else if (cJSON_IsString(v) && strcmp(v->valuestring, "last_sentence") == 0)
            s->restate = AH__MOCK_RESTATE_LAST_SENTENCE;
        else if (!cJSON_IsFalse(v)) {
            ah__bufprintf(err, errsize,
                          "%s: field 'restate' must be true, false or \"last_sentence\"",
                          where);
            return -1;
        }
    }
    s->refuse_prefill = cJSON_GetObjectItemCaseSensitive(obj, "refuse_prefill") != NULL;
    s->spend_limit = cJSON_GetObjectItemCaseSensitive(obj, "spend_limit") != NULL;
    s->context_exceeded = cJSON_GetObjectItemCaseSensitive(obj, "context_exceeded") != NULL;
    if ((v = cJSON_GetObjectItemCaseSensitive(obj, "stop_reason"))) {
        static const char *const known[] = {"end_turn",   "tool_use",
                                            "max_tokens", "refusal",
                                            "pause_turn", "model_context_window_exceeded",
                                            NULL};
        size_t i = 0;
        while (known[i] && strcmp(known[i], v->valuestring) != 0)
            i++;
        if (!known[i]) {
            ah__bufprintf(err, errsize,
                          "%s: field 'stop_reason' must be one of end_turn, tool_use, "
                          "max_tokens, refusal, pause_turn, model_context_window_exceeded",
                          where);
            return -1;
        }
        s->stop_reason = known[i];
    }
    if ((v = cJSON_GetObjectItemCaseSensitive(obj, "refusal_category")) &&
        set_string(&s->refusal_category, v->valuestring, where, err, errsize) != 0)
        return -1;
    if ((v = cJSON_GetObjectItemCaseSensitive(obj, "tool_args"))) {
        /* A string is sent as is (any text, even invalid JSON); another value is
         * serialised. */
        if (cJSON_IsString(v)) {
            s->tool_args = ah__strdup(v->valuestring);
        } else {
            char *a = cJSON_PrintUnformatted(v);
            s->tool_args = a ? ah__strdup(a) : NULL;
            cJSON_free(a);
        }
        if (!s->tool_args) {
            ah__bufprintf(err, errsize, "%s: out of memory", where);
            return -1;
        }
    }
    if ((v = cJSON_GetObjectItemCaseSensitive(obj, "error_type")) &&
        set_string(&s->error_type, v->valuestring, where, err, errsize) != 0)
        return -1;
    if ((v = cJSON_GetObjectItemCaseSensitive(obj, "message")) &&
        set_string(&s->message, v->valuestring, where, err, errsize) != 0)
        return -1;
    if ((v = cJSON_GetObjectItemCaseSensitive(obj, "body"))) {
        char *body =
            cJSON_IsString(v) ? ah__strdup(v->valuestring) : cJSON_PrintUnformatted(v);
        if (!body) {
            ah__bufprintf(err, errsize, "%s: out of memory", where);
            return -1;
        }
        if (!cJSON_IsString(v)) { /* cJSON memory: move it to ours */
            char *copy = ah__strdup(body);
            cJSON_free(body);
            body = copy;
            if (!body) {
                ah__bufprintf(err, errsize, "%s: out of memory", where);
                return -1;
            }
        }
        s->body = body;
        s->body_len = strlen(body);
        s->has_body = 1;
    }
    if ((v = cJSON_GetObjectItemCaseSensitive(obj, "headers")) &&
        parse_headers(v, s, where, err, errsize) != 0)
        return -1;
    if ((v = cJSON_GetObjectItemCaseSensitive(obj, "unclean_close_after_end"))) {
        const char *mode = cJSON_IsTrue(v) ? "no_final_chunk"
                           : cJSON_IsString(v) ? v->valuestring
                                               : "";
        if (strcmp(mode, "no_final_chunk") == 0)
            s->unclean = AH__MOCK_UNCLEAN_NO_FINAL_CHUNK;
        else if (strcmp(mode, "reset") == 0)
            s->unclean = AH__MOCK_UNCLEAN_RESET;
        else if (strcmp(mode, "short_content_length") == 0)
            s->unclean = AH__MOCK_UNCLEAN_SHORT_CONTENT_LENGTH;
        else {
            ah__bufprintf(err, errsize,
                          "%s: field 'unclean_close_after_end' must be true, "
                          "\"no_final_chunk\", \"reset\" or \"short_content_length\"",
                          where);
            return -1;
        }
    }
    if ((v = cJSON_GetObjectItemCaseSensitive(obj, "extra_after_end"))) {
        if (cJSON_IsTrue(v)) {
            s->extra_default = 1;
        } else if (cJSON_IsString(v) && v->valuestring[0]) {
            if (set_string(&s->extra, v->valuestring, where, err, errsize) != 0)
                return -1;
            s->extra_len = strlen(s->extra);
        } else {
            ah__bufprintf(err, errsize,
                          "%s: field 'extra_after_end' must be true or a non-empty string",
                          where);
            return -1;
        }
    }
    if ((v = cJSON_GetObjectItemCaseSensitive(obj, "content_type")) &&
        set_string(&s->content_type, v->valuestring, where, err, errsize) != 0)
        return -1;
    if (cJSON_GetObjectItemCaseSensitive(obj, "json_body"))
        s->json_body = 1;
    if (cJSON_GetObjectItemCaseSensitive(obj, "invalid_utf8"))
        s->invalid_utf8 = 1;
    if (cJSON_GetObjectItemCaseSensitive(obj, "gzip"))
        s->gzip = 1;
    if ((v = cJSON_GetObjectItemCaseSensitive(obj, "body_fault"))) {
        if (strcmp(v->valuestring, "endless") == 0)
            s->body_fault = AH__MOCK_BODY_ENDLESS;
        else if (strcmp(v->valuestring, "stall") == 0)
            s->body_fault = AH__MOCK_BODY_STALL;
        else {
            ah__bufprintf(err, errsize,
                          "%s: field 'body_fault' must be \"endless\" or \"stall\"",
                          where);
            return -1;
        }
    }
    return 0;
}

/* "line L, column C" of a byte offset, for JSON syntax errors. */
static void describe_offset(const char *json, size_t off, char *out, size_t outsize)
{
    size_t line = 1, col = 1;
    for (size_t i = 0; i < off && json[i]; i++) {
        if (json[i] == '\n') {
            line++;
            col = 1;
        } else {
            col++;
        }
    }
    ah__bufprintf(out, outsize, "line %zu, column %zu", line, col);
}

ah_status ah__mock_plan_parse(const char *json, ah__mock_plan **out, char *err,
                              size_t errsize)
{
    ah_status st = AH_ERR_PARSE;
    ah__mock_plan *p = NULL;
    cJSON *root = NULL;
    char where[48];

    *out = NULL;
    if (!json) {
        ah__bufprintf(err, errsize, "plan: no JSON text");
        return AH_ERR_INVALID;
    }
    const char *end = NULL;
    root = cJSON_ParseWithOpts(json, &end, 1);
    if (!root) {
        char pos[64];
        describe_offset(json, end ? (size_t)(end - json) : 0, pos, sizeof pos);
        ah__bufprintf(err, errsize, "plan: invalid JSON near %s", pos);
        goto cleanup;
    }
    p = calloc(1, sizeof *p);
    if (!p) {
        st = AH_ERR_NOMEM;
        ah__bufprintf(err, errsize, "plan: out of memory");
        goto cleanup;
    }
    p->then.kind = AH__MOCK_OK;
    p->then.stall_ms = -1;

    const cJSON *steps = NULL, *then = NULL, *rl = NULL;
    if (is_list(root)) { /* [] or {}: no step */
        steps = root;
    } else if (cJSON_IsObject(root)) {
        for (const cJSON *v = root->child; v; v = v->next) {
            if (strcmp(v->string, "steps") == 0 && !steps) {
                steps = v;
            } else if (strcmp(v->string, "then") == 0 && !then) {
                then = v;
            } else if (strcmp(v->string, "rate_limit") == 0 && !rl) {
                rl = v;
            } else {
                ah__bufprintf(err, errsize, "plan: %s field '%.64s'",
                              strcmp(v->string, "steps") && strcmp(v->string, "then")
                                  ? "unknown"
                                  : "duplicate",
                              v->string);
                goto cleanup;
            }
        }
        if (!steps) {
            ah__bufprintf(err, errsize, "plan: missing field 'steps'");
            goto cleanup;
        }
        if (!is_list(steps)) {
            ah__bufprintf(err, errsize, "plan: field 'steps' must be an array");
            goto cleanup;
        }
    } else {
        ah__bufprintf(err, errsize,
                      "plan: expected a JSON array of steps or an object with 'steps'");
        goto cleanup;
    }

    size_t n = cJSON_IsArray(steps) ? (size_t)cJSON_GetArraySize(steps) : 0;
    if (n) {
        p->steps = calloc(n, sizeof *p->steps);
        if (!p->steps) {
            st = AH_ERR_NOMEM;
            ah__bufprintf(err, errsize, "plan: out of memory");
            goto cleanup;
        }
    }
    for (const cJSON *s = cJSON_IsArray(steps) ? steps->child : NULL; s; s = s->next) {
        snprintf(where, sizeof where, "plan step %zu", p->count + 1);
        int rc = parse_step(s, &p->steps[p->count], where, err, errsize);
        p->count++; /* counted even on failure so plan_free releases its strings */
        if (rc != 0)
            goto cleanup;
    }
    if (then && parse_step(then, &p->then, "plan step 'then'", err, errsize) != 0)
        goto cleanup;
    if (rl) {
        const cJSON *rpm = cJSON_GetObjectItemCaseSensitive(rl, "requests_per_minute");
        const cJSON *burst = cJSON_GetObjectItemCaseSensitive(rl, "burst");
        if (!cJSON_IsObject(rl) || !cJSON_IsNumber(rpm) || rpm->valuedouble <= 0 ||
            rpm->valuedouble > 6e6 ||
            (burst && (!cJSON_IsNumber(burst) || burst->valuedouble < 1 ||
                       burst->valuedouble > 1e6))) {
            ah__bufprintf(err, errsize,
                          "plan: rate_limit must be {\"requests_per_minute\": N > 0, "
                          "\"burst\": B >= 1}");
            goto cleanup;
        }
        p->rl_t_ms = 60000.0 / rpm->valuedouble;
        p->rl_tau_ms = ((burst ? (int)burst->valuedouble : 1) - 1) * p->rl_t_ms;
    }

    *out = p;
    p = NULL;
    st = AH_OK;
cleanup:
    ah__mock_plan_free(p);
    cJSON_Delete(root);
    return st;
}
