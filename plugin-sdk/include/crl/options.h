/* crl plugin SDK: declared options.
 *
 * Every configurable thing (the host's own INI sections, each plugin, each
 * registered component) declares its options in a table.  Validation, "did
 * you mean" hints, `crl config show` defaults, `crl plugins --verbose` and
 * the man pages are all generated from these tables. */
#ifndef CRL_OPTIONS_H
#define CRL_OPTIONS_H

#include <crl/error.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum crl_opt_type {
    CRL_OPT_END = 0,    /* terminates a table */
    CRL_OPT_BOOL = 1,   /* true/false, yes/no, on/off, 1/0 */
    CRL_OPT_INT = 2,    /* 64-bit signed, decimal or 0x hex */
    CRL_OPT_DOUBLE = 3, /* finite double */
    CRL_OPT_STRING = 4,
    CRL_OPT_LIST = 5,   /* comma-separated strings, whitespace trimmed */
    CRL_OPT_ENUM = 6,   /* one of `choices` ("a|b|c") */
    CRL_OPT_SIZE = 7,   /* bytes: 4096, 64K, 64M, 2G, 1T (powers of 1024) */
    CRL_OPT_DOUBLES = 8 /* comma-separated finite doubles */
} crl_opt_type;

#define CRL_OPT_REQUIRED 0x1u  /* no default: must be given */
#define CRL_OPT_RANGE    0x2u  /* min/max apply (INT, DOUBLE, SIZE, list length for LIST/DOUBLES) */
#define CRL_OPT_PREFIX   0x4u  /* name ends with '.': accepts name + anything ("kwargs.") */

/* One declared option.  Tables are arrays ending with an entry whose type is
 * CRL_OPT_END (write CRL_OPTIONS_END).  Strings are static. */
typedef struct crl_option {
    const char *name;
    int32_t type;               /* crl_opt_type */
    uint32_t flags;             /* CRL_OPT_* flags */
    const char *default_value;  /* as it would be written in INI; NULL = unset */
    double min, max;            /* inclusive, with CRL_OPT_RANGE */
    const char *choices;        /* CRL_OPT_ENUM: "a|b|c" */
    const char *doc;            /* one line */
} crl_option;

#define CRL_OPTIONS_END { NULL, CRL_OPT_END, 0, NULL, 0, 0, NULL, NULL }

/* Validated option values for one section, with where each came from.
 * Owned by the host; components borrow it during the call it is passed to
 * (copy what you keep). */
typedef struct crl_opts crl_opts;

/* Name of the INI section these options came from ("env", "plugin.gym"). */
CRL_API const char *crl_opts_section(const crl_opts *o);
/* True when the value was given explicitly (file or command line). */
CRL_API bool crl_opts_is_set(const crl_opts *o, const char *name);
/* "FILE:LINE", "command line", "default", or "not set" when there is neither
 * a value nor a default; NULL for an undeclared name.  For a CRL_OPT_PREFIX
 * option, the origin of its first key. */
CRL_API const char *crl_opts_origin(const crl_opts *o, const char *name);

/* Typed getters.  Values were validated against the table when the opts were
 * built, so these fail only for a name the table does not declare, a type
 * mismatch with the declaration, or an unset option without default
 * (CRL_E_NOT_FOUND / CRL_E_INVALID, naming section and key). */
CRL_API int crl_opts_bool(const crl_opts *o, const char *name, bool *out, crl_error *err);
CRL_API int crl_opts_int(const crl_opts *o, const char *name, int64_t *out, crl_error *err);
CRL_API int crl_opts_double(const crl_opts *o, const char *name, double *out, crl_error *err);
CRL_API int crl_opts_size(const crl_opts *o, const char *name, uint64_t *out, crl_error *err);
/* Borrowed string (STRING and ENUM). */
CRL_API int crl_opts_string(const crl_opts *o, const char *name, const char **out, crl_error *err);
/* LIST: number of items and borrowed items. */
CRL_API int crl_opts_list(const crl_opts *o, const char *name, size_t *n, const char *const **items,
                          crl_error *err);
/* DOUBLES: number of values and a borrowed array. */
CRL_API int crl_opts_doubles(const crl_opts *o, const char *name, size_t *n, const double **vals,
                             crl_error *err);

/* Keys given under a CRL_OPT_PREFIX option ("kwargs." -> "kwargs.g"), as raw
 * strings, in file order.  Borrowed. */
CRL_API size_t crl_opts_prefixed_count(const crl_opts *o, const char *prefix);
CRL_API const char *crl_opts_prefixed_key(const crl_opts *o, const char *prefix, size_t i);
CRL_API const char *crl_opts_prefixed_value(const crl_opts *o, const char *prefix, size_t i);

/* Value parsers, the ones option validation and the host's config getters
 * use: parse what a plugin reads from a raw string (a list item, a
 * CRL_OPT_PREFIX value) by the same rules as a declared option of that type.
 * Each returns true and stores the value in *out (out may be NULL to only
 * check), or returns false for a NULL or malformed string and leaves *out
 * alone.  They allocate nothing and set no error: the caller names the key.
 *   bool:   true/yes/on/1, false/no/off/0, any case;
 *   int:    decimal, or hex after "0x", optional sign, int64 range, no blanks;
 *   double: '.' as decimal point whatever the locale, finite, no blanks;
 *   size:   decimal bytes with an optional unit, powers of 1024 (4096, 64K,
 *           64 MiB, 2G, 1T), below 2^64. */
CRL_API bool crl_parse_bool(const char *s, bool *out);
CRL_API bool crl_parse_int(const char *s, int64_t *out);
CRL_API bool crl_parse_double(const char *s, double *out);
CRL_API bool crl_parse_size(const char *s, uint64_t *out);

/* "Did you mean" hints: the candidate closest to `word` by edit distance
 * (insertions, deletions, substitutions and swaps of two adjacent characters
 * each count one; case counts), if that distance is at most a third of
 * `word`'s length and at least 1; ties go to the earlier candidate.
 * `candidates` is a NULL-terminated array.  Returns one of `candidates`'
 * pointers (borrowed: valid as long as the array's strings are), or NULL
 * when nothing is that close or `word` or `candidates` is NULL.  Never
 * fails otherwise; the caller words the message ("did you mean '%s'?"). */
CRL_API const char *crl_did_you_mean(const char *word, const char *const *candidates);

#ifdef __cplusplus
}
#endif
#endif
