/*
 * test_limits.c - every limit in ckpt_options holds, at its default and when
 * lowered: a file just inside a limit opens, one just beyond gets
 * CKPT_E_LIMIT (never a crash, never a different code).  Hand-made bytes:
 * plain pickles and legacy streams built here.
 */
#include "ckpt.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

static int failures;

#define CHECK(cond, ...)                                                                           \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            failures++;                                                                            \
            printf("FAIL %s:%d: ", __FILE__, __LINE__);                                            \
            printf(__VA_ARGS__);                                                                   \
            printf("\n");                                                                          \
        }                                                                                          \
    } while (0)

/* ---- a byte buffer --------------------------------------------------- */

typedef struct buf {
    uint8_t *p;
    size_t n, cap;
} buf;

static void put(buf *b, const void *s, size_t n)
{
    if (b->cap - b->n < n) {
        size_t c = b->cap ? b->cap : 256;
        while (c - b->n < n) c *= 2;
        b->p = realloc(b->p, c);
        if (!b->p) abort();
        b->cap = c;
    }
    memcpy(b->p + b->n, s, n);
    b->n += n;
}
static void puts_(buf *b, const char *s)
{
    put(b, s, strlen(s));
}
#define PUTL(b, lit) put(b, lit, sizeof lit - 1) /* a literal that may hold NUL bytes */
static void putc_(buf *b, int c)
{
    uint8_t x = (uint8_t)c;
    put(b, &x, 1);
}
static void rep(buf *b, const char *s, int n)
{
    for (int i = 0; i < n; i++) puts_(b, s);
}
static void uni(buf *b, const char *s)
{ /* BINUNICODE */
    uint32_t n = (uint32_t)strlen(s);
    uint8_t h[5] = {'X', (uint8_t)n, (uint8_t)(n >> 8), (uint8_t)(n >> 16), (uint8_t)(n >> 24)};
    put(b, h, 5);
    put(b, s, n);
}
static void bint(buf *b, int v)
{ /* BININT1 / BININT2 */
    if (v < 256) {
        putc_(b, 'K');
        putc_(b, v);
    } else {
        putc_(b, 'M');
        putc_(b, v & 255);
        putc_(b, v >> 8);
    }
}

/* ---- running ----------------------------------------------------------- */

/* Open, read every tensor, write JSON: the first error's code, or CKPT_OK. */
static int sink(void *ctx, const char *s, size_t n)
{
    (void)ctx, (void)s, (void)n;
    return 0;
}

static ckpt_code run(const buf *b, const ckpt_options *opt, ckpt_error *err, size_t *ntensors)
{
    memset(err, 0, sizeof *err);
    ckpt_file *f = ckpt_open_memory(b->p, b->n, opt, err);
    if (ntensors) *ntensors = 0;
    if (!f) {
        CHECK(err->code != CKPT_OK && err->message[0], "failure without code or message");
        return err->code;
    }
    if (ntensors) *ntensors = ckpt_tensor_count(f);
    ckpt_code code = CKPT_OK;
    for (size_t i = 0; i < ckpt_tensor_count(f) && code == CKPT_OK; i++) {
        const ckpt_tensor *t = ckpt_tensor_at(f, i);
        void *p = malloc(t->nbytes ? (size_t)t->nbytes : 1);
        if (ckpt_tensor_read(f, t, p, (size_t)t->nbytes, err) != 0) code = err->code;
        free(p);
    }
    if (code == CKPT_OK && ckpt_value_to_json(f, NULL, 0, sink, NULL, err) != 0) code = err->code;
    ckpt_close(f);
    return code;
}

static void expect(const char *what, const buf *b, const ckpt_options *opt, ckpt_code want,
                   const char *sub)
{
    ckpt_error err;
    ckpt_code got = run(b, opt, &err, NULL);
    CHECK(got == want, "%s: expected %s, got %s: %s", what, ckpt_code_name(want),
          ckpt_code_name(got), got ? err.message : "");
    if (got == want && sub)
        CHECK(strstr(err.message, sub) != NULL, "%s: message '%s' lacks '%s'", what, err.message,
              sub);
}

/* ---- files ------------------------------------------------------------- */

static const char LEGACY_PREFIX[] = "\x80\x02\x8a\x0al\xfc\x9c\x46\xf9 "
                                    "j\xa8P\x19.\x80\x02M\xe9\x03.\x80\x02}q\x00(X\x10\x00\x00\x00"
                                    "protocol_versionq\x01M\xe9\x03X\x0d\x00\x00\x00little_"
                                    "endianq\x02\x88X\x0a\x00\x00\x00type_sizesq\x03"
                                    "}q\x04("
                                    "X\x05\x00\x00\x00shortq\x05K\x02X\x03\x00\x00\x00intq\x06K\x04"
                                    "X\x04\x00\x00\x00longq\x07K\x04uu.";

/* A legacy stream: `ntensors` float tensors "t0".. of rank `rank` (all
 * dims 1 but the last, `numel`), each over its own storage. */
static void legacy(buf *b, int ntensors, int rank, int numel)
{
    put(b, LEGACY_PREFIX, sizeof LEGACY_PREFIX - 1);
    puts_(b, "\x80\x02}(");
    for (int k = 0; k < ntensors; k++) {
        char key[16];
        snprintf(key, sizeof key, "t%d", k);
        uni(b, key);
        puts_(b, "ctorch._utils\n_rebuild_tensor_v2\n((");
        uni(b, "storage");
        puts_(b, "ctorch\nFloatStorage\n");
        snprintf(key, sizeof key, "%d", k);
        uni(b, key);
        uni(b, "cpu");
        bint(b, numel);
        PUTL(b, "NtQK\x00(");
        for (int d = 0; d < rank; d++) bint(b, d == rank - 1 ? numel : 1);
        puts_(b, "t(");
        for (int d = 0; d < rank; d++) bint(b, d == rank - 1 ? 1 : numel);
        puts_(b, "t\x89}tR");
    }
    puts_(b, "u.\x80\x02](");
    for (int k = 0; k < ntensors; k++) {
        char key[16];
        snprintf(key, sizeof key, "%d", k);
        uni(b, key);
    }
    puts_(b, "e.");
    for (int k = 0; k < ntensors; k++) {
        uint8_t cnt[8] = {(uint8_t)numel, (uint8_t)(numel >> 8)};
        put(b, cnt, 8);
        for (int i = 0; i < numel; i++) put(b, "\0\0\x80\x3f", 4);
    }
}

/* ---- a TAR with many tiny pickles, read through a counting reader ------ */

static void tar_header(buf *b, const char *name, size_t size)
{
    uint8_t h[512];
    memset(h, 0, sizeof h);
    snprintf((char *)h, 100, "%s", name);
    snprintf((char *)h + 100, 8, "%07o", 0644);
    snprintf((char *)h + 108, 8, "%07o", 0);
    snprintf((char *)h + 116, 8, "%07o", 0);
    snprintf((char *)h + 124, 12, "%011zo", size);
    snprintf((char *)h + 136, 12, "%011o", 0);
    h[156] = '0';
    memcpy(h + 257, "ustar", 6);
    memcpy(h + 263, "00", 2);
    memset(h + 148, ' ', 8);
    unsigned sum = 0;
    for (int i = 0; i < 512; i++) sum += h[i];
    snprintf((char *)h + 148, 8, "%06o", sum);
    h[155] = ' ';
    put(b, h, 512);
}

static void tar_member(buf *b, const char *name, const buf *m)
{
    static const uint8_t zero[512];
    tar_header(b, name, m->n);
    put(b, m->p, m->n);
    put(b, zero, (512 - m->n % 512) % 512);
}

typedef struct counting {
    const buf *b;
    uint64_t bytes;
} counting;

static int counting_read(void *opaque, uint64_t off, void *dst, size_t n)
{
    counting *c = opaque;
    if (off > c->b->n || n > c->b->n - off) return -1;
    memcpy(dst, c->b->p + off, n);
    c->bytes += n;
    return 0;
}

/* 20000 empty storages: 20001 pickles in one member.  Reading them through
 * a reader must cost about the member's size, not 20000 x a big window. */
static void linear_reads(void)
{
    buf st = {0}, te = {0}, pk = {0}, si = {0}, tar = {0};
    int n = 20000;
    PUTL(&st, "\x80\x02M");
    putc_(&st, n & 255);
    putc_(&st, n >> 8);
    puts_(&st, ".");
    for (int k = 0; k < n; k++) {
        PUTL(&st, "\x80\x02(M");
        putc_(&st, k & 255);
        putc_(&st, k >> 8);
        uni(&st, "cpu");
        puts_(&st, "ctorch\nFloatStorage\nt.");
        put(&st, "\0\0\0\0\0\0\0\0", 8);
    }
    puts_(&st, "\x80\x02].");
    PUTL(&te, "\x80\x02K\x00.");
    puts_(&pk, "\x80\x02}.");
    puts_(&si, "\x80\x02}.");
    tar_member(&tar, "sys_info", &si);
    tar_member(&tar, "storages", &st);
    tar_member(&tar, "tensors", &te);
    tar_member(&tar, "pickle", &pk);
    counting c = {&tar, 0};
    ckpt_reader rd = {counting_read, NULL, &c, tar.n};
    ckpt_error err;
    ckpt_file *f = ckpt_open_reader(&rd, NULL, &err);
    CHECK(f != NULL, "TAR of 20000 storages: %s", err.message);
    CHECK(ckpt_storage_count(f) == (size_t)n, "TAR of 20000 storages: %zu storages",
          ckpt_storage_count(f));
    CHECK(c.bytes < 64 * (uint64_t)tar.n, "TAR of %zu bytes read %llu bytes through the reader",
          tar.n, (unsigned long long)c.bytes);
    ckpt_close(f);
    free(st.p), free(te.p), free(pk.p), free(si.p), free(tar.p);
}

static void reset(buf *b)
{
    b->n = 0;
}

/* ---- max_tensor_bytes is checked on reading, not at open ---------------- */

static void bint4(buf *b, uint32_t v)
{ /* BININT */
    uint8_t h[5] = {'J', (uint8_t)v, (uint8_t)(v >> 8), (uint8_t)(v >> 16), (uint8_t)(v >> 24)};
    put(b, h, 5);
}

/* A file of `size` bytes: `head` then zeros (a sparse file, without disk). */
typedef struct virtual_file {
    const buf *head;
    uint64_t size;
} virtual_file;

static int virtual_read(void *opaque, uint64_t off, void *dst, size_t n)
{
    const virtual_file *v = opaque;
    if (off > v->size || n > v->size - off) return -1;
    size_t k = off < v->head->n ? (size_t)(v->head->n - off < n ? v->head->n - off : n) : 0;
    if (k) memcpy(dst, v->head->p + off, k);
    memset((uint8_t *)dst + k, 0, n - k);
    return 0;
}

/* A legacy stream with "small" (4 floats) and "big" (an int64 tensor of
 * 11 GiB whose bytes are the zeros after `b`); returns the file's size. */
static uint64_t legacy_big(buf *b)
{
    const uint32_t big = (uint32_t)((11ull << 30) / 8);
    put(b, LEGACY_PREFIX, sizeof LEGACY_PREFIX - 1);
    puts_(b, "\x80\x02}(");
    uni(b, "small");
    puts_(b, "ctorch._utils\n_rebuild_tensor_v2\n((");
    uni(b, "storage");
    puts_(b, "ctorch\nFloatStorage\n");
    uni(b, "0");
    uni(b, "cpu");
    PUTL(b, "K\x04NtQK\x00K\x04\x85K\x01\x85\x89}tR");
    uni(b, "big");
    puts_(b, "ctorch._utils\n_rebuild_tensor_v2\n((");
    uni(b, "storage");
    puts_(b, "ctorch\nLongStorage\n");
    uni(b, "1");
    uni(b, "cpu");
    bint4(b, big);
    PUTL(b, "NtQK\x00");
    bint4(b, big);
    PUTL(b, "\x85K\x01\x85\x89}tRu.\x80\x02](");
    uni(b, "0");
    uni(b, "1");
    puts_(b, "e.");
    put(b, "\x04\0\0\0\0\0\0\0", 8);
    for (int i = 0; i < 4; i++) PUTL(b, "\0\0\x80\x3f");
    uint8_t cnt[8] = {(uint8_t)big, (uint8_t)(big >> 8), (uint8_t)(big >> 16),
                      (uint8_t)(big >> 24)};
    put(b, cnt, 8);
    return b->n + (uint64_t)big * 8;
}

static void tensor_bytes_on_read(void)
{
    buf b = {0};
    ckpt_options opt;
    ckpt_error err;
    float small[4];
    uint8_t chunk[16];

    /* an 11 GiB tensor lists at the default limit; its neighbour reads; it
     * does not, and the error names the option */
    virtual_file v = {&b, legacy_big(&b)};
    ckpt_reader rd = {virtual_read, NULL, &v, v.size};
    memset(&err, 0, sizeof err);
    ckpt_file *f = ckpt_open_reader(&rd, NULL, &err);
    CHECK(f != NULL, "legacy file with an 11 GiB tensor: %s", err.message);
    if (f) {
        const ckpt_tensor *s = ckpt_find(f, "small"), *t = ckpt_find(f, "big");
        ckpt_info info;
        ckpt_get_info(f, &info);
        CHECK(ckpt_tensor_count(f) == 2 && s && t && t->nbytes == 11ull << 30 &&
                  info.total_bytes == (11ull << 30) + 16,
              "the 11 GiB tensor lists: %zu tensors", ckpt_tensor_count(f));
        CHECK(s && ckpt_tensor_read(f, s, small, sizeof small, &err) == 0 && small[3] == 1.0f,
              "the small tensor reads: %s", err.message);
        memset(&err, 0, sizeof err);
        CHECK(t && ckpt_tensor_read_range(f, t, 0, chunk, sizeof chunk, &err) != 0 &&
                  err.code == CKPT_E_LIMIT &&
                  strstr(err.message, "tensor size limit of 10 GiB (max_tensor_bytes)") &&
                  strstr(err.message, "'big'"),
              "reading 11 GiB at the default limit: %s %s", ckpt_code_name(err.code), err.message);
        memset(&err, 0, sizeof err);
        CHECK(t && ckpt_tensor_read(f, t, chunk, sizeof chunk, &err) != 0 &&
                  err.code == CKPT_E_LIMIT,
              "ckpt_tensor_read of 11 GiB: the limit, before the buffer: %s", err.message);
        ckpt_close(f);
    }
    /* raised, the same bytes read */
    ckpt_options_init(&opt);
    opt.max_tensor_bytes = 12ull << 30;
    f = ckpt_open_reader(&rd, &opt, &err);
    CHECK(f != NULL, "reopen: %s", err.message);
    if (f) {
        const ckpt_tensor *t = ckpt_find(f, "big");
        memset(chunk, 0xff, sizeof chunk);
        CHECK(
            t && ckpt_tensor_read_range(f, t, (11ull << 30) - 16, chunk, sizeof chunk, &err) == 0 &&
                chunk[0] == 0 && chunk[15] == 0,
            "reading 11 GiB under a 12 GiB limit: %s", err.message);
        ckpt_close(f);
    }

    /* lowered: 16 floats (64 bytes) under a 63-byte limit list, and fail to
     * read, through every read function */
    reset(&b);
    legacy(&b, 2, 1, 16);
    ckpt_options_init(&opt);
    opt.max_tensor_bytes = 63;
    memset(&err, 0, sizeof err);
    f = ckpt_open_memory(b.p, b.n, &opt, &err);
    CHECK(f != NULL && ckpt_tensor_count(f) == 2, "64-byte tensors under a 63-byte limit list: %s",
          err.message);
    if (f) {
        const ckpt_tensor *t = ckpt_tensor_at(f, 0);
        float all[16];
        memset(&err, 0, sizeof err);
        CHECK(ckpt_tensor_read(f, t, all, sizeof all, &err) != 0 && err.code == CKPT_E_LIMIT &&
                  strstr(err.message, "tensor 't0' of 64 bytes exceeds the tensor size limit of 63 "
                                      "bytes (max_tensor_bytes)"),
              "ckpt_tensor_read: %s", err.message);
        memset(&err, 0, sizeof err);
        CHECK(ckpt_tensor_read_range(f, t, 0, all, 4, &err) != 0 && err.code == CKPT_E_LIMIT,
              "ckpt_tensor_read_range of 4 bytes of it: %s", err.message);
        memset(&err, 0, sizeof err);
        CHECK(ckpt_tensor_read_range(f, t, 0, NULL, 0, &err) != 0 && err.code == CKPT_E_LIMIT,
              "a read of 0 bytes checks the limit: %s", err.message);
        memset(&err, 0, sizeof err);
        CHECK(ckpt_tensor_data(f, t, &err) == NULL && err.code == CKPT_E_LIMIT,
              "ckpt_tensor_data: %s %s", ckpt_code_name(err.code), err.message);
        ckpt_close(f);
    }
    opt.max_tensor_bytes = 1024;
    f = ckpt_open_memory(b.p, b.n, &opt, &err);
    CHECK(f != NULL, "reopen: %s", err.message);
    if (f) {
        const ckpt_tensor *t = ckpt_tensor_at(f, 1);
        float all[16];
        CHECK(ckpt_tensor_read(f, t, all, sizeof all, &err) == 0 && all[15] == 1.0f,
              "1 KiB limit: %s", err.message);
        CHECK(ckpt_tensor_data(f, t, &err) != NULL, "1 KiB limit, zero copy: %s", err.message);
        CHECK(ckpt_tensor_read_range(f, t, 0, NULL, 0, &err) == 0, "1 KiB limit, 0 bytes: %s",
              err.message);
        ckpt_close(f);
    }
    opt.max_tensor_bytes = 32;
    memset(&err, 0, sizeof err);
    f = ckpt_open_memory(b.p, b.n, &opt, &err);
    CHECK(f && ckpt_tensor_read_range(f, ckpt_tensor_at(f, 0), 0, chunk, 4, &err) != 0 &&
              strstr(err.message, "limit of 32 bytes (max_tensor_bytes)"),
          "32 bytes: %s", err.message);
    ckpt_close(f);
    free(b.p);
}

/* Peak resident memory of this process in KiB. */
static long peak_kib(void)
{
    struct rusage ru;
    return getrusage(RUSAGE_SELF, &ru) == 0 ? ru.ru_maxrss : -1;
}

/* max_memory: empty lists cost ~60 bytes of values per pickle byte, so a
 * crafted pickle under 16 MiB would need about 1 GB; the limit stops it. */
static void memory(void)
{
    buf b = {0};
    ckpt_options opt;
    ckpt_error err;
    /* 4,000 empty lists appended to one list */
    puts_(&b, "\x80\x02](");
    rep(&b, "]", 4000);
    puts_(&b, "e.");
    ckpt_options_init(&opt);
    opt.max_memory = 64u << 10;
    expect("max_memory 64 KiB, 4000 lists", &b, &opt, CKPT_E_LIMIT,
           "memory limit of 65536 bytes (max_memory)");
    opt.max_memory = 0; /* no limit */
    expect("max_memory 0 (none)", &b, &opt, CKPT_OK, NULL);
    opt.max_memory = 4u << 20;
    expect("max_memory 4 MiB", &b, &opt, CKPT_OK, NULL);
    /* a memo key far out charges its memo room (a bit a key when no GET
     * asks for it, a pointer a key otherwise): refused at its opcode */
    reset(&b);
    PUTL(&b, "\x80\x02Nr\x00\x00\x00\x01.");
    opt.max_memory = 1u << 20;
    opt.max_memo = 1u << 30;
    ckpt_code got = run(&b, &opt, &err, NULL);
    CHECK(got == CKPT_E_LIMIT && err.offset == 3 && strstr(err.message, "memory limit"),
          "memo array past max_memory: %s %s (byte %lld)", ckpt_code_name(got), err.message,
          (long long)err.offset);
    opt.max_memory = 64u << 20;
    expect("memo array within max_memory", &b, &opt, CKPT_OK, NULL);
    /* a GET of a far key: the first pass charges the room for it */
    reset(&b);
    PUTL(&b, "\x80\x02Nr\x00\x00\x00\x01j\x00\x00\x00\x01.");
    opt.max_memory = 1u << 20;
    got = run(&b, &opt, &err, NULL);
    CHECK(got == CKPT_E_LIMIT && err.offset == 8 && strstr(err.message, "memory limit"),
          "fetched memo key past max_memory: %s %s (byte %lld)", ckpt_code_name(got), err.message,
          (long long)err.offset);
    opt.max_memory = 64u << 20;
    expect("fetched memo key within max_memory", &b, &opt, CKPT_OK, NULL);

    /* the default holds for a 16 MiB crafted pickle: (]]]...]e repeated */
    reset(&b);
    puts_(&b, "\x80\x02]");
    while (b.n < (16u << 20) - 1100) {
        putc_(&b, '(');
        rep(&b, "]", 1000);
        putc_(&b, 'e');
    }
    puts_(&b, ".");
    long before = peak_kib();
    got = run(&b, NULL, &err, NULL);
    long after = peak_kib();
    CHECK(got == CKPT_E_LIMIT && strstr(err.message, "memory limit of 240 MiB") && err.offset > 0,
          "16 MiB of lists at the defaults: %s %s", ckpt_code_name(got), err.message);
#if !defined(__SANITIZE_ADDRESS__) && !defined(CKPT_SANITIZED)
    /* the library's own growth: this process held the input already */
    CHECK(after - before < (256l << 10), "16 MiB of lists grew the process by %ld KiB",
          after - before);
#else
    (void)before, (void)after; /* sanitizers add shadow memory and quarantine */
#endif
    free(b.p);
}

int main(void)
{
    ckpt_options opt;
    buf b = {0};

    /* defaults as documented */
    ckpt_options_init(&opt);
    CHECK(opt.max_pickle_bytes == CKPT_DEFAULT_MAX_PICKLE_BYTES, "default max_pickle_bytes");
    CHECK(opt.max_tensor_bytes == CKPT_DEFAULT_MAX_TENSOR_BYTES, "default max_tensor_bytes");
    CHECK(opt.max_ops == CKPT_DEFAULT_MAX_OPS, "default max_ops");
    CHECK(opt.max_stack == CKPT_DEFAULT_MAX_STACK, "default max_stack");
    CHECK(opt.max_depth == CKPT_DEFAULT_MAX_DEPTH && opt.max_depth >= 1000, "default max_depth");
    CHECK(opt.max_memo == CKPT_DEFAULT_MAX_MEMO, "default max_memo");
    CHECK(opt.max_expansion == CKPT_DEFAULT_MAX_EXPANSION, "default max_expansion");
    CHECK(opt.max_entries == CKPT_DEFAULT_MAX_ENTRIES, "default max_entries");
    CHECK(opt.max_rank == CKPT_DEFAULT_MAX_RANK && opt.max_rank == 64, "default max_rank");
    CHECK(opt.max_memory == CKPT_DEFAULT_MAX_MEMORY &&
              opt.max_memory <= (256ull << 20) - (8ull << 20),
          "default max_memory leaves room under 256 MiB");

    /* a legacy stream that is fine */
    legacy(&b, 3, 2, 4);
    size_t nt;
    ckpt_error err;
    CHECK(run(&b, NULL, &err, &nt) == CKPT_OK && nt == 3, "legacy base file: %s", err.message);

    /* max_pickle_bytes: a plain pickle of 1001 bytes */
    reset(&b);
    puts_(&b, "\x80\x02(");
    rep(&b, "N", 996);
    puts_(&b, "l."); /* 1001 bytes */
    ckpt_options_init(&opt);
    opt.max_pickle_bytes = 1000;
    expect("max_pickle_bytes", &b, &opt, CKPT_E_LIMIT, "limit of 1000 bytes (max_pickle_bytes)");
    opt.max_pickle_bytes = 1001;
    expect("max_pickle_bytes (fits)", &b, &opt, CKPT_OK, NULL);
    /* a string longer than the limit, and one longer than the file */
    reset(&b);
    puts_(&b, "\x80\x04\x8d\xff\xff\xff\xff\xff\xff\xff\x7f.");
    expect("string beyond max_pickle_bytes", &b, NULL, CKPT_E_LIMIT,
           "size limit (max_pickle_bytes)");
    reset(&b);
    PUTL(&b, "\x80\x04\x8d\x00\x00\x01\x00\x00\x00\x00\x00.");
    expect("string beyond the bytes left", &b, NULL, CKPT_E_PICKLE, "truncated");

    /* max_ops */
    reset(&b);
    puts_(&b, "\x80\x02");
    rep(&b, "N0", 100);
    puts_(&b, "N.");
    ckpt_options_init(&opt);
    opt.max_ops = 202;
    expect("max_ops", &b, &opt, CKPT_E_LIMIT, "more than 202 pickle opcodes (max_ops)");
    opt.max_ops = 203;
    expect("max_ops (fits)", &b, &opt, CKPT_OK, NULL);

    /* max_stack: values, then marks */
    reset(&b);
    puts_(&b, "\x80\x02(");
    rep(&b, "N", 100);
    puts_(&b, "l.");
    ckpt_options_init(&opt);
    opt.max_stack = 100;
    expect("max_stack (values + mark)", &b, &opt, CKPT_E_LIMIT,
           "stack deeper than 100 (max_stack)");
    opt.max_stack = 101;
    expect("max_stack (fits)", &b, &opt, CKPT_OK, NULL);
    reset(&b);
    puts_(&b, "\x80\x02");
    rep(&b, "(", 100);
    puts_(&b, "N");
    rep(&b, "l", 100);
    puts_(&b, ".");
    opt.max_stack = 50;
    expect("max_stack (marks)", &b, &opt, CKPT_E_LIMIT, "(max_stack)");

    /* max_depth: lists nested 20 deep */
    reset(&b);
    puts_(&b, "\x80\x02");
    rep(&b, "]", 20);
    rep(&b, "a", 19);
    puts_(&b, ".");
    ckpt_options_init(&opt);
    opt.max_depth = 10;
    expect("max_depth", &b, &opt, CKPT_E_LIMIT, "(max_depth)");
    opt.max_depth = 30;
    expect("max_depth (fits)", &b, &opt, CKPT_OK, NULL);
    /* the default handles 100000 levels without a stack overflow */
    reset(&b);
    puts_(&b, "\x80\x02");
    rep(&b, "]", 100000);
    rep(&b, "a", 99999);
    puts_(&b, ".");
    expect("100000 nested lists", &b, NULL, CKPT_E_LIMIT, "nest deeper");
    /* a caller raising max_depth cannot make the walk overflow the C stack */
    ckpt_options_init(&opt);
    opt.max_depth = 1u << 30;
    expect("100000 nested lists, max_depth 2**30", &b, &opt, CKPT_E_LIMIT, "nest deeper than 2048");
    {
        ckpt_error e;
        CHECK(run(&b, &opt, &e, NULL) == CKPT_E_LIMIT && !strstr(e.message, "max_depth"),
              "the 2048 cap is not max_depth's to raise: %s", e.message);
    }

    /* max_memo */
    reset(&b);
    puts_(&b, "\x80\x04N");
    rep(&b, "\x94", 100);
    puts_(&b, ".");
    ckpt_options_init(&opt);
    opt.max_memo = 0; /* 100 MEMOIZE in a 104-byte pickle: keys 0..99 fit under 0 + 104 */
    expect("max_memo (MEMOIZE fits the pickle's length)", &b, &opt, CKPT_OK, NULL);
    reset(&b);
    PUTL(&b, "\x80\x02Nr\x00\x01\x00\x00.");
    opt.max_memo = 50;
    expect("max_memo (key 256 in a 9-byte pickle)", &b, &opt, CKPT_E_LIMIT, "plus 50 (max_memo)");
    opt.max_memo = 300;
    expect("max_memo (fits)", &b, &opt, CKPT_OK, NULL);
    reset(&b);
    PUTL(&b, "\x80\x02Nr\x00\x00\x00\x40.");
    expect("memo key 2**30", &b, NULL, CKPT_E_LIMIT, "memo");

    /* max_expansion: list(L) of a shared list of 100 items, 20 times: 2000
     * words copied, against 999 + half a step per pickle byte (~1100) */
    reset(&b);
    puts_(&b, "\x80\x02(");
    rep(&b, "N", 100);
    puts_(&b, "lq\x01"
              "0cbuiltins\nlist\nq\x02"
              "0(");
    rep(&b, "h\x02h\x01\x85R", 20);
    puts_(&b, "l.");
    ckpt_options_init(&opt);
    opt.max_expansion = 999;
    expect("max_expansion (copies)", &b, &opt, CKPT_E_LIMIT, "; max_expansion)");
    opt.max_expansion = 100000;
    expect("max_expansion (copies fit)", &b, &opt, CKPT_OK, NULL);
    /* and the walk: one tensor under 2**10 names */
    reset(&b);
    put(&b, LEGACY_PREFIX, sizeof LEGACY_PREFIX - 1);
    puts_(&b, "\x80\x02}");
    uni(&b, "t");
    puts_(&b, "ctorch._utils\n_rebuild_tensor_v2\n((");
    uni(&b, "storage");
    puts_(&b, "ctorch\nFloatStorage\n");
    uni(&b, "0");
    uni(&b, "cpu");
    PUTL(&b, "K\x04NtQK\x00K\x04\x85K\x01\x85\x89}tRsq\x00"
             "0");
    for (int k = 1; k <= 10; k++) {
        char op[16];
        puts_(&b, "}(");
        uni(&b, "a");
        snprintf(op, sizeof op, "h%c", k - 1);
        put(&b, op, 2);
        uni(&b, "b");
        put(&b, op, 2);
        snprintf(op, sizeof op, "uq%c0", k);
        put(&b, op, 4);
    }
    puts_(&b, "h\x0a.\x80\x02]");
    uni(&b, "0");
    puts_(&b, "a.");
    put(&b, "\x04\0\0\0\0\0\0\0", 8);
    for (int i = 0; i < 4; i++) PUTL(&b, "\0\0\x80\x3f");
    CHECK(run(&b, NULL, &err, &nt) == CKPT_OK && nt == 1024, "1024 names of one tensor: %s (%zu)",
          err.message, nt);
    ckpt_options_init(&opt);
    opt.max_expansion = 5000;
    expect("max_expansion (walk)", &b, &opt, CKPT_E_LIMIT, "max_expansion)");

    /* max_entries: storages, tensors */
    reset(&b);
    legacy(&b, 3, 1, 2);
    ckpt_options_init(&opt);
    opt.max_entries = 2;
    expect("max_entries", &b, &opt, CKPT_E_LIMIT, "more than 2 globals (max_entries)");
    opt.max_entries = 6; /* 3 storages, 3 tensors, 6 GLOBAL opcodes (not memoized here) */
    expect("max_entries (fits)", &b, &opt, CKPT_OK, NULL);

    /* max_rank, clamped to 64 */
    reset(&b);
    legacy(&b, 1, 5, 2);
    ckpt_options_init(&opt);
    opt.max_rank = 4;
    expect("max_rank", &b, &opt, CKPT_E_LIMIT, "5 dimensions (limit 4; max_rank)");
    opt.max_rank = 5;
    expect("max_rank (fits)", &b, &opt, CKPT_OK, NULL);
    reset(&b);
    legacy(&b, 1, 65, 2);
    opt.max_rank = 1000;
    expect("rank 65 with max_rank 1000", &b, &opt, CKPT_E_LIMIT, "65 dimensions (limit 64)");
    reset(&b);
    legacy(&b, 1, 64, 2);
    expect("rank 64", &b, &opt, CKPT_OK, NULL);

    /* max_tensor_bytes: 16 floats = 64 bytes (checked on reading) */
    reset(&b);
    legacy(&b, 1, 1, 16);
    ckpt_options_init(&opt);
    opt.max_tensor_bytes = 63;
    expect("max_tensor_bytes", &b, &opt, CKPT_E_LIMIT, "tensor size limit");
    opt.max_tensor_bytes = 64;
    expect("max_tensor_bytes (fits)", &b, &opt, CKPT_OK, NULL);
    tensor_bytes_on_read();

    /* legacy element count must equal the declaration */
    reset(&b);
    legacy(&b, 1, 1, 4);
    b.p[b.n - 16 - 8] = 5;
    expect("legacy count mismatch", &b, NULL, CKPT_E_FORMAT, "declared 4");

    memory();
    linear_reads();

    free(b.p);
    printf("%s\n", failures ? "FAILED" : "ok");
    return failures ? 1 : 0;
}
