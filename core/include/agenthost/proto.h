/* agenthost/proto.h - the I/O-free protocol toolkit, an advanced tier (not included by
 * agenthost.h): the SSE parser (agenthost/sse.h), the per-format stream decoders and the
 * timeline they fill (agenthost/timeline.h), and the request encoding of a conversation
 * (agenthost/conversation.h). Feed bytes in, pull events, blocks and request bodies out;
 * nothing here opens a socket or reads a clock. The worker is built on it; a program that
 * does its own HTTP can use it directly. */
#ifndef AGENTHOST_PROTO_H
#define AGENTHOST_PROTO_H

#include "agenthost/conversation.h"
#include "agenthost/sse.h"
#include "agenthost/timeline.h"

#endif
