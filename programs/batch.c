/*
 * batch.c - several files per command, and --key.
 */
#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L
#endif

#include "cli.h"
#include "progress.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int cli_parse_files(int argc, char **argv, const cli_option *options, size_t noptions,
                    const char *usage, char ***files, int *nfiles)
{
    int r;
    *nfiles = 0;
    *files = malloc((size_t)(argc > 0 ? argc : 1) * sizeof **files);
    if (!*files) return cli_error("out of memory");
    r = cli_parse(argc, argv, options, noptions, usage, *files, argc, nfiles);
    if (r == CLI_CONTINUE && *nfiles < 1) r = cli_usage_error("%s: missing FILE", argv[0]);
    return r;
}

/* Files prepared ahead on threads: prepare(i) runs for file i on a worker
 * (at most `jobs` files ahead of the one printed), one() for file i only
 * once it is done, in order. */
typedef struct prep {
    char **files;
    int nfiles, next, printed, jobs;
    unsigned char *done;
    void (*prepare)(int i, const char *path, void *ctx);
    void *ctx;
    pthread_mutex_t mu;
    pthread_cond_t cv;
} prep;

static void *prep_worker(void *arg)
{
    prep *p = arg;
    pthread_mutex_lock(&p->mu);
    for (;;) {
        int i;
        while (p->next < p->nfiles && p->next >= p->printed + p->jobs)
            pthread_cond_wait(&p->cv, &p->mu);
        if (p->next >= p->nfiles) break;
        i = p->next++;
        pthread_mutex_unlock(&p->mu);
        p->prepare(i, p->files[i], p->ctx);
        pthread_mutex_lock(&p->mu);
        p->done[i] = 1;
        pthread_cond_broadcast(&p->cv);
    }
    pthread_mutex_unlock(&p->mu);
    return NULL;
}

int cli_batch(char **files, int nfiles, int json, int (*one)(const char *path, void *ctx),
              void *ctx)
{
    return cli_batch_jobs(files, nfiles, json, NULL, 1, one, ctx);
}

int cli_batch_jobs(char **files, int nfiles, int json,
                   void (*prepare)(int i, const char *path, void *ctx), int jobs,
                   int (*one)(const char *path, void *ctx), void *ctx)
{
    prep pp;
    pthread_t th[64];
    int nth = 0;
    int i, worst = CLI_OK, r;
    progress bar;
    uint64_t total = 0;
    struct stat st;
    /* a bar over the files' bytes, when the output goes elsewhere than the
     * terminal the bar is drawn on (ckpt scan --json *.bin > report) */
    int show = nfiles > 1 && !isatty(STDOUT_FILENO);
    if (show) {
        for (i = 0; i < nfiles; i++)
            if (stat(files[i], &st) == 0 && S_ISREG(st.st_mode)) total += (uint64_t)st.st_size;
        progress_start(&bar, total, "reading files");
    }
    memset(&pp, 0, sizeof pp);
    if (prepare && nfiles > 1 && jobs > 1 && (pp.done = calloc((size_t)nfiles, 1)) != NULL) {
        pp.files = files;
        pp.nfiles = nfiles;
        pp.jobs = jobs;
        pp.prepare = prepare;
        pp.ctx = ctx;
        pthread_mutex_init(&pp.mu, NULL);
        pthread_cond_init(&pp.cv, NULL);
        for (i = 0; i < jobs && i < 64; i++)
            if (pthread_create(&th[nth], NULL, prep_worker, &pp) == 0) nth++;
    }
    for (i = 0; i < nfiles; i++) {
        if (nth > 0) { /* wait for file i, then let the workers go on */
            pthread_mutex_lock(&pp.mu);
            while (!pp.done[i]) pthread_cond_wait(&pp.cv, &pp.mu);
            pp.printed = i + 1;
            pthread_cond_broadcast(&pp.cv);
            pthread_mutex_unlock(&pp.mu);
        } else if (prepare) {
            prepare(i, files[i], ctx);
        }
        if (nfiles > 1 && !json) {
            fputs(i ? "\n==> " : "==> ", stdout);
            cli_term_put(stdout, files[i]);
            fputs(" <==\n", stdout);
        }
        /* keep stdout and stderr in order for people reading both */
        if (nfiles > 1) fflush(stdout);
        if (show) progress_hide(&bar); /* messages start on a clean line */
        r = one(files[i], ctx);
        if (show && stat(files[i], &st) == 0 && S_ISREG(st.st_mode))
            progress_advance(&bar, (uint64_t)st.st_size);
        if (r > worst) worst = r;
        if (nfiles > 1) fflush(stdout);
        if (cli_stdout_failed()) break; /* reported by cli_stdout_finish() */
    }
    if (nth > 0) {
        pthread_mutex_lock(&pp.mu);
        pp.next = nfiles; /* stop: no more files are prepared */
        pp.printed = nfiles;
        pthread_cond_broadcast(&pp.cv);
        pthread_mutex_unlock(&pp.mu);
        for (i = 0; i < nth; i++) pthread_join(th[i], NULL);
        pthread_cond_destroy(&pp.cv);
        pthread_mutex_destroy(&pp.mu);
    }
    free(pp.done);
    if (show) progress_finish(&bar);
    return worst;
}

/* cli_parallel(): items handed out in order, up to the first failed one. */
typedef struct par {
    size_t n, next, stop;
    int (*fn)(size_t i, void *ctx);
    void *ctx;
    pthread_mutex_t mu;
} par;

static void *par_worker(void *arg)
{
    par *p = arg;
    for (;;) {
        pthread_mutex_lock(&p->mu);
        size_t i = p->next < p->stop ? p->next++ : p->n;
        pthread_mutex_unlock(&p->mu);
        if (i >= p->n) break;
        if (p->fn(i, p->ctx) != 0) {
            pthread_mutex_lock(&p->mu);
            if (i < p->stop) p->stop = i;
            pthread_mutex_unlock(&p->mu);
        }
    }
    return NULL;
}

size_t cli_parallel(size_t n, int jobs, int (*fn)(size_t i, void *ctx), void *ctx)
{
    par p;
    pthread_t th[64];
    int nth = 0;
    p.n = p.stop = n;
    p.next = 0;
    p.fn = fn;
    p.ctx = ctx;
    pthread_mutex_init(&p.mu, NULL);
    if (jobs > 1 && n > 1)
        for (size_t i = 0; i < (size_t)jobs && i < n && i < 64; i++)
            if (pthread_create(&th[nth], NULL, par_worker, &p) == 0) nth++;
    if (nth == 0) par_worker(&p);
    while (nth > 0) pthread_join(th[--nth], NULL);
    pthread_mutex_destroy(&p.mu);
    return p.stop;
}

void cli_json_error_line(const char *path, const ckpt_error *err)
{
    fputs("{\"file\": ", stdout);
    cli_json_string(stdout, path, strlen(path));
    fputs(", \"error\": {\"message\": ", stdout);
    {
        const char *m = err->message[0] ? err->message : ckpt_code_name(err->code);
        cli_json_string(stdout, m, strnlen(m, sizeof err->message));
    }
    printf(", \"code\": \"%s\", \"offset\": ", ckpt_code_name(err->code));
    if (err->offset >= 0)
        printf("%lld}}\n", (long long)err->offset);
    else
        fputs("null}}\n", stdout);
}

/* ---- --key ------------------------------------------------------------------ */

int cli_doc_open(cli_doc *d, const char *path, const char *key, const ckpt_options *base,
                 ckpt_error *err)
{
    ckpt_options opt = *base;
    char *k = NULL;
    size_t kn = 0;
    memset(d, 0, sizeof *d);
    memset(err, 0, sizeof *err);
    err->offset = -1;
    if (key && !(k = cli_unescape(key, &kn))) {
        err->code = CKPT_E_NOMEM;
        snprintf(err->message, sizeof err->message, "out of memory");
        return -1;
    }
    opt.key = k;
    opt.key_len = kn;
    d->f = cli_open_input(path, &opt, err);
    free(k); /* the library keeps its own copy */
    if (d->f) d->root = ckpt_root(d->f);
    return d->f ? 0 : -1;
}

void cli_doc_close(cli_doc *d)
{
    ckpt_close(d->f);
    memset(d, 0, sizeof *d);
}

int cli_default_jobs(void)
{
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    if (n < 1) n = 1;
    return n > 8 ? 8 : (int)n;
}
