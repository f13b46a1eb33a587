/* Value estimators TD(0), TD(1), TD(lambda), GAE over [N, T] trajectories, on arrays and on TensorDicts. */
#include "nn-private.h"
#include <crl/value.h>

#include <math.h>

static const char *const names[] = { "td0", "td1", "td_lambda", "gae" };

int crl_value_estimator_from_name(const char *name, crl_value_estimator *out, crl_error *err)
{
    int i = crl__name_index(names, G_N_ELEMENTS(names), name);
    if (i >= 0) {
        *out = (crl_value_estimator)i;
        return CRL_OK;
    }
    return crl_error_set(err, CRL_E_INVALID, "unknown value estimator '%s': use td0, td1, td_lambda or gae",
                         name ? name : "(null)");
}

int crl_value_estimate(crl_value_estimator kind, double gamma, double lambda, int64_t n, int64_t T,
                       const float *reward, const float *value, const float *next_value, const bool *done,
                       const bool *terminated, float *advantage, float *value_target, crl_error *err)
{
    if ((unsigned)kind >= G_N_ELEMENTS(names))
        return crl_error_set(err, CRL_E_INVALID, "unknown value estimator %d", (int)kind);
    if (!(gamma >= 0 && gamma <= 1) || !(lambda >= 0 && lambda <= 1))
        return crl_error_set(err, CRL_E_RANGE, "value estimator %s: gamma (%g) and lambda (%g) must be in [0, 1]",
                             names[kind], gamma, lambda);
    if (n < 1 || T < 1 || !reward || !value || !next_value || !done || !terminated)
        return crl_error_set(err, CRL_E_INVALID, "value estimator %s: needs n, T >= 1 (got %" PRId64 ", %" PRId64
                             ") and reward, value, next value, done and terminated", names[kind], n, T);
    if (kind == CRL_VALUE_TD1)
        lambda = 1.0;
    for (int64_t r = 0; r < n; r++) {
        /* Backwards through the row; acc carries the lambda-return (TD)
         * or the advantage (GAE) of step t + 1 within the trajectory. */
        double acc = 0;
        for (int64_t t = T - 1; t >= 0; t--) {
            int64_t i = r * T + t;
            bool term = terminated[i], end = done[i] || term || t == T - 1;
            double boot = term ? 0.0 : gamma * next_value[i], target, adv;
            if (kind == CRL_VALUE_GAE) {
                double delta = reward[i] + boot - value[i];
                acc = delta + (end ? 0.0 : gamma * lambda * acc);
                adv = acc;
                target = adv + value[i];
            } else {
                double g = kind == CRL_VALUE_TD0 || end ? reward[i] + boot
                                                        : reward[i] + gamma * ((1 - lambda) * next_value[i] + lambda * acc);
                acc = g;
                target = g;
                adv = g - value[i];
            }
            if (advantage)
                advantage[i] = (float)adv;
            if (value_target)
                value_target[i] = (float)target;
        }
    }
    return CRL_OK;
}

/* Read a [N, T] or [N, T, 1] key into floats (bools as 0/1). */
static int read_key(const crl_td *td, const char *key, int64_t rows, float *f, bool *b, crl_error *err)
{
    const crl_tensor *t = crl_td_get(td, key);
    if (!t)
        return crl_error_set(err, CRL_E_NOT_FOUND, "value estimator: the TensorDict has no '%s' (run the critic on "
                             "\"observation\" and \"next.observation\" first for the values)", key);
    if (crl_tensor_numel(t) != rows) {
        char a[CRL__SHAPE_BUF], c[CRL__SHAPE_BUF];
        return crl_error_set(err, CRL_E_SHAPE, "value estimator: '%s' has shape %s but the batch is %s (one value per step)",
                             key, crl__shape_fmt(a, crl_tensor_ndim(t), crl_tensor_shape(t)),
                             crl__shape_fmt(c, crl_td_batch_ndim(td), crl_td_batch_shape(td)));
    }
    for (int64_t i = 0; i < rows; i++) {
        double v = crl_tensor_flat_get(t, i);
        if (f)
            f[i] = (float)v;
        else
            b[i] = v != 0;
    }
    return CRL_OK;
}

int crl_value_estimate_td(crl_value_estimator kind, double gamma, double lambda, crl_td *td, crl_error *err)
{
    int bn = crl_td_batch_ndim(td);
    if (bn != 1 && bn != 2)
        return crl_error_set(err, CRL_E_SHAPE, "value estimator: the TensorDict's batch must be [T] or [N, T] (time "
                             "last), not %d dims", bn);
    int64_t T = crl_td_batch_shape(td)[bn - 1], n = bn == 2 ? crl_td_batch_shape(td)[0] : 1, rows = n * T;
    if (rows < 1)
        return crl_error_set(err, CRL_E_SHAPE, "value estimator: the TensorDict is empty");
    float *f = g_new(float, (size_t)rows * 5);
    bool *b = g_new(bool, (size_t)rows * 2);
    float *rew = f, *val = f + rows, *nval = f + 2 * rows, *adv = f + 3 * rows, *tgt = f + 4 * rows;
    int rc = read_key(td, "next.reward", rows, rew, NULL, err);
    if (!rc)
        rc = read_key(td, "state_value", rows, val, NULL, err);
    if (!rc)
        rc = read_key(td, "next.state_value", rows, nval, NULL, err);
    if (!rc)
        rc = read_key(td, "next.done", rows, NULL, b, err);
    /* TorchRL's estimators read done where there is no terminated */
    if (!rc)
        rc = read_key(td, crl_td_get(td, "next.terminated") ? "next.terminated" : "next.done", rows, NULL, b + rows, err);
    if (!rc)
        rc = crl_value_estimate(kind, gamma, lambda, n, T, rew, val, nval, b, b + rows, adv, tgt, err);
    const char *keys[2] = { "advantage", "value_target" };
    for (int k = 0; !rc && k < 2; k++) {
        crl_td_key *key = crl_td_key_new(keys[k], err);
        rc = key ? crl__td_write_rows("value estimator", td, key, k ? tgt : adv, 1, err) : CRL_E_INVALID;
        crl_td_key_free(key);
    }
    g_free(f);
    g_free(b);
    return rc;
}
