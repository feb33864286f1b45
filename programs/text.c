/*
 * text.c - how text from a file is shown: the library's escaper
 * (ckpt_escape(), ckpt_text.h, which states the rules) for every table,
 * tree and message of the reading commands, a name filter, sizes for people.
 */
#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L
#endif

#include "cli.h"

#include <fnmatch.h>
#include <stdlib.h>
#include <string.h>

size_t cli_escape(sbuf *b, const char *s, size_t n, size_t limit, unsigned flags)
{
    char tmp[1024];
    size_t done = 0, c, len;
    if (limit > n) limit = n;
    while (done < limit) {
        len = ckpt_escape(tmp, sizeof tmp, s + done, n - done, limit - done, flags, &c);
        sb_add(b, tmp, len);
        done += c;
        if (c == 0) break; /* a character crosses the limit */
    }
    return done;
}

size_t cli_term_width(const char *s)
{
    return ckpt_escape_width(s, strlen(s), 0);
}

size_t cli_term_put(FILE *out, const char *s)
{
    char tmp[1024];
    size_t n = strlen(s), done = 0, c, len, w = 0, i;
    while (done < n) {
        len = ckpt_escape(tmp, sizeof tmp, s + done, n - done, (size_t)-1, 0, &c);
        fwrite(tmp, 1, len, out);
        for (i = 0; i < len; i++) w += ((unsigned char)tmp[i] & 0xC0) != 0x80;
        done += c;
        if (c == 0) break;
    }
    return w;
}

int cli_utf8_valid(const char *s, size_t n)
{
    return ckpt_utf8_valid(s, n);
}

void cli_base64(FILE *out, const void *data, size_t n)
{
    const unsigned char *p = data;
    char tmp[1025];
    size_t k;
    while (n > 0) { /* whole groups of 3 bytes: the pieces join up */
        k = n < 768 ? n : 768;
        fwrite(tmp, 1, ckpt_base64(tmp, sizeof tmp, p, k), out);
        p += k;
        n -= k;
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
