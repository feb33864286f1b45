/*
 * cmd_convert.c - `ckpt convert`: write a checkpoint's tensors as a
 * safetensors file.
 *
 * The writer is the library's (include/ckpt_export.h,
 * src/tools/safetensors.c): it plans the file (names, dtypes, metadata,
 * header, the CRC checks), then copies the tensors from the descriptor
 * FILE was opened on (copy_file_range, sendfile or pread), checking the
 * CRC-32 of the ZIP records as the copy goes on.  This file parses the
 * options, opens FILE, applies the output policy of output.c (OUT under a
 * temporary name beside it, its blocks reserved and written back to disk as
 * the copy goes on with --sync, synced and renamed, or, without --force,
 * hard-linked, so that an OUT created meanwhile is never replaced, only once
 * every byte is there), draws the progress bar and prints the library's
 * warnings and errors.
 */
#ifndef _FILE_OFFSET_BITS
#define _FILE_OFFSET_BITS 64
#endif

#include "cli.h"
#include "progress.h"

#include "ckpt_export.h"

#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static const char usage[] =
    "Usage: ckpt convert [--key K] [--filter GLOB] [--skip-unsupported]\n"
    "                    [--no-verify] [--force] [--sync] FILE OUT\n"
    "Write the tensors of checkpoint FILE to OUT in the safetensors format\n"
    "(https://github.com/huggingface/safetensors), without running any code\n"
    "from FILE.  Every tensor keeps its name (as listed by 'ckpt ls'), dtype and\n"
    "shape; views and tensors sharing a storage each get their own copy of\n"
    "their elements, row-major and little-endian.  Memory use stays bounded\n"
    "(an 8 MiB buffer) whatever the size of FILE.\n"
    "\n"
    "dtypes: float64 F64, float32 F32, float16 F16, bfloat16 BF16, int64 I64,\n"
    "int32 I32, int16 I16, int8 I8, uint8 U8, bool BOOL, uint16 U16, uint32 U32,\n"
    "uint64 U64, float8_e4m3fn F8_E4M3, float8_e5m2 F8_E5M2.  safetensors has no\n"
    "dtype for complex and float8 fnuz/e8m0 tensors: FILE is refused, naming\n"
    "them, unless --skip-unsupported leaves them out.  So are tensors whose\n"
    "name is not valid UTF-8 (safetensors names are JSON strings; a name is\n"
    "never changed): the message shows their bytes escaped as \\xNN.\n"
    "\n"
    "What is copied is checked: the CRC-32 of every ZIP record a tensor is\n"
    "copied from is computed as the copy goes on and compared with the one\n"
    "the ZIP recorded (a tensor that is a whole record is checked in the\n"
    "buffer it is copied through; views and shared storages are read by a\n"
    "second thread); a mismatch names the tensor and record, exits 1 and\n"
    "leaves no OUT.\n"
    "Deflated records are checked by a pass over the whole file first.\n"
    "Records only left-out tensors use (--filter, --key) are not read.\n"
    "Legacy and TAR files carry no checksums; records saved without a CRC\n"
    "are reported and not checked.\n"
    "\n"
    "The header's \"__metadata__\" holds \"format\": \"pt\", \"ckpt.source_format\"\n"
    "(zip, legacy, tar or pickle) and, as strings, the scalar values (str, int,\n"
    "float, bool) stored next to the tensors under their dotted path, e.g.\n"
    "\"epoch\": \"7\", \"config.lr\": \"0.001\" (Python's str() of the value; at most\n"
    "1000 of them, breadth first; keys and values longer than 1 KiB are left\n"
    "out, with a warning).  A file with no tensors gives a valid file holding\n"
    "only metadata.\n"
    "A TorchScript archive gives its state_dict() tensors, a torch.export\n"
    ".pt2 its state dict and constants.\n"
    "\n"
    "OUT is written under a temporary name in its directory and appears only\n"
    "once complete: a failed or interrupted conversion leaves no OUT behind.\n"
    "An existing OUT is left alone (exit status 1) unless --force is given;\n"
    "a replaced OUT keeps its mode, and a symlink OUT keeps pointing at it.\n"
    "OUT '-' streams the file to standard output (not to a terminal); a\n"
    "device or a FIFO given as OUT is written in place.  FILE '-' reads the\n"
    "checkpoint from standard input.  OUT is never the input file.\n"
    "A progress bar is shown on standard error when it is a terminal and\n"
    "the job is long (64 MiB of tensors, or half a second).\n"
    "\n"
    "Options:\n"
    "  --key K             only the tensors (and values) under top-level key K\n"
    "                      (e.g. state_dict)\n"
    "  --filter GLOB       only the tensors whose name (as 'ckpt ls' shows it,\n"
    "                      after --key) matches GLOB (fnmatch: * ? [...];\n"
    "                      '*' also matches '.')\n"
    "  --skip-unsupported  leave out tensors safetensors cannot hold (no dtype\n"
    "                      for them, or a name that is not UTF-8; they are\n"
    "                      listed in a warning) instead of failing\n"
    "  --no-verify         do not check the CRC-32 of the copied records\n"
    "                      (converts a damaged file as it is)\n"
    "  --force             replace OUT if it exists\n"
    "  --sync              flush OUT to disk before it appears (durable against\n"
    "                      a power loss; like cp, the default only makes the\n"
    "                      rename atomic)\n"
    "  -h, --help          show this help\n";

typedef struct conv {
    const char *path; /* FILE, for messages */
    ckpt_file *f;
    int src_fd;
    progress prog;
    int started;    /* the progress bar began */
    uint64_t shown; /* bytes it was told of */
} conv;

static void on_progress(void *ctx, uint64_t done, uint64_t total)
{
    conv *c = ctx;
    if (!c->started) {
        progress_start(&c->prog, total, "converting");
        c->started = 1;
    }
    if (done > c->shown) {
        progress_advance(&c->prog, done - c->shown);
        c->shown = done;
    }
}

static void on_warning(void *ctx, const char *line)
{
    conv *c = ctx;
    progress_hide(&c->prog);
    cli_error("%s: warning: %s", c->path, line);
}

/* The library's error, worded as the command always printed it: the
 * reader's messages escaped (cli_file_error), the export's own as they
 * are (names in them are escaped already), output errors naming OUT. */
static int report(const conv *c, const char *out, const ckpt_error *err, int origin)
{
    if (origin == CKPT_EXPORT_FROM_READER) return cli_file_error(c->path, err);
    if (origin == CKPT_EXPORT_FROM_OUTPUT) return cli_error("%s: %s", out, err->message);
    if (err->offset >= 0)
        return cli_error("%s: %s (byte %lld)", c->path, err->message, (long long)err->offset);
    return cli_error("%s: %s", c->path, err->message);
}

/* Open FILE read-only and the checkpoint on top of that descriptor. */
static int open_source(conv *c, const char *key)
{
    ckpt_options opt;
    ckpt_reader rd;
    ckpt_error err;
    uint64_t size;

    if (cli_input_fd(c->path, &c->src_fd, &size, &err) != CLI_OK) {
        c->src_fd = -1;
        cli_file_error(c->path, &err);
        return -1;
    }
    if (strcmp(c->path, "-") == 0) c->path = "standard input";
    cli_options(&opt);
    opt.key = key;
    memset(&rd, 0, sizeof rd);
    rd.read = cli_pread_reader; /* the descriptor the export copies from:
                                    both see the same file */
    rd.opaque = (void *)(intptr_t)c->src_fd;
    rd.size = size;
    memset(&err, 0, sizeof err);
    err.offset = -1;
    c->f = ckpt_open_reader(&rd, &opt, &err);
    if (!c->f) {
        cli_file_error(c->path, &err);
        return -1;
    }
    return 0;
}

int cmd_convert(int argc, char **argv)
{
    int nops = 0, r, skip = 0, force = 0, sync = 0, no_verify = 0;
    const char *key = NULL, *filter = NULL;
    char *ops[2];
    cli_out_opts oo;
    struct stat st;
    conv c;
    cli_out o;
    ckpt_export_options eo;
    ckpt_safetensors_plan *plan = NULL;
    ckpt_error err;
    int origin = CKPT_EXPORT_FROM_EXPORT;
    const cli_option options[] = {
        {"--key", 0, 1, &key, NULL},
        {"--skip-unsupported", 0, 0, NULL, &skip},
        {"--force", 0, 0, NULL, &force},
        {"--sync", 0, 0, NULL, &sync},
        {"--no-verify", 0, 0, NULL, &no_verify},
        {"--filter", 0, 1, &filter, NULL},
    };

    r = cli_parse(argc, argv, options, sizeof options / sizeof options[0], usage, ops, 2, &nops);
    if (r != CLI_CONTINUE) return r;
    if (nops < 1) return cli_usage_error("convert: missing FILE");
    if (nops < 2) return cli_usage_error("convert: missing OUT (the safetensors file to write)");
    if (ops[1][0] == '\0') return cli_usage_error("convert: the output file name is empty");

    memset(&c, 0, sizeof c);
    c.path = ops[0];
    c.src_fd = -1;
#ifdef SIGXFSZ
    /* past a file size limit, fail the write (EFBIG) and clean up rather
     * than be killed with the temporary file left behind */
    signal(SIGXFSZ, SIG_IGN);
#endif

    if (strcmp(ops[1], "-") == 0 && isatty(STDOUT_FILENO))
        return cli_error("not writing a safetensors file to a terminal; redirect "
                         "standard output or name OUT");
    memset(&oo, 0, sizeof oo);
    oo.force = force;
    oo.sync = sync;
    oo.input = ops[0];
    /* refuse a doomed OUT (a folder, the input, an existing file) before
     * any work: cli_out_open() checks again when it opens OUT */
    if (strcmp(ops[1], "-") != 0 && stat(ops[1], &st) == 0) {
        if (S_ISDIR(st.st_mode)) return cli_error("%s: is a directory", ops[1]);
        if (cli_same_file(ops[0], &st))
            return cli_error("%s: is the same file as the input; not writing over it", ops[1]);
        if (S_ISREG(st.st_mode) && !force)
            return cli_error("%s: already exists (--force replaces it)", ops[1]);
    }

    r = CLI_FAIL;
    ckpt_export_options_init(&eo);
    eo.filter = filter;
    eo.skip_unsupported = skip;
    eo.verify = !no_verify;
    eo.write_behind = sync;
    eo.out_name = ""; /* output errors: the reason alone, OUT is added here */
    eo.progress = on_progress;
    eo.warning = on_warning;
    eo.ctx = &c;
    eo.error_origin = &origin;
    memset(&err, 0, sizeof err);
    if (open_source(&c, key) == 0) {
        eo.src_fd = c.src_fd;
        plan = ckpt_export_safetensors_plan(c.f, &eo, &err);
        if (!plan) {
            report(&c, ops[1], &err, origin);
        } else if (cli_out_open(&o, ops[1], &oo) == 0) {
            if (ckpt_safetensors_write_fd(plan, o.fd, !o.in_place, &err) == 0) {
                progress_finish(&c.prog);
                r = cli_out_commit(&o) == 0 ? CLI_OK : CLI_FAIL;
            } else {
                progress_finish(&c.prog);
                report(&c, o.shown, &err, origin);
                cli_out_abort(&o);
            }
        }
    }
    ckpt_safetensors_free(plan);
    ckpt_close(c.f);
    if (c.src_fd >= 0) close(c.src_fd);
    return r;
}
