/*
 * replay.c - run a fuzz target's LLVMFuzzerTestOneInput() over files, without
 * libFuzzer: every file named on the command line, and every regular file in
 * every directory named (recursively, in sorted order).  Built with any
 * compiler, so that the seed corpus and every past crash run as ordinary
 * CTest tests (with sanitizers when the build has them).
 *
 *   fuzz_open_replay [-t SECONDS] DIR_OR_FILE ...
 *
 * Exits 0 when every input ran; a crash aborts as it would under libFuzzer.
 * An input that takes longer than SECONDS (default 10; the fuzzers use 1)
 * fails the run.  A missing path fails the run; an empty directory does not.
 */
#define _POSIX_C_SOURCE 200809L
#include <dirent.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static double max_seconds = 10.0;
static unsigned long nrun, nslow;

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int run_file(const char *path)
{
    FILE *fp = fopen(path, "rb");
    if (!fp) {
        fprintf(stderr, "replay: %s: %s\n", path, strerror(errno));
        return -1;
    }
    size_t cap = 1 << 16, n = 0;
    uint8_t *buf = malloc(cap);
    for (;;) {
        if (!buf) {
            fclose(fp);
            fprintf(stderr, "replay: out of memory\n");
            return -1;
        }
        n += fread(buf + n, 1, cap - n, fp);
        if (n < cap) break;
        uint8_t *nb = realloc(buf, cap * 2);
        if (!nb) free(buf);
        buf = nb;
        cap *= 2;
    }
    int bad = ferror(fp);
    fclose(fp);
    if (bad) {
        free(buf);
        fprintf(stderr, "replay: %s: read error\n", path);
        return -1;
    }
    /* an exact-size copy, so that reads past the end are caught */
    uint8_t *exact = malloc(n ? n : 1);
    if (!exact) {
        free(buf);
        return -1;
    }
    memcpy(exact, buf, n);
    free(buf);
    double t0 = now();
    LLVMFuzzerTestOneInput(exact, n);
    double dt = now() - t0;
    free(exact);
    nrun++;
    if (dt > 1.0) {
        nslow++;
        fprintf(stderr, "replay: %s: slow input (%.2f s)\n", path, dt);
    }
    if (dt > max_seconds) {
        fprintf(stderr, "replay: %s: took %.2f s, more than %.0f s\n", path, dt, max_seconds);
        return -1;
    }
    return 0;
}

static int cmp(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static int run_path(const char *path)
{
    struct stat st;
    if (stat(path, &st) != 0) {
        fprintf(stderr, "replay: %s: %s\n", path, strerror(errno));
        return -1;
    }
    if (!S_ISDIR(st.st_mode)) return run_file(path);
    DIR *d = opendir(path);
    if (!d) {
        fprintf(stderr, "replay: %s: %s\n", path, strerror(errno));
        return -1;
    }
    char **names = NULL;
    size_t n = 0, cap = 0;
    struct dirent *e;
    int rc = 0;
    while ((e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.') continue; /* ., .., dotfiles such as .gitkeep */
        if (n == cap) {
            cap = cap ? cap * 2 : 64;
            char **nn = realloc(names, cap * sizeof *names);
            if (!nn) {
                rc = -1;
                break;
            }
            names = nn;
        }
        size_t len = strlen(path) + strlen(e->d_name) + 2;
        names[n] = malloc(len);
        if (!names[n]) {
            rc = -1;
            break;
        }
        snprintf(names[n], len, "%s/%s", path, e->d_name);
        n++;
    }
    closedir(d);
    if (n) qsort(names, n, sizeof *names, cmp);
    for (size_t i = 0; i < n; i++) {
        if (rc == 0 && run_path(names[i]) != 0) rc = -1;
        free(names[i]);
    }
    free(names);
    return rc;
}

int main(int argc, char **argv)
{
    int i = 1, rc = 0;
    if (i + 1 < argc && strcmp(argv[i], "-t") == 0) {
        max_seconds = atof(argv[i + 1]);
        i += 2;
    }
    if (i >= argc) {
        fprintf(stderr, "usage: %s [-t SECONDS] DIR_OR_FILE ...\n", argv[0]);
        return 2;
    }
    for (; i < argc; i++)
        if (run_path(argv[i]) != 0) rc = 1;
    fprintf(stderr, "replay: %lu inputs, %lu slow, %s\n", nrun, nslow, rc ? "FAILED" : "ok");
    return rc;
}
