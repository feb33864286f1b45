/*
 * fuzz_pickle.c - the pickle machine alone (src/pickle, linked without
 * src/torch or src/formats): no checkpoint, no ckpt_file.  The input is run
 * by ck_pickle_run() as one pickle with hooks that exercise every hook path:
 * find_class tags the globals of module "torch*", reduce interprets a call
 * of a tagged global with one argument as that argument, with two as a new
 * number that keeps nothing of them (ck_machine_consumed: the machine gives
 * the arguments back, as it does after a tensor rebuild), and declines the
 * rest (inert objects); persistent_load returns a new storage value for a
 * pair (the pid is given back) and the pid itself otherwise.  The value
 * tree is then walked through the public accessors, bounded: under ASan a
 * value given back too early is poisoned, and reading it is a report.
 *
 * The same bytes are first offered cut in half with `more` set: the machine
 * must either finish, fail cleanly, or ask for more (1) - never read past
 * the half it was given.  The half is a separate heap copy so that ASan sees
 * any read beyond it.
 */
#define FUZZ_MACHINE_ONLY 1
#include "pickle/pickle.h"
#include "fuzz_common.h"

static void find_class(void *ud, ckpt_value *g)
{
    (void)ud;
    if (strncmp(g->u.g->module, "torch", 5) == 0) g->gid = CK_TAG_HOOK;
}

static int reduce(void *ud, ck_machine *m, ckpt_value *callable, ckpt_value *args, bool newobj,
                  ckpt_value **out)
{
    (void)ud;
    (void)callable;
    if (!newobj && args->u.seq.n == 1) {
        CK_TRY(ck_machine_copied(m, 1));
        *out = args->u.seq.v[0];
        return 0;
    }
    if (args->u.seq.n == 2) {
        if (!(*out = ck_new(ck_machine_unpickler(m), CKPT_V_INT)))
            return ck_machine_fail(m, CKPT_E_NOMEM, "out of memory");
        (*out)->u.i = (int64_t)args->u.seq.n;
        ck_machine_consumed(m, args);
        return 0;
    }
    if (args->u.seq.n == 3)
        return ck_machine_fail(m, CKPT_E_PICKLE, "hook refuses three arguments");
    return 1;
}

static ckpt_value *persistent_load(void *ud, ckpt_value *pid, int64_t pos, ckpt_error *err)
{
    (void)pos;
    if (pid->kind == CKPT_V_TUPLE && pid->u.seq.n == 2) {
        ckpt_value *v = ck_new(ud, CKPT_V_STORAGE);
        if (!v) ck_fail(err, CKPT_E_NOMEM, -1, "out of memory");
        return v;
    }
    return pid;
}

/* FNV-1a over what the accessors say of the values touched. */
static void mix(uint64_t *h, const void *p, size_t n)
{
    const uint8_t *b = p;
    for (size_t i = 0; i < n; i++) *h = (*h ^ b[i]) * 0x100000001b3ull;
}

/* Touch values through the public accessors, at most `budget` of them,
 * and fold what they say into *h. */
static void touch(const ckpt_value *v, unsigned depth, unsigned *budget, uint64_t *h)
{
    if (*budget == 0) return;
    (*budget)--; /* every call counts, even one that goes no deeper */
    if (!v || depth > 64) {
        mix(h, "-", 1);
        return;
    }
    size_t n = 0;
    const char *t = ckpt_value_text(v, &n);
    if (t && t[n] != 0) fuzz_die("text value not NUL-terminated", NULL);
    const char *cls = ckpt_value_class(v);
    int64_t i64 = ckpt_value_int(v);
    int kind = (int)ckpt_value_kind(v);
    size_t len = ckpt_value_len(v);
    mix(h, &kind, sizeof kind);
    mix(h, &i64, sizeof i64);
    mix(h, &len, sizeof len);
    if (t) mix(h, t, n);
    if (cls) mix(h, cls, strlen(cls));
    for (size_t i = 0; i < len && *budget; i++) {
        touch(ckpt_value_key(v, i), depth + 1, budget, h);
        touch(ckpt_value_item(v, i), depth + 1, budget, h);
    }
    if (ckpt_value_kind(v) == CKPT_V_OBJECT) {
        touch(ckpt_object_args(v), depth + 1, budget, h);
        touch(ckpt_object_state(v), depth + 1, budget, h);
        touch(ckpt_object_items(v), depth + 1, budget, h);
        touch(ckpt_object_list(v), depth + 1, budget, h);
    }
}

/* What one run gave: its status, bytes used, error and values. */
typedef struct outcome {
    int r;
    size_t used;
    ckpt_error err;
    uint64_t hash;
} outcome;

/* window: 0 runs the bytes in memory; else streamed from a memory source
 * through a window that reads `window` bytes at a time. */
static int run(const uint8_t *data, size_t size, bool more, size_t window, outcome *o)
{
    ckpt_value *vv = NULL, **v = &vv;
    size_t *used = &o->used;
    ckpt_error *err = &o->err;
    o->hash = 0xcbf29ce484222325ull;
    o->used = 0;
    ckpt_options opt;
    fuzz_options(&opt);
    ck_arena arena = {0};
    ck_unpickler u = {0};
    u.arena = &arena;
    u.opt = &opt;
    u.input_size = size;
    u.hooks.find_class = find_class;
    u.hooks.reduce = reduce;
    u.hooks.persistent_load = persistent_load;
    u.hooks.pl_ud = &u;
    ck_pickle_in in = {.buf = data, .len = size, .more = more, .base = 0, .label = "fuzz"};
    ck_source src;
    if (window) {
        ck_source_memory(&src, data, size);
        in.buf = NULL;
        in.src = &src;
        in.window = window;
    }
    memset(err, 0, sizeof *err);
    int r = ck_pickle_run(&u, &in, v, used, err);
    if (r < 0) {
        ck_mem_blame(&arena, err);
        fuzz_check_error(err);
    }
    if (r == 0) {
        if (!*v || *used == 0 || *used > size) fuzz_die("bad result from ck_pickle_run", NULL);
        unsigned budget = 100000;
        touch(*v, 0, &budget, &o->hash);
    }
    for (size_t i = 0; i < u.nglobals; i++)
        if (!u.globals[i].module || !u.globals[i].name) fuzz_die("global without a name", NULL);
    ck_unpickler_free(&u);
    ck_arena_free(&arena);
    o->r = r;
    return r;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    outcome a, b;

    /* 1. the first half, as a stream that may continue */
    size_t half = size / 2;
    uint8_t *copy = malloc(half ? half : 1);
    if (!copy) return 0;
    if (half) memcpy(copy, data, half);
    int r = run(copy, half, true, 0, &a);
    if (r > 1) fuzz_die("ck_pickle_run returned an unknown status", NULL);
    free(copy);

    /* 2. the whole input */
    r = run(data, size, false, 0, &a);
    if (r != 0 && r != -1) fuzz_die("ck_pickle_run without more returned neither 0 nor -1", NULL);

    /* 3. the whole input read through a window of 32 to 95 bytes: every
     * opcode, line and string crosses windows somewhere.  The same result,
     * error (code, offset, message) and values, but where the memory limit
     * spoke (the window is charged, a caller's buffer is not) */
    run(data, size, false, 32 + size % 64, &b);
    bool limit = (a.r && a.err.code == CKPT_E_NOMEM) || (b.r && b.err.code == CKPT_E_NOMEM);
    if (!limit && (a.r != b.r || a.used != b.used || a.hash != b.hash ||
                   (a.r && (a.err.code != b.err.code || a.err.offset != b.err.offset ||
                            strcmp(a.err.message, b.err.message) != 0))))
        fuzz_die("a streamed pickle reads otherwise than the same bytes in memory", b.err.message);
    return 0;
}
