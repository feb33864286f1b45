/*
 * safetensors.c - a checkpoint's tensors as a safetensors file
 * (include/ckpt_export.h): the engine behind `ckpt convert`.
 *
 * Built only on the public API (ckpt.h).  The output is built in three steps:
 *   1. every tensor is named, typed and given its place in the data section
 *      (file order; views and shared storages each get their own bytes);
 *   2. the JSON header is built in memory (metadata: the source format and
 *      the scalar configuration values found next to the tensors);
 *   3. the bytes are streamed tensor by tensor.  A tensor whose bytes lie in
 *      the source file exactly as safetensors wants them (contiguous, stored
 *      uncompressed, little-endian or one byte per element), when the caller
 *      gave the source's descriptor (src_fd), is copied by the kernel when
 *      it is large (copy_file_range, else sendfile, else pread/pwrite
 *      through 1 MiB of the buffer), or gathered with pread into the 8 MiB
 *      buffer when it is small; any other tensor is read through
 *      ckpt_tensor_read_range() into that same buffer.  Memory stays
 *      bounded whatever the file size.
 * For a ZIP, the CRC-32 of every record a written tensor comes from is
 * checked while the copy goes on (see crc_job), before the export returns;
 * the records are found through ckpt_storage_record(), never by parsing the
 * ZIP here.
 */
#ifndef _FILE_OFFSET_BITS
#define _FILE_OFFSET_BITS 64
#endif
#if defined(__linux__) && !defined(_GNU_SOURCE)
#define _GNU_SOURCE /* fallocate, sync_file_range, copy_file_range */
#endif
#define CKPT_BUILDING 1 /* export the CKPT_API functions */
#include "ckpt_export.h"
#include "ckpt_text.h"
#include "tools.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#ifdef __linux__
#include <sys/sendfile.h>
#include <sys/syscall.h>
#endif

/* The reference reader (the Rust `safetensors` crate) refuses bigger headers. */
#define ST_MAX_HEADER 100000000u
/* The data starts at a multiple of this (8 + N is padded to it). */
#define ST_ALIGN 8u

/* One buffer of STAGE_CAP bytes holds the bytes read for tensors that need
 * the library (up to 8 MiB at a time: fewer restarts of a deflated record,
 * fewer passes over a strided one) and gathers small tensors, written out
 * once STAGE_FLUSH bytes are in.  Tensors of DIRECT_MIN bytes or more that
 * lie in the source as they are copied by the kernel, KERNEL_CHUNK bytes a
 * call, or, where it cannot, through COPY_CHUNK bytes of the buffer (a piece
 * that stays in the CPU cache between the read and the write). */
#define STAGE_CAP ((size_t)8 << 20)
#define STAGE_FLUSH ((size_t)1 << 20)
#define DIRECT_MIN ((uint64_t)1 << 20)
#define COPY_CHUNK ((size_t)1 << 20)
#define KERNEL_CHUNK ((uint64_t)16 << 20)
#define WRITE_BEHIND ((uint64_t)8 << 20)
#define META_MAX_ENTRIES 1000
#define META_MAX_TEXT 1024 /* bytes of a metadata key or value */
#define META_MAX_DEPTH 1000
#define NAMES_SHOWN 8 /* tensors named in the unsupported-dtype message */
/* A record this small is checked at once when planned (one read). */
#define SMALL_RECORD ((uint64_t)64 << 10)
#define MSG_MAX 255 /* what a ckpt_error message holds */

/* ------------------------------------------------------------------------ */
/* Text                                                                       */
/* ------------------------------------------------------------------------ */

/* A growing text buffer; oom is set (and stays) when an allocation fails. */
typedef struct sbuf {
    char *p;
    size_t len, cap;
    int oom;
} sbuf;

static void sb_add(sbuf *b, const void *data, size_t n)
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

static void sb_str(sbuf *b, const char *s)
{
    sb_add(b, s, strlen(s));
}
static void sb_char(sbuf *b, char c)
{
    sb_add(b, &c, 1);
}
static void sb_free(sbuf *b)
{
    free(b->p);
    memset(b, 0, sizeof *b);
}

static void sb_u64(sbuf *b, uint64_t x)
{
    char tmp[24];
    int n = snprintf(tmp, sizeof tmp, "%llu", (unsigned long long)x);
    sb_add(b, tmp, (size_t)n);
}

static void sb_i64(sbuf *b, int64_t x)
{
    char tmp[24];
    int n = snprintf(tmp, sizeof tmp, "%lld", (long long)x);
    sb_add(b, tmp, (size_t)n);
}

/* Length of the valid UTF-8 sequence at s[0..n), or 0 if it is not one. */
static size_t utf8_seq(const unsigned char *s, size_t n)
{
    unsigned c = s[0];
    if (c < 0x80) return 1;
    if (c >= 0xC2 && c <= 0xDF) return (n >= 2 && (s[1] & 0xC0) == 0x80) ? 2 : 0;
    if (c >= 0xE0 && c <= 0xEF) {
        unsigned lo = c == 0xE0 ? 0xA0 : 0x80, hi = c == 0xED ? 0x9F : 0xBF;
        if (n < 3 || s[1] < lo || s[1] > hi || (s[2] & 0xC0) != 0x80) return 0;
        return 3;
    }
    if (c >= 0xF0 && c <= 0xF4) {
        unsigned lo = c == 0xF0 ? 0x90 : 0x80, hi = c == 0xF4 ? 0x8F : 0xBF;
        if (n < 4 || s[1] < lo || s[1] > hi || (s[2] & 0xC0) != 0x80 || (s[3] & 0xC0) != 0x80)
            return 0;
        return 4;
    }
    return 0;
}

/* Nonzero when s[0..n) is valid UTF-8 throughout. */
static int is_utf8(const char *str, size_t n)
{
    const unsigned char *s = (const unsigned char *)str;
    size_t i = 0;
    while (i < n) {
        size_t k = s[i] < 0x80 ? 1 : utf8_seq(s + i, n - i);
        if (k == 0) return 0;
        i += k;
    }
    return 1;
}

/* Append s[0..n) made valid UTF-8: valid sequences are kept, every other
 * byte becomes the character U+00XX (the byte read as latin-1). */
static void put_utf8(sbuf *b, const char *str, size_t n)
{
    const unsigned char *s = (const unsigned char *)str;
    size_t i = 0, run = 0;
    while (i < n) {
        size_t k;
        char two[2];
        if (s[i] < 0x80) {
            i++;
            continue;
        }
        if ((k = utf8_seq(s + i, n - i)) > 0) {
            i += k;
            continue;
        }
        sb_add(b, str + run, i - run);
        two[0] = (char)(0xC0 | (s[i] >> 6));
        two[1] = (char)(0x80 | (s[i] & 0x3F));
        sb_add(b, two, 2);
        i++;
        run = i;
    }
    sb_add(b, str + run, n - run);
}

/* Append s[0..n), valid UTF-8, as a JSON string with quotes. */
static void put_json_string(sbuf *b, const char *str, size_t n)
{
    const unsigned char *s = (const unsigned char *)str;
    size_t i, run = 0;
    char tmp[8];
    sb_char(b, '"');
    for (i = 0; i < n; i++) {
        unsigned c = s[i];
        const char *esc;
        if (c >= 0x20 && c != '"' && c != '\\') continue;
        sb_add(b, str + run, i - run);
        switch (c) {
        case '"': esc = "\\\""; break;
        case '\\': esc = "\\\\"; break;
        case '\n': esc = "\\n"; break;
        case '\r': esc = "\\r"; break;
        case '\t': esc = "\\t"; break;
        case '\b': esc = "\\b"; break;
        case '\f': esc = "\\f"; break;
        default:
            snprintf(tmp, sizeof tmp, "\\u%04x", c);
            esc = tmp;
            break;
        }
        sb_str(b, esc);
        run = i + 1;
    }
    sb_add(b, str + run, n - run);
    sb_char(b, '"');
}

/* A name from the file for a message: valid UTF-8 is kept; control
 * characters, bytes that are not UTF-8, quotes and backslashes are written
 * as \xNN, so the message says exactly which bytes the name holds (quotes
 * kept when `quotes`: text that is not quoted).  Cut after 120 bytes. */
static void put_escaped_text(sbuf *b, const char *str, size_t n, int quotes)
{
    const unsigned char *s = (const unsigned char *)str;
    size_t i = 0;
    char tmp[8];
    while (i < n) {
        size_t k = s[i] >= 0x80 ? utf8_seq(s + i, n - i) : 1;
        if (i >= 120) {
            sb_str(b, "...");
            break;
        }
        if (k == 0 || s[i] < 0x20 || s[i] == 0x7f || s[i] == '\\' || (s[i] == '\'' && !quotes)) {
            snprintf(tmp, sizeof tmp, "\\x%02x", s[i]);
            sb_str(b, tmp);
            i++;
            continue;
        }
        sb_add(b, s + i, k);
        i += k;
    }
}

static void put_escaped(sbuf *b, const char *str)
{
    put_escaped_text(b, str, strlen(str), 0);
}

/* A tensor's name str[0..n) (it may hold NUL bytes), quoted. */
static void put_shown_name(sbuf *b, const char *str, size_t n)
{
    sb_char(b, '\'');
    put_escaped_text(b, str, n, 0);
    sb_char(b, '\'');
}

/* ------------------------------------------------------------------------ */
/* Sets                                                                       */
/* ------------------------------------------------------------------------ */

/* A set of byte strings (not copied: they must outlive the set), or of
 * pointers. */
typedef struct strset {
    const char **keys;
    size_t *lens;
    size_t cap, count;
    int ptrs; /* keys are compared by address */
} strset;

static size_t str_hash(const char *s, size_t n)
{
    uint64_t h = 0xcbf29ce484222325ULL;
    size_t i;
    for (i = 0; i < n; i++) {
        h ^= (unsigned char)s[i];
        h *= 0x100000001b3ULL;
    }
    h ^= h >> 29;
    return (size_t)h;
}

static size_t key_hash(const strset *s, const char *key, size_t n)
{
    if (s->ptrs) {
        uint64_t h = (uint64_t)(uintptr_t)key * 0x9E3779B97F4A7C15ULL;
        return (size_t)(h ^ (h >> 32));
    }
    return str_hash(key, n);
}

static int set_grow(strset *s)
{
    size_t cap = s->cap ? s->cap * 2 : 256, i, j, mask = cap - 1;
    const char **keys = calloc(cap, sizeof *keys);
    size_t *lens = calloc(cap, sizeof *lens);
    if (!keys || !lens) {
        free(keys);
        free(lens);
        return -1;
    }
    for (j = 0; j < s->cap; j++) {
        if (!s->keys[j]) continue;
        for (i = key_hash(s, s->keys[j], s->lens[j]) & mask; keys[i] != NULL; i = (i + 1) & mask)
            ;
        keys[i] = s->keys[j];
        lens[i] = s->lens[j];
    }
    free(s->keys);
    free(s->lens);
    s->keys = keys;
    s->lens = lens;
    s->cap = cap;
    return 0;
}

/* 1 if key[0..n) (or the pointer key) was added, 0 if it was there, -1 out
 * of memory. */
static int set_add(strset *s, const char *key, size_t n)
{
    size_t i, mask;
    if ((s->count + 1) * 2 > s->cap && set_grow(s) != 0) return -1;
    mask = s->cap - 1;
    for (i = key_hash(s, key, n) & mask; s->keys[i] != NULL; i = (i + 1) & mask)
        if (s->ptrs ? s->keys[i] == key : s->lens[i] == n && memcmp(s->keys[i], key, n) == 0)
            return 0;
    s->keys[i] = key;
    s->lens[i] = n;
    s->count++;
    return 1;
}

static void set_free(strset *s)
{
    free(s->keys);
    free(s->lens);
    s->keys = NULL;
    s->lens = NULL;
    s->cap = s->count = 0;
}

/* ------------------------------------------------------------------------ */
/* Options, dtypes                                                            */
/* ------------------------------------------------------------------------ */

void ckpt_export_options_init_sized(ckpt_export_options *opt, size_t struct_size)
{
    ckpt_export_options d; /* a whole current layout; the caller's part goes back */
    memset(&d, 0, sizeof d);
    d.struct_size = struct_size < sizeof d ? struct_size : sizeof d;
    d.verify = 1;
    d.metadata = 1;
    d.src_fd = -1;
    if (opt) memcpy(opt, &d, d.struct_size);
}

const char *ckpt_safetensors_dtype(ckpt_dtype dtype)
{
    switch (dtype) {
    case CKPT_FLOAT64: return "F64";
    case CKPT_FLOAT32: return "F32";
    case CKPT_FLOAT16: return "F16";
    case CKPT_BFLOAT16: return "BF16";
    case CKPT_INT64: return "I64";
    case CKPT_INT32: return "I32";
    case CKPT_INT16: return "I16";
    case CKPT_INT8: return "I8";
    case CKPT_UINT8: return "U8";
    case CKPT_BOOL: return "BOOL";
    case CKPT_UINT16: return "U16";
    case CKPT_UINT32: return "U32";
    case CKPT_UINT64: return "U64";
    case CKPT_FLOAT8_E4M3FN: return "F8_E4M3";
    case CKPT_FLOAT8_E5M2: return "F8_E5M2";
    case CKPT_COMPLEX64: return "C64"; /* two little-endian float32: real, imaginary */
    default:
        return NULL; /* complex128 and complex32, float8 fnuz and e8m0, and dtypes newer
                        than this file */
    }
}

/* ------------------------------------------------------------------------ */
/* The exporter                                                               */
/* ------------------------------------------------------------------------ */

typedef struct meta_entry {
    char *key, *val; /* valid UTF-8 */
    size_t klen, vlen;
} meta_entry;

/* A stored ZIP record whose CRC-32 is checked: its bytes in the source, the
 * CRC it records, and the first tensor that uses it (for the message). */
typedef struct crc_rec {
    uint64_t off, size;
    uint32_t crc;
    const char *tensor; /* its name, tensor_len bytes */
    size_t tensor_len;
    const char *name; /* the record's name */
    int checked;      /* small: already checked while planned */
    int streamed;     /* checked by the copy of the tensor that is all of it */
    uint32_t computed;
} crc_rec;

/* The records to check.  A big tensor that is all of its record is checked
 * by its own copy, read + CRC + write through 1 MiB of the buffer instead
 * of copy_file_range (streamed).  The other records (views, shared
 * storages, records of 64 KiB to 1 MiB) are read by a second thread while
 * the main one copies, and by the main one too once its copy is done.
 * Records of at most 64 KiB are checked when planned.  (Measured on 1 GiB,
 * see bench/README.md: with the carry-less CRC, read + CRC + write costs
 * about the CPU of copy_file_range alone; the kernel copy plus a second
 * read on the thread costs 1.6x that.) */
typedef struct crc_job {
    int fd;
    crc_rec *recs;
    size_t n;
    atomic_size_t next; /* the next record to check */
    atomic_int stop;    /* main thread: give up (it failed) */
    atomic_int fail;    /* 0, or 2 mismatch, 3 read error (the first) */
    size_t bad;         /* the record that failed */
    uint32_t computed;
    int err; /* errno of a failed read (0: the file ended) */
    int threaded;
    pthread_t thread;
} crc_job;

enum { ST_COPY_RANGE = 0, ST_COPY_SENDFILE = 1, ST_COPY_RW = 2 };

/* A plan is the whole exporter: what to write, the checks planned, and
 * the state of the one write it serves. */
struct ckpt_safetensors_plan {
    const ckpt_file *f;
    ckpt_export_options o; /* the caller's, over the defaults */
    ckpt_info info;
    ckpt_error *err;
    int origin; /* CKPT_EXPORT_FROM_* of err */
    const char *out_name;

    ckpt_safetensors_entry *ents;
    size_t n;
    size_t *check; /* per entry: 1 + the crc_rec its copy checks, or 0 */
    sbuf header;   /* length, JSON, padding */
    uint64_t data_size;
    int written; /* a plan is written once */
    strset names;
    meta_entry *meta;
    size_t nmeta, meta_cap;
    size_t nconfig;   /* config entries among meta */
    int meta_dropped; /* some config value was left out */
    strset meta_keys;

    /* writing */
    int src_fd, out_fd;
    int stream;          /* writes only go forward, in order (not seekable) */
    uint64_t stream_pos; /* bytes written so far when streaming */
    ckpt_write_fn wfn;   /* the _to form: every write goes here */
    void *wctx;
    unsigned char *stage;
    size_t stage_cap, stage_len;
    uint64_t stage_off; /* output offset of stage[0] */
    uint64_t wb_from;   /* the output is handed to write-back up to here */
    int copy_mode;      /* ST_COPY_RANGE, then ST_COPY_SENDFILE, then ST_COPY_RW */
    int big_host;
    uint64_t done;       /* tensor bytes written (progress) */
    crc_job *job;        /* the records to check, while the copy goes on */
    unsigned char *pbuf; /* small records, read to be checked when planned */
    size_t pbuf_cap;
};
typedef struct ckpt_safetensors_plan exporter;

/* ---- messages ------------------------------------------------------------ */

/* Fill the error (the first one wins) and return -1. */
static int fail_at(exporter *x, int origin, ckpt_code code, int64_t offset, const char *fmt, ...)
{
    va_list ap;
    if (x->err && x->err->code == CKPT_OK) {
        x->err->code = code;
        x->err->offset = offset;
        va_start(ap, fmt);
        vsnprintf(x->err->message, sizeof x->err->message, fmt, ap);
        va_end(ap);
    }
    x->origin = origin;
    return -1;
}

#define fail(x, code, ...) fail_at((x), CKPT_EXPORT_FROM_EXPORT, (code), -1, __VA_ARGS__)

static int nomem(exporter *x)
{
    return fail(x, CKPT_E_NOMEM, "out of memory");
}

/* A failed read of the source (e 0: it ended early). */
static int src_error(exporter *x, int e)
{
    if (e == 0)
        return fail(x, CKPT_E_IO, "the file ends early (was it changed while being converted?)");
    return fail(x, CKPT_E_IO, "read error: %s", strerror(e));
}

static int out_error(exporter *x, int e)
{
    const char *why = strerror(e != 0 ? e : EIO);
    if (x->out_name[0] == '\0')
        return fail_at(x, CKPT_EXPORT_FROM_OUTPUT, CKPT_E_IO, -1, "%s", why);
    return fail_at(x, CKPT_EXPORT_FROM_OUTPUT, CKPT_E_IO, -1, "%s: %s", x->out_name, why);
}

/* What the reader said, passed on. */
static int lib_error(exporter *x, const ckpt_error *e)
{
    if (x->err && x->err->code == CKPT_OK) *x->err = *e;
    x->origin = CKPT_EXPORT_FROM_READER;
    return -1;
}

static void warn(exporter *x, const char *fmt, ...)
{
    va_list ap;
    char small[512], *line = small;
    int n;
    if (!x->o.warning) return;
    va_start(ap, fmt);
    n = vsnprintf(small, sizeof small, fmt, ap);
    va_end(ap);
    if (n < 0) return;
    if ((size_t)n >= sizeof small) {
        line = malloc((size_t)n + 1);
        if (!line) return;
        va_start(ap, fmt);
        vsnprintf(line, (size_t)n + 1, fmt, ap);
        va_end(ap);
    }
    x->o.warning(x->o.ctx, line);
    if (line != small) free(line);
}

static void advance(exporter *x, uint64_t n)
{
    x->done += n;
    if (x->o.progress) x->o.progress(x->o.ctx, x->done, x->data_size);
}

/* ---- reading and writing files ------------------------------------------ */

/* 0, or -1 with errno set (0 when the file ended early). */
static int pread_full(int fd, void *buf, size_t n, uint64_t off)
{
    unsigned char *p = buf;
    while (n > 0) {
        size_t chunk = n > ((size_t)1 << 30) ? ((size_t)1 << 30) : n;
        ssize_t r = pread(fd, p, chunk, (off_t)off);
        if (r < 0) {
            if (errno == EINTR) continue;
            return -1;
        }
        if (r == 0) {
            errno = 0;
            return -1;
        }
        p += r;
        off += (uint64_t)r;
        n -= (size_t)r;
    }
    return 0;
}

/* Write buf to the output at pos: pwrite, or, streaming, write() (or the
 * caller's write) at the current end (every write goes forward, so pos is
 * the end).  0, or -1 with errno set. */
static int out_write(exporter *x, const void *buf, size_t n, uint64_t pos)
{
    const unsigned char *p = buf;
    if (x->stream && pos != x->stream_pos) {
        errno = ESPIPE;
        return -1;
    }
    if (x->wfn) {
        if (n > 0 && x->wfn(x->wctx, buf, n) != 0) {
            errno = 0;
            return -1;
        }
        x->stream_pos += n;
        return 0;
    }
    while (n > 0) {
        size_t chunk = n > ((size_t)1 << 30) ? ((size_t)1 << 30) : n;
        ssize_t r =
            x->stream ? write(x->out_fd, p, chunk) : pwrite(x->out_fd, p, chunk, (off_t)pos);
        if (r < 0) {
            if (errno == EINTR) continue;
            return -1;
        }
        if (r == 0) {
            errno = EIO;
            return -1;
        }
        p += r;
        n -= (size_t)r;
        pos += (uint64_t)r;
        if (x->stream) x->stream_pos += (uint64_t)r;
    }
    return 0;
}

/* A failed out_write(). */
static int write_error(exporter *x, int e)
{
    if (x->wfn)
        return fail_at(x, CKPT_EXPORT_FROM_OUTPUT, CKPT_E_IO, -1, "%s%sthe write callback failed",
                       x->out_name, x->out_name[0] ? ": " : "");
    return out_error(x, e);
}

/* Reserve the output's blocks up front: a full disk fails now rather than
 * after gigabytes were copied, and the file gets few extents. */
static int reserve(exporter *x, uint64_t size)
{
#ifdef __linux__
    if (size > 0 && !x->stream && !x->wfn && fallocate(x->out_fd, 0, 0, (off_t)size) != 0) {
        int e = errno;
        if (e == ENOSPC || e == EDQUOT || e == EFBIG) return out_error(x, e);
        /* not supported here: the writes allocate as they go */
    }
#else
    (void)x;
    (void)size;
#endif
    return 0;
}

/* Called after every write, which all go forward: once 8 MiB more are
 * written, start writing them to disk, so that a later fsync has little
 * left to wait for and dirty pages stay few. */
static void write_behind(exporter *x, uint64_t end, int last)
{
    if (!x->o.write_behind || x->wfn || end <= x->wb_from ||
        (end - x->wb_from < WRITE_BEHIND && !last))
        return;
#ifdef __linux__
    sync_file_range(x->out_fd, (off_t)x->wb_from, (off_t)(end - x->wb_from), SYNC_FILE_RANGE_WRITE);
#endif
    x->wb_from = end;
}

static int stage_flush(exporter *x)
{
    if (x->stage_len == 0) return 0;
    if (out_write(x, x->stage, x->stage_len, x->stage_off) != 0) return write_error(x, errno);
    x->stage_off += x->stage_len;
    x->stage_len = 0;
    write_behind(x, x->stage_off, 0);
    return 0;
}

static int stage_alloc(exporter *x)
{
    size_t cap = STAGE_CAP;
    if (x->stage) return 0;
    if (x->data_size < cap) cap = x->data_size < 4096 ? 4096 : (size_t)x->data_size;
    x->stage = malloc(cap);
    if (!x->stage) return nomem(x);
    x->stage_cap = cap;
    return 0;
}

/* Copy n bytes at `off` of the source to `pos` of the output in COPY_CHUNK
 * pieces: the piece stays in the CPU cache between the read and the write.
 * With crc, the CRC-32 of the bytes copied is carried on into *crc. */
static int copy_rw(exporter *x, uint64_t off, uint64_t pos, uint64_t n, uint32_t *crc)
{
    size_t chunk;
    if (stage_alloc(x) != 0) return -1;
    chunk = x->stage_cap < COPY_CHUNK ? x->stage_cap : COPY_CHUNK;
    while (n > 0) {
        size_t k = n < chunk ? (size_t)n : chunk;
        if (pread_full(x->src_fd, x->stage, k, off) != 0) return src_error(x, errno);
        if (crc) *crc = ckpt_crc32(*crc, x->stage, k);
        if (out_write(x, x->stage, k, pos) != 0) return write_error(x, errno);
        off += k;
        pos += k;
        n -= k;
        write_behind(x, pos, 0);
        advance(x, k);
    }
    return 0;
}

/* Copy n bytes at `off` of the source to `pos` of the output inside the
 * kernel (copy_file_range: no copy through this process; on NFS, SMB or
 * Ceph the server copies), else sendfile, else through the buffer. */
static int copy_direct(exporter *x, uint64_t off, uint64_t pos, uint64_t n)
{
#ifdef __linux__
    while (n > 0 && x->copy_mode != ST_COPY_RW) {
        size_t k = n < KERNEL_CHUNK ? (size_t)n : (size_t)KERNEL_CHUNK;
        ssize_t r = -1;
        int e;
        if (x->copy_mode == ST_COPY_RANGE) {
#ifdef SYS_copy_file_range
            int64_t oi = (int64_t)off, oo = (int64_t)pos;
            r = (ssize_t)syscall(SYS_copy_file_range, x->src_fd, &oi, x->out_fd, &oo, k, 0u);
#else
            errno = ENOSYS;
#endif
        } else {
            off_t oi = (off_t)off;
            if (x->stream ? pos == x->stream_pos : lseek(x->out_fd, (off_t)pos, SEEK_SET) >= 0)
                r = sendfile(x->out_fd, x->src_fd, &oi, k);
        }
        if (r > 0) {
            if (x->stream) x->stream_pos += (uint64_t)r;
            off += (uint64_t)r;
            pos += (uint64_t)r;
            n -= (uint64_t)r;
            write_behind(x, pos, 0);
            advance(x, (uint64_t)r);
            continue;
        }
        if (r == 0) return src_error(x, 0);
        e = errno;
        if (e == EINTR || e == EAGAIN) continue;
        if (e == ENOSPC || e == EDQUOT || e == EFBIG || e == EIO) return out_error(x, e);
        x->copy_mode++; /* not for this pair of files: the next way */
    }
#endif
    return n > 0 ? copy_rw(x, off, pos, n, NULL) : 0;
}

/* ---- checking the CRC-32 of ZIP records --------------------------------- */

/* The record holding storage si, through ckpt_storage_record(): 0 with rec
 * filled, 1 when it records no CRC, 2 when it is not a stored record whose
 * bytes start where the storage's do (the caller then has the library
 * verify the file), -1 after a read error of a small record (reported).  A
 * small record is read and its CRC computed at once (rec->checked). */
static int find_record(exporter *x, size_t si, const ckpt_storage *s, crc_rec *rec)
{
    ckpt_record r;
    ckpt_error e;
    unsigned char *buf;

    memset(&e, 0, sizeof e);
    if (ckpt_storage_record(x->f, si, &r, &e) != 0 || r.method != 0 ||
        r.data_offset != (uint64_t)s->file_offset || r.size < s->nbytes ||
        r.data_offset > x->info.file_size || r.size > x->info.file_size - r.data_offset)
        return 2;
    rec->off = r.data_offset;
    rec->size = r.size;
    rec->crc = r.crc32;
    rec->name = r.name;
    if (!r.has_crc) return 1;
    if (r.size > SMALL_RECORD) return 0;
    if (x->pbuf_cap < r.size) { /* one buffer for every small record */
        buf = realloc(x->pbuf, (size_t)SMALL_RECORD);
        if (!buf) return nomem(x);
        x->pbuf = buf;
        x->pbuf_cap = (size_t)SMALL_RECORD;
    }
    if (pread_full(x->src_fd, x->pbuf, (size_t)r.size, r.data_offset) != 0)
        return src_error(x, errno);
    rec->computed = ckpt_crc32(0, x->pbuf, (size_t)r.size);
    rec->checked = 1;
    return 0;
}

/* Record the first failure (2 mismatch, 3 read error); later ones lose. */
static void crc_claim(crc_job *j, int what, size_t i, uint32_t crc, int e)
{
    int expected = 0;
    if (atomic_compare_exchange_strong(&j->fail, &expected, what)) {
        j->bad = i;
        j->computed = crc;
        j->err = e;
    }
}

/* CRC the records not taken yet, one at a time, through a 1 MiB buffer:
 * run by the worker during the copy and by the main thread after it, so
 * that the two share what is left. */
static void crc_records(crc_job *j)
{
    size_t cap = (size_t)1 << 20;
    unsigned char *buf = malloc(cap);
    if (!buf) {
        crc_claim(j, 3, 0, 0, ENOMEM);
        return;
    }
    for (;;) {
        size_t i = atomic_fetch_add(&j->next, 1);
        const crc_rec *rec;
        uint32_t crc = 0;
        uint64_t pos = 0;
        if (i >= j->n || atomic_load(&j->stop) || atomic_load(&j->fail)) break;
        rec = &j->recs[i];
        if (rec->streamed) continue;
        while (pos < rec->size && !atomic_load(&j->stop)) {
            size_t k = rec->size - pos < cap ? (size_t)(rec->size - pos) : cap;
            if (pread_full(j->fd, buf, k, rec->off + pos) != 0) {
                crc_claim(j, 3, i, 0, errno);
                break;
            }
            crc = ckpt_crc32(crc, buf, k);
            pos += k;
        }
        if (pos == rec->size && crc != rec->crc) crc_claim(j, 2, i, crc, 0);
    }
    free(buf);
}

/* A POSIX thread, not C11's thrd_create(): ThreadSanitizer intercepts
 * pthread_create() only, and a thread glibc starts for thrd_create() has no
 * TSan state, so its first instrumented access crashed (google/sanitizers
 * #1603).  zip.c's cursor lock is a pthread mutex too. */
static void *crc_worker(void *arg)
{
    crc_records(arg);
    return NULL;
}

/* Why the check failed, in one line; returns -1. */
static int report_crc(exporter *x, const crc_rec *rec, int read_error, int e, uint32_t computed)
{
    sbuf shown;
    if (read_error) return e == ENOMEM ? nomem(x) : src_error(x, e);
    memset(&shown, 0, sizeof shown);
    put_shown_name(&shown, rec->tensor, rec->tensor_len);
    sb_str(&shown, " in record ");
    put_escaped(&shown, rec->name);
    fail_at(x, CKPT_EXPORT_FROM_EXPORT, CKPT_E_FORMAT, (int64_t)rec->off,
            "crc mismatch for tensor %s (recorded %08x, computed %08x): the file is "
            "damaged; --no-verify converts it anyway",
            shown.oom ? "?" : shown.p, (unsigned)rec->crc, (unsigned)computed);
    sb_free(&shown);
    return -1;
}

static int crc_report(exporter *x)
{
    crc_job *j = x->job;
    return report_crc(x, &j->recs[j->bad], atomic_load(&j->fail) == 3, j->err, j->computed);
}

/* Nonzero once the worker found damage (the copy can stop). */
static int crc_failed(const exporter *x)
{
    return x->job && atomic_load(&x->job->fail) != 0;
}

/* Wait for the worker (told to stop when `abandon`); 0 when every record
 * is intact, else -1 after the report. */
static int crc_join(exporter *x, int abandon)
{
    crc_job *j = x->job;
    if (!j) return 0;
    if (abandon)
        atomic_store(&j->stop, 1);
    else
        crc_records(j); /* help with what the worker has not started */
    if (j->threaded) {
        pthread_join(j->thread, NULL);
        j->threaded = 0;
    }
    if (abandon) return -1;
    return atomic_load(&j->fail) == 0 ? 0 : crc_report(x);
}

static void crc_start(exporter *x)
{
    crc_job *j = x->job;
    if (!j || j->n == 0) return;
    /* without a thread, the main thread checks everything after the copy */
    if (pthread_create(&j->thread, NULL, crc_worker, j) == 0) j->threaded = 1;
}

static void crc_free(exporter *x)
{
    if (x->job) {
        crc_join(x, 1);
        free(x->job->recs);
        free(x->job);
        x->job = NULL;
    }
}

/* Let the library check the whole file (deflated records, records not
 * located, no source descriptor): one pass before the copy. */
static int verify_with_library(exporter *x)
{
    ckpt_error e;
    memset(&e, 0, sizeof e);
    e.offset = -1;
    if (ckpt_verify(x->f, NULL, NULL, &e) == 0) return 0;
    if (e.code == CKPT_E_FORMAT) {
        size_t n = strlen(e.message);
        snprintf(e.message + n, sizeof e.message - n,
                 ": the file is damaged; --no-verify converts it anyway");
    }
    return lib_error(x, &e);
}

/* Its bytes lie in the source exactly as safetensors stores them, and the
 * caller gave the source's descriptor. */
static int is_direct(const exporter *x, const ckpt_tensor *t)
{
    return x->src_fd >= 0 && t->contiguous && t->file_offset >= 0 &&
           (x->info.byteorder == CKPT_LITTLE || ckpt_dtype_size(t->dtype) == 1);
}

/* Plan the check of the ZIP records the written tensors use.  Legacy and
 * TAR files carry no checksum: nothing to do. */
static int plan_verify(exporter *x)
{
    exporter *p = x;
    size_t ns = ckpt_storage_count(x->f), i, nzero = 0;
    unsigned char *seen;
    crc_job *j;
    int need_lib = x->src_fd < 0;

    if (!x->o.verify || x->info.format != CKPT_FORMAT_ZIP || p->n == 0) return 0;
    if (need_lib) return verify_with_library(x);
    seen = calloc(ns ? ns : 1, 1);
    j = calloc(1, sizeof *j);
    if (j) j->recs = calloc(ns ? ns : 1, sizeof j->recs[0]);
    if (!seen || !j || !j->recs) {
        free(seen);
        if (j) free(j->recs);
        free(j);
        return nomem(x);
    }
    j->fd = x->src_fd;
    atomic_init(&j->next, 0);
    atomic_init(&j->stop, 0);
    atomic_init(&j->fail, 0);
    x->job = j;
    for (i = 0; i < p->n && !need_lib; i++) {
        const ckpt_tensor *t = p->ents[i].tensor;
        const ckpt_storage *s = ckpt_storage_at(x->f, t->storage);
        crc_rec *rec;
        int r;
        if (!s || t->storage >= ns || seen[t->storage] || s->nbytes == 0) continue;
        seen[t->storage] = 1;
        if (s->file_offset < 0) {
            need_lib = 1;
            break;
        }
        rec = &j->recs[j->n];
        memset(rec, 0, sizeof *rec);
        r = find_record(x, t->storage, s, rec);
        if (r < 0) {
            free(seen);
            return -1;
        }
        if (r == 2)
            need_lib = 1;
        else if (r == 1)
            nzero++;
        else {
            rec->tensor = t->name;
            rec->tensor_len = t->name_len;
            if (!rec->checked && is_direct(x, t) && t->nbytes >= DIRECT_MIN &&
                (uint64_t)t->file_offset == rec->off && t->nbytes == rec->size) {
                /* the first tensor written from it is all of it */
                rec->streamed = 1;
                p->check[i] = j->n + 1;
            }
            if (!rec->checked)
                j->n++; /* the worker (or the copy) checks it */
            else if (rec->computed != rec->crc) {
                free(seen);
                return report_crc(x, rec, 0, 0, rec->computed);
            }
        }
    }
    free(seen);
    if (need_lib) {
        /* the library checks every record: no second check here */
        for (i = 0; i < p->n; i++) p->check[i] = 0;
        j->n = 0;
        return verify_with_library(x);
    }
    if (nzero > 0)
        warn(x, "%zu record%s carry no CRC-32 (saved without one): not checked", nzero,
             nzero == 1 ? "" : "s");
    return 0;
}

/* ---- copying one tensor -------------------------------------------------- */

static int write_tensor(exporter *x, size_t idx)
{
    const ckpt_tensor *t = x->ents[idx].tensor;
    size_t check = x->check[idx];
    uint64_t pos = 0, n = t->nbytes;
    size_t es = ckpt_dtype_size(t->dtype);
    int direct = is_direct(x, t);
    ckpt_error err;

    if (n == 0) return 0;
    /* copied around the library: a read of 0 bytes checks the tensor size
     * limit, reading nothing */
    memset(&err, 0, sizeof err);
    err.offset = -1;
    if (direct && ckpt_tensor_read_range(x->f, t, 0, NULL, 0, &err) != 0) return lib_error(x, &err);
    if (direct && n >= DIRECT_MIN) {
        if (stage_flush(x) != 0) return -1;
        if (check > 0) {
            /* read, check and write: measured cheaper than the kernel copy
             * plus a second read for the check */
            const crc_rec *rec = &x->job->recs[check - 1];
            uint32_t crc = 0;
            if (copy_rw(x, (uint64_t)t->file_offset, x->stage_off, n, &crc) != 0) return -1;
            if (crc != rec->crc) return report_crc(x, rec, 0, 0, crc);
        } else if (x->wfn ? copy_rw(x, (uint64_t)t->file_offset, x->stage_off, n, NULL)
                          : copy_direct(x, (uint64_t)t->file_offset, x->stage_off, n)) {
            return -1;
        }
        x->stage_off += n;
        return 0;
    }
    if (stage_alloc(x) != 0) return -1;
    while (pos < n) {
        size_t room = x->stage_cap - x->stage_len;
        size_t k = n - pos < room ? (size_t)(n - pos) : room;
        unsigned char *dst = x->stage + x->stage_len;
        if (!direct && k < n - pos) k -= k % es; /* whole elements, to swap them */
        if (k == 0) {
            if (stage_flush(x) != 0) return -1;
            continue;
        }
        if (direct) {
            if (pread_full(x->src_fd, dst, k, (uint64_t)t->file_offset + pos) != 0)
                return src_error(x, errno);
        } else {
            memset(&err, 0, sizeof err);
            err.offset = -1;
            if (ckpt_tensor_read_range(x->f, t, pos, dst, k, &err) != 0) return lib_error(x, &err);
            if (x->big_host) ck_tools_swap_bytes(dst, k, ck_tools_swap_unit(t->dtype));
        }
        x->stage_len += k;
        pos += k;
        advance(x, k);
        if (x->stage_len >= STAGE_FLUSH && stage_flush(x) != 0) return -1;
    }
    return 0;
}

/* ---- tensors ------------------------------------------------------------- */

/* How refusal() shows each tensor. */
enum { SHOW_NAME, SHOW_DTYPE, SHOW_REASON };

/* "LEAD: NAMES (more)TAIL" where NAMES lists the first of the `n` refused
 * tensors (idx[0..shown)), as many as keep the message within `max` bytes
 * (what a ckpt_error holds, for an error); `how`: 'name', "name (dtype)"
 * or "name (why it cannot be read)". */
static int refusal(exporter *x, sbuf *out, const char *lead, const char *tail, const size_t *idx,
                   size_t shown, size_t n, int how, size_t max)
{
    size_t k = shown;
    for (;;) {
        size_t i;
        out->len = 0;
        sb_str(out, lead);
        for (i = 0; i < k; i++) {
            const ckpt_tensor *t = ckpt_tensor_at(x->f, idx[i]);
            if (i > 0) sb_str(out, ", ");
            if (how == SHOW_NAME) {
                put_shown_name(out, t->name, t->name_len);
                continue;
            }
            if (t->name_len == 0) sb_str(out, "\"\"");
            put_escaped_text(out, t->name, t->name_len, 0);
            sb_str(out, " (");
            if (how == SHOW_DTYPE)
                sb_str(out, ckpt_dtype_name(t->dtype));
            else if (t->unreadable)
                put_escaped_text(out, t->unreadable, strlen(t->unreadable), 1);
            else
                sb_str(out, "no data");
            sb_char(out, ')');
        }
        if (n > k) {
            char more[48];
            snprintf(more, sizeof more, k > 0 ? ", ... (%zu more)" : "... (%zu more)", n - k);
            sb_str(out, more);
        }
        sb_str(out, tail);
        if (out->oom) return nomem(x);
        if (out->len <= max || k == 0) return 0;
        k--;
    }
}

/* Left out, or refused: tensors whose name is not UTF-8 (SHOW_NAME), whose
 * dtype safetensors lacks (SHOW_DTYPE), or that cannot be read
 * (SHOW_REASON: a meta tensor, a quantized one whose bytes ckpt cannot
 * give, ...). */
static int report_left_out(exporter *x, const size_t *idx, size_t n, int how)
{
    sbuf m;
    char lead[160];
    const char *what = how == SHOW_NAME    ? "whose name is not valid UTF-8"
                       : how == SHOW_DTYPE ? "safetensors has no dtype for"
                                           : "that cannot be read";
    size_t shown = n < NAMES_SHOWN ? n : NAMES_SHOWN;
    int r;
    memset(&m, 0, sizeof m);
    if (!x->o.skip_unsupported) {
        snprintf(lead, sizeof lead,
                 how == SHOW_NAME
                     ? "cannot convert %zu tensor%s %s, which safetensors names must be: "
                     : "cannot convert %zu tensor%s %s: ",
                 n, n == 1 ? "" : "s", what);
        r = refusal(x, &m, lead, " (--skip-unsupported leaves them out)", idx, shown, n, how,
                    MSG_MAX);
        if (r == 0) r = fail(x, CKPT_E_UNSUPPORTED, "%s", m.p);
    } else {
        snprintf(lead, sizeof lead, "left out %zu tensor%s %s: ", n, n == 1 ? "" : "s", what);
        r = refusal(x, &m, lead, "", idx, shown, n, how, (size_t)-1);
        if (r == 0) warn(x, "%s", m.p);
    }
    sb_free(&m);
    return r;
}

static int meta_add(exporter *x, const char *key, size_t klen, const char *val, size_t vlen,
                    int config);

/* Tied weights: the same view of one storage.  Entries are sorted by
 * view, then by name, so that the first of a run is the one kept. */
static int same_view(const ckpt_tensor *a, const ckpt_tensor *b)
{
    uint32_t d;
    if (a->storage != b->storage || a->dtype != b->dtype || a->ndim != b->ndim ||
        a->storage_offset != b->storage_offset)
        return 0;
    for (d = 0; d < a->ndim; d++)
        if (a->shape[d] != b->shape[d] || a->stride[d] != b->stride[d]) return 0;
    return 1;
}

static int cmp_view(const void *pa, const void *pb)
{
    const ckpt_safetensors_entry *a = *(const ckpt_safetensors_entry *const *)pa;
    const ckpt_safetensors_entry *b = *(const ckpt_safetensors_entry *const *)pb;
    const ckpt_tensor *ta = a->tensor, *tb = b->tensor;
    uint32_t d;
    if (ta->storage != tb->storage) return ta->storage < tb->storage ? -1 : 1;
    if (ta->storage_offset != tb->storage_offset)
        return ta->storage_offset < tb->storage_offset ? -1 : 1;
    if (ta->dtype != tb->dtype) return ta->dtype < tb->dtype ? -1 : 1;
    if (ta->ndim != tb->ndim) return ta->ndim < tb->ndim ? -1 : 1;
    for (d = 0; d < ta->ndim; d++) {
        if (ta->shape[d] != tb->shape[d]) return ta->shape[d] < tb->shape[d] ? -1 : 1;
        if (ta->stride[d] != tb->stride[d]) return ta->stride[d] < tb->stride[d] ? -1 : 1;
    }
    { /* byte order of the names, which may hold NUL bytes */
        size_t n = a->name_len < b->name_len ? a->name_len : b->name_len;
        int c = memcmp(a->name, b->name, n);
        if (c != 0) return c;
        return a->name_len < b->name_len ? -1 : a->name_len > b->name_len;
    }
}

/* dedupe_tied and select: mark the aliases (kept[i]: the entry i is
 * written as, i itself when written), ask select about the kept ones,
 * drop the rest, record the aliases in the metadata, lay the data out
 * again. */
static int tie_and_select(exporter *x)
{
    exporter *p = x;
    size_t n = p->n, i, k, ntied = 0, nshown = 0;
    size_t *kept = malloc((n ? n : 1) * sizeof *kept);
    ckpt_safetensors_entry **order = malloc((n ? n : 1) * sizeof *order);
    unsigned char *keep = calloc(n ? n : 1, 1);
    sbuf m;
    uint64_t pos = 0;
    int r = 0;

    memset(&m, 0, sizeof m);
    if (!kept || !order || !keep) {
        free(kept);
        free(order);
        free(keep);
        return nomem(x);
    }
    for (i = 0; i < n; i++) {
        kept[i] = i;
        order[i] = &p->ents[i];
    }
    if (x->o.dedupe_tied && n > 1) {
        qsort(order, n, sizeof *order, cmp_view);
        for (i = 0; i < n; i = k) {
            size_t first = (size_t)(order[i] - p->ents);
            for (k = i + 1; k < n && same_view(order[i]->tensor, order[k]->tensor); k++)
                if (order[i]->tensor->nbytes > 0) kept[order[k] - p->ents] = first;
        }
    }
    for (i = 0; i < n; i++)
        keep[i] = kept[i] == i && (!x->o.select || x->o.select(x->o.ctx, p->ents[i].tensor));
    /* the aliases of what is written: "alias": "kept" in the metadata, after
     * the keys loaders look for (first wins: collect_metadata() adds them
     * again in vain) */
    {
        const char *fmt = ckpt_format_name(x->info.format);
        size_t naliases = 0;
        char count[24];
        for (i = 0; i < n; i++)
            if (kept[i] != i && keep[kept[i]]) naliases++;
        snprintf(count, sizeof count, "%zu", naliases);
        /* "ckpt.tied": how many of the entries after it are aliases, so that
         * a reader takes those and never mistakes a value for one */
        if (meta_add(x, "format", 6, "pt", 2, 0) != 0 ||
            meta_add(x, "ckpt.source_format", 18, fmt, strlen(fmt), 0) != 0 ||
            (naliases && meta_add(x, "ckpt.tied", 9, count, strlen(count), 0) != 0))
            r = -1;
    }
    for (i = 0; i < n && r == 0; i++) {
        const ckpt_safetensors_entry *a = &p->ents[i], *b = &p->ents[kept[i]];
        if (kept[i] == i || !keep[kept[i]]) continue;
        r = meta_add(x, a->name, a->name_len, b->name, b->name_len, 0);
        if (++ntied <= NAMES_SHOWN) {
            sb_str(&m, nshown++ ? ", " : "");
            put_shown_name(&m, a->tensor->name, a->tensor->name_len);
            sb_str(&m, " -> ");
            put_shown_name(&m, b->tensor->name, b->tensor->name_len);
        }
    }
    if (r == 0 && ntied > 0) {
        if (ntied > nshown) {
            char more[48];
            snprintf(more, sizeof more, ", ... (%zu more)", ntied - nshown);
            sb_str(&m, more);
        }
        if (m.oom)
            r = nomem(x);
        else
            warn(x,
                 "%zu tied tensor%s (the same storage viewed the same way) written once, as "
                 "safetensors' save_model() does; \"__metadata__\" maps each name left out to "
                 "the one kept: %s",
                 ntied, ntied == 1 ? "" : "s", m.p);
    }
    sb_free(&m);
    /* drop what is not written; lay the rest out again */
    for (i = 0, k = 0; i < n; i++) {
        if (!keep[i]) {
            free((char *)p->ents[i].name);
            continue;
        }
        p->ents[k] = p->ents[i];
        p->ents[k].begin = pos;
        pos += p->ents[k].tensor->nbytes;
        p->ents[k].end = pos;
        k++;
    }
    p->n = k;
    p->data_size = pos;
    set_free(&x->names); /* it pointed at names just freed; not used again */
    free(kept);
    free(order);
    free(keep);
    return r;
}

/* Two tensors with one name (a file whose keys flatten to one name,
 * {'model.fc.weight': t, 'model': {'fc.weight': u}}): safetensors keys are
 * unique, so the export is refused, naming each one's key path. */
static int report_clash(exporter *x, const ckpt_safetensors_entry *e)
{
    const ckpt_safetensors_entry *a = x->ents;
    char pa[96], pb[96];
    sbuf name;
    int r;
    while (a < e && (a->name_len != e->name_len || memcmp(a->name, e->name, e->name_len) != 0)) a++;
    if (ckpt_tensor_path_text(x->f, a->tensor, pa, sizeof pa, NULL) != 0)
        snprintf(pa, sizeof pa, "?");
    if (ckpt_tensor_path_text(x->f, e->tensor, pb, sizeof pb, NULL) != 0)
        snprintf(pb, sizeof pb, "?");
    memset(&name, 0, sizeof name);
    put_shown_name(&name, e->tensor->name, e->tensor->name_len);
    r = fail(x, CKPT_E_FORMAT,
             "two tensors would be named %s in safetensors, which needs unique names: key paths "
             "%s and %s (--key selects one)",
             name.oom ? "?" : name.p, pa, pb);
    sb_free(&name);
    return r;
}

static int collect_tensors(exporter *x)
{
    exporter *p = x;
    size_t n = ckpt_tensor_count(x->f), i, nbad = 0, nraw = 0, nunr = 0;
    size_t bad[NAMES_SHOWN], raw[NAMES_SHOWN], unr[NAMES_SHOWN];
    sbuf name;
    uint64_t pos = 0;
    int r = 0;

    memset(&name, 0, sizeof name);
    p->ents = calloc(n ? n : 1, sizeof p->ents[0]);
    p->check = calloc(n ? n : 1, sizeof p->check[0]);
    if (!p->ents || !p->check) return nomem(x);
    for (i = 0; i < n && r == 0; i++) {
        const ckpt_tensor *t = ckpt_tensor_at(x->f, i);
        const char *dt;
        ckpt_safetensors_entry *e;
        char *copy;
        if (!t) continue;
        if (!ckpt_name_match(x->o.filter, t->name, t->name_len)) continue;
        if (!is_utf8(t->name, t->name_len)) {
            /* safetensors keys are JSON strings: UTF-8.  Never rename. */
            if (nraw < NAMES_SHOWN) raw[nraw] = i;
            nraw++;
            continue;
        }
        if (!t->readable) { /* a meta tensor, ...: nothing to write */
            if (nunr < NAMES_SHOWN) unr[nunr] = i;
            nunr++;
            continue;
        }
        dt = ckpt_safetensors_dtype(t->dtype);
        if (!dt) {
            if (nbad < NAMES_SHOWN) bad[nbad] = i;
            nbad++;
            continue;
        }
        name.len = 0;
        put_utf8(&name, t->name, t->name_len);
        if (name.oom) {
            r = nomem(x);
            break;
        }
        copy = malloc(name.len + 1);
        if (!copy) {
            r = nomem(x);
            break;
        }
        memcpy(copy, name.p, name.len + 1);
        e = &p->ents[p->n++];
        e->name = copy;
        e->name_len = name.len;
        e->dtype = dt;
        e->tensor = t;
        if (name.len == 12 && memcmp(copy, "__metadata__", 12) == 0) {
            r = fail(x, CKPT_E_FORMAT,
                     "a tensor is named '__metadata__', which safetensors reserves");
            break;
        }
        switch (set_add(&x->names, copy, name.len)) {
        case 1: break;
        case 0: r = report_clash(x, e); break;
        default: r = nomem(x); break;
        }
        e->begin = pos;
        pos += t->nbytes;
        e->end = pos;
    }
    sb_free(&name);
    if (r == 0 && nraw > 0) r = report_left_out(x, raw, nraw, SHOW_NAME);
    if (r == 0 && nunr > 0) r = report_left_out(x, unr, nunr, SHOW_REASON);
    if (r == 0 && nbad > 0) r = report_left_out(x, bad, nbad, SHOW_DTYPE);
    if (r == 0 && x->o.filter && p->n == 0 && nraw == 0 && nbad == 0 && nunr == 0) {
        name.len = 0;
        put_shown_name(&name, x->o.filter, strlen(x->o.filter));
        warn(x, "--filter %s matches no tensor", name.oom ? "?" : name.p);
        sb_free(&name);
    }
    p->data_size = pos;
    if (r == 0 && (x->o.dedupe_tied || x->o.select)) r = tie_and_select(x);
    return r == 0 ? 0 : -1;
}

/* ---- metadata ------------------------------------------------------------ */

/* Add key = val (raw bytes, made valid UTF-8) unless the key is taken or
 * either is too long.  `config` entries count against the cap. */
static int meta_add(exporter *x, const char *key, size_t klen, const char *val, size_t vlen,
                    int config)
{
    sbuf kb, vb;
    meta_entry *m;
    int r;

    if (config && (klen > META_MAX_TEXT || vlen > META_MAX_TEXT)) {
        x->meta_dropped = 1;
        return 0;
    }
    if (config && x->nconfig >= META_MAX_ENTRIES) {
        x->meta_dropped = 1;
        return 0;
    }
    if (x->nmeta == x->meta_cap) {
        size_t cap = x->meta_cap ? x->meta_cap * 2 : 64;
        meta_entry *p = realloc(x->meta, cap * sizeof *p);
        if (!p) return nomem(x);
        x->meta = p;
        x->meta_cap = cap;
    }
    memset(&kb, 0, sizeof kb);
    memset(&vb, 0, sizeof vb);
    put_utf8(&kb, key, klen);
    put_utf8(&vb, val, vlen);
    sb_char(&kb, '\0');
    sb_char(&vb, '\0');
    if (kb.oom || vb.oom) {
        sb_free(&kb);
        sb_free(&vb);
        return nomem(x);
    }
    m = &x->meta[x->nmeta];
    m->key = kb.p;
    m->klen = kb.len - 1;
    m->val = vb.p;
    m->vlen = vb.len - 1;
    r = set_add(&x->meta_keys, m->key, m->klen);
    if (r <= 0) {
        sb_free(&kb);
        sb_free(&vb);
        return r < 0 ? nomem(x) : 0; /* first one wins */
    }
    x->nmeta++;
    if (config) x->nconfig++;
    return 0;
}

typedef struct walk_item {
    const ckpt_value *v;
    char *path;
    size_t plen;
    uint32_t depth;
} walk_item;

typedef struct walk {
    exporter *x;
    walk_item *q;
    size_t head, len, cap;
    strset seen; /* containers, by address */
    sbuf path, text;
    int full; /* the entry cap is reached: stop */
} walk;

/* Text of a scalar into w->text; 0 when v is not a scalar we keep. */
static int scalar_text(walk *w, const ckpt_value *v)
{
    const char *s;
    size_t n = 0;
    char tmp[40];
    w->text.len = 0;
    switch (ckpt_value_kind(v)) {
    case CKPT_V_BOOL: sb_str(&w->text, ckpt_value_bool(v) ? "True" : "False"); return 1;
    case CKPT_V_INT: sb_i64(&w->text, ckpt_value_int(v)); return 1;
    case CKPT_V_FLOAT:
        n = ckpt_float_repr(ckpt_value_float(v), tmp);
        sb_add(&w->text, tmp, n);
        return 1;
    case CKPT_V_BIGINT:
    case CKPT_V_STR:
        s = ckpt_value_text(v, &n);
        if (!s) return 0;
        if (n > META_MAX_TEXT) {
            w->x->meta_dropped = 1;
            return 0;
        }
        sb_add(&w->text, s, n);
        return 1;
    default: return 0;
    }
}

/* A dict key as a path component into w->text: str as is, numbers, bools
 * and None as Python's str() prints them; 0 for other keys. */
static int key_text(walk *w, const ckpt_value *k)
{
    if (!k) return 0;
    if (ckpt_value_kind(k) == CKPT_V_NONE) {
        w->text.len = 0;
        sb_str(&w->text, "None");
        return 1;
    }
    return scalar_text(w, k);
}

static int is_container(ckpt_kind k)
{
    return k == CKPT_V_DICT || k == CKPT_V_LIST || k == CKPT_V_TUPLE || k == CKPT_V_OBJECT;
}

/* parent.path + "." + comp into w->path. */
static void join_path(walk *w, const walk_item *parent, const char *comp, size_t clen)
{
    w->path.len = 0;
    sb_add(&w->path, parent->path ? parent->path : "", parent->plen);
    if (parent->plen > 0) sb_char(&w->path, '.');
    sb_add(&w->path, comp, clen);
}

static int walk_push(walk *w, const ckpt_value *v, const char *path, size_t plen, uint32_t depth)
{
    walk_item *it;
    if (w->len == w->cap) {
        size_t cap = w->cap ? w->cap * 2 : 64;
        walk_item *q = realloc(w->q, cap * sizeof *q);
        if (!q) return nomem(w->x);
        w->q = q;
        w->cap = cap;
    }
    it = &w->q[w->len];
    it->path = malloc(plen + 1);
    if (!it->path) return nomem(w->x);
    memcpy(it->path, path, plen);
    it->path[plen] = '\0';
    it->plen = plen;
    it->v = v;
    it->depth = depth;
    w->len++;
    return 0;
}

/* Mark a container seen: 1, or 0 if it was already. */
static int mark_seen(walk *w, const ckpt_value *v)
{
    int r = set_add(&w->seen, (const char *)(const void *)v, 0);
    return r < 0 ? nomem(w->x) : r;
}

/* One child of `parent` under component comp: a scalar becomes an entry, a
 * container not seen yet is queued. */
static int walk_child(walk *w, const walk_item *parent, const char *comp, size_t clen,
                      const ckpt_value *v)
{
    ckpt_kind kind;
    int r;
    if (!v || w->full) return 0;
    kind = ckpt_value_kind(v);
    if (is_container(kind)) {
        if ((r = mark_seen(w, v)) <= 0) return r;
        join_path(w, parent, comp, clen);
        if (w->path.oom) return nomem(w->x);
        if (parent->depth + 1 > META_MAX_DEPTH || w->path.len > META_MAX_TEXT) {
            w->x->meta_dropped = 1;
            return 0;
        }
        return walk_push(w, v, w->path.p, w->path.len, parent->depth + 1);
    }
    if (!scalar_text(w, v)) return 0;
    if (w->x->nconfig >= META_MAX_ENTRIES) {
        w->x->meta_dropped = 1;
        w->full = 1;
        return 0;
    }
    join_path(w, parent, comp, clen);
    if (w->path.oom || w->text.oom) return nomem(w->x);
    return meta_add(w->x, w->path.p, w->path.len, w->text.p, w->text.len, 1);
}

/* The entries of dict d as children of parent. */
static int walk_dict(walk *w, const walk_item *parent, const ckpt_value *d)
{
    size_t n = ckpt_value_len(d), i;
    sbuf comp;
    int r = 0;
    memset(&comp, 0, sizeof comp);
    for (i = 0; i < n && r == 0 && !w->full; i++) {
        if (!key_text(w, ckpt_value_key(d, i))) continue;
        comp.len = 0;
        sb_add(&comp, w->text.p, w->text.len);
        if (comp.oom) {
            r = nomem(w->x);
            break;
        }
        r = walk_child(w, parent, comp.p, comp.len, ckpt_value_item(d, i));
    }
    sb_free(&comp);
    return r == 0 ? 0 : -1;
}

static int walk_item_children(walk *w, const walk_item *it)
{
    const ckpt_value *v = it->v, *part;
    size_t n, i;
    char comp[32];
    int r;

    switch (ckpt_value_kind(v)) {
    case CKPT_V_DICT: return walk_dict(w, it, v);
    case CKPT_V_LIST:
    case CKPT_V_TUPLE:
        n = ckpt_value_len(v);
        for (i = 0; i < n && !w->full; i++) {
            int k = snprintf(comp, sizeof comp, "%zu", i);
            if (walk_child(w, it, comp, (size_t)k, ckpt_value_item(v, i)) != 0) return -1;
        }
        return 0;
    case CKPT_V_OBJECT:
        /* as `ckpt show` does: a dict state (the usual __dict__) holds the
         * object's own entries; other parts go under "state", "items",
         * "list"; constructor arguments are not configuration */
        part = ckpt_object_state(v);
        if (part && ckpt_value_kind(part) == CKPT_V_DICT) {
            if ((r = mark_seen(w, part)) < 0) return -1;
            if (r > 0 && walk_dict(w, it, part) != 0) return -1;
        } else if (walk_child(w, it, "state", 5, part) != 0) {
            return -1;
        }
        if (walk_child(w, it, "items", 5, ckpt_object_items(v)) != 0) return -1;
        return walk_child(w, it, "list", 4, ckpt_object_list(v));
    default: return 0;
    }
}

/* Breadth first, so that shallow values (epoch, config.lr) are kept before
 * deep ones (optimizer internals) when the cap is reached. */
static int collect_metadata(exporter *x)
{
    const ckpt_value *root = ckpt_root(x->f);
    const char *fmt = ckpt_format_name(x->info.format);
    walk w;
    int r = 0;

    if (meta_add(x, "format", 6, "pt", 2, 0) != 0 ||
        meta_add(x, "ckpt.source_format", 18, fmt, strlen(fmt), 0) != 0)
        return -1;
    if (!x->o.metadata || !root || !is_container(ckpt_value_kind(root))) return 0;
    memset(&w, 0, sizeof w);
    w.x = x;
    w.seen.ptrs = 1;
    if (mark_seen(&w, root) < 0 || walk_push(&w, root, "", 0, 0) != 0) r = -1;
    while (r == 0 && w.head < w.len && !w.full) {
        walk_item it = w.q[w.head++];
        r = walk_item_children(&w, &it);
        free(it.path);
        w.q[w.head - 1].path = NULL;
    }
    for (; w.head < w.len; w.head++) free(w.q[w.head].path);
    free(w.q);
    set_free(&w.seen);
    sb_free(&w.path);
    sb_free(&w.text);
    if (r == 0 && x->meta_dropped)
        warn(x,
             "some values were left out of the metadata (it keeps at most %d, with keys "
             "and values of at most %d bytes, %d levels deep)",
             META_MAX_ENTRIES, META_MAX_TEXT, META_MAX_DEPTH);
    return r;
}

/* ---- header -------------------------------------------------------------- */

static int build_header(exporter *x)
{
    exporter *p = x;
    sbuf *h = &p->header;
    size_t i;
    uint32_t d;
    uint64_t total;

    sb_add(h, "\0\0\0\0\0\0\0\0", 8); /* the length, filled in below */
    sb_str(h, "{\"__metadata__\":{");
    for (i = 0; i < x->nmeta; i++) {
        if (i > 0) sb_char(h, ',');
        put_json_string(h, x->meta[i].key, x->meta[i].klen);
        sb_char(h, ':');
        put_json_string(h, x->meta[i].val, x->meta[i].vlen);
    }
    sb_char(h, '}');
    for (i = 0; i < p->n; i++) {
        const ckpt_safetensors_entry *e = &p->ents[i];
        const ckpt_tensor *t = e->tensor;
        sb_char(h, ',');
        put_json_string(h, e->name, e->name_len);
        sb_str(h, ":{\"dtype\":\"");
        sb_str(h, e->dtype);
        sb_str(h, "\",\"shape\":[");
        for (d = 0; d < t->ndim; d++) {
            if (d > 0) sb_char(h, ',');
            sb_i64(h, t->shape[d]);
        }
        sb_str(h, "],\"data_offsets\":[");
        sb_u64(h, e->begin);
        sb_char(h, ',');
        sb_u64(h, e->end);
        sb_str(h, "]}");
    }
    sb_char(h, '}');
    while (h->len % ST_ALIGN != 0) sb_char(h, ' ');
    if (h->oom) return nomem(x);
    total = h->len - 8;
    if (total > ST_MAX_HEADER)
        return fail(x, CKPT_E_LIMIT,
                    "the safetensors header would be %llu bytes, more than the %u bytes "
                    "readers accept",
                    (unsigned long long)total, ST_MAX_HEADER);
    for (i = 0; i < 8; i++) h->p[i] = (char)((total >> (8 * i)) & 0xFF);
    return 0;
}

/* ---- plan ---------------------------------------------------------------- */

/* Start a call on x: its errors go to err (cleared). */
static void ex_call(exporter *x, ckpt_error *err)
{
    x->err = err;
    x->origin = CKPT_EXPORT_FROM_EXPORT;
    if (err) {
        memset(err, 0, sizeof *err);
        err->offset = -1;
    }
}

/* The end of a call: error_origin told on failure. */
static int ex_end(exporter *x, int r)
{
    if (r != 0 && x->o.error_origin) *x->o.error_origin = x->origin;
    return r;
}

void ckpt_safetensors_free(ckpt_safetensors_plan *x)
{
    size_t i;
    if (!x) return;
    crc_free(x);
    for (i = 0; i < x->n; i++) free((char *)x->ents[i].name);
    free(x->ents);
    free(x->check);
    sb_free(&x->header);
    for (i = 0; i < x->nmeta; i++) {
        free(x->meta[i].key);
        free(x->meta[i].val);
    }
    free(x->meta);
    set_free(&x->names);
    set_free(&x->meta_keys);
    free(x->stage);
    free(x->pbuf);
    free(x);
}

/* Options over the defaults; 0, or -1 with the error filled. */
static int ex_options(exporter *x, const ckpt_export_options *opt)
{
    ckpt_export_options_init(&x->o);
    if (opt) {
        if (opt->struct_size == 0)
            return fail(x, CKPT_E_ARG,
                        "ckpt_export_options.struct_size is 0: fill the options "
                        "with ckpt_export_options_init()");
        memcpy(&x->o, opt, opt->struct_size < sizeof x->o ? opt->struct_size : sizeof x->o);
        x->o.struct_size = sizeof x->o;
    }
    return 0;
}

/* Steps 1 and 2, and the checks that come before writing. */
static int ex_plan(exporter *x, const ckpt_file *f, const ckpt_export_options *opt)
{
    x->src_fd = -1;
    x->out_fd = -1;
    x->out_name = "output";
    if (ex_options(x, opt) != 0) return -1;
    if (x->o.out_name) x->out_name = x->o.out_name;
    if (!f) return fail(x, CKPT_E_ARG, "null argument");
    x->f = f;
    x->src_fd = x->o.src_fd;
    x->big_host = ck_tools_host_big_endian();
    ckpt_get_info(f, &x->info);
    if (collect_tensors(x) != 0 || collect_metadata(x) != 0 || build_header(x) != 0 ||
        plan_verify(x) != 0)
        return -1;
    return 0;
}

ckpt_safetensors_plan *ckpt_export_safetensors_plan(const ckpt_file *f,
                                                    const ckpt_export_options *opt, ckpt_error *err)
{
    exporter *x = calloc(1, sizeof *x);
    if (!x) {
        if (err) {
            memset(err, 0, sizeof *err);
            err->code = CKPT_E_NOMEM;
            err->offset = -1;
            snprintf(err->message, sizeof err->message, "out of memory");
        }
        if (opt && opt->struct_size > offsetof(ckpt_export_options, error_origin) &&
            opt->error_origin)
            *opt->error_origin = CKPT_EXPORT_FROM_EXPORT;
        return NULL;
    }
    ex_call(x, err);
    if (ex_end(x, ex_plan(x, f, opt)) != 0) {
        ckpt_safetensors_free(x);
        return NULL;
    }
    x->err = NULL;
    return x;
}

const void *ckpt_safetensors_header(const ckpt_safetensors_plan *p, size_t *len)
{
    if (len) *len = p ? p->header.len : 0;
    return p ? p->header.p : NULL;
}

size_t ckpt_safetensors_count(const ckpt_safetensors_plan *p)
{
    return p ? p->n : 0;
}

const ckpt_safetensors_entry *ckpt_safetensors_at(const ckpt_safetensors_plan *p, size_t i)
{
    return p && i < p->n ? &p->ents[i] : NULL;
}

uint64_t ckpt_safetensors_size(const ckpt_safetensors_plan *p)
{
    return p ? p->header.len + p->data_size : 0;
}

/* ---- writing ------------------------------------------------------------- */

/* Step 3: the header, then every tensor; the output is set up. */
static int ex_write(exporter *x)
{
    size_t i;
    int r = 0;

    if (x->written) return fail(x, CKPT_E_ARG, "this plan was written already");
    x->written = 1;
    if (x->stream && !x->wfn)
        x->copy_mode = ST_COPY_SENDFILE; /* copy_file_range needs a regular file */
    r = reserve(x, x->header.len + x->data_size);
    if (r == 0 && out_write(x, x->header.p, x->header.len, 0) != 0) r = write_error(x, errno);
    x->stage_off = x->header.len;
#ifdef POSIX_FADV_SEQUENTIAL
    if (x->src_fd >= 0) posix_fadvise(x->src_fd, 0, 0, POSIX_FADV_SEQUENTIAL);
#endif
    if (r == 0 && x->o.progress) x->o.progress(x->o.ctx, 0, x->data_size);
    if (r == 0) crc_start(x);
    for (i = 0; i < x->n && r == 0 && !crc_failed(x); i++)
        if (write_tensor(x, i) != 0) r = -1;
    if (r == 0 && stage_flush(x) != 0) r = -1;
    if (r == 0) write_behind(x, x->stage_off, 1);
    /* the copy is done: the check decides */
    return crc_join(x, r != 0) != 0 ? -1 : r;
}

int ckpt_safetensors_write_to(ckpt_safetensors_plan *p, ckpt_write_fn write, void *wctx,
                              ckpt_error *err)
{
    int r;
    if (!p || !write) {
        if (err) {
            memset(err, 0, sizeof *err);
            err->code = CKPT_E_ARG;
            err->offset = -1;
            snprintf(err->message, sizeof err->message, "null argument");
        }
        return -1;
    }
    ex_call(p, err);
    p->wfn = write;
    p->wctx = wctx;
    p->stream = 1;
    r = ex_end(p, ex_write(p));
    p->err = NULL;
    return r;
}

int ckpt_safetensors_write_fd(ckpt_safetensors_plan *p, int fd, int seekable, ckpt_error *err)
{
    int r;
    if (!p || fd < 0) {
        if (err) {
            memset(err, 0, sizeof *err);
            err->code = CKPT_E_ARG;
            err->offset = -1;
            snprintf(err->message, sizeof err->message,
                     p ? "no output descriptor" : "null argument");
        }
        return -1;
    }
    ex_call(p, err);
    p->out_fd = fd;
    p->stream = !seekable;
    r = ex_end(p, ex_write(p));
    p->err = NULL;
    return r;
}

int ckpt_export_safetensors_to(const ckpt_file *f, ckpt_write_fn write, void *wctx,
                               const ckpt_export_options *opt, ckpt_error *err)
{
    ckpt_safetensors_plan *p = ckpt_export_safetensors_plan(f, opt, err);
    int r = p ? ckpt_safetensors_write_to(p, write, wctx, err) : -1;
    ckpt_safetensors_free(p);
    return r;
}

int ckpt_export_safetensors_fd(const ckpt_file *f, int fd, int seekable,
                               const ckpt_export_options *opt, ckpt_error *err)
{
    ckpt_safetensors_plan *p = ckpt_export_safetensors_plan(f, opt, err);
    int r = p ? ckpt_safetensors_write_fd(p, fd, seekable, err) : -1;
    ckpt_safetensors_free(p);
    return r;
}

int ckpt_export_safetensors(const ckpt_file *f, const char *out_path,
                            const ckpt_export_options *opt, ckpt_error *err)
{
    ckpt_safetensors_plan *p;
    int fd, r;

    if (!out_path) {
        if (err) {
            memset(err, 0, sizeof *err);
            err->code = CKPT_E_ARG;
            err->offset = -1;
            snprintf(err->message, sizeof err->message, "null argument");
        }
        return -1;
    }
    p = ckpt_export_safetensors_plan(f, opt, err);
    if (!p) return -1;
    if (!p->o.out_name) p->out_name = out_path;
    fd = open(out_path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
    if (fd < 0) {
        ex_call(p, err);
        r = ex_end(p, out_error(p, errno));
    } else {
        r = ckpt_safetensors_write_fd(p, fd, 1, err);
        if (close(fd) != 0 && r == 0) {
            ex_call(p, err);
            r = ex_end(p, out_error(p, errno));
        }
        if (r != 0) unlink(out_path);
    }
    ckpt_safetensors_free(p);
    return r;
}
