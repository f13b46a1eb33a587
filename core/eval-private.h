/* Evaluation episodes, shared by the trainer (crl_trainer_evaluate_ex) and a loaded policy
 * (crl_policy_evaluate), so both seed and score them the same way. */
#ifndef CRL_EVAL_PRIVATE_H
#define CRL_EVAL_PRIVATE_H

#include "crl-private.h"

#include <crl/trainer.h>

/* The key the untransformed reward has in the trainer's batches and envs (the copy
 * RenameTransform makes first in a chain). */
#define CRL__RAW_REWARD "raw_reward"

/* The seed of the evaluation after `frames` frames of a run seeded with `seed` ([train] seed). */
CRL_INTERNAL uint64_t crl__eval_seed(uint64_t seed, int64_t frames);

/* Seed env with `seed`, tell hook (may have no event) BEGIN with frames, run rollouts of at most max_steps steps with fn until `episodes` episodes
 * finished (or were cut at max_steps) and fill *out (crl_eval_result: per-episode returns of
 * "next.reward" and, when raw, of the untransformed reward: "next.raw_reward" for an env with
 * transforms, "next.reward" without).  Errors prefixed "evaluation: ". */
CRL_INTERNAL int crl__eval_episodes(crl_env *env, crl_policy_fn fn, void *user, int64_t max_steps, uint64_t seed,
                                    int64_t episodes, bool raw, const crl_eval_hook *hook, int64_t frames,
                                    crl_eval_result *out, crl_error *err);
/* *dst = *hook checked (NULL clears it). */
CRL_INTERNAL int crl__eval_hook_set(crl_eval_hook *dst, const crl_eval_hook *hook, crl_error *err);

/* Insert a copy of the reward at CRL__RAW_REWARD first in env's chain when it has transforms; *kept says
 * whether it did (false without transforms, or without the transforms plugin's RenameTransform). */
CRL_INTERNAL int crl__keep_raw_reward(crl_host *host, crl_env *env, bool *kept, crl_error *err);

#endif
