/* fuzz_decode_fast.c - libFuzzer target proving the decoder's fast paths
 * (core/decode_fast.c: the delta shapes, and Responses' closing events parsed without
 * the answer they repeat; core/decode_tree.c: the other events from a filtered tree
 * without cJSON) decode exactly like the cJSON path: every input is decoded three ways
 * (all fast paths, cJSON alone, all but decode_tree.c's) and everything observable is
 * compared (tests/fuzz/decode_same.h). Input: one
 * control byte (bits 0-1: the wire format, 0 Anthropic, 1 Chat Completions, 2 and 3
 * Responses; bit 2, Responses only: the stream breaks and is re-attached at the cut; the
 * rest picks the point where the stream is cut into two feeds), then the stream. Seeds:
 * tests/fuzz/corpus/decode_fast/ (the recorded real streams and hand-made near misses of
 * the fast shapes). */
#include "decode_same.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    uint8_t ctl = data[0];
    ah_wire wire = (ctl & 3) == 0   ? AH_WIRE_ANTHROPIC
                   : (ctl & 3) == 1 ? AH_WIRE_OPENAI
                                    : AH_WIRE_RESPONSES;
    int reattach = wire == AH_WIRE_RESPONSES && (ctl & 4);
    data++;
    size--;
    size_t split = size ? (size_t)(((uint64_t)(ctl >> 3) * 2654435761u) % (size + 1)) : 0;
    same_check_reattach(wire, data, size, split, reattach);
    return 0;
}
