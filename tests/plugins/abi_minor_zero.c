/* abi_minor_zero: claims the oldest minor of this major (1.0), which every 1.x host accepts.
 *
 * (A plugin claiming CRL_ABI_MINOR - 1 cannot be written while
 * CRL_ABI_MINOR is 0; this fixture then equals the current minor.) */
#include <crl/crl.h>
#include "fixture.h"

static int abi_minor_zero_init(crl_host *host, const crl_opts *section, crl_error *err)
{
    fixture_mark("abi_minor_zero.ran", "ran\n");
    return CRL_OK;
}

static void abi_minor_zero_fini(void)
{
    fixture_mark(FIXTURE_FINI_LOG, "abi_minor_zero\n");
}

CRL_PLUGIN_EXPORT const crl_plugin_desc *crl_plugin_v1(void);
CRL_PLUGIN_EXPORT const crl_plugin_desc *crl_plugin_v1(void)
{
    static const crl_plugin_desc desc = {
        CRL_ABI_MAJOR, 0, "abi_minor_zero", "0.1.0", "MIT", "claims ABI minor 0", abi_minor_zero_init,
        abi_minor_zero_fini, NULL, { 0 }
    };
    return &desc;
}
