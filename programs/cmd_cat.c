/*
 * cmd_cat.c - `ckpt cat`: write one tensor's elements as raw bytes.
 */
#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L
#endif

#include "cli.h"
#include "progress.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

static const char usage[] =
    "Usage: ckpt cat [--key K] [-o OUT [--force] [--sync]] FILE NAME\n"
    "       ckpt cat [--key K] [-o OUT [--force] [--sync]] --filter GLOB FILE\n"
    "Write the elements of tensor NAME (as listed by 'ckpt ls'; \"\" for a\n"
    "tensor at the root) in row-major order and little-endian byte order,\n"
    "with no header, to standard output or to OUT.  FILE '-' reads the\n"
    "checkpoint from standard input.  Binary data is not written to a\n"
    "terminal unless asked for with -o -.  With --filter instead of NAME,\n"
    "every tensor whose name matches is written, one after the other in\n"
    "the order 'ckpt ls' lists them (each as above, with nothing between).\n"
    "\n" NAME_HELP "\n"
    "Options:\n"
    "  -o, --output OUT  write to OUT instead of standard output ('-': standard\n"
    "                    output, even a terminal).  A new or replaced OUT\n"
    "                    appears only once every byte is written; a device or a\n"
    "                    FIFO is written in place.  Never a file of the input\n"
    "                    (a shard, index or DCP file of it either)\n"
    "  --force           replace OUT if it is an existing file\n"
    "  --sync            flush OUT to disk before it appears (like cp, the\n"
    "                    default does not)\n"
    "  --key K           only what is under key K (e.g. state_dict), a top-level\n"
    "                    key or a path of keys (optimizer.state.0), as for ls\n"
    "  --filter GLOB     the tensors whose name matches the shell pattern GLOB\n"
    "                    (fnmatch: '*' also matches dots; or its escaped form,\n"
    "                    as ls shows it, matches), instead of NAME\n"
    "  -h, --help        show this help\n";

/* Pieces a tensor is written in.  A contiguous one in 256 KiB: the buffer
 * stays in cache between the read and the write, as cat(1)'s 128 KiB does
 * (writing the 1 GiB bench files, 4 MiB pieces took 1.2x cat(1)'s CPU,
 * 256 KiB 1.0x).  A
 * strided view in 4 MiB: each piece reads its span once (gather_blocks()),
 * so fewer, bigger pieces read it fewer times. */
#define CAT_CHUNK ((size_t)256 << 10)
#define CAT_CHUNK_STRIDED ((size_t)4 << 20)

/* Bytes of one number to reverse on a big-endian host: the element, or each
 * half of a complex element. */
static size_t swap_unit(ckpt_dtype dtype)
{
    size_t size = ckpt_dtype_size(dtype);
    if (dtype == CKPT_COMPLEX32 || dtype == CKPT_COMPLEX64 || dtype == CKPT_COMPLEX128)
        return size / 2;
    return size;
}

/* Stream t to out; on failure report it and return CLI_FAIL. */
static int write_tensor(const ckpt_file *f, const char *path, const ckpt_tensor *t, FILE *out,
                        const char *out_name)
{
    size_t unit = swap_unit(t->dtype);
    int swap = unit > 1 && cli_host_big_endian();
    size_t cap = t->contiguous ? CAT_CHUNK : CAT_CHUNK_STRIDED;
    uint64_t pos = 0;
    unsigned char *buf;
    ckpt_error err;
    progress bar;

    if (t->nbytes < cap) cap = (size_t)t->nbytes;
    if (!t->readable) { /* listed without data (meta, nested, ...): the read says why */
        memset(&err, 0, sizeof err);
        err.offset = -1;
        ckpt_tensor_read_range(f, t, 0, NULL, 0, &err);
        return cli_file_error(path, &err);
    }
    if (cap == 0) return CLI_OK;
    buf = malloc(cap);
    if (!buf) return cli_error("%s: out of memory (%zu bytes)", path, cap);
    progress_start(&bar, t->nbytes, "writing");
    while (pos < t->nbytes) {
        size_t n = t->nbytes - pos < cap ? (size_t)(t->nbytes - pos) : cap;
        memset(&err, 0, sizeof err);
        err.offset = -1;
        if (ckpt_tensor_read_range(f, t, pos, buf, n, &err) != 0) {
            free(buf);
            progress_finish(&bar);
            return cli_file_error(path, &err);
        }
        if (swap) cli_swap_bytes(buf, n, unit);
        if (fwrite(buf, 1, n, out) != n) {
            int e = errno;
            free(buf);
            progress_finish(&bar);
            if (!out_name) {
                cli_stdout_failed(); /* reported by cli_stdout_finish() */
                return CLI_FAIL;
            }
            return cli_error("%s: %s", out_name, strerror(e != 0 ? e : EIO));
        }
        pos += n;
        progress_advance(&bar, n);
    }
    progress_finish(&bar);
    free(buf);
    return CLI_OK;
}

int cmd_cat(int argc, char **argv)
{
    int nops = 0, r, force = 0, sync = 0;
    const char *key = NULL, *out = NULL, *filter = NULL;
    size_t i, n = 0, matched = 0;
    char *ops[2];
    const ckpt_tensor *t;
    ckpt_file *f;
    cli_out o;
    cli_out_opts oo;
    cli_inputs inputs;
    const cli_option options[] = {
        {"--key", 0, 1, &key, NULL},       {"--output", 'o', 1, &out, NULL},
        {"--force", 0, 0, NULL, &force},   {"--sync", 0, 0, NULL, &sync},
        {"--filter", 0, 1, &filter, NULL},
    };

    r = cli_parse(argc, argv, options, sizeof options / sizeof options[0], usage, ops, 2, &nops);
    if (r != CLI_CONTINUE) return r;
    if (nops < 1) return cli_usage_error("cat: missing FILE");
    if (nops < 2 && !filter) return cli_usage_error("cat: missing NAME (the tensor to write)");
    if (nops == 2 && filter) return cli_usage_error("cat: give NAME or --filter GLOB, not both");
    if (out && out[0] == '\0') return cli_usage_error("cat: the output file name is empty");
    if (cli_out_refuse_tty("a tensor's bytes", out)) return CLI_FAIL;

    f = cli_open(ops[0], key);
    if (!f) return CLI_FAIL;
    t = filter ? NULL : cli_find_tensor(f, ops[0], ops[1]);
    if (!filter && !t) { /* cli_find_tensor() said why */
        ckpt_close(f);
        return CLI_FAIL;
    }
    if (filter) {
        n = ckpt_tensor_count(f);
        for (i = 0; i < n; i++) {
            const ckpt_tensor *c = ckpt_tensor_at(f, i);
            matched += c && cli_name_matches(filter, c->name, c->name_len) != 0;
        }
        if (matched == 0) {
            cli_error("%s: no tensor name matches '%s'", ops[0], filter);
            ckpt_close(f);
            return CLI_FAIL;
        }
    }
    memset(&oo, 0, sizeof oo);
    memset(&inputs, 0, sizeof inputs);
    oo.force = force;
    oo.sync = sync;
    oo.input = ops[0];
    oo.inputs = &inputs;
    if (cli_inputs_add(&inputs, ops[0], f) != 0 || cli_out_open(&o, out ? out : "-", &oo) != 0) {
        r = CLI_FAIL;
    } else {
        const char *shown = o.is_stdout ? NULL : o.shown;
        if (t)
            r = write_tensor(f, ops[0], t, o.fp, shown);
        else
            for (i = 0, r = CLI_OK; i < n && r == CLI_OK; i++) {
                const ckpt_tensor *c = ckpt_tensor_at(f, i);
                if (c && cli_name_matches(filter, c->name, c->name_len))
                    r = write_tensor(f, ops[0], c, o.fp, shown);
            }
        if (r == CLI_OK) {
            if (cli_out_commit(&o) != 0) r = CLI_FAIL;
        } else {
            cli_out_abort(&o);
        }
    }
    ckpt_close(f);
    cli_inputs_free(&inputs);
    return r;
}
