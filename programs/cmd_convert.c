/*
 * cmd_convert.c - `ckpt convert`: write a checkpoint's tensors as a
 * safetensors file.
 *
 * The output is built in three steps:
 *   1. every tensor is named, typed and given its place in the data section
 *      (file order; views and shared storages each get their own bytes);
 *   2. the JSON header is built in memory (metadata: the source format and
 *      the scalar configuration values found next to the tensors);
 *   3. the bytes are streamed tensor by tensor.  A tensor whose bytes lie in
 *      the source file exactly as safetensors wants them (contiguous, stored
 *      uncompressed, little-endian or one byte per element) is copied by the
 *      kernel when it is large (copy_file_range, else sendfile, else
 *      pread/pwrite through 1 MiB of the buffer), or gathered with pread
 *      into the 8 MiB buffer when it is small; any other tensor is read
 *      through ckpt_tensor_read_range() into that same buffer.  Memory stays
 *      bounded whatever the file size.
 * For a ZIP, the CRC-32 of every record a written tensor comes from is
 * checked while the copy goes on (see crc_job), before OUT appears.
 * The output is written under a temporary name beside OUT, its blocks
 * reserved first (fallocate: a full disk fails at once) and written back to
 * disk while the copy goes on (sync_file_range), then synced and renamed
 * (or, without --force, hard-linked, so that an OUT created meanwhile is
 * never replaced) only once every byte is there.
 */
#ifndef _FILE_OFFSET_BITS
#define _FILE_OFFSET_BITS 64
#endif
#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L
#endif
#ifndef _DEFAULT_SOURCE
#define _DEFAULT_SOURCE
#endif
#if defined(__linux__) && !defined(_GNU_SOURCE)
#define _GNU_SOURCE /* fallocate, sync_file_range */
#endif

#include "cli.h"
#include "progress.h"
#include "safetensors.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <fnmatch.h>
#include <stdatomic.h>
#include <threads.h>
#include <zlib.h>

#ifdef __linux__
#include <sys/sendfile.h>
#include <sys/syscall.h>
#endif

static const char usage[] =
    "Usage: ckpt convert [--key K] [--filter GLOB] [--skip-unsupported]\n"
    "                    [--no-verify] [--force] [--sync] FILE OUT\n"
    "Write the tensors of checkpoint FILE to OUT in the safetensors format\n"
    "(https://github.com/huggingface/safetensors), without running any code\n"
    "from FILE.  Every tensor keeps its name (as listed by 'ckpt ls'), dtype and\n"
    "shape; views and tensors sharing a storage each get their own copy of\n"
    "their elements, row-major and little-endian.  Memory use stays bounded\n"
    "(an 8 MiB buffer) whatever the size of FILE.\n"
    "\n"
    "dtypes: float64 F64, float32 F32, float16 F16, bfloat16 BF16, int64 I64,\n"
    "int32 I32, int16 I16, int8 I8, uint8 U8, bool BOOL, uint16 U16, uint32 U32,\n"
    "uint64 U64, float8_e4m3fn F8_E4M3, float8_e5m2 F8_E5M2.  safetensors has no\n"
    "dtype for complex and float8 fnuz/e8m0 tensors: FILE is refused, naming\n"
    "them, unless --skip-unsupported leaves them out.  So are tensors whose\n"
    "name is not valid UTF-8 (safetensors names are JSON strings; a name is\n"
    "never changed): the message shows their bytes escaped as \\xNN.\n"
    "\n"
    "What is copied is checked: the CRC-32 of every ZIP record a tensor is\n"
    "copied from is computed as the copy goes on and compared with the one\n"
    "the ZIP recorded (a tensor that is a whole record is checked in the\n"
    "buffer it is copied through; views and shared storages are read by a\n"
    "second thread); a mismatch names the tensor and record, exits 1 and\n"
    "leaves no OUT.\n"
    "Deflated records are checked by a pass over the whole file first.\n"
    "Records only left-out tensors use (--filter, --key) are not read.\n"
    "Legacy and TAR files carry no checksums; records saved without a CRC\n"
    "are reported and not checked.\n"
    "\n"
    "The header's \"__metadata__\" holds \"format\": \"pt\", \"ckpt.source_format\"\n"
    "(zip, legacy, tar or pickle) and, as strings, the scalar values (str, int,\n"
    "float, bool) stored next to the tensors under their dotted path, e.g.\n"
    "\"epoch\": \"7\", \"config.lr\": \"0.001\" (Python's str() of the value; at most\n"
    "1000 of them, breadth first; keys and values longer than 1 KiB are left\n"
    "out, with a warning).  A file with no tensors gives a valid file holding\n"
    "only metadata.\n"
    "TorchScript files are refused (their weights are not read yet).\n"
    "\n"
    "OUT is written under a temporary name in its directory and appears only\n"
    "once complete: a failed or interrupted conversion leaves no OUT behind.\n"
    "An existing OUT is left alone (exit status 1) unless --force is given;\n"
    "a replaced OUT keeps its mode, and a symlink OUT keeps pointing at it.\n"
    "OUT '-' streams the file to standard output (not to a terminal); a\n"
    "device or a FIFO given as OUT is written in place.  FILE '-' reads the\n"
    "checkpoint from standard input.  OUT is never the input file.\n"
    "A progress bar is shown on standard error when it is a terminal and\n"
    "the job is long (64 MiB of tensors, or half a second).\n"
    "\n"
    "Options:\n"
    "  --key K             only the tensors (and values) under top-level key K\n"
    "                      (e.g. state_dict)\n"
    "  --filter GLOB       only the tensors whose name (as 'ckpt ls' shows it,\n"
    "                      after --key) matches GLOB (fnmatch: * ? [...];\n"
    "                      '*' also matches '.')\n"
    "  --skip-unsupported  leave out tensors safetensors cannot hold (no dtype\n"
    "                      for them, or a name that is not UTF-8; they are\n"
    "                      listed in a warning) instead of failing\n"
    "  --no-verify         do not check the CRC-32 of the copied records\n"
    "                      (converts a damaged file as it is)\n"
    "  --force             replace OUT if it exists\n"
    "  --sync              flush OUT to disk before it appears (durable against\n"
    "                      a power loss; like cp, the default only makes the\n"
    "                      rename atomic)\n"
    "  -h, --help          show this help\n";

/* One buffer of STAGE_CAP bytes holds the bytes read for tensors that need
 * the library (up to 8 MiB at a time: fewer restarts of a deflated record,
 * fewer passes over a strided one) and gathers small tensors, written out
 * once STAGE_FLUSH bytes are in.  Tensors of DIRECT_MIN bytes or more that
 * lie in FILE as they are copied by the kernel, KERNEL_CHUNK bytes a call,
 * or, where it cannot, through COPY_CHUNK bytes of the buffer (a piece that
 * stays in the CPU cache between the read and the write). */
#define STAGE_CAP ((size_t)8 << 20)
#define STAGE_FLUSH ((size_t)1 << 20)
#define DIRECT_MIN ((uint64_t)1 << 20)
#define COPY_CHUNK ((size_t)1 << 20)
#define KERNEL_CHUNK ((uint64_t)16 << 20)
#define WRITE_BEHIND ((uint64_t)8 << 20)
#define META_MAX_ENTRIES 1000
#define META_MAX_TEXT 1024 /* bytes of a metadata key or value */
#define META_MAX_DEPTH 1000
#define NAMES_SHOWN 8      /* tensors named in the unsupported-dtype message */

typedef struct conv_tensor {
    const ckpt_tensor *t;
    const char *st_dtype;
    char *name; /* valid UTF-8 */
    size_t name_len;
    uint64_t begin; /* in the data section */
    size_t check;   /* 1 + the crc_rec its copy checks as it goes, or 0 */
} conv_tensor;

typedef struct meta_entry {
    char *key, *val; /* valid UTF-8 */
    size_t klen, vlen;
} meta_entry;

/* A stored ZIP record whose CRC-32 is checked: its bytes in FILE, the CRC
 * its header or data descriptor records, and the first tensor that uses it
 * (for the message). */
typedef struct crc_rec {
    uint64_t off, size;
    uint32_t crc;
    const char *tensor;
    const char *key; /* storage key */
    int checked;     /* small: already checked while located */
    int streamed;    /* checked by the copy of the tensor that is all of it */
    uint32_t computed;
} crc_rec;

/* The records to check.  A big tensor that is all of its record is checked
 * by its own copy, read + CRC + write through 1 MiB of the buffer instead
 * of copy_file_range (streamed).  The other records (views, shared
 * storages, records of 64 KiB to 1 MiB) are read by a second thread while
 * the main one copies, and by the main one too once its copy is done.
 * Records of at most 64 KiB are checked when they are located.  (Measured
 * on 1 GiB, see bench/README.md: with the carry-less CRC, read + CRC +
 * write costs about the CPU of copy_file_range alone; the kernel copy
 * plus a second read on the thread costs 1.6x that.) */
typedef struct crc_job {
    int fd;
    crc_rec *recs;
    size_t n;
    atomic_size_t next; /* the next record to check */
    atomic_int stop;    /* main thread: give up (it failed) */
    atomic_int fail;    /* 0, or 2 mismatch, 3 read error (the first) */
    size_t bad;         /* the record that failed */
    uint32_t computed;
    int err;            /* errno of a failed read (0: the file ended) */
    int threaded;
    thrd_t thread;
} crc_job;

enum { COPY_RANGE = 0, COPY_SENDFILE = 1, COPY_RW = 2 };

typedef struct conv {
    const char *path; /* FILE */
    const char *out;  /* OUT */
    int sync;         /* --sync: OUT on disk before it appears */
    ckpt_file *f;
    ckpt_info info;
    int src_fd, out_fd;
    int stream;          /* OUT is not seekable (stdout, a pipe, a device):
                            every write goes forward, in order */
    uint64_t stream_pos; /* bytes written so far when streaming */

    conv_tensor *ts;
    size_t nts;
    st_set names;

    meta_entry *meta;
    size_t nmeta, meta_cap;
    size_t nconfig;     /* config entries among meta */
    int meta_dropped;   /* some config value was left out */
    st_set meta_keys;

    uint64_t data_start; /* 8 + header length */
    uint64_t data_size;

    unsigned char *stage;
    size_t stage_cap, stage_len;
    uint64_t stage_off; /* output offset of stage[0] */
    uint64_t wb_from;   /* OUT is handed to write-back up to here */
    int copy_mode;      /* COPY_RANGE, then COPY_SENDFILE, then COPY_RW */
    int big_host;

    progress prog;

    const char *filter; /* --filter GLOB: only the tensors it matches */
    int verify;         /* check the CRC-32 of the ZIP records copied */
    crc_job *job;       /* the records to check, while the copy goes on */
    unsigned char *pbuf; /* locating records: header window (+ small data) */
    size_t pbuf_cap;
} conv;

/* ---- messages ---------------------------------------------------------- */

/* The error reporters print one line and return -1. */

/* "ckpt: FILE: <reason>" for a failed read of the source. */
static int src_error(conv *c, int e)
{
    progress_hide(&c->prog);
    if (e == 0)
        cli_error("%s: the file ends early (was it changed while being "
                  "converted?)",
                  c->path);
    else
        cli_error("%s: read error: %s", c->path, strerror(e));
    return -1;
}

static int out_error(conv *c, int e)
{
    progress_hide(&c->prog);
    cli_error("%s: %s", c->out, strerror(e != 0 ? e : EIO));
    return -1;
}

static int lib_error(conv *c, const ckpt_error *err)
{
    progress_hide(&c->prog);
    cli_file_error(c->path, err);
    return -1;
}

static int nomem(conv *c)
{
    progress_hide(&c->prog);
    cli_error("%s: out of memory", c->path);
    return -1;
}

/* A name from FILE for a message, quoted: valid UTF-8 is kept; control
 * characters, bytes that are not UTF-8, quotes and backslashes are written
 * as \xNN, so the message says exactly which bytes the name holds.  Cut
 * after 120 bytes. */
static void put_escaped(sbuf *b, const char *str)
{
    const unsigned char *s = (const unsigned char *)str;
    size_t n = strlen(str), i = 0;
    char tmp[8];
    while (i < n) {
        size_t k = s[i] >= 0x80 ? cli_utf8_seq(s + i, n - i) : 1;
        if (i >= 120) {
            sb_str(b, "...");
            break;
        }
        if (k == 0 || s[i] < 0x20 || s[i] == 0x7f || s[i] == '\\' || s[i] == '\'') {
            snprintf(tmp, sizeof tmp, "\\x%02x", s[i]);
            sb_str(b, tmp);
            i++;
            continue;
        }
        sb_add(b, s + i, k);
        i += k;
    }
}

static void put_shown_name(sbuf *b, const char *str)
{
    sb_char(b, '\'');
    put_escaped(b, str);
    sb_char(b, '\'');
}

/* Nonzero when s is valid UTF-8 throughout. */
static int is_utf8(const char *str)
{
    const unsigned char *s = (const unsigned char *)str;
    size_t n = strlen(str), i = 0;
    while (i < n) {
        size_t k = s[i] < 0x80 ? 1 : cli_utf8_seq(s + i, n - i);
        if (k == 0)
            return 0;
        i += k;
    }
    return 1;
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
            if (errno == EINTR)
                continue;
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

static int pwrite_full(int fd, const void *buf, size_t n, uint64_t off)
{
    const unsigned char *p = buf;
    while (n > 0) {
        size_t chunk = n > ((size_t)1 << 30) ? ((size_t)1 << 30) : n;
        ssize_t r = pwrite(fd, p, chunk, (off_t)off);
        if (r < 0) {
            if (errno == EINTR)
                continue;
            return -1;
        }
        if (r == 0) {
            errno = EIO;
            return -1;
        }
        p += r;
        off += (uint64_t)r;
        n -= (size_t)r;
    }
    return 0;
}

/* Write buf to OUT at pos: pwrite, or, streaming, write() at the current
 * end (all of convert's writes go forward, so pos is the end). */
static int out_write(conv *c, const void *buf, size_t n, uint64_t pos)
{
    const unsigned char *p = buf;
    if (!c->stream)
        return pwrite_full(c->out_fd, buf, n, pos);
    if (pos != c->stream_pos) {
        errno = ESPIPE;
        return -1;
    }
    while (n > 0) {
        size_t chunk = n > ((size_t)1 << 30) ? ((size_t)1 << 30) : n;
        ssize_t r = write(c->out_fd, p, chunk);
        if (r < 0) {
            if (errno == EINTR)
                continue;
            return -1;
        }
        if (r == 0) {
            errno = EIO;
            return -1;
        }
        p += r;
        n -= (size_t)r;
        c->stream_pos += (uint64_t)r;
    }
    return 0;
}

/* The library reads FILE through the descriptor convert copies from, so
 * both see the same file even if its name is replaced meanwhile. */
static int reader_read(void *opaque, uint64_t off, void *buf, size_t n)
{
    return pread_full((int)(intptr_t)opaque, buf, n, off);
}

/* Reserve OUT's blocks up front: a full disk fails now rather than after
 * gigabytes were copied, and the file gets few extents. */
static int reserve(conv *c, uint64_t size)
{
#ifdef __linux__
    if (size > 0 && !c->stream && fallocate(c->out_fd, 0, 0, (off_t)size) != 0) {
        int e = errno;
        if (e == ENOSPC || e == EDQUOT || e == EFBIG)
            return out_error(c, e);
        /* not supported here: the writes allocate as they go */
    }
#else
    (void)c;
    (void)size;
#endif
    return 0;
}

/* Called after every write, which all go forward through OUT: once 8 MiB
 * more are written, start writing them to disk, so that the fsync before
 * the rename has little left to wait for and dirty pages stay few. */
static void write_behind(conv *c, uint64_t end, int last)
{
    if (!c->sync || end <= c->wb_from || (end - c->wb_from < WRITE_BEHIND && !last))
        return;
#ifdef __linux__
    sync_file_range(c->out_fd, (off_t)c->wb_from, (off_t)(end - c->wb_from),
                    SYNC_FILE_RANGE_WRITE);
#endif
    c->wb_from = end;
}

static int stage_flush(conv *c)
{
    if (c->stage_len == 0)
        return 0;
    if (out_write(c, c->stage, c->stage_len, c->stage_off) != 0)
        return out_error(c, errno);
    c->stage_off += c->stage_len;
    c->stage_len = 0;
    write_behind(c, c->stage_off, 0);
    return 0;
}

static int stage_alloc(conv *c)
{
    size_t cap = STAGE_CAP;
    if (c->stage)
        return 0;
    if (c->data_size < cap)
        cap = c->data_size < 4096 ? 4096 : (size_t)c->data_size;
    c->stage = malloc(cap);
    if (!c->stage)
        return nomem(c);
    c->stage_cap = cap;
    return 0;
}

/* Copy n bytes at `off` of FILE to `pos` of OUT in COPY_CHUNK pieces: the
 * piece stays in the CPU cache between the read and the write. */
static uLong crc_update(uLong crc, const unsigned char *p, size_t n);

/* With crc, the CRC-32 of the bytes copied is carried on into *crc: they
 * are checked as they pass, in the CPU cache between the read and the
 * write. */
static int copy_rw(conv *c, uint64_t off, uint64_t pos, uint64_t n, uLong *crc)
{
    size_t chunk;
    if (stage_alloc(c) != 0)
        return -1;
    chunk = c->stage_cap < COPY_CHUNK ? c->stage_cap : COPY_CHUNK;
    while (n > 0) {
        size_t k = n < chunk ? (size_t)n : chunk;
        if (pread_full(c->src_fd, c->stage, k, off) != 0)
            return src_error(c, errno);
        if (crc)
            *crc = crc_update(*crc, c->stage, k);
        if (out_write(c, c->stage, k, pos) != 0)
            return out_error(c, errno);
        off += k;
        pos += k;
        n -= k;
        write_behind(c, pos, 0);
        progress_advance(&c->prog, k);
    }
    return 0;
}

/* Copy n bytes at `off` of FILE to `pos` of OUT inside the kernel
 * (copy_file_range: no copy through this process; on NFS, SMB or Ceph the
 * server copies), else sendfile, else through the buffer. */
static int copy_direct(conv *c, uint64_t off, uint64_t pos, uint64_t n)
{
#ifdef __linux__
    while (n > 0 && c->copy_mode != COPY_RW) {
        size_t k = n < KERNEL_CHUNK ? (size_t)n : (size_t)KERNEL_CHUNK;
        ssize_t r = -1;
        int e;
        if (c->copy_mode == COPY_RANGE) {
#ifdef SYS_copy_file_range
            int64_t oi = (int64_t)off, oo = (int64_t)pos;
            r = (ssize_t)syscall(SYS_copy_file_range, c->src_fd, &oi, c->out_fd,
                                 &oo, k, 0u);
#else
            errno = ENOSYS;
#endif
        } else {
            off_t oi = (off_t)off;
            if (c->stream ? pos == c->stream_pos
                          : lseek(c->out_fd, (off_t)pos, SEEK_SET) >= 0)
                r = sendfile(c->out_fd, c->src_fd, &oi, k);
        }
        if (r > 0) {
            if (c->stream)
                c->stream_pos += (uint64_t)r;
            off += (uint64_t)r;
            pos += (uint64_t)r;
            n -= (uint64_t)r;
            write_behind(c, pos, 0);
            progress_advance(&c->prog, (uint64_t)r);
            continue;
        }
        if (r == 0)
            return src_error(c, 0);
        e = errno;
        if (e == EINTR || e == EAGAIN)
            continue;
        if (e == ENOSPC || e == EDQUOT || e == EFBIG || e == EIO)
            return out_error(c, e);
        c->copy_mode++; /* not for this pair of files: the next way */
    }
#endif
    return n > 0 ? copy_rw(c, off, pos, n, NULL) : 0;
}

/* ---- checking the CRC-32 of ZIP records --------------------------------- */

static uint32_t rd_le32(const unsigned char *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
           (uint32_t)p[3] << 24;
}

static uint64_t rd_le64(const unsigned char *p)
{
    return (uint64_t)rd_le32(p) | (uint64_t)rd_le32(p + 4) << 32;
}

#define LOCAL_EXTRA_MAX 1024 /* torch pads its extra fields to 64 bytes */
/* A record this small is read with its header in one call and checked at
 * once: a file of 100,000 small tensors would otherwise cost three system
 * calls a record. */
#define SMALL_RECORD ((uint64_t)64 << 10)

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
#define CONVERT_CLMUL 1
/* CRC-32 (zlib's) folded 64 bytes a step with carry-less multiplication:
 * the method of Intel's "Fast CRC Computation for Generic Polynomials Using
 * PCLMULQDQ" (and Linux's crc32-pclmul), constants for the reflected
 * polynomial 0xEDB88320.  n >= 64; returns the raw (uninverted) state. */
__attribute__((target("pclmul,sse4.1")))
static uint32_t crc_clmul(uint32_t crc, const unsigned char *p, size_t n)
{
    const __m128i k1k2 = _mm_set_epi64x(0x1c6e41596LL, 0x154442bd4LL);
    const __m128i k3k4 = _mm_set_epi64x(0x0ccaa009eLL, 0x1751997d0LL);
    const __m128i k5 = _mm_set_epi64x(0, 0x163cd6124LL);
    const __m128i poly = _mm_set_epi64x(0x1F7011641LL, 0x1DB710641LL);
    const __m128i mask32 = _mm_set_epi32(0, 0, 0, -1);
    __m128i x1 = _mm_loadu_si128((const __m128i *)(const void *)p);
    __m128i x2 = _mm_loadu_si128((const __m128i *)(const void *)(p + 16));
    __m128i x3 = _mm_loadu_si128((const __m128i *)(const void *)(p + 32));
    __m128i x4 = _mm_loadu_si128((const __m128i *)(const void *)(p + 48));
    __m128i t;
    x1 = _mm_xor_si128(x1, _mm_cvtsi32_si128((int)crc));
    p += 64;
    n -= 64;
#define FOLD(x, k, next) \
    t = _mm_clmulepi64_si128(x, k, 0x11); \
    x = _mm_clmulepi64_si128(x, k, 0x00); \
    x = _mm_xor_si128(_mm_xor_si128(x, t), next)
    while (n >= 64) {
        FOLD(x1, k1k2, _mm_loadu_si128((const __m128i *)(const void *)p));
        FOLD(x2, k1k2, _mm_loadu_si128((const __m128i *)(const void *)(p + 16)));
        FOLD(x3, k1k2, _mm_loadu_si128((const __m128i *)(const void *)(p + 32)));
        FOLD(x4, k1k2, _mm_loadu_si128((const __m128i *)(const void *)(p + 48)));
        p += 64;
        n -= 64;
    }
    FOLD(x1, k3k4, x2);
    FOLD(x1, k3k4, x3);
    FOLD(x1, k3k4, x4);
    while (n >= 16) {
        FOLD(x1, k3k4, _mm_loadu_si128((const __m128i *)(const void *)p));
        p += 16;
        n -= 16;
    }
#undef FOLD
    /* 128 -> 64 bits */
    t = _mm_clmulepi64_si128(k3k4, x1, 0x01);
    x1 = _mm_xor_si128(_mm_srli_si128(x1, 8), t);
    /* 64 -> 32 bits */
    t = _mm_srli_si128(x1, 4);
    x1 = _mm_clmulepi64_si128(_mm_and_si128(x1, mask32), k5, 0x00);
    x1 = _mm_xor_si128(x1, t);
    /* Barrett reduction */
    t = x1;
    x1 = _mm_clmulepi64_si128(_mm_and_si128(x1, mask32), poly, 0x10);
    x1 = _mm_clmulepi64_si128(_mm_and_si128(x1, mask32), poly, 0x00);
    x1 = _mm_xor_si128(x1, t);
    return (uint32_t)_mm_extract_epi32(x1, 1);
}
#endif

/* zlib's crc32(crc, p, n) for any n, 6-8x faster where the CPU multiplies
 * carry-less (x86-64 with PCLMULQDQ): the check then costs the copy little
 * even on one core.  Equal to zlib's for every input (the tests convert
 * intact files, small and big records, and would fail on any difference). */
static uLong crc_update(uLong crc, const unsigned char *p, size_t n)
{
#ifdef CONVERT_CLMUL
    if (n >= 256 && __builtin_cpu_supports("pclmul") && __builtin_cpu_supports("sse4.1")) {
        size_t m = n & ~(size_t)15;
        crc = ~crc_clmul(~(uint32_t)crc, p, m) & 0xFFFFFFFFu;
        p += m;
        n -= m;
    }
#endif
    while (n > 0) {
        uInt k = n > 0x40000000u ? 0x40000000u : (uInt)n;
        crc = crc32(crc, p, k);
        p += k;
        n -= k;
    }
    return crc;
}

/* Find the recorded CRC-32 and size of the stored record holding storage s
 * (the library does not tell them yet): its local header ends exactly where
 * the storage's bytes start and names <root>/data/<key>; without a data
 * descriptor the header holds the CRC and size, with one (torch's writer)
 * the descriptor right after the storage's bytes does, its sizes equal to
 * the storage's.  A small record is read in the same call and its CRC
 * computed (rec->checked).  Returns 0 with rec filled, 1 when no CRC was recorded
 * (zero), 2 when the record could not be located this way (the caller then
 * has the library verify the file), -1 after a read error (reported). */
static int find_record(conv *c, const ckpt_storage *s, crc_rec *rec)
{
    unsigned char *w, dd[24];
    uint64_t off = (uint64_t)s->file_offset, fsize = c->info.file_size, i;
    size_t nlen, wlen, tail = 0;
    sbuf name;
    int r = 2;

    memset(&name, 0, sizeof name);
    sb_str(&name, c->info.root);
    sb_str(&name, "/data/");
    sb_str(&name, s->key);
    if (name.oom) {
        sb_free(&name);
        return nomem(c);
    }
    nlen = name.len;
    wlen = 30 + nlen + LOCAL_EXTRA_MAX;
    if (off < wlen)
        wlen = (size_t)off;
    if (wlen < 30 + nlen || off > fsize)
        goto done;
    if (s->nbytes <= SMALL_RECORD)
        tail = (size_t)(fsize - off < s->nbytes + sizeof dd ? fsize - off
                                                            : s->nbytes + sizeof dd);
    if (c->pbuf_cap < wlen + tail) {
        unsigned char *nb = realloc(c->pbuf, wlen + tail);
        if (!nb) {
            r = nomem(c);
            goto done;
        }
        c->pbuf = nb;
        c->pbuf_cap = wlen + tail;
    }
    w = c->pbuf;
    if (pread_full(c->src_fd, w, wlen + tail, off - wlen) != 0) {
        r = src_error(c, errno);
        goto done;
    }
    /* from the end: the extra field is short (torch: < 64 bytes) */
    for (i = wlen - 30 - nlen + 1; i-- > 0;) {
        const unsigned char *h = w + i;
        uint16_t flags;
        uint32_t crc, comp, size;
        if (rd_le32(h) != 0x04034b50u ||
            (size_t)(h[26] | h[27] << 8) != nlen ||
            i + 30 + nlen + (size_t)(h[28] | h[29] << 8) != wlen ||
            memcmp(h + 30, name.p, nlen) != 0)
            continue;
        flags = (uint16_t)(h[6] | h[7] << 8);
        crc = rd_le32(h + 14);
        comp = rd_le32(h + 18);
        size = rd_le32(h + 22);
        if ((h[8] | h[9] << 8) != 0)
            break; /* not stored */
        if (!(flags & 8)) {
            if (comp != size || size == 0xFFFFFFFFu || size < s->nbytes)
                break; /* ZIP64 sizes: leave it to the library */
            rec->size = size;
            rec->crc = crc;
        } else {
            /* data descriptor: signature, crc, sizes of 4 or 8 bytes */
            size_t k = fsize - off - s->nbytes < sizeof dd
                           ? (size_t)(fsize - off - s->nbytes)
                           : sizeof dd;
            if (off + s->nbytes > fsize || k < 16)
                break;
            if (tail >= s->nbytes + k)
                memcpy(dd, w + wlen + s->nbytes, k);
            else if (pread_full(c->src_fd, dd, k, off + s->nbytes) != 0) {
                r = src_error(c, errno);
                goto done;
            }
            if (rd_le32(dd) != 0x08074b50u)
                break;
            if (rd_le32(dd + 8) == s->nbytes && rd_le32(dd + 12) == s->nbytes)
                rec->crc = rd_le32(dd + 4);
            else if (k >= 24 && rd_le64(dd + 8) == s->nbytes &&
                     rd_le64(dd + 16) == s->nbytes)
                rec->crc = rd_le32(dd + 4);
            else
                break;
            rec->size = s->nbytes;
        }
        if (rec->size > fsize - off)
            break;
        rec->off = off;
        r = rec->crc == 0 ? 1 : 0;
        if (r == 0 && rec->size <= tail) {
            rec->computed = (uint32_t)crc_update(crc32(0L, Z_NULL, 0), w + wlen,
                                                 (size_t)rec->size);
            rec->checked = 1;
        }
        break;
    }
done:
    sb_free(&name);
    return r;
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
        uLong crc = crc32(0L, Z_NULL, 0);
        uint64_t pos = 0;
        if (i >= j->n || atomic_load(&j->stop) || atomic_load(&j->fail))
            break;
        rec = &j->recs[i];
        if (rec->streamed)
            continue;
        while (pos < rec->size && !atomic_load(&j->stop)) {
            size_t k = rec->size - pos < cap ? (size_t)(rec->size - pos) : cap;
            if (pread_full(j->fd, buf, k, rec->off + pos) != 0) {
                crc_claim(j, 3, i, 0, errno);
                break;
            }
            crc = crc_update(crc, buf, k);
            pos += k;
        }
        if (pos == rec->size && (uint32_t)crc != rec->crc)
            crc_claim(j, 2, i, (uint32_t)crc, 0);
    }
    free(buf);
}

static int crc_worker(void *arg)
{
    crc_records(arg);
    return 0;
}

/* Why the check failed, in one line; returns -1. */
static int report_crc(conv *c, const crc_rec *rec, int read_error, int e,
                      uint32_t computed)
{
    sbuf shown;
    progress_hide(&c->prog);
    memset(&shown, 0, sizeof shown);
    put_shown_name(&shown, rec->tensor);
    sb_str(&shown, " in record ");
    put_escaped(&shown, c->info.root);
    sb_str(&shown, "/data/");
    put_escaped(&shown, rec->key);
    sb_char(&shown, '\0');
    if (read_error) {
        if (e == ENOMEM)
            cli_error("%s: out of memory", c->path);
        else
            src_error(c, e);
    } else {
        cli_error("%s: crc mismatch for tensor %s (recorded %08x, computed "
                  "%08x): the file is damaged; --no-verify converts it "
                  "anyway (byte %llu)",
                  c->path, shown.oom ? "?" : shown.p,
                  (unsigned)rec->crc, (unsigned)computed,
                  (unsigned long long)rec->off);
    }
    sb_free(&shown);
    return -1;
}

static int crc_report(conv *c)
{
    crc_job *j = c->job;
    return report_crc(c, &j->recs[j->bad], atomic_load(&j->fail) == 3, j->err,
                      j->computed);
}

/* Nonzero once the worker found damage (the copy can stop). */
static int crc_failed(const conv *c)
{
    return c->job && atomic_load(&c->job->fail) != 0;
}

/* Wait for the worker (told to stop when `abandon`); 0 when every record
 * is intact, else -1 after the report. */
static int crc_join(conv *c, int abandon)
{
    crc_job *j = c->job;
    if (!j)
        return 0;
    if (abandon)
        atomic_store(&j->stop, 1);
    else
        crc_records(j); /* help with what the worker has not started */
    if (j->threaded) {
        thrd_join(j->thread, NULL);
        j->threaded = 0;
    }
    if (abandon)
        return -1;
    return atomic_load(&j->fail) == 0 ? 0 : crc_report(c);
}

static void crc_start(conv *c)
{
    crc_job *j = c->job;
    if (!j || j->n == 0)
        return;
    /* without a thread, the main thread checks everything after the copy */
    if (thrd_create(&j->thread, crc_worker, j) == thrd_success)
        j->threaded = 1;
}

static void crc_free(conv *c)
{
    if (c->job) {
        crc_join(c, 1);
        free(c->job->recs);
        free(c->job);
        c->job = NULL;
    }
}

/* Let the library check the whole file (deflated records, records this
 * program cannot locate): one pass before the copy. */
static int verify_with_library(conv *c)
{
    ckpt_error err;
    memset(&err, 0, sizeof err);
    err.offset = -1;
    if (ckpt_verify(c->f, NULL, NULL, &err) == 0)
        return 0;
    if (err.code == CKPT_E_FORMAT) {
        size_t n = strlen(err.message);
        snprintf(err.message + n, sizeof err.message - n,
                 ": the file is damaged; --no-verify converts it anyway");
    }
    return lib_error(c, &err);
}

/* Plan the check of the ZIP records the written tensors use.  Legacy and
 * TAR files carry no checksum: nothing to do. */
static int is_direct(const conv *c, const ckpt_tensor *t);

static int plan_verify(conv *c)
{
    size_t ns = ckpt_storage_count(c->f), i, nzero = 0;
    unsigned char *seen;
    crc_job *j;
    int need_lib = 0;

    if (!c->verify || c->info.format != CKPT_FORMAT_ZIP || c->nts == 0)
        return 0;
    seen = calloc(ns ? ns : 1, 1);
    j = calloc(1, sizeof *j);
    if (j)
        j->recs = calloc(ns ? ns : 1, sizeof j->recs[0]);
    if (!seen || !j || !j->recs) {
        free(seen);
        if (j)
            free(j->recs);
        free(j);
        return nomem(c);
    }
    j->fd = c->src_fd;
    atomic_init(&j->next, 0);
    atomic_init(&j->stop, 0);
    atomic_init(&j->fail, 0);
    c->job = j;
    for (i = 0; i < c->nts && !need_lib; i++) {
        const ckpt_tensor *t = c->ts[i].t;
        const ckpt_storage *s = ckpt_storage_at(c->f, t->storage);
        crc_rec *rec;
        int r;
        if (!s || t->storage >= ns || seen[t->storage] || s->nbytes == 0)
            continue;
        seen[t->storage] = 1;
        if (s->file_offset < 0) {
            need_lib = 1;
            break;
        }
        rec = &j->recs[j->n];
        memset(rec, 0, sizeof *rec);
        r = find_record(c, s, rec);
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
            rec->key = s->key;
            if (!rec->checked && is_direct(c, t) && t->nbytes >= DIRECT_MIN &&
                (uint64_t)t->file_offset == rec->off && t->nbytes == rec->size) {
                /* the first tensor written from it is all of it */
                rec->streamed = 1;
                c->ts[i].check = j->n + 1;
            }
            if (!rec->checked)
                j->n++; /* the worker (or the copy) checks it */
            else if (rec->computed != rec->crc) {
                free(seen);
                return report_crc(c, rec, 0, 0, rec->computed);
            }
        }
    }
    free(seen);
    if (need_lib) {
        /* the library checks every record: no second check here */
        for (i = 0; i < c->nts; i++)
            c->ts[i].check = 0;
        j->n = 0;
        return verify_with_library(c);
    }
    if (nzero > 0)
        cli_error("%s: warning: %zu record%s carry no CRC-32 (saved without "
                  "one): not checked",
                  c->path, nzero, nzero == 1 ? "" : "s");
    return 0;
}

/* Bytes of one number to reverse for little-endian: the element. */
static size_t elem_size(const ckpt_tensor *t)
{
    return ckpt_dtype_size(t->dtype);
}

/* Its bytes lie in FILE exactly as safetensors stores them. */
static int is_direct(const conv *c, const ckpt_tensor *t)
{
    return t->contiguous && t->file_offset >= 0 &&
           (c->info.byteorder == CKPT_LITTLE || elem_size(t) == 1);
}

static int write_tensor(conv *c, const conv_tensor *ct)
{
    const ckpt_tensor *t = ct->t;
    uint64_t pos = 0, n = t->nbytes;
    size_t es = elem_size(t);
    int direct = is_direct(c, t);
    ckpt_error err;

    if (n == 0)
        return 0;
    /* copied around the library: a read of 0 bytes checks the tensor size
     * limit, reading nothing */
    memset(&err, 0, sizeof err);
    err.offset = -1;
    if (direct && ckpt_tensor_read_range(c->f, t, 0, NULL, 0, &err) != 0)
        return lib_error(c, &err);
    if (direct && n >= DIRECT_MIN) {
        if (stage_flush(c) != 0)
            return -1;
        if (ct->check > 0) {
            /* read, check and write: measured cheaper than the kernel copy
             * plus a second read for the check */
            const crc_rec *rec = &c->job->recs[ct->check - 1];
            uLong crc = crc32(0L, Z_NULL, 0);
            if (copy_rw(c, (uint64_t)t->file_offset, c->stage_off, n, &crc) != 0)
                return -1;
            if ((uint32_t)crc != rec->crc)
                return report_crc(c, rec, 0, 0, (uint32_t)crc);
        } else if (copy_direct(c, (uint64_t)t->file_offset, c->stage_off, n) != 0) {
            return -1;
        }
        c->stage_off += n;
        return 0;
    }
    if (stage_alloc(c) != 0)
        return -1;
    while (pos < n) {
        size_t room = c->stage_cap - c->stage_len;
        size_t k = n - pos < room ? (size_t)(n - pos) : room;
        unsigned char *dst = c->stage + c->stage_len;
        if (!direct && k < n - pos)
            k -= k % es; /* whole elements, to swap them */
        if (k == 0) {
            if (stage_flush(c) != 0)
                return -1;
            continue;
        }
        if (direct) {
            if (pread_full(c->src_fd, dst, k, (uint64_t)t->file_offset + pos) != 0)
                return src_error(c, errno);
        } else {
            memset(&err, 0, sizeof err);
            err.offset = -1;
            if (ckpt_tensor_read_range(c->f, t, pos, dst, k, &err) != 0)
                return lib_error(c, &err);
            if (c->big_host)
                cli_swap_bytes(dst, k, es);
        }
        c->stage_len += k;
        pos += k;
        progress_advance(&c->prog, k);
        if (c->stage_len >= STAGE_FLUSH && stage_flush(c) != 0)
            return -1;
    }
    return 0;
}

/* ---- tensors ------------------------------------------------------------- */

static int collect_tensors(conv *c, int skip_unsupported)
{
    size_t n = ckpt_tensor_count(c->f), i, nbad = 0, nraw = 0;
    sbuf bad, raw, name;
    uint64_t pos = 0;
    int r = 0;

    memset(&bad, 0, sizeof bad);
    memset(&raw, 0, sizeof raw);
    memset(&name, 0, sizeof name);
    c->ts = calloc(n ? n : 1, sizeof c->ts[0]);
    if (!c->ts)
        return nomem(c);
    for (i = 0; i < n && r == 0; i++) {
        const ckpt_tensor *t = ckpt_tensor_at(c->f, i);
        const char *dt;
        conv_tensor *ct;
        if (!t)
            continue;
        if (c->filter && fnmatch(c->filter, t->name, 0) != 0)
            continue;
        if (!is_utf8(t->name)) {
            /* safetensors keys are JSON strings: UTF-8.  Never rename. */
            if (nraw < NAMES_SHOWN) {
                if (nraw > 0)
                    sb_str(&raw, ", ");
                put_shown_name(&raw, t->name);
            }
            nraw++;
            continue;
        }
        dt = st_dtype_name(t->dtype);
        if (!dt) {
            if (nbad < NAMES_SHOWN) {
                if (nbad > 0)
                    sb_str(&bad, ", ");
                if (t->name[0] == '\0')
                    sb_str(&bad, "\"\"");
                put_escaped(&bad, t->name);
                sb_str(&bad, " (");
                sb_str(&bad, ckpt_dtype_name(t->dtype));
                sb_char(&bad, ')');
            }
            nbad++;
            continue;
        }
        name.len = 0;
        st_put_utf8(&name, t->name, strlen(t->name));
        if (name.oom) {
            r = nomem(c);
            break;
        }
        ct = &c->ts[c->nts];
        ct->t = t;
        ct->st_dtype = dt;
        ct->name_len = name.len;
        ct->name = malloc(name.len + 1);
        if (!ct->name) {
            r = nomem(c);
            break;
        }
        memcpy(ct->name, name.p, name.len + 1);
        c->nts++;
        if (strcmp(ct->name, "__metadata__") == 0) {
            r = cli_error("%s: a tensor is named '__metadata__', which safetensors "
                          "reserves",
                          c->path);
            break;
        }
        switch (st_set_add(&c->names, ct->name, ct->name_len)) {
        case 1:
            break;
        case 0:
            name.len = 0;
            put_shown_name(&name, t->name);
            r = cli_error("%s: two tensors would be named %s in safetensors",
                          c->path, name.oom ? "?" : name.p);
            break;
        default:
            r = nomem(c);
            break;
        }
        ct->begin = pos;
        pos += t->nbytes;
    }
    if (r == 0 && nraw > 0) {
        if (nraw > NAMES_SHOWN) {
            char more[48];
            snprintf(more, sizeof more, ", ... (%zu more)", nraw - NAMES_SHOWN);
            sb_str(&raw, more);
        }
        if (raw.oom) {
            r = nomem(c);
        } else if (!skip_unsupported) {
            r = cli_error("%s: cannot convert %zu tensor%s whose name is not valid "
                          "UTF-8, which safetensors names must be: %s "
                          "(--skip-unsupported leaves them out)",
                          c->path, nraw, nraw == 1 ? "" : "s", raw.p);
        } else {
            cli_error("%s: warning: left out %zu tensor%s whose name is not "
                      "valid UTF-8: %s",
                      c->path, nraw, nraw == 1 ? "" : "s", raw.p);
        }
    }
    if (r == 0 && nbad > 0) {
        if (nbad > NAMES_SHOWN) {
            char more[48];
            snprintf(more, sizeof more, ", ... (%zu more)", nbad - NAMES_SHOWN);
            sb_str(&bad, more);
        }
        if (bad.oom) {
            r = nomem(c);
        } else if (!skip_unsupported) {
            r = cli_error("%s: cannot convert %zu tensor%s safetensors has no dtype "
                          "for: %s (--skip-unsupported leaves them out)",
                          c->path, nbad, nbad == 1 ? "" : "s", bad.p);
        } else {
            cli_error("%s: warning: left out %zu tensor%s safetensors has no "
                      "dtype for: %s",
                      c->path, nbad, nbad == 1 ? "" : "s", bad.p);
        }
    }
    if (r == 0 && c->filter && c->nts == 0 && nraw == 0 && nbad == 0) {
        name.len = 0;
        put_shown_name(&name, c->filter);
        sb_char(&name, '\0');
        cli_error("%s: warning: --filter %s matches no tensor", c->path,
                  name.oom ? "?" : name.p);
    }
    c->data_size = pos;
    sb_free(&bad);
    sb_free(&raw);
    sb_free(&name);
    return r == 0 ? 0 : -1;
}

/* ---- metadata ------------------------------------------------------------ */

/* Add key = val (raw bytes, made valid UTF-8) unless the key is taken or
 * either is too long.  `config` entries count against the cap. */
static int meta_add(conv *c, const char *key, size_t klen, const char *val,
                    size_t vlen, int config)
{
    sbuf kb, vb;
    meta_entry *m;
    int r;

    if (config && (klen > META_MAX_TEXT || vlen > META_MAX_TEXT)) {
        c->meta_dropped = 1;
        return 0;
    }
    if (config && c->nconfig >= META_MAX_ENTRIES) {
        c->meta_dropped = 1;
        return 0;
    }
    if (c->nmeta == c->meta_cap) {
        size_t cap = c->meta_cap ? c->meta_cap * 2 : 64;
        meta_entry *p = realloc(c->meta, cap * sizeof *p);
        if (!p)
            return nomem(c);
        c->meta = p;
        c->meta_cap = cap;
    }
    memset(&kb, 0, sizeof kb);
    memset(&vb, 0, sizeof vb);
    st_put_utf8(&kb, key, klen);
    st_put_utf8(&vb, val, vlen);
    sb_char(&kb, '\0');
    sb_char(&vb, '\0');
    if (kb.oom || vb.oom) {
        sb_free(&kb);
        sb_free(&vb);
        return nomem(c);
    }
    m = &c->meta[c->nmeta];
    m->key = kb.p;
    m->klen = kb.len - 1;
    m->val = vb.p;
    m->vlen = vb.len - 1;
    r = st_set_add(&c->meta_keys, m->key, m->klen);
    if (r <= 0) {
        sb_free(&kb);
        sb_free(&vb);
        return r < 0 ? nomem(c) : 0; /* first one wins */
    }
    c->nmeta++;
    if (config)
        c->nconfig++;
    return 0;
}

typedef struct walk_item {
    const ckpt_value *v;
    char *path;
    size_t plen;
    uint32_t depth;
} walk_item;

typedef struct walk {
    conv *c;
    walk_item *q;
    size_t head, len, cap;
    cli_ptrmap seen;
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
    case CKPT_V_BOOL:
        sb_str(&w->text, ckpt_value_bool(v) ? "True" : "False");
        return 1;
    case CKPT_V_INT:
        st_put_i64(&w->text, ckpt_value_int(v));
        return 1;
    case CKPT_V_FLOAT:
        n = ckpt_float_repr(ckpt_value_float(v), tmp);
        sb_add(&w->text, tmp, n);
        return 1;
    case CKPT_V_BIGINT:
    case CKPT_V_STR:
        s = ckpt_value_text(v, &n);
        if (!s)
            return 0;
        if (n > META_MAX_TEXT) {
            w->c->meta_dropped = 1;
            return 0;
        }
        sb_add(&w->text, s, n);
        return 1;
    default:
        return 0;
    }
}

/* A dict key as a path component into w->text: str as is, numbers, bools
 * and None as Python's str() prints them; 0 for other keys. */
static int key_text(walk *w, const ckpt_value *k)
{
    if (!k)
        return 0;
    if (ckpt_value_kind(k) == CKPT_V_NONE) {
        w->text.len = 0;
        sb_str(&w->text, "None");
        return 1;
    }
    return scalar_text(w, k);
}

static int is_container(ckpt_kind k)
{
    return k == CKPT_V_DICT || k == CKPT_V_LIST || k == CKPT_V_TUPLE ||
           k == CKPT_V_OBJECT;
}

/* parent.path + "." + comp into w->path. */
static void join_path(walk *w, const walk_item *parent, const char *comp,
                      size_t clen)
{
    w->path.len = 0;
    sb_add(&w->path, parent->path ? parent->path : "", parent->plen);
    if (parent->plen > 0)
        sb_char(&w->path, '.');
    sb_add(&w->path, comp, clen);
}

static int walk_push(walk *w, const ckpt_value *v, const char *path, size_t plen,
                     uint32_t depth)
{
    walk_item *it;
    if (w->len == w->cap) {
        size_t cap = w->cap ? w->cap * 2 : 64;
        walk_item *q = realloc(w->q, cap * sizeof *q);
        if (!q)
            return nomem(w->c);
        w->q = q;
        w->cap = cap;
    }
    it = &w->q[w->len];
    it->path = malloc(plen + 1);
    if (!it->path)
        return nomem(w->c);
    memcpy(it->path, path, plen);
    it->path[plen] = '\0';
    it->plen = plen;
    it->v = v;
    it->depth = depth;
    w->len++;
    return 0;
}

/* Mark a container seen; 0 if it was already. */
static int mark_seen(walk *w, const ckpt_value *v)
{
    if (cli_ptrmap_get(&w->seen, v))
        return 0;
    if (cli_ptrmap_put(&w->seen, v, "") != 0)
        return nomem(w->c);
    return 1;
}

/* One child of `parent` under component comp: a scalar becomes an entry, a
 * container not seen yet is queued. */
static int walk_child(walk *w, const walk_item *parent, const char *comp,
                      size_t clen, const ckpt_value *v)
{
    ckpt_kind kind;
    int r;
    if (!v || w->full)
        return 0;
    kind = ckpt_value_kind(v);
    if (is_container(kind)) {
        if ((r = mark_seen(w, v)) <= 0)
            return r;
        join_path(w, parent, comp, clen);
        if (w->path.oom)
            return nomem(w->c);
        if (parent->depth + 1 > META_MAX_DEPTH || w->path.len > META_MAX_TEXT) {
            w->c->meta_dropped = 1;
            return 0;
        }
        return walk_push(w, v, w->path.p, w->path.len, parent->depth + 1);
    }
    if (!scalar_text(w, v))
        return 0;
    if (w->c->nconfig >= META_MAX_ENTRIES) {
        w->c->meta_dropped = 1;
        w->full = 1;
        return 0;
    }
    join_path(w, parent, comp, clen);
    if (w->path.oom || w->text.oom)
        return nomem(w->c);
    return meta_add(w->c, w->path.p, w->path.len, w->text.p, w->text.len, 1);
}

/* The entries of dict d as children of parent. */
static int walk_dict(walk *w, const walk_item *parent, const ckpt_value *d)
{
    size_t n = ckpt_value_len(d), i;
    sbuf comp;
    int r = 0;
    memset(&comp, 0, sizeof comp);
    for (i = 0; i < n && r == 0 && !w->full; i++) {
        if (!key_text(w, ckpt_value_key(d, i)))
            continue;
        comp.len = 0;
        sb_add(&comp, w->text.p, w->text.len);
        if (comp.oom) {
            r = nomem(w->c);
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
    case CKPT_V_DICT:
        return walk_dict(w, it, v);
    case CKPT_V_LIST:
    case CKPT_V_TUPLE:
        n = ckpt_value_len(v);
        for (i = 0; i < n && !w->full; i++) {
            int k = snprintf(comp, sizeof comp, "%zu", i);
            if (walk_child(w, it, comp, (size_t)k, ckpt_value_item(v, i)) != 0)
                return -1;
        }
        return 0;
    case CKPT_V_OBJECT:
        /* as `ckpt show` does: a dict state (the usual __dict__) holds the
         * object's own entries; other parts go under "state", "items",
         * "list"; constructor arguments are not configuration */
        part = ckpt_object_state(v);
        if (part && ckpt_value_kind(part) == CKPT_V_DICT) {
            if ((r = mark_seen(w, part)) < 0)
                return -1;
            if (r > 0 && walk_dict(w, it, part) != 0)
                return -1;
        } else if (walk_child(w, it, "state", 5, part) != 0) {
            return -1;
        }
        if (walk_child(w, it, "items", 5, ckpt_object_items(v)) != 0)
            return -1;
        return walk_child(w, it, "list", 4, ckpt_object_list(v));
    default:
        return 0;
    }
}

/* Breadth first, so that shallow values (epoch, config.lr) are kept before
 * deep ones (optimizer internals) when the cap is reached. */
static int collect_metadata(conv *c)
{
    const ckpt_value *root = ckpt_root(c->f);
    const char *fmt = ckpt_format_name(c->info.format);
    walk w;
    int r = 0;

    if (meta_add(c, "format", 6, "pt", 2, 0) != 0 ||
        meta_add(c, "ckpt.source_format", 18, fmt, strlen(fmt), 0) != 0)
        return -1;
    if (!root || !is_container(ckpt_value_kind(root)))
        return 0;
    memset(&w, 0, sizeof w);
    w.c = c;
    if (mark_seen(&w, root) < 0 || walk_push(&w, root, "", 0, 0) != 0)
        r = -1;
    while (r == 0 && w.head < w.len && !w.full) {
        walk_item it = w.q[w.head++];
        r = walk_item_children(&w, &it);
        free(it.path);
        w.q[w.head - 1].path = NULL;
    }
    for (; w.head < w.len; w.head++)
        free(w.q[w.head].path);
    free(w.q);
    cli_ptrmap_free(&w.seen);
    sb_free(&w.path);
    sb_free(&w.text);
    if (r == 0 && c->meta_dropped)
        cli_error("%s: warning: some values were left out of the metadata (it "
                  "keeps at most %d, with keys and values of at most %d bytes, "
                  "%d levels deep)",
                  c->path, META_MAX_ENTRIES, META_MAX_TEXT, META_MAX_DEPTH);
    return r;
}

/* ---- header -------------------------------------------------------------- */

static int build_header(conv *c, sbuf *h)
{
    size_t i;
    uint32_t d;
    uint64_t total;

    sb_add(h, "\0\0\0\0\0\0\0\0", 8); /* the length, filled in below */
    sb_str(h, "{\"__metadata__\":{");
    for (i = 0; i < c->nmeta; i++) {
        if (i > 0)
            sb_char(h, ',');
        st_put_json_string(h, c->meta[i].key, c->meta[i].klen);
        sb_char(h, ':');
        st_put_json_string(h, c->meta[i].val, c->meta[i].vlen);
    }
    sb_char(h, '}');
    for (i = 0; i < c->nts; i++) {
        const conv_tensor *ct = &c->ts[i];
        const ckpt_tensor *t = ct->t;
        sb_char(h, ',');
        st_put_json_string(h, ct->name, ct->name_len);
        sb_str(h, ":{\"dtype\":\"");
        sb_str(h, ct->st_dtype);
        sb_str(h, "\",\"shape\":[");
        for (d = 0; d < t->ndim; d++) {
            if (d > 0)
                sb_char(h, ',');
            st_put_i64(h, t->shape[d]);
        }
        sb_str(h, "],\"data_offsets\":[");
        st_put_u64(h, ct->begin);
        sb_char(h, ',');
        st_put_u64(h, ct->begin + t->nbytes);
        sb_str(h, "]}");
    }
    sb_char(h, '}');
    while (h->len % ST_ALIGN != 0)
        sb_char(h, ' ');
    if (h->oom)
        return nomem(c);
    total = h->len - 8;
    if (total > ST_MAX_HEADER) {
        cli_error("%s: the safetensors header would be %llu bytes, more than "
                  "the %u bytes readers accept",
                  c->path, (unsigned long long)total, ST_MAX_HEADER);
        return -1;
    }
    for (i = 0; i < 8; i++)
        h->p[i] = (char)((total >> (8 * i)) & 0xFF);
    c->data_start = h->len;
    return 0;
}

/* ---- output file --------------------------------------------------------- */

static int write_output(conv *c, const cli_out_opts *oo)
{
    cli_out o;
    sbuf h;
    size_t i;
    int r = 0;

    memset(&h, 0, sizeof h);
    if (build_header(c, &h) != 0) {
        sb_free(&h);
        return -1;
    }
    if (cli_out_open(&o, c->out, oo) != 0) {
        sb_free(&h);
        return -1;
    }
    c->out = o.shown;
    c->out_fd = o.fd;
    c->stream = o.in_place;
    if (c->stream)
        c->copy_mode = COPY_SENDFILE; /* copy_file_range needs a regular file */
    r = reserve(c, h.len + c->data_size);
    if (r == 0 && out_write(c, h.p, h.len, 0) != 0)
        r = out_error(c, errno);
    sb_free(&h);
    c->stage_off = c->data_start;
#ifdef POSIX_FADV_SEQUENTIAL
    posix_fadvise(c->src_fd, 0, 0, POSIX_FADV_SEQUENTIAL);
#endif
    progress_start(&c->prog, c->data_size, "converting");
    if (r == 0)
        crc_start(c);
    for (i = 0; i < c->nts && r == 0 && !crc_failed(c); i++)
        if (write_tensor(c, &c->ts[i]) != 0)
            r = -1;
    if (r == 0 && stage_flush(c) != 0)
        r = -1;
    if (r == 0)
        write_behind(c, c->stage_off, 1);
    /* the copy is done: the check decides */
    r = crc_join(c, r != 0) != 0 ? -1 : r;
    progress_finish(&c->prog);
    if (r != 0) {
        cli_out_abort(&o);
        return -1;
    }
    return cli_out_commit(&o);
}

/* ---- command ------------------------------------------------------------- */

static void conv_free(conv *c)
{
    size_t i;
    for (i = 0; i < c->nts; i++)
        free(c->ts[i].name);
    free(c->ts);
    for (i = 0; i < c->nmeta; i++) {
        free(c->meta[i].key);
        free(c->meta[i].val);
    }
    free(c->meta);
    st_set_free(&c->names);
    st_set_free(&c->meta_keys);
    free(c->stage);
    free(c->pbuf);
    crc_free(c);
    ckpt_close(c->f);
    if (c->src_fd >= 0)
        close(c->src_fd);
}

/* Open FILE read-only and the checkpoint on top of that descriptor. */
static int open_source(conv *c, const char *key)
{
    ckpt_options opt;
    ckpt_reader rd;
    ckpt_error err;
    uint64_t size;

    if (cli_input_fd(c->path, &c->src_fd, &size, &err) != CLI_OK) {
        c->src_fd = -1;
        cli_file_error(c->path, &err);
        return -1;
    }
    if (strcmp(c->path, "-") == 0)
        c->path = "standard input";
    cli_options(&opt);
    opt.key = key;
    memset(&rd, 0, sizeof rd);
    rd.read = reader_read;
    rd.opaque = (void *)(intptr_t)c->src_fd;
    rd.size = size;
    memset(&err, 0, sizeof err);
    err.offset = -1;
    c->f = ckpt_open_reader(&rd, &opt, &err);
    if (!c->f) {
        cli_file_error(c->path, &err);
        return -1;
    }
    ckpt_get_info(c->f, &c->info);
    if (c->info.format == CKPT_FORMAT_TORCHSCRIPT) {
        cli_error("%s: a TorchScript archive: reading TorchScript weights is "
                  "not supported yet",
                  c->path);
        return -1;
    }
    return 0;
}

int cmd_convert(int argc, char **argv)
{
    int nops = 0, r, skip = 0, force = 0, sync = 0, no_verify = 0;
    const char *key = NULL, *filter = NULL;
    char *ops[2];
    cli_out_opts oo;
    struct stat st;
    conv c;
    const cli_option options[] = {
        {"--key", 0, 1, &key, NULL},
        {"--skip-unsupported", 0, 0, NULL, &skip},
        {"--force", 0, 0, NULL, &force},
        {"--sync", 0, 0, NULL, &sync},
        {"--no-verify", 0, 0, NULL, &no_verify},
        {"--filter", 0, 1, &filter, NULL},
    };

    r = cli_parse(argc, argv, options, sizeof options / sizeof options[0], usage,
                  ops, 2, &nops);
    if (r != CLI_CONTINUE)
        return r;
    if (nops < 1)
        return cli_usage_error("convert: missing FILE");
    if (nops < 2)
        return cli_usage_error("convert: missing OUT (the safetensors file to write)");
    if (ops[1][0] == '\0')
        return cli_usage_error("convert: the output file name is empty");

    memset(&c, 0, sizeof c);
    c.path = ops[0];
    c.sync = sync;
    c.out = ops[1];
    c.src_fd = -1;
    c.out_fd = -1;
    c.big_host = cli_host_big_endian();
    c.verify = !no_verify;
    c.filter = filter;
#ifdef SIGXFSZ
    /* past a file size limit, fail the write (EFBIG) and clean up rather
     * than be killed with the temporary file left behind */
    signal(SIGXFSZ, SIG_IGN);
#endif

    if (strcmp(c.out, "-") == 0 && isatty(STDOUT_FILENO))
        return cli_error("not writing a safetensors file to a terminal; redirect "
                         "standard output or name OUT");
    memset(&oo, 0, sizeof oo);
    oo.force = force;
    oo.sync = sync;
    oo.input = ops[0];
    /* refuse a doomed OUT (a folder, the input, an existing file) before
     * any work: cli_out_open() checks again when it opens OUT */
    if (strcmp(c.out, "-") != 0 && stat(c.out, &st) == 0) {
        if (S_ISDIR(st.st_mode))
            return cli_error("%s: is a directory", c.out);
        if (cli_same_file(ops[0], &st))
            return cli_error("%s: is the same file as the input; not writing over it",
                             c.out);
        if (S_ISREG(st.st_mode) && !force)
            return cli_error("%s: already exists (--force replaces it)", c.out);
    }

    r = CLI_FAIL;
    if (open_source(&c, key) == 0 && collect_tensors(&c, skip) == 0 &&
        collect_metadata(&c) == 0 && plan_verify(&c) == 0 &&
        write_output(&c, &oo) == 0)
        r = CLI_OK;
    conv_free(&c);
    return r;
}
