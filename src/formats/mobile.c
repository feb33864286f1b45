/*
 * mobile.c - layer 4 (formats): PyTorch Mobile flatbuffer modules, as
 * torch.jit.save_jit_module_to_flatbuffer() and
 * _save_for_lite_interpreter(f, _use_flatbuffer=True) write them (.ff,
 * .ptl; PyTorch 1.13 and 2.x), which torch.jit.load() tells from a ZIP by
 * the identifier "PTMF" at byte 4.  The schema is torch's
 * csrc/jit/serialization/mobile_bytecode.fbs; numbers are little-endian,
 * and every reference is an unsigned 32-bit offset forward from where it is
 * stored:
 *
 *   0  u32 -> root table Module              4  "PTMF"
 *   table at T    i32 s at T; its vtable at T - s: u16 vtable bytes, u16
 *                 table bytes, then one u16 per field: its offset in the
 *                 table, 0 (or a vtable too short) when absent: its default
 *   vector at V   u32 count, then the elements (a string: its bytes)
 *   Module        0 bytecode_version u32   1 extra_files [ExtraFile]
 *                 2 methods [u32]   3 state_obj u32 (the module: an ivalue)
 *                 4 ivalues [IValue]   5 storage_data_size i32
 *                 6 storage_data [StorageData {0 data [u8], 16-aligned}]
 *                 7 object_types [ObjectType]   8 jit_sources [ExtraFile]
 *                 9 jit_constants [u32]   10 operator_version u32
 *                 11 mobile_ivalue_size u32 (ivalues parsed; 0: all)
 *   IValue        0 type u8, 1 -> its value, by type: 1 Int {i64} 2 Bool {u8}
 *                 3 Double {f64} 4 ComplexDouble {f64 re, f64 im}
 *                 5 TensorMetadata 6 String {0 string} 7 List {0 [u32]}
 *                 8 Tuple {0 [u32]} 9 Dict {0 keys [u32], 1 values [u32]}
 *                 10 Object 11 IntList {0 [i64]} 12 DoubleList {0 [f64]}
 *                 13 BoolList {0 [u8]} 14 Device {0 string} 15 EnumValue
 *                 {0 type_name, 1 value u32} 16 Function (bytecode: None)
 *                 ([u32] and u32 here are indices into ivalues)
 *   TensorMetadata  0 storage index u32  1 scalar type i8 (c10's numbering)
 *                 2 storage_offset i32  3 sizes [i32]  4 strides [i32]
 *                 5 requires_grad u8  6 QuantizedSchema {0 qscheme i8,
 *                 1 scale f64, 2 zero_point i32, 3 scales, 4 zero_points
 *                 (TensorMetadata), 5 axis i32}
 *   Object        0 type u32 (object_types)  1 state u32  2 attrs [u32]
 *                 3 setstate_func u32
 *   ObjectType    0 type_name  1 kind u8 (1 attributes, 2 C++ custom
 *                 class, 3 __setstate__)  2 attr_names [string]
 *   ExtraFile     0 name  1 content (jit_sources: name "__torch__.a.b",
 *                 content the TorchScript source of that module)
 *
 * Read as torch's flatbuffer_loader.cpp does: ivalues in index order, a
 * reference to one not yet parsed giving None (so the value graph has no
 * cycle), a tensor a view of the untyped storage its index names (the
 * storage's bytes read in place), an object of the first kind a class
 * instance whose attributes are its slots in attr_names order.  Naming then
 * is TorchScript's (script.c): torch.jit.load(f).state_dict() recompiles the
 * classes from jit_sources, whose __parameters__/__buffers__ lines say what
 * a module's tensors are; a file saved for the lite interpreter only has no
 * sources (torch.jit.load refuses it), and every tensor attribute is listed.
 * jit_constants are ckpt_part("constants"), extra_files ckpt_part("extra").
 *
 * Hand-written, not libflatbuffers: the library is C (libflatbuffers and
 * its generated readers are C++), the .fbs is not installed with torch
 * (generated code would be a copy of torch's schema to keep in step by
 * hand anyway), generated accessors trust the buffer unless a verifier ran
 * over all of it in memory first (torch 1.13 runs none; 2.x does), and what
 * must be checked here goes past that verifier: indices between tables,
 * storage extents, limits.  So every access goes through the few functions
 * below: each table's vtable, each field inside its table, each offset and
 * vector length checked against the file before a byte is read, strings
 * NUL-terminated as the verifier wants, bytes copied out of a small page
 * cache (no pointer into the file is kept, alignment is never assumed, and
 * the storages between the tables are not read), every count against
 * max_entries, nothing recursive but the one level of a quantized tensor's
 * parameters.
 */
#include "formats.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum {
    IV_NONE,
    IV_INT,
    IV_BOOL,
    IV_DOUBLE,
    IV_COMPLEX,
    IV_TENSOR,
    IV_STRING,
    IV_LIST,
    IV_TUPLE,
    IV_DICT,
    IV_OBJECT,
    IV_INTLIST,
    IV_DOUBLELIST,
    IV_BOOLLIST,
    IV_DEVICE,
    IV_ENUM,
    IV_FUNCTION,
    IV_COUNT
};
static const char *const iv_names[IV_COUNT] = {
    "None",       "Int",      "Bool",   "Double",    "ComplexDouble", "TensorMetadata",
    "String",     "List",     "Tuple",  "Dict",      "Object",        "IntList",
    "DoubleList", "BoolList", "Device", "EnumValue", "Function"};

/* ObjectType.type */
enum { OT_FIELDS = 1, OT_CUSTOM = 2, OT_SETSTATE = 3 };

/* What a flatbuffer table is, once its vtable was checked. */
typedef struct fb_table {
    uint64_t pos, vt; /* the table, its vtable */
    uint32_t nfields; /* fields the vtable lists */
    uint32_t size;    /* bytes of the table itself */
} fb_table;

typedef struct fb_vec {
    uint64_t data; /* the first element */
    uint32_t n;
} fb_vec;

/* One object type, resolved on first use. */
typedef struct fb_type {
    ckpt_value *g;      /* the class, a GLOBAL */
    ckpt_value **names; /* attr_names, STR values */
    uint32_t nnames;
    uint8_t kind;
    bool loaded;
} fb_type;

/* Reads go through a few cached pages: the tables, vectors and strings of
 * a module lie between storages of any size, and a listing must not read
 * the storages (a 64 KiB window read 73 MB of a 105 MB file to list it). */
#define PAGE 4096u
#define NPAGES 16u

typedef struct mob {
    ckpt_file *f;
    ckpt_error *err;
    uint8_t *cache;               /* NPAGES pages (NULL: the file is in memory) */
    uint64_t page_of[NPAGES];     /* page number + 1 held, 0 none */
    uint64_t used[NPAGES], clock; /* least recently used goes first */
    uint64_t size;
    fb_vec ivals, types, stor;
    uint32_t nparse; /* ivalues parsed: mobile_ivalue_size */
    ckpt_value **vals;
    uint32_t *smap; /* storage index -> f->storages index + 1, 0 none yet */
    fb_type *tcache;
    ckpt_value *none;
    uint32_t nfunctions, nsetstate, ncustom;
    uint64_t charged; /* bytes of the arrays above, charged to the arena */
    fb_vec sources;   /* jit_sources */
    ck_map source_of; /* their names -> index (made on first use) */
    bool indexed;
} mob;

static int oom(mob *m)
{
    return ck_fail(m->err, CKPT_E_NOMEM, -1, "out of memory");
}

#define FAIL(off, ...) ck_fail(m->err, CKPT_E_FORMAT, (int64_t)(off), "flatbuffer: " __VA_ARGS__)

/* ---- reading the buffer ------------------------------------------------- */

/* The cached page pno, read when missing; NULL with err. */
static const uint8_t *page(mob *m, uint64_t pno, const char *what)
{
    unsigned v = 0;
    for (unsigned i = 0; i < NPAGES; i++) {
        if (m->page_of[i] == pno + 1) {
            m->used[i] = ++m->clock;
            return m->cache + (size_t)i * PAGE;
        }
        if (m->used[i] < m->used[v]) v = i;
    }
    uint64_t off = pno * PAGE, len = m->size - off < PAGE ? m->size - off : PAGE;
    m->page_of[v] = 0;
    if (ck_read(&m->f->src, off, m->cache + (size_t)v * PAGE, (size_t)len, what, m->err))
        return NULL;
    m->page_of[v] = pno + 1;
    m->used[v] = ++m->clock;
    return m->cache + (size_t)v * PAGE;
}

/* Bytes [off, off + n) of the file into out. */
static int rd(mob *m, uint64_t off, void *out, size_t n, const char *what)
{
    if (off > m->size || n > m->size - off || !m->cache || n > PAGE)
        return ck_read(&m->f->src, off, out, n, what, m->err); /* or its range error */
    uint8_t *o = out;
    while (n) {
        size_t in = (size_t)(off % PAGE), k = PAGE - in < n ? PAGE - in : n;
        const uint8_t *p = page(m, off / PAGE, what);
        if (!p) return -1;
        memcpy(o, p + in, k);
        o += k;
        off += k;
        n -= k;
    }
    return 0;
}

static int rd_u32(mob *m, uint64_t off, uint32_t *v, const char *what)
{
    uint8_t b[4];
    CK_TRY(rd(m, off, b, 4, what));
    *v = ck_le32(b);
    return 0;
}

/* The table at pos, its vtable checked against the file. */
static int table_at(mob *m, uint64_t pos, const char *what, fb_table *t)
{
    uint32_t so;
    CK_TRY(rd_u32(m, pos, &so, what));
    int64_t vt = (int64_t)pos - (int64_t)(int32_t)so;
    if (vt < 0 || (uint64_t)vt > m->size - 4)
        return FAIL(pos, "%s: a table has its vtable at %lld, outside the file", what,
                    (long long)vt);
    uint8_t h[4];
    CK_TRY(rd(m, (uint64_t)vt, h, 4, what));
    uint32_t vsize = ck_le16(h), tsize = ck_le16(h + 2);
    if (vsize < 4 || (vsize & 1) || (uint64_t)vt + vsize > m->size)
        return FAIL(vt, "%s: a vtable of %u bytes is malformed", what, vsize);
    if (tsize < 4 || tsize > m->size - pos)
        return FAIL(pos, "%s: a table of %u bytes runs past the end of the file", what, tsize);
    t->pos = pos;
    t->vt = (uint64_t)vt;
    t->nfields = (vsize - 4) / 2;
    t->size = tsize;
    return 0;
}

/* Where field i (of n bytes) is, or 0 when absent. */
static int field(mob *m, const fb_table *t, uint32_t i, uint32_t n, const char *what, uint64_t *pos)
{
    *pos = 0;
    if (i >= t->nfields) return 0;
    uint8_t b[2];
    CK_TRY(rd(m, t->vt + 4 + 2 * (uint64_t)i, b, 2, what));
    uint32_t vo = ck_le16(b);
    if (vo == 0) return 0;
    if (vo < 4 || vo + n > t->size)
        return FAIL(t->pos, "%s: field %u lies outside its table", what, i);
    *pos = t->pos + vo;
    return 0;
}

/* Scalar fields: the value, or 0 when absent (the schema's default for
 * every field read here). */
static int f_u8(mob *m, const fb_table *t, uint32_t i, const char *what, uint8_t *v)
{
    uint64_t p;
    *v = 0;
    CK_TRY(field(m, t, i, 1, what, &p));
    return p ? rd(m, p, v, 1, what) : 0;
}

static int f_u32(mob *m, const fb_table *t, uint32_t i, const char *what, uint32_t *v)
{
    uint64_t p;
    *v = 0;
    CK_TRY(field(m, t, i, 4, what, &p));
    return p ? rd_u32(m, p, v, what) : 0;
}

static int f_f64(mob *m, const fb_table *t, uint32_t i, const char *what, double *v)
{
    uint64_t p;
    uint8_t b[8];
    *v = 0;
    CK_TRY(field(m, t, i, 8, what, &p));
    if (!p) return 0;
    CK_TRY(rd(m, p, b, 8, what));
    uint64_t x = ck_le64(b);
    memcpy(v, &x, 8);
    return 0;
}

/* Where the offset stored at p points, checked to be inside the file. */
static int follow(mob *m, uint64_t p, const char *what, uint64_t *to)
{
    uint32_t u;
    CK_TRY(rd_u32(m, p, &u, what));
    if (u >= m->size - p) /* p + 4 <= size: the offset was read */
        return FAIL(p, "%s: an offset points past the end of the file", what);
    *to = p + u;
    return 0;
}

/* An offset field: where it points, or 0 when absent. */
static int f_ref(mob *m, const fb_table *t, uint32_t i, const char *what, uint64_t *to)
{
    uint64_t p;
    *to = 0;
    CK_TRY(field(m, t, i, 4, what, &p));
    return p ? follow(m, p, what, to) : 0;
}

/* The vector at pos, of elements of esize bytes, checked to fit. */
static int vec_at(mob *m, uint64_t pos, uint32_t esize, const char *what, fb_vec *v)
{
    uint32_t n;
    CK_TRY(rd_u32(m, pos, &n, what));
    uint64_t data = pos + 4;
    if ((uint64_t)n * esize > m->size - data)
        return FAIL(pos, "%s: a vector of %u elements runs past the end of the file", what, n);
    v->data = data;
    v->n = n;
    return 0;
}

/* A vector field; *present false (and n 0) when absent. */
static int f_vec(mob *m, const fb_table *t, uint32_t i, uint32_t esize, const char *what, fb_vec *v,
                 bool *present)
{
    uint64_t to;
    v->n = 0;
    v->data = 0;
    CK_TRY(f_ref(m, t, i, what, &to));
    if (present) *present = to != 0;
    return to ? vec_at(m, to, esize, what, v) : 0;
}

static int vec_u32(mob *m, const fb_vec *v, uint32_t k, const char *what, uint32_t *x)
{
    return rd_u32(m, v->data + 4 * (uint64_t)k, x, what);
}

/* Element k of a vector of tables. */
static int vec_table(mob *m, const fb_vec *v, uint32_t k, const char *what, fb_table *t)
{
    uint64_t to;
    CK_TRY(follow(m, v->data + 4 * (uint64_t)k, what, &to));
    return table_at(m, to, what, t);
}

/* The string at pos: its bytes and the NUL after them (which flatbuffers'
 * verifier, and so torch 2.x, require). */
static int str_vec(mob *m, uint64_t pos, const char *what, fb_vec *v)
{
    uint8_t nul;
    CK_TRY(vec_at(m, pos, 1, what, v));
    if (v->n == m->size - v->data)
        return FAIL(pos, "%s: a string runs to the end of the file", what);
    CK_TRY(rd(m, v->data + v->n, &nul, 1, what));
    if (nul != 0) return FAIL(pos, "%s: a string is not NUL-terminated", what);
    return 0;
}

/* The string at pos as a value of `kind` (STR or BYTES). */
static int str_at(mob *m, uint64_t pos, ckpt_kind kind, const char *what, ckpt_value **out)
{
    fb_vec v;
    CK_TRY(str_vec(m, pos, what, &v));
    if (v.n > m->f->opt.max_pickle_bytes)
        return ck_fail(m->err, CKPT_E_LIMIT, (int64_t)pos,
                       "flatbuffer: %s: a string of %u bytes (limit %llu; max_pickle_bytes)", what,
                       v.n, (unsigned long long)m->f->opt.max_pickle_bytes);
    char small[256], *buf = small;
    if (v.n > sizeof small) {
        if (ck_mem_charge(&m->f->arena, v.n)) return oom(m);
        if (!(buf = malloc(v.n))) {
            ck_mem_release(&m->f->arena, v.n);
            return oom(m);
        }
    }
    int r = rd(m, v.data, buf, v.n, what);
    if (r == 0 && !(*out = ck_new_str(&m->f->pk, kind, buf, v.n))) r = oom(m);
    if (buf != small) {
        free(buf);
        ck_mem_release(&m->f->arena, v.n);
    }
    return r;
}

/* A string field (absent: an error naming it). */
static int f_str(mob *m, const fb_table *t, uint32_t i, ckpt_kind kind, const char *what,
                 ckpt_value **out)
{
    uint64_t to;
    CK_TRY(f_ref(m, t, i, what, &to));
    if (!to) return FAIL(t->pos, "%s: no string", what);
    return str_at(m, to, kind, what, out);
}

/* ---- values --------------------------------------------------------------- */

/* ivalue idx as referenced from ivalue `from`: one not parsed yet (or a
 * function) is None, as in torch's loader; one past the table an error. */
static int ref_value(mob *m, uint32_t idx, uint32_t from, uint64_t pos, ckpt_value **out)
{
    if (idx >= m->ivals.n)
        return FAIL(pos, "ivalue %u refers to ivalue %u, past the %u ivalues", from, idx,
                    m->ivals.n);
    *out = idx < from && m->vals[idx] ? m->vals[idx] : m->none;
    return 0;
}

/* A LIST/TUPLE/SET/DICT of exactly n items, to be filled by the caller. */
static ckpt_value *new_seq(mob *m, ckpt_kind kind, size_t n)
{
    ckpt_value *v = ck_new(&m->f->pk, kind);
    if (!v || (n && ck_seq_room(&m->f->pk, v, n, true))) return NULL;
    return v;
}

/* A GLOBAL module.name from "module.name" (the last dot splits). */
static ckpt_value *new_global(mob *m, const char *full, size_t n)
{
    ckpt_value *g = ck_new(&m->f->pk, CKPT_V_GLOBAL);
    if (!g || !(g->u.g = ck_alloc(&m->f->arena, sizeof *g->u.g))) return NULL;
    size_t dot = n;
    while (dot > 0 && full[dot - 1] != '.') dot--;
    g->u.g->module = ck_strndup(&m->f->arena, full, dot ? dot - 1 : 0);
    g->u.g->name = ck_strndup(&m->f->arena, full + dot, n - dot);
    g->cls = ck_strndup(&m->f->arena, full, n);
    g->u.g->gref = SIZE_MAX; /* named by no pickle: not a global of ckpt_global_at() */
    if (!g->u.g->module || !g->u.g->name || !g->cls) return NULL;
    return g;
}

/* An inert call module.name(*args), as a pickle's REDUCE of an unknown
 * callable leaves it (torch.device('cpu'), complex(re, im), an enum). */
static ckpt_value *inert_call(mob *m, ckpt_value *g, ckpt_value *a0, ckpt_value *a1)
{
    ckpt_value *o = ck_new(&m->f->pk, CKPT_V_OBJECT), *args = new_seq(m, CKPT_V_TUPLE, a1 ? 2 : 1);
    if (!g || !o || !args || !(o->u.obj = ck_alloc(&m->f->arena, sizeof *o->u.obj))) return NULL;
    args->u.seq.v[args->u.seq.n++] = a0;
    if (a1) args->u.seq.v[args->u.seq.n++] = a1;
    o->u.obj->callable = g;
    o->u.obj->args = args;
    o->cls = g->cls;
    return o;
}

static ckpt_value *literal_global(mob *m, const char *full)
{
    return new_global(m, full, strlen(full));
}

/* A list of ivalue references (List, Tuple, a Dict's keys and values). */
static int refs(mob *m, const fb_vec *v, uint32_t from, ckpt_value *seq, const char *what)
{
    for (uint32_t k = 0; k < v->n; k++) {
        uint32_t idx;
        CK_TRY(vec_u32(m, v, k, what, &idx));
        CK_TRY(ref_value(m, idx, from, v->data + 4 * (uint64_t)k, &seq->u.seq.v[seq->u.seq.n++]));
    }
    return 0;
}

/* c10::ScalarType -> dtype: every number here checked against a buffer of
 * that dtype that torch 1.13 or 2.6 wrote; -1 for one ckpt has no dtype for
 * (2.6's uint1..7 and int1..7, 30..43) or does not know. */
static int scalar_type(uint8_t st, ckpt_dtype *d)
{
    static const int8_t map[] = {[0] = CKPT_UINT8,
                                 [1] = CKPT_INT8,
                                 [2] = CKPT_INT16,
                                 [3] = CKPT_INT32,
                                 [4] = CKPT_INT64,
                                 [5] = CKPT_FLOAT16,
                                 [6] = CKPT_FLOAT32,
                                 [7] = CKPT_FLOAT64,
                                 [8] = CKPT_COMPLEX32,
                                 [9] = CKPT_COMPLEX64,
                                 [10] = CKPT_COMPLEX128,
                                 [11] = CKPT_BOOL,
                                 [12] = CKPT_QINT8,
                                 [13] = CKPT_QUINT8,
                                 [14] = CKPT_QINT32,
                                 [15] = CKPT_BFLOAT16,
                                 [16] = CKPT_QUINT4X2,
                                 [17] = CKPT_QUINT2X4,
                                 [18] = CKPT_BITS1X8,
                                 [19] = CKPT_BITS2X4,
                                 [20] = CKPT_BITS4X2,
                                 [21] = CKPT_BITS8,
                                 [22] = CKPT_BITS16,
                                 [23] = CKPT_FLOAT8_E5M2,
                                 [24] = CKPT_FLOAT8_E4M3FN,
                                 [25] = CKPT_FLOAT8_E5M2FNUZ,
                                 [26] = CKPT_FLOAT8_E4M3FNUZ,
                                 [27] = CKPT_UINT16,
                                 [28] = CKPT_UINT32,
                                 [29] = CKPT_UINT64};
    if (st >= sizeof map) return -1;
    *d = (ckpt_dtype)map[st];
    return 0;
}

static bool is_quantized(ckpt_dtype d)
{
    return d == CKPT_QINT8 || d == CKPT_QUINT8 || d == CKPT_QINT32 || d == CKPT_QUINT4X2 ||
           d == CKPT_QUINT2X4;
}

/* The ckpt storage of flatbuffer storage k (made on first use). */
static int storage(mob *m, uint32_t k, ckpt_dtype dt, uint64_t pos, size_t *si)
{
    if (k >= m->stor.n)
        return FAIL(pos, "a tensor uses storage %u, past the %u storages", k, m->stor.n);
    if (m->smap[k]) {
        *si = m->smap[k] - 1;
        return 0;
    }
    fb_table t;
    fb_vec data;
    bool present;
    CK_TRY(vec_table(m, &m->stor, k, "storage_data", &t));
    CK_TRY(f_vec(m, &t, 0, 1, "storage data", &data, &present));
    if (!present) return FAIL(t.pos, "storage %u has no data", k);
    char key[16];
    int kl = snprintf(key, sizeof key, "%u", k);
    CK_TRY(ck_storage_new(m->f, key, (size_t)kl, si, m->err));
    ck_storage *s = &m->f->storages[*si];
    s->pub.dtype = dt; /* its first view's */
    s->pub.nbytes = data.n;
    s->pub.file_offset = (int64_t)data.data;
    s->resolved = true;
    s->untyped = true;
    m->smap[k] = (uint32_t)*si + 1;
    return 0;
}

/* A [i32] field of a tensor: sizes or strides, non-negative. */
static int dims(mob *m, const fb_table *t, uint32_t i, const char *what, fb_vec *v)
{
    bool present;
    CK_TRY(f_vec(m, t, i, 4, what, v, &present));
    if (!present) return FAIL(t->pos, "a tensor has no %s", what);
    if (v->n > m->f->opt.max_rank || v->n > 64)
        return ck_fail(m->err, CKPT_E_LIMIT, (int64_t)t->pos,
                       "flatbuffer: a tensor has %u dimensions (limit %u%s)", v->n,
                       m->f->opt.max_rank < 64 ? m->f->opt.max_rank : 64,
                       v->n <= 64 ? "; max_rank" : "");
    return 0;
}

static int read_dims(mob *m, const fb_vec *v, const char *what, uint64_t pos, int64_t **out)
{
    *out = NULL;
    if (!v->n) return 0;
    if (!(*out = ck_alloc(&m->f->arena, v->n * sizeof **out))) return oom(m);
    for (uint32_t k = 0; k < v->n; k++) {
        uint32_t x;
        CK_TRY(vec_u32(m, v, k, what, &x));
        if ((int32_t)x < 0) return FAIL(pos, "a tensor has a negative %s entry", what);
        (*out)[k] = (int32_t)x;
    }
    return 0;
}

static int tensor_at(mob *m, uint64_t pos, bool param, ck_tdef **out);

/* The QuantizedSchema of tensor t (at table q). */
static int quantization(mob *m, const fb_table *q, ck_tdef *t)
{
    uint8_t qs;
    uint32_t zp, axis;
    ck_tkind *k = ck_tdef_kind(m->f, t);
    if (!k) return oom(m);
    CK_TRY(f_u8(m, q, 0, "quantized_schema", &qs));
    if (t->dtype == CKPT_QUINT4X2) k->sub_byte = 2;
    if (t->dtype == CKPT_QUINT2X4) k->sub_byte = 4;
    if (qs == 0) { /* c10::kPerTensorAffine */
        k->qscheme = CKPT_PER_TENSOR_AFFINE;
        CK_TRY(f_f64(m, q, 1, "quantized scale", &k->scale));
        CK_TRY(f_u32(m, q, 2, "quantized zero_point", &zp));
        k->zero_point = (int32_t)zp;
        return 0;
    }
    if (qs != 1 && qs != 4) /* kPerChannelAffine, kPerChannelAffineFloatQParams */
        return ck_fail(m->err, CKPT_E_UNSUPPORTED, (int64_t)q->pos,
                       "flatbuffer: a quantized tensor has quantization scheme %u, which "
                       "torch's flatbuffer loader refuses",
                       qs);
    k->qscheme = qs == 1 ? CKPT_PER_CHANNEL_AFFINE : CKPT_PER_CHANNEL_AFFINE_FLOAT_QPARAMS;
    CK_TRY(f_u32(m, q, 5, "quantized axis", &axis));
    if (axis >= t->ndim)
        return FAIL(q->pos, "a quantized tensor has axis %u of %u dimensions", axis, t->ndim);
    k->axis = axis;
    uint64_t sp, zpos;
    CK_TRY(f_ref(m, q, 3, "quantized scales", &sp));
    CK_TRY(f_ref(m, q, 4, "quantized zero_points", &zpos));
    if (!sp || !zpos)
        return FAIL(q->pos, "a per-channel quantized tensor has no %s",
                    sp ? "zero_points" : "scales");
    /* the parameters: plain tensors (a quantized one is refused below) */
    CK_TRY(tensor_at(m, sp, true, &k->qscales));
    CK_TRY(tensor_at(m, zpos, true, &k->qzeros));
    return 0;
}

/* The tensor of the TensorMetadata table at pos; `param`: a quantized
 * tensor's scales or zero points, which must not be quantized themselves. */
static int tensor_at(mob *m, uint64_t pos, bool param, ck_tdef **out)
{
    fb_table t;
    uint32_t sidx, soff;
    uint8_t st, rg;
    fb_vec sv, tv;
    ckpt_dtype dt;
    CK_TRY(table_at(m, pos, "tensor", &t));
    CK_TRY(f_u32(m, &t, 0, "tensor storage", &sidx));
    CK_TRY(f_u8(m, &t, 1, "tensor scalar type", &st));
    CK_TRY(f_u32(m, &t, 2, "tensor storage_offset", &soff));
    CK_TRY(f_u8(m, &t, 5, "tensor requires_grad", &rg));
    if (scalar_type(st, &dt))
        return ck_fail(m->err, CKPT_E_UNSUPPORTED, (int64_t)pos,
                       "flatbuffer: a tensor has scalar type %u, which ckpt does not read", st);
    if ((int32_t)soff < 0) return FAIL(pos, "a tensor has a negative storage_offset");
    CK_TRY(dims(m, &t, 3, "sizes", &sv));
    CK_TRY(dims(m, &t, 4, "strides", &tv));
    if (sv.n != tv.n) return FAIL(pos, "a tensor has %u sizes but %u strides", sv.n, tv.n);
    int64_t *shape, *stride;
    CK_TRY(read_dims(m, &sv, "size", pos, &shape));
    CK_TRY(read_dims(m, &tv, "stride", pos, &stride));
    uint64_t qpos;
    CK_TRY(f_ref(m, &t, 6, "quantized_schema", &qpos));
    if (param && (qpos || is_quantized(dt)))
        return FAIL(pos, "a tensor's quantization parameters are quantized themselves");
    if (!qpos != !is_quantized(dt))
        return FAIL(pos, "a tensor is %s but %s quantization parameters", ck_dtype_name(dt),
                    qpos ? "has" : "has no");
    size_t si;
    CK_TRY(storage(m, sidx, dt, pos, &si));
    CK_TRY(
        ck_tensor_new(m->f, si, dt, sv.n, shape, stride, (int32_t)soff, (int64_t)pos, out, m->err));
    (*out)->requires_grad = rg != 0;
    if (qpos) {
        fb_table q;
        CK_TRY(table_at(m, qpos, "quantized_schema", &q));
        CK_TRY(quantization(m, &q, *out));
    }
    return 0;
}

/* Object type i, resolved once. */
static int object_type(mob *m, uint32_t i, uint64_t pos, fb_type **out)
{
    if (i >= m->types.n)
        return FAIL(pos, "an object has type %u, past the %u object types", i, m->types.n);
    fb_type *ty = &m->tcache[i];
    *out = ty;
    if (ty->loaded) return 0;
    fb_table t;
    ckpt_value *name;
    fb_vec an;
    CK_TRY(vec_table(m, &m->types, i, "object type", &t));
    CK_TRY(f_str(m, &t, 0, CKPT_V_STR, "object type name", &name));
    if (memchr(name->u.s.p, 0, name->u.s.n))
        return FAIL(t.pos, "object type %u has a name holding a NUL byte", i);
    CK_TRY(f_u8(m, &t, 1, "object type kind", &ty->kind));
    CK_TRY(f_vec(m, &t, 2, 4, "attribute names", &an, NULL));
    if (!(ty->g = new_global(m, name->u.s.p, name->u.s.n))) return oom(m);
    if (an.n) {
        uint64_t bytes;
        if (ck_mul_ovf(an.n, sizeof *ty->names, &bytes) || bytes > SIZE_MAX ||
            !(ty->names = ck_alloc(&m->f->arena, (size_t)bytes)))
            return oom(m);
    }
    for (uint32_t k = 0; k < an.n; k++) {
        uint64_t to;
        CK_TRY(follow(m, an.data + 4 * (uint64_t)k, "attribute name", &to));
        CK_TRY(str_at(m, to, CKPT_V_STR, "attribute name", &ty->names[k]));
    }
    ty->nnames = an.n;
    ty->loaded = true;
    return 0;
}

/* An Object ivalue: a class instance, as a pickle's NEWOBJ + BUILD of it
 * leaves it (callable: its class, state: a dict of its attributes; or, for
 * a class with __setstate__, the state torch hands to it). */
static int object(mob *m, uint64_t pos, uint32_t i, ckpt_value **out)
{
    fb_table t;
    uint32_t ti, sti;
    fb_type *ty = NULL;
    CK_TRY(table_at(m, pos, "object", &t));
    CK_TRY(f_u32(m, &t, 0, "object type", &ti));
    CK_TRY(object_type(m, ti, pos, &ty));
    ckpt_value *o = ck_new(&m->f->pk, CKPT_V_OBJECT), *st = NULL;
    if (!o || !(o->u.obj = ck_alloc(&m->f->arena, sizeof *o->u.obj))) return oom(m);
    o->u.obj->callable = ty->g;
    o->cls = ty->g->cls;
    if (ty->kind == OT_FIELDS) {
        fb_vec at;
        bool present;
        CK_TRY(f_vec(m, &t, 2, 4, "object attributes", &at, &present));
        if (!present) return FAIL(pos, "an object of %s has no attributes", ty->g->cls);
        if (at.n > ty->nnames)
            return FAIL(pos, "an object of %s has %u attributes, its type names %u", ty->g->cls,
                        at.n, ty->nnames);
        if (!(st = new_seq(m, CKPT_V_DICT, 2 * (size_t)at.n))) return oom(m);
        for (uint32_t k = 0; k < at.n; k++) {
            uint32_t idx;
            CK_TRY(vec_u32(m, &at, k, "object attributes", &idx));
            st->u.seq.v[st->u.seq.n++] = ty->names[k];
            CK_TRY(ref_value(m, idx, i, at.data + 4 * (uint64_t)k, &st->u.seq.v[st->u.seq.n++]));
        }
    } else if (ty->kind == OT_SETSTATE || ty->kind == OT_CUSTOM) {
        CK_TRY(f_u32(m, &t, 1, "object state", &sti));
        CK_TRY(ref_value(m, sti, i, pos, &st));
        if (ty->kind == OT_SETSTATE)
            m->nsetstate++;
        else
            m->ncustom++;
    } else {
        return FAIL(pos, "an object of %s is of type kind %u, which torch does not load",
                    ty->g->cls, ty->kind);
    }
    o->u.obj->state = st;
    *out = o;
    return 0;
}

/* A vector of scalars as a LIST of INT, FLOAT or BOOL. */
static int scalar_list(mob *m, const fb_table *t, int type, ckpt_value **out)
{
    static const uint32_t esize[] = {[IV_INTLIST] = 8, [IV_DOUBLELIST] = 8, [IV_BOOLLIST] = 1};
    fb_vec v;
    CK_TRY(f_vec(m, t, 0, esize[type], iv_names[type], &v, NULL));
    ckpt_value *l = new_seq(m, CKPT_V_LIST, v.n);
    if (!l) return oom(m);
    for (uint32_t k = 0; k < v.n; k++) {
        uint8_t b[8];
        CK_TRY(rd(m, v.data + (uint64_t)k * esize[type], b, esize[type], iv_names[type]));
        ckpt_value *x = ck_new(&m->f->pk, type == IV_INTLIST      ? CKPT_V_INT
                                          : type == IV_DOUBLELIST ? CKPT_V_FLOAT
                                                                  : CKPT_V_BOOL);
        if (!x) return oom(m);
        if (type == IV_BOOLLIST) {
            x->u.b = b[0] != 0;
        } else {
            uint64_t u = ck_le64(b);
            if (type == IV_INTLIST)
                x->u.i = (int64_t)u;
            else
                memcpy(&x->u.f, &u, 8);
        }
        l->u.seq.v[l->u.seq.n++] = x;
    }
    *out = l;
    return 0;
}

/* ivalue i, of type `type`, whose value is the table or struct at p. */
static int ivalue(mob *m, uint32_t i, int type, uint64_t p, ckpt_value **out)
{
    uint8_t b[16];
    fb_table t;
    fb_vec v, w;
    bool present;
    ckpt_value *x, *y = NULL;
    switch (type) {
    case IV_INT:
    case IV_DOUBLE:
        CK_TRY(rd(m, p, b, 8, iv_names[type]));
        if (!(x = ck_new(&m->f->pk, type == IV_INT ? CKPT_V_INT : CKPT_V_FLOAT))) return oom(m);
        if (type == IV_INT)
            x->u.i = (int64_t)ck_le64(b);
        else {
            uint64_t u = ck_le64(b);
            memcpy(&x->u.f, &u, 8);
        }
        *out = x;
        return 0;
    case IV_BOOL:
        CK_TRY(rd(m, p, b, 1, "Bool"));
        if (!(x = ck_new(&m->f->pk, CKPT_V_BOOL))) return oom(m);
        x->u.b = b[0] != 0;
        *out = x;
        return 0;
    case IV_COMPLEX: {
        CK_TRY(rd(m, p, b, 16, "ComplexDouble"));
        uint64_t re = ck_le64(b), im = ck_le64(b + 8);
        if (!(x = ck_new(&m->f->pk, CKPT_V_FLOAT)) || !(y = ck_new(&m->f->pk, CKPT_V_FLOAT)))
            return oom(m);
        memcpy(&x->u.f, &re, 8);
        memcpy(&y->u.f, &im, 8);
        if (!(*out = inert_call(m, literal_global(m, "builtins.complex"), x, y))) return oom(m);
        return 0;
    }
    case IV_TENSOR: {
        ck_tdef *td;
        CK_TRY(tensor_at(m, p, false, &td));
        if (!(*out = ck_tensor_value(m->f, td))) return oom(m);
        return 0;
    }
    case IV_OBJECT: return object(m, p, i, out);
    case IV_FUNCTION:
        m->nfunctions++;
        *out = NULL; /* torch keeps the method, the ivalue stays None */
        return 0;
    default: break;
    }
    CK_TRY(table_at(m, p, iv_names[type], &t));
    switch (type) {
    case IV_STRING:
    case IV_DEVICE:
        CK_TRY(f_str(m, &t, 0, CKPT_V_STR, iv_names[type], &x));
        if (type == IV_STRING)
            *out = x;
        else if (!(*out = inert_call(m, literal_global(m, "torch.device"), x, NULL)))
            return oom(m);
        return 0;
    case IV_LIST:
    case IV_TUPLE:
        CK_TRY(f_vec(m, &t, 0, 4, iv_names[type], &v, &present));
        if (!present) return FAIL(p, "ivalue %u is a %s without items", i, iv_names[type]);
        if (!(x = new_seq(m, type == IV_LIST ? CKPT_V_LIST : CKPT_V_TUPLE, v.n))) return oom(m);
        CK_TRY(refs(m, &v, i, x, iv_names[type]));
        *out = x;
        return 0;
    case IV_DICT: {
        bool p2;
        CK_TRY(f_vec(m, &t, 0, 4, "Dict keys", &v, &present));
        CK_TRY(f_vec(m, &t, 1, 4, "Dict values", &w, &p2));
        if (!present || !p2 || v.n != w.n)
            return FAIL(p, "ivalue %u is a Dict of %u keys and %u values", i, v.n, w.n);
        if (!(x = new_seq(m, CKPT_V_DICT, 2 * (size_t)v.n))) return oom(m);
        for (uint32_t k = 0; k < v.n; k++) {
            uint32_t ki, vi;
            CK_TRY(vec_u32(m, &v, k, "Dict keys", &ki));
            CK_TRY(vec_u32(m, &w, k, "Dict values", &vi));
            CK_TRY(ref_value(m, ki, i, v.data + 4 * (uint64_t)k, &x->u.seq.v[x->u.seq.n++]));
            CK_TRY(ref_value(m, vi, i, w.data + 4 * (uint64_t)k, &x->u.seq.v[x->u.seq.n++]));
        }
        *out = x;
        return 0;
    }
    case IV_INTLIST:
    case IV_DOUBLELIST:
    case IV_BOOLLIST: return scalar_list(m, &t, type, out);
    case IV_ENUM: {
        uint32_t vi;
        CK_TRY(f_str(m, &t, 0, CKPT_V_STR, "EnumValue type", &x));
        CK_TRY(f_u32(m, &t, 1, "EnumValue value", &vi));
        CK_TRY(ref_value(m, vi, i, p, &y));
        if (!(*out = inert_call(m, new_global(m, x->u.s.p, x->u.s.n), y, NULL))) return oom(m);
        return 0;
    }
    }
    return FAIL(p, "ivalue %u has unknown type %d", i, type);
}

/* Every ivalue torch parses, in order. */
static int ivalues(mob *m)
{
    for (uint32_t i = 0; i < m->nparse; i++) {
        fb_table t;
        uint8_t type;
        uint64_t p;
        CK_TRY(vec_table(m, &m->ivals, i, "ivalue", &t));
        CK_TRY(f_u8(m, &t, 0, "ivalue type", &type));
        CK_TRY(f_ref(m, &t, 1, "ivalue", &p));
        if (type >= IV_COUNT) return FAIL(t.pos, "ivalue %u has unknown type %u", i, type);
        if (type == IV_NONE) {
            m->vals[i] = m->none;
            continue;
        }
        if (!p) return FAIL(t.pos, "ivalue %u, a %s, has no value", i, iv_names[type]);
        CK_TRY(ivalue(m, i, type, p, &m->vals[i]));
    }
    return 0;
}

/* ---- the module ------------------------------------------------------------ */

/* Index the names of jit_sources (the first of a name stands). */
static int index_sources(mob *m)
{
    m->indexed = true;
    for (uint32_t k = 0; k < m->sources.n; k++) {
        fb_table t;
        uint64_t np;
        fb_vec name;
        size_t old;
        CK_TRY(vec_table(m, &m->sources, k, "jit_sources", &t));
        CK_TRY(f_ref(m, &t, 0, "jit_sources name", &np));
        if (!np) continue;
        CK_TRY(str_vec(m, np, "jit_sources name", &name));
        char *key = ck_alloc(&m->f->arena, (size_t)name.n + 1); /* zeroed: NUL-ended */
        if (!key) return oom(m);
        CK_TRY(rd(m, name.data, key, name.n, "jit_sources name"));
        if (ck_map_add(&m->source_of, key, name.n, k, &old) < 0) return oom(m);
    }
    return 0;
}

/* The TorchScript source of a module, for script.c: jit_sources' entry
 * named `module`; 1 when there is none. */
static int source_code(ckpt_file *f, void *ud, const char *module, size_t n, char **text,
                       size_t *len, ckpt_error *err)
{
    mob *m = ud;
    size_t k;
    fb_table t;
    uint64_t cp;
    fb_vec content;
    if (!m->indexed) CK_TRY(index_sources(m));
    if (!ck_map_get(&m->source_of, module, n, &k)) return 1;
    CK_TRY(vec_table(m, &m->sources, (uint32_t)k, "jit_sources", &t));
    CK_TRY(f_ref(m, &t, 1, "jit_sources content", &cp));
    if (!cp) return 1;
    CK_TRY(str_vec(m, cp, "jit_sources content", &content));
    if (content.n > f->opt.max_pickle_bytes)
        return ck_fail(err, CKPT_E_LIMIT, (int64_t)cp,
                       "flatbuffer: the source of %.100s is %u bytes (limit %llu; "
                       "max_pickle_bytes)",
                       module, content.n, (unsigned long long)f->opt.max_pickle_bytes);
    if (ck_mem_charge(&f->arena, content.n))
        return ck_fail(err, CKPT_E_NOMEM, (int64_t)cp, "out of memory");
    char *buf = malloc(content.n ? content.n : 1);
    if (!buf || ck_read(&f->src, content.data, buf, content.n, "jit_sources content", err)) {
        free(buf);
        ck_mem_release(&f->arena, content.n);
        return buf ? -1 : ck_fail(err, CKPT_E_NOMEM, -1, "out of memory");
    }
    *text = buf;
    *len = content.n;
    return 0;
}

/* extra_files as f->extra: name -> BYTES (None past max_pickle_bytes). */
static int extra_files(mob *m, const fb_table *mod)
{
    fb_vec v;
    bool present;
    CK_TRY(f_vec(m, mod, 1, 4, "extra_files", &v, &present));
    if (!present || !v.n) return 0;
    if (v.n > m->f->opt.max_entries)
        return ck_fail(m->err, CKPT_E_LIMIT, (int64_t)v.data,
                       "flatbuffer: %u extra files (max_entries %u)", v.n, m->f->opt.max_entries);
    ckpt_value *d = new_seq(m, CKPT_V_DICT, 2 * (size_t)v.n);
    if (!d) return oom(m);
    for (uint32_t k = 0; k < v.n; k++) {
        fb_table t;
        ckpt_value *name, *content;
        uint64_t cp;
        fb_vec c;
        CK_TRY(vec_table(m, &v, k, "extra_files", &t));
        CK_TRY(f_str(m, &t, 0, CKPT_V_STR, "extra file name", &name));
        CK_TRY(f_ref(m, &t, 1, "extra file content", &cp));
        if (!cp) {
            content = m->none;
        } else {
            CK_TRY(str_vec(m, cp, "extra file content", &c));
            if (c.n > m->f->opt.max_pickle_bytes) {
                content = m->none;
                if (ck_note(&m->f->pk,
                            "extra file '%.100s' of %u bytes not read (max_pickle_bytes)",
                            name->u.s.p, c.n))
                    return oom(m);
            } else {
                CK_TRY(str_at(m, cp, CKPT_V_BYTES, "extra file content", &content));
            }
        }
        d->u.seq.v[d->u.seq.n++] = name;
        d->u.seq.v[d->u.seq.n++] = content;
    }
    m->f->extra = d;
    return 0;
}

/* jit_constants as f->constants: a TUPLE of the ivalues it names. */
static int constants(mob *m, const fb_table *mod)
{
    fb_vec v;
    bool present;
    CK_TRY(f_vec(m, mod, 9, 4, "jit_constants", &v, &present));
    if (!present) return 0;
    ckpt_value *c = new_seq(m, CKPT_V_TUPLE, v.n);
    if (!c) return oom(m);
    CK_TRY(refs(m, &v, m->nparse, c, "jit_constants"));
    m->f->constants = c;
    return 0;
}

/* An array of n items charged to the arena (freed with the open). */
static void *charged(mob *m, uint64_t n, size_t item)
{
    uint64_t bytes;
    if (ck_mul_ovf(n ? n : 1, item, &bytes) || bytes > SIZE_MAX ||
        ck_mem_charge(&m->f->arena, bytes))
        return NULL;
    void *p = calloc(1, (size_t)bytes);
    if (!p)
        ck_mem_release(&m->f->arena, bytes);
    else
        m->charged += bytes;
    return p;
}

static int mobile_module(mob *m)
{
    ckpt_file *f = m->f;
    uint32_t root, version, state, nmob, nstor;
    fb_table mod;
    bool present;
    CK_TRY(rd_u32(m, 0, &root, "flatbuffer root"));
    if (root < 8 || root > m->size - 4)
        return FAIL(0, "the root table offset %u is outside the file", root);
    CK_TRY(table_at(m, root, "Module", &mod));
    CK_TRY(f_u32(m, &mod, 0, "bytecode_version", &version));
    char vs[16];
    snprintf(vs, sizeof vs, "%u", version);
    if (!(f->version = ck_strndup(&f->arena, vs, strlen(vs)))) return oom(m);
    CK_TRY(f_u32(m, &mod, 3, "state_obj", &state));
    CK_TRY(f_vec(m, &mod, 4, 4, "ivalues", &m->ivals, &present));
    if (!present) return FAIL(mod.pos, "the module has no ivalues");
    CK_TRY(f_vec(m, &mod, 6, 4, "storage_data", &m->stor, NULL));
    CK_TRY(f_u32(m, &mod, 5, "storage_data_size", &nstor));
    /* torch checks a tensor's storage index against storage_data_size, and
     * reads storage_data at it: both must hold it */
    if ((int32_t)nstor >= 0 && nstor < m->stor.n) m->stor.n = nstor;
    if ((int32_t)nstor < 0) m->stor.n = 0;
    CK_TRY(f_vec(m, &mod, 7, 4, "object_types", &m->types, NULL));
    CK_TRY(f_vec(m, &mod, 8, 4, "jit_sources", &m->sources, NULL));
    CK_TRY(f_u32(m, &mod, 11, "mobile_ivalue_size", &nmob));
    uint32_t most = m->ivals.n > m->types.n ? m->ivals.n : m->types.n;
    if (m->stor.n > most) most = m->stor.n;
    if (m->sources.n > most) most = m->sources.n;
    if (most > f->opt.max_entries)
        return ck_fail(m->err, CKPT_E_LIMIT, (int64_t)mod.pos,
                       "flatbuffer: %u ivalues, %u object types, %u storages, %u sources "
                       "(max_entries %u)",
                       m->ivals.n, m->types.n, m->stor.n, m->sources.n, f->opt.max_entries);
    m->nparse = nmob ? nmob : m->ivals.n;
    if (m->nparse > m->ivals.n)
        return FAIL(mod.pos, "mobile_ivalue_size %u exceeds the %u ivalues", m->nparse, m->ivals.n);
    if (state >= m->nparse)
        return FAIL(mod.pos, "state_obj %u is past the %u ivalues parsed", state, m->nparse);
    if (!(m->vals = charged(m, m->ivals.n, sizeof *m->vals)) ||
        !(m->smap = charged(m, m->stor.n, sizeof *m->smap)) ||
        !(m->tcache = charged(m, m->types.n, sizeof *m->tcache)) ||
        !(m->none = ck_new(&f->pk, CKPT_V_NONE)))
        return oom(m);
    CK_TRY(ivalues(m));
    f->root = m->vals[state];
    if (!f->root || f->root->kind != CKPT_V_OBJECT)
        return FAIL(mod.pos, "state_obj (ivalue %u) is %s, not the module's object", state,
                    f->root ? ckpt_kind_name((ckpt_kind)f->root->kind) : "a function");
    CK_TRY(constants(m, &mod));
    CK_TRY(extra_files(m, &mod));
    if (!f->opt.skip_tensors) CK_TRY(ck_script_names(f, source_code, m, m->err));
    /* for scanners: what is in it that a load runs, and is not scanned */
    uint32_t nrun = m->nsetstate + m->ncustom;
    char runs[160] = "";
    if (nrun)
        snprintf(runs, sizeof runs,
                 "; torch.jit.load runs the __setstate__ of %u object%s while loading (%u of "
                 "them C++ custom classes)",
                 nrun, nrun == 1 ? "" : "s", m->ncustom);
    if (f->opt.scan_all_pickles &&
        ck_note(&f->pk,
                "mobile flatbuffer: it holds no pickle and names no Python global; its "
                "TorchScript bytecode (%u function%s) and sources are not scanned%s",
                m->nfunctions, m->nfunctions == 1 ? "" : "s", runs))
        return oom(m);
    return 0;
}

static int mobile_bid(const uint8_t *head, size_t n, uint64_t size)
{
    (void)size;
    return n >= 8 && memcmp(head + 4, "PTMF", 4) == 0;
}

static int mobile_open(ckpt_file *f, ckpt_error *err)
{
    f->format = CKPT_FORMAT_MOBILE;
    f->byteorder = CKPT_LITTLE;
    mob m = {.f = f, .err = err, .size = f->src.size};
    int r = 0;
    if (f->src.size < 8)
        r = ck_fail(err, CKPT_E_FORMAT, 0, "flatbuffer: file of %llu bytes",
                    (unsigned long long)f->src.size);
    else if (!f->src.map && !(m.cache = malloc(NPAGES * PAGE)))
        r = ck_fail(err, CKPT_E_NOMEM, -1, "out of memory");
    if (r == 0) r = mobile_module(&m);
    free(m.cache);
    free(m.vals);
    free(m.smap);
    free(m.tcache);
    ck_map_free(&m.source_of);
    ck_mem_release(&f->arena, m.charged);
    return r;
}

static int mobile_verify(const ckpt_file *f, void (*note)(void *, const char *),
                         void (*progress)(void *, uint64_t, uint64_t), void *ctx, ckpt_error *err)
{
    (void)f, (void)progress, (void)err;
    if (note)
        note(ctx, "mobile flatbuffer: tables, offsets, vectors and tensor extents checked "
                  "against the file; data has no checksums");
    return 0;
}

const ck_format ck_format_mobile = {"mobile",      mobile_bid, mobile_open, NULL,
                                    mobile_verify, NULL,       NULL,        NULL};
