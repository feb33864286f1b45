/*
 * fuzz_pickle.c - the pickle machine alone.  The input is run by
 * ck_pickle_run() as one pickle, with persistent ids resolved the way the
 * legacy stream resolves them (storages inside the input itself), then the
 * value tree is walked by the catalogue and written as JSON.
 *
 * The same bytes are first offered cut in half with `more` set: the machine
 * must either finish, fail cleanly, or ask for more (1) - never read past
 * the half it was given.  The half is a separate heap copy so that ASan sees
 * any read beyond it.
 */
#include "../src/internal.h"
#include "fuzz_common.h"

static ckpt_value *pl(ckpt_file *f, void *ud, ckpt_value *pid, int64_t pos, ckpt_error *err) {
    (void)ud;
    return ck_storage_pid(f, pid, pos, true, NULL, err);
}

static ckpt_file *new_file(const uint8_t *data, size_t size) {
    ckpt_file *f = calloc(1, sizeof *f);
    if (!f) return NULL;
    fuzz_options(&f->opt);
    ck_source_memory(&f->src, data, size);
    f->format = CKPT_FORMAT_LEGACY;
    f->version = "";
    f->root_name = "";
    f->pickle_label = "fuzz";
    return f;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    ckpt_error err;
    ckpt_value *v = NULL;
    size_t used = 0;

    /* 1. the first half, as a stream that may continue */
    size_t half = size / 2;
    uint8_t *copy = malloc(half ? half : 1);
    if (!copy) return 0;
    if (half) memcpy(copy, data, half);
    ckpt_file *f = new_file(copy, half);
    if (!f) {
        free(copy);
        return 0;
    }
    ck_pickle_in in = {.buf = copy, .len = half, .more = true, .base = 0, .label = "fuzz", .persistent_load = pl};
    memset(&err, 0, sizeof err);
    int r = ck_pickle_run(f, &in, &v, &used, &err);
    if (r < 0) fuzz_check_error(&err);
    else if (r == 0 && (used == 0 || used > half)) fuzz_die("pickle used more bytes than it had", NULL);
    else if (r > 1) fuzz_die("ck_pickle_run returned an unknown status", NULL);
    ckpt_close(f);
    free(copy);

    /* 2. the whole input, then catalogue, reads and JSON */
    f = new_file(data, size);
    if (!f) return 0;
    in.buf = data;
    in.len = size;
    in.more = false;
    memset(&err, 0, sizeof err);
    r = ck_pickle_run(f, &in, &v, &used, &err);
    if (r != 0) {
        if (r != -1) fuzz_die("ck_pickle_run without more returned neither 0 nor -1", NULL);
        fuzz_check_error(&err);
    } else {
        if (!v || used == 0 || used > size) fuzz_die("bad result from ck_pickle_run", NULL);
        f->root = v;
        f->sel = v;
        memset(&err, 0, sizeof err);
        if (ck_catalogue(f, &err) != 0) fuzz_check_error(&err);
        else fuzz_exercise(f, data, size, 0);
    }
    ckpt_close(f);
    return 0;
}
