/* pypromote: links libpython3 and, in init, makes it global with crl_host_promote_libpython. */
#include <Python.h> /* first, as Python requires; it also defines _GNU_SOURCE */
#include <dlfcn.h>
#include <crl/crl.h>
#include "fixture.h"

static int pypromote_init(crl_host *host, const crl_opts *section, crl_error *err)
{
    /* A real reference keeps libpython a dependency even with --as-needed. */
    if (Py_IsInitialized())
        fixture_mark("pypromote.ran", "python was already initialised\n");
    int rc = crl_host_promote_libpython(host, err);
    if (rc)
        return rc;
    if (!dlsym(RTLD_DEFAULT, "PyList_New"))
        return crl_error_set(err, CRL_E_RUNTIME,
                             "PyList_New is still not visible through RTLD_DEFAULT after "
                             "crl_host_promote_libpython");
    /* Idempotent: a second call succeeds too. */
    if ((rc = crl_host_promote_libpython(host, err)))
        return rc;
    fixture_mark("pypromote.ran", "promoted\n");
    return CRL_OK;
}

CRL_PLUGIN_DEFINE(pypromote, "pypromote", "1.0.0", "MIT", "promotes libpython to RTLD_GLOBAL", NULL,
                  pypromote_init, NULL)
