/* crl eval RUN_DIR: the exploration-free policy of a run's checkpoint, scored over episodes (crl_policy). */
#include "config.h"
#include "cli-private.h"
#include "examples-private.h"

#include <crl/trainer.h>

#include <glib.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

static void usage(FILE *f)
{
    fprintf(f,
            "Usage: crl eval RUN_DIR [--episodes N] [--video FILE.mp4] [--json]\n"
            "                [section.key=value...]\n\n"
            "Load the checkpoint of a crl run directory (RUN_DIR/checkpoint, or RUN_DIR\n"
            "itself when it holds trainer.ckpt) and run its exploration-free policy (the\n"
            "distribution's mode, the greedy Q-value) on the evaluation env of its [env]\n"
            "section: the transforms normalise with the statistics the training env had\n"
            "at the checkpoint (VecNorm, ObservationNorm), frozen.  The env is seeded as\n"
            "crl run seeds the evaluation at the checkpoint's frame count, so the\n"
            "checkpoint a run wrote at its end gives its last evaluation return (with as\n"
            "many episodes).  Prints each episode's return, transformed (the reward the\n"
            "loss trained on) and raw (the backend's reward, before the [env]\n"
            "transforms), then the mean and std.  E.g.\n\n"
            "  crl run %s/cartpole-dqn.ini train.run_dir=runs/dqn\n"
            "  crl eval runs/dqn --episodes 20\n\n"
            "  --episodes N  episodes to run (1..1000000; default: [train] eval_episodes\n"
            "                of the run, or 5)\n"
            "  --video FILE  write env 0's first episode as an MP4 (H.264 through libx264\n"
            "                when this FFmpeg has it, else MPEG-4 part 2; the env must render)\n"
            "  --json        print {\"run_dir\", \"frames\", \"episodes\", \"returns\",\n"
            "                \"raw_returns\", \"mean\", \"std\", \"raw_mean\", \"raw_std\"}\n"
            "                instead (null for a raw return that is not known)\n"
            "  -h, --help    print this help\n\n"
            "Overrides change the run's settings for this evaluation (e.g.\n"
            "train.eval_max_steps=500); changing [env] or [loss] makes another env or\n"
            "network than the run's.\n\n"
            "Exit status: 0 ok, 1 runtime failure, 2 bad usage, no checkpoint in RUN_DIR\n"
            "or a bad config.\n", crl__examples_dir());
}

/* RUN_DIR/checkpoint, or RUN_DIR when it is a checkpoint directory itself; NULL with err set. */
static char *checkpoint_dir(const char *run_dir, crl_error *err)
{
    struct stat st;
    char *ck = g_build_filename(run_dir, "checkpoint", NULL), *f = g_build_filename(ck, "trainer.ckpt", NULL);
    bool nested = stat(f, &st) == 0;
    g_free(f);
    if (nested)
        return ck;
    g_free(ck);
    f = g_build_filename(run_dir, "trainer.ckpt", NULL);
    bool here = stat(f, &st) == 0;
    g_free(f);
    if (here)
        return g_strdup(run_dir);
    crl_error_set(err, CRL_E_USAGE, "'%s' holds no checkpoint (neither %s/checkpoint/trainer.ckpt nor "
                  "%s/trainer.ckpt): give a crl run directory whose run wrote one", run_dir, run_dir, run_dir);
    return NULL;
}

int crl__cli_policy_setup(crl_cli_ctx *ctx, const char *run_dir, int nover, char **overrides, crl_policy **p,
                          crl_error *err)
{
    *p = NULL;
    char *ck = checkpoint_dir(run_dir, err);
    if (!ck) {
        memset(ctx, 0, sizeof *ctx);
        return CRL_E_USAGE;
    }
    for (int i = 0; i < nover; i++)
        if (!strchr(overrides[i], '=') || overrides[i][0] == '-') {
            g_free(ck);
            memset(ctx, 0, sizeof *ctx);
            return crl_error_set(err, CRL_E_USAGE, "'%s': after RUN_DIR only section.key=value overrides may "
                                 "follow", overrides[i]);
        }
    char **args = g_new0(char *, (size_t)nover + 2);
    args[0] = g_build_filename(ck, CRL_TRAINER_SETTINGS_FILE, NULL);
    for (int i = 0; i < nover; i++)
        args[i + 1] = overrides[i];
    int rc = crl__cli_setup(ctx, nover + 1, args, CRL_CLI_LOAD_PLUGINS | CRL_CLI_VALIDATE | CRL_CLI_REQUIRE_FILE,
                            err);
    g_free(args[0]);
    g_free(args);
    if (!rc && (rc = crl_experiment_check(ctx->host, ctx->cfg, NULL, CRL_CHECK_TRAIN, err)))
        crl__cli_teardown(ctx);
    if (!rc) {
        crl_error e;
        crl_error_clear(&e);
        if (!(*p = crl_policy_load(ctx->host, ctx->cfg, ck, &e))) {
            rc = crl_error_pass(err, &e, CRL_E_RUNTIME);
            crl__cli_teardown(ctx);
        }
    }
    if (rc)
        crl_error_prefix(err, "%s: ", run_dir);
    g_free(ck);
    return rc;
}

static void json_num(double v)
{
    if (isfinite(v))
        printf("%.17g", v);
    else
        printf("null");
}

static void json_array(const double *v, int64_t n)
{
    printf("[");
    for (int64_t i = 0; i < n; i++) {
        if (i)
            printf(",");
        json_num(v[i]);
    }
    printf("]");
}

int crl__cmd_eval(int argc, char **argv)
{
    bool json = false;
    const char *episodes_s = NULL, *run_dir = NULL, *video = NULL;
    GPtrArray *over = g_ptr_array_new();
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            usage(stdout);
            g_ptr_array_free(over, TRUE);
            return CRL_EXIT_OK;
        } else if (!strcmp(a, "--json")) {
            json = true;
        } else if (!strcmp(a, "--episodes") || !strncmp(a, "--episodes=", 11)) {
            if (a[10] == '=') {
                episodes_s = a + 11;
            } else if (i + 1 < argc) {
                episodes_s = argv[++i];
            } else {
                fprintf(stderr, "crl eval: --episodes needs a value; run 'crl eval --help'\n");
                g_ptr_array_free(over, TRUE);
                return CRL_EXIT_USAGE;
            }
        } else if (!strcmp(a, "--video") || !strncmp(a, "--video=", 8)) {
            if (a[7] == '=') {
                video = a + 8;
            } else if (i + 1 < argc) {
                video = argv[++i];
            } else {
                fprintf(stderr, "crl eval: --video needs a file name; run 'crl eval --help'\n");
                g_ptr_array_free(over, TRUE);
                return CRL_EXIT_USAGE;
            }
        } else if (a[0] == '-' && a[1]) {
            fprintf(stderr, "crl eval: unknown option '%s'; run 'crl eval --help'\n", a);
            g_ptr_array_free(over, TRUE);
            return CRL_EXIT_USAGE;
        } else if (!run_dir && !strchr(a, '=')) {
            run_dir = a;
        } else {
            g_ptr_array_add(over, argv[i]);
        }
    }
    int64_t episodes = 0;
    if (!run_dir) {
        fprintf(stderr, "crl eval: give a run directory (crl eval RUN_DIR; see crl eval --help)\n");
        g_ptr_array_free(over, TRUE);
        return CRL_EXIT_USAGE;
    }
    if (episodes_s && (!crl_parse_int(episodes_s, &episodes) || episodes < 1 || episodes > 1000000)) {
        fprintf(stderr, "crl eval: --episodes '%s': give a whole number in [1, 1000000]\n", episodes_s);
        g_ptr_array_free(over, TRUE);
        return CRL_EXIT_USAGE;
    }
#ifndef CRL_CLI_HAVE_FFMPEG
    if (video) {
        fprintf(stderr, "crl eval: --video: this crl was built without FFmpeg's libraries; install libavcodec-dev "
                "libavformat-dev libswscale-dev libavutil-dev and build crl again\n");
        g_ptr_array_free(over, TRUE);
        return CRL_EXIT_USAGE;
    }
#endif
    if (video && !*video) {
        fprintf(stderr, "crl eval: --video needs a file name\n");
        g_ptr_array_free(over, TRUE);
        return CRL_EXIT_USAGE;
    }
    crl_cli_ctx ctx;
    crl_error err = { 0 };
    crl_policy *p = NULL;
    int rc = crl__cli_policy_setup(&ctx, run_dir, (int)over->len, (char **)over->pdata, &p, &err);
    g_ptr_array_free(over, TRUE);
    if (rc)
        return crl__cli_setup_failed("eval", &err);
    if (!episodes_s)
        episodes = crl_policy_eval_episodes(p) > 0 ? crl_policy_eval_episodes(p) : 5;
    crl_eval_result r = { sizeof r, 0, NULL, NULL, NAN, NAN, NAN, NAN };
    int status = CRL_EXIT_OK;
#ifdef CRL_CLI_HAVE_FFMPEG
    crl__eval_video *rec = video ? crl__eval_video_new(NULL, video) : NULL;
    if (rec) {
        crl_eval_hook h = crl__eval_video_hook(rec);
        crl_policy_set_eval_hook(p, &h, NULL);
    }
#endif
    if (crl_policy_evaluate(p, episodes, &r, &err)) {
        crl__cli_print_error("eval", &err);
        status = crl__cli_exit_code(&err);
    } else if (json) {
        printf("{\"run_dir\":");
        crl__cli_json_string(stdout, run_dir);
        printf(",\"frames\":%lld,\"episodes\":%lld,\"returns\":", (long long)crl_policy_frames(p),
               (long long)r.episodes);
        json_array(r.returns, r.episodes);
        printf(",\"raw_returns\":");
        json_array(r.raw_returns, r.episodes);
        printf(",\"mean\":");
        json_num(r.mean);
        printf(",\"std\":");
        json_num(r.std);
        printf(",\"raw_mean\":");
        json_num(r.raw_mean);
        printf(",\"raw_std\":");
        json_num(r.raw_std);
        printf("}\n");
    } else {
        printf("%s: checkpoint at frame %lld, %lld episode%s of the exploration-free policy\n", run_dir,
               (long long)crl_policy_frames(p), (long long)r.episodes, r.episodes == 1 ? "" : "s");
        for (int64_t i = 0; i < r.episodes; i++)
            printf("  episode %-4lld return %.6g  raw %.6g\n", (long long)i + 1, r.returns[i], r.raw_returns[i]);
        printf("mean return %.6g  std %.6g\nraw mean return %.6g  std %.6g\n", r.mean, r.std, r.raw_mean, r.raw_std);
    }
#ifdef CRL_CLI_HAVE_FFMPEG
    int64_t vframes = 0;
    if (!status && rec && crl__eval_video_last(rec, &vframes))
        fprintf(stderr, "crl eval: wrote %s: %lld frames of env 0's first episode (%s)\n", video, (long long)vframes,
                crl__video_encoder_name());
    crl__eval_video_free(rec);
#endif
    fflush(stdout);
    crl_free(r.returns);
    crl_free(r.raw_returns);
    crl_policy_free(p);
    crl__cli_teardown(&ctx);
    return status;
}
