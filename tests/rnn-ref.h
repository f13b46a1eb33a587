/* The float64 reference of crl's LSTM and GRU (crl/rnn.h), for the suites that check them against it. */
#ifndef CRL_TEST_RNN_REF_H
#define CRL_TEST_RNN_REF_H

#include <crl/rnn.h>

#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>

static inline double ref_sigmoid(double v) { return 1 / (1 + exp(-v)); }

/* The float64 reference, the obvious way from the PyTorch docs: P in PyTorch's parameter order; x [B, T, F];
 * h0, c0 [B, H] (c0 ignored for the GRU); reset [B, T] or NULL.  Writes y [B, T, H], hT, cT [B, H]. */
static inline void ref_rnn(crl_rnn_kind kind, int64_t F, int64_t H, const double *P, int64_t B, int64_t T,
                           const double *x, const double *h0, const double *c0, const bool *reset, double *y,
                           double *hT, double *cT)
{
    int64_t G = kind == CRL_RNN_LSTM ? 4 : 3, GH = G * H;
    const double *Wih = P, *Whh = P + GH * F, *bih = Whh + GH * H, *bhh = bih + GH;
    double *h = malloc((size_t)H * sizeof *h), *c = malloc((size_t)H * sizeof *c);
    double *gi = malloc((size_t)GH * sizeof *gi), *gh = malloc((size_t)GH * sizeof *gh);
    for (int64_t b = 0; b < B; b++) {
        for (int64_t j = 0; j < H; j++) {
            h[j] = h0 ? h0[b * H + j] : 0;
            c[j] = c0 ? c0[b * H + j] : 0;
        }
        for (int64_t t = 0; t < T; t++) {
            if (reset && reset[b * T + t])
                for (int64_t j = 0; j < H; j++)
                    h[j] = c[j] = 0;
            const double *xt = x + (b * T + t) * F;
            for (int64_t k = 0; k < GH; k++) {
                gi[k] = bih[k];
                gh[k] = bhh[k];
                for (int64_t i = 0; i < F; i++)
                    gi[k] += Wih[k * F + i] * xt[i];
                for (int64_t i = 0; i < H; i++)
                    gh[k] += Whh[k * H + i] * h[i];
            }
            for (int64_t j = 0; j < H; j++) {
                if (kind == CRL_RNN_LSTM) {
                    double i = ref_sigmoid(gi[j] + gh[j]), f = ref_sigmoid(gi[H + j] + gh[H + j]);
                    double g = tanh(gi[2 * H + j] + gh[2 * H + j]), o = ref_sigmoid(gi[3 * H + j] + gh[3 * H + j]);
                    c[j] = f * c[j] + i * g;
                    h[j] = o * tanh(c[j]);
                } else {
                    double r = ref_sigmoid(gi[j] + gh[j]), z = ref_sigmoid(gi[H + j] + gh[H + j]);
                    double n = tanh(gi[2 * H + j] + r * gh[2 * H + j]);
                    h[j] = (1 - z) * n + z * h[j];
                }
                y[(b * T + t) * H + j] = h[j];
            }
        }
        for (int64_t j = 0; j < H; j++) {
            hT[b * H + j] = h[j];
            if (cT)
                cT[b * H + j] = c[j];
        }
    }
    free(h);
    free(c);
    free(gi);
    free(gh);
}

#endif
