/* Scan results: file identity, owned copies of option tables, and the GVariant record that carries a result
 * from the scanner process to the host and into the registry cache (type in registry-cache-private.h). */
#include "registry-cache-private.h"

#include <stdarg.h>
#include <string.h>

/* ---- file identity -------------------------------------------------------------------------------------- */

/* Unsigned arithmetic: a file dated past 2262 wraps instead of overflowing; only equality matters. */
static int64_t ns_of(const struct timespec *ts)
{
    return (int64_t)((uint64_t)ts->tv_sec * 1000000000u + (uint64_t)ts->tv_nsec);
}

void crl__file_id_from_stat(const struct stat *st, crl__file_id *id)
{
    id->dev = (uint64_t)st->st_dev;
    id->ino = (uint64_t)st->st_ino;
    id->size = (uint64_t)st->st_size;
    id->mtime_ns = ns_of(&st->st_mtim);
    id->ctime_ns = ns_of(&st->st_ctim);
}

bool crl__file_id_equal(const crl__file_id *a, const crl__file_id *b)
{
    return a->dev == b->dev && a->ino == b->ino && a->size == b->size && a->mtime_ns == b->mtime_ns &&
           a->ctime_ns == b->ctime_ns;
}

/* ---- results and option tables -------------------------------------------------------------------------- */

crl_option *crl__options_dup(const crl_option *table)
{
    size_t n = 0;
    while (table && table[n].type != CRL_OPT_END)
        n++;
    crl_option *copy = g_new0(crl_option, n + 1); /* zeroed: the last entry is CRL_OPTIONS_END */
    for (size_t i = 0; i < n; i++) {
        copy[i] = table[i];
        copy[i].name = g_strdup(table[i].name);
        copy[i].default_value = g_strdup(table[i].default_value);
        copy[i].choices = g_strdup(table[i].choices);
        copy[i].doc = g_strdup(table[i].doc);
    }
    return copy;
}

void crl__options_free(crl_option *table)
{
    if (!table)
        return;
    for (crl_option *o = table; o->type != CRL_OPT_END; o++) {
        g_free((char *)o->name);
        g_free((char *)o->default_value);
        g_free((char *)o->choices);
        g_free((char *)o->doc);
    }
    g_free(table);
}

crl__scan_result *crl__scan_result_new(const char *path)
{
    crl__scan_result *r = g_new0(crl__scan_result, 1);
    r->path = g_strdup(path);
    r->status = CRL_OK;
    r->plugin_options = crl__options_dup(NULL);
    return r;
}

void crl__scan_result_free(crl__scan_result *r)
{
    if (!r)
        return;
    g_free(r->path);
    g_free(r->reason);
    g_free(r->name);
    g_free(r->version);
    g_free(r->license);
    g_free(r->description);
    crl__options_free(r->plugin_options);
    for (size_t i = 0; r->components && i < r->n_components; i++) {
        g_free(r->components[i].name);
        g_free(r->components[i].description);
        crl__options_free(r->components[i].options);
    }
    g_free(r->components);
    g_free(r);
}

/* ---- to GVariant ---------------------------------------------------------------------------------------- */

static GVariant *text(const char *s)
{
    return g_variant_new_bytestring(s ? s : "");
}

static GVariant *mtext(const char *s)
{
    return g_variant_new_maybe(G_VARIANT_TYPE_BYTESTRING, s ? g_variant_new_bytestring(s) : NULL);
}

static GVariant *options_to_variant(const crl_option *table)
{
    GVariantBuilder b;
    g_variant_builder_init(&b, G_VARIANT_TYPE("a" CRL__SCAN_OPTION_TYPE));
    for (const crl_option *o = table; o && o->type != CRL_OPT_END; o++)
        g_variant_builder_add_value(&b, g_variant_new("(@ayiu@maydd@may@may)", text(o->name), o->type, o->flags,
                                                      mtext(o->default_value), o->min, o->max, mtext(o->choices),
                                                      mtext(o->doc)));
    return g_variant_builder_end(&b);
}

/* A floating reference, like g_variant_new's. */
GVariant *crl__scan_result_to_variant(const crl__scan_result *r)
{
    GVariantBuilder comps;
    g_variant_builder_init(&comps, G_VARIANT_TYPE("a" CRL__SCAN_COMPONENT_TYPE));
    for (size_t i = 0; r->components && i < r->n_components; i++) {
        const crl__scan_component *c = &r->components[i];
        g_variant_builder_add_value(&comps, g_variant_new("(i@ay@may@a" CRL__SCAN_OPTION_TYPE ")", c->kind,
                                                          text(c->name), mtext(c->description),
                                                          options_to_variant(c->options)));
    }
    return g_variant_new("(@ay(tttxx)i@may@may@may@may@may(uu)@a" CRL__SCAN_OPTION_TYPE "@a"
                         CRL__SCAN_COMPONENT_TYPE ")",
                         text(r->path), (guint64)r->id.dev, (guint64)r->id.ino, (guint64)r->id.size,
                         (gint64)r->id.mtime_ns, (gint64)r->id.ctime_ns, r->status, mtext(r->reason),
                         mtext(r->name), mtext(r->version), mtext(r->license), mtext(r->description),
                         r->abi_major, r->abi_minor, options_to_variant(r->plugin_options),
                         g_variant_builder_end(&comps));
}

/* ---- from GVariant (hostile input) ---------------------------------------------------------------------- */

/* A bounded copy of hostile text for a message, control characters shown as '?'. */
static char *shown(const char *s)
{
    if (!s)
        return g_strdup("(none)");
    char *c = g_strndup(s, 80);
    for (char *p = c; *p; p++)
        if ((unsigned char)*p < 0x20 || *p == 0x7f)
            *p = '?';
    return c;
}

/* The text in a bytestring; NULL on success, else what is wrong with it. */
static const char *get_text(GVariant *ay, char **out)
{
    gsize n = 0;
    const char *p = g_variant_get_fixed_array(ay, &n, 1);
    *out = NULL;
    if (n == 0 || p[n - 1] != '\0')
        return "is not NUL-terminated";
    if (n - 1 > CRL__SCAN_TEXT_MAX)
        return "is longer than " G_STRINGIFY(CRL__SCAN_TEXT_MAX) " bytes";
    if (memchr(p, '\0', n - 1))
        return "holds a NUL byte";
    *out = g_strndup(p, n - 1);
    return NULL;
}

/* Child i of a tuple as text ("ay") or optional text ("may", NULL when absent). */
static const char *child_text(GVariant *tuple, gsize i, char **out)
{
    GVariant *c = g_variant_get_child_value(tuple, i);
    const char *why;
    if (g_variant_is_of_type(c, G_VARIANT_TYPE_BYTESTRING)) {
        why = get_text(c, out);
    } else {
        GVariant *m = g_variant_get_maybe(c);
        *out = NULL;
        why = m ? get_text(m, out) : NULL;
        if (m)
            g_variant_unref(m);
    }
    g_variant_unref(c);
    return why;
}

/* Messages start with the record's path (when known) so the caller need not say which record. */
typedef struct reader {
    const char *path;
    crl_error *err;
} reader;

static int bad(const reader *rd, const char *fmt, ...) CRL_PRINTF(2, 3);
static int bad(const reader *rd, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    char *msg = g_strdup_vprintf(fmt, ap);
    va_end(ap);
    char *p = shown(rd->path);
    if (rd->path)
        crl_error_set(rd->err, CRL_E_CORRUPT, "scan record for %s: %s", p, msg);
    else
        crl_error_set(rd->err, CRL_E_CORRUPT, "scan record: %s", msg);
    g_free(p);
    g_free(msg);
    return CRL_E_CORRUPT;
}

static bool valid_component_name(const char *s)
{
    if (!*s)
        return false;
    for (; *s; s++)
        if (!g_ascii_isalnum(*s) && *s != '_' && *s != '.' && *s != '-')
            return false;
    return true;
}

/* One option table, checked as the host checks a component author's table (schema.c). `where` names it. */
static int options_from_variant(const reader *rd, GVariant *arr, const char *where, crl_option **out)
{
    *out = NULL;
    gsize n = g_variant_n_children(arr);
    if (n > CRL__SCAN_OPTIONS_MAX)
        return bad(rd, "%s: %zu options, more than %d", where, (size_t)n, CRL__SCAN_OPTIONS_MAX);
    crl_option *t = g_new0(crl_option, n + 1);
    int rc = CRL_OK;
    for (gsize i = 0; i < n && rc == CRL_OK; i++) {
        GVariant *ov = g_variant_get_child_value(arr, i);
        crl_option *o = &t[i];
        char *name = NULL, *def = NULL, *choices = NULL, *doc = NULL;
        const char *why = NULL, *field = NULL;
        if ((why = child_text(ov, 0, &name)))
            field = "name";
        else if ((why = child_text(ov, 3, &def)))
            field = "default";
        else if ((why = child_text(ov, 6, &choices)))
            field = "choices";
        else if ((why = child_text(ov, 7, &doc)))
            field = "doc";
        int32_t type = 0;
        uint32_t flags = 0;
        double min = 0, max = 0;
        g_variant_get_child(ov, 1, "i", &type);
        g_variant_get_child(ov, 2, "u", &flags);
        g_variant_get_child(ov, 4, "d", &min);
        g_variant_get_child(ov, 5, "d", &max);
        g_variant_unref(ov);
        /* Owned by the table from here, so a failure below frees them with it; type stays END until the
         * entry is complete, so an incomplete one ends the table. */
        o->name = name;
        o->default_value = def;
        o->choices = choices;
        o->doc = doc;
        o->flags = flags;
        o->min = min;
        o->max = max;
        char *sn = shown(name);
        if (why)
            rc = bad(rd, "%s: option %zu: %s %s", where, (size_t)i, field, why);
        else if (!*name)
            rc = bad(rd, "%s: option %zu has an empty name", where, (size_t)i);
        else if (type < CRL_OPT_BOOL || type > CRL_OPT_DOUBLES)
            rc = bad(rd, "%s: option '%s' has unknown type %d (expected %d..%d)", where, sn, (int)type,
                     CRL_OPT_BOOL, CRL_OPT_DOUBLES);
        else if ((flags & CRL_OPT_PREFIX) && name[strlen(name) - 1] != '.')
            rc = bad(rd, "%s: prefix option '%s' does not end with '.'", where, sn);
        else if (type == CRL_OPT_ENUM && (!choices || !*choices))
            rc = bad(rd, "%s: enum option '%s' has no choices", where, sn);
        else if ((flags & CRL_OPT_RANGE) && !(min <= max))
            rc = bad(rd, "%s: option '%s' has min %g > max %g", where, sn, min, max);
        g_free(sn);
        if (rc) {
            /* Not yet counted by the table's END scan: free by hand. */
            g_free(name);
            g_free(def);
            g_free(choices);
            g_free(doc);
            o->name = o->default_value = o->choices = o->doc = NULL;
        } else {
            o->type = type;
        }
    }
    if (rc) {
        crl__options_free(t);
        return rc;
    }
    *out = t;
    return CRL_OK;
}

static int components_from_variant(const reader *rd, GVariant *arr, crl__scan_result *r)
{
    gsize n = g_variant_n_children(arr);
    if (n > CRL__SCAN_COMPONENTS_MAX)
        return bad(rd, "%zu components, more than %d", (size_t)n, CRL__SCAN_COMPONENTS_MAX);
    r->components = g_new0(crl__scan_component, n ? n : 1);
    /* kind/name is unique, as crl_host_register keeps it. */
    GHashTable *seen = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL);
    int rc = CRL_OK;
    for (gsize i = 0; i < n && rc == CRL_OK; i++) {
        GVariant *cv = g_variant_get_child_value(arr, i);
        crl__scan_component *c = &r->components[i];
        r->n_components = i + 1; /* from here freed with r */
        const char *why;
        g_variant_get_child(cv, 0, "i", &c->kind);
        if ((why = child_text(cv, 1, &c->name))) {
            rc = bad(rd, "component %zu: name %s", (size_t)i, why);
        } else if ((why = child_text(cv, 2, &c->description))) {
            rc = bad(rd, "component %zu: description %s", (size_t)i, why);
        } else if (c->kind <= 0 || c->kind >= CRL_KIND_COUNT) {
            char *sn = shown(c->name);
            rc = bad(rd, "component %zu ('%s') has unknown kind %d (expected 1..%d)", (size_t)i, sn, (int)c->kind,
                     CRL_KIND_COUNT - 1);
            g_free(sn);
        } else if (!valid_component_name(c->name)) {
            char *sn = shown(c->name);
            rc = bad(rd, "component %zu: bad %s name '%s' (names are non-empty and use only [A-Za-z0-9_.-])",
                     (size_t)i, crl_kind_name((crl_kind)c->kind), sn);
            g_free(sn);
        } else {
            char *key = g_strdup_printf("%s/%s", crl_kind_name((crl_kind)c->kind), c->name);
            if (!g_hash_table_add(seen, key)) {
                rc = bad(rd, "component %zu: %s appears twice", (size_t)i, key);
            } else {
                GVariant *ov = g_variant_get_child_value(cv, 3);
                rc = options_from_variant(rd, ov, key, &c->options);
                g_variant_unref(ov);
            }
        }
        g_variant_unref(cv);
    }
    g_hash_table_destroy(seen);
    /* Every component holds a table, even one cut short by an error. */
    for (size_t i = 0; i < r->n_components; i++)
        if (!r->components[i].options)
            r->components[i].options = crl__options_dup(NULL);
    return rc;
}

crl__scan_result *crl__scan_result_from_variant(GVariant *v, crl_error *err)
{
    reader rd = { NULL, err };
    if (!v) {
        bad(&rd, "no record (NULL)");
        return NULL;
    }
    if (!g_variant_is_of_type(v, G_VARIANT_TYPE(CRL__SCAN_RECORD_TYPE))) {
        bad(&rd, "has type '%s', expected '%s'", g_variant_get_type_string(v), CRL__SCAN_RECORD_TYPE);
        return NULL;
    }
    /* Outside normal form GVariant reads malformed parts as zeros and empty strings; refuse instead. */
    if (!g_variant_is_normal_form(v)) {
        bad(&rd, "malformed serialized data (not in GVariant normal form)");
        return NULL;
    }
    crl__scan_result *r = crl__scan_result_new(NULL);
    const char *why;
    int rc = CRL_OK;
    if ((why = child_text(v, 0, &r->path))) {
        rc = bad(&rd, "path %s", why);
        goto out;
    }
    if (!*r->path) {
        rc = bad(&rd, "the path is empty");
        goto out;
    }
    rd.path = r->path;
    guint64 dev, ino, size;
    gint64 mtime, ctime;
    g_variant_get_child(v, 1, "(tttxx)", &dev, &ino, &size, &mtime, &ctime);
    r->id = (crl__file_id){ dev, ino, size, mtime, ctime };
    g_variant_get_child(v, 2, "i", &r->status);
    g_variant_get_child(v, 8, "(uu)", &r->abi_major, &r->abi_minor);
    static const char *const fields[] = { NULL, NULL, NULL, "reason", "plugin name", "plugin version",
                                          "plugin license", "plugin description" };
    char **dest[] = { NULL, NULL, NULL, &r->reason, &r->name, &r->version, &r->license, &r->description };
    for (gsize i = 3; i < G_N_ELEMENTS(dest); i++)
        if ((why = child_text(v, i, dest[i]))) {
            rc = bad(&rd, "%s %s", fields[i], why);
            goto out;
        }
    if (r->status < 0) {
        rc = bad(&rd, "status %d is negative", (int)r->status);
        goto out;
    }
    if (r->status != CRL_OK && (!r->reason || !*r->reason)) {
        rc = bad(&rd, "status %s (%d) but no reason given", crl_status_name(r->status), (int)r->status);
        goto out;
    }
    /* A plugin that passed every check had its descriptor read. */
    if (r->status == CRL_OK && (!r->name || !*r->name)) {
        rc = bad(&rd, "status CRL_OK but no plugin name");
        goto out;
    }
    GVariant *ov = g_variant_get_child_value(v, 9);
    crl__options_free(r->plugin_options);
    rc = options_from_variant(&rd, ov, "plugin options", &r->plugin_options);
    g_variant_unref(ov);
    if (!r->plugin_options)
        r->plugin_options = crl__options_dup(NULL);
    if (rc)
        goto out;
    GVariant *cv = g_variant_get_child_value(v, 10);
    rc = components_from_variant(&rd, cv, r);
    g_variant_unref(cv);
out:
    if (rc) {
        crl__scan_result_free(r);
        return NULL;
    }
    return r;
}
