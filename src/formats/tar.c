/*
 * tar.c - layer 4 (formats): the TAR container (torch.save before PyTorch
 * 0.1.10; old torchvision weights; ops: ck_format_tar).  A ustar/PAX archive of four members:
 *
 *   sys_info  pickle {'protocol_version': 1000, 'little_endian', 'type_sizes'}
 *   storages  pickle N; N x [pickle (key, location, StorageClass),
 *             int64 count, count * elsize bytes]; pickle [(view_key,
 *             root_key, offset, numel), ...]
 *   tensors   pickle M; M x [pickle (key, storage_key, TensorClass),
 *             int32 ndim, 4 pad, ndim x int64 size, ndim x int64 stride,
 *             int64 storage_offset]
 *   pickle    the object; a persistent id is str(tensor_key)
 *
 * Members are located by their headers and read in place: nothing holds the
 * archive in memory.
 */
#include "formats.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct member {
    uint64_t off, size;
    bool found;
} member;

typedef struct tar_ctx {
    ck_map tensors; /* decimal key -> index in vals */
    ckpt_value **vals;
    size_t nvals, cap;
} tar_ctx;

static bool octal(const uint8_t *p, size_t n, uint64_t *out)
{
    if (n && (p[0] & 0x80)) {          /* GNU base-256 */
        if (p[0] & 0x40) return false; /* negative */
        uint64_t v = p[0] & 0x3f;
        for (size_t i = 1; i < n; i++) {
            if (v >> 56) return false;
            v = (v << 8) | p[i];
        }
        *out = v;
        return true;
    }
    size_t i = 0;
    while (i < n && p[i] == ' ') i++;
    uint64_t v = 0;
    bool any = false;
    for (; i < n && p[i] >= '0' && p[i] <= '7'; i++) {
        if (v >> 60) return false;
        v = v * 8 + (uint64_t)(p[i] - '0');
        any = true;
    }
    for (; i < n; i++)
        if (p[i] != ' ' && p[i] != 0) return false;
    *out = v;
    return any || true;
}

static bool checksum_ok(const uint8_t *h)
{
    uint64_t want;
    if (!octal(h + 148, 8, &want)) return false;
    uint64_t sum = 0;
    for (int i = 0; i < 512; i++) sum += (i >= 148 && i < 156) ? ' ' : h[i];
    return sum == want;
}

static int tar_bid(const uint8_t *b, size_t n, uint64_t size)
{
    (void)size;
    if (n < 512) return false;
    bool zero = true;
    for (int i = 0; i < 512; i++)
        if (b[i]) zero = false;
    return !zero && checksum_ok(b);
}

/* Parse "len key=value\n" PAX records for path and size. */
static void pax(const uint8_t *p, size_t n, char *path, size_t pcap, uint64_t *size, bool *has_size)
{
    size_t i = 0;
    while (i < n) {
        size_t j = i, len = 0;
        while (j < n && p[j] >= '0' && p[j] <= '9' && len < 1000000)
            len = len * 10 + (size_t)(p[j++] - '0');
        if (j >= n || p[j] != ' ' || len == 0 || len > n - i) return;
        const uint8_t *kv = p + j + 1, *end = p + i + len - 1; /* end at '\n' */
        if (kv > end) return; /* a record shorter than its own length field */
        const uint8_t *eq = memchr(kv, '=', (size_t)(end - kv));
        if (eq) {
            size_t kl = (size_t)(eq - kv), vl = (size_t)(end - eq - 1);
            if (kl == 4 && memcmp(kv, "path", 4) == 0 && vl < pcap) {
                memcpy(path, eq + 1, vl);
                path[vl] = 0;
            } else if (kl == 4 && memcmp(kv, "size", 4) == 0) {
                uint64_t v = 0;
                bool ok = vl > 0 && vl < 20;
                for (size_t k = 0; ok && k < vl; k++) {
                    if (eq[1 + k] < '0' || eq[1 + k] > '9')
                        ok = false;
                    else
                        v = v * 10 + (uint64_t)(eq[1 + k] - '0');
                }
                if (ok) {
                    *size = v;
                    *has_size = true;
                }
            }
        }
        i += len;
    }
}

static int find_members(ckpt_file *f, member m[4], ckpt_error *err)
{
    static const char *const names[4] = {"sys_info", "storages", "tensors", "pickle"};
    uint64_t off = 0;
    char pax_path[256] = "";
    uint64_t pax_size = 0;
    bool has_pax_size = false, has_pax_path = false;
    uint32_t count = 0;
    while (off + 512 <= f->src.size) {
        uint8_t h[512];
        CK_TRY(ck_read(&f->src, off, h, 512, "TAR header", err));
        bool zero = true;
        for (int i = 0; i < 512; i++)
            if (h[i]) zero = false;
        if (zero) break;
        if (!checksum_ok(h))
            return ck_fail(err, CKPT_E_FORMAT, (int64_t)off, "TAR header checksum mismatch");
        if (++count > f->opt.max_entries)
            return ck_fail(err, CKPT_E_LIMIT, (int64_t)off,
                           "TAR has more than %u members (max_entries)", f->opt.max_entries);
        uint64_t size;
        if (!octal(h + 124, 12, &size))
            return ck_fail(err, CKPT_E_FORMAT, (int64_t)off + 124, "bad TAR size field");
        if (has_pax_size) size = pax_size;
        uint64_t data = off + 512;
        if (size > f->src.size - data)
            return ck_fail(err, CKPT_E_FORMAT, (int64_t)off,
                           "TAR member of %llu bytes runs past the end of the file",
                           (unsigned long long)size);
        char name[155 + 1 + 100 + 1]; /* prefix '/' name NUL */
        if (has_pax_path) {
            snprintf(name, sizeof name, "%s", pax_path);
        } else {
            size_t nl = strnlen((const char *)h, 100);
            size_t pl = memcmp(h + 257, "ustar", 5) == 0 ? strnlen((const char *)h + 345, 155) : 0;
            if (pl) {
                memcpy(name, h + 345, pl);
                name[pl] = '/';
                memcpy(name + pl + 1, h, nl);
                name[pl + 1 + nl] = 0;
            } else {
                memcpy(name, h, nl);
                name[nl] = 0;
            }
        }
        uint8_t type = h[156];
        if (type == 'x' || type == 'g' || type == 'L') {
            if (type != 'g') {
                size_t n = size > 65536 ? 65536 : (size_t)size;
                uint8_t *buf = malloc(n ? n : 1);
                if (!buf) return ck_fail(err, CKPT_E_NOMEM, -1, "out of memory");
                if (ck_read(&f->src, data, buf, n, "TAR extended header", err)) {
                    free(buf);
                    return -1;
                }
                if (type == 'x') {
                    pax(buf, n, pax_path, sizeof pax_path, &pax_size, &has_pax_size);
                    has_pax_path = pax_path[0] != 0;
                } else {
                    size_t l = strnlen((const char *)buf, n < 255 ? n : 255);
                    memcpy(pax_path, buf, l);
                    pax_path[l] = 0;
                    has_pax_path = true;
                }
                free(buf);
            }
        } else {
            if (type == '0' || type == 0 || type == '7') {
                for (int i = 0; i < 4; i++)
                    if (strcmp(name, names[i]) == 0) {
                        m[i].off = data;
                        m[i].size = size;
                        m[i].found = true;
                    }
            }
            has_pax_path = has_pax_size = false;
            pax_path[0] = 0;
        }
        uint64_t padded = (size + 511) & ~(uint64_t)511;
        off = data + padded;
    }
    for (int i = 0; i < 4; i++)
        if (!m[i].found)
            return ck_fail(err, CKPT_E_FORMAT, -1,
                           "TAR archive has no '%s' member: not a torch.save file", names[i]);
    return 0;
}

static ckpt_value *tar_pid(ckpt_file *f, void *ud, ckpt_value *pid, int64_t pos, ckpt_error *err)
{
    tar_ctx *c = ud;
    if (pid->kind == CKPT_V_TUPLE && pid->u.seq.n >= 1)
        return pid->u.seq.v[0]; /* a module's class */
    char key[32];
    size_t kn;
    if (pid->kind == CKPT_V_STR || pid->kind == CKPT_V_BYTES) {
        kn = pid->u.s.n < sizeof key ? pid->u.s.n : sizeof key - 1;
        memcpy(key, pid->u.s.p, kn);
    } else if (pid->kind == CKPT_V_INT) {
        kn = (size_t)snprintf(key, sizeof key, "%lld", (long long)pid->u.i);
    } else {
        ck_fail(err, CKPT_E_PICKLE, pos, "TAR persistent id is not a tensor key");
        return NULL;
    }
    size_t i;
    if (!ck_map_get(&c->tensors, key, kn, &i)) {
        ck_fail(err, CKPT_E_FORMAT, pos,
                "TAR pickle refers to tensor '%.*s', which is not in 'tensors'", (int)kn, key);
        return NULL;
    }
    (void)f;
    return c->vals[i];
}

static int int_of(const ckpt_value *v, int64_t *out)
{
    return ck_as_int(v, out) ? 0 : -1;
}

static int read_storages(ckpt_file *f, const member *m, ckpt_error *err)
{
    uint64_t off = m->off, end = m->off + m->size, used;
    ckpt_value *v;
    CK_TRY(ck_torch_load(f, off, end, "tar:storages", NULL, NULL, &v, &used, err));
    int64_t n;
    if (int_of(v, &n) || n < 0 || (uint64_t)n > m->size / 9)
        return ck_fail(err, CKPT_E_FORMAT, (int64_t)off, "TAR storages: bad storage count");
    off += used;
    for (int64_t i = 0; i < n; i++) {
        int64_t pos = (int64_t)off, key;
        CK_TRY(ck_torch_load(f, off, end, "tar:storages", NULL, NULL, &v, &used, err));
        off += used;
        if (v->kind != CKPT_V_TUPLE || v->u.seq.n != 3 || int_of(v->u.seq.v[0], &key) ||
            v->u.seq.v[2]->kind != CKPT_V_GLOBAL || v->u.seq.v[2]->gid != CK_G_STORAGE_CLASS)
            return ck_fail(err, CKPT_E_FORMAT, pos, "TAR storages: bad storage header");
        uint8_t h[8];
        if (end - off < 8)
            return ck_fail(err, CKPT_E_FORMAT, (int64_t)off, "TAR storages: truncated");
        CK_TRY(ck_read(&f->src, off, h, 8, "TAR storage size", err));
        uint64_t count = ck_le64(h), nbytes;
        ckpt_dtype dt = (ckpt_dtype)v->u.seq.v[2]->aux;
        off += 8;
        if (ck_mul_ovf(count, ck_dtype_size(dt), &nbytes) || nbytes > end - off)
            return ck_fail(err, CKPT_E_FORMAT, (int64_t)off - 8,
                           "TAR storage of %llu elements runs past its member",
                           (unsigned long long)count);
        char kb[32];
        size_t kn = (size_t)snprintf(kb, sizeof kb, "%lld", (long long)key);
        size_t idx;
        bool created;
        CK_TRY(ck_storage_get(f, kb, kn, &idx, &created, err));
        if (!created)
            return ck_fail(err, CKPT_E_FORMAT, pos, "TAR storage key %s appears twice", kb);
        ck_storage *s = &f->storages[idx];
        s->pub.dtype = dt;
        s->pub.nbytes = nbytes; /* count elements: ck_storage_declared() */
        s->pub.file_offset = (int64_t)off;
        s->resolved = true;
        off += nbytes;
    }
    int64_t pos = (int64_t)off;
    CK_TRY(ck_torch_load(f, off, end, "tar:storages", NULL, NULL, &v, &used, err));
    if (v->kind != CKPT_V_LIST && v->kind != CKPT_V_TUPLE)
        return ck_fail(err, CKPT_E_FORMAT, pos, "TAR storage views are not a list");
    for (size_t i = 0; i < v->u.seq.n; i++) {
        ckpt_value *e = v->u.seq.v[i];
        int64_t vk, rk, o, cnt;
        if (!e || e->kind != CKPT_V_TUPLE || e->u.seq.n != 4 || int_of(e->u.seq.v[0], &vk) ||
            int_of(e->u.seq.v[1], &rk) || int_of(e->u.seq.v[2], &o) ||
            int_of(e->u.seq.v[3], &cnt) || o < 0 || cnt < 0)
            return ck_fail(err, CKPT_E_FORMAT, pos, "TAR storage view %zu is malformed", i);
        char kb[32];
        size_t kn = (size_t)snprintf(kb, sizeof kb, "%lld", (long long)rk), ridx, vidx;
        if (!ck_map_get(&f->storage_keys, kb, kn, &ridx) || f->storages[ridx].root >= 0)
            return ck_fail(err, CKPT_E_FORMAT, pos, "TAR storage view %zu has no root storage %s",
                           i, kb);
        ck_storage *r = &f->storages[ridx];
        uint64_t declared = ck_storage_declared(r);
        if ((uint64_t)o > declared || (uint64_t)cnt > declared - (uint64_t)o)
            return ck_fail(err, CKPT_E_FORMAT, pos, "TAR storage view %zu lies outside its root",
                           i);
        kn = (size_t)snprintf(kb, sizeof kb, "%lld", (long long)vk);
        bool created;
        CK_TRY(ck_storage_get(f, kb, kn, &vidx, &created, err));
        if (!created)
            return ck_fail(err, CKPT_E_FORMAT, pos, "TAR storage key %s appears twice", kb);
        r = &f->storages[ridx];
        ck_storage *s = &f->storages[vidx];
        size_t es = ck_dtype_size(r->pub.dtype);
        s->pub.dtype = r->pub.dtype;
        s->root = (int32_t)ridx;
        s->view_off = (uint64_t)o * es;
        s->pub.nbytes = (uint64_t)cnt * es;
        s->pub.file_offset = r->pub.file_offset + (int64_t)s->view_off;
        s->resolved = true;
    }
    return 0;
}

static int read_tensors(ckpt_file *f, const member *m, tar_ctx *c, ckpt_error *err)
{
    uint64_t off = m->off, end = m->off + m->size, used;
    ckpt_value *v;
    CK_TRY(ck_torch_load(f, off, end, "tar:tensors", NULL, NULL, &v, &used, err));
    int64_t n;
    if (int_of(v, &n) || n < 0 || (uint64_t)n > m->size / 16)
        return ck_fail(err, CKPT_E_FORMAT, (int64_t)off, "TAR tensors: bad tensor count");
    off += used;
    for (int64_t i = 0; i < n; i++) {
        int64_t pos = (int64_t)off, key, sk;
        CK_TRY(ck_torch_load(f, off, end, "tar:tensors", NULL, NULL, &v, &used, err));
        off += used;
        if (v->kind != CKPT_V_TUPLE || v->u.seq.n != 3 || int_of(v->u.seq.v[0], &key) ||
            int_of(v->u.seq.v[1], &sk))
            return ck_fail(err, CKPT_E_FORMAT, pos, "TAR tensors: bad tensor header");
        uint8_t h[8];
        if (end - off < 8)
            return ck_fail(err, CKPT_E_FORMAT, (int64_t)off, "TAR tensors: truncated");
        CK_TRY(ck_read(&f->src, off, h, 8, "TAR tensor rank", err));
        int32_t nd = (int32_t)ck_le32(h);
        if (nd < 0 || (uint32_t)nd > f->opt.max_rank || nd > 64)
            return ck_fail(err, CKPT_E_LIMIT, (int64_t)off, "TAR tensor has %d dimensions%s", nd,
                           nd > 0 && nd <= 64 ? " (max_rank)" : "");
        off += 8;
        size_t need = (size_t)nd * 16 + 8;
        if (end - off < need)
            return ck_fail(err, CKPT_E_FORMAT, (int64_t)off, "TAR tensors: truncated");
        uint8_t buf[64 * 16 + 8];
        CK_TRY(ck_read(&f->src, off, buf, need, "TAR tensor shape", err));
        off += need;
        char kb[32];
        size_t kn = (size_t)snprintf(kb, sizeof kb, "%lld", (long long)sk), sidx;
        if (!ck_map_get(&f->storage_keys, kb, kn, &sidx))
            return ck_fail(err, CKPT_E_FORMAT, pos, "TAR tensor refers to missing storage %s", kb);
        int64_t *shape = NULL, *stride = NULL;
        if (nd) {
            shape = ck_alloc(&f->arena, (size_t)nd * 8);
            stride = ck_alloc(&f->arena, (size_t)nd * 8);
            if (!shape || !stride) return ck_fail(err, CKPT_E_NOMEM, -1, "out of memory");
        }
        for (int32_t d = 0; d < nd; d++) {
            shape[d] = (int64_t)ck_le64(buf + 8 * d);
            stride[d] = (int64_t)ck_le64(buf + 8 * (nd + d));
            if (shape[d] < 0 || stride[d] < 0)
                return ck_fail(err, CKPT_E_FORMAT, pos, "TAR tensor has a negative size or stride");
        }
        int64_t toff = (int64_t)ck_le64(buf + 16 * nd);
        if (toff < 0)
            return ck_fail(err, CKPT_E_FORMAT, pos, "TAR tensor has a negative storage offset");
        ck_tdef *t;
        CK_TRY(ck_tensor_new(f, sidx, f->storages[sidx].pub.dtype, (uint32_t)nd, shape, stride,
                             toff, pos, &t, err));
        ckpt_value *tv = ck_new(&f->pk, CKPT_V_TENSOR);
        if (!tv) return ck_fail(err, CKPT_E_NOMEM, -1, "out of memory");
        tv->u.ext = t;
        kn = (size_t)snprintf(kb, sizeof kb, "%lld", (long long)key);
        if (ck_map_get(&c->tensors, kb, kn, NULL))
            return ck_fail(err, CKPT_E_FORMAT, pos, "TAR tensor key %s appears twice", kb);
        char *ks = ck_strndup(&f->arena, kb, kn);
        if (!ks || ck_grow((void **)&c->vals, &c->cap, c->nvals + 1, sizeof *c->vals, err) ||
            ck_map_put(&c->tensors, ks, kn, c->nvals))
            return ck_fail(err, CKPT_E_NOMEM, -1, "out of memory");
        c->vals[c->nvals++] = tv;
    }
    return 0;
}

static int tar_open(ckpt_file *f, ckpt_error *err)
{
    f->format = CKPT_FORMAT_TAR;
    member m[4];
    memset(m, 0, sizeof m);
    CK_TRY(find_members(f, m, err));
    ckpt_value *v;
    uint64_t used;
    CK_TRY(ck_torch_load(f, m[0].off, m[0].off + m[0].size, "tar:sys_info", NULL, NULL, &v, &used,
                         err));
    if (v->kind != CKPT_V_DICT)
        return ck_fail(err, CKPT_E_FORMAT, (int64_t)m[0].off, "TAR sys_info is not a dict");
    f->version = "1000";
    CK_TRY(read_storages(f, &m[1], err));
    tar_ctx c;
    memset(&c, 0, sizeof c);
    int r = read_tensors(f, &m[2], &c, err);
    if (r == 0) {
        f->pickle_label = "tar:pickle";
        r = ck_torch_load(f, m[3].off, m[3].off + m[3].size, "tar:pickle", tar_pid, &c, &f->root,
                          &used, err);
        if (r == 0 && used < m[3].size && f->opt.scan_all_pickles) /* pickles after STOP */
            r = ck_further_pickles(f, m[3].off + used, m[3].off + m[3].size, "tar:pickle", 2, err);
    }
    ck_map_free(&c.tensors);
    free(c.vals);
    return r;
}

const ck_format ck_format_tar = {"tar", tar_bid, tar_open, NULL, NULL, NULL, NULL, NULL};
