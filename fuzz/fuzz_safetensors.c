/*
 * fuzz_safetensors.c - the safetensors reader (src/formats/safetensors_file.c)
 * and the bounded JSON input under it (json_in.c).
 *
 * The input is opened as it is (a whole .safetensors file), and once more
 * as a header: 8-byte length + the input + 64 data bytes, so that mutated
 * JSON reaches the header checks (dtypes, shapes, offsets, tiling) without
 * the fuzzer having to keep the length prefix right.
 */
#include "fuzz_common.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fuzz_open_copy(data, size);
    if (size == 0 || size > (1u << 20)) return 0;
    size_t n = 8 + size + 64;
    uint8_t *file = calloc(1, n);
    if (!file) return 0;
    for (int i = 0; i < 8; i++) file[i] = (uint8_t)((uint64_t)size >> (8 * i));
    memcpy(file + 8, data, size);
    fuzz_open_and_exercise(file, n, NULL);
    free(file);
    return 0;
}
