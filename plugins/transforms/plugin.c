/* The standard transforms plugin: registers the image, stateful and action/key groups and FunctionTransform. */
#include "config.h"
#include "transforms.h"

static int transforms_init(crl_host *host, const crl_opts *section, crl_error *err)
{
    int rc;
    (void)section;
    if ((rc = tf_register_image(host, err)) || (rc = tf_register_state(host, err)) ||
        (rc = tf_register_action(host, err)) || (rc = tf_register_function(host, err)))
        return rc;
    return CRL_OK;
}

/* The host given to init is not to be used after its fini. */
static void transforms_fini(void)
{
    tf_state_forget_host();
}

CRL_PLUGIN_DEFINE(transforms, "transforms", PACKAGE_VERSION, "MIT",
                  "the standard transforms: images, normalisation, rewards, counters, actions, keys, C functions", NULL,
                  transforms_init, transforms_fini)
