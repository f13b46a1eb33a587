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
            "       crl config show [--no-validate] [--describe] [FILE...] [SECTION.KEY=VALUE...]\n\n"
            "check  Layer the system and user config, the FILEs in order and the overrides,\n"
            "       load the plugins [plugins] asks for, and validate every section, key and\n"
            "       value against what the host and the plugins declare; then check the\n"
            "       experiment as crl run, inspect and collect would build it, without\n"
            "       stepping any env: env id and backend options, transforms, collector,\n"
            "       replay buffer, loss networks over the env's specs, and the rules across\n"
            "       sections.  Prints 'FILE: ok' for each file when everything is valid.\n"
            "show   Print the resolved configuration as INI: every section, every declared\n"
            "       key with its value or default, and where each value came from.  With\n"
            "       --no-validate, undeclared keys are shown (marked) instead of rejected.\n"
            "       --describe  each key's one-line description as a comment line (;;) above it\n"
            "       (the text of crl.ini(5), from the same option tables)\n\n"
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

/* The option that declares key in section (NULL: none, or an undeclared key). */
static const crl_option *declared(const crl_cli_ctx *ctx, const char *section, const char *key)
{
    size_t nt = 0;
    const crl_option *const *tables = crl_schema_tables(ctx->schema, ctx->cfg, section, &nt);
    for (size_t t = 0; tables && t < nt; t++)
        for (const crl_option *o = tables[t]; o->type != CRL_OPT_END; o++) {
            size_t len = strlen(o->name);
            if ((o->flags & CRL_OPT_PREFIX) ? !strncmp(key, o->name, len) && key[len] : !strcmp(key, o->name))
                return o;
        }
    return NULL;
}

/* crl config show's text with ";; DESCRIPTION" above each key line ("key = value  ; origin", or
 * "; key =  ; not set"). */
static void print_described(const crl_cli_ctx *ctx, const char *text)
{
    char **lines = g_strsplit(text, "\n", -1);
    char *section = NULL;
    for (char **l = lines; *l; l++) {
        const char *s = *l;
        if (s[0] == '[') {
            const char *end = strchr(s, ']');
            g_free(section);
            section = end ? g_strndup(s + 1, (gsize)(end - s - 1)) : NULL;
        } else if (section) {
            const char *k = g_str_has_prefix(s, "; ") ? s + 2 : s;
            const char *eq = strstr(k, " = ");
            if (eq && eq > k) {
                char *key = g_strndup(k, (gsize)(eq - k));
                const crl_option *o = strchr(key, ' ') ? NULL : declared(ctx, section, key);
                if (o && o->doc && *o->doc)
                    printf(";; %s\n", o->doc);
                g_free(key);
            }
        }
        fputs(s, stdout);
        if (l[1])
            fputc('\n', stdout);
    }
    g_free(section);
    g_strfreev(lines);
}

static int cmd_show(int nargs, char **args)
{
    bool validate = true, describe = false;
    int first = 0;
    for (; first < nargs; first++) {
        if (!strcmp(args[first], "--no-validate"))
            validate = false;
        else if (!strcmp(args[first], "--describe"))
            describe = true;
        else
            break;
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
        if (describe)
            print_described(&ctx, text);
        else
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
