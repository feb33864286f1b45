/*
 * cmd_convert.c - `ckpt convert`: write a checkpoint's tensors as a
 * safetensors file, or as a Hugging Face folder (model.safetensors, or
 * shards model-0000K-of-0000N.safetensors and model.safetensors.index.json).
 *
 * The writer is the library's (include/ckpt_export.h,
 * src/tools/safetensors.c): it plans the file (names, dtypes, metadata,
 * header, the CRC checks), then copies the tensors from the descriptor
 * FILE was opened on (copy_file_range, sendfile or pread), checking the
 * CRC-32 of the ZIP records as the copy goes on.  This file parses the
 * options, opens FILE, applies the output policy of output.c (OUT under a
 * temporary name beside it, its blocks reserved and written back to disk as
 * the copy goes on with --sync, synced and renamed, or, without --force,
 * hard-linked, so that an OUT created meanwhile is never replaced, only once
 * every byte is there), draws the progress bar and prints the library's
 * warnings and errors.
 *
 * Into a folder: one plan of the whole file (every refusal and warning
 * comes from it, before anything is written), split into shards as
 * transformers does, each shard planned again with `select` and written
 * atomically, the index last.  When reading costs CPU (deflated records,
 * or a source without one descriptor), worker threads read tensors ahead
 * while this thread writes them in order (see "read-ahead" below).
 */
#ifndef _FILE_OFFSET_BITS
#define _FILE_OFFSET_BITS 64
#endif

#include "cli.h"
#include "progress.h"

#include "ckpt_export.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static const char usage[] =
    "Usage: ckpt convert [--key K] [--filter GLOB] [--skip-unsupported]\n"
    "                    [--no-verify] [--tied once|copy] [--max-shard-size SIZE]\n"
    "                    [--jobs N] [--force] [--sync] FILE OUT|OUTDIR/\n"
    "Write the tensors of checkpoint FILE to OUT in the safetensors format\n"
    "(https://github.com/huggingface/safetensors), without running any code\n"
    "from FILE.  Every tensor keeps its name (as listed by 'ckpt ls'), dtype and\n"
    "shape; views and tensors sharing a storage each get their own copy of\n"
    "their elements, row-major and little-endian.  Memory use stays bounded\n"
    "(an 8 MiB buffer; with read-ahead, 64 MiB) whatever the size of FILE.\n"
    "\n"
    "OUTDIR/ (a name ending in '/', or an existing directory; made if missing)\n"
    "receives Hugging Face's layout, as transformers' save_pretrained writes it:\n"
    "OUTDIR/model.safetensors, or, when the tensors pass --max-shard-size,\n"
    "model-00001-of-0000N.safetensors ... (tensors in file order, a new shard\n"
    "when the next tensor would pass the size; a bigger tensor alone) and\n"
    "model.safetensors.index.json ({\"metadata\": {\"total_size\": BYTES},\n"
    "\"weight_map\": {NAME: SHARD}}), written last: every file is written under\n"
    "a temporary name first, then all are put in place together (the index\n"
    "last, signals held meanwhile), so that a failed or interrupted run\n"
    "(SIGINT, SIGTERM, SIGHUP) leaves an earlier export there whole and no\n"
    "temporary file (only SIGKILL or a crash can leave .NAME.XXXXXX files).\n"
    "A symlink in OUTDIR is the entry itself: --force replaces it by a new\n"
    "file (mode 0666 & ~umask), never writing its target.\n"
    "With --force, the files of an earlier export into OUTDIR that this one\n"
    "did not replace (model-NNNNN-of-NNNNN.safetensors shards of another\n"
    "count, the other layout's model.safetensors or index) are removed once\n"
    "the new files are in place, and nothing else; without, a warning names\n"
    "them.\n"
    "\n"
    "dtypes: float64 F64, float32 F32, float16 F16, bfloat16 BF16, int64 I64,\n"
    "int32 I32, int16 I16, int8 I8, uint8 U8, bool BOOL, uint16 U16, uint32 U32,\n"
    "uint64 U64, float8_e4m3fn F8_E4M3, float8_e5m2 F8_E5M2, complex64 C64.\n"
    "safetensors has no dtype for complex128, complex32 and float8 fnuz/e8m0\n"
    "tensors: FILE is refused, naming them, unless --skip-unsupported leaves\n"
    "them out.  So are tensors whose\n"
    "name is not valid UTF-8 (safetensors names are JSON strings; a name is\n"
    "never changed): the message shows their bytes escaped as \\xNN; and\n"
    "tensors that cannot be read (meta tensors, ...: 'ckpt ls' says why),\n"
    "named with the reason.\n"
    "\n"
    "Tied weights (one storage viewed the same way under several names, e.g.\n"
    "lm_head.weight and embed.weight): safetensors has no aliasing.  With\n"
    "'--tied once' (the default for OUTDIR/) each is written once, under the\n"
    "first name in byte order, and \"__metadata__\" maps every other name to\n"
    "it (\"lm_head.weight\": \"embed.weight\"), as safetensors' save_model() does\n"
    "(load_model() ties them again), after \"ckpt.tied\": \"N\" counting them\n"
    "(ckpt's reader lists them as tensors again); a warning lists them.\n"
    "'--tied copy' (the default for one OUT file) writes a copy under every name.\n"
    "\n"
    "What is copied is checked: the CRC-32 of every ZIP record a tensor is\n"
    "copied from is computed as the copy goes on and compared with the one\n"
    "the ZIP recorded (a tensor that is a whole record is checked in the\n"
    "buffer it is copied through; views and shared storages are read by a\n"
    "second thread); a mismatch names the tensor and record, exits 1 and\n"
    "leaves no OUT.\n"
    "Deflated records are checked by a pass over the whole file first, unless\n"
    "read-ahead checks each in the buffer its tensor is read into.\n"
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
    "A TorchScript archive gives its state_dict() tensors, a torch.export\n"
    ".pt2 its state dict and constants.\n"
    "\n"
    "OUT is written under a temporary name in its directory and appears only\n"
    "once complete: a failed or interrupted conversion leaves no OUT behind.\n"
    "An existing OUT is left alone (exit status 1) unless --force is given;\n"
    "a replaced OUT keeps its mode, and a symlink OUT keeps pointing at it.\n"
    "OUT '-' streams the file to standard output (not to a terminal); a\n"
    "device or a FIFO given as OUT is written in place.  FILE '-' reads the\n"
    "checkpoint from standard input (a pipe is copied to $TMPDIR first, up to\n"
    "--max-spool).  OUT is never a file of the input, even with --force: not\n"
    "FILE, nor a shard, .distcp file, index or .metadata of a folder, index or\n"
    "DCP checkpoint (compared by device and inode); into the input's own\n"
    "folder, a conversion that would replace or remove one is refused before\n"
    "anything is written.\n"
    "A progress bar is shown on standard error when it is a terminal and\n"
    "the job is long (64 MiB of tensors, or half a second).\n"
    "\n"
    "Options:\n"
    "  --key K             only the tensors (and values) under key K (e.g.\n"
    "                      state_dict): a top-level key or a path of keys\n"
    "                      (model.encoder), as for ls; names relative to it\n"
    "  --filter GLOB       only the tensors whose name (as 'ckpt ls' shows it,\n"
    "                      after --key) matches GLOB (fnmatch: * ? [...];\n"
    "                      '*' also matches '.')\n"
    "  --skip-unsupported  leave out tensors safetensors cannot hold (no dtype\n"
    "                      for them, or a name that is not UTF-8) or that\n"
    "                      cannot be read (they are listed in a warning)\n"
    "                      instead of failing\n"
    "  --no-verify         do not check the CRC-32 of the copied records\n"
    "                      (converts a damaged file as it is); FILE of several\n"
    "                      files: their parts are checked first, on --jobs threads\n"
    "  --tied once|copy    tied weights written once (aliases in the metadata)\n"
    "                      or copied under every name (see above)\n"
    "  --max-shard-size SIZE\n"
    "                      OUTDIR/: the most tensor bytes per shard (default\n"
    "                      5GB); as transformers reads it: 5GB, 500MB, 10KB are\n"
    "                      powers of 10, 10GiB, 10MiB, 10KiB of 2, a final\n"
    "                      lowercase b means bits (5Gb = 625MB), a bare number\n"
    "                      is bytes.  With one OUT file: a usage error\n"
    "  --jobs N            threads reading tensors ahead while OUT is written,\n"
    "                      when reading costs CPU (deflated records) or goes\n"
    "                      through the library (several input files); default:\n"
    "                      the online CPUs, at most 8; 1: none\n"
    "  --force             replace OUT if it exists (OUTDIR/: and remove the\n"
    "                      files of an earlier export, see above)\n"
    "  --sync              flush OUT to disk before it appears (durable against\n"
    "                      a power loss; like cp, the default only makes the\n"
    "                      rename atomic)\n"
    "  -h, --help          show this help\n";

#define DEFAULT_SHARD ((uint64_t)5000000000u) /* transformers' "5GB" */
#define RA_UNIT ((uint64_t)32 << 20)          /* a tensor up to this is read whole by a worker */
#define RA_BUDGET ((uint64_t)64 << 20)        /* bytes read ahead and not yet written */
#define RA_CHUNK ((size_t)8 << 20)            /* bigger tensors: read here, in pieces */

typedef struct conv {
    const char *path; /* FILE, for messages */
    ckpt_file *f;
    int src_fd;
    progress prog;
    int started;    /* the progress bar began */
    uint64_t shown; /* bytes it was told of */
    uint64_t base;  /* bytes of the shards written before this one */
    uint64_t total; /* tensor bytes of the whole conversion */
    /* shards */
    struct shard_ref *refs; /* every tensor written and its shard, by address */
    size_t nrefs;
    size_t shard; /* the one being planned */
    /* read-ahead */
    int jobs;
    int pool_check;              /* check CRCs in the read-ahead buffers */
    unsigned char *stor_checked; /* per storage: its check is planned */
    int big_host;
} conv;

static void on_progress(void *ctx, uint64_t done, uint64_t total)
{
    conv *c = ctx;
    (void)total;
    if (!c->started) {
        progress_start(&c->prog, c->total, "converting");
        c->started = 1;
    }
    done += c->base;
    if (done > c->shown) {
        progress_advance(&c->prog, done - c->shown);
        c->shown = done;
    }
}

static void on_warning(void *ctx, const char *line)
{
    conv *c = ctx;
    progress_hide(&c->prog);
    cli_error("%s: warning: %s", c->path, line);
}

/* The library's error, worded as the command always printed it: the
 * reader's messages escaped (cli_file_error), the export's own as they
 * are (names in them are escaped already), output errors naming OUT. */
static int report(const conv *c, const char *out, const ckpt_error *err, int origin)
{
    if (origin == CKPT_EXPORT_FROM_READER) return cli_file_error(c->path, err);
    if (origin == CKPT_EXPORT_FROM_OUTPUT) return cli_error("%s: %s", out, err->message);
    if (err->offset >= 0)
        return cli_error("%s: %s (byte %lld)", c->path, err->message, (long long)err->offset);
    return cli_error("%s: %s", c->path, err->message);
}

/* Open FILE read-only and the checkpoint on top of that descriptor.  What
 * that cannot open (a folder, an index of shards) goes through the one
 * function the other commands open inputs with, without a descriptor. */
static int open_source(conv *c, const char *key, size_t key_len)
{
    ckpt_options opt;
    ckpt_reader rd;
    ckpt_error err, again;
    uint64_t size;
    struct stat st;

    cli_options(&opt);
    opt.key = key;
    opt.key_len = key_len;
    memset(&err, 0, sizeof err);
    err.offset = -1;
    if (strcmp(c->path, "-") != 0 && stat(c->path, &st) == 0 && S_ISDIR(st.st_mode)) {
        c->f = cli_open_input(c->path, &opt, &err);
        return c->f ? 0 : (cli_file_error(c->path, &err), -1);
    }
    if (cli_input_fd(c->path, &c->src_fd, &size, &err) != CLI_OK) {
        c->src_fd = -1;
        cli_file_error(c->path, &err);
        return -1;
    }
    if (strcmp(c->path, "-") == 0) c->path = "standard input";
    memset(&rd, 0, sizeof rd);
    rd.read = cli_pread_reader; /* the descriptor the export copies from:
                                    both see the same file */
    rd.opaque = (void *)(intptr_t)c->src_fd;
    rd.size = size;
    c->f = ckpt_open_reader(&rd, &opt, &err);
    if (!c->f && err.code == CKPT_E_FORMAT && strcmp(c->path, "standard input") != 0) {
        memset(&again, 0, sizeof again);
        again.offset = -1;
        c->f = cli_open_input(c->path, &opt, &again);
        if (c->f) {
            close(c->src_fd);
            c->src_fd = -1;
        }
    }
    if (!c->f) {
        cli_file_error(c->path, &err);
        return -1;
    }
    return 0;
}

/* ---- sizes and counts ----------------------------------------------------- */

/* transformers' convert_file_size_to_int(): "5GB" 5*10^9, "10MiB" 10*2^20,
 * "5Gb" bits (/8), a bare number bytes.  0 when it does not parse. */
static uint64_t parse_size(const char *s)
{
    static const struct {
        const char *unit;
        uint64_t mul;
    } units[] = {{"GIB", 1ull << 30},
                 {"MIB", 1ull << 20},
                 {"KIB", 1ull << 10},
                 {"GB", 1000000000ull},
                 {"MB", 1000000ull},
                 {"KB", 1000ull},
                 {"", 1}};
    uint64_t v = 0;
    size_t i, n = 0, ul;
    while (s[n] >= '0' && s[n] <= '9') {
        if (v > (UINT64_MAX - 9) / 10) return 0;
        v = v * 10 + (uint64_t)(s[n++] - '0');
    }
    if (n == 0) return 0;
    ul = strlen(s + n);
    for (i = 0; i < sizeof units / sizeof units[0]; i++) {
        size_t k;
        if (strlen(units[i].unit) != ul) continue;
        for (k = 0; k < ul; k++)
            if ((s[n + k] & ~0x20) != units[i].unit[k]) break;
        if (k < ul) continue;
        if (v > UINT64_MAX / units[i].mul) return 0;
        v *= units[i].mul;
        if (ul == 2 && s[n + 1] == 'b') v /= 8; /* transformers: "Gb" are bits */
        return v;
    }
    return 0;
}

/* ---- read-ahead ------------------------------------------------------------ */

/* Worker threads read the tensors of a plan ahead, each a whole tensor
 * into its own buffer (one inflate pass for a deflated record), at most
 * RA_BUDGET bytes ahead of the writer; this thread writes them in order.
 * Tensors over RA_UNIT are read by the writer itself, in pieces (a
 * deflated record's cursor then resumes from piece to piece).  A tensor
 * that is all of its ZIP record has the record's CRC-32 checked in its
 * buffer (pool_check). */
enum { RA_WAIT, RA_BUSY, RA_DONE, RA_FAIL, RA_INLINE };

typedef struct ra_item {
    const ckpt_tensor *t;
    unsigned char *buf;
    int state;
    int check; /* compare the CRC-32 of the bytes with want */
    uint32_t want, got;
    const char *rec_name;
    uint64_t rec_off;
    ckpt_error err;
} ra_item;

typedef struct ra {
    const ckpt_file *f;
    ra_item *it;
    size_t n, next;
    uint64_t inflight;
    int stop, big_host;
    pthread_mutex_t mu;
    pthread_cond_t cv;
} ra;

static void to_little(const ckpt_tensor *t, unsigned char *p, size_t n)
{
    size_t unit = ckpt_dtype_size(t->dtype);
    if (t->dtype == CKPT_COMPLEX64 || t->dtype == CKPT_COMPLEX128 || t->dtype == CKPT_COMPLEX32)
        unit /= 2;
    cli_swap_bytes(p, n, unit);
}

static void *ra_worker(void *arg)
{
    ra *q = arg;
    pthread_mutex_lock(&q->mu);
    while (!q->stop && q->next < q->n) {
        ra_item *it = &q->it[q->next];
        uint64_t nb = it->t->nbytes;
        unsigned char *buf;
        int ok;
        if (nb > RA_UNIT) {
            it->state = RA_INLINE;
            q->next++;
            pthread_cond_broadcast(&q->cv);
            continue;
        }
        if (q->inflight > 0 && q->inflight + nb > RA_BUDGET) {
            pthread_cond_wait(&q->cv, &q->mu);
            continue;
        }
        q->next++;
        q->inflight += nb;
        it->state = RA_BUSY;
        pthread_mutex_unlock(&q->mu);
        buf = malloc(nb ? (size_t)nb : 1);
        memset(&it->err, 0, sizeof it->err);
        it->err.offset = -1;
        if (!buf) {
            it->err.code = CKPT_E_NOMEM;
            snprintf(it->err.message, sizeof it->err.message, "out of memory");
            ok = 0;
        } else {
            ok = ckpt_tensor_read(q->f, it->t, buf, (size_t)nb, &it->err) == 0;
        }
        if (ok && it->check) it->got = ckpt_crc32(0, buf, (size_t)nb);
        if (ok && q->big_host) to_little(it->t, buf, (size_t)nb);
        pthread_mutex_lock(&q->mu);
        it->buf = buf;
        it->state = ok ? RA_DONE : RA_FAIL;
        pthread_cond_broadcast(&q->cv);
    }
    pthread_mutex_unlock(&q->mu);
    return NULL;
}

static int write_all(int fd, const void *p, size_t n)
{
    const unsigned char *b = p;
    while (n > 0) {
        ssize_t w = write(fd, b, n);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) return -1;
        b += w;
        n -= (size_t)w;
    }
    return 0;
}

static int crc_mismatch(const conv *c, const ra_item *it, uint32_t got)
{
    sbuf b;
    int r;
    memset(&b, 0, sizeof b);
    cli_escape(&b, it->t->name, it->t->name_len, (size_t)-1, CLI_ESC_QUOTED);
    cli_escape(&b, "", 0, 0, 0);
    sb_char(&b, '\0');
    r = cli_error("%s: crc mismatch for tensor '%s' in record %s (recorded %08x, computed "
                  "%08x): the file is damaged; --no-verify converts it anyway (byte %llu)",
                  c->path, b.oom ? "?" : b.p, it->rec_name, (unsigned)it->want, (unsigned)got,
                  (unsigned long long)it->rec_off);
    sb_free(&b);
    return r;
}

/* Which tensors of the plan check their record (pool_check): the first
 * whole-record tensor of each storage not yet planned for a check. */
static void plan_checks(conv *c, ra_item *items, size_t n)
{
    size_t i;
    ckpt_info info;
    if (!c->pool_check) return;
    ckpt_get_info(c->f, &info);
    for (i = 0; i < n; i++) {
        const ckpt_tensor *t = items[i].t;
        ckpt_record rec;
        ckpt_error e;
        if (c->stor_checked[t->storage]) continue;
        memset(&e, 0, sizeof e);
        if (ckpt_storage_record(c->f, t->storage, &rec, &e) != 0 || !rec.has_crc) continue;
        if (!t->contiguous || t->storage_offset != 0 || t->nbytes != rec.size) continue;
        c->stor_checked[t->storage] = 1;
        items[i].check = 1;
        items[i].want = rec.crc32;
        items[i].rec_name = rec.name;
        items[i].rec_off = rec.data_offset;
    }
}

/* Write the planned file into fd with read-ahead.  0, or -1 reported. */
static int pool_write(conv *c, ckpt_safetensors_plan *p, int fd, const char *shown)
{
    size_t n = ckpt_safetensors_count(p), i, nthreads = 0, hlen;
    const void *h = ckpt_safetensors_header(p, &hlen);
    pthread_t th[64];
    unsigned char *chunk = NULL;
    uint64_t done = 0;
    int r = 0, k;
    ra q;

    memset(&q, 0, sizeof q);
    q.f = c->f;
    q.n = n;
    q.big_host = c->big_host;
    q.it = calloc(n ? n : 1, sizeof *q.it);
    if (!q.it) return cli_error("out of memory");
    for (i = 0; i < n; i++) q.it[i].t = ckpt_safetensors_at(p, i)->tensor;
    plan_checks(c, q.it, n);
    pthread_mutex_init(&q.mu, NULL);
    pthread_cond_init(&q.cv, NULL);
    for (k = 0; k < c->jobs && k < 64; k++)
        if (pthread_create(&th[nthreads], NULL, ra_worker, &q) == 0) nthreads++;
    on_progress(c, 0, 0);
    if (write_all(fd, h, hlen) != 0) r = cli_error("%s: %s", shown, strerror(errno));
    for (i = 0; i < n && r == 0; i++) {
        ra_item *it = &q.it[i];
        pthread_mutex_lock(&q.mu);
        while (nthreads > 0 && (it->state == RA_WAIT || it->state == RA_BUSY))
            pthread_cond_wait(&q.cv, &q.mu);
        pthread_mutex_unlock(&q.mu);
        if (it->state == RA_FAIL) {
            r = cli_file_error(c->path, &it->err);
        } else if (it->state == RA_DONE) {
            if (it->check && it->got != it->want)
                r = crc_mismatch(c, it, it->got);
            else if (write_all(fd, it->buf, (size_t)it->t->nbytes) != 0)
                r = cli_error("%s: %s", shown, strerror(errno));
            free(it->buf);
            it->buf = NULL;
            pthread_mutex_lock(&q.mu);
            q.inflight -= it->t->nbytes;
            pthread_cond_broadcast(&q.cv);
            pthread_mutex_unlock(&q.mu);
            done += it->t->nbytes;
        } else { /* big, or no thread started: read here, in pieces */
            uint64_t pos = 0, nb = it->t->nbytes;
            size_t es = ckpt_dtype_size(it->t->dtype);
            uint32_t crc = 0;
            if (!chunk) chunk = malloc(RA_CHUNK);
            if (!chunk) r = cli_error("out of memory");
            while (r == 0 && pos < nb) {
                size_t m = nb - pos < RA_CHUNK ? (size_t)(nb - pos) : RA_CHUNK - RA_CHUNK % es;
                ckpt_error e;
                memset(&e, 0, sizeof e);
                e.offset = -1;
                if (ckpt_tensor_read_range(c->f, it->t, pos, chunk, m, &e) != 0) {
                    r = cli_file_error(c->path, &e);
                    break;
                }
                if (it->check) crc = ckpt_crc32(crc, chunk, m);
                if (c->big_host) to_little(it->t, chunk, m);
                if (write_all(fd, chunk, m) != 0) r = cli_error("%s: %s", shown, strerror(errno));
                pos += m;
                on_progress(c, done + pos, 0);
            }
            if (r == 0 && it->check && crc != it->want) r = crc_mismatch(c, it, crc);
            done += nb;
        }
        on_progress(c, done, 0);
        if (r != 0) {
            pthread_mutex_lock(&q.mu);
            q.stop = 1;
            pthread_cond_broadcast(&q.cv);
            pthread_mutex_unlock(&q.mu);
        }
    }
    pthread_mutex_lock(&q.mu);
    q.stop = 1;
    pthread_cond_broadcast(&q.cv);
    pthread_mutex_unlock(&q.mu);
    for (i = 0; i < nthreads; i++) pthread_join(th[i], NULL);
    for (i = 0; i < n; i++) free(q.it[i].buf);
    free(q.it);
    free(chunk);
    pthread_cond_destroy(&q.cv);
    pthread_mutex_destroy(&q.mu);
    return r == 0 ? 0 : -1;
}

/* ---- writing a plan --------------------------------------------------------- */

/* Write plan p to path through the output policy.  CLI_OK, or CLI_FAIL
 * reported. */
static int write_plan(conv *c, ckpt_safetensors_plan *p, const char *path, const cli_out_opts *oo,
                      int pool, int *origin)
{
    cli_out o;
    ckpt_error err;
    int r;
    if (cli_out_open(&o, path, oo) != 0) return CLI_FAIL;
    memset(&err, 0, sizeof err);
    if (pool)
        r = pool_write(c, p, o.fd, o.shown);
    else if ((r = ckpt_safetensors_write_fd(p, o.fd, !o.in_place, &err)) != 0)
        report(c, o.shown, &err, *origin);
    if (r != 0) {
        progress_hide(&c->prog);
        cli_out_abort(&o);
        return CLI_FAIL;
    }
    return cli_out_commit(&o) == 0 ? CLI_OK : CLI_FAIL;
}

/* ---- shards ---------------------------------------------------------------- */

struct shard_ref {
    const ckpt_tensor *t;
    size_t shard;
};
typedef struct shard_ref shard_ref;

static int cmp_ref(const void *a, const void *b)
{
    uintptr_t x = (uintptr_t)((const shard_ref *)a)->t, y = (uintptr_t)((const shard_ref *)b)->t;
    return x < y ? -1 : x > y;
}

static int in_shard(void *ctx, const ckpt_tensor *t)
{
    conv *c = ctx;
    shard_ref key, *hit;
    key.t = t;
    key.shard = 0;
    hit = bsearch(&key, c->refs, c->nrefs, sizeof key, cmp_ref);
    return hit && hit->shard == c->shard;
}

/* transformers' (huggingface_hub's) split: in file order; a tensor bigger
 * than max is a shard of its own at once; the others fill the open shard,
 * which is closed (numbered) when the next tensor would pass max, and at
 * the end.  Fills c->refs; returns the number of shards, 0 out of memory. */
static size_t split(conv *c, const ckpt_safetensors_plan *p, uint64_t max)
{
    size_t n = ckpt_safetensors_count(p), i, ns = 0, ngroups = 0, open_size = 0;
    uint64_t cur = 0;
    size_t *grp = malloc((n ? n : 1) * sizeof *grp); /* open group, or SIZE_MAX */
    size_t *gid = malloc((n + 1) * sizeof *gid);     /* shard of each group */
    c->refs = malloc((n ? n : 1) * sizeof *c->refs);
    if (!grp || !gid || !c->refs) {
        free(grp);
        free(gid);
        return 0;
    }
    for (i = 0; i < n; i++) {
        uint64_t sz = ckpt_safetensors_at(p, i)->tensor->nbytes;
        c->refs[i].t = ckpt_safetensors_at(p, i)->tensor;
        if (sz > max) {
            grp[i] = (size_t)-1;
            c->refs[i].shard = ns++;
            continue;
        }
        if (open_size > 0 && cur + sz > max) { /* close the open shard */
            gid[ngroups++] = ns++;
            cur = 0;
            open_size = 0;
        }
        grp[i] = ngroups;
        cur += sz;
        open_size++;
    }
    if (open_size > 0) gid[ngroups++] = ns++;
    for (i = 0; i < n; i++)
        if (grp[i] != (size_t)-1) c->refs[i].shard = gid[grp[i]];
    c->nrefs = n;
    qsort(c->refs, n, sizeof *c->refs, cmp_ref);
    free(grp);
    free(gid);
    return ns ? ns : 1;
}

/* ---- the folder ------------------------------------------------------------ */

static int cmp_entry_name(const void *a, const void *b)
{
    const ckpt_safetensors_entry *x = *(const ckpt_safetensors_entry *const *)a;
    const ckpt_safetensors_entry *y = *(const ckpt_safetensors_entry *const *)b;
    size_t n = x->name_len < y->name_len ? x->name_len : y->name_len;
    int c = memcmp(x->name, y->name, n); /* names may hold NUL bytes */
    return c ? c : (x->name_len > y->name_len) - (x->name_len < y->name_len);
}

/* model.safetensors.index.json as transformers writes it: json.dumps(index,
 * indent=2, sort_keys=True) and a newline. */
static int write_index(conv *c, const ckpt_safetensors_plan *p0, const char *path, size_t ns,
                       const cli_out_opts *oo)
{
    size_t n = ckpt_safetensors_count(p0), i;
    const ckpt_safetensors_entry **e = malloc((n ? n : 1) * sizeof *e);
    uint64_t total = 0;
    cli_out o;
    if (!e) return cli_error("out of memory");
    for (i = 0; i < n; i++) {
        e[i] = ckpt_safetensors_at(p0, i);
        total += e[i]->tensor->nbytes;
    }
    qsort(e, n, sizeof *e, cmp_entry_name);
    if (cli_out_open(&o, path, oo) != 0) {
        free(e);
        return CLI_FAIL;
    }
    fprintf(o.fp, "{\n  \"metadata\": {\n    \"total_size\": %llu\n  },\n  \"weight_map\": {",
            (unsigned long long)total);
    for (i = 0; i < n; i++) {
        shard_ref key, *hit;
        key.t = e[i]->tensor;
        key.shard = 0;
        hit = bsearch(&key, c->refs, c->nrefs, sizeof key, cmp_ref);
        fputs(i ? ",\n    " : "\n    ", o.fp);
        cli_json_string(o.fp, e[i]->name, e[i]->name_len);
        fprintf(o.fp, ": \"model-%05zu-of-%05zu.safetensors\"", (hit ? hit->shard : 0) + 1, ns);
    }
    fputs(n ? "\n  }\n}\n" : "}\n}\n", o.fp);
    free(e);
    return cli_out_commit(&o) == 0 ? CLI_OK : CLI_FAIL;
}

static char *join(const char *dir, const char *name)
{
    size_t a = strlen(dir), b = strlen(name);
    char *p = malloc(a + b + 2);
    if (!p) return NULL;
    memcpy(p, dir, a);
    if (a == 0 || dir[a - 1] != '/') p[a++] = '/';
    memcpy(p + a, name, b + 1);
    return p;
}

/* model-NNNNN-of-MMMMM.safetensors with 1 <= N <= M: a shard of this
 * layout, as ckpt and transformers name them (M in *of). */
static int is_shard_name(const char *s, unsigned long *of)
{
    unsigned long k = 0, m = 0;
    int i;
    if (strncmp(s, "model-", 6) != 0) return 0;
    s += 6;
    for (i = 0; i < 5; i++) {
        if (s[i] < '0' || s[i] > '9') return 0;
        k = k * 10 + (unsigned long)(s[i] - '0');
    }
    if (strncmp(s + 5, "-of-", 4) != 0) return 0;
    s += 9;
    for (i = 0; i < 5; i++) {
        if (s[i] < '0' || s[i] > '9') return 0;
        m = m * 10 + (unsigned long)(s[i] - '0');
    }
    if (strcmp(s + 5, ".safetensors") != 0 || k < 1 || k > m) return 0;
    *of = m;
    return 1;
}

/* A file an earlier export into OUTDIR/ wrote that this one (ns shards, 0:
 * model.safetensors alone) did not: shards of another count, the other
 * layout's model.safetensors or index.  Left beside the new files, a loader
 * (transformers prefers model.safetensors to an index) or a glob would mix
 * the two exports. */
static int is_stale(const char *name, size_t ns)
{
    unsigned long of;
    if (ns == 0)
        return strcmp(name, "model.safetensors.index.json") == 0 || is_shard_name(name, &of);
    return strcmp(name, "model.safetensors") == 0 || (is_shard_name(name, &of) && of != ns);
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The files an earlier export into OUTDIR/ left there that this one (ns
 * shards, 0: model.safetensors alone) does not write (is_stale(): regular
 * files and symlinks of those names, never anything else), sorted; NULL
 * with *n 0 when there are none, or on failure (reported, *r CLI_FAIL). */
static char **find_stale(const char *dir, size_t ns, size_t *n, int *r)
{
    DIR *d = opendir(dir);
    struct dirent *e;
    char **names = NULL;
    size_t cap = 0;
    *n = 0;
    *r = CLI_OK;
    if (!d) {
        *r = cli_error("%s: %s", dir, strerror(errno));
        return NULL;
    }
    while ((e = readdir(d)) != NULL) {
        struct stat st;
        if (!is_stale(e->d_name, ns)) continue;
        if (fstatat(dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0 ||
            !(S_ISREG(st.st_mode) || S_ISLNK(st.st_mode)))
            continue;
        if (*n == cap) {
            char **more = realloc(names, (cap = cap ? 2 * cap : 8) * sizeof *names);
            if (!more) {
                *r = cli_error("out of memory");
                break;
            }
            names = more;
        }
        if (!(names[*n] = strdup(e->d_name))) {
            *r = cli_error("out of memory");
            break;
        }
        (*n)++;
    }
    closedir(d);
    if (*n > 0) qsort(names, *n, sizeof *names, cmp_str);
    return names;
}

static void free_names(char **names, size_t n)
{
    size_t i;
    for (i = 0; i < n; i++) free(names[i]);
    free(names);
}

/* Once the new files are in place: with --force, remove what an earlier
 * export left (find_stale()); without, say that it is there.  CLI_OK, or
 * CLI_FAIL reported. */
static int remove_stale(conv *c, const char *dir, size_t ns, const cli_out_opts *oo)
{
    size_t n, i;
    int r;
    char **names = find_stale(dir, ns, &n, &r);
    if (r == CLI_OK && n > 0 && !oo->force) {
        progress_hide(&c->prog);
        if (n == 1)
            cli_error("%s: warning: %s, from an earlier export, is still there (--force "
                      "removes it)",
                      dir, names[0]);
        else
            cli_error("%s: warning: %zu files from an earlier export are still there (%s, "
                      "...; --force removes them)",
                      dir, n, names[0]);
    }
    for (i = 0; i < n && oo->force; i++) {
        char *path = join(dir, names[i]);
        struct stat st;
        if (!path) {
            r = cli_error("out of memory");
            break;
        }
        /* never a file of the input (checked before writing; again here) */
        if (lstat(path, &st) == 0 && cli_is_input(oo, &st) == 0 && unlink(path) != 0 &&
            errno != ENOENT)
            r = cli_error("%s: cannot remove %s, left by an earlier export: %s", dir, names[i],
                          strerror(errno));
        free(path);
    }
    free_names(names, n);
    return r;
}

/* Before anything is written into OUTDIR/: refuse a name to write (names[0
 * .. n)) that is a file of the input, or that exists without --force, and,
 * with --force, a file of the input that would be removed as left by an
 * earlier export.  CLI_OK, or CLI_FAIL reported. */
static int check_folder(const char *dir, char *const *names, size_t n, size_t ns,
                        const cli_out_opts *oo)
{
    size_t i, nstale = 0;
    int r = CLI_OK;
    char **stale = NULL;
    for (i = 0; i < n && r == CLI_OK; i++) {
        struct stat st;
        if (cli_out_refuse_input(names[i], oo) != 0)
            r = CLI_FAIL;
        else if (!oo->force && lstat(names[i], &st) == 0)
            r = cli_error("%s: already exists (--force replaces it)", names[i]);
    }
    if (r == CLI_OK && oo->force) stale = find_stale(dir, ns, &nstale, &r);
    for (i = 0; i < nstale && r == CLI_OK; i++) {
        char *path = join(dir, stale[i]);
        struct stat st;
        if (!path)
            r = cli_error("out of memory");
        else if (lstat(path, &st) == 0 && cli_is_input(oo, &st) != 0)
            r = cli_error("%s: is one of the files of the input, which --force would remove as "
                          "left by an earlier export; not converting into %s",
                          path, dir);
        free(path);
    }
    free_names(stale, nstale);
    return r;
}

/* OUTDIR/: model.safetensors, or the shards and their index; then what an
 * earlier export left there (remove_stale()).  Every file is written under
 * a temporary name first and they are put in place together, the index
 * last (cli_out_batch_commit()): a failure or a signal before that leaves
 * OUTDIR as it was. */
static int write_folder(conv *c, ckpt_safetensors_plan *p0, const ckpt_export_options *eo0,
                        const char *dir, uint64_t max, cli_out_opts *oo, int pool, int *origin)
{
    size_t ns, k, nnames;
    char name[64], **names;
    int r = CLI_OK, verified = 0;
    cli_out_batch batch;

    if (cli_mkdirs(dir) != CLI_OK) return CLI_FAIL;
    memset(&batch, 0, sizeof batch);
    oo->no_follow = 1; /* entries of an output folder */
    oo->batch = &batch;
    if (c->total <= max) {
        ns = 0;
    } else {
        ns = split(c, p0, max);
        if (ns == 0) return cli_error("out of memory");
        if (ns > 99999)
            return cli_error("%zu shards: more than 99999 (raise --max-shard-size)", ns);
    }
    /* every name, in the order they are put in place (the index last) */
    nnames = ns ? ns + 1 : 1;
    names = calloc(nnames, sizeof *names);
    if (!names) return cli_error("out of memory");
    for (k = 0; k < nnames && r == CLI_OK; k++) {
        if (ns == 0)
            snprintf(name, sizeof name, "model.safetensors");
        else if (k < ns)
            snprintf(name, sizeof name, "model-%05zu-of-%05zu.safetensors", k + 1, ns);
        else
            snprintf(name, sizeof name, "model.safetensors.index.json");
        if (!(names[k] = join(dir, name))) r = cli_error("out of memory");
    }
    if (r == CLI_OK) r = check_folder(dir, names, nnames, ns, oo);

    if (r == CLI_OK && ns == 0) r = write_plan(c, p0, names[0], oo, pool, origin);
    /* the whole file's plan made the library's pass over the file when a
     * written tensor lies in a deflated record: not once per shard */
    for (k = 0; r == CLI_OK && k < ckpt_safetensors_count(p0) && eo0->verify; k++) {
        const ckpt_storage *s = ckpt_storage_at(c->f, ckpt_safetensors_at(p0, k)->tensor->storage);
        if (s && s->file_offset < 0) verified = 1;
    }
    for (k = 0; k < ns && r == CLI_OK; k++) {
        ckpt_export_options eo = *eo0;
        ckpt_safetensors_plan *p;
        ckpt_error err;
        c->shard = k;
        eo.select = in_shard;
        eo.warning = NULL; /* the whole file's plan said it all */
        if (verified) eo.verify = 0;
        memset(&err, 0, sizeof err);
        p = ckpt_export_safetensors_plan(c->f, &eo, &err);
        if (!p) {
            r = report(c, names[k], &err, *origin);
        } else {
            size_t i;
            r = write_plan(c, p, names[k], oo, pool, origin);
            for (i = 0; i < ckpt_safetensors_count(p); i++)
                c->base += ckpt_safetensors_at(p, i)->tensor->nbytes;
            ckpt_safetensors_free(p);
        }
    }
    if (r == CLI_OK && ns > 0) r = write_index(c, p0, names[ns], ns, oo);
    if (r == CLI_OK) {
        /* every file is complete: all in place, then the earlier export's
         * leftovers removed, none of it cut short by a signal */
        cli_signals_hold();
        r = cli_out_batch_commit(&batch) == 0 ? remove_stale(c, dir, ns, oo) : CLI_FAIL;
        cli_signals_release();
    }
    cli_out_batch_abort(&batch); /* no half set of files */
    oo->batch = NULL;
    for (k = 0; k < nnames; k++) free(names[k]);
    free(names);
    return r;
}

/* ---- the command ------------------------------------------------------------ */

/* Read-ahead pays when reading costs CPU: deflated records, or a source
 * read through the library without one descriptor. */
static int wants_pool(const conv *c)
{
    size_t i, n = ckpt_storage_count(c->f);
    if (c->jobs <= 1) return 0;
    if (c->src_fd < 0) return 1;
    for (i = 0; i < n; i++) {
        const ckpt_storage *s = ckpt_storage_at(c->f, i);
        if (s && s->file_offset < 0 && s->nbytes > 0) return 1;
    }
    return 0;
}

/* With read-ahead the CRCs are checked in the buffers tensors are read
 * into; a record no written tensor is all of needs the library's pass over
 * the file first (as the export itself does for deflated records). */
static int pool_verify_setup(conv *c, const ckpt_safetensors_plan *p0)
{
    size_t n = ckpt_safetensors_count(p0), i, ns = ckpt_storage_count(c->f), nocrc = 0;
    unsigned char *has = calloc(ns ? ns : 1, 1);
    ckpt_info info;
    ckpt_error err;
    int whole = 1;

    ckpt_get_info(c->f, &info);
    if (!has) return cli_error("out of memory");
    if (info.format != CKPT_FORMAT_ZIP || n == 0) {
        free(has);
        return 0;
    }
    for (i = 0; i < n && whole; i++) {
        const ckpt_tensor *t = ckpt_safetensors_at(p0, i)->tensor;
        ckpt_record rec;
        if (t->storage >= ns || has[t->storage] == 2) continue;
        memset(&err, 0, sizeof err);
        if (ckpt_storage_record(c->f, t->storage, &rec, &err) != 0) {
            whole = 0;
            break;
        }
        if (!rec.has_crc) {
            if (has[t->storage] == 0) nocrc++;
            has[t->storage] = 3;
            continue;
        }
        if (t->contiguous && t->storage_offset == 0 && t->nbytes == rec.size &&
            (ckpt_dtype_size(t->dtype) == 1 || (info.byteorder == CKPT_BIG) == (c->big_host != 0)))
            has[t->storage] = 2;
        else if (has[t->storage] == 0)
            has[t->storage] = 1;
    }
    for (i = 0; i < ns && whole; i++)
        if (has[i] == 1) whole = 0;
    free(has);
    if (whole) {
        c->pool_check = 1;
        c->stor_checked = calloc(ns ? ns : 1, 1);
        if (!c->stor_checked) return cli_error("out of memory");
        if (nocrc > 0)
            cli_error("%s: warning: %zu record%s carry no CRC-32 (saved without one): not "
                      "checked",
                      c->path, nocrc, nocrc == 1 ? "" : "s");
        return 0;
    }
    memset(&err, 0, sizeof err);
    err.offset = -1;
    if (ckpt_verify(c->f, NULL, NULL, &err) != 0) {
        if (err.code == CKPT_E_FORMAT) {
            size_t m = strlen(err.message);
            snprintf(err.message + m, sizeof err.message - m,
                     ": the file is damaged; --no-verify converts it anyway");
        }
        return cli_file_error(c->path, &err);
    }
    return 0;
}

/* A source of several files (shards, DCP): the library's check of every
 * part, on --jobs threads, before the copy (the export checks the CRCs of
 * one ZIP file only).  The first bad part is reported, as --jobs 1 would. */
typedef struct part_check {
    const ckpt_file *f;
    ckpt_error *errs;
} part_check;

static int check_part(size_t i, void *ctx)
{
    part_check *pc = ctx;
    memset(&pc->errs[i], 0, sizeof pc->errs[i]);
    pc->errs[i].offset = -1;
    return ckpt_verify_part(pc->f, i, NULL, NULL, NULL, &pc->errs[i]);
}

static int verify_parts(conv *c)
{
    size_t n = ckpt_part_count(c->f), bad;
    part_check pc = {c->f, calloc(n, sizeof(ckpt_error))};
    int r = CLI_OK;
    if (!pc.errs) return cli_error("out of memory");
    bad = cli_parallel(n, c->jobs, check_part, &pc);
    if (bad < n) {
        ckpt_error *err = &pc.errs[bad];
        if (err->code == CKPT_E_FORMAT) {
            size_t m = strlen(err->message);
            snprintf(err->message + m, sizeof err->message - m,
                     ": the file is damaged; --no-verify converts it anyway");
        }
        r = cli_file_error(c->path, err);
    }
    free(pc.errs);
    return r;
}

static int is_folder(const char *out)
{
    struct stat st;
    size_t n = strlen(out);
    if (n > 0 && out[n - 1] == '/') return 1;
    return strcmp(out, "-") != 0 && stat(out, &st) == 0 && S_ISDIR(st.st_mode);
}

int cmd_convert(int argc, char **argv)
{
    int nops = 0, r, skip = 0, force = 0, sync = 0, no_verify = 0, folder, pool;
    const char *key = NULL, *filter = NULL, *tied = NULL, *shard_size = NULL, *jobs = NULL;
    char *key_arg = NULL;
    size_t key_len = 0;
    char *ops[2];
    cli_out_opts oo;
    cli_inputs inputs;
    struct stat st;
    conv c;
    ckpt_export_options eo;
    ckpt_safetensors_plan *plan = NULL;
    ckpt_error err;
    uint64_t max_shard = DEFAULT_SHARD;
    int origin = CKPT_EXPORT_FROM_EXPORT;
    const cli_option options[] = {
        {"--key", 0, 1, &key, NULL},
        {"--skip-unsupported", 0, 0, NULL, &skip},
        {"--force", 0, 0, NULL, &force},
        {"--sync", 0, 0, NULL, &sync},
        {"--no-verify", 0, 0, NULL, &no_verify},
        {"--filter", 0, 1, &filter, NULL},
        {"--tied", 0, 1, &tied, NULL},
        {"--max-shard-size", 0, 1, &shard_size, NULL},
        {"--jobs", 'j', 1, &jobs, NULL},
    };

    r = cli_parse(argc, argv, options, sizeof options / sizeof options[0], usage, ops, 2, &nops);
    if (r != CLI_CONTINUE) return r;
    if (nops < 1) return cli_usage_error("convert: missing FILE");
    if (nops < 2) return cli_usage_error("convert: missing OUT (the safetensors file to write)");
    if (ops[1][0] == '\0') return cli_usage_error("convert: the output file name is empty");
    if (tied && strcmp(tied, "once") != 0 && strcmp(tied, "copy") != 0)
        return cli_usage_error("convert: --tied takes 'once' or 'copy', not '%s'", tied);
    if (shard_size && (max_shard = parse_size(shard_size)) == 0)
        return cli_usage_error("convert: --max-shard-size '%s': give a size such as 5GB, "
                               "500MB or 10GiB",
                               shard_size);

    memset(&c, 0, sizeof c);
    c.path = ops[0];
    c.src_fd = -1;
    c.big_host = cli_host_big_endian();
    c.jobs = cli_default_jobs();
    if (jobs) {
        char *end;
        long v = strtol(jobs, &end, 10);
        if (*jobs == '\0' || *end != '\0' || v < 1 || v > 64)
            return cli_usage_error("convert: --jobs takes a number from 1 to 64, not '%s'", jobs);
        c.jobs = (int)v;
    }
    folder = is_folder(ops[1]);
    if (shard_size && !folder)
        return cli_usage_error("convert: --max-shard-size splits an export into OUTDIR/; OUT '%s' "
                               "is one file (end OUTDIR with '/' for a folder)",
                               ops[1]);
#ifdef SIGXFSZ
    /* past a file size limit, fail the write (EFBIG) and clean up rather
     * than be killed with the temporary file left behind */
    signal(SIGXFSZ, SIG_IGN);
#endif

    if (strcmp(ops[1], "-") == 0 && isatty(STDOUT_FILENO))
        return cli_error("not writing a safetensors file to a terminal; redirect "
                         "standard output or name OUT");
    memset(&oo, 0, sizeof oo);
    memset(&inputs, 0, sizeof inputs);
    oo.force = force;
    oo.sync = sync;
    oo.input = ops[0];
    oo.inputs = &inputs;
    /* refuse a doomed OUT (the input, an existing file) before any work:
     * cli_out_open() checks again when it opens OUT, then against every
     * file of the input too */
    if (!folder && strcmp(ops[1], "-") != 0 && stat(ops[1], &st) == 0) {
        if (cli_same_file(ops[0], &st))
            return cli_error("%s: is the same file as the input; not writing over it", ops[1]);
        if (S_ISREG(st.st_mode) && !force)
            return cli_error("%s: already exists (--force replaces it)", ops[1]);
    }

    r = CLI_FAIL;
    ckpt_export_options_init(&eo);
    eo.filter = filter;
    eo.skip_unsupported = skip;
    eo.verify = !no_verify;
    eo.write_behind = sync;
    eo.out_name = ""; /* output errors: the reason alone, OUT is added here */
    eo.progress = on_progress;
    eo.warning = on_warning;
    eo.ctx = &c;
    eo.error_origin = &origin;
    eo.dedupe_tied = tied ? strcmp(tied, "once") == 0 : folder;
    memset(&err, 0, sizeof err);
    if (key && !(key_arg = cli_unescape(key, &key_len))) { /* --key K as ls shows keys */
        cli_error("out of memory");
    } else if (open_source(&c, key_arg, key_len) == 0 &&
               cli_inputs_add(&inputs, ops[0], c.f) == 0 &&
               (folder || strcmp(ops[1], "-") == 0 || cli_out_refuse_input(ops[1], &oo) == 0) &&
               (no_verify || ckpt_part_count(c.f) < 2 || verify_parts(&c) == CLI_OK)) {
        eo.src_fd = c.src_fd;
        pool = wants_pool(&c);
        if (pool) eo.verify = 0; /* checked on the way: pool_verify_setup() */
        plan = ckpt_export_safetensors_plan(c.f, &eo, &err);
        if (!plan) {
            report(&c, ops[1], &err, origin);
        } else if (!pool || no_verify || pool_verify_setup(&c, plan) == CLI_OK) {
            size_t i;
            for (i = 0; i < ckpt_safetensors_count(plan); i++)
                c.total += ckpt_safetensors_at(plan, i)->tensor->nbytes;
            if (pool) eo.verify = 0;
            if (folder)
                r = write_folder(&c, plan, &eo, ops[1], max_shard, &oo, pool, &origin);
            else
                r = write_plan(&c, plan, ops[1], &oo, pool, &origin);
            progress_finish(&c.prog);
        }
    }
    ckpt_safetensors_free(plan);
    ckpt_close(c.f);
    if (c.src_fd >= 0) close(c.src_fd);
    free(c.refs);
    free(c.stor_checked);
    cli_inputs_free(&inputs);
    free(key_arg);
    return r;
}
