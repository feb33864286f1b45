/*
 * test_mutate.c - damaged fixtures are answered cleanly.
 *
 *   test_mutate [-f FLIPS] [-t TRUNCS] FIXTURES_DIR
 *
 * For every file in FIXTURES_DIR (*.json skipped):
 *   - truncations: every length 0 .. size-1 for files under 4 KiB, otherwise
 *     TRUNCS (500) lengths spread over the file, plus the last 64;
 *   - flips: FLIPS (2000) single-byte changes, chosen by a fixed PRNG seeded
 *     from the file name, so that every run tests the same mutants; fewer for
 *     large files (at most ~64 MiB of input per file in total), at least 200.
 * Each mutant is opened from memory; when it opens, every tensor up to 1 MiB
 * is read (whole and a middle range), zero-copy views are compared with the
 * reads, and the root is written as JSON into a counting sink.  Every result
 * must be a clean success or a clean error: non-zero code, non-empty
 * one-line message, offset >= -1.  ASan/UBSan (CKPT_SANITIZE) turn memory
 * errors into failures; the slowest mutant is reported.
 *
 * A failing mutant is written to ./mutant-<file>-<kind>-<n> to be replayed
 * with the fuzz replay drivers (fuzz_open_replay FILE).
 */
#define _POSIX_C_SOURCE 200809L
#include "ckpt.h"

#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#define MAX_READ ((uint64_t)1 << 20)

static long failures, mutants;
static double slowest;
static char slowest_name[300];

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int sink_write(void *ctx, const char *s, size_t n)
{
    (void)s;
    *(uint64_t *)ctx += n;
    return 0;
}

static const char *unclean(const ckpt_error *e)
{
    size_t n = strnlen(e->message, sizeof e->message);
    if (e->code == CKPT_OK) return "failure with code 0";
    if (n == 0) return "failure with an empty message";
    if (n == sizeof e->message) return "message not terminated";
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)e->message[i] < 0x20) return "message is not one line";
    if (e->offset < -1) return "offset below -1";
    return NULL;
}

static void report(const char *file, const char *kind, size_t n, const uint8_t *data, size_t size,
                   const char *what, const ckpt_error *e)
{
    failures++;
    char out[400];
    const char *base = strrchr(file, '/');
    snprintf(out, sizeof out, "mutant-%s-%s-%zu", base ? base + 1 : file, kind, n);
    printf("FAIL %s %s %zu: %s [%s] (saved as %s)\n", file, kind, n, what, e ? e->message : "",
           out);
    FILE *fp = fopen(out, "wb");
    if (fp) {
        fwrite(data, 1, size, fp);
        fclose(fp);
    }
}

/* 0 clean, -1 not clean (reported). */
static void check(const char *file, const char *kind, size_t n, const uint8_t *data, size_t size)
{
    ckpt_error err;
    const char *why;
    double t0 = now();
    mutants++;
    memset(&err, 0, sizeof err);
    ckpt_file *f = ckpt_open_memory(data, size, NULL, &err);
    if (!f) {
        if ((why = unclean(&err))) report(file, kind, n, data, size, why, &err);
        goto timing;
    }
    for (size_t i = 0; i < ckpt_tensor_count(f); i++) {
        const ckpt_tensor *t = ckpt_tensor_at(f, i);
        if (t->nbytes > MAX_READ) continue;
        size_t nb = (size_t)t->nbytes;
        uint8_t *buf = malloc(nb ? nb : 1);
        if (!buf) continue;
        memset(&err, 0, sizeof err);
        if (ckpt_tensor_read(f, t, buf, nb, &err) != 0) {
            if ((why = unclean(&err))) report(file, kind, n, data, size, why, &err);
        } else {
            const uint8_t *p = ckpt_tensor_data(f, t, &err);
            if (p && (p < data || p + nb > data + size || memcmp(p, buf, nb) != 0))
                report(file, kind, n, data, size,
                       "zero-copy view outside the file or unlike the read", NULL);
            if (nb > 2) {
                uint8_t *part = malloc(nb - 2);
                if (part && ckpt_tensor_read_range(f, t, 1, part, nb - 2, &err) == 0 &&
                    memcmp(part, buf + 1, nb - 2) != 0)
                    report(file, kind, n, data, size, "read_range differs from read", NULL);
                free(part);
            }
        }
        free(buf);
    }
    uint64_t out = 0;
    memset(&err, 0, sizeof err);
    if (ckpt_value_to_json(f, NULL, (int)(n & 1), sink_write, &out, &err) != 0 &&
        (why = unclean(&err)))
        report(file, kind, n, data, size, why, &err);
    ckpt_close(f);
timing:;
    double dt = now() - t0;
    if (dt > slowest) {
        slowest = dt;
        snprintf(slowest_name, sizeof slowest_name, "%s %s %zu", file, kind, n);
    }
}

static uint64_t rng_state;
static uint64_t rng(void)
{ /* splitmix64 */
    uint64_t z = (rng_state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static int mutate_file(const char *path, long flips, long truncs)
{
    struct stat st;
    if (stat(path, &st) == 0 && S_ISDIR(st.st_mode)) return 0; /* a part's own fixtures */
    FILE *fp = fopen(path, "rb");
    if (!fp) {
        perror(path);
        return -1;
    }
    fseek(fp, 0, SEEK_END);
    long sz = ftell(fp);
    fseek(fp, 0, SEEK_SET);
    if (sz <= 0) {
        fclose(fp);
        return 0;
    }
    size_t size = (size_t)sz;
    uint8_t *orig = malloc(size);
    if (!orig || fread(orig, 1, size, fp) != size) {
        fclose(fp);
        free(orig);
        return -1;
    }
    fclose(fp);
    long before = failures, m0 = mutants;
    double t0 = now();

    /* truncations, each into an exact-size buffer so ASan sees overreads */
    size_t nt = size < 4096 ? size : (size_t)truncs;
    for (size_t k = 0; k < nt + (size < 4096 ? 0 : 64); k++) {
        size_t len = size < 4096 ? k
                     : k < nt    ? (size_t)((double)k * (double)size / (double)nt)
                                 : size - 64 + (k - nt);
        uint8_t *cut = malloc(len ? len : 1);
        if (!cut) continue;
        memcpy(cut, orig, len);
        check(path, "trunc", len, cut, len);
        free(cut);
    }

    /* single-byte flips */
    const char *base = strrchr(path, '/');
    base = base ? base + 1 : path;
    rng_state = 1469598103934665603ull;
    for (const char *c = base; *c; c++)
        rng_state = (rng_state ^ (unsigned char)*c) * 1099511628211ull;
    long nf = flips;
    if ((uint64_t)nf * size > ((uint64_t)64 << 20)) nf = (long)(((uint64_t)64 << 20) / size);
    if (nf < 200) nf = 200;
    uint8_t *mut = malloc(size);
    if (!mut) {
        free(orig);
        return -1;
    }
    memcpy(mut, orig, size);
    for (long k = 0; k < nf; k++) {
        uint64_t r = rng();
        size_t off = (size_t)(r % size);
        /* half the flips land in the last 512 bytes: ZIP end records, the
           central directory, legacy storage headers and TAR trailers live there */
        if ((r >> 40) & 1 && size > 512) off = size - 1 - (size_t)((r >> 41) % 512);
        uint8_t x;
        switch ((r >> 32) & 3) {
        case 0: x = (uint8_t)(1u << ((r >> 34) & 7)); break; /* one bit */
        case 1: x = 0xff; break;                             /* all bits */
        default: x = (uint8_t)((r >> 48) | 1); break;        /* any value */
        }
        mut[off] ^= x;
        check(path, "flip", (size_t)k, mut, size);
        mut[off] = orig[off];
    }
    free(mut);
    free(orig);
    printf("%-40s %8zu bytes %6ld mutants %6.2f s%s\n", base, size, mutants - m0, now() - t0,
           failures > before ? "  FAILURES" : "");
    fflush(stdout);
    return 0;
}

static int cmp(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

int main(int argc, char **argv)
{
    long flips = 2000, truncs = 500;
    int i = 1;
    for (; i + 1 < argc && argv[i][0] == '-'; i += 2) {
        if (strcmp(argv[i], "-f") == 0)
            flips = atol(argv[i + 1]);
        else if (strcmp(argv[i], "-t") == 0)
            truncs = atol(argv[i + 1]);
        else
            break;
    }
    if (i + 1 != argc) {
        fprintf(stderr, "usage: %s [-f FLIPS] [-t TRUNCS] FIXTURES_DIR\n", argv[0]);
        return 2;
    }
    DIR *d = opendir(argv[i]);
    if (!d) {
        perror(argv[i]);
        return 2;
    }
    char **names = NULL;
    size_t n = 0, cap = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        size_t l = strlen(e->d_name);
        if (e->d_name[0] == '.' || (l > 5 && strcmp(e->d_name + l - 5, ".json") == 0)) continue;
        if (e->d_type == DT_DIR) continue; /* a part's own fixtures (tests/parts/) */
        if (n == cap) {
            cap = cap ? cap * 2 : 64;
            char **nn = realloc(names, cap * sizeof *names);
            if (!nn) return 2;
            names = nn;
        }
        size_t len = strlen(argv[i]) + l + 2;
        names[n] = malloc(len);
        if (!names[n]) return 2;
        snprintf(names[n], len, "%s/%s", argv[i], e->d_name);
        struct stat st; /* a part's own fixtures folder is tested on its own */
        if (stat(names[n], &st) == 0 && S_ISDIR(st.st_mode))
            free(names[n]);
        else
            n++;
    }
    closedir(d);
    qsort(names, n, sizeof *names, cmp);
    double t0 = now();
    for (size_t k = 0; k < n; k++) {
        if (mutate_file(names[k], flips, truncs) != 0) failures++;
        free(names[k]);
    }
    free(names);
    printf("%ld mutants of %zu files in %.1f s, %ld failures; slowest %.3f s (%s)\n", mutants, n,
           now() - t0, failures, slowest, slowest_name);
    return failures ? 1 : 0;
}
