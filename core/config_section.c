/* Sections and entries of a config: what the parser fills, merging and overrides change, and every reader
 * walks.  The bottom of the config files (core/LAYERS). */
#include "config-private.h"

#include <string.h>

static void free_entry(gpointer p)
{
    crl__entry *e = p;
    g_free(e->key);
    g_free(e->value);
    g_free(e->origin);
    g_free(e);
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
void crl__config_set_value(crl_config *cfg, const char *section, const char *section_origin, const char *key,
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
