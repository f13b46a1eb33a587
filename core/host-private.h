/* Internals of the plugin host shared by host.c, registry.c, loader.c, probe.c, log.c. */
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
};

/* registry.c */
CRL_INTERNAL void crl__registry_init(crl_host *host);
CRL_INTERNAL void crl__registry_destroy(crl_host *host);
/* Remove every component `p` registered (failed init, or unload). */
CRL_INTERNAL void crl__registry_unwind(crl_host *host, crl__plugin *p);
CRL_INTERNAL bool crl__kind_valid(int kind);

/* host.c */
/* Recompute the search path from the config and environment: a new
 * NULL-terminated vector, free with g_strfreev. */
CRL_INTERNAL char **crl__host_compute_search_path(const crl_host *host, crl_error *err);
CRL_INTERNAL crl__plugin *crl__host_find_plugin(const crl_host *host, const char *name);
CRL_INTERNAL void crl__plugin_free(crl__plugin *p);

/* loader.c (crl__plugin_name_from_path) and host.c (crl__no_options) */
/* The plugin name a file must declare: its basename without ".so". */
CRL_INTERNAL char *crl__plugin_name_from_path(const char *path);
/* The option table that stands for "none declared" (never NULL). */
CRL_INTERNAL const crl_option *crl__no_options(void);

/* secure_path.c: resolve `path` component by component, following every symlink, and refuse (CRL_E_PERM,
 * naming the component and the chmod/chown that fixes it) any file, directory or symlink target that a
 * user other than root or the effective user could replace: owned by another user, world-writable (except a
 * sticky directory), or group-writable by a group other than root's.  The final file must be regular.
 * `what` names the object in messages ("plugin 'x' (PATH)").  On success *resolved (if given) is the
 * symlink-free path, g_free'd by the caller. */
CRL_INTERNAL int crl__secure_path_check(const char *path, const char *what, char **resolved, crl_error *err);

/* probe.c: stage markers the loader sends to a probing parent. */
enum { CRL__PROBE_STAGE_OPEN = 'O', CRL__PROBE_STAGE_INIT = 'I' };
CRL_INTERNAL void crl__probe_stage(crl_host *host, char stage);

/* log.c */
CRL_INTERNAL int crl__log_level(const crl_host *host);

#endif
