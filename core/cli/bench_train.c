/* crl bench train: frames and wall-clock seconds until each training example of conf/examples reaches
 * its target (a mean evaluation return of 475 on CartPole-v1, -200 on Pendulum-v1, 400 on CartPole-v1 without its velocities
 * with an LSTM, 195 on CartPole-v1 from pixels) within its own frame
 * budget, over seeds 0..N-1, and how many seeds reached it. */
#include "config.h"
#include "cli-private.h"
#include "examples-private.h"

#include <crl/trainer.h>

#include <glib.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The examples, run from their files as they are: only the seeds and stop_return (the target) are set. */
static const struct {
    const char *name, *env;
    double target;
} jobs[] = {
    { "cartpole-dqn", "CartPole-v1", 475 },  { "cartpole-ppo", "CartPole-v1", 475 },
    { "pendulum-sac", "Pendulum-v1", -200 }, { "pendulum-td3", "Pendulum-v1", -200 },
    { "pendulum-ddpg", "Pendulum-v1", -200 },
    { "cartpole-masked-lstm-ppo", "CartPole-v1 without velocities", 400 },
    /* the longest by far: a conv network on 84x84 frames */
    { "cartpole-pixels-dqn", "CartPole-v1", 195 },
};

static int n_seeds = 5;
static char **only;

int crl__bench_train_options(const char *seeds, const char *names)
{
    if (seeds) {
        char *end;
        long v = strtol(seeds, &end, 10);
        if (!*seeds || *end || v < 1 || v > 100) {
            fprintf(stderr, "crl bench train: --seeds '%s': give a number of seeds from 1 to 100\n", seeds);
            return CRL_EXIT_USAGE;
        }
        n_seeds = (int)v;
    }
    if (names) {
        g_strfreev(only);
        only = g_strsplit(names, ",", -1);
        for (char **o = only; *o; o++) {
            bool known = false;
            for (size_t j = 0; j < G_N_ELEMENTS(jobs); j++)
                known |= !strcmp(*o, jobs[j].name);
            if (!known) {
                GString *known_names = g_string_new(NULL);
                for (size_t j = 0; j < G_N_ELEMENTS(jobs); j++)
                    g_string_append_printf(known_names, "%s%s", j ? ", " : "", jobs[j].name);
                fprintf(stderr, "crl bench train: --only: no example '%s' (%s)\n", *o, known_names->str);
                g_string_free(known_names, TRUE);
                return CRL_EXIT_USAGE;
            }
        }
    }
    return CRL_EXIT_OK;
}

typedef struct reach {
    double target, best;
    bool reached;
    int64_t frames;
    double seconds;
} reach;

static int watch(void *user, crl_trainer *t, const crl_train_stats *s, crl_error *err)
{
    (void)t;
    (void)err;
    reach *r = user;
    if (s->evaluated && !isnan(s->eval_return)) {
        if (s->eval_return > r->best)
            r->best = s->eval_return;
        if (!r->reached && s->eval_return >= r->target) {
            r->reached = true;
            r->frames = s->frames;
            r->seconds = s->seconds;
        }
    }
    return CRL_OK;
}

/* One training run of the example file to the target; *total its frames. */
static int run_one(const char *path, int seed, reach *r, int64_t *total, crl_error *err)
{
    char *ov[4] = { g_strdup_printf("train.seed=%d", seed), g_strdup_printf("env.seed=%d", seed),
                    g_strdup_printf("train.stop_return=%.17g", r->target), NULL };
    crl_error e;
    crl_error_clear(&e);
    crl_config *cfg = crl_config_new(&e);
    crl_host *host = NULL;
    crl_schema *schema = NULL;
    crl_trainer *t = NULL;
    int rc = cfg ? CRL_OK : crl_error_pass(err, &e, CRL_E_NOMEM);
    if (!rc)
        rc = crl_config_load_defaults(cfg, err);
    if (!rc)
        rc = crl_config_load_file(cfg, path, CRL_LAYER_FILE, err);
    if (!rc && !(host = crl_host_new(cfg, &e)))
        rc = crl_error_pass(err, &e, CRL_E_PLUGIN);
    if (!rc)
        rc = crl__cli_load_builtins(host, err);
    if (!rc)
        rc = crl_host_load_configured(host, err);
    if (!rc && !(schema = crl__cli_schema_new(host, &e)))
        rc = crl_error_pass(err, &e, CRL_E_NOMEM);
    for (char **o = ov; !rc && *o; o++)
        rc = crl_config_override(cfg, schema, *o, err);
    /* as crl run --seeds: the replay sampler's stream too */
    for (size_t i = 0; !rc && i < crl_config_section_count(cfg); i++)
        if (!strcmp(crl_config_section_at(cfg, i), "replay")) {
            char *o = g_strdup_printf("replay.seed=%d", seed);
            rc = crl_config_override(cfg, schema, o, err);
            g_free(o);
            break;
        }
    if (!rc)
        rc = crl_config_validate(cfg, schema, err);
    if (!rc && !(t = crl_trainer_from_config(host, cfg, &e)))
        rc = crl_error_pass(err, &e, CRL_E_CONFIG);
    if (!rc)
        rc = crl_trainer_run(t, watch, r, err);
    *total = t ? crl_trainer_frames(t) : 0;
    crl_trainer_free(t);
    crl_schema_free(schema);
    crl_host_free(host);
    crl_config_free(cfg);
    for (char **o = ov; *o; o++)
        g_free(*o);
    return rc;
}

typedef struct job_result {
    int runs, reached;
    double fsum, ssum, fmin, fmax;
    bool ran;
} job_result;

int crl__bench_train(double seconds)
{
    (void)seconds;
    crl__blas_single_thread();
    const char *dir = crl__examples_dir();
    printf("crl bench train: frames and wall-clock seconds (training and evaluations, one thread) until\n"
           "the mean evaluation return reaches the target, for the examples of %s\n"
           "as they are (their frame budgets and evaluations), seeds 0 to %d.\n\n", dir, n_seeds - 1);
    printf("%-20s %-12s %7s %5s %10s %9s %s\n", "example", "env", "target", "seed", "frames", "seconds", "");
    int status = CRL_EXIT_OK;
    job_result res[G_N_ELEMENTS(jobs)];
    memset(res, 0, sizeof res);
    for (size_t j = 0; j < G_N_ELEMENTS(jobs); j++) {
        if (only && !g_strv_contains((const char *const *)only, jobs[j].name))
            continue;
        char *file = g_strdup_printf("%s/%s.ini", dir, jobs[j].name);
        job_result *jr = &res[j];
        jr->ran = true;
        jr->fmin = INFINITY;
        jr->fmax = -INFINITY;
        for (int seed = 0; seed < n_seeds; seed++) {
            reach r = { jobs[j].target, -INFINITY, false, 0, 0 };
            int64_t total = 0;
            crl_error err = { 0 };
            if (run_one(file, seed, &r, &total, &err)) {
                fprintf(stderr, "crl bench train: %s seed %d: %s\n", jobs[j].name, seed, err.message);
                status = crl__cli_exit_code(&err);
                continue;
            }
            jr->runs++;
            if (r.reached) {
                printf("%-20s %-12s %7g %5d %10lld %9.1f\n", jobs[j].name, jobs[j].env, jobs[j].target, seed,
                       (long long)r.frames, r.seconds);
                jr->reached++;
                jr->fsum += (double)r.frames;
                jr->ssum += r.seconds;
                jr->fmin = fmin(jr->fmin, (double)r.frames);
                jr->fmax = fmax(jr->fmax, (double)r.frames);
            } else {
                printf("%-20s %-12s %7g %5d %10s %9s not reached in %lld frames (best %.1f)\n", jobs[j].name,
                       jobs[j].env, jobs[j].target, seed, "-", "-", (long long)total, r.best);
            }
            fflush(stdout);
        }
        g_free(file);
    }
    printf("\n%-20s %-12s %7s %8s %26s %12s\n", "example", "env", "target", "reached", "frames to target",
           "seconds");
    printf("%-20s %-12s %7s %8s %26s %12s\n", "", "", "", "", "mean (min-max)", "mean");
    for (size_t j = 0; j < G_N_ELEMENTS(jobs); j++) {
        const job_result *jr = &res[j];
        if (!jr->ran)
            continue;
        char rs[16], fr[64] = "-", sc[32] = "-";
        snprintf(rs, sizeof rs, "%d/%d", jr->reached, n_seeds);
        if (jr->reached) {
            snprintf(fr, sizeof fr, "%.0f (%.0f-%.0f)", jr->fsum / jr->reached, jr->fmin, jr->fmax);
            snprintf(sc, sizeof sc, "%.1f", jr->ssum / jr->reached);
        }
        printf("%-20s %-12s %7g %8s %26s %12s\n", jobs[j].name, jobs[j].env, jobs[j].target, rs, fr, sc);
    }
    printf("\nReference: CleanRL's published DQN and PPO on CartPole-v1 reach 475 after about\n"
           "270,000-300,000 environment steps.\n");
    return status;
}
