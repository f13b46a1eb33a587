/* crl plugin SDK: value estimators (TorchRL's TD0Estimator, TD1Estimator, TDLambdaEstimator, GAE).
 *
 * Data are [N, T]: N trajectories (rows) of T steps, time last, as a
 * TorchRL TensorDict of batch [N, T].  At step t: reward r_t, value
 * V(s_t), next value V(s_{t+1}), done_t (the trajectory ends after t:
 * terminated or truncated) and terminated_t (the env reached a terminal
 * state).  A terminated step never bootstraps (V(s_{t+1}) counts as 0); a
 * truncated one bootstraps with V(s_{t+1}) and stops the recursion there,
 * as does the last step of each row. */
#ifndef CRL_VALUE_H
#define CRL_VALUE_H

#include <crl/td.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum crl_value_estimator {
    CRL_VALUE_TD0 = 0,        /* target r + gamma V(s') */
    CRL_VALUE_TD1 = 1,        /* discounted return to the end, bootstrapped (TD(lambda = 1)) */
    CRL_VALUE_TD_LAMBDA = 2,  /* lambda-return */
    CRL_VALUE_GAE = 3         /* generalized advantage estimation */
} crl_value_estimator;

/* Parse "td0", "td1", "td_lambda", "gae" (case-insensitive). */
CRL_API int crl_value_estimator_from_name(const char *name, crl_value_estimator *out, crl_error *err);

/* advantage [N, T] and value_target [N, T] (either may be NULL) from the
 * arrays above (all [N, T], row-major).  lambda is used by TD_LAMBDA and
 * GAE.  CRL_E_RANGE for gamma or lambda outside [0, 1], CRL_E_INVALID for
 * n or T < 1 or a NULL input.  A step with terminated set also ends its
 * trajectory. */
CRL_API int crl_value_estimate(crl_value_estimator kind, double gamma, double lambda, int64_t n, int64_t T,
                               const float *reward, const float *value, const float *next_value, const bool *done,
                               const bool *terminated, float *advantage, float *value_target, crl_error *err);

/* The same on a TensorDict of batch [T] or [N, T] (time last): reads
 * "state_value", "next.state_value", "next.reward", "next.done",
 * "next.terminated" (each [..., 1] or with the batch shape alone; done and
 * terminated bool or numeric; without "next.terminated", "next.done" is
 * read in its place, as TorchRL does) and writes "advantage" and "value_target"
 * ([..., 1] float32, in place when present).  Errors name the missing or
 * misshapen key. */
CRL_API int crl_value_estimate_td(crl_value_estimator kind, double gamma, double lambda, crl_td *td, crl_error *err);

#ifdef __cplusplus
}
#endif
#endif
