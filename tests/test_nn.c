/* Check suite: MLP forward/backward against a float64 reference and finite differences, init schemes,
 * parameters (state dict, save/load, target updates) and TensorDict modules. */
#include <stdlib.h>
#include <glib.h>
#include "nn-test.h"
#include "scratch-dir.h"

static crl_mlp *mk_mlp(const char *name, int64_t in, int64_t out, const int64_t *cells, int n, crl_activation a,
                       bool last, uint64_t seed)
{
    crl_rng rng;
    crl_rng_init(&rng, seed, 0);
    crl_error err;
    crl_mlp *m = crl_mlp_new(name, in, out, cells, n, a, last, &rng, &err);
    ck_assert_msg(m != NULL, "crl_mlp_new: %s", err.message);
    return m;
}

static double *params_f64(crl_mlp *m)
{
    crl_tensor *p = crl_mlp_params_get(m);
    double *d = malloc((size_t)crl_tensor_numel(p) * sizeof *d);
    for (int64_t i = 0; i < crl_tensor_numel(p); i++)
        d[i] = crl_tensor_flat_get(p, i);
    return d;
}

/* Loss = sum(y * R): backward with grad_out = R gives dLoss/dparams and
 * dLoss/dx; the float64 reference differentiated by central differences
 * must agree. */
static void grad_check(crl_activation act, bool last, const int64_t *cells, int n_cells)
{
    enum { IN = 3, OUT = 2, B = 4 };
    int64_t dims[8] = { IN };
    for (int i = 0; i < n_cells; i++)
        dims[i + 1] = cells[i];
    dims[n_cells + 1] = OUT;
    crl_mlp *m = mk_mlp("gc", IN, OUT, cells, n_cells, act, last, 7);
    crl_rng rng;
    crl_rng_init(&rng, 11, 0);
    crl_tensor *x = t_rows(B, IN, NULL, &rng), *R = t_rows(B, OUT, NULL, &rng);
    crl_error err;
    crl_tensor *y = crl_mlp_forward(m, x, &err);
    ck_assert_msg(y != NULL, "%s", err.message);
    double *P = params_f64(m), xd[B * IN], Rd[B * OUT], yr[B * OUT];
    for (int i = 0; i < B * IN; i++)
        xd[i] = crl_tensor_flat_get(x, i);
    for (int i = 0; i < B * OUT; i++)
        Rd[i] = crl_tensor_flat_get(R, i);
    ref_mlp(dims, n_cells + 1, act, last, P, xd, B, yr);
    for (int i = 0; i < B * OUT; i++)
        assert_close(crl_tensor_flat_get(y, i), yr[i], 1e-5, 1e-5, "forward vs float64 reference");
    crl_mlp_zero_grad(m);
    crl_tensor *gin = NULL;
    ck_assert_int_eq(crl_mlp_backward(m, R, &gin, &err), CRL_OK);
    ck_assert_int_eq(crl_tensor_shape(gin)[0], B);
    ck_assert_int_eq(crl_tensor_shape(gin)[1], IN);
    const double h = 1e-6;
    int64_t np = crl_tensor_numel(crl_mlp_params_get(m));
    for (int64_t k = 0; k < np + B * IN; k++) {
        double *v = k < np ? &P[k] : &xd[k - np], keep = *v, lp = 0, lm = 0;
        *v = keep + h;
        ref_mlp(dims, n_cells + 1, act, last, P, xd, B, yr);
        for (int i = 0; i < B * OUT; i++)
            lp += yr[i] * Rd[i];
        *v = keep - h;
        ref_mlp(dims, n_cells + 1, act, last, P, xd, B, yr);
        for (int i = 0; i < B * OUT; i++)
            lm += yr[i] * Rd[i];
        *v = keep;
        double fd = (lp - lm) / (2 * h);
        double an = k < np ? crl_tensor_flat_get(crl_mlp_grads_get(m), k) : crl_tensor_flat_get(gin, k - np);
        char what[96];
        snprintf(what, sizeof what, "%s %s %" PRId64, crl_activation_name(act), k < np ? "param" : "input",
                 k < np ? k : k - np);
        assert_close(an, fd, 2e-5, 2e-3, what);
    }
    /* Backward accumulates, as PyTorch's .backward(). */
    double g0 = crl_tensor_flat_get(crl_mlp_grads_get(m), 0);
    ck_assert_int_eq(crl_mlp_backward(m, R, NULL, &err), CRL_OK);
    assert_close(crl_tensor_flat_get(crl_mlp_grads_get(m), 0), 2 * g0, 1e-6, 1e-5, "accumulated gradient");
    free(P);
    crl_tensor_unref(x);
    crl_tensor_unref(R);
    crl_mlp_unref(m);
}

static const crl_activation ACTS[] = { CRL_ACT_TANH, CRL_ACT_RELU, CRL_ACT_ELU, CRL_ACT_LEAKY_RELU, CRL_ACT_IDENTITY };

START_TEST(test_grad_mlp)
{
    grad_check(ACTS[_i], false, (const int64_t[]){ 5, 4 }, 2);
    grad_check(ACTS[_i], true, (const int64_t[]){ 6 }, 1);
}
END_TEST

START_TEST(test_grad_linear)
{
    grad_check(CRL_ACT_TANH, false, NULL, 0);
    grad_check(CRL_ACT_TANH, true, NULL, 0);
}
END_TEST

START_TEST(test_seeded_init)
{
    crl_mlp *a = mk_mlp("a", 4, 2, SHAPE(8), 1, CRL_ACT_TANH, false, 3);
    crl_mlp *b = mk_mlp("b", 4, 2, SHAPE(8), 1, CRL_ACT_TANH, false, 3);
    crl_mlp *c = mk_mlp("c", 4, 2, SHAPE(8), 1, CRL_ACT_TANH, false, 4);
    ck_assert(crl_tensor_equal(crl_mlp_params_get(a), crl_mlp_params_get(b)));
    ck_assert(!crl_tensor_equal(crl_mlp_params_get(a), crl_mlp_params_get(c)));
    ck_assert_int_eq(crl_tensor_numel(crl_mlp_params_get(a)), 4 * 8 + 8 + 8 * 2 + 2);
    /* PyTorch's nn.Linear bounds: every weight and bias within 1/sqrt(fan_in). */
    crl_td *sd = crl_mlp_state_dict(a, NULL);
    crl_tensor *w2 = crl_td_get(sd, "2.weight"), *b0 = crl_td_get(sd, "0.bias");
    ck_assert_int_eq(crl_tensor_shape(w2)[0], 2);
    ck_assert_int_eq(crl_tensor_shape(w2)[1], 8);
    for (int64_t i = 0; i < crl_tensor_numel(w2); i++)
        ck_assert(fabs(crl_tensor_flat_get(w2, i)) <= 1 / sqrt(8.0));
    double mx = 0;
    for (int64_t i = 0; i < crl_tensor_numel(b0); i++)
        mx = fmax(mx, fabs(crl_tensor_flat_get(b0, i)));
    ck_assert(mx <= 0.5 && mx > 0.05);
    crl_td_unref(sd);
    crl_mlp_unref(a);
    crl_mlp_unref(b);
    crl_mlp_unref(c);
}
END_TEST

/* orthogonal_: rows (wide) or columns (tall) orthonormal times gain, bias 0. */
static void check_orthogonal(int64_t in, int64_t out, double gain)
{
    crl_mlp *m = mk_mlp("o", in, out, NULL, 0, CRL_ACT_TANH, false, 1);
    crl_rng rng;
    crl_rng_init(&rng, 5, 0);
    crl_error err;
    ck_assert_int_eq(crl_mlp_init(m, CRL_INIT_ORTHOGONAL, 1.0, gain, &rng, &err), CRL_OK);
    const float *W = crl_tensor_data(crl_mlp_params_get(m));
    bool wide = out < in;
    int64_t k = wide ? out : in, n = wide ? in : out;
    for (int64_t a = 0; a < k; a++)
        for (int64_t b = 0; b < k; b++) {
            double d = 0;
            for (int64_t i = 0; i < n; i++)
                d += (double)(wide ? W[a * in + i] : W[i * in + a]) * (wide ? W[b * in + i] : W[i * in + b]);
            assert_close(d, a == b ? gain * gain : 0, 1e-5, 1e-5, "orthogonality");
        }
    for (int64_t o = 0; o < out; o++)
        ck_assert(W[in * out + o] == 0.0f);
    crl_mlp_unref(m);
}

START_TEST(test_init_schemes)
{
    check_orthogonal(6, 3, 1.0);
    check_orthogonal(3, 7, 0.01);
    check_orthogonal(4, 4, sqrt(2.0));
    crl_mlp *m = mk_mlp("k", 50, 20, NULL, 0, CRL_ACT_RELU, false, 1);
    crl_rng rng;
    crl_rng_init(&rng, 2, 0);
    crl_error err;
    ck_assert_int_eq(crl_mlp_init(m, CRL_INIT_KAIMING_UNIFORM, 1.0, sqrt(2.0), &rng, &err), CRL_OK);
    const float *W = crl_tensor_data(crl_mlp_params_get(m));
    double bound = sqrt(2.0) * sqrt(3.0 / 50), mx = 0, var = 0;
    for (int i = 0; i < 1000; i++) {
        mx = fmax(mx, fabs(W[i]));
        var += (double)W[i] * W[i] / 1000;
    }
    ck_assert(mx <= bound && mx > 0.9 * bound);
    assert_close(var, 2.0 / 50, 0, 0.15, "kaiming variance 2/fan_in");
    ck_assert_int_eq(crl_mlp_init(m, CRL_INIT_XAVIER_UNIFORM, 1.0, 1.0, &rng, &err), CRL_OK);
    mx = 0;
    for (int i = 0; i < 1000; i++)
        mx = fmax(mx, fabs(W[i]));
    ck_assert(mx <= sqrt(6.0 / 70) && mx > 0.9 * sqrt(6.0 / 70));
    ck_assert_int_eq(crl_mlp_init(m, CRL_INIT_ORTHOGONAL, 0.0, 1.0, &rng, &err), CRL_E_INVALID);
    assert_msg_has(&err, "gains must be finite and > 0");
    ck_assert_int_eq(crl_mlp_init(m, (crl_init)9, 1.0, 1.0, &rng, &err), CRL_E_INVALID);
    crl_init s;
    ck_assert_int_eq(crl_init_from_name("orthogonal", &s, &err), CRL_OK);
    ck_assert_int_eq(s, CRL_INIT_ORTHOGONAL);
    ck_assert_int_eq(crl_init_from_name("he", &s, &err), CRL_E_INVALID);
    assert_msg_has(&err, "use default, orthogonal, kaiming_uniform or xavier_uniform");
    crl_mlp_unref(m);
}
END_TEST

START_TEST(test_errors)
{
    crl_rng rng;
    crl_rng_init(&rng, 1, 0);
    crl_error err;
    ck_assert_ptr_null(crl_mlp_new("q", 0, 2, NULL, 0, CRL_ACT_TANH, false, &rng, &err));
    ck_assert_int_eq(err.code, CRL_E_INVALID);
    assert_msg_has(&err, "module 'q': in_features (0)");
    ck_assert_ptr_null(crl_mlp_new("q", 3, 2, SHAPE(4, -1), 2, CRL_ACT_TANH, false, &rng, &err));
    assert_msg_has(&err, "num_cells[1] = -1");
    ck_assert_ptr_null(crl_mlp_new("q", 3, 2, NULL, 0, (crl_activation)42, false, &rng, &err));
    assert_msg_has(&err, "unknown activation");
    crl_activation a;
    ck_assert_int_eq(crl_activation_from_name("LeakyReLU", &a, &err), CRL_OK);
    ck_assert_int_eq(a, CRL_ACT_LEAKY_RELU);
    ck_assert_int_eq(crl_activation_from_name("gelu", &a, &err), CRL_E_INVALID);
    assert_msg_has(&err, "unknown activation 'gelu': use tanh, relu, elu, leaky_relu or identity");

    crl_mlp *m = mk_mlp("qvalue", 4, 2, SHAPE(8), 1, CRL_ACT_RELU, false, 1);
    crl_tensor *g = t_rows(3, 2, NULL, &rng);
    ck_assert_int_eq(crl_mlp_backward(m, g, NULL, &err), CRL_E_INVALID);
    assert_msg_has(&err, "backward needs a forward first");
    crl_tensor *x5 = t_rows(32, 5, NULL, &rng);
    ck_assert_ptr_null(crl_mlp_forward(m, x5, &err));
    ck_assert_int_eq(err.code, CRL_E_SHAPE);
    assert_msg_has(&err, "module 'qvalue': the input has shape [32, 5] but the MLP expects [B, 4]");
    crl_tensor *xi = t_new(CRL_I64, 2, SHAPE(3, 4));
    ck_assert_ptr_null(crl_mlp_forward(m, xi, &err));
    ck_assert_int_eq(err.code, CRL_E_DTYPE);
    assert_msg_has(&err, "dtype int64");
    crl_tensor *x = t_rows(3, 4, NULL, &rng);
    ck_assert_ptr_nonnull(crl_mlp_forward(m, x, &err));
    /* A gradient of another batch size than the forward is refused. */
    crl_tensor *g4 = t_rows(4, 2, NULL, &rng);
    ck_assert_int_eq(crl_mlp_backward(m, g4, NULL, &err), CRL_E_SHAPE);
    assert_msg_has(&err, "grad_out has 4 rows but the last forward had 3");
    ck_assert_int_eq(crl_mlp_backward(m, x, NULL, &err), CRL_E_SHAPE);
    crl_tensor *o = t_rows(2, 2, NULL, &rng);
    ck_assert_int_eq(crl_mlp_infer(m, x, o, &err), CRL_E_SHAPE);
    assert_msg_has(&err, "the output has 2 rows but the input 3");
    UNREF_ALL(g, x5, xi, x, g4, o);
    crl_mlp_unref(m);
}
END_TEST

/* infer matches forward, reads strided inputs and writes strided outputs;
 * forward reuses its output buffer for a fixed batch size. */
START_TEST(test_infer_and_reuse)
{
    crl_mlp *m = mk_mlp("m", 3, 2, SHAPE(5, 6), 2, CRL_ACT_ELU, false, 9);
    crl_rng rng;
    crl_rng_init(&rng, 4, 0);
    crl_tensor *x = t_rows(6, 3, NULL, &rng), *o = t_rows(6, 2, NULL, &rng);
    crl_error err;
    crl_tensor *y = crl_mlp_forward(m, x, &err);
    ck_assert_int_eq(crl_mlp_infer(m, x, o, &err), CRL_OK);
    ck_assert(crl_tensor_equal(y, o));
    ck_assert_ptr_eq(crl_mlp_forward(m, x, &err), y);
    /* x^T of a [3, 6] tensor is a strided [6, 3] view. */
    crl_tensor *xt_base = t_new(CRL_F32, 2, SHAPE(3, 6));
    crl_tensor *xt = crl_tensor_permute(xt_base, (const int[]){ 1, 0 }, &err);
    ck_assert_int_eq(crl_tensor_copy(xt, x, &err), CRL_OK);
    crl_tensor *ot_base = t_new(CRL_F32, 2, SHAPE(2, 6));
    crl_tensor *ot = crl_tensor_permute(ot_base, (const int[]){ 1, 0 }, &err);
    ck_assert_int_eq(crl_mlp_infer(m, xt, ot, &err), CRL_OK);
    for (int64_t i = 0; i < 12; i++)
        ck_assert(crl_tensor_flat_get(ot, i) == crl_tensor_flat_get(y, i));
    ck_assert_ptr_nonnull(crl_mlp_forward(m, xt, &err));
    ck_assert(crl_tensor_equal(crl_mlp_forward(m, xt, &err), o));
    UNREF_ALL(x, o, xt_base, xt, ot_base, ot);
    crl_mlp_unref(m);
}
END_TEST

START_TEST(test_target_updates)
{
    crl_mlp *m = mk_mlp("actor", 3, 2, SHAPE(4), 1, CRL_ACT_TANH, false, 1);
    crl_error err;
    crl_mlp *t = crl_mlp_clone(m, "actor_target", &err);
    ck_assert_ptr_nonnull(t);
    ck_assert_str_eq(crl_mlp_name(t), "actor_target");
    ck_assert(crl_tensor_equal(crl_mlp_params_get(m), crl_mlp_params_get(t)));
    crl_tensor *p = crl_mlp_params_get(m), *tp = crl_mlp_params_get(t);
    crl_tensor_fill(p, 1.0);
    crl_tensor_fill(tp, 3.0);
    ck_assert_int_eq(crl_params_soft_update(tp, p, 0.25, &err), CRL_OK);
    for (int64_t i = 0; i < crl_tensor_numel(tp); i++)
        ck_assert(crl_tensor_flat_get(tp, i) == 2.5);
    ck_assert_int_eq(crl_params_soft_update(tp, p, 1.5, &err), CRL_E_RANGE);
    assert_msg_has(&err, "tau = 1.5 must be in [0, 1]");
    ck_assert_int_eq(crl_params_hard_update(tp, p, &err), CRL_OK);
    ck_assert(crl_tensor_equal(tp, p));
    crl_mlp *other = mk_mlp("critic", 5, 1, SHAPE(4), 1, CRL_ACT_TANH, false, 1);
    ck_assert_int_eq(crl_params_hard_update(tp, crl_mlp_params_get(other), &err), CRL_E_SHAPE);
    assert_msg_has(&err, "clone the target");
    crl_tensor *d = t_new(CRL_F64, 1, SHAPE(crl_tensor_numel(p)));
    ck_assert_int_eq(crl_params_soft_update(d, p, 0.1, &err), CRL_E_DTYPE);
    ck_assert(crl_tensor_all_finite(p));
    crl_tensor_flat_set(p, 3, NAN);
    ck_assert(!crl_tensor_all_finite(p));
    crl_tensor_flat_set(p, 3, INFINITY);
    ck_assert(!crl_tensor_all_finite(p));
    crl_tensor_flat_set(d, 0, -INFINITY);
    ck_assert(!crl_tensor_all_finite(d));
    crl_tensor_unref(d);
    crl_mlp_unref(other);
    crl_mlp_unref(t);
    crl_mlp_unref(m);
}
END_TEST

START_TEST(test_save_load)
{
    crl_mlp *m = mk_mlp("q", 4, 3, SHAPE(8, 8), 2, CRL_ACT_RELU, false, 1);
    crl_mlp *n = mk_mlp("q2", 4, 3, SHAPE(8, 8), 2, CRL_ACT_RELU, false, 2);
    crl_mlp *other = mk_mlp("q3", 4, 3, SHAPE(8), 1, CRL_ACT_RELU, false, 2);
    crl_mlp *wide = mk_mlp("q4", 4, 3, SHAPE(8, 9), 2, CRL_ACT_RELU, false, 2);
    scratch_open("crl-nn-XXXXXX");
    char *path = tpath("model.ckpt");
    crl_error err;
    crl_ckpt_writer *w = crl_ckpt_writer_new(path, "crl.test.model", 1, &err);
    ck_assert_ptr_nonnull(w);
    ck_assert_int_eq(crl_mlp_save(m, w, "qvalue", &err), CRL_OK);
    ck_assert_int_eq(crl_ckpt_writer_close(w, &err), CRL_OK);
    crl_ckpt_reader *r = crl_ckpt_reader_open(path, "crl.test.model", 1, &err);
    ck_assert_msg(r != NULL, "%s", err.message);
    ck_assert(!crl_tensor_equal(crl_mlp_params_get(m), crl_mlp_params_get(n)));
    ck_assert_int_eq(crl_mlp_load(n, r, "qvalue", &err), CRL_OK);
    ck_assert(crl_tensor_equal(crl_mlp_params_get(m), crl_mlp_params_get(n)));
    /* Another architecture is refused and left as it was. */
    crl_tensor *before = crl_tensor_clone(crl_mlp_params_get(other), &err);
    ck_assert_int_eq(crl_mlp_load(other, r, "qvalue", &err), CRL_E_CORRUPT);
    assert_msg_has(&err, "section 'qvalue/2.bias' holds float32 [8] but module 'q3' has float32 [3]");
    ck_assert(crl_tensor_equal(before, crl_mlp_params_get(other)));
    ck_assert_int_eq(crl_mlp_load(wide, r, "qvalue", &err), CRL_E_CORRUPT);
    assert_msg_has(&err, "section 'qvalue/2.bias' holds float32 [8] but module 'q4' has float32 [9]");
    ck_assert_int_ne(crl_mlp_load(n, r, "policy", &err), CRL_OK);
    crl_ckpt_reader_free(r);
    crl_tensor_unref(before);
    g_free(path);
    scratch_close();
    crl_mlp_unref(m);
    crl_mlp_unref(n);
    crl_mlp_unref(other);
    crl_mlp_unref(wide);
}
END_TEST

/* ---- TensorDict modules -------------------------------------------------- */

static crl_td *td_with(int bn, const int64_t *batch)
{
    crl_error err;
    crl_td *td = crl_td_new(bn, batch, &err);
    ck_assert_ptr_nonnull(td);
    return td;
}

static void td_put(crl_td *td, const char *key, crl_tensor *t)
{
    crl_error err;
    ck_assert_msg(crl_td_set(td, key, t, &err) == CRL_OK, "%s", err.message);
    crl_tensor_unref(t);
}

START_TEST(test_tdmodule)
{
    crl_rng rng;
    crl_rng_init(&rng, 8, 0);
    crl_mlp *net = mk_mlp("qvalue", 5, 1, SHAPE(6), 1, CRL_ACT_TANH, false, 1);
    crl_error err;
    crl_tdmodule *mod = crl_tdmodule_new(net, (const char *const[]){ "observation", "action", NULL }, "state_action_value", &err);
    ck_assert_msg(mod != NULL, "%s", err.message);
    crl_td *td = td_with(2, SHAPE(2, 3));
    td_put(td, "observation", t_new(CRL_F32, 3, SHAPE(2, 3, 4)));
    ck_assert_int_eq(crl_tdmodule_forward(mod, td, &err), CRL_E_NOT_FOUND);
    assert_msg_has(&err, "module 'qvalue': in_key 'action' is not in the TensorDict (it has 'observation')");
    td_put(td, "action", t_new(CRL_F32, 3, SHAPE(2, 3, 2)));
    ck_assert_int_eq(crl_tdmodule_forward(mod, td, &err), CRL_E_SHAPE);
    assert_msg_has(&err, "in_keys give 'observation' 4 + 'action' 2 = 6 features but the MLP expects 5 input features");
    td_put(td, "action", t_new(CRL_F32, 2, SHAPE(2, 3)));
    ck_assert_int_eq(crl_tdmodule_forward(mod, td, &err), CRL_E_SHAPE);
    assert_msg_has(&err, "key 'action' has shape [2, 3] but in_keys are the batch dims [2, 3] then one feature dim");
    td_put(td, "action", t_new(CRL_F32, 3, SHAPE(2, 3, 1)));
    crl_tensor *obs = crl_td_get(td, "observation"), *act = crl_td_get(td, "action");
    for (int64_t i = 0; i < 24; i++)
        crl_tensor_flat_set(obs, i, crl_rng_range(&rng, -1, 1));
    for (int64_t i = 0; i < 6; i++)
        crl_tensor_flat_set(act, i, crl_rng_range(&rng, -1, 1));
    ck_assert_int_eq(crl_tdmodule_forward(mod, td, &err), CRL_OK);
    crl_tensor *q = crl_td_get(td, "state_action_value");
    ck_assert_int_eq(crl_tensor_ndim(q), 3);
    ck_assert_int_eq(crl_tensor_shape(q)[2], 1);
    /* Same numbers as the network on the concatenated rows. */
    crl_tensor *x = t_new(CRL_F32, 2, SHAPE(6, 5)), *y = t_new(CRL_F32, 2, SHAPE(6, 1));
    for (int64_t r = 0; r < 6; r++) {
        for (int64_t c = 0; c < 4; c++)
            crl_tensor_flat_set(x, r * 5 + c, crl_tensor_flat_get(obs, r * 4 + c));
        crl_tensor_flat_set(x, r * 5 + 4, crl_tensor_flat_get(act, r));
    }
    ck_assert_int_eq(crl_mlp_infer(net, x, y, &err), CRL_OK);
    for (int64_t r = 0; r < 6; r++)
        ck_assert(crl_tensor_flat_get(q, r) == crl_tensor_flat_get(y, r));
    /* Written in place the second time. */
    float *qdata = crl_tensor_data(q);
    ck_assert_int_eq(crl_tdmodule_infer(mod, td, &err), CRL_OK);
    ck_assert_ptr_eq(crl_tensor_data(crl_td_get(td, "state_action_value")), qdata);
    /* Backward: the input gradient splits back into the two keys. */
    ck_assert_int_eq(crl_tdmodule_forward(mod, td, &err), CRL_OK);
    crl_tensor *g = t_new(CRL_F32, 3, SHAPE(2, 3, 1));
    crl_tensor_fill(g, 1.0);
    crl_td *grads = td_with(2, SHAPE(2, 3));
    crl_mlp_zero_grad(net);
    ck_assert_int_eq(crl_tdmodule_backward(mod, g, grads, &err), CRL_OK);
    crl_tensor *gobs = crl_td_get(grads, "observation"), *gact = crl_td_get(grads, "action");
    ck_assert_int_eq(crl_tensor_shape(gobs)[2], 4);
    ck_assert_int_eq(crl_tensor_shape(gact)[2], 1);
    crl_tensor *y2 = crl_mlp_forward(net, x, &err), *gin = NULL, *g2 = t_new(CRL_F32, 2, SHAPE(6, 1));
    ck_assert_ptr_nonnull(y2);
    crl_tensor_fill(g2, 1.0);
    ck_assert_int_eq(crl_mlp_backward(net, g2, &gin, &err), CRL_OK);
    for (int64_t r = 0; r < 6; r++) {
        for (int64_t c = 0; c < 4; c++)
            ck_assert(crl_tensor_flat_get(gobs, r * 4 + c) == crl_tensor_flat_get(gin, r * 5 + c));
        ck_assert(crl_tensor_flat_get(gact, r) == crl_tensor_flat_get(gin, r * 5 + 4));
    }
    crl_tensor *bad = t_new(CRL_F32, 2, SHAPE(5, 1));
    ck_assert_int_eq(crl_tdmodule_backward(mod, bad, NULL, &err), CRL_E_SHAPE);
    assert_msg_has(&err, "grad_out has shape [5, 1] but the last forward wrote 6 rows of 1 features to 'state_action_value'");
    UNREF_ALL(x, y, g, g2, bad);
    crl_td_unref(grads);
    crl_td_unref(td);
    crl_tdmodule_free(mod);
    crl_mlp_unref(net);
}
END_TEST

START_TEST(test_tdmodule_errors)
{
    crl_mlp *net = mk_mlp("qvalue", 4, 2, NULL, 0, CRL_ACT_TANH, false, 1);
    crl_error err;
    ck_assert_ptr_null(crl_tdmodule_new(net, (const char *const[]){ NULL }, "out", &err));
    assert_msg_has(&err, "module 'qvalue': give at least one in_key");
    ck_assert_ptr_null(crl_tdmodule_new(net, (const char *const[]){ "observation", NULL }, "", &err));
    assert_msg_has(&err, "module 'qvalue': out_key");
    ck_assert_ptr_null(crl_tdmodule_new(NULL, (const char *const[]){ "observation", NULL }, "o", &err));
    crl_tdmodule *mod = crl_tdmodule_new(net, (const char *const[]){ "observation", NULL }, "action_value", &err);
    ck_assert_ptr_nonnull(mod);
    crl_td *td = td_with(1, SHAPE(32));
    td_put(td, "observation", t_new(CRL_F32, 2, SHAPE(32, 5)));
    ck_assert_int_eq(crl_tdmodule_forward(mod, td, &err), CRL_E_SHAPE);
    assert_msg_has(&err, "module 'qvalue': key 'observation' has shape [32, 5] but the MLP expects 4 features");
    /* Other dtypes are read as floats. */
    td_put(td, "observation", t_new(CRL_F64, 2, SHAPE(32, 4)));
    ck_assert_int_eq(crl_tdmodule_forward(mod, td, &err), CRL_OK);
    ck_assert_int_eq(crl_tensor_shape(crl_td_get(td, "action_value"))[1], 2);
    /* Nested keys: a target network reading "next.observation". */
    crl_tdmodule *next = crl_tdmodule_new(net, (const char *const[]){ "next.observation", NULL }, "next.action_value", &err);
    ck_assert_ptr_nonnull(next);
    crl_tensor *nobs = t_new(CRL_F32, 2, SHAPE(32, 4));
    crl_tensor_fill(nobs, 0.5);
    td_put(td, "next.observation", nobs);
    ck_assert_int_eq(crl_tdmodule_infer(next, td, &err), CRL_OK);
    crl_tensor *nq = crl_td_get(td, "next.action_value"), *one = t_new(CRL_F32, 2, SHAPE(1, 4)), *q1 = t_new(CRL_F32, 2, SHAPE(1, 2));
    crl_tensor_fill(one, 0.5);
    ck_assert_int_eq(crl_mlp_infer(net, one, q1, &err), CRL_OK);
    /* Close, not equal: a BLAS may sum a 1-row product in another order than a 32-row one (OpenBLAS >= 0.3.27
     * sends M = 1 to gemv; MKL and BLIS pick kernels by shape). */
    assert_close(crl_tensor_flat_get(nq, 31 * 2 + 1), crl_tensor_flat_get(q1, 1), 1e-6, 1e-6,
                 "row 31 of a 32-row batch vs the same row alone");
    UNREF_ALL(one, q1);
    crl_tdmodule_free(next);
    crl_td_unref(td);
    crl_tdmodule_free(mod);
    crl_mlp_unref(net);
}
END_TEST

static Suite *nn_suite(void)
{
    Suite *s = suite_create("nn");
    TCase *tc = tcase_create("mlp");
    tcase_add_loop_test(tc, test_grad_mlp, 0, (int)(sizeof ACTS / sizeof ACTS[0]));
    tcase_add_test(tc, test_grad_linear);
    tcase_add_test(tc, test_seeded_init);
    tcase_add_test(tc, test_init_schemes);
    tcase_add_test(tc, test_errors);
    tcase_add_test(tc, test_infer_and_reuse);
    tcase_add_test(tc, test_target_updates);
    tcase_add_test(tc, test_save_load);
    suite_add_tcase(s, tc);
    TCase *td = tcase_create("tdmodule");
    tcase_add_test(td, test_tdmodule);
    tcase_add_test(td, test_tdmodule_errors);
    suite_add_tcase(s, td);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(nn_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
