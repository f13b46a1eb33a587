/* abi_minor_next: claims a newer minor plugin ABI than the host's; the host must refuse it before init runs. */
#include <crl/crl.h>
#include "fixture.h"

static int abi_minor_next_init(crl_host *host, const crl_opts *section, crl_error *err)
{
    fixture_mark("abi_minor_next.ran", "ran\n");
    return CRL_OK;
}

/* Written out by hand: CRL_PLUGIN_DEFINE always claims this SDK's ABI. */
CRL_PLUGIN_EXPORT const crl_plugin_desc *crl_plugin_v1(void);
CRL_PLUGIN_EXPORT const crl_plugin_desc *crl_plugin_v1(void)
{
    static const crl_plugin_desc desc = {
        CRL_ABI_MAJOR, CRL_ABI_MINOR + 1, "abi_minor_next", "1.0.0", "MIT",
        "claims a newer minor plugin ABI than the host's", abi_minor_next_init, NULL, NULL, { 0 }
    };
    return &desc;
}
