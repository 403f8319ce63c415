/* agenthost/capabilities.h - what a provider's model accepts when a cut stream is
 * continued: the one table of model capabilities, by wire format and model id.
 *
 * A continuation takes the first rung its request supports (docs/worker.md, "The
 * continuation ladder"): RESUME (re-attach to the same response; OpenAI Responses in
 * background mode), PREFILL (the partial assistant message goes last and the model
 * continues it), PROMPT (a visible user message asks the model to continue). Whether
 * PREFILL is possible is a property of the model, decided here and nowhere else.
 */
#ifndef AGENTHOST_CAPABILITIES_H
#define AGENTHOST_CAPABILITIES_H

#include "agenthost/export.h"

#include "agenthost/error.h"
#include "agenthost/event.h"
#include "agenthost/wire.h"

#ifdef __cplusplus
extern "C" {
#endif

/* A client's continuation setting (ah.client{ continuation = ... }). AUTO: the rung comes
 * from the table, and a prefill the provider refuses switches the client to PROMPT for
 * the rest of its life. PREFILL / PROMPT: always that rung (a refused prefill then fails
 * the run like any other HTTP 400). */
#define AH_CONTINUATION_MAP(X) X(AUTO, "auto") X(PREFILL, "prefill") X(PROMPT, "prompt")
typedef enum ah_continuation {
#define AH__CS_ENUM(name, s) AH_CONTINUATION_##name,
    AH_CONTINUATION_MAP(AH__CS_ENUM)
#undef AH__CS_ENUM
        AH_CONTINUATION_COUNT_
} ah_continuation;

AH_EXPORT const char *ah_continuation_name(ah_continuation c); /* "unknown" out of range */
AH_EXPORT int ah_continuation_from_name(const char *name);     /* -1 for an unknown name */

/* The prompt rung's default text, added to history as a user message. */
#define AH_CONTINUE_PROMPT_DEFAULT                                                        \
    "Your previous reply was cut off. Continue exactly where it stopped, without "        \
    "repeating what you already wrote."

typedef struct ah_model_caps {
    int prefill;      /* the model continues a trailing assistant message */
    const char *rule; /* the table row that decided, in words (static) */
} ah_model_caps;

/* Look up (wire, model id, thinking) in the table. `thinking`: the request enables
 * extended thinking (Anthropic refuses a prefill with it). model may be NULL. */
AH_EXPORT ah_model_caps ah_model_capabilities(ah_wire wire, const char *model, int thinking);

/* The Claude version in a model id ("claude-opus-4-6" -> 4.6, "claude-3-5-sonnet-20241022"
 * -> 3.5, "claude-sonnet-4-20250514" -> 4.0, "anthropic.claude-opus-4-7-v1:0" -> 4.7).
 * Returns 1 and fills major/minor, or 0 when the id names no Claude version. */
AH_EXPORT int ah_claude_version(const char *model, int *major, int *minor);

/* 1 when err is a provider's refusal of a trailing assistant message: HTTP 400 whose
 * message says the model "does not support assistant message prefill" or that the
 * conversation "must end with a user message". */
AH_EXPORT int ah_error_is_prefill_refusal(const ah_error *err);

#ifdef __cplusplus
}
#endif
#endif
