/*
 * batch.c - several files per command, and --key as a path of keys.
 */
#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L
#endif

#include "cli.h"
#include "progress.h"
#include "ckpt_walk.h"

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

/* ---- --key as a path of keys ---------------------------------------------- */

/* The child of v under the key spelled s[0..n): a str key with those bytes,
 * an int key with that decimal text, a list/tuple index; an object's state
 * dict is searched as the object. */
static const ckpt_value *child(const ckpt_value *v, const char *s, size_t n)
{
    ckpt_kind k = ckpt_value_kind(v);
    size_t i, len;
    char tmp[32];
    if (k == CKPT_V_OBJECT) {
        v = ckpt_object_state(v);
        if (!v) return NULL;
        k = ckpt_value_kind(v);
    }
    if (k == CKPT_V_DICT) {
        len = ckpt_value_len(v);
        for (i = 0; i < len; i++) {
            const ckpt_value *key = ckpt_value_key(v, i);
            size_t kl = 0;
            const char *t;
            if (!key) continue;
            if (ckpt_value_kind(key) == CKPT_V_STR) {
                t = ckpt_value_text(key, &kl);
                if (t && kl == n && memcmp(t, s, n) == 0) return ckpt_value_item(v, i);
            } else if (ckpt_value_kind(key) == CKPT_V_INT) {
                int w = snprintf(tmp, sizeof tmp, "%lld", (long long)ckpt_value_int(key));
                if (w > 0 && (size_t)w == n && memcmp(tmp, s, n) == 0) return ckpt_value_item(v, i);
            }
        }
        return NULL;
    }
    if (k == CKPT_V_LIST || k == CKPT_V_TUPLE) {
        size_t idx = 0;
        if (n == 0 || n > 18 || (n > 1 && s[0] == '0')) return NULL;
        for (i = 0; i < n; i++) {
            if (s[i] < '0' || s[i] > '9') return NULL;
            idx = idx * 10 + (size_t)(s[i] - '0');
        }
        return idx < ckpt_value_len(v) ? ckpt_value_item(v, idx) : NULL;
    }
    return NULL;
}

/* The value at the dotted path s[0..n) under v: at each level the longest
 * run of components that is a key wins, shorter runs are tried after. */
static const ckpt_value *resolve(const ckpt_value *v, const char *s, size_t n, int depth)
{
    size_t end = n;
    if (!v || depth > 256) return NULL;
    for (;;) {
        const ckpt_value *c = child(v, s, end);
        if (c) {
            const ckpt_value *r = end == n ? c : resolve(c, s + end + 1, n - end - 1, depth + 1);
            if (r) return r;
        }
        while (end > 0 && s[end - 1] != '.') end--;
        if (end == 0) return NULL;
        end--; /* at the dot */
    }
}

/* The listed tensors under the selected value, for cli_doc_has(): one
 * ckpt_value_walk(); values nested deeper than the default depth limit are
 * not searched. */
static int mark_tensor(void *ctx, const ckpt_walk_step *st)
{
    cli_doc *d = ctx;
    const ckpt_tensor *t;
    if (st->shared || !st->value || ckpt_value_kind(st->value) != CKPT_V_TENSOR) return 0;
    t = ckpt_value_tensor(d->f, st->value);
    /* by name: the name points into the file, the same for the library's
     * descriptor and for a copy of it (ckpt_tensor_get()) */
    if (t && t->name && cli_ptrmap_put(&d->under, t->name, "") != 0) return -1;
    return 0;
}

static int mark_tensors(cli_doc *d, ckpt_error *err)
{
    ckpt_walk_callbacks cb = {mark_tensor, NULL};
    ckpt_walk_options opt;
    ckpt_walk_options_init(&opt);
    opt.skip_deep = 1;
    if (ckpt_value_walk(d->f, d->root, &cb, d, &opt, err) == 0) return 0;
    if (err->code == CKPT_OK) { /* stopped by mark_tensor */
        err->code = CKPT_E_NOMEM;
        snprintf(err->message, sizeof err->message, "out of memory");
    }
    return -1;
}

static void set_error(ckpt_error *err, ckpt_code code, const char *fmt, const char *arg)
{
    err->code = code;
    err->offset = -1;
    snprintf(err->message, sizeof err->message, fmt, arg);
}

int cli_doc_open(cli_doc *d, const char *path, const char *key, const ckpt_options *base,
                 ckpt_error *err)
{
    ckpt_options opt = *base;
    memset(d, 0, sizeof *d);
    memset(err, 0, sizeof *err);
    err->offset = -1;
    opt.key = key;
    d->f = cli_open_input(path, &opt, err);
    if (d->f || !key || err->code != CKPT_E_NOTFOUND || !strchr(key, '.')) {
        if (d->f) d->root = ckpt_root(d->f);
        return d->f ? 0 : -1;
    }
    /* not a top-level key: a path of keys from the root */
    opt.key = NULL;
    memset(err, 0, sizeof *err);
    err->offset = -1;
    d->f = cli_open_input(path, &opt, err);
    if (!d->f) return -1;
    d->root = resolve(ckpt_root(d->f), key, strlen(key), 0);
    if (!d->root) {
        ckpt_close(d->f);
        d->f = NULL;
        set_error(err, CKPT_E_NOTFOUND, "no key '%.200s', as a top-level key or a path of keys",
                  key);
        return -1;
    }
    d->prefix = key;
    d->prefix_len = strlen(key);
    if (mark_tensors(d, err) != 0) {
        cli_doc_close(d);
        return -1;
    }
    return 0;
}

int cli_doc_has(const cli_doc *d, const ckpt_tensor *t)
{
    return !d->prefix || (t->name && cli_ptrmap_get(&d->under, t->name) != NULL);
}

const char *cli_doc_name(const cli_doc *d, const ckpt_tensor *t)
{
    if (!d->prefix || strncmp(t->name, d->prefix, d->prefix_len) != 0) return t->name;
    if (t->name[d->prefix_len] == '\0') return "";
    if (t->name[d->prefix_len] == '.') return t->name + d->prefix_len + 1;
    return t->name;
}

void cli_doc_close(cli_doc *d)
{
    ckpt_close(d->f);
    cli_ptrmap_free(&d->under);
    memset(d, 0, sizeof *d);
}

int cli_default_jobs(void)
{
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    if (n < 1) n = 1;
    return n > 8 ? 8 : (int)n;
}
