/* The serialized forms behind scan-private.h: the GVariant type of a scan record, and the registry cache's
 * bytes without the file around them (for the fuzz harness and the tests).  Internal to the plugin host. */
#ifndef CRL_REGISTRY_CACHE_PRIVATE_H
#define CRL_REGISTRY_CACHE_PRIVATE_H

#include "scan-private.h"

/* Text travels as NUL-terminated bytestrings ("ay", "may" where NULL is allowed), not "s": a path or a
 * plugin's strings need not be UTF-8, and must come back byte for byte.
 *   option:    name, type, flags, default, min, max, choices, doc
 *   component: kind, name, description, options
 *   record:    path, (dev, ino, size, mtime_ns, ctime_ns), status, reason, name, version, license,
 *              description, (abi_major, abi_minor), plugin options, components */
#define CRL__SCAN_OPTION_TYPE "(ayiumayddmaymay)"
#define CRL__SCAN_COMPONENT_TYPE "(iaymaya" CRL__SCAN_OPTION_TYPE ")"
#define CRL__SCAN_RECORD_TYPE \
    "(ay(tttxx)imaymaymaymaymay(uu)a" CRL__SCAN_OPTION_TYPE "a" CRL__SCAN_COMPONENT_TYPE ")"

/* What a record may hold; more is CRL_E_CORRUPT. */
#define CRL__SCAN_TEXT_MAX 65536        /* bytes in one string */
#define CRL__SCAN_COMPONENTS_MAX 4096
#define CRL__SCAN_OPTIONS_MAX 1024      /* per table */

/* The cache file (all integers little-endian):
 *    0  magic "CRLREG\0\1"
 *    8  u32 format version (CRL__REGCACHE_VERSION)
 *   12  u32 CRL_ABI_MAJOR, 16 u32 CRL_ABI_MINOR of the crl that wrote it
 *   20  u32 reserved, zero
 *   24  u64 payload length (the file is exactly 64 + this)
 *   32  SHA-256 of the payload
 *   64  payload: a GVariant "a" CRL__SCAN_RECORD_TYPE in normal form, records sorted by path */
#define CRL__REGCACHE_MAGIC "CRLREG\0\1"
#define CRL__REGCACHE_VERSION 1u
#define CRL__REGCACHE_HEADER 64
#define CRL__REGCACHE_FILE_MAX (64u << 20)
#define CRL__REGCACHE_ENTRIES_MAX 65536

/* crl__registry_cache_load after the file checks: parse `len` bytes read from `name` (used in the
 * warning).  Never NULL. */
CRL_INTERNAL crl__registry_cache *crl__registry_cache_load_bytes(const char *name, const void *data, size_t len,
                                                                 char **warning);
/* The whole file crl__registry_cache_save would write for the entries `c` holds now (no entry dropped). */
CRL_INTERNAL GBytes *crl__registry_cache_to_bytes(const crl__registry_cache *c);
/* Number of entries. */
CRL_INTERNAL size_t crl__registry_cache_size(const crl__registry_cache *c);

#endif
