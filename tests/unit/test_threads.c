/*
 * test_threads.c - ckpt.h promises that a ckpt_file is immutable after open
 * and that ckpt_tensor_read() may be called from several threads at once.
 * Every tensor of every fixture (tests/fixtures/, or the folder given as
 * argv[1]) is read once on one thread, then by 8 threads at once, each
 * starting at another tensor and mixing whole reads with chunked range reads
 * (which resume a deflated record's inflate cursor); every byte and every
 * error must equal the single-threaded read.  Built with -fsanitize=thread
 * in CI (CKPT_TSAN), where it also catches races that happen to give the
 * right bytes.
 *
 * The expected bytes are read through copies of the descriptors
 * (ckpt_tensor_get()) before any ckpt_tensor_at(), so the 8 threads are
 * the first to ask for the library's own descriptors, which it builds on
 * first use: each must equal the copy, whichever thread built it.
 *
 * Used to go wrong: deflated ZIP records shared one inflate cursor per file
 * (zip.c), so two threads reading deflated tensors raced on it.
 */
#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L
#endif
#include "ckpt.h"
#include "harness.h"

#include <dirent.h>
#include <pthread.h>

#define NTHREADS 8
#define CHUNK 4096

typedef struct expect {
    uint8_t *bytes; /* NULL when the read failed */
    ckpt_code code;
    ckpt_tensor desc; /* ckpt_tensor_get()'s copy */
} expect;

typedef struct job {
    const ckpt_file *f;
    const expect *want;
    size_t n, start;
    int chunked;
    long mismatches;
} job;

static int read_tensor(const ckpt_file *f, const ckpt_tensor *t, uint8_t *buf, int chunked,
                       ckpt_error *e)
{
    if (!chunked || t->nbytes <= CHUNK) return ckpt_tensor_read(f, t, buf, (size_t)t->nbytes, e);
    for (uint64_t off = 0; off < t->nbytes; off += CHUNK) {
        size_t k = t->nbytes - off < CHUNK ? (size_t)(t->nbytes - off) : CHUNK;
        if (ckpt_tensor_read_range(f, t, off, buf + off, k, e)) return -1;
    }
    return 0;
}

static void *worker(void *arg)
{
    job *j = arg;
    for (size_t k = 0; k < j->n; k++) {
        size_t i = (j->start + k) % j->n;
        const ckpt_tensor *t = ckpt_tensor_at(j->f, i);
        const expect *w = &j->want[i];
        if (!t || memcmp(t, &w->desc, sizeof *t) != 0 || ckpt_tensor_at(j->f, i) != t) {
            j->mismatches++; /* built wrong, or not kept */
            continue;
        }
        uint8_t *buf = malloc(t->nbytes ? (size_t)t->nbytes : 1);
        if (!buf) {
            j->mismatches++;
            continue;
        }
        ckpt_error e;
        memset(&e, 0, sizeof e);
        int r = read_tensor(j->f, t, buf, (int)((j->chunked + k) & 1), &e);
        if (r != 0 ? w->bytes != NULL || e.code != w->code
                   : !w->bytes || memcmp(buf, w->bytes, (size_t)t->nbytes) != 0)
            j->mismatches++;
        free(buf);
    }
    return NULL;
}

static void check_file(const char *path, int use_mmap, long *tensors_read)
{
    ckpt_options o;
    ckpt_options_init(&o);
    o.use_mmap = use_mmap;
    ckpt_error e;
    ckpt_file *f = ckpt_open(path, &o, &e);
    if (!f) return; /* fixtures that do not open are not this test's business */
    size_t n = ckpt_tensor_count(f);
    expect *want = calloc(n ? n : 1, sizeof *want);
    CHECK(want != NULL);
    if (!want) {
        ckpt_close(f);
        return;
    }
    for (size_t i = 0; i < n; i++) {
        const ckpt_tensor *t = &want[i].desc;
        CHECK_EQ_INT(ckpt_tensor_get(f, i, &want[i].desc, &e), 0);
        want[i].bytes = malloc(t->nbytes ? (size_t)t->nbytes : 1);
        if (!want[i].bytes) continue;
        memset(&e, 0, sizeof e);
        if (ckpt_tensor_read(f, t, want[i].bytes, (size_t)t->nbytes, &e)) {
            free(want[i].bytes);
            want[i].bytes = NULL;
            want[i].code = e.code;
        }
    }
    pthread_t th[NTHREADS];
    job jobs[NTHREADS];
    int started[NTHREADS];
    for (int k = 0; k < NTHREADS; k++) {
        jobs[k] = (job){
            .f = f, .want = want, .n = n, .start = n ? (size_t)k * n / NTHREADS : 0, .chunked = k};
        started[k] = pthread_create(&th[k], NULL, worker, &jobs[k]) == 0;
        CHECK(started[k]);
    }
    long bad = 0;
    for (int k = 0; k < NTHREADS; k++) {
        if (started[k]) pthread_join(th[k], NULL);
        bad += jobs[k].mismatches;
    }
    if (bad)
        fprintf(stderr, "%s (mmap %d): %ld reads differ from the single-threaded read\n", path,
                use_mmap, bad);
    CHECK_EQ_INT(bad, 0);
    *tensors_read += (long)n * NTHREADS;
    for (size_t i = 0; i < n; i++) free(want[i].bytes);
    free(want);
    ckpt_close(f);
}

static int is_fixture(const char *name)
{
    size_t n = strlen(name);
    return (n > 3 && strcmp(name + n - 3, ".pt") == 0) ||
           (n > 4 && strcmp(name + n - 4, ".pkl") == 0);
}

int main(int argc, char **argv)
{
    char dir[4096];
    if (argc > 1) {
        snprintf(dir, sizeof dir, "%s", argv[1]);
    } else { /* tests/fixtures beside this file's folder */
        snprintf(dir, sizeof dir, "%s", __FILE__);
        char *slash = strrchr(dir, '/');
        if (slash)
            *slash = 0;
        else
            snprintf(dir, sizeof dir, ".");
        strncat(dir, "/../fixtures", sizeof dir - strlen(dir) - 1);
    }
    SECTION("8 threads read every tensor of every fixture");
    DIR *d = opendir(dir);
    CHECK(d != NULL);
    if (!d) return ut_summary();
    long files = 0, reads = 0, deflated_reads = 0;
    struct dirent *de;
    while ((de = readdir(d))) {
        if (!is_fixture(de->d_name)) continue;
        char path[8192];
        snprintf(path, sizeof path, "%s/%s", dir, de->d_name);
        long before = reads;
        check_file(path, 0, &reads);
        check_file(path, 1, &reads);
        if (strstr(de->d_name, "deflate")) deflated_reads += reads - before;
        files++;
    }
    closedir(d);
    printf("%ld fixtures, %ld tensor reads on %d threads (%ld of a deflated ZIP)\n", files, reads,
           NTHREADS, deflated_reads);
    CHECK(files >= 40);
    CHECK(deflated_reads > 0); /* the case that used to race */
    return ut_summary();
}
