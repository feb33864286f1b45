/*
 * progress.h - a progress bar on standard error, for commands that can run
 * long (convert now; cat, extract and verify can use it too).
 *
 * It is drawn only when standard error is a terminal, and only once the job
 * proves long: PROGRESS_MIN_BYTES in total, or PROGRESS_MIN_MS already spent.
 * Redraws are rate-limited (at most 10 a second); progress_finish() and
 * progress_hide() erase the line, so error messages and the shell prompt
 * start on a clean line.  Nothing is printed when stderr is not a terminal.
 */
#ifndef CKPT_PROGRESS_H
#define CKPT_PROGRESS_H

#include <stdint.h>
#include <time.h>

#define PROGRESS_MIN_BYTES ((uint64_t)64 << 20)
#define PROGRESS_MIN_MS 500

typedef struct progress {
    int tty;   /* stderr is a terminal */
    int shown; /* a line is on screen; its width */
    int width;
    const char *label;
    uint64_t total, done;
    struct timespec start, last;
} progress;

/* Begin a job of `total` bytes; `label` ("converting") must outlive it. */
void progress_start(progress *p, uint64_t total, const char *label);
/* n more bytes done; redraws when due. */
void progress_advance(progress *p, uint64_t n);
/* Erase the line (before printing a message); the job may go on. */
void progress_hide(progress *p);
/* The job is over: erase the line. */
void progress_finish(progress *p);

#endif /* CKPT_PROGRESS_H */
