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
 * again when a read needs them, multi.c).
 */
#include "multi.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define DCP_MOD "torch.distributed.checkpoint."
#define DCP_MAX_CHUNKS 65536u /* per tensor: the overlap check is quadratic */

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

typedef struct chunk_at {
    int64_t off0;
    size_t i;
} chunk_at;

static int by_first_offset(const void *a, const void *b)
{
    int64_t x = ((const chunk_at *)a)->off0, y = ((const chunk_at *)b)->off0;
    return x < y ? -1 : x > y;
}

/* No two non-empty chunks share an element: a sweep along dimension 0 (a
 * split along it, the usual case, costs n log n). */
static int check_overlap(ckpt_file *f, const char *fqn, const ck_chunk *ch, const uint64_t *counts,
                         size_t nc, uint32_t nd, ckpt_error *err)
{
    if (nc < 2 || nd == 0) return 0; /* scalars: the element count tells */
    chunk_at *ix = ck_alloc(&f->arena, nc * sizeof *ix);
    if (!ix) return oom(err);
    for (size_t i = 0; i < nc; i++) ix[i] = (chunk_at){ch[i].off[0], i};
    qsort(ix, nc, sizeof *ix, by_first_offset);
    for (size_t a = 0; a < nc; a++) {
        const ck_chunk *c = &ch[ix[a].i];
        if (!counts[ix[a].i]) continue;
        for (size_t b = a + 1; b < nc && ix[b].off0 < c->off[0] + c->size[0]; b++)
            if (counts[ix[b].i] && overlap(c, &ch[ix[b].i], nd)) {
                size_t i = ix[a].i < ix[b].i ? ix[a].i : ix[b].i;
                size_t j = ix[a].i < ix[b].i ? ix[b].i : ix[a].i;
                return ck_fail(err, CKPT_E_FORMAT, -1,
                               "DCP tensor '%.80s': chunks %zu and %zu overlap", fqn, i, j);
            }
    }
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
    if (nc > DCP_MAX_CHUNKS || nc > f->opt.max_entries)
        return ck_fail(err, CKPT_E_LIMIT, -1, "DCP tensor '%.80s' has %zu chunks (at most %u)", fqn,
                       nc, DCP_MAX_CHUNKS);
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
    CK_TRY(check_overlap(f, fqn, ch, counts, nc, nd, err));
    if (sum != total)
        return ck_fail(err, CKPT_E_FORMAT, -1,
                       "DCP tensor '%.80s': its chunks cover %llu of its %llu elements (a gap)",
                       fqn, (unsigned long long)sum, (unsigned long long)total);
    for (size_t i = 0; i < nc; i++)
        CK_TRY(chunk_store(f, m, fqn, dt, nd, i, keys, infos, &ch[i], counts[i], err));
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
