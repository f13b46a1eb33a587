/* crl plugin SDK: checkpoint files and directories.  Since ABI 1.1.
 *
 * One format for everything crl saves (replay buffers, storages, samplers,
 * later models and optimizers): a file is a header (magic "CRLCKPT\0",
 * format version, a `kind` string naming what the file holds, the kind's own
 * version, section count), a table of sections (name, offset, size, CRC-32)
 * and the sections' bytes.  Readers validate everything before handing out a
 * byte: magic, versions, that every offset and size lies inside the file,
 * that sections do not overlap, and every checksum.  A problem is
 * CRL_E_CORRUPT "PATH: offset N: what is wrong" (or CRL_E_IO for a missing
 * or unreadable file).  All integers are little-endian.
 *
 * A section's bytes are its writer's: write every multi-byte field with the
 * fixed-width little-endian helpers below (crl_ckpt_put_u64, ...,
 * crl_ckpt_le_copy for arrays), never a struct, a host-order integer or a
 * double's memory, so a file reads the same on every host.  On load, check
 * each section's length and each value before using it, and fail with
 * CRL_E_CORRUPT naming the file (crl_ckpt_path), the section and the field.
 *
 * A checkpoint directory is written to "DIR.tmp-XXXXXX" next to DIR, every
 * file fsynced, then renamed over DIR (an old DIR is moved aside and removed
 * after the rename) and the parent directory fsynced: a crash leaves either
 * the old checkpoint or the new one, never a mix. */
#ifndef CRL_CHECKPOINT_H
#define CRL_CHECKPOINT_H

#include <crl/rng.h>
#include <crl/td.h>

#ifdef __cplusplus
extern "C" {
#endif

#define CRL_CKPT_FORMAT_VERSION 1
#define CRL_CKPT_MAX_SECTIONS 65536
#define CRL_CKPT_NAME_MAX 255

/* Fixed-width little-endian fields (header-only, no libcrl call).  `p`
 * points at the field's first byte, with no alignment needed; put writes
 * exactly the field's width, get reads it.  A double travels as the
 * little-endian bytes of its IEEE-754 binary64 bits; a crl_rng as its 12
 * 32-bit words in declaration order (CRL_CKPT_RNG_BYTES), which is what
 * the raw struct was on little-endian hosts. */
static inline void crl_ckpt_put_u32(uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

static inline void crl_ckpt_put_u64(uint8_t *p, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

static inline uint32_t crl_ckpt_get_u32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static inline uint64_t crl_ckpt_get_u64(const uint8_t *p)
{
    return (uint64_t)crl_ckpt_get_u32(p) | (uint64_t)crl_ckpt_get_u32(p + 4) << 32;
}

/* A union, not memcpy: SDK headers include no <string.h>. */
static inline void crl_ckpt_put_f64(uint8_t *p, double v)
{
    union { double d; uint64_t u; } x;
    x.d = v;
    crl_ckpt_put_u64(p, x.u);
}

static inline double crl_ckpt_get_f64(const uint8_t *p)
{
    union { double d; uint64_t u; } x;
    x.u = crl_ckpt_get_u64(p);
    return x.d;
}

#define CRL_CKPT_RNG_BYTES 48

static inline void crl_ckpt_put_rng(uint8_t *p, const crl_rng *r)
{
    const uint32_t w[12] = { r->key[0], r->key[1], r->ctr[0], r->ctr[1], r->ctr[2], r->ctr[3],
                             r->out[0], r->out[1], r->out[2], r->out[3], r->idx,    r->reserved };
    for (int i = 0; i < 12; i++)
        crl_ckpt_put_u32(p + 4 * i, w[i]);
}

/* False, leaving *r alone, for a state no stream can be in (a word index
 * past its block of 4, or the reserved word not 0): report CRL_E_CORRUPT. */
static inline bool crl_ckpt_get_rng(const uint8_t *p, crl_rng *r)
{
    uint32_t w[12];
    for (int i = 0; i < 12; i++)
        w[i] = crl_ckpt_get_u32(p + 4 * i);
    if (w[10] > 4 || w[11] != 0)
        return false;
    r->key[0] = w[0];
    r->key[1] = w[1];
    for (int i = 0; i < 4; i++) {
        r->ctr[i] = w[2 + i];
        r->out[i] = w[6 + i];
    }
    r->idx = w[10];
    r->reserved = w[11];
    return true;
}

/* True on a little-endian host (a constant the compiler folds). */
static inline bool crl_ckpt_host_is_le(void)
{
    const union { uint32_t u; uint8_t b[4]; } x = { 1 };
    return x.b[0] == 1;
}

/* Copy `count` elements of `elem_size` bytes (1, 2, 4 or 8: a crl_dtype's
 * size) from src to dst, reversing each element's bytes.  dst and src must
 * not overlap. */
static inline void crl_ckpt_byteswap_copy(void *dst, const void *src, size_t elem_size, size_t count)
{
    uint8_t *d = (uint8_t *)dst;
    const uint8_t *s = (const uint8_t *)src;
    for (size_t i = 0; i < count; i++, d += elem_size, s += elem_size)
        for (size_t k = 0; k < elem_size; k++)
            d[k] = s[elem_size - 1 - k];
}

/* Host-order elements to their little-endian form, or back (the same
 * operation): a plain copy on little-endian hosts, crl_ckpt_byteswap_copy
 * on big-endian ones.  For arrays of numbers (a tensor's bytes, float
 * moments) going into or coming out of a section.  dst and src must not
 * overlap. */
static inline void crl_ckpt_le_copy(void *dst, const void *src, size_t elem_size, size_t count)
{
    if (!crl_ckpt_host_is_le() && elem_size > 1) {
        crl_ckpt_byteswap_copy(dst, src, elem_size, count);
        return;
    }
    uint8_t *d = (uint8_t *)dst;
    const uint8_t *s = (const uint8_t *)src;
    for (size_t i = 0, n = elem_size * count; i < n; i++)
        d[i] = s[i];
}

/* CRC-32 (zlib's, ISO 3309) of data, continuing from crc (start with 0). */
CRL_API uint32_t crl_crc32(uint32_t crc, const void *data, size_t len);

typedef struct crl_ckpt_writer crl_ckpt_writer;

/* Start a checkpoint file at path (created or truncated).  kind names what
 * it holds ("crl.replay", "crl.storage.tensor"), kind_version its layout
 * version.  New writer; finish with crl_ckpt_writer_close (which frees it,
 * also on error) or drop it with crl_ckpt_writer_abort. */
CRL_API crl_ckpt_writer *crl_ckpt_writer_new(const char *path, const char *kind, uint32_t kind_version,
                                             crl_error *err);
/* Add a section (bytes copied or streamed out; name unique in the file,
 * 1..CRL_CKPT_NAME_MAX bytes).  CRL_E_EXISTS for a duplicate name. */
CRL_API int crl_ckpt_write(crl_ckpt_writer *w, const char *name, const void *data, size_t len, crl_error *err);
/* Add a TensorDict as sections "<prefix>/..." (batch shape, every leaf's
 * key, dtype, shape and contiguous bytes).  CPU tensors only. */
CRL_API int crl_ckpt_write_td(crl_ckpt_writer *w, const char *prefix, const crl_td *td, crl_error *err);
/* Write the table, fsync, close and free w.  CRL_E_IO names the path
 * ("no space left on device" included). */
CRL_API int crl_ckpt_writer_close(crl_ckpt_writer *w, crl_error *err);
/* Close, remove the file and free w.  NULL-safe. */
CRL_API void crl_ckpt_writer_abort(crl_ckpt_writer *w);

typedef struct crl_ckpt_reader crl_ckpt_reader;

/* Open and validate a whole file (header, table, every checksum).  kind
 * must match; a kind_version above max_kind_version is CRL_E_CORRUPT saying
 * the file is newer than this crl.  New reader, free with
 * crl_ckpt_reader_free. */
CRL_API crl_ckpt_reader *crl_ckpt_reader_open(const char *path, const char *kind, uint32_t max_kind_version,
                                              crl_error *err);
/* Open a checkpoint held in memory (the fuzz harness reads this way); name
 * stands for the path in messages.  The bytes are copied. */
CRL_API crl_ckpt_reader *crl_ckpt_reader_open_buffer(const char *name, const void *data, size_t len,
                                                     const char *kind, uint32_t max_kind_version, crl_error *err);
CRL_API void crl_ckpt_reader_free(crl_ckpt_reader *r);
CRL_API uint32_t crl_ckpt_kind_version(const crl_ckpt_reader *r);
CRL_API const char *crl_ckpt_path(const crl_ckpt_reader *r);
/* Borrowed bytes of a section (valid until the reader is freed) and its
 * size.  CRL_E_CORRUPT naming the file and the missing section. */
CRL_API const void *crl_ckpt_section(const crl_ckpt_reader *r, const char *name, size_t *len, crl_error *err);
/* The same, requiring exactly `len` bytes (CRL_E_CORRUPT with both sizes). */
CRL_API int crl_ckpt_read(const crl_ckpt_reader *r, const char *name, void *out, size_t len, crl_error *err);
CRL_API bool crl_ckpt_has(const crl_ckpt_reader *r, const char *name);
/* The sections in file order: how many, and the name of section i (NULL
 * when i is out of range; borrowed, valid until the reader is freed). */
CRL_API size_t crl_ckpt_section_count(const crl_ckpt_reader *r);
CRL_API const char *crl_ckpt_section_name(const crl_ckpt_reader *r, size_t i);
/* Rebuild a TensorDict written by crl_ckpt_write_td, validating dtypes,
 * shapes against byte sizes and key syntax.  New reference. */
CRL_API crl_td *crl_ckpt_read_td(const crl_ckpt_reader *r, const char *prefix, crl_error *err);

/* Checkpoint directories.  begin creates "DIR.tmp-XXXXXX" and returns its
 * path (free with crl_free); commit fsyncs every file in it, renames it to
 * dir (replacing an old dir) and fsyncs the parent; abort removes it. */
CRL_API char *crl_ckpt_dir_begin(const char *dir, crl_error *err);
CRL_API int crl_ckpt_dir_commit(const char *tmpdir, const char *dir, crl_error *err);
CRL_API void crl_ckpt_dir_abort(const char *tmpdir);
/* Remove what interrupted writes of dir left next to it (a process killed
 * between begin and commit or abort, or while commit removed the old DIR):
 * the directories named exactly "DIR.tmp-XXXXXX" or "DIR.old-XXXXXX" (six
 * letters or digits), real directories owned by the calling user.
 * Anything else of such a name (a symlink, a file) is left alone; the
 * removal follows no symlink and enters no other filesystem.  Call it only
 * while no other process writes checkpoints of dir (crl run holds a lock on
 * its run directory).  *removed (may be NULL) receives how many were
 * removed.  Errors: CRL_E_INVALID for a NULL or empty dir, CRL_E_IO when the
 * parent cannot be listed or a leftover cannot be removed whole (naming it;
 * the others are still removed).  Since ABI 1.2. */
CRL_API int crl_ckpt_dir_clean(const char *dir, size_t *removed, crl_error *err);

#ifdef __cplusplus
}
#endif
#endif
