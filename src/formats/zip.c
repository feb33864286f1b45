/*
 * zip.c - layer 4 (formats): the ZIP container, torch.save since PyTorch 1.6
 * and torch.jit.save (ops: ck_format_zip).
 *
 *   [local header 30 + name + extra ("FB" padding to 64)] [record bytes] ...
 *   [central directory: 46 + name + extra + comment per record]
 *   [ZIP64 end record 56] [ZIP64 locator 20] [end record 22 + comment]
 *
 * Every record sits under one root folder, named after the file or
 * "archive"; torch takes it from the first central directory entry, and so do
 * we.  Records: data.pkl (the object), data/<key> (one per storage), version,
 * byteorder ("little"/"big"), constants.pkl (TorchScript).  Sizes are read
 * from the central directory (local headers carry zeros when the data
 * descriptor flag is set); ZIP64 extra fields replace 0xFFFFFFFF values.
 */
#include "formats.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <pthread.h>
#include <zlib.h>

typedef struct ck_zip_entry {
    const char *name;
    size_t name_len;
    uint64_t comp_size, size, local_off, data_off;
    uint32_t crc;
    uint16_t method, flags;
    int64_t cd_pos;
} ck_zip_entry;

/* Inflate state: where one pass over a deflated record has got to.  One per
 * file (guarded by its mutex), and one per read that finds it busy. */
typedef struct ck_inflater ck_inflater;
struct ck_inflater {
    pthread_mutex_t lock;  /* the file's cursor: one reader at a time */
    z_stream zs;
    bool live;             /* zs is initialised */
    const ck_zip_entry *z; /* the record it is inflating */
    uint64_t in_pos, out_pos;
    uint8_t in[1 << 16], tmp[1 << 16];
};

/* The archive's index (ckpt_file.fmt_state). */
typedef struct zip_index {
    ck_zip_entry *zip;
    size_t nzip;
    ck_map zip_names;
    size_t *zip_storage;  /* per record: storage index + 1, 0 none */
    size_t *zip_data_num; /* "data/<n>" records by n: index + 1 (torch's keys are 0..N-1) */
    size_t nzip_data_num;
    ck_inflater *inflater; /* when records are deflated: sequential reads resume */
} zip_index;
#define ZI(f) ((zip_index *)(f)->fmt_state)

#define SIG_LOCAL 0x04034b50u
#define SIG_CENTRAL 0x02014b50u
#define SIG_EOCD 0x06054b50u
#define SIG_EOCD64 0x06064b50u
#define SIG_LOC64 0x07064b50u

static int find_eocd(ckpt_file *f, uint64_t *pos, uint8_t eocd[22], ckpt_error *err) {
    uint64_t size = f->src.size;
    if (size < 22) return ck_fail(err, CKPT_E_FORMAT, 0, "ZIP too short for an end of central directory record");
    uint64_t tail = size < 65557 ? size : 65557;
    uint8_t *buf = malloc((size_t)tail);
    if (!buf) return ck_fail(err, CKPT_E_NOMEM, -1, "out of memory");
    if (ck_read(&f->src, size - tail, buf, (size_t)tail, "ZIP end record", err)) {
        free(buf);
        return -1;
    }
    for (size_t i = (size_t)tail - 22 + 1; i-- > 0;) {
        if (ck_le32(buf + i) == SIG_EOCD) {
            uint16_t clen = ck_le16(buf + i + 20);
            if (i + 22 + clen > tail) continue; /* comment runs past the end */
            memcpy(eocd, buf + i, 22);
            *pos = size - tail + i;
            free(buf);
            return 0;
        }
    }
    free(buf);
    return ck_fail(err, CKPT_E_FORMAT, (int64_t)size, "ZIP end of central directory record not found");
}

/* Does a record name start with the root folder?  Returns the rest. */
static const char *strip_root(const char *name, size_t n, const char *root, size_t rn,
                              size_t *rest) {
    if (n <= rn || memcmp(name, root, rn) != 0 || name[rn] != '/') return NULL;
    *rest = n - rn - 1;
    return name + rn + 1;
}

static int parse_central(ckpt_file *f, ckpt_error *err) {
    uint8_t e[22] = {0};
    uint64_t eocd_pos = 0;
    CK_TRY(find_eocd(f, &eocd_pos, e, err));
    uint64_t entries = ck_le16(e + 10), cd_size = ck_le32(e + 12), cd_off = ck_le32(e + 16);
    if (ck_le16(e + 4) != 0 || ck_le16(e + 6) != 0)
        return ck_fail(err, CKPT_E_FORMAT, (int64_t)eocd_pos, "multi-disk ZIP archives are not supported");
    bool need64 = entries == 0xFFFF || cd_size == 0xFFFFFFFFu || cd_off == 0xFFFFFFFFu;
    uint64_t dir_end = eocd_pos; /* the directory must end before this */
    if (eocd_pos >= 20) {
        uint8_t loc[20];
        CK_TRY(ck_read(&f->src, eocd_pos - 20, loc, 20, "ZIP64 locator", err));
        if (ck_le32(loc) == SIG_LOC64) {
            uint64_t z_off = ck_le64(loc + 8);
            uint8_t z[56];
            if (z_off > eocd_pos - 20 || eocd_pos - 20 - z_off < 56)
                return ck_fail(err, CKPT_E_FORMAT, (int64_t)eocd_pos - 20,
                               "ZIP64 locator points outside the archive (%llu)",
                               (unsigned long long)z_off);
            CK_TRY(ck_read(&f->src, z_off, z, 56, "ZIP64 end record", err));
            if (ck_le32(z) != SIG_EOCD64)
                return ck_fail(err, CKPT_E_FORMAT, (int64_t)z_off, "bad ZIP64 end record signature");
            uint64_t e64 = ck_le64(z + 32), s64 = ck_le64(z + 40), o64 = ck_le64(z + 48);
            if ((entries != 0xFFFF && entries != e64) ||
                (cd_size != 0xFFFFFFFFu && cd_size != s64) ||
                (cd_off != 0xFFFFFFFFu && cd_off != o64))
                return ck_fail(err, CKPT_E_FORMAT, (int64_t)z_off,
                               "ZIP64 end record disagrees with the end record");
            entries = e64;
            cd_size = s64;
            cd_off = o64;
            need64 = false;
            dir_end = z_off;
        }
    }
    if (need64) return ck_fail(err, CKPT_E_FORMAT, (int64_t)eocd_pos, "ZIP64 end record missing");
    if (cd_off > dir_end || cd_size > dir_end - cd_off)
        return ck_fail(err, CKPT_E_FORMAT, (int64_t)eocd_pos,
                       "central directory (%llu bytes at %llu) lies outside the archive",
                       (unsigned long long)cd_size, (unsigned long long)cd_off);
    if (entries > f->opt.max_entries)
        return ck_fail(err, CKPT_E_LIMIT, (int64_t)eocd_pos, "ZIP has %llu records (limit %u)",
                       (unsigned long long)entries, f->opt.max_entries);
    if (entries * 46 > cd_size)
        return ck_fail(err, CKPT_E_FORMAT, (int64_t)eocd_pos,
                       "central directory of %llu bytes cannot hold %llu records",
                       (unsigned long long)cd_size, (unsigned long long)entries);
    if (entries == 0) return ck_fail(err, CKPT_E_FORMAT, (int64_t)eocd_pos, "ZIP archive is empty");

    ZI(f)->zip = calloc((size_t)entries, sizeof *ZI(f)->zip);
    if (!ZI(f)->zip) return ck_fail(err, CKPT_E_NOMEM, -1, "out of memory");
    ck_window w = {.src = &f->src};
    uint64_t p = cd_off, end = cd_off + cd_size;
    int rc = -1;
    for (uint64_t i = 0; i < entries; i++) {
        const uint8_t *h = ck_win(&w, p, 46, "central directory", err);
        if (!h) goto out;
        if (end - p < 46 || ck_le32(h) != SIG_CENTRAL) {
            ck_fail(err, CKPT_E_FORMAT, (int64_t)p, "bad central directory entry %llu",
                    (unsigned long long)i);
            goto out;
        }
        ck_zip_entry *z = &ZI(f)->zip[i];
        z->cd_pos = (int64_t)p;
        z->flags = ck_le16(h + 8);
        z->method = ck_le16(h + 10);
        z->crc = ck_le32(h + 16);
        z->comp_size = ck_le32(h + 20);
        z->size = ck_le32(h + 24);
        uint16_t nlen = ck_le16(h + 28), xlen = ck_le16(h + 30), clen = ck_le16(h + 32);
        z->local_off = ck_le32(h + 42);
        uint64_t total = 46ull + nlen + xlen + clen;
        if (total > end - p) {
            ck_fail(err, CKPT_E_FORMAT, (int64_t)p, "central directory entry %llu runs past the directory",
                    (unsigned long long)i);
            goto out;
        }
        h = ck_win(&w, p, (size_t)total, "central directory", err);
        if (!h) goto out;
        z->name = ck_strndup(&f->arena, (const char *)h + 46, nlen);
        if (!z->name) {
            ck_fail(err, CKPT_E_NOMEM, -1, "out of memory");
            goto out;
        }
        z->name_len = nlen;
        /* ZIP64 extra field */
        const uint8_t *x = h + 46 + nlen, *xe = x + xlen;
        while (xe - x >= 4) {
            uint16_t id = ck_le16(x), sz = ck_le16(x + 2);
            if ((size_t)(xe - x - 4) < sz) break;
            if (id == 1) {
                const uint8_t *q = x + 4, *qe = q + sz;
                uint64_t *fields[3] = {&z->size, &z->comp_size, &z->local_off};
                for (int k = 0; k < 3; k++) {
                    if (*fields[k] != 0xFFFFFFFFu) continue;
                    if (qe - q < 8) {
                        ck_fail(err, CKPT_E_FORMAT, (int64_t)p, "ZIP64 extra field of '%s' too short", z->name);
                        goto out;
                    }
                    *fields[k] = ck_le64(q);
                    q += 8;
                }
            }
            x += 4 + sz;
        }
        if (z->method != 0 && z->method != 8) {
            ck_fail(err, CKPT_E_UNSUPPORTED, (int64_t)p, "record '%s' uses compression method %u",
                    z->name, z->method);
            goto out;
        }
        if (z->flags & 1) {
            ck_fail(err, CKPT_E_UNSUPPORTED, (int64_t)p, "record '%s' is encrypted", z->name);
            goto out;
        }
        if (z->method == 0 && z->comp_size != z->size) {
            ck_fail(err, CKPT_E_FORMAT, (int64_t)p, "stored record '%s' has compressed size %llu but size %llu",
                    z->name, (unsigned long long)z->comp_size, (unsigned long long)z->size);
            goto out;
        }
        /* deflate expands at most 1032:1: a larger declared size is a lie that
         * would size buffers (data.pkl, strided reads) beyond any real data */
        if (z->method == 8 && z->comp_size < UINT64_MAX / 1032 - 1 && z->size > (z->comp_size + 1) * 1032) {
            ck_fail(err, CKPT_E_FORMAT, (int64_t)p,
                    "deflated record '%s' declares %llu bytes, more than its %llu compressed bytes can hold",
                    z->name, (unsigned long long)z->size, (unsigned long long)z->comp_size);
            goto out;
        }
        p += total;
        ZI(f)->nzip++;
        if (z->method == 8 && !ZI(f)->inflater) {
            ck_inflater *st = calloc(1, sizeof *st);
            if (!st || pthread_mutex_init(&st->lock, NULL) != 0) {
                free(st);
                ck_fail(err, CKPT_E_NOMEM, -1, "out of memory");
                goto out;
            }
            ZI(f)->inflater = st;
        }
    }
    /* local headers: where each record's bytes start */
    for (size_t i = 0; i < ZI(f)->nzip; i++) {
        ck_zip_entry *z = &ZI(f)->zip[i];
        if (z->local_off > cd_off || cd_off - z->local_off < 30) {
            ck_fail(err, CKPT_E_FORMAT, z->cd_pos, "local header of '%s' lies outside the archive (%llu)",
                    z->name, (unsigned long long)z->local_off);
            goto out;
        }
        const uint8_t *h = ck_win(&w, z->local_off, 30, "local header", err);
        if (!h) goto out;
        if (ck_le32(h) != SIG_LOCAL) {
            ck_fail(err, CKPT_E_FORMAT, (int64_t)z->local_off, "bad local header signature for '%s'", z->name);
            goto out;
        }
        uint64_t data = z->local_off + 30 + ck_le16(h + 26) + ck_le16(h + 28);
        if (data > cd_off || z->comp_size > cd_off - data) {
            ck_fail(err, CKPT_E_FORMAT, (int64_t)z->local_off,
                    "record '%s' (%llu bytes at %llu) runs into the central directory",
                    z->name, (unsigned long long)z->comp_size, (unsigned long long)data);
            goto out;
        }
        z->data_off = data;
    }
    rc = 0;
out:
    ck_win_free(&w);
    return rc;
}

/* "data/<n>" with n in canonical decimal below `limit`: torch's storage
 * records, looked up by number rather than hashed. */
static bool data_number(const char *s, size_t n, size_t limit, size_t *num) {
    if (n < 6 || memcmp(s, "data/", 5) != 0 || (s[5] == '0' && n > 6) || n - 5 > 18) return false;
    uint64_t v = 0;
    for (size_t i = 5; i < n; i++) {
        if (s[i] < '0' || s[i] > '9') return false;
        v = v * 10 + (uint64_t)(s[i] - '0');
    }
    if (v >= limit) return false;
    *num = (size_t)v;
    return true;
}

/* Index the records under the root folder by their name below it. */
static int index_records(ckpt_file *f, ckpt_error *err) {
    const char *first = ZI(f)->zip[0].name;
    const char *slash = memchr(first, '/', ZI(f)->zip[0].name_len);
    if (!slash)
        return ck_fail(err, CKPT_E_FORMAT, ZI(f)->zip[0].cd_pos,
                       "ZIP record '%s' is not inside a root folder: not a torch.save archive", first);
    size_t rn = (size_t)(slash - first);
    f->root_name = ck_strndup(&f->arena, first, rn);
    if (!f->root_name) return ck_fail(err, CKPT_E_NOMEM, -1, "out of memory");
    ZI(f)->zip_data_num = calloc(ZI(f)->nzip, sizeof *ZI(f)->zip_data_num);
    if (!ZI(f)->zip_data_num) return ck_fail(err, CKPT_E_NOMEM, -1, "out of memory");
    ZI(f)->nzip_data_num = ZI(f)->nzip;
    for (size_t i = 0; i < ZI(f)->nzip; i++) {
        size_t rest;
        const char *r = strip_root(ZI(f)->zip[i].name, ZI(f)->zip[i].name_len, f->root_name, rn, &rest);
        if (!r) continue;
        size_t num;
        if (data_number(r, rest, ZI(f)->nzip_data_num, &num)) { /* the common case, kept out of the hash map */
            if (ZI(f)->zip_data_num[num])
                return ck_fail(err, CKPT_E_FORMAT, ZI(f)->zip[i].cd_pos, "ZIP record '%s' appears twice", ZI(f)->zip[i].name);
            ZI(f)->zip_data_num[num] = i + 1;
            continue;
        }
        if (ck_map_get(&ZI(f)->zip_names, r, rest, NULL))
            return ck_fail(err, CKPT_E_FORMAT, ZI(f)->zip[i].cd_pos, "ZIP record '%s' appears twice",
                           ZI(f)->zip[i].name);
        if (ck_map_put(&ZI(f)->zip_names, r, rest, i)) return ck_fail(err, CKPT_E_NOMEM, -1, "out of memory");
    }
    return 0;
}

static const ck_zip_entry *record(const ckpt_file *f, const char *name) {
    size_t i, n = strlen(name);
    if (data_number(name, n, ZI(f)->nzip_data_num, &i)) return ZI(f)->zip_data_num[i] ? &ZI(f)->zip[ZI(f)->zip_data_num[i] - 1] : NULL;
    if (!ck_map_get(&ZI(f)->zip_names, name, n, &i)) return NULL;
    return &ZI(f)->zip[i];
}

/* Inflate a deflated record: copy bytes [off, off+n) of its output. */
/* Inflate bytes [off, off+n) of a deflated record into out.  When crc is not
 * NULL it also accumulates the CRC-32 of the bytes before off, which makes
 * inflate_range_crc(f, z, z->size, NULL, 0, &crc, err) one streaming pass. */
static void inflater_end(ck_inflater *st) {
    if (st->live) inflateEnd(&st->zs);
    st->live = false;
    st->z = NULL;
}

/* Bytes [off, off+n) of the record's output into out, continuing from
 * where st stopped when it is on this record and not past `off` (so that
 * sequential chunked reads cost one pass, not one pass each). */
static int inflate_from(const ckpt_file *f, ck_inflater *st, const ck_zip_entry *z, uint64_t off, void *out,
                        size_t n, uLong *crc, ckpt_error *err) {
    if (!st->live || st->z != z || st->out_pos > off) {
        inflater_end(st);
        memset(&st->zs, 0, sizeof st->zs);
        if (inflateInit2(&st->zs, -MAX_WBITS) != Z_OK) return ck_fail(err, CKPT_E_NOMEM, -1, "inflateInit failed");
        st->live = true;
        st->z = z;
        st->in_pos = st->out_pos = 0;
    }
    z_stream *zs = &st->zs;
    const size_t chunk = sizeof st->in;
    uint64_t want_end = off + n;
    uint8_t *dst = out;
    while (st->out_pos < want_end) {
        if (zs->avail_in == 0) {
            if (st->in_pos == z->comp_size) {
                inflater_end(st);
                return ck_fail(err, CKPT_E_FORMAT, (int64_t)z->data_off, "deflated record '%s' ends early", z->name);
            }
            uint64_t k = z->comp_size - st->in_pos < chunk ? z->comp_size - st->in_pos : chunk;
            if (ck_read(&f->src, z->data_off + st->in_pos, st->in, (size_t)k, z->name, err)) {
                inflater_end(st);
                return -1;
            }
            st->in_pos += k;
            zs->next_in = st->in;
            zs->avail_in = (uInt)k;
        }
        /* inflate straight into the caller's buffer once we reach `off` */
        uint8_t *o;
        size_t room;
        if (st->out_pos >= off) {
            o = dst + (st->out_pos - off);
            room = (size_t)(want_end - st->out_pos);
            if (room > (1u << 30)) room = 1u << 30;
        } else {
            o = st->tmp;
            room = off - st->out_pos < chunk ? (size_t)(off - st->out_pos) : chunk;
        }
        zs->next_out = o;
        zs->avail_out = (uInt)room;
        int r = inflate(zs, Z_NO_FLUSH);
        if (r != Z_OK && r != Z_STREAM_END && !(r == Z_BUF_ERROR && zs->avail_in == 0)) {
            ck_fail(err, CKPT_E_FORMAT, (int64_t)(z->data_off + st->in_pos), "deflated record '%s' is corrupt (%s)",
                    z->name, zs->msg ? zs->msg : "inflate error");
            inflater_end(st);
            return -1;
        }
        if (crc && o == st->tmp) *crc = crc32(*crc, st->tmp, (uInt)(room - zs->avail_out));
        st->out_pos += room - zs->avail_out;
        if (r == Z_STREAM_END && st->out_pos < want_end) {
            inflater_end(st);
            return ck_fail(err, CKPT_E_FORMAT, (int64_t)z->data_off, "deflated record '%s' is shorter than declared",
                           z->name);
        }
    }
    return 0;
}

static int inflate_range_crc(const ckpt_file *f, const ck_zip_entry *z, uint64_t off, void *out, size_t n,
                             uLong *crc, ckpt_error *err) {
    ck_inflater *st = malloc(sizeof *st);
    if (!st) return ck_fail(err, CKPT_E_NOMEM, -1, "out of memory");
    st->live = false;
    int rc = inflate_from(f, st, z, off, out, n, crc, err);
    inflater_end(st);
    free(st);
    return rc;
}

/* Plain reads: the file's cursor when no other thread holds it (so that a
 * reader's sequential chunked reads of a record resume instead of
 * restarting), else a cursor of their own (so that threads never wait for
 * each other).  The cursor is only touched with its mutex held.  Measured
 * on 8 x 1 MiB deflated tensors, 2 cores: a cursor per read made chunked
 * sequential reads 5-7x slower (each chunk inflates from the record's
 * start); one locked cursor made 8 threads wait in turn. */
static int inflate_range(const ckpt_file *f, const ck_zip_entry *z, uint64_t off, void *out, size_t n,
                         ckpt_error *err) {
    ck_inflater *st = ZI(f)->inflater;
    if (!st || pthread_mutex_trylock(&st->lock) != 0) return inflate_range_crc(f, z, off, out, n, NULL, err);
    int rc = inflate_from(f, st, z, off, out, n, NULL, err);
    pthread_mutex_unlock(&st->lock);
    return rc;
}

static void ck_inflater_free(ck_inflater *st) {
    if (!st) return;
    inflater_end(st);
    pthread_mutex_destroy(&st->lock);
    free(st);
}

static int zip_storage_read(const ckpt_file *f, const ck_storage *s, uint64_t off, void *buf, size_t n,
                            ckpt_error *err) {
    if (s->method == 8) return inflate_range(f, &ZI(f)->zip[s->zip_index], off, buf, n, err);
    return ck_read(&f->src, s->data_off + off, buf, n, "storage data", err);
}

/* A storage is its record: index by record, no key map. */
static int zip_bind(ckpt_file *f, void *ud, const char *key, size_t klen, uint64_t nbytes, int64_t pos,
                    size_t *idx, bool *created, ckpt_error *err) {
    char name[96];
    snprintf(name, sizeof name, "%s%.*s", (const char *)ud, (int)klen, key);
    const ck_zip_entry *z = record(f, name);
    if (!z) return ck_fail(err, CKPT_E_FORMAT, pos, "storage record '%s/%s' is missing", f->root_name, name);
    size_t zi = (size_t)(z - ZI(f)->zip);
    if (!ZI(f)->zip_storage && !(ZI(f)->zip_storage = calloc(ZI(f)->nzip, sizeof *ZI(f)->zip_storage)))
        return ck_fail(err, CKPT_E_NOMEM, -1, "out of memory");
    *created = ZI(f)->zip_storage[zi] == 0;
    if (!*created) {
        *idx = ZI(f)->zip_storage[zi] - 1;
        return 0;
    }
    CK_TRY(ck_storage_new(f, key, klen, idx, err));
    ZI(f)->zip_storage[zi] = *idx + 1;
    if (z->size < nbytes)
        return ck_fail(err, CKPT_E_FORMAT, z->cd_pos, "record '%s' holds %llu bytes but its storage needs %llu",
                       z->name, (unsigned long long)z->size, (unsigned long long)nbytes);
    ck_storage *s = &f->storages[*idx];
    s->data_off = z->data_off;
    s->comp_size = z->comp_size;
    s->crc = z->crc;
    s->method = z->method;
    s->zip_index = zi;
    s->pub.file_offset = z->method == 0 ? (int64_t)z->data_off : -1;
    s->resolved = true;
    return 0;
}

static ckpt_value *zip_pid(ckpt_file *f, void *ud, ckpt_value *pid, int64_t pos, ckpt_error *err) {
    ck_storage_binder b = {zip_bind, ud ? ud : (void *)"data/"};
    return ck_storage_pid(f, pid, pos, false, &b, err);
}

/* Read a small text record (version, byteorder). */
static int small_record(ckpt_file *f, const ck_zip_entry *z, char *buf, size_t cap, ckpt_error *err) {
    buf[0] = 0;
    if (z->size >= cap) return ck_fail(err, CKPT_E_FORMAT, z->cd_pos, "record '%s' is too long", z->name);
    if (z->method == 8) CK_TRY(inflate_range(f, z, 0, buf, (size_t)z->size, err));
    else CK_TRY(ck_read(&f->src, z->data_off, buf, (size_t)z->size, z->name, err));
    buf[z->size] = 0;
    return 0;
}

/* Run the pickle stored in a record (stored in place, or inflated). */
static int run_record(ckpt_file *f, const ck_zip_entry *z, const char *label, ck_pid_fn pl, void *ud,
                      ckpt_value **out, ckpt_error *err) {
    if (z->size > f->opt.max_pickle_bytes)
        return ck_fail(err, CKPT_E_LIMIT, z->cd_pos, "%s is %llu bytes (limit %llu)", label,
                       (unsigned long long)z->size, (unsigned long long)f->opt.max_pickle_bytes);
    /* the size is known: map it or read it once, never re-parse */
    uint8_t *buf = NULL;
    ck_pickle_in in = {.len = (size_t)z->size, .base = -1, .label = label};
    if (z->method == 0 && f->src.map) {
        in.buf = f->src.map + z->data_off;
        in.base = (int64_t)z->data_off;
    } else {
        if (ck_mem_charge(&f->arena, z->size)) return ck_fail(err, CKPT_E_NOMEM, z->cd_pos, "out of memory");
        buf = malloc(z->size ? (size_t)z->size : 1);
        if (!buf) {
            ck_mem_release(&f->arena, z->size);
            return ck_fail(err, CKPT_E_NOMEM, -1, "out of memory");
        }
        int r = z->method == 0 ? ck_read(&f->src, z->data_off, buf, (size_t)z->size, label, err)
                               : inflate_range(f, z, 0, buf, (size_t)z->size, err);
        if (r) {
            free(buf);
            ck_mem_release(&f->arena, z->size);
            return -1;
        }
        in.buf = buf;
        if (z->method == 0) in.base = (int64_t)z->data_off;
    }
    size_t used = 0;
    int r = ck_torch_run(f, &in, pl, ud, out, &used, err);
    if (r == 0 && used < z->size) r = ck_note(&f->pk, "%s: %zu bytes after STOP", label, (size_t)z->size - used);
    if (buf) ck_mem_release(&f->arena, z->size);
    free(buf);
    return r == 0 ? 0 : -1;
}

static int crc_record(const ckpt_file *f, const ck_zip_entry *z, uint32_t *crc, ckpt_error *err);
static int crc_deflated(const ckpt_file *f, const ck_zip_entry *z, uint32_t *crc, ckpt_error *err);
static int zip_open(ckpt_file *f, ckpt_error *err);

/* When a ZIP fails to open, damage is the likeliest cause: if a record the
 * open read (the pickles, version, byteorder) fails its CRC, say so instead
 * of reporting what the damaged bytes looked like.  Always returns -1. */
static void zip_blame(ckpt_file *f, ckpt_error *err) {
    if (!ZI(f) || !ZI(f)->nzip || !f->root_name || !f->root_name[0] || (err && (err->code == CKPT_E_NOMEM || err->code == CKPT_E_IO)))
        return;
    static const char *const read_at_open[] = {"data.pkl", "constants.pkl", "version", ".data/version", "byteorder"};
    for (size_t i = 0; i < sizeof read_at_open / sizeof read_at_open[0]; i++) {
        const ck_zip_entry *z = record(f, read_at_open[i]);
        if (!z || z->crc == 0 || z->size > f->opt.max_pickle_bytes) continue;
        uint32_t crc;
        ckpt_error e2;
        if ((z->method == 8 ? crc_deflated(f, z, &crc, &e2) : crc_record(f, z, &crc, &e2)) != 0) continue;
        if (crc != z->crc)
        {
            ck_fail(err, CKPT_E_FORMAT, (int64_t)z->data_off, "crc mismatch in %s (recorded %08x, computed %08x)",
                    z->name, z->crc, crc);
            return;
        }
    }
}

static int zip_open(ckpt_file *f, ckpt_error *err) {
    f->format = CKPT_FORMAT_ZIP;
    if (!(f->fmt_state = calloc(1, sizeof(zip_index)))) return ck_fail(err, CKPT_E_NOMEM, -1, "out of memory");
    CK_TRY(parse_central(f, err));
    CK_TRY(index_records(f, err));
    const ck_zip_entry *pkl = record(f, "data.pkl");
    if (record(f, "constants.pkl")) {
        f->format = CKPT_FORMAT_TORCHSCRIPT;
        if (!pkl) return ck_fail(err, CKPT_E_FORMAT, -1, "TorchScript archive has no data.pkl");
    } else if (!pkl) {
        return ck_fail(err, CKPT_E_FORMAT, -1, "ZIP archive has no %s/data.pkl: not a torch.save file",
                       f->root_name);
    }
    char buf[64];
    const ck_zip_entry *ver = record(f, "version");
    if (!ver) ver = record(f, ".data/version");
    if (ver) {
        CK_TRY(small_record(f, ver, buf, sizeof buf, err));
        size_t n = strcspn(buf, "\r\n");
        f->version = ck_strndup(&f->arena, buf, n);
        if (!f->version) return ck_fail(err, CKPT_E_NOMEM, -1, "out of memory");
    }
    const ck_zip_entry *bo = record(f, "byteorder");
    if (bo) {
        CK_TRY(small_record(f, bo, buf, sizeof buf, err));
        size_t n = strcspn(buf, "\r\n");
        if (n == 3 && memcmp(buf, "big", 3) == 0) f->byteorder = CKPT_BIG;
        else if (n == 6 && memcmp(buf, "little", 6) == 0) f->byteorder = CKPT_LITTLE;
        else return ck_fail(err, CKPT_E_FORMAT, (int64_t)bo->data_off, "byteorder record says '%.*s'",
                            (int)(n > 20 ? 20 : n), buf);
    }
    if (f->format == CKPT_FORMAT_TORCHSCRIPT) {
        /* Weights are later work; the pickles are run so that show and scan
         * see the module graph and every global it names. */
        const ck_zip_entry *consts = record(f, "constants.pkl");
        CK_TRY(run_record(f, pkl, "data.pkl", zip_pid, (void *)"data/", &f->root, err));
        ckpt_value *cv;
        return run_record(f, consts, "constants.pkl", zip_pid, (void *)"constants/", &cv, err);
    }
    f->pickle_label = "data.pkl";
    return run_record(f, pkl, "data.pkl", zip_pid, (void *)"data/", &f->root, err);
}

/* ---- verification -------------------------------------------------------- */

static int crc_record(const ckpt_file *f, const ck_zip_entry *z, uint32_t *crc, ckpt_error *err) {
    size_t chunk = z->size < (1u << 20) ? (size_t)z->size + 1 : 1u << 20; /* small records: small buffer */
    uint8_t *buf = malloc(chunk);
    if (!buf) return ck_fail(err, CKPT_E_NOMEM, -1, "out of memory");
    uLong c = crc32(0L, Z_NULL, 0);
    int rc = 0;
    for (uint64_t off = 0; off < z->size && rc == 0; off += chunk) {
        size_t n = z->size - off < chunk ? (size_t)(z->size - off) : chunk;
        if (z->method == 8) rc = inflate_range(f, z, off, buf, n, err); /* restarts: fine for rare deflate */
        else rc = ck_read(&f->src, z->data_off + off, buf, n, z->name, err);
        if (rc == 0) c = crc32(c, buf, (uInt)n);
    }
    free(buf);
    *crc = (uint32_t)c;
    return rc;
}

/* Deflated records are inflated in one stream for the CRC, not per chunk. */
static int crc_deflated(const ckpt_file *f, const ck_zip_entry *z, uint32_t *crc, ckpt_error *err) {
    /* big ones in one streaming pass, without a buffer: chunk by chunk would
     * restart inflate each time, and a whole-record buffer would come on
     * top of what a failed open still holds (up to max_memory) */
    if (z->size > ((uint64_t)1 << 20)) {
        uLong c = crc32(0L, Z_NULL, 0);
        CK_TRY(inflate_range_crc(f, z, z->size, NULL, 0, &c, err));
        *crc = (uint32_t)c;
        return 0;
    }
    uint8_t *buf = malloc(z->size ? (size_t)z->size : 1);
    if (!buf) return ck_fail(err, CKPT_E_NOMEM, -1, "out of memory");
    int rc = inflate_range(f, z, 0, buf, (size_t)z->size, err);
    if (rc == 0) *crc = (uint32_t)crc32(crc32(0L, Z_NULL, 0), buf, (uInt)z->size);
    free(buf);
    return rc;
}

static int zip_verify(const ckpt_file *f, void (*note)(void *, const char *), void *ctx, ckpt_error *err) {
    char line[400];
    for (size_t i = 0; i < ZI(f)->nzip; i++) {
        const ck_zip_entry *z = &ZI(f)->zip[i];
        uint8_t h[30];
        CK_TRY(ck_read(&f->src, z->local_off, h, 30, "local header", err));
        uint16_t nlen = ck_le16(h + 26);
        uint32_t lcrc = ck_le32(h + 14), lcomp = ck_le32(h + 18), lsize = ck_le32(h + 22);
        if (nlen != z->name_len)
            return ck_fail(err, CKPT_E_FORMAT, (int64_t)z->local_off, "local header name length differs for %s", z->name);
        char *name = malloc(nlen ? nlen : 1);
        if (!name) return ck_fail(err, CKPT_E_NOMEM, -1, "out of memory");
        if (ck_read(&f->src, z->local_off + 30, name, nlen, "local header", err)) {
            free(name);
            return -1;
        }
        int same = memcmp(name, z->name, nlen) == 0;
        free(name);
        if (!same) return ck_fail(err, CKPT_E_FORMAT, (int64_t)z->local_off, "local header name differs for %s", z->name);
        if (ck_le16(h + 8) != z->method)
            return ck_fail(err, CKPT_E_FORMAT, (int64_t)z->local_off, "local header method differs for %s", z->name);
        uint16_t lflags = ck_le16(h + 6);
        if (!(lflags & 8)) {
            if (lcrc != z->crc) return ck_fail(err, CKPT_E_FORMAT, (int64_t)z->local_off, "local header crc differs for %s", z->name);
            if ((lcomp != 0xFFFFFFFFu && lcomp != z->comp_size) || (lsize != 0xFFFFFFFFu && lsize != z->size))
                return ck_fail(err, CKPT_E_FORMAT, (int64_t)z->local_off, "local header sizes differ for %s", z->name);
        }
        uint32_t crc;
        CK_TRY(z->method == 8 ? crc_deflated(f, z, &crc, err) : crc_record(f, z, &crc, err));
        if (z->crc == 0 && crc != 0) {
            if (note) {
                snprintf(line, sizeof line, "no crc recorded for %s", z->name);
                note(ctx, line);
            }
        } else if (crc != z->crc) {
            return ck_fail(err, CKPT_E_FORMAT, (int64_t)z->data_off, "crc mismatch in %s (recorded %08x, computed %08x)",
                           z->name, z->crc, crc);
        }
        if (lflags & 8) { /* data descriptor: [sig] crc comp size (32 or 64 bit) */
            uint64_t d = z->data_off + z->comp_size;
            uint8_t dd[24];
            size_t avail = f->src.size - d < sizeof dd ? (size_t)(f->src.size - d) : sizeof dd;
            if (avail >= 12) {
                CK_TRY(ck_read(&f->src, d, dd, avail, "data descriptor", err));
                const uint8_t *q = ck_le32(dd) == 0x08074b50u ? dd + 4 : dd;
                if (ck_le32(q) != z->crc)
                    return ck_fail(err, CKPT_E_FORMAT, (int64_t)d, "data descriptor crc differs for %s", z->name);
            }
        }
    }
    return 0;
}

static void zip_close(ckpt_file *f) {
    zip_index *zi = ZI(f);
    if (!zi) return;
    ck_map_free(&zi->zip_names);
    free(zi->zip);
    free(zi->zip_storage);
    free(zi->zip_data_num);
    ck_inflater_free(zi->inflater);
    free(zi);
    f->fmt_state = NULL;
}

static int zip_bid(const uint8_t *head, size_t n, uint64_t size) {
    (void)size;
    return n >= 4 && ck_le32(head) == SIG_LOCAL;
}

const ck_format ck_format_zip = {"zip", zip_bid, zip_open, zip_storage_read, zip_verify, zip_blame, zip_close};
