/* crl plugin SDK: the plugin ABI.
 *
 * A plugin is a shared object exporting exactly one symbol, crl_plugin_v1,
 * a function returning a constant descriptor.  The host validates the
 * descriptor before running any plugin code, then calls init(), inside which
 * (and only there) the plugin registers its components.
 *
 * Compatibility: the host accepts a plugin when
 *   desc->abi_major == CRL_ABI_MAJOR && desc->abi_minor <= CRL_ABI_MINOR.
 * Structs here only ever grow at the end; every ops struct starts with
 * uint32_t struct_size, and the host treats members past it as NULL. */
#ifndef CRL_PLUGIN_H
#define CRL_PLUGIN_H

#include <crl/options.h>

#ifdef __cplusplus
extern "C" {
#endif

#define CRL_ABI_MAJOR 1
#define CRL_ABI_MINOR 2

/* The registration handle given to init (owned by the host). */
typedef struct crl_host crl_host;

/* What a component is.  Registries are keyed "kind/name". */
typedef enum crl_kind {
    CRL_KIND_ENV = 1,
    CRL_KIND_TRANSFORM = 2,
    CRL_KIND_STORAGE = 3,
    CRL_KIND_SAMPLER = 4,
    CRL_KIND_WRITER = 5,
    CRL_KIND_LOSS = 6,
    CRL_KIND_COUNT = 7
} crl_kind;

/* "env", "transform", "storage", "sampler", "writer", "loss"; NULL if bad. */
CRL_API const char *crl_kind_name(crl_kind kind);
/* Parse a kind name; false when unknown. */
CRL_API bool crl_kind_from_name(const char *name, crl_kind *out);

/* One registered component.  The host copies the struct (min(struct_size,
 * sizeof)) but keeps the pointers: strings, options and ops must live as long
 * as the plugin is loaded (static data). */
typedef struct crl_component {
    uint32_t struct_size;        /* sizeof(crl_component) */
    int32_t kind;                /* crl_kind */
    const char *name;            /* unique within kind: [A-Za-z0-9_.-]+ */
    const char *description;     /* one line */
    const crl_option *options;   /* may be NULL; ends with CRL_OPTIONS_END */
    const void *ops;             /* kind-specific ops, starts with uint32_t struct_size */
} crl_component;

typedef int (*crl_plugin_init_fn)(crl_host *host, const crl_opts *section, crl_error *err);
typedef void (*crl_plugin_fini_fn)(void);

typedef struct crl_plugin_desc {
    uint32_t abi_major;
    uint32_t abi_minor;
    const char *name;            /* must equal the file's basename without .so */
    const char *version;
    const char *license;         /* SPDX identifier */
    const char *description;
    crl_plugin_init_fn init;     /* required */
    crl_plugin_fini_fn fini;     /* may be NULL */
    const crl_option *options;   /* the [plugin.NAME] section's options; may be NULL */
    void *reserved[8];           /* zero; room to grow without a major bump */
} crl_plugin_desc;

/* Register a component; only valid inside init.  The registration is undone
 * if init then fails.  Errors: CRL_E_EXISTS for a duplicate "kind/name"
 * (names the plugin that holds it), CRL_E_INVALID for a bad kind, name,
 * struct_size or ops without a leading struct_size, CRL_E_INVALID when
 * called outside init. */
CRL_API int crl_host_register(crl_host *host, const crl_component *component, crl_error *err);

typedef enum crl_log_level {
    CRL_LOG_ERROR = 0, CRL_LOG_WARNING = 1, CRL_LOG_INFO = 2, CRL_LOG_DEBUG = 3
} crl_log_level;

/* Log a line prefixed with the plugin's name, filtered by [log] level. */
CRL_API void crl_host_log(crl_host *host, int level, const char *fmt, ...) CRL_PRINTF(3, 4);

/* Name of the plugin whose init is running ("" outside init). */
CRL_API const char *crl_host_plugin_name(const crl_host *host);

/* For plugins that embed CPython: make the already-loaded libpython's
 * symbols global (dlopen(soname, RTLD_NOW | RTLD_NOLOAD | RTLD_GLOBAL)) so
 * Python's C extension modules resolve, while the plugin itself stays
 * RTLD_LOCAL.  CRL_E_NOT_FOUND when no libpython is mapped into the process
 * (link the plugin against it).  Idempotent. */
CRL_API int crl_host_promote_libpython(crl_host *host, crl_error *err);

#if defined(__GNUC__)
#define CRL_PLUGIN_EXPORT __attribute__((visibility("default")))
#else
#define CRL_PLUGIN_EXPORT
#endif

/* Emit the descriptor.  `ident` is the plugin's name as a C identifier (the
 * name string must be the file's basename).  Built with CRL_PLUGIN_BUILTIN
 * defined, the entry point is crl_plugin_builtin_<ident> instead, so several
 * plugins can be linked into one program (static registration). */
#define CRL__PLUGIN_DESC(name_, version_, license_, description_, options_, init_, fini_) \
    static const crl_plugin_desc crl__desc = {                                          \
        CRL_ABI_MAJOR, CRL_ABI_MINOR, name_, version_, license_, description_,          \
        init_, fini_, options_, { 0 } };                                                \
    return &crl__desc;
#ifdef CRL_PLUGIN_BUILTIN
#define CRL_PLUGIN_DEFINE(ident, name_, version_, license_, description_, options_, init_, fini_) \
    const crl_plugin_desc *crl_plugin_builtin_##ident(void);                                    \
    const crl_plugin_desc *crl_plugin_builtin_##ident(void)                                     \
    { CRL__PLUGIN_DESC(name_, version_, license_, description_, options_, init_, fini_) }
#else
#define CRL_PLUGIN_DEFINE(ident, name_, version_, license_, description_, options_, init_, fini_) \
    CRL_PLUGIN_EXPORT const crl_plugin_desc *crl_plugin_v1(void);                               \
    CRL_PLUGIN_EXPORT const crl_plugin_desc *crl_plugin_v1(void)                                \
    { CRL__PLUGIN_DESC(name_, version_, license_, description_, options_, init_, fini_) }
#endif

#ifdef __cplusplus
}
#endif
#endif
