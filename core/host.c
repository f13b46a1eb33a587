/* The plugin host object: lifetime, search path, host option tables, plugin lists, and what the host
 * contributes to a config schema (it knows no consumer: applications add the sections they read). */
#include "host-private.h"
#include "scan-private.h"

#include <dlfcn.h>
#include <stdlib.h>
#include <string.h>

#ifndef CRL_PLUGINSDIR
#error "CRL_PLUGINSDIR must be defined by the build (Makefile.am)"
#endif

static const crl_option plugins_options[] = {
    { "path", CRL_OPT_LIST, 0, "", 0, 0, NULL,
      "directories searched first for NAME.so, before $CRL_PLUGIN_PATH, the user dir and the system dir" },
    { "load", CRL_OPT_LIST, 0, "", 0, 0, NULL,
      "plugins to load by name; when given, only these are loaded and autoload is ignored" },
    { "disable", CRL_OPT_LIST, 0, "", 0, 0, NULL, "plugin names that are never loaded" },
    { "autoload", CRL_OPT_BOOL, 0, "true", 0, 0, NULL,
      "when load is empty, load every *.so found along the search path (the first dir wins for a name)" },
    { "scan_timeout", CRL_OPT_DOUBLE, CRL_OPT_RANGE, "30", 0.1, 3600, NULL,
      "seconds a new or changed plugin may take to load, init and fini in the scanner process before it is "
      "taken as hung (broken for this run, scanned again next time)" },
    CRL_OPTIONS_END
};

static const crl_option log_options[] = {
    { "level", CRL_OPT_ENUM, 0, "warning", 0, 0, "error|warning|info|debug",
      "least severe message printed to stderr" },
    CRL_OPTIONS_END
};

/* Stands for "no options": a section or component that declares none. */
static const crl_option no_options[] = { CRL_OPTIONS_END };

const crl_option *crl__no_options(void)
{
    return no_options;
}

const crl_option *crl_host_plugins_options(void)
{
    return plugins_options;
}

const crl_option *crl_host_log_options(void)
{
    return log_options;
}

crl_host *crl_host_new(const crl_config *cfg, crl_error *err)
{
    crl_host *h = g_new0(crl_host, 1);
    if (!cfg) {
        h->own_cfg = crl_config_new(err);
        if (!h->own_cfg) {
            g_free(h);
            return NULL;
        }
        cfg = h->own_cfg;
    }
    h->cfg = cfg;
    h->plugins = g_ptr_array_new();
    h->failures = g_array_new(FALSE, TRUE, sizeof(crl__failure));
    h->retired = g_ptr_array_new();
    h->schema_dirty = true;
    h->probe_fd = -1;
    g_rec_mutex_init(&h->lock);
    crl__registry_init(h);
    return h;
}

void crl__plugin_free(crl__plugin *p)
{
    if (!p)
        return;
    if (p->journal)
        g_ptr_array_free(p->journal, TRUE);
    crl__scan_result_free(p->scan);
    g_free(p->path);
    g_free(p);
}

/* Old search-path vectors, schemas and the scans of deferred plugins since loaded stay valid until the host
 * is freed, so a pointer a caller borrowed (an option table in an application's schema) never dangles. */
typedef enum { RETIRED_STRV, RETIRED_SCHEMA, RETIRED_SCAN } retired_kind;
typedef struct {
    retired_kind kind;
    void *ptr;
} retired;

static void retire(crl_host *h, retired_kind kind, void *ptr)
{
    if (!ptr)
        return;
    retired *r = g_new(retired, 1);
    r->kind = kind;
    r->ptr = ptr;
    g_ptr_array_add(h->retired, r);
}

void crl__host_retire_scan(crl_host *h, struct crl__scan_result *scan)
{
    retire(h, RETIRED_SCAN, scan);
}

void crl_host_free(crl_host *h)
{
    if (!h)
        return;
    for (guint i = h->plugins->len; i-- > 0;) {
        crl__plugin *p = g_ptr_array_index(h->plugins, i);
        if (p->initialized && p->desc->fini) {
            h->in_fini = p;
            p->desc->fini();
            h->in_fini = NULL;
        }
    }
    /* Registry entries point into the plugins' static data: drop them before
     * the code and data are unmapped. */
    crl__registry_destroy(h);
    for (guint i = h->plugins->len; i-- > 0;) {
        crl__plugin *p = g_ptr_array_index(h->plugins, i);
        if (p->handle)
            dlclose(p->handle);
        crl__plugin_free(p);
    }
    g_ptr_array_free(h->plugins, TRUE);
    for (guint i = 0; i < h->failures->len; i++)
        g_free(g_array_index(h->failures, crl__failure, i).path);
    g_array_free(h->failures, TRUE);
    for (guint i = 0; i < h->retired->len; i++) {
        retired *r = g_ptr_array_index(h->retired, i);
        if (r->kind == RETIRED_STRV)
            g_strfreev(r->ptr);
        else if (r->kind == RETIRED_SCHEMA)
            crl_schema_free(r->ptr);
        else
            crl__scan_result_free(r->ptr);
        g_free(r);
    }
    g_ptr_array_free(h->retired, TRUE);
    g_strfreev(h->search_path);
    crl_schema_free(h->schema);
    crl_config_free(h->own_cfg);
    crl__registry_cache_free(h->cache);
    g_free(h->cache_file);
    g_rec_mutex_clear(&h->lock);
    g_free(h);
}

static void add_dir(GPtrArray *v, const char *dir)
{
    if (!dir || !*dir)
        return;
    for (guint i = 0; i < v->len; i++)
        if (!strcmp(g_ptr_array_index(v, i), dir))
            return;
    g_ptr_array_add(v, g_strdup(dir));
}

char **crl__host_compute_search_path(const crl_host *h, crl_error *err)
{
    char **cfg_path = NULL;
    if (crl_config_get_list(h->cfg, "plugins", "path", &cfg_path, err))
        return NULL;
    GPtrArray *v = g_ptr_array_new();
    for (char **d = cfg_path; d && *d; d++)
        add_dir(v, *d);
    crl_free(cfg_path);

    const char *env = getenv("CRL_PLUGIN_PATH");
    if (env) {
        char **parts = g_strsplit(env, ":", -1);
        for (char **d = parts; *d; d++)
            add_dir(v, *d);
        g_strfreev(parts);
    }

    /* XDG: a relative $XDG_DATA_HOME is invalid and ignored.  GLib's
     * g_get_user_data_dir caches its answer, so read the environment here. */
    const char *xdg = getenv("XDG_DATA_HOME");
    char *user_dir;
    if (xdg && g_path_is_absolute(xdg)) {
        user_dir = g_build_filename(xdg, "crl", "plugins", NULL);
    } else {
        const char *home = getenv("HOME");
        if (!home || !*home)
            home = g_get_home_dir();
        user_dir = g_build_filename(home, ".local", "share", "crl", "plugins", NULL);
    }
    add_dir(v, user_dir);
    g_free(user_dir);

    /* Like $CRL_SYSCONFDIR for config files: lets `make check` stay blind to
     * installed plugins (set it empty for no system dir). */
    const char *sys = getenv("CRL_PLUGINSDIR");
    add_dir(v, sys ? sys : CRL_PLUGINSDIR);
    g_ptr_array_add(v, NULL);
    return (char **)g_ptr_array_free(v, FALSE);
}

const char *const *crl_host_search_path(const crl_host *ch)
{
    if (!ch)
        return NULL;
    crl_host *h = (crl_host *)ch; /* caches the answer; logically const */
    char **now = crl__host_compute_search_path(h, NULL);
    if (!now)
        return (const char *const *)h->search_path;
    if (h->search_path && g_strv_equal((const char *const *)now, (const char *const *)h->search_path)) {
        g_strfreev(now);
    } else {
        retire(h, RETIRED_STRV, h->search_path);
        h->search_path = now;
    }
    return (const char *const *)h->search_path;
}

crl__plugin *crl__host_find_plugin(const crl_host *h, const char *name)
{
    for (guint i = 0; i < h->plugins->len; i++) {
        crl__plugin *p = g_ptr_array_index(h->plugins, i);
        if (!strcmp(p->info.name, name))
            return p;
    }
    return NULL;
}

size_t crl_host_plugin_count(const crl_host *h)
{
    return h ? h->plugins->len : 0;
}

const crl_plugin_info *crl_host_plugin_at(const crl_host *h, size_t i)
{
    if (!h || i >= h->plugins->len)
        return NULL;
    const crl__plugin *p = g_ptr_array_index(h->plugins, (guint)i);
    return &p->info;
}

size_t crl_host_failure_count(const crl_host *h)
{
    return h ? h->failures->len : 0;
}

const crl_error *crl_host_failure_at(const crl_host *h, size_t i, const char **path)
{
    if (!h || i >= h->failures->len) {
        if (path)
            *path = NULL;
        return NULL;
    }
    const crl__failure *f = &g_array_index(h->failures, crl__failure, i);
    if (path)
        *path = f->path;
    return &f->error;
}

const char *crl_host_plugin_name(const crl_host *h)
{
    return h && h->current ? h->current->info.name : "";
}

/* The schema reads option tables and names only: deferred plugins stay unloaded. */
static const crl_option *schema_lookup(void *user, crl_kind kind, const char *name)
{
    const crl_component *c = crl__host_peek(user, kind, name);
    if (!c)
        return NULL;
    return c->options ? c->options : no_options;
}

static const char *schema_names(void *user, crl_kind kind, size_t i)
{
    const crl_component *c = crl_host_known_at(user, kind, i);
    return c ? c->name : NULL;
}

/* The plugins' part of a schema, in two states.  Before any plugin load was attempted it
 * declares the pattern [plugin.*] (without keys), so that an override like
 * plugin.gym.python=... resolves to section [plugin.gym] before gym is
 * loaded.  Once loading ran it declares one exact [plugin.NAME] per loaded
 * plugin with that plugin's option table and no pattern, so [plugin.X] for a
 * plugin that is not loaded is an unknown section (with a did-you-mean over
 * the loaded names) rather than silently accepted. */
int crl_host_schema_add_plugins(crl_host *h, crl_schema *s, crl_error *err)
{
    if (!h || !s)
        return crl_error_set(err, CRL_E_INVALID, "crl_host_schema_add_plugins: host and schema must be given");
    if (!h->load_attempted) {
        int rc = crl_schema_add(s, "plugin.*", no_options,
                                "a plugin's own options ([plugin.NAME]), checked once the plugin is loaded", err);
        if (rc)
            return rc;
    }
    for (guint i = 0; i < h->plugins->len; i++) {
        const crl__plugin *p = g_ptr_array_index(h->plugins, i);
        char *section = g_strconcat("plugin.", p->info.name, NULL);
        char *doc = g_strdup_printf("options of plugin '%s': %s", p->info.name, p->info.description);
        crl_error e = { 0 };
        int rc = crl_schema_add(s, section, p->options ? p->options : no_options, doc, &e);
        if (rc)
            crl_host_log(h, CRL_LOG_ERROR, "cannot declare [%s]: %s", section, e.message);
        g_free(section);
        g_free(doc);
    }
    crl_schema_set_lookup(s, schema_lookup, h);
    crl_schema_set_names(s, schema_names, h);
    return CRL_OK;
}

static crl_schema *build_schema(crl_host *h, crl_error *err)
{
    crl_schema *s = crl_schema_new(err);
    if (!s)
        return NULL;
    if (crl_schema_add(s, "plugins", plugins_options,
                       "where plugins are found and which are loaded (see 'crl plugins')", err) ||
        crl_schema_add(s, "log", log_options, "logging of the host and plugins", err) ||
        crl_host_schema_add_plugins(h, s, err)) {
        crl_schema_free(s);
        return NULL;
    }
    return s;
}

const crl_schema *crl_host_schema(crl_host *h)
{
    if (!h)
        return NULL;
    if (h->schema && !h->schema_dirty)
        return h->schema;
    crl_error e = { 0 };
    crl_schema *s = build_schema(h, &e);
    if (!s) {
        crl_host_log(h, CRL_LOG_ERROR, "cannot build the configuration schema: %s", e.message);
        return h->schema;
    }
    retire(h, RETIRED_SCHEMA, h->schema);
    h->schema = s;
    h->schema_dirty = false;
    return s;
}
