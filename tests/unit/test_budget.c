/* test_budget.c - call budgets: a limit of 0 grants nothing, takes stop at the limit
 * without counting refusals as use, references keep a shared budget alive, and through
 * the tool driver a budget counts body EXECUTIONS (retries included) across the items
 * that share it, never items. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <string.h>

#include "agenthost.h"

static void zero_grants_nothing(void **state)
{
    (void)state;
    ah_budget *b = NULL;
    ah_budget_new(0, &b, NULL, 0);
    assert_non_null(b);
    assert_int_equal(ah_budget_try_take(b), 0);
    assert_int_equal(ah_budget_used(b), 0);
    assert_int_equal(ah_budget_limit(b), 0);
    assert_int_equal(ah_budget_remaining(b), 0);
    assert_int_equal(ah_budget_refused(b), 1);
    ah_budget_free(b);
}

static void takes_stop_at_the_limit(void **state)
{
    (void)state;
    ah_budget *b = NULL;
    ah_budget_new(3, &b, NULL, 0);
    assert_non_null(b);
    for (int i = 0; i < 3; i++) {
        assert_int_equal(ah_budget_remaining(b), 3 - i);
        assert_int_equal(ah_budget_try_take(b), 1);
    }
    assert_int_equal(ah_budget_try_take(b), 0);
    assert_int_equal(ah_budget_try_take(b), 0);
    assert_int_equal(ah_budget_used(b), 3);
    assert_int_equal(ah_budget_remaining(b), 0);
    assert_int_equal(ah_budget_refused(b), 2);
    ah_budget_free(b);
}

static void negative_limit_is_refused(void **state)
{
    (void)state;
    assert_int_equal(ah_budget_new(-1, &(ah_budget *){NULL}, NULL, 0), AH_ERR_INVALID);
    ah_budget_free(NULL);
    assert_null(ah_budget_ref(NULL));
}

static void null_budget_is_unlimited(void **state)
{
    (void)state;
    for (int i = 0; i < 1000; i++)
        assert_int_equal(ah_budget_try_take(NULL), 1);
    assert_int_equal(ah_budget_used(NULL), 0);
    assert_int_equal(ah_budget_limit(NULL), -1);
    assert_int_equal(ah_budget_remaining(NULL), INT64_MAX);
}

/* Two holders: the budget outlives the first release (ASan would flag a use after
 * free) and both see the same counts. */
static void references_share_one_budget(void **state)
{
    (void)state;
    ah_budget *a = NULL;
    ah_budget_new(2, &a, NULL, 0);
    ah_budget *b = ah_budget_ref(a);
    assert_ptr_equal(a, b);
    assert_int_equal(ah_budget_try_take(a), 1);
    ah_budget_free(a);
    assert_int_equal(ah_budget_used(b), 1);
    assert_int_equal(ah_budget_try_take(b), 1);
    assert_int_equal(ah_budget_try_take(b), 0);
    ah_budget_free(b);
}

static void exhausted_event_fields(void **state)
{
    (void)state;
    ah_event ev;
    ah_budget *b = NULL;
    ah_budget_new(2, &b, NULL, 0);
    ah_budget_try_take(b);
    ah_budget_try_take(b);
    ah_budget_exhausted_event(b, "batch", &ev);
    assert_int_equal(ev.type, AH_EV_BUDGET_EXHAUSTED);
    assert_string_equal(ev.u.budget_exhausted.budget, "batch");
    assert_int_equal(ev.u.budget_exhausted.used, 2);
    assert_int_equal(ev.u.budget_exhausted.limit, 2);
    ah_budget_free(b);
}

/* ---- through the tool driver ----------------------------------------------------- */

/* A body whose attempts fail `transient_failures` times per item, then succeed. */
typedef struct items_body {
    int transient_failures; /* per call */
    int failed_this_call;
    int executions;
} items_body;

static void flaky_body(void *ud, ah_tool_call *c)
{
    items_body *ib = ud;
    ib->executions++;
    if (ib->failed_this_call < ib->transient_failures) {
        ah_error e;
        ah_error_set(&e, AH_EK_TRANSIENT, 0, "flaky");
        ib->failed_this_call++;
        ah_tool_call_body_failed(c, &e);
        return;
    }
    ah_tool_call_body_ok(c, "\"done\"");
}

typedef struct event_log {
    int budget_events, end_events;
    ah_tool_outcome last_outcome;
    int64_t used, limit;
} event_log;

static void log_event(void *ud, const ah_event *ev)
{
    event_log *log = ud;
    if (ev->type == AH_EV_BUDGET_EXHAUSTED) {
        log->budget_events++;
        log->used = ev->u.budget_exhausted.used;
        log->limit = ev->u.budget_exhausted.limit;
    } else if (ev->type == AH_EV_TOOL_CALL_END) {
        log->end_events++;
        log->last_outcome = ev->u.tool_call_end.outcome;
    }
}

/* Run one item as a tool call on the shared budget; returns its outcome. */
static ah_tool_outcome run_item(ah_ledger *ledger, ah_budget *b, int i, items_body *ib,
                                event_log *log, int *attempts)
{
    char key[32];
    ah_tool_driver d;
    memset(&d, 0, sizeof d);
    d.body = flaky_body;
    d.body_ud = ib;
    d.on_event = log_event;
    d.event_ud = log;
    d.name = "charge";
    snprintf(key, sizeof key, "item-%d", i);
    ah_tool_call *c = NULL;
    ah_tool_call_new(NULL, ledger, b, key, "{}", &c, NULL, 0);
    assert_non_null(c);
    ib->failed_this_call = 0;
    ah_tool_outcome o = ah_tool_call_run(c, &d);
    *attempts = ah_tool_call_attempts(c);
    if (o == AH_TOOL_BUDGET_EXHAUSTED)
        assert_int_equal(ah_tool_call_error(c)->kind, AH_EK_BUDGET);
    ah_tool_call_free(c);
    return o;
}

static void budget_of_zero_calls_nothing(void **state)
{
    (void)state;
    items_body ib = {0, 0, 0};
    event_log log;
    int attempts = -1;
    memset(&log, 0, sizeof log);
    ah_budget *b = NULL;
    ah_budget_new(0, &b, NULL, 0);
    for (int i = 0; i < 3; i++)
        assert_int_equal(run_item(NULL, b, i, &ib, &log, &attempts),
                         AH_TOOL_BUDGET_EXHAUSTED);
    assert_int_equal(attempts, 0);
    assert_int_equal(ib.executions, 0);
    assert_int_equal(ah_budget_used(b), 0);
    assert_int_equal(log.budget_events, 1); /* once per budget, at its first refusal */
    assert_int_equal(log.end_events, 3);
    assert_int_equal(log.last_outcome, AH_TOOL_BUDGET_EXHAUSTED);
    ah_budget_free(b);
}

/* Six items share a budget of 4, each succeeding at once: four run, two are refused. */
static void shared_across_items(void **state)
{
    (void)state;
    items_body ib = {0, 0, 0};
    event_log log;
    int attempts = 0, ok = 0, refused = 0;
    memset(&log, 0, sizeof log);
    ah_budget *b = NULL;
    ah_budget_new(4, &b, NULL, 0);
    ah_ledger *l = ah_ledger_new_memory();
    for (int i = 0; i < 6; i++) {
        ah_tool_outcome o = run_item(l, b, i, &ib, &log, &attempts);
        if (o == AH_TOOL_OK)
            ok++;
        else if (o == AH_TOOL_BUDGET_EXHAUSTED)
            refused++;
        /* the first four run, the last two are refused: order is kept */
        assert_int_equal(o, i < 4 ? AH_TOOL_OK : AH_TOOL_BUDGET_EXHAUSTED);
    }
    assert_int_equal(ok, 4);
    assert_int_equal(refused, 2);
    assert_int_equal(ib.executions, 4);
    assert_int_equal(ah_budget_used(b), 4);
    assert_int_equal(ah_ledger_count(l), 4);
    assert_int_equal(log.budget_events, 1);
    assert_int_equal(log.used, 4);
    assert_int_equal(log.limit, 4);
    ah_ledger_free(l);
    ah_budget_free(b);
}

/* Retries spend the budget too: with two transient failures per item, item 0 takes 3
 * executions of a budget of 4, item 1 gets one execution (fails, and its retry is
 * refused), item 2 none. */
static void counts_executions_not_items(void **state)
{
    (void)state;
    items_body ib = {2, 0, 0};
    event_log log;
    int attempts = 0;
    memset(&log, 0, sizeof log);
    ah_budget *b = NULL;
    ah_budget_new(4, &b, NULL, 0);
    assert_int_equal(run_item(NULL, b, 0, &ib, &log, &attempts), AH_TOOL_OK);
    assert_int_equal(attempts, 3);
    assert_int_equal(ah_budget_used(b), 3);
    assert_int_equal(run_item(NULL, b, 1, &ib, &log, &attempts),
                     AH_TOOL_BUDGET_EXHAUSTED);
    assert_int_equal(attempts, 1);
    assert_int_equal(run_item(NULL, b, 2, &ib, &log, &attempts),
                     AH_TOOL_BUDGET_EXHAUSTED);
    assert_int_equal(attempts, 0);
    assert_int_equal(ib.executions, 4);
    assert_int_equal(ah_budget_used(b), 4);
    assert_int_equal(log.budget_events, 1);
    ah_budget_free(b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(zero_grants_nothing),
        cmocka_unit_test(takes_stop_at_the_limit),
        cmocka_unit_test(negative_limit_is_refused),
        cmocka_unit_test(null_budget_is_unlimited),
        cmocka_unit_test(references_share_one_budget),
        cmocka_unit_test(exhausted_event_fields),
        cmocka_unit_test(budget_of_zero_calls_nothing),
        cmocka_unit_test(shared_across_items),
        cmocka_unit_test(counts_executions_not_items),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
