/* crl plugin SDK: the loss ABI (TorchRL's LossModule, owning its networks).  Since ABI 1.2.
 *
 * A loss is registered as kind CRL_KIND_LOSS ("loss/dqn").  Because an
 * experiment is a config file, a loss builds its own networks from the
 * env's specs and its options (num_cells, activation, gamma, ...) and hands
 * the trainer what it needs:
 *   - a policy (`act`) the collector and the evaluation episodes call;
 *   - its parameter vectors and their gradients, one optimizer each;
 *   - `forward` on a batch: writes the loss terms, accumulates gradients;
 *   - `update` after each optimizer step (target networks);
 *   - save / load of everything it owns (networks, targets, schedules).
 *
 * Off-policy losses (DQN, DDPG, TD3, SAC) are given replay-buffer samples:
 * a TensorDict of batch [B] with "observation", "action", "next.reward",
 * "next.observation", "next.done", "next.terminated" (as collected; without
 * "next.terminated" the loss reads "next.done", as TorchRL does).
 * On-policy losses (flag CRL_LOSS_ON_POLICY: PPO, A2C, REINFORCE) are given
 * the collected batch [N, T] (or [T]) once through `prepare`, which writes
 * what the epochs need ("advantage", "value_target", "sample_log_prob"),
 * then flattened minibatches of it through `forward`.
 *
 * A loss is used by one thread at a time.  Every function reports errors
 * in err (naming the loss, the module, the key and both shapes) and never
 * exits or aborts. */
#ifndef CRL_LOSS_BACKEND_H
#define CRL_LOSS_BACKEND_H

#include <crl/actor.h>
#include <crl/options.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The loss learns from the data it collected with its current policy. */
#define CRL_LOSS_ON_POLICY 0x1u

/* The networks a user built, for a loss that trains them (TorchRL's
 * DDPGLoss(actor_network, value_network), DQNLoss(value_network), ...),
 * given to create_from_modules.  Set struct_size to sizeof and the members
 * the loss takes (the rest NULL):
 *   dqn            qvalue_actor (its module reads one observation key)
 *   ddpg, td3      det_actor, value: Q(s, a), a crl_tdmodule whose in_keys
 *                  are the actor's observation key then "action", one output
 *   sac            prob_actor (TanhNormal), value as for ddpg
 *   discrete_sac   prob_actor (Categorical), value: one output per action
 *                  over the actor's observation key
 *   ppo, a2c,      prob_actor, value: V(s), one output (its in_keys are
 *   reinforce      read under "next." for the next state's value)
 * The actors and modules are borrowed (keep them until the loss is
 * destroyed); the loss trains their networks in place, as TorchRL's loss
 * shares the module's parameters, and keeps target copies of its own.  Twin
 * critics (td3, sac, discrete_sac) are the value network and a copy of it
 * re-drawn from the seed (TorchRL's num_qvalue_nets = 2).  Exploration
 * (noise, epsilon, return_log_prob) stays the actor's: the loss's act calls
 * the actor as it is and explore_step leaves it alone. */
typedef struct crl_loss_modules {
    uint32_t struct_size;            /* sizeof(crl_loss_modules) */
    crl_det_actor *det_actor;
    crl_prob_actor *prob_actor;
    crl_qvalue_actor *qvalue_actor;
    crl_tdmodule *value;
} crl_loss_modules;

typedef struct crl_loss_ops {
    uint32_t struct_size;      /* sizeof(crl_loss_ops) */
    uint32_t flags;            /* CRL_LOSS_* */

    /* Build the loss and its networks.  observation_spec and action_spec
     * are the env's Composites (crl_env_full_observation_spec /
     * crl_env_full_action_spec, batch dims included); the loss reads the keys
     * its options name ("observation" by default) and "action".  seed
     * draws the initial parameters (same seed, bitwise-same networks).
     * Errors: CRL_E_INVALID / CRL_E_SHAPE naming the key when a spec does
     * not fit the loss (DQN needs a Categorical or OneHot action, SAC a
     * Bounded one, observations must be float32 vectors).  Sets *st. */
    int (*create)(const crl_opts *opts, const crl_spec *observation_spec, const crl_spec *action_spec,
                  uint64_t seed, void **st, crl_error *err);

    /* Free everything the loss owns.  NULL-safe on st. */
    void (*destroy)(void *st);

    /* The policy: write "action" (and what the actor writes besides) into
     * td, whose batch shape is the env's.  RANDOM explores (epsilon-greedy,
     * noise, sampling; rng required), MODE is the exploration-free policy
     * for evaluation.  No backward cache is touched. */
    int (*act)(void *st, crl_td *td, crl_exploration exploration, crl_rng *rng, crl_error *err);

    /* Advance the exploration schedule by `frames` collected frames
     * (epsilon annealing).  May be NULL. */
    void (*explore_step)(void *st, int64_t frames);

    /* Trained parameters: how many vectors, and vector i with its gradient
     * (borrowed, float32 contiguous, valid while the loss lives; the
     * optimizer takes its own references).  *name labels it ("qvalue",
     * "actor", "critic", "log_alpha"). */
    size_t (*num_params)(void *st);
    int (*param)(void *st, size_t i, const char **name, crl_tensor **params, crl_tensor **grads, crl_error *err);

    /* On-policy only (NULL otherwise): called once on each collected
     * batch before its epochs; computes values, advantages and targets
     * (no gradients) and writes them into batch. */
    int (*prepare)(void *st, crl_td *batch, crl_error *err);

    /* The loss of one batch: sets scalar float32 tensors "loss_*" in
     * `losses` (batch shape [], caller's; e.g. "loss" for DQN,
     * "loss_objective", "loss_critic", "loss_entropy" for PPO) and, where
     * it exists, "td_error" [B] into batch.  What TorchRL's loss outputs
     * besides goes into `losses` too: DDPG's "td_error", "pred_value",
     * "target_value" [B] and "pred_value_max", "target_value_max"; TD3's
     * "pred_value" (both critics), "state_action_value_actor",
     * "next_state_value", "target_value" (batch means).  Only the "loss*" entries are summed into the
     * objective.  Adds the gradient of the sum of the loss_* terms into the
     * parameter gradients (the caller zeroes
     * them before).  A loss or gradient that is not finite is reported
     * with CRL_E_RUNTIME naming the term; nothing else is changed then. */
    int (*forward)(void *st, crl_td *batch, crl_td *losses, crl_error *err);

    /* After each optimizer step: target-network updates (soft with tau or
     * hard every N steps) and step counters.  May be NULL. */
    int (*update)(void *st, crl_error *err);

    /* Everything the loss owns (networks, target networks, schedules,
     * counters) as checkpoint sections "<prefix>/...", and back.  load
     * validates every section (CRL_E_CORRUPT naming it) and changes
     * nothing on error. */
    int (*save)(void *st, crl_ckpt_writer *w, const char *prefix, crl_error *err);
    int (*load)(void *st, const crl_ckpt_reader *r, const char *prefix, crl_error *err);

    /* Whether parameter vector i is stepped after this forward.  The
     * trainer gives every vector its own optimizer (TorchRL's examples:
     * actor, critic and alpha optimizers) and steps only the active ones:
     * TD3's delayed policy updates.  May be NULL: always. */
    bool (*param_active)(void *st, size_t i);

    /* Build the loss over the user's networks instead of its own
     * (crl_loss_modules above; opts as for create, whose network options
     * -- in_key, num_cells, activation, and the exploration ones -- are
     * refused with CRL_E_CONFIG when set, since the modules decide them).
     * seed draws what the loss creates (a twin critic).  Errors:
     * CRL_E_INVALID naming the member that is missing or of the wrong kind,
     * CRL_E_SHAPE / CRL_E_INVALID naming the module, its keys and sizes when
     * they do not fit together.  Sets *st.  May be NULL (the loss only
     * builds its own networks).  Since ABI 1.2 (struct_size tells). */
    int (*create_from_modules)(const crl_opts *opts, const crl_loss_modules *modules, uint64_t seed, void **st,
                               crl_error *err);
} crl_loss_ops;

#ifdef __cplusplus
}
#endif
#endif
