/* crl envs: every env id offered by every registered env backend. */
#include "config.h"
#include "cli-private.h"
#include "examples-private.h"

#include <crl/env.h>
#include <crl/trainer.h>
#include <glib.h>
#include <stddef.h>
#include <string.h>

const crl_env_ops *crl__cli_env_ops(const crl_component *c)
{
    const crl_env_ops *ops = c ? c->ops : NULL;
    /* Ops structs only grow: members past struct_size are absent, and a
     * backend needs everything up to step. */
    if (!ops || ops->struct_size < offsetof(crl_env_ops, step) + sizeof ops->step)
        return NULL;
    if (!ops->list || !ops->make || !ops->bind || !ops->reset || !ops->step)
        return NULL;
    return ops;
}

/* The backends this source tree can build as plugins, for the message when one is not registered: which
 * plugin file brings it, whether this build made that file, and what building it needs. */
typedef struct {
    const char *backend, *plugin;
    bool built;
    const char *needs;
} known_backend;

static const known_backend known_backends[] = {
#ifdef CRL_HAVE_GYM
    { "gym", "gym", true, NULL },
#else
    { "gym", "gym", false,
      "it was built without Python: configure found no embedded CPython with numpy; install libpython3-dev and "
      "python3-numpy (./bootstrap.sh does) and configure again with --enable-gym" },
#endif
#ifdef CRL_HAVE_DM_CONTROL
    { "dm_control", "dm_control", true, NULL },
#else
    { "dm_control", "dm_control", false,
      "it was built without libmujoco: install libmujoco-dev (./bootstrap.sh does) and configure again with "
      "--enable-dm-control" },
#endif
#ifdef CRL_BUILTIN_CLASSIC
    { "classic", "classic", true, NULL },
#else
    { "classic", "classic", false,
      "it was configured with --disable-classic: install libcairo2-dev and configure again without it" },
#endif
};

/* Why `backend` is not registered and how to get it; CRL_EXIT_USAGE. */
static int backend_missing(const char *backend, const crl_error *lookup)
{
    for (size_t i = 0; i < sizeof known_backends / sizeof known_backends[0]; i++) {
        const known_backend *k = &known_backends[i];
        if (strcmp(k->backend, backend))
            continue;
        if (k->built)
            fprintf(stderr, "crl envs: env backend '%s' is not registered: its plugin '%s' (%s.so) was not loaded. "
                    "This build makes it; put its directory on CRL_PLUGIN_PATH (in the build tree: "
                    "BUILD/plugins/%s/.libs) or [plugins] path, or install it (make install), and leave "
                    "plugins.autoload on (or add plugins.load=%s)\n", backend, k->plugin, k->plugin, k->plugin,
                    k->plugin);
        else
            fprintf(stderr, "crl envs: env backend '%s' is not registered: it comes from the plugin '%s' (%s.so), "
                    "which this crl does not have because %s\n", backend, k->plugin, k->plugin, k->needs);
        return CRL_EXIT_USAGE;
    }
    crl__cli_print_error("envs", lookup);
    return CRL_EXIT_USAGE;
}

static void usage(FILE *f)
{
    fprintf(f,
            "Usage: crl envs [--backend NAME] [--json] [FILE.ini...] [section.key=value...]\n\n"
            "List every env id of every registered env backend (component kind 'env'),\n"
            "one 'backend/id' per line, sorted by backend then in the backend's order.\n"
            "Plugins are loaded as [plugins] says; the built-in backends are always there.\n\n"
            "  --backend NAME  only the ids of backend NAME (not registered: exit 2 naming the plugin\n"
            "                  that brings it and how to get it, or a close name)\n"
            "  --json          print {\"envs\":[{\"backend\":...,\"id\":...},...]}\n"
            "  -h, --help      print this help\n\n"
            "Exit status: 0 ok, 1 runtime failure, 2 bad usage or bad config.\n");
}

int crl__cmd_envs(int argc, char **argv)
{
    bool json = false;
    const char *backend = NULL;
    GPtrArray *rest = g_ptr_array_new();
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            usage(stdout);
            g_ptr_array_free(rest, TRUE);
            return CRL_EXIT_OK;
        } else if (!strcmp(a, "--json")) {
            json = true;
        } else if (!strcmp(a, "--backend") || !strncmp(a, "--backend=", 10)) {
            if (a[9] == '=') {
                backend = a + 10;
            } else if (i + 1 < argc) {
                backend = argv[++i];
            } else {
                fprintf(stderr, "crl envs: --backend needs a backend name (e.g. --backend classic)\n");
                g_ptr_array_free(rest, TRUE);
                return CRL_EXIT_USAGE;
            }
        } else if (!strcmp(a, "--")) {
            for (i++; i < argc; i++)
                g_ptr_array_add(rest, argv[i]);
        } else {
            g_ptr_array_add(rest, argv[i]);
        }
    }
    crl_cli_ctx ctx;
    crl_error err = { 0 };
    int rc = crl__cli_setup(&ctx, (int)rest->len, (char **)rest->pdata,
                            CRL_CLI_LOAD_PLUGINS | CRL_CLI_VALIDATE, &err);
    g_ptr_array_free(rest, TRUE);
    if (rc)
        return crl__cli_setup_failed("envs", &err);
    const crl_component *only = NULL;
    if (backend && !(only = crl_host_lookup(ctx.host, CRL_KIND_ENV, backend, &err))) {
        rc = backend_missing(backend, &err);
        crl__cli_teardown(&ctx);
        return rc;
    }
    size_t nb = crl_host_component_count(ctx.host, CRL_KIND_ENV);
    if (json)
        printf("{\"envs\":[");
    bool first = true;
    int status = CRL_EXIT_OK;
    for (size_t b = 0; b < nb; b++) {
        const crl_component *c = crl_host_component_at(ctx.host, CRL_KIND_ENV, b);
        if (only && strcmp(only->name, c->name))
            continue;
        const crl_env_ops *ops = crl__cli_env_ops(c);
        if (!ops) {
            const uint32_t *size = c->ops;
            fprintf(stderr, "crl envs: env/%s (plugin %s) is not a usable env backend: its ops (%u bytes) lack "
                    "list, make, bind, reset or step of crl_env_ops; skipped\n", c->name,
                    crl_host_component_owner(ctx.host, CRL_KIND_ENV, c->name), size ? (unsigned)*size : 0u);
            status = CRL_EXIT_RUNTIME;
            continue;
        }
        const char *const *ids = ops->list();
        /* A backend without a fixed list (gym: whatever gymnasium.make knows) still exists. */
        if (!ids || !*ids)
            fprintf(stderr, "crl envs: env/%s (plugin %s) lists no fixed ids; its make accepts or refuses each "
                    "env.id%s\n", c->name, crl_host_component_owner(ctx.host, CRL_KIND_ENV, c->name),
                    !strcmp(c->name, "gym") ? " (any id gymnasium.make or gym.make knows, e.g. env.backend=gym "
                                              "env.id=CartPole-v1)" : "");
        for (const char *const *id = ids; id && *id; id++) {
            if (json) {
                printf("%s{\"backend\":", first ? "" : ",");
                crl__cli_json_string(stdout, c->name);
                printf(",\"id\":");
                crl__cli_json_string(stdout, *id);
                printf("}");
            } else {
                printf("%s/%s\n", c->name, *id);
            }
            first = false;
        }
    }
    if (json)
        printf("]}\n");
    if (nb == 0) {
        fprintf(stderr, "crl envs: no env backend is registered: this crl was built without the classic backend "
                "and loaded no env plugin; load one with plugins.load=NAME (see 'crl plugins')\n");
        status = CRL_EXIT_RUNTIME;
    }
    crl__cli_teardown(&ctx);
    return status;
}

int crl__cli_env_setup(crl_cli_ctx *ctx, int nargs, char **args, crl_env **env, crl_error *err)
{
    *env = NULL;
    int rc = crl__cli_setup(ctx, nargs, args, CRL_CLI_LOAD_PLUGINS | CRL_CLI_VALIDATE, err);
    if (rc)
        return rc;
    if (!crl_config_has_section(ctx->cfg, "env")) {
        rc = crl_error_set(err, CRL_E_USAGE,
                           "no [env] section: give an experiment file with one (e.g. "
                           "%s/cartpole-random.ini) or overrides such as env.backend=classic "
                           "env.id=CartPole-v1 ('crl envs' lists the ids)", crl__examples_dir());
        crl__cli_teardown(ctx);
        return rc;
    }
    /* The whole experiment first, as crl config check and crl run check it. */
    if ((rc = crl_experiment_check(ctx->host, ctx->cfg, NULL, 0, err))) {
        crl__cli_teardown(ctx);
        return rc;
    }
    crl_error e;
    crl_error_clear(&e);
    if (!(*env = crl_env_from_config(ctx->host, ctx->cfg, "env", &e))) {
        crl__cli_teardown(ctx);
        return crl_error_pass(err, &e, CRL_E_INVALID);
    }
    return CRL_OK;
}
