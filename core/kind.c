/* Component kind names (crl/plugin.h): part of the data model, so that config validation, scan records
 * and the registries all name kinds the same way without depending on each other. */
#include "crl-private.h"

#include <string.h>

static const char *const kind_names[CRL_KIND_COUNT] = {
    NULL, "env", "transform", "storage", "sampler", "writer", "loss"
};

const char *crl_kind_name(crl_kind kind)
{
    return (int)kind > 0 && (int)kind < CRL_KIND_COUNT ? kind_names[kind] : NULL;
}

bool crl_kind_from_name(const char *name, crl_kind *out)
{
    if (!name)
        return false;
    for (int k = 1; k < CRL_KIND_COUNT; k++)
        if (!strcmp(name, kind_names[k])) {
            if (out)
                *out = (crl_kind)k;
            return true;
        }
    return false;
}
