/* Shared by the fuzz targets: recompute a checkpoint's CRCs so mutations reach the checks behind them. */
#ifndef CRL_FUZZ_CRC_H
#define CRL_FUZZ_CRC_H

#include <crl/checkpoint.h>

#include <stdint.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* A broken invariant is a crash the fuzzer reports. */
#define CHECK(c) \
    do { \
        if (!(c)) \
            __builtin_trap(); \
    } while (0)

static uint32_t le32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static uint64_t le64(const uint8_t *p)
{
    return (uint64_t)le32(p) | (uint64_t)le32(p + 4) << 32;
}

static void put32(uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

/* Rewrite every CRC the input's own fields point at (sections, table,
 * header), so mutations reach the checks behind the checksums.  Fields out
 * of range are left alone for the reader to refuse. */
static void fix_crcs(uint8_t *b, size_t len)
{
    if (len < 48)
        return;
    uint64_t toff = le64(b + 24), tsize = le64(b + 32);
    if (toff <= len && tsize <= len - toff) {
        uint64_t p = toff, end = toff + tsize;
        while (p <= end && end - p >= 24) {
            uint64_t off = le64(b + p), sz = le64(b + p + 8);
            if (off <= len && sz <= len - off)
                put32(b + p + 16, crl_crc32(0, b + off, (size_t)sz));
            p += 24 + ((uint32_t)b[p + 20] | (uint32_t)b[p + 21] << 8);
        }
        put32(b + 40, crl_crc32(0, b + toff, (size_t)tsize));
    }
    uint32_t klen = le32(b + 20);
    size_t hend = (48 + (size_t)klen + 7) & ~(size_t)7;
    if (klen <= 255 && hend <= len)
        put32(b + 44, crl_crc32(crl_crc32(0, b, 44), b + 48, hend - 48));
}

/* Run one input as given, then with its CRCs made right (when that changes
 * it), so the sections' contents get validated too. */
static void fuzz_with_fixed_crcs(const uint8_t *data, size_t size, void (*one)(const uint8_t *, size_t))
{
    one(data, size);
    uint8_t *fixed = malloc(size ? size : 1);
    CHECK(fixed);
    memcpy(fixed, data, size);
    fix_crcs(fixed, size);
    if (memcmp(fixed, data, size) != 0)
        one(fixed, size);
    free(fixed);
}

#endif
