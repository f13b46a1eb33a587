/* crl run: config-only training (crl/trainer.h) with a run directory. */
#include "config.h"
#include "cli-private.h"

#include <crl/trainer.h>

#include <errno.h>
#include <glib.h>
#include <glib/gstdio.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static void usage(FILE *f)
{
    fprintf(f,
            "Usage: crl run EXPERIMENT.ini... [section.key=value...] [--dry-run] [--quiet]\n"
            "       crl run --resume RUN_DIR [section.key=value...] [--quiet]\n\n"
            "Train as the config says: the env of [env], the collector of [collector], the\n"
            "replay buffer of [replay] (off-policy losses), the loss of [loss] (type = dqn,\n"
            "ppo, ...), the optimizer of [optim] and the loop of [train].  Writes a run\n"
            "directory ([train] run_dir, default runs/NAME-YYYYmmdd-HHMMSS) holding\n"
            "config.ini (the resolved config with every default), experiment.ini (the\n"
            "settings given, which --resume reloads), run.txt (command line,\n"
            "crl and plugin versions, seed), metrics.csv, checkpoint/ (model, optimizer,\n"
            "replay buffer) and curve.png (the learning curve).  E.g.\n\n"
            "  crl run conf/examples/cartpole-dqn.ini\n"
            "  crl run conf/examples/cartpole-dqn.ini collector.total_frames=20000 train.seed=3\n\n"
            "  --dry-run   check the experiment as a run would (without stepping an env),\n"
            "              print the resolved config with every default and stop\n"
            "  --resume RUN_DIR  continue the run of RUN_DIR from its checkpoint, with its\n"
            "              experiment.ini plus the overrides given (e.g. a larger\n"
            "              collector.total_frames); bitwise the same as a run that was\n"
            "              never interrupted (on CPU, same OpenBLAS thread count)\n"
            "  --quiet     no progress output (the summary is still printed)\n"
            "  -h, --help  print this help\n\n"
            "Exit status: 0 ok, 1 runtime failure (a checkpoint is written first),\n"
            "2 bad usage or bad config.\n");
}

#define METRICS_HEADER "frames,seconds,fps,episodes,recent_return,loss,eval_return,optim_steps\n"
/* A line per log_interval frames: a billion-frame run logging every 1000 frames writes about 80 MB. */
#define METRICS_FILE_MAX (1u << 30)

typedef struct run_ctx {
    crl_cli_ctx *cli;
    char *dir;
    FILE *metrics;
    bool tty, quiet;
    int64_t log_interval, ckpt_interval, next_log, next_ckpt, logged;
    const char *title;
    crl_train_stats last;
} run_ctx;

static int write_text(const char *dir, const char *name, const char *text, crl_error *err)
{
    char *path = g_build_filename(dir, name, NULL);
    GError *ge = NULL;
    int rc = CRL_OK;
    if (!g_file_set_contents(path, text, -1, &ge)) {
        rc = crl_error_set(err, CRL_E_IO, "cannot write '%s': %s", path, ge->message);
        g_error_free(ge);
    }
    g_free(path);
    return rc;
}

static int checkpoint(run_ctx *r, crl_trainer *t, crl_error *err)
{
    char *dir = g_build_filename(r->dir, "checkpoint", NULL);
    int rc = crl_trainer_checkpoint(t, dir, err);
    g_free(dir);
    return rc;
}

static void fmt_num(char *buf, size_t n, double v)
{
    if (isnan(v))
        buf[0] = '\0';
    else
        snprintf(buf, n, "%.6g", v);
}

/* The learning curve of metrics.csv (the whole run, resumed parts included). */
static int curve(run_ctx *r, crl_error *err)
{
    char *mpath = g_build_filename(r->dir, "metrics.csv", NULL), *text = NULL;
    GArray *x = g_array_new(FALSE, FALSE, sizeof(double)), *y = g_array_new(FALSE, FALSE, sizeof(double)),
           *ex = g_array_new(FALSE, FALSE, sizeof(double)), *ey = g_array_new(FALSE, FALSE, sizeof(double));
    int rc = CRL_OK;
    size_t tlen;
    if (crl_file_read(mpath, "metrics file", 0, METRICS_FILE_MAX, &text, &tlen, NULL) == CRL_OK) {
        char **lines = g_strsplit(text, "\n", -1);
        for (char **l = lines + 1; *l && **l; l++) {
            /* frames,seconds,fps,episodes,recent_return,loss,eval_return,optim_steps */
            char **f = g_strsplit(*l, ",", -1);
            if (g_strv_length(f) >= 7) {
                double fr = g_ascii_strtod(f[0], NULL);
                double rr = *f[4] ? g_ascii_strtod(f[4], NULL) : NAN;
                g_array_append_val(x, fr);
                g_array_append_val(y, rr);
                if (*f[6]) {
                    double ev = g_ascii_strtod(f[6], NULL);
                    g_array_append_val(ex, fr);
                    g_array_append_val(ey, ev);
                }
            }
            g_strfreev(f);
        }
        g_strfreev(lines);
        crl_free(text);
        char *path = g_build_filename(r->dir, "curve.png", NULL);
        rc = crl__png_write_curve(path, r->title, (double *)(void *)x->data, (double *)(void *)y->data, x->len,
                                  (double *)(void *)ex->data, (double *)(void *)ey->data, ex->len, err);
        g_free(path);
        if (rc == CRL_E_UNSUPPORTED) {
            crl_error_clear(err);
            rc = CRL_OK;
        }
    }
    g_free(mpath);
    g_array_free(x, TRUE);
    g_array_free(y, TRUE);
    g_array_free(ex, TRUE);
    g_array_free(ey, TRUE);
    return rc;
}

static int progress(void *user, crl_trainer *t, const crl_train_stats *s, crl_error *err)
{
    run_ctx *r = user;
    r->last = *s;
    bool log = (s->done && s->frames != r->logged) || s->evaluated || s->frames >= r->next_log;
    if (s->done && s->frames == r->logged)
        return CRL_OK;
    if (log) {
        while (r->next_log <= s->frames)
            r->next_log += r->log_interval > 0 ? r->log_interval : 1;
        char a[32], b[32], c[32];
        fmt_num(a, sizeof a, s->recent_return);
        fmt_num(b, sizeof b, s->loss);
        fmt_num(c, sizeof c, s->evaluated ? s->eval_return : NAN);
        fprintf(r->metrics, "%lld,%.3f,%.1f,%lld,%s,%s,%s,%lld\n", (long long)s->frames, s->seconds, s->fps,
                (long long)s->episodes, a, b, c, (long long)s->optim_steps);
        fflush(r->metrics);
        r->logged = s->frames;
        if (!r->quiet) {
            char line[256];
            snprintf(line, sizeof line, "frames %lld  fps %.0f  episodes %lld  return %s  loss %s%s%s",
                     (long long)s->frames, s->fps, (long long)s->episodes, *a ? a : "-", *b ? b : "-",
                     s->evaluated ? "  eval " : "", s->evaluated ? c : "");
            if (r->tty)
                printf("\r\033[K%s%s", line, s->evaluated ? "\n" : "");
            else
                printf("%s\n", line);
            fflush(stdout);
        }
    }
    if (!s->done && r->ckpt_interval > 0 && s->frames >= r->next_ckpt) {
        while (r->next_ckpt <= s->frames)
            r->next_ckpt += r->ckpt_interval;
        int rc = checkpoint(r, t, err);
        if (rc)
            return rc;
    }
    return CRL_OK;
}

/* The keys set by files and overrides (no defaults) as INI text: what
 * --resume reloads (the resolved config.ini also lists defaults that only
 * apply to other choices, such as [replay] alpha without prioritized). */
static char *explicit_config(const crl_config *cfg)
{
    GString *s = g_string_new("; the settings of this run (files and overrides, no defaults): crl run --resume "
                              "reads this\n");
    for (size_t i = 0; i < crl_config_section_count(cfg); i++) {
        const char *sec = crl_config_section_at(cfg, i);
        g_string_append_printf(s, "\n[%s]\n", sec);
        for (size_t k = 0; k < crl_config_key_count(cfg, sec); k++) {
            const char *key = crl_config_key_at(cfg, sec, k);
            g_string_append_printf(s, "%s = %s\n", key, crl_config_get(cfg, sec, key));
        }
    }
    return g_string_free(s, FALSE);
}

/* runs/NAME-YYYYmmdd-HHMMSS from the first experiment file's name. */
static char *default_run_dir(const crl_cli_ctx *cli)
{
    char *base = g_path_get_basename(cli->files && cli->files[0] ? cli->files[0] : "run");
    char *dot = strrchr(base, '.');
    if (dot && dot != base)
        *dot = '\0';
    char stamp[32];
    time_t now = time(NULL);
    struct tm tm;
    strftime(stamp, sizeof stamp, "%Y%m%d-%H%M%S", gmtime_r(&now, &tm));
    char *dir = g_strdup_printf("runs/%s-%s", base, stamp);
    g_free(base);
    return dir;
}

static char *run_info(const crl_cli_ctx *cli, int argc, char **argv)
{
    GString *s = g_string_new("command:");
    for (int i = 0; i < argc; i++)
        g_string_append_printf(s, " %s", argv[i]);
    const char *seed = crl_config_get(cli->cfg, "train", "seed");
    g_string_append_printf(s, "\ncrl: %s\nseed: %s\nplugins:\n", crl_version(), seed ? seed : "0 (default)");
    for (size_t i = 0; i < crl_host_plugin_count(cli->host); i++) {
        const crl_plugin_info *p = crl_host_plugin_at(cli->host, i);
        g_string_append_printf(s, "  %s %s (ABI %u.%u) %s\n", p->name, p->version, p->abi_major, p->abi_minor,
                               p->path);
    }
    return g_string_free(s, FALSE);
}

int crl__cmd_run(int argc, char **argv)
{
    bool dry = false, quiet = false;
    const char *resume = NULL;
    GPtrArray *rest = g_ptr_array_new_with_free_func(g_free);
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            usage(stdout);
            g_ptr_array_free(rest, TRUE);
            return CRL_EXIT_OK;
        }
        if (!strcmp(argv[i], "--dry-run"))
            dry = true;
        else if (!strcmp(argv[i], "--quiet"))
            quiet = true;
        else if (!strcmp(argv[i], "--resume") && i + 1 < argc)
            resume = argv[++i];
        else if (argv[i][0] == '-' && argv[i][1] == '-') {
            fprintf(stderr, "crl run: unknown option '%s' (see crl run --help)\n", argv[i]);
            g_ptr_array_free(rest, TRUE);
            return CRL_EXIT_USAGE;
        } else
            g_ptr_array_add(rest, g_strdup(argv[i]));
    }
    if (resume) {
        /* the run's resolved config first, the overrides after it */
        g_ptr_array_insert(rest, 0, g_build_filename(resume, "experiment.ini", NULL));
        g_ptr_array_add(rest, g_strdup_printf("train.run_dir=%s", resume));
    }
    crl_cli_ctx ctx;
    crl_error err = { 0 };
    int rc = crl__cli_setup(&ctx, (int)rest->len, (char **)rest->pdata,
                            CRL_CLI_LOAD_PLUGINS | CRL_CLI_VALIDATE | CRL_CLI_REQUIRE_FILE, &err);
    g_ptr_array_free(rest, TRUE);
    if (rc && resume)
        crl_error_prefix(&err, "--resume %s: ", resume);
    if (rc)
        return crl__cli_setup_failed("run", &err);
    /* Every config error before any work: no run directory, no env step. */
    if (crl_experiment_check(ctx.host, ctx.cfg, NULL, CRL_CHECK_TRAIN, &err)) {
        crl__cli_print_error("run", &err);
        crl__cli_teardown(&ctx);
        return crl__cli_exit_code(&err);
    }
    char *resolved = crl_config_show(ctx.cfg, ctx.schema, &err);
    if (!resolved) {
        crl__cli_print_error("run", &err);
        crl__cli_teardown(&ctx);
        return crl__cli_exit_code(&err);
    }
    if (dry) {
        fputs(resolved, stdout);
        crl_free(resolved);
        crl__cli_teardown(&ctx);
        return CRL_EXIT_OK;
    }
    crl__blas_single_thread();
    int status = CRL_EXIT_RUNTIME;
    run_ctx r = { 0 };
    r.cli = &ctx;
    r.quiet = quiet;
    r.tty = isatty(STDOUT_FILENO);
    char *info = NULL, *explicit = NULL;
    crl_trainer *t = crl_trainer_from_config(ctx.host, ctx.cfg, &err);
    if (!t)
        goto fail;
    const char *dir = crl_config_get(ctx.cfg, "train", "run_dir");
    r.dir = dir && *dir ? g_strdup(dir) : default_run_dir(&ctx);
    if (crl_config_get_int(ctx.cfg, "train", "log_interval", 0, &r.log_interval, &err) ||
        crl_config_get_int(ctx.cfg, "train", "checkpoint_interval", 0, &r.ckpt_interval, &err))
        goto fail;
    r.next_ckpt = r.ckpt_interval;
    if (g_mkdir_with_parents(r.dir, 0755)) {
        crl_error_set(&err, CRL_E_IO, "cannot create run directory '%s': %s", r.dir, g_strerror(errno));
        goto fail;
    }
    if (resume) {
        char *ck = g_build_filename(r.dir, "checkpoint", NULL);
        int rrc = crl_trainer_resume(t, ck, &err);
        g_free(ck);
        if (rrc)
            goto fail;
        int64_t fr = crl_trainer_frames(t), li = r.log_interval > 0 ? r.log_interval : 1;
        r.next_log = (fr / li + 1) * li;   /* as the uninterrupted run would have it */
        r.logged = fr;
        while (r.next_ckpt <= crl_trainer_frames(t) && r.ckpt_interval > 0)
            r.next_ckpt += r.ckpt_interval;
    }
    info = run_info(&ctx, argc, argv);
    if (resume) {
        char *old = NULL, *p = g_build_filename(r.dir, "run.txt", NULL);
        size_t olen;
        crl_file_read(p, "run.txt", 0, METRICS_FILE_MAX, &old, &olen, NULL);
        char *both = g_strdup_printf("%s\nresumed at frame %lld:\n%s", old ? old : "",
                                     (long long)crl_trainer_frames(t), info);
        g_free(info);
        info = both;
        crl_free(old);
        g_free(p);
    }
    explicit = explicit_config(ctx.cfg);
    if (write_text(r.dir, "config.ini", resolved, &err) || write_text(r.dir, "experiment.ini", explicit, &err) ||
        write_text(r.dir, "run.txt", info, &err))
        goto fail;
    char *mpath = g_build_filename(r.dir, "metrics.csv", NULL);
    r.metrics = fopen(mpath, resume ? "a" : "w");
    if (!r.metrics)
        crl_error_set(&err, CRL_E_IO, "cannot write '%s': %s", mpath, g_strerror(errno));
    g_free(mpath);
    if (!r.metrics)
        goto fail;
    if (!resume)
        fputs(METRICS_HEADER, r.metrics);
    r.title = crl_config_get(ctx.cfg, "loss", "type");
    if (!quiet)
        printf("run directory: %s\n", r.dir);
    int trc = crl_trainer_run(t, progress, &r, &err);
    if (r.tty && !quiet)
        printf("\n");
    crl_error e2 = { 0 };
    /* Whatever happened, keep what was learned: a checkpoint and the curve. */
    if (checkpoint(&r, t, &e2) || curve(&r, &e2))
        fprintf(stderr, "crl run: %s\n", e2.message);
    if (trc) {
        fprintf(stderr, "crl run: stopped: %s\ncrl run: the last checkpoint is in %s/checkpoint\n", err.message,
                r.dir);
        status = CRL_EXIT_RUNTIME;
        goto done;
    }
    printf("summary:\n  frames:           %lld in %.1f s (%.0f frames/s)\n  optimizer steps:  %lld\n"
           "  episodes:         %lld\n", (long long)r.last.frames, r.last.seconds, r.last.fps,
           (long long)r.last.optim_steps, (long long)r.last.episodes);
    if (!isnan(r.last.recent_return))
        printf("  recent return:    %.6g\n", r.last.recent_return);
    if (!isnan(r.last.eval_return))
        printf("  eval return:      %.6g\n", r.last.eval_return);
    double stop;
    if (crl_config_get(ctx.cfg, "train", "stop_return") &&
        !crl_config_get_double(ctx.cfg, "train", "stop_return", 0, &stop, &err) && r.last.eval_return >= stop)
        printf("  stopped:          the evaluation return reached stop_return = %g\n", stop);
    printf("  run directory:    %s\n", r.dir);
    status = CRL_EXIT_OK;
    goto done;
fail:
    crl__cli_print_error("run", &err);
    status = crl__cli_exit_code(&err);
done:
    fflush(stdout);
    if (r.metrics)
        fclose(r.metrics);
    crl_trainer_free(t);
    g_free(r.dir);
    g_free(info);
    g_free(explicit);
    crl_free(resolved);
    crl__cli_teardown(&ctx);
    return status;
}
