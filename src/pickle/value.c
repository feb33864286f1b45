/*
 * value.c - the public accessors of the value tree the pickle machine built.
 * Every accessor accepts NULL and values of the wrong kind, answering with a
 * neutral result (0, NULL) rather than failing.
 */
#include "../internal.h"

#include <string.h>

const char *ckpt_kind_name(ckpt_kind kind) {
    static const char *const names[] = {"none", "bool", "int", "bigint", "float", "str", "bytes", "list",
                                        "tuple", "dict", "set", "tensor", "object", "global", "storage"};
    return (unsigned)kind < sizeof names / sizeof names[0] ? names[kind] : "unknown";
}

ckpt_kind ckpt_value_kind(const ckpt_value *v) { return v ? (ckpt_kind)v->kind : CKPT_V_NONE; }

int ckpt_value_bool(const ckpt_value *v) {
    if (!v) return 0;
    if (v->kind == CKPT_V_BOOL) return v->u.b;
    if (v->kind == CKPT_V_INT) return v->u.i != 0;
    return 0;
}

int64_t ckpt_value_int(const ckpt_value *v) {
    if (!v) return 0;
    if (v->kind == CKPT_V_INT) return v->u.i;
    if (v->kind == CKPT_V_BOOL) return v->u.b;
    return 0;
}

double ckpt_value_float(const ckpt_value *v) {
    if (!v) return 0;
    if (v->kind == CKPT_V_FLOAT) return v->u.f;
    if (v->kind == CKPT_V_INT) return (double)v->u.i;
    if (v->kind == CKPT_V_BOOL) return v->u.b;
    return 0;
}

const char *ckpt_value_text(const ckpt_value *v, size_t *len) {
    if (v && (v->kind == CKPT_V_STR || v->kind == CKPT_V_BYTES || v->kind == CKPT_V_BIGINT)) {
        if (len) *len = v->u.s.n;
        return v->u.s.p;
    }
    if (len) *len = 0;
    return NULL;
}

static bool is_seq_kind(const ckpt_value *v) {
    return v && (v->kind == CKPT_V_LIST || v->kind == CKPT_V_TUPLE || v->kind == CKPT_V_SET || v->kind == CKPT_V_DICT);
}

size_t ckpt_value_len(const ckpt_value *v) {
    if (!is_seq_kind(v)) return 0;
    return v->kind == CKPT_V_DICT ? v->u.seq.n / 2 : v->u.seq.n;
}

const ckpt_value *ckpt_value_item(const ckpt_value *v, size_t i) {
    if (!is_seq_kind(v) || i >= ckpt_value_len(v)) return NULL;
    return v->kind == CKPT_V_DICT ? v->u.seq.v[2 * i + 1] : v->u.seq.v[i];
}

const ckpt_value *ckpt_value_key(const ckpt_value *v, size_t i) {
    if (!v || v->kind != CKPT_V_DICT || i >= v->u.seq.n / 2) return NULL;
    return v->u.seq.v[2 * i];
}

const ckpt_value *ck_dict_get(const ckpt_value *d, const char *key);

const ckpt_value *ckpt_value_get(const ckpt_value *v, const char *key) {
    if (!key) return NULL;
    return ck_dict_get(v, key);
}

const ckpt_storage *ckpt_value_storage(const ckpt_file *f, const ckpt_value *v) {
    if (!f || !v || v->kind != CKPT_V_STORAGE || v->u.storage >= f->nstorages) return NULL;
    return &f->storages[v->u.storage].pub;
}

const char *ckpt_value_class(const ckpt_value *v) {
    if (!v) return NULL;
    if (v->kind == CKPT_V_OBJECT || v->kind == CKPT_V_GLOBAL || v->kind == CKPT_V_DICT) return v->cls;
    return NULL;
}

const ckpt_value *ckpt_object_args(const ckpt_value *v) {
    return v && v->kind == CKPT_V_OBJECT ? v->u.obj->args : NULL;
}
const ckpt_value *ckpt_object_state(const ckpt_value *v) {
    return v && v->kind == CKPT_V_OBJECT ? v->u.obj->state : NULL;
}
const ckpt_value *ckpt_object_items(const ckpt_value *v) {
    return v && v->kind == CKPT_V_OBJECT ? v->u.obj->items : NULL;
}
const ckpt_value *ckpt_object_list(const ckpt_value *v) {
    return v && v->kind == CKPT_V_OBJECT ? v->u.obj->list : NULL;
}
