/*
 * test_abi.c - the caller-allocated structs can grow (rules under "ABI" in
 * ckpt.h).  A caller compiled against an older, smaller ckpt_options or
 * ckpt_info is simulated by passing a smaller struct_size: the library must
 * read only that many bytes of the options (defaults for the rest) and
 * write only that many bytes of the info (bytes past them untouched).  A
 * caller compiled against a newer, bigger layout is simulated the same way.
 *
 * Uses only the public API, on examples/sample.pt.
 */
#include "ckpt.h"
#include "harness.h"

#include <stddef.h>

#ifndef CKPT_EXAMPLES_DIR
#error "CKPT_EXAMPLES_DIR must name the examples folder"
#endif
#define SAMPLE CKPT_EXAMPLES_DIR "/sample.pt"

static int globals_seen;
static void count_global(void *ctx, const ckpt_global_ref *g)
{
    (void)ctx;
    (void)g;
    globals_seen++;
}

static int all_bytes(const void *p, size_t n, unsigned char c)
{
    const unsigned char *b = p;
    for (size_t i = 0; i < n; i++)
        if (b[i] != c) return 0;
    return 1;
}

static int reader_closed;
static int mem_read(void *opaque, uint64_t off, void *buf, size_t n)
{
    (void)opaque;
    (void)off;
    memset(buf, 0, n);
    return 0;
}
static void mem_close(void *opaque)
{
    (void)opaque;
    reader_closed++;
}

int main(void)
{
    ckpt_error err;

    SECTION("the macro sets struct_size to the caller's sizeof");
    ckpt_options full;
    memset(&full, 0xab, sizeof full);
    ckpt_options_init(&full);
    CHECK_EQ_U64(full.struct_size, sizeof(ckpt_options));
    CHECK_EQ_U64(full.max_memory, CKPT_DEFAULT_MAX_MEMORY);
    CHECK(full.key == NULL);
    CHECK(full.on_global == NULL);

    ckpt_file *f = ckpt_open(SAMPLE, &full, &err);
    CHECK(f != NULL);
    size_t ntensors = f ? ckpt_tensor_count(f) : 0;
    CHECK(ntensors > 0);
    ckpt_close(f);

    SECTION("init of an older, smaller layout writes only its bytes");
    size_t old = offsetof(ckpt_options, key); /* a layout that ended before `key` */
    ckpt_options o;
    memset(&o, 0xab, sizeof o);
    ckpt_options_init_sized(&o, old);
    CHECK_EQ_U64(o.struct_size, old);
    CHECK_EQ_U64(o.max_pickle_bytes, CKPT_DEFAULT_MAX_PICKLE_BYTES);
    CHECK_EQ_U64(o.max_memory, CKPT_DEFAULT_MAX_MEMORY);
    CHECK(all_bytes((const char *)&o + old, sizeof o - old, 0xab));

    SECTION("open with an older layout: the members past it take their defaults");
    /* What an older caller's memory holds past its struct: here values that
     * would change the outcome if they were read. */
    o.key = "no such key";
    o.skip_tensors = 1;
    o.use_mmap = 1;
    o.on_global = count_global;
    o.on_global_ctx = NULL;
    globals_seen = 0;
    f = ckpt_open(SAMPLE, &o, &err);
    CHECK(f != NULL);
    if (!f) fprintf(stderr, "  open: %s\n", err.message);
    CHECK_EQ_U64(f ? ckpt_tensor_count(f) : 0, ntensors); /* no key, tensors named */
    CHECK_EQ_INT(globals_seen, 0);                        /* on_global not called */
    ckpt_close(f);
    /* the same values inside the full layout do take effect */
    memcpy(&full, &o, sizeof o);
    full.struct_size = sizeof full;
    full.key_len = 0; /* not one of the values above: the key is a C string */
    f = ckpt_open(SAMPLE, &full, &err);
    CHECK(f == NULL);
    CHECK_EQ_INT(err.code, CKPT_E_NOTFOUND);
    CHECK(globals_seen > 0);
    ckpt_close(f);

    SECTION("members inside the older layout are read");
    ckpt_options_init_sized(&o, offsetof(ckpt_options, max_tensor_bytes));
    o.max_pickle_bytes = 10;
    f = ckpt_open(SAMPLE, &o, &err);
    CHECK(f == NULL);
    CHECK_EQ_INT(err.code, CKPT_E_LIMIT);
    ckpt_options_init_sized(&o, offsetof(ckpt_options, max_tensor_bytes));
    o.max_tensor_bytes = 1; /* past struct_size: ignored */
    f = ckpt_open_memory(NULL, 0, &o, &err);
    CHECK(f == NULL);
    CHECK_EQ_INT(err.code, CKPT_E_FORMAT); /* empty input, options accepted */
    f = ckpt_open(SAMPLE, &o, &err);
    CHECK(f != NULL);
    ckpt_close(f);

    SECTION("a newer, bigger layout: the library takes what it knows");
    struct {
        ckpt_options o;
        unsigned char more[32]; /* members a newer ckpt.h would have */
    } newer;
    memset(&newer, 0xcd, sizeof newer);
    ckpt_options_init_sized(&newer.o, sizeof newer);
    CHECK_EQ_U64(newer.o.struct_size, sizeof(ckpt_options)); /* what it filled */
    CHECK(all_bytes(newer.more, sizeof newer.more, 0xcd));
    newer.o.struct_size = sizeof newer;
    f = ckpt_open(SAMPLE, &newer.o, &err);
    CHECK(f != NULL);
    CHECK_EQ_U64(f ? ckpt_tensor_count(f) : 0, ntensors);
    ckpt_close(f);

    SECTION("options never initialised are refused, not guessed at");
    memset(&o, 0, sizeof o);
    o.max_ops = 1000;
    f = ckpt_open(SAMPLE, &o, &err);
    CHECK(f == NULL);
    CHECK_EQ_INT(err.code, CKPT_E_ARG);
    CHECK_CONTAINS(err.message, "ckpt_options_init");
    f = ckpt_open_memory("x", 1, &o, &err);
    CHECK(f == NULL);
    CHECK_EQ_INT(err.code, CKPT_E_ARG);
    ckpt_reader rd = {mem_read, mem_close, NULL, 64};
    reader_closed = 0;
    f = ckpt_open_reader(&rd, &o, &err);
    CHECK(f == NULL);
    CHECK_EQ_INT(err.code, CKPT_E_ARG);
    CHECK_EQ_INT(reader_closed, 1); /* the reader is closed on failure */

    SECTION("info: filled up to the caller's size, not a byte more");
    f = ckpt_open(SAMPLE, NULL, &err);
    CHECK(f != NULL);
    ckpt_info info;
    memset(&info, 0xee, sizeof info);
    ckpt_get_info(f, &info);
    CHECK_EQ_U64(info.struct_size, sizeof info);
    CHECK_EQ_INT(info.format, CKPT_FORMAT_ZIP);
    CHECK_EQ_U64(info.tensor_count, ntensors);
    CHECK(info.file_size > 0);
    uint64_t file_size = info.file_size;

    size_t small = offsetof(ckpt_info, tensor_count); /* an older layout */
    memset(&info, 0xee, sizeof info);
    ckpt_get_info_sized(f, &info, small);
    CHECK_EQ_U64(info.struct_size, small);
    CHECK_EQ_INT(info.format, CKPT_FORMAT_ZIP);
    CHECK_STR(info.root, "training_zip");
    CHECK(all_bytes((const char *)&info + small, sizeof info - small, 0xee));

    struct {
        ckpt_info i;
        unsigned char more[24];
    } big;
    memset(&big, 0xee, sizeof big);
    ckpt_get_info_sized(f, &big.i, sizeof big);
    CHECK_EQ_U64(big.i.struct_size, sizeof(ckpt_info));
    CHECK_EQ_U64(big.i.file_size, file_size);
    CHECK(all_bytes(big.more, sizeof big.more, 0xee));

    memset(&info, 0xee, sizeof info); /* NULL file: zeros, still sized */
    ckpt_get_info_sized(NULL, &info, small);
    CHECK_EQ_U64(info.struct_size, small);
    CHECK_EQ_INT(info.format, 0);
    CHECK(all_bytes((const char *)&info + small, sizeof info - small, 0xee));
    ckpt_close(f);

    SECTION("dtypes this header does not list");
    CHECK_STR(ckpt_dtype_name((ckpt_dtype)(CKPT_BITS4X2 + 1)), "unknown");
    CHECK_EQ_U64(ckpt_dtype_size((ckpt_dtype)(CKPT_BITS4X2 + 1)), 0);
    CHECK_STR(ckpt_dtype_name((ckpt_dtype)1000), "unknown");

    return ut_summary();
}
