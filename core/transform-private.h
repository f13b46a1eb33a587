/* Internals of transforms shared by transform.c, transform_chain.c and the env host. */
#ifndef CRL_TRANSFORM_PRIVATE_H
#define CRL_TRANSFORM_PRIVATE_H

#include "crl-private.h"
#include <crl/transform.h>
#include <crl/config.h>

/* Where a transform runs (see transform_backend.h).  Embedded in its
 * crl_transform; valid while the transform is in a chain. */
struct crl_transform_ctx {
    crl_transform *tf;
    crl_env *env;                 /* NULL when standalone */
    size_t index;                 /* position in the chain */
    crl_transform_specs parent;   /* the specs this transform receives (owned references) */
    crl_rng rng;
    const bool *resets;           /* step_resets while a step hook runs */
};

struct crl_transform {
    crl_host *host;
    char *type;                   /* registered name */
    char *name;                   /* NAME of [transform.NAME], or the type */
    char *label;                  /* "transform 'NAME' (TYPE)" */
    crl_transform_ops ops;        /* copied: missing trailing members NULL */
    void *t;                      /* the plugin's instance */
    bool in_chain;
    crl_transform_ctx ctx;
    char **in_keys;               /* the "in_keys" option (NULL-terminated; NULL when undeclared), for the repr */
};

/* A transform as a config section describes it ([transform.NAME]: its type resolved, its options parsed and
 * validated), before any instance exists.  Owns its strings and opts; comp is the host's. */
typedef struct crl__tf_desc {
    char *name;                   /* NAME */
    char *section;                /* "transform.NAME" */
    const crl_component *comp;
    char *owner;                  /* the plugin that registered comp */
    crl_opts *opts;
} crl__tf_desc;

/* Parse and validate [section] (transform.NAME) into *d (zeroed first; cleared on failure). */
CRL_INTERNAL int crl__tf_desc_from_config(crl_host *host, const crl_config *cfg, const char *section,
                                          crl__tf_desc *d, crl_error *err);
CRL_INTERNAL int crl__tf_desc_copy(crl__tf_desc *dst, const crl__tf_desc *src, crl_error *err);
CRL_INTERNAL void crl__tf_desc_clear(crl__tf_desc *d);
/* A new transform from a description (the plugin's create runs). */
CRL_INTERNAL crl_transform *crl__transform_from_desc(crl_host *host, const crl__tf_desc *d, crl_error *err);

/* Per chain level k (the env plus transforms [0, k)): scratch kept across
 * calls so a steady loop allocates nothing. */
typedef struct crl__tlevel {
    crl_td *shallow;              /* step input with the inverses of [0, k) applied */
    crl_td *inv_keep;             /* tensors those inverses made, reused by crl_transform_output */
    crl_td *rst;                  /* a partial reset's output before the merge into the caller's td */
    bool *resets;                 /* envs reset by the base inside this level's step */
    bool any_resets;
} crl__tlevel;

/* An env's transform chain (a Compose). */
typedef struct crl__tchain {
    GPtrArray *tf;                /* crl_transform *, owned */
    crl_transform_specs out;      /* the specs after the last transform (owned) */
    crl_spec *full_spec;          /* one step's td as check_specs expects it */
    crl__tlevel *lv;              /* count + 1 levels */
    size_t nlv;
    bool *has_inv_below;          /* [k]: some transform in [0, k) has inv; count + 1 entries */
    bool check_action;            /* the outer action spec differs from the base's */
    crl_td_key **act_keys;        /* leaves of out.action, with their specs */
    crl_spec **act_specs;
    size_t nact;
    crl_td_key **rew_keys;        /* leaves of out.reward (step_mdp leaves them behind) */
    crl_spec **rew_specs;
    size_t nrew;
    bool need_reset;              /* the chain changed since the last full reset */
    int running;                  /* level whose hooks are running, -1 outside a step */
    uint64_t seed;
} crl__tchain;

/* transform.c */
/* Clone every member of a spec set into dst (all NULL on failure). */
CRL_INTERNAL int crl__tspecs_clone(crl_transform_specs *dst, const crl_transform_specs *src, crl_error *err);
CRL_INTERNAL void crl__tspecs_clear(crl_transform_specs *s);
/* Run t's call on td, prefixing errors with its label. */
CRL_INTERNAL int crl__transform_call(crl_transform *t, crl_td *td, crl_error *err);
/* While inverses run on a host-made shallow copy, crl_transform_output must
 * not hand out the caller's tensors found there: `orig` is the caller's td,
 * `keep` the level's reusable tensors.  NULL, NULL when done. */
CRL_INTERNAL void crl__transform_guard(crl_td *shallow, const crl_td *orig, crl_td *keep);
/* Draw a random value of every leaf of comp into td (reusing fitting tensors). */
CRL_INTERNAL int crl__spec_rand_into_td(const crl_spec *comp, crl_rng *rng, crl_td *td, crl_error *err);

/* transform_chain.c: the env's side.  Every function is a no-op or the
 * plain env path when env has no chain. */
CRL_INTERNAL void crl__tchain_free(crl_env *env);
CRL_INTERNAL void crl__tchain_seed(crl_env *env, uint64_t seed);
/* Reset (mask NULL: all) through the whole chain, into td. */
CRL_INTERNAL int crl__tchain_reset(crl_env *env, crl_td *td, const bool *mask, bool from_state, crl_error *err);
/* crl_env_step for an env with a chain. */
CRL_INTERNAL int crl__tchain_step(crl_env *env, crl_td *td, crl_error *err);
/* The chain of transforms tf[0..n) (made from their descriptions) on env, which has none yet. */
CRL_INTERNAL int crl__tchain_build(crl_env *env, const crl__tf_desc *tf, size_t n, crl_error *err);

#endif
