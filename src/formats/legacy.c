/*
 * legacy.c - layer 4 (formats): the legacy pickle stream, reached through
 * plain.c once the first pickle is the magic number (PyTorch 0.1.10 .. 1.5, and any later
 * torch.save with _use_new_zipfile_serialization=False).
 *
 *   pickle  magic number 0x1950a86a20f9469cfc6c
 *   pickle  protocol version 1001
 *   pickle  sys_info {'protocol_version', 'little_endian', 'type_sizes'}
 *   pickle  the object; storages are persistent ids
 *           ('storage', StorageClass, root_key, location, numel, view_metadata)
 *   pickle  list of storage keys
 *   then per key, in that order: int64 LE element count, count * elsize bytes
 *
 * Storage data is little-endian.  The element count in the file must equal
 * the one the pickle declared.
 */
#include "formats.h"

#include <string.h>

#define LEGACY_MAGIC "119547037146038801333356" /* 0x1950a86a20f9469cfc6c */

static ckpt_value *legacy_pid(ckpt_file *f, void *ud, ckpt_value *pid, int64_t pos, ckpt_error *err)
{
    (void)ud;
    return ck_storage_pid(f, pid, pos, true, NULL, err); /* storages by key */
}

/* Is this the magic number pickle?  (Used to tell legacy from plain.) */
bool ck_legacy_magic(const ckpt_value *v)
{
    return v && v->kind == CKPT_V_BIGINT && strcmp(v->u.s.p, LEGACY_MAGIC) == 0;
}

int ck_legacy_open(ckpt_file *f, ckpt_error *err)
{
    f->format = CKPT_FORMAT_LEGACY;
    uint64_t off = 0, used;
    ckpt_value *v;
    CK_TRY(ck_torch_load(f, off, f->src.size, "legacy:magic", NULL, NULL, &v, &used, err));
    if (!ck_legacy_magic(v))
        return ck_fail(err, CKPT_E_FORMAT, 0, "legacy stream: bad magic number");
    off += used;
    int64_t pos = (int64_t)off;
    CK_TRY(ck_torch_load(f, off, f->src.size, "legacy:protocol", NULL, NULL, &v, &used, err));
    int64_t proto;
    if (!ck_as_int(v, &proto) || proto != 1001)
        return ck_fail(err, CKPT_E_FORMAT, pos, "legacy stream: protocol version is not 1001");
    f->version = "1001";
    off += used;
    pos = (int64_t)off;
    CK_TRY(ck_torch_load(f, off, f->src.size, "legacy:sys_info", NULL, NULL, &v, &used, err));
    if (v->kind != CKPT_V_DICT)
        return ck_fail(err, CKPT_E_FORMAT, pos, "legacy stream: sys_info is not a dict");
    off += used;
    f->pickle_label = "legacy:object";
    CK_TRY(ck_torch_load(f, off, f->src.size, "legacy:object", legacy_pid, NULL, &f->root, &used,
                         err));
    off += used;
    pos = (int64_t)off;
    ckpt_value *keys;
    CK_TRY(
        ck_torch_load(f, off, f->src.size, "legacy:storage keys", NULL, NULL, &keys, &used, err));
    off += used;
    if (keys->kind != CKPT_V_LIST && keys->kind != CKPT_V_TUPLE)
        return ck_fail(err, CKPT_E_FORMAT, pos, "legacy stream: storage key list is not a list");
    ck_window w = {.src = &f->src};
    for (size_t i = 0; i < keys->u.seq.n; i++) {
        ckpt_value *k = keys->u.seq.v[i];
        size_t idx;
        if ((k->kind != CKPT_V_STR && k->kind != CKPT_V_BYTES) ||
            !ck_map_get(&f->storage_keys, k->u.s.p, k->u.s.n, &idx)) {
            ck_win_free(&w);
            return ck_fail(err, CKPT_E_FORMAT, pos,
                           "legacy stream: storage key %zu is not used by the object", i);
        }
        ck_storage *s = &f->storages[idx];
        if (s->root >= 0 || s->resolved) {
            ck_win_free(&w);
            return ck_fail(err, CKPT_E_FORMAT, pos,
                           "legacy stream: storage '%s' listed twice or is a view", s->pub.key);
        }
        const uint8_t *h = ck_win(&w, off, 8, "legacy storage header", err);
        if (!h) {
            ck_win_free(&w);
            return -1;
        }
        uint64_t count = ck_le64(h);
        if (count != ck_storage_declared(s)) {
            ck_win_free(&w);
            return ck_fail(err, CKPT_E_FORMAT, (int64_t)off,
                           "legacy storage '%s' holds %llu elements but the pickle declared %llu",
                           s->pub.key, (unsigned long long)count,
                           (unsigned long long)ck_storage_declared(s));
        }
        off += 8;
        if (s->pub.nbytes > f->src.size - off) {
            ck_win_free(&w);
            return ck_fail(err, CKPT_E_FORMAT, (int64_t)off,
                           "legacy storage '%s' (%llu bytes) runs past the end of the file",
                           s->pub.key, (unsigned long long)s->pub.nbytes);
        }
        s->pub.file_offset = (int64_t)off;
        s->resolved = true;
        off += s->pub.nbytes;
    }
    ck_win_free(&w);
    if (off < f->src.size)
        CK_TRY(ck_note(&f->pk, "legacy stream: %llu bytes after the last storage",
                       (unsigned long long)(f->src.size - off)));
    if (off < f->src.size && f->opt.scan_all_pickles) /* a scan reads them as pickles */
        CK_TRY(ck_further_pickles(f, off, f->src.size, "legacy:trailing", 1, err));
    /* views take their place from their root; every root must have data */
    for (size_t i = 0; i < f->nstorages; i++) {
        ck_storage *s = &f->storages[i];
        if (s->root >= 0) continue;
        if (!s->resolved)
            return ck_fail(err, CKPT_E_FORMAT, s->decl_pos,
                           "legacy storage '%s' has no data in the file", s->pub.key);
    }
    for (size_t i = 0; i < f->nstorages; i++) {
        ck_storage *s = &f->storages[i];
        if (s->root < 0) continue;
        const ck_storage *r = &f->storages[s->root];
        s->pub.file_offset = r->pub.file_offset + (int64_t)s->view_off;
        s->resolved = true;
    }
    return 0;
}
