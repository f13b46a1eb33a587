/* Check suite: Categorical and TanhNormal log-probs, entropies and reparameterised samples against float64
 * formulas, their gradients against central finite differences, sampling statistics. */
#include <stdlib.h>
#include <crl/distributions.h>
#include "nn-test.h"

enum { B = 3, N = 4, D = 2 };

static double ref_lse(const double *z, int n)
{
    double mx = z[0], s = 0;
    for (int j = 1; j < n; j++)
        mx = fmax(mx, z[j]);
    for (int j = 0; j < n; j++)
        s += exp(z[j] - mx);
    return mx + log(s);
}

/* sum_b g[b] * (log p(a_b) or H_b), the float64 reference. */
static double ref_cat(const double *z, const int64_t *a, const double *g, bool entropy)
{
    double tot = 0;
    for (int b = 0; b < B; b++) {
        double lse = ref_lse(z + b * N, N), v = 0;
        if (entropy)
            for (int j = 0; j < N; j++)
                v -= exp(z[b * N + j] - lse) * (z[b * N + j] - lse);
        else
            v = z[b * N + a[b]] - lse;
        tot += g[b] * v;
    }
    return tot;
}

START_TEST(test_categorical)
{
    float zf[B * N] = { 0.3f, -1.2f, 2.0f, 0.1f, 5.0f, 5.0f, -3.0f, 0.0f, -0.5f, 0.25f, 0.75f, -2.0f };
    double z[B * N], g[B] = { 0.7, -1.1, 0.4 };
    float gf[B] = { 0.7f, -1.1f, 0.4f };
    for (int i = 0; i < B * N; i++)
        z[i] = zf[i];
    int64_t a[B] = { 2, 1, 3 };
    float lp[B], ent[B], logsm[B * N];
    crl_error err;
    ck_assert_int_eq(crl_categorical_log_prob(zf, B, N, a, lp, &err), CRL_OK);
    crl_categorical_entropy(zf, B, N, ent);
    crl_categorical_log_softmax(zf, B, N, logsm);
    for (int b = 0; b < B; b++) {
        double lse = ref_lse(z + b * N, N), h = 0;
        assert_close(lp[b], z[b * N + a[b]] - lse, 1e-6, 1e-6, "log_prob");
        for (int j = 0; j < N; j++) {
            assert_close(logsm[b * N + j], z[b * N + j] - lse, 1e-6, 1e-6, "log_softmax");
            h -= exp(z[b * N + j] - lse) * (z[b * N + j] - lse);
        }
        assert_close(ent[b], h, 1e-6, 1e-6, "entropy");
    }
    for (int which = 0; which < 2; which++) {
        float gz[B * N] = { 0 };
        if (which)
            crl_categorical_entropy_backward(zf, B, N, gf, gz);
        else
            crl_categorical_log_prob_backward(zf, B, N, a, gf, gz);
        for (int i = 0; i < B * N; i++) {
            double keep = z[i], h = 1e-6;
            z[i] = keep + h;
            double up = ref_cat(z, a, g, which);
            z[i] = keep - h;
            double dn = ref_cat(z, a, g, which);
            z[i] = keep;
            assert_close(gz[i], (up - dn) / (2 * h), 1e-5, 1e-4, which ? "entropy grad" : "log_prob grad");
        }
    }
    /* log_softmax's backward: loss = sum G * log_softmax(z). */
    float G[B * N], gz[B * N] = { 0 };
    for (int i = 0; i < B * N; i++)
        G[i] = (float)(0.3 * i - 1.1 + (i % 3));
    crl_categorical_log_softmax_backward(zf, B, N, G, gz);
    for (int i = 0; i < B * N; i++) {
        double keep = z[i], l[2];
        for (int s = 0; s < 2; s++) {
            z[i] = keep + (s ? -1e-6 : 1e-6);
            l[s] = 0;
            for (int b = 0; b < B; b++) {
                double lse = ref_lse(z + b * N, N);
                for (int j = 0; j < N; j++)
                    l[s] += G[b * N + j] * (z[b * N + j] - lse);
            }
        }
        z[i] = keep;
        assert_close(gz[i], (l[0] - l[1]) / 2e-6, 1e-5, 1e-4, "log_softmax grad");
    }
    int64_t bad[B] = { 0, 4, 1 };
    ck_assert_int_eq(crl_categorical_log_prob(zf, B, N, bad, lp, &err), CRL_E_RANGE);
    assert_msg_has(&err, "row 1 has action 4 outside [0, 4)");
    int64_t mode[B];
    crl_categorical_mode(zf, B, N, mode);
    ck_assert_int_eq(mode[0], 2);
    ck_assert_int_eq(mode[1], 0);   /* the first of a tie */
    ck_assert_int_eq(mode[2], 2);
}
END_TEST

/* Sampled frequencies match the probabilities; the same seed repeats. */
START_TEST(test_categorical_sample)
{
    enum { S = 20000 };
    float z[N] = { 0.0f, 1.0f, -1.0f, 0.5f };
    float *rows = malloc(S * N * sizeof *rows);
    for (int s = 0; s < S; s++)
        memcpy(rows + s * N, z, sizeof z);
    int64_t *a = malloc(S * sizeof *a), *a2 = malloc(S * sizeof *a2);
    crl_rng r1, r2;
    crl_rng_init(&r1, 42, 0);
    crl_rng_init(&r2, 42, 0);
    crl_categorical_sample(rows, S, N, &r1, a);
    crl_categorical_sample(rows, S, N, &r2, a2);
    ck_assert(memcmp(a, a2, S * sizeof *a) == 0);
    double lse = log(exp(0.0) + exp(1.0) + exp(-1.0) + exp(0.5));
    for (int j = 0; j < N; j++) {
        int c = 0;
        for (int s = 0; s < S; s++)
            c += a[s] == j;
        assert_close((double)c / S, exp(z[j] - lse), 0.015, 0, "sample frequency");
    }
    free(rows);
    free(a);
    free(a2);
}
END_TEST

/* ---- TanhNormal ------------------------------------------------------------ */

static const float LOW[D] = { -2.0f, 0.0f }, HIGH[D] = { 2.0f, 3.0f };

/* log N(z; loc, scale) - log|d action / dz|, written directly. */
static double ref_tn_logp(double loc, double scale, double z, double h)
{
    double u = tanh(z);
    return -0.5 * pow((z - loc) / scale, 2) - log(scale) - 0.5 * log(2 * M_PI) - log(h * (1 - u * u));
}

/* sum_i ga_i a_i + sum_b gl_b logp_b for the sample at fixed eps. */
static double ref_tn_rsample(const double *loc, const double *scale, const float *eps, const float *ga,
                             const float *gl)
{
    double tot = 0;
    for (int b = 0; b < B; b++)
        for (int j = 0; j < D; j++) {
            int i = b * D + j;
            double h = 0.5 * (HIGH[j] - LOW[j]), c = 0.5 * (HIGH[j] + LOW[j]), z = loc[i] + scale[i] * eps[i];
            tot += ga[i] * (c + h * tanh(z)) + gl[b] * ref_tn_logp(loc[i], scale[i], z, h);
        }
    return tot;
}

static double ref_tn_logp_of(const double *loc, const double *scale, const float *act, const float *gl)
{
    double tot = 0;
    for (int b = 0; b < B; b++)
        for (int j = 0; j < D; j++) {
            int i = b * D + j;
            double h = 0.5 * (HIGH[j] - LOW[j]), c = 0.5 * (HIGH[j] + LOW[j]);
            tot += gl[b] * ref_tn_logp(loc[i], scale[i], atanh((act[i] - c) / h), h);
        }
    return tot;
}

/* Central differences over every loc and scale of f. */
#define FD_CHECK(f, gloc, gscale, what)                                                            \
    for (int i = 0; i < 2 * B * D; i++) {                                                          \
        double *v = i < B * D ? &loc[i] : &scale[i - B * D], keep = *v, h = 1e-6;                  \
        *v = keep + h;                                                                             \
        double up = (f);                                                                           \
        *v = keep - h;                                                                             \
        double dn = (f);                                                                           \
        *v = keep;                                                                                 \
        assert_close(i < B * D ? gloc[i] : gscale[i - B * D], (up - dn) / (2 * h), 1e-4, 1e-3, what); \
    }

START_TEST(test_tanh_normal)
{
    float locf[B * D] = { 0.1f, -0.3f, 1.5f, 0.2f, -2.0f, 0.9f }, scalef[B * D] = { 0.5f, 1.2f, 0.3f, 0.8f, 1.0f, 0.05f };
    double loc[B * D], scale[B * D];
    for (int i = 0; i < B * D; i++) {
        loc[i] = locf[i];
        scale[i] = scalef[i];
    }
    crl_rng rng;
    crl_rng_init(&rng, 3, 0);
    float eps[B * D], act[B * D], lp[B], lp2[B];
    crl_tanh_normal_rsample(locf, scalef, B, D, LOW, HIGH, &rng, eps, act, lp);
    for (int b = 0; b < B; b++) {
        double want = 0;
        for (int j = 0; j < D; j++) {
            int i = b * D + j;
            double h = 0.5 * (HIGH[j] - LOW[j]), z = loc[i] + scale[i] * eps[i];
            ck_assert(act[i] >= LOW[j] && act[i] <= HIGH[j]);
            assert_close(act[i], 0.5 * (HIGH[j] + LOW[j]) + h * tanh(z), 1e-6, 1e-6, "action");
            want += ref_tn_logp(loc[i], scale[i], z, h);
        }
        assert_close(lp[b], want, 1e-5, 1e-5, "rsample log_prob");
    }
    /* log_prob of the sampled action gives the sample's log_prob back. */
    crl_tanh_normal_log_prob(locf, scalef, B, D, LOW, HIGH, act, lp2);
    for (int b = 0; b < B; b++)
        assert_close(lp2[b], lp[b], 2e-3, 1e-3, "log_prob(rsample)");
    float ga[B * D] = { 0.3f, -0.6f, 1.0f, 0.2f, -0.4f, 0.9f }, gl[B] = { 0.5f, -1.0f, 0.25f };
    float gloc[B * D] = { 0 }, gscale[B * D] = { 0 };
    crl_tanh_normal_rsample_backward(locf, scalef, eps, B, D, LOW, HIGH, ga, gl, gloc, gscale);
    FD_CHECK(ref_tn_rsample(loc, scale, eps, ga, gl), gloc, gscale, "rsample grad");
    /* Only one of the two upstream gradients. */
    float gloc2[B * D] = { 0 }, gscale2[B * D] = { 0 }, zero[B * D] = { 0 };
    crl_tanh_normal_rsample_backward(locf, scalef, eps, B, D, LOW, HIGH, NULL, gl, gloc2, gscale2);
    FD_CHECK(ref_tn_rsample(loc, scale, eps, zero, gl), gloc2, gscale2, "rsample grad (log_prob only)");
    float gloc3[B * D] = { 0 }, gscale3[B * D] = { 0 };
    crl_tanh_normal_log_prob_backward(locf, scalef, B, D, LOW, HIGH, act, gl, gloc3, gscale3);
    FD_CHECK(ref_tn_logp_of(loc, scale, act, gl), gloc3, gscale3, "log_prob grad");
    /* Mode and mean. */
    float mode[B * D], mean[B * D];
    crl_tanh_normal_mode(locf, B, D, LOW, HIGH, mode);
    for (int i = 0; i < B * D; i++)
        assert_close(mode[i], 0.5 * (HIGH[i % D] + LOW[i % D]) + 0.5 * (HIGH[i % D] - LOW[i % D]) * tanh(loc[i]), 1e-6, 1e-6, "mode");
    crl_tanh_normal_mean(locf, scalef, B, D, LOW, HIGH, 4000, &rng, mean);
    /* Tiny scale: the mean is the mode; loc 0.1, scale 0.5 on [-2, 2]: E[2 tanh(z)] by quadrature. */
    assert_close(mean[5], mode[5], 0.01, 0, "mean with a tiny scale");
    double q = 0;
    for (int k = -4000; k <= 4000; k++) {
        double x = k * 0.002;
        q += 2 * tanh(0.1 + 0.5 * x) * exp(-0.5 * x * x) / sqrt(2 * M_PI) * 0.002;
    }
    assert_close(mean[0], q, 0.02, 0, "mean by quadrature");
    /* Saturated actions (exactly at the bounds) keep a finite log_prob. */
    float edge[B * D] = { 2.0f, 0.0f, -2.0f, 3.0f, 0.0f, 1.5f };
    crl_tanh_normal_log_prob(locf, scalef, B, D, LOW, HIGH, edge, lp2);
    for (int b = 0; b < B; b++)
        ck_assert(isfinite(lp2[b]));
    /* Default bounds -1, 1. */
    crl_tanh_normal_mode(locf, 1, D, NULL, NULL, mode);
    assert_close(mode[1], tanh(-0.3), 1e-6, 0, "default bounds");
}
END_TEST

START_TEST(test_normal_params)
{
    float x[B * 2 * D] = { 0.5f, -1.0f, 0.0f, 0.0f, 2.0f, 0.3f, -3.0f, 4.0f, -0.1f, 0.1f, 25.0f, -25.0f };
    float loc[B * D], scale[B * D];
    crl_normal_params(x, B, D, loc, scale);
    ck_assert(loc[0] == 0.5f && loc[1] == -1.0f);
    assert_close(scale[0], 1.0, 1e-6, 0, "x = 0 gives scale 1");
    ck_assert(scale[5] >= 1e-4f && scale[5] < 2e-4f);
    float gl[B * D] = { 1, 2, 3, 4, 5, 6 }, gs[B * D] = { 0.5f, -0.5f, 1.0f, 2.0f, -1.0f, 0.3f }, gx[B * 2 * D];
    crl_normal_params_backward(x, B, D, gl, gs, gx);
    double bias = log(expm1(1.0 - 1e-4));
    for (int b = 0; b < B; b++)
        for (int j = 0; j < D; j++) {
            ck_assert(gx[b * 2 * D + j] == gl[b * D + j]);
            double v = x[b * 2 * D + D + j], h = 1e-6;
            double fd = (log1p(exp(v + h + bias)) - log1p(exp(v - h + bias))) / (2 * h);
            assert_close(gx[b * 2 * D + D + j], gs[b * D + j] * fd, 1e-6, 1e-4, "scale grad");
        }
}
END_TEST

int main(void)
{
    return RUN_TESTS("distributions", test_categorical, test_categorical_sample, test_tanh_normal, test_normal_params);
}
