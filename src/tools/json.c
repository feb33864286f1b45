/*
 * json.c - tools (on the public API only): ckpt_value_to_json(), write a
 * value tree as JSON.
 *
 * Built only on the public value accessors of ckpt.h.  Output rules:
 *   None -> null, bool -> true/false, INT -> integer, BIGINT -> its digits,
 *   FLOAT -> Python's repr (shortest round trip, always with '.' or 'e'),
 *            non-finite -> "nan", "inf", "-inf" (strings),
 *   STR -> JSON string (ckpt_json_escape(): valid UTF-8 kept, control and
 *          invisible characters escaped as \uXXXX, each byte that is not
 *          valid UTF-8 as \udcXX, Python's "surrogateescape": no name is
 *          silently changed),
 *   BYTES -> {"$bytes": "<base64>"},
 *   DICT -> object with string keys (whatever its class),
 *   LIST, TUPLE, SET -> array,
 *   TENSOR -> {"$tensor": name|null, "dtype": ..., "shape": [...]},
 *   OBJECT -> {"$object": class, "args", "state", "items", "list"},
 *   GLOBAL -> {"$global": "module.name"},
 *   STORAGE -> {"$storage": key|null}.
 * A container (list, tuple, set, dict, object) met a second time is written
 * as {"$ref": "<dotted path of its first occurrence>"}, the root being "".
 * The values are visited by ckpt_value_walk() (ckpt_walk.h), whose ids of
 * first visits index the table of where each container was written.
 */
#define CKPT_BUILDING 1
#include "ckpt_text.h"
#include "ckpt_walk.h"

#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define JSON_BUF_SIZE (64u * 1024u)
#define JSON_MAX_DEPTH 1000u
/* Output bound: JSON_OUT_BASE + JSON_OUT_PER_BYTE x the file size. */
#define JSON_OUT_BASE ((uint64_t)4 << 20)
#define JSON_OUT_PER_BYTE 16u

/* A container or tensor met by the walk (ckpt_walk.h), by its id: where it
 * sits in the output, for the $ref of a later visit. */
typedef struct jnode {
    const ckpt_value *v;
    size_t parent; /* id + 1 of the enclosing container's node, 0: root */
    size_t index;  /* position in the parent (item, dict entry, object part) */
} jnode;

/* object parts, in the order and numbering of CKPT_WALK_ARGS.. */
static const char *const part_names[] = {"args", "state", "items", "list"};

typedef struct jw {
    const ckpt_file *f;
    int (*write)(void *ctx, const char *s, size_t n);
    void *ctx;
    ckpt_error *err;
    int indent;
    int failed;
    size_t len;
    char *buf;    /* JSON_BUF_SIZE bytes */
    jnode *nodes; /* every container and tensor met, by walk id */
    size_t nnodes, capnodes;
    char *scratch; /* for key text and $ref paths */
    size_t scratch_len, scratch_cap;
    uint64_t written; /* bytes handed to write() */
    char *ref;        /* the path put_ref() wrote last, for node ref_id */
    size_t ref_len, ref_id;
    uint64_t budget; /* at most this many: see ckpt_value_to_json() */
} jw;

/* ------------------------------------------------------------------------ */
/* Errors and output                                                          */
/* ------------------------------------------------------------------------ */

static int fail(jw *w, ckpt_code code, const char *msg)
{
    if (!w->failed) {
        w->failed = 1;
        if (w->err) {
            w->err->code = code;
            w->err->offset = -1;
            snprintf(w->err->message, sizeof w->err->message, "%s", msg);
        }
    }
    return -1;
}

/* Shared values are written again at every place they are met (only
 * containers become $refs), so memo/DUP sharing of a long string or of a
 * deep $ref path could expand without end: the output is bounded. */
static int over_budget(jw *w)
{
    char msg[160];
    snprintf(msg, sizeof msg,
             "JSON output would exceed %llu bytes (16 x the file size + 4 MiB): shared values "
             "expand too much",
             (unsigned long long)w->budget);
    return fail(w, CKPT_E_LIMIT, msg);
}

static int flush(jw *w)
{
    if (w->failed) return -1;
    if (w->len > w->budget - w->written) return over_budget(w);
    w->written += w->len;
    if (w->len > 0) {
        if (w->write(w->ctx, w->buf, w->len) != 0)
            return fail(w, CKPT_E_IO, "JSON output: the write callback failed");
        w->len = 0;
    }
    return 0;
}

static int put(jw *w, const char *s, size_t n)
{
    if (w->failed) return -1;
    while (n > 0) {
        size_t room = JSON_BUF_SIZE - w->len;
        size_t k = n < room ? n : room;
        memcpy(w->buf + w->len, s, k);
        w->len += k;
        s += k;
        n -= k;
        if (w->len == JSON_BUF_SIZE && flush(w) != 0) return -1;
    }
    return 0;
}

static int puts_(jw *w, const char *s)
{
    return put(w, s, strlen(s));
}

static int putc_(jw *w, char c)
{
    if (w->failed) return -1;
    w->buf[w->len++] = c;
    if (w->len == JSON_BUF_SIZE) return flush(w);
    return 0;
}

static int put_i64(jw *w, int64_t x)
{
    char tmp[32];
    int n = snprintf(tmp, sizeof tmp, "%lld", (long long)x);
    return put(w, tmp, (size_t)n);
}

/* Newline and indentation for nesting level `depth` (pretty mode only). */
static int newline(jw *w, unsigned depth)
{
    size_t n;
    if (w->indent <= 0) return 0;
    if (putc_(w, '\n') != 0) return -1;
    n = (size_t)depth * (size_t)w->indent;
    while (n > 0) {
        static const char spaces[] = "                                ";
        size_t k = n < sizeof spaces - 1 ? n : sizeof spaces - 1;
        if (put(w, spaces, k) != 0) return -1;
        n -= k;
    }
    return 0;
}

static int key_sep(jw *w)
{
    return w->indent > 0 ? put(w, ": ", 2) : putc_(w, ':');
}

/* ------------------------------------------------------------------------ */
/* Strings                                                                    */
/* ------------------------------------------------------------------------ */

/* Length of the valid UTF-8 sequence at s[0..n), or 0 if it is not one
 * (ckpt_text.h's one UTF-8 check). */
static int put_string(jw *w, const char *str, size_t n)
{
    char tmp[1024];
    size_t done = 0, c, len;
    if (putc_(w, '"') != 0) return -1;
    while (done < n) { /* the one JSON escaper (ckpt_text.h) */
        len = ckpt_json_escape(tmp, sizeof tmp, str + done, n - done, &c);
        if (put(w, tmp, len) != 0) return -1;
        done += c;
        if (c == 0) break;
    }
    return putc_(w, '"');
}

static int put_base64(jw *w, const unsigned char *s, size_t n)
{
    char out[4 * 256 + 1];
    size_t k;
    if (putc_(w, '"') != 0) return -1;
    while (n > 0) { /* whole groups of 3 bytes: the pieces join up */
        k = n < 3 * 256 ? n : 3 * 256;
        if (put(w, out, ckpt_base64(out, sizeof out, s, k)) != 0) return -1;
        s += k;
        n -= k;
    }
    return putc_(w, '"');
}

/* ------------------------------------------------------------------------ */
/* Floats: Python's repr()                                                    */
/* ------------------------------------------------------------------------ */

/* Write Python's repr of a finite double into out (>= 32 bytes): the
 * shortest decimal that reads back as x, in fixed notation when the decimal
 * point position is in (-4, 16], else as d.ddde+XX.  Returns the length. */
size_t ckpt_float_repr(double x, char *out)
{
    char tmp[40], digits[20];
    int prec, exp10 = 0, nd = 0, decpt, i;
    size_t o = 0;
    const char *p;

    if (isnan(x) || isinf(x)) {
        strcpy(out, isnan(x) ? "nan" : x < 0 ? "-inf" : "inf");
        return strlen(out);
    }
    if (x == 0) {
        strcpy(out, signbit(x) ? "-0.0" : "0.0");
        return strlen(out);
    }
    /* A normal double's correctly rounded 15-digit form is its shortest form
     * padded with zeros whenever that has 15 digits or fewer; subnormals
     * carry fewer digits, so search them from 1 digit up. */
    for (prec = fabs(x) < DBL_MIN ? 1 : 15; prec <= 17; prec++) {
        snprintf(tmp, sizeof tmp, "%.*e", prec - 1, x);
        if (prec == 17 || strtod(tmp, NULL) == x) break;
    }
    /* tmp is "[-]d.ddddde[+-]XX" */
    p = tmp;
    if (*p == '-') {
        out[o++] = '-';
        p++;
    }
    for (; *p && *p != 'e'; p++)
        if (*p >= '0' && *p <= '9') digits[nd++] = *p;
    if (*p == 'e') exp10 = atoi(p + 1);
    while (nd > 1 && digits[nd - 1] == '0') nd--;
    decpt = exp10 + 1; /* x = 0.d1d2... * 10^decpt */
    if (decpt > -4 && decpt <= 16) {
        if (decpt <= 0) {
            out[o++] = '0';
            out[o++] = '.';
            for (i = decpt; i < 0; i++) out[o++] = '0';
            for (i = 0; i < nd; i++) out[o++] = digits[i];
        } else if (decpt >= nd) {
            for (i = 0; i < nd; i++) out[o++] = digits[i];
            for (i = nd; i < decpt; i++) out[o++] = '0';
            out[o++] = '.';
            out[o++] = '0';
        } else {
            for (i = 0; i < nd; i++) {
                if (i == decpt) out[o++] = '.';
                out[o++] = digits[i];
            }
        }
        out[o] = '\0';
    } else {
        out[o++] = digits[0];
        if (nd > 1) {
            out[o++] = '.';
            for (i = 1; i < nd; i++) out[o++] = digits[i];
        }
        o += (size_t)snprintf(out + o, 16, "e%c%02d", exp10 < 0 ? '-' : '+',
                              exp10 < 0 ? -exp10 : exp10);
    }
    return o;
}

/* Text for a float that is not finite, or NULL. */
static const char *nonfinite_name(double x)
{
    if (isnan(x)) return "nan";
    if (isinf(x)) return x < 0 ? "-inf" : "inf";
    return NULL;
}

/* ------------------------------------------------------------------------ */
/* Scratch text (dict keys, $ref paths)                                       */
/* ------------------------------------------------------------------------ */

static int scratch_add(jw *w, const char *s, size_t n)
{
    if (n > w->budget - w->written || w->scratch_len > w->budget - w->written - n)
        return over_budget(w); /* the scratch text is always written out */
    if (w->scratch_cap - w->scratch_len < n + 1) {
        size_t cap = w->scratch_cap ? w->scratch_cap : 256;
        char *nb;
        while (cap - w->scratch_len < n + 1) {
            if (cap > ((size_t)-1) / 2) return fail(w, CKPT_E_NOMEM, "out of memory writing JSON");
            cap *= 2;
        }
        nb = realloc(w->scratch, cap);
        if (!nb) return fail(w, CKPT_E_NOMEM, "out of memory writing JSON");
        w->scratch = nb;
        w->scratch_cap = cap;
    }
    memcpy(w->scratch + w->scratch_len, s, n);
    w->scratch_len += n;
    w->scratch[w->scratch_len] = '\0';
    return 0;
}

static int scratch_str(jw *w, const char *s)
{
    return scratch_add(w, s, strlen(s));
}

/* Python's repr of a str or bytes inside a compound key: quoted with ',
 * or with " when the text holds a ' and no ". */
static int scratch_quoted(jw *w, const char *prefix, const char *s, size_t n)
{
    size_t i;
    char tmp[8];
    char q = (memchr(s, '\'', n) && !memchr(s, '"', n)) ? '"' : '\'';
    int is_bytes = *prefix == 'b';
    if (scratch_str(w, prefix) != 0 || scratch_add(w, &q, 1) != 0) return -1;
    for (i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == (unsigned char)q || c == '\\') {
            tmp[0] = '\\';
            tmp[1] = (char)c;
            if (scratch_add(w, tmp, 2) != 0) return -1;
        } else if (c == '\n' || c == '\r' || c == '\t') {
            tmp[0] = '\\';
            tmp[1] = c == '\n' ? 'n' : c == '\r' ? 'r' : 't';
            if (scratch_add(w, tmp, 2) != 0) return -1;
        } else if (c < 0x20 || c == 0x7f || (c >= 0x80 && is_bytes)) {
            snprintf(tmp, sizeof tmp, "\\x%02x", c);
            if (scratch_add(w, tmp, 4) != 0) return -1;
        } else if (scratch_add(w, s + i, 1) != 0) {
            return -1;
        }
    }
    return scratch_add(w, &q, 1);
}

/* Append the text of a scalar value as a dict key.  Returns 1 if `k` is not
 * something with a compact text (the caller then uses "#<i>"), 0 when the
 * text was added, -1 on error.  `nested` is set inside tuple keys, where
 * strings are quoted as Python would print them. */
static int scratch_key(jw *w, const ckpt_value *k, int nested, unsigned depth)
{
    char tmp[40];
    const char *s;
    size_t n = 0, i;
    double x;
    if (!k) return 1;
    switch (ckpt_value_kind(k)) {
    case CKPT_V_NONE: return scratch_str(w, "None");
    case CKPT_V_BOOL: return scratch_str(w, ckpt_value_bool(k) ? "True" : "False");
    case CKPT_V_INT:
        snprintf(tmp, sizeof tmp, "%lld", (long long)ckpt_value_int(k));
        return scratch_str(w, tmp);
    case CKPT_V_BIGINT: s = ckpt_value_text(k, &n); return s ? scratch_add(w, s, n) : 1;
    case CKPT_V_FLOAT:
        x = ckpt_value_float(k);
        if ((s = nonfinite_name(x)) != NULL) return scratch_str(w, s);
        n = ckpt_float_repr(x, tmp);
        return scratch_add(w, tmp, n);
    case CKPT_V_STR:
        s = ckpt_value_text(k, &n);
        if (!s) return 1;
        return nested ? scratch_quoted(w, "", s, n) : scratch_add(w, s, n);
    case CKPT_V_BYTES: s = ckpt_value_text(k, &n); return s ? scratch_quoted(w, "b", s, n) : 1;
    case CKPT_V_TUPLE:
        if (depth >= 8) return 1;
        n = ckpt_value_len(k);
        if (scratch_add(w, "(", 1) != 0) return -1;
        for (i = 0; i < n; i++) {
            int r;
            if (i > 0 && scratch_add(w, ", ", 2) != 0) return -1;
            r = scratch_key(w, ckpt_value_item(k, i), 1, depth + 1);
            if (r != 0) return r;
        }
        return scratch_add(w, n == 1 ? ",)" : ")", n == 1 ? 2 : 1);
    case CKPT_V_GLOBAL: s = ckpt_value_class(k); return s ? scratch_str(w, s) : 1;
    default: return 1;
    }
}

/* The text of key i of dict d, appended to the scratch buffer. */
static int scratch_dict_key(jw *w, const ckpt_value *d, size_t i)
{
    size_t mark = w->scratch_len;
    int r = scratch_key(w, ckpt_value_key(d, i), 0, 0);
    if (r > 0) {
        char tmp[32];
        w->scratch_len = mark;
        if (w->scratch) w->scratch[mark] = '\0';
        snprintf(tmp, sizeof tmp, "#%zu", i);
        return scratch_str(w, tmp);
    }
    return r;
}

/* ------------------------------------------------------------------------ */
/* Where containers were written                                              */
/* ------------------------------------------------------------------------ */

/* Record what the walk numbered `id` at its first visit (ids come in
 * order), reached from node `parent` (id + 1, 0: none) at `index`. */
static int node_add(jw *w, size_t id, const ckpt_value *v, size_t parent, size_t index)
{
    if (id != w->nnodes)
        return fail(w, CKPT_E_ARG, "JSON output: the walk numbered values out of order");
    if (w->nnodes == w->capnodes) {
        size_t cap = w->capnodes ? w->capnodes * 2 : 64;
        jnode *nn;
        if (cap > ((size_t)-1) / sizeof *nn)
            return fail(w, CKPT_E_NOMEM, "out of memory writing JSON");
        nn = realloc(w->nodes, cap * sizeof *nn);
        if (!nn) return fail(w, CKPT_E_NOMEM, "out of memory writing JSON");
        w->nodes = nn;
        w->capnodes = cap;
    }
    w->nodes[w->nnodes].v = v;
    w->nodes[w->nnodes].parent = parent;
    w->nodes[w->nnodes].index = index;
    w->nnodes++;
    return 0;
}

/* Append the path component that leads from node `parent` to its child. */
static int scratch_component(jw *w, size_t parent, size_t index)
{
    const ckpt_value *pv = w->nodes[parent - 1].v;
    char tmp[32];
    switch (ckpt_value_kind(pv)) {
    case CKPT_V_DICT: return scratch_dict_key(w, pv, index);
    case CKPT_V_OBJECT: return scratch_str(w, part_names[index < 4 ? index : 0]);
    default: snprintf(tmp, sizeof tmp, "%zu", index); return scratch_str(w, tmp);
    }
}

/* {"$ref": "<path of node id>"} */
static int put_ref(jw *w, size_t id)
{
    size_t chain[JSON_MAX_DEPTH + 1];
    size_t depth = 0, n;
    if (id == w->ref_id) /* the same shared value again: its path is known */
        goto write;
    w->scratch_len = 0;
    if (scratch_add(w, "", 0) != 0) return -1;
    /* Nodes are recorded at depth <= JSON_MAX_DEPTH, so the chain fits. */
    for (n = id; w->nodes[n - 1].parent != 0 && depth <= JSON_MAX_DEPTH; n = w->nodes[n - 1].parent)
        chain[depth++] = n;
    while (depth > 0) {
        n = chain[--depth];
        if (scratch_component(w, w->nodes[n - 1].parent, w->nodes[n - 1].index) != 0) return -1;
        if (depth > 0 && scratch_add(w, ".", 1) != 0) return -1;
    }
    {
        char *r = realloc(w->ref, w->scratch_len + 1);
        if (!r) return fail(w, CKPT_E_NOMEM, "out of memory writing JSON");
        memcpy(r, w->scratch, w->scratch_len + 1);
        w->ref = r;
        w->ref_len = w->scratch_len;
        w->ref_id = id;
    }
write:
    if (puts_(w, w->indent > 0 ? "{\"$ref\": " : "{\"$ref\":") != 0) return -1;
    if (put_string(w, w->ref, w->ref_len) != 0) return -1;
    return putc_(w, '}');
}

/* ------------------------------------------------------------------------ */
/* Values                                                                     */
/* ------------------------------------------------------------------------ */

static int is_container(ckpt_kind k)
{
    return k == CKPT_V_LIST || k == CKPT_V_TUPLE || k == CKPT_V_SET || k == CKPT_V_DICT ||
           k == CKPT_V_OBJECT;
}

/* Start a member of an object being written: separator, indent, "key": */
static int member(jw *w, int *first, const char *key, unsigned depth)
{
    if (!*first && putc_(w, ',') != 0) return -1;
    *first = 0;
    if (newline(w, depth) != 0) return -1;
    if (put_string(w, key, strlen(key)) != 0) return -1;
    return key_sep(w);
}

static int put_tensor(jw *w, const ckpt_value *v, unsigned depth)
{
    const ckpt_tensor *t = ckpt_value_tensor(w->f, v);
    int first = 1;
    uint32_t i;
    if (putc_(w, '{') != 0 || member(w, &first, "$tensor", depth + 1) != 0) return -1;
    if (!t) {
        if (puts_(w, "null") != 0) return -1;
    } else {
        if (t->name ? put_string(w, t->name, t->name_len) : puts_(w, "null")) return -1;
        if (member(w, &first, "dtype", depth + 1) != 0) return -1;
        if (put_string(w, ckpt_dtype_name(t->dtype), strlen(ckpt_dtype_name(t->dtype))) != 0)
            return -1;
        if (member(w, &first, "shape", depth + 1) != 0 || putc_(w, '[') != 0) return -1;
        for (i = 0; i < t->ndim; i++) {
            if (i > 0 && (w->indent > 0 ? put(w, ", ", 2) : putc_(w, ',')) != 0) return -1;
            if (put_i64(w, t->shape[i]) != 0) return -1;
        }
        if (putc_(w, ']') != 0) return -1;
    }
    if (newline(w, depth) != 0) return -1;
    return putc_(w, '}');
}

/* The text before a value inside its container: separator, indentation,
 * the dict key or the object part's name. */
static int put_lead(jw *w, const ckpt_walk_step *st)
{
    ckpt_kind pk = ckpt_value_kind(st->parent->value);
    if (pk == CKPT_V_OBJECT) { /* "$object" came first */
        if (putc_(w, ',') != 0 || newline(w, st->depth) != 0) return -1;
        if (put_string(w, part_names[st->index < 4 ? st->index : 0],
                       strlen(part_names[st->index < 4 ? st->index : 0])) != 0)
            return -1;
        return key_sep(w);
    }
    if (st->index > 0 && putc_(w, ',') != 0) return -1;
    if (newline(w, st->depth) != 0) return -1;
    if (pk != CKPT_V_DICT) return 0;
    w->scratch_len = 0;
    if (scratch_add(w, "", 0) != 0 || scratch_dict_key(w, st->parent->value, st->index) != 0)
        return -1;
    if (put_string(w, w->scratch, w->scratch_len) != 0) return -1;
    return key_sep(w);
}

/* The opening of a container, or a scalar, tensor or $ref whole. */
static int put_scalar(jw *w, const ckpt_value *v, ckpt_kind kind, unsigned depth)
{
    const char *s;
    size_t n = 0;
    char tmp[40];
    double x;

    switch (kind) {
    case CKPT_V_NONE: return puts_(w, "null");
    case CKPT_V_BOOL: return puts_(w, ckpt_value_bool(v) ? "true" : "false");
    case CKPT_V_INT: return put_i64(w, ckpt_value_int(v));
    case CKPT_V_BIGINT:
        s = ckpt_value_text(v, &n);
        if (!s || n == 0) return puts_(w, "null");
        return put(w, s, n);
    case CKPT_V_FLOAT:
        x = ckpt_value_float(v);
        if ((s = nonfinite_name(x)) != NULL) return put_string(w, s, strlen(s));
        n = ckpt_float_repr(x, tmp);
        return put(w, tmp, n);
    case CKPT_V_STR: s = ckpt_value_text(v, &n); return put_string(w, s ? s : "", s ? n : 0);
    case CKPT_V_BYTES:
        s = ckpt_value_text(v, &n);
        if (puts_(w, w->indent > 0 ? "{\"$bytes\": " : "{\"$bytes\":") != 0) return -1;
        if (put_base64(w, (const unsigned char *)(s ? s : ""), s ? n : 0) != 0) return -1;
        return putc_(w, '}');
    case CKPT_V_TENSOR: return put_tensor(w, v, depth);
    case CKPT_V_GLOBAL:
        s = ckpt_value_class(v);
        if (puts_(w, w->indent > 0 ? "{\"$global\": " : "{\"$global\":") != 0) return -1;
        if (s ? put_string(w, s, strlen(s)) : puts_(w, "null")) return -1;
        return putc_(w, '}');
    case CKPT_V_STORAGE: {
        const ckpt_storage *st = ckpt_value_storage(w->f, v);
        s = st ? st->key : NULL;
        n = s ? strlen(s) : 0;
        if (puts_(w, w->indent > 0 ? "{\"$storage\": " : "{\"$storage\":") != 0) return -1;
        if (s ? put_string(w, s, n) : puts_(w, "null")) return -1;
        return putc_(w, '}');
    }
    default: return puts_(w, "null");
    }
}

static int on_enter(void *ctx, const ckpt_walk_step *st)
{
    jw *w = ctx;
    const ckpt_value *v = st->value;
    ckpt_kind kind = v ? ckpt_value_kind(v) : CKPT_V_NONE;
    int first = 1;

    if (w->failed) return -1;
    if (st->parent && put_lead(w, st) != 0) return -1;
    if (st->id != CKPT_WALK_NO_ID && !st->shared &&
        node_add(w, st->id, v, st->parent ? st->parent->id + 1 : 0, st->index) != 0)
        return -1;
    if (!v || kind == CKPT_V_TENSOR || !is_container(kind))
        return put_scalar(w, v, v ? kind : CKPT_V_NONE, st->depth) != 0 ? -1 : 0;
    if (st->shared) /* a container met again */
        return put_ref(w, st->id + 1) != 0 ? -1 : CKPT_WALK_SKIP;
    if (st->too_deep) return fail(w, CKPT_E_LIMIT, "nesting deeper than 1000");
    if (kind == CKPT_V_DICT) return putc_(w, '{') != 0 ? -1 : 0;
    if (kind == CKPT_V_OBJECT) {
        const char *cls = ckpt_value_class(v);
        if (putc_(w, '{') != 0 || member(w, &first, "$object", st->depth + 1) != 0) return -1;
        return (cls ? put_string(w, cls, strlen(cls)) : puts_(w, "null")) != 0 ? -1 : 0;
    }
    return putc_(w, '[') != 0 ? -1 : 0;
}

static int on_leave(void *ctx, const ckpt_walk_step *st)
{
    jw *w = ctx;
    ckpt_kind kind = ckpt_value_kind(st->value);
    if (w->failed) return -1;
    if ((kind == CKPT_V_OBJECT || ckpt_value_len(st->value) > 0) && newline(w, st->depth) != 0)
        return -1;
    return putc_(w, kind == CKPT_V_DICT || kind == CKPT_V_OBJECT ? '}' : ']') != 0 ? -1 : 0;
}

CKPT_API int ckpt_value_to_json(const ckpt_file *f, const ckpt_value *v, int indent,
                                int (*write)(void *ctx, const char *s, size_t n), void *ctx,
                                ckpt_error *err)
{
    jw w;
    int r;
    memset(&w, 0, sizeof w);
    w.f = f;
    w.write = write;
    w.ctx = ctx;
    w.err = err;
    w.indent = indent > 0 ? indent : 0;
    if (err) {
        err->code = CKPT_OK;
        err->offset = -1;
        err->message[0] = '\0';
    }
    if (!f || !write) {
        fail(&w, CKPT_E_ARG, "ckpt_value_to_json: NULL file or write callback");
        return -1;
    }
    {
        ckpt_info info;
        ckpt_get_info(f, &info);
        w.budget = info.file_size > (UINT64_MAX - JSON_OUT_BASE) / JSON_OUT_PER_BYTE
                       ? UINT64_MAX
                       : JSON_OUT_BASE + JSON_OUT_PER_BYTE * info.file_size;
    }
    w.buf = malloc(JSON_BUF_SIZE);
    if (!w.buf) {
        fail(&w, CKPT_E_NOMEM, "out of memory writing JSON");
        return -1;
    }
    {
        ckpt_walk_callbacks cb = {on_enter, on_leave};
        ckpt_walk_options opt;
        ckpt_walk_options_init(&opt);
        opt.max_depth = JSON_MAX_DEPTH + 1; /* a container deeper than 1000 */
        opt.skip_deep = 1;                  /* is refused by on_enter */
        r = ckpt_value_walk(f, v ? v : ckpt_root(f), &cb, &w, &opt, err);
    }
    if (r == 0) r = flush(&w);
    free(w.buf);
    free(w.nodes);
    free(w.scratch);
    free(w.ref);
    return r == 0 && !w.failed ? 0 : -1;
}
