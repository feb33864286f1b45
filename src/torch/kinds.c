/*
 * kinds.c - layer 3 (torch): tensor kinds beyond the dense strided tensor.
 *
 *   quantized  torch._utils._rebuild_qtensor(storage, offset, size, stride,
 *              quantizer_params, requires_grad, hooks): a strided tensor
 *              over its integer storage plus the quantization parameters
 *              (per-channel scales and zero points are tensors, read when
 *              the file is catalogued; float zero points make the scheme
 *              per_channel_affine_float_qparams, as in torch's quantizer).
 *   sparse     _rebuild_sparse_tensor(layout, data) and 1.x's
 *              _rebuild_sparse_csr_tensor: the components (indices, values,
 *              ...), each a strided tensor, listed as NAME.<component>.
 *   meta       _rebuild_meta_tensor_no_storage(dtype, size, stride, rg):
 *              listed, no data.
 *   nested     _rebuild_nested_tensor(buffer, sizes, strides, offsets):
 *              listed, unreadable.
 *   numpy      numpy.core.multiarray._reconstruct + BUILD state, protocol
 *              5's numpy.core.numeric._frombuffer (numpy._core's too): a
 *              tensor over its bytes in the pickle (Python 2's: a str);
 *              scalar(dtype, bytes): the number.  pickle.dump of a tensor
 *              (torch.storage._load_from_bytes): a tensor over its stream.
 * A kind whose arguments are not as expected is listed as an unreadable
 * tensor saying why: one odd tensor never blocks the rest of the file.
 */
#include "torch.h"

#include <stdio.h>
#include <string.h>

#define PFAIL(...) ck_machine_fail(m, CKPT_E_PICKLE, __VA_ARGS__)

static const char *const layout_names[] = {"strided",    "sparse_coo", "sparse_csr",
                                           "sparse_csc", "sparse_bsr", "sparse_bsc"};
static const char *const qscheme_names[] = {"none",
                                            "per_tensor_affine",
                                            "per_channel_affine",
                                            "per_tensor_symmetric",
                                            "per_channel_symmetric",
                                            "per_channel_affine_float_qparams"};

const char *ckpt_layout_name(ckpt_layout l)
{
    return (unsigned)l < sizeof layout_names / sizeof *layout_names ? layout_names[l] : "unknown";
}

const char *ckpt_qscheme_name(ckpt_qscheme q)
{
    return (unsigned)q < sizeof qscheme_names / sizeof *qscheme_names ? qscheme_names[q]
                                                                      : "unknown";
}

/* ---- find_class ------------------------------------------------------------ */

static const struct {
    const char *module, *name;
    uint8_t tag;
} kind_globals[] = {
    {"torch._utils", "_rebuild_qtensor", CK_G_REBUILD_QTENSOR},
    {"torch._utils", "_rebuild_sparse_tensor", CK_G_REBUILD_SPARSE},
    {"torch._utils", "_rebuild_sparse_csr_tensor", CK_G_REBUILD_SPARSE},
    {"torch._utils", "_rebuild_meta_tensor_no_storage", CK_G_REBUILD_META},
    {"torch._utils", "_rebuild_nested_tensor", CK_G_REBUILD_NESTED},
    {"torch.serialization", "_get_layout", CK_G_GET_LAYOUT},
    {"numpy.core.multiarray", "_reconstruct", CK_G_NP_RECONSTRUCT},
    {"numpy._core.multiarray", "_reconstruct", CK_G_NP_RECONSTRUCT},
    {"numpy.core.numeric", "_frombuffer", CK_G_NP_FROMBUFFER},
    {"numpy._core.numeric", "_frombuffer", CK_G_NP_FROMBUFFER},
    {"numpy", "ndarray", CK_G_NP_NDARRAY},
    {"torch.storage", "_load_from_bytes", CK_G_LOAD_FROM_BYTES},
    {"numpy", "dtype", CK_G_NP_DTYPE},
    {"numpy.core.multiarray", "scalar", CK_G_NP_SCALAR},
    {"numpy._core.multiarray", "scalar", CK_G_NP_SCALAR},
};

static int layout_by_name(const char *n, ckpt_layout *l)
{
    for (unsigned i = 1; i < sizeof layout_names / sizeof *layout_names; i++)
        if (strcmp(n, layout_names[i]) == 0) {
            *l = (ckpt_layout)i;
            return 0;
        }
    return -1;
}

int ck_kind_find_class(ckpt_value *g)
{
    const char *m = g->u.g->module, *n = g->u.g->name;
    for (size_t i = 0; i < sizeof kind_globals / sizeof *kind_globals; i++)
        if (strcmp(m, kind_globals[i].module) == 0 && strcmp(n, kind_globals[i].name) == 0) {
            g->gid = kind_globals[i].tag;
            return 1;
        }
    if (strcmp(m, "torch") != 0) return 0;
    ckpt_layout l;
    if (layout_by_name(n, &l) == 0) {
        g->gid = CK_G_LAYOUT;
        g->aux = (uint8_t)l;
        return 1;
    }
    for (unsigned i = 1; i < sizeof qscheme_names / sizeof *qscheme_names; i++)
        if (strcmp(n, qscheme_names[i]) == 0) {
            g->gid = CK_G_QSCHEME;
            g->aux = (uint8_t)i;
            return 1;
        }
    return 0;
}

/* ---- helpers ----------------------------------------------------------------- */

static bool is_seq(const ckpt_value *v)
{
    return v && (v->kind == CKPT_V_TUPLE || v->kind == CKPT_V_LIST);
}

static ck_tkind *new_kind(ckpt_file *f, ck_machine *m)
{
    ck_tkind *k = ck_alloc(&f->arena, sizeof *k);
    if (!k) ck_machine_fail(m, CKPT_E_NOMEM, "out of memory");
    return k;
}

/* ints of a tuple (at most 64), or -1 (not an error: the caller lists the
 * tensor as unreadable). */
static int ints(ckpt_file *f, const ckpt_value *v, uint32_t *n, int64_t **out)
{
    if (!is_seq(v) || v->u.seq.n > 64 || v->u.seq.n > f->opt.max_rank) return -1;
    *n = (uint32_t)v->u.seq.n;
    *out = NULL;
    if (!*n) return 0;
    if (!(*out = ck_alloc(&f->arena, *n * sizeof **out))) return -1;
    for (uint32_t i = 0; i < *n; i++)
        if (!ck_as_int(v->u.seq.v[i], &(*out)[i]) || (*out)[i] < 0) return -1;
    return 0;
}

int ck_kind_unreadable(ckpt_file *f, ck_machine *m, const char *why, ckpt_dtype dtype,
                       uint32_t ndim, const int64_t *shape, ckpt_value **out)
{
    ck_tdef *t = ck_alloc(&f->arena, sizeof *t);
    const char *w = ck_strndup(&f->arena, why, strlen(why));
    if (!t || !w) return ck_machine_fail(m, CKPT_E_NOMEM, "out of memory");
    t->sidx = CK_TDEF_NO_STORAGE;
    t->dtype = dtype;
    t->ndim = (uint8_t)ndim; /* ints(): at most 64 */
    if (ndim) {
        t->shape = ck_alloc_copy(&f->arena, shape, ndim * sizeof *shape);
        t->stride = ck_alloc(&f->arena, ndim * sizeof *t->stride);
        if (!t->shape || !t->stride) return ck_machine_fail(m, CKPT_E_NOMEM, "out of memory");
        int64_t s = 1;
        for (uint32_t i = ndim; i-- > 0;) { /* contiguous strides, for show */
            t->stride[i] = s;
            if (shape[i] > 0 && s <= INT64_MAX / shape[i]) s *= shape[i];
        }
    }
    t->offset_pos = ck_machine_pos(m);
    ck_tkind *k = ck_tdef_kind(f, t);
    if (!k) return ck_machine_fail(m, CKPT_E_NOMEM, "out of memory");
    k->unreadable = w;
    if (!(*out = ck_tensor_value(f, t))) return ck_machine_fail(m, CKPT_E_NOMEM, "out of memory");
    return 0;
}

static int unreadable_kind(ckpt_file *f, ck_machine *m, const char *kind, const char *detail,
                           ckpt_value **out)
{
    char why[160];
    snprintf(why, sizeof why, "%s tensor: %s", kind, detail);
    return ck_kind_unreadable(f, m, why, CKPT_UINT8, 0, NULL, out);
}

/* ---- quantized ----------------------------------------------------------------- */

static ckpt_dtype quantized_dtype(ckpt_dtype d)
{
    switch (d) {
    case CKPT_INT8: return CKPT_QINT8;
    case CKPT_UINT8: return CKPT_QUINT8;
    case CKPT_INT32: return CKPT_QINT32;
    default: return d;
    }
}

static bool float_dtype(ckpt_dtype d)
{
    return d == CKPT_FLOAT64 || d == CKPT_FLOAT32 || d == CKPT_FLOAT16 || d == CKPT_BFLOAT16;
}

static int rebuild_qtensor(ckpt_file *f, ck_machine *m, ckpt_value *args, ckpt_value **out)
{
    size_t n = args->u.seq.n;
    ckpt_value **a = args->u.seq.v;
    if (n < 5 || a[0]->kind != CKPT_V_STORAGE)
        return unreadable_kind(f, m, "quantized", "unexpected rebuild arguments", out);
    ck_tdef *t;
    CK_TRY(ck_rebuild_strided(f, m, a, NULL, &t));
    if (n >= 6) {
        int64_t rg = 0;
        ck_as_int(a[5], &rg);
        t->requires_grad = rg != 0;
    }
    t->dtype = quantized_dtype(t->dtype);
    ck_tkind *k = new_kind(f, m);
    if (!k) return -1;
    t->kind = k;
    if (t->dtype == CKPT_QUINT4X2) k->sub_byte = 2;
    if (t->dtype == CKPT_QUINT2X4) k->sub_byte = 4;
    const ckpt_value *q = a[4];
    if (!is_seq(q) || q->u.seq.n < 1 || q->u.seq.v[0]->kind != CKPT_V_GLOBAL ||
        q->u.seq.v[0]->gid != CK_G_QSCHEME) {
        k->unreadable = "quantized tensor: unknown quantization scheme";
    } else {
        ckpt_value **p = q->u.seq.v;
        k->qscheme = (ckpt_qscheme)p[0]->aux;
        if (k->qscheme == CKPT_PER_TENSOR_AFFINE || k->qscheme == CKPT_PER_TENSOR_SYMMETRIC) {
            if (q->u.seq.n < 3 || (p[1]->kind != CKPT_V_FLOAT && p[1]->kind != CKPT_V_INT) ||
                !ck_as_int(p[2], &k->zero_point))
                k->unreadable = "quantized tensor: malformed per-tensor parameters";
            else
                k->scale = p[1]->kind == CKPT_V_FLOAT ? p[1]->u.f : (double)p[1]->u.i;
        } else {
            if (q->u.seq.n < 4 || p[1]->kind != CKPT_V_TENSOR || p[2]->kind != CKPT_V_TENSOR ||
                !ck_as_int(p[3], &k->axis) || k->axis < 0 || (uint64_t)k->axis >= t->ndim)
                k->unreadable = "quantized tensor: malformed per-channel parameters";
            else {
                k->qscales = ck_tdef_of(p[1]);
                k->qzeros = ck_tdef_of(p[2]);
                /* torch's __reduce_ex__ writes per_channel_affine_float_qparams
                 * as per_channel_affine; the quantizer torch then makes has
                 * float qparams when the zero points are floating point */
                if (k->qscheme == CKPT_PER_CHANNEL_AFFINE && float_dtype(k->qzeros->dtype))
                    k->qscheme = CKPT_PER_CHANNEL_AFFINE_FLOAT_QPARAMS;
            }
        }
    }
    if (!(*out = ck_tensor_value(f, t))) return ck_machine_fail(m, CKPT_E_NOMEM, "out of memory");
    return 0;
}

/* ---- sparse ---------------------------------------------------------------------- */

static const char *const coo_parts[] = {"indices", "values"};
static const char *const csr_parts[] = {"crow_indices", "col_indices", "values"};
static const char *const csc_parts[] = {"ccol_indices", "row_indices", "values"};

static int rebuild_sparse(ckpt_file *f, ck_machine *m, ckpt_value *args, ckpt_value **out)
{
    size_t n = args->u.seq.n;
    ckpt_value **a = args->u.seq.v;
    ckpt_layout layout = CKPT_LAYOUT_STRIDED;
    if (n >= 1 && a[0]->kind == CKPT_V_GLOBAL && a[0]->gid == CK_G_LAYOUT) {
        layout = (ckpt_layout)a[0]->aux;
    } else if (n >= 1 && a[0]->kind == CKPT_V_OBJECT && a[0]->u.obj->callable &&
               a[0]->u.obj->callable->gid == CK_G_GET_LAYOUT && a[0]->u.obj->args &&
               a[0]->u.obj->args->u.seq.n == 1 &&
               a[0]->u.obj->args->u.seq.v[0]->kind == CKPT_V_STR) {
        const char *s = a[0]->u.obj->args->u.seq.v[0]->u.s.p;
        if (strncmp(s, "torch.", 6) == 0 && layout_by_name(s + 6, &layout) != 0)
            layout = CKPT_LAYOUT_STRIDED;
    }
    if (layout == CKPT_LAYOUT_STRIDED || n < 2 || !is_seq(a[1]))
        return unreadable_kind(f, m, "sparse", "unknown layout or data", out);
    const ckpt_value *d = a[1];
    size_t np = layout == CKPT_LAYOUT_SPARSE_COO ? 2 : 3;
    if (d->u.seq.n < np + 1) return unreadable_kind(f, m, "sparse", "too few components", out);
    ck_tkind *k = new_kind(f, m);
    if (!k) return -1;
    k->layout = layout;
    k->nparts = np;
    const char *const *names =
        layout == CKPT_LAYOUT_SPARSE_COO                                         ? coo_parts
        : (layout == CKPT_LAYOUT_SPARSE_CSR || layout == CKPT_LAYOUT_SPARSE_BSR) ? csr_parts
                                                                                 : csc_parts;
    for (size_t i = 0; i < np; i++) {
        if (d->u.seq.v[i]->kind != CKPT_V_TENSOR)
            return unreadable_kind(f, m, "sparse", "a component is not a tensor", out);
        k->parts[i] = ck_tdef_of(d->u.seq.v[i]);
        k->part_names[i] = names[i];
        if (k->parts[i]->kind && k->parts[i]->kind->nparts)
            return unreadable_kind(f, m, "sparse", "a component is itself sparse", out);
    }
    if (ints(f, d->u.seq.v[np], &k->dense_ndim, &k->dense_size) != 0)
        return unreadable_kind(f, m, "sparse", "malformed size", out);
    ck_tdef *vals = k->parts[np - 1];
    ck_tdef *t = ck_alloc(&f->arena, sizeof *t);
    if (!t) return ck_machine_fail(m, CKPT_E_NOMEM, "out of memory");
    t->sidx = CK_TDEF_NO_STORAGE;
    t->dtype = vals->dtype;
    t->ndim = (uint8_t)k->dense_ndim; /* ints(): at most 64 */
    t->shape = k->dense_size;
    t->stride = NULL;
    t->offset_pos = ck_machine_pos(m);
    t->kind = k;
    k->unreadable = "sparse tensor: read its components";
    if (t->ndim) {
        t->stride = ck_alloc(&f->arena, t->ndim * sizeof *t->stride);
        if (!t->stride) return ck_machine_fail(m, CKPT_E_NOMEM, "out of memory");
    }
    if (!(*out = ck_tensor_value(f, t))) return ck_machine_fail(m, CKPT_E_NOMEM, "out of memory");
    return 0;
}

/* ---- meta, nested ------------------------------------------------------------ */

static int rebuild_meta(ckpt_file *f, ck_machine *m, ckpt_value *args, ckpt_value **out)
{
    size_t n = args->u.seq.n;
    ckpt_value **a = args->u.seq.v;
    uint32_t nd;
    int64_t *shape;
    if (n < 2 || a[0]->kind != CKPT_V_GLOBAL || a[0]->gid != CK_G_DTYPE ||
        ints(f, a[1], &nd, &shape) != 0)
        return unreadable_kind(f, m, "meta", "no data", out);
    CK_TRY(ck_kind_unreadable(f, m, "meta tensor: no data (device 'meta' stores none)",
                              (ckpt_dtype)a[0]->aux, nd, shape, out));
    ck_tdef *t = ck_tdef_of(*out);
    uint32_t nd2;
    int64_t *stride;
    if (n >= 3 && ints(f, a[2], &nd2, &stride) == 0 && nd2 == nd) t->stride = stride;
    int64_t rg = 0;
    if (n >= 4 && ck_as_int(a[3], &rg)) t->requires_grad = rg != 0;
    return 0;
}

static int rebuild_nested(ckpt_file *f, ck_machine *m, ckpt_value *args, ckpt_value **out)
{
    size_t n = args->u.seq.n;
    ckpt_value **a = args->u.seq.v;
    if (n < 2 || a[0]->kind != CKPT_V_TENSOR || a[1]->kind != CKPT_V_TENSOR)
        return unreadable_kind(f, m, "nested", "unexpected rebuild arguments", out);
    const ck_tdef *buf = ck_tdef_of(a[0]), *sizes = ck_tdef_of(a[1]);
    int64_t count = sizes->ndim >= 1 ? sizes->shape[0] : 0;
    return ck_kind_unreadable(f, m,
                              "nested tensor: its constituents have different shapes (no "
                              "dense data)",
                              buf->dtype, 1, &count, out);
}

/* ---- numpy ----------------------------------------------------------------- */

/* A numpy.dtype object (numpy.dtype(descr, align, copy) + BUILD state
 * (version, byteorder, ...)): torch's dtype, item size, big-endian. */
static int np_dtype(const ckpt_value *d, ckpt_dtype *dt, size_t *size, bool *big)
{
    if (!d || d->kind != CKPT_V_OBJECT || !d->u.obj->callable ||
        d->u.obj->callable->gid != CK_G_NP_DTYPE || !d->u.obj->args ||
        d->u.obj->args->u.seq.n < 1 || d->u.obj->args->u.seq.v[0]->kind != CKPT_V_STR)
        return -1;
    const char *s = d->u.obj->args->u.seq.v[0]->u.s.p;
    static const struct {
        const char *descr;
        uint8_t dtype;
    } map[] = {
        {"f8", CKPT_FLOAT64},   {"f4", CKPT_FLOAT32},     {"f2", CKPT_FLOAT16}, {"i8", CKPT_INT64},
        {"i4", CKPT_INT32},     {"i2", CKPT_INT16},       {"i1", CKPT_INT8},    {"u1", CKPT_UINT8},
        {"u2", CKPT_UINT16},    {"u4", CKPT_UINT32},      {"u8", CKPT_UINT64},  {"b1", CKPT_BOOL},
        {"c8", CKPT_COMPLEX64}, {"c16", CKPT_COMPLEX128},
    };
    size_t i;
    for (i = 0; i < sizeof map / sizeof *map; i++)
        if (strcmp(s, map[i].descr) == 0) break;
    if (i == sizeof map / sizeof *map) return -1; /* objects, strings, records: inert */
    *dt = (ckpt_dtype)map[i].dtype;
    *size = ck_dtype_size(*dt);
    *big = false;
    const ckpt_value *st = d->u.obj->state;
    if (st && is_seq(st) && st->u.seq.n >= 2 && st->u.seq.v[1]->kind == CKPT_V_STR &&
        st->u.seq.v[1]->u.s.n == 1)
        *big = st->u.seq.v[1]->u.s.p[0] == '>';
    return 0;
}

/* The data of a numpy array or scalar, `want` bytes of it: bytes, or a str,
 * which numpy's __setstate__ and scalar() encode as latin-1.  A Python 2
 * str (STRING, BINSTRING, SHORT_BINSTRING) the machine keeps as its bytes:
 * what numpy gets back from the str torch.load(f, encoding='latin1') makes
 * of it (torch's default encoding, utf-8, fails on most such arrays).  A
 * Python 3 str is UTF-8 text: encoded when its length is not `want` (text
 * past ASCII is longer than its latin-1 bytes).  0 and *p, *n (the data,
 * its length: `want`, or another when the data does not fit), 1 when v is
 * neither (an inert value), -1 on OOM (err set). */
static int np_data(ckpt_file *f, const ckpt_value *v, uint64_t want, const char **p, size_t *n,
                   ckpt_error *err)
{
    if (v->kind != CKPT_V_BYTES && v->kind != CKPT_V_STR) return 1;
    *p = v->u.s.p;
    *n = v->u.s.n;
    if (v->kind == CKPT_V_BYTES || *n == want || want > *n) return 0;
    char *o = ck_alloc(&f->arena, *n);
    if (!o) return ck_fail(err, CKPT_E_NOMEM, -1, "out of memory");
    size_t k = ck_latin1_encode(*p, *n, o);
    if (k == want) {
        *p = o;
        *n = k;
    }
    return 0;
}

/* An array of numpy dtype object `dtype` and shape `shape` whose elements
 * are `data` in C or Fortran order: 1 and *out, 0 when it is not one ckpt
 * lists (an object array, an unknown dtype: it stays inert), -1 on error. */
static int np_array(ckpt_file *f, const ckpt_value *dtype, const ckpt_value *shape_v, bool fortran,
                    const ckpt_value *data, ck_tdef **out, ckpt_error *err)
{
    ckpt_dtype dt;
    size_t es;
    bool big;
    uint32_t nd;
    int64_t *shape;
    if (np_dtype(dtype, &dt, &es, &big) != 0 ||
        (data->kind != CKPT_V_BYTES && data->kind != CKPT_V_STR))
        return 0;
    if (ints(f, shape_v, &nd, &shape) != 0) return 0;
    uint64_t numel = 1, nbytes;
    for (uint32_t i = 0; i < nd; i++)
        if (ck_mul_ovf(numel, (uint64_t)shape[i], &numel)) return 0;
    bool over = ck_mul_ovf(numel, es, &nbytes);
    const char *bytes;
    size_t have;
    int r = np_data(f, data, over ? UINT64_MAX : nbytes, &bytes, &have, err);
    if (r != 0) return r < 0 ? -1 : 0;
    if (over || nbytes != have)
        return ck_fail(err, CKPT_E_FORMAT, -1,
                       "a numpy array of %llu bytes holds %zu bytes of data",
                       (unsigned long long)(over ? UINT64_MAX : nbytes), have);
    ck_tdef *t = ck_alloc(&f->arena, sizeof *t);
    ck_tkind *k = ck_alloc(&f->arena, sizeof *k);
    int64_t *stride = nd ? ck_alloc(&f->arena, nd * sizeof *stride) : NULL;
    if (!t || !k || (nd && !stride)) return ck_fail(err, CKPT_E_NOMEM, -1, "out of memory");
    int64_t s = 1;
    for (uint32_t j = 0; j < nd; j++) { /* C order: last dimension fastest */
        uint32_t i = fortran ? j : nd - 1 - j;
        stride[i] = s;
        if (shape[i] > 1) s *= shape[i]; /* bounded: numel * es fits the bytes */
    }
    t->sidx = CK_TDEF_NO_STORAGE;
    t->dtype = dt;
    t->ndim = (uint8_t)nd; /* ints(): at most 64 */
    t->shape = shape;
    t->stride = stride;
    t->offset_pos = -1;
    t->kind = k;
    k->bytes = (const uint8_t *)bytes;
    k->big_endian = big && es > 1;
    *out = t;
    return 1;
}

int ck_kind_numpy(ckpt_file *f, const ckpt_value *v, ck_tdef **out, ckpt_error *err)
{
    const ck_obj *o = v->u.obj;
    if (!o->callable) return 0;
    if (o->callable->gid == CK_G_NP_RECONSTRUCT) {
        /* _reconstruct(ndarray, (0,), b'b') + BUILD state (version, shape,
         * dtype, is_fortran, rawdata) */
        const ckpt_value *st = o->state;
        if (!st || st->kind != CKPT_V_TUPLE || st->u.seq.n < 5) return 0;
        ckpt_value **a = st->u.seq.v;
        bool fortran =
            a[3]->kind == CKPT_V_BOOL ? a[3]->u.b : a[3]->kind == CKPT_V_INT && a[3]->u.i;
        return np_array(f, a[2], a[1], fortran, a[4], out, err);
    }
    if (o->callable->gid == CK_G_NP_FROMBUFFER) {
        /* _frombuffer(buf, dtype, shape, order): numpy's __reduce_ex__ of a
         * contiguous array at protocol 5, buf the PickleBuffer written in
         * band (BYTEARRAY8, or bytes when read-only); order 'C' or 'F' */
        const ckpt_value *args = o->args;
        if (o->state || !args || args->kind != CKPT_V_TUPLE || args->u.seq.n != 4) return 0;
        ckpt_value **a = args->u.seq.v;
        if (a[3]->kind != CKPT_V_STR || a[3]->u.s.n != 1 ||
            (a[3]->u.s.p[0] != 'C' && a[3]->u.s.p[0] != 'F'))
            return 0;
        return np_array(f, a[1], a[2], a[3]->u.s.p[0] == 'F', a[0], out, err);
    }
    return 0;
}

/* ---- pickled tensors ---------------------------------------------------------- */

static ckpt_value *pid_itself(void *ud, ckpt_value *pid, int64_t pos, ckpt_error *err)
{
    (void)ud, (void)pos, (void)err;
    return pid;
}

/* The legacy torch.save stream of one storage that pickle.dump of a tensor
 * puts in bytes: magic, protocol, sys_info, the storage's persistent id,
 * its key list, then numel (8 bytes) and the elements.  Its pickles are run
 * by a machine of their own with no hooks: nothing in them is interpreted
 * beyond values.  0 and the data, or a reason in why. */
static int legacy_bytes(ckpt_file *f, const ckpt_value *b, ckpt_dtype *dt, const uint8_t **data,
                        uint64_t *numel, bool *big, const char **why)
{
    ck_unpickler u;
    memset(&u, 0, sizeof u);
    u.arena = &f->arena;
    u.opt = &f->opt;
    u.input_size = b->u.s.n;
    u.hooks.persistent_load = pid_itself;
    const uint8_t *p = (const uint8_t *)b->u.s.p;
    size_t n = b->u.s.n, pos = 0;
    ckpt_value *v[5];
    int r = 0;
    for (int i = 0; i < 5 && r == 0; i++) {
        ck_pickle_in in = {.buf = p + pos,
                           .len = n - pos,
                           .base = -1,
                           .label = "torch.storage._load_from_bytes"};
        size_t used = 0;
        ckpt_error e;
        r = ck_pickle_run(&u, &in, &v[i], &used, &e) == 0 ? 0 : -1;
        pos += used;
    }
    ck_unpickler_free(&u);
    *why = "pickled tensor: its bytes are not a torch.save stream";
    if (r != 0 || v[0]->kind != CKPT_V_BIGINT ||
        strcmp(v[0]->u.s.p, "119547037146038801333356") != 0)
        return -1;
    const ckpt_value *le = v[2]->kind == CKPT_V_DICT ? ck_dict_get(v[2], "little_endian") : NULL;
    *big = le && le->kind == CKPT_V_BOOL && !le->u.b;
    const ckpt_value *pid = v[3];
    int64_t declared;
    if (!is_seq(pid) || pid->u.seq.n < 5 || !ck_is_str(pid->u.seq.v[0], "storage") ||
        pid->u.seq.v[1]->kind != CKPT_V_GLOBAL || !ck_as_int(pid->u.seq.v[4], &declared) ||
        declared < 0)
        return -1;
    if (pid->u.seq.n > 5 && pid->u.seq.v[5]->kind != CKPT_V_NONE) {
        *why = "pickled tensor: a view of a storage in its bytes (not read)";
        return -1;
    }
    const char *cls = pid->u.seq.v[1]->u.g->name;
    if (ck_dtype_by_storage_class(cls, strlen(cls), dt) != 0) {
        *why = "pickled tensor: unknown storage class";
        return -1;
    }
    uint64_t count = 0, bytes;
    if (n - pos < 8) return -1;
    for (int i = 7; i >= 0; i--)
        count = count << 8 | (*big ? p[pos + 7 - (size_t)i] : p[pos + (size_t)i]);
    pos += 8;
    if (count != (uint64_t)declared || ck_mul_ovf(count, ck_dtype_size(*dt), &bytes) ||
        bytes > n - pos)
        return -1;
    *data = p + pos;
    *numel = count;
    return 0;
}

int ck_kind_from_bytes(ckpt_file *f, ck_machine *m, ckpt_value **a, const ckpt_value *dtype_g,
                       ck_tdef **out)
{
    const ck_obj *o = a[0]->u.obj;
    ckpt_dtype dt = CKPT_UINT8;
    const uint8_t *data = NULL;
    uint64_t count = 0;
    bool big = false;
    const char *why = "pickled tensor: no bytes";
    uint32_t nd = 0, nd2 = 0;
    int64_t *shape = NULL, *stride = NULL, offset = 0;
    int ok = o->args && o->args->u.seq.n == 1 && o->args->u.seq.v[0]->kind == CKPT_V_BYTES &&
             legacy_bytes(f, o->args->u.seq.v[0], &dt, &data, &count, &big, &why) == 0;
    if (ok && dtype_g && dtype_g->kind == CKPT_V_GLOBAL && dtype_g->gid == CK_G_DTYPE &&
        (ckpt_dtype)dtype_g->aux != dt) {
        ok = 0; /* a typed storage in the stream: its dtype is the tensor's */
        why = "pickled tensor: dtype differs from its storage";
    }
    if (ok && (ints(f, a[2], &nd, &shape) != 0 || ints(f, a[3], &nd2, &stride) != 0 || nd2 != nd ||
               !ck_as_int(a[1], &offset) || offset < 0)) {
        ok = 0;
        why = "pickled tensor: malformed size, stride or offset";
    }
    uint64_t numel = 1, last = (uint64_t)offset, step;
    for (uint32_t i = 0; ok && i < nd; i++)
        if (ck_mul_ovf(numel, (uint64_t)shape[i], &numel)) ok = 0;
    for (uint32_t i = 0; ok && numel && i < nd; i++)
        if (ck_mul_ovf((uint64_t)(shape[i] - 1), (uint64_t)stride[i], &step) ||
            ck_add_ovf(last, step, &last))
            ok = 0;
    if (ok && numel && last >= count) {
        ok = 0;
        why = "pickled tensor: reaches past its storage";
    }
    if (!ok) {
        ckpt_value *v;
        CK_TRY(ck_kind_unreadable(f, m, why, dt, nd, shape, &v));
        *out = ck_tdef_of(v);
        return 0;
    }
    ck_tdef *t = ck_alloc(&f->arena, sizeof *t);
    ck_tkind *k = ck_alloc(&f->arena, sizeof *k);
    if (!t || !k) return ck_machine_fail(m, CKPT_E_NOMEM, "out of memory");
    t->sidx = CK_TDEF_NO_STORAGE;
    t->dtype = dt;
    t->ndim = (uint8_t)nd; /* ints(): at most 64 */
    t->shape = shape;
    t->stride = stride;
    t->offset = offset;
    t->offset_pos = ck_machine_pos(m);
    t->kind = k;
    k->bytes = data;
    k->big_endian = big && ck_dtype_size(dt) > 1;
    *out = t;
    return 0;
}

/* numpy.core.multiarray.scalar(dtype, bytes or a Python 2 str): the number. */
static int np_scalar(ckpt_file *f, ck_machine *m, ckpt_value *args, ckpt_value **out)
{
    ckpt_value **a = args->u.seq.v;
    ckpt_dtype dt;
    size_t es;
    bool big;
    const char *data;
    size_t have;
    if (args->u.seq.n != 2 || np_dtype(a[0], &dt, &es, &big) != 0 || es > 8) return 1;
    int r = np_data(f, a[1], es, &data, &have, ck_machine_err(m));
    if (r < 0) return -1;
    if (r > 0 || have != es) return 1;
    uint8_t b[8];
    memcpy(b, data, es);
    const uint16_t one = 1;
    bool host_big = *(const uint8_t *)&one == 0;
    if (big != host_big)
        for (size_t i = 0; i < es / 2; i++) {
            uint8_t x = b[i];
            b[i] = b[es - 1 - i];
            b[es - 1 - i] = x;
        }
    ckpt_value *v;
    switch (dt) {
    case CKPT_FLOAT64:
    case CKPT_FLOAT32: {
        double d;
        if (dt == CKPT_FLOAT64) {
            memcpy(&d, b, 8);
        } else {
            float x;
            memcpy(&x, b, 4);
            d = x;
        }
        if (!(v = ck_new(&f->pk, CKPT_V_FLOAT))) break;
        v->u.f = d;
        *out = v;
        return 0;
    }
    case CKPT_BOOL:
        if (!(v = ck_new(&f->pk, CKPT_V_BOOL))) break;
        v->u.b = b[0] != 0;
        *out = v;
        return 0;
    case CKPT_INT64:
    case CKPT_INT32:
    case CKPT_INT16:
    case CKPT_INT8:
    case CKPT_UINT8:
    case CKPT_UINT16:
    case CKPT_UINT32: {
        int64_t i = 0;
        if (dt == CKPT_INT64)
            memcpy(&i, b, 8);
        else if (dt == CKPT_INT32) {
            int32_t x;
            memcpy(&x, b, 4);
            i = x;
        } else if (dt == CKPT_INT16) {
            int16_t x;
            memcpy(&x, b, 2);
            i = x;
        } else if (dt == CKPT_INT8)
            i = (int8_t)b[0];
        else if (dt == CKPT_UINT8)
            i = b[0];
        else if (dt == CKPT_UINT16) {
            uint16_t x;
            memcpy(&x, b, 2);
            i = x;
        } else {
            uint32_t x;
            memcpy(&x, b, 4);
            i = x;
        }
        if (!(v = ck_new(&f->pk, CKPT_V_INT))) break;
        v->u.i = i;
        *out = v;
        return 0;
    }
    default: return 1; /* float16, uint64, complex: an inert object */
    }
    return ck_machine_fail(m, CKPT_E_NOMEM, "out of memory");
}

int ck_kind_reduce(ckpt_file *f, ck_machine *m, ckpt_value *callable, ckpt_value *args,
                   ckpt_value **out)
{
    if (args->kind != CKPT_V_TUPLE) return 1;
    switch (callable->gid) {
    case CK_G_NP_SCALAR: return np_scalar(f, m, args, out);
    case CK_G_REBUILD_QTENSOR: return rebuild_qtensor(f, m, args, out);
    case CK_G_REBUILD_SPARSE: return rebuild_sparse(f, m, args, out);
    case CK_G_REBUILD_META: return rebuild_meta(f, m, args, out);
    case CK_G_REBUILD_NESTED: return rebuild_nested(f, m, args, out);
    default: return 1; /* _get_layout(...) and the rest: inert objects */
    }
}

void ck_kind_describe(const ck_tdef *t, ckpt_tensor *o)
{
    o->unreadable = ck_tdef_unreadable(t);
    o->readable = o->unreadable ? 0 : 1;
    const ck_tkind *k = t->kind;
    if (!k) return;
    o->qscheme = k->qscheme;
    o->scale = k->scale;
    o->zero_point = k->zero_point;
    o->axis = k->axis;
    o->nchannels = k->nchannels;
    o->scales = k->scales;
    o->zero_points = k->zero_points;
    if (k->nparts) {
        o->layout = k->layout;
        o->dense_ndim = k->dense_ndim;
        o->dense_size = k->dense_size;
    }
}

ck_tkind *ck_tdef_kind(ckpt_file *f, ck_tdef *t)
{
    if (!t->kind) t->kind = ck_alloc(&f->arena, sizeof *t->kind);
    return t->kind;
}
