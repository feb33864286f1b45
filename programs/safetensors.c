/*
 * safetensors.c - dtype names, JSON text and a string set for the
 * safetensors writer of `ckpt convert`.
 */
#include "safetensors.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

const char *st_dtype_name(ckpt_dtype dtype)
{
    switch (dtype) {
    case CKPT_FLOAT64: return "F64";
    case CKPT_FLOAT32: return "F32";
    case CKPT_FLOAT16: return "F16";
    case CKPT_BFLOAT16: return "BF16";
    case CKPT_INT64: return "I64";
    case CKPT_INT32: return "I32";
    case CKPT_INT16: return "I16";
    case CKPT_INT8: return "I8";
    case CKPT_UINT8: return "U8";
    case CKPT_BOOL: return "BOOL";
    case CKPT_UINT16: return "U16";
    case CKPT_UINT32: return "U32";
    case CKPT_UINT64: return "U64";
    case CKPT_FLOAT8_E4M3FN: return "F8_E4M3";
    case CKPT_FLOAT8_E5M2: return "F8_E5M2";
    case CKPT_COMPLEX64:
    case CKPT_COMPLEX128:
    case CKPT_COMPLEX32:
    case CKPT_FLOAT8_E4M3FNUZ:
    case CKPT_FLOAT8_E5M2FNUZ:
    case CKPT_FLOAT8_E8M0FNU:
        break;
    }
    return NULL;
}

/* ---- buffer ---------------------------------------------------------------- */

void st_put_u64(sbuf *b, uint64_t x)
{
    char tmp[24];
    int n = snprintf(tmp, sizeof tmp, "%llu", (unsigned long long)x);
    sb_add(b, tmp, (size_t)n);
}

void st_put_i64(sbuf *b, int64_t x)
{
    char tmp[24];
    int n = snprintf(tmp, sizeof tmp, "%lld", (long long)x);
    sb_add(b, tmp, (size_t)n);
}


/* ---- text ------------------------------------------------------------------ */

void st_put_utf8(sbuf *b, const char *str, size_t n)
{
    const unsigned char *s = (const unsigned char *)str;
    size_t i = 0, run = 0;
    while (i < n) {
        size_t k;
        char two[2];
        if (s[i] < 0x80) {
            i++;
            continue;
        }
        if ((k = cli_utf8_seq(s + i, n - i)) > 0) {
            i += k;
            continue;
        }
        sb_add(b, str + run, i - run);
        two[0] = (char)(0xC0 | (s[i] >> 6));
        two[1] = (char)(0x80 | (s[i] & 0x3F));
        sb_add(b, two, 2);
        i++;
        run = i;
    }
    sb_add(b, str + run, n - run);
}

void st_put_json_string(sbuf *b, const char *str, size_t n)
{
    const unsigned char *s = (const unsigned char *)str;
    size_t i, run = 0;
    char tmp[8];
    sb_char(b, '"');
    for (i = 0; i < n; i++) {
        unsigned c = s[i];
        const char *esc;
        if (c >= 0x20 && c != '"' && c != '\\')
            continue;
        sb_add(b, str + run, i - run);
        switch (c) {
        case '"': esc = "\\\""; break;
        case '\\': esc = "\\\\"; break;
        case '\n': esc = "\\n"; break;
        case '\r': esc = "\\r"; break;
        case '\t': esc = "\\t"; break;
        case '\b': esc = "\\b"; break;
        case '\f': esc = "\\f"; break;
        default:
            snprintf(tmp, sizeof tmp, "\\u%04x", c);
            esc = tmp;
            break;
        }
        sb_str(b, esc);
        run = i + 1;
    }
    sb_add(b, str + run, n - run);
    sb_char(b, '"');
}

/* ---- string set -------------------------------------------------------------- */

static size_t str_hash(const char *s, size_t n)
{
    uint64_t h = 0xcbf29ce484222325ULL;
    size_t i;
    for (i = 0; i < n; i++) {
        h ^= (unsigned char)s[i];
        h *= 0x100000001b3ULL;
    }
    h ^= h >> 29;
    return (size_t)h;
}

static int set_grow(st_set *s)
{
    size_t cap = s->cap ? s->cap * 2 : 256, i, j, mask = cap - 1;
    const char **keys = calloc(cap, sizeof *keys);
    size_t *lens = calloc(cap, sizeof *lens);
    if (!keys || !lens) {
        free(keys);
        free(lens);
        return -1;
    }
    for (j = 0; j < s->cap; j++) {
        if (!s->keys[j])
            continue;
        for (i = str_hash(s->keys[j], s->lens[j]) & mask; keys[i] != NULL;
             i = (i + 1) & mask)
            ;
        keys[i] = s->keys[j];
        lens[i] = s->lens[j];
    }
    free(s->keys);
    free(s->lens);
    s->keys = keys;
    s->lens = lens;
    s->cap = cap;
    return 0;
}

int st_set_add(st_set *s, const char *key, size_t n)
{
    size_t i, mask;
    if ((s->count + 1) * 2 > s->cap && set_grow(s) != 0)
        return -1;
    mask = s->cap - 1;
    for (i = str_hash(key, n) & mask; s->keys[i] != NULL; i = (i + 1) & mask)
        if (s->lens[i] == n && memcmp(s->keys[i], key, n) == 0)
            return 0;
    s->keys[i] = key;
    s->lens[i] = n;
    s->count++;
    return 1;
}

void st_set_free(st_set *s)
{
    free(s->keys);
    free(s->lens);
    memset(s, 0, sizeof s[0]);
}
