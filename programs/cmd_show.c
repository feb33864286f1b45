/*
 * cmd_show.c - `ckpt show`: the whole saved object as a tree or as JSON.
 *
 * Tree format, two spaces per level:
 *   epoch: 7
 *   model:
 *     fc.weight: tensor float32 [3, 4]
 *   args: argparse.Namespace(...)
 *     lr: 0.1
 *   history: [0.5, 0.25]
 *   groups: list (2 items)
 *     [0]:
 *       params: [0, 1]
 *     [1]: <ref groups.0>
 * Strings are quoted, long strings and bytes cut with a length note, short
 * lists of scalars written on one line, a container met again (shared or
 * cyclic) as <ref PATH> where PATH joins the labels of its first occurrence
 * with dots.
 */
#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L
#endif

#include "cli.h"
#include "ckpt_walk.h"

#include <stdlib.h>
#include <string.h>

static const char usage[] =
    "Usage: ckpt show [--json] [--key K] FILE...\n"
    "Print the whole saved object (dicts, lists, numbers, strings, tensors,\n"
    "objects of other classes) as an indented tree.  Tensors are shown as\n"
    "'tensor DTYPE [SHAPE]', instances as 'module.Class(...)' with their state\n"
    "below, a container met again (shared or cyclic) as '<ref PATH>'.\n"
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
    "  --key K     only what is under key K (e.g. state_dict); a K with dots\n"
    "              that is not a top-level key is a path of keys\n"
    "              (optimizer.param_groups.0; see 'ckpt ls --help')\n"
    "  -h, --help  show this help\n";

#define SHOW_MAX_DEPTH 1000
#define STR_SHOWN 200     /* bytes of a string shown before cutting */
#define REF_PATH_MAX 1000 /* bytes of a path kept for "<ref PATH>" */
#define BYTES_SHOWN 64    /* bytes of a bytes value shown before cutting */
#define INLINE_ITEMS 16   /* scalar items shown on one line */
#define INLINE_STR 40     /* longest string item in a one-line list */


/* What the walk left at each level (ckpt_walk.h's depth). */
typedef struct sframe {
    size_t path_len;  /* this value's path */
    int child_depth;  /* indentation level of its children */
    int args_inline;  /* an object whose args were shown on its own line */
} sframe;

/* The walk reaches levels 0..SHOW_WALK_LEVELS; the display's own limit is
 * SHOW_MAX_DEPTH (a root dict's entries and an object's dict state take no
 * level of their own, so the display is never deeper than the walk). */
#define SHOW_WALK_LEVELS 2048u

typedef struct show {
    const ckpt_file *f;
    const char *file;
    FILE *out;
    cli_ptrmap seen;  /* containers shown: where, for "<ref PATH>" */
    sbuf line;        /* scratch for one-line values */
    sbuf label;       /* scratch for a dict key's label */
    char *path;
    size_t path_len, path_cap;
    sframe *frames;   /* SHOW_WALK_LEVELS + 1 */
    int failed;
} show;

static int oom(show *s)
{
    if (!s->failed)
        cli_error("%s: out of memory", s->file);
    s->failed = 1;
    return -1;
}

/* ---- the current path --------------------------------------------------- */

static int path_push(show *s, const char *comp, size_t n, size_t *mark)
{
    size_t need = s->path_len + n + 2;
    *mark = s->path_len;
    if (need > s->path_cap) {
        size_t cap = s->path_cap ? s->path_cap : 256;
        char *p;
        while (cap < need)
            cap *= 2;
        p = realloc(s->path, cap);
        if (!p)
            return oom(s);
        s->path = p;
        s->path_cap = cap;
    }
    if (s->path_len > 0)
        s->path[s->path_len++] = '.';
    memcpy(s->path + s->path_len, comp, n);
    s->path_len += n;
    s->path[s->path_len] = '\0';
    return 0;
}

static void path_pop(show *s, size_t mark)
{
    s->path_len = mark;
    if (s->path)
        s->path[mark] = '\0';
}

/* Remember where container v was first shown, for later "<ref PATH>" lines.
 * Paths are cut at REF_PATH_MAX bytes: a crafted pickle nests hundreds of
 * dicts under long keys, and a full copy per container would cost memory
 * quadratic in the depth. */
static int remember(show *s, const ckpt_value *v)
{
    char cut[REF_PATH_MAX + 4];
    const char *path = s->path ? s->path : "";
    if (s->path_len > REF_PATH_MAX) {
        size_t n = REF_PATH_MAX;
        while (n > 0 && ((unsigned char)path[n] & 0xC0) == 0x80)
            n--; /* not inside a character */
        memcpy(cut, path, n);
        memcpy(cut + n, "...", 4);
        path = cut;
    }
    return cli_ptrmap_put(&s->seen, v, path);
}

/* ---- text builder ------------------------------------------------------- */

static void sb_i64(sbuf *b, int64_t x)
{
    char tmp[32];
    int n = snprintf(tmp, sizeof tmp, "%lld", (long long)x);
    sb_add(b, tmp, (size_t)n);
}

/* ---- scalars ------------------------------------------------------------ */

static void indent(show *s, int depth)
{
    int i;
    for (i = 0; i < depth; i++)
        fputs("  ", s->out);
}

/* A quoted string or bytes value, cut after `limit` bytes with a note. */
static void put_quoted(sbuf *b, const char *str, size_t n, int is_bytes)
{
    size_t limit = is_bytes ? BYTES_SHOWN : STR_SHOWN, i;
    char tmp[48];
    if (is_bytes)
        sb_char(b, 'b');
    sb_char(b, '"');
    i = cli_escape(b, str, n, limit,
                   CLI_ESC_QUOTED | (is_bytes ? CLI_ESC_BYTES : 0u));
    sb_char(b, '"');
    if (i < n) {
        snprintf(tmp, sizeof tmp, "... (%zu bytes)", n);
        sb_str(b, tmp);
    }
}

static int is_scalar(const ckpt_value *v, int for_inline)
{
    size_t n;
    if (!v)
        return 1;
    switch (ckpt_value_kind(v)) {
    case CKPT_V_NONE:
    case CKPT_V_BOOL:
    case CKPT_V_INT:
    case CKPT_V_BIGINT:
    case CKPT_V_FLOAT:
        return 1;
    case CKPT_V_STR:
    case CKPT_V_BYTES:
        ckpt_value_text(v, &n);
        return !for_inline || n <= INLINE_STR;
    default:
        return 0;
    }
}

static void put_scalar(sbuf *b, const ckpt_value *v)
{
    const char *t;
    size_t n = 0;
    char tmp[40];
    switch (v ? ckpt_value_kind(v) : CKPT_V_NONE) {
    case CKPT_V_NONE:
        sb_str(b, "None");
        break;
    case CKPT_V_BOOL:
        sb_str(b, ckpt_value_bool(v) ? "True" : "False");
        break;
    case CKPT_V_INT:
        sb_i64(b, ckpt_value_int(v));
        break;
    case CKPT_V_BIGINT:
        t = ckpt_value_text(v, &n);
        sb_add(b, t ? t : "?", t ? n : 1);
        break;
    case CKPT_V_FLOAT:
        n = ckpt_float_repr(ckpt_value_float(v), tmp);
        sb_add(b, tmp, n);
        break;
    case CKPT_V_STR:
    case CKPT_V_BYTES:
        t = ckpt_value_text(v, &n);
        put_quoted(b, t ? t : "", t ? n : 0, ckpt_value_kind(v) == CKPT_V_BYTES);
        break;
    default:
        sb_char(b, '?');
        break;
    }
}

/* Write and clear the builder. */
static int flush_sb(show *s, sbuf *b)
{
    if (b->oom) {
        b->oom = 0;
        b->len = 0;
        return oom(s);
    }
    fwrite(b->p, 1, b->len, s->out);
    b->len = 0;
    return 0;
}

/* ---- labels -------------------------------------------------------------- */

/* A str key that can be shown bare: non-empty and shown as it is (no
 * character that cli_escape() would change). */
static int bare_key(const char *k, size_t n)
{
    sbuf b;
    int same;
    if (n == 0 || n > STR_SHOWN)
        return 0; /* a long key is quoted and cut like a long string */
    memset(&b, 0, sizeof b);
    cli_escape(&b, k, n, n, 0);
    same = !b.oom && b.len == n;
    sb_free(&b);
    return same;
}

/* Text of a dict key into b (cleared first): str keys bare when possible,
 * other scalars and tuples of scalars as Python prints them, anything else
 * "<key N>". */
static void key_text(sbuf *b, const ckpt_value *k, size_t index)
{
    const char *t;
    size_t n = 0, i, m;
    int ok;
    char tmp[40];

    b->len = 0;
    sb_str(b, "");
    if (k && ckpt_value_kind(k) == CKPT_V_STR) {
        t = ckpt_value_text(k, &n);
        if (t && bare_key(t, n)) {
            sb_add(b, t, n);
            return;
        }
    }
    if (k && is_scalar(k, 0)) {
        put_scalar(b, k);
        return;
    }
    if (k && ckpt_value_kind(k) == CKPT_V_TUPLE) {
        m = ckpt_value_len(k);
        ok = m <= INLINE_ITEMS;
        for (i = 0; ok && i < m; i++)
            ok = is_scalar(ckpt_value_item(k, i), 1);
        if (ok) {
            sb_char(b, '(');
            for (i = 0; i < m; i++) {
                if (i > 0)
                    sb_str(b, ", ");
                put_scalar(b, ckpt_value_item(k, i));
            }
            sb_str(b, m == 1 ? ",)" : ")");
            return;
        }
    }
    snprintf(tmp, sizeof tmp, "<key %zu>", index);
    sb_str(b, tmp);
}

/* ---- values --------------------------------------------------------------- */

/* Indentation and "label:" (nothing for the root value). */
static void start_line(show *s, const char *label, int depth)
{
    indent(s, depth);
    if (label) {
        fputs(label, s->out);
        putc(':', s->out);
    }
}

/* Start a one-line value: indentation, "label: ". */
static void start_value(show *s, const char *label, int depth)
{
    start_line(s, label, depth);
    if (label)
        putc(' ', s->out);
}

static const char *seq_name(ckpt_kind k)
{
    return k == CKPT_V_TUPLE ? "tuple" : k == CKPT_V_SET ? "set" : "list";
}

/* A list/tuple/set of scalars on one line into b; 0 if it is not one. */
static int inline_seq(sbuf *b, const ckpt_value *v)
{
    ckpt_kind k = ckpt_value_kind(v);
    size_t n = ckpt_value_len(v), i, shown = n > INLINE_ITEMS ? INLINE_ITEMS : n;
    char tmp[48];
    for (i = 0; i < n; i++)
        if (!is_scalar(ckpt_value_item(v, i), 1))
            return 0;
    if (n == 0) {
        sb_str(b, k == CKPT_V_TUPLE ? "()" : k == CKPT_V_SET ? "set()" : "[]");
        return 1;
    }
    sb_str(b, k == CKPT_V_TUPLE ? "(" : k == CKPT_V_SET ? "{" : "[");
    for (i = 0; i < shown; i++) {
        if (i > 0)
            sb_str(b, ", ");
        put_scalar(b, ckpt_value_item(v, i));
    }
    if (k == CKPT_V_TUPLE && n == 1)
        sb_char(b, ',');
    if (shown < n)
        sb_str(b, ", ...");
    sb_str(b, k == CKPT_V_TUPLE ? ")" : k == CKPT_V_SET ? "}" : "]");
    if (shown < n) {
        snprintf(tmp, sizeof tmp, " (%zu items)", n);
        sb_str(b, tmp);
    }
    return 1;
}

/* "module.Class(args)"; its parts come next in the walk, one level deeper:
 * the args when they were not shown inline, the state's entries (or
 * "state:"), "items:", "list:". */
static int show_object(show *s, const char *label, const ckpt_value *v, int depth,
                       sframe *fr)
{
    const char *cls = ckpt_value_class(v);
    const ckpt_value *args = ckpt_object_args(v);
    const ckpt_value *state = ckpt_object_state(v);
    const ckpt_value *items = ckpt_object_items(v);
    const ckpt_value *list = ckpt_object_list(v);
    int args_inline = 0;
    size_t nargs = args ? ckpt_value_len(args) : 0, i;

    start_value(s, label, depth);
    cli_term_put(s->out, cls ? cls : "?");
    if (args && ckpt_value_kind(args) == CKPT_V_TUPLE && nargs <= INLINE_ITEMS) {
        args_inline = 1;
        for (i = 0; i < nargs; i++)
            if (!is_scalar(ckpt_value_item(args, i), 1))
                args_inline = 0;
    }
    if (!args || (args_inline && nargs == 0)) {
        fputs(state || items || list ? "(...)" : "()", s->out);
        args_inline = 1;
    } else if (args_inline) {
        sb_char(&s->line, '(');
        for (i = 0; i < nargs; i++) {
            if (i > 0)
                sb_str(&s->line, ", ");
            put_scalar(&s->line, ckpt_value_item(args, i));
        }
        sb_char(&s->line, ')');
        if (flush_sb(s, &s->line) != 0)
            return -1;
    } else {
        fputs("(...)", s->out);
    }
    putc('\n', s->out);
    fr->args_inline = args_inline;
    fr->child_depth = depth + 1;
    return 0;
}

static void show_tensor(show *s, const ckpt_value *v)
{
    const ckpt_tensor *t = ckpt_value_tensor(s->f, v);
    uint32_t i;
    fputs("tensor", s->out);
    if (!t)
        return;
    fprintf(s->out, " %s [", ckpt_dtype_name(t->dtype));
    for (i = 0; i < t->ndim; i++)
        fprintf(s->out, i ? ", %lld" : "%lld", (long long)t->shape[i]);
    putc(']', s->out);
}

/* One value under `label` at indentation `depth`; for a container, what
 * the walk does next: 0 enter it, CKPT_WALK_SKIP not (shown on one line,
 * or as a reference), -1 fail. */
static int show_value(show *s, const char *label, const ckpt_walk_step *st, int depth,
                      sframe *fr)
{
    const ckpt_value *v = st->value;
    ckpt_kind kind;
    const char *ref, *text;
    size_t n = 0;

    if (!v || is_scalar(v, 0)) {
        start_value(s, label, depth);
        put_scalar(&s->line, v);
        if (flush_sb(s, &s->line) != 0)
            return -1;
        putc('\n', s->out);
        return 0;
    }
    kind = ckpt_value_kind(v);
    switch (kind) {
    case CKPT_V_TENSOR:
        start_value(s, label, depth);
        show_tensor(s, v);
        putc('\n', s->out);
        return 0;
    case CKPT_V_GLOBAL:
        start_value(s, label, depth);
        text = ckpt_value_class(v);
        fputs("global ", s->out);
        cli_term_put(s->out, text ? text : "?");
        putc('\n', s->out);
        return 0;
    case CKPT_V_STORAGE:
        start_value(s, label, depth);
        text = ckpt_value_text(v, &n);
        if (text) {
            fputs("storage ", s->out);
            cli_escape(&s->line, text, n, 200, 0);
            if (flush_sb(s, &s->line) != 0)
                return -1;
            putc('\n', s->out);
        } else
            fputs("storage\n", s->out);
        return 0;
    case CKPT_V_LIST:
    case CKPT_V_TUPLE:
    case CKPT_V_SET:
    case CKPT_V_DICT:
    case CKPT_V_OBJECT:
        break;
    default:
        start_value(s, label, depth);
        fprintf(s->out, "<%s>\n", ckpt_kind_name(kind));
        return 0;
    }

    /* containers: shown once, a reference after that.  The walk also
     * calls a container shared when it was met as an object's inline args
     * (never shown as a container): it is shown here the first time, on
     * one line, since such args are scalars only. */
    ref = cli_ptrmap_get(&s->seen, v);
    if (ref) {
        start_value(s, label, depth);
        fprintf(s->out, "<ref %s>\n", ref[0] ? ref : "(root)");
        return CKPT_WALK_SKIP;
    }
    if (depth > SHOW_MAX_DEPTH || st->too_deep) {
        cli_error("%s: nesting deeper than %d", s->file, SHOW_MAX_DEPTH);
        s->failed = 1;
        return -1;
    }
    if (remember(s, v) != 0)
        return oom(s);

    if (kind == CKPT_V_OBJECT)
        return show_object(s, label, v, depth, fr);
    if (kind == CKPT_V_DICT) {
        if (ckpt_value_len(v) == 0) {
            start_value(s, label, depth);
            fputs("{}\n", s->out);
            return CKPT_WALK_SKIP;
        }
        if (!label) /* the root dict: its entries at the left margin */
            return 0;
        start_line(s, label, depth);
        putc('\n', s->out);
        fr->child_depth = depth + 1;
        return 0;
    }
    /* LIST, TUPLE, SET */
    if (!label && ckpt_value_len(v) > 0) /* the root: items at the margin */
        return 0;
    start_value(s, label, depth);
    if (inline_seq(&s->line, v))
        return flush_sb(s, &s->line) == 0 && putc('\n', s->out) != EOF ? CKPT_WALK_SKIP : -1;
    s->line.len = 0;
    fprintf(s->out, "%s (%zu item%s)\n", seq_name(kind), ckpt_value_len(v),
            ckpt_value_len(v) == 1 ? "" : "s");
    if (st->shared) /* cannot happen (see above); never show a part of it */
        return CKPT_WALK_SKIP;
    fr->child_depth = depth + 1;
    return 0;
}

/* The walk's callback: the label and path of the value from its place in
 * its container, then the value. */
static int show_enter(void *ctx, const ckpt_walk_step *st)
{
    static const char *const parts[] = {"args", "state", "items", "list"};
    show *s = ctx;
    sframe *fr = &s->frames[st->depth];
    const sframe *up = st->parent ? &s->frames[st->depth - 1] : NULL;
    const char *label = NULL, *comp;
    char seq_label[32], seq_comp[32];
    size_t mark;

    if (s->failed)
        return -1;
    if (cli_stdout_failed()) {
        s->failed = 1; /* reported by cli_stdout_finish() */
        return -1;
    }
    path_pop(s, up ? up->path_len : 0);
    fr->path_len = s->path_len;
    fr->child_depth = up ? up->child_depth : 0;
    fr->args_inline = 0;
    if (!up)
        return show_value(s, NULL, st, 0, fr);
    switch (ckpt_value_kind(st->parent->value)) {
    case CKPT_V_OBJECT:
        if (st->index == CKPT_WALK_ARGS && up->args_inline)
            return CKPT_WALK_SKIP; /* shown on the object's line */
        if (st->index == CKPT_WALK_STATE && ckpt_value_kind(st->value) == CKPT_V_DICT &&
            !cli_ptrmap_get(&s->seen, st->value)) {
            /* a dict state (the usual __dict__) is shown as the object's
             * own entries; a later reference to it points at the object */
            return remember(s, st->value) != 0 ? oom(s) : 0;
        }
        label = comp = parts[st->index < 4 ? st->index : 0];
        break;
    case CKPT_V_DICT:
        key_text(&s->label, st->key, st->index);
        if (s->label.oom)
            return oom(s);
        label = comp = s->label.p;
        break;
    default:
        snprintf(seq_label, sizeof seq_label, "[%zu]", st->index);
        snprintf(seq_comp, sizeof seq_comp, "%zu", st->index);
        label = seq_label;
        comp = seq_comp;
        break;
    }
    if (path_push(s, comp, strlen(comp), &mark) != 0)
        return -1;
    fr->path_len = s->path_len;
    return show_value(s, label, st, up->child_depth, fr);
}

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
        if (!j->buf.oom)
            return 0;
        j->buf.oom = 0; /* no memory for more: stream what there is */
    }
    if (!j->streaming) {
        j->streaming = 1;
        if (j->buf.len && fwrite(j->buf.p, 1, j->buf.len, stdout) != j->buf.len)
            return -1;
        sb_free(&j->buf);
    }
    return fwrite(p, 1, n, stdout) == n ? 0 : -1;
}

typedef struct show_opts {
    int json, multi;
    const char *key;
    ckpt_options opt;
} show_opts;

static int show_json(const cli_doc *d, const char *path, int multi)
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
        if (!m)
            return cli_error("out of memory");
        fputs("{\"file\": ", m);
        cli_json_string(m, path, strlen(path));
        fputs(", \"value\": ", m);
        fclose(m);
        if (!p)
            return cli_error("out of memory");
        sb_add(&j.buf, p, n);
        free(p);
    }
    r = ckpt_value_to_json(d->f, d->root, multi ? 0 : 2, write_json, &j, &err);
    if (r == 0)
        r = write_json(&j, multi ? "}\n" : "\n", multi ? 2 : 1);
    if (r == 0 && !j.streaming && j.buf.len &&
        fwrite(j.buf.p, 1, j.buf.len, stdout) != j.buf.len)
        r = -1;
    sb_free(&j.buf);
    if (r == 0)
        return CLI_OK;
    if (cli_stdout_failed())
        return CLI_FAIL; /* reported by cli_stdout_finish() */
    if (j.streaming) {
        putchar('\n');
        cli_json_error_line(path, &err);
    } else if (multi) {
        cli_json_error_line(path, &err);
    }
    fflush(stdout);
    return cli_report(path, &err);
}

static int show_tree(const cli_doc *d, const char *path)
{
    show s;
    const ckpt_value *root = d->root;
    ckpt_walk_callbacks cb = {show_enter, NULL};
    ckpt_walk_options opt;
    ckpt_error err;
    int r;
    memset(&s, 0, sizeof s);
    s.f = d->f;
    s.file = path;
    s.out = stdout;
    if (!root)
        return CLI_OK;
    s.frames = calloc(SHOW_WALK_LEVELS + 1, sizeof *s.frames);
    if (!s.frames)
        return cli_error("%s: out of memory", path);
    ckpt_walk_options_init(&opt);
    opt.max_depth = SHOW_WALK_LEVELS;
    opt.skip_deep = 1; /* show_value() says "nesting deeper than ..." */
    r = ckpt_value_walk(d->f, root, &cb, &s, &opt, &err);
    if (r != 0 && !s.failed && err.code != CKPT_OK)
        cli_report(path, &err);
    cli_ptrmap_free(&s.seen);
    free(s.line.p);
    free(s.label.p);
    free(s.path);
    free(s.frames);
    return r == 0 ? CLI_OK : CLI_FAIL;
}

static int show_one(const char *path, void *ctx)
{
    show_opts *o = ctx;
    cli_doc d;
    ckpt_error err;
    int r;
    if (cli_doc_open(&d, path, o->key, &o->opt, &err) != 0) {
        if (o->json && o->multi)
            cli_json_error_line(path, &err);
        return cli_report(path, &err);
    }
    r = o->json ? show_json(&d, path, o->multi) : show_tree(&d, path);
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
    ops = malloc((size_t)(argc > 0 ? argc : 1) * sizeof *ops);
    if (!ops)
        return cli_error("out of memory");
    r = cli_parse(argc, argv, options, sizeof options / sizeof options[0], usage,
                  ops, argc, &nops);
    if (r == CLI_CONTINUE && nops < 1)
        r = cli_usage_error("show: missing FILE");
    if (r == CLI_CONTINUE) {
        cli_options(&o.opt);
        o.multi = nops > 1;
        r = cli_batch(ops, nops, o.json, show_one, &o);
    }
    free(ops);
    return r;
}
