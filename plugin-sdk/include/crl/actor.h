/* crl plugin SDK: actors (TorchRL's QValueActor + EGreedyModule, deterministic actors with Gaussian or
 * Ornstein-Uhlenbeck noise, ProbabilisticActor with Categorical or TanhNormal).
 *
 * An actor wraps a network reading `in_keys` of a TensorDict and writes
 * "action" (and what TorchRL writes besides).  `act` is for collecting: no
 * backward cache, exploration applied.  Losses use `forward` / `evaluate`
 * and `backward`, or the underlying network directly.
 *
 * The action spec is the env's "action" leaf (what crl_env_action_spec
 * returns for a single-action env; batch dims included): Categorical gives integer actions with the td's batch
 * shape, OneHot gives [batch..., n], Bounded / Unbounded give [batch..., d]
 * floats with the bounds of the spec's last dim (those of its first row). */
#ifndef CRL_ACTOR_H
#define CRL_ACTOR_H

#include <crl/nn.h>
#include <crl/spec.h>

#ifdef __cplusplus
extern "C" {
#endif

/* TorchRL's exploration types: RANDOM samples (and adds exploration noise),
 * MODE takes the most likely action (TorchRL's DETERMINISTIC), MEAN the
 * distribution's mean. */
typedef enum crl_exploration {
    CRL_EXPLORE_RANDOM = 0,
    CRL_EXPLORE_MODE = 1,
    CRL_EXPLORE_MEAN = 2
} crl_exploration;

/* Parse "random", "mode", "mean" ("deterministic" is "mode"). */
CRL_API int crl_exploration_from_name(const char *name, crl_exploration *out, crl_error *err);

/* ---- Q-value actor ----------------------------------------------------------- */

typedef struct crl_qvalue_actor crl_qvalue_actor;

/* net maps in_keys to one value per action (out_features = the spec's n).
 * The action spec must be Categorical or OneHot.  Takes a reference to net.
 * New actor (crl_qvalue_actor_free) or NULL: CRL_E_INVALID for another
 * spec kind, CRL_E_SHAPE when out_features differs from n. */
CRL_API crl_qvalue_actor *crl_qvalue_actor_new(crl_mlp *net, const char *const *in_keys, const crl_spec *action_spec,
                                               crl_error *err);
/* Free the actor, dropping its network reference (NULL-safe); the same
 * for crl_det_actor_free and crl_prob_actor_free. */
CRL_API void crl_qvalue_actor_free(crl_qvalue_actor *a);
/* The TensorDict module in_keys -> "action_value" (borrowed), for a loss. */
CRL_API crl_tdmodule *crl_qvalue_actor_module_get(crl_qvalue_actor *a);
/* EGreedyModule: epsilon starts at eps_init and falls linearly to eps_end
 * over annealing_num_steps frames of crl_qvalue_actor_step.  Without it
 * the actor is greedy.  CRL_E_RANGE for eps outside [0, 1] or steps < 1. */
CRL_API int crl_qvalue_actor_set_egreedy(crl_qvalue_actor *a, double eps_init, double eps_end,
                                         int64_t annealing_num_steps, crl_error *err);
/* Advance the schedule by `frames` collected frames (EGreedyModule.step);
 * a no-op without one.  epsilon: the current value (0 without one). */
CRL_API void crl_qvalue_actor_step(crl_qvalue_actor *a, int64_t frames);
CRL_API double crl_qvalue_actor_epsilon(const crl_qvalue_actor *a);
/* Writes "action_value" [batch..., n], "chosen_action_value" [batch..., 1]
 * (the greedy value) and "action".  With CRL_EXPLORE_RANDOM each row takes
 * a uniform random action with probability epsilon (rng required then). */
CRL_API int crl_qvalue_actor_act(crl_qvalue_actor *a, crl_td *td, crl_exploration exploration, crl_rng *rng,
                                 crl_error *err);

/* ---- deterministic actor (DDPG, TD3) ---------------------------------------- */

typedef struct crl_det_actor crl_det_actor;

/* net maps in_keys to d values.  With a Bounded spec the action is
 * c + h * tanh(output) (TorchRL's TanhModule: within the bounds); with an
 * Unbounded one the output itself.  Takes a reference to net. */
CRL_API crl_det_actor *crl_det_actor_new(crl_mlp *net, const char *const *in_keys, const crl_spec *action_spec,
                                         crl_error *err);
CRL_API void crl_det_actor_free(crl_det_actor *a);
/* The network, borrowed (valid while a lives). */
CRL_API crl_mlp *crl_det_actor_net_get(crl_det_actor *a);
/* The TensorDict module in_keys -> raw network output, borrowed (valid
 * while a lives; NULL for NULL).  Since ABI 1.2. */
CRL_API crl_tdmodule *crl_det_actor_module_get(crl_det_actor *a);
/* The action dims d; *low and *high (either may be NULL) receive the [d]
 * bounds of a Bounded spec (borrowed, valid while a lives) or NULL for an
 * Unbounded one.  a must not be NULL. */
CRL_API int64_t crl_det_actor_bounds(const crl_det_actor *a, const float **low, const float **high);
/* A noise-free actor with a's in_keys and action space over another
 * network of the same sizes (a loss's target actor: TorchRL's
 * delay_actor).  Takes a reference to net.  New actor or NULL:
 * CRL_E_SHAPE when net's sizes differ from a's network. */
CRL_API crl_det_actor *crl_det_actor_copy_new(crl_det_actor *a, crl_mlp *net, crl_error *err);
/* Additive Gaussian noise (AdditiveGaussianModule): action +
 * sigma * N(mean, std), sigma annealed linearly from sigma_init to
 * sigma_end over annealing_num_steps frames, then clamped to the bounds. */
CRL_API int crl_det_actor_set_gaussian(crl_det_actor *a, double sigma_init, double sigma_end,
                                       int64_t annealing_num_steps, double mean, double std, crl_error *err);
/* Ornstein-Uhlenbeck noise (OrnsteinUhlenbeckProcessModule): per row
 * x <- x + theta (mu - x) dt + sigma sqrt(dt) N(0, 1), action + eps * x,
 * eps annealed from eps_init to eps_end over annealing_num_steps frames.
 * A row's x restarts at 0 where the td's "is_init" is true. */
CRL_API int crl_det_actor_set_ou(crl_det_actor *a, double theta, double mu, double sigma, double dt,
                                 double eps_init, double eps_end, int64_t annealing_num_steps, crl_error *err);
/* Advance the noise scale's schedule by `frames` frames. */
CRL_API void crl_det_actor_step(crl_det_actor *a, int64_t frames);
/* Current noise scale (sigma or eps); 0 without noise. */
CRL_API double crl_det_actor_noise_scale(const crl_det_actor *a);
/* Writes "action"; noise only with CRL_EXPLORE_RANDOM (rng required then). */
CRL_API int crl_det_actor_act(crl_det_actor *a, crl_td *td, crl_exploration exploration, crl_rng *rng,
                              crl_error *err);
/* Noise-free "action" with the backward cache, and its backward:
 * grad_action has the action's shape; dLoss/d(in_keys) goes to grads_in
 * when not NULL (see crl_tdmodule_backward). */
CRL_API int crl_det_actor_forward(crl_det_actor *a, crl_td *td, crl_error *err);
CRL_API int crl_det_actor_backward(crl_det_actor *a, const crl_tensor *grad_action, crl_td *grads_in,
                                   crl_error *err);

/* ---- probabilistic actor (SAC, PPO, A2C, REINFORCE) -------------------------- */

typedef enum crl_dist_kind {
    CRL_DIST_CATEGORICAL = 0,   /* net output: n logits; writes "logits" */
    CRL_DIST_TANH_NORMAL = 1    /* net output: 2d, NormalParamExtractor; writes "loc", "scale" */
} crl_dist_kind;

typedef struct crl_prob_actor crl_prob_actor;

/* Categorical needs a Categorical or OneHot spec, TanhNormal a Bounded
 * (bounds of the squashing) or Unbounded (-1, 1) spec.  Takes a reference
 * to net. */
CRL_API crl_prob_actor *crl_prob_actor_new(crl_mlp *net, const char *const *in_keys, crl_dist_kind kind,
                                           const crl_spec *action_spec, crl_error *err);
CRL_API void crl_prob_actor_free(crl_prob_actor *a);
/* The network, borrowed (valid while a lives). */
CRL_API crl_mlp *crl_prob_actor_net_get(crl_prob_actor *a);
/* TorchRL's return_log_prob: whether act / forward write
 * "sample_log_prob" [batch...] into the td (off by default, as TorchRL's;
 * PPO needs it in the batches it is given).  The log-probs of the last
 * call are in crl_prob_actor_log_prob_get either way.  NULL-safe; never
 * fails.  Since ABI 1.2. */
CRL_API void crl_prob_actor_set_return_log_prob(crl_prob_actor *a, bool return_log_prob);
/* The current setting (false for NULL). */
CRL_API bool crl_prob_actor_return_log_prob(const crl_prob_actor *a);
/* The TensorDict module in_keys -> "logits" (Categorical) or "loc"
 * (TanhNormal), borrowed (valid while a lives; NULL for NULL): its in_keys
 * tell a loss which keys the actor reads. */
CRL_API crl_tdmodule *crl_prob_actor_module_get(crl_prob_actor *a);
/* The distribution the actor was built with.  a must not be NULL. */
CRL_API crl_dist_kind crl_prob_actor_kind(const crl_prob_actor *a);
/* Writes the distribution's parameters, "action" (RANDOM: a sample, the
 * reparameterised one for TanhNormal; MODE: the mode; MEAN: TanhNormal's
 * 1000-draw mean, CRL_E_UNSUPPORTED for Categorical, whose mean is not an
 * action) and, when return_log_prob is set, "sample_log_prob" [batch...]
 * (the log-prob of that action, summed over the action dims, as TorchRL's
 * ProbabilisticActor with return_log_prob=True).  rng is needed for
 * RANDOM and MEAN. */
CRL_API int crl_prob_actor_act(crl_prob_actor *a, crl_td *td, crl_exploration exploration, crl_rng *rng,
                               crl_error *err);
/* The same with the backward cache, and the entropy: exact for
 * Categorical; for TanhNormal (no closed form) -log_prob of one
 * reparameterised sample (the action's own with RANDOM, an extra draw
 * otherwise), as TorchRL's losses estimate it. */
CRL_API int crl_prob_actor_forward(crl_prob_actor *a, crl_td *td, crl_exploration exploration, crl_rng *rng,
                                   crl_error *err);
/* With the backward cache: the log-prob of the td's existing "action" and
 * the entropy (rng for TanhNormal's estimate), for PPO / A2C / REINFORCE.
 * Writes the parameters but not "action". */
CRL_API int crl_prob_actor_evaluate(crl_prob_actor *a, crl_td *td, crl_rng *rng, crl_error *err);
/* [rows] log-probs and entropies of the last forward / evaluate, borrowed
 * (rows = the td's batch dims flattened). */
CRL_API crl_tensor *crl_prob_actor_log_prob_get(crl_prob_actor *a);
CRL_API crl_tensor *crl_prob_actor_entropy_get(crl_prob_actor *a);
/* Backward of the last forward / evaluate.  Each gradient may be NULL:
 * grad_action (the action's shape; TanhNormal after a RANDOM forward only,
 * through the reparameterised sample), grad_log_prob and grad_entropy
 * ([rows] or the td's batch shape).  CRL_E_INVALID names what cannot be
 * differentiated. */
CRL_API int crl_prob_actor_backward(crl_prob_actor *a, const crl_tensor *grad_action, const crl_tensor *grad_log_prob,
                                    const crl_tensor *grad_entropy, crl_td *grads_in, crl_error *err);

#ifdef __cplusplus
}
#endif
#endif
