/*
 * formats.h - layer 4 of libckpt: the containers.  One file per container
 * behind one ops table, chosen by a registry that asks each to bid on the
 * first bytes (open.c), in the manner of libarchive's format readers.  A
 * container finds the pickle(s) and where each storage's bytes are, runs
 * the pickles through torch/, and answers storage reads.  Adding a
 * container: one file here and one line in open.c's registry.
 * Not installed.
 */
#ifndef CKPT_FORMATS_H
#define CKPT_FORMATS_H

#include "../torch/torch.h"

typedef struct ck_format {
    const char *name;
    /* Claim the file from its first n bytes (n <= 512) and size: 0 no. */
    int (*bid)(const uint8_t *head, size_t n, uint64_t size);
    /* Index the file, run its pickles (f->root), set f->format. */
    int (*open)(ckpt_file *f, ckpt_error *err);
    /* Bytes [off, off+n) of root storage s (range checked); NULL: the bytes
     * are stored as they are at s->data_off. */
    int (*storage_read)(const ckpt_file *f, const ck_storage *s, uint64_t off, void *buf, size_t n,
                        ckpt_error *err);
    /* Check what the container can check (CRCs); NULL: nothing more.
     * progress (may be NULL) hears bytes checked so far and the total. */
    int (*verify)(const ckpt_file *f, void (*note)(void *, const char *),
                  void (*progress)(void *, uint64_t, uint64_t), void *ctx, ckpt_error *err);
    /* After a failed open: replace err by a likelier cause; NULL: none. */
    void (*blame)(ckpt_file *f, ckpt_error *err);
    /* Free f->fmt_state. */
    void (*close)(ckpt_file *f);
    /* The record holding storage s (ckpt_storage_record()); NULL: none. */
    int (*record)(const ckpt_file *f, const ck_storage *s, ckpt_record *rec, ckpt_error *err);
} ck_format;

extern const ck_format ck_format_zip;    /* torch_zip.c: torch.save since 1.6, torch.jit.save */
extern const ck_format ck_format_tar;    /* tar.c: torch.save before 0.1.10 */
extern const ck_format ck_format_pickle; /* plain.c: a bare pickle, or the legacy stream */
extern const ck_format ck_format_safetensors; /* safetensors_file.c: a .safetensors file */
extern const ck_format ck_format_multi;       /* multi.c: shards (index.json) or a DCP folder */
extern const ck_format ck_format_mobile;      /* mobile.c: a PyTorch Mobile flatbuffer module */

/* safetensors_file.c: "F32" ... to a dtype: 0, or -1 when unknown. */
int ck_safetensors_dtype(const char *s, ckpt_dtype *d);

/* open.c: a new, empty file with the caller's options taken and torch's
 * pickle hooks set (for containers that are not one byte source). */
ckpt_file *ck_file_new(const ckpt_options *opt, ckpt_error *err);
/* open.c: a file that is part of the composite `parent` (a shard, a DCP
 * record, a .metadata), read from `src` (taken over: closed with the file,
 * or at once on failure), with parent's options (no key): its memory is
 * charged to parent's budget as well as to its own (ck_arena_adopt());
 * `grow`: its pickles raise parent's limit (while the composite indexes
 * its parts; not when it opens one again for a read, which also reports
 * no globals to options.on_global a second time). */
ckpt_file *ck_open_child(ckpt_file *parent, ck_source *src, bool grow, ckpt_error *err);

/* multi.c: a contiguous tensor of `dtype` and `shape` (ndim entries,
 * copied) over storage `storage`, as a CKPT_V_TENSOR value. */
int ck_format_tensor(ckpt_file *f, size_t storage, ckpt_dtype dtype, uint32_t ndim,
                     const int64_t *shape, int64_t pos, ckpt_value **out, ckpt_error *err);

/* dcp.c: read a DCP folder's .metadata into the composite f (multi.c). */
struct ck_multi;
int ck_dcp_open(ckpt_file *f, struct ck_multi *m, const char *dir, ckpt_error *err);

/* plain.c, for scanners (options.scan_all_pickles): run every further
 * pickle in [off, end) of the file ("<base>#<first>", ...), or in the rest
 * of a pickle in memory after `used` ("<label>#2", ...); one that breaks
 * gives a note.  -1 only when out of memory. */
int ck_further_pickles(ckpt_file *f, uint64_t off, uint64_t end, const char *base, uint32_t first,
                       ckpt_error *err);
int ck_further_pickles_in(ckpt_file *f, const ck_pickle_in *in, size_t used, ckpt_error *err);

/* nested.c, for scanners: open every bytes value the pickles made that a
 * second load would unpickle (ck_unpickler.nested), its globals reported
 * as "LABEL>bytes@OFFSET...".  -1 only when out of memory. */
int ck_scan_nested(ckpt_file *f, ckpt_error *err);

/* legacy.c: the legacy stream, once the first pickle showed its magic. */
int ck_legacy_open(ckpt_file *f, ckpt_error *err);
/* Is this pickled value the legacy stream's magic number? */
bool ck_legacy_magic(const ckpt_value *v);

#endif
