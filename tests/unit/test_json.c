/*
 * test_json.c - ckpt_value_to_json() on hand-made pickles: the exact
 * compact output (indent 0) for scalars, big ints, floats (Python's repr),
 * strings with control characters and invalid UTF-8, bytes as base64,
 * containers, non-string keys, shared references and cycles as $ref,
 * objects, globals, tensors; pretty output; a failing writer.
 */
#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L
#endif
#include "ckpt.h"
#include "harness.h"
#include "build.h"

#include <math.h>

#define LIT(b, s) bb_put((b), (s), sizeof(s) - 1)

typedef struct sbuf {
    char *p;
    size_t n, cap;
    int calls;
    int fail; /* return -1 from the first call */
} sbuf;

static int sb_write(void *ctx, const char *s, size_t n)
{
    sbuf *b = ctx;
    b->calls++;
    if (b->fail) return -1;
    if (b->cap - b->n < n + 1) {
        size_t nc = b->cap ? b->cap : 256;
        while (nc - b->n < n + 1) nc *= 2;
        char *np = realloc(b->p, nc);
        if (!np) abort();
        b->p = np;
        b->cap = nc;
    }
    memcpy(b->p + b->n, s, n);
    b->n += n;
    b->p[b->n] = 0;
    return 0;
}

/* JSON of v (NULL: the root) with `indent`; "(failed: message)" on failure. */
static char *json_of(const ckpt_file *f, const ckpt_value *v, int indent)
{
    sbuf b = {0};
    ckpt_error err;
    memset(&err, 0, sizeof err);
    sb_write(&b, "", 0);
    if (ckpt_value_to_json(f, v, indent, sb_write, &b, &err) != 0) {
        char msg[300];
        snprintf(msg, sizeof msg, "(failed: %s)", err.message);
        b.n = 0;
        sb_write(&b, msg, strlen(msg));
    }
    return b.p;
}

/* Open a plain pickle and compare its root's compact JSON. */
static void check_json_(const void *pkl, size_t n, const char *want, int indent, const char *file,
                        int line)
{
    ckpt_error err;
    memset(&err, 0, sizeof err);
    ckpt_file *f = ckpt_open_memory(pkl, n, NULL, &err);
    if (!f) {
        ut_fail_at(file, line);
        fprintf(stderr, "open failed: %s\n", err.message);
        return;
    }
    char *got = json_of(f, NULL, indent);
    if (got && strcmp(got, want) == 0) {
        ut_passed++;
    } else {
        ut_fail_at(file, line);
        fprintf(stderr, "JSON\n  got:  %s\n  want: %s\n", got ? got : "(null)", want);
    }
    free(got);
    ckpt_close(f);
}
#define CHECK_JSON_BB(b, want) check_json_((b)->p, (b)->n, (want), 0, __FILE__, __LINE__)
#define CHECK_JSON_LIT(s, want) check_json_((s), sizeof(s) - 1, (want), 0, __FILE__, __LINE__)
#define CHECK_JSON_PRETTY(b, want, ind)                                                            \
    check_json_((b)->p, (b)->n, (want), (ind), __FILE__, __LINE__)

/* A pickle of one BINFLOAT. */
static void float_pickle(bb *b, double d)
{
    uint64_t u;
    memcpy(&u, &d, 8);
    b->n = 0;
    pk_proto(b, 2);
    bb_u8(b, 'G');
    for (int i = 7; i >= 0; i--) bb_u8(b, (unsigned)(u >> (8 * i)) & 0xff);
    pk_stop(b);
}

/* A pickle of one BINUNICODE (raw bytes, not checked by the machine). */
static void str_pickle(bb *b, const char *s, size_t n)
{
    b->n = 0;
    pk_proto(b, 2);
    pk_strn(b, s, n);
    pk_stop(b);
}

static void bytes_pickle(bb *b, const char *s, size_t n)
{
    b->n = 0;
    pk_proto(b, 3);
    bb_u8(b, 'C');
    bb_u8(b, (unsigned)n);
    bb_put(b, s, n);
    pk_stop(b);
}

/* ------------------------------------------------------------------------ */

static void test_scalars(void)
{
    SECTION("json scalars");
    CHECK_JSON_LIT("\x80\x02N.", "null");
    CHECK_JSON_LIT("\x80\x02\x88.", "true");
    CHECK_JSON_LIT("\x80\x02\x89.", "false");
    CHECK_JSON_LIT("I01\n.", "true");
    CHECK_JSON_LIT("\x80\x02J\xfb\xff\xff\xff.", "-5");
    CHECK_JSON_LIT("\x80\x02\x8a\x08\x00\x00\x00\x00\x00\x00\x00\x80.", "-9223372036854775808");
    SECTION("json big ints");
    CHECK_JSON_LIT("\x80\x02\x8a\x0d\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x10.",
                   "1267650600228229401496703205376");
    CHECK_JSON_LIT("\x80\x02\x8a\x09\x00\x00\x00\x00\x00\x00\x00\x00\xc0.",
                   "-1180591620717411303424");
    CHECK_JSON_LIT("L123456789012345678901234567890L\n.", "123456789012345678901234567890");
}

static void test_floats(void)
{
    SECTION("json floats");
    static const struct {
        double d;
        const char *want;
    } tab[] = {
        {1.0, "1.0"},
        {0.1, "0.1"},
        {1e-300, "1e-300"},
        {-0.0, "-0.0"},
        {0.0, "0.0"},
        {100.0, "100.0"},
        {2.5, "2.5"},
        {-123.456, "-123.456"},
        {1e16, "1e+16"},
        {1234567890123456.0, "1234567890123456.0"},
        {12345678901234568.0, "1.2345678901234568e+16"},
        {0.0001, "0.0001"},
        {0.00001, "1e-05"},
        {2.5e-05, "2.5e-05"},
        {5e-324, "5e-324"},
        {1.7976931348623157e308, "1.7976931348623157e+308"},
        {1.0 / 3.0, "0.3333333333333333"},
        {0.1 + 0.2, "0.30000000000000004"},
        {1e22, "1e+22"},
        {123456789.0, "123456789.0"},
    };
    bb b = {0};
    for (size_t i = 0; i < sizeof tab / sizeof tab[0]; i++) {
        float_pickle(&b, tab[i].d);
        CHECK_JSON_BB(&b, tab[i].want);
    }
    float_pickle(&b, NAN);
    CHECK_JSON_BB(&b, "\"nan\"");
    float_pickle(&b, INFINITY);
    CHECK_JSON_BB(&b, "\"inf\"");
    float_pickle(&b, -INFINITY);
    CHECK_JSON_BB(&b, "\"-inf\"");
    /* FLOAT text too */
    CHECK_JSON_LIT("F0.5\n.", "0.5");
    bb_free(&b);
}

static void test_strings(void)
{
    SECTION("json strings");
    bb b = {0};
    str_pickle(&b, "plain", 5);
    CHECK_JSON_BB(&b, "\"plain\"");
    str_pickle(&b, "", 0);
    CHECK_JSON_BB(&b, "\"\"");
    static const char ctl[] = "a\"b\\c\n\t\r\b\f\x01\x1f\x7f/";
    str_pickle(&b, ctl, sizeof ctl - 1);
    CHECK_JSON_BB(&b, "\"a\\\"b\\\\c\\n\\t\\r\\b\\f\\u0001\\u001f\\u007f/\"");
    static const char nul[] = "x\0y";
    str_pickle(&b, nul, 3);
    CHECK_JSON_BB(&b, "\"x\\u0000y\"");
    /* valid UTF-8 is kept */
    static const char utf[] = "caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80";
    str_pickle(&b, utf, sizeof utf - 1);
    CHECK_JSON_BB(&b, "\"caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80\"");
    /* invalid UTF-8: each bad byte as \udcXX (Python's surrogateescape),
     * so the bytes come back exactly; \u00XX would turn them into latin-1 */
    static const char bad[] = "x\xffy\xc3";
    str_pickle(&b, bad, sizeof bad - 1);
    CHECK_JSON_BB(&b, "\"x\\udcffy\\udcc3\"");
    static const char overlong[] = "\xc0\x80";
    str_pickle(&b, overlong, 2);
    CHECK_JSON_BB(&b, "\"\\udcc0\\udc80\"");
    static const char surrogate[] = "\xed\xa0\x80";
    str_pickle(&b, surrogate, 3);
    CHECK_JSON_BB(&b, "\"\\udced\\udca0\\udc80\"");
    static const char toobig[] = "\xf4\x90\x80\x80";
    str_pickle(&b, toobig, 4);
    CHECK_JSON_BB(&b, "\"\\udcf4\\udc90\\udc80\\udc80\"");
    static const char cut[] = "ab\xe2\x82";
    str_pickle(&b, cut, 4);
    CHECK_JSON_BB(&b, "\"ab\\udce2\\udc82\"");
    /* control characters are characters: \u00XX (DEL too, as ckpt_escape()
     * shows it escaped) */
    static const char ctl2[] = "a\x01\x7f";
    str_pickle(&b, ctl2, 3);
    CHECK_JSON_BB(&b, "\"a\\u0001\\u007f\"");
    /* what acts on a terminal unseen (bidi override U+202E, C1 CSI U+009B,
     * zero-width space U+200B, BOM U+FEFF) is \uXXXX, the same string to a
     * JSON parser; other characters stay as they are */
    static const char bidi[] = "\xe2\x80\xaegnp.exe \xc2\x9b"
                               "2J \xe2\x80\x8b\xef\xbb\xbf \xc3\xa9";
    str_pickle(&b, bidi, sizeof bidi - 1);
    CHECK_JSON_BB(&b, "\"\\u202egnp.exe \\u009b2J \\u200b\\ufeff \xc3\xa9\"");

    SECTION("json bytes");
    bytes_pickle(&b, "", 0);
    CHECK_JSON_BB(&b, "{\"$bytes\":\"\"}");
    bytes_pickle(&b, "a", 1);
    CHECK_JSON_BB(&b, "{\"$bytes\":\"YQ==\"}");
    bytes_pickle(&b, "ab", 2);
    CHECK_JSON_BB(&b, "{\"$bytes\":\"YWI=\"}");
    bytes_pickle(&b, "abc", 3);
    CHECK_JSON_BB(&b, "{\"$bytes\":\"YWJj\"}");
    bytes_pickle(&b, "\x00\xff\xfe\x10", 4);
    CHECK_JSON_BB(&b, "{\"$bytes\":\"AP/+EA==\"}");
    bytes_pickle(&b, "hello world", 11);
    CHECK_JSON_BB(&b, "{\"$bytes\":\"aGVsbG8gd29ybGQ=\"}");
    bb_free(&b);
}

static void test_containers(void)
{
    SECTION("json containers");
    /* {'a': [1, (2, 3)], 'b': {}, 'c': [], 'd': {4}, 'e': ()} */
    CHECK_JSON_LIT("\x80\x04}(\x8c\x01"
                   "a]K\x01"
                   "aK\x02K\x03\x86"
                   "a\x8c\x01"
                   "b}\x8c\x01"
                   "c]\x8c\x01"
                   "d\x8f(K\x04\x90\x8c\x01"
                   "e)u.",
                   "{\"a\":[1,[2,3]],\"b\":{},\"c\":[],\"d\":[4],\"e\":[]}");
    /* OrderedDict: an object with string keys, whatever its class */
    CHECK_JSON_LIT("\x80\x02"
                   "ccollections\nOrderedDict\n)R(X\x01\x00\x00\x00xK\x01X\x01\x00\x00\x00yK\x02u.",
                   "{\"x\":1,\"y\":2}");

    SECTION("json keys");
    /* {1: 'a', None: 'b', (1, 'x'): 'c', True: 'd', 1.5: 'e', b'k': 'f', 2**64: 'g', ('q',): 'h'} */
    CHECK_JSON_LIT("\x80\x03}(K\x01\x8c\x01"
                   "aN\x8c\x01"
                   "bK\x01\x8c\x01x\x86\x8c\x01"
                   "c\x88\x8c\x01"
                   "d"
                   "G\x3f\xf8\x00\x00\x00\x00\x00\x00\x8c\x01"
                   "eC\x01k\x8c\x01"
                   "f"
                   "\x8a\x09\x00\x00\x00\x00\x00\x00\x00\x00\x01\x8c\x01g\x8c\x01q\x85\x8c\x01hu.",
                   "{\"1\":\"a\",\"None\":\"b\",\"(1, "
                   "'x')\":\"c\",\"True\":\"d\",\"1.5\":\"e\",\"b'k'\":\"f\","
                   "\"18446744073709551616\":\"g\",\"('q',)\":\"h\"}");
    /* a key that has no text: its index */
    CHECK_JSON_LIT("\x80\x02}(K\x01K\x02]K\x03u.", "{\"1\":2,\"#1\":3}");
    /* a key with a quote, inside a tuple: Python's repr picks the quotes */
    CHECK_JSON_LIT("\x80\x02}X\x03\x00\x00\x00it'\x85K\x01s.", "{\"(\\\"it'\\\",)\":1}");
}

static void test_refs(void)
{
    SECTION("json shared references");
    /* L = [1]; [L, L] */
    CHECK_JSON_LIT("\x80\x02]K\x01"
                   "a2\x86.",
                   "[[1],{\"$ref\":\"0\"}]");
    /* {'x': L, 'y': {'z': L}} */
    CHECK_JSON_LIT("\x80\x02}(X\x01\x00\x00\x00x]q\x00K\x01"
                   "aX\x01\x00\x00\x00y}X\x01\x00\x00\x00zh\x00su.",
                   "{\"x\":[1],\"y\":{\"z\":{\"$ref\":\"x\"}}}");
    /* [{'k': L}, L]: the path of the first occurrence */
    CHECK_JSON_LIT("\x80\x02(}X\x01\x00\x00\x00k]q\x00K\x01"
                   "ash\x00l.",
                   "[{\"k\":[1]},{\"$ref\":\"0.k\"}]");
    /* shared scalars and strings are written again, not as $ref */
    CHECK_JSON_LIT("\x80\x02X\x01\x00\x00\x00sq\x00h\x00\x86.", "[\"s\",\"s\"]");

    SECTION("json cycles");
    /* L = []; L.append(L) */
    CHECK_JSON_LIT("\x80\x02]q\x00h\x00"
                   "a.",
                   "[{\"$ref\":\"\"}]");
    /* d = {}; d['k'] = d */
    CHECK_JSON_LIT("\x80\x02}q\x00X\x01\x00\x00\x00kh\x00s.", "{\"k\":{\"$ref\":\"\"}}");
    /* a = []; b = [a]; a.append(b) */
    CHECK_JSON_LIT("\x80\x02]q\x00]q\x01h\x00"
                   "a0h\x01"
                   "a.",
                   "[[{\"$ref\":\"\"}]]");
}

static void test_objects(void)
{
    SECTION("json objects and globals");
    /* foo.Bar(1) with state {'a': 1} */
    CHECK_JSON_LIT("\x80\x02"
                   "cfoo\nBar\nK\x01\x85R}X\x01\x00\x00\x00"
                   "aK\x01sb.",
                   "{\"$object\":\"foo.Bar\",\"args\":[1],\"state\":{\"a\":1}}");
    /* NEWOBJ foo.Baz() with an item and a list entry */
    CHECK_JSON_LIT("\x80\x02"
                   "cfoo\nBaz\n)\x81X\x01\x00\x00\x00kK\x05sK\x06"
                   "a.",
                   "{\"$object\":\"foo.Baz\",\"args\":[],\"items\":{\"k\":5},\"list\":[6]}");
    /* an object whose state holds itself */
    CHECK_JSON_LIT("\x80\x02"
                   "cfoo\nBar\n)Rq\x00}X\x02\x00\x00\x00meh\x00sb.",
                   "{\"$object\":\"foo.Bar\",\"args\":[],\"state\":{\"me\":{\"$ref\":\"\"}}}");
    /* a shared object reached through another object's args */
    CHECK_JSON_LIT("\x80\x02(cfoo\nA\n)Rq\x00"
                   "cfoo\nB\nh\x00\x85Rl.",
                   "[{\"$object\":\"foo.A\",\"args\":[]},{\"$object\":\"foo.B\",\"args\":[{\"$"
                   "ref\":\"0\"}]}]");
    CHECK_JSON_LIT("\x80\x02"
                   "cos\nsystem\n.",
                   "{\"$global\":\"os.system\"}");
    CHECK_JSON_LIT("c__builtin__\neval\n.", "{\"$global\":\"builtins.eval\"}");
}

static void test_pretty(void)
{
    SECTION("json indent");
    bb b = {0};
    LIT(&b, "\x80\x02}(X\x01\x00\x00\x00"
            "a](K\x01K\x02"
            "eX\x01\x00\x00\x00"
            "b}X\x01\x00\x00\x00"
            "c]u.");
    CHECK_JSON_PRETTY(&b, "{\n  \"a\": [\n    1,\n    2\n  ],\n  \"b\": {},\n  \"c\": []\n}", 2);
    CHECK_JSON_PRETTY(
        &b, "{\n    \"a\": [\n        1,\n        2\n    ],\n    \"b\": {},\n    \"c\": []\n}", 4);
    CHECK_JSON_PRETTY(&b, "{\"a\":[1,2],\"b\":{},\"c\":[]}", 0);
    b.n = 0;
    LIT(&b, "\x80\x02]q\x00h\x00"
            "aC\x01z\x86.");
    CHECK_JSON_PRETTY(&b, "[\n  [\n    {\"$ref\": \"0\"}\n  ],\n  {\"$bytes\": \"eg==\"}\n]", 2);
    bb_free(&b);
}

/* Tensors from a ZIP archive; a sub-value; a failing writer. */
static void test_tensors_and_api(void)
{
    SECTION("json tensors");
    bb p = {0};
    float d[6] = {1, 2, 3, 4, 5, 6};
    int64_t sh[2] = {2, 3}, st[2] = {3, 1};
    pk_proto(&p, 2);
    pk_empty_dict(&p);
    pk_mark(&p);
    pk_str(&p, "w");
    pk_tensor(&p, "FloatStorage", "0", 6, 0, 2, sh, st);
    pk_str(&p, "s");
    pk_tensor(&p, "FloatStorage", "0", 6, 5, 0, NULL, NULL);
    pk_str(&p, "meta");
    pk_empty_dict(&p);
    pk_str(&p, "lr");
    bb_u8(&p, 'G');
    bb_put(&p, "\x3f\x50\x62\x4d\xd2\xf1\xa9\xfc", 8); /* 0.001 */
    pk_setitem(&p);
    pk_setitems(&p);
    pk_stop(&p);
    zipb z;
    zb_init(&z);
    zb_add(&z, "archive/data.pkl", p.p, p.n);
    zb_add(&z, "archive/data/0", d, sizeof d);
    zb_add(&z, "archive/version", "3\n", 2);
    zb_finish(&z);
    ckpt_error err;
    ckpt_file *f = ckpt_open_memory(z.out.p, z.out.n, NULL, &err);
    CHECK(f != NULL);
    if (f) {
        char *j = json_of(f, NULL, 0);
        CHECK_STR(j, "{\"w\":{\"$tensor\":\"w\",\"dtype\":\"float32\",\"shape\":[2,3]},"
                     "\"s\":{\"$tensor\":\"s\",\"dtype\":\"float32\",\"shape\":[]},\"meta\":{"
                     "\"lr\":0.001}}");
        free(j);
        /* a sub-value */
        j = json_of(f, ckpt_value_get(ckpt_root(f), "meta"), 0);
        CHECK_STR(j, "{\"lr\":0.001}");
        free(j);
        j = json_of(f, ckpt_value_get(ckpt_root(f), "w"), 2);
        CHECK_STR(j, "{\n  \"$tensor\": \"w\",\n  \"dtype\": \"float32\",\n  \"shape\": [2, 3]\n}");
        free(j);

        SECTION("json: failing writer");
        sbuf b = {0};
        b.fail = 1;
        memset(&err, 0, sizeof err);
        CHECK_EQ_INT(ckpt_value_to_json(f, NULL, 0, sb_write, &b, &err), -1);
        CHECK(err.code != CKPT_OK);
        CHECK(err.message[0] != 0);
        CHECK(b.calls >= 1);
        b.fail = 1;
        CHECK_EQ_INT(ckpt_value_to_json(f, NULL, 0, sb_write, &b, NULL), -1);
        free(b.p);
        ckpt_close(f);
    }
    bb_free(&z.out);
    bb_free(&p);

    /* A storage referenced directly (not through a tensor): json.c says
     * STORAGE -> {"$storage": key|null}; the key is known ("0"). */
    SECTION("json storage");
    pk_proto(&p, 2);
    pk_empty_dict(&p);
    pk_str(&p, "st");
    pk_storage_pid(&p, "FloatStorage", "0", 6);
    pk_setitem(&p);
    pk_stop(&p);
    zb_init(&z);
    zb_add(&z, "archive/data.pkl", p.p, p.n);
    zb_add(&z, "archive/data/0", d, sizeof d);
    zb_finish(&z);
    f = ckpt_open_memory(z.out.p, z.out.n, NULL, &err);
    CHECK(f != NULL);
    if (f) {
        char *j = json_of(f, NULL, 0);
        CHECK_STR(j, "{\"st\":{\"$storage\":\"0\"}}");
        free(j);
        ckpt_close(f);
    }
    bb_free(&z.out);
    bb_free(&p);
}

/* A big output goes through the writer in several calls, unchanged. */
static void test_large(void)
{
    SECTION("json: large output");
    bb p = {0};
    pk_proto(&p, 2);
    pk_empty_list(&p);
    pk_mark(&p);
    for (int i = 0; i < 20000; i++) pk_int(&p, i);
    pk_appends(&p);
    pk_stop(&p);
    ckpt_error err;
    ckpt_file *f = ckpt_open_memory(p.p, p.n, NULL, &err);
    CHECK(f != NULL);
    if (f) {
        sbuf b = {0};
        CHECK_EQ_INT(ckpt_value_to_json(f, NULL, 0, sb_write, &b, &err), 0);
        CHECK(b.calls >= 2);
        bb want = {0};
        bb_u8(&want, '[');
        for (int i = 0; i < 20000; i++) {
            char t[16];
            snprintf(t, sizeof t, i ? ",%d" : "%d", i);
            bb_text(&want, t);
        }
        bb_u8(&want, ']');
        CHECK_EQ_INT(b.n, want.n);
        if (b.n == want.n) CHECK_MEM(b.p, want.p, want.n);
        bb_free(&want);
        free(b.p);
        ckpt_close(f);
    }
    bb_free(&p);
}

int main(void)
{
    test_scalars();
    test_floats();
    test_strings();
    test_containers();
    test_refs();
    test_objects();
    test_pretty();
    test_tensors_and_api();
    test_large();
    return ut_summary();
}
