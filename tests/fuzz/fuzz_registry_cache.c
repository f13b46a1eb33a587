/* Fuzz target for the plugin registry cache reader: parse a buffer as a cache file; a cache that loads must
 * write back to bytes that load to the same cache. */
#include "registry-cache-private.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* A broken invariant is a crash, so libFuzzer (or the corpus replay) reports it. */
#define CHECK(c) \
    do { \
        if (!(c)) \
            __builtin_trap(); \
    } while (0)

#define NAME "fuzz.bin"

static void one_input(const uint8_t *data, size_t size)
{
    char *warning = NULL;
    crl__registry_cache *c = crl__registry_cache_load_bytes(NAME, data, size, &warning);
    CHECK(c);
    if (warning) {
        CHECK(strncmp(warning, "plugin registry cache " NAME ": ", strlen("plugin registry cache " NAME ": ")) == 0);
        CHECK(strstr(warning, "it will be rebuilt"));
        CHECK(crl__registry_cache_size(c) == 0);
        g_free(warning);
        crl__registry_cache_free(c);
        return;
    }
    /* Accepted: writing it out gives a file that loads cleanly, to the same bytes again. */
    GBytes *once = crl__registry_cache_to_bytes(c);
    gsize n1 = 0;
    const void *b1 = g_bytes_get_data(once, &n1);
    crl__registry_cache *again = crl__registry_cache_load_bytes(NAME, b1, n1, &warning);
    CHECK(!warning);
    CHECK(crl__registry_cache_size(again) == crl__registry_cache_size(c));
    GBytes *twice = crl__registry_cache_to_bytes(again);
    CHECK(g_bytes_equal(once, twice));
    g_bytes_unref(twice);
    g_bytes_unref(once);
    crl__registry_cache_free(again);
    crl__registry_cache_free(c);
}

/* Rewrite the length and checksum so mutations reach the GVariant and record checks behind them. */
static void reseal(uint8_t *b, size_t len)
{
    uint64_t plen = len - CRL__REGCACHE_HEADER;
    for (int i = 0; i < 8; i++)
        b[24 + i] = (uint8_t)(plen >> (8 * i));
    GChecksum *cs = g_checksum_new(G_CHECKSUM_SHA256);
    g_checksum_update(cs, b + CRL__REGCACHE_HEADER, (gssize)plen);
    gsize n = 32;
    g_checksum_get_digest(cs, b + 32, &n);
    g_checksum_free(cs);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    one_input(data, size);
    if (size < CRL__REGCACHE_HEADER)
        return 0;
    uint8_t *fixed = malloc(size);
    CHECK(fixed);
    memcpy(fixed, data, size);
    reseal(fixed, size);
    if (memcmp(fixed, data, size) != 0)
        one_input(fixed, size);
    free(fixed);
    return 0;
}
