/* Check suite: LSTM and GRU (cells and sequences) against a float64 reference written from PyTorch's formulas,
 * gradients against finite differences of it (through time, across is_init resets), parameters (state dict,
 * save/load, clone), errors, and the TensorDict module (LSTMModule / GRUModule): steps and sequences agree,
 * states carried under next, reset on is_init. */
#include <stdlib.h>
#include <glib.h>
#include <crl/rnn.h>
#include "nn-test.h"
#include "rnn-ref.h"
#include "scratch-dir.h"

static crl_rnn *mk_rnn(crl_rnn_kind kind, int64_t F, int64_t H, uint64_t seed)
{
    crl_rng rng;
    crl_rng_init(&rng, seed, 0);
    crl_error err;
    crl_rnn *r = crl_rnn_new(kind == CRL_RNN_LSTM ? "lstm" : "gru", kind, F, H, &rng, &err);
    ck_assert_msg(r != NULL, "crl_rnn_new: %s", err.message);
    return r;
}

static double sig(double v) { return ref_sigmoid(v); }

static crl_tensor *t_rand(int ndim, const int64_t *shape, crl_rng *rng)
{
    crl_tensor *t = t_new(CRL_F32, ndim, shape);
    for (int64_t i = 0; i < crl_tensor_numel(t); i++)
        crl_tensor_flat_set(t, i, crl_rng_range(rng, -1, 1));
    return t;
}

static double *to_f64(const crl_tensor *t)
{
    double *d = malloc((size_t)crl_tensor_numel(t) * sizeof *d);
    for (int64_t i = 0; i < crl_tensor_numel(t); i++)
        d[i] = crl_tensor_flat_get(t, i);
    return d;
}

/* Loss = sum(y Ry) + sum(hT Rh) + sum(cT Rc): backward with those as the output gradients gives the gradient
 * of every parameter, input and initial state; the reference differentiated by central differences must
 * agree.  `reset` (B x T, may be NULL) puts episode starts mid-sequence. */
static double ref_loss(crl_rnn_kind kind, int64_t F, int64_t H, const double *P, int64_t B, int64_t T,
                       const double *x, const double *h0, const double *c0, const bool *reset, const double *Ry,
                       const double *Rh, const double *Rc)
{
    double *y = malloc((size_t)(B * T * H) * sizeof *y), *hT = malloc((size_t)(B * H) * sizeof *hT);
    double *cT = malloc((size_t)(B * H) * sizeof *cT);
    ref_rnn(kind, F, H, P, B, T, x, h0, c0, reset, y, hT, cT);
    double l = 0;
    for (int64_t i = 0; i < B * T * H; i++)
        l += y[i] * Ry[i];
    for (int64_t i = 0; i < B * H; i++)
        l += hT[i] * Rh[i] + (kind == CRL_RNN_LSTM ? cT[i] * Rc[i] : 0);
    free(y);
    free(hT);
    free(cT);
    return l;
}

static void grad_check(crl_rnn_kind kind, int64_t B, int64_t T, const bool *reset)
{
    enum { F = 3, H = 4 };
    bool lstm = kind == CRL_RNN_LSTM;
    crl_rnn *r = mk_rnn(kind, F, H, 5);
    crl_rng rng;
    crl_rng_init(&rng, 9, 0);
    crl_tensor *x = t_rand(3, SHAPE(B, T, F), &rng), *h0 = t_rand(2, SHAPE(B, H), &rng);
    crl_tensor *c0 = lstm ? t_rand(2, SHAPE(B, H), &rng) : NULL;
    crl_tensor *Ry = t_rand(3, SHAPE(B, T, H), &rng), *Rh = t_rand(2, SHAPE(B, H), &rng);
    crl_tensor *Rc = t_rand(2, SHAPE(B, H), &rng);
    crl_tensor *init = NULL;
    if (reset) {
        init = t_new(CRL_BOOL, 3, SHAPE(B, T, 1));
        for (int64_t i = 0; i < B * T; i++)
            crl_tensor_flat_set(init, i, reset[i]);
    }
    crl_error err;
    crl_tensor *y = crl_rnn_forward(r, x, h0, c0, init, &err);
    ck_assert_msg(y != NULL, "%s", err.message);
    double *P = to_f64(crl_rnn_params_get(r)), *xd = to_f64(x), *hd = to_f64(h0), *cd = lstm ? to_f64(c0) : NULL;
    double *Ryd = to_f64(Ry), *Rhd = to_f64(Rh), *Rcd = to_f64(Rc);
    double *yr = malloc((size_t)(B * T * H) * sizeof *yr), hr[64], cr[64];
    ref_rnn(kind, F, H, P, B, T, xd, hd, cd, reset, yr, hr, cr);
    for (int64_t i = 0; i < B * T * H; i++)
        assert_close(crl_tensor_flat_get(y, i), yr[i], 1e-5, 1e-5, "output vs float64 reference");
    for (int64_t i = 0; i < B * H; i++) {
        assert_close(crl_tensor_flat_get(crl_rnn_last_h(r), i), hr[i], 1e-5, 1e-5, "final h vs reference");
        if (lstm)
            assert_close(crl_tensor_flat_get(crl_rnn_last_c(r), i), cr[i], 1e-5, 1e-5, "final c vs reference");
    }
    crl_rnn_zero_grad(r);
    crl_tensor *gin = NULL, *gh0 = NULL, *gc0 = NULL;
    ck_assert_msg(crl_rnn_backward(r, Ry, Rh, lstm ? Rc : NULL, &gin, &gh0, lstm ? &gc0 : NULL, &err) == CRL_OK,
                  "%s", err.message);
    int64_t np = crl_tensor_numel(crl_rnn_params_get(r)), nx = B * T * F, nh = B * H;
    const double h = 1e-6;
    for (int64_t k = 0; k < np + nx + nh + (lstm ? nh : 0); k++) {
        double *v = k < np ? &P[k] : k < np + nx ? &xd[k - np] : k < np + nx + nh ? &hd[k - np - nx]
                                                                                 : &cd[k - np - nx - nh];
        double keep = *v;
        *v = keep + h;
        double lp = ref_loss(kind, F, H, P, B, T, xd, hd, cd, reset, Ryd, Rhd, Rcd);
        *v = keep - h;
        double lm = ref_loss(kind, F, H, P, B, T, xd, hd, cd, reset, Ryd, Rhd, Rcd);
        *v = keep;
        double fd = (lp - lm) / (2 * h), an;
        const char *part;
        if (k < np) {
            an = crl_tensor_flat_get(crl_rnn_grads_get(r), k);
            part = "param";
        } else if (k < np + nx) {
            an = crl_tensor_flat_get(gin, k - np);
            part = "input";
        } else if (k < np + nx + nh) {
            an = crl_tensor_flat_get(gh0, k - np - nx);
            part = "h0";
        } else {
            an = crl_tensor_flat_get(gc0, k - np - nx - nh);
            part = "c0";
        }
        char what[96];
        snprintf(what, sizeof what, "%s B=%" PRId64 " T=%" PRId64 " %s %" PRId64, crl_rnn_kind_name(kind), B, T,
                 part, k);
        assert_close(an, fd, 5e-5, 2e-3, what);
    }
    /* A reset at step 0 cuts h0 and c0 off: their gradient is exactly zero there. */
    for (int64_t b = 0; reset && b < B; b++)
        if (reset[b * T])
            for (int64_t j = 0; j < H; j++) {
                ck_assert(crl_tensor_flat_get(gh0, b * H + j) == 0);
                ck_assert(!lstm || crl_tensor_flat_get(gc0, b * H + j) == 0);
            }
    /* Backward accumulates, as PyTorch's .backward(). */
    double g0 = crl_tensor_flat_get(crl_rnn_grads_get(r), 0);
    ck_assert_int_eq(crl_rnn_backward(r, Ry, Rh, lstm ? Rc : NULL, NULL, NULL, NULL, &err), CRL_OK);
    assert_close(crl_tensor_flat_get(crl_rnn_grads_get(r), 0), 2 * g0, 1e-6, 1e-5, "accumulated gradient");
    free(P);
    free(xd);
    free(hd);
    free(cd);
    free(Ryd);
    free(Rhd);
    free(Rcd);
    free(yr);
    UNREF_ALL(x, h0, Ry, Rh, Rc);
    crl_tensor_unref(c0);
    crl_tensor_unref(init);
    crl_rnn_unref(r);
}

static const crl_rnn_kind KINDS[] = { CRL_RNN_LSTM, CRL_RNN_GRU };

START_TEST(test_grad_cell)
{
    grad_check(KINDS[_i], 3, 1, NULL);
    grad_check(KINDS[_i], 3, 1, (const bool[]){ false, true, false });
}
END_TEST

START_TEST(test_grad_sequence)
{
    grad_check(KINDS[_i], 2, 5, NULL);
    /* Episode starts mid-sequence (row 0 at t=2, row 1 at t=0 and t=3). */
    grad_check(KINDS[_i], 2, 5, (const bool[]){ false, false, true, false, false, true, false, false, true, false });
}
END_TEST

/* One hand-computed GRU step tells PyTorch's formula (r multiplies W_hn h + b_hn) from the variant where r
 * multiplies h before the product: F = H = 1, every weight 1, every bias 0 except b_hn = 1, x = 0, h0 = 1. */
START_TEST(test_gru_formula)
{
    crl_rnn *r = mk_rnn(CRL_RNN_GRU, 1, 1, 1);
    float *p = crl_tensor_data(crl_rnn_params_get(r));
    /* weight_ih [3,1], weight_hh [3,1], bias_ih [3], bias_hh [3] */
    const float vals[12] = { 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 1 };
    memcpy(p, vals, sizeof vals);
    crl_tensor *x = t_new(CRL_F32, 3, SHAPE(1, 1, 1)), *h0 = t_new(CRL_F32, 2, SHAPE(1, 1));
    crl_tensor_fill(x, 0);
    crl_tensor_fill(h0, 1);
    crl_error err;
    crl_tensor *y = crl_rnn_forward(r, x, h0, NULL, NULL, &err);
    ck_assert_ptr_nonnull(y);
    double rr = sig(1), z = sig(1), n = tanh(rr * (1 + 1)), want = (1 - z) * n + z * 1;
    assert_close(crl_tensor_flat_get(y, 0), want, 1e-6, 1e-6, "GRU step");
    UNREF_ALL(x, h0);
    crl_rnn_unref(r);
}
END_TEST

/* Infer gives forward's results and leaves forward's cache alone. */
START_TEST(test_infer)
{
    bool lstm = KINDS[_i] == CRL_RNN_LSTM;
    crl_rnn *r = mk_rnn(KINDS[_i], 3, 5, 2);
    crl_rng rng;
    crl_rng_init(&rng, 4, 0);
    crl_tensor *x = t_rand(3, SHAPE(4, 6, 3), &rng), *x2 = t_rand(3, SHAPE(2, 1, 3), &rng);
    crl_tensor *h0 = t_rand(2, SHAPE(4, 5), &rng), *c0 = lstm ? t_rand(2, SHAPE(4, 5), &rng) : NULL;
    crl_tensor *g = t_rand(3, SHAPE(4, 6, 5), &rng);
    crl_tensor *y = t_new(CRL_F32, 3, SHAPE(4, 6, 5)), *hT = t_new(CRL_F32, 2, SHAPE(4, 5));
    crl_tensor *cT = t_new(CRL_F32, 2, SHAPE(4, 5)), *y2 = t_new(CRL_F32, 3, SHAPE(2, 1, 5));
    crl_error err;
    crl_tensor *yf = crl_rnn_forward(r, x, h0, c0, NULL, &err);
    ck_assert_ptr_nonnull(yf);
    crl_rnn_zero_grad(r);
    ck_assert_int_eq(crl_rnn_backward(r, g, NULL, NULL, NULL, NULL, NULL, &err), CRL_OK);
    crl_tensor *g1 = crl_tensor_clone(crl_rnn_grads_get(r), &err);
    ck_assert_int_eq(crl_rnn_infer(r, x, h0, c0, NULL, y, hT, lstm ? cT : NULL, &err), CRL_OK);
    ck_assert(crl_tensor_equal(y, yf));
    ck_assert(crl_tensor_equal(hT, crl_rnn_last_h(r)));
    ck_assert(!lstm || crl_tensor_equal(cT, crl_rnn_last_c(r)));
    /* Another batch and length through infer, then backward of the forward: the same gradients. */
    ck_assert_int_eq(crl_rnn_infer(r, x2, NULL, NULL, NULL, y2, NULL, NULL, &err), CRL_OK);
    crl_rnn_zero_grad(r);
    ck_assert_int_eq(crl_rnn_backward(r, g, NULL, NULL, NULL, NULL, NULL, &err), CRL_OK);
    ck_assert(crl_tensor_equal(g1, crl_rnn_grads_get(r)));
    /* Six steps at once are six cells chained. */
    crl_tensor *h = crl_tensor_clone(h0, &err), *c = lstm ? crl_tensor_clone(c0, &err) : NULL;
    crl_tensor *xt = t_new(CRL_F32, 3, SHAPE(4, 1, 3)), *yt = t_new(CRL_F32, 3, SHAPE(4, 1, 5));
    for (int64_t t = 0; t < 6; t++) {
        for (int64_t b = 0; b < 4; b++)
            for (int64_t i = 0; i < 3; i++)
                crl_tensor_flat_set(xt, b * 3 + i, crl_tensor_flat_get(x, (b * 6 + t) * 3 + i));
        ck_assert_int_eq(crl_rnn_infer(r, xt, h, c, NULL, yt, h, c, &err), CRL_OK);
        for (int64_t b = 0; b < 4; b++)
            for (int64_t j = 0; j < 5; j++)
                assert_close(crl_tensor_flat_get(yt, b * 5 + j), crl_tensor_flat_get(y, (b * 6 + t) * 5 + j), 1e-6,
                             1e-5, "step by step vs sequence");
    }
    UNREF_ALL(x, x2, h0, g, y, hT, cT, y2, g1, h, xt, yt);
    crl_tensor_unref(c0);
    crl_tensor_unref(c);
    crl_rnn_unref(r);
}
END_TEST

START_TEST(test_params)
{
    crl_rnn *l = mk_rnn(CRL_RNN_LSTM, 3, 5, 1), *g = mk_rnn(CRL_RNN_GRU, 3, 5, 1);
    crl_error err;
    /* PyTorch's names, shapes and init range. */
    crl_td *sd = crl_rnn_state_dict(l, &err);
    ck_assert_ptr_nonnull(sd);
    const struct { const char *k; int nd; int64_t s0, s1; } want[] = {
        { "weight_ih_l0", 2, 20, 3 }, { "weight_hh_l0", 2, 20, 5 }, { "bias_ih_l0", 1, 20, 0 }, { "bias_hh_l0", 1, 20, 0 },
    };
    for (int i = 0; i < 4; i++) {
        const crl_tensor *t = crl_td_get(sd, want[i].k);
        ck_assert_msg(t != NULL, "state dict lacks %s", want[i].k);
        ck_assert_int_eq(crl_tensor_ndim(t), want[i].nd);
        ck_assert_int_eq(crl_tensor_shape(t)[0], want[i].s0);
        if (want[i].nd == 2)
            ck_assert_int_eq(crl_tensor_shape(t)[1], want[i].s1);
    }
    ck_assert_int_eq(crl_tensor_numel(crl_rnn_params_get(l)), 20 * (3 + 5 + 2));
    ck_assert_int_eq(crl_tensor_numel(crl_rnn_params_get(g)), 15 * (3 + 5 + 2));
    double k = 1 / sqrt(5.0), lo = 1, hi = -1;
    for (int64_t i = 0; i < crl_tensor_numel(crl_rnn_params_get(l)); i++) {
        double v = crl_tensor_flat_get(crl_rnn_params_get(l), i);
        lo = fmin(lo, v);
        hi = fmax(hi, v);
    }
    ck_assert(lo >= -k && hi <= k && hi - lo > k);
    /* Views: writing through the state dict changes the parameters. */
    crl_tensor_fill(crl_td_get(sd, "bias_hh_l0"), 0.25);
    ck_assert(crl_tensor_flat_get(crl_rnn_params_get(l), 20 * 9) == 0.25f);
    crl_td_unref(sd);
    /* Clone, save and load. */
    crl_rnn *c = crl_rnn_clone(l, "copy", &err);
    ck_assert(crl_tensor_equal(crl_rnn_params_get(c), crl_rnn_params_get(l)));
    ck_assert_str_eq(crl_rnn_name(c), "copy");
    crl_rnn *l2 = mk_rnn(CRL_RNN_LSTM, 3, 5, 2), *l3 = mk_rnn(CRL_RNN_LSTM, 3, 6, 2);
    scratch_open("crl-rnn-XXXXXX");
    char *path = tpath("rnn.ckpt");
    crl_ckpt_writer *w = crl_ckpt_writer_new(path, "crl.test.rnn", 1, &err);
    ck_assert_ptr_nonnull(w);
    ck_assert_int_eq(crl_rnn_save(l, w, "lstm", &err), CRL_OK);
    ck_assert_int_eq(crl_ckpt_writer_close(w, &err), CRL_OK);
    crl_ckpt_reader *rd = crl_ckpt_reader_open(path, "crl.test.rnn", 1, &err);
    ck_assert_msg(rd != NULL, "%s", err.message);
    ck_assert(!crl_tensor_equal(crl_rnn_params_get(l2), crl_rnn_params_get(l)));
    ck_assert_int_eq(crl_rnn_load(l2, rd, "lstm", &err), CRL_OK);
    ck_assert(crl_tensor_equal(crl_rnn_params_get(l2), crl_rnn_params_get(l)));
    crl_tensor *before = crl_tensor_clone(crl_rnn_params_get(l3), &err);
    ck_assert_int_eq(crl_rnn_load(l3, rd, "lstm", &err), CRL_E_CORRUPT);
    assert_msg_has(&err, "holds float32 [20] but module 'lstm' has float32 [24]");
    ck_assert(crl_tensor_equal(before, crl_rnn_params_get(l3)));
    ck_assert_int_eq(crl_rnn_load(g, rd, "lstm", &err), CRL_E_CORRUPT);
    ck_assert_int_ne(crl_rnn_load(l2, rd, "gru", &err), CRL_OK);
    crl_ckpt_reader_free(rd);
    g_free(path);
    scratch_close();
    /* The optimizer steps them. */
    crl_optim *o = crl_optim_new(CRL_OPTIM_SGD, 0.5, &err);
    ck_assert_int_eq(crl_optim_add_rnn(o, c, &err), CRL_OK);
    crl_tensor_fill(crl_rnn_grads_get(c), 1);
    double p0 = crl_tensor_flat_get(crl_rnn_params_get(c), 0);
    ck_assert_int_eq(crl_optim_step(o, &err), CRL_OK);
    assert_close(crl_tensor_flat_get(crl_rnn_params_get(c), 0), p0 - 0.5, 1e-6, 0, "SGD step");
    crl_optim_free(o);
    crl_tensor_unref(before);
    crl_rnn_unref(l);
    crl_rnn_unref(l2);
    crl_rnn_unref(l3);
    crl_rnn_unref(g);
    crl_rnn_unref(c);
}
END_TEST

START_TEST(test_errors)
{
    crl_rng rng;
    crl_rng_init(&rng, 1, 0);
    crl_error err;
    crl_rnn_kind k;
    ck_assert_int_eq(crl_rnn_kind_from_name("GRU", &k, &err), CRL_OK);
    ck_assert_int_eq(k, CRL_RNN_GRU);
    ck_assert_int_eq(crl_rnn_kind_from_name("rnn", &k, &err), CRL_E_INVALID);
    assert_msg_has(&err, "unknown recurrent network 'rnn': use lstm or gru");
    ck_assert_ptr_null(crl_rnn_new("bad", CRL_RNN_LSTM, 0, 4, &rng, &err));
    assert_msg_has(&err, "module 'bad': input_size (0) and hidden_size (4) must be in [1, 16777216]");
    ck_assert_ptr_null(crl_rnn_new("bad", (crl_rnn_kind)7, 2, 4, &rng, &err));
    ck_assert_ptr_null(crl_rnn_new("bad", CRL_RNN_GRU, 2, 4, NULL, &err));
    crl_rnn *l = mk_rnn(CRL_RNN_LSTM, 3, 4, 1), *g = mk_rnn(CRL_RNN_GRU, 3, 4, 1);
    crl_tensor *x = t_rand(3, SHAPE(2, 5, 3), &rng), *x2 = t_rand(2, SHAPE(2, 3), &rng);
    crl_tensor *xd = t_new(CRL_F64, 3, SHAPE(2, 5, 3)), *h = t_rand(2, SHAPE(2, 4), &rng);
    crl_tensor *hbad = t_rand(2, SHAPE(3, 4), &rng), *ibad = t_new(CRL_BOOL, 2, SHAPE(2, 4));
    ck_assert_int_eq(crl_rnn_backward(l, NULL, NULL, NULL, NULL, NULL, NULL, &err), CRL_E_INVALID);
    assert_msg_has(&err, "backward needs a forward first");
    ck_assert_ptr_null(crl_rnn_forward(l, x2, NULL, NULL, NULL, &err));
    assert_msg_has(&err, "module 'lstm': the input has shape [2, 3] but the LSTM expects [B, T, 3]");
    ck_assert_ptr_null(crl_rnn_forward(l, xd, NULL, NULL, NULL, &err));
    ck_assert_int_eq(err.code, CRL_E_DTYPE);
    ck_assert_ptr_null(crl_rnn_forward(l, x, hbad, NULL, NULL, &err));
    assert_msg_has(&err, "h0 has shape [3, 4] but the LSTM expects [2, 4]");
    ck_assert_ptr_null(crl_rnn_forward(l, x, h, hbad, NULL, &err));
    assert_msg_has(&err, "c0 has shape [3, 4]");
    ck_assert_ptr_null(crl_rnn_forward(g, x, h, h, NULL, &err));
    assert_msg_has(&err, "a GRU has no cell state");
    ck_assert_ptr_null(crl_rnn_forward(g, x, NULL, NULL, ibad, &err));
    assert_msg_has(&err, "is_init has shape [2, 4] but the input is [2, 5, ...]");
    /* A failed forward leaves nothing to backward. */
    ck_assert_int_eq(crl_rnn_backward(g, NULL, NULL, NULL, NULL, NULL, NULL, &err), CRL_E_INVALID);
    ck_assert_ptr_nonnull(crl_rnn_forward(l, x, h, h, NULL, &err));
    ck_assert_int_eq(crl_rnn_backward(l, x, NULL, NULL, NULL, NULL, NULL, &err), CRL_E_SHAPE);
    assert_msg_has(&err, "grad_out has shape [2, 5, 3] but the LSTM expects [2, 5, 4]");
    ck_assert_int_eq(crl_rnn_backward(l, NULL, hbad, NULL, NULL, NULL, NULL, &err), CRL_E_SHAPE);
    ck_assert_ptr_nonnull(crl_rnn_forward(g, x, h, NULL, NULL, &err));
    ck_assert_int_eq(crl_rnn_backward(g, NULL, NULL, h, NULL, NULL, NULL, &err), CRL_E_INVALID);
    crl_tensor *y = t_new(CRL_F32, 3, SHAPE(2, 4, 4));
    ck_assert_int_eq(crl_rnn_infer(g, x, NULL, NULL, NULL, y, NULL, NULL, &err), CRL_E_SHAPE);
    assert_msg_has(&err, "y has shape [2, 4, 4] but the GRU expects [2, 5, 4]");
    ck_assert_int_eq(crl_rnn_infer(g, x, NULL, NULL, NULL, NULL, NULL, h, &err), CRL_E_INVALID);
    UNREF_ALL(x, x2, xd, h, hbad, ibad, y);
    crl_rnn_unref(l);
    crl_rnn_unref(g);
}
END_TEST

/* ---- TensorDict module ---------------------------------------------------- */

static void td_put(crl_td *td, const char *key, crl_tensor *t)
{
    crl_error err;
    ck_assert_msg(crl_td_set(td, key, t, &err) == CRL_OK, "%s", err.message);
    crl_tensor_unref(t);
}

/* N sequences of T steps through the module one step at a time (the state carried from next, as a collector
 * does with step_mdp, and reset where is_init) give what recurrent mode computes over [N, T] at once from the
 * first step's stored state; and the states written at every step are the ones the step-wise run carried. */
START_TEST(test_module_steps_vs_sequence)
{
    enum { N = 3, T = 6, F = 2, H = 4 };
    crl_rnn_kind kind = KINDS[_i];
    bool lstm = kind == CRL_RNN_LSTM;
    crl_rnn *net = mk_rnn(kind, F, H, 3);
    crl_error err;
    crl_rnn_module *mod = crl_rnn_module_new(net, "embed", "features", &err);
    ck_assert_msg(mod != NULL, "%s", err.message);
    int ns = lstm ? 2 : 1;
    ck_assert_str_eq(crl_rnn_module_state_key(mod, 0), lstm ? "recurrent_state_h" : "recurrent_state");
    ck_assert(crl_rnn_module_state_key(mod, ns) == NULL);
    crl_rng rng;
    crl_rng_init(&rng, 6, 0);
    crl_tensor *obs = t_rand(3, SHAPE(N, T, F), &rng);
    bool init[N * T] = { false };
    init[0] = init[T] = init[2 * T] = true;   /* every sequence starts an episode */
    init[3] = true;                            /* and row 0 starts another at t = 3 */
    init[T + 5] = true;
    /* The step-wise run, with the states stored as a replay buffer would hold them. */
    crl_tensor *stored[2] = { t_new(CRL_F32, 4, SHAPE(N, T, 1, H)), t_new(CRL_F32, 4, SHAPE(N, T, 1, H)) };
    crl_tensor *out = t_new(CRL_F32, 3, SHAPE(N, T, H));
    crl_td *step = crl_td_new(1, SHAPE(N), &err);
    for (int s = 0; s < ns; s++) {
        crl_tensor *z = t_new(CRL_F32, 3, SHAPE(N, 1, H));
        crl_tensor_fill(z, 0.5);   /* stale values: is_init must zero them */
        td_put(step, crl_rnn_module_state_key(mod, s), z);
    }
    for (int64_t t = 0; t < T; t++) {
        crl_tensor *xt = t_new(CRL_F32, 2, SHAPE(N, F)), *it = t_new(CRL_BOOL, 2, SHAPE(N, 1));
        for (int64_t n = 0; n < N; n++) {
            for (int64_t i = 0; i < F; i++)
                crl_tensor_flat_set(xt, n * F + i, crl_tensor_flat_get(obs, (n * T + t) * F + i));
            crl_tensor_flat_set(it, n, init[n * T + t]);
        }
        td_put(step, "embed", xt);
        td_put(step, "is_init", it);
        for (int s = 0; s < ns; s++) {
            const crl_tensor *st = crl_td_get(step, crl_rnn_module_state_key(mod, s));
            for (int64_t n = 0; n < N; n++)
                for (int64_t j = 0; j < H; j++)
                    crl_tensor_flat_set(stored[s], (n * T + t) * H + j, crl_tensor_flat_get(st, n * H + j));
        }
        ck_assert_msg(crl_rnn_module_infer(mod, step, &err) == CRL_OK, "%s", err.message);
        const crl_tensor *f = crl_td_get(step, "features");
        ck_assert_int_eq(crl_tensor_ndim(f), 2);
        for (int64_t n = 0; n < N; n++)
            for (int64_t j = 0; j < H; j++)
                crl_tensor_flat_set(out, (n * T + t) * H + j, crl_tensor_flat_get(f, n * H + j));
        /* step_mdp: next's state becomes the input of the next step. */
        for (int s = 0; s < ns; s++) {
            char key[64];
            snprintf(key, sizeof key, "next.%s", crl_rnn_module_state_key(mod, s));
            crl_tensor *nx = crl_td_get(step, key);
            ck_assert_msg(nx != NULL, "%s not written", key);
            ck_assert_int_eq(crl_tensor_ndim(nx), 3);
            td_put(step, crl_rnn_module_state_key(mod, s), crl_tensor_clone(nx, &err));
        }
    }
    /* Recurrent mode over [N, T]. */
    crl_rnn_module_set_recurrent_mode(mod, true);
    crl_td *seq = crl_td_new(2, SHAPE(N, T), &err);
    td_put(seq, "embed", crl_tensor_clone(obs, &err));
    crl_tensor *it = t_new(CRL_BOOL, 3, SHAPE(N, T, 1));
    for (int64_t i = 0; i < N * T; i++)
        crl_tensor_flat_set(it, i, init[i]);
    td_put(seq, "is_init", it);
    for (int s = 0; s < ns; s++)
        td_put(seq, crl_rnn_module_state_key(mod, s), crl_tensor_ref(stored[s]));
    ck_assert_msg(crl_rnn_module_forward(mod, seq, &err) == CRL_OK, "%s", err.message);
    const crl_tensor *f = crl_td_get(seq, "features");
    for (int64_t i = 0; i < N * T * H; i++)
        assert_close(crl_tensor_flat_get(f, i), crl_tensor_flat_get(out, i), 1e-6, 1e-5, "sequence vs steps");
    /* next's state at step t is what step t + 1 read (unless an episode restarted there). */
    for (int s = 0; s < ns; s++) {
        char key[64];
        snprintf(key, sizeof key, "next.%s", crl_rnn_module_state_key(mod, s));
        const crl_tensor *nx = crl_td_get(seq, key);
        ck_assert_int_eq(crl_tensor_ndim(nx), 4);
        for (int64_t n = 0; n < N; n++)
            for (int64_t t = 0; t + 1 < T; t++)
                for (int64_t j = 0; j < H; j++)
                    if (!init[n * T + t + 1])
                        assert_close(crl_tensor_flat_get(nx, (n * T + t) * H + j),
                                     crl_tensor_flat_get(stored[s], (n * T + t + 1) * H + j), 1e-6, 1e-5,
                                     "next state vs carried state");
    }
    /* Backward through the module is the network's. */
    crl_tensor *g = t_rand(3, SHAPE(N, T, H), &rng), *gin = NULL;
    crl_rnn_zero_grad(net);
    ck_assert_msg(crl_rnn_module_backward(mod, g, &gin, &err) == CRL_OK, "%s", err.message);
    ck_assert_int_eq(crl_tensor_numel(gin), N * T * F);
    crl_tensor *g1 = crl_tensor_clone(crl_rnn_grads_get(net), &err);
    double nrm = 0;
    for (int64_t i = 0; i < crl_tensor_numel(g1); i++)
        nrm += fabs(crl_tensor_flat_get(g1, i));
    ck_assert(nrm > 0);
    ck_assert_int_eq(crl_rnn_module_backward(mod, obs, NULL, &err), CRL_E_SHAPE);
    assert_msg_has(&err, "grad_out has shape [3, 6, 2] but the last forward wrote 18 rows of 4 features to 'features'");
    UNREF_ALL(obs, stored[0], stored[1], out, g, g1);
    crl_td_unref(step);
    crl_td_unref(seq);
    crl_rnn_module_free(mod);
    crl_rnn_unref(net);
}
END_TEST

START_TEST(test_module_errors)
{
    crl_rnn *net = mk_rnn(CRL_RNN_LSTM, 2, 3, 1);
    crl_error err;
    ck_assert_ptr_null(crl_rnn_module_new(NULL, "x", "y", &err));
    ck_assert_ptr_null(crl_rnn_module_new(net, "", "y", &err));
    assert_msg_has(&err, "module 'lstm': ");
    crl_rnn_module *mod = crl_rnn_module_new(net, "obs", "feat", &err);
    ck_assert_ptr_nonnull(mod);
    ck_assert_int_eq(crl_rnn_module_backward(mod, NULL, NULL, &err), CRL_E_INVALID);
    crl_td *td = crl_td_new(1, SHAPE(4), &err);
    ck_assert_int_eq(crl_rnn_module_forward(mod, td, &err), CRL_E_NOT_FOUND);
    assert_msg_has(&err, "module 'lstm': in_key 'obs' is not in the TensorDict");
    td_put(td, "obs", t_new(CRL_F32, 2, SHAPE(4, 3)));
    ck_assert_int_eq(crl_rnn_module_forward(mod, td, &err), CRL_E_SHAPE);
    assert_msg_has(&err, "key 'obs' has shape [4, 3] but the LSTM expects the batch dims [4] then [2]");
    td_put(td, "obs", t_new(CRL_F32, 2, SHAPE(4, 2)));
    /* No state yet: zeros, as TorchRL's module without a primer. */
    ck_assert_int_eq(crl_rnn_module_forward(mod, td, &err), CRL_OK);
    ck_assert_ptr_nonnull(crl_td_get(td, "next.recurrent_state_c"));
    td_put(td, "recurrent_state_h", t_new(CRL_F32, 2, SHAPE(4, 3)));
    ck_assert_int_eq(crl_rnn_module_infer(mod, td, &err), CRL_E_SHAPE);
    assert_msg_has(&err, "key 'recurrent_state_h' has shape [4, 3] but the LSTM expects the batch dims [4] then [1, 3] "
                   "(num_layers, hidden_size)");
    td_put(td, "recurrent_state_h", t_new(CRL_F32, 3, SHAPE(4, 1, 3)));
    td_put(td, "is_init", t_new(CRL_BOOL, 2, SHAPE(4, 2)));
    ck_assert_int_eq(crl_rnn_module_infer(mod, td, &err), CRL_E_SHAPE);
    assert_msg_has(&err, "key 'is_init'");
    crl_rnn_module_set_recurrent_mode(mod, true);
    crl_td *flat = crl_td_new(0, NULL, &err);
    td_put(flat, "obs", t_new(CRL_F32, 1, SHAPE(2)));
    ck_assert_int_eq(crl_rnn_module_forward(mod, flat, &err), CRL_E_SHAPE);
    assert_msg_has(&err, "recurrent mode needs a TensorDict whose last batch dim is time");
    crl_td_unref(flat);
    crl_td_unref(td);
    crl_rnn_module_free(mod);
    crl_rnn_unref(net);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("rnn");
    TCase *tc = tcase_create("rnn");
    tcase_set_timeout(tc, 600);
    tcase_add_loop_test(tc, test_grad_cell, 0, 2);
    tcase_add_loop_test(tc, test_grad_sequence, 0, 2);
    tcase_add_test(tc, test_gru_formula);
    tcase_add_loop_test(tc, test_infer, 0, 2);
    tcase_add_test(tc, test_params);
    tcase_add_test(tc, test_errors);
    tcase_add_loop_test(tc, test_module_steps_vs_sequence, 0, 2);
    tcase_add_test(tc, test_module_errors);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
