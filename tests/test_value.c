/* Check suite: value estimators against their forward-view definitions (n-step sums), terminated vs truncated,
 * the TensorDict form and bad inputs. */
#include <stdlib.h>
#include <crl/value.h>
#include "nn-test.h"

enum { N = 3, T = 8 };

typedef struct {
    float r[N * T], v[N * T], nv[N * T];
    bool done[N * T], term[N * T];
} traj;

/* Row 0: truncated at t = 2, terminated at t = 5; row 1: nothing ends
 * (bootstraps at the last step); row 2: terminated at the last step. */
static traj make(void)
{
    traj d;
    crl_rng rng;
    crl_rng_init(&rng, 12, 0);
    for (int i = 0; i < N * T; i++) {
        d.r[i] = (float)crl_rng_range(&rng, -1, 2);
        d.v[i] = (float)crl_rng_range(&rng, -1, 1);
        d.done[i] = d.term[i] = false;
    }
    for (int i = 0; i < N * T; i++)
        d.nv[i] = (i % T == T - 1 || i == 2 || i == 5) ? (float)crl_rng_range(&rng, -1, 1) : d.v[i + 1];
    d.done[2] = true;                     /* truncated */
    d.done[5] = d.term[5] = true;         /* terminated */
    d.done[2 * T + T - 1] = d.term[2 * T + T - 1] = true;
    return d;
}

/* The step index where t's trajectory segment ends (inclusive). */
static int seg_end(const traj *d, int row, int t)
{
    while (t < T - 1 && !d->done[row * T + t])
        t++;
    return t;
}

/* k-step return from t: k rewards then the bootstrap at step t + k - 1. */
static double nstep(const traj *d, int row, int t, int k, double gamma)
{
    double g = 0, disc = 1;
    int i = row * T + t;
    for (int s = 0; s < k; s++) {
        g += disc * d->r[i + s];
        disc *= gamma;
    }
    return g + (d->term[i + k - 1] ? 0 : disc * d->nv[i + k - 1]);
}

/* Forward-view lambda-return (lambda = 1: the full return; 0: TD(0)). */
static double lambda_return(const traj *d, int row, int t, double gamma, double lambda)
{
    int K = seg_end(d, row, t) - t + 1;
    double g = 0;
    for (int k = 1; k < K; k++)
        g += (1 - lambda) * pow(lambda, k - 1) * nstep(d, row, t, k, gamma);
    return g + pow(lambda, K - 1) * nstep(d, row, t, K, gamma);
}

static double gae(const traj *d, int row, int t, double gamma, double lambda)
{
    double a = 0;
    for (int s = t; s <= seg_end(d, row, t); s++) {
        int i = row * T + s;
        double delta = d->r[i] + (d->term[i] ? 0 : gamma * d->nv[i]) - d->v[i];
        a += pow(gamma * lambda, s - t) * delta;
    }
    return a;
}

static void check(crl_value_estimator kind, double gamma, double lambda)
{
    traj d = make();
    float adv[N * T], tgt[N * T];
    crl_error err;
    ck_assert_int_eq(crl_value_estimate(kind, gamma, lambda, N, T, d.r, d.v, d.nv, d.done, d.term, adv, tgt, &err), CRL_OK);
    for (int row = 0; row < N; row++)
        for (int t = 0; t < T; t++) {
            int i = row * T + t;
            double want;
            switch (kind) {
            case CRL_VALUE_TD0: want = nstep(&d, row, t, 1, gamma); break;
            case CRL_VALUE_TD1: want = lambda_return(&d, row, t, gamma, 1.0); break;
            case CRL_VALUE_TD_LAMBDA: want = lambda_return(&d, row, t, gamma, lambda); break;
            default: want = gae(&d, row, t, gamma, lambda) + d.v[i]; break;
            }
            char what[64];
            snprintf(what, sizeof what, "estimator %d row %d t %d", (int)kind, row, t);
            assert_close(tgt[i], want, 1e-5, 1e-5, what);
            assert_close(adv[i], want - d.v[i], 1e-5, 1e-5, what);
        }
}

START_TEST(test_estimators)
{
    check(CRL_VALUE_TD0, 0.9, 0.0);
    check(CRL_VALUE_TD1, 0.95, 0.0);
    check(CRL_VALUE_TD_LAMBDA, 0.99, 0.95);
    check(CRL_VALUE_TD_LAMBDA, 0.9, 0.5);
    check(CRL_VALUE_GAE, 0.99, 0.95);
    check(CRL_VALUE_GAE, 0.8, 0.0);
    check(CRL_VALUE_GAE, 0.8, 1.0);
}
END_TEST

/* Truncation bootstraps, termination does not; both end the trajectory. */
START_TEST(test_terminated_vs_truncated)
{
    float r[2] = { 1, 10 }, v[2] = { 0.5f, 0.5f }, nv[2] = { 2, 3 }, adv[2], tgt[2];
    bool done[2] = { true, false }, trunc_term[2] = { false, false }, term[2] = { true, false };
    crl_error err;
    for (int k = 0; k < 4; k++) {
        ck_assert_int_eq(crl_value_estimate((crl_value_estimator)k, 0.5, 0.7, 1, 2, r, v, nv, done, trunc_term, adv, tgt, &err), CRL_OK);
        assert_close(tgt[0], 1 + 0.5 * 2, 1e-6, 0, "truncated bootstraps");
        ck_assert_int_eq(crl_value_estimate((crl_value_estimator)k, 0.5, 0.7, 1, 2, r, v, nv, done, term, adv, tgt, &err), CRL_OK);
        assert_close(tgt[0], 1, 1e-6, 0, "terminated does not");
        assert_close(tgt[1], 10 + 0.5 * 3, 1e-6, 0, "last step bootstraps");
    }
}
END_TEST

START_TEST(test_errors)
{
    traj d = make();
    float adv[N * T];
    crl_error err;
    ck_assert_int_eq(crl_value_estimate(CRL_VALUE_GAE, 1.5, 0.9, N, T, d.r, d.v, d.nv, d.done, d.term, adv, NULL, &err), CRL_E_RANGE);
    assert_msg_has(&err, "value estimator gae: gamma (1.5) and lambda (0.9) must be in [0, 1]");
    ck_assert_int_eq(crl_value_estimate(CRL_VALUE_TD_LAMBDA, 0.9, NAN, N, T, d.r, d.v, d.nv, d.done, d.term, adv, NULL, &err), CRL_E_RANGE);
    ck_assert_int_eq(crl_value_estimate(CRL_VALUE_TD0, 0.9, 0, 0, T, d.r, d.v, d.nv, d.done, d.term, adv, NULL, &err), CRL_E_INVALID);
    ck_assert_int_eq(crl_value_estimate(CRL_VALUE_TD0, 0.9, 0, N, T, d.r, NULL, d.nv, d.done, d.term, adv, NULL, &err), CRL_E_INVALID);
    crl_value_estimator k;
    ck_assert_int_eq(crl_value_estimator_from_name("TD_lambda", &k, &err), CRL_OK);
    ck_assert_int_eq(k, CRL_VALUE_TD_LAMBDA);
    ck_assert_int_eq(crl_value_estimator_from_name("vtrace", &k, &err), CRL_E_INVALID);
    assert_msg_has(&err, "use td0, td1, td_lambda or gae");
}
END_TEST

static void put(crl_td *td, const char *key, crl_dtype dt, const float *f, const bool *b, bool trailing)
{
    crl_error err;
    crl_tensor *t = crl_tensor_new(dt, trailing ? 3 : 2, SHAPE(N, T, 1), &err);
    for (int i = 0; i < N * T; i++)
        crl_tensor_flat_set(t, i, f ? f[i] : b[i]);
    ck_assert_msg(crl_td_set(td, key, t, &err) == CRL_OK, "%s", err.message);
    crl_tensor_unref(t);
}

START_TEST(test_td_form)
{
    traj d = make();
    crl_error err;
    crl_td *td = crl_td_new(2, SHAPE(N, T), &err);
    put(td, "next.reward", CRL_F32, d.r, NULL, true);
    put(td, "state_value", CRL_F32, d.v, NULL, true);
    put(td, "next.done", CRL_BOOL, NULL, d.done, true);
    put(td, "next.terminated", CRL_BOOL, NULL, d.term, false);
    ck_assert_int_eq(crl_value_estimate_td(CRL_VALUE_GAE, 0.99, 0.95, td, &err), CRL_E_NOT_FOUND);
    assert_msg_has(&err, "the TensorDict has no 'next.state_value'");
    crl_tensor *wrong = crl_tensor_new(CRL_F32, 3, SHAPE(N, T, 2), &err);
    ck_assert_int_eq(crl_td_set(td, "next.state_value", wrong, &err), CRL_OK);
    crl_tensor_unref(wrong);
    ck_assert_int_eq(crl_value_estimate_td(CRL_VALUE_GAE, 0.99, 0.95, td, &err), CRL_E_SHAPE);
    assert_msg_has(&err, "'next.state_value' has shape [3, 8, 2] but the batch is [3, 8]");
    put(td, "next.state_value", CRL_F64, d.nv, NULL, true);
    ck_assert_int_eq(crl_value_estimate_td(CRL_VALUE_GAE, 0.99, 0.95, td, &err), CRL_OK);
    float adv[N * T], tgt[N * T];
    ck_assert_int_eq(crl_value_estimate(CRL_VALUE_GAE, 0.99, 0.95, N, T, d.r, d.v, d.nv, d.done, d.term, adv, tgt, &err), CRL_OK);
    crl_tensor *a = crl_td_get(td, "advantage"), *vt = crl_td_get(td, "value_target");
    ck_assert_int_eq(crl_tensor_ndim(a), 3);
    for (int i = 0; i < N * T; i++) {
        ck_assert(crl_tensor_flat_get(a, i) == adv[i]);
        ck_assert(crl_tensor_flat_get(vt, i) == tgt[i]);
    }
    crl_td_unref(td);
}
END_TEST

/* The critic path end to end: a 5-state chain (one-hot states, reward 1 on
 * the terminating last step), the critic trained on TD(lambda) targets of a
 * target network, learns V(s) = gamma^(4 - s). */
START_TEST(test_critic_learns_chain)
{
    enum { S = 5 };
    crl_error err;
    crl_rng rng;
    crl_rng_init(&rng, 1, 0);
    crl_mlp *critic = crl_mlp_new("critic", S, 1, SHAPE(32), 1, CRL_ACT_TANH, false, &rng, &err);
    crl_mlp *target = crl_mlp_clone(critic, "critic_target", &err);
    crl_tdmodule *v = crl_tdmodule_new(critic, (const char *const[]){ "observation", NULL }, "state_value", &err);
    crl_tdmodule *vt = crl_tdmodule_new(target, (const char *const[]){ "next.observation", NULL }, "next.state_value", &err);
    crl_optim *o = crl_optim_new(CRL_OPTIM_ADAM, 1e-2, &err);
    ck_assert_int_eq(crl_optim_add_mlp(o, critic, &err), CRL_OK);
    crl_td *td = crl_td_new(2, SHAPE(1, S), &err);
    crl_tensor *obs = crl_tensor_new(CRL_F32, 3, SHAPE(1, S, S), &err), *nobs = crl_tensor_new(CRL_F32, 3, SHAPE(1, S, S), &err);
    crl_tensor *rew = crl_tensor_new(CRL_F32, 3, SHAPE(1, S, 1), &err), *done = crl_tensor_new(CRL_BOOL, 3, SHAPE(1, S, 1), &err);
    for (int t = 0; t < S; t++) {
        crl_tensor_flat_set(obs, t * S + t, 1);
        if (t + 1 < S)
            crl_tensor_flat_set(nobs, t * S + t + 1, 1);
    }
    crl_tensor_flat_set(rew, S - 1, 1);
    crl_tensor_flat_set(done, S - 1, 1);
    ck_assert_int_eq(crl_td_set(td, "observation", obs, &err), CRL_OK);
    ck_assert_int_eq(crl_td_set(td, "next.observation", nobs, &err), CRL_OK);
    ck_assert_int_eq(crl_td_set(td, "next.reward", rew, &err), CRL_OK);
    ck_assert_int_eq(crl_td_set(td, "next.done", done, &err), CRL_OK);
    ck_assert_int_eq(crl_td_set(td, "next.terminated", done, &err), CRL_OK);
    crl_tensor *g = crl_tensor_new(CRL_F32, 3, SHAPE(1, S, 1), &err);
    for (int it = 0; it < 600; it++) {
        if (it % 20 == 0)
            ck_assert_int_eq(crl_params_hard_update(crl_mlp_params_get(target), crl_mlp_params_get(critic), &err), CRL_OK);
        ck_assert_int_eq(crl_tdmodule_infer(vt, td, &err), CRL_OK);
        ck_assert_int_eq(crl_tdmodule_forward(v, td, &err), CRL_OK);
        ck_assert_int_eq(crl_value_estimate_td(CRL_VALUE_TD_LAMBDA, 0.9, 0.8, td, &err), CRL_OK);
        /* MSE against the (constant) target. */
        for (int t = 0; t < S; t++)
            crl_tensor_flat_set(g, t, 2 * -crl_tensor_flat_get(crl_td_get(td, "advantage"), t) / S);
        crl_optim_zero_grad(o);
        ck_assert_int_eq(crl_tdmodule_backward(v, g, NULL, &err), CRL_OK);
        ck_assert_int_eq(crl_optim_step(o, &err), CRL_OK);
    }
    ck_assert_int_eq(crl_tdmodule_infer(v, td, &err), CRL_OK);
    for (int t = 0; t < S; t++)
        assert_close(crl_tensor_flat_get(crl_td_get(td, "state_value"), t), pow(0.9, S - 1 - t), 0.03, 0, "learned V");
    UNREF_ALL(obs, nobs, rew, done, g);
    crl_td_unref(td);
    crl_optim_free(o);
    crl_tdmodule_free(v);
    crl_tdmodule_free(vt);
    crl_mlp_unref(critic);
    crl_mlp_unref(target);
}
END_TEST

int main(void)
{
    return RUN_TESTS("value", test_estimators, test_terminated_vs_truncated, test_errors, test_td_form, test_critic_learns_chain);
}
