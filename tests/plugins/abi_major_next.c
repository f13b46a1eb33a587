/* abi_major_next: claims the next major plugin ABI; the host must refuse it before init runs. */
#include <crl/crl.h>
#include "fixture.h"

static int abi_major_next_init(crl_host *host, const crl_opts *section, crl_error *err)
{
    fixture_mark("abi_major_next.ran", "ran\n");
    return CRL_OK;
}

/* Written out by hand: CRL_PLUGIN_DEFINE always claims this SDK's ABI. */
CRL_PLUGIN_EXPORT const crl_plugin_desc *crl_plugin_v1(void);
CRL_PLUGIN_EXPORT const crl_plugin_desc *crl_plugin_v1(void)
{
    static const crl_plugin_desc desc = {
        CRL_ABI_MAJOR + 1, 0, "abi_major_next", "1.0.0", "MIT",
        "claims the next major plugin ABI", abi_major_next_init, NULL, NULL, { 0 }
    };
    return &desc;
}
