/* policy.c - the retry policy's defaults, validation and name-based setters.
 *
 * One table describes every field (name, type, offset, smallest allowed value), so the
 * validator, the setters and ah_policy_is_field cannot disagree about which fields exist.
 * Invariants: a setter that fails leaves the policy unchanged; every error message names
 * the field ("policy.<name> ...") and never contains anything but the offending value.
 */
#include "internal.h"

#include "agenthost/policy.h"

#include <limits.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

typedef enum field_type {
    F_INT,
    F_I64,
    F_JITTER,
    F_RETRY_AFTER,
    F_PARTIAL_TEXT,
    F_FUNC
} field_type;

typedef struct field_def {
    const char *name; /* first: ah__did_you_mean reads the table through it */
    field_type type;
    size_t offset;
    int64_t min; /* for F_INT / F_I64 */
} field_def;

/* clang-format off */
#define FIELD(name, type, min) {#name, type, offsetof(ah_policy, name), min}
/* clang-format on */
static const field_def fields[] = {
    FIELD(max_attempts, F_INT, 1),
    FIELD(base_ms, F_I64, 0),
    FIELD(cap_ms, F_I64, 0),
    FIELD(jitter, F_JITTER, 0),
    FIELD(retry_after, F_RETRY_AFTER, 0),
    FIELD(max_retry_after_ms, F_I64, 0),
    FIELD(attempt_timeout_ms, F_I64, 0),
    FIELD(deadline_ms, F_I64, 0),
    FIELD(idle_timeout_ms, F_I64, 0),
    FIELD(max_continuations, F_INT, 0),
    FIELD(continue_on_max_tokens, F_INT, 0),
    FIELD(max_response_bytes, F_I64, 0),
    FIELD(continue_partial_text, F_PARTIAL_TEXT, 0),
    FIELD(retry_on, F_FUNC, 0),
};
#undef FIELD
enum { NFIELDS = sizeof fields / sizeof fields[0] };

static const char *const jitter_names[] = {
#define X(name, s) s,
    AH_JITTER_MAP(X)
#undef X
};

static const char *const retry_after_names[] = {
#define X(name, s) s,
    AH_RETRY_AFTER_MAP(X)
#undef X
};

static const char *const partial_text_names[] = {
#define X(name, s) s,
    AH_PARTIAL_TEXT_MAP(X)
#undef X
};

const char *ah_partial_text_name(ah_partial_text m)
{
    return (unsigned)m < (unsigned)AH_PARTIAL_TEXT_COUNT_ ? partial_text_names[m]
                                                          : "unknown";
}

const char *ah_jitter_name(ah_jitter j)
{
    return (unsigned)j < (unsigned)AH_JITTER_COUNT_ ? jitter_names[j] : "unknown";
}

const char *ah_retry_after_mode_name(ah_retry_after_mode m)
{
    return (unsigned)m < (unsigned)AH_RETRY_AFTER_COUNT_ ? retry_after_names[m]
                                                         : "unknown";
}

void ah_policy_init(ah_policy *p)
{
    if (!p)
        return;
    memset(p, 0, sizeof *p);
    p->max_attempts = AH_POLICY_DEFAULT_MAX_ATTEMPTS;
    p->base_ms = AH_POLICY_DEFAULT_BASE_MS;
    p->cap_ms = AH_POLICY_DEFAULT_CAP_MS;
    p->jitter = AH_JITTER_FULL;
    p->retry_after = AH_RETRY_AFTER_FLOOR;
    p->max_retry_after_ms = AH_POLICY_DEFAULT_MAX_RETRY_AFTER_MS;
    p->attempt_timeout_ms = 0;
    p->deadline_ms = 0;
    p->idle_timeout_ms = AH_POLICY_DEFAULT_IDLE_TIMEOUT_MS;
    p->max_continuations = AH_POLICY_DEFAULT_MAX_CONTINUATIONS;
    p->max_response_bytes = AH_POLICY_DEFAULT_MAX_RESPONSE_BYTES;
    p->continue_partial_text = AH_PARTIAL_TEXT_OFF;
    p->retry_on = NULL;
    p->retry_on_ud = NULL;
}

static const field_def *find_field(const char *name)
{
    if (!name)
        return NULL;
    for (int i = 0; i < NFIELDS; i++)
        if (strcmp(fields[i].name, name) == 0)
            return &fields[i];
    return NULL;
}

int ah_policy_is_field(const char *name)
{
    return find_field(name) != NULL;
}

static void set_err(char *err, size_t errsize, const char *fmt, ...) AH__PRINTF(3, 4);
static void set_err(char *err, size_t errsize, const char *fmt, ...)
{
    if (!err || errsize == 0)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errsize, fmt, ap);
    va_end(ap);
}

static void unknown_field(const char *name, char *err, size_t errsize)
{
    const char *shown = name ? name : "(null)";
    const char *best = ah__did_you_mean(name, fields, NFIELDS, sizeof fields[0]);
    if (best)
        set_err(err, errsize, "unknown policy field '%.64s' (did you mean '%s'?)", shown,
                best);
    else
        set_err(err, errsize, "unknown policy field '%.64s'", shown);
}

static int64_t get_int(const ah_policy *p, const field_def *f)
{
    const char *base = (const char *)p + f->offset;
    if (f->type == F_INT) {
        int v;
        memcpy(&v, base, sizeof v);
        return v;
    }
    int64_t v;
    memcpy(&v, base, sizeof v);
    return v;
}

/* The single-field range check shared by the setters and the validator. */
static ah_status check_int(const field_def *f, int64_t v, char *err, size_t errsize)
{
    if (v < f->min) {
        set_err(err, errsize, "policy.%s must be >= %lld (got %lld)", f->name,
                (long long)f->min, (long long)v);
        return AH_ERR_INVALID;
    }
    if (f->type == F_INT && v > INT_MAX) {
        set_err(err, errsize, "policy.%s must be <= %d (got %lld)", f->name, INT_MAX,
                (long long)v);
        return AH_ERR_INVALID;
    }
    return AH_OK;
}

static const char *type_name(field_type t)
{
    switch (t) {
    case F_INT:
    case F_I64:
        return "an integer";
    case F_JITTER:
    case F_RETRY_AFTER:
    case F_PARTIAL_TEXT:
        return "a string";
    case F_FUNC:
        return "a function";
    }
    return "unknown";
}

ah_status ah_policy_validate(const ah_policy *p, char *err, size_t errsize)
{
    if (!p) {
        set_err(err, errsize, "policy is NULL");
        return AH_ERR_INVALID;
    }
    for (int i = 0; i < NFIELDS; i++) {
        const field_def *f = &fields[i];
        if (f->type == F_INT || f->type == F_I64) {
            ah_status st = check_int(f, get_int(p, f), err, errsize);
            if (st != AH_OK)
                return st;
        }
    }
    if ((unsigned)p->jitter >= (unsigned)AH_JITTER_COUNT_) {
        set_err(err, errsize, "policy.jitter is not a known mode (got %d)",
                (int)p->jitter);
        return AH_ERR_INVALID;
    }
    if ((unsigned)p->retry_after >= (unsigned)AH_RETRY_AFTER_COUNT_) {
        set_err(err, errsize, "policy.retry_after is not a known mode (got %d)",
                (int)p->retry_after);
        return AH_ERR_INVALID;
    }
    if ((unsigned)p->continue_partial_text >= (unsigned)AH_PARTIAL_TEXT_COUNT_) {
        set_err(err, errsize, "policy.continue_partial_text is not a known mode (got %d)",
                (int)p->continue_partial_text);
        return AH_ERR_INVALID;
    }
    if (p->cap_ms < p->base_ms) {
        set_err(err, errsize, "policy.cap_ms must be >= policy.base_ms (got %lld < %lld)",
                (long long)p->cap_ms, (long long)p->base_ms);
        return AH_ERR_INVALID;
    }
    return AH_OK;
}

ah_status ah_policy_set_int(ah_policy *p, const char *field, int64_t v, char *err,
                            size_t errsize)
{
    const field_def *f = find_field(field);
    if (!f) {
        unknown_field(field, err, errsize);
        return AH_ERR_INVALID;
    }
    if (f->type != F_INT && f->type != F_I64) {
        set_err(err, errsize, "policy.%s expects %s, not an integer", f->name,
                type_name(f->type));
        return AH_ERR_INVALID;
    }
    ah_status st = check_int(f, v, err, errsize);
    if (st != AH_OK)
        return st;
    if (!p) {
        set_err(err, errsize, "policy is NULL");
        return AH_ERR_INVALID;
    }
    char *dst = (char *)p + f->offset;
    if (f->type == F_INT) {
        int iv = (int)v;
        memcpy(dst, &iv, sizeof iv);
    } else {
        memcpy(dst, &v, sizeof v);
    }
    return AH_OK;
}

/* Index of `v` in names[0..n), or -1. */
static int lookup_name(const char *const *names, int n, const char *v)
{
    for (int i = 0; v && i < n; i++)
        if (strcmp(names[i], v) == 0)
            return i;
    return -1;
}

ah_status ah_policy_set_str(ah_policy *p, const char *field, const char *v, char *err,
                            size_t errsize)
{
    const field_def *f = find_field(field);
    if (!f) {
        unknown_field(field, err, errsize);
        return AH_ERR_INVALID;
    }
    if (f->type != F_JITTER && f->type != F_RETRY_AFTER && f->type != F_PARTIAL_TEXT) {
        set_err(err, errsize, "policy.%s expects %s, not a string", f->name,
                type_name(f->type));
        return AH_ERR_INVALID;
    }
    if (!p) {
        set_err(err, errsize, "policy is NULL");
        return AH_ERR_INVALID;
    }
    if (f->type == F_JITTER) {
        int j = lookup_name(jitter_names, AH_JITTER_COUNT_, v);
        if (j < 0) {
            set_err(err, errsize,
                    "policy.jitter must be one of full, equal, decorrelated, none "
                    "(got '%.64s')",
                    v ? v : "(null)");
            return AH_ERR_INVALID;
        }
        p->jitter = (ah_jitter)j;
    } else if (f->type == F_PARTIAL_TEXT) {
        int m = lookup_name(partial_text_names, AH_PARTIAL_TEXT_COUNT_, v);
        if (m < 0) {
            set_err(err, errsize,
                    "policy.continue_partial_text must be one of sentence, line, false "
                    "(got '%.64s')",
                    v ? v : "(null)");
            return AH_ERR_INVALID;
        }
        p->continue_partial_text = (ah_partial_text)m;
    } else {
        int m = lookup_name(retry_after_names, AH_RETRY_AFTER_COUNT_, v);
        if (m < 0) {
            set_err(err, errsize,
                    "policy.retry_after must be one of floor, ignore (got '%.64s')",
                    v ? v : "(null)");
            return AH_ERR_INVALID;
        }
        p->retry_after = (ah_retry_after_mode)m;
    }
    return AH_OK;
}
