/* event_visit.c - the fields of every event type, in the documented order and names
 * (docs/lua.md, "Events"), walked through a table of callbacks; generated from the one
 * list of types and fields (AH_EVENT_MAP in agenthost/event.h). JSON encoding
 * (event_json.c) goes through here; the Lua binding's tables are generated from the same
 * list, so none of them can disagree about a field. */
#include "internal.h"

#include "agenthost/event.h"

#include <math.h>
#include <string.h>

static void str(const ah_event_fields *f, void *ud, const char *key, const char *s)
{
    f->str(ud, key, s, s ? strlen(s) : 0);
}

static void status(const ah_event_fields *f, void *ud, const char *key, int st)
{
    if (st)
        f->num(ud, key, st);
    else
        f->null(ud, key);
}

static void error(const ah_event_fields *f, void *ud, const char *key, const ah_error *e)
{
    f->error(ud, key, e && e->kind != AH_EK_NONE ? e : NULL);
}

/* A NUM: null for NaN, a whole number to num, a fraction to fraction (or num, cut) */
static void number(const ah_event_fields *f, void *ud, const char *key, double v)
{
    if (isnan(v))
        f->null(ud, key);
    else if ((v == floor(v) && fabs(v) < 9e15) || !f->fraction)
        f->num(ud, key, fabs(v) < 9e18 ? (int64_t)v : v < 0 ? INT64_MIN : INT64_MAX);
    else
        f->fraction(ud, key, v);
}

/* One statement per field kind (agenthost/event.h, AH_EVENT_MAP) */
#define V_INT(v, key, arg) f->num(ud, key, v);
#define V_I64(v, key, arg) f->num(ud, key, v);
#define V_BOOL(v, key, arg) f->boolean(ud, key, (v) != 0);
#define V_STR(v, key, arg) str(f, ud, key, v);
#define V_TEXT(v, key, arg) f->str(ud, key, (v) ? (v) : "", (v) ? p->len : 0);
#define V_STATUS(v, key, arg) status(f, ud, key, v);
#define V_ERROR(v, key, arg) error(f, ud, key, v);
#define V_NUM(v, key, arg) number(f, ud, key, v);
#define V_ENUM(v, key, arg) str(f, ud, key, ah_##arg##_name(v));
#define V_RUN_ID(v, key, arg) /* visited with the common fields */
#define V_FIELD(kind, m, arg) V_##kind(p->m, #m, arg)
#define V_CASE(name, s, member, own, ...)                                                 \
    case AH_EV_##name: {                                                                  \
        const struct ah__ev_##member *p = &ev->u.member;                                  \
        (void)p;                                                                          \
        __VA_ARGS__                                                                       \
        break;                                                                            \
    }

void ah_event_visit(const ah_event *ev, const ah_event_fields *f, void *ud)
{
    str(f, ud, "type", ah_event_type_name(ev->type));
    /* run_start's own run_id is the same id: visited once */
    const char *run_id = ev->run_id;
    if (!run_id && ev->type == AH_EV_RUN_START)
        run_id = ev->u.run_start.run_id;
    str(f, ud, "run_id", run_id);
    f->num(ud, "ts_ms", ev->ts_ms);
    switch (ev->type) {
        AH_EVENT_MAP(V_CASE, V_FIELD)
    case AH_EV_COUNT_:
        break;
    }
}
