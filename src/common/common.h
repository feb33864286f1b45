/*
 * common.h - layer 1 of libckpt: what every layer shares and nothing above
 * it knows of pickles or torch.  Errors, checked arithmetic, little-endian
 * loads, the arena and its memory charge, the one hash map, growable arrays,
 * byte sources.  Not installed.
 *
 * Layers (each calls only those below it; src/<layer>/ holds each):
 *   formats  one file per container behind one ops table, and a registry
 *   torch    what torch's pickles mean: rebuilds, storages, dtypes, naming
 *   pickle   the generic pickle machine, extended through hooks
 *   common   this
 * src/tools/ sits on the public API only (json.c).
 */
#ifndef CKPT_COMMON_H
#define CKPT_COMMON_H

#define CKPT_BUILDING 1
#include "ckpt.h"

#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#if defined(__GNUC__)
#define CK_PRINTF(a, b) __attribute__((format(printf, a, b)))
#define CK_HOT inline __attribute__((always_inline)) /* a hot path, inlined */
#else
#define CK_PRINTF(a, b)
#define CK_HOT inline
#endif

/* ---- errors ------------------------------------------------------------ */

/* Fill err (may be NULL) and return -1. */
/* The caller's options as far as its struct_size reaches, defaults past it
 * (ABI rules in ckpt.h); NULL src: the defaults.  0, or -1 (CKPT_E_ARG) for
 * options never initialised (struct_size 0). */
int ck_take_options(ckpt_options *dst, const ckpt_options *src, ckpt_error *err);

int ck_fail(ckpt_error *err, ckpt_code code, int64_t offset, const char *fmt, ...) CK_PRINTF(4, 5);
#define CK_TRY(x)                                                                                  \
    do {                                                                                           \
        if ((x) != 0) return -1;                                                                   \
    } while (0)

/* ---- checked arithmetic (true on overflow) ---------------------------- */
static inline bool ck_add_ovf(uint64_t a, uint64_t b, uint64_t *r)
{
    return __builtin_add_overflow(a, b, r);
}
static inline bool ck_mul_ovf(uint64_t a, uint64_t b, uint64_t *r)
{
    return __builtin_mul_overflow(a, b, r);
}

/* Little-endian loads from byte pointers. */
static inline uint16_t ck_le16(const uint8_t *p)
{
    return (uint16_t)(p[0] | (p[1] << 8));
}
static inline uint32_t ck_le32(const uint8_t *p)
{
    return (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) | ((uint32_t)p[3] << 24);
}
static inline uint64_t ck_le64(const uint8_t *p)
{
    return (uint64_t)ck_le32(p) | ((uint64_t)ck_le32(p + 4) << 32);
}

/* ---- arena: every value, name and table of one open file --------------- */
typedef struct ck_block ck_block;
#define CK_FREE_MAX 256u /* largest allocation ck_free_small() keeps */
/* Under ASan a block given back is poisoned until reused: a value read
 * after the machine gave it back is reported, not silently misread. */
#if defined(__SANITIZE_ADDRESS__)
#define CK_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define CK_ASAN 1
#endif
#endif
#ifdef CK_ASAN
#include <sanitizer/asan_interface.h>
#define CK_POISON(p, n) ASAN_POISON_MEMORY_REGION((p), (n))
#define CK_UNPOISON(p, n) ASAN_UNPOISON_MEMORY_REGION((p), (n))
#else
#define CK_POISON(p, n) ((void)(p), (void)(n))
#define CK_UNPOISON(p, n) ((void)(p), (void)(n))
#endif
#define CK_FREE_CLASSES (CK_FREE_MAX / 8u + 1u)
/* One budget for the files of a composite (a folder of shards, a DCP
 * folder): each part or record opened for it is a file of its own whose
 * arena names the composite's as `parent`; what the child holds (total +
 * outside) is charged to the parent's `kids` too and refused when the
 * parent's own memory and all its children's would pass the parent's
 * limit.  Children may open and close on several threads at once (reads
 * of a composite open parts lazily): `kids` and `peak` are atomic; the
 * parent's other fields change only while the composite opens, on one
 * thread.  One level: a parent has no parent. */
typedef struct ck_arena {
    ck_block *head;
    uint64_t total;   /* bytes obtained for blocks */
    uint64_t outside; /* bytes charged from outside: pickle stack, memo, buffers */
    uint64_t limit;   /* total + outside (+ kids) may not pass it (max_memory); 0: none */
    _Atomic uint64_t peak; /* highest total + outside + kids */
    bool over;        /* something was refused for the limit */
    bool over_parent; /* ... for the parent's limit (ck_mem_blame() names it) */
    /* a child: its parent, and whether its pickles raise the parent's limit
     * as they raise its own (ck_mem_allow(); while the composite indexes) */
    struct ck_arena *parent;
    bool grow_parent;
    uint64_t fwd_pickle; /* a child's pickle bytes counted in its parent */
    /* a parent: what its children hold now, the pickle bytes they ran
     * while it grew, and the max_memory and input size its limit counts */
    _Atomic uint64_t kids;
    uint64_t kid_pickle, base, input;
    /* small allocations given back with ck_free_small(), by size / 8: a
     * later ck_alloc of that size takes one (zeroed again) before the block */
    void *freel[CK_FREE_CLASSES];
} ck_arena;

void *ck_alloc_slow(ck_arena *a, size_t n); /* ck_alloc's new blocks */
struct ck_block {
    ck_block *next;
    size_t used, cap; /* cap: the room ck_alloc may use without asking */
    size_t full;      /* the room the block has; a mapped block's cap is what
                       * has been faulted in ahead (ck_alloc_slow raises it) */
    bool mapped;      /* from mmap: munmap it */
    max_align_t data[];
};
/* zeroed, 8-aligned; NULL on OOM.  Inline: the pickle machine's nodes. */
static inline void *ck_alloc(ck_arena *a, size_t n)
{
    if (n - 1 < CK_FREE_MAX) { /* 1..CK_FREE_MAX: a freed one, or the block's room */
        n = (n + 7u) & ~(size_t)7u;
        void **f = (void **)a->freel[n / 8u];
        if (f) {
            CK_UNPOISON(f, n);
            a->freel[n / 8u] = *f;
            memset(f, 0, n);
            return f;
        }
        ck_block *b = a->head;
        if (b && b->cap - b->used >= n) {
            void *p = (char *)b->data + b->used;
            b->used += n;
            return p;
        }
    }
    return ck_alloc_slow(a, n);
}
void *ck_alloc_copy(ck_arena *a, const void *p, size_t n);
/* Grow the allocation p of `old` bytes (NULL: none) to `n` bytes: in place
 * when it is the arena's latest allocation and its block has room, else a
 * new zeroed allocation with the old bytes copied.  NULL on OOM. */
void *ck_alloc_grow(ck_arena *a, void *p, size_t old, size_t n);
/* Give back p (n bytes) when it is the arena's latest allocation: true, and
 * its bytes are zeroed for the next ck_alloc; else false, nothing done.
 * Inline: every tensor whose dims are shared gives its pair back. */
static inline bool ck_alloc_undo(ck_arena *a, void *p, size_t n)
{
    ck_block *b = a->head;
    n = (n + 7u) & ~(size_t)7u;
    if (!p || !b || n > b->used || (char *)p + n != (char *)b->data + b->used) return false;
    memset(p, 0, n);
    b->used -= n;
    return true;
}
/* Give back p, an allocation of n bytes nothing refers to any more, for
 * reuse by a later ck_alloc of the same size (n <= CK_FREE_MAX; larger ones
 * are simply left).  The memory stays charged to the arena. */
static inline void ck_free_small(ck_arena *a, void *p, size_t n)
{
    n = (n + 7u) & ~(size_t)7u;
    if (!p || n == 0 || n > CK_FREE_MAX) return;
    *(void **)p = a->freel[n / 8u];
    a->freel[n / 8u] = p;
    CK_POISON(p, n);
}
char *ck_strndup(ck_arena *a, const char *s, size_t n); /* NUL-terminated */
/* Give back to the system the whole pages inside [p, p+n) of memory that
 * will not be read again (madvise MADV_DONTNEED: anonymous pages read as
 * zeros after it, a read-only file map reads the file again).  The pickle
 * machine does it behind itself every CK_DISCARD_STEP bytes. */
void ck_pages_discard(const void *p, size_t n);
#define CK_DISCARD_STEP ((size_t)1 << 20)
/* Faults in the whole pages within [p, p + n) for writing, in one call
 * (madvise MADV_POPULATE_WRITE) rather than a fault a page; nothing where
 * the kernel (before Linux 5.14) or the system lacks it.  For memory about
 * to be written through: on a virtual machine a page fault costs
 * microseconds. */
void ck_pages_populate(void *p, size_t n);
/* How much memory is faulted in ahead of use at a time, by ck_pages_ahead()
 * and in the arena's mapped blocks (ck_alloc_slow) */
#define CK_POPULATE ((size_t)256 << 10)
void ck_pages_piece(void *arr, size_t cap, size_t k); /* ck_pages_ahead()'s call */
/* For an array of `cap` bytes filled in order, whose filled bytes went from
 * `from` to `to`: when that entered a new 256 KiB piece, faults that piece
 * in (within cap) with ck_pages_populate().  Inline: the test is all that
 * most pushes pay. */
static inline void ck_pages_ahead(void *arr, size_t cap, size_t from, size_t to)
{
    size_t k = to ? (to - 1) / CK_POPULATE : 0;
    if (to <= from || (from && (from - 1) / CK_POPULATE == k)) return; /* no piece entered */
    ck_pages_piece(arr, cap, k);
}
/* ck_alloc_grow() gives back the pages of an array it moves from this size */
#define CK_DISCARD_MIN ((size_t)64 << 10)
void ck_arena_free(ck_arena *a);
/* Memory held outside the arena but counted against its limit (and its
 * parent's): 0, or -1 (and `over` set) when `n` more bytes would pass it. */
int ck_mem_charge(ck_arena *a, uint64_t n);
void ck_mem_release(ck_arena *a, uint64_t n);
/* Make `a` (a new, empty arena) a child of `parent`; `grow`: see ck_arena. */
void ck_arena_adopt(ck_arena *a, ck_arena *parent, bool grow);

/* ---- string -> index hash map (insertion ordered ids) ------------------ */
/* 8 bytes a slot and 16 an entry (keys up to 4 GiB, values below 2^32: they
 * are indices), at most half the slots used: about 32 bytes a key. */
typedef struct ck_map_slot {
    uint32_t tag; /* the hash's low half (the home index is tag & (cap - 1)) */
    uint32_t idx; /* entry index + 1, 0 = empty */
} ck_map_slot;
typedef struct ck_map_entry {
    const char *key;
    uint32_t len, val;
} ck_map_entry;
typedef struct ck_map {
    ck_map_slot *slots;
    ck_map_entry *entries;
    size_t count, cap; /* cap is a power of two */
} ck_map;
/* Find: returns true and *val when present. */
/* The string hash of the maps (and of tables keyed elsewhere: the name
 * index of torch/catalogue.c). */
uint64_t ck_hash(const char *s, size_t n);
/* A zeroed table of ncap slots (a power of two) holding the used slots of
 * `old` (cap slots), placed by their tags: no key is hashed again.  NULL on
 * OOM. */
ck_map_slot *ck_slots_rehash(const ck_map_slot *old, size_t cap, size_t ncap);
bool ck_map_get(const ck_map *m, const char *k, size_t n, size_t *val);
/* Insert (key must outlive the map).  Returns -1 on OOM (or a value or key
 * length that does not fit 32 bits). */
int ck_map_put(ck_map *m, const char *k, size_t n, size_t val);
/* Insert unless present: 0 inserted, 1 present (*val gets its value), -1 OOM. */
int ck_map_add(ck_map *m, const char *k, size_t n, size_t val, size_t *old);
/* Room for n keys in all, sized once (0, or -1 on OOM). */
int ck_map_reserve(ck_map *m, size_t n);
void ck_map_free(ck_map *m);

/* ck_grow_in()'s growing, out of line (a NULL: nothing charged). */
int ck_grow_past(ck_arena *a, void **arr, size_t *cap, size_t need, size_t item, ckpt_error *err);
/* Grow a malloc'd array so it can hold `need` items (checked).  Inline: the
 * callers that push one item at a time (a storage, a listed tensor) mostly
 * find room. */
static inline int ck_grow(void **arr, size_t *cap, size_t need, size_t item, ckpt_error *err)
{
    return need <= *cap ? 0 : ck_grow_past(NULL, arr, cap, need, item, err);
}
/* ck_grow, charging the growth to `a` first (see ck_mem_charge). */
static inline int ck_grow_in(ck_arena *a, void **arr, size_t *cap, size_t need, size_t item,
                             ckpt_error *err)
{
    return need <= *cap ? 0 : ck_grow_past(a, arr, cap, need, item, err);
}

/* The memory limit: max_memory, plus CK_MEM_PER_BYTE for every byte past
 * the first CK_MEM_FREE_BYTES of the pickles run so far (counting at most
 * the input's size, so an inflated pickle earns nothing).  Only grows.  A
 * child that grows its parent adds the bytes it counts to the parent's
 * kid_pickle, and the parent's limit grows as if they were its own
 * (counting at most its `input`). */
#define CK_MEM_PER_BYTE 24u
#define CK_MEM_FREE_BYTES ((uint64_t)16 << 20)
void ck_mem_allow(ck_arena *a, uint64_t max_memory, uint64_t input_size, uint64_t pickle_bytes);
/* After a failure: an out-of-memory error caused by the limit becomes a
 * limit error that names it. */
void ck_mem_blame(const ck_arena *a, ckpt_error *err);

/* The expansion budget: max_expansion plus half a step per pickle byte, so
 * that a big honest state dict (about 0.3 steps per byte) always fits while
 * sharing tricks in a small file still run out. */
static inline uint64_t ck_budget(uint64_t max_expansion, uint64_t pickle_bytes)
{
    uint64_t b = max_expansion + pickle_bytes / 2;
    return b < max_expansion ? UINT64_MAX : b;
}

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

int ck_source_open_path(ck_source *s, const char *path, bool use_mmap, ckpt_error *err);
void ck_source_memory(ck_source *s, const void *data, size_t size);
void ck_source_reader(ck_source *s, const ckpt_reader *r);
void ck_source_close(ck_source *s);
/* Read exactly n bytes at off; a range outside the file is a format error
 * naming `what`. */
int ck_read(const ck_source *s, uint64_t off, void *buf, size_t n, const char *what,
            ckpt_error *err);

/* A sliding read window: many small records read with few syscalls. */
typedef struct ck_window {
    const ck_source *src;
    uint8_t *buf;
    size_t cap, len;
    uint64_t off;
} ck_window;
/* Pointer to n bytes at off (valid until the next call), or NULL + err. */
const uint8_t *ck_win(ck_window *w, uint64_t off, size_t n, const char *what, ckpt_error *err);
void ck_win_free(ck_window *w);

/* crc32.c: zlib's crc32(crc, p, n) for any n, with carry-less multiplication
 * where the CPU has it (the public ckpt_crc32()). */
uint32_t ck_crc32(uint32_t crc, const void *p, size_t n);

#endif
