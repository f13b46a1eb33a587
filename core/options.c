/* crl_opts: one section's validated option values, their origins and typed getters. */
#include "config-private.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef struct opt_slot {
    const crl_option *decl;
    char *raw;         /* the value given or the default; NULL when neither */
    char *origin;      /* "FILE:LINE", "command line", "default" or "not set" */
    bool set;          /* given explicitly */
    bool has;          /* v holds a parsed value */
    crl__value v;
} opt_slot;

typedef struct prefixed_key {
    char *prefix;
    char *key;
    char *value;
    char *origin;
} prefixed_key;

struct crl_opts {
    char *section;
    GPtrArray *slots;        /* opt_slot *, declaration order */
    GHashTable *by_name;     /* name -> opt_slot * (borrowed) */
    GPtrArray *prefixed;     /* prefixed_key *, file order */
    const void *nets;        /* the [net.*] sections a loss builds from (nn_config.c; borrowed) */
};

static void free_slot(gpointer p)
{
    opt_slot *s = p;
    g_free(s->raw);
    g_free(s->origin);
    crl__value_clear(&s->v);
    g_free(s);
}

static void free_prefixed(gpointer p)
{
    prefixed_key *k = p;
    g_free(k->prefix);
    g_free(k->key);
    g_free(k->value);
    g_free(k->origin);
    g_free(k);
}

crl_opts *crl__opts_new(const char *section)
{
    crl_opts *o = g_new0(crl_opts, 1);
    o->section = g_strdup(section ? section : "");
    o->slots = g_ptr_array_new_with_free_func(free_slot);
    o->by_name = g_hash_table_new(g_str_hash, g_str_equal);
    o->prefixed = g_ptr_array_new_with_free_func(free_prefixed);
    return o;
}

void crl_opts_free(crl_opts *o)
{
    if (!o)
        return;
    g_hash_table_unref(o->by_name);
    g_ptr_array_unref(o->slots);
    g_ptr_array_unref(o->prefixed);
    g_free(o->section);
    g_free(o);
}

int crl__opts_declare(crl_opts *o, const crl_option *opt, const char *value, const char *origin,
                      crl_error *err)
{
    if (g_hash_table_contains(o->by_name, opt->name))
        return CRL_OK;
    opt_slot *s = g_new0(opt_slot, 1);
    s->decl = opt;
    s->set = value != NULL;
    if (value) {
        s->raw = g_strdup(value);
        s->origin = g_strdup(origin ? origin : "command line");
    } else if (opt->default_value && !(opt->flags & CRL_OPT_PREFIX)) {
        s->raw = g_strdup(opt->default_value);
        s->origin = g_strdup("default");
    } else {
        s->origin = g_strdup((opt->flags & CRL_OPT_PREFIX) ? "default" : "not set");
    }
    if (s->raw && !(opt->flags & CRL_OPT_PREFIX)) {
        char *why = NULL;
        if (!crl__parse_value(opt, s->raw, &s->v, &why)) {
            int code = s->set ? CRL_E_CONFIG : CRL_E_INVALID;
            if (s->set)
                crl_error_set(err, CRL_E_CONFIG, "%s: [%s] %s = '%s': %s", s->origin, o->section, opt->name,
                              s->raw, why);
            else
                crl_error_set(err, CRL_E_INVALID,
                              "option table for [%s]: default of '%s' ('%s') is invalid: %s; fix the table",
                              o->section, opt->name, s->raw, why);
            g_free(why);
            free_slot(s);
            return code;
        }
        s->has = true;
    }
    g_ptr_array_add(o->slots, s);
    g_hash_table_insert(o->by_name, (gpointer)opt->name, s);
    return CRL_OK;
}

void crl__opts_add_prefixed(crl_opts *o, const char *prefix, const char *key, const char *value,
                            const char *origin)
{
    prefixed_key *k = g_new0(prefixed_key, 1);
    k->prefix = g_strdup(prefix);
    k->key = g_strdup(key);
    k->value = g_strdup(value);
    k->origin = g_strdup(origin);
    g_ptr_array_add(o->prefixed, k);
    opt_slot *s = g_hash_table_lookup(o->by_name, prefix);
    if (s && !s->set) {
        s->set = true;
        g_free(s->origin);
        s->origin = g_strdup(origin);
    }
}

crl_opts *crl__opts_override(const crl_opts *base, const char *const *names, const char *const *values,
                             const char *const *origins, size_t n, crl_error *err)
{
    crl_opts *o = crl__opts_new(base->section);
    for (guint i = 0; i < base->slots->len; i++) {
        const opt_slot *s = g_ptr_array_index(base->slots, i);
        const char *value = s->set ? s->raw : NULL, *origin = s->origin;
        for (size_t k = 0; k < n; k++)
            if (!strcmp(names[k], s->decl->name)) {
                value = values[k];
                origin = origins[k];
            }
        int rc = crl__opts_declare(o, s->decl, (s->decl->flags & CRL_OPT_PREFIX) ? NULL : value, origin, err);
        if (rc) {
            crl_opts_free(o);
            return NULL;
        }
    }
    for (guint i = 0; i < base->prefixed->len; i++) {
        const prefixed_key *k = g_ptr_array_index(base->prefixed, i);
        crl__opts_add_prefixed(o, k->prefix, k->key, k->value, k->origin);
    }
    return o;
}

crl_opts *crl__opts_copy(const crl_opts *base, crl_error *err)
{
    return crl__opts_override(base, NULL, NULL, NULL, 0, err);
}

void crl__opts_set_nets(crl_opts *o, const void *nets)
{
    o->nets = nets;
}

const void *crl__opts_nets(const crl_opts *o)
{
    return o ? o->nets : NULL;
}

/* Saved as keys of one GKeyFile group: "set.NAME" = raw and "at.NAME" = origin for each option given
 * explicitly, "prefixed" = the count, then "pNAME.i" for the prefixed keys' four fields. */
void crl__opts_save(const crl_opts *o, GKeyFile *kf, const char *group)
{
    g_key_file_set_string(kf, group, "section", o->section);
    for (guint i = 0; i < o->slots->len; i++) {
        const opt_slot *s = g_ptr_array_index(o->slots, i);
        if (!s->set || !s->raw || (s->decl->flags & CRL_OPT_PREFIX))
            continue;
        char *k = g_strconcat("set.", s->decl->name, NULL), *a = g_strconcat("at.", s->decl->name, NULL);
        g_key_file_set_string(kf, group, k, s->raw);
        g_key_file_set_string(kf, group, a, s->origin ? s->origin : "");
        g_free(k);
        g_free(a);
    }
    g_key_file_set_integer(kf, group, "prefixed", (gint)o->prefixed->len);
    for (guint i = 0; i < o->prefixed->len; i++) {
        const prefixed_key *pk = g_ptr_array_index(o->prefixed, i);
        const char *fields[4][2] = { { "pprefix", pk->prefix }, { "pkey", pk->key }, { "pvalue", pk->value },
                                     { "porigin", pk->origin } };
        for (int f = 0; f < 4; f++) {
            char *k = g_strdup_printf("%s.%u", fields[f][0], i);
            g_key_file_set_string(kf, group, k, fields[f][1] ? fields[f][1] : "");
            g_free(k);
        }
    }
}

crl_opts *crl__opts_load(GKeyFile *kf, const char *group, const crl_option *const *tables, size_t ntables,
                         crl_error *err)
{
    char *section = g_key_file_get_string(kf, group, "section", NULL);
    crl_opts *o = crl__opts_new(section);
    g_free(section);
    for (size_t t = 0; t < ntables; t++)
        for (const crl_option *opt = tables[t]; opt && opt->type != CRL_OPT_END; opt++) {
            char *k = g_strconcat("set.", opt->name, NULL), *a = g_strconcat("at.", opt->name, NULL);
            char *raw = (opt->flags & CRL_OPT_PREFIX) ? NULL : g_key_file_get_string(kf, group, k, NULL);
            char *at = raw ? g_key_file_get_string(kf, group, a, NULL) : NULL;
            int rc = crl__opts_declare(o, opt, raw, at, err);
            g_free(raw);
            g_free(at);
            g_free(k);
            g_free(a);
            if (rc) {
                crl_opts_free(o);
                return NULL;
            }
        }
    gint n = g_key_file_get_integer(kf, group, "prefixed", NULL);
    for (gint i = 0; i < n; i++) {
        char *v[4];
        static const char *const names[4] = { "pprefix", "pkey", "pvalue", "porigin" };
        for (int f = 0; f < 4; f++) {
            char *k = g_strdup_printf("%s.%d", names[f], i);
            v[f] = g_key_file_get_string(kf, group, k, NULL);
            g_free(k);
        }
        if (v[0] && v[1] && v[2])
            crl__opts_add_prefixed(o, v[0], v[1], v[2], v[3] ? v[3] : "");
        for (int f = 0; f < 4; f++)
            g_free(v[f]);
    }
    return o;
}

const char *crl_opts_section(const crl_opts *o)
{
    return o ? o->section : NULL;
}

static opt_slot *slot(const crl_opts *o, const char *name)
{
    return o && name ? g_hash_table_lookup(o->by_name, name) : NULL;
}

bool crl_opts_is_set(const crl_opts *o, const char *name)
{
    opt_slot *s = slot(o, name);
    return s && s->set;
}

const char *crl_opts_origin(const crl_opts *o, const char *name)
{
    opt_slot *s = slot(o, name);
    return s ? s->origin : NULL;
}

static const char *getter_for(int type)
{
    switch (type) {
    case CRL_OPT_BOOL: return "crl_opts_bool";
    case CRL_OPT_INT: return "crl_opts_int";
    case CRL_OPT_DOUBLE: return "crl_opts_double";
    case CRL_OPT_SIZE: return "crl_opts_size";
    case CRL_OPT_STRING:
    case CRL_OPT_ENUM: return "crl_opts_string";
    case CRL_OPT_LIST: return "crl_opts_list";
    case CRL_OPT_DOUBLES: return "crl_opts_doubles";
    default: return "crl_opts_prefixed_*";
    }
}

/* The slot for a typed getter in *out, or an error code with err set. */
static int typed(const crl_opts *o, const char *name, int type, int alt_type, opt_slot **out, crl_error *err)
{
    *out = NULL;
    if (!o || !name)
        return crl_error_set(err, CRL_E_INVALID, "crl_opts getter: options or name is NULL");
    opt_slot *s = slot(o, name);
    if (!s) {
        GString *names = g_string_new(NULL);
        for (guint i = 0; i < o->slots->len; i++) {
            opt_slot *d = g_ptr_array_index(o->slots, i);
            g_string_append_printf(names, "%s%s", i ? ", " : "", d->decl->name);
        }
        const char **cand = g_new0(const char *, o->slots->len + 1);
        for (guint i = 0; i < o->slots->len; i++)
            cand[i] = ((opt_slot *)g_ptr_array_index(o->slots, i))->decl->name;
        const char *hint = crl_did_you_mean(name, cand);
        if (hint)
            crl_error_set(err, CRL_E_NOT_FOUND, "[%s] declares no option '%s'; did you mean '%s'?", o->section,
                          name, hint);
        else
            crl_error_set(err, CRL_E_NOT_FOUND, "[%s] declares no option '%s' (declared: %s)", o->section, name,
                          names->len ? names->str : "none");
        g_free(cand);
        g_string_free(names, TRUE);
        return CRL_E_NOT_FOUND;
    }
    int dt = s->decl->type;
    if (s->decl->flags & CRL_OPT_PREFIX)
        return crl_error_set(err, CRL_E_INVALID,
                             "[%s] %s is a prefix option (%s values); read its keys with crl_opts_prefixed_*",
                             o->section, name, crl__opt_type_name(dt));
    if (dt != type && dt != alt_type)
        return crl_error_set(err, CRL_E_INVALID, "[%s] %s is declared as %s; read it with %s", o->section, name,
                             crl__opt_type_name(dt), getter_for(dt));
    if (!s->has)
        return crl_error_set(err, CRL_E_NOT_FOUND,
                             "[%s] %s is not set and has no default; add '%s = ...' under [%s]", o->section, name,
                             name, o->section);
    *out = s;
    return CRL_OK;
}

int crl_opts_bool(const crl_opts *o, const char *name, bool *out, crl_error *err)
{
    opt_slot *s;
    int rc = typed(o, name, CRL_OPT_BOOL, -1, &s, err);
    if (rc)
        return rc;
    *out = s->v.b;
    return CRL_OK;
}

int crl_opts_int(const crl_opts *o, const char *name, int64_t *out, crl_error *err)
{
    opt_slot *s;
    int rc = typed(o, name, CRL_OPT_INT, -1, &s, err);
    if (rc)
        return rc;
    *out = s->v.i;
    return CRL_OK;
}

int crl_opts_double(const crl_opts *o, const char *name, double *out, crl_error *err)
{
    opt_slot *s;
    int rc = typed(o, name, CRL_OPT_DOUBLE, -1, &s, err);
    if (rc)
        return rc;
    *out = s->v.d;
    return CRL_OK;
}

int crl_opts_size(const crl_opts *o, const char *name, uint64_t *out, crl_error *err)
{
    opt_slot *s;
    int rc = typed(o, name, CRL_OPT_SIZE, -1, &s, err);
    if (rc)
        return rc;
    *out = s->v.u;
    return CRL_OK;
}

int crl_opts_string(const crl_opts *o, const char *name, const char **out, crl_error *err)
{
    opt_slot *s;
    int rc = typed(o, name, CRL_OPT_STRING, CRL_OPT_ENUM, &s, err);
    if (rc)
        return rc;
    *out = s->raw;
    return CRL_OK;
}

int crl_opts_list(const crl_opts *o, const char *name, size_t *n, const char *const **items, crl_error *err)
{
    opt_slot *s;
    int rc = typed(o, name, CRL_OPT_LIST, -1, &s, err);
    if (rc)
        return rc;
    *n = s->v.n;
    *items = (const char *const *)s->v.items;
    return CRL_OK;
}

int crl_opts_doubles(const crl_opts *o, const char *name, size_t *n, const double **vals, crl_error *err)
{
    opt_slot *s;
    int rc = typed(o, name, CRL_OPT_DOUBLES, -1, &s, err);
    if (rc)
        return rc;
    *n = s->v.n;
    *vals = s->v.doubles;
    return CRL_OK;
}

static const prefixed_key *prefixed_at(const crl_opts *o, const char *prefix, size_t idx)
{
    size_t n = 0;
    for (guint i = 0; o && prefix && i < o->prefixed->len; i++) {
        const prefixed_key *k = g_ptr_array_index(o->prefixed, i);
        if (strcmp(k->prefix, prefix) == 0 && n++ == idx)
            return k;
    }
    return NULL;
}

size_t crl_opts_prefixed_count(const crl_opts *o, const char *prefix)
{
    size_t n = 0;
    for (guint i = 0; o && prefix && i < o->prefixed->len; i++)
        n += strcmp(((prefixed_key *)g_ptr_array_index(o->prefixed, i))->prefix, prefix) == 0;
    return n;
}

const char *crl_opts_prefixed_key(const crl_opts *o, const char *prefix, size_t i)
{
    const prefixed_key *k = prefixed_at(o, prefix, i);
    return k ? k->key : NULL;
}

const char *crl_opts_prefixed_value(const crl_opts *o, const char *prefix, size_t i)
{
    const prefixed_key *k = prefixed_at(o, prefix, i);
    return k ? k->value : NULL;
}

const char *crl__opts_prefixed_origin(const crl_opts *o, const char *prefix, size_t i)
{
    const prefixed_key *k = prefixed_at(o, prefix, i);
    return k ? k->origin : NULL;
}

/* ---- value parsers (shared by crl_opts, raw getters and validation) ---- */

bool crl_parse_bool(const char *s, bool *out)
{
    static const char *const yes[] = { "true", "yes", "on", "1" };
    static const char *const no[] = { "false", "no", "off", "0" };
    if (!s)
        return false;
    for (size_t i = 0; i < G_N_ELEMENTS(yes); i++) {
        if (g_ascii_strcasecmp(s, yes[i]) == 0) {
            if (out)
                *out = true;
            return true;
        }
        if (g_ascii_strcasecmp(s, no[i]) == 0) {
            if (out)
                *out = false;
            return true;
        }
    }
    return false;
}

/* Decimal, or hex after "0x"; an optional sign; no blanks, no junk, no
 * octal ("010" is ten). */
bool crl_parse_int(const char *s, int64_t *out)
{
    if (!s)
        return false;
    const char *p = s;
    bool neg = false;
    if (*p == '+' || *p == '-')
        neg = *p++ == '-';
    int base = 10;
    if (p[0] == '0' && (p[1] == 'x' || p[1] == 'X')) {
        base = 16;
        p += 2;
    }
    if (base == 16 ? !g_ascii_isxdigit(*p) : !g_ascii_isdigit(*p))
        return false;
    errno = 0;
    char *end = NULL;
    unsigned long long u = strtoull(p, &end, base);
    if (errno == ERANGE || *end != '\0')
        return false;
    int64_t v;
    if (neg) {
        if (u > (unsigned long long)INT64_MAX + 1u)
            return false;
        v = u == (unsigned long long)INT64_MAX + 1u ? INT64_MIN : -(int64_t)u;
    } else {
        if (u > (unsigned long long)INT64_MAX)
            return false;
        v = (int64_t)u;
    }
    if (out)
        *out = v;
    return true;
}

/* Locale-independent ('.' is the decimal point), finite, no junk. */
bool crl_parse_double(const char *s, double *out)
{
    if (!s || !*s || g_ascii_isspace(*s))
        return false;
    char *end = NULL;
    errno = 0;
    double v = g_ascii_strtod(s, &end);
    if (end == s || *end != '\0' || !isfinite(v))
        return false;
    if (out)
        *out = v;
    return true;
}

/* Decimal bytes with an optional unit, powers of 1024, case-insensitive:
 * B, K/KB/KiB, M/MB/MiB, G/GB/GiB, T/TB/TiB, P/PB/PiB.  Blanks may separate
 * the number from the unit ("64 M"); nothing else may follow.  No
 * fractions, no sign, no hex; a result above 2^64-1 is an error. */
bool crl_parse_size(const char *s, uint64_t *out)
{
    if (!s || !g_ascii_isdigit(*s))
        return false;
    errno = 0;
    char *end = NULL;
    unsigned long long u = strtoull(s, &end, 10);
    if (errno == ERANGE)
        return false;
    const char *unit = end;
    while (*unit == ' ' || *unit == '\t')
        unit++;
    if (*unit == '\0' && unit != end)
        return false;   /* trailing blanks without a unit */
    static const char *const units[][3] = {
        { "b", "b", "b" }, { "k", "kb", "kib" }, { "m", "mb", "mib" },
        { "g", "gb", "gib" }, { "t", "tb", "tib" }, { "p", "pb", "pib" },
    };
    int shift = -1;
    if (*unit == '\0')
        shift = 0;
    for (size_t i = 0; shift < 0 && i < G_N_ELEMENTS(units); i++)
        for (size_t j = 0; j < 3; j++)
            if (g_ascii_strcasecmp(unit, units[i][j]) == 0)
                shift = (int)(10 * i);
    if (shift < 0)
        return false;
    if (shift > 0 && u > (UINT64_MAX >> shift))
        return false;
    if (out)
        *out = (uint64_t)u << shift;
    return true;
}

const char *crl__opt_type_name(int type)
{
    switch (type) {
    case CRL_OPT_BOOL: return "BOOL";
    case CRL_OPT_INT: return "INT";
    case CRL_OPT_DOUBLE: return "DOUBLE";
    case CRL_OPT_STRING: return "STRING";
    case CRL_OPT_LIST: return "LIST";
    case CRL_OPT_ENUM: return "ENUM";
    case CRL_OPT_SIZE: return "SIZE";
    case CRL_OPT_DOUBLES: return "DOUBLES";
    default: return "UNKNOWN";
    }
}

const char *crl__format_number(double v, char buf[40])
{
    if (v == floor(v) && fabs(v) < 1e6) {
        g_snprintf(buf, 40, "%.0f", v);
        return buf;
    }
    char fmt[16];
    for (int prec = 1; prec <= 17; prec++) {
        g_snprintf(fmt, sizeof fmt, "%%.%dg", prec);
        g_ascii_formatd(buf, 40, fmt, v);
        if (g_ascii_strtod(buf, NULL) == v)
            break;
    }
    /* "1e+09" -> "1e9", "2.5e-05" -> "2.5e-5". */
    char *e = strchr(buf, 'e');
    if (e) {
        char *src = e + 1, *dst = e + 1;
        if (*src == '+')
            src++;
        else if (*src == '-')
            *dst++ = *src++;
        while (*src == '0' && src[1])
            src++;
        memmove(dst, src, strlen(src) + 1);
    }
    return buf;
}

const crl_option *crl__find_option(const crl_option *const *tables, size_t ntables, const char *key)
{
    if (!key)
        return NULL;
    for (size_t t = 0; tables && t < ntables; t++) {
        for (const crl_option *o = tables[t]; o && o->type != CRL_OPT_END; o++) {
            if (o->flags & CRL_OPT_PREFIX) {
                size_t n = strlen(o->name);
                if (strncmp(key, o->name, n) == 0 && key[n] != '\0')
                    return o;
            } else if (strcmp(key, o->name) == 0) {
                return o;
            }
        }
    }
    return NULL;
}

void crl__value_clear(crl__value *v)
{
    if (!v)
        return;
    g_strfreev(v->items);
    g_free(v->doubles);
    memset(v, 0, sizeof *v);
}

/* Split a comma-separated list; an empty (or blank) value is the empty list,
 * an empty item ("a,,b", "a,") is an error. */
static bool split_list(const char *s, char ***items, size_t *n, char **why)
{
    char *all = g_strstrip(g_strdup(s));
    if (*all == '\0') {
        g_free(all);
        *items = g_new0(char *, 1);
        *n = 0;
        return true;
    }
    char **parts = g_strsplit(all, ",", -1);
    g_free(all);
    size_t k = 0;
    for (; parts[k]; k++) {
        g_strstrip(parts[k]);
        if (parts[k][0] == '\0') {
            *why = g_strdup_printf("item %zu of the list is empty; remove the extra ','", k + 1);
            g_strfreev(parts);
            return false;
        }
    }
    *items = parts;
    *n = k;
    return true;
}

static bool check_range(const crl_option *opt, double v, bool count, char **why)
{
    if (!(opt->flags & CRL_OPT_RANGE) || (v >= opt->min && v <= opt->max))
        return true;
    char a[40], b[40];
    *why = g_strdup_printf(count ? "must have between %s and %s items" : "must be between %s and %s",
                           crl__format_number(opt->min, a), crl__format_number(opt->max, b));
    return false;
}

bool crl__parse_value(const crl_option *opt, const char *s, crl__value *out, char **why)
{
    memset(out, 0, sizeof *out);
    out->type = opt->type;
    *why = NULL;
    if (!s)
        s = "";
    switch (opt->type) {
    case CRL_OPT_BOOL:
        if (!crl_parse_bool(s, &out->b)) {
            *why = g_strdup("expected a boolean (true/false, yes/no, on/off, 1/0)");
            return false;
        }
        return true;
    case CRL_OPT_INT:
        if (!crl_parse_int(s, &out->i)) {
            *why = g_strdup("expected a 64-bit integer (decimal or 0x hex)");
            return false;
        }
        return check_range(opt, (double)out->i, false, why);
    case CRL_OPT_DOUBLE:
        if (!crl_parse_double(s, &out->d)) {
            *why = g_strdup("expected a finite number");
            return false;
        }
        return check_range(opt, out->d, false, why);
    case CRL_OPT_SIZE:
        if (!crl_parse_size(s, &out->u)) {
            *why = g_strdup("expected a size in bytes (4096, 64K, 64M, 2G, 1T; powers of 1024)");
            return false;
        }
        return check_range(opt, (double)out->u, false, why);
    case CRL_OPT_STRING:
        return true;
    case CRL_OPT_ENUM: {
        char **choices = g_strsplit(opt->choices ? opt->choices : "", "|", -1);
        for (size_t i = 0; choices[i]; i++) {
            if (strcmp(choices[i], s) == 0) {
                out->i = (int64_t)i;
                g_strfreev(choices);
                return true;
            }
        }
        const char *hint = crl_did_you_mean(s, (const char *const *)choices);
        *why = hint ? g_strdup_printf("expected one of %s; did you mean '%s'?", opt->choices, hint)
                    : g_strdup_printf("expected one of %s", opt->choices);
        g_strfreev(choices);
        return false;
    }
    case CRL_OPT_LIST:
        if (!split_list(s, &out->items, &out->n, why))
            return false;
        if (!check_range(opt, (double)out->n, true, why)) {
            crl__value_clear(out);
            return false;
        }
        return true;
    case CRL_OPT_DOUBLES: {
        char **items;
        size_t n;
        if (!split_list(s, &items, &n, why))
            return false;
        out->doubles = g_new0(double, n ? n : 1);
        out->n = n;
        for (size_t i = 0; i < n; i++) {
            if (!crl_parse_double(items[i], &out->doubles[i])) {
                *why = g_strdup_printf("item %zu ('%s') is not a finite number", i + 1, items[i]);
                g_strfreev(items);
                crl__value_clear(out);
                return false;
            }
        }
        g_strfreev(items);
        if (!check_range(opt, (double)n, true, why)) {
            crl__value_clear(out);
            return false;
        }
        return true;
    }
    default:
        *why = g_strdup_printf("option has unknown type %d", (int)opt->type);
        return false;
    }
}
