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
 */
#include "json_in.h"
#include "formats.h"

#include <stdlib.h>
#include <string.h>

#define ST_MAX_HEADER ((uint64_t)100 << 20) /* as the safetensors library */

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

typedef struct st_item {
    uint64_t b, e;
    const char *name;
} st_item;

static int by_begin(const void *a, const void *b)
{
    const st_item *x = a, *y = b;
    if (x->b != y->b) return x->b < y->b ? -1 : 1;
    return x->e < y->e ? -1 : x->e > y->e;
}

static int st_metadata(ckpt_file *f, json_t *meta, ckpt_value *root, ckpt_error *err)
{
    if (!json_is_object(meta))
        return ck_fail(err, CKPT_E_FORMAT, 8, "safetensors header: __metadata__ is not an object");
    ckpt_value *d = ck_new(&f->pk, CKPT_V_DICT);
    ckpt_value *k = ck_new_str(&f->pk, CKPT_V_STR, "__metadata__", 12);
    if (!d || !k || ck_seq_push(&f->pk, root, k) || ck_seq_push(&f->pk, root, d))
        return ck_fail(err, CKPT_E_NOMEM, -1, "out of memory");
    const char *key;
    json_t *v;
    json_object_foreach(meta, key, v)
    {
        if (!json_is_string(v))
            return ck_fail(err, CKPT_E_FORMAT, 8,
                           "safetensors header: __metadata__ '%.60s' is not a string", key);
        ckpt_value *kv = ck_new_str(&f->pk, CKPT_V_STR, key, strlen(key));
        ckpt_value *vv =
            ck_new_str(&f->pk, CKPT_V_STR, json_string_value(v), json_string_length(v));
        if (!kv || !vv || ck_seq_push(&f->pk, d, kv) || ck_seq_push(&f->pk, d, vv))
            return ck_fail(err, CKPT_E_NOMEM, -1, "out of memory");
    }
    return 0;
}

static int st_entry(ckpt_file *f, const char *name, json_t *e, uint64_t data_start,
                    uint64_t data_len, ckpt_value *root, st_item *item, ckpt_error *err)
{
    if (!json_is_object(e))
        return ck_fail(err, CKPT_E_FORMAT, 8, "safetensors header: '%.60s' is not an object", name);
    json_t *jd = json_object_get(e, "dtype"), *js = json_object_get(e, "shape"),
           *jo = json_object_get(e, "data_offsets");
    ckpt_dtype dt;
    if (!json_is_string(jd))
        return ck_fail(err, CKPT_E_FORMAT, 8, "safetensors header: '%.60s' has no dtype", name);
    if (ck_safetensors_dtype(json_string_value(jd), &dt))
        return ck_fail(err, CKPT_E_UNSUPPORTED, 8,
                       "safetensors tensor '%.60s': dtype '%.20s' is not supported", name,
                       json_string_value(jd));
    if (!json_is_array(js))
        return ck_fail(err, CKPT_E_FORMAT, 8, "safetensors header: '%.60s' has no shape", name);
    size_t nd = json_array_size(js);
    if (nd > f->opt.max_rank)
        return ck_fail(err, CKPT_E_LIMIT, 8,
                       "safetensors tensor '%.60s' has %zu dimensions (max_rank %u)", name, nd,
                       f->opt.max_rank);
    int64_t shape[64];
    for (size_t i = 0; i < nd; i++) {
        uint64_t x;
        if (!ck_json_u64(json_array_get(js, i), &x))
            return ck_fail(
                err, CKPT_E_FORMAT, 8,
                "safetensors tensor '%.60s': shape entry %zu is not a non-negative integer", name,
                i);
        shape[i] = (int64_t)x;
    }
    uint64_t b, en;
    if (!json_is_array(jo) || json_array_size(jo) != 2 || !ck_json_u64(json_array_get(jo, 0), &b) ||
        !ck_json_u64(json_array_get(jo, 1), &en))
        return ck_fail(err, CKPT_E_FORMAT, 8,
                       "safetensors tensor '%.60s': data_offsets is not two non-negative integers",
                       name);
    if (en < b || en > data_len)
        return ck_fail(
            err, CKPT_E_FORMAT, (int64_t)data_start,
            "safetensors tensor '%.60s': data_offsets [%llu, %llu] outside the %llu data bytes",
            name, (unsigned long long)b, (unsigned long long)en, (unsigned long long)data_len);
    size_t si;
    CK_TRY(ck_storage_new(f, name, strlen(name), &si, err));
    ck_storage *s = &f->storages[si];
    s->pub.dtype = dt;
    s->pub.nbytes = en - b;
    s->pub.file_offset = (int64_t)(data_start + b);
    s->resolved = true;
    ckpt_value *tv;
    CK_TRY(ck_format_tensor(f, si, dt, (uint32_t)nd, shape, (int64_t)(data_start + b), &tv, err));
    if (ck_tdef_numel(ck_tdef_of(tv)) * ck_dtype_size(dt) != en - b)
        return ck_fail(
            err, CKPT_E_FORMAT, (int64_t)(data_start + b),
            "safetensors tensor '%.60s': %llu bytes at data_offsets, its shape needs %llu", name,
            (unsigned long long)(en - b),
            (unsigned long long)(ck_tdef_numel(ck_tdef_of(tv)) * ck_dtype_size(dt)));
    ckpt_value *k = ck_new_str(&f->pk, CKPT_V_STR, name, strlen(name));
    if (!k || ck_seq_push(&f->pk, root, k) || ck_seq_push(&f->pk, root, tv))
        return ck_fail(err, CKPT_E_NOMEM, -1, "out of memory");
    item->b = b;
    item->e = en;
    item->name = f->storages[si].pub.key;
    return 0;
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
    if (ck_mem_charge(&f->arena, hl))
        return ck_fail(err, CKPT_E_NOMEM, 0, "out of memory for the header");
    char *buf = malloc(hl ? (size_t)hl : 1);
    if (!buf) {
        ck_mem_release(&f->arena, hl);
        return ck_fail(err, CKPT_E_NOMEM, -1, "out of memory");
    }
    json_t *doc = NULL;
    st_item *items = NULL;
    int r = ck_read(&f->src, 8, buf, (size_t)hl, "safetensors header", err);
    if (r == 0) {
        doc = ck_json_parse(buf, (size_t)hl, lim, f->opt.max_depth < 64 ? f->opt.max_depth : 64, 8,
                            "safetensors header", err);
        if (!doc) r = -1;
    }
    free(buf);
    ck_mem_release(&f->arena, hl);
    if (r == 0 && !json_is_object(doc))
        r = ck_fail(err, CKPT_E_FORMAT, 8, "safetensors header is not a JSON object");
    uint64_t data_start = 8 + hl, data_len = f->src.size - data_start;
    size_t n = 0, cap = r == 0 ? json_object_size(doc) : 0;
    if (r == 0 && cap > f->opt.max_entries)
        r = ck_fail(err, CKPT_E_LIMIT, 8, "safetensors header names %zu tensors (max_entries %u)",
                    cap, f->opt.max_entries);
    if (r == 0 && !(items = calloc(cap ? cap : 1, sizeof *items)))
        r = ck_fail(err, CKPT_E_NOMEM, -1, "out of memory");
    ckpt_value *root = r == 0 ? ck_new(&f->pk, CKPT_V_DICT) : NULL;
    if (r == 0 && !root) r = ck_fail(err, CKPT_E_NOMEM, -1, "out of memory");
    json_t *meta = r == 0 ? json_object_get(doc, "__metadata__") : NULL;
    if (meta) r = st_metadata(f, meta, root, err);
    const char *key;
    json_t *v;
    if (r == 0) json_object_foreach(doc, key, v)
        {
            if (strcmp(key, "__metadata__") == 0) continue;
            if ((r = st_entry(f, key, v, data_start, data_len, root, &items[n], err))) break;
            n++;
        }
    if (r == 0) {
        qsort(items, n, sizeof *items, by_begin);
        uint64_t at = 0;
        for (size_t i = 0; i < n && r == 0; i++) {
            if (items[i].b != at)
                r = ck_fail(err, CKPT_E_FORMAT, (int64_t)(data_start + items[i].b),
                            items[i].b > at ? "safetensors tensor '%.60s' starts at data byte "
                                              "%llu, leaving a gap after byte %llu"
                                            : "safetensors tensor '%.60s' starts at data byte "
                                              "%llu, overlapping the tensor that ends at %llu",
                            items[i].name, (unsigned long long)items[i].b, (unsigned long long)at);
            at = items[i].e;
        }
        if (r == 0 && at != data_len)
            r = ck_fail(err, CKPT_E_FORMAT, (int64_t)(data_start + at),
                        "safetensors data is %llu bytes but its tensors cover %llu",
                        (unsigned long long)data_len, (unsigned long long)at);
    }
    free(items);
    if (doc) json_decref(doc);
    if (r == 0) f->root = root;
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
