/* crl collect: run the [collector] of a config with a random policy and report its batches. */
#include "config.h"
#include "cli-private.h"
#include "examples-private.h"

#include <crl/collector.h>
#include <crl/config.h>
#include <crl/replay.h>
#include <crl/trainer.h>

#include <glib.h>
#include <stdio.h>
#include <string.h>

static void usage(FILE *f)
{
    fprintf(f,
            "Usage: crl collect [FILE.ini...] [section.key=value...] [--quiet]\n\n"
            "Build the data collector of the [collector] section over the env of [env]\n"
            "(any executor), collect total_frames frames with a random policy, and print\n"
            "the first batch as TorchRL prints it, one line per batch, and a summary:\n"
            "frames, wall-clock seconds, frames/s, episodes completed and their mean\n"
            "return.  With a [replay] section every batch is also written to that replay\n"
            "buffer.  E.g.\n\n"
            "  crl collect %s/cartpole-collect.ini\n"
            "  crl collect %s/cartpole-collect.ini collector.sync=false\n\n"
            "  --quiet     print the summary only\n"
            "  -h, --help  print this help\n\n"
            "Exit status: 0 ok, 1 runtime failure, 2 bad usage or bad config.\n", crl__examples_dir(), crl__examples_dir());
}

/* Completed episodes and the sum of their returns. */
typedef struct tally {
    int64_t episodes;
    double sum;
} tally;

static void tally_one(void *user, double ret)
{
    tally *t = user;
    t->episodes++;
    t->sum += ret;
}

int crl__cmd_collect(int argc, char **argv)
{
    bool quiet = false;
    GPtrArray *rest = g_ptr_array_new();
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            usage(stdout);
            g_ptr_array_free(rest, TRUE);
            return CRL_EXIT_OK;
        }
        if (!strcmp(argv[i], "--quiet"))
            quiet = true;
        else
            g_ptr_array_add(rest, argv[i]);
    }
    crl_cli_ctx ctx;
    crl_error err = { 0 };
    int rc = crl__cli_setup(&ctx, (int)rest->len, (char **)rest->pdata, CRL_CLI_LOAD_PLUGINS | CRL_CLI_VALIDATE,
                            &err);
    g_ptr_array_free(rest, TRUE);
    if (rc)
        return crl__cli_setup_failed("collect", &err);
    int status = CRL_EXIT_RUNTIME;
    crl_collector *c = NULL;
    crl_replay *rb = NULL;
    tally t = { 0, 0.0 };
    crl_returns *returns = crl_returns_new();
    int64_t total = 0;
    if (crl_experiment_check(ctx.host, ctx.cfg, NULL, 0, &err))
        goto fail;
    if (!crl_config_has_section(ctx.cfg, "collector")) {
        crl_error_set(&err, CRL_E_CONFIG, "no [collector] section: add one with frames_per_batch and total_frames "
                      "(see %s/cartpole-collect.ini)", crl__examples_dir());
        goto fail;
    }
    if (crl_config_get_int(ctx.cfg, "collector", "total_frames", -1, &total, &err))
        goto fail;
    if (total < 0) {
        const char *o = crl_config_origin(ctx.cfg, "collector", "total_frames");
        crl_error_set(&err, CRL_E_CONFIG, "%s%s[collector] total_frames = -1 (endless): crl collect needs a number "
                      "of frames to stop at; set total_frames", o ? o : "", o ? ": " : "");
        goto fail;
    }
    if (!(c = crl_collector_from_config(ctx.host, ctx.cfg, "collector", "env", NULL, NULL, &err)))
        goto fail;
    if (crl_config_has_section(ctx.cfg, "replay")) {
        if (!(rb = crl_replay_from_config(ctx.host, ctx.cfg, "replay", &err)))
            goto fail;
        crl_collector_set_replay(c, rb);
    }
    gint64 t0 = g_get_monotonic_time();
    int64_t batches = 0;
    crl_td *td;
    while ((td = crl_collector_next(c, &err)) != NULL) {
        if (!quiet && batches == 0) {
            char *repr = crl_td_repr(td);
            printf("%s\n", repr ? repr : "");
            crl_free(repr);
        }
        crl_returns_add(returns, td, tally_one, &t);
        batches++;
        if (!quiet) {
            char *shape = g_strdup("");
            for (int d = 0; d < crl_td_batch_ndim(td); d++) {
                char *s2 = g_strdup_printf("%s%s%" G_GINT64_FORMAT, shape, d ? ", " : "", (gint64)crl_td_batch_shape(td)[d]);
                g_free(shape);
                shape = s2;
            }
            printf("batch %" G_GINT64_FORMAT ": [%s], %" G_GINT64_FORMAT " frames so far, %" G_GINT64_FORMAT
                   " episodes completed\n", (gint64)batches, shape, (gint64)crl_collector_frames(c),
                   (gint64)t.episodes);
            g_free(shape);
        }
        crl_td_unref(td);
    }
    if (err.code)
        goto fail;
    double secs = (double)(g_get_monotonic_time() - t0) / 1e6;
    int64_t frames = crl_collector_frames(c);
    printf("summary:\n");
    printf("  batches:            %" G_GINT64_FORMAT "\n", (gint64)batches);
    printf("  frames:             %" G_GINT64_FORMAT " in %.3f s (%.0f frames/s)\n", (gint64)frames, secs,
           secs > 0 ? (double)frames / secs : 0.0);
    printf("  episodes completed: %" G_GINT64_FORMAT "\n", (gint64)t.episodes);
    if (t.episodes)
        printf("  mean return:        %.6g\n", t.sum / (double)t.episodes);
    if (rb)
        printf("  replay buffer:      %zu items\n", crl_replay_len(rb));
    status = CRL_EXIT_OK;
    goto done;
fail:
    crl__cli_print_error("collect", &err);
    status = crl__cli_exit_code(&err);
done:
    fflush(stdout);
    crl_collector_free(c);
    crl_replay_free(rb);
    crl_returns_free(returns);
    crl__cli_teardown(&ctx);
    return status;
}
