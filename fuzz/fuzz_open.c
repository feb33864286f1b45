/*
 * fuzz_open.c - the whole library on arbitrary bytes: ckpt_open_memory()
 * detects the container (ZIP, TAR, legacy stream, plain pickle), then every
 * tensor is listed and read and the root is written as JSON.
 *
 * The same bytes are opened a second time through a ckpt_reader callback
 * (no memory map: the windowed code paths), which must come to the same
 * verdict and never ask for a byte outside the file.  When the root is a
 * dict with a string key, the first key is also selected with opt.key.
 */
#include "fuzz_common.h"

typedef struct mem_reader {
    const uint8_t *data;
    size_t size;
} mem_reader;

static int mem_read(void *opaque, uint64_t off, void *buf, size_t n)
{
    mem_reader *r = opaque;
    if (off > r->size || n > r->size - off)
        fuzz_die("reader asked for bytes outside the file", NULL);
    if (n) memcpy(buf, r->data + off, n);
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    long n_mem = fuzz_open_and_exercise(data, size, NULL);

    /* Through a reader: no map, windows and growing pickle buffers. */
    mem_reader mr = {data, size};
    ckpt_reader rd = {mem_read, NULL, &mr, size};
    ckpt_error err;
    memset(&err, 0, sizeof err);
    ckpt_options ropt;
    fuzz_options(&ropt);
    ckpt_file *f = ckpt_open_reader(&rd, &ropt, &err);
    long n_rd = -1;
    if (!f) {
        fuzz_check_error(&err);
    } else {
        fuzz_exercise(f, NULL, size, 0);
        n_rd = (long)ckpt_tensor_count(f);
        /* Select the first top-level string key, as `ckpt ls --key` would. */
        const ckpt_value *root = ckpt_root(f);
        const ckpt_value *k0 = ckpt_value_key(root, 0);
        size_t kl = 0;
        const char *ks = ckpt_value_kind(k0) == CKPT_V_STR ? ckpt_value_text(k0, &kl) : NULL;
        if (ks && kl < 256 && strlen(ks) == kl) {
            char key[256];
            memcpy(key, ks, kl + 1);
            ckpt_options opt;
            fuzz_options(&opt);
            opt.key = key;
            fuzz_open_and_exercise(data, size, &opt);
        }
        ckpt_close(f);
    }
    if ((n_mem < 0) != (n_rd < 0) || n_mem != n_rd) {
        char why[96];
        snprintf(why, sizeof why, "memory open found %ld tensors, reader open %ld", n_mem, n_rd);
        fuzz_die("memory and reader opens disagree", why);
    }
    return 0;
}
