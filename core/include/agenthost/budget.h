/* agenthost/budget.h - call budgets (docs/tools-and-ledger.md).
 *
 * A budget counts EXECUTIONS (of tool bodies, or separately of LLM attempts), never items
 * or calls: every attempt of a body takes one unit, and a retry takes another. It is
 * checked BEFORE an execution: when it is spent the execution does not happen and the
 * caller reports outcome budget_exhausted (never an exception, never retried).
 *
 * Budgets are shared (a batch's items all take from one), so they are reference counted:
 * ah_budget_new() returns one reference, ah_budget_ref() adds one, ah_budget_free() drops
 * one and frees at zero. Not thread-safe: use from the host's loop thread.
 */
#ifndef AGENTHOST_BUDGET_H
#define AGENTHOST_BUDGET_H

#include "agenthost/event.h"

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct ah_budget ah_budget;

/* A budget of `limit` executions (0 = nothing may run): AH_OK with *out set; else
 * *out = NULL and AH_ERR_INVALID (limit < 0, said in err) or AH_ERR_NOMEM. err may be
 * NULL. */
ah_status ah_budget_new(int64_t limit, ah_budget **out, char *err, size_t errsize);
/* Add a reference; returns b (NULL stays NULL). */
ah_budget *ah_budget_ref(ah_budget *b);
/* Drop a reference; frees on the last one. NULL is a no-op. */
void ah_budget_free(ah_budget *b);

/* 1: one execution granted and counted. 0: exhausted, nothing counted (the refusal is
 * counted in ah_budget_refused). A NULL budget is unlimited and always grants. */
int ah_budget_try_take(ah_budget *b);

/* For a NULL (unlimited) budget: used 0, limit -1, remaining INT64_MAX, refused 0. */
int64_t ah_budget_used(const ah_budget *b);      /* executions granted so far */
int64_t ah_budget_limit(const ah_budget *b);     /* as given to _new */
int64_t ah_budget_remaining(const ah_budget *b); /* limit - used, >= 0 */
int64_t ah_budget_refused(const ah_budget *b);   /* refused try_take calls so far */

/* Fill a budget_exhausted event (docs/lua.md) for this budget. `name` (e.g. "tool_calls",
 * "batch") is borrowed into the event. Drivers emit it once per budget, at the first
 * refusal (ah_budget_refused(b) == 1 right after the refused take). */
void ah_budget_exhausted_event(const ah_budget *b, const char *name, ah_event *out);

#ifdef __cplusplus
}
#endif
#endif
