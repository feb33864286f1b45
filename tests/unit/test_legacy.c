/*
 * test_legacy.c - the legacy stream (PyTorch 0.1.10 .. 1.5), built here as
 * the header of src/formats/legacy.c draws it: magic, protocol 1001, sys_info, the
 * object pickle (storages as 6-field persistent ids, views with
 * view_metadata), the list of storage keys, then per key an int64 element
 * count and the data.
 */
#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L
#endif
#include "ckpt.h"
#include "harness.h"
#include "build.h"

/* A legacy tensor: _rebuild_tensor_v2 over a 6-field storage id. */
static void lg_tensor(bb *p, const char *cls, const char *key, int64_t numel, const pk_view *view,
                      int64_t off, int nd, const int64_t *shape, const int64_t *stride)
{
    pk_v2_begin(p);
    pk_storage_pid_ex(p, "torch", cls, key, "cpu", numel, 1, view);
    pk_v2_end(p, off, nd, shape, stride, 0);
}

/* ------------------------------------------------------------------------ */
/* The fixture                                                                */
/* ------------------------------------------------------------------------ */

static float R[10];                       /* root storage "140000": FloatStorage of 10 */
static int64_t L[3] = {-5, 1LL << 40, 7}; /* "140001": LongStorage of 3 */

typedef struct lg_opts {
    int64_t count0;   /* element count written for "140000" (10) */
    int list_second;  /* list "140001" in the key list */
    size_t cut;       /* bytes cut off the end */
    int64_t view_off; /* the view "140002" of the root: (view_off, 4) */
    size_t pad;       /* a string of this many bytes in the object (after 'a' and 'b') */
} lg_opts;

/* Offsets in the built stream. */
typedef struct lg_layout {
    size_t header0, data0, header1, data1;
    size_t persid_second; /* the first BINPERSID that names "140001" */
} lg_layout;

static void fixture(bb *b, const lg_opts *o, lg_layout *lay)
{
    for (int i = 0; i < 10; i++) R[i] = 1.25f * (float)i;
    memset(lay, 0, sizeof *lay);
    lg_header(b);
    pk_proto(b, 2);
    pk_empty_dict(b);
    pk_mark(b);
    {
        int64_t sh[2] = {2, 5}, st[2] = {5, 1};
        pk_str(b, "a");
        lg_tensor(b, "FloatStorage", "140000", 10, NULL, 0, 2, sh, st);
    }
    {
        pk_view v = {"140002", o->view_off, 4};
        int64_t sh[1] = {2}, st[1] = {1};
        pk_str(b, "b");
        lg_tensor(b, "FloatStorage", "140000", 10, &v, 1, 1, sh, st);
    }
    if (o->pad) {
        char *pad = malloc(o->pad);
        memset(pad, 'x', o->pad);
        pk_str(b, "pad");
        pk_strn(b, pad, o->pad);
        free(pad);
    }
    {
        pk_view v = {"140002", o->view_off, 4};
        int64_t sh[2] = {2, 2}, st[2] = {1, 2};
        pk_str(b, "bt");
        lg_tensor(b, "FloatStorage", "140000", 10, &v, 0, 2, sh, st);
    }
    {
        int64_t sh[1] = {3}, st[1] = {1};
        pk_str(b, "l");
        pk_v2_begin(b);
        /* remember where the BINPERSID opcode of this id sits */
        bb tmp = {0};
        pk_storage_pid_ex(&tmp, "torch", "LongStorage", "140001", "cpu", 3, 1, NULL);
        lay->persid_second = b->n + tmp.n - 1;
        bb_append(b, &tmp);
        bb_free(&tmp);
        pk_v2_end(b, 0, 1, sh, st, 0);
    }
    pk_str(b, "epoch");
    pk_int(b, 12);
    pk_setitems(b);
    pk_stop(b);
    const char *keys[2] = {"140000", "140001"};
    lg_keys(b, keys, o->list_second ? 2 : 1);
    lay->header0 = b->n;
    bb_le64(b, (uint64_t)o->count0);
    lay->data0 = b->n;
    for (int i = 0; i < 10; i++) bb_f32le(b, R[i]);
    if (o->list_second) {
        lay->header1 = b->n;
        bb_le64(b, 3);
        lay->data1 = b->n;
        for (int i = 0; i < 3; i++) bb_le64(b, (uint64_t)L[i]);
    }
    if (o->cut) b->n -= o->cut;
}

static const lg_opts GOOD = {10, 1, 0, 3, 0};

static void test_good(void)
{
    SECTION("legacy stream");
    bb b = {0};
    lg_layout lay;
    fixture(&b, &GOOD, &lay);
    ckpt_file *f = OPEN_OK(&b, NULL);
    if (!f) {
        bb_free(&b);
        return;
    }
    ckpt_info info;
    ckpt_get_info(f, &info);
    CHECK_EQ_INT(info.format, CKPT_FORMAT_LEGACY);
    CHECK_STR(ckpt_format_name(info.format), "legacy");
    CHECK_STR(info.version, "1001");
    CHECK_STR(info.root, "");
    CHECK_EQ_INT(info.byteorder, CKPT_LITTLE);
    CHECK_EQ_INT(info.tensor_count, 4);
    CHECK_EQ_INT(info.storage_count, 3); /* two roots and one view */
    CHECK_EQ_U64(info.total_bytes, 40 + 8 + 16 + 24);
    CHECK_EQ_INT(ckpt_note_count(f), 0);

    ckpt_error err;
    float got[16];
    const ckpt_tensor *t = ckpt_find(f, "a");
    CHECK(t != NULL);
    if (t) {
        CHECK_EQ_INT(t->ndim, 2);
        CHECK_EQ_INT(t->shape[0], 2);
        CHECK_EQ_INT(t->shape[1], 5);
        CHECK_EQ_INT(t->file_offset, (int64_t)lay.data0);
        CHECK_EQ_INT(t->contiguous, 1);
        CHECK_EQ_INT(ckpt_tensor_read(f, t, got, sizeof got, &err), 0);
        CHECK_MEM(got, R, 40);
        CHECK(ckpt_tensor_data(f, t, &err) == b.p + lay.data0);
        const ckpt_storage *s = ckpt_storage_at(f, t->storage);
        CHECK(s && strcmp(s->key, "140000") == 0 && s->nbytes == 40 &&
              s->file_offset == (int64_t)lay.data0);
    }
    /* the view "140002" = root elements 3..6; b = view[1:3] = root 4, 5 */
    t = ckpt_find(f, "b");
    CHECK(t != NULL);
    if (t) {
        CHECK_EQ_INT(t->storage_offset, 1);
        CHECK_EQ_INT(t->file_offset, (int64_t)lay.data0 + 4 * 4);
        CHECK_EQ_INT(ckpt_tensor_read(f, t, got, sizeof got, &err), 0);
        CHECK(got[0] == R[4] && got[1] == R[5]);
        const ckpt_storage *s = ckpt_storage_at(f, t->storage);
        CHECK(s && strcmp(s->key, "140002") == 0);
        CHECK(s && s->nbytes == 16);
        CHECK(s && s->file_offset == (int64_t)lay.data0 + 12);
        CHECK(ckpt_find(f, "a")->storage != t->storage);
    }
    t = ckpt_find(f, "bt");
    CHECK(t != NULL);
    if (t) {
        CHECK_EQ_INT(t->contiguous, 0);
        CHECK(t->storage == ckpt_find(f, "b")->storage);
        CHECK_EQ_INT(ckpt_tensor_read(f, t, got, sizeof got, &err), 0);
        float want[4] = {R[3], R[5], R[4], R[6]};
        CHECK_MEM(got, want, 16);
        uint8_t part[8];
        CHECK_EQ_INT(ckpt_tensor_read_range(f, t, 5, part, 7, &err), 0);
        CHECK_MEM(part, (const uint8_t *)want + 5, 7);
    }
    t = ckpt_find(f, "l");
    CHECK(t != NULL);
    if (t) {
        CHECK_EQ_INT(t->dtype, CKPT_INT64);
        CHECK_EQ_INT(t->file_offset, (int64_t)lay.data1);
        int64_t li[3];
        CHECK_EQ_INT(ckpt_tensor_read(f, t, li, sizeof li, &err), 0);
        CHECK_MEM(li, L, 24);
    }
    CHECK_EQ_INT(ckpt_value_int(ckpt_value_get(ckpt_root(f), "epoch")), 12);
    /* globals are recorded with the object pickle's label */
    int saw = 0;
    for (size_t i = 0; i < ckpt_global_count(f); i++) {
        const ckpt_global_ref *g = ckpt_global_at(f, i);
        if (strcmp(g->name, "_rebuild_tensor_v2") == 0) {
            saw++;
            CHECK_STR(g->pickle, "legacy:object");
            CHECK_EQ_INT(g->called, 1);
            CHECK(g->offset > 0 && (size_t)g->offset < lay.header0);
            CHECK_EQ_INT(b.p[g->offset], 'c');
        }
    }
    CHECK_EQ_INT(saw, 4);
    CHECK_EQ_INT(ckpt_verify(f, NULL, NULL, &err), 0);
    ckpt_close(f);

    SECTION("legacy stream: bytes after the last storage");
    bb_text(&b, "tail");
    f = OPEN_OK(&b, NULL);
    if (f) {
        CHECK_EQ_INT(ckpt_note_count(f), 1);
        CHECK_CONTAINS(ckpt_note_at(f, 0), "4 bytes after");
        ckpt_close(f);
    }
    bb_free(&b);
}

static void test_errors(void)
{
    bb b = {0};
    lg_layout lay;
    lg_opts o;

    SECTION("element count mismatch");
    o = GOOD;
    o.count0 = 9;
    fixture(&b, &o, &lay);
    {
        ckpt_error e = open_fail(&b, NULL);
        CHECK_EQ_INT(e.code, CKPT_E_FORMAT);
        CHECK_EQ_INT(e.offset, (int64_t)lay.header0);
        CHECK_CONTAINS(e.message, "140000");
        CHECK_CONTAINS(e.message, "9 elements");
        CHECK_CONTAINS(e.message, "10");
    }
    bb_free(&b);

    SECTION("storage without data");
    o = GOOD;
    o.list_second = 0;
    fixture(&b, &o, &lay);
    {
        ckpt_error e = open_fail(&b, NULL);
        CHECK_EQ_INT(e.code, CKPT_E_FORMAT);
        CHECK_CONTAINS(e.message, "140001");
        CHECK_CONTAINS(e.message, "no data");
        CHECK_EQ_INT(e.offset, (int64_t)lay.persid_second);
    }
    bb_free(&b);

    SECTION("storage data truncated");
    o = GOOD;
    o.cut = 5;
    fixture(&b, &o, &lay);
    {
        ckpt_error e = open_fail(&b, NULL);
        CHECK_EQ_INT(e.code, CKPT_E_FORMAT);
        CHECK_CONTAINS(e.message, "140001");
        CHECK_EQ_INT(e.offset, (int64_t)lay.data1);
    }
    bb_free(&b);

    SECTION("storage header truncated");
    o = GOOD;
    o.cut = 24 + 3;
    fixture(&b, &o, &lay);
    {
        ckpt_error e = open_fail(&b, NULL);
        CHECK_EQ_INT(e.code, CKPT_E_FORMAT);
        CHECK_EQ_INT(e.offset, (int64_t)lay.header1);
    }
    bb_free(&b);

    SECTION("view outside its root");
    o = GOOD;
    o.view_off = 7; /* [7, 11) of 10 elements */
    fixture(&b, &o, &lay);
    {
        ckpt_error e = open_fail(&b, NULL);
        CHECK_EQ_INT(e.code, CKPT_E_FORMAT);
        CHECK_CONTAINS(e.message, "outside");
    }
    bb_free(&b);

    SECTION("bad protocol version");
    o = GOOD;
    fixture(&b, &o, &lay);
    {
        /* the protocol pickle is 80 02 4d e9 03 2e right after the magic (15 bytes) */
        CHECK_EQ_INT(b.p[15], 0x80);
        CHECK_EQ_INT(b.p[17], 'M');
        b.p[18] = 0xea; /* 1002 */
        ckpt_error e = open_fail(&b, NULL);
        CHECK_EQ_INT(e.code, CKPT_E_FORMAT);
        CHECK_EQ_INT(e.offset, 15);
        CHECK_CONTAINS(e.message, "1001");
    }
    bb_free(&b);

    SECTION("magic only");
    lg_header(&b);
    b.n = 15;
    {
        ckpt_error e = open_fail(&b, NULL);
        CHECK(e.code == CKPT_E_FORMAT || e.code == CKPT_E_PICKLE);
        CHECK(e.offset >= 15 || e.offset == -1);
    }
    bb_free(&b);
}

/* ------------------------------------------------------------------------ */
/* Full-model save: modules as ('module', Class, file, source) ids, NEWOBJ,  */
/* BUILD of their __dict__, named by state_dict() rules                       */
/* ------------------------------------------------------------------------ */

static void module_begin(bb *p, const char *cls)
{
    /* persistent id ('module', <class>, 'model.py', 'class X: ...') */
    pk_mark(p);
    pk_str(p, "module");
    pk_global(p, "__main__", cls);
    pk_str(p, "model.py");
    pk_str(p, "class X(nn.Module): pass\n");
    pk_tuple(p);
    pk_binpersid(p);
    pk_empty_tuple(p);
    pk_op(p, 0x81); /* NEWOBJ */
    pk_empty_dict(p);
    pk_mark(p);
    pk_str(p, "training");
    pk_bool(p, 1);
}
static void module_end(bb *p)
{
    pk_setitems(p);
    pk_build(p);
}

static void test_full_model(void)
{
    SECTION("full model");
    float w[4] = {1, 2, 3, 4}, rm[2] = {5, 6}, tmp[1] = {7}, sw[3] = {8, 9, 10};
    int64_t s4[1] = {4}, s2[1] = {2}, s1[1] = {1}, s3[1] = {3}, one[1] = {1};
    bb b = {0};
    lg_header(&b);
    pk_proto(&b, 2);
    module_begin(&b, "Net");
    pk_str(&b, "_parameters");
    pk_ordereddict(&b);
    pk_mark(&b);
    pk_str(&b, "weight");
    lg_tensor(&b, "FloatStorage", "1", 4, NULL, 0, 1, s4, one);
    pk_str(&b, "bias");
    pk_none(&b);
    pk_setitems(&b);
    pk_str(&b, "_buffers");
    pk_ordereddict(&b);
    pk_mark(&b);
    pk_str(&b, "running_mean");
    lg_tensor(&b, "FloatStorage", "2", 2, NULL, 0, 1, s2, one);
    pk_str(&b, "tmp");
    lg_tensor(&b, "FloatStorage", "3", 1, NULL, 0, 1, s1, one);
    pk_setitems(&b);
    pk_str(&b, "_non_persistent_buffers_set");
    pk_global(&b, "__builtin__", "set");
    pk_empty_list(&b);
    pk_str(&b, "tmp");
    pk_append(&b);
    bb_u8(&b, 0x85);
    pk_reduce(&b);
    pk_str(&b, "_modules");
    pk_ordereddict(&b);
    pk_mark(&b);
    pk_str(&b, "sub");
    module_begin(&b, "Sub");
    pk_str(&b, "_parameters");
    pk_ordereddict(&b);
    pk_str(&b, "w");
    lg_tensor(&b, "FloatStorage", "4", 3, NULL, 0, 1, s3, one);
    pk_setitem(&b);
    pk_str(&b, "_buffers");
    pk_ordereddict(&b);
    pk_str(&b, "_modules");
    pk_ordereddict(&b);
    module_end(&b);
    pk_str(&b, "gone");
    pk_none(&b);
    pk_setitems(&b);
    module_end(&b);
    pk_stop(&b);
    const char *keys[4] = {"1", "2", "3", "4"};
    lg_keys(&b, keys, 4);
    lg_storage(&b, 4, w, sizeof w);
    lg_storage(&b, 2, rm, sizeof rm);
    lg_storage(&b, 1, tmp, sizeof tmp);
    lg_storage(&b, 3, sw, sizeof sw);
    ckpt_file *f = OPEN_OK(&b, NULL);
    if (f) {
        CHECK_EQ_INT(ckpt_tensor_count(f), 3);
        const ckpt_tensor *t0 = ckpt_tensor_at(f, 0), *t1 = ckpt_tensor_at(f, 1),
                          *t2 = ckpt_tensor_at(f, 2);
        CHECK(t0 && strcmp(t0->name, "weight") == 0);
        CHECK(t1 && strcmp(t1->name, "running_mean") == 0);
        CHECK(t2 && strcmp(t2->name, "sub.w") == 0);
        CHECK(ckpt_find(f, "tmp") == NULL);
        CHECK(ckpt_find(f, "bias") == NULL);
        float got[4];
        ckpt_error err;
        CHECK(t2 && ckpt_tensor_read(f, t2, got, sizeof got, &err) == 0);
        CHECK_MEM(got, sw, 12);
        const ckpt_value *r = ckpt_root(f);
        CHECK_EQ_INT(ckpt_value_kind(r), CKPT_V_OBJECT);
        CHECK_STR(ckpt_value_class(r), "__main__.Net");
        CHECK_EQ_INT(ckpt_value_kind(ckpt_value_get(ckpt_object_state(r), "_parameters")),
                     CKPT_V_DICT);
        CHECK_EQ_INT(
            ckpt_value_kind(ckpt_value_get(ckpt_object_state(r), "_non_persistent_buffers_set")),
            CKPT_V_SET);
        ckpt_close(f);
    }
    bb_free(&b);
}

/* The stream through a file with mmap: zero-copy pointers into the mapping. */
static void test_through_file(void)
{
    SECTION("legacy through ckpt_open");
    bb b = {0};
    lg_layout lay;
    fixture(&b, &GOOD, &lay);
    char path[] = "/tmp/ckpt_ut_legacyXXXXXX";
    int fd = mkstemp(path);
    CHECK(fd >= 0);
    if (fd < 0) {
        bb_free(&b);
        return;
    }
    CHECK_EQ_INT(write(fd, b.p, b.n), (long long)b.n);
    close(fd);
    for (int mm = 0; mm < 2; mm++) {
        ckpt_options o;
        ckpt_options_init(&o);
        o.use_mmap = mm;
        ckpt_error err;
        ckpt_file *f = ckpt_open(path, &o, &err);
        CHECK(f != NULL);
        if (!f) continue;
        const ckpt_tensor *t = ckpt_find(f, "bt");
        float got[4], want[4] = {R[3], R[5], R[4], R[6]};
        CHECK(t && ckpt_tensor_read(f, t, got, sizeof got, &err) == 0);
        CHECK_MEM(got, want, 16);
        t = ckpt_find(f, "b");
        /* legacy data is not aligned: copy, do not dereference as float */
        const void *p = t ? ckpt_tensor_data(f, t, &err) : NULL;
        if (mm) {
            CHECK(p != NULL);
            if (p) CHECK_MEM(p, &R[4], 8);
        } else {
            CHECK(p == NULL);
            CHECK_EQ_INT(err.code, CKPT_E_NOTMAPPABLE);
        }
        ckpt_close(f);
    }
    unlink(path);
    bb_free(&b);

    /* an object pickle larger than the first read window (read again with
     * a larger one): the storages met before the window ended are not
     * declared twice, the globals are listed once */
    SECTION("legacy: object pickle larger than the read window");
    lg_opts big = GOOD;
    big.pad = 3u << 20;
    fixture(&b, &big, &lay);
    char path2[] = "/tmp/ckpt_ut_legacy_bigXXXXXX";
    fd = mkstemp(path2);
    CHECK(fd >= 0);
    if (fd < 0) {
        bb_free(&b);
        return;
    }
    CHECK_EQ_INT(write(fd, b.p, b.n), (long long)b.n);
    close(fd);
    ckpt_file *fm = ckpt_open_memory(b.p, b.n, NULL, NULL);
    ckpt_error err;
    ckpt_file *f = ckpt_open(path2, NULL, &err);
    CHECK(fm != NULL);
    CHECK(f != NULL);
    if (f && fm) {
        CHECK_EQ_INT(ckpt_tensor_count(f), 4);
        CHECK_EQ_INT(ckpt_storage_count(f), ckpt_storage_count(fm));
        CHECK_EQ_INT(ckpt_global_count(f), ckpt_global_count(fm));
        CHECK_EQ_INT(ckpt_note_count(f), ckpt_note_count(fm));
        for (size_t i = 0; i < ckpt_tensor_count(fm); i++) {
            const ckpt_tensor *a = ckpt_tensor_at(fm, i), *c = ckpt_tensor_at(f, i);
            CHECK(c && strcmp(a->name, c->name) == 0 && a->file_offset == c->file_offset);
            uint8_t x[64], y[64];
            CHECK(c && ckpt_tensor_read(fm, a, x, sizeof x, NULL) == 0 &&
                  ckpt_tensor_read(f, c, y, sizeof y, NULL) == 0);
            CHECK_MEM(x, y, (size_t)a->nbytes);
        }
        size_t n = 0;
        ckpt_value_text(ckpt_value_get(ckpt_root(f), "pad"), &n);
        CHECK_EQ_INT(n, 3u << 20);
    }
    ckpt_close(f);
    ckpt_close(fm);
    unlink(path2);
    bb_free(&b);
}

int main(void)
{
    test_good();
    test_errors();
    test_full_model();
    test_through_file();
    return ut_summary();
}
