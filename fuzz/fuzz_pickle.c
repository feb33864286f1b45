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

/* Touch values through the public accessors, at most `budget` of them. */
static void touch(const ckpt_value *v, unsigned depth, unsigned *budget)
{
    if (*budget == 0) return;
    (*budget)--; /* every call counts, even one that goes no deeper */
    if (!v || depth > 64) return;
    size_t n = 0;
    const char *t = ckpt_value_text(v, &n);
    if (t && t[n] != 0) fuzz_die("text value not NUL-terminated", NULL);
    (void)ckpt_value_class(v);
    (void)ckpt_value_int(v);
    size_t len = ckpt_value_len(v);
    for (size_t i = 0; i < len && *budget; i++) {
        touch(ckpt_value_key(v, i), depth + 1, budget);
        touch(ckpt_value_item(v, i), depth + 1, budget);
    }
    if (ckpt_value_kind(v) == CKPT_V_OBJECT) {
        touch(ckpt_object_args(v), depth + 1, budget);
        touch(ckpt_object_state(v), depth + 1, budget);
        touch(ckpt_object_items(v), depth + 1, budget);
        touch(ckpt_object_list(v), depth + 1, budget);
    }
}

static int run(const uint8_t *data, size_t size, bool more, ckpt_value **v, size_t *used,
               ckpt_error *err)
{
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
    memset(err, 0, sizeof *err);
    int r = ck_pickle_run(&u, &in, v, used, err);
    if (r < 0) {
        ck_mem_blame(&arena, err);
        fuzz_check_error(err);
    }
    if (r == 0) {
        if (!*v || *used == 0 || *used > size) fuzz_die("bad result from ck_pickle_run", NULL);
        unsigned budget = 100000;
        touch(*v, 0, &budget);
    }
    for (size_t i = 0; i < u.nglobals; i++)
        if (!u.globals[i].module || !u.globals[i].name) fuzz_die("global without a name", NULL);
    ck_unpickler_free(&u);
    ck_arena_free(&arena);
    return r;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    ckpt_error err;
    ckpt_value *v = NULL;
    size_t used = 0;

    /* 1. the first half, as a stream that may continue */
    size_t half = size / 2;
    uint8_t *copy = malloc(half ? half : 1);
    if (!copy) return 0;
    if (half) memcpy(copy, data, half);
    int r = run(copy, half, true, &v, &used, &err);
    if (r > 1) fuzz_die("ck_pickle_run returned an unknown status", NULL);
    free(copy);

    /* 2. the whole input */
    r = run(data, size, false, &v, &used, &err);
    if (r != 0 && r != -1) fuzz_die("ck_pickle_run without more returned neither 0 nor -1", NULL);
    return 0;
}
