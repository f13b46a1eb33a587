/* The plugins linked into the `crl` program (static registration), loaded before the configured ones. */
#include "config.h"
#include "cli-private.h"

#ifdef CRL_BUILTIN_CLASSIC
const crl_plugin_desc *crl_plugin_builtin_classic(void);
#endif

int crl__cli_load_builtins(crl_host *host, crl_error *err)
{
    /* A dlopen'd plugin of the same name found later along the path is then
     * skipped by the host (the built-in copy wins). */
#ifdef CRL_BUILTIN_CLASSIC
    int rc = crl_host_load_builtin(host, crl_plugin_builtin_classic, err);
    if (rc != CRL_OK)
        return rc;
#endif
    (void)host;
    (void)err;
    return CRL_OK;
}
