/*
 * rebuild.c - layer 3 (torch): the hooks that teach the pickle machine what
 * torch's pickles mean, in the manner of torch's weights-only unpickler.
 * find_class names the rebuild functions, storage classes, dtypes and the
 * tensor kinds we refuse; reduce interprets the rebuild calls (checked
 * arguments, then the one tensor validator) and torch.Size; it declines
 * everything else, which stays an inert object; the fast path reads the
 * rebuild of a state dict's tensor straight from its bytes.  Also: running
 * a pickle of the file with these hooks (in memory or through a growing
 * window).
 */
#include "torch.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- find_class ------------------------------------------------------------ */

static const struct {
    const char *module, *name;
    uint8_t tag;
    const char *layout; /* for refused rebuilds */
} torch_globals[] = {
    {"torch._utils", "_rebuild_tensor", CK_G_REBUILD_TENSOR, NULL},
    {"torch._utils", "_rebuild_tensor_v2", CK_G_REBUILD_TENSOR_V2, NULL},
    {"torch._utils", "_rebuild_tensor_v3", CK_G_REBUILD_TENSOR_V3, NULL},
    {"torch._utils", "_rebuild_parameter", CK_G_REBUILD_PARAMETER, NULL},
    {"torch._utils", "_rebuild_parameter_with_state", CK_G_REBUILD_PARAMETER_STATE, NULL},
    {"torch._tensor", "_rebuild_from_type_v2", CK_G_REBUILD_FROM_TYPE_V2, NULL},
    {"torch.tensor", "_rebuild_from_type_v2", CK_G_REBUILD_FROM_TYPE_V2, NULL},
    {"torch._utils", "_rebuild_wrapper_subclass", CK_G_REFUSED, "wrapper subclass"},
    {"torch._utils", "_rebuild_device_tensor_from_numpy", CK_G_REFUSED, "numpy-backed device"},
    {"torch._utils", "_rebuild_xla_tensor", CK_G_REFUSED, "xla"},
    {"torch._utils", "_rebuild_mlc_tensor", CK_G_REFUSED, "mlc"},
    {"torch._utils", "_rebuild_tensor_from_dtensor", CK_G_REFUSED, "dtensor"},
    {"torch", "Size", CK_G_TORCH_SIZE, NULL},
    {"torch", "Tensor", CK_G_TENSOR_CLASS, NULL},
    {"torch._tensor", "Tensor", CK_G_TENSOR_CLASS, NULL},
    {"torch.nn.parameter", "Parameter", CK_G_TENSOR_CLASS, NULL},
    {"torch", "UntypedStorage", CK_G_STORAGE_CLASS, NULL},
    {"torch.storage", "UntypedStorage", CK_G_STORAGE_CLASS, NULL},
    {"torch.storage", "_UntypedStorage", CK_G_STORAGE_CLASS, NULL},
};

static bool eq(const char *a, size_t an, const char *b)
{
    return strlen(b) == an && memcmp(a, b, an) == 0;
}

static void find_class(void *ud, ckpt_value *g)
{
    (void)ud;
    const char *m = g->u.g->module, *n = g->u.g->name;
    size_t mn = strlen(m), nn = strlen(n);
    for (size_t i = 0; i < sizeof torch_globals / sizeof torch_globals[0]; i++)
        if (eq(m, mn, torch_globals[i].module) && eq(n, nn, torch_globals[i].name)) {
            g->gid = torch_globals[i].tag;
            if (g->gid == CK_G_STORAGE_CLASS) { /* untyped: bytes */
                g->aux = CKPT_UINT8;
                g->aux2 = 1;
            }
            g->u.g->note = torch_globals[i].layout;
            return;
        }
    if (ck_kind_find_class(g)) return;
    ckpt_dtype d;
    if ((eq(m, mn, "torch") || eq(m, mn, "torch.cuda")) &&
        ck_dtype_by_storage_class(n, nn, &d) == 0) {
        g->gid = CK_G_STORAGE_CLASS;
        g->aux = (uint8_t)d;
        return;
    }
    if (eq(m, mn, "torch") && ck_dtype_by_torch_name(n, nn, &d) == 0) {
        g->gid = CK_G_DTYPE;
        g->aux = (uint8_t)d;
    }
}

/* ---- reduce ---------------------------------------------------------------- */

#define PFAIL(...) ck_machine_fail(m, CKPT_E_PICKLE, __VA_ARGS__)

static bool is_seq(const ckpt_value *v)
{
    return v && (v->kind == CKPT_V_TUPLE || v->kind == CKPT_V_LIST);
}

static int int_list(ckpt_file *f, ck_machine *m, const ckpt_value *v, const char *what, uint32_t *n,
                    int64_t **out)
{
    if (!is_seq(v)) return PFAIL("tensor %s is not a tuple", what);
    if (v->u.seq.n > f->opt.max_rank || v->u.seq.n > 64)
        return ck_machine_fail(m, CKPT_E_LIMIT, "tensor has %zu dimensions (limit %u%s)",
                               v->u.seq.n, f->opt.max_rank < 64 ? f->opt.max_rank : 64,
                               v->u.seq.n <= 64 ? "; max_rank" : "");
    *n = (uint32_t)v->u.seq.n;
    *out = NULL;
    if (!*n) return 0;
    *out = ck_alloc(&f->arena, *n * sizeof **out);
    if (!*out) return ck_machine_fail(m, CKPT_E_NOMEM, "out of memory");
    for (uint32_t i = 0; i < *n; i++) {
        if (!ck_as_int(v->u.seq.v[i], &(*out)[i]))
            return PFAIL("tensor %s has a non-integer entry", what);
        if ((*out)[i] < 0) return PFAIL("tensor %s has a negative entry", what);
    }
    return 0;
}

static ckpt_value *tensor_value(ckpt_file *f, ck_tdef *t)
{
    ckpt_value *v = ck_new(&f->pk, CKPT_V_TENSOR);
    if (v) v->u.ext = t;
    return v;
}

/* A strided tensor over a storage: (storage, offset, size, stride) checked;
 * `dtype_g`: a torch dtype global (_rebuild_tensor_v3) or NULL. */
int ck_rebuild_strided(ckpt_file *f, ck_machine *m, ckpt_value **a, const ckpt_value *dtype_g,
                       ck_tdef **out)
{
    if (a[0]->kind == CKPT_V_OBJECT && a[0]->u.obj->callable &&
        a[0]->u.obj->callable->gid == CK_G_LOAD_FROM_BYTES) /* pickle.dump of a tensor */
        return ck_kind_from_bytes(f, m, a, dtype_g, out);
    if (a[0]->kind != CKPT_V_STORAGE) return PFAIL("tensor rebuild without a storage");
    CK_TRY(ck_machine_copied(m, 16 + 2 * (is_seq(a[2]) ? a[2]->u.seq.n : 0)));
    size_t si = a[0]->u.handle;
    ck_storage *st = &f->storages[si];
    ckpt_dtype dtype = (ckpt_dtype)a[0]->aux; /* the class this reference named */
    if (dtype_g) {
        if (dtype_g->kind != CKPT_V_GLOBAL || dtype_g->gid != CK_G_DTYPE)
            return PFAIL("_rebuild_tensor_v3 dtype argument is not a torch dtype");
        dtype = (ckpt_dtype)dtype_g->aux;
        if (st->untyped && st->pub.dtype == CKPT_UINT8 && dtype != CKPT_UINT8)
            st->pub.dtype = dtype; /* report the first view's dtype */
    } else if (a[0]->aux2 & 1) {   /* untyped (the machine keeps its flags in the high bits) */
        return PFAIL("tensor over an untyped storage needs _rebuild_tensor_v3");
    }
    int64_t offset;
    if (!ck_as_int(a[1], &offset) || offset < 0)
        return PFAIL("tensor storage offset is not a non-negative integer");
    uint32_t nd, nd2;
    int64_t *shape, *stride;
    CK_TRY(int_list(f, m, a[2], "size", &nd, &shape));
    CK_TRY(int_list(f, m, a[3], "stride", &nd2, &stride));
    if (nd2 != nd) return PFAIL("tensor size has %u entries but stride %u", nd, nd2);
    return ck_tensor_new(f, si, dtype, nd, shape, stride, offset, ck_machine_pos(m), out,
                         ck_machine_err(m));
}

ckpt_value *ck_tensor_value(ckpt_file *f, ck_tdef *t)
{
    return tensor_value(f, t);
}

/* The rebuild functions: (storage, offset, size, stride, [requires_grad,
 * hooks], [dtype]). */
static int rebuild_tensor(ckpt_file *f, ck_machine *m, ckpt_value *args, int gid, ckpt_value **out)
{
    size_t n = args->u.seq.n;
    ckpt_value **a = args->u.seq.v;
    size_t want = gid == CK_G_REBUILD_TENSOR ? 4 : gid == CK_G_REBUILD_TENSOR_V2 ? 6 : 7;
    if (n < want) return PFAIL("tensor rebuild takes %zu arguments, got %zu", want, n);
    ck_tdef *t;
    bool over_storage = a[0]->kind == CKPT_V_STORAGE; /* not _load_from_bytes' bytes */
    CK_TRY(ck_rebuild_strided(f, m, a, gid == CK_G_REBUILD_TENSOR_V3 ? a[6] : NULL, &t));
    if (gid != CK_G_REBUILD_TENSOR) {
        int64_t rg = 0;
        ck_as_int(a[4], &rg);
        t->requires_grad = rg != 0;
    }
    /* torch 2.x: metadata {"conj": True, "neg": True} after the hooks (v2)
     * or the dtype (v3), for a conj()/neg view saved unresolved */
    size_t mi = gid == CK_G_REBUILD_TENSOR_V2 ? 6 : gid == CK_G_REBUILD_TENSOR_V3 ? 7 : n;
    if (mi < n && a[mi]->kind == CKPT_V_DICT) {
        ckpt_dtype dtype = t->dtype;
        int64_t conj = 0, neg = 0;
        const ckpt_value *c = ck_dict_get(a[mi], "conj"), *ng = ck_dict_get(a[mi], "neg");
        if ((c && !ck_as_int(c, &conj)) || (ng && !ck_as_int(ng, &neg)))
            return PFAIL("tensor metadata conj/neg is not a bool");
        if (conj && dtype != CKPT_COMPLEX32 && dtype != CKPT_COMPLEX64 && dtype != CKPT_COMPLEX128)
            return PFAIL("conj bit on a tensor of dtype %s", ck_dtype_name(dtype));
        if (neg && !ck_dtype_negatable(dtype))
            return PFAIL("neg bit on a tensor of dtype %s", ck_dtype_name(dtype));
        t->conj = conj != 0;
        t->neg = neg != 0;
    }
    if (!(*out = tensor_value(f, t))) return ck_machine_fail(m, CKPT_E_NOMEM, "out of memory");
    /* the tensor holds copies (shape, stride, the storage's index): the
     * arguments may be given back */
    if (over_storage && !t->kind) ck_machine_consumed(m, args);
    return 0;
}

static int torch_reduce(void *ud, ck_machine *m, ckpt_value *callable, ckpt_value *args,
                        bool newobj, ckpt_value **out)
{
    ckpt_file *f = ud;
    size_t n = args->u.seq.n;
    ckpt_value **a = args->u.seq.v;
    if (newobj) { /* torch.Size(...) is a tuple; other classes stay objects */
        if (callable->gid != CK_G_TORCH_SIZE || args->kind != CKPT_V_TUPLE) return 1;
    }
    switch (callable->gid) {
    case CK_G_REBUILD_TENSOR:
    case CK_G_REBUILD_TENSOR_V2:
    case CK_G_REBUILD_TENSOR_V3: return rebuild_tensor(f, m, args, callable->gid, out);
    case CK_G_REBUILD_PARAMETER:
    case CK_G_REBUILD_PARAMETER_STATE:
        if (n >= 2 && a[0]->kind == CKPT_V_TENSOR && !ck_value_shared(a[0])) {
            /* the tensor is this call's alone (not memoized under a key a
             * GET fetches, not DUPed): it becomes the parameter, with no
             * second rebuild (and no nameless descriptor) for it */
            int64_t rg = 0;
            ck_as_int(a[1], &rg);
            ck_tdef_of(a[0])->requires_grad = rg != 0;
            *out = a[0];
            ck_machine_consumed(m, args);
            return 0;
        }
        if (n >= 2 && a[0]->kind == CKPT_V_TENSOR) {
            CK_TRY(ck_machine_copied(m, 16));
            ck_tdef *t = ck_tdef_new(f, ck_machine_err(m));
            if (!t) return -1;
            *t = *ck_tdef_of(a[0]);
            ckpt_value *v = tensor_value(f, t);
            if (!v) return ck_machine_fail(m, CKPT_E_NOMEM, "out of memory");
            if (t->kind) { /* its own kind: the descriptor is the copy's */
                if (!(t->kind = ck_alloc_copy(&f->arena, t->kind, sizeof *t->kind)))
                    return ck_machine_fail(m, CKPT_E_NOMEM, "out of memory");
                t->kind->desc = NULL;
            }
            int64_t rg = 0;
            ck_as_int(a[1], &rg);
            t->requires_grad = rg != 0;
            t->listed = 0;
            *out = v;
            ck_machine_consumed(m, args); /* a new tensor value; the old one's tdef stays */
            return 0;
        }
        return 1;
    case CK_G_REBUILD_FROM_TYPE_V2:
        if (n >= 3 && a[0]->kind == CKPT_V_GLOBAL && a[2]->kind == CKPT_V_TUPLE &&
            (a[0]->gid == CK_G_REBUILD_TENSOR || a[0]->gid == CK_G_REBUILD_TENSOR_V2 ||
             a[0]->gid == CK_G_REBUILD_TENSOR_V3 || a[0]->gid == CK_G_REBUILD_PARAMETER ||
             a[0]->gid == CK_G_REFUSED || a[0]->gid >= CK_G_REBUILD_QTENSOR))
            return ck_machine_apply(m, a[0], a[2], out);
        return 1;
    case CK_G_REFUSED: { /* listed, unreadable: dtype and size when the args hold them */
        ckpt_dtype dt = CKPT_UINT8;
        for (size_t i = 0; i < n; i++)
            if (a[i]->kind == CKPT_V_GLOBAL && a[i]->gid == CK_G_DTYPE) {
                dt = (ckpt_dtype)a[i]->aux;
                break;
            }
        char why[96];
        snprintf(why, sizeof why, "%s tensor: ckpt does not read its data",
                 callable->u.g->note ? callable->u.g->note : "unknown");
        return ck_kind_unreadable(f, m, why, dt, 0, NULL, out);
    }
    case CK_G_TORCH_SIZE:
        if (n == 1) {
            int r = ck_machine_seq_from(m, CKPT_V_TUPLE, a[0], out);
            if (r <= 0) return r;
        }
        return 1;
    default:
        if (callable->gid >= CK_G_REBUILD_QTENSOR) return ck_kind_reduce(f, m, callable, args, out);
        return 1; /* the rest: inert objects */
    }
}

/* ---- the fast path: _rebuild_tensor_v2 as torch.save writes it ------------ */
/* A state dict of 100,000 tensors makes this call 100,000 times, each time
 * with the same 27 opcodes (protocol 2, memoized as torch's pickler does):
 *
 *   GET rebuild  MARK MARK GET 'storage' GET FloatStorage 'key' PUT
 *   GET 'cpu' numel TUPLE PUT BINPERSID  offset (size,) PUT (stride,) PUT
 *   False GET OrderedDict EMPTY_TUPLE REDUCE PUT TUPLE PUT REDUCE
 *
 * which the machine would run into eight values and three calls, only to
 * give them back.  torch_fast() reads those bytes itself when they are
 * exactly that (the integers BININT*, the strings short, every PUT of a key
 * no GET fetches, a GET of a typed storage class and of OrderedDict) and
 * makes the same checks and the same calls with the same offsets for
 * errors: the storage through the binder BINPERSID's persistent_load would
 * reach (f->pid_binder, set while a ZIP's pickle runs), the tensor through
 * the validator the REDUCE would reach.  Anything else (a pickle with no
 * such binder, a first tensor, whose class and strings are not memoized
 * yet, a FRAME, a big integer) it declines before doing anything, and the
 * machine runs the opcodes as ever. */

typedef struct fast_rd {
    const uint8_t *p, *end;
    ck_machine *m;
    uint64_t ops;
    uint64_t *puts; /* FAST_PUTS of them; kept apart so that the cursor stays in registers */
    size_t nputs;
} fast_rd;
#define FAST_PUTS 8

static CK_HOT bool rd_op(fast_rd *r, uint8_t op)
{
    if (r->p >= r->end || *r->p != op) return false;
    r->p++;
    r->ops++;
    return true;
}

/* An optional PUT (BINPUT, LONG_BINPUT); its key is kept for the check
 * that nothing fetches it (ck_machine_puts_idle(), once all are read). */
static CK_HOT bool rd_put(fast_rd *r)
{
    uint64_t key;
    size_t len;
    if (r->p < r->end && *r->p == 'q' && r->end - r->p >= 2) {
        key = r->p[1];
        len = 2;
    } else if (r->p < r->end && *r->p == 'r' && r->end - r->p >= 5) {
        key = ck_le32(r->p + 1);
        len = 5;
    } else {
        return r->p < r->end && *r->p != 'q' && *r->p != 'r' && *r->p != 0x94; /* none */
    }
    if (r->nputs == FAST_PUTS) return false;
    r->puts[r->nputs++] = key;
    r->p += len;
    r->ops++;
    return true;
}

static CK_HOT bool rd_is_get(const fast_rd *r)
{
    return r->p < r->end && (*r->p == 'h' || *r->p == 'j');
}

/* A GET (BINGET, LONG_BINGET) of a memoized value (NULL: not a GET, or a
 * key with no value). */
static CK_HOT ckpt_value *rd_get(fast_rd *r)
{
    uint64_t key;
    if (r->p < r->end && *r->p == 'h' && r->end - r->p >= 2) {
        key = r->p[1];
        r->p += 2;
    } else if (r->p < r->end && *r->p == 'j' && r->end - r->p >= 5) {
        key = ck_le32(r->p + 1);
        r->p += 5;
    } else {
        return NULL;
    }
    r->ops++;
    return ck_machine_memo_at(r->m, key);
}

/* BININT1, BININT2 or a non-negative BININT. */
static CK_HOT bool rd_int(fast_rd *r, int64_t *v)
{
    size_t avail = (size_t)(r->end - r->p);
    if (avail >= 2 && *r->p == 'K') {
        *v = r->p[1];
        r->p += 2;
    } else if (avail >= 3 && *r->p == 'M') {
        *v = ck_le16(r->p + 1);
        r->p += 3;
    } else if (avail >= 5 && *r->p == 'J' && (int32_t)ck_le32(r->p + 1) >= 0) {
        *v = (int32_t)ck_le32(r->p + 1);
        r->p += 5;
    } else {
        return false;
    }
    r->ops++;
    return true;
}

/* A short text (SHORT_BINUNICODE, BINUNICODE of at most 64 bytes) and its PUT. */
static CK_HOT bool rd_str(fast_rd *r, const char **s, size_t *n)
{
    size_t avail = (size_t)(r->end - r->p), hl;
    if (avail >= 2 && *r->p == 0x8c) {
        *n = r->p[1];
        hl = 2;
    } else if (avail >= 5 && *r->p == 'X' && ck_le32(r->p + 1) <= 64) {
        *n = ck_le32(r->p + 1);
        hl = 5;
    } else {
        return false;
    }
    if (*n > avail - hl) return false;
    *s = (const char *)r->p + hl;
    r->p += hl + *n;
    r->ops++;
    return rd_put(r);
}

/* A tuple of integers: EMPTY_TUPLE, 1-3 of them and TUPLE1-3, or MARK, up
 * to `max` of them, TUPLE; then its PUT. */
static CK_HOT bool rd_ints(fast_rd *r, int64_t *v, uint32_t *n, uint32_t max)
{
    *n = 0;
    if (rd_op(r, ')')) return rd_put(r);
    bool marked = rd_op(r, '(');
    while (*n < max && rd_int(r, &v[*n])) ++*n;
    if (marked ? !rd_op(r, 't') : (*n < 1 || *n > 3 || !rd_op(r, (uint8_t)(0x84 + *n))))
        return false;
    return rd_put(r);
}

static int torch_fast(void *ud, ck_machine *m, ckpt_value *callable, ckpt_value **out)
{
    ckpt_file *f = ud;
    if (!f->pid_binder.bind) return 1;
    uint64_t puts[FAST_PUTS];
    fast_rd r = {.m = m, .puts = puts};
    const uint8_t *rest_end;
    r.p = ck_machine_rest(m, &rest_end);
    r.end = rest_end; /* (through no pointer that leaves this file: r stays in registers) */
    const char *key = NULL, *loc;
    size_t klen = 0, llen;
    int64_t numel, offset, shape[64], stride[64];
    uint32_t nd, nd2, max = f->opt.max_rank < 64 ? f->opt.max_rank : 64;
    ckpt_value *sname, *cls, *keyv = NULL, *hooks;
    /* MARK 'storage' class key location numel TUPLE PUT BINPERSID */
    if (!rd_op(&r, '(') || !(sname = rd_get(&r)) || sname->kind != CKPT_V_STR ||
        !ck_is_text(sname, "storage") || !(cls = rd_get(&r)) || cls->kind != CKPT_V_GLOBAL ||
        cls->gid != CK_G_STORAGE_CLASS)
        return 1;
    /* the key: a new string, or (a storage seen before: torch keeps one
     * key string a storage) a GET of one */
    if (rd_is_get(&r) ? !(keyv = rd_get(&r)) || keyv->kind != CKPT_V_STR : !rd_str(&r, &key, &klen))
        return 1;
    if (rd_is_get(&r) ? !rd_get(&r) : !rd_str(&r, &loc, &llen)) return 1; /* not read */
    if (!rd_int(&r, &numel) || !rd_op(&r, 't') || !rd_put(&r)) return 1;
    const uint8_t *persid = r.p;
    if (!rd_op(&r, 'Q')) return 1;
    /* offset size stride requires_grad OrderedDict() TUPLE PUT REDUCE */
    if (!rd_int(&r, &offset) || !rd_ints(&r, shape, &nd, max) || !rd_ints(&r, stride, &nd2, max) ||
        nd2 != nd)
        return 1;
    bool rg = rd_op(&r, 0x88);
    if (!rg && !rd_op(&r, 0x89)) return 1;
    if (!(hooks = rd_get(&r)) || hooks->kind != CKPT_V_GLOBAL || hooks->gid != CK_TAG_ORDEREDDICT ||
        !rd_op(&r, ')') || !rd_op(&r, 'R') || !rd_put(&r) || !rd_op(&r, 't') || !rd_put(&r))
        return 1;
    const uint8_t *reduce = r.p;
    if (!rd_op(&r, 'R') || !ck_machine_puts_idle(m, r.puts, r.nputs)) return 1;
    for (uint32_t i = 0; i < nd; i++)
        if (shape[i] < 0 || stride[i] < 0) return 1; /* (rd_int reads none) */

    if (keyv) {
        key = keyv->u.s.p;
        klen = keyv->u.s.n;
    }
    if (klen >= 64) return 1; /* the persistent id's "storage key is not a short string" */

    /* read as the machine would: now its calls, in its order; BINPERSID
     * binds what ck_storage_pid() would (the key NUL-terminated, as
     * key_text() copies it), without the id tuple and the storage value */
    ck_machine_at(m, persid);
    char kb[64];
    memcpy(kb, key, klen);
    kb[klen] = 0;
    size_t si;
    CK_TRY(ck_storage_ref(f, cls, kb, klen, numel, ck_machine_pos(m), &f->pid_binder, &si,
                          ck_machine_err(m)));
    ck_machine_called(m, hooks); /* OrderedDict(): the backward hooks, not kept */
    ck_machine_at(m, reduce);
    ck_machine_called(m, callable);
    CK_TRY(ck_machine_copied(m, 16 + 2 * (uint64_t)nd));
    /* the storage value's class would be this reference's (ck_storage_pid()) */
    if (cls->aux2 & 1) return PFAIL("tensor over an untyped storage needs _rebuild_tensor_v3");
    int64_t *sh = NULL, *st = NULL; /* one allocation: the shape, then the stride */
    if (nd) {
        if (!(sh = ck_alloc(&f->arena, 2 * nd * sizeof *sh)))
            return ck_machine_fail(m, CKPT_E_NOMEM, "out of memory");
        st = sh + nd;
        memcpy(sh, shape, nd * sizeof *sh);
        memcpy(st, stride, nd * sizeof *st);
    }
    ck_tdef *t;
    CK_TRY(ck_tensor_new(f, si, (ckpt_dtype)cls->aux, nd, sh, st, offset, ck_machine_pos(m), &t,
                         ck_machine_err(m)));
    t->requires_grad = rg;
    if (!(*out = tensor_value(f, t))) return ck_machine_fail(m, CKPT_E_NOMEM, "out of memory");
    ck_machine_skip(m, r.p, r.ops, r.puts, r.nputs);
    return 0;
}

/* ---- running the file's pickles -------------------------------------------- */

typedef struct pl_ctx {
    ckpt_file *f;
    ck_pid_fn pl;
    void *ud;
} pl_ctx;

static ckpt_value *persistent_load(void *ud, ckpt_value *pid, int64_t pos, ckpt_error *err)
{
    pl_ctx *c = ud;
    return c->pl(c->f, c->ud, pid, pos, err);
}

void ck_torch_init(ckpt_file *f)
{
    f->pk.arena = &f->arena;
    f->pk.opt = &f->opt;
    f->pk.input_size = f->src.size;
    f->pk.hooks.ud = f;
    f->pk.hooks.find_class = find_class;
    f->pk.hooks.reduce = torch_reduce;
    f->pk.hooks.fast_gid = CK_G_REBUILD_TENSOR_V2;
    f->pk.hooks.fast_call = torch_fast;
    f->pk.hooks.on_global = f->opt.on_global;
    f->pk.hooks.on_global_ctx = f->opt.on_global_ctx;
}

int ck_torch_run(ckpt_file *f, const ck_pickle_in *in, ck_pid_fn pl, void *ud, ckpt_value **out,
                 size_t *used, ckpt_error *err)
{
    pl_ctx c = {f, pl, ud};
    f->pk.hooks.persistent_load = pl ? persistent_load : NULL;
    f->pk.hooks.pl_ud = &c;
    int r = ck_pickle_run(&f->pk, in, out, used, err);
    f->pk.hooks.persistent_load = NULL;
    f->pk.hooks.pl_ud = NULL;
    return r;
}

int ck_torch_load(ckpt_file *f, uint64_t off, uint64_t end, const char *label, ck_pid_fn pl,
                  void *ud, ckpt_value **out, uint64_t *used, ckpt_error *err)
{
    if (end > f->src.size) end = f->src.size;
    if (off >= end) return ck_fail(err, CKPT_E_FORMAT, (int64_t)off, "missing pickle (%s)", label);
    uint64_t avail = end - off;
    uint64_t cap = avail < f->opt.max_pickle_bytes ? avail : f->opt.max_pickle_bytes;
    ck_pickle_in in = {0};
    in.base = (int64_t)off;
    in.label = label;
    if (f->src.map) { /* the bytes are already in memory */
        in.buf = f->src.map + off;
        in.len = (size_t)cap;
        in.more = cap < avail; /* asking for more: the pickle goes past the size limit */
        size_t u = 0;
        int r = ck_torch_run(f, &in, pl, ud, out, &u, err);
        if (r == 0) *used = u;
        if (r == 1)
            return ck_fail(
                err, CKPT_E_LIMIT, (int64_t)off,
                "%s is larger than the pickle size limit of %llu bytes (max_pickle_bytes)", label,
                (unsigned long long)f->opt.max_pickle_bytes);
        return r == 0 ? 0 : -1;
    }
    /* Start small: a TAR member or a legacy stream holds many tiny pickles, and
     * reading a big window for each would make the reads quadratic.  Growing
     * 16-fold keeps re-parsing of a big pickle under 1/15 of its size. */
    uint64_t win = cap < 512 ? cap : 512, held = 0;
    uint8_t *buf = NULL;
    int r;
    for (;;) {
        /* the window is charged to the memory limit while it is held */
        if (ck_mem_charge(&f->arena, win - held)) {
            r = ck_fail(err, CKPT_E_NOMEM, (int64_t)off, "out of memory");
            break;
        }
        held = win;
        uint8_t *nb = realloc(buf, (size_t)win);
        if (!nb) {
            r = ck_fail(err, CKPT_E_NOMEM, -1, "out of memory");
            break;
        }
        buf = nb;
        if (ck_read(&f->src, off, buf, (size_t)win, label, err)) {
            r = -1;
            break;
        }
        in.buf = buf;
        in.len = (size_t)win;
        in.more = win < avail;
        size_t u = 0, ng = f->pk.nglobals, nn = f->pk.nnotes;
        uint64_t copies = f->pk.copies;
        r = ck_torch_run(f, &in, pl, ud, out, &u, err);
        if (r == 0) *used = u;
        if (r == 1 && win == cap) {
            r = ck_fail(err, CKPT_E_LIMIT, (int64_t)off,
                        "%s is larger than the pickle size limit of %llu bytes (max_pickle_bytes)",
                        label, (unsigned long long)f->opt.max_pickle_bytes);
            break;
        }
        if (r != 1) {
            if (r < 0 && !in.more && cap < avail && err && err->code == CKPT_E_PICKLE &&
                strstr(err->message, "truncated"))
                r = ck_fail(
                    err, CKPT_E_LIMIT, (int64_t)off,
                    "%s is larger than the pickle size limit of %llu bytes (max_pickle_bytes)",
                    label, (unsigned long long)f->opt.max_pickle_bytes);
            break;
        }
        f->pk.nglobals = ng; /* forget what the cut-short attempt recorded */
        f->pk.nnotes = nn;
        f->pk.copies = copies; /* and what it copied: the same verdict as from memory */
        win = win * 16 < cap ? win * 16 : cap; /* values built so far stay in the arena */
    }
    free(buf);
    ck_mem_release(&f->arena, held);
    return r == 0 ? 0 : -1;
}
