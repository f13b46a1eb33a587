/* libcrl application API: environments (TorchRL's EnvBase, in C).
 *
 * A crl_env drives one env backend instance (a batch of `num` envs) through
 * buffers the host allocates once from the backend's specs.  TensorDict
 * layout follows TorchRL: reset gives the root keys (observation keys,
 * "done", "terminated", "truncated", and "state" keys when the backend has
 * them); step reads "action" and writes "next.<observation keys>",
 * "next.reward", "next.done", "next.terminated", "next.truncated"; step_mdp
 * moves "next" to the root.  done = terminated | truncated, always.
 *
 * Batch shape: [num_envs] when num_envs is configured, else [] for a single
 * env (as TorchRL's GymEnv prints). */
#ifndef CRL_ENV_H
#define CRL_ENV_H

#include <crl/host.h>
#include <crl/env_backend.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct crl_env crl_env;

/* What happens to an env whose episode ended. */
typedef enum crl_autoreset {
    CRL_AUTORESET_OFF = 0,       /* stepping a done env is an error: reset it (with a _reset mask) */
    CRL_AUTORESET_NEXT_STEP = 1, /* EnvPool's: the step after done resets that env (its action is
                                    ignored, reward 0, done false) */
    CRL_AUTORESET_SAME_STEP = 2  /* the env resets inside the step that ended it: "next" keeps the
                                    final observation, the root after step_mdp holds the reset one */
} crl_autoreset;

/* The host's own [env] options (backend, id, num_envs, frame_skip,
 * from_pixels, pixels_only, auto_reset, project_actions, max_episode_steps,
 * seed, transforms -- see crl/transform.h -- and the executor's: executor =
 * inline|serial|threads|processes, num_workers, batch_size, pin_threads,
 * step_timeout, on_worker_failure = fail|restart, max_restarts,
 * worker_transforms = a, b (transforms run inside each worker on its own
 * envs, TorchRL's ParallelEnv of TransformedEnvs; `transforms` still run on
 * the batch in this process), and per_env.KEY = v0, v1, ... giving backend
 * option KEY one value per env);
 * the backend's options come from its component table.
 *
 * Executors: `inline` (the default) lets the backend step its num_envs
 * itself.  `serial` makes one backend instance per worker block (or per env
 * with per_env options) and steps them in order in the calling thread;
 * `threads` steps the blocks on a pool of num_workers threads (EnvPool's
 * design); `processes` in num_workers worker processes over shared-memory
 * buffers.  All give bitwise-identical results for the same seed, and all
 * work with num_envs = 0 too (one env, batch shape []).  num_workers is
 * clamped to num_envs; envs are split into num_workers blocks of
 * consecutive envs (sizes differing by at most one); threads runs them on
 * min(num_workers, cores) threads, the calling thread included.  per_env
 * lists need an executor other than inline and exactly one value per env;
 * each KEY must be an option of the backend (else CRL_E_CONFIG naming
 * per_env.KEY and its file:line); a value that does not parse, or that the
 * backend's make refuses (with its own code), is an error naming the env
 * index, "per_env.KEY = value" and the file:line.  A
 * worker that crashes, hangs past step_timeout or exits is an error naming
 * the env indices and the signal or status (CRL_E_CRASH, CRL_E_TIMEOUT), or
 * with on_worker_failure = restart its envs come back (up to max_restarts
 * times), their episodes marked truncated.  step_timeout (seconds for one
 * step, reset or render of a worker's envs) defaults to 300, far past any
 * healthy job, so a hung worker is an error rather than a stalled run; time
 * the process spends stopped (SIGSTOP, Ctrl-Z) does not count; 0 waits
 * forever.
 *
 * backend and id are required, but carry no CRL_OPT_REQUIRED flag: crl's schema
 * declares [env] for every config, and the flag would make every config
 * without an [env] section invalid.  crl_env_from_config enforces them
 * (CRL_E_CONFIG).  auto_reset defaults to off, as TorchRL's EnvBase.
 * max_episode_steps counts base-env steps (each skipped frame counts). */
CRL_API const crl_option *crl_env_options(void);

/* A typed env description: a config section ("env" for [env]) parsed and
 * validated once, before any env exists: the backend named by `backend`
 * (CRL_E_NOT_FOUND with close matches), the id (likewise, from the
 * backend's list), the common options and the backend's own (a key neither
 * table declares is CRL_E_CONFIG with a "did you mean"; values are range
 * checked), the executor settings and their constraints, per_env option
 * sets (one per env, each checked), and every transform of `transforms`
 * and `worker_transforms` (its [transform.NAME] section, type and options).
 * Errors name the config file and line.  Nothing is made, reset or stepped;
 * the config may be freed afterwards.  The host is borrowed and must
 * outlive the description and every env made from it.  New description,
 * free with crl_env_desc_free; NULL with err set on failure. */
typedef struct crl_env_desc crl_env_desc;
CRL_API crl_env_desc *crl_env_desc_from_config(crl_host *host, const crl_config *cfg, const char *section,
                                               crl_error *err);
CRL_API void crl_env_desc_free(crl_env_desc *desc);  /* NULL is allowed */
/* What a description says (borrowed strings; NULL/0 for a NULL desc):
 * the section it came from, backend, id, num_envs as configured (0: a
 * single env with batch shape []), and its [env] transforms by NAME. */
CRL_API const char *crl_env_desc_section(const crl_env_desc *desc);
CRL_API const char *crl_env_desc_backend(const crl_env_desc *desc);
CRL_API const char *crl_env_desc_id(const crl_env_desc *desc);
CRL_API int64_t crl_env_desc_num_envs(const crl_env_desc *desc);
CRL_API size_t crl_env_desc_transform_count(const crl_env_desc *desc);
CRL_API const char *crl_env_desc_transform_at(const crl_env_desc *desc, size_t i);

/* Build the env a description describes: the backend's make (or the
 * executor's instances), buffers and bind, then the transform chain.  The
 * description is borrowed only during the call; one description may make
 * any number of envs.  New env, free with crl_env_free; NULL with err set
 * (the backend's or a transform's error, prefixed with the env's name). */
CRL_API crl_env *crl_env_new(const crl_env_desc *desc, crl_error *err);

/* crl_env_desc_from_config then crl_env_new.  The host and config are
 * borrowed; the host must outlive the env. */
CRL_API crl_env *crl_env_from_config(crl_host *host, const crl_config *cfg, const char *section,
                                     crl_error *err);
CRL_API void crl_env_free(crl_env *env);

/* Identity and shape (borrowed). */
CRL_API const char *crl_env_id(const crl_env *env);
CRL_API const char *crl_env_backend_name(const crl_env *env);
CRL_API int64_t crl_env_num(const crl_env *env);
CRL_API int crl_env_batch_ndim(const crl_env *env);
CRL_API const int64_t *crl_env_batch_shape(const crl_env *env);
CRL_API crl_autoreset crl_env_autoreset(const crl_env *env);
CRL_API int64_t crl_env_max_episode_steps(const crl_env *env);  /* 0: none */

/* Specs as the user sees them (after the transforms), with the env's batch
 * shape, "pixels" included with from_pixels.  Borrowed; valid until the env
 * is freed or its transform chain changes.  NULL for a NULL env.
 *
 * As TorchRL's EnvBase: the full_* getters return the Composites (every
 * action, reward, done and state key of one step); observation_spec and
 * state_spec are those Composites too (state and info may be empty).
 * action_spec, reward_spec and done_spec return the leaf when the Composite
 * holds exactly one leaf (at any depth: a nested ("agent", "action") alone
 * counts), so crl_spec_is_in / crl_spec_project / crl_spec_rand apply to it
 * directly; with several leaves, or none, they return the whole Composite,
 * as TorchRL does.  So done_spec is the Composite of "done", "terminated"
 * and "truncated" (as the tutorial prints env.done_spec), and a
 * multi-action env's action_spec is its Composite.
 *
 * ABI note: crl_env_action_spec, crl_env_reward_spec and crl_env_done_spec
 * returned the Composites before the full_* getters were added (both within
 * the unreleased node CRL_1.2, so no symbol version changed). */
CRL_API const crl_spec *crl_env_full_observation_spec(const crl_env *env);
CRL_API const crl_spec *crl_env_full_action_spec(const crl_env *env);
CRL_API const crl_spec *crl_env_full_reward_spec(const crl_env *env);
CRL_API const crl_spec *crl_env_full_done_spec(const crl_env *env);
CRL_API const crl_spec *crl_env_full_state_spec(const crl_env *env);
CRL_API const crl_spec *crl_env_observation_spec(const crl_env *env);  /* = full_observation_spec */
CRL_API const crl_spec *crl_env_action_spec(const crl_env *env);
CRL_API const crl_spec *crl_env_reward_spec(const crl_env *env);
CRL_API const crl_spec *crl_env_done_spec(const crl_env *env);
CRL_API const crl_spec *crl_env_state_spec(const crl_env *env);        /* = full_state_spec */
/* All specs printed as TorchRL prints env.observation_spec, env.action_spec,
 * env.reward_spec, env.done_spec, env.state_spec (so the leaf of a
 * single-leaf action or reward), each under its heading
 * "observation_spec:", "action_spec:", ...  Free with crl_free; NULL for a
 * NULL env. */
CRL_API char *crl_env_specs_repr(const crl_env *env);

/* Seed env i with element i of the seed chain starting at `seed` (seed_0 =
 * seed, seed_{i+1} = crl_seed_next(seed_i)) at the next reset, and return
 * the element after the last env's, to seed whatever comes next. */
CRL_API uint64_t crl_env_set_seed(crl_env *env, uint64_t seed);

/* Reset.  td may be NULL (a new TensorDict is returned) or a TensorDict to
 * update and return (a new reference to it).  A bool "_reset" entry of
 * shape [batch..., 1] in td resets only those envs (the others keep their
 * values) and is removed from td, as TorchRL does.  State entries in td
 * are ignored here (see crl_env_reset_from_state).  Returns NULL with err
 * set; the env must be reset before its first step. */
CRL_API crl_td *crl_env_reset(crl_env *env, crl_td *td, crl_error *err);
/* Reset from the state entries in td (TorchRL's stateless reset): every
 * state leaf must be in td (CRL_E_NOT_FOUND names it); "_reset" works as
 * above.  CRL_E_UNSUPPORTED when the backend declares no state spec. */
CRL_API crl_td *crl_env_reset_from_state(crl_env *env, crl_td *td, crl_error *err);

/* Step with td's "action" (checked against the action spec: dtype, shape,
 * NaN, domain — out-of-domain values are an error naming the env index,
 * or projected with project_actions = true; NaN is always an error).  The
 * projection applies to the env's copy: td's "action" is left as given.
 * Writes "next.*" into td; when td already holds next tensors of the right
 * shapes they are reused, so a loop over the same td allocates nothing.
 * With auto_reset = off, stepping an env that is done is CRL_E_INVALID. */
CRL_API int crl_env_step(crl_env *env, crl_td *td, crl_error *err);
/* Draw a random action from the action spec into td's "action". */
CRL_API int crl_env_rand_action(crl_env *env, crl_td *td, crl_error *err);
/* rand_action then step. */
CRL_API int crl_env_rand_step(crl_env *env, crl_td *td, crl_error *err);

/* TorchRL's step_mdp: a new TensorDict with next's entries (minus reward)
 * at the root, plus the root entries that are not "action", "reward" or
 * "next" (so "some other key" is kept).  Under same_step auto-reset the
 * observation of envs that just ended is the reset one. */
CRL_API crl_td *crl_env_step_mdp(crl_env *env, const crl_td *td, crl_error *err);
/* The same into an existing TensorDict whose tensors are reused (no
 * allocation once dst has every key).  dst may be td itself (the root takes
 * next's values and "next" stays for the following step); entries of dst
 * that step_mdp would not write (an older "action" or "next") are left as
 * they are.  Under same_step, the reset values are those of the env's
 * latest step, so call it on the td that step wrote. */
CRL_API int crl_env_step_mdp_into(crl_env *env, const crl_td *td, crl_td *dst, crl_error *err);

/* TorchRL's step_and_maybe_reset: step td (as crl_env_step: td gets
 * "next"), write the root of the next step into next_root (as
 * crl_env_step_mdp_into(td, next_root)), then reset into next_root the envs
 * whose episode ended in this step (as crl_env_reset with a "_reset" mask
 * of them, through the transforms; no "_reset" entry is left anywhere).
 * So a loop never resets by hand:
 *     td = crl_env_reset(env, NULL, err);
 *     loop: policy(td); crl_env_step_and_maybe_reset(env, td, next, err); swap td and next
 * or, in place, crl_env_step_and_maybe_reset(env, td, td, err) (td's root
 * takes the next values, its "next" stays).  td keeps the step as it
 * happened ("next" holds the final values of an ended episode); next_root
 * holds only envs that are running or fresh, none done.  Every auto_reset
 * mode gives the same: off and next_step reset the ended envs here (so
 * next_step ignores no action, unless a plain crl_env_step left an env
 * waiting: this call's step resets it, as crl_env_step would), same_step
 * resets them in the step and step_mdp brings the reset values.
 *
 * Both TensorDicts are borrowed and must have the env's batch shape
 * (CRL_E_SHAPE; next_root's is checked before anything runs).  next_root
 * may be td itself, a fresh crl_td_new of that batch shape, or the other
 * td of a pair used in turn; its tensors of the right dtype and shape are
 * reused (entries it lacks are made on the first call), so a loop over the
 * same tds allocates nothing (transforms aside).  Without transforms,
 * pixels or frame_skip > 1, such a loop takes a cached path from its
 * second or third call on: one check of the stamps of both tds, then the
 * step writing each output into td's "next" and next_root at once.
 * Entries of next_root step_mdp does not write (an older "action" or
 * "next") are left as they are.  NULL arguments are CRL_E_INVALID.  Errors
 * are those of the step (a missing or bad action, an env never reset, a
 * done env with auto_reset = off that a plain step left), of step_mdp, or
 * of the reset, prefixed "step_and_maybe_reset: "; td and next_root are
 * then as far as the call got, and an env whose reset failed still waits
 * for one (crl_env_reset). */
CRL_API int crl_env_step_and_maybe_reset(crl_env *env, crl_td *td, crl_td *next_root, crl_error *err);

/* A policy writes "action" into td (it may read anything in td). */
typedef int (*crl_policy_fn)(void *user, crl_env *env, crl_td *td, crl_error *err);

/* Roll out up to max_steps steps with `policy` (NULL: random actions).
 * With auto_reset the env is reset first (else `td` must hold the current
 * root state, as from crl_env_reset).  With break_when_any_done the rollout
 * stops after the first step where any env is done; otherwise ended envs
 * are reset (per the auto-reset mode, or with a _reset mask when it is off)
 * and the rollout goes on.  Returns a TensorDict of batch [batch..., T]
 * where observation[1:] == next.observation[:-1] for envs that did not
 * end.  td may be NULL when auto_reset is true. */
CRL_API crl_td *crl_env_rollout(crl_env *env, int64_t max_steps, crl_policy_fn policy, void *user,
                                bool break_when_any_done, bool auto_reset, crl_td *td, crl_error *err);

/* TorchRL's check_env_specs: a short random rollout whose every entry is
 * checked against the specs; err names the first key that differs. */
CRL_API int crl_env_check_specs(crl_env *env, int64_t steps, crl_error *err);

/* Async stepping (EnvPool's send/recv), with batch_size < num_envs and
 * executor = threads (crl's pool, one backend instance per env), or
 * executor = inline when the backend has an async mode of its own
 * (crl_env_ops' async_reset/send/recv, as the envpool backend: EnvPool's
 * send/recv then does the work; frame_skip > 1 and from_pixels are refused
 * there).  Other executors, same_step auto-reset and transforms are refused
 * at construction with CRL_E_CONFIG; crl_env_reset/step on such an env are
 * CRL_E_INVALID naming these calls.
 * crl_env_async_reset starts every env (it first waits for the envs in
 * flight and drops their results; the seeds of crl_env_set_seed apply
 * here).  crl_env_send hands actions for some envs: td has batch [k], an
 * int64 "env_id" [k] and the action leaves [k, ...], checked like a step's
 * (dtype, shape, NaN, domain, naming the env); each env id at most once and
 * not already in flight, else CRL_E_INVALID naming it; on any error nothing
 * is sent.  crl_env_recv waits for the first batch_size envs to finish (step
 * or reset) and returns a new TensorDict of batch [batch_size] with
 * "env_id" and the step output at the root (observation leaves, "reward",
 * "done", "terminated", "truncated"; reward 0 and flags false for a reset).
 * An env that ends is reset by its next send (EnvPool's auto-reset: that
 * send's action is ignored).  recv with fewer than batch_size envs in
 * flight, send/recv before async_reset, or send/recv on a sync env is
 * CRL_E_INVALID (never a hang).  A backend error in a worker is returned by
 * the recv that would have held that env (naming it); every later call but
 * async_reset repeats it.  Call these from one thread. */
CRL_API int crl_env_async_reset(crl_env *env, crl_error *err);
CRL_API int crl_env_send(crl_env *env, const crl_td *td, crl_error *err);
CRL_API crl_td *crl_env_recv(crl_env *env, crl_error *err);
/* The executor's batch_size (num_envs when sync). */
CRL_API int64_t crl_env_batch_size(const crl_env *env);
/* Worker restarts so far (on_worker_failure = restart). */
CRL_API int64_t crl_env_restarts(const crl_env *env);

/* Render env i (0 <= i < num) into frame, a uint8 [H, W, 3] tensor.
 * CRL_E_UNSUPPORTED when the backend cannot render. */
CRL_API int crl_env_render(crl_env *env, int64_t i, crl_tensor *frame, crl_error *err);
CRL_API int32_t crl_env_render_height(const crl_env *env);
CRL_API int32_t crl_env_render_width(const crl_env *env);

#ifdef __cplusplus
}
#endif
#endif
