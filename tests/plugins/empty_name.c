/* empty_name: its descriptor's name is empty; the host must refuse it before init runs. */
#include <crl/crl.h>
#include "fixture.h"

static int empty_name_init(crl_host *host, const crl_opts *section, crl_error *err)
{
    fixture_mark("empty_name.ran", "ran\n");
    return CRL_OK;
}

CRL_PLUGIN_EXPORT const crl_plugin_desc *crl_plugin_v1(void);
CRL_PLUGIN_EXPORT const crl_plugin_desc *crl_plugin_v1(void)
{
    static const crl_plugin_desc desc = {
        CRL_ABI_MAJOR, CRL_ABI_MINOR, "", "1.0.0", "MIT",
        "its descriptor's name is empty", empty_name_init, NULL, NULL, { 0 }
    };
    return &desc;
}
