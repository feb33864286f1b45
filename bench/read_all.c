/*
 * read_all.c - the benchmark's C API read loops (bench/README.md): open FILE,
 * read every tensor, print how many bytes were read.  Built by bench/run.sh
 * against the library.
 *
 *     read_all FILE            ckpt_tensor_read() of each whole tensor into
 *                              one buffer the size of the largest (a loader)
 *     read_all --chunk N FILE  ckpt_tensor_read_range() of each tensor in
 *                              pieces of at most N bytes through one N-byte
 *                              buffer (a hasher, converter or uploader)
 */
#include <ckpt.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char **argv)
{
    size_t chunk = 0;
    if (argc == 4 && strcmp(argv[1], "--chunk") == 0) {
        char *end;
        unsigned long long c = strtoull(argv[2], &end, 10);
        if (*end || c == 0 || c > ((size_t)1 << 30)) {
            fprintf(stderr, "read_all: --chunk takes a byte count from 1 to 1 GiB\n");
            return 2;
        }
        chunk = (size_t)c;
        argv += 2;
        argc -= 2;
    }
    if (argc != 2) {
        fprintf(stderr, "usage: read_all [--chunk BYTES] FILE\n");
        return 2;
    }
    ckpt_error err = {0};
    ckpt_file *f = ckpt_open(argv[1], NULL, &err);
    if (!f) {
        fprintf(stderr, "read_all: %s: %s\n", argv[1], err.message);
        return 1;
    }
    void *buf = chunk ? malloc(chunk) : NULL;
    size_t cap = chunk;
    if (chunk && !buf) {
        fprintf(stderr, "read_all: out of memory\n");
        return 1;
    }
    unsigned long long total = 0;
    for (size_t i = 0; i < ckpt_tensor_count(f); i++) {
        const ckpt_tensor *t = ckpt_tensor_at(f, i);
        if (chunk) {
            for (uint64_t at = 0; at < t->nbytes;) {
                size_t n = t->nbytes - at < chunk ? (size_t)(t->nbytes - at) : chunk;
                if (ckpt_tensor_read_range(f, t, at, buf, n, &err)) {
                    fprintf(stderr, "read_all: %s: %s: %s\n", argv[1], t->name, err.message);
                    return 1;
                }
                at += n;
            }
            total += t->nbytes;
            continue;
        }
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
