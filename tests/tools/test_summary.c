/*
 * test_summary.c - include/ckpt_summary.h and include/ckpt_walk.h through
 * the public API only.
 *
 *     test_summary FILE.pt FILE.summary.expected [FILE.pt EXPECTED ...]
 *
 * Each EXPECTED was written by summary_expected.py from torch.load of the
 * same file (see its header for the line format): the value walk's visits,
 * shared values and depth, the totals, dtype rows, top-level rows and the
 * module tree, and the same for the values under some keys.  Then the
 * walker on pickles assembled here byte by byte: shared values and cycles,
 * the depth limit, skipping, stopping, the visit bound.
 */
#include "ckpt_summary.h"
#include "ckpt_walk.h"

#include "../unit/harness.h"

/* ---- the walk, counted -------------------------------------------------- */

typedef struct wstats {
    const ckpt_file *f;
    uint64_t visits, shared, too_deep, leaves, names_ok, names_bad;
    uint32_t max_depth;
    int64_t stop_at; /* enter returns -5 at this visit (1-based), 0: never */
    size_t ids[8];   /* step->id of the first visits */
    int skip_root;
} wstats;

/* The dotted name of a step, as ckpt names tensors: dict keys (str, or int
 * in decimal) and list indices joined by '.'.  0 when it has no such name. */
static int step_name(const ckpt_walk_step *st, char *out, size_t cap)
{
    char part[256];
    size_t n;
    if (!st->parent) {
        out[0] = '\0';
        return 1;
    }
    if (!step_name(st->parent, out, cap)) return 0;
    if (st->key && ckpt_value_kind(st->key) == CKPT_V_STR) {
        size_t kl = 0;
        const char *k = ckpt_value_text(st->key, &kl);
        snprintf(part, sizeof part, "%.*s", (int)kl, k);
    } else if (st->key && ckpt_value_kind(st->key) == CKPT_V_INT) {
        snprintf(part, sizeof part, "%lld", (long long)ckpt_value_int(st->key));
    } else if (!st->key && ckpt_value_kind(st->parent->value) != CKPT_V_OBJECT) {
        snprintf(part, sizeof part, "%zu", st->index);
    } else {
        return 0;
    }
    n = strlen(out);
    snprintf(out + n, cap - n, "%s%s", n ? "." : "", part);
    return 1;
}

static int w_enter(void *ctx, const ckpt_walk_step *st)
{
    wstats *w = ctx;
    if (w->visits < 8) w->ids[w->visits] = st->id;
    w->visits++;
    if (st->depth > w->max_depth) w->max_depth = st->depth;
    if (st->shared) w->shared++;
    if (st->too_deep) w->too_deep++;
    if (w->stop_at && (int64_t)w->visits == w->stop_at) return -5;
    if (!st->shared && st->value && ckpt_value_kind(st->value) == CKPT_V_TENSOR && w->f) {
        const ckpt_tensor *t = ckpt_value_tensor(w->f, st->value);
        char name[1024];
        if (t && t->name && step_name(st, name, sizeof name) && strcmp(name, t->name) == 0)
            w->names_ok++;
        else
            w->names_bad++;
    }
    return w->skip_root && st->depth == 0 ? CKPT_WALK_SKIP : 0;
}

static int w_leave(void *ctx, const ckpt_walk_step *st)
{
    wstats *w = ctx;
    (void)st;
    w->leaves++;
    return 0;
}

static int walk(const ckpt_file *f, wstats *w, const ckpt_walk_options *opt, ckpt_error *err)
{
    ckpt_walk_callbacks cb = {w_enter, w_leave};
    w->f = f;
    return ckpt_value_walk(f, NULL, &cb, w, opt, err);
}

/* ---- the expected facts ------------------------------------------------- */

static const char *key_name(const ckpt_summary_key *k, char *buf, size_t cap)
{
    size_t n = 0;
    const char *t;
    if (!k || !k->key || ckpt_value_kind(k->key) != CKPT_V_STR) return "?";
    t = ckpt_value_text(k->key, &n);
    snprintf(buf, cap, "%.*s", (int)n, t);
    return buf;
}

/* Check one block of facts (lines without "walk", prefix stripped) against
 * a summary. */
static void check_facts(const ckpt_summary *s, char **lines, size_t n)
{
    size_t nd = 0, nk = 0, nm = 0, i;
    char kb[256], pb[1024];
    for (i = 0; i < n; i++) {
        char a[512];
        unsigned long long x[5];
        unsigned d;
        if (sscanf(lines[i], "totals %llu %llu %llu %llu %llu", &x[0], &x[1], &x[2], &x[3],
                   &x[4]) == 5) {
            const ckpt_summary_totals *t = ckpt_summary_get_totals(s);
            CHECK_EQ_U64(t->tensors, x[0]);
            CHECK_EQ_U64(t->elements, x[1]);
            CHECK_EQ_U64(t->bytes, x[2]);
            CHECK_EQ_U64(t->storages, x[3]);
            CHECK_EQ_U64(t->storage_bytes, x[4]);
        } else if (sscanf(lines[i], "dtype %511s %llu %llu %llu", a, &x[0], &x[1], &x[2]) == 4) {
            const ckpt_summary_dtype *row = ckpt_summary_dtype_at(s, nd++);
            CHECK(row != NULL);
            if (!row) continue;
            CHECK_STR(ckpt_dtype_name(row->dtype), a);
            CHECK_EQ_U64(row->tensors, x[0]);
            CHECK_EQ_U64(row->elements, x[1]);
            CHECK_EQ_U64(row->bytes, x[2]);
        } else if (sscanf(lines[i], "key %511s %llu %llu", a, &x[0], &x[1]) == 3) {
            const ckpt_summary_key *row = ckpt_summary_key_at(s, nk++);
            CHECK(row != NULL);
            if (!row) continue;
            CHECK_STR(key_name(row, kb, sizeof kb), a);
            CHECK_EQ_U64(row->tensors, x[0]);
            CHECK_EQ_U64(row->elements, x[1]);
        } else if (sscanf(lines[i], "module %511s %u %llu %llu", a, &d, &x[0], &x[1]) == 4) {
            size_t idx = nm++;
            const ckpt_summary_module *m = ckpt_summary_module_at(s, idx);
            CHECK(m != NULL);
            if (!m) continue;
            snprintf(pb, sizeof pb, "%.*s", (int)m->path_len, m->path);
            CHECK_STR(pb, a);
            CHECK_EQ_U64(m->depth, d);
            CHECK_EQ_U64(m->tensors, x[0]);
            CHECK_EQ_U64(m->elements, x[1]);
            /* the name is the path's last component; links agree */
            CHECK(m->name + m->name_len == m->path + m->path_len);
            if (m->parent != CKPT_SUMMARY_NONE) {
                const ckpt_summary_module *p = ckpt_summary_module_at(s, m->parent);
                CHECK(p != NULL && m->parent < idx && p->depth + 1 == m->depth);
                CHECK(p && p->path_len + 1 + m->name_len == m->path_len);
            } else {
                CHECK_EQ_U64(m->depth, 0);
                CHECK(m->name == m->path);
            }
            if (m->first_child != CKPT_SUMMARY_NONE) CHECK_EQ_U64(m->first_child, idx + 1);
        }
    }
    CHECK_EQ_U64(ckpt_summary_dtype_count(s), nd);
    CHECK_EQ_U64(ckpt_summary_key_count(s), nk);
    CHECK_EQ_U64(ckpt_summary_module_count(s), nm);
}

static char **read_lines(const char *path, size_t *count)
{
    FILE *fp = fopen(path, "r");
    char buf[1024], **lines = NULL;
    size_t n = 0;
    if (!fp) return NULL;
    while (fgets(buf, sizeof buf, fp)) {
        char **p = realloc(lines, (n + 1) * sizeof *p);
        if (!p) break;
        lines = p;
        buf[strcspn(buf, "\n")] = '\0';
        lines[n++] = strdup(buf);
    }
    fclose(fp);
    *count = n;
    return lines;
}

static void check_file(const char *pt, const char *expected)
{
    ckpt_error err;
    ckpt_file *f = ckpt_open(pt, NULL, &err);
    size_t n = 0, i, j;
    char **lines = read_lines(expected, &n);
    ckpt_summary *s, *s0;
    wstats w;
    unsigned long long x[3];

    CHECK(f != NULL);
    CHECK(lines != NULL && n > 0);
    if (!f || !lines) return;
    memset(&w, 0, sizeof w);
    CHECK_EQ_INT(walk(f, &w, NULL, &err), 0);
    CHECK(sscanf(lines[0], "walk %llu %llu %llu", &x[0], &x[1], &x[2]) == 3);
    CHECK_EQ_U64(w.visits, x[0]);
    CHECK_EQ_U64(w.shared, x[1]);
    CHECK_EQ_U64(w.max_depth, x[2]);
    CHECK_EQ_U64(w.too_deep, 0);
    CHECK_EQ_U64(w.names_bad, 0); /* the steps' key/index path is the tensor's name */
    CHECK(w.names_ok > 0);

    s0 = ckpt_summarize(f, NULL, NULL, &err);
    CHECK(s0 != NULL);
    if (s0) {
        size_t top = 0;
        while (top < n && strncmp(lines[top], "under ", 6) != 0) top++;
        check_facts(s0, lines + 1, top - 1);
    }
    /* the same for each "under KEY" block */
    for (i = 0; i < n; i = j) {
        char key[256], **block;
        size_t kl, nb = 0;
        const ckpt_value *v;
        if (strncmp(lines[i], "under ", 6) != 0) {
            j = i + 1;
            continue;
        }
        sscanf(lines[i] + 6, "%255s", key);
        kl = strlen(key);
        block = malloc(n * sizeof *block);
        for (j = i; j < n && strncmp(lines[j], "under ", 6) == 0 &&
                    strncmp(lines[j] + 6, key, kl) == 0 && lines[j][6 + kl] == ' ';
             j++)
            block[nb++] = lines[j] + 7 + kl;
        v = ckpt_value_get(ckpt_root(f), key);
        CHECK(v != NULL);
        if (v) { /* ckpt_count_tensors() agrees with the key's row */
            uint64_t nt = 0, ne = 0;
            const ckpt_summary_key *row = NULL;
            size_t k;
            for (k = 0; k < ckpt_summary_key_count(s0); k++)
                if (ckpt_summary_key_at(s0, k)->value == v) row = ckpt_summary_key_at(s0, k);
            CHECK(row != NULL);
            CHECK_EQ_INT(ckpt_count_tensors(f, v, &nt, &ne, &err), 0);
            CHECK(row && row->tensors == nt && row->elements == ne && nt > 0);
        }
        s = v ? ckpt_summarize(f, v, key, &err) : NULL;
        CHECK(s != NULL);
        if (s) {
            check_facts(s, block, nb);
            ckpt_summary_free(s);
        }
        free(block);
    }
    ckpt_summary_free(s0);
    for (i = 0; i < n; i++) free(lines[i]);
    free(lines);
    ckpt_close(f);
}

/* ---- pickles made here -------------------------------------------------- */

/* PROTO 2; outer = [] memo 0; MARK; inner = [] memo 1; BINGET 1; BINGET 0;
 * APPENDS; STOP: outer = [inner, inner, outer]. */
static const unsigned char shared_pkl[] = {0x80, 2,   ']', 'q', 0, '(', ']', 'q',
                                           1,    'h', 1,   'h', 0, 'e', '.'};

/* [[[...]]]: `levels` empty lists, each appended into the one below it. */
static size_t nested_pkl(unsigned char *out, int levels)
{
    size_t n = 0;
    int i;
    out[n++] = 0x80;
    out[n++] = 2;
    for (i = 0; i < levels; i++) out[n++] = ']';
    for (i = 1; i < levels; i++) out[n++] = 'a';
    out[n++] = '.';
    return n;
}

static void check_walker(void)
{
    ckpt_error err;
    ckpt_walk_options opt;
    ckpt_file *f;
    unsigned char buf[128];
    size_t n;
    wstats w;
    uint64_t nt = 9, ne = 9;

    SECTION("walk: shared values and a cycle");
    f = ckpt_open_memory(shared_pkl, sizeof shared_pkl, NULL, &err);
    CHECK(f != NULL);
    if (f) {
        memset(&w, 0, sizeof w);
        CHECK_EQ_INT(walk(f, &w, NULL, &err), 0);
        CHECK_EQ_U64(w.visits, 4); /* outer, inner, inner again, outer again */
        CHECK_EQ_U64(w.shared, 2);
        CHECK_EQ_U64(w.leaves, 2); /* each container entered once */
        CHECK_EQ_U64(w.max_depth, 1);
        CHECK_EQ_U64(w.ids[0], 0); /* outer */
        CHECK_EQ_U64(w.ids[1], 1); /* inner */
        CHECK_EQ_U64(w.ids[2], 1); /* inner again: the first visit's id */
        CHECK_EQ_U64(w.ids[3], 0); /* outer again */
        CHECK_EQ_INT(ckpt_count_tensors(f, ckpt_root(f), &nt, &ne, &err), 0);
        CHECK_EQ_U64(nt, 0);
        CHECK_EQ_U64(ne, 0);

        SECTION("summary: a root that is not a dict, no tensors");
        {
            ckpt_summary *sum = ckpt_summarize(f, NULL, NULL, &err);
            const ckpt_summary_key *row;
            CHECK(sum != NULL);
            if (sum) {
                CHECK_EQ_U64(ckpt_summary_key_count(sum), 1); /* the root itself */
                row = ckpt_summary_key_at(sum, 0);
                CHECK(row && row->key == NULL && row->value == ckpt_root(f));
                CHECK(row && row->tensors == 0);
                CHECK(ckpt_summary_key_at(sum, 1) == NULL);
                CHECK_EQ_U64(ckpt_summary_dtype_count(sum), 0);
                CHECK_EQ_U64(ckpt_summary_module_count(sum), 0);
                CHECK_EQ_U64(ckpt_summary_get_totals(sum)->tensors, 0);
                ckpt_summary_free(sum);
            }
        }

        SECTION("walk: skip, stop, visit bound, bad options");
        memset(&w, 0, sizeof w);
        w.skip_root = 1;
        CHECK_EQ_INT(walk(f, &w, NULL, &err), 0);
        CHECK_EQ_U64(w.visits, 1);
        CHECK_EQ_U64(w.leaves, 0);
        memset(&w, 0, sizeof w);
        w.stop_at = 2;
        CHECK_EQ_INT(walk(f, &w, NULL, &err), -5);
        CHECK_EQ_INT(err.code, CKPT_OK);
        CHECK_EQ_U64(w.visits, 2);
        ckpt_walk_options_init(&opt);
        opt.max_visits = 3;
        memset(&w, 0, sizeof w);
        CHECK_EQ_INT(walk(f, &w, &opt, &err), -1);
        CHECK_EQ_INT(err.code, CKPT_E_LIMIT);
        CHECK_EQ_U64(w.visits, 3);
        opt.max_visits = 4;
        memset(&w, 0, sizeof w);
        CHECK_EQ_INT(walk(f, &w, &opt, &err), 0);
        opt.max_depth = 5000;
        CHECK_EQ_INT(walk(f, &w, &opt, &err), -1);
        CHECK_EQ_INT(err.code, CKPT_E_ARG);
        opt.struct_size = 0;
        CHECK_EQ_INT(walk(f, &w, &opt, &err), -1);
        CHECK_EQ_INT(err.code, CKPT_E_ARG);
        ckpt_close(f);
    }

    SECTION("walk: the depth limit");
    n = nested_pkl(buf, 50); /* depths 0..49 */
    f = ckpt_open_memory(buf, n, NULL, &err);
    CHECK(f != NULL);
    if (f) {
        memset(&w, 0, sizeof w);
        CHECK_EQ_INT(walk(f, &w, NULL, &err), 0);
        CHECK_EQ_U64(w.visits, 50);
        CHECK_EQ_U64(w.max_depth, 49);
        CHECK_EQ_U64(w.leaves, 50);
        ckpt_walk_options_init(&opt);
        opt.max_depth = 10;
        memset(&w, 0, sizeof w);
        CHECK_EQ_INT(walk(f, &w, &opt, &err), -1);
        CHECK_EQ_INT(err.code, CKPT_E_LIMIT);
        CHECK_CONTAINS(err.message, "deeper than 10");
        CHECK_EQ_U64(w.visits, 10); /* depths 0..9 were entered */
        opt.skip_deep = 1;
        memset(&w, 0, sizeof w);
        CHECK_EQ_INT(walk(f, &w, &opt, &err), 0);
        CHECK_EQ_U64(w.visits, 11); /* the list at depth 10 is seen, not entered */
        CHECK_EQ_U64(w.too_deep, 1);
        CHECK_EQ_U64(w.max_depth, 10);
        CHECK_EQ_U64(w.leaves, 10);
        ckpt_close(f);
    }
}

int main(int argc, char **argv)
{
    int i;
    if (argc < 3 || argc % 2 == 0) {
        fprintf(stderr, "usage: test_summary FILE.pt EXPECTED [FILE.pt EXPECTED ...]\n");
        return 2;
    }
    for (i = 1; i + 1 < argc; i += 2) {
        SECTION(argv[i]);
        check_file(argv[i], argv[i + 1]);
    }
    check_walker();

    SECTION("bad arguments");
    {
        ckpt_error err;
        CHECK(ckpt_summarize(NULL, NULL, NULL, &err) == NULL);
        CHECK_EQ_INT(err.code, CKPT_E_ARG);
        CHECK(ckpt_summary_get_totals(NULL) == NULL);
        CHECK(ckpt_summary_dtype_at(NULL, 0) == NULL);
        CHECK_EQ_U64(ckpt_summary_module_count(NULL), 0);
        ckpt_summary_free(NULL);
    }
    return ut_summary();
}
