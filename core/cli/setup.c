/* Shared start-up of the subcommands: config layers, host, plugins. */
#include "config.h"
#include "cli-private.h"
#include "examples-private.h"

#include <glib.h>
#include <string.h>

static bool is_override(const char *arg)
{
    /* "section.key=value": an '=' after a dotted name.  A path holding '='
     * is still a file when it exists. */
    const char *eq = strchr(arg, '=');
    if (!eq || g_file_test(arg, G_FILE_TEST_EXISTS))
        return false;
    const char *dot = memchr(arg, '.', (size_t)(eq - arg));
    return dot != NULL && dot != arg;
}

int crl__cli_setup(crl_cli_ctx *ctx, int nargs, char **args, unsigned flags, crl_error *err)
{
    memset(ctx, 0, sizeof *ctx);
    GPtrArray *files = g_ptr_array_new();
    GPtrArray *ovr = g_ptr_array_new();
    for (int i = 0; i < nargs; i++) {
        if (args[i][0] == '-' && args[i][1] != '\0') {
            g_ptr_array_free(files, TRUE);
            g_ptr_array_free(ovr, TRUE);
            return crl_error_set(err, CRL_E_USAGE, "unknown option '%s'", args[i]);
        }
        g_ptr_array_add(is_override(args[i]) ? ovr : files, g_strdup(args[i]));
    }
    g_ptr_array_add(files, NULL);
    g_ptr_array_add(ovr, NULL);
    ctx->files = (char **)g_ptr_array_free(files, FALSE);
    ctx->overrides = (char **)g_ptr_array_free(ovr, FALSE);

    int rc = CRL_OK;
    crl_error e;
    crl_error_clear(&e);
    if ((flags & CRL_CLI_REQUIRE_FILE) && !ctx->files[0]) {
        rc = crl_error_set(err, CRL_E_USAGE, "no experiment file given (e.g. %s/plugins-check.ini)",
                           crl__examples_dir());
        goto fail;
    }
    if (!(ctx->cfg = crl_config_new(&e))) {
        rc = crl_error_pass(err, &e, CRL_E_NOMEM);
        goto fail;
    }
    if ((rc = crl_config_load_defaults(ctx->cfg, err)))
        goto fail;
    for (char **f = ctx->files; *f; f++) {
        if ((rc = crl_config_load_file(ctx->cfg, *f, CRL_LAYER_FILE, &e))) {
            /* A file named on the command line that cannot be read is a
             * usage error (exit 2), not a runtime failure. */
            if (e.code == CRL_E_IO)
                e.code = CRL_E_USAGE;
            rc = crl_error_pass(err, &e, rc);
            goto fail;
        }
    }
    if (!(ctx->host = crl_host_new(ctx->cfg, &e))) {
        rc = crl_error_pass(err, &e, CRL_E_PLUGIN);
        goto fail;
    }
    /* Before loading, the schema declares [plugin.*], which is what an
     * override like plugin.gym.python_path=... needs to resolve. */
    if (!(ctx->schema = crl__cli_schema_new(ctx->host, &e))) {
        rc = crl_error_pass(err, &e, CRL_E_NOMEM);
        goto fail;
    }
    for (char **o = ctx->overrides; *o; o++)
        if ((rc = crl_config_override(ctx->cfg, ctx->schema, *o, err)))
            goto fail;
    if (flags & CRL_CLI_LOAD_PLUGINS) {
        crl_host_set_rescan(ctx->host, (flags & CRL_CLI_RESCAN) != 0);
        rc = crl__cli_load_builtins(ctx->host, err);
        if (rc == CRL_OK)
            rc = crl_host_load_configured(ctx->host, err);
        /* A mistake in a plugin's own section is the user's config error, never tolerated. */
        if (rc && (!(flags & CRL_CLI_TOLERATE_PLUGIN_FAILURES) || rc == CRL_E_CONFIG))
            goto fail;
        if (rc)
            crl_error_clear(err);
        rc = CRL_OK;
        /* Now [plugin.NAME] for each plugin made known, and no other. */
        crl_schema_free(ctx->schema);
        if (!(ctx->schema = crl__cli_schema_new(ctx->host, &e))) {
            rc = crl_error_pass(err, &e, CRL_E_NOMEM);
            goto fail;
        }
    }
    if ((flags & CRL_CLI_VALIDATE) && (rc = crl_config_validate(ctx->cfg, ctx->schema, err)))
        goto fail;
    return CRL_OK;
fail:
    crl__cli_teardown(ctx);
    return rc;
}

void crl__cli_teardown(crl_cli_ctx *ctx)
{
    crl_schema_free(ctx->schema);  /* it asks the host for component tables */
    crl_host_free(ctx->host);
    crl_config_free(ctx->cfg);
    g_strfreev(ctx->files);
    g_strfreev(ctx->overrides);
    memset(ctx, 0, sizeof *ctx);
}

int crl__cli_exit_code(const crl_error *err)
{
    switch (err->code) {
    case CRL_OK:
        return CRL_EXIT_OK;
    case CRL_E_USAGE:
    case CRL_E_CONFIG:
    case CRL_E_NOT_FOUND:
    case CRL_E_INVALID:
        return CRL_EXIT_USAGE;
    default:
        return CRL_EXIT_RUNTIME;
    }
}

void crl__cli_print_error(const char *cmd, const crl_error *err)
{
    fprintf(stderr, "crl %s: %s\n", cmd, err->message[0] ? err->message : crl_status_name(err->code));
}

void crl__cli_json_string(FILE *f, const char *s)
{
    fputc('"', f);
    for (const unsigned char *p = (const unsigned char *)(s ? s : ""); *p; p++) {
        switch (*p) {
        case '"': fputs("\\\"", f); break;
        case '\\': fputs("\\\\", f); break;
        case '\n': fputs("\\n", f); break;
        case '\t': fputs("\\t", f); break;
        case '\r': fputs("\\r", f); break;
        default:
            if (*p < 0x20)
                fprintf(f, "\\u%04x", *p);
            else
                fputc(*p, f);
        }
    }
    fputc('"', f);
}

int crl__cli_setup_failed(const char *cmd, const crl_error *err)
{
    crl__cli_print_error(cmd, err);
    if (err->code == CRL_E_USAGE)
        fprintf(stderr, "Run 'crl %s --help' for usage.\n", cmd);
    return crl__cli_exit_code(err);
}
