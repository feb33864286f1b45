/*
 * test_names.c - tensor names through the public API (issue 33): every
 * byte of a key kept (a NUL in a name: ckpt_tensor.name_len,
 * ckpt_find_n()), names that flatten to one ({'a.b': x, 'a': {'b': y}}:
 * listed, ckpt_find_next(), ckpt_tensor_name_parts(), a note; a key set
 * twice in one dict refused), opt.key as a path of keys (and with key_len),
 * and ckpt_tensor_path_text() / ckpt_name_match() / ckpt_json_escape() of
 * ckpt_text.h.  Archives are built here as bytes (build.h).
 *
 * Before issue 33: {'w\0evil', 'w'} failed with "two tensors are named
 * 'w'", {'a.b', 'a': {'b'}} with "two tensors are named 'a.b'", and a key
 * path in opt.key was "no top-level key".
 */
#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L
#endif
#include "ckpt.h"
#include "ckpt_text.h"
#include "harness.h"
#include "build.h"

#undef OPEN_OK
#define OPEN_OK(z, o) open_ok_(&(z)->out, (o), __FILE__, __LINE__)

static const float DATA[8] = {1, 2, 3, 4, 5, 6, 7, 8};
static const int64_t SH[1] = {2}, ST[1] = {1};

/* A tensor over elements [2 off, 2 off + 2) of storage "0". */
static void tensor_at(bb *p, int64_t off)
{
    pk_tensor(p, "FloatStorage", "0", 8, off * 2, 1, SH, ST);
}

/* A torch ZIP around the pickle p, storage "0" holding DATA. */
static void zip_of(zipb *z, const bb *p)
{
    zb_init(z);
    zb_add(z, "archive/data.pkl", p->p, p->n);
    zb_add(z, "archive/data/0", DATA, sizeof DATA);
    zb_finish(z);
}

/* The first element of t. */
static float first(const ckpt_file *f, const ckpt_tensor *t)
{
    float v[2] = {-1, -1};
    ckpt_error e;
    if (!t || ckpt_tensor_read(f, t, v, sizeof v, &e) != 0) return -1;
    return v[0];
}

static void test_nul(void)
{
    SECTION("a NUL byte in a key: the whole name is kept");
    bb p = {0};
    pk_proto(&p, 2);
    pk_empty_dict(&p);
    pk_mark(&p);
    pk_strn(&p, "w\0evil", 6);
    tensor_at(&p, 0);
    pk_str(&p, "w");
    tensor_at(&p, 1);
    pk_strn(&p, "a\0b", 3);
    tensor_at(&p, 2);
    pk_strn(&p, "a\0c", 3);
    tensor_at(&p, 3);
    pk_setitems(&p);
    pk_stop(&p);
    zipb z;
    zip_of(&z, &p);
    ckpt_file *f = OPEN_OK(&z, NULL);
    if (f) {
        CHECK_EQ_INT(ckpt_tensor_count(f), 4);
        const ckpt_tensor *t = ckpt_tensor_at(f, 0);
        CHECK(t && t->name_len == 6 && memcmp(t->name, "w\0evil", 7) == 0);
        CHECK(ckpt_find_n(f, "w\0evil", 6) == t);
        CHECK(ckpt_find(f, "w") == ckpt_tensor_at(f, 1)); /* the C string is another name */
        CHECK(ckpt_find_n(f, "w\0", 2) == NULL);
        CHECK(ckpt_find_n(f, "a\0c", 3) == ckpt_tensor_at(f, 3));
        CHECK(ckpt_find(f, "a") == NULL);
        CHECK(ckpt_find_next(f, t) == NULL);
        CHECK(first(f, ckpt_find_n(f, "a\0b", 3)) == 5.0f);
        ckpt_tensor one;
        memset(&one, 0, sizeof one);
        CHECK(ckpt_tensor_get(f, 3, &one, NULL) == 0);
        CHECK_EQ_U64(one.name_len, 3);
        /* a caller built against the layout before name_len: not written */
        memset(&one, 0xee, sizeof one);
        CHECK(ckpt_tensor_get_sized(f, 3, &one, offsetof(ckpt_tensor, name_len), NULL) == 0);
        CHECK(one.name_len == (size_t)0xeeeeeeeeeeeeeeeeull);
        CHECK(first(f, &one) == 7.0f); /* the copy reads (known by its name) */
        size_t ends[4], np = 9;
        CHECK(ckpt_tensor_name_parts(f, t, ends, 4, &np, NULL) == 0);
        CHECK(np == 1 && ends[0] == 6);
        char kp[64];
        CHECK(ckpt_tensor_path_text(f, t, kp, sizeof kp, NULL) == 0);
        CHECK_STR(kp, "[\"w\\x00evil\"]");
        ckpt_close(f);
    }
    /* opt.key with key_len selects a key holding NUL */
    ckpt_options o;
    ckpt_options_init(&o);
    o.key = "a\0c";
    o.key_len = 3;
    f = OPEN_OK(&z, &o);
    if (f) {
        CHECK_EQ_INT(ckpt_tensor_count(f), 1);
        CHECK(ckpt_tensor_at(f, 0) && ckpt_tensor_at(f, 0)->name_len == 0);
        CHECK(first(f, ckpt_find(f, "")) == 7.0f);
        ckpt_close(f);
    }
    o.key_len = 0; /* the C string "a": no such key */
    ckpt_error e = open_fail(&z.out, &o);
    CHECK_EQ_INT(e.code, CKPT_E_NOTFOUND);
    bb_free(&z.out);
    bb_free(&p);

    SECTION("equal up to a NUL: two names, not a clash");
    pk_proto(&p, 2);
    pk_empty_dict(&p);
    pk_mark(&p);
    pk_strn(&p, "w\0x", 3);
    tensor_at(&p, 0);
    pk_strn(&p, "w\0y", 3);
    tensor_at(&p, 1);
    pk_setitems(&p);
    pk_stop(&p);
    zip_of(&z, &p);
    f = OPEN_OK(&z, NULL);
    if (f) {
        CHECK_EQ_INT(ckpt_tensor_count(f), 2);
        CHECK(first(f, ckpt_find_n(f, "w\0y", 3)) == 3.0f);
        CHECK_EQ_INT(ckpt_note_count(f), 0);
        ckpt_close(f);
    }
    bb_free(&z.out);
    bb_free(&p);
}

static void test_clash(void)
{
    SECTION("keys that flatten to one name: both listed");
    bb p = {0};
    /* {'model.fc.weight': t0, 'model': {'fc.weight': t1}, 'x': t2,
     *  'model.fc': {'weight': t3}} */
    pk_proto(&p, 2);
    pk_empty_dict(&p);
    pk_mark(&p);
    pk_str(&p, "model.fc.weight");
    tensor_at(&p, 0);
    pk_str(&p, "model");
    pk_empty_dict(&p);
    pk_str(&p, "fc.weight");
    tensor_at(&p, 1);
    pk_setitem(&p);
    pk_str(&p, "x");
    tensor_at(&p, 2);
    pk_str(&p, "model.fc");
    pk_empty_dict(&p);
    pk_str(&p, "weight");
    tensor_at(&p, 3);
    pk_setitem(&p);
    pk_setitems(&p);
    pk_stop(&p);
    zipb z;
    zip_of(&z, &p);
    ckpt_file *f = OPEN_OK(&z, NULL);
    if (f) {
        CHECK_EQ_INT(ckpt_tensor_count(f), 4);
        const ckpt_tensor *t0 = ckpt_tensor_at(f, 0), *t1 = ckpt_tensor_at(f, 1),
                          *t3 = ckpt_tensor_at(f, 3);
        CHECK_STR(t0->name, "model.fc.weight");
        CHECK_STR(t1->name, "model.fc.weight");
        CHECK_STR(t3->name, "model.fc.weight");
        CHECK(t0->name != t1->name); /* each listing its own pointer */
        CHECK(ckpt_find(f, "model.fc.weight") == t0);
        CHECK(ckpt_find_next(f, t0) == t1);
        CHECK(ckpt_find_next(f, t1) == t3);
        CHECK(ckpt_find_next(f, t3) == NULL);
        CHECK(ckpt_find_next(f, ckpt_tensor_at(f, 2)) == NULL);
        CHECK(first(f, t1) == 3.0f && first(f, t3) == 7.0f);
        /* a copy finds its next too */
        ckpt_tensor c;
        CHECK(ckpt_tensor_get(f, 1, &c, NULL) == 0);
        CHECK(ckpt_find_next(f, &c) == t3);
        size_t ends[4], np = 0;
        CHECK(ckpt_tensor_name_parts(f, t0, ends, 4, &np, NULL) == 0);
        CHECK(np == 1 && ends[0] == 15);
        CHECK(ckpt_tensor_name_parts(f, &c, ends, 4, &np, NULL) == 0);
        CHECK(np == 2 && ends[0] == 5 && ends[1] == 15);
        CHECK(ckpt_tensor_name_parts(f, t3, ends, 1, &np, NULL) == 0);
        CHECK(np == 2 && ends[0] == 8); /* more parts than the room: counted */
        char kp[64];
        CHECK(ckpt_tensor_path_text(f, t1, kp, sizeof kp, NULL) == 0);
        CHECK_STR(kp, "[\"model\"][\"fc.weight\"]");
        CHECK(ckpt_tensor_path_text(f, t3, kp, 20, NULL) == 0);
        CHECK_STR(kp, "[\"model.fc\"][\"we..."); /* cut, 19 bytes */
        ckpt_tensor stranger;
        memset(&stranger, 0, sizeof stranger);
        stranger.name = "model.fc.weight"; /* not a pointer of f's */
        ckpt_error e;
        CHECK(ckpt_tensor_name_parts(f, &stranger, ends, 4, &np, &e) == -1);
        CHECK_EQ_INT(e.code, CKPT_E_ARG);
        CHECK_EQ_INT(ckpt_note_count(f), 1);
        CHECK_CONTAINS(ckpt_note_at(f, 0), "tensors 0 and 1 are both named 'model.fc.weight'");
        CHECK_CONTAINS(ckpt_note_at(f, 0), "(2 tensors named as an earlier one in all)");
        CHECK(ckpt_verify(f, NULL, NULL, NULL) == 0);
        ckpt_close(f);
    }

    SECTION("a key path selects one of them");
    ckpt_options o;
    ckpt_options_init(&o);
    o.key = "model";
    f = OPEN_OK(&z, &o);
    if (f) {
        CHECK_EQ_INT(ckpt_tensor_count(f), 1);
        CHECK_STR(ckpt_tensor_at(f, 0)->name, "fc.weight");
        CHECK(first(f, ckpt_tensor_at(f, 0)) == 3.0f);
        CHECK_EQ_INT(ckpt_note_count(f), 0);
        ckpt_close(f);
    }
    o.key = "model.fc.weight"; /* the top-level key spelled so comes first */
    f = OPEN_OK(&z, &o);
    if (f) {
        CHECK_EQ_INT(ckpt_tensor_count(f), 1);
        CHECK_STR(ckpt_tensor_at(f, 0)->name, "");
        CHECK(first(f, ckpt_tensor_at(f, 0)) == 1.0f);
        ckpt_close(f);
    }
    o.key = "model.fc.weight.nope";
    ckpt_error e = open_fail(&z.out, &o);
    CHECK_EQ_INT(e.code, CKPT_E_NOTFOUND);
    CHECK_CONTAINS(e.message, "as a top-level key or a path of keys");
    bb_free(&z.out);
    bb_free(&p);

    SECTION("one key set twice in one dict: refused");
    pk_proto(&p, 2);
    pk_empty_dict(&p);
    pk_mark(&p);
    pk_str(&p, "w");
    tensor_at(&p, 0);
    pk_str(&p, "w");
    tensor_at(&p, 1);
    pk_setitems(&p);
    pk_stop(&p);
    zip_of(&z, &p);
    e = open_fail(&z.out, NULL);
    CHECK_EQ_INT(e.code, CKPT_E_FORMAT);
    CHECK_CONTAINS(e.message, "two tensors are named 'w' by the same key path");
    bb_free(&z.out);
    bb_free(&p);
}

static void test_key_paths(void)
{
    SECTION("opt.key: a path of keys through dicts, lists and int keys");
    bb p = {0};
    /* {'opt': {'state': {0: {'exp.avg': t0}}}, 'groups': [t1, {'w': t2}]} */
    pk_proto(&p, 2);
    pk_empty_dict(&p);
    pk_mark(&p);
    pk_str(&p, "opt");
    pk_empty_dict(&p);
    pk_str(&p, "state");
    pk_empty_dict(&p);
    pk_int(&p, 0);
    pk_empty_dict(&p);
    pk_str(&p, "exp.avg");
    tensor_at(&p, 0);
    pk_setitem(&p);
    pk_setitem(&p);
    pk_setitem(&p);
    pk_str(&p, "groups");
    pk_empty_list(&p);
    pk_mark(&p);
    tensor_at(&p, 1);
    pk_empty_dict(&p);
    pk_str(&p, "w");
    tensor_at(&p, 2);
    pk_setitem(&p);
    pk_appends(&p);
    pk_setitems(&p);
    pk_stop(&p);
    zipb z;
    zip_of(&z, &p);
    static const struct {
        const char *key;
        size_t count;
        const char *name;
        float v;
    } cases[] = {
        {"opt.state", 1, "0.exp.avg", 1},
        {"opt.state.0", 1, "exp.avg", 1},
        {"opt.state.0.exp.avg", 1, "", 1}, /* a key with a dot, last */
        {"groups", 2, "0", 3},
        {"groups.1", 1, "w", 5},
        {"groups.1.w", 1, "", 5},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        ckpt_options o;
        ckpt_options_init(&o);
        o.key = cases[i].key;
        ckpt_file *f = OPEN_OK(&z, &o);
        if (!f) continue;
        CHECK_EQ_INT(ckpt_tensor_count(f), cases[i].count);
        CHECK_STR(ckpt_tensor_at(f, 0)->name, cases[i].name);
        CHECK(first(f, ckpt_tensor_at(f, 0)) == cases[i].v);
        ckpt_close(f);
    }
    static const char *const missing[] = {"groups.2", "groups.01", "opt.state.1", "nope"};
    for (size_t i = 0; i < sizeof missing / sizeof missing[0]; i++) {
        ckpt_options o;
        ckpt_options_init(&o);
        o.key = missing[i];
        ckpt_error e = open_fail(&z.out, &o);
        CHECK_EQ_INT(e.code, CKPT_E_NOTFOUND);
    }
    bb_free(&z.out);
    bb_free(&p);
}

static void test_text(void)
{
    SECTION("ckpt_name_match: the name, or its escaped form");
    CHECK(ckpt_name_match(NULL, "x", 1));
    CHECK(ckpt_name_match("w*", "w\0evil", 6));
    CHECK(!ckpt_name_match("w", "w\0evil", 6)); /* not the C string's "w" */
    CHECK(ckpt_name_match("w\\\\x00*", "w\0evil", 6));
    CHECK(ckpt_name_match("*.weight", "fc.weight", 9));
    CHECK(!ckpt_name_match("*.bias", "fc.weight", 9));
    CHECK(ckpt_name_match("\\\\u202e*",
                          "\xe2\x80\xae"
                          "abc",
                          6));

    SECTION("ckpt_json_escape");
    char out[64];
    size_t c = 0;
    CHECK_EQ_U64(ckpt_json_escape(out, sizeof out, "a\0\xff\xe2\x80\xae\"", 7, &c), 21);
    CHECK_STR(out, "a\\u0000\\udcff\\u202e\\\"");
    CHECK_EQ_U64(c, 7);
    /* whole pieces only: "\\u0000" does not fit in 5 bytes after "a" */
    CHECK_EQ_U64(ckpt_json_escape(out, 6, "a\0", 2, &c), 1);
    CHECK_EQ_U64(c, 1);
    CHECK_EQ_U64(ckpt_json_escape(NULL, 0, "\x7f", 1, NULL), 6);
}

int main(void)
{
    test_nul();
    test_clash();
    test_key_paths();
    test_text();
    return ut_summary();
}
