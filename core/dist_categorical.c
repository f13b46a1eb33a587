/* Categorical over logits: log-softmax, log-prob, entropy (with gradients), sampling, mode. */
#include "nn-private.h"
#include <crl/distributions.h>

#include <math.h>

/* Row max and log-sum-exp in double: logits of any size stay finite. */
static double row_lse(const float *z, int64_t n)
{
    double mx = z[0], s = 0;
    for (int64_t j = 1; j < n; j++)
        mx = z[j] > mx ? z[j] : mx;
    for (int64_t j = 0; j < n; j++)
        s += exp(z[j] - mx);
    return mx + log(s);
}

void crl_categorical_log_softmax(const float *logits, int64_t B, int64_t n, float *logp)
{
    for (int64_t b = 0; b < B; b++) {
        double lse = row_lse(logits + b * n, n);
        for (int64_t j = 0; j < n; j++)
            logp[b * n + j] = (float)(logits[b * n + j] - lse);
    }
}

void crl_categorical_log_softmax_backward(const float *logits, int64_t B, int64_t n, const float *grad,
                                          float *grad_logits)
{
    for (int64_t b = 0; b < B; b++) {
        const float *z = logits + b * n, *g = grad + b * n;
        double lse = row_lse(z, n), sum = 0;
        for (int64_t j = 0; j < n; j++)
            sum += g[j];
        for (int64_t j = 0; j < n; j++)
            grad_logits[b * n + j] += (float)(g[j] - exp(z[j] - lse) * sum);
    }
}

int crl_categorical_log_prob(const float *logits, int64_t B, int64_t n, const int64_t *action, float *out,
                             crl_error *err)
{
    for (int64_t b = 0; b < B; b++) {
        if (action[b] < 0 || action[b] >= n)
            return crl_error_set(err, CRL_E_RANGE, "Categorical log_prob: row %" PRId64 " has action %" PRId64
                                 " outside [0, %" PRId64 ")", b, action[b], n);
        out[b] = (float)(logits[b * n + action[b]] - row_lse(logits + b * n, n));
    }
    return CRL_OK;
}

void crl_categorical_log_prob_backward(const float *logits, int64_t B, int64_t n, const int64_t *action,
                                       const float *grad, float *grad_logits)
{
    for (int64_t b = 0; b < B; b++) {
        const float *z = logits + b * n;
        double lse = row_lse(z, n);
        for (int64_t j = 0; j < n; j++)
            grad_logits[b * n + j] += (float)(grad[b] * ((j == action[b]) - exp(z[j] - lse)));
    }
}

static double row_entropy(const float *z, int64_t n, double lse)
{
    double h = 0;
    for (int64_t j = 0; j < n; j++) {
        double lp = z[j] - lse;
        h -= exp(lp) * lp;
    }
    return h;
}

void crl_categorical_entropy(const float *logits, int64_t B, int64_t n, float *out)
{
    for (int64_t b = 0; b < B; b++)
        out[b] = (float)row_entropy(logits + b * n, n, row_lse(logits + b * n, n));
}

void crl_categorical_entropy_backward(const float *logits, int64_t B, int64_t n, const float *grad,
                                      float *grad_logits)
{
    for (int64_t b = 0; b < B; b++) {
        const float *z = logits + b * n;
        double lse = row_lse(z, n), h = row_entropy(z, n, lse);
        for (int64_t j = 0; j < n; j++) {
            double lp = z[j] - lse;
            grad_logits[b * n + j] += (float)(grad[b] * -exp(lp) * (lp + h));
        }
    }
}

void crl_categorical_sample(const float *logits, int64_t B, int64_t n, crl_rng *rng, int64_t *action)
{
    for (int64_t b = 0; b < B; b++) {
        const float *z = logits + b * n;
        double lse = row_lse(z, n), u = crl_rng_uniform(rng), c = 0;
        int64_t j = 0;
        for (; j < n - 1; j++) {
            c += exp(z[j] - lse);
            if (u < c)
                break;
        }
        action[b] = j;
    }
}

void crl_categorical_mode(const float *logits, int64_t B, int64_t n, int64_t *action)
{
    for (int64_t b = 0; b < B; b++) {
        const float *z = logits + b * n;
        int64_t best = 0;
        for (int64_t j = 1; j < n; j++)
            if (z[j] > z[best])
                best = j;
        action[b] = best;
    }
}
