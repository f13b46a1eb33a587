/* What the plugin scanner learns of one plugin file, how it travels (scanner report, registry cache), and the
 * registry cache itself.  Internal to the plugin host (layer 2). */
#ifndef CRL_SCAN_PRIVATE_H
#define CRL_SCAN_PRIVATE_H

#include "crl-private.h"

#include <sys/stat.h>

/* The identity of a plugin file when it was scanned: a cached result holds while all of these match. */
typedef struct crl__file_id {
    uint64_t dev, ino, size;
    int64_t mtime_ns, ctime_ns;
} crl__file_id;

/* One component the plugin registered, copied out of the plugin (all strings and tables owned). */
typedef struct crl__scan_component {
    int32_t kind;               /* crl_kind */
    char *name;
    char *description;
    crl_option *options;        /* owned copy ending with CRL_OPTIONS_END (never NULL); strings owned */
} crl__scan_component;

/* The scan of one plugin file.  `status` is CRL_OK for a plugin that passed every check, or the error code
 * that makes it broken, with `reason` the message (always set when broken: the signal, exit status,
 * timeout, ABI or validation failure, naming the fix).  The descriptor fields are set when the scan got as
 * far as reading the descriptor (name may be NULL otherwise). */
typedef struct crl__scan_result {
    char *path;                 /* the file as found along the search path */
    crl__file_id id;
    int32_t status;
    char *reason;
    char *name, *version, *license, *description;
    uint32_t abi_major, abi_minor;
    crl_option *plugin_options; /* the [plugin.NAME] table: owned copy ending with CRL_OPTIONS_END, never NULL */
    crl__scan_component *components;
    size_t n_components;
} crl__scan_result;

/* The identity of an open file or a path (stat, following symlinks). */
CRL_INTERNAL void crl__file_id_from_stat(const struct stat *st, crl__file_id *id);
CRL_INTERNAL bool crl__file_id_equal(const crl__file_id *a, const crl__file_id *b);

/* A new empty result for `path` (copied), status CRL_OK, empty option tables.  Never NULL. */
CRL_INTERNAL crl__scan_result *crl__scan_result_new(const char *path);
/* NULL-safe. */
CRL_INTERNAL void crl__scan_result_free(crl__scan_result *r);
/* Deep copy of an option table ending with CRL_OPTIONS_END (NULL gives an empty table). */
CRL_INTERNAL crl_option *crl__options_dup(const crl_option *table);
CRL_INTERNAL void crl__options_free(crl_option *table);

/* A result as bytes (a GVariant in normal form) and back.  Deserializing treats the bytes as hostile:
 * any malformed, truncated or out-of-range content is CRL_E_CORRUPT with a message, never a crash; kinds,
 * option types and names are validated as crl_host_register would. */
CRL_INTERNAL GVariant *crl__scan_result_to_variant(const crl__scan_result *r);
CRL_INTERNAL crl__scan_result *crl__scan_result_from_variant(GVariant *v, crl_error *err);

/* ---- scanning (scanner.c) --------------------------------------------------------------------------- */

/* The scanner program: $CRL_PLUGIN_SCANNER (secure_getenv), else the installed libexec one. */
CRL_INTERNAL const char *crl__scanner_path(void);
/* Scan `path` (whose identity the caller took as `id`) in a scanner process, giving it `timeout_s` seconds
 * for load, init, report and fini.  *out is always a new result (free with crl__scan_result_free): good,
 * or broken with the reason (crash with signal and stage, exit, timeout, refusal, validation).  Returns
 * CRL_OK when the result says something about the plugin itself and may be cached; otherwise the code of
 * why it may not (CRL_E_TIMEOUT: a deadline on a busy machine; CRL_E_PLUGIN/CRL_E_IO: no scanner). */
CRL_INTERNAL int crl__scan_file(const char *path, const crl__file_id *id, double timeout_s,
                                crl__scan_result **out);
/* The entry of the scanner program (scanner_main.c): `crl-plugin-scanner --report-fd FD PLUGIN.so`. */

/* ---- the registry cache ------------------------------------------------------------------------------ */

typedef struct crl__registry_cache crl__registry_cache;

/* $XDG_CACHE_HOME/crl/registry-<ABI major>.<ABI minor>.bin (g_get_user_cache_dir); g_free. */
CRL_INTERNAL char *crl__registry_cache_file(void);
/* Read the cache at `file`.  Never NULL: a missing file gives an empty cache; an unreadable, foreign
 * (not owned by the effective user, not a regular file), oversized, corrupt (bad magic, version or
 * checksum) or malformed one gives an empty cache and *warning (g_free) saying why and that it will be
 * rebuilt.  The file is opened without following a final symlink and without blocking (a FIFO is
 * refused). */
CRL_INTERNAL crl__registry_cache *crl__registry_cache_load(const char *file, char **warning);
/* The cached result for `path` if its identity still matches `id`; borrowed, NULL when none. */
CRL_INTERNAL const crl__scan_result *crl__registry_cache_lookup(const crl__registry_cache *c, const char *path,
                                                                 const crl__file_id *id);
/* Store `r` (ownership passes to the cache), replacing any entry for the same path. */
CRL_INTERNAL void crl__registry_cache_put(crl__registry_cache *c, crl__scan_result *r);
/* Drop every entry (crl plugins --rescan). */
CRL_INTERNAL void crl__registry_cache_clear(crl__registry_cache *c);
/* Write the cache when it changed: entries whose file no longer exists are dropped; the directory is made
 * 0700 when missing; the file is written to a temporary and renamed (atomic), mode 0600.  CRL_E_IO with a
 * message naming the file when it cannot be written (callers then go on uncached). */
CRL_INTERNAL int crl__registry_cache_save(crl__registry_cache *c, const char *file, crl_error *err);
/* NULL-safe. */
CRL_INTERNAL void crl__registry_cache_free(crl__registry_cache *c);

#endif
