/* Layered configuration: layers, merge, overrides, getters, validation, opts and show.
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

#define CONFIG_MAX_FILE (16u << 20)  /* refuse to slurp /dev/zero */

/* ---- the config object ---- */

static void free_entry(gpointer p)
{
    crl__entry *e = p;
    g_free(e->key);
    g_free(e->value);
    g_free(e->origin);
    g_free(e);
}

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

crl__section *crl__config_section(const crl_config *cfg, const char *name)
{
    return cfg && name ? g_hash_table_lookup(cfg->index, name) : NULL;
}

crl__section *crl__config_ensure_section(crl_config *cfg, const char *name, const char *origin)
{
    crl__section *s = crl__config_section(cfg, name);
    if (s)
        return s;
    s = g_new0(crl__section, 1);
    s->name = g_strdup(name);
    s->origin = g_strdup(origin);
    s->entries = g_ptr_array_new_with_free_func(free_entry);
    s->index = g_hash_table_new(g_str_hash, g_str_equal);
    g_ptr_array_add(cfg->sections, s);
    g_hash_table_insert(cfg->index, s->name, s);
    return s;
}

crl__entry *crl__section_entry(const crl__section *sec, const char *key)
{
    return sec && key ? g_hash_table_lookup(sec->index, key) : NULL;
}

crl__entry *crl__section_add(crl__section *sec, const char *key, const char *value, const char *origin, int layer)
{
    crl__entry *e = g_new0(crl__entry, 1);
    e->key = g_strdup(key);
    e->value = g_strdup(value);
    e->origin = g_strdup(origin);
    e->layer = layer;
    g_ptr_array_add(sec->entries, e);
    g_hash_table_insert(sec->index, e->key, e);
    return e;
}

/* Put `value` into [section] key unless a higher layer already set it. */
static void set_value(crl_config *cfg, const char *section, const char *section_origin, const char *key,
                      const char *value, const char *origin, int layer)
{
    crl__section *s = crl__config_ensure_section(cfg, section, section_origin);
    crl__entry *e = crl__section_entry(s, key);
    if (!e) {
        crl__section_add(s, key, value, origin, layer);
        return;
    }
    if (e->layer > layer)
        return;
    g_free(e->value);
    g_free(e->origin);
    e->value = g_strdup(value);
    e->origin = g_strdup(origin);
    e->layer = layer;
}

static void merge(crl_config *cfg, const crl_config *layer_cfg)
{
    for (guint i = 0; i < layer_cfg->sections->len; i++) {
        const crl__section *s = g_ptr_array_index(layer_cfg->sections, i);
        crl__config_ensure_section(cfg, s->name, s->origin);
        for (guint j = 0; j < s->entries->len; j++) {
            const crl__entry *e = g_ptr_array_index(s->entries, j);
            set_value(cfg, s->name, s->origin, e->key, e->value, e->origin, e->layer);
        }
    }
}

/* ---- loading ---- */

bool crl__read_file(const char *path, char **data, size_t *len, int *errnum)
{
    *data = NULL;
    *len = 0;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        *errnum = errno;
        return false;
    }
    GByteArray *buf = g_byte_array_new();
    guint8 chunk[8192];
    for (;;) {
        ssize_t n = read(fd, chunk, sizeof chunk);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            *errnum = errno;
            close(fd);
            g_byte_array_unref(buf);
            return false;
        }
        if (n == 0)
            break;
        if (buf->len + (size_t)n > CONFIG_MAX_FILE) {
            *errnum = EFBIG;
            close(fd);
            g_byte_array_unref(buf);
            return false;
        }
        g_byte_array_append(buf, chunk, (guint)n);
    }
    close(fd);
    *len = buf->len;
    g_byte_array_append(buf, (const guint8 *)"", 1);   /* keep it a C string too */
    *data = (char *)g_byte_array_free(buf, FALSE);
    return true;
}

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
    int errnum = 0;
    if (!crl__read_file(path, &data, &len, &errnum))
        return crl_error_set(err, CRL_E_IO, "cannot read config file '%s': %s", path, g_strerror(errnum));
    int rc = crl_config_load_buffer(cfg, path, data, len, layer, err);
    g_free(data);
    return rc;
}

/* Load `path` when it exists: a missing file is fine, anything else that
 * stops us reading it is an error. */
static int load_optional(crl_config *cfg, const char *path, crl_config_layer layer, crl_error *err)
{
    char *data;
    size_t len;
    int errnum = 0;
    if (!crl__read_file(path, &data, &len, &errnum)) {
        if (errnum == ENOENT || errnum == ENOTDIR)
            return CRL_OK;
        return crl_error_set(err, CRL_E_IO, "cannot read config file '%s': %s", path, g_strerror(errnum));
    }
    int rc = crl_config_load_buffer(cfg, path, data, len, layer, err);
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

int crl_config_override(crl_config *cfg, const crl_schema *schema, const char *assignment, crl_error *err)
{
    if (!cfg || !assignment)
        return crl_error_set(err, CRL_E_INVALID, "crl_config_override: config or assignment is NULL");
    const char *eq = strchr(assignment, '=');
    if (!eq)
        return crl_error_set(err, CRL_E_USAGE,
                             "bad override '%s': expected section.key=value (e.g. log.level=debug)", assignment);
    if (strchr(assignment, '\n') || strchr(assignment, '\r'))
        return crl_error_set(err, CRL_E_USAGE, "bad override '%s': a value cannot span lines", assignment);
    char *name = g_strstrip(g_strndup(assignment, (size_t)(eq - assignment)));
    char *value = g_strstrip(g_strdup(eq + 1));
    const char *first = strchr(name, '.');
    int rc = CRL_OK;
    if (!first || first == name || name[strlen(name) - 1] == '.') {
        rc = crl_error_set(err, CRL_E_USAGE,
                           "bad override '%s': expected section.key=value with a non-empty section and key "
                           "(e.g. log.level=debug)",
                           assignment);
        goto out;
    }
    /* Longest dotted prefix that names a known section, else the first dot. */
    size_t split = (size_t)(first - name);
    for (const char *p = name + strlen(name) - 1; p > first; p--) {
        if (*p != '.' || p[1] == '\0')
            continue;
        char *sec = g_strndup(name, (size_t)(p - name));
        bool known = crl__config_section(cfg, sec) || crl__schema_knows(schema, sec);
        g_free(sec);
        if (known) {
            split = (size_t)(p - name);
            break;
        }
    }
    name[split] = '\0';
    const char *key = name + split + 1;
    set_value(cfg, name, "command line", key, value, "command line", CRL_LAYER_OVERRIDE);
out:
    g_free(name);
    g_free(value);
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

/* ---- validation ---- */

static char *sources_text(const crl_config *cfg)
{
    if (!cfg->sources->len)
        return g_strdup("no files loaded");
    GString *s = g_string_new("files loaded: ");
    for (guint i = 0; i < cfg->sources->len; i++)
        g_string_append_printf(s, "%s%s", i ? ", " : "", (char *)g_ptr_array_index(cfg->sources, i));
    return g_string_free(s, FALSE);
}

/* Names a section accepts, for "did you mean" and "known keys". */
static GPtrArray *known_keys(const crl_schema *schema, const char *section, const crl_option *const *tables,
                             size_t n)
{
    GPtrArray *names = g_ptr_array_new();
    for (size_t t = 0; t < n; t++)
        for (const crl_option *o = tables[t]; o->type != CRL_OPT_END; o++)
            g_ptr_array_add(names, (gpointer)o->name);
    size_t nsel = crl__schema_selector_count(schema, section);
    for (size_t i = 0; i < nsel; i++) {
        const char *key;
        crl_kind kind;
        crl__schema_selector_at(schema, section, i, &key, &kind);
        bool dup = false;
        for (guint j = 0; j < names->len && !dup; j++)
            dup = strcmp(g_ptr_array_index(names, j), key) == 0;
        if (!dup)
            g_ptr_array_add(names, (gpointer)key);
    }
    g_ptr_array_add(names, NULL);
    return names;
}

static bool is_selector_key(const crl_schema *schema, const char *section, const char *key)
{
    size_t nsel = crl__schema_selector_count(schema, section);
    for (size_t i = 0; i < nsel; i++) {
        const char *k;
        crl_kind kind;
        crl__schema_selector_at(schema, section, i, &k, &kind);
        if (strcmp(k, key) == 0)
            return true;
    }
    return false;
}

static int unknown_section(const crl_schema *schema, const crl__section *sec, crl_error *err)
{
    GPtrArray *cand = crl__schema_section_candidates(schema, sec->name);
    const char *hint = crl_did_you_mean(sec->name, (const char *const *)cand->pdata);
    if (hint) {
        crl_error_set(err, CRL_E_CONFIG, "%s: unknown section [%s]; did you mean [%s]?", sec->origin, sec->name,
                      hint);
    } else {
        GString *known = g_string_new(NULL);
        for (const char *const *p = crl__schema_exact_sections(schema); *p; p++)
            g_string_append_printf(known, "%s[%s]", known->len ? ", " : "", *p);
        crl_error_set(err, CRL_E_CONFIG, "%s: unknown section [%s]; known sections: %s", sec->origin, sec->name,
                      known->len ? known->str : "none");
        g_string_free(known, TRUE);
    }
    g_ptr_array_unref(cand);
    return CRL_E_CONFIG;
}

static int check_selectors(const crl_config *cfg, const crl_schema *schema, const char *section, crl_error *err)
{
    size_t nsel = crl__schema_selector_count(schema, section);
    for (size_t i = 0; i < nsel; i++) {
        const char *key;
        crl_kind kind;
        crl__schema_selector_at(schema, section, i, &key, &kind);
        const crl__entry *e;
        const char *value = crl__schema_selector_value(schema, cfg, section, key, &e);
        if (!value || crl__schema_lookup(schema, kind, value))
            continue;
        const char *kname = crl_kind_name(kind) ? crl_kind_name(kind) : "component";
        const char **names = crl__schema_names(schema, kind);
        const char *hint = crl_did_you_mean(value, names);
        GString *msg = g_string_new(NULL);
        if (e)
            g_string_append_printf(msg, "%s: ", e->origin);
        g_string_append_printf(msg, "[%s] %s = '%s'%s: no %s '%s' is registered", section, key, value,
                               e ? "" : " (default)", kname, value);
        if (hint) {
            g_string_append_printf(msg, "; did you mean '%s'?", hint);
        } else if (names[0]) {
            g_string_append(msg, " (registered: ");
            for (size_t k = 0; names[k]; k++)
                g_string_append_printf(msg, "%s%s", k ? ", " : "", names[k]);
            g_string_append(msg, "); load the plugin that provides it");
        } else {
            g_string_append_printf(msg, "; no %s is registered at all: load the plugin that provides it "
                                        "([plugins] load)", kname);
        }
        crl_error_set(err, CRL_E_CONFIG, "%s", msg->str);
        g_string_free(msg, TRUE);
        g_free(names);
        return CRL_E_CONFIG;
    }
    return CRL_OK;
}

static int check_entry(const crl_schema *schema, const crl__section *sec, const crl_option *const *tables,
                       size_t n, const crl__entry *e, crl_error *err)
{
    const crl_option *opt = crl__find_option(tables, n, e->key);
    if (!opt) {
        if (is_selector_key(schema, sec->name, e->key))
            return CRL_OK;
        GPtrArray *names = known_keys(schema, sec->name, tables, n);
        const char *hint = crl_did_you_mean(e->key, (const char *const *)names->pdata);
        if (hint) {
            crl_error_set(err, CRL_E_CONFIG, "%s: unknown key '%s' in [%s]; did you mean '%s'?", e->origin,
                          e->key, sec->name, hint);
        } else {
            GString *known = g_string_new(NULL);
            for (guint i = 0; i + 1 < names->len; i++)
                g_string_append_printf(known, "%s%s", i ? ", " : "", (char *)g_ptr_array_index(names, i));
            crl_error_set(err, CRL_E_CONFIG, "%s: unknown key '%s' in [%s]; %s%s", e->origin, e->key, sec->name,
                          known->len ? "known keys: " : "this section takes no keys",
                          known->str);
            g_string_free(known, TRUE);
        }
        g_ptr_array_unref(names);
        return CRL_E_CONFIG;
    }
    crl__value v;
    char *why = NULL;
    if (!crl__parse_value(opt, e->value, &v, &why)) {
        crl_error_set(err, CRL_E_CONFIG, "%s: [%s] %s = '%s': %s", e->origin, sec->name, e->key, e->value, why);
        g_free(why);
        return CRL_E_CONFIG;
    }
    crl__value_clear(&v);
    return CRL_OK;
}

static bool prefix_given(const crl__section *sec, const char *prefix)
{
    size_t n = strlen(prefix);
    for (guint i = 0; sec && i < sec->entries->len; i++) {
        const crl__entry *e = g_ptr_array_index(sec->entries, i);
        if (strncmp(e->key, prefix, n) == 0 && e->key[n])
            return true;
    }
    return false;
}

static int check_required(const crl_config *cfg, const char *section, const crl__section *sec,
                          const crl_option *const *tables, size_t n, crl_error *err)
{
    for (size_t t = 0; t < n; t++) {
        for (const crl_option *o = tables[t]; o->type != CRL_OPT_END; o++) {
            if (!(o->flags & CRL_OPT_REQUIRED))
                continue;
            bool given = (o->flags & CRL_OPT_PREFIX) ? prefix_given(sec, o->name)
                                                     : crl__section_entry(sec, o->name) != NULL;
            if (given)
                continue;
            char *files = sources_text(cfg);
            crl_error_set(err, CRL_E_CONFIG, "%s%s[%s] %s%s is required but not set; add '%s%s = ...' under [%s] (%s)",
                          sec ? sec->origin : "", sec ? ": " : "", section, o->name,
                          (o->flags & CRL_OPT_PREFIX) ? "*" : "", o->name,
                          (o->flags & CRL_OPT_PREFIX) ? "NAME" : "", section, files);
            g_free(files);
            return CRL_E_CONFIG;
        }
    }
    return CRL_OK;
}

int crl_config_validate(const crl_config *cfg, const crl_schema *schema, crl_error *err)
{
    if (!cfg || !schema)
        return crl_error_set(err, CRL_E_INVALID, "crl_config_validate: config or schema is NULL");
    for (guint i = 0; i < cfg->sections->len; i++) {
        const crl__section *sec = g_ptr_array_index(cfg->sections, i);
        size_t n;
        const crl_option *const *tables = crl_schema_tables(schema, cfg, sec->name, &n);
        if (!tables)
            return unknown_section(schema, sec, err);
        int rc = check_selectors(cfg, schema, sec->name, err);
        if (rc)
            return rc;
        for (guint j = 0; j < sec->entries->len; j++)
            if ((rc = check_entry(schema, sec, tables, n, g_ptr_array_index(sec->entries, j), err)))
                return rc;
        if ((rc = check_required(cfg, sec->name, sec, tables, n, err)))
            return rc;
    }
    for (const char *const *p = crl__schema_exact_sections(schema); *p; p++) {
        if (crl__config_section(cfg, *p))
            continue;
        /* An absent section selects nothing: a defaulted selector ([replay]
         * storage = list) must not demand a plugin the experiment never uses. */
        int rc;
        size_t n;
        const crl_option *const *tables = crl_schema_tables(schema, cfg, *p, &n);
        if (tables && (rc = check_required(cfg, *p, NULL, tables, n, err)))
            return rc;
    }
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

/* ---- show ---- */

static void show_line(GString *out, const char *key, const char *value, const char *comment)
{
    g_string_append_printf(out, "%s =%s%s  ; %s\n", key, *value ? " " : "", value, comment);
}

static void show_section(GString *out, const crl_config *cfg, const crl_schema *schema, const char *name)
{
    const crl__section *sec = crl__config_section(cfg, name);
    size_t n = 0;
    const crl_option *const *tables = schema ? crl_schema_tables(schema, cfg, name, &n) : NULL;
    if (out->len)
        g_string_append_c(out, '\n');
    g_string_append_printf(out, "[%s]%s\n", name, schema && !tables ? "  ; unknown section" : "");
    /* Declared options in table order, then what else the config holds. */
    GHashTable *shown = g_hash_table_new(g_str_hash, g_str_equal);
    for (size_t t = 0; t < n; t++) {
        for (const crl_option *o = tables[t]; o->type != CRL_OPT_END; o++) {
            if (g_hash_table_contains(shown, o->name))
                continue;
            g_hash_table_add(shown, (gpointer)o->name);
            if (o->flags & CRL_OPT_PREFIX) {
                size_t plen = strlen(o->name);
                for (guint i = 0; sec && i < sec->entries->len; i++) {
                    const crl__entry *e = g_ptr_array_index(sec->entries, i);
                    if (strncmp(e->key, o->name, plen) == 0 && e->key[plen] &&
                        crl__find_option(tables, n, e->key) == o && !g_hash_table_contains(shown, e->key)) {
                        g_hash_table_add(shown, e->key);
                        show_line(out, e->key, e->value, e->origin);
                    }
                }
                continue;
            }
            const crl__entry *e = crl__section_entry(sec, o->name);
            if (e)
                show_line(out, o->name, e->value, e->origin);
            else if (o->default_value)
                show_line(out, o->name, o->default_value, "default");
            else
                g_string_append_printf(out, "; %s =  ; %s\n", o->name,
                                       (o->flags & CRL_OPT_REQUIRED) ? "required, not set" : "not set");
        }
    }
    for (guint i = 0; sec && i < sec->entries->len; i++) {
        const crl__entry *e = g_ptr_array_index(sec->entries, i);
        if (g_hash_table_contains(shown, e->key))
            continue;
        if (!schema || is_selector_key(schema, name, e->key)) {
            show_line(out, e->key, e->value, e->origin);
        } else {
            char *c = g_strdup_printf("%s (undeclared)", e->origin);
            show_line(out, e->key, e->value, c);
            g_free(c);
        }
    }
    g_hash_table_unref(shown);
}

char *crl_config_show(const crl_config *cfg, const crl_schema *schema, crl_error *err)
{
    if (!cfg) {
        crl_error_set(err, CRL_E_INVALID, "crl_config_show: config is NULL");
        return NULL;
    }
    GString *out = g_string_new(NULL);
    for (guint i = 0; i < cfg->sections->len; i++)
        show_section(out, cfg, schema, ((crl__section *)g_ptr_array_index(cfg->sections, i))->name);
    for (const char *const *p = crl__schema_exact_sections(schema); schema && *p; p++)
        if (!crl__config_section(cfg, *p))
            show_section(out, cfg, schema, *p);
    return g_string_free(out, FALSE);
}
