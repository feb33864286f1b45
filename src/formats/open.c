/*
 * open.c - layer 4 (formats): the registry of containers, opening and
 * closing a file.  ckpt_open*() reads the first bytes, asks each container
 * in turn to bid, lets the winner index the file and run its pickles, then
 * has torch/ name the tensors and check their extents.
 */
#include "formats.h"

#include <stdlib.h>
#include <string.h>

/* The registry: asked in this order; the first bid wins. */
static const ck_format *const registry[] = {
    &ck_format_zip,
    &ck_format_tar,
    &ck_format_safetensors, /* before pickle: its first byte may look like an opcode */
    &ck_format_mobile,      /* before pickle: "PTMF" at byte 4, after a root offset */
    &ck_format_pickle,
};

/* The container that claims the first bytes, or NULL with err set. */
static const ck_format *bid(const uint8_t *head, size_t n, uint64_t size, ckpt_error *err)
{
    if (n == 0 || size == 0) {
        ck_fail(err, CKPT_E_FORMAT, 0, "file is empty");
        return NULL;
    }
    for (size_t i = 0; i < sizeof registry / sizeof registry[0]; i++)
        if (registry[i]->bid(head, n, size)) return registry[i];
    ck_fail(err, CKPT_E_FORMAT, 0,
            "not a checkpoint: starts with neither a ZIP, a TAR, a safetensors nor a "
            "pickle header (first byte 0x%02x)",
            head[0]);
    return NULL;
}

int ckpt_sniff(const void *head, size_t n, uint64_t size, ckpt_error *err)
{
    ckpt_error local;
    if (!err) err = &local;
    if (!head && n) return ck_fail(err, CKPT_E_ARG, -1, "no data given");
    if (n > size) n = (size_t)size;
    if (n > 512) n = 512; /* what ckpt_open() shows the containers */
    return bid(head, n, size, err) ? 0 : -1;
}

/* Options, limits and torch's hooks: 0, or -1 with f closed. */
static int setup(ckpt_file *f, const ckpt_options *opt, ckpt_error *err)
{
    err->code = CKPT_OK;
    err->offset = -1;
    err->message[0] = 0;
    if (ck_take_options(&f->opt, opt, err)) {
        ckpt_close(f);
        return -1;
    }
    if (f->opt.max_rank > 64) f->opt.max_rank = 64;
    if (f->opt.max_depth > 2048) f->opt.max_depth = 2048; /* the walk recurses: C stack */
    ck_torch_init(f);
    ck_mem_allow(&f->arena, f->opt.max_memory, f->src.size, 0);
    if (f->opt.key) {
        size_t kn = f->opt.key_len ? f->opt.key_len : strlen(f->opt.key);
        f->key_copy = ck_strndup(&f->arena, f->opt.key, kn);
        f->opt.key = f->key_copy;
        f->opt.key_len = kn;
        if (!f->key_copy) {
            ck_fail(err, CKPT_E_NOMEM, -1, "out of memory");
            ckpt_close(f);
            return -1;
        }
    }
    f->version = "";
    f->root_name = "";
    return 0;
}

static ckpt_file *finish_open(ckpt_file *f, const ckpt_options *opt, ckpt_error *err)
{
    ckpt_error local;
    if (!err) err = &local;
    if (setup(f, opt, err)) return NULL;
    uint8_t head[512];
    size_t hn = f->src.size < sizeof head ? (size_t)f->src.size : sizeof head;
    int r;
    if (f->src.size == 0) {
        r = ck_fail(err, CKPT_E_FORMAT, 0, "file is empty");
    } else if (ck_read(&f->src, 0, head, hn, "file header", err)) {
        r = -1;
    } else if ((f->fmt = bid(head, hn, f->src.size, err)) != NULL) {
        f->storage_read = f->fmt->storage_read;
        r = f->fmt->open(f, err);
    } else {
        r = -1;
    }
    if (f->opt.scan_all_pickles && f->fmt && (r == 0 || err->code != CKPT_E_NOMEM)) {
        ckpt_error e2; /* a scan: the pickles inside bytes values, even when the open failed */
        if (ck_scan_nested(f, &e2) != 0 && r == 0) r = ck_fail(err, e2.code, -1, "%s", e2.message);
    }
    if (r == 0) r = ck_catalogue(f, err);
    if (r != 0) ck_mem_blame(&f->arena, err);
    if (r != 0 && f->fmt && f->fmt->blame) f->fmt->blame(f, err);
    if (r != 0) {
        ckpt_close(f);
        return NULL;
    }
    return f;
}

static ckpt_file *new_file(ckpt_error *err)
{
    ckpt_file *f = calloc(1, sizeof *f);
    if (!f)
        ck_fail(err, CKPT_E_NOMEM, -1, "out of memory");
    else
        f->src.fd = -1;
    return f;
}

ckpt_file *ck_file_new(const ckpt_options *opt, ckpt_error *err)
{
    ckpt_error local;
    if (!err) err = &local;
    ckpt_file *f = new_file(err);
    if (!f || setup(f, opt, err)) return NULL;
    return f;
}

ckpt_file *ck_open_child(ckpt_file *parent, ck_source *src, bool grow, ckpt_error *err)
{
    ckpt_options o = parent->opt;
    o.key = NULL;
    if (!grow) { /* opened again for a read: its globals were reported */
        o.on_global = NULL;
        o.on_global_ctx = NULL;
    }
    ckpt_file *f = new_file(err);
    if (!f) {
        ck_source_close(src);
        return NULL;
    }
    ck_arena_adopt(&f->arena, &parent->arena, grow);
    f->src = *src;
    return finish_open(f, &o, err);
}

ckpt_file *ckpt_open(const char *path, const ckpt_options *opt, ckpt_error *err)
{
    if (!path) {
        ck_fail(err, CKPT_E_ARG, -1, "no path given");
        return NULL;
    }
    ckpt_file *f = new_file(err);
    if (!f) return NULL;
    ckpt_options o;
    if (ck_source_open_path(&f->src, path, ck_take_options(&o, opt, NULL) == 0 && o.use_mmap,
                            err)) {
        free(f);
        return NULL;
    }
    return finish_open(f, opt, err);
}

ckpt_file *ckpt_open_memory(const void *data, size_t size, const ckpt_options *opt, ckpt_error *err)
{
    if (!data && size) {
        ck_fail(err, CKPT_E_ARG, -1, "no data given");
        return NULL;
    }
    ckpt_file *f = new_file(err);
    if (!f) return NULL;
    ck_source_memory(&f->src, data ? data : "", size);
    return finish_open(f, opt, err);
}

ckpt_file *ckpt_open_reader(const ckpt_reader *reader, const ckpt_options *opt, ckpt_error *err)
{
    if (!reader || !reader->read) {
        ck_fail(err, CKPT_E_ARG, -1, "no reader given");
        if (reader && reader->close) reader->close(reader->opaque);
        return NULL;
    }
    ckpt_file *f = new_file(err);
    if (!f) {
        if (reader->close) reader->close(reader->opaque);
        return NULL;
    }
    ck_source_reader(&f->src, reader);
    return finish_open(f, opt, err);
}

void ckpt_close(ckpt_file *f)
{
    if (!f) return;
    if (f->fmt && f->fmt->close) f->fmt->close(f);
    ck_source_close(&f->src);
    ck_map_free(&f->storage_keys);
    ck_name_index_free(&f->tensor_names);
    free(f->storages);
    ck_tensors_free(f);
    free(f->tpool);
    ck_unpickler_free(&f->pk);
    ck_arena_free(&f->arena);
    free(f);
}

int ckpt_storage_record_sized(const ckpt_file *f, size_t i, ckpt_record *out, size_t struct_size,
                              ckpt_error *err)
{
    ckpt_record rec;
    if (!f || !out || struct_size < sizeof(size_t))
        return ck_fail(err, CKPT_E_ARG, -1, "null argument");
    if (i >= f->nstorages)
        return ck_fail(err, CKPT_E_ARG, -1, "no storage %zu (the file has %zu)", i, f->nstorages);
    const ck_storage *s = &f->storages[i];
    if (!f->fmt || !f->fmt->record || !s->resolved)
        return ck_fail(err, CKPT_E_NOTFOUND, -1,
                       "storage '%s' is not a record of its own in a %s file", s->pub.key,
                       ckpt_format_name(f->format));
    memset(&rec, 0, sizeof rec);
    CK_TRY(f->fmt->record(f, s, &rec, err));
    rec.struct_size = struct_size < sizeof rec ? struct_size : sizeof rec;
    memcpy(out, &rec, rec.struct_size);
    return 0;
}

int ckpt_verify(const ckpt_file *f, void (*note)(void *ctx, const char *line), void *ctx,
                ckpt_error *err)
{
    return ckpt_verify_progress(f, note, NULL, ctx, err);
}

int ckpt_verify_progress(const ckpt_file *f, void (*note)(void *ctx, const char *line),
                         void (*progress)(void *ctx, uint64_t done, uint64_t total), void *ctx,
                         ckpt_error *err)
{
    if (!f) return ck_fail(err, CKPT_E_ARG, -1, "null argument");
    if (f->fmt && f->fmt->verify) return f->fmt->verify(f, note, progress, ctx, err);
    if (note) {
        if (f->format == CKPT_FORMAT_LEGACY)
            note(ctx, "legacy stream: no checksums; storage element counts and sizes checked");
        else if (f->format == CKPT_FORMAT_TAR)
            note(ctx, "tar: header checksums, storage counts and tensor extents checked; data has "
                      "no checksums");
        else
            note(ctx, "plain pickle: parsed to STOP; no checksums");
    }
    return 0;
}
