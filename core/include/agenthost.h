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
 */
#ifndef AGENTHOST_H
#define AGENTHOST_H

#include "agenthost/status.h"
#include "agenthost/log.h"
#include "agenthost/clock.h"
#include "agenthost/error.h"
#include "agenthost/sse.h"
#include "agenthost/wire.h"
#include "agenthost/event.h"
#include "agenthost/conversation.h"
#include "agenthost/ledger.h"
#include "agenthost/budget.h"
#include "agenthost/tool.h"
#include "agenthost/policy.h"
#include "agenthost/loop.h"
#include "agenthost/transport.h"
#include "agenthost/call.h"
#include "agenthost/mock.h"
#include "agenthost/capabilities.h"
#include "agenthost/worker.h"
#include "agenthost/timeline.h"

#endif
