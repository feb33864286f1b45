/*
 * test_dcp_bounds.c - the work and memory a torch.distributed.checkpoint
 * folder may cost (issue 33), counted, not timed.  Folders are written here
 * (tests/unit/composite.h): a .metadata pickled byte by byte and raw or
 * torch.save chunks.
 *
 *   - the chunk-overlap check: 65,536 chunks of a [4, 65536] tensor split
 *     along its last dimension (an 11 MB .metadata) used to be compared
 *     pair by pair, 2^31 pairs (333 s); now the work counted is linear in
 *     the chunks, also for a 256 x 256 grid, and a layout that would need
 *     more comparisons than max_expansion allows is refused by that limit;
 *     overlaps are still found, in every dimension;
 *   - one memory budget for the whole folder: 24 records whose deflated
 *     pickles each inflate to 9 MiB used to stay open side by side, each
 *     under a budget of its own (24 x the limit); now they are charged to
 *     the folder's one budget and closed once read, and a record bigger
 *     than the budget is refused by it.
 *
 * Each open runs in a child process with a CPU limit, so that a regression
 * to quadratic work fails the test instead of hanging it.
 */
#include "harness.h"

#include "ckpt.h"
#include "composite.h"
#include "formats/multi.h"

#include <sys/time.h>

#define N_SPLIT 65536

static char *dir_split, *dir_grid, *dir_budget;

static int in_child(int (*fn)(void *), void *ctx)
{
    struct rlimit cpu = {60, 60};
    setrlimit(RLIMIT_CPU, &cpu);
    ut_failed = 0;
    int r = fn(ctx);
    fflush(stdout); /* the child leaves with _exit() */
    return r || ut_failed ? 1 : 0;
}

static ck_multi *multi_of(const ckpt_file *f)
{
    return (ck_multi *)((const struct ckpt_file *)f)->fmt_state;
}

/* ---- 65,536 chunks along the last dimension ---------------------------------- */

static float split_value(int64_t r, int64_t c)
{
    return (float)(r * N_SPLIT + c);
}

static void make_split(void)
{
    dir_split = cw_tmpdir("dcp-split");
    int64_t shape[2] = {4, N_SPLIT};
    int64_t *offs = malloc(2 * N_SPLIT * sizeof *offs), *sizes = malloc(2 * N_SPLIT * sizeof *sizes);
    bb data = {0};
    dm d = {0};
    for (int64_t c = 0; c < N_SPLIT; c++) {
        offs[2 * c] = 0;
        offs[2 * c + 1] = c;
        sizes[2 * c] = 4;
        sizes[2 * c + 1] = 1;
        for (int64_t r = 0; r < 4; r++) bb_f32le(&data, split_value(r, c));
        dm_where(&d, "w", 2, offs + 2 * c, "__0_0.distcp", (uint64_t)c * 16, 16);
    }
    dm_tensor(&d, "w", DM_F32, 2, shape, N_SPLIT, offs, sizes);
    bb meta = {0};
    dm_finish(&d, &meta);
    cw_file(cw_join(dir_split, ".metadata"), meta.p, meta.n);
    cw_file(cw_join(dir_split, "__0_0.distcp"), data.p, data.n);
    printf("  .metadata of %zu bytes, %d chunks\n", meta.n, N_SPLIT);
    bb_free(&meta);
    bb_free(&data);
    free(offs);
    free(sizes);
}

static int open_split(void *ctx)
{
    (void)ctx;
    ckpt_error err;
    ckpt_file *f = ckpt_open_path(dir_split, NULL, &err);
    CHECK(f != NULL);
    if (!f) {
        fprintf(stderr, "  open: %s\n", err.message);
        return 1;
    }
    ck_multi *m = multi_of(f);
    printf("  overlap check: %llu steps for %d chunks\n", (unsigned long long)m->overlap_work,
           N_SPLIT);
    CHECK(m->overlap_work <= 2 * (uint64_t)N_SPLIT); /* was N^2/2 pairs */
    const ckpt_tensor *t = ckpt_find(f, "w");
    CHECK(t != NULL);
    if (t) {
        CHECK_EQ_U64(t->nbytes, 4 * 4 * (uint64_t)N_SPLIT);
        float *v = malloc((size_t)t->nbytes);
        CHECK(ckpt_tensor_read(f, t, v, (size_t)t->nbytes, &err) == 0);
        size_t bad = 0;
        for (int64_t r = 0; r < 4; r++)
            for (int64_t c = 0; c < N_SPLIT; c++)
                if (v[r * N_SPLIT + c] != split_value(r, c)) bad++;
        CHECK_EQ_U64(bad, 0);
        /* a range across many chunks */
        float part[10];
        CHECK(ckpt_tensor_read_range(f, t, (uint64_t)(N_SPLIT - 5) * 4, part, sizeof part, &err) ==
              0);
        CHECK(part[0] == split_value(0, N_SPLIT - 5) && part[5] == split_value(1, 0));
        free(v);
    }
    CHECK(ckpt_verify(f, NULL, NULL, &err) == 0);
    ckpt_close(f);
    return 0;
}

/* ---- a 256 x 256 grid of 2 x 2 chunks ------------------------------------------ */

#define GRID 256

static void make_grid(void)
{
    dir_grid = cw_tmpdir("dcp-grid");
    size_t n = GRID * GRID;
    int64_t shape[2] = {2 * GRID, 2 * GRID};
    int64_t *offs = malloc(2 * n * sizeof *offs), *sizes = malloc(2 * n * sizeof *sizes);
    bb data = {0};
    dm d = {0};
    size_t k = 0;
    /* listed column-major, to give the check no help from the order */
    for (int64_t j = 0; j < GRID; j++)
        for (int64_t i = 0; i < GRID; i++, k++) {
            offs[2 * k] = 2 * i;
            offs[2 * k + 1] = 2 * j;
            sizes[2 * k] = sizes[2 * k + 1] = 2;
            for (int64_t r = 0; r < 2; r++)
                for (int64_t c = 0; c < 2; c++)
                    bb_f32le(&data, (float)((2 * i + r) * 2 * GRID + 2 * j + c));
            dm_where(&d, "g", 2, offs + 2 * k, "__0_0.distcp", (uint64_t)k * 16, 16);
        }
    dm_tensor(&d, "g", DM_F32, 2, shape, n, offs, sizes);
    bb meta = {0};
    dm_finish(&d, &meta);
    cw_file(cw_join(dir_grid, ".metadata"), meta.p, meta.n);
    cw_file(cw_join(dir_grid, "__0_0.distcp"), data.p, data.n);
    bb_free(&meta);
    bb_free(&data);
    free(offs);
    free(sizes);
}

static int open_grid(void *ctx)
{
    (void)ctx;
    ckpt_error err;
    ckpt_file *f = ckpt_open_path(dir_grid, NULL, &err);
    CHECK(f != NULL);
    if (!f) {
        fprintf(stderr, "  open: %s\n", err.message);
        return 1;
    }
    uint64_t n = GRID * GRID;
    printf("  overlap check: %llu steps for %llu chunks\n",
           (unsigned long long)multi_of(f)->overlap_work, (unsigned long long)n);
    CHECK(multi_of(f)->overlap_work <= 4 * n);
    const ckpt_tensor *t = ckpt_find(f, "g");
    float *v = t ? malloc((size_t)t->nbytes) : NULL;
    CHECK(v && ckpt_tensor_read(f, t, v, (size_t)t->nbytes, &err) == 0);
    size_t bad = 0;
    for (size_t i = 0; v && i < 4 * n; i++)
        if (v[i] != (float)i) bad++;
    CHECK_EQ_U64(bad, 0);
    free(v);
    ckpt_close(f);
    return 0;
}

/* ---- small layouts: overlaps found, the comparison limit ------------------------ */

/* A folder of one float32 tensor `shape` (2-D) in n raw chunks. */
static char *small_dcp(const int64_t *shape, size_t n, const int64_t *offs, const int64_t *sizes)
{
    char *dir = cw_tmpdir("dcp-small");
    bb data = {0};
    dm d = {0};
    for (size_t k = 0; k < n; k++) {
        int64_t numel = sizes[2 * k] * sizes[2 * k + 1];
        dm_where(&d, "s", 2, offs + 2 * k, "__0_0.distcp", data.n, (uint64_t)numel * 4);
        for (int64_t e = 0; e < numel; e++) bb_f32le(&data, (float)e);
    }
    dm_tensor(&d, "s", DM_F32, 2, shape, n, offs, sizes);
    bb meta = {0};
    dm_finish(&d, &meta);
    cw_file(cw_join(dir, ".metadata"), meta.p, meta.n);
    cw_file(cw_join(dir, "__0_0.distcp"), data.p, data.n);
    bb_free(&meta);
    bb_free(&data);
    return dir;
}

static void expect_overlap(const char *what, const int64_t *shape, size_t n, const int64_t *offs,
                           const int64_t *sizes, const char *pair)
{
    char *dir = small_dcp(shape, n, offs, sizes);
    ckpt_error err;
    ckpt_file *f = ckpt_open_path(dir, NULL, &err);
    CHECK(f == NULL);
    if (f) {
        fprintf(stderr, "  %s: opened\n", what);
        ckpt_close(f);
    } else {
        CHECK_EQ_INT(err.code, CKPT_E_FORMAT);
        CHECK_CONTAINS(err.message, pair);
    }
    cw_rmtree(dir);
    free(dir);
}

/* k x k pinwheels of 3 x 3 (five chunks each: four 1 x 2 around a 1 x 1):
 * in every dimension the chunks' intervals overlap partly, so no order of
 * the dimensions avoids comparing pairs; `bad` moves one centre onto the
 * chunk above it (an overlap with the element count unchanged). */
static size_t pinwheels(int64_t k, int64_t *offs, int64_t *sizes, int bad)
{
    static const int64_t pw[5][4] = {
        {0, 0, 1, 2}, {0, 2, 2, 1}, {2, 1, 1, 2}, {1, 0, 2, 1}, {1, 1, 1, 1}};
    size_t n = 0;
    for (int64_t bi = 0; bi < k; bi++)
        for (int64_t bj = 0; bj < k; bj++)
            for (int q = 0; q < 5; q++, n++) {
                offs[2 * n] = 3 * bi + pw[q][0];
                offs[2 * n + 1] = 3 * bj + pw[q][1];
                sizes[2 * n] = pw[q][2];
                sizes[2 * n + 1] = pw[q][3];
            }
    if (bad) offs[2 * (n - 1)] -= 1; /* the last centre onto the chunk above it */
    return n;
}

static void small_layouts(void)
{
    /* [2, 2]: a row and a column meeting at (0, 1); 2 + 2 elements, so
     * the count alone would not tell */
    const int64_t s22[2] = {2, 2}, o1[4] = {0, 0, 0, 1}, z1[4] = {1, 2, 2, 1};
    expect_overlap("row and column", s22, 2, o1, z1, "chunks 0 and 1 overlap");
    /* a chunk inside another (overlapping in every dimension) */
    const int64_t s24[2] = {2, 4}, o2[4] = {1, 1, 0, 0}, z2[4] = {1, 1, 2, 4};
    expect_overlap("a chunk inside another", s24, 2, o2, z2, "chunks 0 and 1 overlap");

    int64_t k = 20, shape[2] = {3 * k, 3 * k};
    int64_t *offs = malloc(2 * 5 * (size_t)(k * k) * sizeof *offs);
    int64_t *sizes = malloc(2 * 5 * (size_t)(k * k) * sizeof *sizes);
    size_t n = pinwheels(k, offs, sizes, 1);
    expect_overlap("pinwheels with one centre moved", shape, n, offs, sizes, "overlap");

    n = pinwheels(k, offs, sizes, 0);
    char *dir = small_dcp(shape, n, offs, sizes);
    ckpt_error err;
    ckpt_file *f = ckpt_open_path(dir, NULL, &err);
    CHECK(f != NULL);
    if (f) {
        printf("  %zu pinwheel chunks: %llu steps\n", n,
               (unsigned long long)multi_of(f)->overlap_work);
        uint64_t work = multi_of(f)->overlap_work;
        ckpt_close(f);
        /* the same layout with too small a budget: refused by the limit */
        ckpt_options opt;
        ckpt_options_init(&opt);
        opt.max_expansion = 16;
        uint64_t need = work;
        f = ckpt_open_path(dir, &opt, &err);
        CHECK(f == NULL);
        if (f) {
            fprintf(stderr, "  %llu steps under max_expansion 16: opened\n",
                    (unsigned long long)need);
            ckpt_close(f);
        } else {
            CHECK_EQ_INT(err.code, CKPT_E_LIMIT);
            CHECK_CONTAINS(err.message, "max_expansion");
        }
    } else {
        fprintf(stderr, "  pinwheels: %s\n", err.message);
    }
    cw_rmtree(dir);
    free(dir);
    free(offs);
    free(sizes);
}

/* ---- one memory budget --------------------------------------------------------------- */

#define N_RECORDS 24
#define RECORD_PICKLE ((size_t)9 << 20)

/* 24 non-tensor items, each a torch.save record whose deflated data.pkl
 * inflates to 9 MiB (a bytes value popped, then the int 7). */
static void make_budget(void)
{
    dir_budget = cw_tmpdir("dcp-budget");
    bb pk = {0};
    pk_proto(&pk, 3);
    bb_u8(&pk, 'B'); /* BINBYTES */
    bb_le32(&pk, (uint32_t)RECORD_PICKLE);
    bb_zero(&pk, RECORD_PICKLE);
    bb_u8(&pk, '0'); /* POP */
    pk_int(&pk, 7);
    pk_stop(&pk);
    zipb *z = calloc(1, sizeof *z);
    zb_init(z);
    zb_add_ex(z, "archive/data.pkl", pk.p, pk.n, 1, 0);
    zb_add(z, "archive/version", "3\n", 2);
    zb_finish(z);
    bb data = {0};
    dm d = {0};
    for (int i = 0; i < N_RECORDS; i++) {
        char name[16];
        snprintf(name, sizeof name, "v%d", i);
        dm_bytes(&d, name);
        dm_where(&d, name, 0, NULL, "__0_0.distcp", data.n, z->out.n);
        bb_append(&data, &z->out);
    }
    bb meta = {0};
    dm_finish(&d, &meta);
    cw_file(cw_join(dir_budget, ".metadata"), meta.p, meta.n);
    cw_file(cw_join(dir_budget, "__0_0.distcp"), data.p, data.n);
    printf("  %d records of %zu bytes, each inflating to %zu\n", N_RECORDS, z->out.n, pk.n);
    bb_free(&meta);
    bb_free(&data);
    bb_free(&z->out);
    free(z);
    bb_free(&pk);
}

static int open_budget(void *ctx)
{
    (void)ctx;
    ckpt_options opt;
    ckpt_options_init(&opt);
    opt.max_memory = 32u << 20;
    ckpt_error err;
    long long rss0 = cw_status_kb("VmRSS");
    ckpt_file *f = ckpt_open_path(dir_budget, &opt, &err);
    long long hwm = cw_status_kb("VmHWM");
    CHECK(f != NULL);
    if (!f) {
        fprintf(stderr, "  open: %s\n", err.message);
        return 1;
    }
    for (int i = 0; i < N_RECORDS; i++) {
        char name[16];
        snprintf(name, sizeof name, "v%d", i);
        CHECK_EQ_INT(ckpt_value_int(ckpt_value_get(ckpt_root(f), name)), 7);
    }
    const ck_arena *a = &((const struct ckpt_file *)f)->arena;
    uint64_t peak = atomic_load(&a->peak);
    printf("  peak charged %.1f MiB (limit %.0f MiB), resident growth %.1f MiB\n",
           (double)peak / 1048576, (double)a->limit / 1048576,
           (double)(hwm - rss0) / 1048576);
    CHECK(peak >= RECORD_PICKLE); /* the records' memory was charged to it */
    CHECK(peak <= opt.max_memory);
#ifndef CKPT_SANITIZED
    CHECK(hwm - rss0 < 64ll << 20); /* was 24 records side by side */
#endif
    CHECK(ckpt_verify(f, NULL, NULL, &err) == 0);
    ckpt_close(f);

    /* one record bigger than the whole budget: refused by the limit */
    opt.max_memory = 8u << 20;
    f = ckpt_open_path(dir_budget, &opt, &err);
    CHECK(f == NULL);
    if (f) {
        ckpt_close(f);
    } else {
        CHECK_EQ_INT(err.code, CKPT_E_LIMIT);
        CHECK_CONTAINS(err.message, "max_memory");
    }
    return 0;
}

static int child_split(void *ctx)
{
    return in_child(open_split, ctx);
}
static int child_grid(void *ctx)
{
    return in_child(open_grid, ctx);
}
static int child_budget(void *ctx)
{
    return in_child(open_budget, ctx);
}

int main(void)
{
    SECTION("65,536 chunks along the last dimension");
    make_split();
    CHECK_ISOLATED(child_split, NULL);

    SECTION("a 256 x 256 grid");
    make_grid();
    CHECK_ISOLATED(child_grid, NULL);

    SECTION("overlaps and the comparison limit");
    small_layouts();

    SECTION("one memory budget for the folder");
    make_budget();
    CHECK_ISOLATED(child_budget, NULL);

    cw_rmtree(dir_split);
    cw_rmtree(dir_grid);
    cw_rmtree(dir_budget);
    free(dir_split);
    free(dir_grid);
    free(dir_budget);
    return ut_summary();
}
