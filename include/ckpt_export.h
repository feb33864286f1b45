/*
 * ckpt_export.h - writing tensors out in other formats.
 *
 * Built only on the reader API of ckpt.h; the `ckpt` tool's extract and
 * convert commands are thin layers over these functions.
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
 * threads at once for one file; a ckpt_safetensors_plan is used by one
 * thread at a time (the safetensors export may start one thread of its own
 * to check records while it copies, and joins it before returning).
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
CKPT_API size_t ckpt_npy_header(char *buf, size_t cap, ckpt_dtype dtype, const int64_t *shape,
                                uint32_t ndim);

/* Tensor t of f as a .npy file through `write`, in pieces of at most 4 MiB
 * (elements little-endian whatever the host).  0, or -1 with err filled:
 * CKPT_E_UNSUPPORTED for a dtype with no .npy form, CKPT_E_IO when `write`
 * failed, or what ckpt_tensor_read_range() said. */
CKPT_API int ckpt_export_npy_to(const ckpt_file *f, const ckpt_tensor *t, ckpt_write_fn write,
                                void *ctx, ckpt_error *err);

/* The same into the file out_path (created or truncated; removed again if
 * the export fails, so no partial file is left). */
CKPT_API int ckpt_export_npy(const ckpt_file *f, const ckpt_tensor *t, const char *out_path,
                             ckpt_error *err);

/* ------------------------------------------------------------------------ */
/* safetensors                                                                */
/* ------------------------------------------------------------------------ */

/*
 * safetensors (https://github.com/huggingface/safetensors): an unsigned
 * 64-bit little-endian N; N bytes of UTF-8 JSON {"__metadata__": {str: str,
 * ...}, NAME: {"dtype": "F32", "shape": [..], "data_offsets": [BEGIN, END]},
 * ...} padded with spaces to a multiple of 8; then the tensor bytes,
 * row-major and little-endian, offsets relative to the end of the header.
 * These functions write exactly the bytes `ckpt convert` writes:
 *   - every tensor of f (ckpt_tensor_at() order) keeps its name, dtype and
 *     shape; views and tensors sharing a storage each get their own copy of
 *     their elements.  dtypes: float64 F64, float32 F32, float16 F16,
 *     bfloat16 BF16, int64 I64, int32 I32, int16 I16, int8 I8, uint8 U8,
 *     bool BOOL, uint16 U16, uint32 U32, uint64 U64, float8_e4m3fn F8_E4M3,
 *     float8_e5m2 F8_E5M2, complex64 C64.  Tensors of other dtypes
 *     (complex128, complex32, float8 fnuz/e8m0) and tensors whose name is not valid UTF-8 are refused
 *     (CKPT_E_UNSUPPORTED, naming them) unless skip_unsupported leaves them
 *     out (with a warning).  A name is never changed (a NUL byte in it is
 *     written \u0000, which JSON, serde and Python read back); two equal
 *     names (a file whose keys flatten to one name: the message gives
 *     both key paths, ckpt_tensor_path_text()), or a tensor named
 *     "__metadata__", are CKPT_E_FORMAT.
 *   - "__metadata__" holds "format": "pt", "ckpt.source_format" (zip,
 *     legacy, tar, pickle) and, with `metadata`, the scalar values (str,
 *     int, float, bool) found in ckpt_root(f) under their dotted path, as
 *     Python's str() prints them ("epoch": "7", "config.lr": "0.001"),
 *     breadth first, at most 1000 of them, keys and values of at most
 *     1 KiB, 1000 levels deep (the rest left out, with a warning).
 *   - with `verify`, the CRC-32 of every ZIP record a written tensor comes
 *     from is checked (with src_fd: while the bytes are copied, records of a
 *     stored tensor read once; else, and for deflated records: one
 *     ckpt_verify() pass before writing).  A mismatch fails the export
 *     before its end (CKPT_E_FORMAT).  Legacy and TAR files carry no CRCs.
 *   - TorchScript files are refused (CKPT_E_UNSUPPORTED).
 * Memory stays bounded (an 8 MiB buffer) whatever the size of f.
 * Messages are worded for the ckpt tool and name its options: --filter
 * (filter), --skip-unsupported (skip_unsupported), --no-verify (verify 0).
 * Names from the file are shown quoted, with control characters, quotes,
 * backslashes and bytes that are not UTF-8 as \xNN.
 */

/* Where the error of a failed export comes from (error_origin below). */
#define CKPT_EXPORT_FROM_EXPORT 0 /* the export's own words (about f) */
#define CKPT_EXPORT_FROM_READER                                                                    \
    1 /* passed on from ckpt_tensor_read_range()
                                     or ckpt_verify() as they wrote it */
#define CKPT_EXPORT_FROM_OUTPUT                                                                    \
    2 /* writing the output failed; the message
                                     is "<out_name>: <reason>" */

typedef struct ckpt_export_options {
    size_t struct_size;   /* sizeof(ckpt_export_options) as compiled by the
                               caller: set by ckpt_export_options_init() */
    const char *filter;   /* only the tensors whose name matches this glob
                               (ckpt_name_match(): fnmatch(3), no flags,
                               '*' matches '.'; the name or its escaped
                               form), or NULL for all.  Default NULL */
    int skip_unsupported; /* leave out tensors safetensors cannot hold
                               (warning) instead of failing.  Default 0 */
    int verify;           /* check ZIP CRC-32s (see above).  Default 1 */
    int metadata;         /* scalar values in "__metadata__".  Default 1 */
    int src_fd;           /* a descriptor open on the file f was opened from
                               (the same bytes), or -1: stored tensors are then
                               copied from it (copy_file_range, sendfile or
                               pread) and their records checked as they pass.
                               Default -1: every byte through the reader */
    int write_behind;     /* _fd forms: hand the output to the disk every
                               8 MiB (sync_file_range), so that a later fsync
                               has little left to wait for.  Default 0 */
    const char *out_name; /* the output in messages; default NULL:
                               out_path, or "output"; "": messages about
                               the output give the reason alone */
    /* Called with (0, total) before the first tensor byte is written, then
     * as bytes are (done counts tensor bytes, total is their sum).  May be
     * NULL. */
    void (*progress)(void *ctx, uint64_t done, uint64_t total);
    /* Called with one line for each thing left out or not checked
     * ("left out 2 tensors safetensors has no dtype for: ..."); the library
     * never prints.  May be NULL. */
    void (*warning)(void *ctx, const char *line);
    void *ctx;         /* for progress and warning */
    int *error_origin; /* when not NULL: set to CKPT_EXPORT_FROM_* for
                               a failed export, so a caller that escapes the
                               reader's messages for display knows which */
    /* Tied weights: tensors that view one storage the same way (same
     * storage, dtype, offset, shape and strides; not empty) under several
     * names are written once, under the first name in byte order, and
     * "__metadata__" maps every other name to the kept one ("lm_head.weight":
     * "embed.weight"), as safetensors' save_model() records them and
     * load_model() reads them back; "ckpt.tied": "N" right before those N
     * entries tells ckpt's reader (which lists each as a tensor again) that
     * they are aliases and the metadata after them is not.  A warning lists
     * them.  safetensors has no aliasing.  Default 0: every name gets its
     * own copy. */
    int dedupe_tied;
    /* Only the tensors for which select(ctx, t) returns nonzero (after
     * `filter`; with dedupe_tied a name left out as an alias follows the
     * tensor kept), for writing shards.  NULL: all.  Called while planning. */
    int (*select)(void *ctx, const ckpt_tensor *t);
} ckpt_export_options;

/* Fill `opt` with the defaults above and set opt->struct_size.  Use the
 * macro (see "ABI" in ckpt.h). */
CKPT_API void ckpt_export_options_init_sized(ckpt_export_options *opt, size_t struct_size);
#define ckpt_export_options_init(opt) ckpt_export_options_init_sized((opt), sizeof *(opt))

/* safetensors' name for a dtype ("F32", "BF16", "F8_E4M3", "C64"), or NULL
 * when it has none (complex128, complex32, float8 fnuz and e8m0). */
CKPT_API const char *ckpt_safetensors_dtype(ckpt_dtype dtype);

/* The layout of the file an export writes, without writing it: the header
 * and where each tensor goes.  Owned by the caller: ckpt_safetensors_free(). */
typedef struct ckpt_safetensors_plan ckpt_safetensors_plan;

/* One tensor of the plan (owned by the plan). */
typedef struct ckpt_safetensors_entry {
    const char *name;          /* its name in the file (valid UTF-8, which
                                  may hold NUL: name_len bytes) */
    const char *dtype;         /* "F32", ... */
    const ckpt_tensor *tensor; /* the tensor of f it holds */
    uint64_t begin, end;       /* data_offsets: bytes after the header */
    size_t name_len;           /* bytes of name (appended: read only
                                  through ckpt_safetensors_at()) */
} ckpt_safetensors_entry;

/* Plan the export of f (opt may be NULL): steps that can refuse f come
 * here, before anything is written: names, dtypes, metadata, the header,
 * and, with verify, the CRC checks that precede the copy (records of at
 * most 64 KiB, or the ckpt_verify() pass).  Warnings go to opt->warning
 * now.  The plan keeps f and the options (the callbacks' ctx too): they
 * must outlive it.  NULL with err filled on failure. */
CKPT_API ckpt_safetensors_plan *
ckpt_export_safetensors_plan(const ckpt_file *f, const ckpt_export_options *opt, ckpt_error *err);
/* The whole header: 8 length bytes, the JSON and its padding (*len bytes;
 * the tensor data starts right after). */
CKPT_API const void *ckpt_safetensors_header(const ckpt_safetensors_plan *p, size_t *len);
CKPT_API size_t ckpt_safetensors_count(const ckpt_safetensors_plan *p);
CKPT_API const ckpt_safetensors_entry *ckpt_safetensors_at(const ckpt_safetensors_plan *p,
                                                           size_t i);
/* Bytes of the whole file: header plus data. */
CKPT_API uint64_t ckpt_safetensors_size(const ckpt_safetensors_plan *p);
/* Write the planned file (once per plan) through `write`, forward and in
 * order, or into fd as ckpt_export_safetensors_fd() does.  0, or -1 with
 * err filled. */
CKPT_API int ckpt_safetensors_write_to(ckpt_safetensors_plan *p, ckpt_write_fn write, void *wctx,
                                       ckpt_error *err);
CKPT_API int ckpt_safetensors_write_fd(ckpt_safetensors_plan *p, int fd, int seekable,
                                       ckpt_error *err);
CKPT_API void ckpt_safetensors_free(ckpt_safetensors_plan *p);

/* Plan and write in one call: */
/* Export f as safetensors through `write`, forward and in order.  0, or -1
 * with err filled (CKPT_E_IO when `write` failed). */
CKPT_API int ckpt_export_safetensors_to(const ckpt_file *f, ckpt_write_fn write, void *wctx,
                                        const ckpt_export_options *opt, ckpt_error *err);

/* Export f into the open descriptor fd: at offset 0 onwards with pwrite
 * when `seekable` (its blocks reserved first with fallocate where there is
 * one, so that a full disk fails at once), else with write() from where it
 * stands (a pipe, a terminal, a device).  fd is neither truncated, synced
 * nor closed. */
CKPT_API int ckpt_export_safetensors_fd(const ckpt_file *f, int fd, int seekable,
                                        const ckpt_export_options *opt, ckpt_error *err);

/* Export f into the file out_path (created or truncated; removed again if
 * the export fails, so that no partial file is left). */
CKPT_API int ckpt_export_safetensors(const ckpt_file *f, const char *out_path,
                                     const ckpt_export_options *opt, ckpt_error *err);

#ifdef __cplusplus
}
#endif

#endif /* CKPT_EXPORT_H */
