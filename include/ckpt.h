/*
 * ckpt.h - read PyTorch checkpoint files without PyTorch.
 *
 * A checkpoint is a pickle that describes the saved object, with each tensor's
 * bytes kept in a separate storage in the same container.  libckpt parses the
 * pickle WITHOUT EXECUTING ANYTHING, hands back every tensor (name, dtype,
 * shape, strides, storage) and reads its bytes only when asked.
 *
 * Containers, detected from the content (never from the file name):
 *   - ZIP            torch.save since PyTorch 1.6 (stored or deflated records)
 *   - legacy stream  PyTorch 0.1.10 .. 1.5 (_use_new_zipfile_serialization=False)
 *   - TAR            before PyTorch 0.1.10
 *   - plain pickle   read as values, no tensors
 *   - TorchScript    torch.jit.save archives (1.x, 2.x, lite .ptl): the tensors
 *                    are torch.jit.load(f).state_dict(), named from the
 *                    module graph and the class definitions under code/ (a
 *                    module pickled by its __getstate__, as quantized Conv
 *                    and Linear are, has none: its weights are values)
 *   - torch.export   .pt2 archives of torch.export.save (PyTorch 2.6): the
 *                    tensors are ep.state_dict, then ep.constants, read in
 *                    place from the torch.save archives nested in it
 *   - safetensors    header checked against the file, tensors read in place
 *   - mobile         PyTorch Mobile flatbuffer modules ("PTMF" at byte 4:
 *                    save_jit_module_to_flatbuffer, _save_for_lite_interpreter
 *                    with _use_flatbuffer=True; 1.13, 2.x): the tensors are
 *                    torch.jit.load(f).state_dict(), named as TorchScript's,
 *                    read in place; no pickle inside
 * and, through ckpt_open_path(), checkpoints of several files: shard
 * indexes (*.index.json) and torch.distributed.checkpoint folders.
 *
 * Conventions
 *   - Every function that can fail takes a `ckpt_error *err` out-parameter,
 *     which may be NULL.  On failure it receives a code, a one-line message and
 *     the byte offset in the file where the input went wrong (-1 if none).
 *   - The library never prints, never exits, never aborts and keeps no global
 *     or thread-local state.
 *   - Everything returned by a `ckpt_file` (tensors, names, values, strings) is
 *     owned by it and lives until ckpt_close().
 *   - A `ckpt_file` is immutable after ckpt_open*(): all const accessors and
 *     ckpt_tensor_read() may be called from several threads at once.
 *   - Every length and offset read from the file is checked against the file
 *     and against the limits in ckpt_options before it is used.
 *
 * ABI: structs the caller allocates can grow
 *   - ckpt_options and ckpt_info begin with `size_t struct_size`, the size of
 *     the layout the caller was compiled with.  ckpt_options_init() and
 *     ckpt_get_info() are macros that pass sizeof *ptr to the _sized
 *     functions, so a program built against an older ckpt.h keeps working
 *     with a newer library: ckpt_open*() reads only the first
 *     opt->struct_size bytes (the members past them keep their defaults) and
 *     ckpt_get_info() writes only the first `size` bytes (bytes past them are
 *     left untouched; info->struct_size says how many were filled).  Always
 *     start from ckpt_options_init(); an options struct whose struct_size is
 *     0 is refused with CKPT_E_ARG.
 *   - New members are only ever appended, never inserted, reordered or
 *     resized, and never into the tail padding of the previous layout.
 *   - Enumerations only gain values; there is no public "count" enumerator,
 *     so do not size arrays by enum values: a newer library may return dtypes
 *     (or kinds, formats) this header does not list.  ckpt_dtype_name()
 *     returns "unknown" and ckpt_dtype_size() 0 for a value it does not know.
 */
#ifndef CKPT_H
#define CKPT_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define CKPT_VERSION_MAJOR 0
#define CKPT_VERSION_MINOR 1
#define CKPT_VERSION_PATCH 0
#define CKPT_VERSION_STRING "0.1.0"

#if defined(CKPT_BUILDING) && defined(__GNUC__)
#define CKPT_API __attribute__((visibility("default")))
#else
#define CKPT_API
#endif

/* ------------------------------------------------------------------------ */
/* Errors                                                                     */
/* ------------------------------------------------------------------------ */

typedef enum ckpt_code {
    CKPT_OK = 0,
    CKPT_E_IO = 1,          /* the operating system failed a read or open */
    CKPT_E_NOMEM = 2,       /* an allocation failed */
    CKPT_E_FORMAT = 3,      /* the container is malformed or truncated */
    CKPT_E_PICKLE = 4,      /* the pickle is malformed */
    CKPT_E_LIMIT = 5,       /* a limit in ckpt_options was exceeded */
    CKPT_E_UNSUPPORTED = 6, /* valid, but not something ckpt reads (sparse, ...) */
    CKPT_E_NOTFOUND = 7,    /* no such tensor or key */
    CKPT_E_ARG = 8,         /* a caller error: bad argument, buffer too small */
    CKPT_E_NOTMAPPABLE = 9  /* ckpt_tensor_data(): use ckpt_tensor_read() instead */
} ckpt_code;

typedef struct ckpt_error {
    ckpt_code code;
    int64_t offset;    /* byte offset in the file where it went wrong, or -1 */
    char message[256]; /* one line, no trailing newline */
} ckpt_error;

/* A static name for a code, e.g. "format error". Never NULL. */
CKPT_API const char *ckpt_code_name(ckpt_code code);

/* ------------------------------------------------------------------------ */
/* Options and limits                                                         */
/* ------------------------------------------------------------------------ */

/* A global (class or function) a pickle references, as the machine resolved
 * it through GLOBAL, STACK_GLOBAL and the memo.  See ckpt_global_at(). */
typedef struct ckpt_global_ref {
    const char *module; /* as resolved by the machine: a Python 2 name is
                           renamed as Python's unpickler renames it while
                           the pickle's protocol is below 3 (CPython's
                           _compat_pickle NAME_MAPPING, then IMPORT_MAPPING) */
    const char *name;
    const char *pickle; /* which pickle: "data.pkl", "legacy:object", ... */
    int64_t offset;     /* byte offset in the file of the opcode */
    int called;         /* REDUCE/NEWOBJ/INST/OBJ applied it */
    /* A global of a pickle found inside a bytes value (options'
     * scan_all_pickles): what the file hands those bytes to
     * ("pickle.loads", "torch.storage._load_from_bytes", "io.BytesIO",
     * ...), or "" when nothing in the file hands them to a loader (the
     * value only begins like a pickle: a later load of those bytes would run
     * this global, loading the file does not).  Through bytes inside bytes:
     * "" when any of them is not handed to a loader.  NULL for a global of
     * the file's own pickles. */
    const char *loader;
    /* For scanners (options' scan_all_pickles; NULL without it): the
     * argument tuple the pickle called this global with, when every call
     * the machine saw (REDUCE, NEWOBJ, INST, OBJ; NEWOBJ_EX without its
     * keywords) used that one tuple; NULL when not called, called with
     * several, or through a path that shows no arguments.  Read it with
     * ckpt_value_*(), during on_global only. */
    const struct ckpt_value *args;
} ckpt_global_ref;

/* Limits protect against hostile files.  Each is checked BEFORE an allocation
 * or a loop of that size.  Defaults (set by ckpt_options_init):            */
#define CKPT_DEFAULT_MAX_PICKLE_BYTES (100ull << 20) /* 100 MiB per pickle   */
#define CKPT_DEFAULT_MAX_TENSOR_BYTES (10ull << 30)  /* 10 GiB per tensor    */
#define CKPT_DEFAULT_MAX_OPS (200ull << 20)          /* opcodes per pickle  */
#define CKPT_DEFAULT_MAX_STACK (1u << 22)            /* stack + mark entries */
#define CKPT_DEFAULT_MAX_DEPTH 1000u                 /* nesting of values    */
#define CKPT_DEFAULT_MAX_MEMO (1u << 22)             /* memo entries         */
#define CKPT_DEFAULT_MAX_EXPANSION (1ull << 22) /* nodes a walk may visit (+ pickle bytes / 2) */
#define CKPT_DEFAULT_MAX_ENTRIES (1u << 22)     /* ZIP/TAR records, storages */
#define CKPT_DEFAULT_MAX_RANK 64u               /* tensor dimensions    */
#define CKPT_DEFAULT_MAX_MEMORY                                                                    \
    (240ull << 20) /* metadata memory (+24 per pickle byte past 16 MiB) */

typedef struct ckpt_options {
    size_t struct_size;        /* sizeof(ckpt_options) as compiled by the
                                  caller: set by ckpt_options_init() */
    uint64_t max_pickle_bytes; /* bytes of one pickle (data.pkl, a legacy pickle, ...) */
    uint64_t max_tensor_bytes; /* bytes one tensor may materialise: checked
                                  by ckpt_tensor_read*() and ckpt_tensor_data(),
                                  not at open (a huge tensor still lists) */
    uint64_t max_ops;          /* opcodes executed in one pickle */
    uint32_t max_stack;        /* pickle stack depth plus marks */
    uint32_t max_depth;        /* how deeply values may nest when walked
                                  (at most 2048: the walk uses C stack) */
    uint32_t max_memo;         /* memo keys in one pickle: a key must be below
                                  max_memo + the pickle's length in bytes */
    uint64_t max_expansion;    /* nodes visited by one walk of the value tree
                                  and words copied out of shared values
                                  (against memo/DUP "billion laughs"
                                  sharing), plus half a step per pickle byte
                                  (a safetensors header's bytes count as
                                  pickle bytes) so that big honest state
                                  dicts fit; also the steps a DCP tensor's
                                  chunk-overlap check may take beyond 4 a
                                  chunk and dimension (splits and grids of
                                  splits need fewer) */
    uint32_t max_entries;      /* archive records, storages, tensors, and
                                  globals (GLOBAL/STACK_GLOBAL references)
                                  each counted on its own */
    uint32_t max_rank;         /* dimensions of one tensor (at most 64) */
    uint64_t max_memory;       /* memory one open file may hold for its
                                  values, names and tables, the pickle
                                  machine's stack and memo, and pickle
                                  buffers; plus 24 bytes for every pickle
                                  byte past the first 16 MiB (counting at
                                  most the file's size), so that any input
                                  under 16 MiB stays under max_memory while
                                  a big honest checkpoint (8-15 bytes per
                                  pickle byte) still opens.  0: no limit.
                                  Tensor bytes are not counted: they are
                                  read on request into the caller's buffer.
                                  A checkpoint of several files
                                  (ckpt_open_path()) has one such budget
                                  for all its files together, counting the
                                  pickle bytes of all its parts; the
                                  safetensors header counts as pickle
                                  bytes */
    const char *key;           /* the value to name and list tensors from, or
                                  NULL for the whole object: a top-level key
                                  ("state_dict"; the root dict's str key
                                  spelled so, else as tensor names spell
                                  keys: "3" for the int key 3); failing that
                                  a path of keys joined by '.'
                                  ("optimizer.state.0": dict keys, list
                                  indices, a module's parameters, buffers
                                  and submodules, an object's items or
                                  state dict), where at each level the
                                  longest run of components that is a key is
                                  tried first, so that a key holding dots is
                                  reached too ("a.b.c": the key "a.b.c", or
                                  "c" under "a.b", or "b.c" under "a", ...).
                                  Tensor names are then relative to it (a
                                  tensor selected itself is named "");
                                  CKPT_E_NOTFOUND when there is none */
    int use_mmap;              /* ckpt_open(): map the file (zero-copy reads);
                                  if the file shrinks while mapped the process
                                  gets SIGBUS, so map only files you control */
    int skip_tensors;          /* parse every pickle but do not name or check
                                  tensors (tensor_count stays 0): for scanners,
                                  so a refused layout or a bad extent does not
                                  hide the rest */
    /* Called once for every global (class or function) a pickle references,
     * as soon as that pickle has been run, even when the open fails later:
     * a scanner sees what a hostile file names up to where it breaks.  `g`
     * is valid only during the call.  May be NULL. */
    void (*on_global)(void *ctx, const ckpt_global_ref *g);
    void *on_global_ctx;
    /* For scanners: also run the pickles a load never reads, and drop their
     * values: every further pickle after STOP in a plain pickle file (joblib
     * and other loaders call pickle.load again), labelled "pickle#2",
     * "pickle#3", ...; in a torch ZIP every record besides data.pkl (and
     * constants.pkl) that is a *.pkl, begins like a pickle (PROTO, or a
     * protocol 0/1 GLOBAL/INST) or repeats a
     * name (no longer an error), labelled "NAME (record N)"; the pickles
     * after the STOP of a ZIP record ("data.pkl#2"), of a TAR member
     * ("tar:pickle#2") and after a legacy stream's last storage
     * ("legacy:trailing#1"); and every bytes value that begins with PROTO
     * or is an argument of a loader call (pickle.loads, torch.load(
     * io.BytesIO(b)), ...), opened as a file of its own, 8 deep at most,
     * its globals labelled "LABEL>bytes@OFFSET[>inner label]".  One that does
     * not parse gives a note, not an error (its globals reach on_global all
     * the same).  Default 0. */
    int scan_all_pickles;
    /* Bytes of `key` when it holds NUL bytes (a key 'w\x00evil'); 0: the
     * key is NUL-terminated.  Default 0. */
    size_t key_len;
} ckpt_options;

/* Fill `opt` with the defaults above (no key, no mmap) and set
 * opt->struct_size.  Use the macro; the function takes the caller's
 * sizeof(ckpt_options) (see "ABI" at the top). */
CKPT_API void ckpt_options_init_sized(ckpt_options *opt, size_t struct_size);
#define ckpt_options_init(opt) ckpt_options_init_sized((opt), sizeof *(opt))

/* ------------------------------------------------------------------------ */
/* Opening                                                                    */
/* ------------------------------------------------------------------------ */

typedef struct ckpt_file ckpt_file;

/* A caller-supplied byte source: read exactly `n` bytes at `offset` into
 * `buf`; return 0 on success, non-zero on failure.  `size` is the total size.
 * Must be safe to call from several threads if the file is shared. */
typedef struct ckpt_reader {
    int (*read)(void *opaque, uint64_t offset, void *buf, size_t n);
    void (*close)(void *opaque); /* called by ckpt_close(); may be NULL */
    void *opaque;
    uint64_t size;
} ckpt_reader;

/* Open a checkpoint.  `opt` may be NULL for the defaults.  Returns NULL and
 * fills `err` on failure.  Only the container's index and its pickles are
 * parsed here; tensors are read by ckpt_tensor_read() (read-ahead of small
 * records may happen to cover some storage bytes). */
CKPT_API ckpt_file *ckpt_open(const char *path, const ckpt_options *opt, ckpt_error *err);
/* Open from memory; `data` must stay valid and unchanged until ckpt_close(). */
CKPT_API ckpt_file *ckpt_open_memory(const void *data, size_t size, const ckpt_options *opt,
                                     ckpt_error *err);
/* Open through a reader; on success the file owns the reader (its close() is
 * called by ckpt_close()), on failure it is closed before returning. */
CKPT_API ckpt_file *ckpt_open_reader(const ckpt_reader *reader, const ckpt_options *opt,
                                     ckpt_error *err);
/* Could a file that starts with head[0..n) be one ckpt_open() reads?  The
 * containers bid on the first bytes as ckpt_open() asks them: pass the
 * first 512 bytes (the whole file when it is shorter); size is the file's
 * size, or UINT64_MAX when it is not known yet (a stream still arriving).
 * 0 when a container claims them, else -1 with err as ckpt_open() would set
 * it (CKPT_E_FORMAT at byte 0: "not a checkpoint: ...", "file is empty").
 * Lets a caller refuse a stream before reading the rest of it. */
CKPT_API int ckpt_sniff(const void *head, size_t n, uint64_t size, ckpt_error *err);
/* Open a checkpoint of one or several files: a regular file (as
 * ckpt_open()), a shard index (`pytorch_model.bin.index.json`,
 * `model.safetensors.index.json`), a folder holding one index, a
 * torch.distributed.checkpoint folder (`.metadata` + `*.distcp`), or a
 * folder holding a single checkpoint file.  Several files are presented as
 * one flattened state dict (format CKPT_FORMAT_SHARDED or CKPT_FORMAT_DCP):
 * the names, dtypes, shapes and bytes loading every shard would give.
 * Every file an index or a .metadata names must stay inside the folder.
 *
 * The parts (and a DCP folder's torch.save records) are not held open:
 * each is opened when the open, a read or a check needs it, and besides
 * those in use at most 16 parts and 16 records stay open (the least
 * recently used is closed), so a folder of any number of files needs a
 * few dozen file descriptors, and the composite keeps of each part only
 * its path, identity, names and shapes (about 1 KB for a shard of one
 * tensor).  The set of open parts belongs to the ckpt_file and is guarded
 * by a mutex: ckpt_tensor_read() and ckpt_verify_part() stay callable from
 * several threads at once.  A part opened again must be the file that was
 * indexed (same device, inode, size and modification time): a part
 * changed or replaced since fails the read with CKPT_E_IO ("... changed
 * since the checkpoint was opened"), never reads another file's bytes.
 * All the files' memory is one budget (options.max_memory).
 *
 * Tied weights of a safetensors file (or shard) that ckpt wrote once
 * (ckpt_export_options.dedupe_tied, `ckpt convert FILE OUTDIR/`),
 * recording "alias": "kept" in "__metadata__" as safetensors' save_model()
 * does, are listed again under each alias name, over the kept tensor's
 * storage, right after it, so that the export reads back as its source.
 * Only the entries that follow "ckpt.source_format" in a file ckpt wrote
 * are taken as aliases (ckpt_open() of the file does the same). */
CKPT_API ckpt_file *ckpt_open_path(const char *path, const ckpt_options *opt, ckpt_error *err);
/* The files behind an open checkpoint: 1 for a single file (whose path
 * ckpt_part_path() does not know: NULL); for a composite, the shard or
 * .distcp files, ckpt_part_path() giving each one's path. */
CKPT_API size_t ckpt_part_count(const ckpt_file *f);
CKPT_API const char *ckpt_part_path(const ckpt_file *f, size_t i);
/* The part holding tensor t (0 for a single file; a DCP tensor in several
 * chunks: the part of the chunk holding its first element). */
struct ckpt_tensor;
CKPT_API size_t ckpt_tensor_part(const ckpt_file *f, const struct ckpt_tensor *t);
/* Release everything.  NULL is allowed. */
CKPT_API void ckpt_close(ckpt_file *f);

/* ------------------------------------------------------------------------ */
/* Metadata                                                                   */
/* ------------------------------------------------------------------------ */

typedef enum ckpt_format {
    CKPT_FORMAT_ZIP = 0,
    CKPT_FORMAT_LEGACY = 1,
    CKPT_FORMAT_TAR = 2,
    CKPT_FORMAT_PICKLE = 3,
    CKPT_FORMAT_TORCHSCRIPT = 4,
    CKPT_FORMAT_SAFETENSORS = 5,  /* a .safetensors file */
    CKPT_FORMAT_SHARDED = 6,      /* shards named by an *.index.json or a folder */
    CKPT_FORMAT_DCP = 7,          /* a torch.distributed.checkpoint folder */
    CKPT_FORMAT_TORCH_EXPORT = 8, /* a torch.export .pt2 archive */
    CKPT_FORMAT_MOBILE = 9        /* a PyTorch Mobile flatbuffer module (.ff, .ptl) */
} ckpt_format;

typedef enum ckpt_byteorder { CKPT_LITTLE = 0, CKPT_BIG = 1 } ckpt_byteorder;

typedef struct ckpt_info {
    size_t struct_size; /* bytes of this struct ckpt_get_info() filled */
    ckpt_format format;
    ckpt_byteorder byteorder; /* of the stored tensor data */
    const char *version;      /* ZIP "version" record or legacy protocol, "" if none */
    const char *root;         /* ZIP root folder ("archive", ...), "" otherwise */
    size_t tensor_count;
    size_t storage_count;
    uint64_t total_bytes; /* sum of every tensor's nbytes (UINT64_MAX if it overflows) */
    uint64_t file_size;
} ckpt_info;

/* Fill the first `struct_size` bytes of `info` (at most the library's own
 * sizeof(ckpt_info)); bytes past them are not written.  Use the macro. */
CKPT_API void ckpt_get_info_sized(const ckpt_file *f, ckpt_info *info, size_t struct_size);
#define ckpt_get_info(f, info) ckpt_get_info_sized((f), (info), sizeof *(info))
/* "zip", "legacy", "tar", "pickle", "torchscript", "safetensors", "sharded",
 * "dcp", "pt2", "mobile". */
CKPT_API const char *ckpt_format_name(ckpt_format format);

/* ------------------------------------------------------------------------ */
/* Tensors                                                                    */
/* ------------------------------------------------------------------------ */

typedef enum ckpt_dtype {
    CKPT_FLOAT64 = 0,
    CKPT_FLOAT32,
    CKPT_FLOAT16,
    CKPT_BFLOAT16,
    CKPT_INT64,
    CKPT_INT32,
    CKPT_INT16,
    CKPT_INT8,
    CKPT_UINT8,
    CKPT_BOOL,
    CKPT_COMPLEX64,
    CKPT_COMPLEX128,
    CKPT_COMPLEX32,
    CKPT_FLOAT8_E4M3FN,
    CKPT_FLOAT8_E5M2,
    CKPT_FLOAT8_E4M3FNUZ,
    CKPT_FLOAT8_E5M2FNUZ,
    CKPT_FLOAT8_E8M0FNU,
    CKPT_UINT16,
    CKPT_UINT32,
    CKPT_UINT64,
    /* quantized: the stored integer representation (int_repr()); the
     * quantization parameters are in the tensor's descriptor */
    CKPT_QINT8,
    CKPT_QUINT8,
    CKPT_QINT32,
    CKPT_QUINT4X2, /* two 4-bit values per byte */
    CKPT_QUINT2X4, /* four 2-bit values per byte */
    /* raw bit containers of PyTorch 2.x: bytes as they are */
    CKPT_BITS8,
    CKPT_BITS16,
    CKPT_BITS1X8,
    CKPT_BITS2X4,
    CKPT_BITS4X2
    /* more may follow: see "ABI" at the top */
} ckpt_dtype;

/* torch's spelling: "float32", "bfloat16", "float8_e4m3fn", ... */
CKPT_API const char *ckpt_dtype_name(ckpt_dtype dtype);
/* Bytes per element (complex64: 8). */
CKPT_API size_t ckpt_dtype_size(ckpt_dtype dtype);

/* One storage: a run of bytes that one or more tensors view. */
typedef struct ckpt_storage {
    const char *key;     /* the storage key in the file ("0", "1", ...) */
    ckpt_dtype dtype;    /* element type the storage was saved with */
    uint64_t nbytes;     /* bytes the storage holds */
    int64_t file_offset; /* where its bytes start in the file, or -1 when
                              they are not stored as-is (deflated ZIP record) */
} ckpt_storage;

/* The layout of a tensor (torch.layout).  A sparse tensor is listed as its
 * components, each an ordinary strided tensor of its own (see ckpt_tensor):
 *   sparse_coo  NAME.indices [sparse_dim, nnz] int64, NAME.values [nnz, ...]
 *   sparse_csr  NAME.crow_indices, NAME.col_indices, NAME.values
 *   sparse_csc  NAME.ccol_indices, NAME.row_indices, NAME.values
 *   sparse_bsr  as csr, NAME.values holding the blocks [nnz, R, C, ...]
 *   sparse_bsc  as csc, likewise */
typedef enum ckpt_layout {
    CKPT_LAYOUT_STRIDED = 0,
    CKPT_LAYOUT_SPARSE_COO,
    CKPT_LAYOUT_SPARSE_CSR,
    CKPT_LAYOUT_SPARSE_CSC,
    CKPT_LAYOUT_SPARSE_BSR,
    CKPT_LAYOUT_SPARSE_BSC
} ckpt_layout;

/* The quantization scheme of a quantized tensor (torch.qscheme). */
typedef enum ckpt_qscheme {
    CKPT_QSCHEME_NONE = 0, /* not quantized */
    CKPT_PER_TENSOR_AFFINE,
    CKPT_PER_CHANNEL_AFFINE,
    CKPT_PER_TENSOR_SYMMETRIC,
    CKPT_PER_CHANNEL_SYMMETRIC,
    CKPT_PER_CHANNEL_AFFINE_FLOAT_QPARAMS
} ckpt_qscheme;

/* torch's spelling: "strided", "sparse_coo", ...; "per_tensor_affine", ...
 * ("none" for CKPT_QSCHEME_NONE); "unknown" for a value not listed here. */
CKPT_API const char *ckpt_layout_name(ckpt_layout layout);
CKPT_API const char *ckpt_qscheme_name(ckpt_qscheme qscheme);

/* One tensor.  Read-only; owned by the ckpt_file.
 *
 * Tensor kinds, and what ckpt_tensor_read() returns for each:
 *   - dense (torch.save of an ordinary tensor or Parameter): its elements.
 *   - quantized (quantize_per_tensor / per_channel, quantized modules'
 *     weights): dtype qint8, quint8, qint32, quint4x2 or quint2x4; read
 *     gives the stored integers, torch's int_repr() bytes (quint4x2 and
 *     quint2x4: the packed bytes, 2 or 4 values each, nbytes =
 *     ceil(numel / 2 or 4)); the parameters are in qscheme and after.
 *     As torch.load makes them: torch.save writes
 *     per_channel_affine_float_qparams (quantized embeddings) as
 *     per_channel_affine with float zero points, and such a tensor is
 *     listed as CKPT_PER_CHANNEL_AFFINE_FLOAT_QPARAMS, its scales and zero
 *     points float32 values.
 *   - sparse (COO, CSR, CSC, BSR, BSC): listed as its components (see
 *     ckpt_layout), each read like a dense tensor; `layout`, `component`
 *     and dense_size say what they belong to.
 *   - numpy arrays inside a checkpoint (numpy.core.multiarray._reconstruct,
 *     pickle protocol 5's numpy.core.numeric._frombuffer, numpy._core's;
 *     Python 2 pickles, whose array bytes are a str, as torch.load(f,
 *     encoding='latin1') reads them): listed under their key path with
 *     torch's dtype name, C or Fortran order as strides; their bytes are
 *     the pickle's own (storage (size_t)-1, file_offset -1, not mappable);
 *     read gives the elements in native byte order ('>f4' swapped).  Object
 *     arrays stay inert values; numpy scalars (numpy.core.multiarray.scalar,
 *     Python 2's too) are INT/FLOAT/BOOL values.
 *   - pickled tensors (pickle.dump of a tensor: its storage is
 *     torch.storage._load_from_bytes of a legacy torch.save stream inside
 *     the pickle): listed like numpy arrays, bytes from the pickle, views
 *     (storage_offset, strides) resolved.
 *   - tensors ckpt cannot read (meta tensors, nested tensors, device or
 *     wrapper-subclass rebuilds ...): listed with what the pickle says
 *     (dtype, shape; nbytes 0, storage (size_t)-1), readable 0 and the
 *     reason in `unreadable`; only a read of such a tensor fails, with
 *     CKPT_E_UNSUPPORTED naming it. */
typedef struct ckpt_tensor {
    const char *name; /* "layer.0.weight"; "" for a tensor at the root.
                         The dict keys, list indices and attribute names
                         that lead to the tensor, joined by '.'
                         (ckpt_tensor_name_parts()); every byte of a key
                         is kept, so a name may hold NUL bytes: its length
                         is name_len (a C string shows less).  Names are
                         not always unique: a valid file whose keys
                         flatten to one name ({'a.b': x, 'a': {'b': y}})
                         lists both as "a.b" (ckpt_find_next()) */
    ckpt_dtype dtype;
    uint32_t ndim;
    const int64_t *shape;   /* ndim entries (NULL when ndim is 0) */
    const int64_t *stride;  /* ndim entries, in elements */
    int64_t storage_offset; /* in elements */
    size_t storage;         /* index for ckpt_storage_at(); equal for tensors
                                that share one storage; (size_t)-1 for none */
    uint64_t numel;
    uint64_t nbytes; /* numel * ckpt_dtype_size(dtype) */
    int requires_grad;
    int64_t file_offset; /* byte offset in the file of element
                                [storage_offset], or -1 (deflated storage) */
    int contiguous;      /* row-major contiguous: bytes are one run */
    /* torch 2.x saves a conj()/neg view unresolved: the stored elements plus
     * a conj or neg bit.  Reads return the resolved values, as torch.load
     * then resolve_conj()/resolve_neg() gives them; file_offset is then -1
     * (the stored bytes are not the tensor's). */
    int conj; /* imaginary parts negated on read (complex dtypes) */
    int neg;  /* elements negated on read */
    /* ---- tensor kinds (members appended: see "ABI" at the top) ---- */
    int readable;           /* 1: ckpt_tensor_read() gives its bytes */
    const char *unreadable; /* readable 0: why ("meta tensor: no data"), else NULL */
    ckpt_layout layout;     /* strided; for a sparse component: the sparse tensor's */
    const char *component;  /* sparse component ("indices", "values", ...) or NULL */
    uint32_t dense_ndim;    /* sparse component: the sparse tensor's size, */
    const int64_t *dense_size; /* dense_ndim entries (NULL when not sparse) */
    ckpt_qscheme qscheme;      /* CKPT_QSCHEME_NONE unless quantized */
    double scale;              /* per-tensor schemes */
    int64_t zero_point;
    int64_t axis;              /* per-channel schemes: the channel dimension, */
    size_t nchannels;          /* and per channel a scale and a zero point */
    const double *scales;      /* (per_channel_affine: integers as doubles; */
    const double *zero_points; /*  ..._float_qparams: floats, as float32) */
    /* ---- appended: see "ABI" at the top ---- */
    size_t name_len; /* bytes of name (name[name_len] is '\0'); 0 for a
                        tensor naming did not reach (name NULL) */
} ckpt_tensor;

CKPT_API size_t ckpt_tensor_count(const ckpt_file *f);
/* Tensors in file order; NULL when i is out of range.  The descriptor is
 * built on first use (a chunk of neighbours with it) and kept until
 * ckpt_close(): the same pointer every time, from any thread.  NULL also
 * when memory runs out building it.  A loop over many tensors that needs
 * each only for a moment (a listing) uses ckpt_tensor_get() instead, which
 * keeps nothing: 192 bytes a tensor less for the life of the file. */
CKPT_API const ckpt_tensor *ckpt_tensor_at(const ckpt_file *f, size_t i);
/* By name; NULL when there is none.  When several tensors have the name
 * (see ckpt_tensor.name), the first in file order. A name holding NUL
 * bytes is found by ckpt_find_n() only. */
CKPT_API const ckpt_tensor *ckpt_find(const ckpt_file *f, const char *name);
/* By the `len` bytes of name, which may hold NUL bytes; as ckpt_find(). */
CKPT_API const ckpt_tensor *ckpt_find_n(const ckpt_file *f, const char *name, size_t len);
/* The next tensor in file order after t (one of f's listed tensors: the
 * library's descriptor or a copy) whose name is t's, or NULL: a file whose
 * flattened names clash ({'model.fc.weight': t, 'model': {'fc.weight':
 * u}}) lists each (ckpt_find() gives t, ckpt_find_next() then u), and
 * ckpt_open*() adds a note (ckpt_note_at()) naming the first clash.  Only
 * one key path per name: a dict that sets one key twice (torch.load keeps
 * the last value; no pickler writes it) is CKPT_E_FORMAT. */
CKPT_API const ckpt_tensor *ckpt_find_next(const ckpt_file *f, const ckpt_tensor *t);
/* How t's name was made: the parts naming joined with '.' (dict keys as
 * text, list indices, a module's attribute names, a sparse component's
 * name), from the selected value down.  ends[k] (for k < cap) receives the
 * byte offset in t->name where part k ends; part k starts at 0 (k == 0)
 * or one byte after ends[k - 1] (the '.').  *nparts receives how many
 * parts there are, also when more than cap (a tensor at the root: 0; under
 * the key "": 1, ending at 0), so that {'a.b': x} (one part, "a.b") and
 * {'a': {'b': y}} (two, "a" and "b") tell apart.  It walks the value tree
 * again: for messages, not for a loop over every tensor.  Only reads the
 * file (may run on several threads).  0, or -1 with err (CKPT_E_ARG when t
 * is not a tensor f lists). */
CKPT_API int ckpt_tensor_name_parts(const ckpt_file *f, const ckpt_tensor *t, size_t *ends,
                                    size_t cap, size_t *nparts, ckpt_error *err);
/* Copy tensor i's descriptor into the caller's *out, filling its first
 * `struct_size` bytes (see "ABI" at the top: members past them are not
 * written); its pointers (name, shape, ...) point into the file and live
 * until ckpt_close().  The copy is as good as the original for every call
 * that takes a `const ckpt_tensor *` (ckpt_tensor_read() and the like).
 * Returns 0, or -1 with CKPT_E_ARG when i is out of range.  Use the macro. */
CKPT_API int ckpt_tensor_get_sized(const ckpt_file *f, size_t i, ckpt_tensor *out,
                                   size_t struct_size, ckpt_error *err);
#define ckpt_tensor_get(f, i, out, err) ckpt_tensor_get_sized((f), (i), (out), sizeof *(out), (err))

CKPT_API size_t ckpt_storage_count(const ckpt_file *f);
CKPT_API const ckpt_storage *ckpt_storage_at(const ckpt_file *f, size_t i);

/* Read a tensor's elements, contiguous row-major and in NATIVE byte order,
 * into buf (bufsize >= t->nbytes).  Views, strides (incl. 0), storage offsets
 * and shared storages are resolved here; only the bytes the view needs are
 * read.  Returns 0, or -1 with err filled. */
CKPT_API int ckpt_tensor_read(const ckpt_file *f, const ckpt_tensor *t, void *buf, size_t bufsize,
                              ckpt_error *err);

/* Read `n` bytes of a tensor's contiguous native-order image starting at byte
 * `start` (0 <= start, start + n <= t->nbytes): for streaming a large tensor
 * through a small buffer.  max_tensor_bytes applies to the whole tensor; with
 * n == 0 (buf may be NULL) it is checked and nothing is read.  Returns 0, or
 * -1 with err filled. */
CKPT_API int ckpt_tensor_read_range(const ckpt_file *f, const ckpt_tensor *t, uint64_t start,
                                    void *buf, size_t n, ckpt_error *err);

/* Zero copy: when the file was opened with use_mmap (or from memory), and the
 * tensor is contiguous, stored uncompressed, in native byte order and without
 * a conj or neg bit (ckpt_tensor.conj/.neg), return a
 * pointer to its first byte inside the mapping.  It stays valid until
 * ckpt_close(); it must not be written to.  torch.save's ZIP files align
 * every storage to 64 bytes; legacy and TAR files do not, so the pointer may
 * be misaligned for the dtype (copy, or use memcpy to load elements).  Otherwise NULL, with err->code
 * CKPT_E_NOTMAPPABLE and the reason: use ckpt_tensor_read(). */
CKPT_API const void *ckpt_tensor_data(const ckpt_file *f, const ckpt_tensor *t, ckpt_error *err);

/* ------------------------------------------------------------------------ */
/* Values: the whole pickled object as an inert tree                          */
/* ------------------------------------------------------------------------ */

typedef struct ckpt_value ckpt_value;

typedef enum ckpt_kind {
    CKPT_V_NONE = 0,
    CKPT_V_BOOL,
    CKPT_V_INT,    /* fits int64 */
    CKPT_V_BIGINT, /* arbitrary precision; see ckpt_value_text() */
    CKPT_V_FLOAT,
    CKPT_V_STR, /* UTF-8 */
    CKPT_V_BYTES,
    CKPT_V_LIST,
    CKPT_V_TUPLE,
    CKPT_V_DICT, /* any keys, in insertion order (also OrderedDict, defaultdict) */
    CKPT_V_SET,  /* set or frozenset */
    CKPT_V_TENSOR,
    CKPT_V_OBJECT, /* an instance of a class ckpt does not know: inert */
    CKPT_V_GLOBAL, /* a reference to a class or function: inert */
    CKPT_V_STORAGE /* a storage referenced directly */
} ckpt_kind;

/* The root of the pickled object (of the selected key with options.key). */
CKPT_API const ckpt_value *ckpt_root(const ckpt_file *f);

CKPT_API ckpt_kind ckpt_value_kind(const ckpt_value *v);
CKPT_API const char *ckpt_kind_name(ckpt_kind kind);
CKPT_API int ckpt_value_bool(const ckpt_value *v);     /* BOOL */
CKPT_API int64_t ckpt_value_int(const ckpt_value *v);  /* INT, BOOL */
CKPT_API double ckpt_value_float(const ckpt_value *v); /* FLOAT, INT */
/* STR, BYTES: the bytes (NUL-terminated for convenience) and their length.
 * BIGINT: the decimal digits.  INT/FLOAT: NULL. */
CKPT_API const char *ckpt_value_text(const ckpt_value *v, size_t *len);
/* Items of LIST, TUPLE, SET and values of DICT; 0 otherwise. */
CKPT_API size_t ckpt_value_len(const ckpt_value *v);
CKPT_API const ckpt_value *ckpt_value_item(const ckpt_value *v, size_t i);
CKPT_API const ckpt_value *ckpt_value_key(const ckpt_value *v, size_t i); /* DICT */
/* DICT: the value under string key `key`, NULL when absent. */
CKPT_API const ckpt_value *ckpt_value_get(const ckpt_value *v, const char *key);
/* TENSOR: the listed tensor; for a tensor that naming did not reach (outside
 * the selected key, a non-persistent buffer) a descriptor whose name is NULL,
 * which ckpt_tensor_read() accepts too; NULL if its extent is unsound. */
CKPT_API const ckpt_tensor *ckpt_value_tensor(const ckpt_file *f, const ckpt_value *v);
/* STORAGE: the storage, or NULL. */
CKPT_API const ckpt_storage *ckpt_value_storage(const ckpt_file *f, const ckpt_value *v);
/* OBJECT and GLOBAL: "module.qualname" (e.g. "argparse.Namespace");
 * DICT: its class when it is a dict subclass ("collections.OrderedDict"),
 * else NULL. */
CKPT_API const char *ckpt_value_class(const ckpt_value *v);
/* OBJECT: the constructor arguments (a TUPLE) or NULL; the BUILD state or
 * NULL; dict items set on it (a DICT) or NULL; list items (a LIST) or NULL. */
CKPT_API const ckpt_value *ckpt_object_args(const ckpt_value *v);
CKPT_API const ckpt_value *ckpt_object_state(const ckpt_value *v);
CKPT_API const ckpt_value *ckpt_object_items(const ckpt_value *v);
CKPT_API const ckpt_value *ckpt_object_list(const ckpt_value *v);

/* Python's repr() of a double into out (at least 32 bytes): the shortest
 * decimal that reads back as x ("1.0", "0.1", "1e-05", "1e+16"), and "nan",
 * "inf", "-inf".  Returns the length. */
CKPT_API size_t ckpt_float_repr(double x, char *out);

/* Write `v` (NULL: the root) as JSON through `write`, which returns 0 on
 * success.  Dicts become objects with string keys, lists/tuples/sets arrays,
 * ints keep every digit, non-finite floats become "nan"/"inf"/"-inf", bytes
 * {"$bytes": base64}, tensors {"$tensor": name, "dtype", "shape"}, objects
 * {"$object": class, "args", "state", ...}, globals {"$global": name},
 * storages {"$storage": key}.  Strings keep valid UTF-8 (every byte of
 * it: a NUL is \u0000; characters that would act on a terminal, bidi
 * controls, C1 controls, as \uXXXX: ckpt_json_escape() in ckpt_text.h); a
 * byte that is not valid UTF-8 (a tensor name, a key) becomes \udcXX, as
 * Python's "surrogateescape" writes it, so no name is silently changed:
 * decode with json.loads(...) then .encode("utf-8", "surrogateescape").
 * A container (list, tuple, set, dict, object)
 * met again (shared reference or cycle) is written as {"$ref": path}, so the
 * output is linear in the number of values; scalars are written each time.
 * Nesting deeper than 1000 is CKPT_E_LIMIT, and so is output beyond
 * 16 MiB + 16 x the file size (a bound against scalars shared through the
 * memo).  indent 0: one line; otherwise spaces per level.  Returns 0 or -1. */
CKPT_API int ckpt_value_to_json(const ckpt_file *f, const ckpt_value *v, int indent,
                                int (*write)(void *ctx, const char *s, size_t n), void *ctx,
                                ckpt_error *err);

/* Parts of an archive beside its root object, as values (NULL when the
 * file has none):
 *   "constants"  TorchScript: the tuple of constants.pkl, the tensors and
 *                values its code uses (tensors readable through
 *                ckpt_value_tensor(), not listed: state_dict() has none)
 *   "extra"      TorchScript: its _extra_files, a DICT of name -> BYTES
 *                (None for one larger than max_pickle_bytes, with a note) */
CKPT_API const ckpt_value *ckpt_part(const ckpt_file *f, const char *name);

/* ------------------------------------------------------------------------ */
/* Globals: every class/function the file's pickles reference (for scanners) */
/* ------------------------------------------------------------------------ */

CKPT_API size_t ckpt_global_count(const ckpt_file *f);
CKPT_API const ckpt_global_ref *ckpt_global_at(const ckpt_file *f, size_t i);

/* ------------------------------------------------------------------------ */
/* Integrity                                                                  */
/* ------------------------------------------------------------------------ */

/* Deep integrity check, reading every stored byte once: for ZIP the CRC-32
 * of every record (a zero CRC means none was recorded: reported through
 * `note`, not a failure), each local header agreeing with the central
 * directory (name, method, sizes, CRC) and each data descriptor; for every
 * container the checks ckpt_open already made (storage sizes against their
 * declarations, tensor extents inside storages, TAR header checksums, legacy
 * element counts).  `note` (may be NULL) receives one line per observation.
 * Returns 0 when intact, or -1 with err naming the first bad record, e.g.
 * "crc mismatch in archive/data/3". */
CKPT_API int ckpt_verify(const ckpt_file *f, void (*note)(void *ctx, const char *line), void *ctx,
                         ckpt_error *err);
/* ckpt_verify() that also reports how far it got: `progress` (may be NULL)
 * is called with the bytes checked so far and the total to check, between
 * records and once at the end (done == total); for containers checked
 * entirely at open it is not called.  Both callbacks receive `ctx`. */
CKPT_API int ckpt_verify_progress(const ckpt_file *f, void (*note)(void *ctx, const char *line),
                                  void (*progress)(void *ctx, uint64_t done, uint64_t total),
                                  void *ctx, ckpt_error *err);

/* ckpt_verify_progress() of part i (0 <= i < ckpt_part_count(f)) alone:
 * for a single file the whole file; for shards, shard i; for a DCP folder,
 * the torch.save records in .distcp file i (each opened for it, and
 * checked to be the file indexed).  Notes name the part, progress
 * counts the part's bytes.  ckpt_verify() of a composite is this for every
 * part in order, stopping at the first failure (the last part also gives
 * the notes about the whole), so a caller may check parts on threads of
 * its own and print their notes in order: it only reads, and several
 * threads may call it on one ckpt_file at once.  The library starts no
 * threads.  Returns 0 when intact, -1 with err as ckpt_verify(). */
CKPT_API int ckpt_verify_part(const ckpt_file *f, size_t i,
                              void (*note)(void *ctx, const char *line),
                              void (*progress)(void *ctx, uint64_t done, uint64_t total),
                              void *ctx, ckpt_error *err);

/* zlib's crc32(): the CRC-32 of p[0..n) continued from `crc` (0 to begin),
 * as ZIP records it; several times faster than zlib's where the CPU
 * multiplies carry-less (x86-64 with PCLMULQDQ). */
CKPT_API uint32_t ckpt_crc32(uint32_t crc, const void *p, size_t n);

/* The container record a storage's bytes are kept in (ZIP: its entry in
 * the central directory), for tools that copy or check stored bytes
 * themselves without parsing the container.  Fill it with
 * ckpt_storage_record(); see "ABI" at the top. */
typedef struct ckpt_record {
    size_t struct_size;       /* bytes ckpt_storage_record() filled */
    const char *name;         /* full record name, "archive/data/0" */
    int method;               /* 0 stored, 8 deflated (ZIP's numbers) */
    int has_crc;              /* a CRC-32 was recorded (ZIP writes 0 for none) */
    uint32_t crc32;           /* zlib's crc32() of the content, as recorded */
    uint64_t data_offset;     /* file offset of the record's first byte */
    uint64_t compressed_size; /* bytes in the file from data_offset */
    uint64_t size;            /* bytes of content (>= the storage's nbytes) */
} ckpt_record;

/* The record holding storage i (ckpt_storage_at(f, i)): fills the first
 * `struct_size` bytes of `rec`.  Returns 0, or -1 with CKPT_E_NOTFOUND when
 * the container keeps no record per storage (legacy, TAR: no checksums
 * either), CKPT_E_ARG when i is out of range.  Use the macro. */
CKPT_API int ckpt_storage_record_sized(const ckpt_file *f, size_t i, ckpt_record *rec,
                                       size_t struct_size, ckpt_error *err);
#define ckpt_storage_record(f, i, rec, err)                                                        \
    ckpt_storage_record_sized((f), (i), (rec), sizeof *(rec), (err))

/* Oddities the pickle machine noticed (several PROTO opcodes, data after
 * STOP, ...), one line each. */
CKPT_API size_t ckpt_note_count(const ckpt_file *f);
CKPT_API const char *ckpt_note_at(const ckpt_file *f, size_t i);

#ifdef __cplusplus
}
#endif
#endif /* CKPT_H */
