/*
 * script.c - layer 3 (torch): what a TorchScript archive's module graph
 * means.  torch.jit.save pickles each module as an object of its compiled
 * class (`__torch__.<qualname>`, NEWOBJ then BUILD with a dict of every
 * attribute slot, in slot order).  Which attributes are parameters and
 * buffers is not in the pickle: the class definitions under code/ say it,
 *
 *   class Linear(Module):
 *     __parameters__ = ["weight", "bias", ]
 *     __buffers__ = []
 *
 * and a submodule is an attribute whose class is a `(Module)` class.
 * torch.jit.load(f).state_dict() lists, per module, its parameters, then its
 * buffers (TorchScript keeps no non-persistent set: all of them), then each
 * submodule's, in slot order, skipping attributes that are not tensors
 * (None); a tensor reached twice is listed under both names.  A module
 * whose class has a __getstate__ method (quantized Conv, Linear) is pickled
 * as what that returns; torch.jit.load runs its __setstate__ to make the
 * attributes, which is code, not run here: such a module lists nothing
 * (the quantized ones declare no parameters or buffers: torch lists none
 * either), with a note when its class declares some.  Here that
 * becomes an nn.Module-shaped tree (state dicts with _parameters, _buffers,
 * _modules) that catalogue.c names like any full-model save; the object
 * graph itself stays the root for show.  The container hands over the code
 * text (ck_code_fn); without it a class's tensor attributes are all listed.
 */
#include "torch.h"

#include <stdlib.h>
#include <string.h>

enum { ATTR_PARAM = 1, ATTR_BUFFER = 2 };
enum { CLS_MODULE = 1, CLS_OTHER = 2, CLS_NOCODE = 3 };

typedef struct script {
    ckpt_file *f;
    ckpt_error *err;
    ck_code_fn code;
    void *ud;
    ck_map classes;    /* "module.Name" -> CLS_* */
    ck_map attrs;      /* "module.Name\1attr" -> ATTR_* */
    ck_map declared;   /* "module.Name" of classes with parameters or buffers */
    ck_map files;      /* modules whose code was asked for */
    ckpt_value **memo; /* per original value id: its module tree */
    uint32_t nmemo;
    char *key;
    size_t keycap;
    ckpt_value *s_params, *s_buffers, *s_modules;
    bool noted;
} script;

static int oom(script *s)
{
    return ck_fail(s->err, CKPT_E_NOMEM, -1, "out of memory");
}

/* The scratch key "mod.name" (attr NULL) or "mod.name\1attr". */
static int make_key(script *s, const char *mod, size_t mn, const char *nm, size_t nn,
                    const char *attr, size_t an, size_t *len)
{
    size_t need = mn + nn + an + 3;
    if (need < mn || need < an) return oom(s);
    if (need > s->keycap) {
        char *p = realloc(s->key, need);
        if (!p) return oom(s);
        s->key = p;
        s->keycap = need;
    }
    char *k = s->key;
    memcpy(k, mod, mn);
    k[mn] = '.';
    memcpy(k + mn + 1, nm, nn);
    *len = mn + 1 + nn;
    if (attr) {
        k[(*len)++] = '\1';
        memcpy(k + *len, attr, an);
        *len += an;
    }
    k[*len] = 0;
    return 0;
}

/* Keep a key in the arena and put it in a map. */
static int put(script *s, ck_map *m, size_t len, size_t val)
{
    size_t old;
    char *k = ck_strndup(&s->f->arena, s->key, len);
    if (!k) return oom(s);
    int r = ck_map_add(m, k, len, val, &old);
    if (r < 0) return oom(s);
    return 0; /* a name given twice: the first one stands */
}

/* One quoted name of a __parameters__/__buffers__ list, as TorchScript's
 * printer writes it ("..." with backslash escapes) into out; returns the
 * position after it, or NULL. */
static const char *quoted(const char *p, const char *end, char *out, size_t *n)
{
    *n = 0;
    for (p++; p < end && *p != '"'; p++) {
        char c = *p;
        if (c == '\n') return NULL;
        if (c == '\\' && p + 1 < end) {
            c = *++p;
            c = c == 'n' ? '\n' : c == 't' ? '\t' : c == 'r' ? '\r' : c;
        }
        out[(*n)++] = c;
    }
    return p < end ? p + 1 : NULL;
}

/* Parse every class of one code file (module `mod`) into the maps. */
static int parse_code(script *s, const char *mod, size_t mn, const char *text, size_t len)
{
    const char *p = text, *end = text + len;
    const char *cls = NULL; /* current class */
    size_t cn = 0;
    char *name = malloc(len + 1); /* a quoted name is never longer than the text */
    if (!name) return oom(s);
    int rc = 0;
    while (p < end && rc == 0) {
        const char *eol = memchr(p, '\n', (size_t)(end - p));
        if (!eol) eol = end;
        size_t ll = (size_t)(eol - p);
        if (ll > 6 && memcmp(p, "class ", 6) == 0) {
            const char *q = p + 6, *e = q;
            while (e < eol && *e != '(' && *e != ':') e++;
            cls = q;
            cn = (size_t)(e - q);
            bool module = (size_t)(eol - e) >= 8 && memcmp(e, "(Module)", 8) == 0;
            size_t kl;
            if (make_key(s, mod, mn, cls, cn, NULL, 0, &kl) ||
                put(s, &s->classes, kl, module ? CLS_MODULE : CLS_OTHER))
                rc = -1;
        } else if (ll && *p != ' ') {
            cls = NULL;
        } else if (cls) {
            const char *q = p;
            while (q < eol && *q == ' ') q++;
            int kind = 0;
            if ((size_t)(eol - q) >= 18 && memcmp(q, "__parameters__ = [", 18) == 0) {
                kind = ATTR_PARAM;
                q += 18;
            } else if ((size_t)(eol - q) >= 15 && memcmp(q, "__buffers__ = [", 15) == 0) {
                kind = ATTR_BUFFER;
                q += 15;
            }
            while (kind && q < end && *q != ']' && rc == 0) {
                if (*q != '"') {
                    q++;
                    continue;
                }
                size_t n, kl;
                q = quoted(q, end, name, &n);
                if (!q) break;
                if (make_key(s, mod, mn, cls, cn, name, n, &kl) ||
                    put(s, &s->attrs, kl, (size_t)kind) ||
                    make_key(s, mod, mn, cls, cn, NULL, 0, &kl))
                    rc = -1;
                else if (!ck_map_get(&s->declared, s->key, kl, NULL))
                    rc = put(s, &s->declared, kl, 1);
            }
            if (kind && q && q > eol) {
                eol = memchr(q, '\n', (size_t)(end - q));
                if (!eol) eol = end;
            }
        }
        p = eol + 1;
    }
    free(name);
    return rc;
}

/* What a class is: CLS_*; its code file is read on first use. */
static int class_kind(script *s, const ckpt_value *g, int *kind)
{
    const char *mod = g->u.g->module, *nm = g->u.g->name;
    size_t mn = strlen(mod), nn = strlen(nm), kl, v;
    CK_TRY(make_key(s, mod, mn, nm, nn, NULL, 0, &kl));
    if (ck_map_get(&s->classes, s->key, kl, &v)) {
        *kind = (int)v;
        return 0;
    }
    if (!ck_map_get(&s->files, mod, mn, NULL)) {
        char *m = ck_strndup(&s->f->arena, mod, mn);
        if (!m || ck_map_put(&s->files, m, mn, 1)) return oom(s);
        char *text = NULL;
        size_t len = 0;
        int r = s->code(s->f, s->ud, mod, mn, &text, &len, s->err);
        if (r < 0) return -1;
        if (r == 0) {
            int pr = parse_code(s, mod, mn, text, len);
            free(text);
            ck_mem_release(&s->f->arena, len);
            CK_TRY(pr);
        }
        CK_TRY(make_key(s, mod, mn, nm, nn, NULL, 0, &kl));
        if (ck_map_get(&s->classes, s->key, kl, &v)) {
            *kind = (int)v;
            return 0;
        }
    }
    /* no definition (a custom C++ class, or no code record) */
    CK_TRY(make_key(s, mod, mn, nm, nn, NULL, 0, &kl));
    CK_TRY(put(s, &s->classes, kl, CLS_NOCODE));
    *kind = CLS_NOCODE;
    return 0;
}

/* A TorchScript object: its class global, or NULL. */
static const ckpt_value *script_class(const ckpt_value *v)
{
    if (v->kind != CKPT_V_OBJECT || v->u.obj->refused || !v->u.obj->callable) return NULL;
    const ckpt_value *g = v->u.obj->callable;
    if (g->kind != CKPT_V_GLOBAL || !g->u.g->module || !g->u.g->name) return NULL;
    const char *m = g->u.g->module;
    if (strncmp(m, "__torch__", 9) != 0 || (m[9] != 0 && m[9] != '.')) return NULL;
    return v->u.obj->state ? g : NULL;
}

/* Its attribute slots: a dict state.  An object whose class has a
 * __getstate__ method (quantized Conv and Linear, their packed params) is
 * pickled with what that returns instead, which its __setstate__ code turns
 * back into attributes when torch.jit.load runs it. */
static bool has_slots(const ckpt_value *v)
{
    return v->u.obj->state->kind == CKPT_V_DICT;
}

static int note_once(script *s, const char *what, const ckpt_value *g)
{
    if (s->noted) return 0;
    s->noted = true;
    if (ck_note(&s->f->pk, "TorchScript class %.100s.%.100s %s", g->u.g->module, g->u.g->name,
                what))
        return oom(s);
    return 0;
}

static ckpt_value *new_dict(script *s)
{
    return ck_new(&s->f->pk, CKPT_V_DICT);
}

static int push2(script *s, ckpt_value *d, ckpt_value *k, ckpt_value *v)
{
    if (ck_seq_push(&s->f->pk, d, k) || ck_seq_push(&s->f->pk, d, v)) return oom(s);
    return 0;
}

/* The nn.Module-shaped tree of module object v (memoised: shared
 * submodules stay shared, cycles stay cycles for the walk to stop). */
static int convert(script *s, const ckpt_value *v, const ckpt_value *g, uint32_t depth,
                   ckpt_value **out)
{
    if (depth > s->f->opt.max_depth)
        return ck_fail(s->err, CKPT_E_LIMIT, -1, "TorchScript modules nest deeper than %u%s",
                       s->f->opt.max_depth, s->f->opt.max_depth < 2048 ? " (max_depth)" : "");
    if (v->id < s->nmemo && s->memo[v->id]) {
        *out = s->memo[v->id];
        return 0;
    }
    ckpt_value *o = ck_new(&s->f->pk, CKPT_V_OBJECT), *st = new_dict(s), *pd = new_dict(s),
               *bd = new_dict(s), *md = new_dict(s);
    if (!o || !st || !pd || !bd || !md || !(o->u.obj = ck_alloc(&s->f->arena, sizeof *o->u.obj)))
        return oom(s);
    o->cls = v->cls;
    o->u.obj->callable = (ckpt_value *)g;
    o->u.obj->state = st;
    CK_TRY(push2(s, st, s->s_params, pd));
    CK_TRY(push2(s, st, s->s_buffers, bd));
    CK_TRY(push2(s, st, s->s_modules, md));
    if (v->id < s->nmemo) s->memo[v->id] = o;
    *out = o;
    int kind;
    CK_TRY(class_kind(s, g, &kind));
    const char *mod = g->u.g->module, *nm = g->u.g->name;
    size_t mn = strlen(mod), nn = strlen(nm), kl;
    if (!has_slots(v)) {
        /* its state_dict() is what its __setstate__ sets, which is not run:
         * none for the quantized modules, which declare no parameters or
         * buffers (their weights stay values of the graph, for show) */
        CK_TRY(make_key(s, mod, mn, nm, nn, NULL, 0, &kl));
        if (ck_map_get(&s->declared, s->key, kl, NULL))
            CK_TRY(note_once(s,
                             "sets its state with __setstate__ (code that is not run): its "
                             "parameters and buffers are not listed",
                             g));
        return 0;
    }
    if (kind == CLS_NOCODE)
        CK_TRY(note_once(s, "has no code record: its tensor attributes are all listed", g));
    const ckpt_value *attrs = v->u.obj->state;
    for (size_t i = 0; i + 1 < attrs->u.seq.n; i += 2) {
        ckpt_value *k = attrs->u.seq.v[i], *a = attrs->u.seq.v[i + 1];
        if (k->kind != CKPT_V_STR) continue;
        if (a->kind == CKPT_V_TENSOR) {
            size_t what = ATTR_BUFFER;
            if (kind != CLS_NOCODE) {
                CK_TRY(make_key(s, mod, mn, nm, nn, k->u.s.p, k->u.s.n, &kl));
                if (!ck_map_get(&s->attrs, s->key, kl, &what)) continue;
            }
            CK_TRY(push2(s, what == ATTR_PARAM ? pd : bd, k, a));
            continue;
        }
        const ckpt_value *ag = script_class(a);
        if (!ag) continue;
        int akind;
        CK_TRY(class_kind(s, ag, &akind));
        /* not a module; or, without slots, one of no class of ours (a
         * custom C++ class object: the packed params) */
        if (akind == CLS_OTHER || (akind != CLS_MODULE && !has_slots(a))) continue;
        ckpt_value *sub;
        CK_TRY(convert(s, a, ag, depth + 1, &sub));
        CK_TRY(push2(s, md, k, sub));
    }
    return 0;
}

int ck_script_names(ckpt_file *f, ck_code_fn code, void *ud, ckpt_error *err)
{
    f->names_root = NULL;
    const ckpt_value *g = f->root ? script_class(f->root) : NULL;
    if (!g) return 0; /* not a module graph: named as any pickle */
    script s = {.f = f, .err = err, .code = code, .ud = ud};
    s.nmemo = f->pk.next_id;
    uint64_t memo_bytes = (uint64_t)(s.nmemo ? s.nmemo : 1) * sizeof *s.memo;
    if (ck_mem_charge(&f->arena, memo_bytes))
        return ck_fail(err, CKPT_E_NOMEM, -1, "out of memory");
    s.memo = calloc(s.nmemo ? s.nmemo : 1, sizeof *s.memo);
    s.s_params = ck_new_str(&f->pk, CKPT_V_STR, "_parameters", 11);
    s.s_buffers = ck_new_str(&f->pk, CKPT_V_STR, "_buffers", 8);
    s.s_modules = ck_new_str(&f->pk, CKPT_V_STR, "_modules", 8);
    int r;
    if (!s.memo || !s.s_params || !s.s_buffers || !s.s_modules)
        r = oom(&s);
    else
        r = convert(&s, f->root, g, 0, &f->names_root);
    if (r) f->names_root = NULL;
    free(s.memo);
    ck_mem_release(&f->arena, memo_bytes);
    free(s.key);
    ck_map_free(&s.classes);
    ck_map_free(&s.attrs);
    ck_map_free(&s.declared);
    ck_map_free(&s.files);
    return r;
}

const ckpt_value *ckpt_part(const ckpt_file *f, const char *name)
{
    if (!f || !name) return NULL;
    if (strcmp(name, "constants") == 0) return f->constants;
    if (strcmp(name, "extra") == 0) return f->extra;
    return NULL;
}
