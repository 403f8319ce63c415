/* agenthost/wire.h - the provider wire formats a client can speak (docs/providers-decoding.md). */
#ifndef AGENTHOST_WIRE_H
#define AGENTHOST_WIRE_H

#ifdef __cplusplus
extern "C" {
#endif

/* X(NAME, "name", "default request path") */
#define AH_WIRE_MAP(X)                                                                    \
    X(ANTHROPIC, "anthropic", "/v1/messages")                                             \
    X(OPENAI, "openai", "/v1/chat/completions")                                           \
    X(RESPONSES, "responses", "/v1/responses")

typedef enum ah_wire {
#define AH__WIRE_ENUM(name, s, path) AH_WIRE_##name,
    AH_WIRE_MAP(AH__WIRE_ENUM)
#undef AH__WIRE_ENUM
        AH_WIRE_COUNT_
} ah_wire;

const char *ah_wire_name(ah_wire w);      /* "unknown" out of range */
const char *ah_wire_path(ah_wire w);      /* "" out of range */
int ah_wire_from_name(const char *name); /* the ah_wire, or -1 */

#ifdef __cplusplus
}
#endif
#endif
