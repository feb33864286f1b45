/*
 * test_scan.c - include/ckpt_scan.h through the public API only: verdicts
 * of single globals, and whole-file scans of a real checkpoint and of
 * pickles assembled here byte by byte (never unpickled by anything).
 *
 *     test_scan SAMPLE.pt
 */
#include "ckpt_scan.h"

#include "../unit/harness.h"

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
    CHECK_EQ_INT(ckpt_global_verdict("_osx_support", "_read_output", NULL),
                 CKPT_VERDICT_DANGEROUS);
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
