/*
 * json_in.c - layer 4 (formats): bounded JSON input through jansson
 * (json_in.h).  jansson is a strict RFC 8259 parser; what it does not bound
 * (the text's size, nesting up to its own 2048) is bounded here first.
 */
#include "json_in.h"

#include <string.h>

/* The deepest nesting of [ and { outside strings, stopping past `limit`. */
static uint32_t nesting(const char *p, size_t n, uint32_t limit, size_t *where)
{
    uint32_t depth = 0, max = 0;
    bool in_str = false;
    for (size_t i = 0; i < n; i++) {
        char c = p[i];
        if (in_str) {
            if (c == '\\')
                i++;
            else if (c == '"')
                in_str = false;
        } else if (c == '"') {
            in_str = true;
        } else if (c == '[' || c == '{') {
            if (++depth > max) max = depth;
            if (max > limit) {
                *where = i;
                return max;
            }
        } else if ((c == ']' || c == '}') && depth) {
            depth--;
        }
    }
    return max;
}

json_t *ck_json_parse(const char *buf, size_t n, uint64_t max_bytes, uint32_t max_depth,
                      int64_t base, const char *what, ckpt_error *err)
{
    if (n > max_bytes) {
        ck_fail(err, CKPT_E_LIMIT, base, "%s of %zu bytes is larger than the limit of %llu bytes",
                what, n, (unsigned long long)max_bytes);
        return NULL;
    }
    size_t where = 0;
    if (nesting(buf, n, max_depth, &where) > max_depth) {
        ck_fail(err, CKPT_E_LIMIT, base + (int64_t)where, "%s nests deeper than %u levels", what,
                max_depth);
        return NULL;
    }
    json_error_t je;
    json_t *v = json_loadb(buf, n, JSON_REJECT_DUPLICATES, &je);
    if (!v) {
        int64_t pos = je.position >= 0 ? je.position : 0;
        /* jansson's position is just past what it read: point at the byte */
        if (pos > 0 && (size_t)pos <= n) pos--;
        ck_fail(err, CKPT_E_FORMAT, base + pos, "%s is not valid JSON: %s (line %d, column %d)",
                what, je.text, je.line, je.column);
        return NULL;
    }
    return v;
}

bool ck_json_u64(const json_t *v, uint64_t *out)
{
    if (!json_is_integer(v) || json_integer_value(v) < 0) return false;
    *out = (uint64_t)json_integer_value(v);
    return true;
}
