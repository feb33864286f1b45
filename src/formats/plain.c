/*
 * plain.c - layer 4 (formats): a file that is a pickle.  Either a bare
 * pickle (format "pickle": configs, pickled dicts) or, when its first pickle
 * is torch's magic number, the legacy stream (legacy.c).
 */
#include "formats.h"

#include <string.h>

static int plain_bid(const uint8_t *head, size_t n, uint64_t size)
{
    (void)size;
    uint8_t b = head[0];
    return n && (b == 0x80 || (b != 0 && strchr("(]})NIJKLFSVUXTcdlt", b) != NULL));
}

static int plain_open(ckpt_file *f, ckpt_error *err)
{
    uint64_t used;
    ckpt_value *v;
    f->pickle_label = "pickle";
    CK_TRY(ck_torch_load(f, 0, f->src.size, "pickle", NULL, NULL, &v, &used, err));
    if (ck_legacy_magic(v)) {
        f->pk.nglobals = 0;
        f->pk.nnotes = 0;
        return ck_legacy_open(f, err);
    }
    f->format = CKPT_FORMAT_PICKLE;
    f->root = v;
    if (used < f->src.size)
        CK_TRY(ck_note(&f->pk, "pickle: %llu bytes after STOP",
                       (unsigned long long)(f->src.size - used)));
    return 0;
}

const ck_format ck_format_pickle = {"pickle", plain_bid, plain_open, NULL, NULL, NULL, NULL, NULL};
