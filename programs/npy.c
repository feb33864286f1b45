/*
 * npy.c - NumPy .npy (format version 1.0) headers for ckpt tensors.
 */
#include "npy.h"

#include <stdio.h>
#include <string.h>

static const struct {
    ckpt_dtype dtype;
    const char *descr;
    int pair;
    const char *note;
} npy_types[] = {
    {CKPT_FLOAT64, "<f8", 0, "float64 -> <f8"},
    {CKPT_FLOAT32, "<f4", 0, "float32 -> <f4"},
    {CKPT_FLOAT16, "<f2", 0, "float16 -> <f2"},
    {CKPT_BFLOAT16, "<u2", 0, "bfloat16 -> <u2, the raw bits (numpy has no bfloat16)"},
    {CKPT_INT64, "<i8", 0, "int64 -> <i8"},
    {CKPT_INT32, "<i4", 0, "int32 -> <i4"},
    {CKPT_INT16, "<i2", 0, "int16 -> <i2"},
    {CKPT_INT8, "|i1", 0, "int8 -> |i1"},
    {CKPT_UINT8, "|u1", 0, "uint8 -> |u1"},
    {CKPT_BOOL, "|b1", 0, "bool -> |b1"},
    {CKPT_COMPLEX64, "<c8", 0, "complex64 -> <c8"},
    {CKPT_COMPLEX128, "<c16", 0, "complex128 -> <c16"},
    {CKPT_COMPLEX32, "<f2", 1,
     "complex32 -> <f2 with a trailing dimension of 2 (real, imaginary)"},
    {CKPT_FLOAT8_E4M3FN, "|u1", 0, "float8_e4m3fn -> |u1, the raw bits"},
    {CKPT_FLOAT8_E5M2, "|u1", 0, "float8_e5m2 -> |u1, the raw bits"},
    {CKPT_FLOAT8_E4M3FNUZ, "|u1", 0, "float8_e4m3fnuz -> |u1, the raw bits"},
    {CKPT_FLOAT8_E5M2FNUZ, "|u1", 0, "float8_e5m2fnuz -> |u1, the raw bits"},
    {CKPT_FLOAT8_E8M0FNU, "|u1", 0, "float8_e8m0fnu -> |u1, the raw bits"},
    {CKPT_UINT16, "<u2", 0, "uint16 -> <u2"},
    {CKPT_UINT32, "<u4", 0, "uint32 -> <u4"},
    {CKPT_UINT64, "<u8", 0, "uint64 -> <u8"},
};

#define NTYPES (sizeof npy_types / sizeof npy_types[0])

const char *npy_descr(ckpt_dtype dtype, int *pair)
{
    size_t i;
    for (i = 0; i < NTYPES; i++)
        if (npy_types[i].dtype == dtype) {
            if (pair)
                *pair = npy_types[i].pair;
            return npy_types[i].descr;
        }
    return NULL;
}

const char *npy_note(ckpt_dtype dtype)
{
    size_t i;
    for (i = 0; i < NTYPES; i++)
        if (npy_types[i].dtype == dtype)
            return npy_types[i].note;
    return NULL;
}

size_t npy_swap_unit(ckpt_dtype dtype)
{
    size_t size = ckpt_dtype_size(dtype);
    if (dtype == CKPT_COMPLEX32 || dtype == CKPT_COMPLEX64 ||
        dtype == CKPT_COMPLEX128)
        return size / 2;
    return size;
}

size_t npy_header(char *buf, size_t cap, ckpt_dtype dtype, const int64_t *shape,
                  uint32_t ndim)
{
    int pair = 0;
    const char *descr = npy_descr(dtype, &pair);
    size_t len, total, hlen, i, dims = ndim + (pair ? 1u : 0u);
    int k;

    if (!descr || cap < 16)
        return 0;
    memcpy(buf, "\x93NUMPY\x01\x00", 8);
    len = 10; /* magic, version, 2 bytes of header length */
    k = snprintf(buf + len, cap - len,
                 "{'descr': '%s', 'fortran_order': False, 'shape': (", descr);
    if (k < 0 || (size_t)k >= cap - len)
        return 0;
    len += (size_t)k;
    for (i = 0; i < dims; i++) {
        long long d = i < ndim ? (long long)shape[i] : 2;
        k = snprintf(buf + len, cap - len, i ? ", %lld" : "%lld", d);
        if (k < 0 || (size_t)k >= cap - len)
            return 0;
        len += (size_t)k;
    }
    /* a 1-tuple needs its comma: (3,) */
    k = snprintf(buf + len, cap - len, "%s), }", dims == 1 ? "," : "");
    if (k < 0 || (size_t)k >= cap - len)
        return 0;
    len += (size_t)k;
    /* pad with spaces, end with '\n', data 64-aligned */
    total = (len + 1 + 63) / 64 * 64;
    if (total > cap || total - 10 > 65535)
        return 0;
    memset(buf + len, ' ', total - 1 - len);
    buf[total - 1] = '\n';
    hlen = total - 10;
    buf[8] = (char)(hlen & 0xff);
    buf[9] = (char)(hlen >> 8);
    return total;
}
