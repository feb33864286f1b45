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
    "  --key K     only what is under key K (e.g. state_dict); a K with dots\n"
    "              that is not a top-level key is a path of keys (see\n"
    "              'ckpt ls --help'): tensors, storages and modules are\n"
    "              then counted under it\n"
    "  --depth N   show the module tree N levels deep (default: all)\n"
    "  --all       show every top-level key (default: the first 40)\n"
    "  -h, --help  show this help\n";

#define WALK_MAX_DEPTH 1000
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
    if (cli_escape(b, s, n, limit, 0) < n)
        sb_str(b, "...");
}

/* ------------------------------------------------------------------------ */
/* Counting the tensors under a value                                         */
/* ------------------------------------------------------------------------ */

typedef struct tally {
    const ckpt_file *f;
    cli_ptrmap seen;   /* containers visited and tensors counted */
    uint64_t tensors, params;
    int oom;
} tally;

static void count_value(tally *t, const ckpt_value *v, int depth)
{
    ckpt_kind k;
    size_t i, n;
    if (!v || t->oom || depth > WALK_MAX_DEPTH)
        return;
    k = ckpt_value_kind(v);
    if (k == CKPT_V_TENSOR) {
        const ckpt_tensor *ten = ckpt_value_tensor(t->f, v);
        if (!ten || !ten->name || cli_ptrmap_get(&t->seen, ten)) /* listed tensors only */
            return;
        if (cli_ptrmap_put(&t->seen, ten, "") != 0) {
            t->oom = 1;
            return;
        }
        t->tensors++;
        t->params += ten->numel;
        return;
    }
    if (k != CKPT_V_LIST && k != CKPT_V_TUPLE && k != CKPT_V_SET &&
        k != CKPT_V_DICT && k != CKPT_V_OBJECT)
        return;
    if (cli_ptrmap_get(&t->seen, v))
        return;
    if (cli_ptrmap_put(&t->seen, v, "") != 0) {
        t->oom = 1;
        return;
    }
    if (k == CKPT_V_OBJECT) {
        count_value(t, ckpt_object_args(v), depth + 1);
        count_value(t, ckpt_object_state(v), depth + 1);
        count_value(t, ckpt_object_items(v), depth + 1);
        count_value(t, ckpt_object_list(v), depth + 1);
        return;
    }
    n = ckpt_value_len(v);
    for (i = 0; i < n; i++)
        count_value(t, ckpt_value_item(v, i), depth + 1);
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

/* Describe v on one line into b; tensors/params under it into *nt, *np. */
static void describe(const ckpt_file *f, const ckpt_value *v, sbuf *b,
                     uint64_t *nt, uint64_t *np, int *oom)
{
    ckpt_kind k = v ? ckpt_value_kind(v) : CKPT_V_NONE;
    const char *text, *cls;
    size_t n = 0;
    char tmp[48];
    int container = 0;

    *nt = *np = 0;
    switch (k) {
    case CKPT_V_NONE:
        sb_str(b, "None");
        return;
    case CKPT_V_BOOL:
        sb_str(b, ckpt_value_bool(v) ? "bool True" : "bool False");
        return;
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
            *nt = 1;
            *np = t->numel;
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
    case CKPT_V_STORAGE:
        sb_str(b, "storage");
        return;
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
                 k == CKPT_V_LIST ? "list" : k == CKPT_V_TUPLE ? "tuple" : "set",
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
    if (container) {
        tally t;
        memset(&t, 0, sizeof t);
        t.f = f;
        count_value(&t, v, 0);
        if (t.oom)
            *oom = 1;
        cli_ptrmap_free(&t.seen);
        *nt = t.tensors;
        *np = t.params;
        if (t.tensors) {
            snprintf(tmp, sizeof tmp, " (%llu tensor%s, ",
                     (unsigned long long)t.tensors, t.tensors == 1 ? "" : "s");
            sb_str(b, tmp);
            sb_grouped(b, t.params);
            sb_str(b, t.params == 1 ? " param)" : " params)");
        }
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
/* The module tree                                                            */
/* ------------------------------------------------------------------------ */

typedef struct node {
    char *name;     /* this component */
    size_t parent;  /* index, or (size_t)-1 for the top */
    size_t first, last, next; /* children in first-seen order; (size_t)-1 none */
    uint64_t params, tensors;
    int depth;
} node;

#define NONE ((size_t)-1)

typedef struct tree {
    node *nodes;
    size_t n, cap;
    size_t *slots; /* hash of (parent, name) -> node index + 1 */
    size_t nslots;
    size_t top_first, top_last;
    int oom;
} tree;

static uint64_t hash_key(size_t parent, const char *s, size_t n)
{
    uint64_t h = 1469598103934665603ULL ^ (uint64_t)parent;
    size_t i;
    for (i = 0; i < n; i++) {
        h ^= (unsigned char)s[i];
        h *= 1099511628211ULL;
    }
    return h ^ (h >> 29);
}

static int tree_rehash(tree *t)
{
    size_t ns = t->nslots ? t->nslots * 2 : 1024, i;
    size_t *slots = calloc(ns, sizeof *slots);
    if (!slots)
        return -1;
    for (i = 0; i < t->n; i++) {
        const node *nd = &t->nodes[i];
        size_t h = (size_t)hash_key(nd->parent, nd->name, strlen(nd->name)) & (ns - 1);
        while (slots[h])
            h = (h + 1) & (ns - 1);
        slots[h] = i + 1;
    }
    free(t->slots);
    t->slots = slots;
    t->nslots = ns;
    return 0;
}

/* The child `name` of `parent`, created when missing; NONE when out of
 * memory. */
static size_t tree_child(tree *t, size_t parent, const char *name, size_t len)
{
    size_t h, idx;
    node *nd;
    if ((t->n + 1) * 2 > t->nslots && tree_rehash(t) != 0)
        return NONE;
    h = (size_t)hash_key(parent, name, len) & (t->nslots - 1);
    while (t->slots[h]) {
        nd = &t->nodes[t->slots[h] - 1];
        if (nd->parent == parent && strlen(nd->name) == len &&
            memcmp(nd->name, name, len) == 0)
            return t->slots[h] - 1;
        h = (h + 1) & (t->nslots - 1);
    }
    if (t->n == t->cap) {
        size_t cap = t->cap ? t->cap * 2 : 256;
        node *p = realloc(t->nodes, cap * sizeof *p);
        if (!p)
            return NONE;
        t->nodes = p;
        t->cap = cap;
    }
    idx = t->n;
    nd = &t->nodes[idx];
    memset(nd, 0, sizeof *nd);
    nd->name = malloc(len + 1);
    if (!nd->name)
        return NONE;
    memcpy(nd->name, name, len);
    nd->name[len] = '\0';
    nd->parent = parent;
    nd->first = nd->last = nd->next = NONE;
    nd->depth = parent == NONE ? 0 : t->nodes[parent].depth + 1;
    t->n++;
    t->slots[h] = idx + 1;
    if (parent == NONE) {
        if (t->top_last == NONE)
            t->top_first = idx;
        else
            t->nodes[t->top_last].next = idx;
        t->top_last = idx;
    } else {
        node *p = &t->nodes[parent];
        if (p->last == NONE)
            p->first = idx;
        else
            t->nodes[p->last].next = idx;
        p->last = idx;
    }
    return idx;
}

/* Count a tensor in every module prefix of its name ("a.b.weight": a, a.b). */
static void tree_add(tree *t, const char *name, uint64_t numel)
{
    size_t parent = NONE;
    const char *p = name, *dot;
    while ((dot = strchr(p, '.')) != NULL) {
        size_t idx = tree_child(t, parent, p, (size_t)(dot - p));
        if (idx == NONE) {
            t->oom = 1;
            return;
        }
        t->nodes[idx].params += numel;
        t->nodes[idx].tensors++;
        parent = idx;
        p = dot + 1;
    }
}

static void tree_free(tree *t)
{
    size_t i;
    for (i = 0; i < t->n; i++)
        free(t->nodes[i].name);
    free(t->nodes);
    free(t->slots);
}

/* Nodes in display order (depth first, first-seen order), down to max_depth
 * (-1: all). */
static size_t *tree_order(const tree *t, int max_depth, size_t *count)
{
    size_t *out = malloc((t->n ? t->n : 1) * sizeof *out), n = 0;
    size_t *stack = malloc((t->n ? t->n : 1) * sizeof *stack), sp = 0;
    size_t i;
    if (!out || !stack) {
        free(out);
        free(stack);
        return NULL;
    }
    /* push the top level in reverse so that the first comes out first */
    for (i = t->top_first; i != NONE; i = t->nodes[i].next)
        stack[sp++] = i;
    for (i = 0; i < sp / 2; i++) {
        size_t tmp = stack[i];
        stack[i] = stack[sp - 1 - i];
        stack[sp - 1 - i] = tmp;
    }
    while (sp > 0) {
        size_t idx = stack[--sp], first = sp, c;
        const node *nd = &t->nodes[idx];
        out[n++] = idx;
        if (max_depth >= 0 && nd->depth + 1 >= max_depth)
            continue;
        for (c = nd->first; c != NONE; c = t->nodes[c].next)
            stack[sp++] = c;
        for (c = 0; c < (sp - first) / 2; c++) {
            size_t tmp = stack[first + c];
            stack[first + c] = stack[sp - 1 - c];
            stack[sp - 1 - c] = tmp;
        }
    }
    free(stack);
    *count = n;
    return out;
}

/* A node's dotted name. */
static void node_path(const tree *t, size_t idx, sbuf *b)
{
    if (t->nodes[idx].parent != NONE) {
        node_path(t, t->nodes[idx].parent, b);
        sb_str(b, ".");
    }
    sb_str(b, t->nodes[idx].name);
}

/* ------------------------------------------------------------------------ */
/* The report                                                                 */
/* ------------------------------------------------------------------------ */

/* Counted per dtype number; ckpt.h has no dtype count on purpose (a newer
 * library may add dtypes), so a number past this is simply not counted. */
#define INFO_DTYPES 256

typedef struct dstat {
    uint64_t tensors, params, bytes;
} dstat;

typedef struct report {
    ckpt_file *f;
    cli_doc doc;         /* what --key selected */
    const char *path;
    const char *key;
    const char *skipped; /* why tensors are not listed, or NULL */
    ckpt_info info;
    dstat dt[INFO_DTYPES];
    uint64_t params, storage_bytes;
    tree modules;
    int depth;
    int all_keys;
} report;

static void json_str(const char *s)
{
    cli_json_string(stdout, s, strlen(s));
}

static int gather(report *r)
{
    size_t i, n, ns;
    unsigned char *used = NULL;
    ckpt_get_info(r->f, &r->info);
    n = ckpt_tensor_count(r->f);
    ns = ckpt_storage_count(r->f);
    r->modules.top_first = r->modules.top_last = NONE;
    if (r->doc.prefix) { /* a path of keys: count what is under it */
        used = calloc(ns ? ns : 1, 1);
        if (!used)
            return -1;
        r->info.tensor_count = 0;
        r->info.total_bytes = 0;
    }
    for (i = 0; i < n; i++) {
        const ckpt_tensor *t = ckpt_tensor_at(r->f, i);
        if (!t || (unsigned)t->dtype >= INFO_DTYPES || !cli_doc_has(&r->doc, t))
            continue;
        r->dt[t->dtype].tensors++;
        r->dt[t->dtype].params += t->numel;
        r->dt[t->dtype].bytes += t->nbytes;
        r->params += t->numel;
        tree_add(&r->modules, cli_doc_name(&r->doc, t), t->numel);
        if (used) {
            r->info.tensor_count++;
            r->info.total_bytes += t->nbytes;
            if (t->storage < ns)
                used[t->storage] = 1;
        }
    }
    if (used)
        r->info.storage_count = 0;
    for (i = 0; i < ns; i++) {
        const ckpt_storage *s = ckpt_storage_at(r->f, i);
        if (!s || (used && !used[i]))
            continue;
        r->storage_bytes += s->nbytes;
        if (used)
            r->info.storage_count++;
    }
    free(used);
    return r->modules.oom ? -1 : 0;
}

static void put_clean(const char *s)
{
    sbuf b;
    memset(&b, 0, sizeof b);
    sb_clean(&b, s, strlen(s), (size_t)-1);
    if (b.p)
        fputs(b.p, stdout);
    free(b.p);
}

static int print_text(report *r)
{
    const ckpt_value *root = r->doc.root;
    char g1[40], g2[40], g3[40];
    size_t i, n, wt = 0, wp = 0, wb = 0, wd = 0;
    int oom = 0;

    printf("file:        ");
    put_clean(r->path);
    printf(" (%s bytes)\n", cli_grouped(r->info.file_size, g1, sizeof g1));
    printf("format:      %s", ckpt_format_name(r->info.format));
    if (r->info.version && r->info.version[0])
        printf(", version %s", r->info.version);
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
    printf("tensors:     %s in %s storage%s\n",
           cli_grouped(r->info.tensor_count, g1, sizeof g1),
           cli_grouped(r->info.storage_count, g2, sizeof g2),
           r->info.storage_count == 1 ? "" : "s");
    printf("parameters:  %s (%s bytes", cli_grouped(r->params, g1, sizeof g1),
           cli_grouped(r->info.total_bytes, g2, sizeof g2));
    if (r->storage_bytes != r->info.total_bytes)
        printf("; storages hold %s", cli_grouped(r->storage_bytes, g3, sizeof g3));
    printf(")\n");
    if (r->skipped) {
        fputs("note:        tensors not listed: ", stdout);
        put_clean(r->skipped);
        putchar('\n');
    }
    if (r->info.format == CKPT_FORMAT_TORCHSCRIPT)
        fputs("note:        the weights of a TorchScript archive are not read\n",
              stdout);

    for (i = 0; i < INFO_DTYPES; i++) {
        if (!r->dt[i].tensors)
            continue;
        if (strlen(ckpt_dtype_name((ckpt_dtype)i)) > wd)
            wd = strlen(ckpt_dtype_name((ckpt_dtype)i));
        if (strlen(cli_grouped(r->dt[i].tensors, g1, sizeof g1)) > wt)
            wt = strlen(g1);
        if (strlen(cli_grouped(r->dt[i].params, g1, sizeof g1)) > wp)
            wp = strlen(g1);
        if (strlen(cli_grouped(r->dt[i].bytes, g1, sizeof g1)) > wb)
            wb = strlen(g1);
    }
    if (wd) {
        fputs("dtypes:\n", stdout);
        for (i = 0; i < INFO_DTYPES; i++) {
            if (!r->dt[i].tensors)
                continue;
            printf("  %-*s  %*s tensor%s  %*s params  %*s bytes\n", (int)wd,
                   ckpt_dtype_name((ckpt_dtype)i), (int)wt,
                   cli_grouped(r->dt[i].tensors, g1, sizeof g1),
                   r->dt[i].tensors == 1 ? " " : "s", (int)wp,
                   cli_grouped(r->dt[i].params, g2, sizeof g2), (int)wb,
                   cli_grouped(r->dt[i].bytes, g3, sizeof g3));
        }
    }

    if (root) {
        sbuf line;
        uint64_t nt, np;
        memset(&line, 0, sizeof line);
        if (ckpt_value_kind(root) == CKPT_V_DICT) {
            n = ckpt_value_len(root);
            printf("keys:%s\n", n ? "" : "        (none)");
            for (i = 0; i < n; i++) {
                if (!r->all_keys && i == KEYS_SHOWN) {
                    printf("  ... %s more (--all shows every key)\n",
                           cli_grouped(n - i, g1, sizeof g1));
                    break;
                }
                line.len = 0;
                sb_str(&line, "  ");
                key_text(&line, ckpt_value_key(root, i), i);
                sb_str(&line, ": ");
                describe(r->f, ckpt_value_item(root, i), &line, &nt, &np, &oom);
                if (line.oom || oom)
                    break;
                puts(line.p);
                if (cli_stdout_failed())
                    break;
            }
        } else {
            sb_str(&line, "object:      ");
            describe(r->f, root, &line, &nt, &np, &oom);
            if (!line.oom)
                puts(line.p);
        }
        if (line.oom)
            oom = 1;
        free(line.p);
    }
    if (oom)
        return cli_error("%s: out of memory", r->path);

    if (r->modules.n > 0) {
        size_t count = 0, *order = tree_order(&r->modules, r->depth, &count);
        size_t wn = 0, wc = 0, w;
        if (!order)
            return cli_error("%s: out of memory", r->path);
        for (i = 0; i < count; i++) {
            const node *nd = &r->modules.nodes[order[i]];
            sbuf b;
            memset(&b, 0, sizeof b);
            sb_clean(&b, nd->name, strlen(nd->name), 200);
            w = 2u * (size_t)nd->depth + (b.p ? strlen(b.p) : 0);
            free(b.p);
            if (w > wn)
                wn = w;
            if ((w = strlen(cli_grouped(nd->params, g1, sizeof g1))) > wc)
                wc = w;
        }
        fputs("modules (parameters):\n", stdout);
        for (i = 0; i < count; i++) {
            const node *nd = &r->modules.nodes[order[i]];
            sbuf b;
            memset(&b, 0, sizeof b);
            sb_clean(&b, nd->name, strlen(nd->name), 200);
            w = 2u * (size_t)nd->depth + (b.p ? strlen(b.p) : 0);
            printf("  %*s%s%*s  %*s\n", 2 * nd->depth, "", b.p ? b.p : "",
                   (int)(wn - w), "", (int)wc, cli_grouped(nd->params, g1, sizeof g1));
            free(b.p);
            if ((i & 4095) == 0 && cli_stdout_failed())
                break;
        }
        free(order);
    }
    return CLI_OK;
}

static int print_json(report *r)
{
    const ckpt_value *root = r->doc.root;
    size_t i, n;
    int first = 1, oom = 0;

    fputs("{\"file\": ", stdout);
    json_str(r->path);
    printf(", \"format\": \"%s\", \"version\": ", ckpt_format_name(r->info.format));
    json_str(r->info.version ? r->info.version : "");
    printf(", \"byteorder\": \"%s\", \"root\": ",
           r->info.byteorder == CKPT_BIG ? "big" : "little");
    json_str(r->info.root ? r->info.root : "");
    fputs(", \"key\": ", stdout);
    if (r->key)
        json_str(r->key);
    else
        fputs("null", stdout);
    printf(", \"file_size\": %llu, \"tensors\": %zu, \"storages\": %zu, "
           "\"parameters\": %llu, \"bytes\": %llu, \"storage_bytes\": %llu, "
           "\"dtypes\": [",
           (unsigned long long)r->info.file_size, r->info.tensor_count,
           r->info.storage_count, (unsigned long long)r->params,
           (unsigned long long)r->info.total_bytes,
           (unsigned long long)r->storage_bytes);
    for (i = 0; i < INFO_DTYPES; i++) {
        if (!r->dt[i].tensors)
            continue;
        printf("%s{\"dtype\": \"%s\", \"tensors\": %llu, \"parameters\": %llu, "
               "\"bytes\": %llu}",
               first ? "" : ", ", ckpt_dtype_name((ckpt_dtype)i),
               (unsigned long long)r->dt[i].tensors,
               (unsigned long long)r->dt[i].params,
               (unsigned long long)r->dt[i].bytes);
        first = 0;
    }
    fputs("], \"keys\": [", stdout);
    if (root && ckpt_value_kind(root) == CKPT_V_DICT) {
        sbuf b;
        memset(&b, 0, sizeof b);
        n = ckpt_value_len(root);
        for (i = 0; i < n && !oom; i++) {
            const ckpt_value *k = ckpt_value_key(root, i);
            uint64_t nt, np;
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
            describe(r->f, ckpt_value_item(root, i), &b, &nt, &np, &oom);
            if (b.oom)
                oom = 1;
            fputs(", \"summary\": ", stdout);
            json_str(b.p ? b.p : "");
            printf(", \"tensors\": %llu, \"parameters\": %llu}",
                   (unsigned long long)nt, (unsigned long long)np);
        }
        free(b.p);
    }
    fputs("], \"object\": ", stdout);
    if (root && ckpt_value_kind(root) != CKPT_V_DICT) {
        sbuf b;
        uint64_t nt, np;
        memset(&b, 0, sizeof b);
        describe(r->f, root, &b, &nt, &np, &oom);
        json_str(b.p ? b.p : "");
        free(b.p);
    } else {
        fputs("null", stdout);
    }
    fputs(", \"modules\": [", stdout);
    if (r->modules.n > 0) {
        size_t count = 0, *order = tree_order(&r->modules, r->depth, &count);
        if (!order)
            oom = 1;
        for (i = 0; order && i < count; i++) {
            const node *nd = &r->modules.nodes[order[i]];
            sbuf b;
            memset(&b, 0, sizeof b);
            node_path(&r->modules, order[i], &b);
            fputs(i ? ", {" : "{", stdout);
            cli_json_name(stdout, "name", b.p ? b.p : "");
            printf(", \"depth\": %d, \"tensors\": %llu, \"parameters\": %llu}",
                   nd->depth, (unsigned long long)nd->tensors,
                   (unsigned long long)nd->params);
            if (b.oom)
                oom = 1;
            free(b.p);
        }
        free(order);
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
    if (oom)
        return cli_error("%s: out of memory", r->path);
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
    if (cli_doc_open(&r.doc, r.path, o->key, &opt, &err) != 0 &&
        err.code == CKPT_E_UNSUPPORTED) {
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
        if (o->json && o->multi)
            cli_json_error_line(path, &err);
        return cli_report(r.path, &err);
    }
    if (gather(&r) != 0) {
        rc = cli_error("%s: out of memory", r.path);
    } else {
        rc = o->json ? print_json(&r) : print_text(&r);
    }
    tree_free(&r.modules);
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
    ops = malloc((size_t)(argc > 0 ? argc : 1) * sizeof *ops);
    if (!ops)
        return cli_error("out of memory");
    rc = cli_parse(argc, argv, options, sizeof options / sizeof options[0], usage,
                   ops, argc, &nops);
    if (rc == CLI_CONTINUE && nops < 1)
        rc = cli_usage_error("info: missing FILE");
    o.depth = -1;
    if (rc == CLI_CONTINUE && depth) {
        char *end;
        long d = strtol(depth, &end, 10);
        if (*depth == '\0' || *end != '\0' || d < 1 || d > 100000)
            rc = cli_usage_error("info: --depth takes a number from 1 up, "
                                 "not '%s'", depth);
        o.depth = (int)d;
    }
    o.multi = nops > 1;
    if (rc == CLI_CONTINUE)
        rc = cli_batch(ops, nops, o.json, info_one, &o);
    free(ops);
    return rc;
}
