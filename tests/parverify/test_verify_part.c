/*
 * test_verify_part.c - ckpt_verify_part(): a checkpoint of several files
 * checked one part at a time gives ckpt_verify()'s notes and first error,
 * also when the parts are checked on several threads at once over one
 * ckpt_file (run under ThreadSanitizer with -DCKPT_TSAN=ON).  Fixtures:
 * tests/fixtures/sharded (torch 2.6), and a copy of hf_bin with a flipped
 * byte in the data of its second shard.
 */
#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L
#endif
#include "ckpt.h"
#include "harness.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define NTHREADS 4

static char fx[1024];

typedef struct text {
    char *p;
    size_t len;
    uint64_t last_done, last_total;
    int calls;
} text;

static void add_note(void *ctx, const char *line)
{
    text *t = ctx;
    size_t n = strlen(line);
    char *p = realloc(t->p, t->len + n + 2);
    if (!p) return;
    t->p = p;
    memcpy(t->p + t->len, line, n);
    t->len += n;
    t->p[t->len++] = '\n';
    t->p[t->len] = 0;
}

static void on_progress(void *ctx, uint64_t done, uint64_t total)
{
    text *t = ctx;
    t->last_done = done;
    t->last_total = total;
    t->calls++;
}

typedef struct job {
    const ckpt_file *f;
    size_t n, start;
    text *notes; /* per part */
    int *rc;
    ckpt_error *err;
} job;

/* Every part, from `start` on and around: each part checked by every
 * thread, so that threads meet on one part and on one file. */
static void *worker(void *arg)
{
    job *j = arg;
    for (size_t k = 0; k < j->n; k++) {
        size_t i = (j->start + k) % j->n;
        j->rc[i] = ckpt_verify_part(j->f, i, add_note, on_progress, &j->notes[i], &j->err[i]);
    }
    return NULL;
}

static void free_text(text *t)
{
    free(t->p);
    memset(t, 0, sizeof *t);
}

/* ckpt_verify() against its parts in order, then on NTHREADS threads. */
static void check(const char *path, int want_ok)
{
    ckpt_error err, perr;
    ckpt_file *f = ckpt_open_path(path, NULL, &err);
    CHECK(f != NULL);
    if (!f) {
        fprintf(stderr, "  %s: %s\n", path, err.message);
        return;
    }
    text whole = {0}, parts = {0};
    int rc = ckpt_verify(f, add_note, &whole, &err);
    CHECK_EQ_INT(rc, want_ok ? 0 : -1);
    size_t n = ckpt_part_count(f), bad = n;
    CHECK(n >= 1);
    for (size_t i = 0; i < n && bad == n; i++) {
        text t = {0};
        if (ckpt_verify_part(f, i, add_note, on_progress, &t, &perr) != 0) bad = i;
        if (t.p) add_note(&parts, t.len ? (t.p[t.len - 1] = 0, t.p) : "");
        if (bad == n && n > 1) { /* progress ends with the part's whole */
            CHECK(t.calls > 0);
            CHECK_EQ_U64(t.last_done, t.last_total);
        }
        free_text(&t);
    }
    CHECK_STR(parts.p ? parts.p : "", whole.p ? whole.p : "");
    if (!want_ok) {
        CHECK(bad < n);
        CHECK_STR(perr.message, err.message);
        CHECK_EQ_INT(perr.code, err.code);
        CHECK(perr.offset == err.offset);
    } else {
        CHECK(bad == n);
    }

    /* NTHREADS threads, each checking every part: each result equals the
     * one of one thread */
    text *want = calloc(n, sizeof *want);
    int *want_rc = calloc(n, sizeof *want_rc);
    ckpt_error *want_err = calloc(n, sizeof *want_err);
    for (size_t i = 0; i < n; i++)
        want_rc[i] = ckpt_verify_part(f, i, add_note, NULL, &want[i], &want_err[i]);
    job jobs[NTHREADS];
    pthread_t th[NTHREADS];
    for (int t = 0; t < NTHREADS; t++) {
        jobs[t].f = f;
        jobs[t].n = n;
        jobs[t].start = (size_t)t % n;
        jobs[t].notes = calloc(n, sizeof(text));
        jobs[t].rc = calloc(n, sizeof(int));
        jobs[t].err = calloc(n, sizeof(ckpt_error));
        CHECK(pthread_create(&th[t], NULL, worker, &jobs[t]) == 0);
    }
    for (int t = 0; t < NTHREADS; t++) {
        pthread_join(th[t], NULL);
        for (size_t i = 0; i < n; i++) {
            CHECK_EQ_INT(jobs[t].rc[i], want_rc[i]);
            CHECK_STR(jobs[t].notes[i].p ? jobs[t].notes[i].p : "", want[i].p ? want[i].p : "");
            if (want_rc[i]) CHECK_STR(jobs[t].err[i].message, want_err[i].message);
            free_text(&jobs[t].notes[i]);
        }
        free(jobs[t].notes);
        free(jobs[t].rc);
        free(jobs[t].err);
    }
    for (size_t i = 0; i < n; i++) free_text(&want[i]);
    free(want);
    free(want_rc);
    free(want_err);

    CHECK(ckpt_verify_part(f, n, NULL, NULL, NULL, &err) == -1);
    CHECK_EQ_INT(err.code, CKPT_E_ARG);
    free_text(&whole);
    free_text(&parts);
    ckpt_close(f);
}

static int copy_file(const char *from, const char *to)
{
    FILE *a = fopen(from, "rb"), *b = a ? fopen(to, "wb") : NULL;
    char buf[8192];
    size_t n;
    int r = a && b ? 0 : -1;
    while (r == 0 && (n = fread(buf, 1, sizeof buf, a)) > 0)
        if (fwrite(buf, 1, n, b) != n) r = -1;
    if (a) fclose(a);
    if (b && fclose(b)) r = -1;
    return r;
}

int main(void)
{
    char path[1200];
    snprintf(fx, sizeof fx, "%s", __FILE__);
    char *slash = strrchr(fx, '/');
    if (slash) *slash = 0;
    snprintf(fx + strlen(fx), sizeof fx - strlen(fx), "/../fixtures/sharded");

    SECTION("every part alone gives ckpt_verify(), on one thread and on several");
    const char *names[] = {"hf_bin",
                           "hf_st",
                           "hf_bin/pytorch_model.bin.index.json",
                           "dcp_model",
                           "dcp_optim",
                           "dcp_split",
                           "single.safetensors"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        snprintf(path, sizeof path, "%s/%s", fx, names[i]);
        check(path, 1);
    }

    SECTION("a flipped byte in the second shard: the same first error");
    char dir[] = "/tmp/ckpt_parverify_XXXXXX";
    CHECK(mkdtemp(dir) != NULL);
    const char *files[] = {"pytorch_model-00001-of-00003.bin", "pytorch_model-00002-of-00003.bin",
                           "pytorch_model-00003-of-00003.bin", "pytorch_model.bin.index.json"};
    char to[1200];
    for (size_t i = 0; i < 4; i++) {
        snprintf(path, sizeof path, "%s/hf_bin/%s", fx, files[i]);
        snprintf(to, sizeof to, "%s/%s", dir, files[i]);
        CHECK(copy_file(path, to) == 0);
    }
    /* the first byte of the second shard's first storage */
    snprintf(to, sizeof to, "%s/%s", dir, files[1]);
    ckpt_error err;
    ckpt_file *s = ckpt_open(to, NULL, &err);
    CHECK(s != NULL);
    ckpt_record rec;
    memset(&rec, 0, sizeof rec);
    if (s) CHECK(ckpt_storage_record(s, 0, &rec, &err) == 0);
    ckpt_close(s);
    CHECK(rec.method == 0 && rec.size > 0);
    FILE *w = fopen(to, "r+b");
    CHECK(w != NULL);
    if (w && rec.size > 0) {
        int c;
        fseek(w, (long)rec.data_offset, SEEK_SET);
        c = fgetc(w);
        fseek(w, (long)rec.data_offset, SEEK_SET);
        fputc(c ^ 0x40, w);
    }
    if (w) fclose(w);
    check(dir, 0);
    ckpt_file *f = ckpt_open_path(dir, NULL, &err);
    CHECK(f != NULL);
    if (f) {
        CHECK(ckpt_verify_part(f, 0, NULL, NULL, NULL, &err) == 0);
        CHECK(ckpt_verify_part(f, 1, NULL, NULL, NULL, &err) == -1);
        CHECK_CONTAINS(err.message, "pytorch_model-00002-of-00003.bin: crc mismatch");
        CHECK(ckpt_verify_part(f, 2, NULL, NULL, NULL, &err) == 0);
        ckpt_close(f);
    }
    for (size_t i = 0; i < 4; i++) {
        snprintf(to, sizeof to, "%s/%s", dir, files[i]);
        unlink(to);
    }
    rmdir(dir);

    SECTION("arguments");
    CHECK(ckpt_verify_part(NULL, 0, NULL, NULL, NULL, &err) == -1);
    CHECK_EQ_INT(err.code, CKPT_E_ARG);
    return ut_summary();
}
