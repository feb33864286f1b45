/*
 * json_in.h - layer 4 (formats): JSON input (shard indexes, safetensors
 * headers) through Debian's jansson, bounded: the text's size and its
 * nesting depth are checked before jansson runs, duplicate keys and NUL
 * characters are refused, errors are one line with a byte offset.
 * Not installed.
 */
#ifndef CKPT_JSON_IN_H
#define CKPT_JSON_IN_H

#include "../common/common.h"

#include <jansson.h>

/* Parse buf[0..n) (JSON text, nothing after it but whitespace).  `base`:
 * file offset of buf[0], for errors; `what` names the input ("index file",
 * "safetensors header").  n must be at most max_bytes and the nesting at
 * most max_depth.  Returns a new reference (json_decref it) or NULL + err. */
json_t *ck_json_parse(const char *buf, size_t n, uint64_t max_bytes, uint32_t max_depth,
                      int64_t base, const char *what, ckpt_error *err);

/* A non-negative JSON integer: true and *out. */
bool ck_json_u64(const json_t *v, uint64_t *out);

#endif
