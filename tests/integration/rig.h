/* rig.h - the mock, loop and client that the worker harnesses of test_worker.c,
 * test_continuation.c and test_resume.c run on, opened and closed in one place.
 * Header-only: each test is its own program. */
#ifndef AH_TEST_RIG_H
#define AH_TEST_RIG_H

#include "agenthost.h"
#include "agenthost/mock.h"
#include "event_log.h"

/* Start the mock from mc, a loop on the real clock and a client from cc pointed at the
 * mock (cc->base_url is set here); a failure fails the test with the component's error. */
static void rig_open(const ah_mock_config *mc, ah_client_config *cc, ah_mock **mock,
                     ah_loop **loop, ah_client **client)
{
    char err[256];
    ah_mock_new(mc, mock, err, sizeof err);
    if (!*mock)
        fail_msg("mock: %s", err);
    *loop = ah_loop_new(ah_clock_real(), NULL);
    assert_non_null(*loop);
    cc->base_url = ah_mock_url(*mock);
    ah_client_new(cc, client, err, sizeof err);
    if (!*client)
        fail_msg("client: %s", err);
}

/* Free what rig_open made, the worker on it and the event log, in dependency order. */
static void rig_close(ah_worker *worker, ah_client *client, ah_loop *loop, ah_mock *mock,
                      event_log *log)
{
    ah_worker_free(worker);
    ah_client_free(client);
    ah_loop_free(loop);
    ah_mock_free(mock);
    event_log_free(log);
}

#endif
