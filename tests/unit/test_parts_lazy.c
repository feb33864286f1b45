/*
 * test_parts_lazy.c - a checkpoint of thousands of files (issue 33): the
 * parts of a composite are opened when needed and a bounded set of them
 * stays open, so a folder of 10,000 shards or 2,000 .distcp files opens,
 * reads and verifies with at most 64 file descriptors (it used to keep
 * every part open: "Too many open files" past about 1,000 under the usual
 * limit of 1024) and in little memory per part (it used to be about
 * 67 KB, a whole open file each); from several threads at once (tensor
 * reads and ckpt_verify_part() share the set); and a part that changed
 * after the folder was indexed (rewritten, replaced, grown) is refused
 * when it is opened again, not read.  Folders are written here
 * (tests/unit/composite.h); what is counted: descriptors in
 * /proc/self/fd, resident memory in /proc/self/status, and the memory the
 * library charges to the folder's budget.
 */
#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L
#endif
#include "harness.h"

#include "ckpt.h"
#include "composite.h"

#include "torch/torch.h"

#include <pthread.h>
#include <sys/time.h>

#define N_SHARDS 10000
#define N_DISTCP 2000
#define FD_LIMIT 64
#define NTHREADS 4

static float shard_value(size_t i, int k)
{
    return k == 0 ? (float)i : k == 1 ? -(float)i : 0.5f;
}

/* n shards of one tensor each, layers.I.w = {i, -i, 0.5}, and their index. */
static char *make_shards(size_t n)
{
    char *dir = cw_tmpdir("shards");
    bb idx = {0};
    bb_text(&idx, "{\"metadata\": {\"total_size\": ");
    char buf[256];
    snprintf(buf, sizeof buf, "%zu}, \"weight_map\": {", n * 12);
    bb_text(&idx, buf);
    for (size_t i = 0; i < n; i++) {
        char name[64], file[64];
        snprintf(name, sizeof name, "layers.%zu.w", i);
        snprintf(file, sizeof file, "model-%05zu-of-%05zu.safetensors", i + 1, n);
        float v[3] = {shard_value(i, 0), shard_value(i, 1), shard_value(i, 2)};
        cw_st_one(cw_join(dir, file), name, v, 3);
        snprintf(buf, sizeof buf, "%s\"%s\": \"%s\"", i ? ", " : "", name, file);
        bb_text(&idx, buf);
    }
    bb_text(&idx, "}}\n");
    cw_file(cw_join(dir, "model.safetensors.index.json"), idx.p, idx.n);
    bb_free(&idx);
    return dir;
}

/* ---- several threads -------------------------------------------------------------- */

typedef struct job {
    const ckpt_file *f;
    size_t start;
    int verify;
    long errors;
    ckpt_error err;
} job;

static int check_tensor(const ckpt_file *f, size_t i, ckpt_error *err)
{
    char name[64];
    snprintf(name, sizeof name, "layers.%zu.w", i);
    const ckpt_tensor *t = ckpt_find(f, name);
    float v[3];
    if (!t || ckpt_tensor_read(f, t, v, sizeof v, err) != 0) return -1;
    for (int k = 0; k < 3; k++)
        if (v[k] != shard_value(i, k)) return -1;
    return ckpt_tensor_part(f, t) == i ? 0 : -1;
}

/* Half the parts (7 and 10,000 are coprime: a step of 7 visits them all),
 * two threads in the same order at once, so that they miss the same
 * closed part together. */
static void *worker(void *arg)
{
    job *j = arg;
    size_t n = ckpt_part_count(j->f);
    for (size_t k = 0; k < n / 2; k++) {
        size_t i = (j->start + k * 7) % n;
        int r = j->verify ? ckpt_verify_part(j->f, i, NULL, NULL, NULL, &j->err)
                          : check_tensor(j->f, i, &j->err);
        if (r) j->errors++;
    }
    return NULL;
}

static void threads(const ckpt_file *f, int verify)
{
    pthread_t th[NTHREADS];
    job jobs[NTHREADS];
    for (int i = 0; i < NTHREADS; i++) {
        jobs[i] = (job){f, (size_t)(i / 2) * 7 * (N_SHARDS / 2), verify, 0, {0}};
        pthread_create(&th[i], NULL, worker, &jobs[i]);
    }
    for (int i = 0; i < NTHREADS; i++) {
        pthread_join(th[i], NULL);
        CHECK_EQ_INT(jobs[i].errors, 0);
        if (jobs[i].errors) fprintf(stderr, "  thread %d: %s\n", i, jobs[i].err.message);
    }
}

/* ---- 10,000 shards -------------------------------------------------------------------- */

static char *shards;

static int many_shards(void *ctx)
{
    (void)ctx;
    ut_failed = 0; /* this child's checks */
    long fd0 = cw_open_fds();
    CHECK(cw_limit_fds(FD_LIMIT) == 0);
    long long rss0 = cw_status_kb("VmRSS");
    ckpt_error err;
    ckpt_file *f = ckpt_open_path(shards, NULL, &err);
    long long hwm = cw_status_kb("VmHWM");
    CHECK(f != NULL);
    if (!f) {
        fprintf(stderr, "  open: %s\n", err.message);
        return 1;
    }
    long fds = cw_open_fds();
    uint64_t charged = atomic_load(&f->arena.peak);
    printf("  %d shards: %ld descriptors open, %.0f bytes charged and %.0f resident a part\n",
           N_SHARDS, fds - fd0, (double)charged / N_SHARDS, (double)(hwm - rss0) / N_SHARDS);
    CHECK(fds - fd0 <= 20);
    CHECK_EQ_U64(ckpt_part_count(f), N_SHARDS);
    CHECK_EQ_U64(ckpt_tensor_count(f), N_SHARDS);
    CHECK_CONTAINS(ckpt_part_path(f, N_SHARDS - 1), "model-10000-of-10000.safetensors");
    /* what the library holds for the folder: its names, tables and paths */
    CHECK(charged / N_SHARDS < 2048);
#ifndef CKPT_SANITIZED
    CHECK(hwm - rss0 < 40ll << 20); /* was about 67 KB a part (670 MB) */
#endif
    size_t bad = 0;
    for (size_t i = 0; i < N_SHARDS; i++)
        if (check_tensor(f, i, &err)) {
            if (!bad++) fprintf(stderr, "  tensor %zu: %s\n", i, err.message);
        }
    CHECK_EQ_U64(bad, 0);
    CHECK(cw_open_fds() - fd0 <= 20);
    threads(f, 0);
    threads(f, 1);
    CHECK(cw_open_fds() - fd0 <= 20);
    CHECK(ckpt_verify(f, NULL, NULL, &err) == 0);
    ckpt_close(f);
    CHECK_EQ_INT(cw_open_fds(), fd0);
    fflush(stdout); /* the child leaves with _exit() */
    return ut_failed ? 1 : 0;
}

/* ---- parts that changed ---------------------------------------------------------------- */

static void expect_changed(const ckpt_file *f, size_t i, const char *how)
{
    ckpt_error err;
    char name[64];
    snprintf(name, sizeof name, "layers.%zu.w", i);
    const ckpt_tensor *t = ckpt_find(f, name);
    float v[3];
    int r = t ? ckpt_tensor_read(f, t, v, sizeof v, &err) : 0;
    CHECK(t && r != 0);
    if (t && r) {
        CHECK_EQ_INT(err.code, CKPT_E_IO);
        CHECK_CONTAINS(err.message, "changed since");
    } else {
        fprintf(stderr, "  %s: read\n", how);
    }
    CHECK(ckpt_verify_part(f, i, NULL, NULL, NULL, &err) != 0);
    CHECK_CONTAINS(err.message, "changed since");
}

static void changed_parts(void)
{
    char *dir = make_shards(40);
    ckpt_error err;
    ckpt_file *f = ckpt_open_path(dir, NULL, &err);
    CHECK(f != NULL);
    if (!f) {
        fprintf(stderr, "  open: %s\n", err.message);
        return;
    }
    for (size_t i = 0; i < 40; i++) CHECK(check_tensor(f, i, &err) == 0);
    char path[4200], tmp[4200];
    /* 0: rewritten in place, same size, another value, a later time */
    snprintf(path, sizeof path, "%s/model-00001-of-00040.safetensors", dir);
    float v[3] = {100, 200, 300};
    cw_st_one(path, "layers.0.w", v, 3);
    struct timespec later[2] = {{0, UTIME_OMIT}, {time(NULL) + 10, 0}};
    utimensat(AT_FDCWD, path, later, 0);
    expect_changed(f, 0, "rewritten in place");
    /* 1: replaced by another file with the same bytes (a new inode) */
    snprintf(path, sizeof path, "%s/model-00002-of-00040.safetensors", dir);
    snprintf(tmp, sizeof tmp, "%s/new.tmp", dir);
    float w[3] = {shard_value(1, 0), shard_value(1, 1), shard_value(1, 2)};
    cw_st_one(tmp, "layers.1.w", w, 3);
    CHECK(rename(tmp, path) == 0);
    expect_changed(f, 1, "replaced");
    /* 2: grown */
    snprintf(path, sizeof path, "%s/model-00003-of-00040.safetensors", dir);
    FILE *fp = fopen(path, "ab");
    CHECK(fp && fputc(0, fp) == 0 && fclose(fp) == 0);
    expect_changed(f, 2, "grown");
    /* 3: untouched, still read */
    CHECK(check_tensor(f, 3, &err) == 0);
    ckpt_close(f);
    cw_rmtree(dir);
    free(dir);
}

/* ---- 2,000 .distcp files ------------------------------------------------------------------ */

static char *distcp;

/* t [2000, 2]: row i raw in __i_0.distcp; u [2000, 3]: row i a torch.save
 * record after it. */
static void make_distcp(void)
{
    distcp = cw_tmpdir("distcp");
    int64_t ts[2] = {N_DISTCP, 2}, us[2] = {N_DISTCP, 3};
    int64_t *to = malloc(2 * N_DISTCP * sizeof *to), *tz = malloc(2 * N_DISTCP * sizeof *tz);
    int64_t *uz = malloc(2 * N_DISTCP * sizeof *uz);
    dm d = {0};
    for (size_t i = 0; i < N_DISTCP; i++) {
        char file[64];
        snprintf(file, sizeof file, "__%zu_0.distcp", i);
        to[2 * i] = (int64_t)i;
        to[2 * i + 1] = 0;
        tz[2 * i] = uz[2 * i] = 1;
        tz[2 * i + 1] = 2;
        uz[2 * i + 1] = 3;
        bb data = {0};
        bb_f32le(&data, (float)i);
        bb_f32le(&data, (float)i + 0.5f);
        float row[3] = {(float)(3 * i), (float)(3 * i + 1), (float)(3 * i + 2)};
        cw_record_f32(&data, row, 1, 3);
        cw_file(cw_join(distcp, file), data.p, data.n);
        dm_where(&d, "t", 2, to + 2 * i, file, 0, 8);
        dm_where(&d, "u", 2, to + 2 * i, file, 8, data.n - 8);
        bb_free(&data);
    }
    dm_tensor(&d, "t", DM_F32, 2, ts, N_DISTCP, to, tz);
    dm_tensor(&d, "u", DM_F32, 2, us, N_DISTCP, to, uz);
    bb meta = {0};
    dm_finish(&d, &meta);
    cw_file(cw_join(distcp, ".metadata"), meta.p, meta.n);
    bb_free(&meta);
    free(to);
    free(tz);
    free(uz);
}

static void *verify_worker(void *arg)
{
    job *j = arg;
    size_t n = ckpt_part_count(j->f);
    for (size_t k = 0; k < n; k++)
        if (ckpt_verify_part(j->f, (j->start + k) % n, NULL, NULL, NULL, &j->err)) j->errors++;
    return NULL;
}

static void *read_worker(void *arg)
{
    job *j = arg;
    const ckpt_tensor *u = ckpt_find(j->f, "u");
    float row[3];
    for (size_t k = 0; k < N_DISTCP; k++) {
        size_t i = (j->start + k * 7) % N_DISTCP;
        if (ckpt_tensor_read_range(j->f, u, i * 12, row, 12, &j->err) ||
            row[2] != (float)(3 * i + 2))
            j->errors++;
    }
    return NULL;
}

static int many_distcp(void *ctx)
{
    (void)ctx;
    ut_failed = 0; /* this child's checks */
    long fd0 = cw_open_fds();
    CHECK(cw_limit_fds(FD_LIMIT) == 0);
    long long rss0 = cw_status_kb("VmRSS");
    ckpt_error err;
    ckpt_file *f = ckpt_open_path(distcp, NULL, &err);
    long long hwm = cw_status_kb("VmHWM");
    CHECK(f != NULL);
    if (!f) {
        fprintf(stderr, "  open: %s\n", err.message);
        return 1;
    }
    uint64_t charged = atomic_load(&f->arena.peak);
    printf("  %d .distcp files: %ld descriptors open, %.0f bytes charged at most and %.0f "
           "resident a part\n",
           N_DISTCP, cw_open_fds() - fd0, (double)charged / N_DISTCP,
           (double)(hwm - rss0) / N_DISTCP);
    CHECK(cw_open_fds() - fd0 <= 40);
    CHECK_EQ_U64(ckpt_part_count(f), N_DISTCP);
#ifndef CKPT_SANITIZED
    CHECK(hwm - rss0 < 40ll << 20);
#endif
    const ckpt_tensor *t = ckpt_find(f, "t"), *u = ckpt_find(f, "u");
    CHECK(t && u);
    if (t && u) {
        float *tv = malloc((size_t)t->nbytes), *uv = malloc((size_t)u->nbytes);
        CHECK(ckpt_tensor_read(f, t, tv, (size_t)t->nbytes, &err) == 0);
        CHECK(ckpt_tensor_read(f, u, uv, (size_t)u->nbytes, &err) == 0);
        size_t bad = 0;
        for (size_t i = 0; i < N_DISTCP; i++) {
            if (tv[2 * i] != (float)i || tv[2 * i + 1] != (float)i + 0.5f) bad++;
            for (int k = 0; k < 3; k++)
                if (uv[3 * i + (size_t)k] != (float)(3 * i + (size_t)k)) bad++;
        }
        CHECK_EQ_U64(bad, 0);
        free(tv);
        free(uv);
        CHECK_EQ_U64(ckpt_tensor_part(f, u), 0);
    }
    CHECK(cw_open_fds() - fd0 <= 40);
    pthread_t th[2 * NTHREADS];
    job jobs[2 * NTHREADS];
    for (int i = 0; i < 2 * NTHREADS; i++) {
        jobs[i] = (job){f, (size_t)i * 499, 0, 0, {0}};
        pthread_create(&th[i], NULL, i % 2 ? verify_worker : read_worker, &jobs[i]);
    }
    for (int i = 0; i < 2 * NTHREADS; i++) {
        pthread_join(th[i], NULL);
        CHECK_EQ_INT(jobs[i].errors, 0);
        if (jobs[i].errors) fprintf(stderr, "  thread %d: %s\n", i, jobs[i].err.message);
    }
    CHECK(cw_open_fds() - fd0 <= 40);
    CHECK(ckpt_verify(f, NULL, NULL, &err) == 0);
    ckpt_close(f);
    CHECK_EQ_INT(cw_open_fds(), fd0);
    fflush(stdout); /* the child leaves with _exit() */
    return ut_failed ? 1 : 0;
}

int main(void)
{
    SECTION("10,000 shards under 64 descriptors");
    shards = make_shards(N_SHARDS);
    CHECK_ISOLATED(many_shards, NULL);
    cw_rmtree(shards);
    free(shards);

    SECTION("a part that changed since it was indexed");
    changed_parts();

    SECTION("2,000 .distcp files under 64 descriptors");
    make_distcp();
    CHECK_ISOLATED(many_distcp, NULL);
    cw_rmtree(distcp);
    free(distcp);
    return ut_summary();
}
