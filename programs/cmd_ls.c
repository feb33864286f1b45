/*
 * cmd_ls.c - `ckpt ls`: list the tensors of a checkpoint.
 */
#include "cli.h"

#include <string.h>

static const char usage[] =
    "Usage: ckpt ls [--json] [--key K] FILE\n"
    "List the tensors of a checkpoint, one per line in file order, under a\n"
    "header: NAME, DTYPE, SHAPE (e.g. [3, 4]; [] for a 0-d tensor) and\n"
    "STORAGE (<storage key>+<offset in elements>).  A tensor at the root of\n"
    "the file is listed as \"\".\n"
    "\n"
    "Options:\n"
    "  --json      print one JSON object on one line instead:\n"
    "              {\"format\", \"byteorder\", \"tensors\": [{\"name\", \"dtype\",\n"
    "              \"shape\", \"stride\", \"storage\", \"storage_offset\", \"nbytes\",\n"
    "              \"file_offset\"}, ...]} (file_offset null when the bytes are\n"
    "              compressed)\n"
    "  --key K     only what is under top-level key K (e.g. state_dict)\n"
    "  -h, --help  show this help\n";

/* "[3, 4]" into buf (always terminated; cut with "...]" if it does not fit). */
static size_t format_dims(char *buf, size_t cap, const int64_t *d, uint32_t n)
{
    size_t len = 0;
    uint32_t i;
    buf[len++] = '[';
    for (i = 0; i < n; i++) {
        int k = snprintf(buf + len, cap - len, "%s%lld", i ? ", " : "",
                         (long long)d[i]);
        if (k < 0 || (size_t)k >= cap - len - 1) {
            len = cap - 5;
            memcpy(buf + len, "...", 3);
            len += 3;
            break;
        }
        len += (size_t)k;
    }
    buf[len++] = ']';
    buf[len] = '\0';
    return len;
}

/* Display columns of a name: one per UTF-8 character. */
static size_t display_width(const char *s)
{
    size_t w = 0;
    if (s[0] == '\0')
        return 2; /* shown as "" */
    for (; *s; s++)
        if (((unsigned char)*s & 0xC0) != 0x80)
            w++;
    return w;
}

/* The name with control characters shown as '?' so a row stays one line. */
static void print_name(const char *s)
{
    if (s[0] == '\0') {
        fputs("\"\"", stdout);
        return;
    }
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        putchar(c < 0x20 || c == 0x7f ? '?' : c);
    }
}

static void pad(size_t n)
{
    while (n-- > 0)
        putchar(' ');
}

static void storage_text(const ckpt_file *f, const ckpt_tensor *t, char *buf,
                         size_t cap)
{
    const ckpt_storage *s = ckpt_storage_at(f, t->storage);
    snprintf(buf, cap, "%.200s+%lld", s && s->key ? s->key : "?",
             (long long)t->storage_offset);
}

#define DIMS_CAP 2048

static int list_table(const ckpt_file *f)
{
    size_t n = ckpt_tensor_count(f), i;
    size_t wname = 4, wdtype = 5, wshape = 5;
    char dims[DIMS_CAP], stor[256];

    for (i = 0; i < n; i++) {
        const ckpt_tensor *t = ckpt_tensor_at(f, i);
        size_t w;
        if (!t)
            continue;
        if ((w = display_width(t->name)) > wname)
            wname = w;
        if ((w = strlen(ckpt_dtype_name(t->dtype))) > wdtype)
            wdtype = w;
        if ((w = format_dims(dims, sizeof dims, t->shape, t->ndim)) > wshape)
            wshape = w;
    }
    fputs("NAME", stdout);
    pad(wname - 4 + 2);
    fputs("DTYPE", stdout);
    pad(wdtype - 5 + 2);
    fputs("SHAPE", stdout);
    pad(wshape - 5 + 2);
    fputs("STORAGE\n", stdout);
    for (i = 0; i < n; i++) {
        const ckpt_tensor *t = ckpt_tensor_at(f, i);
        const char *dt;
        size_t w;
        if (!t)
            continue;
        print_name(t->name);
        pad(wname - display_width(t->name) + 2);
        dt = ckpt_dtype_name(t->dtype);
        fputs(dt, stdout);
        pad(wdtype - strlen(dt) + 2);
        w = format_dims(dims, sizeof dims, t->shape, t->ndim);
        fputs(dims, stdout);
        pad(wshape - w + 2);
        storage_text(f, t, stor, sizeof stor);
        fputs(stor, stdout);
        putchar('\n');
        if ((i & 4095) == 0 && cli_stdout_failed())
            return CLI_FAIL;
    }
    return CLI_OK;
}

/* Decimal without printf: listing 100k tensors spends its time here. */
static void put_u64(uint64_t v)
{
    char buf[24];
    size_t n = sizeof buf;
    do {
        buf[--n] = (char)('0' + v % 10);
        v /= 10;
    } while (v);
    fwrite(buf + n, 1, sizeof buf - n, stdout);
}

static void put_i64(int64_t v)
{
    if (v < 0) {
        putchar('-');
        put_u64((uint64_t)0 - (uint64_t)v);
    } else {
        put_u64((uint64_t)v);
    }
}

static void json_dims(const int64_t *d, uint32_t n)
{
    uint32_t i;
    putchar('[');
    for (i = 0; i < n; i++) {
        if (i)
            fputs(", ", stdout);
        put_i64(d[i]);
    }
    putchar(']');
}

static int list_json(const ckpt_file *f)
{
    ckpt_info info;
    size_t n, i;
    ckpt_get_info(f, &info);
    n = ckpt_tensor_count(f);
    printf("{\"format\": \"%s\", \"byteorder\": \"%s\", \"tensors\": [",
           ckpt_format_name(info.format),
           info.byteorder == CKPT_BIG ? "big" : "little");
    for (i = 0; i < n; i++) {
        const ckpt_tensor *t = ckpt_tensor_at(f, i);
        if (!t)
            continue;
        fputs(i ? ", {\"name\": " : "{\"name\": ", stdout);
        cli_json_string(stdout, t->name, strlen(t->name));
        fputs(", \"dtype\": \"", stdout);
        fputs(ckpt_dtype_name(t->dtype), stdout);
        fputs("\", \"shape\": ", stdout);
        json_dims(t->shape, t->ndim);
        fputs(", \"stride\": ", stdout);
        json_dims(t->stride, t->ndim);
        fputs(", \"storage\": ", stdout);
        put_u64(t->storage);
        fputs(", \"storage_offset\": ", stdout);
        put_i64(t->storage_offset);
        fputs(", \"nbytes\": ", stdout);
        put_u64(t->nbytes);
        fputs(", \"file_offset\": ", stdout);
        if (t->file_offset >= 0) {
            put_i64(t->file_offset);
            putchar('}');
        } else {
            fputs("null}", stdout);
        }
        if ((i & 4095) == 0 && cli_stdout_failed())
            return CLI_FAIL;
    }
    fputs("]}\n", stdout);
    return CLI_OK;
}

int cmd_ls(int argc, char **argv)
{
    int json = 0, nops = 0, r;
    const char *key = NULL;
    char *ops[1];
    ckpt_file *f;
    const cli_option options[] = {
        {"--json", 0, 0, NULL, &json},
        {"--key", 0, 1, &key, NULL},
    };

    r = cli_parse(argc, argv, options, sizeof options / sizeof options[0], usage,
                  ops, 1, &nops);
    if (r != CLI_CONTINUE)
        return r;
    if (nops < 1)
        return cli_usage_error("ls: missing FILE");
    f = cli_open(ops[0], key);
    if (!f)
        return CLI_FAIL;
    r = json ? list_json(f) : list_table(f);
    ckpt_close(f);
    return r;
}
