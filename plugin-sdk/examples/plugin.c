/* example: a complete crl plugin built out of tree against an installed crl (see the Makefile beside it
 * and GUIDE.md).  It registers an env backend, a transform and a replay storage, and declares one option
 * of its own in [plugin.example].  walk-dqn.ini trains DQN on its env with all three. */
#include "example.h"

static const crl_option example_options[] = {
    { "verbose", CRL_OPT_BOOL, 0, "false", 0, 0, NULL, "log each component as it is registered" },
    CRL_OPTIONS_END
};

static int example_init(crl_host *host, const crl_opts *section, crl_error *err)
{
    static const crl_component *const components[] = {
        &example_walk_component, &example_penalty_component, &example_ring_component,
    };
    bool verbose;
    /* err may be NULL: carry the status in rc, never read it back from err */
    int rc = crl_opts_bool(section, "verbose", &verbose, err);
    for (size_t i = 0; !rc && i < sizeof components / sizeof components[0]; i++) {
        rc = crl_host_register(host, components[i], err);
        if (!rc && verbose)
            crl_host_log(host, CRL_LOG_INFO, "example: registered %s/%s", crl_kind_name(components[i]->kind),
                         components[i]->name);
    }
    return rc; /* on failure the host removes whatever init registered */
}

CRL_PLUGIN_DEFINE(example, "example", "1.0.0", "MIT", "the SDK's example: env backend, transform and storage",
                  example_options, example_init, NULL)
