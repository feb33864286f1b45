/*
 * test_pickle.c - the pickle machine alone (src/pickle/pickle.h), with no
 * checkpoint: linked with the common and pickle layers only.  Every opcode of
 * protocols 0-5, errors with their codes and byte offsets, the machine's
 * limits, notes, the globals table and on_global, and the hooks
 * (find_class, reduce, persistent_load) with hand-made callbacks.
 * test_plain.c runs much the same pickles end to end through ckpt_open.
 */
#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L
#endif
#include "pickle/pickle.h"
#include "harness.h"
#include "build.h"

#include <math.h>

/* One input run by the machine, as a plain pickle file would be: the whole
 * buffer (at most max_pickle_bytes of it), label "pickle", base 0. */
typedef struct pk_file {
    ck_arena arena;
    ck_unpickler u;
    ckpt_options opt;
    ckpt_value *root;
    size_t used;
} pk_file;

static void pk_close(pk_file *f)
{
    if (!f) return;
    ck_unpickler_free(&f->u);
    ck_arena_free(&f->arena);
    free(f);
}

/* How pk_run_hooks() hands the bytes over: 0 a buffer, 1 a buffer that is
 * the pickle's whole extent (in.bounded, as a ZIP record: the memo
 * prescan reads the bytes without parsing them), 2 the same streamed from
 * a source through the smallest window. */
static int pk_mode;

static pk_file *pk_run_hooks(const bb *b, const ckpt_options *o, const ck_pickle_hooks *h,
                             ckpt_error *e)
{
    pk_file *f = calloc(1, sizeof *f);
    if (!f) abort();
    if (o)
        f->opt = *o;
    else
        ckpt_options_init(&f->opt);
    f->u.arena = &f->arena;
    f->u.opt = &f->opt;
    f->u.input_size = b->n;
    if (h) f->u.hooks = *h;
    f->u.hooks.on_global = f->opt.on_global;
    f->u.hooks.on_global_ctx = f->opt.on_global_ctx;
    size_t cap = b->n < f->opt.max_pickle_bytes ? b->n : (size_t)f->opt.max_pickle_bytes;
    ck_pickle_in in = {.buf = b->p ? b->p : (const uint8_t *)"",
                       .len = cap,
                       .more = cap < b->n,
                       .base = 0,
                       .label = "pickle"};
    ck_source src;
    if (pk_mode) in.bounded = true;
    if (pk_mode == 2) {
        ck_source_memory(&src, in.buf, cap);
        in.buf = NULL;
        in.src = &src;
        in.window = 1; /* the smallest there is */
    }
    memset(e, 0, sizeof *e);
    e->offset = -1;
    int r = ck_pickle_run(&f->u, &in, &f->root, &f->used, e);
    if (r == 1)
        r = ck_fail(e, CKPT_E_LIMIT, 0, "pickle is larger than the pickle size limit of %llu bytes",
                    (unsigned long long)f->opt.max_pickle_bytes);
    if (r != 0) {
        ck_mem_blame(&f->arena, e);
        pk_close(f);
        return NULL;
    }
    return f;
}
static pk_file *pk_run(const bb *b, const ckpt_options *o, ckpt_error *e)
{
    return pk_run_hooks(b, o, NULL, e);
}

static pk_file *run_ok_(const bb *b, const ckpt_options *o, const char *file, int line)
{
    ckpt_error e;
    pk_file *f = pk_run(b, o, &e);
    if (f) {
        ut_passed++;
    } else {
        ut_fail_at(file, line);
        fprintf(stderr, "run failed: %s: %s (offset %lld)\n", ckpt_code_name(e.code), e.message,
                (long long)e.offset);
    }
    return f;
}
#define RUN_OK(b, o) run_ok_((b), (o), __FILE__, __LINE__)

/* The error of a run that must fail; "(ran)" with offset -2 when it did not. */
static ckpt_error run_fail(const bb *b, const ckpt_options *o)
{
    ckpt_error e;
    pk_file *f = pk_run(b, o, &e);
    if (f) {
        pk_close(f);
        memset(&e, 0, sizeof e);
        snprintf(e.message, sizeof e.message, "(ran)");
        e.offset = -2;
    }
    return e;
}

static const ckpt_value *pk_root(const pk_file *f)
{
    return f ? f->root : NULL;
}
static size_t pk_note_count(const pk_file *f)
{
    return f ? f->u.nnotes : 0;
}
static const char *pk_note_at(const pk_file *f, size_t i)
{
    return f && i < f->u.nnotes ? f->u.notes[i] : NULL;
}
static size_t pk_global_count(const pk_file *f)
{
    return f ? f->u.nglobals : 0;
}
static const ckpt_global_ref *pk_global_at(const pk_file *f, size_t i)
{
    return f && i < f->u.nglobals ? &f->u.globals[i] : NULL;
}

#define LIT(b, s) bb_put((b), (s), sizeof(s) - 1)

#define EXPECT_FAIL(b, o, code, off, msg)                                                          \
    do {                                                                                           \
        ckpt_error e_ = run_fail((b), (o));                                                        \
        const char *m_ = (msg);                                                                    \
        CHECK_ERR(e_, (code), (off));                                                              \
        if (m_) CHECK_CONTAINS(e_.message, m_);                                                    \
    } while (0)

#define CHECK_KIND(v, k) CHECK_STR(ckpt_kind_name(ckpt_value_kind(v)), ckpt_kind_name(k))
#define CHECK_VINT(v, x)                                                                           \
    do {                                                                                           \
        CHECK_KIND((v), CKPT_V_INT);                                                               \
        CHECK_EQ_INT(ckpt_value_int(v), (x));                                                      \
    } while (0)
#define CHECK_VSTR(v, k, s, n)                                                                     \
    do {                                                                                           \
        size_t l_ = 99999;                                                                         \
        const char *t_ = ckpt_value_text((v), &l_);                                                \
        CHECK_KIND((v), (k));                                                                      \
        CHECK_EQ_INT(l_, (n));                                                                     \
        if (t_ && l_ == (size_t)(n)) CHECK_MEM(t_, (s), (n));                                      \
    } while (0)
#define CHECK_BIG(v, digits)                                                                       \
    do {                                                                                           \
        CHECK_KIND((v), CKPT_V_BIGINT);                                                            \
        CHECK_STR(ckpt_value_text((v), NULL), (digits));                                           \
    } while (0)

/* ------------------------------------------------------------------------ */

/* INT (text, incl. I01/I00 booleans), LONG text, BININT/1/2. */
static void test_text_ints(void)
{
    SECTION("text ints");
    bb b = {0};
    pk_mark(&b);
    LIT(&b, "I01\n");
    LIT(&b, "I00\n");
    LIT(&b, "I42\n");
    LIT(&b, "I-7\n");
    LIT(&b, "I-9223372036854775808\n");
    LIT(&b, "I9223372036854775808\n");
    LIT(&b, "I123456789012345678901234567890\n");
    LIT(&b, "L5L\n");
    LIT(&b, "L-99999999999999999999L\n");
    LIT(&b, "L77\n");
    LIT(&b, "J\xff\xff\xff\xff");
    LIT(&b, "J\x00\x00\x00\x80");
    LIT(&b, "K\xff");
    LIT(&b, "M\xff\xff");
    pk_op(&b, 'l');
    pk_stop(&b);
    pk_file *f = RUN_OK(&b, NULL);
    if (f) {
        const ckpt_value *r = pk_root(f);
        CHECK_KIND(r, CKPT_V_LIST);
        CHECK_EQ_INT(ckpt_value_len(r), 14);
        CHECK_KIND(ckpt_value_item(r, 0), CKPT_V_BOOL);
        CHECK_EQ_INT(ckpt_value_bool(ckpt_value_item(r, 0)), 1);
        CHECK_KIND(ckpt_value_item(r, 1), CKPT_V_BOOL);
        CHECK_EQ_INT(ckpt_value_bool(ckpt_value_item(r, 1)), 0);
        CHECK_VINT(ckpt_value_item(r, 2), 42);
        CHECK_VINT(ckpt_value_item(r, 3), -7);
        CHECK_VINT(ckpt_value_item(r, 4), INT64_MIN);
        CHECK_BIG(ckpt_value_item(r, 5), "9223372036854775808");
        CHECK_BIG(ckpt_value_item(r, 6), "123456789012345678901234567890");
        CHECK_VINT(ckpt_value_item(r, 7), 5);
        CHECK_BIG(ckpt_value_item(r, 8), "-99999999999999999999");
        CHECK_VINT(ckpt_value_item(r, 9), 77);
        CHECK_VINT(ckpt_value_item(r, 10), -1);
        CHECK_VINT(ckpt_value_item(r, 11), INT32_MIN);
        CHECK_VINT(ckpt_value_item(r, 12), 255);
        CHECK_VINT(ckpt_value_item(r, 13), 65535);
        CHECK(ckpt_value_float(ckpt_value_item(r, 2)) == 42.0);
        pk_close(f);
    }
    bb_free(&b);
}

/* LONG1 / LONG4: little-endian two's complement, BIGINT beyond int64. */
static void test_binary_longs(void)
{
    SECTION("LONG1/LONG4");
    bb b = {0};
    pk_proto(&b, 2);
    pk_mark(&b);
    LIT(&b, "\x8a\x00");                                                     /* 0 */
    LIT(&b, "\x8a\x01\xff");                                                 /* -1 */
    LIT(&b, "\x8a\x02\xff\x00");                                             /* 255 */
    LIT(&b, "\x8a\x08\x00\x00\x00\x00\x00\x00\x00\x80");                     /* INT64_MIN */
    LIT(&b, "\x8a\x08\xff\xff\xff\xff\xff\xff\xff\x7f");                     /* INT64_MAX */
    LIT(&b, "\x8a\x09\x00\x00\x00\x00\x00\x00\x00\x80\x00");                 /* 2**63 */
    LIT(&b, "\x8a\x09\x00\x00\x00\x00\x00\x00\x00\x00\x01");                 /* 2**64 */
    LIT(&b, "\x8a\x0d\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x10"); /* 2**100 */
    LIT(&b, "\x8a\x09\x00\x00\x00\x00\x00\x00\x00\x00\xc0");                 /* -(2**70) */
    /* LONG4 2**200 and -(2**200): 26 bytes */
    bb_u8(&b, 0x8b);
    bb_le32(&b, 26);
    bb_zero(&b, 25);
    bb_u8(&b, 0x01);
    bb_u8(&b, 0x8b);
    bb_le32(&b, 26);
    bb_zero(&b, 25);
    bb_u8(&b, 0xff);
    /* LONG4 with zero bytes, and a small value */
    LIT(&b, "\x8b\x00\x00\x00\x00");
    LIT(&b, "\x8b\x02\x00\x00\x00\x00\x80"); /* -32768 */
    pk_op(&b, 'l');
    pk_stop(&b);
    pk_file *f = RUN_OK(&b, NULL);
    if (f) {
        const ckpt_value *r = pk_root(f);
        CHECK_EQ_INT(ckpt_value_len(r), 13);
        CHECK_VINT(ckpt_value_item(r, 0), 0);
        CHECK_VINT(ckpt_value_item(r, 1), -1);
        CHECK_VINT(ckpt_value_item(r, 2), 255);
        CHECK_VINT(ckpt_value_item(r, 3), INT64_MIN);
        CHECK_VINT(ckpt_value_item(r, 4), INT64_MAX);
        CHECK_BIG(ckpt_value_item(r, 5), "9223372036854775808");
        CHECK_BIG(ckpt_value_item(r, 6), "18446744073709551616");
        CHECK_BIG(ckpt_value_item(r, 7), "1267650600228229401496703205376");
        CHECK_BIG(ckpt_value_item(r, 8), "-1180591620717411303424");
        CHECK_BIG(ckpt_value_item(r, 9),
                  "1606938044258990275541962092341162602522202993782792835301376");
        CHECK_BIG(ckpt_value_item(r, 10),
                  "-1606938044258990275541962092341162602522202993782792835301376");
        CHECK_VINT(ckpt_value_item(r, 11), 0);
        CHECK_VINT(ckpt_value_item(r, 12), -32768);
        size_t n = 0;
        ckpt_value_text(ckpt_value_item(r, 7), &n);
        CHECK_EQ_INT(n, 31);
        pk_close(f);
    }
    bb_free(&b);

    /* 10**27 = 0x033b2e3c9fd0803ce8000000: chunks of nine zero digits */
    SECTION("LONG1 10**27");
    memset(&b, 0, sizeof b);
    pk_proto(&b, 2);
    LIT(&b, "\x8a\x0c\x00\x00\x00\xe8\x3c\x80\xd0\x9f\x3c\x2e\x3b\x03");
    pk_stop(&b);
    f = RUN_OK(&b, NULL);
    if (f) {
        CHECK_BIG(pk_root(f), "1000000000000000000000000000");
        pk_close(f);
    }
    bb_free(&b);
}

/* A value that fits int64, written with more LONG1 bytes than needed (valid:
 * CPython reads b'\x8a\x09' + b'\xff' * 9 as -1), is still an INT: ckpt.h
 * says CKPT_V_INT is what "fits int64". */
static void test_long1_nonminimal(void)
{
    SECTION("LONG1 non-minimal");
    bb b = {0};
    pk_proto(&b, 2);
    pk_mark(&b);
    LIT(&b, "\x8a\x09\xff\xff\xff\xff\xff\xff\xff\xff\xff");     /* -1 in 9 bytes */
    LIT(&b, "\x8a\x0a\x05\x00\x00\x00\x00\x00\x00\x00\x00\x00"); /* 5 in 10 bytes */
    pk_op(&b, 'l');
    pk_stop(&b);
    pk_file *f = RUN_OK(&b, NULL);
    if (f) {
        const ckpt_value *r = pk_root(f);
        CHECK_VINT(ckpt_value_item(r, 0), -1);
        CHECK_VINT(ckpt_value_item(r, 1), 5);
        pk_close(f);
    }
    bb_free(&b);
}

static void test_floats(void)
{
    SECTION("floats");
    bb b = {0};
    pk_mark(&b);
    LIT(&b, "F1.5\n");
    LIT(&b, "F-0.25\n");
    LIT(&b, "F1e-300\n");
    LIT(&b, "Finf\n");
    LIT(&b, "G\x3f\xb9\x99\x99\x99\x99\x99\x9a"); /* 0.1 */
    LIT(&b, "G\xc0\x00\x00\x00\x00\x00\x00\x00"); /* -2.0 */
    LIT(&b, "G\x7f\xf8\x00\x00\x00\x00\x00\x00"); /* nan */
    pk_op(&b, 'l');
    pk_stop(&b);
    pk_file *f = RUN_OK(&b, NULL);
    if (f) {
        const ckpt_value *r = pk_root(f);
        CHECK_EQ_INT(ckpt_value_len(r), 7);
        for (size_t i = 0; i < 7; i++) CHECK_KIND(ckpt_value_item(r, i), CKPT_V_FLOAT);
        CHECK(ckpt_value_float(ckpt_value_item(r, 0)) == 1.5);
        CHECK(ckpt_value_float(ckpt_value_item(r, 1)) == -0.25);
        CHECK(ckpt_value_float(ckpt_value_item(r, 2)) == 1e-300);
        CHECK(isinf(ckpt_value_float(ckpt_value_item(r, 3))));
        CHECK(ckpt_value_float(ckpt_value_item(r, 4)) == 0.1);
        CHECK(ckpt_value_float(ckpt_value_item(r, 5)) == -2.0);
        CHECK(isnan(ckpt_value_float(ckpt_value_item(r, 6))));
        CHECK_EQ_INT(ckpt_value_int(ckpt_value_item(r, 0)), 0); /* INT accessor on FLOAT: neutral */
        CHECK(ckpt_value_text(ckpt_value_item(r, 0), NULL) == NULL);
        pk_close(f);
    }
    bb_free(&b);
}

static void test_strings(void)
{
    SECTION("strings");
    bb b = {0};
    pk_mark(&b);
    LIT(&b, "S'a\\nb\\x41\\101\\'c\\\\'\n"); /* 0 STRING with escapes */
    LIT(&b, "S\"dq\\t\"\n");                 /* 1 STRING double quotes */
    LIT(&b, "Vcaf\\u00e9 \\U0001f600!\n");   /* 2 UNICODE \u \U */
    LIT(&b, "V\xe9\\x\n");                   /* 3 UNICODE raw latin-1, a lone backslash */
    LIT(&b, "T\x03\x00\x00\x00"
            "abc");                                     /* 4 BINSTRING */
    LIT(&b, "U\x02hi");                                 /* 5 SHORT_BINSTRING */
    LIT(&b, "X\x02\x00\x00\x00\xc3\xa9");               /* 6 BINUNICODE */
    LIT(&b, "\x8d\x03\x00\x00\x00\x00\x00\x00\x00xyz"); /* 7 BINUNICODE8 */
    LIT(&b, "\x8c\x03"
            "abc");                                          /* 8 SHORT_BINUNICODE */
    LIT(&b, "B\x03\x00\x00\x00\x00\x01\x02");                /* 9 BINBYTES */
    LIT(&b, "\x8e\x02\x00\x00\x00\x00\x00\x00\x00\xfe\xff"); /* 10 BINBYTES8 */
    LIT(&b, "C\x02\xff\x00");                                /* 11 SHORT_BINBYTES */
    LIT(&b, "\x96\x01\x00\x00\x00\x00\x00\x00\x00Z");        /* 12 BYTEARRAY8 */
    LIT(&b, "X\x00\x00\x00\x00");                            /* 13 empty str */
    LIT(&b, "C\x00");                                        /* 14 empty bytes */
    pk_op(&b, 'l');
    pk_stop(&b);
    pk_file *f = RUN_OK(&b, NULL);
    if (f) {
        const ckpt_value *r = pk_root(f);
        CHECK_EQ_INT(ckpt_value_len(r), 15);
        CHECK_VSTR(ckpt_value_item(r, 0), CKPT_V_STR, "a\nbAA'c\\", 8);
        CHECK_VSTR(ckpt_value_item(r, 1), CKPT_V_STR, "dq\t", 3);
        CHECK_VSTR(ckpt_value_item(r, 2), CKPT_V_STR, "caf\xc3\xa9 \xf0\x9f\x98\x80!", 11);
        CHECK_VSTR(ckpt_value_item(r, 3), CKPT_V_STR, "\xc3\xa9\\x", 4);
        CHECK_VSTR(ckpt_value_item(r, 4), CKPT_V_STR, "abc", 3);
        CHECK_VSTR(ckpt_value_item(r, 5), CKPT_V_STR, "hi", 2);
        CHECK_VSTR(ckpt_value_item(r, 6), CKPT_V_STR, "\xc3\xa9", 2);
        CHECK_VSTR(ckpt_value_item(r, 7), CKPT_V_STR, "xyz", 3);
        CHECK_VSTR(ckpt_value_item(r, 8), CKPT_V_STR, "abc", 3);
        CHECK_VSTR(ckpt_value_item(r, 9), CKPT_V_BYTES, "\x00\x01\x02", 3);
        CHECK_VSTR(ckpt_value_item(r, 10), CKPT_V_BYTES, "\xfe\xff", 2);
        CHECK_VSTR(ckpt_value_item(r, 11), CKPT_V_BYTES, "\xff\x00", 2);
        CHECK_VSTR(ckpt_value_item(r, 12), CKPT_V_BYTES, "Z", 1);
        CHECK_VSTR(ckpt_value_item(r, 13), CKPT_V_STR, "", 0);
        CHECK_VSTR(ckpt_value_item(r, 14), CKPT_V_BYTES, "", 0);
        /* NUL-terminated for convenience */
        CHECK_EQ_INT(ckpt_value_text(ckpt_value_item(r, 8), NULL)[3], 0);
        pk_close(f);
    }
    bb_free(&b);
}

static void test_containers(void)
{
    SECTION("containers");
    bb b = {0};
    pk_proto(&b, 4);
    pk_mark(&b);
    LIT(&b, "]K\x01"
            "a(K\x02K\x03"
            "e");            /* 0 [1,2,3] EMPTY_LIST APPEND APPENDS */
    LIT(&b, "(K\x04K\x05l"); /* 1 [4,5] LIST */
    LIT(&b, "}\x8c\x02k1K\x01s(\x8c\x02k2K\x02\x8c\x02k3K\x03u"); /* 2 SETITEM SETITEMS */
    LIT(&b, "(\x8c\x01"
            "aK\x01\x8c\x01"
            "bK\x02"
            "d");                      /* 3 DICT */
    LIT(&b, ")");                      /* 4 EMPTY_TUPLE */
    LIT(&b, "(K\x01K\x02K\x03K\x04t"); /* 5 TUPLE */
    LIT(&b, "K\x01\x85");              /* 6 TUPLE1 */
    LIT(&b, "K\x01K\x02\x86");         /* 7 TUPLE2 */
    LIT(&b, "K\x01K\x02K\x03\x87");    /* 8 TUPLE3 */
    LIT(&b, "\x8f(K\x07K\x08\x90");    /* 9 EMPTY_SET ADDITEMS */
    LIT(&b, "(K\x09\x91");             /* 10 FROZENSET */
    LIT(&b, "}");                      /* 11 EMPTY_DICT */
    LIT(&b, "\x8f");                   /* 12 empty set */
    LIT(&b, "(l");                     /* 13 LIST of nothing */
    pk_tuple(&b);
    pk_stop(&b);
    pk_file *f = RUN_OK(&b, NULL);
    if (f) {
        const ckpt_value *r = pk_root(f), *v;
        CHECK_KIND(r, CKPT_V_TUPLE);
        CHECK_EQ_INT(ckpt_value_len(r), 14);
        v = ckpt_value_item(r, 0);
        CHECK_KIND(v, CKPT_V_LIST);
        CHECK_EQ_INT(ckpt_value_len(v), 3);
        CHECK_VINT(ckpt_value_item(v, 0), 1);
        CHECK_VINT(ckpt_value_item(v, 2), 3);
        v = ckpt_value_item(r, 1);
        CHECK_KIND(v, CKPT_V_LIST);
        CHECK_EQ_INT(ckpt_value_len(v), 2);
        CHECK_VINT(ckpt_value_item(v, 1), 5);
        v = ckpt_value_item(r, 2);
        CHECK_KIND(v, CKPT_V_DICT);
        CHECK_EQ_INT(ckpt_value_len(v), 3);
        CHECK_VSTR(ckpt_value_key(v, 0), CKPT_V_STR, "k1", 2);
        CHECK_VSTR(ckpt_value_key(v, 2), CKPT_V_STR, "k3", 2);
        CHECK_VINT(ckpt_value_get(v, "k2"), 2);
        CHECK_VINT(ckpt_value_item(v, 2), 3);
        CHECK(ckpt_value_get(v, "nope") == NULL);
        CHECK(ckpt_value_class(v) == NULL);
        v = ckpt_value_item(r, 3);
        CHECK_KIND(v, CKPT_V_DICT);
        CHECK_EQ_INT(ckpt_value_len(v), 2);
        CHECK_VINT(ckpt_value_get(v, "b"), 2);
        v = ckpt_value_item(r, 4);
        CHECK_KIND(v, CKPT_V_TUPLE);
        CHECK_EQ_INT(ckpt_value_len(v), 0);
        v = ckpt_value_item(r, 5);
        CHECK_KIND(v, CKPT_V_TUPLE);
        CHECK_EQ_INT(ckpt_value_len(v), 4);
        CHECK_VINT(ckpt_value_item(v, 3), 4);
        for (int k = 1; k <= 3; k++) {
            v = ckpt_value_item(r, (size_t)(5 + k));
            CHECK_KIND(v, CKPT_V_TUPLE);
            CHECK_EQ_INT(ckpt_value_len(v), k);
            CHECK_VINT(ckpt_value_item(v, (size_t)(k - 1)), k);
        }
        v = ckpt_value_item(r, 9);
        CHECK_KIND(v, CKPT_V_SET);
        CHECK_EQ_INT(ckpt_value_len(v), 2);
        CHECK_VINT(ckpt_value_item(v, 1), 8);
        v = ckpt_value_item(r, 10);
        CHECK_KIND(v, CKPT_V_SET);
        CHECK_EQ_INT(ckpt_value_len(v), 1);
        CHECK_VINT(ckpt_value_item(v, 0), 9);
        CHECK_KIND(ckpt_value_item(r, 11), CKPT_V_DICT);
        CHECK_EQ_INT(ckpt_value_len(ckpt_value_item(r, 11)), 0);
        CHECK_KIND(ckpt_value_item(r, 12), CKPT_V_SET);
        CHECK_EQ_INT(ckpt_value_len(ckpt_value_item(r, 12)), 0);
        CHECK_KIND(ckpt_value_item(r, 13), CKPT_V_LIST);
        CHECK_EQ_INT(ckpt_value_len(ckpt_value_item(r, 13)), 0);
        /* accessors on the wrong kind: neutral answers */
        CHECK(ckpt_value_key(ckpt_value_item(r, 0), 0) == NULL);
        CHECK(ckpt_value_item(r, 14) == NULL);
        CHECK_EQ_INT(ckpt_value_len(ckpt_value_item(ckpt_value_item(r, 0), 0)), 0);
        pk_close(f);
    }
    bb_free(&b);
}

static void test_stack_ops(void)
{
    SECTION("POP");
    bb b = {0};
    LIT(&b, "\x80\x02K\x01K\x02"
            "0.");
    pk_file *f = RUN_OK(&b, NULL);
    if (f) CHECK_VINT(pk_root(f), 1);
    pk_close(f);
    bb_free(&b);

    SECTION("POP_MARK");
    LIT(&b, "\x80\x02K\x05(K\x06K\x07"
            "1.");
    f = RUN_OK(&b, NULL);
    if (f) CHECK_VINT(pk_root(f), 5);
    pk_close(f);
    bb_free(&b);

    SECTION("POP of a mark");
    LIT(&b, "\x80\x02K\x05(0.");
    f = RUN_OK(&b, NULL);
    if (f) CHECK_VINT(pk_root(f), 5);
    pk_close(f);
    bb_free(&b);

    SECTION("DUP");
    LIT(&b, "\x80\x02]2K\x01"
            "a\x86.");
    f = RUN_OK(&b, NULL);
    if (f) {
        const ckpt_value *r = pk_root(f);
        CHECK_KIND(r, CKPT_V_TUPLE);
        CHECK_EQ_INT(ckpt_value_len(r), 2);
        CHECK(ckpt_value_item(r, 0) == ckpt_value_item(r, 1));
        CHECK_EQ_INT(ckpt_value_len(ckpt_value_item(r, 0)), 1);
    }
    pk_close(f);
    bb_free(&b);
}

static void test_memo(void)
{
    SECTION("PUT/GET text");
    bb b = {0};
    LIT(&b, "K\x07p3\n0g3\n.");
    pk_file *f = RUN_OK(&b, NULL);
    if (f) CHECK_VINT(pk_root(f), 7);
    pk_close(f);
    bb_free(&b);

    SECTION("BINPUT/BINGET");
    LIT(&b, "\x80\x02]q\x01h\x01\x86.");
    f = RUN_OK(&b, NULL);
    if (f) {
        const ckpt_value *r = pk_root(f);
        CHECK_EQ_INT(ckpt_value_len(r), 2);
        CHECK_KIND(ckpt_value_item(r, 0), CKPT_V_LIST);
        CHECK(ckpt_value_item(r, 0) == ckpt_value_item(r, 1));
    }
    pk_close(f);
    bb_free(&b);

    SECTION("LONG_BINPUT/LONG_BINGET");
    LIT(&b, "\x80\x02K\x09r\x70\x11\x01\x00"
            "0j\x70\x11\x01\x00."); /* key 70000 */
    f = RUN_OK(&b, NULL);
    if (f) CHECK_VINT(pk_root(f), 9);
    pk_close(f);
    bb_free(&b);

    SECTION("MEMOIZE");
    /* MEMOIZE keys are len(memo): 0, then 1 */
    LIT(&b, "\x80\x04K\x0a\x94"
            "0K\x0b\x94"
            "0h\x00h\x01\x86.");
    f = RUN_OK(&b, NULL);
    if (f) {
        const ckpt_value *r = pk_root(f);
        CHECK_VINT(ckpt_value_item(r, 0), 10);
        CHECK_VINT(ckpt_value_item(r, 1), 11);
    }
    pk_close(f);
    bb_free(&b);

    SECTION("memo overwrite");
    LIT(&b, "\x80\x02K\x01q\x00"
            "0K\x02q\x00"
            "0h\x00.");
    f = RUN_OK(&b, NULL);
    if (f) CHECK_VINT(pk_root(f), 2);
    pk_close(f);
    bb_free(&b);
}

/* The memo prescan of a bounded pickle takes every 'g', 'h' and 'j' byte
 * for a GET: each GET run() makes must find its value kept, wherever the
 * key's bytes fall against the window, and the bytes that only look like
 * GETs must change nothing. */
static void test_memo_bounded(void)
{
    bb b = {0};
    for (pk_mode = 0; pk_mode <= 2; pk_mode++) {
        test_memo(); /* every GET form, as a buffer, bounded, streamed */

        SECTION("bounded prescan: a GET line's key of 22 digits");
        /* more digits than the parsing prescan reads (it keeps the memo) */
        LIT(&b, "K\x07p3\n0g0000000000000000000003\n.");
        pk_file *f = RUN_OK(&b, NULL);
        if (f) CHECK_VINT(pk_root(f), 7);
        pk_close(f);
        bb_free(&b);

        SECTION("bounded prescan: GET-like bytes inside arguments and after STOP");
        /* "h\x00" and "j" + 4 bytes inside a string, a BINGET after STOP */
        LIT(&b, "\x80\x02K\x05q\x00"
                "0X\x07\x00\x00\x00h\x00j\x01\x00\x00\x00"
                "0h\x00.h\x02");
        f = RUN_OK(&b, NULL);
        if (f) CHECK_VINT(pk_root(f), 5);
        if (f) CHECK_EQ_U64(f->used, b.n - 2);
        pk_close(f);
        bb_free(&b);

        SECTION("bounded prescan: keys across window boundaries");
        for (unsigned pad = 0; pad < 40; pad++) {
            pk_proto(&b, 2);
            LIT(&b, "K\x09r\x70\x11\x01\x00"); /* key 70000 */
            LIT(&b, "M\x34\x12q\x07");          /* key 7 */
            LIT(&b, "K\x03p12\n");               /* key 12 */
            for (unsigned k = 0; k < 6; k++) {
                unsigned n = pad + 3 * k;
                LIT(&b, "X");
                bb_le32(&b, n);
                for (unsigned i = 0; i < n; i++) bb_u8(&b, (uint8_t)"ghj9\n"[i % 5]);
                LIT(&b, "0");
            }
            LIT(&b, "j\x70\x11\x01\x00h\x07g12\n\x87.");
            f = RUN_OK(&b, NULL);
            if (f) {
                const ckpt_value *r = pk_root(f);
                CHECK_EQ_INT(ckpt_value_len(r), 3);
                CHECK_VINT(ckpt_value_item(r, 0), 9);
                CHECK_VINT(ckpt_value_item(r, 1), 0x1234);
                CHECK_VINT(ckpt_value_item(r, 2), 3);
            }
            pk_close(f);
            bb_free(&b);
        }

        SECTION("bounded prescan: a missing key is still missing");
        LIT(&b, "\x80\x02K\x01q\x00"
                "0h\x05.");
        ckpt_error e = run_fail(&b, NULL);
        CHECK_ERR(e, CKPT_E_PICKLE, 7);
        bb_free(&b);
    }
    pk_mode = 0;
}

static void test_globals(void)
{
    SECTION("GLOBAL/STACK_GLOBAL");
    bb b = {0};
    pk_proto(&b, 2); /* below 3: Python 2 names renamed (see test_py2_names) */
    pk_mark(&b);
    size_t offs[5];
    offs[0] = b.n;
    LIT(&b, "c__builtin__\nset\n"); /* GLOBAL, Python 2 module name */
    offs[1] = b.n + 16;             /* the STACK_GLOBAL opcode */
    LIT(&b, "\x8c\x08"
            "builtins"
            "\x8c\x04"
            "eval"
            "\x93");
    offs[2] = b.n + 18;
    LIT(&b, "\x8c\x0b"
            "__builtin__"
            "\x8c\x03"
            "len"
            "\x93");
    offs[3] = b.n;
    LIT(&b, "ccopy_reg\n_reconstructor\n");
    offs[4] = b.n;
    LIT(&b, "cos\nsystem\n");
    LIT(&b, "\x8c\x02hi\x85R"); /* os.system('hi'): REDUCE */
    pk_tuple(&b);
    pk_stop(&b);
    pk_file *f = RUN_OK(&b, NULL);
    if (f) {
        const ckpt_value *r = pk_root(f);
        CHECK_KIND(r, CKPT_V_TUPLE);
        CHECK_EQ_INT(ckpt_value_len(r), 5);
        CHECK_KIND(ckpt_value_item(r, 0), CKPT_V_GLOBAL);
        CHECK_STR(ckpt_value_class(ckpt_value_item(r, 0)), "builtins.set");
        CHECK_STR(ckpt_value_class(ckpt_value_item(r, 1)), "builtins.eval");
        CHECK_STR(ckpt_value_class(ckpt_value_item(r, 2)), "builtins.len");
        CHECK_STR(ckpt_value_class(ckpt_value_item(r, 3)), "copyreg._reconstructor");
        CHECK_KIND(ckpt_value_item(r, 4), CKPT_V_OBJECT);
        CHECK_STR(ckpt_value_class(ckpt_value_item(r, 4)), "os.system");
        CHECK_EQ_INT(pk_global_count(f), 5);
        static const char *const mods[5] = {"builtins", "builtins", "builtins", "copyreg", "os"};
        static const char *const names[5] = {"set", "eval", "len", "_reconstructor", "system"};
        for (size_t i = 0; i < 5; i++) {
            const ckpt_global_ref *g = pk_global_at(f, i);
            CHECK(g != NULL);
            if (!g) continue;
            CHECK_STR(g->module, mods[i]);
            CHECK_STR(g->name, names[i]);
            CHECK_STR(g->pickle, "pickle");
            CHECK_EQ_INT(g->offset, (int64_t)offs[i]);
            CHECK_EQ_INT(g->called, i == 4);
        }
        CHECK(pk_global_at(f, 5) == NULL);
        pk_close(f);
    }
    bb_free(&b);
}

/* Python 2 names, renamed as Python's unpickler renames them
 * (_compat_pickle, src/pickle/compat_pickle.inc) only while its protocol is
 * below 3: 0 before any PROTO, else the last PROTO's number. */
static void py2_case(const char *what, const char *bytes, size_t n, const char *want_mod,
                     const char *want_name)
{
    bb b = {0};
    bb_put(&b, bytes, n);
    pk_file *f = RUN_OK(&b, NULL);
    if (f) {
        const ckpt_global_ref *g = pk_global_at(f, pk_global_count(f) - 1);
        CHECK(g != NULL);
        if (g && (strcmp(g->module, want_mod) != 0 || strcmp(g->name, want_name) != 0)) {
            fprintf(stderr, "%s: got %s.%s, expected %s.%s\n", what, g->module, g->name, want_mod,
                    want_name);
            CHECK(0);
        }
        pk_close(f);
    }
    bb_free(&b);
}
#define PY2_CASE(what, lit, mod, name) py2_case((what), (lit), sizeof(lit) - 1, (mod), (name))

static void test_py2_names(void)
{
    SECTION("Python 2 names");
    /* no PROTO: protocol 0; IMPORT_MAPPING renames the module */
    PY2_CASE("proto 0 GLOBAL", "canydbm\nopen\n.", "dbm", "open");
    PY2_CASE("proto 0 STACK_GLOBAL", "\x8c\x08StringIO\x8c\x04open\x93.", "io", "open");
    /* NAME_MAPPING renames both, before IMPORT_MAPPING is asked */
    PY2_CASE("NAME_MAPPING", "\x80\x02" "c__builtin__\nintern\n.", "sys", "intern");
    PY2_CASE("NAME_MAPPING exceptions", "\x80\x02" "cexceptions\nStandardError\n.", "builtins",
             "Exception");
    PY2_CASE("MULTIPROCESSING_EXCEPTIONS", "\x80\x01" "cmultiprocessing\nTimeoutError\n.",
             "multiprocessing.context", "TimeoutError");
    PY2_CASE("dotted IMPORT_MAPPING key", "\x80\x02" "ctest.test_support\nrun_in_subinterp\n.",
             "test.support", "run_in_subinterp");
    /* exceptions is no module of IMPORT_MAPPING: only its listed names move */
    PY2_CASE("exceptions.eval stays", "\x80\x02" "cexceptions\neval\n.", "exceptions", "eval");
    /* an exact module name only: no submodule, no prefix, no embedded NUL */
    PY2_CASE("submodule stays", "\x80\x02" "cTkinter.x\nTk\n.", "Tkinter.x", "Tk");
    PY2_CASE("prefix stays", "\x80\x02" "cTkinte\nTk\n.", "Tkinte", "Tk");
    PY2_CASE("NUL stays", "\x80\x02\x8c\x08Tkinter\0\x8c\x02Tk\x93.", "Tkinter", "Tk");
    /* protocol 3 and up: nothing renamed */
    PY2_CASE("proto 3", "\x80\x03" "canydbm\nopen\n.", "anydbm", "open");
    PY2_CASE("proto 5 __builtin__", "\x80\x05" "c__builtin__\neval\n.", "__builtin__", "eval");
    /* the last PROTO rules: Unpickler.proto is set by each */
    PY2_CASE("proto 4 then 2", "\x80\x04\x80\x02" "cTkinter\nTcl\n.", "tkinter", "Tcl");
    PY2_CASE("proto 2 then 3", "\x80\x02\x80\x03" "cTkinter\nTcl\n.", "Tkinter", "Tcl");
    /* a GLOBAL before the PROTO is read at protocol 0 */
    PY2_CASE("GLOBAL before PROTO", "ccookielib\nCookieJar\n\x80\x04.", "http.cookiejar",
             "CookieJar");
}

/* Unknown classes through REDUCE, NEWOBJ, NEWOBJ_EX, INST, OBJ; BUILD. */
static void test_objects(void)
{
    SECTION("objects");
    bb b = {0};
    pk_proto(&b, 4);
    pk_mark(&b);
    /* 0: REDUCE foo.Bar(1, 2) + BUILD {'a': 1} */
    LIT(&b, "cfoo\nBar\nK\x01K\x02\x86R}\x8c\x01"
            "aK\x01sb");
    /* 1: NEWOBJ foo.Baz() with SETITEM and APPEND on it */
    LIT(&b, "cfoo\nBaz\n)\x81\x8c\x01kK\x05sK\x06"
            "a");
    /* 2: NEWOBJ_EX foo.Qux(1, k=2) */
    LIT(&b, "cfoo\nQux\nK\x01\x85}\x8c\x01kK\x02s\x92");
    /* 3: INST foo.Old(3) */
    LIT(&b, "(K\x03ifoo\nOld\n");
    /* 4: OBJ foo.Old2(4) */
    LIT(&b, "(cfoo\nOld2\nK\x04o");
    /* 5: a global that is only referenced, not called */
    LIT(&b, "cfoo\nJustRef\n");
    /* 6: REDUCE whose callable is an object (calling an instance) */
    LIT(&b, "cfoo\nF\n)R)R");
    pk_tuple(&b);
    pk_stop(&b);
    pk_file *f = RUN_OK(&b, NULL);
    if (f) {
        const ckpt_value *r = pk_root(f), *o, *a;
        CHECK_EQ_INT(ckpt_value_len(r), 7);
        o = ckpt_value_item(r, 0);
        CHECK_KIND(o, CKPT_V_OBJECT);
        CHECK_STR(ckpt_value_class(o), "foo.Bar");
        a = ckpt_object_args(o);
        CHECK_KIND(a, CKPT_V_TUPLE);
        CHECK_EQ_INT(ckpt_value_len(a), 2);
        CHECK_VINT(ckpt_value_item(a, 1), 2);
        CHECK_KIND(ckpt_object_state(o), CKPT_V_DICT);
        CHECK_VINT(ckpt_value_get(ckpt_object_state(o), "a"), 1);
        CHECK(ckpt_object_items(o) == NULL);
        CHECK(ckpt_object_list(o) == NULL);

        o = ckpt_value_item(r, 1);
        CHECK_KIND(o, CKPT_V_OBJECT);
        CHECK_STR(ckpt_value_class(o), "foo.Baz");
        CHECK_EQ_INT(ckpt_value_len(ckpt_object_args(o)), 0);
        CHECK(ckpt_object_state(o) == NULL);
        CHECK_KIND(ckpt_object_items(o), CKPT_V_DICT);
        CHECK_VINT(ckpt_value_get(ckpt_object_items(o), "k"), 5);
        CHECK_KIND(ckpt_object_list(o), CKPT_V_LIST);
        CHECK_VINT(ckpt_value_item(ckpt_object_list(o), 0), 6);

        o = ckpt_value_item(r, 2);
        CHECK_KIND(o, CKPT_V_OBJECT);
        CHECK_STR(ckpt_value_class(o), "foo.Qux");
        CHECK_EQ_INT(ckpt_value_len(ckpt_object_args(o)), 1);
        CHECK_VINT(ckpt_value_get(ckpt_object_items(o), "k"), 2);

        o = ckpt_value_item(r, 3);
        CHECK_KIND(o, CKPT_V_OBJECT);
        CHECK_STR(ckpt_value_class(o), "foo.Old");
        CHECK_EQ_INT(ckpt_value_len(ckpt_object_args(o)), 1);
        CHECK_VINT(ckpt_value_item(ckpt_object_args(o), 0), 3);

        o = ckpt_value_item(r, 4);
        CHECK_KIND(o, CKPT_V_OBJECT);
        CHECK_STR(ckpt_value_class(o), "foo.Old2");
        CHECK_EQ_INT(ckpt_value_len(ckpt_object_args(o)), 1);
        CHECK_VINT(ckpt_value_item(ckpt_object_args(o), 0), 4);

        CHECK_KIND(ckpt_value_item(r, 5), CKPT_V_GLOBAL);
        CHECK_KIND(ckpt_value_item(r, 6), CKPT_V_OBJECT);
        CHECK_STR(ckpt_value_class(ckpt_value_item(r, 6)), "foo.F");

        /* globals: Bar Baz Qux Old Old2 JustRef F, called all but JustRef */
        CHECK_EQ_INT(pk_global_count(f), 7);
        for (size_t i = 0; i < pk_global_count(f); i++) {
            const ckpt_global_ref *g = pk_global_at(f, i);
            CHECK_STR(g->module, "foo");
            CHECK_EQ_INT(g->called, strcmp(g->name, "JustRef") != 0);
        }
        pk_close(f);
    }
    bb_free(&b);
}

/* What PyTorch's loader interprets: OrderedDict, _codecs.encode, set(...). */
static void test_known_callables(void)
{
    SECTION("known callables");
    bb b = {0};
    pk_proto(&b, 2);
    pk_mark(&b);
    /* 0: OrderedDict() + SETITEMS + BUILD of _metadata (ignored) */
    LIT(&b, "ccollections\nOrderedDict\n)R(X\x01\x00\x00\x00"
            "aK\x01u}X\x09\x00\x00\x00_metadata}sb");
    /* 1: _codecs.encode(u'\xffA\x00', 'latin1') */
    LIT(&b, "c_codecs\nencode\nX\x04\x00\x00\x00\xc3\xbf"
            "A\x00X\x06\x00\x00\x00latin1\x86R");
    /* 2: __builtin__.set([1, 2]) */
    LIT(&b, "c__builtin__\nset\n](K\x01K\x02"
            "e\x85R");
    /* 3: OrderedDict([('x', 1)]) */
    LIT(&b, "ccollections\nOrderedDict\n]X\x01\x00\x00\x00xK\x01\x86"
            "a\x85R");
    /* 4: builtins.frozenset((3,)) */
    LIT(&b, "c__builtin__\nfrozenset\nK\x03\x85\x85R");
    /* 5: defaultdict(list) */
    LIT(&b, "ccollections\ndefaultdict\nc__builtin__\nlist\n\x85R");
    /* 6: a plain dict() */
    LIT(&b, "c__builtin__\ndict\n)R");
    pk_tuple(&b);
    pk_stop(&b);
    pk_file *f = RUN_OK(&b, NULL);
    if (f) {
        const ckpt_value *r = pk_root(f), *v;
        CHECK_EQ_INT(ckpt_value_len(r), 7);
        v = ckpt_value_item(r, 0);
        CHECK_KIND(v, CKPT_V_DICT);
        CHECK_STR(ckpt_value_class(v), "collections.OrderedDict");
        CHECK_EQ_INT(ckpt_value_len(v), 1);
        CHECK_VINT(ckpt_value_get(v, "a"), 1);
        CHECK(ckpt_value_get(v, "_metadata") == NULL);
        v = ckpt_value_item(r, 1);
        CHECK_VSTR(v, CKPT_V_BYTES,
                   "\xff"
                   "A\x00",
                   3);
        v = ckpt_value_item(r, 2);
        CHECK_KIND(v, CKPT_V_SET);
        CHECK_EQ_INT(ckpt_value_len(v), 2);
        CHECK_VINT(ckpt_value_item(v, 1), 2);
        v = ckpt_value_item(r, 3);
        CHECK_KIND(v, CKPT_V_DICT);
        CHECK_STR(ckpt_value_class(v), "collections.OrderedDict");
        CHECK_VINT(ckpt_value_get(v, "x"), 1);
        v = ckpt_value_item(r, 4);
        CHECK_KIND(v, CKPT_V_SET);
        CHECK_EQ_INT(ckpt_value_len(v), 1);
        v = ckpt_value_item(r, 5);
        CHECK_KIND(v, CKPT_V_DICT);
        CHECK_STR(ckpt_value_class(v), "collections.defaultdict");
        v = ckpt_value_item(r, 6);
        CHECK_KIND(v, CKPT_V_DICT);
        CHECK(ckpt_value_class(v) == NULL);
        pk_close(f);
    }
    bb_free(&b);
}

/* FRAME, PROTO 5, NEWTRUE/NEWFALSE, NONE, READONLY_BUFFER. */
static void test_misc_ops(void)
{
    SECTION("FRAME/PROTO/bools/none");
    bb b = {0};
    pk_proto(&b, 5);
    bb_u8(&b, 0x95);
    bb_le64(&b, 9);
    LIT(&b, "(\x88\x89N");
    LIT(&b, "C\x01z\x98"); /* READONLY_BUFFER on bytes */
    LIT(&b, "t.");
    pk_file *f = RUN_OK(&b, NULL);
    if (f) {
        const ckpt_value *r = pk_root(f);
        CHECK_EQ_INT(ckpt_value_len(r), 4);
        CHECK_KIND(ckpt_value_item(r, 0), CKPT_V_BOOL);
        CHECK_EQ_INT(ckpt_value_bool(ckpt_value_item(r, 0)), 1);
        CHECK_EQ_INT(ckpt_value_int(ckpt_value_item(r, 0)), 1);
        CHECK_KIND(ckpt_value_item(r, 1), CKPT_V_BOOL);
        CHECK_EQ_INT(ckpt_value_bool(ckpt_value_item(r, 1)), 0);
        CHECK_KIND(ckpt_value_item(r, 2), CKPT_V_NONE);
        CHECK_VSTR(ckpt_value_item(r, 3), CKPT_V_BYTES, "z", 1);
        CHECK_EQ_INT(pk_note_count(f), 0);
        pk_close(f);
    }
    bb_free(&b);

    SECTION("protocol 0 and 1 pickles");
    LIT(&b, "(lp0\nI1\naI2\na.");
    f = RUN_OK(&b, NULL);
    if (f) {
        CHECK_KIND(pk_root(f), CKPT_V_LIST);
        CHECK_EQ_INT(ckpt_value_len(pk_root(f)), 2);
        CHECK_VINT(ckpt_value_item(pk_root(f), 1), 2);
    }
    pk_close(f);
    bb_free(&b);
    LIT(&b, "}q\x00(X\x01\x00\x00\x00"
            "aq\x01K\x01u.");
    f = RUN_OK(&b, NULL);
    if (f) CHECK_VINT(ckpt_value_get(pk_root(f), "a"), 1);
    pk_close(f);
    bb_free(&b);
}

/* ------------------------------------------------------------------------ */

static void test_errors(void)
{
    bb b = {0};
    SECTION("unknown opcode");
    LIT(&b, "\x80\x02K\x01\xff.");
    EXPECT_FAIL(&b, NULL, CKPT_E_PICKLE, 4, "unknown pickle opcode 0xff");
    bb_free(&b);

    SECTION("stack underflow");
    LIT(&b, "\x80\x02K\x01"
            "00.");
    EXPECT_FAIL(&b, NULL, CKPT_E_PICKLE, 5, "stack underflow");
    bb_free(&b);

    SECTION("underflow at a mark");
    LIT(&b, "\x80\x02K\x01(a.");
    EXPECT_FAIL(&b, NULL, CKPT_E_PICKLE, 5, "stack underflow");
    bb_free(&b);

    SECTION("STOP on an empty stack");
    LIT(&b, "\x80\x02.");
    EXPECT_FAIL(&b, NULL, CKPT_E_PICKLE, 2, "stack underflow");
    bb_free(&b);

    SECTION("memo key missing");
    LIT(&b, "\x80\x02K\x01q\x01h\x05.");
    EXPECT_FAIL(&b, NULL, CKPT_E_PICKLE, 6, "memo key 5");
    bb_free(&b);

    SECTION("SETITEM on a list");
    LIT(&b, "\x80\x02]K\x01K\x02s.");
    EXPECT_FAIL(&b, NULL, CKPT_E_PICKLE, 7, "SETITEM on a list");
    bb_free(&b);

    SECTION("SETITEMS on a tuple");
    LIT(&b, "\x80\x02)(K\x01K\x02u.");
    EXPECT_FAIL(&b, NULL, CKPT_E_PICKLE, 8, "SETITEM on a tuple");
    bb_free(&b);

    SECTION("APPEND on a dict");
    LIT(&b, "\x80\x02}K\x01"
            "a.");
    EXPECT_FAIL(&b, NULL, CKPT_E_PICKLE, 5, "APPEND to a dict");
    bb_free(&b);

    SECTION("APPENDS on a str");
    LIT(&b, "\x80\x02X\x00\x00\x00\x00(K\x01"
            "e.");
    EXPECT_FAIL(&b, NULL, CKPT_E_PICKLE, 10, "APPEND to a str");
    bb_free(&b);

    SECTION("BUILD on an int");
    LIT(&b, "\x80\x02K\x01}b.");
    EXPECT_FAIL(&b, NULL, CKPT_E_PICKLE, 5, "BUILD on a int");
    bb_free(&b);

    SECTION("truncated BINUNICODE length");
    LIT(&b, "\x80\x02X\x01\x00");
    EXPECT_FAIL(&b, NULL, CKPT_E_PICKLE, 2, "truncated");
    bb_free(&b);

    SECTION("BINUNICODE longer than the pickle");
    LIT(&b, "\x80\x02K\x00X\x10\x00\x00\x00"
            "ab.");
    EXPECT_FAIL(&b, NULL, CKPT_E_PICKLE, 4, "truncated");
    bb_free(&b);

    SECTION("LONG4 negative length");
    LIT(&b, "\x80\x02\x8b\xff\xff\xff\xff.");
    EXPECT_FAIL(&b, NULL, CKPT_E_PICKLE, 2, "negative");
    bb_free(&b);

    SECTION("EXT1");
    LIT(&b, "\x80\x02\x82\x01.");
    EXPECT_FAIL(&b, NULL, CKPT_E_UNSUPPORTED, 2, "extension registry");
    bb_free(&b);

    SECTION("EXT2/EXT4");
    LIT(&b, "\x80\x02N0\x83\x01\x00.");
    EXPECT_FAIL(&b, NULL, CKPT_E_UNSUPPORTED, 4, "extension registry");
    bb_free(&b);
    LIT(&b, "\x80\x02\x84\x01\x00\x00\x00.");
    EXPECT_FAIL(&b, NULL, CKPT_E_UNSUPPORTED, 2, "extension registry");
    bb_free(&b);

    SECTION("NEXT_BUFFER");
    LIT(&b, "\x80\x05K\x01\x97.");
    EXPECT_FAIL(&b, NULL, CKPT_E_UNSUPPORTED, 4, "out-of-band buffer");
    bb_free(&b);

    SECTION("no STOP");
    LIT(&b, "\x80\x02K\x01");
    EXPECT_FAIL(&b, NULL, CKPT_E_PICKLE, 4, "without STOP");
    bb_free(&b);

    SECTION("persistent id in a plain pickle");
    LIT(&b, "\x80\x02K\x01Q.");
    EXPECT_FAIL(&b, NULL, CKPT_E_PICKLE, 4, "persistent id");
    bb_free(&b);
    LIT(&b, "(P0\nt.");
    EXPECT_FAIL(&b, NULL, CKPT_E_PICKLE, 1, "persistent id");
    bb_free(&b);

    SECTION("protocol 6");
    LIT(&b, "\x80\x06N.");
    EXPECT_FAIL(&b, NULL, CKPT_E_PICKLE, 0, "protocol 6");
    bb_free(&b);

    SECTION("DICT odd items");
    LIT(&b, "\x80\x02(K\x01"
            "d.");
    EXPECT_FAIL(&b, NULL, CKPT_E_PICKLE, 5, "odd");
    bb_free(&b);

    SECTION("bad STRING quoting");
    LIT(&b, "S'abc\n.");
    EXPECT_FAIL(&b, NULL, CKPT_E_PICKLE, 0, "quoted");
    bb_free(&b);

    SECTION("bad INT text");
    LIT(&b, "(I12x\nt.");
    EXPECT_FAIL(&b, NULL, CKPT_E_PICKLE, 1, "integer");
    bb_free(&b);

    SECTION("STACK_GLOBAL of non-strings");
    LIT(&b, "\x80\x04K\x01K\x02\x93.");
    EXPECT_FAIL(&b, NULL, CKPT_E_PICKLE, 6, "STACK_GLOBAL");
    bb_free(&b);

    SECTION("not a pickle");
    LIT(&b, "\x00\x01\x02\x03");
    EXPECT_FAIL(&b, NULL, CKPT_E_PICKLE, 0,
                "unknown pickle opcode 0x00"); /* the container says "not a checkpoint" */
    bb_free(&b);
}

/* ------------------------------------------------------------------------ */

static void test_limits(void)
{
    ckpt_options o;
    bb b = {0};

    SECTION("max_ops");
    LIT(&b, "\x80\x02N.");
    ckpt_options_init(&o);
    o.max_ops = 3;
    pk_file *f = RUN_OK(&b, &o);
    pk_close(f);
    o.max_ops = 2;
    EXPECT_FAIL(&b, &o, CKPT_E_LIMIT, 3, "opcodes");
    bb_free(&b);

    SECTION("max_stack");
    ckpt_options_init(&o);
    o.max_stack = 20;
    for (int i = 0; i < 20; i++) LIT(&b, "N");
    bb_put(&b, "0000000000000000000.", 20);
    f = RUN_OK(&b, &o); /* 20 entries: at the limit */
    pk_close(f);
    bb_free(&b);
    for (int i = 0; i < 21; i++) LIT(&b, "N");
    bb_put(&b, "00000000000000000000.", 21);
    EXPECT_FAIL(&b, &o, CKPT_E_LIMIT, 20, "stack");
    bb_free(&b);
    /* marks count too: 19 marks + 2 values */
    for (int i = 0; i < 19; i++) LIT(&b, "(");
    LIT(&b, "NN.");
    EXPECT_FAIL(&b, &o, CKPT_E_LIMIT, 20, "stack");
    bb_free(&b);
    /* well past the limit */
    for (int i = 0; i < 200; i++) LIT(&b, "N");
    LIT(&b, ".");
    {
        ckpt_error e = run_fail(&b, &o);
        CHECK_EQ_INT(e.code, CKPT_E_LIMIT);
        CHECK(e.offset >= 20 && e.offset <= 40);
    }
    bb_free(&b);

    SECTION("max_memo");
    ckpt_options_init(&o);
    o.max_memo = 4; /* keys below max_memo + the pickle's 7 bytes: 11 */
    LIT(&b, "\x80\x02K\x01q\x0a.");
    f = RUN_OK(&b, &o);
    pk_close(f);
    bb_free(&b);
    LIT(&b, "\x80\x02K\x01q\x0b.");
    EXPECT_FAIL(&b, &o, CKPT_E_LIMIT, 4, "memo");
    bb_free(&b);
    LIT(&b, "\x80\x02K\x01r\xff\xff\xff\x7f.");
    EXPECT_FAIL(&b, &o, CKPT_E_LIMIT, 4, "memo");
    bb_free(&b);

    /* a list nested `levels` deep, each level made with the memo:
     * L = []; repeat: L = [L] (memo 0 holds the newest) */
    SECTION("max_depth");
    ckpt_options_init(&o);
    o.max_depth = 10;
    for (int levels = 10; levels <= 11; levels++) {
        bb_free(&b);
        LIT(&b, "\x80\x02]q\x00"
                "0");
        for (int i = 0; i < levels; i++)
            LIT(&b, "]h\x00"
                    "aq\x00"
                    "0");
        LIT(&b, "h\x00.");
        if (levels == 10) {
            f = RUN_OK(&b, &o);
            if (f) {
                const ckpt_value *v = pk_root(f);
                int d = 0;
                while (ckpt_value_len(v) == 1) {
                    v = ckpt_value_item(v, 0);
                    d++;
                }
                CHECK_EQ_INT(d, 10);
                CHECK_KIND(v, CKPT_V_LIST);
            }
            pk_close(f);
        } else { /* max_depth is the walk's limit (test_plain.c): the machine never recurses */
            f = RUN_OK(&b, &o);
            pk_close(f);
        }
    }
    bb_free(&b);
    /* the default depth limit stops a 5000-deep nest cleanly */
    LIT(&b, "\x80\x02]q\x00"
            "0");
    for (int i = 0; i < 5000; i++)
        LIT(&b, "]h\x00"
                "aq\x00"
                "0");
    LIT(&b, "h\x00.");
    f = RUN_OK(&b, NULL); /* the machine builds it; the walk stops it (test_plain.c) */
    pk_close(f);
    bb_free(&b);

    /* billion laughs: n marks, [], then n x (DUP, LIST): each level is a list
     * holding the level below twice: 2^(n+1) - 1 nodes if walked naively.
     * A subtree without tensors is walked once, so it opens at once; the
     * visits still count against max_expansion. */
    SECTION("max_expansion");
    ckpt_options_init(&o);
    o.max_expansion = 1000;
    for (int n = 0; n < 5; n++) LIT(&b, "(");
    LIT(&b, "]");
    for (int n = 0; n < 5; n++) LIT(&b, "2l");
    LIT(&b, ".");
    f = RUN_OK(&b, &o);
    if (f) {
        const ckpt_value *r = pk_root(f);
        CHECK_EQ_INT(ckpt_value_len(r), 2);
        CHECK(ckpt_value_item(r, 0) == ckpt_value_item(r, 1));
    }
    pk_close(f);
    bb_free(&b);
    for (int n = 0; n < 60; n++) LIT(&b, "(");
    LIT(&b, "]");
    for (int n = 0; n < 60; n++) LIT(&b, "2l");
    LIT(&b, ".");
    f = RUN_OK(&b, NULL); /* 2^61 nodes if expanded: must not be */
    pk_close(f);
    bb_free(&b);
    /* fan-out: one list met n times from the root costs 1 + n visits, and
     * its n 2-byte references add n / 2 + ... to the budget: linear sharing
     * stays within max_expansion + pickle bytes / 2 whatever n is */
    LIT(&b, "\x80\x02]q\x00"
            "0(");
    for (int i = 0; i < 5000; i++) LIT(&b, "h\x00");
    LIT(&b, "l.");
    f = RUN_OK(&b, &o);
    if (f) CHECK_EQ_INT(ckpt_value_len(pk_root(f)), 5000);
    pk_close(f);
    bb_free(&b);
    /* references of one byte each (DUP) copy nothing: the machine runs it
     * even with max_expansion 0 (the walk's 1 + n visits fail, test_plain.c) */
    o.max_expansion = 0;
    LIT(&b, "\x80\x02(]");
    for (int i = 0; i < 4999; i++) LIT(&b, "2");
    LIT(&b, "l.");
    {
        ckpt_error e;
        pk_file *g = pk_run(&b, &o, &e);
        CHECK(g != NULL);
        if (g) CHECK_EQ_INT(ckpt_value_len(pk_root(g)), 5000);
        pk_close(g);
    }
    bb_free(&b);
    o.max_expansion = 1000;

    SECTION("max_pickle_bytes");
    ckpt_options_init(&o);
    o.max_pickle_bytes = 8;
    /* a string longer than the limit */
    LIT(&b, "\x80\x02X\x10\x00\x00\x00"
            "0123456789abcdef.");
    {
        ckpt_error e = run_fail(&b, &o);
        CHECK_EQ_INT(e.code, CKPT_E_LIMIT);
    }
    bb_free(&b);
    /* a pickle of 15 small opcodes, longer than the 8-byte limit: a limit
     * error, not a truncated pickle (the memory source reads it in place) */
    LIT(&b, "\x80\x02(K\x01K\x02K\x03K\x04K\x05l.");
    {
        ckpt_error e = run_fail(&b, &o);
        CHECK_EQ_INT(e.code, CKPT_E_LIMIT);
        CHECK_CONTAINS(e.message, "limit");
    }
    o.max_pickle_bytes = 15;
    f = RUN_OK(&b, &o);
    pk_close(f);
    bb_free(&b);
}

/* ------------------------------------------------------------------------ */

static void test_notes(void)
{
    SECTION("note: second PROTO");
    bb b = {0};
    LIT(&b, "\x80\x02\x80\x02N.");
    pk_file *f = RUN_OK(&b, NULL);
    if (f) {
        CHECK_EQ_INT(pk_note_count(f), 1);
        CHECK_CONTAINS(pk_note_at(f, 0), "PROTO");
        CHECK_CONTAINS(pk_note_at(f, 0), "byte 2");
        CHECK(pk_note_at(f, 1) == NULL);
    }
    pk_close(f);
    bb_free(&b);

    SECTION("note: data after STOP");
    LIT(&b, "\x80\x02N.XYZ");
    f = RUN_OK(&b, NULL);
    if (f) {
        CHECK_KIND(pk_root(f), CKPT_V_NONE);
        CHECK_EQ_INT(f->used, 4); /* the caller sees what is left: the plain format notes it */
        CHECK_EQ_INT(pk_note_count(f), 0);
    }
    pk_close(f);
    bb_free(&b);
}

/* options.on_global: every global, once, even when the pickle then fails. */
typedef struct seen_globals {
    int n;
    char names[8][64];
    int called[8];
} seen_globals;

static void on_global_cb(void *ctx, const ckpt_global_ref *g)
{
    seen_globals *s = ctx;
    if (s->n < 8) {
        snprintf(s->names[s->n], sizeof s->names[0], "%s.%s", g->module, g->name);
        s->called[s->n] = g->called;
    }
    s->n++;
}

static void test_on_global(void)
{
    SECTION("on_global");
    bb b = {0};
    LIT(&b, "\x80\x02"
            "cos\nsystem\nX\x02\x00\x00\x00lsq\x00\x85R"
            "c__builtin__\neval\n"
            "\xff.");
    seen_globals s;
    memset(&s, 0, sizeof s);
    ckpt_options o;
    ckpt_options_init(&o);
    o.on_global = on_global_cb;
    o.on_global_ctx = &s;
    EXPECT_FAIL(&b, &o, CKPT_E_PICKLE, (int64_t)b.n - 2, "unknown pickle opcode");
    CHECK_EQ_INT(s.n, 2);
    CHECK_STR(s.names[0], "os.system");
    CHECK_EQ_INT(s.called[0], 1);
    CHECK_STR(s.names[1], "builtins.eval");
    CHECK_EQ_INT(s.called[1], 0);
    bb_free(&b);

    memset(&s, 0, sizeof s);
    LIT(&b, "\x80\x02"
            "ccollections\nOrderedDict\n)R.");
    pk_file *f = RUN_OK(&b, &o);
    CHECK_EQ_INT(s.n, 1);
    CHECK_STR(s.names[0], "collections.OrderedDict");
    CHECK_EQ_INT(s.called[0], 1);
    pk_close(f);
    CHECK_EQ_INT(s.n, 1);
    bb_free(&b);
}

/* ---- hooks ---------------------------------------------------------------- */

typedef struct hook_log {
    int find_class, reduce, newobj, persistent;
    int64_t pid_pos;
    ck_unpickler *u;
} hook_log;

/* find_class: tag every global of module "mod" (aux 7). */
static void tag_mod(void *ud, ckpt_value *g)
{
    hook_log *l = ud;
    l->find_class++;
    if (strcmp(g->u.g->module, "mod") == 0) {
        g->gid = CK_TAG_HOOK;
        g->aux = 7;
    }
}

/* reduce: one argument -> that argument; three -> an error; else decline. */
static int reduce_hook(void *ud, ck_machine *m, ckpt_value *callable, ckpt_value *args, bool newobj,
                       ckpt_value **out)
{
    hook_log *l = ud;
    l->reduce++;
    if (newobj) l->newobj++;
    if (callable->aux != 7)
        return ck_machine_fail(m, CKPT_E_ARG, "reduce hook got an untagged callable");
    if (!newobj && args->u.seq.n == 1) {
        *out = args->u.seq.v[0];
        return 0;
    }
    if (args->u.seq.n == 3)
        return ck_machine_fail(m, CKPT_E_UNSUPPORTED, "hook refuses %zu arguments", args->u.seq.n);
    return 1;
}

static ckpt_value *pid_hook(void *ud, ckpt_value *pid, int64_t pos, ckpt_error *err)
{
    hook_log *l = ud;
    l->persistent++;
    l->pid_pos = pos;
    if (!ck_is_str(pid, "ok")) {
        ck_fail(err, CKPT_E_FORMAT, pos, "unknown persistent id");
        return NULL;
    }
    return ck_new_str(l->u, CKPT_V_STR, "loaded", 6);
}

static void test_hooks(void)
{
    SECTION("hooks: find_class and reduce");
    hook_log l;
    memset(&l, 0, sizeof l);
    ck_pickle_hooks h = {.ud = &l, .find_class = tag_mod, .reduce = reduce_hook};
    bb b = {0};
    pk_proto(&b, 2);
    pk_mark(&b);
    LIT(&b, "cmod\nFn\nK\x05\x85R");      /* 0: mod.Fn(5) -> 5 (interpreted) */
    LIT(&b, "cmod\nFn\nK\x01K\x02\x86R"); /* 1: mod.Fn(1, 2): declined, an object */
    LIT(&b, "cmod\nCls\n)\x81");          /* 2: NEWOBJ mod.Cls(): declined */
    LIT(&b, "c__builtin__\nset\n)R");     /* 3: Python's own: no hook */
    LIT(&b, "cother\nFn\nK\x05\x85R");    /* 4: untagged: an object, no hook */
    pk_tuple(&b);
    pk_stop(&b);
    ckpt_error e;
    pk_file *f = pk_run_hooks(&b, NULL, &h, &e);
    CHECK(f != NULL);
    if (f) {
        const ckpt_value *r = pk_root(f);
        CHECK_EQ_INT(ckpt_value_len(r), 5);
        CHECK_VINT(ckpt_value_item(r, 0), 5);
        CHECK_KIND(ckpt_value_item(r, 1), CKPT_V_OBJECT);
        CHECK_STR(ckpt_value_class(ckpt_value_item(r, 1)), "mod.Fn");
        CHECK_EQ_INT(ckpt_value_len(ckpt_object_args(ckpt_value_item(r, 1))), 2);
        CHECK_KIND(ckpt_value_item(r, 2), CKPT_V_OBJECT);
        CHECK_STR(ckpt_value_class(ckpt_value_item(r, 2)), "mod.Cls");
        CHECK_KIND(ckpt_value_item(r, 3), CKPT_V_SET);
        CHECK_KIND(ckpt_value_item(r, 4), CKPT_V_OBJECT);
        CHECK_EQ_INT(pk_global_count(f), 5);
        for (size_t i = 0; i < 5; i++) CHECK_EQ_INT(pk_global_at(f, i)->called, 1);
    }
    pk_close(f);
    CHECK_EQ_INT(l.find_class, 4); /* every global but builtins.set */
    CHECK_EQ_INT(l.reduce, 3);     /* the three calls of mod.* */
    CHECK_EQ_INT(l.newobj, 1);
    bb_free(&b);

    SECTION("hooks: reduce fails at the REDUCE opcode");
    pk_proto(&b, 2);
    LIT(&b, "cmod\nFn\nK\x01K\x02K\x03\x87");
    size_t at = b.n;
    LIT(&b, "R.");
    f = pk_run_hooks(&b, NULL, &h, &e);
    CHECK(f == NULL);
    CHECK_ERR(e, CKPT_E_UNSUPPORTED, (int64_t)at);
    CHECK_CONTAINS(e.message, "hook refuses 3 arguments");
    pk_close(f);
    bb_free(&b);

    SECTION("hooks: persistent_load");
    memset(&l, 0, sizeof l);
    h.persistent_load = pid_hook;
    h.pl_ud = &l;
    pk_proto(&b, 2);
    LIT(&b, "X\x02\x00\x00\x00ok");
    at = b.n;
    LIT(&b, "Q.");
    {
        /* the hook allocates in the unpickler it is given */
        pk_file *g = calloc(1, sizeof *g);
        if (!g) abort();
        ckpt_options_init(&g->opt);
        g->u.arena = &g->arena;
        g->u.opt = &g->opt;
        g->u.input_size = b.n;
        g->u.hooks = h;
        l.u = &g->u;
        ck_pickle_in in = {.buf = b.p, .len = b.n, .base = 100, .label = "pid"};
        memset(&e, 0, sizeof e);
        int r = ck_pickle_run(&g->u, &in, &g->root, &g->used, &e);
        CHECK_EQ_INT(r, 0);
        if (r == 0) CHECK_VSTR(g->root, CKPT_V_STR, "loaded", 6);
        CHECK_EQ_INT(l.persistent, 1);
        CHECK_EQ_INT(l.pid_pos, 100 + (int64_t)at); /* input offsets start at base */

        /* a second pickle through the same unpickler: ids go on, bytes add up */
        uint32_t ids = g->u.next_id;
        uint64_t bytes = g->u.pickle_bytes;
        CHECK_EQ_U64(bytes, b.n);
        bb c = {0};
        LIT(&c, "\x80\x02X\x02\x00\x00\x00no");
        size_t at2 = c.n;
        LIT(&c, "Q.");
        ck_pickle_in in2 = {.buf = c.p, .len = c.n, .base = 0, .label = "pid"};
        ckpt_value *v = NULL;
        size_t used = 0;
        r = ck_pickle_run(&g->u, &in2, &v, &used, &e);
        CHECK_EQ_INT(r, -1);
        CHECK_ERR(e, CKPT_E_FORMAT, (int64_t)at2);
        CHECK(g->u.next_id > ids);
        CHECK_EQ_U64(g->u.pickle_bytes, bytes); /* a failed pickle adds nothing */
        bb_free(&c);
        pk_close(g);
    }
    bb_free(&b);

    SECTION("hooks: none for persistent ids");
    pk_proto(&b, 2);
    LIT(&b, "X\x02\x00\x00\x00ok");
    at = b.n;
    LIT(&b, "Q.");
    EXPECT_FAIL(&b, NULL, CKPT_E_PICKLE, (int64_t)at, "persistent id");
    bb_free(&b);

    SECTION("hooks: a pickle cut short asks for more");
    pk_proto(&b, 2);
    LIT(&b, "X\x05\x00\x00\x00hel");
    {
        ck_arena a = {0};
        ckpt_options o;
        ckpt_options_init(&o);
        ck_unpickler u = {.arena = &a, .opt = &o, .input_size = 100};
        ck_pickle_in in = {.buf = b.p, .len = b.n, .more = true, .base = 0, .label = "cut"};
        ckpt_value *v = NULL;
        size_t used = 0;
        memset(&e, 0, sizeof e);
        CHECK_EQ_INT(ck_pickle_run(&u, &in, &v, &used, &e), 1);
        ck_unpickler_free(&u);
        ck_arena_free(&a);
    }
    bb_free(&b);
}

int main(void)
{
    test_text_ints();
    test_binary_longs();
    test_long1_nonminimal();
    test_floats();
    test_strings();
    test_containers();
    test_stack_ops();
    test_memo_bounded(); /* test_memo() three ways */
    test_globals();
    test_py2_names();
    test_objects();
    test_known_callables();
    test_misc_ops();
    test_errors();
    test_limits();
    test_notes();
    test_on_global();
    test_hooks();
    return ut_summary();
}
