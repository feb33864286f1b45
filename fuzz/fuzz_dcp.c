/*
 * fuzz_dcp.c - a torch.distributed.checkpoint folder (src/formats/dcp.c,
 * multi.c) on arbitrary bytes.  Input: a 4-byte little-endian length L,
 * L bytes of .metadata, the rest the bytes of every .distcp file the seeds
 * name (__0_0, __0_1, __1_0).  They are written into a private temporary
 * folder, opened with ckpt_open_path(), exercised (every tensor read,
 * assembled from its chunks; verify) and closed.
 */
#define _DEFAULT_SOURCE
#include "fuzz_common.h"

#include <stdio.h>
#include <unistd.h>

static char dir[64];

static int put_file(const char *name, const uint8_t *p, size_t n)
{
    char path[128];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *fp = fopen(path, "wb");
    if (!fp) return -1;
    int r = n && fwrite(p, 1, n, fp) != n ? -1 : 0;
    return fclose(fp) || r ? -1 : 0;
}

static void cleanup(void)
{
    static const char *const names[] = {".metadata", "__0_0.distcp", "__0_1.distcp",
                                        "__1_0.distcp"};
    char path[128];
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        snprintf(path, sizeof path, "%s/%s", dir, names[i]);
        unlink(path);
    }
    rmdir(dir);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!dir[0]) {
        snprintf(dir, sizeof dir, "/tmp/fuzz_dcp.XXXXXX");
        if (!mkdtemp(dir)) fuzz_die("mkdtemp failed", NULL);
        atexit(cleanup);
    }
    if (size < 4) return 0;
    uint32_t l = (uint32_t)data[0] | ((uint32_t)data[1] << 8) | ((uint32_t)data[2] << 16) |
                 ((uint32_t)data[3] << 24);
    if (l > size - 4) l = (uint32_t)(size - 4);
    const uint8_t *rest = data + 4 + l;
    size_t rn = size - 4 - l;
    if (put_file(".metadata", data + 4, l) || put_file("__0_0.distcp", rest, rn) ||
        put_file("__0_1.distcp", rest, rn) || put_file("__1_0.distcp", rest, rn))
        fuzz_die("cannot write the folder", dir);
    ckpt_options opt;
    fuzz_options(&opt);
    ckpt_error err;
    memset(&err, 0, sizeof err);
    ckpt_file *f = ckpt_open_path(dir, &opt, &err);
    if (!f) {
        fuzz_check_error(&err);
        return 0;
    }
    fuzz_exercise(f, NULL, 0, 0);
    for (size_t i = 0; i < ckpt_tensor_count(f); i++) {
        size_t p = ckpt_tensor_part(f, ckpt_tensor_at(f, i));
        if (p >= ckpt_part_count(f) || !ckpt_part_path(f, p))
            fuzz_die("a tensor's part is out of range", NULL);
    }
    ckpt_close(f);
    return 0;
}
