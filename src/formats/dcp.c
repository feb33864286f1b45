/*
 * dcp.c - layer 4 (formats): a torch.distributed.checkpoint folder
 * (torch.distributed.checkpoint.save, PyTorch 2.x) as one state dict.
 *
 *   .metadata         a pickle of Metadata(state_dict_metadata: {fqn:
 *                     TensorStorageMetadata(properties, size, chunks:
 *                     [ChunkStorageMetadata(offsets, sizes)]) |
 *                     BytesStorageMetadata()}, planner_data, storage_data:
 *                     {MetadataIndex(fqn, offset): _StorageInfo(
 *                     relative_path, offset, length)}, storage_meta)
 *   __R_K.distcp      each chunk at (offset, length): a torch.save of the
 *                     chunk's tensor (raw bytes where a writer stores them
 *                     so), each non-tensor value a torch.save of it
 *
 * The pickle runs on the inert machine, and only the dataclasses above (and
 * torch.Size, dtypes, layouts) may appear in it.  Nothing it says is
 * trusted: every path stays in the folder, every (offset, length) inside
 * its file, each tensor's chunks lie inside it and tile it without overlap
 * or gap, and each chunk's stored tensor has the chunk's dtype and shape.
 *
 * What it costs is bounded: the .metadata and each record are files of the
 * folder's one memory budget, closed once read (the records are opened
 * again when a read needs them, multi.c); the overlap check groups the
 * chunks by their intervals one dimension at a time (the one where they
 * differ most first), so a split along any dimension or a grid of splits
 * costs a few steps a chunk, and compares pairs only where intervals
 * overlap partly, at most max_expansion + 4 steps a chunk and dimension.
 */
#include "multi.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define DCP_MOD "torch.distributed.checkpoint."

static int oom(ckpt_error *err)
{
    return ck_fail(err, CKPT_E_NOMEM, -1, "out of memory");
}

/* The globals a DCP .metadata may name. */
static bool allowed_global(const char *mod, const char *name)
{
    static const char *const ok[] = {
        DCP_MOD "metadata.Metadata",
        DCP_MOD "metadata.TensorStorageMetadata",
        DCP_MOD "metadata.BytesStorageMetadata",
        DCP_MOD "metadata.ChunkStorageMetadata",
        DCP_MOD "metadata.TensorProperties",
        DCP_MOD "metadata.MetadataIndex",
        DCP_MOD "metadata.StorageMeta",
        DCP_MOD "metadata._MEM_FORMAT_ENCODING",
        DCP_MOD "filesystem._StorageInfo",
        DCP_MOD "filesystem._StoragePrefix",
        DCP_MOD "planner.WriteItemType",
        "torch.Size",
        "pathlib.PosixPath", /* StorageMeta.checkpoint_id */
        "pathlib._local.PosixPath",
        "pathlib.PurePosixPath",
        "torch.serialization._get_layout",
        "torch._utils._rebuild_tensor_v2",
        "collections.OrderedDict",
        "builtins.set",
        "builtins.frozenset",
    };
    char full[256];
    snprintf(full, sizeof full, "%s.%s", mod, name);
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++)
        if (strcmp(full, ok[i]) == 0) return true;
    ckpt_dtype d;
    return strcmp(mod, "torch") == 0 && ck_dtype_by_torch_name(name, strlen(name), &d) == 0;
}

static bool is_class(const ckpt_value *v, const char *suffix)
{
    if (!v || v->kind != CKPT_V_OBJECT || !v->cls) return false;
    size_t a = strlen(v->cls), b = strlen(suffix);
    return a > b && strcmp(v->cls + a - b, suffix) == 0 && v->cls[a - b - 1] == '.';
}

/* The fields of a dataclass instance: its BUILD state dict. */
static const ckpt_value *field(const ckpt_value *obj, const char *name)
{
    const ckpt_value *st = ckpt_object_state(obj);
    return st && st->kind == CKPT_V_DICT ? ck_dict_get(st, name) : NULL;
}

/* A torch.Size (a tuple of non-negative ints): 0 and n entries, or -1. */
static int size_of(const ckpt_value *v, int64_t *out, uint32_t cap, uint32_t *n)
{
    if (!v || (v->kind != CKPT_V_TUPLE && v->kind != CKPT_V_LIST) || v->u.seq.n > cap) return -1;
    for (size_t i = 0; i < v->u.seq.n; i++)
        if (!ck_as_int(v->u.seq.v[i], &out[i]) || out[i] < 0) return -1;
    *n = (uint32_t)v->u.seq.n;
    return 0;
}

/* "fqn\x01o0,o1,..." or "fqn\x01-" for no offset. */
static char *index_key(ckpt_file *f, const char *fqn, const int64_t *off, uint32_t n, bool none,
                       size_t *len)
{
    size_t fl = strlen(fqn), cap = fl + 4 + (size_t)n * 21;
    char *k = ck_alloc(&f->arena, cap);
    if (!k) return NULL;
    memcpy(k, fqn, fl);
    size_t p = fl;
    k[p++] = 1;
    if (none) k[p++] = '-';
    for (uint32_t i = 0; i < n; i++)
        p += (size_t)snprintf(k + p, cap - p, i ? ",%lld" : "%lld", (long long)off[i]);
    k[p] = 0;
    *len = p;
    return k;
}

typedef struct sinfo {
    size_t part;
    uint64_t off, len;
    const char *fqn;
} sinfo;

static int by_place(const void *a, const void *b)
{
    const sinfo *x = a, *y = b;
    if (x->part != y->part) return x->part < y->part ? -1 : 1;
    if (x->off != y->off) return x->off < y->off ? -1 : 1;
    return x->len < y->len ? -1 : x->len > y->len;
}

/* Records may be shared (the same offset and length) but not overlap: so
 * their number is bounded by the files' bytes. */
static int check_records(ckpt_file *f, const ck_multi *m, const sinfo *infos, size_t n,
                         ckpt_error *err)
{
    if (n < 2) return 0;
    sinfo *s = ck_alloc_copy(&f->arena, infos, n * sizeof *s);
    if (!s) return oom(err);
    qsort(s, n, sizeof *s, by_place);
    for (size_t i = 1; i < n; i++) {
        const sinfo *a = &s[i - 1], *b = &s[i];
        if (a->part != b->part || (a->off == b->off && a->len == b->len)) continue;
        if (b->off - a->off < a->len)
            return ck_fail(err, CKPT_E_FORMAT, -1,
                           "DCP items '%.60s' and '%.60s': their records overlap in %s", a->fqn,
                           b->fqn, strrchr(m->parts[a->part].path, '/') + 1);
    }
    return 0;
}

static int read_storage_data(ckpt_file *f, ck_multi *m, const ckpt_value *sd, ck_map *keys,
                             sinfo **infos, ckpt_error *err)
{
    if (!sd || sd->kind != CKPT_V_DICT)
        return ck_fail(err, CKPT_E_FORMAT, -1, "DCP .metadata has no storage_data dict");
    size_t n = sd->u.seq.n / 2;
    *infos = ck_alloc(&f->arena, (n ? n : 1) * sizeof **infos);
    if (!*infos) return oom(err);
    for (size_t i = 0; i < n; i++) {
        const ckpt_value *k = sd->u.seq.v[2 * i], *v = sd->u.seq.v[2 * i + 1];
        if (!is_class(k, "MetadataIndex") || !is_class(v, "_StorageInfo"))
            return ck_fail(err, CKPT_E_FORMAT, -1,
                           "DCP .metadata: storage_data entry %zu is not MetadataIndex -> "
                           "_StorageInfo",
                           i);
        const ckpt_value *fqn = field(k, "fqn"), *off = field(k, "offset");
        if (!fqn || fqn->kind != CKPT_V_STR)
            return ck_fail(err, CKPT_E_FORMAT, -1,
                           "DCP .metadata: storage_data entry %zu has no fqn", i);
        int64_t o[64];
        uint32_t on = 0;
        bool none = !off || off->kind == CKPT_V_NONE;
        if (!none && size_of(off, o, 64, &on))
            return ck_fail(err, CKPT_E_FORMAT, -1, "DCP item '%.80s': its offset is not a size",
                           fqn->u.s.p);
        size_t kl;
        char *key = index_key(f, fqn->u.s.p, o, on, none, &kl);
        if (!key) return oom(err);
        int a = ck_map_add(keys, key, kl, i, NULL);
        if (a < 0) return oom(err);
        if (a > 0)
            return ck_fail(err, CKPT_E_FORMAT, -1, "DCP item '%.80s' is stored twice", fqn->u.s.p);
        const ckpt_value *rp = field(v, "relative_path"), *so = field(v, "offset"),
                         *sl = field(v, "length");
        int64_t so_i, sl_i;
        if (!rp || rp->kind != CKPT_V_STR || !ck_as_int(so, &so_i) || !ck_as_int(sl, &sl_i) ||
            so_i < 0 || sl_i < 0)
            return ck_fail(err, CKPT_E_FORMAT, -1,
                           "DCP item '%.80s': its storage info is not (path, offset, length)",
                           fqn->u.s.p);
        char what[160];
        snprintf(what, sizeof what, "DCP item '%.80s'", fqn->u.s.p);
        CK_TRY(ck_multi_part(f, m, rp->u.s.p, rp->u.s.n, what, &(*infos)[i].part, err));
        (*infos)[i].off = (uint64_t)so_i;
        (*infos)[i].len = (uint64_t)sl_i;
        (*infos)[i].fqn = fqn->u.s.p;
    }
    return check_records(f, m, *infos, n, err);
}

static const sinfo *find_info(ckpt_file *f, const ck_map *keys, const sinfo *infos, const char *fqn,
                              const int64_t *off, uint32_t n, bool none)
{
    size_t kl, i;
    char *key = index_key(f, fqn, off, n, none, &kl);
    if (!key || !ck_map_get(keys, key, kl, &i)) return NULL;
    return &infos[i];
}

static bool overlap(const ck_chunk *a, const ck_chunk *b, uint32_t nd)
{
    for (uint32_t i = 0; i < nd; i++)
        if (a->off[i] + a->size[i] <= b->off[i] || b->off[i] + b->size[i] <= a->off[i])
            return false;
    return true;
}

/* A chunk's place in the tensor: checked to lie inside it. */
static int chunk_geom(ckpt_file *f, const char *fqn, uint32_t nd, const int64_t *shape,
                      const ckpt_value *cv, size_t ci, ck_chunk *c, uint64_t *numel,
                      ckpt_error *err)
{
    int64_t off[64], size[64];
    uint32_t on, sn;
    if (!is_class(cv, "ChunkStorageMetadata") || size_of(field(cv, "offsets"), off, 64, &on) ||
        size_of(field(cv, "sizes"), size, 64, &sn) || on != nd || sn != nd)
        return ck_fail(err, CKPT_E_FORMAT, -1,
                       "DCP tensor '%.80s': chunk %zu is not offsets and sizes of %u dimensions",
                       fqn, ci, nd);
    uint64_t n = 1;
    for (uint32_t i = 0; i < nd; i++) {
        if (off[i] > shape[i] || size[i] > shape[i] - off[i])
            return ck_fail(err, CKPT_E_FORMAT, -1,
                           "DCP tensor '%.80s': chunk %zu reaches past the tensor in dimension %u "
                           "(%lld + %lld > %lld)",
                           fqn, ci, i, (long long)off[i], (long long)size[i], (long long)shape[i]);
        n *= (uint64_t)size[i]; /* bounded by the tensor's numel */
    }
    *numel = n;
    c->off = ck_alloc_copy(&f->arena, off, (nd ? nd : 1) * sizeof *off);
    c->size = ck_alloc_copy(&f->arena, size, (nd ? nd : 1) * sizeof *size);
    if (!c->off || !c->size) return oom(err);
    return 0;
}

/* Where a chunk's bytes are: a torch.save record holding one tensor of the
 * chunk's dtype and shape, or exactly its raw bytes. */
static int chunk_store(ckpt_file *f, ck_multi *m, const char *fqn, ckpt_dtype dt, uint32_t nd,
                       size_t ci, const ck_map *keys, const sinfo *infos, ck_chunk *c, uint64_t n,
                       ckpt_error *err)
{
    const sinfo *si = find_info(f, keys, infos, fqn, c->off, nd, false);
    if (!si)
        return ck_fail(err, CKPT_E_FORMAT, -1,
                       "DCP tensor '%.80s': chunk %zu has no entry in storage_data", fqn, ci);
    c->part = si->part;
    c->rec = CK_NO_RECORD;
    uint64_t size = m->parts[si->part].size;
    if (si->off > size || si->len > size - si->off)
        return ck_fail(err, CKPT_E_FORMAT, -1,
                       "DCP tensor '%.80s': chunk %zu at offset %llu, %llu bytes, is past the end "
                       "of %s (%llu bytes)",
                       fqn, ci, (unsigned long long)si->off, (unsigned long long)si->len,
                       strrchr(m->parts[si->part].path, '/') + 1, (unsigned long long)size);
    uint8_t magic[2] = {0, 0};
    if (si->len >= 2) {
        const ck_source *s = ck_multi_source_get(f, si->part, err);
        if (!s) return -1;
        int r = ck_read(s, si->off, magic, 2, "chunk", err);
        ck_multi_source_put(f, si->part);
        CK_TRY(r);
    }
    uint64_t raw = n * ck_dtype_size(dt);
    if (!(magic[0] == 'P' && magic[1] == 'K')) {
        if (si->len != raw)
            return ck_fail(err, CKPT_E_FORMAT, (int64_t)si->off,
                           "DCP tensor '%.80s': chunk %zu is neither a torch.save record nor %llu "
                           "raw bytes (it has %llu)",
                           fqn, ci, (unsigned long long)raw, (unsigned long long)si->len);
        c->raw_off = si->off;
        return 0;
    }
    size_t had = m->nrecs;
    CK_TRY(ck_multi_record(f, m, si->part, si->off, si->len, &c->rec, err));
    const ckpt_file *e = ck_multi_record_get(f, c->rec, err);
    if (!e) {
        ck_err_prefix(err, "DCP tensor '%.60s' chunk %zu", fqn, ci);
        return -1;
    }
    if (m->nrecs > had) m->meta_bytes += e->pk.pickle_bytes;
    int r = 0;
    if (!f->opt.skip_tensors) { /* (a scan: the record's pickle ran, nothing is read) */
        const ckpt_tensor *t = ckpt_tensor_count(e) == 1 ? ckpt_tensor_at(e, 0) : NULL;
        bool same = t && !t->name[0] && t->dtype == dt && t->ndim == nd;
        for (uint32_t i = 0; same && i < nd; i++) same = t->shape[i] == c->size[i];
        if (!t || t->name[0])
            r = ck_fail(err, CKPT_E_FORMAT, (int64_t)si->off,
                        "DCP tensor '%.80s': chunk %zu's record does not hold one tensor", fqn, ci);
        else if (!same)
            r = ck_fail(err, CKPT_E_FORMAT, (int64_t)si->off,
                        "DCP tensor '%.80s': chunk %zu's record holds a %s tensor of another "
                        "shape or dtype than the .metadata says",
                        fqn, ci, ck_dtype_name(t->dtype));
    }
    ck_multi_record_put(f, c->rec);
    return r;
}

/* A chunk's interval in one dimension, for sorting. */
typedef struct span {
    int64_t lo, hi;
    uint32_t i;
} span;

static int by_span(const void *a, const void *b)
{
    const span *x = a, *y = b;
    if (x->lo != y->lo) return x->lo < y->lo ? -1 : 1;
    if (x->hi != y->hi) return x->hi < y->hi ? -1 : 1;
    return x->i < y->i ? -1 : x->i > y->i;
}

typedef struct overlap_check {
    const char *fqn;
    const ck_chunk *ch;
    uint32_t nd;
    size_t nc;
    uint32_t *ix; /* the non-empty chunks; a step works on a range of it */
    span *tmp;    /* nc entries */
    uint64_t work, budget;
    ckpt_error *err;
} overlap_check;

static int overlap_found(const overlap_check *x, uint32_t a, uint32_t b)
{
    return ck_fail(x->err, CKPT_E_FORMAT, -1, "DCP tensor '%.80s': chunks %u and %u overlap",
                   x->fqn, a < b ? a : b, a < b ? b : a);
}

/* n more steps of work, within the budget. */
static int spend(overlap_check *x, uint64_t n)
{
    x->work += n;
    if (x->work <= x->budget) return 0;
    return ck_fail(x->err, CKPT_E_LIMIT, -1,
                   "DCP tensor '%.80s': checking its %zu chunks for overlap takes more than %llu "
                   "steps (a layout of chunks overlapping partly in every dimension; "
                   "max_expansion)",
                   x->fqn, x->nc, (unsigned long long)x->budget);
}

static bool same_interval(const ck_chunk *a, const ck_chunk *b, uint32_t d)
{
    return a->off[d] == b->off[d] && a->size[d] == b->size[d];
}

/* No two of the chunks ix[lo..hi) overlap, knowing that they have equal
 * intervals in every dimension outside `dims` (a bit a dimension).  Of the
 * dimensions where their intervals differ, the one with the most distinct
 * intervals orders them; chunks whose intervals in it overlap partly are
 * compared whole, and each run of equal intervals is checked in the
 * remaining dimensions.  A split along one dimension, or a grid of them,
 * compares no pair: a step a chunk for each dimension looked at. */
static int check_chunks(overlap_check *x, size_t lo, size_t hi, uint64_t dims)
{
    size_t n = hi - lo;
    if (n < 2) return 0;
    const ck_chunk *ch = x->ch;
    uint32_t *ix = x->ix + lo;
    int best = -1;
    size_t best_runs = 0;
    for (uint32_t d = 0; d < x->nd; d++) {
        if (!(dims >> d & 1)) continue;
        CK_TRY(spend(x, n));
        size_t k = 1;
        while (k < n && same_interval(&ch[ix[0]], &ch[ix[k]], d)) k++;
        if (k == n) { /* one interval: nothing to tell the chunks apart */
            dims &= ~((uint64_t)1 << d);
            continue;
        }
        for (k = 0; k < n; k++)
            x->tmp[k] = (span){ch[ix[k]].off[d], ch[ix[k]].off[d] + ch[ix[k]].size[d], ix[k]};
        qsort(x->tmp, n, sizeof *x->tmp, by_span);
        size_t runs = 1;
        for (k = 1; k < n; k++)
            if (x->tmp[k].lo != x->tmp[k - 1].lo || x->tmp[k].hi != x->tmp[k - 1].hi) runs++;
        if (runs > best_runs) {
            best = (int)d;
            best_runs = runs;
            for (k = 0; k < n; k++) ix[k] = x->tmp[k].i;
        }
    }
    if (best < 0) { /* the same place in every dimension, and not empty */
        uint32_t a = ix[0], b = ix[1];
        for (size_t k = 1; k < n; k++) { /* the two first in the .metadata */
            if (ix[k] < a) {
                b = a;
                a = ix[k];
            } else if (ix[k] < b) {
                b = ix[k];
            }
        }
        return overlap_found(x, a, b);
    }
    uint32_t d = (uint32_t)best;
    dims &= ~((uint64_t)1 << d);
    for (size_t a = 0; a < n;) {
        size_t e = a + 1;
        while (e < n && same_interval(&ch[ix[a]], &ch[ix[e]], d)) e++;
        int64_t end = ch[ix[a]].off[d] + ch[ix[a]].size[d];
        for (size_t p = a; p < e; p++)
            for (size_t q = e; q < n && ch[ix[q]].off[d] < end; q++) {
                CK_TRY(spend(x, 1));
                if (overlap(&ch[ix[p]], &ch[ix[q]], x->nd)) return overlap_found(x, ix[p], ix[q]);
            }
        a = e;
    }
    for (size_t a = 0; a < n;) {
        size_t e = a + 1;
        while (e < n && same_interval(&ch[ix[a]], &ch[ix[e]], d)) e++;
        CK_TRY(check_chunks(x, lo + a, lo + e, dims));
        a = e;
    }
    return 0;
}

/* No two non-empty chunks share an element. */
static int check_overlap(ckpt_file *f, ck_multi *m, const char *fqn, const ck_chunk *ch,
                         const uint64_t *counts, size_t nc, uint32_t nd, ckpt_error *err)
{
    if (nc < 2 || nd == 0) return 0; /* scalars: the element count tells */
    uint64_t bytes = (uint64_t)nc * (sizeof(uint32_t) + sizeof(span));
    if (ck_mem_charge(&f->arena, bytes)) return oom(err);
    overlap_check x = {fqn, ch, nd, nc, malloc(nc * sizeof(uint32_t)), malloc(nc * sizeof(span)),
                       0, 0, err};
    x.budget = f->opt.max_expansion + 4 * (uint64_t)nc * nd;
    int r = x.ix && x.tmp ? 0 : oom(err);
    size_t n = 0;
    for (size_t i = 0; i < nc && r == 0; i++)
        if (counts[i]) x.ix[n++] = (uint32_t)i;
    if (r == 0) r = check_chunks(&x, 0, n, nd == 64 ? UINT64_MAX : ((uint64_t)1 << nd) - 1);
    m->overlap_work += x.work;
    free(x.ix);
    free(x.tmp);
    ck_mem_release(&f->arena, bytes);
    return r;
}

/* Whether chunk a starts before chunk b in row-major order. */
static bool starts_before(const ck_chunk *a, const ck_chunk *b, uint32_t nd)
{
    for (uint32_t i = 0; i < nd; i++)
        if (a->off[i] != b->off[i]) return a->off[i] < b->off[i];
    return false;
}

/* For reads: the empty chunks left out, the rest in the row-major order of
 * their first elements (a stable merge sort), so that a read finds the
 * chunk holding an element by a binary search (multi.c). */
static int order_chunks(ckpt_file *f, ck_chunk *ch, const uint64_t *counts, size_t *nc,
                        uint32_t nd, ckpt_error *err)
{
    size_t n = 0;
    for (size_t i = 0; i < *nc; i++)
        if (counts[i]) ch[n++] = ch[i];
    *nc = n;
    if (n < 2) return 0;
    uint64_t bytes = (uint64_t)n * sizeof *ch;
    if (ck_mem_charge(&f->arena, bytes)) return oom(err);
    ck_chunk *tmp = malloc(n * sizeof *tmp);
    if (!tmp) {
        ck_mem_release(&f->arena, bytes);
        return oom(err);
    }
    ck_chunk *a = ch, *b = tmp;
    for (size_t w = 1; w < n; w *= 2) {
        for (size_t lo = 0; lo < n; lo += 2 * w) {
            size_t mid = lo + w < n ? lo + w : n, hi = lo + 2 * w < n ? lo + 2 * w : n;
            size_t i = lo, j = mid, k = lo;
            while (i < mid && j < hi) b[k++] = starts_before(&a[j], &a[i], nd) ? a[j++] : a[i++];
            while (i < mid) b[k++] = a[i++];
            while (j < hi) b[k++] = a[j++];
        }
        ck_chunk *t = a;
        a = b;
        b = t;
    }
    if (a != ch) memcpy(ch, a, n * sizeof *ch);
    free(tmp);
    ck_mem_release(&f->arena, bytes);
    return 0;
}

static int tensor_item(ckpt_file *f, ck_multi *m, const char *fqn, const ckpt_value *md,
                       const ck_map *keys, const sinfo *infos, ckpt_error *err)
{
    const ckpt_value *props = field(md, "properties");
    const ckpt_value *pst = props ? ckpt_object_state(props) : NULL;
    const ckpt_value *dtv = NULL;
    if (pst && pst->kind == CKPT_V_TUPLE && pst->u.seq.n >= 1) dtv = pst->u.seq.v[0];
    if (pst && pst->kind == CKPT_V_DICT) dtv = ck_dict_get(pst, "dtype");
    if (!dtv || dtv->kind != CKPT_V_GLOBAL || dtv->gid != CK_G_DTYPE)
        return ck_fail(err, CKPT_E_FORMAT, -1, "DCP tensor '%.80s': no dtype in its properties",
                       fqn);
    ckpt_dtype dt = (ckpt_dtype)dtv->aux;
    int64_t shape[64];
    uint32_t nd;
    if (size_of(field(md, "size"), shape, f->opt.max_rank, &nd))
        return ck_fail(err, CKPT_E_FORMAT, -1,
                       "DCP tensor '%.80s': its size is not a torch.Size of at most %u dimensions",
                       fqn, f->opt.max_rank);
    uint64_t total = 1;
    for (uint32_t i = 0; i < nd; i++)
        if (ck_mul_ovf(total, (uint64_t)shape[i], &total))
            return ck_fail(err, CKPT_E_LIMIT, -1, "DCP tensor '%.80s': element count overflows",
                           fqn);
    const ckpt_value *cl = field(md, "chunks");
    if (!cl || cl->kind != CKPT_V_LIST)
        return ck_fail(err, CKPT_E_FORMAT, -1, "DCP tensor '%.80s' has no chunk list", fqn);
    size_t nc = cl->u.seq.n;
    if (nc > f->opt.max_entries || nc > UINT32_MAX)
        return ck_fail(err, CKPT_E_LIMIT, -1, "DCP tensor '%.80s' has %zu chunks (max_entries %u)",
                       fqn, nc, f->opt.max_entries);
    if (nc == 0 && total)
        return ck_fail(err, CKPT_E_FORMAT, -1, "DCP tensor '%.80s' has no chunks", fqn);
    ck_chunk *ch = ck_alloc(&f->arena, (nc ? nc : 1) * sizeof *ch);
    if (!ch) return oom(err);
    uint64_t sum = 0, *counts = ck_alloc(&f->arena, (nc ? nc : 1) * sizeof *counts);
    if (!counts) return oom(err);
    for (size_t i = 0; i < nc; i++) {
        CK_TRY(chunk_geom(f, fqn, nd, shape, cl->u.seq.v[i], i, &ch[i], &counts[i], err));
        sum += counts[i];
    }
    CK_TRY(check_overlap(f, m, fqn, ch, counts, nc, nd, err));
    if (sum != total)
        return ck_fail(err, CKPT_E_FORMAT, -1,
                       "DCP tensor '%.80s': its chunks cover %llu of its %llu elements (a gap)",
                       fqn, (unsigned long long)sum, (unsigned long long)total);
    for (size_t i = 0; i < nc; i++)
        CK_TRY(chunk_store(f, m, fqn, dt, nd, i, keys, infos, &ch[i], counts[i], err));
    CK_TRY(order_chunks(f, ch, counts, &nc, nd, err));
    return ck_multi_add_chunked(f, m, fqn, dt, nd, shape, ch, nc, err);
}

static int bytes_item(ckpt_file *f, ck_multi *m, const char *fqn, const ck_map *keys,
                      const sinfo *infos, ckpt_error *err)
{
    const sinfo *si = find_info(f, keys, infos, fqn, NULL, 0, true);
    if (!si)
        return ck_fail(err, CKPT_E_FORMAT, -1, "DCP value '%.80s' has no entry in storage_data",
                       fqn);
    size_t rec, had = m->nrecs;
    int rc = ck_multi_record(f, m, si->part, si->off, si->len, &rec, err);
    const ckpt_file *e = rc ? NULL : ck_multi_record_get(f, rec, err);
    if (!e) {
        ck_err_prefix(err, "DCP value '%.60s'", fqn);
        return -1;
    }
    if (m->nrecs > had) m->meta_bytes += e->pk.pickle_bytes;
    m->recs[rec].once = true;
    /* copied, and the record closed once read (opened again to verify) */
    const ckpt_value *r = ckpt_root(e);
    uint64_t budget = f->opt.max_expansion;
    ckpt_value *v = r ? ck_multi_copy_value(f, r, 0, &budget, err) : ck_new(&f->pk, CKPT_V_NONE);
    ck_multi_record_put(f, rec);
    if (!v) {
        if (r) ck_err_prefix(err, "DCP value '%.60s'", fqn);
        return r ? -1 : oom(err);
    }
    return ck_multi_add_value(f, m, fqn, v, err);
}

int ck_dcp_open(ckpt_file *f, ck_multi *m, const char *dir, ckpt_error *err)
{
    size_t dl = strlen(dir);
    char *path = ck_alloc(&f->arena, dl + 11);
    if (!path) return oom(err);
    memcpy(path, dir, dl);
    memcpy(path + dl, "/.metadata", 11);
    struct stat st;
    if (lstat(path, &st) != 0 || !S_ISREG(st.st_mode))
        return ck_fail(err, CKPT_E_FORMAT, -1, ".metadata is not a regular file");
    m->meta_size = (uint64_t)st.st_size;
    ck_multi_input(f, m, m->meta_size);
    /* a file of the folder's budget, closed once read: the composite keeps
     * copies of what it needs (names, shapes, chunks) */
    ck_source src;
    ckpt_file *mf = NULL;
    if (ck_source_open_path(&src, path, f->opt.use_mmap != 0, err) == 0)
        mf = ck_open_child(f, &src, true, err);
    if (!mf) {
        ck_err_prefix(err, ".metadata");
        return -1;
    }
    m->meta_bytes += mf->pk.pickle_bytes;
    int r = 0;
    for (size_t i = 0; r == 0 && i < ckpt_global_count(mf); i++) {
        const ckpt_global_ref *g = ckpt_global_at(mf, i);
        if (!allowed_global(g->module, g->name))
            r = ck_fail(err, CKPT_E_FORMAT, g->offset,
                        ".metadata names the global %.80s.%.80s, which a DCP .metadata never "
                        "holds",
                        g->module, g->name);
    }
    const ckpt_value *root = ckpt_root(mf), *sdm = NULL;
    if (r == 0 && !is_class(root, "Metadata"))
        r = ck_fail(err, CKPT_E_FORMAT, -1, ".metadata does not hold a DCP Metadata object");
    if (r == 0) sdm = field(root, "state_dict_metadata");
    if (r == 0 && (!sdm || sdm->kind != CKPT_V_DICT))
        r = ck_fail(err, CKPT_E_FORMAT, -1, ".metadata has no state_dict_metadata dict");
    ck_map keys = {0};
    sinfo *infos = NULL;
    if (r == 0) r = read_storage_data(f, m, field(root, "storage_data"), &keys, &infos, err);
    for (size_t i = 0; r == 0 && i < sdm->u.seq.n / 2; i++) {
        const ckpt_value *k = sdm->u.seq.v[2 * i], *md = sdm->u.seq.v[2 * i + 1];
        if (k->kind != CKPT_V_STR) {
            r = ck_fail(err, CKPT_E_FORMAT, -1, ".metadata: item %zu has no name", i);
        } else if (is_class(md, "TensorStorageMetadata")) {
            r = tensor_item(f, m, k->u.s.p, md, &keys, infos, err);
        } else if (is_class(md, "BytesStorageMetadata")) {
            r = bytes_item(f, m, k->u.s.p, &keys, infos, err);
        } else {
            const char *cls = ckpt_value_class(md);
            r = ck_fail(err, CKPT_E_FORMAT, -1, "DCP item '%.80s' is a %s, not tensor or bytes",
                        k->u.s.p, cls ? cls : ckpt_kind_name((ckpt_kind)md->kind));
        }
    }
    ck_map_free(&keys);
    ckpt_close(mf);
    return r;
}
