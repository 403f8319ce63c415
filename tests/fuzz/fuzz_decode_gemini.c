/* fuzz_decode_gemini.c - libFuzzer target for the Gemini decoder (streams, with the raw
 * JSON error tail after their events, and non-stream bodies). Input format and checked
 * invariants: fuzz_decode.h.
 * Seeds: tests/fuzz/corpus/decode_gemini/. */
#include "fuzz_decode.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    return fz_decode_input(AH_WIRE_GEMINI, data, size);
}
