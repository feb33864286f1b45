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
 *   an entry of an output  (convert OUTDIR/, extract -d DIR) a symlink there
 *   folder                 is the entry itself: replaced with --force by a
 *                          new file (mode 0666 & ~umask), never followed;
 *                          any other non-regular entry is refused
 *   a file of the input    refused, --force or not: the input itself, and
 *                          for a folder, an index or a DCP checkpoint every
 *                          part (ckpt_part_path()), the index or .metadata
 *                          and a folder's one checkpoint file, compared by
 *                          device and inode (a link or a hard link to one
 *                          is refused too)
 *
 * Several files that belong together (the shards and index of convert
 * OUTDIR/) are written as a batch: every file under its temporary name
 * first, then all moved into place with the signals held, in order (the
 * index last); a failure while moving puts the replaced files back.  A
 * failure or a signal (INT, TERM, HUP, PIPE) before that removes every
 * temporary file and leaves what was there untouched.  Only SIGKILL or a
 * crash can leave temporary files (".NAME.XXXXXX" beside NAME): they are
 * not removed by a later run, which cannot tell them from a live one's.
 *
 * No fsync unless --sync (like cp).  Temporary names are short enough that
 * a valid OUT never yields an invalid temporary name.
 */
#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L
#endif

#include "cli.h"

#include <dirent.h>
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
/* Temporary files, removed if a signal ends the program                      */
/* ------------------------------------------------------------------------ */

/* The temporary files that exist now.  The handler reads the list; it is
 * changed with the signals held, and only while no other thread runs (the
 * read-ahead threads of convert live between the open and the commit of a
 * file), so the handler never sees it half changed. */
static char **live;
static volatile sig_atomic_t nlive;
static size_t live_cap;
static int watching;

static const int watched[] = {SIGINT, SIGTERM, SIGHUP, SIGPIPE};
#define NWATCHED (sizeof watched / sizeof watched[0])

static void on_signal(int sig)
{
    sig_atomic_t i;
    for (i = 0; i < nlive; i++) unlink(live[i]);
    signal(sig, SIG_DFL);
    raise(sig);
}

static void watch_signals(void)
{
    size_t i;
    if (watching) return;
    watching = 1;
    for (i = 0; i < NWATCHED; i++) {
        struct sigaction sa, old;
        memset(&sa, 0, sizeof sa);
        sigemptyset(&sa.sa_mask);
        sa.sa_handler = on_signal;
        if (sigaction(watched[i], NULL, &old) == 0 && old.sa_handler == SIG_IGN)
            continue; /* keep what the parent asked for */
        sigaction(watched[i], &sa, NULL);
    }
}

static int hold_depth;
static sigset_t hold_saved;

void cli_signals_hold(void)
{
    sigset_t set;
    size_t i;
    if (hold_depth++ > 0) return;
    sigemptyset(&set);
    for (i = 0; i < NWATCHED; i++) sigaddset(&set, watched[i]);
    sigprocmask(SIG_BLOCK, &set, &hold_saved);
}

void cli_signals_release(void)
{
    if (hold_depth == 0 || --hold_depth > 0) return;
    sigprocmask(SIG_SETMASK, &hold_saved, NULL); /* a signal that came meanwhile lands here */
}

/* Add name (kept, not copied) to the files removed on a signal: 0, or -1
 * out of memory. */
static int live_add(char *name)
{
    int r = 0;
    cli_signals_hold();
    if ((size_t)nlive == live_cap) {
        size_t cap = live_cap ? 2 * live_cap : 16;
        char **more = realloc(live, cap * sizeof *live);
        if (more) {
            live = more;
            live_cap = cap;
        } else {
            r = -1;
        }
    }
    if (r == 0) {
        live[nlive] = name;
        nlive++;
        watch_signals();
    }
    cli_signals_release();
    return r;
}

static void live_remove(const char *name)
{
    sig_atomic_t i;
    cli_signals_hold();
    for (i = 0; i < nlive; i++)
        if (live[i] == name) {
            live[i] = live[nlive - 1];
            nlive--;
            break;
        }
    if (nlive == 0) {
        free(live);
        live = NULL;
        live_cap = 0;
    }
    cli_signals_release();
}

/* For the tests (tests/cli_defects33_output_test.sh): CKPT_TEST_RAISE="K
 * SIG" (SIG INT, TERM or HUP) raises the signal at the K-th event of the
 * program's output: each file complete under its temporary name is one,
 * each file of a batch moved into place another.  An interruption at a
 * known point; nothing happens unless it is set. */
static void test_event(void)
{
    static long count, at = -1;
    static int sig;
    if (at < 0) {
        const char *s = getenv("CKPT_TEST_RAISE");
        char name[8];
        at = 0;
        if (s && sscanf(s, "%ld %7s", &at, name) == 2)
            sig = strcmp(name, "INT") == 0    ? SIGINT
                  : strcmp(name, "TERM") == 0 ? SIGTERM
                  : strcmp(name, "HUP") == 0  ? SIGHUP
                                              : 0;
        if (sig == 0) at = 0;
    }
    if (at > 0 && ++count == at) raise(sig);
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

#define BACKUP_SUFFIX ".old"

/* "dir/.NAME.XXXXXX" beside `path`, or "dir/.ckpt.XXXXXX" when the long
 * form (with BACKUP_SUFFIX after it) would pass the file-name or path
 * limit. */
static char *temp_pattern(const char *path)
{
    const char *slash = strrchr(path, '/');
    size_t dirlen = slash ? (size_t)(slash - path) + 1 : 0;
    const char *base = path + dirlen;
    size_t blen = strlen(base), need;
    size_t extra = 8 + sizeof BACKUP_SUFFIX - 1; /* ".", ".XXXXXX", ".old" */
    char *t;
    int shortform = blen + extra > NAME_MAX || dirlen + blen + extra >= PATH_MAX;
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

/* The directory part of path ("." for none), malloc'd. */
static char *dir_of(const char *path)
{
    const char *slash = strrchr(path, '/');
    char *dir;
    size_t n;
    if (!slash) return dup_str(".");
    n = slash == path ? 1 : (size_t)(slash - path);
    dir = malloc(n + 1);
    if (dir) {
        memcpy(dir, path, n);
        dir[n] = '\0';
    }
    return dir;
}

/* fsync the directory holding `path` (after a rename, for --sync). */
static void sync_dir(const char *path)
{
    char *dir = dir_of(path);
    int fd;
    if (!dir) return;
    fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd >= 0) {
        fsync(fd);
        close(fd);
    }
    free(dir);
}

/* ------------------------------------------------------------------------ */
/* The files of the input                                                     */
/* ------------------------------------------------------------------------ */

struct cli_file_id {
    dev_t dev;
    ino_t ino;
};

static int ids_add(cli_inputs *in, const struct stat *st)
{
    size_t i;
    for (i = 0; i < in->n; i++)
        if (in->ids[i].dev == st->st_dev && in->ids[i].ino == st->st_ino) return 0;
    if (in->n == in->cap) {
        size_t cap = in->cap ? 2 * in->cap : 16;
        struct cli_file_id *more = realloc(in->ids, cap * sizeof *more);
        if (!more) return -1;
        in->ids = more;
        in->cap = cap;
    }
    in->ids[in->n].dev = st->st_dev;
    in->ids[in->n].ino = st->st_ino;
    in->n++;
    return 0;
}

/* path as the file it names and, when it is a symlink, as the link. */
static int ids_add_path(cli_inputs *in, const char *path)
{
    struct stat st;
    if (stat(path, &st) == 0 && ids_add(in, &st) != 0) return -1;
    if (lstat(path, &st) == 0 && S_ISLNK(st.st_mode) && ids_add(in, &st) != 0) return -1;
    return 0;
}

static int ends_with(const char *s, const char *tail)
{
    size_t n = strlen(s), t = strlen(tail);
    return n >= t && strcmp(s + n - t, tail) == 0;
}

/* A folder opened as a checkpoint: its index or DCP .metadata and, when it
 * held one checkpoint file (no part path), the files the library would
 * have taken for it (as ckpt_open_path() picks them). */
static int ids_add_folder(cli_inputs *in, const char *dir, int single)
{
    DIR *d = opendir(dir);
    struct dirent *e;
    size_t dl = strlen(dir);
    int r = 0;
    if (!d) return 0; /* nothing more to protect than what was stat'ed */
    while (r == 0 && (e = readdir(d)) != NULL) {
        const char *n = e->d_name;
        char *full;
        int take = strcmp(n, ".metadata") == 0 || ends_with(n, ".index.json");
        if (!take && single && n[0] != '.' && !ends_with(n, ".json") && !ends_with(n, ".txt") &&
            !ends_with(n, ".md"))
            take = 1;
        if (!take) continue;
        full = malloc(dl + strlen(n) + 2);
        if (!full) {
            r = -1;
            break;
        }
        sprintf(full, "%s/%s", dir, n);
        r = ids_add_path(in, full);
        free(full);
    }
    closedir(d);
    return r;
}

int cli_inputs_add(cli_inputs *in, const char *path, const ckpt_file *f)
{
    struct stat st;
    size_t i, n = f ? ckpt_part_count(f) : 0;
    int r = 0;
    if (strcmp(path, "-") == 0) {
        if (fstat(STDIN_FILENO, &st) == 0) r = ids_add(in, &st);
    } else {
        r = ids_add_path(in, path);
        for (i = 0; i < n && r == 0; i++) {
            const char *p = ckpt_part_path(f, i);
            if (p) r = ids_add_path(in, p);
        }
        if (r == 0 && stat(path, &st) == 0 && S_ISDIR(st.st_mode))
            r = ids_add_folder(in, path, n <= 1 && ckpt_part_path(f, 0) == NULL);
    }
    if (r != 0) cli_error("%s: out of memory", path);
    return r;
}

void cli_inputs_free(cli_inputs *in)
{
    free(in->ids);
    in->ids = NULL;
    in->n = in->cap = 0;
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

int cli_is_input(const cli_out_opts *opts, const struct stat *st)
{
    size_t i;
    if (cli_same_file(opts->input, st)) return 1;
    if (!opts->inputs) return 0;
    for (i = 0; i < opts->inputs->n; i++)
        if (opts->inputs->ids[i].dev == st->st_dev && opts->inputs->ids[i].ino == st->st_ino)
            return 2;
    return 0;
}

static const char *input_why(int which)
{
    return which == 1 ? "is the same file as the input; not writing over it"
                      : "is one of the files of the input; not writing over it";
}

/* The entry `path` as cli_out_open() sees it: *st the file (no_follow: a
 * symlink is the link itself); 1 when it exists, 0 when not, -1 on error
 * (errno set). */
static int entry_stat(const char *path, const cli_out_opts *opts, struct stat *st)
{
    struct stat lst;
    if (stat(path, st) != 0) {
        int e = errno;
        if (lstat(path, &lst) == 0 && S_ISLNK(lst.st_mode)) {
            *st = lst; /* a link leading nowhere (or round in a loop) */
            return 1;
        }
        errno = e;
        return e == ENOENT ? 0 : -1;
    }
    if (opts->no_follow && lstat(path, &lst) == 0 && S_ISLNK(lst.st_mode))
        *st = lst; /* inside an output folder: the link itself is the entry */
    return 1;
}

int cli_out_refuse_input(const char *path, const cli_out_opts *opts)
{
    struct stat st;
    int which;
    if (entry_stat(path, opts, &st) != 1 || (which = cli_is_input(opts, &st)) == 0) return 0;
    cli_error("%s: %s", path, input_why(which));
    return -1;
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
    int fd, exists, which, link_entry;

    memset(o, 0, sizeof *o);
    o->fd = -1;
    o->sync = opts->sync;
    o->batch = opts->batch;
    o->shown = path;
    if (path[0] == '\0') return fail(o, "ckpt", "the output file name is empty");

    if (strcmp(path, "-") == 0) {
        o->shown = "standard output";
        o->is_stdout = 1;
        if (fstat(STDOUT_FILENO, &st) == 0 && S_ISREG(st.st_mode) &&
            (which = cli_is_input(opts, &st)) != 0)
            return fail(o, "standard output", input_why(which));
        return open_in_place(o, STDOUT_FILENO, 0);
    }

    exists = entry_stat(path, opts, &st);
    if (exists < 0) return fail(o, path, strerror(errno));
    link_entry = exists && S_ISLNK(st.st_mode); /* no_follow, or dangling */
    if (link_entry && !opts->no_follow)
        return fail(o, path, "is a dangling symbolic link; not writing through it");
    if (exists && (which = cli_is_input(opts, &st)) != 0) return fail(o, path, input_why(which));
    if (exists && S_ISDIR(st.st_mode)) return fail(o, path, "is a directory");

    if (exists && !S_ISREG(st.st_mode) && !link_entry) {
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
    o->replace = exists;
    fd = mkstemp(o->tmp);
    if (fd < 0) {
        int e = errno;
        free(o->tmp);
        o->tmp = NULL;
        return fail(o, path, strerror(e));
    }
    if (live_add(o->tmp) != 0) {
        close(fd);
        unlink(o->tmp);
        free(o->tmp);
        o->tmp = NULL;
        return fail(o, path, strerror(ENOMEM));
    }
    if (exists && !link_entry) {
        /* keep what the replaced file had: mode, and owner when allowed */
        if (fchown(fd, st.st_uid, st.st_gid) != 0) {
            /* not permitted: the file becomes ours, as with cp */
        }
        fchmod(fd, st.st_mode & 07777);
    } else {
        /* a new file (or one replacing a symlink entry, whose own mode is
         * 0777): mkstemp made it 0600, give it the mode a new file gets */
        mask = umask(0);
        umask(mask);
        fchmod(fd, (mode_t)(0666 & ~mask));
    }
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

struct cli_out_pending {
    char *tmp;   /* complete, under its temporary name (in `live`) */
    char *path;  /* where it goes */
    char *shown; /* for messages */
    char *bak;   /* while moving: the replaced file, linked aside */
    int replace, sync, absent;
};

/* Hand a complete temporary file to its batch. */
static int batch_add(cli_out *o)
{
    cli_out_batch *b = o->batch;
    struct cli_out_pending *p;
    if (b->n == b->cap) {
        size_t cap = b->cap ? 2 * b->cap : 8;
        struct cli_out_pending *more = realloc(b->files, cap * sizeof *more);
        if (!more) return -1;
        b->files = more;
        b->cap = cap;
    }
    p = &b->files[b->n];
    memset(p, 0, sizeof *p);
    p->shown = dup_str(o->shown);
    if (!p->shown) return -1;
    p->tmp = o->tmp;
    p->path = o->path;
    p->replace = o->replace;
    p->sync = o->sync;
    o->tmp = o->path = NULL;
    b->n++;
    return 0;
}

/* Move the complete temporary file tmp to path: rename over a file being
 * replaced, else link (so that a path that appeared meanwhile is not
 * replaced; on a file system without hard links, rename).  0, or -1 with
 * the message in why. */
static int put_in_place(const char *tmp, const char *path, int replace, const char **why)
{
    struct stat st;
    int e;
    if (replace) {
        if (rename(tmp, path) == 0) return 0;
        *why = strerror(errno);
        return -1;
    }
    if (link(tmp, path) == 0) {
        unlink(tmp);
        return 0;
    }
    e = errno;
    if (e == EEXIST || lstat(path, &st) == 0) {
        *why = "appeared while it was being written; left alone (--force replaces it)";
        return -1;
    }
    if (rename(tmp, path) == 0) return 0;
    *why = strerror(errno);
    return -1;
}

int cli_out_commit(cli_out *o)
{
    int e = 0;
    const char *why = NULL;
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
    test_event();
    if (o->batch) {
        if (batch_add(o) != 0) {
            cli_error("%s: %s", o->shown, strerror(ENOMEM));
            cli_out_abort(o);
            return -1;
        }
        return 0;
    }
    if (put_in_place(o->tmp, o->path, o->replace, &why) != 0) {
        cli_error("%s: %s", o->shown, why);
        cli_out_abort(o);
        return -1;
    }
    if (o->sync) sync_dir(o->path);
    live_remove(o->tmp);
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
        live_remove(o->tmp);
    }
    free(o->tmp);
    free(o->path);
    o->tmp = o->path = NULL;
}

/* The file p replaces, linked aside as "<tmp>.old" so that it can be put
 * back (p->bak); none when that cannot be done (no hard links, ...), and
 * p->absent when it is gone already. */
static void link_aside(struct cli_out_pending *p)
{
    size_t n = strlen(p->tmp);
    p->bak = malloc(n + sizeof BACKUP_SUFFIX);
    if (!p->bak) return;
    memcpy(p->bak, p->tmp, n);
    memcpy(p->bak + n, BACKUP_SUFFIX, sizeof BACKUP_SUFFIX);
    if (linkat(AT_FDCWD, p->path, AT_FDCWD, p->bak, 0) != 0) { /* a symlink: the link */
        p->absent = errno == ENOENT;
        free(p->bak);
        p->bak = NULL;
    }
}

static void batch_free(cli_out_batch *b)
{
    size_t i;
    for (i = 0; i < b->n; i++) {
        struct cli_out_pending *p = &b->files[i];
        if (p->tmp) {
            unlink(p->tmp);
            live_remove(p->tmp);
        }
        free(p->tmp);
        free(p->path);
        free(p->shown);
        free(p->bak);
    }
    free(b->files);
    b->files = NULL;
    b->n = b->cap = 0;
}

void cli_out_batch_abort(cli_out_batch *b)
{
    batch_free(b);
}

int cli_out_batch_commit(cli_out_batch *b)
{
    size_t i, k, failed = b->n;
    const char *why = NULL;
    char *synced = NULL;
    int r = 0;

    cli_signals_hold();
    for (i = 0; i < b->n; i++) {
        struct cli_out_pending *p = &b->files[i];
        if (p->replace) link_aside(p);
        if (put_in_place(p->tmp, p->path, p->replace, &why) != 0) {
            failed = i;
            cli_error("%s: %s", p->shown, why);
            r = -1;
            break;
        }
        live_remove(p->tmp);
        free(p->tmp);
        p->tmp = NULL;
        test_event();
    }
    if (r != 0) {
        /* put back what was there: the replaced files, the absence of the
         * new ones (a replaced file that could not be linked aside stays
         * replaced, which the message says) */
        for (k = failed; k-- > 0;) {
            struct cli_out_pending *p = &b->files[k];
            if (p->bak && rename(p->bak, p->path) == 0) {
                free(p->bak);
                p->bak = NULL;
            } else if (!p->replace || p->absent) {
                unlink(p->path);
            } else {
                cli_error("%s: already replaced; the file it replaced could not be put back",
                          p->shown);
            }
        }
    }
    for (i = 0; i < b->n; i++) {
        struct cli_out_pending *p = &b->files[i];
        char *dir;
        if (p->bak) unlink(p->bak);
        if (r != 0 || !p->sync || !(dir = dir_of(p->path))) continue;
        if (!synced || strcmp(dir, synced) != 0) sync_dir(p->path); /* once per folder */
        free(synced);
        synced = dir;
    }
    free(synced);
    batch_free(b);
    cli_signals_release();
    return r;
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

/* Read up to n bytes of standard input (fewer only at its end); the count,
 * or -1 with errno set. */
static ssize_t read_stdin(unsigned char *buf, size_t n)
{
    size_t got = 0;
    while (got < n) {
        ssize_t k = read(STDIN_FILENO, buf + got, n - got);
        if (k < 0 && errno == EINTR) continue;
        if (k < 0) return -1;
        if (k == 0) break;
        got += (size_t)k;
    }
    return (ssize_t)got;
}

static int write_full(int fd, const unsigned char *p, size_t n)
{
    while (n > 0) {
        ssize_t k = write(fd, p, n);
        if (k < 0 && errno == EINTR) continue;
        if (k <= 0) return -1;
        p += k;
        n -= (size_t)k;
    }
    return 0;
}

/* Copy standard input (a pipe, a socket, ...) to an unlinked temporary
 * file: once its first bytes are those of a checkpoint (ckpt_sniff()), and
 * at most cli_max_spool() bytes. */
static int spool_stdin(ckpt_error *err)
{
    static unsigned char buf[1 << 16];
    const char *tmpdir = getenv("TMPDIR");
    uint64_t max = cli_max_spool(), total;
    char *name;
    size_t len;
    ssize_t n;
    int fd;

    /* the first bytes decide, before anything is spooled */
    n = read_stdin(buf, 512);
    if (n < 0) return in_fail(err, "%s", strerror(errno));
    if (n > 0 && ckpt_sniff(buf, (size_t)n, n < 512 ? (uint64_t)n : UINT64_MAX, err) != 0)
        return CLI_FAIL;

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
    total = 0;
    while (n > 0) {
        if (max != 0 && (uint64_t)n > max - total) {
            char h[32];
            close(fd);
            in_fail(err, "more than %s to spool to a temporary file (max_spool)",
                    cli_human_size(max, h, sizeof h));
            err->code = CKPT_E_LIMIT;
            return CLI_FAIL;
        }
        if (write_full(fd, buf, (size_t)n) != 0) {
            int e = errno != 0 ? errno : EIO;
            close(fd);
            return in_fail(err, "spooling it to %s: %s", tmpdir, strerror(e));
        }
        total += (uint64_t)n;
        n = read_stdin(buf, sizeof buf);
        if (n < 0) {
            int e = errno;
            close(fd);
            return in_fail(err, "%s", strerror(e));
        }
    }
    spool_fd = fd;
    return CLI_OK;
}

/* What a path that is not a regular file, a directory or a block device
 * is, for "needs a seekable file". */
static const char *kind_of(mode_t m)
{
    return S_ISFIFO(m)   ? "FIFO or pipe"
           : S_ISCHR(m)  ? "character device"
           : S_ISSOCK(m) ? "socket"
                         : "special file";
}

int cli_input_fd(const char *path, int *fd_out, uint64_t *size_out, ckpt_error *err)
{
    struct stat st;
    int fd, fl;

    if (strcmp(path, "-") != 0) {
        /* O_NONBLOCK: a FIFO with no writer would block the open; it is
         * refused instead, whatever is (or is not) writing to it */
        fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
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
                           kind_of(st.st_mode));
        }
        if ((fl = fcntl(fd, F_GETFL)) >= 0) fcntl(fd, F_SETFL, fl & ~O_NONBLOCK);
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
