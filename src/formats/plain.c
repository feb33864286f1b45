/*
 * plain.c - layer 4 (formats): a file that is a pickle.  Either a bare
 * pickle (format "pickle": configs, pickled dicts) or, when its first pickle
 * is torch's magic number, the legacy stream (legacy.c).
 */
#include "formats.h"

#include <stdio.h>
#include <string.h>

static int plain_bid(const uint8_t *head, size_t n, uint64_t size)
{
    (void)size;
    uint8_t b = head[0];
    return n && (b == 0x80 || (b != 0 && strchr("(]})NIJKLFSVUXTcdlt", b) != NULL));
}

/* For scanners: the pickles after the first one's STOP, each run to its own
 * STOP, values dropped.  A run of pickles is bounded by max_entries; one
 * that breaks ends the run with a note (its globals were reported). */
static int further_pickles(ckpt_file *f, uint64_t off, ckpt_error *err)
{
    for (uint32_t k = 2; off < f->src.size; k++) {
        char label[32];
        uint64_t used = 0;
        ckpt_value *v;
        ckpt_error e;
        if (k - 1 > f->opt.max_entries) {
            if (ck_note(&f->pk,
                        "pickle#%u and after: not scanned (more than %u pickles, "
                        "max_entries)",
                        k, f->opt.max_entries))
                return ck_fail(err, CKPT_E_NOMEM, -1, "out of memory");
            return 0;
        }
        snprintf(label, sizeof label, "pickle#%u", k);
        char *kept = ck_strndup(&f->arena, label, strlen(label));
        if (!kept) return ck_fail(err, CKPT_E_NOMEM, -1, "out of memory");
        memset(&e, 0, sizeof e);
        if (ck_torch_load(f, off, f->src.size, kept, NULL, NULL, &v, &used, &e) != 0) {
            if (ck_note(&f->pk, "%s at byte %llu does not parse: %s (byte %lld)", kept,
                        (unsigned long long)off, e.message, (long long)e.offset))
                return ck_fail(err, CKPT_E_NOMEM, -1, "out of memory");
            return 0;
        }
        if (used == 0) return 0; /* cannot happen: STOP takes a byte */
        off += used;
    }
    return 0;
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
    if (f->opt.scan_all_pickles) return further_pickles(f, used, err);
    return 0;
}

const ck_format ck_format_pickle = {"pickle", plain_bid, plain_open, NULL, NULL, NULL, NULL, NULL};
