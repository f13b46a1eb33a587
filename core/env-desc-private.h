/* The typed env description (env_desc.c): what [env] says, parsed and validated once.  env_make.c builds
 * envs from it, the executors build their instances and inner envs from it; nothing after the parse reads
 * config text. */
#ifndef CRL_ENV_DESC_PRIVATE_H
#define CRL_ENV_DESC_PRIVATE_H

#include "crl-private.h"
#include "exec-private.h"
#include "transform-private.h"
#include <crl/env.h>

struct crl_env_desc {
    crl_host *host;              /* borrowed: must outlive the description and its envs */
    char *section;               /* "env" for [env]: names the env in messages */
    char *backend, *plugin, *id;
    crl_env_ops ops;             /* the component's ops, copied; missing trailing members NULL */
    crl_opts *opts;              /* the section against the env table and the backend's (what make gets) */

    int64_t num;                 /* envs (1 for a single env) */
    int batch_ndim;              /* 0 (num_envs = 0) or 1 */
    int64_t frame_skip;
    bool from_pixels, pixels_only, project_actions, return_state;
    crl_autoreset autoreset;
    int64_t max_steps;           /* 0: the backend's default */
    uint64_t seed;
    crl__exec_opts xo;

    /* per_env.KEY: env i's own option set (num entries, each the section's with env i's values in place) and
     * "per_env.g = 2.5 from FILE:LINE, ..." for env i's messages.  NULL without per_env keys. */
    crl_opts **env_opts;
    char **env_what;
    /* per_env.id: env i's id (num entries), NULL without it; `id` then lists the distinct ones ("a, b"). */
    char **env_ids;
    char *ids_at;                /* FILE:LINE of per_env.id */

    crl__tf_desc *tf;            /* [env] transforms, in order */
    size_t ntf;
    char *tf_at;                 /* FILE:LINE of transforms */
    crl__tf_desc *wtf;           /* worker_transforms */
    size_t nwtf;
    char *wtf_at;
};

/* The id env i is made with: its per_env.id, else the section's id. */
static inline const char *crl__env_desc_id_at(const crl_env_desc *d, int64_t i)
{
    return d->env_ids ? d->env_ids[i] : d->id;
}

/* The description of the env an executor instance runs with worker_transforms: envs [start, start + count)
 * of d (their per-env options), the worker_transforms as its chain, auto_reset = next_step, frame_skip 1,
 * inline, from_pixels as d says (the outer env then takes "pixels" as an observation).  New, free with
 * crl_env_desc_free. */
CRL_INTERNAL crl_env_desc *crl__env_desc_inner(const crl_env_desc *d, int64_t start, int64_t count,
                                               crl_error *err);

#endif
