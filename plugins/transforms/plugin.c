/* The standard transforms plugin: registers the image, stateful and action/key groups. */
#include "config.h"
#include "transforms.h"

static int transforms_init(crl_host *host, const crl_opts *section, crl_error *err)
{
    (void)section;
    if (tf_register_image(host, err) || tf_register_state(host, err) || tf_register_action(host, err))
        return err ? err->code : CRL_E_INVALID;
    return CRL_OK;
}

CRL_PLUGIN_DEFINE(transforms, "transforms", PACKAGE_VERSION, "MIT",
                  "the standard transforms: images, normalisation, rewards, counters, actions, keys", NULL,
                  transforms_init, NULL)
