/*
 * util.c - layer 1: the small things every layer uses: errors, the limits'
 * defaults, the arena and its memory charge, the one string hash map and
 * growable arrays.
 */
#define _DEFAULT_SOURCE 1 /* MAP_ANONYMOUS, MADV_DONTNEED */
#include "common.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

/* ---- errors ------------------------------------------------------------ */

int ck_fail(ckpt_error *err, ckpt_code code, int64_t offset, const char *fmt, ...)
{
    if (err) {
        err->code = code;
        err->offset = offset;
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err->message, sizeof err->message, fmt, ap);
        va_end(ap);
        /* one line: replace any control characters that came from the file */
        for (char *p = err->message; *p; p++)
            if ((unsigned char)*p < 0x20 || *p == 0x7f) *p = '?';
    }
    return -1;
}

const char *ckpt_code_name(ckpt_code code)
{
    switch (code) {
    case CKPT_OK: return "ok";
    case CKPT_E_IO: return "i/o error";
    case CKPT_E_NOMEM: return "out of memory";
    case CKPT_E_FORMAT: return "format error";
    case CKPT_E_PICKLE: return "pickle error";
    case CKPT_E_LIMIT: return "limit exceeded";
    case CKPT_E_UNSUPPORTED: return "unsupported";
    case CKPT_E_NOTFOUND: return "not found";
    case CKPT_E_ARG: return "bad argument";
    case CKPT_E_NOTMAPPABLE: return "not mappable";
    }
    return "unknown error";
}

/* ---- limits: the defaults, in one place ---- */

void ckpt_options_init_sized(ckpt_options *o, size_t struct_size)
{
    ckpt_options d; /* fill a whole current layout, hand back the caller's part */
    memset(&d, 0, sizeof d);
    d.struct_size = struct_size < sizeof d ? struct_size : sizeof d;
    ckpt_options *caller = o;
    o = &d;
    o->max_pickle_bytes = CKPT_DEFAULT_MAX_PICKLE_BYTES;
    o->max_tensor_bytes = CKPT_DEFAULT_MAX_TENSOR_BYTES;
    o->max_ops = CKPT_DEFAULT_MAX_OPS;
    o->max_stack = CKPT_DEFAULT_MAX_STACK;
    o->max_depth = CKPT_DEFAULT_MAX_DEPTH;
    o->max_memo = CKPT_DEFAULT_MAX_MEMO;
    o->max_expansion = CKPT_DEFAULT_MAX_EXPANSION;
    o->max_entries = CKPT_DEFAULT_MAX_ENTRIES;
    o->max_rank = CKPT_DEFAULT_MAX_RANK;
    o->max_memory = CKPT_DEFAULT_MAX_MEMORY;
    if (caller) memcpy(caller, &d, d.struct_size);
}

int ck_take_options(ckpt_options *dst, const ckpt_options *src, ckpt_error *err)
{
    ckpt_options_init(dst);
    if (!src) return 0;
    if (src->struct_size == 0)
        return ck_fail(err, CKPT_E_ARG, -1,
                       "ckpt_options.struct_size is 0: fill the options with ckpt_options_init()");
    memcpy(dst, src, src->struct_size < sizeof *dst ? src->struct_size : sizeof *dst);
    dst->struct_size = sizeof *dst;
    return 0;
}

/* ---- arena ------------------------------------------------------------- */

#define CK_BLOCK_MIN ((size_t)64 << 10)
#define CK_MAP_MIN ((size_t)2 << 20)

/* A mapped block is faulted in ahead of use, CK_POPULATE at a time, with one
 * madvise(MADV_POPULATE_WRITE) rather than a page fault every 4 KiB: on a
 * virtual machine a fault costs microseconds, and listing 100,000 tensors
 * touches about 3,700 pages of blocks.  The fast path never sees it: a mapped
 * block's cap stops where the pages faulted in stop, and ck_alloc_slow()
 * moves it on.  Kernels before 5.14 refuse the advice; their pages fault as
 * before. */

/* Moves a mapped block's cap past used + n (n <= full - used), faulting
 * in the pages between. */
static void block_raise(ck_block *b, size_t n)
{
    size_t want = b->used + n;
    size_t cap = b->cap + CK_POPULATE > want ? b->cap + CK_POPULATE : want;
    /* to a page's end: the data starts after the header, within a page */
    size_t end = ((offsetof(ck_block, data) + cap + 4095) & ~(size_t)4095) - offsetof(ck_block, data);
    if (end > b->full) end = b->full;
    ck_pages_populate((char *)b->data + b->cap, end - b->cap);
    b->cap = end;
}

/* Blocks come zeroed (calloc, or anonymous mmap for big ones): allocations
 * need no memset.  Not transparent huge pages: a block's last touched huge
 * page is resident whole, which cost a listing of 100,000 tensors 2.5 MiB
 * (8% of its memory) for 1.5% of its time. */
static ck_block *new_block(size_t cap)
{
    size_t total = sizeof(ck_block) + cap;
    ck_block *b = NULL;
    bool mapped = false;
#ifdef MAP_ANONYMOUS
    if (total >= CK_MAP_MIN) {
        total = (total + 4095) & ~(size_t)4095;
        void *p = mmap(NULL, total, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (p != MAP_FAILED) {
            b = p;
            mapped = true;
            cap = total - sizeof(ck_block);
        }
    }
#endif
    if (!b) b = calloc(1, total);
    if (!b) return NULL;
    b->cap = b->full = cap;
    b->mapped = mapped;
    if (mapped) b->cap = 4096 - offsetof(ck_block, data); /* the header's page */
    return b;
}

/* Raise the atomic *peak to at least v. */
static void raise_peak(_Atomic uint64_t *peak, uint64_t v)
{
    uint64_t p = atomic_load_explicit(peak, memory_order_relaxed);
    while (v > p && !atomic_compare_exchange_weak_explicit(peak, &p, v, memory_order_relaxed,
                                                           memory_order_relaxed)) {
    }
}

/* What the arena holds now, its children's memory included. */
static uint64_t held(const ck_arena *a)
{
    return a->total + a->outside + atomic_load_explicit(&a->kids, memory_order_relaxed);
}

/* Whether n more bytes stay within the limit and the parent's; when they
 * do, they are charged to the parent already (the caller adds them to
 * total or outside, or gives them back with mem_give()).  Sets `over`
 * (and `over_parent`) when not. */
static bool mem_take(ck_arena *a, uint64_t n)
{
    uint64_t used = held(a);
    if (a->limit && (used > a->limit || n > a->limit - used)) {
        a->over = true;
        return false;
    }
    ck_arena *p = a->parent;
    if (p) {
        uint64_t kids = atomic_fetch_add_explicit(&p->kids, n, memory_order_relaxed) + n;
        uint64_t all = p->total + p->outside + kids;
        if (kids < n || all < kids || (p->limit && all > p->limit)) {
            atomic_fetch_sub_explicit(&p->kids, n, memory_order_relaxed);
            a->over = a->over_parent = true;
            return false;
        }
        raise_peak(&p->peak, all);
    }
    return true;
}

/* Give back n bytes charged to the parent by mem_take(). */
static void mem_give(ck_arena *a, uint64_t n)
{
    if (a->parent && n) atomic_fetch_sub_explicit(&a->parent->kids, n, memory_order_relaxed);
}

void ck_arena_adopt(ck_arena *a, ck_arena *parent, bool grow)
{
    a->parent = parent;
    a->grow_parent = grow;
}

void *ck_alloc_slow(ck_arena *a, size_t n)
{
    if (n > SIZE_MAX - 8) return NULL;
    n = (n + 7u) & ~(size_t)7u;
    if (n == 0) n = 8;
    ck_block *b = a->head;
    if (!b || b->full - b->used < n) {
        /* a big one-off allocation gets a block of its own size, so that
         * many of them (a long string copied again and again) do not each
         * hold a whole growing block */
        bool oneoff = b && b->full - b->used >= CK_BLOCK_MIN / 4 && n > CK_BLOCK_MIN / 4;
        size_t cap = CK_BLOCK_MIN;
        if (oneoff)
            cap = n;
        else if (b && b->full < ((size_t)8 << 20))
            cap = b->full * 2; /* grow blocks */
        else if (b)
            cap = b->full;
        if (cap < n) cap = n;
        if (cap > SIZE_MAX - sizeof(ck_block) - 4096) return NULL;
        /* charged as new_block() may round it: up to a page when mapped */
        uint64_t want = sizeof(ck_block) + cap;
        if (want >= CK_MAP_MIN) want = (want + 4095) & ~(uint64_t)4095;
        if (!mem_take(a, want)) return NULL;
        ck_block *nb = new_block(cap);
        if (!nb) {
            mem_give(a, want);
            return NULL;
        }
        uint64_t got = sizeof(ck_block) + nb->full;
        if (got < want) mem_give(a, want - got);
        a->total += got;
        raise_peak(&a->peak, held(a));
        if (oneoff) {
            /* a big one-off allocation: keep filling the current block */
            nb->next = b->next;
            b->next = nb;
        } else {
            nb->next = b;
            a->head = nb;
        }
        b = nb;
    }
    if (b->cap - b->used < n) block_raise(b, n); /* a mapped block's next pages */
    void *p = (char *)b->data + b->used;
    b->used += n;
    return p;
}

void *ck_alloc_grow(ck_arena *a, void *p, size_t old, size_t n)
{
    if (n <= old) return p;
    if (n > SIZE_MAX - 8) return NULL;
    ck_block *b = a->head;
    size_t o8 = (old + 7u) & ~(size_t)7u, n8 = (n + 7u) & ~(size_t)7u;
    if (p && b && (char *)p + o8 == (char *)b->data + b->used && n8 - o8 <= b->full - b->used) {
        if (n8 - o8 > b->cap - b->used) block_raise(b, n8 - o8);
        b->used += n8 - o8; /* the block is zeroed past `used` */
        return p;
    }
    void *q = ck_alloc(a, n);
    if (q && old) {
        memcpy(q, p, old);
        /* a big array left behind (the items of a dict grown batch by batch:
         * 16 MiB for a million entries) gives its pages back; nothing reads
         * it again */
        if (old >= CK_DISCARD_MIN) {
            ck_pages_discard(p, old);
            CK_POISON(p, old);
        }
    }
    return q;
}

void *ck_alloc_copy(ck_arena *a, const void *p, size_t n)
{
    void *q = ck_alloc(a, n);
    if (q && n) memcpy(q, p, n);
    return q;
}

char *ck_strndup(ck_arena *a, const char *s, size_t n)
{
    if (n == SIZE_MAX) return NULL;
    char *q = ck_alloc(a, n + 1);
    if (!q) return NULL;
    if (n) memcpy(q, s, n);
    q[n] = 0;
    return q;
}

void ck_arena_free(ck_arena *a)
{
    mem_give(a, a->total + a->outside);
    a->outside = 0;
    ck_block *b = a->head;
    while (b) {
        ck_block *n = b->next;
        CK_UNPOISON(b->data, b->full); /* blocks given back to the system clean */
        if (b->mapped)
            munmap(b, sizeof(ck_block) + b->full);
        else
            free(b);
        b = n;
    }
    a->head = NULL;
    a->total = 0;
    memset(a->freel, 0, sizeof a->freel);
}

int ck_mem_charge(ck_arena *a, uint64_t n)
{
    if (!mem_take(a, n)) return -1;
    a->outside += n;
    raise_peak(&a->peak, held(a));
    return 0;
}

void ck_mem_release(ck_arena *a, uint64_t n)
{
    uint64_t k = n < a->outside ? n : a->outside;
    a->outside -= k;
    mem_give(a, k);
}

void ck_mem_allow(ck_arena *a, uint64_t max_memory, uint64_t input_size, uint64_t pickle_bytes)
{
    if (max_memory == 0) return; /* no limit */
    uint64_t p = pickle_bytes < input_size ? pickle_bytes : input_size;
    uint64_t lim = max_memory;
    if (p > CK_MEM_FREE_BYTES) {
        uint64_t extra = p - CK_MEM_FREE_BYTES;
        extra = extra > UINT64_MAX / CK_MEM_PER_BYTE ? UINT64_MAX : extra * CK_MEM_PER_BYTE;
        lim = extra > UINT64_MAX - lim ? UINT64_MAX : lim + extra;
    }
    if (lim > a->limit) a->limit = lim;
    ck_arena *par = a->parent;
    if (par && a->grow_parent && p > a->fwd_pickle) {
        uint64_t d = p - a->fwd_pickle;
        a->fwd_pickle = p;
        par->kid_pickle = d > UINT64_MAX - par->kid_pickle ? UINT64_MAX : par->kid_pickle + d;
        ck_mem_allow(par, par->base, par->input, par->kid_pickle);
    }
}

void ck_mem_blame(const ck_arena *a, ckpt_error *err)
{
    if (!err || err->code != CKPT_E_NOMEM || !a->over) return;
    uint64_t lim = a->over_parent ? a->parent->limit : a->limit;
    ck_fail(err, CKPT_E_LIMIT, err->offset,
            a->over_parent ? "the checkpoint's files need more than their memory limit of %llu "
                             "%s together (max_memory)"
                           : "the file's values need more than the memory limit of %llu %s "
                             "(max_memory)",
            (unsigned long long)(lim >= (1u << 20) ? lim >> 20 : lim),
            lim >= (1u << 20) ? "MiB" : "bytes");
}

/* ---- string -> index hash map ------------------------------------------ */

/* A word at a time (keys and names are ~30 bytes: FNV-1a's byte loop cost
 * more than the probe); the finalizer spreads the bits tables index by. */
uint64_t ck_hash(const char *s, size_t n)
{
    uint64_t h = 0x9e3779b97f4a7c15ull ^ (uint64_t)n, x;
    for (; n >= 8; s += 8, n -= 8) {
        memcpy(&x, s, 8);
        h = (h ^ x) * 0xff51afd7ed558ccdull;
        h ^= h >> 32;
    }
    x = 0;
    if (n) memcpy(&x, s, n);
    h = (h ^ x) * 0xc4ceb9fe1a85ec53ull;
    h ^= h >> 33;
    h *= 0xff51afd7ed558ccdull;
    h ^= h >> 33;
    return h;
}

ck_map_slot *ck_slots_rehash(const ck_map_slot *old, size_t cap, size_t ncap)
{
    ck_map_slot *slots = calloc(ncap, sizeof *slots);
    if (!slots) return NULL;
    for (size_t i = 0; i < cap; i++) {
        if (!old[i].idx) continue;
        size_t j = (size_t)old[i].tag & (ncap - 1);
        while (slots[j].idx) j = (j + 1) & (ncap - 1);
        slots[j] = old[i];
    }
    return slots;
}

bool ck_map_get(const ck_map *m, const char *k, size_t n, size_t *val)
{
    if (!m->cap) return false;
    uint64_t h = ck_hash(k, n);
    uint32_t tag = (uint32_t)h;
    size_t mask = m->cap - 1;
    for (size_t i = (size_t)h & mask;; i = (i + 1) & mask) {
        const ck_map_slot *sl = &m->slots[i];
        if (!sl->idx) return false;
        if (sl->tag != tag) continue;
        const ck_map_entry *e = &m->entries[sl->idx - 1];
        if (e->len == n && memcmp(e->key, k, n) == 0) {
            if (val) *val = e->val;
            return true;
        }
    }
}

static int map_insert(ck_map *m, const char *k, size_t n, size_t val, uint64_t h, bool check,
                      size_t *old);

int ck_map_put(ck_map *m, const char *k, size_t n, size_t val)
{
    return map_insert(m, k, n, val, ck_hash(k, n), false, NULL) < 0 ? -1 : 0;
}

int ck_map_add(ck_map *m, const char *k, size_t n, size_t val, size_t *old)
{
    return map_insert(m, k, n, val, ck_hash(k, n), true, old);
}

/* Into ncap slots (a power of two, at most 2^32: a slot's tag, the hash's
 * low half, then still holds every bit of its home index), entries room
 * for ncap / 2.  No key is hashed again. */
static int map_resize(ck_map *m, size_t ncap)
{
    if (ncap > SIZE_MAX / sizeof(ck_map_slot) || ncap > ((size_t)1 << 31) * 2) return -1;
    ck_map_slot *slots = ck_slots_rehash(m->slots, m->cap, ncap);
    ck_map_entry *entries = realloc(m->entries, ncap / 2 * sizeof *entries);
    if (!slots || !entries) {
        free(slots);
        if (entries) m->entries = entries;
        return -1;
    }
    m->entries = entries;
    free(m->slots);
    m->slots = slots;
    m->cap = ncap;
    return 0;
}

int ck_map_reserve(ck_map *m, size_t n)
{
    size_t ncap = m->cap ? m->cap : 64;
    while (n * 2 > ncap) {
        if (ncap > SIZE_MAX / 4) return -1;
        ncap *= 2;
    }
    return ncap > m->cap ? map_resize(m, ncap) : 0;
}

static int map_insert(ck_map *m, const char *k, size_t n, size_t val, uint64_t h, bool check,
                      size_t *old)
{
    if (n > UINT32_MAX || val > UINT32_MAX) return -1;
    if ((m->count + 1) * 2 > m->cap && map_resize(m, m->cap ? m->cap * 2 : 64)) return -1;
    uint32_t tag = (uint32_t)h;
    size_t mask = m->cap - 1;
    size_t i = (size_t)h & mask;
    for (; m->slots[i].idx; i = (i + 1) & mask) {
        if (!check || m->slots[i].tag != tag) continue;
        const ck_map_entry *e = &m->entries[m->slots[i].idx - 1];
        if (e->len == n && memcmp(e->key, k, n) == 0) {
            if (old) *old = e->val;
            return 1;
        }
    }
    m->entries[m->count] = (ck_map_entry){k, (uint32_t)n, (uint32_t)val};
    m->slots[i].tag = tag;
    m->slots[i].idx = (uint32_t)++m->count;
    return 0;
}

void ck_map_free(ck_map *m)
{
    free(m->slots);
    free(m->entries);
    memset(m, 0, sizeof *m);
}

/* ---- growable arrays ------------------------------------------- */

int ck_grow_past(ck_arena *a, void **arr, size_t *cap, size_t need, size_t item, ckpt_error *err)
{
    if (need <= *cap) return 0;
    size_t ncap = *cap ? *cap : 16;
    while (ncap < need) {
        if (ncap > SIZE_MAX / 2) return ck_fail(err, CKPT_E_NOMEM, -1, "array too large");
        ncap *= 2;
    }
    if (ncap > SIZE_MAX / item) return ck_fail(err, CKPT_E_NOMEM, -1, "array too large");
    if (a && ck_mem_charge(a, (uint64_t)(ncap - *cap) * item))
        return ck_fail(err, CKPT_E_NOMEM, -1, "out of memory");
    void *p = realloc(*arr, ncap * item);
    if (!p) {
        if (a) ck_mem_release(a, (uint64_t)(ncap - *cap) * item);
        return ck_fail(err, CKPT_E_NOMEM, -1, "out of memory");
    }
    *arr = p;
    *cap = ncap;
    return 0;
}

#if defined(__linux__) && !defined(MADV_POPULATE_WRITE)
#define MADV_POPULATE_WRITE 23 /* Linux 5.14's; older headers lack it */
#endif

#if defined(MADV_POPULATE_WRITE) || defined(MADV_DONTNEED)
/* madvise(advice) over the whole pages inside [p, p + n); nothing when
 * there are none.  Its failure is not an error: the advice is a speed-up. */
static void advise_inner(const void *p, size_t n, int advice)
{
    long ps = sysconf(_SC_PAGESIZE);
    uintptr_t page = ps > 0 ? (uintptr_t)ps : 4096u;
    uintptr_t lo = ((uintptr_t)p + page - 1) & ~(page - 1), hi = ((uintptr_t)p + n) & ~(page - 1);
    if (hi > lo) (void)madvise((void *)lo, (size_t)(hi - lo), advice);
}
#endif

void ck_pages_populate(void *p, size_t n)
{
#ifdef MADV_POPULATE_WRITE
    advise_inner(p, n, MADV_POPULATE_WRITE);
#else
    (void)p;
    (void)n;
#endif
}

void ck_pages_piece(void *arr, size_t cap, size_t k)
{
    size_t lo = k * CK_POPULATE, hi = lo + CK_POPULATE < cap ? lo + CK_POPULATE : cap;
    if (hi > lo) ck_pages_populate((char *)arr + lo, hi - lo);
}

void ck_pages_discard(const void *p, size_t n)
{
#ifdef MADV_DONTNEED
    advise_inner(p, n, MADV_DONTNEED);
#else
    (void)p;
    (void)n;
#endif
}
