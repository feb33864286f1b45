/*
 * test_memory.c - issue 14's memory savings keep their meaning: the arena's
 * in-place growth and give-back (ck_alloc_grow, ck_alloc_undo), the compact
 * string map (ck_map: 32-bit entries, ck_map_reserve), the pickle machine's
 * batch SETITEMS/APPENDS into arrays whose room is implicit (CK_SEQ_EXACT),
 * and the empty argument tuple given back after OrderedDict() & co, which
 * must not be given back when the pickle can still reach it (memo, DUP).
 * The pickles are hand-built; what they mean is what Python's pickle.loads
 * makes of the same bytes (noted beside each).
 */
#include "pickle/pickle.h"
#include "../unit/harness.h"
#include "../unit/build.h"

typedef struct run {
    ck_arena arena;
    ck_unpickler u;
    ckpt_options opt;
    ckpt_value *root;
    ckpt_error err;
} run;

static int run_pickle(run *r, const bb *b)
{
    memset(r, 0, sizeof *r);
    ckpt_options_init(&r->opt);
    r->u.arena = &r->arena;
    r->u.opt = &r->opt;
    r->u.input_size = b->n;
    ck_pickle_in in = {.buf = b->p, .len = b->n, .base = 0, .label = "pickle"};
    size_t used = 0;
    return ck_pickle_run(&r->u, &in, &r->root, &used, &r->err);
}

static void run_free(run *r)
{
    ck_unpickler_free(&r->u);
    ck_arena_free(&r->arena);
}

static void test_arena(void)
{
    SECTION("arena grow and undo");
    ck_arena a;
    memset(&a, 0, sizeof a);
    char *p = ck_alloc(&a, 20);
    CHECK(p != NULL);
    memcpy(p, "0123456789abcdefghi", 20);
    char *g = ck_alloc_grow(&a, p, 20, 100); /* the latest allocation: in place */
    CHECK(g == p);
    CHECK_MEM(g, "0123456789abcdefghi", 20);
    int zero = 1;
    for (int i = 20; i < 100; i++) zero &= g[i] == 0;
    CHECK(zero);
    char *q = ck_alloc(&a, 8);
    CHECK(q == g + 104);                       /* 100 rounded to 8 */
    char *g2 = ck_alloc_grow(&a, g, 100, 200); /* no longer the latest: moved */
    CHECK(g2 != g);
    CHECK_MEM(g2, "0123456789abcdefghi", 20);
    CHECK(!ck_alloc_undo(&a, g, 100)); /* not the latest */
    char *t = ck_alloc(&a, 32);
    memset(t, 0x5a, 32);
    CHECK(ck_alloc_undo(&a, t, 32));
    char *t2 = ck_alloc(&a, 32); /* the same bytes, zeroed again */
    CHECK(t2 == t);
    zero = 1;
    for (int i = 0; i < 32; i++) zero &= t2[i] == 0;
    CHECK(zero);
    ck_arena_free(&a);
}

static void test_map(void)
{
    SECTION("string map");
    enum { N = 100000 };
    char(*keys)[16] = malloc(N * sizeof *keys);
    CHECK(keys != NULL);
    if (!keys) return;
    ck_map m;
    memset(&m, 0, sizeof m);
    CHECK_EQ_INT(ck_map_reserve(&m, N), 0);
    size_t cap = m.cap;
    CHECK(cap >= 2 * (size_t)N);
    int bad = 0;
    for (int i = 0; i < N; i++) {
        int n = snprintf(keys[i], sizeof keys[i], "k.%d", i);
        bad += ck_map_add(&m, keys[i], (size_t)n, (size_t)i * 3, NULL) != 0;
    }
    CHECK_EQ_INT(bad, 0);
    CHECK_EQ_U64(m.cap, cap); /* sized once */
    size_t v = 0, old = 0;
    for (int i = 0; i < N; i += 997) {
        bad += !ck_map_get(&m, keys[i], strlen(keys[i]), &v) || v != (size_t)i * 3;
    }
    CHECK_EQ_INT(bad, 0);
    CHECK(!ck_map_get(&m, "k.100000", 8, NULL));
    CHECK_EQ_INT(ck_map_add(&m, "k.77", 4, 1, &old), 1); /* present: its value */
    CHECK_EQ_U64(old, 231);
    CHECK_EQ_INT(ck_map_put(&m, "big", 3, (size_t)UINT32_MAX + 1), -1); /* values are indices */
    CHECK_EQ_U64(m.count, N);
    ck_map_free(&m);
    ck_map g; /* grown one key at a time */
    memset(&g, 0, sizeof g);
    for (int i = 0; i < N; i++) bad += ck_map_put(&g, keys[i], strlen(keys[i]), (size_t)i) != 0;
    for (int i = 0; i < N; i += 1013)
        bad += !ck_map_get(&g, keys[i], strlen(keys[i]), &v) || v != (size_t)i;
    CHECK_EQ_INT(bad, 0);
    ck_map_free(&g);
    free(keys);
}

/* {'k0': 0, ..., 'k2999': 2999} as EMPTY_DICT then three SETITEMS batches of
 * 1000, then one SETITEM: pickle.loads gives 3001 keys in that order. */
static void test_batches(void)
{
    SECTION("SETITEMS / APPENDS batches");
    CHECK_EQ_U64(sizeof(ckpt_value), 8 + 2 * sizeof(void *) + sizeof(size_t));
    bb b = {0};
    bb_u8(&b, 0x80);
    bb_u8(&b, 2);
    bb_u8(&b, '}');
    for (int batch = 0; batch < 3; batch++) {
        bb_u8(&b, '(');
        for (int i = batch * 1000; i < batch * 1000 + 1000; i++) {
            char k[16];
            int n = snprintf(k, sizeof k, "k%d", i);
            bb_u8(&b, 'X');
            bb_le32(&b, (uint32_t)n);
            bb_put(&b, k, (size_t)n);
            bb_u8(&b, 'M');
            bb_le16(&b, (uint32_t)i);
        }
        bb_u8(&b, 'u');
    }
    bb_u8(&b, 'X'); /* SETITEM 'last': [] then APPENDS 5 ints, APPEND one */
    bb_le32(&b, 4);
    bb_put(&b, "last", 4);
    bb_u8(&b, ']');
    bb_u8(&b, '(');
    for (int i = 0; i < 5; i++) {
        bb_u8(&b, 'K');
        bb_u8(&b, (unsigned)(10 + i));
    }
    bb_u8(&b, 'e');
    bb_u8(&b, 'K');
    bb_u8(&b, 99);
    bb_u8(&b, 'a');
    bb_u8(&b, 's');
    bb_u8(&b, '.');
    run r;
    CHECK_EQ_INT(run_pickle(&r, &b), 0);
    CHECK_EQ_INT(ckpt_value_kind(r.root), CKPT_V_DICT);
    CHECK_EQ_U64(ckpt_value_len(r.root), 3001);
    size_t tl = 0;
    const char *t = ckpt_value_text(ckpt_value_key(r.root, 2500), &tl);
    CHECK(t && tl == 5 && memcmp(t, "k2500", 5) == 0);
    CHECK_EQ_INT(ckpt_value_int(ckpt_value_item(r.root, 2500)), 2500);
    const ckpt_value *l = ckpt_value_get(r.root, "last");
    CHECK_EQ_U64(ckpt_value_len(l), 6);
    CHECK_EQ_INT(ckpt_value_int(ckpt_value_item(l, 4)), 14);
    CHECK_EQ_INT(ckpt_value_int(ckpt_value_item(l, 5)), 99);
    run_free(&r);
    bb_free(&b);
}

static void put_global(bb *b, const char *mod, const char *name)
{
    bb_u8(b, 'c');
    bb_text(b, mod);
    bb_u8(b, '\n');
    bb_text(b, name);
    bb_u8(b, '\n');
}

static void test_empty_args(void)
{
    SECTION("empty argument tuples");
    /* [OrderedDict(), OrderedDict(), set()]: the unreachable empty tuples go */
    bb b = {0};
    bb_u8(&b, 0x80);
    bb_u8(&b, 2);
    bb_u8(&b, ']');
    bb_u8(&b, '(');
    put_global(&b, "collections", "OrderedDict");
    bb_u8(&b, 'q');
    bb_u8(&b, 0);
    bb_u8(&b, ')');
    bb_u8(&b, 'R');
    bb_u8(&b, 'h');
    bb_u8(&b, 0);
    bb_u8(&b, ')');
    bb_u8(&b, 'R');
    put_global(&b, "builtins", "set");
    bb_u8(&b, ')');
    bb_u8(&b, 'R');
    bb_u8(&b, 'e');
    bb_u8(&b, '.');
    run r;
    CHECK_EQ_INT(run_pickle(&r, &b), 0);
    CHECK_EQ_U64(ckpt_value_len(r.root), 3);
    CHECK_EQ_INT(ckpt_value_kind(ckpt_value_item(r.root, 0)), CKPT_V_DICT);
    CHECK_STR(ckpt_value_class(ckpt_value_item(r.root, 1)), "collections.OrderedDict");
    CHECK(ckpt_value_item(r.root, 0) != ckpt_value_item(r.root, 1)); /* two dicts */
    CHECK_EQ_INT(ckpt_value_kind(ckpt_value_item(r.root, 2)), CKPT_V_SET);
    uint32_t ids = r.u.next_id;
    run_free(&r);
    bb_free(&b);

    /* An empty tuple memoized (q) before the call stays: a GET after it
     * still sees an empty tuple; one DUPed stays too.  pickle.loads gives
     * [OrderedDict(), (), (), OrderedDict()]. */
    bb c = {0};
    bb_u8(&c, 0x80);
    bb_u8(&c, 2);
    bb_u8(&c, ']');
    bb_u8(&c, '(');
    put_global(&c, "collections", "OrderedDict");
    bb_u8(&c, ')');
    bb_u8(&c, 'q');
    bb_u8(&c, 1);
    bb_u8(&c, 'R'); /* OrderedDict() */
    bb_u8(&c, 'h');
    bb_u8(&c, 1); /* () from the memo */
    bb_u8(&c, ')');
    bb_u8(&c, '2'); /* (), DUP */
    bb_u8(&c, '0'); /* POP the copy: one () left, pinned */
    put_global(&c, "collections", "OrderedDict");
    bb_u8(&c, ')');
    bb_u8(&c, 'R'); /* OrderedDict() */
    bb_u8(&c, 'e');
    bb_u8(&c, '.');
    CHECK_EQ_INT(run_pickle(&r, &c), 0);
    CHECK_EQ_U64(ckpt_value_len(r.root), 4);
    CHECK_EQ_INT(ckpt_value_kind(ckpt_value_item(r.root, 0)), CKPT_V_DICT);
    CHECK_EQ_INT(ckpt_value_kind(ckpt_value_item(r.root, 1)), CKPT_V_TUPLE);
    CHECK_EQ_U64(ckpt_value_len(ckpt_value_item(r.root, 1)), 0);
    CHECK_EQ_INT(ckpt_value_kind(ckpt_value_item(r.root, 2)), CKPT_V_TUPLE);
    CHECK_EQ_INT(ckpt_value_kind(ckpt_value_item(r.root, 3)), CKPT_V_DICT);
    CHECK(ckpt_value_item(r.root, 0) != ckpt_value_item(r.root, 3));
    run_free(&r);
    bb_free(&c);
    /* the first pickle's three empty tuples gave their ids back (9 without) */
    CHECK(ids <= 6);
}

int main(void)
{
    test_arena();
    test_map();
    test_batches();
    test_empty_args();
    return ut_summary();
}
