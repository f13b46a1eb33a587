/* init_fail: registers a component, then fails init; the registration must be undone. */
#include <crl/crl.h>
#include "fixture.h"

typedef struct { uint32_t struct_size; } fail_ops;
static const fail_ops ops = { sizeof(fail_ops) };
static const crl_component env = {
    sizeof(crl_component), CRL_KIND_ENV, "init_fail_env", "registered, then init fails", NULL, &ops
};

static int init_fail_init(crl_host *host, const crl_opts *section, crl_error *err)
{
    fixture_mark("init_fail.ran", "ran\n");
    if (crl_host_register(host, &env, err))
        return err->code;
    return crl_error_set(err, CRL_E_RUNTIME, "the frobnicator is missing (install frobnicator >= 2)");
}

static void init_fail_fini(void)
{
    fixture_mark("init_fail.fini", "fini must not run after a failed init\n");
}

CRL_PLUGIN_DEFINE(init_fail, "init_fail", "1.0.0", "MIT", "fails its init", NULL, init_fail_init,
                  init_fail_fini)
