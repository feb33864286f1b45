/*
 * test_memory.c - issue 14's memory savings keep their meaning: the arena's
 * in-place growth and give-back (ck_alloc_grow, ck_alloc_undo), the compact
 * string map (ck_map: 32-bit entries, ck_map_reserve), the pickle machine's
 * batch SETITEMS/APPENDS into arrays whose room is implicit (CK_SEQ_EXACT),
 * and the empty argument tuple given back after OrderedDict() & co, which
 * must not be given back when the pickle can still reach it (memo, DUP);
 * a big array the arena moves, and a pickle's pages behind the machine
 * (ck_pickle_in.discard), given back to the system (mincore tells); a
 * mapped arena block's next pages faulted in before they are touched
 * (mincore again), and never handed out past the block's room.
 * The pickles are hand-built; what they mean is what Python's pickle.loads
 * makes of the same bytes (noted beside each).
 */
#include "pickle/pickle.h"
#include <sys/mman.h>
#include <unistd.h>
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

    /* An empty tuple that is no longer the arena's latest allocation (a
     * string made and popped after it) goes to the free lists instead, and
     * the next node takes it: 1000 x [OrderedDict()] in a list, which
     * pickle.loads makes 1000 empty OrderedDicts of. */
    bb d = {0};
    bb_u8(&d, 0x80);
    bb_u8(&d, 2);
    bb_u8(&d, ']');
    put_global(&d, "collections", "OrderedDict");
    bb_u8(&d, 'q');
    bb_u8(&d, 0);
    bb_u8(&d, '0'); /* memoized, fetched below, popped */
    for (int i = 0; i < 1000; i++) {
        bb_u8(&d, 'h');
        bb_u8(&d, 0);
        bb_u8(&d, ')');
        bb_u8(&d, 'X');
        bb_le32(&d, 8);
        bb_put(&d, "popped!!", 8);
        bb_u8(&d, '0'); /* POP */
        bb_u8(&d, 'R');
        bb_u8(&d, 'a');
    }
    bb_u8(&d, '.');
    CHECK_EQ_INT(run_pickle(&r, &d), 0);
    CHECK_EQ_U64(ckpt_value_len(r.root), 1000);
    int dicts = ckpt_value_len(r.root) == 1000;
    for (size_t i = 0; dicts && i < 1000; i++)
        dicts = ckpt_value_kind(ckpt_value_item(r.root, i)) == CKPT_V_DICT &&
                ckpt_value_len(ckpt_value_item(r.root, i)) == 0;
    CHECK(dicts);
    size_t used = 0;
    for (const ck_block *blk = r.arena.head; blk; blk = blk->next) used += blk->used;
    /* a string (48), a dict (32) and the list's room (16) an item: 96 KB;
     * with the tuples kept (32 more an item): 128 KB */
    CHECK(used < 112 * 1000);
    run_free(&r);
    bb_free(&d);
}

/* How many of the whole pages inside [p, p+n) are resident (mincore). */
static size_t resident_pages(const void *p, size_t n, size_t *whole)
{
    uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
    uintptr_t lo = ((uintptr_t)p + page - 1) & ~(page - 1), hi = ((uintptr_t)p + n) & ~(page - 1);
    *whole = hi > lo ? (size_t)((hi - lo) / page) : 0;
    if (!*whole) return 0;
    unsigned char *vec = malloc(*whole);
    size_t in = 0;
    if (vec && mincore((void *)lo, (size_t)(hi - lo), vec) == 0)
        for (size_t i = 0; i < *whole; i++) in += vec[i] & 1u;
    else
        in = SIZE_MAX; /* cannot tell: fails the checks below */
    free(vec);
    return in;
}

static void test_grow_gives_back(void)
{
    SECTION("a big array the arena moves gives its pages back");
    ck_arena a;
    memset(&a, 0, sizeof a);
    size_t old = 4 * CK_DISCARD_MIN;
    unsigned char *p = ck_alloc(&a, old);
    CHECK(p != NULL);
    if (!p) return;
    for (size_t i = 0; i < old; i++) p[i] = (unsigned char)(i * 7u + 1u);
    size_t whole = 0;
    CHECK_EQ_U64(resident_pages(p, old, &whole), whole); /* written: all resident */
    CHECK(ck_alloc(&a, 8) != NULL);                      /* p is no longer the latest */
    unsigned char *q = ck_alloc_grow(&a, p, old, 2 * old);
    CHECK(q != NULL && q != p);
    int same = q != NULL;
    for (size_t i = 0; same && i < old; i++) same = q[i] == (unsigned char)(i * 7u + 1u);
    CHECK(same);
    CHECK(whole > 0);
    CHECK_EQ_U64(resident_pages(p, old, &whole), 0); /* given back: none resident */
    /* a small array moved keeps its pages (not worth a system call) */
    unsigned char *s = ck_alloc(&a, 4096 * 3);
    memset(s, 1, 4096 * 3);
    CHECK(ck_alloc(&a, 8) != NULL);
    unsigned char *s2 = ck_alloc_grow(&a, s, 4096 * 3, 4096 * 6);
    CHECK(s2 != NULL && s2 != s && s2[4096 * 3 - 1] == 1);
    ck_arena_free(&a);
}

/* A list of `n` distinct strings, every 1000th memoized and fetched again
 * at the end (the memo outlives the pages the machine gave back). */
static void big_list_pickle(bb *b, int n)
{
    bb_u8(b, 0x80);
    bb_u8(b, 2);
    bb_u8(b, ']');
    for (int i = 0; i < n; i += 1000) {
        bb_u8(b, '(');
        for (int j = i; j < i + 1000 && j < n; j++) {
            char k[32];
            int len = snprintf(k, sizeof k, "item-%07d", j);
            bb_u8(b, 'X');
            bb_le32(b, (uint32_t)len);
            bb_put(b, k, (size_t)len);
            if (j % 1000 == 0) {
                bb_u8(b, 'r'); /* LONG_BINPUT */
                bb_le32(b, (uint32_t)(j / 1000));
            }
        }
        bb_u8(b, 'e');
    }
    bb_u8(b, '(');
    for (int i = 0; i < n; i += 1000) {
        bb_u8(b, 'j'); /* LONG_BINGET */
        bb_le32(b, (uint32_t)(i / 1000));
    }
    bb_u8(b, 'e');
    bb_u8(b, '.');
}

static void test_discard(void)
{
    SECTION("a pickle's pages given back behind the machine (ck_pickle_in.discard)");
    const int n = 300000;
    bb b = {0};
    big_list_pickle(&b, n);
    CHECK(b.n > 3 * CK_DISCARD_STEP);
    for (int discard = 0; discard < 2; discard++) {
        /* the caller's own memory, as torch_zip's malloc'd data.pkl */
        unsigned char *buf = malloc(b.n);
        CHECK(buf != NULL);
        if (!buf) break;
        memcpy(buf, b.p, b.n);
        run r;
        memset(&r, 0, sizeof r);
        ckpt_options_init(&r.opt);
        r.u.arena = &r.arena;
        r.u.opt = &r.opt;
        r.u.input_size = b.n;
        ck_pickle_in in = {.buf = buf, .len = b.n, .base = 0, .label = "pickle",
                           .discard = discard != 0};
        size_t used = 0;
        CHECK_EQ_INT(ck_pickle_run(&r.u, &in, &r.root, &used, &r.err), 0);
        CHECK_EQ_U64(used, b.n);
        size_t nl = n + n / 1000;
        CHECK_EQ_U64(ckpt_value_len(r.root), nl);
        int ok = ckpt_value_len(r.root) == nl;
        for (size_t i = 0; ok && i < nl; i++) {
            char k[32];
            int j = i < (size_t)n ? (int)i : (int)(i - (size_t)n) * 1000;
            int len = snprintf(k, sizeof k, "item-%07d", j);
            size_t tl = 0;
            const char *t = ckpt_value_text(ckpt_value_item(r.root, i), &tl);
            ok = t && tl == (size_t)len && memcmp(t, k, tl) == 0;
        }
        CHECK(ok); /* every value as the bytes said, pages given back or not */
        /* the first MiB: given back with discard, untouched without */
        size_t whole = 0, in_core = resident_pages(buf, CK_DISCARD_STEP, &whole);
        CHECK(whole > 0);
        if (discard)
            CHECK_EQ_U64(in_core, 0);
        else
            CHECK_EQ_U64(in_core, whole);
        free(buf);
        run_free(&r);
    }
    bb_free(&b);
}

/* Whether this kernel takes MADV_POPULATE_WRITE (Linux 5.14): a scratch page. */
static bool populate_works(void)
{
#ifdef MADV_POPULATE_WRITE
    long ps = sysconf(_SC_PAGESIZE);
    void *m = mmap(NULL, (size_t)ps, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED) return false;
    bool ok = madvise(m, (size_t)ps, MADV_POPULATE_WRITE) == 0;
    munmap(m, (size_t)ps);
    return ok;
#else
    return false;
#endif
}

static void test_populate(void)
{
    SECTION("mapped arena blocks: faulted in ahead, never handed out past their room");
    ck_arena a;
    memset(&a, 0, sizeof a);
    /* blocks double from 64 KiB; the one of 2 MiB is mapped */
    while (!a.head || !a.head->mapped) CHECK(ck_alloc(&a, 200) != NULL);
    ck_block *b = a.head;
    CHECK(b->used <= b->cap && b->cap < b->full); /* not all of it faulted in */
    while (b->used < 8192) CHECK(ck_alloc(&a, 200) != NULL); /* past its first page */
    CHECK(a.head == b && b->cap < b->full);
    if (populate_works()) {
        /* the next 128 KiB are resident before anything touches them */
        long ps = sysconf(_SC_PAGESIZE);
        uintptr_t lo = ((uintptr_t)b->data + b->used + (uintptr_t)ps - 1) & ~((uintptr_t)ps - 1);
        size_t np = ((size_t)128 << 10) / (size_t)ps;
        unsigned char vec[1024];
        CHECK(np <= sizeof vec && mincore((void *)lo, np * (size_t)ps, vec) == 0);
        bool resident = true;
        for (size_t i = 0; i < np; i++) resident &= (vec[i] & 1) != 0;
        CHECK(resident);
    } else {
        printf("  (MADV_POPULATE_WRITE refused by this kernel: residency not checked)\n");
    }
    /* small allocations across the faulted-in edge, until the block is full:
     * each zeroed, inside the block, the cap never behind what is used */
    bool inside = true, zeroed = true, order = true;
    size_t n = 0;
    for (;;) {
        unsigned char *s = ck_alloc(&a, 200);
        if (!s) break;
        if (a.head != b) break;
        inside &= s >= (unsigned char *)b->data && s + 200 <= (unsigned char *)b->data + b->full;
        order &= b->used <= b->cap && b->cap <= b->full;
        for (int i = 0; i < 200; i++) zeroed &= s[i] == 0;
        memset(s, 0x5a, 200);
        n++;
    }
    CHECK(inside);
    CHECK(zeroed);
    CHECK(order);
    CHECK(n > ((size_t)1 << 20) / 200); /* the block's megabytes were handed out */
    /* a big allocation after a small head: its own block, and the head's
     * room still used after it without running past it */
    unsigned char *big = ck_alloc(&a, (size_t)3 << 20);
    CHECK(big != NULL);
    unsigned char *g = ck_alloc(&a, 1000); /* the latest, in some block */
    CHECK(g != NULL);
    ck_block *gb = a.head;
    CHECK(gb->used <= gb->cap && gb->cap <= gb->full);
    /* grown in place past the faulted-in edge when its block has the room */
    size_t to = gb->full - gb->used + 1000 < ((size_t)1 << 20) ? gb->full - gb->used + 1000 : (size_t)1 << 20;
    unsigned char *g2 = ck_alloc_grow(&a, g, 1000, to);
    CHECK(g2 != NULL);
    CHECK(a.head->used <= a.head->cap && a.head->cap <= a.head->full);
    zeroed = true;
    for (size_t i = 0; i < to; i++) zeroed &= g2[i] == 0;
    CHECK(zeroed);
    memset(g2, 0x33, to);
    ck_arena_free(&a);
}

int main(void)
{
    test_populate();
    test_grow_gives_back();
    test_discard();
    test_arena();
    test_map();
    test_batches();
    test_empty_args();
    return ut_summary();
}
