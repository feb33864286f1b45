/*
 * test_zip.c - the ZIP container (torch.save since 1.6), with archives built
 * here: stored records under a root folder with "FB" padding, data
 * descriptors, a ZIP64 end record + locator + end record; deflated records;
 * a "byteorder" record.  data.pkl is a protocol 2 pickle of
 * {name: _rebuild_tensor_v2(pid('storage', torch.<X>Storage, key, 'cpu', N),
 *  offset, size, stride, False, OrderedDict()), ...}.
 */
#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L
#endif
#include "ckpt.h"
#include "harness.h"
#include "build.h"

#include <math.h>
#include <sys/resource.h>

/* The shared helpers of build.h, over a ZIP builder's output. */
#undef OPEN_OK
#define OPEN_OK(z, o) open_ok_(&(z)->out, (o), __FILE__, __LINE__)

static ckpt_error open_fail_mem(const uint8_t *p, size_t n, const ckpt_options *o)
{
    bb b = {(uint8_t *)(uintptr_t)p, n, n};
    return open_fail(&b, o);
}

/* ------------------------------------------------------------------------ */
/* Reference views, computed here                                             */
/* ------------------------------------------------------------------------ */

/* Row-major image of a strided view of `base` (elements of size es). */
static void ref_view(const void *base, size_t es, int64_t off, int nd, const int64_t *shape,
                     const int64_t *stride, void *out)
{
    int64_t idx[16] = {0};
    int64_t numel = 1;
    for (int i = 0; i < nd; i++) numel *= shape[i];
    uint8_t *o = out;
    for (int64_t e = 0; e < numel; e++) {
        int64_t pos = off;
        for (int i = 0; i < nd; i++) pos += idx[i] * stride[i];
        memcpy(o + (size_t)e * es, (const uint8_t *)base + (size_t)pos * es, es);
        for (int i = nd; i-- > 0;) {
            if (++idx[i] < shape[i]) break;
            idx[i] = 0;
        }
    }
}

/* ------------------------------------------------------------------------ */
/* The main fixture                                                           */
/* ------------------------------------------------------------------------ */

typedef struct tview {
    const char *name;
    const char *key; /* storage */
    int64_t off;
    int nd;
    int64_t shape[4], stride[4];
    int contiguous;
} tview;

static float S0[12], S1[6];

static const tview VIEWS[] = {
    {"contig", "0", 0, 2, {3, 4}, {4, 1}, 1}, {"transposed", "0", 0, 2, {4, 3}, {1, 4}, 0},
    {"stepped", "0", 1, 1, {5}, {2}, 0},      {"expand", "1", 0, 2, {2, 3}, {0, 1}, 0},
    {"offset", "1", 4, 1, {2}, {1}, 1},       {"scalar", "1", 3, 0, {0}, {0}, 1},
    {"empty", "1", 0, 2, {0, 3}, {3, 1}, 1},  {"strided2d", "0", 1, 2, {2, 2}, {6, 2}, 0},
    {"column", "0", 2, 2, {3, 1}, {4, 1}, 0},
};
#define NVIEWS (sizeof VIEWS / sizeof VIEWS[0])

static void fill_storages(void)
{
    for (int i = 0; i < 12; i++) S0[i] = (float)i + 0.5f;
    for (int i = 0; i < 6; i++) S1[i] = 100.0f + (float)i;
}

static int64_t numel_of(const tview *v)
{
    int64_t n = 1;
    for (int i = 0; i < v->nd; i++) n *= v->shape[i];
    return n;
}

static void fixture_pickle(bb *p)
{
    pk_proto(p, 2);
    pk_empty_dict(p);
    pk_mark(p);
    for (size_t i = 0; i < NVIEWS; i++) {
        const tview *v = &VIEWS[i];
        pk_str(p, v->name);
        pk_tensor(p, "FloatStorage", v->key, strcmp(v->key, "0") == 0 ? 12 : 6, v->off, v->nd,
                  v->shape, v->stride);
    }
    pk_setitems(p);
    pk_stop(p);
}

/* A torch-style archive: data.pkl, byteorder (optional), data/<key>..., version. */
static void fixture_zip(zipb *z, const char *root, int deflate, int crc_zero_data0)
{
    bb p = {0}, d0 = {0}, d1 = {0};
    char name[128];
    fill_storages();
    fixture_pickle(&p);
    for (int i = 0; i < 12; i++) bb_f32le(&d0, S0[i]);
    for (int i = 0; i < 6; i++) bb_f32le(&d1, S1[i]);
    zb_init(z);
    snprintf(name, sizeof name, "%s/data.pkl", root);
    zb_add_ex(z, name, p.p, p.n, deflate, 0);
    snprintf(name, sizeof name, "%s/byteorder", root);
    zb_add_ex(z, name, "little", 6, deflate, 0);
    snprintf(name, sizeof name, "%s/data/0", root);
    zb_add_ex(z, name, d0.p, d0.n, deflate, crc_zero_data0);
    snprintf(name, sizeof name, "%s/data/1", root);
    zb_add_ex(z, name, d1.p, d1.n, deflate, 0);
    snprintf(name, sizeof name, "%s/version", root);
    zb_add_ex(z, name, "3\n", 2, deflate, 0);
    zb_finish(z);
    bb_free(&p);
    bb_free(&d0);
    bb_free(&d1);
}

static void check_fixture_tensors(ckpt_file *f, const zipb *z, const char *root, int deflated)
{
    char name[128];
    snprintf(name, sizeof name, "%s/data/0", root);
    const zb_entry *e0 = zb_find(z, name);
    snprintf(name, sizeof name, "%s/data/1", root);
    const zb_entry *e1 = zb_find(z, name);
    CHECK_EQ_INT(ckpt_tensor_count(f), NVIEWS);
    CHECK_EQ_INT(ckpt_storage_count(f), 2);
    size_t st0 = (size_t)-1, st1 = (size_t)-1;
    for (size_t i = 0; i < NVIEWS; i++) {
        const tview *v = &VIEWS[i];
        const ckpt_tensor *t = ckpt_find(f, v->name);
        CHECK(t != NULL);
        if (!t) {
            fprintf(stderr, "  missing tensor %s\n", v->name);
            continue;
        }
        CHECK(t == ckpt_tensor_at(f, i)); /* file order */
        CHECK_STR(t->name, v->name);
        CHECK_EQ_INT(t->dtype, CKPT_FLOAT32);
        CHECK_EQ_INT(t->ndim, v->nd);
        for (int d = 0; d < v->nd; d++) {
            CHECK_EQ_INT(t->shape[d], v->shape[d]);
            CHECK_EQ_INT(t->stride[d], v->stride[d]);
        }
        if (v->nd == 0) CHECK(t->shape == NULL);
        CHECK_EQ_INT(t->storage_offset, v->off);
        CHECK_EQ_U64(t->numel, (uint64_t)numel_of(v));
        CHECK_EQ_U64(t->nbytes, (uint64_t)numel_of(v) * 4);
        CHECK_EQ_INT(t->requires_grad, 0);
        CHECK_EQ_INT(t->contiguous, v->contiguous);
        const zb_entry *e = strcmp(v->key, "0") == 0 ? e0 : e1;
        if (deflated)
            CHECK_EQ_INT(t->file_offset, -1);
        else if (numel_of(v) == 0)
            CHECK_EQ_INT(t->file_offset, (int64_t)e->data_off);
        else
            CHECK_EQ_INT(t->file_offset, (int64_t)e->data_off + v->off * 4);
        if (strcmp(v->key, "0") == 0) {
            if (st0 == (size_t)-1) st0 = t->storage;
            CHECK_EQ_INT(t->storage, st0); /* shared storage: one index */
        } else {
            if (st1 == (size_t)-1) st1 = t->storage;
            CHECK_EQ_INT(t->storage, st1);
        }
        /* the whole read against the reference */
        float got[64], want[64];
        memset(got, 0xee, sizeof got);
        ref_view(strcmp(v->key, "0") == 0 ? (const void *)S0 : (const void *)S1, 4, v->off, v->nd,
                 v->shape, v->stride, want);
        ckpt_error err;
        CHECK_EQ_INT(ckpt_tensor_read(f, t, got, sizeof got, &err), 0);
        CHECK_MEM(got, want, (size_t)t->nbytes);
        /* every byte range, aligned or not */
        int bad = 0;
        for (uint64_t s = 0; s < t->nbytes; s++)
            for (uint64_t n = 1; s + n <= t->nbytes; n++) {
                uint8_t buf[256];
                memset(buf, 0xcc, sizeof buf);
                if (ckpt_tensor_read_range(f, t, s, buf, (size_t)n, &err) != 0 ||
                    memcmp(buf, (const uint8_t *)want + s, (size_t)n) != 0 || buf[n] != 0xcc)
                    bad++;
            }
        CHECK_EQ_INT(bad, 0);
        if (bad) fprintf(stderr, "  %s: %d ranges differ\n", v->name, bad);
        /* zero-length range at the end is fine */
        CHECK_EQ_INT(ckpt_tensor_read_range(f, t, t->nbytes, got, 0, &err), 0);
    }
    if (st0 != (size_t)-1 && st1 != (size_t)-1) {
        CHECK(st0 != st1);
        const ckpt_storage *s0 = ckpt_storage_at(f, st0), *s1 = ckpt_storage_at(f, st1);
        CHECK(s0 && s1);
        if (s0 && s1) {
            CHECK_STR(s0->key, "0");
            CHECK_STR(s1->key, "1");
            CHECK_EQ_INT(s0->dtype, CKPT_FLOAT32);
            CHECK_EQ_U64(s0->nbytes, 48);
            CHECK_EQ_U64(s1->nbytes, 24);
            CHECK_EQ_INT(s0->file_offset, deflated ? -1 : (int64_t)e0->data_off);
            CHECK_EQ_INT(s1->file_offset, deflated ? -1 : (int64_t)e1->data_off);
        }
    }
    CHECK(ckpt_storage_at(f, 2) == NULL);
    CHECK(ckpt_tensor_at(f, NVIEWS) == NULL);
    CHECK(ckpt_find(f, "nope") == NULL);
}

static void test_stored(void)
{
    SECTION("stored archive");
    zipb z;
    fixture_zip(&z, "archive", 0, 0);
    ckpt_file *f = OPEN_OK(&z, NULL);
    if (f) {
        ckpt_info info;
        ckpt_get_info(f, &info);
        CHECK_EQ_INT(info.format, CKPT_FORMAT_ZIP);
        CHECK_STR(ckpt_format_name(info.format), "zip");
        CHECK_STR(info.root, "archive");
        CHECK_STR(info.version, "3");
        CHECK_EQ_INT(info.byteorder, CKPT_LITTLE);
        CHECK_EQ_INT(info.tensor_count, NVIEWS);
        CHECK_EQ_INT(info.storage_count, 2);
        CHECK_EQ_U64(info.file_size, z.out.n);
        uint64_t total = 0;
        for (size_t i = 0; i < NVIEWS; i++) total += (uint64_t)numel_of(&VIEWS[i]) * 4;
        CHECK_EQ_U64(info.total_bytes, total);
        check_fixture_tensors(f, &z, "archive", 0);

        /* the value tree: a dict of tensors */
        const ckpt_value *r = ckpt_root(f);
        CHECK_EQ_INT(ckpt_value_kind(r), CKPT_V_DICT);
        CHECK_EQ_INT(ckpt_value_len(r), NVIEWS);
        const ckpt_value *tv = ckpt_value_get(r, "transposed");
        CHECK_EQ_INT(ckpt_value_kind(tv), CKPT_V_TENSOR);
        CHECK(ckpt_value_tensor(f, tv) == ckpt_find(f, "transposed"));

        /* zero copy from memory */
        ckpt_error err;
        const ckpt_tensor *t = ckpt_find(f, "contig");
        const void *p = t ? ckpt_tensor_data(f, t, &err) : NULL;
        CHECK(p == z.out.p + zb_find(&z, "archive/data/0")->data_off);
        if (p) CHECK_MEM(p, S0, 48);
        t = ckpt_find(f, "scalar");
        p = t ? ckpt_tensor_data(f, t, &err) : NULL;
        CHECK(p == z.out.p + zb_find(&z, "archive/data/1")->data_off + 12);
        t = ckpt_find(f, "transposed");
        memset(&err, 0, sizeof err);
        CHECK(ckpt_tensor_data(f, t, &err) == NULL);
        CHECK_EQ_INT(err.code, CKPT_E_NOTMAPPABLE);
        CHECK_CONTAINS(err.message, "contiguous");

        /* caller errors */
        float small[2];
        memset(&err, 0, sizeof err);
        CHECK_EQ_INT(ckpt_tensor_read(f, ckpt_find(f, "contig"), small, sizeof small, &err), -1);
        CHECK_EQ_INT(err.code, CKPT_E_ARG);
        memset(&err, 0, sizeof err);
        CHECK_EQ_INT(ckpt_tensor_read_range(f, ckpt_find(f, "contig"), 40, small, 9, &err), -1);
        CHECK_EQ_INT(err.code, CKPT_E_ARG);
        CHECK_EQ_INT(ckpt_tensor_read(f, NULL, small, sizeof small, &err), -1);
        CHECK_EQ_INT(err.code, CKPT_E_ARG);

        /* integrity */
        memset(&err, 0, sizeof err);
        CHECK_EQ_INT(ckpt_verify(f, NULL, NULL, &err), 0);
        ckpt_close(f);
    }
    bb_free(&z.out);
}

/* Another root folder name, no padding, no data descriptors. */
static void test_other_layouts(void)
{
    SECTION("root folder 'my_model'");
    zipb z;
    fixture_zip(&z, "my_model", 0, 0);
    ckpt_file *f = OPEN_OK(&z, NULL);
    if (f) {
        ckpt_info info;
        ckpt_get_info(f, &info);
        CHECK_STR(info.root, "my_model");
        check_fixture_tensors(f, &z, "my_model", 0);
        ckpt_close(f);
    }
    bb_free(&z.out);

    SECTION("end record with 0xFFFF markers (ZIP64 needed)");
    bb p = {0};
    fill_storages();
    fixture_pickle(&p);
    bb d0 = {0}, d1 = {0};
    for (int i = 0; i < 12; i++) bb_f32le(&d0, S0[i]);
    for (int i = 0; i < 6; i++) bb_f32le(&d1, S1[i]);
    for (int variant = 0; variant < 4; variant++) {
        zb_init(&z);
        if (variant == 0) z.eocd_ff = 1;
        if (variant == 1) z.no_zip64 = 1;
        if (variant == 2) z.descriptor = 0, z.align = 0;
        if (variant == 3) z.zip64_extra = 1;
        zb_add(&z, "archive/data.pkl", p.p, p.n);
        zb_add(&z, "archive/data/0", d0.p, d0.n);
        zb_add(&z, "archive/data/1", d1.p, d1.n);
        zb_finish(&z);
        f = OPEN_OK(&z, NULL);
        if (f) {
            check_fixture_tensors(f, &z, "archive", 0);
            ckpt_info info;
            ckpt_get_info(f, &info);
            CHECK_STR(info.version, "");
            ckpt_error err;
            CHECK_EQ_INT(ckpt_verify(f, NULL, NULL, &err), 0);
            ckpt_close(f);
        }
        if (variant == 2) {
            /* local headers carry crc and sizes: a wrong local crc is found */
            SECTION("local header crc differs");
            const zb_entry *e = zb_find(&z, "archive/data/1");
            z.out.p[e->local_off + 14] ^= 1;
            f = OPEN_OK(&z, NULL);
            if (f) {
                ckpt_error err;
                memset(&err, 0, sizeof err);
                CHECK_EQ_INT(ckpt_verify(f, NULL, NULL, &err), -1);
                CHECK_EQ_INT(err.code, CKPT_E_FORMAT);
                CHECK_EQ_INT(err.offset, (int64_t)e->local_off);
                CHECK_CONTAINS(err.message, "archive/data/1");
                ckpt_close(f);
            }
        }
        bb_free(&z.out);
    }
    /* end record saying 0xFFFF without a ZIP64 record */
    SECTION("0xFFFF markers without ZIP64");
    zb_init(&z);
    z.eocd_ff = 1;
    z.no_zip64 = 1;
    zb_add(&z, "archive/data.pkl", p.p, p.n);
    zb_finish(&z);
    {
        ckpt_error e = open_fail_mem(z.out.p, z.out.n, NULL);
        CHECK_EQ_INT(e.code, CKPT_E_FORMAT);
        CHECK_CONTAINS(e.message, "ZIP64");
    }
    bb_free(&z.out);
    /* no data.pkl */
    SECTION("no data.pkl");
    zb_init(&z);
    zb_add(&z, "archive/data/0", d0.p, d0.n);
    zb_finish(&z);
    {
        ckpt_error e = open_fail_mem(z.out.p, z.out.n, NULL);
        CHECK_EQ_INT(e.code, CKPT_E_FORMAT);
        CHECK_CONTAINS(e.message, "data.pkl");
    }
    bb_free(&z.out);
    bb_free(&p);
    bb_free(&d0);
    bb_free(&d1);
}

static void test_deflated(void)
{
    SECTION("deflated records");
    zipb z;
    fixture_zip(&z, "archive", 1, 0);
    for (int i = 0; i < z.n; i++) CHECK_EQ_INT(z.e[i].method, 8);
    ckpt_file *f = OPEN_OK(&z, NULL);
    if (f) {
        ckpt_info info;
        ckpt_get_info(f, &info);
        CHECK_STR(info.version, "3");
        check_fixture_tensors(f, &z, "archive", 1);
        ckpt_error err;
        memset(&err, 0, sizeof err);
        CHECK(ckpt_tensor_data(f, ckpt_find(f, "contig"), &err) == NULL);
        CHECK_EQ_INT(err.code, CKPT_E_NOTMAPPABLE);
        CHECK_EQ_INT(ckpt_verify(f, NULL, NULL, &err), 0);
        ckpt_close(f);
    }
    bb_free(&z.out);

    /* A storage that compresses well: 64 KiB of zeros deflate to ~100 bytes,
     * so the archive is smaller than the storage.  torch reads it (miniz
     * inflates); the storage size must be checked against the record's
     * uncompressed size, not the file size. */
    SECTION("deflated storage larger than the file");
    bb p = {0};
    float *zeros = calloc(16384, sizeof(float));
    int64_t shape[1] = {16384}, stride[1] = {1};
    pk_proto(&p, 2);
    pk_empty_dict(&p);
    pk_str(&p, "z");
    pk_tensor(&p, "FloatStorage", "0", 16384, 0, 1, shape, stride);
    pk_setitem(&p);
    pk_stop(&p);
    zb_init(&z);
    zb_add(&z, "archive/data.pkl", p.p, p.n);
    zb_add_ex(&z, "archive/data/0", zeros, 16384 * 4, 1, 0);
    zb_add(&z, "archive/version", "3\n", 2);
    zb_finish(&z);
    CHECK(z.out.n < 16384 * 4);
    f = OPEN_OK(&z, NULL);
    if (f) {
        const ckpt_tensor *t = ckpt_find(f, "z");
        float *got = malloc(16384 * 4);
        memset(got, 0xff, 16384 * 4);
        ckpt_error err;
        CHECK(t && ckpt_tensor_read(f, t, got, 16384 * 4, &err) == 0);
        CHECK_MEM(got, zeros, 16384 * 4);
        free(got);
        ckpt_close(f);
    }
    free(zeros);
    bb_free(&p);
    bb_free(&z.out);
}

static void test_big_endian(void)
{
    SECTION("byteorder big");
    /* f32 x4, complex64 x2, u8 x3, f64 x2, i16 x2 */
    float f32[4] = {1.5f, -2.25f, 3.0e10f, 0.1f};
    float c64[4] = {1.0f, -1.0f, 2.5f, 1.0e-3f}; /* re0 im0 re1 im1 */
    uint8_t u8[3] = {1, 2, 250};
    double f64[2] = {3.141592653589793, -1e300};
    int16_t i16[2] = {-2, 0x1234};
    bb d[5] = {{0}};
    for (int i = 0; i < 4; i++) bb_f32be(&d[0], f32[i]);
    for (int i = 0; i < 4; i++) bb_f32be(&d[1], c64[i]);
    bb_put(&d[2], u8, 3);
    for (int i = 0; i < 2; i++) {
        uint64_t u;
        memcpy(&u, &f64[i], 8);
        for (int k = 7; k >= 0; k--) bb_u8(&d[3], (unsigned)(u >> (8 * k)) & 0xff);
    }
    for (int i = 0; i < 2; i++) {
        bb_u8(&d[4], ((uint16_t)i16[i] >> 8) & 0xff);
        bb_u8(&d[4], (uint16_t)i16[i] & 0xff);
    }
    static const char *const cls[5] = {"FloatStorage", "ComplexFloatStorage", "ByteStorage",
                                       "DoubleStorage", "ShortStorage"};
    static const char *const keys[5] = {"0", "1", "2", "3", "4"};
    static const char *const names[5] = {"f32", "c64", "u8", "f64", "i16"};
    int64_t n[5] = {4, 2, 3, 2, 2};
    bb p = {0};
    pk_proto(&p, 2);
    pk_empty_dict(&p);
    pk_mark(&p);
    for (int i = 0; i < 5; i++) {
        int64_t st[1] = {1};
        pk_str(&p, names[i]);
        pk_tensor(&p, cls[i], keys[i], n[i], 0, 1, &n[i], st);
    }
    /* a transposed view of the floats: swapped per element too */
    {
        int64_t sh[2] = {2, 2}, st[2] = {1, 2};
        pk_str(&p, "f32t");
        pk_tensor(&p, "FloatStorage", "0", 4, 0, 2, sh, st);
    }
    pk_setitems(&p);
    pk_stop(&p);
    zipb z;
    zb_init(&z);
    zb_add(&z, "archive/data.pkl", p.p, p.n);
    zb_add(&z, "archive/byteorder", "big", 3);
    for (int i = 0; i < 5; i++) {
        char nm[64];
        snprintf(nm, sizeof nm, "archive/data/%s", keys[i]);
        zb_add(&z, nm, d[i].p, d[i].n);
    }
    zb_add(&z, "archive/version", "3\n", 2);
    zb_finish(&z);
    ckpt_file *f = OPEN_OK(&z, NULL);
    if (f) {
        ckpt_info info;
        ckpt_get_info(f, &info);
        CHECK_EQ_INT(info.byteorder, CKPT_BIG);
        ckpt_error err;
        uint8_t buf[64];
        const ckpt_tensor *t = ckpt_find(f, "f32");
        CHECK(t && ckpt_tensor_read(f, t, buf, sizeof buf, &err) == 0);
        CHECK_MEM(buf, f32, 16);
        /* unaligned range: bytes 2..9 of the native image */
        CHECK(t && ckpt_tensor_read_range(f, t, 2, buf, 7, &err) == 0);
        CHECK_MEM(buf, (const uint8_t *)f32 + 2, 7);
        memset(&err, 0, sizeof err);
        CHECK(ckpt_tensor_data(f, t, &err) == NULL);
        CHECK_EQ_INT(err.code, CKPT_E_NOTMAPPABLE);
        t = ckpt_find(f, "c64");
        CHECK(t && t->dtype == CKPT_COMPLEX64 && t->nbytes == 16);
        CHECK(t && ckpt_tensor_read(f, t, buf, sizeof buf, &err) == 0);
        CHECK_MEM(buf, c64, 16);
        t = ckpt_find(f, "u8");
        CHECK(t && ckpt_tensor_read(f, t, buf, sizeof buf, &err) == 0);
        CHECK_MEM(buf, u8, 3);
        CHECK(t && ckpt_tensor_data(f, t, &err) != NULL); /* bytes need no swap */
        t = ckpt_find(f, "f64");
        CHECK(t && ckpt_tensor_read(f, t, buf, sizeof buf, &err) == 0);
        CHECK_MEM(buf, f64, 16);
        t = ckpt_find(f, "i16");
        CHECK(t && t->dtype == CKPT_INT16);
        CHECK(t && ckpt_tensor_read(f, t, buf, sizeof buf, &err) == 0);
        CHECK_MEM(buf, i16, 4);
        t = ckpt_find(f, "f32t");
        float want[4] = {f32[0], f32[2], f32[1], f32[3]};
        CHECK(t && ckpt_tensor_read(f, t, buf, sizeof buf, &err) == 0);
        CHECK_MEM(buf, want, 16);
        int bad = 0;
        for (uint64_t s0 = 0; t && s0 < 16; s0++)
            for (uint64_t n0 = 1; s0 + n0 <= 16; n0++)
                if (ckpt_tensor_read_range(f, t, s0, buf, (size_t)n0, &err) != 0 ||
                    memcmp(buf, (const uint8_t *)want + s0, (size_t)n0) != 0)
                    bad++;
        CHECK_EQ_INT(bad, 0);
        t = ckpt_find(f, "c64");
        bad = 0;
        for (uint64_t s0 = 0; t && s0 < 16; s0++)
            for (uint64_t n0 = 1; s0 + n0 <= 16; n0++)
                if (ckpt_tensor_read_range(f, t, s0, buf, (size_t)n0, &err) != 0 ||
                    memcmp(buf, (const uint8_t *)c64 + s0, (size_t)n0) != 0)
                    bad++;
        CHECK_EQ_INT(bad, 0);
        CHECK_EQ_INT(ckpt_verify(f, NULL, NULL, &err), 0);
        ckpt_close(f);
    }
    bb_free(&z.out);
    /* a byteorder record that says something else */
    SECTION("byteorder 'middle'");
    zb_init(&z);
    zb_add(&z, "archive/data.pkl", p.p, p.n);
    zb_add(&z, "archive/byteorder", "middle", 6);
    zb_finish(&z);
    {
        ckpt_error e = open_fail_mem(z.out.p, z.out.n, NULL);
        CHECK_EQ_INT(e.code, CKPT_E_FORMAT);
        CHECK_CONTAINS(e.message, "middle");
    }
    bb_free(&z.out);
    bb_free(&p);
    for (int i = 0; i < 5; i++) bb_free(&d[i]);
}

/* ------------------------------------------------------------------------ */

typedef struct notes {
    int n;
    char last[300];
} notes;
static void note_cb(void *ctx, const char *line)
{
    notes *ns = ctx;
    ns->n++;
    snprintf(ns->last, sizeof ns->last, "%s", line);
}

static void test_verify(void)
{
    SECTION("verify: flipped data byte");
    zipb z;
    fixture_zip(&z, "archive", 0, 0);
    const zb_entry *e = zb_find(&z, "archive/data/0");
    z.out.p[e->data_off + 5] ^= 0x40;
    ckpt_file *f = OPEN_OK(&z, NULL); /* opening reads no tensor byte */
    if (f) {
        ckpt_error err;
        memset(&err, 0, sizeof err);
        CHECK_EQ_INT(ckpt_verify(f, NULL, NULL, &err), -1);
        CHECK_EQ_INT(err.code, CKPT_E_FORMAT);
        CHECK_CONTAINS(err.message, "crc mismatch in archive/data/0");
        CHECK_EQ_INT(err.offset, (int64_t)e->data_off);
        ckpt_close(f);
    }
    bb_free(&z.out);

    SECTION("verify: flipped deflated byte");
    fixture_zip(&z, "archive", 1, 0);
    e = zb_find(&z, "archive/data/1");
    /* flip a bit in the stored (compressed) stream's last byte: either the
     * inflate fails or the crc differs; both name the record */
    z.out.p[e->data_off + e->comp - 1] ^= 0x01;
    f = OPEN_OK(&z, NULL);
    if (f) {
        ckpt_error err;
        memset(&err, 0, sizeof err);
        CHECK_EQ_INT(ckpt_verify(f, NULL, NULL, &err), -1);
        CHECK_EQ_INT(err.code, CKPT_E_FORMAT);
        CHECK_CONTAINS(err.message, "archive/data/1");
        ckpt_close(f);
    }
    bb_free(&z.out);

    SECTION("verify: data descriptor crc");
    fixture_zip(&z, "archive", 0, 0);
    e = zb_find(&z, "archive/data/1");
    z.out.p[e->data_off + e->comp + 4] ^= 0x01; /* descriptor: signature, then crc */
    f = OPEN_OK(&z, NULL);
    if (f) {
        ckpt_error err;
        memset(&err, 0, sizeof err);
        CHECK_EQ_INT(ckpt_verify(f, NULL, NULL, &err), -1);
        CHECK_EQ_INT(err.code, CKPT_E_FORMAT);
        CHECK_EQ_INT(err.offset, (int64_t)(e->data_off + e->comp));
        CHECK_CONTAINS(err.message, "archive/data/1");
        ckpt_close(f);
    }
    bb_free(&z.out);

    SECTION("verify: local header name");
    fixture_zip(&z, "archive", 0, 0);
    e = zb_find(&z, "archive/version");
    z.out.p[e->local_off + 30 + 8] = 'V'; /* archive/Version */
    f = OPEN_OK(&z, NULL);
    if (f) {
        ckpt_info info;
        ckpt_get_info(f, &info);
        CHECK_STR(info.version, "3"); /* names come from the central directory */
        ckpt_error err;
        memset(&err, 0, sizeof err);
        CHECK_EQ_INT(ckpt_verify(f, NULL, NULL, &err), -1);
        CHECK_EQ_INT(err.code, CKPT_E_FORMAT);
        CHECK_EQ_INT(err.offset, (int64_t)e->local_off);
        CHECK_CONTAINS(err.message, "archive/version");
        ckpt_close(f);
    }
    bb_free(&z.out);

    SECTION("verify: zero crc is a note");
    fixture_zip(&z, "archive", 0, 1);
    f = OPEN_OK(&z, NULL);
    if (f) {
        ckpt_error err;
        notes ns = {0};
        CHECK_EQ_INT(ckpt_verify(f, note_cb, &ns, &err), 0);
        CHECK_EQ_INT(ns.n, 1);
        CHECK_CONTAINS(ns.last, "archive/data/0");
        CHECK_EQ_INT(ckpt_verify(f, NULL, NULL, NULL), 0); /* NULL note and err */
        ckpt_close(f);
    }
    bb_free(&z.out);
}

/* ------------------------------------------------------------------------ */

static void test_key(void)
{
    SECTION("options.key");
    bb p = {0}, d = {0};
    int64_t sh[1] = {2}, st[1] = {1};
    pk_proto(&p, 2);
    pk_empty_dict(&p);
    pk_mark(&p);
    pk_str(&p, "state_dict");
    pk_empty_dict(&p);
    pk_str(&p, "w");
    pk_tensor(&p, "FloatStorage", "0", 2, 0, 1, sh, st);
    pk_setitem(&p);
    pk_str(&p, "epoch");
    pk_int(&p, 3);
    pk_str(&p, "opt");
    pk_empty_dict(&p);
    pk_str(&p, "m");
    pk_tensor(&p, "FloatStorage", "0", 2, 1, 1, st, st);
    pk_setitem(&p);
    pk_setitems(&p);
    pk_stop(&p);
    bb_f32le(&d, 7.0f);
    bb_f32le(&d, 8.0f);
    zipb z;
    zb_init(&z);
    zb_add(&z, "archive/data.pkl", p.p, p.n);
    zb_add(&z, "archive/data/0", d.p, d.n);
    zb_finish(&z);
    ckpt_file *f = OPEN_OK(&z, NULL);
    if (f) {
        CHECK_EQ_INT(ckpt_tensor_count(f), 2);
        CHECK(ckpt_find(f, "state_dict.w") != NULL);
        CHECK(ckpt_find(f, "opt.m") != NULL);
        ckpt_close(f);
    }
    ckpt_options o;
    ckpt_options_init(&o);
    char key[16] = "state_dict";
    o.key = key;
    f = OPEN_OK(&z, &o);
    key[0] = 'X'; /* the file keeps its own copy */
    if (f) {
        CHECK_EQ_INT(ckpt_tensor_count(f), 1);
        const ckpt_tensor *t = ckpt_find(f, "w");
        CHECK(t != NULL);
        CHECK(ckpt_find(f, "state_dict.w") == NULL);
        CHECK_EQ_INT(ckpt_value_kind(ckpt_root(f)), CKPT_V_DICT);
        CHECK_EQ_INT(ckpt_value_len(ckpt_root(f)), 1);
        float got[2];
        ckpt_error err;
        CHECK(t && ckpt_tensor_read(f, t, got, sizeof got, &err) == 0);
        CHECK(got[0] == 7.0f && got[1] == 8.0f);
        ckpt_close(f);
    }
    o.key = "missing";
    {
        ckpt_error e = open_fail_mem(z.out.p, z.out.n, &o);
        CHECK_EQ_INT(e.code, CKPT_E_NOTFOUND);
        CHECK_CONTAINS(e.message, "missing");
        CHECK_CONTAINS(e.message, "'state_dict', 'epoch', 'opt'");
    }
    bb_free(&p);
    bb_free(&d);
    bb_free(&z.out);
}

/* ------------------------------------------------------------------------ */

/* data.pkl with one tensor 'w' over storage `key` (numel), view (off, n). */
static void one_tensor_zip(zipb *z, const char *key, int64_t numel, int64_t off, int64_t n,
                           const void *data, size_t dn, const char *record)
{
    bb p = {0};
    int64_t sh[1] = {n}, st[1] = {1};
    pk_proto(&p, 2);
    pk_empty_dict(&p);
    pk_str(&p, "w");
    pk_tensor(&p, "FloatStorage", key, numel, off, 1, sh, st);
    pk_setitem(&p);
    pk_stop(&p);
    zb_init(z);
    zb_add(z, "archive/data.pkl", p.p, p.n);
    zb_add(z, record, data, dn);
    zb_finish(z);
    bb_free(&p);
}

/* File offset of the first (last: 1) occurrence of `pat` in data.pkl. */
static int64_t find_op(const zipb *z, const char *pat, int last)
{
    const zb_entry *e = zb_find(z, "archive/data.pkl");
    size_t n = strlen(pat);
    int64_t at = -1;
    for (size_t i = 0; e && i + n <= e->size; i++)
        if (memcmp(z->out.p + e->data_off + i, pat, n) == 0) {
            at = (int64_t)(e->data_off + i);
            if (!last) break;
        }
    return at;
}

static void test_errors(void)
{
    float d[12] = {0};
    zipb z;

    SECTION("missing data record");
    one_tensor_zip(&z, "7", 12, 0, 12, d, 48, "archive/data/0");
    {
        ckpt_error e = open_fail_mem(z.out.p, z.out.n, NULL);
        CHECK_EQ_INT(e.code, CKPT_E_FORMAT);
        CHECK_CONTAINS(e.message, "archive/data/7");
        CHECK_CONTAINS(e.message, "missing");
        CHECK_EQ_INT(e.offset, find_op(&z, "tQ", 0) + 1); /* the BINPERSID */
    }
    bb_free(&z.out);

    SECTION("record shorter than its storage");
    one_tensor_zip(&z, "0", 12, 0, 12, d, 8, "archive/data/0");
    {
        ckpt_error e = open_fail_mem(z.out.p, z.out.n, NULL);
        CHECK_EQ_INT(e.code, CKPT_E_FORMAT);
        CHECK_CONTAINS(e.message, "archive/data/0");
        CHECK_CONTAINS(e.message, "8 bytes");
        CHECK_CONTAINS(e.message, "48");
    }
    bb_free(&z.out);

    SECTION("view past the end of its storage");
    one_tensor_zip(&z, "0", 12, 2, 11, d, 48, "archive/data/0");
    {
        ckpt_error e = open_fail_mem(z.out.p, z.out.n, NULL);
        CHECK_EQ_INT(e.code, CKPT_E_FORMAT);
        CHECK_CONTAINS(e.message, "'w'");
        CHECK_CONTAINS(e.message, "byte 52");
        CHECK_CONTAINS(e.message, "48 bytes");
        CHECK_EQ_INT(e.offset, find_op(&z, "tR", 1) + 1); /* the rebuild's REDUCE */
    }
    bb_free(&z.out);

    SECTION("view exactly at the end");
    one_tensor_zip(&z, "0", 12, 2, 10, d, 48, "archive/data/0");
    {
        ckpt_file *f = OPEN_OK(&z, NULL);
        CHECK(f && ckpt_tensor_count(f) == 1);
        ckpt_close(f);
    }
    bb_free(&z.out);

    SECTION("record not in a root folder");
    {
        zb_init(&z);
        zb_add(&z, "data.pkl", "\x80\x02N.", 4);
        zb_finish(&z);
        ckpt_error e = open_fail_mem(z.out.p, z.out.n, NULL);
        CHECK_EQ_INT(e.code, CKPT_E_FORMAT);
        CHECK_CONTAINS(e.message, "root folder");
    }
    bb_free(&z.out);

    SECTION("truncated archive");
    one_tensor_zip(&z, "0", 12, 0, 12, d, 48, "archive/data/0");
    for (size_t cut = 1; cut < 120; cut += 7) {
        ckpt_error e = open_fail_mem(z.out.p, z.out.n - cut, NULL);
        CHECK(e.code == CKPT_E_FORMAT || e.code == CKPT_E_PICKLE);
    }
    bb_free(&z.out);
}

/* ------------------------------------------------------------------------ */

/* _rebuild_tensor_v3 over torch.storage.UntypedStorage (numel in bytes). */
static void test_v3(void)
{
    SECTION("_rebuild_tensor_v3");
    uint8_t f8[8] = {0x38, 0x40, 0xb8, 0x00, 0x7e, 0x01, 0x02, 0x03};
    uint16_t u16[4] = {1, 65535, 0x1234, 500};
    bb p = {0};
    pk_proto(&p, 2);
    pk_empty_dict(&p);
    pk_mark(&p);
    const char *dts[2] = {"float8_e4m3fn", "uint16"};
    const char *names[2] = {"f8", "u16"};
    const char *keys[2] = {"0", "1"};
    int64_t n[2] = {8, 3}, off[2] = {0, 1};
    for (int i = 0; i < 2; i++) {
        int64_t st[1] = {1};
        pk_str(&p, names[i]);
        pk_global(&p, "torch._utils", "_rebuild_tensor_v3");
        pk_mark(&p);
        pk_storage_pid_ex(&p, "torch.storage", "UntypedStorage", keys[i], "cpu", 8, 0, NULL);
        pk_view_args(&p, off[i], 1, &n[i], st);
        pk_bool(&p, 0);
        pk_ordereddict(&p);
        pk_global(&p, "torch", dts[i]);
        pk_tuple(&p);
        pk_reduce(&p);
    }
    pk_setitems(&p);
    pk_stop(&p);
    bb d1 = {0};
    for (int i = 0; i < 4; i++) bb_le16(&d1, u16[i]);
    zipb z;
    zb_init(&z);
    zb_add(&z, "archive/data.pkl", p.p, p.n);
    zb_add(&z, "archive/data/0", f8, 8);
    zb_add(&z, "archive/data/1", d1.p, d1.n);
    zb_finish(&z);
    ckpt_file *f = OPEN_OK(&z, NULL);
    if (f) {
        ckpt_error err;
        uint8_t buf[16];
        const ckpt_tensor *t = ckpt_find(f, "f8");
        CHECK(t != NULL);
        if (t) {
            CHECK_EQ_INT(t->dtype, CKPT_FLOAT8_E4M3FN);
            CHECK_STR(ckpt_dtype_name(t->dtype), "float8_e4m3fn");
            CHECK_EQ_U64(t->nbytes, 8);
            CHECK_EQ_INT(ckpt_tensor_read(f, t, buf, sizeof buf, &err), 0);
            CHECK_MEM(buf, f8, 8);
            const ckpt_storage *s = ckpt_storage_at(f, t->storage);
            CHECK(s && s->nbytes == 8 && s->dtype == CKPT_FLOAT8_E4M3FN);
        }
        t = ckpt_find(f, "u16");
        CHECK(t != NULL);
        if (t) {
            CHECK_EQ_INT(t->dtype, CKPT_UINT16);
            CHECK_EQ_U64(t->numel, 3);
            CHECK_EQ_U64(t->nbytes, 6);
            CHECK_EQ_INT(t->file_offset, (int64_t)zb_find(&z, "archive/data/1")->data_off + 2);
            CHECK_EQ_INT(ckpt_tensor_read(f, t, buf, sizeof buf, &err), 0);
            CHECK_MEM(buf, u16 + 1, 6);
            const ckpt_storage *s = ckpt_storage_at(f, t->storage);
            CHECK(s && s->nbytes == 8 && s->dtype == CKPT_UINT16);
        }
        ckpt_close(f);
    }
    bb_free(&z.out);
    bb_free(&p);
    bb_free(&d1);

    SECTION("v2 over an UntypedStorage is refused");
    pk_proto(&p, 2);
    {
        int64_t sh[1] = {2}, st[1] = {1};
        pk_v2_begin(&p);
        pk_storage_pid_ex(&p, "torch.storage", "UntypedStorage", "0", "cpu", 8, 0, NULL);
        pk_v2_end(&p, 0, 1, sh, st, 0);
    }
    pk_stop(&p);
    zb_init(&z);
    zb_add(&z, "archive/data.pkl", p.p, p.n);
    zb_add(&z, "archive/data/0", f8, 8);
    zb_finish(&z);
    {
        ckpt_error e = open_fail_mem(z.out.p, z.out.n, NULL);
        CHECK_EQ_INT(e.code, CKPT_E_PICKLE);
        CHECK_CONTAINS(e.message, "v3");
    }
    bb_free(&z.out);
    bb_free(&p);
}

/* _rebuild_parameter: requires_grad; a tensor at the root has name "". */
static void test_parameter_and_root(void)
{
    SECTION("_rebuild_parameter at the root");
    bb p = {0};
    float d[3] = {1, 2, 3};
    int64_t sh[1] = {3}, st[1] = {1};
    pk_proto(&p, 2);
    pk_global(&p, "torch._utils", "_rebuild_parameter");
    pk_mark(&p);
    pk_tensor(&p, "FloatStorage", "0", 3, 0, 1, sh, st);
    pk_bool(&p, 1);
    pk_ordereddict(&p);
    pk_tuple(&p);
    pk_reduce(&p);
    pk_stop(&p);
    zipb z;
    zb_init(&z);
    zb_add(&z, "archive/data.pkl", p.p, p.n);
    zb_add(&z, "archive/data/0", d, sizeof d);
    zb_finish(&z);
    ckpt_file *f = OPEN_OK(&z, NULL);
    if (f) {
        CHECK_EQ_INT(ckpt_tensor_count(f), 1);
        const ckpt_tensor *t = ckpt_tensor_at(f, 0);
        CHECK(t && strcmp(t->name, "") == 0);
        CHECK(t && t->requires_grad == 1);
        CHECK(ckpt_find(f, "") == t);
        CHECK_EQ_INT(ckpt_value_kind(ckpt_root(f)), CKPT_V_TENSOR);
        CHECK(ckpt_value_tensor(f, ckpt_root(f)) == t);
        /* globals recorded with the pickle's name */
        int found = 0;
        for (size_t i = 0; i < ckpt_global_count(f); i++) {
            const ckpt_global_ref *g = ckpt_global_at(f, i);
            CHECK_STR(g->pickle, "data.pkl");
            if (strcmp(g->name, "_rebuild_parameter") == 0) {
                found = 1;
                CHECK_EQ_INT(g->called, 1);
                CHECK_STR(g->module, "torch._utils");
            }
        }
        CHECK(found);
        ckpt_close(f);
    }
    bb_free(&z.out);
    bb_free(&p);
}

/* One tensor reached through DUP-shared lists: every path is a name, and
 * the listings count against max_expansion. */
static void test_tensor_billion_laughs(void)
{
    SECTION("billion laughs of a tensor");
    bb p = {0};
    float d[1] = {1};
    int64_t sh[1] = {1}, st[1] = {1};
    pk_proto(&p, 2);
    for (int i = 0; i < 40; i++) pk_mark(&p);
    pk_tensor(&p, "FloatStorage", "0", 1, 0, 1, sh, st);
    for (int i = 0; i < 40; i++) bb_text(&p, "2l");
    pk_stop(&p);
    zipb z;
    zb_init(&z);
    zb_add(&z, "archive/data.pkl", p.p, p.n);
    zb_add(&z, "archive/data/0", d, sizeof d);
    zb_finish(&z);
    ckpt_options o;
    ckpt_options_init(&o);
    o.max_expansion = 100000;
    {
        ckpt_error e = open_fail_mem(z.out.p, z.out.n, &o);
        CHECK_EQ_INT(e.code, CKPT_E_LIMIT);
    }
    bb_free(&z.out);
    bb_free(&p);

    /* 3 levels: 8 names of one tensor, all listed */
    pk_proto(&p, 2);
    for (int i = 0; i < 3; i++) pk_mark(&p);
    pk_tensor(&p, "FloatStorage", "0", 1, 0, 1, sh, st);
    for (int i = 0; i < 3; i++) bb_text(&p, "2l");
    pk_stop(&p);
    zb_init(&z);
    zb_add(&z, "archive/data.pkl", p.p, p.n);
    zb_add(&z, "archive/data/0", d, sizeof d);
    zb_finish(&z);
    ckpt_file *f = OPEN_OK(&z, &o);
    if (f) {
        CHECK_EQ_INT(ckpt_tensor_count(f), 8);
        CHECK(ckpt_find(f, "0.0.0") != NULL);
        CHECK(ckpt_find(f, "1.1.1") != NULL);
        CHECK_EQ_INT(ckpt_storage_count(f), 1);
        ckpt_close(f);
    }
    bb_free(&z.out);
    bb_free(&p);
}

/* Tensors that each cost 15 pickle bytes (memoized persistent id and
 * hooks, fresh argument tuple): 16 MiB of them would name a million
 * tensors.  The limits stop it inside 256 MiB; 50,000 open. */
static long peak_kib(void)
{
    struct rusage ru;
    return getrusage(RUSAGE_SELF, &ru) == 0 ? ru.ru_maxrss : -1;
}

static void flood_zip(zipb *z, size_t ntensors, size_t fill_to)
{
    static const char head[] = "\x80\x02]q\x00"
                               "ctorch._utils\n_rebuild_tensor_v2\nq\x01"
                               "0"
                               "((X\x07\x00\x00\x00storageq\x02"
                               "ctorch\nFloatStorage\nq\x03X\x01\x00\x00\x00"
                               "0q\x04"
                               "X\x03\x00\x00\x00"
                               "cpuq\x05K\x0ftq\x06Q"
                               "K\x00))\x89"
                               "ccollections\nOrderedDict\nq\x07)Rq\x08tq\x09"
                               "0";
    static const char unit[] = "h\x01(h\x06QK\x00))\x89h\x08tRa";
    bb p = {0};
    float d[15] = {0};
    bb_put(&p, head, sizeof head - 1);
    for (size_t i = 0; i < ntensors || (fill_to && p.n + sizeof unit < fill_to); i++)
        bb_put(&p, unit, sizeof unit - 1);
    pk_stop(&p);
    zb_init(z);
    zb_add(z, "archive/data.pkl", p.p, p.n);
    zb_add(z, "archive/data/0", d, sizeof d);
    zb_finish(z);
    bb_free(&p);
}

static void test_tensor_flood(void)
{
    SECTION("a flood of cheap tensors");
    zipb z;
    flood_zip(&z, 50000, 0);
    ckpt_file *f = OPEN_OK(&z, NULL);
    if (f) {
        CHECK_EQ_INT(ckpt_tensor_count(f), 50000);
        ckpt_close(f);
    }
    bb_free(&z.out);
    flood_zip(&z, 0, (size_t)16 << 20);
    long before = peak_kib();
    ckpt_error e = open_fail_mem(z.out.p, z.out.n, NULL);
    long after = peak_kib();
    CHECK_EQ_INT(e.code, CKPT_E_LIMIT);
#if !defined(__SANITIZE_ADDRESS__) && !defined(CKPT_SANITIZED)
    CHECK(after - before < (256l << 10));
#else
    (void)before, (void)after;
#endif
    bb_free(&z.out);
}

/* A refused layout (sparse) and a bad extent fail the open, unless
 * options.skip_tensors asks for the pickles only. */
static void test_skip_tensors(void)
{
    SECTION("refused layout");
    bb p = {0};
    float d[4] = {0};
    int64_t sh[1] = {4}, st[1] = {1};
    pk_proto(&p, 2);
    pk_empty_dict(&p);
    pk_mark(&p);
    pk_str(&p, "dense");
    pk_tensor(&p, "FloatStorage", "0", 4, 0, 1, sh, st);
    pk_str(&p, "sp");
    pk_global(&p, "torch._utils", "_rebuild_sparse_tensor");
    pk_global(&p, "torch", "sparse_coo");
    pk_mark(&p);
    pk_tensor(&p, "FloatStorage", "0", 4, 0, 1, sh, st);
    pk_tensor(&p, "FloatStorage", "0", 4, 0, 1, sh, st);
    pk_int_tuple(&p, sh, 1);
    pk_tuple(&p);
    bb_u8(&p, 0x86);
    pk_reduce(&p);
    pk_str(&p, "late");
    pk_tensor(&p, "FloatStorage", "0", 4, 1, 1, sh, st); /* reaches byte 20 of 16 */
    pk_setitems(&p);
    pk_stop(&p);
    zipb z;
    zb_init(&z);
    zb_add(&z, "archive/data.pkl", p.p, p.n);
    zb_add(&z, "archive/data/0", d, sizeof d);
    zb_finish(&z);
    {
        /* a sparse tensor no longer blocks the file: the bad extent after it
         * is what fails the open */
        ckpt_error e = open_fail_mem(z.out.p, z.out.n, NULL);
        CHECK_EQ_INT(e.code, CKPT_E_FORMAT);
        CHECK_CONTAINS(e.message, "'late'");
    }
    SECTION("skip_tensors");
    ckpt_options o;
    ckpt_options_init(&o);
    o.skip_tensors = 1;
    ckpt_file *f = OPEN_OK(&z, &o);
    if (f) {
        CHECK_EQ_INT(ckpt_tensor_count(f), 0);
        CHECK(ckpt_find(f, "dense") == NULL);
        CHECK_EQ_INT(ckpt_value_kind(ckpt_value_get(ckpt_root(f), "dense")), CKPT_V_TENSOR);
        CHECK(ckpt_value_tensor(f, ckpt_value_get(ckpt_root(f), "dense")) == NULL);
        CHECK_EQ_INT(ckpt_value_kind(ckpt_value_get(ckpt_root(f), "sp")), CKPT_V_TENSOR);
        int saw = 0;
        for (size_t i = 0; i < ckpt_global_count(f); i++)
            if (strcmp(ckpt_global_at(f, i)->name, "_rebuild_sparse_tensor") == 0) saw = 1;
        CHECK(saw);
        ckpt_close(f);
    }
    bb_free(&z.out);
    bb_free(&p);
}

/* Tensor names: dict keys and list indices joined by '.', objects' state. */
static void test_naming(void)
{
    SECTION("tensor names");
    bb p = {0};
    float d[2] = {1, 2};
    int64_t sh[1] = {2}, st[1] = {1};
    pk_proto(&p, 2);
    pk_empty_dict(&p);
    pk_mark(&p);
    pk_str(&p, "layers"); /* layers: [{'w': t}, {'w': t}] */
    pk_empty_list(&p);
    pk_mark(&p);
    for (int i = 0; i < 2; i++) {
        pk_empty_dict(&p);
        pk_str(&p, "w");
        pk_tensor(&p, "FloatStorage", "0", 2, 0, 1, sh, st);
        pk_setitem(&p);
    }
    pk_appends(&p);
    pk_int(&p, 5); /* 5: t */
    pk_tensor(&p, "FloatStorage", "0", 2, 0, 1, sh, st);
    pk_none(&p); /* None: (t,) */
    pk_tensor(&p, "FloatStorage", "0", 2, 0, 1, sh, st);
    bb_u8(&p, 0x85);
    pk_str(&p, "args"); /* args: argparse.Namespace() with state {'emb': t} */
    pk_global(&p, "argparse", "Namespace");
    pk_empty_tuple(&p);
    pk_reduce(&p);
    pk_empty_dict(&p);
    pk_str(&p, "emb");
    pk_tensor(&p, "FloatStorage", "0", 2, 0, 1, sh, st);
    pk_setitem(&p);
    pk_build(&p);
    pk_str(&p, "opt"); /* opt: OrderedDict with a nested 'state' */
    pk_ordereddict(&p);
    pk_str(&p, "state");
    pk_empty_dict(&p);
    pk_int(&p, 0);
    pk_tensor(&p, "FloatStorage", "0", 2, 0, 1, sh, st);
    pk_setitem(&p);
    pk_setitem(&p);
    pk_setitems(&p);
    pk_stop(&p);
    zipb z;
    zb_init(&z);
    zb_add(&z, "archive/data.pkl", p.p, p.n);
    zb_add(&z, "archive/data/0", d, sizeof d);
    zb_finish(&z);
    ckpt_file *f = OPEN_OK(&z, NULL);
    if (f) {
        static const char *const names[] = {"layers.0.w", "layers.1.w", "5",
                                            "None.0",     "args.emb",   "opt.state.0"};
        CHECK_EQ_INT(ckpt_tensor_count(f), 6);
        for (size_t i = 0; i < 6; i++) {
            const ckpt_tensor *t = ckpt_tensor_at(f, i);
            CHECK(t != NULL);
            if (t) CHECK_STR(t->name, names[i]);
            CHECK(ckpt_find(f, names[i]) == t);
            CHECK(t && t->storage == ckpt_tensor_at(f, 0)->storage);
        }
        CHECK_EQ_INT(ckpt_storage_count(f), 1);
        ckpt_close(f);
    }
    bb_free(&z.out);
    bb_free(&p);

    SECTION("two key paths that flatten to one name: both listed (test_names.c)");
    pk_proto(&p, 2);
    pk_empty_dict(&p);
    pk_mark(&p);
    pk_str(&p, "a.b");
    pk_tensor(&p, "FloatStorage", "0", 2, 0, 1, sh, st);
    pk_str(&p, "a");
    pk_empty_dict(&p);
    pk_str(&p, "b");
    pk_tensor(&p, "FloatStorage", "0", 2, 0, 1, sh, st);
    pk_setitem(&p);
    pk_setitems(&p);
    pk_stop(&p);
    zb_init(&z);
    zb_add(&z, "archive/data.pkl", p.p, p.n);
    zb_add(&z, "archive/data/0", d, sizeof d);
    zb_finish(&z);
    {
        ckpt_file *f = OPEN_OK(&z, NULL);
        if (f) {
            CHECK_EQ_INT(ckpt_tensor_count(f), 2);
            CHECK_STR(ckpt_tensor_at(f, 0)->name, "a.b");
            CHECK_STR(ckpt_tensor_at(f, 1)->name, "a.b");
            CHECK(ckpt_find(f, "a.b") == ckpt_tensor_at(f, 0));
            CHECK(ckpt_find_next(f, ckpt_tensor_at(f, 0)) == ckpt_tensor_at(f, 1));
            ckpt_close(f);
        }
    }
    bb_free(&z.out);
    bb_free(&p);
}

/* A record name twice; TorchScript recognised. */
static void test_archive_kinds(void)
{
    SECTION("record twice");
    zipb z;
    zb_init(&z);
    zb_add(&z, "archive/data.pkl", "\x80\x02N.", 4);
    zb_add(&z, "archive/data.pkl", "\x80\x02N.", 4);
    zb_finish(&z);
    {
        ckpt_error e = open_fail_mem(z.out.p, z.out.n, NULL);
        CHECK_EQ_INT(e.code, CKPT_E_FORMAT);
        CHECK_CONTAINS(e.message, "twice");
    }
    bb_free(&z.out);

    SECTION("torchscript");
    bb p = {0}, c = {0};
    float d[2] = {1, 2};
    int64_t sh[1] = {2}, st[1] = {1};
    pk_proto(&p, 2);
    pk_global(&p, "__torch__", "Net");
    pk_empty_tuple(&p);
    pk_op(&p, 0x81);
    pk_empty_dict(&p);
    pk_str(&p, "w");
    pk_tensor(&p, "FloatStorage", "0", 2, 0, 1, sh, st);
    pk_setitem(&p);
    pk_build(&p);
    pk_stop(&p);
    pk_proto(&c, 2);
    pk_tensor(&c, "FloatStorage", "0", 2, 0, 1, sh, st);
    bb_u8(&c, 0x85);
    pk_stop(&c);
    zb_init(&z);
    zb_add(&z, "net/data.pkl", p.p, p.n);
    zb_add(&z, "net/constants.pkl", c.p, c.n);
    zb_add(&z, "net/data/0", d, sizeof d);
    zb_add(&z, "net/constants/0", d, sizeof d);
    zb_add(&z, "net/version", "3\n", 2);
    zb_finish(&z);
    ckpt_file *f = OPEN_OK(&z, NULL);
    if (f) {
        ckpt_info info;
        ckpt_get_info(f, &info);
        CHECK_EQ_INT(info.format, CKPT_FORMAT_TORCHSCRIPT);
        CHECK_STR(ckpt_format_name(info.format), "torchscript");
        CHECK_STR(info.root, "net");
        CHECK_STR(ckpt_value_class(ckpt_root(f)), "__torch__.Net");
        int saw_net = 0;
        for (size_t i = 0; i < ckpt_global_count(f); i++)
            if (strcmp(ckpt_global_at(f, i)->module, "__torch__") == 0) saw_net = 1;
        CHECK(saw_net);
        ckpt_error err;
        CHECK_EQ_INT(ckpt_verify(f, NULL, NULL, &err), 0);
        ckpt_close(f);
    }
    bb_free(&z.out);
    bb_free(&p);
    bb_free(&c);
}

int main(void)
{
    test_stored();
    test_other_layouts();
    test_deflated();
    test_big_endian();
    test_verify();
    test_key();
    test_errors();
    test_v3();
    test_parameter_and_root();
    test_tensor_billion_laughs();
    test_tensor_flood();
    test_skip_tensors();
    test_naming();
    test_archive_kinds();
    return ut_summary();
}
