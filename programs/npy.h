/*
 * npy.h - NumPy .npy (format version 1.0) headers for ckpt tensors.
 *
 * The file numpy.load(path, allow_pickle=False) reads: the magic
 * "\x93NUMPY", version 1.0, a little-endian uint16 header length, then the
 * header dict "{'descr': '<f4', 'fortran_order': False, 'shape': (3, 4), }"
 * padded with spaces and a final newline so that the data starts at a
 * multiple of 64 bytes, then the elements in C (row-major) order,
 * little-endian.
 *
 * dtype            descr   notes
 * float64          <f8
 * float32          <f4
 * float16          <f2
 * bfloat16         <u2     raw bits (numpy has no bfloat16)
 * int64/32/16      <i8 <i4 <i2
 * int8             |i1
 * uint8            |u1
 * uint16/32/64     <u2 <u4 <u8
 * bool             |b1
 * complex64        <c8
 * complex128       <c16
 * complex32        <f2     a trailing dimension of 2: (real, imaginary)
 * float8_*         |u1     raw bits (e4m3fn, e5m2, e4m3fnuz, e5m2fnuz, e8m0fnu)
 */
#ifndef CKPT_NPY_H
#define CKPT_NPY_H

#include <stddef.h>
#include <stdint.h>

#include "ckpt.h"

/* The descr for a dtype ("<f4"), and whether a trailing dimension of 2 is
 * added (complex32).  NULL for a dtype with no mapping. */
const char *npy_descr(ckpt_dtype dtype, int *pair);

/* One line of text for --help and documentation: how dtype is stored. */
const char *npy_note(ckpt_dtype dtype);

/* Bytes to reverse per number when writing little-endian from this host:
 * the element size, or half of it for complex types. */
size_t npy_swap_unit(ckpt_dtype dtype);

/* Write the full header (magic .. newline) for a tensor of `dtype` and
 * `shape[0..ndim)` into buf (cap bytes).  Returns its length (a multiple of
 * 64), or 0 when it does not fit or the dtype has no mapping. */
size_t npy_header(char *buf, size_t cap, ckpt_dtype dtype, const int64_t *shape,
                  uint32_t ndim);

/* Room npy_header() needs at most for `ndim` dimensions. */
#define NPY_HEADER_CAP(ndim) (128u + 24u * ((size_t)(ndim) + 1u))

#endif /* CKPT_NPY_H */
