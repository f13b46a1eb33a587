/* Registers the state group of the transforms plugin (tf_register_state): normalisation, rewards, counters, frames. */
#include "config.h"
#include "state_common.h"

int tf_register_state(crl_host *host, crl_error *err)
{
    int rc;
    tf_state_set_host(host);
    static const struct {
        const char *name, *doc;
        const crl_option *options;
        const crl_transform_ops *ops;
    } all[] = {
        { "CatFrames", "stack the last N frames of each env along a dim (padding same or constant)",
          st_catframes_options, &st_catframes_ops },
        { "ObservationNorm", "obs * scale + loc, or (obs - loc) / scale; init_stats from a random rollout",
          st_obsnorm_options, &st_obsnorm_ops },
        { "VecNorm", "running mean/variance normalisation with decay, shareable between processes",
          st_vecnorm_options, &st_vecnorm_ops },
        { "RewardScaling", "reward * scale + loc, or (reward - loc) / scale", st_rscale_options, &st_rscale_ops },
        { "RewardClipping", "clamp the reward to [clamp_min, clamp_max]", st_rclip_options, &st_rclip_ops },
        { "BinarizeReward", "1 where the reward is > 0, else 0 (int64)", st_binarize_options, &st_binarize_ops },
        { "SignTransform", "replace values by their sign", st_sign_options, &st_sign_ops },
        { "RewardSum", "episode_reward: the sum of rewards since each env's reset", st_rsum_options, &st_rsum_ops },
        { "StepCounter", "step_count since each env's reset; max_steps sets truncated and done",
          st_stepcount_options, &st_stepcount_ops },
        { "InitTracker", "is_init: true on the reset step of each env only", st_inittracker_options,
          &st_inittracker_ops },
        { "TrajCounter", "traj_count: a new id for every trajectory started, across envs", st_trajcount_options,
          &st_trajcount_ops },
        { "TimeMaxPool", "elementwise max over each env's last T observations", st_timemaxpool_options,
          &st_timemaxpool_ops },
    };
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        if ((rc = tf_register(host, all[i].name, all[i].doc, all[i].options, all[i].ops, err)))
            return rc;
    return CRL_OK;
}
