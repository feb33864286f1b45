/*
 * test_discard_open.c - a torch-style archive whose data.pkl (4 MiB) the
 * pickle machine gives back behind itself while it runs (issue 14): opened
 * by path (read into ckpt's own buffer), by path with use_mmap (the pages
 * of the file map given back), and from memory (the caller's: never given
 * back), it must list and read the same 30,000 tensors, each a view of one
 * of 1000 storages, with the values the bytes were written with.  The
 * archive is hand-built (tests/unit/build.h).
 */
#include "common/common.h" /* CK_DISCARD_STEP */
#include <ckpt.h>
#include "../unit/harness.h"
#include "../unit/build.h"

#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

enum { NSTORAGES = 1000, NTENSORS = 30000, NUMEL = 64 };

static void build_archive(zipb *z)
{
    bb p = {0};
    pk_proto(&p, 2);
    pk_empty_dict(&p);
    for (int i = 0; i < NTENSORS; i += 1000) {
        pk_mark(&p);
        for (int j = i; j < i + 1000; j++) {
            char key[32], skey[16];
            snprintf(key, sizeof key, "layers.%d.weight", j);
            snprintf(skey, sizeof skey, "%d", j % NSTORAGES);
            int64_t shape[2] = {2, 3}, stride[2] = {1, 2}; /* a transposed view */
            pk_str(&p, key);
            pk_tensor(&p, "FloatStorage", skey, NUMEL, j % 50, 2, shape, stride);
        }
        pk_setitems(&p);
    }
    pk_stop(&p);
    zb_init(z);
    zb_add(z, "archive/data.pkl", p.p, p.n);
    for (int k = 0; k < NSTORAGES; k++) {
        bb d = {0};
        for (int e = 0; e < NUMEL; e++) bb_f32le(&d, (float)(k * 1000 + e));
        char name[64];
        snprintf(name, sizeof name, "archive/data/%d", k);
        zb_add(z, name, d.p, d.n);
        bb_free(&d);
    }
    zb_add(z, "archive/version", "3\n", 2);
    zb_finish(z);
    bb_free(&p);
}

static void check_file(ckpt_file *f, const char *how)
{
    SECTION(how);
    CHECK(f != NULL);
    if (!f) return;
    CHECK_EQ_U64(ckpt_tensor_count(f), NTENSORS);
    int ok = ckpt_tensor_count(f) == NTENSORS;
    for (size_t j = 0; ok && j < NTENSORS; j++) {
        const ckpt_tensor *t = ckpt_tensor_at(f, j);
        char key[32];
        snprintf(key, sizeof key, "layers.%zu.weight", j);
        ok = t && strcmp(t->name, key) == 0 && t->ndim == 2 && t->shape[0] == 2 &&
             t->shape[1] == 3 && t->stride[0] == 1 && t->stride[1] == 2 &&
             t->storage_offset == (int64_t)(j % 50) && t->dtype == CKPT_FLOAT32;
        if (ok && j % 997 == 0) { /* its elements, row-major: [i][k] = base[off + i + 2k] */
            float v[6];
            ckpt_error e;
            ok = ckpt_tensor_read(f, t, v, sizeof v, &e) == 0;
            int64_t base = (int64_t)(j % NSTORAGES) * 1000 + (int64_t)(j % 50);
            for (int i = 0; ok && i < 2; i++)
                for (int k = 0; ok && k < 3; k++) ok = v[i * 3 + k] == (float)(base + i + 2 * k);
        }
    }
    CHECK(ok);
    ckpt_close(f);
}

int main(void)
{
    static zipb z;
    build_archive(&z);
    CHECK(z.out.n > 4 * CK_DISCARD_STEP); /* the machine gives pages back every step */
    char path[] = "/tmp/ckpt_discard_XXXXXX";
    int fd = mkstemp(path);
    CHECK(fd >= 0);
    if (fd < 0) return ut_summary();
    CHECK_EQ_U64((uint64_t)write(fd, z.out.p, z.out.n), z.out.n);
    close(fd);
    ckpt_options o;
    ckpt_error e;
    ckpt_options_init(&o);
    check_file(ckpt_open(path, &o, &e), "by path, read into ckpt's buffer");
    o.use_mmap = 1;
    check_file(ckpt_open(path, &o, &e), "by path, mapped (use_mmap)");
    ckpt_options_init(&o);
    check_file(ckpt_open_memory(z.out.p, z.out.n, &o, &e), "from the caller's memory");
    unlink(path);
    bb_free(&z.out);
    return ut_summary();
}
