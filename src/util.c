/*
 * util.c - the small things every layer uses: errors, the arena, a string
 * hash map, dtype facts and growable arrays.
 */
#define _DEFAULT_SOURCE 1 /* MAP_ANONYMOUS, MADV_HUGEPAGE */
#include "internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

/* ---- errors ------------------------------------------------------------ */

int ck_fail(ckpt_error *err, ckpt_code code, int64_t offset, const char *fmt,
            ...) {
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

const char *ckpt_code_name(ckpt_code code) {
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

/* ---- arena ------------------------------------------------------------- */

struct ck_block {
    ck_block *next;
    size_t used, cap;
    bool mapped; /* from mmap: munmap it */
    max_align_t data[];
};

#define CK_BLOCK_MIN ((size_t)64 << 10)
#define CK_HUGE ((size_t)2 << 20)

/* Blocks come zeroed (calloc, or anonymous mmap for big ones, which may use
 * transparent huge pages): allocations need no memset, and a big state
 * dict takes few page faults. */
static ck_block *new_block(size_t cap) {
    size_t total = sizeof(ck_block) + cap;
    ck_block *b = NULL;
    bool mapped = false;
#ifdef MAP_ANONYMOUS
    if (total >= CK_HUGE) {
        total = (total + CK_HUGE - 1) & ~(CK_HUGE - 1);
        /* over-map by 2 MiB and trim, so the block is huge-page aligned */
        uint8_t *raw = mmap(NULL, total + CK_HUGE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        void *p = MAP_FAILED;
        if (raw != MAP_FAILED) {
            uintptr_t a = ((uintptr_t)raw + CK_HUGE - 1) & ~(uintptr_t)(CK_HUGE - 1);
            size_t head = (size_t)(a - (uintptr_t)raw);
            if (head) munmap(raw, head);
            munmap((uint8_t *)a + total, CK_HUGE - head);
            p = (void *)a;
        }
        if (p != MAP_FAILED) {
#ifdef MADV_HUGEPAGE
            madvise(p, total, MADV_HUGEPAGE);
#endif
            b = p;
            mapped = true;
            cap = total - sizeof(ck_block);
        }
    }
#endif
    if (!b) b = calloc(1, total);
    if (!b) return NULL;
    b->cap = cap;
    b->mapped = mapped;
    return b;
}

/* Whether n more bytes stay within the limit; sets `over` when not. */
static bool ck_mem_fits(ck_arena *a, uint64_t n) {
    uint64_t used = a->total + a->outside;
    if (a->limit && (used > a->limit || n > a->limit - used)) {
        a->over = true;
        return false;
    }
    return true;
}

void *ck_alloc(ck_arena *a, size_t n) {
    if (n > SIZE_MAX - 8) return NULL;
    n = (n + 7u) & ~(size_t)7u;
    if (n == 0) n = 8;
    ck_block *b = a->head;
    if (!b || b->cap - b->used < n) {
        /* a big one-off allocation gets a block of its own size, so that
         * many of them (a long string copied again and again) do not each
         * hold a whole growing block */
        bool oneoff = b && b->cap - b->used >= CK_BLOCK_MIN / 4 && n > CK_BLOCK_MIN / 4;
        size_t cap = CK_BLOCK_MIN;
        if (oneoff) cap = n;
        else if (b && b->cap < ((size_t)8 << 20)) cap = b->cap * 2; /* grow blocks */
        else if (b) cap = b->cap;
        if (cap < n) cap = n;
        if (cap > SIZE_MAX - sizeof(ck_block) - CK_HUGE) return NULL;
        if (!ck_mem_fits(a, sizeof(ck_block) + cap)) return NULL;
        ck_block *nb = new_block(cap);
        if (!nb) return NULL;
        a->total += sizeof(ck_block) + nb->cap;
        if (a->total + a->outside > a->peak) a->peak = a->total + a->outside;
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
    void *p = (char *)b->data + b->used;
    b->used += n;
    return p;
}

void *ck_alloc_copy(ck_arena *a, const void *p, size_t n) {
    void *q = ck_alloc(a, n);
    if (q && n) memcpy(q, p, n);
    return q;
}

char *ck_strndup(ck_arena *a, const char *s, size_t n) {
    if (n == SIZE_MAX) return NULL;
    char *q = ck_alloc(a, n + 1);
    if (!q) return NULL;
    if (n) memcpy(q, s, n);
    q[n] = 0;
    return q;
}

void ck_arena_free(ck_arena *a) {
    ck_block *b = a->head;
    while (b) {
        ck_block *n = b->next;
        if (b->mapped) munmap(b, sizeof(ck_block) + b->cap);
        else free(b);
        b = n;
    }
    a->head = NULL;
    a->total = 0;
}

int ck_mem_charge(ck_arena *a, uint64_t n) {
    if (!ck_mem_fits(a, n)) return -1;
    a->outside += n;
    if (a->total + a->outside > a->peak) a->peak = a->total + a->outside;
    return 0;
}

void ck_mem_release(ck_arena *a, uint64_t n) {
    a->outside = n < a->outside ? a->outside - n : 0;
}

void ck_mem_allow(ckpt_file *f, uint64_t pickle_bytes) {
    if (f->opt.max_memory == 0) return; /* no limit */
    uint64_t p = pickle_bytes < f->src.size ? pickle_bytes : f->src.size;
    uint64_t lim = f->opt.max_memory;
    if (p > CK_MEM_FREE_BYTES) {
        uint64_t extra = p - CK_MEM_FREE_BYTES;
        extra = extra > UINT64_MAX / CK_MEM_PER_BYTE ? UINT64_MAX : extra * CK_MEM_PER_BYTE;
        lim = extra > UINT64_MAX - lim ? UINT64_MAX : lim + extra;
    }
    if (lim > f->arena.limit) f->arena.limit = lim;
}

void ck_mem_blame(const ckpt_file *f, ckpt_error *err) {
    if (!err || err->code != CKPT_E_NOMEM || !f->arena.over) return;
    uint64_t lim = f->arena.limit;
    ck_fail(err, CKPT_E_LIMIT, err->offset,
            "the file's values need more than the memory limit of %llu %s (max_memory; "
            "CKPT_MAX_MEMORY for the ckpt tool)",
            (unsigned long long)(lim >= (1u << 20) ? lim >> 20 : lim), lim >= (1u << 20) ? "MiB" : "bytes");
}

/* ---- hash map ---------------------------------------------------------- */

static uint64_t ck_hash(const char *k, size_t n) {
    uint64_t h = 1469598103934665603ull; /* FNV-1a */
    for (size_t i = 0; i < n; i++) {
        h ^= (unsigned char)k[i];
        h *= 1099511628211ull;
    }
    h ^= h >> 33; /* finalizer: the table indexes by the low bits */
    h *= 0xff51afd7ed558ccdull;
    h ^= h >> 33;
    return h;
}

bool ck_map_get(const ck_map *m, const char *k, size_t n, size_t *val) {
    if (!m->cap) return false;
    uint64_t h = ck_hash(k, n);
    size_t mask = m->cap - 1;
    for (size_t i = (size_t)h & mask;; i = (i + 1) & mask) {
        const ck_map_slot *sl = &m->slots[i];
        if (!sl->idx) return false;
        if (sl->hash != h) continue;
        const ck_map_entry *e = &m->entries[sl->idx - 1];
        if (e->len == n && memcmp(e->key, k, n) == 0) {
            if (val) *val = e->val;
            return true;
        }
    }
}

static int map_insert(ck_map *m, const char *k, size_t n, size_t val, uint64_t h, bool check, size_t *old);

int ck_map_put(ck_map *m, const char *k, size_t n, size_t val) {
    return map_insert(m, k, n, val, ck_hash(k, n), false, NULL) < 0 ? -1 : 0;
}

int ck_map_add(ck_map *m, const char *k, size_t n, size_t val, size_t *old) {
    return map_insert(m, k, n, val, ck_hash(k, n), true, old);
}

static int map_insert(ck_map *m, const char *k, size_t n, size_t val, uint64_t h, bool check, size_t *old) {
    if ((m->count + 1) * 2 > m->cap) {
        size_t ncap = m->cap ? m->cap * 2 : 64;
        if (ncap > SIZE_MAX / sizeof(ck_map_slot)) return -1;
        ck_map_slot *slots = calloc(ncap, sizeof *slots);
        ck_map_entry *entries = realloc(m->entries, ncap / 2 * sizeof *entries);
        if (!slots || !entries) {
            free(slots);
            if (entries) m->entries = entries;
            return -1;
        }
        m->entries = entries;
        for (size_t i = 0; i < m->cap; i++) {
            if (!m->slots[i].idx) continue;
            size_t j = (size_t)m->slots[i].hash & (ncap - 1);
            while (slots[j].idx) j = (j + 1) & (ncap - 1);
            slots[j] = m->slots[i];
        }
        free(m->slots);
        m->slots = slots;
        m->cap = ncap;
    }
    size_t mask = m->cap - 1;
    size_t i = (size_t)h & mask;
    for (; m->slots[i].idx; i = (i + 1) & mask) {
        if (!check || m->slots[i].hash != h) continue;
        const ck_map_entry *e = &m->entries[m->slots[i].idx - 1];
        if (e->len == n && memcmp(e->key, k, n) == 0) {
            if (old) *old = e->val;
            return 1;
        }
    }
    m->entries[m->count] = (ck_map_entry){k, n, val};
    m->slots[i].hash = h;
    m->slots[i].idx = ++m->count;
    return 0;
}

void ck_map_free(ck_map *m) {
    free(m->slots);
    free(m->entries);
    memset(m, 0, sizeof *m);
}

/* ---- dtypes ------------------------------------------------------------ */

static const struct {
    const char *name;
    uint8_t size, unit;
} dtypes[CK_DTYPE_COUNT] = {
    [CKPT_FLOAT64] = {"float64", 8, 8},
    [CKPT_FLOAT32] = {"float32", 4, 4},
    [CKPT_FLOAT16] = {"float16", 2, 2},
    [CKPT_BFLOAT16] = {"bfloat16", 2, 2},
    [CKPT_INT64] = {"int64", 8, 8},
    [CKPT_INT32] = {"int32", 4, 4},
    [CKPT_INT16] = {"int16", 2, 2},
    [CKPT_INT8] = {"int8", 1, 1},
    [CKPT_UINT8] = {"uint8", 1, 1},
    [CKPT_BOOL] = {"bool", 1, 1},
    [CKPT_COMPLEX64] = {"complex64", 8, 4},
    [CKPT_COMPLEX128] = {"complex128", 16, 8},
    [CKPT_COMPLEX32] = {"complex32", 4, 2},
    [CKPT_FLOAT8_E4M3FN] = {"float8_e4m3fn", 1, 1},
    [CKPT_FLOAT8_E5M2] = {"float8_e5m2", 1, 1},
    [CKPT_FLOAT8_E4M3FNUZ] = {"float8_e4m3fnuz", 1, 1},
    [CKPT_FLOAT8_E5M2FNUZ] = {"float8_e5m2fnuz", 1, 1},
    [CKPT_FLOAT8_E8M0FNU] = {"float8_e8m0fnu", 1, 1},
    [CKPT_UINT16] = {"uint16", 2, 2},
    [CKPT_UINT32] = {"uint32", 4, 4},
    [CKPT_UINT64] = {"uint64", 8, 8},
};

const char *ck_dtype_name(ckpt_dtype d) {
    return (unsigned)d < CK_DTYPE_COUNT ? dtypes[d].name : "unknown";
}
size_t ck_dtype_size(ckpt_dtype d) {
    return (unsigned)d < CK_DTYPE_COUNT ? dtypes[d].size : 0;
}
size_t ck_dtype_swap_unit(ckpt_dtype d) {
    return (unsigned)d < CK_DTYPE_COUNT ? dtypes[d].unit : 1;
}
const char *ckpt_dtype_name(ckpt_dtype d) { return ck_dtype_name(d); }
size_t ckpt_dtype_size(ckpt_dtype d) { return ck_dtype_size(d); }

/* ---- growable arrays, notes ------------------------------------------- */

int ck_grow(void **arr, size_t *cap, size_t need, size_t item,
            ckpt_error *err) {
    return ck_grow_in(NULL, arr, cap, need, item, err);
}

int ck_grow_in(ck_arena *a, void **arr, size_t *cap, size_t need, size_t item,
               ckpt_error *err) {
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

int ck_note(ckpt_file *f, const char *fmt, ...) {
    if (f->nnotes >= 1000) return 0; /* enough said */
    char buf[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    char *s = ck_strndup(&f->arena, buf, strlen(buf));
    if (!s) return -1;
    if (ck_grow((void **)&f->notes, &f->cap_notes, f->nnotes + 1,
                sizeof *f->notes, NULL))
        return -1;
    f->notes[f->nnotes++] = s;
    return 0;
}

/* ---- value constructors ------------------------------------------------ */

ckpt_value *ck_new(ckpt_file *f, ckpt_kind kind) {
    ckpt_value *v = ck_alloc(&f->arena, sizeof *v);
    if (!v) return NULL;
    v->kind = (uint8_t)kind;
    v->id = f->next_id++;
    return v;
}

ckpt_value *ck_new_str(ckpt_file *f, ckpt_kind kind, const char *p, size_t n) {
    if (n > SIZE_MAX - sizeof(ckpt_value) - 1) return NULL;
    ckpt_value *v = ck_alloc(&f->arena, sizeof *v + n + 1); /* bytes right after the node */
    if (!v) return NULL;
    v->kind = (uint8_t)kind;
    v->id = f->next_id++;
    v->u.s.p = (char *)(v + 1);
    if (n) memcpy(v->u.s.p, p, n);
    v->u.s.p[n] = 0;
    v->u.s.n = n;
    return v;
}

int ck_seq_push(ckpt_file *f, ckpt_value *v, ckpt_value *item) {
    if (v->u.seq.n == v->u.seq.cap) {
        size_t ncap = v->u.seq.cap ? v->u.seq.cap * 2 : 4;
        if (ncap > SIZE_MAX / sizeof(ckpt_value *)) return -1;
        ckpt_value **nv = ck_alloc(&f->arena, ncap * sizeof *nv);
        if (!nv) return -1;
        if (v->u.seq.n) memcpy(nv, v->u.seq.v, v->u.seq.n * sizeof *nv);
        v->u.seq.v = nv;
        v->u.seq.cap = ncap;
    }
    v->u.seq.v[v->u.seq.n++] = item;
    return 0;
}

int ck_storage_get(ckpt_file *f, const char *key, size_t klen, size_t *idx,
                   bool *created, ckpt_error *err) {
    size_t i;
    if (ck_map_get(&f->storage_keys, key, klen, &i)) {
        *idx = i;
        *created = false;
        return 0;
    }
    CK_TRY(ck_storage_new(f, key, klen, idx, err));
    if (ck_map_put(&f->storage_keys, f->storages[*idx].pkey, klen, *idx))
        return ck_fail(err, CKPT_E_NOMEM, -1, "out of memory");
    *created = true;
    return 0;
}

int ck_storage_new(ckpt_file *f, const char *key, size_t klen, size_t *idx, ckpt_error *err) {
    if (f->nstorages >= f->opt.max_entries)
        return ck_fail(err, CKPT_E_LIMIT, -1, "more than %u storages",
                       f->opt.max_entries);
    CK_TRY(ck_grow((void **)&f->storages, &f->cap_storages, f->nstorages + 1,
                   sizeof *f->storages, err));
    ck_storage *s = &f->storages[f->nstorages];
    memset(s, 0, sizeof *s);
    s->pkey = ck_strndup(&f->arena, key, klen);
    if (!s->pkey) return ck_fail(err, CKPT_E_NOMEM, -1, "out of memory");
    s->pub.key = s->pkey;
    s->pub.file_offset = -1;
    s->root = -1;
    s->decl_pos = -1;
    *idx = f->nstorages++;
    return 0;
}
