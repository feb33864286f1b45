/*
 * cmd_show.c - `ckpt show`: the whole saved object as a tree (the library's
 * ckpt_value_to_text(), ckpt_text.h, which states the format) or as JSON
 * (ckpt_value_to_json()); here: options, several files, the JSON's
 * buffering, TorchScript's constants and extra files, errors.
 */
#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L
#endif

#include "cli.h"

#include <stdlib.h>
#include <string.h>

static const char usage[] =
    "Usage: ckpt show [--json] [--key K] FILE...\n"
    "Print the whole saved object (dicts, lists, numbers, strings, tensors,\n"
    "objects of other classes) as an indented tree.  Tensors are shown as\n"
    "'tensor DTYPE [SHAPE]', instances as 'module.Class(...)' with their state\n"
    "below, a container met again (shared or cyclic) as '<ref PATH>'.\n"
    "A TorchScript archive: the module graph, then its constants and its\n"
    "extra files (_extra_files) under their own headings (--json: members\n"
    "\"constants\" and \"extra\" of the root object; not with --key).\n"
    "Text from the file (keys, strings, class and global names, storage\n"
    "keys) is escaped: \\\\, \\n, \\xHH for control characters and bytes that\n"
    "are not UTF-8, \\uXXXX for C1 controls, bidi and invisible characters.\n"
    "Several files: each under a '==> FILE <==' header; with --json one\n"
    "line per file, {\"file\": FILE, \"value\": ...} (or {\"file\", \"error\"}).\n"
    "The JSON is written only once it is complete (kept in memory up to\n"
    "32 MiB, streamed past that); a failure prints nothing on stdout (past\n"
    "32 MiB: a last line {\"file\", \"error\"}), one line on stderr, exit 1.\n"
    "\n"
    "Options:\n"
    "  --json      the same as JSON (indent 2): dicts as objects, bytes as\n"
    "              {\"$bytes\": base64}, tensors as {\"$tensor\": name, \"dtype\",\n"
    "              \"shape\"}, objects as {\"$object\": class, \"args\", \"state\"},\n"
    "              shared values as {\"$ref\": path}\n"
    "  --key K     only what is under key K (e.g. state_dict); a K that is\n"
    "              not a top-level key is a path of keys\n"
    "              (optimizer.param_groups.0; see 'ckpt ls --help')\n"
    "  -h, --help  show this help\n";

/* show --json output is kept in memory up to this many bytes and written
 * only when the whole value has been written, so that a failure part way
 * leaves nothing on stdout; past it the text streams, and a failure then
 * ends the stream with a line {"file", "error"}. */
#define JSON_BUFFER (32u << 20)

typedef struct jout {
    sbuf buf;
    int streaming;
} jout;

static int write_json(void *ctx, const char *p, size_t n)
{
    jout *j = ctx;
    if (!j->streaming && j->buf.len + n <= JSON_BUFFER) {
        sb_add(&j->buf, p, n);
        if (!j->buf.oom) return 0;
        j->buf.oom = 0; /* no memory for more: stream what there is */
    }
    if (!j->streaming) {
        j->streaming = 1;
        if (j->buf.len && fwrite(j->buf.p, 1, j->buf.len, stdout) != j->buf.len) return -1;
        sb_free(&j->buf);
    }
    return fwrite(p, 1, n, stdout) == n ? 0 : -1;
}

typedef struct show_opts {
    int json, multi;
    const char *key;
    ckpt_options opt;
} show_opts;

/* TorchScript: its constants and extra files, as members "constants" and
 * "extra" of the root object (as show prints them after the module graph).
 * The root's closing brace (with indent 2, "\n}") is held back until they
 * are written; their values are indented one level deeper. */
typedef struct held {
    jout *j;
    char tail[2]; /* the last bytes written to it, not yet passed on */
    size_t ntail;
    int first; /* the first byte of the root, once seen */
} held;

static int write_held(void *ctx, const char *p, size_t n)
{
    held *h = ctx;
    if (n == 0) return 0;
    if (h->first < 0) h->first = (unsigned char)p[0];
    if (n >= sizeof h->tail) { /* pass on the old tail and all but the new one */
        if (h->ntail && write_json(h->j, h->tail, h->ntail) != 0) return -1;
        if (write_json(h->j, p, n - sizeof h->tail) != 0) return -1;
        memcpy(h->tail, p + n - sizeof h->tail, sizeof h->tail);
        h->ntail = sizeof h->tail;
        return 0;
    }
    /* one byte: keep the last two */
    if (h->ntail == sizeof h->tail) {
        if (write_json(h->j, h->tail, 1) != 0) return -1;
        h->tail[0] = h->tail[1];
        h->ntail = 1;
    }
    h->tail[h->ntail++] = p[0];
    return 0;
}

/* A member's value, one level deeper: two more spaces after each newline
 * (JSON strings hold no raw newline; with indent 0 there is none). */
static int write_deeper(void *ctx, const char *p, size_t n)
{
    held *h = ctx;
    size_t i, run = 0;
    for (i = 0; i < n; i++) {
        if (p[i] != '\n') continue;
        if (write_json(h->j, p + run, i + 1 - run) != 0 || write_json(h->j, "  ", 2) != 0)
            return -1;
        run = i + 1;
    }
    return write_json(h->j, p + run, n - run);
}

static int has_parts(const cli_doc *d)
{
    const ckpt_value *c = ckpt_part(d->f, "constants"), *e = ckpt_part(d->f, "extra");
    return (c && ckpt_value_len(c)) || (e && ckpt_value_len(e));
}

/* The root through write_held, then the members; 0 or -1. */
static int json_with_parts(const cli_doc *d, jout *j, int indent, ckpt_error *err)
{
    static const char *const names[] = {"constants", "extra"};
    held h;
    size_t i;
    memset(&h, 0, sizeof h);
    h.j = j;
    h.first = -1;
    if (ckpt_value_to_json(d->f, d->root, indent, write_held, &h, err) != 0) return -1;
    /* an object, ending "\n}" (indent 2) or "}": reopen it */
    if (h.first != '{' || h.ntail != 2 || h.tail[1] != '}' || (indent && h.tail[0] != '\n'))
        return write_json(j, h.tail, h.ntail); /* not an object: as it was */
    if (!indent && write_json(j, h.tail, 1) != 0) return -1;
    h.ntail = 0;
    for (i = 0; i < 2; i++) {
        const ckpt_value *v = ckpt_part(d->f, names[i]);
        if (!v || !ckpt_value_len(v)) continue;
        if (write_json(j, indent ? ",\n  \"" : ", \"", indent ? 5 : 3) != 0 ||
            write_json(j, names[i], strlen(names[i])) != 0 || write_json(j, "\": ", 3) != 0)
            return -1;
        if (ckpt_value_to_json(d->f, v, indent, write_deeper, &h, err) != 0) return -1;
    }
    return write_json(j, indent ? "\n}" : "}", indent ? 2 : 1);
}

static int show_json(const cli_doc *d, const char *path, int multi, int whole)
{
    ckpt_error err;
    jout j;
    int r;
    memset(&err, 0, sizeof err);
    memset(&j, 0, sizeof j);
    err.offset = -1;
    if (multi) { /* JSON Lines: {"file": F, "value": ...} on one line */
        char *p = NULL;
        size_t n = 0;
        FILE *m = open_memstream(&p, &n);
        if (!m) return cli_error("out of memory");
        fputs("{\"file\": ", m);
        cli_json_string(m, path, strlen(path));
        fputs(", \"value\": ", m);
        fclose(m);
        if (!p) return cli_error("out of memory");
        sb_add(&j.buf, p, n);
        free(p);
    }
    if (whole && d->root && has_parts(d))
        r = json_with_parts(d, &j, multi ? 0 : 2, &err);
    else
        r = ckpt_value_to_json(d->f, d->root, multi ? 0 : 2, write_json, &j, &err);
    if (r == 0) r = write_json(&j, multi ? "}\n" : "\n", multi ? 2 : 1);
    if (r == 0 && !j.streaming && j.buf.len && fwrite(j.buf.p, 1, j.buf.len, stdout) != j.buf.len)
        r = -1;
    sb_free(&j.buf);
    if (r == 0) return CLI_OK;
    if (cli_stdout_failed()) return CLI_FAIL; /* reported by cli_stdout_finish() */
    if (j.streaming) {
        putchar('\n');
        cli_json_error_line(path, &err);
    } else if (multi) {
        cli_json_error_line(path, &err);
    }
    fflush(stdout);
    return cli_report(path, &err);
}

static int write_stdout(void *ctx, const char *p, size_t n)
{
    (void)ctx;
    return fwrite(p, 1, n, stdout) == n ? 0 : -1;
}

/* TorchScript: the constants (constants.pkl) and the _extra_files after
 * the module graph, each under a heading. */
static int show_parts(const cli_doc *d, ckpt_error *err)
{
    static const char *const parts[][2] = {{"constants", "constants (constants.pkl):\n"},
                                           {"extra", "extra files:\n"}};
    for (size_t i = 0; i < 2; i++) {
        const ckpt_value *v = ckpt_part(d->f, parts[i][0]);
        if (!v || !ckpt_value_len(v)) continue;
        fputs(parts[i][1], stdout);
        if (ckpt_value_to_text(d->f, v, write_stdout, NULL, NULL, err) != 0) return -1;
    }
    return 0;
}

static int show_tree(const cli_doc *d, const char *path, int whole)
{
    ckpt_error err;
    if (!d->root) return CLI_OK;
    if (ckpt_value_to_text(d->f, d->root, write_stdout, NULL, NULL, &err) == 0 &&
        (!whole || show_parts(d, &err) == 0))
        return CLI_OK;
    if (cli_stdout_failed()) return CLI_FAIL; /* reported by cli_stdout_finish() */
    return cli_report(path, &err);
}

static int show_one(const char *path, void *ctx)
{
    show_opts *o = ctx;
    cli_doc d;
    ckpt_error err;
    int r;
    if (cli_doc_open(&d, path, o->key, &o->opt, &err) != 0) {
        if (o->json && o->multi) cli_json_error_line(path, &err);
        return cli_report(path, &err);
    }
    r = o->json ? show_json(&d, path, o->multi, !o->key) : show_tree(&d, path, !o->key);
    cli_doc_close(&d);
    return r;
}

int cmd_show(int argc, char **argv)
{
    int nops = 0, r;
    char **ops;
    show_opts o;
    const cli_option options[] = {
        {"--json", 0, 0, NULL, &o.json},
        {"--key", 0, 1, &o.key, NULL},
    };

    memset(&o, 0, sizeof o);
    r = cli_parse_files(argc, argv, options, sizeof options / sizeof options[0], usage, &ops,
                        &nops);
    if (r == CLI_CONTINUE) {
        cli_options(&o.opt);
        o.multi = nops > 1;
        r = cli_batch(ops, nops, o.json, show_one, &o);
    }
    free(ops);
    return r;
}
