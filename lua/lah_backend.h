/* lah_backend.h - the epoll set a Lua state's loop waits on (lua/backend.c). */
#ifndef LAH_BACKEND_H
#define LAH_BACKEND_H

#include "agenthost/loop.h"

#include <stddef.h>
#include <stdint.h>

typedef struct lah_backend lah_backend;

/* A backend and its hooked loop; NULL with the reason in err (no fds left...). */
lah_backend *lah_backend_new(char *err, size_t errsize);
/* Frees the loop first (every timer and transfer must be gone), then the fds. */
void lah_backend_free(lah_backend *b);
ah_loop *lah_backend_loop(lah_backend *b);

/* Wait up to timeout_ms (-1: until something happens; 0: not at all), bounded by the
 * loop's own next timeout, then hand every ready fd, wake-up and due timeout to the loop.
 * Returns the number of epoll events seen. */
int lah_backend_poll(lah_backend *b, int64_t timeout_ms);
/* Milliseconds until the loop needs its timeout (0: now), -1 when nothing is timed. */
int64_t lah_backend_timeout(const lah_backend *b);
/* The epoll fd, for a host's own loop; from then on the fd is kept truthful at the end
 * of every step (lah_backend_idle). */
int lah_backend_fd(lah_backend *b);
/* 1 once lah_backend_fd was asked. */
int lah_backend_is_external(const lah_backend *b);
/* End of a step: pending = Lua work is ready (keep the fd readable); arm the timerfd to
 * the loop's next timeout. Does nothing until lah_backend_fd was asked. */
void lah_backend_idle(lah_backend *b, int pending);
/* on = a step is running: its end calls lah_backend_idle. Off, a change of the loop's
 * timeout arms the timerfd at once (a run started from the host's own code). */
void lah_backend_stepping(lah_backend *b, int on);

#endif
