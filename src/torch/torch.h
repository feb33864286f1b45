/*
 * torch.h - layer 3 of libckpt: what torch's pickles mean.  The open file,
 * the hooks that make the pickle machine build tensors and storages (the
 * rebuild functions, storage classes, dtypes), the one dtype table, the one
 * tensor validator (pickled rebuilds and TAR records alike), the storage
 * table and its keys, state_dict naming, tensor reads.  Calls pickle/ and
 * common/; a container is reached only through the ops table in
 * ckpt_file.fmt (set by formats/).  Not installed.
 */
#ifndef CKPT_TORCH_H
#define CKPT_TORCH_H

#include "../pickle/pickle.h"

#include <stdatomic.h>

/* Tags the torch hooks give globals (ckpt_value.gid, after CK_TAG_HOOK). */
typedef enum ck_torch_tag {
    CK_G_REBUILD_TENSOR = CK_TAG_HOOK, /* torch._utils._rebuild_tensor */
    CK_G_REBUILD_TENSOR_V2,
    CK_G_REBUILD_TENSOR_V3,
    CK_G_REBUILD_PARAMETER,
    CK_G_REBUILD_PARAMETER_STATE,
    CK_G_REBUILD_FROM_TYPE_V2,
    CK_G_REFUSED, /* sparse, quantized, nested, ... (u.g->note: layout) */
    CK_G_TORCH_SIZE,
    CK_G_STORAGE_CLASS, /* torch.FloatStorage ... (aux: dtype; aux2: untyped) */
    CK_G_DTYPE,         /* torch.float32 ... (aux: dtype) */
    CK_G_TENSOR_CLASS,  /* torch.Tensor, torch.nn.parameter.Parameter */
    /* tensor kinds (kinds.c) */
    CK_G_REBUILD_QTENSOR, /* torch._utils._rebuild_qtensor */
    CK_G_REBUILD_SPARSE,  /* _rebuild_sparse_tensor, _rebuild_sparse_csr_tensor */
    CK_G_REBUILD_META,    /* _rebuild_meta_tensor_no_storage */
    CK_G_REBUILD_NESTED,  /* _rebuild_nested_tensor */
    CK_G_LAYOUT,          /* torch.sparse_coo ... (aux: ckpt_layout) */
    CK_G_GET_LAYOUT,      /* torch.serialization._get_layout */
    CK_G_QSCHEME,         /* torch.per_tensor_affine ... (aux: ckpt_qscheme) */
    CK_G_NP_RECONSTRUCT,  /* numpy.core.multiarray._reconstruct */
    CK_G_NP_NDARRAY,      /* numpy.ndarray */
    CK_G_NP_DTYPE,        /* numpy.dtype */
    CK_G_NP_SCALAR,       /* numpy.core.multiarray.scalar */
    CK_G_LOAD_FROM_BYTES, /* torch.storage._load_from_bytes */
    CK_G_NP_FROMBUFFER    /* numpy.core.numeric._frombuffer */
} ck_torch_tag;

/* ---- dtypes: the one table ------------------------------------------------ */
/* One past the last ckpt_dtype (not public: ckpt.h promises no count). */
#define CK_DTYPE_COUNT ((unsigned)CKPT_BITS4X2 + 1u)
const char *ck_dtype_name(ckpt_dtype d);
/* The table's rows (dtype.c); read through the functions here. */
typedef struct ck_dtype_row {
    const char *name;    /* torch.<name>, ckpt_dtype_name() */
    const char *alias;   /* another torch.<alias> for it, or NULL */
    uint8_t size, unit;  /* element bytes, swap unit */
    const char *storage; /* torch.<storage> (typed storage class), or NULL */
} ck_dtype_row;
extern const ck_dtype_row ck_dtype_rows[CK_DTYPE_COUNT];
/* Element bytes (0 for no dtype).  Inline: a listing asks a few times a
 * tensor. */
static inline size_t ck_dtype_size(ckpt_dtype d)
{
    return (unsigned)d < CK_DTYPE_COUNT ? ck_dtype_rows[d].size : 0;
}
/* size of one swap unit for byte swapping (component size for complex) */
size_t ck_dtype_swap_unit(ckpt_dtype d);
/* torch.<name> (float32, half, ...) and torch.<Name>Storage: 0 and *d, or -1. */
int ck_dtype_by_torch_name(const char *name, size_t n, ckpt_dtype *d);
int ck_dtype_by_storage_class(const char *name, size_t n, ckpt_dtype *d);
/* torch's neg works on it (floats, complex, signed ints, uint8). */
bool ck_dtype_negatable(ckpt_dtype d);
/* Apply a conj and/or neg bit to n bytes of whole native-order elements. */
void ck_dtype_resolve(ckpt_dtype d, bool conj, bool neg, uint8_t *p, size_t n);

/* A tensor as the pickle (or a TAR record) rebuilt it, before naming: 56
 * bytes (a 1M-tensor state dict holds a million).  Its element count is the
 * product of its shape (ck_tdef_numel()); its storage index is 32 bits
 * (ck_storage_new() keeps indices below INT32_MAX; ck_tdef_set_storage()). */
typedef struct ck_tdef {
    int64_t *shape, *stride;
    int64_t offset;
    int64_t offset_pos;     /* file offset of the REDUCE, for errors */
    struct ck_tkind *kind;  /* quantized, sparse, numpy, unreadable, or not
                               listed: the rest (ck_tdef_kind()); or NULL */
    uint32_t sidx;          /* storage index, CK_TDEF_NO_STORAGE for none */
    uint32_t listed;        /* index+1 of the first listed ckpt_tensor, 0 none
                            (fewer than max_entries are listed) */
    ckpt_dtype dtype;
    uint8_t ndim;           /* at most 64 (options.max_rank is clamped) */
    bool requires_grad;
    bool conj, neg;         /* torch 2.x metadata {"conj": True} / {"neg": True} */
} ck_tdef;

#define CK_TDEF_NO_STORAGE UINT32_MAX

/* No storage (an unreadable tensor). */
#define CK_NO_STORAGE ((size_t)-1)

/* Set t's storage index: i below INT32_MAX (ck_storage_new()), or CK_NO_STORAGE. */
static inline void ck_tdef_set_storage(ck_tdef *t, size_t i)
{
    t->sidx = i >= CK_TDEF_NO_STORAGE ? CK_TDEF_NO_STORAGE : (uint32_t)i;
}
/* The product of t's shape (0 when a dimension is); UINT64_MAX when it
 * overflows (only an unreadable tensor's can: ck_tensor_new() refuses the
 * rest). */
static inline uint64_t ck_tdef_numel(const ck_tdef *t)
{
    uint64_t n = 1;
    bool over = false;
    for (uint32_t i = 0; i < t->ndim; i++) {
        if (t->shape[i] == 0) return 0;
        if (!over && ck_mul_ovf(n, (uint64_t)t->shape[i], &n)) over = true;
    }
    return over ? UINT64_MAX : n;
}

/* What a tensor kind adds to a rebuilt tensor (kinds.c). */
typedef struct ck_tkind {
    ckpt_layout layout;
    uint32_t dense_ndim;
    int64_t *dense_size;
    size_t nparts; /* sparse: its components, listed as NAME.<part_names[i]> */
    ck_tdef *parts[3];
    const char *part_names[3];
    ckpt_qscheme qscheme;
    double scale;
    int64_t zero_point, axis;
    ck_tdef *qscales, *qzeros; /* per channel: read at catalogue time */
    size_t nchannels;
    double *scales, *zero_points;
    unsigned sub_byte;    /* quint4x2: 2, quint2x4: 4 values per byte, else 0 */
    bool big_endian;      /* numpy '>' data */
    const uint8_t *bytes; /* numpy: the element bytes inside the pickle */
    const char *unreadable; /* why its bytes cannot be read; NULL: readable */
    ckpt_tensor *desc;      /* a tensor not listed: its nameless descriptor,
                               when its extent is sound */
} ck_tkind;

/* Why t's bytes cannot be read, or NULL. */
static inline const char *ck_tdef_unreadable(const ck_tdef *t)
{
    return t->kind ? t->kind->unreadable : NULL;
}
/* t's kind, made (zeroed: a plain tensor's) if it has none: NULL on OOM. */
ck_tkind *ck_tdef_kind(ckpt_file *f, ck_tdef *t);

static inline ck_tdef *ck_tdef_of(const ckpt_value *v)
{
    return (ck_tdef *)v->u.ext;
}

/* A storage as the container knows it: 64 bytes.  Where the bytes of one
 * not packed start in the file is pub.file_offset (ck_storage_data_off()). */
typedef struct ck_storage {
    ckpt_storage pub;  /* pub.key: the arena copy of the key, or the tail of
                          its ZIP record's name (ck_storage_add()) */
    union {            /* one word, whose meaning the kind of storage says: */
        size_t rec;    /* ZIP: its entry (the container's record of it) */
        uint64_t view_off; /* a legacy/TAR view (root >= 0): bytes into the root */
        int64_t decl_pos;  /* a legacy root: the file offset where the pickle
                              declared it (for errors), -1 unknown */
    };
    int32_t root;      /* legacy/tar view: index of the root storage, -1
                          (ck_storage_new() keeps indices below INT32_MAX) */
    bool packed;       /* compressed: only the container reads them */
    bool resolved;     /* its file offset and pub.nbytes known */
    bool untyped;      /* UntypedStorage (dtype from the tensor) */
} ck_storage;

/* The element count the pickle declared: pub.nbytes is it times the
 * declaring class's element size, the class's dtype unless untyped (whose
 * size is counted in bytes, and whose pub.dtype a typed view may set). */
static inline uint64_t ck_storage_declared(const ck_storage *s)
{
    size_t es = s->untyped ? 1 : ck_dtype_size(s->pub.dtype);
    return es ? s->pub.nbytes / es : s->pub.nbytes;
}

/* Where a storage's bytes start in the file: not packed, resolved, and not
 * a part of a sharded set (whose bytes are in another file). */
static inline uint64_t ck_storage_data_off(const ck_storage *s)
{
    return (uint64_t)s->pub.file_offset;
}

/* ---- the open file ----------------------------------------------------- */

/* Tensor name -> index of f->tensors, for ckpt_find(): open addressing
 * whose slots hold the hash's low half and the index + 1; the key is the
 * listed tensor's own name (no copy, no entry array).  8 bytes a slot, at
 * most two thirds of them used; any number of slots (sized once for the
 * tensors a file's rebuilds promise), a slot's home the tag scaled to it. */
typedef struct ck_name_index {
    ck_map_slot *slots; /* as a ck_map's, without its entries */
    size_t count, cap;  /* cap: at most 2^32, or 0 */
} ck_name_index;
void ck_name_index_free(ck_name_index *m);

/* One listed tensor, as naming found it: the public descriptor
 * (ckpt_tensor, 192 bytes) is built from it only when asked for
 * (ckpt_tensor_at() and the like build a chunk at a time and keep it;
 * ckpt_tensor_get() copies one out and keeps nothing), so a listing of
 * many tensors holds 16 bytes a tensor, not 192.  A sparse component's
 * sparse tensor is in ckpt_file.sparse_of. */
typedef struct ck_listed {
    const char *name; /* arena, NUL-terminated; its own pointer (no two
                         listings share one), though not always a name of
                         its own: see ckpt_file.dups.  A name holding a
                         NUL byte has its length in ckpt_file.nul_names */
    ck_tdef *t;       /* its rebuild (a sparse tensor: the component's) */
} ck_listed;

/* Pairs of sizes kept in the order of their first member (arena, doubled,
 * the old array left): facts about a few listed tensors, by index. */
typedef struct ck_pair {
    size_t a, b;
} ck_pair;
typedef struct ck_pair_list {
    ck_pair *v;
    size_t n, cap;
} ck_pair_list;

/* Descriptors built by ckpt_tensor_at(), a chunk of this many at a time. */
#define CK_TCHUNK_BITS 7u
#define CK_TCHUNK ((size_t)1 << CK_TCHUNK_BITS)

/* Listed tensors that need one more rebuild than their own, by index:
 * appended in index order (arena, doubled, the old array left; few for
 * most files). */
typedef struct ck_held {
    size_t idx;
    const ck_tdef *t;
} ck_held;
typedef struct ck_held_list {
    ck_held *v;
    size_t n, cap;
} ck_held_list;

struct ck_format; /* formats/formats.h: a container's ops */

/* Where a container keeps the bytes of a storage named by a persistent id:
 * find or make its ck_storage (*created when new; a new one gets its bytes'
 * place), checking it can hold `nbytes`.  NULL binder: storages by key. */
typedef struct ck_storage_binder {
    int (*bind)(ckpt_file *f, void *ud, const char *key, size_t klen, uint64_t nbytes, int64_t pos,
                size_t *idx, bool *created, ckpt_error *err);
    void *ud;
} ck_storage_binder;

struct ckpt_file {
    ckpt_options opt;
    ck_source src;
    ck_arena arena;
    ck_unpickler pk;             /* the pickles' shared state: ids, globals, notes */
    const struct ck_format *fmt; /* the container that opened it */
    void *fmt_state;             /* the container's own index */
    /* the container's reader of root storage bytes; NULL: stored as is */
    int (*storage_read)(const ckpt_file *f, const ck_storage *s, uint64_t off, void *buf, size_t n,
                        ckpt_error *err);
    ckpt_format format;
    ckpt_byteorder byteorder;
    const char *version;
    const char *root_name;
    char *key_copy;

    /* while a pickle runs whose persistent ids all go to ck_storage_pid()
     * with this binder (a ZIP's data.pkl): the fast path binds without
     * making the id tuple (rebuild.c); else bind is NULL */
    ck_storage_binder pid_binder;

    ckpt_value *root; /* whole object */
    ckpt_value *sel;  /* selected key's value or root */

    ck_storage *storages;
    size_t nstorages, cap_storages;
    ck_map storage_keys;

    ck_listed *listed; /* naming's order, ntensors of them */
    size_t ntensors, cap_listed;
    /* the public descriptors, built a chunk at a time on first use by
     * whichever reader asks first (a compare-and-swap publishes a chunk; a
     * reader that loses frees its own): ntchunks pointers, NULL until then */
    _Atomic(ckpt_tensor *) *tchunks;
    size_t ntchunks;
    /* every tensor the pickles rebuilt, in chunks of CK_TPOOL (arena; no
     * pointer a tensor: ck_tdef_new(), ck_tdef_at()) */
    ck_tdef **tpool;
    size_t ntdefs, cap_tpool;
    ck_name_index tensor_names; /* ckpt_find(): slots only, keys are the names */
    uint64_t total_bytes;
    const char *pickle_label;
    /* what naming walks instead of sel when set (TorchScript: script.c) */
    ckpt_value *names_root;
    ckpt_value *constants, *extra; /* ckpt_part(): TorchScript's, or NULL */
    /* listed tensors held in the pickle (numpy arrays): their own rebuild */
    ck_held_list held;
    /* listed components of sparse tensors: the sparse tensor's rebuild */
    ck_held_list sparse_of;
    /* listed tensors whose name holds a NUL byte (a key 'w\x00evil'):
     * (index, length of the name); none in most files */
    ck_pair_list nul_names;
    /* listed tensors named as an earlier one (a file whose flattened names
     * clash, {'a.b': x, 'a': {'b': y}}): (index, the first one's index) */
    ck_pair_list dups;
    /* value ids of the numpy arrays naming listed (sorted after naming): a
     * later walk (catalogue.c's find mode) knows them without rebuilding */
    ck_pair_list np_ids;
    /* made after naming, when names clash: (index, the next listing of its
     * name or SIZE_MAX) for every listing of a clashing name, by index */
    ck_pair_list clash_next;
    /* made after naming: (name pointer, index) of the listings a lookup
     * by name does not reach (in dups, or in nul_names), by pointer */
    ck_pair_list by_ptr;
    /* shape/stride pairs shared by the tensors that have them (arena) */
    struct ck_dims_slot *dims;
    size_t ndims, cap_dims;
};

/* Storage bytes [off, off+n) of storage s (a root or a view) into buf (raw,
 * file byte order), through the container. */
int ck_storage_read(const ckpt_file *f, const ck_storage *s, uint64_t off, void *buf, size_t n,
                    ckpt_error *err);

/* ---- running torch's pickles -------------------------------------------- */

/* persistent_load of a container: a pid to a value (storage, ...). */
typedef ckpt_value *(*ck_pid_fn)(ckpt_file *f, void *ud, ckpt_value *pid, int64_t pos,
                                 ckpt_error *err);

/* Set up f->pk (arena, limits, the torch hooks); called once at open. */
void ck_torch_init(ckpt_file *f);
/* Run one pickle held in memory with torch's hooks (pl may be NULL). */
int ck_torch_run(ckpt_file *f, const ck_pickle_in *in, ck_pid_fn pl, void *ud, ckpt_value **out,
                 size_t *used, ckpt_error *err);
/* Run a pickle that starts at file offset `off` and ends at most at `end`,
 * reading a growing window through the source.  Returns 0/-1. */
int ck_torch_load(ckpt_file *f, uint64_t off, uint64_t end, const char *label, ck_pid_fn pl,
                  void *ud, ckpt_value **out, uint64_t *used, ckpt_error *err);

/* ---- storages ------------------------------------------------------------ */
/* Find or add a storage by key. *created tells whether it is new. */
int ck_storage_get(ckpt_file *f, const char *key, size_t klen, size_t *idx, bool *created,
                   ckpt_error *err);
/* Append a storage without indexing its key (ZIP indexes by record). */
int ck_storage_new(ckpt_file *f, const char *key, size_t klen, size_t *idx, ckpt_error *err);
/* ck_storage_new(), the key copied only with `copy`: without, key[klen] is
 * a NUL and the key outlives f (a ZIP record's name: its tail). */
int ck_storage_add(ckpt_file *f, const char *key, size_t klen, bool copy, size_t *idx,
                   ckpt_error *err);
ckpt_value *ck_storage_value(ckpt_file *f, size_t idx, ckpt_error *err);

/* torch's persistent id ('storage', StorageClass, key, location, numel) and
 * the legacy stream's (... , view) / ('module', ...).  `legacy`: the
 * 6-field form, storages by key, sizes checked against the file. */
ckpt_value *ck_storage_pid(ckpt_file *f, ckpt_value *pid, int64_t pos, bool legacy,
                           const ck_storage_binder *b, ckpt_error *err);
/* What ck_storage_pid() makes of ('storage', cls, key, location, numel),
 * a torch storage class, a key of fewer than 64 bytes and numel >= 0 (the
 * 5-field form): the storage's index (its value is the caller's to make). */
int ck_storage_ref(ckpt_file *f, const ckpt_value *cls, const char *key, size_t klen, int64_t numel,
                   int64_t pos, const ck_storage_binder *b, size_t *idx, ckpt_error *err);

/* ---- tensors ------------------------------------------------------------- */
/* The one validator: a tensor of `dtype` over storage `storage` with
 * shape/stride (ndim entries: arena arrays), element offset; checks the
 * element count and byte size, records it, returns it.  `pos`: for errors.
 * The tensor keeps shape/stride, or an equal pair an earlier tensor kept:
 * the caller's arrays, which must be its own arena allocations that nothing
 * else points at, are then given back.  After the call, use (*out)->shape
 * and (*out)->stride. */
int ck_tensor_new(ckpt_file *f, size_t storage, ckpt_dtype dtype, uint32_t ndim,
                  const int64_t *shape, const int64_t *stride, int64_t offset, int64_t pos,
                  ck_tdef **out, ckpt_error *err);
/* A new zeroed rebuild record, remembered (for descriptors of tensors not
 * listed); NULL on OOM (err set). */
ck_tdef *ck_tdef_new(ckpt_file *f, ckpt_error *err);
#define CK_TPOOL_BITS 8u
#define CK_TPOOL ((size_t)1 << CK_TPOOL_BITS)
/* Rebuild record i < f->ntdefs. */
static inline ck_tdef *ck_tdef_at(const ckpt_file *f, size_t i)
{
    return &f->tpool[i >> CK_TPOOL_BITS][i & (CK_TPOOL - 1)];
}
/* ---- tensor kinds (kinds.c) --------------------------------------------- */
/* rebuild.c: a checked strided tensor from (storage, offset, size, stride)
 * at a[0..3]; dtype_g a torch dtype global or NULL.  And its value. */
int ck_rebuild_strided(ckpt_file *f, ck_machine *m, ckpt_value **a, const ckpt_value *dtype_g,
                       ck_tdef **out);
ckpt_value *ck_tensor_value(ckpt_file *f, ck_tdef *t);
/* find_class for the kinds' globals: 1 when `g` was classified. */
int ck_kind_find_class(ckpt_value *g);
/* A call of a kind's global: as the reduce hook (0 / 1 declined / -1). */
int ck_kind_reduce(ckpt_file *f, ck_machine *m, ckpt_value *callable, ckpt_value *args,
                   ckpt_value **out);
/* A tensor ckpt cannot read, listed with what is known. */
int ck_kind_unreadable(ckpt_file *f, ck_machine *m, const char *why, ckpt_dtype dtype,
                       uint32_t ndim, const int64_t *shape, ckpt_value **out);
/* A numpy array (numpy.core.multiarray._reconstruct + BUILD state, or
 * protocol 5's numpy.core.numeric._frombuffer; numpy._core's too; its data
 * bytes or a Python 2 str) as a tensor over its bytes in the pickle: 1 and
 * *out, 0 when v is not one (an object array, an unknown dtype: it stays
 * inert), -1 on error. */
int ck_kind_numpy(ckpt_file *f, const ckpt_value *v, ck_tdef **out, ckpt_error *err);
/* A tensor rebuild whose storage is torch.storage._load_from_bytes(b) (a
 * pickle.dump of a tensor): a tensor over the bytes of the legacy stream in
 * b, or an unreadable one saying why.  a: the rebuild's arguments. */
int ck_kind_from_bytes(ckpt_file *f, ck_machine *m, ckpt_value **a, const ckpt_value *dtype_g,
                       ck_tdef **out);
/* Fill the kind's members of a descriptor. */
void ck_kind_describe(const ck_tdef *t, ckpt_tensor *o);

/* Name the tensors of f->root (or its key) and check their extents. */
int ck_catalogue(ckpt_file *f, ckpt_error *err);
/* The listed tensors and their descriptors (ckpt_close()). */
void ck_tensors_free(ckpt_file *f);

/* ---- TorchScript (script.c) ---------------------------------------------- */
/* The container's code/ record of a class module ("__torch__.a.b" holds
 * code/__torch__/a/b.py): 0 with *text (malloc'd, its length charged to
 * f->arena; the caller of the hook frees and releases it), 1 when there is
 * none, -1 with err. */
typedef int (*ck_code_fn)(ckpt_file *f, void *ud, const char *module, size_t n, char **text,
                          size_t *len, ckpt_error *err);
/* Set f->names_root so that naming gives torch.jit.load(f).state_dict()'s
 * names for the module graph in f->root. */
int ck_script_names(ckpt_file *f, ck_code_fn code, void *ud, ckpt_error *err);

#endif
