/* abi_symbol_next: a plugin built against a newer libcrl.  Its descriptor claims this SDK's ABI, but it calls
 * a libcrl function of version CRL_1.3 (linked against tests/plugins/libcrl_future.c, see fixtures.am): the
 * host must refuse it from its ELF version needs, before dlopen, so none of its code runs. */
#include <crl/crl.h>
#include "fixture.h"

/* In the newer libcrl only. */
int crl_future_symbol(void);

__attribute__((constructor)) static void abi_symbol_next_ctor(void)
{
    fixture_mark("abi_symbol_next.ctor", "constructed\n");
}

static int abi_symbol_next_init(crl_host *host, const crl_opts *section, crl_error *err)
{
    fixture_mark("abi_symbol_next.ran", "ran %d\n", crl_future_symbol());
    crl_host_log(host, CRL_LOG_INFO, "using a libcrl symbol of ABI 1.3");
    return CRL_OK;
}

CRL_PLUGIN_DEFINE(abi_symbol_next, "abi_symbol_next", "1.0.0", "MIT",
                  "built against a newer libcrl: needs libcrl.so.0 version CRL_1.3", NULL, abi_symbol_next_init,
                  NULL)
