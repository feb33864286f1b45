/*
 * pickle.h - layer 2 of libckpt: a generic pickle machine.  Protocols 0-5,
 * stack, memo, limits, inert values.  It knows Python, not torch: what a
 * GLOBAL means beyond Python's builtins, what a persistent id stands for and
 * what a call to an unknown callable returns are asked of hooks, in the
 * manner of Python's Unpickler (find_class, persistent_load) plus `reduce`
 * (interpret a call, or decline and leave an inert object) and `on_global`.
 * A pickle held whole keeps only the memo entries a GET fetches, and gives
 * back the arguments of calls whose hook kept nothing of them
 * (ck_machine_consumed): see "memo elision" in pickle.c.
 * Needs only common/.  Not installed.
 */
#ifndef CKPT_PICKLE_H
#define CKPT_PICKLE_H

#include "../common/common.h"

/* ---- values ------------------------------------------------------------ */

/* What the machine itself understands of a GLOBAL (Python's builtins and
 * standard library).  A find_class hook may give any other global a tag
 * from CK_TAG_HOOK up; the machine hands calls of those to `reduce`. */
typedef enum ck_tag {
    CK_TAG_UNKNOWN = 0,
    CK_TAG_ORDEREDDICT,
    CK_TAG_DEFAULTDICT,
    CK_TAG_DICT,
    CK_TAG_LIST,
    CK_TAG_SET,
    CK_TAG_FROZENSET,
    CK_TAG_TUPLE,
    CK_TAG_CODECS_ENCODE,
    CK_TAG_BYTEARRAY,
    CK_TAG_BYTES,
    CK_TAG_COPYREG_RECONSTRUCTOR,
    CK_TAG_COPYREG_NEWOBJ,
    CK_TAG_HOOK = 32 /* first tag of a find_class hook */
} ck_tag;

/* The rarer parts of values live out of line, keeping a node at 32 bytes
 * (24 for a kind with no class: ck_node_size()). */
typedef struct ck_obj {
    ckpt_value *callable;
    ckpt_value *args, *state, *items, *list;
    const char *refused; /* set by a reduce hook that declines on purpose */
} ck_obj;
typedef struct ck_global {
    const char *module, *name;
    size_t gref;      /* index in the unpickler's globals */
    const char *note; /* what find_class attached (a layout name, ...) */
} ck_global;

/* The room of a LIST/TUPLE/SET/DICT array is not stored (a node is 32 bytes,
 * not 40): with CK_SEQ_EXACT in aux2 it is exactly u.seq.n items, else the
 * power of two (at least 4) at or above u.seq.n, 0 when u.seq.v is NULL.
 * Grow arrays only through ck_seq_push/ck_seq_room. */
#define CK_SEQ_EXACT 1u
struct ckpt_value {
    uint8_t kind;    /* ckpt_kind */
    uint8_t gid;     /* ck_tag (or a hook's tag) for GLOBAL */
    uint8_t aux;     /* GLOBAL: a hook's datum (a dtype, ...) */
    uint8_t aux2;    /* GLOBAL: a hook's flag; LIST/TUPLE/SET/DICT: CK_SEQ_EXACT */
    uint32_t id;     /* sequential per unpickler, for walks */
    union {
        bool b;
        int64_t i;
        double f;
        struct {
            char *p;
            size_t n;
        } s; /* STR BYTES BIGINT */
        struct {
            ckpt_value **v;
            size_t n;  /* room: see CK_SEQ_EXACT */
        } seq;         /* LIST TUPLE SET; DICT: 2n */
        ck_obj *obj;   /* OBJECT */
        ck_global *g;  /* GLOBAL */
        void *ext;     /* made by a hook (TENSOR) */
        size_t handle; /* made by a hook (STORAGE) */
    } u;
    /* DICT subclass / OBJECT class text / GLOBAL "mod.name": read for those
     * kinds only (ckpt_value_class()), for a string made by ck_new_str()
     * ends before it: its bytes start here (CK_STR_HDR) */
    const char *cls;
};

/* A string node of ck_new_str(): this header, then its bytes and a NUL. */
#define CK_STR_HDR offsetof(ckpt_value, cls)
#define CK_STR_INLINE(v) ((char *)(v) + CK_STR_HDR)
/* The bytes ck_new() gives a node of this kind: a value with no class (a
 * scalar, a string, a tensor, a storage) ends before cls.  A container
 * keeps the whole node (a copy sets its cls: multi.c). */
static inline size_t ck_node_size(unsigned kind)
{
    return kind == CKPT_V_LIST || kind == CKPT_V_TUPLE || kind == CKPT_V_DICT ||
                   kind == CKPT_V_SET || kind == CKPT_V_OBJECT || kind == CKPT_V_GLOBAL
               ? sizeof(ckpt_value)
               : CK_STR_HDR;
}

/* ---- the unpickler: what the pickles of one input share ----------------- */

typedef struct ck_unpickler ck_unpickler;
typedef struct ck_machine ck_machine; /* one running pickle (opaque) */

typedef struct ck_pickle_hooks {
    void *ud;
    /* Classify a GLOBAL the machine does not know (module and name set, gid
     * CK_TAG_UNKNOWN): set gid >= CK_TAG_HOOK, aux, aux2, u.g->note. */
    void (*find_class)(void *ud, ckpt_value *g);
    /* callable(*args) for a callable with a hook tag.  `newobj`: from NEWOBJ.
     * 0 with *out: interpreted; 1: declined (an inert OBJECT is made);
     * -1: error (set through ck_machine_fail). */
    int (*reduce)(void *ud, ck_machine *m, ckpt_value *callable, ckpt_value *args, bool newobj,
                  ckpt_value **out);
    /* A persistent id: the value it stands for, or NULL + err.  NULL hook:
     * persistent ids are an error. */
    ckpt_value *(*persistent_load)(void *pl_ud, ckpt_value *pid, int64_t pos, ckpt_error *err);
    void *pl_ud;
    /* Told of every global a pickle named, once the pickle is done. */
    void (*on_global)(void *ctx, const ckpt_global_ref *g);
    void *on_global_ctx;
    /* A fast path for one call a pickle makes over and over (torch's
     * tensor rebuild): when MARK follows a GLOBAL of tag fast_gid (>=
     * CK_TAG_HOOK) on the stack, and the machine elides the memo (the
     * whole pickle is in memory), fast_call may read the call's bytes
     * itself (ck_machine_rest()) and stand for every opcode up to the
     * call's REDUCE: 0 with *out (the call's result: it replaces the
     * callable on the stack; the bytes consumed and the opcodes counted
     * with ck_machine_skip()), 1 declined (nothing changed: the machine
     * runs the opcodes itself), -1 error.  It must decline whatever it
     * does not read exactly as the machine would. */
    uint8_t fast_gid;
    int (*fast_call)(void *ud, ck_machine *m, ckpt_value *callable, ckpt_value **out);
} ck_pickle_hooks;

/* For scanners (options.scan_all_pickles): a bytes value that may be a
 * pickle another load would run: it begins with PROTO, or it is an argument
 * of a call (`callee` "module.name", else NULL).  formats/nested.c scans
 * them once the file's own pickles are done. */
typedef struct ck_nested {
    const ckpt_value *bytes;
    const char *label; /* the pickle that made it */
    int64_t pos;       /* input offset of the opcode that made it */
    const char *callee;
} ck_nested;

struct ck_unpickler {
    ck_arena *arena;         /* values live here */
    const ckpt_options *opt; /* limits: max_ops, max_stack, max_entries,
                                   max_pickle_bytes, max_expansion, max_memory */
    uint64_t input_size;     /* bytes of the whole input (copy budget, memory) */
    ck_pickle_hooks hooks;
    uint32_t next_id;
    uint64_t copies;          /* words copied out of shared values, all pickles */
    uint64_t pickle_bytes;    /* bytes of the pickles run so far */
    ckpt_global_ref *globals; /* every global named, in order */
    size_t nglobals, cap_globals;
    const char **notes;
    size_t nnotes, cap_notes;
    ck_nested *nested; /* for scanners: bytes that may be pickles */
    size_t nnested, cap_nested;
};

void ck_unpickler_free(ck_unpickler *u); /* the globals and notes arrays */

/* One pickle: in memory (buf), or read from a source (src) through a
 * window the machine reuses, so that a 90 MB pickle costs a window's pages,
 * not its own size in freshly zeroed ones. */
typedef struct ck_pickle_in {
    const uint8_t *buf; /* NULL when src is set */
    size_t len;
    /* src: the pickle is bytes [base, base + len) of src, read in windows
     * (prescan() and run() each read it once); base must be >= 0, more
     * unset.  The window grows to hold an opcode that does not fit, so an
     * opcode's bytes are always contiguous, as in memory. */
    const ck_source *src;
    size_t window;     /* src: the bytes a window reads at least (0: 256 KiB) */
    bool more;         /* the pickle may continue past len (stream) */
    int64_t base;      /* input offset of buf[0] (for errors); -1 unknown */
    const char *label; /* "data.pkl", "legacy:object", ... */
    /* buf is the caller's own memory (malloc'd, or a read-only file map)
     * that nothing reads once the run is over: the machine gives its pages
     * back behind it as it goes (ck_pages_discard), so a big pickle and the
     * values it makes are not resident at once.  Only a pickle held whole. */
    bool discard;
    /* The pickle's bytes end at len (a ZIP record): the memo prescan may
     * read all of them, past STOP too, without parsing (prescan_bytes()). */
    bool bounded;
} ck_pickle_in;

/* Run one pickle.  Returns 0 and *out, *used (bytes consumed incl. STOP);
 * 1 when the buffer ended before STOP and in->more is set (retry with more
 * bytes; undo what the attempt recorded with ck_unpickler_mark/rewind);
 * -1 on error. */
int ck_pickle_run(ck_unpickler *u, const ck_pickle_in *in, ckpt_value **out, size_t *used,
                  ckpt_error *err);

/* ---- services of the running machine, for hooks ------------------------- */
ck_unpickler *ck_machine_unpickler(ck_machine *m);
int64_t ck_machine_pos(const ck_machine *m); /* input offset of the opcode */
ckpt_error *ck_machine_err(ck_machine *m);   /* where the run reports errors */
/* Fail at the current opcode: fills the error, returns -1. */
int ck_machine_fail(ck_machine *m, ckpt_code code, const char *fmt, ...) CK_PRINTF(3, 4);
/* Charge `words` copied out of shared values against the expansion budget. */
int ck_machine_copied(ck_machine *m, uint64_t words);
/* callable(*args) as REDUCE would do it (hooks included). */
int ck_machine_apply(ck_machine *m, ckpt_value *callable, ckpt_value *args, ckpt_value **out);
/* A new LIST/TUPLE/SET with the items of src (a list, tuple or set):
 * 0 and *out, 1 when src is none of those, -1 error. */
int ck_machine_seq_from(ck_machine *m, ckpt_kind kind, ckpt_value *src, ckpt_value **out);
/* Told by a reduce hook that its result is a new value and that it kept no
 * pointer to `args` or anything in it: the machine may give them back once
 * the call returns (when it elides the memo: see pickle.c). */
void ck_machine_consumed(ck_machine *m, const ckpt_value *args);
/* For fast_call (see ck_pickle_hooks): the bytes after the current opcode,
 * to *end. */
const uint8_t *ck_machine_rest(const ck_machine *m, const uint8_t **end);
/* The value a GET of `key` would push now, or NULL (no such entry). */
ckpt_value *ck_machine_memo_at(ck_machine *m, uint64_t key);
/* Whether a PUT of each of keys[0..n) would keep nothing and cannot fail:
 * memo elision on, the key within the limit and its bookkeeping, and no
 * GET of this pickle fetches it. */
bool ck_machine_puts_idle(const ck_machine *m, const uint64_t *keys, size_t n);
/* Errors and ck_machine_pos() at the opcode at `op` (in the rest). */
void ck_machine_at(ck_machine *m, const uint8_t *op);
/* Consume the rest up to `to` as `ops` opcodes, among them idle PUTs of
 * keys[0..nkeys) (ck_machine_puts_idle()), in order.  Cannot fail. */
void ck_machine_skip(ck_machine *m, const uint8_t *to, uint64_t ops, const uint64_t *keys,
                     size_t nkeys);
/* A call of global g was made (for the scanner's report), as REDUCE says. */
void ck_machine_called(ck_machine *m, const ckpt_value *g);
/* Whether v may be reachable from more than one place (memoized under a key
 * a GET fetches, DUPed, copied into a second container, returned by a hook);
 * false only for a value that one container or call alone holds. */
bool ck_value_shared(const ckpt_value *v);

/* ---- values: constructors and helpers ------------------------------------ */
ckpt_value *ck_new(ck_unpickler *u, ckpt_kind kind);
ckpt_value *ck_new_str(ck_unpickler *u, ckpt_kind kind, const char *p, size_t n);
/* append to LIST/TUPLE/SET/DICT storage */
int ck_seq_push(ck_unpickler *u, ckpt_value *v, ckpt_value *item);
/* Room for `more` further items of a LIST/TUPLE/SET/DICT (0, or -1 on OOM),
 * which the caller then stores at u.seq.v[u.seq.n..] AT ONCE, adding `more`
 * to u.seq.n: `exact` (and any fill of an empty array) gets exactly that
 * room, else it grows by powers of two, in place when the array is the
 * arena's latest allocation. */
int ck_seq_room(ck_unpickler *u, ckpt_value *v, size_t more, bool exact);
/* The items a LIST/TUPLE/SET/DICT array has room for (see CK_SEQ_EXACT). */
size_t ck_seq_cap(const ckpt_value *v);
bool ck_as_int(const ckpt_value *v, int64_t *out);
bool ck_is_str(const ckpt_value *v, const char *s);
/* Python's str.encode('latin-1') of the n bytes of UTF-8 text s: the bytes
 * into o (room for n) and their count, or SIZE_MAX when a character is
 * past U+00FF (or s is not UTF-8). */
size_t ck_latin1_encode(const char *s, size_t n, char *o);
/* STR or BYTES equal to s.  Inline: s is nearly always a literal, whose
 * length and comparison the compiler then folds. */
static inline bool ck_is_text(const ckpt_value *v, const char *s)
{
    return v && (v->kind == CKPT_V_STR || v->kind == CKPT_V_BYTES) && strlen(s) == v->u.s.n &&
           memcmp(v->u.s.p, s, v->u.s.n) == 0;
}
/* d[key] for a DICT with STR keys, or NULL. */
const ckpt_value *ck_dict_get(const ckpt_value *d, const char *key);
/* Add a note (kept with the unpickler; at most 1000).  0, or -1 on OOM. */
int ck_note(ck_unpickler *u, const char *fmt, ...) CK_PRINTF(2, 3);

#endif
