/*
 * cmd_info.c - `ckpt info`: a summary of a checkpoint for people.
 *
 *   file:        model.pt (4,936,512 bytes)
 *   format:      zip, version 3, little-endian, root folder "archive"
 *   tensors:     27 in 27 storages
 *   parameters:  1,234,567 (4,938,268 bytes)
 *   dtypes:
 *     float32   25 tensors  1,234,533 params  4,938,132 bytes
 *     int64      2 tensors         34 params        136 bytes
 *   keys:
 *     epoch: int 7
 *     model: OrderedDict of 12 (12 tensors, 1,234 params)
 *     config: argparse.Namespace
 *   modules (parameters):
 *     model             1,234
 *       encoder           800
 *         0               400
 */
#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L
#endif

#include "cli.h"
#include "ckpt_summary.h"

#include <stdlib.h>
#include <string.h>

static const char usage[] =
    "Usage: ckpt info [--json] [--key K] [--depth N] [--all] FILE...\n"
    "Summarise a checkpoint: container format and version, byte order, the\n"
    "number of tensors, the total parameter count (sum of every tensor's\n"
    "element count) and bytes per dtype, the top-level keys with a one-line\n"
    "description of each value (e.g. 'epoch: int 7', 'model: OrderedDict of\n"
    "12 (12 tensors, 1,234 params)', 'config: argparse.Namespace'), and the\n"
    "module tree: the dotted prefixes of the tensor names, indented, with\n"
    "the parameters under each, like a model summary.  When a tensor layout\n"
    "is not read (sparse, quantized, ...) the keys are still described.\n"
    "The text also names a TorchScript archive's extra files (_extra_files).\n"
    "At most 40 keys are shown unless --all is given.  Text from the file\n"
    "is escaped (\\xHH, \\uXXXX, see 'ckpt ls --help').\n"
    "Several files: each under a '==> FILE <==' header; with --json one\n"
    "object per line (a file that cannot be read: {\"file\", \"error\"});\n"
    "the exit status is the worst.\n"
    "\n"
    "Options:\n"
    "  --json      one JSON object instead: {\"file\", \"format\", \"version\",\n"
    "              \"byteorder\", \"root\", \"file_size\", \"tensors\",\n"
    "              \"storages\", \"parameters\", \"bytes\", \"storage_bytes\",\n"
    "              \"dtypes\": [{\"dtype\", \"tensors\", \"parameters\", \"bytes\"}],\n"
    "              \"keys\": [{\"key\" (plus \"key_bytes\", base64, when it is\n"
    "              not UTF-8), \"summary\", \"tensors\", \"parameters\"}],\n"
    "              \"modules\": [{\"name\" (plus \"name_bytes\", base64,\n"
    "              when it is not UTF-8), \"depth\", \"tensors\",\n"
    "              \"parameters\"}], \"notes\": [...]}\n"
    "  --key K     only what is under key K (e.g. state_dict); a K that is\n"
    "              not a top-level key is a path of keys (see\n"
    "              'ckpt ls --help'): tensors, the storages they view and\n"
    "              modules are then counted under it\n"
    "  --depth N   show the module tree N levels deep (default: all)\n"
    "  --all       show every top-level key (default: the first 40)\n"
    "  -h, --help  show this help\n";

#define STR_SHOWN 60
#define KEYS_SHOWN 40

/* ------------------------------------------------------------------------ */
/* Text helpers                                                               */
/* ------------------------------------------------------------------------ */

static void sb_grouped(sbuf *b, uint64_t x)
{
    char tmp[40];
    sb_str(b, cli_grouped(x, tmp, sizeof tmp));
}

/* Text from the file, one line, escaped (cli_escape), cut after `limit`
 * bytes ("..." added). */
static void sb_clean(sbuf *b, const char *s, size_t n, size_t limit)
{
    if (cli_escape(b, s, n, limit, 0) < n) sb_str(b, "...");
}

/* ------------------------------------------------------------------------ */
/* One-line descriptions                                                      */
/* ------------------------------------------------------------------------ */

static void describe_tensor(sbuf *b, const ckpt_tensor *t)
{
    char tmp[48];
    uint32_t i;
    sb_str(b, "tensor ");
    sb_str(b, ckpt_dtype_name(t->dtype));
    sb_str(b, " [");
    for (i = 0; i < t->ndim; i++) {
        snprintf(tmp, sizeof tmp, i ? ", %lld" : "%lld", (long long)t->shape[i]);
        sb_str(b, tmp);
    }
    sb_str(b, "] (");
    sb_grouped(b, t->numel);
    sb_str(b, t->numel == 1 ? " param)" : " params)");
}

/* The last component of a dotted class name ("OrderedDict"). */
static const char *short_class(const char *cls)
{
    const char *dot = strrchr(cls, '.');
    return dot ? dot + 1 : cls;
}

/* Describe the value of a top-level row on one line into b. */
static void describe(const ckpt_file *f, const ckpt_summary_key *row, sbuf *b)
{
    const ckpt_value *v = row->value;
    ckpt_kind k = v ? ckpt_value_kind(v) : CKPT_V_NONE;
    const char *text, *cls;
    size_t n = 0;
    char tmp[48];
    int container = 0;

    switch (k) {
    case CKPT_V_NONE: sb_str(b, "None"); return;
    case CKPT_V_BOOL: sb_str(b, ckpt_value_bool(v) ? "bool True" : "bool False"); return;
    case CKPT_V_INT:
        snprintf(tmp, sizeof tmp, "int %lld", (long long)ckpt_value_int(v));
        sb_str(b, tmp);
        return;
    case CKPT_V_BIGINT:
        text = ckpt_value_text(v, &n);
        sb_str(b, "int ");
        sb_clean(b, text ? text : "?", text ? n : 1, 40);
        return;
    case CKPT_V_FLOAT:
        sb_str(b, "float ");
        n = ckpt_float_repr(ckpt_value_float(v), tmp);
        sb_add(b, tmp, n);
        return;
    case CKPT_V_STR:
        text = ckpt_value_text(v, &n);
        sb_str(b, "str \"");
        sb_clean(b, text ? text : "", text ? n : 0, STR_SHOWN);
        sb_str(b, "\"");
        if (n > STR_SHOWN) {
            snprintf(tmp, sizeof tmp, " (%zu bytes)", n);
            sb_str(b, tmp);
        }
        return;
    case CKPT_V_BYTES:
        ckpt_value_text(v, &n);
        snprintf(tmp, sizeof tmp, "bytes (%zu)", n);
        sb_str(b, tmp);
        return;
    case CKPT_V_TENSOR: {
        const ckpt_tensor *t = ckpt_value_tensor(f, v);
        if (t) {
            describe_tensor(b, t);
        } else {
            sb_str(b, "tensor");
        }
        return;
    }
    case CKPT_V_GLOBAL:
        cls = ckpt_value_class(v);
        sb_str(b, "global ");
        sb_clean(b, cls ? cls : "?", cls ? strlen(cls) : 1, 200);
        return;
    case CKPT_V_STORAGE: sb_str(b, "storage"); return;
    case CKPT_V_DICT:
        cls = ckpt_value_class(v);
        sb_str(b, cls ? short_class(cls) : "dict");
        snprintf(tmp, sizeof tmp, " of %zu", ckpt_value_len(v));
        sb_str(b, tmp);
        container = 1;
        break;
    case CKPT_V_LIST:
    case CKPT_V_TUPLE:
    case CKPT_V_SET:
        snprintf(tmp, sizeof tmp, "%s of %zu",
                 k == CKPT_V_LIST    ? "list"
                 : k == CKPT_V_TUPLE ? "tuple"
                                     : "set",
                 ckpt_value_len(v));
        sb_str(b, tmp);
        container = 1;
        break;
    case CKPT_V_OBJECT:
        cls = ckpt_value_class(v);
        sb_clean(b, cls ? cls : "object", cls ? strlen(cls) : 6, 200);
        container = 1;
        break;
    }
    if (container && row->tensors) {
        snprintf(tmp, sizeof tmp, " (%llu tensor%s, ", (unsigned long long)row->tensors,
                 row->tensors == 1 ? "" : "s");
        sb_str(b, tmp);
        sb_grouped(b, row->elements);
        sb_str(b, row->elements == 1 ? " param)" : " params)");
    }
}

/* The text of a dict key: str keys as they are, ints in decimal, anything
 * else "<key N>". */
static void key_text(sbuf *b, const ckpt_value *k, size_t index)
{
    char tmp[48];
    size_t n = 0;
    const char *t;
    if (k && ckpt_value_kind(k) == CKPT_V_STR) {
        t = ckpt_value_text(k, &n);
        if (n == 0)
            sb_str(b, "\"\"");
        else
            sb_clean(b, t, n, 200);
        return;
    }
    if (k && ckpt_value_kind(k) == CKPT_V_INT) {
        snprintf(tmp, sizeof tmp, "%lld", (long long)ckpt_value_int(k));
        sb_str(b, tmp);
        return;
    }
    snprintf(tmp, sizeof tmp, "<key %zu>", index);
    sb_str(b, tmp);
}

/* ------------------------------------------------------------------------ */
/* The report                                                                 */
/* ------------------------------------------------------------------------ */

typedef struct report {
    ckpt_file *f;
    cli_doc doc; /* what --key selected */
    const char *path;
    const char *key;
    const char *skipped; /* why tensors are not listed, or NULL */
    ckpt_info info;
    ckpt_summary *sum; /* the counts, from the library */
    const ckpt_summary_totals *tot;
    int depth;
    int all_keys;
} report;

/* A module is shown when it is less than --depth levels deep. */
static int shown(const report *r, const ckpt_summary_module *m)
{
    return r->depth < 0 || m->depth < (uint32_t)r->depth;
}

static void put_clean(const char *s)
{
    sbuf b;
    memset(&b, 0, sizeof b);
    sb_clean(&b, s, strlen(s), (size_t)-1);
    if (b.p) fputs(b.p, stdout);
    free(b.p);
}

static int print_text(report *r)
{
    const ckpt_value *root = r->doc.root;
    const ckpt_summary_totals *tot = r->tot;
    char g1[40], g2[40], g3[40];
    size_t i, n, wt = 0, wp = 0, wb = 0, wd = 0;
    int oom = 0;

    printf("file:        ");
    put_clean(r->path);
    printf(" (%s bytes)\n", cli_grouped(r->info.file_size, g1, sizeof g1));
    printf("format:      %s", ckpt_format_name(r->info.format));
    if (r->info.version && r->info.version[0]) printf(", version %s", r->info.version);
    printf(", %s-endian", r->info.byteorder == CKPT_BIG ? "big" : "little");
    if (r->info.root && r->info.root[0]) {
        fputs(", root folder \"", stdout);
        put_clean(r->info.root);
        putchar('"');
    }
    putchar('\n');
    if (r->key) {
        fputs("key:         ", stdout);
        put_clean(r->key);
        putchar('\n');
    }
    printf("tensors:     %s in %s storage%s\n", cli_grouped(tot->tensors, g1, sizeof g1),
           cli_grouped(tot->storages, g2, sizeof g2), tot->storages == 1 ? "" : "s");
    printf("parameters:  %s (%s bytes", cli_grouped(tot->elements, g1, sizeof g1),
           cli_grouped(tot->bytes, g2, sizeof g2));
    if (tot->storage_bytes != tot->bytes)
        printf("; storages hold %s", cli_grouped(tot->storage_bytes, g3, sizeof g3));
    printf(")\n");
    if (r->skipped) {
        fputs("note:        tensors not listed: ", stdout);
        put_clean(r->skipped);
        putchar('\n');
    }
    const ckpt_value *extra = r->key ? NULL : ckpt_part(r->f, "extra");
    for (i = 0; extra && i < ckpt_value_len(extra); i++) { /* TorchScript's _extra_files */
        size_t len = 0;
        const char *name = ckpt_value_text(ckpt_value_key(extra, i), NULL);
        (void)ckpt_value_text(ckpt_value_item(extra, i), &len);
        fputs(i ? ", " : "extra files: ", stdout);
        put_clean(name ? name : "");
        if (ckpt_value_kind(ckpt_value_item(extra, i)) == CKPT_V_NONE)
            fputs(" (not read: too large)", stdout);
        else
            printf(" (%s bytes)", cli_grouped(len, g1, sizeof g1));
        if (i + 1 == ckpt_value_len(extra)) putchar('\n');
    }

    n = ckpt_summary_dtype_count(r->sum);
    for (i = 0; i < n; i++) {
        const ckpt_summary_dtype *d = ckpt_summary_dtype_at(r->sum, i);
        if (strlen(ckpt_dtype_name(d->dtype)) > wd) wd = strlen(ckpt_dtype_name(d->dtype));
        if (strlen(cli_grouped(d->tensors, g1, sizeof g1)) > wt) wt = strlen(g1);
        if (strlen(cli_grouped(d->elements, g1, sizeof g1)) > wp) wp = strlen(g1);
        if (strlen(cli_grouped(d->bytes, g1, sizeof g1)) > wb) wb = strlen(g1);
    }
    if (n) fputs("dtypes:\n", stdout);
    for (i = 0; i < n; i++) {
        const ckpt_summary_dtype *d = ckpt_summary_dtype_at(r->sum, i);
        printf("  %-*s  %*s tensor%s  %*s params  %*s bytes\n", (int)wd, ckpt_dtype_name(d->dtype),
               (int)wt, cli_grouped(d->tensors, g1, sizeof g1), d->tensors == 1 ? " " : "s",
               (int)wp, cli_grouped(d->elements, g2, sizeof g2), (int)wb,
               cli_grouped(d->bytes, g3, sizeof g3));
    }

    if (root) {
        sbuf line;
        memset(&line, 0, sizeof line);
        if (ckpt_value_kind(root) == CKPT_V_DICT) {
            n = ckpt_summary_key_count(r->sum);
            printf("keys:%s\n", n ? "" : "        (none)");
            for (i = 0; i < n; i++) {
                if (!r->all_keys && i == KEYS_SHOWN) {
                    printf("  ... %s more (--all shows every key)\n",
                           cli_grouped(n - i, g1, sizeof g1));
                    break;
                }
                line.len = 0;
                sb_str(&line, "  ");
                key_text(&line, ckpt_summary_key_at(r->sum, i)->key, i);
                sb_str(&line, ": ");
                describe(r->f, ckpt_summary_key_at(r->sum, i), &line);
                if (line.oom) break;
                puts(line.p);
                if (cli_stdout_failed()) break;
            }
        } else {
            sb_str(&line, "object:      ");
            describe(r->f, ckpt_summary_key_at(r->sum, 0), &line);
            if (!line.oom) puts(line.p);
        }
        if (line.oom) oom = 1;
        free(line.p);
    }
    if (oom) return cli_error("%s: out of memory", r->path);

    n = ckpt_summary_module_count(r->sum);
    if (n > 0) {
        size_t wn = 0, wc = 0, w;
        for (i = 0; i < n; i++) {
            const ckpt_summary_module *m = ckpt_summary_module_at(r->sum, i);
            sbuf b;
            if (!shown(r, m)) continue;
            memset(&b, 0, sizeof b);
            sb_clean(&b, m->name, m->name_len, 200);
            w = 2u * (size_t)m->depth + (b.p ? strlen(b.p) : 0);
            free(b.p);
            if (w > wn) wn = w;
            if ((w = strlen(cli_grouped(m->elements, g1, sizeof g1))) > wc) wc = w;
        }
        fputs("modules (parameters):\n", stdout);
        for (i = 0; i < n; i++) {
            const ckpt_summary_module *m = ckpt_summary_module_at(r->sum, i);
            sbuf b;
            if (!shown(r, m)) continue;
            memset(&b, 0, sizeof b);
            sb_clean(&b, m->name, m->name_len, 200);
            w = 2u * (size_t)m->depth + (b.p ? strlen(b.p) : 0);
            printf("  %*s%s%*s  %*s\n", 2 * (int)m->depth, "", b.p ? b.p : "", (int)(wn - w), "",
                   (int)wc, cli_grouped(m->elements, g1, sizeof g1));
            free(b.p);
            if ((i & 4095) == 0 && cli_stdout_failed()) break;
        }
    }
    return CLI_OK;
}

/* A NUL-terminated string as JSON (cli_json_string). */
static void json_str(const char *s)
{
    cli_json_string(stdout, s, strlen(s));
}

static int print_json(report *r)
{
    const ckpt_value *root = r->doc.root;
    const ckpt_summary_totals *tot = r->tot;
    size_t i, n;
    int first = 1, oom = 0;

    fputs("{\"file\": ", stdout);
    json_str(r->path);
    printf(", \"format\": \"%s\", \"version\": ", ckpt_format_name(r->info.format));
    json_str(r->info.version ? r->info.version : "");
    printf(", \"byteorder\": \"%s\", \"root\": ", r->info.byteorder == CKPT_BIG ? "big" : "little");
    json_str(r->info.root ? r->info.root : "");
    fputs(", \"key\": ", stdout);
    if (r->key)
        json_str(r->key);
    else
        fputs("null", stdout);
    printf(", \"file_size\": %llu, \"tensors\": %llu, \"storages\": %llu, "
           "\"parameters\": %llu, \"bytes\": %llu, \"storage_bytes\": %llu, "
           "\"dtypes\": [",
           (unsigned long long)r->info.file_size, (unsigned long long)tot->tensors,
           (unsigned long long)tot->storages, (unsigned long long)tot->elements,
           (unsigned long long)tot->bytes, (unsigned long long)tot->storage_bytes);
    n = ckpt_summary_dtype_count(r->sum);
    for (i = 0; i < n; i++) {
        const ckpt_summary_dtype *d = ckpt_summary_dtype_at(r->sum, i);
        printf("%s{\"dtype\": \"%s\", \"tensors\": %llu, \"parameters\": %llu, "
               "\"bytes\": %llu}",
               i ? ", " : "", ckpt_dtype_name(d->dtype), (unsigned long long)d->tensors,
               (unsigned long long)d->elements, (unsigned long long)d->bytes);
    }
    fputs("], \"keys\": [", stdout);
    if (root && ckpt_value_kind(root) == CKPT_V_DICT) {
        sbuf b;
        memset(&b, 0, sizeof b);
        n = ckpt_summary_key_count(r->sum);
        for (i = 0; i < n && !oom; i++) {
            const ckpt_summary_key *row = ckpt_summary_key_at(r->sum, i);
            const ckpt_value *k = row->key;
            size_t kl = 0;
            const char *kt;
            fputs(i ? ", {\"key\": " : "{\"key\": ", stdout);
            if (k && ckpt_value_kind(k) == CKPT_V_STR) {
                kt = ckpt_value_text(k, &kl);
                cli_json_string(stdout, kt ? kt : "", kt ? kl : 0);
                if (kt && !cli_utf8_valid(kt, kl)) { /* never silently renamed */
                    fputs(", \"key_bytes\": \"", stdout);
                    cli_base64(stdout, kt, kl);
                    putchar('"');
                }
            } else if (k && ckpt_value_kind(k) == CKPT_V_INT) {
                printf("%lld", (long long)ckpt_value_int(k));
            } else {
                fputs("null", stdout);
            }
            b.len = 0;
            sb_str(&b, "");
            describe(r->f, row, &b);
            if (b.oom) oom = 1;
            fputs(", \"summary\": ", stdout);
            json_str(b.p ? b.p : "");
            printf(", \"tensors\": %llu, \"parameters\": %llu}", (unsigned long long)row->tensors,
                   (unsigned long long)row->elements);
        }
        free(b.p);
    }
    fputs("], \"object\": ", stdout);
    if (root && ckpt_value_kind(root) != CKPT_V_DICT) {
        sbuf b;
        memset(&b, 0, sizeof b);
        describe(r->f, ckpt_summary_key_at(r->sum, 0), &b);
        json_str(b.p ? b.p : "");
        free(b.p);
    } else {
        fputs("null", stdout);
    }
    fputs(", \"modules\": [", stdout);
    n = ckpt_summary_module_count(r->sum);
    for (i = 0, first = 1; i < n; i++) {
        const ckpt_summary_module *m = ckpt_summary_module_at(r->sum, i);
        if (!shown(r, m)) continue;
        fputs(first ? "{" : ", {", stdout);
        first = 0;
        cli_json_name(stdout, "name", m->path, m->path_len); /* may hold NUL bytes */
        printf(", \"depth\": %u, \"tensors\": %llu, \"parameters\": %llu}", (unsigned)m->depth,
               (unsigned long long)m->tensors, (unsigned long long)m->elements);
    }
    fputs("], \"notes\": [", stdout);
    first = 1;
    if (r->skipped) {
        sbuf b;
        memset(&b, 0, sizeof b);
        sb_str(&b, "tensors not listed: ");
        sb_str(&b, r->skipped);
        json_str(b.p ? b.p : "");
        free(b.p);
        first = 0;
    }
    n = ckpt_note_count(r->f);
    for (i = 0; i < n; i++) {
        const char *note = ckpt_note_at(r->f, i);
        fputs(first ? "" : ", ", stdout);
        json_str(note ? note : "");
        first = 0;
    }
    fputs("]}\n", stdout);
    if (oom) return cli_error("%s: out of memory", r->path);
    return CLI_OK;
}

typedef struct info_opts {
    int json, all, depth, multi;
    const char *key;
} info_opts;

static int info_one(const char *path, void *ctx)
{
    const info_opts *o = ctx;
    ckpt_options opt;
    ckpt_error err, first;
    report r;
    int rc;

    memset(&r, 0, sizeof r);
    r.depth = o->depth;
    r.all_keys = o->all;
    r.path = path;
    r.key = o->key;

    cli_options(&opt);
    if (cli_doc_open(&r.doc, r.path, o->key, &opt, &err) != 0 && err.code == CKPT_E_UNSUPPORTED) {
        /* a tensor layout ckpt does not read: describe the rest */
        first = err;
        opt.skip_tensors = 1;
        if (cli_doc_open(&r.doc, r.path, o->key, &opt, &err) == 0)
            r.skipped = first.message;
        else
            err = first;
    }
    r.f = r.doc.f;
    if (!r.f) {
        if (o->json && o->multi) cli_json_error_line(path, &err);
        return cli_report(r.path, &err);
    }
    ckpt_get_info(r.f, &r.info);
    /* under --key: the storages its tensors view; else the file's */
    r.sum = ckpt_summarize(r.f, o->key ? r.doc.root : NULL, NULL, &err);
    if (!r.sum) {
        if (o->json && o->multi) cli_json_error_line(path, &err);
        rc = cli_report(r.path, &err);
    } else {
        r.tot = ckpt_summary_get_totals(r.sum);
        rc = o->json ? print_json(&r) : print_text(&r);
    }
    ckpt_summary_free(r.sum);
    cli_doc_close(&r.doc);
    return rc;
}

int cmd_info(int argc, char **argv)
{
    int nops = 0, rc;
    const char *depth = NULL;
    char **ops;
    info_opts o;
    const cli_option options[] = {
        {"--json", 0, 0, NULL, &o.json},
        {"--key", 0, 1, &o.key, NULL},
        {"--depth", 0, 1, &depth, NULL},
        {"--all", 0, 0, NULL, &o.all},
    };

    memset(&o, 0, sizeof o);
    rc = cli_parse_files(argc, argv, options, sizeof options / sizeof options[0], usage, &ops,
                         &nops);
    o.depth = -1;
    if (rc == CLI_CONTINUE && depth) {
        char *end;
        long d = strtol(depth, &end, 10);
        if (*depth == '\0' || *end != '\0' || d < 1 || d > 100000)
            rc = cli_usage_error("info: --depth takes a number from 1 up, "
                                 "not '%s'",
                                 depth);
        o.depth = (int)d;
    }
    o.multi = nops > 1;
    if (rc == CLI_CONTINUE) rc = cli_batch(ops, nops, o.json, info_one, &o);
    free(ops);
    return rc;
}
