/*
 * plain.c - layer 4 (formats): a file that is a pickle.  Either a bare
 * pickle (format "pickle": configs, pickled dicts) or, when its first pickle
 * is torch's magic number, the legacy stream (legacy.c).
 */
#include "formats.h"

#include <stdio.h>
#include <string.h>

/* torch.load unpickles a file that is neither a ZIP nor a TAR from its
 * first byte (serialization.py _legacy_load: pickle_module.load(f)), so a
 * pickle may begin with any opcode that needs nothing on the stack
 * (pickletools: stack_before == []): the values (INT .. EMPTY_SET, MARK),
 * GLOBAL, EXT1/2/4, PROTO and FRAME.  Left out are those that fail at once
 * there, before anything runs: GET, PUT, NEXT_BUFFER (an empty memo or
 * stack) and PERSID (that first load has no persistent_load; a truncated
 * "PK" stays "not a checkpoint").  'd', 'l' and 't' need a MARK but were
 * always taken: the error then names the byte. */
static int plain_bid(const uint8_t *head, size_t n, uint64_t size)
{
    static const char ascii[] = "(]})NIJKLMFGSTUBCVXcdlt";
    (void)size;
    if (!n) return 0;
    uint8_t b = head[0];
    if (b >= 0x80) /* PROTO, EXT1/2/4, NEWTRUE .. EMPTY_SET, FRAME, BYTEARRAY8 */
        return b == 0x80 || (b >= 0x82 && b <= 0x84) || (b >= 0x88 && b <= 0x8f) || b == 0x95 ||
               b == 0x96;
    return b != 0 && strchr(ascii, b) != NULL;
}

/* For scanners: the pickles in [off, end) of the file, after another
 * one's STOP, each run to its own STOP, values dropped, labelled
 * "<base>#<k>" from k = first.  A run of pickles is bounded by max_entries;
 * one that breaks ends the run with a note (its globals were reported). */
int ck_further_pickles(ckpt_file *f, uint64_t off, uint64_t end, const char *base, uint32_t first,
                       ckpt_error *err)
{
    if (end > f->src.size) end = f->src.size;
    for (uint32_t k = first; off < end; k++) {
        char label[96];
        uint64_t used = 0;
        ckpt_value *v;
        ckpt_error e;
        if (k - first >= f->opt.max_entries) {
            if (ck_note(&f->pk, "%s#%u and after: not scanned (more than %u pickles, max_entries)",
                        base, k, f->opt.max_entries))
                return ck_fail(err, CKPT_E_NOMEM, -1, "out of memory");
            return 0;
        }
        snprintf(label, sizeof label, "%.80s#%u", base, k);
        char *kept = ck_strndup(&f->arena, label, strlen(label));
        if (!kept) return ck_fail(err, CKPT_E_NOMEM, -1, "out of memory");
        memset(&e, 0, sizeof e);
        if (ck_torch_load(f, off, end, kept, NULL, NULL, &v, &used, &e) != 0) {
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

/* The same for a pickle held in memory (a ZIP record): the bytes of `in`
 * from `used` on. */
int ck_further_pickles_in(ckpt_file *f, const ck_pickle_in *in, size_t used, ckpt_error *err)
{
    for (uint32_t k = 2; used < in->len; k++) {
        char label[192];
        size_t u = 0;
        ckpt_value *v;
        ckpt_error e;
        if (k - 2 >= f->opt.max_entries) {
            if (ck_note(&f->pk, "%s#%u and after: not scanned (more than %u pickles, max_entries)",
                        in->label, k, f->opt.max_entries))
                return ck_fail(err, CKPT_E_NOMEM, -1, "out of memory");
            return 0;
        }
        snprintf(label, sizeof label, "%.170s#%u", in->label, k);
        char *kept = ck_strndup(&f->arena, label, strlen(label));
        if (!kept) return ck_fail(err, CKPT_E_NOMEM, -1, "out of memory");
        ck_pickle_in next = {.buf = in->buf + used,
                             .len = in->len - used,
                             .base = in->base >= 0 ? in->base + (int64_t)used : -1,
                             .label = kept};
        memset(&e, 0, sizeof e);
        if (ck_torch_run(f, &next, NULL, NULL, &v, &u, &e) != 0) {
            if (ck_note(&f->pk, "%s at byte %zu does not parse: %s (byte %lld)", kept, used,
                        e.message, (long long)e.offset))
                return ck_fail(err, CKPT_E_NOMEM, -1, "out of memory");
            return 0;
        }
        if (u == 0) return 0;
        used += u;
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
    if (f->opt.scan_all_pickles) return ck_further_pickles(f, used, f->src.size, "pickle", 2, err);
    return 0;
}

const ck_format ck_format_pickle = {"pickle", plain_bid, plain_open, NULL, NULL, NULL, NULL, NULL};
