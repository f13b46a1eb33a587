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
 * A checkpoint directory is written to "DIR.tmp-XXXXXX" next to DIR, every
 * file fsynced, then renamed over DIR (an old DIR is moved aside and removed
 * after the rename) and the parent directory fsynced: a crash leaves either
 * the old checkpoint or the new one, never a mix. */
#ifndef CRL_CHECKPOINT_H
#define CRL_CHECKPOINT_H

#include <crl/td.h>

#ifdef __cplusplus
extern "C" {
#endif

#define CRL_CKPT_FORMAT_VERSION 1
#define CRL_CKPT_MAX_SECTIONS 65536
#define CRL_CKPT_NAME_MAX 255

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

#ifdef __cplusplus
}
#endif
#endif
