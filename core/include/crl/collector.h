/* libcrl application API: data collectors (TorchRL's SyncDataCollector,
 * MultiSyncDataCollector and MultiaSyncDataCollector, in C).
 *
 * A collector steps an env (any backend, any executor) with a policy and
 * hands out batches of frames.  In INI:
 *   [env]
 *   backend = classic
 *   id = Pendulum-v1
 *   num_envs = 4
 *   [collector]
 *   frames_per_batch = 200     ; a multiple of num_envs (x num_collectors when sync)
 *   total_frames = 10000       ; -1: endless
 *   num_collectors = 2         ; > 1: a multi collector, one thread and env per sub-collector
 *   sync = true                ; false: MultiaSyncDataCollector
 * Batches have TorchRL's layout: batch [N, T] (N envs, T = frames_per_batch
 * / N steps; [T] for a single env), with the root keys of each step
 * ("observation", "action", "done", "terminated", "truncated", and whatever
 * the policy wrote), "next" (the step's outputs) and "collector.traj_ids"
 * (int64 [N, T]: a trajectory id that grows as episodes start, unique over
 * the whole run).  Sync multi collectors stack the sub-collectors' batches
 * into [num_collectors, N, T]; async ones hand out one sub-collector's
 * [N, T] at a time with "collector.worker" (int64 [N, T], its index).
 * With split_trajs = true a batch becomes [trajectories, longest] padded
 * with zeros, plus the bool "collector.mask" marking real frames.
 *
 * Sub-collector k builds its env from the env section and seeds it with the
 * seed chain continued after sub-collector k-1's envs, so a run is
 * reproducible for a given [env] seed. */
#ifndef CRL_COLLECTOR_H
#define CRL_COLLECTOR_H

#include <crl/env.h>
#include <crl/replay.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct crl_collector crl_collector;

/* The [collector] options (frames_per_batch, total_frames,
 * init_random_frames, max_frames_per_traj, num_collectors, sync,
 * split_trajs, reset_at_each_iter) with their defaults and docs.  Static. */
CRL_API const crl_option *crl_collector_options(void);

/* Build the collector `section` describes over the env `env_section`
 * describes.  policy writes "action" into the td it is given (NULL: random
 * actions from the action spec); it is called from the sub-collectors'
 * threads when num_collectors > 1 or sync = false, so it must be
 * thread-safe then.  user is passed to it.  host and cfg are borrowed and
 * must outlive the collector.  Errors: CRL_E_CONFIG (unknown key with a
 * "did you mean", frames_per_batch missing or not a multiple of the envs
 * stepping, total_frames = 0; each with FILE:LINE), the env's own errors,
 * CRL_E_RUNTIME when a thread cannot start.  New collector, free with
 * crl_collector_free. */
CRL_API crl_collector *crl_collector_from_config(crl_host *host, const crl_config *cfg, const char *section,
                                                 const char *env_section, crl_policy_fn policy, void *user,
                                                 crl_error *err);

/* The next batch (a new TensorDict, see above), or NULL: with err->code ==
 * CRL_OK when total_frames were handed out (or after shutdown), else the
 * error, which names the section, the sub-collector, the frame and what
 * failed (policy, step, reset, replay buffer).  After an error every later
 * call returns the same error.  With a replay buffer set, the batch is
 * also written to it (flattened to [frames]) before it is returned; a
 * buffer error is the collector's error (recorded even when err is NULL;
 * pass an err to tell the end from a failure). */
CRL_API crl_td *crl_collector_next(crl_collector *c, crl_error *err);

/* Write every batch into rb as well (NULL: stop).  rb is borrowed and must
 * outlive the collector or be unset first. */
CRL_API void crl_collector_set_replay(crl_collector *c, crl_replay *rb);

/* Call fn(user, k, batch, err) with each batch sub-collector k collected,
 * on the thread that collected it, before trajectory ids, stacking and
 * the replay buffer (NULL: none).  It may add keys; an error is the
 * collector's.  Set it before the first crl_collector_next. */
typedef int (*crl_collector_batch_fn)(void *user, size_t k, crl_td *batch, crl_error *err);
CRL_API void crl_collector_set_batch_fn(crl_collector *c, crl_collector_batch_fn fn, void *user);

/* Frames handed out so far (every frame of every batch returned). */
CRL_API int64_t crl_collector_frames(const crl_collector *c);
/* Sub-collectors (num_collectors), and sub-collector i's env (borrowed;
 * NULL out of range).  Do not step an env while its collector runs. */
CRL_API size_t crl_collector_num_envs(const crl_collector *c);
CRL_API crl_env *crl_collector_env(const crl_collector *c, size_t i);

/* Stop and join the sub-collectors' threads (each finishes the batch it is
 * collecting); later crl_collector_next calls return NULL with CRL_OK.
 * Idempotent; NULL-safe. */
CRL_API void crl_collector_shutdown(crl_collector *c);
/* Shut down and free, closing the envs.  NULL-safe. */
CRL_API void crl_collector_free(crl_collector *c);

/* ---- sub-collectors in other processes (crl run's mpi backend) ----------------------------
 * A collector whose sub-collectors run elsewhere: the process that trains
 * builds it with crl_collector_from_config_remote and a transport; each
 * other process builds its one sub-collector k with
 * crl_collector_sub_from_config (the env seeded exactly as sub-collector k
 * of the local multi collector) and answers requests with
 * crl_collector_collect.  The training side assigns trajectory ids,
 * stacks (sync) or tags with collector.worker (async), splits and fills
 * the replay buffer as the local multi collector does, so a sync remote
 * collector hands out bitwise the batches of the local one. */
typedef struct crl_collector_remote {
    uint32_t struct_size;          /* sizeof(crl_collector_remote) */
    /* Ask remote sub-collector k for a batch of T steps of its envs.
     * Returns CRL_OK or sets err. */
    int (*request)(void *user, size_t k, int64_t T, crl_error *err);
    /* Block until one requested batch is back: its sub-collector in *k,
     * the [batch..., T] TensorDict (a reference the collector takes) in
     * *out, and in *starts (allocated with g_malloc/crl's allocator; the
     * collector frees it with crl_free) num_envs x T flags, frame (i, t)
     * starts a trajectory -- what crl_collector_collect gave there.
     * Returns CRL_OK or sets err (a failed or silent process). */
    int (*wait)(void *user, size_t *k, crl_td **out, bool **starts, crl_error *err);
} crl_collector_remote;

/* A collector as crl_collector_from_config builds it, with every
 * sub-collector's rollout handed to `remote` (user passed to it).  Only
 * sub-collector 0's env is built here (its specs: crl_collector_env(c, 0));
 * it is never stepped.  Sync and async both; no threads.  Errors as
 * crl_collector_from_config, CRL_E_INVALID for incomplete ops; a
 * transport error is the collector's error (crl_collector_next).  New
 * collector, free with crl_collector_free. */
CRL_API crl_collector *crl_collector_from_config_remote(crl_host *host, const crl_config *cfg, const char *section,
                                                        const char *env_section, const crl_collector_remote *remote,
                                                        void *user, crl_error *err);

/* Sub-collector `index` alone of the collector [section] describes: its
 * env built from env_section and seeded where sub-collector `index`'s
 * seeds start in the seed chain.  Drive it with crl_collector_collect;
 * the policy runs on the calling thread.  Errors as
 * crl_collector_from_config, CRL_E_CONFIG when num_collectors has no
 * sub-collector `index`.  Free with crl_collector_free. */
CRL_API crl_collector *crl_collector_sub_from_config(crl_host *host, const crl_config *cfg, const char *section,
                                                     const char *env_section, size_t index, crl_policy_fn policy,
                                                     void *user, crl_error *err);

/* Step a crl_collector_sub_from_config collector T times: *out the new
 * [batch..., T] TensorDict (no trajectory ids: the training side assigns
 * them), *starts num_envs x T flags (free with crl_free).  On error both
 * are NULL and err names the sub-collector, frame and what failed;
 * CRL_E_INVALID for another kind of collector or T < 1. */
CRL_API int crl_collector_collect(crl_collector *c, int64_t T, crl_td **out, bool **starts, crl_error *err);

/* Episode returns across batches: frames are matched by
 * "collector.traj_ids" (skipping padding where a split batch's
 * "collector.mask" is false) and an episode completes at its frame whose
 * "next.done" is set.  New tally, free with crl_returns_free (NULL-safe). */
typedef struct crl_returns crl_returns;
CRL_API crl_returns *crl_returns_new(void);
CRL_API void crl_returns_free(crl_returns *r);
/* Add batch's frames in order; each episode that completes passes its
 * return (the sum of the first "next.reward" element of its frames) to
 * done(user, ret) (done may be NULL).  Returns how many completed; a batch
 * without traj_ids, next.reward or next.done adds nothing. */
CRL_API int64_t crl_returns_add(crl_returns *r, const crl_td *batch, void (*done)(void *user, double ret),
                                void *user);
/* crl_returns_add summing the reward at `key` (dotted, e.g.
 * "next.raw_reward") in place of "next.reward".  A batch without that key
 * adds nothing (and returns 0); a NULL key likewise.  Since ABI 1.2. */
CRL_API int64_t crl_returns_add_key(crl_returns *r, const crl_td *batch, const char *key,
                                    void (*done)(void *user, double ret), void *user);

#ifdef __cplusplus
}
#endif
#endif
