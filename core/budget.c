/* budget.c - reference-counted execution budgets (docs/tools-and-ledger.md).
 * Invariants: 0 <= used <= limit; a refused take changes nothing but the refusal count;
 * the budget lives while any holder has a reference. */
#include "internal.h"

#include "agenthost/budget.h"

#include <stdlib.h>
#include <string.h>

struct ah_budget {
    int64_t limit, used, refused;
    long refs;
};

ah_status ah_budget_new(int64_t limit, ah_budget **out, char *err, size_t errsize)
{
    if (!out) {
        ah__bufprintf(err, errsize, "ah_budget_new: out is NULL");
        return AH_ERR_INVALID;
    }
    *out = NULL;
    if (limit < 0) {
        ah__bufprintf(err, errsize, "budget: limit must be >= 0 (got %lld)",
                      (long long)limit);
        return AH_ERR_INVALID;
    }
    ah_budget *b = calloc(1, sizeof *b);
    if (!b) {
        ah__bufprintf(err, errsize, "budget: out of memory");
        return AH_ERR_NOMEM;
    }
    b->limit = limit;
    b->refs = 1;
    *out = b;
    return AH_OK;
}

ah_budget *ah_budget_ref(ah_budget *b)
{
    if (b)
        b->refs++;
    return b;
}

void ah_budget_free(ah_budget *b)
{
    if (b && --b->refs == 0)
        free(b);
}

int ah_budget_try_take(ah_budget *b)
{
    if (!b)
        return 1;
    if (b->used >= b->limit) {
        b->refused++;
        return 0;
    }
    b->used++;
    return 1;
}

int64_t ah_budget_used(const ah_budget *b)
{
    return b ? b->used : 0;
}

int64_t ah_budget_limit(const ah_budget *b)
{
    return b ? b->limit : -1;
}

int64_t ah_budget_remaining(const ah_budget *b)
{
    return b ? b->limit - b->used : INT64_MAX;
}

int64_t ah_budget_refused(const ah_budget *b)
{
    return b ? b->refused : 0;
}

void ah_budget_exhausted_event(const ah_budget *b, const char *name, ah_event *out)
{
    memset(out, 0, sizeof *out);
    out->type = AH_EV_BUDGET_EXHAUSTED;
    out->u.budget_exhausted.budget = name ? name : "budget";
    out->u.budget_exhausted.used = ah_budget_used(b);
    out->u.budget_exhausted.limit = ah_budget_limit(b);
}
