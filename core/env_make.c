/* Building an env from its description: the backend (or an executor over its instances), the env host's
 * buffers and bind, then the transform chain.  The one place that knows all three layers; env.c knows none
 * of the layers around it. */
#include "env-desc-private.h"
#include "env-private.h"

#include <string.h>

crl_env *crl_env_new(const crl_env_desc *d, crl_error *err)
{
    if (!d) {
        crl_error_set(err, CRL_E_INVALID, "crl_env_new: the description is NULL");
        return NULL;
    }
    char nb[300];
    crl_env *env = crl__env_alloc(d);
    crl_env_specs sp;
    memset(&sp, 0, sizeof sp);
    sp.struct_size = sizeof sp;
    /* An executor wraps the backend's instances and becomes env->ops. */
    int rc = d->xo.kind == CRL__EXEC_INLINE ? d->ops.make(d->id, d->num, d->opts, &sp, &env->benv, err)
                                            : crl__exec_make(env, d, &sp, crl_env_new, err);
    if (rc == CRL_OK && !env->benv)
        rc = crl_error_set(err, CRL_E_PLUGIN, "make returned no env");
    /* batch_size < num_envs with no executor: the backend's own async mode (env_desc.c checked it has one). */
    if (rc == CRL_OK && d->xo.kind == CRL__EXEC_INLINE && d->xo.batch_size > 0)
        env->async_batch = d->xo.batch_size;
    if (rc) {
        crl_error_prefix(err, "%s: make: ", crl__env_name(env, nb, sizeof nb));
        env->benv = NULL;
    }
    if (!rc)
        rc = crl__env_attach(env, &sp, crl__exec_wants_shared_buffers(&d->xo), err);
    crl_spec_unref(sp.observation);
    crl_spec_unref(sp.action);
    crl_spec_unref(sp.reward);
    crl_spec_unref(sp.done);
    crl_spec_unref(sp.state);
    crl_spec_unref(sp.info);
    if (!rc) {
        /* Seeded before the chain too: a bind may roll the env out
         * (ObservationNorm's init_stats), and then from the configured seed.
         * Seeded again below, so the user's first reset starts there too. */
        crl_env_set_seed(env, d->seed);
        rc = crl__tchain_build(env, d->tf, d->ntf, err);
    }
    if (rc) {
        crl_env_free(env);
        return NULL;
    }
    crl_env_set_seed(env, d->seed);
    return env;
}

crl_env *crl_env_from_config(crl_host *host, const crl_config *cfg, const char *section, crl_error *err)
{
    if (!host || !cfg || !section) {
        crl_error_set(err, CRL_E_INVALID, "crl_env_from_config: %s is NULL",
                      !host ? "host" : !cfg ? "config" : "section");
        return NULL;
    }
    crl_env_desc *d = crl_env_desc_from_config(host, cfg, section, err);
    if (!d)
        return NULL;
    crl_env *env = crl_env_new(d, err);
    crl_env_desc_free(d);
    return env;
}
