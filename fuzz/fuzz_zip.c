/*
 * fuzz_zip.c - the ZIP container, with inputs that are always ZIPs.
 *
 * The first input byte chooses how the rest becomes a torch.save archive
 * (records under "archive/", laid out as torch writes them: 64-byte aligned
 * data, data-descriptor flag, ZIP64 end record and locator always present):
 *
 *   bit 1 clear  PICKLE mode: the rest is data.pkl.  Storages data/0 ..
 *                data/31 (1 KiB each) are there to be referenced.
 *   bit 1 set    PATCH mode: an archive with a fixed valid data.pkl is built,
 *                then the rest is a list of patches applied to its bytes,
 *                each [offset u16 LE][length u8][bytes]: lies in any field of
 *                any local header, central directory entry, ZIP64 record,
 *                locator or end record.
 *   bit 0        deflate data.pkl
 *   bit 2        add a "byteorder" record saying "big"
 *   bit 3        write sizes and offsets through ZIP64 extra fields
 *   bit 4        deflate the storages too
 *   bit 5        no "version" record
 */
#include "fuzz_common.h"

#include <zlib.h>

#define NSTORAGES 32
#define STORAGE_BYTES 1024

/* A valid data.pkl: one float tensor of 5x3 over storage "0" (60 bytes). */
static const uint8_t good_pkl[] =
    "\x80\x02\x63torch._utils\n_rebuild_tensor_v2\nq\x00((X\x07\x00\x00\x00storageq\x01"
    "ctorch\nFloatStorage\nq\x02X\x01\x00\x00\x00\x30q\x03X\x03\x00\x00\x00\x63puq\x04K\x0ftq\x05"
    "QK\x00K\x05K\x03\x86q\x06K\x01K\x05\x86q\x07\x89\x63\x63ollections\nOrderedDict\nq\x08)"
    "Rq\ttq\nRq\x0b.";

static int le16(buf *b, uint32_t v)
{
    uint8_t x[2] = {(uint8_t)v, (uint8_t)(v >> 8)};
    return put(b, x, 2);
}
static int le32(buf *b, uint32_t v)
{
    uint8_t x[4] = {(uint8_t)v, (uint8_t)(v >> 8), (uint8_t)(v >> 16), (uint8_t)(v >> 24)};
    return put(b, x, 4);
}
static int le64(buf *b, uint64_t v)
{
    return le32(b, (uint32_t)v) || le32(b, (uint32_t)(v >> 32));
}

typedef struct rec {
    char name[40];
    uint8_t *data; /* as stored */
    size_t size, csize;
    uint16_t method;
    uint32_t crc;
    uint64_t off;
    int borrowed; /* data belongs to the storage cache: not freed */
} rec;

/* Raw deflate of s into a new buffer. */
static uint8_t *deflate_raw(const uint8_t *s, size_t n, size_t *out_n)
{
    z_stream zs;
    memset(&zs, 0, sizeof zs);
    /* small window and hash: a fresh 256 KiB state per record made this
     * target five times slower than the others */
    if (deflateInit2(&zs, 1, Z_DEFLATED, -9, 1, Z_DEFAULT_STRATEGY) != Z_OK) return NULL;
    size_t cap = deflateBound(&zs, (uLong)n) + 16;
    uint8_t *o = malloc(cap);
    if (!o) {
        deflateEnd(&zs);
        return NULL;
    }
    zs.next_in = (Bytef *)(uintptr_t)s;
    zs.avail_in = (uInt)n;
    zs.next_out = o;
    zs.avail_out = (uInt)cap;
    int r = deflate(&zs, Z_FINISH);
    *out_n = cap - zs.avail_out;
    deflateEnd(&zs);
    if (r != Z_STREAM_END) {
        free(o);
        return NULL;
    }
    return o;
}

static int add_rec(rec *r, const char *name, const uint8_t *s, size_t n, int deflated)
{
    snprintf(r->name, sizeof r->name, "archive/%s", name);
    r->size = n;
    r->crc = (uint32_t)crc32(0, s, (uInt)n);
    if (deflated) {
        r->data = deflate_raw(s, n, &r->csize);
        r->method = 8;
    } else {
        r->data = malloc(n ? n : 1);
        if (r->data && n) memcpy(r->data, s, n);
        r->csize = n;
        r->method = 0;
    }
    return r->data ? 0 : -1;
}

/* The storages never change: build them (stored and deflated) once. */
static rec storage_cache[2][NSTORAGES];

static int storage_rec(rec *r, int i, int deflated)
{
    rec *c = &storage_cache[deflated][i];
    if (!c->data) {
        uint8_t sdata[STORAGE_BYTES];
        char name[16];
        for (int k = 0; k < STORAGE_BYTES; k++) sdata[k] = (uint8_t)(k * 7 + i);
        snprintf(name, sizeof name, "data/%d", i);
        if (add_rec(c, name, sdata, STORAGE_BYTES, deflated)) return -1;
    }
    *r = *c;
    r->borrowed = 1;
    return 0;
}

/* Lay the records out as torch.save does. */
static int build(buf *b, rec *rs, size_t nr, int zip64)
{
    for (size_t i = 0; i < nr; i++) {
        rec *r = &rs[i];
        size_t nl = strlen(r->name);
        r->off = b->n;
        size_t hdr = 30 + nl + 4;
        size_t pad = (64 - (b->n + hdr) % 64) % 64;
        if (le32(b, 0x04034b50u) || le16(b, zip64 ? 45 : 20) || le16(b, 8) || le16(b, r->method) ||
            le16(b, 0) || le16(b, 0x21) || le32(b, 0) || le32(b, 0) || le32(b, 0) ||
            le16(b, (uint32_t)nl) || le16(b, (uint32_t)(4 + pad)) || put(b, r->name, nl) ||
            le16(b, 0x4246) || le16(b, (uint32_t)pad))
            return -1;
        for (size_t k = 0; k < pad; k++)
            if (put(b, "Z", 1)) return -1;
        if (put(b, r->data, r->csize)) return -1;
        /* data descriptor */
        if (le32(b, 0x08074b50u) || le32(b, r->crc) || le32(b, (uint32_t)r->csize) ||
            le32(b, (uint32_t)r->size))
            return -1;
    }
    uint64_t cd = b->n;
    for (size_t i = 0; i < nr; i++) {
        rec *r = &rs[i];
        size_t nl = strlen(r->name);
        uint32_t big = 0xFFFFFFFFu;
        if (le32(b, 0x02014b50u) || le16(b, 0x031e) || le16(b, zip64 ? 45 : 20) || le16(b, 8) ||
            le16(b, r->method) || le16(b, 0) || le16(b, 0x21) || le32(b, r->crc) ||
            le32(b, zip64 ? big : (uint32_t)r->csize) || le32(b, zip64 ? big : (uint32_t)r->size) ||
            le16(b, (uint32_t)nl) || le16(b, zip64 ? 28 : 0) || le16(b, 0) || le16(b, 0) ||
            le16(b, 0) || le32(b, 0) || le32(b, zip64 ? big : (uint32_t)r->off) ||
            put(b, r->name, nl))
            return -1;
        if (zip64 &&
            (le16(b, 1) || le16(b, 24) || le64(b, r->size) || le64(b, r->csize) || le64(b, r->off)))
            return -1;
    }
    uint64_t cd_size = b->n - cd, z64 = b->n;
    if (le32(b, 0x06064b50u) || le64(b, 44) || le16(b, 0x031e) || le16(b, 45) || le32(b, 0) ||
        le32(b, 0) || le64(b, nr) || le64(b, nr) || le64(b, cd_size) || le64(b, cd))
        return -1;
    if (le32(b, 0x07064b50u) || le32(b, 0) || le64(b, z64) || le32(b, 1)) return -1;
    if (le32(b, 0x06054b50u) || le16(b, 0) || le16(b, 0) ||
        le16(b, zip64 ? 0xFFFF : (uint32_t)nr) || le16(b, zip64 ? 0xFFFF : (uint32_t)nr) ||
        le32(b, zip64 ? 0xFFFFFFFFu : (uint32_t)cd_size) ||
        le32(b, zip64 ? 0xFFFFFFFFu : (uint32_t)cd) || le16(b, 0))
        return -1;
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1 || size > (1u << 20)) return 0;
    uint8_t mode = data[0];
    const uint8_t *rest = data + 1;
    size_t rn = size - 1;
    int patch = (mode & 2) != 0;

    rec rs[NSTORAGES + 4];
    size_t nr = 0;
    memset(rs, 0, sizeof rs);
    int ok = 0;
    if (patch)
        ok |= add_rec(&rs[nr++], "data.pkl", good_pkl, sizeof good_pkl - 1, mode & 1);
    else
        ok |= add_rec(&rs[nr++], "data.pkl", rest, rn, mode & 1);
    for (int i = 0; i < NSTORAGES; i++) ok |= storage_rec(&rs[nr++], i, (mode & 16) != 0);
    if (!(mode & 32)) ok |= add_rec(&rs[nr++], "version", (const uint8_t *)"3\n", 2, 0);
    if (mode & 4) ok |= add_rec(&rs[nr++], "byteorder", (const uint8_t *)"big", 3, 0);

    buf b = {0};
    if (ok == 0 && build(&b, rs, nr, (mode & 8) != 0) == 0) {
        if (patch) {
            size_t i = 0;
            while (rn - i >= 3) {
                size_t off = (size_t)rest[i] | ((size_t)rest[i + 1] << 8), len = rest[i + 2];
                i += 3;
                if (len > rn - i) len = rn - i;
                if (off < b.n) memcpy(b.p + off, rest + i, off + len <= b.n ? len : b.n - off);
                i += len;
            }
        }
        fuzz_open_copy(b.p, b.n);
    }
    free(b.p);
    for (size_t i = 0; i < nr; i++)
        if (!rs[i].borrowed) free(rs[i].data);
    return 0;
}
