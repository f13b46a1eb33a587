/* Internals shared by config_section.c, config.c, config_parse.c, schema.c, schema_validate.c and
 * options.c, and by the components that read their own sections. */
#ifndef CRL_CONFIG_PRIVATE_H
#define CRL_CONFIG_PRIVATE_H

#include "crl-private.h"

/* One key of one section: the winning value and where it came from. */
typedef struct crl__entry {
    char *key;
    char *value;
    char *origin;   /* "PATH:LINE" or "command line" */
    int layer;      /* crl_config_layer of the value */
} crl__entry;

typedef struct crl__section {
    char *name;
    char *origin;          /* where the section was first seen (header line) */
    GPtrArray *entries;    /* crl__entry *, first-seen order */
    GHashTable *index;     /* key -> crl__entry * (borrowed) */
} crl__section;

struct crl_config {
    GPtrArray *sections;   /* crl__section *, first-seen order */
    GHashTable *index;     /* name -> crl__section * (borrowed) */
    GPtrArray *sources;    /* char *: files and buffers loaded, in order */
};

/* Sections and entries of a config (config_section.c). */
crl__section *crl__config_section(const crl_config *cfg, const char *name) CRL_INTERNAL;
crl__section *crl__config_ensure_section(crl_config *cfg, const char *name, const char *origin) CRL_INTERNAL;
crl__entry *crl__section_entry(const crl__section *sec, const char *key) CRL_INTERNAL;
/* Add a key that the section does not hold yet; takes copies. */
crl__entry *crl__section_add(crl__section *sec, const char *key, const char *value, const char *origin,
                             int layer) CRL_INTERNAL;
/* Set [section] key (both created when missing; copies taken) unless a higher layer already set it. */
void crl__config_set_value(crl_config *cfg, const char *section, const char *section_origin, const char *key,
                           const char *value, const char *origin, int layer) CRL_INTERNAL;

/* The strict INI parser: parse `data` into the empty config `into`
 * (values tagged with `layer`).  CRL_E_CONFIG "NAME:LINE: ..." on error. */
int crl__config_parse(crl_config *into, const char *name, const char *data, size_t len, int layer,
                      crl_error *err) CRL_INTERNAL;

/* A parsed value of a declared option. */
typedef struct crl__value {
    int type;            /* crl_opt_type */
    bool b;
    int64_t i;
    double d;
    uint64_t u;
    char **items;        /* LIST: NULL-terminated (g_strfreev) */
    double *doubles;     /* DOUBLES (g_free) */
    size_t n;            /* LIST / DOUBLES length */
} crl__value;

/* Parse `s` as declared by `opt` (type, range, choices).  On failure
 * returns false and sets *why (g_free) to "expected ..." / "must be ...",
 * the part of a message after "[section] key = 'v': ". */
bool crl__parse_value(const crl_option *opt, const char *s, crl__value *out, char **why) CRL_INTERNAL;
void crl__value_clear(crl__value *v) CRL_INTERNAL;

/* "INT", "BOOL", ... for messages. */
const char *crl__opt_type_name(int type) CRL_INTERNAL;
/* A number for messages: 1 -> "1", 1e9 -> "1e9", 0.25 -> "0.25". */
const char *crl__format_number(double v, char buf[40]) CRL_INTERNAL;

/* The declaration of `key` among `tables` (first match wins; a
 * CRL_OPT_PREFIX option matches any longer key starting with its name). */
const crl_option *crl__find_option(const crl_option *const *tables, size_t ntables, const char *key) CRL_INTERNAL;

/* Schema internals for validation, overrides and show. */
bool crl__section_matches(const char *pattern, const char *name) CRL_INTERNAL;
bool crl__schema_knows(const crl_schema *s, const char *section) CRL_INTERNAL;
/* Exact section names in the order they were first declared (borrowed,
 * NULL-terminated, valid until the schema changes). */
const char *const *crl__schema_exact_sections(const crl_schema *s) CRL_INTERNAL;
/* Candidate names for "did you mean" on an unknown section: exact names,
 * plus for each "prefix.*" pattern the prefix joined with what follows the
 * word's first dot.  Free with g_ptr_array_unref. */
GPtrArray *crl__schema_section_candidates(const crl_schema *s, const char *word) CRL_INTERNAL;
/* Selectors that apply to `section`: count, and the i-th key and kind. */
size_t crl__schema_selector_count(const crl_schema *s, const char *section) CRL_INTERNAL;
void crl__schema_selector_at(const crl_schema *s, const char *section, size_t i, const char **key,
                             crl_kind *kind) CRL_INTERNAL;
/* The value that picks a selector's component: the config's, else the
 * default declared by the section's own tables; NULL when neither.
 * *entry is the config entry when there is one. */
const char *crl__schema_selector_value(const crl_schema *s, const crl_config *cfg, const char *section,
                                       const char *key, const crl__entry **entry) CRL_INTERNAL;
/* Run the lookup callback (NULL when none is set or nothing matches). */
const crl_option *crl__schema_lookup(const crl_schema *s, crl_kind kind, const char *name) CRL_INTERNAL;
/* Names registered for a kind, via crl_schema_set_names (NULL-terminated,
 * free the array with g_free; strings borrowed). */
const char **crl__schema_names(const crl_schema *s, crl_kind kind) CRL_INTERNAL;

/* crl_opts builder (options.c). */
crl_opts *crl__opts_new(const char *section) CRL_INTERNAL;
/* Declare `opt` with its raw value (NULL: use the default) and origin.
 * Parses the value; CRL_E_CONFIG "ORIGIN: [section] key = 'v': why" on a
 * bad value, CRL_E_INVALID for a bad default in the table.  A name already
 * declared is ignored (the first table wins). */
int crl__opts_declare(crl_opts *o, const crl_option *opt, const char *value, const char *origin,
                      crl_error *err) CRL_INTERNAL;
/* A copy of base with options names[k] given values[k] from origins[k] (parsed and checked as the table
 * says: CRL_E_CONFIG naming the origin on a bad value).  New, crl_opts_free; NULL with err on failure. */
crl_opts *crl__opts_override(const crl_opts *base, const char *const *names, const char *const *values,
                             const char *const *origins, size_t n, crl_error *err) CRL_INTERNAL;
crl_opts *crl__opts_copy(const crl_opts *base, crl_error *err) CRL_INTERNAL;
/* The network sections attached to a loss's options (core/nn_config.c's crl__nets, borrowed: it outlives
 * the opts); NULL when none were attached.  Copies do not carry it. */
void crl__opts_set_nets(crl_opts *o, const void *nets) CRL_INTERNAL;
const void *crl__opts_nets(const crl_opts *o) CRL_INTERNAL;
/* An option set written into (save) and read back from (load) one group of a GKeyFile, for a worker program
 * that rebuilds its env in a process of its own: load declares `tables` in order, as crl_config_opts does, with
 * the saved values and origins.  load: new (crl_opts_free), or NULL with err (CRL_E_CONFIG on a bad value). */
void crl__opts_save(const crl_opts *o, GKeyFile *kf, const char *group) CRL_INTERNAL;
crl_opts *crl__opts_load(GKeyFile *kf, const char *group, const crl_option *const *tables, size_t ntables,
                         crl_error *err) CRL_INTERNAL;
/* FILE:LINE of the i-th key under prefix (as crl_opts_prefixed_key counts). */
const char *crl__opts_prefixed_origin(const crl_opts *o, const char *prefix, size_t i) CRL_INTERNAL;
/* Record a key given under a CRL_OPT_PREFIX option. */
void crl__opts_add_prefixed(crl_opts *o, const char *prefix, const char *key, const char *value,
                            const char *origin) CRL_INTERNAL;

/* config.c: every key of [section] must be declared by one of the tables
 * (CRL_E_CONFIG with file:line and a did-you-mean otherwise). */
CRL_INTERNAL int crl__config_check_keys(const crl_config *cfg, const char *section, const crl_option *const *tables,
                                        size_t nt, crl_error *err);
/* [section] against one table: its keys (crl__config_check_keys), then its values (crl_config_opts).
 * *out is the new option set (crl_opts_free), NULL on failure. */
CRL_INTERNAL int crl__config_section_opts(const crl_config *cfg, const char *section, const crl_option *table,
                                          crl_opts **out, crl_error *err);

#endif
