/*
 * ckpt_scan.h - safety verdicts for the globals a checkpoint's pickles name.
 *
 * Built only on the reader API of ckpt.h: the library runs every pickle of a
 * file without executing anything and reports each GLOBAL / STACK_GLOBAL
 * (resolved through the memo; at a protocol below 3 a Python 2 name renamed
 * as Python's unpickler renames it, through CPython's _compat_pickle
 * tables), and the acts it refuses
 * (BUILD/SETITEM on a global, EXT1/2/4) as globals of module "<pickle>",
 * always dangerous; this part classifies the names:
 *
 *   CKPT_VERDICT_SAFE       on the list torch.load(weights_only=True) accepts
 *                           by default (tensor rebuild functions, storage and
 *                           tensor classes, dtypes, OrderedDict, ...)
 *   CKPT_VERDICT_UNKNOWN    inert here, but torch.load(weights_only=False)
 *                           would import and call it (user classes, nn
 *                           modules of full-model saves, numpy objects, ...)
 *   CKPT_VERDICT_DANGEROUS  can run code, touch files or the network, or
 *                           load another pickle when unpickled
 *
 * One global is judged by its call, in a whole-file scan: numpy.memmap
 * (numpy.core.memmap.memmap, numpy._core.memmap.memmap) called with mode
 * 'w+' or 'r+' (numpy's default), with a mode that is not a constant
 * string, or in a pickle that also names functools.partial creates,
 * truncates or grows the file: DANGEROUS; with mode 'r'/'c' it maps the
 * file read-only: UNKNOWN; named and not called (ndarray.__reduce__ names
 * it for numpy's _reconstruct) UNKNOWN, as ckpt_global_verdict() says.
 *
 * A pickle found inside a bytes value counts only when the file hands the
 * bytes to a loader (pickle.loads, torch.storage._load_from_bytes,
 * io.BytesIO, ...): one kept as a plain bytes value that nothing
 * unpickles is listed with its items marked `unloaded` and a note, and
 * counted apart (ckpt_scan_unloaded()), as loading the file does not run
 * it.  A report that is not complete is never SAFE (ckpt_scan_verdict()).
 *
 * Thread safety: ckpt_global_verdict() may be called from any thread; a
 * report is immutable once returned and may be read from several threads.
 */
#ifndef CKPT_SCAN_H
#define CKPT_SCAN_H

#include "ckpt.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum ckpt_verdict {
    CKPT_VERDICT_SAFE = 0,
    CKPT_VERDICT_UNKNOWN = 1,
    CKPT_VERDICT_DANGEROUS = 2
} ckpt_verdict;

/* "safe", "unknown", "dangerous" ("?" for anything else). */
CKPT_API const char *ckpt_verdict_name(ckpt_verdict v);

/* The verdict for the global module.name as a pickle names it (`name` may
 * be dotted: protocol 4 resolves it attribute by attribute, so ("torch",
 * "serialization.os.system") is os.system).  *why (may be NULL) receives a
 * static one-line reason: the danger for DANGEROUS, the allowlist for SAFE,
 * "" for UNKNOWN.  Never NULL arguments but `why`. */
CKPT_API ckpt_verdict ckpt_global_verdict(const char *module, const char *name, const char **why);

/* Scan flags. */
#define CKPT_SCAN_STRICT                                                                           \
    1u /* unknown globals make the file flagged, as
                               torch's weights_only loader would refuse them */

/* One global reference met in a pickle of the file. */
typedef struct ckpt_scan_item {
    const char *module; /* as resolved by the pickle machine */
    const char *name;
    const char *pickle;   /* "data.pkl", "pickle", "pickle#2" (the second pickle
                             of a plain pickle file), a legacy stream's part,
                             "data.pkl#2" (after a record's STOP),
                             "data.pkl>bytes@N" (a pickle in a bytes value
                             made at byte N), "MEMBER>data.pkl" (a member of
                             an archive), "npy:pickle" (a numpy object
                             array)... */
    int64_t offset;       /* of the GLOBAL/STACK_GLOBAL opcode in the file
                             (in the inflated record for a deflated one) */
    int called;           /* REDUCE/NEWOBJ/INST/OBJ applied it */
    ckpt_verdict verdict; /* after the per-pickle rules (a functools.partial
                             in a pickle that names a dangerous callable is
                             dangerous) */
    const char *why;      /* static one-line reason, "" when none */
    int unloaded;         /* 1: in a pickle kept as a bytes value that nothing
                             in the file hands to a loader (it only begins
                             like a pickle): listed with its verdict, but
                             not counted by ckpt_scan_tally() nor the file's
                             verdict, as loading the file does not run it
                             (ckpt_scan_unloaded() counts these) */
} ckpt_scan_item;

typedef struct ckpt_scan_report ckpt_scan_report;

/* Scan a file: run every pickle (options' limits apply; its key,
 * skip_tensors and on_global are ignored) and classify every global.
 * Besides torch's containers and plain pickles this reads the pickle of a
 * numpy .npy object array, and, when the library was built with libarchive
 * (loaded with dlopen() only for such an archive, and closed after it),
 * every member of an archive that is not a torch.save file (a generic ZIP
 * or TAR, compressed TARs, 7z) as a file of its own; a member that cannot
 * be read or opened makes the report incomplete (ckpt_scan_error() names
 * it), and so does such an archive without libarchive, or when it cannot
 * be loaded.  A file
 * that breaks part way still gives a report: every global met before the
 * break, with ckpt_scan_error() saying what broke.  Returns NULL (and fills
 * err) only when no report can be made at all (out of memory).  `opt` may
 * be NULL for the defaults. */
CKPT_API ckpt_scan_report *ckpt_scan_path(const char *path, const ckpt_options *opt, unsigned flags,
                                          ckpt_error *err);
/* The same for bytes in memory (they must stay valid during the call). */
CKPT_API ckpt_scan_report *ckpt_scan_memory(const void *data, size_t size, const ckpt_options *opt,
                                            unsigned flags, ckpt_error *err);
/* The same through a reader (closed before the call returns). */
CKPT_API ckpt_scan_report *ckpt_scan_reader(const ckpt_reader *reader, const ckpt_options *opt,
                                            unsigned flags, ckpt_error *err);
CKPT_API void ckpt_scan_free(ckpt_scan_report *r);

/* The globals, in the order the pickles named them. */
CKPT_API size_t ckpt_scan_count(const ckpt_scan_report *r);
CKPT_API const ckpt_scan_item *ckpt_scan_at(const ckpt_scan_report *r, size_t i);

/* How many items have verdict v; called dangerous ones.  Neither counts
 * unloaded items (see ckpt_scan_item.unloaded). */
CKPT_API size_t ckpt_scan_tally(const ckpt_scan_report *r, ckpt_verdict v);
CKPT_API size_t ckpt_scan_called_dangerous(const ckpt_scan_report *r);
/* How many unloaded items have verdict v: globals of pickles that sit in
 * bytes values nothing in the file unpickles; a note names each such
 * pickle.  They make neither ckpt_scan_verdict() nor ckpt_scan_flagged(). */
CKPT_API size_t ckpt_scan_unloaded(const ckpt_scan_report *r, ckpt_verdict v);
/* The worst verdict met (SAFE when no global was met), but never SAFE for
 * a report that is not complete (ckpt_scan_error() non-NULL: the file, a
 * member or a pickle could not be read to its end, an encrypted or
 * unsupported member, ...): UNKNOWN then, unless something met is
 * DANGEROUS.  UNKNOWN for NULL. */
CKPT_API ckpt_verdict ckpt_scan_verdict(const ckpt_scan_report *r);
/* Nonzero when the file should be refused: something dangerous, or with
 * CKPT_SCAN_STRICT something unknown. */
CKPT_API int ckpt_scan_flagged(const ckpt_scan_report *r);
CKPT_API unsigned ckpt_scan_flags(const ckpt_scan_report *r);

/* NULL when every pickle was read to its end; else what stopped the read
 * (valid until ckpt_scan_free()). */
CKPT_API const ckpt_error *ckpt_scan_error(const ckpt_scan_report *r);
/* The container, when the file opened (else -1). */
CKPT_API int ckpt_scan_format(const ckpt_scan_report *r);
/* Oddities of the pickles (a second PROTO, data after STOP, ...) and of the
 * container (TorchScript code records are not scanned), one line each. */
CKPT_API size_t ckpt_scan_note_count(const ckpt_scan_report *r);
CKPT_API const char *ckpt_scan_note_at(const ckpt_scan_report *r, size_t i);

#ifdef __cplusplus
}
#endif

#endif /* CKPT_SCAN_H */
