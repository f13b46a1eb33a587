/* Layered configuration: layers, merge, getters, opts.  Sections and entries are in config_section.c, the
 * parser in config_parse.c; validation, overrides and show need a schema and sit above it
 * (schema_validate.c).
 *
 * Priority follows the layer, not the load order: a value replaces an
 * existing one when its layer is the same or higher (crl_config_layer), so
 * loading the system file after an experiment file cannot undo the
 * experiment.  Within one layer the later load wins.  Sections and keys keep
 * the order in which they were first seen. */
#include "config-private.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define CONFIG_MAX_FILE (16u << 20)  /* the largest example is a few KiB */

/* ---- the config object ---- */

static void free_section(gpointer p)
{
    crl__section *s = p;
    g_hash_table_unref(s->index);
    g_ptr_array_unref(s->entries);
    g_free(s->name);
    g_free(s->origin);
    g_free(s);
}

crl_config *crl_config_new(crl_error *err)
{
    (void)err;
    crl_config *cfg = g_new0(crl_config, 1);
    cfg->sections = g_ptr_array_new_with_free_func(free_section);
    cfg->index = g_hash_table_new(g_str_hash, g_str_equal);
    cfg->sources = g_ptr_array_new_with_free_func(g_free);
    return cfg;
}

void crl_config_free(crl_config *cfg)
{
    if (!cfg)
        return;
    g_hash_table_unref(cfg->index);
    g_ptr_array_unref(cfg->sections);
    g_ptr_array_unref(cfg->sources);
    g_free(cfg);
}

static void merge(crl_config *cfg, const crl_config *layer_cfg)
{
    for (guint i = 0; i < layer_cfg->sections->len; i++) {
        const crl__section *s = g_ptr_array_index(layer_cfg->sections, i);
        crl__config_ensure_section(cfg, s->name, s->origin);
        for (guint j = 0; j < s->entries->len; j++) {
            const crl__entry *e = g_ptr_array_index(s->entries, j);
            crl__config_set_value(cfg, s->name, s->origin, e->key, e->value, e->origin, e->layer);
        }
    }
}

/* ---- loading ---- */

int crl_config_load_buffer(crl_config *cfg, const char *name, const char *data, size_t len,
                           crl_config_layer layer, crl_error *err)
{
    if (!cfg || (!data && len))
        return crl_error_set(err, CRL_E_INVALID, "crl_config_load_buffer: config or data is NULL");
    if ((int)layer < CRL_LAYER_SYSTEM || (int)layer > CRL_LAYER_OVERRIDE)
        return crl_error_set(err, CRL_E_INVALID, "crl_config_load_buffer: bad layer %d", (int)layer);
    if (!name)
        name = "<buffer>";
    /* Parse into a scratch config so a bad file leaves cfg untouched. */
    crl_config *tmp = crl_config_new(err);
    int rc = crl__config_parse(tmp, name, data, len, layer, err);
    if (rc == CRL_OK) {
        merge(cfg, tmp);
        g_ptr_array_add(cfg->sources, g_strdup(name));
    }
    crl_config_free(tmp);
    return rc;
}

int crl_config_load_file(crl_config *cfg, const char *path, crl_config_layer layer, crl_error *err)
{
    if (!cfg || !path)
        return crl_error_set(err, CRL_E_INVALID, "crl_config_load_file: config or path is NULL");
    char *data;
    size_t len;
    crl_error e;
    crl_error_clear(&e);
    int rc = crl_file_read(path, "config file", 0, CONFIG_MAX_FILE, &data, &len, &e);
    if (rc) {
        struct stat st;
        if (stat(path, &st) == 0 && !S_ISREG(st.st_mode))
            return crl_error_set(err, CRL_E_IO, "%s: %s", e.message,
                                 S_ISDIR(st.st_mode) ? "name an INI file in it"
                                                     : "save what it gives to a file and name that file instead");
        if (rc == CRL_E_NOT_FOUND)
            e.code = CRL_E_IO; /* missing or unreadable: one code, as crl/config.h says */
        return crl_error_pass(err, &e, CRL_E_IO);
    }
    rc = crl_config_load_buffer(cfg, path, data, len, layer, err);
    g_free(data);
    return rc;
}

/* Does `path` lead through a regular file ("$HOME" is a file)?  That is no config file either. */
static bool through_a_file(const char *path)
{
    struct stat st;
    return stat(path, &st) != 0 && errno == ENOTDIR;
}

/* Load `path` when it exists: a missing file is fine, anything else that
 * stops us reading it is an error. */
static int load_optional(crl_config *cfg, const char *path, crl_config_layer layer, crl_error *err)
{
    char *data;
    size_t len;
    crl_error e;
    crl_error_clear(&e);
    int rc = crl_file_read(path, "config file", 0, CONFIG_MAX_FILE, &data, &len, &e);
    if (rc == CRL_E_NOT_FOUND || (rc && through_a_file(path)))
        return CRL_OK;
    if (rc)
        return crl_error_pass(err, &e, CRL_E_IO);
    rc = crl_config_load_buffer(cfg, path, data, len, layer, err);
    g_free(data);
    return rc;
}

int crl_config_load_defaults(crl_config *cfg, crl_error *err)
{
    if (!cfg)
        return crl_error_set(err, CRL_E_INVALID, "crl_config_load_defaults: config is NULL");
    const char *sysdir = getenv("CRL_SYSCONFDIR");
    if (!sysdir || !*sysdir)
        sysdir = CRL_SYSCONFDIR;
    char *path = g_build_filename(sysdir, "crl", "crl.ini", NULL);
    int rc = load_optional(cfg, path, CRL_LAYER_SYSTEM, err);
    g_free(path);
    if (rc)
        return rc;
    /* Read the environment directly: GLib caches XDG dirs on first use. */
    const char *xdg = getenv("XDG_CONFIG_HOME");
    if (xdg && *xdg) {
        path = g_build_filename(xdg, "crl", "crl.ini", NULL);
    } else {
        const char *home = getenv("HOME");
        path = g_build_filename(home && *home ? home : g_get_home_dir(), ".config", "crl", "crl.ini", NULL);
    }
    rc = load_optional(cfg, path, CRL_LAYER_USER, err);
    g_free(path);
    return rc;
}

/* ---- raw lookups ---- */

bool crl_config_has_section(const crl_config *cfg, const char *section)
{
    return crl__config_section(cfg, section) != NULL;
}

size_t crl_config_section_count(const crl_config *cfg)
{
    return cfg ? cfg->sections->len : 0;
}

const char *crl_config_section_at(const crl_config *cfg, size_t i)
{
    if (!cfg || i >= cfg->sections->len)
        return NULL;
    return ((crl__section *)g_ptr_array_index(cfg->sections, i))->name;
}

size_t crl_config_key_count(const crl_config *cfg, const char *section)
{
    const crl__section *s = crl__config_section(cfg, section);
    return s ? s->entries->len : 0;
}

const char *crl_config_key_at(const crl_config *cfg, const char *section, size_t i)
{
    const crl__section *s = crl__config_section(cfg, section);
    if (!s || i >= s->entries->len)
        return NULL;
    return ((crl__entry *)g_ptr_array_index(s->entries, i))->key;
}

static const crl__entry *lookup(const crl_config *cfg, const char *section, const char *key)
{
    return crl__section_entry(crl__config_section(cfg, section), key);
}

const char *crl_config_get(const crl_config *cfg, const char *section, const char *key)
{
    const crl__entry *e = lookup(cfg, section, key);
    return e ? e->value : NULL;
}

const char *crl_config_origin(const crl_config *cfg, const char *section, const char *key)
{
    const crl__entry *e = lookup(cfg, section, key);
    return e ? e->origin : NULL;
}

/* ---- typed getters of raw values ---- */

/* Parse [section] key as `opt` declares; *present is false when absent. */
static int get_typed(const crl_config *cfg, const char *section, const char *key, const crl_option *opt,
                     crl__value *v, bool *present, crl_error *err)
{
    memset(v, 0, sizeof *v);
    const crl__entry *e = lookup(cfg, section, key);
    *present = e != NULL;
    if (!e)
        return CRL_OK;
    char *why = NULL;
    if (!crl__parse_value(opt, e->value, v, &why)) {
        crl_error_set(err, CRL_E_CONFIG, "%s: [%s] %s = '%s': %s", e->origin, section, key, e->value, why);
        g_free(why);
        return CRL_E_CONFIG;
    }
    return CRL_OK;
}

#define RAW_GETTER(fname, ctype, opt_type, field)                                                        \
    int fname(const crl_config *cfg, const char *section, const char *key, ctype def, ctype *out,          \
              crl_error *err)                                                                            \
    {                                                                                                    \
        const crl_option opt = { key, opt_type, 0, NULL, 0, 0, NULL, NULL };                             \
        crl__value v;                                                                                    \
        bool present;                                                                                    \
        int rc = get_typed(cfg, section, key, &opt, &v, &present, err);                                  \
        if (rc)                                                                                          \
            return rc;                                                                                   \
        *out = present ? (ctype)v.field : def;                                                           \
        crl__value_clear(&v);                                                                            \
        return CRL_OK;                                                                                   \
    }

RAW_GETTER(crl_config_get_bool, bool, CRL_OPT_BOOL, b)
RAW_GETTER(crl_config_get_int, int64_t, CRL_OPT_INT, i)
RAW_GETTER(crl_config_get_double, double, CRL_OPT_DOUBLE, d)
RAW_GETTER(crl_config_get_size, uint64_t, CRL_OPT_SIZE, u)

int crl_config_get_enum(const crl_config *cfg, const char *section, const char *key, const char *choices, int def,
                        int *out, crl_error *err)
{
    if (!choices || !*choices)
        return crl_error_set(err, CRL_E_INVALID, "crl_config_get_enum: [%s] %s: no choices given", section, key);
    const crl_option opt = { key, CRL_OPT_ENUM, 0, NULL, 0, 0, choices, NULL };
    crl__value v;
    bool present;
    int rc = get_typed(cfg, section, key, &opt, &v, &present, err);
    if (rc)
        return rc;
    *out = present ? (int)v.i : def;
    crl__value_clear(&v);
    return CRL_OK;
}

int crl_config_get_list(const crl_config *cfg, const char *section, const char *key, char ***out, crl_error *err)
{
    const crl_option opt = { key, CRL_OPT_LIST, 0, NULL, 0, 0, NULL, NULL };
    crl__value v;
    bool present;
    int rc = get_typed(cfg, section, key, &opt, &v, &present, err);
    if (rc)
        return rc;
    /* One block: the pointer array, then the strings. */
    size_t n = present ? v.n : 0, bytes = (n + 1) * sizeof(char *);
    for (size_t i = 0; i < n; i++)
        bytes += strlen(v.items[i]) + 1;
    char **list = g_malloc(bytes);
    char *p = (char *)(list + n + 1);
    for (size_t i = 0; i < n; i++) {
        size_t l = strlen(v.items[i]) + 1;
        memcpy(p, v.items[i], l);
        list[i] = p;
        p += l;
    }
    list[n] = NULL;
    crl__value_clear(&v);
    *out = list;
    return CRL_OK;
}

/* ---- option values ---- */

/* Keys the tables do not declare are left out: crl_config_validate is the
 * strict check that reports them with a hint. */
crl_opts *crl_config_opts(const crl_config *cfg, const char *section, const crl_option *const *tables,
                          size_t ntables, crl_error *err)
{
    if (!section) {
        crl_error_set(err, CRL_E_INVALID, "crl_config_opts: section is NULL");
        return NULL;
    }
    const crl__section *sec = crl__config_section(cfg, section);
    crl_opts *o = crl__opts_new(section);
    for (size_t t = 0; tables && t < ntables; t++) {
        for (const crl_option *opt = tables[t]; opt && opt->type != CRL_OPT_END; opt++) {
            const crl__entry *e = (opt->flags & CRL_OPT_PREFIX) ? NULL : crl__section_entry(sec, opt->name);
            if (crl__opts_declare(o, opt, e ? e->value : NULL, e ? e->origin : NULL, err)) {
                crl_opts_free(o);
                return NULL;
            }
        }
    }
    for (guint i = 0; sec && i < sec->entries->len; i++) {
        const crl__entry *e = g_ptr_array_index(sec->entries, i);
        const crl_option *opt = crl__find_option(tables, ntables, e->key);
        if (!opt || !(opt->flags & CRL_OPT_PREFIX))
            continue;
        crl__value v;
        char *why = NULL;
        if (!crl__parse_value(opt, e->value, &v, &why)) {
            crl_error_set(err, CRL_E_CONFIG, "%s: [%s] %s = '%s': %s", e->origin, section, e->key, e->value, why);
            g_free(why);
            crl_opts_free(o);
            return NULL;
        }
        crl__value_clear(&v);
        crl__opts_add_prefixed(o, opt->name, e->key, e->value, e->origin);
    }
    return o;
}

/* Config is strict: every key of a section a component reads must be declared by one of its tables (the
 * section's own and the component's), checked by the component itself. */
int crl__config_check_keys(const crl_config *cfg, const char *section, const crl_option *const *tables, size_t nt,
                           crl_error *err)
{
    size_t n = crl_config_key_count(cfg, section);
    for (size_t i = 0; i < n; i++) {
        const char *key = crl_config_key_at(cfg, section, i);
        if (crl__find_option(tables, nt, key))
            continue;
        GPtrArray *names = g_ptr_array_new();
        for (size_t t = 0; t < nt; t++)
            for (const crl_option *o = tables[t]; o->type != CRL_OPT_END; o++)
                g_ptr_array_add(names, (gpointer)o->name);
        g_ptr_array_add(names, NULL);
        const char *hint = crl_did_you_mean(key, (const char *const *)names->pdata);
        const char *origin = crl_config_origin(cfg, section, key);
        if (hint) {
            crl_error_set(err, CRL_E_CONFIG, "%s: unknown key '%s' in [%s]; did you mean '%s'?", origin, key,
                          section, hint);
        } else {
            GString *known = g_string_new(NULL);
            for (guint j = 0; j + 1 < names->len; j++)
                g_string_append_printf(known, "%s%s", j ? ", " : "", (char *)g_ptr_array_index(names, j));
            crl_error_set(err, CRL_E_CONFIG, "%s: unknown key '%s' in [%s]; known keys: %s", origin, key, section,
                          known->str);
            g_string_free(known, TRUE);
        }
        g_ptr_array_free(names, TRUE);
        return CRL_E_CONFIG;
    }
    return CRL_OK;
}

int crl__config_section_opts(const crl_config *cfg, const char *section, const crl_option *table, crl_opts **out,
                             crl_error *err)
{
    const crl_option *tables[1] = { table };
    *out = NULL;
    int rc = crl__config_check_keys(cfg, section, tables, 1, err);
    if (rc)
        return rc;
    crl_error e;
    crl_error_clear(&e);
    *out = crl_config_opts(cfg, section, tables, 1, &e);
    return *out ? CRL_OK : crl_error_pass(err, &e, CRL_E_CONFIG);
}

char *crl_config_to_ini(const crl_config *cfg)
{
    if (!cfg)
        return NULL;
    GString *s = g_string_new(NULL);
    for (size_t i = 0; i < crl_config_section_count(cfg); i++) {
        const char *sec = crl_config_section_at(cfg, i);
        g_string_append_printf(s, "%s[%s]\n", i ? "\n" : "", sec);
        for (size_t k = 0; k < crl_config_key_count(cfg, sec); k++) {
            const char *key = crl_config_key_at(cfg, sec, k);
            g_string_append_printf(s, "%s = %s\n", key, crl_config_get(cfg, sec, key));
        }
    }
    return g_string_free(s, FALSE);
}
