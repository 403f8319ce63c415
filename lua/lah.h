/* lah.h - internals shared by the Lua binding's files (lua/*.c): the scheduler that runs
 * Lua coroutines over the one core loop, and the protected-call helper.
 *
 * The model (DESIGN.md "Lua: one code path, two drivers"):
 *  - One ah_loop per lua_State (created on first use, kept in the registry, freed by
 *    the module's __gc sentinel).
 *  - Code that must wait for the core (agent:run, a tool's retry wait, ah.parallel)
 *    creates a lah_wait and calls lah_await(). Inside a coroutine the scheduler manages,
 *    lah_await yields to the scheduler; anywhere else (the main chunk of a plain
 *    `lua5.4`, or a non-yieldable context) it drives the scheduler itself until the wait
 *    is ready — the same code path either way.
 *  - The scheduler's step: resume every managed coroutine whose wait is ready (or that
 *    is new), then run one ah_loop_run_once() when nothing is runnable.
 *  - Hooks (on_event, retry_on) are plain protected calls on the RUNNING Lua thread
 *    (lah_running()), never on a suspended coroutine; they must not yield.
 */
#ifndef LAH_H
#define LAH_H

#include "agenthost.h"

#include <lauxlib.h>
#include <lua.h>

/* A condition a Lua thread waits on. The waiter owns it (usually on the C stack of the
 * function that waits, or inside a userdata); whoever completes the work sets ready. */
typedef struct lah_wait {
    int ready;
} lah_wait;

/* The loop of this Lua state (created on first use). Never NULL unless out of memory,
 * which raises a Lua error. */
ah_loop *lah_loop(lua_State *L);

/* Wait until w->ready, then continue in k(L, LUA_YIELD, ctx) — like lua_yieldk, the
 * function does not return to its caller when it yields. When the running thread cannot
 * yield to the scheduler, it drives the scheduler until w->ready and then calls
 * k(L, LUA_OK, ctx) directly and returns its result. */
int lah_await(lua_State *L, lah_wait *w, lua_KContext ctx, lua_KFunction k);

/* Run a function in a new coroutine managed by the scheduler: the function and its
 * nargs arguments are on top of L's stack and are moved to the coroutine. It first runs
 * at the next scheduler step. on_done (may be NULL) is called when it ends, with the
 * coroutine (its results, or its error message with traceback, on top of its stack) and
 * ok = 1 on success; the coroutine is released after on_done returns. Returns the
 * coroutine (borrowed, valid until on_done returns). */
typedef void (*lah_done_fn)(void *ud, lua_State *co, int ok);
lua_State *lah_spawn(lua_State *L, int nargs, lah_done_fn on_done, void *ud);

/* One scheduler step (see above). Returns the number of coroutines still managed. */
int lah_step(lua_State *L);

/* The Lua thread that is running right now (the one a hook must use). */
lua_State *lah_running(lua_State *L);

/* Call the function at the top of the stack (below nargs arguments) in protected mode
 * with a traceback message handler. On error: logs "<what>: <message + traceback>" once
 * through ah__log-equivalent host logging, pops it, and returns 0; on success leaves
 * nresults values and returns 1. Never raises. */
int lah_pcall(lua_State *L, int nargs, int nresults, const char *what);

#endif
