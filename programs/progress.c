/*
 * progress.c - a progress bar on standard error (see progress.h).
 */
#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L
#endif

#include "progress.h"

#include <stdio.h>
#include <string.h>
#include <unistd.h>

#define BAR_WIDTH 24

static long long ms_between(const struct timespec *a, const struct timespec *b)
{
    return (long long)(b->tv_sec - a->tv_sec) * 1000 + (b->tv_nsec - a->tv_nsec) / 1000000;
}

void progress_start(progress *p, uint64_t total, const char *label)
{
    memset(p, 0, sizeof *p);
    p->tty = isatty(STDERR_FILENO);
    p->total = total;
    p->label = label;
    if (p->tty) {
        clock_gettime(CLOCK_MONOTONIC, &p->start);
        p->last = p->start;
    }
}

static void draw(progress *p)
{
    const double mib = 1024.0 * 1024.0;
    char line[160], bar[BAR_WIDTH + 1];
    uint64_t done = p->done < p->total ? p->done : p->total;
    int pct = p->total ? (int)(done * 100 / p->total) : 100, fill, n;
    fill = p->total ? (int)(done * BAR_WIDTH / p->total) : BAR_WIDTH;
    memset(bar, '#', (size_t)fill);
    memset(bar + fill, '.', (size_t)(BAR_WIDTH - fill));
    bar[BAR_WIDTH] = '\0';
    n = snprintf(line, sizeof line, "ckpt: %s [%s] %3d%%  %.1f / %.1f MiB", p->label, bar, pct,
                 (double)done / mib, (double)p->total / mib);
    if (n < 0) return;
    if (n >= (int)sizeof line) n = (int)sizeof line - 1;
    /* pad over a longer previous line, then return to the line's start */
    fprintf(stderr, "\r%s%*s\r", line, p->width > n ? p->width - n : 0, "");
    fflush(stderr);
    p->width = n;
    p->shown = 1;
}

void progress_advance(progress *p, uint64_t n)
{
    struct timespec now;
    p->done += n;
    if (!p->tty) return;
    clock_gettime(CLOCK_MONOTONIC, &now);
    if (!p->shown) {
        if (p->total < PROGRESS_MIN_BYTES && ms_between(&p->start, &now) < PROGRESS_MIN_MS) return;
    } else if (ms_between(&p->last, &now) < 100) {
        return;
    }
    p->last = now;
    draw(p);
}

void progress_hide(progress *p)
{
    if (!p->shown) return;
    fprintf(stderr, "\r%*s\r", p->width, "");
    fflush(stderr);
    p->shown = 0;
    p->width = 0;
}

void progress_finish(progress *p)
{
    progress_hide(p);
    p->tty = 0;
}
