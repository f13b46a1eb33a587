/* libcrl application API: config-only training (what `crl run` drives).
 *
 * A trainer assembles, from one config, the env of [env] (with its
 * transforms and executor), the collector of [collector], the replay
 * buffer of [replay] (off-policy losses), the loss of [loss] (`type`
 * selects a registered loss component, whose own options the section
 * then takes), the optimizer of [optim] and the loop of [train]:
 *
 *   off-policy (dqn, ...): each collected batch goes into the replay
 *     buffer; once init_random_frames frames were collected and the buffer
 *     holds batch_size items, num_updates times: sample, loss forward,
 *     clip, optimizer steps (one optimizer per parameter vector of the
 *     loss, each with the [optim] settings), target update (and priorities from td_error
 *     with the prioritized sampler);
 *   on-policy (ppo, ...): each batch is prepared by the loss (advantages),
 *     then `epochs` passes of shuffled minibatches of minibatch_size.
 *
 * Every eval_interval frames, eval_episodes episodes of the
 * exploration-free policy (MODE) run on a separate env built from [env]
 * and seeded from [train] seed.  Training is bitwise reproducible for a
 * given config on CPU with the same OpenBLAS thread count. */
#ifndef CRL_TRAINER_H
#define CRL_TRAINER_H

#include <crl/collector.h>
#include <crl/rng.h>
#include <crl/loss_backend.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The [loss] section's own options (type); the rest come from the loss
 * component `type` names.  The [optim] options (type, lr, weight_decay,
 * eps, max_grad_norm) and the [train] options (seed, num_updates, epochs,
 * minibatch_size, eval_interval, eval_episodes, eval_max_steps,
 * log_interval, checkpoint_interval, stop_return).  Static tables. */
CRL_API const crl_option *crl_loss_section_options(void);
CRL_API const crl_option *crl_optim_section_options(void);
CRL_API const crl_option *crl_train_options(void);
/* The options of a [net.NAME] section (type, encoder, num_cells, ...;
 * crl_net_new in <crl/nn.h> builds from them).  Static table.  Since ABI 1.2. */
CRL_API const crl_option *crl_net_section_options(void);

typedef struct crl_trainer crl_trainer;

/* crl_experiment_check flags. */
typedef enum crl_check_flags {
    /* The config must describe a training run (crl run): a [loss] type is
     * required.  Without it, training's rules still apply when [loss] is
     * there. */
    CRL_CHECK_TRAIN = 1u << 0
} crl_check_flags;

/* Validation before work: check a whole experiment config as the commands
 * that use it would build it, without resetting or stepping any env.
 * With schema (may be NULL when the caller validated already), every
 * section and key first; then the [train] and [optim] options; the env of
 * [env] (built to learn its specs: backend, id, the backend's options and
 * their ranges, executor settings, each named transform with its section
 * and options; a transform's bind that would roll the env out, as
 * ObservationNorm's init_stats, is skipped); [collector] against the env's
 * batch (frames_per_batch a multiple of the envs stepping together); the
 * buffer of [replay] (options, sampler and writer rules, transforms; its
 * storage is not opened, so nothing is written); the loss of [loss] built
 * over the transformed specs (its networks' input and output sizes); and
 * training's rules across sections (one sync sub-collector, a [replay]
 * section for off-policy losses with 1 <= batch_size <= capacity, no
 * drop_last).  Which sections are checked: [env], [collector] and
 * [replay] when present, everything when training (CRL_CHECK_TRAIN or a
 * [loss] section).  Everything built is freed again; the env is made (a
 * gym backend starts its interpreter, an executor its workers), so this
 * costs about one env creation.  Not checked: what a storage checks when
 * it opens (a memmap dir holding another capacity) and what a skipped
 * bind would have found in its rollout; those surface when the run builds
 * them.
 *
 * Errors: the first problem found, CRL_E_CONFIG starting with FILE:LINE
 * (or "command line") of the key involved whenever the config sets one --
 * value errors of the components (out of range, unknown id, wrong shape or
 * dtype, unsupported combination) are reported as CRL_E_CONFIG too; other
 * codes (CRL_E_NOMEM, CRL_E_IO, CRL_E_PLUGIN, ...) are not the config's
 * fault and keep theirs.  CRL_E_INVALID for a NULL host or cfg. */
CRL_API int crl_experiment_check(crl_host *host, const crl_config *cfg, const crl_schema *schema, unsigned flags,
                                 crl_error *err);

/* Where training stands, handed to the progress callback after each batch. */
typedef struct crl_train_stats {
    uint32_t struct_size;
    int64_t frames;           /* collected so far */
    int64_t batches;
    int64_t optim_steps;
    int64_t episodes;         /* completed training episodes */
    double recent_return;     /* mean return of the last 10 training episodes; NaN before the first */
    double loss;              /* sum of the loss_* terms of the last update; NaN before the first */
    double seconds;           /* wall-clock since crl_trainer_run started */
    double fps;               /* frames / seconds */
    double eval_return;       /* mean return of the last evaluation; NaN before the first */
    bool evaluated;           /* an evaluation ran after this batch */
    bool done;                /* the last callback of the run */
    /* Since ABI 1.2 (struct_size tells): the same returns in the backend's own reward, before the
     * [env] transforms (RewardScaling, VecNorm, ...) changed it; equal to the ones above for an env
     * without transforms, NaN when unknown (see crl_trainer_raw_reward_key). */
    double recent_raw_return;
    double eval_raw_return;
} crl_train_stats;

/* Called after each batch; a non-zero return stops the run with that code
 * (the callback sets err). */
typedef int (*crl_train_progress_fn)(void *user, crl_trainer *t, const crl_train_stats *s, crl_error *err);

/* Build everything from cfg.  Each section read is checked against the
 * tables of the part that reads it (an unknown key or a bad value is
 * CRL_E_CONFIG); sections no part reads are not looked at: validate the
 * whole config first (crl_experiment_check, or crl_config_validate)
 * against the schema the application assembles from the option tables of
 * the parts it uses, as crl run does.  host and cfg are borrowed and must
 * outlive the trainer.  Errors: CRL_E_CONFIG naming FILE:LINE and the key
 * (no [loss] type, a loss that needs a [replay] section, num_collectors > 1
 * or sync = false, which would run the policy while the optimizer updates
 * it, a [replay] batch_size of 0 or above the capacity, drop_last),
 * CRL_E_NOT_FOUND for an unknown loss type (with a did-you-mean), the
 * components' own errors.  crl_experiment_check (above) finds the same
 * problems, each as CRL_E_CONFIG, without building anything for good.  New
 * trainer, free with crl_trainer_free. */
CRL_API crl_trainer *crl_trainer_from_config(crl_host *host, const crl_config *cfg, crl_error *err);
CRL_API void crl_trainer_free(crl_trainer *t);

/* Train until [collector] total_frames (or until the evaluation return
 * reaches [train] stop_return when set).  progress may be NULL.  A
 * non-finite loss or gradient stops with CRL_E_RUNTIME naming the term and
 * the frame; the parameters are those before the failing update. */
CRL_API int crl_trainer_run(crl_trainer *t, crl_train_progress_fn progress, void *user, crl_error *err);

/* Run `episodes` episodes of the exploration-free policy on the
 * evaluation env and set *mean_return. */
CRL_API int crl_trainer_evaluate(crl_trainer *t, int64_t episodes, double *mean_return, crl_error *err);

/* One evaluation in detail (struct_size set by the caller).  Since ABI 1.2. */
typedef struct crl_eval_result {
    uint32_t struct_size;     /* sizeof(crl_eval_result) */
    int64_t episodes;         /* how many ran (the returns below hold that many) */
    double *returns;          /* per episode, after the [env] transforms; crl_free */
    double *raw_returns;      /* per episode, the backend's reward before them (NaN when unknown); crl_free */
    double mean, std;         /* of returns (std: population, 0 for one episode) */
    double raw_mean, raw_std; /* of raw_returns */
} crl_eval_result;

/* What an evaluation tells an observer (crl_eval_hook), in order: BEGIN
 * (frames: the frame count it is seeded from), then per rollout a STEP
 * before each action (td: the state the policy acts on; from the second
 * step on it still holds the previous step's "next", whose "done" says
 * which envs that step ended, before they are reset) and ROLLOUT_END (the
 * envs at the state of the rollout's last step), then END.  Since ABI 1.2. */
typedef enum crl_eval_event {
    CRL_EVAL_BEGIN,
    CRL_EVAL_STEP,
    CRL_EVAL_ROLLOUT_END,
    CRL_EVAL_END
} crl_eval_event;

/* An observer of evaluations (crl run's videos: crl_env_render of env 0).
 * The callback's non-zero return stops the evaluation with that code (it
 * sets err); END comes also after a failure, with td NULL.  Since ABI
 * 1.2. */
typedef struct crl_eval_hook {
    uint32_t struct_size;     /* sizeof(crl_eval_hook) */
    int (*event)(void *user, crl_eval_event what, crl_env *env, const crl_td *td, int64_t frames, crl_error *err);
    void *user;
} crl_eval_hook;

/* Observe every later evaluation of t with hook (copied; NULL: none).
 * CRL_E_INVALID for a NULL trainer, a struct_size too small or no event
 * function.  Since ABI 1.2. */
CRL_API int crl_trainer_set_eval_hook(crl_trainer *t, const crl_eval_hook *hook, crl_error *err);

/* crl_trainer_evaluate with every episode's return, transformed and raw.
 * The evaluation env's transforms normalise with the training env's
 * statistics as they stand (VecNorm's running sums, ObservationNorm's loc
 * and scale: crl_env_transforms_state), frozen: evaluating never changes
 * them, and evaluations at the same frame count return the same numbers.
 * The env is seeded from [train] seed and the frame count.  Sets *out
 * (free its arrays with crl_free, also after a failure, when they are
 * NULL).  Errors: CRL_E_INVALID without an evaluation env ([train]
 * eval_episodes = 0 when the trainer was built) or episodes < 1, the
 * env's and the policy's errors prefixed "evaluation: ". */
CRL_API int crl_trainer_evaluate_ex(crl_trainer *t, int64_t episodes, crl_eval_result *out, crl_error *err);

/* ---- a trained policy, loaded from a checkpoint (crl eval, crl rollout --policy) ------------------
 * What a C program needs to act with a run's policy, with libcrl alone
 * (doc/policy-files.md shows a whole program):
 *
 *   crl_config *cfg = crl_config_new(&e);
 *   crl_config_load_file(cfg, "RUN/checkpoint/experiment.ini", CRL_LAYER_FILE, &e);
 *   crl_host *host = crl_host_new(cfg, &e);
 *   crl_host_load_configured(host, &e);                  // [plugins] load = ...
 *   crl_policy *p = crl_policy_load(host, cfg, "RUN/checkpoint", &e);
 *   crl_td *ro = crl_env_rollout(crl_policy_env(p), 1000, crl_policy_act, p, true, true, NULL, &e);
 */
typedef struct crl_policy crl_policy;

/* Load the exploration-free policy of the checkpoint directory dir (as
 * crl_trainer_checkpoint writes it: dir/trainer.ckpt, and
 * dir/experiment.ini, the settings cfg must hold): the loss of cfg's
 * [loss] built over the env of [env] with [train] seed, its networks
 * from the checkpoint's "loss/..." sections, and the evaluation env of
 * [env] with a copy of the raw reward first in its chain (as the
 * trainer's) and the transform statistics the training env had at the
 * checkpoint (section "trainer/transforms", crl_env_transforms_state),
 * frozen.  host and cfg are borrowed for the call only.  Errors:
 * CRL_E_INVALID for NULL arguments, CRL_E_IO / CRL_E_CORRUPT naming the
 * file and section, the loss's and the env's own.  Free with
 * crl_policy_free (NULL-safe).  Since ABI 1.2. */
CRL_API crl_policy *crl_policy_load(crl_host *host, const crl_config *cfg, const char *dir, crl_error *err);
CRL_API void crl_policy_free(crl_policy *p);
/* Its evaluation env (borrowed, valid while p lives); the frame count of
 * the checkpoint (-1 for NULL); [train] eval_episodes of its config. */
CRL_API crl_env *crl_policy_env(const crl_policy *p);
CRL_API int64_t crl_policy_frames(const crl_policy *p);
CRL_API int64_t crl_policy_eval_episodes(const crl_policy *p);
/* A crl_policy_fn (user: the policy): write the policy's exploration-free
 * action (the distribution's mode, the greedy Q-value) into td from its
 * observation; td from any env of the same specs.  CRL_E_INVALID for NULL
 * arguments, the loss's errors.  Not thread-safe per policy. */
CRL_API int crl_policy_act(void *user, crl_env *env, crl_td *td, crl_error *err);
/* `episodes` episodes on its env, seeded as the trainer seeds the
 * evaluation at the checkpoint's frame count: the checkpoint written at the
 * end of a run gives the run's last evaluation return (with as many
 * episodes).  *out as crl_trainer_evaluate_ex.  Errors: CRL_E_INVALID for
 * NULL arguments or episodes < 1, the env's and the policy's. */
CRL_API int crl_policy_evaluate(crl_policy *p, int64_t episodes, crl_eval_result *out, crl_error *err);
/* Observe the evaluations of crl_policy_evaluate (as crl_trainer_set_eval_hook). */
CRL_API int crl_policy_set_eval_hook(crl_policy *p, const crl_eval_hook *hook, crl_error *err);

/* The key of the untransformed reward in the trainer's batches: when the
 * [env] section has transforms, the trainer puts a copy of the backend's
 * reward at "raw_reward" (RenameTransform with create_copy, first in the
 * chain) and this is "next.raw_reward"; without transforms it is
 * "next.reward".  NULL when raw rewards are not known: a trainer whose
 * collectors run elsewhere (mpi) with transforms, or transforms without
 * the transforms plugin loaded.  worker_transforms run before the chain,
 * so with them "raw" is the reward the workers deliver.  Borrowed. */
CRL_API const char *crl_trainer_raw_reward_key(const crl_trainer *t);

/* Write the loss (networks, targets, schedules), every optimizer's state,
 * the counters, the exploration RNG, the actions taken so far and the
 * state the policy carries in each sub-collector's TensorDict to the
 * checkpoint file `path` (kind "crl.train").  load reads the loss,
 * optimizers, counters and RNG back (not the actions: see
 * crl_trainer_resume).  Errors: CRL_E_IO, CRL_E_CORRUPT naming the file
 * and section.  The loss changes nothing on error (it validates first),
 * but optimizers read before a failing section keep what they read:
 * discard a trainer whose load failed. */
CRL_API int crl_trainer_save(crl_trainer *t, const char *path, crl_error *err);
CRL_API int crl_trainer_load(crl_trainer *t, const char *path, crl_error *err);

/* The file of a checkpoint directory holding the settings of the config
 * the trainer was built from. */
#define CRL_TRAINER_SETTINGS_FILE "experiment.ini"

/* A checkpoint directory (written to a temporary directory, fsynced and
 * renamed over dir): trainer.ckpt (crl_trainer_save, plus the counters and
 * every action the policy took), replay/ (crl_replay_dump) and
 * experiment.ini (CRL_TRAINER_SETTINGS_FILE: every key of the trainer's
 * config as its files and overrides set it, no defaults, as INI; what a
 * resume compares its own config with).  Call it between batches (from the
 * progress callback, or after a run).  Temporary directories of a process
 * killed meanwhile stay next to dir: crl_ckpt_dir_clean (crl/checkpoint.h)
 * removes them. */
CRL_API int crl_trainer_checkpoint(crl_trainer *t, const char *dir, crl_error *err);
/* Continue from a checkpoint directory, on a new trainer built from the
 * same config (total_frames may be larger, and need not be a multiple of
 * frames_per_batch): loads the loss, optimizer and counters, re-collects
 * the checkpoint's frames with the recorded actions in the batches they
 * were collected in (rebuilding the env and collector state without the
 * backends saving theirs; the policy only fills the other keys it writes),
 * puts back the state the policy carries between steps (a recurrent
 * policy's recurrent_state_*: what its act writes under "next"; the
 * checkpoint keeps each sub-collector's), then loads the replay
 * buffer.  A checkpoint without that state (an older crl's) resumes with
 * it recomputed, not bitwise, and says so on the host's log.  The next
 * crl_trainer_run continues bitwise as the uninterrupted run would on CPU
 * (same OpenBLAS thread count).  Errors: CRL_E_CORRUPT / CRL_E_IO naming
 * the file, CRL_E_CONFIG when the config does not reproduce the
 * checkpointed frames (another env, seed or frames_per_batch).  With
 * policy copies (num_collectors > 1, [distributed]) each sub-collector
 * re-collects with its own recorded actions and its copy then takes the
 * checkpoint's stream and last-sync weights; CRL_E_CONFIG for another
 * num_collectors, CRL_E_UNSUPPORTED for async sub-collectors (sync =
 * false: which batch came when is not recorded). */
CRL_API int crl_trainer_resume(crl_trainer *t, const char *dir, crl_error *err);
/* Frames collected so far (those of a resumed checkpoint included). */
CRL_API int64_t crl_trainer_frames(const crl_trainer *t);

/* Borrowed pieces: the loss component and its state, the optimizer of the
 * loss's parameter vector i (NULL past the last), the replay buffer (NULL
 * for on-policy losses) and the collector. */
CRL_API const crl_loss_ops *crl_trainer_loss_ops(const crl_trainer *t);
CRL_API void *crl_trainer_loss_state(const crl_trainer *t);
CRL_API crl_optim *crl_trainer_optim(const crl_trainer *t, size_t i);
CRL_API crl_replay *crl_trainer_replay(const crl_trainer *t);
CRL_API crl_collector *crl_trainer_collector(const crl_trainer *t);
/* The evaluation env (NULL when [train] eval_episodes was 0): borrowed.  Its
 * transforms hold the statistics of the last evaluation (frozen).  Since
 * ABI 1.2. */
CRL_API crl_env *crl_trainer_eval_env(const crl_trainer *t);

/* ---- sub-collectors with their own policy (num_collectors > 1, [distributed]) -----------
 * With num_collectors > 1 or a [distributed] section, each sub-collector k
 * acts with its own copy of the policy (crl_policy_copy, exploration
 * stream k) that gets the learner's weights every [distributed]
 * sync_interval optimizer steps and the exploration schedule before each
 * batch; every frame records the weights' version
 * ("collector.policy_version", int64: the optimizer steps they had).  The copies live on the
 * collector's threads, or (backend = mpi) in other processes: both give
 * bitwise the same run.  Each copy records the actions it took; a
 * checkpoint holds them with each copy's stream, version and exploration
 * frames, and the weights of the last sync, so crl_trainer_resume
 * re-collects every sub-collector's frames with its own actions and
 * restores the copies (sync: bitwise the uninterrupted run). */

/* The [distributed] options (backend, sync_interval, timeout).  Static. */
CRL_API const crl_option *crl_distributed_options(void);

typedef struct crl_policy_copy crl_policy_copy;

/* Sub-collector `index`'s policy: the loss of cfg's [loss] built over
 * env's specs with the [train] seed (so it starts with the learner's
 * initial weights, version 0).  host, cfg and env are borrowed for the
 * call only.  Errors: the loss's (crl_loss_from_config), CRL_E_INVALID
 * for NULL arguments.  Free with crl_policy_copy_free (NULL-safe). */
CRL_API crl_policy_copy *crl_policy_copy_new(crl_host *host, const crl_config *cfg, const crl_env *env, size_t index,
                                             crl_error *err);
CRL_API void crl_policy_copy_free(crl_policy_copy *p);
/* Bytes of the weights (crl_trainer_weights_size of a trainer of the same
 * config), and the version of those set last (-1 for NULL). */
CRL_API size_t crl_policy_copy_weights_size(const crl_policy_copy *p);
CRL_API int64_t crl_policy_copy_version(const crl_policy_copy *p);
/* Take weights (nbytes of crl_trainer_weights; NULL: keep the current
 * ones and their version) as version `version`, and advance the
 * exploration schedule to explore_frames collected frames.  Errors:
 * CRL_E_INVALID for another size or a schedule going back (nothing
 * changed then). */
CRL_API int crl_policy_copy_set(crl_policy_copy *p, int64_t version, int64_t explore_frames, const void *weights,
                                size_t nbytes, crl_error *err);
/* A crl_policy_fn (user: the copy): the loss's exploring action.  Not
 * thread-safe per copy. */
CRL_API int crl_policy_copy_act(void *user, crl_env *env, crl_td *td, crl_error *err);
/* Set "collector.policy_version" of a sub-collector's batch (int64 of the
 * batch's shape, the version of the copy's weights: those that acted for
 * it, as the copy only changes between batches).  Errors: CRL_E_NOMEM,
 * CRL_E_INVALID for NULL arguments. */
CRL_API int crl_policy_copy_stamp(const crl_policy_copy *p, crl_td *batch, crl_error *err);

/* What a checkpoint keeps of a policy copy. */
typedef struct crl_policy_copy_state {
    uint32_t struct_size;      /* sizeof(crl_policy_copy_state) */
    int64_t version;           /* optimizer steps of its weights */
    int64_t explore_frames;    /* frames its exploration schedule advanced by */
    crl_rng rng;               /* its exploration stream */
    const void *actions;       /* every action it took, in order (borrowed) */
    size_t actions_len;        /* bytes of actions */
} crl_policy_copy_state;
/* Fill st (struct_size set by the caller; actions borrowed from the copy
 * until it acts again or is freed).  CRL_E_INVALID for NULL arguments or
 * a smaller struct_size. */
CRL_API int crl_policy_copy_get_state(const crl_policy_copy *p, crl_policy_copy_state *st);
/* Resume, step 1, on a new copy: the next actions it is asked for are
 * these recorded ones (copied), in order, in place of the policy's
 * (which is run without exploring, for the other keys it writes).
 * Errors: CRL_E_INVALID for a copy that acted or was set already. */
CRL_API int crl_policy_copy_replay(crl_policy_copy *p, const void *actions, size_t nbytes, crl_error *err);
/* Resume, step 2, after re-collecting: take st's stream, version,
 * exploration frames and weights (nbytes of crl_trainer_weights; NULL:
 * keep the current ones) and act again.  Errors: CRL_E_CONFIG when the
 * re-collection did not use every replayed action (another config),
 * crl_policy_copy_set's. */
CRL_API int crl_policy_copy_restore(crl_policy_copy *p, const crl_policy_copy_state *st, const void *weights,
                                    size_t nbytes, crl_error *err);

/* The trainer's policy weights (every parameter vector of the loss, in
 * order, raw bytes): their size, and a copy into buf of exactly that many
 * bytes.  CRL_E_INVALID for another size. */
CRL_API size_t crl_trainer_weights_size(const crl_trainer *t);
CRL_API int crl_trainer_weights(const crl_trainer *t, void *buf, size_t nbytes, crl_error *err);

/* A trainer whose sub-collectors run elsewhere (crl run's mpi backend). */
typedef struct crl_trainer_remote {
    uint32_t struct_size;                    /* sizeof(crl_trainer_remote) */
    const crl_collector_remote *collector;   /* the transport of the batches (crl_collector_from_config_remote) */
    /* Before each batch is asked for: the policy the next requests carry --
     * version (optimizer steps of the weights), explore_frames (frames the
     * exploration schedule advanced by), weights (true: they changed since
     * the last call; take them with crl_trainer_weights).  Returns CRL_OK
     * or sets err, which stops the run. */
    int (*publish)(void *user, crl_trainer *t, int64_t version, int64_t explore_frames, bool weights,
                   crl_error *err);
    void *user;                              /* passed to every callback */
    /* For checkpoints: fill st (struct_size set) with remote sub-collector
     * k's copy as of the last batch it sent; actions borrowed until the
     * next batch. */
    int (*copy_state)(void *user, size_t k, crl_policy_copy_state *st, crl_error *err);
    /* For crl_trainer_resume: before re-collecting (done = false), hand
     * sub-collector k the actions of st to replay (crl_policy_copy_replay);
     * after (done = true), have it take st's state and the weights
     * (crl_policy_copy_restore). */
    int (*resume)(void *user, size_t k, const crl_policy_copy_state *st, const void *weights, size_t nbytes,
                  bool done, crl_error *err);
} crl_trainer_remote;

/* crl_trainer_from_config with the sub-collectors of [collector]
 * (num_collectors of them, sync or async) behind `remote`.  remote is
 * copied.  Errors as crl_trainer_from_config, CRL_E_INVALID for
 * incomplete ops. */
CRL_API crl_trainer *crl_trainer_from_config_remote(crl_host *host, const crl_config *cfg,
                                                    const crl_trainer_remote *remote, crl_error *err);

/* Look up loss component `type` and build it over env's specs: the loss's
 * option table applied to config section `section`.  For tests and tools
 * that drive a loss themselves.  *ops and *st are set; free st with
 * ops->destroy. */
CRL_API int crl_loss_from_config(crl_host *host, const crl_config *cfg, const char *section, const crl_spec *obs_spec,
                                 const crl_spec *action_spec, uint64_t seed, const crl_loss_ops **ops, void **st,
                                 crl_error *err);

/* A loss over networks the caller built (TorchRL's DDPGLoss(actor, value)):
 * component `type` (ddpg, td3, sac, dqn, discrete_sac, ppo, a2c,
 * reinforce) built with create_from_modules over `modules` (see
 * crl_loss_modules in crl/loss_backend.h for what each loss takes and the
 * ownership: the modules are borrowed and trained in place).  kv: the
 * loss's options as "key=value" strings (NULL-terminated; may be NULL for
 * the defaults), e.g. "gamma=0.99"; errors name "argument N".  The loss
 * reads the batches of ops->forward as the config path does (a batch
 * without "next.terminated" uses "next.done") and writes TorchRL's output
 * keys.  *ops and *st are set; free st with ops->destroy.  Errors:
 * CRL_E_INVALID for a NULL argument or a struct_size too small,
 * CRL_E_NOT_FOUND for an unknown type, CRL_E_UNSUPPORTED for a loss that
 * builds its own networks only, CRL_E_CONFIG for a bad argument (unknown
 * key, value out of range, a network option the modules decide), and the
 * loss's own errors about the modules; each names "loss 'TYPE'".
 * Since ABI 1.2. */
CRL_API int crl_loss_from_modules(crl_host *host, const char *type, const char *const *kv,
                                  const crl_loss_modules *modules, uint64_t seed, const crl_loss_ops **ops,
                                  void **st, crl_error *err);

#ifdef __cplusplus
}
#endif
#endif
