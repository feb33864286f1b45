/*
 * cmd_verify.c - `ckpt verify`: deep integrity check of a checkpoint.
 */
#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L
#endif

#include "cli.h"
#include "progress.h"

#include <stdlib.h>
#include <string.h>

static const char usage[] =
    "Usage: ckpt verify [--json] FILE...\n"
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
    "Text from the file in notes is escaped (\\xHH, \\uXXXX, see 'ckpt ls --help').\n"
    "Several files: each under a '==> FILE <==' header (with --json one\n"
    "object per line); every file is checked, the exit status is the worst.\n"
    "\n"
    "Options:\n"
    "  --json      one JSON object per file, on one line: {\"file\", \"ok\",\n"
    "              \"format\", \"version\", \"tensors\", \"storages\", \"bytes\",\n"
    "              \"file_size\", \"tensors_checked\", \"notes\": [...],\n"
    "              \"error\": null or {\"message\", \"code\", \"offset\"}}; the\n"
    "              error is also printed on stderr\n"
    "  -h, --help  show this help\n"
    "\n"
    "Exit status: 0 intact, 1 damaged or unreadable, 2 usage error.\n";

typedef struct verify_opts {
    int json, multi;
    sbuf notes;   /* --json: the notes as JSON strings, ", "-separated */
    progress bar; /* on a terminal, for a long check */
    uint64_t last;
} verify_opts;

static void on_progress(void *ctx, uint64_t done, uint64_t total)
{
    verify_opts *o = ctx;
    if (o->multi) return; /* several files: cli_batch() draws one bar for them all */
    if (o->bar.total == 0 && total > 0) progress_start(&o->bar, total, "verifying");
    if (done > o->last) progress_advance(&o->bar, done - o->last);
    o->last = done;
}

/* A line of the library's text, escaped (cli_escape). */
static void put_clean(const char *s)
{
    cli_term_put(stdout, s);
}

static void print_note(void *ctx, const char *line)
{
    verify_opts *o = ctx;
    if (o) progress_hide(&o->bar);
    if (o && o->json) {
        char *p = NULL;
        size_t n = 0;
        FILE *m = open_memstream(&p, &n);
        if (!m) return;
        if (o->notes.len) fputs(", ", m);
        cli_json_string(m, line, strlen(line));
        fclose(m);
        if (p) sb_add(&o->notes, p, n);
        free(p);
        return;
    }
    fputs("note: ", stdout);
    put_clean(line);
    putchar('\n');
}

static void json_error(const ckpt_error *err)
{
    const char *m = err->message[0] ? err->message : ckpt_code_name(err->code);
    fputs("{\"message\": ", stdout);
    cli_json_string(stdout, m, strnlen(m, sizeof err->message));
    printf(", \"code\": \"%s\", \"offset\": ", ckpt_code_name(err->code));
    if (err->offset >= 0)
        printf("%lld}", (long long)err->offset);
    else
        fputs("null}", stdout);
}

/* One line: {"file", "ok", "format", "version", "tensors", "storages",
 * "bytes", "file_size", "tensors_checked", "notes", "error"}. */
static void print_json(verify_opts *o, const char *path, ckpt_file *f, int skipped,
                       const ckpt_error *err)
{
    ckpt_info info;
    fputs("{\"file\": ", stdout);
    cli_json_string(stdout, path, strlen(path));
    printf(", \"ok\": %s, \"format\": ", err ? "false" : "true");
    if (f) {
        ckpt_get_info(f, &info);
        printf("\"%s\", \"version\": ", ckpt_format_name(info.format));
        cli_json_string(stdout, info.version ? info.version : "",
                        info.version ? strlen(info.version) : 0);
        printf(", \"tensors\": %zu, \"storages\": %zu, \"bytes\": %llu, "
               "\"file_size\": %llu, \"tensors_checked\": %s",
               info.tensor_count, info.storage_count, (unsigned long long)info.total_bytes,
               (unsigned long long)info.file_size, skipped ? "false" : "true");
    } else {
        fputs("null, \"version\": null, \"tensors\": null, \"storages\": null, "
              "\"bytes\": null, \"file_size\": null, \"tensors_checked\": false",
              stdout);
    }
    fputs(", \"notes\": [", stdout);
    if (o->notes.p) fwrite(o->notes.p, 1, o->notes.len, stdout);
    fputs("], \"error\": ", stdout);
    if (err)
        json_error(err);
    else
        fputs("null", stdout);
    fputs("}\n", stdout);
}

static int verify_one(const char *path, void *ctx)
{
    verify_opts *o = ctx;
    int r, skipped = 0;
    ckpt_options opt;
    ckpt_error err, first;
    ckpt_file *f;
    ckpt_info info;
    size_t i, nn;
    char b1[32], b2[32], b3[32];

    o->notes.len = 0;
    cli_options(&opt);
    memset(&err, 0, sizeof err);
    err.offset = -1;
    f = cli_open_input(path, &opt, &err);
    if (!f && err.code == CKPT_E_UNSUPPORTED) {
        /* a layout ckpt does not read: verify the rest of the file */
        first = err;
        opt.skip_tensors = 1;
        memset(&err, 0, sizeof err);
        err.offset = -1;
        f = cli_open_input(path, &opt, &err);
        if (f)
            skipped = 1;
        else
            err = first;
    }
    if (!f) { /* the library names a damaged record when damage stops the open */
        if (o->json) print_json(o, path, NULL, 0, &err); /* one line per file, always */
        fflush(stdout);
        return cli_report(path, &err);
    }

    if (skipped) {
        if (o->json) {
            char line[sizeof first.message + 32];
            snprintf(line, sizeof line, "tensors not checked: %s", first.message);
            print_note(o, line);
        } else {
            fputs("note: tensors not checked: ", stdout);
            put_clean(first.message);
            putchar('\n');
        }
    }
    memset(&err, 0, sizeof err);
    err.offset = -1;
    memset(&o->bar, 0, sizeof o->bar);
    o->last = 0;
    r = ckpt_verify_progress(f, print_note, on_progress, o, &err);
    progress_finish(&o->bar);
    nn = ckpt_note_count(f);
    for (i = 0; i < nn; i++) {
        const char *n = ckpt_note_at(f, i);
        print_note(o, n ? n : "");
    }
    if (o->json) print_json(o, path, f, skipped, r != 0 ? &err : NULL);
    if (r != 0) {
        fflush(stdout);
        r = cli_report(path, &err);
        ckpt_close(f);
        return r;
    }
    if (o->json) {
        ckpt_close(f);
        return CLI_OK;
    }
    ckpt_get_info(f, &info);
    fputs("ok: ", stdout);
    put_clean(path);
    printf(": %s", ckpt_format_name(info.format));
    if (info.version && info.version[0]) {
        fputs(" (version ", stdout);
        put_clean(info.version);
        putchar(')');
    }
    if (skipped)
        printf(", %s storage%s", cli_grouped(info.storage_count, b1, sizeof b1),
               info.storage_count == 1 ? "" : "s");
    else
        printf(", %s tensor%s in %s storage%s (%s bytes of tensor data)",
               cli_grouped(info.tensor_count, b1, sizeof b1), info.tensor_count == 1 ? "" : "s",
               cli_grouped(info.storage_count, b2, sizeof b2), info.storage_count == 1 ? "" : "s",
               cli_grouped(info.total_bytes, b3, sizeof b3));
    printf(", file of %s bytes\n", cli_grouped(info.file_size, b1, sizeof b1));
    ckpt_close(f);
    return CLI_OK;
}

int cmd_verify(int argc, char **argv)
{
    int nops = 0, r;
    char **ops;
    verify_opts o;
    const cli_option options[] = {
        {"--json", 0, 0, NULL, &o.json},
    };

    memset(&o, 0, sizeof o);
    r = cli_parse_files(argc, argv, options, sizeof options / sizeof options[0], usage, &ops,
                        &nops);
    if (r == CLI_CONTINUE) {
        o.multi = nops > 1;
        r = cli_batch(ops, nops, o.json, verify_one, &o);
    }
    sb_free(&o.notes);
    free(ops);
    return r;
}
