/*
 * catalogue.c - layer 3 (torch): the tensors of an open file.
 *
 * Once a container has run its pickle(s), the value tree is walked once to
 * name the tensors (dict keys and list indices joined by '.', a full-model
 * save read as its state_dict) and every tensor's extent is checked against
 * its storage.  The one tensor validator lives here too.  Reads resolve
 * views and strides here, asking the container for storage bytes.
 */
#include "torch.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *ckpt_format_name(ckpt_format fmt)
{
    switch (fmt) {
    case CKPT_FORMAT_ZIP: return "zip";
    case CKPT_FORMAT_LEGACY: return "legacy";
    case CKPT_FORMAT_TAR: return "tar";
    case CKPT_FORMAT_PICKLE: return "pickle";
    case CKPT_FORMAT_TORCHSCRIPT: return "torchscript";
    case CKPT_FORMAT_SAFETENSORS: return "safetensors";
    case CKPT_FORMAT_SHARDED: return "sharded";
    case CKPT_FORMAT_DCP: return "dcp";
    case CKPT_FORMAT_TORCH_EXPORT: return "pt2";
    case CKPT_FORMAT_MOBILE: return "mobile";
    }
    return "unknown";
}

/* one of each a storage and a rebuilt tensor: keep them small */
_Static_assert(sizeof(ck_storage) <= 48, "ck_storage grew");
_Static_assert(sizeof(ck_tdef) <= 56, "ck_tdef grew");

/* ---- the name index (ckpt_find) ----------------------------------------- */

void ck_name_index_free(ck_name_index *m)
{
    free(m->slots);
    memset(m, 0, sizeof *m);
}

/* A slot's home: the tag scaled to the table (any size, not only a power
 * of two, so that a table sized once for n names takes 1.5 n slots). */
static inline size_t name_home(uint32_t tag, size_t cap)
{
    return (size_t)(((uint64_t)tag * cap) >> 32);
}

/* Room for n names in all, at most two thirds of the slots used (0, or -1
 * on OOM).  No name is hashed again: a slot's tag gives its home. */
static int name_index_reserve(ck_name_index *m, size_t n)
{
    if (n <= m->cap / 3 * 2) return 0;
    size_t ncap = n + n / 2 + 1;
    if (ncap < 64) ncap = 64;
    if (ncap < m->cap * 2) ncap = m->cap * 2; /* grown again: by doubling */
    if (ncap > ((size_t)1 << 32) || ncap > SIZE_MAX / sizeof *m->slots) return -1;
    ck_map_slot *slots = calloc(ncap, sizeof *slots);
    if (!slots) return -1;
    ck_pages_populate(slots, ncap * sizeof *slots); /* hashed into: every page written */
    for (size_t i = 0; i < m->cap; i++) {
        if (!m->slots[i].idx) continue;
        size_t j = name_home(m->slots[i].tag, ncap);
        while (slots[j].idx) j = j + 1 == ncap ? 0 : j + 1;
        slots[j] = m->slots[i];
    }
    free(m->slots);
    m->slots = slots;
    m->cap = ncap;
    return 0;
}

/* Append (a, b) to a list kept in the order of a: 0, or -1 on OOM. */
static int pair_push(ckpt_file *f, ck_pair_list *l, size_t a, size_t b)
{
    if (l->n == l->cap) { /* arena: doubled, the old one left */
        size_t nc = l->cap ? l->cap * 2 : 8;
        ck_pair *nv = ck_alloc(&f->arena, nc * sizeof *nv);
        if (!nv) return -1;
        if (l->n) memcpy(nv, l->v, l->n * sizeof *nv);
        l->v = nv;
        l->cap = nc;
    }
    l->v[l->n++] = (ck_pair){a, b};
    return 0;
}

static int cmp_pair(const void *a, const void *b)
{
    size_t x = ((const ck_pair *)a)->a, y = ((const ck_pair *)b)->a;
    return x < y ? -1 : x > y;
}

/* The position in l of the first pair whose a is `a`, or l->n. */
static size_t pair_find(const ck_pair_list *l, size_t a)
{
    size_t lo = 0, hi = l->n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (l->v[mid].a < a)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < l->n && l->v[lo].a == a ? lo : l->n;
}

/* The length of listed tensor idx's name. */
static size_t listed_len(const ckpt_file *f, size_t idx)
{
    if (f->nul_names.n) {
        size_t at = pair_find(&f->nul_names, idx);
        if (at < f->nul_names.n) return f->nul_names.v[at].b;
    }
    return strlen(f->listed[idx].name);
}

/* Is listed tensor idx named k[0..n)? */
static bool name_eq(const ckpt_file *f, size_t idx, const char *k, size_t n)
{
    return listed_len(f, idx) == n && memcmp(f->listed[idx].name, k, n) == 0;
}

/* Add tensor `idx` (f->listed[idx].name, n bytes, hashed to h): 0, 1 when
 * an earlier tensor has the name (its index in *first), -1 on OOM. */
static int name_index_add(ckpt_file *f, size_t idx, size_t n, uint64_t h, size_t *first)
{
    ck_name_index *m = &f->tensor_names;
    if (idx >= UINT32_MAX || name_index_reserve(m, m->count + 1)) return -1;
    const char *k = f->listed[idx].name;
    uint32_t tag = (uint32_t)h;
    size_t i;
    for (i = name_home(tag, m->cap); m->slots[i].idx; i = i + 1 == m->cap ? 0 : i + 1)
        if (m->slots[i].tag == tag && name_eq(f, m->slots[i].idx - 1, k, n)) {
            *first = m->slots[i].idx - 1;
            return 1;
        }
    m->slots[i].tag = tag;
    m->slots[i].idx = (uint32_t)(idx + 1);
    m->count++;
    return 0;
}

/* The index of the first listed tensor named k[0..n), or (size_t)-1. */
static size_t name_index_get(const ckpt_file *f, const char *k, size_t n)
{
    const ck_name_index *m = &f->tensor_names;
    if (!m->cap) return (size_t)-1;
    uint64_t h = ck_hash(k, n);
    uint32_t tag = (uint32_t)h;
    for (size_t i = name_home(tag, m->cap); m->slots[i].idx; i = i + 1 == m->cap ? 0 : i + 1) {
        size_t idx = m->slots[i].idx - 1;
        if (m->slots[i].tag == tag && name_eq(f, idx, k, n)) return idx;
    }
    return (size_t)-1;
}

/* The listing index of a listed tensor's descriptor (the library's or a
 * caller's copy), known by its name: every listing has a pointer of its
 * own into the file (ck_listed).  Only t->name is read: a copy made by an
 * older caller (ckpt_tensor_get() of a shorter struct) has no name_len.
 * (size_t)-1 when t is not one of f's listed tensors. */
static size_t listed_index(const ckpt_file *f, const ckpt_tensor *t)
{
    if (!t->name) return (size_t)-1;
    size_t idx = name_index_get(f, t->name, strlen(t->name));
    if (idx < f->ntensors && f->listed[idx].name == t->name) return idx;
    /* named as an earlier tensor, or a name holding a NUL byte */
    size_t at = pair_find(&f->by_ptr, (size_t)(uintptr_t)t->name);
    return at < f->by_ptr.n ? f->by_ptr.v[at].b : (size_t)-1;
}

/* Append (idx, t) to a list kept in index order: 0, or -1 on OOM. */
static int held_push(ckpt_file *f, ck_held_list *l, size_t idx, const ck_tdef *t)
{
    if (l->n == l->cap) { /* arena: doubled, the old one left */
        size_t nc = l->cap ? l->cap * 2 : 16;
        ck_held *nv = ck_alloc(&f->arena, nc * sizeof *nv);
        if (!nv) return -1;
        if (l->n) memcpy(nv, l->v, l->n * sizeof *nv);
        l->v = nv;
        l->cap = nc;
    }
    l->v[l->n++] = (ck_held){idx, t};
    return 0;
}

/* The rebuild a list keeps for listed tensor idx, or NULL. */
static const ck_tdef *held_find(const ck_held_list *l, size_t idx)
{
    size_t lo = 0, hi = l->n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (l->v[mid].idx < idx)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < l->n && l->v[lo].idx == idx ? l->v[lo].t : NULL;
}

/* ---- naming ------------------------------------------------------------- */

/* A path longer than this is not kept (keys shared through the memo could
 * make it as long as depth x pickle size); a tensor there is an error. */
#define CK_MAX_NAME_BYTES ((size_t)64 << 10)

typedef struct walker {
    ckpt_file *f;
    ckpt_error *err;
    char *name;
    size_t len, cap;
    size_t stored;      /* bytes of name[] that hold the path: len, or less when too long */
    const char *whole;  /* a text of the file's equal to the whole path (a key of the
                           root dict), which a tensor named here shares, or NULL */
    uint8_t *onpath;    /* per value id: 0 not walked, 1 walked: holds no tensor,
                         depth + 2 being walked at that depth (cycle guard), or
                         ONPATH_DEEP when that depth is DEEP_FROM or more */
    uint32_t *deep;     /* deep[d - DEEP_FROM]: the id walked at depth d */
    uint64_t visits;    /* against max_expansion: values visited, tensors listed */
    uint32_t cycle_min; /* least depth of a cycle guard met below the current value */
    /* the listed tensor whose name is added to the index when the next one
     * is listed (or the walk ends): its slot is fetched from memory
     * meanwhile (a 1M-name index does not stay in cache) */
    size_t pending;      /* its index + 1, 0 none */
    size_t pending_len;  /* its name's length */
    uint64_t pending_h;  /* its name's hash */
    /* the root dict's keys hashed ahead (walk_dict()), by entry % 16, and
     * the entry being walked */
    struct {
        const char *p;
        size_t n;
        uint64_t h;
    } ahead[16];
    size_t ahead_at;
    size_t count; /* tensors listed (find mode: met) so far */
    /* find mode (find_walk()): walk again as naming did, listing nothing
     * and allocating nothing in the file, to learn how names were made */
    bool find;
    bool stop;              /* every target met: the walk ends early */
    const size_t *targets;  /* listing indices wanted, ascending */
    size_t ntargets, tnext; /* how many; the next one wanted */
    size_t *parts;          /* where each part of the name being made ends */
    size_t nparts, cap_parts;
    int (*found)(struct walker *w, size_t idx, void *ctx); /* at each target */
    void *found_ctx;
} walker;

/* Add the pending name to the index: 0, or -1 with w->err set.  A name an
 * earlier tensor has is kept (check_clashes() looks at it after the walk),
 * with a pointer of its own. */
static int flush_name(walker *w)
{
    if (!w->pending) return 0;
    ckpt_file *f = w->f;
    size_t idx = w->pending - 1, first = 0;
    w->pending = 0;
    int added = name_index_add(f, idx, w->pending_len, w->pending_h, &first);
    if (added < 0) return ck_fail(w->err, CKPT_E_NOMEM, -1, "out of memory");
    if (added > 0) {
        ck_listed *l = &f->listed[idx];
        if (l->name == f->listed[first].name &&
            !(l->name = ck_strndup(&f->arena, l->name, w->pending_len)))
            return ck_fail(w->err, CKPT_E_NOMEM, -1, "out of memory");
        if (pair_push(f, &f->dups, idx, first))
            return ck_fail(w->err, CKPT_E_NOMEM, -1, "out of memory");
    }
    return 0;
}

/* One byte a value id, not four: depths past DEEP_FROM (no honest file
 * nests so deep) are looked up in w->deep, the ids along the path. */
#define ONPATH_DEEP 255u
#define DEEP_FROM (ONPATH_DEEP - 2u)

static uint32_t onpath_depth(const walker *w, uint32_t id, uint32_t depth)
{
    uint8_t s = w->onpath[id];
    if (s < ONPATH_DEEP) return (uint32_t)s - 2;
    for (uint32_t d = DEEP_FROM; d < depth; d++)
        if (w->deep[d - DEEP_FROM] == id) return d;
    return depth; /* not reached: v is on the path above */
}

static int name_push(walker *w, const char *s, size_t n, size_t *saved)
{
    *saved = w->len;
    w->whole = NULL;
    size_t len = w->len + (w->len ? 1 : 0) + n;
    if (w->find) { /* where this part ends */
        if (w->nparts == w->cap_parts) {
            size_t nc = w->cap_parts ? w->cap_parts * 2 : 16;
            size_t *p = realloc(w->parts, nc * sizeof *p);
            if (!p) return ck_fail(w->err, CKPT_E_NOMEM, -1, "out of memory");
            w->parts = p;
            w->cap_parts = nc;
        }
        w->parts[w->nparts++] = len;
    }
    if (w->stored == w->len && len <= CK_MAX_NAME_BYTES) {
        if (len + 1 > w->cap) {
            size_t nc = w->cap ? w->cap : 256;
            while (nc < len + 1) nc *= 2;
            char *p = realloc(w->name, nc);
            if (!p) return ck_fail(w->err, CKPT_E_NOMEM, -1, "out of memory");
            w->name = p;
            w->cap = nc;
        }
        if (w->len) w->name[w->len] = '.';
        memcpy(w->name + len - n, s, n);
        w->name[len] = 0;
        w->stored = len;
    }
    w->len = len;
    return 0;
}

static void name_pop(walker *w, size_t saved)
{
    if (w->find && w->nparts) w->nparts--;
    w->len = saved;
    if (saved <= w->stored) {
        w->stored = saved;
        if (w->name) w->name[saved] = 0;
    }
}

/* Decimal of v at the end of buf[24]: its first byte. */
static char *dec_u64(char *end, uint64_t v)
{
    do {
        *--end = (char)('0' + v % 10);
        v /= 10;
    } while (v);
    return end;
}

/* Text of a dict key for a tensor name (buf: cap >= 24 bytes). */
static size_t key_name(const ckpt_value *k, size_t i, char *buf, size_t cap, const char **out)
{
    switch (k->kind) {
    case CKPT_V_STR:
    case CKPT_V_BIGINT: *out = k->u.s.p; return k->u.s.n;
    case CKPT_V_INT: { /* "%lld" without snprintf */
        uint64_t u = k->u.i < 0 ? (uint64_t)0 - (uint64_t)k->u.i : (uint64_t)k->u.i;
        char *p = dec_u64(buf + 24, u);
        if (k->u.i < 0) *--p = '-';
        *out = p;
        return (size_t)(buf + 24 - p);
    }
    case CKPT_V_BOOL: *out = k->u.b ? "True" : "False"; return strlen(*out);
    case CKPT_V_NONE: *out = "None"; return 4;
    case CKPT_V_FLOAT: *out = buf; return (size_t)snprintf(buf, cap, "%.17g", k->u.f);
    default: *out = buf; return (size_t)snprintf(buf, cap, "#%zu", i);
    }
}

static int walk(walker *w, const ckpt_value *v, uint32_t depth);

/* 1 when naming listed value `id` as a numpy array, else 0. */
static int numpy_listed(const ckpt_file *f, uint32_t id)
{
    return pair_find(&f->np_ids, id) < f->np_ids.n;
}

/* s[0..n): a path component; `kept` when s is NUL-terminated and lives
 * as long as the file (a str value's text, a literal), so that a tensor
 * whose whole name it is shares it instead of a copy. */
static int walk_child(walker *w, const char *s, size_t n, bool kept, const ckpt_value *v,
                      uint32_t depth)
{
    /* skip leaves that cannot hold tensors without touching the name */
    if (v->kind <= CKPT_V_BYTES || v->kind == CKPT_V_GLOBAL || v->kind == CKPT_V_STORAGE) return 0;
    size_t saved;
    CK_TRY(name_push(w, s, n, &saved));
    if (kept && saved == 0) w->whole = s;
    int r = walk(w, v, depth + 1);
    name_pop(w, saved);
    return r;
}

static int walk_seq(walker *w, const ckpt_value *v, uint32_t depth)
{
    char buf[24];
    for (size_t i = 0; i < v->u.seq.n; i++) {
        const ckpt_value *c = v->u.seq.v[i];
        if (c->kind <= CKPT_V_BYTES || c->kind == CKPT_V_GLOBAL || c->kind == CKPT_V_STORAGE)
            continue; /* walk_child() skips it */
        char *p = dec_u64(buf + sizeof buf, (uint64_t)i);
        CK_TRY(walk_child(w, p, (size_t)(buf + sizeof buf - p), false, c, depth));
    }
    return 0;
}

/* Keys of a dict at the root are the names of its tensors: the name index
 * slot of the key this many entries ahead is fetched from memory while the
 * ones before it are listed (emit_one()'s own prefetch comes too late for
 * an index that does not stay in cache). */
#define NAME_AHEAD 8u

static int walk_dict(walker *w, const ckpt_value *v, uint32_t depth)
{
    char buf[48];
    const ck_name_index *ni = &w->f->tensor_names;
    bool ahead = w->len == 0 && ni->cap;
    for (size_t i = 0; i + 1 < v->u.seq.n; i += 2) {
        const char *s;
        const ckpt_value *k = v->u.seq.v[i];
        if (ahead && i + 2 * NAME_AHEAD + 1 < v->u.seq.n) {
            const ckpt_value *kn = v->u.seq.v[i + 2 * NAME_AHEAD];
            if (kn->kind == CKPT_V_STR &&
                v->u.seq.v[i + 2 * NAME_AHEAD + 1]->kind == CKPT_V_TENSOR) {
                uint64_t h = ck_hash(kn->u.s.p, kn->u.s.n);
                __builtin_prefetch(&ni->slots[name_home((uint32_t)h, ni->cap)]);
                size_t j = (i / 2 + NAME_AHEAD) % 16;
                w->ahead[j].p = kn->u.s.p;
                w->ahead[j].n = kn->u.s.n;
                w->ahead[j].h = h;
            }
        }
        w->ahead_at = (i / 2) % 16;
        size_t n = key_name(k, i / 2, buf, sizeof buf, &s);
        CK_TRY(walk_child(w, s, n, k->kind == CKPT_V_STR || k->kind == CKPT_V_BIGINT,
                          v->u.seq.v[i + 1], depth));
    }
    return 0;
}

static bool in_set(const ckpt_value *set, const ckpt_value *k)
{
    if (!set || k->kind != CKPT_V_STR) return false;
    if (set->kind == CKPT_V_OBJECT)
        set = set->u.obj->args && set->u.obj->args->u.seq.n ? set->u.obj->args->u.seq.v[0] : NULL;
    if (!set || (set->kind != CKPT_V_SET && set->kind != CKPT_V_LIST && set->kind != CKPT_V_TUPLE))
        return false;
    for (size_t i = 0; i < set->u.seq.n; i++) {
        const ckpt_value *e = set->u.seq.v[i];
        if (e->kind == CKPT_V_STR && e->u.s.n == k->u.s.n &&
            memcmp(e->u.s.p, k->u.s.p, k->u.s.n) == 0)
            return true;
    }
    return false;
}

static int emit(walker *w, const ckpt_value *v);
static int emit_one(walker *w, ck_tdef *t);

/* A module: state_dict() order. */
static int walk_module(walker *w, const ckpt_value *state, uint32_t depth)
{
    const ckpt_value *params = ck_dict_get(state, "_parameters");
    const ckpt_value *bufs = ck_dict_get(state, "_buffers");
    const ckpt_value *np = ck_dict_get(state, "_non_persistent_buffers_set");
    const ckpt_value *mods = ck_dict_get(state, "_modules");
    for (int pass = 0; pass < 2; pass++) {
        const ckpt_value *d = pass ? bufs : params;
        if (!d || d->kind != CKPT_V_DICT) continue;
        for (size_t i = 0; i + 1 < d->u.seq.n; i += 2) {
            const ckpt_value *k = d->u.seq.v[i], *t = d->u.seq.v[i + 1];
            if (t->kind == CKPT_V_NONE || k->kind != CKPT_V_STR) continue;
            if (pass && in_set(np, k)) continue;
            CK_TRY(walk_child(w, k->u.s.p, k->u.s.n, true, t, depth));
        }
    }
    if (mods && mods->kind == CKPT_V_DICT) {
        for (size_t i = 0; i + 1 < mods->u.seq.n; i += 2) {
            const ckpt_value *k = mods->u.seq.v[i], *sub = mods->u.seq.v[i + 1];
            if (k->kind != CKPT_V_STR || sub->kind != CKPT_V_OBJECT) continue;
            CK_TRY(walk_child(w, k->u.s.p, k->u.s.n, true, sub, depth));
        }
    }
    /* a quantized module's packed parameters (LinearPackedParams): a
     * ScriptObject whose state is ((weight, bias, ...), class name); its
     * state_dict() names them _packed_params (a tuple) */
    const ckpt_value *pp = ck_dict_get(state, "_packed_params");
    if (pp && pp->kind == CKPT_V_OBJECT && pp->u.obj->state &&
        pp->u.obj->state->kind == CKPT_V_TUPLE && pp->u.obj->state->u.seq.n >= 1)
        CK_TRY(walk_child(w, "_packed_params", 14, true, pp->u.obj->state->u.seq.v[0], depth));
    return 0;
}

/* A quantized convolution pickles its __getstate__ tuple (..., weight,
 * bias, scale, zero_point, training): its weight and bias under the names
 * its state_dict() gives them.  1 when v is one. */
static int walk_qconv(walker *w, const ckpt_value *v, uint32_t depth, int *r)
{
    const char *cls = v->cls;
    const ckpt_value *st = v->u.obj->state;
    if (!cls || !strstr(cls, ".quantized.") || !strstr(cls, ".Conv") || !st ||
        st->kind != CKPT_V_TUPLE || st->u.seq.n < 14 || st->u.seq.v[10]->kind != CKPT_V_TENSOR)
        return 0;
    *r = walk_child(w, "weight", 6, true, st->u.seq.v[10], depth);
    if (!*r) *r = walk_child(w, "bias", 4, true, st->u.seq.v[11], depth);
    return 1;
}

static bool is_module(const ckpt_value *o)
{
    const ckpt_value *st = o->u.obj->state;
    return st && st->kind == CKPT_V_DICT && ck_dict_get(st, "_parameters") &&
           ck_dict_get(st, "_modules");
}

static int walk(walker *w, const ckpt_value *v, uint32_t depth)
{
    if (depth > w->f->opt.max_depth)
        return ck_fail(w->err, CKPT_E_LIMIT, -1, "values nest deeper than %u at '%s'%s",
                       w->f->opt.max_depth, w->name ? w->name : "",
                       w->f->opt.max_depth < 2048 ? " (max_depth)" : "");
    if (++w->visits > ck_budget(w->f->opt.max_expansion, w->f->pk.pickle_bytes))
        return ck_fail(
            w->err, CKPT_E_LIMIT, -1,
            "walking the object visits more than %llu values (shared references expand too much; "
            "max_expansion)",
            (unsigned long long)ck_budget(w->f->opt.max_expansion, w->f->pk.pickle_bytes));
    if (v->kind == CKPT_V_TENSOR) return emit(w, v);
    if (v->kind <= CKPT_V_BYTES || v->kind == CKPT_V_GLOBAL || v->kind == CKPT_V_STORAGE) return 0;
    if (w->onpath[v->id]) { /* being walked above (a cycle), or known to hold no tensor */
        if (w->onpath[v->id] >= 2) {
            uint32_t d = onpath_depth(w, v->id, depth);
            if (d < w->cycle_min) w->cycle_min = d;
        }
        return 0;
    }
    if (depth >= DEEP_FROM) {
        w->onpath[v->id] = (uint8_t)ONPATH_DEEP;
        w->deep[depth - DEEP_FROM] = v->id;
    } else {
        w->onpath[v->id] = (uint8_t)(depth + 2);
    }
    size_t ntensors = w->count;
    uint32_t cycle_min = w->cycle_min;
    w->cycle_min = UINT32_MAX;
    int r = 0;
    switch (v->kind) {
    case CKPT_V_LIST:
    case CKPT_V_TUPLE:
    case CKPT_V_SET: r = walk_seq(w, v, depth); break;
    case CKPT_V_DICT: r = walk_dict(w, v, depth); break;
    case CKPT_V_OBJECT:
        if (is_module(v)) {
            r = walk_module(w, v->u.obj->state, depth);
            break;
        }
        if (walk_qconv(w, v, depth, &r)) break;
        {
            ck_tdef *nt = NULL;
            /* find mode rebuilds nothing: naming recorded which are arrays */
            r = w->find ? numpy_listed(w->f, v->id) : ck_kind_numpy(w->f, v, &nt, w->err);
            if (r != 0) { /* a numpy array: a tensor over its bytes in the pickle */
                if (r > 0) r = emit_one(w, nt);
                if (r == 0 && !w->find && pair_push(w->f, &w->f->np_ids, v->id, 0))
                    r = ck_fail(w->err, CKPT_E_NOMEM, -1, "out of memory");
                break;
            }
        }
        if (v->u.obj->args && v->u.obj->args->kind == CKPT_V_TUPLE)
            r = walk_seq(w, v->u.obj->args, depth);
        if (!r && v->u.obj->items && v->u.obj->items->kind == CKPT_V_DICT)
            r = walk_dict(w, v->u.obj->items, depth);
        if (!r && v->u.obj->list) r = walk_seq(w, v->u.obj->list, depth);
        if (!r && v->u.obj->state) {
            const ckpt_value *st = v->u.obj->state;
            if (st->kind == CKPT_V_DICT)
                r = walk_dict(w, st, depth);
            else
                r = walk(w, st, depth + 1);
        }
        break;
    default: break;
    }
    /* A walk that listed no tensor and was cut short by no cycle through a
     * value above v saw everything reachable from v, whatever the path to v:
     * shared again (memo/DUP "billion laughs"), v is not walked again. */
    w->onpath[v->id] = r == 0 && w->count == ntensors && w->cycle_min >= depth ? 1 : 0;
    if (cycle_min < w->cycle_min) w->cycle_min = cycle_min;
    return r;
}

/* Check a tensor's extent against its storage. */
static int check_extent(walker *w, const ck_tdef *t, const char *name)
{
    ckpt_file *f = w->f;
    uint64_t numel = ck_tdef_numel(t);
    if (t->sidx == CK_TDEF_NO_STORAGE || numel == 0) return 0;
    const ck_storage *s = &f->storages[t->sidx];
    size_t es = ck_dtype_size(t->dtype);
    if (t->kind && t->kind->sub_byte) { /* packed: ceil(numel / k) bytes from the offset */
        uint64_t end = (uint64_t)t->offset + (numel + t->kind->sub_byte - 1) / t->kind->sub_byte;
        if (end > s->pub.nbytes)
            return ck_fail(w->err, CKPT_E_FORMAT, t->offset_pos,
                           "tensor '%s' reaches byte %llu of storage '%s', which holds %llu bytes",
                           name, (unsigned long long)end, s->pub.key,
                           (unsigned long long)s->pub.nbytes);
        return 0;
    }
    uint64_t last = (uint64_t)t->offset, step;
    for (uint32_t i = 0; i < t->ndim; i++) {
        if (ck_mul_ovf((uint64_t)(t->shape[i] - 1), (uint64_t)t->stride[i], &step) ||
            ck_add_ovf(last, step, &last))
            return ck_fail(w->err, CKPT_E_LIMIT, t->offset_pos, "tensor '%s': extent overflows",
                           name);
    }
    uint64_t end;
    if (ck_add_ovf(last, 1, &end) || ck_mul_ovf(end, es, &end))
        return ck_fail(w->err, CKPT_E_LIMIT, t->offset_pos, "tensor '%s': extent overflows", name);
    if (end > s->pub.nbytes)
        return ck_fail(w->err, CKPT_E_FORMAT, t->offset_pos,
                       "tensor '%s' reaches byte %llu of storage '%s', which holds %llu bytes",
                       name, (unsigned long long)end, s->pub.key,
                       (unsigned long long)s->pub.nbytes);
    return 0;
}

static int is_contiguous(const ck_tdef *t)
{
    uint64_t expect = 1;
    for (uint32_t i = t->ndim; i-- > 0;) {
        if (t->shape[i] != 1 && (uint64_t)t->stride[i] != expect) return 0;
        if (ck_mul_ovf(expect, t->shape[i] ? (uint64_t)t->shape[i] : 1, &expect)) break;
    }
    return 1;
}

/* The bytes ckpt_tensor_read() gives of t (describe()'s nbytes): numel
 * elements, packed when sub-byte; none when it has no bytes to give, unless
 * they are held in the pickle (numpy). */
static uint64_t tdef_nbytes(const ck_tdef *t, uint64_t numel)
{
    if (t->sidx == CK_TDEF_NO_STORAGE || ck_tdef_unreadable(t))
        return t->kind && t->kind->bytes ? numel * ck_dtype_size(t->dtype) : 0;
    if (t->kind && t->kind->sub_byte) return (numel + t->kind->sub_byte - 1) / t->kind->sub_byte;
    return numel * ck_dtype_size(t->dtype);
}

/* Fill a public descriptor from a rebuilt tensor (name left alone). */
static void describe(const ckpt_file *f, const ck_tdef *t, ckpt_tensor *o)
{
    size_t es = ck_dtype_size(t->dtype);
    uint64_t numel = ck_tdef_numel(t);
    o->nbytes = tdef_nbytes(t, numel);
    ck_kind_describe(t, o);
    /* listed with what is known, no bytes */
    if (t->sidx == CK_TDEF_NO_STORAGE || ck_tdef_unreadable(t)) {
        o->dtype = t->dtype;
        o->ndim = t->ndim;
        o->shape = t->shape;
        o->stride = t->stride;
        o->storage = CK_NO_STORAGE;
        o->storage_offset = t->offset;
        o->numel = numel;
        o->requires_grad = t->requires_grad;
        o->file_offset = -1;
        if (t->kind && t->kind->bytes) o->contiguous = is_contiguous(t); /* held in the pickle */
        return;
    }
    const ck_storage *s = &f->storages[t->sidx];
    o->dtype = t->dtype;
    o->ndim = t->ndim;
    o->shape = t->shape;
    o->stride = t->stride;
    o->storage_offset = t->offset;
    o->storage = t->sidx;
    o->numel = numel;
    o->requires_grad = t->requires_grad;
    o->conj = t->conj;
    o->neg = t->neg;
    /* check_extent() bounded offset * es for a non-empty tensor; an empty
     * one may carry any offset, so it points at its storage's start */
    o->file_offset = s->pub.file_offset < 0 || t->conj || t->neg ? -1
                     : numel ? s->pub.file_offset + t->offset * (int64_t)es
                                : s->pub.file_offset;
    uint64_t expect = 1;
    o->contiguous = 1;
    for (uint32_t i = t->ndim; i-- > 0;) {
        if (t->shape[i] != 1 && (uint64_t)t->stride[i] != expect) o->contiguous = 0;
        if (ck_mul_ovf(expect, t->shape[i] ? (uint64_t)t->shape[i] : 1, &expect))
            break; /* numel 0 only */
    }
    if (t->kind && t->kind->sub_byte) o->contiguous = 1; /* packed, as torch's int_repr() */
}

ck_tdef *ck_tdef_new(ckpt_file *f, ckpt_error *err)
{
    size_t i = f->ntdefs, c = i >> CK_TPOOL_BITS;
    if ((i & (CK_TPOOL - 1)) == 0) { /* a new chunk (zeroed) */
        if (ck_grow((void **)&f->tpool, &f->cap_tpool, c + 1, sizeof *f->tpool, err)) return NULL;
        if (!(f->tpool[c] = ck_alloc(&f->arena, CK_TPOOL * sizeof(ck_tdef)))) {
            ck_fail(err, CKPT_E_NOMEM, -1, "out of memory");
            return NULL;
        }
    }
    f->ntdefs++;
    return &f->tpool[c][i & (CK_TPOOL - 1)];
}

/* ---- shared shapes and strides ------------------------------------------- */

/* Most tensors of a checkpoint share a few shapes (100k tensors of (a): 64
 * pairs; 1M of (e): one): a tensor whose shape and stride equal an earlier
 * one's points at that one's arrays.  Ranks up to 8, at most DIMS_MAX
 * distinct pairs (then new pairs are kept unshared): the table is at most
 * 2 * DIMS_MAX slots of arena. */
typedef struct ck_dims_slot {
    uint32_t ndim, tag; /* ndim 0: empty */
    const int64_t *shape, *stride;
} ck_dims_slot;

#define DIMS_MAX_RANK 8u
#define DIMS_MAX 4096u

static uint64_t dims_hash(uint32_t ndim, const int64_t *shape, const int64_t *stride)
{
    uint64_t h = 0x9e3779b97f4a7c15ull * (ndim + 1u);
    for (uint32_t i = 0; i < ndim; i++) {
        h = (h ^ (uint64_t)shape[i]) * 0xff51afd7ed558ccdull;
        h ^= h >> 32;
        h = (h ^ (uint64_t)stride[i]) * 0xc4ceb9fe1a85ec53ull;
        h ^= h >> 29;
    }
    return h;
}

static bool dims_grow(ckpt_file *f)
{
    size_t ncap = f->cap_dims ? f->cap_dims * 2 : 64;
    ck_dims_slot *ns = ck_alloc(&f->arena, ncap * sizeof *ns); /* zeroed; the old one left */
    if (!ns) return false;
    for (size_t i = 0; i < f->cap_dims; i++) {
        if (!f->dims[i].ndim) continue;
        size_t j = f->dims[i].tag & (ncap - 1);
        while (ns[j].ndim) j = (j + 1) & (ncap - 1);
        ns[j] = f->dims[i];
    }
    f->dims = ns;
    f->cap_dims = ncap;
    return true;
}

static void share_dims(ckpt_file *f, uint32_t ndim, const int64_t **shape, const int64_t **stride)
{
    const int64_t *sh = *shape, *st = *stride;
    if (ndim == 0 || ndim > DIMS_MAX_RANK || !sh || !st) return;
    if (!f->cap_dims && !dims_grow(f)) return;
    uint32_t tag = (uint32_t)dims_hash(ndim, sh, st);
    size_t mask = f->cap_dims - 1, i;
    size_t bytes = ndim * sizeof *sh;
    for (i = tag & mask; f->dims[i].ndim; i = (i + 1) & mask) {
        const ck_dims_slot *d = &f->dims[i];
        if (d->tag != tag || d->ndim != ndim) continue;
        uint32_t k = 0;
        while (k < ndim && d->shape[k] == sh[k] && d->stride[k] == st[k]) k++;
        if (k < ndim) continue;
        *shape = d->shape;
        *stride = d->stride;
        /* give the caller's pair back: in one piece when it is the arena's
         * latest (rebuilds and TAR records allocate shape, then stride,
         * just before), else each to the free lists (the pair came from
         * them: 16 bytes a tensor of a 1M-tensor state dict) */
        if ((const char *)sh + bytes != (const char *)st ||
            !ck_alloc_undo(&f->arena, (void *)(uintptr_t)sh, 2 * bytes)) {
            ck_free_small(&f->arena, (void *)(uintptr_t)sh, bytes);
            ck_free_small(&f->arena, (void *)(uintptr_t)st, bytes);
        }
        return;
    }
    if (f->ndims + 1 > f->cap_dims / 2) {
        if (f->cap_dims >= 2 * DIMS_MAX || !dims_grow(f)) return; /* kept unshared */
        mask = f->cap_dims - 1;
        for (i = tag & mask; f->dims[i].ndim; i = (i + 1) & mask) continue;
    }
    f->dims[i] = (ck_dims_slot){ndim, tag, sh, st};
    f->ndims++;
}

/* The one tensor validator, for pickled rebuilds and TAR records alike:
 * the element count and byte size of a tensor whose shape and stride were
 * read (non-negative, rank checked) by the caller.  shape/stride are arena
 * arrays the tensor keeps, or gives back for an equal pair (share_dims()). */
int ck_tensor_new(ckpt_file *f, size_t storage, ckpt_dtype dtype, uint32_t ndim,
                  const int64_t *shape, const int64_t *stride, int64_t offset, int64_t pos,
                  ck_tdef **out, ckpt_error *err)
{
    if (ndim > 64) /* the callers check max_rank (at most 64); ck_tdef keeps 8 bits */
        return ck_fail(err, CKPT_E_LIMIT, pos, "tensor has %u dimensions (at most 64)", ndim);
    uint64_t numel = 1;
    for (uint32_t i = 0; i < ndim; i++)
        if (ck_mul_ovf(numel, (uint64_t)shape[i], &numel))
            return ck_fail(err, CKPT_E_LIMIT, pos, "tensor element count overflows");
    uint64_t nbytes;
    if (ck_mul_ovf(numel, ck_dtype_size(dtype), &nbytes)) /* max_tensor_bytes: checked on reading */
        return ck_fail(err, CKPT_E_LIMIT, pos,
                       "tensor of %llu elements exceeds the tensor size limit (its byte count "
                       "overflows 64 bits)",
                       (unsigned long long)numel);
    share_dims(f, ndim, &shape, &stride);
    ck_tdef *t = ck_tdef_new(f, err);
    if (!t) return -1;
    ck_tdef_set_storage(t, storage);
    t->dtype = dtype;
    t->ndim = (uint8_t)ndim;
    t->shape = (int64_t *)shape;
    t->stride = (int64_t *)stride;
    t->offset = offset;
    t->offset_pos = pos;
    *out = t;
    return 0;
}

/* Per-channel parameters of a quantized tensor: read once, as doubles. */
static int read_params(walker *w, ck_tdef *p, const char *name, size_t *count, double **out)
{
    ckpt_file *f = w->f;
    CK_TRY(check_extent(w, p, name));
    ckpt_tensor d;
    memset(&d, 0, sizeof d);
    describe(f, p, &d);
    d.name = name;
    size_t es = ck_dtype_size(d.dtype);
    if (d.nbytes > f->opt.max_tensor_bytes || d.numel > SIZE_MAX / sizeof(double))
        return ck_fail(w->err, CKPT_E_LIMIT, p->offset_pos,
                       "quantization parameters of '%s' are too large", name);
    if (d.dtype != CKPT_FLOAT64 && d.dtype != CKPT_FLOAT32 && d.dtype != CKPT_INT64 &&
        d.dtype != CKPT_INT32)
        return ck_fail(w->err, CKPT_E_FORMAT, p->offset_pos,
                       "quantization parameters of '%s' are %s", name, ck_dtype_name(d.dtype));
    double *dst = ck_alloc(&f->arena, (size_t)d.numel * sizeof *dst);
    uint8_t *raw = malloc(d.nbytes ? (size_t)d.nbytes : 1);
    if (!dst || !raw) {
        free(raw);
        return ck_fail(w->err, CKPT_E_NOMEM, -1, "out of memory");
    }
    if (ckpt_tensor_read(f, &d, raw, (size_t)d.nbytes, w->err) != 0) {
        free(raw);
        return -1;
    }
    for (uint64_t i = 0; i < d.numel; i++) {
        const uint8_t *q = raw + i * es;
        if (d.dtype == CKPT_FLOAT64) {
            memcpy(&dst[i], q, 8);
        } else if (d.dtype == CKPT_FLOAT32) {
            float x;
            memcpy(&x, q, 4);
            dst[i] = x;
        } else if (d.dtype == CKPT_INT64) {
            int64_t x;
            memcpy(&x, q, 8);
            dst[i] = (double)x;
        } else {
            int32_t x;
            memcpy(&x, q, 4);
            dst[i] = x;
        }
    }
    free(raw);
    *count = (size_t)d.numel;
    *out = dst;
    return 0;
}

/* A tensor value: a sparse tensor as its components, others as one. */
static int emit(walker *w, const ckpt_value *v)
{
    ck_tdef *t = ck_tdef_of(v);
    ck_tkind *k = t->kind;
    if (!k || !k->nparts) return emit_one(w, t);
    for (size_t i = 0; i < k->nparts; i++) {
        size_t saved;
        const char *pn = k->part_names[i];
        CK_TRY(name_push(w, pn, strlen(pn), &saved));
        size_t at = w->f->ntensors;
        int r = emit_one(w, k->parts[i]);
        if (r == 0 && !w->find && at < w->f->ntensors && held_push(w->f, &w->f->sparse_of, at, t))
            r = ck_fail(w->err, CKPT_E_NOMEM, -1, "out of memory");
        name_pop(w, saved);
        CK_TRY(r);
    }
    if (!k->desc && !w->find) { /* the sparse tensor itself, for ckpt_value_tensor() */
        const char *name = w->name ? w->name : "";
        ckpt_tensor *d = ck_alloc(&w->f->arena, sizeof *d);
        if (!d || !(d->name = ck_strndup(&w->f->arena, name, w->len)))
            return ck_fail(w->err, CKPT_E_NOMEM, -1, "out of memory");
        d->name_len = w->len;
        describe(w->f, t, d);
        d->layout = k->layout;
        k->desc = d;
    }
    return 0;
}

/* Find mode's emit_one(): the listing index met, and at a target its
 * name's parts to found(). */
static int find_one(walker *w)
{
    size_t idx = w->count++;
    if (w->tnext >= w->ntargets || w->targets[w->tnext] != idx) return 0;
    w->tnext++;
    CK_TRY(w->found(w, idx, w->found_ctx));
    if (w->tnext < w->ntargets) return 0;
    w->stop = true; /* nothing more to learn: unwind */
    return -1;
}

static int emit_one(walker *w, ck_tdef *t)
{
    if (w->find) return find_one(w);
    ckpt_file *f = w->f;
    const char *name = w->name ? w->name : "";
    CK_TRY(flush_name(w)); /* the previous tensor's name: a duplicate is told first */
    if (f->ntensors >= f->opt.max_entries)
        return ck_fail(w->err, CKPT_E_LIMIT, -1, "more than %u tensors (max_entries)",
                       f->opt.max_entries);
    if (w->stored != w->len)
        return ck_fail(w->err, CKPT_E_LIMIT, t->offset_pos,
                       "a tensor name is longer than %zu bytes ('%.60s...')", CK_MAX_NAME_BYTES,
                       name);
    /* A listing costs about 24 + name/8 words of memory; one tensor listed
     * again under another name (shared references) costs more, so that
     * sharing cannot multiply the listings. */
    w->visits += 24 + w->len / 8 + (t->listed ? 256 : 0);
    if (w->visits > ck_budget(f->opt.max_expansion, f->pk.pickle_bytes))
        return ck_fail(
            w->err, CKPT_E_LIMIT, t->offset_pos,
            "listing the tensors takes more than %llu steps (shared references expand too much; "
            "names too long; max_expansion)",
            (unsigned long long)ck_budget(f->opt.max_expansion, f->pk.pickle_bytes));
    CK_TRY(check_extent(w, t, name));
    ck_tkind *k = t->kind;
    if (k && k->qscales && !k->scales && !k->unreadable) {
        size_t nz = 0;
        CK_TRY(read_params(w, k->qscales, name, &k->nchannels, &k->scales));
        CK_TRY(read_params(w, k->qzeros, name, &nz, &k->zero_points));
        if (nz != k->nchannels)
            return ck_fail(w->err, CKPT_E_FORMAT, t->offset_pos,
                           "tensor '%s' has %zu scales but %zu zero points", name, k->nchannels,
                           nz);
        if (k->qscheme == CKPT_PER_CHANNEL_AFFINE_FLOAT_QPARAMS) /* torch keeps them as float32 */
            for (size_t i = 0; i < nz; i++) {
                k->scales[i] = (float)k->scales[i];
                k->zero_points[i] = (float)k->zero_points[i];
            }
    }
    CK_TRY(ck_grow((void **)&f->listed, &f->cap_listed, f->ntensors + 1, sizeof *f->listed,
                   w->err));
    ck_listed *l = &f->listed[f->ntensors];
    size_t nlen = w->len; /* every byte: a key may hold NUL bytes ('w\x00evil') */
    *l = (ck_listed){w->whole ? w->whole : ck_strndup(&f->arena, name, nlen), t};
    if (!l->name) return ck_fail(w->err, CKPT_E_NOMEM, -1, "out of memory");
    if (memchr(name, 0, nlen) && pair_push(f, &f->nul_names, f->ntensors, nlen))
        return ck_fail(w->err, CKPT_E_NOMEM, -1, "out of memory");
    size_t j = w->ahead_at; /* hashed ahead by walk_dict() when the name is its key */
    uint64_t h =
        w->ahead[j].p == l->name && w->ahead[j].n == nlen ? w->ahead[j].h : ck_hash(l->name, nlen);
    if (f->tensor_names.cap) /* where it will go when the next one is listed */
        __builtin_prefetch(&f->tensor_names.slots[name_home((uint32_t)h, f->tensor_names.cap)]);
    w->pending = f->ntensors + 1;
    w->pending_len = nlen;
    w->pending_h = h;
    uint64_t nbytes = tdef_nbytes(t, ck_tdef_numel(t));
    if (k && k->bytes) {               /* held in the pickle: mem_read() needs its rebuild */
        if (held_push(f, &f->held, f->ntensors, t))
            return ck_fail(w->err, CKPT_E_NOMEM, -1, "out of memory");
    }
    if (!t->listed) t->listed = (uint32_t)(f->ntensors + 1); /* < max_entries + 1 */
    if (ck_add_ovf(f->total_bytes, nbytes, &f->total_bytes))
        f->total_bytes = UINT64_MAX; /* huge views list */
    f->ntensors++;
    w->count++;
    return 0;
}

/* What naming walks: the selected value, or what a container named its
 * tensors from (TorchScript) when no key is selected. */
static const ckpt_value *names_from(const ckpt_file *f)
{
    return f->names_root && !f->opt.key ? f->names_root : f->sel;
}

/* Walk again as naming did, listing nothing: found(w, idx, ctx) is called
 * at each listing index in targets[0..n) (ascending, no repeats) with the
 * ends of its name's parts in w->parts[0..w->nparts).  The file is only
 * read (numpy arrays are known from f->np_ids, not rebuilt), so this may
 * run on a file in use by other threads.  0, or -1 with err set. */
static int find_walk(const ckpt_file *f, const size_t *targets, size_t n,
                     int (*found)(walker *w, size_t idx, void *ctx), void *ctx, ckpt_error *err)
{
    if (n == 0) return 0;
    walker w = {.f = (ckpt_file *)f,
                .err = err,
                .find = true,
                .targets = targets,
                .ntargets = n,
                .found = found,
                .found_ctx = ctx,
                .cycle_min = UINT32_MAX};
    w.onpath = calloc(f->pk.next_id ? f->pk.next_id : 1, sizeof *w.onpath);
    if (f->opt.max_depth >= DEEP_FROM)
        w.deep = malloc((f->opt.max_depth + 1 - DEEP_FROM) * sizeof *w.deep);
    int r;
    if (!w.onpath || (f->opt.max_depth >= DEEP_FROM && !w.deep))
        r = ck_fail(err, CKPT_E_NOMEM, -1, "out of memory");
    else if ((r = walk(&w, names_from(f), 0)) == 0 || w.stop)
        r = w.stop
                ? 0
                : ck_fail(err, CKPT_E_ARG, -1, "tensor %zu was not named again", targets[w.tnext]);
    free(w.onpath);
    free(w.deep);
    free(w.name);
    free(w.parts);
    return r;
}

/* Parts of the names of the tensors in a clash (check_clashes()), one
 * run of ends a target. */
typedef struct clash_parts {
    size_t *ends; /* every target's ends, one after the other */
    size_t n, cap;
    size_t *at, *nat; /* by target position: where its run starts, its length */
    size_t next;      /* the target position found() fills next */
} clash_parts;

static int keep_parts(walker *w, size_t idx, void *ctx)
{
    (void)idx;
    clash_parts *c = ctx;
    if (c->n + w->nparts > c->cap) {
        size_t nc = c->cap ? c->cap : 64;
        while (nc < c->n + w->nparts) nc *= 2;
        size_t *p = realloc(c->ends, nc * sizeof *p);
        if (!p) return ck_fail(w->err, CKPT_E_NOMEM, -1, "out of memory");
        c->ends = p;
        c->cap = nc;
    }
    if (w->nparts) memcpy(c->ends + c->n, w->parts, w->nparts * sizeof *w->parts);
    c->at[c->next] = c->n;
    c->nat[c->next] = w->nparts;
    c->next++;
    c->n += w->nparts;
    return 0;
}

static int cmp_size(const void *a, const void *b)
{
    size_t x = *(const size_t *)a, y = *(const size_t *)b;
    return x < y ? -1 : x > y;
}

/* The position of x in the ascending v[0..n) (present). */
static size_t find_size(const size_t *v, size_t n, size_t x)
{
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (v[mid] < x)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

/* Tensors named as an earlier one.  Two different key paths that flatten
 * to one name ({'model.fc.weight': t, 'model': {'fc.weight': u}}) are a
 * valid file: both are listed, ckpt_find() gives the first, and a note
 * says so.  The same path twice (a dict that sets one key twice, which no
 * pickler writes: torch.load keeps the last value) is refused. */
static int check_clashes(ckpt_file *f, ckpt_error *err)
{
    size_t nd = f->dups.n, nt = 0;
    size_t *targets = malloc(2 * nd * sizeof *targets);
    clash_parts c = {0};
    c.at = malloc(2 * nd * sizeof *c.at);
    c.nat = malloc(2 * nd * sizeof *c.nat);
    int r = 0;
    if (!targets || !c.at || !c.nat) {
        r = ck_fail(err, CKPT_E_NOMEM, -1, "out of memory");
        goto done;
    }
    for (size_t i = 0; i < nd; i++) {
        targets[nt++] = f->dups.v[i].a;
        targets[nt++] = f->dups.v[i].b;
    }
    qsort(targets, nt, sizeof *targets, cmp_size);
    size_t u = 0;
    for (size_t i = 0; i < nt; i++)
        if (u == 0 || targets[u - 1] != targets[i]) targets[u++] = targets[i];
    nt = u;
    if ((r = find_walk(f, targets, nt, keep_parts, &c, err)) != 0) goto done;
    for (size_t i = 0; i < nd; i++) {
        size_t a = find_size(targets, nt, f->dups.v[i].a),
               b = find_size(targets, nt, f->dups.v[i].b);
        if (c.nat[a] != c.nat[b] ||
            memcmp(c.ends + c.at[a], c.ends + c.at[b], c.nat[a] * sizeof *c.ends) != 0)
            continue;
        const ck_listed *l = &f->listed[f->dups.v[i].a];
        r = ck_fail(err, CKPT_E_FORMAT, l->t->offset_pos,
                    "two tensors are named '%s' by the same key path (a key set twice)", l->name);
        goto done;
    }
    {
        const ck_listed *l = &f->listed[f->dups.v[0].b];
        bool nul = listed_len(f, f->dups.v[0].b) != strlen(l->name);
        r = ck_note(&f->pk,
                    "name clash: tensors %zu and %zu are both named '%.80s'%s, by different key "
                    "paths (%zu tensor%s named as an earlier one in all); an output that needs "
                    "a name a tensor (safetensors, a .npy file each) cannot hold both",
                    f->dups.v[0].b, f->dups.v[0].a, l->name, nul ? " (cut at a NUL byte)" : "", nd,
                    nd == 1 ? "" : "s");
        if (r) r = ck_fail(err, CKPT_E_NOMEM, -1, "out of memory");
    }
done:
    free(targets);
    free(c.at);
    free(c.nat);
    free(c.ends);
    return r;
}

/* Sort by (a, b). */
static int cmp_pair2(const void *x, const void *y)
{
    const ck_pair *p = x, *q = y;
    if (p->a != q->a) return p->a < q->a ? -1 : 1;
    return p->b < q->b ? -1 : p->b > q->b;
}

/* f->clash_next and f->by_ptr, so that ckpt_find_next() and the index of
 * a descriptor take a binary search, however many names clash. */
static int index_clashes(ckpt_file *f, ckpt_error *err)
{
    size_t nd = f->dups.n, nm = 0;
    ck_pair *m = nd ? malloc(2 * nd * sizeof *m) : NULL; /* (first, member) */
    if (nd && !m) return ck_fail(err, CKPT_E_NOMEM, -1, "out of memory");
    for (size_t i = 0; i < nd; i++) {
        m[nm++] = (ck_pair){f->dups.v[i].b, f->dups.v[i].a};
        m[nm++] = (ck_pair){f->dups.v[i].b, f->dups.v[i].b};
    }
    if (nm) qsort(m, nm, sizeof *m, cmp_pair2);
    int r = 0;
    for (size_t i = 0; i < nm && r == 0; i++) {
        if (i + 1 < nm && m[i + 1].a == m[i].a && m[i + 1].b == m[i].b) continue; /* a first again */
        size_t next = i + 1 < nm && m[i + 1].a == m[i].a ? m[i + 1].b : SIZE_MAX;
        if (pair_push(f, &f->clash_next, m[i].b, next)) r = -1;
    }
    free(m);
    for (size_t i = 0; i < nd && r == 0; i++)
        if (pair_push(f, &f->by_ptr, (size_t)(uintptr_t)f->listed[f->dups.v[i].a].name,
                      f->dups.v[i].a))
            r = -1;
    for (size_t i = 0; i < f->nul_names.n && r == 0; i++)
        if (pair_push(f, &f->by_ptr, (size_t)(uintptr_t)f->listed[f->nul_names.v[i].a].name,
                      f->nul_names.v[i].a))
            r = -1;
    if (r) return ck_fail(err, CKPT_E_NOMEM, -1, "out of memory");
    if (f->clash_next.n > 1)
        qsort(f->clash_next.v, f->clash_next.n, sizeof *f->clash_next.v, cmp_pair);
    if (f->by_ptr.n > 1) qsort(f->by_ptr.v, f->by_ptr.n, sizeof *f->by_ptr.v, cmp_pair);
    return 0;
}

/* ---- --key: a top-level key or a path of keys ----------------------------- */

/* The value under the key spelled s[0..n) in v, as naming spells keys
 * (key_name(): a str key's bytes, an int key's decimal, ...; the last of
 * equal keys), a list or tuple index (decimal, no leading zero), a
 * module's parameter, buffer or submodule, another object's items or
 * state dict.  *steps counts the entries looked at. */
static const ckpt_value *child_dict(const ckpt_value *d, const char *s, size_t n, uint64_t *steps)
{
    if (!d || d->kind != CKPT_V_DICT) return NULL;
    const ckpt_value *found = NULL;
    char buf[48];
    for (size_t i = 0; i + 1 < d->u.seq.n; i += 2) {
        const char *k;
        size_t kl = key_name(d->u.seq.v[i], i / 2, buf, sizeof buf, &k);
        if (kl == n && memcmp(k, s, n) == 0) found = d->u.seq.v[i + 1];
    }
    *steps += d->u.seq.n / 2 + 1;
    return found;
}

static const ckpt_value *child(const ckpt_value *v, const char *s, size_t n, uint64_t *steps)
{
    const ckpt_value *c = NULL;
    switch (v->kind) {
    case CKPT_V_DICT: return child_dict(v, s, n, steps);
    case CKPT_V_LIST:
    case CKPT_V_TUPLE: {
        size_t idx = 0;
        if (n == 0 || n > 18 || (n > 1 && s[0] == '0')) return NULL;
        for (size_t i = 0; i < n; i++) {
            if (s[i] < '0' || s[i] > '9') return NULL;
            idx = idx * 10 + (size_t)(s[i] - '0');
        }
        *steps += 1;
        return idx < v->u.seq.n ? v->u.seq.v[idx] : NULL;
    }
    case CKPT_V_OBJECT:
        if (is_module(v)) {
            const ckpt_value *st = v->u.obj->state;
            if (!(c = child_dict(ck_dict_get(st, "_parameters"), s, n, steps)) &&
                !(c = child_dict(ck_dict_get(st, "_buffers"), s, n, steps)))
                c = child_dict(ck_dict_get(st, "_modules"), s, n, steps);
            return c && c->kind != CKPT_V_NONE ? c : NULL;
        }
        if (!(c = child_dict(v->u.obj->items, s, n, steps)))
            c = child_dict(v->u.obj->state, s, n, steps);
        return c;
    default: return NULL;
    }
}

/* The value at the dotted path s[0..n) under v: at each level the longest
 * run of components that is a key wins, shorter runs are tried after.
 * NULL when there is none or the search takes more than *budget steps
 * (*over set). */
static const ckpt_value *resolve(const ckpt_value *v, const char *s, size_t n, uint64_t *steps,
                                 uint64_t budget)
{
    size_t end = n;
    for (;;) {
        if (*steps > budget) return NULL;
        const ckpt_value *c = child(v, s, end, steps);
        if (c) {
            const ckpt_value *r =
                end == n ? c : resolve(c, s + end + 1, n - end - 1, steps, budget);
            if (r) return r;
        }
        while (end > 0 && s[end - 1] != '.') end--;
        if (end == 0) return NULL;
        end--; /* at the dot */
    }
}

/* opt.key: a top-level key, else a path of keys (the same rule at every
 * level, so a key holding dots is reached too: "a.b.c" is the key "a.b.c",
 * or "c" of "a.b", or "b.c" of "a", or "c" of "b" of "a"). */
static int select_key(ckpt_file *f, ckpt_error *err)
{
    f->sel = f->root;
    if (!f->opt.key) return 0;
    const char *key = f->opt.key;
    size_t kn = f->opt.key_len;
    const ckpt_value *d = f->root;
    if (d && d->kind == CKPT_V_OBJECT && d->u.obj->items) d = d->u.obj->items;
    const ckpt_value *v = NULL;
    if (d && d->kind == CKPT_V_DICT) /* a str key spelled so: the last of equal keys */
        for (size_t i = 0; i + 1 < d->u.seq.n; i += 2) {
            const ckpt_value *k = d->u.seq.v[i];
            if (k->kind == CKPT_V_STR && k->u.s.n == kn && memcmp(k->u.s.p, key, kn) == 0)
                v = d->u.seq.v[i + 1];
        }
    if (!v && f->root) {
        uint64_t steps = 0, budget = ck_budget(f->opt.max_expansion, f->pk.pickle_bytes);
        v = resolve(f->root, key, kn, &steps, budget);
        if (!v && steps > budget)
            return ck_fail(err, CKPT_E_LIMIT, -1,
                           "looking for key '%s' visits more than %llu keys (max_expansion)", key,
                           (unsigned long long)budget);
    }
    if (v) {
        f->sel = (ckpt_value *)v;
        return 0;
    }
    if (memchr(key, '.', kn))
        return ck_fail(err, CKPT_E_NOTFOUND, -1,
                       "no key '%.200s', as a top-level key or a path of keys", key);
    if (!d || d->kind != CKPT_V_DICT)
        return ck_fail(err, CKPT_E_NOTFOUND, -1,
                       "no top-level key '%s': the object is a %s, not a dict", key,
                       d ? ckpt_kind_name((ckpt_kind)d->kind) : "nothing");
    char list[200];
    size_t n = 0;
    list[0] = 0;
    for (size_t i = 0; i + 1 < d->u.seq.n && n + 4 < sizeof list; i += 2) {
        char buf[48];
        const char *s;
        size_t kl = key_name(d->u.seq.v[i], i / 2, buf, sizeof buf, &s);
        int w = snprintf(list + n, sizeof list - n, "%s'%.*s'", i ? ", " : "",
                         (int)(kl > 60 ? 60 : kl), s);
        if (w < 0 || (size_t)w >= sizeof list - n) {
            snprintf(list + n, sizeof list - n, ", ...");
            break;
        }
        n += (size_t)w;
    }
    return ck_fail(err, CKPT_E_NOTFOUND, -1, "no top-level key '%s'; keys are: %s", key,
                   n ? list : "(none)");
}

int ck_catalogue(ckpt_file *f, ckpt_error *err)
{
    CK_TRY(select_key(f, err));
    if (!f->sel || f->opt.skip_tensors) return 0;
    walker w = {.f = f, .err = err};
    w.onpath = calloc(f->pk.next_id ? f->pk.next_id : 1, sizeof *w.onpath);
    if (f->opt.max_depth >= DEEP_FROM)
        w.deep = malloc((f->opt.max_depth + 1 - DEEP_FROM) * sizeof *w.deep);
    w.cycle_min = UINT32_MAX;
    /* as many tensors as rebuilds, nearly always: the table and the name
     * index sized once (a table grown by doubling copies itself, and its
     * freed halves stay in the heap) */
    size_t guess = f->ntdefs < f->opt.max_entries ? f->ntdefs : f->opt.max_entries;
    if (guess > f->cap_listed && guess <= SIZE_MAX / sizeof *f->listed) {
        ck_listed *nl = realloc(f->listed, guess * sizeof *nl);
        if (nl) {
            /* filled in order, nearly always to the end */
            ck_pages_populate(nl + f->cap_listed, (guess - f->cap_listed) * sizeof *nl);
            f->listed = nl;
            f->cap_listed = guess;
        }
    }
    if (!w.onpath || (f->opt.max_depth >= DEEP_FROM && !w.deep) ||
        name_index_reserve(&f->tensor_names, guess)) {
        free(w.onpath);
        free(w.deep);
        return ck_fail(err, CKPT_E_NOMEM, -1, "out of memory");
    }
    int r = walk(&w, names_from(f), 0);
    if (r == 0) r = flush_name(&w);
    if (r == 0 && f->np_ids.n > 1) /* find mode looks them up */
        qsort(f->np_ids.v, f->np_ids.n, sizeof *f->np_ids.v, cmp_pair);
    if (r == 0 && f->dups.n) r = check_clashes(f, err);
    if (r == 0 && (f->dups.n || f->nul_names.n)) r = index_clashes(f, err);
    /* tensors that naming did not reach (outside the key, non-persistent
     * buffers): a nameless descriptor when their extent is sound */
    for (size_t i = 0; r == 0 && i < f->ntdefs; i++) {
        ck_tdef *t = ck_tdef_at(f, i);
        if (t->listed || t->sidx == CK_TDEF_NO_STORAGE) continue;
        ckpt_error scratch;
        w.err = &scratch;
        if (check_extent(&w, t, "") != 0) continue;
        ck_tkind *k = ck_tdef_kind(f, t);
        if (!k || !(k->desc = ck_alloc(&f->arena, sizeof *k->desc))) {
            r = ck_fail(err, CKPT_E_NOMEM, -1, "out of memory");
            break;
        }
        describe(f, t, k->desc);
    }
    free(w.onpath);
    free(w.deep);
    free(w.name);
    if (r == 0 && f->ntensors) {
        f->ntchunks = (f->ntensors + CK_TCHUNK - 1) >> CK_TCHUNK_BITS;
        if (!(f->tchunks = calloc(f->ntchunks, sizeof *f->tchunks))) {
            f->ntchunks = 0;
            r = ck_fail(err, CKPT_E_NOMEM, -1, "out of memory");
        }
    }
    return r;
}

void ck_tensors_free(ckpt_file *f)
{
    for (size_t c = 0; c < f->ntchunks; c++)
        free(atomic_load_explicit(&f->tchunks[c], memory_order_relaxed));
    free(f->tchunks);
    free(f->listed);
}

/* ---- accessors ---------------------------------------------------------- */

void ckpt_get_info_sized(const ckpt_file *f, ckpt_info *out, size_t struct_size)
{
    ckpt_info all, *info = &all; /* only the caller's struct_size bytes go back */
    memset(info, 0, sizeof *info);
    info->struct_size = struct_size < sizeof *info ? struct_size : sizeof *info;
    if (out) memcpy(out, info, info->struct_size);
    if (!f || !out) return;
    info->format = f->format;
    info->byteorder = f->byteorder;
    info->version = f->version ? f->version : "";
    info->root = f->root_name ? f->root_name : "";
    info->tensor_count = f->ntensors;
    info->storage_count = f->nstorages;
    info->total_bytes = f->total_bytes;
    info->file_size = f->src.size;
    memcpy(out, info, info->struct_size);
}

size_t ckpt_tensor_count(const ckpt_file *f)
{
    return f ? f->ntensors : 0;
}
/* The public descriptor of listed tensor i, into o. */
static void describe_listed(const ckpt_file *f, size_t i, ckpt_tensor *o)
{
    const ck_listed *l = &f->listed[i];
    memset(o, 0, sizeof *o);
    o->name = l->name;
    o->name_len = listed_len(f, i);
    describe(f, l->t, o);
    const ck_tdef *sparse = held_find(&f->sparse_of, i);
    if (sparse) {
        const ck_tkind *k = sparse->kind;
        o->layout = k->layout;
        for (size_t j = 0; j < k->nparts; j++)
            if (k->parts[j] == l->t) o->component = k->part_names[j];
        o->dense_ndim = k->dense_ndim;
        o->dense_size = k->dense_size;
    }
}

const ckpt_tensor *ckpt_tensor_at(const ckpt_file *f, size_t i)
{
    if (!f || i >= f->ntensors) return NULL;
    size_t c = i >> CK_TCHUNK_BITS;
    ckpt_tensor *chunk = atomic_load_explicit(&f->tchunks[c], memory_order_acquire);
    if (!chunk) {
        /* the first reader to ask builds the chunk; several threads may
         * race: one publishes, the others free theirs and take it */
        size_t first = c << CK_TCHUNK_BITS;
        size_t n = f->ntensors - first < CK_TCHUNK ? f->ntensors - first : CK_TCHUNK;
        ckpt_tensor *mine = malloc(n * sizeof *mine);
        if (!mine) return NULL;
        for (size_t j = 0; j < n; j++) describe_listed(f, first + j, &mine[j]);
        ckpt_tensor *expected = NULL;
        if (atomic_compare_exchange_strong_explicit(&f->tchunks[c], &expected, mine,
                                                    memory_order_acq_rel, memory_order_acquire)) {
            chunk = mine;
        } else {
            free(mine);
            chunk = expected;
        }
    }
    return &chunk[i & (CK_TCHUNK - 1)];
}

int ckpt_tensor_get_sized(const ckpt_file *f, size_t i, ckpt_tensor *out, size_t struct_size,
                          ckpt_error *err)
{
    if (!f || !out) return ck_fail(err, CKPT_E_ARG, -1, "null argument");
    if (i >= f->ntensors)
        return ck_fail(err, CKPT_E_ARG, -1, "no tensor %zu (the file has %zu)", i, f->ntensors);
    if (struct_size == sizeof *out) { /* this library's own: filled in place */
        describe_listed(f, i, out);
        return 0;
    }
    ckpt_tensor all;
    describe_listed(f, i, &all);
    memcpy(out, &all, struct_size < sizeof all ? struct_size : sizeof all);
    return 0;
}

const ckpt_tensor *ckpt_find(const ckpt_file *f, const char *name)
{
    return f && name ? ckpt_tensor_at(f, name_index_get(f, name, strlen(name))) : NULL;
}

const ckpt_tensor *ckpt_find_n(const ckpt_file *f, const char *name, size_t len)
{
    return f && (name || !len) ? ckpt_tensor_at(f, name_index_get(f, name ? name : "", len)) : NULL;
}

const ckpt_tensor *ckpt_find_next(const ckpt_file *f, const ckpt_tensor *t)
{
    if (!f || !t || !f->clash_next.n) return NULL;
    size_t at = pair_find(&f->clash_next, listed_index(f, t));
    return at < f->clash_next.n ? ckpt_tensor_at(f, f->clash_next.v[at].b) : NULL;
}

typedef struct parts_out {
    size_t *ends, cap, n;
} parts_out;

static int give_parts(walker *w, size_t idx, void *ctx)
{
    (void)idx;
    parts_out *o = ctx;
    o->n = w->nparts;
    for (size_t i = 0; i < w->nparts && i < o->cap; i++) o->ends[i] = w->parts[i];
    return 0;
}

int ckpt_tensor_name_parts(const ckpt_file *f, const ckpt_tensor *t, size_t *ends, size_t cap,
                           size_t *nparts, ckpt_error *err)
{
    if (nparts) *nparts = 0;
    if (!f || !t || !nparts || (cap && !ends)) return ck_fail(err, CKPT_E_ARG, -1, "null argument");
    size_t idx = listed_index(f, t);
    if (idx >= f->ntensors)
        return ck_fail(err, CKPT_E_ARG, -1, "the tensor is not one the file lists");
    parts_out o = {ends, cap, 0};
    CK_TRY(find_walk(f, &idx, 1, give_parts, &o, err));
    *nparts = o.n;
    return 0;
}
size_t ckpt_storage_count(const ckpt_file *f)
{
    return f ? f->nstorages : 0;
}
const ckpt_storage *ckpt_storage_at(const ckpt_file *f, size_t i)
{
    return f && i < f->nstorages ? &f->storages[i].pub : NULL;
}
size_t ckpt_global_count(const ckpt_file *f)
{
    return f ? f->pk.nglobals : 0;
}
const ckpt_global_ref *ckpt_global_at(const ckpt_file *f, size_t i)
{
    return f && i < f->pk.nglobals ? &f->pk.globals[i] : NULL;
}
size_t ckpt_note_count(const ckpt_file *f)
{
    return f ? f->pk.nnotes : 0;
}
const char *ckpt_note_at(const ckpt_file *f, size_t i)
{
    return f && i < f->pk.nnotes ? f->pk.notes[i] : NULL;
}
const ckpt_storage *ckpt_value_storage(const ckpt_file *f, const ckpt_value *v)
{
    if (!f || !v || v->kind != CKPT_V_STORAGE || v->u.handle >= f->nstorages) return NULL;
    return &f->storages[v->u.handle].pub;
}
const ckpt_value *ckpt_root(const ckpt_file *f)
{
    return f ? f->sel : NULL;
}
const ckpt_tensor *ckpt_value_tensor(const ckpt_file *f, const ckpt_value *v)
{
    if (!f || !v || v->kind != CKPT_V_TENSOR) return NULL;
    const ck_tdef *t = ck_tdef_of(v);
    if (t->listed) return ckpt_tensor_at(f, t->listed - 1);
    return t->kind ? t->kind->desc : NULL;
}

/* ---- reads -------------------------------------------------------------- */

static int is_native_order(const ckpt_file *f)
{
    const uint16_t one = 1;
    int little = *(const uint8_t *)&one == 1;
    return (f->byteorder == CKPT_LITTLE) == (little != 0);
}

static void swap_units(uint8_t *p, size_t n, size_t unit)
{
    if (unit <= 1) return;
    for (size_t i = 0; i + unit <= n; i += unit)
        for (size_t a = 0, b = unit - 1; a < b; a++, b--) {
            uint8_t t = p[i + a];
            p[i + a] = p[i + b];
            p[i + b] = t;
        }
}

/* Copy elements [e0, e1) of the tensor's row-major image into out. */
/* An odometer over the outer dims 0..k-1 of a view (gather()): the index of
 * outer block `outer`, the storage element (from storage_offset) it starts
 * at, and the next block. */
static void odo_start(const ckpt_tensor *t, uint32_t k, uint64_t outer, uint64_t *idx)
{
    for (uint32_t i = k; i-- > 0;) {
        idx[i] = outer % (uint64_t)t->shape[i];
        outer /= (uint64_t)t->shape[i];
    }
}

static uint64_t odo_off(const ckpt_tensor *t, uint32_t k, const uint64_t *idx)
{
    uint64_t off = 0;
    for (uint32_t i = 0; i < k; i++) off += idx[i] * (uint64_t)t->stride[i];
    return off;
}

static void odo_next(const ckpt_tensor *t, uint32_t k, uint64_t *idx)
{
    for (uint32_t i = k; i-- > 0;) {
        if (++idx[i] < (uint64_t)t->shape[i]) break;
        idx[i] = 0;
    }
}

/* Blocks of a strided tensor's span read by gather_blocks(). */
#define GATHER_BLOCK ((uint64_t)8 << 20)

/* gather() for elements [e0, e1) of a view whose innermost contiguous run is
 * `run` elements over dims k..ndim-1 and whose storage span is `span` bytes:
 * the span is read once, in blocks of GATHER_BLOCK bytes, and for each block
 * the runs are walked again and the part of each run inside it copied. */
static int gather_blocks(const ckpt_file *f, const ckpt_tensor *t, uint64_t e0, uint64_t e1,
                         uint8_t *out, uint32_t k, uint64_t run, uint64_t span, ckpt_error *err)
{
    const ck_storage *s = &f->storages[t->storage];
    size_t es = ck_dtype_size(t->dtype);
    uint64_t bel = GATHER_BLOCK / es, span_el = span / es; /* in elements */
    uint8_t *blk = malloc((size_t)(bel * es));
    if (!blk) return ck_fail(err, CKPT_E_NOMEM, -1, "out of memory reading a strided tensor");
    for (uint64_t blo = 0; blo < span_el; blo += bel) {
        uint64_t bhi = span_el - blo < bel ? span_el : blo + bel;
        if (ck_storage_read(f, s, ((uint64_t)t->storage_offset + blo) * es, blk,
                            (size_t)((bhi - blo) * es), err)) {
            free(blk);
            return -1;
        }
        uint64_t idx[64];
        uint64_t within = e0 % run;
        odo_start(t, k, e0 / run, idx);
        for (uint64_t e = e0; e < e1;) {
            uint64_t off = odo_off(t, k, idx);
            uint64_t take = run - within;
            if (take > e1 - e) take = e1 - e;
            uint64_t a = off + within, b = a + take; /* source, from storage_offset */
            if (a < blo) a = blo;
            if (b > bhi) b = bhi;
            if (a < b)
                memcpy(out + (e - e0 + (a - off - within)) * es, blk + (a - blo) * es,
                       (size_t)((b - a) * es));
            e += take;
            within = 0;
            odo_next(t, k, idx);
        }
    }
    free(blk);
    return 0;
}

static int gather(const ckpt_file *f, const ckpt_tensor *t, uint64_t e0, uint64_t e1, uint8_t *out,
                  ckpt_error *err)
{
    const ck_storage *s = &f->storages[t->storage];
    size_t es = ck_dtype_size(t->dtype);
    if (e0 >= e1) return 0;
    if (t->contiguous)
        return ck_storage_read(f, s, ((uint64_t)t->storage_offset + e0) * es, out,
                               (size_t)((e1 - e0) * es), err);
    /* innermost contiguous run: dims k..ndim-1 */
    uint32_t k = t->ndim;
    uint64_t run = 1;
    while (k > 0 && (t->shape[k - 1] == 1 || (uint64_t)t->stride[k - 1] == run)) {
        run *= (uint64_t)t->shape[k - 1];
        k--;
    }
    /* span of storage elements touched, to read once when it is compact */
    uint64_t span_lo = (uint64_t)t->storage_offset, span_hi = span_lo;
    for (uint32_t i = 0; i < t->ndim; i++)
        span_hi += (uint64_t)(t->shape[i] - 1) * (uint64_t)t->stride[i];
    uint64_t span = (span_hi - span_lo + 1) * es;
    const uint8_t *base = NULL;
    uint8_t *tmp = NULL;
    const ck_storage *rs = s;
    uint64_t roff = 0;
    while (rs->root >= 0) {
        roff += rs->view_off;
        rs = &f->storages[rs->root];
    }
    bool stored = !rs->packed;
    if (f->src.map && stored) {
        base = f->src.map + ck_storage_data_off(rs) + roff + span_lo * es;
    } else if (span <= (e1 - e0) * es * 4 + ((uint64_t)1 << 20) || !stored) {
        if (span > SIZE_MAX || !(tmp = malloc((size_t)span)))
            return ck_fail(err, CKPT_E_NOMEM, -1, "out of memory reading a strided tensor");
        if (ck_storage_read(f, s, span_lo * es, tmp, (size_t)span, err)) {
            free(tmp);
            return -1;
        }
        base = tmp;
    } else if (span / GATHER_BLOCK <= 256 && span / ((e1 - e0) / run + 1) <= 4096) {
        /* A wide span with many short runs (a slice of a transposed matrix
         * read through a small buffer): one pass over the span in blocks
         * costs less than one pread per run. */
        return gather_blocks(f, t, e0, e1, out, k, run, span, err);
    }
    /* odometer over dims 0..k-1 starting at outer block e0 / run */
    uint64_t idx[64];
    uint64_t within = e0 % run;
    odo_start(t, k, e0 / run, idx);
    uint64_t e = e0;
    int rc = 0;
    while (e < e1) {
        uint64_t off = odo_off(t, k, idx);
        uint64_t take = run - within;
        if (take > e1 - e) take = e1 - e;
        uint64_t src_el = off + within; /* relative to storage_offset */
        size_t nb = (size_t)(take * es);
        if (base) {
            memcpy(out, base + src_el * es, nb);
        } else if ((rc = ck_storage_read(f, s, ((uint64_t)t->storage_offset + src_el) * es, out, nb,
                                         err))) {
            break;
        }
        out += nb;
        e += take;
        within = 0;
        odo_next(t, k, idx);
    }
    free(tmp);
    return rc;
}

/* max_tensor_bytes applies when a tensor's bytes are read, not when the file
 * is opened: a file with one huge tensor still lists. */
static int size_ok(const ckpt_file *f, const ckpt_tensor *t, ckpt_error *err)
{
    uint64_t lim = f->opt.max_tensor_bytes;
    if (t->nbytes <= lim) return 0;
    int sh = lim && lim % (1ull << 30) == 0   ? 30
             : lim && lim % (1ull << 20) == 0 ? 20
             : lim && lim % 1024 == 0         ? 10
                                              : 0;
    return ck_fail(err, CKPT_E_LIMIT, -1,
                   "tensor '%s' of %llu bytes exceeds the tensor size limit of %llu %s "
                   "(max_tensor_bytes)",
                   t->name ? t->name : "(unnamed)", (unsigned long long)t->nbytes,
                   (unsigned long long)(lim >> sh),
                   sh == 30   ? "GiB"
                   : sh == 20 ? "MiB"
                   : sh == 10 ? "KiB"
                              : "bytes");
}

/* A tensor held in the pickle itself (a numpy array): bytes [start,
 * start+n) of its row-major native-order image, element by element. */
static int mem_read(const ckpt_file *f, const ckpt_tensor *t, uint64_t start, uint8_t *out,
                    size_t n, ckpt_error *err)
{
    /* a listed tensor (the library's descriptor or a caller's copy) is
     * known by its name, which points into the file's own memory */
    size_t idx = listed_index(f, t);
    const ck_tdef *d = NULL;
    if (idx < f->ntensors) d = held_find(&f->held, idx);
    if (!d || !d->kind || !d->kind->bytes)
        return ck_fail(err, CKPT_E_ARG, -1, "tensor '%s' has no data",
                       t->name ? t->name : "(unnamed)");
    size_t es = ck_dtype_size(t->dtype);
    const uint16_t one = 1;
    bool swap = d->kind->big_endian != (*(const uint8_t *)&one == 0);
    size_t unit = ck_dtype_swap_unit(t->dtype);
    uint64_t end = start + n;
    for (uint64_t e = start / es; e * es < end; e++) {
        uint64_t rem = e, off = (uint64_t)t->storage_offset;
        for (uint32_t i = t->ndim; i-- > 0;) {
            uint64_t dim = (uint64_t)t->shape[i];
            off += (rem % dim) * (uint64_t)t->stride[i];
            rem /= dim;
        }
        uint8_t el[16];
        memcpy(el, d->kind->bytes + off * es, es);
        if (swap) swap_units(el, es, unit);
        uint64_t lo = e * es < start ? start - e * es : 0;
        uint64_t hi = (e + 1) * es > end ? end - e * es : es;
        memcpy(out + (e * es + lo - start), el + lo, (size_t)(hi - lo));
    }
    return 0;
}

/* A tensor listed but not readable (meta, nested, a sparse tensor as a
 * whole, ...): only its read fails. */
static int readable_ok(const ckpt_tensor *t, ckpt_error *err)
{
    if (t->readable) return 0;
    return ck_fail(err, CKPT_E_UNSUPPORTED, -1, "tensor '%s' cannot be read: %s",
                   t->name ? t->name : "(unnamed)", t->unreadable ? t->unreadable : "no data");
}

int ckpt_tensor_read_range(const ckpt_file *f, const ckpt_tensor *t, uint64_t start, void *buf,
                           size_t n, ckpt_error *err)
{
    if (!f || !t || (!buf && n)) return ck_fail(err, CKPT_E_ARG, -1, "null argument");
    CK_TRY(readable_ok(t, err));
    CK_TRY(size_ok(f, t, err)); /* also for n == 0: a check that reads nothing */
    if (start > t->nbytes || n > t->nbytes - start)
        return ck_fail(err, CKPT_E_ARG, -1,
                       "range [%llu, +%zu) is outside tensor '%s' of %llu bytes",
                       (unsigned long long)start, n, t->name ? t->name : "(unnamed)",
                       (unsigned long long)t->nbytes);
    if (n == 0) return 0;
    if (t->storage == CK_NO_STORAGE) return mem_read(f, t, start, buf, n, err);
    size_t es = ck_dtype_size(t->dtype);
    uint64_t e0 = start / es, e1 = (start + n + es - 1) / es;
    uint8_t *out = buf;
    if (start % es == 0 && n % es == 0) {
        CK_TRY(gather(f, t, e0, e1, out, err));
        if (!is_native_order(f)) swap_units(out, n, ck_dtype_swap_unit(t->dtype));
        ck_dtype_resolve(t->dtype, t->conj, t->neg, out, n);
        return 0;
    }
    size_t span = (size_t)((e1 - e0) * es);
    uint8_t *tmp = malloc(span);
    if (!tmp) return ck_fail(err, CKPT_E_NOMEM, -1, "out of memory");
    if (gather(f, t, e0, e1, tmp, err)) {
        free(tmp);
        return -1;
    }
    if (!is_native_order(f)) swap_units(tmp, span, ck_dtype_swap_unit(t->dtype));
    ck_dtype_resolve(t->dtype, t->conj, t->neg, tmp, span);
    memcpy(out, tmp + (start - e0 * es), n);
    free(tmp);
    return 0;
}

int ckpt_tensor_read(const ckpt_file *f, const ckpt_tensor *t, void *buf, size_t bufsize,
                     ckpt_error *err)
{
    if (!f || !t) return ck_fail(err, CKPT_E_ARG, -1, "null argument");
    CK_TRY(readable_ok(t, err));
    CK_TRY(size_ok(f, t, err));
    if (bufsize < t->nbytes)
        return ck_fail(err, CKPT_E_ARG, -1,
                       "buffer of %zu bytes is too small for tensor '%s' (%llu bytes)", bufsize,
                       t->name ? t->name : "(unnamed)", (unsigned long long)t->nbytes);
    return ckpt_tensor_read_range(f, t, 0, buf, (size_t)t->nbytes, err);
}

const void *ckpt_tensor_data(const ckpt_file *f, const ckpt_tensor *t, ckpt_error *err)
{
    if (!f || !t) {
        ck_fail(err, CKPT_E_ARG, -1, "null argument");
        return NULL;
    }
    if (readable_ok(t, err) || size_ok(f, t, err)) return NULL;
    if (t->storage == CK_NO_STORAGE) {
        ck_fail(err, CKPT_E_NOTMAPPABLE, -1, "tensor '%s' is held in the pickle",
                t->name ? t->name : "(unnamed)");
        return NULL;
    }
    if (!f->src.map) {
        ck_fail(err, CKPT_E_NOTMAPPABLE, -1, "the file is not mapped (open with use_mmap)");
        return NULL;
    }
    if (!t->contiguous) {
        ck_fail(err, CKPT_E_NOTMAPPABLE, -1, "tensor '%s' is not contiguous",
                t->name ? t->name : "(unnamed)");
        return NULL;
    }
    if (t->conj || t->neg) {
        ck_fail(err, CKPT_E_NOTMAPPABLE, -1, "tensor '%s' is stored with torch's %s bit",
                t->name ? t->name : "(unnamed)", t->conj ? "conj" : "neg");
        return NULL;
    }
    if (t->file_offset < 0) {
        ck_fail(err, CKPT_E_NOTMAPPABLE, -1, "tensor '%s' is stored compressed",
                t->name ? t->name : "(unnamed)");
        return NULL;
    }
    if (!is_native_order(f) && ck_dtype_swap_unit(t->dtype) > 1) {
        ck_fail(err, CKPT_E_NOTMAPPABLE, -1, "tensor '%s' is stored in the other byte order",
                t->name ? t->name : "(unnamed)");
        return NULL;
    }
    return f->src.map + t->file_offset;
}
