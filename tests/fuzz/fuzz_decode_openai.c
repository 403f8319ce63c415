/* fuzz_decode_openai.c - libFuzzer target for the OpenAI Chat Completions decoder
 * (streams and non-stream bodies). Input format and checked invariants: fuzz_decode.h.
 * Seeds: tests/fuzz/corpus/decode_openai/. */
#include "fuzz_decode.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    return fz_decode_input(AH_WIRE_OPENAI, data, size);
}
