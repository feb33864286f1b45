/*
 * zip.c - layer 4 (formats): a plain ZIP reader.  The end records (with
 * ZIP64), the central directory, local headers, stored and deflated records
 * read by (offset, length) through a byte source, CRCs.  It knows nothing of
 * torch: torch_zip.c reads torch's archive layout through it.
 *
 *   [local header 30 + name + extra] [record bytes] ...
 *   [central directory: 46 + name + extra + comment per record]
 *   [ZIP64 end record 56] [ZIP64 locator 20] [end record 22 + comment]
 *
 * Sizes are read from the central directory (local headers carry zeros when
 * the data descriptor flag is set); ZIP64 extra fields replace 0xFFFFFFFF
 * values.  Every offset and size is checked against the archive.
 */
#include "zip.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

_Static_assert(sizeof(ck_zip_entry) <= 24, "ck_zip_entry grew");

/* Inflate state: where one pass over a deflated record has got to.  One per
 * file (guarded by its mutex), and one per read that finds it busy. */
typedef struct ck_inflater ck_inflater;
struct ck_inflater {
    pthread_mutex_t lock; /* the file's cursor: one reader at a time */
    z_stream zs;
    bool live;             /* zs is initialised */
    const ck_zip_entry *z; /* the record it is inflating */
    uint64_t in_pos, out_pos;
    uint8_t in[1 << 16], tmp[1 << 16];
};

#define SIG_LOCAL 0x04034b50u
#define SIG_CENTRAL 0x02014b50u
#define SIG_EOCD 0x06054b50u
#define SIG_EOCD64 0x06064b50u
#define SIG_LOC64 0x07064b50u

static int find_eocd(ck_zip *a, uint64_t *pos, uint8_t eocd[22], ckpt_error *err)
{
    uint64_t size = a->src->size;
    if (size < 22)
        return ck_fail(err, CKPT_E_FORMAT, 0,
                       "ZIP too short for an end of central directory record");
    uint64_t tail = size < 65557 ? size : 65557;
    uint8_t *buf = malloc((size_t)tail);
    if (!buf) return ck_fail(err, CKPT_E_NOMEM, -1, "out of memory");
    if (ck_read(a->src, size - tail, buf, (size_t)tail, "ZIP end record", err)) {
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
    return ck_fail(err, CKPT_E_FORMAT, (int64_t)size,
                   "ZIP end of central directory record not found");
}

/* ck_win() without the call when the bytes are already in the window or
 * mapped (three lookups a record, a million records). */
static inline const uint8_t *win(ck_window *w, uint64_t off, size_t n, const char *what,
                                 ckpt_error *err)
{
    if (w->src->map && off <= w->src->size && n <= w->src->size - off) return w->src->map + off;
    if (off >= w->off && n <= w->len && off - w->off <= w->len - n) return w->buf + (off - w->off);
    return ck_win(w, off, n, what, err);
}

int ck_zip_index(ck_zip *a, ckpt_error *err)
{
    uint8_t e[22] = {0};
    uint64_t eocd_pos = 0;
    CK_TRY(find_eocd(a, &eocd_pos, e, err));
    uint64_t entries = ck_le16(e + 10), cd_size = ck_le32(e + 12), cd_off = ck_le32(e + 16);
    if (ck_le16(e + 4) != 0 || ck_le16(e + 6) != 0)
        return ck_fail(err, CKPT_E_FORMAT, (int64_t)eocd_pos,
                       "multi-disk ZIP archives are not supported");
    bool need64 = entries == 0xFFFF || cd_size == 0xFFFFFFFFu || cd_off == 0xFFFFFFFFu;
    uint64_t dir_end = eocd_pos; /* the directory must end before this */
    if (eocd_pos >= 20) {
        uint8_t loc[20];
        CK_TRY(ck_read(a->src, eocd_pos - 20, loc, 20, "ZIP64 locator", err));
        if (ck_le32(loc) == SIG_LOC64) {
            uint64_t z_off = ck_le64(loc + 8);
            uint8_t z[56];
            if (z_off > eocd_pos - 20 || eocd_pos - 20 - z_off < 56)
                return ck_fail(err, CKPT_E_FORMAT, (int64_t)eocd_pos - 20,
                               "ZIP64 locator points outside the archive (%llu)",
                               (unsigned long long)z_off);
            CK_TRY(ck_read(a->src, z_off, z, 56, "ZIP64 end record", err));
            if (ck_le32(z) != SIG_EOCD64)
                return ck_fail(err, CKPT_E_FORMAT, (int64_t)z_off,
                               "bad ZIP64 end record signature");
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
    if (entries > a->max_entries)
        return ck_fail(err, CKPT_E_LIMIT, (int64_t)eocd_pos,
                       "ZIP has %llu records (limit %u; max_entries)", (unsigned long long)entries,
                       a->max_entries);
    if (entries * 46 > cd_size)
        return ck_fail(err, CKPT_E_FORMAT, (int64_t)eocd_pos,
                       "central directory of %llu bytes cannot hold %llu records",
                       (unsigned long long)cd_size, (unsigned long long)entries);
    if (entries == 0) return ck_fail(err, CKPT_E_FORMAT, (int64_t)eocd_pos, "ZIP archive is empty");

    a->e = calloc((size_t)entries, sizeof *a->e);
    if (!a->e) return ck_fail(err, CKPT_E_NOMEM, -1, "out of memory");
    ck_pages_populate(a->e, (size_t)entries * sizeof *a->e); /* all written below */
    /* the names back to back, each with its NUL, in one buffer: an entry
     * takes at least 46 + its name's bytes, so the directory's size less 45
     * a record bounds them, and so does 64 KiB a record (the tail never
     * written is never touched) */
    uint64_t room = cd_size - entries * 45;
    if (room > entries << 16) room = entries << 16;
    if (room > SIZE_MAX || !(a->names = malloc((size_t)room)))
        return ck_fail(err, CKPT_E_NOMEM, -1, "out of memory");
    char *names = a->names;
    a->cd_off = cd_off;
    size_t used = 0;
    a->names_end = names;
    ck_window w = {.src = a->src};
    uint64_t p = cd_off, end = cd_off + cd_size;
    int rc = -1;
    size_t huge_i = SIZE_MAX; /* the first record whose local header is past 64 TiB */
    uint64_t huge_off = 0;
    for (uint64_t i = 0; i < entries; i++) {
        const uint8_t *h = win(&w, p, 46, "central directory", err);
        if (!h) goto out;
        if (end - p < 46 || ck_le32(h) != SIG_CENTRAL) {
            ck_fail(err, CKPT_E_FORMAT, (int64_t)p, "bad central directory entry %llu",
                    (unsigned long long)i);
            goto out;
        }
        ck_zip_entry *z = &a->e[i];
        uint16_t flags = ck_le16(h + 8), method = ck_le16(h + 10);
        z->crc = ck_le32(h + 16);
        uint64_t comp = ck_le32(h + 20);
        z->size = ck_le32(h + 24);
        uint16_t nlen = ck_le16(h + 28), xlen = ck_le16(h + 30), clen = ck_le16(h + 32);
        uint64_t local_off = ck_le32(h + 42);
        uint64_t total = 46ull + nlen + xlen + clen;
        if (total > end - p) {
            ck_fail(err, CKPT_E_FORMAT, (int64_t)p,
                    "central directory entry %llu runs past the directory", (unsigned long long)i);
            goto out;
        }
        h = win(&w, p, (size_t)total, "central directory", err);
        if (!h) goto out;
        if (total != 46ull + nlen && !a->cd_pos) { /* positions no longer derivable */
            int64_t *pos = malloc((size_t)entries * sizeof *pos);
            if (!pos) {
                ck_fail(err, CKPT_E_NOMEM, -1, "out of memory");
                goto out;
            }
            for (size_t k = 0; k < i; k++) pos[k] = ck_zip_cd_pos(a, &a->e[k]);
            a->cd_pos = pos;
        }
        if (a->cd_pos) a->cd_pos[i] = (int64_t)p;
        if ((uint64_t)nlen + 1 > room - used) { /* cannot happen: see `room` */
            ck_fail(err, CKPT_E_FORMAT, (int64_t)p, "bad central directory entry %llu",
                    (unsigned long long)i);
            goto out;
        }
        if (used > UINT32_MAX - nlen - 1) {
            ck_fail(err, CKPT_E_LIMIT, (int64_t)p,
                    "central directory entry %llu: the names pass 4 GiB", (unsigned long long)i);
            goto out;
        }
        ck_pages_ahead(names, (size_t)room, used, used + nlen + 1); /* filled in order */
        z->name = (uint32_t)used;
        memcpy(names + used, h + 46, nlen);
        used += nlen;
        names[used++] = 0;
        /* ZIP64 extra field */
        const uint8_t *x = h + 46 + nlen, *xe = x + xlen;
        while (xe - x >= 4) {
            uint16_t id = ck_le16(x), sz = ck_le16(x + 2);
            if ((size_t)(xe - x - 4) < sz) break;
            if (id == 1) {
                const uint8_t *q = x + 4, *qe = q + sz;
                uint64_t *fields[3] = {&z->size, &comp, &local_off};
                for (int k = 0; k < 3; k++) {
                    if (*fields[k] != 0xFFFFFFFFu) continue;
                    if (qe - q < 8) {
                        ck_fail(err, CKPT_E_FORMAT, (int64_t)p,
                                "ZIP64 extra field of '%s' too short", ck_zip_name(a, z));
                        goto out;
                    }
                    *fields[k] = ck_le64(q);
                    q += 8;
                }
            }
            x += 4 + sz;
        }
        if (method != 0 && method != 8) {
            ck_fail(err, CKPT_E_UNSUPPORTED, (int64_t)p, "record '%s' uses compression method %u",
                    ck_zip_name(a, z), method);
            goto out;
        }
        if ((flags & 1) && !a->flagged_as_plain) {
            ck_fail(err, CKPT_E_UNSUPPORTED, (int64_t)p, "record '%s' is encrypted",
                    ck_zip_name(a, z));
            goto out;
        }
        if (method == 0 && comp != z->size) {
            ck_fail(err, CKPT_E_FORMAT, (int64_t)p,
                    "stored record '%s' has compressed size %llu but size %llu", ck_zip_name(a, z),
                    (unsigned long long)comp, (unsigned long long)z->size);
            goto out;
        }
        /* deflate expands at most 1032:1: a larger declared size is a lie that
         * would size buffers (whole records, strided reads) beyond any real data */
        if (method == 8 && comp < UINT64_MAX / 1032 - 1 && z->size > (comp + 1) * 1032) {
            ck_fail(err, CKPT_E_FORMAT, (int64_t)p,
                    "deflated record '%s' declares %llu bytes, more than its %llu compressed bytes "
                    "can hold",
                    ck_zip_name(a, z), (unsigned long long)z->size, (unsigned long long)comp);
            goto out;
        }
        if (comp != z->size && !a->comp) { /* sizes no longer one number */
            uint64_t *c = malloc((size_t)entries * sizeof *c);
            if (!c) {
                ck_fail(err, CKPT_E_NOMEM, -1, "out of memory");
                goto out;
            }
            for (size_t k = 0; k < i; k++) c[k] = a->e[k].size;
            a->comp = c;
        }
        if (a->comp) a->comp[i] = comp;
        if (local_off > CK_ZIP_OFF_MAX && huge_i == SIZE_MAX) { /* told below */
            huge_i = (size_t)i;
            huge_off = local_off;
        }
        /* until its local header is read below */
        z->at = (method == 8 ? CK_ZIP_DEFLATED : 0) |
                (local_off > CK_ZIP_OFF_MAX ? CK_ZIP_OFF_MAX : local_off);
        p += total;
        a->n++;
        a->names_end = names + used; /* the last accepted record's name ends here */
        if (method == 8 && !a->inflater) {
            ck_inflater *st = calloc(1, sizeof *st);
            if (!st || pthread_mutex_init(&st->lock, NULL) != 0) {
                free(st);
                ck_fail(err, CKPT_E_NOMEM, -1, "out of memory");
                goto out;
            }
            a->inflater = st;
        }
    }
    /* the names count against the memory limit, as arena strings would */
    if (ck_mem_charge(a->arena, used)) {
        ck_fail(err, CKPT_E_NOMEM, -1, "out of memory");
        goto out;
    }
    a->names_charged = used;
    /* local headers: where each record's bytes start */
    for (size_t i = 0; i < a->n; i++) {
        ck_zip_entry *z = &a->e[i];
        uint64_t local_off = i == huge_i ? huge_off : ck_zip_data_off(z);
        if (local_off > cd_off || cd_off - local_off < 30) {
            ck_fail(err, CKPT_E_FORMAT, ck_zip_cd_pos(a, z),
                    "local header of '%s' lies outside the archive (%llu)", ck_zip_name(a, z),
                    (unsigned long long)local_off);
            goto out;
        }
        const uint8_t *h = win(&w, local_off, 30, "local header", err);
        if (!h) goto out;
        if (ck_le32(h) != SIG_LOCAL) {
            ck_fail(err, CKPT_E_FORMAT, (int64_t)local_off, "bad local header signature for '%s'",
                    ck_zip_name(a, z));
            goto out;
        }
        uint32_t lh = (uint32_t)ck_le16(h + 26) + ck_le16(h + 28);
        uint64_t data = local_off + 30 + lh;
        uint64_t comp = ck_zip_comp_size(a, z);
        if (data > cd_off || comp > cd_off - data) {
            ck_fail(err, CKPT_E_FORMAT, (int64_t)local_off,
                    "record '%s' (%llu bytes at %llu) runs into the central directory",
                    ck_zip_name(a, z), (unsigned long long)comp, (unsigned long long)data);
            goto out;
        }
        if (data > CK_ZIP_OFF_MAX) { /* only in a file of more than 64 TiB */
            ck_fail(err, CKPT_E_LIMIT, (int64_t)local_off, "record '%s' starts past 64 TiB",
                    ck_zip_name(a, z));
            goto out;
        }
        z->at = (z->at & CK_ZIP_DEFLATED) | ((uint64_t)lh << CK_ZIP_OFF_BITS) | data;
    }
    rc = 0;
out:
    ck_win_free(&w);
    return rc;
}

/* Inflate a deflated record: copy bytes [off, off+n) of its output. */
/* Inflate bytes [off, off+n) of a deflated record into out.  When crc is not
 * NULL it also accumulates the CRC-32 of the bytes before off, which makes
 * inflate_range_crc(a, z, z->size, NULL, 0, &crc, err) one streaming pass. */
static void inflater_end(ck_inflater *st)
{
    if (st->live) inflateEnd(&st->zs);
    st->live = false;
    st->z = NULL;
}

/* Bytes [off, off+n) of the record's output into out, continuing from
 * where st stopped when it is on this record and not past `off` (so that
 * sequential chunked reads cost one pass, not one pass each). */
static int inflate_from(const ck_zip *a, ck_inflater *st, const ck_zip_entry *z, uint64_t off,
                        void *out, size_t n, uLong *crc, ckpt_error *err)
{
    if (!st->live || st->z != z || st->out_pos > off) {
        inflater_end(st);
        memset(&st->zs, 0, sizeof st->zs);
        if (inflateInit2(&st->zs, -MAX_WBITS) != Z_OK)
            return ck_fail(err, CKPT_E_NOMEM, -1, "inflateInit failed");
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
            uint64_t comp = ck_zip_comp_size(a, z);
            if (st->in_pos == comp) {
                inflater_end(st);
                return ck_fail(err, CKPT_E_FORMAT, (int64_t)ck_zip_data_off(z),
                               "deflated record '%s' ends early", ck_zip_name(a, z));
            }
            uint64_t k = comp - st->in_pos < chunk ? comp - st->in_pos : chunk;
            if (ck_read(a->src, ck_zip_data_off(z) + st->in_pos, st->in, (size_t)k,
                        ck_zip_name(a, z), err)) {
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
            ck_fail(err, CKPT_E_FORMAT, (int64_t)(ck_zip_data_off(z) + st->in_pos),
                    "deflated record '%s' is corrupt (%s)", ck_zip_name(a, z),
                    zs->msg ? zs->msg : "inflate error");
            inflater_end(st);
            return -1;
        }
        if (crc && o == st->tmp) *crc = crc32(*crc, st->tmp, (uInt)(room - zs->avail_out));
        st->out_pos += room - zs->avail_out;
        if (r == Z_STREAM_END && st->out_pos < want_end) {
            inflater_end(st);
            return ck_fail(err, CKPT_E_FORMAT, (int64_t)ck_zip_data_off(z),
                           "deflated record '%s' is shorter than declared", ck_zip_name(a, z));
        }
    }
    return 0;
}

static int inflate_range_crc(const ck_zip *a, const ck_zip_entry *z, uint64_t off, void *out,
                             size_t n, uLong *crc, ckpt_error *err)
{
    ck_inflater *st = malloc(sizeof *st);
    if (!st) return ck_fail(err, CKPT_E_NOMEM, -1, "out of memory");
    st->live = false;
    int rc = inflate_from(a, st, z, off, out, n, crc, err);
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
static int inflate_range(const ck_zip *a, const ck_zip_entry *z, uint64_t off, void *out, size_t n,
                         ckpt_error *err)
{
    ck_inflater *st = a->inflater;
    if (!st || pthread_mutex_trylock(&st->lock) != 0)
        return inflate_range_crc(a, z, off, out, n, NULL, err);
    int rc = inflate_from(a, st, z, off, out, n, NULL, err);
    pthread_mutex_unlock(&st->lock);
    return rc;
}

static void inflater_free(ck_inflater *st)
{
    if (!st) return;
    inflater_end(st);
    pthread_mutex_destroy(&st->lock);
    free(st);
}

int ck_zip_crc_stored(const ck_zip *a, const ck_zip_entry *z, uint32_t *crc, ckpt_error *err)
{
    size_t chunk =
        z->size < (1u << 20) ? (size_t)z->size + 1 : 1u << 20; /* small records: small buffer */
    uint8_t *buf = malloc(chunk);
    if (!buf) return ck_fail(err, CKPT_E_NOMEM, -1, "out of memory");
    uLong c = crc32(0L, Z_NULL, 0);
    int rc = 0;
    for (uint64_t off = 0; off < z->size && rc == 0; off += chunk) {
        size_t n = z->size - off < chunk ? (size_t)(z->size - off) : chunk;
        if (ck_zip_method(z) == 8)
            rc = inflate_range(a, z, off, buf, n, err); /* restarts: fine for rare deflate */
        else
            rc = ck_read(a->src, ck_zip_data_off(z) + off, buf, n, ck_zip_name(a, z), err);
        if (rc == 0) c = ck_crc32((uint32_t)c, buf, n);
    }
    free(buf);
    *crc = (uint32_t)c;
    return rc;
}

/* Deflated records are inflated in one stream for the CRC, not per chunk. */
int ck_zip_crc_deflated(const ck_zip *a, const ck_zip_entry *z, uint32_t *crc, ckpt_error *err)
{
    /* big ones in one streaming pass, without a buffer: chunk by chunk would
     * restart inflate each time, and a whole-record buffer would come on
     * top of what a failed open still holds (up to max_memory) */
    if (z->size > ((uint64_t)1 << 20)) {
        uLong c = crc32(0L, Z_NULL, 0);
        CK_TRY(inflate_range_crc(a, z, z->size, NULL, 0, &c, err));
        *crc = (uint32_t)c;
        return 0;
    }
    uint8_t *buf = malloc(z->size ? (size_t)z->size : 1);
    if (!buf) return ck_fail(err, CKPT_E_NOMEM, -1, "out of memory");
    int rc = inflate_range(a, z, 0, buf, (size_t)z->size, err);
    if (rc == 0) *crc = (uint32_t)crc32(crc32(0L, Z_NULL, 0), buf, (uInt)z->size);
    free(buf);
    return rc;
}

int ck_zip_check(const ck_zip *a, void (*note)(void *, const char *),
                 void (*progress)(void *, uint64_t, uint64_t), void *ctx, ckpt_error *err)
{
    char line[400];
    uint64_t total = 0, done = 0;
    if (progress)
        for (size_t i = 0; i < a->n; i++)
            if (ck_add_ovf(total, ck_zip_comp_size(a, &a->e[i]), &total)) total = UINT64_MAX;
    for (size_t i = 0; i < a->n; i++) {
        const ck_zip_entry *z = &a->e[i];
        if (progress && i > 0) progress(ctx, done, total);
        uint8_t h[30];
        uint64_t local_off = ck_zip_local_off(z);
        size_t name_len = ck_zip_name_len(a, z);
        CK_TRY(ck_read(a->src, local_off, h, 30, "local header", err));
        uint16_t nlen = ck_le16(h + 26);
        uint32_t lcrc = ck_le32(h + 14), lcomp = ck_le32(h + 18), lsize = ck_le32(h + 22);
        if (nlen != name_len)
            return ck_fail(err, CKPT_E_FORMAT, (int64_t)local_off,
                           "local header name length differs for %s", ck_zip_name(a, z));
        char *name = malloc(nlen ? nlen : 1);
        if (!name) return ck_fail(err, CKPT_E_NOMEM, -1, "out of memory");
        if (ck_read(a->src, local_off + 30, name, nlen, "local header", err)) {
            free(name);
            return -1;
        }
        int same = memcmp(name, ck_zip_name(a, z), nlen) == 0;
        free(name);
        if (!same)
            return ck_fail(err, CKPT_E_FORMAT, (int64_t)local_off,
                           "local header name differs for %s", ck_zip_name(a, z));
        if (ck_le16(h + 8) != ck_zip_method(z))
            return ck_fail(err, CKPT_E_FORMAT, (int64_t)local_off,
                           "local header method differs for %s", ck_zip_name(a, z));
        uint16_t lflags = ck_le16(h + 6);
        if (!(lflags & 8)) {
            if (lcrc != z->crc)
                return ck_fail(err, CKPT_E_FORMAT, (int64_t)local_off,
                               "local header crc differs for %s", ck_zip_name(a, z));
            if ((lcomp != 0xFFFFFFFFu && lcomp != ck_zip_comp_size(a, z)) ||
                (lsize != 0xFFFFFFFFu && lsize != z->size))
                return ck_fail(err, CKPT_E_FORMAT, (int64_t)local_off,
                               "local header sizes differ for %s", ck_zip_name(a, z));
        }
        uint32_t crc;
        CK_TRY(ck_zip_method(z) == 8 ? ck_zip_crc_deflated(a, z, &crc, err)
                              : ck_zip_crc_stored(a, z, &crc, err));
        if (z->crc == 0 && crc != 0) {
            if (note) {
                snprintf(line, sizeof line, "no crc recorded for %s", ck_zip_name(a, z));
                note(ctx, line);
            }
        } else if (crc != z->crc) {
            return ck_fail(err, CKPT_E_FORMAT, (int64_t)ck_zip_data_off(z),
                           "crc mismatch in %s (recorded %08x, computed %08x)", ck_zip_name(a, z),
                           z->crc, crc);
        }
        if (lflags & 8) { /* data descriptor: [sig] crc comp size (32 or 64 bit) */
            uint64_t d = ck_zip_data_off(z) + ck_zip_comp_size(a, z);
            uint8_t dd[24];
            size_t avail = a->src->size - d < sizeof dd ? (size_t)(a->src->size - d) : sizeof dd;
            if (avail >= 12) {
                CK_TRY(ck_read(a->src, d, dd, avail, "data descriptor", err));
                const uint8_t *q = ck_le32(dd) == 0x08074b50u ? dd + 4 : dd;
                if (ck_le32(q) != z->crc)
                    return ck_fail(err, CKPT_E_FORMAT, (int64_t)d,
                                   "data descriptor crc differs for %s", ck_zip_name(a, z));
            }
        }
        if (ck_add_ovf(done, ck_zip_comp_size(a, z), &done)) done = UINT64_MAX;
    }
    if (progress) progress(ctx, total, total);
    return 0;
}

int ck_zip_read(const ck_zip *a, const ck_zip_entry *z, uint64_t off, void *buf, size_t n,
                ckpt_error *err)
{
    if (ck_zip_method(z) == 8) return inflate_range(a, z, off, buf, n, err);
    return ck_read(a->src, ck_zip_data_off(z) + off, buf, n, ck_zip_name(a, z), err);
}

int ck_zip_crc(const ck_zip *a, const ck_zip_entry *z, uint32_t *crc, ckpt_error *err)
{
    return ck_zip_method(z) == 8 ? ck_zip_crc_deflated(a, z, crc, err)
                                 : ck_zip_crc_stored(a, z, crc, err);
}

void ck_zip_free(ck_zip *a)
{
    free(a->e);
    free(a->names);
    free(a->cd_pos);
    a->cd_pos = NULL;
    free(a->comp);
    a->comp = NULL;
    if (a->names_charged) ck_mem_release(a->arena, a->names_charged);
    inflater_free(a->inflater);
    a->e = NULL;
    a->n = 0;
    a->names = NULL;
    a->names_end = NULL;
    a->names_charged = 0;
    a->inflater = NULL;
}
