/*
 * test_scan.c - include/ckpt_scan.h through the public API only: verdicts
 * of single globals, and whole-file scans of a real checkpoint and of
 * pickles assembled here byte by byte (never unpickled by anything).
 *
 *     test_scan SAMPLE.pt
 */
#include "ckpt_scan.h"

#include "../unit/harness.h"
#include "../unit/build.h"

static zipb zip_scratch; /* large: not on the stack */

/* The item of the report whose pickle label is `label`, or NULL. */
static const ckpt_scan_item *item_in(const ckpt_scan_report *r, const char *label)
{
    for (size_t i = 0; i < ckpt_scan_count(r); i++)
        if (strcmp(ckpt_scan_at(r, i)->pickle, label) == 0) return ckpt_scan_at(r, i);
    return NULL;
}

/* PROTO 2, GLOBAL module\nname\n, MARK, BINUNICODE arg, TUPLE, REDUCE, STOP */
static size_t call_pickle(unsigned char *out, const char *module, const char *name, const char *arg)
{
    size_t n = 0, len = strlen(arg);
    out[n++] = 0x80;
    out[n++] = 2;
    out[n++] = 'c';
    memcpy(out + n, module, strlen(module));
    n += strlen(module);
    out[n++] = '\n';
    memcpy(out + n, name, strlen(name));
    n += strlen(name);
    out[n++] = '\n';
    out[n++] = '(';
    out[n++] = 'X';
    out[n++] = (unsigned char)len;
    out[n++] = 0;
    out[n++] = 0;
    out[n++] = 0;
    memcpy(out + n, arg, len);
    n += len;
    out[n++] = 't';
    out[n++] = 'R';
    out[n++] = '.';
    return n;
}

/* on_global of a reader with scan_all_pickles: each global's loader. */
typedef struct loaders_seen {
    char name[4][64], loader[4][64];
    int null_loader[4];
    size_t n;
} loaders_seen;

static void record_loader(void *ctx, const ckpt_global_ref *g)
{
    loaders_seen *s = ctx;
    if (s->n >= 4) return;
    snprintf(s->name[s->n], sizeof s->name[0], "%s.%s", g->module, g->name);
    s->null_loader[s->n] = g->loader == NULL;
    snprintf(s->loader[s->n], sizeof s->loader[0], "%s", g->loader ? g->loader : "");
    s->n++;
}

/* PROTO 3, `head`, SHORT_BINBYTES of the os.system pickle, `tail`. */
static size_t wrap_evil(unsigned char *out, const char *head, const char *tail)
{
    unsigned char evil[64];
    size_t e = call_pickle(evil, "os", "system", "true"), n = 0;
    out[n++] = 0x80;
    out[n++] = 3;
    memcpy(out + n, head, strlen(head));
    n += strlen(head);
    out[n++] = 'C';
    out[n++] = (unsigned char)e;
    memcpy(out + n, evil, e);
    n += e;
    memcpy(out + n, tail, strlen(tail));
    return n + strlen(tail);
}

/* A hostile act (BUILD/SETITEM on a global, EXT*): the scan flags it as the
 * last item, a "<pickle>" act named `act` at `offset`, with the read error;
 * the reader alone still refuses the file with its one-line error. */
static void check_act(const char *bytes, size_t n, const char *act, int64_t offset,
                      const char *read_error)
{
    ckpt_error err;
    ckpt_scan_report *r = ckpt_scan_memory(bytes, n, NULL, 0, &err);
    CHECK(r != NULL);
    if (!r) return;
    CHECK(ckpt_scan_flagged(r));
    CHECK_EQ_INT(ckpt_scan_verdict(r), CKPT_VERDICT_DANGEROUS);
    CHECK(ckpt_scan_error(r) != NULL);
    CHECK(ckpt_scan_count(r) >= 1);
    if (ckpt_scan_count(r) >= 1) {
        const ckpt_scan_item *it = ckpt_scan_at(r, ckpt_scan_count(r) - 1);
        CHECK_STR(it->module, "<pickle>");
        CHECK_STR(it->name, act);
        CHECK_STR(it->pickle, "pickle");
        CHECK_EQ_U64((uint64_t)it->offset, (uint64_t)offset);
        CHECK_EQ_INT(it->verdict, CKPT_VERDICT_DANGEROUS);
        CHECK(it->called);
        CHECK(it->why[0] != '\0');
    }
    ckpt_scan_free(r);
    CHECK(ckpt_open_memory(bytes, n, NULL, &err) == NULL);
    CHECK_CONTAINS(err.message, read_error);
    CHECK_EQ_U64((uint64_t)err.offset, (uint64_t)offset);
}

int main(int argc, char **argv)
{
    const char *why = NULL;
    unsigned char buf[256];
    size_t n;
    ckpt_scan_report *r;
    ckpt_error err;

    if (argc != 2) {
        fprintf(stderr, "usage: test_scan SAMPLE.pt\n");
        return 2;
    }

    SECTION("single globals");
    CHECK_EQ_INT(ckpt_global_verdict("os", "system", &why), CKPT_VERDICT_DANGEROUS);
    CHECK_CONTAINS(why, "runs commands");
    CHECK_EQ_INT(ckpt_global_verdict("posix", "system", NULL), CKPT_VERDICT_DANGEROUS);
    CHECK_EQ_INT(ckpt_global_verdict("builtins", "eval", NULL), CKPT_VERDICT_DANGEROUS);
    CHECK_EQ_INT(ckpt_global_verdict("torch", "serialization.os.system", &why),
                 CKPT_VERDICT_DANGEROUS);
    CHECK_EQ_INT(ckpt_global_verdict("torch._utils", "_rebuild_tensor_v2", &why),
                 CKPT_VERDICT_SAFE);
    CHECK_CONTAINS(why, "weights_only");
    CHECK_EQ_INT(ckpt_global_verdict("collections", "OrderedDict", NULL), CKPT_VERDICT_SAFE);
    CHECK_EQ_INT(ckpt_global_verdict("torch", "FloatStorage", NULL), CKPT_VERDICT_SAFE);
    CHECK_EQ_INT(ckpt_global_verdict("torch", "bfloat16", NULL), CKPT_VERDICT_SAFE);
    CHECK_EQ_INT(ckpt_global_verdict("argparse", "Namespace", &why), CKPT_VERDICT_UNKNOWN);
    CHECK_STR(why, "");
    CHECK_EQ_INT(ckpt_global_verdict("functools", "partial", NULL), CKPT_VERDICT_UNKNOWN);
    CHECK_EQ_INT(ckpt_global_verdict("torch", "__builtins__", NULL), CKPT_VERDICT_DANGEROUS);
    CHECK_STR(ckpt_verdict_name(CKPT_VERDICT_UNKNOWN), "unknown");
    /* issue 12 group 1: gadgets reached through helpers are dangerous, and
     * the honest classes next to them are not (tests/scan/ has the files) */
    CHECK_EQ_INT(ckpt_global_verdict("_osx_support", "_read_output", NULL), CKPT_VERDICT_DANGEROUS);
    CHECK_EQ_INT(ckpt_global_verdict("logging", "FileHandler", NULL), CKPT_VERDICT_DANGEROUS);
    CHECK_EQ_INT(ckpt_global_verdict("torch.utils.bottleneck.__main__", "run_cprofile", NULL),
                 CKPT_VERDICT_DANGEROUS);
    CHECK_EQ_INT(ckpt_global_verdict("pathlib", "Path.write_text", NULL), CKPT_VERDICT_DANGEROUS);
    CHECK_EQ_INT(ckpt_global_verdict("pathlib", "PosixPath", NULL), CKPT_VERDICT_UNKNOWN);
    CHECK_EQ_INT(ckpt_global_verdict("logging", "Logger", NULL), CKPT_VERDICT_UNKNOWN);
    CHECK_EQ_INT(ckpt_global_verdict("numpy", "memmap", NULL), CKPT_VERDICT_UNKNOWN);
    CHECK_EQ_INT(ckpt_global_verdict("numpy.core.multiarray", "_reconstruct", NULL),
                 CKPT_VERDICT_UNKNOWN);
    CHECK_EQ_INT(ckpt_global_verdict("collections", "defaultdict", NULL), CKPT_VERDICT_UNKNOWN);
    CHECK_EQ_INT(ckpt_global_verdict("datetime", "datetime", NULL), CKPT_VERDICT_UNKNOWN);
    CHECK_EQ_INT(ckpt_global_verdict("torch.distributed.tensor", "DTensor", NULL),
                 CKPT_VERDICT_UNKNOWN);
    CHECK_EQ_INT(ckpt_global_verdict("torch.distributed.checkpoint.metadata", "Metadata", NULL),
                 CKPT_VERDICT_UNKNOWN);

    SECTION("an honest checkpoint");
    r = ckpt_scan_path(argv[1], NULL, 0, &err);
    CHECK(r != NULL);
    CHECK(ckpt_scan_error(r) == NULL);
    CHECK_EQ_INT(ckpt_scan_format(r), CKPT_FORMAT_ZIP);
    CHECK_EQ_U64(ckpt_scan_count(r), 4);
    CHECK_EQ_U64(ckpt_scan_tally(r, CKPT_VERDICT_SAFE), 4);
    CHECK_EQ_INT(ckpt_scan_verdict(r), CKPT_VERDICT_SAFE);
    CHECK(!ckpt_scan_flagged(r));
    CHECK_STR(ckpt_scan_at(r, 1)->module, "torch._utils");
    CHECK_STR(ckpt_scan_at(r, 1)->name, "_rebuild_tensor_v2");
    CHECK_STR(ckpt_scan_at(r, 1)->pickle, "data.pkl");
    CHECK(ckpt_scan_at(r, 1)->called);
    CHECK(ckpt_scan_at(r, 4) == NULL);
    ckpt_scan_free(r);

    SECTION("a dangerous call");
    n = call_pickle(buf, "posix", "system", "echo pwned");
    r = ckpt_scan_memory(buf, n, NULL, 0, &err);
    CHECK(r != NULL);
    CHECK_EQ_U64(ckpt_scan_count(r), 1);
    CHECK_EQ_INT(ckpt_scan_at(r, 0)->verdict, CKPT_VERDICT_DANGEROUS);
    CHECK_EQ_INT(ckpt_scan_at(r, 0)->offset, 2);
    CHECK(ckpt_scan_at(r, 0)->called);
    CHECK_EQ_U64(ckpt_scan_called_dangerous(r), 1);
    CHECK(ckpt_scan_flagged(r));
    CHECK_EQ_INT(ckpt_scan_format(r), CKPT_FORMAT_PICKLE);
    ckpt_scan_free(r);

    SECTION("a wrapper in a pickle that names a dangerous callable");
    {
        /* functools.partial(os.system, ...) as two GLOBALs in one pickle */
        static const unsigned char p[] = "\x80\x02"
                                         "cfunctools\npartial\n"
                                         "cos\nsystem\n"
                                         "\x85"
                                         "R.";
        r = ckpt_scan_memory(p, sizeof p - 1, NULL, 0, &err);
        CHECK(r != NULL);
        CHECK_EQ_U64(ckpt_scan_count(r), 2);
        CHECK_EQ_INT(ckpt_scan_at(r, 0)->verdict, CKPT_VERDICT_DANGEROUS);
        CHECK_CONTAINS(ckpt_scan_at(r, 0)->why, "wraps");
        ckpt_scan_free(r);
    }

    SECTION("strict");
    n = call_pickle(buf, "argparse", "Namespace", "x");
    r = ckpt_scan_memory(buf, n, NULL, 0, &err);
    CHECK(r && !ckpt_scan_flagged(r));
    CHECK_EQ_INT(ckpt_scan_verdict(r), CKPT_VERDICT_UNKNOWN);
    ckpt_scan_free(r);
    r = ckpt_scan_memory(buf, n, NULL, CKPT_SCAN_STRICT, &err);
    CHECK(r && ckpt_scan_flagged(r));
    CHECK_EQ_U64(ckpt_scan_flags(r), CKPT_SCAN_STRICT);
    CHECK_CONTAINS(ckpt_scan_at(r, 0)->why, "allowlist");
    ckpt_scan_free(r);

    SECTION("a pickle that breaks after its global");
    n = call_pickle(buf, "os", "system", "rm -rf /");
    r = ckpt_scan_memory(buf, n - 2, NULL, 0, &err); /* no REDUCE, no STOP */
    CHECK(r != NULL);
    CHECK(ckpt_scan_error(r) != NULL);
    CHECK(ckpt_scan_error(r) && ckpt_scan_error(r)->message[0] != '\0');
    CHECK_EQ_INT(ckpt_scan_format(r), -1);
    CHECK_EQ_U64(ckpt_scan_count(r), 1);
    CHECK(ckpt_scan_flagged(r));
    ckpt_scan_free(r);

    SECTION("a file not read to its end is never safe");
    /* a safe global, then the pickle breaks: UNKNOWN, not SAFE, not flagged */
    n = call_pickle(buf, "collections", "OrderedDict", "x");
    r = ckpt_scan_memory(buf, n - 2, NULL, 0, &err);
    CHECK(r != NULL);
    CHECK(ckpt_scan_error(r) != NULL);
    CHECK_EQ_U64(ckpt_scan_tally(r, CKPT_VERDICT_SAFE), 1);
    CHECK_EQ_INT(ckpt_scan_verdict(r), CKPT_VERDICT_UNKNOWN);
    CHECK(!ckpt_scan_flagged(r));
    ckpt_scan_free(r);
    /* nothing met at all: a truncated pickle, no bytes */
    r = ckpt_scan_memory("\x80\x02(", 3, NULL, 0, &err);
    CHECK(r && ckpt_scan_error(r) != NULL && ckpt_scan_count(r) == 0);
    CHECK_EQ_INT(ckpt_scan_verdict(r), CKPT_VERDICT_UNKNOWN);
    ckpt_scan_free(r);
    r = ckpt_scan_memory("", 0, NULL, 0, &err);
    CHECK(r && ckpt_scan_error(r) != NULL);
    CHECK_EQ_INT(ckpt_scan_verdict(r), CKPT_VERDICT_UNKNOWN);
    ckpt_scan_free(r);
    /* dangerous stays dangerous */
    n = call_pickle(buf, "os", "system", "true");
    r = ckpt_scan_memory(buf, n - 2, NULL, 0, &err);
    CHECK(r && ckpt_scan_error(r) != NULL);
    CHECK_EQ_INT(ckpt_scan_verdict(r), CKPT_VERDICT_DANGEROUS);
    ckpt_scan_free(r);

    SECTION("a pickle kept as bytes that nothing unpickles");
    {
        unsigned char p[128];
        ckpt_options o;
        loaders_seen s;
        /* pickle.loads(b): loaded, os.system counted */
        n = wrap_evil(p, "cpickle\nloads\n", "\x85R.");
        memset(&s, 0, sizeof s);
        ckpt_options_init(&o);
        o.scan_all_pickles = 1;
        o.on_global = record_loader;
        o.on_global_ctx = &s;
        {
            ckpt_file *f = ckpt_open_memory(p, n, &o, &err);
            CHECK(f != NULL);
            if (f) ckpt_close(f);
        }
        CHECK_EQ_U64(s.n, 2);
        CHECK_STR(s.name[0], "pickle.loads");
        CHECK(s.null_loader[0]); /* the file's own pickle */
        CHECK_STR(s.name[1], "os.system");
        CHECK(!s.null_loader[1]);
        CHECK_STR(s.loader[1], "pickle.loads");
        r = ckpt_scan_memory(p, n, NULL, 0, &err);
        CHECK(r && ckpt_scan_count(r) == 2 && !ckpt_scan_at(r, 1)->unloaded);
        CHECK(r && ckpt_scan_flagged(r));
        CHECK_EQ_U64(ckpt_scan_tally(r, CKPT_VERDICT_DANGEROUS), 2);
        CHECK_EQ_U64(ckpt_scan_unloaded(r, CKPT_VERDICT_DANGEROUS), 0);
        ckpt_scan_free(r);
        /* {'b': bytes}: nothing loads it; listed, not counted, noted */
        n = wrap_evil(p, "}\x8c\x01" "b", "s.");
        memset(&s, 0, sizeof s);
        {
            ckpt_file *f = ckpt_open_memory(p, n, &o, &err);
            CHECK(f != NULL);
            if (f) ckpt_close(f);
        }
        CHECK_EQ_U64(s.n, 1);
        CHECK_STR(s.name[0], "os.system");
        CHECK(!s.null_loader[0]);
        CHECK_STR(s.loader[0], "");
        r = ckpt_scan_memory(p, n, NULL, CKPT_SCAN_STRICT, &err);
        CHECK(r != NULL && ckpt_scan_error(r) == NULL);
        CHECK(r && ckpt_scan_count(r) == 1 && ckpt_scan_at(r, 0)->unloaded);
        CHECK(r && ckpt_scan_at(r, 0)->verdict == CKPT_VERDICT_DANGEROUS);
        CHECK(!ckpt_scan_flagged(r));
        CHECK_EQ_INT(ckpt_scan_verdict(r), CKPT_VERDICT_SAFE);
        CHECK_EQ_U64(ckpt_scan_tally(r, CKPT_VERDICT_DANGEROUS), 0);
        CHECK_EQ_U64(ckpt_scan_called_dangerous(r), 0);
        CHECK_EQ_U64(ckpt_scan_unloaded(r, CKPT_VERDICT_DANGEROUS), 1);
        {
            int noted = 0;
            for (size_t i = 0; i < ckpt_scan_note_count(r); i++)
                noted |= strstr(ckpt_scan_note_at(r, i), "nothing in the file hands to a loader") != NULL;
            CHECK(noted);
        }
        ckpt_scan_free(r);
    }

    SECTION("numpy.memmap by its mode");
    {
        /* memmap('p', 'uint8', MODE) as REDUCE: w+ and the default write */
        static const struct {
            const char *bytes;
            size_t n;
            int verdict;
        } cases[] = {
#define MM(lit, v) {lit, sizeof(lit) - 1, v}
            MM("\x80\x02"
               "cnumpy\nmemmap\n(\x8c\x01"
               "p\x8c\x05uint8\x8c\x02w+tR.",
               CKPT_VERDICT_DANGEROUS),
            MM("\x80\x02"
               "cnumpy\nmemmap\n(\x8c\x01"
               "ptR.",
               CKPT_VERDICT_DANGEROUS), /* no mode: 'r+' */
            MM("\x80\x02"
               "cnumpy\nmemmap\n(\x8c\x01"
               "p\x8c\x05uint8\x8c\x01rtR.",
               CKPT_VERDICT_UNKNOWN),
            MM("\x80\x02"
               "cnumpy\nmemmap\n(\x8c\x01"
               "p\x8c\x05uint8\x8c\x0b"
               "copyonwritetR.",
               CKPT_VERDICT_UNKNOWN),
            /* a mode that is no constant string: not known to be read-only */
            MM("\x80\x02"
               "cnumpy\nmemmap\n(\x8c\x01"
               "p\x8c\x05uint8K\x01tR.",
               CKPT_VERDICT_DANGEROUS),
            /* the one GLOBAL called twice, 'r' then 'w+': the arguments of
             * both are not one tuple, so the mode is not known */
            MM("\x80\x02"
               "cnumpy\nmemmap\nq\x00(\x8c\x01"
               "p\x8c\x05uint8\x8c\x01rtRh\x00(\x8c\x01"
               "p\x8c\x05uint8\x8c\x02w+tR\x86.",
               CKPT_VERDICT_DANGEROUS),
            /* NEWOBJ of numpy.core.memmap.memmap: cls.__new__(cls, *args) */
            MM("\x80\x02"
               "cnumpy.core.memmap\nmemmap\n\x8c\x01"
               "p\x8c\x05uint8\x8c\x02w+\x87\x81.",
               CKPT_VERDICT_DANGEROUS),
            /* named, not called: what pickle.dumps(memmap) writes */
            MM("\x80\x02"
               "cnumpy.core.multiarray\n_reconstruct\ncnumpy\nmemmap\nK\x00\x85"
               "C\x01"
               "b\x87R.",
               CKPT_VERDICT_UNKNOWN),
#undef MM
        };
        for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
            r = ckpt_scan_memory(cases[k].bytes, cases[k].n, NULL, 0, &err);
            CHECK(r != NULL && ckpt_scan_error(r) == NULL);
            if (!r) continue;
            for (size_t i = 0; i < ckpt_scan_count(r); i++)
                if (strstr(ckpt_scan_at(r, i)->module, "numpy") &&
                    strcmp(ckpt_scan_at(r, i)->name, "memmap") == 0 &&
                    ckpt_scan_at(r, i)->verdict != cases[k].verdict) {
                    fprintf(stderr, "memmap case %zu: verdict %d\n", k, ckpt_scan_at(r, i)->verdict);
                    CHECK(0);
                }
            CHECK_EQ_INT(ckpt_scan_flagged(r), cases[k].verdict == CKPT_VERDICT_DANGEROUS);
            ckpt_scan_free(r);
        }
        /* the arguments reach on_global only for scanners */
        ckpt_options o;
        ckpt_options_init(&o);
        loaders_seen s;
        memset(&s, 0, sizeof s);
        o.on_global = record_loader;
        o.on_global_ctx = &s;
        ckpt_file *f = ckpt_open_memory(cases[0].bytes, cases[0].n, &o, &err);
        CHECK(f != NULL);
        if (f) {
            CHECK(ckpt_global_count(f) == 1 && ckpt_global_at(f, 0)->args == NULL);
            ckpt_close(f);
        }
    }

    SECTION("hostile acts are attacks, not only read errors");
    /* BUILD on os.environ: PROTO 2, GLOBAL (2..14), EMPTY_DICT, BUILD at 15 */
    check_act("\x80\x02"
              "cos\nenviron\n}b.",
              17, "BUILD on os.environ", 15, "BUILD on a global");
    /* SETITEM on copyreg._extension_registry: GLOBAL at 2, K 1, K 2, SETITEM at 35 */
    check_act("\x80\x02"
              "ccopyreg\n_extension_registry\nK\x01K\x02s.",
              37, "SETITEM on copyreg._extension_registry", 35, "SETITEM on a global");
    /* SETITEMS on a global: MARK K 1 K 2 SETITEMS at 31 */
    check_act("\x80\x02"
              "ccopyreg\ndispatch_table\n(K\x01K\x02u.",
              33, "SETITEM on copyreg.dispatch_table", 31, "SETITEM on a global");
    check_act("\x80\x02\x82\x05.", 5, "EXT1 code 5", 2, "extension registry");
    check_act("\x80\x02\x83\x34\x12.", 6, "EXT2 code 4660", 2, "extension registry");
    check_act("\x80\x02\x84\xff\xff\xff\x7f.", 8, "EXT4 code 2147483647", 2, "extension registry");

    SECTION("every pickle of a plain pickle file, as repeated pickle.load would read");
    {
        /* an honest empty dict, then a pickle that calls os.system */
        unsigned char two[128];
        memcpy(two, "\x80\x02}q\x00.", 6);
        n = 6 + call_pickle(two + 6, "os", "system", "true");
        r = ckpt_scan_memory(two, n, NULL, 0, &err);
        CHECK(r != NULL);
        CHECK(ckpt_scan_error(r) == NULL);
        CHECK(ckpt_scan_flagged(r));
        CHECK_EQ_U64(ckpt_scan_count(r), 1);
        if (ckpt_scan_count(r) == 1) {
            CHECK_STR(ckpt_scan_at(r, 0)->pickle, "pickle#2");
            CHECK_STR(ckpt_scan_at(r, 0)->module, "os");
            CHECK_EQ_U64((uint64_t)ckpt_scan_at(r, 0)->offset, 8); /* in the file */
            CHECK(ckpt_scan_at(r, 0)->called);
        }
        ckpt_scan_free(r);
        /* a third pickle after an honest second one */
        memcpy(two + 6, "\x80\x02}q\x00.", 6);
        n = 12 + call_pickle(two + 12, "posix", "system", "true");
        r = ckpt_scan_memory(two, n, NULL, 0, &err);
        CHECK(r != NULL);
        CHECK(ckpt_scan_flagged(r));
        CHECK(ckpt_scan_count(r) == 1 && strcmp(ckpt_scan_at(r, 0)->pickle, "pickle#3") == 0);
        ckpt_scan_free(r);
        /* bytes after STOP that are no pickle: a note, no error, no flag */
        memcpy(two + 6, "\x00junk", 5);
        r = ckpt_scan_memory(two, 11, NULL, 0, &err);
        CHECK(r != NULL);
        CHECK(ckpt_scan_error(r) == NULL);
        CHECK(!ckpt_scan_flagged(r));
        CHECK_EQ_U64(ckpt_scan_count(r), 0);
        CHECK_EQ_U64(ckpt_scan_note_count(r), 2);
        CHECK_CONTAINS(ckpt_scan_note_at(r, 1), "pickle#2 at byte 6 does not parse");
        ckpt_scan_free(r);
        /* the reader alone still reads only the first pickle */
        n = 6 + call_pickle(two + 6, "os", "system", "true");
        {
            ckpt_file *f = ckpt_open_memory(two, n, NULL, &err);
            CHECK(f != NULL);
            if (f) {
                CHECK_EQ_U64(ckpt_global_count(f), 0);
                ckpt_close(f);
            }
        }
    }

    SECTION("ZIP records the load does not read: *.pkl, PROTO bytes, a repeated name");
    {
        zipb *z = &zip_scratch;
        unsigned char p1[128], p2[128], p3[128];
        size_t n1 = call_pickle(p1, "os", "system", "true");
        size_t n2 = call_pickle(p2, "builtins", "eval", "1");
        size_t n3 = call_pickle(p3, "posix", "system", "true");
        const ckpt_scan_item *it;
        zb_init(z);
        zb_add(z, "archive/data.pkl", "\x80\x02}q\x00.", 6);
        zb_add(z, "archive/version", "3\n", 2);
        zb_add_ex(z, "archive/extra.pkl", p1, n1, 1, 0); /* deflated */
        zb_add(z, "archive/blob", p2, n2);
        zb_add(z, "archive/data.pkl", p3, n3); /* what Python's zipfile would read */
        zb_finish(z);
        r = ckpt_scan_memory(z->out.p, z->out.n, NULL, 0, &err);
        CHECK(r != NULL);
        CHECK(ckpt_scan_error(r) == NULL);
        CHECK(ckpt_scan_flagged(r));
        CHECK_EQ_U64(ckpt_scan_count(r), 3);
        it = item_in(r, "archive/extra.pkl (record 3)");
        CHECK(it && strcmp(it->module, "os") == 0 && it->called);
        it = item_in(r, "archive/blob (record 4)");
        CHECK(it && strcmp(it->name, "eval") == 0);
        CHECK(it && it->offset == (int64_t)(zb_find(z, "archive/blob")->data_off + 2));
        it = item_in(r, "archive/data.pkl (record 5)");
        CHECK(it && strcmp(it->module, "posix") == 0);
        ckpt_scan_free(r);
        bb_free(&z->out);
        /* a data.pkl that breaks does not hide the other records */
        zb_init(z);
        zb_add(z, "archive/data.pkl", "\x80\x02}\xff", 4);
        zb_add(z, "archive/extra.pkl", p1, n1);
        zb_finish(z);
        r = ckpt_scan_memory(z->out.p, z->out.n, NULL, 0, &err);
        CHECK(r != NULL);
        CHECK(ckpt_scan_error(r) != NULL);
        CHECK(ckpt_scan_flagged(r));
        CHECK(item_in(r, "archive/extra.pkl (record 2)") != NULL);
        ckpt_scan_free(r);
        bb_free(&z->out);
        zb_init(z);
        zb_add(z, "archive/data.pkl", "\x80\x02}q\x00.", 6);
        zb_add(z, "archive/data.pkl", p3, n3);
        zb_finish(z);
        /* the reader alone still refuses the repeated name */
        CHECK(ckpt_open_memory(z->out.p, z->out.n, NULL, &err) == NULL);
        CHECK_CONTAINS(err.message, "appears twice");
        bb_free(&z->out);
    }

    SECTION("limits from the options apply");
    {
        ckpt_options o;
        ckpt_options_init(&o);
        o.max_pickle_bytes = 8;
        n = call_pickle(buf, "os", "system", "true");
        r = ckpt_scan_memory(buf, n, &o, 0, &err);
        CHECK(r != NULL);
        CHECK(ckpt_scan_error(r) != NULL);
        CHECK_EQ_INT(ckpt_scan_error(r) ? ckpt_scan_error(r)->code : 0, CKPT_E_LIMIT);
        ckpt_scan_free(r);
    }
    ckpt_scan_free(NULL);
    return ut_summary();
}
