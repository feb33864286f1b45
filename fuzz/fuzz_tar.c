/*
 * fuzz_tar.c - the TAR container (torch.save before 0.1.10), with inputs
 * that are always TARs.
 *
 * The first input byte chooses how the rest becomes an archive:
 *   bit 0 set    RAW mode: the rest is the archive; the checksum of every
 *                header the reader will meet (walking as it does) is fixed
 *                so that mutations get past it.
 *   bit 0 clear  MEMBERS mode: the rest is split at each "\n#TAR#\n" into
 *                the members sys_info, storages, tensors, pickle (in that
 *                order; later parts become extra members "extraN"), each
 *                given a valid ustar header.
 *   bit 1        (members) name each member through a PAX 'x' header
 *   bit 2        (members) write sizes in GNU base-256
 *   bit 3        (members) end with two zero blocks
 */
#include "fuzz_common.h"

#define SEP "\n#TAR#\n"
#define SEPLEN 7

static void set_checksum(uint8_t *h)
{
    memset(h + 148, ' ', 8);
    unsigned sum = 0;
    for (int i = 0; i < 512; i++) sum += h[i];
    snprintf((char *)h + 148, 8, "%06o", sum & 0777777u);
    h[155] = ' ';
}

static void octal_field(uint8_t *p, size_t n, uint64_t v)
{
    memset(p, '0', n - 1);
    p[n - 1] = 0;
    for (size_t i = n - 1; i-- > 0 && v;) {
        p[i] = (uint8_t)('0' + (v & 7));
        v >>= 3;
    }
}

static void header(uint8_t *h, const char *name, uint64_t size, char type, int b256)
{
    memset(h, 0, 512);
    snprintf((char *)h, 100, "%s", name);
    octal_field(h + 100, 8, 0644);
    octal_field(h + 108, 8, 0);
    octal_field(h + 116, 8, 0);
    if (b256) {
        memset(h + 124, 0, 12);
        h[124] = 0x80;
        for (int i = 0; i < 8; i++) h[135 - i] = (uint8_t)(size >> (8 * i));
    } else {
        octal_field(h + 124, 12, size);
    }
    octal_field(h + 136, 12, 0);
    h[156] = (uint8_t)type;
    memcpy(h + 257, "ustar", 6);
    memcpy(h + 263, "00", 2);
    set_checksum(h);
}

static int member(buf *b, const char *name, const uint8_t *s, size_t n, uint8_t mode)
{
    uint8_t h[512];
    static const uint8_t zero[512];
    if (mode & 2) {
        char rec[160];
        int len = (int)strlen(name) + 7; /* " path=" + name + "\n" */
        len += snprintf(NULL, 0, "%d", len);
        len = (int)strlen(name) + 7 + snprintf(NULL, 0, "%d", len);
        int k = snprintf(rec, sizeof rec, "%d path=%s\n", len, name);
        header(h, "PaxHeader", (uint64_t)k, 'x', 0);
        if (put(b, h, 512) || put(b, rec, (size_t)k) || put(b, zero, (512 - (size_t)k % 512) % 512))
            return -1;
        name = "ignored-by-pax";
    }
    header(h, name, n, '0', (mode & 4) != 0);
    if (put(b, h, 512) || put(b, s, n) || put(b, zero, (512 - n % 512) % 512)) return -1;
    return 0;
}

/* Walk the headers as tar.c does and fix each checksum. */
static void fix_checksums(uint8_t *p, size_t n)
{
    size_t off = 0;
    for (int guard = 0; guard < 4096 && off + 512 <= n; guard++) {
        uint8_t *h = p + off;
        int zero = 1;
        for (int i = 0; i < 512; i++)
            if (h[i]) zero = 0;
        if (zero) return;
        set_checksum(h);
        uint64_t size = 0;
        if (h[124] & 0x80) {
            for (int i = 1; i < 12; i++) size = (size << 8) | h[124 + i];
        } else {
            for (int i = 0; i < 12 && h[124 + i] >= '0' && h[124 + i] <= '7'; i++)
                size = size * 8 + (uint64_t)(h[124 + i] - '0');
        }
        uint64_t padded = (size + 511) & ~(uint64_t)511;
        if (padded > n - off - 512) return;
        off += 512 + (size_t)padded;
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1 || size > (1u << 20)) return 0;
    uint8_t mode = data[0];
    const uint8_t *rest = data + 1;
    size_t rn = size - 1;
    buf b = {0};
    if (mode & 1) {
        if (put(&b, rest, rn) == 0) fix_checksums(b.p, b.n);
    } else {
        static const char *const names[4] = {"sys_info", "storages", "tensors", "pickle"};
        size_t start = 0;
        int idx = 0, bad = 0;
        for (;;) {
            size_t end = start;
            while (end < rn && !(rn - end >= SEPLEN && memcmp(rest + end, SEP, SEPLEN) == 0)) end++;
            char extra[24];
            const char *name = names[idx < 4 ? idx : 3];
            if (idx >= 4) {
                snprintf(extra, sizeof extra, "extra%d", idx - 4);
                name = extra;
            }
            if (member(&b, name, rest + start, end - start, mode)) bad = 1;
            idx++;
            if (end >= rn || idx > 64) break;
            start = end + SEPLEN;
        }
        if (mode & 8) {
            static const uint8_t zero[1024];
            if (put(&b, zero, sizeof zero)) bad = 1;
        }
        if (bad) b.n = 0;
    }
    if (b.n) fuzz_open_copy(b.p, b.n);
    free(b.p);
    return 0;
}
