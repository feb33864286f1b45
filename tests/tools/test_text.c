/*
 * test_text.c - include/ckpt_text.h through the public API only.
 *
 *     test_text SAMPLE.pt SAMPLE.show.expected
 *
 * Escaping: each class of ckpt_text.h's rules, byte by byte as the header
 * states them; the limit never cuts a character; the cap writes only whole
 * pieces and the consumed count says where it stopped; widths, UTF-8 checks
 * and base64 (RFC 4648's test vectors).
 *
 * ckpt_value_to_text(): SAMPLE.show.expected is what `ckpt show` printed for
 * the sample before the tree moved into the library (the CLI's output is
 * the spec), and so are the *_text strings below, for pickles assembled
 * here byte by byte: shared containers and a cycle as <ref PATH>, objects,
 * scalars of every kind, long and hostile keys, a <ref> path cut at 1000
 * bytes.  Nesting: the CLI's line counts and error before and at the limit,
 * the max_depth option, a failing write callback, bad arguments.
 */
#include "ckpt_text.h"

#include "../unit/harness.h"

/* ---- escaping ----------------------------------------------------------- */

/* s[0..n) escaped whole (limit: all of it) into a static buffer. */
static const char *esc(const char *s, size_t n, unsigned flags)
{
    static char buf[512];
    size_t c = 0;
    size_t len = ckpt_escape(buf, sizeof buf, s, n, (size_t)-1, flags, &c);
    if (c != n || len != strlen(buf)) return "(incomplete)";
    /* the measure agrees with what was written */
    if (ckpt_escape(NULL, 0, s, n, (size_t)-1, flags, &c) != len || c != n)
        return "(measure differs)";
    return buf;
}

#define ESC(lit, flags) esc(lit, sizeof lit - 1, flags)

static void test_escape_classes(void)
{
    SECTION("escape classes");
    CHECK_STR(ESC("plain text 123 ~!", 0), "plain text 123 ~!");
    CHECK_STR(ESC("a\\b", 0), "a\\\\b");
    CHECK_STR(ESC("\n\r\t", 0), "\\n\\r\\t");
    CHECK_STR(ESC("\x00\x01\x1b[31m\x1f", 0), "\\x00\\x01\\x1b[31m\\x1f");
    CHECK_STR(ESC("\x7f", 0), "\\x7f");
    /* quotes: only inside "..." */
    CHECK_STR(ESC("say \"hi\"", 0), "say \"hi\"");
    CHECK_STR(ESC("say \"hi\"", CKPT_ESCAPE_QUOTED), "say \\\"hi\\\"");
    /* bytes that are not UTF-8: a stray continuation, a lone lead byte, an
     * overlong form, a surrogate, past U+10FFFF, a cut sequence at the end */
    CHECK_STR(ESC("\x80", 0), "\\x80");
    CHECK_STR(ESC("\xff", 0), "\\xff");
    CHECK_STR(ESC("\xc0\x80", 0), "\\xc0\\x80");
    CHECK_STR(ESC("\xe0\x80\xaf", 0), "\\xe0\\x80\\xaf");
    CHECK_STR(ESC("\xed\xa0\x80", 0), "\\xed\\xa0\\x80");
    CHECK_STR(ESC("\xf4\x90\x80\x80", 0), "\\xf4\\x90\\x80\\x80");
    CHECK_STR(ESC("a\xe2\x82", 0), "a\\xe2\\x82");
    /* C1 controls (U+0080-U+009F; U+009B is CSI) */
    CHECK_STR(ESC("\xc2\x80", 0), "\\u0080");
    CHECK_STR(ESC("\xc2\x9b", 0), "\\u009b");
    CHECK_STR(ESC("\xc2\x9f", 0), "\\u009f");
    CHECK_STR(ESC("\xc2\xa0", 0), "\xc2\xa0"); /* U+00A0: shown */
    /* bidi marks, overrides and isolates */
    CHECK_STR(ESC("\xd8\x9c", 0), "\\u061c");
    CHECK_STR(ESC("\xe2\x80\x8e\xe2\x80\x8f", 0), "\\u200e\\u200f");
    CHECK_STR(ESC("abc\xe2\x80\xaegpj.exe", 0), "abc\\u202egpj.exe");
    CHECK_STR(ESC("\xe2\x80\xaa", 0), "\\u202a");
    CHECK_STR(ESC("\xe2\x81\xa6\xe2\x81\xa9", 0), "\\u2066\\u2069");
    /* zero-width characters */
    CHECK_STR(ESC("\xe2\x80\x8b\xe2\x80\x8c\xe2\x80\x8d", 0), "\\u200b\\u200c\\u200d");
    CHECK_STR(ESC("\xe2\x81\xa0\xe2\x81\xa4", 0), "\\u2060\\u2064");
    CHECK_STR(ESC("\xef\xbb\xbf", 0), "\\ufeff");
    /* line and paragraph separators */
    CHECK_STR(ESC("\xe2\x80\xa8\xe2\x80\xa9", 0), "\\u2028\\u2029");
    /* the neighbours of those ranges are shown as they are */
    CHECK_STR(ESC("\xe2\x80\x8a", 0), "\xe2\x80\x8a"); /* U+200A */
    CHECK_STR(ESC("\xe2\x80\xaf", 0), "\xe2\x80\xaf"); /* U+202F */
    CHECK_STR(ESC("\xe2\x81\xa5", 0), "\xe2\x81\xa5"); /* U+2065 */
    CHECK_STR(ESC("\xe2\x81\xaa", 0), "\xe2\x81\xaa"); /* U+206A */
    CHECK_STR(ESC("\xd8\x9b", 0), "\xd8\x9b");         /* U+061B */
    /* valid multi-byte characters pass through */
    CHECK_STR(ESC("caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80 \xe4\xb8\xad", 0),
              "caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80 \xe4\xb8\xad");
    CHECK_STR(ESC("\xf4\x8f\xbf\xbf", 0), "\xf4\x8f\xbf\xbf"); /* U+10FFFF */
    /* a bytes value: every byte >= 0x80 as \xHH, even valid UTF-8 */
    CHECK_STR(ESC("caf\xc3\xa9", CKPT_ESCAPE_BYTES), "caf\\xc3\\xa9");
    CHECK_STR(ESC("\"\xe2\x80\xae", CKPT_ESCAPE_BYTES | CKPT_ESCAPE_QUOTED), "\\\"\\xe2\\x80\\xae");
}

static void test_escape_limits(void)
{
    char buf[64];
    size_t c = 99, len;
    const char *s = "a\xc3\xa9z"; /* a, U+00E9 (2 bytes), z */

    SECTION("escape limit");
    /* the limit never cuts a character: it is left out whole */
    len = ckpt_escape(buf, sizeof buf, s, 4, 2, 0, &c);
    CHECK_STR(buf, "a");
    CHECK_EQ_U64(len, 1);
    CHECK_EQ_U64(c, 1);
    len = ckpt_escape(buf, sizeof buf, s, 4, 3, 0, &c);
    CHECK_STR(buf, "a\xc3\xa9");
    CHECK_EQ_U64(c, 3);
    /* ... and a 4-byte character one byte short of the limit */
    len = ckpt_escape(buf, sizeof buf, "\xf0\x9f\x98\x80!", 5, 3, 0, &c);
    CHECK_EQ_U64(len, 0);
    CHECK_EQ_U64(c, 0);
    CHECK_STR(buf, "");
    /* bytes that are not UTF-8 are single bytes: the limit cuts between */
    len = ckpt_escape(buf, sizeof buf, "a\xe2\x82", 3, 2, 0, &c);
    CHECK_STR(buf, "a\\xe2");
    CHECK_EQ_U64(c, 2);
    /* the validity of a character is judged on n, not on the limit */
    len = ckpt_escape(buf, sizeof buf, "\xe2\x80\xae", 3, 2, 0, &c);
    CHECK_STR(buf, "");
    CHECK_EQ_U64(c, 0);
    /* limit past n */
    len = ckpt_escape(buf, sizeof buf, "ab", 2, 100, 0, &c);
    CHECK_STR(buf, "ab");
    CHECK_EQ_U64(c, 2);

    SECTION("escape cap");
    /* only whole pieces: "\x01" needs 4 bytes and the '\0' */
    len = ckpt_escape(buf, 5, "\x01\x02", 2, (size_t)-1, 0, &c);
    CHECK_STR(buf, "\\x01");
    CHECK_EQ_U64(len, 4);
    CHECK_EQ_U64(c, 1);
    len = ckpt_escape(buf, 4, "\x01\x02", 2, (size_t)-1, 0, &c);
    CHECK_STR(buf, "");
    CHECK_EQ_U64(len, 0);
    CHECK_EQ_U64(c, 0);
    /* a character is not split by the cap either */
    len = ckpt_escape(buf, 3, s, 4, (size_t)-1, 0, &c);
    CHECK_STR(buf, "a");
    CHECK_EQ_U64(c, 1);
    len = ckpt_escape(buf, 4, s, 4, (size_t)-1, 0, &c);
    CHECK_STR(buf, "a\xc3\xa9");
    CHECK_EQ_U64(c, 3);
    /* cap 0 writes nothing, not even the '\0' */
    buf[0] = 'X';
    len = ckpt_escape(buf, 0, s, 4, (size_t)-1, 0, &c);
    CHECK(len == 0 && c == 0 && buf[0] == 'X');
    /* a NULL consumed is allowed */
    CHECK_EQ_U64(ckpt_escape(buf, sizeof buf, "\t", 1, 1, 0, NULL), 2);

    SECTION("escape in pieces");
    {
        /* the documented loop with a small buffer gives the whole text */
        static const char text[] = "x\xe2\x80\xae\n\xff\xc3\xa9\\\"\x1b end \xe2\x80\xa8";
        const char *whole = ESC(text, CKPT_ESCAPE_QUOTED);
        char joined[256], piece[CKPT_ESCAPE_UNIT_MAX + 1];
        size_t done = 0, n = sizeof text - 1, jl = 0, calls = 0;
        CHECK_STR(whole, "x\\u202e\\n\\xff\xc3\xa9\\\\\\\"\\x1b end \\u2028");
        joined[0] = '\0';
        while (done < n && calls < 100) {
            size_t k = ckpt_escape(piece, sizeof piece, text + done, n - done, (size_t)-1,
                                   CKPT_ESCAPE_QUOTED, &c);
            calls++;
            if (c == 0) break;
            memcpy(joined + jl, piece, k + 1);
            jl += k;
            done += c;
        }
        CHECK_EQ_U64(done, n);
        CHECK_STR(joined, "x\\u202e\\n\\xff\xc3\xa9\\\\\\\"\\x1b end \\u2028");
    }

    SECTION("width");
    CHECK_EQ_U64(ckpt_escape_width("abc", 3, 0), 3);
    CHECK_EQ_U64(ckpt_escape_width("caf\xc3\xa9", 5, 0), 4);    /* é: one column */
    CHECK_EQ_U64(ckpt_escape_width("\xe4\xb8\xad\n", 4, 0), 3); /* 1 + "\n" */
    CHECK_EQ_U64(ckpt_escape_width("\xe2\x80\xae", 3, 0), 6);   /* "\u202e" */
    CHECK_EQ_U64(ckpt_escape_width("\xff", 1, 0), 4);           /* "\xff" */
    CHECK_EQ_U64(ckpt_escape_width("\xc3\xa9", 2, CKPT_ESCAPE_BYTES), 8);
    CHECK_EQ_U64(ckpt_escape_width("", 0, 0), 0);
}

static void test_utf8_base64(void)
{
    static const char *const in[] = {"", "f", "fo", "foo", "foob", "fooba", "foobar"};
    static const char *const out[] = {"",         "Zg==",     "Zm8=",    "Zm9v",
                                      "Zm9vYg==", "Zm9vYmE=", "Zm9vYmFy"};
    char buf[32];
    size_t i;

    SECTION("utf8");
    CHECK_EQ_U64(ckpt_utf8_seq("a", 1), 1);
    CHECK_EQ_U64(ckpt_utf8_seq("", 0), 0);
    CHECK_EQ_U64(ckpt_utf8_seq("\xc3\xa9", 2), 2);
    CHECK_EQ_U64(ckpt_utf8_seq("\xc3\xa9", 1), 0); /* cut */
    CHECK_EQ_U64(ckpt_utf8_seq("\xe2\x82\xac", 3), 3);
    CHECK_EQ_U64(ckpt_utf8_seq("\xf0\x9f\x98\x80", 4), 4);
    CHECK_EQ_U64(ckpt_utf8_seq("\xc1\xbf", 2), 0);         /* overlong */
    CHECK_EQ_U64(ckpt_utf8_seq("\xe0\x9f\xbf", 3), 0);     /* overlong */
    CHECK_EQ_U64(ckpt_utf8_seq("\xed\xbf\xbf", 3), 0);     /* surrogate */
    CHECK_EQ_U64(ckpt_utf8_seq("\xf4\x90\x80\x80", 4), 0); /* > U+10FFFF */
    CHECK_EQ_U64(ckpt_utf8_seq("\x80", 1), 0);
    CHECK(ckpt_utf8_valid("", 0));
    CHECK(ckpt_utf8_valid("caf\xc3\xa9 \xe2\x80\xae", 9));
    CHECK(!ckpt_utf8_valid("caf\xc3", 4));
    CHECK(!ckpt_utf8_valid("a\x00\xff", 3));
    CHECK(ckpt_utf8_valid("a\x00z", 3)); /* NUL is a character */

    SECTION("base64");
    for (i = 0; i < sizeof in / sizeof in[0]; i++) {
        CHECK_EQ_U64(ckpt_base64(buf, sizeof buf, in[i], strlen(in[i])), strlen(out[i]));
        CHECK_STR(buf, out[i]);
        CHECK_EQ_U64(ckpt_base64(NULL, 0, in[i], strlen(in[i])), strlen(out[i]));
    }
    CHECK_EQ_U64(ckpt_base64(buf, sizeof buf, "\xff\xfe\x00", 3), 4);
    CHECK_STR(buf, "//4A");
    /* too small: nothing, and the length needed */
    strcpy(buf, "junk");
    CHECK_EQ_U64(ckpt_base64(buf, 8, "foobar", 6), 8);
    CHECK_STR(buf, "");
    CHECK_EQ_U64(ckpt_base64(buf, 9, "foobar", 6), 8);
    CHECK_STR(buf, "Zm9vYmFy");
}

/* ---- the tree ------------------------------------------------------------ */

typedef struct out {
    char *p;
    size_t len, cap;
    size_t pieces;
    int pieces_end_line; /* every piece ended with '\n' */
    int fail_after;      /* fail the write at this piece (1-based), 0: never */
} out;

static int collect(void *ctx, const char *s, size_t n)
{
    out *o = ctx;
    o->pieces++;
    if (o->fail_after && (int)o->pieces >= o->fail_after) return -1;
    if (n == 0 || s[n - 1] != '\n') o->pieces_end_line = 0;
    if (o->len + n + 1 > o->cap) {
        size_t cap = o->cap ? o->cap : 4096;
        char *p;
        while (cap < o->len + n + 1) cap *= 2;
        p = realloc(o->p, cap);
        if (!p) return -1;
        o->p = p;
        o->cap = cap;
    }
    memcpy(o->p + o->len, s, n);
    o->len += n;
    o->p[o->len] = '\0';
    return 0;
}

static void out_init(out *o)
{
    memset(o, 0, sizeof *o);
    o->pieces_end_line = 1;
}

/* The tree of a pickle in memory (opened with max_depth 2048 so that the
 * tree's own limit is what stops it); returns ckpt_value_to_text()'s
 * result, the text in o. */
static int tree(const void *pkl, size_t n, const ckpt_text_options *topt, out *o, ckpt_error *err)
{
    ckpt_options opt;
    ckpt_file *f;
    int r;
    ckpt_options_init(&opt);
    opt.max_depth = 2048;
    out_init(o);
    f = ckpt_open_memory(pkl, n, &opt, err);
    CHECK(f != NULL);
    if (!f) {
        fprintf(stderr, "open: %s\n", err->message);
        return -2;
    }
    r = ckpt_value_to_text(f, NULL, collect, o, topt, err);
    ckpt_close(f);
    return r;
}

#include "text_cases.inc"

static void check_case(const char *name, const char *pkl, size_t n, const char *expected)
{
    out o;
    ckpt_error err;
    SECTION(name);
    CHECK_EQ_INT(tree(pkl, n, NULL, &o, &err), 0);
    CHECK_EQ_INT(err.code, CKPT_OK);
    CHECK_STR(o.p, expected);
    CHECK(o.pieces_end_line);
    free(o.p);
}

#define CASE(name) check_case(#name, name##_pkl, sizeof name##_pkl - 1, name##_text)

/* 0x80 0x02, then `n` nested lists: "]" x n, "a" x (n - 1), ".". */
static char *nested_lists(size_t n, size_t *len)
{
    char *p = malloc(2 * n + 3), *q = p;
    size_t i;
    if (!p) return NULL;
    *q++ = '\x80';
    *q++ = '\x02';
    for (i = 0; i < n; i++) *q++ = ']';
    for (i = 1; i < n; i++) *q++ = 'a';
    *q++ = '.';
    *len = (size_t)(q - p);
    return p;
}

/* `n` argparse.Namespace objects, each the "c" of the one before in its
 * dict state: the walk goes two levels per object, the tree one. */
static char *object_chain(size_t n, size_t *len)
{
    static const char obj[] = "cargparse\nNamespace\n)\x81}X\x01\x00\x00\x00"
                              "c";
    char *p = malloc(2 + n * (sizeof obj - 1) + 1 + 2 * n + 1), *q = p;
    size_t i;
    if (!p) return NULL;
    *q++ = '\x80';
    *q++ = '\x02';
    for (i = 0; i < n; i++) {
        memcpy(q, obj, sizeof obj - 1);
        q += sizeof obj - 1;
    }
    *q++ = 'N';
    for (i = 0; i < n; i++) {
        *q++ = 's';
        *q++ = 'b';
    }
    *q++ = '.';
    *len = (size_t)(q - p);
    return p;
}

static size_t count_lines(const char *s, size_t n, size_t *last_len)
{
    size_t lines = 0, i, start = 0;
    *last_len = 0;
    for (i = 0; i < n; i++)
        if (s[i] == '\n') {
            lines++;
            *last_len = i + 1 - start;
            start = i + 1;
        }
    return lines;
}

/* A <ref> path cut at exactly 1000 bytes: dicts nested under six bare
 * 200-byte ASCII keys, the innermost (empty) one referenced again.  The
 * expected text is built here from ckpt_text.h's rules. */
static void test_ref_cut(void)
{
    char pkl[2048], want[4096], path[1400], key[201];
    size_t n = 0, w = 0, pl = 0;
    int i, d;
    out o;
    ckpt_error err;

    SECTION("ref path cut");
    memcpy(pkl,
           "\x80\x02}(X\x01\x00\x00\x00"
           "d",
           10);
    n = 10;
    pl = (size_t)sprintf(path, "d");
    w = (size_t)sprintf(want, "d:\n");
    for (i = 1; i <= 6; i++) {
        memset(key, 'x', 199);
        key[199] = (char)('0' + i);
        key[200] = '\0';
        pkl[n++] = '}';
        pkl[n++] = 'X';
        pkl[n++] = (char)200;
        pkl[n++] = 0;
        pkl[n++] = 0;
        pkl[n++] = 0;
        memcpy(pkl + n, key, 200);
        n += 200;
        pl += (size_t)sprintf(path + pl, ".%s", key);
        for (d = 0; d < i; d++) w += (size_t)sprintf(want + w, "  ");
        w += (size_t)sprintf(want + w, i < 6 ? "%s:\n" : "%s: {}\n", key);
    }
    memcpy(pkl + n,
           "}q\x00ssssssX\x01\x00\x00\x00"
           "rh\x00u.",
           19);
    n += 19;
    CHECK(pl > 1000);
    w += (size_t)sprintf(want + w, "r: <ref %.1000s...>\n", path);
    CHECK_EQ_INT(tree(pkl, n, NULL, &o, &err), 0);
    CHECK_STR(o.p, want);
    free(o.p);
}

static void test_depth(void)
{
    out o;
    ckpt_error err;
    ckpt_text_options topt;
    size_t n, last;
    char *p;

    SECTION("depth: lists");
    /* `ckpt show --max-depth 2048` of 1002 nested lists prints 1001 lines
     * (the root's items at the margin), the last "[0]: []" indented 2000
     * spaces, and no error; of 1003, 1001 lines,
     * the last "[0]: list (1 item)" indented 2000 spaces, then
     * "nesting deeper than 1000" */
    p = nested_lists(1002, &n);
    CHECK_EQ_INT(tree(p, n, NULL, &o, &err), 0);
    CHECK_EQ_U64(count_lines(o.p, o.len, &last), 1001);
    CHECK_EQ_U64(last, 2000 + strlen("[0]: []\n"));
    free(o.p);
    free(p);
    p = nested_lists(1003, &n);
    CHECK_EQ_INT(tree(p, n, NULL, &o, &err), -1);
    CHECK_EQ_INT(err.code, CKPT_E_LIMIT);
    CHECK_STR(err.message, "nesting deeper than 1000");
    CHECK_EQ_INT(err.offset, -1);
    CHECK_EQ_U64(count_lines(o.p, o.len, &last), 1001); /* written before the error */
    CHECK_EQ_U64(last, 2000 + strlen("[0]: list (1 item)\n"));
    CHECK(o.len > 64 * 1024 && o.pieces > 1 && o.pieces_end_line);
    free(o.p);

    SECTION("depth: option");
    ckpt_text_options_init(&topt);
    CHECK_EQ_U64(topt.max_depth, 1000);
    topt.max_depth = 2;
    CHECK_EQ_INT(tree(p, n, &topt, &o, &err), -1);
    CHECK_EQ_INT(err.code, CKPT_E_LIMIT);
    CHECK_STR(err.message, "nesting deeper than 2");
    CHECK_STR(o.p, "[0]: list (1 item)\n  [0]: list (1 item)\n    [0]: list (1 item)\n");
    free(o.p);
    topt.max_depth = 5000; /* at most 1000 */
    CHECK_EQ_INT(tree(p, n, &topt, &o, &err), -1);
    CHECK_STR(err.message, "nesting deeper than 1000");
    free(o.p);
    free(p);

    SECTION("depth: objects");
    /* the CLI (--max-depth 2048) on 1100 chained objects: 1001 lines, the
     * last "c: argparse.Namespace(...)" indented 2000 spaces; on 1000: no
     * error, 1000 lines */
    p = object_chain(1100, &n);
    CHECK_EQ_INT(tree(p, n, NULL, &o, &err), -1);
    CHECK_EQ_INT(err.code, CKPT_E_LIMIT);
    CHECK_STR(err.message, "nesting deeper than 1000");
    CHECK_EQ_U64(count_lines(o.p, o.len, &last), 1001);
    CHECK_EQ_U64(last, 2000 + strlen("c: argparse.Namespace(...)\n"));
    CHECK(o.len > 6 &&
          memcmp(o.p, "argparse.Namespace(...)\n  c: argparse.Namespace(...)\n", 53) == 0);
    free(o.p);
    free(p);
    p = object_chain(1000, &n);
    CHECK_EQ_INT(tree(p, n, NULL, &o, &err), 0);
    CHECK_EQ_U64(count_lines(o.p, o.len, &last), 1001);
    CHECK_EQ_U64(last, 2000 + strlen("c: None\n"));
    free(o.p);
    free(p);
}

static void test_errors(void)
{
    out o;
    ckpt_error err;
    ckpt_text_options topt;
    size_t n;
    char *p = nested_lists(3000 / 2, &n); /* output > 64 KiB: several pieces */

    SECTION("errors");
    out_init(&o);
    o.fail_after = 1;
    {
        ckpt_options opt;
        ckpt_file *f;
        ckpt_options_init(&opt);
        opt.max_depth = 2048;
        f = ckpt_open_memory(p, n, &opt, &err);
        CHECK(f != NULL);
        if (f) {
            CHECK_EQ_INT(ckpt_value_to_text(f, NULL, collect, &o, NULL, &err), -1);
            CHECK_EQ_INT(err.code, CKPT_E_IO);
            CHECK_EQ_U64(o.pieces, 1); /* nothing written after the failure */
            CHECK_EQ_INT(ckpt_value_to_text(f, NULL, NULL, &o, NULL, &err), -1);
            CHECK_EQ_INT(err.code, CKPT_E_ARG);
            memset(&topt, 0, sizeof topt); /* not initialised */
            CHECK_EQ_INT(ckpt_value_to_text(f, NULL, collect, &o, &topt, &err), -1);
            CHECK_EQ_INT(err.code, CKPT_E_ARG);
            CHECK_EQ_INT(ckpt_value_to_text(f, NULL, collect, &o, NULL, NULL), -1);
            ckpt_close(f);
        }
    }
    CHECK_EQ_INT(ckpt_value_to_text(NULL, NULL, collect, &o, NULL, &err), -1);
    CHECK_EQ_INT(err.code, CKPT_E_ARG);
    free(o.p);
    free(p);
}

/* A root list of 20000 ints: "[i]: i" lines, written in several pieces. */
static void test_pieces(void)
{
    size_t n = 20000, i, len = 0;
    char *p = malloc(8 + 5 * n), *want = malloc(32 * n), *q = p;
    out o;
    ckpt_error err;
    SECTION("pieces");
    if (!p || !want) {
        CHECK(0);
        free(p);
        free(want);
        return;
    }
    *q++ = '\x80';
    *q++ = '\x02';
    *q++ = ']';
    *q++ = '(';
    for (i = 0; i < n; i++) {
        *q++ = 'M'; /* BININT2 */
        *q++ = (char)(i & 0xff);
        *q++ = (char)(i >> 8);
        len += (size_t)sprintf(want + len, "[%zu]: %zu\n", i, i);
    }
    *q++ = 'e';
    *q++ = '.';
    CHECK_EQ_INT(tree(p, (size_t)(q - p), NULL, &o, &err), 0);
    CHECK_STR(o.p, want);
    CHECK(o.pieces > 1 && o.pieces_end_line);
    free(o.p);
    free(p);
    free(want);
}

static char *slurp(const char *path, size_t *n)
{
    FILE *fp = fopen(path, "rb");
    char *p = NULL;
    long sz;
    if (!fp) return NULL;
    if (fseek(fp, 0, SEEK_END) == 0 && (sz = ftell(fp)) >= 0 && fseek(fp, 0, SEEK_SET) == 0 &&
        (p = malloc((size_t)sz + 1)) != NULL) {
        *n = fread(p, 1, (size_t)sz, fp);
        p[*n] = '\0';
    }
    fclose(fp);
    return p;
}

static void test_sample(const char *pt, const char *expected_path)
{
    ckpt_error err;
    ckpt_file *f;
    size_t n = 0;
    char *expected = slurp(expected_path, &n);
    out o;
    SECTION("sample");
    CHECK(expected != NULL && n > 100);
    out_init(&o);
    f = ckpt_open(pt, NULL, &err);
    CHECK(f != NULL);
    if (f && expected) {
        CHECK_EQ_INT(ckpt_value_to_text(f, NULL, collect, &o, NULL, &err), 0);
        CHECK_STR(o.p, expected);
        /* a value under the root: the optimizer's param_groups */
        o.len = 0;
        {
            const ckpt_value *opt = ckpt_value_get(ckpt_root(f), "optimizer");
            const ckpt_value *pg = opt ? ckpt_value_get(opt, "param_groups") : NULL;
            CHECK(pg != NULL);
            if (pg) {
                CHECK_EQ_INT(ckpt_value_to_text(f, pg, collect, &o, NULL, &err), 0);
                CHECK(o.p && strncmp(o.p, "[0]:\n  lr: ", 11) == 0);
            }
        }
    }
    ckpt_close(f);
    free(o.p);
    free(expected);
}

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: test_text SAMPLE.pt SAMPLE.show.expected\n");
        return 2;
    }
    test_escape_classes();
    test_escape_limits();
    test_utf8_base64();
    CASE(shared);
    CASE(cycle);
    CASE(objects);
    CASE(longkeys);
    test_ref_cut();
    test_depth();
    test_errors();
    test_pieces();
    test_sample(argv[1], argv[2]);
    return ut_summary();
}
