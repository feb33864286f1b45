/*
 * multi.h - layer 4 (formats): the composite of several files that
 * ckpt_open_path() presents as one (multi.c), shared with the DCP reader
 * (dcp.c).  The composite is an ordinary ckpt_file whose storages are
 * links: a storage of a part file (shards), or a tensor assembled from
 * chunks (DCP), each chunk a tensor of an embedded torch.save file or raw
 * bytes of a part.  Not installed.
 */
#ifndef CKPT_MULTI_H
#define CKPT_MULTI_H

#include "formats.h"

typedef struct ck_chunk {
    ckpt_file *file;      /* embedded torch.save file holding it, or NULL: raw */
    const ckpt_tensor *t; /* its tensor in `file` */
    uint64_t raw_off;     /* raw: where its bytes start in the part */
    size_t part;
    int64_t *off, *size; /* ndim entries each: its place in the tensor */
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

typedef struct ck_multi {
    char *dir;         /* the folder (real path) */
    const char *shown; /* the folder as the caller named it */
    char **paths;      /* per part: its path (dir/rel) */
    ckpt_file **files; /* shards: each part opened */
    ck_source **srcs;  /* DCP: each part's bytes (NULL until opened) */
    size_t nparts, cap_parts;
    ck_map part_names;      /* rel -> part */
    ckpt_file **embedded;   /* DCP: chunk and value files */
    size_t *embedded_part;  /* each one's part */
    uint64_t *embedded_off; /* and its offset there */
    ck_map embedded_at;     /* "part:offset:length" -> embedded index */
    size_t nembedded, cap_embedded;
    ck_link *links; /* per storage of the composite */
    size_t cap_links;
    ckpt_value *root;   /* the flat dict being built */
    ckpt_file *meta;    /* DCP: the .metadata pickle (not a part) */
    int64_t total_size; /* shards: the index's metadata.total_size, or -1 */
} ck_multi;

/* The part named `rel` (relative to the folder): checked to stay inside the
 * folder (no absolute path, no "..", no symlink leading out), to exist and
 * be a regular file; added once.  `what` names who named it for errors. */
int ck_multi_part(ckpt_file *f, ck_multi *m, const char *rel, size_t rlen, const char *what,
                  size_t *part, ckpt_error *err);
/* Put "PREFIX: " before err's message (where a failure happened). */
void ck_err_prefix(ckpt_error *err, const char *fmt, ...) CK_PRINTF(2, 3);
/* Open part `part`'s bytes as a ck_source (DCP). */
int ck_multi_source(ckpt_file *f, ck_multi *m, size_t part, ckpt_error *err);
/* A tensor of the composite named `name` made of chunks (DCP). */
int ck_multi_add_chunked(ckpt_file *f, ck_multi *m, const char *name, ckpt_dtype dtype,
                         uint32_t ndim, const int64_t *shape, ck_chunk *chunks, size_t nchunks,
                         ckpt_error *err);
/* Add `name` -> v (a value of the composite) to the root. */
int ck_multi_add_value(ckpt_file *f, ck_multi *m, const char *name, ckpt_value *v, ckpt_error *err);
/* Open bytes [off, off+len) of part `part` as an embedded checkpoint. */
ckpt_file *ck_multi_embedded(ckpt_file *f, ck_multi *m, size_t part, uint64_t off, uint64_t len,
                             ckpt_error *err);
/* Deep copy of a value of another file into f (scalars, strings,
 * containers; anything else becomes a string naming it).  *budget: values
 * that may still be copied (shared values are copied each time they are
 * met, so sharing tricks run out of it). */
ckpt_value *ck_multi_copy_value(ckpt_file *f, const ckpt_value *v, uint32_t depth, uint64_t *budget,
                                ckpt_error *err);

#endif
