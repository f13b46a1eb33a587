/* crl plugin SDK: action distributions (TorchRL's Categorical and TanhNormal).
 *
 * Plain functions over row-major float32 arrays, rows = batch, so a loss
 * can call them on a network's output.  Every *_backward adds (+=) the
 * gradient of sum_b(grad[b] * f[b]) with respect to the distribution's
 * parameters into the given arrays, as PyTorch's autograd accumulates. */
#ifndef CRL_DISTRIBUTIONS_H
#define CRL_DISTRIBUTIONS_H

#include <crl/rng.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---- Categorical(logits) over n classes, logits [B, n] ------------------- */

/* log_softmax of each row into logp [B, n] (may alias logits). */
CRL_API void crl_categorical_log_softmax(const float *logits, int64_t B, int64_t n, float *logp);
/* Backward of log_softmax (discrete SAC weighs every action's log-prob):
 * grad_logits[b, j] += grad[b, j] - p[b, j] * sum_k grad[b, k]. */
CRL_API void crl_categorical_log_softmax_backward(const float *logits, int64_t B, int64_t n, const float *grad,
                                                  float *grad_logits);
/* out[b] = log p(action[b]).  CRL_E_RANGE naming the row when an action is
 * outside [0, n) (out untouched from that row on). */
CRL_API int crl_categorical_log_prob(const float *logits, int64_t B, int64_t n, const int64_t *action,
                                     float *out, crl_error *err);
/* grad_logits[b, j] += grad[b] * (1[j == action[b]] - p[b, j]).  Actions
 * must be in range (check with crl_categorical_log_prob first). */
CRL_API void crl_categorical_log_prob_backward(const float *logits, int64_t B, int64_t n, const int64_t *action,
                                               const float *grad, float *grad_logits);
/* out[b] = -sum_j p log p. */
CRL_API void crl_categorical_entropy(const float *logits, int64_t B, int64_t n, float *out);
/* grad_logits[b, j] += grad[b] * -p[b, j] (log p[b, j] + H[b]). */
CRL_API void crl_categorical_entropy_backward(const float *logits, int64_t B, int64_t n, const float *grad,
                                              float *grad_logits);
/* A class per row drawn from rng (inverse CDF, one uniform per row). */
CRL_API void crl_categorical_sample(const float *logits, int64_t B, int64_t n, crl_rng *rng, int64_t *action);
/* argmax per row (the first on ties, as torch.argmax). */
CRL_API void crl_categorical_mode(const float *logits, int64_t B, int64_t n, int64_t *action);

/* ---- TanhNormal(loc, scale) on [low, high], loc and scale [B, d] ---------
 * a = c + h * tanh(z), z = loc + scale * eps, eps ~ N(0, 1), with
 * c = (high + low) / 2, h = (high - low) / 2 per dim (low, high: [d]
 * arrays, or NULL for -1 and 1).  log_prob sums over the d dims and
 * includes the tanh and affine Jacobians (log(1 - tanh^2) computed stably,
 * as PyTorch's TanhTransform). */

/* Reparameterised sample: eps_out [B, d] (keep it for the backward),
 * action [B, d], log_prob [B] (may be NULL). */
CRL_API void crl_tanh_normal_rsample(const float *loc, const float *scale, int64_t B, int64_t d, const float *low,
                                     const float *high, crl_rng *rng, float *eps_out, float *action,
                                     float *log_prob);
/* Through the sample (eps fixed): adds d(sum grad_action * action +
 * sum grad_log_prob * log_prob) / d(loc, scale).  Either grad may be NULL. */
CRL_API void crl_tanh_normal_rsample_backward(const float *loc, const float *scale, const float *eps, int64_t B,
                                              int64_t d, const float *low, const float *high,
                                              const float *grad_action, const float *grad_log_prob,
                                              float *grad_loc, float *grad_scale);
/* log_prob [B] of given actions [B, d] (clamped 1e-6 inside the bounds, so
 * a saturated action stays finite). */
CRL_API void crl_tanh_normal_log_prob(const float *loc, const float *scale, int64_t B, int64_t d, const float *low,
                                      const float *high, const float *action, float *log_prob);
CRL_API void crl_tanh_normal_log_prob_backward(const float *loc, const float *scale, int64_t B, int64_t d,
                                               const float *low, const float *high, const float *action,
                                               const float *grad_log_prob, float *grad_loc, float *grad_scale);
/* The mode TorchRL uses: c + h * tanh(loc). */
CRL_API void crl_tanh_normal_mode(const float *loc, int64_t B, int64_t d, const float *low, const float *high,
                                  float *action);
/* The mean has no closed form: like tensordict, the average of n_samples
 * draws (1000 there). */
CRL_API void crl_tanh_normal_mean(const float *loc, const float *scale, int64_t B, int64_t d, const float *low,
                                  const float *high, int n_samples, crl_rng *rng, float *action);

/* ---- NormalParamExtractor --------------------------------------------------
 * Splits a network's [B, 2d] output into loc = x[:, :d] and scale =
 * softplus(x[:, d:] + bias) + 1e-4, bias chosen so that x = 0 gives scale 1
 * (TorchRL's "biased_softplus_1.0"). */
CRL_API void crl_normal_params(const float *x, int64_t B, int64_t d, float *loc, float *scale);
/* grad_x [B, 2d] = (grad_loc, grad_scale * dscale/dx) (overwritten, not added). */
CRL_API void crl_normal_params_backward(const float *x, int64_t B, int64_t d, const float *grad_loc,
                                        const float *grad_scale, float *grad_x);

#ifdef __cplusplus
}
#endif
#endif
