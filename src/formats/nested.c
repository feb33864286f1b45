/*
 * nested.c - layer 4 (formats), for scanners (options.scan_all_pickles):
 * the pickles inside bytes values.  A bytes value that begins with PROTO, or
 * that a loader is called with (pickle.loads(b), torch.load(io.BytesIO(b)),
 * torch.storage._load_from_bytes(b), ...), is what a second load would run.
 * The pickle machine records such values (ck_unpickler.nested); once the
 * file's own pickles are done, each is opened as a file of its own (a
 * pickle, a legacy stream or a torch ZIP, whatever its bytes are), its
 * globals passed on to the scanner labelled "data.pkl>bytes@OFFSET" (then
 * ">data.pkl", ">pickle#2", ... for what the bytes hold but a plain first
 * pickle), to a bounded depth.  Bytes that do not open give a note.
 * Each global says which loader the file hands its bytes to
 * (ckpt_global_ref.loader), "" when none does: bytes that only begin like a
 * pickle are what a later, separate load would run, not a load of the file;
 * such a pickle also gets a note.
 */
#include "formats.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NESTED_MAX_DEPTH 8

/* Calls whose bytes argument is unpickled (directly or through a file
 * object); the same callables are "dangerous" in src/tools/scan.c's table
 * (W_LOAD), BytesIO excepted: it only carries the bytes to a loader. */
static const char *const loaders[] = {
    "pickle.",
    "_pickle.",
    "cPickle.",
    "dill.",
    "cloudpickle.",
    "joblib.",
    "jsonpickle.",
    "pandas.",
    "shelve.",
    "io.BytesIO",
    "_io.BytesIO",
    "torch.load",
    "torch.serialization.",
    "torch.storage._load_from_bytes",
    "torch.jit.load",
    "numpy.loads",
    "numpy.load",
    "numpy.core.numeric.loads",
    "numpy.lib.npyio.load",
};

static bool is_loader(const char *callee)
{
    for (size_t i = 0; i < sizeof loaders / sizeof loaders[0]; i++) {
        size_t n = strlen(loaders[i]);
        if (strncmp(callee, loaders[i], n) == 0 && (loaders[i][n - 1] == '.' || callee[n] == '\0'))
            return true;
    }
    return false;
}

/* The scanner's callback, seen through a label prefix. */
typedef struct nested_ctx {
    void (*on_global)(void *ctx, const ckpt_global_ref *g);
    void *ctx;
    const char *prefix;
    const char *loader; /* what the file hands these bytes to, "" nothing */
    int depth;
} nested_ctx;

static void prefixed_global(void *ctx, const ckpt_global_ref *g)
{
    const nested_ctx *c = ctx;
    char label[512];
    ckpt_global_ref h = *g;
    if (!g->pickle || strcmp(g->pickle, "pickle") == 0)
        snprintf(label, sizeof label, "%s", c->prefix);
    else if (strncmp(g->pickle, "pickle>", 7) == 0) /* bytes in bytes: a>bytes@1>bytes@2 */
        snprintf(label, sizeof label, "%s%s", c->prefix, g->pickle + 6);
    else
        snprintf(label, sizeof label, "%s>%s", c->prefix, g->pickle);
    h.pickle = label;
    /* bytes in bytes: loaded only when every link is */
    if (!c->loader[0])
        h.loader = "";
    else if (!g->loader)
        h.loader = c->loader;
    if (c->on_global) c->on_global(c->ctx, &h);
}

/* The records of one bytes value lie together once sorted by the value's
 * address, then by record: O(n log n) for the max_entries records a file
 * may make, where comparing each with every other would not be. */
typedef struct nested_key {
    uintptr_t bytes;
    size_t i;
} nested_key;

static int key_cmp(const void *a, const void *b)
{
    const nested_key *x = a, *y = b;
    if (x->bytes != y->bytes) return x->bytes < y->bytes ? -1 : 1;
    return x->i < y->i ? -1 : x->i > y->i;
}

/* For each record: lead[i] nonzero when it is the first of its bytes
 * value (2: and one of them was made beginning with PROTO, no callee), and
 * then via[i] the first loader any of them is handed to (NULL: none). */
static int group_records(const ckpt_file *f, unsigned char *lead, const char **via)
{
    size_t n = f->pk.nnested, i, j;
    nested_key *keys = malloc(n * sizeof *keys);
    if (!keys) return -1;
    for (i = 0; i < n; i++) {
        keys[i].bytes = (uintptr_t)f->pk.nested[i].bytes;
        keys[i].i = i;
        lead[i] = 0;
        via[i] = NULL;
    }
    qsort(keys, n, sizeof *keys, key_cmp);
    for (i = 0; i < n; i = j) {
        size_t first = keys[i].i;
        bool begins = false;
        const char *loader = NULL;
        for (j = i; j < n && keys[j].bytes == keys[i].bytes; j++) {
            const ck_nested *o = &f->pk.nested[keys[j].i];
            if (!o->callee)
                begins = true;
            else if (!loader && is_loader(o->callee))
                loader = o->callee;
        }
        lead[first] = begins ? 2 : 1;
        via[first] = loader;
    }
    free(keys);
    return 0;
}

int ck_scan_nested(ckpt_file *f, ckpt_error *err)
{
    if (!f->opt.scan_all_pickles || f->pk.nnested == 0) return 0;
    int depth = 1;
    if (f->opt.on_global == prefixed_global)
        depth = ((const nested_ctx *)f->opt.on_global_ctx)->depth + 1;
    /* the values are distinct opcodes' bytes or copies the machine charged
     * to max_expansion; still, scan at most about the file's size again */
    uint64_t budget = f->src.size + (1u << 20), spent = 0;
    /* every record of one bytes value (made beginning with PROTO, or an
     * argument of a call, of a loader or not) decides together: bytes kept,
     * then handed to pickle.loads through the memo, are loaded */
    unsigned char *lead = malloc(f->pk.nnested);
    const char **via = malloc(f->pk.nnested * sizeof *via);
    if (!lead || !via || group_records(f, lead, via) != 0) {
        free(lead);
        free(via);
        return ck_fail(err, CKPT_E_NOMEM, -1, "out of memory");
    }
    int rc = 0;
    for (size_t i = 0; i < f->pk.nnested && rc == 0; i++) {
        const ck_nested *n = &f->pk.nested[i];
        const char *loader = via[i];
        if (!lead[i] || (!loader && lead[i] != 2)) continue;
        char prefix[256];
        snprintf(prefix, sizeof prefix, "%.200s>bytes@%lld", n->label, (long long)n->pos);
        const char *why = NULL;
        if (depth > NESTED_MAX_DEPTH)
            why = "pickles nested in bytes deeper than 8";
        else if (n->bytes->u.s.n > budget - spent)
            why = "more nested bytes than the file holds";
        if (why) {
            if (ck_note(&f->pk, "%s: not scanned: %s", prefix, why))
                rc = ck_fail(err, CKPT_E_NOMEM, -1, "out of memory");
            continue;
        }
        spent += n->bytes->u.s.n;
        nested_ctx c = {f->opt.on_global, f->opt.on_global_ctx, prefix, loader ? loader : "",
                        depth};
        ckpt_options o = f->opt;
        o.on_global = prefixed_global;
        o.on_global_ctx = &c;
        o.key = NULL;
        o.use_mmap = 0;
        ckpt_error e;
        memset(&e, 0, sizeof e);
        ckpt_file *g = ckpt_open_memory(n->bytes->u.s.p, n->bytes->u.s.n, &o, &e);
        if (!g) {
            if (e.code == CKPT_E_NOMEM ||
                ck_note(&f->pk, "%s%s does not open: %s (byte %lld)", prefix,
                        loader ? "" : " (begins like a pickle)", e.message, (long long)e.offset))
                rc = ck_fail(err, CKPT_E_NOMEM, -1, "out of memory");
            continue;
        }
        size_t nn = ckpt_note_count(g);
        int r = 0;
        if (!loader)
            r = ck_note(&f->pk,
                        "%s: a pickle kept as a bytes value that nothing in the file hands to "
                        "a loader: its globals are listed, but loading this file does not run "
                        "them (a later load of those bytes would)",
                        prefix);
        for (size_t k = 0; k < nn && r == 0; k++)
            r = ck_note(&f->pk, "%s: %s", prefix, ckpt_note_at(g, k));
        ckpt_close(g);
        if (r) rc = ck_fail(err, CKPT_E_NOMEM, -1, "out of memory");
    }
    free(lead);
    free(via);
    return rc;
}
