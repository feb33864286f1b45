/*
 * storage.c - layer 3 (torch): the storage table and torch's storage
 * references.  Storages by key; the persistent id a pickle gives a storage
 * (ZIP's 5 fields, the legacy stream's 6 with views), parsed once for every
 * container, which only says where the bytes are (a binder); reads through
 * the container that opened the file.
 */
#include "torch.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int ck_storage_get(ckpt_file *f, const char *key, size_t klen, size_t *idx, bool *created,
                   ckpt_error *err)
{
    size_t i;
    if (ck_map_get(&f->storage_keys, key, klen, &i)) {
        *idx = i;
        *created = false;
        return 0;
    }
    CK_TRY(ck_storage_new(f, key, klen, idx, err));
    if (ck_map_put(&f->storage_keys, f->storages[*idx].pub.key, klen, *idx))
        return ck_fail(err, CKPT_E_NOMEM, -1, "out of memory");
    *created = true;
    return 0;
}

int ck_storage_new(ckpt_file *f, const char *key, size_t klen, size_t *idx, ckpt_error *err)
{
    return ck_storage_add(f, key, klen, true, idx, err);
}

int ck_storage_add(ckpt_file *f, const char *key, size_t klen, bool copy, size_t *idx,
                   ckpt_error *err)
{
    if (f->nstorages >= f->opt.max_entries || f->nstorages >= INT32_MAX) /* root: int32_t */
        return ck_fail(err, CKPT_E_LIMIT, -1, "more than %u storages (max_entries)",
                       f->opt.max_entries);
    CK_TRY(ck_grow((void **)&f->storages, &f->cap_storages, f->nstorages + 1, sizeof *f->storages,
                   err));
    ck_pages_ahead(f->storages, f->cap_storages * sizeof *f->storages,
                   f->nstorages * sizeof *f->storages, (f->nstorages + 1) * sizeof *f->storages);
    ck_storage *s = &f->storages[f->nstorages];
    memset(s, 0, sizeof *s);
    s->pub.key = copy ? ck_strndup(&f->arena, key, klen) : key;
    if (!s->pub.key) return ck_fail(err, CKPT_E_NOMEM, -1, "out of memory");
    s->pub.file_offset = -1;
    s->root = -1;
    s->decl_pos = -1; /* or a record, or a view's offset, once known */
    *idx = f->nstorages++;
    return 0;
}

/* Parse ('storage', StorageClass, key, location, numel[, view]) into its
 * parts, shared by ZIP and the legacy stream. */
typedef struct storage_pid {
    ckpt_value *cls;
    char key[64];
    size_t klen;
    int64_t numel;
    ckpt_value *view;
} storage_pid;

static int key_text(const ckpt_value *v, char *buf, size_t cap, size_t *n)
{
    if (v->kind == CKPT_V_STR || v->kind == CKPT_V_BYTES) {
        if (v->u.s.n >= cap) return -1;
        memcpy(buf, v->u.s.p, v->u.s.n);
        buf[v->u.s.n] = 0;
        *n = v->u.s.n;
        return 0;
    }
    if (v->kind == CKPT_V_INT) {
        int k = snprintf(buf, cap, "%lld", (long long)v->u.i);
        *n = (size_t)k;
        return 0;
    }
    return -1;
}

static int parse_pid(ckpt_value *pid, int64_t pos, bool legacy, storage_pid *out, ckpt_error *err)
{
    if (pid->kind != CKPT_V_TUPLE || pid->u.seq.n < 5 || !ck_is_text(pid->u.seq.v[0], "storage"))
        return ck_fail(err, CKPT_E_PICKLE, pos, "persistent id is not a storage reference");
    ckpt_value **a = pid->u.seq.v;
    if (a[1]->kind != CKPT_V_GLOBAL || a[1]->gid != CK_G_STORAGE_CLASS)
        return ck_fail(err, CKPT_E_UNSUPPORTED, pos, "unknown storage class %s",
                       a[1]->kind == CKPT_V_GLOBAL ? a[1]->cls
                                                   : ckpt_kind_name((ckpt_kind)a[1]->kind));
    out->cls = a[1];
    if (key_text(a[2], out->key, sizeof out->key, &out->klen))
        return ck_fail(err, CKPT_E_PICKLE, pos, "storage key is not a short string");
    if (!ck_as_int(a[4], &out->numel) || out->numel < 0)
        return ck_fail(err, CKPT_E_PICKLE, pos, "storage size is not a non-negative integer");
    out->view = NULL;
    if (legacy) {
        if (pid->u.seq.n != 6)
            return ck_fail(err, CKPT_E_PICKLE, pos, "legacy storage id has %zu fields, not 6",
                           pid->u.seq.n);
        if (a[5]->kind != CKPT_V_NONE) out->view = a[5];
    } else if (pid->u.seq.n != 5) {
        return ck_fail(err, CKPT_E_PICKLE, pos, "storage id has %zu fields, not 5", pid->u.seq.n);
    }
    return 0;
}

static int storage_size(ckpt_file *f, bool legacy, ckpt_dtype dt, int64_t numel, int64_t pos,
                        uint64_t *nbytes, ckpt_error *err)
{
    if (ck_mul_ovf((uint64_t)numel, ck_dtype_size(dt), nbytes))
        return ck_fail(err, CKPT_E_LIMIT, pos, "storage size overflows");
    if (*nbytes > f->src.size && legacy) /* ZIP: checked against its record by the binder */
        return ck_fail(err, CKPT_E_FORMAT, pos,
                       "storage of %llu bytes is larger than the file (%llu)",
                       (unsigned long long)*nbytes, (unsigned long long)f->src.size);
    return 0;
}

ckpt_value *ck_storage_value(ckpt_file *f, size_t idx, ckpt_error *err)
{
    ckpt_value *v = ck_new(&f->pk, CKPT_V_STORAGE);
    if (!v) {
        ck_fail(err, CKPT_E_NOMEM, -1, "out of memory");
        return NULL;
    }
    v->u.handle = idx;
    v->aux = (uint8_t)f->storages[idx].pub.dtype; /* this reference's class: */
    v->aux2 = f->storages[idx].untyped;           /* the storage's unless told */
    return v;
}

/* The storage a persistent id names: bound (or found by key), made when new,
 * its size checked against what an earlier id declared. */
static int storage_ref(ckpt_file *f, const ckpt_value *cls, const char *key, size_t klen,
                       int64_t numel, int64_t pos, bool legacy, const ck_storage_binder *b,
                       size_t *idx, ckpt_error *err)
{
    ckpt_dtype dt = (ckpt_dtype)cls->aux;
    uint64_t nbytes;
    bool created;
    CK_TRY(storage_size(f, legacy, dt, numel, pos, &nbytes, err));
    if (b)
        CK_TRY(b->bind(f, b->ud, key, klen, nbytes, pos, idx, &created, err));
    else
        CK_TRY(ck_storage_get(f, key, klen, idx, &created, err));
    ck_storage *s = &f->storages[*idx];
    if (created) {
        s->pub.dtype = dt;
        s->untyped = cls->aux2;
        s->pub.nbytes = nbytes;        /* numel elements: ck_storage_declared() */
        if (legacy) s->decl_pos = pos; /* a ZIP storage's word is its record */
    } else if (ck_storage_declared(s) != (uint64_t)numel && s->root < 0) {
        return ck_fail(err, CKPT_E_FORMAT, pos,
                       "storage '%s' declared with %lld elements, earlier with %llu", key,
                       (long long)numel, (unsigned long long)ck_storage_declared(s));
    }
    return 0;
}

int ck_storage_ref(ckpt_file *f, const ckpt_value *cls, const char *key, size_t klen, int64_t numel,
                   int64_t pos, const ck_storage_binder *b, size_t *idx, ckpt_error *err)
{
    return storage_ref(f, cls, key, klen, numel, pos, false, b, idx, err);
}

ckpt_value *ck_storage_pid(ckpt_file *f, ckpt_value *pid, int64_t pos, bool legacy,
                           const ck_storage_binder *b, ckpt_error *err)
{
    if (legacy && pid->kind == CKPT_V_TUPLE && pid->u.seq.n >= 2 &&
        ck_is_text(pid->u.seq.v[0], "module"))
        return pid->u.seq.v[1]; /* the module's class, source is not checked */
    storage_pid p;
    if (parse_pid(pid, pos, legacy, &p, err)) return NULL;
    ckpt_dtype dt = (ckpt_dtype)p.cls->aux;
    size_t idx;
    if (storage_ref(f, p.cls, p.key, p.klen, p.numel, pos, legacy, b, &idx, err)) return NULL;
    ck_storage *s = &f->storages[idx];
    if (!p.view) {
        /* torch 2.x writes one storage as ByteStorage for a uint8 tensor and
         * as UntypedStorage for a bits8/float8/... view of it: each reference
         * keeps its own class */
        ckpt_value *v = ck_storage_value(f, idx, err);
        if (v) {
            v->aux = (uint8_t)dt;
            v->aux2 = p.cls->aux2;
        }
        return v;
    }
    /* legacy view: (view_key, offset, size) in elements of the root */
    ckpt_value *vm = p.view;
    int64_t voff, vsize;
    char vkey[64];
    size_t vklen;
    if (vm->kind != CKPT_V_TUPLE || vm->u.seq.n != 3 ||
        key_text(vm->u.seq.v[0], vkey, sizeof vkey, &vklen) || !ck_as_int(vm->u.seq.v[1], &voff) ||
        !ck_as_int(vm->u.seq.v[2], &vsize) || voff < 0 || vsize < 0) {
        ck_fail(err, CKPT_E_PICKLE, pos, "bad storage view metadata");
        return NULL;
    }
    uint64_t declared = ck_storage_declared(s);
    if ((uint64_t)voff > declared || (uint64_t)vsize > declared - (uint64_t)voff) {
        ck_fail(err, CKPT_E_FORMAT, pos,
                "storage view [%lld, +%lld) lies outside storage '%s' of %llu elements",
                (long long)voff, (long long)vsize, p.key, (unsigned long long)declared);
        return NULL;
    }
    size_t root = idx, vidx;
    bool created;
    if (ck_storage_get(f, vkey, vklen, &vidx, &created, err)) return NULL;
    ck_storage *vs = &f->storages[vidx];
    s = &f->storages[root];
    if (created) {
        if (vidx == root) {
            ck_fail(err, CKPT_E_FORMAT, pos, "storage view '%s' is its own root", vkey);
            return NULL;
        }
        size_t es = ck_dtype_size(s->pub.dtype);
        vs->pub.dtype = s->pub.dtype;
        vs->root = (int32_t)root;
        vs->view_off = (uint64_t)voff * es;
        vs->pub.nbytes = (uint64_t)vsize * es; /* vsize elements */
    } else if (vs->root != (int64_t)root) {
        ck_fail(err, CKPT_E_FORMAT, pos, "storage view '%s' reused with another root", vkey);
        return NULL;
    }
    return ck_storage_value(f, vidx, err);
}

int ck_storage_read(const ckpt_file *f, const ck_storage *s, uint64_t off, void *buf, size_t n,
                    ckpt_error *err)
{
    while (s->root >= 0) {
        off += s->view_off;
        s = &f->storages[s->root];
    }
    if (off > s->pub.nbytes || n > s->pub.nbytes - off)
        return ck_fail(err, CKPT_E_FORMAT, -1, "read outside storage '%s'", s->pub.key);
    if (f->storage_read) return f->storage_read(f, s, off, buf, n, err);
    return ck_read(&f->src, ck_storage_data_off(s) + off, buf, n, "storage data", err);
}
