/*
 * cmd_scan.c - `ckpt scan`: every global a checkpoint's pickles reference,
 * with a verdict for each.
 *
 * The library runs every pickle of the file (data.pkl, each pickle of a
 * legacy stream, each TAR member, TorchScript's data.pkl and constants.pkl)
 * without executing anything and reports each GLOBAL / STACK_GLOBAL as the
 * machine resolved it (through the memo, Python 2 names renamed as Python's
 * unpickler renames them), and the
 * library's scan (include/ckpt_scan.h) classifies the names; this file only
 * prints the report:
 *
 *   safe       on the list torch.load(weights_only=True) accepts by default
 *              (torch/_weights_only_unpickler.py, _get_allowed_globals)
 *   dangerous  can run code, touch files or the network, or load another
 *              pickle when torch.load(weights_only=False) unpickles the file
 *   unknown    anything else: inert here, but torch.load would import and
 *              call it (user classes, nn modules of full-model saves, numpy)
 */
#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L
#endif

#include "cli.h"
#include "ckpt_scan.h"

#include <stdlib.h>
#include <string.h>

#define SCAN_DANGEROUS 3 /* exit status: something can run code */

static const char usage[] =
    "Usage: ckpt scan [--strict] [--json] FILE...\n"
    "List every global (class or function) the file's pickles reference,\n"
    "with a verdict, without running anything from the file.  Every pickle\n"
    "of the container is read: data.pkl, each pickle of a legacy stream,\n"
    "each TAR member, TorchScript's data.pkl and constants.pkl, and every\n"
    "pickle after the first STOP of a plain pickle file (PICKLE pickle#2,\n"
    "pickle#3, ...: loaders such as joblib call load again), and in a ZIP\n"
    "the records a load may read besides data.pkl: any *.pkl, any record\n"
    "beginning like a pickle (PROTO, a protocol 0/1 GLOBAL; TorchScript's\n"
    ".debug_pkl too), a record whose name repeats (PICKLE 'NAME (record\n"
    "N)'); and every pickle after the STOP of a ZIP record (data.pkl#2), of\n"
    "a TAR member (tar:pickle#2) or after a legacy stream's last storage\n"
    "(legacy:trailing#1).  A bytes value that begins with PROTO, or that a\n"
    "loader is called with (pickle.loads, torch.load(io.BytesIO(...)),\n"
    "torch.storage._load_from_bytes, joblib, numpy.load, ...), is opened as\n"
    "a file of its own and scanned, 8 deep at most: PICKLE\n"
    "'data.pkl>bytes@N' (N: offset of the opcode that made it; OFFSET is\n"
    "then within those bytes).  Its globals count only when the file hands\n"
    "the bytes to a loader: a pickle kept as a bytes value that nothing\n"
    "unpickles is what a later, separate load would run, not a load of\n"
    "this file, so its globals are listed ('[in bytes nothing here\n"
    "unpickles: not counted]'; --json \"unloaded\": true), a note names the\n"
    "pickle, the summary and --json count them apart, and they make neither\n"
    "exit 3 nor --strict's.  A name is resolved as Python's unpickler\n"
    "resolves it (GLOBAL, STACK_GLOBAL through the memo); while a pickle's\n"
    "protocol is below 3 (no PROTO opcode yet: 0; else the last PROTO's)\n"
    "a Python 2 name is renamed through CPython's _compat_pickle tables,\n"
    "as the unpickler does (__builtin__.eval is builtins.eval, anydbm.open\n"
    "is dbm.open, __builtin__.intern is sys.intern); at protocol 3 and up\n"
    "it is shown as written (Python 3 cannot import it).\n"
    "An archive that is not a torch.save file (a ZIP or TAR of pickles,\n"
    "model.bin zipped by hand, .tar.gz/.tar.xz/.tar.bz2/.tar.zst, .pkl.gz,\n"
    "7z) is read through libarchive: every member that is a pickle, a\n"
    "checkpoint or another archive is scanned as a file (PICKLE\n"
    "'MEMBER>data.pkl'); a member ckpt cannot read or open makes the exit\n"
    "status 1 with the members named (also when ckpt was built without\n"
    "libarchive or cannot load it: such an archive is never reported\n"
    "clean; libarchive is loaded only then, by no other command).  A\n"
    "numpy .npy file (or .npz member) of dtype object holds a pickle\n"
    "after its header: it is scanned (PICKLE npy:pickle).  A PyTorch\n"
    "Mobile flatbuffer (.ff, .ptl) holds no pickle: no global is listed,\n"
    "and a note says that its TorchScript bytecode is not scanned.\n"
    "\n"
    "Verdicts:\n"
    "  safe       allowed by torch.load(weights_only=True): tensor rebuild\n"
    "             functions, storage and tensor classes, dtypes, torch.Size,\n"
    "             torch.device, OrderedDict, set, bytes via _codecs.encode, ...\n"
    "  unknown    inert here, but not on that list: user classes, nn modules\n"
    "             of full-model saves, argparse.Namespace, numpy objects, ...\n"
    "  dangerous  can run code when unpickled by torch.load(weights_only=False):\n"
    "             os, subprocess, sys, builtins eval/exec/getattr/open/...,\n"
    "             importlib, pickle/marshal loads, socket, ctypes, ...\n"
    "numpy.memmap is judged by its call: with mode 'w+' or 'r+' (the\n"
    "default), or a mode that is not a constant string, or wrapped in a\n"
    "pickle with functools.partial, it writes the file: dangerous; with\n"
    "mode 'r' or 'c' it only maps the file read-only: unknown; named but\n"
    "not called (what pickling a memmap writes) it is unknown.\n"
    "A global that the pickle calls (REDUCE, NEWOBJ, INST, OBJ) is marked\n"
    "'called'; the summary counts the called unknown and dangerous ones.\n"
    "Acts the reader refuses are attacks, listed as dangerous\n"
    "globals of the pseudo-module <pickle>: BUILD or SETITEM(S) on a class\n"
    "or module (\"<pickle>.BUILD on os.environ\"), and EXT1/EXT2/EXT4\n"
    "(\"<pickle>.EXT1 code 5\": copyreg's extension registry).\n"
    "Oddities of the pickles (a second PROTO, data after STOP, a\n"
    "pickle inside a pickle) are listed as notes.  A file that breaks part way\n"
    "still has every global met up to that point listed, then the error on\n"
    "stderr; a file where no global was met before the error prints only the\n"
    "error (with --json, the object is always printed).\n"
    "\n"
    "Output: a table (VERDICT, GLOBAL, PICKLE, OFFSET = byte offset of the\n"
    "opcode in the file, or in the inflated record for a deflated ZIP\n"
    "record, CALLED, WHY) and a summary line.  Names from the file are\n"
    "escaped: \\\\, \\n, \\xHH for control characters and bytes that are not\n"
    "UTF-8, \\uXXXX for C1 controls, bidi and invisible characters.\n"
    "Several files (ckpt scan *.bin): each under a '==> FILE <==' header;\n"
    "with --json one object per line (each has \"file\"); every file is\n"
    "scanned and the exit status is the worst (3 over 1 over 0).\n"
    "\n"
    "Options:\n"
    "  --strict    treat unknown globals as dangerous (exit 3)\n"
    "  --json      one JSON object instead: {\"file\", \"format\", \"complete\",\n"
    "              \"error\", \"strict\", \"verdict\", \"counts\": {\"safe\",\n"
    "              \"unknown\", \"dangerous\", \"called_dangerous\",\n"
    "              \"called_unknown\", \"unloaded\", \"unloaded_dangerous\"},\n"
    "              \"globals\": [{\"module\", \"name\", \"global\", \"pickle\",\n"
    "              \"offset\", \"called\", \"unloaded\", \"verdict\", \"why\"}],\n"
    "              \"notes\": [...]}\n"
    "  -h, --help  show this help\n"
    "\n"
    "A file that could not be read to its end is never \"safe\": its --json\n"
    "\"verdict\" is \"unknown\" (\"complete\": false) unless something\n"
    "dangerous was met.\n"
    "\n"
    "Exit status: 0 nothing dangerous; 3 something dangerous (or, with\n"
    "--strict, unknown), also when the report could not then be written\n"
    "(the write error on stderr); 1 the file could not be read to the end\n"
    "and nothing dangerous was met before the error, or the report could\n"
    "not be written; 2 usage error.\n";

/* ------------------------------------------------------------------------ */
/* Output                                                                     */
/* ------------------------------------------------------------------------ */

/* Text shown in the table, escaped (cli_escape), so a row stays one line
 * and shows what the file names, whatever it names. */
static size_t shown_width(const char *s)
{
    return cli_term_width(s);
}

static void put_shown(const char *s)
{
    cli_term_put(stdout, s);
}

static void pad(size_t n)
{
    while (n-- > 0) putchar(' ');
}

static size_t global_width(const ckpt_scan_item *it)
{
    return shown_width(it->module) + 1 + shown_width(it->name);
}

static void print_table(const ckpt_scan_report *s)
{
    size_t i, wv = 7, wg = 6, wp = 6, wo = 6, n = ckpt_scan_count(s);
    char num[32];
    for (i = 0; i < n; i++) {
        const ckpt_scan_item *it = ckpt_scan_at(s, i);
        size_t w;
        if ((w = strlen(ckpt_verdict_name(it->verdict))) > wv) wv = w;
        if ((w = global_width(it)) > wg) wg = w;
        if ((w = shown_width(it->pickle)) > wp) wp = w;
        if ((w = (size_t)snprintf(num, sizeof num, "%lld", (long long)it->offset)) > wo) wo = w;
    }
    printf("%-*s  %-*s  %-*s  %*s  %-6s  %s\n", (int)wv, "VERDICT", (int)wg, "GLOBAL", (int)wp,
           "PICKLE", (int)wo, "OFFSET", "CALLED", "WHY");
    for (i = 0; i < n; i++) {
        const ckpt_scan_item *it = ckpt_scan_at(s, i);
        printf("%-*s  ", (int)wv, ckpt_verdict_name(it->verdict));
        put_shown(it->module);
        putchar('.');
        put_shown(it->name);
        pad(wg - global_width(it) + 2);
        put_shown(it->pickle);
        pad(wp - shown_width(it->pickle) + 2);
        printf("%*lld  ", (int)wo, (long long)it->offset);
        if (it->verdict != CKPT_VERDICT_SAFE && it->why[0])
            printf("%-6s  %s", it->called ? "yes" : "no", it->why);
        else if (it->unloaded)
            printf("%-6s ", it->called ? "yes" : "no");
        else
            fputs(it->called ? "yes" : "no", stdout);
        if (it->unloaded) fputs(" [in bytes nothing here unpickles: not counted]", stdout);
        putchar('\n');
        if ((i & 4095) == 0 && cli_stdout_failed()) return;
    }
}

/* An unknown global the pickle calls is code torch.load would run: the
 * summary and --json say how many, so the default output shows what
 * --strict refuses. */
static size_t called_unknown(const ckpt_scan_report *s)
{
    size_t i, k = 0, n = ckpt_scan_count(s);
    for (i = 0; i < n; i++) {
        const ckpt_scan_item *it = ckpt_scan_at(s, i);
        if (it && it->verdict == CKPT_VERDICT_UNKNOWN && it->called && !it->unloaded) k++;
    }
    return k;
}

static void print_summary(const char *path, const ckpt_scan_report *s)
{
    size_t n = ckpt_scan_count(s);
    size_t safe = ckpt_scan_tally(s, CKPT_VERDICT_SAFE);
    size_t unknown = ckpt_scan_tally(s, CKPT_VERDICT_UNKNOWN);
    size_t dangerous = ckpt_scan_tally(s, CKPT_VERDICT_DANGEROUS);
    size_t unknown_called = called_unknown(s);
    size_t unloaded = ckpt_scan_unloaded(s, CKPT_VERDICT_SAFE) +
                      ckpt_scan_unloaded(s, CKPT_VERDICT_UNKNOWN) +
                      ckpt_scan_unloaded(s, CKPT_VERDICT_DANGEROUS);
    size_t unloaded_dangerous = ckpt_scan_unloaded(s, CKPT_VERDICT_DANGEROUS);
    int complete = ckpt_scan_error(s) == NULL;
    fputs("summary: ", stdout);
    put_shown(path);
    printf(": %zu global%s%s: %zu safe, %zu unknown", n, n == 1 ? "" : "s",
           complete ? "" : " met before the error", safe, unknown);
    if (unknown) printf(" (%zu called)", unknown_called);
    printf(", %zu dangerous", dangerous);
    if (unloaded)
        printf("; %zu more in pickles kept as bytes that nothing here unpickles (%zu dangerous)",
               unloaded, unloaded_dangerous);
    if (dangerous)
        printf(" (%zu called) -- DANGEROUS: torch.load(weights_only=False) of "
               "this file can run code",
               ckpt_scan_called_dangerous(s));
    else if ((ckpt_scan_flags(s) & CKPT_SCAN_STRICT) && unknown)
        fputs(" -- unknown globals refused (--strict)", stdout);
    else if (unknown)
        fputs(" -- nothing dangerous; unknown globals are not on torch's "
              "weights_only list",
              stdout);
    else
        fputs(" -- nothing dangerous", stdout);
    if (!dangerous && unloaded_dangerous)
        fputs("; a pickle kept as bytes names something dangerous: a later load of those "
              "bytes would run code, loading this file does not",
              stdout);
    if (!complete) fputs("; the rest of the file could not be read", stdout);
    putchar('\n');
}

static void json_str(const char *s)
{
    cli_json_string(stdout, s, strlen(s));
}

static void print_json(const char *path, const ckpt_scan_report *s)
{
    size_t i, n = ckpt_scan_count(s), nn = ckpt_scan_note_count(s);
    const ckpt_error *err = ckpt_scan_error(s);
    int format = ckpt_scan_format(s);
    fputs("{\"file\": ", stdout);
    json_str(path);
    fputs(", \"format\": ", stdout);
    if (format >= 0)
        json_str(ckpt_format_name((ckpt_format)format));
    else
        fputs("null", stdout);
    printf(", \"complete\": %s, \"error\": ", err ? "false" : "true");
    if (err) {
        fputs("{\"message\": ", stdout);
        json_str(err->message[0] ? err->message : ckpt_code_name(err->code));
        printf(", \"code\": \"%s\", \"offset\": ", ckpt_code_name(err->code));
        if (err->offset >= 0)
            printf("%lld}", (long long)err->offset);
        else
            fputs("null}", stdout);
    } else {
        fputs("null", stdout);
    }
    printf(", \"strict\": %s, \"verdict\": \"%s\", \"counts\": {\"safe\": %zu, "
           "\"unknown\": %zu, \"dangerous\": %zu, \"called_dangerous\": %zu, "
           "\"called_unknown\": %zu, \"unloaded\": %zu, \"unloaded_dangerous\": %zu}, "
           "\"globals\": [",
           (ckpt_scan_flags(s) & CKPT_SCAN_STRICT) ? "true" : "false",
           ckpt_verdict_name(ckpt_scan_verdict(s)), ckpt_scan_tally(s, CKPT_VERDICT_SAFE),
           ckpt_scan_tally(s, CKPT_VERDICT_UNKNOWN), ckpt_scan_tally(s, CKPT_VERDICT_DANGEROUS),
           ckpt_scan_called_dangerous(s), called_unknown(s),
           ckpt_scan_unloaded(s, CKPT_VERDICT_SAFE) + ckpt_scan_unloaded(s, CKPT_VERDICT_UNKNOWN) +
               ckpt_scan_unloaded(s, CKPT_VERDICT_DANGEROUS),
           ckpt_scan_unloaded(s, CKPT_VERDICT_DANGEROUS));
    for (i = 0; i < n; i++) {
        const ckpt_scan_item *it = ckpt_scan_at(s, i);
        fputs(i ? ", {\"module\": " : "{\"module\": ", stdout);
        json_str(it->module);
        fputs(", \"name\": ", stdout);
        json_str(it->name);
        fputs(", \"global\": ", stdout);
        {
            size_t a = strlen(it->module), b = strlen(it->name);
            char *full = malloc(a + b + 2);
            if (full) {
                memcpy(full, it->module, a);
                full[a] = '.';
                memcpy(full + a + 1, it->name, b + 1);
                json_str(full);
                free(full);
            } else {
                fputs("null", stdout);
            }
        }
        fputs(", \"pickle\": ", stdout);
        json_str(it->pickle);
        printf(", \"offset\": %lld, \"called\": %s, \"unloaded\": %s, \"verdict\": \"%s\", "
               "\"why\": ",
               (long long)it->offset, it->called ? "true" : "false",
               it->unloaded ? "true" : "false", ckpt_verdict_name(it->verdict));
        json_str(it->why);
        putchar('}');
        if ((i & 4095) == 0 && cli_stdout_failed()) return;
    }
    fputs("], \"notes\": [", stdout);
    for (i = 0; i < nn; i++) {
        if (i) fputs(", ", stdout);
        json_str(ckpt_scan_note_at(s, i));
    }
    fputs("]}\n", stdout);
}

typedef struct scan_opts {
    int strict, json;
} scan_opts;

static int scan_one(const char *path, void *ctx)
{
    const scan_opts *o = ctx;
    ckpt_options opt;
    ckpt_error err;
    ckpt_reader rd;
    ckpt_scan_report *s;
    unsigned flags = o->strict ? CKPT_SCAN_STRICT : 0u;
    size_t i, nn;
    int r, complete;

    cli_options(&opt);
    r = cli_input_reader(path, &rd, &err);
    if (r < 0) {
        if (o->json) cli_json_error_line(path, &err);
        return cli_report(path, &err);
    }
    s = r ? ckpt_scan_reader(&rd, &opt, flags, &err) : ckpt_scan_path(path, &opt, flags, &err);
    if (!s) {
        if (o->json) cli_json_error_line(path, &err);
        return cli_report(path, &err);
    }
    complete = ckpt_scan_error(s) == NULL;
    if (o->json) {
        print_json(path, s);
    } else if (complete || ckpt_scan_count(s) > 0) {
        /* nothing met before an error: nothing to say but the error */
        print_table(s);
        nn = ckpt_scan_note_count(s);
        for (i = 0; i < nn; i++) {
            fputs("note: ", stdout);
            put_shown(ckpt_scan_note_at(s, i));
            putchar('\n');
        }
        print_summary(path, s);
    }
    if (!complete) {
        fflush(stdout);
        cli_report(path, ckpt_scan_error(s));
    }
    r = ckpt_scan_flagged(s) ? SCAN_DANGEROUS : complete ? CLI_OK : CLI_FAIL;
    ckpt_scan_free(s);
    return r;
}

int cmd_scan(int argc, char **argv)
{
    int nops = 0, r;
    char **ops;
    scan_opts o;
    const cli_option options[] = {
        {"--strict", 0, 0, NULL, &o.strict},
        {"--json", 0, 0, NULL, &o.json},
    };

    memset(&o, 0, sizeof o);
    r = cli_parse_files(argc, argv, options, sizeof options / sizeof options[0], usage, &ops,
                        &nops);
    if (r == CLI_CONTINUE) r = cli_batch(ops, nops, o.json, scan_one, &o);
    /* a dangerous finding is the answer even when the report could not be
     * written: the write error is still reported, the status stays 3 */
    if (r == SCAN_DANGEROUS) cli_stdout_fail_status(SCAN_DANGEROUS);
    free(ops);
    return r;
}
