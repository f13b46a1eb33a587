/* Checkpoint internals shared by checkpoint.c, checkpoint_td.c and checkpoint_dir.c. */
#ifndef CRL_CHECKPOINT_PRIVATE_H
#define CRL_CHECKPOINT_PRIVATE_H

#include "crl-private.h"

#include <crl/checkpoint.h>

/* On-disk layout (all integers little-endian):
 *
 *   header   0  magic "CRLCKPT\0"
 *            8  u32 format version (CRL_CKPT_FORMAT_VERSION)
 *           12  u32 kind version
 *           16  u32 section count
 *           20  u32 kind length (1..CRL_CKPT_NAME_MAX)
 *           24  u64 table offset
 *           32  u64 table size
 *           40  u32 CRC-32 of the table
 *           44  u32 CRC-32 of header bytes [0, 44) and [48, header end)
 *           48  kind bytes, zero padding to a multiple of 8 (header end)
 *   sections in table order, each starting at the next multiple of 8 after
 *            the previous one (zero padding between), the first at the
 *            header end
 *   table    at the next multiple of 8 after the last section, running to
 *            the end of the file; per section: u64 offset, u64 size,
 *            u32 CRC-32, u16 name length (1..CRL_CKPT_NAME_MAX), u16 zero,
 *            name bytes (no NUL); entries packed
 *
 * The writer streams the sections, writes the table, fsyncs, then writes
 * the header (zeros until then) and fsyncs again: a valid header means the
 * whole file reached the disk.  Every byte of a file is covered by a CRC or
 * must hold one exact value, so any flipped byte or truncation is caught. */
#define CRL__CKPT_MAGIC "CRLCKPT\0"
#define CRL__CKPT_HEADER_FIXED 48
#define CRL__CKPT_ENTRY_FIXED 24

/* File offset of a section's first byte (for messages); 0 when absent. */
CRL_INTERNAL uint64_t crl__ckpt_section_offset(const crl_ckpt_reader *r, const char *name);

/* Little-endian accessors (the format is LE on every host). */
static inline uint32_t crl__le32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static inline uint64_t crl__le64(const uint8_t *p)
{
    return (uint64_t)crl__le32(p) | (uint64_t)crl__le32(p + 4) << 32;
}

static inline void crl__put_le32(uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

static inline void crl__put_le64(uint8_t *p, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

/* crl_ckpt_le_copy with memcpy's speed on little-endian hosts, for tensor
 * bytes (a replay buffer's can be gigabytes). */
static inline void crl__ckpt_le_copy(void *dst, const void *src, size_t elem_size, size_t count)
{
#if G_BYTE_ORDER == G_LITTLE_ENDIAN
    if (count)
        memcpy(dst, src, elem_size * count);
#else
    crl_ckpt_le_copy(dst, src, elem_size, count);
#endif
}

#endif
