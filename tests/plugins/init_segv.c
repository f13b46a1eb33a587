/* init_segv: crashes with SIGSEGV in init (crl_host_probe_path must report it). */
#include <crl/crl.h>
#include <signal.h>
#include "fixture.h"

static int init_segv_init(crl_host *host, const crl_opts *section, crl_error *err)
{
    fixture_mark("init_segv.ran", "ran\n");
    raise(SIGSEGV);
    return crl_error_set(err, CRL_E_RUNTIME, "survived SIGSEGV");
}

CRL_PLUGIN_DEFINE(init_segv, "init_segv", "1.0.0", "MIT", "crashes in init", NULL, init_segv_init, NULL)
