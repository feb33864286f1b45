/*
 * text.c - how text from a file is shown: one escaper for every table,
 * tree and message of the reading commands, a name filter, sizes for people.
 *
 * The escaping is reversible and visible (see cli_escape() in cli.h):
 *   \\            a backslash
 *   \" (quoted)   a double quote inside "..."
 *   \n \r \t      those control characters
 *   \xHH          any other C0 control, DEL, and every byte that is not part
 *                 of valid UTF-8 (every byte >= 0x80 for a bytes value)
 *   \uXXXX        a valid UTF-8 character that changes what a terminal shows
 *                 without being seen: C1 controls (U+0080-U+009F, U+009B is
 *                 CSI on some terminals), bidi overrides and isolates
 *                 (U+061C, U+200E-U+200F, U+202A-U+202E, U+2066-U+2069),
 *                 zero-width characters (U+200B-U+200D, U+2060-U+2064,
 *                 U+FEFF) and the line/paragraph separators U+2028/U+2029
 * Everything else (printable ASCII, any other valid UTF-8) is written as it is.
 */
#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L
#endif

#include "cli.h"

#include <fnmatch.h>
#include <stdlib.h>
#include <string.h>

static uint32_t utf8_decode(const unsigned char *s, size_t k)
{
    switch (k) {
    case 2: return ((uint32_t)(s[0] & 0x1F) << 6) | (s[1] & 0x3Fu);
    case 3:
        return ((uint32_t)(s[0] & 0x0F) << 12) | ((uint32_t)(s[1] & 0x3F) << 6) |
               (s[2] & 0x3Fu);
    case 4:
        return ((uint32_t)(s[0] & 0x07) << 18) | ((uint32_t)(s[1] & 0x3F) << 12) |
               ((uint32_t)(s[2] & 0x3F) << 6) | (s[3] & 0x3Fu);
    default: return s[0];
    }
}

/* Valid UTF-8 characters that a terminal acts on or hides. */
static int invisible(uint32_t c)
{
    return (c >= 0x80 && c <= 0x9F) || c == 0x061C || (c >= 0x200B && c <= 0x200F) ||
           (c >= 0x2028 && c <= 0x202E) || (c >= 0x2060 && c <= 0x2064) ||
           (c >= 0x2066 && c <= 0x2069) || c == 0xFEFF;
}

size_t cli_escape(sbuf *b, const char *str, size_t n, size_t limit, unsigned flags)
{
    const unsigned char *s = (const unsigned char *)str;
    size_t i = 0, run = 0, k;
    char tmp[16];
    if (limit > n)
        limit = n;
    while (i < limit) {
        unsigned c = s[i];
        const char *esc = NULL;
        if (c >= 0x20 && c < 0x7f && c != '\\' && !(c == '"' && (flags & CLI_ESC_QUOTED))) {
            i++;
            continue;
        }
        k = 1;
        if (c >= 0x80 && !(flags & CLI_ESC_BYTES) && (k = cli_utf8_seq(s + i, n - i)) > 0) {
            uint32_t cp = utf8_decode(s + i, k);
            if (i + k > limit)
                break; /* do not cut a character */
            if (!invisible(cp)) {
                i += k;
                continue;
            }
            snprintf(tmp, sizeof tmp, "\\u%04x", (unsigned)cp);
            esc = tmp;
        } else {
            k = 1;
            switch (c) {
            case '\\': esc = "\\\\"; break;
            case '"': esc = "\\\""; break;
            case '\n': esc = "\\n"; break;
            case '\r': esc = "\\r"; break;
            case '\t': esc = "\\t"; break;
            default:
                snprintf(tmp, sizeof tmp, "\\x%02x", c);
                esc = tmp;
                break;
            }
        }
        sb_add(b, s + run, i - run);
        sb_str(b, esc);
        i += k;
        run = i;
    }
    sb_add(b, s + run, i - run);
    return i;
}

/* Columns of UTF-8 text: one per character. */
static size_t columns(const char *s, size_t n)
{
    size_t w = 0, i;
    for (i = 0; i < n; i++)
        if (((unsigned char)s[i] & 0xC0) != 0x80)
            w++;
    return w;
}

/* Length of s when it is plain printable ASCII without '\\' (shown as it
 * is: the common case, no allocation), else (size_t)-1. */
static size_t plain_len(const char *s)
{
    size_t i;
    for (i = 0; s[i]; i++)
        if ((unsigned char)s[i] < 0x20 || (unsigned char)s[i] >= 0x7f || s[i] == '\\')
            return (size_t)-1;
    return i;
}

size_t cli_term_width(const char *s)
{
    sbuf b;
    size_t w = plain_len(s);
    if (w != (size_t)-1)
        return w;
    memset(&b, 0, sizeof b);
    cli_escape(&b, s, strlen(s), (size_t)-1, 0);
    w = b.p ? columns(b.p, b.len) : strlen(s);
    sb_free(&b);
    return w;
}

size_t cli_term_put(FILE *out, const char *s)
{
    sbuf b;
    size_t n = plain_len(s), w;
    if (n != (size_t)-1) {
        fwrite(s, 1, n, out);
        return n;
    }
    n = strlen(s);
    memset(&b, 0, sizeof b);
    cli_escape(&b, s, n, (size_t)-1, 0);
    if (b.oom || !b.p) { /* out of memory: still no raw control byte */
        size_t i;
        for (i = 0; i < n; i++)
            putc((unsigned char)s[i] < 0x20 || s[i] == 0x7f ? '?' : s[i], out);
        sb_free(&b);
        return n;
    }
    fwrite(b.p, 1, b.len, out);
    w = columns(b.p, b.len);
    sb_free(&b);
    return w;
}

int cli_utf8_valid(const char *str, size_t n)
{
    const unsigned char *s = (const unsigned char *)str;
    size_t i = 0, k;
    while (i < n) {
        if (s[i] < 0x80) {
            i++;
            continue;
        }
        if ((k = cli_utf8_seq(s + i, n - i)) == 0)
            return 0;
        i += k;
    }
    return 1;
}

void cli_base64(FILE *out, const void *data, size_t n)
{
    static const char a[] =
        "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    const unsigned char *p = data;
    size_t i;
    for (i = 0; i + 2 < n; i += 3) {
        putc(a[p[i] >> 2], out);
        putc(a[((p[i] & 3) << 4) | (p[i + 1] >> 4)], out);
        putc(a[((p[i + 1] & 15) << 2) | (p[i + 2] >> 6)], out);
        putc(a[p[i + 2] & 63], out);
    }
    if (n - i == 1) {
        putc(a[p[i] >> 2], out);
        putc(a[(p[i] & 3) << 4], out);
        fputs("==", out);
    } else if (n - i == 2) {
        putc(a[p[i] >> 2], out);
        putc(a[((p[i] & 3) << 4) | (p[i + 1] >> 4)], out);
        putc(a[(p[i + 1] & 15) << 2], out);
        putc('=', out);
    }
}

void cli_json_name(FILE *out, const char *field, const char *s)
{
    size_t n = strlen(s);
    fprintf(out, "\"%s\": ", field);
    cli_json_string(out, s, n);
    if (!cli_utf8_valid(s, n)) {
        fprintf(out, ", \"%s_bytes\": \"", field);
        cli_base64(out, s, n);
        putc('"', out);
    }
}

int cli_name_matches(const char *glob, const char *name)
{
    return glob == NULL || fnmatch(glob, name, 0) == 0;
}

const char *cli_human_size(uint64_t x, char *buf, size_t cap)
{
    static const char *const units[] = {"KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
    double v;
    size_t u = 0;
    if (x < 1024) {
        snprintf(buf, cap, "%llu B", (unsigned long long)x);
        return buf;
    }
    v = (double)x / 1024.0;
    while (v >= 1023.95 && u + 1 < sizeof units / sizeof units[0]) {
        v /= 1024.0;
        u++;
    }
    snprintf(buf, cap, "%.1f %s", v, units[u]);
    return buf;
}

int cli_report(const char *path, const ckpt_error *err)
{
    return cli_file_error(path, err); /* escapes both */
}

int cli_note(const char *path, const char *what)
{
    fputs("ckpt: ", stderr);
    cli_term_put(stderr, path);
    fputs(": ", stderr);
    fputs(what, stderr);
    fputc('\n', stderr);
    return CLI_OK;
}
