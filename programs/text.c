/*
 * text.c - how text from a file is shown: the library's escaper
 * (ckpt_escape(), ckpt_text.h, which states the rules) for every table,
 * tree and message of the reading commands, a name filter, sizes for people.
 */
#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L
#endif

#include "cli.h"

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
    return cli_term_put_n(out, s, strlen(s));
}

size_t cli_term_put_n(FILE *out, const char *s, size_t n)
{
    char tmp[1024];
    size_t done = 0, c, len, w = 0, i;
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

void cli_json_name(FILE *out, const char *field, const char *s, size_t n)
{
    fprintf(out, "\"%s\": ", field);
    cli_json_string(out, s, n);
    if (!cli_utf8_valid(s, n)) {
        fprintf(out, ", \"%s_bytes\": \"", field);
        cli_base64(out, s, n);
        putc('"', out);
    }
}

int cli_name_matches(const char *glob, const char *name, size_t len)
{
    return ckpt_name_match(glob, name, len);
}

static int hexval(int c)
{
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

/* The value of the n hex digits at s, or -1. */
static long hexn(const char *s, int n)
{
    long v = 0;
    int i, d;
    for (i = 0; i < n; i++) {
        if ((d = hexval((unsigned char)s[i])) < 0) return -1;
        v = v * 16 + d;
    }
    return v;
}

char *cli_unescape(const char *s, size_t *len)
{
    size_t n = strlen(s), i = 0, o = 0;
    char *out = malloc(n + 1); /* what an escape stands for is never longer */
    long v;
    if (!out) return NULL;
    while (i < n) {
        if (s[i] != '\\' || i + 1 >= n) {
            out[o++] = s[i++];
            continue;
        }
        switch (s[i + 1]) {
        case '\\':
        case '"':
            out[o++] = s[i + 1];
            i += 2;
            continue;
        case 'n':
            out[o++] = '\n';
            i += 2;
            continue;
        case 'r':
            out[o++] = '\r';
            i += 2;
            continue;
        case 't':
            out[o++] = '\t';
            i += 2;
            continue;
        case 'x':
            if (i + 4 <= n && (v = hexn(s + i + 2, 2)) >= 0) {
                out[o++] = (char)v;
                i += 4;
                continue;
            }
            break;
        case 'u':
            if (i + 6 <= n && (v = hexn(s + i + 2, 4)) >= 0) {
                if (v >= 0xDC80 && v <= 0xDCFF) { /* JSON's form of a byte that is not UTF-8 */
                    out[o++] = (char)(v & 0xFF);
                } else if (v >= 0xD800 && v <= 0xDFFF) {
                    break; /* no character: the backslash stands for itself */
                } else if (v < 0x80) {
                    out[o++] = (char)v;
                } else if (v < 0x800) {
                    out[o++] = (char)(0xC0 | (v >> 6));
                    out[o++] = (char)(0x80 | (v & 0x3F));
                } else {
                    out[o++] = (char)(0xE0 | (v >> 12));
                    out[o++] = (char)(0x80 | ((v >> 6) & 0x3F));
                    out[o++] = (char)(0x80 | (v & 0x3F));
                }
                i += 6;
                continue;
            }
            break;
        default: break;
        }
        out[o++] = s[i++]; /* a backslash that begins no escape: itself */
    }
    out[o] = '\0';
    *len = o;
    return out;
}

/* "'NAME'" escaped, as ls shows it, into b. */
static void quoted_name(sbuf *b, const char *s, size_t n)
{
    sb_char(b, '\'');
    cli_escape(b, s, n, (size_t)-1, 0);
    sb_char(b, '\'');
}

#define PATHS_SHOWN 4 /* key paths named in a message about a shared name */

void cli_tensor_path(const ckpt_file *f, const ckpt_tensor *t, char *buf, size_t cap)
{
    if (ckpt_tensor_path_text(f, t, buf, cap, NULL) != 0) snprintf(buf, cap, "?");
}

const ckpt_tensor *cli_find_tensor(const ckpt_file *f, const char *path, const char *arg)
{
    size_t len = 0, k, n = 0;
    char *name = cli_unescape(arg, &len);
    const ckpt_tensor *t, *u;
    sbuf b;
    if (!name) {
        cli_error("%s: out of memory", path);
        return NULL;
    }
    memset(&b, 0, sizeof b);
    t = ckpt_find_n(f, name, len);
    if (!t) {
        quoted_name(&b, name, len);
        cli_error("%s: no tensor named %s", path, b.p && !b.oom ? b.p : "?");
    } else if ((u = ckpt_find_next(f, t)) != NULL) {
        /* one name, several key paths: which is meant is not for us to guess */
        for (n = 1; u; u = ckpt_find_next(f, u)) n++;
        {
            char tmp[32];
            snprintf(tmp, sizeof tmp, "%zu tensors are named ", n);
            sb_str(&b, tmp);
        }
        quoted_name(&b, name, len);
        sb_str(&b, ", by the key paths ");
        for (u = t, k = 0; u && k < PATHS_SHOWN; u = ckpt_find_next(f, u), k++) {
            char kp[256];
            cli_tensor_path(f, u, kp, sizeof kp);
            sb_str(&b, k == 0 ? "" : u && ckpt_find_next(f, u) == NULL ? " and " : ", ");
            sb_str(&b, kp);
        }
        if (n > PATHS_SHOWN) sb_str(&b, ", ...");
        sb_str(&b, ": choose one with --key (the path down to it) and the NAME under it");
        cli_error("%s: %s", path, b.p && !b.oom ? b.p : "a name several tensors share");
        t = NULL;
    }
    sb_free(&b);
    free(name);
    return t;
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
