/*
 * text.c - tools (on the public API only): text from a file made safe for a
 * terminal (ckpt_escape() and its helpers), and the value tree as indented
 * text (ckpt_value_to_text()); see ckpt_text.h for the rules of both.
 *
 * The tree is written from ckpt_value_walk()'s callbacks (ckpt_walk.h).  The
 * walk's ids of first visits index the table of where each container was
 * shown, for the "<ref PATH>" of a later visit.
 */
#define CKPT_BUILDING 1 /* export the CKPT_API functions */
#include "ckpt_text.h"
#include "ckpt_walk.h"

#include <fnmatch.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------------ */
/* UTF-8, escaping, base64                                                    */
/* ------------------------------------------------------------------------ */

CKPT_API size_t ckpt_utf8_seq(const char *str, size_t n)
{
    const unsigned char *s = (const unsigned char *)str;
    unsigned c, lo, hi;
    if (n == 0) return 0;
    c = s[0];
    if (c < 0x80) return 1;
    if (c >= 0xC2 && c <= 0xDF) return (n >= 2 && (s[1] & 0xC0) == 0x80) ? 2 : 0;
    if (c >= 0xE0 && c <= 0xEF) {
        lo = c == 0xE0 ? 0xA0 : 0x80;
        hi = c == 0xED ? 0x9F : 0xBF;
        if (n < 3 || s[1] < lo || s[1] > hi || (s[2] & 0xC0) != 0x80) return 0;
        return 3;
    }
    if (c >= 0xF0 && c <= 0xF4) {
        lo = c == 0xF0 ? 0x90 : 0x80;
        hi = c == 0xF4 ? 0x8F : 0xBF;
        if (n < 4 || s[1] < lo || s[1] > hi || (s[2] & 0xC0) != 0x80 || (s[3] & 0xC0) != 0x80)
            return 0;
        return 4;
    }
    return 0;
}

CKPT_API int ckpt_utf8_valid(const char *s, size_t n)
{
    size_t i = 0, k;
    while (i < n) {
        if ((unsigned char)s[i] < 0x80) {
            i++;
            continue;
        }
        if ((k = ckpt_utf8_seq(s + i, n - i)) == 0) return 0;
        i += k;
    }
    return 1;
}

static uint32_t utf8_decode(const unsigned char *s, size_t k)
{
    switch (k) {
    case 2: return ((uint32_t)(s[0] & 0x1F) << 6) | (s[1] & 0x3Fu);
    case 3:
        return ((uint32_t)(s[0] & 0x0F) << 12) | ((uint32_t)(s[1] & 0x3F) << 6) | (s[2] & 0x3Fu);
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

/* ckpt_escape(), also counting the columns written into *cols. */
static size_t escape(char *out, size_t cap, const char *str, size_t n, size_t limit, unsigned flags,
                     size_t *consumed, size_t *cols)
{
    static const char hex[] = "0123456789abcdef";
    const unsigned char *s = (const unsigned char *)str;
    size_t i = 0, o = 0, w = 0, k, elen, room;
    char esc[8];

    if (out && cap == 0) {
        if (consumed) *consumed = 0;
        *cols = 0;
        return 0;
    }
    room = out ? cap - 1 : (size_t)-1;
    if (limit > n) limit = n;
    while (i < limit) {
        unsigned c = s[i];
        if (c >= 0x20 && c < 0x7f && c != '\\' && !(c == '"' && (flags & CKPT_ESCAPE_QUOTED))) {
            if (o >= room) break;
            if (out) out[o] = (char)c;
            o++;
            w++;
            i++;
            continue;
        }
        k = 1;
        if (c >= 0x80 && !(flags & CKPT_ESCAPE_BYTES) && (k = ckpt_utf8_seq(str + i, n - i)) > 0) {
            uint32_t cp = utf8_decode(s + i, k);
            if (i + k > limit) break; /* do not cut a character */
            if (!invisible(cp)) {
                if (k > room - o) break;
                if (out) memcpy(out + o, s + i, k);
                o += k;
                w++;
                i += k;
                continue;
            }
            esc[0] = '\\';
            esc[1] = 'u';
            esc[2] = hex[(cp >> 12) & 15];
            esc[3] = hex[(cp >> 8) & 15];
            esc[4] = hex[(cp >> 4) & 15];
            esc[5] = hex[cp & 15];
            elen = 6; /* every such character is below U+10000 */
        } else {
            k = 1;
            esc[0] = '\\';
            elen = 2;
            switch (c) {
            case '\\': esc[1] = '\\'; break;
            case '"': esc[1] = '"'; break;
            case '\n': esc[1] = 'n'; break;
            case '\r': esc[1] = 'r'; break;
            case '\t': esc[1] = 't'; break;
            default:
                esc[1] = 'x';
                esc[2] = hex[c >> 4];
                esc[3] = hex[c & 15];
                elen = 4;
                break;
            }
        }
        if (elen > room - o) break;
        if (out) memcpy(out + o, esc, elen);
        o += elen;
        w += elen;
        i += k;
    }
    if (out) out[o] = '\0';
    if (consumed) *consumed = i;
    *cols = w;
    return o;
}

CKPT_API size_t ckpt_escape(char *out, size_t cap, const char *s, size_t n, size_t limit,
                            unsigned flags, size_t *consumed)
{
    size_t cols;
    return escape(out, cap, s, n, limit, flags, consumed, &cols);
}

CKPT_API size_t ckpt_escape_width(const char *s, size_t n, unsigned flags)
{
    size_t cols;
    escape(NULL, 0, s, n, (size_t)-1, flags, NULL, &cols);
    return cols;
}

CKPT_API size_t ckpt_base64(char *out, size_t cap, const void *data, size_t n)
{
    static const char tab[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    const unsigned char *p = data;
    size_t len, i, o = 0;
    if (n / 3 > ((size_t)-1 - 8) / 4)
        len = (size_t)-1; /* cannot be written */
    else
        len = (n / 3 + (n % 3 != 0)) * 4;
    if (!out) return len;
    if (cap == 0) return len;
    if (len >= cap) {
        out[0] = '\0';
        return len;
    }
    for (i = 0; i + 2 < n; i += 3) {
        out[o++] = tab[p[i] >> 2];
        out[o++] = tab[((p[i] & 3) << 4) | (p[i + 1] >> 4)];
        out[o++] = tab[((p[i + 1] & 15) << 2) | (p[i + 2] >> 6)];
        out[o++] = tab[p[i + 2] & 63];
    }
    if (n - i == 1) {
        out[o++] = tab[p[i] >> 2];
        out[o++] = tab[(p[i] & 3) << 4];
        out[o++] = '=';
        out[o++] = '=';
    } else if (n - i == 2) {
        out[o++] = tab[p[i] >> 2];
        out[o++] = tab[((p[i] & 3) << 4) | (p[i + 1] >> 4)];
        out[o++] = tab[(p[i + 1] & 15) << 2];
        out[o++] = '=';
    }
    out[o] = '\0';
    return o;
}

CKPT_API size_t ckpt_json_escape(char *out, size_t cap, const char *str, size_t n, size_t *consumed)
{
    static const char hex[] = "0123456789abcdef";
    const unsigned char *s = (const unsigned char *)str;
    size_t i = 0, o = 0, k, elen, room;
    char esc[8];

    if (out && cap == 0) {
        if (consumed) *consumed = 0;
        return 0;
    }
    room = out ? cap - 1 : (size_t)-1;
    while (i < n) {
        unsigned c = s[i];
        uint32_t cp = c;
        if (c >= 0x20 && c < 0x7f && c != '"' && c != '\\') {
            if (o >= room) break;
            if (out) out[o] = (char)c;
            o++;
            i++;
            continue;
        }
        k = 1;
        if (c >= 0x80 && (k = ckpt_utf8_seq(str + i, n - i)) > 0) {
            cp = utf8_decode(s + i, k);
            if (!invisible(cp)) {
                if (k > room - o) break;
                if (out) memcpy(out + o, s + i, k);
                o += k;
                i += k;
                continue;
            }
        } else if (c >= 0x80) { /* not UTF-8: a lone low surrogate, as surrogateescape */
            k = 1;
            cp = 0xDC00u | c;
        }
        esc[0] = '\\';
        elen = 2;
        switch (cp) {
        case '"': esc[1] = '"'; break;
        case '\\': esc[1] = '\\'; break;
        case '\n': esc[1] = 'n'; break;
        case '\r': esc[1] = 'r'; break;
        case '\t': esc[1] = 't'; break;
        case '\b': esc[1] = 'b'; break;
        case '\f': esc[1] = 'f'; break;
        default: /* every such character is below U+10000 */
            esc[1] = 'u';
            esc[2] = hex[(cp >> 12) & 15];
            esc[3] = hex[(cp >> 8) & 15];
            esc[4] = hex[(cp >> 4) & 15];
            esc[5] = hex[cp & 15];
            elen = 6;
            break;
        }
        if (elen > room - o) break;
        if (out) memcpy(out + o, esc, elen);
        o += elen;
        i += k;
    }
    if (out) out[o] = '\0';
    if (consumed) *consumed = i;
    return o;
}

CKPT_API int ckpt_name_match(const char *glob, const char *name, size_t len)
{
    char buf[512], *esc;
    size_t n;
    int r;
    if (!glob) return 1;
    if (!name) return 0;
    if (!memchr(name, '\0', len) && fnmatch(glob, name, 0) == 0) return 1;
    n = ckpt_escape(NULL, 0, name, len, (size_t)-1, 0, NULL);
    if (n == len && !memchr(name, '\0', len)) return 0; /* escaping changes nothing */
    esc = n < sizeof buf ? buf : malloc(n + 1);
    if (!esc) return 0;
    ckpt_escape(esc, n + 1, name, len, (size_t)-1, 0, NULL);
    r = fnmatch(glob, esc, 0) == 0;
    if (esc != buf) free(esc);
    return r;
}

CKPT_API int ckpt_tensor_path_text(const ckpt_file *f, const ckpt_tensor *t, char *out, size_t cap,
                                   ckpt_error *err)
{
    size_t ends[64], np = 0, k, o = 0, start = 0, c, len;
    const size_t shown = sizeof ends / sizeof ends[0];
    if (!out || cap < 16) {
        if (err) {
            err->code = CKPT_E_ARG;
            err->offset = -1;
            snprintf(err->message, sizeof err->message, "ckpt_tensor_path_text: cap below 16");
        }
        return -1;
    }
    out[0] = '\0';
    if (ckpt_tensor_name_parts(f, t, ends, shown, &np, err) != 0) return -1;
    if (np == 0) {
        snprintf(out, cap, "(root)");
        return 0;
    }
    for (k = 0; k < np && k < shown; k++) {
        const char *p = t->name + start;
        size_t n = ends[k] - start;
        /* ["part"], or "..." when the rest does not fit */
        if (cap - o < 8) break;
        memcpy(out + o, "[\"", 2);
        o += 2;
        len = ckpt_escape(out + o, cap - o - 3, p, n, (size_t)-1, CKPT_ESCAPE_QUOTED, &c);
        o += len;
        if (c < n) break;
        memcpy(out + o, "\"]", 3);
        o += 2;
        start = ends[k] + 1;
    }
    if (k < np) { /* cut: "..." at the end, in the room kept for it */
        if (o > cap - 4) o = cap - 4;
        memcpy(out + o, "...", 4);
    }
    return 0;
}

/* ------------------------------------------------------------------------ */
/* The value tree as text                                                     */
/* ------------------------------------------------------------------------ */

#define TEXT_MAX_DEPTH 1000u
#define STR_SHOWN 200     /* bytes of a string shown before cutting */
#define REF_PATH_MAX 1000 /* bytes of a path kept for "<ref PATH>" */
#define BYTES_SHOWN 64    /* bytes of a bytes value shown before cutting */
#define INLINE_ITEMS 16   /* scalar items shown on one line */
#define INLINE_STR 40     /* longest string item in a one-line list */
#define TEXT_FLUSH (64u * 1024u)

/* The walk reaches levels 0..TEXT_WALK_LEVELS; the display's own limit is
 * max_depth (a root dict's entries and an object's dict state take no
 * level of their own, so the display is never deeper than the walk, and
 * at least half as deep). */
#define TEXT_WALK_LEVELS 2048u

/* A growing text buffer. */
typedef struct tbuf {
    char *p;
    size_t len, cap;
} tbuf;

/* What the walk left at each level (ckpt_walk.h's depth). */
typedef struct tframe {
    size_t path_len; /* this value's path */
    int child_depth; /* indentation level of its children */
    int args_inline; /* an object whose args were shown on its own line */
} tframe;

typedef struct tw {
    const ckpt_file *f;
    int (*write)(void *ctx, const char *s, size_t n);
    void *ctx;
    ckpt_error *err;
    int failed;
    int write_failed;
    int max_depth;
    tbuf out;    /* lines not yet written */
    tbuf label;  /* a dict key's label */
    tbuf path;   /* the current path */
    char **refs; /* by walk id: where a container was first shown, or NULL */
    size_t nrefs;
    tframe *frames; /* TEXT_WALK_LEVELS + 1 */
} tw;

static int fail(tw *w, ckpt_code code, const char *msg)
{
    if (!w->failed) {
        w->failed = 1;
        if (w->err) {
            w->err->code = code;
            w->err->offset = -1;
            snprintf(w->err->message, sizeof w->err->message, "%s", msg);
        }
    }
    return -1;
}

static int oom(tw *w)
{
    return fail(w, CKPT_E_NOMEM, "out of memory");
}

/* Room for `extra` more bytes and a '\0' in b. */
static int tb_reserve(tw *w, tbuf *b, size_t extra)
{
    size_t cap;
    char *p;
    if (w->failed) return -1;
    if (b->cap - b->len > extra) return 0;
    if (extra > ((size_t)-1) / 4 - b->len) return oom(w);
    cap = b->cap ? b->cap : 256;
    while (cap - b->len <= extra) cap *= 2;
    p = realloc(b->p, cap);
    if (!p) return oom(w);
    b->p = p;
    b->cap = cap;
    return 0;
}

static void tb_add(tw *w, tbuf *b, const char *s, size_t n)
{
    if (tb_reserve(w, b, n) != 0) return;
    memcpy(b->p + b->len, s, n);
    b->len += n;
    b->p[b->len] = '\0';
}

static void tb_str(tw *w, tbuf *b, const char *s)
{
    tb_add(w, b, s, strlen(s));
}

static void tb_char(tw *w, tbuf *b, char c)
{
    tb_add(w, b, &c, 1);
}

/* s[0..n) escaped onto b, up to `limit` bytes of it; returns the bytes of s
 * consumed. */
static size_t tb_escape(tw *w, tbuf *b, const char *s, size_t n, size_t limit, unsigned flags)
{
    size_t done = 0, c;
    if (limit > n) limit = n;
    while (done < limit) {
        if (tb_reserve(w, b, 4096) != 0) break;
        b->len += ckpt_escape(b->p + b->len, b->cap - b->len, s + done, n - done, limit - done,
                              flags, &c);
        done += c;
        if (c == 0) break; /* a character crosses the limit */
    }
    return done;
}

/* Write what is pending (also after a failure: fail() keeps the first
 * error). */
static int flush(tw *w)
{
    if (w->out.len > 0 && w->write(w->ctx, w->out.p, w->out.len) != 0) {
        w->out.len = 0;
        w->write_failed = 1;
        return fail(w, CKPT_E_IO, "text output: the write callback failed");
    }
    w->out.len = 0;
    return 0;
}

/* ---- the current path, and where containers were shown ------------------ */

static int path_push(tw *w, const char *comp, size_t n)
{
    if (tb_reserve(w, &w->path, n + 1) != 0) return -1;
    if (w->path.len > 0) w->path.p[w->path.len++] = '.';
    memcpy(w->path.p + w->path.len, comp, n);
    w->path.len += n;
    w->path.p[w->path.len] = '\0';
    return 0;
}

static void path_pop(tw *w, size_t mark)
{
    w->path.len = mark;
    if (w->path.p) w->path.p[mark] = '\0';
}

static const char *ref_get(const tw *w, size_t id)
{
    return id < w->nrefs ? w->refs[id] : NULL;
}

/* Remember where the container numbered `id` was first shown, for later
 * "<ref PATH>" lines.  Paths are cut at REF_PATH_MAX bytes: a crafted
 * pickle nests hundreds of dicts under long keys, and a full copy per
 * container would cost memory quadratic in the depth. */
static int remember(tw *w, size_t id)
{
    const char *path = w->path.p ? w->path.p : "";
    size_t n = w->path.len;
    char *copy;
    if (id == CKPT_WALK_NO_ID)
        return fail(w, CKPT_E_ARG, "text output: a container without a walk id");
    if (id >= w->nrefs) {
        size_t cap = w->nrefs ? w->nrefs : 64;
        char **r;
        while (cap <= id) {
            if (cap > ((size_t)-1) / 2 / sizeof *r) return oom(w);
            cap *= 2;
        }
        r = realloc(w->refs, cap * sizeof *r);
        if (!r) return oom(w);
        memset(r + w->nrefs, 0, (cap - w->nrefs) * sizeof *r);
        w->refs = r;
        w->nrefs = cap;
    }
    if (n > REF_PATH_MAX) {
        n = REF_PATH_MAX;
        while (n > 0 && ((unsigned char)path[n] & 0xC0) == 0x80) n--; /* not inside a character */
    }
    copy = malloc(n + (n < w->path.len ? 4 : 1));
    if (!copy) return oom(w);
    memcpy(copy, path, n);
    if (n < w->path.len)
        memcpy(copy + n, "...", 4);
    else
        copy[n] = '\0';
    free(w->refs[id]);
    w->refs[id] = copy;
    return 0;
}

/* ---- scalars ------------------------------------------------------------ */

static void indent(tw *w, int depth)
{
    int i;
    for (i = 0; i < depth; i++) tb_add(w, &w->out, "  ", 2);
}

/* A quoted string or bytes value, cut after `limit` bytes with a note. */
static void put_quoted(tw *w, tbuf *b, const char *str, size_t n, int is_bytes)
{
    size_t limit = is_bytes ? BYTES_SHOWN : STR_SHOWN, i;
    char tmp[48];
    if (is_bytes) tb_char(w, b, 'b');
    tb_char(w, b, '"');
    i = tb_escape(w, b, str, n, limit, CKPT_ESCAPE_QUOTED | (is_bytes ? CKPT_ESCAPE_BYTES : 0u));
    tb_char(w, b, '"');
    if (i < n) {
        snprintf(tmp, sizeof tmp, "... (%zu bytes)", n);
        tb_str(w, b, tmp);
    }
}

static int is_scalar(const ckpt_value *v, int for_inline)
{
    size_t n;
    if (!v) return 1;
    switch (ckpt_value_kind(v)) {
    case CKPT_V_NONE:
    case CKPT_V_BOOL:
    case CKPT_V_INT:
    case CKPT_V_BIGINT:
    case CKPT_V_FLOAT: return 1;
    case CKPT_V_STR:
    case CKPT_V_BYTES: ckpt_value_text(v, &n); return !for_inline || n <= INLINE_STR;
    default: return 0;
    }
}

static void put_scalar(tw *w, tbuf *b, const ckpt_value *v)
{
    const char *t;
    size_t n = 0;
    char tmp[40];
    switch (v ? ckpt_value_kind(v) : CKPT_V_NONE) {
    case CKPT_V_NONE: tb_str(w, b, "None"); break;
    case CKPT_V_BOOL: tb_str(w, b, ckpt_value_bool(v) ? "True" : "False"); break;
    case CKPT_V_INT:
        snprintf(tmp, sizeof tmp, "%lld", (long long)ckpt_value_int(v));
        tb_str(w, b, tmp);
        break;
    case CKPT_V_BIGINT:
        t = ckpt_value_text(v, &n);
        tb_add(w, b, t ? t : "?", t ? n : 1);
        break;
    case CKPT_V_FLOAT:
        n = ckpt_float_repr(ckpt_value_float(v), tmp);
        tb_add(w, b, tmp, n);
        break;
    case CKPT_V_STR:
    case CKPT_V_BYTES:
        t = ckpt_value_text(v, &n);
        put_quoted(w, b, t ? t : "", t ? n : 0, ckpt_value_kind(v) == CKPT_V_BYTES);
        break;
    default: tb_char(w, b, '?'); break;
    }
}

/* Text from the file, escaped, whole. */
static void put_text(tw *w, const char *s)
{
    tb_escape(w, &w->out, s, strlen(s), (size_t)-1, 0);
}

/* ---- labels -------------------------------------------------------------- */

/* A str key that can be shown bare: non-empty, at most STR_SHOWN bytes and
 * shown as it is (no character that ckpt_escape() would change: an escape
 * is always longer than what it stands for). */
static int bare_key(const char *k, size_t n)
{
    if (n == 0 || n > STR_SHOWN) return 0; /* a long key is quoted and cut like a long string */
    return ckpt_escape(NULL, 0, k, n, n, 0, NULL) == n;
}

/* Text of a dict key into b (cleared first): str keys bare when possible,
 * other scalars and tuples of scalars as Python prints them, anything else
 * "<key N>". */
static void key_text(tw *w, tbuf *b, const ckpt_value *k, size_t index)
{
    const char *t;
    size_t n = 0, i, m;
    int ok;
    char tmp[40];

    b->len = 0;
    tb_str(w, b, "");
    if (k && ckpt_value_kind(k) == CKPT_V_STR) {
        t = ckpt_value_text(k, &n);
        if (t && bare_key(t, n)) {
            tb_add(w, b, t, n);
            return;
        }
    }
    if (k && is_scalar(k, 0)) {
        put_scalar(w, b, k);
        return;
    }
    if (k && ckpt_value_kind(k) == CKPT_V_TUPLE) {
        m = ckpt_value_len(k);
        ok = m <= INLINE_ITEMS;
        for (i = 0; ok && i < m; i++) ok = is_scalar(ckpt_value_item(k, i), 1);
        if (ok) {
            tb_char(w, b, '(');
            for (i = 0; i < m; i++) {
                if (i > 0) tb_str(w, b, ", ");
                put_scalar(w, b, ckpt_value_item(k, i));
            }
            tb_str(w, b, m == 1 ? ",)" : ")");
            return;
        }
    }
    snprintf(tmp, sizeof tmp, "<key %zu>", index);
    tb_str(w, b, tmp);
}

/* ---- values --------------------------------------------------------------- */

/* Indentation and "label:" (nothing for the root value). */
static void start_line(tw *w, const char *label, int depth)
{
    indent(w, depth);
    if (label) {
        tb_str(w, &w->out, label);
        tb_char(w, &w->out, ':');
    }
}

/* Start a one-line value: indentation, "label: ". */
static void start_value(tw *w, const char *label, int depth)
{
    start_line(w, label, depth);
    if (label) tb_char(w, &w->out, ' ');
}

static const char *seq_name(ckpt_kind k)
{
    return k == CKPT_V_TUPLE ? "tuple" : k == CKPT_V_SET ? "set" : "list";
}

/* A list/tuple/set of scalars on one line; 0 if it is not one. */
static int inline_seq(tw *w, const ckpt_value *v)
{
    tbuf *b = &w->out;
    ckpt_kind k = ckpt_value_kind(v);
    size_t n = ckpt_value_len(v), i, shown = n > INLINE_ITEMS ? INLINE_ITEMS : n;
    char tmp[48];
    for (i = 0; i < n; i++)
        if (!is_scalar(ckpt_value_item(v, i), 1)) return 0;
    if (n == 0) {
        tb_str(w, b, k == CKPT_V_TUPLE ? "()" : k == CKPT_V_SET ? "set()" : "[]");
        return 1;
    }
    tb_str(w, b, k == CKPT_V_TUPLE ? "(" : k == CKPT_V_SET ? "{" : "[");
    for (i = 0; i < shown; i++) {
        if (i > 0) tb_str(w, b, ", ");
        put_scalar(w, b, ckpt_value_item(v, i));
    }
    if (k == CKPT_V_TUPLE && n == 1) tb_char(w, b, ',');
    if (shown < n) tb_str(w, b, ", ...");
    tb_str(w, b, k == CKPT_V_TUPLE ? ")" : k == CKPT_V_SET ? "}" : "]");
    if (shown < n) {
        snprintf(tmp, sizeof tmp, " (%zu items)", n);
        tb_str(w, b, tmp);
    }
    return 1;
}

/* "module.Class(args)"; its parts come next in the walk, one level deeper:
 * the args when they were not shown inline, the state's entries (or
 * "state:"), "items:", "list:". */
static int show_object(tw *w, const char *label, const ckpt_value *v, int depth, tframe *fr)
{
    const char *cls = ckpt_value_class(v);
    const ckpt_value *args = ckpt_object_args(v);
    const ckpt_value *state = ckpt_object_state(v);
    const ckpt_value *items = ckpt_object_items(v);
    const ckpt_value *list = ckpt_object_list(v);
    int args_inline = 0;
    size_t nargs = args ? ckpt_value_len(args) : 0, i;

    start_value(w, label, depth);
    put_text(w, cls ? cls : "?");
    if (args && ckpt_value_kind(args) == CKPT_V_TUPLE && nargs <= INLINE_ITEMS) {
        args_inline = 1;
        for (i = 0; i < nargs; i++)
            if (!is_scalar(ckpt_value_item(args, i), 1)) args_inline = 0;
    }
    if (!args || (args_inline && nargs == 0)) {
        tb_str(w, &w->out, state || items || list ? "(...)" : "()");
        args_inline = 1;
    } else if (args_inline) {
        tb_char(w, &w->out, '(');
        for (i = 0; i < nargs; i++) {
            if (i > 0) tb_str(w, &w->out, ", ");
            put_scalar(w, &w->out, ckpt_value_item(args, i));
        }
        tb_char(w, &w->out, ')');
    } else {
        tb_str(w, &w->out, "(...)");
    }
    tb_char(w, &w->out, '\n');
    fr->args_inline = args_inline;
    fr->child_depth = depth + 1;
    return w->failed ? -1 : 0;
}

static void show_tensor(tw *w, const ckpt_value *v)
{
    const ckpt_tensor *t = ckpt_value_tensor(w->f, v);
    char tmp[48];
    uint32_t i;
    tb_str(w, &w->out, "tensor");
    if (!t) return;
    tb_char(w, &w->out, ' ');
    tb_str(w, &w->out, ckpt_dtype_name(t->dtype));
    tb_str(w, &w->out, " [");
    for (i = 0; i < t->ndim; i++) {
        snprintf(tmp, sizeof tmp, i ? ", %lld" : "%lld", (long long)t->shape[i]);
        tb_str(w, &w->out, tmp);
    }
    tb_char(w, &w->out, ']');
}

/* One value under `label` at indentation `depth`; for a container, what
 * the walk does next: 0 enter it, CKPT_WALK_SKIP not (shown on one line,
 * or as a reference), -1 fail. */
static int show_value(tw *w, const char *label, const ckpt_walk_step *st, int depth, tframe *fr)
{
    const ckpt_value *v = st->value;
    ckpt_kind kind;
    const char *ref, *text;
    size_t n = 0;

    if (!v || is_scalar(v, 0)) {
        start_value(w, label, depth);
        put_scalar(w, &w->out, v);
        tb_char(w, &w->out, '\n');
        return w->failed ? -1 : 0;
    }
    kind = ckpt_value_kind(v);
    switch (kind) {
    case CKPT_V_TENSOR:
        start_value(w, label, depth);
        show_tensor(w, v);
        tb_char(w, &w->out, '\n');
        return w->failed ? -1 : 0;
    case CKPT_V_GLOBAL:
        start_value(w, label, depth);
        text = ckpt_value_class(v);
        tb_str(w, &w->out, "global ");
        put_text(w, text ? text : "?");
        tb_char(w, &w->out, '\n');
        return w->failed ? -1 : 0;
    case CKPT_V_STORAGE:
        start_value(w, label, depth);
        text = ckpt_value_text(v, &n);
        if (text) {
            tb_str(w, &w->out, "storage ");
            tb_escape(w, &w->out, text, n, STR_SHOWN, 0);
            tb_char(w, &w->out, '\n');
        } else
            tb_str(w, &w->out, "storage\n");
        return w->failed ? -1 : 0;
    case CKPT_V_LIST:
    case CKPT_V_TUPLE:
    case CKPT_V_SET:
    case CKPT_V_DICT:
    case CKPT_V_OBJECT: break;
    default:
        start_value(w, label, depth);
        tb_char(w, &w->out, '<');
        tb_str(w, &w->out, ckpt_kind_name(kind));
        tb_str(w, &w->out, ">\n");
        return w->failed ? -1 : 0;
    }

    /* containers: shown once, a reference after that.  The walk also
     * calls a container shared when it was met as an object's inline args
     * (never shown as a container): it is shown here the first time, on
     * one line, since such args are scalars only. */
    ref = ref_get(w, st->id);
    if (ref) {
        start_value(w, label, depth);
        tb_str(w, &w->out, "<ref ");
        tb_str(w, &w->out, ref[0] ? ref : "(root)");
        tb_str(w, &w->out, ">\n");
        return w->failed ? -1 : CKPT_WALK_SKIP;
    }
    if (depth > w->max_depth || st->too_deep) {
        char msg[64];
        snprintf(msg, sizeof msg, "nesting deeper than %d", w->max_depth);
        return fail(w, CKPT_E_LIMIT, msg);
    }
    if (remember(w, st->id) != 0) return -1;

    if (kind == CKPT_V_OBJECT) return show_object(w, label, v, depth, fr);
    if (kind == CKPT_V_DICT) {
        if (ckpt_value_len(v) == 0) {
            start_value(w, label, depth);
            tb_str(w, &w->out, "{}\n");
            return w->failed ? -1 : CKPT_WALK_SKIP;
        }
        if (!label) /* the root dict: its entries at the left margin */
            return 0;
        start_line(w, label, depth);
        tb_char(w, &w->out, '\n');
        fr->child_depth = depth + 1;
        return w->failed ? -1 : 0;
    }
    /* LIST, TUPLE, SET */
    if (!label && ckpt_value_len(v) > 0) /* the root: items at the margin */
        return 0;
    start_value(w, label, depth);
    if (inline_seq(w, v)) {
        tb_char(w, &w->out, '\n');
        return w->failed ? -1 : CKPT_WALK_SKIP;
    }
    {
        char tmp[64];
        snprintf(tmp, sizeof tmp, "%s (%zu item%s)\n", seq_name(kind), ckpt_value_len(v),
                 ckpt_value_len(v) == 1 ? "" : "s");
        tb_str(w, &w->out, tmp);
    }
    if (w->failed) return -1;
    if (st->shared) /* cannot happen (see above); never show a part of it */
        return CKPT_WALK_SKIP;
    fr->child_depth = depth + 1;
    return 0;
}

/* The label and path of the value from its place in its container, then the
 * value. */
static int enter_value(tw *w, const ckpt_walk_step *st)
{
    static const char *const parts[] = {"args", "state", "items", "list"};
    tframe *fr = &w->frames[st->depth];
    const tframe *up = st->parent ? &w->frames[st->depth - 1] : NULL;
    const char *label = NULL, *comp;
    char seq_label[32], seq_comp[32];

    path_pop(w, up ? up->path_len : 0);
    fr->path_len = w->path.len;
    fr->child_depth = up ? up->child_depth : 0;
    fr->args_inline = 0;
    if (!up) return show_value(w, NULL, st, 0, fr);
    switch (ckpt_value_kind(st->parent->value)) {
    case CKPT_V_OBJECT:
        if (st->index == CKPT_WALK_ARGS && up->args_inline)
            return CKPT_WALK_SKIP; /* shown on the object's line */
        if (st->index == CKPT_WALK_STATE && ckpt_value_kind(st->value) == CKPT_V_DICT &&
            !ref_get(w, st->id)) {
            /* a dict state (the usual __dict__) is shown as the object's
             * own entries; a later reference to it points at the object */
            return remember(w, st->id);
        }
        label = comp = parts[st->index < 4 ? st->index : 0];
        break;
    case CKPT_V_DICT:
        key_text(w, &w->label, st->key, st->index);
        if (w->failed) return -1;
        label = comp = w->label.p;
        break;
    default:
        snprintf(seq_label, sizeof seq_label, "[%zu]", st->index);
        snprintf(seq_comp, sizeof seq_comp, "%zu", st->index);
        label = seq_label;
        comp = seq_comp;
        break;
    }
    if (path_push(w, comp, strlen(comp)) != 0) return -1;
    fr->path_len = w->path.len;
    return show_value(w, label, st, up->child_depth, fr);
}

/* The walk's callback: a value, and the pending lines out when they are
 * many. */
static int on_enter(void *ctx, const ckpt_walk_step *st)
{
    tw *w = ctx;
    int r;
    if (w->failed) return -1;
    r = enter_value(w, st);
    if (r < 0 || w->failed) return -1;
    if (w->out.len >= TEXT_FLUSH && flush(w) != 0) return -1;
    return r;
}

CKPT_API void ckpt_text_options_init_sized(ckpt_text_options *opt, size_t struct_size)
{
    ckpt_text_options d;
    if (!opt || struct_size == 0) return;
    memset(&d, 0, sizeof d);
    d.struct_size = struct_size;
    d.max_depth = TEXT_MAX_DEPTH;
    memcpy(opt, &d, struct_size < sizeof d ? struct_size : sizeof d);
}

CKPT_API int ckpt_value_to_text(const ckpt_file *f, const ckpt_value *v,
                                int (*write)(void *ctx, const char *s, size_t n), void *ctx,
                                const ckpt_text_options *opt, ckpt_error *err)
{
    tw w;
    ckpt_text_options o;
    ckpt_walk_callbacks cb = {on_enter, NULL};
    ckpt_walk_options wopt;
    ckpt_error werr;
    size_t i;
    int r;

    memset(&w, 0, sizeof w);
    w.write = write;
    w.ctx = ctx;
    w.err = err;
    if (err) {
        err->code = CKPT_OK;
        err->offset = -1;
        err->message[0] = '\0';
    }
    ckpt_text_options_init(&o);
    if (opt) {
        if (opt->struct_size == 0)
            return fail(&w, CKPT_E_ARG,
                        "ckpt_value_to_text: options not initialised "
                        "(use ckpt_text_options_init)");
        memcpy(&o, opt, opt->struct_size < sizeof o ? opt->struct_size : sizeof o);
    }
    if (!f || !write)
        return fail(&w, CKPT_E_ARG, "ckpt_value_to_text: NULL file or write callback");
    w.f = f;
    w.max_depth =
        (int)(o.max_depth == 0 || o.max_depth > TEXT_MAX_DEPTH ? TEXT_MAX_DEPTH : o.max_depth);
    if (!v) v = ckpt_root(f);
    if (!v) return 0; /* nothing to show */
    w.frames = calloc(TEXT_WALK_LEVELS + 1, sizeof *w.frames);
    if (!w.frames) return oom(&w);
    ckpt_walk_options_init(&wopt);
    wopt.max_depth = TEXT_WALK_LEVELS;
    wopt.skip_deep = 1; /* show_value() says "nesting deeper than ..." */
    r = ckpt_value_walk(f, v, &cb, &w, &wopt, &werr);
    if (r != 0 && !w.failed) /* the walk's own error */
        fail(&w, werr.code != CKPT_OK ? werr.code : CKPT_E_ARG, werr.message);
    if (w.failed) /* the whole lines before a failure are written too */
        while (w.out.len > 0 && w.out.p[w.out.len - 1] != '\n') w.out.len--;
    if (!w.write_failed && flush(&w) != 0) r = -1;
    for (i = 0; i < w.nrefs; i++) free(w.refs[i]);
    free(w.refs);
    free(w.out.p);
    free(w.label.p);
    free(w.path.p);
    free(w.frames);
    return r == 0 && !w.failed ? 0 : -1;
}
