/*
 * source.c - layer 1 (common): bytes by (offset, length).  A file read with
 * pread, a file mapped with mmap, a caller's memory buffer, or a caller's
 * reader callback.  Nothing else in the library touches a file descriptor.
 */
#define _FILE_OFFSET_BITS 64
#define _POSIX_C_SOURCE 200809L
#include "common.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

static int fd_read(void *opaque, uint64_t off, void *buf, size_t n)
{
    int fd = (int)(intptr_t)opaque;
    uint8_t *p = buf;
    while (n) {
        size_t chunk = n > ((size_t)1 << 30) ? ((size_t)1 << 30) : n;
        ssize_t r = pread(fd, p, chunk, (off_t)off);
        if (r < 0) {
            if (errno == EINTR) continue;
            return -1;
        }
        if (r == 0) return -1; /* file shrank under us */
        p += r;
        off += (uint64_t)r;
        n -= (size_t)r;
    }
    return 0;
}

static int mem_read(void *opaque, uint64_t off, void *buf, size_t n)
{
    memcpy(buf, (const uint8_t *)opaque + off, n);
    return 0;
}

int ck_source_open_path(ck_source *s, const char *path, bool use_mmap, ckpt_error *err)
{
    memset(s, 0, sizeof *s);
    s->fd = -1;
    /* O_NONBLOCK: opening a FIFO with no writer would wait for one; it is
     * refused below instead (reads of a regular file never block anyway) */
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
    if (fd < 0) return ck_fail(err, CKPT_E_IO, -1, "%s", strerror(errno));
    struct stat st;
    if (fstat(fd, &st) != 0) {
        int e = errno;
        close(fd);
        return ck_fail(err, CKPT_E_IO, -1, "%s", strerror(e));
    }
    if (S_ISDIR(st.st_mode)) {
        close(fd);
        return ck_fail(err, CKPT_E_IO, -1, "is a directory");
    }
    if (!S_ISREG(st.st_mode) || st.st_size < 0) {
        close(fd);
        return ck_fail(err, CKPT_E_IO, -1, "not a regular file (%s)",
                       S_ISFIFO(st.st_mode)   ? "a FIFO"
                       : S_ISCHR(st.st_mode)  ? "a character device"
                       : S_ISBLK(st.st_mode)  ? "a block device"
                       : S_ISSOCK(st.st_mode) ? "a socket"
                                              : "a special file");
    }
    int fl = fcntl(fd, F_GETFL);
    if (fl >= 0) fcntl(fd, F_SETFL, fl & ~O_NONBLOCK);
    s->fd = fd;
    s->size = (uint64_t)st.st_size;
    s->read = fd_read;
    s->opaque = (void *)(intptr_t)fd;
    if (use_mmap && s->size > 0 && s->size <= SIZE_MAX) {
        void *m = mmap(NULL, (size_t)s->size, PROT_READ, MAP_PRIVATE, fd, 0);
        if (m != MAP_FAILED) {
            s->map = m;
            s->map_len = (size_t)s->size;
            s->mapped = true;
        }
    }
    return 0;
}

void ck_source_memory(ck_source *s, const void *data, size_t size)
{
    memset(s, 0, sizeof *s);
    s->fd = -1;
    s->size = size;
    s->map = data;
    s->read = mem_read;
    s->opaque = (void *)(uintptr_t)data;
}

void ck_source_reader(ck_source *s, const ckpt_reader *r)
{
    memset(s, 0, sizeof *s);
    s->fd = -1;
    s->size = r->size;
    s->read = r->read;
    s->close = r->close;
    s->opaque = r->opaque;
}

void ck_source_close(ck_source *s)
{
    if (s->mapped) munmap((void *)(uintptr_t)s->map, s->map_len);
    if (s->fd >= 0) close(s->fd);
    if (s->close) s->close(s->opaque);
    memset(s, 0, sizeof *s);
    s->fd = -1;
}

int ck_read(const ck_source *s, uint64_t off, void *buf, size_t n, const char *what,
            ckpt_error *err)
{
    if (off > s->size || n > s->size - off)
        return ck_fail(err, CKPT_E_FORMAT, (int64_t)(off > s->size ? s->size : off),
                       "truncated %s: needs %zu bytes at offset %llu, file has %llu", what, n,
                       (unsigned long long)off, (unsigned long long)s->size);
    if (n == 0) return 0;
    if (s->map) {
        memcpy(buf, s->map + off, n);
        return 0;
    }
    if (s->read(s->opaque, off, buf, n) != 0)
        return ck_fail(err, CKPT_E_IO, (int64_t)off, "read of %zu bytes failed (%s)", n, what);
    return 0;
}

const uint8_t *ck_win(ck_window *w, uint64_t off, size_t n, const char *what, ckpt_error *err)
{
    const ck_source *s = w->src;
    if (off > s->size || n > s->size - off) {
        ck_read(s, off, NULL, n, what, err); /* the truncation message */
        return NULL;
    }
    if (s->map) return s->map + off;
    if (off >= w->off && n <= w->len && off - w->off <= w->len - n) return w->buf + (off - w->off);
    size_t want = n > 65536 ? n : 65536;
    if (want > s->size - off) want = (size_t)(s->size - off);
    if (want > w->cap) {
        uint8_t *nb = realloc(w->buf, want);
        if (!nb) {
            ck_fail(err, CKPT_E_NOMEM, -1, "out of memory");
            return NULL;
        }
        w->buf = nb;
        w->cap = want;
    }
    w->len = 0;
    if (ck_read(s, off, w->buf, want, what, err)) return NULL;
    w->off = off;
    w->len = want;
    return w->buf;
}

void ck_win_free(ck_window *w)
{
    free(w->buf);
    w->buf = NULL;
    w->cap = w->len = 0;
}
