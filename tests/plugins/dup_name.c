/* dup_name: registers a component of its own, then env/goodenv, which the good plugin holds. */
#include <crl/crl.h>
#include "fixture.h"

typedef struct { uint32_t struct_size; } dup_ops;
static const dup_ops ops = { sizeof(dup_ops) };
static const crl_component mine = {
    sizeof(crl_component), CRL_KIND_TRANSFORM, "dup_unique", "only dup_name registers this", NULL, &ops
};
static const crl_component taken = {
    sizeof(crl_component), CRL_KIND_ENV, "goodenv", "good registers this too", NULL, &ops
};

static int dup_name_init(crl_host *host, const crl_opts *section, crl_error *err)
{
    fixture_mark("dup_name.ran", "ran\n");
    if (crl_host_register(host, &mine, err) || crl_host_register(host, &taken, err))
        return err->code;
    return CRL_OK;
}

CRL_PLUGIN_DEFINE(dup_name, "dup_name", "1.0.0", "MIT", "clashes with good", NULL, dup_name_init, NULL)
