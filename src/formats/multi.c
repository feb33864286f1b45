/*
 * multi.c - layer 4 (formats): checkpoints of several files read as one
 * (ckpt_open_path()).  A shard index (pytorch_model.bin.index.json,
 * model.safetensors.index.json: {"metadata": {"total_size"}, "weight_map":
 * {name: file}}), a folder holding one, a DCP folder (dcp.c), or a folder
 * holding a single checkpoint.  The composite is a ckpt_file (ops:
 * ck_format_multi) whose storages link to the storages of the part files,
 * or to chunks of DCP tensors; tensor reads go through the usual path and
 * land in multi_storage_read().  Every path an index names is checked to
 * stay inside the folder.
 */
#define _DEFAULT_SOURCE
#include "multi.h"
#include "json_in.h"

#include <dirent.h>
#include <stdarg.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define MULTI(f) ((ck_multi *)(f)->fmt_state)

static int oom(ckpt_error *err)
{
    return ck_fail(err, CKPT_E_NOMEM, -1, "out of memory");
}

void ck_err_prefix(ckpt_error *err, const char *fmt, ...)
{
    if (!err) return;
    char pre[200];
    va_list ap;
    va_start(ap, fmt);
    int k = vsnprintf(pre, sizeof pre - 2, fmt, ap);
    va_end(ap);
    size_t pl = k < 0 ? 0 : strlen(pre);
    memcpy(pre + pl, ": ", 3);
    pl += 2;
    char *msg = err->message;
    size_t ml = strnlen(msg, sizeof err->message - 1);
    if (pl + ml >= sizeof err->message) ml = sizeof err->message - 1 - pl;
    memmove(msg + pl, msg, ml);
    memcpy(msg, pre, pl);
    msg[pl + ml] = 0;
}

static void prefix_err(ckpt_error *err, const char *prefix)
{
    ck_err_prefix(err, "%s", prefix);
}

static const char *base_name(const char *p)
{
    const char *s = strrchr(p, '/');
    return s ? s + 1 : p;
}

int ck_format_tensor(ckpt_file *f, size_t storage, ckpt_dtype dtype, uint32_t ndim,
                     const int64_t *shape, int64_t pos, ckpt_value **out, ckpt_error *err)
{
    int64_t *sh = NULL, *st = NULL;
    if (ndim) {
        sh = ck_alloc(&f->arena, ndim * sizeof *sh);
        st = ck_alloc(&f->arena, ndim * sizeof *st);
        if (!sh || !st) return oom(err);
        memcpy(sh, shape, ndim * sizeof *sh);
        int64_t acc = 1;
        for (uint32_t i = ndim; i-- > 0;) {
            if (sh[i] < 0) return ck_fail(err, CKPT_E_FORMAT, pos, "negative tensor dimension");
            st[i] = acc;
            if (sh[i] && __builtin_mul_overflow(acc, sh[i], &acc))
                return ck_fail(err, CKPT_E_LIMIT, pos, "tensor element count overflows");
        }
    }
    ck_tdef *t;
    CK_TRY(ck_tensor_new(f, storage, dtype, ndim, sh, st, 0, pos, &t, err));
    ckpt_value *v = ck_new(&f->pk, CKPT_V_TENSOR);
    if (!v) return oom(err);
    v->u.ext = t;
    *out = v;
    return 0;
}

/* ---- parts ---------------------------------------------------------------- */

static int add_link(ckpt_file *f, ck_multi *m, size_t idx, ckpt_error *err)
{
    CK_TRY(ck_grow((void **)&m->links, &m->cap_links, idx + 1, sizeof *m->links, err));
    memset(&m->links[idx], 0, sizeof m->links[idx]);
    (void)f;
    return 0;
}

int ck_multi_part(ckpt_file *f, ck_multi *m, const char *rel, size_t rlen, const char *what,
                  size_t *part, ckpt_error *err)
{
    if (rlen == 0 || memchr(rel, 0, rlen))
        return ck_fail(err, CKPT_E_FORMAT, -1, "%s names an empty file name", what);
    if (rel[0] == '/')
        return ck_fail(err, CKPT_E_FORMAT, -1, "%s names '%.*s', an absolute path", what,
                       (int)(rlen > 80 ? 80 : rlen), rel);
    for (size_t i = 0; i < rlen;) {
        size_t j = i;
        while (j < rlen && rel[j] != '/') j++;
        if (j - i == 2 && rel[i] == '.' && rel[i + 1] == '.')
            return ck_fail(err, CKPT_E_FORMAT, -1,
                           "%s names '%.*s', which leaves the folder ('..')", what,
                           (int)(rlen > 80 ? 80 : rlen), rel);
        /* one spelling per file: "a//b", "./a" and "a/" would name a part
         * twice and multiply what its records may hold */
        if (j == i || (j - i == 1 && rel[i] == '.'))
            return ck_fail(err, CKPT_E_FORMAT, -1,
                           "%s names '%.*s', not a plain relative path (an empty or '.' "
                           "component)",
                           what, (int)(rlen > 80 ? 80 : rlen), rel);
        i = j + 1;
    }
    size_t idx;
    if (ck_map_get(&m->part_names, rel, rlen, &idx)) {
        *part = idx;
        return 0;
    }
    if (m->nparts >= f->opt.max_entries)
        return ck_fail(err, CKPT_E_LIMIT, -1, "more than %u files (max_entries)",
                       f->opt.max_entries);
    size_t dl = strlen(m->dir), sl = strlen(m->shown);
    char *full = ck_alloc(&f->arena, sl + rlen + 2);
    if (!full) return oom(err);
    memcpy(full, m->shown, sl);
    full[sl] = '/';
    memcpy(full + sl + 1, rel, rlen);
    struct stat st;
    if (stat(full, &st) != 0)
        return ck_fail(err, errno == ENOENT ? CKPT_E_FORMAT : CKPT_E_IO, -1,
                       "%s names '%.*s', which is missing (%s)", what, (int)(rlen > 80 ? 80 : rlen),
                       rel, strerror(errno));
    if (!S_ISREG(st.st_mode))
        return ck_fail(err, CKPT_E_FORMAT, -1, "%s names '%.*s', which is not a regular file", what,
                       (int)(rlen > 80 ? 80 : rlen), rel);
    char *real = realpath(full, NULL);
    if (!real) return ck_fail(err, CKPT_E_IO, -1, "%.*s: %s", (int)rlen, rel, strerror(errno));
    bool inside = strncmp(real, m->dir, dl) == 0 && real[dl] == '/';
    free(real);
    if (!inside)
        return ck_fail(err, CKPT_E_FORMAT, -1,
                       "%s names '%.*s', which leads outside the folder (a symbolic link)", what,
                       (int)(rlen > 80 ? 80 : rlen), rel);
    size_t n = m->nparts, cap = m->cap_parts;
    CK_TRY(ck_grow((void **)&m->paths, &cap, n + 1, sizeof *m->paths, err));
    cap = m->cap_parts;
    CK_TRY(ck_grow((void **)&m->files, &cap, n + 1, sizeof *m->files, err));
    cap = m->cap_parts;
    CK_TRY(ck_grow((void **)&m->srcs, &cap, n + 1, sizeof *m->srcs, err));
    m->cap_parts = cap;
    m->paths[n] = full;
    m->files[n] = NULL;
    m->srcs[n] = NULL;
    const char *key = full + sl + 1;
    if (ck_map_put(&m->part_names, key, rlen, n)) return oom(err);
    m->nparts = n + 1;
    *part = n;
    return 0;
}

int ck_multi_source(ckpt_file *f, ck_multi *m, size_t part, ckpt_error *err)
{
    if (m->srcs[part]) return 0;
    ck_source *s = malloc(sizeof *s);
    if (!s) return oom(err);
    if (ck_source_open_path(s, m->paths[part], f->opt.use_mmap != 0, err)) {
        free(s);
        prefix_err(err, base_name(m->paths[part]));
        return -1;
    }
    m->srcs[part] = s;
    return 0;
}

/* The options a part or an embedded file is opened with. */
static void sub_options(const ckpt_file *f, ckpt_options *o)
{
    *o = f->opt;
    o->key = NULL;
}

/* ---- embedded files (DCP chunks) ----------------------------------------- */

typedef struct range_rd {
    const ck_source *src;
    uint64_t off;
} range_rd;

static int range_read(void *opaque, uint64_t off, void *buf, size_t n)
{
    const range_rd *r = opaque;
    if (r->src->map) {
        memcpy(buf, r->src->map + r->off + off, n);
        return 0;
    }
    return r->src->read(r->src->opaque, r->off + off, buf, n);
}

ckpt_file *ck_multi_embedded(ckpt_file *f, ck_multi *m, size_t part, uint64_t off, uint64_t len,
                             ckpt_error *err)
{
    if (ck_multi_source(f, m, part, err)) return NULL;
    const ck_source *s = m->srcs[part];
    if (off > s->size || len > s->size - off) {
        ck_fail(err, CKPT_E_FORMAT, (int64_t)(off > s->size ? s->size : off),
                "%s: a record of %llu bytes at offset %llu is past the end of the file (%llu "
                "bytes)",
                base_name(m->paths[part]), (unsigned long long)len, (unsigned long long)off,
                (unsigned long long)s->size);
        return NULL;
    }
    char key[64];
    size_t kl = (size_t)snprintf(key, sizeof key, "%zu:%llu:%llu", part, (unsigned long long)off,
                                 (unsigned long long)len),
           have;
    if (ck_map_get(&m->embedded_at, key, kl, &have)) return m->embedded[have]; /* shared */
    if (m->nembedded >= f->opt.max_entries) {
        ck_fail(err, CKPT_E_LIMIT, -1, "more than %u records (max_entries)", f->opt.max_entries);
        return NULL;
    }
    size_t cap = m->cap_embedded;
    if (ck_grow((void **)&m->embedded, &cap, m->nembedded + 1, sizeof *m->embedded, err))
        return NULL;
    cap = m->cap_embedded;
    if (ck_grow((void **)&m->embedded_part, &cap, m->nembedded + 1, sizeof *m->embedded_part, err))
        return NULL;
    cap = m->cap_embedded;
    if (ck_grow((void **)&m->embedded_off, &cap, m->nembedded + 1, sizeof *m->embedded_off, err))
        return NULL;
    m->cap_embedded = cap;
    range_rd *r = malloc(sizeof *r);
    if (!r) {
        oom(err);
        return NULL;
    }
    r->src = s;
    r->off = off;
    ckpt_reader rd = {range_read, free, r, len};
    ckpt_options o;
    sub_options(f, &o);
    ckpt_file *e = ckpt_open_reader(&rd, &o, err);
    if (!e) {
        if (err) err->offset = err->offset >= 0 ? err->offset + (int64_t)off : (int64_t)off;
        return NULL;
    }
    char *kept = ck_strndup(&f->arena, key, kl);
    if (!kept || ck_map_put(&m->embedded_at, kept, kl, m->nembedded)) {
        ckpt_close(e);
        oom(err);
        return NULL;
    }
    m->embedded_part[m->nembedded] = part;
    m->embedded_off[m->nembedded] = off;
    m->embedded[m->nembedded++] = e;
    return e;
}

/* ---- the root ------------------------------------------------------------- */

int ck_multi_add_value(ckpt_file *f, ck_multi *m, const char *name, ckpt_value *v, ckpt_error *err)
{
    ckpt_value *k = ck_new_str(&f->pk, CKPT_V_STR, name, strlen(name));
    if (!k || ck_seq_push(&f->pk, m->root, k) || ck_seq_push(&f->pk, m->root, v)) return oom(err);
    return 0;
}

int ck_multi_add_chunked(ckpt_file *f, ck_multi *m, const char *name, ckpt_dtype dtype,
                         uint32_t ndim, const int64_t *shape, ck_chunk *chunks, size_t nchunks,
                         ckpt_error *err)
{
    size_t si;
    CK_TRY(ck_storage_new(f, name, strlen(name), &si, err));
    CK_TRY(add_link(f, m, si, err));
    ckpt_value *v;
    CK_TRY(ck_format_tensor(f, si, dtype, ndim, shape, -1, &v, err));
    ck_storage *s = &f->storages[si];
    s->pub.dtype = dtype;
    s->pub.nbytes = ck_tdef_numel(ck_tdef_of(v)) * ck_dtype_size(dtype);
    s->resolved = true;
    ck_link *l = &m->links[si];
    l->part = nchunks ? chunks[0].part : 0;
    l->chunks = chunks;
    l->nchunks = nchunks;
    l->ndim = ndim;
    l->shape = ck_tdef_of(v)->shape;
    l->dtype = dtype;
    l->name = s->pub.key;
    return ck_multi_add_value(f, m, name, v, err);
}

ckpt_value *ck_multi_copy_value(ckpt_file *f, const ckpt_value *v, uint32_t depth, uint64_t *budget,
                                ckpt_error *err)
{
    ckpt_value *o = NULL;
    if (*budget == 0) {
        ck_fail(err, CKPT_E_LIMIT, -1,
                "a value expands to more than %llu values when copied (max_expansion)",
                (unsigned long long)f->opt.max_expansion);
        return NULL;
    }
    --*budget;
    if (depth > f->opt.max_depth) {
        ck_fail(err, CKPT_E_LIMIT, -1, "a value nests deeper than %u (max_depth)",
                f->opt.max_depth);
        return NULL;
    }
    switch ((ckpt_kind)v->kind) {
    case CKPT_V_NONE:
    case CKPT_V_BOOL:
    case CKPT_V_INT:
    case CKPT_V_FLOAT:
        if ((o = ck_new(&f->pk, (ckpt_kind)v->kind))) o->u = v->u;
        break;
    case CKPT_V_BIGINT:
    case CKPT_V_STR:
    case CKPT_V_BYTES: o = ck_new_str(&f->pk, (ckpt_kind)v->kind, v->u.s.p, v->u.s.n); break;
    case CKPT_V_LIST:
    case CKPT_V_TUPLE:
    case CKPT_V_SET:
    case CKPT_V_DICT:
        if (!(o = ck_new(&f->pk, (ckpt_kind)v->kind))) break;
        o->cls = v->cls ? ck_strndup(&f->arena, v->cls, strlen(v->cls)) : NULL;
        for (size_t i = 0; i < v->u.seq.n; i++) {
            ckpt_value *c = ck_multi_copy_value(f, v->u.seq.v[i], depth + 1, budget, err);
            if (!c) return NULL;
            if (ck_seq_push(&f->pk, o, c)) {
                oom(err);
                return NULL;
            }
        }
        return o;
    default: {
        char text[200];
        snprintf(text, sizeof text, "<%s%s%s>", ckpt_kind_name((ckpt_kind)v->kind),
                 v->cls ? " " : "", v->cls ? v->cls : "");
        o = ck_new_str(&f->pk, CKPT_V_STR, text, strlen(text));
        break;
    }
    }
    if (!o) oom(err);
    return o;
}

/* ---- reads ---------------------------------------------------------------- */

static void to_little(uint8_t *p, size_t n, ckpt_dtype dt)
{
    const uint16_t one = 1;
    if (*(const uint8_t *)&one == 1) return;
    size_t unit = ck_dtype_swap_unit(dt);
    if (unit <= 1) return;
    for (size_t i = 0; i + unit <= n; i += unit)
        for (size_t a = 0, b = unit - 1; a < b; a++, b--) {
            uint8_t t = p[i + a];
            p[i + a] = p[i + b];
            p[i + b] = t;
        }
}

static bool in_chunk(const ck_chunk *c, const uint64_t *idx, uint32_t nd)
{
    for (uint32_t i = 0; i < nd; i++)
        if (idx[i] < (uint64_t)c->off[i] || idx[i] >= (uint64_t)(c->off[i] + c->size[i]))
            return false;
    return true;
}

/* Bytes [off, off+n) of a tensor assembled from chunks, little-endian. */
static int chunked_read(const ckpt_file *f, const ck_link *l, uint64_t off, uint8_t *out, size_t n,
                        ckpt_error *err)
{
    const ck_multi *m = MULTI(f);
    size_t es = ck_dtype_size(l->dtype);
    uint32_t nd = l->ndim;
    if (n == 0) return 0;
    if (l->nchunks == 0)
        return ck_fail(err, CKPT_E_FORMAT, -1, "tensor '%s' has no chunks", l->name);
    if (off % es || n % es)
        return ck_fail(err, CKPT_E_ARG, -1, "tensor '%s': a read not on element borders", l->name);
    uint64_t e = off / es, e1 = (off + n) / es;
    uint64_t idx[64];
    size_t ci = 0;
    while (e < e1) {
        uint64_t rem = e;
        for (uint32_t i = nd; i-- > 0;) {
            idx[i] = rem % (uint64_t)l->shape[i];
            rem /= (uint64_t)l->shape[i];
        }
        if (!in_chunk(&l->chunks[ci], idx, nd)) {
            size_t k;
            for (k = 0; k < l->nchunks && !in_chunk(&l->chunks[k], idx, nd); k++) {
            }
            if (k == l->nchunks)
                return ck_fail(err, CKPT_E_FORMAT, -1, "tensor '%s': element %llu is in no chunk",
                               l->name, (unsigned long long)e);
            ci = k;
        }
        const ck_chunk *c = &l->chunks[ci];
        /* innermost dimension t the chunk does not span whole */
        int64_t t = (int64_t)nd - 1;
        uint64_t inner = 1, within = 0;
        while (t >= 0 && c->off[t] == 0 && c->size[t] == l->shape[t]) {
            within += idx[t] * inner;
            inner *= (uint64_t)l->shape[t];
            t--;
        }
        uint64_t run;
        if (t < 0)
            run = inner - within;
        else
            run = ((uint64_t)(c->off[t] + c->size[t]) - idx[t]) * inner - within;
        if (run > e1 - e) run = e1 - e;
        uint64_t local = 0, lstride = 1;
        for (uint32_t i = nd; i-- > 0;) {
            local += (idx[i] - (uint64_t)c->off[i]) * lstride;
            lstride *= (uint64_t)c->size[i];
        }
        size_t nb = (size_t)(run * es);
        int r;
        if (c->file) {
            r = ckpt_tensor_read_range(c->file, c->t, local * es, out, nb, err);
            if (r == 0) to_little(out, nb, l->dtype);
        } else {
            r = ck_read(m->srcs[c->part], c->raw_off + local * es, out, nb, "chunk data", err);
        }
        if (r) {
            prefix_err(err, base_name(m->paths[c->part]));
            return -1;
        }
        out += nb;
        e += run;
    }
    return 0;
}

static int multi_storage_read(const ckpt_file *f, const ck_storage *s, uint64_t off, void *buf,
                              size_t n, ckpt_error *err)
{
    const ck_multi *m = MULTI(f);
    const ck_link *l = &m->links[s - f->storages];
    if (m->meta) return chunked_read(f, l, off, buf, n, err); /* DCP */
    const ckpt_file *sub = m->files[l->part];
    if (ck_storage_read(sub, &sub->storages[l->sub], off, buf, n, err)) {
        prefix_err(err, base_name(m->paths[l->part]));
        return -1;
    }
    return 0;
}

/* ---- shards --------------------------------------------------------------- */

/* Link every tensor of part `p` into the composite. */
static int link_part(ckpt_file *f, ck_multi *m, size_t p, json_t *wmap, ckpt_error *err)
{
    ckpt_file *sub = m->files[p];
    const char *pname = base_name(m->paths[p]);
    if (sub->byteorder != f->byteorder)
        return ck_fail(err, CKPT_E_UNSUPPORTED, -1,
                       "%s: stored big-endian while the other shards are little-endian", pname);
    size_t *map = calloc(sub->nstorages ? sub->nstorages : 1, sizeof *map);
    if (!map) return oom(err);
    int r = 0;
    for (size_t i = 0; i < ckpt_tensor_count(sub) && r == 0; i++) {
        const ckpt_tensor *t = ckpt_tensor_at(sub, i);
        json_t *where = wmap ? json_object_get(wmap, t->name) : NULL;
        if (wmap && !where)
            r = ck_note(&f->pk, "tensor '%s' is in %s but not in the index's weight_map", t->name,
                        pname)
                    ? oom(err)
                    : 0;
        if (r) break;
        size_t si;
        if (!map[t->storage]) {
            char key[96];
            snprintf(key, sizeof key, "%zu/%s", p, sub->storages[t->storage].pub.key);
            if ((r = ck_storage_new(f, key, strlen(key), &si, err)) ||
                (r = add_link(f, m, si, err)))
                break;
            const ck_storage *ss = &sub->storages[t->storage];
            ck_storage *s = &f->storages[si];
            s->pub.dtype = ss->pub.dtype;
            s->pub.nbytes = ss->pub.nbytes;
            /* file_offset stays -1: the bytes are in another file (a part) */
            s->resolved = true;
            m->links[si].part = p;
            m->links[si].sub = t->storage;
            map[t->storage] = si + 1;
        }
        si = map[t->storage] - 1;
        int64_t *sh = t->ndim ? ck_alloc_copy(&f->arena, t->shape, t->ndim * sizeof *sh) : NULL;
        int64_t *st = t->ndim ? ck_alloc_copy(&f->arena, t->stride, t->ndim * sizeof *st) : NULL;
        if (t->ndim && (!sh || !st)) {
            r = oom(err);
            break;
        }
        ck_tdef *td;
        if ((r = ck_tensor_new(f, si, t->dtype, t->ndim, sh, st, t->storage_offset, -1, &td, err)))
            break;
        td->requires_grad = t->requires_grad != 0;
        ckpt_value *v = ck_new(&f->pk, CKPT_V_TENSOR);
        if (!v) {
            r = oom(err);
            break;
        }
        v->u.ext = td;
        r = ck_multi_add_value(f, m, t->name, v, err);
    }
    free(map);
    return r;
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

static int read_small_file(ckpt_file *f, const char *path, const char *what, char **out, size_t *n,
                           ckpt_error *err)
{
    ck_source s;
    CK_TRY(ck_source_open_path(&s, path, false, err));
    int r = 0;
    if (s.size > f->opt.max_pickle_bytes)
        r = ck_fail(err, CKPT_E_LIMIT, 0, "%s of %llu bytes is larger than the limit of %llu", what,
                    (unsigned long long)s.size, (unsigned long long)f->opt.max_pickle_bytes);
    char *buf = r ? NULL : malloc((size_t)s.size + 1);
    if (!r && !buf) r = oom(err);
    if (!r) r = ck_read(&s, 0, buf, (size_t)s.size, what, err);
    *n = (size_t)s.size;
    ck_source_close(&s);
    if (r) {
        free(buf);
        return -1;
    }
    *out = buf;
    return 0;
}

static int open_index(ckpt_file *f, ck_multi *m, const char *index, ckpt_error *err)
{
    char *text;
    size_t n;
    CK_TRY(read_small_file(f, index, "index file", &text, &n, err));
    json_t *doc = ck_json_parse(text, n, f->opt.max_pickle_bytes, 64, 0, "index file", err);
    free(text);
    if (!doc) return -1;
    int r = 0;
    json_t *wmap = json_object_get(doc, "weight_map");
    const char **files = NULL;
    size_t nf = 0;
    if (!json_is_object(doc) || !json_is_object(wmap))
        r = ck_fail(err, CKPT_E_FORMAT, 0, "index file has no \"weight_map\" object");
    size_t nw = r ? 0 : json_object_size(wmap);
    if (!r && nw > f->opt.max_entries)
        r = ck_fail(err, CKPT_E_LIMIT, 0, "index names %zu tensors (max_entries %u)", nw,
                    f->opt.max_entries);
    if (!r && !(files = calloc(nw ? nw : 1, sizeof *files))) r = oom(err);
    const char *key;
    json_t *v;
    if (!r) {
        ck_map seen = {0};
        json_object_foreach(wmap, key, v)
        {
            if (!json_is_string(v)) {
                r = ck_fail(err, CKPT_E_FORMAT, 0, "index maps '%.80s' to a non-string", key);
                break;
            }
            const char *s = json_string_value(v);
            int a = ck_map_add(&seen, s, strlen(s), nf, NULL);
            if (a < 0) {
                r = oom(err);
                break;
            }
            if (a == 0) files[nf++] = s;
        }
        ck_map_free(&seen);
    }
    if (!r) qsort(files, nf, sizeof *files, cmp_str); /* transformers loads sorted(set(...)) */
    for (size_t i = 0; i < nf && r == 0; i++) {
        size_t p;
        if ((r = ck_multi_part(f, m, files[i], strlen(files[i]), "index", &p, err))) break;
        ckpt_options o;
        sub_options(f, &o);
        m->files[p] = ckpt_open(m->paths[p], &o, err);
        if (!m->files[p]) {
            prefix_err(err, files[i]);
            r = -1;
            break;
        }
        if (p == 0) f->byteorder = m->files[p]->byteorder;
        r = link_part(f, m, p, wmap, err);
    }
    /* every name the index maps must be in the shard it names (a scan
     * lists no tensors: nothing to compare) */
    if (!r && !f->opt.skip_tensors) json_object_foreach(wmap, key, v)
        {
            const char *s = json_string_value(v);
            size_t p = 0;
            ck_map_get(&m->part_names, s, strlen(s), &p);
            if (!ckpt_find(m->files[p], key)) {
                r = ck_fail(err, CKPT_E_FORMAT, -1,
                            "index maps tensor '%.80s' to %.80s, which does not hold it", key, s);
                break;
            }
        }
    json_t *total = r ? NULL : json_object_get(json_object_get(doc, "metadata"), "total_size");
    if (total && !json_is_integer(total))
        r = ck_fail(err, CKPT_E_FORMAT, 0, "index metadata.total_size is not an integer");
    if (total) m->total_size = json_integer_value(total);
    free(files);
    json_decref(doc);
    return r;
}

/* ---- opening -------------------------------------------------------------- */

static bool ends_with(const char *s, const char *suf)
{
    size_t a = strlen(s), b = strlen(suf);
    return a >= b && strcmp(s + a - b, suf) == 0;
}

static int fail_read(void *opaque, uint64_t off, void *buf, size_t n)
{
    (void)opaque, (void)off, (void)buf, (void)n;
    return -1;
}

typedef struct sub_note {
    void (*note)(void *, const char *);
    void *ctx;
    const char *part;
} sub_note;

static void forward_note(void *ctx, const char *line)
{
    const sub_note *sn = ctx;
    char buf[512];
    snprintf(buf, sizeof buf, "%s: %s", sn->part, line);
    sn->note(sn->ctx, buf);
}

/* The bytes of part i (a shard file, or a .distcp file). */
static uint64_t part_size(const ck_multi *m, size_t i)
{
    return m->files[i] ? m->files[i]->src.size : m->srcs[i] ? m->srcs[i]->size : 0;
}

typedef struct part_progress {
    void (*progress)(void *, uint64_t, uint64_t);
    void *ctx;
    uint64_t base, total;
} part_progress;

static void step(const part_progress *pp, uint64_t done)
{
    if (pp->progress && pp->base + done < pp->total)
        pp->progress(pp->ctx, pp->base + done, pp->total);
}

/* Part i alone: its shard file, or the torch.save records it holds (DCP),
 * notes forwarded with the part's name; the last part also gives the note
 * about the whole.  Reads only: parts may be checked on several threads
 * at once (each part's records are opened at ckpt_open). */
static int verify_one_part(const ckpt_file *f, size_t i, void (*note)(void *, const char *),
                           const part_progress *pp, void *ctx, ckpt_error *err)
{
    const ck_multi *m = MULTI(f);
    const char *pn = base_name(m->paths[i]);
    char line[512];
    uint64_t done = 0;
    if (m->files[i]) {
        sub_note sn = {note, ctx, pn};
        if (ckpt_verify_progress(m->files[i], note ? forward_note : NULL, NULL, &sn, err)) {
            prefix_err(err, pn);
            return -1;
        }
        if (note) {
            snprintf(line, sizeof line, "%s: intact", pn);
            note(ctx, line);
        }
        done += m->files[i]->src.size;
        step(pp, done);
    }
    for (size_t k = 0; k < m->nembedded; k++) {
        if (m->embedded_part[k] != i) continue;
        sub_note sn = {note, ctx, pn};
        if (ckpt_verify_progress(m->embedded[k], note ? forward_note : NULL, NULL, &sn, err)) {
            ck_err_prefix(err, "%s, record at byte %llu", pn,
                          (unsigned long long)m->embedded_off[k]);
            if (err && err->offset >= 0)
                err->offset += (int64_t)m->embedded_off[k]; /* in the part */
            return -1;
        }
        done += m->embedded[k]->src.size;
        step(pp, done);
    }
    if (note && m->meta && i + 1 == m->nparts) {
        snprintf(line, sizeof line,
                 "%zu torch.save records in %zu files: CRCs checked; chunks tile their tensors",
                 m->nembedded, m->nparts);
        note(ctx, line);
    }
    return 0;
}

/* Every part in order (ckpt_verify_part() for each), progress in bytes of
 * the parts. */
static int multi_verify(const ckpt_file *f, void (*note)(void *, const char *),
                        void (*progress)(void *, uint64_t, uint64_t), void *ctx, ckpt_error *err)
{
    const ck_multi *m = MULTI(f);
    part_progress pp = {progress, ctx, 0, f->src.size};
    for (size_t i = 0; i < m->nparts; i++) {
        if (verify_one_part(f, i, note, &pp, ctx, err)) return -1;
        pp.base += part_size(m, i);
    }
    if (progress) progress(ctx, pp.total, pp.total);
    return 0;
}

static void multi_close(ckpt_file *f)
{
    ck_multi *m = MULTI(f);
    if (!m) return;
    for (size_t i = 0; i < m->nembedded; i++) ckpt_close(m->embedded[i]);
    ckpt_close(m->meta);
    for (size_t i = 0; i < m->nparts; i++) {
        ckpt_close(m->files[i]);
        if (m->srcs[i]) ck_source_close(m->srcs[i]);
        free(m->srcs[i]);
    }
    free(m->embedded);
    free(m->embedded_part);
    free(m->embedded_off);
    ck_map_free(&m->embedded_at);
    free(m->paths);
    free(m->files);
    free(m->srcs);
    free(m->links);
    ck_map_free(&m->part_names);
    free(m->dir);
    free(m);
    f->fmt_state = NULL;
}

const ck_format ck_format_multi = {"multi",      NULL, NULL,        multi_storage_read,
                                   multi_verify, NULL, multi_close, NULL};

/* What a folder holds: its index, a DCP .metadata, or one checkpoint. */
static int classify_dir(const char *dir, char **index, bool *dcp, char **single, ckpt_error *err)
{
    DIR *d = opendir(dir);
    if (!d) return ck_fail(err, CKPT_E_IO, -1, "%s", strerror(errno));
    struct dirent *e;
    size_t nidx = 0, nfiles = 0;
    char first_idx[256] = "", second_idx[256] = "", file[256] = "";
    *dcp = false;
    while ((e = readdir(d))) {
        const char *n = e->d_name;
        if (strcmp(n, ".metadata") == 0) {
            *dcp = true;
            continue;
        }
        if (n[0] == '.') continue;
        if (ends_with(n, ".index.json")) {
            if (!nidx || strcmp(n, first_idx) < 0) {
                snprintf(second_idx, sizeof second_idx, "%s", first_idx);
                snprintf(first_idx, sizeof first_idx, "%s", n);
            } else {
                snprintf(second_idx, sizeof second_idx, "%s", n);
            }
            nidx++;
            continue;
        }
        if (ends_with(n, ".json") || ends_with(n, ".txt") || ends_with(n, ".md")) continue;
        size_t dl = strlen(dir);
        char *full = malloc(dl + strlen(n) + 2);
        if (!full) {
            closedir(d);
            return ck_fail(err, CKPT_E_NOMEM, -1, "out of memory");
        }
        sprintf(full, "%s/%s", dir, n);
        struct stat st;
        bool reg = stat(full, &st) == 0 && S_ISREG(st.st_mode);
        free(full);
        if (!reg) continue;
        if (!nfiles || strcmp(n, file) < 0) snprintf(file, sizeof file, "%s", n);
        nfiles++;
    }
    closedir(d);
    if (nidx > 1)
        return ck_fail(err, CKPT_E_ARG, -1,
                       "the folder holds %zu index files ('%s', '%s'%s): name the one to open",
                       nidx, first_idx, second_idx, nidx > 2 ? ", ..." : "");
    if (nidx == 1) {
        *index = strdup(first_idx);
        return *index ? 0 : ck_fail(err, CKPT_E_NOMEM, -1, "out of memory");
    }
    if (*dcp) return 0;
    if (nfiles == 1) {
        *single = strdup(file);
        return *single ? 0 : ck_fail(err, CKPT_E_NOMEM, -1, "out of memory");
    }
    if (nfiles == 0)
        return ck_fail(err, CKPT_E_FORMAT, -1,
                       "the folder holds no *.index.json, no DCP .metadata and no checkpoint file");
    return ck_fail(err, CKPT_E_ARG, -1,
                   "the folder holds no *.index.json and no DCP .metadata but %zu files: name "
                   "the checkpoint to open",
                   nfiles);
}

static char *join(const char *dir, const char *name)
{
    char *p = malloc(strlen(dir) + strlen(name) + 2);
    if (p) sprintf(p, "%s/%s", dir, name);
    return p;
}

static ckpt_file *open_composite(const char *dir, const char *index, const ckpt_options *opt,
                                 ckpt_error *err)
{
    ckpt_file *f = ck_file_new(opt, err);
    if (!f) return NULL;
    ck_multi *m = calloc(1, sizeof *m);
    int r = 0;
    if (!m) r = oom(err);
    if (!r) {
        f->fmt = &ck_format_multi;
        f->fmt_state = m;
        f->storage_read = multi_storage_read;
        f->src.read = fail_read;
        f->byteorder = CKPT_LITTLE;
        f->format = index ? CKPT_FORMAT_SHARDED : CKPT_FORMAT_DCP;
        f->pickle_label = index ? "index" : ".metadata";
        m->shown = ck_strndup(&f->arena, dir, strlen(dir));
        if (!m->shown || !(m->dir = realpath(dir, NULL)))
            r = ck_fail(err, CKPT_E_IO, -1, "%s", strerror(errno));
    }
    if (m) m->total_size = -1;
    if (!r && !(m->root = ck_new(&f->pk, CKPT_V_DICT))) r = oom(err);
    if (!r) {
        if (index) {
            char *ip = join(m->dir, index);
            r = ip ? open_index(f, m, ip, err) : oom(err);
            free(ip);
        } else {
            r = ck_dcp_open(f, m, m->dir, err);
        }
    }
    if (!r) {
        uint64_t total = 0;
        for (size_t i = 0; i < m->nparts; i++) {
            uint64_t sz = m->files[i] ? m->files[i]->src.size : m->srcs[i] ? m->srcs[i]->size : 0;
            if (!m->files[i] && !m->srcs[i]) {
                struct stat st;
                if (stat(m->paths[i], &st) == 0) sz = (uint64_t)st.st_size;
            }
            total += sz;
        }
        if (m->meta) total += m->meta->src.size;
        f->src.size = total;
        f->root = m->root;
        r = ck_catalogue(f, err);
        if (!r && m->total_size >= 0 && (uint64_t)m->total_size != f->total_bytes &&
            !f->opt.skip_tensors &&
            ck_note(&f->pk, "index metadata.total_size is %lld bytes, its tensors hold %llu",
                    (long long)m->total_size, (unsigned long long)f->total_bytes))
            r = oom(err);
    }
    if (r) {
        ck_mem_blame(&f->arena, err);
        ckpt_close(f);
        return NULL;
    }
    return f;
}

ckpt_file *ckpt_open_path(const char *path, const ckpt_options *opt, ckpt_error *err)
{
    if (!path) {
        ck_fail(err, CKPT_E_ARG, -1, "no path given");
        return NULL;
    }
    struct stat st;
    if (stat(path, &st) != 0) {
        ck_fail(err, CKPT_E_IO, -1, "%s", strerror(errno));
        return NULL;
    }
    if (!S_ISDIR(st.st_mode)) {
        if (!S_ISREG(st.st_mode) || !ends_with(path, ".index.json"))
            return ckpt_open(path, opt, err);
        /* an index: its folder, that index */
        char *copy = strdup(path);
        if (!copy) {
            ck_fail(err, CKPT_E_NOMEM, -1, "out of memory");
            return NULL;
        }
        char *slash = strrchr(copy, '/');
        const char *dir = ".", *name = copy;
        if (slash) {
            *slash = 0;
            dir = slash == copy ? "/" : copy;
            name = slash + 1;
        }
        ckpt_file *f = open_composite(dir, name, opt, err);
        free(copy);
        return f;
    }
    char *index = NULL, *single = NULL;
    bool dcp;
    if (classify_dir(path, &index, &dcp, &single, err)) return NULL;
    ckpt_file *f;
    if (single) {
        char *p = join(path, single);
        f = p ? ckpt_open(p, opt, err) : NULL;
        if (!f && p) prefix_err(err, single);
        free(p);
    } else {
        f = open_composite(path, index, opt, err);
    }
    free(index);
    free(single);
    return f;
}

size_t ckpt_part_count(const ckpt_file *f)
{
    if (!f) return 0;
    if (f->fmt != &ck_format_multi) return 1;
    return MULTI(f)->nparts;
}

const char *ckpt_part_path(const ckpt_file *f, size_t i)
{
    if (!f || f->fmt != &ck_format_multi || i >= MULTI(f)->nparts) return NULL;
    return MULTI(f)->paths[i];
}

int ckpt_verify_part(const ckpt_file *f, size_t i, void (*note)(void *ctx, const char *line),
                     void (*progress)(void *ctx, uint64_t done, uint64_t total), void *ctx,
                     ckpt_error *err)
{
    if (!f) return ck_fail(err, CKPT_E_ARG, -1, "null argument");
    if (i >= ckpt_part_count(f))
        return ck_fail(err, CKPT_E_ARG, -1, "no part %zu (the checkpoint has %zu)", i,
                       ckpt_part_count(f));
    if (f->fmt != &ck_format_multi) return ckpt_verify_progress(f, note, progress, ctx, err);
    const ck_multi *m = MULTI(f);
    part_progress pp = {progress, ctx, 0, part_size(m, i)};
    if (verify_one_part(f, i, note, &pp, ctx, err)) return -1;
    if (progress) progress(ctx, pp.total, pp.total);
    return 0;
}

size_t ckpt_tensor_part(const ckpt_file *f, const ckpt_tensor *t)
{
    if (!f || !t || f->fmt != &ck_format_multi || t->storage >= f->nstorages) return 0;
    return MULTI(f)->links[t->storage].part;
}
