/*
 * pickle.c - layer 2, the pickle machine.  Protocols 0 to 5, every opcode.
 * It builds an inert value tree in the unpickler's arena and CALLS NOTHING:
 * a GLOBAL is a name, REDUCE/NEWOBJ/INST/OBJ of an unknown callable make an
 * inert OBJECT that keeps its arguments, BUILD stores the state.  The
 * callables of Python's builtins that rebuild containers (OrderedDict, set,
 * bytes, copyreg, ...) are interpreted here by name, with their arguments
 * checked; every other global is offered to the hooks (pickle.h), which may
 * interpret a call or decline it.  One call a pickle makes over and over (a
 * tensor rebuild) a hook may read from the bytes itself (fast_call), making
 * the checks and calls the opcodes would make, or decline it.
 *
 * Limits: opcodes executed, stack + marks, memo entries, every length against
 * the bytes remaining.  No recursion: deep nesting costs heap, not C stack.
 */
#include "pickle.h"

#include <stdio.h>

#include <math.h>
#include <stdlib.h>
#include <string.h>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif

/* ---- what the machine knows of Python ---------------------------------- */

static const struct {
    const char *module, *name;
    uint8_t tag;
} builtin_globals[] = {
    {"collections", "OrderedDict", CK_TAG_ORDEREDDICT},
    {"collections", "defaultdict", CK_TAG_DEFAULTDICT},
    {"builtins", "dict", CK_TAG_DICT},
    {"builtins", "list", CK_TAG_LIST},
    {"builtins", "set", CK_TAG_SET},
    {"builtins", "frozenset", CK_TAG_FROZENSET},
    {"builtins", "tuple", CK_TAG_TUPLE},
    {"builtins", "bytearray", CK_TAG_BYTEARRAY},
    {"builtins", "bytes", CK_TAG_BYTES},
    {"_codecs", "encode", CK_TAG_CODECS_ENCODE},
    {"copyreg", "_reconstructor", CK_TAG_COPYREG_RECONSTRUCTOR},
    {"copyreg", "__newobj__", CK_TAG_COPYREG_NEWOBJ},
};

static bool eq(const char *a, size_t an, const char *b)
{
    return strlen(b) == an && memcmp(a, b, an) == 0;
}

/* Classify (module, name): Python's own first, then the find_class hook. */
static void classify(const ck_unpickler *u, ckpt_value *g)
{
    const char *m = g->u.g->module, *n = g->u.g->name;
    size_t mn = strlen(m), nn = strlen(n);
    for (size_t i = 0; i < sizeof builtin_globals / sizeof builtin_globals[0]; i++)
        if (eq(m, mn, builtin_globals[i].module) && eq(n, nn, builtin_globals[i].name)) {
            g->gid = builtin_globals[i].tag;
            return;
        }
    if (u->hooks.find_class) u->hooks.find_class(u->hooks.ud, g);
}

/* ---- the machine -------------------------------------------------------- */

struct ck_machine {
    ck_unpickler *u;
    const ck_pickle_in *in;
    ckpt_error *err;
    const uint8_t *p, *end;
    const uint8_t *opp;  /* the current opcode (its file offset: op_pos()) */
    const uint8_t *drop_at; /* in->discard: give back what is behind at p >= drop_at */
    const uint8_t *kept;    /* in->discard: bytes before it were given back */
    /* the bytes p, end and opp point into: in->buf, or (in->src) the window
     * `win`, which holds pickle bytes [woff, woff + (end - win)) */
    const uint8_t *wbase;
    uint8_t *win;
    size_t wcap;
    uint64_t woff;
    size_t wstep; /* bytes a window reads at least */
    bool stream;
    uint64_t max_stack;  /* the limits, read once */
    uint64_t memo_limit; /* keys below max_memo + the pickle's length */
    ckpt_value **stack;
    size_t sp, scap;
    size_t *marks;
    size_t nmarks, mcap;
    /* memo: indexed by key; with `elide`, by rank among the fetched keys */
    ckpt_value **mvals;
    size_t mcount, mcap2;
    /* memo elision (see prescan()): the keys a GET of this pickle fetches;
     * a value memoized under any other key is counted, not kept */
    bool elide;
    uint64_t *fetched; /* bit per key, nfw words */
    uint32_t *rank;    /* per word: fetched keys below it */
    size_t nfw, cap_fw, cap_rank;
    uint64_t *putbits; /* keys memoized so far (MEMOIZE counts distinct keys) */
    size_t cap_pw;
    /* the memo's last answers, slot key % 8 (key + 1; 0 none): a GET of
     * torch's rebuild function and a fast_call's GETs ask for the same few
     * keys at every tensor.  A memo store empties its key's slot. */
    struct {
        uint64_t key1;
        ckpt_value *v;
    } mcache[8];
    ckpt_value *consumed; /* call arguments a hook kept nothing of (reclaim) */
    uint64_t fast_ops;    /* opcodes a fast_call stood for (ck_machine_skip()) */
    int proto_seen;
    int proto; /* the last PROTO's number, 0 before one (Python's Unpickler.proto) */
    int need_more;
    /* immutable scalars shared within one pickle: fewer nodes for big state dicts */
    ckpt_value *none, *yes, *no;
    ckpt_value *small[256];
    ckpt_value no_args; /* an empty TUPLE for calls whose own was given back */
};
typedef struct ck_machine machine;

/* File offset of the current opcode (for errors, notes and hooks). */
static int64_t op_pos(const machine *m)
{
    int64_t at = (int64_t)(m->woff + (uint64_t)(m->opp - m->wbase));
    return m->in->base >= 0 ? m->in->base + at : at;
}

#define FAIL(code, ...) ck_fail(m->err, code, op_pos(m), __VA_ARGS__)
#define PFAIL(...) FAIL(CKPT_E_PICKLE, __VA_ARGS__)
#define OOM() FAIL(CKPT_E_NOMEM, "out of memory")

/* Grow one of the machine's arrays, charged to the file's memory limit;
 * a refusal is reported at the opcode. */
static int mgrow(machine *m, void **arr, size_t *cap, size_t need, size_t item)
{
    if (need <= *cap) return 0;
    if (ck_grow_in(m->u->arena, arr, cap, need, item, m->err) == 0) return 0;
    return m->u->arena->over ? OOM() : -1;
}

/* For scanners: remember a bytes value another load may unpickle. */
static int nested_bytes(machine *m, const ckpt_value *v, const char *callee)
{
    if (!m->u->opt->scan_all_pickles || !v || v->kind != CKPT_V_BYTES || v->u.s.n < 2) return 0;
    if (!callee && !((uint8_t)v->u.s.p[0] == 0x80 && (uint8_t)v->u.s.p[1] <= 5)) return 0;
    if (m->u->nnested >= m->u->opt->max_entries) return 0; /* nested.c notes the cut */
    CK_TRY(mgrow(m, (void **)&m->u->nested, &m->u->cap_nested, m->u->nnested + 1,
                 sizeof *m->u->nested));
    ck_nested *n = &m->u->nested[m->u->nnested++];
    n->bytes = v;
    n->label = m->in->label;
    n->pos = op_pos(m);
    n->callee = callee;
    return 0;
}

/* A few opcode bytes can apply a callable to a value shared through the memo
 * (OrderedDict(big_list), list(x), _codecs.encode(long_str), a tensor
 * rebuild with memoized arguments) again and again, each time copying it:
 * the words such copies allocate count against max_expansion, for all the
 * pickles of a file together. */
/* Room for exactly n more items (no doubling waste). */
static int reserve(machine *m, ckpt_value *v, size_t n)
{
    return ck_seq_room(m->u, v, n, true) ? OOM() : 0;
}

static int copied(machine *m, uint64_t words)
{
    /* at most max_expansion words, and at most 1 Mi words more than the
     * file has bytes: a real big string or list is copied once, a shared
     * one copied again and again runs out */
    uint64_t cap = ((uint64_t)1 << 20) + m->u->input_size;
    uint64_t budget = ck_budget(m->u->opt->max_expansion, m->u->pickle_bytes + m->in->len);
    if (cap > budget) cap = budget;
    m->u->copies += words;
    if (m->u->copies > cap && m->in->more) { /* the budget grows with the pickle: see it whole */
        m->need_more = 1;
        return -1;
    }
    if (m->u->copies > cap)
        return FAIL(CKPT_E_LIMIT,
                    "the pickles copy more than %llu words out of shared values "
                    "(shared references expand too much%s)",
                    (unsigned long long)cap, cap == budget ? "; max_expansion" : "");
    return 0;
}

static CK_HOT int push(machine *m, ckpt_value *v)
{
    if (v && m->sp < m->scap && (uint64_t)m->sp + m->nmarks < m->max_stack) {
        m->stack[m->sp++] = v; /* the common case */
        return 0;
    }
    if (!v) return OOM();
    if ((uint64_t)m->sp + m->nmarks >= m->max_stack) /* every push, not only when growing */
        return FAIL(CKPT_E_LIMIT, "pickle stack deeper than %u (max_stack)", m->u->opt->max_stack);
    if (m->sp == m->scap) {
        CK_TRY(mgrow(m, (void **)&m->stack, &m->scap, m->sp + 1, sizeof *m->stack));
    }
    m->stack[m->sp++] = v;
    return 0;
}

static size_t fence(const machine *m)
{
    return m->nmarks ? m->marks[m->nmarks - 1] : 0;
}

static ckpt_value *pop(machine *m)
{
    if (m->sp <= fence(m)) {
        PFAIL("stack underflow");
        return NULL;
    }
    return m->stack[--m->sp];
}

static ckpt_value *top(machine *m)
{
    if (m->sp <= fence(m)) {
        PFAIL("stack underflow");
        return NULL;
    }
    return m->stack[m->sp - 1];
}

/* Pop everything above the top mark; *base gets the first index. */
static int pop_mark(machine *m, size_t *base)
{
    if (!m->nmarks) return PFAIL("MARK expected but missing");
    *base = m->marks[--m->nmarks];
    return 0;
}

/* ---- input ------------------------------------------------------------- */

/* A streamed pickle's window: read WIN_STEP bytes at a time (it stays in
 * cache, and its pages are touched once; in->window sets another step, at
 * least WIN_MIN, for tests), and kept WIN_SLACK bytes ahead of every opcode
 * by run(), so that the fast path's pattern (a few hundred bytes) is not cut
 * short but at the pickle's end. */
#define WIN_STEP ((size_t)256 << 10)
#define WIN_SLACK ((size_t)4096)
#define WIN_MIN ((size_t)32)

/* Pickle offset of a pointer into the bytes p points into. */
static uint64_t win_pos(const machine *m, const uint8_t *q)
{
    return m->woff + (uint64_t)(q - m->wbase);
}

/* Streaming: let the window begin at pickle offset `at` and hold at least
 * `want` bytes from there, and at least a step (all that is left, at the
 * end), keeping the bytes it already has from `at` on.  p and opp keep
 * their offsets when they are at or after `at` (else the caller sets them).
 * The window's memory is charged to the arena; it never exceeds the
 * pickle's length. */
static int win_load(machine *m, uint64_t at, size_t want)
{
    const ck_pickle_in *in = m->in;
    uint64_t left = in->len - at, have_end = win_pos(m, m->end);
    uint64_t p_at = win_pos(m, m->p), opp_at = win_pos(m, m->opp);
    if (want < m->wstep) want = m->wstep;
    if (want > left) want = (size_t)left;
    if (want > m->wcap || !m->win) {
        size_t ncap = want ? want : 1;
        if (ncap < m->wcap * 2 && m->wcap * 2 <= left) ncap = m->wcap * 2;
        if (ck_mem_charge(m->u->arena, ncap - m->wcap)) return OOM();
        uint8_t *nw = realloc(m->win, ncap);
        if (!nw) {
            ck_mem_release(m->u->arena, ncap - m->wcap);
            return OOM();
        }
        m->win = nw;
        m->wcap = ncap;
    }
    size_t kept = 0;
    if (at >= m->woff && at < have_end) { /* the window's bytes from `at` on */
        kept = (size_t)(have_end - at);
        if (kept > want) kept = want;
        memmove(m->win, m->win + (at - m->woff), kept);
    }
    m->woff = at;
    m->wbase = m->win;
    m->end = m->win + kept;
    if (want > kept && ck_read(in->src, (uint64_t)in->base + at + kept, m->win + kept, want - kept,
                               in->label, m->err))
        return -1;
    m->end = m->win + want;
    m->p = p_at >= at && p_at - at <= want ? m->win + (p_at - at) : m->win;
    m->opp = opp_at >= at && opp_at - at <= want ? m->win + (opp_at - at) : m->win;
    m->drop_at = want < left && want > WIN_SLACK ? m->end - WIN_SLACK : m->end;
    return 0;
}

/* Whether a streamed pickle has bytes past the window. */
static bool win_more(const machine *m)
{
    return m->stream && win_pos(m, m->end) < m->in->len;
}

static int need(machine *m, size_t n)
{
    if ((size_t)(m->end - m->p) >= n) return 0;
    /* streaming: the opcode's bytes, from its first, made contiguous */
    if (m->stream && n <= m->in->len - win_pos(m, m->p))
        return win_load(m, win_pos(m, m->opp), (size_t)(m->p - m->opp) + n);
    if (m->in->more) {
        m->need_more = 1;
        return -1;
    }
    return ck_fail(m->err, CKPT_E_PICKLE, op_pos(m),
                   "truncated pickle: opcode needs %zu bytes, %zu remain", n,
                   m->stream ? (size_t)(m->in->len - win_pos(m, m->p)) : (size_t)(m->end - m->p));
}

/* A text line ending in '\n'; returns its length without the newline. */
static int line(machine *m, const char **s, size_t *n)
{
    const uint8_t *nl;
    /* streaming: a window twice as long until the line is in it */
    while (!(nl = memchr(m->p, '\n', (size_t)(m->end - m->p))) && win_more(m)) {
        size_t have = (size_t)(m->end - m->opp);
        CK_TRY(win_load(m, win_pos(m, m->opp), 2 * have));
    }
    if (!nl) {
        if (m->in->more) {
            m->need_more = 1;
            return -1;
        }
        return PFAIL("truncated pickle: unterminated text argument");
    }
    *s = (const char *)m->p;
    *n = (size_t)(nl - m->p);
    m->p = nl + 1;
    return 0;
}

/* ---- temporaries ------------------------------------------------------- */
/* `GLOBAL collections.OrderedDict, EMPTY_TUPLE, REDUCE` is how torch pickles
 * every hook dict of a module (a dozen per module): the empty argument tuple
 * is garbage as soon as the call is made.  A tuple nobody else can reach
 * (never memoized nor DUPed: `pin`) is given back, and the call sees the
 * machine's own empty tuple instead: undone when it is the arena's latest
 * allocation, else (with memo elision, as reclaim()) to the free lists.
 * Only for the machine's container calls, which never keep their
 * arguments. */
#define PINNED                                                                                     \
    0x80u /* aux2 of any value but GLOBAL and OBJECT: reachable
                      * from more than one place (memoized under a key a GET
                      * fetches, DUPed, copied into a second container, kept
                      * by a hook), so never given back */

static void pin(ckpt_value *v)
{
    if (v && v->kind != CKPT_V_GLOBAL && v->kind != CKPT_V_OBJECT)
        v->aux2 = (uint8_t)(v->aux2 | PINNED);
}

static void pin_all(ckpt_value **v, size_t n)
{
    for (size_t i = 0; i < n; i++) pin(v[i]);
}

bool ck_value_shared(const ckpt_value *v)
{
    return v->kind == CKPT_V_GLOBAL || v->kind == CKPT_V_OBJECT || (v->aux2 & PINNED);
}

static ckpt_value *spare_args(machine *m, const ckpt_value *callable, ckpt_value *args)
{
    if (args->kind != CKPT_V_TUPLE || args->u.seq.n || (args->aux2 & PINNED) ||
        callable->kind != CKPT_V_GLOBAL)
        return args;
    switch (callable->gid) {
    case CK_TAG_ORDEREDDICT:
    case CK_TAG_DEFAULTDICT:
    case CK_TAG_DICT:
    case CK_TAG_LIST:
    case CK_TAG_SET:
    case CK_TAG_FROZENSET:
    case CK_TAG_TUPLE:
    case CK_TAG_BYTEARRAY:
    case CK_TAG_BYTES: break; /* with no argument: a new value that keeps none */
    default: return args;
    }
    uint32_t id = args->id;
    if (ck_alloc_undo(m->u->arena, args, sizeof *args)) {
        if (id + 1 == m->u->next_id) m->u->next_id = id; /* fewer ids: smaller walk tables */
        return &m->no_args;
    }
    if (m->elide) { /* not the latest (it came from a free list): given back there */
        ck_free_small(m->u->arena, args, sizeof *args);
        return &m->no_args;
    }
    return args;
}

/* ---- memo ------------------------------------------------------------ */
/* Bits set in x.  Not __builtin_popcountll: without -mpopcnt (the baseline
 * x86-64 build) that is a call into libgcc's table loop, once a GET. */
static inline unsigned popcount64(uint64_t x)
{
    x -= (x >> 1) & 0x5555555555555555ull;
    x = (x & 0x3333333333333333ull) + ((x >> 2) & 0x3333333333333333ull);
    x = (x + (x >> 4)) & 0x0f0f0f0f0f0f0f0full;
    return (unsigned)((x * 0x0101010101010101ull) >> 56);
}

/* An array indexed by key, as CPython's own unpickler keeps it; keys must be
 * below max_memo, so a hostile key cannot ask for a huge array. */

static int memo_put_slow(machine *m, uint64_t key);

/* With elision: a PUT of key would keep nothing and cannot fail (within
 * the limit and the bookkeeping's room, and no GET fetches it). */
static inline bool put_idle(const machine *m, uint64_t key)
{
    if (!m->elide || key >= m->memo_limit || key / 64 >= m->cap_pw) return false;
    size_t w = (size_t)(key / 64);
    return w >= m->nfw || !(m->fetched[w] & ((uint64_t)1 << (key % 64)));
}

/* With elision: key was memoized (MEMOIZE counts the distinct keys). */
static inline void note_put(machine *m, uint64_t key)
{
    size_t w = (size_t)(key / 64);
    uint64_t bit = (uint64_t)1 << (key % 64);
    if (!(m->putbits[w] & bit)) m->mcount++;
    m->putbits[w] |= bit;
}

/* PUT/BINPUT/LONG_BINPUT/MEMOIZE: with elision, a key no GET fetches
 * (nearly every one) costs a bit set, inline. */
static CK_HOT int memo_put(machine *m, uint64_t key)
{
    if (m->sp > fence(m) && put_idle(m, key)) {
        note_put(m, key);
        return 0;
    }
    return memo_put_slow(m, key);
}

static int memo_put_slow(machine *m, uint64_t key)
{
    /* a pickler numbers its memo entries one per memoizing opcode, so an
     * honest key is below the pickle's length; max_memo is the slack */
    uint64_t limit = m->memo_limit;
    if (key >= limit && m->in->more) { /* a window of a longer pickle: decide on the whole */
        m->need_more = 1;
        return -1;
    }
    if (key >= limit)
        return FAIL(CKPT_E_LIMIT,
                    "memo key %llu is beyond the memo limit of %llu, the pickle's length plus %u "
                    "(max_memo)",
                    (unsigned long long)key, (unsigned long long)limit, m->u->opt->max_memo);
    ckpt_value *v = top(m);
    if (!v) return -1;
    if (m->elide) {
        size_t w = (size_t)(key / 64);
        uint64_t bit = (uint64_t)1 << (key % 64);
        if (w >= m->cap_pw) {
            size_t old = m->cap_pw;
            CK_TRY(mgrow(m, (void **)&m->putbits, &m->cap_pw, w + 1, sizeof *m->putbits));
            memset(m->putbits + old, 0, (m->cap_pw - old) * sizeof *m->putbits);
        }
        note_put(m, key);
        if (w >= m->nfw || !(m->fetched[w] & bit)) return 0; /* no GET asks for it */
        m->mcache[key % 8].key1 = 0;
        m->mvals[m->rank[w] + (size_t)popcount64(m->fetched[w] & (bit - 1))] = v;
        pin(v);
        return 0;
    }
    if (key >= m->mcap2) {
        size_t old = m->mcap2;
        CK_TRY(mgrow(m, (void **)&m->mvals, &m->mcap2, (size_t)key + 1, sizeof *m->mvals));
        memset(m->mvals + old, 0, (m->mcap2 - old) * sizeof *m->mvals);
    }
    if (!m->mvals[key]) m->mcount++;
    m->mcache[key % 8].key1 = 0;
    m->mvals[key] = v;
    pin(v);
    return 0;
}

/* The value memoized under key, or NULL. */
static inline ckpt_value *memo_value(const machine *m, uint64_t key)
{
    if (m->elide) {
        size_t w = (size_t)(key / 64);
        uint64_t bit = (uint64_t)1 << (key % 64);
        if (key / 64 < m->nfw && (m->fetched[w] & bit))
            return m->mvals[m->rank[w] + (size_t)popcount64(m->fetched[w] & (bit - 1))];
        return NULL;
    }
    return key < m->mcap2 ? m->mvals[key] : NULL;
}

/* memo_value() through the machine's small cache (mcache). */
static inline ckpt_value *memo_cached(machine *m, uint64_t key)
{
    if (m->mcache[key % 8].key1 == key + 1) return m->mcache[key % 8].v;
    ckpt_value *v = memo_value(m, key);
    if (v && key != UINT64_MAX) {
        m->mcache[key % 8].key1 = key + 1;
        m->mcache[key % 8].v = v;
    }
    return v;
}

static int memo_get(machine *m, uint64_t key)
{
    ckpt_value *v = memo_cached(m, key);
    if (!v) return PFAIL("memo key %llu is not defined", (unsigned long long)key);
    return push(m, v);
}

/* ---- memo elision ------------------------------------------------------ */
/* torch's pickler memoizes every value it writes (BINPUT after each), so an
 * unpickler that keeps the memo keeps every temporary of every tensor
 * rebuild (persistent-id, argument, size and stride tuples) alive to the end
 * of the pickle, though a GET fetches almost none of them.  When the whole
 * pickle is in memory, one pass over its opcodes first finds the keys that
 * a GET fetches; a value memoized under any other key is not kept, and a
 * call whose hook kept nothing of its arguments gives them back (reclaim()).
 * The pass decodes opcode lengths exactly as run() does; anything it cannot
 * follow (an unknown opcode, a GET key it cannot read, a truncated argument)
 * turns elision off, and the pickle runs with the whole memo as before. */

static inline int fetch_key(machine *m, uint64_t key)
{
    if (key >= m->memo_limit) return 0; /* never defined: memo_put refuses such keys */
    size_t w = (size_t)(key / 64);
    if (w < m->cap_fw) {
        if (w >= m->nfw) m->nfw = w + 1;
        m->fetched[w] |= (uint64_t)1 << (key % 64);
        return 0;
    }
    {
        size_t old = m->cap_fw;
        CK_TRY(mgrow(m, (void **)&m->fetched, &m->cap_fw, w + 1, sizeof *m->fetched));
        memset(m->fetched + old, 0, (m->cap_fw - old) * sizeof *m->fetched);
    }
    if (w >= m->nfw) m->nfw = w + 1;
    m->fetched[w] |= (uint64_t)1 << (key % 64);
    return 0;
}

/* What follows the opcodes prescan() does not simply skip (see `fixed`
 * there), as run() reads it. */
enum {
    PS_BAD = 0, /* unknown, EXT*, NEXT_BUFFER: run() stops there */
    PS_L1,      /* a 1-, 4- or 8-byte length, then that many bytes */
    PS_L4,
    PS_L8,
    PS_LINE, /* one or two newline-terminated lines */
    PS_LINE2,
    PS_GETLINE, /* GET, BINGET, LONG_BINGET: a key fetched */
    PS_GET1,
    PS_GET4,
    PS_STOP
};
static const uint8_t ps_class[256] = {
    ['.'] = PS_STOP,  [0x8a] = PS_L1,     ['U'] = PS_L1,   ['C'] = PS_L1,   [0x8c] = PS_L1,
    [0x8b] = PS_L4,   ['T'] = PS_L4,      ['X'] = PS_L4,   ['B'] = PS_L4,   [0x8d] = PS_L8,
    [0x8e] = PS_L8,   [0x96] = PS_L8,     ['I'] = PS_LINE, ['L'] = PS_LINE, ['F'] = PS_LINE,
    ['S'] = PS_LINE,  ['V'] = PS_LINE,    ['p'] = PS_LINE, ['P'] = PS_LINE, ['c'] = PS_LINE2,
    ['i'] = PS_LINE2, ['g'] = PS_GETLINE, ['h'] = PS_GET1, ['j'] = PS_GET4,
};

/* The bytes after a 'g' as a GET line run() would fetch by: 1 and *key
 * (saturated at UINT64_MAX: no such key is ever stored), 0 when they are no
 * decimal line (run() fails there if that 'g' is an opcode), -1 when the
 * digits go on past `end` (undecided). */
static int get_line_any(const uint8_t *q, const uint8_t *end, bool last, uint64_t *key)
{
    bool neg = false;
    uint64_t v = 0;
    if (q < end && (*q == '-' || *q == '+')) neg = *q++ == '-';
    const uint8_t *d = q;
    for (; q < end && *q >= '0' && *q <= '9'; q++)
        v = v > (UINT64_MAX - 9) / 10 ? UINT64_MAX : v * 10 + (uint64_t)(*q - '0');
    if (q == end) return last ? 0 : -1;
    if (*q != '\n' || q == d || (neg && v)) return 0;
    *key = v;
    return 1;
}

/* GET's text key as the parsing prescan reads it: 0 and *key, or -1 (no
 * key, or more than 18 digits: that prescan then keeps the memo). */
static int get_line_key(const uint8_t *q, const uint8_t *nl, uint64_t *key)
{
    const uint8_t *d = q < nl && (*q == '-' || *q == '+') ? q + 1 : q;
    return nl - d <= 18 && get_line_any(q, nl + 1, true, key) == 1 ? 0 : -1;
}

/* Where prescan() moves a streamed window on (see there). */
static const uint8_t *ps_lim(const machine *m)
{
    return win_more(m) && m->end - m->wbase > 16 ? m->end - 16 : m->end;
}

/* prescan(): the window moved (win_load()) with the pass's cursor *p, which
 * keeps its offset when it is at or after `at`, and the window's bounds. */
static int ps_move(machine *m, const uint8_t **p, const uint8_t **end, const uint8_t **lim,
                   uint64_t at, size_t want)
{
    m->p = m->opp = *p;
    CK_TRY(win_load(m, at, want));
    *p = m->p, *end = m->end, *lim = ps_lim(m);
    return 0;
}

/* The end of a prescan that found every fetched key: the memo sized to
 * them, elision on. */
static int prescan_done(machine *m)
{
    m->opp = m->wbase;
    /* rank per word, and the memo's room: one slot per fetched key */
    size_t total = 0;
    if (m->nfw) {
        CK_TRY(mgrow(m, (void **)&m->rank, &m->cap_rank, m->nfw, sizeof *m->rank));
        for (size_t i = 0; i < m->nfw; i++) {
            m->rank[i] = (uint32_t)total;
            total += (size_t)popcount64(m->fetched[i]);
        }
    }
    CK_TRY(mgrow(m, (void **)&m->mvals, &m->mcap2, total + 1, sizeof *m->mvals));
    memset(m->mvals, 0, m->mcap2 * sizeof *m->mvals);
    m->elide = true;
    return 0;
}

/* Bit i set when p[i] is 'g', 'h' or 'j' (GET, BINGET, LONG_BINGET), i
 * below 16 and below lim - p.  'h' | 2 == 'j'. */
static unsigned get_bytes16(const uint8_t *p, const uint8_t *lim)
{
    unsigned mask = 0;
    if (lim - p >= 16) {
#if defined(__SSE2__)
        const __m128i two = _mm_set1_epi8(2), j = _mm_set1_epi8('j'), g = _mm_set1_epi8('g');
        __m128i x = _mm_loadu_si128((const __m128i *)(const void *)p);
        __m128i hit = _mm_or_si128(_mm_cmpeq_epi8(_mm_or_si128(x, two), j), _mm_cmpeq_epi8(x, g));
        return (unsigned)_mm_movemask_epi8(hit);
#else
        lim = p + 16;
#endif
    }
    for (unsigned i = 0; p + i < lim; i++)
        if ((p[i] | 2) == 'j' || p[i] == 'g') mask |= 1u << i;
    return mask;
}

/* prescan() of a pickle whose bytes end at its length (in->bounded: a
 * ZIP record), without parsing it: every 'g', 'h' and 'j' byte is taken for
 * a GET, BINGET or LONG_BINGET, wherever it is (inside an argument, past
 * STOP), so the keys marked are a superset of those run() fetches.  A key
 * marked for nothing keeps its value in the memo: memory, not meaning (a
 * name's "...h" + byte marks a key below 256; a 'j' reads as a key the memo
 * can hold only when the fourth byte after it is small, as keys stay below
 * max_memo plus the pickle's length).  The bytes are compared 16 at a time
 * instead of parsed an opcode at a time. */
static int prescan_bytes(machine *m)
{
    const uint8_t *p = m->p, *end = m->end, *lim;
    for (;;) {
        bool last = !win_more(m);
        /* a candidate before lim has its key's bytes in the window (a GET
         * line of up to 20 digits and a sign, then its newline) */
        lim = last ? end : end - p > 32 ? end - 24 : p;
        for (; p < lim; p += 16) {
            for (unsigned mask = get_bytes16(p, lim); mask; mask &= mask - 1) {
                const uint8_t *q = p + __builtin_ctz(mask);
                size_t after = (size_t)(end - q) - 1;
                uint64_t key;
                m->opp = q; /* for errors */
                if (*q == 'h') {
                    if (after >= 1) CK_TRY(fetch_key(m, q[1]));
                } else if (*q == 'j') {
                    if (after >= 4) CK_TRY(fetch_key(m, ck_le32(q + 1)));
                } else {
                    int r = get_line_any(q + 1, end, last, &key);
                    if (r < 0) return 0; /* digits to the window's end: keep the memo */
                    if (r > 0) CK_TRY(fetch_key(m, key));
                }
            }
        }
        if (last) break;
        p = lim; /* the next window from lim on */
        CK_TRY(ps_move(m, &p, &end, &lim, win_pos(m, p), 64));
    }
    return prescan_done(m);
}

/* 0: m->elide set as the pass found; -1: out of memory (m->err set). */
static int prescan(machine *m)
{
    if (m->in->bounded) return prescan_bytes(m);
    /* bytes an opcode with no or a fixed argument takes (0: the others) */
    static const uint8_t fixed[256] = {
        ['('] = 1,  ['0'] = 1,  ['1'] = 1,  ['2'] = 1,  ['N'] = 1,  [0x88] = 1, [0x89] = 1,
        [')'] = 1,  [']'] = 1,  ['}'] = 1,  [0x8f] = 1, ['t'] = 1,  ['l'] = 1,  [0x91] = 1,
        ['d'] = 1,  [0x85] = 1, [0x86] = 1, [0x87] = 1, ['a'] = 1,  ['e'] = 1,  ['s'] = 1,
        ['u'] = 1,  [0x90] = 1, ['b'] = 1,  [0x94] = 1, ['o'] = 1,  ['R'] = 1,  [0x81] = 1,
        [0x92] = 1, ['Q'] = 1,  [0x93] = 1, [0x98] = 1, ['K'] = 2,  ['q'] = 2,  [0x80] = 2,
        ['M'] = 3,  ['J'] = 5,  ['r'] = 5,  ['G'] = 9,  [0x95] = 9,
    };
    /* streaming: the window moves on 16 bytes (an opcode with its fixed or
     * length argument) before it ends; a long argument is skipped by moving
     * the window past it, a line waits for a window that holds it (retry) */
    const uint8_t *p = m->p, *end = m->end, *lim = ps_lim(m);
    for (;;) {
        while (p < lim) {
            uint8_t op = *p;
            if (fixed[op]) { /* most opcodes: the argument is checked once, below */
                p += fixed[op];
                continue;
            }
            if (op == 'h' && end - p >= 2) { /* BINGET, a sixth of torch's opcodes */
                m->opp = p;
                CK_TRY(fetch_key(m, p[1]));
                p += 2;
                continue;
            }
            if (op == 'X' && end - p >= 5 && ck_le32(p + 1) <= (size_t)(end - p) - 5) {
                p += 5 + ck_le32(p + 1); /* BINUNICODE in the window: torch's names and keys */
                continue;
            }
            m->opp = p++; /* for errors */
            size_t avail = (size_t)(end - p), hl = 0;
            uint64_t len = 0, key;
            switch (ps_class[op]) {
            case PS_GET1:
                if (avail < 1) return 0;
                CK_TRY(fetch_key(m, p[0]));
                p += 1;
                continue;
            case PS_GET4:
                if (avail < 4) return 0;
                CK_TRY(fetch_key(m, ck_le32(p)));
                p += 4;
                continue;
            case PS_L1:
                if (avail < 1) return 0;
                if (avail - 1 >= p[0]) { /* in the window (the common case) */
                    p += 1 + p[0];
                    continue;
                }
                len = p[0];
                hl = 1;
                break;
            case PS_L4:
                if (avail < 4) return 0;
                len = ck_le32(p);
                if (op == 0x8b && len > INT32_MAX) return 0; /* LONG4: negative */
                if (len <= avail - 4) {
                    p += 4 + (size_t)len;
                    continue;
                }
                hl = 4;
                break;
            case PS_L8:
                if (avail < 8) return 0;
                len = ck_le64(p);
                if (len <= avail - 8) {
                    p += 8 + (size_t)len;
                    continue;
                }
                hl = 8;
                break;
            case PS_LINE:
            case PS_LINE2:
            case PS_GETLINE: {
                const uint8_t *nl = memchr(p, '\n', avail);
                if (!nl) goto retry;
                if (ps_class[op] == PS_GETLINE) {
                    if (get_line_key(p, nl, &key)) return 0;
                    CK_TRY(fetch_key(m, key));
                }
                p = nl + 1;
                if (ps_class[op] == PS_LINE2) {
                    if (!(nl = memchr(p, '\n', (size_t)(end - p)))) goto retry;
                    p = nl + 1;
                }
                continue;
            }
            case PS_STOP: goto done; /* the machine reads no further */
            default: return 0;
            }
            /* a length-prefixed argument past the window: streamed, the
             * window moves past it */
            if (!m->stream || len > m->in->len - win_pos(m, p + hl)) return 0;
            CK_TRY(ps_move(m, &p, &end, &lim, win_pos(m, p + hl) + len, 0));
            continue;
        retry: /* streaming: a line past the window; the opcode again, in a longer one */
            if (!win_more(m)) return 0;
            p = m->opp;
            CK_TRY(ps_move(m, &p, &end, &lim, win_pos(m, p), 2 * (size_t)(end - p)));
        }
        if (!win_more(m)) break;
        CK_TRY(ps_move(m, &p, &end, &lim, win_pos(m, p), 0)); /* the next window */
    }
    return 0; /* no STOP (or a fixed argument cut short): run() fails; keep the memo */
done:
    return prescan_done(m);
}

/* Give back v and what only it refers to (depth-bounded), but not `keep`,
 * pinned values, globals or objects. */
static void reclaim(machine *m, ckpt_value *v, const ckpt_value *keep, int depth)
{
    if (!v || v == keep || (v->aux2 & PINNED) || v == &m->no_args || depth > 4) return;
    ck_arena *a = m->u->arena;
    switch (v->kind) {
    case CKPT_V_INT:
    case CKPT_V_FLOAT:
    case CKPT_V_STORAGE:
    case CKPT_V_TENSOR:
    case CKPT_V_BIGINT: ck_free_small(a, v, ck_node_size(v->kind)); return;
    case CKPT_V_STR:
    case CKPT_V_BYTES:
        if (v->u.s.p == CK_STR_INLINE(v)) { /* ck_new_str() */
            if (v->u.s.n <= CK_FREE_MAX) ck_free_small(a, v, CK_STR_HDR + v->u.s.n + 1);
        } else {
            ck_free_small(a, v, ck_node_size(v->kind));
        }
        return;
    case CKPT_V_TUPLE:
    case CKPT_V_LIST:
    case CKPT_V_SET:
    case CKPT_V_DICT: {
        size_t n = v->u.seq.n, room = ck_seq_cap(v);
        ckpt_value **items = v->u.seq.v;
        for (size_t i = 0; i < n; i++) reclaim(m, items[i], keep, depth + 1);
        if (items == (ckpt_value **)(v + 1)) { /* one allocation: new_seq_from() */
            if (room <= (CK_FREE_MAX - sizeof *v) / sizeof *items)
                ck_free_small(a, v, sizeof *v + room * sizeof *items);
            return;
        }
        /* the array after the node: an undo takes the array back first */
        if (items && room <= CK_FREE_MAX / sizeof *items)
            ck_free_small(a, items, room * sizeof *items);
        ck_free_small(a, v, sizeof *v);
        return;
    }
    default: return;
    }
}

/* ---- numbers ----------------------------------------------------------- */

static ckpt_value *new_int(machine *m, int64_t i)
{
    if (i >= 0 && i < 256 && m->small[i]) return m->small[i];
    ckpt_value *v = ck_new(m->u, CKPT_V_INT);
    if (v) v->u.i = i;
    if (v && i >= 0 && i < 256) {
        m->small[i] = v;
        pin(v); /* shared by every use */
    }
    return v;
}

static ckpt_value *new_bool(machine *m, bool b)
{
    ckpt_value **slot = b ? &m->yes : &m->no;
    if (*slot) return *slot;
    ckpt_value *v = ck_new(m->u, CKPT_V_BOOL);
    if (v) v->u.b = b;
    pin(v);
    return *slot = v;
}

static ckpt_value *new_none(machine *m)
{
    if (!m->none) {
        m->none = ck_new(m->u, CKPT_V_NONE);
        pin(m->none);
    }
    return m->none;
}

/* A tuple/list/set whose items are copied from the stack, in one allocation. */
static ckpt_value *new_seq_from(machine *m, ckpt_kind kind, ckpt_value **items, size_t n)
{
    if (n > (SIZE_MAX - sizeof(ckpt_value)) / sizeof(ckpt_value *)) return NULL;
    ckpt_value *v = ck_alloc(m->u->arena, sizeof *v + n * sizeof(ckpt_value *));
    if (!v) return NULL;
    v->kind = (uint8_t)kind;
    v->id = m->u->next_id++;
    if (n) {
        v->u.seq.v = (ckpt_value **)(v + 1);
        memcpy(v->u.seq.v, items, n * sizeof(ckpt_value *));
        v->u.seq.n = n;
        v->aux2 = CK_SEQ_EXACT;
    }
    return v;
}

/* Parse a decimal integer text (optional sign, digits); int64 or BIGINT. */
static int parse_decimal(machine *m, const char *s, size_t n, ckpt_value **out)
{
    size_t i = 0;
    bool neg = false;
    if (i < n && (s[i] == '-' || s[i] == '+')) neg = s[i++] == '-';
    if (i == n) return PFAIL("bad integer text");
    size_t start = i;
    uint64_t acc = 0;
    bool big = false;
    for (; i < n; i++) {
        if (s[i] < '0' || s[i] > '9') return PFAIL("bad integer text");
        uint64_t d = (uint64_t)(s[i] - '0');
        if (!big && (ck_mul_ovf(acc, 10, &acc) || ck_add_ovf(acc, d, &acc))) big = true;
    }
    if (!big && (acc <= (uint64_t)INT64_MAX || (neg && acc == (uint64_t)INT64_MAX + 1))) {
        *out = new_int(m, neg ? (int64_t)(0 - acc) : (int64_t)acc);
        return *out ? 0 : OOM();
    }
    while (start < n - 1 && s[start] == '0') start++;
    if (n - start > 40000)
        return FAIL(CKPT_E_LIMIT, "integer of %zu digits is too large", n - start);
    char *t = ck_alloc(m->u->arena, n - start + 2);
    if (!t) return OOM();
    size_t k = 0;
    if (neg) t[k++] = '-';
    memcpy(t + k, s + start, n - start);
    k += n - start;
    t[k] = 0;
    ckpt_value *v = ck_new(m->u, CKPT_V_BIGINT);
    if (!v) return OOM();
    v->u.s.p = t;
    v->u.s.n = k;
    *out = v;
    return 0;
}

/* LONG1/LONG4: little-endian two's complement of n bytes. */
static int parse_long_bytes(machine *m, const uint8_t *b, size_t n, ckpt_value **out)
{
    if (n == 0) {
        *out = new_int(m, 0);
        return *out ? 0 : OOM();
    }
    bool neg = (b[n - 1] & 0x80) != 0;
    /* drop redundant sign bytes: a non-minimal encoding of a small int is an int */
    while (n > 1 && b[n - 1] == (neg ? 0xff : 0x00) && ((b[n - 2] & 0x80) != 0) == neg) n--;
    if (n <= 8) {
        uint64_t u = 0;
        for (size_t i = 0; i < n; i++) u |= (uint64_t)b[i] << (8 * i);
        if (neg && n < 8) u |= ~(uint64_t)0 << (8 * n);
        *out = new_int(m, (int64_t)u);
        return *out ? 0 : OOM();
    }
    if (n > 4096) return FAIL(CKPT_E_LIMIT, "integer of %zu bytes is too large", n);
    /* magnitude in base 2^32 limbs */
    size_t nl = (n + 3) / 4;
    uint32_t *l = calloc(nl, sizeof *l);
    if (!l) return OOM();
    for (size_t i = 0; i < n; i++) l[i / 4] |= (uint32_t)b[i] << (8 * (i % 4));
    if (neg) { /* two's complement negate */
        if (n % 4) l[nl - 1] |= ~(uint32_t)0 << (8 * (n % 4));
        uint64_t carry = 1;
        for (size_t i = 0; i < nl; i++) {
            uint64_t x = (uint64_t)(uint32_t)~l[i] + carry;
            l[i] = (uint32_t)x;
            carry = x >> 32;
        }
    }
    size_t cap = n * 3 + 4; /* 2.41 digits per byte */
    char *digits = malloc(cap);
    if (!digits) {
        free(l);
        return OOM();
    }
    size_t nd = 0, top_l = nl;
    while (top_l && !l[top_l - 1]) top_l--;
    while (top_l) {
        uint64_t rem = 0;
        for (size_t i = top_l; i-- > 0;) {
            uint64_t cur = (rem << 32) | l[i];
            l[i] = (uint32_t)(cur / 1000000000u);
            rem = cur % 1000000000u;
        }
        while (top_l && !l[top_l - 1]) top_l--;
        for (int k = 0; k < 9; k++) {
            digits[nd++] = (char)('0' + rem % 10);
            rem /= 10;
            if (!top_l && !rem) break;
        }
    }
    if (!nd) digits[nd++] = '0';
    free(l);
    ckpt_value *v = ck_new(m->u, CKPT_V_BIGINT);
    char *t = v ? ck_alloc(m->u->arena, nd + 2) : NULL;
    if (!t) {
        free(digits);
        return OOM();
    }
    size_t k = 0;
    if (neg) t[k++] = '-';
    for (size_t i = nd; i-- > 0;) t[k++] = digits[i];
    t[k] = 0;
    free(digits);
    v->u.s.p = t;
    v->u.s.n = k;
    *out = v;
    return 0;
}

/* ---- strings ----------------------------------------------------------- */

static size_t put_utf8(char *o, uint32_t c)
{
    if (c < 0x80) {
        o[0] = (char)c;
        return 1;
    }
    if (c < 0x800) {
        o[0] = (char)(0xc0 | (c >> 6));
        o[1] = (char)(0x80 | (c & 0x3f));
        return 2;
    }
    if (c < 0x10000) {
        o[0] = (char)(0xe0 | (c >> 12));
        o[1] = (char)(0x80 | ((c >> 6) & 0x3f));
        o[2] = (char)(0x80 | (c & 0x3f));
        return 3;
    }
    o[0] = (char)(0xf0 | (c >> 18));
    o[1] = (char)(0x80 | ((c >> 12) & 0x3f));
    o[2] = (char)(0x80 | ((c >> 6) & 0x3f));
    o[3] = (char)(0x80 | (c & 0x3f));
    return 4;
}

static int hexval(char c)
{
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

/* UNICODE (protocol 0): raw-unicode-escape. */
static ckpt_value *raw_unicode(machine *m, const char *s, size_t n)
{
    if (n > SIZE_MAX / 4 - 1) return NULL;
    char *o = ck_alloc(m->u->arena, n * 4 + 1);
    if (!o) return NULL;
    size_t k = 0;
    for (size_t i = 0; i < n;) {
        if (s[i] == '\\' && i + 1 < n && (s[i + 1] == 'u' || s[i + 1] == 'U')) {
            size_t w = s[i + 1] == 'u' ? 4 : 8;
            if (i + 2 + w <= n) {
                uint32_t c = 0;
                bool ok = true;
                for (size_t j = 0; j < w; j++) {
                    int h = hexval(s[i + 2 + j]);
                    if (h < 0) ok = false;
                    c = (c << 4) | (uint32_t)(h < 0 ? 0 : h);
                }
                if (ok && c <= 0x10ffff) {
                    k += put_utf8(o + k, c);
                    i += 2 + w;
                    continue;
                }
            }
        }
        k += put_utf8(o + k, (unsigned char)s[i]);
        i++;
    }
    ckpt_value *v = ck_new(m->u, CKPT_V_STR);
    if (!v) return NULL;
    o[k] = 0;
    v->u.s.p = o;
    v->u.s.n = k;
    return v;
}

/* STRING (protocol 0): a quoted Python 2 str repr. */
static int quoted_string(machine *m, const char *s, size_t n, ckpt_value **out)
{
    if (n < 2 || (s[0] != '\'' && s[0] != '"') || s[n - 1] != s[0])
        return PFAIL("STRING argument is not quoted");
    s++;
    n -= 2;
    char *o = ck_alloc(m->u->arena, n + 1);
    if (!o) return OOM();
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        if (c != '\\' || i + 1 == n) {
            o[k++] = c;
            continue;
        }
        c = s[++i];
        switch (c) {
        case 'n': o[k++] = '\n'; break;
        case 't': o[k++] = '\t'; break;
        case 'r': o[k++] = '\r'; break;
        case 'a': o[k++] = '\a'; break;
        case 'b': o[k++] = '\b'; break;
        case 'f': o[k++] = '\f'; break;
        case 'v': o[k++] = '\v'; break;
        case 'x':
            if (i + 2 < n && hexval(s[i + 1]) >= 0 && hexval(s[i + 2]) >= 0) {
                o[k++] = (char)(hexval(s[i + 1]) * 16 + hexval(s[i + 2]));
                i += 2;
            } else {
                return PFAIL("bad \\x escape in STRING");
            }
            break;
        default:
            if (c >= '0' && c <= '7') {
                int val = c - '0';
                for (int j = 0; j < 2 && i + 1 < n && s[i + 1] >= '0' && s[i + 1] <= '7'; j++)
                    val = val * 8 + (s[++i] - '0');
                o[k++] = (char)val;
            } else if (c == '\\' || c == '\'' || c == '"') {
                o[k++] = c;
            } else {
                o[k++] = '\\';
                o[k++] = c;
            }
        }
    }
    o[k] = 0;
    ckpt_value *v = ck_new(m->u, CKPT_V_STR);
    if (!v) return OOM();
    v->u.s.p = o;
    v->u.s.n = k;
    *out = v;
    return 0;
}

/* ---- globals ----------------------------------------------------------- */

/* Python 2 names.  Python's unpickler, with fix_imports (the default, and
 * torch.load's) and at a protocol below 3, renames a global before it
 * imports it (Lib/pickle.py find_class(), Modules/_pickle.c): (module, name)
 * in _compat_pickle.NAME_MAPPING gives both anew, else module in
 * IMPORT_MAPPING gives the module anew.  The two tables are CPython's own,
 * written out by gen_compat_pickle.py; "the protocol" is the unpickler's
 * proto: 0 until a PROTO opcode, then the last PROTO's number. */
typedef struct py2_name {
    const char *module, *name, *to_module, *to_name;
} py2_name;
typedef struct py2_module {
    const char *module, *to_module;
} py2_module;
#include "compat_pickle.inc"

/* a[0..an) against the NUL-terminated b, in the tables' (bytes) order. */
static int cmp_text(const char *a, size_t an, const char *b)
{
    size_t bn = strlen(b);
    int c = memcmp(a, b, an < bn ? an : bn);
    return c ? c : (an > bn) - (an < bn);
}

static void py2_map(const machine *m, const char **mod, size_t *mn, const char **name, size_t *nn)
{
    size_t lo = 0, hi = sizeof py2_names / sizeof py2_names[0];
    if (m->proto >= 3) return;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        int c = cmp_text(*mod, *mn, py2_names[mid].module);
        if (c == 0) c = cmp_text(*name, *nn, py2_names[mid].name);
        if (c == 0) {
            *mod = py2_names[mid].to_module;
            *mn = strlen(*mod);
            *name = py2_names[mid].to_name;
            *nn = strlen(*name);
            return;
        }
        if (c < 0)
            hi = mid;
        else
            lo = mid + 1;
    }
    lo = 0;
    hi = sizeof py2_modules / sizeof py2_modules[0];
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        int c = cmp_text(*mod, *mn, py2_modules[mid].module);
        if (c == 0) {
            *mod = py2_modules[mid].to_module;
            *mn = strlen(*mod);
            return;
        }
        if (c < 0)
            hi = mid;
        else
            lo = mid + 1;
    }
}

static int make_global(machine *m, const char *mod, size_t mn, const char *name, size_t nn)
{
    if (m->u->nglobals >= m->u->opt->max_entries)
        return FAIL(CKPT_E_LIMIT, "more than %u globals (max_entries)", m->u->opt->max_entries);
    py2_map(m, &mod, &mn, &name, &nn);
    ckpt_value *g = ck_new(m->u, CKPT_V_GLOBAL);
    if (!g || !(g->u.g = ck_alloc(m->u->arena, sizeof *g->u.g))) return OOM();
    g->u.g->module = ck_strndup(m->u->arena, mod, mn);
    g->u.g->name = ck_strndup(m->u->arena, name, nn);
    char *full = ck_alloc(m->u->arena, mn + nn + 2);
    if (!g->u.g->module || !g->u.g->name || !full) return OOM();
    memcpy(full, mod, mn);
    full[mn] = '.';
    memcpy(full + mn + 1, name, nn);
    g->cls = full;
    classify(m->u, g);
    CK_TRY(mgrow(m, (void **)&m->u->globals, &m->u->cap_globals, m->u->nglobals + 1,
                 sizeof *m->u->globals)); /* charged for good: kept with the file */
    ckpt_global_ref *r = &m->u->globals[m->u->nglobals];
    r->module = g->u.g->module;
    r->name = g->u.g->name;
    r->pickle = m->in->label;
    r->offset = op_pos(m);
    r->called = 0;
    r->loader = NULL;
    r->args = NULL;
    g->u.g->gref = m->u->nglobals++;
    return push(m, g);
}

/* A hostile act the machine refuses (BUILD or SETITEM on a class or module,
 * an extension-registry code): recorded as a global of the pseudo-module
 * "<pickle>" named after the act, so that a scanner told of the globals
 * (on_global) sees the attack at its offset rather than only a read error. */
static int record_act(machine *m, const char *what)
{
    if (m->u->nglobals >= m->u->opt->max_entries)
        return FAIL(CKPT_E_LIMIT, "more than %u globals (max_entries)", m->u->opt->max_entries);
    char *name = ck_strndup(m->u->arena, what, strlen(what));
    if (!name) return OOM();
    CK_TRY(mgrow(m, (void **)&m->u->globals, &m->u->cap_globals, m->u->nglobals + 1,
                 sizeof *m->u->globals));
    ckpt_global_ref *r = &m->u->globals[m->u->nglobals++];
    r->module = "<pickle>";
    r->name = name;
    r->pickle = m->in->label;
    r->offset = op_pos(m);
    r->called = 1; /* it acts while loading, as a call would */
    r->loader = NULL;
    r->args = NULL;
    return 0;
}

/* The act on a GLOBAL target, then the read error the reader has always given. */
static int act_on_global(machine *m, const char *op, const ckpt_value *target)
{
    char what[160];
    snprintf(what, sizeof what, "%s on %.140s", op, target->cls ? target->cls : "a global");
    CK_TRY(record_act(m, what));
    return PFAIL("%s on a %s", op, ckpt_kind_name((ckpt_kind)target->kind));
}

/* The global `callable` is called with `args` (NULL: not seen).  For
 * scanners the global keeps the tuple while every call uses that one. */
static void mark_called(machine *m, const ckpt_value *callable, const ckpt_value *args)
{
    if (callable->kind != CKPT_V_GLOBAL || callable->u.g->gref >= m->u->nglobals) return;
    ckpt_global_ref *r = &m->u->globals[callable->u.g->gref];
    if (!m->u->opt->scan_all_pickles) args = NULL; /* values may be given back */
    if (!r->called)
        r->args = args;
    else if (r->args != args)
        r->args = NULL;
    r->called = 1;
}

/* ---- interpreting known callables -------------------------------------- */

static bool is_seq(const ckpt_value *v)
{
    return v && (v->kind == CKPT_V_TUPLE || v->kind == CKPT_V_LIST);
}

static ckpt_value *new_object(machine *m, ckpt_value *callable, ckpt_value *args)
{
    ckpt_value *o = ck_new(m->u, CKPT_V_OBJECT);
    if (!o || !(o->u.obj = ck_alloc(m->u->arena, sizeof *o->u.obj))) return NULL;
    o->u.obj->callable = callable;
    o->u.obj->args = args;
    o->cls = callable->kind == CKPT_V_GLOBAL   ? callable->cls
             : callable->kind == CKPT_V_OBJECT ? callable->cls
                                               : "?";
    if (!o->cls) o->cls = "?";
    return o;
}

static ckpt_value *new_dict(machine *m, const char *cls)
{
    ckpt_value *d = ck_new(m->u, CKPT_V_DICT);
    if (d) d->cls = cls;
    return d;
}

/* Copy the items of a list/tuple/set arg into a new container. */
static int seq_from(machine *m, ckpt_kind kind, ckpt_value *src, ckpt_value **out)
{
    ckpt_value *v = ck_new(m->u, kind);
    if (!v) return OOM();
    if (src) {
        if (src->kind != CKPT_V_LIST && src->kind != CKPT_V_TUPLE && src->kind != CKPT_V_SET)
            return 1; /* not something we interpret */
        CK_TRY(copied(m, src->u.seq.n));
        CK_TRY(reserve(m, v, src->u.seq.n));
        if (src->u.seq.n) memcpy(v->u.seq.v, src->u.seq.v, src->u.seq.n * sizeof *v->u.seq.v);
        v->u.seq.n = src->u.seq.n;
        pin_all(v->u.seq.v, v->u.seq.n); /* now in two containers */
    }
    *out = v;
    return 0;
}

static int dict_from_pairs(machine *m, ckpt_value *d, ckpt_value *src)
{
    if (src->kind == CKPT_V_DICT || is_seq(src)) {
        size_t words = src->kind == CKPT_V_DICT ? src->u.seq.n : 2 * src->u.seq.n;
        if (copied(m, words) || reserve(m, d, words)) return -1;
    }
    /* reserve() made room for all of it: fill in place */
    if (src->kind == CKPT_V_DICT) {
        if (src->u.seq.n) memcpy(d->u.seq.v, src->u.seq.v, src->u.seq.n * sizeof *d->u.seq.v);
        d->u.seq.n = src->u.seq.n;
        pin_all(d->u.seq.v, d->u.seq.n);
        return 0;
    }
    if (!is_seq(src)) return 1;
    for (size_t i = 0; i < src->u.seq.n; i++) {
        ckpt_value *pr = src->u.seq.v[i];
        if (!is_seq(pr) || pr->u.seq.n != 2) return 1;
        d->u.seq.v[d->u.seq.n++] = pr->u.seq.v[0];
        d->u.seq.v[d->u.seq.n++] = pr->u.seq.v[1];
        pin_all(pr->u.seq.v, 2);
    }
    return 0;
}

size_t ck_latin1_encode(const char *s, size_t n, char *o)
{
    size_t k = 0;
    const unsigned char *p = (const unsigned char *)s;
    for (size_t i = 0; i < n;) {
        uint64_t x;
        if (n - i >= 8 && (memcpy(&x, p + i, 8), !(x & 0x8080808080808080ull))) {
            memcpy(o + k, &x, 8); /* eight ASCII bytes at once */
            i += 8;
            k += 8;
        } else if (p[i] < 0x80) {
            o[k++] = (char)p[i++];
        } else if ((p[i] & 0xe0) == 0xc0 && i + 1 < n && p[i] <= 0xc3) {
            o[k++] = (char)(((p[i] & 0x1f) << 6) | (p[i + 1] & 0x3f));
            i += 2;
        } else {
            return SIZE_MAX; /* not latin-1 */
        }
    }
    return k;
}

/* latin-1 text (as UTF-8) back to bytes: _codecs.encode(s, 'latin1'). */
static ckpt_value *latin1_bytes(machine *m, const ckpt_value *s)
{
    char *o = ck_alloc(m->u->arena, s->u.s.n + 1);
    if (!o) return NULL;
    size_t k = ck_latin1_encode(s->u.s.p, s->u.s.n, o);
    if (k == SIZE_MAX) return NULL;
    ckpt_value *v = ck_new(m->u, CKPT_V_BYTES);
    if (!v) return NULL;
    o[k] = 0;
    v->u.s.p = o;
    v->u.s.n = k;
    return v;
}

/* REDUCE / NEWOBJ: callable(*args).  Interprets what torch's loader knows,
 * makes an inert OBJECT of anything else. */
static int apply(machine *m, ckpt_value *callable, ckpt_value *args, ckpt_value **out)
{
    mark_called(m, callable, args->kind == CKPT_V_TUPLE ? args : NULL);
    if (args->kind != CKPT_V_TUPLE) return PFAIL("call arguments are not a tuple");
    size_t n = args->u.seq.n;
    ckpt_value **a = args->u.seq.v;
    *out = NULL;
    if (callable->kind == CKPT_V_GLOBAL && m->u->opt->scan_all_pickles) /* pickle.loads(b) */
        for (size_t i = 0; i < n; i++) CK_TRY(nested_bytes(m, a[i], callable->cls));
    if (callable->kind == CKPT_V_GLOBAL) {
        int r;
        switch (callable->gid) {
        case CK_TAG_ORDEREDDICT:
        case CK_TAG_DICT:
        case CK_TAG_DEFAULTDICT: {
            ckpt_value *d = new_dict(m, callable->gid == CK_TAG_DICT ? NULL : callable->cls);
            if (!d) return OOM();
            if (n == 1 && callable->gid != CK_TAG_DEFAULTDICT) {
                r = dict_from_pairs(m, d, a[0]);
                if (r < 0) return -1;
                if (r > 0) break;
            } else if (n > (callable->gid == CK_TAG_DEFAULTDICT ? 1u : 0u)) {
                break;
            }
            *out = d;
            return 0;
        }
        case CK_TAG_LIST:
        case CK_TAG_TUPLE:
        case CK_TAG_SET:
        case CK_TAG_FROZENSET: {
            ckpt_kind k = callable->gid == CK_TAG_LIST    ? CKPT_V_LIST
                          : callable->gid == CK_TAG_TUPLE ? CKPT_V_TUPLE
                                                          : CKPT_V_SET;
            if (n > 1) break;
            r = seq_from(m, k, n ? a[0] : NULL, out);
            if (r < 0) return -1;
            if (r == 0) return 0;
            break;
        }
        case CK_TAG_CODECS_ENCODE:
            if (n == 2 && a[0]->kind == CKPT_V_STR && a[1]->kind == CKPT_V_STR &&
                (ck_is_str(a[1], "latin1") || ck_is_str(a[1], "latin-1") ||
                 ck_is_str(a[1], "iso-8859-1"))) {
                CK_TRY(copied(m, 1 + a[0]->u.s.n / 8));
                *out = latin1_bytes(m, a[0]);
                if (*out) return nested_bytes(m, *out, NULL);
            }
            break;
        case CK_TAG_BYTES:
        case CK_TAG_BYTEARRAY:
            if (n == 0) {
                *out = ck_new_str(m->u, CKPT_V_BYTES, "", 0);
                return *out ? 0 : OOM();
            }
            if (n == 1 && a[0]->kind == CKPT_V_BYTES) {
                *out = a[0];
                pin(a[0]); /* the result and the argument */
                return 0;
            }
            if (n == 2 && a[0]->kind == CKPT_V_STR && ck_is_str(a[1], "latin-1")) {
                CK_TRY(copied(m, 1 + a[0]->u.s.n / 8));
                *out = latin1_bytes(m, a[0]);
                if (*out) return nested_bytes(m, *out, NULL);
            }
            break;
        case CK_TAG_COPYREG_RECONSTRUCTOR:
            if (n == 3 && a[0]->kind == CKPT_V_GLOBAL) {
                mark_called(m, a[0], NULL);
                *out = new_object(m, a[0], NULL);
                return *out ? 0 : OOM();
            }
            break;
        case CK_TAG_COPYREG_NEWOBJ: /* __newobj__(cls, *args); not of itself: no chains */
            if (n >= 1 && a[0]->kind == CKPT_V_GLOBAL && a[0]->gid != CK_TAG_COPYREG_NEWOBJ) {
                CK_TRY(copied(m, n));
                ckpt_value *rest = new_seq_from(m, CKPT_V_TUPLE, a + 1, n - 1);
                if (!rest) return OOM();
                pin_all(a + 1, n - 1);
                return apply(m, a[0], rest, out);
            }
            break;
        default:
            if (callable->gid >= CK_TAG_HOOK && m->u->hooks.reduce) {
                r = m->u->hooks.reduce(m->u->hooks.ud, m, callable, args, false, out);
                if (r == 0 && m->consumed != args) pin(*out); /* may be one of its arguments */
                if (r <= 0) return r;
                /* declined: an inert object, marked when find_class said why */
                if (!(*out = new_object(m, callable, args))) return OOM();
                (*out)->u.obj->refused = callable->u.g->note;
                return 0;
            }
            break;
        }
    }
    *out = new_object(m, callable, args);
    return *out ? 0 : OOM();
}

/* NEWOBJ cls(*args): like REDUCE for what we interpret, but a dict or list
 * subclass created this way stays an object that gets items later. */
static int newobj(machine *m, ckpt_value *cls, ckpt_value *args, ckpt_value **out)
{
    if (args->kind != CKPT_V_TUPLE) return PFAIL("NEWOBJ arguments are not a tuple");
    if (cls->kind == CKPT_V_GLOBAL &&
        (cls->gid == CK_TAG_ORDEREDDICT || cls->gid == CK_TAG_DICT ||
         cls->gid == CK_TAG_DEFAULTDICT || cls->gid == CK_TAG_SET || cls->gid == CK_TAG_FROZENSET ||
         cls->gid == CK_TAG_LIST || cls->gid == CK_TAG_TUPLE))
        return apply(m, cls, args, out);
    if (cls->kind == CKPT_V_GLOBAL && cls->gid >= CK_TAG_HOOK && m->u->hooks.reduce) {
        mark_called(m, cls, args);
        int r = m->u->hooks.reduce(m->u->hooks.ud, m, cls, args, true, out);
        if (r == 0 && m->consumed != args) pin(*out);
        if (r <= 0) return r;
    }
    mark_called(m, cls, args);
    *out = new_object(m, cls, args);
    return *out ? 0 : OOM();
}

/* ---- mutation opcodes -------------------------------------------------- */

static int append_to(machine *m, ckpt_value *target, ckpt_value *item)
{
    if (target->kind == CKPT_V_LIST) {
        if (ck_seq_push(m->u, target, item)) return OOM();
        return 0;
    }
    if (target->kind == CKPT_V_OBJECT) {
        if (!target->u.obj->list && !(target->u.obj->list = ck_new(m->u, CKPT_V_LIST)))
            return OOM();
        if (ck_seq_push(m->u, target->u.obj->list, item)) return OOM();
        return 0;
    }
    return PFAIL("APPEND to a %s", ckpt_kind_name((ckpt_kind)target->kind));
}

static int setitem(machine *m, ckpt_value *target, ckpt_value *k, ckpt_value *v)
{
    ckpt_value *d = target;
    if (target->kind == CKPT_V_OBJECT) {
        if (!target->u.obj->items && !(target->u.obj->items = new_dict(m, NULL))) return OOM();
        d = target->u.obj->items;
    } else if (target->kind == CKPT_V_GLOBAL) {
        return act_on_global(m, "SETITEM", target);
    } else if (target->kind != CKPT_V_DICT) {
        return PFAIL("SETITEM on a %s", ckpt_kind_name((ckpt_kind)target->kind));
    }
    if (ck_seq_push(m->u, d, k) || ck_seq_push(m->u, d, v)) return OOM();
    return 0;
}

static int build(machine *m, ckpt_value *target, ckpt_value *state)
{
    switch (target->kind) {
    case CKPT_V_OBJECT:
        target->u.obj->state = state; /* last BUILD wins, as __setstate__ would */
        return 0;
    case CKPT_V_DICT:   /* OrderedDict's _metadata and friends: attributes */
    case CKPT_V_TENSOR: /* Tensor.__setstate__: requires_grad, hooks: ignored */
    case CKPT_V_LIST:
    case CKPT_V_SET: return 0;
    case CKPT_V_GLOBAL: return act_on_global(m, "BUILD", target);
    default: return PFAIL("BUILD on a %s", ckpt_kind_name((ckpt_kind)target->kind));
    }
}

/* A fast_call stands for at most this many opcodes, and pushes at most
 * this many stack entries and marks (run() offers it a call only within
 * both limits, so that it never has to report one). */
#define FAST_OPS 256u
#define FAST_DEPTH 96u

/* ---- the loop ---------------------------------------------------------- */

static int run(machine *m, ckpt_value **result)
{
    uint64_t ops = 0;
    const uint64_t max_ops = m->u->opt->max_ops;
    for (;;) {
        m->opp = m->p;
        if (m->p >= m->drop_at) {
            if (m->stream) { /* the next window, WIN_SLACK before this one ends */
                if (win_more(m)) CK_TRY(win_load(m, win_pos(m, m->p), 0));
            } else if (m->kept) {
                ck_pages_discard(m->kept, (size_t)(m->p - m->kept));
                m->kept = m->p;
                m->drop_at =
                    (size_t)(m->end - m->p) > CK_DISCARD_STEP ? m->p + CK_DISCARD_STEP : m->end;
            }
        }
        if (m->p >= m->end) {
            if (m->in->more) {
                m->need_more = 1;
                return -1;
            }
            return PFAIL("pickle ends without STOP");
        }
        if (++ops > max_ops)
            return FAIL(CKPT_E_LIMIT, "more than %llu pickle opcodes (max_ops)",
                        (unsigned long long)m->u->opt->max_ops);
        uint8_t op = *m->p++;
        ckpt_value *v = NULL, *a, *b;
        size_t base = 0;
        const char *s = NULL; /* set by line() before use; -O2 cannot tell */
        size_t n = 0;
        switch (op) {
        case '.': /* STOP */
            if (!(v = pop(m))) return -1;
            *result = v;
            return 0;
        case '(': /* MARK */
            if (m->elide && m->sp > fence(m) && (v = m->stack[m->sp - 1])->kind == CKPT_V_GLOBAL &&
                v->gid == m->u->hooks.fast_gid && v->gid >= CK_TAG_HOOK && m->u->hooks.fast_call &&
                ops + FAST_OPS <= max_ops &&
                (uint64_t)m->sp + m->nmarks + FAST_DEPTH < m->max_stack) {
                m->fast_ops = 0;
                int r = m->u->hooks.fast_call(m->u->hooks.ud, m, v, &b);
                if (r < 0) return -1;
                if (r == 0) { /* the call made: its result stands for the callable */
                    m->stack[m->sp - 1] = b;
                    ops += m->fast_ops;
                    break;
                }
                m->opp = m->p - 1;
            }
            if ((uint64_t)m->sp + m->nmarks >= m->u->opt->max_stack)
                return FAIL(CKPT_E_LIMIT, "pickle stack deeper than %u (max_stack)",
                            m->u->opt->max_stack);
            CK_TRY(mgrow(m, (void **)&m->marks, &m->mcap, m->nmarks + 1, sizeof *m->marks));
            m->marks[m->nmarks++] = m->sp;
            break;
        case '0': /* POP */
            if (m->nmarks && m->marks[m->nmarks - 1] == m->sp)
                m->nmarks--;
            else if (!pop(m))
                return -1;
            break;
        case '1': /* POP_MARK */
            CK_TRY(pop_mark(m, &base));
            m->sp = base;
            break;
        case '2': /* DUP */
            if (!(v = top(m))) return -1;
            pin(v);
            CK_TRY(push(m, v));
            break;
        case 'N': CK_TRY(push(m, new_none(m))); break;
        case 0x88: CK_TRY(push(m, new_bool(m, true))); break;
        case 0x89: CK_TRY(push(m, new_bool(m, false))); break;
        case 'I': /* INT */
            CK_TRY(line(m, &s, &n));
            if (n == 2 && s[0] == '0' && s[1] == '0')
                v = new_bool(m, false);
            else if (n == 2 && s[0] == '0' && s[1] == '1')
                v = new_bool(m, true);
            else
                CK_TRY(parse_decimal(m, s, n, &v));
            CK_TRY(push(m, v));
            break;
        case 'L': /* LONG */
            CK_TRY(line(m, &s, &n));
            if (n && s[n - 1] == 'L') n--;
            CK_TRY(parse_decimal(m, s, n, &v));
            CK_TRY(push(m, v));
            break;
        case 'J':
            CK_TRY(need(m, 4));
            CK_TRY(push(m, new_int(m, (int32_t)ck_le32(m->p))));
            m->p += 4;
            break;
        case 'K':
            CK_TRY(need(m, 1));
            CK_TRY(push(m, new_int(m, m->p[0])));
            m->p += 1;
            break;
        case 'M':
            CK_TRY(need(m, 2));
            CK_TRY(push(m, new_int(m, ck_le16(m->p))));
            m->p += 2;
            break;
        case 0x8a: /* LONG1 */
            CK_TRY(need(m, 1));
            n = m->p[0];
            CK_TRY(need(m, 1 + n));
            CK_TRY(parse_long_bytes(m, m->p + 1, n, &v));
            m->p += 1 + n;
            CK_TRY(push(m, v));
            break;
        case 0x8b: { /* LONG4 */
            CK_TRY(need(m, 4));
            int32_t ln = (int32_t)ck_le32(m->p);
            if (ln < 0) return PFAIL("LONG4 with negative length");
            CK_TRY(need(m, 4 + (size_t)ln));
            CK_TRY(parse_long_bytes(m, m->p + 4, (size_t)ln, &v));
            m->p += 4 + (size_t)ln;
            CK_TRY(push(m, v));
            break;
        }
        case 'F': { /* FLOAT */
            CK_TRY(line(m, &s, &n));
            char tmp[128];
            if (n == 0 || n >= sizeof tmp) return PFAIL("bad FLOAT text");
            memcpy(tmp, s, n);
            tmp[n] = 0;
            char *e;
            double d = strtod(tmp, &e);
            if (*e) return PFAIL("bad FLOAT text");
            v = ck_new(m->u, CKPT_V_FLOAT);
            if (v) v->u.f = d;
            CK_TRY(push(m, v));
            break;
        }
        case 'G': { /* BINFLOAT: big-endian double */
            CK_TRY(need(m, 8));
            uint64_t u = 0;
            for (int i = 0; i < 8; i++) u = (u << 8) | m->p[i];
            double d;
            memcpy(&d, &u, 8);
            m->p += 8;
            v = ck_new(m->u, CKPT_V_FLOAT);
            if (v) v->u.f = d;
            CK_TRY(push(m, v));
            break;
        }
        case 'S': /* STRING */
            CK_TRY(line(m, &s, &n));
            CK_TRY(quoted_string(m, s, n, &v));
            CK_TRY(push(m, v));
            break;
        case 'V': /* UNICODE */
            CK_TRY(line(m, &s, &n));
            CK_TRY(push(m, raw_unicode(m, s, n)));
            break;
        case 'T':
        case 'X':
        case 'B':
        case 0x8d:
        case 0x8e:
        case 0x96:
        case 'U':
        case 'C':
        case 0x8c: { /* length-prefixed strings and bytes */
            size_t w = (op == 'U' || op == 'C' || op == 0x8c)     ? 1
                       : (op == 0x8d || op == 0x8e || op == 0x96) ? 8
                                                                  : 4;
            CK_TRY(need(m, w));
            uint64_t len = w == 1 ? m->p[0] : w == 4 ? ck_le32(m->p) : ck_le64(m->p);
            if (op == 'T' && len > INT32_MAX) return PFAIL("BINSTRING with negative length");
            if (len > m->u->opt->max_pickle_bytes)
                return FAIL(CKPT_E_LIMIT,
                            "string of %llu bytes exceeds the pickle size limit (max_pickle_bytes)",
                            (unsigned long long)len);
            CK_TRY(need(m, w + (size_t)len));
            ckpt_kind k =
                (op == 'B' || op == 'C' || op == 0x8e || op == 0x96) ? CKPT_V_BYTES : CKPT_V_STR;
            const uint8_t *sp = m->p + w;
            if (k == CKPT_V_BYTES && len >= 3 && sp[0] == 0x80 && sp[1] <= 5 && sp[len - 1] == '.')
                CK_TRY(ck_note(m->u,
                               "%s: bytes at byte %lld hold a pickle (a pickle inside a pickle)",
                               m->in->label, (long long)op_pos(m)));
            CK_TRY(push(m, ck_new_str(m->u, k, (const char *)sp, (size_t)len)));
            if (k == CKPT_V_BYTES) CK_TRY(nested_bytes(m, m->stack[m->sp - 1], NULL));
            m->p += w + (size_t)len;
            break;
        }
        case ')': CK_TRY(push(m, ck_new(m->u, CKPT_V_TUPLE))); break;
        case ']': CK_TRY(push(m, ck_new(m->u, CKPT_V_LIST))); break;
        case '}': CK_TRY(push(m, new_dict(m, NULL))); break;
        case 0x8f: CK_TRY(push(m, ck_new(m->u, CKPT_V_SET))); break;
        case 't':
        case 'l':
        case 0x91:
        case 'd': { /* TUPLE LIST FROZENSET DICT */
            CK_TRY(pop_mark(m, &base));
            size_t cnt = m->sp - base;
            if (op == 'd' && cnt % 2) return PFAIL("DICT with an odd number of items");
            v = new_seq_from(m,
                             op == 'd'   ? CKPT_V_DICT
                             : op == 't' ? CKPT_V_TUPLE
                             : op == 'l' ? CKPT_V_LIST
                                         : CKPT_V_SET,
                             cnt ? m->stack + base : NULL, cnt); /* no stack yet: "(t" */
            if (!v) return OOM();
            m->sp = base;
            CK_TRY(push(m, v));
            break;
        }
        case 0x85:
        case 0x86:
        case 0x87: { /* TUPLE1..3 */
            size_t cnt = (size_t)(op - 0x84);
            if (m->sp < fence(m) + cnt) return PFAIL("stack underflow");
            v = new_seq_from(m, CKPT_V_TUPLE, m->stack + m->sp - cnt, cnt);
            if (!v) return OOM();
            m->sp -= cnt;
            CK_TRY(push(m, v));
            break;
        }
        case 'a': /* APPEND */
            if (!(b = pop(m)) || !(a = top(m))) return -1;
            CK_TRY(append_to(m, a, b));
            break;
        case 'e': /* APPENDS */
            CK_TRY(pop_mark(m, &base));
            if (base == 0 || base <= fence(m)) return PFAIL("APPENDS without a list");
            a = m->stack[base - 1];
            if (a->kind == CKPT_V_LIST) { /* the batch at once: no doubling waste */
                if (m->sp > base) {       /* an empty batch may meet a list with no items yet */
                    if (ck_seq_room(m->u, a, m->sp - base, false)) return OOM();
                    memcpy(a->u.seq.v + a->u.seq.n, m->stack + base,
                           (m->sp - base) * sizeof *m->stack);
                    a->u.seq.n += m->sp - base;
                }
            } else {
                for (size_t i = base; i < m->sp; i++) CK_TRY(append_to(m, a, m->stack[i]));
            }
            m->sp = base;
            break;
        case 's': /* SETITEM */
            if (!(b = pop(m)) || !(a = pop(m)) || !(v = top(m))) return -1;
            CK_TRY(setitem(m, v, a, b));
            break;
        case 'u': /* SETITEMS */
            CK_TRY(pop_mark(m, &base));
            if (base == 0 || base <= fence(m)) return PFAIL("SETITEMS without a dict");
            if ((m->sp - base) % 2) return PFAIL("SETITEMS with an odd number of items");
            a = m->stack[base - 1];
            if (a->kind == CKPT_V_DICT) { /* the batch at once: no doubling waste */
                if (m->sp > base) {       /* an empty batch may meet a list with no items yet */
                    if (ck_seq_room(m->u, a, m->sp - base, false)) return OOM();
                    memcpy(a->u.seq.v + a->u.seq.n, m->stack + base,
                           (m->sp - base) * sizeof *m->stack);
                    a->u.seq.n += m->sp - base;
                }
            } else {
                for (size_t i = base; i < m->sp; i += 2)
                    CK_TRY(setitem(m, a, m->stack[i], m->stack[i + 1]));
            }
            m->sp = base;
            break;
        case 0x90: /* ADDITEMS */
            CK_TRY(pop_mark(m, &base));
            if (base == 0 || base <= fence(m)) return PFAIL("ADDITEMS without a set");
            a = m->stack[base - 1];
            if (a->kind != CKPT_V_SET)
                return PFAIL("ADDITEMS to a %s", ckpt_kind_name((ckpt_kind)a->kind));
            for (size_t i = base; i < m->sp; i++)
                if (ck_seq_push(m->u, a, m->stack[i])) return OOM();
            m->sp = base;
            break;
        case 'b': /* BUILD */
            if (!(b = pop(m)) || !(a = top(m))) return -1;
            CK_TRY(build(m, a, b));
            break;
        case 'p': { /* PUT */
            CK_TRY(line(m, &s, &n));
            CK_TRY(parse_decimal(m, s, n, &v));
            if (v->kind != CKPT_V_INT || v->u.i < 0) return PFAIL("bad PUT key");
            CK_TRY(memo_put(m, (uint64_t)v->u.i));
            break;
        }
        case 'q':
            CK_TRY(need(m, 1));
            CK_TRY(memo_put(m, m->p[0]));
            m->p += 1;
            break;
        case 'r':
            CK_TRY(need(m, 4));
            CK_TRY(memo_put(m, ck_le32(m->p)));
            m->p += 4;
            break;
        case 0x94: CK_TRY(memo_put(m, m->mcount)); break; /* MEMOIZE */
        case 'g': {                                       /* GET */
            CK_TRY(line(m, &s, &n));
            CK_TRY(parse_decimal(m, s, n, &v));
            if (v->kind != CKPT_V_INT || v->u.i < 0) return PFAIL("bad GET key");
            CK_TRY(memo_get(m, (uint64_t)v->u.i));
            break;
        }
        case 'h':
            CK_TRY(need(m, 1));
            {
                uint8_t k = m->p[0];
                m->p += 1;
                CK_TRY(memo_get(m, k));
            }
            break;
        case 'j':
            CK_TRY(need(m, 4));
            {
                uint32_t k = ck_le32(m->p);
                m->p += 4;
                CK_TRY(memo_get(m, k));
            }
            break;
        case 'c':
        case 'i': { /* GLOBAL, INST */
            const char *mod = NULL, *name = NULL;
            size_t mn = 0, nn = 0;
            CK_TRY(line(m, &mod, &mn));
            size_t mod_at = (size_t)((const uint8_t *)mod - m->opp); /* a refill moves it */
            CK_TRY(line(m, &name, &nn));
            mod = (const char *)m->opp + mod_at;
            CK_TRY(make_global(m, mod, mn, name, nn));
            if (op == 'i') {
                ckpt_value *cls = m->stack[--m->sp];
                CK_TRY(pop_mark(m, &base));
                ckpt_value *args = ck_new(m->u, CKPT_V_TUPLE);
                if (!args) return OOM();
                for (size_t i = base; i < m->sp; i++)
                    if (ck_seq_push(m->u, args, m->stack[i])) return OOM();
                m->sp = base;
                CK_TRY(apply(m, cls, args, &v));
                CK_TRY(push(m, v));
            }
            break;
        }
        case 0x93: /* STACK_GLOBAL */
            if (!(b = pop(m)) || !(a = pop(m))) return -1;
            if (a->kind != CKPT_V_STR || b->kind != CKPT_V_STR)
                return PFAIL("STACK_GLOBAL needs two strings");
            CK_TRY(make_global(m, a->u.s.p, a->u.s.n, b->u.s.p, b->u.s.n));
            break;
        case 'o': { /* OBJ */
            CK_TRY(pop_mark(m, &base));
            if (m->sp == base) return PFAIL("OBJ without a class");
            ckpt_value *cls = m->stack[base];
            ckpt_value *args = ck_new(m->u, CKPT_V_TUPLE);
            if (!args) return OOM();
            for (size_t i = base + 1; i < m->sp; i++)
                if (ck_seq_push(m->u, args, m->stack[i])) return OOM();
            m->sp = base;
            CK_TRY(apply(m, cls, args, &v));
            CK_TRY(push(m, v));
            break;
        }
        case 'R': /* REDUCE */
            if (!(b = pop(m)) || !(a = pop(m))) return -1;
            b = spare_args(m, a, b);
            m->consumed = NULL;
            CK_TRY(apply(m, a, b, &v));
            if (m->elide && m->consumed == b) reclaim(m, b, v, 0);
            CK_TRY(push(m, v));
            break;
        case 0x81: /* NEWOBJ */
            if (!(b = pop(m)) || !(a = pop(m))) return -1;
            b = spare_args(m, a, b);
            m->consumed = NULL;
            CK_TRY(newobj(m, a, b, &v));
            if (m->elide && m->consumed == b) reclaim(m, b, v, 0);
            CK_TRY(push(m, v));
            break;
        case 0x92: { /* NEWOBJ_EX */
            ckpt_value *kw;
            if (!(kw = pop(m)) || !(b = pop(m)) || !(a = pop(m))) return -1;
            if (kw->kind != CKPT_V_DICT) return PFAIL("NEWOBJ_EX keywords are not a dict");
            CK_TRY(newobj(m, a, b, &v));
            if (v->kind == CKPT_V_OBJECT && kw->u.seq.n) v->u.obj->items = kw;
            CK_TRY(push(m, v));
            break;
        }
        case 'P':   /* PERSID */
        case 'Q': { /* BINPERSID */
            ckpt_value *pid;
            if (op == 'P') {
                CK_TRY(line(m, &s, &n));
                pid = ck_new_str(m->u, CKPT_V_STR, s, n);
                if (!pid) return OOM();
            } else if (!(pid = pop(m))) {
                return -1;
            }
            if (!m->u->hooks.persistent_load)
                return PFAIL("persistent id in a pickle that cannot have one");
            v = m->u->hooks.persistent_load(m->u->hooks.pl_ud, pid, op_pos(m), m->err);
            if (!v) return -1;
            if (v->kind != CKPT_V_STORAGE) /* the pid or a part of it: kept */
                pin(v);
            else if (m->elide) /* a new storage value: the pid was read, nothing kept */
                reclaim(m, pid, v, 0);
            CK_TRY(push(m, v));
            break;
        }
        case 0x80: /* PROTO */
            CK_TRY(need(m, 1));
            if (m->p[0] > 5) return PFAIL("unsupported pickle protocol %u", m->p[0]);
            if (m->proto_seen++)
                CK_TRY(ck_note(m->u, "%s: PROTO opcode again at byte %lld", m->in->label,
                               (long long)op_pos(m)));
            m->proto = m->p[0];
            m->p += 1;
            break;
        case 0x95: /* FRAME: a hint, the data follows inline */
            CK_TRY(need(m, 8));
            m->p += 8;
            break;
        case 0x82:
        case 0x83:
        case 0x84: { /* EXT1 EXT2 EXT4 */
            size_t w = op == 0x82 ? 1 : op == 0x83 ? 2 : 4;
            char what[48];
            CK_TRY(need(m, w));
            uint32_t code = w == 1 ? m->p[0] : w == 2 ? ck_le16(m->p) : ck_le32(m->p);
            snprintf(what, sizeof what, "EXT%zu code %ld", w,
                     w == 4 ? (long)(int32_t)code : (long)code);
            CK_TRY(record_act(m, what));
            return FAIL(CKPT_E_UNSUPPORTED, "pickle uses the extension registry (opcode 0x%02x)",
                        op);
        }
        case 0x97: /* NEXT_BUFFER */
            return FAIL(CKPT_E_UNSUPPORTED, "pickle needs an out-of-band buffer");
        case 0x98: /* READONLY_BUFFER */
            if (!top(m)) return -1;
            break;
        default: return PFAIL("unknown pickle opcode 0x%02x", op);
        }
    }
}

int ck_pickle_run(ck_unpickler *u, const ck_pickle_in *in, ckpt_value **out, size_t *used,
                  ckpt_error *err)
{
    machine m;
    memset(&m, 0, sizeof m);
    m.u = u;
    m.in = in;
    m.no_args.kind = CKPT_V_TUPLE;
    m.no_args.aux2 = PINNED;
    m.max_stack = u->opt->max_stack;
    m.memo_limit = (uint64_t)u->opt->max_memo + in->len;
    m.opp = m.p = m.wbase = in->buf;
    m.err = err;
    m.end = in->buf ? in->buf + in->len : NULL; /* (streamed: no window yet) */
    m.stream = in->src != NULL;
    ckpt_value *res = NULL;
    size_t first_global = u->nglobals, first_nested = u->nnested;
    ck_mem_allow(u->arena, u->opt->max_memory, u->input_size, u->pickle_bytes + in->len);
    int r = 0;
    if (m.stream) {
        if (in->more || in->base < 0)
            return ck_fail(err, CKPT_E_ARG, -1, "a streamed pickle needs its offset and length");
        m.wstep = !in->window ? WIN_STEP : in->window < WIN_MIN ? WIN_MIN : in->window;
        r = win_load(&m, 0, 0);
    }
    /* scanners keep pointers to bytes values (u->nested): no elision */
    /* every pickle held whole, small ones too: the fuzz targets and tests
     * then run the same machine that reads big checkpoints */
    if (r == 0 && !in->more && !u->opt->scan_all_pickles) r = prescan(&m);
    if (m.stream) { /* the run reads it again from its first byte */
        if (r == 0 && m.woff != 0) r = win_load(&m, 0, 0);
        m.p = m.opp = m.win;
    } else {
        m.drop_at = m.end; /* never (run() stops at the end first), unless: */
        if (in->discard && !in->more && in->len > 2 * CK_DISCARD_STEP) {
            m.kept = in->buf;
            m.drop_at = in->buf + CK_DISCARD_STEP;
        }
    }
    if (r == 0) r = run(&m, &res);
    if (r == -1 && m.need_more) r = 1;
    if (r == 1) u->nnested = first_nested; /* the retry records them again */
    if (r != 1 && u->hooks.on_global)      /* final: tell the scanner what it named */
        for (size_t i = first_global; i < u->nglobals; i++)
            u->hooks.on_global(u->hooks.on_global_ctx, &u->globals[i]);
    if (r == 0) {
        *out = res;
        *used = (size_t)win_pos(&m, m.p);
        u->pickle_bytes += *used;
    }
    free(m.stack);
    free(m.marks);
    free(m.mvals);
    free(m.fetched);
    free(m.rank);
    free(m.putbits);
    free(m.win);
    ck_mem_release(
        u->arena,
        (uint64_t)m.wcap + (uint64_t)m.scap * sizeof *m.stack + (uint64_t)m.mcap * sizeof *m.marks +
            (uint64_t)m.mcap2 * sizeof *m.mvals + (uint64_t)m.cap_fw * sizeof *m.fetched +
            (uint64_t)m.cap_rank * sizeof *m.rank + (uint64_t)m.cap_pw * sizeof *m.putbits);
    return r;
}

/* ---- services for hooks -------------------------------------------------- */

ck_unpickler *ck_machine_unpickler(ck_machine *m)
{
    return m->u;
}
int64_t ck_machine_pos(const ck_machine *m)
{
    return op_pos(m);
}
ckpt_error *ck_machine_err(ck_machine *m)
{
    return m->err;
}

int ck_machine_fail(ck_machine *m, ckpt_code code, const char *fmt, ...)
{
    char buf[sizeof((ckpt_error *)0)->message];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    return ck_fail(m->err, code, op_pos(m), "%s", buf);
}

int ck_machine_copied(ck_machine *m, uint64_t words)
{
    return copied(m, words);
}
int ck_machine_apply(ck_machine *m, ckpt_value *callable, ckpt_value *args, ckpt_value **out)
{
    return apply(m, callable, args, out);
}
int ck_machine_seq_from(ck_machine *m, ckpt_kind kind, ckpt_value *src, ckpt_value **out)
{
    return seq_from(m, kind, src, out);
}
const uint8_t *ck_machine_rest(const ck_machine *m, const uint8_t **end)
{
    *end = m->end;
    return m->p;
}

ckpt_value *ck_machine_memo_at(ck_machine *m, uint64_t key)
{
    return memo_cached(m, key);
}

bool ck_machine_puts_idle(const ck_machine *m, const uint64_t *keys, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (!put_idle(m, keys[i])) return false;
    return true;
}

void ck_machine_at(ck_machine *m, const uint8_t *op)
{
    m->opp = op;
}

void ck_machine_skip(ck_machine *m, const uint8_t *to, uint64_t ops, const uint64_t *keys,
                     size_t nkeys)
{
    for (size_t i = 0; i < nkeys; i++) note_put(m, keys[i]); /* as memo_put() does */
    m->p = to;
    m->fast_ops += ops;
}

void ck_machine_called(ck_machine *m, const ckpt_value *g)
{
    mark_called(m, g, NULL);
}

void ck_machine_consumed(ck_machine *m, const ckpt_value *args)
{
    m->consumed = (ckpt_value *)args;
}

void ck_unpickler_free(ck_unpickler *u)
{
    free(u->globals);
    free(u->notes);
    free(u->nested);
    u->globals = NULL;
    u->notes = NULL;
    u->nested = NULL;
    u->nnested = u->cap_nested = 0;
    u->nglobals = u->cap_globals = u->nnotes = u->cap_notes = 0;
}
