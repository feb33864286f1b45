/*
 * walk.c - tools (on the public API only): ckpt_value_walk(), the one walk
 * of the value tree; see ckpt_walk.h.
 *
 * Recursive (each level costs one small frame; max_depth is at most 2048),
 * with an open-addressing set of the containers and tensors visited.
 */
#define CKPT_BUILDING 1 /* export the CKPT_API functions */
#include "ckpt_walk.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define WALK_DEPTH_CAP 2048u

typedef struct walker {
    const ckpt_file *f;
    const ckpt_walk_callbacks *cb;
    void *ctx;
    ckpt_walk_options opt;
    ckpt_error *err;
    const void **vals; /* containers and tensors visited, by id */
    size_t nvals, capvals;
    size_t *slots; /* open addressing: id + 1 of a value, or 0 */
    size_t nslots;
    uint64_t visits;
} walker;

static int fail(walker *w, ckpt_code code, const char *msg)
{
    if (w->err) {
        w->err->code = code;
        w->err->offset = -1;
        snprintf(w->err->message, sizeof w->err->message, "%s", msg);
    }
    return -1;
}

static size_t hash_ptr(const void *p)
{
    uint64_t x = (uint64_t)(uintptr_t)p;
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdULL;
    x ^= x >> 33;
    return (size_t)x;
}

static int grow(walker *w)
{
    size_t n = w->nslots ? w->nslots * 2 : 256, i, j, mask = n - 1;
    size_t *slots;
    if (n > ((size_t)-1) / sizeof *slots / 2)
        return fail(w, CKPT_E_NOMEM, "out of memory walking the values");
    slots = calloc(n, sizeof *slots);
    if (!slots) return fail(w, CKPT_E_NOMEM, "out of memory walking the values");
    for (j = 0; j < w->nvals; j++) {
        for (i = hash_ptr(w->vals[j]) & mask; slots[i]; i = (i + 1) & mask)
            ;
        slots[i] = j + 1;
    }
    free(w->slots);
    w->slots = slots;
    w->nslots = n;
    return 0;
}

/* v's id into *id: 1 if v was visited before, 0 if it is new, -1 out of
 * memory. */
static int seen_add(walker *w, const void *v, size_t *id)
{
    size_t i, mask;
    if ((w->nvals + 1) * 2 > w->nslots && grow(w) != 0) return -1;
    mask = w->nslots - 1;
    for (i = hash_ptr(v) & mask; w->slots[i]; i = (i + 1) & mask)
        if (w->vals[w->slots[i] - 1] == v) {
            *id = w->slots[i] - 1;
            return 1;
        }
    if (w->nvals == w->capvals) {
        size_t cap = w->capvals ? w->capvals * 2 : 256;
        const void **p;
        if (cap > ((size_t)-1) / sizeof *p)
            return fail(w, CKPT_E_NOMEM, "out of memory walking the values");
        p = realloc(w->vals, cap * sizeof *p);
        if (!p) return fail(w, CKPT_E_NOMEM, "out of memory walking the values");
        w->vals = p;
        w->capvals = cap;
    }
    *id = w->nvals;
    w->vals[w->nvals++] = v;
    w->slots[i] = w->nvals;
    return 0;
}

static int is_container(ckpt_kind k)
{
    return k == CKPT_V_LIST || k == CKPT_V_TUPLE || k == CKPT_V_SET || k == CKPT_V_DICT ||
           k == CKPT_V_OBJECT;
}

static int visit(walker *w, ckpt_walk_step *st);

static int child(walker *w, const ckpt_walk_step *parent, const ckpt_value *v,
                 const ckpt_value *key, size_t index)
{
    ckpt_walk_step st;
    st.value = v;
    st.parent = parent;
    st.key = key;
    st.index = index;
    st.depth = parent->depth + 1;
    st.shared = 0;
    st.too_deep = 0;
    st.id = CKPT_WALK_NO_ID;
    return visit(w, &st);
}

static int visit(walker *w, ckpt_walk_step *st)
{
    ckpt_kind k = st->value ? ckpt_value_kind(st->value) : CKPT_V_NONE;
    int r, container = st->value && is_container(k);
    size_t i, n;

    if (w->opt.max_visits && ++w->visits > w->opt.max_visits)
        return fail(w, CKPT_E_LIMIT, "more values than the walk may visit (max_visits)");
    if (container || k == CKPT_V_TENSOR) {
        r = seen_add(w, st->value, &st->id);
        if (r < 0) return -1;
        st->shared = r;
    }
    if (container && !st->shared && st->depth >= w->opt.max_depth) {
        if (!w->opt.skip_deep) {
            char msg[64];
            snprintf(msg, sizeof msg, "nesting deeper than %u", (unsigned)w->opt.max_depth);
            return fail(w, CKPT_E_LIMIT, msg);
        }
        st->too_deep = 1;
    }
    r = w->cb->enter ? w->cb->enter(w->ctx, st) : 0;
    if (r < 0) return r;
    if (!container || st->shared || st->too_deep || r == CKPT_WALK_SKIP) return 0;
    if (k == CKPT_V_OBJECT) {
        const ckpt_value *parts[4];
        parts[CKPT_WALK_ARGS] = ckpt_object_args(st->value);
        parts[CKPT_WALK_STATE] = ckpt_object_state(st->value);
        parts[CKPT_WALK_ITEMS] = ckpt_object_items(st->value);
        parts[CKPT_WALK_LIST] = ckpt_object_list(st->value);
        for (i = 0; i < 4; i++)
            if (parts[i] && (r = child(w, st, parts[i], NULL, i)) != 0) return r;
    } else {
        n = ckpt_value_len(st->value);
        for (i = 0; i < n; i++) {
            const ckpt_value *key = k == CKPT_V_DICT ? ckpt_value_key(st->value, i) : NULL;
            if ((r = child(w, st, ckpt_value_item(st->value, i), key, i)) != 0) return r;
        }
    }
    r = w->cb->leave ? w->cb->leave(w->ctx, st) : 0;
    return r < 0 ? r : 0;
}

CKPT_API void ckpt_walk_options_init_sized(ckpt_walk_options *opt, size_t struct_size)
{
    ckpt_walk_options d;
    if (!opt || struct_size == 0) return;
    memset(&d, 0, sizeof d);
    d.struct_size = struct_size;
    d.max_depth = CKPT_DEFAULT_MAX_DEPTH;
    memcpy(opt, &d, struct_size < sizeof d ? struct_size : sizeof d);
}

CKPT_API int ckpt_value_walk(const ckpt_file *f, const ckpt_value *root,
                             const ckpt_walk_callbacks *cb, void *ctx, const ckpt_walk_options *opt,
                             ckpt_error *err)
{
    walker w;
    ckpt_walk_step st;
    int r;

    memset(&w, 0, sizeof w);
    w.f = f;
    w.cb = cb;
    w.ctx = ctx;
    w.err = err;
    if (err) {
        err->code = CKPT_OK;
        err->offset = -1;
        err->message[0] = '\0';
    }
    ckpt_walk_options_init(&w.opt);
    if (opt) {
        if (opt->struct_size == 0)
            return fail(&w, CKPT_E_ARG,
                        "ckpt_value_walk: options not initialised "
                        "(use ckpt_walk_options_init)");
        memcpy(&w.opt, opt, opt->struct_size < sizeof w.opt ? opt->struct_size : sizeof w.opt);
        w.opt.struct_size = sizeof w.opt;
    }
    if (!f || !cb) return fail(&w, CKPT_E_ARG, "ckpt_value_walk: NULL file or callbacks");
    if (w.opt.max_depth > WALK_DEPTH_CAP)
        return fail(&w, CKPT_E_ARG, "ckpt_value_walk: max_depth above 2048");
    memset(&st, 0, sizeof st);
    st.value = root ? root : ckpt_root(f);
    st.id = CKPT_WALK_NO_ID;
    r = visit(&w, &st);
    free(w.slots);
    free(w.vals);
    return r;
}
