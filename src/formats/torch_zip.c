/*
 * torch_zip.c - layer 4 (formats): torch's ZIP archive, torch.save since
 * PyTorch 1.6 and torch.jit.save (ops: ck_format_zip), read through the
 * plain ZIP reader of zip.c.
 *
 *   [local header 30 + name + extra ("FB" padding to 64)] [record bytes] ...
 *   [central directory] [ZIP64 end record] [ZIP64 locator] [end record]
 *
 * Every record sits under one root folder, named after the file or
 * "archive"; torch takes it from the first central directory entry, and so do
 * we.  Records: data.pkl (the object), data/<key> (one per storage), version,
 * byteorder ("little"/"big"), constants.pkl (TorchScript).
 */
#include "formats.h"
#include "zip.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The archive's index (ckpt_file.fmt_state). */
typedef struct zip_index {
    ck_zip zip;           /* the records */
    ck_map names;         /* records under the root folder, by the rest of their name */
    uint32_t *zip_storage;  /* per record: storage index + 1, 0 none; made for the
                               first storage that is not a data/<n> record */
    uint32_t *zip_data_num; /* "data/<n>" records by n (torch's keys are 0..N-1): record
                               index + 1, or once its storage is made, that storage's
                               index | DATA_BOUND (zip_data_rec()) */
    size_t nzip_data_num;
    struct pt2_sub *sub; /* torch.export .pt2: the nested torch.save archives */
    size_t nsub;
} zip_index;
#define ZI(f) ((zip_index *)(f)->fmt_state)
#define DATA_BOUND (1u << 31) /* indices are below max_entries (< 2^31) */

/* The record index + 1 of data/<num>, 0 none. */
static size_t zip_data_rec(const ckpt_file *f, size_t num)
{
    uint32_t v = ZI(f)->zip_data_num[num];
    return v & DATA_BOUND ? f->storages[v & ~DATA_BOUND].rec + 1 : v;
}

/* Does a record name start with the root folder?  Returns the rest. */
static const char *strip_root(const char *name, size_t n, const char *root, size_t rn, size_t *rest)
{
    if (n <= rn || memcmp(name, root, rn) != 0 || name[rn] != '/') return NULL;
    *rest = n - rn - 1;
    return name + rn + 1;
}

/* n bytes of canonical decimal (1 to 18 digits, no leading zero) below
 * `limit`. */
static bool key_number(const char *s, size_t n, size_t limit, size_t *num)
{
    if (n < 1 || (s[0] == '0' && n > 1) || n > 18) return false;
    uint64_t v = 0;
    for (size_t i = 0; i < n; i++) {
        if (s[i] < '0' || s[i] > '9') return false;
        v = v * 10 + (uint64_t)(s[i] - '0');
    }
    if (v >= limit) return false;
    *num = (size_t)v;
    return true;
}

/* "data/<n>" with n in canonical decimal below `limit`: torch's storage
 * records, looked up by number rather than hashed. */
static bool data_number(const char *s, size_t n, size_t limit, size_t *num)
{
    return n >= 6 && memcmp(s, "data/", 5) == 0 && key_number(s + 5, n - 5, limit, num);
}

/* Index the records under the root folder by their name below it. */
static int index_records(ckpt_file *f, ckpt_error *err)
{
    const char *first = ck_zip_name(&ZI(f)->zip, &ZI(f)->zip.e[0]);
    const char *slash = memchr(first, '/', ck_zip_name_len(&ZI(f)->zip, &ZI(f)->zip.e[0]));
    if (!slash)
        return ck_fail(err, CKPT_E_FORMAT, ck_zip_cd_pos(&ZI(f)->zip, &ZI(f)->zip.e[0]),
                       "ZIP record '%s' is not inside a root folder: not a torch.save archive",
                       first);
    size_t rn = (size_t)(slash - first);
    f->root_name = ck_strndup(&f->arena, first, rn);
    if (!f->root_name) return ck_fail(err, CKPT_E_NOMEM, -1, "out of memory");
    if (ZI(f)->zip.n >= DATA_BOUND)
        return ck_fail(err, CKPT_E_LIMIT, -1, "ZIP has %zu records, more than ckpt indexes",
                       ZI(f)->zip.n);
    ZI(f)->zip_data_num = calloc(ZI(f)->zip.n, sizeof *ZI(f)->zip_data_num);
    if (!ZI(f)->zip_data_num) return ck_fail(err, CKPT_E_NOMEM, -1, "out of memory");
    ZI(f)->nzip_data_num = ZI(f)->zip.n;
    for (size_t i = 0; i < ZI(f)->zip.n; i++) {
        size_t rest;
        const ck_zip_entry *z = &ZI(f)->zip.e[i];
        size_t nlen = ck_zip_name_len(&ZI(f)->zip, z);
        const char *r = strip_root(ck_zip_name(&ZI(f)->zip, z), nlen, f->root_name, rn, &rest);
        if (!r) continue;
        size_t num;
        if (data_number(r, rest, ZI(f)->nzip_data_num,
                        &num)) { /* the common case, kept out of the hash map */
            if (ZI(f)->zip_data_num[num] && f->opt.scan_all_pickles) continue; /* torch's */
            if (ZI(f)->zip_data_num[num])
                return ck_fail(err, CKPT_E_FORMAT, ck_zip_cd_pos(&ZI(f)->zip, &ZI(f)->zip.e[i]),
                               "ZIP record '%s' appears twice",
                               ck_zip_name(&ZI(f)->zip, &ZI(f)->zip.e[i]));
            ZI(f)->zip_data_num[num] = (uint32_t)(i + 1); /* n <= max_entries, 32 bits */
            continue;
        }
        if (ck_map_get(&ZI(f)->names, r, rest, NULL) && f->opt.scan_all_pickles)
            continue; /* the first one is what torch reads; a scan reads them all */
        if (ck_map_get(&ZI(f)->names, r, rest, NULL))
            return ck_fail(err, CKPT_E_FORMAT, ck_zip_cd_pos(&ZI(f)->zip, &ZI(f)->zip.e[i]),
                           "ZIP record '%s' appears twice",
                           ck_zip_name(&ZI(f)->zip, &ZI(f)->zip.e[i]));
        if (ck_map_put(&ZI(f)->names, r, rest, i))
            return ck_fail(err, CKPT_E_NOMEM, -1, "out of memory");
    }
    return 0;
}

/* The record named `name` (n bytes) below the root folder, or NULL. */
static const ck_zip_entry *record_n(const ckpt_file *f, const char *name, size_t n)
{
    size_t i;
    if (data_number(name, n, ZI(f)->nzip_data_num, &i)) {
        size_t rec = zip_data_rec(f, i);
        return rec ? &ZI(f)->zip.e[rec - 1] : NULL;
    }
    if (!ck_map_get(&ZI(f)->names, name, n, &i)) return NULL;
    return &ZI(f)->zip.e[i];
}

static const ck_zip_entry *record(const ckpt_file *f, const char *name)
{
    return record_n(f, name, strlen(name));
}

static int zip_storage_read(const ckpt_file *f, const ck_storage *s, uint64_t off, void *buf,
                            size_t n, ckpt_error *err)
{
    if (s->packed) return ck_zip_read(&ZI(f)->zip, &ZI(f)->zip.e[s->rec], off, buf, n, err);
    return ck_read(&f->src, ck_storage_data_off(s) + off, buf, n, "storage data", err);
}

/* The records' prefix, "data/" as this one string: zip_bind() knows it by
 * its address. */
static const char data_prefix[] = "data/";

/* A storage is its record: index by record, no key map. */
static int zip_bind(ckpt_file *f, void *ud, const char *key, size_t klen, uint64_t nbytes,
                    int64_t pos, size_t *idx, bool *created, ckpt_error *err)
{
    const char *pre = ud;
    const ck_zip_entry *z = NULL;
    size_t num;
    uint32_t *slot = NULL; /* where the storage's index goes */
    /* torch's keys: "data/" + a number record() would find by that number */
    if (pre == data_prefix && key_number(key, klen, ZI(f)->nzip_data_num, &num) &&
        ZI(f)->zip_data_num[num]) {
        slot = &ZI(f)->zip_data_num[num];
        *created = !(*slot & DATA_BOUND);
        if (!*created) {
            *idx = *slot & ~DATA_BOUND;
            return 0;
        }
        z = &ZI(f)->zip.e[*slot - 1];
    }
    if (!z) {
        char name[96];
        size_t n, pn = strlen(pre);
        if (pn + klen < sizeof name && !memchr(key, 0, klen)) { /* what snprintf would write */
            memcpy(name, pre, pn);
            memcpy(name + pn, key, klen);
            name[n = pn + klen] = 0;
        } else { /* long keys are cut, as they always were */
            snprintf(name, sizeof name, "%s%.*s", pre, (int)klen, key);
            n = strlen(name);
        }
        z = record_n(f, name, n);
        if (!z)
            return ck_fail(err, CKPT_E_FORMAT, pos, "storage record '%s/%s' is missing",
                           f->root_name, name);
    }
    size_t zi = (size_t)(z - ZI(f)->zip.e);
    if (!slot) { /* a record found by name: its storage by record */
        if (!ZI(f)->zip_storage &&
            !(ZI(f)->zip_storage = calloc(ZI(f)->zip.n, sizeof *ZI(f)->zip_storage)))
            return ck_fail(err, CKPT_E_NOMEM, -1, "out of memory");
        *created = ZI(f)->zip_storage[zi] == 0;
        if (!*created) {
            *idx = ZI(f)->zip_storage[zi] - 1;
            return 0;
        }
    }
    /* the record is named ".../data/<key>": the storage's key is the tail
     * of its name (8 bytes a storage less than a copy), unless it was cut */
    size_t zn = ck_zip_name_len(&ZI(f)->zip, z);
    const char *tail = zn >= klen ? ck_zip_name(&ZI(f)->zip, z) + zn - klen : NULL;
    /* a record found by number ends with the key: both are that number in
     * canonical decimal (key_number()), so its bytes need not be read */
    if (tail && !slot && memcmp(tail, key, klen) != 0) tail = NULL;
    CK_TRY(ck_storage_add(f, tail ? tail : key, klen, !tail, idx, err));
    if (*idx >= DATA_BOUND) /* one storage a record: below max_entries */
        return ck_fail(err, CKPT_E_LIMIT, pos, "too many storages");
    ck_storage *s = &f->storages[*idx];
    s->rec = zi; /* before the slot names it: zip_data_rec() reads it */
    if (slot)
        *slot = (uint32_t)*idx | DATA_BOUND;
    else
        ZI(f)->zip_storage[zi] = (uint32_t)(*idx + 1);
    if (z->size < nbytes)
        return ck_fail(err, CKPT_E_FORMAT, ck_zip_cd_pos(&ZI(f)->zip, z),
                       "record '%s' holds %llu bytes but its storage needs %llu",
                       ck_zip_name(&ZI(f)->zip, z), (unsigned long long)z->size,
                       (unsigned long long)nbytes);
    s->packed = ck_zip_method(z) != 0;
    s->pub.file_offset = ck_zip_method(z) == 0 ? (int64_t)ck_zip_data_off(z) : -1;
    s->resolved = true;
    return 0;
}

/* A persistent id of the pickle run_record_in() runs: bound by its binder
 * (zip_bind with the records' prefix, or a .pt2 part's pt2_bind). */
static ckpt_value *bound_pid(ckpt_file *f, void *ud, ckpt_value *pid, int64_t pos, ckpt_error *err)
{
    (void)ud;
    return ck_storage_pid(f, pid, pos, false, &f->pid_binder, err);
}
#define ZIP_BINDER(prefix) ((ck_storage_binder){zip_bind, (void *)(prefix)})

/* Read a small text record (version, byteorder). */
static int small_record(ckpt_file *f, const ck_zip_entry *z, char *buf, size_t cap, ckpt_error *err)
{
    buf[0] = 0;
    if (z->size >= cap)
        return ck_fail(err, CKPT_E_FORMAT, ck_zip_cd_pos(&ZI(f)->zip, z), "record '%s' is too long",
                       ck_zip_name(&ZI(f)->zip, z));
    if (ck_zip_method(z) == 8)
        CK_TRY(ck_zip_read(&ZI(f)->zip, z, 0, buf, (size_t)z->size, err));
    else
        CK_TRY(ck_read(&f->src, ck_zip_data_off(z), buf, (size_t)z->size,
                       ck_zip_name(&ZI(f)->zip, z), err));
    buf[z->size] = 0;
    return 0;
}

/* Run the pickle stored in a record (stored in place, or inflated). */
static int run_record_in(ckpt_file *f, const ck_zip *zz, uint64_t base, const ck_zip_entry *z,
                         const char *label, ck_storage_binder b, ckpt_value **out, ckpt_error *err);
static int run_record(ckpt_file *f, const ck_zip_entry *z, const char *label, ck_storage_binder b,
                      ckpt_value **out, ckpt_error *err)
{
    return run_record_in(f, &ZI(f)->zip, 0, z, label, b, out, err);
}

/* Run a pickle record of `zz`, whose offsets start at file byte `base`;
 * its persistent ids are bound by `b`. */
static int run_record_in(ckpt_file *f, const ck_zip *zz, uint64_t base, const ck_zip_entry *z,
                         const char *label, ck_storage_binder b, ckpt_value **out, ckpt_error *err)
{
    if (z->size > f->opt.max_pickle_bytes)
        return ck_fail(err, CKPT_E_LIMIT, ck_zip_cd_pos(zz, z),
                       "%s is %llu bytes (limit %llu; max_pickle_bytes)", label,
                       (unsigned long long)z->size, (unsigned long long)f->opt.max_pickle_bytes);
    /* the size is known: map it or read it once, never re-parse */
    uint8_t *buf = NULL;
    ck_pickle_in in = {.len = (size_t)z->size, .base = -1, .label = label, .bounded = true};
    if (ck_zip_method(z) == 0 && (f->src.map || !f->opt.scan_all_pickles)) {
        /* mapped: in place; else read through the machine's window, never
         * whole (a scan reads the bytes after STOP too, from a buffer) */
        in.base = (int64_t)(base + ck_zip_data_off(z));
        if (f->src.map)
            in.buf = f->src.map + in.base;
        else
            in.src = &f->src;
    } else {
        if (ck_mem_charge(&f->arena, z->size))
            return ck_fail(err, CKPT_E_NOMEM, ck_zip_cd_pos(zz, z), "out of memory");
        buf = malloc(z->size ? (size_t)z->size : 1);
        if (!buf) {
            ck_mem_release(&f->arena, z->size);
            return ck_fail(err, CKPT_E_NOMEM, -1, "out of memory");
        }
        int r = ck_zip_method(z) == 0
                    ? ck_read(&f->src, base + ck_zip_data_off(z), buf, (size_t)z->size, label, err)
                    : ck_zip_read(zz, z, 0, buf, (size_t)z->size, err);
        if (r) {
            free(buf);
            ck_mem_release(&f->arena, z->size);
            return -1;
        }
        in.buf = buf;
        if (ck_zip_method(z) == 0) in.base = (int64_t)(base + ck_zip_data_off(z));
    }
    /* a scan reads the bytes after STOP too */
    in.discard = !f->opt.scan_all_pickles && (buf || f->src.mapped);
    size_t used = 0;
    /* every persistent id goes to this binder, which the fast path of the
     * tensor rebuild calls too, without the id tuple */
    ck_storage_binder outer = f->pid_binder;
    f->pid_binder = b;
    int r = ck_torch_run(f, &in, bound_pid, NULL, out, &used, err);
    f->pid_binder = outer;
    if (r == 0 && used < z->size)
        r = ck_note(&f->pk, "%s: %zu bytes after STOP", label, (size_t)z->size - used);
    if (r == 0 && used < z->size && f->opt.scan_all_pickles) /* and a scan runs them */
        r = ck_further_pickles_in(f, &in, used, err);
    if (buf) ck_mem_release(&f->arena, z->size);
    free(buf);
    return r == 0 ? 0 : -1;
}

/* Protocol 0/1 pickles have no PROTO: a record that begins, after MARKs,
 * with GLOBAL or INST "module\nname\n" (dotted identifiers) is one. */
static bool starts_with_global(const uint8_t *p, size_t n)
{
    size_t i = 0;
    while (i < n && p[i] == '(') i++;
    if (i >= n || (p[i] != 'c' && p[i] != 'i')) return false;
    i++;
    for (int part = 0; part < 2; part++) {
        size_t start = i;
        while (i < n && (p[i] == '_' || p[i] == '.' || (p[i] >= '0' && p[i] <= '9') ||
                         ((p[i] | 0x20) >= 'a' && (p[i] | 0x20) <= 'z')))
            i++;
        if (i == start || i >= n || p[i] != '\n') return false;
        i++;
    }
    return true;
}

/* A record a scanner should run besides the ones the load reads: a *.pkl
 * name (torch.load(pickle_file=...) loads any record), a later record of a
 * name already taken (Python's zipfile reads the last), or bytes that begin
 * like a pickle (PROTO, or a protocol 0/1 GLOBAL/INST).  Storage records the load indexed are data, not pickles. */
static int is_extra_pickle(ckpt_file *f, size_t i, int *yes, ckpt_error *err)
{
    const ck_zip_entry *z = &ZI(f)->zip.e[i];
    size_t rest, num, k;
    size_t nlen = ck_zip_name_len(&ZI(f)->zip, z);
    const char *r =
        strip_root(ck_zip_name(&ZI(f)->zip, z), nlen, f->root_name, strlen(f->root_name), &rest);
    *yes = 0;
    if (r) {
        if (data_number(r, rest, ZI(f)->nzip_data_num, &num)) {
            if (zip_data_rec(f, num) == i + 1) return 0; /* the storage itself */
            *yes = 1;                                        /* a second data/<n> */
            return 0;
        }
        if (ck_map_get(&ZI(f)->names, r, rest, &k) && k != i) {
            *yes = 1;
            return 0;
        }
    }
    if (nlen >= 4 && memcmp(ck_zip_name(&ZI(f)->zip, z) + nlen - 4, ".pkl", 4) == 0) {
        *yes = 1;
        return 0;
    }
    /* TorchScript's source-range .debug_pkl records are found by their
     * first bytes (PROTO 2) like any other pickle record */
    if (z->size < 2) return 0;
    uint8_t head[128];
    size_t hn = z->size < sizeof head ? (size_t)z->size : sizeof head;
    if (ck_zip_method(z) == 8) {
        if (ck_zip_read(&ZI(f)->zip, z, 0, head, hn, err)) return -1;
    } else if (ck_read(&f->src, ck_zip_data_off(z), head, hn, ck_zip_name(&ZI(f)->zip, z), err)) {
        return -1;
    }
    *yes = (head[0] == 0x80 && head[1] <= 5) || starts_with_global(head, hn);
    return 0;
}

/* For scanners: run every extra pickle record, values dropped; one that
 * does not read gives a note, not an error (its globals were reported). */
static int run_extra_pickles(ckpt_file *f, const ck_zip_entry *const *done, size_t ndone,
                             ckpt_error *err)
{
    for (size_t i = 0; i < ZI(f)->zip.n; i++) {
        const ck_zip_entry *z = &ZI(f)->zip.e[i];
        int yes = 0, skip = 0;
        ckpt_error e;
        ckpt_value *v;
        char label[160];
        for (size_t d = 0; d < ndone; d++) skip |= done[d] == z;
        if (skip) continue;
        memset(&e, 0, sizeof e);
        if (is_extra_pickle(f, i, &yes, &e) != 0) {
            if (ck_note(&f->pk, "%.100s: not scanned: %s", ck_zip_name(&ZI(f)->zip, z), e.message))
                return ck_fail(err, CKPT_E_NOMEM, -1, "out of memory");
            continue;
        }
        if (!yes) continue;
        snprintf(label, sizeof label, "%.120s (record %zu)", ck_zip_name(&ZI(f)->zip, z), i + 1);
        char *kept = ck_strndup(&f->arena, label, strlen(label));
        if (!kept) return ck_fail(err, CKPT_E_NOMEM, -1, "out of memory");
        if (run_record(f, z, kept, ZIP_BINDER(data_prefix), &v, &e) != 0 &&
            ck_note(&f->pk, "%s does not parse: %s (byte %lld)", kept, e.message,
                    (long long)e.offset))
            return ck_fail(err, CKPT_E_NOMEM, -1, "out of memory");
    }
    return 0;
}

/* A whole record into a malloc'd buffer charged to the arena (at most
 * max_pickle_bytes): 0, or -1 with err. */
static int whole_record(ckpt_file *f, const ck_zip_entry *z, char **text, size_t *len,
                        ckpt_error *err)
{
    if (z->size > f->opt.max_pickle_bytes)
        return ck_fail(err, CKPT_E_LIMIT, ck_zip_cd_pos(&ZI(f)->zip, z),
                       "record '%s' is %llu bytes (limit %llu; max_pickle_bytes)",
                       ck_zip_name(&ZI(f)->zip, z), (unsigned long long)z->size,
                       (unsigned long long)f->opt.max_pickle_bytes);
    if (ck_mem_charge(&f->arena, z->size))
        return ck_fail(err, CKPT_E_NOMEM, ck_zip_cd_pos(&ZI(f)->zip, z), "out of memory");
    char *buf = malloc(z->size ? (size_t)z->size : 1);
    int r = !buf                    ? ck_fail(err, CKPT_E_NOMEM, -1, "out of memory")
            : ck_zip_method(z) == 0 ? ck_read(&f->src, ck_zip_data_off(z), buf, (size_t)z->size,
                                              ck_zip_name(&ZI(f)->zip, z), err)
                                    : ck_zip_read(&ZI(f)->zip, z, 0, buf, (size_t)z->size, err);
    if (r) {
        free(buf);
        ck_mem_release(&f->arena, z->size);
        return -1;
    }
    *text = buf;
    *len = (size_t)z->size;
    return 0;
}

/* TorchScript: the code/ record of a class module, for script.c. */
static int script_code(ckpt_file *f, void *ud, const char *module, size_t n, char **text,
                       size_t *len, ckpt_error *err)
{
    (void)ud;
    char name[512];
    if (n + 9 > sizeof name) return 1;
    memcpy(name, "code/", 5);
    for (size_t i = 0; i < n; i++) name[5 + i] = module[i] == '.' ? '/' : module[i];
    memcpy(name + 5 + n, ".py", 4);
    const ck_zip_entry *z = record(f, name);
    if (!z) return 1;
    return whole_record(f, z, text, len, err);
}

/* TorchScript's _extra_files (records under extra/): f->extra, a DICT of
 * name -> BYTES, or NULL when there are none. */
static int extra_files(ckpt_file *f, ckpt_error *err)
{
    size_t rn = strlen(f->root_name);
    for (size_t i = 0; i < ZI(f)->zip.n; i++) {
        const ck_zip_entry *z = &ZI(f)->zip.e[i];
        size_t rest;
        size_t nlen = ck_zip_name_len(&ZI(f)->zip, z);
        const char *r = strip_root(ck_zip_name(&ZI(f)->zip, z), nlen, f->root_name, rn, &rest);
        if (!r || rest <= 6 || memcmp(r, "extra/", 6) != 0) continue;
        if (!f->extra && !(f->extra = ck_new(&f->pk, CKPT_V_DICT)))
            return ck_fail(err, CKPT_E_NOMEM, -1, "out of memory");
        ckpt_value *k = ck_new_str(&f->pk, CKPT_V_STR, r + 6, rest - 6), *v;
        char *text;
        size_t len;
        if (!k) return ck_fail(err, CKPT_E_NOMEM, -1, "out of memory");
        if (z->size > f->opt.max_pickle_bytes) { /* kept out, not fatal: None */
            if (!(v = ck_new(&f->pk, CKPT_V_NONE)) ||
                ck_note(&f->pk, "extra file '%.100s' of %llu bytes not read (max_pickle_bytes)",
                        r + 6, (unsigned long long)z->size))
                return ck_fail(err, CKPT_E_NOMEM, -1, "out of memory");
        } else {
            CK_TRY(whole_record(f, z, &text, &len, err));
            v = ck_new_str(&f->pk, CKPT_V_BYTES, text, len);
            free(text);
            ck_mem_release(&f->arena, len);
        }
        if (!v || ck_seq_push(&f->pk, f->extra, k) || ck_seq_push(&f->pk, f->extra, v))
            return ck_fail(err, CKPT_E_NOMEM, -1, "out of memory");
    }
    return 0;
}

/* ---- torch.export .pt2 (PyTorch 2.6's torch.export.save) -----------------
 *
 *   serialized_exported_program.json  the graph and its signature
 *   serialized_state_dict.pt          torch.save(ep.state_dict), stored
 *   serialized_constants.pt           torch.save(ep.constants), stored
 *   serialized_example_inputs.pt      the example inputs
 *   version                           "8.2" (the schema)
 *
 * Records at the top, no root folder.  The nested archives are read in
 * place: each is indexed as a ZIP of its own through a window on the file,
 * and its storages point at their bytes in the outer file.  The tensors are
 * the state dict's entries, then the constants', under their own names. */
typedef struct pt2_sub {
    const ck_source *parent;
    uint64_t base; /* file offset of the nested archive's first byte */
    ck_source src; /* a window on the parent */
    ck_zip zip;
    ck_map names;    /* records by the rest of their name below the root folder */
    size_t *storage; /* per record: storage index + 1 */
    const char *label;
} pt2_sub;

/* the nested archives: the tensors of the first two are listed; a scan
 * (scan_all_pickles) also runs the example inputs' pickle */
#define PT2_NSUB 3
static const char *const pt2_parts[PT2_NSUB] = {
    "serialized_state_dict.pt", "serialized_constants.pt", "serialized_example_inputs.pt"};

static int window_read(void *opaque, uint64_t off, void *buf, size_t n)
{
    const pt2_sub *w = opaque;
    uint64_t end;
    if (ck_add_ovf(off, n, &end) || end > w->src.size) return -1;
    return w->parent->read(w->parent->opaque, w->base + off, buf, n);
}

/* A top-level record of the outer ZIP by exact name (no root folder). */
static const ck_zip_entry *top_record(const ckpt_file *f, const char *name)
{
    size_t n = strlen(name);
    for (size_t i = 0; i < ZI(f)->zip.n; i++)
        if (ck_zip_name_len(&ZI(f)->zip, &ZI(f)->zip.e[i]) == n &&
            memcmp(ck_zip_name(&ZI(f)->zip, &ZI(f)->zip.e[i]), name, n) == 0)
            return &ZI(f)->zip.e[i];
    return NULL;
}

static bool is_pt2(const ckpt_file *f)
{
    return top_record(f, "serialized_exported_program.json") != NULL;
}

static int pt2_bind(ckpt_file *f, void *ud, const char *key, size_t klen, uint64_t nbytes,
                    int64_t pos, size_t *idx, bool *created, ckpt_error *err)
{
    pt2_sub *w = ud;
    char name[96];
    size_t zi;
    int n = snprintf(name, sizeof name, "data/%.*s", (int)klen, key);
    if (n < 0 || (size_t)n >= sizeof name || !ck_map_get(&w->names, name, (size_t)n, &zi))
        return ck_fail(err, CKPT_E_FORMAT, pos, "%s: storage record 'data/%.*s' is missing",
                       w->label, (int)(klen > 40 ? 40 : klen), key);
    const ck_zip_entry *z = &w->zip.e[zi];
    *created = w->storage[zi] == 0;
    if (!*created) {
        *idx = w->storage[zi] - 1;
        return 0;
    }
    if (ck_zip_method(z) != 0)
        return ck_fail(err, CKPT_E_UNSUPPORTED, ck_zip_cd_pos(&w->zip, z),
                       "%s: storage record '%s' is compressed, which ckpt does not read in place",
                       w->label, ck_zip_name(&w->zip, z));
    if (z->size < nbytes)
        return ck_fail(err, CKPT_E_FORMAT, ck_zip_cd_pos(&w->zip, z),
                       "%s: record '%s' holds %llu bytes but its storage needs %llu", w->label,
                       ck_zip_name(&w->zip, z), (unsigned long long)z->size,
                       (unsigned long long)nbytes);
    /* the constants' storage keys are told apart from the state dict's */
    char pkey[112];
    int pn = w == ZI(f)->sub
                 ? snprintf(pkey, sizeof pkey, "%.*s", (int)klen, key)
                 : snprintf(pkey, sizeof pkey, "%s/%.*s",
                            w == ZI(f)->sub + 1 ? "constants" : "example_inputs", (int)klen, key);
    CK_TRY(ck_storage_new(f, pkey, pn > 0 ? (size_t)pn : 0, idx, err));
    w->storage[zi] = *idx + 1;
    ck_storage *s = &f->storages[*idx];
    s->packed = false;
    s->rec = zi * PT2_NSUB + (size_t)(w - ZI(f)->sub); /* record and which nested archive */
    s->pub.file_offset = (int64_t)(w->base + ck_zip_data_off(z));
    s->resolved = true;
    return 0;
}

/* Index one nested torch.save archive and run its data.pkl. */
static int pt2_part(ckpt_file *f, pt2_sub *w, const ck_zip_entry *z, ckpt_value **out,
                    ckpt_error *err)
{
    if (ck_zip_method(z) != 0)
        return ck_fail(err, CKPT_E_UNSUPPORTED, ck_zip_cd_pos(&ZI(f)->zip, z),
                       "record '%s' is compressed, which ckpt does not read in place",
                       ck_zip_name(&ZI(f)->zip, z));
    w->parent = &f->src;
    w->base = ck_zip_data_off(z);
    w->label = ck_zip_name(&ZI(f)->zip, z);
    w->src.read = window_read;
    w->src.opaque = w;
    w->src.size = z->size;
    w->src.fd = -1;
    if (f->src.map) w->src.map = f->src.map + ck_zip_data_off(z);
    w->zip.src = &w->src;
    w->zip.arena = &f->arena;
    w->zip.max_entries = f->opt.max_entries;
    ckpt_error e;
    if (ck_zip_index(&w->zip, &e) != 0)
        return ck_fail(err, e.code, e.offset >= 0 ? (int64_t)w->base + e.offset : -1, "%s: %s",
                       ck_zip_name(&ZI(f)->zip, z), e.message);
    if (!(w->storage = calloc(w->zip.n ? w->zip.n : 1, sizeof *w->storage)))
        return ck_fail(err, CKPT_E_NOMEM, -1, "out of memory");
    const ck_zip_entry *pkl = NULL;
    if (ck_map_reserve(&w->names, w->zip.n)) /* sized once: every record may be named */
        return ck_fail(err, CKPT_E_NOMEM, -1, "out of memory");
    for (size_t i = 0; i < w->zip.n; i++) {
        const ck_zip_entry *r = &w->zip.e[i];
        size_t nlen = ck_zip_name_len(&w->zip, r);
        const char *slash = memchr(ck_zip_name(&w->zip, r), '/', nlen);
        if (!slash) continue;
        size_t rest = nlen - (size_t)(slash + 1 - ck_zip_name(&w->zip, r));
        if (ck_map_get(&w->names, slash + 1, rest, NULL)) continue; /* the first one */
        if (ck_map_put(&w->names, slash + 1, rest, i))
            return ck_fail(err, CKPT_E_NOMEM, -1, "out of memory");
        if (rest == 8 && memcmp(slash + 1, "data.pkl", 8) == 0) pkl = r;
    }
    if (!pkl)
        return ck_fail(err, CKPT_E_FORMAT, ck_zip_cd_pos(&ZI(f)->zip, z), "%s has no data.pkl",
                       ck_zip_name(&ZI(f)->zip, z));
    char label[80];
    snprintf(label, sizeof label, "%.60s/data.pkl", ck_zip_name(&ZI(f)->zip, z));
    char *kept = ck_strndup(&f->arena, label, strlen(label));
    if (!kept) return ck_fail(err, CKPT_E_NOMEM, -1, "out of memory");
    return run_record_in(f, &w->zip, w->base, pkl, kept, (ck_storage_binder){pt2_bind, w}, out,
                         err);
}

static int pt2_open(ckpt_file *f, ckpt_error *err)
{
    f->format = CKPT_FORMAT_TORCH_EXPORT;
    if (!(f->root_name = ck_strndup(&f->arena, "", 0)))
        return ck_fail(err, CKPT_E_NOMEM, -1, "out of memory");
    const ck_zip_entry *ver = top_record(f, "version");
    if (ver) {
        char buf[64];
        CK_TRY(small_record(f, ver, buf, sizeof buf, err));
        if (!(f->version = ck_strndup(&f->arena, buf, strcspn(buf, "\r\n"))))
            return ck_fail(err, CKPT_E_NOMEM, -1, "out of memory");
    }
    if (!(ZI(f)->sub = calloc(PT2_NSUB, sizeof *ZI(f)->sub)))
        return ck_fail(err, CKPT_E_NOMEM, -1, "out of memory");
    ZI(f)->nsub = PT2_NSUB;
    ckpt_value *root = ck_new(&f->pk, CKPT_V_DICT), *names = ck_new(&f->pk, CKPT_V_DICT);
    if (!root || !names) return ck_fail(err, CKPT_E_NOMEM, -1, "out of memory");
    static const char *const keys[] = {"state_dict", "constants"};
    f->pickle_label = "serialized_state_dict.pt/data.pkl";
    for (size_t k = 0; k < 2; k++) {
        const ck_zip_entry *z = top_record(f, pt2_parts[k]);
        ckpt_value *v, *key;
        if (!z) {
            if (k == 0)
                return ck_fail(err, CKPT_E_FORMAT, -1,
                               "torch.export archive has no serialized_state_dict.pt");
            continue;
        }
        CK_TRY(pt2_part(f, &ZI(f)->sub[k], z, &v, err));
        if (!(key = ck_new_str(&f->pk, CKPT_V_STR, keys[k], strlen(keys[k]))) ||
            ck_seq_push(&f->pk, root, key) || ck_seq_push(&f->pk, root, v))
            return ck_fail(err, CKPT_E_NOMEM, -1, "out of memory");
        /* named as the program's state_dict and constants: one flat dict */
        if (v->kind == CKPT_V_OBJECT && v->u.obj->items) v = v->u.obj->items;
        if (v->kind != CKPT_V_DICT) continue;
        for (size_t i = 0; i < v->u.seq.n; i++)
            if (ck_seq_push(&f->pk, names, v->u.seq.v[i]))
                return ck_fail(err, CKPT_E_NOMEM, -1, "out of memory");
    }
    f->root = root;
    f->names_root = names;
    const ck_zip_entry *ex = top_record(f, pt2_parts[2]);
    if (f->opt.scan_all_pickles && ex) { /* values dropped; a failure is a note */
        ckpt_value *v;
        ckpt_error e;
        if (pt2_part(f, &ZI(f)->sub[2], ex, &v, &e) != 0 &&
            ck_note(&f->pk, "%s does not parse: %s (byte %lld)", pt2_parts[2], e.message,
                    (long long)e.offset))
            return ck_fail(err, CKPT_E_NOMEM, -1, "out of memory");
    }
    return 0;
}

static void pt2_free(zip_index *zi)
{
    for (size_t k = 0; k < zi->nsub; k++) {
        ck_map_free(&zi->sub[k].names);
        ck_zip_free(&zi->sub[k].zip);
        free(zi->sub[k].storage);
    }
    free(zi->sub);
}

static int zip_open(ckpt_file *f, ckpt_error *err);

/* When a ZIP fails to open, damage is the likeliest cause: if a record the
 * open read (the pickles, version, byteorder) fails its CRC, say so instead
 * of reporting what the damaged bytes looked like.  Always returns -1. */
static void zip_blame(ckpt_file *f, ckpt_error *err)
{
    if (!ZI(f) || !ZI(f)->zip.n || !f->root_name || !f->root_name[0] ||
        (err && (err->code == CKPT_E_NOMEM || err->code == CKPT_E_IO)))
        return;
    static const char *const read_at_open[] = {"data.pkl", "constants.pkl", "version",
                                               ".data/version", "byteorder"};
    for (size_t i = 0; i < sizeof read_at_open / sizeof read_at_open[0]; i++) {
        const ck_zip_entry *z = record(f, read_at_open[i]);
        if (!z || z->crc == 0 || z->size > f->opt.max_pickle_bytes) continue;
        uint32_t crc;
        ckpt_error e2;
        if (ck_zip_crc(&ZI(f)->zip, z, &crc, &e2) != 0) continue;
        if (crc != z->crc) {
            ck_fail(err, CKPT_E_FORMAT, (int64_t)ck_zip_data_off(z),
                    "crc mismatch in %s (recorded %08x, computed %08x)",
                    ck_zip_name(&ZI(f)->zip, z), z->crc, crc);
            return;
        }
    }
}

static int zip_open(ckpt_file *f, ckpt_error *err)
{
    f->format = CKPT_FORMAT_ZIP;
    if (!(f->fmt_state = calloc(1, sizeof(zip_index))))
        return ck_fail(err, CKPT_E_NOMEM, -1, "out of memory");
    ZI(f)->zip.src = &f->src;
    ZI(f)->zip.arena = &f->arena;
    ZI(f)->zip.max_entries = f->opt.max_entries;
    ZI(f)->zip.flagged_as_plain = f->opt.scan_all_pickles != 0;
    CK_TRY(ck_zip_index(&ZI(f)->zip, err));
    if (is_pt2(f)) return pt2_open(f, err);
    CK_TRY(index_records(f, err));
    const ck_zip_entry *pkl = record(f, "data.pkl");
    if (record(f, "constants.pkl")) {
        f->format = CKPT_FORMAT_TORCHSCRIPT;
        if (!pkl) return ck_fail(err, CKPT_E_FORMAT, -1, "TorchScript archive has no data.pkl");
    } else if (!pkl) {
        return ck_fail(err, CKPT_E_FORMAT, -1,
                       "ZIP archive has no %s/data.pkl: not a torch.save file", f->root_name);
    }
    char buf[64];
    const ck_zip_entry *ver = record(f, "version");
    if (!ver) ver = record(f, ".data/version");
    if (ver) {
        CK_TRY(small_record(f, ver, buf, sizeof buf, err));
        size_t n = strcspn(buf, "\r\n");
        f->version = ck_strndup(&f->arena, buf, n);
        if (!f->version) return ck_fail(err, CKPT_E_NOMEM, -1, "out of memory");
    }
    const ck_zip_entry *bo = record(f, "byteorder");
    if (bo) {
        CK_TRY(small_record(f, bo, buf, sizeof buf, err));
        size_t n = strcspn(buf, "\r\n");
        if (n == 3 && memcmp(buf, "big", 3) == 0)
            f->byteorder = CKPT_BIG;
        else if (n == 6 && memcmp(buf, "little", 6) == 0)
            f->byteorder = CKPT_LITTLE;
        else
            return ck_fail(err, CKPT_E_FORMAT, (int64_t)ck_zip_data_off(bo),
                           "byteorder record says '%.*s'", (int)(n > 20 ? 20 : n), buf);
    }
    if (f->format == CKPT_FORMAT_TORCHSCRIPT) {
        /* data.pkl is the module graph, constants.pkl a tuple of the code's
         * constants (storages under constants/); script.c names the weights
         * from the class definitions under code/ */
        const ck_zip_entry *consts = record(f, "constants.pkl");
        CK_TRY(run_record(f, pkl, "data.pkl", ZIP_BINDER(data_prefix), &f->root, err));
        CK_TRY(
            run_record(f, consts, "constants.pkl", ZIP_BINDER("constants/"), &f->constants, err));
        if (!f->opt.skip_tensors) CK_TRY(ck_script_names(f, script_code, NULL, err));
        CK_TRY(extra_files(f, err));
        const ck_zip_entry *done[2] = {pkl, consts};
        return f->opt.scan_all_pickles ? run_extra_pickles(f, done, 2, err) : 0;
    }
    f->pickle_label = "data.pkl";
    if (run_record(f, pkl, "data.pkl", ZIP_BINDER(data_prefix), &f->root, err) != 0) {
        /* a scan still runs the other pickles: a broken data.pkl must not
         * hide a hostile record; the open fails with data.pkl's error */
        ckpt_error e2;
        if (f->opt.scan_all_pickles && err && err->code != CKPT_E_NOMEM)
            (void)run_extra_pickles(f, &pkl, 1, &e2);
        return -1;
    }
    return f->opt.scan_all_pickles ? run_extra_pickles(f, &pkl, 1, err) : 0;
}

static int zip_verify(const ckpt_file *f, void (*note)(void *, const char *),
                      void (*progress)(void *, uint64_t, uint64_t), void *ctx, ckpt_error *err)
{
    CK_TRY(ck_zip_check(&ZI(f)->zip, note, progress, ctx, err));
    /* .pt2: the nested archives' own records too (their bytes were counted
     * by the outer check, so without progress) */
    for (size_t k = 0; k < ZI(f)->nsub; k++) {
        const pt2_sub *w = &ZI(f)->sub[k];
        ckpt_error e;
        if (!w->zip.n || ck_zip_check(&w->zip, note, NULL, ctx, &e) == 0) continue;
        return ck_fail(err, e.code, e.offset >= 0 ? (int64_t)w->base + e.offset : -1, "%s: %s",
                       w->label, e.message);
    }
    return 0;
}

static int zip_record(const ckpt_file *f, const ck_storage *s, ckpt_record *rec, ckpt_error *err)
{
    (void)err;
    const ck_zip_entry *z = &ZI(f)->zip.e[s->rec];
    if (ZI(f)->nsub) { /* .pt2: a record of a nested archive, offsets made absolute */
        const pt2_sub *w = &ZI(f)->sub[s->rec % PT2_NSUB];
        z = &w->zip.e[s->rec / PT2_NSUB];
        rec->name = ck_zip_name(&w->zip, z);
        rec->method = ck_zip_method(z);
        rec->has_crc = z->crc != 0;
        rec->crc32 = z->crc;
        rec->data_offset = w->base + ck_zip_data_off(z);
        rec->compressed_size = ck_zip_comp_size(&w->zip, z);
        rec->size = z->size;
        return 0;
    }
    rec->name = ck_zip_name(&ZI(f)->zip, z);
    rec->method = ck_zip_method(z);
    rec->has_crc = z->crc != 0;
    rec->crc32 = z->crc;
    rec->data_offset = ck_zip_data_off(z);
    rec->compressed_size = ck_zip_comp_size(&ZI(f)->zip, z);
    rec->size = z->size;
    return 0;
}

static void zip_close(ckpt_file *f)
{
    zip_index *zi = ZI(f);
    if (!zi) return;
    ck_map_free(&zi->names);
    ck_zip_free(&zi->zip);
    free(zi->zip_storage);
    free(zi->zip_data_num);
    pt2_free(zi);
    free(zi);
    f->fmt_state = NULL;
}

static int zip_bid(const uint8_t *head, size_t n, uint64_t size)
{
    (void)size;
    return n >= 4 && ck_le32(head) == 0x04034b50u; /* a local header */
}

const ck_format ck_format_zip = {"zip",      zip_bid,   zip_open,  zip_storage_read,
                                 zip_verify, zip_blame, zip_close, zip_record};
