/* crl: the command-line front end of libcrl. */
#include "config.h"
#include "cli-private.h"

#include <stdio.h>
#include <string.h>

static const crl_cli_command commands[] = {
    { "version", crl__cmd_version, "print crl's version and ABI" },
    { "plugins", crl__cmd_plugins, "list loaded plugins and what they registered" },
    { "config", crl__cmd_config, "check or show a layered configuration" },
    { "envs", crl__cmd_envs, "list the env ids of every env backend" },
    { "inspect", crl__cmd_inspect, "build the [env] env and print its specs" },
    { "rollout", crl__cmd_rollout, "run an env for N steps and print the rollout" },
    { "collect", crl__cmd_collect, "run the [collector] with a random policy and report its batches" },
    { "run", crl__cmd_run, "train as an experiment file says (env, collector, replay, loss, optimizer)" },
    { "eval", crl__cmd_eval, "run the exploration-free policy of a run's checkpoint and report its returns" },
    { "replay", crl__cmd_replay, "check a durable replay storage's files and slots, or drop its damaged slots" },
    { "bench", crl__cmd_bench, "run a benchmark and print its figures" },
};

const crl_cli_command *crl__cli_commands(size_t *n)
{
    *n = sizeof commands / sizeof commands[0];
    return commands;
}

void crl__cli_usage(FILE *f)
{
    fprintf(f, "Usage: crl COMMAND [ARGS...]\n\n"
               "crl is a reinforcement-learning framework whose environments, transforms,\n"
               "storages and losses are plugins named in INI files.\n\nCommands:\n");
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        fprintf(f, "  %-10s %s\n", commands[i].name, commands[i].summary);
    fprintf(f, "\nRun 'crl COMMAND --help' for a command's options.\n"
               "Exit status: 0 ok, 1 runtime failure, 2 bad usage or bad config.\n");
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        crl__cli_usage(stderr);
        return CRL_EXIT_USAGE;
    }
    const char *cmd = argv[1];
    if (!strcmp(cmd, "--help") || !strcmp(cmd, "-h")) {
        crl__cli_usage(stdout);
        return CRL_EXIT_OK;
    }
    if (!strcmp(cmd, "help"))
        return crl__cmd_help(argc - 1, argv + 1);
    if (!strcmp(cmd, "--version"))
        return crl__cmd_version(argc - 1, argv + 1);
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        if (!strcmp(cmd, commands[i].name))
            return commands[i].run(argc - 1, argv + 1);
    const char *names[sizeof commands / sizeof commands[0] + 1];
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        names[i] = commands[i].name;
    names[sizeof commands / sizeof commands[0]] = NULL;
    const char *hint = crl_did_you_mean(cmd, names);
    fprintf(stderr, "crl: unknown command '%s'%s%s%s; run 'crl --help' for the list\n", cmd,
            hint ? "; did you mean '" : "", hint ? hint : "", hint ? "'?" : "");
    return CRL_EXIT_USAGE;
}
