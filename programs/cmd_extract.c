/*
 * cmd_extract.c - `ckpt extract`: tensors as NumPy .npy files.
 */
#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L
#endif

#include "cli.h"
#include "ckpt_export.h"
#include "progress.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>

static const char usage[] =
    "Usage: ckpt extract [--key K] [--force] [--sync] FILE NAME -o OUT.npy\n"
    "       ckpt extract [--key K] [--filter GLOB] [--force] [--sync] FILE [NAME] -d DIR\n"
    "Write tensors as NumPy .npy files (format 1.0) that\n"
    "numpy.load(path, allow_pickle=False) reads: C order, little-endian,\n"
    "the data 64-byte aligned.  With -o, tensor NAME (as listed by 'ckpt ls';\n"
    "\"\" for a tensor at the root) goes to OUT.npy ('-': standard output).\n"
    "With -d, every tensor (or only NAME) goes to DIR/<name>.npy, DIR and its\n"
    "parents being created if missing; one line per file is printed: the\n"
    "tensor name as a JSON string, \" -> \", the path.  Files are written\n"
    "under a temporary name and appear when complete.  Existing files are\n"
    "never replaced without --force (with -d: checked for every file before\n"
    "the first is written); a device or a FIFO given as OUT is written in\n"
    "place.  A symlink in DIR is the entry itself: --force replaces it by a\n"
    "new file (mode 0666 & ~umask), never writing its target.  No file of the\n"
    "input (FILE, a shard, index or DCP file of it) is ever written: with -d,\n"
    "checked for every file before the first is written.\n"
    "FILE '-' reads the checkpoint from standard input.\n"
    "A tensor ckpt lists but cannot read (a meta or nested tensor, ...) is\n"
    "skipped by -d with a note naming it on stderr.\n"
    "\n"
    "File names under DIR are made safe: '/', and what 'ckpt ls' shows\n"
    "escaped ('\\', control characters, NUL, bidi and other invisible\n"
    "characters such as U+202E, bytes that are not UTF-8) become '_', leading\n"
    "dots become '_', \"\" becomes _root, names are cut to 200 bytes; names\n"
    "that collide (also when compared ignoring ASCII case) get ~2, ~3, ...\n"
    "appended.  Nothing is ever written outside DIR.  The line printed for\n"
    "each file has the name as JSON (bidi and invisible characters as\n"
    "\\uXXXX) and the path escaped.  Two tensors with one name (keys that\n"
    "flatten to one name) are refused before anything is written, naming\n"
    "both key paths: choose one with --key.\n"
    "\n" NAME_HELP "\n"
    "Element types (torch dtype -> numpy descr):\n"
    "  float64 <f8, float32 <f4, float16 <f2, int64 <i8, int32 <i4,\n"
    "  int16 <i2, int8 |i1, uint8 |u1, uint16 <u2, uint32 <u4, uint64 <u8,\n"
    "  bool |b1, complex64 <c8, complex128 <c16;\n"
    "  bfloat16 -> <u2: the raw bits (numpy has no bfloat16; widen with\n"
    "    (a.astype('<u4') << 16).view('<f4'));\n"
    "  float8_e4m3fn, float8_e5m2, float8_e4m3fnuz, float8_e5m2fnuz,\n"
    "    float8_e8m0fnu -> |u1: the raw bits;\n"
    "  bits8, bits1x8, bits2x4, bits4x2 -> |u1, bits16 -> <u2: the raw bits;\n"
    "  complex32 -> <f2 with a trailing dimension of 2 (real, imaginary).\n"
    "\n"
    "Options:\n"
    "  -o, --output OUT  write tensor NAME to OUT\n"
    "  -d, --dir DIR     write into DIR\n"
    "  --filter GLOB     with -d: only tensors whose name matches the shell\n"
    "                    pattern GLOB (fnmatch: '*' also matches dots), or\n"
    "                    whose escaped form (as ls shows it) does\n"
    "  --force           replace files that exist\n"
    "  --sync            flush each file to disk before it appears (like cp,\n"
    "                    the default does not)\n"
    "  --key K           only what is under key K (e.g. state_dict), a top-level\n"
    "                    key or a path of keys (optimizer.state.0), as for ls\n"
    "  -h, --help        show this help\n";

#define SAFE_MAX 200 /* bytes of a file name before ".npy" */

/* ------------------------------------------------------------------------ */
/* Writing one .npy                                                           */
/* ------------------------------------------------------------------------ */

/* ckpt_write_fn over a FILE, keeping the errno of a failed write. */
typedef struct sink {
    FILE *fp;
    int e;
} sink;

/* One bar for the whole command: every tensor written, in bytes. */
static progress bar;

static int sink_write(void *ctx, const void *buf, size_t n)
{
    sink *k = ctx;
    progress_advance(&bar, n);
    if (fwrite(buf, 1, n, k->fp) == n) return 0;
    k->e = errno != 0 ? errno : EIO;
    return -1;
}

/* Header and elements of t to out; on failure report it and return
 * CLI_FAIL. */
static int write_npy(const ckpt_file *f, const char *path, const ckpt_tensor *t, FILE *out,
                     const char *out_name)
{
    sink k;
    ckpt_error err;
    k.fp = out;
    k.e = 0;
    memset(&err, 0, sizeof err);
    err.offset = -1;
    if (ckpt_export_npy_to(f, t, sink_write, &k, &err) == 0) return CLI_OK;
    progress_hide(&bar);
    if (k.e != 0) return cli_error("%s: %s", out_name, strerror(k.e));
    return cli_file_error(path, &err);
}

/* Write t to out_path under the output policy ("-": standard output). */
static int extract_to(const ckpt_file *f, const char *path, const ckpt_tensor *t,
                      const char *out_path, const cli_out_opts *oo)
{
    cli_out o;
    int r;
    if (cli_out_open(&o, out_path, oo) != 0) return CLI_FAIL;
    r = write_npy(f, path, t, o.fp, o.shown);
    progress_hide(&bar);
    if (r == CLI_OK) {
        if (cli_out_commit(&o) != 0) r = CLI_FAIL;
    } else {
        cli_out_abort(&o);
        if (o.is_stdout && cli_stdout_failed()) r = CLI_FAIL; /* reported by cli_stdout_finish() */
    }
    return r;
}

/* ------------------------------------------------------------------------ */
/* Safe file names                                                            */
/* ------------------------------------------------------------------------ */

/* The file name stem for a tensor name name[0..n) (malloc'd): see the
 * usage text.  What ckpt_escape() would escape (control and invisible
 * characters, bidi controls, bytes that are not UTF-8, a backslash) is
 * what becomes '_': a file name shows what ls shows, without escapes. */
static char *safe_stem(const char *name, size_t n)
{
    const unsigned char *s = (const unsigned char *)name;
    size_t i = 0, o = 0;
    char *out;
    int leading = 1;
    if (n == 0) {
        out = malloc(6);
        if (out) memcpy(out, "_root", 6);
        return out;
    }
    out = malloc(SAFE_MAX + 1);
    if (!out) return NULL;
    while (i < n && o < SAFE_MAX) {
        unsigned c = s[i];
        size_t k = c < 0x80 ? 1 : cli_utf8_seq(s + i, n - i);
        if (k == 0 || c == '/' || (leading && c == '.') ||
            ckpt_escape(NULL, 0, name + i, k, (size_t)-1, 0, NULL) != k) {
            out[o++] = '_';
            i += k ? k : 1; /* one '_' a character */
            continue;
        }
        leading = 0;
        if (o + k > SAFE_MAX) break; /* do not cut a character */
        memcpy(out + o, name + i, k);
        o += k;
        i += k;
    }
    out[o] = '\0';
    return out;
}

/* A set of strings compared ignoring ASCII case. */
typedef struct nameset {
    char **keys;
    size_t cap, count;
} nameset;

static size_t fold_hash(const char *s)
{
    uint64_t h = 1469598103934665603ULL;
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c >= 'A' && c <= 'Z') c = (unsigned char)(c - 'A' + 'a');
        h = (h ^ c) * 1099511628211ULL;
    }
    return (size_t)(h ^ (h >> 31));
}

static int fold_eq(const char *a, const char *b)
{
    for (; *a && *b; a++, b++) {
        unsigned char x = (unsigned char)*a, y = (unsigned char)*b;
        if (x >= 'A' && x <= 'Z') x = (unsigned char)(x - 'A' + 'a');
        if (y >= 'A' && y <= 'Z') y = (unsigned char)(y - 'A' + 'a');
        if (x != y) return 0;
    }
    return *a == *b;
}

static int set_has(const nameset *s, const char *k)
{
    size_t i;
    if (!s->cap) return 0;
    for (i = fold_hash(k) & (s->cap - 1); s->keys[i]; i = (i + 1) & (s->cap - 1))
        if (fold_eq(s->keys[i], k)) return 1;
    return 0;
}

/* Add k (not copied: it must outlive the set); 0 or -1 out of memory. */
static int set_add(nameset *s, char *k)
{
    size_t i;
    if ((s->count + 1) * 2 > s->cap) {
        size_t cap = s->cap ? s->cap * 2 : 256, j;
        char **keys = calloc(cap, sizeof *keys);
        if (!keys) return -1;
        for (j = 0; j < s->cap; j++) {
            if (!s->keys[j]) continue;
            for (i = fold_hash(s->keys[j]) & (cap - 1); keys[i]; i = (i + 1) & (cap - 1))
                ;
            keys[i] = s->keys[j];
        }
        free(s->keys);
        s->keys = keys;
        s->cap = cap;
    }
    for (i = fold_hash(k) & (s->cap - 1); s->keys[i]; i = (i + 1) & (s->cap - 1))
        ;
    s->keys[i] = k;
    s->count++;
    return 0;
}

/* File names (stem + ".npy") for tensors[0..n), unique ignoring case:
 * the first tensor to want a name gets it, later ones get "~2", "~3", ...
 * Returns an array of n malloc'd names, or NULL when out of memory. */
static char **assign_names(const ckpt_tensor *const *tensors, size_t n)
{
    char **names = calloc(n ? n : 1, sizeof *names);
    unsigned char *taken = calloc(n ? n : 1, 1);
    nameset set;
    size_t i;
    memset(&set, 0, sizeof set);
    if (!names || !taken) goto oom;
    for (i = 0; i < n; i++) {
        char *stem = safe_stem(tensors[i]->name, tensors[i]->name_len);
        size_t len;
        if (!stem) goto oom;
        len = strlen(stem);
        names[i] = malloc(len + 5);
        if (!names[i]) {
            free(stem);
            goto oom;
        }
        memcpy(names[i], stem, len);
        memcpy(names[i] + len, ".npy", 5);
        free(stem);
        if (!set_has(&set, names[i])) {
            if (set_add(&set, names[i]) != 0) goto oom;
            taken[i] = 1;
        }
    }
    for (i = 0; i < n; i++) {
        size_t len, k;
        char *alt;
        if (taken[i]) continue;
        len = strlen(names[i]) - 4; /* the stem */
        alt = malloc(len + 32);
        if (!alt) goto oom;
        for (k = 2;; k++) {
            memcpy(alt, names[i], len);
            snprintf(alt + len, 32, "~%zu.npy", k);
            if (!set_has(&set, alt)) break;
        }
        free(names[i]);
        names[i] = alt;
        if (set_add(&set, alt) != 0) goto oom;
    }
    free(set.keys);
    free(taken);
    return names;
oom:
    free(set.keys);
    free(taken);
    if (names)
        for (i = 0; i < n; i++) free(names[i]);
    free(names);
    return NULL;
}

/* ------------------------------------------------------------------------ */
/* The command                                                                */
/* ------------------------------------------------------------------------ */

/* DIR/name, without doubling a trailing '/' (malloc'd, or NULL). */
static char *join(const char *dir, const char *name)
{
    size_t dl = strlen(dir), nl = strlen(name);
    char *out;
    while (dl > 1 && dir[dl - 1] == '/') dl--; /* "out/" and "out" alike */
    out = malloc(dl + nl + 2);
    if (!out) return NULL;
    memcpy(out, dir, dl);
    if (dl == 1 && dir[0] == '/') dl = 0; /* "/" + name */
    out[dl] = '/';
    memcpy(out + dl + 1, name, nl + 1);
    return out;
}

static int cmp_ptr(const void *a, const void *b)
{
    uintptr_t x = (uintptr_t) * (const ckpt_tensor *const *)a;
    uintptr_t y = (uintptr_t) * (const ckpt_tensor *const *)b;
    return x < y ? -1 : x > y;
}

/* Names of tensors[0..n) equal byte for byte (keys that flatten to one
 * name): one file each would not say which is which, so nothing is
 * written; the message gives both key paths.  CLI_OK or CLI_FAIL. */
static int refuse_shared_names(const ckpt_file *f, const char *path,
                               const ckpt_tensor *const *tensors, size_t n)
{
    const ckpt_tensor **sorted = malloc((n ? n : 1) * sizeof *sorted);
    const ckpt_tensor *t = NULL, *u = NULL;
    size_t i;
    if (!sorted) return cli_error("%s: out of memory", path);
    if (n) memcpy(sorted, tensors, n * sizeof *sorted);
    qsort(sorted, n, sizeof *sorted, cmp_ptr); /* written ones, by address */
    /* a later tensor of t's name that is written too */
    for (i = 0; i < n && !u; i++)
        for (t = tensors[i], u = ckpt_find_next(f, t); u; u = ckpt_find_next(f, u))
            if (bsearch(&u, sorted, n, sizeof *sorted, cmp_ptr)) break;
    free(sorted);
    if (u) {
        char pa[200], pb[200];
        sbuf b;
        cli_tensor_path(f, t, pa, sizeof pa);
        cli_tensor_path(f, u, pb, sizeof pb);
        memset(&b, 0, sizeof b);
        sb_char(&b, '\'');
        cli_escape(&b, t->name, t->name_len, (size_t)-1, 0);
        sb_char(&b, '\'');
        cli_error("%s: two tensors are named %s, by the key paths %s and %s: -d writes a "
                  "file a name; choose one with --key (nothing written)",
                  path, b.p && !b.oom ? b.p : "?", pa, pb);
        sb_free(&b);
        return CLI_FAIL;
    }
    return CLI_OK;
}

static int extract_dir(const ckpt_file *f, const char *path, const char *dir,
                       const ckpt_tensor *const *tensors, size_t n, const cli_out_opts *oo)
{
    char **names;
    size_t i, existing = 0;
    char *first = NULL;
    int r = CLI_OK;
    struct stat st;
    if (refuse_shared_names(f, path, tensors, n) != CLI_OK) return CLI_FAIL;
    names = assign_names(tensors, n);
    if (!names) return cli_error("%s: out of memory", path);
    /* no clobbering, and never a file of the input (DIR may be the input's
     * own folder): refuse before anything is written */
    for (i = 0; i < n && r == CLI_OK; i++) {
        char *out = join(dir, names[i]);
        if (!out)
            r = cli_error("%s: out of memory", path);
        else if (cli_out_refuse_input(out, oo) != 0)
            r = CLI_FAIL;
        else if (!oo->force && lstat(out, &st) == 0 && existing++ == 0)
            first = out, out = NULL;
        free(out);
    }
    if (r == CLI_OK && existing > 0)
        r = cli_error("%s: already exists%s (--force replaces existing files)", first,
                      existing > 1 ? ", and more files in the folder do" : "");
    free(first);
    for (i = 0; i < n && r == CLI_OK; i++) {
        char *out = join(dir, names[i]);
        if (!out) {
            r = cli_error("%s: out of memory", path);
            break;
        }
        r = extract_to(f, path, tensors[i], out, oo);
        progress_hide(&bar);
        if (r == CLI_OK) { /* the name as JSON, bidi and the like as \uXXXX */
            cli_json_string(stdout, tensors[i]->name, tensors[i]->name_len);
            fputs(" -> ", stdout);
            cli_term_put(stdout, out);
            putchar('\n');
        }
        free(out);
    }
    for (i = 0; i < n; i++) free(names[i]);
    free(names);
    return r;
}

int cmd_extract(int argc, char **argv)
{
    int nops = 0, r, force = 0, sync = 0;
    const char *key = NULL, *out = NULL, *dir = NULL, *filter = NULL;
    cli_out_opts oo;
    cli_inputs inputs;
    char *ops[2];
    const ckpt_tensor *t = NULL;
    const ckpt_tensor **list = NULL;
    ckpt_file *f;
    size_t n = 0, i;
    const cli_option options[] = {
        {"--output", 'o', 1, &out, NULL}, {"--dir", 'd', 1, &dir, NULL},
        {"--key", 0, 1, &key, NULL},      {"--force", 0, 0, NULL, &force},
        {"--sync", 0, 0, NULL, &sync},    {"--filter", 0, 1, &filter, NULL},
    };

    r = cli_parse(argc, argv, options, sizeof options / sizeof options[0], usage, ops, 2, &nops);
    if (r != CLI_CONTINUE) return r;
    if (nops < 1) return cli_usage_error("extract: missing FILE");
    if (out && dir) return cli_usage_error("extract: give -o OUT or -d DIR, not both");
    if (out && nops < 2)
        return cli_usage_error("extract: -o needs the NAME of one tensor "
                               "(use -d DIR for every tensor)");
    if (out && out[0] == '\0') return cli_usage_error("extract: the output file name is empty");
    if (filter && (out || nops == 2))
        return cli_usage_error("extract: --filter selects tensors for -d DIR, not with NAME");

    f = cli_open(ops[0], key);
    if (!f) return CLI_FAIL;
    if (!out && !dir) { /* after the open: a file that cannot be read is 1 */
        ckpt_close(f);
        return cli_usage_error(nops == 2 ? "extract: missing -o OUT.npy (or -d DIR)"
                                         : "extract: missing -d DIR (or NAME -o OUT.npy)");
    }
    if (nops == 2) {
        t = cli_find_tensor(f, ops[0], ops[1]);
        if (!t) { /* cli_find_tensor() said why */
            ckpt_close(f);
            return CLI_FAIL;
        }
    }
    memset(&oo, 0, sizeof oo);
    memset(&inputs, 0, sizeof inputs);
    oo.force = force;
    oo.sync = sync;
    oo.input = ops[0];
    oo.inputs = &inputs;
    if (cli_inputs_add(&inputs, ops[0], f) != 0) {
        r = CLI_FAIL;
    } else if (out) {
        progress_start(&bar, t->nbytes, "extracting");
        r = extract_to(f, ops[0], t, out, &oo);
        progress_finish(&bar);
    } else if ((r = cli_mkdirs(dir)) == CLI_OK) {
        oo.no_follow = 1;
        size_t all = t ? 1 : ckpt_tensor_count(f);
        list = malloc((all ? all : 1) * sizeof *list);
        if (!list) {
            r = cli_error("%s: out of memory", ops[0]);
        } else {
            for (i = 0; i < all; i++) {
                const ckpt_tensor *c = t ? t : ckpt_tensor_at(f, i);
                if (!c || !cli_name_matches(filter, c->name, c->name_len)) continue;
                if (!c->readable) { /* listed but not readable: skipped by name */
                    sbuf why;
                    const char *because = c->unreadable ? c->unreadable : "no data";
                    memset(&why, 0, sizeof why);
                    sb_str(&why, "skipped '");
                    cli_escape(&why, c->name, c->name_len, (size_t)-1, 0);
                    sb_str(&why, "': ");
                    cli_escape(&why, because, strlen(because), (size_t)-1, 0);
                    cli_note(ops[0], why.p && !why.oom ? why.p : "skipped a tensor");
                    sb_free(&why);
                    continue;
                }
                list[n++] = c;
            }
            if (filter && n == 0)
                cli_note(ops[0], "no tensor name matches the --filter pattern; nothing written");
            uint64_t total = 0;
            for (i = 0; i < n; i++)
                total = total + list[i]->nbytes < total ? UINT64_MAX : total + list[i]->nbytes;
            progress_start(&bar, total, "extracting");
            r = extract_dir(f, ops[0], dir, list, n, &oo);
            progress_finish(&bar);
        }
        free((void *)list);
    }
    ckpt_close(f);
    cli_inputs_free(&inputs);
    return r;
}
