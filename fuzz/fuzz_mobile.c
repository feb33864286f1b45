/*
 * fuzz_mobile.c - the PyTorch Mobile flatbuffer reader (src/formats/mobile.c)
 * and the TorchScript naming under it (src/torch/script.c).
 *
 * The input is opened as it is, and once more with "PTMF" written at bytes
 * 4..8, so that a mutation of the identifier does not send the rest of the
 * input to another container: every other byte (root offset, vtables,
 * vectors, indices, tensors, the class sources) reaches the flatbuffer
 * checks.  Each is opened from memory (the file mapped: direct reads) and
 * through a ckpt_reader (the reader's page cache), which must come to the
 * same verdict and never ask for a byte outside the file.  Seeds: files of
 * tests/fixtures/mobile (torch 1.13 and 2.6) and hand-built ones.
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

/* Both opens of an exact-size heap copy (ASan sees any read past it). */
static void both(const uint8_t *data, size_t size, int force_ident)
{
    uint8_t *file = malloc(size ? size : 1);
    if (!file) return;
    if (size) memcpy(file, data, size);
    if (force_ident) memcpy(file + 4, "PTMF", 4);
    long n_mem = fuzz_open_and_exercise(file, size, NULL);
    mem_reader mr = {file, size};
    ckpt_reader rd = {mem_read, NULL, &mr, size};
    ckpt_error err;
    memset(&err, 0, sizeof err);
    ckpt_options opt;
    fuzz_options(&opt);
    ckpt_file *f = ckpt_open_reader(&rd, &opt, &err);
    long n_rd = -1;
    if (!f) {
        fuzz_check_error(&err);
    } else {
        fuzz_exercise(f, NULL, size, 0);
        n_rd = (long)ckpt_tensor_count(f);
        ckpt_close(f);
    }
    if (n_mem != n_rd) {
        char why[96];
        snprintf(why, sizeof why, "memory open found %ld tensors, reader open %ld", n_mem, n_rd);
        fuzz_die("memory and reader opens disagree", why);
    }
    free(file);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    both(data, size, 0);
    if (size >= 8 && memcmp(data + 4, "PTMF", 4) != 0) both(data, size, 1);
    return 0;
}
