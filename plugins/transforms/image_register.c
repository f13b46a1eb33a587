/* The image group of the transforms plugin: registers the pixel transforms, the shape transforms and IndexSelectTransform. */
#include "config.h"
#include "image_common.h"

int tf_register_image(crl_host *host, crl_error *err)
{
    int rc;
    if ((rc = tf_register_image_pixels(host, err)) || (rc = tf_register_image_shape(host, err)) ||
        (rc = tf_register_image_index(host, err)))
        return rc;
    return CRL_OK;
}
