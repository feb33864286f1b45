/*
 * ckpt_text.h - text from a file made safe to show, and the value tree as
 * the indented text of `ckpt show`.
 *
 * Built only on the public API of ckpt.h (and ckpt_walk.h).  Nothing here
 * allocates except ckpt_value_to_text(); nothing prints.
 *
 * Escaping (ckpt_escape()) is reversible and visible; it is what `ckpt`
 * applies to every string from a file that reaches a terminal:
 *   \\            a backslash
 *   \"            a double quote, with CKPT_ESCAPE_QUOTED only
 *   \n \r \t      those control characters
 *   \xHH          any other C0 control (U+0000-U+001F), DEL (0x7F), and
 *                 every byte that is not part of valid UTF-8 (with
 *                 CKPT_ESCAPE_BYTES: every byte >= 0x80)
 *   \uXXXX        a valid UTF-8 character that changes what a terminal shows
 *                 without being seen: C1 controls (U+0080-U+009F), bidi
 *                 marks, overrides and isolates (U+061C, U+200E-U+200F,
 *                 U+202A-U+202E, U+2066-U+2069), zero-width characters
 *                 (U+200B-U+200D, U+2060-U+2064, U+FEFF) and the line and
 *                 paragraph separators U+2028, U+2029
 * HH and XXXX are lowercase hex.  Everything else (printable ASCII, any
 * other valid UTF-8 character) is written as it is.  Valid UTF-8 excludes
 * overlong forms, surrogates (U+D800-U+DFFF) and code points past U+10FFFF.
 */
#ifndef CKPT_TEXT_H
#define CKPT_TEXT_H

#include "ckpt.h"

#ifdef __cplusplus
extern "C" {
#endif

#define CKPT_ESCAPE_QUOTED 1u /* the text goes inside "...": '"' as \" */
#define CKPT_ESCAPE_BYTES 2u  /* a bytes value: every byte >= 0x80 as \xHH */

/* The longest piece ckpt_escape() writes for one character ("\u202e"). */
#define CKPT_ESCAPE_UNIT_MAX 6

/* Escape s[0..n) into out[0..cap) as described above, then a '\0'.
 *
 * At most `limit` bytes of s are read ((size_t)-1: all of them); a valid
 * UTF-8 character that would cross `limit` is left out whole, never cut.
 * Only whole pieces are written: when the next escape or character does not
 * fit in the cap - 1 bytes left for text, the call stops before it.
 * *consumed (when not NULL) receives the bytes of s that the written text
 * stands for: when it is less than min(n, limit) the text was cut (by limit
 * or by cap); to go on, call again with s + *consumed, n - *consumed,
 * limit - *consumed.  With cap > CKPT_ESCAPE_UNIT_MAX every call consumes at
 * least one character unless limit or n is reached, so a call that
 * consumes nothing marks the end.
 *
 * out may be NULL (cap is then ignored): nothing is written, and the return
 * value and *consumed are those of an unbounded buffer (a measure).
 * Returns the bytes written to out, without the '\0'. */
CKPT_API size_t ckpt_escape(char *out, size_t cap, const char *s, size_t n, size_t limit,
                            unsigned flags, size_t *consumed);

/* Columns the escaped form of s[0..n) takes on a terminal, counting one per
 * character (an escape is ASCII: one per byte; wide characters count 1). */
CKPT_API size_t ckpt_escape_width(const char *s, size_t n, unsigned flags);

/* Length (1-4) of the valid UTF-8 character at s[0..n), or 0 when the bytes
 * there are not one (n == 0, a stray or missing continuation byte, an
 * overlong form, a surrogate, past U+10FFFF). */
CKPT_API size_t ckpt_utf8_seq(const char *s, size_t n);

/* Nonzero when s[0..n) is valid UTF-8 (n == 0 included). */
CKPT_API int ckpt_utf8_valid(const char *s, size_t n);

/* The base64 (RFC 4648, '+' '/', '=' padding) of data[0..n) and a '\0'
 * into out, when the 4 * ceil(n / 3) + 1 bytes fit in cap; otherwise
 * nothing (out[0] = '\0' when cap > 0).  out may be NULL to measure.
 * Returns the length of the encoding, without the '\0'. */
CKPT_API size_t ckpt_base64(char *out, size_t cap, const void *data, size_t n);

/* s[0..n) as the inside of a JSON string (without the quotes) into
 * out[0..cap), then a '\0': what every JSON output of ckpt writes for text
 * from a file.  Valid UTF-8 is kept as it is, but for the characters
 * ckpt_escape() writes as \uXXXX (C1 controls, bidi, zero-width, line and
 * paragraph separators), which are \uXXXX here too, so that JSON on a
 * terminal cannot rewrite it either; '"', '\\', \b \f \n \r \t as such,
 * other C0 controls (NUL too) and DEL as \u00XX; a byte
 * that is not valid UTF-8 as a lone low surrogate \udcXX, as Python's
 * "surrogateescape" writes it: json.loads(...).encode("utf-8",
 * "surrogateescape") gives back every byte.  Any JSON parser reads the same
 * text as the unescaped form.  Pieces are written whole, *consumed and a
 * NULL out as ckpt_escape() (no limit).  Returns the bytes written. */
CKPT_API size_t ckpt_json_escape(char *out, size_t cap, const char *s, size_t n, size_t *consumed);

/* The name filter of every ckpt command (--filter GLOB) and of
 * ckpt_export_options.filter: nonzero when GLOB matches name[0..len) by
 * fnmatch(3) without flags ('*' matches '.' too), or matches its escaped
 * form (ckpt_escape(), as 'ckpt ls' shows it: "w\x00evil"), which is the
 * only form a name holding a NUL byte is matched in.  A NULL glob matches
 * every name. */
CKPT_API int ckpt_name_match(const char *glob, const char *name, size_t len);

/* The key path of tensor t (listed by f) for a message: each part of its
 * name (ckpt_tensor_name_parts()) escaped with CKPT_ESCAPE_QUOTED inside
 * ["..."], e.g. ["model"]["fc.weight"] for {'model': {'fc.weight': t}} and
 * ["model.fc.weight"] for {'model.fc.weight': t}, which are both named
 * "model.fc.weight"; "(root)" for a tensor at the root.  Written into
 * out[0..cap) (cap at least 16), cut with "..." when it does not fit.
 * 0, or -1 with err filled (what ckpt_tensor_name_parts() refuses). */
CKPT_API int ckpt_tensor_path_text(const ckpt_file *f, const ckpt_tensor *t, char *out, size_t cap,
                                   ckpt_error *err);

/* ------------------------------------------------------------------------ */
/* The value tree as text (what `ckpt show` prints)                           */
/* ------------------------------------------------------------------------ */

typedef struct ckpt_text_options {
    size_t struct_size; /* set by ckpt_text_options_init() */
    uint32_t max_depth; /* indentation levels at most; a container that would
                           go deeper fails with CKPT_E_LIMIT "nesting deeper
                           than N".  Default 1000, at most 1000 (0: default) */
} ckpt_text_options;

/* Fill `opt` with the defaults; use the macro (see "ABI" in ckpt.h). */
CKPT_API void ckpt_text_options_init_sized(ckpt_text_options *opt, size_t struct_size);
#define ckpt_text_options_init(opt) ckpt_text_options_init_sized((opt), sizeof *(opt))

/* Write `v` (NULL: the root) of file f as an indented tree through `write`
 * (returns 0 on success; it gets the text in pieces of about 64 KiB, each
 * ending at the end of a line).  opt may be NULL for the defaults; nothing
 * is written when v is NULL and the file has no root.
 *
 * One line per value, "LABEL: VALUE", two spaces of indentation per level:
 *   epoch: 7
 *   model:
 *     fc.weight: tensor float32 [3, 4]
 *   args: argparse.Namespace(...)
 *     lr: 0.1
 *   history: [0.5, 0.25]
 *   groups: list (2 items)
 *     [0]:
 *       params: [0, 1]
 *     [1]: <ref groups.0>
 * - Labels: a dict's str key as it is when escaping leaves it unchanged and
 *   it is 1-200 bytes; other keys as the scalar would be shown, a tuple of
 *   at most 16 one-line scalars as "(a, b)" / "(a,)", anything else
 *   "<key N>" (N its position).  Sequence items "[N]"; an object's parts
 *   "args", "state", "items", "list".
 * - Scalars: None, True/False, ints (all digits), floats as Python's repr
 *   (ckpt_float_repr), strings "..." and bytes b"..." escaped with
 *   CKPT_ESCAPE_QUOTED (and CKPT_ESCAPE_BYTES), cut after 200 (bytes: 64)
 *   bytes as "..."... (N bytes)".
 * - A dict: "LABEL:" then its entries one level deeper ("{}" when empty);
 *   the root dict's entries (and root sequence's items) at the margin.
 * - A list, tuple or set of scalars (strings of at most 40 bytes) on one
 *   line, Python-style ("[1, 2]", "(1,)", "{1}", "set()"), its first 16
 *   items then ", ...] (N items)"; any other "list (N items)" and its
 *   items below.
 * - An object "module.Class(ARGS)" with its args inline when they are at
 *   most 16 one-line scalars, else "(...)" and "args:" below; a dict state
 *   (the usual __dict__) as the object's own entries, any other state as
 *   "state:"; then "items:", "list:".
 * - tensor DTYPE [SHAPE], "storage KEY" (key cut at 200 bytes), "global
 *   module.name", "<kind>" for anything else.
 * - A container met again (shared or cyclic) "<ref PATH>": PATH joins the
 *   labels of its first occurrence with '.', "(root)" for the root; a dict
 *   state's path is its object's.  PATH is cut after 1000 bytes (never
 *   inside a character) and ends "..." then.
 * All text from the file is escaped (ckpt_escape()), so a line never holds
 * a control character.  Bounds: one line per value visited (ckpt_walk.h:
 * each container once, scalars at every reference); a line holds 2 x depth
 * bytes of indentation, then at most about 6 KiB (keys, strings, one-line
 * sequences and ref paths are cut as above) plus, whole, the class or global
 * name it shows, escaped; memory about 1 KiB per container.
 *
 * Returns 0, or -1 with err filled: CKPT_E_LIMIT "nesting deeper than N",
 * CKPT_E_NOMEM, CKPT_E_IO when write failed, CKPT_E_ARG.  The whole lines
 * before a failure have been written (but for CKPT_E_IO). */
CKPT_API int ckpt_value_to_text(const ckpt_file *f, const ckpt_value *v,
                                int (*write)(void *ctx, const char *s, size_t n), void *ctx,
                                const ckpt_text_options *opt, ckpt_error *err);

#ifdef __cplusplus
}
#endif

#endif /* CKPT_TEXT_H */
