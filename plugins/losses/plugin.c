/* plugins/losses: the losses plugin (losses.so), registering loss/dqn, ppo, a2c, reinforce, ddpg, td3, sac and discrete_sac. */
#include "config.h"
#include "losses.h"

static const crl_component loss_components[] = {
    { sizeof(crl_component), CRL_KIND_LOSS, "dqn",
      "DQN (double DQN optional, L2 or smooth-L1, target network), epsilon-greedy exploration", ls_dqn_options,
      &ls_dqn_ops },
    { sizeof(crl_component), CRL_KIND_LOSS, "ppo",
      "PPO (clipped or adaptive KL penalty) with GAE / TD estimators; Categorical or TanhNormal actor", ls_ppo_options,
      &ls_ppo_ops },
    { sizeof(crl_component), CRL_KIND_LOSS, "a2c", "A2C: advantage actor-critic with an entropy bonus",
      ls_a2c_options, &ls_a2c_ops },
    { sizeof(crl_component), CRL_KIND_LOSS, "reinforce",
      "REINFORCE with a learned baseline (discounted return minus the critic's value)", ls_reinforce_options,
      &ls_reinforce_ops },
    { sizeof(crl_component), CRL_KIND_LOSS, "ddpg",
      "DDPG: deterministic actor, one critic, target networks, Gaussian exploration", ls_ddpg_options, &ls_ddpg_ops },
    { sizeof(crl_component), CRL_KIND_LOSS, "td3",
      "TD3: twin critics, delayed policy updates, target policy smoothing", ls_td3_options, &ls_td3_ops },
    { sizeof(crl_component), CRL_KIND_LOSS, "sac",
      "SAC (continuous): TanhNormal actor, twin critics, learned entropy coefficient", ls_sac_options, &ls_sac_ops },
    { sizeof(crl_component), CRL_KIND_LOSS, "discrete_sac",
      "discrete SAC: Categorical actor, twin Q-networks over the actions, learned entropy coefficient",
      ls_dsac_options, &ls_dsac_ops },
};

static int losses_init(crl_host *host, const crl_opts *section, crl_error *err)
{
    (void)section;
    for (size_t i = 0; i < sizeof loss_components / sizeof loss_components[0]; i++) {
        int rc = crl_host_register(host, &loss_components[i], err);
        if (rc)
            return rc;
    }
    return CRL_OK;
}

CRL_PLUGIN_DEFINE(losses, "losses", PACKAGE_VERSION, "MIT",
                  "losses that own their networks: DQN, PPO, A2C, REINFORCE, DDPG, TD3, SAC, discrete SAC", NULL, losses_init, NULL)
