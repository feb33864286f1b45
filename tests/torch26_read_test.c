/*
 * torch26_read_test.c - conj/neg views of a PyTorch 2.6 file through the
 * public API: the flags, ranged reads at every byte offset equal to the
 * whole read (the bit is applied to whole elements, also when a range
 * starts inside one), and zero-copy refused for them.  The whole reads are
 * held to torch's own bytes by tests/test_fixtures.py.
 *
 *   torch26_read_test tests/fixtures/torch26/views_zip.pt
 */
#include "ckpt.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int failures, checks;

static void expect(int cond, const char *what, const char *name)
{
    checks++;
    if (!cond) {
        failures++;
        printf("not ok - %s: %s\n", name, what);
    }
}

static void check_tensor(const ckpt_file *f, const char *name, int conj, int neg)
{
    ckpt_error err;
    const ckpt_tensor *t = ckpt_find(f, name);
    expect(t != NULL, "listed", name);
    if (!t) return;
    expect(t->conj == conj, "conj flag", name);
    expect(t->neg == neg, "neg flag", name);
    if (conj || neg) expect(t->file_offset == -1, "file_offset -1", name);
    unsigned char *whole = malloc(t->nbytes + 1), *part = malloc(t->nbytes + 1);
    if (!whole || !part) {
        expect(0, "out of memory", name);
        free(whole);
        free(part);
        return;
    }
    expect(ckpt_tensor_read(f, t, whole, t->nbytes, &err) == 0, "read", name);
    for (uint64_t len = 1; len <= 3; len++)
        for (uint64_t s = 0; s + len <= t->nbytes; s++) {
            memset(part, 0xa5, (size_t)len);
            int r = ckpt_tensor_read_range(f, t, s, part, (size_t)len, &err);
            if (r != 0 || memcmp(part, whole + s, (size_t)len) != 0) {
                expect(0, "a range read differs from the whole read", name);
                s = t->nbytes; /* once per length */
            }
        }
    const void *p = ckpt_tensor_data(f, t, &err);
    if (conj || neg)
        expect(p == NULL && err.code == CKPT_E_NOTMAPPABLE, "zero-copy refused", name);
    else if (t->contiguous)
        expect(p != NULL && memcmp(p, whole, t->nbytes) == 0, "zero-copy equals read", name);
    free(whole);
    free(part);
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: %s views_zip.pt\n", argv[0]);
        return 2;
    }
    ckpt_options opt;
    ckpt_options_init(&opt);
    opt.use_mmap = 1;
    ckpt_error err;
    ckpt_file *f = ckpt_open(argv[1], &opt, &err);
    if (!f) {
        printf("not ok - open: %s\n", err.message);
        return 1;
    }
    static const struct {
        const char *name;
        int conj, neg;
    } cases[] = {
        {"base", 0, 0},     {"bf16", 0, 0},      {"c64_conj", 1, 0}, {"c128_conj_t", 1, 0},
        {"c32_conj", 1, 0}, {"neg_imag", 0, 1},  {"neg_i64", 0, 1},  {"neg_i8", 0, 1},
        {"neg_bf16", 0, 1}, {"neg_f16_t", 0, 1}, {"neg_f64", 0, 1},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        check_tensor(f, cases[i].name, cases[i].conj, cases[i].neg);
    ckpt_close(f);
    printf("%d passed, %d failed\n", checks - failures, failures);
    return failures ? 1 : 0;
}
