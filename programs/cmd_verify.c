/*
 * cmd_verify.c - `ckpt verify`: deep integrity check of a checkpoint.
 */
#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L
#endif

#include "cli.h"
#include "progress.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

static const char usage[] =
    "Usage: ckpt verify [--json] [--jobs N] FILE...\n"
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
    "They are checked in parallel (--jobs) and printed in order.  A checkpoint\n"
    "of several files (a folder, an *.index.json, a DCP folder) has its parts\n"
    "checked in parallel, with the output of one thread.\n"
    "\n"
    "Options:\n"
    "  --json      one JSON object per file, on one line: {\"file\", \"ok\",\n"
    "              \"format\", \"version\", \"tensors\", \"storages\", \"bytes\",\n"
    "              \"file_size\", \"tensors_checked\", \"notes\": [...],\n"
    "              \"error\": null or {\"message\", \"code\", \"offset\"}}; the\n"
    "              error is also printed on stderr\n"
    "  --jobs N    files, or parts of one, checked at once, on threads\n"
    "              (default: the online CPUs, at most 8; 1: one after the\n"
    "              other)\n"
    "  -h, --help  show this help\n"
    "\n"
    "Exit status: 0 intact, 1 damaged or unreadable, 2 usage error.\n";

/* What checking one file found, kept until it is printed (files are
 * checked ahead on threads with several FILEs and --jobs). */
typedef struct verify_result {
    int opened, skipped, failed;
    ckpt_error first; /* why tensors were not checked (skipped) */
    ckpt_error err;   /* the failure */
    ckpt_info info;
    char *version; /* info.version, copied */
    char **notes;  /* the library's notes, in order */
    size_t nnotes;
    int oom;
} verify_result;

typedef struct verify_opts {
    int json, multi, jobs;
    sbuf notes;   /* --json: the notes as JSON strings, ", "-separated */
    progress bar; /* on a terminal, for a long check */
    uint64_t last;
    verify_result *res; /* one per FILE */
    int cur;            /* the file printed */
} verify_opts;

/* The progress of one file's check: only with one FILE (several files:
 * cli_batch() draws one bar for them all, and checks may run on threads). */
typedef struct verify_run {
    verify_opts *o;
    verify_result *r;
} verify_run;

static void on_progress(void *ctx, uint64_t done, uint64_t total)
{
    verify_opts *o = ((verify_run *)ctx)->o;
    if (o->multi) return;
    if (o->bar.total == 0 && total > 0) progress_start(&o->bar, total, "verifying");
    if (done > o->last) progress_advance(&o->bar, done - o->last);
    o->last = done;
}

static void keep_note(void *ctx, const char *line)
{
    verify_result *r = ((verify_run *)ctx)->r;
    char **p = realloc(r->notes, (r->nnotes + 1) * sizeof *p);
    char *copy = malloc(strlen(line) + 1);
    if (!p || !copy) {
        if (p) r->notes = p;
        free(copy);
        r->oom = 1;
        return;
    }
    r->notes = p;
    strcpy(copy, line);
    r->notes[r->nnotes++] = copy;
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
static void print_json(verify_opts *o, const char *path, const ckpt_info *info, int skipped,
                       const ckpt_error *err)
{
    fputs("{\"file\": ", stdout);
    cli_json_string(stdout, path, strlen(path));
    printf(", \"ok\": %s, \"format\": ", err ? "false" : "true");
    if (info) {
        printf("\"%s\", \"version\": ", ckpt_format_name(info->format));
        cli_json_string(stdout, info->version ? info->version : "",
                        info->version ? strlen(info->version) : 0);
        printf(", \"tensors\": %zu, \"storages\": %zu, \"bytes\": %llu, "
               "\"file_size\": %llu, \"tensors_checked\": %s",
               info->tensor_count, info->storage_count, (unsigned long long)info->total_bytes,
               (unsigned long long)info->file_size, skipped ? "false" : "true");
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

static void free_result(verify_result *r)
{
    size_t k;
    for (k = 0; k < r->nnotes; k++) free(r->notes[k]);
    free(r->notes);
    free(r->version);
    memset(r, 0, sizeof *r);
}

/* A checkpoint of several parts (shards, DCP): its parts checked on up to
 * --jobs threads with ckpt_verify_part(), each part's notes kept apart and
 * then taken in part order up to the first bad part, so that the output is
 * that of one thread (ckpt_verify()) whatever --jobs says. */
typedef struct parts_run {
    const ckpt_file *f;
    verify_opts *o;
    verify_result *res; /* per part: notes, failed, err */
    uint64_t *last;     /* per part: its bytes checked so far */
    pthread_mutex_t mu; /* the progress bar */
} parts_run;

typedef struct part_ctx {
    parts_run *pr;
    size_t i;
    verify_run run; /* keep_note() into res[i] */
} part_ctx;

static void part_note(void *ctx, const char *line)
{
    keep_note(&((part_ctx *)ctx)->run, line);
}

static void part_progress(void *ctx, uint64_t done, uint64_t total)
{
    part_ctx *pc = ctx;
    parts_run *pr = pc->pr;
    verify_opts *o = pr->o;
    (void)total;
    pthread_mutex_lock(&pr->mu);
    if (!o->multi && done > pr->last[pc->i]) {
        progress_advance(&o->bar, done - pr->last[pc->i]);
        pr->last[pc->i] = done;
    }
    pthread_mutex_unlock(&pr->mu);
}

/* Part i (cli_parallel()): 0, or -1 with res[i].err. */
static int verify_part_i(size_t i, void *ctx)
{
    parts_run *pr = ctx;
    part_ctx pc = {pr, i, {pr->o, &pr->res[i]}};
    ckpt_error err;
    memset(&err, 0, sizeof err);
    err.offset = -1;
    if (ckpt_verify_part(pr->f, i, part_note, part_progress, &pc, &err) == 0) return 0;
    pr->res[i].err = err;
    pr->res[i].failed = 1;
    return -1;
}

/* ckpt_verify() of f, its parts on threads; 0 or -1 with *err. */
static int verify_parts(const ckpt_file *f, verify_run *run, ckpt_error *err)
{
    verify_opts *o = run->o;
    parts_run pr;
    int jobs = o->multi ? 1 : o->jobs; /* several FILEs: those are on threads */
    size_t i, k, n = ckpt_part_count(f), stop;
    ckpt_info info;

    memset(&pr, 0, sizeof pr);
    pr.f = f;
    pr.o = o;
    pr.res = calloc(n, sizeof *pr.res);
    pr.last = calloc(n, sizeof *pr.last);
    if (!pr.res || !pr.last) {
        free(pr.res);
        free(pr.last);
        run->r->oom = 1;
        return 0;
    }
    pthread_mutex_init(&pr.mu, NULL);
    ckpt_get_info(f, &info);
    if (!o->multi && info.file_size > 0) progress_start(&o->bar, info.file_size, "verifying");
    stop = cli_parallel(n, jobs, verify_part_i, &pr);
    pthread_mutex_destroy(&pr.mu);
    for (i = 0; i < n; i++) { /* in order, up to the first bad part */
        verify_result *p = &pr.res[i];
        if (i <= stop) {
            for (k = 0; k < p->nnotes; k++) keep_note(run, p->notes[k]);
            if (p->oom) run->r->oom = 1;
        }
        if (i == stop) *err = p->err;
        free_result(p);
    }
    free(pr.res);
    free(pr.last);
    return stop < n ? -1 : 0;
}

/* Check FILE i: no output (it may run on a worker thread). */
static void verify_prepare(int i, const char *path, void *ctx)
{
    verify_opts *o = ctx;
    verify_result *res = &o->res[i];
    verify_run run;
    ckpt_options opt;
    ckpt_error err;
    ckpt_file *f;
    size_t k, nn;

    run.o = o;
    run.r = res;
    cli_options(&opt);
    memset(&err, 0, sizeof err);
    err.offset = -1;
    f = cli_open_input(path, &opt, &err);
    if (!f && err.code == CKPT_E_UNSUPPORTED) {
        /* a layout ckpt does not read: verify the rest of the file */
        res->first = err;
        opt.skip_tensors = 1;
        memset(&err, 0, sizeof err);
        err.offset = -1;
        f = cli_open_input(path, &opt, &err);
        if (f)
            res->skipped = 1;
        else
            err = res->first;
    }
    if (!f) { /* the library names a damaged record when damage stops the open */
        res->err = err;
        res->failed = 1;
        return;
    }
    res->opened = 1;
    memset(&err, 0, sizeof err);
    err.offset = -1;
    if ((ckpt_part_count(f) > 1
             ? verify_parts(f, &run, &err)
             : ckpt_verify_progress(f, keep_note, on_progress, &run, &err)) != 0) {
        res->err = err;
        res->failed = 1;
    }
    if (!o->multi) progress_finish(&o->bar);
    nn = ckpt_note_count(f);
    for (k = 0; k < nn; k++) {
        const char *n = ckpt_note_at(f, k);
        keep_note(&run, n ? n : "");
    }
    ckpt_get_info(f, &res->info);
    if (res->info.version) {
        res->version = malloc(strlen(res->info.version) + 1);
        if (res->version) strcpy(res->version, res->info.version);
    }
    res->info.version = res->version ? res->version : "";
    ckpt_close(f);
}

/* Print what verify_prepare() found for the next FILE. */
static int verify_one(const char *path, void *ctx)
{
    verify_opts *o = ctx;
    verify_result *res = &o->res[o->cur++];
    const ckpt_info *info = &res->info;
    size_t k;
    int r = CLI_OK;
    char b1[32], b2[32], b3[32];

    o->notes.len = 0;
    if (res->oom) {
        free_result(res);
        return cli_error("out of memory");
    }
    if (!res->opened) {
        if (o->json) print_json(o, path, NULL, 0, &res->err); /* one line per file, always */
        fflush(stdout);
        r = cli_report(path, &res->err);
        free_result(res);
        return r;
    }
    if (res->skipped) {
        if (o->json) {
            char line[sizeof res->first.message + 32];
            snprintf(line, sizeof line, "tensors not checked: %s", res->first.message);
            print_note(o, line);
        } else {
            fputs("note: tensors not checked: ", stdout);
            put_clean(res->first.message);
            putchar('\n');
        }
    }
    for (k = 0; k < res->nnotes; k++) print_note(o, res->notes[k]);
    if (o->json) print_json(o, path, info, res->skipped, res->failed ? &res->err : NULL);
    if (res->failed) {
        fflush(stdout);
        r = cli_report(path, &res->err);
        free_result(res);
        return r;
    }
    if (o->json) {
        free_result(res);
        return CLI_OK;
    }
    fputs("ok: ", stdout);
    put_clean(path);
    printf(": %s", ckpt_format_name(info->format));
    if (info->version && info->version[0]) {
        fputs(" (version ", stdout);
        put_clean(info->version);
        putchar(')');
    }
    if (res->skipped)
        printf(", %s storage%s", cli_grouped(info->storage_count, b1, sizeof b1),
               info->storage_count == 1 ? "" : "s");
    else
        printf(", %s tensor%s in %s storage%s (%s bytes of tensor data)",
               cli_grouped(info->tensor_count, b1, sizeof b1), info->tensor_count == 1 ? "" : "s",
               cli_grouped(info->storage_count, b2, sizeof b2), info->storage_count == 1 ? "" : "s",
               cli_grouped(info->total_bytes, b3, sizeof b3));
    printf(", file of %s bytes\n", cli_grouped(info->file_size, b1, sizeof b1));
    free_result(res);
    return CLI_OK;
}

int cmd_verify(int argc, char **argv)
{
    int nops = 0, r, jobs = cli_default_jobs(), i;
    char **ops;
    const char *jobs_arg = NULL;
    verify_opts o;
    const cli_option options[] = {
        {"--json", 0, 0, NULL, &o.json},
        {"--jobs", 'j', 1, &jobs_arg, NULL},
    };

    memset(&o, 0, sizeof o);
    r = cli_parse_files(argc, argv, options, sizeof options / sizeof options[0], usage, &ops,
                        &nops);
    if (r == CLI_CONTINUE && jobs_arg) {
        char *end;
        long v = strtol(jobs_arg, &end, 10);
        if (*jobs_arg == '\0' || *end != '\0' || v < 1 || v > 64)
            r = cli_usage_error("verify: --jobs takes a number from 1 to 64, not '%s'", jobs_arg);
        else
            jobs = (int)v;
    }
    for (i = 0; r == CLI_CONTINUE && i < nops; i++)
        if (strcmp(ops[i], "-") == 0) jobs = 1; /* standard input is spooled once, here */
    if (r == CLI_CONTINUE) {
        o.multi = nops > 1;
        o.jobs = jobs;
        o.res = calloc((size_t)nops, sizeof *o.res);
        if (!o.res)
            r = cli_error("out of memory");
        else
            r = cli_batch_jobs(ops, nops, o.json, verify_prepare, jobs, verify_one, &o);
        for (i = 0; o.res && i < nops; i++) free_result(&o.res[i]);
        free(o.res);
    }
    sb_free(&o.notes);
    free(ops);
    return r;
}
