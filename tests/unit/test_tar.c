/*
 * test_tar.c - the TAR container (before PyTorch 0.1.10), built here as
 * the header of src/formats/tar.c draws it: ustar members sys_info, storages
 * (records + storage views), tensors (records + raw shape/stride/offset),
 * pickle (persistent ids are str(tensor_key), modules are tuples).
 */
#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L
#endif
#include "ckpt.h"
#include "harness.h"
#include "build.h"

/* ------------------------------------------------------------------------ */
/* Member builders                                                            */
/* ------------------------------------------------------------------------ */

/* One storage record: pickle((key, location, StorageClass)), count, data.
 * Returns the offset of the data within the member. */
static size_t st_record(bb *m, int64_t key, const char *cls, uint64_t count, const void *data,
                        size_t n)
{
    pk_proto(m, 2);
    pk_int(m, key);
    pk_str(m, "cpu");
    pk_global(m, "torch", cls);
    bb_u8(m, 0x87);
    pk_stop(m);
    bb_le64(m, count);
    size_t at = m->n;
    bb_put(m, data, n);
    return at;
}

/* pickle([(view_key, root_key, offset, numel), ...]) */
static void st_views(bb *m, const int64_t (*v)[4], int n)
{
    pk_proto(m, 2);
    pk_empty_list(m);
    for (int i = 0; i < n; i++) {
        pk_mark(m);
        for (int k = 0; k < 4; k++) pk_int(m, v[i][k]);
        pk_tuple(m);
        pk_append(m);
    }
    pk_stop(m);
}

static void pk_count(bb *m, int64_t n)
{
    pk_proto(m, 2);
    pk_int(m, n);
    pk_stop(m);
}

/* One tensor record: pickle((key, storage_key, TensorClass)), int32 ndim,
 * 4 pad bytes, sizes, strides, int64 storage offset. */
static void tn_record(bb *m, int64_t key, int64_t skey, const char *cls, int nd,
                      const int64_t *shape, const int64_t *stride, int64_t off)
{
    pk_proto(m, 2);
    pk_int(m, key);
    pk_int(m, skey);
    pk_global(m, "torch", cls);
    bb_u8(m, 0x87);
    pk_stop(m);
    bb_le32(m, (uint32_t)nd);
    bb_le32(m, 0);
    for (int i = 0; i < nd; i++) bb_le64(m, (uint64_t)shape[i]);
    for (int i = 0; i < nd; i++) bb_le64(m, (uint64_t)stride[i]);
    bb_le64(m, (uint64_t)off);
}

/* A tensor reference in the object pickle: BINPERSID of str(key). */
static void pk_tref(bb *p, int64_t key)
{
    char s[32];
    snprintf(s, sizeof s, "%lld", (long long)key);
    pk_str(p, s);
    pk_binpersid(p);
}

/* ------------------------------------------------------------------------ */
/* The fixture                                                                */
/* ------------------------------------------------------------------------ */

static float F[6] = {0.5f, 1.5f, 2.5f, 3.5f, 4.5f, 5.5f};
static int64_t LL[2] = {-9, 1LL << 50};

typedef struct tar_opts {
    int64_t view_off;    /* view 2 = root 0 [view_off, +3) */
    int64_t t11_storage; /* storage of tensor 11 (2: the view) */
    int64_t t10_rows;    /* rows of tensor 10 (2) */
    int bad_checksum;    /* corrupt the 'storages' header */
    int skip_tensors;    /* leave the 'tensors' member out */
    int pax_no_eq;       /* a PAX header whose record has no '=' */
    int long_prefix;     /* a member named with a full 155-byte prefix + 100-byte name */
    int pax_path;        /* name the pickle member through a PAX path record */
    uint64_t long_count; /* element count written for storage 1 (2) */
} tar_opts;

typedef struct tar_layout {
    size_t storages_hdr, data0, data1, tensors_hdr;
} tar_layout;

static void fixture(bb *b, const tar_opts *o, tar_layout *lay)
{
    bb sys = {0}, st = {0}, tn = {0}, pk = {0};
    memset(lay, 0, sizeof *lay);
    tar_sys_info(&sys);

    pk_count(&st, 2);
    size_t d0 = st_record(&st, 0, "FloatStorage", 6, F, sizeof F);
    size_t d1 = st_record(&st, 1, "LongStorage", o->long_count, LL, sizeof LL);
    int64_t views[1][4] = {{2, 0, o->view_off, 3}};
    st_views(&st, (const int64_t(*)[4])views, 1);

    pk_count(&tn, 5);
    {
        int64_t sh[2] = {o->t10_rows, 3}, str[2] = {3, 1};
        tn_record(&tn, 10, 0, "FloatTensor", 2, sh, str, 0);
    }
    {
        int64_t sh[1] = {2}, str[1] = {1};
        tn_record(&tn, 11, o->t11_storage, "FloatTensor", 1, sh, str, 1);
    }
    {
        int64_t sh[2] = {3, 2}, str[2] = {1, 3};
        tn_record(&tn, 12, 0, "FloatTensor", 2, sh, str, 0);
    }
    {
        int64_t sh[1] = {2}, str[1] = {1};
        tn_record(&tn, 13, 1, "LongTensor", 1, sh, str, 0);
    }
    tn_record(&tn, 14, 0, "FloatTensor", 0, NULL, NULL, 5);

    pk_proto(&pk, 2);
    pk_empty_dict(&pk);
    pk_mark(&pk);
    static const char *const names[5] = {"w", "v", "t", "l", "s"};
    for (int i = 0; i < 5; i++) {
        pk_str(&pk, names[i]);
        pk_tref(&pk, 10 + i);
    }
    pk_setitems(&pk);
    pk_stop(&pk);

    if (o->pax_no_eq) {
        /* record "2 abcdefgh": its length (2) ends before its key starts */
        tar_member_ex(b, "PaxHeaders/x", NULL, 'x', "2 abcdefgh", 10);
    }
    if (o->long_prefix) {
        char prefix[156], name[101];
        memset(prefix, 'p', 155);
        prefix[155] = 0;
        memset(name, 'n', 100);
        name[100] = 0;
        uint8_t h[512];
        tar_header(h, name, prefix, 4, '0');
        bb_put(b, h, 512);
        bb_put(b, "junk", 4);
        bb_zero(b, 508);
    }
    tar_member(b, "sys_info", sys.p, sys.n);
    lay->storages_hdr = b->n;
    tar_member(b, "storages", st.p, st.n);
    lay->data0 = lay->storages_hdr + 512 + d0;
    lay->data1 = lay->storages_hdr + 512 + d1;
    lay->tensors_hdr = b->n;
    if (!o->skip_tensors) tar_member(b, "tensors", tn.p, tn.n);
    if (o->pax_path) {
        char rec[64];
        snprintf(rec, sizeof rec, "15 path=pickle\n");
        tar_member_ex(b, "PaxHeaders/p", NULL, 'x', rec, strlen(rec));
        tar_member(b, "something_else", pk.p, pk.n);
    } else {
        tar_member(b, "pickle", pk.p, pk.n);
    }
    tar_end(b);
    if (o->bad_checksum) b->p[lay->storages_hdr + 100] ^= 0x01; /* mode field */
    bb_free(&sys);
    bb_free(&st);
    bb_free(&tn);
    bb_free(&pk);
}

static const tar_opts GOOD = {2, 2, 2, 0, 0, 0, 0, 0, 2};

static void check_good(ckpt_file *f, const tar_layout *lay)
{
    ckpt_info info;
    ckpt_get_info(f, &info);
    CHECK_EQ_INT(info.format, CKPT_FORMAT_TAR);
    CHECK_STR(ckpt_format_name(info.format), "tar");
    CHECK_STR(info.version, "1000");
    CHECK_EQ_INT(info.tensor_count, 5);
    CHECK_EQ_INT(info.storage_count, 3);
    ckpt_error err;
    float got[8];
    const ckpt_tensor *t = ckpt_find(f, "w");
    CHECK(t != NULL);
    if (t) {
        CHECK_EQ_INT(t->dtype, CKPT_FLOAT32);
        CHECK_EQ_INT(t->ndim, 2);
        CHECK_EQ_INT(t->shape[0], 2);
        CHECK_EQ_INT(t->stride[0], 3);
        CHECK_EQ_INT(t->contiguous, 1);
        CHECK_EQ_INT(t->file_offset, (int64_t)lay->data0);
        CHECK_EQ_INT(ckpt_tensor_read(f, t, got, sizeof got, &err), 0);
        CHECK_MEM(got, F, 24);
        const ckpt_storage *s = ckpt_storage_at(f, t->storage);
        CHECK(s && strcmp(s->key, "0") == 0 && s->nbytes == 24 &&
              s->file_offset == (int64_t)lay->data0);
    }
    /* v: storage view 2 = root [2, 5); offset 1 -> root elements 3, 4 */
    t = ckpt_find(f, "v");
    CHECK(t != NULL);
    if (t) {
        CHECK_EQ_INT(t->storage_offset, 1);
        CHECK_EQ_INT(t->file_offset, (int64_t)lay->data0 + 12);
        CHECK_EQ_INT(ckpt_tensor_read(f, t, got, sizeof got, &err), 0);
        CHECK(got[0] == F[3] && got[1] == F[4]);
        const ckpt_storage *s = ckpt_storage_at(f, t->storage);
        CHECK(s && strcmp(s->key, "2") == 0 && s->nbytes == 12 &&
              s->file_offset == (int64_t)lay->data0 + 8);
    }
    t = ckpt_find(f, "t");
    CHECK(t != NULL);
    if (t) {
        CHECK_EQ_INT(t->contiguous, 0);
        CHECK(t->storage == ckpt_find(f, "w")->storage);
        CHECK_EQ_INT(ckpt_tensor_read(f, t, got, sizeof got, &err), 0);
        float want[6] = {F[0], F[3], F[1], F[4], F[2], F[5]};
        CHECK_MEM(got, want, 24);
    }
    t = ckpt_find(f, "l");
    CHECK(t != NULL);
    if (t) {
        int64_t li[2];
        CHECK_EQ_INT(t->dtype, CKPT_INT64);
        CHECK_EQ_INT(t->file_offset, (int64_t)lay->data1);
        CHECK_EQ_INT(ckpt_tensor_read(f, t, li, sizeof li, &err), 0);
        CHECK_MEM(li, LL, 16);
    }
    t = ckpt_find(f, "s");
    CHECK(t != NULL);
    if (t) {
        CHECK_EQ_INT(t->ndim, 0);
        CHECK_EQ_U64(t->numel, 1);
        CHECK_EQ_INT(ckpt_tensor_read(f, t, got, sizeof got, &err), 0);
        CHECK(got[0] == F[5]);
    }
    /* the classes named in the records are globals of the file */
    int tensor_classes = 0;
    for (size_t i = 0; i < ckpt_global_count(f); i++) {
        const ckpt_global_ref *g = ckpt_global_at(f, i);
        if (strcmp(g->name, "FloatTensor") == 0 || strcmp(g->name, "LongTensor") == 0) {
            tensor_classes++;
            CHECK_STR(g->pickle, "tar:tensors");
        }
    }
    CHECK_EQ_INT(tensor_classes, 5);
    CHECK_EQ_INT(ckpt_verify(f, NULL, NULL, &err), 0);
}

static void test_good(void)
{
    SECTION("tar");
    bb b = {0};
    tar_layout lay;
    fixture(&b, &GOOD, &lay);
    ckpt_file *f = OPEN_OK(&b, NULL);
    if (f) {
        check_good(f, &lay);
        ckpt_close(f);
    }
    bb_free(&b);

    SECTION("tar: pickle member named by a PAX path");
    tar_opts o = GOOD;
    o.pax_path = 1;
    fixture(&b, &o, &lay);
    f = OPEN_OK(&b, NULL);
    if (f) {
        check_good(f, &lay);
        ckpt_close(f);
    }
    bb_free(&b);

    SECTION("tar through a reader");
    fixture(&b, &GOOD, &lay);
    char path[] = "/tmp/ckpt_ut_tarXXXXXX";
    int fd = mkstemp(path);
    CHECK(fd >= 0);
    if (fd >= 0) {
        CHECK_EQ_INT(write(fd, b.p, b.n), (long long)b.n);
        close(fd);
        ckpt_error err;
        f = ckpt_open(path, NULL, &err);
        CHECK(f != NULL);
        if (f) {
            check_good(f, &lay);
            ckpt_close(f);
        }
        unlink(path);
    }
    bb_free(&b);
}

static void test_errors(void)
{
    bb b = {0};
    tar_layout lay;
    tar_opts o;

    SECTION("tar: header checksum");
    o = GOOD;
    o.bad_checksum = 1;
    fixture(&b, &o, &lay);
    {
        ckpt_error e = open_fail(&b, NULL);
        CHECK_EQ_INT(e.code, CKPT_E_FORMAT);
        CHECK_EQ_INT(e.offset, (int64_t)lay.storages_hdr);
        CHECK_CONTAINS(e.message, "checksum");
    }
    bb_free(&b);

    SECTION("tar: first header checksum: not a tar");
    fixture(&b, &GOOD, &lay);
    b.p[100] ^= 1;
    {
        ckpt_error e = open_fail(&b, NULL);
        CHECK_EQ_INT(e.code, CKPT_E_FORMAT);
    }
    bb_free(&b);

    SECTION("tar: tensor over a missing storage");
    o = GOOD;
    o.t11_storage = 7;
    fixture(&b, &o, &lay);
    {
        ckpt_error e = open_fail(&b, NULL);
        CHECK_EQ_INT(e.code, CKPT_E_FORMAT);
        CHECK_CONTAINS(e.message, "missing storage 7");
        CHECK(e.offset > (int64_t)lay.tensors_hdr);
    }
    bb_free(&b);

    SECTION("tar: storage view outside its root");
    o = GOOD;
    o.view_off = 4; /* [4, 7) of 6 */
    fixture(&b, &o, &lay);
    {
        ckpt_error e = open_fail(&b, NULL);
        CHECK_EQ_INT(e.code, CKPT_E_FORMAT);
        CHECK_CONTAINS(e.message, "outside");
    }
    bb_free(&b);

    SECTION("tar: tensor past its storage");
    o = GOOD;
    o.t10_rows = 3; /* 9 elements of 6 */
    fixture(&b, &o, &lay);
    {
        ckpt_error e = open_fail(&b, NULL);
        CHECK_EQ_INT(e.code, CKPT_E_FORMAT);
        CHECK_CONTAINS(e.message, "'w'");
        CHECK_CONTAINS(e.message, "24 bytes");
    }
    bb_free(&b);

    SECTION("tar: no tensors member");
    o = GOOD;
    o.skip_tensors = 1;
    fixture(&b, &o, &lay);
    {
        ckpt_error e = open_fail(&b, NULL);
        CHECK_EQ_INT(e.code, CKPT_E_FORMAT);
        CHECK_CONTAINS(e.message, "'tensors'");
    }
    bb_free(&b);

    SECTION("tar: storage count past its member");
    o = GOOD;
    o.long_count = 100;
    fixture(&b, &o, &lay);
    {
        ckpt_error e = open_fail(&b, NULL);
        CHECK_EQ_INT(e.code, CKPT_E_FORMAT);
        CHECK_CONTAINS(e.message, "100 elements");
        CHECK_CONTAINS(e.message, "past its member");
        CHECK_EQ_INT(e.offset, (int64_t)lay.data1 - 8);
    }
    bb_free(&b);
}

/* Inputs that could corrupt memory: run in a child (and under ASan). */
static int open_pax_no_eq(void *ctx)
{
    (void)ctx;
    bb b = {0};
    tar_layout lay;
    tar_opts o = GOOD;
    o.pax_no_eq = 1;
    fixture(&b, &o, &lay);
    ckpt_error e;
    ckpt_file *f = ckpt_open_memory(b.p, b.n, NULL, &e);
    int ok = f != NULL && ckpt_tensor_count(f) == 5;
    ckpt_close(f);
    bb_free(&b);
    return ok ? 0 : 1;
}

static int open_long_prefix(void *ctx)
{
    (void)ctx;
    bb b = {0};
    tar_layout lay;
    tar_opts o = GOOD;
    o.long_prefix = 1;
    fixture(&b, &o, &lay);
    ckpt_error e;
    ckpt_file *f = ckpt_open_memory(b.p, b.n, NULL, &e);
    int ok = f != NULL && ckpt_tensor_count(f) == 5;
    ckpt_close(f);
    bb_free(&b);
    return ok ? 0 : 1;
}

static void test_hostile_headers(void)
{
    SECTION("tar: PAX record shorter than its own header");
    CHECK_ISOLATED(open_pax_no_eq, NULL);
    SECTION("tar: 155-byte prefix + 100-byte name");
    CHECK_ISOLATED(open_long_prefix, NULL);
}

/* ------------------------------------------------------------------------ */
/* Full model: modules as (Class, source_file, source) ids                   */
/* ------------------------------------------------------------------------ */

static void module_begin(bb *p, const char *cls)
{
    pk_mark(p);
    pk_global(p, "__main__", cls);
    pk_str(p, "model.py");
    pk_str(p, "class X(nn.Module): pass\n");
    pk_tuple(p);
    pk_binpersid(p);
    pk_empty_tuple(p);
    pk_op(p, 0x81);
    pk_empty_dict(p);
    pk_mark(p);
}
static void module_end(bb *p)
{
    pk_setitems(p);
    pk_build(p);
}

static void test_full_model(void)
{
    SECTION("tar: full model");
    bb b = {0}, sys = {0}, st = {0}, tn = {0}, pk = {0};
    float d[8] = {1, 2, 3, 4, 5, 6, 7, 8};
    tar_sys_info(&sys);
    pk_count(&st, 1);
    st_record(&st, 0, "FloatStorage", 8, d, sizeof d);
    st_views(&st, NULL, 0);
    pk_count(&tn, 4);
    int64_t one[1] = {1};
    for (int i = 0; i < 4; i++) {
        int64_t sh[1] = {2};
        tn_record(&tn, 100 + i, 0, "FloatTensor", 1, sh, one, 2 * i);
    }
    pk_proto(&pk, 2);
    module_begin(&pk, "Net");
    pk_str(&pk, "_parameters");
    pk_ordereddict(&pk);
    pk_mark(&pk);
    pk_str(&pk, "bias");
    pk_none(&pk);
    pk_str(&pk, "weight");
    pk_tref(&pk, 100);
    pk_setitems(&pk);
    pk_str(&pk, "_buffers");
    pk_ordereddict(&pk);
    pk_mark(&pk);
    pk_str(&pk, "scratch");
    pk_tref(&pk, 101);
    pk_str(&pk, "running_var");
    pk_tref(&pk, 102);
    pk_setitems(&pk);
    pk_str(&pk, "_non_persistent_buffers_set");
    pk_global(&pk, "__builtin__", "set");
    pk_empty_list(&pk);
    pk_str(&pk, "scratch");
    pk_append(&pk);
    bb_u8(&pk, 0x85);
    pk_reduce(&pk);
    pk_str(&pk, "_modules");
    pk_ordereddict(&pk);
    pk_mark(&pk);
    pk_str(&pk, "0");
    module_begin(&pk, "Linear");
    pk_str(&pk, "_parameters");
    pk_ordereddict(&pk);
    pk_str(&pk, "weight");
    pk_tref(&pk, 103);
    pk_setitem(&pk);
    pk_str(&pk, "_buffers");
    pk_ordereddict(&pk);
    pk_str(&pk, "_modules");
    pk_ordereddict(&pk);
    module_end(&pk);
    pk_setitems(&pk);
    pk_str(&pk, "hook_count");
    pk_int(&pk, 0);
    module_end(&pk);
    pk_stop(&pk);
    tar_member(&b, "sys_info", sys.p, sys.n);
    tar_member(&b, "storages", st.p, st.n);
    tar_member(&b, "tensors", tn.p, tn.n);
    tar_member(&b, "pickle", pk.p, pk.n);
    tar_end(&b);
    ckpt_file *f = OPEN_OK(&b, NULL);
    if (f) {
        CHECK_EQ_INT(ckpt_tensor_count(f), 3);
        const ckpt_tensor *t0 = ckpt_tensor_at(f, 0), *t1 = ckpt_tensor_at(f, 1),
                          *t2 = ckpt_tensor_at(f, 2);
        CHECK(t0 && strcmp(t0->name, "weight") == 0);
        CHECK(t1 && strcmp(t1->name, "running_var") == 0);
        CHECK(t2 && strcmp(t2->name, "0.weight") == 0);
        CHECK(ckpt_find(f, "scratch") == NULL);
        float got[2];
        ckpt_error err;
        CHECK(t2 && ckpt_tensor_read(f, t2, got, sizeof got, &err) == 0);
        CHECK(got[0] == 7 && got[1] == 8);
        CHECK_STR(ckpt_value_class(ckpt_root(f)), "__main__.Net");
        ckpt_close(f);
    }
    bb_free(&b);
    bb_free(&sys);
    bb_free(&st);
    bb_free(&tn);
    bb_free(&pk);
}

int main(void)
{
    test_good();
    test_errors();
    test_hostile_headers();
    test_full_model();
    return ut_summary();
}
