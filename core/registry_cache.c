/* The plugin registry cache: scan results keyed by path and file identity, in one checksummed file per ABI
 * (layout in registry-cache-private.h).  The file is the user's own but still read as hostile input: a bad
 * one is never an error, only a warning and a rescan. */
#include "registry-cache-private.h"
#include "file-private.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

struct crl__registry_cache {
    GHashTable *by_path; /* r->path (borrowed from the value) -> crl__scan_result * (owned) */
    bool dirty;          /* changed since load: save writes */
};

char *crl__registry_cache_file(void)
{
    char name[64];
    g_snprintf(name, sizeof name, "registry-%d.%d.bin", CRL_ABI_MAJOR, CRL_ABI_MINOR);
    return g_build_filename(g_get_user_cache_dir(), "crl", name, NULL);
}

static crl__registry_cache *cache_new(void)
{
    crl__registry_cache *c = g_new0(crl__registry_cache, 1);
    c->by_path = g_hash_table_new_full(g_str_hash, g_str_equal, NULL, (GDestroyNotify)crl__scan_result_free);
    return c;
}

void crl__registry_cache_free(crl__registry_cache *c)
{
    if (!c)
        return;
    g_hash_table_destroy(c->by_path);
    g_free(c);
}

size_t crl__registry_cache_size(const crl__registry_cache *c)
{
    return c ? g_hash_table_size(c->by_path) : 0;
}

const crl__scan_result *crl__registry_cache_lookup(const crl__registry_cache *c, const char *path,
                                                   const crl__file_id *id)
{
    if (!c || !path || !id)
        return NULL;
    const crl__scan_result *r = g_hash_table_lookup(c->by_path, path);
    return r && crl__file_id_equal(&r->id, id) ? r : NULL;
}

void crl__registry_cache_put(crl__registry_cache *c, crl__scan_result *r)
{
    if (!c || !r || !r->path) {
        crl__scan_result_free(r);
        return;
    }
    /* replace, not insert: the key lives in the value, so the old key must go with the old value. */
    g_hash_table_replace(c->by_path, r->path, r);
    c->dirty = true;
}

void crl__registry_cache_clear(crl__registry_cache *c)
{
    if (!c)
        return;
    g_hash_table_remove_all(c->by_path);
    c->dirty = true;
}

/* ---- bytes ---------------------------------------------------------------------------------------------- */

static uint32_t get32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static uint64_t get64(const uint8_t *p)
{
    return (uint64_t)get32(p) | (uint64_t)get32(p + 4) << 32;
}

static void put32(uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

static void put64(uint8_t *p, uint64_t v)
{
    put32(p, (uint32_t)v);
    put32(p + 4, (uint32_t)(v >> 32));
}

static void sha256(const void *data, size_t len, uint8_t out[32])
{
    GChecksum *cs = g_checksum_new(G_CHECKSUM_SHA256);
    g_checksum_update(cs, data, (gssize)len);
    gsize n = 32;
    g_checksum_get_digest(cs, out, &n);
    g_checksum_free(cs);
}

static int by_path(const void *a, const void *b)
{
    const crl__scan_result *x = *(const crl__scan_result *const *)a, *y = *(const crl__scan_result *const *)b;
    return strcmp(x->path, y->path);
}

GBytes *crl__registry_cache_to_bytes(const crl__registry_cache *c)
{
    /* Sorted, so the same entries always give the same file. */
    GPtrArray *all = g_ptr_array_new();
    if (c) {
        GHashTableIter it;
        gpointer v;
        g_hash_table_iter_init(&it, c->by_path);
        while (g_hash_table_iter_next(&it, NULL, &v))
            g_ptr_array_add(all, v);
    }
    g_ptr_array_sort(all, by_path);
    GVariantBuilder b;
    g_variant_builder_init(&b, G_VARIANT_TYPE("a" CRL__SCAN_RECORD_TYPE));
    for (guint i = 0; i < all->len; i++)
        g_variant_builder_add_value(&b, crl__scan_result_to_variant(all->pdata[i]));
    g_ptr_array_free(all, TRUE);
    GVariant *tree = g_variant_ref_sink(g_variant_builder_end(&b));
    GVariant *v = g_variant_get_normal_form(tree);
    g_variant_unref(tree);
    size_t len = g_variant_get_size(v);
    uint8_t *buf = g_malloc(CRL__REGCACHE_HEADER + len);
    memset(buf, 0, CRL__REGCACHE_HEADER);
    memcpy(buf, CRL__REGCACHE_MAGIC, 8);
    put32(buf + 8, CRL__REGCACHE_VERSION);
    put32(buf + 12, CRL_ABI_MAJOR);
    put32(buf + 16, CRL_ABI_MINOR);
    put64(buf + 24, len);
    if (len)
        g_variant_store(v, buf + CRL__REGCACHE_HEADER);
    sha256(buf + CRL__REGCACHE_HEADER, len, buf + 32);
    g_variant_unref(v);
    return g_bytes_new_take(buf, CRL__REGCACHE_HEADER + len);
}

static crl__registry_cache *refuse(crl__registry_cache *c, char **warning, const char *name, const char *fmt, ...)
    CRL_PRINTF(4, 5);

/* The empty cache and the warning for a file that cannot be used. */
static crl__registry_cache *refuse(crl__registry_cache *c, char **warning, const char *name, const char *fmt, ...)
{
    if (warning) {
        va_list ap;
        va_start(ap, fmt);
        char *why = g_strdup_vprintf(fmt, ap);
        va_end(ap);
        *warning = g_strdup_printf("plugin registry cache %s: %s; it will be rebuilt (plugins are rescanned)", name,
                                   why);
        g_free(why);
    }
    crl__registry_cache_free(c);
    return cache_new();
}

crl__registry_cache *crl__registry_cache_load_bytes(const char *name, const void *data, size_t len, char **warning)
{
    const uint8_t *b = data;
    if (warning)
        *warning = NULL;
    if (len == 0)
        return refuse(NULL, warning, name, "the file is empty");
    if (len < CRL__REGCACHE_HEADER)
        return refuse(NULL, warning, name, "truncated: %zu bytes, shorter than the %d-byte header", len,
                      CRL__REGCACHE_HEADER);
    if (memcmp(b, CRL__REGCACHE_MAGIC, 8) != 0)
        return refuse(NULL, warning, name, "not a crl plugin registry cache (bad magic)");
    uint32_t version = get32(b + 8), major = get32(b + 12), minor = get32(b + 16), reserved = get32(b + 20);
    if (version != CRL__REGCACHE_VERSION)
        return refuse(NULL, warning, name, "format version %" PRIu32 ", but this crl reads version %u", version,
                      CRL__REGCACHE_VERSION);
    if (major != CRL_ABI_MAJOR || minor != CRL_ABI_MINOR)
        return refuse(NULL, warning, name, "written for plugin ABI %" PRIu32 ".%" PRIu32 ", but this crl has ABI %d.%d",
                      major, minor, CRL_ABI_MAJOR, CRL_ABI_MINOR);
    if (reserved != 0)
        return refuse(NULL, warning, name, "header field at offset 20 is %" PRIu32 ", not 0 (corrupt header)",
                      reserved);
    uint64_t plen = get64(b + 24);
    if (plen > CRL__REGCACHE_FILE_MAX - CRL__REGCACHE_HEADER)
        return refuse(NULL, warning, name, "header claims a payload of %" PRIu64 " bytes, more than the %u MiB limit",
                      plen, CRL__REGCACHE_FILE_MAX >> 20);
    if (plen != len - CRL__REGCACHE_HEADER)
        return refuse(NULL, warning, name, "header claims a payload of %" PRIu64 " bytes but the file holds %zu%s",
                      plen, len - CRL__REGCACHE_HEADER,
                      plen > len - CRL__REGCACHE_HEADER ? " (truncated)" : " (trailing bytes)");
    uint8_t sum[32];
    sha256(b + CRL__REGCACHE_HEADER, (size_t)plen, sum);
    if (memcmp(sum, b + 32, 32) != 0)
        return refuse(NULL, warning, name, "payload checksum mismatch (SHA-256): the file is corrupt");

    /* A copy: the payload must be aligned for GVariant, and the caller's buffer may not be. */
    GBytes *bytes = g_bytes_new(b + CRL__REGCACHE_HEADER, (size_t)plen);
    GVariant *v = g_variant_ref_sink(g_variant_new_from_bytes(G_VARIANT_TYPE("a" CRL__SCAN_RECORD_TYPE), bytes, FALSE));
    g_bytes_unref(bytes);
    crl__registry_cache *c = cache_new();
    if (!g_variant_is_normal_form(v)) {
        g_variant_unref(v);
        return refuse(c, warning, name, "the payload is malformed (not a GVariant a%s in normal form)",
                      CRL__SCAN_RECORD_TYPE);
    }
    gsize n = g_variant_n_children(v);
    if (n > CRL__REGCACHE_ENTRIES_MAX) {
        g_variant_unref(v);
        return refuse(c, warning, name, "%zu entries, more than %d", (size_t)n, CRL__REGCACHE_ENTRIES_MAX);
    }
    for (gsize i = 0; i < n; i++) {
        GVariant *rv = g_variant_get_child_value(v, i);
        crl_error e = { 0 };
        crl__scan_result *r = crl__scan_result_from_variant(rv, &e);
        g_variant_unref(rv);
        if (!r) {
            g_variant_unref(v);
            return refuse(c, warning, name, "entry %zu: %s", (size_t)i, e.message);
        }
        if (g_hash_table_contains(c->by_path, r->path)) {
            crl__scan_result_free(r);
            g_variant_unref(v);
            return refuse(c, warning, name, "entry %zu: a second entry for the same path", (size_t)i);
        }
        g_hash_table_insert(c->by_path, r->path, r);
    }
    g_variant_unref(v);
    return c;
}

/* ---- the file ------------------------------------------------------------------------------------------- */

crl__registry_cache *crl__registry_cache_load(const char *file, char **warning)
{
    if (warning)
        *warning = NULL;
    if (!file)
        return cache_new();
    /* No final symlink (someone else's file could stand behind it), no blocking open of a FIFO, no
     * controlling terminal from a device, no reading of more than the limit. */
    crl_error e;
    crl_error_clear(&e);
    struct stat st;
    int fd = crl__file_open(file, CRL_FILE_NOFOLLOW, CRL__REGCACHE_FILE_MAX, &st, &e);
    if (fd < 0) {
        if (e.code == CRL_E_NOT_FOUND)
            return cache_new();
        return refuse(NULL, warning, file, "cannot open: %s", e.message);
    }
    crl__registry_cache *c = NULL;
    uint8_t *buf = NULL;
    /* Another user's (or a group-writable) file could feed the host results for plugins it never scanned. */
    if (st.st_uid != geteuid()) {
        c = refuse(NULL, warning, file, "it is owned by uid %u, not by the effective user (uid %u)",
                   (unsigned)st.st_uid, (unsigned)geteuid());
        goto out;
    }
    if (st.st_mode & (S_IWGRP | S_IWOTH)) {
        c = refuse(NULL, warning, file, "it is writable by group or others (mode %04o)",
                   (unsigned)(st.st_mode & 07777));
        goto out;
    }
    size_t size = (size_t)st.st_size, got = 0;
    buf = g_malloc(size ? size : 1);
    while (got < size) {
        ssize_t n = read(fd, buf + got, size - got);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            c = refuse(NULL, warning, file, "cannot read: %s", g_strerror(errno));
            goto out;
        }
        if (n == 0)
            break; /* shrank since fstat: parsed as what it is now */
        got += (size_t)n;
    }
    c = crl__registry_cache_load_bytes(file, buf, got, warning);
out:
    g_free(buf);
    close(fd);
    return c;
}

/* Entries the next load would refuse (a result nobody validated) would cost every entry: drop them. */
static gboolean stale(gpointer key, gpointer value, gpointer data)
{
    struct stat st;
    if (stat((const char *)key, &st) != 0)
        return TRUE;
    GVariant *v = g_variant_ref_sink(crl__scan_result_to_variant(value));
    crl__scan_result *back = crl__scan_result_from_variant(v, NULL);
    g_variant_unref(v);
    crl__scan_result_free(back);
    return back == NULL;
}

int crl__registry_cache_save(crl__registry_cache *c, const char *file, crl_error *err)
{
    if (!c || !file || !*file)
        return crl_error_set(err, CRL_E_INVALID, "crl__registry_cache_save: %s is %s", !c ? "cache" : "file",
                             !c || !file ? "NULL" : "empty");
    if (!c->dirty)
        return CRL_OK;
    g_hash_table_foreach_remove(c->by_path, stale, NULL);
    char *dir = g_path_get_dirname(file);
    if (g_mkdir_with_parents(dir, 0700) != 0) {
        int e = errno;
        int rc = crl_error_set(err, CRL_E_IO, "plugin registry cache %s: cannot create the directory %s: %s", file,
                               dir, g_strerror(e));
        g_free(dir);
        return rc;
    }
    g_free(dir);
    GBytes *bytes = crl__registry_cache_to_bytes(c);
    gsize len = 0;
    const void *data = g_bytes_get_data(bytes, &len);
    GError *gerr = NULL;
    /* Written to a temporary, fsynced and renamed over the old one: readers see the old or the new file. */
    gboolean ok = g_file_set_contents_full(file, data, (gssize)len, G_FILE_SET_CONTENTS_CONSISTENT, 0600, &gerr);
    g_bytes_unref(bytes);
    if (!ok) {
        int rc = crl_error_set(err, CRL_E_IO, "plugin registry cache %s: cannot write it: %s", file, gerr->message);
        g_error_free(gerr);
        return rc;
    }
    c->dirty = false;
    return CRL_OK;
}
