/*
 * output.c - where the `ckpt` program writes, and where it reads from "-".
 *
 * One policy for every command that writes (cat -o, extract -o/-d, convert):
 *
 *   "-"                    standard output, written in place
 *   a character device,    opened and written in place, never replaced:
 *   a FIFO, a socket       /dev/null works, /dev/full fails with ENOSPC,
 *                          a FIFO's reader gets the bytes
 *   a block device         refused without --force (it holds data)
 *   a missing name         written under a temporary name beside it and
 *                          linked into place when complete (an OUT that
 *                          appeared meanwhile is never replaced)
 *   an existing regular    refused unless --force; then replaced by rename,
 *   file (or a symlink     keeping its mode (and owner, when allowed); a
 *   to one)                symlink is resolved and its target replaced, the
 *                          link kept
 *   the input itself       refused ("are the same file"), --force or not
 *
 * No fsync unless --sync (like cp).  Temporary names are short enough that
 * a valid OUT never yields an invalid temporary name.
 */
#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L
#endif

#include "cli.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

#ifndef NAME_MAX
#define NAME_MAX 255
#endif
#ifndef PATH_MAX
#define PATH_MAX 4096
#endif

/* ------------------------------------------------------------------------ */
/* The temporary file, removed if a signal ends the program                   */
/* ------------------------------------------------------------------------ */

static volatile sig_atomic_t tmp_live;
static char tmp_name[PATH_MAX + NAME_MAX + 16];

static void on_signal(int sig)
{
    if (tmp_live) unlink(tmp_name);
    signal(sig, SIG_DFL);
    raise(sig);
}

static void watch_signals(int on)
{
    static const int sigs[] = {SIGINT, SIGTERM, SIGHUP, SIGPIPE};
    size_t i;
    for (i = 0; i < sizeof sigs / sizeof sigs[0]; i++) {
        struct sigaction sa, old;
        memset(&sa, 0, sizeof sa);
        sigemptyset(&sa.sa_mask);
        sa.sa_handler = on ? on_signal : SIG_DFL;
        if (sigaction(sigs[i], NULL, &old) == 0 && old.sa_handler == SIG_IGN)
            continue; /* keep what the parent asked for */
        sigaction(sigs[i], &sa, NULL);
    }
}

/* ------------------------------------------------------------------------ */
/* Helpers                                                                    */
/* ------------------------------------------------------------------------ */

static char *dup_str(const char *s)
{
    size_t n = strlen(s) + 1;
    char *p = malloc(n);
    if (p) memcpy(p, s, n);
    return p;
}

/* "dir/.NAME.XXXXXX" beside `path`, or "dir/.ckpt.XXXXXX" when the long
 * form would pass the file-name or path limit. */
static char *temp_pattern(const char *path)
{
    const char *slash = strrchr(path, '/');
    size_t dirlen = slash ? (size_t)(slash - path) + 1 : 0;
    const char *base = path + dirlen;
    size_t blen = strlen(base), need;
    char *t;
    int shortform = blen + 9 > NAME_MAX || dirlen + blen + 9 >= PATH_MAX;
    need = dirlen + (shortform ? 16 : blen + 16);
    t = malloc(need);
    if (!t) return NULL;
    memcpy(t, path, dirlen);
    if (shortform)
        snprintf(t + dirlen, need - dirlen, ".ckpt.XXXXXX");
    else
        snprintf(t + dirlen, need - dirlen, ".%s.XXXXXX", base);
    return t;
}

/* fsync the directory holding `path` (after a rename, for --sync). */
static void sync_dir(const char *path)
{
    const char *slash = strrchr(path, '/');
    char *dir;
    int fd;
    if (!slash) {
        dir = dup_str(".");
    } else {
        size_t n = slash == path ? 1 : (size_t)(slash - path);
        dir = malloc(n + 1);
        if (dir) {
            memcpy(dir, path, n);
            dir[n] = '\0';
        }
    }
    if (!dir) return;
    fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd >= 0) {
        fsync(fd);
        close(fd);
    }
    free(dir);
}

int cli_same_file(const char *input, const struct stat *out_st)
{
    struct stat in;
    if (!input) return 0;
    if (strcmp(input, "-") == 0) {
        if (fstat(STDIN_FILENO, &in) != 0) return 0;
    } else if (stat(input, &in) != 0) {
        return 0;
    }
    return in.st_dev == out_st->st_dev && in.st_ino == out_st->st_ino;
}

/* ------------------------------------------------------------------------ */
/* Opening                                                                    */
/* ------------------------------------------------------------------------ */

static int fail(cli_out *o, const char *shown, const char *why)
{
    cli_error("%s: %s", shown, why);
    cli_out_abort(o);
    return -1;
}

/* Write in place to an open descriptor (stdout, a device, a FIFO). */
static int open_in_place(cli_out *o, int fd, int owned)
{
    o->fd = fd;
    o->in_place = 1;
    o->owns_fd = owned;
    if (fd == STDOUT_FILENO) {
        o->fp = stdout;
        return 0;
    }
    o->fp = fdopen(fd, "wb");
    if (!o->fp) {
        int e = errno;
        return fail(o, o->shown, strerror(e));
    }
    return 0;
}

int cli_out_open(cli_out *o, const char *path, const cli_out_opts *opts)
{
    struct stat st, lst;
    const char *target;
    char *resolved = NULL;
    mode_t mask;
    int fd, exists;

    memset(o, 0, sizeof *o);
    o->fd = -1;
    o->sync = opts->sync;
    o->shown = path;
    if (path[0] == '\0') return fail(o, "ckpt", "the output file name is empty");

    if (strcmp(path, "-") == 0) {
        o->shown = "standard output";
        o->is_stdout = 1;
        if (fstat(STDOUT_FILENO, &st) == 0 && S_ISREG(st.st_mode) &&
            cli_same_file(opts->input, &st))
            return fail(o, "standard output", "is the same file as the input");
        return open_in_place(o, STDOUT_FILENO, 0);
    }

    exists = stat(path, &st) == 0;
    if (!exists && errno != ENOENT) return fail(o, path, strerror(errno));
    if (!exists && lstat(path, &lst) == 0 && S_ISLNK(lst.st_mode))
        return fail(o, path, "is a dangling symbolic link; not writing through it");
    if (exists && opts->no_follow && lstat(path, &lst) == 0 && S_ISLNK(lst.st_mode)) {
        /* inside an output folder: the link itself is the entry */
        st = lst;
    }
    if (exists && cli_same_file(opts->input, &st))
        return fail(o, path, "is the same file as the input; not writing over it");
    if (exists && S_ISDIR(st.st_mode)) return fail(o, path, "is a directory");

    if (exists && !S_ISREG(st.st_mode) && !S_ISLNK(st.st_mode)) {
        if (opts->no_follow) return fail(o, path, "exists and is not a regular file");
        if (S_ISBLK(st.st_mode) && !opts->force)
            return fail(o, path, "is a block device; --force writes to it");
        /* a device, a FIFO or a socket: written in place, never replaced */
        fd = open(path, O_WRONLY | O_NOCTTY | O_CLOEXEC);
        if (fd < 0) {
            int e = errno;
            return fail(o, path,
                        e == ENXIO ? "cannot be opened for writing (a socket?)" : strerror(e));
        }
        return open_in_place(o, fd, 1);
    }

    if (exists && !opts->force) {
        cli_error("%s: already exists (--force replaces it)", path);
        cli_out_abort(o);
        return -1;
    }

    /* A regular file, new or replaced: write it beside its final name.  A
     * symlink to a regular file is resolved so that the link stays. */
    target = path;
    if (exists && !opts->no_follow && lstat(path, &lst) == 0 && S_ISLNK(lst.st_mode)) {
        resolved = realpath(path, NULL);
        if (!resolved) return fail(o, path, strerror(errno));
        target = resolved;
    }
    o->path = resolved ? resolved : dup_str(target);
    o->tmp = temp_pattern(target);
    if (!o->path || !o->tmp) return fail(o, path, strerror(ENOMEM));
    if (strlen(o->tmp) >= sizeof tmp_name) return fail(o, path, "name too long");
    o->replace = exists;
    fd = mkstemp(o->tmp);
    if (fd < 0) {
        int e = errno;
        free(o->tmp);
        o->tmp = NULL;
        return fail(o, path, strerror(e));
    }
    if (exists) {
        /* keep what the replaced file had: mode, and owner when allowed */
        if (fchown(fd, st.st_uid, st.st_gid) != 0) {
            /* not permitted: the file becomes ours, as with cp */
        }
        fchmod(fd, st.st_mode & 07777);
    } else {
        /* mkstemp makes the file 0600: give it the mode a new file gets */
        mask = umask(0);
        umask(mask);
        fchmod(fd, (mode_t)(0666 & ~mask));
    }
    strcpy(tmp_name, o->tmp);
    tmp_live = 1;
    watch_signals(1);
    o->fd = fd;
    o->owns_fd = 1;
    o->fp = fdopen(fd, "wb");
    if (!o->fp) {
        int e = errno;
        return fail(o, path, strerror(e));
    }
    return 0;
}

/* ------------------------------------------------------------------------ */
/* Finishing                                                                  */
/* ------------------------------------------------------------------------ */

int cli_out_commit(cli_out *o)
{
    int e = 0;
    struct stat st;
    if (!o->fp) {
        cli_out_abort(o);
        return -1;
    }
    if (fflush(o->fp) != 0 || ferror(o->fp))
        e = errno != 0 ? errno : EIO;
    else if (o->sync && fsync(o->fd) != 0 && errno != EINVAL && errno != ENOTSUP && errno != EROFS)
        e = errno;
    if (o->is_stdout) {
        /* stdout stays open: cli_stdout_finish() closes it */
        o->fp = NULL;
        if (e != 0) {
            cli_stdout_failed();
            return -1; /* reported by cli_stdout_finish() */
        }
        return 0;
    }
    if (fclose(o->fp) != 0 && e == 0) e = errno != 0 ? errno : EIO;
    o->fp = NULL;
    o->fd = -1;
    if (e != 0) {
        cli_error("%s: %s", o->shown, strerror(e));
        cli_out_abort(o);
        return -1;
    }
    if (o->in_place) {
        cli_out_abort(o);
        return 0;
    }
    if (o->replace) {
        if (rename(o->tmp, o->path) != 0) e = errno;
    } else if (link(o->tmp, o->path) == 0) {
        unlink(o->tmp);
    } else {
        e = errno;
        if (e == EEXIST || lstat(o->path, &st) == 0) {
            cli_error("%s: appeared while it was being written; left alone "
                      "(--force replaces it)",
                      o->shown);
            cli_out_abort(o);
            return -1;
        }
        /* a file system without hard links */
        e = rename(o->tmp, o->path) != 0 ? errno : 0;
    }
    if (e != 0) {
        cli_error("%s: %s", o->shown, strerror(e));
        cli_out_abort(o);
        return -1;
    }
    if (o->sync) sync_dir(o->path);
    tmp_live = 0;
    watch_signals(0);
    free(o->tmp);
    o->tmp = NULL;
    cli_out_abort(o);
    return 0;
}

void cli_out_abort(cli_out *o)
{
    if (o->fp && !o->is_stdout)
        fclose(o->fp);
    else if (!o->fp && o->owns_fd && o->fd >= 0)
        close(o->fd);
    o->fp = NULL;
    o->fd = -1;
    if (o->tmp) {
        unlink(o->tmp);
        tmp_live = 0;
        watch_signals(0);
    }
    free(o->tmp);
    free(o->path);
    o->tmp = o->path = NULL;
}

int cli_out_refuse_tty(const char *what, const char *out)
{
    if (out == NULL && isatty(STDOUT_FILENO)) {
        cli_error("not writing %s to a terminal; redirect it, or give -o FILE "
                  "(-o - writes it to the terminal anyway)",
                  what);
        return 1;
    }
    return 0;
}

/* ------------------------------------------------------------------------ */
/* Folders                                                                    */
/* ------------------------------------------------------------------------ */

int cli_mkdirs(const char *dir)
{
    char *p;
    size_t i, n = strlen(dir);
    struct stat st;
    int r = CLI_OK;
    if (n == 0) return cli_error("the output directory name is empty");
    p = dup_str(dir);
    if (!p) return cli_error("%s: %s", dir, strerror(ENOMEM));
    for (i = 1; i <= n && r == CLI_OK; i++) {
        if (p[i] != '/' && p[i] != '\0') continue;
        if (p[i - 1] == '/') continue;
        p[i] = '\0';
        if (mkdir(p, 0777) != 0 && errno != EEXIST)
            r = cli_error("%s: %s", p, strerror(errno));
        else if (stat(p, &st) != 0)
            r = cli_error("%s: %s", p, strerror(errno));
        else if (!S_ISDIR(st.st_mode))
            r = cli_error("%s: not a directory", p);
        if (i < n) p[i] = '/';
    }
    free(p);
    return r;
}

/* ------------------------------------------------------------------------ */
/* Input from "-"                                                             */
/* ------------------------------------------------------------------------ */

static int spool_fd = -1;

static int in_fail(ckpt_error *err, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

static int in_fail(ckpt_error *err, const char *fmt, ...)
{
    va_list ap;
    memset(err, 0, sizeof *err);
    err->code = CKPT_E_IO;
    err->offset = -1;
    va_start(ap, fmt);
    vsnprintf(err->message, sizeof err->message, fmt, ap);
    va_end(ap);
    return CLI_FAIL;
}

/* Copy standard input (a pipe, a socket, ...) to an unlinked temporary file. */
static int spool_stdin(ckpt_error *err)
{
    static char buf[1 << 16];
    const char *tmpdir = getenv("TMPDIR");
    char *name;
    size_t len;
    int fd;

    if (!tmpdir || !*tmpdir) tmpdir = "/tmp";
    len = strlen(tmpdir) + 24;
    name = malloc(len);
    if (!name) return in_fail(err, "%s", strerror(ENOMEM));
    snprintf(name, len, "%s/ckpt-stdin.XXXXXX", tmpdir);
    fd = mkstemp(name);
    if (fd < 0) {
        int e = errno;
        free(name);
        return in_fail(err, "cannot spool it to %s: %s", tmpdir, strerror(e));
    }
    unlink(name);
    free(name);
    for (;;) {
        ssize_t n = read(STDIN_FILENO, buf, sizeof buf), w = 0;
        if (n == 0) break;
        if (n < 0) {
            int e = errno;
            if (e == EINTR) continue;
            close(fd);
            return in_fail(err, "%s", strerror(e));
        }
        while (w < n) {
            ssize_t k = write(fd, buf + w, (size_t)(n - w));
            if (k < 0) {
                int e = errno;
                if (e == EINTR) continue;
                close(fd);
                return in_fail(err, "spooling it to %s: %s", tmpdir, strerror(e));
            }
            w += k;
        }
    }
    spool_fd = fd;
    return CLI_OK;
}

int cli_input_fd(const char *path, int *fd_out, uint64_t *size_out, ckpt_error *err)
{
    struct stat st;
    int fd;

    if (strcmp(path, "-") != 0) {
        fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0) return in_fail(err, "%s", strerror(errno));
        if (fstat(fd, &st) != 0) {
            int e = errno;
            close(fd);
            return in_fail(err, "%s", strerror(e));
        }
        if (S_ISDIR(st.st_mode)) {
            close(fd);
            return in_fail(err, "is a directory");
        }
        if (!S_ISREG(st.st_mode) && !S_ISBLK(st.st_mode)) {
            close(fd);
            return in_fail(err,
                           "needs a seekable file (this is a %s); pipe it in as "
                           "'-' to read it from standard input",
                           S_ISFIFO(st.st_mode)  ? "FIFO or pipe"
                           : S_ISCHR(st.st_mode) ? "character device"
                                                 : "special file");
        }
        *fd_out = fd;
        *size_out = (uint64_t)st.st_size;
        return CLI_OK;
    }

    if (spool_fd < 0) {
        if (fstat(STDIN_FILENO, &st) != 0) return in_fail(err, "%s", strerror(errno));
        if (S_ISREG(st.st_mode) && lseek(STDIN_FILENO, 0, SEEK_CUR) == 0) {
            spool_fd = dup(STDIN_FILENO); /* a file redirected in: read in place */
            if (spool_fd < 0) return in_fail(err, "%s", strerror(errno));
        } else if (isatty(STDIN_FILENO)) {
            return in_fail(err, "is a terminal; pipe a checkpoint in, or name a file");
        } else if (spool_stdin(err) != CLI_OK) {
            return CLI_FAIL;
        }
    }
    /* every "-" reads the same bytes */
    if (fstat(spool_fd, &st) != 0) return in_fail(err, "%s", strerror(errno));
    fd = dup(spool_fd);
    if (fd < 0) return in_fail(err, "%s", strerror(errno));
    *fd_out = fd;
    *size_out = (uint64_t)st.st_size;
    return CLI_OK;
}

int cli_pread_reader(void *opaque, uint64_t offset, void *buf, size_t n)
{
    int fd = (int)(intptr_t)opaque;
    unsigned char *p = buf;
    while (n > 0) {
        ssize_t k;
        if (offset > (uint64_t)INT64_MAX) return -1;
        k = pread(fd, p, n, (off_t)offset);
        if (k < 0 && errno == EINTR) continue;
        if (k <= 0) return -1;
        p += k;
        n -= (size_t)k;
        offset += (uint64_t)k;
    }
    return 0;
}

static void close_reader(void *opaque)
{
    close((int)(intptr_t)opaque);
}

int cli_input_reader(const char *path, ckpt_reader *rd, ckpt_error *err)
{
    struct stat st;
    int fd;
    uint64_t size;

    memset(err, 0, sizeof *err);
    err->offset = -1;
    if (strcmp(path, "-") != 0) {
        /* the library opens files by name; only name what it would get
         * wrong: a FIFO or a device is not seekable */
        if (stat(path, &st) == 0 && !S_ISREG(st.st_mode) && !S_ISDIR(st.st_mode) &&
            !S_ISBLK(st.st_mode)) {
            if (cli_input_fd(path, &fd, &size, err) == CLI_OK) close(fd);
            return -1;
        }
        return 0;
    }
    if (cli_input_fd(path, &fd, &size, err) != CLI_OK) return -1;
    memset(rd, 0, sizeof *rd);
    rd->read = cli_pread_reader;
    rd->close = close_reader;
    rd->opaque = (void *)(intptr_t)fd;
    rd->size = size;
    return 1;
}

ckpt_file *cli_open_input(const char *path, const ckpt_options *opt, ckpt_error *err)
{
    ckpt_reader rd;
    int r = cli_input_reader(path, &rd, err);
    if (r < 0) return NULL;
    return r ? ckpt_open_reader(&rd, opt, err) : ckpt_open_path(path, opt, err);
}
