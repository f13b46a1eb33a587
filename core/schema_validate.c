/* A config against a schema: strict validation, overrides resolved to the sections the schema declares,
 * and the resolved config as text.  Above both config.c and schema.c (core/LAYERS). */
#include "config-private.h"

#include <string.h>

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
    crl__config_set_value(cfg, name, "command line", key, value, "command line", CRL_LAYER_OVERRIDE);
out:
    g_free(name);
    g_free(value);
    return rc;
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
