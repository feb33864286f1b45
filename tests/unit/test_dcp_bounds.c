/*
 * test_dcp_bounds.c - the work and memory a torch.distributed.checkpoint
 * folder may cost (issue 33), counted, not timed.  Folders are written here
 * (tests/unit/composite.h): a .metadata pickled byte by byte and raw or
 * torch.save chunks.
 *
 *   - one memory budget for the whole folder: 24 records whose deflated
 *     pickles each inflate to 9 MiB used to stay open side by side, each
 *     under a budget of its own (24 x the limit); now they are charged to
 *     the folder's one budget and closed once read, and a record bigger
 *     than the budget is refused by it.
 *
 * Each open runs in a child process with a CPU limit, so that a regression
 * to unbounded work fails the test instead of hanging it.
 */
#include "harness.h"

#include "ckpt.h"
#include "composite.h"
#include "torch/torch.h"

#include <sys/time.h>

static char *dir_budget;

static int in_child(int (*fn)(void *), void *ctx)
{
    struct rlimit cpu = {60, 60};
    setrlimit(RLIMIT_CPU, &cpu);
    ut_failed = 0;
    int r = fn(ctx);
    fflush(stdout); /* the child leaves with _exit() */
    return r || ut_failed ? 1 : 0;
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
    const ck_arena *a = &f->arena;
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

static int child_budget(void *ctx)
{
    return in_child(open_budget, ctx);
}

int main(void)
{
    SECTION("one memory budget for the folder");
    make_budget();
    CHECK_ISOLATED(child_budget, NULL);

    cw_rmtree(dir_budget);
    free(dir_budget);
    return ut_summary();
}
