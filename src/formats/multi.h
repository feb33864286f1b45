/*
 * multi.h - layer 4 (formats): the composite of several files that
 * ckpt_open_path() presents as one (multi.c), shared with the DCP reader
 * (dcp.c).  The composite is an ordinary ckpt_file whose storages are
 * links: a storage of a part file (shards), or a tensor assembled from
 * chunks (DCP), each chunk a tensor of a torch.save record inside a part or
 * raw bytes of a part.  Not installed.
 *
 * Parts and records are opened when needed, not held: a bounded set of
 * them stays open (the open set: CK_KEEP_PARTS and CK_KEEP_RECORDS idle
 * ones besides those in use, holding at most about CK_KEEP_BYTES each
 * kind), so a folder of any number of files needs a
 * bounded number of descriptors and, per part, only what the composite
 * keeps of it (its path, its identity, its tensors' names and shapes).
 * Each open is a child file of the composite's memory budget
 * (ck_open_child()).  The set is guarded by a mutex of the composite's:
 * tensor reads and ckpt_verify_part() may run on several threads at once.
 * A part opened again must be the file indexed (same device, inode, size
 * and modification time), else the read fails.
 */
#ifndef CKPT_MULTI_H
#define CKPT_MULTI_H

#include "formats.h"

#include <pthread.h>

/* Idle parts (descriptors) and DCP records (open torch.save files) kept
 * open besides those being read (an open record holds its part open too),
 * and the memory the idle ones of each kind may hold besides the most
 * recently used one. */
#define CK_KEEP_PARTS 16u
#define CK_KEEP_RECORDS 16u
#define CK_KEEP_BYTES ((uint64_t)64 << 20)
#define CK_NO_RECORD ((size_t)-1)

/* A tensor's chunks are kept without the empty ones, in the row-major
 * order of their first elements (dcp.c). */
typedef struct ck_chunk {
    int64_t *off, *size; /* ndim entries each: its place in the tensor */
    uint64_t raw_off;    /* raw: where its bytes start in the part */
    size_t part;
    size_t rec; /* its torch.save record (ck_multi.recs), or CK_NO_RECORD: raw */
} ck_chunk;

typedef struct ck_link {
    size_t part; /* the part holding it (DCP: its first chunk's) */
    size_t sub;  /* shards: the storage's index in the part's file */
    ck_chunk *chunks;
    size_t nchunks; /* DCP: > 0 */
    uint32_t ndim;
    const int64_t *shape;
    ckpt_dtype dtype;
    const char *name;
} ck_link;

/* A file of the folder, as it was when indexed. */
typedef struct ck_part {
    const char *path; /* dir/rel, the folder as the caller named it (arena) */
    uint64_t size, dev, ino;
    int64_t mtime_ns;
    uint32_t nstorages; /* shards: its file's storages (checked on a reopen) */
    int32_t slot;       /* its entry in the open set, or -1 (under the lock) */
    size_t rec0, nrec;  /* DCP: its records are recs_of[rec0 .. rec0 + nrec) */
} ck_part;

/* DCP: a torch.save record (a chunk's tensor, a value) inside a part. */
typedef struct ck_record {
    size_t part;
    uint64_t off, len;
    int32_t slot; /* its entry in the open set, or -1 (under the lock) */
    bool once;    /* a value's: read once (copied), closed when not in use */
} ck_record;

/* An entry of the open set: a shard's file, a DCP part's bytes (ck_source)
 * or a DCP record's file; pinned while someone reads it. */
typedef struct ck_open {
    void *h;
    size_t idx; /* part or record */
    uint64_t tick;
    uint32_t pins;
    uint8_t kind; /* CK_OPEN_* */
} ck_open;
enum { CK_OPEN_FREE, CK_OPEN_PART, CK_OPEN_RECORD };

typedef struct ck_multi {
    char *dir;         /* the folder (real path) */
    const char *shown; /* the folder as the caller named it */
    ck_part *parts;
    size_t nparts, cap_parts;
    ck_map part_names; /* rel -> part */
    ck_record *recs;   /* DCP */
    size_t nrecs, cap_recs;
    ck_map rec_at;   /* "part:offset:length" -> record */
    size_t *recs_of; /* records by part (ck_part.rec0, nrec) */
    ck_link *links;  /* per storage of the composite */
    size_t cap_links;
    ckpt_value *root;   /* the flat dict being built */
    bool dcp;           /* a DCP folder (its .metadata read and closed) */
    bool indexing;      /* ckpt_open_path() is running: opens raise the budget */
    uint64_t meta_size; /* DCP: bytes of the .metadata */
    uint64_t meta_bytes; /* metadata bytes (pickles, headers) of the parts */
    uint64_t input;     /* bytes of the parts and the index or .metadata */
    int64_t total_size; /* shards: the index's metadata.total_size, or -1 */
    /* the open set */
    pthread_mutex_t lock;
    bool locked_ok; /* the mutex was made */
    ck_open *open;
    size_t nopen, cap_open;
    uint64_t tick;
    /* work counted, for tests: steps of the DCP chunk-overlap check */
    uint64_t overlap_work;
} ck_multi;

/* The part named `rel` (relative to the folder): checked to stay inside the
 * folder (no absolute path, no "..", no symlink leading out), to exist and
 * be a regular file; added once, its identity taken.  `what` names who
 * named it for errors. */
int ck_multi_part(ckpt_file *f, ck_multi *m, const char *rel, size_t rlen, const char *what,
                  size_t *part, ckpt_error *err);
/* Put "PREFIX: " before err's message (where a failure happened). */
void ck_err_prefix(ckpt_error *err, const char *fmt, ...) CK_PRINTF(2, 3);
/* DCP: part `part`'s bytes, pinned until ck_multi_source_put(). */
const ck_source *ck_multi_source_get(const ckpt_file *f, size_t part, ckpt_error *err);
void ck_multi_source_put(const ckpt_file *f, size_t part);
/* DCP: the record at bytes [off, off+len) of part `part` (checked to lie in
 * it), added once: its index in *rec. */
int ck_multi_record(ckpt_file *f, ck_multi *m, size_t part, uint64_t off, uint64_t len,
                    size_t *rec, ckpt_error *err);
/* DCP: record `rec` opened as a checkpoint, pinned until
 * ck_multi_record_put(). */
ckpt_file *ck_multi_record_get(const ckpt_file *f, size_t rec, ckpt_error *err);
void ck_multi_record_put(const ckpt_file *f, size_t rec);
/* A tensor of the composite named `name` made of chunks (DCP). */
int ck_multi_add_chunked(ckpt_file *f, ck_multi *m, const char *name, ckpt_dtype dtype,
                         uint32_t ndim, const int64_t *shape, ck_chunk *chunks, size_t nchunks,
                         ckpt_error *err);
/* Add `name` -> v (a value of the composite) to the root. */
int ck_multi_add_value(ckpt_file *f, ck_multi *m, const char *name, ckpt_value *v, ckpt_error *err);
/* The composite's input grew by n bytes (a part, the .metadata): its
 * memory limit counts them. */
void ck_multi_input(ckpt_file *f, ck_multi *m, uint64_t n);
/* Deep copy of a value of another file into f (scalars, strings,
 * containers; anything else becomes a string naming it).  *budget: values
 * that may still be copied (shared values are copied each time they are
 * met, so sharing tricks run out of it). */
ckpt_value *ck_multi_copy_value(ckpt_file *f, const ckpt_value *v, uint32_t depth, uint64_t *budget,
                                ckpt_error *err);

#endif
