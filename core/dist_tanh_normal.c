/* TanhNormal (reparameterised sample, log-prob, mode, mean, with gradients) and the NormalParamExtractor. */
#include "nn-private.h"
#include <crl/distributions.h>

#include <math.h>

#define HALF_LOG_2PI 0.91893853320467274178

static inline double centre(const float *low, const float *high, int64_t j)
{
    return low ? 0.5 * ((double)high[j] + low[j]) : 0.0;
}

static inline double half(const float *low, const float *high, int64_t j)
{
    return low ? 0.5 * ((double)high[j] - low[j]) : 1.0;
}

static inline double softplus(double x)
{
    return x > 20 ? x : log1p(exp(x));
}

/* log|da/dz| at z: log h + log(1 - tanh(z)^2) = log h + 2 (log 2 - z - softplus(-2z)). */
static inline double log_jac(double z, double h)
{
    return log(h) + 2.0 * (M_LN2 - z - softplus(-2.0 * z));
}

void crl_tanh_normal_rsample(const float *loc, const float *scale, int64_t B, int64_t d, const float *low,
                             const float *high, crl_rng *rng, float *eps_out, float *action, float *log_prob)
{
    for (int64_t b = 0; b < B; b++) {
        double lp = 0;
        for (int64_t j = 0; j < d; j++) {
            int64_t i = b * d + j;
            double e = crl_rng_normal(rng), z = (double)loc[i] + (double)scale[i] * e, h = half(low, high, j);
            eps_out[i] = (float)e;
            action[i] = (float)(centre(low, high, j) + h * tanh(z));
            lp += -0.5 * e * e - log(scale[i]) - HALF_LOG_2PI - log_jac(z, h);
        }
        if (log_prob)
            log_prob[b] = (float)lp;
    }
}

void crl_tanh_normal_rsample_backward(const float *loc, const float *scale, const float *eps, int64_t B, int64_t d,
                                      const float *low, const float *high, const float *grad_action,
                                      const float *grad_log_prob, float *grad_loc, float *grad_scale)
{
    for (int64_t b = 0; b < B; b++)
        for (int64_t j = 0; j < d; j++) {
            int64_t i = b * d + j;
            double z = (double)loc[i] + (double)scale[i] * eps[i], u = tanh(z);
            double gl = grad_log_prob ? grad_log_prob[b] : 0.0;
            /* d action/dz = h (1 - u^2); d(-log(1 - u^2))/dz = 2u; d log_prob/d scale has -1/scale besides. */
            double gz = (grad_action ? grad_action[i] * half(low, high, j) * (1 - u * u) : 0.0) + gl * 2.0 * u;
            grad_loc[i] += (float)gz;
            grad_scale[i] += (float)(gz * eps[i] - gl / scale[i]);
        }
}

/* The pre-tanh z of an action, clamped inside the bounds. */
static inline double pre_tanh(const float *action, const float *low, const float *high, int64_t j, int64_t i)
{
    double u = ((double)action[i] - centre(low, high, j)) / half(low, high, j);
    const double lim = 1.0 - 1e-6;
    return atanh(u > lim ? lim : u < -lim ? -lim : u);
}

void crl_tanh_normal_log_prob(const float *loc, const float *scale, int64_t B, int64_t d, const float *low,
                              const float *high, const float *action, float *log_prob)
{
    for (int64_t b = 0; b < B; b++) {
        double lp = 0;
        for (int64_t j = 0; j < d; j++) {
            int64_t i = b * d + j;
            double z = pre_tanh(action, low, high, j, i), e = (z - loc[i]) / scale[i];
            lp += -0.5 * e * e - log(scale[i]) - HALF_LOG_2PI - log_jac(z, half(low, high, j));
        }
        log_prob[b] = (float)lp;
    }
}

void crl_tanh_normal_log_prob_backward(const float *loc, const float *scale, int64_t B, int64_t d, const float *low,
                                       const float *high, const float *action, const float *grad_log_prob,
                                       float *grad_loc, float *grad_scale)
{
    for (int64_t b = 0; b < B; b++)
        for (int64_t j = 0; j < d; j++) {
            int64_t i = b * d + j;
            double z = pre_tanh(action, low, high, j, i), s = scale[i], e = (z - loc[i]) / s;
            grad_loc[i] += (float)(grad_log_prob[b] * e / s);
            grad_scale[i] += (float)(grad_log_prob[b] * (e * e - 1.0) / s);
        }
}

void crl_tanh_normal_mode(const float *loc, int64_t B, int64_t d, const float *low, const float *high, float *action)
{
    for (int64_t b = 0; b < B; b++)
        for (int64_t j = 0; j < d; j++)
            action[b * d + j] = (float)(centre(low, high, j) + half(low, high, j) * tanh(loc[b * d + j]));
}

void crl_tanh_normal_mean(const float *loc, const float *scale, int64_t B, int64_t d, const float *low,
                          const float *high, int n_samples, crl_rng *rng, float *action)
{
    if (n_samples < 1)
        n_samples = 1;
    for (int64_t i = 0; i < B * d; i++) {
        int64_t j = i % d;
        double s = 0;
        for (int k = 0; k < n_samples; k++)
            s += tanh((double)loc[i] + (double)scale[i] * crl_rng_normal(rng));
        action[i] = (float)(centre(low, high, j) + half(low, high, j) * s / n_samples);
    }
}

/* biased_softplus(1.0) with min 1e-4: bias = log(expm1(1 - 1e-4)). */
#define SCALE_MIN 1e-4

static double scale_bias(void)
{
    return log(expm1(1.0 - SCALE_MIN));
}

void crl_normal_params(const float *x, int64_t B, int64_t d, float *loc, float *scale)
{
    double bias = scale_bias();
    for (int64_t b = 0; b < B; b++)
        for (int64_t j = 0; j < d; j++) {
            loc[b * d + j] = x[b * 2 * d + j];
            scale[b * d + j] = (float)(softplus((double)x[b * 2 * d + d + j] + bias) + SCALE_MIN);
        }
}

void crl_normal_params_backward(const float *x, int64_t B, int64_t d, const float *grad_loc, const float *grad_scale,
                                float *grad_x)
{
    double bias = scale_bias();
    for (int64_t b = 0; b < B; b++)
        for (int64_t j = 0; j < d; j++) {
            grad_x[b * 2 * d + j] = grad_loc[b * d + j];
            double v = (double)x[b * 2 * d + d + j] + bias;
            grad_x[b * 2 * d + d + j] = (float)(grad_scale[b * d + j] / (1.0 + exp(-v)));
        }
}
