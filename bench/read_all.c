/*
 * read_all.c - the benchmark's C API read loop (bench/README.md): open FILE,
 * read every tensor with ckpt_tensor_read() into one reused buffer, print
 * how many bytes were read.  Built by bench/run.sh against the library.
 *
 *     read_all FILE
 */
#include <ckpt.h>

#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: read_all FILE\n");
        return 2;
    }
    ckpt_error err = {0};
    ckpt_file *f = ckpt_open(argv[1], NULL, &err);
    if (!f) {
        fprintf(stderr, "read_all: %s: %s\n", argv[1], err.message);
        return 1;
    }
    void *buf = NULL;
    size_t cap = 0;
    unsigned long long total = 0;
    for (size_t i = 0; i < ckpt_tensor_count(f); i++) {
        const ckpt_tensor *t = ckpt_tensor_at(f, i);
        if (t->nbytes > cap) {
            free(buf);
            cap = (size_t)t->nbytes;
            if (!(buf = malloc(cap))) {
                fprintf(stderr, "read_all: out of memory\n");
                return 1;
            }
        }
        if (ckpt_tensor_read(f, t, buf, cap, &err)) {
            fprintf(stderr, "read_all: %s: %s: %s\n", argv[1], t->name, err.message);
            return 1;
        }
        total += t->nbytes;
    }
    printf("%zu tensors, %llu bytes\n", ckpt_tensor_count(f), total);
    free(buf);
    ckpt_close(f);
    return 0;
}
