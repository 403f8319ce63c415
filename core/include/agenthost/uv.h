/* agenthost/uv.h - run agenthost on an application's libuv loop.
 *
 *   uv_loop_t *uv = uv_default_loop();
 *   ah_uv *a = ah_uv_new(uv, NULL, NULL);
 *   ah_loop *loop = ah_uv_loop(a);      // give it to ah_worker_config.loop, ...
 *   ... ah_worker_start(w, "question"); ...
 *   uv_run(uv, UV_RUN_DEFAULT);          // returns when nothing is left to do
 *   ... ah_worker_free(w) ...
 *   ah_uv_free(a);
 *   uv_run(uv, UV_RUN_DEFAULT);          // lets libuv finish closing the adapter's handles
 *
 * The adapter is an ah_loop created with ah_loop_new_hooked(): each fd agenthost waits on
 * (curl's sockets, ah_io watchers) is a uv_poll_t, its one timeout a uv_timer_t, and its
 * cross-thread wake-up a uv_async_t. Everything runs on the libuv loop's thread; nothing
 * blocks and nothing spins. Active transfers and timers keep uv_run going (their handles
 * are referenced); the wake-up handle does only while work in flight will answer through
 * it (a SQLite ledger's claim or receipt committing on its writer thread: ah_loop_ref).
 *
 * Link: libagenthost_uv (CMake target agenthost::uv, pkg-config agenthost-uv) and libuv.
 */
#ifndef AGENTHOST_UV_H
#define AGENTHOST_UV_H

#include "agenthost/export.h"

#include "agenthost.h"

#include <uv.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct ah_uv ah_uv;

/* An agenthost loop on uv. clock / rng as for ah_loop_new (NULL: real clock, OS-seeded
 * RNG); borrowed. AH_OK with *out set; else *out = NULL, a message in err (may be NULL)
 * and AH_ERR_INVALID (no uv loop), AH_ERR_INTERNAL (a uv handle cannot be made) or
 * AH_ERR_NOMEM. */
AH_EXPORT ah_status ah_uv_new(uv_loop_t *uv, const ah_clock *clock, const ah_rng *rng, ah_uv **out,
                              char *err, size_t errsize);
/* The ah_loop to give to clients, workers and calls; owned by the adapter. */
AH_EXPORT ah_loop *ah_uv_loop(ah_uv *a);
/* Free the ah_loop (everything attached to it must be freed first) and close the libuv
 * handles; their memory is released by libuv's close callbacks, so run the uv loop once
 * more afterwards. NULL is a no-op. */
AH_EXPORT void ah_uv_free(ah_uv *a);

#ifdef __cplusplus
}
#endif
#endif
