/*
 * test_constants.c - TorchScript constants (constants.pkl) are readable as
 * values through ckpt_part(f, "constants"): for every FILE given, the
 * tensors of the tuple equal, in order, dtype, shape and bytes, what torch
 * recorded in FILE.constants.txt (tests/gen_script.py: one line per
 * constant, "dtype d0,d1,... hex").  Also: ckpt_part(f, "extra") of
 * model_t*.pt holds its two _extra_files.  Prints ok/not ok lines and
 * "N passed, M failed".
 */
#include "ckpt.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int passed, failed;

static void check(int ok, const char *what, const char *file)
{
    printf("%s - %s: %s\n", ok ? "ok" : "not ok", file, what);
    if (ok)
        passed++;
    else
        failed++;
}

static int hexval(int c)
{
    return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

static void constants(const char *path)
{
    char txt[4096];
    snprintf(txt, sizeof txt, "%s.constants.txt", path);
    FILE *fp = fopen(txt, "r");
    ckpt_error err;
    ckpt_file *f = ckpt_open(path, NULL, &err);
    check(fp && f, "opens, with its constants.txt", path);
    if (!fp || !f) {
        if (fp) fclose(fp);
        ckpt_close(f);
        return;
    }
    const ckpt_value *c = ckpt_part(f, "constants");
    check(c && ckpt_value_kind(c) == CKPT_V_TUPLE, "constants is a tuple", path);
    char line[8192];
    size_t i = 0;
    while (c && fgets(line, sizeof line, fp)) {
        char dtype[32], shape[256], hex[4096];
        char what[128];
        snprintf(what, sizeof what, "constant %zu", i);
        if (sscanf(line, "%31s %255s %4095s", dtype, shape, hex) != 3) {
            check(0, "constants.txt line parses", path);
            break;
        }
        const ckpt_value *v = ckpt_value_item(c, i++);
        const ckpt_tensor *t = v ? ckpt_value_tensor(f, v) : NULL;
        int ok = t && strcmp(ckpt_dtype_name(t->dtype), dtype) == 0;
        char got[256] = "";
        for (uint32_t d = 0; t && d < t->ndim; d++)
            snprintf(got + strlen(got), sizeof got - strlen(got), "%s%lld", d ? "," : "",
                     (long long)t->shape[d]);
        ok = ok && strcmp(got, shape) == 0 && t->nbytes * 2 == strlen(hex);
        unsigned char *buf = ok ? malloc(t->nbytes + 1) : NULL;
        ok = ok && buf && ckpt_tensor_read(f, t, buf, t->nbytes, &err) == 0;
        for (size_t b = 0; ok && b < t->nbytes; b++)
            ok = hexval(hex[2 * b]) * 16 + hexval(hex[2 * b + 1]) == buf[b];
        free(buf);
        check(ok, what, path);
    }
    check(i > 0 && c && i == ckpt_value_len(c), "as many constants as torch has", path);
    fclose(fp);
    ckpt_close(f);
}

static void extra(const char *path)
{
    ckpt_error err;
    ckpt_file *f = ckpt_open(path, NULL, &err);
    const ckpt_value *e = f ? ckpt_part(f, "extra") : NULL;
    const ckpt_value *cfg = e ? ckpt_value_get(e, "config.json") : NULL;
    size_t n = 0;
    const char *s = cfg ? ckpt_value_text(cfg, &n) : NULL;
    /* gen_script.py's _extra_files={"config.json": '{"d": 6}', "notes.txt": "tiny"} */
    check(e && ckpt_value_len(e) == 2 && s && n == 8 && memcmp(s, "{\"d\": 6}", 8) == 0,
          "extra files as values", path);
    ckpt_close(f);
}

int main(int argc, char **argv)
{
    for (int i = 1; i < argc; i++) {
        if (strstr(argv[i], "consts_"))
            constants(argv[i]);
        else
            extra(argv[i]);
    }
    printf("%d passed, %d failed\n", passed, failed);
    return failed ? 1 : 0;
}
