/* Check suite: optimizers against PyTorch's update formulas written out in float64, clipping, state save/load. */
#include <stdlib.h>
#include <unistd.h>
#include <glib.h>
#include "nn-test.h"
#include "ckpt-edit.h"

enum { N = 5, STEPS = 4 };

/* Gradients of step s (1-based), varied in sign and size. */
static double grad_at(int s, int i) { return sin(1.3 * s + 0.7 * i) * (1 + i) + (i == 2 ? 1e-3 : 0); }

typedef struct {
    double lr, beta1, beta2, eps, wd, momentum, dampening, alpha;
} hp;

/* torch.optim's documented algorithms, one parameter at a time. */
static void reference(crl_optim_kind kind, const hp *h, double *p)
{
    double m[N] = { 0 }, v[N] = { 0 };
    for (int s = 1; s <= STEPS; s++)
        for (int i = 0; i < N; i++) {
            double g = grad_at(s, i);
            switch (kind) {
            case CRL_OPTIM_SGD:
                g += h->wd * p[i];
                if (h->momentum != 0) {
                    m[i] = s == 1 ? g : h->momentum * m[i] + (1 - h->dampening) * g;
                    g = m[i];
                }
                p[i] -= h->lr * g;
                break;
            case CRL_OPTIM_ADAM:
            case CRL_OPTIM_ADAMW: {
                if (kind == CRL_OPTIM_ADAMW)
                    p[i] *= 1 - h->lr * h->wd;
                else
                    g += h->wd * p[i];
                m[i] = h->beta1 * m[i] + (1 - h->beta1) * g;
                v[i] = h->beta2 * v[i] + (1 - h->beta2) * g * g;
                double mhat = m[i] / (1 - pow(h->beta1, s));
                double denom = sqrt(v[i]) / sqrt(1 - pow(h->beta2, s)) + h->eps;
                p[i] -= h->lr * mhat / denom;
                break;
            }
            case CRL_OPTIM_RMSPROP:
                g += h->wd * p[i];
                v[i] = h->alpha * v[i] + (1 - h->alpha) * g * g;
                if (h->momentum > 0) {
                    m[i] = h->momentum * m[i] + g / (sqrt(v[i]) + h->eps);
                    p[i] -= h->lr * m[i];
                } else {
                    p[i] -= h->lr * g / (sqrt(v[i]) + h->eps);
                }
                break;
            }
        }
}

static crl_optim *mk(crl_optim_kind kind, const hp *h, crl_tensor *p, crl_tensor *g)
{
    crl_error err;
    crl_optim *o = crl_optim_new(kind, h->lr, &err);
    ck_assert_msg(o != NULL, "%s", err.message);
    struct { const char *name; double v; } set[] = {
        { "beta1", h->beta1 }, { "beta2", h->beta2 }, { "eps", h->eps }, { "weight_decay", h->wd },
        { "momentum", h->momentum }, { "dampening", h->dampening }, { "alpha", h->alpha },
    };
    for (size_t i = 0; i < sizeof set / sizeof set[0]; i++)
        if (!isnan(crl_optim_get(o, set[i].name)))
            ck_assert_msg(crl_optim_set(o, set[i].name, set[i].v, &err) == CRL_OK, "%s", err.message);
    ck_assert_int_eq(crl_optim_add(o, p, g, &err), CRL_OK);
    return o;
}

static void run_case(crl_optim_kind kind, hp h)
{
    crl_tensor *p = t_new(CRL_F32, 1, SHAPE(N)), *g = t_new(CRL_F32, 1, SHAPE(N));
    double ref[N];
    for (int i = 0; i < N; i++) {
        crl_tensor_flat_set(p, i, 0.5 - 0.3 * i);
        ref[i] = crl_tensor_flat_get(p, i);
    }
    crl_optim *o = mk(kind, &h, p, g);
    crl_error err;
    for (int s = 1; s <= STEPS; s++) {
        for (int i = 0; i < N; i++)
            crl_tensor_flat_set(g, i, grad_at(s, i));
        ck_assert_int_eq(crl_optim_step(o, &err), CRL_OK);
    }
    ck_assert_int_eq(crl_optim_steps(o), STEPS);
    reference(kind, &h, ref);
    for (int i = 0; i < N; i++) {
        char what[64];
        snprintf(what, sizeof what, "optimizer %d param %d", (int)kind, i);
        assert_close(crl_tensor_flat_get(p, i), ref[i], 1e-6, 1e-5, what);
    }
    crl_optim_free(o);
    crl_tensor_unref(p);
    crl_tensor_unref(g);
}

START_TEST(test_sgd)
{
    run_case(CRL_OPTIM_SGD, (hp){ .lr = 0.1 });
    run_case(CRL_OPTIM_SGD, (hp){ .lr = 0.05, .momentum = 0.9, .dampening = 0.1, .wd = 0.01 });
}
END_TEST

START_TEST(test_adam)
{
    run_case(CRL_OPTIM_ADAM, (hp){ .lr = 1e-2, .beta1 = 0.9, .beta2 = 0.999, .eps = 1e-8 });
    run_case(CRL_OPTIM_ADAM, (hp){ .lr = 3e-3, .beta1 = 0.5, .beta2 = 0.9, .eps = 1e-3, .wd = 0.1 });
}
END_TEST

START_TEST(test_adamw)
{
    run_case(CRL_OPTIM_ADAMW, (hp){ .lr = 1e-2, .beta1 = 0.9, .beta2 = 0.999, .eps = 1e-8, .wd = 0.01 });
    run_case(CRL_OPTIM_ADAMW, (hp){ .lr = 0.1, .beta1 = 0.8, .beta2 = 0.99, .eps = 1e-6, .wd = 0.5 });
}
END_TEST

START_TEST(test_rmsprop)
{
    run_case(CRL_OPTIM_RMSPROP, (hp){ .lr = 1e-2, .alpha = 0.99, .eps = 1e-8 });
    run_case(CRL_OPTIM_RMSPROP, (hp){ .lr = 1e-3, .alpha = 0.9, .eps = 1e-5, .momentum = 0.9, .wd = 0.1 });
}
END_TEST

START_TEST(test_defaults_and_errors)
{
    crl_error err;
    crl_optim *o = crl_optim_new(CRL_OPTIM_ADAMW, 1e-3, &err);
    ck_assert(crl_optim_get(o, "beta1") == 0.9 && crl_optim_get(o, "beta2") == 0.999);
    ck_assert(crl_optim_get(o, "eps") == 1e-8 && crl_optim_get(o, "weight_decay") == 0.01);
    ck_assert(isnan(crl_optim_get(o, "momentum")));
    ck_assert_int_eq(crl_optim_set(o, "momentum", 0.9, &err), CRL_E_INVALID);
    assert_msg_has(&err, "optimizer adamw has no hyper-parameter 'momentum': it has lr, beta1, beta2, eps, weight_decay");
    ck_assert_int_eq(crl_optim_set(o, "beta1", 1.0, &err), CRL_E_RANGE);
    ck_assert_int_eq(crl_optim_set(o, "eps", 0.0, &err), CRL_E_RANGE);
    ck_assert_int_eq(crl_optim_set(o, "lr", NAN, &err), CRL_E_RANGE);
    crl_tensor *p = t_new(CRL_F32, 1, SHAPE(3)), *g = t_new(CRL_F32, 1, SHAPE(4)), *d = t_new(CRL_F64, 1, SHAPE(3));
    ck_assert_int_eq(crl_optim_add(o, p, g, &err), CRL_E_SHAPE);
    assert_msg_has(&err, "must be contiguous float32 of the same size");
    ck_assert_int_eq(crl_optim_add(o, p, d, &err), CRL_E_SHAPE);
    crl_optim_free(o);
    ck_assert_ptr_null(crl_optim_new(CRL_OPTIM_SGD, 0, &err));
    assert_msg_has(&err, "lr = 0 must be finite and > 0");
    ck_assert_ptr_null(crl_optim_new((crl_optim_kind)7, 0.1, &err));
    crl_optim_kind k;
    ck_assert_int_eq(crl_optim_kind_from_name("RMSprop", &k, &err), CRL_OK);
    ck_assert_int_eq(k, CRL_OPTIM_RMSPROP);
    ck_assert_int_eq(crl_optim_kind_from_name("lamb", &k, &err), CRL_E_INVALID);
    assert_msg_has(&err, "use sgd, adam, adamw or rmsprop");
    o = crl_optim_new(CRL_OPTIM_RMSPROP, 0.01, &err);
    ck_assert(crl_optim_get(o, "alpha") == 0.99 && crl_optim_get(o, "momentum") == 0);
    crl_optim_free(o);
    crl_tensor_unref(p);
    crl_tensor_unref(g);
    crl_tensor_unref(d);
}
END_TEST

START_TEST(test_clip_and_nonfinite)
{
    crl_tensor *p1 = t_new(CRL_F32, 1, SHAPE(2)), *g1 = t_new(CRL_F32, 1, SHAPE(2));
    crl_tensor *p2 = t_new(CRL_F32, 1, SHAPE(1)), *g2 = t_new(CRL_F32, 1, SHAPE(1));
    crl_error err;
    crl_optim *o = crl_optim_new(CRL_OPTIM_SGD, 1.0, &err);
    ck_assert_int_eq(crl_optim_add(o, p1, g1, &err), CRL_OK);
    ck_assert_int_eq(crl_optim_add(o, p2, g2, &err), CRL_OK);
    /* Global norm over both vectors: |(3, 4, 12)| = 13. */
    crl_tensor_flat_set(g1, 0, 3);
    crl_tensor_flat_set(g1, 1, 4);
    crl_tensor_flat_set(g2, 0, 12);
    assert_close(crl_optim_clip_grad_norm(o, 100), 13, 1e-6, 0, "norm");
    ck_assert(isnan(crl_optim_clip_grad_norm(o, -1)));
    ck_assert(crl_tensor_flat_get(g1, 0) == 3);
    ck_assert_int_eq(crl_optim_add(o, p2, g2, &err), CRL_E_EXISTS);
    assert_msg_has(&err, "were already added (vector 1): add each network once");
    ck_assert(crl_tensor_flat_get(g2, 0) == 12);   /* under the limit: untouched */
    assert_close(crl_optim_clip_grad_norm(o, 1.3), 13, 1e-6, 0, "norm");
    double c = 1.3 / (13 + 1e-6);
    assert_close(crl_tensor_flat_get(g1, 0), 3 * c, 1e-6, 0, "clipped");
    assert_close(crl_tensor_flat_get(g2, 0), 12 * c, 1e-6, 0, "clipped");
    ck_assert_int_eq(crl_optim_step(o, &err), CRL_OK);
    assert_close(crl_tensor_flat_get(p2, 0), -12 * c, 1e-6, 0, "sgd step");
    /* A NaN gradient: clipping reports it, the step refuses and changes nothing. */
    crl_tensor_flat_set(g1, 1, NAN);
    ck_assert(isnan(crl_optim_clip_grad_norm(o, 1.0)));
    ck_assert(crl_tensor_flat_get(g2, 0) == (float)(12 * c));
    double before = crl_tensor_flat_get(p2, 0);
    ck_assert_int_eq(crl_optim_step(o, &err), CRL_E_RUNTIME);
    assert_msg_has(&err, "a gradient is not finite (NaN or inf) at step 2; parameters left unchanged");
    ck_assert(crl_tensor_flat_get(p2, 0) == before);
    ck_assert_int_eq(crl_optim_steps(o), 1);
    crl_optim_zero_grad(o);
    ck_assert(crl_tensor_flat_get(g1, 1) == 0 && crl_tensor_flat_get(g2, 0) == 0);
    crl_optim_free(o);
    UNREF_ALL(p1, g1, p2, g2);
}
END_TEST

/* Two Adams over p (gradient g) and q (gq); a has taken two steps and is saved to path in a new temporary
 * dir (both g_free), b is fresh. */
static void saved_adam(crl_tensor **p, crl_tensor **g, crl_tensor **q, crl_tensor **gq, crl_optim **a,
                       crl_optim **b, char **dir, char **path)
{
    hp h = { .lr = 1e-2, .beta1 = 0.9, .beta2 = 0.999, .eps = 1e-8 };
    *p = t_new(CRL_F32, 1, SHAPE(N));
    *g = t_new(CRL_F32, 1, SHAPE(N));
    *q = t_new(CRL_F32, 1, SHAPE(N));
    *gq = t_new(CRL_F32, 1, SHAPE(N));
    *a = mk(CRL_OPTIM_ADAM, &h, *p, *g);
    *b = mk(CRL_OPTIM_ADAM, &h, *q, *gq);
    crl_error err;
    for (int s = 1; s <= 2; s++) {
        for (int i = 0; i < N; i++)
            crl_tensor_flat_set(*g, i, grad_at(s, i));
        ck_assert_int_eq(crl_optim_step(*a, &err), CRL_OK);
    }
    *dir = g_dir_make_tmp("crl-optim-XXXXXX", NULL);
    *path = g_build_filename(*dir, "o.ckpt", NULL);
    crl_ckpt_writer *w = crl_ckpt_writer_new(*path, "crl.test.optim", 1, &err);
    ck_assert_int_eq(crl_optim_save(*a, w, "optim", &err), CRL_OK);
    ck_assert_int_eq(crl_ckpt_writer_close(w, &err), CRL_OK);
}

/* Saving after 2 steps and loading into a fresh optimizer continues exactly. */
START_TEST(test_state_save_load)
{
    crl_tensor *p, *g, *q, *gq;
    crl_optim *a, *b;
    char *dir, *path;
    saved_adam(&p, &g, &q, &gq, &a, &b, &dir, &path);
    crl_error err;
    crl_ckpt_reader *r = crl_ckpt_reader_open(path, "crl.test.optim", 1, &err);
    ck_assert_ptr_nonnull(r);
    crl_optim *wrong = crl_optim_new(CRL_OPTIM_SGD, 0.1, &err);
    ck_assert_int_eq(crl_optim_add(wrong, q, gq, &err), CRL_OK);
    ck_assert_int_eq(crl_optim_load(wrong, r, "optim", &err), CRL_E_CORRUPT);
    assert_msg_has(&err, "holds adam optimizer state (1 vectors) but this is sgd over 1");
    ck_assert_int_eq(crl_optim_load(b, r, "optim", &err), CRL_OK);
    ck_assert_int_eq(crl_optim_steps(b), 2);
    ck_assert_int_eq(crl_tensor_copy(q, p, &err), CRL_OK);
    for (int i = 0; i < N; i++) {
        crl_tensor_flat_set(g, i, grad_at(3, i));
        crl_tensor_flat_set(gq, i, grad_at(3, i));
    }
    ck_assert_int_eq(crl_optim_step(a, &err), CRL_OK);
    ck_assert_int_eq(crl_optim_step(b, &err), CRL_OK);
    ck_assert(crl_tensor_equal(p, q));
    crl_ckpt_reader_free(r);
    unlink(path);
    rmdir(dir);
    g_free(path);
    g_free(dir);
    crl_optim_free(wrong);
    crl_optim_free(a);
    crl_optim_free(b);
    UNREF_ALL(p, g, q, gq);
}
END_TEST

/* The state on disk is little-endian (meta as i64, moments as f32), and a load checks sizes and values:
 * a moment that is NaN or a negative square average is CRL_E_CORRUPT at its offset, nothing changed. */
START_TEST(test_state_little_endian_checked)
{
    crl_tensor *p, *g, *q, *gq;
    crl_optim *a, *b;
    char *dir, *path;
    saved_adam(&p, &g, &q, &gq, &a, &b, &dir, &path);
    crl_error err;
    char *bad = g_build_filename(dir, "bad.ckpt", NULL);

    size_t len;
    uint8_t *meta = ckpt_edit_section(path, "crl.test.optim", "optim/meta", &len), want[32];
    const uint64_t mv[4] = { CRL_OPTIM_ADAM, 2, 1, N };
    for (int i = 0; i < 4; i++)
        ckpt_le_u64(want + 8 * i, mv[i]);
    ck_assert(len == 32 && memcmp(meta, want, 32) == 0);
    /* Adam's first moment after two steps, read back from little-endian bytes. */
    uint8_t *m = ckpt_edit_section(path, "crl.test.optim", "optim/0/m", &len);
    ck_assert_uint_eq(len, 4 * N);
    for (int i = 0; i < N; i++) {
        double ref = 0.9 * 0.1 * grad_at(1, i) + 0.1 * grad_at(2, i);
        uint32_t u = (uint32_t)m[4 * i] | (uint32_t)m[4 * i + 1] << 8 | (uint32_t)m[4 * i + 2] << 16 |
                     (uint32_t)m[4 * i + 3] << 24;
        float f;
        memcpy(&f, &u, 4);
        ck_assert_msg(fabs(f - ref) <= 1e-6 * (1 + fabs(ref)), "m[%d] = %g, want %g", i, (double)f, ref);
    }
    uint8_t *v = ckpt_edit_section(path, "crl.test.optim", "optim/0/v", &len);

    uint8_t *v_neg = g_memdup2(v, 4 * N), *m_nan = g_memdup2(m, 4 * N), *meta_neg = g_memdup2(meta, 32);
    ckpt_le_f32(v_neg + 12, -1.0f);
    ckpt_le_f32(m_nan, NAN);
    ckpt_le_u64(meta_neg + 8, (uint64_t)-5);
    const struct { const char *sec; const uint8_t *bytes; size_t len; const char *msg; } cases[4] = {
        { "optim/0/v", v_neg, 4 * N, "section 'optim/0/v': element 3 is -1; a square average is a number >= 0" },
        { "optim/0/m", m_nan, 4 * N, "section 'optim/0/m': element 0 is nan; a moment is never NaN" },
        { "optim/meta", meta_neg, 32, "its step count is negative" },
        { "optim/0/v", v, 4 * N - 4, "section 'optim/0/v' has 16 bytes, expected 20" },
    };
    for (int k = 0; k < 4; k++) {
        ckpt_edit_replace(path, bad, "crl.test.optim", cases[k].sec, cases[k].bytes, cases[k].len);
        crl_ckpt_reader *r = crl_ckpt_reader_open(bad, "crl.test.optim", 1, &err);
        ck_assert_ptr_nonnull(r);
        ck_assert_int_eq(crl_optim_load(b, r, "optim", &err), CRL_E_CORRUPT);
        ck_assert_msg(g_str_has_prefix(err.message, bad) && strstr(err.message, ": offset "), "%s", err.message);
        assert_msg_has(&err, cases[k].msg);
        ck_assert_int_eq(crl_optim_steps(b), 0);
        crl_ckpt_reader_free(r);
    }
    crl_ckpt_reader *r = crl_ckpt_reader_open(path, "crl.test.optim", 1, &err);
    ck_assert_int_eq(crl_optim_load(b, r, "optim", &err), CRL_OK);
    ck_assert_int_eq(crl_optim_steps(b), 2);
    crl_ckpt_reader_free(r);
    g_free(v_neg);
    g_free(m_nan);
    g_free(meta_neg);
    g_free(meta);
    g_free(m);
    g_free(v);
    unlink(path);
    unlink(bad);
    rmdir(dir);
    g_free(path);
    g_free(bad);
    g_free(dir);
    crl_optim_free(a);
    crl_optim_free(b);
    UNREF_ALL(p, g, q, gq);
}
END_TEST

/* Same seed, same data: two training runs end bitwise equal. */
START_TEST(test_reproducible)
{
    crl_tensor *params[2];
    for (int run = 0; run < 2; run++) {
        crl_rng rng;
        crl_rng_init(&rng, 77, 0);
        crl_error err;
        crl_mlp *m = crl_mlp_new("r", 3, 2, SHAPE(16, 16), 2, CRL_ACT_ELU, false, &rng, &err);
        crl_optim *o = crl_optim_new(CRL_OPTIM_ADAMW, 1e-2, &err);
        ck_assert_int_eq(crl_optim_add_mlp(o, m, &err), CRL_OK);
        crl_tensor *x = t_rows(64, 3, NULL, &rng), *g = t_rows(64, 2, NULL, &rng);
        for (int it = 0; it < 20; it++) {
            crl_optim_zero_grad(o);
            ck_assert_ptr_nonnull(crl_mlp_forward(m, x, &err));
            ck_assert_int_eq(crl_mlp_backward(m, g, NULL, &err), CRL_OK);
            crl_optim_clip_grad_norm(o, 0.5);
            ck_assert_int_eq(crl_optim_step(o, &err), CRL_OK);
        }
        params[run] = crl_tensor_clone(crl_mlp_params_get(m), &err);
        UNREF_ALL(x, g);
        crl_optim_free(o);
        crl_mlp_unref(m);
    }
    ck_assert(crl_tensor_equal(params[0], params[1]));
    UNREF_ALL(params[0], params[1]);
}
END_TEST

/* End to end: an MLP fits y = sin(3x) with Adam; mean squared error falls by 20x. */
START_TEST(test_fit_regression)
{
    crl_rng rng;
    crl_rng_init(&rng, 1, 0);
    crl_error err;
    crl_mlp *m = crl_mlp_new("fit", 1, 1, SHAPE(32, 32), 2, CRL_ACT_TANH, false, &rng, &err);
    crl_optim *o = crl_optim_new(CRL_OPTIM_ADAM, 1e-2, &err);
    ck_assert_int_eq(crl_optim_add_mlp(o, m, &err), CRL_OK);
    enum { B = 64 };
    crl_tensor *x = t_new(CRL_F32, 2, SHAPE(B, 1)), *g = t_new(CRL_F32, 2, SHAPE(B, 1));
    for (int i = 0; i < B; i++)
        crl_tensor_flat_set(x, i, -1 + 2.0 * i / (B - 1));
    double first = 0, last = 0;
    for (int it = 0; it < 400; it++) {
        crl_tensor *y = crl_mlp_forward(m, x, &err);
        ck_assert_ptr_nonnull(y);
        double loss = 0;
        for (int i = 0; i < B; i++) {
            double d = crl_tensor_flat_get(y, i) - sin(3 * crl_tensor_flat_get(x, i));
            loss += d * d / B;
            crl_tensor_flat_set(g, i, 2 * d / B);
        }
        if (it == 0)
            first = loss;
        last = loss;
        crl_optim_zero_grad(o);
        ck_assert_int_eq(crl_mlp_backward(m, g, NULL, &err), CRL_OK);
        ck_assert_int_eq(crl_optim_step(o, &err), CRL_OK);
    }
    ck_assert_msg(last < first / 20, "loss %g -> %g", first, last);
    crl_tensor_unref(x);
    crl_tensor_unref(g);
    crl_optim_free(o);
    crl_mlp_unref(m);
}
END_TEST

int main(void)
{
    return RUN_TESTS("optim", test_sgd, test_adam, test_adamw, test_rmsprop, test_defaults_and_errors, test_clip_and_nonfinite, test_state_save_load, test_state_little_endian_checked, test_reproducible, test_fit_regression);
}
