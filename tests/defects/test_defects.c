/*
 * test_defects.c - every generated defect gets its expected verdict.
 *
 *   test_defects MANIFEST FILES_DIR
 *
 * MANIFEST is tests/defects/manifest.tsv (written by gen_defects.py): one
 * line per file, "file <TAB> ok|error <TAB> message substring".  Each file is
 * opened twice, with ckpt_open() reading through pread and with use_mmap,
 * and for each: every tensor is read, zero-copy views are taken, and the
 * root is written as JSON (the output is counted, not kept).  The first
 * failure of those steps is the verdict:
 *   ok     no step may fail;
 *   error  some step must fail with a non-zero code and a one-line message
 *          containing the substring.
 * Either way the error structure must be clean (code set, message one line,
 * offset >= -1).  Prints one line per mismatch; exits 1 if there was any.
 */
#define _POSIX_C_SOURCE 200809L
#include "ckpt.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_READ ((uint64_t)64 << 20)

typedef struct sink {
    uint64_t bytes;
} sink;

static int sink_write(void *ctx, const char *s, size_t n)
{
    (void)s;
    ((sink *)ctx)->bytes += n;
    return 0;
}

static int clean_error(const ckpt_error *e, char *why, size_t cap)
{
    size_t n = strnlen(e->message, sizeof e->message);
    if (e->code == CKPT_OK) return snprintf(why, cap, "failed with code 0"), 0;
    if (n == 0) return snprintf(why, cap, "failed with an empty message"), 0;
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)e->message[i] < 0x20)
            return snprintf(why, cap, "message is not one line"), 0;
    if (e->offset < -1) return snprintf(why, cap, "offset %lld", (long long)e->offset), 0;
    return 1;
}

/* Open, read every tensor, write JSON.  0 when all went well, else -1 with
 * err holding the first failure and *stage naming the step. */
static int run(const char *path, int use_mmap, ckpt_error *err, const char **stage)
{
    ckpt_options opt;
    ckpt_options_init(&opt);
    opt.use_mmap = use_mmap;
    memset(err, 0, sizeof *err);
    *stage = "open";
    ckpt_file *f = ckpt_open(path, &opt, err);
    if (!f) return -1;
    int rc = 0;
    for (size_t i = 0; rc == 0 && i < ckpt_tensor_count(f); i++) {
        const ckpt_tensor *t = ckpt_tensor_at(f, i);
        if (t->nbytes > MAX_READ) continue;
        void *buf = malloc(t->nbytes ? (size_t)t->nbytes : 1);
        if (!buf) continue;
        *stage = "read";
        if (ckpt_tensor_read(f, t, buf, (size_t)t->nbytes, err) != 0) rc = -1;
        ckpt_error e2;
        const void *p = ckpt_tensor_data(f, t, &e2);
        if (rc == 0 && p && t->nbytes && memcmp(p, buf, (size_t)t->nbytes) != 0) {
            snprintf(err->message, sizeof err->message,
                     "zero-copy view of '%s' differs from its read", t->name);
            err->code = CKPT_E_FORMAT;
            *stage = "data";
            rc = -2;
        }
        free(buf);
    }
    if (rc == 0) {
        sink s = {0};
        *stage = "json";
        if (ckpt_value_to_json(f, NULL, 1, sink_write, &s, err) != 0) rc = -1;
    }
    ckpt_close(f);
    return rc;
}

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: %s MANIFEST FILES_DIR\n", argv[0]);
        return 2;
    }
    FILE *m = fopen(argv[1], "r");
    if (!m) {
        perror(argv[1]);
        return 2;
    }
    char line[1024];
    int failures = 0, checked = 0;
    while (fgets(line, sizeof line, m)) {
        line[strcspn(line, "\r\n")] = 0;
        if (!line[0] || line[0] == '#') continue;
        char *name = line, *verdict = strchr(line, '\t'), *sub = NULL;
        if (verdict) {
            *verdict++ = 0;
            sub = strchr(verdict, '\t');
            if (sub) *sub++ = 0;
        }
        if (!verdict || (strcmp(verdict, "ok") != 0 && strcmp(verdict, "error") != 0)) {
            fprintf(stderr, "%s: bad manifest line\n", name);
            failures++;
            continue;
        }
        char path[2048];
        snprintf(path, sizeof path, "%s/%s", argv[2], name);
        for (int use_mmap = 0; use_mmap < 2; use_mmap++) {
            ckpt_error err;
            const char *stage;
            char why[160];
            int r = run(path, use_mmap, &err, &stage);
            const char *how = use_mmap ? "mmap" : "pread";
            checked++;
            if (r == -2) {
                printf("FAIL %s (%s): %s\n", name, how, err.message);
                failures++;
            } else if (r != 0 && !clean_error(&err, why, sizeof why)) {
                printf("FAIL %s (%s): unclean error at %s: %s [%s]\n", name, how, stage, why,
                       err.message);
                failures++;
            } else if (strcmp(verdict, "ok") == 0 && r != 0) {
                printf("FAIL %s (%s): expected ok, got %s error: %s (byte %lld)\n", name, how,
                       stage, err.message, (long long)err.offset);
                failures++;
            } else if (strcmp(verdict, "error") == 0 && r == 0) {
                printf("FAIL %s (%s): expected an error containing '%s', got ok\n", name, how,
                       sub ? sub : "");
                failures++;
            } else if (strcmp(verdict, "error") == 0 && sub && !strstr(err.message, sub)) {
                printf("FAIL %s (%s): expected '%s', got %s error: %s (byte %lld)\n", name, how,
                       sub, stage, err.message, (long long)err.offset);
                failures++;
            }
        }
    }
    fclose(m);
    printf("%d checks, %d failures\n", checked, failures);
    return failures ? 1 : 0;
}
