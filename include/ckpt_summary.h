/*
 * ckpt_summary.h - what a checkpoint holds, counted: tensors, parameters
 * and bytes per dtype, the top-level keys, and the module tree (the dotted
 * prefixes of the tensor names with the parameters under each), as
 * `ckpt info` prints them.
 *
 * Built only on the reader API of ckpt.h and the walk of ckpt_walk.h.
 * "Parameters" are elements: the sum of the tensors' numel.  Sums that
 * would overflow stay at UINT64_MAX.
 *
 * Thread safety: a summary only reads the file; several may be made at once
 * for one file.  Everything a summary returns lives until
 * ckpt_summary_free(), and no longer than the file (names point into the
 * file's tensor names).
 */
#ifndef CKPT_SUMMARY_H
#define CKPT_SUMMARY_H

#include "ckpt.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct ckpt_summary ckpt_summary;

/* Counts of one dtype.  Rows come in increasing dtype number, only for
 * dtypes that have tensors. */
typedef struct ckpt_summary_dtype {
    ckpt_dtype dtype;
    uint64_t tensors;
    uint64_t elements; /* parameters */
    uint64_t bytes;
} ckpt_summary_dtype;

typedef struct ckpt_summary_totals {
    uint64_t tensors;       /* tensors counted */
    uint64_t elements;      /* parameters: sum of their numel */
    uint64_t bytes;         /* sum of their nbytes */
    uint64_t storages;      /* storages they view (every storage of the file
                               when ckpt_summarize() was given no root) */
    uint64_t storage_bytes; /* bytes those storages hold */
} ckpt_summary_totals;

/* One top-level entry: a key of the root dict, or, when the root is not a
 * dict, the root itself (key NULL).  tensors/elements: for a tensor value
 * 1 and its numel; for a container the listed tensors under it, each once;
 * else 0. */
typedef struct ckpt_summary_key {
    const ckpt_value *key; /* NULL for a root that is not a dict */
    const ckpt_value *value;
    uint64_t tensors;
    uint64_t elements;
} ckpt_summary_key;

/* One module: a dotted prefix of tensor names ("encoder.layers.0" of
 * "encoder.layers.0.weight").  Modules are numbered in display order:
 * depth first, children in the order their first tensor comes in the file;
 * index 0 is the first top-level module. */
#define CKPT_SUMMARY_NONE ((size_t)-1)
typedef struct ckpt_summary_module {
    const char *name; /* the last component; NOT NUL-terminated */
    size_t name_len;
    const char *path; /* the dotted prefix, this module's full name;
                             NOT NUL-terminated (it points into a tensor
                             name): path[0..path_len) */
    size_t path_len;
    size_t parent;       /* index, or CKPT_SUMMARY_NONE at the top */
    size_t first_child;  /* index, or CKPT_SUMMARY_NONE */
    size_t next_sibling; /* index, or CKPT_SUMMARY_NONE */
    uint32_t depth;      /* 0 at the top */
    uint64_t tensors;    /* tensors whose names start with path + "." */
    uint64_t elements;   /* their parameters */
} ckpt_summary_module;

/* Summarise the tensors under `root`.  root NULL: every listed tensor of f
 * and every storage; ckpt_root(f) (what opt.key selected, or the whole
 * object): every listed tensor and the storages they view.  Otherwise
 * only the listed tensors under root (a
 * value found by walking from ckpt_root(f)), and `prefix` (may be NULL),
 * the dotted path of root, is taken off the front of their names (with the
 * dot after it) for the module tree.  Top-level rows are made for root.
 * Values nested deeper than CKPT_DEFAULT_MAX_DEPTH are not counted.  Each
 * top-level row is counted on its own walk (a tensor under two keys counts
 * in both); together they may visit at most CKPT_DEFAULT_MAX_EXPANSION + 16
 * values per byte of the file, past which the summary fails with
 * CKPT_E_LIMIT (a bound against many keys over one big shared value).
 * NULL with err filled on failure (CKPT_E_NOMEM, CKPT_E_LIMIT, CKPT_E_ARG). */
CKPT_API ckpt_summary *ckpt_summarize(const ckpt_file *f, const ckpt_value *root,
                                      const char *prefix, ckpt_error *err);
CKPT_API void ckpt_summary_free(ckpt_summary *s);

CKPT_API const ckpt_summary_totals *ckpt_summary_get_totals(const ckpt_summary *s);

CKPT_API size_t ckpt_summary_dtype_count(const ckpt_summary *s);
/* NULL when i is out of range. */
CKPT_API const ckpt_summary_dtype *ckpt_summary_dtype_at(const ckpt_summary *s, size_t i);

CKPT_API size_t ckpt_summary_key_count(const ckpt_summary *s);
CKPT_API const ckpt_summary_key *ckpt_summary_key_at(const ckpt_summary *s, size_t i);

CKPT_API size_t ckpt_summary_module_count(const ckpt_summary *s);
CKPT_API const ckpt_summary_module *ckpt_summary_module_at(const ckpt_summary *s, size_t i);

/* Listed tensors and parameters under v (each tensor once; a tensor value
 * itself counts 1 even when naming did not reach it), as the key rows count
 * them.  0, or -1 with err filled. */
CKPT_API int ckpt_count_tensors(const ckpt_file *f, const ckpt_value *v, uint64_t *tensors,
                                uint64_t *elements, ckpt_error *err);

#ifdef __cplusplus
}
#endif

#endif /* CKPT_SUMMARY_H */
