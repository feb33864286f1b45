/*
 * composite.h - builders for the tests of checkpoints of several files
 * (src/formats/multi.c, dcp.c) and of big safetensors headers: temporary
 * folders, safetensors files and shard indexes, a torch.distributed
 * .metadata pickled byte by byte with the layout torch 2.6 writes (the
 * dataclasses of tests/dcp_craft.py: NEWOBJ + BUILD of a state dict,
 * TensorProperties' state a tuple, torch.Size a REDUCE), a streaming
 * torch.save ZIP of any number of tensors (ZIP64 end records past 65,535),
 * and what the process holds: open descriptors and resident memory.
 *
 * Everything is static (each test is one translation unit); failures to
 * write abort: they are the machine's, not the library's.
 */
#ifndef CKPT_UNIT_COMPOSITE_H
#define CKPT_UNIT_COMPOSITE_H

#include "build.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <sys/resource.h>
#include <sys/stat.h>

/* ---- files and folders --------------------------------------------------- */

static inline void cw_file(const char *path, const void *p, size_t n)
{
    FILE *fp = fopen(path, "wb");
    if (!fp || (n && fwrite(p, 1, n, fp) != n) || fclose(fp) != 0) {
        fprintf(stderr, "cannot write %s: %s\n", path, strerror(errno));
        abort();
    }
}

/* A new empty folder under $TMPDIR (or /tmp); malloc'd path. */
static inline char *cw_tmpdir(const char *tag)
{
    const char *t = getenv("TMPDIR");
    char *p = malloc(4096);
    if (!p) abort();
    snprintf(p, 4096, "%s/ckpt-%s.XXXXXX", t && *t ? t : "/tmp", tag);
    if (!mkdtemp(p)) {
        fprintf(stderr, "mkdtemp %s: %s\n", p, strerror(errno));
        abort();
    }
    return p;
}

/* Remove a folder of files (the tests' folders hold no folders). */
static inline void cw_rmtree(const char *dir)
{
    DIR *d = opendir(dir);
    if (!d) return;
    struct dirent *e;
    char p[4400];
    while ((e = readdir(d)))
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) {
            snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
            remove(p);
        }
    closedir(d);
    rmdir(dir);
}

/* dir/name (static buffer, one at a time) */
static inline const char *cw_join(const char *dir, const char *name)
{
    static char buf[4096];
    snprintf(buf, sizeof buf, "%s/%s", dir, name);
    return buf;
}

/* ---- what the process holds ---------------------------------------------- */

/* Open file descriptors (entries of /proc/self/fd, less the one reading it). */
static inline long cw_open_fds(void)
{
    DIR *d = opendir("/proc/self/fd");
    if (!d) return -1;
    long n = 0;
    struct dirent *e;
    while ((e = readdir(d)))
        if (e->d_name[0] != '.') n++;
    closedir(d);
    return n - 1;
}

/* A line "KEY:  N kB" of /proc/self/status, in bytes; -1 when absent. */
static inline long long cw_status_kb(const char *key)
{
    FILE *fp = fopen("/proc/self/status", "r");
    if (!fp) return -1;
    char line[256];
    long long v = -1;
    size_t kl = strlen(key);
    while (fgets(line, sizeof line, fp))
        if (strncmp(line, key, kl) == 0 && line[kl] == ':') {
            v = strtoll(line + kl + 1, NULL, 10) * 1024;
            break;
        }
    fclose(fp);
    return v;
}

/* At most n descriptors from now on (the soft limit); 0 or -1. */
static inline int cw_limit_fds(rlim_t n)
{
    struct rlimit r;
    if (getrlimit(RLIMIT_NOFILE, &r) != 0) return -1;
    r.rlim_cur = n < r.rlim_max ? n : r.rlim_max;
    return setrlimit(RLIMIT_NOFILE, &r);
}

/* ---- safetensors ------------------------------------------------------------ */

/* A safetensors file of one float32 tensor `name` holding v[0..n). */
static inline void cw_st_one(const char *path, const char *name, const float *v, size_t n)
{
    char hdr[512];
    int hl = snprintf(hdr, sizeof hdr,
                      "{\"__metadata__\":{\"format\":\"pt\"},\"%s\":{\"dtype\":\"F32\",\"shape\":[%zu],"
                      "\"data_offsets\":[0,%zu]}}",
                      name, n, n * 4);
    bb b = {0};
    size_t pad = (8 - (size_t)hl % 8) % 8;
    bb_le64(&b, (uint64_t)hl + pad);
    bb_put(&b, hdr, (size_t)hl);
    for (size_t i = 0; i < pad; i++) bb_u8(&b, ' ');
    for (size_t i = 0; i < n; i++) bb_f32le(&b, v[i]);
    cw_file(path, b.p, b.n);
    bb_free(&b);
}

/* ---- a torch.distributed.checkpoint .metadata ------------------------------ */

#define DM_MOD "torch.distributed.checkpoint."

/* Memo slots of the globals and keys every object names (the prologue). */
enum {
    DM_TSM, DM_CSM, DM_TP, DM_MI, DM_SI, DM_BSM, DM_SIZE, DM_F32, DM_I64,
    DM_K_PROPERTIES, DM_K_SIZE, DM_K_CHUNKS, DM_K_OFFSETS, DM_K_SIZES, DM_K_FQN,
    DM_K_OFFSET, DM_K_INDEX, DM_K_PATH, DM_K_LENGTH, DM_NMEMO
};

typedef struct dm {
    bb sdm, sd; /* the items of state_dict_metadata and of storage_data */
} dm;

static inline void dm_get(bb *b, uint32_t slot)
{
    bb_u8(b, 'j'); /* LONG_BINGET */
    bb_le32(b, slot);
}

static inline void dm_newobj(bb *b, uint32_t cls)
{
    dm_get(b, cls);
    pk_empty_tuple(b);
    bb_u8(b, 0x81); /* NEWOBJ */
}

/* torch.Size((v...)) */
static inline void dm_size(bb *b, const int64_t *v, int n)
{
    dm_get(b, DM_SIZE);
    pk_int_tuple(b, v, n);
    bb_u8(b, 0x85); /* TUPLE1 */
    pk_reduce(b);
}

/* A tensor item `fqn` of `dtype_slot` (DM_F32, DM_I64) and `shape`, whose
 * nchunks chunks are at offs/sizes (nchunks * ndim entries each). */
static inline void dm_tensor(dm *d, const char *fqn, uint32_t dtype_slot, int ndim,
                             const int64_t *shape, size_t nchunks, const int64_t *offs,
                             const int64_t *sizes)
{
    bb *b = &d->sdm;
    pk_str(b, fqn);
    dm_newobj(b, DM_TSM);
    pk_empty_dict(b);
    pk_mark(b);
    dm_get(b, DM_K_PROPERTIES);
    dm_newobj(b, DM_TP);
    pk_mark(b);
    dm_get(b, dtype_slot);
    pk_none(b);
    pk_bool(b, 0);
    pk_int(b, 0);
    pk_bool(b, 0);
    pk_tuple(b);
    pk_build(b);
    dm_get(b, DM_K_SIZE);
    dm_size(b, shape, ndim);
    dm_get(b, DM_K_CHUNKS);
    pk_empty_list(b);
    for (size_t i = 0; i < nchunks; i++) {
        if (i % 1000 == 0) pk_mark(b); /* as pickle batches: APPENDS of 1000 */
        dm_newobj(b, DM_CSM);
        pk_empty_dict(b);
        pk_mark(b);
        dm_get(b, DM_K_OFFSETS);
        dm_size(b, offs + i * (size_t)ndim, ndim);
        dm_get(b, DM_K_SIZES);
        dm_size(b, sizes + i * (size_t)ndim, ndim);
        pk_setitems(b);
        pk_build(b);
        if (i % 1000 == 999 || i + 1 == nchunks) pk_appends(b);
    }
    pk_setitems(b);
    pk_build(b);
}

/* A non-tensor item `fqn` (BytesStorageMetadata). */
static inline void dm_bytes(dm *d, const char *fqn)
{
    pk_str(&d->sdm, fqn);
    dm_newobj(&d->sdm, DM_BSM);
}

/* storage_data: MetadataIndex(fqn, offset or None) -> _StorageInfo(path,
 * offset, length). */
static inline void dm_where(dm *d, const char *fqn, int ndim, const int64_t *off, const char *path,
                            uint64_t at, uint64_t len)
{
    bb *b = &d->sd;
    dm_newobj(b, DM_MI);
    pk_empty_dict(b);
    pk_mark(b);
    dm_get(b, DM_K_FQN);
    pk_str(b, fqn);
    dm_get(b, DM_K_OFFSET);
    if (off)
        dm_size(b, off, ndim);
    else
        pk_none(b);
    dm_get(b, DM_K_INDEX);
    pk_none(b);
    pk_setitems(b);
    pk_build(b);
    dm_newobj(b, DM_SI);
    pk_empty_dict(b);
    pk_mark(b);
    dm_get(b, DM_K_PATH);
    pk_str(b, path);
    dm_get(b, DM_K_OFFSET);
    pk_int(b, (int64_t)at);
    dm_get(b, DM_K_LENGTH);
    pk_int(b, (int64_t)len);
    pk_setitems(b);
    pk_build(b);
}

/* The whole .metadata pickle into out (freeing d's buffers). */
static inline void dm_finish(dm *d, bb *out)
{
    static const char *const glob[][2] = {
        {DM_MOD "metadata", "TensorStorageMetadata"},
        {DM_MOD "metadata", "ChunkStorageMetadata"},
        {DM_MOD "metadata", "TensorProperties"},
        {DM_MOD "metadata", "MetadataIndex"},
        {DM_MOD "filesystem", "_StorageInfo"},
        {DM_MOD "metadata", "BytesStorageMetadata"},
        {"torch", "Size"},
        {"torch", "float32"},
        {"torch", "int64"},
    };
    static const char *const keys[] = {"properties", "size",  "chunks", "offsets",
                                       "sizes",      "fqn",   "offset", "index",
                                       "relative_path", "length"};
    pk_proto(out, 2);
    uint32_t slot = 0;
    for (size_t i = 0; i < sizeof glob / sizeof glob[0]; i++) {
        pk_global(out, glob[i][0], glob[i][1]);
        bb_u8(out, 'r'); /* LONG_BINPUT */
        bb_le32(out, slot++);
        bb_u8(out, '0'); /* POP */
    }
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++) {
        pk_str(out, keys[i]);
        bb_u8(out, 'r');
        bb_le32(out, slot++);
        bb_u8(out, '0');
    }
    pk_global(out, DM_MOD "metadata", "Metadata");
    pk_empty_tuple(out);
    bb_u8(out, 0x81);
    pk_empty_dict(out);
    pk_mark(out);
    pk_str(out, "state_dict_metadata");
    pk_empty_dict(out);
    pk_mark(out);
    bb_append(out, &d->sdm);
    pk_setitems(out);
    pk_str(out, "planner_data");
    pk_none(out);
    pk_str(out, "storage_data");
    pk_empty_dict(out);
    pk_mark(out);
    bb_append(out, &d->sd);
    pk_setitems(out);
    pk_setitems(out);
    pk_build(out);
    pk_stop(out);
    bb_free(&d->sdm);
    bb_free(&d->sd);
}

/* A torch.save record holding one float32 tensor v[0..n) (shape [rows,
 * n / rows]): the bytes of a ZIP as torch 2.6 writes a DCP chunk. */
static inline void cw_record_f32(bb *out, const float *v, int64_t rows, int64_t cols)
{
    zipb *z = calloc(1, sizeof *z);
    if (!z) abort();
    zb_init(z);
    bb p = {0}, d0 = {0};
    int64_t shape[2] = {rows, cols}, stride[2] = {cols, 1};
    pk_proto(&p, 2);
    pk_tensor(&p, "FloatStorage", "0", rows * cols, 0, 2, shape, stride);
    pk_stop(&p);
    for (int64_t i = 0; i < rows * cols; i++) bb_f32le(&d0, v[i]);
    zb_add(z, "archive/data.pkl", p.p, p.n);
    zb_add(z, "archive/byteorder", "little", 6);
    zb_add(z, "archive/data/0", d0.p, d0.n);
    zb_add(z, "archive/version", "3\n", 2);
    zb_finish(z);
    bb_append(out, &z->out);
    bb_free(&z->out);
    bb_free(&p);
    bb_free(&d0);
    free(z);
}

/* ---- a torch.save ZIP of many tensors ----------------------------------------- */

/* torch.save({name_i: tensor}) of n float32 tensors of one element each,
 * storage i in its own record, written as torch does it (globals and
 * repeated strings memoized, SETITEMS of 1000), stored, ZIP64 end records. */
static inline void cw_zip_many(const char *path, size_t n, const char *name_fmt)
{
    bb pk = {0}, cd = {0}, out = {0};
    pk_proto(&pk, 2);
    pk_empty_dict(&pk);
    uint32_t memo = 0;
    char name[128], key[32];
    for (size_t i = 0; i < n; i++) {
        if (i % 1000 == 0) pk_mark(&pk);
        snprintf(name, sizeof name, name_fmt, i);
        pk_str(&pk, name);
        if (i == 0) {
            pk_global(&pk, "torch._utils", "_rebuild_tensor_v2");
            bb_u8(&pk, 'r');
            bb_le32(&pk, memo++); /* 0 */
        } else {
            dm_get(&pk, 0);
        }
        pk_mark(&pk);
        pk_mark(&pk);
        if (i == 0) {
            pk_str(&pk, "storage");
            bb_u8(&pk, 'r');
            bb_le32(&pk, memo++); /* 1 */
            pk_global(&pk, "torch", "FloatStorage");
            bb_u8(&pk, 'r');
            bb_le32(&pk, memo++); /* 2 */
        } else {
            dm_get(&pk, 1);
            dm_get(&pk, 2);
        }
        snprintf(key, sizeof key, "%zu", i);
        pk_str(&pk, key);
        if (i == 0) {
            pk_str(&pk, "cpu");
            bb_u8(&pk, 'r');
            bb_le32(&pk, memo++); /* 3 */
        } else {
            dm_get(&pk, 3);
        }
        pk_int(&pk, 1);
        pk_tuple(&pk);
        pk_binpersid(&pk);
        int64_t one = 1;
        pk_view_args(&pk, 0, 1, &one, &one);
        pk_bool(&pk, 0);
        if (i == 0) {
            pk_global(&pk, "collections", "OrderedDict");
            bb_u8(&pk, 'r');
            bb_le32(&pk, memo++); /* 4 */
        } else {
            dm_get(&pk, 4);
        }
        pk_empty_tuple(&pk);
        pk_reduce(&pk);
        pk_tuple(&pk);
        pk_reduce(&pk);
        if (i % 1000 == 999 || i + 1 == n) pk_setitems(&pk);
    }
    pk_stop(&pk);
    uint64_t count = 0;
    /* one stored record: local header, name, data; its central entry */
#define CW_RECORD(nm, data, len)                                                                   \
    do {                                                                                           \
        size_t nl_ = strlen(nm);                                                                   \
        uint32_t crc_ = (uint32_t)crc32(0L, (const Bytef *)(data), (uInt)(len));                  \
        uint64_t at_ = out.n;                                                                      \
        bb_le32(&out, 0x04034b50u);                                                                \
        bb_le16(&out, 20);                                                                         \
        bb_le16(&out, 0);                                                                          \
        bb_le16(&out, 0);                                                                          \
        bb_le16(&out, 0);                                                                          \
        bb_le16(&out, 0x21);                                                                       \
        bb_le32(&out, crc_);                                                                       \
        bb_le32(&out, (uint32_t)(len));                                                            \
        bb_le32(&out, (uint32_t)(len));                                                            \
        bb_le16(&out, (uint32_t)nl_);                                                              \
        bb_le16(&out, 0);                                                                          \
        bb_put(&out, nm, nl_);                                                                     \
        bb_put(&out, data, len);                                                                   \
        bb_le32(&cd, 0x02014b50u);                                                                 \
        bb_le16(&cd, 0x031e);                                                                      \
        bb_le16(&cd, 20);                                                                          \
        bb_le16(&cd, 0);                                                                           \
        bb_le16(&cd, 0);                                                                           \
        bb_le16(&cd, 0);                                                                           \
        bb_le16(&cd, 0x21);                                                                        \
        bb_le32(&cd, crc_);                                                                        \
        bb_le32(&cd, (uint32_t)(len));                                                             \
        bb_le32(&cd, (uint32_t)(len));                                                             \
        bb_le16(&cd, (uint32_t)nl_);                                                               \
        bb_le16(&cd, 0);                                                                           \
        bb_le16(&cd, 0);                                                                           \
        bb_le16(&cd, 0);                                                                           \
        bb_le16(&cd, 0);                                                                           \
        bb_le32(&cd, 0);                                                                           \
        bb_le32(&cd, (uint32_t)at_);                                                               \
        bb_put(&cd, nm, nl_);                                                                      \
        count++;                                                                                   \
    } while (0)
    CW_RECORD("archive/data.pkl", pk.p, pk.n);
    CW_RECORD("archive/byteorder", "little", 6);
    for (size_t i = 0; i < n; i++) {
        char rec[64];
        float v = (float)i;
        uint8_t le[4];
        memcpy(le, &v, 4);
        snprintf(rec, sizeof rec, "archive/data/%zu", i);
        CW_RECORD(rec, le, 4);
    }
    CW_RECORD("archive/version", "3\n", 2);
#undef CW_RECORD
    uint64_t cd_off = out.n;
    bb_append(&out, &cd);
    zb_end_records(&out, count, cd_off, 1, 1);
    cw_file(path, out.p, out.n);
    bb_free(&pk);
    bb_free(&cd);
    bb_free(&out);
}

#endif
