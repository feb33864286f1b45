/*
 * test_safetensors.c - the safetensors export of include/ckpt_export.h,
 * ckpt_storage_record() and ckpt_crc32(), through the public API only.
 *
 *     test_safetensors SAMPLE.pt TMPDIR
 *
 * Expected bytes come from elsewhere than the code under test: tensor bytes
 * from ckpt_tensor_read(), record CRCs from zlib's crc32() over the bytes
 * at the record's offset, read here with stdio.
 */
#include "ckpt_export.h"

#include <fcntl.h>
#include <unistd.h>
#include <zlib.h>

#include "../unit/harness.h"

typedef struct membuf {
    unsigned char *p;
    size_t len, cap;
    int fail_after; /* fail the call number fail_after (1-based), 0: never */
    int calls;
} membuf;

static int mem_write(void *ctx, const void *buf, size_t n)
{
    membuf *m = ctx;
    if (++m->calls == m->fail_after) return -1;
    if (m->len + n > m->cap) {
        size_t cap = (m->len + n) * 2;
        unsigned char *p = realloc(m->p, cap);
        if (!p) return -1;
        m->p = p;
        m->cap = cap;
    }
    memcpy(m->p + m->len, buf, n);
    m->len += n;
    return 0;
}

static unsigned char *slurp(const char *path, size_t *len)
{
    FILE *fp = fopen(path, "rb");
    unsigned char *p = NULL;
    long n;
    *len = 0;
    if (!fp) return NULL;
    if (fseek(fp, 0, SEEK_END) == 0 && (n = ftell(fp)) >= 0 && fseek(fp, 0, SEEK_SET) == 0) {
        p = malloc((size_t)n + 1);
        if (p && fread(p, 1, (size_t)n, fp) == (size_t)n) *len = (size_t)n;
    }
    fclose(fp);
    return p;
}

static int spit(const char *path, const void *p, size_t n)
{
    FILE *fp = fopen(path, "wb");
    int ok = fp && fwrite(p, 1, n, fp) == n;
    if (fp && fclose(fp) != 0) ok = 0;
    return ok ? 0 : -1;
}

static int host_little(void)
{
    const uint16_t one = 1;
    unsigned char b;
    memcpy(&b, &one, 1);
    return b == 1;
}

typedef struct seen {
    uint64_t first_done, first_total, last_done, last_total;
    int calls;
    char warning[1024];
    int warnings;
} seen;

static void on_progress(void *ctx, uint64_t done, uint64_t total)
{
    seen *s = ctx;
    if (s->calls++ == 0) {
        s->first_done = done;
        s->first_total = total;
    }
    s->last_done = done;
    s->last_total = total;
}

static void on_warning(void *ctx, const char *line)
{
    seen *s = ctx;
    s->warnings++;
    snprintf(s->warning, sizeof s->warning, "%s", line);
}

/* A minimal look at a safetensors file: its header length and, for `name`,
 * the dtype and data_offsets as written.  0 when found. */
static int find_entry(const unsigned char *file, size_t len, const char *name, char *dtype,
                      size_t dcap, unsigned long long *b, unsigned long long *e, size_t *hlen)
{
    char key[512], *json, *at, *end;
    uint64_t n = 0;
    int i, k;
    if (len < 8) return -1;
    for (i = 7; i >= 0; i--) n = n << 8 | file[i];
    if (n > len - 8) return -1;
    *hlen = (size_t)(8 + n);
    json = malloc((size_t)n + 1);
    if (!json) return -1;
    memcpy(json, file + 8, (size_t)n);
    json[n] = '\0';
    snprintf(key, sizeof key, "\"%s\":{\"dtype\":\"", name);
    at = strstr(json, key);
    if (!at) {
        free(json);
        return -1;
    }
    at += strlen(key);
    end = strchr(at, '"');
    k = end ? (int)(end - at) : -1;
    if (k < 0 || (size_t)k >= dcap) {
        free(json);
        return -1;
    }
    memcpy(dtype, at, (size_t)k);
    dtype[k] = '\0';
    at = strstr(at, "\"data_offsets\":[");
    k = at ? sscanf(at, "\"data_offsets\":[%llu,%llu]", b, e) : 0;
    free(json);
    return k == 2 ? 0 : -1;
}

/* Every tensor of f is in the file with the bytes ckpt_tensor_read() gives. */
static void check_file(const ckpt_file *f, const unsigned char *file, size_t len)
{
    size_t i, hlen = 0, total = 0;
    for (i = 0; i < ckpt_tensor_count(f); i++) {
        const ckpt_tensor *t = ckpt_tensor_at(f, i);
        char dtype[16];
        unsigned long long b = 0, e = 0;
        unsigned char *want = malloc(t->nbytes ? (size_t)t->nbytes : 1);
        ckpt_error err;
        int found = find_entry(file, len, t->name, dtype, sizeof dtype, &b, &e, &hlen);
        CHECK_EQ_INT(found, 0);
        if (found != 0 || !want) {
            free(want);
            continue;
        }
        CHECK_STR(dtype, ckpt_safetensors_dtype(t->dtype));
        CHECK_EQ_U64(e - b, t->nbytes);
        CHECK(hlen + e <= len);
        CHECK_EQ_INT(ckpt_tensor_read(f, t, want, (size_t)t->nbytes, &err), 0);
        if (host_little() && hlen + e <= len)
            CHECK(memcmp(file + hlen + b, want, (size_t)t->nbytes) == 0);
        total += (size_t)t->nbytes;
        free(want);
    }
    CHECK_EQ_U64(len, hlen + total);
}

int main(int argc, char **argv)
{
    ckpt_error err;
    ckpt_file *f;
    ckpt_info info;
    ckpt_export_options o;
    ckpt_safetensors_plan *plan;
    membuf m;
    seen s;
    unsigned char *sample, *out, *out2;
    size_t slen, olen, olen2, i;
    char path[4096], path2[4096], bad[4096];
    int origin = -1, fd, src;

    if (argc != 3) {
        fprintf(stderr, "usage: test_safetensors SAMPLE.pt TMPDIR\n");
        return 2;
    }
    sample = slurp(argv[1], &slen);
    CHECK(sample != NULL && slen > 0);
    if (!sample) return ut_summary();

    SECTION("options and dtypes");
    memset(&o, 0xAB, sizeof o);
    ckpt_export_options_init(&o);
    CHECK_EQ_U64(o.struct_size, sizeof o);
    CHECK_EQ_INT(o.verify, 1);
    CHECK_EQ_INT(o.metadata, 1);
    CHECK_EQ_INT(o.src_fd, -1);
    CHECK_EQ_INT(o.skip_unsupported, 0);
    CHECK(o.filter == NULL && o.progress == NULL && o.warning == NULL && o.error_origin == NULL);
    CHECK_STR(ckpt_safetensors_dtype(CKPT_FLOAT32), "F32");
    CHECK_STR(ckpt_safetensors_dtype(CKPT_BFLOAT16), "BF16");
    CHECK_STR(ckpt_safetensors_dtype(CKPT_FLOAT8_E4M3FN), "F8_E4M3");
    CHECK_STR(ckpt_safetensors_dtype(CKPT_COMPLEX64), "C64");
    CHECK(ckpt_safetensors_dtype(CKPT_COMPLEX128) == NULL);
    CHECK(ckpt_safetensors_dtype(CKPT_FLOAT8_E8M0FNU) == NULL);

    SECTION("ckpt_crc32 equals zlib's");
    {
        size_t sizes[] = {0, 1, 15, 63, 255, 256, 257, 1000, 4096, 65537, 1u << 20};
        unsigned char *buf = malloc(1u << 20);
        uint32_t x = 12345;
        CHECK(buf != NULL);
        for (i = 0; buf && i < (1u << 20); i++) {
            x = x * 1103515245u + 12345u;
            buf[i] = (unsigned char)(x >> 16);
        }
        for (i = 0; buf && i < sizeof sizes / sizeof sizes[0]; i++) {
            uLong z =
                crc32(crc32(0L, Z_NULL, 0), buf + 3, (uInt)(sizes[i] - (sizes[i] > 3 ? 3 : 0)));
            CHECK_EQ_U64(ckpt_crc32(0, buf + 3, sizes[i] - (sizes[i] > 3 ? 3 : 0)), z);
        }
        if (buf) /* continued: in two pieces */
            CHECK_EQ_U64(ckpt_crc32(ckpt_crc32(0, buf, 1000), buf + 1000, 70000),
                         crc32(crc32(0L, Z_NULL, 0), buf, 71000));
        free(buf);
    }

    f = ckpt_open(argv[1], NULL, &err);
    CHECK(f != NULL);
    if (!f) return ut_summary();
    ckpt_get_info(f, &info);

    SECTION("ckpt_storage_record against the file's bytes");
    CHECK(ckpt_storage_count(f) > 0);
    for (i = 0; i < ckpt_storage_count(f); i++) {
        const ckpt_storage *st = ckpt_storage_at(f, i);
        ckpt_record rec;
        char want[256];
        memset(&rec, 0, sizeof rec);
        CHECK_EQ_INT(ckpt_storage_record(f, i, &rec, &err), 0);
        CHECK_EQ_U64(rec.struct_size, sizeof rec);
        snprintf(want, sizeof want, "%s/data/%s", info.root, st->key);
        CHECK_STR(rec.name, want);
        CHECK_EQ_INT(rec.method, 0);
        CHECK_EQ_U64(rec.data_offset, (uint64_t)st->file_offset);
        CHECK_EQ_U64(rec.compressed_size, rec.size);
        CHECK(rec.size >= st->nbytes);
        CHECK(rec.data_offset + rec.size <= slen);
        if (rec.data_offset + rec.size <= slen) {
            uLong z = crc32(crc32(0L, Z_NULL, 0), sample + rec.data_offset, (uInt)rec.size);
            CHECK_EQ_U64(rec.crc32, z);
            CHECK_EQ_INT(rec.has_crc, z != 0);
        }
    }
    {
        ckpt_record rec;
        CHECK_EQ_INT(ckpt_storage_record(f, ckpt_storage_count(f), &rec, &err), -1);
        CHECK_EQ_INT(err.code, CKPT_E_ARG);
        /* an older caller's smaller struct: only its bytes are written */
        memset(&rec, 0x5A, sizeof rec);
        CHECK_EQ_INT(ckpt_storage_record_sized(f, 0, &rec, offsetof(ckpt_record, method), &err), 0);
        CHECK_EQ_U64(rec.struct_size, offsetof(ckpt_record, method));
        CHECK(rec.name != NULL);
        CHECK_EQ_U64((unsigned)rec.method, 0x5A5A5A5Au);
    }

    SECTION("into a file, NULL options");
    snprintf(path, sizeof path, "%s/st_sample.safetensors", argv[2]);
    CHECK_EQ_INT(ckpt_export_safetensors(f, path, NULL, &err), 0);
    out = slurp(path, &olen);
    CHECK(out != NULL);
    if (out) {
        check_file(f, out, olen);
        CHECK(olen > 8 &&
              strstr((char *)out + 8, "\"__metadata__\":{\"format\":\"pt\","
                                      "\"ckpt.source_format\":\"zip\",\"epoch\":\"7\"") != NULL);
        CHECK(strstr((char *)out + 8, "\"config.lr\":\"0.001\"") != NULL);
    }

    SECTION("through a write callback: the same bytes; progress and warnings");
    memset(&m, 0, sizeof m);
    memset(&s, 0, sizeof s);
    ckpt_export_options_init(&o);
    o.progress = on_progress;
    o.warning = on_warning;
    o.ctx = &s;
    CHECK_EQ_INT(ckpt_export_safetensors_to(f, mem_write, &m, &o, &err), 0);
    CHECK(out && m.len == olen && memcmp(m.p, out, olen) == 0);
    CHECK(s.calls >= 2);
    CHECK_EQ_U64(s.first_done, 0);
    CHECK_EQ_U64(s.first_total, info.total_bytes);
    CHECK_EQ_U64(s.last_done, info.total_bytes);
    CHECK_EQ_INT(s.warnings, 0);

    SECTION("the plan: header, entries, size");
    plan = ckpt_export_safetensors_plan(f, NULL, &err);
    CHECK(plan != NULL);
    if (plan && out) {
        size_t hl = 0;
        const unsigned char *h = ckpt_safetensors_header(plan, &hl);
        CHECK(hl % 8 == 0 && hl <= olen && memcmp(h, out, hl) == 0);
        CHECK_EQ_U64(ckpt_safetensors_size(plan), olen);
        CHECK_EQ_U64(ckpt_safetensors_count(plan), ckpt_tensor_count(f));
        for (i = 0; i < ckpt_safetensors_count(plan); i++) {
            const ckpt_safetensors_entry *e = ckpt_safetensors_at(plan, i);
            CHECK(e->tensor == ckpt_tensor_at(f, i));
            CHECK_STR(e->name, ckpt_tensor_at(f, i)->name);
            CHECK_EQ_U64(e->end - e->begin, e->tensor->nbytes);
            if (i > 0) CHECK_EQ_U64(e->begin, ckpt_safetensors_at(plan, i - 1)->end);
        }
        CHECK(ckpt_safetensors_at(plan, i) == NULL);
        /* written once, through the plan */
        m.len = 0;
        m.calls = 0;
        CHECK_EQ_INT(ckpt_safetensors_write_to(plan, mem_write, &m, &err), 0);
        CHECK(m.len == olen && memcmp(m.p, out, olen) == 0);
        CHECK_EQ_INT(ckpt_safetensors_write_to(plan, mem_write, &m, &err), -1);
        CHECK_EQ_INT(err.code, CKPT_E_ARG);
    }
    ckpt_safetensors_free(plan);

    SECTION("metadata off, a filter, a filter matching nothing");
    ckpt_export_options_init(&o);
    o.metadata = 0;
    o.filter = "model.fc1.*";
    plan = ckpt_export_safetensors_plan(f, &o, &err);
    CHECK(plan != NULL);
    if (plan) {
        size_t hl = 0;
        const char *h = ckpt_safetensors_header(plan, &hl);
        CHECK(hl > 8 && strstr(h + 8, "{\"__metadata__\":{\"format\":\"pt\",\"ckpt.source_format\":"
                                      "\"zip\"},\"model.fc1.weight\"") != NULL);
        CHECK_EQ_U64(ckpt_safetensors_count(plan), 2);
        CHECK_EQ_U64(ckpt_safetensors_size(plan), hl + 128 + 32);
    }
    ckpt_safetensors_free(plan);
    memset(&s, 0, sizeof s);
    o.filter = "nothing*";
    o.warning = on_warning;
    o.ctx = &s;
    m.len = 0;
    m.calls = 0;
    CHECK_EQ_INT(ckpt_export_safetensors_to(f, mem_write, &m, &o, &err), 0);
    CHECK_EQ_INT(s.warnings, 1);
    CHECK_CONTAINS(s.warning, "'nothing*' matches no tensor");

    SECTION("a failing write callback: CKPT_E_IO, from the output");
    ckpt_export_options_init(&o);
    o.error_origin = &origin;
    m.len = 0;
    m.calls = 0;
    m.fail_after = 2;
    CHECK_EQ_INT(ckpt_export_safetensors_to(f, mem_write, &m, &o, &err), -1);
    CHECK_EQ_INT(err.code, CKPT_E_IO);
    CHECK_EQ_INT(origin, CKPT_EXPORT_FROM_OUTPUT);
    CHECK_CONTAINS(err.message, "write callback failed");
    m.fail_after = 0;

    SECTION("bad arguments");
    memset(&o, 0, sizeof o); /* struct_size 0: not from ckpt_export_options_init */
    CHECK_EQ_INT(ckpt_export_safetensors_to(f, mem_write, &m, &o, &err), -1);
    CHECK_EQ_INT(err.code, CKPT_E_ARG);
    CHECK_EQ_INT(ckpt_export_safetensors_to(f, NULL, &m, NULL, &err), -1);
    CHECK_EQ_INT(err.code, CKPT_E_ARG);
    snprintf(path2, sizeof path2, "%s/no/such/dir/x.safetensors", argv[2]);
    CHECK_EQ_INT(ckpt_export_safetensors(f, path2, NULL, &err), -1);
    CHECK_EQ_INT(err.code, CKPT_E_IO);
    CHECK_CONTAINS(err.message, "No such file");

    SECTION("into a descriptor, copying from the source's descriptor");
    snprintf(path2, sizeof path2, "%s/st_fd.safetensors", argv[2]);
    src = open(argv[1], O_RDONLY);
    fd = open(path2, O_RDWR | O_CREAT | O_TRUNC, 0644);
    CHECK(src >= 0 && fd >= 0);
    ckpt_export_options_init(&o);
    o.src_fd = src;
    CHECK_EQ_INT(ckpt_export_safetensors_fd(f, fd, 1, &o, &err), 0);
    close(fd);
    out2 = slurp(path2, &olen2);
    CHECK(out && out2 && olen2 == olen && memcmp(out, out2, olen) == 0);
    free(out2);
    /* not seekable: write() and sendfile from where fd stands */
    fd = open(path2, O_WRONLY | O_TRUNC);
    CHECK(fd >= 0 && write(fd, "xyz", 3) == 3);
    CHECK_EQ_INT(ckpt_export_safetensors_fd(f, fd, 0, &o, &err), 0);
    close(fd);
    out2 = slurp(path2, &olen2);
    CHECK(out && out2 && olen2 == olen + 3 && memcmp(out, out2 + 3, olen) == 0);
    free(out2);
    remove(path2);
    /* a callback, copying from the source's descriptor */
    m.len = 0;
    m.calls = 0;
    CHECK_EQ_INT(ckpt_export_safetensors_to(f, mem_write, &m, &o, &err), 0);
    CHECK(out && m.len == olen && memcmp(m.p, out, olen) == 0);
    if (src >= 0) close(src);
    ckpt_close(f);

    SECTION("a damaged stored record");
    {
        const ckpt_tensor *t;
        unsigned char *copy = malloc(slen);
        uint64_t at = 0;
        CHECK(copy != NULL);
        if (!copy) return ut_summary();
        memcpy(copy, sample, slen);
        f = ckpt_open_memory(copy, slen, NULL, &err);
        t = f ? ckpt_find(f, "model.fc2.weight") : NULL;
        CHECK(t != NULL && t->file_offset > 0);
        if (t) {
            at = (uint64_t)t->file_offset + 5;
            copy[at] ^= 0x10; /* inside the tensor's record: the index is intact */
        }
        snprintf(bad, sizeof bad, "%s/st_bad.pt", argv[2]);
        CHECK_EQ_INT(spit(bad, copy, slen), 0);

        /* through the reader: ckpt_verify()'s pass names the record */
        ckpt_export_options_init(&o);
        o.error_origin = &origin;
        m.len = 0;
        m.calls = 0;
        CHECK_EQ_INT(ckpt_export_safetensors_to(f, mem_write, &m, &o, &err), -1);
        CHECK_EQ_INT(err.code, CKPT_E_FORMAT);
        CHECK_CONTAINS(err.message, "crc mismatch");
        CHECK_CONTAINS(err.message, "the file is damaged");
        CHECK_EQ_U64(m.len, 0); /* refused before a byte was written */
        o.verify = 0;
        CHECK_EQ_INT(ckpt_export_safetensors_to(f, mem_write, &m, &o, &err), 0);
        CHECK(out && m.len == olen);
        if (out && m.len == olen) {
            size_t diff = 0, j;
            for (j = 0; j < olen; j++) diff += m.p[j] != out[j];
            CHECK_EQ_U64(diff, 1); /* converted as it is */
        }
        ckpt_close(f);

        /* with the source's descriptor: the copy's check names the tensor */
        f = ckpt_open(bad, NULL, &err);
        src = open(bad, O_RDONLY);
        CHECK(f != NULL && src >= 0);
        snprintf(path2, sizeof path2, "%s/st_bad.safetensors", argv[2]);
        ckpt_export_options_init(&o);
        o.src_fd = src;
        o.error_origin = &origin;
        origin = -1;
        CHECK_EQ_INT(ckpt_export_safetensors(f, path2, &o, &err), -1);
        CHECK_EQ_INT(err.code, CKPT_E_FORMAT);
        CHECK_EQ_INT(origin, CKPT_EXPORT_FROM_EXPORT);
        CHECK_CONTAINS(err.message, "crc mismatch for tensor 'model.fc2.weight' in record");
        CHECK(access(path2, F_OK) != 0); /* no partial file */
        o.verify = 0;
        CHECK_EQ_INT(ckpt_export_safetensors(f, path2, &o, &err), 0);
        out2 = slurp(path2, &olen2);
        CHECK(out2 && out && olen2 == olen && memcmp(out2, m.p, olen) == 0);
        free(out2);
        remove(path2);
        remove(bad);
        if (src >= 0) close(src);
        ckpt_close(f);
        free(copy);
    }

    remove(path);
    free(out);
    free(m.p);
    free(sample);
    return ut_summary();
}
