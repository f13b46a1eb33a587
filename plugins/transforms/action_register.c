/* Registers the action, key and episode-control transforms (tf_register_action). */
#include "config.h"
#include "action_group.h"

int tf_register_action(crl_host *host, crl_error *err)
{
    int (*const groups[])(crl_host *, crl_error *) = {
        tfa_register_dtype, tfa_register_clip,   tfa_register_scaling, tfa_register_discrete,
        tfa_register_keys,  tfa_register_primer, tfa_register_episode, tfa_register_checks,
    };
    for (size_t i = 0; i < sizeof groups / sizeof groups[0]; i++) {
        int rc = groups[i](host, err);
        if (rc)
            return rc;
    }
    return CRL_OK;
}
