/* Check suite: Q-value actor with epsilon-greedy, deterministic actor with Gaussian/OU noise, probabilistic
 * actors (Categorical, TanhNormal) with exploration types, and their backward against finite differences. */
#include <stdlib.h>
#include <crl/actor.h>
#include <crl/distributions.h>
#include "nn-test.h"

static crl_mlp *mk_mlp(int64_t in, int64_t out, const int64_t *cells, int n, uint64_t seed)
{
    crl_rng rng;
    crl_rng_init(&rng, seed, 0);
    crl_error err;
    crl_mlp *m = crl_mlp_new("policy", in, out, cells, n, CRL_ACT_TANH, false, &rng, &err);
    ck_assert_msg(m != NULL, "%s", err.message);
    return m;
}

/* A td of batch [B] with a random "observation" [B, f]. */
static crl_td *obs_td(int64_t B, int64_t f, uint64_t seed)
{
    crl_error err;
    crl_td *td = crl_td_new(1, &B, &err);
    crl_rng rng;
    crl_rng_init(&rng, seed, 1);
    crl_tensor *o = t_rows(B, f, NULL, &rng);
    ck_assert_int_eq(crl_td_set(td, "observation", o, &err), CRL_OK);
    crl_tensor_unref(o);
    return td;
}

static const char *const OBS[] = { "observation", NULL };

START_TEST(test_exploration_names)
{
    crl_exploration e;
    crl_error err;
    ck_assert_int_eq(crl_exploration_from_name("deterministic", &e, &err), CRL_OK);
    ck_assert_int_eq(e, CRL_EXPLORE_MODE);
    ck_assert_int_eq(crl_exploration_from_name("MEAN", &e, &err), CRL_OK);
    ck_assert_int_eq(e, CRL_EXPLORE_MEAN);
    ck_assert_int_eq(crl_exploration_from_name("greedy", &e, &err), CRL_E_INVALID);
    assert_msg_has(&err, "use random, mode or mean");
}
END_TEST

START_TEST(test_qvalue_actor)
{
    enum { B = 2000, F = 3, N = 3 };
    crl_error err;
    int64_t b = B;
    crl_spec *cat = crl_spec_categorical(N, CRL_I64, 1, &b, &err);
    crl_spec *onehot = crl_spec_onehot(N, CRL_U8, 2, SHAPE(B, N), &err);
    crl_spec *box = crl_spec_bounded(CRL_F32, 2, SHAPE(B, 1), -1, 1, &err);
    crl_mlp *net = mk_mlp(F, N, NULL, 0, 1), *wrong = mk_mlp(F, 4, NULL, 0, 1);
    ck_assert_ptr_null(crl_qvalue_actor_new(net, OBS, box, &err));
    assert_msg_has(&err, "module 'policy': the action spec is Bounded but this actor needs Categorical or OneHot actions");
    ck_assert_ptr_null(crl_qvalue_actor_new(wrong, OBS, cat, &err));
    assert_msg_has(&err, "the network gives 4 outputs but a Q-value actor needs 3 (one value per action)");
    crl_qvalue_actor *a = crl_qvalue_actor_new(net, OBS, cat, &err);
    ck_assert_msg(a != NULL, "%s", err.message);
    crl_td *td = obs_td(B, F, 2);
    ck_assert_int_eq(crl_qvalue_actor_act(a, td, CRL_EXPLORE_RANDOM, NULL, &err), CRL_OK);   /* greedy: no rng needed */
    crl_tensor *q = crl_td_get(td, "action_value"), *act = crl_td_get(td, "action"), *ch = crl_td_get(td, "chosen_action_value");
    ck_assert_int_eq(crl_tensor_dtype(act), CRL_I64);
    ck_assert_int_eq(crl_tensor_ndim(act), 1);
    int64_t greedy[B];
    for (int64_t r = 0; r < B; r++) {
        int64_t best = 0;
        for (int j = 1; j < N; j++)
            if (crl_tensor_flat_get(q, r * N + j) > crl_tensor_flat_get(q, r * N + best))
                best = j;
        greedy[r] = best;
        ck_assert_int_eq((int64_t)crl_tensor_flat_get(act, r), best);
        ck_assert(crl_tensor_flat_get(ch, r) == crl_tensor_flat_get(q, r * N + best));
    }
    /* Epsilon-greedy: eps 0.5 replaces about half the rows by uniform actions,
     * so about 2/3 of those differ from the greedy one. */
    ck_assert_int_eq(crl_qvalue_actor_set_egreedy(a, 1.0, 0.1, 10, &err), CRL_OK);
    crl_qvalue_actor_step(a, 5);
    assert_close(crl_qvalue_actor_epsilon(a), 0.55, 1e-12, 0, "annealed epsilon");
    ck_assert_int_eq(crl_qvalue_actor_act(a, td, CRL_EXPLORE_RANDOM, NULL, &err), CRL_E_INVALID);
    assert_msg_has(&err, "epsilon-greedy exploration needs a random stream");
    crl_rng rng;
    crl_rng_init(&rng, 9, 0);
    ck_assert_int_eq(crl_qvalue_actor_act(a, td, CRL_EXPLORE_RANDOM, &rng, &err), CRL_OK);
    act = crl_td_get(td, "action");
    int differ = 0;
    for (int64_t r = 0; r < B; r++)
        differ += (int64_t)crl_tensor_flat_get(act, r) != greedy[r];
    assert_close(differ / (double)B, 0.55 * 2 / 3, 0.04, 0, "epsilon-greedy share");
    ck_assert_int_eq(crl_qvalue_actor_act(a, td, CRL_EXPLORE_MODE, &rng, &err), CRL_OK);
    for (int64_t r = 0; r < B; r++)
        ck_assert_int_eq((int64_t)crl_tensor_flat_get(act, r), greedy[r]);
    crl_qvalue_actor_step(a, 100);
    ck_assert(crl_qvalue_actor_epsilon(a) == 0.1);
    ck_assert_int_eq(crl_qvalue_actor_set_egreedy(a, 1.5, 0.1, 10, &err), CRL_E_RANGE);
    ck_assert_int_eq(crl_qvalue_actor_set_egreedy(a, 1, 0.1, 0, &err), CRL_E_RANGE);
    ck_assert_ptr_nonnull(crl_qvalue_actor_module_get(a));
    crl_qvalue_actor_free(a);
    /* One-hot actions in the spec's dtype. */
    a = crl_qvalue_actor_new(net, OBS, onehot, &err);
    ck_assert_int_eq(crl_qvalue_actor_act(a, td, CRL_EXPLORE_MODE, NULL, &err), CRL_OK);
    act = crl_td_get(td, "action");
    ck_assert_int_eq(crl_tensor_dtype(act), CRL_U8);
    ck_assert_int_eq(crl_tensor_shape(act)[1], N);
    for (int64_t r = 0; r < 50; r++)
        for (int j = 0; j < N; j++)
            ck_assert(crl_tensor_flat_get(act, r * N + j) == (j == greedy[r]));
    crl_qvalue_actor_free(a);
    crl_td_unref(td);
    crl_mlp_unref(net);
    crl_mlp_unref(wrong);
    crl_spec_unref(cat);
    crl_spec_unref(onehot);
    crl_spec_unref(box);
}
END_TEST

/* ---- deterministic actor ------------------------------------------------------ */

START_TEST(test_det_actor_grad)
{
    enum { B = 4, F = 3, D = 2, H = 5 };
    crl_error err;
    crl_tensor *lo = t_new(CRL_F64, 2, SHAPE(B, D)), *hi = t_new(CRL_F64, 2, SHAPE(B, D));
    for (int i = 0; i < B * D; i++) {
        crl_tensor_flat_set(lo, i, i % D ? 0.0 : -2.0);
        crl_tensor_flat_set(hi, i, i % D ? 3.0 : 2.0);
    }
    crl_spec *box = crl_spec_bounded_t(CRL_F32, lo, hi, &err);
    ck_assert_msg(box != NULL, "%s", err.message);
    crl_mlp *net = mk_mlp(F, D, SHAPE(H), 1, 3);
    crl_det_actor *a = crl_det_actor_new(net, OBS, box, &err);
    ck_assert_msg(a != NULL, "%s", err.message);
    crl_td *td = obs_td(B, F, 4);
    ck_assert_int_eq(crl_det_actor_forward(a, td, &err), CRL_OK);
    crl_tensor *act = crl_td_get(td, "action");
    crl_rng rng;
    crl_rng_init(&rng, 5, 0);
    crl_tensor *R = t_rows(B, D, NULL, &rng);
    crl_mlp_zero_grad(net);
    ck_assert_int_eq(crl_det_actor_backward(a, R, NULL, &err), CRL_OK);
    /* float64 reference: action = c + h tanh(mlp(x)). */
    int64_t dims[] = { F, H, D }, np = crl_tensor_numel(crl_mlp_params_get(net));
    double *P = malloc((size_t)np * sizeof *P), x[B * F], y[B * D];
    for (int64_t i = 0; i < np; i++)
        P[i] = crl_tensor_flat_get(crl_mlp_params_get(net), i);
    for (int i = 0; i < B * F; i++)
        x[i] = crl_tensor_flat_get(crl_td_get(td, "observation"), i);
    const double c[D] = { 0, 1.5 }, h[D] = { 2, 1.5 };
    ref_mlp(dims, 2, CRL_ACT_TANH, false, P, x, B, y);
    for (int i = 0; i < B * D; i++)
        assert_close(crl_tensor_flat_get(act, i), c[i % D] + h[i % D] * tanh(y[i]), 1e-5, 1e-5, "squashed action");
    for (int64_t k = 0; k < np; k++) {
        double keep = P[k], l[2];
        for (int s = 0; s < 2; s++) {
            P[k] = keep + (s ? -1e-6 : 1e-6);
            ref_mlp(dims, 2, CRL_ACT_TANH, false, P, x, B, y);
            l[s] = 0;
            for (int i = 0; i < B * D; i++)
                l[s] += crl_tensor_flat_get(R, i) * (c[i % D] + h[i % D] * tanh(y[i]));
        }
        P[k] = keep;
        assert_close(crl_tensor_flat_get(crl_mlp_grads_get(net), k), (l[0] - l[1]) / 2e-6, 2e-5, 2e-3, "actor grad");
    }
    crl_tensor *bad = t_new(CRL_F32, 1, SHAPE(3));
    ck_assert_int_eq(crl_det_actor_backward(a, bad, NULL, &err), CRL_E_SHAPE);
    assert_msg_has(&err, "grad_action has shape [3] but the forward made 4 actions of 2 dims");
    /* bounds, module, and a target copy over a clone: the same actions; a network of other sizes is refused */
    const float *blo, *bhi;
    ck_assert_int_eq(crl_det_actor_bounds(a, &blo, &bhi), D);
    ck_assert(blo[0] == -2.0f && bhi[1] == 3.0f);
    ck_assert_str_eq(crl_tdmodule_in_key(crl_det_actor_module_get(a), 0), "observation");
    ck_assert_ptr_null(crl_tdmodule_in_key(crl_det_actor_module_get(a), 1));
    ck_assert_uint_eq(crl_tdmodule_num_in_keys(crl_det_actor_module_get(a)), 1);
    crl_mlp *twin = crl_mlp_clone(net, "actor_target", &err), *other = mk_mlp(F + 1, D, NULL, 0, 1);
    crl_det_actor *t = crl_det_actor_copy_new(a, twin, &err);
    ck_assert_msg(t != NULL, "%s", err.message);
    crl_td *td2 = obs_td(B, F, 4);
    ck_assert_int_eq(crl_det_actor_act(t, td2, CRL_EXPLORE_MODE, NULL, &err), CRL_OK);
    for (int i = 0; i < B * D; i++)
        ck_assert(crl_tensor_flat_get(crl_td_get(td2, "action"), i) == crl_tensor_flat_get(act, i));
    ck_assert_ptr_null(crl_det_actor_copy_new(a, other, &err));
    ck_assert_int_eq(err.code, CRL_E_SHAPE);
    assert_msg_has(&err, "4 inputs and 2 outputs, but the actor's network");
    ck_assert_ptr_null(crl_det_actor_copy_new(NULL, twin, &err));
    ck_assert_int_eq(err.code, CRL_E_INVALID);
    crl_det_actor_free(t);
    crl_td_unref(td2);
    crl_mlp_unref(twin);
    crl_mlp_unref(other);
    free(P);
    UNREF_ALL(lo, hi, R, bad);
    crl_td_unref(td);
    crl_det_actor_free(a);
    crl_mlp_unref(net);
    crl_spec_unref(box);
}
END_TEST

START_TEST(test_det_actor_noise)
{
    enum { B = 4000, F = 2 };
    crl_error err;
    crl_spec *free_spec = crl_spec_unbounded(CRL_F32, 2, SHAPE(B, 1), &err);
    crl_mlp *net = mk_mlp(F, 1, NULL, 0, 3);
    crl_det_actor *a = crl_det_actor_new(net, OBS, free_spec, &err);
    ck_assert_msg(a != NULL, "%s", err.message);
    crl_td *td = obs_td(B, F, 4);
    ck_assert_int_eq(crl_det_actor_act(a, td, CRL_EXPLORE_RANDOM, NULL, &err), CRL_OK);   /* no noise set */
    double clean[B];
    for (int r = 0; r < B; r++)
        clean[r] = crl_tensor_flat_get(crl_td_get(td, "action"), r);
    ck_assert_int_eq(crl_det_actor_set_gaussian(a, 1.0, 0.1, 10, 0.5, 2.0, &err), CRL_OK);
    crl_det_actor_step(a, 5);
    assert_close(crl_det_actor_noise_scale(a), 0.55, 1e-12, 0, "annealed sigma");
    crl_rng rng;
    crl_rng_init(&rng, 6, 0);
    ck_assert_int_eq(crl_det_actor_act(a, td, CRL_EXPLORE_RANDOM, &rng, &err), CRL_OK);
    double m = 0, v = 0;
    for (int r = 0; r < B; r++) {
        double n = crl_tensor_flat_get(crl_td_get(td, "action"), r) - clean[r];
        m += n / B;
        v += n * n / B;
    }
    assert_close(m, 0.55 * 0.5, 0.05, 0, "noise mean sigma * mean");
    assert_close(sqrt(v - m * m), 0.55 * 2.0, 0, 0.05, "noise std sigma * std");
    ck_assert_int_eq(crl_det_actor_act(a, td, CRL_EXPLORE_MODE, &rng, &err), CRL_OK);
    ck_assert(crl_tensor_flat_get(crl_td_get(td, "action"), 7) == clean[7]);
    /* OU: reproduce x <- x + theta (mu - x) dt + sigma sqrt(dt) N, action + eps x. */
    ck_assert_int_eq(crl_det_actor_set_ou(a, 0.15, 0.3, 0.2, 0.01, 1.0, 0.1, 1000, &err), CRL_OK);
    crl_rng mine;
    crl_rng_init(&rng, 8, 0);
    crl_rng_init(&mine, 8, 0);
    double x[3] = { 0 };
    bool init[B] = { false };
    crl_tensor *is_init = t_new(CRL_BOOL, 1, SHAPE(B));
    ck_assert_int_eq(crl_td_set(td, "is_init", is_init, &err), CRL_OK);
    for (int step = 0; step < 3; step++) {
        if (step == 2) {
            crl_tensor_flat_set(is_init, 1, 1);
            init[1] = true;
        }
        ck_assert_int_eq(crl_det_actor_act(a, td, CRL_EXPLORE_RANDOM, &rng, &err), CRL_OK);
        for (int r = 0; r < B; r++) {
            double n = crl_rng_normal(&mine);
            if (r < 3) {
                if (init[r])
                    x[r] = 0;
                x[r] = x[r] + 0.15 * (0.3 - x[r]) * 0.01 + 0.2 * 0.1 * n;
                x[r] = (float)x[r];
                assert_close(crl_tensor_flat_get(crl_td_get(td, "action"), r), clean[r] + x[r], 1e-6, 0, "OU action");
            }
        }
    }
    ck_assert_int_eq(crl_det_actor_set_ou(a, 0.15, 0, 0.2, 0, 1, 0.1, 10, &err), CRL_E_RANGE);
    ck_assert_int_eq(crl_det_actor_set_gaussian(a, -1, 0.1, 10, 0, 1, &err), CRL_E_RANGE);
    crl_tensor_unref(is_init);
    crl_td_unref(td);
    crl_det_actor_free(a);
    crl_mlp_unref(net);
    crl_spec_unref(free_spec);
}
END_TEST

/* ---- probabilistic actors ------------------------------------------------------ */

static double softplus(double v) { return v > 20 ? v : log1p(exp(v)); }

START_TEST(test_prob_categorical)
{
    enum { B = 5, F = 3, N = 4 };
    crl_error err;
    int64_t b = B;
    crl_spec *cat = crl_spec_categorical(N, CRL_I64, 1, &b, &err);
    crl_mlp *net = mk_mlp(F, N, NULL, 0, 2);
    crl_prob_actor *a = crl_prob_actor_new(net, OBS, CRL_DIST_CATEGORICAL, cat, &err);
    ck_assert_msg(a != NULL, "%s", err.message);
    crl_td *td = obs_td(B, F, 3);
    ck_assert_int_eq(crl_prob_actor_act(a, td, CRL_EXPLORE_MEAN, NULL, &err), CRL_E_UNSUPPORTED);
    assert_msg_has(&err, "a Categorical has no mean that is an action: use exploration type mode");
    ck_assert_int_eq(crl_prob_actor_act(a, td, CRL_EXPLORE_RANDOM, NULL, &err), CRL_E_INVALID);
    ck_assert_int_eq(crl_prob_actor_act(a, td, CRL_EXPLORE_MODE, NULL, &err), CRL_OK);
    /* return_log_prob is off by default, as TorchRL's: no sample_log_prob then */
    ck_assert(!crl_prob_actor_return_log_prob(a));
    ck_assert(!crl_td_has(td, "sample_log_prob"));
    ck_assert_int_eq(crl_tensor_ndim(crl_prob_actor_log_prob_get(a)), 1);
    crl_prob_actor_set_return_log_prob(a, true);
    ck_assert(crl_prob_actor_return_log_prob(a));
    crl_prob_actor_set_return_log_prob(NULL, true);
    ck_assert(!crl_prob_actor_return_log_prob(NULL));
    ck_assert_int_eq(crl_prob_actor_kind(a), CRL_DIST_CATEGORICAL);
    ck_assert_str_eq(crl_tdmodule_in_key(crl_prob_actor_module_get(a), 0), "observation");
    ck_assert_ptr_null(crl_prob_actor_module_get(NULL));
    crl_tensor *logits = crl_td_get(td, "logits");
    int64_t mode[B], act[B];
    float lp[B];
    crl_categorical_mode(crl_tensor_data(logits), B, N, mode);
    for (int r = 0; r < B; r++)
        ck_assert_int_eq((int64_t)crl_tensor_flat_get(crl_td_get(td, "action"), r), mode[r]);
    crl_rng rng, copy;
    crl_rng_init(&rng, 4, 0);
    copy = rng;
    ck_assert_int_eq(crl_prob_actor_forward(a, td, CRL_EXPLORE_RANDOM, &rng, &err), CRL_OK);
    crl_categorical_sample(crl_tensor_data(logits), B, N, &copy, act);
    crl_categorical_log_prob(crl_tensor_data(logits), B, N, act, lp, &err);
    /* [batch...], not [batch..., 1] (TorchRL's shape; a [B] tensor is rewritten in place) */
    crl_tensor *slp = crl_td_get(td, "sample_log_prob");
    ck_assert(crl_tensor_ndim(slp) == 1 && crl_tensor_shape(slp)[0] == B);
    for (int r = 0; r < B; r++) {
        ck_assert_int_eq((int64_t)crl_tensor_flat_get(crl_td_get(td, "action"), r), act[r]);
        ck_assert(crl_tensor_flat_get(slp, r) == lp[r]);
    }
    /* Backward: loss = sum gl * log_prob + ge * entropy, against the float64 reference. */
    crl_tensor *gl = t_rows(B, 1, NULL, &rng), *ge = t_rows(B, 1, NULL, &rng);
    crl_mlp_zero_grad(net);
    ck_assert_int_eq(crl_prob_actor_backward(a, NULL, gl, ge, NULL, &err), CRL_OK);
    crl_tensor *ga = t_new(CRL_F32, 1, SHAPE(B));
    ck_assert_int_eq(crl_prob_actor_backward(a, ga, NULL, NULL, NULL, &err), CRL_E_INVALID);
    assert_msg_has(&err, "Categorical samples have no reparameterisation");
    int64_t dims[] = { F, N }, np = crl_tensor_numel(crl_mlp_params_get(net));
    double *P = malloc((size_t)np * sizeof *P), x[B * F], z[B * N];
    for (int64_t i = 0; i < np; i++)
        P[i] = crl_tensor_flat_get(crl_mlp_params_get(net), i);
    for (int i = 0; i < B * F; i++)
        x[i] = crl_tensor_flat_get(crl_td_get(td, "observation"), i);
    for (int64_t k = 0; k < np; k++) {
        double keep = P[k], l[2];
        for (int s = 0; s < 2; s++) {
            P[k] = keep + (s ? -1e-6 : 1e-6);
            ref_mlp(dims, 1, CRL_ACT_TANH, false, P, x, B, z);
            l[s] = 0;
            for (int r = 0; r < B; r++) {
                double mx = z[r * N], sum = 0, hh = 0;
                for (int j = 1; j < N; j++)
                    mx = fmax(mx, z[r * N + j]);
                for (int j = 0; j < N; j++)
                    sum += exp(z[r * N + j] - mx);
                double lse = mx + log(sum);
                for (int j = 0; j < N; j++)
                    hh -= exp(z[r * N + j] - lse) * (z[r * N + j] - lse);
                l[s] += crl_tensor_flat_get(gl, r) * (z[r * N + act[r]] - lse) + crl_tensor_flat_get(ge, r) * hh;
            }
        }
        P[k] = keep;
        assert_close(crl_tensor_flat_get(crl_mlp_grads_get(net), k), (l[0] - l[1]) / 2e-6, 2e-5, 2e-3, "categorical actor grad");
    }
    /* evaluate reads the td's action back. */
    ck_assert_int_eq(crl_prob_actor_evaluate(a, td, NULL, &err), CRL_OK);
    for (int r = 0; r < B; r++)
        ck_assert(crl_tensor_flat_get(crl_prob_actor_log_prob_get(a), r) == lp[r]);
    crl_tensor_flat_set(crl_td_get(td, "action"), 2, 7);
    ck_assert_int_eq(crl_prob_actor_evaluate(a, td, NULL, &err), CRL_E_RANGE);
    assert_msg_has(&err, "'action' row 2 is not an action in [0, 4)");
    free(P);
    crl_tensor_unref(gl);
    crl_tensor_unref(ge);
    crl_tensor_unref(ga);
    crl_td_unref(td);
    crl_prob_actor_free(a);
    crl_mlp_unref(net);
    crl_spec_unref(cat);
}
END_TEST

enum { TB = 3, TF = 2, TD = 2, TH = 4 };
static const double TC[TD] = { 0, 1.5 }, THH[TD] = { 2, 1.5 };

/* log_prob of z given loc, scale (through tanh into [c - h, c + h]). */
static double ref_lp(double loc, double scale, double z, double h)
{
    double u = tanh(z);
    return -0.5 * pow((z - loc) / scale, 2) - log(scale) - 0.5 * log(2 * M_PI) - log(h * (1 - u * u));
}

/* The loss of the TanhNormal test: sum ga a + gl logp(a) - ge logp(entropy sample). */
static double ref_tanh_loss(const double *P, const double *x, const double *eps, const double *eps_ent,
                            const double *fixed, const double *ga, const double *gl, const double *ge)
{
    int64_t dims[] = { TF, TH, 2 * TD };
    double y[TB * 2 * TD], bias = log(expm1(1.0 - 1e-4)), l = 0;
    ref_mlp(dims, 2, CRL_ACT_TANH, false, P, x, TB, y);
    for (int r = 0; r < TB; r++)
        for (int j = 0; j < TD; j++) {
            double loc = y[r * 2 * TD + j], scale = softplus(y[r * 2 * TD + TD + j] + bias) + 1e-4;
            if (eps) {
                double z = loc + scale * eps[r * TD + j];
                l += ga[r * TD + j] * (TC[j] + THH[j] * tanh(z)) + gl[r] * ref_lp(loc, scale, z, THH[j]);
            } else {
                l += gl[r] * ref_lp(loc, scale, atanh((fixed[r * TD + j] - TC[j]) / THH[j]), THH[j]);
            }
            if (eps_ent)
                l -= ge[r] * ref_lp(loc, scale, loc + scale * eps_ent[r * TD + j], THH[j]);
        }
    return l;
}

static void check_tanh_grads(crl_mlp *net, const double *x, const double *eps, const double *eps_ent,
                             const double *fixed, const double *ga, const double *gl, const double *ge, const char *what)
{
    int64_t np = crl_tensor_numel(crl_mlp_params_get(net));
    double *P = malloc((size_t)np * sizeof *P);
    for (int64_t i = 0; i < np; i++)
        P[i] = crl_tensor_flat_get(crl_mlp_params_get(net), i);
    for (int64_t k = 0; k < np; k++) {
        double keep = P[k];
        P[k] = keep + 1e-6;
        double up = ref_tanh_loss(P, x, eps, eps_ent, fixed, ga, gl, ge);
        P[k] = keep - 1e-6;
        double dn = ref_tanh_loss(P, x, eps, eps_ent, fixed, ga, gl, ge);
        P[k] = keep;
        assert_close(crl_tensor_flat_get(crl_mlp_grads_get(net), k), (up - dn) / 2e-6, 5e-5, 3e-3, what);
    }
    free(P);
}

START_TEST(test_prob_tanh_normal)
{
    crl_error err;
    crl_tensor *lo = t_new(CRL_F64, 2, SHAPE(TB, TD)), *hi = t_new(CRL_F64, 2, SHAPE(TB, TD));
    for (int i = 0; i < TB * TD; i++) {
        crl_tensor_flat_set(lo, i, TC[i % TD] - THH[i % TD]);
        crl_tensor_flat_set(hi, i, TC[i % TD] + THH[i % TD]);
    }
    crl_spec *box = crl_spec_bounded_t(CRL_F32, lo, hi, &err);
    crl_mlp *net = mk_mlp(TF, 2 * TD, SHAPE(TH), 1, 5), *wrong = mk_mlp(TF, TD, NULL, 0, 1);
    ck_assert_ptr_null(crl_prob_actor_new(wrong, OBS, CRL_DIST_TANH_NORMAL, box, &err));
    assert_msg_has(&err, "the network gives 2 outputs but a TanhNormal needs 4 (loc and scale per action dim)");
    crl_prob_actor *a = crl_prob_actor_new(net, OBS, CRL_DIST_TANH_NORMAL, box, &err);
    ck_assert_msg(a != NULL, "%s", err.message);
    crl_prob_actor_set_return_log_prob(a, true);
    crl_td *td = obs_td(TB, TF, 6);
    double x[TB * TF], eps[TB * TD], eps_ent[TB * TD], ga[TB * TD], gl[TB], ge[TB], fixed[TB * TD];
    for (int i = 0; i < TB * TF; i++)
        x[i] = crl_tensor_flat_get(crl_td_get(td, "observation"), i);
    crl_rng rng, copy;
    crl_rng_init(&rng, 7, 0);
    copy = rng;
    /* RANDOM forward: action, log_prob and entropy share one reparameterised sample. */
    ck_assert_int_eq(crl_prob_actor_forward(a, td, CRL_EXPLORE_RANDOM, &rng, &err), CRL_OK);
    for (int i = 0; i < TB * TD; i++)
        eps[i] = (float)crl_rng_normal(&copy);
    crl_tensor *act = crl_td_get(td, "action"), *loc = crl_td_get(td, "loc"), *scale = crl_td_get(td, "scale");
    for (int i = 0; i < TB * TD; i++) {
        double z = crl_tensor_flat_get(loc, i) + crl_tensor_flat_get(scale, i) * eps[i];
        assert_close(crl_tensor_flat_get(act, i), TC[i % TD] + THH[i % TD] * tanh(z), 1e-5, 1e-5, "sampled action");
        ga[i] = 0.3 * i - 0.7;
    }
    for (int r = 0; r < TB; r++) {
        gl[r] = 0.5 - 0.4 * r;
        ge[r] = 0.2 + 0.1 * r;
        assert_close(crl_tensor_flat_get(crl_prob_actor_entropy_get(a), r),
                     -crl_tensor_flat_get(crl_td_get(td, "sample_log_prob"), r), 0, 0, "entropy estimate");
    }
    crl_tensor *tga = t_rows(TB, TD, ga, NULL), *tgl = t_rows(TB, 1, gl, NULL), *tge = t_rows(TB, 1, ge, NULL);
    crl_mlp_zero_grad(net);
    ck_assert_int_eq(crl_prob_actor_backward(a, tga, tgl, tge, NULL, &err), CRL_OK);
    /* The shared sample: entropy = -log_prob of the action's own eps. */
    check_tanh_grads(net, x, eps, eps, NULL, ga, gl, ge, "rsample grad");
    /* MODE: the action is fixed (not differentiable), the entropy uses its own draw. */
    copy = rng;
    ck_assert_int_eq(crl_prob_actor_forward(a, td, CRL_EXPLORE_MODE, &rng, &err), CRL_OK);
    for (int i = 0; i < TB * TD; i++) {
        eps_ent[i] = (float)crl_rng_normal(&copy);
        assert_close(crl_tensor_flat_get(act, i), TC[i % TD] + THH[i % TD] * tanh(crl_tensor_flat_get(loc, i)), 1e-6, 1e-6, "mode");
        fixed[i] = crl_tensor_flat_get(act, i);
    }
    ck_assert_int_eq(crl_prob_actor_backward(a, tga, NULL, NULL, NULL, &err), CRL_E_INVALID);
    assert_msg_has(&err, "only a random (reparameterised) sample is");
    crl_mlp_zero_grad(net);
    ck_assert_int_eq(crl_prob_actor_backward(a, NULL, tgl, tge, NULL, &err), CRL_OK);
    check_tanh_grads(net, x, NULL, eps_ent, fixed, ga, gl, ge, "mode log_prob + entropy grad");
    /* evaluate: the log-prob of stored actions, PPO's path. */
    for (int i = 0; i < TB * TD; i++) {
        fixed[i] = TC[i % TD] + THH[i % TD] * (0.9 * sin(i + 1.0));
        crl_tensor_flat_set(act, i, fixed[i]);
        fixed[i] = crl_tensor_flat_get(act, i);
    }
    copy = rng;
    ck_assert_int_eq(crl_prob_actor_evaluate(a, td, &rng, &err), CRL_OK);
    for (int i = 0; i < TB * TD; i++)
        eps_ent[i] = (float)crl_rng_normal(&copy);
    crl_mlp_zero_grad(net);
    ck_assert_int_eq(crl_prob_actor_backward(a, NULL, tgl, tge, NULL, &err), CRL_OK);
    check_tanh_grads(net, x, NULL, eps_ent, fixed, ga, gl, ge, "evaluate grad");
    /* MEAN stays inside the bounds and near the mode for this small net. */
    ck_assert_int_eq(crl_prob_actor_act(a, td, CRL_EXPLORE_MEAN, &rng, &err), CRL_OK);
    for (int i = 0; i < TB * TD; i++)
        ck_assert(fabs(crl_tensor_flat_get(act, i) - TC[i % TD]) < THH[i % TD]);
    ck_assert_int_eq(crl_prob_actor_evaluate(a, td, NULL, &err), CRL_E_INVALID);
    UNREF_ALL(lo, hi, tga, tgl, tge);
    crl_td_unref(td);
    crl_prob_actor_free(a);
    crl_mlp_unref(net);
    crl_mlp_unref(wrong);
    crl_spec_unref(box);
}
END_TEST

/* ---- the loss path end to end ----------------------------------------------- */

/* REINFORCE on a 3-armed bandit (arm 2 pays 1): the policy's mode and most
 * of its mass move to arm 2. */
START_TEST(test_reinforce_bandit)
{
    enum { B = 64, N = 3 };
    crl_error err;
    int64_t b = B;
    crl_spec *cat = crl_spec_categorical(N, CRL_I64, 1, &b, &err);
    crl_mlp *net = mk_mlp(2, N, SHAPE(16), 1, 1);
    crl_prob_actor *a = crl_prob_actor_new(net, OBS, CRL_DIST_CATEGORICAL, cat, &err);
    crl_prob_actor_set_return_log_prob(a, true);
    crl_optim *o = crl_optim_new(CRL_OPTIM_ADAM, 0.05, &err);
    ck_assert_int_eq(crl_optim_add_mlp(o, net, &err), CRL_OK);
    crl_td *td = obs_td(B, 2, 1);
    crl_tensor_fill(crl_td_get(td, "observation"), 1.0);
    crl_tensor *gl = t_new(CRL_F32, 1, SHAPE(B));
    crl_rng rng;
    crl_rng_init(&rng, 2, 0);
    for (int it = 0; it < 150; it++) {
        ck_assert_int_eq(crl_prob_actor_forward(a, td, CRL_EXPLORE_RANDOM, &rng, &err), CRL_OK);
        double mean = 0;
        for (int r = 0; r < B; r++)
            mean += (crl_tensor_flat_get(crl_td_get(td, "action"), r) == 2) / (double)B;
        /* loss = -mean(log_prob * (reward - baseline)) */
        for (int r = 0; r < B; r++)
            crl_tensor_flat_set(gl, r, -((crl_tensor_flat_get(crl_td_get(td, "action"), r) == 2) - mean) / B);
        crl_optim_zero_grad(o);
        ck_assert_int_eq(crl_prob_actor_backward(a, NULL, gl, NULL, NULL, &err), CRL_OK);
        ck_assert_int_eq(crl_optim_step(o, &err), CRL_OK);
    }
    ck_assert_int_eq(crl_prob_actor_act(a, td, CRL_EXPLORE_MODE, NULL, &err), CRL_OK);
    ck_assert_int_eq((int64_t)crl_tensor_flat_get(crl_td_get(td, "action"), 0), 2);
    assert_close(exp(crl_tensor_flat_get(crl_td_get(td, "sample_log_prob"), 0)), 1.0, 0.1, 0, "p(arm 2)");
    crl_tensor_unref(gl);
    crl_td_unref(td);
    crl_optim_free(o);
    crl_prob_actor_free(a);
    crl_mlp_unref(net);
    crl_spec_unref(cat);
}
END_TEST

/* A reparameterised TanhNormal policy maximising -(a - 0.5)^2 plus a small
 * entropy bonus (SAC's actor loss with a known critic): its mode goes to 0.5. */
START_TEST(test_rsample_objective)
{
    enum { B = 64 };
    crl_error err;
    crl_spec *box = crl_spec_bounded(CRL_F32, 2, SHAPE(B, 1), -1, 1, &err);
    crl_mlp *net = mk_mlp(2, 2, SHAPE(16), 1, 1);
    crl_prob_actor *a = crl_prob_actor_new(net, OBS, CRL_DIST_TANH_NORMAL, box, &err);
    crl_optim *o = crl_optim_new(CRL_OPTIM_ADAM, 0.01, &err);
    ck_assert_int_eq(crl_optim_add_mlp(o, net, &err), CRL_OK);
    crl_td *td = obs_td(B, 2, 1);
    crl_tensor *ga = t_new(CRL_F32, 2, SHAPE(B, 1)), *gl = t_new(CRL_F32, 1, SHAPE(B));
    crl_tensor_fill(gl, 0.01 / B);   /* alpha * log_prob */
    crl_rng rng;
    crl_rng_init(&rng, 3, 0);
    for (int it = 0; it < 300; it++) {
        ck_assert_int_eq(crl_prob_actor_forward(a, td, CRL_EXPLORE_RANDOM, &rng, &err), CRL_OK);
        for (int r = 0; r < B; r++)
            crl_tensor_flat_set(ga, r, 2 * (crl_tensor_flat_get(crl_td_get(td, "action"), r) - 0.5) / B);
        crl_optim_zero_grad(o);
        ck_assert_int_eq(crl_prob_actor_backward(a, ga, gl, NULL, NULL, &err), CRL_OK);
        ck_assert_int_eq(crl_optim_step(o, &err), CRL_OK);
    }
    ck_assert_int_eq(crl_prob_actor_act(a, td, CRL_EXPLORE_MODE, NULL, &err), CRL_OK);
    for (int r = 0; r < B; r += 7)
        assert_close(crl_tensor_flat_get(crl_td_get(td, "action"), r), 0.5, 0.05, 0, "learned mode");
    UNREF_ALL(ga, gl);
    crl_td_unref(td);
    crl_optim_free(o);
    crl_prob_actor_free(a);
    crl_mlp_unref(net);
    crl_spec_unref(box);
}
END_TEST

int main(void)
{
    return RUN_TESTS("actor", test_exploration_names, test_qvalue_actor, test_det_actor_grad, test_det_actor_noise, test_prob_categorical, test_prob_tanh_normal,
                     test_reinforce_bandit, test_rsample_objective);
}
