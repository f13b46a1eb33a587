/* libcrl application API: data collectors (TorchRL's SyncDataCollector,
 * MultiSyncDataCollector and MultiaSyncDataCollector, in C).
 *
 * A collector runs a policy in one or more envs and hands out batches of
 * frames_per_batch frames until total_frames frames were collected.  A
 * batch from one env of batch [N] is a TensorDict of batch [N, T] with
 * T = frames_per_batch / N: TorchRL's rollout layout (root observation,
 * action, done flags, "next" with the step output) plus
 * "collector.traj_ids" int64 [N, T]: an id per trajectory, unique across
 * every env and sub-collector of the collector, a new one each time an env
 * starts an episode.  With split_trajs the batch is instead
 * [number of trajectories, max length] padded with zeros, plus a bool
 * "collector.mask" telling real frames from padding.
 * Multi collectors run num_collectors sub-collectors, each over its own env
 * (built from the same [env] section, seeded from the seed chain), on
 * threads: sync stacks one batch of each into [num_collectors, N, T]
 * (frames_per_batch in total); async returns each sub-collector's batch of
 * frames_per_batch as soon as it is ready, with "collector.worker" saying
 * whose it is.
 * In INI:
 *   [collector]
 *   frames_per_batch = 200
 *   total_frames = 100000
 *   init_random_frames = 1000
 *   max_frames_per_traj = 0
 *   num_collectors = 1        ; > 1: MultiSync / MultiAsync
 *   sync = true
 *   split_trajs = false
 *   reset_at_each_iter = false
 * The env is reset when the collector starts and envs that end are reset
 * as the env's auto_reset mode says (with a _reset mask when it is off);
 * max_frames_per_traj > 0 truncates longer trajectories (truncated and done
 * set, the env reset). */
#ifndef CRL_COLLECTOR_H
#define CRL_COLLECTOR_H

#include <crl/env.h>
#include <crl/replay.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct crl_collector crl_collector;

/* The [collector] options. */
CRL_API const crl_option *crl_collector_options(void);

/* Build a collector from [section] (usually "collector") over envs built
 * from [env_section].  policy may be NULL (random actions); it is called
 * with the env that is stepping (one of the sub-collectors' in multi mode:
 * the callback must be thread-safe when num_collectors > 1) and the td to
 * write "action" into.  Frames before init_random_frames always use random
 * actions.  The host and config are borrowed and must outlive the
 * collector.  New collector; free with crl_collector_free (which joins its
 * threads and frees its envs). */
CRL_API crl_collector *crl_collector_from_config(crl_host *host, const crl_config *cfg, const char *section,
                                                 const char *env_section, crl_policy_fn policy, void *user,
                                                 crl_error *err);
CRL_API void crl_collector_free(crl_collector *c);

/* The next batch (new TensorDict), or NULL when total_frames were handed
 * out (err->code CRL_OK) or on failure (err set).  A batch may be shorter
 * than frames_per_batch only when total_frames is not a multiple of it. */
CRL_API crl_td *crl_collector_next(crl_collector *c, crl_error *err);

/* Also extend rb with every batch (flattened to [frames]) before returning
 * it.  rb is borrowed and must outlive the collector; NULL stops. */
CRL_API void crl_collector_set_replay(crl_collector *c, crl_replay *rb);

/* Frames handed out so far, and the envs (sub-collector i's, borrowed). */
CRL_API int64_t crl_collector_frames(const crl_collector *c);
CRL_API size_t crl_collector_num_envs(const crl_collector *c);
CRL_API crl_env *crl_collector_env(const crl_collector *c, size_t i);

/* Stop the sub-collectors' threads now (also done by free); next then
 * returns NULL with CRL_OK. */
CRL_API void crl_collector_shutdown(crl_collector *c);

#ifdef __cplusplus
}
#endif
#endif
