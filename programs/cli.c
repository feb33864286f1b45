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
#include <stddef.h>
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

static const char *limit_hint(const ckpt_error *err, size_t *at, size_t *len);

int cli_file_error(const char *path, const ckpt_error *err)
{
    size_t at = 0, len = 0, n;
    const char *text = err->message;
    const char *hint = limit_hint(err, &at, &len);
    sbuf p, m;
    memset(&p, 0, sizeof p);
    memset(&m, 0, sizeof m);
    if (text[0] == '\0') text = ckpt_code_name(err->code);
    n = strnlen(text, sizeof err->message);
    if (strcmp(path, "-") == 0) path = "standard input";
    /* one line, whatever the file or the library said: both escaped */
    cli_escape(&p, path, strlen(path), (size_t)-1, 0);
    if (hint) { /* "(max_tensor_bytes)" -> "(raise it with --max-tensor-size ...)" */
        cli_escape(&m, text, at, (size_t)-1, 0);
        sb_str(&m, hint);
        cli_escape(&m, text + at + len, n - at - len, (size_t)-1, 0);
    } else {
        cli_escape(&m, text, n, (size_t)-1, 0);
    }
    if (p.oom || m.oom || !p.p || !m.p) {
        fprintf(stderr, "ckpt: %s\n", ckpt_code_name(err->code));
    } else if (err->offset >= 0) {
        fprintf(stderr, "ckpt: %s: %s (byte %lld)\n", p.p, m.p, (long long)err->offset);
    } else {
        fprintf(stderr, "ckpt: %s: %s\n", p.p, m.p);
    }
    sb_free(&p);
    sb_free(&m);
    return CLI_FAIL;
}

/* ------------------------------------------------------------------------ */
/* Option parsing                                                             */
/* ------------------------------------------------------------------------ */

static const cli_option *find_long(const cli_option *o, size_t n, const char *name, size_t len)
{
    size_t i;
    for (i = 0; i < n; i++)
        if (strlen(o[i].name) == len && strncmp(o[i].name, name, len) == 0) return &o[i];
    return NULL;
}

static int limit_flag(const char *cmd, const char *a, size_t len, const char *value);
static void limits_usage(void);

static const cli_option *find_short(const cli_option *o, size_t n, char c)
{
    size_t i;
    for (i = 0; i < n; i++)
        if (o[i].short_name != 0 && o[i].short_name == c) return &o[i];
    return NULL;
}

int cli_parse(int argc, char **argv, const cli_option *options, size_t noptions, const char *usage,
              char **operands, int max_operands, int *noperands)
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
            limits_usage();
            return CLI_OK;
        }
        if (a[1] == '-') {
            const char *eq = strchr(a, '=');
            size_t len = eq ? (size_t)(eq - a) : strlen(a);
            const cli_option *o = find_long(options, noptions, a, len);
            if (!o) {
                /* a limit flag, accepted by every command */
                int r = limit_flag(argv[0], a, len,
                                   eq             ? eq + 1
                                   : i + 1 < argc ? argv[i + 1]
                                                  : NULL);
                if (r == CLI_USAGE) return r;
                if (r == CLI_OK) {
                    if (!eq) i++;
                    continue;
                }
                return cli_usage_error("%s: unknown option '%.*s'", argv[0], (int)len, a);
            }
            if (!o->takes_value) {
                if (eq) return cli_usage_error("%s: option '%s' takes no value", argv[0], o->name);
                *o->flag = 1;
            } else if (eq) {
                *o->value = eq + 1;
            } else if (i + 1 < argc) {
                *o->value = argv[++i];
            } else {
                return cli_usage_error("%s: option '%s' needs a value", argv[0], o->name);
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
                return cli_usage_error("%s: option '-%c' needs a value", argv[0], o->short_name);
        }
    }
    return CLI_CONTINUE;
}

/* ------------------------------------------------------------------------ */
/* Files                                                                      */
/* ------------------------------------------------------------------------ */

/* Every limit of ckpt_options, as a flag that every command accepts and an
 * environment variable.  A flag beats the environment, which beats the
 * library's default. */
typedef struct cli_limit {
    const char *flag;     /* "--max-tensor-size" */
    const char *env;      /* "CKPT_MAX_TENSOR_SIZE" */
    const char *field;    /* the ckpt_options field the library's errors name */
    int size;             /* a size in bytes: takes suffixes (K, M, G, ...) */
    size_t offset, width; /* of the field in ckpt_options; width 0: the
                             program's own limit, not the library's */
    uint64_t min, max;
    const char *help;
} cli_limit;

#define LIMIT_FIELD(f) offsetof(ckpt_options, f), sizeof(((ckpt_options *)0)->f)
/* The program's own limits (width 0): their defaults. */
#define DEFAULT_MAX_SPOOL ((uint64_t)64 << 30)

static const cli_limit limits[] = {
    {"--max-pickle-size", "CKPT_MAX_PICKLE_SIZE", "max_pickle_bytes", 1,
     LIMIT_FIELD(max_pickle_bytes), 1, UINT64_MAX, "bytes of one pickle"},
    {"--max-tensor-size", "CKPT_MAX_TENSOR_SIZE", "max_tensor_bytes", 1,
     LIMIT_FIELD(max_tensor_bytes), 1, UINT64_MAX,
     "bytes of one tensor that cat, extract or convert reads\n"
     "(ls, show, info and scan list any size)"},
    {"--max-ops", "CKPT_MAX_OPS", "max_ops", 0, LIMIT_FIELD(max_ops), 1, UINT64_MAX,
     "opcodes run in one pickle"},
    {"--max-stack", "CKPT_MAX_STACK", "max_stack", 0, LIMIT_FIELD(max_stack), 1, UINT32_MAX,
     "pickle stack entries and marks"},
    {"--max-depth", "CKPT_MAX_DEPTH", "max_depth", 0, LIMIT_FIELD(max_depth), 1, 2048,
     "nesting of values (at most 2048)"},
    {"--max-memo", "CKPT_MAX_MEMO", "max_memo", 0, LIMIT_FIELD(max_memo), 0, UINT32_MAX,
     "memo keys beyond the pickle's length"},
    {"--max-expansion", "CKPT_MAX_EXPANSION", "max_expansion", 0, LIMIT_FIELD(max_expansion), 0,
     UINT64_MAX, "values a walk visits (plus half per pickle byte)"},
    {"--max-entries", "CKPT_MAX_ENTRIES", "max_entries", 0, LIMIT_FIELD(max_entries), 1, UINT32_MAX,
     "archive records, storages, tensors, globals (each)"},
    {"--max-rank", "CKPT_MAX_RANK", "max_rank", 0, LIMIT_FIELD(max_rank), 0, 64,
     "dimensions of a tensor (at most 64)"},
    {"--max-memory", "CKPT_MAX_MEMORY", "max_memory", 1, LIMIT_FIELD(max_memory), 0, UINT64_MAX,
     "memory for a file's metadata (plus 24 bytes per pickle\n"
     "byte past 16 MiB); 0: no limit"},
    {"--max-spool", "CKPT_MAX_SPOOL", "max_spool", 1, 0, 0, 0, UINT64_MAX,
     "bytes of standard input (FILE '-', a pipe) copied to a\n"
     "temporary file in $TMPDIR to be read; 0: no limit"},
};

#define NLIMITS (sizeof limits / sizeof limits[0])

static uint64_t limit_value[NLIMITS];
static int limit_set[NLIMITS];

/* The default of the program's own limit l (width 0). */
static uint64_t cli_limit_default(const cli_limit *l)
{
    if (strcmp(l->field, "max_spool") == 0) return DEFAULT_MAX_SPOOL;
    return 0;
}

/* "512M", "20G", "1KiB", "1000", "64KB": K, M, G, T, P, E and KiB, MiB, ...
 * are powers of 1024, KB, MB, ... powers of 1000 (as in GNU coreutils).  A
 * plain number is bytes, for a flag and a variable alike.  0 on success. */
static int parse_limit(const cli_limit *l, const char *s, uint64_t *out)
{
    static const char units[] = "KMGTPE";
    unsigned long long v;
    uint64_t mul = 1;
    const char *u;
    char *end;
    if (!s || s[0] < '0' || s[0] > '9') return -1;
    errno = 0;
    v = strtoull(s, &end, 10);
    if (errno != 0) return -1;
    if (*end != '\0') {
        const char *p;
        int i;
        if (!l->size) return -1;
        u = strchr(units, end[0] >= 'a' && end[0] <= 'z' ? end[0] - 'a' + 'A' : end[0]);
        if (end[0] == 'B' && end[1] == '\0') {
            mul = 1;
        } else if (!u) {
            return -1;
        } else {
            uint64_t base = 1024;
            p = end + 1;
            if (strcmp(p, "iB") == 0 || *p == '\0')
                base = 1024;
            else if (strcmp(p, "B") == 0)
                base = 1000;
            else
                return -1;
            mul = 1;
            for (i = 0; i <= (int)(u - units); i++) mul *= base;
        }
    }
    if (mul != 0 && v > UINT64_MAX / mul) return -1;
    *out = (uint64_t)v * mul;
    if (*out < l->min || *out > l->max) return -1;
    return 0;
}

/* A usage error for a bad value of l: from flag l->flag of command `cmd`,
 * or (cmd NULL) from its environment variable. */
static int bad_limit(const char *cmd, const cli_limit *l, const char *s)
{
    char range[64];
    const char *name = cmd ? l->flag : l->env;
    if (l->min == 0 && l->size)
        snprintf(range, sizeof range, "0 for no limit");
    else if (l->max == UINT64_MAX)
        snprintf(range, sizeof range, "at least %llu", (unsigned long long)l->min);
    else
        snprintf(range, sizeof range, "from %llu to %llu", (unsigned long long)l->min,
                 (unsigned long long)l->max);
    if (l->size)
        return cli_usage_error("%s%s%s takes a size in bytes (%s), with an optional "
                               "suffix K, M, G, T (powers of 1024) or KB, MB, GB, TB "
                               "(powers of 1000), not '%s'",
                               cmd ? cmd : "", cmd ? ": " : "", name, range, s);
    return cli_usage_error("%s%s%s takes a number %s, not '%s'", cmd ? cmd : "", cmd ? ": " : "",
                           name, range, s);
}

/* CLI_OK when a[0..len) is a limit flag and `value` was taken (the caller
 * steps over it), CLI_USAGE after a bad value, CLI_CONTINUE when a is not a
 * limit flag. */
static int limit_flag(const char *cmd, const char *a, size_t len, const char *value)
{
    size_t i;
    uint64_t v;
    for (i = 0; i < NLIMITS; i++) {
        const cli_limit *l = &limits[i];
        if (strlen(l->flag) != len || strncmp(l->flag, a, len) != 0) continue;
        if (!value) return cli_usage_error("%s: option '%s' needs a value", cmd, l->flag);
        if (parse_limit(l, value, &v) != 0) return bad_limit(cmd, l, value);
        limit_value[i] = v;
        limit_set[i] = 2;
        return CLI_OK;
    }
    return CLI_CONTINUE;
}

int cli_env_init(void)
{
    size_t i;
    for (i = 0; i < NLIMITS; i++) {
        const cli_limit *l = &limits[i];
        const char *s = getenv(l->env);
        uint64_t v;
        /* a plain number is bytes here too (CKPT_MAX_MEMORY's used to be MiB:
         * README, "Safety") */
        if (!s || !*s) continue;
        if (parse_limit(l, s, &v) != 0) {
            bad_limit(NULL, l, s);
            return -1;
        }
        limit_value[i] = v;
        limit_set[i] = 1;
    }
    return 0;
}

void cli_options(ckpt_options *opt)
{
    size_t i;
    ckpt_options_init(opt);
    for (i = 0; i < NLIMITS; i++) {
        unsigned char *field = (unsigned char *)opt + limits[i].offset;
        if (!limit_set[i] || limits[i].width == 0) continue;
        if (limits[i].width == sizeof(uint32_t)) {
            uint32_t v = (uint32_t)limit_value[i];
            memcpy(field, &v, sizeof v);
        } else {
            memcpy(field, &limit_value[i], sizeof limit_value[i]);
        }
    }
}

/* A limit error names the field that raises it ("(max_stack)" or
 * "(limit 4; max_rank)"): the flag and variable to say instead, and where
 * the name is in the message. */
static const char *limit_hint(const ckpt_error *err, size_t *at, size_t *len)
{
    static char hint[96];
    size_t i;
    if (err->code != CKPT_E_LIMIT) return NULL;
    for (i = 0; i < NLIMITS; i++) {
        const cli_limit *l = &limits[i];
        size_t n = strlen(l->field);
        const char *p = err->message;
        while ((p = strstr(p, l->field)) != NULL) {
            char after = p[n];
            if ((p == err->message || p[-1] == '(' || p[-1] == ' ') &&
                (after == ')' || after == ';' || after == ',' || after == '\0'))
                break;
            p += n;
        }
        if (!p) continue;
        snprintf(hint, sizeof hint, "raise it with %s or %s", l->flag, l->env);
        *at = (size_t)(p - err->message);
        *len = n;
        return hint;
    }
    return NULL;
}

/* "10G", "240M", "1000": a size in the biggest unit that is exact. */
static void format_limit(const cli_limit *l, uint64_t v, char *buf, size_t cap)
{
    static const char units[] = "KMGTPE";
    int k = -1;
    while (l->size && v != 0 && v % 1024 == 0 && k < 5) {
        v /= 1024;
        k++;
    }
    if (k >= 0)
        snprintf(buf, cap, "%llu%c", (unsigned long long)v, units[k]);
    else
        snprintf(buf, cap, "%llu", (unsigned long long)v);
}

void cli_limits_usage(FILE *out)
{
    size_t i;
    ckpt_options def;
    ckpt_options_init(&def);
    fputs("Limits (every command): against hostile files; raise one when an honest\n"
          "file hits it (the error names the flag).  A flag beats its variable.\n"
          "SIZE is bytes, or with a suffix K, M, G, T (powers of 1024, also KiB, ...)\n"
          "or KB, MB, GB, TB (powers of 1000).\n",
          out);
    for (i = 0; i < NLIMITS; i++) {
        const cli_limit *l = &limits[i];
        const char *h = l->help, *nl;
        const unsigned char *field = (const unsigned char *)&def + l->offset;
        uint64_t v;
        char dflt[32];
        if (l->width == 0) {
            v = cli_limit_default(l);
        } else if (l->width == sizeof(uint32_t)) {
            uint32_t v32;
            memcpy(&v32, field, sizeof v32);
            v = v32;
        } else {
            memcpy(&v, field, sizeof v);
        }
        format_limit(l, v, dflt, sizeof dflt);
        fprintf(out, "  %s %s, %s=%s  (default %s)\n", l->flag, l->size ? "SIZE" : "N", l->env,
                l->size ? "SIZE" : "N", dflt);
        while ((nl = strchr(h, '\n')) != NULL) {
            fprintf(out, "      %.*s\n", (int)(nl - h), h);
            h = nl + 1;
        }
        fprintf(out, "      %s\n", h);
    }
    fputs("  A plain number is bytes, for a flag and its variable alike (a plain\n"
          "  CKPT_MAX_MEMORY used to mean MiB: write 300M for 300 MiB).\n",
          out);
}

uint64_t cli_max_spool(void)
{
    size_t i;
    for (i = 0; i < NLIMITS; i++)
        if (strcmp(limits[i].field, "max_spool") == 0)
            return limit_set[i] ? limit_value[i] : cli_limit_default(&limits[i]);
    return DEFAULT_MAX_SPOOL;
}

static void limits_usage(void)
{
    fputs("\nLimit flags (--max-tensor-size, --max-memory, ...) are accepted too:\n"
          "see 'ckpt --help'.\n",
          stdout);
}

ckpt_file *cli_open(const char *path, const char *key)
{
    ckpt_options opt;
    ckpt_error err;
    ckpt_file *f;
    char *k = NULL;
    size_t kn = 0;
    cli_options(&opt);
    if (key && !(k = cli_unescape(key, &kn))) {
        cli_error("%s: out of memory", path);
        return NULL;
    }
    opt.key = k;
    opt.key_len = kn;
    f = cli_open_input(path, &opt, &err);
    free(k); /* the library keeps its own copy */
    if (!f) cli_file_error(path, &err);
    return f;
}

/* ------------------------------------------------------------------------ */
/* stdout                                                                     */
/* ------------------------------------------------------------------------ */

/* A pipe's capacity: larger buffers save no system call worth having (a
 * write larger than it goes out directly) and a listing fills all of it,
 * resident beside the open file. */
#define CLI_STDOUT_BUF (64u << 10)

static char *stdout_buf;
static int stdout_errno;
static int stdout_fail_status = CLI_FAIL;

void cli_stdout_fail_status(int status)
{
    stdout_fail_status = status;
}

void cli_stdout_init(void)
{
    stdout_buf = malloc(CLI_STDOUT_BUF);
    if (stdout_buf) setvbuf(stdout, stdout_buf, _IOFBF, CLI_STDOUT_BUF);
}

int cli_stdout_failed(void)
{
    if (stdout_errno != 0) return 1;
    if (ferror(stdout)) {
        stdout_errno = errno != 0 ? errno : EIO;
        return 1;
    }
    return 0;
}

void cli_stdout_write(const void *p, size_t n)
{
    if (n < CLI_STDOUT_BUF / 2) { /* stdio's buffer gathers small ones */
        fwrite(p, 1, n, stdout);
        return;
    }
    if (fflush(stdout) != 0 || cli_stdout_failed()) return; /* a failure is kept */
    const char *s = p;
    while (n) {
        ssize_t w = write(STDOUT_FILENO, s, n);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) {
            stdout_errno = w < 0 && errno != 0 ? errno : EIO;
            return;
        }
        s += w;
        n -= (size_t)w;
    }
}

int cli_stdout_finish(int status)
{
    int bad = cli_stdout_failed();
    int e = stdout_errno;
    if (fflush(stdout) != 0) {
        if (!bad) e = errno;
        bad = 1;
    }
    if (fclose(stdout) != 0) {
        if (!bad) e = errno;
        bad = 1;
    }
    free(stdout_buf);
    stdout_buf = NULL;
    if (bad) {
        fprintf(stderr, "ckpt: write error: %s\n", strerror(e != 0 ? e : EIO));
        return stdout_fail_status;
    }
    return status;
}

/* ------------------------------------------------------------------------ */
/* Text                                                                       */
/* ------------------------------------------------------------------------ */

size_t cli_utf8_seq(const unsigned char *s, size_t n)
{
    return ckpt_utf8_seq((const char *)s, n);
}

void cli_json_string(FILE *out, const char *str, size_t n)
{
    char tmp[1024];
    size_t done = 0, c, len;
    putc('"', out);
    while (done < n) { /* the library's JSON escaper: one for every output */
        len = ckpt_json_escape(tmp, sizeof tmp, str + done, n - done, &c);
        fwrite(tmp, 1, len, out);
        done += c;
        if (c == 0) break;
    }
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
    if (unit < 2) return;
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

/* ---- small text helpers --------------------------------------------------- */

const char *cli_grouped(uint64_t x, char *buf, size_t cap)
{
    char tmp[32];
    int n = snprintf(tmp, sizeof tmp, "%llu", (unsigned long long)x), i, o = 0;
    for (i = 0; i < n && (size_t)o + 2 < cap; i++) {
        if (i > 0 && (n - i) % 3 == 0) buf[o++] = ',';
        buf[o++] = tmp[i];
    }
    buf[o] = '\0';
    return buf;
}

void sb_add(sbuf *b, const void *data, size_t n)
{
    if (b->oom) return;
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

void sb_str(sbuf *b, const char *s)
{
    sb_add(b, s, strlen(s));
}

void sb_char(sbuf *b, char c)
{
    sb_add(b, &c, 1);
}

void sb_free(sbuf *b)
{
    free(b->p);
    b->p = NULL;
    b->len = b->cap = 0;
}
