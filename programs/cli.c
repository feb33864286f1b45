/*
 * cli.c - helpers shared by the commands of the `ckpt` program.
 */
#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L
#endif

#include "cli.h"

#include <errno.h>
#include <float.h>
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* ------------------------------------------------------------------------ */
/* Messages                                                                   */
/* ------------------------------------------------------------------------ */

int cli_error(const char *fmt, ...)
{
    va_list ap;
    fputs("ckpt: ", stderr);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    return CLI_FAIL;
}

int cli_usage_error(const char *fmt, ...)
{
    va_list ap;
    fputs("ckpt: ", stderr);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputs("\nTry 'ckpt --help'.\n", stderr);
    return CLI_USAGE;
}

int cli_file_error(const char *path, const ckpt_error *err)
{
    char msg[sizeof err->message + 1];
    size_t i;
    const char *text = err->message;
    if (text[0] == '\0')
        text = ckpt_code_name(err->code);
    /* keep it one line whatever the library said */
    for (i = 0; text[i] != '\0' && i < sizeof msg - 1; i++)
        msg[i] = (text[i] == '\n' || text[i] == '\r') ? ' ' : text[i];
    msg[i] = '\0';
    if (err->offset >= 0)
        fprintf(stderr, "ckpt: %s: %s (byte %lld)\n", path, msg,
                (long long)err->offset);
    else
        fprintf(stderr, "ckpt: %s: %s\n", path, msg);
    return CLI_FAIL;
}

/* ------------------------------------------------------------------------ */
/* Option parsing                                                             */
/* ------------------------------------------------------------------------ */

static const cli_option *find_long(const cli_option *o, size_t n,
                                   const char *name, size_t len)
{
    size_t i;
    for (i = 0; i < n; i++)
        if (strlen(o[i].name) == len && strncmp(o[i].name, name, len) == 0)
            return &o[i];
    return NULL;
}

static const cli_option *find_short(const cli_option *o, size_t n, char c)
{
    size_t i;
    for (i = 0; i < n; i++)
        if (o[i].short_name != 0 && o[i].short_name == c)
            return &o[i];
    return NULL;
}

int cli_parse(int argc, char **argv, const cli_option *options, size_t noptions,
              const char *usage, char **operands, int max_operands,
              int *noperands)
{
    int i, only_operands = 0;
    *noperands = 0;
    for (i = 1; i < argc; i++) {
        char *a = argv[i];
        if (only_operands || a[0] != '-' || a[1] == '\0') {
            if (*noperands >= max_operands)
                return cli_usage_error("%s: unexpected argument '%s'", argv[0], a);
            operands[(*noperands)++] = a;
            continue;
        }
        if (strcmp(a, "--") == 0) {
            only_operands = 1;
            continue;
        }
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            fputs(usage, stdout);
            return CLI_OK;
        }
        if (a[1] == '-') {
            const char *eq = strchr(a, '=');
            size_t len = eq ? (size_t)(eq - a) : strlen(a);
            const cli_option *o = find_long(options, noptions, a, len);
            if (!o)
                return cli_usage_error("%s: unknown option '%.*s'", argv[0],
                                       (int)len, a);
            if (!o->takes_value) {
                if (eq)
                    return cli_usage_error("%s: option '%s' takes no value",
                                           argv[0], o->name);
                *o->flag = 1;
            } else if (eq) {
                *o->value = eq + 1;
            } else if (i + 1 < argc) {
                *o->value = argv[++i];
            } else {
                return cli_usage_error("%s: option '%s' needs a value", argv[0],
                                       o->name);
            }
        } else {
            const cli_option *o = find_short(options, noptions, a[1]);
            if (!o || (!o->takes_value && a[2] != '\0'))
                return cli_usage_error("%s: unknown option '%s'", argv[0], a);
            if (!o->takes_value)
                *o->flag = 1;
            else if (a[2] != '\0')
                *o->value = a + 2;
            else if (i + 1 < argc)
                *o->value = argv[++i];
            else
                return cli_usage_error("%s: option '-%c' needs a value", argv[0],
                                       o->short_name);
        }
    }
    return CLI_CONTINUE;
}

/* ------------------------------------------------------------------------ */
/* Files                                                                      */
/* ------------------------------------------------------------------------ */

static int max_memory_set;
static uint64_t max_memory;

int cli_env_init(void)
{
    const char *s = getenv("CKPT_MAX_MEMORY");
    char *end;
    unsigned long long mib;
    if (!s || !*s)
        return 0;
    errno = 0;
    mib = strtoull(s, &end, 10);
    if (errno != 0 || *end != 0 || s[0] == '-' || mib > (UINT64_MAX >> 20)) {
        cli_usage_error("CKPT_MAX_MEMORY must be a number of MiB (0: no limit), not '%s'", s);
        return -1;
    }
    max_memory = (uint64_t)mib << 20;
    max_memory_set = 1;
    return 0;
}

void cli_options(ckpt_options *opt)
{
    ckpt_options_init(opt);
    if (max_memory_set)
        opt->max_memory = max_memory;
}

ckpt_file *cli_open(const char *path, const char *key)
{
    ckpt_options opt;
    ckpt_error err;
    ckpt_file *f;
    int reported;
    cli_options(&opt);
    opt.key = key;
    memset(&err, 0, sizeof err);
    err.offset = -1;
    f = cli_open_input(path, &opt, &err, &reported);
    if (!f && !reported)
        cli_file_error(strcmp(path, "-") == 0 ? "standard input" : path, &err);
    return f;
}

/* ------------------------------------------------------------------------ */
/* stdout                                                                     */
/* ------------------------------------------------------------------------ */

#define CLI_STDOUT_BUF (1u << 20)

static char *stdout_buf;
static int stdout_errno;

void cli_stdout_init(void)
{
    stdout_buf = malloc(CLI_STDOUT_BUF);
    if (stdout_buf)
        setvbuf(stdout, stdout_buf, _IOFBF, CLI_STDOUT_BUF);
}

int cli_stdout_failed(void)
{
    if (stdout_errno != 0)
        return 1;
    if (ferror(stdout)) {
        stdout_errno = errno != 0 ? errno : EIO;
        return 1;
    }
    return 0;
}

int cli_stdout_finish(int status)
{
    int bad = cli_stdout_failed();
    int e = stdout_errno;
    if (fflush(stdout) != 0) {
        if (!bad)
            e = errno;
        bad = 1;
    }
    if (fclose(stdout) != 0) {
        if (!bad)
            e = errno;
        bad = 1;
    }
    free(stdout_buf);
    stdout_buf = NULL;
    if (bad) {
        fprintf(stderr, "ckpt: write error: %s\n", strerror(e != 0 ? e : EIO));
        return CLI_FAIL;
    }
    return status;
}

/* ------------------------------------------------------------------------ */
/* Text                                                                       */
/* ------------------------------------------------------------------------ */

size_t cli_utf8_seq(const unsigned char *s, size_t n)
{
    unsigned c = s[0];
    if (c < 0x80)
        return 1;
    if (c >= 0xC2 && c <= 0xDF)
        return (n >= 2 && (s[1] & 0xC0) == 0x80) ? 2 : 0;
    if (c >= 0xE0 && c <= 0xEF) {
        unsigned lo = c == 0xE0 ? 0xA0 : 0x80, hi = c == 0xED ? 0x9F : 0xBF;
        if (n < 3 || s[1] < lo || s[1] > hi || (s[2] & 0xC0) != 0x80)
            return 0;
        return 3;
    }
    if (c >= 0xF0 && c <= 0xF4) {
        unsigned lo = c == 0xF0 ? 0x90 : 0x80, hi = c == 0xF4 ? 0x8F : 0xBF;
        if (n < 4 || s[1] < lo || s[1] > hi || (s[2] & 0xC0) != 0x80 ||
            (s[3] & 0xC0) != 0x80)
            return 0;
        return 4;
    }
    return 0;
}

void cli_json_string(FILE *out, const char *str, size_t n)
{
    const unsigned char *s = (const unsigned char *)str;
    size_t i = 0, run = 0;
    putc('"', out);
    while (i < n) {
        unsigned c = s[i];
        size_t k;
        if (c >= 0x20 && c < 0x80 && c != '"' && c != '\\') {
            i++;
            continue;
        }
        if (c >= 0x80 && (k = cli_utf8_seq(s + i, n - i)) > 0) {
            i += k;
            continue;
        }
        fwrite(str + run, 1, i - run, out);
        switch (c) {
        case '"': fputs("\\\"", out); break;
        case '\\': fputs("\\\\", out); break;
        case '\n': fputs("\\n", out); break;
        case '\r': fputs("\\r", out); break;
        case '\t': fputs("\\t", out); break;
        case '\b': fputs("\\b", out); break;
        case '\f': fputs("\\f", out); break;
        default: fprintf(out, "\\u%04x", c); break;
        }
        i++;
        run = i;
    }
    fwrite(str + run, 1, n - run, out);
    putc('"', out);
}


/* ------------------------------------------------------------------------ */
/* Byte order                                                                 */
/* ------------------------------------------------------------------------ */

int cli_host_big_endian(void)
{
    const uint16_t one = 1;
    unsigned char first;
    memcpy(&first, &one, 1);
    return first == 0;
}

void cli_swap_bytes(void *buf, size_t n, size_t unit)
{
    unsigned char *p = buf, *end;
    if (unit < 2)
        return;
    end = p + n - n % unit;
    for (; p < end; p += unit) {
        size_t a = 0, b = unit - 1;
        while (a < b) {
            unsigned char t = p[a];
            p[a++] = p[b];
            p[b--] = t;
        }
    }
}

/* ------------------------------------------------------------------------ */
/* Pointer map                                                                */
/* ------------------------------------------------------------------------ */

static size_t ptr_hash(const void *p)
{
    uint64_t x = (uint64_t)(uintptr_t)p;
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdULL;
    x ^= x >> 33;
    return (size_t)x;
}

const char *cli_ptrmap_get(const cli_ptrmap *m, const void *p)
{
    size_t i, mask;
    if (m->cap == 0)
        return NULL;
    mask = m->cap - 1;
    for (i = ptr_hash(p) & mask; m->keys[i] != NULL; i = (i + 1) & mask)
        if (m->keys[i] == p)
            return m->paths[i];
    return NULL;
}

static int ptrmap_grow(cli_ptrmap *m)
{
    size_t cap = m->cap ? m->cap * 2 : 256, i, j, mask = cap - 1;
    const void **keys = calloc(cap, sizeof *keys);
    char **paths = calloc(cap, sizeof *paths);
    if (!keys || !paths) {
        free(keys);
        free(paths);
        return -1;
    }
    for (j = 0; j < m->cap; j++) {
        if (!m->keys[j])
            continue;
        for (i = ptr_hash(m->keys[j]) & mask; keys[i] != NULL; i = (i + 1) & mask)
            ;
        keys[i] = m->keys[j];
        paths[i] = m->paths[j];
    }
    free(m->keys);
    free(m->paths);
    m->keys = keys;
    m->paths = paths;
    m->cap = cap;
    return 0;
}

int cli_ptrmap_put(cli_ptrmap *m, const void *p, const char *path)
{
    size_t i, mask, len = strlen(path);
    char *copy;
    if ((m->count + 1) * 2 > m->cap && ptrmap_grow(m) != 0)
        return -1;
    copy = malloc(len + 1);
    if (!copy)
        return -1;
    memcpy(copy, path, len + 1);
    mask = m->cap - 1;
    for (i = ptr_hash(p) & mask; m->keys[i] != NULL; i = (i + 1) & mask)
        if (m->keys[i] == p) {
            free(m->paths[i]);
            m->paths[i] = copy;
            return 0;
        }
    m->keys[i] = p;
    m->paths[i] = copy;
    m->count++;
    return 0;
}

void cli_ptrmap_free(cli_ptrmap *m)
{
    size_t i;
    for (i = 0; i < m->cap; i++)
        free(m->paths[i]);
    free(m->keys);
    free(m->paths);
    m->keys = NULL;
    m->paths = NULL;
    m->cap = m->count = 0;
}

/* ---- small text helpers --------------------------------------------------- */

const char *cli_grouped(uint64_t x, char *buf, size_t cap)
{
    char tmp[32];
    int n = snprintf(tmp, sizeof tmp, "%llu", (unsigned long long)x), i, o = 0;
    for (i = 0; i < n && (size_t)o + 2 < cap; i++) {
        if (i > 0 && (n - i) % 3 == 0)
            buf[o++] = ',';
        buf[o++] = tmp[i];
    }
    buf[o] = '\0';
    return buf;
}

void sb_add(sbuf *b, const void *data, size_t n)
{
    if (b->oom)
        return;
    if (b->cap - b->len < n + 1) {
        size_t cap = b->cap ? b->cap : 256;
        char *p;
        while (cap - b->len < n + 1) {
            if (cap > SIZE_MAX / 2) {
                b->oom = 1;
                return;
            }
            cap *= 2;
        }
        p = realloc(b->p, cap);
        if (!p) {
            b->oom = 1;
            return;
        }
        b->p = p;
        b->cap = cap;
    }
    memcpy(b->p + b->len, data, n);
    b->len += n;
    b->p[b->len] = '\0';
}

void sb_str(sbuf *b, const char *s) { sb_add(b, s, strlen(s)); }

void sb_char(sbuf *b, char c) { sb_add(b, &c, 1); }

void sb_free(sbuf *b)
{
    free(b->p);
    b->p = NULL;
    b->len = b->cap = 0;
}
