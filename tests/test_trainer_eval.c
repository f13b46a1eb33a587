/* What the trainer reports and how it evaluates: raw (untransformed) returns next to the transformed ones, and
 * evaluation envs that normalise with the training env's statistics, frozen (TorchRL's VecNorm frozen_copy). */
#include "host-fixture.h"
#include "keep-cairo.h"

#include <crl/trainer.h>
#include <crl/transform.h>
#include <glib/gstdio.h>
#include <math.h>
#include <unistd.h>

/* CartPole's reward is 1 per step: RewardScaling's 0.25 r + 0.5 is 0.75 per step, exact in binary, so an
 * episode's transformed return is 0.75 times its raw one, exactly. */
#define SCALED_INI                                                                                    \
    "[env]\nbackend = classic\nid = CartPole-v1\nnum_envs = 4\nseed = 0\ntransforms = sc\n"          \
    "[transform.sc]\ntype = RewardScaling\nloc = %s\nscale = %s\n"                                    \
    "[collector]\nframes_per_batch = 256\ntotal_frames = %d\n"                                        \
    "[loss]\ntype = ppo\nnum_cells = 16\n"                                                            \
    "[train]\nepochs = 1\neval_interval = 512\neval_episodes = 3\n%s"

typedef struct seen {
    int batches, evals, recents;
    int64_t last_frames;
    double eval, eval_raw;
} seen;

static int check_scaled(void *user, crl_trainer *t, const crl_train_stats *s, crl_error *err)
{
    (void)t;
    (void)err;
    seen *v = user;
    v->batches++;
    v->last_frames = s->frames;
    ck_assert_uint_ge(s->struct_size, offsetof(crl_train_stats, eval_raw_return) + sizeof(double));
    if (!isnan(s->recent_return)) {
        v->recents++;
        /* a mean of sums: equal up to the rounding of the division */
        ck_assert_msg(fabs(s->recent_return - 0.75 * s->recent_raw_return) <= 1e-12 * s->recent_raw_return,
                      "recent %.17g raw %.17g", s->recent_return, s->recent_raw_return);
    }
    if (s->evaluated && !s->done) {   /* the last callback repeats the last batch's */
        v->evals++;
        v->eval = s->eval_return;
        v->eval_raw = s->eval_raw_return;
        ck_assert_msg(fabs(s->eval_return - 0.75 * s->eval_raw_return) <= 1e-12 * s->eval_raw_return,
                      "eval %.17g raw %.17g", s->eval_return, s->eval_raw_return);
        ck_assert(s->eval_raw_return >= 8); /* CartPole lasts 8 steps at least */
    }
    return CRL_OK;
}

static crl_trainer *open_trainer(crl_test_host *h, const char *ini)
{
    crl_error e = { 0 };
    crl_test_host_open(h, "classic, losses, transforms", ini);
    crl_trainer *t = crl_trainer_from_config(h->host, h->cfg, &e);
    ck_assert_msg(t != NULL, "trainer: %s", e.message);
    return t;
}

START_TEST(raw_returns_under_reward_scaling)
{
    char *ini = g_strdup_printf(SCALED_INI, "0.5", "0.25", 2048, "");
    crl_test_host h;
    crl_trainer *t = open_trainer(&h, ini);
    ck_assert_str_eq(crl_trainer_raw_reward_key(t), "next.raw_reward");
    seen v = { 0 };
    crl_error e = { 0 };
    ck_assert_msg(crl_trainer_run(t, check_scaled, &v, &e) == CRL_OK, "run: %s", e.message);
    ck_assert_int_gt(v.recents, 3);
    ck_assert_int_eq(v.evals, 4);
    /* every episode of an evaluation, one by one */
    crl_eval_result r = { sizeof r, 0, NULL, NULL, 0, 0, 0, 0 };
    ck_assert_msg(crl_trainer_evaluate_ex(t, 5, &r, &e) == CRL_OK, "%s", e.message);
    ck_assert_int_eq(r.episodes, 5);
    double sum = 0;
    for (int i = 0; i < 5; i++) {
        ck_assert(r.returns[i] == 0.75 * r.raw_returns[i]);
        ck_assert(r.raw_returns[i] == floor(r.raw_returns[i]));
        sum += r.raw_returns[i];
    }
    ck_assert_double_eq_tol(r.raw_mean, sum / 5, 1e-9);
    ck_assert_double_eq_tol(r.mean, 0.75 * r.raw_mean, 1e-12 * r.raw_mean);
    ck_assert(r.std >= 0 && r.raw_std >= 0);
    /* the last evaluation of the run, again: the same numbers */
    crl_free(r.returns);
    crl_free(r.raw_returns);
    ck_assert_msg(crl_trainer_evaluate_ex(t, 3, &r, &e) == CRL_OK, "%s", e.message);
    ck_assert(r.mean == v.eval && r.raw_mean == v.eval_raw);
    crl_free(r.returns);
    crl_free(r.raw_returns);
    /* bad arguments */
    r.struct_size = 4;
    ck_assert_int_eq(crl_trainer_evaluate_ex(t, 3, &r, &e), CRL_E_INVALID);
    r.struct_size = sizeof r;
    ck_assert_int_eq(crl_trainer_evaluate_ex(t, 0, &r, &e), CRL_E_INVALID);
    ck_assert_ptr_null(r.returns);
    crl_trainer_free(t);
    crl_test_host_close(&h);
    g_free(ini);
}
END_TEST

/* Without transforms the raw return is the return. */
START_TEST(raw_returns_without_transforms)
{
    crl_test_host h;
    crl_trainer *t = open_trainer(&h, "[env]\nbackend = classic\nid = CartPole-v1\nseed = 0\n"
                                      "[collector]\nframes_per_batch = 64\ntotal_frames = 256\n"
                                      "[loss]\ntype = ppo\nnum_cells = 16\n[train]\neval_episodes = 2\n");
    ck_assert_str_eq(crl_trainer_raw_reward_key(t), "next.reward");
    crl_eval_result r = { sizeof r, 0, NULL, NULL, 0, 0, 0, 0 };
    crl_error e = { 0 };
    ck_assert_msg(crl_trainer_evaluate_ex(t, 2, &r, &e) == CRL_OK, "%s", e.message);
    ck_assert(r.returns[0] == r.raw_returns[0] && r.returns[1] == r.raw_returns[1]);
    crl_free(r.returns);
    crl_free(r.raw_returns);
    crl_trainer_free(t);
    crl_test_host_close(&h);
}
END_TEST

static int last_of(void *user, crl_trainer *t, const crl_train_stats *s, crl_error *err)
{
    (void)t;
    (void)err;
    *(int64_t *)user = s->frames;
    return CRL_OK;
}

/* stop_return reads the raw return unless stop_on = transformed: with a reward scaled by -1 the raw return
 * (>= 8) reaches 1 at the first evaluation, the transformed one (<= -8) never. */
START_TEST(stop_on_raw_or_transformed)
{
    const char *const modes[] = { "", "stop_on = raw\n", "stop_on = transformed\n" };
    const int64_t want[] = { 512, 512, 2048 };
    for (int m = 0; m < 3; m++) {
        char *tail = g_strdup_printf("stop_return = 1\n%s", modes[m]);
        char *ini = g_strdup_printf(SCALED_INI, "0", "-1", 2048, tail);
        crl_test_host h;
        crl_trainer *t = open_trainer(&h, ini);
        int64_t frames = 0;
        crl_error e = { 0 };
        ck_assert_msg(crl_trainer_run(t, last_of, &frames, &e) == CRL_OK, "run: %s", e.message);
        ck_assert_msg(frames == want[m], "'%s': stopped at %lld", modes[m], (long long)frames);
        crl_trainer_free(t);
        crl_test_host_close(&h);
        g_free(ini);
        g_free(tail);
    }
    /* a bad value names the key */
    char *ini = g_strdup_printf(SCALED_INI, "0", "1", 512, "stop_on = scaled\n");
    crl_test_host h;
    crl_error e = { 0 };
    crl_test_host_open(&h, "classic, losses, transforms", ini);
    ck_assert_ptr_null(crl_trainer_from_config(h.host, h.cfg, &e));
    ck_assert_int_eq(e.code, CRL_E_CONFIG);
    ck_assert_msg(strstr(e.message, "stop_on") && strstr(e.message, "test.ini:"), "%s", e.message);
    crl_test_host_close(&h);
    g_free(ini);
}
END_TEST

/* ---- frozen statistics -------------------------------------------------------------------- */

#define VECNORM_INI                                                                                   \
    "[env]\nbackend = classic\nid = Pendulum-v1\nnum_envs = 4\nseed = 0\ntransforms = vn\n%s"        \
    "[transform.vn]\ntype = VecNorm\n%s"                                                              \
    "[collector]\nframes_per_batch = 256\ntotal_frames = 1024\n"                                      \
    "[loss]\ntype = ppo\nnum_cells = 16\n"                                                            \
    "[train]\nepochs = 1\neval_episodes = 2\neval_max_steps = 50\n"

/* The tensors of two states are equal, bit for bit. */
static void same_state(const crl_td *a, const crl_td *b)
{
    crl_error e = { 0 };
    char **ka = crl_td_leaf_keys((crl_td *)a, &e), **kb = crl_td_leaf_keys((crl_td *)b, &e);
    ck_assert_ptr_nonnull(ka);
    ck_assert_ptr_nonnull(kb);
    size_t n = 0;
    for (; ka[n]; n++) {
        ck_assert_str_eq(ka[n], kb[n] ? kb[n] : "(none)");
        ck_assert_msg(crl_tensor_equal(crl_td_get(a, ka[n]), crl_td_get(b, ka[n])), "'%s' differs", ka[n]);
    }
    ck_assert_ptr_null(kb[n]);
    ck_assert_uint_gt(n, 0);
    crl_free(ka);
    crl_free(kb);
}

static void vecnorm_frozen_in_eval(const char *env_extra, const char *vn_extra)
{
    char *ini = g_strdup_printf(VECNORM_INI, env_extra, vn_extra);
    crl_test_host h;
    crl_trainer *t = open_trainer(&h, ini);
    crl_error e = { 0 };
    ck_assert_msg(crl_trainer_run(t, NULL, NULL, &e) == CRL_OK, "run: %s", e.message);
    crl_env *train = crl_collector_env(crl_trainer_collector(t), 0), *ev = crl_trainer_eval_env(t);
    ck_assert_ptr_nonnull(ev);
    crl_td *before = crl_env_transforms_state(train, &e);
    ck_assert_msg(before != NULL, "%s", e.message);
    /* transform 0 is the raw reward's copy, 1 the VecNorm; sum, ssq and count of observation and reward */
    crl_td *vn = crl_td_get_td(before, "1");
    ck_assert_ptr_nonnull(vn);
    ck_assert_int_eq(crl_tensor_numel(crl_td_get(vn, "sum0")), 3);
    ck_assert_int_eq(crl_tensor_numel(crl_td_get(vn, "ssq1")), 1);
    ck_assert(crl_tensor_flat_get(crl_td_get(vn, "count0"), 0) > 100);
    double m1, m2;
    ck_assert_msg(crl_trainer_evaluate(t, 2, &m1, &e) == CRL_OK, "%s", e.message);
    /* the evaluation changed neither the training statistics nor the frozen copy it used */
    crl_td *after = crl_env_transforms_state(train, &e), *in_eval = crl_env_transforms_state(ev, &e);
    same_state(before, after);
    same_state(before, in_eval);
    ck_assert_msg(crl_trainer_evaluate(t, 2, &m2, &e) == CRL_OK, "%s", e.message);
    ck_assert(m1 == m2);
    crl_td_unref(after);
    crl_td_unref(in_eval);

    /* The eval env's observations are the raw ones normalised with exactly those statistics:
     * (x - mean) / max(sqrt(max(ssq / count - mean^2, eps)), eps), eps = 1e-4. */
    crl_env *plain = NULL;
    {
        crl_config *c = crl_config_new(&e);
        const char *pi = "[env]\nbackend = classic\nid = Pendulum-v1\nnum_envs = 4\nseed = 0\n";
        ck_assert_int_eq(crl_config_load_buffer(c, "plain.ini", pi, strlen(pi), CRL_LAYER_FILE, &e), CRL_OK);
        plain = crl_env_from_config(h.host, c, "env", &e);
        ck_assert_msg(plain != NULL, "%s", e.message);
        crl_config_free(c);
    }
    crl_env_set_seed(plain, 77);
    crl_env_set_seed(ev, 77);
    crl_td *ro = crl_env_reset(plain, NULL, &e), *no = crl_env_reset(ev, NULL, &e);
    ck_assert_ptr_nonnull(ro);
    ck_assert_ptr_nonnull(no);
    const crl_tensor *x = crl_td_get(ro, "observation"), *y = crl_td_get(no, "observation");
    const double *sum = crl_tensor_data(crl_td_get(vn, "sum0")), *ssq = crl_tensor_data(crl_td_get(vn, "ssq0"));
    double count = crl_tensor_flat_get(crl_td_get(vn, "count0"), 0);
    for (int64_t i = 0; i < 4 * 3; i++) {
        int64_t j = i % 3;
        double mean = sum[j] / count, var = ssq[j] / count - mean * mean;
        double sd = sqrt(var > 1e-4 ? var : 1e-4);
        sd = sd > 1e-4 ? sd : 1e-4;
        double want = (double)(float)((crl_tensor_flat_get(x, i) - mean) / sd);
        ck_assert_msg(crl_tensor_flat_get(y, i) == want, "element %lld: %.9g, want %.9g", (long long)i,
                      crl_tensor_flat_get(y, i), want);
    }
    crl_td_unref(ro);
    crl_td_unref(no);
    crl_env_free(plain);
    /* and stepping the eval env by hand does not move them either */
    crl_td *td = crl_env_reset(ev, NULL, &e);
    for (int s = 0; s < 5; s++) {
        ck_assert_int_eq(crl_env_rand_step(ev, td, &e), CRL_OK);
        crl_td *nx = crl_env_step_mdp(ev, td, &e);
        crl_td_unref(td);
        td = nx;
    }
    crl_td_unref(td);
    in_eval = crl_env_transforms_state(ev, &e);
    same_state(before, in_eval);
    crl_td_unref(in_eval);
    crl_td_unref(before);
    crl_trainer_free(t);
    crl_test_host_close(&h);
    g_free(ini);
}

START_TEST(vecnorm_eval_uses_training_stats) { vecnorm_frozen_in_eval("", ""); }
END_TEST

/* The setting: the env in 4 worker processes, VecNorm in this process, shared between processes. */
START_TEST(vecnorm_eval_processes_shared)
{
    vecnorm_frozen_in_eval("executor = processes\nnum_workers = 4\n", "shared = true\n");
}
END_TEST

/* ObservationNorm's init_stats: the eval env takes the training env's loc and scale, not its own rollout's. */
START_TEST(obsnorm_eval_uses_training_stats)
{
    crl_test_host h;
    crl_trainer *t = open_trainer(&h, "[env]\nbackend = classic\nid = Pendulum-v1\nnum_envs = 2\nseed = 3\n"
                                      "transforms = on\n[transform.on]\ntype = ObservationNorm\ninit_stats = 50\n"
                                      "standard_normal = true\n"
                                      "[collector]\nframes_per_batch = 64\ntotal_frames = 128\n"
                                      "[loss]\ntype = ppo\nnum_cells = 16\n"
                                      "[train]\neval_episodes = 1\neval_max_steps = 20\n");
    crl_error e = { 0 };
    crl_env *train = crl_collector_env(crl_trainer_collector(t), 0), *ev = crl_trainer_eval_env(t);
    crl_td *a = crl_env_transforms_state(train, &e);
    ck_assert_ptr_nonnull(crl_td_get(a, "1.loc0"));
    ck_assert_int_eq(crl_tensor_numel(crl_td_get(a, "1.scale0")), 3);
    double m;
    ck_assert_msg(crl_trainer_evaluate(t, 1, &m, &e) == CRL_OK, "%s", e.message);
    crl_td *b = crl_env_transforms_state(ev, &e);
    same_state(a, b);
    crl_td_unref(b);
    /* an env whose own rollout (another seed) measured other statistics takes them */
    crl_config *c = crl_config_new(&e);
    const char *oi = "[env]\nbackend = classic\nid = Pendulum-v1\nnum_envs = 2\nseed = 4\ntransforms = on\n"
                     "[transform.on]\ntype = ObservationNorm\ninit_stats = 50\nstandard_normal = true\n";
    ck_assert_int_eq(crl_config_load_buffer(c, "other.ini", oi, strlen(oi), CRL_LAYER_FILE, &e), CRL_OK);
    crl_env *other = crl_env_from_config(h.host, c, "env", &e);
    ck_assert_msg(other != NULL, "%s", e.message);
    crl_td *o = crl_env_transforms_state(other, &e);
    ck_assert(!crl_tensor_equal(crl_td_get(o, "0.loc0"), crl_td_get(a, "1.loc0")));
    crl_td *moved = crl_td_new(0, NULL, &e);
    ck_assert_int_eq(crl_td_set_td(moved, "0", crl_td_get_td(a, "1"), &e), CRL_OK);
    ck_assert_int_eq(crl_env_load_transforms_state(other, moved, true, &e), CRL_OK);
    crl_td *o2 = crl_env_transforms_state(other, &e);
    same_state(moved, o2);
    crl_td_unref(o);
    crl_td_unref(o2);
    crl_td_unref(moved);
    crl_env_free(other);
    crl_config_free(c);
    crl_td_unref(a);
    crl_trainer_free(t);
    crl_test_host_close(&h);
}
END_TEST

/* A state that does not fit the chain changes nothing and says why. */
START_TEST(load_state_refused)
{
    crl_test_host h;
    crl_test_host_open(&h, "classic, transforms",
                       "[env]\nbackend = classic\nid = Pendulum-v1\nnum_envs = 2\nseed = 0\ntransforms = sc, vn\n"
                       "[transform.sc]\ntype = RewardScaling\nloc = 0\nscale = 2\n[transform.vn]\ntype = VecNorm\n");
    crl_error e = { 0 };
    crl_env *env = crl_env_from_config(h.host, h.cfg, "env", &e);
    ck_assert_msg(env != NULL, "%s", e.message);
    crl_td *td = crl_env_reset(env, NULL, &e);
    ck_assert_int_eq(crl_env_rand_step(env, td, &e), CRL_OK);
    crl_td_unref(td);
    crl_td *st = crl_env_transforms_state(env, &e);
    ck_assert_ptr_nonnull(st);
    ck_assert_uint_eq(crl_td_len(st), 1);   /* RewardScaling learns nothing */
    ck_assert_ptr_nonnull(crl_td_get_td(st, "1"));
    crl_td *good = crl_td_clone(st, &e);

    /* an index of a transform that learns nothing, and one past the chain */
    crl_td *bad = crl_td_new(0, NULL, &e), *sub = crl_td_new(0, NULL, &e);
    ck_assert_int_eq(crl_td_set_td(bad, "0", sub, &e), CRL_OK);
    ck_assert_int_eq(crl_env_load_transforms_state(env, bad, true, &e), CRL_E_NOT_FOUND);
    ck_assert_msg(strstr(e.message, "'0'") && strstr(e.message, "RewardScaling"), "%s", e.message);
    crl_td_unref(bad);
    bad = crl_td_new(0, NULL, &e);
    ck_assert_int_eq(crl_td_set_td(bad, "7", sub, &e), CRL_OK);
    ck_assert_int_eq(crl_env_load_transforms_state(env, bad, true, &e), CRL_E_NOT_FOUND);
    crl_td_unref(bad);
    crl_td_unref(sub);
    /* the wrong size and the wrong dtype */
    int64_t two = 2;
    crl_tensor *x = crl_tensor_new(CRL_F64, 1, &two, &e);
    ck_assert_int_eq(crl_td_set(st, "1.sum0", x, &e), CRL_OK);
    ck_assert_int_eq(crl_env_load_transforms_state(env, st, true, &e), CRL_E_SHAPE);
    ck_assert_msg(strstr(e.message, "sum0") && strstr(e.message, "VecNorm"), "%s", e.message);
    crl_tensor_unref(x);
    int64_t three = 3;
    x = crl_tensor_new(CRL_F32, 1, &three, &e);
    ck_assert_int_eq(crl_td_set(st, "1.sum0", x, &e), CRL_OK);
    ck_assert_int_eq(crl_env_load_transforms_state(env, st, true, &e), CRL_E_DTYPE);
    crl_tensor_unref(x);
    ck_assert_int_eq(crl_td_set(st, "1.sum0", crl_td_get(good, "1.sum0"), &e), CRL_OK);
    ck_assert_int_eq(crl_td_del(st, "1.ssq0", &e), CRL_OK);
    ck_assert_int_eq(crl_env_load_transforms_state(env, st, true, &e), CRL_E_NOT_FOUND);
    /* nothing changed */
    crl_td *now = crl_env_transforms_state(env, &e);
    same_state(good, now);
    crl_td_unref(now);
    ck_assert_int_eq(crl_env_load_transforms_state(NULL, good, true, &e), CRL_E_INVALID);
    ck_assert_ptr_null(crl_env_transforms_state(NULL, &e));
    crl_td_unref(good);
    crl_td_unref(st);
    crl_env_free(env);
    crl_test_host_close(&h);
}
END_TEST

/* ---- a policy loaded from a checkpoint -------------------------------------------------------- */

typedef struct last_eval {
    double mean, raw;
} last_eval;

static int keep_last(void *user, crl_trainer *t, const crl_train_stats *s, crl_error *err)
{
    (void)t;
    (void)err;
    last_eval *l = user;
    if (s->evaluated) {
        l->mean = s->eval_return;
        l->raw = s->eval_raw_return;
    }
    return CRL_OK;
}

/* Train, checkpoint at the end, load the policy as a C program would (experiment.ini -> config -> host ->
 * crl_policy_load) and evaluate: the run's last evaluation, bit for bit. */
static void policy_reproduces(const char *ini)
{
    crl_test_host h;
    crl_trainer *t = open_trainer(&h, ini);
    last_eval l = { NAN, NAN };
    crl_error e = { 0 };
    ck_assert_msg(crl_trainer_run(t, keep_last, &l, &e) == CRL_OK, "run: %s", e.message);
    char *tmp = g_dir_make_tmp("crl-policy-XXXXXX", NULL), *dir = g_build_filename(tmp, "ck", NULL);
    ck_assert_msg(crl_trainer_checkpoint(t, dir, &e) == CRL_OK, "%s", e.message);
    crl_trainer_free(t);
    crl_test_host_close(&h);

    crl_config *cfg = crl_config_new(&e);
    char *ini_path = g_build_filename(dir, CRL_TRAINER_SETTINGS_FILE, NULL);
    ck_assert_msg(crl_config_load_file(cfg, ini_path, CRL_LAYER_FILE, &e) == CRL_OK, "%s", e.message);
    crl_host *host = crl_host_new(cfg, &e);
    ck_assert_msg(host && crl_host_load_configured(host, &e) == CRL_OK, "%s", e.message);
    crl_policy *p = crl_policy_load(host, cfg, dir, &e);
    ck_assert_msg(p != NULL, "%s", e.message);
    ck_assert_int_eq(crl_policy_eval_episodes(p), 3);
    crl_eval_result r = { sizeof r, 0, NULL, NULL, 0, 0, 0, 0 };
    ck_assert_msg(crl_policy_evaluate(p, 3, &r, &e) == CRL_OK, "%s", e.message);
    ck_assert_msg(r.mean == l.mean && r.raw_mean == l.raw, "policy %.17g (raw %.17g), run %.17g (raw %.17g)", r.mean,
                  r.raw_mean, l.mean, l.raw);
    crl_free(r.returns);
    crl_free(r.raw_returns);
    /* acting by hand on the policy's env */
    crl_td *td = crl_env_reset(crl_policy_env(p), NULL, &e);
    ck_assert_ptr_nonnull(td);
    ck_assert_int_eq(crl_policy_act(p, crl_policy_env(p), td, &e), CRL_OK);
    ck_assert_ptr_nonnull(crl_td_get(td, "action"));
    ck_assert_int_eq(crl_env_step(crl_policy_env(p), td, &e), CRL_OK);
    crl_td_unref(td);
    crl_policy_free(p);

    /* what a bad directory gets */
    ck_assert_ptr_null(crl_policy_load(host, cfg, tmp, &e));
    ck_assert_msg(e.code == CRL_E_IO && strstr(e.message, "trainer.ckpt"), "%d %s", e.code, e.message);
    char *ck = g_build_filename(dir, "trainer.ckpt", NULL);
    ck_assert_int_eq(truncate(ck, 100), 0);
    ck_assert_ptr_null(crl_policy_load(host, cfg, dir, &e));
    ck_assert_msg(e.code == CRL_E_CORRUPT || e.code == CRL_E_IO, "%d %s", e.code, e.message);
    ck_assert_ptr_null(crl_policy_load(NULL, cfg, dir, &e));
    ck_assert_int_eq(e.code, CRL_E_INVALID);
    ck_assert_int_eq(crl_policy_evaluate(NULL, 1, &r, &e), CRL_E_INVALID);
    ck_assert_int_eq(crl_policy_frames(NULL), -1);
    ck_assert_ptr_null(crl_policy_env(NULL));
    crl_policy_free(NULL);
    crl_host_free(host);
    crl_config_free(cfg);
    g_unlink(ck);
    g_free(ck);
    g_free(ini_path);
    char *rm = g_strdup_printf("rm -rf '%s'", tmp);
    ck_assert_int_eq(system(rm), 0);
    g_free(rm);
    g_free(dir);
    g_free(tmp);
}

START_TEST(policy_reproduces_last_eval_scaled)
{
    char *ini = g_strdup_printf(SCALED_INI, "0.5", "0.25", 1024, "");
    policy_reproduces(ini);
    g_free(ini);
}
END_TEST

/* VecNorm: the checkpoint carries the training statistics, and the policy's env normalises with them. */
START_TEST(policy_reproduces_last_eval_vecnorm)
{
    char *ini = g_strdup_printf(VECNORM_INI, "", "");
    GString *g = g_string_new(ini);
    g_string_replace(g, "eval_episodes = 2", "eval_episodes = 3", 1);
    policy_reproduces(g->str);
    g_string_free(g, TRUE);
    g_free(ini);
}
END_TEST

int main(void)
{
    crl_test_keep_cairo();
    Suite *s = suite_create("trainer_eval");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, raw_returns_under_reward_scaling);
    tcase_add_test(tc, raw_returns_without_transforms);
    tcase_add_test(tc, stop_on_raw_or_transformed);
    tcase_add_test(tc, vecnorm_eval_uses_training_stats);
    tcase_add_test(tc, vecnorm_eval_processes_shared);
    tcase_add_test(tc, obsnorm_eval_uses_training_stats);
    tcase_add_test(tc, load_state_refused);
    tcase_add_test(tc, policy_reproduces_last_eval_scaled);
    tcase_add_test(tc, policy_reproduces_last_eval_vecnorm);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? 1 : 0;
}
