/* libcrl application API: the plugin host (loader and registries).
 *
 * The host loads plugins named by the config, validates each descriptor
 * before running any plugin code, runs init (where the plugin registers its
 * components), and answers lookups "kind/name".  See DESIGN.md, "Plugin ABI". */
#ifndef CRL_HOST_H
#define CRL_HOST_H

#include <crl/config.h>

#ifdef __cplusplus
extern "C" {
#endif

/* What the host knows of one loaded plugin (borrowed from the host). */
typedef struct crl_plugin_info {
    const char *name;
    const char *version;
    const char *license;
    const char *description;
    const char *path;          /* file it came from; "(built-in)" for static ones */
    uint32_t abi_major;
    uint32_t abi_minor;
    bool builtin;
    bool loaded;               /* false: known from its scan, loaded when one of its components is used */
} crl_plugin_info;

/* New host over `cfg` (borrowed; must outlive the host; may be NULL for an
 * empty config).  Loads nothing yet. */
CRL_API crl_host *crl_host_new(const crl_config *cfg, crl_error *err);
/* Run every plugin's fini in reverse load order, then dlclose.  NULL-safe. */
CRL_API void crl_host_free(crl_host *host);

/* The plugin search path in order: [plugins] path, $CRL_PLUGIN_PATH
 * (colon-separated), the user dir ($XDG_DATA_HOME/crl/plugins), the system
 * dir from configure ($CRL_PLUGINSDIR overrides it, empty for none, so tests
 * can stay blind to installed plugins).  Borrowed, NULL-terminated; valid
 * while the host lives. */
CRL_API const char *const *crl_host_search_path(const crl_host *host);

/* Make known what [plugins] asks for: the plugins listed in `load` (each
 * searched along the path), or with `autoload = true` (the default when
 * `load` is empty) every *.so found along the path; names in `disable` are
 * skipped; a name found in several dirs comes from the first.
 *
 * No plugin code runs in this process here.  Each file is first checked
 * (path security), then scanned in a separate scanner process unless the
 * registry cache ($XDG_CACHE_HOME/crl/registry-MAJOR.MINOR.bin) holds a
 * result for the same path, size, mtime and inode.  A plugin that passed
 * its scan is deferred: its components are known (lookups, listings and the
 * schema see them) and the plugin is dlopen'ed and initialised the first
 * time one of them is looked up (crl_host_find, crl_host_lookup,
 * crl_host_component_count/_at).  A plugin that crashed, exited or hung in
 * the scanner, or was refused, is recorded (crl_host_failure_*) and never
 * loaded.  Returns an error only for a plugin named in `load` (the first
 * such failure); a broken plugin found by autoload is one warning logged
 * with its reason, and the call succeeds. */
CRL_API int crl_host_load_configured(crl_host *host, crl_error *err);
/* Load one plugin file into this process now, without scanning it: its
 * constructors and init run here (use crl_host_load_configured or
 * crl_host_load_name for untrusted plugin directories). */
CRL_API int crl_host_load_path(crl_host *host, const char *path, crl_error *err);
/* Find NAME.so along the search path, scan it (or take the cached scan) and
 * make it known as crl_host_load_configured does; the error of a broken
 * plugin is returned.  CRL_E_NOT_FOUND lists the dirs searched. */
CRL_API int crl_host_load_name(crl_host *host, const char *name, crl_error *err);
/* Ignore the registry cache's results from now on: every plugin file is
 * scanned again (crl plugins --rescan), and the cache is rewritten. */
CRL_API void crl_host_set_rescan(crl_host *host, bool rescan);
/* Register a plugin linked into the program (static registration): same
 * validation and init as a dlopen'd one. */
CRL_API int crl_host_load_builtin(crl_host *host, const crl_plugin_desc *(*entry)(void), crl_error *err);

/* Load and init the plugin in a forked child first, so a plugin that
 * crashes (SIGSEGV in init) is reported as CRL_E_CRASH naming the signal
 * instead of taking the process down.  CRL_OK means the child loaded it. */
CRL_API int crl_host_probe_path(crl_host *host, const char *path, crl_error *err);

/* Loaded plugins, in load order. */
CRL_API size_t crl_host_plugin_count(const crl_host *host);
CRL_API const crl_plugin_info *crl_host_plugin_at(const crl_host *host, size_t i);
/* Load failures recorded by crl_host_load_configured, in order. */
CRL_API size_t crl_host_failure_count(const crl_host *host);
CRL_API const crl_error *crl_host_failure_at(const crl_host *host, size_t i, const char **path);

/* Registry lookups.  Borrowed; valid while the host lives.  A component of
 * a plugin not loaded yet loads it first (lazy loading); listing a kind
 * loads every plugin that provides one.  Safe to call from several threads. */
CRL_API const crl_component *crl_host_find(const crl_host *host, crl_kind kind, const char *name);
/* Like find, but CRL_E_NOT_FOUND says "no env 'foo'; did you mean 'bar'?"
 * and lists what is registered. */
CRL_API const crl_component *crl_host_lookup(const crl_host *host, crl_kind kind, const char *name,
                                             crl_error *err);
CRL_API size_t crl_host_component_count(const crl_host *host, crl_kind kind);  /* sorted by name */
CRL_API const crl_component *crl_host_component_at(const crl_host *host, crl_kind kind, size_t i);
/* The registry as known, without loading anything: components of plugins
 * not loaded yet (crl_plugin_info.loaded false) are included with ops NULL.
 * For listings (crl plugins); use crl_host_component_* to use a component. */
CRL_API size_t crl_host_known_count(const crl_host *host, crl_kind kind);
CRL_API const crl_component *crl_host_known_at(const crl_host *host, crl_kind kind, size_t i);
/* Name of the plugin that registered kind/name, or NULL. */
CRL_API const char *crl_host_component_owner(const crl_host *host, crl_kind kind, const char *name);

/* The host's own schema: its sections [plugins] and [log] plus what
 * crl_host_schema_add_plugins declares.  Enough to resolve overrides and to
 * validate a config that holds only host sections; owned by the host, rebuilt
 * after plugins are loaded (an earlier one stays valid while the host lives).
 * The host knows no consumer: an application that reads more sections ([env],
 * [replay], ...) assembles its own schema from the option tables of the pieces
 * it uses, the host tables below and crl_host_schema_add_plugins. */
CRL_API const crl_schema *crl_host_schema(crl_host *host);
/* Declare in the application's schema `s` what the plugins bring: before any
 * plugin load was attempted, the pattern [plugin.*] (so that an override
 * plugin.gym.x=... resolves before gym is loaded); after it, one [plugin.NAME]
 * with its declared options per plugin made known, so that a section for any
 * other plugin is unknown.  Also makes the selectors of `s`
 * (crl_schema_add_selector) find the option table of a registered component
 * through this host without loading its plugin, with its names for "did you
 * mean".  `s` must not be used after the host is freed; after loading more
 * plugins, declare them into a new schema.  A plugin section that cannot be
 * declared is logged and skipped.  CRL_E_INVALID when host or s is NULL. */
CRL_API int crl_host_schema_add_plugins(crl_host *host, crl_schema *s, crl_error *err);
/* The host's [plugins] and [log] option tables (static). */
CRL_API const crl_option *crl_host_plugins_options(void);
CRL_API const crl_option *crl_host_log_options(void);

/* The plugin scanner process's whole program (crl-plugin-scanner, installed in libexec): loads the plugin
 * file named in argv in this process, checks it and writes the report to the given fd.  The host starts it
 * for each new or changed plugin file; applications do not call it.  Returns the process's exit status. */
CRL_API int crl_plugin_scanner_main(int argc, char **argv);

/* The env worker process's whole program (crl-env-worker, installed in libexec): the processes executor
 * starts it for each worker of a backend whose plugin embeds CPython, passing the memfd of a description
 * (--desc-fd), the worker's block (--block), the job generation it has seen (--seen) and --restart for a
 * replacement.  It loads the plugin, makes and binds the block's instances over the parent's shared buffers
 * and serves jobs until told to quit, then closes them.  Applications do not call it.  Never returns: it
 * ends the process with its exit status (2 on bad arguments or an unreadable description, printed on stderr;
 * a failure to make the envs is reported to the parent through the control region instead). */
CRL_API int crl_env_worker_main(int argc, char **argv);

/* libcrl's version string ("0.1.0"). */
CRL_API const char *crl_version(void);

#ifdef __cplusplus
}
#endif
#endif
