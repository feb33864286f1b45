/*
 * safetensors.h - the pieces of the safetensors format `ckpt convert` needs:
 * dtype names, a growing text buffer for the JSON header, string escaping
 * and a set of strings (names must be unique).
 *
 * A safetensors file is: an unsigned 64-bit little-endian N; N bytes of
 * UTF-8 JSON {"__metadata__": {str: str, ...}, NAME: {"dtype": "F32",
 * "shape": [..], "data_offsets": [BEGIN, END]}, ...}, padded with spaces;
 * then the tensor bytes (row-major, little-endian), offsets relative to the
 * end of the header, covering the data with no hole and no overlap.
 */
#ifndef CKPT_SAFETENSORS_H
#define CKPT_SAFETENSORS_H

#include <stddef.h>
#include <stdint.h>

#include "ckpt.h"
#include "cli.h"

/* The reference reader (the Rust `safetensors` crate) refuses bigger headers. */
#define ST_MAX_HEADER 100000000u
/* The data starts at a multiple of this (8 + N is padded to it). */
#define ST_ALIGN 8u

/* safetensors' name for a dtype ("F32", "BF16", "F8_E4M3", ...), or NULL
 * when safetensors has none (complex, float8 fnuz, float8_e8m0fnu). */
const char *st_dtype_name(ckpt_dtype dtype);

void st_put_u64(sbuf *b, uint64_t x);
void st_put_i64(sbuf *b, int64_t x);

/* Append s[0..n) made valid UTF-8: valid sequences are kept, every other
 * byte becomes the character U+00XX (the byte read as latin-1), the rule
 * cli_json_string() follows. */
void st_put_utf8(sbuf *b, const char *s, size_t n);

/* Append s[0..n), which must be valid UTF-8, as a JSON string with quotes:
 * '"', '\\' and control characters escaped. */
void st_put_json_string(sbuf *b, const char *s, size_t n);

/* A set of byte strings.  The strings are not copied: they must outlive the
 * set. */
typedef struct st_set {
    const char **keys;
    size_t *lens;
    size_t cap, count;
} st_set;

/* 1 if s[0..n) was added, 0 if it was already there, -1 out of memory. */
int st_set_add(st_set *s, const char *key, size_t n);
void st_set_free(st_set *s);

#endif /* CKPT_SAFETENSORS_H */
