/*
 * zip.h - layer 4 (formats): the plain ZIP reader of zip.c, for containers
 * stored as ZIP archives (torch_zip.c).  Not installed.
 */
#ifndef CKPT_ZIP_H
#define CKPT_ZIP_H

#include "../common/common.h"

/* One record, 24 bytes (a 1M-record archive holds a million of them): its
 * name is an offset into the archive's one names buffer (ck_zip_name()),
 * and where its bytes start shares a word with its local header's lengths
 * and its method (ck_zip_data_off(), ck_zip_local_off(), ck_zip_method();
 * the index refuses an archive whose records start past 64 TiB, or whose
 * names take 4 GiB); its compressed size is its size unless the archive
 * keeps a table of them (ck_zip_comp_size()); its central directory entry
 * is derived (ck_zip_cd_pos()). */
typedef struct ck_zip_entry {
    uint64_t size;
    uint64_t at; /* bits 0-45: where its bytes start; 46-62: the local
                      header's name + extra lengths; 63: deflated */
    uint32_t crc;
    uint32_t name; /* its NUL-terminated name: a->names + name */
} ck_zip_entry;

#define CK_ZIP_OFF_BITS 46
#define CK_ZIP_OFF_MAX (((uint64_t)1 << CK_ZIP_OFF_BITS) - 1)
#define CK_ZIP_DEFLATED ((uint64_t)1 << 63)

typedef struct ck_inflater ck_inflater; /* a resumable inflate cursor */

typedef struct ck_zip {
    const ck_source *src; /* set by the caller */
    ck_arena *arena;      /* names live here; set by the caller */
    uint32_t max_entries; /* set by the caller */
    bool flagged_as_plain; /* scanners: a record flagged encrypted is read as
                              it is stored (a hostile file sets the flag to
                              hide a plain pickle from zipfile-based tools) */
    ck_zip_entry *e;      /* the records, in central directory order */
    size_t n;
    char *names;           /* every record's name and a NUL, in order */
    const char *names_end; /* past the last record's NUL */
    uint64_t names_charged; /* bytes of `names` charged to the arena */
    uint64_t cd_off;        /* the central directory's first byte */
    int64_t *cd_pos; /* each record's central directory entry; NULL while
                        every entry is 46 bytes and its name (torch's) */
    uint64_t *comp;  /* each record's compressed size; NULL while every
                        record's is its size (stored records: torch's) */
    ck_inflater *inflater; /* when records are deflated: sequential reads resume */
} ck_zip;

/* 0 stored, 8 deflated (the only methods the index accepts) */
static inline uint16_t ck_zip_method(const ck_zip_entry *z)
{
    return (z->at & CK_ZIP_DEFLATED) ? 8 : 0;
}
/* Where its bytes start in the archive. */
static inline uint64_t ck_zip_data_off(const ck_zip_entry *z)
{
    return z->at & CK_ZIP_OFF_MAX;
}
static inline uint64_t ck_zip_local_off(const ck_zip_entry *z)
{
    return ck_zip_data_off(z) - 30 - ((z->at & ~CK_ZIP_DEFLATED) >> CK_ZIP_OFF_BITS);
}
static inline const char *ck_zip_name(const ck_zip *a, const ck_zip_entry *z)
{
    return a->names + z->name;
}
/* The names are stored back to back: a name ends where the next begins. */
static inline size_t ck_zip_name_len(const ck_zip *a, const ck_zip_entry *z)
{
    size_t next = z + 1 < a->e + a->n ? z[1].name : (size_t)(a->names_end - a->names);
    return next - z->name - 1;
}

/* The bytes its content takes in the archive (deflated: compressed). */
static inline uint64_t ck_zip_comp_size(const ck_zip *a, const ck_zip_entry *z)
{
    return a->comp ? a->comp[z - a->e] : z->size;
}

/* Where a record's central directory entry starts (for messages). */
static inline int64_t ck_zip_cd_pos(const ck_zip *a, const ck_zip_entry *z)
{
    size_t i = (size_t)(z - a->e);
    if (a->cd_pos) return a->cd_pos[i];
    return (int64_t)(a->cd_off + 45 * (uint64_t)i + z->name);
}

/* Read the end records, the central directory and the local headers. */
int ck_zip_index(ck_zip *a, ckpt_error *err);
/* Bytes [off, off+n) of a record's content (inflated when deflated); the
 * caller checks the range against z->size.  Safe from several threads. */
int ck_zip_read(const ck_zip *a, const ck_zip_entry *z, uint64_t off, void *buf, size_t n,
                ckpt_error *err);
/* CRC-32 of a record's content. */
int ck_zip_crc(const ck_zip *a, const ck_zip_entry *z, uint32_t *crc, ckpt_error *err);
int ck_zip_crc_stored(const ck_zip *a, const ck_zip_entry *z, uint32_t *crc, ckpt_error *err);
int ck_zip_crc_deflated(const ck_zip *a, const ck_zip_entry *z, uint32_t *crc, ckpt_error *err);
/* Every record: local header against the directory, CRC, data descriptor;
 * `note` (may be NULL) hears what is worth saying but not wrong. */
int ck_zip_check(const ck_zip *a, void (*note)(void *, const char *),
                 void (*progress)(void *, uint64_t, uint64_t), void *ctx, ckpt_error *err);
void ck_zip_free(ck_zip *a);

#endif
