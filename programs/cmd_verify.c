/*
 * cmd_verify.c - `ckpt verify`: deep integrity check of a checkpoint.
 */
#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L
#endif

#include "cli.h"

#include <string.h>

static const char usage[] =
    "Usage: ckpt verify FILE\n"
    "Check a checkpoint's integrity, reading every stored byte once: for a\n"
    "ZIP (torch.save since 1.6, TorchScript) the CRC-32 of every record, each\n"
    "local header against the central directory and each data descriptor;\n"
    "for every container the storage sizes against their declarations and\n"
    "each tensor's extent inside its storage (legacy streams and TAR files\n"
    "carry no checksums: their element counts and extents are checked).\n"
    "\n"
    "Prints the observations as 'note: ...' lines (e.g. 'no crc recorded\n"
    "for archive/data/0', written by torch with set_crc32_options(False):\n"
    "not a failure), then 'ok: FILE: ...'.  On damage, prints one line\n"
    "naming the first bad record on stderr, e.g.\n"
    "  ckpt: FILE: crc mismatch in archive/data/3 (recorded ..., computed ...) (byte N)\n"
    "When the damage keeps the file from being opened at all (a flipped bit\n"
    "in data.pkl), the records of a ZIP are still checked one by one so that\n"
    "the bad one is named.  A tensor layout ckpt does not read (sparse,\n"
    "quantized, ...) is not damage: the rest is still verified.\n"
    "\n"
    "Options:\n"
    "  -h, --help  show this help\n"
    "\n"
    "Exit status: 0 intact, 1 damaged or unreadable, 2 usage error.\n";

/* A line of the library's text, control characters shown as '?'. */
static void put_clean(const char *s)
{
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        putchar(c < 0x20 || c == 0x7f ? '?' : c);
    }
}

static void print_note(void *ctx, const char *line)
{
    (void)ctx;
    fputs("note: ", stdout);
    put_clean(line);
    putchar('\n');
}

int cmd_verify(int argc, char **argv)
{
    int nops = 0, r, skipped = 0;
    char *ops[1];
    const char *path;
    ckpt_options opt;
    ckpt_error err, first;
    ckpt_file *f;
    ckpt_info info;
    size_t i, nn;
    char b1[32], b2[32], b3[32];

    r = cli_parse(argc, argv, NULL, 0, usage, ops, 1, &nops);
    if (r != CLI_CONTINUE)
        return r;
    if (nops < 1)
        return cli_usage_error("verify: missing FILE");
    path = ops[0];

    cli_options(&opt);
    memset(&err, 0, sizeof err);
    err.offset = -1;
    f = ckpt_open(path, &opt, &err);
    if (!f && err.code == CKPT_E_UNSUPPORTED) {
        /* a layout ckpt does not read: verify the rest of the file */
        first = err;
        opt.skip_tensors = 1;
        memset(&err, 0, sizeof err);
        err.offset = -1;
        f = ckpt_open(path, &opt, &err);
        if (f)
            skipped = 1;
        else
            err = first;
    }
    if (!f) /* the library names a damaged record when damage stops the open */
        return cli_file_error(path, &err);

    if (skipped) {
        fputs("note: tensors not checked: ", stdout);
        put_clean(first.message);
        putchar('\n');
    }
    memset(&err, 0, sizeof err);
    err.offset = -1;
    r = ckpt_verify(f, print_note, NULL, &err);
    nn = ckpt_note_count(f);
    for (i = 0; i < nn; i++) {
        const char *n = ckpt_note_at(f, i);
        print_note(NULL, n ? n : "");
    }
    if (r != 0) {
        fflush(stdout);
        r = cli_file_error(path, &err);
        ckpt_close(f);
        return r;
    }
    ckpt_get_info(f, &info);
    printf("ok: %s: %s", path, ckpt_format_name(info.format));
    if (info.version && info.version[0])
        printf(" (version %s)", info.version);
    if (skipped)
        printf(", %s storage%s", cli_grouped(info.storage_count, b1, sizeof b1),
               info.storage_count == 1 ? "" : "s");
    else
        printf(", %s tensor%s in %s storage%s (%s bytes of tensor data)",
               cli_grouped(info.tensor_count, b1, sizeof b1),
               info.tensor_count == 1 ? "" : "s",
               cli_grouped(info.storage_count, b2, sizeof b2),
               info.storage_count == 1 ? "" : "s",
               cli_grouped(info.total_bytes, b3, sizeof b3));
    printf(", file of %s bytes\n", cli_grouped(info.file_size, b1, sizeof b1));
    ckpt_close(f);
    return CLI_OK;
}
