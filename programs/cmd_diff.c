/*
 * cmd_diff.c - `ckpt diff A B`: compare the tensors of two checkpoints.
 *
 * Names only in A or only in B, dtype or shape changes, and for tensors of
 * equal dtype and shape whether their elements are byte-identical (the
 * native-order images compared through ckpt_tensor_read_range() in
 * bounded chunks, so memory stays small whatever the sizes), and with
 * --max-abs the largest absolute difference of float and complex tensors,
 * computed in float64.  Exit status as cmp(1) and diff(1): 0 same, 1
 * different, 2 trouble.
 */
#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L
#endif

#include "cli.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static const char usage[] =
    "Usage: ckpt diff [--key K] [--filter GLOB] [--max-abs] [--json] A B\n"
    "Compare the tensors of checkpoints A and B (any formats ckpt reads), by\n"
    "name (every byte of it; a name several tensors have, from keys that\n"
    "flatten to one name, pairs the first in A with the first in B, and so\n"
    "on): names only in A or only in B, dtype or shape changes, and, for\n"
    "tensors of equal dtype and shape, whether their elements are\n"
    "byte-identical (read in chunks of 1 MiB: memory stays small).  Only\n"
    "tensors are compared, not the other values of the files (epoch, ...).\n"
    "\n"
    "Text output, one line per difference (names escaped as 'ckpt ls' does):\n"
    "  only in A: NAME\n"
    "  only in B: NAME\n"
    "  dtype: NAME: float32 -> float16\n"
    "  shape: NAME: [2, 3] -> [3, 2]\n"
    "  values: NAME            (with --max-abs: values: NAME: max abs diff X)\n"
    "then a summary line: 'N compared, N identical, N differ, N only in A,\n"
    "N only in B'.\n"
    "\n"
    "Options:\n"
    "  --key K        only the tensors under key K of both files, names relative\n"
    "                 to it: a top-level key or a path of keys, as for ls (K\n"
    "                 typed as names are shown: \\x00, \\u202e decoded)\n"
    "  --filter GLOB  only the tensors whose name matches GLOB (fnmatch;\n"
    "                 '*' also matches '.'; or its escaped form matches)\n"
    "  --max-abs      for float tensors (float64/32/16, bfloat16, float8\n"
    "                 e4m3fn/e5m2 and their fnuz forms, e8m0fnu) and complex\n"
    "                 ones (complex64/128/32: the modulus), also the largest\n"
    "                 |a - b|, computed in float64 (torch's\n"
    "                 (a.double() - b.double()).abs().max()); nan when a NaN\n"
    "                 meets a different value; every element is then read\n"
    "  --json         one JSON object: {\"a\", \"b\", \"equal\", \"compared\",\n"
    "                 \"identical\", \"only_a\": [names], \"only_b\": [names],\n"
    "                 \"changed\": [{\"name\", \"what\": \"dtype\"|\"shape\"|\"values\",\n"
    "                 \"a\", \"b\" (dtypes or shapes), \"max_abs\"}]}\n"
    "  -h, --help     show this help\n"
    "\n"
    "Exit status, as cmp(1) and diff(1): 0 the tensors are the same, 1 they\n"
    "differ, 2 trouble (a usage error, a file that cannot be read, a failed\n"
    "write to standard output).\n";

#define CHUNK (1u << 20)
#define DIFF_TROUBLE 2

typedef struct diff_ctx {
    const char *pa, *pb;
    ckpt_file *a, *b;
    const char *filter;
    int max_abs, json;
    unsigned char *ba, *bb;
    size_t compared, identical, differ, only_a, only_b;
    int first_changed, first_a, first_b;
    sbuf only_a_json, only_b_json, changed_json;
} diff_ctx;

/* ---- decoding for --max-abs --------------------------------------------- */

static double half_to_double(uint16_t h)
{
    int e = (h >> 10) & 0x1F;
    double m = h & 0x3FF, v;
    if (e == 0)
        v = ldexp(m, -24);
    else if (e == 31)
        v = m != 0 ? NAN : INFINITY;
    else
        v = ldexp(m + 1024, e - 25);
    return (h & 0x8000) ? -v : v;
}

/* A float8 byte: `mbits` mantissa bits, exponent `bias`; fn: no infinity,
 * all ones is NaN; fnuz: 0x80 is NaN, no negative zero. */
static double f8_to_double(uint8_t x, int mbits, int bias, int kind)
{
    int ebits = 7 - mbits;
    int e = (x >> mbits) & ((1 << ebits) - 1);
    int m = x & ((1 << mbits) - 1);
    double v;
    if (kind == 2 && x == 0x80) return NAN;                                      /* fnuz */
    if (kind == 1 && e == (1 << ebits) - 1 && m == (1 << mbits) - 1) return NAN; /* fn */
    if (kind == 0 && e == (1 << ebits) - 1) return m ? NAN : ((x & 0x80) ? -INFINITY : INFINITY);
    if (e == 0)
        v = ldexp((double)m, 1 - bias - mbits);
    else
        v = ldexp((double)(m + (1 << mbits)), e - bias - mbits);
    return (x & 0x80) ? -v : v;
}

/* Element i of p (native order) as a double, and its imaginary part in *im
 * for complex dtypes.  Returns the number of parts (1, 2), 0 when the
 * dtype is not compared numerically. */
static int element(ckpt_dtype dt, const unsigned char *p, size_t i, double *re, double *im)
{
    uint16_t h;
    uint32_t u;
    float f;
    double d;
    switch (dt) {
    case CKPT_FLOAT64:
        memcpy(&d, p + 8 * i, 8);
        *re = d;
        return 1;
    case CKPT_FLOAT32:
        memcpy(&f, p + 4 * i, 4);
        *re = f;
        return 1;
    case CKPT_FLOAT16:
        memcpy(&h, p + 2 * i, 2);
        *re = half_to_double(h);
        return 1;
    case CKPT_BFLOAT16:
        memcpy(&h, p + 2 * i, 2);
        u = (uint32_t)h << 16;
        memcpy(&f, &u, 4);
        *re = f;
        return 1;
    case CKPT_FLOAT8_E4M3FN: *re = f8_to_double(p[i], 3, 7, 1); return 1;
    case CKPT_FLOAT8_E5M2: *re = f8_to_double(p[i], 2, 15, 0); return 1;
    case CKPT_FLOAT8_E4M3FNUZ: *re = f8_to_double(p[i], 3, 8, 2); return 1;
    case CKPT_FLOAT8_E5M2FNUZ: *re = f8_to_double(p[i], 2, 16, 2); return 1;
    case CKPT_FLOAT8_E8M0FNU: *re = p[i] == 0xFF ? NAN : ldexp(1.0, (int)p[i] - 127); return 1;
    case CKPT_COMPLEX64:
        memcpy(&f, p + 8 * i, 4);
        *re = f;
        memcpy(&f, p + 8 * i + 4, 4);
        *im = f;
        return 2;
    case CKPT_COMPLEX128:
        memcpy(&d, p + 16 * i, 8);
        *re = d;
        memcpy(&d, p + 16 * i + 8, 8);
        *im = d;
        return 2;
    case CKPT_COMPLEX32:
        memcpy(&h, p + 4 * i, 2);
        *re = half_to_double(h);
        memcpy(&h, p + 4 * i + 2, 2);
        *im = half_to_double(h);
        return 2;
    default: return 0;
    }
}

static int is_numeric(ckpt_dtype dt)
{
    double re, im;
    static const unsigned char zero[16];
    return element(dt, zero, 0, &re, &im) > 0;
}

/* max |a - b| over n elements; NaN once any difference is NaN (torch's max
 * propagates NaN). */
static void fold_max(ckpt_dtype dt, const unsigned char *a, const unsigned char *b, size_t n,
                     double *mx)
{
    size_t i;
    for (i = 0; i < n; i++) {
        double ar = 0, ai = 0, br = 0, bi = 0, d;
        int parts = element(dt, a, i, &ar, &ai);
        element(dt, b, i, &br, &bi);
        d = parts == 2 ? hypot(ar - br, ai - bi) : fabs(ar - br);
        if (isnan(d) || isnan(*mx))
            *mx = NAN;
        else if (d > *mx)
            *mx = d;
    }
}

/* ---- output -------------------------------------------------------------- */

static void put_shape(FILE *out, const ckpt_tensor *t)
{
    uint32_t d;
    fputc('[', out);
    for (d = 0; d < t->ndim; d++) fprintf(out, "%s%lld", d ? ", " : "", (long long)t->shape[d]);
    fputc(']', out);
}

static void put_double(FILE *out, double x, int json)
{
    char buf[40];
    ckpt_float_repr(x, buf);
    if (json && !isfinite(x))
        fprintf(out, "\"%s\"", buf);
    else
        fputs(buf, out);
}

/* Append the JSON form of a name (n bytes) to b. */
static void json_name_to(sbuf *b, const char *field, const char *name, size_t len)
{
    char *p = NULL;
    size_t n = 0;
    FILE *m = open_memstream(&p, &n);
    if (!m) {
        b->oom = 1;
        return;
    }
    if (field)
        cli_json_name(m, field, name, len);
    else
        cli_json_string(m, name, len);
    fclose(m);
    if (p) sb_add(b, p, n);
    free(p);
}

static void report_only(diff_ctx *c, int in_a, const char *name, size_t len)
{
    if (c->json) {
        sbuf *b = in_a ? &c->only_a_json : &c->only_b_json;
        int *first = in_a ? &c->first_a : &c->first_b;
        if (!*first) sb_str(b, ", ");
        *first = 0;
        json_name_to(b, NULL, name, len);
        return;
    }
    fputs(in_a ? "only in A: " : "only in B: ", stdout);
    if (len == 0) fputs("\"\"", stdout);
    cli_term_put_n(stdout, name, len);
    putchar('\n');
}

/* what: "dtype", "shape" or "values". */
static void report_change(diff_ctx *c, const char *what, const ckpt_tensor *ta,
                          const ckpt_tensor *tb, int have_max, double mx)
{
    if (c->json) {
        char *p = NULL;
        size_t n = 0;
        FILE *m = open_memstream(&p, &n);
        if (!m) {
            c->changed_json.oom = 1;
            return;
        }
        if (!c->first_changed) fputs(", ", m);
        c->first_changed = 0;
        fputc('{', m);
        cli_json_name(m, "name", ta->name, ta->name_len);
        fprintf(m, ", \"what\": \"%s\", \"a\": ", what);
        if (strcmp(what, "dtype") == 0)
            fprintf(m, "\"%s\", \"b\": \"%s\"", ckpt_dtype_name(ta->dtype),
                    ckpt_dtype_name(tb->dtype));
        else if (strcmp(what, "shape") == 0) {
            put_shape(m, ta);
            fputs(", \"b\": ", m);
            put_shape(m, tb);
        } else
            fputs("null, \"b\": null", m);
        fputs(", \"max_abs\": ", m);
        if (have_max)
            put_double(m, mx, 1);
        else
            fputs("null", m);
        fputc('}', m);
        fclose(m);
        if (p) sb_add(&c->changed_json, p, n);
        free(p);
        return;
    }
    printf("%s: ", what);
    if (ta->name_len == 0) fputs("\"\"", stdout);
    cli_term_put_n(stdout, ta->name, ta->name_len);
    if (strcmp(what, "dtype") == 0) {
        printf(": %s -> %s", ckpt_dtype_name(ta->dtype), ckpt_dtype_name(tb->dtype));
    } else if (strcmp(what, "shape") == 0) {
        fputs(": ", stdout);
        put_shape(stdout, ta);
        fputs(" -> ", stdout);
        put_shape(stdout, tb);
    } else if (have_max) {
        fputs(": max abs diff ", stdout);
        put_double(stdout, mx, 0);
    }
    putchar('\n');
}

/* ---- comparing ----------------------------------------------------------- */

static int same_shape(const ckpt_tensor *a, const ckpt_tensor *b)
{
    uint32_t d;
    if (a->ndim != b->ndim) return 0;
    for (d = 0; d < a->ndim; d++)
        if (a->shape[d] != b->shape[d]) return 0;
    return 1;
}

/* Compare the elements of two tensors of equal dtype and shape: 0 equal,
 * 1 different, -1 a read failed (reported). */
static int compare_values(diff_ctx *c, const ckpt_tensor *ta, const ckpt_tensor *tb, double *mx,
                          int *have_max)
{
    uint64_t pos = 0, n = ta->nbytes;
    size_t es = ckpt_dtype_size(ta->dtype);
    size_t chunk = es > 0 ? CHUNK - CHUNK % es : CHUNK;
    int differ = 0;
    int numeric = c->max_abs && is_numeric(ta->dtype);
    ckpt_error err;

    *have_max = numeric;
    *mx = 0;
    while (pos < n) {
        size_t k = n - pos < chunk ? (size_t)(n - pos) : chunk;
        memset(&err, 0, sizeof err);
        err.offset = -1;
        if (ckpt_tensor_read_range(c->a, ta, pos, c->ba, k, &err) != 0) {
            cli_report(c->pa, &err);
            return -1;
        }
        memset(&err, 0, sizeof err);
        err.offset = -1;
        if (ckpt_tensor_read_range(c->b, tb, pos, c->bb, k, &err) != 0) {
            cli_report(c->pb, &err);
            return -1;
        }
        if (memcmp(c->ba, c->bb, k) != 0) differ = 1;
        /* every chunk, equal ones too: torch's max is NaN when a NaN is in
         * both at the same place */
        if (numeric)
            fold_max(ta->dtype, c->ba, c->bb, k / es, mx);
        else if (differ)
            break;
        pos += k;
    }
    return differ;
}

static int compare_one(diff_ctx *c, const ckpt_tensor *ta, const ckpt_tensor *tb)
{
    double mx = 0;
    int have_max = 0, r;
    c->compared++;
    if (ta->dtype != tb->dtype) {
        c->differ++;
        report_change(c, "dtype", ta, tb, 0, 0);
        return 0;
    }
    if (!same_shape(ta, tb)) {
        c->differ++;
        report_change(c, "shape", ta, tb, 0, 0);
        return 0;
    }
    r = compare_values(c, ta, tb, &mx, &have_max);
    if (r < 0) return -1;
    if (r == 0) {
        c->identical++;
        return 0;
    }
    c->differ++;
    report_change(c, "values", ta, tb, have_max, mx);
    return 0;
}

static void print_json(diff_ctx *c)
{
    int equal = c->differ == 0 && c->only_a == 0 && c->only_b == 0;
    fputs("{\"a\": ", stdout);
    cli_json_string(stdout, c->pa, strlen(c->pa));
    fputs(", \"b\": ", stdout);
    cli_json_string(stdout, c->pb, strlen(c->pb));
    printf(", \"equal\": %s, \"compared\": %zu, \"identical\": %zu, \"only_a\": [",
           equal ? "true" : "false", c->compared, c->identical);
    if (c->only_a_json.p) fwrite(c->only_a_json.p, 1, c->only_a_json.len, stdout);
    fputs("], \"only_b\": [", stdout);
    if (c->only_b_json.p) fwrite(c->only_b_json.p, 1, c->only_b_json.len, stdout);
    fputs("], \"changed\": [", stdout);
    if (c->changed_json.p) fwrite(c->changed_json.p, 1, c->changed_json.len, stdout);
    fputs("]}\n", stdout);
}

/* One side's tensors by name: (name, index) sorted by name bytes, then
 * index, so that equal names (keys that flatten to one name) stay in file
 * order.  Only those --filter keeps. */
typedef struct named {
    const char *p;
    size_t n, idx;
} named;

static int cmp_named(const void *a, const void *b)
{
    const named *x = a, *y = b;
    size_t n = x->n < y->n ? x->n : y->n;
    int c = memcmp(x->p, y->p, n);
    if (c) return c;
    if (x->n != y->n) return x->n < y->n ? -1 : 1;
    return x->idx < y->idx ? -1 : x->idx > y->idx;
}

static named *by_name(diff_ctx *c, const ckpt_file *f, size_t *count)
{
    size_t n = ckpt_tensor_count(f), i, k = 0;
    named *v = malloc((n ? n : 1) * sizeof *v);
    if (!v) return NULL;
    for (i = 0; i < n; i++) {
        const ckpt_tensor *t = ckpt_tensor_at(f, i);
        if (!t || !t->name || !cli_name_matches(c->filter, t->name, t->name_len)) continue;
        v[k].p = t->name;
        v[k].n = t->name_len;
        v[k++].idx = i;
    }
    qsort(v, k, sizeof *v, cmp_named);
    *count = k;
    return v;
}

#define UNPAIRED ((size_t)-1)
#define LEFT_OUT ((size_t)-2)

/* Tensors are paired by name, every byte of it; a name several tensors
 * have pairs the first in A with the first in B, the second with the
 * second, ...  (a merge of both sides sorted by name: n log n, however
 * many names are shared). */
static int run(diff_ctx *c)
{
    size_t na = ckpt_tensor_count(c->a), nb = ckpt_tensor_count(c->b), i, j, ka = 0, kb = 0;
    named *va = by_name(c, c->a, &ka), *vb = by_name(c, c->b, &kb);
    size_t *pa = malloc((na ? na : 1) * sizeof *pa), *pb = malloc((nb ? nb : 1) * sizeof *pb);
    int r = 0;
    if (!va || !vb || !pa || !pb) {
        r = cli_error("out of memory");
        goto done;
    }
    for (i = 0; i < na; i++) pa[i] = LEFT_OUT;
    for (i = 0; i < nb; i++) pb[i] = LEFT_OUT;
    for (i = 0; i < ka; i++) pa[va[i].idx] = UNPAIRED;
    for (j = 0; j < kb; j++) pb[vb[j].idx] = UNPAIRED;
    for (i = j = 0; i < ka && j < kb;) {
        int d = cmp_named(&(named){va[i].p, va[i].n, 0}, &(named){vb[j].p, vb[j].n, 0});
        if (d < 0) {
            i++;
        } else if (d > 0) {
            j++;
        } else { /* the next of this name on both sides */
            pa[va[i].idx] = vb[j].idx;
            pb[vb[j].idx] = va[i].idx;
            i++;
            j++;
        }
    }
    for (i = 0; i < na && r == 0; i++) {
        const ckpt_tensor *ta = ckpt_tensor_at(c->a, i);
        if (pa[i] == LEFT_OUT) continue;
        if (pa[i] == UNPAIRED) {
            c->only_a++;
            report_only(c, 1, ta->name, ta->name_len);
        } else if (compare_one(c, ta, ckpt_tensor_at(c->b, pa[i])) != 0) {
            r = -1;
        }
        if (cli_stdout_failed()) r = -1;
    }
    for (j = 0; j < nb && r == 0; j++) {
        const ckpt_tensor *tb = ckpt_tensor_at(c->b, j);
        if (pb[j] != UNPAIRED) continue;
        c->only_b++;
        report_only(c, 0, tb->name, tb->name_len);
    }
done:
    free(va);
    free(vb);
    free(pa);
    free(pb);
    return r;
}

int cmd_diff(int argc, char **argv)
{
    int nops = 0, r, status = DIFF_TROUBLE;
    char *ops[2];
    const char *key = NULL;
    diff_ctx c;
    const cli_option options[] = {
        {"--key", 0, 1, &key, NULL},
        {"--filter", 0, 1, &c.filter, NULL},
        {"--max-abs", 0, 0, NULL, &c.max_abs},
        {"--json", 0, 0, NULL, &c.json},
    };

    /* a failed write to stdout is trouble, never "differ" (1) */
    cli_stdout_fail_status(DIFF_TROUBLE);
    memset(&c, 0, sizeof c);
    c.first_changed = c.first_a = c.first_b = 1;
    r = cli_parse(argc, argv, options, sizeof options / sizeof options[0], usage, ops, 2, &nops);
    if (r != CLI_CONTINUE) return r;
    if (nops < 2) return cli_usage_error("diff: needs two files, A and B");
    c.pa = ops[0];
    c.pb = ops[1];
    c.ba = malloc(CHUNK);
    c.bb = malloc(CHUNK);
    if (!c.ba || !c.bb) {
        cli_error("out of memory");
        goto done;
    }
    c.a = cli_open(c.pa, key);
    if (!c.a) goto done;
    c.b = cli_open(c.pb, key);
    if (!c.b) goto done;
    if (run(&c) != 0) goto done;
    if (c.only_a_json.oom || c.only_b_json.oom || c.changed_json.oom) {
        cli_error("out of memory");
        goto done;
    }
    if (c.json) {
        print_json(&c);
    } else {
        printf("%zu compared, %zu identical, %zu differ, %zu only in A, %zu only in B\n",
               c.compared, c.identical, c.differ, c.only_a, c.only_b);
    }
    status = (c.differ || c.only_a || c.only_b) ? 1 : 0;
done:
    ckpt_close(c.a);
    ckpt_close(c.b);
    free(c.ba);
    free(c.bb);
    sb_free(&c.only_a_json);
    sb_free(&c.only_b_json);
    sb_free(&c.changed_json);
    if (status == 0 || status == 1) {
        fflush(stdout);
        if (cli_stdout_failed()) status = DIFF_TROUBLE;
    }
    return status;
}
