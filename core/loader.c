/* The plugin loader: file checks, dlopen, descriptor validation, init, configured loading. */
#define _GNU_SOURCE /* dladdr, dlinfo */
#include "host-private.h"
#include "scan-private.h"

#include <dlfcn.h>
#include <errno.h>
#include <link.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define SO_SUFFIX ".so"

/* Plugin names become INI section names ([plugin.NAME]) and file names. */
static bool valid_plugin_name(const char *s)
{
    if (!s || !*s)
        return false;
    for (; *s; s++)
        if (!g_ascii_isalnum(*s) && *s != '_' && *s != '-')
            return false;
    return true;
}

/* The file and every directory and symlink on the way to it must be changeable only by root or this user:
 * otherwise another user could swap the code crl is about to run. */
static int check_file(const char *path, const char *name, crl_error *err)
{
    char *what = g_strdup_printf("plugin '%s' (%s)", name, path);
    int rc = crl__secure_path_check(path, what, NULL, err);
    g_free(what);
    return rc;
}

/* Check the descriptor using only its data.  `expected` is the name the file
 * name dictates and `path` the file (both NULL for a built-in). */
static int validate_desc(const crl_plugin_desc *d, const char *expected, const char *path, crl_error *err)
{
    char what[512];
    if (expected)
        g_snprintf(what, sizeof what, "plugin '%s' (%s)", expected, path);
    else
        g_strlcpy(what, "built-in plugin", sizeof what);
    if (!d)
        return crl_error_set(err, CRL_E_ABI, "%s: the entry point returned no descriptor (NULL)", what);
    /* Nothing past abi_major/abi_minor is read before the major matches:
     * another major may lay the descriptor out differently. */
    if (d->abi_major != CRL_ABI_MAJOR)
        return crl_error_set(err, CRL_E_ABI,
                             "%s was built for plugin ABI %u.%u, but this libcrl %s speaks ABI %d.%d: "
                             "rebuild the plugin against this crl's SDK",
                             what, (unsigned)d->abi_major, (unsigned)d->abi_minor, crl_version(), CRL_ABI_MAJOR,
                             CRL_ABI_MINOR);
    if (d->abi_minor > CRL_ABI_MINOR)
        return crl_error_set(err, CRL_E_ABI,
                             "%s needs plugin ABI %u.%u, newer than the %d.%d of this libcrl %s: upgrade crl "
                             "or rebuild the plugin against this crl's SDK",
                             what, (unsigned)d->abi_major, (unsigned)d->abi_minor, CRL_ABI_MAJOR, CRL_ABI_MINOR,
                             crl_version());
    if (!d->name || !*d->name)
        return crl_error_set(err, CRL_E_ABI, "%s: the descriptor's name is empty; set it to '%s'", what,
                             expected ? expected : "the plugin's name");
    if (!expected)
        g_snprintf(what, sizeof what, "built-in plugin '%.200s'", d->name);
    for (size_t i = 0; i < G_N_ELEMENTS(d->reserved); i++)
        if (d->reserved[i])
            return crl_error_set(err, CRL_E_ABI,
                                 "%s: descriptor field reserved[%zu] is not zero (ABI %u.%u defines none of "
                                 "them): zero-initialise the descriptor or use CRL_PLUGIN_DEFINE",
                                 what, i, (unsigned)d->abi_major, (unsigned)d->abi_minor);
    if (!valid_plugin_name(d->name))
        return crl_error_set(err, CRL_E_ABI,
                             "%s: bad descriptor name '%s': plugin names use only [A-Za-z0-9_-]", what, d->name);
    if (expected && strcmp(d->name, expected) != 0)
        return crl_error_set(err, CRL_E_ABI,
                             "%s declares plugin name '%s' but its file name says '%s': a plugin's name "
                             "must equal its file's basename without .so (rename the file to %s.so or "
                             "fix the descriptor)",
                             path, d->name, expected, d->name);
    if (!d->init)
        return crl_error_set(err, CRL_E_ABI, "%s: the descriptor has no init function", what);
    return CRL_OK;
}

static int refuse_nested(const crl_host *host, crl_error *err)
{
    return crl_error_set(err, CRL_E_INVALID,
                         "cannot load plugins while plugin '%s' runs its init: plugins must not load "
                         "other plugins",
                         host->current->info.name);
}

static int already_loaded(const crl__plugin *old, const char *name, const char *path, crl_error *err)
{
    return crl_error_set(err, CRL_E_EXISTS,
                         "plugin '%s' is already loaded from %s; refusing to load it again from %s "
                         "(remove one copy, or list the name in [plugins] disable)",
                         name, old->path, path);
}

static bool declared(const crl_option *table, const char *key)
{
    for (const crl_option *o = table; o->type != CRL_OPT_END; o++) {
        if (!strcmp(o->name, key))
            return true;
        if ((o->flags & CRL_OPT_PREFIX) && g_str_has_prefix(key, o->name) && strlen(key) > strlen(o->name))
            return true;
    }
    return false;
}

/* crl_config_opts ignores keys nobody declared; for a plugin's own section
 * a typo must fail the load, as strict validation would. */
static int check_section_keys(const crl_config *cfg, const char *section, const char *plugin,
                              const crl_option *table, crl_error *err)
{
    size_t n = crl_config_key_count(cfg, section);
    for (size_t i = 0; i < n; i++) {
        const char *key = crl_config_key_at(cfg, section, i);
        if (declared(table, key))
            continue;
        const char *origin = crl_config_origin(cfg, section, key);
        GPtrArray *names = g_ptr_array_new();
        GString *list = g_string_new(NULL);
        for (const crl_option *o = table; o->type != CRL_OPT_END; o++) {
            g_ptr_array_add(names, (gpointer)o->name);
            g_string_append_printf(list, "%s%s", list->len ? ", " : "", o->name);
        }
        g_ptr_array_add(names, NULL);
        const char *hint = crl_did_you_mean(key, (const char *const *)names->pdata);
        if (hint)
            crl_error_set(err, CRL_E_CONFIG, "%s: unknown key '%s' in [%s]; did you mean '%s'?",
                          origin ? origin : "config", key, section, hint);
        else
            crl_error_set(err, CRL_E_CONFIG, "%s: unknown key '%s' in [%s]: plugin '%s' declares %s%s",
                          origin ? origin : "config", key, section, plugin, list->len ? "" : "no options",
                          list->str);
        g_string_free(list, TRUE);
        g_ptr_array_free(names, TRUE);
        return CRL_E_CONFIG;
    }
    return CRL_OK;
}

/* A plugin record; info's strings are borrowed (the descriptor's or the scan's), except path. */
static crl__plugin *plugin_new(const char *path, const char *name, const char *version, const char *license,
                               const char *description, uint32_t abi_major, uint32_t abi_minor)
{
    crl__plugin *p = g_new0(crl__plugin, 1);
    p->path = g_strdup(path);
    p->journal = g_ptr_array_new();
    p->info.name = name;
    p->info.version = version ? version : "";
    p->info.license = license ? license : "";
    p->info.description = description ? description : "";
    p->info.path = p->path;
    p->info.abi_major = abi_major;
    p->info.abi_minor = abi_minor;
    return p;
}

/* The plugin's [plugin.NAME] section checked against its table (a typo fails as strict validation would)
 * and built into *out. */
static int section_opts(crl_host *host, const char *name, const crl_option *table, crl_opts **out,
                        crl_error *err)
{
    char *section = g_strconcat("plugin.", name, NULL);
    crl_error e = { 0 };
    int rc = check_section_keys(host->cfg, section, name, table, &e);
    *out = rc ? NULL : crl_config_opts(host->cfg, section, &table, 1, &e);
    if (!rc && !*out)
        rc = e.code ? e.code : crl_error_set(&e, CRL_E_CONFIG, "cannot build the options of [%s]", section);
    if (rc)
        crl_error_set(err, rc, "%s", e.message);
    g_free(section);
    return rc;
}

/* Run a validated plugin's init with its [plugin.NAME] options and keep it
 * on success.  On failure its registrations are gone and nothing is kept;
 * the caller closes the handle. */
static int activate(crl_host *host, const crl_plugin_desc *d, void *handle, void *base, const char *path,
                    crl_error *err)
{
    const crl__plugin *old = crl__host_find_plugin(host, d->name);
    if (old)
        return already_loaded(old, d->name, path, err);

    const crl_option *table = d->options ? d->options : crl__no_options();
    crl_opts *opts = NULL;
    int src = section_opts(host, d->name, table, &opts, err);
    if (src)
        return src;

    crl__plugin *p = plugin_new(path, d->name, d->version, d->license, d->description, d->abi_major, d->abi_minor);
    p->desc = d;
    p->handle = handle;
    p->base = base;
    p->info.builtin = handle == NULL;
    p->info.loaded = true;
    p->options = table;

    crl__probe_stage(host, CRL__PROBE_STAGE_INIT);
    host->current = p;
    host->current_reg_code = CRL_OK;
    crl_error ie = { 0 };
    int rc = d->init(host, opts, &ie);
    host->current = NULL;
    crl_opts_free(opts);
    if (rc != CRL_OK) {
        crl__registry_unwind(host, p);
        /* A refused registration that init passed on is the root cause. */
        int code = host->current_reg_code != CRL_OK && rc == host->current_reg_code ? rc : CRL_E_PLUGIN;
        if (ie.message[0])
            crl_error_set(err, code, "plugin '%s' init failed: %s", d->name, ie.message);
        else
            crl_error_set(err, code, "plugin '%s' init failed: init returned %s (%d) without a message", d->name,
                          crl_status_name(rc), rc);
        crl__plugin_free(p);
        return code;
    }
    p->initialized = true;
    g_ptr_array_add(host->plugins, p);
    host->schema_dirty = true;
    crl_host_log(host, CRL_LOG_INFO, "loaded plugin '%s' %s from %s", p->info.name, p->info.version, p->path);
    return CRL_OK;
}

/* Is `sym` defined by the object behind `handle` itself (not by one of its
 * dependencies)?  Sets *base to the object's load address. */
static bool symbol_in_object(void *handle, void *sym, void **base)
{
    Dl_info info;
    struct link_map *lm = NULL;
    if (!dladdr(sym, &info) || dlinfo(handle, RTLD_DI_LINKMAP, &lm) != 0 || !lm)
        return true; /* cannot tell: do not refuse on that */
    *base = info.dli_fbase;
    return info.dli_fname && lm->l_name && strcmp(info.dli_fname, lm->l_name) == 0;
}

int crl_host_load_path(crl_host *host, const char *path, crl_error *err)
{
    if (!host || !path || !*path)
        return crl_error_set(err, CRL_E_INVALID, "crl_host_load_path: host and path must be given");
    if (host->current)
        return refuse_nested(host, err);
    host->load_attempted = true;
    host->schema_dirty = true;

    char *name = crl__plugin_name_from_path(path);
    int rc = check_file(path, name, err);
    if (rc)
        goto out;
    /* Symbols of a newer libcrl than this: say so before dlopen fails with "version `CRL_1.3' not found". */
    char *abi_what = g_strdup_printf("plugin '%s' (%s)", name, path);
    rc = crl__elf_abi_check(path, abi_what, err);
    g_free(abi_what);
    if (rc)
        goto out;
    /* Refuse a second copy before dlopen runs any of its constructors. */
    const crl__plugin *old = crl__host_find_plugin(host, name);
    if (old) {
        rc = already_loaded(old, name, path, err);
        goto out;
    }

    /* A path without a slash would make dlopen search LD_LIBRARY_PATH. */
    char *dl_path = strchr(path, '/') ? g_strdup(path) : g_strconcat("./", path, NULL);
    crl__probe_stage(host, CRL__PROBE_STAGE_OPEN);
    dlerror();
    void *handle = dlopen(dl_path, RTLD_NOW | RTLD_LOCAL);
    g_free(dl_path);
    if (!handle) {
        const char *why = dlerror();
        rc = crl_error_set(err, CRL_E_PLUGIN, "cannot load plugin '%s' (%s): %s", name, path,
                           why ? why : "dlopen failed");
        goto out;
    }
    dlerror();
    void *sym = dlsym(handle, "crl_plugin_v1");
    void *base = NULL;
    if (!sym || !symbol_in_object(handle, sym, &base)) {
        rc = crl_error_set(err, CRL_E_ABI,
                           "%s is not a crl plugin: it does not export crl_plugin_v1 (define it with "
                           "CRL_PLUGIN_DEFINE and link with -export-symbols-regex '^crl_plugin_v1$')",
                           path);
        dlclose(handle);
        goto out;
    }
    const crl_plugin_desc *(*entry)(void);
    *(void **)&entry = sym;
    crl__probe_stage(host, CRL__PROBE_STAGE_ENTRY);
    const crl_plugin_desc *d = entry();
    rc = validate_desc(d, name, path, err);
    if (!rc)
        rc = activate(host, d, handle, base, path, err);
    if (rc)
        dlclose(handle);
out:
    g_free(name);
    return rc;
}

int crl_host_load_builtin(crl_host *host, const crl_plugin_desc *(*entry)(void), crl_error *err)
{
    if (!host || !entry)
        return crl_error_set(err, CRL_E_INVALID, "crl_host_load_builtin: host and entry must be given");
    if (host->current)
        return refuse_nested(host, err);
    host->load_attempted = true;
    host->schema_dirty = true;
    const crl_plugin_desc *d = entry();
    int rc = validate_desc(d, NULL, NULL, err);
    if (rc)
        return rc;
    return activate(host, d, NULL, NULL, "(built-in)", err);
}

/* NAME.so in the first search dir that has it; NULL when none does. */
static char *locate(const char *const *dirs, const char *name)
{
    char *file = g_strconcat(name, SO_SUFFIX, NULL);
    char *found = NULL;
    for (const char *const *d = dirs; *d && !found; d++) {
        char *cand = g_build_filename(*d, file, NULL);
        if (g_file_test(cand, G_FILE_TEST_EXISTS))
            found = cand;
        else
            g_free(cand);
    }
    g_free(file);
    return found;
}

static int by_strcmp(gconstpointer a, gconstpointer b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* *.so names in one dir, sorted; NULL when it cannot be read. */
static GPtrArray *list_dir(const char *dir, GError **gerr)
{
    GDir *d = g_dir_open(dir, 0, gerr);
    if (!d)
        return NULL;
    GPtrArray *names = g_ptr_array_new_with_free_func(g_free);
    const char *e;
    while ((e = g_dir_read_name(d)))
        if (strlen(e) > strlen(SO_SUFFIX) && g_str_has_suffix(e, SO_SUFFIX))
            g_ptr_array_add(names, g_strdup(e));
    g_dir_close(d);
    g_ptr_array_sort(names, by_strcmp);
    return names;
}

/* ---- scanned, deferred loading ------------------------------------------------------------------- */

/* Keep a load failure for crl_host_failure_* (path: the file, or the name when no file was found). */
static void record_failure(crl_host *host, const char *path, const crl_error *e)
{
    crl__failure f = { 0 };
    f.error = *e;
    f.path = g_strdup(path);
    g_array_append_val(host->failures, f);
}

/* The registry cache, read on first use.  Without a usable cache directory everything works uncached. */
static crl__registry_cache *host_cache(crl_host *host)
{
    if (!host->cache_loaded) {
        host->cache_loaded = true;
        host->cache_file = crl__registry_cache_file();
        char *warning = NULL;
        host->cache = crl__registry_cache_load(host->cache_file, &warning);
        if (warning)
            crl_host_log(host, CRL_LOG_WARNING, "%s", warning);
        g_free(warning);
    }
    return host->cache;
}

static void save_cache(crl_host *host)
{
    if (!host->cache || !host->cache_file)
        return;
    crl_error e = { 0 };
    if (crl__registry_cache_save(host->cache, host->cache_file, &e))
        crl_host_log(host, CRL_LOG_WARNING, "plugin registry cache not written (%s): every command scans "
                     "new plugins again", e.message);
}

static void load_deferred_for_lookup(crl_host *host, crl__plugin *p);

/* A deferred plugin from a good scan: known, with stub registrations, not loaded. */
static int defer(crl_host *host, crl__scan_result *r, crl__plugin **out, crl_error *err)
{
    crl__plugin *p = plugin_new(r->path, r->name, r->version, r->license, r->description, r->abi_major,
                                r->abi_minor);
    p->deferred = true;
    p->scan = r;
    p->options = r->plugin_options;
    /* Its section is checked now, as loading would: a configuration error is found before any work. */
    crl_opts *opts = NULL;
    int rc = section_opts(host, r->name, p->options, &opts, err);
    if (rc) {
        crl__plugin_free(p);
        return rc;
    }
    crl_opts_free(opts);
    for (size_t i = 0; i < r->n_components; i++) {
        const crl__scan_component *c = &r->components[i];
        rc = crl__registry_add_stub(host, p, c->kind, c->name, c->description, c->options, err);
        if (rc) {
            crl__registry_unwind(host, p);
            crl__plugin_free(p);
            return rc;
        }
    }
    g_ptr_array_add(host->plugins, p);
    host->schema_dirty = true;
    host->load_deferred = load_deferred_for_lookup;
    *out = p;
    return CRL_OK;
}

/* Load deferred plugin `p` now: its stubs make way for its real components; `p` is freed, its scan (whose
 * option tables schemas may hold) kept until the host is freed. */
static int load_deferred(crl_host *host, crl__plugin *p, crl_error *err)
{
    crl__registry_unwind(host, p);
    g_ptr_array_remove(host->plugins, p);
    host->schema_dirty = true;
    int rc = crl_host_load_path(host, p->path, err);
    crl__host_retire_scan(host, p->scan);
    p->scan = NULL;
    crl__plugin_free(p);
    return rc;
}

/* The registry's way to load a deferred plugin a lookup found (crl_host.load_deferred). */
static void load_deferred_for_lookup(crl_host *host, crl__plugin *p)
{
    char *path = g_strdup(p->path);
    crl_error e = { 0 };
    if (load_deferred(host, p, &e)) {
        record_failure(host, path, &e);
        crl_host_log(host, CRL_LOG_ERROR, "%s", e.message);
    }
    g_free(path);
}

/* Check, scan (or take the cached scan of) and defer one plugin file.  A failure is recorded; it is
 * logged as a warning unless the caller needs this plugin, which gets it as the error. */
static int load_candidate(crl_host *host, const char *path, bool needed, crl_error *err)
{
    char *name = crl__plugin_name_from_path(path);
    crl_error e = { 0 };
    crl__scan_result *own = NULL;
    const crl__scan_result *r = NULL;
    struct stat st;
    int rc = check_file(path, name, &e);
    if (!rc && crl__host_find_plugin(host, name)) {
        const crl__plugin *old = crl__host_find_plugin(host, name);
        rc = already_loaded(old, name, path, &e);
    }
    if (!rc && stat(path, &st) != 0)
        rc = crl_error_set(&e, CRL_E_IO, "cannot load plugin '%s': stat %s: %s", name, path, g_strerror(errno));
    if (!rc) {
        crl__file_id id;
        crl__file_id_from_stat(&st, &id);
        crl__registry_cache *cache = host_cache(host);
        if (!host->rescan)
            r = crl__registry_cache_lookup(cache, path, &id);
        if (!r) {
            double timeout = 30;
            crl_config_get_double(host->cfg, "plugins", "scan_timeout", 30, &timeout, NULL);
            crl_host_log(host, CRL_LOG_INFO, "scanning plugin '%s' (%s)", name, path);
            if (crl__scan_file(path, &id, timeout, &own) == CRL_OK) {
                crl__registry_cache_put(cache, own);   /* the cache owns it; r stays valid while it lives */
                r = own;
                own = NULL;
            } else {
                r = own;
            }
        }
        if (r->status != CRL_OK) {
            rc = crl_error_set(&e, r->status, "%s", r->reason ? r->reason : "broken plugin");
        } else if (!r->name || strcmp(r->name, name) != 0) {
            rc = crl_error_set(&e, CRL_E_ABI, "plugin '%s' (%s): the scan reports name '%s'", name, path,
                               r->name ? r->name : "(none)");
        } else {
            /* The deferred plugin keeps its own copy: the cache may be rewritten or freed first. */
            GVariant *v = g_variant_ref_sink(crl__scan_result_to_variant(r));
            crl__scan_result *copy = crl__scan_result_from_variant(v, &e);
            g_variant_unref(v);
            if (!copy)
                rc = e.code;
            else {
                g_free(copy->path);
                copy->path = g_strdup(path);
                crl__plugin *p = NULL;
                rc = defer(host, copy, &p, &e);
                /* Named in [plugins] load: the user asked for it to be loaded, so it is, now. */
                if (!rc && needed)
                    rc = load_deferred(host, p, &e);
            }
        }
    }
    crl__scan_result_free(own);
    if (rc) {
        record_failure(host, path, &e);
        /* A mistake in the plugin's own config section is the user's, not a broken plugin. */
        if (needed || rc == CRL_E_CONFIG) {
            crl_error_pass(err, &e, rc);
        } else {
            crl_host_log(host, CRL_LOG_WARNING, "plugin '%s' is broken and was not loaded: %s", name, e.message);
        }
    }
    g_free(name);
    return rc;
}

static int load_name_in(crl_host *host, const char *const *dirs, const char *name, char **found_path,
                        crl_error *err)
{
    if (found_path)
        *found_path = NULL;
    if (!valid_plugin_name(name))
        return crl_error_set(err, CRL_E_INVALID,
                             "bad plugin name '%s': plugin names use only [A-Za-z0-9_-] (give a file to "
                             "crl_host_load_path to load by path)",
                             name);
    const crl__plugin *old = crl__host_find_plugin(host, name);
    if (old)
        return crl_error_set(err, CRL_E_EXISTS, "plugin '%s' is already loaded from %s", name, old->path);
    char *path = locate(dirs, name);
    if (path) {
        int rc = load_candidate(host, path, true, err);
        if (found_path)
            *found_path = path;
        else
            g_free(path);
        return rc;
    }
    /* Not found: list where we looked, and the closest name there. */
    GString *where = g_string_new(NULL);
    GPtrArray *cands = g_ptr_array_new_with_free_func(g_free);
    for (const char *const *d = dirs; *d; d++) {
        g_string_append_printf(where, "%s%s", where->len ? ", " : "", *d);
        GPtrArray *names = list_dir(*d, NULL);
        for (guint i = 0; names && i < names->len; i++)
            g_ptr_array_add(cands, crl__plugin_name_from_path(g_ptr_array_index(names, i)));
        if (names)
            g_ptr_array_free(names, TRUE);
    }
    g_ptr_array_sort(cands, by_strcmp);
    g_ptr_array_add(cands, NULL);
    const char *hint = crl_did_you_mean(name, (const char *const *)cands->pdata);
    int rc = crl_error_set(err, CRL_E_NOT_FOUND, "plugin '%s' not found: no %s%s in %s%s%s%s", name, name,
                           SO_SUFFIX, where->len ? where->str : "(empty search path)",
                           hint ? "; did you mean '" : "", hint ? hint : "", hint ? "'?" : "");
    g_ptr_array_free(cands, TRUE);
    g_string_free(where, TRUE);
    return rc;
}

int crl_host_load_name(crl_host *host, const char *name, crl_error *err)
{
    if (!host || !name)
        return crl_error_set(err, CRL_E_INVALID, "crl_host_load_name: host and name must be given");
    if (host->current)
        return refuse_nested(host, err);
    host->load_attempted = true;
    host->schema_dirty = true;
    crl_error e;
    crl_error_clear(&e);
    char **dirs = crl__host_compute_search_path(host, &e);
    if (!dirs)
        return crl_error_pass(err, &e, CRL_E_CONFIG);
    int rc = load_name_in(host, (const char *const *)dirs, name, NULL, err);
    save_cache(host);
    g_strfreev(dirs);
    return rc;
}

void crl_host_set_rescan(crl_host *host, bool rescan)
{
    if (host)
        host->rescan = rescan;
}

static bool in_list(char **list, const char *name)
{
    for (char **p = list; p && *p; p++)
        if (!strcmp(*p, name))
            return true;
    return false;
}

/* Every *.so along the path, first dir winning for a name.  Returns the first configuration error (in a
 * plugin's own section); broken plugins are recorded and warned about. */
static int autoload(crl_host *host, char **dirs, char **disable, crl_error *err)
{
    int rc = CRL_OK;
    GHashTable *seen = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, g_free);
    for (char **d = dirs; *d; d++) {
        GError *gerr = NULL;
        GPtrArray *names = list_dir(*d, &gerr);
        if (!names) {
            if (!g_error_matches(gerr, G_FILE_ERROR, G_FILE_ERROR_NOENT) &&
                !g_error_matches(gerr, G_FILE_ERROR, G_FILE_ERROR_NOTDIR))
                crl_host_log(host, CRL_LOG_WARNING, "cannot read plugin dir %s: %s", *d, gerr->message);
            g_clear_error(&gerr);
            continue;
        }
        for (guint i = 0; i < names->len; i++) {
            const char *file = g_ptr_array_index(names, i);
            char *path = g_build_filename(*d, file, NULL);
            char *name = crl__plugin_name_from_path(file);
            const char *first = g_hash_table_lookup(seen, name);
            if (g_file_test(path, G_FILE_TEST_IS_DIR)) {
                g_free(name);
            } else if (first) {
                crl_host_log(host, CRL_LOG_DEBUG, "not loading %s: plugin '%s' was found first in %s", path, name,
                             first);
                g_free(name);
            } else {
                g_hash_table_insert(seen, name, g_strdup(*d));
                const crl__plugin *old = crl__host_find_plugin(host, name);
                if (in_list(disable, name)) {
                    crl_host_log(host, CRL_LOG_INFO, "not loading %s: '%s' is in [plugins] disable", path, name);
                } else if (old) {
                    crl_host_log(host, CRL_LOG_DEBUG, "not loading %s: plugin '%s' is already loaded from %s",
                                 path, name, old->path);
                } else {
                    crl_error e = { 0 };
                    if (load_candidate(host, path, false, &e) == CRL_E_CONFIG && !rc) {
                        rc = CRL_E_CONFIG;
                        crl_error_pass(err, &e, rc);
                    }
                }
            }
            g_free(path);
        }
        g_ptr_array_free(names, TRUE);
    }
    g_hash_table_destroy(seen);
    return rc;
}

int crl_host_load_configured(crl_host *host, crl_error *err)
{
    if (!host)
        return crl_error_set(err, CRL_E_INVALID, "crl_host_load_configured: host is NULL");
    if (host->current)
        return refuse_nested(host, err);
    host->load_attempted = true;
    host->schema_dirty = true;
    for (guint i = 0; i < host->failures->len; i++)
        g_free(g_array_index(host->failures, crl__failure, i).path);
    g_array_set_size(host->failures, 0);

    char **load = NULL, **disable = NULL, **dirs = NULL;
    bool autoload_on = true;
    int rc;
    if ((rc = crl_config_get_list(host->cfg, "plugins", "load", &load, err)) ||
        (rc = crl_config_get_list(host->cfg, "plugins", "disable", &disable, err)) ||
        (rc = crl_config_get_bool(host->cfg, "plugins", "autoload", true, &autoload_on, err)))
        goto out;
    crl_error de;
    crl_error_clear(&de);
    if (!(dirs = crl__host_compute_search_path(host, &de))) {
        rc = crl_error_pass(err, &de, CRL_E_CONFIG);
        goto out;
    }

    if (load && load[0]) {
        /* An explicit list is the whole answer: autoload does not add to it. */
        for (char **n = load; *n; n++) {
            if (in_list(disable, *n)) {
                crl_host_log(host, CRL_LOG_INFO, "not loading '%s': it is in [plugins] disable", *n);
                continue;
            }
            if (crl__host_find_plugin(host, *n))
                continue;
            crl_error e = { 0 };
            char *found = NULL;
            int lrc = load_name_in(host, (const char *const *)dirs, *n, &found, &e);
            /* A missing file was not recorded by load_candidate. */
            if (lrc && !found)
                record_failure(host, *n, &e);
            if (lrc && !rc) {
                rc = lrc;
                crl_error_pass(err, &e, lrc);
            }
            g_free(found);
        }
    } else if (autoload_on) {
        rc = autoload(host, dirs, disable, err);
    }
    save_cache(host);
out:
    crl_free(load);
    crl_free(disable);
    g_strfreev(dirs);
    return rc;
}
