/* crl bench train: frames and wall-clock seconds until DQN and PPO reach a mean evaluation
 * return of 475 on CartPole-v1, PPO with an LSTM 400 on CartPole-v1 without velocities, SAC and TD3 -200
 * on Pendulum-v1, and DQN from CartPole's pixels 195, over 3 seeds. */
#include "config.h"
#include "cli-private.h"

#include <crl/trainer.h>

#include <glib.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

/* The settings of the examples in conf/examples, with a frame budget, an
 * evaluation of 10 episodes every eval_interval frames and stop_return. */
static const struct {
    const char *name, *env, *ini;
    double target;
} jobs[] = {
    { "dqn", "CartPole-v1",
      "[env]\nbackend = classic\nid = CartPole-v1\n"
      "[collector]\nframes_per_batch = 10\ntotal_frames = 150000\ninit_random_frames = 1000\n"
      "[replay]\nstorage = tensor\ncapacity = 50000\nbatch_size = 64\n"
      "[loss]\ntype = dqn\nnum_cells = 128, 128\ndouble_dqn = true\nhard_update_interval = 250\n"
      "eps_end = 0.02\nannealing_num_steps = 10000\n"
      "[optim]\nlr = 0.001\nmax_grad_norm = 10\n"
      "[train]\nnum_updates = 5\neval_interval = 2500\neval_episodes = 10\n",
      475 },
    { "ppo", "CartPole-v1",
      "[env]\nbackend = classic\nid = CartPole-v1\nnum_envs = 8\n"
      "[collector]\nframes_per_batch = 1024\ntotal_frames = 500000\n"
      "[loss]\ntype = ppo\nnum_cells = 64, 64\n"
      "[optim]\nlr = 0.00025\neps = 1e-5\nmax_grad_norm = 0.5\n"
      "[train]\nepochs = 4\nminibatch_size = 256\neval_interval = 8192\neval_episodes = 10\n",
      475 },
    /* conf/examples/cartpole-masked-lstm-ppo.ini */
    { "lstm", "CartPole-pos",
      "[env]\nbackend = classic\nid = CartPole-v1\nnum_envs = 8\ntransforms = mask, norm, init, primer\n"
      "[transform.mask]\ntype = IndexSelectTransform\nindices = 0, 2\n"
      "[transform.norm]\ntype = ObservationNorm\nstandard_normal = true\ninit_stats = 1000\n"
      "[transform.init]\ntype = InitTracker\n"
      "[transform.primer]\ntype = TensorDictPrimer\nprimers.recurrent_state_h = float32 [1, 64] 0\n"
      "primers.recurrent_state_c = float32 [1, 64] 0\n"
      "[collector]\nframes_per_batch = 1024\ntotal_frames = 400000\n"
      "[loss]\ntype = ppo\nnum_cells = 64\n"
      "[net.actor]\ntype = lstm\nhidden_size = 64\n"
      "[optim]\nlr = 0.0005\neps = 1e-5\nmax_grad_norm = 0.5\n"
      "[train]\nepochs = 4\nminibatch_size = 256\nsequence_length = 16\neval_interval = 10240\neval_episodes = 10\n",
      400 },
    { "sac", "Pendulum-v1",
      "[env]\nbackend = classic\nid = Pendulum-v1\n"
      "[collector]\nframes_per_batch = 10\ntotal_frames = 50000\ninit_random_frames = 1000\n"
      "[replay]\nstorage = tensor\ncapacity = 100000\nbatch_size = 128\n"
      "[loss]\ntype = sac\nnum_cells = 128, 128\n"
      "[optim]\nlr = 0.001\n"
      "[train]\nnum_updates = 5\neval_interval = 1000\neval_episodes = 10\n",
      -200 },
    { "td3", "Pendulum-v1",
      "[env]\nbackend = classic\nid = Pendulum-v1\n"
      "[collector]\nframes_per_batch = 10\ntotal_frames = 50000\ninit_random_frames = 1000\n"
      "[replay]\nstorage = tensor\ncapacity = 100000\nbatch_size = 128\n"
      "[loss]\ntype = td3\nnum_cells = 128, 128\nsigma = 0.2\n"
      "[optim]\nlr = 0.001\n"
      "[train]\nnum_updates = 5\neval_interval = 1000\neval_episodes = 10\n",
      -200 },
    /* conf/examples/cartpole-pixels-dqn.ini: grayscale 84x84 frames, 4 stacked, a conv encoder; much the longest */
    { "dqn-pixels", "CartPole-v1",
      "[plugins]\nload = classic, transforms, replay, losses\n"
      "[env]\nbackend = classic\nid = CartPole-v1\nfrom_pixels = true\nrender_width = 84\nrender_height = 84\n"
      "transforms = totensor, gray, stack\n"
      "[transform.totensor]\ntype = ToTensorImage\n[transform.gray]\ntype = GrayScale\n"
      "[transform.stack]\ntype = CatFrames\nN = 4\ndim = -3\n"
      "[collector]\nframes_per_batch = 8\ntotal_frames = 60000\ninit_random_frames = 2000\n"
      "[replay]\nstorage = tensor\ncapacity = 10000\nbatch_size = 32\ncheckpoint = false\n"
      "[loss]\ntype = dqn\nin_key = pixels\ndouble_dqn = true\nloss_function = smooth_l1\n"
      "hard_update_interval = 500\neps_end = 0.05\nannealing_num_steps = 20000\n"
      "[net.q]\nencoder = pixels\nnum_cells = 256\nactivation = relu\n"
      "[net.pixels]\ntype = conv\nnum_cells = 16, 32, 32\nkernel_sizes = 8, 4, 3\nstrides = 4, 2, 1\n"
      "[optim]\nlr = 0.0005\nmax_grad_norm = 10\n"
      "[train]\nnum_updates = 1\neval_interval = 5000\neval_episodes = 5\neval_max_steps = 500\n",
      195 },
};

typedef struct reach {
    double target, best;
    bool reached;
    int64_t frames;
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
        }
    }
    return CRL_OK;
}

/* One training run to the target; *secs is its wall-clock time. */
static int run_one(size_t j, int seed, reach *r, double *secs, crl_error *err)
{
    char *text = g_strdup_printf("%s[train]\nseed = %d\nstop_return = %g\n", jobs[j].ini, seed, jobs[j].target);
    /* [train] appears twice: the config merges repeated sections */
    char *env = g_strdup_printf("env.seed=%d", seed);
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
        rc = crl_config_load_buffer(cfg, jobs[j].name, text, strlen(text), CRL_LAYER_FILE, err);
    if (!rc && !(host = crl_host_new(cfg, &e)))
        rc = crl_error_pass(err, &e, CRL_E_PLUGIN);
    if (!rc)
        rc = crl__cli_load_builtins(host, err);
    if (!rc)
        rc = crl_host_load_configured(host, err);
    if (!rc && !(schema = crl__cli_schema_new(host, &e)))
        rc = crl_error_pass(err, &e, CRL_E_NOMEM);
    if (!rc)
        rc = crl_config_override(cfg, schema, env, err);
    if (!rc)
        rc = crl_config_validate(cfg, schema, err);
    gint64 t0 = g_get_monotonic_time();
    if (!rc && !(t = crl_trainer_from_config(host, cfg, &e)))
        rc = crl_error_pass(err, &e, CRL_E_CONFIG);
    if (!rc)
        rc = crl_trainer_run(t, watch, r, err);
    *secs = (double)(g_get_monotonic_time() - t0) / 1e6;
    crl_trainer_free(t);
    crl_schema_free(schema);
    crl_host_free(host);
    crl_config_free(cfg);
    g_free(text);
    g_free(env);
    return rc;
}

int crl__bench_train(double seconds)
{
    (void)seconds;
    crl__blas_single_thread();
    printf("crl bench train: frames and wall-clock seconds (training and evaluations, one thread)\n"
           "until the mean return of 10 exploration-free evaluation episodes (5 for dqn-pixels) reaches the target,\n"
           "with the settings of the examples in conf/examples, seeds 0, 1, 2.\n\n");
    printf("%-10s %-12s %7s %5s %10s %9s %s\n", "loss", "env", "target", "seed", "frames", "seconds", "");
    int status = CRL_EXIT_OK;
    for (size_t j = 0; j < sizeof jobs / sizeof jobs[0]; j++) {
        double fsum = 0, ssum = 0;
        int n = 0;
        for (int seed = 0; seed < 3; seed++) {
            reach r = { jobs[j].target, -INFINITY, false, 0 };
            double secs = 0;
            crl_error err = { 0 };
            if (run_one(j, seed, &r, &secs, &err)) {
                fprintf(stderr, "crl bench train: %s seed %d: %s\n", jobs[j].name, seed, err.message);
                status = crl__cli_exit_code(&err);
                continue;
            }
            if (r.reached) {
                printf("%-10s %-12s %7g %5d %10lld %9.1f\n", jobs[j].name, jobs[j].env, jobs[j].target, seed,
                       (long long)r.frames, secs);
                fsum += (double)r.frames;
                ssum += secs;
                n++;
            } else {
                printf("%-10s %-12s %7g %5d %10s %9.1f not reached (best %.1f)\n", jobs[j].name, jobs[j].env,
                       jobs[j].target, seed, "-", secs, r.best);
            }
            fflush(stdout);
        }
        if (n)
            printf("%-10s %-12s %7s %5s %10.0f %9.1f mean of %d\n", jobs[j].name, "", "", "", fsum / n, ssum / n, n);
    }
    return status;
}
