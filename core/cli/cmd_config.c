/* `crl config check|show`: validate or print a layered configuration. */
#include "config.h"
#include "cli-private.h"

#include <crl/trainer.h>

#include <glib.h>
#include <string.h>

static void usage(FILE *f)
{
    fprintf(f,
            "Usage: crl config check FILE... [SECTION.KEY=VALUE...]\n"
            "       crl config show [--no-validate] [FILE...] [SECTION.KEY=VALUE...]\n\n"
            "check  Layer the system and user config, the FILEs in order and the overrides,\n"
            "       load the plugins [plugins] asks for, and validate every section, key and\n"
            "       value against what the host and the plugins declare; then check the\n"
            "       experiment as crl run, inspect and collect would build it, without\n"
            "       stepping any env: env id and backend options, transforms, collector,\n"
            "       replay buffer, loss networks over the env's specs, and the rules across\n"
            "       sections.  Prints 'FILE: ok' for each file when everything is valid.\n"
            "show   Print the resolved configuration as INI: every section, every declared\n"
            "       key with its value or default, and where each value came from.  With\n"
            "       --no-validate, undeclared keys are shown (marked) instead of rejected.\n\n"
            "Exit status: 0 ok, 1 runtime failure (a plugin failed to load), 2 bad usage\n"
            "or bad config (the message says FILE:LINE and how to fix it).\n");
}

static int fail(const crl_error *err)
{
    crl__cli_print_error("config", err);
    return crl__cli_exit_code(err);
}

static int cmd_check(int nargs, char **args)
{
    crl_cli_ctx ctx;
    crl_error err;
    crl_error_clear(&err);
    if (crl__cli_setup(&ctx, nargs, args, CRL_CLI_LOAD_PLUGINS | CRL_CLI_VALIDATE | CRL_CLI_REQUIRE_FILE, &err))
        return fail(&err);
    /* what crl run, inspect and collect check before they start (setup validated the schema) */
    if (crl_experiment_check(ctx.host, ctx.cfg, NULL, 0, &err)) {
        crl__cli_teardown(&ctx);
        return fail(&err);
    }
    for (char **f = ctx.files; *f; f++)
        printf("%s: ok\n", *f);
    crl__cli_teardown(&ctx);
    return CRL_EXIT_OK;
}

static int cmd_show(int nargs, char **args)
{
    bool validate = true;
    int first = 0;
    if (nargs > 0 && strcmp(args[0], "--no-validate") == 0) {
        validate = false;
        first = 1;
    }
    crl_cli_ctx ctx;
    crl_error err;
    crl_error_clear(&err);
    unsigned flags = CRL_CLI_LOAD_PLUGINS | (validate ? CRL_CLI_VALIDATE : 0u);
    if (crl__cli_setup(&ctx, nargs - first, args + first, flags, &err))
        return fail(&err);
    char *text = crl_config_show(ctx.cfg, ctx.schema, &err);
    int rc = CRL_EXIT_OK;
    if (!text) {
        rc = fail(&err);
    } else {
        fputs(text, stdout);
        crl_free(text);
    }
    crl__cli_teardown(&ctx);
    return rc;
}

int crl__cmd_config(int argc, char **argv)
{
    if (argc < 2) {
        usage(stderr);
        return CRL_EXIT_USAGE;
    }
    const char *sub = argv[1];
    if (!strcmp(sub, "--help") || !strcmp(sub, "-h") || !strcmp(sub, "help")) {
        usage(stdout);
        return CRL_EXIT_OK;
    }
    for (int i = 2; i < argc; i++) {
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            usage(stdout);
            return CRL_EXIT_OK;
        }
    }
    if (!strcmp(sub, "check"))
        return cmd_check(argc - 2, argv + 2);
    if (!strcmp(sub, "show"))
        return cmd_show(argc - 2, argv + 2);
    static const char *const subs[] = { "check", "show", NULL };
    const char *hint = crl_did_you_mean(sub, subs);
    fprintf(stderr, "crl config: unknown subcommand '%s'%s%s%s; run 'crl config --help'\n", sub,
            hint ? "; did you mean '" : "", hint ? hint : "", hint ? "'?" : "");
    return CRL_EXIT_USAGE;
}
