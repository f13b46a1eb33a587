/* crl plugin SDK: the transform ABI (TorchRL's Transform, in C).  Since ABI 1.1.
 *
 * A transform is registered as kind CRL_KIND_TRANSFORM with a crl_transform_ops
 * and an options table.  By convention the table declares the key options
 * with the transform's TorchRL defaults: "in_keys", "out_keys" (CRL_OPT_LIST;
 * empty out_keys means "same as in_keys"), and for transforms that act on the
 * step input "in_keys_inv", "out_keys_inv".  Keys are dotted TensorDict keys.
 *
 * Life of a transform in an env's chain (a Compose):
 *   create(opts)                 once, from its [transform.NAME] section
 *   transform_specs(specs)       whenever the chain changes: rewrite the specs
 *                                seen after this transform (the input is what
 *                                the parent -- the env plus every transform
 *                                before this one -- produces)
 *   bind(ctx)                    after transform_specs, with the batch shape;
 *                                allocate per-env state here
 *   reset(ctx, td, mask)         after the parent reset envs (mask)
 *   inv(td)                      on the step input, in reverse chain order
 *   step(ctx, td, next)          after the parent stepped
 *   destroy()
 * Standalone (on a replay buffer's samples, or crl_transform_apply), only
 * create, transform_specs (when the caller asks for specs) and call run.
 *
 * A transform never keeps the TensorDicts or tensors it is given past the
 * call (take a reference if it must), never writes into a tensor it did not
 * produce except through crl_transform_output, and never calls exit/abort:
 * every failure is an error naming the transform, the key and the fix. */
#ifndef CRL_TRANSFORM_BACKEND_H
#define CRL_TRANSFORM_BACKEND_H

#include <crl/spec.h>
#include <crl/td.h>
#include <crl/rng.h>
#include <crl/options.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The spec set a transform rewrites.  Every member is a Composite with the
 * env's batch shape as the user sees it ([] for a single env, [num] for a
 * batch); state may be an empty Composite.  A transform edits them in place
 * (crl_spec_composite_set / _del) or replaces a member (unref the old one).
 * The host owns the references. */
typedef struct crl_transform_specs {
    uint32_t struct_size;      /* set by the host: sizeof(crl_transform_specs) it knows */
    int32_t batch_ndim;
    const int64_t *batch_shape;
    crl_spec *observation;     /* also holds transform-made entries such as "episode_reward" */
    crl_spec *action;
    crl_spec *reward;
    crl_spec *done;            /* "done", "terminated", "truncated" */
    crl_spec *state;
} crl_transform_specs;

/* Where a transform runs: its place in a chain, its parent, its batch.
 * Owned by the host, valid from bind until destroy. */
typedef struct crl_transform_ctx crl_transform_ctx;

/* Batch shape of the env the chain wraps ([] or [num]); *ndim receives its
 * length.  Borrowed. */
CRL_API const int64_t *crl_transform_ctx_batch(const crl_transform_ctx *ctx, int *ndim);
/* Number of envs (1 for a single env). */
CRL_API int64_t crl_transform_ctx_num(const crl_transform_ctx *ctx);
/* The specs this transform receives (the parent's output).  Borrowed. */
CRL_API const crl_transform_specs *crl_transform_ctx_parent_specs(const crl_transform_ctx *ctx);
/* "transform 'crop' (CenterCrop)" for messages.  Borrowed. */
CRL_API const char *crl_transform_ctx_name(const crl_transform_ctx *ctx);
/* A random stream for this transform, seeded from the env's seed chain
 * (crl_env_set_seed) and the transform's position.  Borrowed. */
CRL_API crl_rng *crl_transform_ctx_rng(crl_transform_ctx *ctx);
/* Step the parent (the env and the transforms before this one) with td's
 * "action" as the parent expects it; writes td's "next" (TorchRL's
 * parent._step, used by FrameSkipTransform).  With auto-reset off the
 * parent's done envs must not be stepped: CRL_E_INVALID names the env. */
CRL_API int crl_transform_ctx_parent_step(crl_transform_ctx *ctx, crl_td *td, crl_error *err);
/* Draw a random action from the parent's action spec into td's "action". */
CRL_API int crl_transform_ctx_parent_rand_action(crl_transform_ctx *ctx, crl_td *td, crl_error *err);
/* Reset the parent's envs in mask (NULL: all) into td, running the reset
 * hooks of the transforms before this one (NoopResetEnv uses step and this). */
CRL_API int crl_transform_ctx_parent_reset(crl_transform_ctx *ctx, crl_td *td, const bool *mask, crl_error *err);
/* Envs the parent reset inside the step being transformed (auto_reset =
 * next_step), or NULL when none was: per-env state must restart for them
 * (RewardSum, StepCounter, CatFrames).  Valid during step.  Borrowed. */
CRL_API const bool *crl_transform_ctx_step_resets(const crl_transform_ctx *ctx);

/* Since ABI 1.2.  Turn order, for a transform whose state is shared between
 * the workers of one env (VecNorm with shared statistics in
 * worker_transforms under executor = threads or processes), so that its
 * updates happen in env order, as the serial executor makes them, and not
 * in whatever order the workers get there: bitwise the same results on
 * every run and with every executor.
 *   crl_transform_ctx_use_turns: call it from bind; the executor then
 *     hands a turn from worker to worker (in env order) in every reset and
 *     step job, each worker passing it on when it has finished that job.
 *   crl_transform_ctx_wait_turn: call it before reading or updating the
 *     shared state; it returns once every worker before this one has
 *     finished the current job.  Several calls in one job wait once.
 * Both return at once where there is nothing to order: a chain outside an
 * executor (the env's own `transforms`, standalone use) or under the
 * inline and serial executors.  Workers run the rest of their job (the
 * backend's step, the other transforms) in parallel as before.  A worker
 * that dies or hangs releases the others (that one job's order is then
 * not kept; under on_worker_failure = restart its envs' episodes end). */
CRL_API void crl_transform_ctx_use_turns(crl_transform_ctx *ctx);
CRL_API void crl_transform_ctx_wait_turn(crl_transform_ctx *ctx);

/* Set the mask of the action leaf `key` in the specs seen outside the chain
 * (crl_spec_update_mask; NULL removes it), so random actions and the
 * outer action check honour it (ActionMask).  The mask has the outer batch
 * shape first.  CRL_E_NOT_FOUND for a key that is not an action leaf. */
CRL_API int crl_transform_ctx_update_action_mask(crl_transform_ctx *ctx, const char *key, const crl_tensor *mask,
                                                 crl_error *err);

typedef struct crl_transform_ops {
    uint32_t struct_size;      /* sizeof(crl_transform_ops) */
    uint32_t reserved;

    /* Make the transform from its validated options.  Sets *t.  Bad option
     * combinations are CRL_E_CONFIG naming the key (crl_opts_origin gives
     * FILE:LINE). */
    int (*create)(const crl_opts *opts, void **t, crl_error *err);

    /* Rewrite the specs seen after this transform.  An in_key missing from
     * the specs is CRL_E_NOT_FOUND naming the key and the available ones
     * (crl_transform_missing_key); a wrong dtype or shape is CRL_E_DTYPE /
     * CRL_E_SHAPE saying what is needed.  NULL: the specs pass unchanged. */
    int (*transform_specs)(void *t, crl_transform_specs *specs, crl_error *err);

    /* Called after transform_specs once the chain is complete.  NULL: no
     * per-env state. */
    int (*bind)(void *t, crl_transform_ctx *ctx, crl_error *err);

    /* The core of an observation transform (TorchRL's _call): read in_keys
     * at td's root, write out_keys there.  Used on the reset output, on a
     * step's "next", and standalone on any TensorDict (replay samples).  A
     * key that is absent is CRL_E_NOT_FOUND naming it and the keys present.
     * NULL for transforms that only act through reset/step/inv. */
    int (*call)(void *t, crl_td *td, crl_error *err);

    /* td holds the reset output; mask (NULL: all) the envs that were reset.
     * Only those envs' per-env state restarts.  NULL: call(td) (or nothing
     * when call is NULL). */
    int (*reset)(void *t, crl_transform_ctx *ctx, crl_td *td, const bool *mask, crl_error *err);

    /* td is the step input (root: action, previous observation and the
     * transform's own entries such as "episode_reward"), next is td's "next"
     * as the parent produced it.  NULL: call(next). */
    int (*step)(void *t, crl_transform_ctx *ctx, crl_td *td, crl_td *next, crl_error *err);

    /* Map the step input from the outside's view to the parent's (actions:
     * DoubleToFloat casts back, ActionScaling maps [-1, 1] to the bounds).
     * td is a shallow copy the host made: replace entries with new tensors
     * (crl_td_set), never write into the tensors found there -- they are the
     * caller's.  NULL: nothing to invert. */
    int (*inv)(void *t, crl_td *td, crl_error *err);

    /* Free everything create allocated.  NULL-safe on t. */
    void (*destroy)(void *t);

    /* Since ABI 1.2.  TorchRL's repr of the transform, one line as
     * print(env) shows it inside a Compose, e.g.
     * "CatTensors(in_keys=['orientations', 'velocity'], out_key=observation)".
     * Write it into buf as snprintf does (at most size bytes, NUL included;
     * buf may be NULL when size is 0) and return the length of the whole
     * repr without the NUL, or a negative value when it cannot be made (the
     * host then prints the default).  NULL: the host prints TorchRL's
     * default Transform repr, "Type(keys=[<in_keys>])", from the "in_keys"
     * option (keys=[] when the transform declares none). */
    int (*repr)(void *t, char *buf, size_t size);

    /* Since ABI 1.2.  What the transform learned from data (VecNorm's
     * running sums and count, ObservationNorm's loc and scale), so that
     * another instance made with the same options normalises exactly as
     * this one does: TorchRL's state_dict, and VecNorm's frozen_copy for an
     * evaluation env.  state sets new tensors into out (an empty
     * TensorDict of batch shape []; float64 for statistics; keys without
     * dots) and leaves the instance as it was.  load_state takes a
     * TensorDict a state call of the same transform wrote (values copied,
     * nothing borrowed); with freeze it then stops learning (VecNorm's
     * frozen = true), so the instance normalises with exactly that state
     * however much data it sees, and a shared instance's state is its own
     * from then on (others sharing it are not touched).  Errors:
     * CRL_E_NOT_FOUND for a missing key, CRL_E_SHAPE / CRL_E_DTYPE for
     * other sizes, naming the key; the instance is unchanged then.  NULL
     * (both): the transform learns nothing. */
    int (*state)(void *t, crl_td *out, crl_error *err);
    int (*load_state)(void *t, const crl_td *state, bool freeze, crl_error *err);
} crl_transform_ops;

/* The tensor to write out_key into: the one at `key` in td when it already
 * has this dtype and shape and is contiguous (so a loop allocates nothing),
 * else a new one set into td (replacing the entry).  Borrowed from td.  NULL
 * with err set on a bad key or allocation failure. */
CRL_API crl_tensor *crl_transform_output(crl_td *td, const char *key, crl_dtype dt, int ndim,
                                         const int64_t *shape, crl_error *err);
/* CRL_E_NOT_FOUND: "<who>: key 'k' is not in the <what>; available keys:
 * a, b, c" where the keys are comp's leaves (dotted).  Returns the code. */
CRL_API int crl_transform_missing_key(crl_error *err, const char *who, const char *key, const crl_spec *comp,
                                      const char *what);
/* The same for a TensorDict's leaves. */
CRL_API int crl_transform_missing_td_key(crl_error *err, const char *who, const char *key, const crl_td *td);
#ifdef __cplusplus
}
#endif
#endif
