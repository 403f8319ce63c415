/* fuzz_conversation.c - libFuzzer target for the neutral conversation JSON import and the
 * three request encoders. Invariants checked: import never crashes or leaks on any
 * input; an imported conversation exports to JSON that imports back to the same JSON;
 * every wire format either encodes it or fails with a message (never crashes); Gemini
 * with a Gemini 3 model as well (media inside a functionResponse). */
#include "agenthost.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char err[256];
    ah_conversation *c = NULL;
    if (ah_conversation_from_json((const char *)data, size, &c, err, sizeof err) != AH_OK)
        return 0;
    char *a = NULL, *b = NULL;
    ah_conversation *d = NULL;
    if (ah_conversation_to_json(c, &a, NULL) != AH_OK ||
        ah_conversation_from_json(a, strlen(a), &d, err, sizeof err) != AH_OK ||
        ah_conversation_to_json(d, &b, NULL) != AH_OK || strcmp(a, b) != 0)
        abort(); /* the round trip must be exact */

    static const ah_tool_def tools[] = {{"add", "Add.", "{\"type\":\"object\"}"}};
    ah_request_opts o;
    ah_request_opts_init(&o);
    o.model = "m";
    o.max_tokens = 16;
    o.tools = tools;
    o.n_tools = 1;
    o.stream = 1;
    /* a Gemini 3 model too: a tool result's image goes inside its functionResponse */
    for (int w = 0; w <= AH_WIRE_COUNT_; w++) {
        char *body = NULL;
        o.model = w == AH_WIRE_COUNT_ ? "gemini-3-flash" : "m";
        ah_wire wire = w == AH_WIRE_COUNT_ ? AH_WIRE_GEMINI : (ah_wire)w;
        if (ah_request_encode(wire, c, &o, &body, NULL, err, sizeof err) == AH_OK)
            free(body);
        else if (body || !err[0])
            abort(); /* a failure returns no body and says why */
    }
    free(a);
    free(b);
    ah_conversation_free(d);
    ah_conversation_free(c);
    return 0;
}
