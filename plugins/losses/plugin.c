/* plugins/losses: the losses plugin (losses.so), registering loss/dqn and loss/ppo. */
#include "config.h"
#include "losses.h"

static const crl_component loss_components[] = {
    { sizeof(crl_component), CRL_KIND_LOSS, "dqn",
      "DQN (double DQN optional, L2 or smooth-L1, target network), epsilon-greedy exploration", ls_dqn_options,
      &ls_dqn_ops },
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
                  "losses that own their networks: DQN, PPO (with value estimators)", NULL, losses_init, NULL)
