/* event_visit.c - the fields of every event type, in the documented order and names
 * (docs/lua.md, "Events"), walked through a table of callbacks. JSON encoding (event_json.c) and the Lua binding's event
 * tables both go through here, so they cannot disagree about a field. */
#include "internal.h"

#include "agenthost/event.h"

#include <string.h>

static void str(const ah_event_fields *f, void *ud, const char *key, const char *s)
{
    f->str(ud, key, s, s ? strlen(s) : 0);
}

static void status(const ah_event_fields *f, void *ud, int st)
{
    if (st)
        f->num(ud, "status", st);
    else
        f->null(ud, "status");
}

static void error(const ah_event_fields *f, void *ud, const ah_error *e)
{
    f->error(ud, "error", e && e->kind != AH_EK_NONE ? e : NULL);
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
    case AH_EV_RUN_START:
        break;
    case AH_EV_LLM_CALL_START:
        f->num(ud, "llm_call", ev->u.llm_call_start.llm_call);
        f->num(ud, "attempt", ev->u.llm_call_start.attempt);
        f->num(ud, "continuation", ev->u.llm_call_start.continuation);
        break;
    case AH_EV_TEXT_DELTA:
    case AH_EV_REASONING_DELTA:
        f->num(ud, "llm_call", ev->u.delta.llm_call);
        f->num(ud, "block", ev->u.delta.block);
        f->str(ud, "text", ev->u.delta.text ? ev->u.delta.text : "",
               ev->u.delta.text ? ev->u.delta.len : 0);
        break;
    case AH_EV_TOOL_CALL_START:
        f->num(ud, "llm_call", ev->u.tool_call_start.llm_call);
        str(f, ud, "id", ev->u.tool_call_start.id);
        str(f, ud, "name", ev->u.tool_call_start.name);
        break;
    case AH_EV_TOOL_CALL_END:
        str(f, ud, "id", ev->u.tool_call_end.id);
        str(f, ud, "name", ev->u.tool_call_end.name);
        str(f, ud, "outcome", ah_tool_outcome_name(ev->u.tool_call_end.outcome));
        f->boolean(ud, "duplicate", ev->u.tool_call_end.duplicate != 0);
        f->num(ud, "attempts", ev->u.tool_call_end.attempts);
        break;
    case AH_EV_LLM_RETRY:
        f->num(ud, "llm_call", ev->u.llm_retry.llm_call);
        f->num(ud, "failed_attempt", ev->u.llm_retry.failed_attempt);
        f->num(ud, "max_attempts", ev->u.llm_retry.max_attempts);
        f->num(ud, "wait_ms", ev->u.llm_retry.wait_ms);
        str(f, ud, "wait_source", ah_wait_source_name(ev->u.llm_retry.wait_source));
        f->num(ud, "elapsed_ms", ev->u.llm_retry.elapsed_ms);
        status(f, ud, ev->u.llm_retry.status);
        error(f, ud, ev->u.llm_retry.error);
        break;
    case AH_EV_LLM_PACED:
        f->num(ud, "llm_call", ev->u.llm_paced.llm_call);
        f->num(ud, "wait_ms", ev->u.llm_paced.wait_ms);
        str(f, ud, "limit", ev->u.llm_paced.limit);
        break;
    case AH_EV_LLM_GAVE_UP:
        f->num(ud, "llm_call", ev->u.llm_gave_up.llm_call);
        f->num(ud, "attempts", ev->u.llm_gave_up.attempts);
        f->num(ud, "elapsed_ms", ev->u.llm_gave_up.elapsed_ms);
        status(f, ud, ev->u.llm_gave_up.status);
        error(f, ud, ev->u.llm_gave_up.error);
        str(f, ud, "reason", ah_giveup_reason_name(ev->u.llm_gave_up.reason));
        break;
    case AH_EV_LLM_CONTINUATION:
        f->num(ud, "llm_call", ev->u.llm_continuation.llm_call);
        f->num(ud, "continuation", ev->u.llm_continuation.continuation);
        f->num(ud, "max_continuations", ev->u.llm_continuation.max_continuations);
        f->num(ud, "committed_blocks", ev->u.llm_continuation.committed_blocks);
        f->num(ud, "discarded_blocks", ev->u.llm_continuation.discarded_blocks);
        f->num(ud, "discarded_bytes", ev->u.llm_continuation.discarded_bytes);
        str(f, ud, "mode", ah_cont_mode_name(ev->u.llm_continuation.mode));
        str(f, ud, "reason", ev->u.llm_continuation.reason);
        break;
    case AH_EV_LLM_CALL_END:
        f->num(ud, "llm_call", ev->u.llm_call_end.llm_call);
        str(f, ud, "stop_reason", ev->u.llm_call_end.stop_reason);
        f->num(ud, "input_tokens", ev->u.llm_call_end.input_tokens);
        f->num(ud, "output_tokens", ev->u.llm_call_end.output_tokens);
        f->num(ud, "trimmed_bytes", ev->u.llm_call_end.trimmed_bytes);
        break;
    case AH_EV_BUDGET_EXHAUSTED:
        str(f, ud, "budget", ev->u.budget_exhausted.budget);
        f->num(ud, "used", ev->u.budget_exhausted.used);
        f->num(ud, "limit", ev->u.budget_exhausted.limit);
        break;
    case AH_EV_RUN_END:
        str(f, ud, "outcome", ah_run_outcome_name(ev->u.run_end.outcome));
        error(f, ud, ev->u.run_end.error);
        break;
    case AH_EV_COUNT_:
        break;
    }
}
