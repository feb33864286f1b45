/*
 * fuzz_legacy.c - the legacy stream (PyTorch 0.1.10 .. 1.5), with inputs
 * that are always legacy streams: the magic number, protocol version and
 * sys_info pickles torch writes are put in front, and the input is the rest:
 * the object pickle, the pickled list of storage keys, then each storage's
 * int64 element count and bytes.
 */
#include "fuzz_common.h"

/* magic 0x1950a86a20f9469cfc6c, protocol 1001, sys_info (protocol 2) */
static const uint8_t prefix[] = "\x80\x02\x8a\x0al\xfc\x9c\x46\xf9 "
                                "j\xa8P\x19.\x80\x02M\xe9\x03.\x80\x02}q\x00(X\x10\x00\x00\x00"
                                "protocol_versionq\x01M\xe9\x03X\x0d\x00\x00\x00little_"
                                "endianq\x02\x88X\x0a\x00\x00\x00type_sizesq\x03"
                                "}q\x04("
                                "X\x05\x00\x00\x00shortq\x05K\x02X\x03\x00\x00\x00intq\x06K\x04X"
                                "\x04\x00\x00\x00longq\x07K\x04uu.";

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    size_t pn = sizeof prefix - 1;
    if (size > (1u << 20)) return 0;
    uint8_t *file = malloc(pn + size);
    if (!file) return 0;
    memcpy(file, prefix, pn);
    if (size) memcpy(file + pn, data, size);
    fuzz_open_and_exercise(file, pn + size, NULL);
    free(file);
    return 0;
}
