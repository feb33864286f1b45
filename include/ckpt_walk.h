/*
 * ckpt_walk.h - one walk of the value tree, for every tool that visits it.
 *
 * Built only on the value accessors of ckpt.h.  The walk goes depth first,
 * in order: the items of a list, tuple or set, the values of a dict (its
 * keys are handed along, not walked), and the parts of an object in the
 * order args, state, items, list (absent parts are not visited).
 *
 * A container (list, tuple, set, dict, object) or a tensor met a second time
 * (a shared reference, or a cycle) is reported with `shared` set and not
 * entered again, so a walk visits each container's items once and takes
 * time linear in the value tree that ckpt_open() built (itself bounded by
 * the file's limits: max_ops, max_memory).  Scalars are visited at every
 * reference.
 *
 * Thread safety: a walk only reads the file and may run on several threads
 * at once for one file.
 */
#ifndef CKPT_WALK_H
#define CKPT_WALK_H

#include "ckpt.h"

#ifdef __cplusplus
extern "C" {
#endif

/* step->index of an object's parts. */
#define CKPT_WALK_ARGS 0
#define CKPT_WALK_STATE 1
#define CKPT_WALK_ITEMS 2
#define CKPT_WALK_LIST 3

/* Where the walk is: one step per level, linked to the enclosing
 * container's step, so that `parent` chains give the key/index path. */
typedef struct ckpt_walk_step {
    const ckpt_value *value;             /* may be NULL: an absent item */
    const struct ckpt_walk_step *parent; /* NULL for the value the walk starts at */
    const ckpt_value *key;               /* a dict's value: its key; else NULL */
    size_t index;                        /* position in the parent: item, dict
                                            entry, or object part (CKPT_WALK_ARGS..) */
    uint32_t depth;                      /* 0 for the start value */
    int shared;                          /* a container or tensor visited
                                            before: not entered again */
    int too_deep;                        /* a container at max_depth: not entered
                                            (only with skip_deep) */
    size_t id;                           /* containers and tensors: numbered
                                            0, 1, 2, ... at their first visit;
                                            a shared visit carries the number
                                            of the first (so a writer can point
                                            back to it); other values:
                                            CKPT_WALK_NO_ID */
} ckpt_walk_step;

#define CKPT_WALK_NO_ID ((size_t)-1)

/* enter() may return this to leave a container's contents unvisited. */
#define CKPT_WALK_SKIP 1

typedef struct ckpt_walk_callbacks {
    /* Every value reached, once per reference.  Return 0 to go on (into a
     * container), CKPT_WALK_SKIP to not enter this container, or a negative
     * number to stop the walk, which then returns that number (err is not
     * touched: the callback says why).  May be NULL. */
    int (*enter)(void *ctx, const ckpt_walk_step *step);
    /* After the contents of a container that was entered.  Same return
     * values (CKPT_WALK_SKIP is 0 here).  May be NULL. */
    int (*leave)(void *ctx, const ckpt_walk_step *step);
} ckpt_walk_callbacks;

typedef struct ckpt_walk_options {
    size_t struct_size;  /* set by ckpt_walk_options_init() */
    uint32_t max_depth;  /* containers at this depth are not entered; default
                            CKPT_DEFAULT_MAX_DEPTH (1000), at most 2048 (the
                            walk uses C stack) */
    uint64_t max_visits; /* values visited at most, 0: no limit (default) */
    int skip_deep;       /* 0: a container at max_depth fails the walk with
                            CKPT_E_LIMIT; 1: it is visited with too_deep set
                            and its contents skipped */
} ckpt_walk_options;

/* Fill `opt` with the defaults; use the macro (see "ABI" in ckpt.h). */
CKPT_API void ckpt_walk_options_init_sized(ckpt_walk_options *opt, size_t struct_size);
#define ckpt_walk_options_init(opt) ckpt_walk_options_init_sized((opt), sizeof *(opt))

/* Walk the values under `root` (NULL: ckpt_root(f)) of file f, calling cb
 * with ctx.  opt may be NULL for the defaults.  Returns 0 when the walk is
 * done; a callback's negative return value when it stopped the walk (err's
 * code is then CKPT_OK); or -1 with err filled: CKPT_E_LIMIT past max_depth
 * or max_visits, CKPT_E_NOMEM, CKPT_E_ARG. */
CKPT_API int ckpt_value_walk(const ckpt_file *f, const ckpt_value *root,
                             const ckpt_walk_callbacks *cb, void *ctx, const ckpt_walk_options *opt,
                             ckpt_error *err);

#ifdef __cplusplus
}
#endif

#endif /* CKPT_WALK_H */
