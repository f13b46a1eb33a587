/* wrong_name: its descriptor's name differs from its file name; the host must refuse it before init runs. */
#include <crl/crl.h>
#include "fixture.h"

static int wrong_name_init(crl_host *host, const crl_opts *section, crl_error *err)
{
    fixture_mark("wrong_name.ran", "ran\n");
    return CRL_OK;
}

CRL_PLUGIN_EXPORT const crl_plugin_desc *crl_plugin_v1(void);
CRL_PLUGIN_EXPORT const crl_plugin_desc *crl_plugin_v1(void)
{
    static const crl_plugin_desc desc = {
        CRL_ABI_MAJOR, CRL_ABI_MINOR, "right_name", "1.0.0", "MIT",
        "its descriptor's name differs from its file name", wrong_name_init, NULL, NULL, { 0 }
    };
    return &desc;
}
