/*
 * npy.c - tensors as NumPy .npy files (format 1.0); see ckpt_export.h.
 */
#define CKPT_BUILDING 1 /* export the CKPT_API functions */
#include "ckpt_export.h"
#include "tools.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
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
    {CKPT_COMPLEX32, "<f2", 1, "complex32 -> <f2 with a trailing dimension of 2 (real, imaginary)"},
    {CKPT_FLOAT8_E4M3FN, "|u1", 0, "float8_e4m3fn -> |u1, the raw bits"},
    {CKPT_FLOAT8_E5M2, "|u1", 0, "float8_e5m2 -> |u1, the raw bits"},
    {CKPT_FLOAT8_E4M3FNUZ, "|u1", 0, "float8_e4m3fnuz -> |u1, the raw bits"},
    {CKPT_FLOAT8_E5M2FNUZ, "|u1", 0, "float8_e5m2fnuz -> |u1, the raw bits"},
    {CKPT_FLOAT8_E8M0FNU, "|u1", 0, "float8_e8m0fnu -> |u1, the raw bits"},
    {CKPT_UINT16, "<u2", 0, "uint16 -> <u2"},
    {CKPT_UINT32, "<u4", 0, "uint32 -> <u4"},
    {CKPT_UINT64, "<u8", 0, "uint64 -> <u8"},
    {CKPT_BITS8, "|u1", 0, "bits8 -> |u1, the raw bits"},
    {CKPT_BITS16, "<u2", 0, "bits16 -> <u2, the raw bits"},
    {CKPT_BITS1X8, "|u1", 0, "bits1x8 -> |u1, the raw bits"},
    {CKPT_BITS2X4, "|u1", 0, "bits2x4 -> |u1, the raw bits"},
    {CKPT_BITS4X2, "|u1", 0, "bits4x2 -> |u1, the raw bits"},
    {CKPT_QINT8, "|i1", 0, "qint8 -> |i1, the stored integers (int_repr)"},
    {CKPT_QUINT8, "|u1", 0, "quint8 -> |u1, the stored integers (int_repr)"},
    {CKPT_QINT32, "<i4", 0, "qint32 -> <i4, the stored integers (int_repr)"},
};

#define NTYPES (sizeof npy_types / sizeof npy_types[0])

const char *ckpt_npy_descr(ckpt_dtype dtype, int *pair)
{
    size_t i;
    for (i = 0; i < NTYPES; i++)
        if (npy_types[i].dtype == dtype) {
            if (pair) *pair = npy_types[i].pair;
            return npy_types[i].descr;
        }
    return NULL;
}

const char *ckpt_npy_note(ckpt_dtype dtype)
{
    size_t i;
    for (i = 0; i < NTYPES; i++)
        if (npy_types[i].dtype == dtype) return npy_types[i].note;
    return NULL;
}

size_t ckpt_npy_header(char *buf, size_t cap, ckpt_dtype dtype, const int64_t *shape, uint32_t ndim)
{
    int pair = 0;
    const char *descr = ckpt_npy_descr(dtype, &pair);
    size_t len, total, hlen, i, dims = ndim + (pair ? 1u : 0u);
    int k;

    if (!descr || cap < 16) return 0;
    memcpy(buf, "\x93NUMPY\x01\x00", 8);
    len = 10; /* magic, version, 2 bytes of header length */
    k = snprintf(buf + len, cap - len, "{'descr': '%s', 'fortran_order': False, 'shape': (", descr);
    if (k < 0 || (size_t)k >= cap - len) return 0;
    len += (size_t)k;
    for (i = 0; i < dims; i++) {
        long long d = i < ndim ? (long long)shape[i] : 2;
        k = snprintf(buf + len, cap - len, i ? ", %lld" : "%lld", d);
        if (k < 0 || (size_t)k >= cap - len) return 0;
        len += (size_t)k;
    }
    /* a 1-tuple needs its comma: (3,) */
    k = snprintf(buf + len, cap - len, "%s), }", dims == 1 ? "," : "");
    if (k < 0 || (size_t)k >= cap - len) return 0;
    len += (size_t)k;
    /* pad with spaces, end with '\n', data 64-aligned */
    total = (len + 1 + 63) / 64 * 64;
    if (total > cap || total - 10 > 65535) return 0;
    memset(buf + len, ' ', total - 1 - len);
    buf[total - 1] = '\n';
    hlen = total - 10;
    buf[8] = (char)(hlen & 0xff);
    buf[9] = (char)(hlen >> 8);
    return total;
}

/* ------------------------------------------------------------------------ */
/* Writing                                                                    */
/* ------------------------------------------------------------------------ */

#define NPY_CHUNK ((size_t)4 << 20) /* a multiple of every element size */

static int fail(ckpt_error *err, ckpt_code code, const char *fmt, ...)
{
    va_list ap;
    if (err) {
        memset(err, 0, sizeof *err);
        err->code = code;
        err->offset = -1;
        va_start(ap, fmt);
        vsnprintf(err->message, sizeof err->message, fmt, ap);
        va_end(ap);
    }
    return -1;
}

int ckpt_export_npy_to(const ckpt_file *f, const ckpt_tensor *t, ckpt_write_fn write, void *ctx,
                       ckpt_error *err)
{
    size_t cap = CKPT_NPY_HEADER_CAP(t->ndim), hlen, unit = ck_tools_swap_unit(t->dtype);
    int swap = unit > 1 && ck_tools_host_big_endian();
    unsigned char *buf;
    uint64_t pos = 0;
    size_t bufcap = NPY_CHUNK;

    if (t->nbytes < bufcap) bufcap = t->nbytes > cap ? (size_t)t->nbytes : cap;
    buf = malloc(bufcap);
    if (!buf) return fail(err, CKPT_E_NOMEM, "out of memory for a .npy buffer");
    hlen = ckpt_npy_header((char *)buf, cap, t->dtype, t->shape, t->ndim);
    if (hlen == 0) {
        free(buf);
        return fail(err, CKPT_E_UNSUPPORTED, "tensor '%s': dtype %s has no .npy form",
                    t->name ? t->name : "", ckpt_dtype_name(t->dtype));
    }
    if (write(ctx, buf, hlen) != 0) {
        free(buf);
        return fail(err, CKPT_E_IO, "writing the .npy header failed");
    }
    while (pos < t->nbytes) {
        size_t n = t->nbytes - pos < bufcap ? (size_t)(t->nbytes - pos) : bufcap;
        if (ckpt_tensor_read_range(f, t, pos, buf, n, err) != 0) {
            free(buf);
            return -1;
        }
        if (swap) ck_tools_swap_bytes(buf, n, unit);
        if (write(ctx, buf, n) != 0) {
            free(buf);
            return fail(err, CKPT_E_IO, "writing the .npy data failed");
        }
        pos += n;
    }
    free(buf);
    return 0;
}

static int write_file(void *ctx, const void *buf, size_t n)
{
    return fwrite(buf, 1, n, (FILE *)ctx) == n ? 0 : -1;
}

int ckpt_export_npy(const ckpt_file *f, const ckpt_tensor *t, const char *out_path, ckpt_error *err)
{
    FILE *fp = fopen(out_path, "wb");
    int r, e = 0;
    if (!fp) return fail(err, CKPT_E_IO, "%s: %s", out_path, strerror(errno));
    r = ckpt_export_npy_to(f, t, write_file, fp, err);
    if (r != 0 && err && err->code == CKPT_E_IO && ferror(fp)) e = errno;
    if (fclose(fp) != 0 && r == 0) {
        e = errno;
        r = -1;
    }
    if (r != 0) {
        remove(out_path);
        if (e != 0) fail(err, CKPT_E_IO, "%s: %s", out_path, strerror(e));
    }
    return r;
}
