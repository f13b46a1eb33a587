/* Config schema: which sections exist and which option tables apply to each.
 *
 * A section is declared by its exact name ("log") or by a pattern "prefix.*",
 * which matches "prefix.X" for a non-empty X without dots ("plugin.*"
 * matches "plugin.gym", not "plugin" nor "plugin.gym.x"), so an override
 * "plugin.gym.kwargs.x=1" resolves to section plugin.gym.  Selectors add the
 * table of the component named by a key's value, found through the lookup
 * callback the host installs. */
#include "config-private.h"

#include <string.h>

typedef struct schema_entry {
    char *section;
    const crl_option *table;
    char *doc;
} schema_entry;

typedef struct schema_selector {
    char *section;
    char *key;
    crl_kind kind;
} schema_selector;

struct crl_schema {
    GPtrArray *entries;     /* schema_entry * */
    GPtrArray *selectors;   /* schema_selector * */
    GPtrArray *exact;       /* char *: exact section names, first-declared order, NULL-terminated */
    crl_schema_lookup_fn lookup;
    void *lookup_user;
    crl_schema_name_fn names;
    void *names_user;
    /* Arrays handed out by crl_schema_tables (each a NULL-terminated
     * GPtrArray), kept until the schema changes so the borrowed pointers
     * stay valid.  Identical results share one array. */
    GPtrArray *cache;
};

static void free_entry(gpointer p)
{
    schema_entry *e = p;
    g_free(e->section);
    g_free(e->doc);
    g_free(e);
}

static void free_selector(gpointer p)
{
    schema_selector *sel = p;
    g_free(sel->section);
    g_free(sel->key);
    g_free(sel);
}

static void free_cached(gpointer p)
{
    g_ptr_array_unref(p);
}

crl_schema *crl_schema_new(crl_error *err)
{
    crl_schema *s = g_new0(crl_schema, 1);
    s->entries = g_ptr_array_new_with_free_func(free_entry);
    s->selectors = g_ptr_array_new_with_free_func(free_selector);
    s->exact = g_ptr_array_new_with_free_func(g_free);
    g_ptr_array_add(s->exact, NULL);
    s->cache = g_ptr_array_new_with_free_func(free_cached);
    (void)err;
    return s;
}

void crl_schema_free(crl_schema *s)
{
    if (!s)
        return;
    g_ptr_array_unref(s->entries);
    g_ptr_array_unref(s->selectors);
    g_ptr_array_unref(s->exact);
    g_ptr_array_unref(s->cache);
    g_free(s);
}

static bool is_pattern(const char *section)
{
    size_t n = strlen(section);
    return n >= 2 && section[n - 2] == '.' && section[n - 1] == '*';
}

bool crl__section_matches(const char *pattern, const char *name)
{
    if (!is_pattern(pattern))
        return strcmp(pattern, name) == 0;
    size_t plen = strlen(pattern) - 1;   /* keep the '.' */
    if (strncmp(pattern, name, plen) != 0)
        return false;
    const char *rest = name + plen;
    return *rest != '\0' && strchr(rest, '.') == NULL;
}

/* Section names: an exact name without blanks, brackets or '*', or
 * "prefix.*" with such a prefix. */
static bool valid_section(const char *section)
{
    if (!section || !*section)
        return false;
    size_t n = strlen(section);
    if (is_pattern(section))
        n -= 2;
    if (n == 0)
        return false;
    for (size_t i = 0; i < n; i++) {
        char c = section[i];
        if (c == '*' || c == '[' || c == ']' || c == '=' || g_ascii_isspace(c))
            return false;
    }
    return true;
}

static void note_exact(crl_schema *s, const char *section)
{
    if (is_pattern(section))
        return;
    for (guint i = 0; i + 1 < s->exact->len; i++)
        if (strcmp(g_ptr_array_index(s->exact, i), section) == 0)
            return;
    g_ptr_array_index(s->exact, s->exact->len - 1) = g_strdup(section);
    g_ptr_array_add(s->exact, NULL);
}

static void changed(crl_schema *s)
{
    g_ptr_array_set_size(s->cache, 0);
}

/* Tables come from component authors: check them once, here. */
static int check_table(const char *section, const crl_option *table, crl_error *err)
{
    for (const crl_option *o = table; o->type != CRL_OPT_END; o++) {
        if (!o->name || !*o->name)
            return crl_error_set(err, CRL_E_INVALID,
                                 "option table for [%s]: entry %td has no name; every option needs one",
                                 section, o - table);
        if (o->type < CRL_OPT_BOOL || o->type > CRL_OPT_DOUBLES)
            return crl_error_set(err, CRL_E_INVALID, "option table for [%s]: option '%s' has unknown type %d",
                                 section, o->name, (int)o->type);
        if ((o->flags & CRL_OPT_PREFIX) && o->name[strlen(o->name) - 1] != '.')
            return crl_error_set(err, CRL_E_INVALID,
                                 "option table for [%s]: prefix option '%s' must end with '.'", section,
                                 o->name);
        if (o->type == CRL_OPT_ENUM && (!o->choices || !*o->choices))
            return crl_error_set(err, CRL_E_INVALID,
                                 "option table for [%s]: enum option '%s' has no choices (\"a|b|c\")",
                                 section, o->name);
        if ((o->flags & CRL_OPT_RANGE) && !(o->min <= o->max))
            return crl_error_set(err, CRL_E_INVALID, "option table for [%s]: option '%s' has min > max",
                                 section, o->name);
        if (o->default_value && !(o->flags & CRL_OPT_PREFIX)) {
            crl__value v;
            char *why = NULL;
            if (!crl__parse_value(o, o->default_value, &v, &why)) {
                crl_error_set(err, CRL_E_INVALID, "option table for [%s]: default of '%s' ('%s') is invalid: %s",
                              section, o->name, o->default_value, why);
                g_free(why);
                return CRL_E_INVALID;
            }
            crl__value_clear(&v);
        }
    }
    return CRL_OK;
}

int crl_schema_add(crl_schema *s, const char *section, const crl_option *table, const char *doc,
                   crl_error *err)
{
    if (!s)
        return crl_error_set(err, CRL_E_INVALID, "crl_schema_add: schema is NULL");
    if (!valid_section(section))
        return crl_error_set(err, CRL_E_INVALID,
                             "crl_schema_add: bad section name '%s' (use a name like \"log\" or a pattern like "
                             "\"plugin.*\")",
                             section ? section : "(null)");
    if (table) {
        int rc = check_table(section, table, err);
        if (rc)
            return rc;
    }
    schema_entry *e = g_new0(schema_entry, 1);
    e->section = g_strdup(section);
    e->table = table;
    e->doc = g_strdup(doc);
    g_ptr_array_add(s->entries, e);
    note_exact(s, section);
    changed(s);
    return CRL_OK;
}

void crl_schema_set_lookup(crl_schema *s, crl_schema_lookup_fn fn, void *user)
{
    if (!s)
        return;
    s->lookup = fn;
    s->lookup_user = user;
    changed(s);
}

void crl_schema_set_names(crl_schema *s, crl_schema_name_fn fn, void *user)
{
    if (!s)
        return;
    s->names = fn;
    s->names_user = user;
}

int crl_schema_add_selector(crl_schema *s, const char *section, const char *key, crl_kind kind,
                            crl_error *err)
{
    if (!s)
        return crl_error_set(err, CRL_E_INVALID, "crl_schema_add_selector: schema is NULL");
    if (!valid_section(section))
        return crl_error_set(err, CRL_E_INVALID, "crl_schema_add_selector: bad section name '%s'",
                             section ? section : "(null)");
    if (!key || !*key)
        return crl_error_set(err, CRL_E_INVALID, "crl_schema_add_selector: [%s] needs a key naming the component",
                             section);
    if ((int)kind < CRL_KIND_ENV || (int)kind >= CRL_KIND_COUNT)
        return crl_error_set(err, CRL_E_INVALID, "crl_schema_add_selector: [%s] %s: bad kind %d", section, key,
                             (int)kind);
    schema_selector *sel = g_new0(schema_selector, 1);
    sel->section = g_strdup(section);
    sel->key = g_strdup(key);
    sel->kind = kind;
    g_ptr_array_add(s->selectors, sel);
    note_exact(s, section);
    changed(s);
    return CRL_OK;
}

bool crl__schema_knows(const crl_schema *s, const char *section)
{
    if (!s || !section)
        return false;
    for (guint i = 0; i < s->entries->len; i++)
        if (crl__section_matches(((schema_entry *)g_ptr_array_index(s->entries, i))->section, section))
            return true;
    for (guint i = 0; i < s->selectors->len; i++)
        if (crl__section_matches(((schema_selector *)g_ptr_array_index(s->selectors, i))->section, section))
            return true;
    return false;
}

const char *const *crl__schema_exact_sections(const crl_schema *s)
{
    static const char *const none[] = { NULL };
    return s ? (const char *const *)s->exact->pdata : none;
}

GPtrArray *crl__schema_section_candidates(const crl_schema *s, const char *word)
{
    GPtrArray *c = g_ptr_array_new_with_free_func(g_free);
    if (s) {
        for (guint i = 0; i + 1 < s->exact->len; i++)
            g_ptr_array_add(c, g_strdup(g_ptr_array_index(s->exact, i)));
        const char *dot = strchr(word, '.');
        GPtrArray *pats = g_ptr_array_new();
        for (guint i = 0; i < s->entries->len; i++)
            g_ptr_array_add(pats, ((schema_entry *)g_ptr_array_index(s->entries, i))->section);
        for (guint i = 0; i < s->selectors->len; i++)
            g_ptr_array_add(pats, ((schema_selector *)g_ptr_array_index(s->selectors, i))->section);
        for (guint i = 0; dot && dot[1] && i < pats->len; i++) {
            const char *p = g_ptr_array_index(pats, i);
            if (is_pattern(p))
                g_ptr_array_add(c, g_strdup_printf("%.*s%s", (int)(strlen(p) - 1), p, dot + 1));
        }
        g_ptr_array_unref(pats);
    }
    g_ptr_array_add(c, NULL);
    return c;
}

size_t crl__schema_selector_count(const crl_schema *s, const char *section)
{
    size_t n = 0;
    for (guint i = 0; s && i < s->selectors->len; i++)
        n += crl__section_matches(((schema_selector *)g_ptr_array_index(s->selectors, i))->section, section);
    return n;
}

void crl__schema_selector_at(const crl_schema *s, const char *section, size_t idx, const char **key,
                             crl_kind *kind)
{
    *key = NULL;
    *kind = 0;
    size_t n = 0;
    for (guint i = 0; s && i < s->selectors->len; i++) {
        schema_selector *sel = g_ptr_array_index(s->selectors, i);
        if (!crl__section_matches(sel->section, section))
            continue;
        if (n++ == idx) {
            *key = sel->key;
            *kind = sel->kind;
            return;
        }
    }
}

/* The tables added for `section` itself (no selectors), appended to out. */
static void base_tables(const crl_schema *s, const char *section, GPtrArray *out)
{
    for (guint i = 0; i < s->entries->len; i++) {
        schema_entry *e = g_ptr_array_index(s->entries, i);
        if (e->table && crl__section_matches(e->section, section))
            g_ptr_array_add(out, (gpointer)e->table);
    }
}

const char *crl__schema_selector_value(const crl_schema *s, const crl_config *cfg, const char *section,
                                       const char *key, const crl__entry **entry)
{
    if (entry)
        *entry = NULL;
    const crl__section *sec = cfg ? crl__config_section(cfg, section) : NULL;
    const crl__entry *e = sec ? crl__section_entry(sec, key) : NULL;
    if (e) {
        if (entry)
            *entry = e;
        return e->value;
    }
    GPtrArray *base = g_ptr_array_new();
    base_tables(s, section, base);
    const crl_option *opt = crl__find_option((const crl_option *const *)base->pdata, base->len, key);
    g_ptr_array_unref(base);
    return opt && !(opt->flags & CRL_OPT_PREFIX) ? opt->default_value : NULL;
}

const crl_option *crl__schema_lookup(const crl_schema *s, crl_kind kind, const char *name)
{
    if (!s || !s->lookup || !name)
        return NULL;
    return s->lookup(s->lookup_user, kind, name);
}

const char **crl__schema_names(const crl_schema *s, crl_kind kind)
{
    GPtrArray *names = g_ptr_array_new();
    for (size_t i = 0; s && s->names; i++) {
        const char *n = s->names(s->names_user, kind, i);
        if (!n)
            break;
        g_ptr_array_add(names, (gpointer)n);
    }
    g_ptr_array_add(names, NULL);
    return (const char **)g_ptr_array_free(names, FALSE);
}

static bool same_tables(GPtrArray *a, GPtrArray *b)
{
    if (a->len != b->len)
        return false;
    for (guint i = 0; i < a->len; i++)
        if (g_ptr_array_index(a, i) != g_ptr_array_index(b, i))
            return false;
    return true;
}

const crl_option *const *crl_schema_tables(const crl_schema *s, const crl_config *cfg, const char *section,
                                           size_t *n)
{
    if (n)
        *n = 0;
    if (!s || !section || !crl__schema_knows(s, section))
        return NULL;
    GPtrArray *t = g_ptr_array_new();
    base_tables(s, section, t);
    size_t nsel = crl__schema_selector_count(s, section);
    for (size_t i = 0; i < nsel; i++) {
        const char *key;
        crl_kind kind;
        crl__schema_selector_at(s, section, i, &key, &kind);
        const char *value = crl__schema_selector_value(s, cfg, section, key, NULL);
        const crl_option *table = crl__schema_lookup(s, kind, value);
        bool dup = false;
        for (guint j = 0; table && j < t->len; j++)
            dup = dup || g_ptr_array_index(t, j) == table;
        if (table && !dup)
            g_ptr_array_add(t, (gpointer)table);
    }
    if (n)
        *n = t->len;
    g_ptr_array_add(t, NULL);
    /* The cache is logically part of the answer, not of the schema's
     * meaning: reuse an identical array or keep this one. */
    GPtrArray *cache = s->cache;
    for (guint i = 0; i < cache->len; i++) {
        GPtrArray *c = g_ptr_array_index(cache, i);
        if (same_tables(c, t)) {
            g_ptr_array_unref(t);
            return (const crl_option *const *)c->pdata;
        }
    }
    g_ptr_array_add(cache, t);
    return (const crl_option *const *)t->pdata;
}
