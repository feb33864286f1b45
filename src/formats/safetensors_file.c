/*
 * safetensors_file.c - layer 4 (formats): a .safetensors file as input.
 *
 *   [u64 LE header length N] [N bytes of JSON header] [data]
 *
 * The header maps each name to {"dtype", "shape", "data_offsets": [b, e]}
 * (offsets into the data), plus an optional "__metadata__" of strings.  As
 * the format requires: the header is one JSON object (no duplicate keys),
 * each tensor's bytes are exactly numel * element size, and the tensors
 * tile the data: sorted by offset, each starts where the previous ended,
 * the first at 0, the last at the end of the file.  Each tensor is a
 * storage of its own; ckpt_root() is a dict name -> tensor, with
 * "__metadata__" (a dict of strings) first when present.
 *
 * The header is read through a window of 1 MiB (grown only for a longer
 * member), one member at a time: the top-level object's structure is
 * scanned here (nesting bounded as json_in.h bounds it), and each key and
 * each value is parsed by jansson on its own, so that what a tensor costs
 * is what the library keeps of it, never a JSON tree of the whole header
 * (which took 16-18 times the header's size).  Two tensors of one name
 * are found by sorting the names' hashes.  The header's bytes count as a
 * pickle's do for the limits that grow with the metadata (memory, and the
 * listing's budget), so 300,000 tensors list as from a ZIP.
 *
 * Tied weights: safetensors cannot alias, so `ckpt convert` (and
 * safetensors' save_model()) writes a tied tensor once and maps each other
 * name to the kept one in "__metadata__".  In a file ckpt wrote (its
 * "__metadata__" holds "ckpt.source_format"), "ckpt.tied": "N" says that
 * the N entries right after it are such aliases, each mapping a name that
 * is not a tensor to a tensor of the file: each is listed as a tensor of
 * its own over the kept one's storage, right after it, as loading the
 * source gave it.  Nothing else is taken for an alias, so metadata stays
 * metadata; an entry of the N that names a tensor the file already holds,
 * or no tensor, is not honoured, and a note says so.
 */
#include "json_in.h"
#include "formats.h"

#include <stdlib.h>
#include <string.h>

#define ST_MAX_HEADER ((uint64_t)100 << 20) /* as the safetensors library */
#define ST_BASE 8                            /* the header's first byte in the file */

static const struct {
    const char *name;
    ckpt_dtype dtype;
} st_dtypes[] = {
    {"BOOL", CKPT_BOOL},
    {"U8", CKPT_UINT8},
    {"I8", CKPT_INT8},
    {"F8_E4M3", CKPT_FLOAT8_E4M3FN},
    {"F8_E5M2", CKPT_FLOAT8_E5M2},
    {"F8_E8M0", CKPT_FLOAT8_E8M0FNU},
    {"I16", CKPT_INT16},
    {"U16", CKPT_UINT16},
    {"F16", CKPT_FLOAT16},
    {"BF16", CKPT_BFLOAT16},
    {"I32", CKPT_INT32},
    {"U32", CKPT_UINT32},
    {"F32", CKPT_FLOAT32},
    {"F64", CKPT_FLOAT64},
    {"I64", CKPT_INT64},
    {"U64", CKPT_UINT64},
    {"C64", CKPT_COMPLEX64},
    {"C128", CKPT_COMPLEX128},
};

int ck_safetensors_dtype(const char *s, ckpt_dtype *d)
{
    for (size_t i = 0; i < sizeof st_dtypes / sizeof st_dtypes[0]; i++)
        if (strcmp(s, st_dtypes[i].name) == 0) {
            *d = st_dtypes[i].dtype;
            return 0;
        }
    return -1;
}

static int st_bid(const uint8_t *head, size_t n, uint64_t size)
{
    if (n < 9 || size < 10) return 0;
    uint64_t hl = ck_le64(head);
    return hl >= 2 && hl <= size - 8 && hl <= ST_MAX_HEADER && head[8] == '{';
}

static int oom(ckpt_error *err)
{
    return ck_fail(err, CKPT_E_NOMEM, -1, "out of memory");
}

/* An alias from "__metadata__": its root key and tensor, and the next
 * alias of the same kept tensor. */
typedef struct st_alias {
    ckpt_value *key, *tensor;
    size_t next;
} st_alias;

/* A tensor's bytes [b, e) of the data and its index in header order. */
typedef struct st_span {
    uint64_t b, e;
    uint32_t i;
} st_span;

static int by_begin(const void *a, const void *b)
{
    const st_span *x = a, *y = b;
    if (x->b != y->b) return x->b < y->b ? -1 : 1;
    if (x->e != y->e) return x->e < y->e ? -1 : 1;
    return x->i < y->i ? -1 : x->i > y->i;
}

/* ---- the header, a member at a time ------------------------------------- */

/* The header read through a window: buf holds its bytes [boff, boff +
 * blen); positions are offsets in the header. */
typedef struct st_text {
    const ck_source *src;
    ck_arena *arena; /* charged for buf */
    uint64_t n;
    char *buf;
    size_t cap, blen;
    uint64_t boff;
    uint32_t max_depth;
} st_text;

#define ST_WINDOW ((size_t)1 << 20)
#define ST_MORE 1 /* a scan ran past the window before the header's end */

static int text_char(const st_text *t, uint64_t i)
{
    return t->buf[i - t->boff];
}

/* The window from header byte `from` on, as full as it can be; when it
 * starts there already, a bigger one (a member longer than the window). */
static int slide(st_text *t, uint64_t from, ckpt_error *err)
{
    if (from == t->boff && t->blen == t->cap) {
        if (t->cap > SIZE_MAX / 2 || ck_mem_charge(t->arena, t->cap))
            return ck_fail(err, CKPT_E_NOMEM, -1, "out of memory for the header");
        char *nb = realloc(t->buf, 2 * t->cap);
        if (!nb) {
            ck_mem_release(t->arena, t->cap);
            return ck_fail(err, CKPT_E_NOMEM, -1, "out of memory");
        }
        t->buf = nb;
        t->cap *= 2;
    }
    size_t keep = from < t->boff + t->blen ? (size_t)(t->boff + t->blen - from) : 0;
    if (keep) memmove(t->buf, t->buf + (from - t->boff), keep);
    uint64_t left = t->n - (from + keep);
    size_t room = t->cap - keep, want = left < room ? (size_t)left : room;
    t->boff = from;
    t->blen = keep;
    CK_TRY(ck_read(t->src, ST_BASE + from + keep, t->buf + keep, want, "safetensors header", err));
    t->blen = keep + want;
    return 0;
}

/* The first byte at or after i that is not JSON whitespace (*out), or
 * ST_MORE. */
static int skip_ws(const st_text *t, uint64_t i, uint64_t *out)
{
    uint64_t end = t->boff + t->blen;
    for (; i < end; i++) {
        int c = text_char(t, i);
        if (c != ' ' && c != '\t' && c != '\n' && c != '\r') break;
    }
    *out = i;
    return i == end && end < t->n ? ST_MORE : 0;
}

/* One past the JSON value that starts at byte i: a string, an object or
 * array (brackets matched outside strings, nesting at most max_depth
 * counting the header's own object), else a literal up to a delimiter.
 * What it holds is jansson's to judge.  0, ST_MORE, or -1 with err. */
static int value_end(const st_text *t, uint64_t i, uint64_t *out, ckpt_error *err)
{
    uint64_t at = i, end = t->boff + t->blen;
    if (i >= t->n)
        return ck_fail(err, CKPT_E_FORMAT, ST_BASE + (int64_t)i,
                       "safetensors header is not valid JSON: it ends where a value should be");
    if (i >= end) return ST_MORE;
    int c = text_char(t, i);
    if (c == '"') {
        for (i++; i < end && text_char(t, i) != '"'; i++)
            if (text_char(t, i) == '\\') i++;
        if (i < end) {
            *out = i + 1;
            return 0;
        }
        if (end < t->n) return ST_MORE;
        return ck_fail(err, CKPT_E_FORMAT, ST_BASE + (int64_t)at,
                       "safetensors header is not valid JSON: a string is not closed");
    }
    if (c == '{' || c == '[') {
        uint32_t depth = 0;
        bool in_str = false;
        for (; i < end; i++) {
            c = text_char(t, i);
            if (in_str) {
                if (c == '\\')
                    i++;
                else if (c == '"')
                    in_str = false;
            } else if (c == '"') {
                in_str = true;
            } else if (c == '{' || c == '[') {
                if (++depth >= t->max_depth) /* the header's object is a level */
                    return ck_fail(err, CKPT_E_LIMIT, ST_BASE + (int64_t)i,
                                   "safetensors header nests deeper than %u levels", t->max_depth);
            } else if ((c == '}' || c == ']') && --depth == 0) {
                *out = i + 1;
                return 0;
            }
        }
        if (end < t->n) return ST_MORE;
        return ck_fail(err, CKPT_E_FORMAT, ST_BASE + (int64_t)at,
                       "safetensors header is not valid JSON: a value is not closed");
    }
    while (i < end && (c = text_char(t, i)) != 0 && !strchr(",}] \t\r\n", c)) i++;
    if (i == end && end < t->n) return ST_MORE;
    if (i == at)
        return ck_fail(err, CKPT_E_FORMAT, ST_BASE + (int64_t)at,
                       "safetensors header is not valid JSON: a value is missing");
    *out = i;
    return 0;
}

/* The JSON text [a, e) of the header (in the window) as a value: a new
 * reference, or NULL with err. */
static json_t *piece(const st_text *t, uint64_t a, uint64_t e, ckpt_error *err)
{
    json_error_t je;
    json_t *v = json_loadb(t->buf + (a - t->boff), (size_t)(e - a),
                           JSON_DECODE_ANY | JSON_REJECT_DUPLICATES, &je);
    if (!v) {
        int64_t pos = je.position > 0 ? je.position - 1 : 0; /* the byte it stopped at */
        ck_fail(err, CKPT_E_FORMAT, ST_BASE + (int64_t)a + pos,
                "safetensors header is not valid JSON: %s", je.text);
    }
    return v;
}

/* ---- members ------------------------------------------------------------ */

static int st_metadata(ckpt_file *f, json_t *meta, int64_t pos, ckpt_value **out,
                       ckpt_error *err)
{
    if (!json_is_object(meta))
        return ck_fail(err, CKPT_E_FORMAT, pos,
                       "safetensors header: __metadata__ is not an object");
    ckpt_value *d = ck_new(&f->pk, CKPT_V_DICT);
    if (!d) return oom(err);
    const char *key;
    json_t *v;
    json_object_foreach(meta, key, v)
    {
        if (!json_is_string(v))
            return ck_fail(err, CKPT_E_FORMAT, pos,
                           "safetensors header: __metadata__ '%.60s' is not a string", key);
        ckpt_value *kv = ck_new_str(&f->pk, CKPT_V_STR, key, strlen(key));
        ckpt_value *vv =
            ck_new_str(&f->pk, CKPT_V_STR, json_string_value(v), json_string_length(v));
        if (!kv || !vv || ck_seq_push(&f->pk, d, kv) || ck_seq_push(&f->pk, d, vv))
            return oom(err);
    }
    *out = d;
    return 0;
}

/* Tensor `key` (the root's key: its bytes are the name) from its header
 * entry e at byte pos of the file: its value, and its data bytes. */
static int st_entry(ckpt_file *f, ckpt_value *key, json_t *e, int64_t pos, uint64_t data_start,
                    uint64_t data_len, ckpt_value **out, uint64_t *b, uint64_t *en,
                    ckpt_error *err)
{
    const char *name = key->u.s.p;
    if (!json_is_object(e))
        return ck_fail(err, CKPT_E_FORMAT, pos, "safetensors header: '%.60s' is not an object",
                       name);
    json_t *jd = json_object_get(e, "dtype"), *js = json_object_get(e, "shape"),
           *jo = json_object_get(e, "data_offsets");
    ckpt_dtype dt;
    if (!json_is_string(jd))
        return ck_fail(err, CKPT_E_FORMAT, pos, "safetensors header: '%.60s' has no dtype", name);
    if (ck_safetensors_dtype(json_string_value(jd), &dt))
        return ck_fail(err, CKPT_E_UNSUPPORTED, pos,
                       "safetensors tensor '%.60s': dtype '%.20s' is not supported", name,
                       json_string_value(jd));
    if (!json_is_array(js))
        return ck_fail(err, CKPT_E_FORMAT, pos, "safetensors header: '%.60s' has no shape", name);
    size_t nd = json_array_size(js);
    if (nd > f->opt.max_rank)
        return ck_fail(err, CKPT_E_LIMIT, pos,
                       "safetensors tensor '%.60s' has %zu dimensions (max_rank %u)", name, nd,
                       f->opt.max_rank);
    int64_t shape[64];
    for (size_t i = 0; i < nd; i++) {
        uint64_t x;
        if (!ck_json_u64(json_array_get(js, i), &x))
            return ck_fail(
                err, CKPT_E_FORMAT, pos,
                "safetensors tensor '%.60s': shape entry %zu is not a non-negative integer", name,
                i);
        shape[i] = (int64_t)x;
    }
    if (!json_is_array(jo) || json_array_size(jo) != 2 || !ck_json_u64(json_array_get(jo, 0), b) ||
        !ck_json_u64(json_array_get(jo, 1), en))
        return ck_fail(err, CKPT_E_FORMAT, pos,
                       "safetensors tensor '%.60s': data_offsets is not two non-negative integers",
                       name);
    if (*en < *b || *en > data_len)
        return ck_fail(
            err, CKPT_E_FORMAT, (int64_t)data_start,
            "safetensors tensor '%.60s': data_offsets [%llu, %llu] outside the %llu data bytes",
            name, (unsigned long long)*b, (unsigned long long)*en, (unsigned long long)data_len);
    size_t si;
    /* the storage's key is the name the root holds (one copy) */
    CK_TRY(ck_storage_add(f, name, key->u.s.n, false, &si, err));
    ck_storage *s = &f->storages[si];
    s->pub.dtype = dt;
    s->pub.nbytes = *en - *b;
    s->pub.file_offset = (int64_t)(data_start + *b);
    s->resolved = true;
    CK_TRY(ck_format_tensor(f, si, dt, (uint32_t)nd, shape, (int64_t)(data_start + *b), out, err));
    uint64_t need = ck_tdef_numel(ck_tdef_of(*out)) * ck_dtype_size(dt);
    if (need != *en - *b)
        return ck_fail(err, CKPT_E_FORMAT, (int64_t)(data_start + *b),
                       "safetensors tensor '%.60s': %llu bytes at data_offsets, its shape needs "
                       "%llu",
                       name, (unsigned long long)(*en - *b), (unsigned long long)need);
    return 0;
}

/* What the members give: the root (tensors pushed in header order),
 * "__metadata__" (a new reference, or NULL), and per tensor its span. */
typedef struct st_parse {
    ckpt_value *root;
    json_t *meta;
    int64_t meta_pos;
    uint32_t *at; /* per tensor, in header order: its key's header byte (< 100 MiB) */
    size_t n, cap;
} st_parse;

/* The member that starts at header byte i (its key); *next: where the
 * next one's ',' or the '}' should be.  0, ST_MORE (nothing done), -1. */
static int st_member(ckpt_file *f, const st_text *t, uint64_t i, uint64_t data_start,
                     uint64_t data_len, st_parse *ps, uint64_t *next, ckpt_error *err)
{
    uint64_t ke, vs, ve;
    int r;
    if (text_char(t, i) != '"')
        return ck_fail(err, CKPT_E_FORMAT, ST_BASE + (int64_t)i,
                       "safetensors header is not valid JSON: a member's name is not a string");
    if ((r = value_end(t, i, &ke, err)) || (r = skip_ws(t, ke, &vs))) return r;
    if (vs >= t->n || text_char(t, vs) != ':')
        return ck_fail(err, CKPT_E_FORMAT, ST_BASE + (int64_t)vs,
                       "safetensors header is not valid JSON: ':' expected");
    if ((r = skip_ws(t, vs + 1, &vs)) || (r = value_end(t, vs, &ve, err)) ||
        (r = skip_ws(t, ve, next)))
        return r;
    if (*next == t->boff + t->blen && *next < t->n) return ST_MORE; /* the ',' unseen */
    json_t *jk = piece(t, i, ke, err);
    if (!jk) return -1;
    size_t kl = json_string_length(jk);
    bool is_meta = kl == 12 && memcmp(json_string_value(jk), "__metadata__", 12) == 0;
    if (is_meta && ps->meta) {
        json_decref(jk);
        return ck_fail(err, CKPT_E_FORMAT, ST_BASE + (int64_t)i,
                       "safetensors header is not valid JSON: duplicate object key "
                       "'__metadata__'");
    }
    ckpt_value *key = is_meta ? NULL : ck_new_str(&f->pk, CKPT_V_STR, json_string_value(jk), kl);
    json_decref(jk);
    if (!is_meta && !key) return oom(err);
    json_t *jv = piece(t, vs, ve, err);
    if (!jv) return -1;
    if (is_meta) {
        ps->meta = jv;
        ps->meta_pos = ST_BASE + (int64_t)vs;
        return 0;
    }
    ckpt_value *tv = NULL;
    uint64_t b = 0, e = 0; /* (kept by the storage) */
    r = ps->n >= f->opt.max_entries
            ? ck_fail(err, CKPT_E_LIMIT, ST_BASE + (int64_t)i,
                      "safetensors header names more than %u tensors (max_entries)",
                      f->opt.max_entries)
            : ck_grow_in(&f->arena, (void **)&ps->at, &ps->cap, ps->n + 1, sizeof *ps->at, err);
    if (r == 0)
        r = st_entry(f, key, jv, ST_BASE + (int64_t)vs, data_start, data_len, &tv, &b, &e, err);
    json_decref(jv);
    if (r == 0 && (ck_seq_push(&f->pk, ps->root, key) || ck_seq_push(&f->pk, ps->root, tv)))
        r = oom(err);
    if (r) return -1;
    ps->at[ps->n++] = (uint32_t)i;
    return 0;
}

/* Every member of the header's object, in order. */
static int st_members(ckpt_file *f, st_text *t, uint64_t data_start, uint64_t data_len,
                      st_parse *ps, ckpt_error *err)
{
    uint64_t i;
    CK_TRY(slide(t, 0, err));
    while (skip_ws(t, 0, &i) == ST_MORE) CK_TRY(slide(t, t->boff + t->blen, err));
    if (i >= t->n || text_char(t, i) != '{')
        return ck_fail(err, CKPT_E_FORMAT, ST_BASE + (int64_t)i,
                       "safetensors header is not a JSON object");
    bool first = true;
    for (;;) {
        uint64_t at = i + 1, next = 0; /* past the '{' or the ',' */
        int r;
        while ((r = skip_ws(t, at, &i)) == ST_MORE) CK_TRY(slide(t, at, err));
        if (first && i < t->n && text_char(t, i) == '}') break;
        if (i >= t->n)
            return ck_fail(err, CKPT_E_FORMAT, ST_BASE + (int64_t)i,
                           "safetensors header is not valid JSON: the object is not closed");
        while ((r = st_member(f, t, i, data_start, data_len, ps, &next, err)) == ST_MORE)
            CK_TRY(slide(t, i, err));
        CK_TRY(r);
        first = false;
        i = next;
        if (i < t->n && text_char(t, i) == ',') continue;
        if (i >= t->n || text_char(t, i) != '}')
            return ck_fail(err, CKPT_E_FORMAT, ST_BASE + (int64_t)i,
                           "safetensors header is not valid JSON: ',' or '}' expected");
        break;
    }
    uint64_t end;
    for (uint64_t at = i + 1;;) { /* only whitespace after it (the padding) */
        int r = skip_ws(t, at, &end);
        if (r != ST_MORE) break;
        CK_TRY(slide(t, end, err));
        at = end;
    }
    if (end < t->n)
        return ck_fail(err, CKPT_E_FORMAT, ST_BASE + (int64_t)end,
                       "safetensors header is not valid JSON: bytes after the object");
    return 0;
}

/* The root's key of tensor i (its bytes: the name); the root's first two
 * slots are kept for "__metadata__". */
static const ckpt_value *key_at(const st_parse *ps, size_t i)
{
    return ps->root->u.seq.v[2 + 2 * i];
}

/* The tensors by the hashes of their names (ck_hash()), then by the names
 * themselves: two of one name are neighbours, and an alias's target is
 * found by a binary search. */
typedef struct st_named {
    uint64_t h;
    const ckpt_value *k;
    uint32_t i;
} st_named;

static int name_cmp(uint64_t h, const char *s, size_t n, const st_named *y)
{
    if (h != y->h) return h < y->h ? -1 : 1;
    size_t m = n < y->k->u.s.n ? n : y->k->u.s.n;
    int c = memcmp(s, y->k->u.s.p, m);
    return c ? c : n < y->k->u.s.n ? -1 : n > y->k->u.s.n;
}

static int by_name(const void *a, const void *b)
{
    const st_named *x = a;
    return name_cmp(x->h, x->k->u.s.p, x->k->u.s.n, b);
}

static void sort_by_name(st_named *v, const st_parse *ps)
{
    for (size_t i = 0; i < ps->n; i++) {
        const ckpt_value *k = key_at(ps, i);
        v[i] = (st_named){ck_hash(k->u.s.p, k->u.s.n), k, (uint32_t)i};
    }
    qsort(v, ps->n, sizeof *v, by_name);
}

/* What st_open() sorts the tensors by, in one array. */
typedef union st_slot {
    st_named named;
    st_span span;
} st_slot;

/* The tensor named (s, n): its index, or -1 (byname: sort_by_name()'s). */
static int64_t find_name(const st_named *byname, const st_parse *ps, const char *s, size_t n)
{
    uint64_t h = ck_hash(s, n);
    size_t lo = 0, hi = ps->n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        int c = name_cmp(h, s, n, &byname[mid]);
        if (c == 0) return byname[mid].i;
        if (c > 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return -1;
}

/* The tensors tile the data (sp: room for one span a tensor). */
static int st_tiling(const ckpt_file *f, const st_parse *ps, st_span *sp, uint64_t data_start,
                     uint64_t data_len, ckpt_error *err)
{
    for (size_t i = 0; i < ps->n; i++) { /* storage i is tensor i's */
        const ck_storage *s = &f->storages[i];
        uint64_t b = (uint64_t)s->pub.file_offset - data_start;
        sp[i] = (st_span){b, b + s->pub.nbytes, (uint32_t)i};
    }
    qsort(sp, ps->n, sizeof *sp, by_begin);
    uint64_t at = 0;
    for (size_t k = 0; k < ps->n; k++) {
        const char *name = key_at(ps, sp[k].i)->u.s.p;
        if (sp[k].b != at)
            return ck_fail(err, CKPT_E_FORMAT, (int64_t)(data_start + sp[k].b),
                           sp[k].b > at ? "safetensors tensor '%.60s' starts at data byte "
                                          "%llu, leaving a gap after byte %llu"
                                        : "safetensors tensor '%.60s' starts at data byte "
                                          "%llu, overlapping the tensor that ends at %llu",
                           name, (unsigned long long)sp[k].b, (unsigned long long)at);
        at = sp[k].e;
    }
    if (at != data_len)
        return ck_fail(err, CKPT_E_FORMAT, (int64_t)(data_start + at),
                       "safetensors data is %llu bytes but its tensors cover %llu",
                       (unsigned long long)data_len, (unsigned long long)at);
    return 0;
}

/* The aliases a file ckpt wrote records in its __metadata__ (see the top
 * of this file), each a tensor over the storage of the one it names, the
 * root laid out again with each after the tensor it names. */
static int st_aliases(ckpt_file *f, st_parse *ps, const st_named *byname, ckpt_error *err)
{
    json_t *meta = ps->meta;
    if (!json_is_string(json_object_get(meta, "ckpt.source_format"))) return 0;
    const char *count = json_string_value(json_object_get(meta, "ckpt.tied"));
    if (!count) return 0;
    size_t want = 0;
    for (const char *c = count; *c; c++) {
        if (*c < '0' || *c > '9' || want > (SIZE_MAX - 9) / 10) {
            if (ck_note(&f->pk, "safetensors __metadata__ \"ckpt.tied\" is not a count: no "
                                "tied names taken"))
                return oom(err);
            return 0;
        }
        want = want * 10 + (size_t)(*c - '0');
    }
    st_alias *al = NULL;
    size_t nal = 0, cap = 0, *first = NULL, seen = 0;
    uint64_t fbytes = (uint64_t)ps->n * sizeof *first;
    int r = 0;
    void *it = json_object_iter_next(meta, json_object_iter_at(meta, "ckpt.tied"));
    for (; it && r == 0 && seen < want; it = json_object_iter_next(meta, it), seen++) {
        const char *k = json_object_iter_key(it);
        json_t *v = json_object_iter_value(it);
        const char *target = json_string_value(v);
        int64_t kept = target ? find_name(byname, ps, target, json_string_length(v)) : -1;
        if (kept < 0 || find_name(byname, ps, k, strlen(k)) >= 0) {
            if (ck_note(&f->pk,
                        "safetensors __metadata__: the tied name '%.60s' %s: not taken", k,
                        kept < 0 ? "names no tensor of the file" : "is itself a tensor of the file"))
                r = oom(err);
            continue;
        }
        if (!first) {
            if (ck_mem_charge(&f->arena, fbytes) || !(first = malloc(fbytes ? fbytes : 1))) {
                if (!first && fbytes) ck_mem_release(&f->arena, fbytes);
                fbytes = 0;
                r = oom(err);
                break;
            }
            memset(first, 0xff, fbytes); /* SIZE_MAX: none yet */
        }
        if ((r = ck_grow_in(&f->arena, (void **)&al, &cap, nal + 1, sizeof *al, err))) break;
        const ck_tdef *kt = ck_tdef_of(ps->root->u.seq.v[2 + 2 * (size_t)kept + 1]);
        ckpt_value *key = ck_new_str(&f->pk, CKPT_V_STR, k, strlen(k));
        int64_t *sh = kt->ndim ? ck_alloc_copy(&f->arena, kt->shape, kt->ndim * sizeof *sh) : NULL;
        int64_t *st = kt->ndim ? ck_alloc_copy(&f->arena, kt->stride, kt->ndim * sizeof *st) : NULL;
        ckpt_value *tv = ck_new(&f->pk, CKPT_V_TENSOR);
        ck_tdef *td;
        if (!key || !tv || (kt->ndim && (!sh || !st))) {
            r = oom(err);
            break;
        }
        if ((r = ck_tensor_new(f, kt->sidx, kt->dtype, kt->ndim, sh, st, 0, kt->offset_pos, &td,
                               err)))
            break;
        tv->u.ext = td;
        al[nal] = (st_alias){key, tv, SIZE_MAX};
        size_t *link = &first[kept]; /* after the kept tensor's last alias */
        while (*link != SIZE_MAX) link = &al[*link].next;
        *link = nal++;
    }
    if (r == 0 && nal) {
        ckpt_value *root = ck_new(&f->pk, CKPT_V_DICT);
        if (!root || ck_seq_room(&f->pk, root, 2 * (1 + ps->n + nal), true)) {
            r = oom(err);
        } else {
            ckpt_value **v = root->u.seq.v, **old = ps->root->u.seq.v;
            size_t k = 0;
            v[k++] = old[0];
            v[k++] = old[1];
            for (size_t i = 0; i < ps->n; i++) {
                v[k++] = old[2 + 2 * i];
                v[k++] = old[2 + 2 * i + 1];
                for (size_t a = first[i]; a != SIZE_MAX; a = al[a].next) {
                    v[k++] = al[a].key;
                    v[k++] = al[a].tensor;
                }
            }
            root->u.seq.n = k;
            ps->root = root;
        }
        if (r == 0 && ck_note(&f->pk,
                              "%zu tied tensor name%s listed from __metadata__ (written once by "
                              "ckpt convert), each over the storage of the tensor it names",
                              nal, nal == 1 ? "" : "s"))
            r = oom(err);
    }
    if (first) {
        free(first);
        ck_mem_release(&f->arena, fbytes);
    }
    free(al);
    return r;
}

static int st_open(ckpt_file *f, ckpt_error *err)
{
    uint8_t h8[8];
    CK_TRY(ck_read(&f->src, 0, h8, 8, "safetensors header length", err));
    uint64_t hl = ck_le64(h8);
    f->format = CKPT_FORMAT_SAFETENSORS;
    f->byteorder = CKPT_LITTLE;
    f->pickle_label = "safetensors";
    if (hl > f->src.size - 8)
        return ck_fail(err, CKPT_E_FORMAT, 0,
                       "safetensors header of %llu bytes is past the end of the file",
                       (unsigned long long)hl);
    uint64_t lim =
        f->opt.max_pickle_bytes < ST_MAX_HEADER ? f->opt.max_pickle_bytes : ST_MAX_HEADER;
    if (hl > lim)
        return ck_fail(err, CKPT_E_LIMIT, 0,
                       "safetensors header of %llu bytes is larger than the limit of %llu bytes",
                       (unsigned long long)hl, (unsigned long long)lim);
    /* the header is the file's metadata, as a pickle is: the limits that
     * grow with a pickle's bytes grow with it */
    f->pk.pickle_bytes = hl;
    ck_mem_allow(&f->arena, f->opt.max_memory, f->src.size, hl);
    uint64_t data_start = 8 + hl, data_len = f->src.size - data_start;
    st_text t = {&f->src, &f->arena, hl, NULL, hl < ST_WINDOW ? (size_t)hl : ST_WINDOW, 0, 0,
                 f->opt.max_depth < 64 ? f->opt.max_depth : 64};
    st_parse ps = {ck_new(&f->pk, CKPT_V_DICT), NULL, 0, NULL, 0, 0};
    uint64_t window = t.cap;
    int r = ps.root && ck_seq_push(&f->pk, ps.root, NULL) == 0 &&
                    ck_seq_push(&f->pk, ps.root, NULL) == 0 /* "__metadata__" goes first */
                ? 0
                : oom(err);
    if (r == 0 && ck_mem_charge(&f->arena, window)) {
        window = 0;
        r = ck_fail(err, CKPT_E_NOMEM, 0, "out of memory for the header");
    }
    if (r == 0 && !(t.buf = malloc(t.cap))) r = oom(err);
    if (r == 0) r = st_members(f, &t, data_start, data_len, &ps, err);
    free(t.buf);
    if (window) ck_mem_release(&f->arena, t.cap); /* as slide() grew it */
    ckpt_value *md = NULL; /* the metadata first: its own errors come first */
    if (r == 0 && ps.meta) r = st_metadata(f, ps.meta, ps.meta_pos, &md, err);
    /* one array of a slot a tensor: by name (no two tensors of one name),
     * by data offset (the tiling), by name again (aliases) */
    uint64_t nbytes = (uint64_t)ps.n * sizeof(st_slot);
    st_slot *slots = NULL;
    if (r == 0 && (ck_mem_charge(&f->arena, nbytes) || !(slots = malloc(nbytes ? nbytes : 1)))) {
        if (nbytes && !slots) ck_mem_release(&f->arena, nbytes);
        nbytes = 0;
        r = oom(err);
    }
    st_named *byname = (st_named *)slots;
    if (r == 0) sort_by_name(byname, &ps);
    for (size_t k = 1; r == 0 && k < ps.n; k++)
        if (by_name(&byname[k - 1], &byname[k]) == 0) {
            uint32_t a = ps.at[byname[k - 1].i], b = ps.at[byname[k].i];
            r = ck_fail(err, CKPT_E_FORMAT, ST_BASE + (int64_t)(a > b ? a : b),
                        "safetensors header is not valid JSON: duplicate object key '%.60s'",
                        byname[k].k->u.s.p);
        }
    if (r == 0) r = st_tiling(f, &ps, (st_span *)slots, data_start, data_len, err);
    if (r == 0 && ps.meta && json_is_string(json_object_get(ps.meta, "ckpt.source_format")))
        sort_by_name(byname, &ps);
    if (r == 0 && ps.meta) r = st_aliases(f, &ps, byname, err);
    if (r == 0 && md) {
        ps.root->u.seq.v[0] = ck_new_str(&f->pk, CKPT_V_STR, "__metadata__", 12);
        ps.root->u.seq.v[1] = md;
        if (!ps.root->u.seq.v[0]) r = oom(err);
    } else if (r == 0) { /* no __metadata__: its slots go */
        ckpt_value **v = ps.root->u.seq.v;
        memmove(v, v + 2, (ps.root->u.seq.n - 2) * sizeof *v);
        ps.root->u.seq.n -= 2;
    }
    free(slots);
    ck_mem_release(&f->arena, nbytes);
    free(ps.at);
    if (ps.meta) json_decref(ps.meta);
    if (r == 0) f->root = ps.root;
    return r;
}

static int st_verify(const ckpt_file *f, void (*note)(void *, const char *),
                     void (*progress)(void *, uint64_t, uint64_t), void *ctx, ckpt_error *err)
{
    (void)f, (void)progress, (void)err;
    if (note)
        note(ctx, "safetensors: header, dtypes, shapes and offsets (tiling the data) checked; "
                  "data has no checksums");
    return 0;
}

const ck_format ck_format_safetensors = {"safetensors", st_bid, st_open, NULL,
                                         st_verify,     NULL,   NULL,    NULL};
