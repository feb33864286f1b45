/*
 * multi.c - layer 4 (formats): checkpoints of several files read as one
 * (ckpt_open_path()).  A shard index (pytorch_model.bin.index.json,
 * model.safetensors.index.json: {"metadata": {"total_size"}, "weight_map":
 * {name: file}}), a folder holding one, a DCP folder (dcp.c), or a folder
 * holding a single checkpoint.  The composite is a ckpt_file (ops:
 * ck_format_multi) whose storages link to the storages of the part files,
 * or to chunks of DCP tensors; tensor reads go through the usual path and
 * land in multi_storage_read().  Every path an index names is checked to
 * stay inside the folder.
 *
 * Parts (and a DCP folder's torch.save records) are opened when a read,
 * a check or the indexing needs them, through the open set (multi.h):
 * the entries in use are pinned, and past CK_KEEP_PARTS / CK_KEEP_RECORDS
 * idle ones the least recently used is closed.  The set belongs to the
 * composite and is guarded by its mutex; files are opened and closed
 * outside it.  Every file opened for the composite is a child of its
 * memory budget (ck_open_child()), so the whole folder has one.
 */
#define _DEFAULT_SOURCE
#include "multi.h"
#include "json_in.h"

#include <dirent.h>
#include <stdarg.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define MULTI(f) ((ck_multi *)(f)->fmt_state)

static int oom(ckpt_error *err)
{
    return ck_fail(err, CKPT_E_NOMEM, -1, "out of memory");
}

void ck_err_prefix(ckpt_error *err, const char *fmt, ...)
{
    if (!err) return;
    char pre[200];
    va_list ap;
    va_start(ap, fmt);
    int k = vsnprintf(pre, sizeof pre - 2, fmt, ap);
    va_end(ap);
    size_t pl = k < 0 ? 0 : strlen(pre);
    memcpy(pre + pl, ": ", 3);
    pl += 2;
    char *msg = err->message;
    size_t ml = strnlen(msg, sizeof err->message - 1);
    if (pl + ml >= sizeof err->message) ml = sizeof err->message - 1 - pl;
    memmove(msg + pl, msg, ml);
    memcpy(msg, pre, pl);
    msg[pl + ml] = 0;
}

static void prefix_err(ckpt_error *err, const char *prefix)
{
    ck_err_prefix(err, "%s", prefix);
}

static const char *base_name(const char *p)
{
    const char *s = strrchr(p, '/');
    return s ? s + 1 : p;
}

int ck_format_tensor(ckpt_file *f, size_t storage, ckpt_dtype dtype, uint32_t ndim,
                     const int64_t *shape, int64_t pos, ckpt_value **out, ckpt_error *err)
{
    int64_t *sh = NULL, *st = NULL;
    if (ndim) {
        sh = ck_alloc(&f->arena, ndim * sizeof *sh);
        st = ck_alloc(&f->arena, ndim * sizeof *st);
        if (!sh || !st) return oom(err);
        memcpy(sh, shape, ndim * sizeof *sh);
        int64_t acc = 1;
        for (uint32_t i = ndim; i-- > 0;) {
            if (sh[i] < 0) return ck_fail(err, CKPT_E_FORMAT, pos, "negative tensor dimension");
            st[i] = acc;
            if (sh[i] && __builtin_mul_overflow(acc, sh[i], &acc))
                return ck_fail(err, CKPT_E_LIMIT, pos, "tensor element count overflows");
        }
    }
    ck_tdef *t;
    CK_TRY(ck_tensor_new(f, storage, dtype, ndim, sh, st, 0, pos, &t, err));
    ckpt_value *v = ck_new(&f->pk, CKPT_V_TENSOR);
    if (!v) return oom(err);
    v->u.ext = t;
    *out = v;
    return 0;
}

/* ---- parts ---------------------------------------------------------------- */

static int add_link(ckpt_file *f, ck_multi *m, size_t idx, ckpt_error *err)
{
    CK_TRY(ck_grow_in(&f->arena, (void **)&m->links, &m->cap_links, idx + 1, sizeof *m->links,
                      err));
    memset(&m->links[idx], 0, sizeof m->links[idx]);
    return 0;
}

void ck_multi_input(ckpt_file *f, ck_multi *m, uint64_t n)
{
    m->input = n > UINT64_MAX - m->input ? UINT64_MAX : m->input + n;
    f->arena.input = m->input;
    ck_mem_allow(&f->arena, f->arena.base, f->arena.input, f->arena.kid_pickle);
}

static int64_t mtime_ns(const struct stat *st)
{
    return (int64_t)st->st_mtim.tv_sec * 1000000000 + (int64_t)st->st_mtim.tv_nsec;
}

int ck_multi_part(ckpt_file *f, ck_multi *m, const char *rel, size_t rlen, const char *what,
                  size_t *part, ckpt_error *err)
{
    if (rlen == 0 || memchr(rel, 0, rlen))
        return ck_fail(err, CKPT_E_FORMAT, -1, "%s names an empty file name", what);
    if (rel[0] == '/')
        return ck_fail(err, CKPT_E_FORMAT, -1, "%s names '%.*s', an absolute path", what,
                       (int)(rlen > 80 ? 80 : rlen), rel);
    for (size_t i = 0; i < rlen;) {
        size_t j = i;
        while (j < rlen && rel[j] != '/') j++;
        if (j - i == 2 && rel[i] == '.' && rel[i + 1] == '.')
            return ck_fail(err, CKPT_E_FORMAT, -1,
                           "%s names '%.*s', which leaves the folder ('..')", what,
                           (int)(rlen > 80 ? 80 : rlen), rel);
        /* one spelling per file: "a//b", "./a" and "a/" would name a part
         * twice and multiply what its records may hold */
        if (j == i || (j - i == 1 && rel[i] == '.'))
            return ck_fail(err, CKPT_E_FORMAT, -1,
                           "%s names '%.*s', not a plain relative path (an empty or '.' "
                           "component)",
                           what, (int)(rlen > 80 ? 80 : rlen), rel);
        i = j + 1;
    }
    size_t idx;
    if (ck_map_get(&m->part_names, rel, rlen, &idx)) {
        *part = idx;
        return 0;
    }
    if (m->nparts >= f->opt.max_entries)
        return ck_fail(err, CKPT_E_LIMIT, -1, "more than %u files (max_entries)",
                       f->opt.max_entries);
    size_t dl = strlen(m->dir), sl = strlen(m->shown);
    char *full = ck_alloc(&f->arena, sl + rlen + 2);
    if (!full) return oom(err);
    memcpy(full, m->shown, sl);
    full[sl] = '/';
    memcpy(full + sl + 1, rel, rlen);
    struct stat st;
    if (stat(full, &st) != 0)
        return ck_fail(err, errno == ENOENT ? CKPT_E_FORMAT : CKPT_E_IO, -1,
                       "%s names '%.*s', which is missing (%s)", what, (int)(rlen > 80 ? 80 : rlen),
                       rel, strerror(errno));
    if (!S_ISREG(st.st_mode))
        return ck_fail(err, CKPT_E_FORMAT, -1, "%s names '%.*s', which is not a regular file", what,
                       (int)(rlen > 80 ? 80 : rlen), rel);
    char *real = realpath(full, NULL);
    if (!real) return ck_fail(err, CKPT_E_IO, -1, "%.*s: %s", (int)rlen, rel, strerror(errno));
    bool inside = strncmp(real, m->dir, dl) == 0 && real[dl] == '/';
    free(real);
    if (!inside)
        return ck_fail(err, CKPT_E_FORMAT, -1,
                       "%s names '%.*s', which leads outside the folder (a symbolic link)", what,
                       (int)(rlen > 80 ? 80 : rlen), rel);
    size_t n = m->nparts;
    CK_TRY(ck_grow_in(&f->arena, (void **)&m->parts, &m->cap_parts, n + 1, sizeof *m->parts, err));
    /* the file whose place was checked: every open must find it again */
    m->parts[n] = (ck_part){full,      (uint64_t)st.st_size, (uint64_t)st.st_dev,
                            (uint64_t)st.st_ino, mtime_ns(&st), 0, -1, 0, 0};
    const char *key = full + sl + 1;
    if (ck_map_put(&m->part_names, key, rlen, n)) return oom(err);
    m->nparts = n + 1;
    ck_multi_input(f, m, (uint64_t)st.st_size);
    *part = n;
    return 0;
}

/* ---- the open set ---------------------------------------------------------- */

/* The file behind fd is part p as it was indexed. */
static int same_file(const ck_part *p, int fd, ckpt_error *err)
{
    struct stat st;
    if (fd < 0 || fstat(fd, &st) != 0)
        return ck_fail(err, CKPT_E_IO, -1, "%s: %s", base_name(p->path),
                       fd < 0 ? "not a file" : strerror(errno));
    if ((uint64_t)st.st_dev != p->dev || (uint64_t)st.st_ino != p->ino ||
        (uint64_t)st.st_size != p->size || mtime_ns(&st) != p->mtime_ns)
        return ck_fail(err, CKPT_E_IO, -1,
                       "%s changed since the checkpoint was opened (its size, modification time "
                       "or inode differ): open it again",
                       base_name(p->path));
    return 0;
}

/* Part p: a shard's file, opened as a child of f's budget, or a DCP
 * part's bytes; either only when it is still the file indexed. */
static void *part_open(const ckpt_file *f, ck_multi *m, size_t p, ckpt_error *err)
{
    const ck_part *pt = &m->parts[p];
    ck_source s;
    if (ck_source_open_path(&s, pt->path, f->opt.use_mmap != 0, err)) {
        prefix_err(err, base_name(pt->path));
        return NULL;
    }
    if (same_file(pt, s.fd, err)) {
        ck_source_close(&s);
        return NULL;
    }
    if (!m->dcp) {
        /* the composite only reads through its children: its budget is
         * what they change (atomically) */
        ckpt_file *e = ck_open_child((ckpt_file *)(uintptr_t)f, &s, m->indexing, err);
        if (!e) {
            prefix_err(err, base_name(pt->path));
            return NULL;
        }
        if (pt->nstorages && (e->nstorages != pt->nstorages || e->byteorder != f->byteorder)) {
            ck_fail(err, CKPT_E_IO, -1,
                    "%s changed since the checkpoint was opened (it holds other storages)",
                    base_name(pt->path));
            ckpt_close(e);
            return NULL;
        }
        return e;
    }
    ck_source *h = malloc(sizeof *h);
    if (!h) {
        ck_source_close(&s);
        oom(err);
        return NULL;
    }
    *h = s;
    return h;
}

/* A record's bytes: a range of its part's, the part pinned while the
 * record is open. */
typedef struct range_rd {
    const ckpt_file *f;
    const ck_source *src;
    size_t part;
    uint64_t off;
} range_rd;

static int range_read(void *opaque, uint64_t off, void *buf, size_t n)
{
    const range_rd *r = opaque;
    if (r->src->map) {
        memcpy(buf, r->src->map + r->off + off, n);
        return 0;
    }
    return r->src->read(r->src->opaque, r->off + off, buf, n);
}

static void range_close(void *opaque)
{
    range_rd *r = opaque;
    ck_multi_source_put(r->f, r->part);
    free(r);
}

static void *record_open(const ckpt_file *f, ck_multi *m, size_t rec, ckpt_error *err)
{
    const ck_record *r = &m->recs[rec];
    const ck_source *s = ck_multi_source_get(f, r->part, err);
    if (!s) return NULL;
    range_rd *rr = malloc(sizeof *rr);
    if (!rr) {
        ck_multi_source_put(f, r->part);
        oom(err);
        return NULL;
    }
    *rr = (range_rd){f, s, r->part, r->off};
    ckpt_reader rd = {range_read, range_close, rr, r->len};
    ck_source src;
    ck_source_reader(&src, &rd);
    ckpt_file *e = ck_open_child((ckpt_file *)(uintptr_t)f, &src, m->indexing, err);
    if (!e && err) {
        ck_err_prefix(err, "%s, record at byte %llu", base_name(m->parts[r->part].path),
                      (unsigned long long)r->off);
        err->offset = err->offset >= 0 ? err->offset + (int64_t)r->off : (int64_t)r->off;
    }
    return e;
}

static void close_handle(const ck_multi *m, uint8_t kind, void *h)
{
    if (kind == CK_OPEN_PART && m->dcp) {
        ck_source_close(h);
        free(h);
    } else {
        ckpt_close(h);
    }
}

static int32_t *slot_of(ck_multi *m, uint8_t kind, size_t idx)
{
    return kind == CK_OPEN_PART ? &m->parts[idx].slot : &m->recs[idx].slot;
}

static void lock(ck_multi *m)
{
    pthread_mutex_lock(&m->lock);
}

static void unlock(ck_multi *m)
{
    pthread_mutex_unlock(&m->lock);
}

/* Under the lock: pin the open entry of (kind, idx); NULL when closed. */
static void *pin(ck_multi *m, uint8_t kind, size_t idx)
{
    int32_t s = *slot_of(m, kind, idx);
    if (s < 0) return NULL;
    ck_open *o = &m->open[s];
    o->pins++;
    o->tick = ++m->tick;
    return o->h;
}

/* The memory an open entry holds (a DCP part's bytes: none to speak of);
 * read while the entry is idle, when nothing changes it. */
static uint64_t held_bytes(const ck_multi *m, const ck_open *o)
{
    if (o->kind == CK_OPEN_PART && m->dcp) return 0;
    const ckpt_file *e = o->h;
    return e->arena.total + e->arena.outside;
}

/* Under the lock: take the least recently used idle entry of `kind` out
 * of the set when more than `keep` are idle, or when besides the most
 * recently used one they hold more than CK_KEEP_BYTES; false when none is
 * taken. */
static bool take_idle(ck_multi *m, uint8_t kind, size_t keep, ck_open *out)
{
    size_t idle = 0, lru = SIZE_MAX;
    uint64_t bytes = 0;
    for (size_t i = 0; i < m->nopen; i++) {
        const ck_open *o = &m->open[i];
        if (o->kind != kind || o->pins) continue;
        idle++;
        bytes += held_bytes(m, o);
        if (lru == SIZE_MAX || o->tick < m->open[lru].tick) lru = i;
    }
    if (idle <= keep && (idle <= 1 || bytes <= CK_KEEP_BYTES)) return false;
    *out = m->open[lru];
    *slot_of(m, out->kind, out->idx) = -1;
    m->open[lru].kind = CK_OPEN_FREE;
    m->open[lru].h = NULL;
    return true;
}

/* Close every idle entry (records first: each holds its part pinned).
 * How many were closed. */
static size_t close_idle(ck_multi *m)
{
    size_t n = 0;
    for (uint8_t kind = CK_OPEN_RECORD; kind >= CK_OPEN_PART; kind--) {
        for (;;) {
            ck_open o;
            lock(m);
            bool got = take_idle(m, kind, 0, &o);
            unlock(m);
            if (!got) break;
            close_handle(m, o.kind, o.h);
            n++;
        }
    }
    return n;
}

/* Part or record idx, pinned (opened when it is not open): its handle, or
 * NULL with err. */
static void *acquire(const ckpt_file *f, uint8_t kind, size_t idx, ckpt_error *err)
{
    ck_multi *m = MULTI(f);
    ckpt_error local;
    if (!err) err = &local;
    for (int attempt = 0;; attempt++) {
        lock(m);
        void *h = pin(m, kind, idx);
        unlock(m);
        if (h) return h;
        h = kind == CK_OPEN_PART ? part_open(f, m, idx, err) : record_open(f, m, idx, err);
        if (!h) {
            /* the budget is the whole folder's: what is open and idle may
             * be what is missing */
            if (attempt == 0 && (err->code == CKPT_E_LIMIT || err->code == CKPT_E_NOMEM) &&
                close_idle(m) > 0)
                continue;
            return NULL;
        }
        lock(m);
        void *theirs = pin(m, kind, idx); /* opened meanwhile by another thread */
        size_t s = 0;
        while (!theirs && s < m->nopen && m->open[s].kind != CK_OPEN_FREE) s++;
        if (!theirs && s == m->nopen && m->nopen == m->cap_open) {
            size_t cap = m->cap_open ? 2 * m->cap_open : 2 * (CK_KEEP_PARTS + CK_KEEP_RECORDS);
            ck_open *grown = realloc(m->open, cap * sizeof *grown);
            if (!grown) {
                unlock(m);
                close_handle(m, kind, h);
                oom(err);
                return NULL;
            }
            m->open = grown;
            m->cap_open = cap;
        }
        if (!theirs) {
            if (s == m->nopen) m->nopen++;
            m->open[s] = (ck_open){h, idx, ++m->tick, 1, kind};
            *slot_of(m, kind, idx) = (int32_t)s;
        }
        unlock(m);
        if (theirs) close_handle(m, kind, h);
        return theirs ? theirs : h;
    }
}

/* Unpin (kind, idx); past the idle entries kept, close the least recently
 * used. */
static void release(const ckpt_file *f, uint8_t kind, size_t idx)
{
    ck_multi *m = MULTI(f);
    ck_open victim[2];
    size_t nv = 0;
    lock(m);
    int32_t s = *slot_of(m, kind, idx);
    if (s >= 0 && m->open[s].pins) m->open[s].pins--;
    if (s >= 0 && !m->open[s].pins && kind == CK_OPEN_RECORD && m->recs[idx].once) {
        victim[nv++] = m->open[s]; /* a value's record: not kept */
        m->recs[idx].slot = -1;
        m->open[s].kind = CK_OPEN_FREE;
        m->open[s].h = NULL;
    }
    size_t keep = kind == CK_OPEN_PART ? CK_KEEP_PARTS : CK_KEEP_RECORDS;
    while (nv < 2 && take_idle(m, kind, keep, &victim[nv])) nv++;
    unlock(m);
    for (size_t i = 0; i < nv; i++) close_handle(m, victim[i].kind, victim[i].h);
}

const ck_source *ck_multi_source_get(const ckpt_file *f, size_t part, ckpt_error *err)
{
    return acquire(f, CK_OPEN_PART, part, err);
}

void ck_multi_source_put(const ckpt_file *f, size_t part)
{
    release(f, CK_OPEN_PART, part);
}

ckpt_file *ck_multi_record_get(const ckpt_file *f, size_t rec, ckpt_error *err)
{
    return acquire(f, CK_OPEN_RECORD, rec, err);
}

void ck_multi_record_put(const ckpt_file *f, size_t rec)
{
    release(f, CK_OPEN_RECORD, rec);
}

/* ---- DCP records ------------------------------------------------------------ */

int ck_multi_record(ckpt_file *f, ck_multi *m, size_t part, uint64_t off, uint64_t len,
                    size_t *rec, ckpt_error *err)
{
    uint64_t size = m->parts[part].size;
    if (off > size || len > size - off)
        return ck_fail(err, CKPT_E_FORMAT, (int64_t)(off > size ? size : off),
                       "%s: a record of %llu bytes at offset %llu is past the end of the file "
                       "(%llu bytes)",
                       base_name(m->parts[part].path), (unsigned long long)len,
                       (unsigned long long)off, (unsigned long long)size);
    char key[64];
    size_t kl = (size_t)snprintf(key, sizeof key, "%zu:%llu:%llu", part, (unsigned long long)off,
                                 (unsigned long long)len);
    if (ck_map_get(&m->rec_at, key, kl, rec)) return 0; /* shared */
    if (m->nrecs >= f->opt.max_entries)
        return ck_fail(err, CKPT_E_LIMIT, -1, "more than %u records (max_entries)",
                       f->opt.max_entries);
    CK_TRY(ck_grow_in(&f->arena, (void **)&m->recs, &m->cap_recs, m->nrecs + 1, sizeof *m->recs,
                      err));
    char *kept = ck_strndup(&f->arena, key, kl);
    if (!kept || ck_map_put(&m->rec_at, kept, kl, m->nrecs)) return oom(err);
    m->recs[m->nrecs] = (ck_record){part, off, len, -1, false};
    *rec = m->nrecs++;
    return 0;
}

/* Each part's records, in the order of their offsets (ckpt_verify_part()). */
static int records_by_part(ckpt_file *f, ck_multi *m, ckpt_error *err)
{
    if (!m->nrecs) return 0;
    m->recs_of = ck_alloc(&f->arena, m->nrecs * sizeof *m->recs_of);
    if (!m->recs_of) return oom(err);
    for (size_t r = 0; r < m->nrecs; r++) m->parts[m->recs[r].part].nrec++;
    size_t at = 0;
    for (size_t p = 0; p < m->nparts; p++) {
        m->parts[p].rec0 = at;
        at += m->parts[p].nrec;
        m->parts[p].nrec = 0;
    }
    for (size_t r = 0; r < m->nrecs; r++) {
        ck_part *p = &m->parts[m->recs[r].part];
        m->recs_of[p->rec0 + p->nrec++] = r;
    }
    for (size_t p = 0; p < m->nparts; p++) { /* by offset: few per part, in order mostly */
        size_t *v = m->recs_of + m->parts[p].rec0;
        for (size_t i = 1; i < m->parts[p].nrec; i++)
            for (size_t j = i; j > 0 && m->recs[v[j - 1]].off > m->recs[v[j]].off; j--) {
                size_t t = v[j];
                v[j] = v[j - 1];
                v[j - 1] = t;
            }
    }
    return 0;
}

/* ---- the root ------------------------------------------------------------- */

int ck_multi_add_value(ckpt_file *f, ck_multi *m, const char *name, ckpt_value *v, ckpt_error *err)
{
    ckpt_value *k = ck_new_str(&f->pk, CKPT_V_STR, name, strlen(name));
    if (!k || ck_seq_push(&f->pk, m->root, k) || ck_seq_push(&f->pk, m->root, v)) return oom(err);
    return 0;
}

int ck_multi_add_chunked(ckpt_file *f, ck_multi *m, const char *name, ckpt_dtype dtype,
                         uint32_t ndim, const int64_t *shape, ck_chunk *chunks, size_t nchunks,
                         ckpt_error *err)
{
    size_t si;
    CK_TRY(ck_storage_new(f, name, strlen(name), &si, err));
    CK_TRY(add_link(f, m, si, err));
    ckpt_value *v;
    CK_TRY(ck_format_tensor(f, si, dtype, ndim, shape, -1, &v, err));
    ck_storage *s = &f->storages[si];
    s->pub.dtype = dtype;
    s->pub.nbytes = ck_tdef_numel(ck_tdef_of(v)) * ck_dtype_size(dtype);
    s->resolved = true;
    ck_link *l = &m->links[si];
    l->part = nchunks ? chunks[0].part : 0;
    l->chunks = chunks;
    l->nchunks = nchunks;
    l->ndim = ndim;
    l->shape = ck_tdef_of(v)->shape;
    l->dtype = dtype;
    l->name = s->pub.key;
    return ck_multi_add_value(f, m, name, v, err);
}

ckpt_value *ck_multi_copy_value(ckpt_file *f, const ckpt_value *v, uint32_t depth, uint64_t *budget,
                                ckpt_error *err)
{
    ckpt_value *o = NULL;
    if (*budget == 0) {
        ck_fail(err, CKPT_E_LIMIT, -1,
                "a value expands to more than %llu values when copied (max_expansion)",
                (unsigned long long)f->opt.max_expansion);
        return NULL;
    }
    --*budget;
    if (depth > f->opt.max_depth) {
        ck_fail(err, CKPT_E_LIMIT, -1, "a value nests deeper than %u (max_depth)",
                f->opt.max_depth);
        return NULL;
    }
    switch ((ckpt_kind)v->kind) {
    case CKPT_V_NONE:
    case CKPT_V_BOOL:
    case CKPT_V_INT:
    case CKPT_V_FLOAT:
        if ((o = ck_new(&f->pk, (ckpt_kind)v->kind))) o->u = v->u;
        break;
    case CKPT_V_BIGINT:
    case CKPT_V_STR:
    case CKPT_V_BYTES: o = ck_new_str(&f->pk, (ckpt_kind)v->kind, v->u.s.p, v->u.s.n); break;
    case CKPT_V_LIST:
    case CKPT_V_TUPLE:
    case CKPT_V_SET:
    case CKPT_V_DICT:
        if (!(o = ck_new(&f->pk, (ckpt_kind)v->kind))) break;
        o->cls = v->cls ? ck_strndup(&f->arena, v->cls, strlen(v->cls)) : NULL;
        for (size_t i = 0; i < v->u.seq.n; i++) {
            ckpt_value *c = ck_multi_copy_value(f, v->u.seq.v[i], depth + 1, budget, err);
            if (!c) return NULL;
            if (ck_seq_push(&f->pk, o, c)) {
                oom(err);
                return NULL;
            }
        }
        return o;
    default: {
        char text[200];
        snprintf(text, sizeof text, "<%s%s%s>", ckpt_kind_name((ckpt_kind)v->kind),
                 v->cls ? " " : "", v->cls ? v->cls : "");
        o = ck_new_str(&f->pk, CKPT_V_STR, text, strlen(text));
        break;
    }
    }
    if (!o) oom(err);
    return o;
}

/* ---- reads ---------------------------------------------------------------- */

static void to_little(uint8_t *p, size_t n, ckpt_dtype dt)
{
    const uint16_t one = 1;
    if (*(const uint8_t *)&one == 1) return;
    size_t unit = ck_dtype_swap_unit(dt);
    if (unit <= 1) return;
    for (size_t i = 0; i + unit <= n; i += unit)
        for (size_t a = 0, b = unit - 1; a < b; a++, b--) {
            uint8_t t = p[i + a];
            p[i + a] = p[i + b];
            p[i + b] = t;
        }
}

static bool in_chunk(const ck_chunk *c, const uint64_t *idx, uint32_t nd)
{
    for (uint32_t i = 0; i < nd; i++)
        if (idx[i] < (uint64_t)c->off[i] || idx[i] >= (uint64_t)(c->off[i] + c->size[i]))
            return false;
    return true;
}

/* Whether chunk c starts at or before element idx in row-major order. */
static bool starts_by(const ck_chunk *c, const uint64_t *idx, uint32_t nd)
{
    for (uint32_t i = 0; i < nd; i++)
        if ((uint64_t)c->off[i] != idx[i]) return (uint64_t)c->off[i] < idx[i];
    return true;
}

/* The chunk holding element idx (nchunks when none), the chunks being in
 * the row-major order of their first elements: the one after `ci` (a read
 * going on in order), else the last to start by idx, which is it whenever
 * the chunks are a grid (a split along each dimension), else a search. */
static size_t find_chunk(const ck_link *l, const uint64_t *idx, size_t ci)
{
    uint32_t nd = l->ndim;
    if (ci + 1 < l->nchunks && in_chunk(&l->chunks[ci + 1], idx, nd)) return ci + 1;
    size_t lo = 0, hi = l->nchunks; /* the first that starts after idx */
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (starts_by(&l->chunks[mid], idx, nd))
            lo = mid + 1;
        else
            hi = mid;
    }
    if (lo > 0 && in_chunk(&l->chunks[lo - 1], idx, nd)) return lo - 1;
    size_t k = 0;
    while (k < l->nchunks && !in_chunk(&l->chunks[k], idx, nd)) k++;
    return k;
}

/* What a read holds pinned: one part or record at a time, kept while
 * consecutive runs of elements need it. */
typedef struct pinned {
    uint8_t kind;
    size_t idx;
    void *h;
} pinned;

static void drop(const ckpt_file *f, pinned *hd)
{
    if (hd->h) release(f, hd->kind, hd->idx);
    hd->h = NULL;
}

static void *hold(const ckpt_file *f, pinned *hd, uint8_t kind, size_t idx, ckpt_error *err)
{
    if (hd->h && hd->kind == kind && hd->idx == idx) return hd->h;
    drop(f, hd);
    void *h = acquire(f, kind, idx, err);
    if (h) *hd = (pinned){kind, idx, h};
    return h;
}

/* The tensor of a chunk's record, as the indexing found it: one tensor of
 * the chunk's dtype and shape. */
static const ckpt_tensor *record_tensor(const ckpt_file *e, const ck_link *l, const ck_chunk *c,
                                        ckpt_error *err)
{
    const ckpt_tensor *t = ckpt_tensor_count(e) == 1 ? ckpt_tensor_at(e, 0) : NULL;
    bool same = t && t->dtype == l->dtype && t->ndim == l->ndim;
    for (uint32_t i = 0; same && i < l->ndim; i++) same = t->shape[i] == c->size[i];
    if (!same) {
        ck_fail(err, CKPT_E_IO, -1,
                "tensor '%s': a chunk's record no longer holds the tensor indexed", l->name);
        return NULL;
    }
    return t;
}

/* Bytes [off, off+n) of a tensor assembled from chunks, little-endian. */
static int chunked_read(const ckpt_file *f, const ck_link *l, uint64_t off, uint8_t *out, size_t n,
                        ckpt_error *err)
{
    const ck_multi *m = MULTI(f);
    size_t es = ck_dtype_size(l->dtype);
    uint32_t nd = l->ndim;
    if (n == 0) return 0;
    if (l->nchunks == 0)
        return ck_fail(err, CKPT_E_FORMAT, -1, "tensor '%s' has no chunks", l->name);
    if (off % es || n % es)
        return ck_fail(err, CKPT_E_ARG, -1, "tensor '%s': a read not on element borders", l->name);
    uint64_t e = off / es, e1 = (off + n) / es;
    uint64_t idx[64];
    size_t ci = 0;
    pinned hd = {0, 0, NULL};
    int r = 0;
    while (e < e1 && r == 0) {
        uint64_t rem = e;
        for (uint32_t i = nd; i-- > 0;) {
            idx[i] = rem % (uint64_t)l->shape[i];
            rem /= (uint64_t)l->shape[i];
        }
        if (!in_chunk(&l->chunks[ci], idx, nd)) {
            size_t k = find_chunk(l, idx, ci);
            if (k == l->nchunks) {
                r = ck_fail(err, CKPT_E_FORMAT, -1, "tensor '%s': element %llu is in no chunk",
                            l->name, (unsigned long long)e);
                break;
            }
            ci = k;
        }
        const ck_chunk *c = &l->chunks[ci];
        /* innermost dimension t the chunk does not span whole */
        int64_t t = (int64_t)nd - 1;
        uint64_t inner = 1, within = 0;
        while (t >= 0 && c->off[t] == 0 && c->size[t] == l->shape[t]) {
            within += idx[t] * inner;
            inner *= (uint64_t)l->shape[t];
            t--;
        }
        uint64_t run;
        if (t < 0)
            run = inner - within;
        else
            run = ((uint64_t)(c->off[t] + c->size[t]) - idx[t]) * inner - within;
        if (run > e1 - e) run = e1 - e;
        uint64_t local = 0, lstride = 1;
        for (uint32_t i = nd; i-- > 0;) {
            local += (idx[i] - (uint64_t)c->off[i]) * lstride;
            lstride *= (uint64_t)c->size[i];
        }
        size_t nb = (size_t)(run * es);
        /* (what the open set fails to open names its part already) */
        if (c->rec != CK_NO_RECORD) {
            const ckpt_file *rf = hold(f, &hd, CK_OPEN_RECORD, c->rec, err);
            if (!rf) {
                r = -1;
                break;
            }
            const ckpt_tensor *rt = record_tensor(rf, l, c, err);
            r = rt ? ckpt_tensor_read_range(rf, rt, local * es, out, nb, err) : -1;
            if (r == 0) to_little(out, nb, l->dtype);
        } else {
            const ck_source *src = hold(f, &hd, CK_OPEN_PART, c->part, err);
            if (!src) {
                r = -1;
                break;
            }
            r = ck_read(src, c->raw_off + local * es, out, nb, "chunk data", err);
        }
        if (r) prefix_err(err, base_name(m->parts[c->part].path));
        out += nb;
        e += run;
    }
    drop(f, &hd);
    return r;
}

static int multi_storage_read(const ckpt_file *f, const ck_storage *s, uint64_t off, void *buf,
                              size_t n, ckpt_error *err)
{
    const ck_multi *m = MULTI(f);
    const ck_link *l = &m->links[s - f->storages];
    if (m->dcp) return chunked_read(f, l, off, buf, n, err);
    const ckpt_file *sub = acquire(f, CK_OPEN_PART, l->part, err);
    if (!sub) return -1;
    int r = ck_storage_read(sub, &sub->storages[l->sub], off, buf, n, err);
    if (r) prefix_err(err, base_name(m->parts[l->part].path));
    release(f, CK_OPEN_PART, l->part);
    return r;
}

/* ---- shards --------------------------------------------------------------- */

/* Link every tensor of part `p` (open as `sub`) into the composite; the
 * names the index maps to this part are added to `found`. */
static int link_part(ckpt_file *f, ck_multi *m, size_t p, const ckpt_file *sub, json_t *wmap,
                     ck_map *found, ckpt_error *err)
{
    const char *pname = base_name(m->parts[p].path);
    const char *rel = m->parts[p].path + strlen(m->shown) + 1;
    if (sub->byteorder != f->byteorder)
        return ck_fail(err, CKPT_E_UNSUPPORTED, -1,
                       "%s: stored big-endian while the other shards are little-endian", pname);
    size_t *map = calloc(sub->nstorages ? sub->nstorages : 1, sizeof *map);
    if (!map) return oom(err);
    int r = 0;
    for (size_t i = 0; i < ckpt_tensor_count(sub) && r == 0; i++) {
        const ckpt_tensor *t = ckpt_tensor_at(sub, i);
        /* a second name for a storage of a safetensors shard is an alias
         * its __metadata__ gave (safetensors_file.c): never in the index */
        bool alias = sub->format == CKPT_FORMAT_SAFETENSORS && map[t->storage];
        void *it = wmap ? json_object_iter_at(wmap, t->name) : NULL;
        json_t *where = it ? json_object_iter_value(it) : NULL;
        if (wmap && !where && !alias)
            r = ck_note(&f->pk, "tensor '%s' is in %s but not in the index's weight_map", t->name,
                        pname)
                    ? oom(err)
                    : 0;
        if (r) break;
        if (where && json_is_string(where) && strcmp(json_string_value(where), rel) == 0) {
            const char *k = json_object_iter_key(it);
            if (ck_map_add(found, k, strlen(k), 0, NULL) < 0) {
                r = oom(err);
                break;
            }
        }
        size_t si;
        if (!map[t->storage]) {
            char key[96];
            snprintf(key, sizeof key, "%zu/%s", p, sub->storages[t->storage].pub.key);
            if ((r = ck_storage_new(f, key, strlen(key), &si, err)) ||
                (r = add_link(f, m, si, err)))
                break;
            const ck_storage *ss = &sub->storages[t->storage];
            ck_storage *s = &f->storages[si];
            s->pub.dtype = ss->pub.dtype;
            s->pub.nbytes = ss->pub.nbytes;
            /* file_offset stays -1: the bytes are in another file (a part) */
            s->resolved = true;
            m->links[si].part = p;
            m->links[si].sub = t->storage;
            map[t->storage] = si + 1;
        }
        si = map[t->storage] - 1;
        int64_t *sh = t->ndim ? ck_alloc_copy(&f->arena, t->shape, t->ndim * sizeof *sh) : NULL;
        int64_t *st = t->ndim ? ck_alloc_copy(&f->arena, t->stride, t->ndim * sizeof *st) : NULL;
        if (t->ndim && (!sh || !st)) {
            r = oom(err);
            break;
        }
        ck_tdef *td;
        if ((r = ck_tensor_new(f, si, t->dtype, t->ndim, sh, st, t->storage_offset, -1, &td, err)))
            break;
        td->requires_grad = t->requires_grad != 0;
        ckpt_value *v = ck_new(&f->pk, CKPT_V_TENSOR);
        if (!v) {
            r = oom(err);
            break;
        }
        v->u.ext = td;
        r = ck_multi_add_value(f, m, t->name, v, err);
    }
    free(map);
    return r;
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

static int read_small_file(ckpt_file *f, const char *path, const char *what, char **out, size_t *n,
                           ckpt_error *err)
{
    ck_source s;
    CK_TRY(ck_source_open_path(&s, path, false, err));
    int r = 0;
    if (s.size > f->opt.max_pickle_bytes)
        r = ck_fail(err, CKPT_E_LIMIT, 0, "%s of %llu bytes is larger than the limit of %llu", what,
                    (unsigned long long)s.size, (unsigned long long)f->opt.max_pickle_bytes);
    char *buf = r ? NULL : malloc((size_t)s.size + 1);
    if (!r && !buf) r = oom(err);
    if (!r) r = ck_read(&s, 0, buf, (size_t)s.size, what, err);
    *n = (size_t)s.size;
    ck_source_close(&s);
    if (r) {
        free(buf);
        return -1;
    }
    *out = buf;
    return 0;
}

/* Open part p and link its tensors (the indexing of a shard). */
static int index_part(ckpt_file *f, ck_multi *m, size_t p, json_t *wmap, ck_map *found,
                      ckpt_error *err)
{
    const ckpt_file *sub = acquire(f, CK_OPEN_PART, p, err);
    if (!sub) return -1;
    if (p == 0) f->byteorder = sub->byteorder;
    int r = link_part(f, m, p, sub, wmap, found, err);
    m->parts[p].nstorages = (uint32_t)(sub->nstorages > UINT32_MAX ? UINT32_MAX : sub->nstorages);
    m->meta_bytes += sub->pk.pickle_bytes;
    release(f, CK_OPEN_PART, p);
    return r;
}

static int open_index(ckpt_file *f, ck_multi *m, const char *index, ckpt_error *err)
{
    char *text;
    size_t n;
    CK_TRY(read_small_file(f, index, "index file", &text, &n, err));
    ck_multi_input(f, m, n);
    m->meta_bytes += n;
    json_t *doc = ck_json_parse(text, n, f->opt.max_pickle_bytes, 64, 0, "index file", err);
    free(text);
    if (!doc) return -1;
    int r = 0;
    json_t *wmap = json_object_get(doc, "weight_map");
    const char **files = NULL;
    size_t nf = 0;
    if (!json_is_object(doc) || !json_is_object(wmap))
        r = ck_fail(err, CKPT_E_FORMAT, 0, "index file has no \"weight_map\" object");
    size_t nw = r ? 0 : json_object_size(wmap);
    if (!r && nw > f->opt.max_entries)
        r = ck_fail(err, CKPT_E_LIMIT, 0, "index names %zu tensors (max_entries %u)", nw,
                    f->opt.max_entries);
    if (!r && !(files = calloc(nw ? nw : 1, sizeof *files))) r = oom(err);
    const char *key;
    json_t *v;
    if (!r) {
        ck_map seen = {0};
        json_object_foreach(wmap, key, v)
        {
            if (!json_is_string(v)) {
                r = ck_fail(err, CKPT_E_FORMAT, 0, "index maps '%.80s' to a non-string", key);
                break;
            }
            const char *s = json_string_value(v);
            int a = ck_map_add(&seen, s, strlen(s), nf, NULL);
            if (a < 0) {
                r = oom(err);
                break;
            }
            if (a == 0) files[nf++] = s;
        }
        ck_map_free(&seen);
    }
    if (!r) qsort(files, nf, sizeof *files, cmp_str); /* transformers loads sorted(set(...)) */
    /* every part first (the budget counts their sizes), then each opened */
    size_t *parts = r ? NULL : malloc((nf ? nf : 1) * sizeof *parts);
    if (!r && !parts) r = oom(err);
    for (size_t i = 0; i < nf && r == 0; i++)
        r = ck_multi_part(f, m, files[i], strlen(files[i]), "index", &parts[i], err);
    ck_map found = {0};
    for (size_t i = 0; i < nf && r == 0; i++) r = index_part(f, m, parts[i], wmap, &found, err);
    /* every name the index maps must be in the shard it names (a scan
     * lists no tensors: nothing to compare) */
    if (!r && !f->opt.skip_tensors) json_object_foreach(wmap, key, v)
        {
            if (ck_map_get(&found, key, strlen(key), NULL)) continue;
            r = ck_fail(err, CKPT_E_FORMAT, -1,
                        "index maps tensor '%.80s' to %.80s, which does not hold it", key,
                        json_string_value(v));
            break;
        }
    ck_map_free(&found);
    json_t *total = r ? NULL : json_object_get(json_object_get(doc, "metadata"), "total_size");
    if (total && !json_is_integer(total))
        r = ck_fail(err, CKPT_E_FORMAT, 0, "index metadata.total_size is not an integer");
    if (total) m->total_size = json_integer_value(total);
    free(parts);
    free(files);
    json_decref(doc);
    return r;
}

/* ---- opening -------------------------------------------------------------- */

static bool ends_with(const char *s, const char *suf)
{
    size_t a = strlen(s), b = strlen(suf);
    return a >= b && strcmp(s + a - b, suf) == 0;
}

static int fail_read(void *opaque, uint64_t off, void *buf, size_t n)
{
    (void)opaque, (void)off, (void)buf, (void)n;
    return -1;
}

typedef struct sub_note {
    void (*note)(void *, const char *);
    void *ctx;
    const char *part;
} sub_note;

static void forward_note(void *ctx, const char *line)
{
    const sub_note *sn = ctx;
    char buf[512];
    snprintf(buf, sizeof buf, "%s: %s", sn->part, line);
    sn->note(sn->ctx, buf);
}

typedef struct part_progress {
    void (*progress)(void *, uint64_t, uint64_t);
    void *ctx;
    uint64_t base, total;
} part_progress;

static void step(const part_progress *pp, uint64_t done)
{
    if (pp->progress && pp->base + done < pp->total)
        pp->progress(pp->ctx, pp->base + done, pp->total);
}

/* Part i alone: its shard file, or the torch.save records it holds (DCP),
 * notes forwarded with the part's name; the last part also gives the note
 * about the whole.  Parts may be checked on several threads at once: each
 * opens what it checks through the open set. */
static int verify_one_part(const ckpt_file *f, size_t i, void (*note)(void *, const char *),
                           const part_progress *pp, void *ctx, ckpt_error *err)
{
    const ck_multi *m = MULTI(f);
    const ck_part *pt = &m->parts[i];
    const char *pn = base_name(pt->path);
    char line[512];
    uint64_t done = 0;
    sub_note sn = {note, ctx, pn};
    if (!m->dcp) {
        const ckpt_file *sub = acquire(f, CK_OPEN_PART, i, err);
        int r = sub ? ckpt_verify_progress(sub, note ? forward_note : NULL, NULL, &sn, err) : -1;
        if (sub) release(f, CK_OPEN_PART, i);
        if (r) {
            if (sub) prefix_err(err, pn);
            return -1;
        }
        if (note) {
            snprintf(line, sizeof line, "%s: intact", pn);
            note(ctx, line);
        }
        step(pp, pt->size);
        return 0;
    }
    /* a part of raw chunks only: still the file indexed */
    if (!pt->nrec) {
        if (!ck_multi_source_get(f, i, err)) return -1;
        ck_multi_source_put(f, i);
    }
    for (size_t k = 0; k < pt->nrec; k++) {
        size_t rec = m->recs_of[pt->rec0 + k];
        uint64_t at = m->recs[rec].off;
        const ckpt_file *e = ck_multi_record_get(f, rec, err);
        int r = e ? ckpt_verify_progress(e, note ? forward_note : NULL, NULL, &sn, err) : -1;
        if (e) ck_multi_record_put(f, rec);
        if (r) {
            if (e) {
                ck_err_prefix(err, "%s, record at byte %llu", pn, (unsigned long long)at);
                if (err && err->offset >= 0) err->offset += (int64_t)at; /* in the part */
            }
            return -1;
        }
        done += m->recs[rec].len;
        step(pp, done);
    }
    if (note && i + 1 == m->nparts) {
        snprintf(line, sizeof line,
                 "%zu torch.save records in %zu files: CRCs checked; chunks tile their tensors",
                 m->nrecs, m->nparts);
        note(ctx, line);
    }
    return 0;
}

/* Every part in order (ckpt_verify_part() for each), progress in bytes of
 * the parts. */
static int multi_verify(const ckpt_file *f, void (*note)(void *, const char *),
                        void (*progress)(void *, uint64_t, uint64_t), void *ctx, ckpt_error *err)
{
    const ck_multi *m = MULTI(f);
    part_progress pp = {progress, ctx, 0, f->src.size};
    for (size_t i = 0; i < m->nparts; i++) {
        if (verify_one_part(f, i, note, &pp, ctx, err)) return -1;
        pp.base += m->parts[i].size;
    }
    if (progress) progress(ctx, pp.total, pp.total);
    return 0;
}

static void multi_close(ckpt_file *f)
{
    ck_multi *m = MULTI(f);
    if (!m) return;
    if (m->locked_ok) {
        /* records first: each holds its part pinned */
        for (uint8_t kind = CK_OPEN_RECORD; kind >= CK_OPEN_PART; kind--)
            for (size_t i = 0; i < m->nopen; i++) {
                ck_open o = m->open[i];
                if (o.kind != kind) continue;
                *slot_of(m, kind, o.idx) = -1;
                m->open[i].kind = CK_OPEN_FREE;
                close_handle(m, kind, o.h);
            }
        pthread_mutex_destroy(&m->lock);
    }
    free(m->open);
    free(m->recs);
    ck_map_free(&m->rec_at);
    free(m->parts);
    free(m->links);
    ck_map_free(&m->part_names);
    free(m->dir);
    free(m);
    f->fmt_state = NULL;
}

const ck_format ck_format_multi = {"multi",      NULL, NULL,        multi_storage_read,
                                   multi_verify, NULL, multi_close, NULL};

/* What a folder holds: its index, a DCP .metadata, or one checkpoint. */
static int classify_dir(const char *dir, char **index, bool *dcp, char **single, ckpt_error *err)
{
    DIR *d = opendir(dir);
    if (!d) return ck_fail(err, CKPT_E_IO, -1, "%s", strerror(errno));
    struct dirent *e;
    size_t nidx = 0, nfiles = 0;
    char first_idx[256] = "", second_idx[256] = "", file[256] = "";
    *dcp = false;
    while ((e = readdir(d))) {
        const char *n = e->d_name;
        if (strcmp(n, ".metadata") == 0) {
            *dcp = true;
            continue;
        }
        if (n[0] == '.') continue;
        if (ends_with(n, ".index.json")) {
            if (!nidx || strcmp(n, first_idx) < 0) {
                snprintf(second_idx, sizeof second_idx, "%s", first_idx);
                snprintf(first_idx, sizeof first_idx, "%s", n);
            } else {
                snprintf(second_idx, sizeof second_idx, "%s", n);
            }
            nidx++;
            continue;
        }
        if (ends_with(n, ".json") || ends_with(n, ".txt") || ends_with(n, ".md")) continue;
        size_t dl = strlen(dir);
        char *full = malloc(dl + strlen(n) + 2);
        if (!full) {
            closedir(d);
            return ck_fail(err, CKPT_E_NOMEM, -1, "out of memory");
        }
        sprintf(full, "%s/%s", dir, n);
        struct stat st;
        bool reg = stat(full, &st) == 0 && S_ISREG(st.st_mode);
        free(full);
        if (!reg) continue;
        if (!nfiles || strcmp(n, file) < 0) snprintf(file, sizeof file, "%s", n);
        nfiles++;
    }
    closedir(d);
    if (nidx > 1)
        return ck_fail(err, CKPT_E_ARG, -1,
                       "the folder holds %zu index files ('%s', '%s'%s): name the one to open",
                       nidx, first_idx, second_idx, nidx > 2 ? ", ..." : "");
    if (nidx == 1) {
        *index = strdup(first_idx);
        return *index ? 0 : ck_fail(err, CKPT_E_NOMEM, -1, "out of memory");
    }
    if (*dcp) return 0;
    if (nfiles == 1) {
        *single = strdup(file);
        return *single ? 0 : ck_fail(err, CKPT_E_NOMEM, -1, "out of memory");
    }
    if (nfiles == 0)
        return ck_fail(err, CKPT_E_FORMAT, -1,
                       "the folder holds no *.index.json, no DCP .metadata and no checkpoint file");
    return ck_fail(err, CKPT_E_ARG, -1,
                   "the folder holds no *.index.json and no DCP .metadata but %zu files: name "
                   "the checkpoint to open",
                   nfiles);
}

static char *join(const char *dir, const char *name)
{
    char *p = malloc(strlen(dir) + strlen(name) + 2);
    if (p) sprintf(p, "%s/%s", dir, name);
    return p;
}

/* The bytes of the tensors, a tied tensor (the same view of a storage as
 * one before it: an alias a safetensors shard lists, a weight a .bin shard
 * saved under two names) counted once, as metadata.total_size counts
 * them (transformers skips a storage it has counted). */
static int stored_bytes(ckpt_file *f, uint64_t *out, ckpt_error *err)
{
    typedef struct first_view {
        int64_t off;
        uint64_t nbytes;
        bool seen;
    } first_view;
    uint64_t bytes = (uint64_t)f->nstorages * sizeof(first_view);
    if (ck_mem_charge(&f->arena, bytes)) return oom(err);
    first_view *fv = calloc(f->nstorages ? f->nstorages : 1, sizeof *fv);
    int r = fv ? 0 : oom(err);
    uint64_t sum = 0;
    for (size_t i = 0; i < ckpt_tensor_count(f) && r == 0; i++) {
        ckpt_tensor t;
        if ((r = ckpt_tensor_get(f, i, &t, err))) break;
        if (t.storage < f->nstorages) {
            first_view *v = &fv[t.storage];
            if (v->seen && v->off == t.storage_offset && v->nbytes == t.nbytes) continue;
            if (!v->seen) *v = (first_view){t.storage_offset, t.nbytes, true};
        }
        sum = t.nbytes > UINT64_MAX - sum ? UINT64_MAX : sum + t.nbytes;
    }
    free(fv);
    ck_mem_release(&f->arena, bytes);
    *out = sum;
    return r;
}

static ckpt_file *open_composite(const char *dir, const char *index, const ckpt_options *opt,
                                 ckpt_error *err)
{
    ckpt_file *f = ck_file_new(opt, err);
    if (!f) return NULL;
    ck_multi *m = calloc(1, sizeof *m);
    int r = 0;
    if (!m) r = oom(err);
    if (!r && pthread_mutex_init(&m->lock, NULL) != 0) r = oom(err);
    if (!r) {
        m->locked_ok = true;
        m->indexing = true;
        m->total_size = -1;
        f->fmt = &ck_format_multi;
        f->fmt_state = m;
        f->storage_read = multi_storage_read;
        f->src.read = fail_read;
        f->byteorder = CKPT_LITTLE;
        f->format = index ? CKPT_FORMAT_SHARDED : CKPT_FORMAT_DCP;
        f->pickle_label = index ? "index" : ".metadata";
        /* one budget: the parts' memory is charged to f's arena */
        f->arena.base = f->opt.max_memory;
        m->shown = ck_strndup(&f->arena, dir, strlen(dir));
        if (!m->shown)
            r = oom(err); /* (the limit, which ck_mem_blame() names) */
        else if (!(m->dir = realpath(dir, NULL)))
            r = ck_fail(err, CKPT_E_IO, -1, "%s", strerror(errno));
    } else {
        free(m);
        m = NULL;
    }
    if (!r && !(m->root = ck_new(&f->pk, CKPT_V_DICT))) r = oom(err);
    if (!r) {
        if (index) {
            char *ip = join(m->dir, index);
            r = ip ? open_index(f, m, ip, err) : oom(err);
            free(ip);
        } else {
            m->dcp = true;
            r = ck_dcp_open(f, m, m->dir, err);
            if (!r) r = records_by_part(f, m, err);
        }
    }
    if (!r) {
        m->indexing = false;
        uint64_t total = m->meta_size;
        for (size_t i = 0; i < m->nparts; i++) total += m->parts[i].size;
        f->src.size = total;
        f->root = m->root;
        /* the listing's budget grows with the parts' metadata, as a single
         * file's with its pickle */
        f->pk.pickle_bytes = m->meta_bytes;
        r = ck_catalogue(f, err);
        uint64_t held = 0;
        if (!r && m->total_size >= 0 && !f->opt.skip_tensors) r = stored_bytes(f, &held, err);
        if (!r && m->total_size >= 0 && (uint64_t)m->total_size != held &&
            !f->opt.skip_tensors &&
            ck_note(&f->pk, "index metadata.total_size is %lld bytes, its tensors hold %llu",
                    (long long)m->total_size, (unsigned long long)held))
            r = oom(err);
    }
    if (r) {
        ck_mem_blame(&f->arena, err);
        ckpt_close(f);
        return NULL;
    }
    return f;
}

ckpt_file *ckpt_open_path(const char *path, const ckpt_options *opt, ckpt_error *err)
{
    if (!path) {
        ck_fail(err, CKPT_E_ARG, -1, "no path given");
        return NULL;
    }
    struct stat st;
    if (stat(path, &st) != 0) {
        ck_fail(err, CKPT_E_IO, -1, "%s", strerror(errno));
        return NULL;
    }
    if (!S_ISDIR(st.st_mode)) {
        if (!S_ISREG(st.st_mode) || !ends_with(path, ".index.json"))
            return ckpt_open(path, opt, err);
        /* an index: its folder, that index */
        char *copy = strdup(path);
        if (!copy) {
            ck_fail(err, CKPT_E_NOMEM, -1, "out of memory");
            return NULL;
        }
        char *slash = strrchr(copy, '/');
        const char *dir = ".", *name = copy;
        if (slash) {
            *slash = 0;
            dir = slash == copy ? "/" : copy;
            name = slash + 1;
        }
        ckpt_file *f = open_composite(dir, name, opt, err);
        free(copy);
        return f;
    }
    char *index = NULL, *single = NULL;
    bool dcp;
    if (classify_dir(path, &index, &dcp, &single, err)) return NULL;
    ckpt_file *f;
    if (single) {
        char *p = join(path, single);
        f = p ? ckpt_open(p, opt, err) : NULL;
        if (!f && p) prefix_err(err, single);
        free(p);
    } else {
        f = open_composite(path, index, opt, err);
    }
    free(index);
    free(single);
    return f;
}

size_t ckpt_part_count(const ckpt_file *f)
{
    if (!f) return 0;
    if (f->fmt != &ck_format_multi) return 1;
    return MULTI(f)->nparts;
}

const char *ckpt_part_path(const ckpt_file *f, size_t i)
{
    if (!f || f->fmt != &ck_format_multi || i >= MULTI(f)->nparts) return NULL;
    return MULTI(f)->parts[i].path;
}

int ckpt_verify_part(const ckpt_file *f, size_t i, void (*note)(void *ctx, const char *line),
                     void (*progress)(void *ctx, uint64_t done, uint64_t total), void *ctx,
                     ckpt_error *err)
{
    if (!f) return ck_fail(err, CKPT_E_ARG, -1, "null argument");
    if (i >= ckpt_part_count(f))
        return ck_fail(err, CKPT_E_ARG, -1, "no part %zu (the checkpoint has %zu)", i,
                       ckpt_part_count(f));
    if (f->fmt != &ck_format_multi) return ckpt_verify_progress(f, note, progress, ctx, err);
    const ck_multi *m = MULTI(f);
    part_progress pp = {progress, ctx, 0, m->parts[i].size};
    if (verify_one_part(f, i, note, &pp, ctx, err)) return -1;
    if (progress) progress(ctx, pp.total, pp.total);
    return 0;
}

size_t ckpt_tensor_part(const ckpt_file *f, const ckpt_tensor *t)
{
    if (!f || !t || f->fmt != &ck_format_multi || t->storage >= f->nstorages) return 0;
    return MULTI(f)->links[t->storage].part;
}
