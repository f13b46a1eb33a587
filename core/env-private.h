/* Internals of the env host shared by env.c, env_mdp.c, env_rollout.c and env_check.c. */
#ifndef CRL_ENV_PRIVATE_H
#define CRL_ENV_PRIVATE_H

#include "crl-private.h"
#include <crl/env.h>

/* What a buffer leaf is to the host. */
typedef enum crl__env_role {
    CRL__ROLE_OBS = 0,     /* observation leaf (hidden from the user with pixels_only) */
    CRL__ROLE_INFO,        /* info leaf: shown to the user like an observation */
    CRL__ROLE_PIXELS,      /* "pixels", host-owned, filled by render */
    CRL__ROLE_ACTION,
    CRL__ROLE_REWARD,
    CRL__ROLE_DONE,
    CRL__ROLE_TERMINATED,
    CRL__ROLE_TRUNCATED,
    CRL__ROLE_STATE
} crl__env_role;

/* One leaf of the backend's specs (or "pixels") with its buffers. */
typedef struct crl__env_leaf {
    char *key;              /* dotted key, relative to the root (reset) or "next" (step) */
    char **comps;           /* key split at dots (NULL-terminated), for path compares */
    int role;               /* crl__env_role */
    bool exposed;           /* part of the user's TensorDicts and specs */
    crl_spec *spec;         /* leaf spec with batch [num] (a reference) */
    crl_spec *uspec;        /* the same as the user sees it (batch [] or [num]) */
    crl_td_key *k;          /* key */
    crl_td_key *nk;         /* "next." + key */
    crl_tensor *buf;        /* contiguous [num, ...] buffer */
    crl_tensor *ubuf;       /* buf as the user sees it: buf itself, or env 0's row */
    crl_tensor *snap;       /* frame_skip > 1: an env's outputs when it ended early */
    crl_tensor *rst;        /* same_step: the reset values of the envs that just ended */
    double *acc;            /* frame_skip > 1, reward leaves: sums over the skipped frames */
    size_t row_bytes;       /* bytes of one env's row of buf */
    int64_t row_elems;      /* elements of one env's row */
} crl__env_leaf;

struct crl_env {
    crl_host *host;
    char *section;
    char *backend;               /* component name */
    char *plugin;                /* plugin that registered it */
    char *id;
    crl_env_ops ops;             /* copied, missing trailing members NULL */
    void *benv;                  /* the backend's instance */

    int64_t num;
    int batch_ndim;              /* 0 (single env) or 1 */
    int64_t batch_shape[1];
    int64_t frame_skip;
    bool from_pixels, pixels_only, project_actions;
    crl_autoreset autoreset;
    int64_t max_steps;           /* 0: none */
    int32_t render_h, render_w;

    crl_td *buffers;             /* what bind got: batch [num], one tensor per spec leaf */
    crl__env_leaf *leaves;       /* every leaf; pixels last when from_pixels */
    size_t nleaves;
    crl__env_leaf *done_leaf, *term_leaf, *trunc_leaf, *pixels_leaf;

    /* User-facing specs (batch as the user sees it). */
    crl_spec *obs_spec, *action_spec, *reward_spec, *done_spec, *state_spec;
    /* Everything one step leaves in a td: root keys plus "next". */
    crl_spec *full_spec;

    /* Per-env bookkeeping, num entries each. */
    int64_t *steps;              /* base-env steps since the last reset */
    bool *needs_reset;           /* ended and not reset yet */
    bool *just_reset;            /* same_step: reset inside the last step */
    bool *done_now;              /* done flag of the last step's output */
    bool *active;                /* scratch: still stepping in this frame-skip loop */
    bool *ended_early;           /* scratch: ended before the last skipped frame */
    bool *pending;               /* scratch: reset inside this step (next_step semantics) */
    bool *mask, *mask2;          /* scratch masks */
    bool *seed_pending;          /* a seed from set_seed waits for the env's next reset */
    uint64_t *seeds;
    bool started;                /* reset ran at least once */
    bool any_just_reset;

    crl_rng rng;                 /* random actions */
    crl_td_key *reset_key;       /* "_reset" */
};

/* env.c */
/* Reset the envs in mask (NULL: all) and bring td's root entries up to
 * date for them (td non-NULL).  With from_state, td's state entries are
 * the start states. */
CRL_INTERNAL int crl__env_reset_into(crl_env *env, crl_td *td, const bool *mask, bool from_state,
                                     crl_error *err);
/* Copy env i's row of a [num, ...] buffer into a user tensor (shaped like
 * the leaf's ubuf) / from a user tensor into the buffer row.  No allocation. */
CRL_INTERNAL void crl__env_row_to_user(const crl_env *env, crl_tensor *dst, const crl__env_leaf *l,
                                       const crl_tensor *src_buf, int64_t i);
/* Copy an n-dim block between strided layouts (byte strides), same dtype. */
CRL_INTERNAL void crl__env_block_copy(char *dst, const int64_t *dstr, const char *src, const int64_t *sstr,
                                      int ndim, const int64_t *shape, size_t es);
/* CRL_E_SHAPE unless td's batch shape is the env's; fn names the caller. */
CRL_INTERNAL int crl__env_check_batch(const crl_env *env, const crl_td *td, const char *fn, crl_error *err);
/* "[2, 3]" for messages; free with g_free. */
CRL_INTERNAL char *crl__env_dims(int nd, const int64_t *sh);
/* "env backend 'x' (id 'y')" for messages. */
CRL_INTERNAL const char *crl__env_name(const crl_env *env, char *buf, size_t n);
/* Drop the leading (batch) dim of a spec, keeping env 0's bounds.  New
 * reference or NULL with err set. */
CRL_INTERNAL crl_spec *crl__spec_drop_batch(const crl_spec *s, crl_error *err);

/* env_mdp.c: step_mdp's core, td and dst non-NULL (may be the same). */
CRL_INTERNAL int crl__env_step_mdp_into(crl_env *env, const crl_td *td, crl_td *dst, crl_error *err);

#endif
