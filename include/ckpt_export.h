/*
 * ckpt_export.h - writing tensors out in other formats.
 *
 * Built only on the reader API of ckpt.h; the `ckpt` tool's extract command
 * is a thin layer over these functions.
 *
 * NumPy .npy (format 1.0), as numpy.load(path, allow_pickle=False) reads
 * it: the magic "\x93NUMPY", version 1.0, a little-endian uint16 header
 * length, the header dict padded so that the data starts at a multiple of
 * 64 bytes, then the elements in C order, little-endian.
 *
 *   dtype            descr   notes
 *   float64/32/16    <f8 <f4 <f2
 *   bfloat16         <u2     raw bits (numpy has no bfloat16)
 *   int64/32/16      <i8 <i4 <i2
 *   int8, uint8      |i1 |u1
 *   uint16/32/64     <u2 <u4 <u8
 *   bool             |b1
 *   complex64/128    <c8 <c16
 *   complex32        <f2     a trailing dimension of 2: (real, imaginary)
 *   float8_*         |u1     raw bits (e4m3fn, e5m2, e4m3fnuz, e5m2fnuz, e8m0fnu)
 *
 * Thread safety: every function here only reads `f` and may run on several
 * threads at once for one file.
 */
#ifndef CKPT_EXPORT_H
#define CKPT_EXPORT_H

#include "ckpt.h"

#ifdef __cplusplus
extern "C" {
#endif

/* A sink for exported bytes: write all `n` bytes, return 0, or non-zero to
 * stop the export (which then fails with CKPT_E_IO). */
typedef int (*ckpt_write_fn)(void *ctx, const void *buf, size_t n);

/* The .npy descr for a dtype ("<f4"), and in *pair (may be NULL) whether a
 * trailing dimension of 2 is added (complex32).  NULL when the dtype has no
 * .npy form. */
CKPT_API const char *ckpt_npy_descr(ckpt_dtype dtype, int *pair);

/* One line for documentation: how dtype is stored ("bfloat16 -> <u2, the raw
 * bits (numpy has no bfloat16)"), or NULL. */
CKPT_API const char *ckpt_npy_note(ckpt_dtype dtype);

/* Room ckpt_npy_header() needs at most for a tensor of `ndim` dimensions. */
#define CKPT_NPY_HEADER_CAP(ndim) (128u + 24u * ((size_t)(ndim) + 1u))

/* The whole .npy header (magic .. newline) for a tensor of `dtype` and
 * shape[0..ndim) into buf[0..cap).  Returns its length (a multiple of 64),
 * or 0 when it does not fit or the dtype has no .npy form. */
CKPT_API size_t ckpt_npy_header(char *buf, size_t cap, ckpt_dtype dtype,
                                const int64_t *shape, uint32_t ndim);

/* Tensor t of f as a .npy file through `write`, in pieces of at most 4 MiB
 * (elements little-endian whatever the host).  0, or -1 with err filled:
 * CKPT_E_UNSUPPORTED for a dtype with no .npy form, CKPT_E_IO when `write`
 * failed, or what ckpt_tensor_read_range() said. */
CKPT_API int ckpt_export_npy_to(const ckpt_file *f, const ckpt_tensor *t,
                                ckpt_write_fn write, void *ctx, ckpt_error *err);

/* The same into the file out_path (created or truncated; removed again if
 * the export fails, so no partial file is left). */
CKPT_API int ckpt_export_npy(const ckpt_file *f, const ckpt_tensor *t,
                             const char *out_path, ckpt_error *err);

#ifdef __cplusplus
}
#endif

#endif /* CKPT_EXPORT_H */
