/*
 * cmd_ls.c - `ckpt ls`: list the tensors of a checkpoint.
 */
#include "cli.h"

#include <stdlib.h>
#include <string.h>
#if defined(__GLIBC__)
#include <malloc.h>
#endif

/*
 * The listing is written through this buffer and reaches stdout in pieces
 * of 64 KiB: listing 100k tensors made ~30 stdio calls a tensor, and those
 * calls were a quarter of the time.  ob_flush() before anything else writes
 * to stdout keeps the order.
 */
#define OB_CAP (1u << 16)
static char ob_buf[OB_CAP];
static size_t ob_len;

static void ob_flush(void)
{
    if (ob_len) cli_stdout_write(ob_buf, ob_len);
    ob_len = 0;
}

static void ob_mem(const void *p, size_t n)
{
    if (n > OB_CAP - ob_len) {
        ob_flush();
        if (n > OB_CAP) {
            cli_stdout_write(p, n);
            return;
        }
    }
    memcpy(ob_buf + ob_len, p, n);
    ob_len += n;
}

static void ob_c(char c)
{
    if (ob_len == OB_CAP) ob_flush();
    ob_buf[ob_len++] = c;
}

static void ob_s(const char *s)
{
    ob_mem(s, strlen(s));
}

/* Every byte in 0x20-0x7f and neither x1 nor x2.  Eight bytes at a time: a
 * byte below 0x20 or from 0x80, or equal to x1 or x2, sets its top bit in
 * the mask. */
static int ascii_without(const char *s, size_t n, unsigned char x1, unsigned char x2)
{
    const uint64_t ones = 0x0101010101010101u, high = 0x8080808080808080u;
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        uint64_t x, p, q;
        memcpy(&x, s + i, 8);
        p = x ^ (ones * x1);
        q = x ^ (ones * x2);
        uint64_t low = ((x & ~high) + ones * (0x80 - 0x20)) ^ high; /* top bit: below 0x20 */
        if ((x | low | ((p - ones) & ~p) | ((q - ones) & ~q)) & high) return 0;
    }
    for (; i < n; i++) {
        unsigned char ch = (unsigned char)s[i];
        if (ch < 0x20 || ch >= 0x80 || ch == x1 || ch == x2) return 0;
    }
    return 1;
}

/* Bytes 0x20-0x7e but '\\': what ckpt_escape() (no flags) writes as they
 * are, one column each. */
static int term_plain(const char *s, size_t n)
{
    return ascii_without(s, n, '\\', 0x7f);
}

/* cli_term_put() into the buffer: the library's escaper, the same bytes. */
static void ob_term_n(const char *s, size_t n)
{
    size_t done = 0, c, len;
    if (term_plain(s, n)) {
        ob_mem(s, n);
        return;
    }
    while (done < n) {
        if (OB_CAP - ob_len < 1024) ob_flush();
        len = ckpt_escape(ob_buf + ob_len, 1024, s + done, n - done, (size_t)-1, 0, &c);
        ob_len += len;
        done += c;
        if (c == 0) break;
    }
}

static void ob_term(const char *s)
{
    ob_term_n(s, strlen(s));
}

/* Printable ASCII without '"', '\\' and DEL: what cli_json_string() copies
 * as it is, and valid UTF-8 (cli_json_name() adds no "_bytes" member). */
static int plain_ascii(const char *s, size_t n)
{
    return ascii_without(s, n, '"', '\\') && !memchr(s, 0x7f, n);
}

/* cli_json_string() into the buffer: names are nearly always plain ASCII,
 * copied; the others go through cli_json_string() itself. */
static void ob_json_string(const char *s, size_t n)
{
    if (!plain_ascii(s, n)) {
        ob_flush();
        cli_json_string(stdout, s, n);
        return;
    }
    ob_c('"');
    ob_mem(s, n);
    ob_c('"');
}

/* cli_json_name() into the buffer, the same way. */
static void ob_json_name(const char *field, const char *s, size_t n)
{
    if (!plain_ascii(s, n)) {
        ob_flush();
        cli_json_name(stdout, field, s, n);
        return;
    }
    ob_c('"');
    ob_s(field);
    ob_mem("\": \"", 4);
    ob_mem(s, n); /* plain: what ob_json_string() would copy, not checked again */
    ob_c('"');
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
    ob_mem(buf + n, sizeof buf - n);
}

/* Writers into reserved room: ob_room(n) makes n bytes free (n <= OB_CAP)
 * and gives where they start; ob_done() takes what was written. */
static char *ob_room(size_t n)
{
    if (n > OB_CAP - ob_len) ob_flush();
    return ob_buf + ob_len;
}

static void ob_done(const char *p)
{
    ob_len = (size_t)(p - ob_buf);
}

#define W_LIT(p, s) (memcpy((p), (s), sizeof(s) - 1), (p) + sizeof(s) - 1)

/* Decimal of v at p, two digits a step: at most 20 bytes.  Most numbers of
 * a listing (dimensions, strides, offsets 0) are below 100: written at once;
 * the others right to left from their last digit, found first. */
static char *w_u64(char *p, uint64_t v)
{
    static const char pairs[] =
        "00010203040506070809101112131415161718192021222324252627282930313233"
        "34353637383940414243444546474849505152535455565758596061626364656667"
        "6869707172737475767778798081828384858687888990919293949596979899";
    if (v < 10) {
        *p = (char)('0' + v);
        return p + 1;
    }
    if (v < 100) {
        memcpy(p, pairs + v * 2, 2);
        return p + 2;
    }
    static const uint64_t pow10[20] = {1ull,
                                       10ull,
                                       100ull,
                                       1000ull,
                                       10000ull,
                                       100000ull,
                                       1000000ull,
                                       10000000ull,
                                       100000000ull,
                                       1000000000ull,
                                       10000000000ull,
                                       100000000000ull,
                                       1000000000000ull,
                                       10000000000000ull,
                                       100000000000000ull,
                                       1000000000000000ull,
                                       10000000000000000ull,
                                       100000000000000000ull,
                                       1000000000000000000ull,
                                       10000000000000000000ull};
    /* digits: about bits * log10(2) (at most 19), one more when v reaches
     * that power */
    unsigned bits = 64u - (unsigned)__builtin_clzll(v);
    unsigned n = (bits * 1233u) >> 12;
    if (v >= pow10[n]) n++;
    char *end = p + n, *q = end;
    while (v >= 100) {
        q -= 2;
        memcpy(q, pairs + (v % 100) * 2, 2);
        v /= 100;
    }
    if (v >= 10) {
        q -= 2;
        memcpy(q, pairs + v * 2, 2);
    } else {
        *--q = (char)('0' + v);
    }
    return end;
}

static char *w_i64(char *p, int64_t v)
{
    if (v < 0) {
        *p++ = '-';
        return w_u64(p, (uint64_t)0 - (uint64_t)v);
    }
    return w_u64(p, (uint64_t)v);
}

/* "[3, 4]": at most 2 + 22 bytes an entry. */
static char *w_dims(char *p, const int64_t *d, uint32_t n)
{
    uint32_t i;
    *p++ = '[';
    for (i = 0; i < n; i++) {
        if (i) p = W_LIT(p, ", ");
        p = w_i64(p, d[i]);
    }
    *p++ = ']';
    return p;
}

static void put_i64(int64_t v)
{
    if (v < 0) {
        ob_c('-');
        put_u64((uint64_t)0 - (uint64_t)v);
    } else {
        put_u64((uint64_t)v);
    }
}

static const char usage[] =
    "Usage: ckpt ls [--json] [--key K] [--filter GLOB] FILE...\n"
    "List the tensors of a checkpoint, one per line in file order, under a\n"
    "header: NAME, DTYPE, SHAPE (e.g. [3, 4]; [] for a 0-d tensor), SIZE\n"
    "(bytes: 128 B, 4.0 KiB, ...) and STORAGE (<storage key>+<offset in\n"
    "elements>, or \"unreadable: WHY\" for a tensor ckpt lists but cannot\n"
    "read: a meta or nested tensor, ...).  A tensor at the root of the file is listed as \"\".  "
    "Names\n"
    "are shown escaped: \\\\, \\n, \\xHH for control characters and bytes that\n"
    "are not UTF-8, \\uXXXX for invisible or bidi characters.\n"
    "When the table would be empty (a key that holds no tensor, a filter\n"
    "that matches nothing, a TorchScript module without parameters or\n"
    "buffers) one line on stderr says so\n"
    "instead and the exit status is 0: the file was read (--json prints its\n"
    "empty list).\n"
    "Several files: each listing under a '==> FILE <==' header; with --json\n"
    "one object per line, each with a \"file\" field first.  A file that\n"
    "cannot be read is reported (with --json also as {\"file\", \"error\"})\n"
    "and the others are still listed; the exit status is the worst.\n"
    "\n"
    "Options:\n"
    "  --json      print one JSON object on one line instead:\n"
    "              {\"format\", \"byteorder\", \"tensors\": [{\"name\", \"dtype\",\n"
    "              \"shape\", \"stride\", \"storage\", \"storage_offset\", \"nbytes\",\n"
    "              \"file_offset\"}, ...]} (file_offset null when the bytes are\n"
    "              compressed; a name that is not UTF-8 also gets\n"
    "              \"name_bytes\": the base64 of its bytes; a checkpoint of\n"
    "              several files (a folder, an *.index.json) also gives\n"
    "              \"part\": the file holding the tensor; a tensor ckpt\n"
    "              cannot read: \"readable\": false, \"reason\" and storage\n"
    "              null; a sparse tensor's components (NAME.indices,\n"
    "              NAME.values, ...): \"layout\", \"component\", \"size\"\n"
    "              (the dense size); quantized: \"qscheme\" and \"scale\",\n"
    "              \"zero_point\" or \"axis\", \"scales\", \"zero_points\"; a\n"
    "              conj()/neg() view saved unresolved: \"conj\"/\"neg\": true)\n"
    "  --key K     only what is under key K (e.g. state_dict), names relative\n"
    "              to it; a K that is not a top-level key is a path of keys\n"
    "              (optimizer.state.0; at each level the longest run of\n"
    "              components that is a key is taken first, so a key with\n"
    "              dots is reached too); the same for every command.  K is\n"
    "              typed as names are shown (\\x00, \\u202e decoded)\n"
    "  --filter GLOB\n"
    "              only tensors whose name matches the shell pattern GLOB\n"
    "              (fnmatch: '*' also matches dots), or whose escaped form\n"
    "              (as listed: w\\x00evil) does, e.g. --filter '*.weight';\n"
    "              one pattern (given twice: the last)\n"
    "  -h, --help  show this help\n";

/* "[3, 4]" into buf (always terminated; cut with "...]" if it does not fit). */
static size_t format_dims(char *buf, size_t cap, const int64_t *d, uint32_t n)
{
    size_t len = 0;
    uint32_t i;
    buf[len++] = '[';
    for (i = 0; i < n; i++) {
        char piece[32]; /* ", " and the decimal, without snprintf (twice a tensor) */
        size_t p = sizeof piece, k;
        uint64_t v = d[i] < 0 ? (uint64_t)0 - (uint64_t)d[i] : (uint64_t)d[i];
        do {
            piece[--p] = (char)('0' + v % 10);
            v /= 10;
        } while (v);
        if (d[i] < 0) piece[--p] = '-';
        if (i) {
            piece[--p] = ' ';
            piece[--p] = ',';
        }
        k = sizeof piece - p;
        memcpy(buf + len, piece + p, k < cap - len - 1 ? k : cap - len - 1); /* as snprintf */
        if (k >= cap - len - 1) {
            len = cap - 5;
            memcpy(buf + len, "...", 3);
            len += 3;
            break;
        }
        len += k;
    }
    buf[len++] = ']';
    buf[len] = '\0';
    return len;
}

static void pad(size_t n)
{
    while (n-- > 0) ob_c(' ');
}

/* "<storage key>+<offset>", the key escaped; for a tensor ckpt cannot read
 * "unreadable: <why>". */
static void put_storage(const ckpt_file *f, const ckpt_tensor *t)
{
    const ckpt_storage *s = ckpt_storage_at(f, t->storage);
    if (!t->readable) {
        ob_s("unreadable: ");
        ob_term(t->unreadable ? t->unreadable : "no data");
        return;
    }
    if (!s) { /* held in the pickle itself: a numpy array */
        ob_s("(pickle)");
        return;
    }
    ob_term(s && s->key ? s->key : "?");
    ob_c('+');
    put_i64(t->storage_offset);
}

#define DIMS_CAP 2048

typedef struct ls_opts {
    int json, multi;
    const char *key, *filter;
    ckpt_options opt;
} ls_opts;

static int listed(const ls_opts *o, const ckpt_tensor *t)
{
    return t && cli_name_matches(o->filter, t->name, t->name_len);
}

static size_t name_width(const char *name, size_t n)
{
    if (!n) return 2; /* shown as "" */
    return term_plain(name, n) ? n : ckpt_escape_width(name, n, 0);
}

/* cli_human_size() without snprintf when the digits can be had exactly:
 * "%.1f" of x / 1024^k is the integer x * 10 / 1024^k rounded half to even
 * (x < 2^53: the double holds x, and dividing by 1024 is exact). */
static const char *human_size(uint64_t x, char *buf, size_t cap)
{
    static const char *const units[] = {"KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
    char *p = buf;
    double v;
    size_t u = 0;
    uint64_t q, r, half;
    if (cap < 32 || x >= ((uint64_t)1 << 53)) return cli_human_size(x, buf, cap);
    if (x < 1024) {
        p = w_u64(p, x);
        memcpy(p, " B", 3);
        return buf;
    }
    v = (double)x / 1024.0;
    while (v >= 1023.95 && u + 1 < sizeof units / sizeof units[0]) {
        v /= 1024.0;
        u++;
    }
    half = (uint64_t)1 << (10 * (u + 1) - 1); /* 1024^(u+1) / 2 */
    q = x * 10 >> (10 * (u + 1));
    r = x * 10 & (half * 2 - 1);
    if (r > half || (r == half && (q & 1))) q++;
    p = w_u64(p, q / 10);
    *p++ = '.';
    *p++ = (char)('0' + q % 10);
    *p++ = ' ';
    memcpy(p, units[u], 4);
    return buf;
}

static void print_name(const char *name, size_t n)
{
    if (n == 0)
        ob_s("\"\"");
    else
        ob_term_n(name, n);
}

static int list_table(const cli_doc *d, const ls_opts *o)
{
    const ckpt_file *f = d->f;
    size_t n = ckpt_tensor_count(f), i;
    size_t wname = 4, wdtype = 5, wshape = 5, wsize = 4;
    char dims[DIMS_CAP], size[32];

    for (i = 0; i < n; i++) {
        ckpt_tensor one, *t = &one; /* a copy: nothing kept per tensor */
        size_t w;
        if (ckpt_tensor_get(f, i, &one, NULL) != 0 || !listed(o, t)) continue;
        if ((w = name_width(t->name, t->name_len)) > wname) wname = w;
        if ((w = strlen(ckpt_dtype_name(t->dtype))) > wdtype) wdtype = w;
        if ((w = format_dims(dims, sizeof dims, t->shape, t->ndim)) > wshape) wshape = w;
        if ((w = strlen(human_size(t->nbytes, size, sizeof size))) > wsize) wsize = w;
    }
    ob_s("NAME");
    pad(wname - 4 + 2);
    ob_s("DTYPE");
    pad(wdtype - 5 + 2);
    ob_s("SHAPE");
    pad(wshape - 5 + 2 + wsize - 4);
    ob_s("SIZE  STORAGE\n");
    for (i = 0; i < n; i++) {
        ckpt_tensor one, *t = &one;
        const char *dt;
        size_t w;
        if (ckpt_tensor_get(f, i, &one, NULL) != 0 || !listed(o, t)) continue;
        print_name(t->name, t->name_len);
        pad(wname - name_width(t->name, t->name_len) + 2);
        dt = ckpt_dtype_name(t->dtype);
        ob_s(dt);
        pad(wdtype - strlen(dt) + 2);
        w = format_dims(dims, sizeof dims, t->shape, t->ndim);
        ob_s(dims);
        pad(wshape - w + 2);
        w = strlen(human_size(t->nbytes, size, sizeof size));
        pad(wsize - w);
        ob_s(size);
        pad(2);
        put_storage(f, t);
        ob_c('\n');
        if ((i & 4095) == 0) {
            ob_flush();
            if (cli_stdout_failed()) return CLI_FAIL;
        }
    }
    ob_flush();
    return CLI_OK;
}

static void json_dims(const int64_t *d, uint32_t n)
{
    uint32_t i;
    ob_c('[');
    for (i = 0; i < n; i++) {
        if (i) ob_s(", ");
        put_i64(d[i]);
    }
    ob_c(']');
}

static void json_double(double x)
{
    char buf[40];
    if (x != x || x - x != 0) { /* JSON has no nan/inf */
        ob_s("null");
        return;
    }
    ckpt_float_repr(x, buf);
    ob_s(buf);
}

static void json_doubles(const double *v, size_t n, int as_int)
{
    size_t i;
    ob_c('[');
    for (i = 0; i < n; i++) {
        if (i) ob_s(", ");
        if (as_int)
            put_i64((int64_t)v[i]);
        else
            json_double(v[i]);
    }
    ob_c(']');
}

/* The members of tensor kinds: unreadable, sparse components, quantized. */
static void json_kind(const ckpt_tensor *t)
{
    if (!t->readable) {
        ob_s(", \"readable\": false, \"reason\": ");
        ob_json_string(t->unreadable ? t->unreadable : "no data",
                       strlen(t->unreadable ? t->unreadable : "no data"));
    }
    if (t->layout != CKPT_LAYOUT_STRIDED) {
        ob_s(", \"layout\": \"");
        ob_s(ckpt_layout_name(t->layout));
        ob_c('"');
        if (t->component) {
            ob_s(", \"component\": \"");
            ob_s(t->component);
            ob_c('"');
        }
        ob_s(", \"size\": ");
        json_dims(t->dense_size, t->dense_ndim);
    }
    if (t->conj) ob_s(", \"conj\": true"); /* read resolves them */
    if (t->neg) ob_s(", \"neg\": true");
    if (t->qscheme == CKPT_QSCHEME_NONE) return;
    ob_s(", \"qscheme\": \"");
    ob_s(ckpt_qscheme_name(t->qscheme));
    ob_c('"');
    if (t->qscheme == CKPT_PER_TENSOR_AFFINE || t->qscheme == CKPT_PER_TENSOR_SYMMETRIC) {
        ob_s(", \"scale\": ");
        json_double(t->scale);
        ob_s(", \"zero_point\": ");
        put_i64(t->zero_point);
    } else {
        ob_s(", \"axis\": ");
        put_i64(t->axis);
        ob_s(", \"scales\": ");
        json_doubles(t->scales, t->nchannels, 0);
        ob_s(", \"zero_points\": ");
        json_doubles(t->zero_points, t->nchannels,
                     t->qscheme != CKPT_PER_CHANNEL_AFFINE_FLOAT_QPARAMS);
    }
}

/* The fixed members of a tensor piece by piece (a rank or dtype name too
 * long for the room list_json() makes). */
static void json_fixed(const ckpt_tensor *t, const char *dt)
{
    ob_s(", \"dtype\": \"");
    ob_s(dt);
    ob_s("\", \"shape\": ");
    json_dims(t->shape, t->ndim);
    ob_s(", \"stride\": ");
    json_dims(t->stride, t->ndim);
    ob_s(", \"storage\": ");
    if (t->storage == (size_t)-1)
        ob_s("null");
    else
        put_u64(t->storage);
    ob_s(", \"storage_offset\": ");
    put_i64(t->storage_offset);
    ob_s(", \"nbytes\": ");
    put_u64(t->nbytes);
    ob_s(", \"file_offset\": ");
    if (t->file_offset >= 0)
        put_i64(t->file_offset);
    else
        ob_s("null");
}

static int list_json(const cli_doc *d, const ls_opts *o, const char *path)
{
    const ckpt_file *f = d->f;
    ckpt_info info;
    size_t n, i;
    int first = 1;
    ckpt_get_info(f, &info);
    n = ckpt_tensor_count(f);
    if (o->multi) {
        ob_s("{\"file\": ");
        ob_json_string(path, strlen(path));
        ob_s(", ");
    } else {
        ob_c('{');
    }
    ob_s("\"format\": \"");
    ob_s(ckpt_format_name(info.format));
    ob_s(info.byteorder == CKPT_BIG ? "\", \"byteorder\": \"big\", \"tensors\": ["
                                    : "\", \"byteorder\": \"little\", \"tensors\": [");
    for (i = 0; i < n; i++) {
        ckpt_tensor one, *t = &one;
        const char *dt;
        size_t dn;
        char *p;
        if (ckpt_tensor_get(f, i, &one, NULL) != 0 || !listed(o, t)) continue;
        ob_s(first ? "{" : ", {");
        first = 0;
        ob_json_name("name", t->name, t->name_len);
        dt = ckpt_dtype_name(t->dtype);
        dn = strlen(dt);
        /* the fixed members written straight into the buffer: the
         * numbers bounded, room made once */
        if (dn > 64 || t->ndim > 512) { /* not a listing ckpt makes: the slow way */
            json_fixed(t, dt);
        } else {
            p = ob_room(320 + 2 * (size_t)t->ndim * 24); /* 248 + dims */
            p = W_LIT(p, ", \"dtype\": \"");
            memcpy(p, dt, dn);
            p += dn;
            p = W_LIT(p, "\", \"shape\": ");
            p = w_dims(p, t->shape, t->ndim);
            p = W_LIT(p, ", \"stride\": ");
            p = w_dims(p, t->stride, t->ndim);
            p = W_LIT(p, ", \"storage\": ");
            if (t->storage == (size_t)-1)
                p = W_LIT(p, "null");
            else
                p = w_u64(p, t->storage);
            p = W_LIT(p, ", \"storage_offset\": ");
            p = w_i64(p, t->storage_offset);
            p = W_LIT(p, ", \"nbytes\": ");
            p = w_u64(p, t->nbytes);
            p = W_LIT(p, ", \"file_offset\": ");
            if (t->file_offset >= 0)
                p = w_i64(p, t->file_offset);
            else
                p = W_LIT(p, "null");
            ob_done(p);
        }
        const char *part = ckpt_part_path(f, ckpt_tensor_part(f, t));
        if (part) {
            ob_s(", \"part\": ");
            ob_json_string(part, strlen(part));
        }
        json_kind(t);
        ob_c('}');
        if ((i & 4095) == 0) {
            ob_flush();
            if (cli_stdout_failed()) return CLI_FAIL;
        }
    }
    ob_s("]}\n");
    ob_flush();
    return CLI_OK;
}

/* Why nothing is listed, on stderr. */
static void say_empty(const cli_doc *d, const ls_opts *o, const char *path)
{
    ckpt_info info;
    sbuf b;
    size_t under = ckpt_tensor_count(d->f);
    memset(&b, 0, sizeof b);
    ckpt_get_info(d->f, &info);
    if (under > 0 && o->filter) {
        sb_str(&b, "no tensor name matches '");
        cli_escape(&b, o->filter, strlen(o->filter), (size_t)-1, 0);
        sb_str(&b, "'");
    } else if (info.format == CKPT_FORMAT_TORCHSCRIPT) {
        sb_str(&b, "no tensors (a TorchScript module without parameters or buffers)");
    } else if (o->key) {
        sb_str(&b, "no tensors under key '");
        cli_escape(&b, o->key, strlen(o->key), (size_t)-1, 0);
        sb_str(&b, "'");
    } else if (info.format == CKPT_FORMAT_PICKLE) {
        sb_str(&b, "no tensors (a plain pickle: 'ckpt show' prints its values)");
    } else {
        sb_str(&b, "no tensors");
    }
    cli_note(path, b.p && !b.oom ? b.p : "no tensors");
    sb_free(&b);
}

static int ls_one(const char *path, void *ctx)
{
    ls_opts *o = ctx;
    cli_doc d;
    ckpt_error err;
    size_t i, n, shown = 0;
    int r;
    if (cli_doc_open(&d, path, o->key, &o->opt, &err) != 0) {
        if (o->json && o->multi) cli_json_error_line(path, &err);
        return cli_report(path, &err);
    }
    n = ckpt_tensor_count(d.f);
    for (i = 0; i < n && shown == 0; i++) {
        ckpt_tensor one;
        if (ckpt_tensor_get(d.f, i, &one, NULL) == 0 && listed(o, &one)) shown++;
    }
    if (o->json) {
        r = list_json(&d, o, path);
    } else if (shown == 0) {
        say_empty(&d, o, path);
        r = CLI_OK;
    } else {
        r = list_table(&d, o);
    }
    cli_doc_close(&d);
    return r;
}

int cmd_ls(int argc, char **argv)
{
#ifdef M_MMAP_THRESHOLD
    /* glibc raises its mmap threshold each time a big block is freed, so the
     * tables of a big listing land on the heap and stay resident: fixed, the
     * listing of 100k tensors peaks 6.5 MiB lower.  Only for ls: cat and
     * convert free and take their multi-MiB buffers again and again, which
     * the raised threshold keeps cheap (fixed, `cat` of 1 GiB took twice the
     * system time). */
    mallopt(M_MMAP_THRESHOLD, 128 * 1024);
#endif
    int nops = 0, r;
    char **ops;
    ls_opts o;
    const cli_option options[] = {
        {"--json", 0, 0, NULL, &o.json},
        {"--key", 0, 1, &o.key, NULL},
        {"--filter", 0, 1, &o.filter, NULL},
    };

    memset(&o, 0, sizeof o);
    r = cli_parse_files(argc, argv, options, sizeof options / sizeof options[0], usage, &ops,
                        &nops);
    if (r == CLI_CONTINUE) {
        cli_options(&o.opt);
        o.multi = nops > 1;
        r = cli_batch(ops, nops, o.json, ls_one, &o);
    }
    free(ops);
    return r;
}
