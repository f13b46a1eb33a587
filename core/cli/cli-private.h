/* Shared pieces of the `crl` command. */
#ifndef CRL_CLI_PRIVATE_H
#define CRL_CLI_PRIVATE_H

#include <stdio.h>
#include <crl/host.h>

/* Exit codes: 0 ok, 1 runtime failure, 2 bad usage or bad config. */
enum { CRL_EXIT_OK = 0, CRL_EXIT_RUNTIME = 1, CRL_EXIT_USAGE = 2 };

/* What a subcommand works on: the layered config and the plugin host. */
typedef struct crl_cli_ctx {
    crl_config *cfg;
    crl_host *host;
    char **files;      /* experiment files given on the command line */
    char **overrides;  /* section.key=value arguments */
} crl_cli_ctx;

enum {
    CRL_CLI_LOAD_PLUGINS = 1u << 0,  /* load what [plugins] asks for */
    CRL_CLI_VALIDATE = 1u << 1,      /* strict validation against the host's schema */
    CRL_CLI_REQUIRE_FILE = 1u << 2,  /* at least one experiment file is required */
    CRL_CLI_TOLERATE_PLUGIN_FAILURES = 1u << 3 /* a plugin that fails to load is not fatal */
};

/* Split positional arguments into experiment files and key=value overrides,
 * then: system and user config, files in order, host, overrides (resolved
 * with the host's base schema), plugins, validation.  On failure err is set
 * and the context is torn down. */
int crl__cli_setup(crl_cli_ctx *ctx, int nargs, char **args, unsigned flags, crl_error *err);
void crl__cli_teardown(crl_cli_ctx *ctx);

/* Map an error to the exit code: 2 for usage/config/not-found, 1 otherwise. */
int crl__cli_exit_code(const crl_error *err);
/* "crl CMD: message" on stderr. */
void crl__cli_print_error(const char *cmd, const crl_error *err);

/* Escape s as a JSON string (with quotes) into f. */
void crl__cli_json_string(FILE *f, const char *s);

/* Subcommands: argc/argv start at the subcommand name. */
int crl__cmd_version(int argc, char **argv);
int crl__cmd_plugins(int argc, char **argv);
int crl__cmd_config(int argc, char **argv);
int crl__cmd_bench(int argc, char **argv);

/* `crl bench core`: prints figures, returns an exit code. */
int crl__bench_core(double seconds);

#endif
