/* libcrl's version, from configure. */
#include "crl-private.h"

const char *crl_version(void)
{
    return PACKAGE_VERSION;
}
