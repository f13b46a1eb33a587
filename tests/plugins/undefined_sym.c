/* undefined_sym: references a function nothing defines, so dlopen(RTLD_NOW) fails. */
#include <crl/crl.h>
#include "fixture.h"

int fixture_function_nobody_defines(void);

static int undefined_sym_init(crl_host *host, const crl_opts *section, crl_error *err)
{
    fixture_mark("undefined_sym.ran", "ran\n");
    return fixture_function_nobody_defines() ? CRL_OK : CRL_E_RUNTIME;
}

CRL_PLUGIN_DEFINE(undefined_sym, "undefined_sym", "1.0.0", "MIT", "cannot be linked", NULL,
                  undefined_sym_init, NULL)
