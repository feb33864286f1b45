/*
 * internal.h - what the layers of libckpt share.  Not installed.
 *
 * Layers (each calls only those below it):
 *   catalogue.c  open orchestration, tensor naming, reads, mmap views
 *   value.c      the public value accessors
 *   pickle.c     the pickle machine: opcodes 0-5, stack, memo, limits
 *   zip.c tar.c legacy.c   containers: find the pickle(s) and storages
 *   source.c     bytes by (offset, length): file, memory, mmap, reader
 *   util.c       errors, arena, hash map, dtype table, checked arithmetic
 */
#ifndef CKPT_INTERNAL_H
#define CKPT_INTERNAL_H

#define CKPT_BUILDING 1
#include "ckpt.h"

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#if defined(__GNUC__)
#define CK_PRINTF(a, b) __attribute__((format(printf, a, b)))
#else
#define CK_PRINTF(a, b)
#endif

/* ---- errors ------------------------------------------------------------ */

/* Fill err (may be NULL) and return -1. */
int ck_fail(ckpt_error *err, ckpt_code code, int64_t offset, const char *fmt,
            ...) CK_PRINTF(4, 5);
#define CK_TRY(x)              \
    do {                       \
        if ((x) != 0) return -1; \
    } while (0)

/* ---- checked arithmetic (true on overflow) ---------------------------- */
static inline bool ck_add_ovf(uint64_t a, uint64_t b, uint64_t *r) {
    return __builtin_add_overflow(a, b, r);
}
static inline bool ck_mul_ovf(uint64_t a, uint64_t b, uint64_t *r) {
    return __builtin_mul_overflow(a, b, r);
}

/* Little-endian loads from byte pointers. */
static inline uint16_t ck_le16(const uint8_t *p) {
    return (uint16_t)(p[0] | (p[1] << 8));
}
static inline uint32_t ck_le32(const uint8_t *p) {
    return (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) |
           ((uint32_t)p[3] << 24);
}
static inline uint64_t ck_le64(const uint8_t *p) {
    return (uint64_t)ck_le32(p) | ((uint64_t)ck_le32(p + 4) << 32);
}

/* ---- arena: every value, name and table of one open file --------------- */
typedef struct ck_block ck_block;
typedef struct ck_arena {
    ck_block *head;
    uint64_t total;   /* bytes obtained for blocks */
    uint64_t outside; /* bytes charged from outside: pickle stack, memo, buffers */
    uint64_t limit;   /* total + outside may not pass it (max_memory); 0: none */
    uint64_t peak;    /* highest total + outside */
    bool over;        /* something was refused for the limit */
} ck_arena;

void *ck_alloc(ck_arena *a, size_t n);          /* zeroed, 8-aligned; NULL on OOM */
void *ck_alloc_copy(ck_arena *a, const void *p, size_t n);
char *ck_strndup(ck_arena *a, const char *s, size_t n); /* NUL-terminated */
void ck_arena_free(ck_arena *a);
/* Memory held outside the arena but counted against its limit: 0, or -1
 * (and `over` set) when `n` more bytes would pass the limit. */
int ck_mem_charge(ck_arena *a, uint64_t n);
void ck_mem_release(ck_arena *a, uint64_t n);

/* ---- string -> index hash map (arena backed, insertion ordered ids) ---- */
typedef struct ck_map_slot {
    uint64_t hash;
    size_t idx; /* entry index + 1, 0 = empty */
} ck_map_slot;
typedef struct ck_map_entry {
    const char *key;
    size_t len, val;
} ck_map_entry;
typedef struct ck_map {
    ck_map_slot *slots;
    ck_map_entry *entries;
    size_t count, cap; /* cap is a power of two */
} ck_map;
/* Find: returns true and *val when present. */
bool ck_map_get(const ck_map *m, const char *k, size_t n, size_t *val);
/* Insert (key must outlive the map).  Returns -1 on OOM. */
int ck_map_put(ck_map *m, const char *k, size_t n, size_t val);
/* Insert unless present: 0 inserted, 1 present (*val gets its value), -1 OOM. */
int ck_map_add(ck_map *m, const char *k, size_t n, size_t val, size_t *old);
void ck_map_free(ck_map *m);

/* ---- dtypes ------------------------------------------------------------ */
/* One past the last ckpt_dtype (not public: ckpt.h promises no count). */
#define CK_DTYPE_COUNT ((unsigned)CKPT_UINT64 + 1u)
const char *ck_dtype_name(ckpt_dtype d);
size_t ck_dtype_size(ckpt_dtype d);
/* size of one swap unit for byte swapping (component size for complex) */
size_t ck_dtype_swap_unit(ckpt_dtype d);

/* ---- source: every byte from the file enters here ---------------------- */
typedef struct ck_source {
    int (*read)(void *opaque, uint64_t off, void *buf, size_t n);
    void (*close)(void *opaque);
    void *opaque;
    uint64_t size;
    const uint8_t *map; /* the whole file when in memory or mapped, else NULL */
    size_t map_len;     /* for munmap */
    int fd;             /* owned fd or -1 */
    bool mapped;        /* map came from mmap */
} ck_source;

int ck_source_open_path(ck_source *s, const char *path, bool use_mmap,
                        ckpt_error *err);
void ck_source_memory(ck_source *s, const void *data, size_t size);
void ck_source_reader(ck_source *s, const ckpt_reader *r);
void ck_source_close(ck_source *s);
/* Read exactly n bytes at off; a range outside the file is a format error
 * naming `what`. */
int ck_read(const ck_source *s, uint64_t off, void *buf, size_t n,
            const char *what, ckpt_error *err);

/* A sliding read window: many small records read with few syscalls. */
typedef struct ck_window {
    const ck_source *src;
    uint8_t *buf;
    size_t cap, len;
    uint64_t off;
} ck_window;
/* Pointer to n bytes at off (valid until the next call), or NULL + err. */
const uint8_t *ck_win(ck_window *w, uint64_t off, size_t n, const char *what,
                      ckpt_error *err);
void ck_win_free(ck_window *w);

/* ---- values ------------------------------------------------------------ */

/* Globals the machine recognises by (module, name). */
typedef enum ck_gid {
    G_UNKNOWN = 0,
    G_REBUILD_TENSOR,      /* torch._utils._rebuild_tensor */
    G_REBUILD_TENSOR_V2,
    G_REBUILD_TENSOR_V3,
    G_REBUILD_PARAMETER,
    G_REBUILD_PARAMETER_STATE,
    G_REBUILD_FROM_TYPE_V2,
    G_REFUSED,             /* sparse, quantized, nested, ... (see layout) */
    G_ORDEREDDICT,
    G_DEFAULTDICT,
    G_DICT,
    G_LIST,
    G_SET,
    G_FROZENSET,
    G_TUPLE,
    G_CODECS_ENCODE,
    G_BYTEARRAY,
    G_BYTES,
    G_TORCH_SIZE,
    G_STORAGE_CLASS,       /* torch.FloatStorage ... (dtype), UntypedStorage */
    G_DTYPE,               /* torch.float32 ... (dtype) */
    G_COPYREG_RECONSTRUCTOR,
    G_COPYREG_NEWOBJ,
    G_TENSOR_CLASS,        /* torch.Tensor, torch.nn.parameter.Parameter */
    G_OTHER_KNOWN
} ck_gid;

typedef struct ck_tdef ck_tdef;

/* The rarer parts of values live out of line, keeping a node at 40 bytes. */
typedef struct ck_obj {
    ckpt_value *callable;
    ckpt_value *args, *state, *items, *list;
    const char *refused; /* layout name when a refused tensor kind */
} ck_obj;
typedef struct ck_global {
    const char *module, *name;
    size_t gref;         /* index in ckpt_file.globals */
    const char *layout;  /* for refused rebuilds */
} ck_global;

struct ckpt_value {
    uint8_t kind;      /* ckpt_kind */
    uint8_t gid;       /* ck_gid for GLOBAL */
    uint8_t dtype;     /* for GLOBAL storage classes and dtypes */
    uint8_t untyped;   /* GLOBAL: UntypedStorage */
    uint32_t id;       /* sequential per file, for walks */
    const char *cls;   /* DICT subclass / OBJECT class text / GLOBAL "mod.name" */
    union {
        bool b;
        int64_t i;
        double f;
        struct { char *p; size_t n; } s;                 /* STR BYTES BIGINT */
        struct { ckpt_value **v; size_t n, cap; } seq;   /* LIST TUPLE SET; DICT: 2n */
        ck_obj *obj;                                      /* OBJECT */
        ck_global *g;                                     /* GLOBAL */
        ck_tdef *t;                                       /* TENSOR */
        size_t storage;                                   /* STORAGE */
    } u;
};

/* A tensor as the pickle rebuilt it (before naming). */
struct ck_tdef {
    size_t storage;
    ckpt_dtype dtype;
    uint32_t ndim;
    int64_t *shape, *stride;
    int64_t offset;
    uint64_t numel;
    bool requires_grad;
    int64_t offset_pos;  /* file offset of the REDUCE, for errors */
    size_t listed;       /* index+1 of the first listed ckpt_tensor, 0 none */
    ckpt_tensor *desc;   /* a tensor not listed: its nameless descriptor,
                            when its extent is sound */
};

/* A storage as the container knows it. */
typedef struct ck_storage {
    ckpt_storage pub;
    const char *pkey;      /* arena copy of the key */
    uint64_t data_off;     /* where bytes start in the file (when stored) */
    uint64_t comp_size;    /* ZIP: bytes of the record as stored */
    uint32_t crc;          /* ZIP: recorded CRC-32 */
    uint16_t method;       /* ZIP: 0 stored, 8 deflate */
    size_t zip_index;      /* ZIP: its record in f->zip */
    bool resolved;         /* data_off/pub.nbytes known */
    bool untyped;          /* UntypedStorage (dtype from the tensor) */
    int64_t root;          /* legacy/tar view: index of the root storage, -1 */
    uint64_t view_off;     /* bytes into the root */
    uint64_t declared;     /* legacy/tar: numel declared by the pickle */
    int64_t decl_pos;      /* file offset where it was declared */
} ck_storage;

/* ---- the open file ----------------------------------------------------- */

typedef struct ck_inflater ck_inflater; /* zip.c: a resumable inflate cursor */
void ck_inflater_free(ck_inflater *st);

typedef struct ck_zip_entry {
    const char *name;
    size_t name_len;
    uint64_t comp_size, size, local_off, data_off;
    uint32_t crc;
    uint16_t method, flags;
    int64_t cd_pos;
} ck_zip_entry;

struct ckpt_file {
    ckpt_options opt;
    ck_source src;
    ck_arena arena;
    ckpt_format format;
    ckpt_byteorder byteorder;
    const char *version;
    const char *root_name;
    char *key_copy;

    ckpt_value *root;    /* whole object */
    ckpt_value *sel;     /* selected key's value or root */
    uint32_t next_id;
    uint64_t copies;     /* pickle.c: words copied out of shared values, all pickles */
    uint64_t pickle_bytes; /* bytes of the pickles run so far */

    ck_storage *storages;
    size_t nstorages, cap_storages;
    ck_map storage_keys;

    ckpt_tensor *tensors;
    size_t ntensors, cap_tensors;
    ck_tdef **tdefs;     /* every tensor the pickles rebuilt */
    size_t ntdefs, cap_tdefs;
    ck_map tensor_names;
    uint64_t total_bytes;

    ckpt_global_ref *globals;
    size_t nglobals, cap_globals;
    const char **notes;
    size_t nnotes, cap_notes;

    /* ZIP index */
    ck_zip_entry *zip;
    size_t nzip;
    ck_map zip_names;
    size_t *zip_storage;  /* per record: storage index + 1, 0 none */
    size_t *zip_data_num; /* "data/<n>" records by n: index + 1 (torch's keys are 0..N-1) */
    ck_inflater *inflater; /* when records are deflated: sequential reads resume */
    size_t nzip_data_num;
    /* TAR members used by the reader */
    const char *pickle_label;
};

/* The memory limit: max_memory, plus CK_MEM_PER_BYTE for every byte past
 * the first CK_MEM_FREE_BYTES of the pickles run so far (counting at most
 * the file's size, so an inflated pickle earns nothing).  Only grows. */
#define CK_MEM_PER_BYTE 24u
#define CK_MEM_FREE_BYTES ((uint64_t)16 << 20)
void ck_mem_allow(ckpt_file *f, uint64_t pickle_bytes);
/* After a failure: an out-of-memory error caused by the limit becomes a
 * limit error that names it. */
void ck_mem_blame(const ckpt_file *f, ckpt_error *err);

/* The expansion budget: max_expansion plus half a step per pickle byte, so
 * that a big honest state dict (about 0.3 steps per byte) always fits while
 * sharing tricks in a small file still run out. */
static inline uint64_t ck_budget(const ckpt_file *f, uint64_t pickle_bytes) {
    uint64_t b = f->opt.max_expansion + pickle_bytes / 2;
    return b < f->opt.max_expansion ? UINT64_MAX : b;
}

/* Grow a malloc'd array so it can hold `need` items (checked). */
int ck_grow(void **arr, size_t *cap, size_t need, size_t item, ckpt_error *err);
/* ck_grow, charging the growth to `a` first (see ck_mem_charge). */
int ck_grow_in(ck_arena *a, void **arr, size_t *cap, size_t need, size_t item,
               ckpt_error *err);

int ck_note(ckpt_file *f, const char *fmt, ...) CK_PRINTF(2, 3);

/* value constructors (arena) */
ckpt_value *ck_new(ckpt_file *f, ckpt_kind kind);
ckpt_value *ck_new_str(ckpt_file *f, ckpt_kind kind, const char *p, size_t n);
/* append to LIST/TUPLE/SET/DICT storage */
int ck_seq_push(ckpt_file *f, ckpt_value *v, ckpt_value *item);

/* storage table */
/* Find or add a storage by key. *created tells whether it is new. */
int ck_storage_get(ckpt_file *f, const char *key, size_t klen, size_t *idx,
                   bool *created, ckpt_error *err);
/* Append a storage without indexing its key (ZIP indexes by record). */
int ck_storage_new(ckpt_file *f, const char *key, size_t klen, size_t *idx,
                   ckpt_error *err);

/* ---- pickle machine ---------------------------------------------------- */

typedef struct ck_pickle_in {
    const uint8_t *buf;
    size_t len;
    bool more;            /* the pickle may continue past len (stream) */
    int64_t base;         /* file offset of buf[0] (for errors); -1 unknown */
    const char *label;    /* "data.pkl", "legacy:object", ... */
    /* persistent_load: turn a pid into a value (storage, tensor, ...) */
    ckpt_value *(*persistent_load)(ckpt_file *f, void *ud, ckpt_value *pid,
                                   int64_t pos, ckpt_error *err);
    void *ud;
} ck_pickle_in;

/* Run one pickle.  Returns 0 and *out, *used (bytes consumed incl. STOP);
 * 1 when the buffer ended before STOP and in->more is set (retry with more
 * bytes); -1 on error. */
int ck_pickle_run(ckpt_file *f, const ck_pickle_in *in, ckpt_value **out,
                  size_t *used, ckpt_error *err);

/* Run a pickle that starts at file offset `off` and ends at most at `end`,
 * reading a growing window through the source.  Returns 0/-1. */
int ck_pickle_at(ckpt_file *f, uint64_t off, uint64_t end, const char *label,
                 ckpt_value *(*pl)(ckpt_file *, void *, ckpt_value *, int64_t,
                                   ckpt_error *),
                 void *ud, ckpt_value **out, uint64_t *used, ckpt_error *err);

/* Helpers shared by containers to read pickled values. */
bool ck_as_int(const ckpt_value *v, int64_t *out);
bool ck_is_str(const ckpt_value *v, const char *s);

/* ---- containers -------------------------------------------------------- */
int ck_zip_open(ckpt_file *f, ckpt_error *err);
/* After a failed open of a ZIP: replace err by a CRC mismatch of a record
 * the open read, if there is one.  Returns -1. */
int ck_zip_blame_damage(ckpt_file *f, ckpt_error *err);
int ck_legacy_open(ckpt_file *f, ckpt_error *err);
int ck_tar_open(ckpt_file *f, ckpt_error *err);
bool ck_tar_bid(const uint8_t *b, size_t n);
/* Storage bytes [off, off+n) of storage s into buf (raw, file byte order). */
int ck_storage_bytes(const ckpt_file *f, const ck_storage *s, uint64_t off,
                     void *buf, size_t n, ckpt_error *err);

/* Storage persistent_load shared by ZIP and legacy. */
/* `prefix`: the ZIP folder of the records ("data/", TorchScript's
 * "constants/"); NULL for the legacy stream. */
ckpt_value *ck_storage_pid(ckpt_file *f, ckpt_value *pid, int64_t pos,
                           bool legacy, const char *prefix, ckpt_error *err);

/* ---- catalogue ----------------------------------------------------------- */
int ck_catalogue(ckpt_file *f, ckpt_error *err);
/* Remember a rebuilt tensor (for descriptors of tensors not listed). */
int ck_add_tdef(ckpt_file *f, ck_tdef *t, ckpt_error *err);

#endif
