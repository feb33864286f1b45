/*
 * cli.h - helpers shared by the commands of the `ckpt` program.
 *
 * Exit statuses: 0 success, 1 failure (unreadable file, write error, ...),
 * 2 usage error.  Every message goes to stderr as one line starting "ckpt: ".
 */
#ifndef CKPT_CLI_H
#define CKPT_CLI_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "ckpt.h"
#include "ckpt_text.h"

#define CLI_OK 0
#define CLI_FAIL 1
#define CLI_USAGE 2
/* Returned by cli_parse() when the command should go on. */
#define CLI_CONTINUE (-1)

/* The --help paragraph on how NAME and K are typed (cat, extract, diff). */
#define NAME_HELP                                                                                  \
    "NAME and K are read as 'ckpt ls' shows names: \\\\, \\n, \\t, \\xHH (a\n"                     \
    "byte: \\x00 for NUL) and \\uXXXX (\\u202e) are decoded, so a name that\n"                     \
    "holds them is typed as listed.  A valid file whose keys flatten to one\n"                     \
    "name ({'a.b': x, 'a': {'b': y}}: ls lists a.b twice) has that NAME\n"                         \
    "refused with the key path of each; --key tells them apart: --key a NAME\n"                    \
    "b is y, --key a.b NAME \"\" is x (a top-level key spelled K is taken first).\n"

/* ---- commands: one entry each in the table in ckpt.c ------------------- */
/* argv[0] is the command name; the return value is the exit status. */
int cmd_ls(int argc, char **argv);
int cmd_show(int argc, char **argv);
int cmd_cat(int argc, char **argv);
int cmd_convert(int argc, char **argv);
int cmd_scan(int argc, char **argv);
int cmd_verify(int argc, char **argv);
int cmd_info(int argc, char **argv);
int cmd_extract(int argc, char **argv);
int cmd_diff(int argc, char **argv);

/* ---- messages ----------------------------------------------------------- */

/* "ckpt: <message>" on stderr; returns CLI_FAIL. */
int cli_error(const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 1, 2)))
#endif
    ;

/* "ckpt: <message>" and "Try 'ckpt --help'." on stderr; returns CLI_USAGE. */
int cli_usage_error(const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 1, 2)))
#endif
    ;

/* "ckpt: PATH: <err->message> (byte N)" on stderr, without " (byte N)" when
 * err->offset is -1; a limit error's option name ("max_stack") becomes the
 * flag and variable that raise it.  Returns CLI_FAIL. */
int cli_file_error(const char *path, const ckpt_error *err);

/* ---- option parsing ----------------------------------------------------- */

typedef struct cli_option {
    const char *name;   /* long name with dashes: "--key" */
    char short_name;    /* 'o' for -o, or 0 */
    int takes_value;    /* 1: "--key K", "--key=K", "-o OUT", "-oOUT" */
    const char **value; /* receives the value (takes_value) */
    int *flag;          /* set to 1 (!takes_value) */
} cli_option;

/* Parse argv[1..argc) of a command: options may come before or after the
 * operands, "--" ends the options, "-h"/"--help" prints `usage` to stdout.
 * Operands go to operands[0..*noperands); more than max_operands is a usage
 * error.  Returns CLI_CONTINUE, or the exit status when the command is done
 * (CLI_OK after --help, CLI_USAGE after a usage error, already reported). */
int cli_parse(int argc, char **argv, const cli_option *options, size_t noptions, const char *usage,
              char **operands, int max_operands, int *noperands);

/* ---- files -------------------------------------------------------------- */

/* Read the limits' environment variables (CKPT_MAX_TENSOR_SIZE, ...,
 * CKPT_MAX_MEMORY); 0, or -1 after a usage error. */
int cli_env_init(void);
/* ckpt_options_init(), then the limits the environment and the flags ask
 * for (cli_parse() takes --max-tensor-size, ... for every command; a flag
 * beats its variable). */
void cli_options(ckpt_options *opt);
/* The "Limits (every command)" section of 'ckpt --help'. */
void cli_limits_usage(FILE *out);
/* --max-spool / CKPT_MAX_SPOOL: the most bytes of standard input spooled
 * to a temporary file (0: no limit). */
uint64_t cli_max_spool(void);

/* Open a checkpoint, selecting `key` (--key K: a top-level key or a path of
 * keys, the library's opt.key; read by cli_unescape()) when it is not
 * NULL.  On failure print the error (cli_file_error) and return NULL. */
ckpt_file *cli_open(const char *path, const char *key);

/* ---- output ------------------------------------------------------------- */

/* Give stdout a large buffer; call before anything is written to it. */
void cli_stdout_init(void);

/* n bytes to stdout after what stdio holds; a large n goes straight to
 * the file, not copied into stdio's buffer first (a writer with a buffer
 * of its own: ls).  A failure is what cli_stdout_failed() reports. */
void cli_stdout_write(const void *p, size_t n);

/* Nonzero once a write to stdout has failed (the errno is remembered for
 * cli_stdout_finish()). */
int cli_stdout_failed(void);

/* Flush and close stdout.  If any write to it failed, report
 * "ckpt: write error: <reason>" and return CLI_FAIL (or the status given to
 * cli_stdout_fail_status()); else return status. */
int cli_stdout_finish(int status);

/* The exit status cli_stdout_finish() gives for a failed write to stdout,
 * CLI_FAIL unless a command whose 1 means something else sets its own
 * (diff: 1 is "differ", 2 "trouble"). */
void cli_stdout_fail_status(int status);

/* Write s[0..n) as a JSON string (with quotes) to out: ckpt_json_escape()
 * (valid UTF-8 passes through but for control and invisible characters,
 * \uXXXX; a byte that is not valid UTF-8 is \udcXX, Python's
 * surrogateescape), for every string of every --json output. */
void cli_json_string(FILE *out, const char *s, size_t n);

/* Thousands separators: "1,234,567" into buf (>= 27 bytes); returns buf. */
const char *cli_grouped(uint64_t x, char *buf, size_t cap);

/* A growing text buffer; oom is set (and stays) when an allocation fails. */
typedef struct sbuf {
    char *p;
    size_t len, cap;
    int oom;
} sbuf;
void sb_add(sbuf *b, const void *data, size_t n);
void sb_str(sbuf *b, const char *s);
void sb_char(sbuf *b, char c);
void sb_free(sbuf *b);

/* Length of the valid UTF-8 sequence at s[0..n), or 0 if it is not one. */
size_t cli_utf8_seq(const unsigned char *s, size_t n);

/* Nonzero when this machine stores integers big-endian. */
int cli_host_big_endian(void);

/* Reverse the bytes of each `unit`-byte element of buf[0..n). */
void cli_swap_bytes(void *buf, size_t n, size_t unit);

/* ---- output files and "-" (output.c) ------------------------------------ */

/* One policy for every command that writes; see the top of output.c.
 *   "-"                      standard output, written in place
 *   device, FIFO, socket     written in place, never replaced (a block
 *                            device only with --force)
 *   missing                  temporary name beside it, linked into place
 *   existing regular file    refused unless --force; replaced atomically,
 *   (or a symlink to one)    keeping its mode; a symlink keeps pointing at it
 *   a symlink in an output   (no_follow) the entry itself, replaced with
 *   folder                   --force by a new file (0666 & ~umask)
 *   a file of the input      refused, --force or not
 * No fsync unless --sync. */

/* The files an input consists of, by device and inode: FILE itself, and for
 * a folder, an index or a DCP checkpoint every part (ckpt_part_path()), the
 * index or .metadata, a folder's one checkpoint file.  Zero-initialize. */
typedef struct cli_inputs {
    struct cli_file_id *ids;
    size_t n, cap;
} cli_inputs;
/* Add the files of input `path` ("-": standard input), opened as f (NULL:
 * the path alone).  0, or -1 out of memory (reported). */
int cli_inputs_add(cli_inputs *in, const char *path, const ckpt_file *f);
void cli_inputs_free(cli_inputs *in);

/* Files written together (convert OUTDIR/): each one's temporary file is
 * kept when it is committed, and cli_out_batch_commit() moves them all into
 * place at once.  Zero-initialize. */
typedef struct cli_out_batch {
    struct cli_out_pending *files;
    size_t n, cap;
} cli_out_batch;

typedef struct cli_out_opts {
    int force;                /* replace an existing regular file */
    int sync;                 /* fsync before the file appears */
    int no_follow;            /* an entry of an output folder: a symlink is the
                                 entry itself (replaced with --force by a new
                                 file, never followed); non-regular entries
                                 are refused */
    const char *input;        /* the input's path ("-": stdin), or NULL */
    const cli_inputs *inputs; /* every file of the input, or NULL */
    cli_out_batch *batch;     /* commit into this batch, or NULL */
} cli_out_opts;

typedef struct cli_out {
    FILE *fp;             /* write here */
    int fd;               /* fileno(fp) */
    const char *shown;    /* the name for messages */
    char *path;           /* where the temporary file goes (symlinks resolved) */
    char *tmp;            /* the temporary file, or NULL when in place */
    cli_out_batch *batch; /* opts->batch */
    int in_place, is_stdout, owns_fd, replace, sync;
} cli_out;

/* Returns 0, or prints "ckpt: OUT: <reason>" and returns -1. */
int cli_out_open(cli_out *o, const char *path, const cli_out_opts *opts);
/* Flush (fsync with --sync), close, and move into place (with a batch: hand
 * the temporary file to it).  On failure prints the error (for stdout: left
 * to cli_stdout_finish()), removes the temporary file and returns -1. */
int cli_out_commit(cli_out *o);
/* Close and remove the temporary file.  Safe after a commit. */
void cli_out_abort(cli_out *o);
/* Move every file of the batch into place, in the order they were
 * committed, with the signals held; if one fails, put back the files
 * already replaced and remove the new ones.  0, or -1 reported.  The batch
 * is empty afterwards. */
int cli_out_batch_commit(cli_out_batch *b);
/* Remove every temporary file of the batch. */
void cli_out_batch_abort(cli_out_batch *b);
/* Hold SIGINT, SIGTERM, SIGHUP and SIGPIPE until the matching release
 * (nested calls count): a few steps that must not be cut in two.  A signal
 * that came meanwhile is delivered by the last release. */
void cli_signals_hold(void);
void cli_signals_release(void);

/* Binary output and no -o while stdout is a terminal: print an error
 * (naming `what`) and return 1; else 0. */
int cli_out_refuse_tty(const char *what, const char *out);

struct stat;
/* Nonzero when `input` ("-": stdin) is the file described by out_st. */
int cli_same_file(const char *input, const struct stat *out_st);
/* 1 when st is opts->input itself, 2 when it is another of opts->inputs,
 * else 0. */
int cli_is_input(const cli_out_opts *opts, const struct stat *st);
/* When writing `path` (an entry as cli_out_open() would see it) would
 * replace a file of the input: print "ckpt: PATH: is ... the input" and
 * return -1; else 0.  To refuse before anything is written. */
int cli_out_refuse_input(const char *path, const cli_out_opts *opts);

/* mkdir -p DIR; CLI_OK, or prints the error and returns CLI_FAIL. */
int cli_mkdirs(const char *dir);

/* A readable, seekable descriptor for an input path: "-" is standard
 * input, spooled once to an unlinked temporary file when it is a pipe
 * (every later "-" reads the same bytes), after its first bytes passed
 * ckpt_sniff() and up to --max-spool bytes.  FIFOs and devices get "needs
 * a seekable file", without waiting for a writer.  The caller closes *fd.
 * CLI_OK, or CLI_FAIL with err filled (nothing printed). */
int cli_input_fd(const char *path, int *fd, uint64_t *size, ckpt_error *err);

/* How to open an input: 0, open the path by name; 1, through *rd (for "-",
 * a reader over cli_input_fd()'s descriptor, closed by the library); -1,
 * refused (a FIFO, a device, an unreadable stdin) with err filled. */
int cli_input_reader(const char *path, ckpt_reader *rd, ckpt_error *err);

/* ckpt_open() for a path, or for "-" through cli_input_fd(); a FIFO or a
 * device gets "needs a seekable file".  NULL with err filled (nothing
 * printed) on failure. */
ckpt_file *cli_open_input(const char *path, const ckpt_options *opt, ckpt_error *err);

/* A ckpt_reader callback reading with pread from the descriptor in
 * `opaque` (cast from intptr_t). */
int cli_pread_reader(void *opaque, uint64_t offset, void *buf, size_t n);

/* ---- display: escaping, filters, several files (text.c, batch.c) -------- */

#define CLI_ESC_QUOTED CKPT_ESCAPE_QUOTED /* inside "...": escape '"' too */
#define CLI_ESC_BYTES CKPT_ESCAPE_BYTES   /* a bytes value: every byte >= 0x80 as \xHH */

/* Append s[0..n) to b escaped by ckpt_escape() (ckpt_text.h has the rules),
 * up to byte `limit` (never inside a character); returns the bytes of s
 * consumed.  Every string from a file that reaches a table, tree or message
 * goes through here. */
size_t cli_escape(sbuf *b, const char *s, size_t n, size_t limit, unsigned flags);
/* Columns the escaped form of s takes (one per character). */
size_t cli_term_width(const char *s);
/* Write s escaped; returns the columns written. */
size_t cli_term_put(FILE *out, const char *s);
/* The same for s[0..n) (a name may hold NUL bytes). */
size_t cli_term_put_n(FILE *out, const char *s, size_t n);
/* Nonzero when s[0..n) is valid UTF-8. */
int cli_utf8_valid(const char *s, size_t n);
/* Base64 (RFC 4648, padded) of data[0..n). */
void cli_base64(FILE *out, const void *data, size_t n);
/* "field": "escaped" for s[0..n), plus "field_bytes": "base64 of the raw
 * bytes" when s is not valid UTF-8. */
void cli_json_name(FILE *out, const char *field, const char *s, size_t n);
/* --filter GLOB: ckpt_name_match() (fnmatch(3) without flags, '*' also
 * matches '.', against the name or its escaped form); a NULL glob matches
 * every name. */
int cli_name_matches(const char *glob, const char *name, size_t len);
/* An argument that names a tensor or a key (NAME, --key K), read as 'ckpt
 * ls' shows names: \\ \" \n \r \t \xHH (a byte) and \uXXXX (a
 * character; \udc80-\udcff, as --json writes a byte that is not UTF-8, that
 * byte) are decoded, a backslash that begins none of them stands for
 * itself.  A malloc'd copy (*len bytes, then a '\0'), NULL when out of
 * memory. */
char *cli_unescape(const char *s, size_t *len);
/* The tensor NAME (cli_unescape()) of f: NULL after printing why not
 * ("no tensor named 'X'", or, when several tensors have the name, each
 * one's key path and how to choose one). */
const ckpt_tensor *cli_find_tensor(const ckpt_file *f, const char *path, const char *arg);
/* t's key path for a message (ckpt_tensor_path_text()), "?" if unknown. */
void cli_tensor_path(const ckpt_file *f, const ckpt_tensor *t, char *buf, size_t cap);
/* "128 B", "4.0 KiB", "1.5 MiB", ... into buf; returns buf. */
const char *cli_human_size(uint64_t x, char *buf, size_t cap);
/* cli_file_error() with the path and the message escaped; returns CLI_FAIL. */
int cli_report(const char *path, const ckpt_error *err);
/* "ckpt: PATH: what" on stderr (a note, not a failure); returns CLI_OK. */
int cli_note(const char *path, const char *what);

/* cli_parse() for a command that reads one or more FILEs: *files (malloc'd,
 * the caller frees it, also on failure) receives the operands; none is a
 * usage error.  Returns CLI_CONTINUE or the exit status. */
int cli_parse_files(int argc, char **argv, const cli_option *options, size_t noptions,
                    const char *usage, char ***files, int *nfiles);
/* Run one() on every file, printing "==> FILE <==" before each when there
 * are several and json is 0; returns the worst (highest) status. */
int cli_batch(char **files, int nfiles, int json, int (*one)(const char *path, void *ctx),
              void *ctx);
/* cli_batch() with prepare(i, files[i], ctx) run first for every file: on
 * up to `jobs` threads, at most `jobs` files ahead of the one printed (it
 * must not print; one() then prints what it found), or inline when jobs is
 * 1 or there is one file.  A file that is prepared is printed in order. */
int cli_batch_jobs(char **files, int nfiles, int json,
                   void (*prepare)(int i, const char *path, void *ctx), int jobs,
                   int (*one)(const char *path, void *ctx), void *ctx);
/* fn(i, ctx) for every i in [0, n) on up to `jobs` threads (jobs 1: in
 * order, on this thread); fn returns 0, or non-zero when item i failed, and
 * items past the first failed one are not started (one thread would not
 * have got there).  Returns the lowest failed i, or n. */
size_t cli_parallel(size_t n, int jobs, int (*fn)(size_t i, void *ctx), void *ctx);
/* --jobs default: the online CPUs, at most 8. */
int cli_default_jobs(void);
/* {"file": PATH, "error": {"message", "code", "offset"}} and a newline. */
void cli_json_error_line(const char *path, const ckpt_error *err);

/* An open file with what --key selected: a top-level key or a path of
 * keys ("optimizer.state.0"), as the library's opt.key selects it for
 * every command; tensor names are relative to it. */
typedef struct cli_doc {
    ckpt_file *f;
    const ckpt_value *root; /* what is shown: the selected value */
} cli_doc;
/* 0, or -1 with err filled (nothing printed). */
int cli_doc_open(cli_doc *d, const char *path, const char *key, const ckpt_options *opt,
                 ckpt_error *err);
void cli_doc_close(cli_doc *d);

#endif /* CKPT_CLI_H */
