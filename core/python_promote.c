/* crl_host_promote_libpython: make an already-mapped libpython3 RTLD_GLOBAL for CPython extension modules. */
#define _GNU_SOURCE /* dl_iterate_phdr, RTLD_NOLOAD */
#include "host-private.h"

#include <dlfcn.h>
#include <link.h>
#include <string.h>

typedef struct {
    char *versioned;  /* libpython3.X.so...: the real library */
    char *any;        /* libpython3.so (the stable-ABI shim) or another match */
} found_python;

static int find_python(struct dl_phdr_info *info, size_t size, void *data)
{
    found_python *f = data;
    const char *name = info->dlpi_name;
    if (!name || !*name)
        return 0;
    const char *base = strrchr(name, '/');
    base = base ? base + 1 : name;
    if (!g_str_has_prefix(base, "libpython3"))
        return 0;
    if (g_str_has_prefix(base, "libpython3.") && base[strlen("libpython3.")] != 's') {
        f->versioned = g_strdup(name);
        return 1;
    }
    if (!f->any)
        f->any = g_strdup(name);
    return 0;
}

int crl_host_promote_libpython(crl_host *host, crl_error *err)
{
    if (host && host->python_promoted)
        return CRL_OK;
    found_python f = { NULL, NULL };
    dl_iterate_phdr(find_python, &f);
    char *lib = f.versioned ? f.versioned : f.any;
    if (!lib) {
        const char *who = host && host->current ? host->current->info.name : NULL;
        return crl_error_set(err, CRL_E_NOT_FOUND,
                             "%s%s%sno libpython3 is mapped into this process, so there is nothing to make "
                             "global: link the plugin against libpython3 (pkg-config --libs python3-embed)",
                             who ? "plugin '" : "", who ? who : "", who ? "': " : "");
    }
    dlerror();
    /* The handle is never closed on purpose: CPython cannot be unloaded and
     * reloaded, and this keeps it mapped once a plugin relied on it. */
    void *h = dlopen(lib, RTLD_NOW | RTLD_NOLOAD | RTLD_GLOBAL);
    int rc = CRL_OK;
    if (!h) {
        const char *why = dlerror();
        rc = crl_error_set(err, CRL_E_PLUGIN, "cannot make %s's symbols global: %s", lib,
                           why ? why : "dlopen(RTLD_NOLOAD | RTLD_GLOBAL) failed");
    } else {
        if (host) {
            host->python_promoted = true;
            crl_host_log(host, CRL_LOG_DEBUG, "made %s's symbols global for CPython extension modules", lib);
        }
    }
    g_free(f.versioned);
    g_free(f.any);
    return rc;
}
