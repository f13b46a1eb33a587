/* pyembed_plugin: the python_path option of a Python-backed plugin and the init that honours it. */
#include "pyembed_plugin.h"

const crl_option pyembed_plugin_options[] = {
    { "python_path", CRL_OPT_LIST, 0, NULL, 0, 0, NULL,
      "directories put at the front of the embedded Python's sys.path (PYTHONPATH and VIRTUAL_ENV's site-packages "
      "are honoured too)" },
    CRL_OPTIONS_END
};

int pyembed_plugin_init(crl_host *host, const char *who, const crl_opts *section, crl_error *err)
{
    size_t n = 0;
    const char *const *paths = NULL;
    if (section && crl_opts_is_set(section, "python_path")) {
        int rc = crl_opts_list(section, "python_path", &n, &paths, err);
        if (rc)
            return rc;
    }
    return pyembed_init(host, who, paths, n, err);
}
