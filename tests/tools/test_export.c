/*
 * test_export.c - include/ckpt_export.h through the public API only.
 *
 *     test_export SAMPLE.pt TMPDIR
 */
#include "ckpt_export.h"

#include "../unit/harness.h"

typedef struct membuf {
    unsigned char *p;
    size_t len, cap;
    int fail_after; /* fail the call number fail_after (1-based), 0: never */
    int calls;
} membuf;

static int mem_write(void *ctx, const void *buf, size_t n)
{
    membuf *m = ctx;
    if (++m->calls == m->fail_after) return -1;
    if (m->len + n > m->cap) {
        size_t cap = (m->len + n) * 2;
        unsigned char *p = realloc(m->p, cap);
        if (!p) return -1;
        m->p = p;
        m->cap = cap;
    }
    memcpy(m->p + m->len, buf, n);
    m->len += n;
    return 0;
}

int main(int argc, char **argv)
{
    ckpt_error err;
    ckpt_file *f;
    const ckpt_tensor *t;
    membuf m;
    unsigned char raw[128];
    char hdr[CKPT_NPY_HEADER_CAP(2)], path[4096];
    size_t hl;
    int pair = -1;
    FILE *fp;

    if (argc != 3) {
        fprintf(stderr, "usage: test_export SAMPLE.pt TMPDIR\n");
        return 2;
    }

    SECTION("descr and headers");
    CHECK_STR(ckpt_npy_descr(CKPT_FLOAT32, &pair), "<f4");
    CHECK_EQ_INT(pair, 0);
    CHECK_STR(ckpt_npy_descr(CKPT_COMPLEX32, &pair), "<f2");
    CHECK_EQ_INT(pair, 1);
    CHECK_STR(ckpt_npy_descr(CKPT_BFLOAT16, NULL), "<u2");
    CHECK_CONTAINS(ckpt_npy_note(CKPT_BFLOAT16), "raw bits");
    {
        int64_t shape[2] = {8, 4};
        hl = ckpt_npy_header(hdr, sizeof hdr, CKPT_FLOAT32, shape, 2);
        CHECK_EQ_U64(hl % 64, 0);
        CHECK(hl >= 64);
        CHECK_MEM(hdr, "\x93NUMPY\x01\x00", 8);
        CHECK(strstr(hdr + 10, "'descr': '<f4', 'fortran_order': False, 'shape': (8, 4), }") !=
              NULL);
        CHECK_EQ_INT(hdr[hl - 1], '\n');
        CHECK_EQ_U64((size_t)(unsigned char)hdr[8] | ((size_t)(unsigned char)hdr[9] << 8), hl - 10);
        CHECK_EQ_U64(ckpt_npy_header(hdr, 16, CKPT_FLOAT32, shape, 2), 0);
    }

    f = ckpt_open(argv[1], NULL, &err);
    CHECK(f != NULL);
    if (!f) return ut_summary();

    SECTION("a tensor through a write callback");
    t = ckpt_find(f, "model.fc1.bias");
    CHECK(t != NULL && t->nbytes == 32);
    memset(&m, 0, sizeof m);
    CHECK_EQ_INT(ckpt_export_npy_to(f, t, mem_write, &m, &err), 0);
    CHECK(m.len >= 64);
    hl = m.len >= 64 ? 10 + ((size_t)m.p[8] | ((size_t)m.p[9] << 8)) : 0;
    CHECK_EQ_U64(hl % 64, 0);
    CHECK_EQ_U64(m.len, hl + 32);
    CHECK(m.len >= 64 && strstr((char *)m.p + 10, "'shape': (8,), }") != NULL);
    CHECK_EQ_INT(ckpt_tensor_read(f, t, raw, 32, &err), 0);
    CHECK(m.len == hl + 32 && memcmp(m.p + hl, raw, 32) == 0);

    SECTION("a failing sink stops the export");
    m.len = 0;
    m.calls = 0;
    m.fail_after = 2;
    CHECK_EQ_INT(ckpt_export_npy_to(f, t, mem_write, &m, &err), -1);
    CHECK_EQ_INT(err.code, CKPT_E_IO);
    free(m.p);

    SECTION("a tensor into a file");
    snprintf(path, sizeof path, "%s/w.npy", argv[2]);
    t = ckpt_find(f, "model.fc1.weight");
    CHECK(t != NULL && t->nbytes == 128);
    CHECK_EQ_INT(ckpt_export_npy(f, t, path, &err), 0);
    fp = fopen(path, "rb");
    CHECK(fp != NULL);
    if (fp) {
        unsigned char got[256];
        size_t n = fread(got, 1, sizeof got, fp);
        fclose(fp);
        hl = n >= 64 ? 10 + ((size_t)got[8] | ((size_t)got[9] << 8)) : 0;
        CHECK_EQ_U64(n, hl + 128);
        CHECK_EQ_INT(ckpt_tensor_read(f, t, raw, 128, &err), 0);
        CHECK(n == hl + 128 && memcmp(got + hl, raw, 128) == 0);
        CHECK(strstr((char *)got + 10, "'shape': (8, 4), }") != NULL);
    }
    remove(path);
    snprintf(path, sizeof path, "%s/no/such/dir/w.npy", argv[2]);
    CHECK_EQ_INT(ckpt_export_npy(f, t, path, &err), -1);
    CHECK_EQ_INT(err.code, CKPT_E_IO);
    CHECK_CONTAINS(err.message, "No such file");

    ckpt_close(f);
    return ut_summary();
}
