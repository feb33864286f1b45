/*
 * bytes.c - tools (on the public API only): byte order for exported
 * tensors, shared by the .npy and safetensors writers.
 */
#include "tools.h"

#include <stdint.h>
#include <string.h>

int ck_tools_host_big_endian(void)
{
    const uint16_t one = 1;
    unsigned char first;
    memcpy(&first, &one, 1);
    return first == 0;
}

size_t ck_tools_swap_unit(ckpt_dtype dtype)
{
    size_t size = ckpt_dtype_size(dtype);
    if (dtype == CKPT_COMPLEX32 || dtype == CKPT_COMPLEX64 || dtype == CKPT_COMPLEX128)
        return size / 2;
    return size;
}

void ck_tools_swap_bytes(unsigned char *p, size_t n, size_t unit)
{
    unsigned char *end;
    if (unit < 2) return;
    end = p + n - n % unit;
    for (; p < end; p += unit) {
        size_t a = 0, b = unit - 1;
        while (a < b) {
            unsigned char t = p[a];
            p[a++] = p[b];
            p[b--] = t;
        }
    }
}
