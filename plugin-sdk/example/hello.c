/* hello: the smallest complete crl plugin, built out of tree against an
 * installed crl (see Makefile beside it and plugin-sdk/GUIDE.md).
 *
 * It declares one option for its [plugin.hello] section, reads it in init,
 * and logs a greeting through the host. */
#include <crl/crl.h>

static const crl_option hello_options[] = {
    { "greeting", CRL_OPT_STRING, 0, "hello from an out-of-tree plugin", 0, 0, NULL,
      "what init logs at info level" },
    { "repeat", CRL_OPT_INT, CRL_OPT_RANGE, "1", 1, 10, NULL, "how many times to log it" },
    CRL_OPTIONS_END
};

static int hello_init(crl_host *host, const crl_opts *section, crl_error *err)
{
    const char *greeting;
    int64_t repeat;
    int rc;
    /* err may be NULL: carry the status in rc, never read it back from err */
    if ((rc = crl_opts_string(section, "greeting", &greeting, err)) ||
        (rc = crl_opts_int(section, "repeat", &repeat, err)))
        return rc;
    for (int64_t i = 0; i < repeat; i++)
        crl_host_log(host, CRL_LOG_INFO, "%s", greeting);
    return CRL_OK;
}

CRL_PLUGIN_DEFINE(hello, "hello", "1.0.0", "MIT", "example plugin built out of tree", hello_options,
                  hello_init, NULL)
