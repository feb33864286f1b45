/*
 * build.h - builders for hand-made test inputs: a byte buffer, pickle
 * opcodes, torch's persistent ids and tensor rebuilds, a torch-style ZIP
 * writer (stored or deflated records, "FB" padding, data descriptors, ZIP64
 * end records), the legacy stream and ustar TAR members, laid out as the
 * header comments of src/formats/zip.c, torch_zip.c, legacy.c and tar.c
 * draw them.
 *
 * Everything is static: each test executable is one translation unit.
 * Allocation failures abort (tests only).
 */
#ifndef CKPT_UNIT_BUILD_H
#define CKPT_UNIT_BUILD_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

/* ------------------------------------------------------------------------ */
/* Byte buffer                                                                */
/* ------------------------------------------------------------------------ */

typedef struct bb {
    uint8_t *p;
    size_t n, cap;
} bb;

static inline void bb_reserve(bb *b, size_t extra)
{
    if (b->cap - b->n >= extra) return;
    size_t nc = b->cap ? b->cap : 256;
    while (nc - b->n < extra) nc *= 2;
    uint8_t *np = realloc(b->p, nc);
    if (!np) abort();
    b->p = np;
    b->cap = nc;
}
static inline void bb_put(bb *b, const void *d, size_t n)
{
    if (!n) return;
    bb_reserve(b, n);
    memcpy(b->p + b->n, d, n);
    b->n += n;
}
static inline void bb_u8(bb *b, unsigned v)
{
    uint8_t c = (uint8_t)v;
    bb_put(b, &c, 1);
}
static inline void bb_zero(bb *b, size_t n)
{
    bb_reserve(b, n);
    memset(b->p + b->n, 0, n);
    b->n += n;
}
static inline void bb_le16(bb *b, uint32_t v)
{
    bb_u8(b, v & 0xff);
    bb_u8(b, (v >> 8) & 0xff);
}
static inline void bb_le32(bb *b, uint32_t v)
{
    for (int i = 0; i < 4; i++) bb_u8(b, (v >> (8 * i)) & 0xff);
}
static inline void bb_le64(bb *b, uint64_t v)
{
    for (int i = 0; i < 8; i++) bb_u8(b, (unsigned)((v >> (8 * i)) & 0xff));
}
static inline void bb_text(bb *b, const char *s)
{
    bb_put(b, s, strlen(s));
}
static inline void bb_free(bb *b)
{
    free(b->p);
    b->p = NULL;
    b->n = b->cap = 0;
}
static inline void bb_f32le(bb *b, float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    bb_le32(b, u);
}
static inline void bb_f32be(bb *b, float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    for (int i = 3; i >= 0; i--) bb_u8(b, (u >> (8 * i)) & 0xff);
}
static inline void bb_append(bb *b, const bb *src)
{
    bb_put(b, src->p, src->n);
}

/* ------------------------------------------------------------------------ */
/* Pickle opcodes                                                             */
/* ------------------------------------------------------------------------ */

static inline void pk_proto(bb *b, unsigned v)
{
    bb_u8(b, 0x80);
    bb_u8(b, v);
}
static inline void pk_stop(bb *b)
{
    bb_u8(b, '.');
}
static inline void pk_op(bb *b, unsigned op)
{
    bb_u8(b, op);
}
static inline void pk_mark(bb *b)
{
    bb_u8(b, '(');
}
static inline void pk_none(bb *b)
{
    bb_u8(b, 'N');
}
static inline void pk_bool(bb *b, int v)
{
    bb_u8(b, v ? 0x88 : 0x89);
}
static inline void pk_tuple(bb *b)
{
    bb_u8(b, 't');
}
static inline void pk_reduce(bb *b)
{
    bb_u8(b, 'R');
}
static inline void pk_build(bb *b)
{
    bb_u8(b, 'b');
}
static inline void pk_binpersid(bb *b)
{
    bb_u8(b, 'Q');
}
static inline void pk_empty_dict(bb *b)
{
    bb_u8(b, '}');
}
static inline void pk_empty_list(bb *b)
{
    bb_u8(b, ']');
}
static inline void pk_empty_tuple(bb *b)
{
    bb_u8(b, ')');
}
static inline void pk_setitem(bb *b)
{
    bb_u8(b, 's');
}
static inline void pk_setitems(bb *b)
{
    bb_u8(b, 'u');
}
static inline void pk_append(bb *b)
{
    bb_u8(b, 'a');
}
static inline void pk_appends(bb *b)
{
    bb_u8(b, 'e');
}

/* Minimal two's complement little-endian bytes of v (as Python's encode_long). */
static inline size_t pk_long_bytes(int64_t v, uint8_t out[9])
{
    if (v == 0) return 0;
    size_t n = 0;
    uint64_t u = (uint64_t)v;
    for (n = 1; n <= 8; n++) {
        /* does v fit n bytes signed? */
        if (n == 8) break;
        int64_t lo = -((int64_t)1 << (8 * n - 1)), hi = ((int64_t)1 << (8 * n - 1)) - 1;
        if (v >= lo && v <= hi) break;
    }
    for (size_t i = 0; i < n; i++) out[i] = (uint8_t)(u >> (8 * i));
    return n;
}

static inline void pk_long1(bb *b, int64_t v)
{
    uint8_t t[9];
    size_t n = pk_long_bytes(v, t);
    bb_u8(b, 0x8a);
    bb_u8(b, (unsigned)n);
    bb_put(b, t, n);
}

/* An integer with the opcode pickle.dumps(protocol=2) would pick. */
static inline void pk_int(bb *b, int64_t v)
{
    if (v >= 0 && v < 256) {
        bb_u8(b, 'K');
        bb_u8(b, (unsigned)v);
    } else if (v >= 0 && v < 65536) {
        bb_u8(b, 'M');
        bb_le16(b, (uint32_t)v);
    } else if (v >= INT32_MIN && v <= INT32_MAX) {
        bb_u8(b, 'J');
        bb_le32(b, (uint32_t)(int32_t)v);
    } else {
        pk_long1(b, v);
    }
}

/* BINUNICODE (protocol 1+), as protocol 2 writes every str. */
static inline void pk_strn(bb *b, const char *s, size_t n)
{
    bb_u8(b, 'X');
    bb_le32(b, (uint32_t)n);
    bb_put(b, s, n);
}
static inline void pk_str(bb *b, const char *s)
{
    pk_strn(b, s, strlen(s));
}

static inline void pk_global(bb *b, const char *mod, const char *name)
{
    bb_u8(b, 'c');
    bb_text(b, mod);
    bb_u8(b, '\n');
    bb_text(b, name);
    bb_u8(b, '\n');
}

/* A tuple of ints with protocol 2's opcodes: () / TUPLE1-3 / MARK..TUPLE. */
static inline void pk_int_tuple(bb *b, const int64_t *v, int n)
{
    if (n == 0) {
        pk_empty_tuple(b);
        return;
    }
    if (n > 3) pk_mark(b);
    for (int i = 0; i < n; i++) pk_int(b, v[i]);
    if (n <= 3)
        bb_u8(b, (unsigned)(0x84 + n));
    else
        pk_tuple(b);
}

/* collections.OrderedDict() */
static inline void pk_ordereddict(bb *b)
{
    pk_global(b, "collections", "OrderedDict");
    pk_empty_tuple(b);
    pk_reduce(b);
}

/* ------------------------------------------------------------------------ */
/* torch's persistent ids and tensor rebuilds                                 */
/* ------------------------------------------------------------------------ */

/* A legacy storage view: (view_key, offset, size) in elements of the root. */
typedef struct pk_view {
    const char *key;
    int64_t offset, size;
} pk_view;

/* BINPERSID of ('storage', <smod>.<cls>, key, location, numel[, view]).
 * legacy: 6 fields (view or None), else the ZIP form with 5. */
static inline void pk_storage_pid_ex(bb *b, const char *smod, const char *cls, const char *key,
                                     const char *location, int64_t numel, int legacy,
                                     const pk_view *view)
{
    pk_mark(b);
    pk_str(b, "storage");
    pk_global(b, smod, cls);
    pk_str(b, key);
    pk_str(b, location);
    pk_int(b, numel);
    if (legacy) {
        if (view) {
            pk_str(b, view->key);
            pk_int(b, view->offset);
            pk_int(b, view->size);
            bb_u8(b, 0x87); /* TUPLE3 */
        } else {
            pk_none(b);
        }
    }
    pk_tuple(b);
    pk_binpersid(b);
}

static inline void pk_storage_pid(bb *b, const char *cls, const char *key, int64_t numel)
{
    pk_storage_pid_ex(b, "torch", cls, key, "cpu", numel, 0, NULL);
}

/* The arguments after the storage: offset, size, stride. */
static inline void pk_view_args(bb *b, int64_t offset, int ndim, const int64_t *shape,
                                const int64_t *stride)
{
    pk_int(b, offset);
    pk_int_tuple(b, shape, ndim);
    pk_int_tuple(b, stride, ndim);
}

/* _rebuild_tensor_v2(<storage pid already emitted by `emit_storage`>, ...).
 * Call as: pk_v2_begin(); <storage pid>; pk_v2_end(...). */
static inline void pk_v2_begin(bb *b)
{
    pk_global(b, "torch._utils", "_rebuild_tensor_v2");
    pk_mark(b);
}
static inline void pk_v2_end(bb *b, int64_t offset, int ndim, const int64_t *shape,
                             const int64_t *stride, int requires_grad)
{
    pk_view_args(b, offset, ndim, shape, stride);
    pk_bool(b, requires_grad);
    pk_ordereddict(b);
    pk_tuple(b);
    pk_reduce(b);
}

/* A whole ZIP-style tensor over torch.<cls> storage `key` of `numel` elements. */
static inline void pk_tensor(bb *b, const char *cls, const char *key, int64_t numel, int64_t offset,
                             int ndim, const int64_t *shape, const int64_t *stride)
{
    pk_v2_begin(b);
    pk_storage_pid(b, cls, key, numel);
    pk_v2_end(b, offset, ndim, shape, stride, 0);
}

/* Row-major contiguous strides. */
static inline void pk_contig_strides(int ndim, const int64_t *shape, int64_t *stride)
{
    int64_t s = 1;
    for (int i = ndim; i-- > 0;) {
        stride[i] = s;
        s *= shape[i] ? shape[i] : 1;
    }
}

/* ------------------------------------------------------------------------ */
/* ZIP writer (torch.save style)                                              */
/* ------------------------------------------------------------------------ */

#define ZB_MAX 2048

typedef struct zb_entry {
    char name[160];
    uint64_t local_off, data_off, size, comp;
    uint32_t crc;
    uint16_t method, flags;
} zb_entry;

typedef struct zipb {
    bb out;
    zb_entry e[ZB_MAX];
    int n;
    int descriptor;  /* set the data-descriptor flag and write descriptors (torch does) */
    int align;       /* pad record data to 64 bytes with an "FB" extra field (torch does) */
    int eocd_ff;     /* write 0xFFFF/0xFFFFFFFF in the end record: the ZIP64 one is needed */
    int no_zip64;    /* leave the ZIP64 end record and locator out */
    int zip64_extra; /* central directory: sizes and offsets as 0xFFFFFFFF + ZIP64 extra field */
} zipb;

static inline void zb_init(zipb *z)
{
    memset(z, 0, sizeof *z);
    z->descriptor = 1;
    z->align = 1;
}

static inline size_t zb_deflate(const void *data, size_t n, uint8_t **out)
{
    z_stream s;
    memset(&s, 0, sizeof s);
    if (deflateInit2(&s, 6, Z_DEFLATED, -MAX_WBITS, 8, Z_DEFAULT_STRATEGY) != Z_OK) abort();
    uLong cap = deflateBound(&s, (uLong)n) + 16;
    *out = malloc(cap);
    if (!*out) abort();
    s.next_in = (Bytef *)(uintptr_t)data;
    s.avail_in = (uInt)n;
    s.next_out = *out;
    s.avail_out = (uInt)cap;
    if (deflate(&s, Z_FINISH) != Z_STREAM_END) abort();
    size_t r = (size_t)s.total_out;
    deflateEnd(&s);
    return r;
}

/* Add a record; returns its index.  crc_zero: record CRC 0 (as with
 * torch's set_crc32_options(False)). */
static inline int zb_add_ex(zipb *z, const char *name, const void *data, size_t n, int deflate,
                            int crc_zero)
{
    if (z->n >= ZB_MAX) abort();
    zb_entry *e = &z->e[z->n];
    memset(e, 0, sizeof *e);
    size_t nlen = strlen(name);
    if (nlen >= sizeof e->name) abort();
    memcpy(e->name, name, nlen + 1);
    e->crc = crc_zero ? 0
                      : (uint32_t)crc32(crc32(0L, Z_NULL, 0),
                                        data ? (const Bytef *)data : (const Bytef *)"", (uInt)n);
    e->size = n;
    e->method = deflate ? 8 : 0;
    e->flags = z->descriptor ? 8 : 0;
    uint8_t *comp = NULL;
    const void *payload = data;
    size_t plen = n;
    if (deflate) {
        plen = zb_deflate(data, n, &comp);
        payload = comp;
    }
    e->comp = plen;
    e->local_off = z->out.n;
    size_t xlen = 0;
    if (z->align) {
        size_t here = z->out.n + 30 + nlen + 4;
        xlen = 4 + ((64 - here % 64) % 64);
    }
    bb *b = &z->out;
    bb_le32(b, 0x04034b50u);
    bb_le16(b, 20);
    bb_le16(b, e->flags);
    bb_le16(b, e->method);
    bb_le16(b, 0);    /* time */
    bb_le16(b, 0x21); /* date */
    bb_le32(b, z->descriptor ? 0 : e->crc);
    bb_le32(b, z->descriptor ? 0 : (uint32_t)e->comp);
    bb_le32(b, z->descriptor ? 0 : (uint32_t)e->size);
    bb_le16(b, (uint32_t)nlen);
    bb_le16(b, (uint32_t)xlen);
    bb_put(b, e->name, nlen);
    if (xlen) {
        bb_u8(b, 'F');
        bb_u8(b, 'B');
        bb_le16(b, (uint32_t)(xlen - 4));
        for (size_t i = 4; i < xlen; i++) bb_u8(b, 'Z');
    }
    e->data_off = b->n;
    bb_put(b, payload, plen);
    if (z->descriptor) {
        bb_le32(b, 0x08074b50u);
        bb_le32(b, e->crc);
        bb_le32(b, (uint32_t)e->comp);
        bb_le32(b, (uint32_t)e->size);
    }
    free(comp);
    return z->n++;
}

static inline int zb_add(zipb *z, const char *name, const void *data, size_t n)
{
    return zb_add_ex(z, name, data, n, 0, 0);
}

/* After a central directory of n records (cd_off, ending at b->n): the
 * ZIP64 end record and its locator (zip64), then the end record, whose
 * fields say 0xFFFF.. (eocd_ff: look in the ZIP64 one) or the values. */
static inline void zb_end_records(bb *b, uint64_t n, uint64_t cd_off, int zip64, int eocd_ff)
{
    uint64_t cd_size = b->n - cd_off;
    if (zip64) {
        uint64_t z64 = b->n;
        bb_le32(b, 0x06064b50u);
        bb_le64(b, 44);
        bb_le16(b, 45);
        bb_le16(b, 45);
        bb_le32(b, 0);
        bb_le32(b, 0);
        bb_le64(b, n);
        bb_le64(b, n);
        bb_le64(b, cd_size);
        bb_le64(b, cd_off);
        bb_le32(b, 0x07064b50u);
        bb_le32(b, 0);
        bb_le64(b, z64);
        bb_le32(b, 1);
    }
    bb_le32(b, 0x06054b50u);
    bb_le16(b, 0);
    bb_le16(b, 0);
    bb_le16(b, eocd_ff ? 0xFFFF : (uint32_t)n);
    bb_le16(b, eocd_ff ? 0xFFFF : (uint32_t)n);
    bb_le32(b, eocd_ff ? 0xFFFFFFFFu : (uint32_t)cd_size);
    bb_le32(b, eocd_ff ? 0xFFFFFFFFu : (uint32_t)cd_off);
    bb_le16(b, 0);
}

static inline void zb_finish(zipb *z)
{
    bb *b = &z->out;
    uint64_t cd_off = b->n;
    for (int i = 0; i < z->n; i++) {
        zb_entry *e = &z->e[i];
        size_t nlen = strlen(e->name);
        bb_le32(b, 0x02014b50u);
        bb_le16(b, 0x031e);
        bb_le16(b, 20);
        bb_le16(b, e->flags);
        bb_le16(b, e->method);
        bb_le16(b, 0);
        bb_le16(b, 0x21);
        bb_le32(b, e->crc);
        bb_le32(b, z->zip64_extra ? 0xFFFFFFFFu : (uint32_t)e->comp);
        bb_le32(b, z->zip64_extra ? 0xFFFFFFFFu : (uint32_t)e->size);
        bb_le16(b, (uint32_t)nlen);
        bb_le16(b, z->zip64_extra ? 28 : 0); /* extra */
        bb_le16(b, 0);                       /* comment */
        bb_le16(b, 0);                       /* disk */
        bb_le16(b, 0);                       /* internal attributes */
        bb_le32(b, 0);                       /* external attributes */
        bb_le32(b, z->zip64_extra ? 0xFFFFFFFFu : (uint32_t)e->local_off);
        bb_put(b, e->name, nlen);
        if (z->zip64_extra) { /* id 1: size, compressed size, local header offset */
            bb_le16(b, 1);
            bb_le16(b, 24);
            bb_le64(b, e->size);
            bb_le64(b, e->comp);
            bb_le64(b, e->local_off);
        }
    }
    zb_end_records(b, (uint64_t)z->n, cd_off, !z->no_zip64, z->eocd_ff);
}

static inline const zb_entry *zb_find(const zipb *z, const char *name)
{
    for (int i = 0; i < z->n; i++)
        if (strcmp(z->e[i].name, name) == 0) return &z->e[i];
    return NULL;
}

/* ------------------------------------------------------------------------ */
/* Legacy stream (formats.md section 3)                                       */
/* ------------------------------------------------------------------------ */

/* Pickles 1-3: magic number, protocol version 1001, sys_info. */
static inline void lg_header(bb *b)
{
    static const uint8_t magic[10] = {0x6c, 0xfc, 0x9c, 0x46, 0xf9, 0x20, 0x6a, 0xa8, 0x50, 0x19};
    pk_proto(b, 2);
    bb_u8(b, 0x8a);
    bb_u8(b, 10);
    bb_put(b, magic, 10);
    pk_stop(b);
    pk_proto(b, 2);
    pk_int(b, 1001);
    pk_stop(b);
    pk_proto(b, 2);
    pk_empty_dict(b);
    pk_mark(b);
    pk_str(b, "protocol_version");
    pk_int(b, 1001);
    pk_str(b, "little_endian");
    pk_bool(b, 1);
    pk_str(b, "type_sizes");
    pk_empty_dict(b);
    pk_mark(b);
    pk_str(b, "short");
    pk_int(b, 2);
    pk_str(b, "int");
    pk_int(b, 4);
    pk_str(b, "long");
    pk_int(b, 4);
    pk_setitems(b);
    pk_setitems(b);
    pk_stop(b);
}

/* Pickle 5: the list of storage keys. */
static inline void lg_keys(bb *b, const char *const *keys, int n)
{
    pk_proto(b, 2);
    pk_empty_list(b);
    if (n) {
        pk_mark(b);
        for (int i = 0; i < n; i++) pk_str(b, keys[i]);
        pk_appends(b);
    }
    pk_stop(b);
}

/* One storage's data: int64 element count, then the bytes. */
static inline void lg_storage(bb *b, uint64_t count, const void *data, size_t nbytes)
{
    bb_le64(b, count);
    bb_put(b, data, nbytes);
}

/* ------------------------------------------------------------------------ */
/* TAR (formats.md section 4): ustar headers with valid checksums             */
/* ------------------------------------------------------------------------ */

/* A 512-byte ustar header; prefix may be NULL. */
static inline void tar_header(uint8_t h[512], const char *name, const char *prefix, uint64_t size,
                              char type)
{
    memset(h, 0, 512);
    memcpy(h, name, strnlen(name, 100));
    memcpy(h + 100, "0000644", 7);
    memcpy(h + 108, "0000000", 7);
    memcpy(h + 116, "0000000", 7);
    char tmp[16];
    snprintf(tmp, sizeof tmp, "%011llo", (unsigned long long)size);
    memcpy(h + 124, tmp, 11);
    memcpy(h + 136, "00000000000", 11);
    h[156] = (uint8_t)type;
    memcpy(h + 257, "ustar", 6); /* "ustar\0" */
    memcpy(h + 263, "00", 2);
    if (prefix) memcpy(h + 345, prefix, strnlen(prefix, 155));
    memset(h + 148, ' ', 8);
    unsigned sum = 0;
    for (int i = 0; i < 512; i++) sum += h[i];
    snprintf(tmp, sizeof tmp, "%06o", sum);
    memcpy(h + 148, tmp, 6);
    h[154] = 0;
    h[155] = ' ';
}

static inline void tar_member_ex(bb *b, const char *name, const char *prefix, char type,
                                 const void *data, size_t n)
{
    uint8_t h[512];
    tar_header(h, name, prefix, n, type);
    bb_put(b, h, 512);
    bb_put(b, data, n);
    bb_zero(b, (512 - n % 512) % 512);
}

static inline void tar_member(bb *b, const char *name, const void *data, size_t n)
{
    tar_member_ex(b, name, NULL, '0', data, n);
}

static inline void tar_end(bb *b)
{
    bb_zero(b, 1024);
}

/* sys_info member contents (protocol_version 1000). */
static inline void tar_sys_info(bb *b)
{
    pk_proto(b, 2);
    pk_empty_dict(b);
    pk_mark(b);
    pk_str(b, "protocol_version");
    pk_int(b, 1000);
    pk_str(b, "little_endian");
    pk_bool(b, 1);
    pk_str(b, "type_sizes");
    pk_empty_dict(b);
    pk_setitems(b);
    pk_stop(b);
}

/* ---- opening helpers shared by the unit tests ---- */

static inline ckpt_file *open_ok_(const bb *b, const ckpt_options *o, const char *file, int line)
{
    ckpt_error e;
    memset(&e, 0, sizeof e);
    ckpt_file *f = ckpt_open_memory(b->p, b->n, o, &e);
    if (f) {
        ut_passed++;
    } else {
        ut_fail_at(file, line);
        fprintf(stderr, "open failed: %s: %s (offset %lld)\n", ckpt_code_name(e.code), e.message,
                (long long)e.offset);
    }
    return f;
}
#define OPEN_OK(b, o) open_ok_((b), (o), __FILE__, __LINE__)

/* The error of an open that must fail; "(opened)" with offset -2 when it did not. */
static inline ckpt_error open_fail(const bb *b, const ckpt_options *o)
{
    ckpt_error e;
    memset(&e, 0, sizeof e);
    ckpt_file *f = ckpt_open_memory(b->p, b->n, o, &e);
    if (f) {
        ckpt_close(f);
        memset(&e, 0, sizeof e);
        snprintf(e.message, sizeof e.message, "(opened)");
        e.offset = -2;
    }
    return e;
}

#endif
