/*
 * test_source.c - the byte sources: a path read with pread or mapped, a
 * memory buffer, a caller's reader; their errors; NULL arguments and NULL
 * error structs everywhere.
 */
#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L
#endif
#include "ckpt.h"
#include "harness.h"
#include "build.h"

#include <sys/stat.h>

/* ------------------------------------------------------------------------ */
/* A small torch-style archive and a plain pickle                             */
/* ------------------------------------------------------------------------ */

static float W[12];

static void make_zip(zipb *z)
{
    bb p = {0}, d = {0};
    for (int i = 0; i < 12; i++) W[i] = (float)i * 0.75f - 2.0f;
    for (int i = 0; i < 12; i++) bb_f32le(&d, W[i]);
    int64_t sh[2] = {3, 4}, st[2] = {4, 1}, sht[2] = {4, 3}, stt[2] = {1, 4};
    pk_proto(&p, 2);
    pk_empty_dict(&p);
    pk_mark(&p);
    pk_str(&p, "w");
    pk_tensor(&p, "FloatStorage", "0", 12, 0, 2, sh, st);
    pk_str(&p, "wt");
    pk_tensor(&p, "FloatStorage", "0", 12, 0, 2, sht, stt);
    pk_setitems(&p);
    pk_stop(&p);
    zb_init(z);
    zb_add(z, "archive/data.pkl", p.p, p.n);
    zb_add(z, "archive/data/0", d.p, d.n);
    zb_add(z, "archive/version", "3\n", 2);
    zb_finish(z);
    bb_free(&p);
    bb_free(&d);
}

static int write_temp(char *path, const void *data, size_t n)
{
    int fd = mkstemp(path);
    if (fd < 0) return -1;
    int ok = write(fd, data, n) == (ssize_t)n;
    close(fd);
    return ok ? 0 : -1;
}

static void check_zip_file(ckpt_file *f, int mapped, const zipb *z)
{
    CHECK_EQ_INT(ckpt_tensor_count(f), 2);
    const ckpt_tensor *w = ckpt_find(f, "w"), *wt = ckpt_find(f, "wt");
    CHECK(w && wt);
    if (!w || !wt) return;
    ckpt_error err;
    float got[12], want[12];
    CHECK_EQ_INT(ckpt_tensor_read(f, w, got, sizeof got, &err), 0);
    CHECK_MEM(got, W, 48);
    for (int i = 0; i < 4; i++)
        for (int j = 0; j < 3; j++) want[i * 3 + j] = W[j * 4 + i];
    CHECK_EQ_INT(ckpt_tensor_read(f, wt, got, sizeof got, &err), 0);
    CHECK_MEM(got, want, 48);
    uint8_t part[16];
    CHECK_EQ_INT(ckpt_tensor_read_range(f, wt, 13, part, 11, &err), 0);
    CHECK_MEM(part, (const uint8_t *)want + 13, 11);
    CHECK_EQ_INT(w->file_offset, (int64_t)zb_find(z, "archive/data/0")->data_off);
    memset(&err, 0, sizeof err);
    const void *p = ckpt_tensor_data(f, w, &err);
    if (mapped) {
        CHECK(p != NULL);
        if (p) CHECK_MEM(p, W, 48);
    } else {
        CHECK(p == NULL);
        CHECK_EQ_INT(err.code, CKPT_E_NOTMAPPABLE);
        CHECK(err.message[0] != 0);
    }
    CHECK_EQ_INT(ckpt_verify(f, NULL, NULL, &err), 0);
}

static void test_path(void)
{
    SECTION("ckpt_open with and without mmap");
    zipb z;
    make_zip(&z);
    char path[] = "/tmp/ckpt_ut_srcXXXXXX";
    CHECK_EQ_INT(write_temp(path, z.out.p, z.out.n), 0);
    for (int mm = 0; mm < 2; mm++) {
        ckpt_options o;
        ckpt_options_init(&o);
        CHECK_EQ_INT(o.use_mmap, 0);
        CHECK(o.key == NULL);
        o.use_mmap = mm;
        ckpt_error err;
        memset(&err, 0, sizeof err);
        ckpt_file *f = ckpt_open(path, &o, &err);
        CHECK(f != NULL);
        if (!f) {
            fprintf(stderr, "  open: %s\n", err.message);
            continue;
        }
        ckpt_info info;
        ckpt_get_info(f, &info);
        CHECK_EQ_U64(info.file_size, z.out.n);
        CHECK_EQ_INT(info.format, CKPT_FORMAT_ZIP);
        check_zip_file(f, mm, &z);
        ckpt_close(f);
    }
    /* default options (NULL): not mapped */
    ckpt_file *f = ckpt_open(path, NULL, NULL);
    CHECK(f != NULL);
    if (f) check_zip_file(f, 0, &z);
    ckpt_close(f);
    unlink(path);
    bb_free(&z.out);

    SECTION("nonexistent path");
    ckpt_error err;
    memset(&err, 0, sizeof err);
    CHECK(ckpt_open("/tmp/ckpt_ut_does/not/exist.pt", NULL, &err) == NULL);
    CHECK_EQ_INT(err.code, CKPT_E_IO);
    CHECK(err.message[0] != 0);
    CHECK_CONTAINS(err.message, "No such file");
    CHECK_EQ_INT(err.offset, -1);
    CHECK(ckpt_open("/tmp/ckpt_ut_does/not/exist.pt", NULL, NULL) == NULL);

    SECTION("directory");
    memset(&err, 0, sizeof err);
    CHECK(ckpt_open("/tmp", NULL, &err) == NULL);
    CHECK(err.code != CKPT_OK);
    CHECK_CONTAINS(err.message, "directory");
    CHECK(ckpt_open("/tmp", NULL, NULL) == NULL);

    SECTION("not a regular file");
    memset(&err, 0, sizeof err);
    CHECK(ckpt_open("/dev/null", NULL, &err) == NULL);
    CHECK(err.code != CKPT_OK);
    CHECK(err.message[0] != 0);

    SECTION("empty file");
    char epath[] = "/tmp/ckpt_ut_emptyXXXXXX";
    CHECK_EQ_INT(write_temp(epath, "", 0), 0);
    for (int mm = 0; mm < 2; mm++) {
        ckpt_options o;
        ckpt_options_init(&o);
        o.use_mmap = mm;
        memset(&err, 0, sizeof err);
        CHECK(ckpt_open(epath, &o, &err) == NULL);
        CHECK_EQ_INT(err.code, CKPT_E_FORMAT);
        CHECK_EQ_INT(err.offset, 0);
        CHECK_CONTAINS(err.message, "empty");
        CHECK(ckpt_open(epath, &o, NULL) == NULL);
    }
    unlink(epath);

    SECTION("unreadable file");
    char upath[] = "/tmp/ckpt_ut_unreadXXXXXX";
    CHECK_EQ_INT(write_temp(upath, "\x80\x02N.", 4), 0);
    chmod(upath, 0);
    memset(&err, 0, sizeof err);
    f = ckpt_open(upath, NULL, &err);
    if (geteuid() != 0) { /* root reads anything */
        CHECK(f == NULL);
        CHECK_EQ_INT(err.code, CKPT_E_IO);
    }
    ckpt_close(f);
    unlink(upath);
}

/* ------------------------------------------------------------------------ */
/* Readers                                                                    */
/* ------------------------------------------------------------------------ */

typedef struct mreader {
    const uint8_t *data;
    uint64_t size;
    int reads, closes;
    int fail_all;       /* every read fails */
    uint64_t fail_from; /* reads reaching at or past this offset fail (0: none) */
    int bad_args;       /* a read outside [0, size) was asked for */
} mreader;

static int mr_read(void *opaque, uint64_t off, void *buf, size_t n)
{
    mreader *m = opaque;
    m->reads++;
    if (off > m->size || n > m->size - off) {
        m->bad_args++;
        return -1;
    }
    if (m->fail_all) return -1;
    if (m->fail_from && off + n > m->fail_from) return -1;
    memcpy(buf, m->data + off, n);
    return 0;
}
static void mr_close(void *opaque)
{
    ((mreader *)opaque)->closes++;
}

static ckpt_reader make_reader(mreader *m, const void *data, size_t n)
{
    memset(m, 0, sizeof *m);
    m->data = data;
    m->size = n;
    ckpt_reader r = {mr_read, mr_close, m, n};
    return r;
}

static void test_reader(void)
{
    zipb z;
    make_zip(&z);
    mreader m;
    ckpt_reader r;
    ckpt_error err;

    SECTION("reader: open, read, close once");
    r = make_reader(&m, z.out.p, z.out.n);
    memset(&err, 0, sizeof err);
    ckpt_file *f = ckpt_open_reader(&r, NULL, &err);
    CHECK(f != NULL);
    if (f) {
        CHECK(m.reads > 0);
        check_zip_file(f, 0, &z);
        CHECK_EQ_INT(m.closes, 0);
        ckpt_close(f);
        CHECK_EQ_INT(m.closes, 1);
    }
    CHECK_EQ_INT(m.bad_args, 0);

    SECTION("reader: the reader struct may go away after open");
    {
        ckpt_reader *heap = malloc(sizeof *heap);
        *heap = make_reader(&m, z.out.p, z.out.n);
        f = ckpt_open_reader(heap, NULL, NULL);
        memset(heap, 0, sizeof *heap);
        free(heap);
        CHECK(f != NULL);
        if (f) check_zip_file(f, 0, &z);
        ckpt_close(f);
        CHECK_EQ_INT(m.closes, 1);
    }

    SECTION("reader: open failure closes it");
    static const uint8_t junk[] = "\x01\x02\x03 this is not a checkpoint";
    r = make_reader(&m, junk, sizeof junk - 1);
    memset(&err, 0, sizeof err);
    CHECK(ckpt_open_reader(&r, NULL, &err) == NULL);
    CHECK_EQ_INT(err.code, CKPT_E_FORMAT);
    CHECK_EQ_INT(m.closes, 1);
    r = make_reader(&m, junk, sizeof junk - 1);
    CHECK(ckpt_open_reader(&r, NULL, NULL) == NULL);
    CHECK_EQ_INT(m.closes, 1);

    SECTION("reader: empty");
    r = make_reader(&m, "", 0);
    memset(&err, 0, sizeof err);
    CHECK(ckpt_open_reader(&r, NULL, &err) == NULL);
    CHECK_EQ_INT(err.code, CKPT_E_FORMAT);
    CHECK_EQ_INT(m.closes, 1);

    SECTION("reader: failing reads");
    r = make_reader(&m, z.out.p, z.out.n);
    m.fail_all = 1;
    memset(&err, 0, sizeof err);
    CHECK(ckpt_open_reader(&r, NULL, &err) == NULL);
    CHECK_EQ_INT(err.code, CKPT_E_IO);
    CHECK(err.message[0] != 0);
    CHECK_EQ_INT(m.closes, 1);

    SECTION("reader: failing tensor reads");
    r = make_reader(&m, z.out.p, z.out.n);
    {
        const zb_entry *e = zb_find(&z, "archive/data/0");
        f = ckpt_open_reader(&r, NULL, &err);
        CHECK(f != NULL);
        m.fail_from = e->data_off + 1; /* from now on the data record's bytes fail */
        if (f) {
            float got[12];
            memset(&err, 0, sizeof err);
            CHECK_EQ_INT(ckpt_tensor_read(f, ckpt_find(f, "w"), got, sizeof got, &err), -1);
            CHECK_EQ_INT(err.code, CKPT_E_IO);
            CHECK_EQ_INT(err.offset, (int64_t)e->data_off);
            CHECK_EQ_INT(ckpt_tensor_read(f, ckpt_find(f, "wt"), got, sizeof got, NULL), -1);
            ckpt_close(f);
        }
        CHECK_EQ_INT(m.closes, 1);
    }

    SECTION("reader: NULL read function");
    r = make_reader(&m, z.out.p, z.out.n);
    r.read = NULL;
    memset(&err, 0, sizeof err);
    CHECK(ckpt_open_reader(&r, NULL, &err) == NULL);
    CHECK_EQ_INT(err.code, CKPT_E_ARG);
    CHECK_EQ_INT(m.closes, 1);

    SECTION("reader: NULL close function");
    r = make_reader(&m, z.out.p, z.out.n);
    r.close = NULL;
    f = ckpt_open_reader(&r, NULL, NULL);
    CHECK(f != NULL);
    ckpt_close(f);
    CHECK_EQ_INT(m.closes, 0);

    bb_free(&z.out);
}

/* An archive of 1500 records: its central directory is larger than one
 * read window; through a reader (windows slide) as from memory. */
static void test_many_records(void)
{
    SECTION("1500 records through a reader");
    static zipb z;
    bb p = {0};
    int64_t sh[1] = {3}, st[1] = {1};
    pk_proto(&p, 2);
    pk_empty_dict(&p);
    zb_init(&z);
    for (int i = 0; i < 1500; i++) {
        char name[64], key[16];
        snprintf(name, sizeof name, "encoder.layer.%d.attention.self.query.weight", i);
        snprintf(key, sizeof key, "%d", i);
        if (i % 1000 == 0) pk_mark(&p);
        pk_str(&p, name);
        pk_tensor(&p, "IntStorage", key, 3, 0, 1, sh, st);
        if (i % 1000 == 999 || i == 1499) pk_setitems(&p);
    }
    pk_stop(&p);
    zb_add(&z, "archive/data.pkl", p.p, p.n);
    for (int i = 0; i < 1500; i++) {
        char name[64];
        int32_t v[3] = {i, -i, i * 7};
        snprintf(name, sizeof name, "archive/data/%d", i);
        zb_add(&z, name, v, sizeof v);
    }
    zb_add(&z, "archive/version", "3\n", 2);
    zb_finish(&z);
    CHECK(z.out.n > 4 * 65536);
    mreader m;
    ckpt_reader r = make_reader(&m, z.out.p, z.out.n);
    ckpt_error err;
    ckpt_file *f = ckpt_open_reader(&r, NULL, &err);
    CHECK(f != NULL);
    if (f) {
        CHECK_EQ_INT(ckpt_tensor_count(f), 1500);
        CHECK_EQ_INT(ckpt_storage_count(f), 1500);
        int bad = 0;
        for (int i = 0; i < 1500; i++) {
            const ckpt_tensor *t = ckpt_tensor_at(f, (size_t)i);
            char name[64];
            snprintf(name, sizeof name, "encoder.layer.%d.attention.self.query.weight", i);
            int32_t v[3] = {0, 0, 0};
            if (!t || strcmp(t->name, name) != 0 || t->dtype != CKPT_INT32 ||
                ckpt_tensor_read(f, t, v, sizeof v, &err) != 0 || v[0] != i || v[1] != -i ||
                v[2] != i * 7)
                bad++;
        }
        CHECK_EQ_INT(bad, 0);
        CHECK_EQ_INT(ckpt_verify(f, NULL, NULL, &err), 0);
        ckpt_close(f);
    }
    CHECK_EQ_INT(m.closes, 1);
    CHECK_EQ_INT(m.bad_args, 0);
    bb_free(&p);
    bb_free(&z.out);
}

static void count_global(void *ctx, const ckpt_global_ref *g)
{
    (void)g;
    ++*(int *)ctx;
}

/* A plain pickle larger than one 64 KiB read window: read in place from
 * memory, grown window by window through a reader or a file; the globals and
 * notes are recorded once whichever way. */
static void test_big_pickle(void)
{
    SECTION("pickle larger than the read window");
    bb p = {0};
    pk_proto(&p, 2);
    pk_mark(&p);
    pk_global(&p, "argparse", "Namespace");
    pk_proto(&p, 2); /* a second PROTO: one note */
    for (int i = 0; i < 5000; i++) {
        char s[64];
        snprintf(s, sizeof s, "item number %05d of a long list, padding padding", i);
        pk_str(&p, s);
    }
    pk_global(&p, "collections", "OrderedDict");
    pk_op(&p, 'l');
    pk_stop(&p);
    CHECK(p.n > 3 * 65536);
    char path[] = "/tmp/ckpt_ut_bigXXXXXX";
    CHECK_EQ_INT(write_temp(path, p.p, p.n), 0);
    for (int how = 0; how < 4; how++) {
        mreader m;
        ckpt_reader r = make_reader(&m, p.p, p.n);
        ckpt_options o;
        ckpt_options_init(&o);
        o.use_mmap = how == 3;
        int seen = 0;
        o.on_global = count_global;
        o.on_global_ctx = &seen;
        ckpt_error err;
        memset(&err, 0, sizeof err);
        ckpt_file *f = how == 0   ? ckpt_open_memory(p.p, p.n, &o, &err)
                       : how == 1 ? ckpt_open_reader(&r, &o, &err)
                                  : ckpt_open(path, &o, &err);
        CHECK_EQ_INT(seen, 2); /* once each, though the pickle is run window by window */
        CHECK(f != NULL);
        if (!f) {
            fprintf(stderr, "  how %d: %s\n", how, err.message);
            continue;
        }
        const ckpt_value *root = ckpt_root(f);
        CHECK_EQ_INT(ckpt_value_len(root), 5002);
        CHECK_STR(ckpt_value_text(ckpt_value_item(root, 5000), NULL),
                  "item number 04999 of a long list, padding padding");
        CHECK_EQ_INT(ckpt_global_count(f), 2);
        CHECK_EQ_INT(ckpt_note_count(f), 1);
        const ckpt_global_ref *g = ckpt_global_at(f, 1);
        CHECK(g && strcmp(g->name, "OrderedDict") == 0);
        CHECK(g && g->offset > 3 * 65536 && p.p[g->offset] == 'c');
        ckpt_close(f);
        if (how == 1) CHECK_EQ_INT(m.closes, 1);
    }
    unlink(path);

    /* the pickle size limit is a limit, whichever the source */
    SECTION("max_pickle_bytes through a reader and from memory");
    for (int how = 0; how < 2; how++) {
        mreader m;
        ckpt_reader r = make_reader(&m, p.p, p.n);
        ckpt_options o;
        ckpt_options_init(&o);
        o.max_pickle_bytes = 100000;
        ckpt_error err;
        memset(&err, 0, sizeof err);
        ckpt_file *f =
            how == 0 ? ckpt_open_reader(&r, &o, &err) : ckpt_open_memory(p.p, p.n, &o, &err);
        CHECK(f == NULL);
        ckpt_close(f);
        CHECK_EQ_INT(err.code, CKPT_E_LIMIT);
        if (err.code != CKPT_E_LIMIT) fprintf(stderr, "  how %d: %s\n", how, err.message);
    }
    bb_free(&p);
}

/* ------------------------------------------------------------------------ */

static int sink(void *ctx, const char *s, size_t n)
{
    (void)ctx;
    (void)s;
    (void)n;
    return 0;
}

static void test_null_arguments(void)
{
    SECTION("NULL arguments");
    ckpt_error err;
    memset(&err, 0, sizeof err);
    CHECK(ckpt_open(NULL, NULL, &err) == NULL);
    CHECK_EQ_INT(err.code, CKPT_E_ARG);
    CHECK(ckpt_open(NULL, NULL, NULL) == NULL);
    memset(&err, 0, sizeof err);
    CHECK(ckpt_open_memory(NULL, 10, NULL, &err) == NULL);
    CHECK_EQ_INT(err.code, CKPT_E_ARG);
    CHECK(ckpt_open_memory(NULL, 10, NULL, NULL) == NULL);
    memset(&err, 0, sizeof err);
    CHECK(ckpt_open_memory(NULL, 0, NULL, &err) == NULL);
    CHECK(err.code != CKPT_OK);
    CHECK(ckpt_open_memory("", 0, NULL, NULL) == NULL);
    memset(&err, 0, sizeof err);
    CHECK(ckpt_open_reader(NULL, NULL, &err) == NULL);
    CHECK_EQ_INT(err.code, CKPT_E_ARG);
    CHECK(ckpt_open_reader(NULL, NULL, NULL) == NULL);
    ckpt_close(NULL);

    /* accessors on no file */
    ckpt_info info;
    memset(&info, 0xab, sizeof info);
    ckpt_get_info(NULL, &info);
    CHECK_EQ_INT(info.tensor_count, 0);
    CHECK_EQ_U64(info.file_size, 0);
    CHECK_EQ_INT(ckpt_tensor_count(NULL), 0);
    CHECK(ckpt_tensor_at(NULL, 0) == NULL);
    CHECK(ckpt_find(NULL, "w") == NULL);
    CHECK_EQ_INT(ckpt_storage_count(NULL), 0);
    CHECK(ckpt_storage_at(NULL, 0) == NULL);
    CHECK_EQ_INT(ckpt_global_count(NULL), 0);
    CHECK(ckpt_global_at(NULL, 0) == NULL);
    CHECK_EQ_INT(ckpt_note_count(NULL), 0);
    CHECK(ckpt_note_at(NULL, 0) == NULL);
    CHECK(ckpt_root(NULL) == NULL);
    CHECK(ckpt_value_tensor(NULL, NULL) == NULL);
    memset(&err, 0, sizeof err);
    CHECK_EQ_INT(ckpt_tensor_read(NULL, NULL, NULL, 0, &err), -1);
    CHECK_EQ_INT(err.code, CKPT_E_ARG);
    CHECK_EQ_INT(ckpt_tensor_read(NULL, NULL, NULL, 0, NULL), -1);
    CHECK_EQ_INT(ckpt_tensor_read_range(NULL, NULL, 0, NULL, 0, NULL), -1);
    memset(&err, 0, sizeof err);
    CHECK(ckpt_tensor_data(NULL, NULL, &err) == NULL);
    CHECK_EQ_INT(err.code, CKPT_E_ARG);
    CHECK(ckpt_tensor_data(NULL, NULL, NULL) == NULL);
    memset(&err, 0, sizeof err);
    CHECK_EQ_INT(ckpt_verify(NULL, NULL, NULL, &err), -1);
    CHECK_EQ_INT(err.code, CKPT_E_ARG);
    CHECK_EQ_INT(ckpt_verify(NULL, NULL, NULL, NULL), -1);
    memset(&err, 0, sizeof err);
    CHECK_EQ_INT(ckpt_value_to_json(NULL, NULL, 0, sink, NULL, &err), -1);
    CHECK_EQ_INT(err.code, CKPT_E_ARG);
    CHECK_EQ_INT(ckpt_value_to_json(NULL, NULL, 0, sink, NULL, NULL), -1);

    /* value accessors on NULL values */
    CHECK_EQ_INT(ckpt_value_kind(NULL), CKPT_V_NONE);
    CHECK_EQ_INT(ckpt_value_bool(NULL), 0);
    CHECK_EQ_INT(ckpt_value_int(NULL), 0);
    CHECK(ckpt_value_float(NULL) == 0.0);
    size_t len = 99;
    CHECK(ckpt_value_text(NULL, &len) == NULL);
    CHECK_EQ_INT(len, 0);
    CHECK(ckpt_value_text(NULL, NULL) == NULL);
    CHECK_EQ_INT(ckpt_value_len(NULL), 0);
    CHECK(ckpt_value_item(NULL, 0) == NULL);
    CHECK(ckpt_value_key(NULL, 0) == NULL);
    CHECK(ckpt_value_get(NULL, "k") == NULL);
    CHECK(ckpt_value_class(NULL) == NULL);
    CHECK(ckpt_object_args(NULL) == NULL);
    CHECK(ckpt_object_state(NULL) == NULL);
    CHECK(ckpt_object_items(NULL) == NULL);
    CHECK(ckpt_object_list(NULL) == NULL);

    /* on an open file, NULL names and tensors */
    static const uint8_t pkl[] = "\x80\x02}X\x01\x00\x00\x00kK\x01s.";
    ckpt_file *f = ckpt_open_memory(pkl, sizeof pkl - 1, NULL, NULL);
    CHECK(f != NULL);
    if (f) {
        CHECK(ckpt_find(f, NULL) == NULL);
        CHECK(ckpt_value_get(ckpt_root(f), NULL) == NULL);
        CHECK_EQ_INT(ckpt_tensor_read(f, NULL, NULL, 0, NULL), -1);
        CHECK(ckpt_tensor_data(f, NULL, NULL) == NULL);
        CHECK_EQ_INT(ckpt_value_to_json(f, NULL, 0, NULL, NULL, NULL), -1);
        CHECK_EQ_INT(ckpt_verify(f, NULL, NULL, NULL), 0);
        ckpt_close(f);
    }
}

/* Error structs: every code has a name; failures leave a clean message. */
static void test_codes_and_dtypes(void)
{
    SECTION("code names");
    const char *names[10];
    for (int c = 0; c <= CKPT_E_NOTMAPPABLE; c++) {
        names[c] = ckpt_code_name((ckpt_code)c);
        CHECK(names[c] != NULL && names[c][0] != 0);
        for (int k = 0; k < c; k++) CHECK(strcmp(names[k], names[c]) != 0);
    }
    CHECK(ckpt_code_name((ckpt_code)99) != NULL);
    CHECK_STR(ckpt_code_name(CKPT_OK), "ok");

    SECTION("dtypes");
    static const struct {
        ckpt_dtype d;
        const char *name;
        size_t size;
    } tab[] = {
        {CKPT_FLOAT64, "float64", 8},
        {CKPT_FLOAT32, "float32", 4},
        {CKPT_FLOAT16, "float16", 2},
        {CKPT_BFLOAT16, "bfloat16", 2},
        {CKPT_INT64, "int64", 8},
        {CKPT_INT32, "int32", 4},
        {CKPT_INT16, "int16", 2},
        {CKPT_INT8, "int8", 1},
        {CKPT_UINT8, "uint8", 1},
        {CKPT_BOOL, "bool", 1},
        {CKPT_COMPLEX64, "complex64", 8},
        {CKPT_COMPLEX128, "complex128", 16},
        {CKPT_COMPLEX32, "complex32", 4},
        {CKPT_FLOAT8_E4M3FN, "float8_e4m3fn", 1},
        {CKPT_FLOAT8_E5M2, "float8_e5m2", 1},
        {CKPT_FLOAT8_E4M3FNUZ, "float8_e4m3fnuz", 1},
        {CKPT_FLOAT8_E5M2FNUZ, "float8_e5m2fnuz", 1},
        {CKPT_FLOAT8_E8M0FNU, "float8_e8m0fnu", 1},
        {CKPT_UINT16, "uint16", 2},
        {CKPT_UINT32, "uint32", 4},
        {CKPT_UINT64, "uint64", 8},
        {CKPT_QINT8, "qint8", 1},
        {CKPT_QUINT8, "quint8", 1},
        {CKPT_QINT32, "qint32", 4},
        {CKPT_QUINT4X2, "quint4x2", 1},
        {CKPT_QUINT2X4, "quint2x4", 1},
        {CKPT_BITS8, "bits8", 1},
        {CKPT_BITS16, "bits16", 2},
        {CKPT_BITS1X8, "bits1x8", 1},
        {CKPT_BITS2X4, "bits2x4", 1},
        {CKPT_BITS4X2, "bits4x2", 1},
    };
    CHECK_EQ_INT(sizeof tab / sizeof tab[0], CKPT_BITS4X2 + 1); /* the last dtype */
    for (size_t i = 0; i < sizeof tab / sizeof tab[0]; i++) {
        CHECK_STR(ckpt_dtype_name(tab[i].d), tab[i].name);
        CHECK_EQ_INT(ckpt_dtype_size(tab[i].d), tab[i].size);
    }
    CHECK_STR(ckpt_dtype_name((ckpt_dtype)(CKPT_BITS4X2 + 1)), "unknown");
    CHECK_EQ_INT(ckpt_dtype_size((ckpt_dtype)(CKPT_BITS4X2 + 1)), 0);
    CHECK_STR(ckpt_kind_name(CKPT_V_STORAGE), "storage");
    CHECK_STR(ckpt_kind_name(CKPT_V_NONE), "none");
    CHECK(ckpt_kind_name((ckpt_kind)99) != NULL);
    CHECK_STR(ckpt_format_name(CKPT_FORMAT_TORCHSCRIPT), "torchscript");
    CHECK(ckpt_format_name((ckpt_format)99) != NULL);

    SECTION("options defaults");
    ckpt_options o;
    memset(&o, 0xff, sizeof o);
    ckpt_options_init(&o);
    CHECK_EQ_U64(o.max_pickle_bytes, CKPT_DEFAULT_MAX_PICKLE_BYTES);
    CHECK_EQ_U64(o.max_tensor_bytes, CKPT_DEFAULT_MAX_TENSOR_BYTES);
    CHECK_EQ_U64(o.max_ops, CKPT_DEFAULT_MAX_OPS);
    CHECK_EQ_U64(o.max_stack, CKPT_DEFAULT_MAX_STACK);
    CHECK_EQ_U64(o.max_depth, CKPT_DEFAULT_MAX_DEPTH);
    CHECK_EQ_U64(o.max_memo, CKPT_DEFAULT_MAX_MEMO);
    CHECK_EQ_U64(o.max_expansion, CKPT_DEFAULT_MAX_EXPANSION);
    CHECK_EQ_U64(o.max_entries, CKPT_DEFAULT_MAX_ENTRIES);
    CHECK_EQ_U64(o.max_rank, CKPT_DEFAULT_MAX_RANK);
    CHECK(o.key == NULL);
    CHECK_EQ_INT(o.use_mmap, 0);

    SECTION("error messages are one line");
    /* a control character from the file must not reach the message: the
     * missing-key message lists the keys, one of them "a\nb\tc" */
    static const uint8_t pkl[] = "\x80\x02}X\x05\x00\x00\x00"
                                 "a\nb\tcK\x01s.";
    ckpt_options ko;
    ckpt_options_init(&ko);
    ko.key = "zz";
    ckpt_error err;
    memset(&err, 0, sizeof err);
    CHECK(ckpt_open_memory(pkl, sizeof pkl - 1, &ko, &err) == NULL);
    CHECK_EQ_INT(err.code, CKPT_E_NOTFOUND);
    CHECK_CONTAINS(err.message, "a?b?c");
    for (const char *c = err.message; *c; c++) CHECK((unsigned char)*c >= 0x20);
}

/* ckpt_sniff(): the containers' bids on the first bytes, as ckpt_open()
 * makes them, with the size known or not (a stream); and a FIFO with no
 * writer, which ckpt_open() refuses at once instead of waiting (issue 33). */
static void test_sniff_and_fifo(void)
{
    SECTION("ckpt_sniff: what ckpt_open() would take, from the first bytes");
    zipb z;
    make_zip(&z);
    ckpt_error err;
    memset(&err, 0, sizeof err);
    CHECK_EQ_INT(ckpt_sniff(z.out.p, 512, z.out.n, &err), 0);
    CHECK_EQ_INT(ckpt_sniff(z.out.p, 512, UINT64_MAX, NULL), 0);
    CHECK_EQ_INT(ckpt_sniff(z.out.p, z.out.n, z.out.n, NULL), 0); /* more than 512 is fine */
    CHECK_EQ_INT(ckpt_sniff("\x80\x02N.", 4, 4, NULL), 0);        /* a pickle */
    CHECK_EQ_INT(ckpt_sniff("(dp0\n", 5, UINT64_MAX, NULL), 0);   /* protocol 0 */
    /* safetensors: header length, then '{' */
    uint8_t st[16] = {6, 0, 0, 0, 0, 0, 0, 0, '{', '}', ' ', ' ', ' ', ' ', 0, 0};
    CHECK_EQ_INT(ckpt_sniff(st, 14, 14, NULL), 0);
    CHECK_EQ_INT(ckpt_sniff(st, 14, UINT64_MAX, NULL), 0);
    st[0] = 200; /* a header longer than the file it is in */
    CHECK_EQ_INT(ckpt_sniff(st, 14, 14, NULL), -1);
    CHECK_EQ_INT(ckpt_sniff(st, 14, UINT64_MAX, NULL), 0); /* size unknown: it may be that long */
    memset(&err, 0, sizeof err);
    CHECK_EQ_INT(ckpt_sniff("y\ny\ny\n", 6, UINT64_MAX, &err), -1);
    CHECK_EQ_INT(err.code, CKPT_E_FORMAT);
    CHECK_EQ_INT(err.offset, 0);
    CHECK_CONTAINS(err.message, "not a checkpoint");
    CHECK_CONTAINS(err.message, "0x79");
    /* the same message as ckpt_open_memory() */
    ckpt_error e2;
    memset(&e2, 0, sizeof e2);
    CHECK(ckpt_open_memory("y\ny\ny\n", 6, NULL, &e2) == NULL);
    CHECK(strcmp(err.message, e2.message) == 0);
    memset(&err, 0, sizeof err);
    CHECK_EQ_INT(ckpt_sniff("", 0, 0, &err), -1);
    CHECK_CONTAINS(err.message, "empty");
    memset(&err, 0, sizeof err);
    CHECK_EQ_INT(ckpt_sniff(NULL, 4, 4, &err), -1);
    CHECK_EQ_INT(err.code, CKPT_E_ARG);
    bb_free(&z.out);

    SECTION("a FIFO with no writer: refused at once, never waited on");
    char dir[] = "/tmp/ckpt_ut_fifoXXXXXX";
    CHECK(mkdtemp(dir) != NULL);
    char fifo[64];
    snprintf(fifo, sizeof fifo, "%s/f", dir);
    CHECK_EQ_INT(mkfifo(fifo, 0600), 0);
    for (int mm = 0; mm < 2; mm++) {
        ckpt_options o;
        ckpt_options_init(&o);
        o.use_mmap = mm;
        memset(&err, 0, sizeof err);
        CHECK(ckpt_open(fifo, &o, &err) == NULL);
        CHECK_EQ_INT(err.code, CKPT_E_IO);
        CHECK_CONTAINS(err.message, "FIFO");
        memset(&err, 0, sizeof err);
        CHECK(ckpt_open_path(fifo, &o, &err) == NULL);
        CHECK_CONTAINS(err.message, "FIFO");
    }
    unlink(fifo);
    rmdir(dir);
}

int main(void)
{
    test_sniff_and_fifo();
    test_path();
    test_reader();
    test_big_pickle();
    test_many_records();
    test_null_arguments();
    test_codes_and_dtypes();
    return ut_summary();
}
