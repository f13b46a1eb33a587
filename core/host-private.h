/* Internals of the plugin host shared by host.c, registry.c, loader.c, probe.c, plugin_file.c, log.c.
 * Within the host, files use each other downwards only (core/LAYERS): plugin_file < registry < host <
 * loader < probe, so the registry loads a deferred plugin through the callback the loader installs. */
#ifndef CRL_HOST_PRIVATE_H
#define CRL_HOST_PRIVATE_H

#include "crl-private.h"

/* One loaded plugin.  info's strings point into the descriptor (static data
 * of the plugin, valid while it is loaded) except path, which is owned. */
typedef struct crl__plugin {
    crl_plugin_info info;
    const crl_plugin_desc *desc;
    void *handle;            /* dlopen handle; NULL for a built-in */
    void *base;              /* where the object is mapped (dladdr), to name log callers */
    char *path;              /* owned; "(built-in)" for a built-in */
    GPtrArray *journal;      /* crl__reg_entry * registered by this plugin's init */
    bool initialized;        /* init returned CRL_OK */
    /* Known from its scan but not loaded yet: its registry entries are stubs (ops NULL) that the first
     * lookup of one of them replaces by loading the plugin (lazy loading). */
    bool deferred;
    struct crl__scan_result *scan;  /* owned, for a deferred plugin: what info's strings point into */
    const crl_option *options;      /* the [plugin.NAME] table (descriptor's or scan's), never NULL */
} crl__plugin;

/* One registry entry: the component as the host copied it and its owner. */
typedef struct crl__reg_entry {
    crl_component comp;
    crl__plugin *owner;
} crl__reg_entry;

/* One kind's registry: by name, and sorted by name for listing. */
typedef struct crl__registry {
    GHashTable *by_name;     /* name -> crl__reg_entry * (entries owned here) */
    GPtrArray *sorted;       /* crl__reg_entry *, by strcmp of name */
} crl__registry;

typedef struct crl__failure {
    crl_error error;
    char *path;              /* file, or the plugin name when no file was found */
} crl__failure;

struct crl_host {
    const crl_config *cfg;          /* borrowed (or own_cfg) */
    crl_config *own_cfg;            /* the empty config made for cfg == NULL */
    GPtrArray *plugins;             /* crl__plugin *, load order */
    GArray *failures;               /* crl__failure */
    crl__registry reg[CRL_KIND_COUNT];
    crl__plugin *current;           /* plugin whose init is running */
    crl__plugin *in_fini;           /* plugin whose fini is running (for log prefixes) */
    int current_reg_code;           /* first refused registration during init */
    char **search_path;             /* latest crl_host_search_path result */
    GPtrArray *retired;             /* old search paths and schemas, freed with the host */
    crl_schema *schema;
    bool schema_dirty;
    bool load_attempted;            /* some load_* ran: [plugin.X] must name a loaded plugin */
    bool python_promoted;
    int probe_fd;                   /* -1, or the probe child's report pipe */
    /* Scanning (loader.c): the registry cache, read once per host. */
    struct crl__registry_cache *cache;
    char *cache_file;               /* NULL: no usable cache directory (work uncached) */
    bool cache_loaded;
    bool rescan;                    /* crl_host_set_rescan: ignore cached results */
    /* Lazy loading may happen inside a lookup from any thread. */
    GRecMutex lock;
    /* Set by the loader when it defers a plugin: loads deferred plugin `p` for a lookup (its stubs make
     * way for its real components; `p` is freed), recording and logging a failure. */
    void (*load_deferred)(crl_host *host, crl__plugin *p);
    /* When set, crl_host_log hands its formatted line ("crl: [plugin] message\n") here instead of writing
     * it to stderr (crl-env-worker labels its lines and keeps the warnings its envs' close logs). */
    void (*log_sink)(void *user, int level, const char *line);
    void *log_sink_user;
};

/* registry.c */
CRL_INTERNAL void crl__registry_init(crl_host *host);
CRL_INTERNAL void crl__registry_destroy(crl_host *host);
/* Remove every component `p` registered (failed init, or unload). */
CRL_INTERNAL void crl__registry_unwind(crl_host *host, crl__plugin *p);
/* Register a stub entry (ops NULL) for deferred plugin `p`: CRL_E_EXISTS when kind/name is taken. */
CRL_INTERNAL int crl__registry_add_stub(crl_host *host, crl__plugin *p, int kind, const char *name,
                                        const char *description, const crl_option *options, crl_error *err);
/* The entry for kind/name without loading anything (the schema asks for option tables). */
CRL_INTERNAL const crl_component *crl__host_peek(const crl_host *host, crl_kind kind, const char *name);
CRL_INTERNAL bool crl__kind_valid(int kind);

/* host.c */
/* Recompute the search path from the config and environment: a new
 * NULL-terminated vector, free with g_strfreev. */
CRL_INTERNAL char **crl__host_compute_search_path(const crl_host *host, crl_error *err);
CRL_INTERNAL crl__plugin *crl__host_find_plugin(const crl_host *host, const char *name);
CRL_INTERNAL void crl__plugin_free(crl__plugin *p);
/* Keep the scan of a deferred plugin that was loaded until the host is freed: option tables handed out
 * from it (schemas, crl_schema_tables) stay valid. */
CRL_INTERNAL void crl__host_retire_scan(crl_host *host, struct crl__scan_result *scan);
/* The option table that stands for "none declared" (never NULL). */
CRL_INTERNAL const crl_option *crl__no_options(void);

/* plugin_file.c */
/* The plugin name a file must declare: its basename without ".so". */
CRL_INTERNAL char *crl__plugin_name_from_path(const char *path);

/* secure_path.c: resolve `path` component by component, following every symlink, and refuse (CRL_E_PERM,
 * naming the component and the chmod/chown that fixes it) any file, directory or symlink target that a
 * user other than root or the effective user could replace: owned by another user, world-writable (except a
 * sticky directory), or group-writable by a group other than root's.  The final file must be regular.
 * `what` names the object in messages ("plugin 'x' (PATH)").  On success *resolved (if given) is the
 * symlink-free path, g_free'd by the caller. */
CRL_INTERNAL int crl__secure_path_check(const char *path, const char *what, char **resolved, crl_error *err);

/* elf_abi.c: read the plugin file's ELF version needs (.gnu.version_r) and refuse (CRL_E_ABI) one that needs a
 * libcrl.so.* symbol version CRL_<major>.<minor> of another major or of a newer minor than this libcrl's
 * CRL_ABI_MAJOR.CRL_ABI_MINOR: it was built against a newer SDK, and dlopen would only say "version `CRL_1.3'
 * not found".  Reads the file without running any of it; a file that is not a well-formed ELF object of this
 * machine's class and byte order, or has no such needs, is CRL_OK (dlopen reports what is wrong with it).
 * `what` names the plugin in messages ("plugin 'x' (PATH)"); err may be NULL. */
CRL_INTERNAL int crl__elf_abi_check(const char *path, const char *what, crl_error *err);
/* elf_abi.c: refuse an ELF object of this machine whose program headers or loadable segments reach past
 * the end of the file (truncated): dlopen would map them and the first touch is SIGBUS.  Anything that is
 * not such an object is CRL_OK (dlopen refuses it cleanly).  CRL_E_CORRUPT naming `what` and `path`. */
CRL_INTERNAL int crl__elf_extent_check(const char *path, const char *what, crl_error *err);

/* plugin_file.c: stage markers the loader sends to a probing parent or the scanner's host: before dlopen (ELF
 * constructors run there), before the entry point, before init; the scanner adds its report, fini and the
 * end. */
enum {
    CRL__PROBE_STAGE_OPEN = 'O',
    CRL__PROBE_STAGE_ENTRY = 'E',
    CRL__PROBE_STAGE_INIT = 'I',
    CRL__PROBE_STAGE_REPORT = 'R',
    CRL__PROBE_STAGE_FINI = 'F',
    CRL__PROBE_STAGE_DONE = 'D'
};
CRL_INTERNAL void crl__probe_stage(crl_host *host, char stage);
/* Write all n bytes to a pipe (retrying short writes and EINTR); false on error. */
CRL_INTERNAL bool crl__write_all(int fd, const void *buf, size_t n);
/* "SIGSEGV" (or "signal N" written into buf) and "during init" for messages about how a plugin ended. */
CRL_INTERNAL const char *crl__signal_name(int sig, char *buf, size_t n);
CRL_INTERNAL const char *crl__stage_text(char stage);

/* log.c */
CRL_INTERNAL int crl__log_level(const crl_host *host);

#endif
