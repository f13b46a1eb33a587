/* Deterministic actor (DDPG, TD3): network, tanh squashing into the bounds, Gaussian or Ornstein-Uhlenbeck exploration noise. */
#include "nn-private.h"

#include <math.h>

typedef enum { NOISE_NONE, NOISE_GAUSSIAN, NOISE_OU } noise_kind;

struct crl_det_actor {
    crl__actor_base b;
    crl_td_key *k_is_init;
    noise_kind noise;
    crl__anneal scale;                     /* Gaussian sigma or OU eps */
    double mean, std;                      /* Gaussian */
    double theta, mu, sigma, dt;           /* OU */
    float *ou;                             /* OU state per row and dim */
    float *act, *u, *g;                    /* [rows, d]: action, tanh(output) of forward, of act */
    int64_t cap, ou_rows;
    crl_tensor *gt;                        /* [rows, d] view of g for the module */
};

crl_det_actor *crl_det_actor_new(crl_mlp *net, const char *const *in_keys, const crl_spec *action_spec, crl_error *err)
{
    crl_det_actor *a = g_new0(crl_det_actor, 1);
    if (crl__actor_base_init(&a->b, net, in_keys, action_spec, false, 1, "action", "a deterministic actor",
                             "one per action dim", err) ||
        !(a->k_is_init = crl_td_key_new("is_init", err))) {
        crl_det_actor_free(a);
        return NULL;
    }
    return a;
}

void crl_det_actor_free(crl_det_actor *a)
{
    if (!a)
        return;
    crl__actor_base_clear(&a->b);
    crl_td_key_free(a->k_is_init);
    g_free(a->ou);
    g_free(a->act);
    g_free(a->u);
    g_free(a->g);
    crl_tensor_unref(a->gt);
    g_free(a);
}

crl_mlp *crl_det_actor_net_get(crl_det_actor *a) { return crl_tdmodule_net_get(a->b.mod); }
crl_tdmodule *crl_det_actor_module_get(crl_det_actor *a) { return a ? a->b.mod : NULL; }

int64_t crl_det_actor_bounds(const crl_det_actor *a, const float **low, const float **high)
{
    if (low)
        *low = a->b.space.low;
    if (high)
        *high = a->b.space.high;
    return a->b.space.d;
}

crl_det_actor *crl_det_actor_copy_new(crl_det_actor *a, crl_mlp *net, crl_error *err)
{
    if (!a || !net) {
        crl_error_set(err, CRL_E_INVALID, "crl_det_actor_copy_new: %s is NULL", !a ? "actor" : "network");
        return NULL;
    }
    crl_mlp *src = crl_det_actor_net_get(a);
    if (crl_mlp_in_features(net) != crl_mlp_in_features(src) || crl_mlp_out_features(net) != crl_mlp_out_features(src)) {
        crl_error_set(err, CRL_E_SHAPE, "module '%s': %" PRId64 " inputs and %" PRId64 " outputs, but the actor's "
                      "network '%s' has %" PRId64 " and %" PRId64, crl_mlp_name(net), crl_mlp_in_features(net),
                      crl_mlp_out_features(net), crl_mlp_name(src), crl_mlp_in_features(src), crl_mlp_out_features(src));
        return NULL;
    }
    const crl_tdmodule *m = a->b.mod;
    size_t n = crl_tdmodule_num_in_keys(m);
    const char **keys = g_new0(const char *, n + 1);
    for (size_t i = 0; i < n; i++)
        keys[i] = crl_tdmodule_in_key(m, i);
    crl_det_actor *c = g_new0(crl_det_actor, 1);
    crl_error e;
    crl_error_clear(&e);
    c->b.space = a->b.space;
    c->b.space.low = a->b.space.low ? g_memdup2(a->b.space.low, (gsize)a->b.space.d * sizeof(float)) : NULL;
    c->b.space.high = a->b.space.high ? g_memdup2(a->b.space.high, (gsize)a->b.space.d * sizeof(float)) : NULL;
    if (!(c->b.mod = crl_tdmodule_new(net, keys, "action", &e)) || !(c->b.k_action = crl_td_key_new("action", &e)) ||
        !(c->k_is_init = crl_td_key_new("is_init", &e))) {
        crl_error_pass(err, &e, CRL_E_INVALID);
        crl_det_actor_free(c);
        c = NULL;
    }
    g_free(keys);
    return c;
}
double crl_det_actor_noise_scale(const crl_det_actor *a) { return a->noise == NOISE_NONE ? 0 : a->scale.value; }

int crl_det_actor_set_gaussian(crl_det_actor *a, double sigma_init, double sigma_end, int64_t annealing_num_steps,
                               double mean, double std, crl_error *err)
{
    if (!isfinite(mean) || !(std >= 0 && isfinite(std)))
        return crl_error_set(err, CRL_E_RANGE, "Gaussian noise: mean (%g) must be finite and std (%g) >= 0", mean, std);
    int rc = crl__anneal_set(&a->scale, "Gaussian noise", sigma_init, sigma_end, annealing_num_steps, 0, HUGE_VAL, err);
    if (rc)
        return rc;
    a->noise = NOISE_GAUSSIAN;
    a->mean = mean;
    a->std = std;
    return CRL_OK;
}

int crl_det_actor_set_ou(crl_det_actor *a, double theta, double mu, double sigma, double dt, double eps_init,
                         double eps_end, int64_t annealing_num_steps, crl_error *err)
{
    if (!(theta >= 0 && sigma >= 0 && dt > 0 && isfinite(theta) && isfinite(sigma) && isfinite(dt) && isfinite(mu)))
        return crl_error_set(err, CRL_E_RANGE, "Ornstein-Uhlenbeck noise: theta (%g) and sigma (%g) must be >= 0, "
                             "dt (%g) > 0, all finite", theta, sigma, dt);
    int rc = crl__anneal_set(&a->scale, "Ornstein-Uhlenbeck noise", eps_init, eps_end, annealing_num_steps, 0,
                             HUGE_VAL, err);
    if (rc)
        return rc;
    a->noise = NOISE_OU;
    a->theta = theta;
    a->mu = mu;
    a->sigma = sigma;
    a->dt = dt;
    a->ou_rows = 0;   /* restart the process */
    return CRL_OK;
}

void crl_det_actor_step(crl_det_actor *a, int64_t frames)
{
    crl__anneal_step(&a->scale, frames);
}

static void reserve(crl_det_actor *a, int64_t rows)
{
    if (rows <= a->cap)
        return;
    size_t n = (size_t)(rows * a->b.space.d);
    a->act = g_renew(float, a->act, n);
    a->u = g_renew(float, a->u, n);
    a->g = g_renew(float, a->g, n);
    a->cap = rows;
}

/* Network output rows -> actions in a->act (tanh into the bounds). */
static int compute(crl_det_actor *a, crl_td *td, bool cache, crl_error *err)
{
    crl_error e;
    crl_error_clear(&e);
    crl_tensor *y = crl__tdmodule_run(a->b.mod, td, cache, &e);
    if (!y)
        return crl_error_pass(err, &e, CRL_E_INVALID);
    int64_t rows = crl_tensor_shape(y)[0], d = a->b.space.d;
    reserve(a, rows);
    const float *o = crl_tensor_data(y);
    /* Only a forward keeps tanh(output) for the backward: acting between a
     * forward and its backward must not spoil it. */
    float *u = cache ? a->u : a->g;
    for (int64_t i = 0; i < rows * d; i++) {
        if (a->b.space.low) {
            int64_t j = i % d;
            u[i] = tanhf(o[i]);
            a->act[i] = 0.5f * (a->b.space.high[j] + a->b.space.low[j]) + 0.5f * (a->b.space.high[j] - a->b.space.low[j]) * u[i];
        } else {
            a->act[i] = o[i];
        }
    }
    return CRL_OK;
}

int crl_det_actor_forward(crl_det_actor *a, crl_td *td, crl_error *err)
{
    int rc = compute(a, td, true, err);
    if (rc)
        return rc;
    return crl__td_write_rows(crl_mlp_name(crl_det_actor_net_get(a)), td, a->b.k_action, a->act, a->b.space.d, err);
}

int crl_det_actor_backward(crl_det_actor *a, const crl_tensor *grad_action, crl_td *grads_in, crl_error *err)
{
    crl_mlp *net = crl_det_actor_net_get(a);
    int64_t rows = net->batch, d = a->b.space.d;
    if (!net->have_forward || rows > a->cap)
        return crl_error_set(err, CRL_E_INVALID, "module '%s': backward needs crl_det_actor_forward first", net->name);
    if (!grad_action || crl_tensor_numel(grad_action) != rows * d) {
        char b[CRL__SHAPE_BUF];
        return crl_error_set(err, CRL_E_SHAPE, "module '%s': grad_action has shape %s but the forward made %" PRId64
                             " actions of %" PRId64 " dims", net->name,
                             grad_action ? crl__shape_fmt(b, crl_tensor_ndim(grad_action), crl_tensor_shape(grad_action)) : "NULL",
                             rows, d);
    }
    int rc = crl__rows_buffer(&a->gt, rows, d, err);
    if (rc)
        return rc;
    float *g = crl_tensor_data(a->gt);
    for (int64_t i = 0; i < rows * d; i++) {
        double ga = crl_tensor_dtype(grad_action) == CRL_F32 && crl_tensor_is_contiguous(grad_action)
                        ? ((const float *)crl_tensor_data(grad_action))[i] : crl_tensor_flat_get(grad_action, i);
        int64_t j = i % d;
        g[i] = a->b.space.low ? (float)(ga * 0.5 * (a->b.space.high[j] - a->b.space.low[j]) * (1.0 - (double)a->u[i] * a->u[i]))
                            : (float)ga;
    }
    return crl_tdmodule_backward(a->b.mod, a->gt, grads_in, err);
}

int crl_det_actor_act(crl_det_actor *a, crl_td *td, crl_exploration exploration, crl_rng *rng, crl_error *err)
{
    const char *who = crl_mlp_name(crl_det_actor_net_get(a));
    bool noisy = exploration == CRL_EXPLORE_RANDOM && a->noise != NOISE_NONE;
    if (noisy && !rng)
        return crl_error_set(err, CRL_E_INVALID, "module '%s': exploration noise needs a random stream", who);
    int rc = compute(a, td, false, err);
    if (rc)
        return rc;
    int64_t rows = crl__td_rows(td), d = a->b.space.d;
    if (noisy && a->noise == NOISE_OU) {
        if (a->ou_rows != rows) {
            a->ou = g_renew(float, a->ou, (size_t)(rows * d));
            memset(a->ou, 0, (size_t)(rows * d) * sizeof *a->ou);
            a->ou_rows = rows;
        }
        const crl_tensor *init = crl_td_get_k(td, a->k_is_init);
        if (init && crl_tensor_numel(init) == rows)
            for (int64_t r = 0; r < rows; r++)
                if (crl_tensor_flat_get(init, r) != 0)
                    memset(a->ou + r * d, 0, (size_t)d * sizeof *a->ou);
    }
    for (int64_t i = 0; noisy && i < rows * d; i++) {
        double noise;
        if (a->noise == NOISE_GAUSSIAN) {
            noise = a->scale.value * (a->mean + a->std * crl_rng_normal(rng));
        } else {
            double x = a->ou[i];
            x += a->theta * (a->mu - x) * a->dt + a->sigma * sqrt(a->dt) * crl_rng_normal(rng);
            a->ou[i] = (float)x;
            noise = a->scale.value * x;
        }
        double v = a->act[i] + noise;
        if (a->b.space.low) {
            int64_t j = i % d;
            v = v < a->b.space.low[j] ? a->b.space.low[j] : v > a->b.space.high[j] ? a->b.space.high[j] : v;
        }
        a->act[i] = (float)v;
    }
    return crl__td_write_rows(who, td, a->b.k_action, a->act, d, err);
}
