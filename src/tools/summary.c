/*
 * summary.c - tools (on the public API only): ckpt_summarize(), the counts
 * behind `ckpt info`; see ckpt_summary.h.
 *
 * Tensors are taken in file order (ckpt_tensor_at), so the dtype rows and
 * the module tree come out the same whatever the value tree's shape; the
 * value walk (ckpt_walk.h) only decides which tensors lie under a value.
 */
#define CKPT_BUILDING 1 /* export the CKPT_API functions */
#include "ckpt_summary.h"
#include "ckpt_walk.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NONE CKPT_SUMMARY_NONE

/* Key rows together may visit at most this many values, plus this many per
 * byte of the file: each key is walked on its own (a tensor shared by two
 * keys counts in both), so a hostile file with many keys over one big
 * shared value would otherwise cost keys x values. */
#define KEY_VISITS_BASE CKPT_DEFAULT_MAX_EXPANSION
#define KEY_VISITS_PER_BYTE 16u

/* A module while the tree grows: children linked in first-seen order. */
typedef struct tnode {
    const char *name, *path;
    size_t name_len, path_len;
    size_t parent, first, last, next;
    uint32_t depth;
    uint64_t tensors, elements;
} tnode;

struct ckpt_summary {
    ckpt_summary_totals totals;
    ckpt_summary_dtype *dtypes;
    size_t ndtypes;
    ckpt_summary_key *keys;
    size_t nkeys;
    ckpt_summary_module *modules;
    size_t nmodules;
};

typedef struct builder {
    const ckpt_file *f;
    ckpt_summary *s;
    ckpt_error *err;
    tnode *nodes;
    size_t n, cap, top_first, top_last;
    size_t *slots; /* (parent, name) -> node index + 1; a power of two */
    size_t nslots;
} builder;

static int fail(ckpt_error *err, ckpt_code code, const char *msg)
{
    if (err) {
        err->code = code;
        err->offset = -1;
        snprintf(err->message, sizeof err->message, "%s", msg);
    }
    return -1;
}

static int oom(ckpt_error *err)
{
    return fail(err, CKPT_E_NOMEM, "out of memory summarising the file");
}

static uint64_t add_sat(uint64_t a, uint64_t b)
{
    return a > UINT64_MAX - b ? UINT64_MAX : a + b;
}

/* ------------------------------------------------------------------------ */
/* Counting listed tensors under a value                                      */
/* ------------------------------------------------------------------------ */

typedef struct counter {
    const ckpt_file *f;
    uint64_t tensors, elements, visits;
    const ckpt_tensor **list; /* collected, when collecting */
    size_t n, cap;
    int collect;
} counter;

static int count_enter(void *ctx, const ckpt_walk_step *st)
{
    counter *c = ctx;
    const ckpt_tensor *t;
    c->visits++;
    if (st->shared || !st->value || ckpt_value_kind(st->value) != CKPT_V_TENSOR) return 0;
    t = ckpt_value_tensor(c->f, st->value);
    if (!t || !t->name) /* listed tensors only */
        return 0;
    c->tensors++;
    c->elements = add_sat(c->elements, t->numel);
    if (c->collect) {
        if (c->n == c->cap) {
            size_t cap = c->cap ? c->cap * 2 : 64;
            const ckpt_tensor **p = realloc(c->list, cap * sizeof *p);
            if (!p) return -2;
            c->list = p;
            c->cap = cap;
        }
        c->list[c->n++] = t;
    }
    return 0;
}

/* Walk v counting listed tensors; values deeper than the default depth
 * limit are not counted (as `ckpt info` always did). */
static int count_under(counter *c, const ckpt_value *v, uint64_t max_visits, ckpt_error *err)
{
    ckpt_walk_callbacks cb = {count_enter, NULL};
    ckpt_walk_options opt;
    int r;
    ckpt_walk_options_init(&opt);
    opt.skip_deep = 1;
    opt.max_visits = max_visits;
    r = ckpt_value_walk(c->f, v, &cb, c, &opt, err);
    if (r == -2) return oom(err);
    return r == 0 ? 0 : -1;
}

CKPT_API int ckpt_count_tensors(const ckpt_file *f, const ckpt_value *v, uint64_t *tensors,
                                uint64_t *elements, ckpt_error *err)
{
    counter c;
    memset(&c, 0, sizeof c);
    c.f = f;
    if (tensors) *tensors = 0;
    if (elements) *elements = 0;
    if (!f || !v) return fail(err, CKPT_E_ARG, "ckpt_count_tensors: NULL file or value");
    if (ckpt_value_kind(v) == CKPT_V_TENSOR) {
        const ckpt_tensor *t = ckpt_value_tensor(f, v);
        if (t) {
            c.tensors = 1;
            c.elements = t->numel;
        }
    } else if (count_under(&c, v, 0, err) != 0) {
        return -1;
    }
    if (tensors) *tensors = c.tensors;
    if (elements) *elements = c.elements;
    return 0;
}

/* ------------------------------------------------------------------------ */
/* The module tree                                                            */
/* ------------------------------------------------------------------------ */

static size_t hash_key(size_t parent, const char *s, size_t n)
{
    uint64_t h = 1469598103934665603ULL ^ (uint64_t)parent;
    size_t i;
    for (i = 0; i < n; i++) {
        h ^= (unsigned char)s[i];
        h *= 1099511628211ULL;
    }
    return (size_t)(h ^ (h >> 29));
}

static int rehash(builder *b)
{
    size_t ns = b->nslots ? b->nslots * 2 : 1024, i, h;
    size_t *slots;
    if (ns > ((size_t)-1) / sizeof *slots / 2) return -1;
    slots = calloc(ns, sizeof *slots);
    if (!slots) return -1;
    for (i = 0; i < b->n; i++) {
        const tnode *nd = &b->nodes[i];
        for (h = hash_key(nd->parent, nd->name, nd->name_len) & (ns - 1); slots[h];
             h = (h + 1) & (ns - 1))
            ;
        slots[h] = i + 1;
    }
    free(b->slots);
    b->slots = slots;
    b->nslots = ns;
    return 0;
}

/* The child name[0..len) of parent (path: base[0..path_len)), created when
 * missing; NONE when out of memory. */
static size_t tree_child(builder *b, size_t parent, const char *base, size_t start, size_t len)
{
    const char *name = base + start;
    size_t h, idx;
    tnode *nd;
    if ((b->n + 1) * 2 > b->nslots && rehash(b) != 0) return NONE;
    for (h = hash_key(parent, name, len) & (b->nslots - 1); b->slots[h];
         h = (h + 1) & (b->nslots - 1)) {
        nd = &b->nodes[b->slots[h] - 1];
        if (nd->parent == parent && nd->name_len == len && memcmp(nd->name, name, len) == 0)
            return b->slots[h] - 1;
    }
    if (b->n == b->cap) {
        size_t cap = b->cap ? b->cap * 2 : 256;
        tnode *p;
        if (cap > ((size_t)-1) / sizeof *p) return NONE;
        p = realloc(b->nodes, cap * sizeof *p);
        if (!p) return NONE;
        b->nodes = p;
        b->cap = cap;
    }
    idx = b->n++;
    nd = &b->nodes[idx];
    memset(nd, 0, sizeof *nd);
    nd->name = name;
    nd->name_len = len;
    nd->path = base;
    nd->path_len = start + len;
    nd->parent = parent;
    nd->first = nd->last = nd->next = NONE;
    nd->depth = parent == NONE ? 0 : b->nodes[parent].depth + 1;
    b->slots[h] = idx + 1;
    if (parent == NONE) {
        if (b->top_last == NONE)
            b->top_first = idx;
        else
            b->nodes[b->top_last].next = idx;
        b->top_last = idx;
    } else {
        tnode *p = &b->nodes[parent];
        if (p->last == NONE)
            p->first = idx;
        else
            b->nodes[p->last].next = idx;
        p->last = idx;
    }
    return idx;
}

/* Count a tensor in every module prefix of its name name[0..n) ("a.b.weight":
 * a, a.b; a name may hold NUL bytes). */
static int tree_add(builder *b, const char *name, size_t n, uint64_t numel)
{
    size_t parent = NONE, start = 0;
    const char *dot;
    while ((dot = memchr(name + start, '.', n - start)) != NULL) {
        size_t len = (size_t)(dot - (name + start));
        size_t idx = tree_child(b, parent, name, start, len);
        if (idx == NONE) return -1;
        b->nodes[idx].elements = add_sat(b->nodes[idx].elements, numel);
        b->nodes[idx].tensors++;
        parent = idx;
        start += len + 1;
    }
    return 0;
}

/* The nodes in display order (depth first, first-seen order) into s. */
static int tree_finish(builder *b)
{
    ckpt_summary *s = b->s;
    size_t *order, i, n = 0, cur = b->top_first;
    if (b->n == 0) return 0;
    order = malloc(b->n * sizeof *order); /* old index -> new index */
    s->modules = calloc(b->n, sizeof *s->modules);
    if (!order || !s->modules) {
        free(order);
        return -1;
    }
    while (cur != NONE) { /* preorder without a stack */
        order[cur] = n++;
        if (b->nodes[cur].first != NONE) {
            cur = b->nodes[cur].first;
            continue;
        }
        while (cur != NONE && b->nodes[cur].next == NONE) cur = b->nodes[cur].parent;
        if (cur != NONE) cur = b->nodes[cur].next;
    }
    for (i = 0; i < b->n; i++) {
        const tnode *nd = &b->nodes[i];
        ckpt_summary_module *m = &s->modules[order[i]];
        m->name = nd->name;
        m->name_len = nd->name_len;
        m->path = nd->path;
        m->path_len = nd->path_len;
        m->parent = nd->parent == NONE ? NONE : order[nd->parent];
        m->first_child = nd->first == NONE ? NONE : order[nd->first];
        m->next_sibling = nd->next == NONE ? NONE : order[nd->next];
        m->depth = nd->depth;
        m->tensors = nd->tensors;
        m->elements = nd->elements;
    }
    s->nmodules = b->n;
    free(order);
    return 0;
}

/* ------------------------------------------------------------------------ */
/* The summary                                                                */
/* ------------------------------------------------------------------------ */

static int add_dtype(ckpt_summary *s, const ckpt_tensor *t)
{
    size_t i;
    ckpt_summary_dtype *row = NULL;
    for (i = 0; i < s->ndtypes; i++)
        if (s->dtypes[i].dtype == t->dtype) row = &s->dtypes[i];
    if (!row) {
        ckpt_summary_dtype *p = realloc(s->dtypes, (s->ndtypes + 1) * sizeof *p);
        if (!p) return -1;
        s->dtypes = p;
        /* keep rows in increasing dtype number */
        for (i = s->ndtypes; i > 0 && (unsigned)p[i - 1].dtype > (unsigned)t->dtype; i--)
            p[i] = p[i - 1];
        row = &p[i];
        memset(row, 0, sizeof *row);
        row->dtype = t->dtype;
        s->ndtypes++;
    }
    row->tensors++;
    row->elements = add_sat(row->elements, t->numel);
    row->bytes = add_sat(row->bytes, t->nbytes);
    return 0;
}

static int cmp_ptr(const void *a, const void *b)
{
    uintptr_t x = (uintptr_t) * (const void *const *)a;
    uintptr_t y = (uintptr_t) * (const void *const *)b;
    return x < y ? -1 : x > y;
}

static int in_sorted(const ckpt_tensor *const *list, size_t n, const ckpt_tensor *t)
{
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if ((uintptr_t)list[mid] == (uintptr_t)t) return 1;
        if ((uintptr_t)list[mid] < (uintptr_t)t)
            lo = mid + 1;
        else
            hi = mid;
    }
    return 0;
}

/* t's name relative to root's path: its first *n bytes move on. */
static const char *relative_name(const char *name, size_t *n, const char *prefix, size_t len)
{
    if (!prefix || *n < len || memcmp(name, prefix, len) != 0) return name;
    if (*n == len) {
        *n = 0;
        return name + len;
    }
    if (name[len] == '.') {
        *n -= len + 1;
        return name + len + 1;
    }
    return name;
}

/* Tensors, dtypes, storages and modules; with `filter`, only the tensors
 * in under[0..nunder) (sorted); with `filter` or `used_only`, only the
 * storages they view. */
static int gather(builder *b, int filter, int used_only, const ckpt_tensor *const *under,
                  size_t nunder, const char *prefix)
{
    ckpt_summary *s = b->s;
    size_t i, n = ckpt_tensor_count(b->f), ns = ckpt_storage_count(b->f);
    size_t plen = prefix ? strlen(prefix) : 0;
    unsigned char *used = NULL;
    if (filter || used_only) {
        used = calloc(ns ? ns : 1, 1);
        if (!used) return oom(b->err);
    }
    for (i = 0; i < n; i++) {
        /* unfiltered, a copy each (the name is the file's): the descriptors
         * ckpt_tensor_at() builds are kept, 192 bytes a tensor */
        ckpt_tensor one;
        ckpt_error scratch;
        const ckpt_tensor *t;
        if (filter)
            t = ckpt_tensor_at(b->f, i);
        else
            t = ckpt_tensor_get(b->f, i, &one, &scratch) == 0 ? &one : NULL;
        if (!t || (filter && !in_sorted(under, nunder, t))) continue;
        size_t nl = t->name ? t->name_len : 0;
        const char *name = relative_name(t->name ? t->name : "", &nl, prefix, plen);
        if (add_dtype(s, t) != 0 || tree_add(b, name, nl, t->numel) != 0) {
            free(used);
            return oom(b->err);
        }
        s->totals.tensors++;
        s->totals.elements = add_sat(s->totals.elements, t->numel);
        s->totals.bytes = add_sat(s->totals.bytes, t->nbytes);
        if (used && t->storage < ns) used[t->storage] = 1;
    }
    for (i = 0; i < ns; i++) {
        const ckpt_storage *st = ckpt_storage_at(b->f, i);
        if (!st || (used && !used[i])) continue;
        s->totals.storages++;
        s->totals.storage_bytes = add_sat(s->totals.storage_bytes, st->nbytes);
    }
    free(used);
    return 0;
}

static int key_row(builder *b, ckpt_summary_key *row, uint64_t *budget)
{
    const ckpt_value *v = row->value;
    ckpt_kind k = v ? ckpt_value_kind(v) : CKPT_V_NONE;
    counter c;
    if (k == CKPT_V_TENSOR) {
        const ckpt_tensor *t = ckpt_value_tensor(b->f, v);
        if (t) {
            row->tensors = 1;
            row->elements = t->numel;
        }
        return 0;
    }
    if (k != CKPT_V_LIST && k != CKPT_V_TUPLE && k != CKPT_V_SET && k != CKPT_V_DICT &&
        k != CKPT_V_OBJECT)
        return 0;
    memset(&c, 0, sizeof c);
    c.f = b->f;
    if (*budget == 0)
        return fail(b->err, CKPT_E_LIMIT,
                    "the top-level keys share more values "
                    "than a summary may visit");
    if (count_under(&c, v, *budget, b->err) != 0) {
        if (b->err && b->err->code == CKPT_E_LIMIT)
            fail(b->err, CKPT_E_LIMIT,
                 "the top-level keys share more values "
                 "than a summary may visit");
        return -1;
    }
    *budget -= *budget > c.visits ? c.visits : *budget;
    row->tensors = c.tensors;
    row->elements = c.elements;
    return 0;
}

static int keys(builder *b, const ckpt_value *root)
{
    ckpt_summary *s = b->s;
    ckpt_info info;
    uint64_t budget;
    size_t i, n;
    if (!root) return 0;
    ckpt_get_info(b->f, &info);
    budget = info.file_size > (UINT64_MAX - KEY_VISITS_BASE) / KEY_VISITS_PER_BYTE
                 ? UINT64_MAX
                 : KEY_VISITS_BASE + KEY_VISITS_PER_BYTE * info.file_size;
    n = ckpt_value_kind(root) == CKPT_V_DICT ? ckpt_value_len(root) : 1;
    s->keys = calloc(n ? n : 1, sizeof *s->keys);
    if (!s->keys) return oom(b->err);
    for (i = 0; i < n; i++) {
        ckpt_summary_key *row = &s->keys[i];
        if (ckpt_value_kind(root) == CKPT_V_DICT) {
            row->key = ckpt_value_key(root, i);
            row->value = ckpt_value_item(root, i);
        } else {
            row->value = root;
        }
        if (key_row(b, row, &budget) != 0) return -1;
        s->nkeys = i + 1;
    }
    return 0;
}

CKPT_API ckpt_summary *ckpt_summarize(const ckpt_file *f, const ckpt_value *root,
                                      const char *prefix, ckpt_error *err)
{
    builder b;
    counter under;
    int r = -1;

    if (err) {
        err->code = CKPT_OK;
        err->offset = -1;
        err->message[0] = '\0';
    }
    if (!f) {
        fail(err, CKPT_E_ARG, "ckpt_summarize: NULL file");
        return NULL;
    }
    memset(&b, 0, sizeof b);
    memset(&under, 0, sizeof under);
    b.f = f;
    b.err = err;
    b.top_first = b.top_last = NONE;
    b.s = calloc(1, sizeof *b.s);
    if (!b.s) {
        oom(err);
        return NULL;
    }
    int used_only = root != NULL;          /* a value: the storages its tensors view */
    if (root == ckpt_root(f)) root = NULL; /* every listed tensor is under it */
    if (root) { /* only the tensors under root */
        under.f = f;
        under.collect = 1;
        if (count_under(&under, root, 0, err) != 0) goto done;
        if (under.n > 1) qsort(under.list, under.n, sizeof *under.list, cmp_ptr);
    }
    if (gather(&b, root != NULL, used_only, under.list, under.n, root ? prefix : NULL) != 0)
        goto done;
    if (tree_finish(&b) != 0) {
        oom(err);
        goto done;
    }
    if (keys(&b, root ? root : ckpt_root(f)) != 0) goto done;
    r = 0;
done:
    free(under.list);
    free(b.nodes);
    free(b.slots);
    if (r != 0) {
        ckpt_summary_free(b.s);
        return NULL;
    }
    return b.s;
}

CKPT_API void ckpt_summary_free(ckpt_summary *s)
{
    if (!s) return;
    free(s->dtypes);
    free(s->keys);
    free(s->modules);
    free(s);
}

CKPT_API const ckpt_summary_totals *ckpt_summary_get_totals(const ckpt_summary *s)
{
    return s ? &s->totals : NULL;
}

CKPT_API size_t ckpt_summary_dtype_count(const ckpt_summary *s)
{
    return s ? s->ndtypes : 0;
}

CKPT_API const ckpt_summary_dtype *ckpt_summary_dtype_at(const ckpt_summary *s, size_t i)
{
    return s && i < s->ndtypes ? &s->dtypes[i] : NULL;
}

CKPT_API size_t ckpt_summary_key_count(const ckpt_summary *s)
{
    return s ? s->nkeys : 0;
}

CKPT_API const ckpt_summary_key *ckpt_summary_key_at(const ckpt_summary *s, size_t i)
{
    return s && i < s->nkeys ? &s->keys[i] : NULL;
}

CKPT_API size_t ckpt_summary_module_count(const ckpt_summary *s)
{
    return s ? s->nmodules : 0;
}

CKPT_API const ckpt_summary_module *ckpt_summary_module_at(const ckpt_summary *s, size_t i)
{
    return s && i < s->nmodules ? &s->modules[i] : NULL;
}
