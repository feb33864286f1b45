/*
 * test_plain.c - plain pickles opened from memory through the public API (a
 * file that is only a pickle opens as format "pickle"): every opcode of
 * protocols 0-5, errors with their codes and byte offsets, the limits of
 * ckpt_options (the machine's and the walk's), notes, options.key and the
 * globals table, end to end.  test_pickle.c drives the machine alone.
 */
#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L
#endif
#include "ckpt.h"
#include "harness.h"
#include "build.h"

#include <math.h>

#define LIT(b, s) bb_put((b), (s), sizeof(s) - 1)

#define EXPECT_FAIL(b, o, code, off, msg)                                                          \
    do {                                                                                           \
        ckpt_error e_ = open_fail((b), (o));                                                       \
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

static void test_format(void)
{
    SECTION("format");
    bb b = {0};
    pk_proto(&b, 2);
    pk_none(&b);
    pk_stop(&b);
    ckpt_file *f = OPEN_OK(&b, NULL);
    if (f) {
        ckpt_info info;
        ckpt_get_info(f, &info);
        CHECK_EQ_INT(info.format, CKPT_FORMAT_PICKLE);
        CHECK_STR(ckpt_format_name(info.format), "pickle");
        CHECK_EQ_INT(info.tensor_count, 0);
        CHECK_EQ_INT(info.storage_count, 0);
        CHECK_EQ_U64(info.file_size, b.n);
        CHECK_STR(info.version, "");
        CHECK_STR(info.root, "");
        CHECK(ckpt_root(f) != NULL);
        CHECK_KIND(ckpt_root(f), CKPT_V_NONE);
        CHECK_EQ_INT(ckpt_note_count(f), 0);
        CHECK_EQ_INT(ckpt_global_count(f), 0);
        ckpt_close(f);
    }
    bb_free(&b);
}

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
    ckpt_file *f = OPEN_OK(&b, NULL);
    if (f) {
        const ckpt_value *r = ckpt_root(f);
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
        ckpt_close(f);
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
    ckpt_file *f = OPEN_OK(&b, NULL);
    if (f) {
        const ckpt_value *r = ckpt_root(f);
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
        ckpt_close(f);
    }
    bb_free(&b);

    /* 10**27 = 0x033b2e3c9fd0803ce8000000: chunks of nine zero digits */
    SECTION("LONG1 10**27");
    memset(&b, 0, sizeof b);
    pk_proto(&b, 2);
    LIT(&b, "\x8a\x0c\x00\x00\x00\xe8\x3c\x80\xd0\x9f\x3c\x2e\x3b\x03");
    pk_stop(&b);
    f = OPEN_OK(&b, NULL);
    if (f) {
        CHECK_BIG(ckpt_root(f), "1000000000000000000000000000");
        ckpt_close(f);
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
    ckpt_file *f = OPEN_OK(&b, NULL);
    if (f) {
        const ckpt_value *r = ckpt_root(f);
        CHECK_VINT(ckpt_value_item(r, 0), -1);
        CHECK_VINT(ckpt_value_item(r, 1), 5);
        ckpt_close(f);
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
    ckpt_file *f = OPEN_OK(&b, NULL);
    if (f) {
        const ckpt_value *r = ckpt_root(f);
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
        ckpt_close(f);
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
    ckpt_file *f = OPEN_OK(&b, NULL);
    if (f) {
        const ckpt_value *r = ckpt_root(f);
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
        ckpt_close(f);
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
    ckpt_file *f = OPEN_OK(&b, NULL);
    if (f) {
        const ckpt_value *r = ckpt_root(f), *v;
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
        ckpt_close(f);
    }
    bb_free(&b);
}

static void test_stack_ops(void)
{
    SECTION("POP");
    bb b = {0};
    LIT(&b, "\x80\x02K\x01K\x02"
            "0.");
    ckpt_file *f = OPEN_OK(&b, NULL);
    if (f) CHECK_VINT(ckpt_root(f), 1);
    ckpt_close(f);
    bb_free(&b);

    SECTION("POP_MARK");
    LIT(&b, "\x80\x02K\x05(K\x06K\x07"
            "1.");
    f = OPEN_OK(&b, NULL);
    if (f) CHECK_VINT(ckpt_root(f), 5);
    ckpt_close(f);
    bb_free(&b);

    SECTION("POP of a mark");
    LIT(&b, "\x80\x02K\x05(0.");
    f = OPEN_OK(&b, NULL);
    if (f) CHECK_VINT(ckpt_root(f), 5);
    ckpt_close(f);
    bb_free(&b);

    SECTION("DUP");
    LIT(&b, "\x80\x02]2K\x01"
            "a\x86.");
    f = OPEN_OK(&b, NULL);
    if (f) {
        const ckpt_value *r = ckpt_root(f);
        CHECK_KIND(r, CKPT_V_TUPLE);
        CHECK_EQ_INT(ckpt_value_len(r), 2);
        CHECK(ckpt_value_item(r, 0) == ckpt_value_item(r, 1));
        CHECK_EQ_INT(ckpt_value_len(ckpt_value_item(r, 0)), 1);
    }
    ckpt_close(f);
    bb_free(&b);
}

static void test_memo(void)
{
    SECTION("PUT/GET text");
    bb b = {0};
    LIT(&b, "K\x07p3\n0g3\n.");
    ckpt_file *f = OPEN_OK(&b, NULL);
    if (f) CHECK_VINT(ckpt_root(f), 7);
    ckpt_close(f);
    bb_free(&b);

    SECTION("BINPUT/BINGET");
    LIT(&b, "\x80\x02]q\x01h\x01\x86.");
    f = OPEN_OK(&b, NULL);
    if (f) {
        const ckpt_value *r = ckpt_root(f);
        CHECK_EQ_INT(ckpt_value_len(r), 2);
        CHECK_KIND(ckpt_value_item(r, 0), CKPT_V_LIST);
        CHECK(ckpt_value_item(r, 0) == ckpt_value_item(r, 1));
    }
    ckpt_close(f);
    bb_free(&b);

    SECTION("LONG_BINPUT/LONG_BINGET");
    LIT(&b, "\x80\x02K\x09r\x70\x11\x01\x00"
            "0j\x70\x11\x01\x00."); /* key 70000 */
    f = OPEN_OK(&b, NULL);
    if (f) CHECK_VINT(ckpt_root(f), 9);
    ckpt_close(f);
    bb_free(&b);

    SECTION("MEMOIZE");
    /* MEMOIZE keys are len(memo): 0, then 1 */
    LIT(&b, "\x80\x04K\x0a\x94"
            "0K\x0b\x94"
            "0h\x00h\x01\x86.");
    f = OPEN_OK(&b, NULL);
    if (f) {
        const ckpt_value *r = ckpt_root(f);
        CHECK_VINT(ckpt_value_item(r, 0), 10);
        CHECK_VINT(ckpt_value_item(r, 1), 11);
    }
    ckpt_close(f);
    bb_free(&b);

    SECTION("memo overwrite");
    LIT(&b, "\x80\x02K\x01q\x00"
            "0K\x02q\x00"
            "0h\x00.");
    f = OPEN_OK(&b, NULL);
    if (f) CHECK_VINT(ckpt_root(f), 2);
    ckpt_close(f);
    bb_free(&b);
}

static void test_globals(void)
{
    SECTION("GLOBAL/STACK_GLOBAL");
    bb b = {0};
    pk_proto(&b, 2); /* below 3: Python 2 names renamed (test_pickle.c test_py2_names) */
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
    ckpt_file *f = OPEN_OK(&b, NULL);
    if (f) {
        const ckpt_value *r = ckpt_root(f);
        CHECK_KIND(r, CKPT_V_TUPLE);
        CHECK_EQ_INT(ckpt_value_len(r), 5);
        CHECK_KIND(ckpt_value_item(r, 0), CKPT_V_GLOBAL);
        CHECK_STR(ckpt_value_class(ckpt_value_item(r, 0)), "builtins.set");
        CHECK_STR(ckpt_value_class(ckpt_value_item(r, 1)), "builtins.eval");
        CHECK_STR(ckpt_value_class(ckpt_value_item(r, 2)), "builtins.len");
        CHECK_STR(ckpt_value_class(ckpt_value_item(r, 3)), "copyreg._reconstructor");
        CHECK_KIND(ckpt_value_item(r, 4), CKPT_V_OBJECT);
        CHECK_STR(ckpt_value_class(ckpt_value_item(r, 4)), "os.system");
        CHECK_EQ_INT(ckpt_global_count(f), 5);
        static const char *const mods[5] = {"builtins", "builtins", "builtins", "copyreg", "os"};
        static const char *const names[5] = {"set", "eval", "len", "_reconstructor", "system"};
        for (size_t i = 0; i < 5; i++) {
            const ckpt_global_ref *g = ckpt_global_at(f, i);
            CHECK(g != NULL);
            if (!g) continue;
            CHECK_STR(g->module, mods[i]);
            CHECK_STR(g->name, names[i]);
            CHECK_STR(g->pickle, "pickle");
            CHECK_EQ_INT(g->offset, (int64_t)offs[i]);
            CHECK_EQ_INT(g->called, i == 4);
        }
        CHECK(ckpt_global_at(f, 5) == NULL);
        ckpt_close(f);
    }
    bb_free(&b);
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
    ckpt_file *f = OPEN_OK(&b, NULL);
    if (f) {
        const ckpt_value *r = ckpt_root(f), *o, *a;
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
        CHECK_EQ_INT(ckpt_global_count(f), 7);
        for (size_t i = 0; i < ckpt_global_count(f); i++) {
            const ckpt_global_ref *g = ckpt_global_at(f, i);
            CHECK_STR(g->module, "foo");
            CHECK_EQ_INT(g->called, strcmp(g->name, "JustRef") != 0);
        }
        ckpt_close(f);
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
    ckpt_file *f = OPEN_OK(&b, NULL);
    if (f) {
        const ckpt_value *r = ckpt_root(f), *v;
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
        ckpt_close(f);
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
    ckpt_file *f = OPEN_OK(&b, NULL);
    if (f) {
        const ckpt_value *r = ckpt_root(f);
        CHECK_EQ_INT(ckpt_value_len(r), 4);
        CHECK_KIND(ckpt_value_item(r, 0), CKPT_V_BOOL);
        CHECK_EQ_INT(ckpt_value_bool(ckpt_value_item(r, 0)), 1);
        CHECK_EQ_INT(ckpt_value_int(ckpt_value_item(r, 0)), 1);
        CHECK_KIND(ckpt_value_item(r, 1), CKPT_V_BOOL);
        CHECK_EQ_INT(ckpt_value_bool(ckpt_value_item(r, 1)), 0);
        CHECK_KIND(ckpt_value_item(r, 2), CKPT_V_NONE);
        CHECK_VSTR(ckpt_value_item(r, 3), CKPT_V_BYTES, "z", 1);
        CHECK_EQ_INT(ckpt_note_count(f), 0);
        ckpt_close(f);
    }
    bb_free(&b);

    SECTION("protocol 0 and 1 pickles");
    LIT(&b, "(lp0\nI1\naI2\na.");
    f = OPEN_OK(&b, NULL);
    if (f) {
        CHECK_KIND(ckpt_root(f), CKPT_V_LIST);
        CHECK_EQ_INT(ckpt_value_len(ckpt_root(f)), 2);
        CHECK_VINT(ckpt_value_item(ckpt_root(f), 1), 2);
    }
    ckpt_close(f);
    bb_free(&b);
    LIT(&b, "}q\x00(X\x01\x00\x00\x00"
            "aq\x01K\x01u.");
    f = OPEN_OK(&b, NULL);
    if (f) CHECK_VINT(ckpt_value_get(ckpt_root(f), "a"), 1);
    ckpt_close(f);
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
    EXPECT_FAIL(&b, NULL, CKPT_E_FORMAT, 0, "not a checkpoint");
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
    ckpt_file *f = OPEN_OK(&b, &o);
    ckpt_close(f);
    o.max_ops = 2;
    EXPECT_FAIL(&b, &o, CKPT_E_LIMIT, 3, "opcodes");
    bb_free(&b);

    SECTION("max_stack");
    ckpt_options_init(&o);
    o.max_stack = 20;
    for (int i = 0; i < 20; i++) LIT(&b, "N");
    bb_put(&b, "0000000000000000000.", 20);
    f = OPEN_OK(&b, &o); /* 20 entries: at the limit */
    ckpt_close(f);
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
        ckpt_error e = open_fail(&b, &o);
        CHECK_EQ_INT(e.code, CKPT_E_LIMIT);
        CHECK(e.offset >= 20 && e.offset <= 40);
    }
    bb_free(&b);

    SECTION("max_memo");
    ckpt_options_init(&o);
    o.max_memo = 4; /* keys below max_memo + the pickle's 7 bytes: 11 */
    LIT(&b, "\x80\x02K\x01q\x0a.");
    f = OPEN_OK(&b, &o);
    ckpt_close(f);
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
            f = OPEN_OK(&b, &o);
            if (f) {
                const ckpt_value *v = ckpt_root(f);
                int d = 0;
                while (ckpt_value_len(v) == 1) {
                    v = ckpt_value_item(v, 0);
                    d++;
                }
                CHECK_EQ_INT(d, 10);
                CHECK_KIND(v, CKPT_V_LIST);
            }
            ckpt_close(f);
        } else {
            EXPECT_FAIL(&b, &o, CKPT_E_LIMIT, -1, "deeper than 10");
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
    EXPECT_FAIL(&b, NULL, CKPT_E_LIMIT, -1, "deeper than 1000");
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
    f = OPEN_OK(&b, &o);
    if (f) {
        const ckpt_value *r = ckpt_root(f);
        CHECK_EQ_INT(ckpt_value_len(r), 2);
        CHECK(ckpt_value_item(r, 0) == ckpt_value_item(r, 1));
    }
    ckpt_close(f);
    bb_free(&b);
    for (int n = 0; n < 60; n++) LIT(&b, "(");
    LIT(&b, "]");
    for (int n = 0; n < 60; n++) LIT(&b, "2l");
    LIT(&b, ".");
    f = OPEN_OK(&b, NULL); /* 2^61 nodes if expanded: must not be */
    ckpt_close(f);
    bb_free(&b);
    /* fan-out: one list met n times from the root costs 1 + n visits, and
     * its n 2-byte references add n / 2 + ... to the budget: linear sharing
     * stays within max_expansion + pickle bytes / 2 whatever n is */
    LIT(&b, "\x80\x02]q\x00"
            "0(");
    for (int i = 0; i < 5000; i++) LIT(&b, "h\x00");
    LIT(&b, "l.");
    f = OPEN_OK(&b, &o);
    if (f) CHECK_EQ_INT(ckpt_value_len(ckpt_root(f)), 5000);
    ckpt_close(f);
    bb_free(&b);
    /* references of one byte each (DUP) cost 1 + n visits against
     * max_expansion + n / 2: with max_expansion 0 that fails */
    o.max_expansion = 0;
    LIT(&b, "\x80\x02(]");
    for (int i = 0; i < 4999; i++) LIT(&b, "2");
    LIT(&b, "l.");
    {
        ckpt_error e;
        ckpt_file *g = ckpt_open_memory(b.p, b.n, &o, &e);
        CHECK(g == NULL);
        if (!g) CHECK_EQ_INT(e.code, CKPT_E_LIMIT);
        ckpt_close(g);
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
        ckpt_error e = open_fail(&b, &o);
        CHECK_EQ_INT(e.code, CKPT_E_LIMIT);
    }
    bb_free(&b);
    /* a pickle of 15 small opcodes, longer than the 8-byte limit: a limit
     * error, not a truncated pickle (the memory source reads it in place) */
    LIT(&b, "\x80\x02(K\x01K\x02K\x03K\x04K\x05l.");
    {
        ckpt_error e = open_fail(&b, &o);
        CHECK_EQ_INT(e.code, CKPT_E_LIMIT);
        CHECK_CONTAINS(e.message, "limit");
    }
    o.max_pickle_bytes = 15;
    f = OPEN_OK(&b, &o);
    ckpt_close(f);
    bb_free(&b);
}

/* ------------------------------------------------------------------------ */

static void test_notes(void)
{
    SECTION("note: second PROTO");
    bb b = {0};
    LIT(&b, "\x80\x02\x80\x02N.");
    ckpt_file *f = OPEN_OK(&b, NULL);
    if (f) {
        CHECK_EQ_INT(ckpt_note_count(f), 1);
        CHECK_CONTAINS(ckpt_note_at(f, 0), "PROTO");
        CHECK_CONTAINS(ckpt_note_at(f, 0), "byte 2");
        CHECK(ckpt_note_at(f, 1) == NULL);
    }
    ckpt_close(f);
    bb_free(&b);

    SECTION("note: data after STOP");
    LIT(&b, "\x80\x02N.XYZ");
    f = OPEN_OK(&b, NULL);
    if (f) {
        CHECK_KIND(ckpt_root(f), CKPT_V_NONE);
        CHECK_EQ_INT(ckpt_note_count(f), 1);
        CHECK_CONTAINS(ckpt_note_at(f, 0), "3 bytes after STOP");
    }
    ckpt_close(f);
    bb_free(&b);
}

/* options.key on a plain pickle selects the value under a top-level key. */
static void test_key(void)
{
    SECTION("options.key");
    bb b = {0};
    LIT(&b, "\x80\x02}(X\x01\x00\x00\x00"
            "aK\x01X\x01\x00\x00\x00"
            "bK\x02u.");
    ckpt_options o;
    ckpt_options_init(&o);
    o.key = "b";
    ckpt_file *f = OPEN_OK(&b, &o);
    if (f) CHECK_VINT(ckpt_root(f), 2);
    ckpt_close(f);
    o.key = "c";
    EXPECT_FAIL(&b, &o, CKPT_E_NOTFOUND, -1, "'a', 'b'");
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
    ckpt_file *f = OPEN_OK(&b, &o);
    CHECK_EQ_INT(s.n, 1);
    CHECK_STR(s.names[0], "collections.OrderedDict");
    CHECK_EQ_INT(s.called[0], 1);
    ckpt_close(f);
    CHECK_EQ_INT(s.n, 1);
    bb_free(&b);
}

int main(void)
{
    test_format();
    test_text_ints();
    test_binary_longs();
    test_long1_nonminimal();
    test_floats();
    test_strings();
    test_containers();
    test_stack_ops();
    test_memo();
    test_globals();
    test_objects();
    test_known_callables();
    test_misc_ops();
    test_errors();
    test_limits();
    test_notes();
    test_key();
    test_on_global();
    return ut_summary();
}
