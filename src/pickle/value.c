/*
 * value.c - layer 2: the values the pickle machine builds.  Constructors,
 * notes, and the public accessors of the value tree.  Every accessor accepts
 * NULL and values of the wrong kind, answering with a neutral result (0,
 * NULL) rather than failing.
 */
#include "pickle.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- constructors ---------------------------------------------------------- */

ckpt_value *ck_new(ck_unpickler *u, ckpt_kind kind)
{
    ckpt_value *v = ck_alloc(u->arena, ck_node_size(kind));
    if (!v) return NULL;
    v->kind = (uint8_t)kind;
    v->id = u->next_id++;
    return v;
}

ckpt_value *ck_new_str(ck_unpickler *u, ckpt_kind kind, const char *p, size_t n)
{
    if (n > SIZE_MAX - sizeof(ckpt_value) - 1) return NULL;
    /* the bytes where cls would be: a string has no class */
    ckpt_value *v = ck_alloc(u->arena, CK_STR_HDR + n + 1);
    if (!v) return NULL;
    v->kind = (uint8_t)kind;
    v->id = u->next_id++;
    v->u.s.p = CK_STR_INLINE(v);
    if (n) memcpy(v->u.s.p, p, n);
    v->u.s.p[n] = 0;
    v->u.s.n = n;
    return v;
}

size_t ck_seq_cap(const ckpt_value *v)
{
    size_t n = v->u.seq.n, c = 4;
    if (!v->u.seq.v) return 0;
    if (v->aux2 & CK_SEQ_EXACT) return n;
    while (c < n) c *= 2;
    return c;
}

int ck_seq_room(ck_unpickler *u, ckpt_value *v, size_t more, bool exact)
{
    size_t n = v->u.seq.n, room = ck_seq_cap(v), need;
    if (more <= room - n) return 0;
    if (more > SIZE_MAX / sizeof(ckpt_value *) - n) return -1;
    need = n + more;
    if (!exact && !(n == 0 && more > 1)) { /* powers of two: amortised growth */
        size_t c = 4;
        while (c < need) {
            if (c > SIZE_MAX / sizeof(ckpt_value *) / 2) return -1;
            c *= 2;
        }
        need = c;
        exact = false;
    } else {
        exact = true; /* a first fill of known size: no slack */
    }
    ckpt_value **nv = ck_alloc_grow(u->arena, v->u.seq.v, room * sizeof *nv, need * sizeof *nv);
    if (!nv) return -1;
    v->u.seq.v = nv;
    v->aux2 = (uint8_t)(exact ? v->aux2 | CK_SEQ_EXACT : v->aux2 & ~CK_SEQ_EXACT);
    return 0;
}

int ck_seq_push(ck_unpickler *u, ckpt_value *v, ckpt_value *item)
{
    if (ck_seq_room(u, v, 1, false)) return -1;
    v->u.seq.v[v->u.seq.n++] = item;
    return 0;
}

int ck_note(ck_unpickler *u, const char *fmt, ...)
{
    if (u->nnotes >= 1000) return 0; /* enough said */
    char buf[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    char *s = ck_strndup(u->arena, buf, strlen(buf));
    if (!s) return -1;
    if (ck_grow((void **)&u->notes, &u->cap_notes, u->nnotes + 1, sizeof *u->notes, NULL))
        return -1;
    u->notes[u->nnotes++] = s;
    return 0;
}

/* ---- helpers ---------------------------------------------------------------- */

bool ck_as_int(const ckpt_value *v, int64_t *out)
{
    if (!v) return false;
    if (v->kind == CKPT_V_INT) {
        *out = v->u.i;
        return true;
    }
    if (v->kind == CKPT_V_BOOL) {
        *out = v->u.b;
        return true;
    }
    return false;
}

bool ck_is_str(const ckpt_value *v, const char *s)
{
    return v && v->kind == CKPT_V_STR && strlen(s) == v->u.s.n &&
           memcmp(v->u.s.p, s, v->u.s.n) == 0;
}

/* d[key] (last wins, as Python keeps the last of equal keys). */
const ckpt_value *ck_dict_get(const ckpt_value *d, const char *key)
{
    if (!d || d->kind != CKPT_V_DICT) return NULL;
    const ckpt_value *found = NULL;
    for (size_t i = 0; i + 1 < d->u.seq.n; i += 2)
        if (ck_is_str(d->u.seq.v[i], key)) found = d->u.seq.v[i + 1]; /* last wins */
    return found;
}

/* ---- the public accessors ---------------------------------------------------- */

const char *ckpt_kind_name(ckpt_kind kind)
{
    static const char *const names[] = {"none", "bool",   "int",    "bigint", "float",
                                        "str",  "bytes",  "list",   "tuple",  "dict",
                                        "set",  "tensor", "object", "global", "storage"};
    return (unsigned)kind < sizeof names / sizeof names[0] ? names[kind] : "unknown";
}

ckpt_kind ckpt_value_kind(const ckpt_value *v)
{
    return v ? (ckpt_kind)v->kind : CKPT_V_NONE;
}

int ckpt_value_bool(const ckpt_value *v)
{
    if (!v) return 0;
    if (v->kind == CKPT_V_BOOL) return v->u.b;
    if (v->kind == CKPT_V_INT) return v->u.i != 0;
    return 0;
}

int64_t ckpt_value_int(const ckpt_value *v)
{
    if (!v) return 0;
    if (v->kind == CKPT_V_INT) return v->u.i;
    if (v->kind == CKPT_V_BOOL) return v->u.b;
    return 0;
}

double ckpt_value_float(const ckpt_value *v)
{
    if (!v) return 0;
    if (v->kind == CKPT_V_FLOAT) return v->u.f;
    if (v->kind == CKPT_V_INT) return (double)v->u.i;
    if (v->kind == CKPT_V_BOOL) return v->u.b;
    return 0;
}

const char *ckpt_value_text(const ckpt_value *v, size_t *len)
{
    if (v && (v->kind == CKPT_V_STR || v->kind == CKPT_V_BYTES || v->kind == CKPT_V_BIGINT)) {
        if (len) *len = v->u.s.n;
        return v->u.s.p;
    }
    if (len) *len = 0;
    return NULL;
}

static bool is_seq_kind(const ckpt_value *v)
{
    return v && (v->kind == CKPT_V_LIST || v->kind == CKPT_V_TUPLE || v->kind == CKPT_V_SET ||
                 v->kind == CKPT_V_DICT);
}

size_t ckpt_value_len(const ckpt_value *v)
{
    if (!is_seq_kind(v)) return 0;
    return v->kind == CKPT_V_DICT ? v->u.seq.n / 2 : v->u.seq.n;
}

const ckpt_value *ckpt_value_item(const ckpt_value *v, size_t i)
{
    if (!is_seq_kind(v) || i >= ckpt_value_len(v)) return NULL;
    return v->kind == CKPT_V_DICT ? v->u.seq.v[2 * i + 1] : v->u.seq.v[i];
}

const ckpt_value *ckpt_value_key(const ckpt_value *v, size_t i)
{
    if (!v || v->kind != CKPT_V_DICT || i >= v->u.seq.n / 2) return NULL;
    return v->u.seq.v[2 * i];
}

const ckpt_value *ckpt_value_get(const ckpt_value *v, const char *key)
{
    if (!key) return NULL;
    return ck_dict_get(v, key);
}

const char *ckpt_value_class(const ckpt_value *v)
{
    if (!v) return NULL;
    if (v->kind == CKPT_V_OBJECT || v->kind == CKPT_V_GLOBAL || v->kind == CKPT_V_DICT)
        return v->cls;
    return NULL;
}

const ckpt_value *ckpt_object_args(const ckpt_value *v)
{
    return v && v->kind == CKPT_V_OBJECT ? v->u.obj->args : NULL;
}
const ckpt_value *ckpt_object_state(const ckpt_value *v)
{
    return v && v->kind == CKPT_V_OBJECT ? v->u.obj->state : NULL;
}
const ckpt_value *ckpt_object_items(const ckpt_value *v)
{
    return v && v->kind == CKPT_V_OBJECT ? v->u.obj->items : NULL;
}
const ckpt_value *ckpt_object_list(const ckpt_value *v)
{
    return v && v->kind == CKPT_V_OBJECT ? v->u.obj->list : NULL;
}
