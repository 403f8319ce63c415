/* agenthost.h - the public API of libagenthost.
 *
 * agenthost is an embeddable host for LLM agents whose LLM and tool calls survive provider
 * faults: classified errors, one retry loop with full-jitter backoff and server hints,
 * partial-commit continuation of interrupted streams, and typed events.
 *
 * Conventions for every header included here:
 *   - ah_noun_verb() is public; handles are opaque; _new/_free come in pairs and
 *     _free(NULL) is a no-op.
 *   - Functions that can fail return ah_status; details go to the handle's error buffer.
 *   - Data passed to a callback is borrowed for the duration of that call only.
 *   - The library never prints, exits or aborts: logging goes through ah_log_set_handler().
 *
 * This header is the stable surface: version and status, log, clock, errors, events,
 * policy, the loop and its hooks, the client and the worker (an agent run), its history
 * (ah_conversation), tools, ledgers and budgets. The advanced tiers are separate headers
 * that a program includes when it uses them (their functions are in libagenthost unless
 * another library is named):
 *   agenthost/proto.h        the I/O-free toolkit: SSE parser, stream decoders and
 *                            timeline, request encoding
 *   agenthost/call.h         one LLM request as a state machine, over a transport
 *                            (agenthost/transport.h: the HTTP attempt as an ops table)
 *   agenthost/redis.h        shared budgets, pacing and ledgers on Redis
 *   agenthost/manual_clock.h a clock that moves only when told (tests)
 *   agenthost/uv.h           the libuv adapter (libagenthost_uv)
 *   agenthost/mock.h         the built-in mock provider (libagenthost_mock)
 */
#ifndef AGENTHOST_H
#define AGENTHOST_H

#include "agenthost/export.h"
#include "agenthost/status.h"
#include "agenthost/log.h"
#include "agenthost/clock.h"
#include "agenthost/error.h"
#include "agenthost/wire.h"
#include "agenthost/event.h"
#include "agenthost/policy.h"
#include "agenthost/loop.h"
#include "agenthost/capabilities.h"
#include "agenthost/conversation.h"
#include "agenthost/ledger.h"
#include "agenthost/budget.h"
#include "agenthost/tool.h"
#include "agenthost/worker.h"

#endif
