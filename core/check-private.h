/* Internals of the validation before work (crl_experiment_check, trainer_check.c): the checks the
 * runtime's constructors share with it, so each rule is written once. */
#ifndef CRL_CHECK_PRIVATE_H
#define CRL_CHECK_PRIVATE_H

#include "crl-private.h"

#include <crl/collector.h>
#include <crl/env.h>
#include <crl/replay.h>

/* The [section] options of a collector stepping `env`, built from
 * [env_section]: keys, types and ranges, frames_per_batch given,
 * total_frames not 0, an env stepped synchronously (no async batch_size),
 * frames_per_batch a multiple of the envs stepping together.  What
 * crl_collector_from_config checks, without building its envs.
 * CRL_E_CONFIG naming FILE:LINE. */
CRL_INTERNAL int crl__collector_check_config(const crl_config *cfg, const char *section, const char *env_section,
                                             const crl_env *env, crl_error *err);

/* Training's rules on [collector] (opts of its table): sync sub-collectors
 * unless they run in other processes (remote: [distributed] backend = mpi).
 * *init_random (may be NULL) receives init_random_frames. */
CRL_INTERNAL int crl__trainer_check_collector(const crl_opts *ocoll, bool remote, int64_t *init_random, crl_error *err);
/* Set the collector's total_frames to `total` (-1: endless) and return the
 * one it had: the trainer's resume re-collects a checkpoint's frames in the
 * batches they were first collected in (a run's last batch is shorter when
 * its total_frames is no multiple of frames_per_batch). */
CRL_INTERNAL int64_t crl__collector_limit(crl_collector *c, int64_t total);
/* Sub-collector k's current TensorDict: what its policy reads at its next
 * step (the state a recurrent policy carries included).  Borrowed; NULL
 * before its first batch, past the last sub-collector and for remote
 * ones.  Only between batches of sync sub-collectors: the trainer's
 * checkpoint and resume (carry-private.h). */
CRL_INTERNAL crl_td *crl__collector_current(crl_collector *c, size_t k);
/* Training's rules on what loss `loss_type` learns from.  On-policy: no
 * init_random_frames (random actions carry no log-probabilities for it).
 * Off-policy: a replay buffer (rb NULL: the config has no [replay]
 * section) with a batch_size of at least 1 that the capacity can hold and
 * a sampler that never runs dry (no drop_last); with a recurrent [net.*]
 * section, [train] sequence_length (seq_len) slices from the slice sampler
 * (slice_len = seq_len, strict, by traj_key) that fit in each env's run of
 * run_len stored steps (0: unlimited), and no seq_len without one. */
CRL_INTERNAL int crl__trainer_check_loss(const crl_config *cfg, const char *loss_type, bool on_policy,
                                         int64_t init_random, int64_t seq_len, int64_t run_len, const crl_replay *rb,
                                         crl_error *err);
/* How many steps of each env a batch of frames_per_batch stores contiguously in a replay buffer, with envs
 * envs across all sub-collectors: frames_per_batch / envs, or 0 (no limit) for one env, whose batches
 * continue one another. */
CRL_INTERNAL int64_t crl__trainer_run_len(int64_t frames_per_batch, int64_t envs);

/* Validation builds envs to learn their specs but never steps them.  While
 * dry mode is on in this thread, a transform whose bind reaches its parent
 * (ObservationNorm's init_stats rolls the env out) is stopped at that call,
 * before the parent resets or steps, and the chain is built on without that
 * bind's work: the specs do not depend on it.  Workers that an executor
 * forks from this thread inherit the mode.  Nested calls are not counted:
 * set it on, build, set it off. */
CRL_INTERNAL void crl__tchain_set_dry(bool on);
CRL_INTERNAL bool crl__tchain_dry(void);

#endif
