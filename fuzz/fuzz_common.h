/*
 * fuzz_common.h - what every fuzz target does with a file it managed to open:
 * list every tensor and storage, read every tensor (skipping those above
 * 1 MiB), check zero-copy views against the input, and write the root value
 * as JSON into a sink that discards it.  Every failure must be a clean one:
 * a non-zero code and a non-empty one-line message.  Anything else aborts,
 * which libFuzzer (and the replay driver) report as a crash.
 *
 * Header-only so that each target stays one translation unit; included by
 * the targets, which are built both for libFuzzer (clang) and for the replay
 * driver (any compiler).
 */
#ifndef CKPT_FUZZ_COMMON_H
#define CKPT_FUZZ_COMMON_H

#include "ckpt.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define FUZZ_MAX_READ ((uint64_t)1 << 20)

/* The defaults, but max_expansion lowered to 32 Ki (1 << 15): an input
 * that drives a walk or the pickle's copies right up to the limit then still
 * runs in well under the fuzzers' 1 s with ASan and coverage (at the default
 * such an input takes ~1.3 s even without them: a walk visit costs ~80 ns,
 * ~1 us instrumented).  tests/unit/test_limits.c covers the default. */
static inline void fuzz_options(ckpt_options *opt)
{
    ckpt_options_init(opt);
    opt->max_expansion = (uint64_t)1 << 15; /* the limit trips sooner: more inputs per second */
}

/* Abort with a reason: the fuzzer keeps the input, the replay test fails. */
static void fuzz_die(const char *why, const char *detail)
{
    fprintf(stderr, "fuzz invariant violated: %s%s%s\n", why, detail ? ": " : "",
            detail ? detail : "");
    abort();
}

/* A clean error: a known non-zero code, a non-empty message of one line. */
static void fuzz_check_error(const ckpt_error *e)
{
    if (e->code == CKPT_OK || (int)e->code < 0 || e->code > CKPT_E_NOTMAPPABLE)
        fuzz_die("failure without an error code", e->message);
    size_t n = strnlen(e->message, sizeof e->message);
    if (n == 0) fuzz_die("failure with an empty message", NULL);
    if (n == sizeof e->message) fuzz_die("error message not NUL-terminated", NULL);
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)e->message[i] < 0x20)
            fuzz_die("error message is not one line", e->message);
    if (e->offset < -1) fuzz_die("negative error offset", e->message);
}

#ifndef FUZZ_MACHINE_ONLY /* fuzz_pickle.c: the pickle machine alone, no ckpt_file */
typedef struct fuzz_sink {
    uint64_t bytes;
} fuzz_sink;

static int fuzz_sink_write(void *ctx, const char *s, size_t n)
{
    fuzz_sink *k = ctx;
    if (n && !s) fuzz_die("JSON writer passed NULL text", NULL);
    if (n) {
        volatile char c = s[0];
        c = s[n - 1]; /* touch both ends: ASan checks the range */
        (void)c;
    }
    k->bytes += n;
    /* Stop long outputs (the writer's own bound is 4 MiB + 16 x the file
     * size, tested by tests/defects): escaping megabytes of shared text at
     * ~50 ns a byte under coverage would eat the 1 s budget, and writing
     * long documents was most of the `open` target's time.  A failing
     * write callback must end in a clean error too. */
    return k->bytes > ((uint64_t)256 << 10) ? -1 : 0;
}

static void fuzz_touch_str(const char *s)
{
    if (!s) return;
    volatile size_t n = strlen(s);
    (void)n;
}

static void fuzz_note(void *ctx, const char *line)
{
    (void)ctx;
    if (!line) fuzz_die("ckpt_verify noted NULL", NULL);
    fuzz_touch_str(line);
}

/* Everything a caller may do with an open file. */
static void fuzz_exercise(ckpt_file *f, const uint8_t *data, size_t size, int json_indent)
{
    ckpt_error err;
    ckpt_info info;
    ckpt_get_info(f, &info);
    fuzz_touch_str(info.version);
    fuzz_touch_str(info.root);
    fuzz_touch_str(ckpt_format_name(info.format));
    size_t ns = ckpt_storage_count(f);
    for (size_t i = 0; i < ns; i++) {
        const ckpt_storage *s = ckpt_storage_at(f, i);
        if (!s) fuzz_die("storage index in range returned NULL", NULL);
        fuzz_touch_str(s->key);
        if (s->file_offset >= 0 && data && (uint64_t)s->file_offset > size)
            fuzz_die("storage starts outside the file", s->key);
    }
    for (size_t i = 0; i < ckpt_global_count(f); i++) {
        const ckpt_global_ref *g = ckpt_global_at(f, i);
        fuzz_touch_str(g->module);
        fuzz_touch_str(g->name);
        fuzz_touch_str(g->pickle);
    }
    for (size_t i = 0; i < ckpt_note_count(f); i++) fuzz_touch_str(ckpt_note_at(f, i));

    size_t nt = ckpt_tensor_count(f);
    for (size_t i = 0; i < nt; i++) {
        const ckpt_tensor *t = ckpt_tensor_at(f, i);
        if (!t) fuzz_die("tensor index in range returned NULL", NULL);
        fuzz_touch_str(t->name);
        fuzz_touch_str(ckpt_dtype_name(t->dtype));
        if (t->ndim > 64) fuzz_die("tensor rank above 64", t->name);
        if (!t->readable) { /* listed without data: no storage, no bytes */
            if (t->storage != (size_t)-1 || t->nbytes != 0 || !t->unreadable)
                fuzz_die("unreadable tensor with a storage, bytes or no reason", t->name);
        } else if (t->storage >= ns && (t->storage != (size_t)-1 || t->file_offset != -1)) {
            fuzz_die("tensor storage index out of range", t->name);
        }
        if (t->readable && t->dtype != CKPT_QUINT4X2 && t->dtype != CKPT_QUINT2X4 &&
            t->nbytes != t->numel * ckpt_dtype_size(t->dtype))
            fuzz_die("nbytes != numel * elsize", t->name);
        for (uint32_t d = 0; d < t->ndim; d++) {
            /* unsigned: a 0-element tensor may have any shape and stride */
            volatile uint64_t x = (uint64_t)t->shape[d] + (uint64_t)t->stride[d];
            (void)x;
        }
        { /* names may repeat (keys that flatten to one name) and hold NUL:
           * the first of t's name, then the next ones, reach t */
            const ckpt_tensor *u = ckpt_find_n(f, t->name, t->name_len);
            size_t steps = 0;
            while (u && u != t && steps++ < nt) u = ckpt_find_next(f, u);
            if (u != t)
                fuzz_die("ckpt_find_n/ckpt_find_next do not reach a listed tensor", t->name);
            if (t->name_len == strlen(t->name) && u == t &&
                ckpt_find(f, t->name) != ckpt_find_n(f, t->name, t->name_len))
                fuzz_die("ckpt_find and ckpt_find_n disagree", t->name);
        }
        if (i < 4) { /* how the name was made: parts ending inside it, the last at its end */
            size_t ends[8], np = 0;
            memset(&err, 0, sizeof err);
            if (ckpt_tensor_name_parts(f, t, ends, 8, &np, &err) != 0) {
                fuzz_check_error(&err);
            } else {
                size_t k;
                for (k = 0; k < np && k < 8; k++)
                    if (ends[k] > t->name_len || (k && ends[k] <= ends[k - 1]))
                        fuzz_die("name parts out of order", t->name);
                if (np > 0 && np <= 8 && ends[np - 1] != t->name_len)
                    fuzz_die("the last name part does not end the name", t->name);
                if (np == 0 && t->name_len != 0) fuzz_die("no name parts for a name", t->name);
            }
        }
        if (t->nbytes > FUZZ_MAX_READ) continue;
        size_t nb = (size_t)t->nbytes;
        uint8_t *buf = malloc(nb ? nb : 1);
        if (!buf) continue;
        memset(&err, 0, sizeof err);
        int r = ckpt_tensor_read(f, t, buf, nb, &err);
        if (r != 0) {
            fuzz_check_error(&err);
        } else {
            /* A partial read of the middle must agree with the whole. */
            if (nb > 2) {
                uint8_t *part = malloc(nb - 2);
                if (part) {
                    memset(&err, 0, sizeof err);
                    if (ckpt_tensor_read_range(f, t, 1, part, nb - 2, &err) == 0) {
                        if (memcmp(part, buf + 1, nb - 2) != 0)
                            fuzz_die("read_range disagrees with read", t->name);
                    } else {
                        fuzz_check_error(&err);
                    }
                    free(part);
                }
            }
            /* A zero-copy view must lie inside the input and hold the bytes. */
            memset(&err, 0, sizeof err);
            const uint8_t *p = ckpt_tensor_data(f, t, &err);
            if (p) {
                if (data &&
                    (p < data || (size_t)(p - data) > size || nb > size - (size_t)(p - data)))
                    fuzz_die("ckpt_tensor_data points outside the file", t->name);
                if (nb && memcmp(p, buf, nb) != 0)
                    fuzz_die("ckpt_tensor_data disagrees with read", t->name);
            } else {
                fuzz_check_error(&err);
            }
        }
        free(buf);
    }
    fuzz_sink sink = {0};
    memset(&err, 0, sizeof err);
    if (ckpt_value_to_json(f, NULL, json_indent, fuzz_sink_write, &sink, &err) != 0)
        fuzz_check_error(&err);
    memset(&err, 0, sizeof err);
    if (ckpt_verify(f, fuzz_note, NULL, &err) != 0) fuzz_check_error(&err);
}

/* Open from memory and exercise; returns the number of tensors or -1. */
static inline long fuzz_open_and_exercise(const uint8_t *data, size_t size, const ckpt_options *opt)
{
    ckpt_error err;
    ckpt_options fopt;
    if (!opt) {
        fuzz_options(&fopt);
        opt = &fopt;
    }
    memset(&err, 0, sizeof err);
    ckpt_file *f = ckpt_open_memory(data, size, opt, &err);
    static int verbose = -1;
    if (verbose < 0) verbose = getenv("FUZZ_VERBOSE") != NULL;
    if (verbose) {
        if (f)
            fprintf(stderr, "  ok: %zu tensors\n", ckpt_tensor_count(f));
        else
            fprintf(stderr, "  error: %s (byte %lld)\n", err.message, (long long)err.offset);
    }
    if (!f) {
        fuzz_check_error(&err);
        return -1;
    }
    if (err.code != CKPT_OK) fuzz_die("success with an error code", err.message);
    fuzz_exercise(f, data, size, (int)(size & 1));
    long n = (long)ckpt_tensor_count(f);
    ckpt_close(f);
    return n;
}

/* Open an assembled file from an exact-size heap copy, so that ASan sees
 * any read past its end. */
static inline void fuzz_open_copy(const uint8_t *data, size_t size)
{
    uint8_t *file = malloc(size ? size : 1);
    if (!file) return;
    if (size) memcpy(file, data, size);
    fuzz_open_and_exercise(file, size, NULL);
    free(file);
}

#endif

/* A growing byte buffer the targets assemble inputs in; put() returns -1
 * when an allocation fails. */
typedef struct buf {
    uint8_t *p;
    size_t n, cap;
} buf;

static inline int put(buf *b, const void *s, size_t n)
{
    if (b->cap - b->n < n) {
        size_t c = b->cap ? b->cap : 4096;
        while (c - b->n < n) c *= 2;
        uint8_t *q = realloc(b->p, c);
        if (!q) return -1;
        b->p = q;
        b->cap = c;
    }
    if (n) memcpy(b->p + b->n, s, n);
    b->n += n;
    return 0;
}

#endif
