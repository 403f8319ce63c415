/* fuzz_decode_fast.c - libFuzzer target proving the decoder's fast path
 * (core/decode_fast.c) decodes exactly like the cJSON path: every input is decoded both
 * ways and everything observable is compared (tests/fuzz/decode_same.h). Input: one
 * control byte (bit 0: the wire format, Anthropic or Chat Completions; the rest picks
 * the point where the stream is cut into two feeds), then the stream. Seeds:
 * tests/fuzz/corpus/decode_fast/ (the recorded real streams and hand-made near misses of
 * the fast shapes). */
#include "decode_same.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    uint8_t ctl = data[0];
    ah_wire wire = (ctl & 1) ? AH_WIRE_OPENAI : AH_WIRE_ANTHROPIC;
    data++;
    size--;
    size_t split = size ? (size_t)(((uint64_t)(ctl >> 1) * 2654435761u) % (size + 1)) : 0;
    same_check(wire, data, size, split);
    return 0;
}
