/* The image group of the transforms plugin: registers the pixel transforms and the shape transforms. */
#include "config.h"
#include "image_common.h"

int tf_register_image(crl_host *host, crl_error *err)
{
    if (tf_register_image_pixels(host, err) || tf_register_image_shape(host, err))
        return err ? err->code : CRL_E_INVALID;
    return CRL_OK;
}
