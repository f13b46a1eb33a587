/* Linear layer kernels (matrix products through CBLAS) and activations.  `omp simd` (with -fopenmp-simd, no
 * OpenMP runtime) vectorizes the elementwise loops at the project's -O2. */
#include "nn-private.h"

#include <cblas.h>
#include <math.h>

void crl__linear_forward(const float *x, int64_t B, const float *W, const float *b, int64_t in, int64_t out,
                         float *y)
{
    for (int64_t r = 0; r < B; r++)
        memcpy(y + r * out, b, (size_t)out * sizeof *y);
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)B, (int)out, (int)in, 1.0f, x, (int)in, W,
                (int)in, 1.0f, y, (int)out);
}

void crl__linear_backward(const float *x, const float *dy, int64_t B, const float *W, int64_t in,
                          int64_t out, float *dW, float *db, float *dx)
{
    cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, (int)out, (int)in, (int)B, 1.0f, dy, (int)out, x,
                (int)in, 1.0f, dW, (int)in);
    for (int64_t r = 0; r < B; r++) {
        const float *row = dy + r * out;
#pragma omp simd
        for (int64_t j = 0; j < out; j++)
            db[j] += row[j];
    }
    if (dx)
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)B, (int)in, (int)out, 1.0f, dy, (int)out,
                    W, (int)in, 0.0f, dx, (int)in);
}

void crl__act_forward(crl_activation a, float *y, size_t n)
{
    switch (a) {
    case CRL_ACT_TANH:
        for (size_t i = 0; i < n; i++)
            y[i] = tanhf(y[i]);
        break;
    case CRL_ACT_RELU:
#pragma omp simd
        for (size_t i = 0; i < n; i++)
            y[i] = y[i] > 0.0f ? y[i] : 0.0f;
        break;
    case CRL_ACT_ELU:
        for (size_t i = 0; i < n; i++)
            y[i] = y[i] > 0.0f ? y[i] : expm1f(y[i]);
        break;
    case CRL_ACT_LEAKY_RELU:
#pragma omp simd
        for (size_t i = 0; i < n; i++)
            y[i] = y[i] > 0.0f ? y[i] : 0.01f * y[i];
        break;
    case CRL_ACT_IDENTITY:
        break;
    }
}

/* Each derivative is a function of the output y: tanh' = 1 - y^2,
 * elu'(x <= 0) = exp(x) = y + 1; the others are sign tests (x > 0 iff y > 0,
 * and PyTorch's gradient at exactly 0 is the negative side's). */
void crl__act_backward(crl_activation a, const float *y, float *g, size_t n)
{
    switch (a) {
    case CRL_ACT_TANH:
#pragma omp simd
        for (size_t i = 0; i < n; i++)
            g[i] *= 1.0f - y[i] * y[i];
        break;
    case CRL_ACT_RELU:
#pragma omp simd
        for (size_t i = 0; i < n; i++)
            g[i] = y[i] > 0.0f ? g[i] : 0.0f;
        break;
    case CRL_ACT_ELU:
#pragma omp simd
        for (size_t i = 0; i < n; i++)
            g[i] = y[i] > 0.0f ? g[i] : g[i] * (y[i] + 1.0f);
        break;
    case CRL_ACT_LEAKY_RELU:
#pragma omp simd
        for (size_t i = 0; i < n; i++)
            g[i] = y[i] > 0.0f ? g[i] : 0.01f * g[i];
        break;
    case CRL_ACT_IDENTITY:
        break;
    }
}
