/* libcrl application API: transforms, standalone and as an env's chain
 * (TorchRL's TransformedEnv and Compose, in C).
 *
 * In INI:
 *   [env]
 *   transforms = pix, resize, gray
 *   [transform.resize]
 *   type = Resize
 *   w = 64
 *   h = 64
 * crl_env_from_config builds the chain from `transforms` (in order); every
 * name needs its [transform.NAME] section (CRL_E_CONFIG names the missing
 * section and the file:line of `transforms`), `type` selects the registered
 * transform (CRL_E_NOT_FOUND with close matches) and the section's other keys
 * are checked against that transform's options table.
 *
 * Once an env has transforms, every crl_env_* call sees the transformed env:
 * the spec getters return the transformed specs, reset/step/rollout/
 * check_specs run the chain, and crl_env_rand_action draws from the
 * transformed action spec.  Not supported together with transforms:
 * auto_reset = same_step (CRL_E_UNSUPPORTED at construction: use next_step
 * or off). */
#ifndef CRL_TRANSFORM_H
#define CRL_TRANSFORM_H

#include <crl/env.h>
#include <crl/transform_backend.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct crl_transform crl_transform;

/* The host's options of a [transform.NAME] section ("type"); the rest comes
 * from the selected transform's table. */
CRL_API const crl_option *crl_transform_section_options(void);

/* Build the transform a [transform.NAME] section describes (section is
 * "transform.NAME").  New transform, free with crl_transform_free. */
CRL_API crl_transform *crl_transform_from_config(crl_host *host, const crl_config *cfg, const char *section,
                                                 crl_error *err);
/* Build a transform from code: `type` is the registered name ("Resize"),
 * `kv` a NULL-terminated list of "key=value" strings (may be NULL).  Errors
 * as for the INI form, with "argument N" in place of FILE:LINE. */
CRL_API crl_transform *crl_transform_new(crl_host *host, const char *type, const char *const *kv,
                                         crl_error *err);
/* NULL-safe.  A transform that belongs to an env's chain is freed by the
 * env (or handed back by crl_env_remove_transform). */
CRL_API void crl_transform_free(crl_transform *t);

/* Its registered type and its name (the NAME of [transform.NAME], or the
 * type for crl_transform_new).  Borrowed. */
CRL_API const char *crl_transform_type(const crl_transform *t);
CRL_API const char *crl_transform_name(const crl_transform *t);

/* Standalone: apply the transform's call to td in place (replay samples,
 * offline data).  CRL_E_UNSUPPORTED for transforms that only work inside an
 * env (FrameSkipTransform, NoopResetEnv), naming the transform. */
CRL_API int crl_transform_apply(crl_transform *t, crl_td *td, crl_error *err);
/* Standalone spec rewrite: a new Composite, what `observation` (a Composite)
 * becomes after the transform.  New reference. */
CRL_API crl_spec *crl_transform_observation_spec(crl_transform *t, const crl_spec *observation, crl_error *err);

/* The env's chain (a Compose).  Changing it recomputes the specs seen
 * outside and rebinds every transform; the env must be reset before the
 * next step (CRL_E_INVALID otherwise).  On error the chain is unchanged. */
CRL_API size_t crl_env_transform_count(const crl_env *env);
/* Borrowed, NULL past the end. */
CRL_API crl_transform *crl_env_transform_at(const crl_env *env, size_t i);
/* The env takes ownership of t (also on failure, when it frees t).
 * CRL_E_INVALID when t already belongs to a chain. */
CRL_API int crl_env_append_transform(crl_env *env, crl_transform *t, crl_error *err);
CRL_API int crl_env_insert_transform(crl_env *env, size_t i, crl_transform *t, crl_error *err);
/* Detach transform i and hand it back (caller frees it); NULL with
 * CRL_E_RANGE for a bad index. */
CRL_API crl_transform *crl_env_remove_transform(crl_env *env, size_t i, crl_error *err);
/* The specs before any transform (the base env's, TorchRL's
 * env.base_env.*_spec).  Borrowed; NULL for a NULL env.  The observation
 * spec is the Composite; base_action_spec follows crl_env_action_spec's
 * rule (the leaf when there is exactly one, else the Composite) and
 * base_full_action_spec is the Composite. */
CRL_API const crl_spec *crl_env_base_observation_spec(const crl_env *env);
CRL_API const crl_spec *crl_env_base_action_spec(const crl_env *env);
CRL_API const crl_spec *crl_env_base_full_action_spec(const crl_env *env);

/* ---- learned statistics (TorchRL's state_dict of a Compose) ---- */

/* The statistics every transform of env's chain learned (crl_transform_ops
 * state): a new TensorDict (batch shape []) with one sub-TensorDict per
 * transform that has any, keyed by its index in the chain ("2.sum0").
 * An env without such transforms gives an empty one.  Errors: the
 * transforms' own, naming the transform; CRL_E_INVALID for a NULL env. */
CRL_API crl_td *crl_env_transforms_state(const crl_env *env, crl_error *err);
/* Load such statistics into env's chain (which must have the same
 * transforms at the same places, e.g. an env built from the same config):
 * each transform with an entry takes it (crl_transform_ops load_state);
 * with freeze they stop learning, so env normalises with exactly these
 * statistics (an evaluation env: TorchRL's frozen VecNorm).  Errors:
 * CRL_E_NOT_FOUND for an entry whose transform is missing or learns
 * nothing, the transforms' own (naming the transform); transforms before
 * the failing one keep what they loaded. */
CRL_API int crl_env_load_transforms_state(crl_env *env, const crl_td *state, bool freeze, crl_error *err);

/* ---- reprs and parents (TorchRL's print(env) and transform.parent) ---- */

/* The transform as TorchRL prints it inside a Compose, e.g.
 * "GrayScale(keys=['pixels'])" or "CatTensors(in_keys=['orientations',
 * 'velocity'], out_key=observation)": the transform's own repr when it has
 * one (crl_transform_ops.repr), else TorchRL's default "Type(keys=[...])"
 * from its in_keys (a dotted key prints as a tuple, ('next', 'x')).  New
 * string, free with crl_free; NULL for a NULL transform. */
CRL_API char *crl_transform_repr(const crl_transform *t);

/* print(env): an env with transforms prints as TorchRL's TransformedEnv
 *     TransformedEnv(
 *         env=DMControlEnv(env=acrobot, task=swingup, batch_size=torch.Size([])),
 *         transform=Compose(
 *                 CatTensors(in_keys=['orientations', 'velocity'], out_key=observation),
 *                 GrayScale(keys=['pixels'])))
 * and one without as its base env.  The base env is named after the
 * TorchRL wrapper of its library: the gym and classic backends print
 * "GymEnv(env=ID, batch_size=torch.Size([...]), device=cpu)" (classic
 * reimplements gym's classic-control envs), dm_control
 * "DMControlEnv(env=DOMAIN, task=TASK, batch_size=torch.Size([...]))", any
 * other backend "EnvBase(backend=NAME, env=ID, batch_size=..., device=cpu)".
 * The batch size is the env's (num_envs, whatever the executor).  New
 * string, free with crl_free; NULL for a NULL env. */
CRL_API char *crl_env_repr(const crl_env *env);

/* TorchRL's transform.parent for a transform in an env's chain: the env
 * with the transforms before t (not t itself).  NULL when t is NULL or in
 * no chain.
 *   crl_transform_parent_repr: print(transform.parent), always a
 *     TransformedEnv (the first transform's parent prints an empty
 *     Compose, as TorchRL's does).  New string, free with crl_free.
 *   crl_transform_parent_specs: the specs the parent produces, which t
 *     receives (observation, action, reward, done, state Composites with
 *     the env's batch shape; what crl_transform_ctx_parent_specs gives the
 *     plugin).  Borrowed, valid while t stays in the chain and the chain
 *     is unchanged.
 *   crl_transform_parent_env: the env whose chain holds t, and t's index
 *     in it in *index (may be NULL).  Borrowed. */
CRL_API char *crl_transform_parent_repr(const crl_transform *t);
CRL_API const crl_transform_specs *crl_transform_parent_specs(const crl_transform *t);
CRL_API crl_env *crl_transform_parent_env(const crl_transform *t, size_t *index);

#ifdef __cplusplus
}
#endif
#endif
