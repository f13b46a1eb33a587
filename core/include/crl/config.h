/* libcrl application API: layered, strict INI configuration.
 *
 * Layers, lowest priority first: the system file
 * ($(sysconfdir)/crl/crl.ini), the user file ($XDG_CONFIG_HOME/crl/crl.ini),
 * experiment files in command-line order, then `section.key=value`
 * overrides.  A later layer replaces a key of an earlier one; each value
 * remembers where it came from ("FILE:LINE" or "command line").
 *
 * Parsing is strict (file:line in every message): duplicate keys in one
 * file, keys before any section, unterminated "[section", lines without '=',
 * NUL bytes and lines longer than CRL_CONFIG_MAX_LINE are errors.  Unknown
 * sections and keys are found by crl_config_validate against a schema.
 * Comments are lines starting with ';' or '#', and " ;" after a value; there
 * is no quoting and no line continuation (leading blanks are ignored).  A
 * section header may repeat in one file: its keys merge (a key set under
 * both is still a duplicate). */
#ifndef CRL_CONFIG_H
#define CRL_CONFIG_H

#include <crl/crl.h>

#ifdef __cplusplus
extern "C" {
#endif

#define CRL_CONFIG_MAX_LINE 4096

typedef enum crl_config_layer {
    CRL_LAYER_SYSTEM = 0,
    CRL_LAYER_USER = 1,
    CRL_LAYER_FILE = 2,
    CRL_LAYER_OVERRIDE = 3
} crl_config_layer;

typedef struct crl_config crl_config;
typedef struct crl_schema crl_schema;

/* New empty config; free with crl_config_free (NULL-safe). */
CRL_API crl_config *crl_config_new(crl_error *err);
CRL_API void crl_config_free(crl_config *cfg);

/* Parse a file into a layer.  CRL_E_IO names the path and errno text, or
 * what the path is when it is no regular file (a FIFO, a device, a
 * directory: refused without blocking, crl/file.h) or a size past the 16 MiB
 * a config file may have (checked before reading); CRL_E_CONFIG is "PATH:LINE: what is wrong; how to fix it".  On error the
 * config is unchanged (the whole file is parsed before it is merged). */
CRL_API int crl_config_load_file(crl_config *cfg, const char *path, crl_config_layer layer, crl_error *err);
/* Same for text in memory; `name` stands for the path in messages. */
CRL_API int crl_config_load_buffer(crl_config *cfg, const char *name, const char *data, size_t len,
                                   crl_config_layer layer, crl_error *err);
/* Load the system and user files when they exist (a missing file is not an
 * error; an unreadable or malformed one is).  $CRL_SYSCONFDIR overrides the
 * configured sysconfdir and $XDG_CONFIG_HOME (or ~/.config) locates the user
 * file, so tests can stay hermetic. */
CRL_API int crl_config_load_defaults(crl_config *cfg, crl_error *err);
/* Apply "section.key=value".  The section is the longest dotted prefix that
 * names a section present in the config or declared in `schema` (may be
 * NULL), else the part before the first dot: "env.kwargs.g=9.8" sets key
 * "kwargs.g" of [env] when [env] is known.  CRL_E_USAGE for a malformed
 * assignment. */
CRL_API int crl_config_override(crl_config *cfg, const crl_schema *schema, const char *assignment,
                                crl_error *err);

/* Raw lookups (borrowed; NULL when absent). */
CRL_API bool crl_config_has_section(const crl_config *cfg, const char *section);
CRL_API size_t crl_config_section_count(const crl_config *cfg);
CRL_API const char *crl_config_section_at(const crl_config *cfg, size_t i);  /* first-seen order */
CRL_API size_t crl_config_key_count(const crl_config *cfg, const char *section);
CRL_API const char *crl_config_key_at(const crl_config *cfg, const char *section, size_t i);
CRL_API const char *crl_config_get(const crl_config *cfg, const char *section, const char *key);
/* "FILE:LINE" or "command line"; NULL when absent. */
CRL_API const char *crl_config_origin(const crl_config *cfg, const char *section, const char *key);

/* Typed getters of raw values.  Absent: *out = def and CRL_OK.  A bad value
 * is CRL_E_CONFIG "ORIGIN: [section] key = 'v': expected ...". */
CRL_API int crl_config_get_bool(const crl_config *cfg, const char *section, const char *key, bool def,
                                bool *out, crl_error *err);
CRL_API int crl_config_get_int(const crl_config *cfg, const char *section, const char *key, int64_t def,
                               int64_t *out, crl_error *err);
CRL_API int crl_config_get_double(const crl_config *cfg, const char *section, const char *key,
                                  double def, double *out, crl_error *err);
CRL_API int crl_config_get_size(const crl_config *cfg, const char *section, const char *key,
                                uint64_t def, uint64_t *out, crl_error *err);
/* `choices` is "a|b|c"; *out is the index of the choice. */
CRL_API int crl_config_get_enum(const crl_config *cfg, const char *section, const char *key,
                                const char *choices, int def, int *out, crl_error *err);
/* Comma-separated list: a NULL-terminated array in one block, free with
 * crl_free; absent gives an empty list. */
CRL_API int crl_config_get_list(const crl_config *cfg, const char *section, const char *key,
                                char ***out, crl_error *err);

/* The value parsers the getters use (crl_parse_bool, _int, _double, _size)
 * are in the SDK, crl/options.h, as plugins use them too. */

/* Schema: which sections and keys are allowed.
 * `section` is an exact name ("plugins") or a pattern ending in ".*"
 * ("transform.*", "plugin.*"), which matches the prefix plus one non-empty
 * name without dots ("plugin.gym", not "plugin.gym.x").  A section may take
 * options from several tables: the ones added for it, plus, with
 * crl_schema_add_selector, the table of the registered component named by
 * one of its keys (for example [env] backend = classic selects the options
 * of env/classic; without a value the key's declared default selects). */
CRL_API crl_schema *crl_schema_new(crl_error *err);
CRL_API void crl_schema_free(crl_schema *s);
CRL_API int crl_schema_add(crl_schema *s, const char *section, const crl_option *table, const char *doc,
                           crl_error *err);
/* Lookup used by selectors: the options of component kind/name, or NULL
 * when no such component is registered. */
typedef const crl_option *(*crl_schema_lookup_fn)(void *user, crl_kind kind, const char *name);
CRL_API void crl_schema_set_lookup(crl_schema *s, crl_schema_lookup_fn fn, void *user);
CRL_API int crl_schema_add_selector(crl_schema *s, const char *section, const char *key, crl_kind kind,
                                    crl_error *err);
/* Names of the registered components of a kind, for the "did you mean"
 * hint when a selector names an unknown component: the i-th name
 * (borrowed), NULL past the end.  Optional; without it the message only
 * says the component is not registered. */
typedef const char *(*crl_schema_name_fn)(void *user, crl_kind kind, size_t i);
CRL_API void crl_schema_set_names(crl_schema *s, crl_schema_name_fn fn, void *user);
/* Borrowed list of the tables that apply to a section (NULL-terminated,
 * valid until the schema changes), or NULL when the section is unknown. */
CRL_API const crl_option *const *crl_schema_tables(const crl_schema *s, const crl_config *cfg,
                                                   const char *section, size_t *n);

/* Check every section and key against the schema and every value against
 * its declaration.  The first problem is returned as CRL_E_CONFIG with
 * "FILE:LINE: unknown key 'lenght' in [replay]; did you mean 'length'?" or a
 * type/range message; a required key that is missing names the section. */
CRL_API int crl_config_validate(const crl_config *cfg, const crl_schema *schema, crl_error *err);

/* Build validated option values for `section` from the tables that apply
 * (defaults filled in).  A section absent from the config gives all
 * defaults.  New object, free with crl_opts_free. */
CRL_API crl_opts *crl_config_opts(const crl_config *cfg, const char *section,
                                  const crl_option *const *tables, size_t ntables, crl_error *err);
CRL_API void crl_opts_free(crl_opts *o);

/* The settings the config's files and overrides give (no defaults), as INI
 * text: every section in order, each key as `key = value`.  Loading it back
 * gives the same settings.  Free with crl_free; NULL only for a NULL cfg. */
CRL_API char *crl_config_to_ini(const crl_config *cfg);

/* The resolved config as INI text: every section of the config and of the
 * schema, every declared key with its value or default, and a comment saying
 * where it came from.  Free with crl_free. */
CRL_API char *crl_config_show(const crl_config *cfg, const crl_schema *schema, crl_error *err);

/* crl_did_you_mean, for "did you mean" hints, is in the SDK (crl/options.h). */

#ifdef __cplusplus
}
#endif
#endif
