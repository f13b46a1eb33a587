/* The trainer of crl run (crl/trainer.h): short smoke runs with a learning signal,
 * bitwise reproducibility, checkpoints, bad configs and a non-finite loss. */
#include "host-fixture.h"
#include "keep-cairo.h"
#include "nn-test.h"
#include "ckpt-edit.h"

#include <crl/trainer.h>
#include <glib/gstdio.h>
#include <unistd.h>

#define DQN_INI                                                                                        \
    "[env]\nbackend = classic\nid = CartPole-v1\nseed = 0\n"                                           \
    "[collector]\nframes_per_batch = 10\ntotal_frames = %d\ninit_random_frames = 1000\n"              \
    "[replay]\nstorage = tensor\ncapacity = 20000\nbatch_size = 64\n"                                 \
    "[loss]\ntype = dqn\nnum_cells = 64, 64\ndouble_dqn = true\nhard_update_interval = 250\n"         \
    "eps_end = 0.02\nannealing_num_steps = 5000\n"                                                    \
    "[optim]\nlr = 0.001\nmax_grad_norm = 10\n"                                                       \
    "[train]\nnum_updates = 5\neval_interval = %d\n%s"

static crl_trainer *open_trainer(crl_test_host *h, const char *ini, crl_error *e)
{
    crl_test_host_open(h, "classic, replay, losses, transforms", ini);
    return crl_trainer_from_config(h->host, h->cfg, e);
}

typedef struct evals {
    double first, best, last_loss;
    int n;
} evals;

static int record(void *user, crl_trainer *t, const crl_train_stats *s, crl_error *err)
{
    (void)t;
    (void)err;
    evals *ev = user;
    if (s->evaluated) {
        if (ev->n++ == 0)
            ev->first = s->eval_return;
        if (s->eval_return > ev->best)
            ev->best = s->eval_return;
    }
    if (!isnan(s->loss))
        ev->last_loss = s->loss;
    return CRL_OK;
}

/* Train the config to its end and return what the evaluations scored. */
static evals train_evals(const char *ini)
{
    crl_test_host h;
    crl_error e = { 0 };
    crl_trainer *t = open_trainer(&h, ini, &e);
    ck_assert_msg(t != NULL, "trainer: %s", e.message);
    evals ev = { 0, -1e9, NAN, 0 };
    ck_assert_msg(crl_trainer_run(t, record, &ev, &e) == CRL_OK, "run: %s", e.message);
    crl_trainer_free(t);
    crl_test_host_close(&h);
    return ev;
}

/* The learning smoke runs: the best evaluation return reaches `threshold`, far above a random policy's
 * (CartPole about 22, Pendulum -1200 to -1600), with seed 0 or, failing that, seed 1.
 *
 * What they cover is that a loss learns, not a trajectory: results pass through sgemm and libm, whose last
 * bits differ between OpenBLAS kernels and between glibc's FMA and plain code paths, so the same seed
 * learns a little differently on another CPU.  Thresholds sit at about 60% of the worst best return seen
 * over 20 seeds on every kernel this machine offers (Haswell, Zen, SkylakeX, Cooperlake, SandyBridge,
 * Nehalem, Prescott, Core2); the second seed turns a rare miss of one seed into the square of it.  No
 * ratio to the first evaluation: that is a noisy 3-episode score taken after some training. */
static evals learns(const char *ini, double threshold, const char *what)
{
    evals ev = train_evals(ini);
    if (ev.best >= threshold)
        return ev;
    ck_assert_msg(strstr(ini, "seed = 0\n") != NULL, "%s: the config has no 'seed = 0' line", what);
    GString *again = g_string_new(ini);
    g_string_replace(again, "seed = 0\n", "seed = 1\n", 1);
    evals ev1 = train_evals(again->str);
    g_string_free(again, TRUE);
    ck_assert_msg(ev1.best >= threshold, "%s: best eval return %g with seed 0 and %g with seed 1, below %g", what,
                  ev.best, ev1.best, threshold);
    return ev1;
}

/* A few seconds of DQN on CartPole. */
START_TEST(dqn_learns)
{
    char *ini = g_strdup_printf(DQN_INI, 20000, 1000, "eval_episodes = 3\n");
    evals ev = learns(ini, 150, "dqn");
    ck_assert_int_gt(ev.n, 5);
    ck_assert(isfinite(ev.last_loss));
    g_free(ini);
}
END_TEST

/* Parameters after a run, as a new tensor. */
static crl_tensor *params_after(const char *ini)
{
    crl_test_host h;
    crl_error e = { 0 };
    crl_trainer *t = open_trainer(&h, ini, &e);
    ck_assert_msg(t != NULL, "trainer: %s", e.message);
    ck_assert_msg(crl_trainer_run(t, NULL, NULL, &e) == CRL_OK, "run: %s", e.message);
    const char *name;
    crl_tensor *p, *g;
    ck_assert_int_eq(crl_trainer_loss_ops(t)->param(crl_trainer_loss_state(t), 0, &name, &p, &g, &e), CRL_OK);
    crl_tensor *c = crl_tensor_clone(p, &e);
    crl_trainer_free(t);
    crl_test_host_close(&h);
    return c;
}

START_TEST(dqn_reproducible)
{
    char *ini = g_strdup_printf(DQN_INI, 3000, 0, "eval_episodes = 0\n");
    crl_tensor *a = params_after(ini), *b = params_after(ini);
    ck_assert(crl_tensor_equal(a, b));
    g_free(ini);
    ini = g_strdup_printf(DQN_INI, 3000, 0, "eval_episodes = 0\nseed = 1\n");
    crl_tensor *c = params_after(ini);
    ck_assert(!crl_tensor_equal(a, c));
    UNREF_ALL(a, b, c);
    g_free(ini);
}
END_TEST

START_TEST(save_load)
{
    crl_test_host h, h2;
    crl_error e = { 0 };
    char *ini = g_strdup_printf(DQN_INI, 2000, 0, "eval_episodes = 0\n");
    crl_trainer *t = open_trainer(&h, ini, &e);
    ck_assert_int_eq(crl_trainer_run(t, NULL, NULL, &e), CRL_OK);
    char path[] = "/tmp/crl-test-trainer-XXXXXX";
    int fd = mkstemp(path);
    close(fd);
    ck_assert_msg(crl_trainer_save(t, path, &e) == CRL_OK, "save: %s", e.message);
    crl_trainer *t2 = open_trainer(&h2, ini, &e);
    ck_assert_msg(crl_trainer_load(t2, path, &e) == CRL_OK, "load: %s", e.message);
    const char *name;
    crl_tensor *p, *g, *p2;
    crl_trainer_loss_ops(t)->param(crl_trainer_loss_state(t), 0, &name, &p, &g, &e);
    crl_trainer_loss_ops(t2)->param(crl_trainer_loss_state(t2), 0, &name, &p2, &g, &e);
    ck_assert(crl_tensor_equal(p, p2));
    ck_assert_int_eq(crl_optim_steps(crl_trainer_optim(t, 0)), crl_optim_steps(crl_trainer_optim(t2, 0)));
    /* A corrupt file is refused. */
    FILE *f = fopen(path, "r+b");
    fseek(f, 200, SEEK_SET);
    fputc('x', f);
    fclose(f);
    ck_assert_int_eq(crl_trainer_load(t2, path, &e), CRL_E_CORRUPT);
    crl_trainer_free(t);
    crl_trainer_free(t2);
    crl_test_host_close(&h);
    crl_test_host_close(&h2);
    g_unlink(path);
    g_free(ini);
}
END_TEST

static void bad_config(const char *ini, int code, const char *needle)
{
    crl_test_host h;
    crl_error e = { 0 };
    crl_trainer *t = open_trainer(&h, ini, &e);
    ck_assert_ptr_null(t);
    ck_assert_msg(e.code == code, "code %s for '%s': %s", crl_status_name(e.code), needle, e.message);
    assert_msg_has(&e, needle);
    crl_test_host_close(&h);
}

#define ENV_COLL "[env]\nbackend = classic\nid = CartPole-v1\n[collector]\nframes_per_batch = 10\ntotal_frames = 100\n"

START_TEST(bad_configs)
{
    bad_config(ENV_COLL "[replay]\ncapacity = 1000\n", CRL_E_CONFIG, "type");
    /* The loss component is looked up as crl_host_lookup does (crl run's validation says CRL_E_CONFIG first). */
    bad_config(ENV_COLL "[replay]\ncapacity = 1000\n[loss]\ntype = dqm\n", CRL_E_NOT_FOUND, "did you mean 'dqn'?");
    bad_config(ENV_COLL "[loss]\ntype = dqn\n", CRL_E_CONFIG, "[replay]");
    bad_config(ENV_COLL "[replay]\ncapacity = 1000\n[loss]\ntype = dqn\ngama = 0.9\n", CRL_E_CONFIG, "gamma");
    /* Each section the trainer reads is checked against its own table. */
    bad_config(ENV_COLL "[replay]\ncapacity = 1000\n[loss]\ntype = dqn\n[optim]\nlrr = 0.1\n", CRL_E_CONFIG,
               "test.ini:14: unknown key 'lrr' in [optim]; did you mean 'lr'?");
    bad_config(ENV_COLL "[replay]\ncapacity = 1000\n[loss]\ntype = dqn\n[train]\nepochs = 0\n", CRL_E_CONFIG,
               "[train] epochs = '0'");
    bad_config(ENV_COLL "num_collectors = 2\nsync = false\n[replay]\ncapacity = 1000\n[loss]\ntype = dqn\n",
               CRL_E_CONFIG, "sync = false: training with asynchronous sub-collectors needs them in other processes");
    bad_config(ENV_COLL "[replay]\ncapacity = 1000\n[loss]\ntype = dqn\n[distributed]\nbackend = mpi\n", CRL_E_CONFIG,
               "[distributed] backend = mpi: this trainer runs its sub-collectors in this process");
    bad_config("[env]\nbackend = classic\nid = Pendulum-v1\n[collector]\nframes_per_batch = 10\n"
               "total_frames = 100\n[replay]\ncapacity = 1000\n[loss]\ntype = dqn\n",
               CRL_E_INVALID, "discrete action");
}
END_TEST

/* Poison a parameter from the progress callback: the next update's loss is
 * not finite and the run stops with a message naming it. */
static int poison(void *user, crl_trainer *t, const crl_train_stats *s, crl_error *err)
{
    (void)user;
    if (s->frames >= 1500) {
        const char *name;
        crl_tensor *p, *g;
        if (crl_trainer_loss_ops(t)->param(crl_trainer_loss_state(t), 0, &name, &p, &g, err))
            return err->code;
        crl_tensor_flat_set(p, crl_tensor_numel(p) - 1, NAN);  /* an output bias: ReLU would swallow a NaN weight */
    }
    return CRL_OK;
}

START_TEST(non_finite_stops)
{
    crl_test_host h;
    crl_error e = { 0 };
    char *ini = g_strdup_printf(DQN_INI, 3000, 0, "eval_episodes = 0\n");
    crl_trainer *t = open_trainer(&h, ini, &e);
    int rc = crl_trainer_run(t, poison, NULL, &e);
    ck_assert_int_eq(rc, CRL_E_RUNTIME);
    assert_msg_has(&e, "not finite");
    assert_msg_has(&e, "frame ");
    crl_trainer_free(t);
    crl_test_host_close(&h);
    g_free(ini);
}
END_TEST

/* PPO on CartPole for 40960 frames (each seed's best was 349 to 500 across kernels and seeds). */
START_TEST(ppo_learns)
{
    learns("[env]\nbackend = classic\nid = CartPole-v1\nnum_envs = 8\nseed = 0\n"
                           "[collector]\nframes_per_batch = 1024\ntotal_frames = 40960\n"
                           "[loss]\ntype = ppo\n"
                           "[optim]\nlr = 0.00025\neps = 1e-5\nmax_grad_norm = 0.5\n"
                           "[train]\nminibatch_size = 256\neval_interval = 4096\neval_episodes = 3\n",
           250, "ppo");
}
END_TEST

/* Copies of every parameter vector of a trainer's loss, as a TensorDict p0, p1, ... */
static crl_td *all_params(crl_trainer *t)
{
    crl_error e = { 0 };
    const crl_loss_ops *ops = crl_trainer_loss_ops(t);
    size_t n = ops->num_params(crl_trainer_loss_state(t));
    crl_tensor *parts[8];
    ck_assert_uint_le(n, 8);
    for (size_t i = 0; i < n; i++) {
        const char *name;
        crl_tensor *g;
        ck_assert_int_eq(ops->param(crl_trainer_loss_state(t), i, &name, &parts[i], &g, &e), CRL_OK);
    }
    crl_td *td = crl_td_new(0, NULL, &e);
    for (size_t i = 0; i < n; i++) {
        char key[16];
        snprintf(key, sizeof key, "p%zu", i);
        crl_tensor *c = crl_tensor_clone(parts[i], &e);
        crl_td_set(td, key, c, &e);
        crl_tensor_unref(c);
    }
    return td;
}

/* N + N frames through a checkpoint equal 2N frames in one go, bitwise. */
static void resume_equals(const char *ini_2n, const char *ini_n)
{
    crl_test_host h1, h2, h3;
    crl_error e = { 0 };
    crl_trainer *full = open_trainer(&h1, ini_2n, &e);
    ck_assert_msg(full != NULL, "trainer: %s", e.message);
    ck_assert_msg(crl_trainer_run(full, NULL, NULL, &e) == CRL_OK, "2N: %s", e.message);

    crl_trainer *half = open_trainer(&h2, ini_n, &e);
    ck_assert_msg(crl_trainer_run(half, NULL, NULL, &e) == CRL_OK, "N: %s", e.message);
    char dir[] = "/tmp/crl-test-resume-XXXXXX";
    ck_assert_ptr_nonnull(g_mkdtemp(dir));
    char *ck = g_build_filename(dir, "checkpoint", NULL);
    ck_assert_msg(crl_trainer_checkpoint(half, ck, &e) == CRL_OK, "checkpoint: %s", e.message);
    int64_t half_frames = crl_trainer_frames(half);
    crl_trainer_free(half);
    crl_test_host_close(&h2);

    crl_trainer *rest = open_trainer(&h3, ini_2n, &e);
    ck_assert_msg(crl_trainer_resume(rest, ck, &e) == CRL_OK, "resume: %s", e.message);
    ck_assert_int_eq(crl_trainer_frames(rest), half_frames);
    ck_assert_msg(crl_trainer_run(rest, NULL, NULL, &e) == CRL_OK, "N more: %s", e.message);

    crl_td *a = all_params(full), *b = all_params(rest);
    ck_assert_msg(crl_td_equal(a, b), "parameters differ after N + N and 2N frames");
    ck_assert_int_eq(crl_optim_steps(crl_trainer_optim(full, 0)), crl_optim_steps(crl_trainer_optim(rest, 0)));
    ck_assert_int_eq(crl_trainer_frames(full), crl_trainer_frames(rest));
    if (crl_trainer_replay(full))
        ck_assert_uint_eq(crl_replay_len(crl_trainer_replay(full)), crl_replay_len(crl_trainer_replay(rest)));
    crl_td_unref(a);
    crl_td_unref(b);
    crl_trainer_free(full);
    crl_trainer_free(rest);
    crl_test_host_close(&h1);
    crl_test_host_close(&h3);
    char *cmd = g_strdup_printf("rm -rf '%s'", dir);
    ck_assert_int_eq(system(cmd), 0);
    g_free(cmd);
    g_free(ck);
}

START_TEST(dqn_resume_bitwise)
{
    char *a = g_strdup_printf(DQN_INI, 4000, 1000, "eval_episodes = 2\n");
    char *b = g_strdup_printf(DQN_INI, 2000, 1000, "eval_episodes = 2\n");
    resume_equals(a, b);
    g_free(a);
    g_free(b);
}
END_TEST

/* [replay] checkpoint = false: the checkpoint has no replay directory, and a resume refills the buffer from
 * the re-collected frames (the same items, as the round-robin writer puts them). */
START_TEST(replay_not_checkpointed)
{
    char *ini = g_strdup_printf(DQN_INI, 1500, 1000, "eval_episodes = 0\n[replay]\ncheckpoint = false\n");
    crl_test_host h1, h2;
    crl_error e = { 0 };
    crl_trainer *t = open_trainer(&h1, ini, &e);
    ck_assert_msg(t != NULL, "trainer: %s", e.message);
    ck_assert_msg(crl_trainer_run(t, NULL, NULL, &e) == CRL_OK, "run: %s", e.message);
    char dir[] = "/tmp/crl-test-noreplay-XXXXXX";
    ck_assert_ptr_nonnull(g_mkdtemp(dir));
    char *ck = g_build_filename(dir, "checkpoint", NULL), *rdir = g_build_filename(ck, "replay", NULL);
    ck_assert_msg(crl_trainer_checkpoint(t, ck, &e) == CRL_OK, "checkpoint: %s", e.message);
    ck_assert(g_file_test(ck, G_FILE_TEST_IS_DIR));
    ck_assert(!g_file_test(rdir, G_FILE_TEST_EXISTS));
    size_t len = crl_replay_len(crl_trainer_replay(t));
    ck_assert_uint_eq(len, 1500);
    crl_trainer *r = open_trainer(&h2, ini, &e);
    ck_assert_msg(crl_trainer_resume(r, ck, &e) == CRL_OK, "resume: %s", e.message);
    ck_assert_int_eq(crl_trainer_frames(r), crl_trainer_frames(t));
    ck_assert_uint_eq(crl_replay_len(crl_trainer_replay(r)), len);
    crl_trainer_free(r);
    crl_trainer_free(t);
    crl_test_host_close(&h1);
    crl_test_host_close(&h2);
    char *cmd = g_strdup_printf("rm -rf '%s'", dir);
    ck_assert_int_eq(system(cmd), 0);
    g_free(cmd);
    g_free(rdir);
    g_free(ck);
    g_free(ini);
}
END_TEST

#define PPO_RESUME_INI                                                                         \
    "[env]\nbackend = classic\nid = CartPole-v1\nnum_envs = 4\nseed = 3\n"                     \
    "[collector]\nframes_per_batch = 256\ntotal_frames = %d\n"                                 \
    "[loss]\ntype = ppo\n[optim]\nlr = 0.001\n[train]\nminibatch_size = 64\neval_episodes = 0\n"

START_TEST(ppo_resume_bitwise)
{
    char *a = g_strdup_printf(PPO_RESUME_INI, 2048), *b = g_strdup_printf(PPO_RESUME_INI, 1024);
    resume_equals(a, b);
    g_free(a);
    g_free(b);
}
END_TEST

/* A recurrent run of ini_n trained, checkpointed and resumed into a trainer of ini_2n: the loss has
 * n_params networks, optimizer `optim` has stepped, the resume restores every parameter and that
 * optimizer's step count exactly, and the rest of the run reaches total frames. */
static void resume_restores(const char *ini_2n, const char *ini_n, int64_t total, unsigned n_params, int optim)
{
    crl_test_host h1, h2;
    crl_error e = { 0 };
    crl_trainer *half = open_trainer(&h1, ini_n, &e);
    ck_assert_msg(half != NULL, "trainer: %s", e.message);
    ck_assert_msg(crl_trainer_run(half, NULL, NULL, &e) == CRL_OK, "N: %s", e.message);
    ck_assert_uint_eq(crl_trainer_loss_ops(half)->num_params(crl_trainer_loss_state(half)), n_params);
    ck_assert_int_gt(crl_optim_steps(crl_trainer_optim(half, optim)), 0);
    char dir[] = "/tmp/crl-test-resume-XXXXXX";
    ck_assert_ptr_nonnull(g_mkdtemp(dir));
    char *ck = g_build_filename(dir, "checkpoint", NULL);
    ck_assert_msg(crl_trainer_checkpoint(half, ck, &e) == CRL_OK, "checkpoint: %s", e.message);
    crl_trainer *rest = open_trainer(&h2, ini_2n, &e);
    ck_assert_msg(rest != NULL, "trainer: %s", e.message);
    crl_td *p0 = all_params(half), *p1 = all_params(rest);
    ck_assert(!crl_td_equal(p0, p1));
    crl_td_unref(p1);
    ck_assert_msg(crl_trainer_resume(rest, ck, &e) == CRL_OK, "resume: %s", e.message);
    p1 = all_params(rest);
    ck_assert_msg(crl_td_equal(p0, p1), "parameters differ after the resume");
    ck_assert_int_eq(crl_optim_steps(crl_trainer_optim(half, optim)), crl_optim_steps(crl_trainer_optim(rest, optim)));
    ck_assert_msg(crl_trainer_run(rest, NULL, NULL, &e) == CRL_OK, "N more: %s", e.message);
    ck_assert_int_eq(crl_trainer_frames(rest), total);
    crl_td_unref(p0);
    crl_td_unref(p1);
    crl_trainer_free(half);
    crl_trainer_free(rest);
    crl_test_host_close(&h1);
    crl_test_host_close(&h2);
    char *cmd = g_strdup_printf("rm -rf '%s'", dir);
    ck_assert_int_eq(system(cmd), 0);
    g_free(cmd);
    g_free(ck);
}

/* An LSTM actor: acting carries the state (TensorDictPrimer, InitTracker), training draws [4, 16]
 * slices; the recurrent network and its optimizer go through the checkpoint exactly, and so does the state
 * the policy carries (the re-collection recomputes it with the checkpoint's parameters; the checkpoint's
 * copy replaces it), so N + N frames equal 2N bitwise (resume_any_total covers checkpoints off a batch
 * boundary). */
#define LSTM_INI                                                                               \
    "[env]\nbackend = classic\nid = CartPole-v1\nnum_envs = 4\nseed = 3\ntransforms = i, p\n"     \
    "[transform.i]\ntype = InitTracker\n"                                                      \
    "[transform.p]\ntype = TensorDictPrimer\nprimers.recurrent_state_h = float32 [1, 8] 0\n"   \
    "primers.recurrent_state_c = float32 [1, 8] 0\n"                                          \
    "[collector]\nframes_per_batch = 256\ntotal_frames = %d\n"                                 \
    "[loss]\ntype = ppo\nnum_cells = 16\n[net.actor]\ntype = lstm\nhidden_size = 8\n"          \
    "[optim]\nlr = 0.001\n[train]\nminibatch_size = 64\nsequence_length = 16\neval_episodes = 0\n"

START_TEST(lstm_ppo_resume)
{
    char *a = g_strdup_printf(LSTM_INI, 2048), *b = g_strdup_printf(LSTM_INI, 1000);
    /* 1000 frames: the last batch (232 frames, 58 per env) is cut into slices of 2, the largest length
     * up to 16 that divides it */
    resume_restores(a, b, 2048, 3, 2);
    /* from a checkpoint at a batch boundary (1000 ended with a batch of its own) */
    char *c = g_strdup_printf(LSTM_INI, 1024);
    resume_equals(a, c);
    g_free(c);
    g_free(a);
    g_free(b);
}
END_TEST

/* LSTM_INI with a GRU (one state key). */
static char *gru_ini(int total)
{
    GString *s = g_string_new(NULL);
    g_string_printf(s, LSTM_INI, total);
    g_string_replace(s, "primers.recurrent_state_h = float32 [1, 8] 0\nprimers.recurrent_state_c = float32 [1, 8] 0\n",
                     "primers.recurrent_state = float32 [1, 8] 0\n", 1);
    g_string_replace(s, "type = lstm", "type = gru", 1);
    return g_string_free(s, FALSE);
}

START_TEST(gru_ppo_resume_bitwise)
{
    char *a = gru_ini(2048), *b = gru_ini(768);
    resume_equals(a, b);
    g_free(a);
    g_free(b);
}
END_TEST

/* Recurrent DQN: two envs acting with the LSTM's state carried in the TensorDict, updates on [8, 4] slices the
 * slice sampler draws within one trajectory (collector.traj_ids); both networks and their targets go through
 * the checkpoint exactly, and the resumed run goes on as the uninterrupted one. */
#define LSTM_DQN_INI                                                                             \
    "[env]\nbackend = classic\nid = CartPole-v1\nnum_envs = 2\nseed = 5\ntransforms = i, p\n"       \
    "[transform.i]\ntype = InitTracker\n"                                                        \
    "[transform.p]\ntype = TensorDictPrimer\nprimers.recurrent_state_h = float32 [1, 8] 0\n"     \
    "primers.recurrent_state_c = float32 [1, 8] 0\n"                                            \
    "[collector]\nframes_per_batch = 16\ntotal_frames = %d\ninit_random_frames = 200\n"          \
    "[replay]\nstorage = tensor\ncapacity = 2000\nbatch_size = 32\nsampler = slice\nslice_len = 4\n" \
    "traj_key = collector.traj_ids\n"                                                           \
    "[loss]\ntype = dqn\nnum_cells = 16\ndouble_dqn = true\nhard_update_interval = 10\n"         \
    "[net.q]\ntype = lstm\nhidden_size = 8\n"                                                   \
    "[optim]\nlr = 0.001\n[train]\nsequence_length = 4\neval_episodes = 1\neval_interval = 400\n"

START_TEST(lstm_dqn_trains_and_resumes)
{
    char *a = g_strdup_printf(LSTM_DQN_INI, 1200), *b = g_strdup_printf(LSTM_DQN_INI, 800);
    resume_restores(a, b, 1200, 2, 1);
    /* with the carried state in the checkpoint, N + N frames equal 2N bitwise */
    resume_equals(a, b);
    g_free(a);
    g_free(b);
}
END_TEST

/* Two sub-collectors acting with their own policy copies, synced every 7 (DQN) or 3 (PPO) optimizer
 * steps: the checkpoint keeps each copy's actions, stream and the last sync's weights, and N + N frames
 * through a resume train as 2N do. */
static char *with_copies(const char *ini, int sync_interval)
{
    GString *s = g_string_new(ini);
    g_string_replace(s, "[collector]\n", "[collector]\nnum_collectors = 2\n", 1);
    g_string_append_printf(s, "[distributed]\nsync_interval = %d\n", sync_interval);
    return g_string_free(s, FALSE);
}

START_TEST(copies_resume_bitwise)
{
    char *a0 = g_strdup_printf(DQN_INI, 3000, 500, "eval_episodes = 0\n");
    char *b0 = g_strdup_printf(DQN_INI, 1500, 500, "eval_episodes = 0\n");
    char *a = with_copies(a0, 7), *b = with_copies(b0, 7);
    resume_equals(a, b);
    g_free(a0);
    g_free(b0);
    g_free(a);
    g_free(b);
    a0 = g_strdup_printf(PPO_RESUME_INI, 2048);
    b0 = g_strdup_printf(PPO_RESUME_INI, 1024);
    a = with_copies(a0, 3);
    b = with_copies(b0, 3);
    resume_equals(a, b);
    g_free(a0);
    g_free(b0);
    g_free(a);
    g_free(b);
    /* each sub-collector's policy copy carries its own recurrent state */
    a0 = g_strdup_printf(LSTM_INI, 2048);
    b0 = g_strdup_printf(LSTM_INI, 1024);
    a = with_copies(a0, 3);
    b = with_copies(b0, 3);
    resume_equals(a, b);
    g_free(a0);
    g_free(b0);
    g_free(a);
    g_free(b);
}
END_TEST

/* Run `ini` to its end and checkpoint it into DIR/checkpoint; the path of its trainer.ckpt. */
static char *checkpointed(const char *ini, const char *dir)
{
    crl_test_host h;
    crl_error e = { 0 };
    crl_trainer *t = open_trainer(&h, ini, &e);
    ck_assert_msg(t != NULL, "trainer: %s", e.message);
    ck_assert_msg(crl_trainer_run(t, NULL, NULL, &e) == CRL_OK, "run: %s", e.message);
    char *ck = g_build_filename(dir, "checkpoint", NULL);
    ck_assert_msg(crl_trainer_checkpoint(t, ck, &e) == CRL_OK, "checkpoint: %s", e.message);
    crl_trainer_free(t);
    crl_test_host_close(&h);
    char *path = g_build_filename(ck, "trainer.ckpt", NULL);
    g_free(ck);
    return path;
}

/* Resume `ini` from a checkpoint directory whose trainer.ckpt is `file`: the code, the message in msg. */
static int resume_from_file(const char *ini, const char *file, char *msg, size_t cap)
{
    char *dir = g_path_get_dirname(file);
    char *tmp = g_build_filename(dir, "..", "edited", NULL), *dst = g_build_filename(tmp, "trainer.ckpt", NULL);
    ck_assert_int_eq(g_mkdir_with_parents(tmp, 0700), 0);
    gchar *bytes;
    gsize n;
    ck_assert(g_file_get_contents(file, &bytes, &n, NULL));
    ck_assert(g_file_set_contents(dst, bytes, (gssize)n, NULL));
    g_free(bytes);
    crl_test_host h;
    crl_error e = { 0 };
    crl_trainer *t = open_trainer(&h, ini, &e);
    ck_assert_msg(t != NULL, "trainer: %s", e.message);
    int rc = crl_trainer_resume(t, tmp, &e);
    if (rc == CRL_OK)
        ck_assert_msg(crl_trainer_run(t, NULL, NULL, &e) == CRL_OK, "after the resume: %s", e.message);
    snprintf(msg, cap, "%s", e.message);
    crl_trainer_free(t);
    crl_test_host_close(&h);
    g_free(dst);
    g_free(tmp);
    g_free(dir);
    return rc;
}

/* A tensor of the given shape filled with v. */
static crl_tensor *filled(int nd, const int64_t *shape, double v)
{
    crl_error e = { 0 };
    crl_tensor *t = crl_tensor_new(CRL_F32, nd, shape, &e);
    ck_assert_msg(t != NULL, "%s", e.message);
    crl_tensor_fill(t, v);
    return t;
}

/* The checkpoint's record of the carried state: what it holds, an older checkpoint without it (resumes, not
 * bitwise), and records that do not fit the policy or are cut short (CRL_E_CORRUPT naming the file, section
 * and key). */
START_TEST(carried_state_checked)
{
    char dir[] = "/tmp/crl-test-carried-XXXXXX";
    ck_assert_ptr_nonnull(g_mkdtemp(dir));
    char *ini = g_strdup_printf(LSTM_INI, 1000), *more = g_strdup_printf(LSTM_INI, 1500);
    char *path = checkpointed(ini, dir);
    crl_error e = { 0 };
    crl_ckpt_reader *r = crl_ckpt_reader_open(path, "crl.train", UINT32_MAX, &e);
    ck_assert_msg(r != NULL, "%s", e.message);
    crl_td *kept = crl_ckpt_read_td(r, "trainer/carried/0", &e);
    ck_assert_msg(kept != NULL, "%s", e.message);
    crl_ckpt_reader_free(r);
    ck_assert_uint_eq(crl_td_len(kept), 2);
    static const int64_t sh[3] = { 4, 1, 8 }, wide[3] = { 4, 1, 9 };
    for (int i = 0; i < 2; i++) {
        crl_tensor *x = crl_td_get(kept, i ? "recurrent_state_c" : "recurrent_state_h");
        ck_assert_ptr_nonnull(x);
        ck_assert_int_eq(crl_tensor_dtype(x), CRL_F32);
        ck_assert_int_eq(crl_tensor_ndim(x), 3);
        ck_assert(!memcmp(crl_tensor_shape(x), sh, sizeof sh));
    }
    char msg[1024];
    ck_assert_int_eq(resume_from_file(more, path, msg, sizeof msg), CRL_OK);

    char *bad = g_build_filename(dir, "bad.ckpt", NULL);
    /* an older checkpoint: no record; the resume recomputes the state (and says so on the host's log) */
    ckpt_edit_swap_td(path, bad, "crl.train", "trainer/carried/0", NULL);
    ck_assert_int_eq(resume_from_file(more, bad, msg, sizeof msg), CRL_OK);

    /* a state of another shape, a missing one, one the policy does not carry */
    crl_td *td = crl_td_new(1, sh, &e);
    crl_tensor *h = filled(3, wide, 0.5), *c = filled(3, sh, 0.5), *x = filled(3, sh, 0);
    crl_td_set(td, "recurrent_state_h", h, &e);
    crl_td_set(td, "recurrent_state_c", c, &e);
    ckpt_edit_swap_td(path, bad, "crl.train", "trainer/carried/0", td);
    ck_assert_int_eq(resume_from_file(more, bad, msg, sizeof msg), CRL_E_CORRUPT);
    ck_assert_msg(strstr(msg, "bad.ckpt") || strstr(msg, "trainer.ckpt"), "%s", msg);
    ck_assert_msg(strstr(msg, "section 'trainer/carried/0/td': the policy carries 'recurrent_state_h' as float32 "
                              "[4, 1, 8], the checkpoint holds float32 [4, 1, 9]"), "%s", msg);
    crl_td_del(td, "recurrent_state_h", &e);
    ckpt_edit_swap_td(path, bad, "crl.train", "trainer/carried/0", td);
    ck_assert_int_eq(resume_from_file(more, bad, msg, sizeof msg), CRL_E_CORRUPT);
    ck_assert_msg(strstr(msg, "the policy carries 'recurrent_state_h' as float32 [4, 1, 8], the checkpoint has none"),
                  "%s", msg);
    crl_td_set(td, "recurrent_state_h", c, &e);
    crl_td_set(td, "hidden", x, &e);
    ckpt_edit_swap_td(path, bad, "crl.train", "trainer/carried/0", td);
    ck_assert_int_eq(resume_from_file(more, bad, msg, sizeof msg), CRL_E_CORRUPT);
    ck_assert_msg(strstr(msg, "'hidden' is no state the policy carries (it carries recurrent_state_c, "
                              "recurrent_state_h)"), "%s", msg);
    /* a leaf cut short: its bytes do not match the index (the checksums being right) */
    size_t n;
    uint8_t *leaf = ckpt_edit_section(path, "crl.train", "trainer/carried/0/0", &n);
    ckpt_edit_replace(path, bad, "crl.train", "trainer/carried/0/0", leaf, n - 4);
    ck_assert_int_eq(resume_from_file(more, bad, msg, sizeof msg), CRL_E_CORRUPT);
    ck_assert_msg(strstr(msg, "trainer/carried/0") && strstr(msg, ".ckpt"), "%s", msg);
    g_free(leaf);
    crl_td_unref(td);
    crl_tensor_unref(h);
    crl_tensor_unref(c);
    crl_tensor_unref(x);
    crl_td_unref(kept);

    /* two sub-collectors, the record of one missing */
    char *ini2 = with_copies(ini, 3), *more2 = with_copies(more, 3);
    char dir2[] = "/tmp/crl-test-carried-XXXXXX";
    ck_assert_ptr_nonnull(g_mkdtemp(dir2));
    char *path2 = checkpointed(ini2, dir2);
    ckpt_edit_swap_td(path2, bad, "crl.train", "trainer/carried/1", NULL);
    ck_assert_int_eq(resume_from_file(more2, bad, msg, sizeof msg), CRL_E_CORRUPT);
    ck_assert_msg(strstr(msg, "no section 'trainer/carried/1/td': the checkpoint keeps the policy's carried state "
                              "for 1 of its 2 sub-collectors"), "%s", msg);

    /* a policy that carries nothing keeps no record (and resumes without a word about it) */
    char *ppo = g_strdup_printf(PPO_RESUME_INI, 512), *ppo_more = g_strdup_printf(PPO_RESUME_INI, 1024);
    char dir3[] = "/tmp/crl-test-carried-XXXXXX";
    ck_assert_ptr_nonnull(g_mkdtemp(dir3));
    char *path3 = checkpointed(ppo, dir3);
    r = crl_ckpt_reader_open(path3, "crl.train", UINT32_MAX, &e);
    ck_assert_msg(r != NULL, "%s", e.message);
    for (size_t i = 0; i < crl_ckpt_section_count(r); i++)
        ck_assert_msg(strncmp(crl_ckpt_section_name(r, i), "trainer/carried", 15), "%s", crl_ckpt_section_name(r, i));
    crl_ckpt_reader_free(r);
    ck_assert_int_eq(resume_from_file(ppo_more, path3, msg, sizeof msg), CRL_OK);

    const char *dirs[] = { dir, dir2, dir3 };
    for (int i = 0; i < 3; i++) {
        char *cmd = g_strdup_printf("rm -rf '%s'", dirs[i]);
        ck_assert_int_eq(system(cmd), 0);
        g_free(cmd);
    }
    g_free(ppo);
    g_free(ppo_more);
    g_free(path3);
    g_free(path2);
    g_free(ini2);
    g_free(more2);
    g_free(bad);
    g_free(path);
    g_free(ini);
    g_free(more);
}
END_TEST

/* A policy copy replays only when new, and takes its state only once every replayed action was used. */
START_TEST(policy_copy_replay_checked)
{
    crl_test_host h;
    crl_error e = { 0 };
    char *ini = g_strdup_printf(DQN_INI, 1000, 0, "eval_episodes = 0\n");
    crl_test_host_open(&h, "classic, replay, losses", ini);
    crl_env *env = crl_env_from_config(h.host, h.cfg, "env", &e);
    ck_assert_msg(env != NULL, "env: %s", e.message);
    crl_policy_copy *p = crl_policy_copy_new(h.host, h.cfg, env, 0, &e);
    ck_assert_msg(p != NULL, "copy: %s", e.message);
    int64_t acts[2] = { 1, 0 };
    ck_assert_int_eq(crl_policy_copy_replay(p, NULL, 8, &e), CRL_E_INVALID);
    ck_assert_int_eq(crl_policy_copy_replay(p, acts, sizeof acts, &e), CRL_OK);
    crl_policy_copy_state st = { .struct_size = sizeof st, .version = 0, .explore_frames = 0 };
    ck_assert_int_eq(crl_policy_copy_restore(p, &st, NULL, 0, &e), CRL_E_CONFIG);
    assert_msg_has(&e, "with 0 of its 16 recorded action bytes");
    crl_policy_copy_state small = { .struct_size = 4 };
    ck_assert_int_eq(crl_policy_copy_get_state(p, &small), CRL_E_INVALID);
    ck_assert_int_eq(crl_policy_copy_get_state(p, &st), CRL_OK);
    ck_assert_uint_eq(st.actions_len, sizeof acts);
    ck_assert_int_eq(memcmp(st.actions, acts, sizeof acts), 0);
    crl_policy_copy_free(p);
    /* a copy that took weights (or acted) already cannot replay */
    p = crl_policy_copy_new(h.host, h.cfg, env, 1, &e);
    ck_assert_ptr_nonnull(p);
    ck_assert_int_eq(crl_policy_copy_set(p, 0, 30, NULL, 0, &e), CRL_OK);
    ck_assert_int_eq(crl_policy_copy_replay(p, acts, sizeof acts, &e), CRL_E_INVALID);
    assert_msg_has(&e, "replay on a new one");
    crl_policy_copy_free(p);
    crl_env_free(env);
    crl_test_host_close(&h);
    g_free(ini);
}
END_TEST

/* Run `totals[0]` frames of the config `fmt` (its %d the total), then resume from a checkpoint directory
 * with each following total in turn; the parameters at the end (*frames: the frame count). */
static crl_td *resume_chain(const char *fmt, const int *totals, size_t n, int64_t *frames)
{
    char dir[] = "/tmp/crl-test-chain-XXXXXX";
    ck_assert_ptr_nonnull(g_mkdtemp(dir));
    char *ck = g_build_filename(dir, "checkpoint", NULL);
    crl_td *params = NULL;
    for (size_t i = 0; i < n; i++) {
        crl_test_host h;
        crl_error e = { 0 };
        char *ini = g_strdup_printf(fmt, totals[i]);
        crl_trainer *t = open_trainer(&h, ini, &e);
        ck_assert_msg(t != NULL, "trainer: %s", e.message);
        if (i)
            ck_assert_msg(crl_trainer_resume(t, ck, &e) == CRL_OK, "resume to %d frames: %s", totals[i], e.message);
        ck_assert_msg(crl_trainer_run(t, NULL, NULL, &e) == CRL_OK, "run to %d frames: %s", totals[i], e.message);
        ck_assert_msg(crl_trainer_checkpoint(t, ck, &e) == CRL_OK, "checkpoint: %s", e.message);
        if (i == n - 1) {
            params = all_params(t);
            *frames = crl_trainer_frames(t);
        }
        crl_trainer_free(t);
        crl_test_host_close(&h);
        g_free(ini);
    }
    /* The checkpoint holds the settings it was written with. */
    char *settings = g_build_filename(ck, CRL_TRAINER_SETTINGS_FILE, NULL), *text = NULL;
    ck_assert(g_file_get_contents(settings, &text, NULL, NULL));
    char *want = g_strdup_printf("total_frames = %d\n", totals[n - 1]);
    ck_assert_msg(strstr(text, want) && strstr(text, "[collector]\n"), "%s", text);
    g_free(want);
    g_free(text);
    g_free(settings);
    char *cmd = g_strdup_printf("rm -rf '%s'", dir);
    ck_assert_int_eq(system(cmd), 0);
    g_free(cmd);
    g_free(ck);
    return params;
}

#define PPO_RESET_INI                                                                                         \
    "[env]\nbackend = classic\nid = CartPole-v1\nnum_envs = 4\nseed = 3\n"                                   \
    "[collector]\nframes_per_batch = 256\ntotal_frames = %d\nreset_at_each_iter = true\n"                     \
    "[loss]\ntype = ppo\n[optim]\nlr = 0.001\n[train]\nminibatch_size = 64\neval_episodes = 0\n"

/* A total_frames that is no multiple of frames_per_batch ends a run with a shorter batch; a resume
 * re-collects the checkpoint's frames in the same batches (reset_at_each_iter makes each batch start
 * with a reset, so a batch boundary elsewhere would give other envs), whatever total it goes on to, and
 * through any number of resumes. */
START_TEST(resume_any_total)
{
    const int one[] = { 1000, 2040 }, two[] = { 1000, 1512, 2040 }, three[] = { 1000, 1100, 1612, 2040 },
              four[] = { 1000, 1100, 2040 };
    int64_t f1, f2, f3, f4;
    crl_td *a = resume_chain(PPO_RESET_INI, one, 2, &f1), *b = resume_chain(PPO_RESET_INI, two, 3, &f2);
    ck_assert_int_eq(f1, 2040);
    ck_assert_int_eq(f2, 2040);
    ck_assert_msg(crl_td_equal(a, b), "1000 + 1040 frames differ from 1000 + 512 + 528 (whole batches after 1000)");
    crl_td *c = resume_chain(PPO_RESET_INI, three, 4, &f3), *d = resume_chain(PPO_RESET_INI, four, 3, &f4);
    ck_assert_int_eq(f3, 2040);
    ck_assert_msg(crl_td_equal(c, d), "1000 + 100 + 512 + 428 frames differ from 1000 + 100 + 940");
    crl_td_unref(a);
    crl_td_unref(b);
    crl_td_unref(c);
    crl_td_unref(d);
    /* an LSTM policy, its envs not reset between batches: the state it carries goes through each resume */
    a = resume_chain(LSTM_INI, one, 2, &f1);
    b = resume_chain(LSTM_INI, two, 3, &f2);
    ck_assert_int_eq(f2, 2040);
    ck_assert_msg(crl_td_equal(a, b), "LSTM: 1000 + 1040 frames differ from 1000 + 512 + 528");
    crl_td_unref(a);
    crl_td_unref(b);
}
END_TEST

/* Resuming with a config that does not reproduce the frames is refused. */
START_TEST(resume_mismatch)
{
    crl_test_host h, h2;
    crl_error e = { 0 };
    char *ini = g_strdup_printf(DQN_INI, 2000, 0, "eval_episodes = 0\n");
    crl_trainer *t = open_trainer(&h, ini, &e);
    ck_assert_int_eq(crl_trainer_run(t, NULL, NULL, &e), CRL_OK);
    char dir[] = "/tmp/crl-test-resume-XXXXXX";
    ck_assert_ptr_nonnull(g_mkdtemp(dir));
    char *ck = g_build_filename(dir, "checkpoint", NULL);
    ck_assert_int_eq(crl_trainer_checkpoint(t, ck, &e), CRL_OK);
    /* total_frames below the checkpoint's */
    char *small = g_strdup_printf(DQN_INI, 1000, 0, "eval_episodes = 0\n");
    crl_trainer *t2 = open_trainer(&h2, small, &e);
    ck_assert_int_eq(crl_trainer_resume(t2, ck, &e), CRL_E_CONFIG);
    assert_msg_has(&e, "total_frames");
    crl_trainer_free(t2);
    crl_test_host_close(&h2);
    /* a missing directory */
    t2 = open_trainer(&h2, ini, &e);
    ck_assert_int_eq(crl_trainer_resume(t2, "/nonexistent/ckpt", &e), CRL_E_IO);
    assert_msg_has(&e, "/nonexistent/ckpt");
    crl_trainer_free(t2);
    crl_test_host_close(&h2);
    crl_trainer_free(t);
    crl_test_host_close(&h);
    char *cmd = g_strdup_printf("rm -rf '%s'", dir);
    ck_assert_int_eq(system(cmd), 0);
    g_free(cmd);
    g_free(ck);
    g_free(small);
    g_free(ini);
}
END_TEST

/* The trainer's own sections are little-endian (counters as f64, the stream as 12 u32, actions as the env's
 * int64 elements: PPO records every frame's), and a load checks them: sizes, whole counts, batches within
 * frames, the actions' size against the counters and the action dtype, the stream's state.  A refused file
 * names itself, the offset and the section, and changes nothing, the optimizers included. */
START_TEST(checkpoint_little_endian_checked)
{
    crl_test_host h, h2;
    crl_error e = { 0 };
    char *ini = g_strdup_printf(PPO_RESUME_INI, 512);
    crl_trainer *t = open_trainer(&h, ini, &e);
    ck_assert_int_eq(crl_trainer_run(t, NULL, NULL, &e), CRL_OK);
    char *dir = g_dir_make_tmp("crl-test-trainer-XXXXXX", NULL);
    char *path = g_build_filename(dir, "t.ckpt", NULL), *bad = g_build_filename(dir, "bad.ckpt", NULL);
    char *bad2 = g_build_filename(dir, "bad2.ckpt", NULL);
    ck_assert_msg(crl_trainer_save(t, path, &e) == CRL_OK, "save: %s", e.message);

    size_t clen, rlen, alen;
    uint8_t *c = ckpt_edit_section(path, "crl.train", "trainer/counters", &clen);
    uint8_t *rb = ckpt_edit_section(path, "crl.train", "trainer/rng", &rlen);
    uint8_t *acts = ckpt_edit_section(path, "crl.train", "trainer/actions", &alen);
    ck_assert_uint_eq(clen, 48);
    ck_assert_uint_eq(rlen, 48);
    uint8_t want[8];
    ckpt_le_f64(want, (double)crl_trainer_frames(t));
    ck_assert(memcmp(c + 8, want, 8) == 0);
    ckpt_le_f64(want, (double)alen);
    ck_assert(memcmp(c + 40, want, 8) == 0);
    /* No evaluation: INT64_MAX, which a double holds as 2^63. */
    ckpt_le_u64(want, 0x43E0000000000000ull);
    ck_assert(memcmp(c + 24, want, 8) == 0);
    /* CartPole's actions: one-hot (categorical_action_encoding = false), two little-endian int64 0 or 1 per
     * frame, exactly one of them 1. */
    ck_assert_uint_eq(alen, 16 * (size_t)crl_trainer_frames(t));
    for (size_t i = 0; i < alen; i += 16) {
        ck_assert_uint_le(acts[i], 1);
        ck_assert_uint_eq(acts[i] + acts[i + 8], 1);
        for (int k = 1; k < 8; k++)
            ck_assert(acts[i + k] == 0 && acts[i + 8 + k] == 0);
    }

    crl_trainer *t2 = open_trainer(&h2, ini, &e);
    ck_assert_msg(crl_trainer_load(t2, path, &e) == CRL_OK, "load: %s", e.message);
    int64_t steps = crl_optim_steps(crl_trainer_optim(t2, 0));

    uint8_t c_bad[48], r_bad[48];
    const struct { int field; double v; const char *msg; } counts[] = {
        { 1, 10.5, "section 'trainer/counters': frames = 10.5 is not a whole number in [0, 2^53]" },
        { 0, -1, "optimizer steps = -1 is not" },
        { 2, 1e9, "1000000000 batches of 512 frames" },
        { 5, 8, "section 'trainer/actions': 8192 bytes, but section 'trainer/counters' says 8" },
        { 3, INFINITY, "next evaluation = inf is not" },
    };
    for (size_t k = 0; k < G_N_ELEMENTS(counts); k++) {
        memcpy(c_bad, c, 48);
        ckpt_le_f64(c_bad + 8 * counts[k].field, counts[k].v);
        ckpt_edit_replace(path, bad, "crl.train", "trainer/counters", c_bad, 48);
        ck_assert_int_eq(crl_trainer_load(t2, bad, &e), CRL_E_CORRUPT);
        ck_assert_msg(g_str_has_prefix(e.message, bad) && strstr(e.message, ": offset "), "%s", e.message);
        assert_msg_has(&e, counts[k].msg);
    }
    /* A next evaluation past 2^53 is one [train] eval_interval allows. */
    memcpy(c_bad, c, 48);
    ckpt_le_f64(c_bad + 24, 1e18);
    ckpt_edit_replace(path, bad, "crl.train", "trainer/counters", c_bad, 48);
    ck_assert_msg(crl_trainer_load(t2, bad, &e) == CRL_OK, "%s", e.message);
    ckpt_edit_replace(path, bad, "crl.train", "trainer/counters", c, 40);
    ck_assert_int_eq(crl_trainer_load(t2, bad, &e), CRL_E_CORRUPT);
    assert_msg_has(&e, "40 bytes; a trainer checkpoint has 6 counters of 8");
    /* Actions that are no whole number of int64s, though the counters agree. */
    memcpy(c_bad, c, 48);
    ckpt_le_f64(c_bad + 40, (double)(alen - 4));
    ckpt_edit_replace(path, bad, "crl.train", "trainer/counters", c_bad, 48);
    ckpt_edit_replace(bad, bad2, "crl.train", "trainer/actions", acts, alen - 4);
    ck_assert_int_eq(crl_trainer_load(t2, bad2, &e), CRL_E_CORRUPT);
    assert_msg_has(&e, "8188 bytes is no whole number of the env's 8-byte actions");
    memcpy(r_bad, rb, 48);
    ckpt_le_u32(r_bad + 40, 6);
    ckpt_edit_replace(path, bad, "crl.train", "trainer/rng", r_bad, 48);
    ck_assert_int_eq(crl_trainer_load(t2, bad, &e), CRL_E_CORRUPT);
    assert_msg_has(&e, "section 'trainer/rng': word index 6 or reserved word 0 is no stream's");
    ck_assert_int_eq(crl_optim_steps(crl_trainer_optim(t2, 0)), steps);
    /* The cuts (frame counts where a short batch ended): none here, since 512 frames are two whole batches;
     * whole, increasing and within the frames when there are. */
    size_t culen;
    uint8_t *cuts = ckpt_edit_section(path, "crl.train", "trainer/cuts", &culen);
    ck_assert_uint_eq(culen, 0);
    g_free(cuts);
    uint8_t cu[16];
    ckpt_le_f64(cu, 256);
    ckpt_le_f64(cu + 8, 500);
    ckpt_edit_replace(path, bad, "crl.train", "trainer/cuts", cu, 16);
    ck_assert_msg(crl_trainer_load(t2, bad, &e) == CRL_OK, "%s", e.message);
    const struct { double a, b; size_t len; const char *msg; } bad_cuts[] = {
        { 256, 0, 12, "section 'trainer/cuts': 12 bytes is no whole number of 8-byte frame counts" },
        { 600, 0, 8, "frame count 600 is not a whole number above the one before (0) and at most the 512 frames" },
        { 256, 256, 16, "frame count 256 is not a whole number above the one before (256)" },
        { 0, 0, 8, "frame count 0 is not" },
        { 10.5, 0, 8, "frame count 10.5 is not" },
    };
    for (size_t k = 0; k < G_N_ELEMENTS(bad_cuts); k++) {
        ckpt_le_f64(cu, bad_cuts[k].a);
        ckpt_le_f64(cu + 8, bad_cuts[k].b);
        ckpt_edit_replace(path, bad, "crl.train", "trainer/cuts", cu, bad_cuts[k].len);
        ck_assert_int_eq(crl_trainer_load(t2, bad, &e), CRL_E_CORRUPT);
        ck_assert_msg(g_str_has_prefix(e.message, bad) && strstr(e.message, ": offset "), "%s", e.message);
        assert_msg_has(&e, bad_cuts[k].msg);
    }
    ck_assert_int_eq(crl_optim_steps(crl_trainer_optim(t2, 0)), steps);
    /* Optimizer state that is fine next to a loss section that is not: the optimizer keeps its state too. */
    size_t mlen;
    uint8_t *meta = ckpt_edit_section(path, "crl.train", "optim/0/meta", &mlen);
    ckpt_le_u64(meta + 8, (uint64_t)steps + 5);
    ckpt_edit_replace(path, bad, "crl.train", "optim/0/meta", meta, mlen);
    ckpt_edit_replace(bad, bad2, "crl.train", "loss/state", meta, 8);
    ck_assert_int_eq(crl_trainer_load(t2, bad2, &e), CRL_E_CORRUPT);
    assert_msg_has(&e, "section 'loss/state' holds 8 bytes");
    ck_assert_int_eq(crl_optim_steps(crl_trainer_optim(t2, 0)), steps);
    ck_assert_msg(crl_trainer_load(t2, bad, &e) == CRL_OK, "%s", e.message);
    ck_assert_int_eq(crl_optim_steps(crl_trainer_optim(t2, 0)), steps + 5);
    g_free(meta);

    g_free(c);
    g_free(rb);
    g_free(acts);
    crl_trainer_free(t);
    crl_trainer_free(t2);
    crl_test_host_close(&h);
    crl_test_host_close(&h2);
    g_unlink(path);
    g_unlink(bad);
    g_unlink(bad2);
    g_rmdir(dir);
    g_free(path);
    g_free(bad);
    g_free(bad2);
    g_free(dir);
    g_free(ini);
}
END_TEST

/* Discrete SAC on CartPole for 12000 frames. */
START_TEST(discrete_sac_learns)
{
    learns("[env]\nbackend = classic\nid = CartPole-v1\nseed = 0\n"
                           "[collector]\nframes_per_batch = 10\ntotal_frames = 12000\ninit_random_frames = 1000\n"
                           "[replay]\nstorage = tensor\ncapacity = 20000\nbatch_size = 64\n"
                           "[loss]\ntype = discrete_sac\nalpha_init = 0.2\n"
                           "[optim]\nlr = 0.0003\n"
                           "[train]\nnum_updates = 5\neval_interval = 3000\neval_episodes = 3\n",
           100, "discrete_sac");
}
END_TEST

/* SAC and DDPG on Pendulum for 8000 frames, TD3 (delayed actor) for 16000. */
static void pendulum_learns(const char *loss, int frames)
{
    char *ini = g_strdup_printf("[env]\nbackend = classic\nid = Pendulum-v1\nseed = 0\n"
                                "[collector]\nframes_per_batch = 10\ntotal_frames = %d\ninit_random_frames = 1000\n"
                                "[replay]\nstorage = tensor\ncapacity = 20000\nbatch_size = 128\n"
                                "[loss]\ntype = %s\nnum_cells = 64, 64\n%s"
                                "[optim]\nlr = 0.001\n"
                                "[train]\nnum_updates = 5\neval_interval = 1000\neval_episodes = 3\n",
                                frames, loss, strcmp(loss, "sac") ? "sigma = 0.2\n" : "");
    learns(ini, -750, loss);
    g_free(ini);
}

START_TEST(sac_learns) { pendulum_learns("sac", 8000); }
END_TEST
START_TEST(td3_learns) { pendulum_learns("td3", 16000); }
END_TEST
START_TEST(ddpg_learns) { pendulum_learns("ddpg", 8000); }
END_TEST

/* A2C and REINFORCE (one pass per batch) on CartPole for 51200 frames. */
static void pg_learns(const char *loss)
{
    char *ini = g_strdup_printf("[env]\nbackend = classic\nid = CartPole-v1\nnum_envs = 8\nseed = 0\n"
                                "[collector]\nframes_per_batch = 1024\ntotal_frames = 51200\n"
                                "[loss]\ntype = %s\n[optim]\nlr = 0.001\nmax_grad_norm = 0.5\n"
                                "[train]\nepochs = 1\nminibatch_size = 1024\neval_interval = 10240\n"
                                "eval_episodes = 3\n", loss);
    learns(ini, 100, loss);
    g_free(ini);
}

START_TEST(a2c_learns) { pg_learns("a2c"); }
END_TEST
START_TEST(reinforce_learns) { pg_learns("reinforce"); }
END_TEST

/* SAC and TD3 (noise from the trainer's stream, TD3's delayed actor). */
#define AC_RESUME_INI                                                                                  \
    "[env]\nbackend = classic\nid = Pendulum-v1\nseed = 4\n"                                          \
    "[collector]\nframes_per_batch = 10\ntotal_frames = %d\ninit_random_frames = 300\n"              \
    "[replay]\nstorage = tensor\ncapacity = 5000\nbatch_size = 32\n"                                  \
    "[loss]\ntype = %s\nnum_cells = 32, 32\n[train]\nnum_updates = 2\neval_episodes = 0\n"

static void ac_resume(const char *loss)
{
    char *a = g_strdup_printf(AC_RESUME_INI, 1200, loss), *b = g_strdup_printf(AC_RESUME_INI, 600, loss);
    resume_equals(a, b);
    g_free(a);
    g_free(b);
}

START_TEST(sac_resume_bitwise) { ac_resume("sac"); }
END_TEST
START_TEST(td3_resume_bitwise) { ac_resume("td3"); }
END_TEST

int main(void)
{
    crl_test_keep_cairo();
    return RUN_TESTS("trainer", dqn_learns, ppo_learns, a2c_learns, reinforce_learns, discrete_sac_learns,
                     sac_learns, td3_learns, ddpg_learns, dqn_resume_bitwise, replay_not_checkpointed, ppo_resume_bitwise, lstm_ppo_resume,
                     gru_ppo_resume_bitwise, carried_state_checked, lstm_dqn_trains_and_resumes,
                     sac_resume_bitwise, td3_resume_bitwise, copies_resume_bitwise, policy_copy_replay_checked, resume_mismatch, resume_any_total, dqn_reproducible,
                     save_load,
                     checkpoint_little_endian_checked,
                     bad_configs, non_finite_stops);
}
