/* crl's config schema, assembled from the pieces crl uses: the host's own sections, the option tables the
 * runtime's parts declare, and what the plugins bring.  The library below knows no such list. */
#include "cli-schema.h"

#include <crl/collector.h>
#include <crl/env.h>
#include <crl/replay.h>
#include <crl/trainer.h>
#include <crl/transform.h>

/* One section: its part's table and, when a key names a registered component, that key and its kind. */
static const struct {
    const char *section;
    const crl_option *(*table)(void);
    const char *selector;
    crl_kind kind;
    const char *doc;
} sections[] = {
    { "plugins", crl_host_plugins_options, NULL, 0,
      "where plugins are found and which are loaded (see 'crl plugins')" },
    { "log", crl_host_log_options, NULL, 0, "logging of the host and plugins" },
    { "env", crl_env_options, "backend", CRL_KIND_ENV,
      "the environment: common options, plus those of the backend its 'backend' key names" },
    { "transform.*", crl_transform_section_options, "type", CRL_KIND_TRANSFORM,
      "a transform named in [env] transforms: 'type' plus the options of that transform" },
    { "replay", crl_replay_options, "storage", CRL_KIND_STORAGE,
      "the replay buffer: sampler and writer, plus the options of the storage 'storage' names" },
    { "collector", crl_collector_options, NULL, 0,
      "the data collector: frames per batch, total frames, sub-collectors (sync or async)" },
    { "loss", crl_loss_section_options, "type", CRL_KIND_LOSS,
      "the loss of crl run: 'type' plus the options of that loss component" },
    { "net.*", crl_net_section_options, NULL, 0,
      "a network a loss builds ([net.q], [net.actor], [net.critic]) or an encoder another one names: "
      "type (mlp, conv) and its options" },
    { "optim", crl_optim_section_options, NULL, 0, "the optimizer of crl run" },
    { "train", crl_train_options, NULL, 0,
      "the training loop of crl run: updates, evaluation, logging, checkpoints" },
    { "distributed", crl_distributed_options, NULL, 0,
      "crl run across processes: the backend (mpi: mpirun -np K crl run), weight syncs, timeout" },
};

crl_schema *crl__cli_schema_new(crl_host *host, crl_error *err)
{
    crl_schema *s = crl_schema_new(err);
    if (!s)
        return NULL;
    int rc = CRL_OK;
    for (size_t i = 0; !rc && i < sizeof sections / sizeof sections[0]; i++) {
        rc = crl_schema_add(s, sections[i].section, sections[i].table(), sections[i].doc, err);
        if (!rc && sections[i].selector)
            rc = crl_schema_add_selector(s, sections[i].section, sections[i].selector, sections[i].kind, err);
    }
    if (!rc)
        rc = crl_host_schema_add_plugins(host, s, err);
    if (rc) {
        crl_schema_free(s);
        return NULL;
    }
    return s;
}

bool crl__cli_schema_section(size_t i, const char **section, const crl_option **table, const char **selector,
                             crl_kind *kind, const char **doc)
{
    if (i >= sizeof sections / sizeof sections[0])
        return false;
    *section = sections[i].section;
    *table = sections[i].table();
    *selector = sections[i].selector;
    *kind = sections[i].kind;
    *doc = sections[i].doc;
    return true;
}
