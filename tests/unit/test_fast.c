/*
 * test_fast.c - the fast path for torch's tensor rebuild (torch_fast() in
 * src/torch/rebuild.c): data.pkl written here byte for byte as torch's
 * pickler writes a state dict (protocol 2, every value memoized with
 * BINPUT/LONG_BINPUT, the repeated ones fetched with BINGET/LONG_BINGET),
 * and the same pickle with a FRAME opcode (a hint the machine skips)
 * after the first MARK of chosen tensors: those the fast path declines and
 * the machine runs opcode by opcode.  Both must open to the same tensors,
 * or fail with the same error, 9 bytes later in the framed one when the
 * error lies after the FRAME.  Also the shapes of the pattern it must
 * decline without changing anything (a key a later GET fetches) and the
 * errors its checks must report as the machine would.
 */
#include "ckpt.h"
#include "harness.h"
#include "build.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ---- a pickler with torch's memo ----------------------------------------- */

enum { NKEYS = 2048 };

typedef struct pkl {
    bb b;
    uint32_t memo; /* the next memo key */
    int64_t k_rebuild, k_storage, k_cpu, k_od, k_float, k_untyped;
    int64_t k_key[NKEYS]; /* the key string of storage i, once written */
} pkl;

static void put(pkl *p)
{
    if (p->memo < 256) {
        bb_u8(&p->b, 'q');
        bb_u8(&p->b, p->memo);
    } else {
        bb_u8(&p->b, 'r');
        bb_le32(&p->b, p->memo);
    }
    p->memo++;
}

static void get(pkl *p, int64_t key)
{
    if (key < 256) {
        bb_u8(&p->b, 'h');
        bb_u8(&p->b, (unsigned)key);
    } else {
        bb_u8(&p->b, 'j');
        bb_le32(&p->b, (uint32_t)key);
    }
}

/* A global or string written once, then fetched. */
static void once_global(pkl *p, int64_t *k, const char *mod, const char *name)
{
    if (*k >= 0) {
        get(p, *k);
        return;
    }
    pk_global(&p->b, mod, name);
    *k = p->memo;
    put(p);
}
static void once_str(pkl *p, int64_t *k, const char *s)
{
    if (*k >= 0) {
        get(p, *k);
        return;
    }
    pk_str(&p->b, s);
    *k = p->memo;
    put(p);
}

static void pkl_init(pkl *p)
{
    memset(p, 0, sizeof *p);
    p->k_rebuild = p->k_storage = p->k_cpu = p->k_od = p->k_float = p->k_untyped = -1;
    for (size_t i = 0; i < sizeof p->k_key / sizeof p->k_key[0]; i++) p->k_key[i] = -1;
    pk_proto(&p->b, 2);
    pk_global(&p->b, "collections", "OrderedDict");
    p->k_od = p->memo;
    put(p);
    pk_empty_tuple(&p->b);
    pk_reduce(&p->b);
    put(p);
    pk_mark(&p->b);
}

/* How a tensor is written: as torch does, or with one thing changed. */
typedef struct tw {
    const char *name;
    int storage; /* key "<storage>" */
    int64_t numel, offset;
    int nd;
    int64_t shape[70], stride[70];
    int rg;
    int frame;         /* FRAME after the first MARK: the machine runs it */
    int untyped;       /* torch.UntypedStorage (needs _rebuild_tensor_v3) */
    int64_t loc_get;   /* >= 0: the location is a GET of this key */
    int64_t neg_shape; /* >= 0: this dimension's size written as BININT -1 */
} tw;

static void tensor(pkl *p, const tw *t)
{
    bb *b = &p->b;
    pk_str(b, t->name);
    put(p);
    once_global(p, &p->k_rebuild, "torch._utils", "_rebuild_tensor_v2");
    pk_mark(b);
    if (t->frame) {
        bb_u8(b, 0x95);
        bb_le64(b, 0);
    }
    pk_mark(b);
    once_str(p, &p->k_storage, "storage");
    if (t->untyped)
        once_global(p, &p->k_untyped, "torch", "UntypedStorage");
    else
        once_global(p, &p->k_float, "torch", "FloatStorage");
    char key[16];
    snprintf(key, sizeof key, "%d", t->storage);
    once_str(p, &p->k_key[t->storage], key);
    if (t->loc_get >= 0)
        get(p, t->loc_get);
    else
        once_str(p, &p->k_cpu, "cpu");
    pk_int(b, t->numel);
    pk_tuple(b);
    put(p);
    pk_op(b, 'Q');
    pk_int(b, t->offset);
    int64_t sh[70];
    memcpy(sh, t->shape, sizeof sh);
    if (t->neg_shape >= 0) sh[t->neg_shape] = -1;
    pk_int_tuple(b, sh, t->nd);
    put(p);
    pk_int_tuple(b, t->stride, t->nd);
    put(p);
    pk_bool(b, t->rg);
    get(p, p->k_od);
    pk_empty_tuple(b);
    pk_reduce(b);
    put(p);
    pk_tuple(b);
    put(p);
    pk_reduce(b);
    put(p);
}

static tw tw_1d(const char *name, int storage, int64_t n)
{
    tw t;
    memset(&t, 0, sizeof t);
    t.name = name;
    t.storage = storage;
    t.numel = n;
    t.nd = 1;
    t.shape[0] = n;
    t.stride[0] = 1;
    t.loc_get = t.neg_shape = -1;
    return t;
}

/* The archive: the data records first (so that their offsets do not move
 * with data.pkl's length), then data.pkl. */
static void archive(zipb *z, pkl *p, int nstorages, const int64_t *numel, const bb *extra)
{
    if (extra) bb_append(&p->b, extra);
    pk_setitems(&p->b);
    pk_stop(&p->b);
    zb_init(z);
    for (int i = 0; i < nstorages; i++) {
        char name[64];
        snprintf(name, sizeof name, "archive/data/%d", i);
        size_t n = (size_t)numel[i] * 4;
        uint8_t *d = calloc(n ? n : 1, 1);
        for (size_t k = 0; k < n; k++) d[k] = (uint8_t)(k * 7 + (size_t)i);
        zb_add(z, name, d, n);
        free(d);
    }
    zb_add(z, "archive/version", "3\n", 2);
    zb_add(z, "archive/data.pkl", p->b.p, p->b.n);
    zb_finish(z);
}

/* Open both archives: the same tensors, or the same error (`shift` bytes
 * later in the framed one). */
static void same_files(ckpt_file *a, ckpt_error ef, ckpt_file *b, ckpt_error es, int64_t shift);
static void same_bytes(const bb *fast, const bb *slow, int64_t shift, const ckpt_options *o)
{
    ckpt_error ef, es;
    memset(&ef, 0, sizeof ef);
    memset(&es, 0, sizeof es);
    ckpt_file *a = ckpt_open_memory(fast->p, fast->n, o, &ef);
    ckpt_file *b = ckpt_open_memory(slow->p, slow->n, o, &es);
    same_files(a, ef, b, es, shift);
}

/* Both opened, to the same tensors; or both refused, with the same error
 * (`shift` bytes later in b).  Closes both. */
static void same_files(ckpt_file *a, ckpt_error ef, ckpt_file *b, ckpt_error es, int64_t shift)
{
    CHECK((a != NULL) == (b != NULL));
    if (!a || !b) {
        if (!a && !b) {
            CHECK_STR(ef.message, es.message);
            CHECK_EQ_INT(ef.code, es.code);
            CHECK_EQ_INT(ef.offset + shift, es.offset);
        }
        ckpt_close(a);
        ckpt_close(b);
        return;
    }
    CHECK_EQ_U64(ckpt_tensor_count(a), ckpt_tensor_count(b));
    CHECK_EQ_U64(ckpt_storage_count(a), ckpt_storage_count(b));
    for (size_t i = 0; i < ckpt_tensor_count(a) && i < ckpt_tensor_count(b); i++) {
        const ckpt_tensor *x = ckpt_tensor_at(a, i), *y = ckpt_tensor_at(b, i);
        CHECK_STR(x->name, y->name);
        CHECK_EQ_INT(x->dtype, y->dtype);
        CHECK_EQ_INT(x->ndim, y->ndim);
        for (uint32_t d = 0; d < x->ndim && d < y->ndim; d++) {
            CHECK_EQ_INT(x->shape[d], y->shape[d]);
            CHECK_EQ_INT(x->stride[d], y->stride[d]);
        }
        CHECK_EQ_INT(x->storage_offset, y->storage_offset);
        CHECK_EQ_U64(x->storage, y->storage);
        CHECK_EQ_INT(x->requires_grad, y->requires_grad);
        CHECK_EQ_INT(x->file_offset, y->file_offset);
        CHECK_EQ_U64(x->nbytes, y->nbytes);
        CHECK_STR(ckpt_storage_at(a, x->storage)->key, ckpt_storage_at(b, y->storage)->key);
        uint8_t bx[4096], by[4096];
        if (x->nbytes <= sizeof bx && x->readable) {
            CHECK(ckpt_tensor_read(a, x, bx, sizeof bx, &ef) == 0);
            CHECK(ckpt_tensor_read(b, y, by, sizeof by, &es) == 0);
            CHECK(memcmp(bx, by, (size_t)x->nbytes) == 0);
        }
    }
    ckpt_close(a);
    ckpt_close(b);
}

static void same(const zipb *fast, const zipb *slow, int64_t shift, const ckpt_options *o)
{
    same_bytes(&fast->out, &slow->out, shift, o);
}

/* ---- many tensors, every form the fast path reads ------------------------- */

static zipb za, zb; /* big: static */

static void build_many(zipb *z, int frame_all)
{
    pkl p;
    pkl_init(&p);
    int64_t numel[300];
    char names[300][32];
    for (int i = 0; i < 300; i++) {
        snprintf(names[i], sizeof names[i], "layer.%d.weight", i);
        int s = i < 250 ? i : i - 250; /* the last 50 share storages 0..49 */
        tw t = tw_1d(names[i], s, 24);
        switch (i % 5) {
        case 0: /* 0-d */
            t.nd = 0;
            t.offset = i % 24;
            break;
        case 1: break;
        case 2: /* 2-d, TUPLE2 */
            t.nd = 2;
            t.shape[0] = 4, t.shape[1] = 6;
            t.stride[0] = 6, t.stride[1] = 1;
            break;
        case 3: /* 3-d transposed, TUPLE3 */
            t.nd = 3;
            t.shape[0] = 2, t.shape[1] = 3, t.shape[2] = 4;
            t.stride[0] = 1, t.stride[1] = 2, t.stride[2] = 6;
            break;
        case 4: /* 4-d, MARK ... TUPLE */
            t.nd = 4;
            t.shape[0] = 1, t.shape[1] = 2, t.shape[2] = 3, t.shape[3] = 2;
            t.stride[0] = 12, t.stride[1] = 6, t.stride[2] = 2, t.stride[3] = 1;
            t.offset = 12;
            break;
        }
        t.rg = i % 3 == 0;
        t.frame = frame_all;
        if (i < 250) numel[i] = 24;
        tensor(&p, &t);
    }
    archive(z, &p, 250, numel, NULL);
    bb_free(&p.b);
}

static void test_many(void)
{
    SECTION("300 tensors: LONG_BINPUT/LONG_BINGET, 0-4 dims, shared storages");
    build_many(&za, 0);
    build_many(&zb, 1);
    ckpt_file *f = OPEN_OK(&za.out, NULL);
    if (f) {
        CHECK_EQ_U64(ckpt_tensor_count(f), 300);
        CHECK_EQ_U64(ckpt_storage_count(f), 250);
        const ckpt_tensor *t = ckpt_find(f, "layer.289.weight"); /* 4-d over storage 39 */
        CHECK(t != NULL);
        if (t) {
            CHECK_EQ_INT(t->ndim, 4);
            CHECK_EQ_INT(t->shape[2], 3);
            CHECK_EQ_INT(t->stride[0], 12);
            CHECK_EQ_INT(t->storage_offset, 12);
            CHECK_STR(ckpt_storage_at(f, t->storage)->key, "39");
            CHECK_EQ_INT(t->requires_grad, 0);
        }
        t = ckpt_find(f, "layer.270.weight"); /* 0-d, requires_grad */
        CHECK(t != NULL);
        if (t) {
            CHECK_EQ_INT(t->ndim, 0);
            CHECK_EQ_INT(t->storage_offset, 270 % 24);
            CHECK_EQ_INT(t->requires_grad, 1);
            CHECK_STR(ckpt_storage_at(f, t->storage)->key, "20");
        }
        ckpt_close(f);
    }
    same(&za, &zb, 0, NULL);
    bb_free(&za.out);
    bb_free(&zb.out);
}

/* ---- a pickle read through windows ---------------------------------------- */

/* Opened by path (not mapped), a ZIP's data.pkl is read through a window
 * of 256 KiB that moves along it (src/pickle/pickle.c, win_load()); from
 * memory it is read in place.  30,000 tensors over 2,000 storages make a 2.9 MB data.pkl: the
 * window moves eleven times, at places no tensor chose, and the fast path
 * meets the end of a window's slack.  The same tensors either way, and the
 * same error when the file ends inside data.pkl. */
enum { NTENSORS = 30000, NSTORAGES = 2000 }; /* (tests/unit/build.h: ZB_MAX records) */
static pkl big;
static zipb zbig;

static char *write_temp(const void *p, size_t n)
{
    char *path = strdup("/tmp/ckpt_ut_fastXXXXXX");
    int fd = path ? mkstemp(path) : -1;
    CHECK(fd >= 0);
    if (fd < 0) {
        free(path);
        return NULL;
    }
    CHECK(write(fd, p, n) == (ssize_t)n);
    close(fd);
    return path;
}

/* Open `z` from memory and from a file: the same tensors, or the same error. */
static void same_streamed(const zipb *z, int64_t want_tensors)
{
    char *path = write_temp(z->out.p, z->out.n);
    if (!path) return;
    ckpt_error ea, eb;
    memset(&ea, 0, sizeof ea);
    memset(&eb, 0, sizeof eb);
    ckpt_file *a = ckpt_open_memory(z->out.p, z->out.n, NULL, &ea);
    ckpt_file *b = ckpt_open_path(path, NULL, &eb);
    if (want_tensors >= 0) {
        CHECK(a != NULL && b != NULL);
        if (b) CHECK_EQ_U64(ckpt_tensor_count(b), (uint64_t)want_tensors);
    } else {
        CHECK(a == NULL && b == NULL);
        CHECK(eb.offset > 11 * (256 << 10)); /* (a late window's) */
    }
    same_files(a, ea, b, eb, 0);
    unlink(path);
    free(path);
}

/* variant 0: tensors only; 1: and a 600 KiB string (a window grows to hold
 * it); 2: and then an unknown opcode (an error in a late window) */
static void build_streamed(int variant)
{
    pkl_init(&big);
    static int64_t numel[NSTORAGES];
    for (int i = 0; i < NTENSORS; i++) {
        char name[48];
        snprintf(name, sizeof name, "model.blocks.%d.attention.weight", i);
        int st = i % NSTORAGES; /* later tensors share (a GET of the key) */
        tw t = tw_1d(name, st, 1 + st % 7);
        t.frame = i % 997 == 0; /* now and then the machine's own way */
        if (i % 3 == 0) {
            t.nd = 2;
            t.shape[0] = 1, t.shape[1] = t.numel;
            t.stride[0] = t.numel, t.stride[1] = 1;
        }
        if (i < NSTORAGES) numel[i] = t.numel;
        tensor(&big, &t);
    }
    bb extra = {0};
    if (variant >= 1) {
        size_t n = (size_t)600 << 10;
        char *text = malloc(n);
        if (text) {
            memset(text, 'x', n);
            pk_str(&extra, "notes");
            pk_strn(&extra, text, n);
            free(text);
        }
    }
    if (variant == 2) bb_u8(&extra, 0xff);
    archive(&zbig, &big, NSTORAGES, numel, &extra);
    CHECK(big.b.n > 11 * ((size_t)256 << 10));
    bb_free(&extra);
    bb_free(&big.b);
}

static void test_streamed(void)
{
    SECTION("30,000 tensors opened by path (data.pkl through a moving window) and from memory");
    build_streamed(0);
    same_streamed(&zbig, NTENSORS);
    bb_free(&zbig.out);
    SECTION("the same with a 600 KiB string: a window grows to hold it");
    build_streamed(1);
    same_streamed(&zbig, NTENSORS);
    bb_free(&zbig.out);
    SECTION("the same with an unknown opcode at the end: the same error, at the same byte");
    build_streamed(2);
    same_streamed(&zbig, -1);
    bb_free(&zbig.out);
}

/* ---- one case: tensor "a" as torch writes it, then tensor "b" as `t` ------ */

/* Returns the error of the unframed archive ("(opened)" when it opened). */
static ckpt_error one_case(const char *what, const tw *t, const bb *extra, int64_t shift,
                           const ckpt_options *o)
{
    SECTION(what);
    for (int form = 0; form < 2; form++) {
        pkl p;
        pkl_init(&p);
        if (t->untyped) { /* the class memoized before, as a value of its own */
            pk_str(&p.b, "cls");
            put(&p);
            once_global(&p, &p.k_untyped, "torch", "UntypedStorage");
        }
        tw first = tw_1d("a", 0, 8);
        tensor(&p, &first);
        tw second = *t;
        second.frame = form;
        tensor(&p, &second);
        int64_t numel[2] = {8, 8};
        archive(form ? &zb : &za, &p, 2, numel, extra);
        bb_free(&p.b);
    }
    same(&za, &zb, shift, o);
    ckpt_error e = open_fail(&za.out, o);
    if (getenv("TEST_FAST_SHOW")) /* what each case reports */
        fprintf(stderr, "%s: %s (%lld)\n", what, e.message, (long long)e.offset);
    bb_free(&za.out);
    bb_free(&zb.out);
    return e;
}

static void test_cases(void)
{
    tw t = tw_1d("b", 1, 8);
    ckpt_error e = one_case("as torch writes it", &t, NULL, 0, NULL);
    CHECK_STR(e.message, "(opened)");

    t = tw_1d("b", 1, 8);
    t.stride[0] = -1; /* BININT -1: the fast path declines, the REDUCE refuses */
    e = one_case("a negative stride", &t, NULL, 9, NULL);
    CHECK_CONTAINS(e.message, "tensor stride has a negative entry");

    t = tw_1d("b", 1, 8);
    t.neg_shape = 0;
    e = one_case("a negative size", &t, NULL, 9, NULL);
    CHECK_CONTAINS(e.message, "tensor size has a negative entry");

    t = tw_1d("b", 1, 8);
    t.loc_get = 200; /* no such memo entry */
    e = one_case("a location GET of an undefined key", &t, NULL, 9, NULL);
    CHECK_CONTAINS(e.message, "memo key 200 is not defined");

    t = tw_1d("b", 1, 8);
    t.untyped = 1; /* an UntypedStorage under _rebuild_tensor_v2 */
    e = one_case("an untyped storage", &t, NULL, 9, NULL);
    CHECK_CONTAINS(e.message, "tensor over an untyped storage needs _rebuild_tensor_v3");

    t = tw_1d("b", 1, 64); /* more elements than the record holds */
    e = one_case("a storage larger than its record", &t, NULL, 9, NULL);
    CHECK_CONTAINS(e.message, "holds 32 bytes but its storage needs 256");

    t = tw_1d("b", 1, 8);
    t.nd = 3;
    t.shape[0] = 2, t.shape[1] = 2, t.shape[2] = 2;
    t.stride[0] = 4, t.stride[1] = 2, t.stride[2] = 1;
    ckpt_options o;
    ckpt_options_init(&o);
    o.max_rank = 2;
    e = one_case("more dimensions than max_rank", &t, NULL, 9, &o);
    CHECK_CONTAINS(e.message, "tensor has 3 dimensions (limit 2; max_rank)");
    e = one_case("three dimensions", &t, NULL, 0, NULL);
    CHECK_STR(e.message, "(opened)");

    t = tw_1d("b", 1, 8);
    t.nd = 65;
    for (int i = 0; i < 65; i++) t.shape[i] = 1, t.stride[i] = 1;
    e = one_case("65 dimensions", &t, NULL, 9, NULL);
    CHECK_CONTAINS(e.message, "tensor has 65 dimensions (limit 64)");

    t = tw_1d("b", 1, 8);
    t.offset = 6;
    t.shape[0] = 4; /* runs past the storage's 8 elements */
    e = one_case("a view past its storage", &t, NULL, 9, NULL);
    CHECK_CONTAINS(e.message, "reaches byte 40 of storage '1', which holds 32 bytes");

    /* a key string a later GET fetches: the fast path must leave its PUT to
     * the machine (the memo entry must exist), and the value stays */
    {
        pkl probe;
        pkl_init(&probe);
        tw first = tw_1d("a", 0, 8);
        tensor(&probe, &first);
        /* tensor "b": the name and its PUT (probe.memo), GETs of the rebuild,
         * 'storage' and the class, then the key "1" and its PUT */
        int64_t key_of_b = probe.memo + 1;
        bb_free(&probe.b);
        bb extra = {0};
        pk_str(&extra, "alias");
        bb_u8(&extra, 'j');
        bb_le32(&extra, (uint32_t)key_of_b);
        t = tw_1d("b", 1, 8);
        one_case("a key a later GET fetches", &t, &extra, 0, NULL);
        pkl p;
        pkl_init(&p);
        tensor(&p, &first);
        tensor(&p, &t);
        int64_t numel[2] = {8, 8};
        archive(&za, &p, 2, numel, &extra);
        bb_free(&p.b);
        ckpt_file *f = OPEN_OK(&za.out, NULL);
        if (f) {
            CHECK_EQ_U64(ckpt_tensor_count(f), 2);
            const ckpt_value *root = ckpt_root(f);
            const ckpt_value *alias = root ? ckpt_value_get(root, "alias") : NULL;
            CHECK(alias != NULL && ckpt_value_kind(alias) == CKPT_V_STR);
            if (alias) CHECK_STR(ckpt_value_text(alias, NULL), "1");
            ckpt_close(f);
        }
        bb_free(&za.out);
        bb_free(&extra);
    }
}

/* The pickle alone, not in an archive: no persistent id can be read, and
 * the open fails at the first tensor's BINPERSID, framed or not. */
static void test_plain(void)
{
    SECTION("a plain pickle: no persistent ids");
    bb b[2];
    for (int form = 0; form < 2; form++) {
        pkl p;
        pkl_init(&p);
        tw first = tw_1d("a", 0, 8), second = tw_1d("b", 1, 8);
        first.frame = 1; /* the first is never fast: its class is not memoized yet */
        second.frame = form;
        tensor(&p, &first);
        tensor(&p, &second);
        pk_setitems(&p.b);
        pk_stop(&p.b);
        b[form] = p.b;
    }
    same_bytes(&b[0], &b[1], 0, NULL);
    ckpt_error e = open_fail(&b[0], NULL);
    CHECK_CONTAINS(e.message, "persistent id in a pickle that cannot have one");
    bb_free(&b[0]);
    bb_free(&b[1]);
}

int main(void)
{
    test_many();
    test_streamed();
    test_cases();
    test_plain();
    return ut_summary();
}
