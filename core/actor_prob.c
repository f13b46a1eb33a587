/* Probabilistic actor (ProbabilisticActor): Categorical or TanhNormal over a network's output, sample/mode/mean,
 * log-prob and entropy with their backward into the network. */
#include "nn-private.h"

#include <math.h>

/* tensordict's n_empirical_estimate for a mean without closed form. */
#define MEAN_SAMPLES 1000

typedef enum { LAST_NONE, LAST_SAMPLE, LAST_FIXED } last_kind;

struct crl_prob_actor {
    crl__actor_base b;
    crl_dist_kind kind;
    int64_t width;            /* n (Categorical) or d (TanhNormal) */
    crl_td_key *k_logp, *k_p1, *k_p2;
    /* [rows, width] rows of the last call: parameters, action, eps of the
     * action's sample and of the entropy's, their gradients. */
    float *loc, *scale, *act, *eps, *eps_ent, *gloc, *gscale, *ga;
    int64_t *idx;
    float *gvec;              /* [2 rows]: upstream log-prob and entropy gradients */
    int64_t cap, rows;
    crl_tensor *logp, *ent, *gx;   /* [rows], [rows], [rows, out] */
    last_kind last;           /* what the cached action is: a reparameterised sample or fixed */
    bool ent_shared;          /* TanhNormal entropy estimated from the action's own sample */
    bool cached;
    bool return_log_prob;     /* write "sample_log_prob" (TorchRL's return_log_prob; off by default) */
};

crl_prob_actor *crl_prob_actor_new(crl_mlp *net, const char *const *in_keys, crl_dist_kind kind,
                                   const crl_spec *action_spec, crl_error *err)
{
    if (kind != CRL_DIST_CATEGORICAL && kind != CRL_DIST_TANH_NORMAL) {
        crl_error_set(err, CRL_E_INVALID, "probabilistic actor: unknown distribution %d: use Categorical or TanhNormal",
                      (int)kind);
        return NULL;
    }
    crl_prob_actor *a = g_new0(crl_prob_actor, 1);
    a->kind = kind;
    bool cat = kind == CRL_DIST_CATEGORICAL;
    if (crl__actor_base_init(&a->b, net, in_keys, action_spec, cat, cat ? 1 : 2, cat ? "logits" : "loc",
                             cat ? "a Categorical" : "a TanhNormal",
                             cat ? "one logit per action" : "loc and scale per action dim", err) ||
        !(a->k_logp = crl_td_key_new("sample_log_prob", err)) ||
        !(a->k_p1 = crl_td_key_new(cat ? "logits" : "loc", err)) || !(a->k_p2 = crl_td_key_new("scale", err))) {
        crl_prob_actor_free(a);
        return NULL;
    }
    a->width = cat ? a->b.space.n : a->b.space.d;
    return a;
}

void crl_prob_actor_free(crl_prob_actor *a)
{
    if (!a)
        return;
    crl__actor_base_clear(&a->b);
    crl_td_key_free(a->k_logp);
    crl_td_key_free(a->k_p1);
    crl_td_key_free(a->k_p2);
    float *bufs[] = { a->loc, a->scale, a->act, a->eps, a->eps_ent, a->gloc, a->gscale, a->ga };
    for (size_t i = 0; i < G_N_ELEMENTS(bufs); i++)
        g_free(bufs[i]);
    g_free(a->idx);
    g_free(a->gvec);
    crl_tensor_unref(a->logp);
    crl_tensor_unref(a->ent);
    crl_tensor_unref(a->gx);
    g_free(a);
}

crl_mlp *crl_prob_actor_net_get(crl_prob_actor *a) { return crl_tdmodule_net_get(a->b.mod); }
crl_tensor *crl_prob_actor_log_prob_get(crl_prob_actor *a) { return a->logp; }
crl_tensor *crl_prob_actor_entropy_get(crl_prob_actor *a) { return a->ent; }
crl_tdmodule *crl_prob_actor_module_get(crl_prob_actor *a) { return a ? a->b.mod : NULL; }
crl_dist_kind crl_prob_actor_kind(const crl_prob_actor *a) { return a->kind; }

void crl_prob_actor_set_return_log_prob(crl_prob_actor *a, bool return_log_prob)
{
    if (a)
        a->return_log_prob = return_log_prob;
}

bool crl_prob_actor_return_log_prob(const crl_prob_actor *a) { return a && a->return_log_prob; }

static int reserve(crl_prob_actor *a, int64_t rows, crl_error *err)
{
    if (rows > a->cap) {
        size_t n = (size_t)(rows * a->width);
        float **bufs[] = { &a->loc, &a->scale, &a->act, &a->eps, &a->eps_ent, &a->gloc, &a->gscale, &a->ga };
        for (size_t i = 0; i < G_N_ELEMENTS(bufs); i++)
            *bufs[i] = g_renew(float, *bufs[i], n);
        a->idx = g_renew(int64_t, a->idx, rows);
        a->gvec = g_renew(float, a->gvec, 2 * rows);
        a->cap = rows;
    }
    crl_tensor **vecs[] = { &a->logp, &a->ent };
    for (size_t i = 0; i < G_N_ELEMENTS(vecs); i++)
        if (!*vecs[i] || crl_tensor_shape(*vecs[i])[0] != rows) {
            crl_error e;
            crl_error_clear(&e);
            crl_tensor *t = crl_tensor_new(CRL_F32, 1, &rows, &e);
            if (!t)
                return crl_error_pass(err, &e, CRL_E_NOMEM);
            crl_tensor_unref(*vecs[i]);
            *vecs[i] = t;
        }
    a->rows = rows;
    return CRL_OK;
}

/* Run the network and write the distribution's parameters to td. */
static int params(crl_prob_actor *a, crl_td *td, bool cache, const float **out, crl_error *err)
{
    const char *who = crl_mlp_name(crl_prob_actor_net_get(a));
    crl_error e;
    crl_error_clear(&e);
    crl_tensor *y = crl__tdmodule_run(a->b.mod, td, cache, &e);
    if (!y)
        return crl_error_pass(err, &e, CRL_E_INVALID);
    int rc = reserve(a, crl_tensor_shape(y)[0], err);
    if (rc)
        return rc;
    *out = crl_tensor_data(y);
    if (a->kind == CRL_DIST_CATEGORICAL)
        return crl__td_write_rows(who, td, a->k_p1, *out, a->width, err);
    crl_normal_params(*out, a->rows, a->width, a->loc, a->scale);
    if ((rc = crl__td_write_rows(who, td, a->k_p1, a->loc, a->width, err)))
        return rc;
    return crl__td_write_rows(who, td, a->k_p2, a->scale, a->width, err);
}

static const float *low(const crl_prob_actor *a) { return a->b.space.low; }
static const float *high(const crl_prob_actor *a) { return a->b.space.high; }

/* The TanhNormal entropy estimate from a fresh draw (eps_ent). */
static void tanh_normal_entropy(crl_prob_actor *a, crl_rng *rng)
{
    float *ent = crl_tensor_data(a->ent);
    crl_tanh_normal_rsample(a->loc, a->scale, a->rows, a->width, low(a), high(a), rng, a->eps_ent, a->ga, ent);
    for (int64_t r = 0; r < a->rows; r++)
        ent[r] = -ent[r];
    a->ent_shared = false;
}

static int run(crl_prob_actor *a, crl_td *td, crl_exploration exploration, crl_rng *rng, bool cache, crl_error *err)
{
    const char *who = crl_mlp_name(crl_prob_actor_net_get(a));
    bool cat = a->kind == CRL_DIST_CATEGORICAL;
    if (exploration == CRL_EXPLORE_MEAN && cat)
        return crl_error_set(err, CRL_E_UNSUPPORTED, "module '%s': a Categorical has no mean that is an action: use "
                             "exploration type mode", who);
    if (!rng && (exploration != CRL_EXPLORE_MODE || (cache && !cat)))
        return crl_error_set(err, CRL_E_INVALID, "module '%s': exploration type %s needs a random stream", who,
                             exploration == CRL_EXPLORE_RANDOM ? "random" : exploration == CRL_EXPLORE_MEAN ? "mean"
                                                                                             : "mode (for the entropy)");
    a->cached = false;
    const float *x;
    int rc = params(a, td, cache, &x, err);
    if (rc)
        return rc;
    float *logp = crl_tensor_data(a->logp);
    int64_t rows = a->rows, w = a->width;
    if (cat) {
        if (exploration == CRL_EXPLORE_RANDOM)
            crl_categorical_sample(x, rows, w, rng, a->idx);
        else
            crl_categorical_mode(x, rows, w, a->idx);
        crl_categorical_log_prob(x, rows, w, a->idx, logp, NULL);
        crl_categorical_entropy(x, rows, w, crl_tensor_data(a->ent));
        a->last = LAST_FIXED;
        if ((rc = crl__write_classes(who, td, a->b.k_action, &a->b.space, a->idx, err)))
            return rc;
    } else {
        if (exploration == CRL_EXPLORE_RANDOM) {
            crl_tanh_normal_rsample(a->loc, a->scale, rows, w, low(a), high(a), rng, a->eps, a->act, logp);
            float *ent = crl_tensor_data(a->ent);
            for (int64_t r = 0; r < rows; r++)
                ent[r] = -logp[r];
            a->ent_shared = true;
            a->last = LAST_SAMPLE;
        } else {
            if (exploration == CRL_EXPLORE_MODE)
                crl_tanh_normal_mode(a->loc, rows, w, low(a), high(a), a->act);
            else
                crl_tanh_normal_mean(a->loc, a->scale, rows, w, low(a), high(a), MEAN_SAMPLES, rng, a->act);
            crl_tanh_normal_log_prob(a->loc, a->scale, rows, w, low(a), high(a), a->act, logp);
            if (cache)
                tanh_normal_entropy(a, rng);
            a->last = LAST_FIXED;
        }
        if ((rc = crl__td_write_rows(who, td, a->b.k_action, a->act, w, err)))
            return rc;
    }
    a->cached = cache;
    /* [batch...], as the distribution's log_prob sums over the action dims */
    return a->return_log_prob ? crl__td_write_batch(who, td, a->k_logp, logp, err) : CRL_OK;
}

int crl_prob_actor_act(crl_prob_actor *a, crl_td *td, crl_exploration exploration, crl_rng *rng, crl_error *err)
{
    return run(a, td, exploration, rng, false, err);
}

int crl_prob_actor_forward(crl_prob_actor *a, crl_td *td, crl_exploration exploration, crl_rng *rng, crl_error *err)
{
    return run(a, td, exploration, rng, true, err);
}

int crl_prob_actor_evaluate(crl_prob_actor *a, crl_td *td, crl_rng *rng, crl_error *err)
{
    const char *who = crl_mlp_name(crl_prob_actor_net_get(a));
    bool cat = a->kind == CRL_DIST_CATEGORICAL;
    if (!cat && !rng)
        return crl_error_set(err, CRL_E_INVALID, "module '%s': the TanhNormal entropy estimate needs a random stream", who);
    a->cached = false;
    const float *x;
    int rc = params(a, td, true, &x, err);
    if (rc)
        return rc;
    float *logp = crl_tensor_data(a->logp);
    if (cat) {
        if ((rc = crl__read_classes(who, td, a->b.k_action, &a->b.space, a->idx, err)))
            return rc;
        crl_categorical_log_prob(x, a->rows, a->width, a->idx, logp, NULL);
        crl_categorical_entropy(x, a->rows, a->width, crl_tensor_data(a->ent));
    } else {
        if (!crl_td_get_k(td, a->b.k_action))
            return crl_error_set(err, CRL_E_NOT_FOUND, "module '%s': the TensorDict has no 'action' to evaluate", who);
        if ((rc = crl__td_read_rows(who, td, a->b.k_action, a->width, a->act, a->width, 0, err)))
            return rc;
        crl_tanh_normal_log_prob(a->loc, a->scale, a->rows, a->width, low(a), high(a), a->act, logp);
        tanh_normal_entropy(a, rng);
    }
    a->last = LAST_FIXED;
    a->cached = true;
    return CRL_OK;
}

/* A [rows] gradient, or NULL; any shape with rows elements. */
static int grad_vec(const char *who, const char *what, const crl_tensor *g, int64_t rows, float *out, crl_error *err)
{
    if (!g)
        return CRL_OK;
    if (crl_tensor_numel(g) != rows) {
        char b[CRL__SHAPE_BUF];
        return crl_error_set(err, CRL_E_SHAPE, "module '%s': %s has shape %s but the last forward had %" PRId64 " rows",
                             who, what, crl__shape_fmt(b, crl_tensor_ndim(g), crl_tensor_shape(g)), rows);
    }
    for (int64_t i = 0; i < rows; i++)
        out[i] = (float)crl_tensor_flat_get(g, i);
    return CRL_OK;
}

int crl_prob_actor_backward(crl_prob_actor *a, const crl_tensor *grad_action, const crl_tensor *grad_log_prob,
                            const crl_tensor *grad_entropy, crl_td *grads_in, crl_error *err)
{
    crl_mlp *net = crl_prob_actor_net_get(a);
    const char *who = net->name;
    bool cat = a->kind == CRL_DIST_CATEGORICAL;
    if (!a->cached || !net->have_forward)
        return crl_error_set(err, CRL_E_INVALID, "module '%s': backward needs crl_prob_actor_forward or _evaluate first", who);
    if (grad_action && (cat || a->last != LAST_SAMPLE))
        return crl_error_set(err, CRL_E_INVALID, "module '%s': the action is not differentiable: %s", who,
                             cat ? "Categorical samples have no reparameterisation (use grad_log_prob)"
                                 : "only a random (reparameterised) sample is; run forward with exploration random");
    int64_t rows = a->rows, w = a->width, out = crl_mlp_out_features(net);
    if (grad_action && crl_tensor_numel(grad_action) != rows * w)
        return crl_error_set(err, CRL_E_SHAPE, "module '%s': grad_action has %" PRId64 " elements but the actions %" PRId64,
                             who, crl_tensor_numel(grad_action), rows * w);
    float *gl = a->gvec, *ge = a->gvec + rows;
    memset(gl, 0, (size_t)rows * 2 * sizeof *gl);
    int rc = grad_vec(who, "grad_log_prob", grad_log_prob, rows, gl, err);
    if (!rc)
        rc = grad_vec(who, "grad_entropy", grad_entropy, rows, ge, err);
    if (!rc)
        rc = crl__rows_buffer(&a->gx, rows, out, err);
    if (rc)
        return rc;
    float *gx = crl_tensor_data(a->gx);
    const float *x = crl_tensor_data(net->acts[net->n_layers]);
    if (cat) {
        memset(gx, 0, (size_t)(rows * w) * sizeof *gx);
        if (grad_log_prob)
            crl_categorical_log_prob_backward(x, rows, w, a->idx, gl, gx);
        if (grad_entropy)
            crl_categorical_entropy_backward(x, rows, w, ge, gx);
    } else {
        memset(a->gloc, 0, (size_t)(rows * w) * sizeof *a->gloc);
        memset(a->gscale, 0, (size_t)(rows * w) * sizeof *a->gscale);
        for (int64_t i = 0; grad_action && i < rows * w; i++)
            a->ga[i] = (float)crl_tensor_flat_get(grad_action, i);
        /* The entropy estimate is -log_prob of a sample: its gradient is a
         * log-prob gradient of opposite sign through that sample. */
        for (int64_t r = 0; r < rows; r++)
            ge[r] = -ge[r];
        if (a->last == LAST_SAMPLE) {
            for (int64_t r = 0; r < rows; r++)
                gl[r] += a->ent_shared ? ge[r] : 0.0f;
            crl_tanh_normal_rsample_backward(a->loc, a->scale, a->eps, rows, w, low(a), high(a),
                                             grad_action ? a->ga : NULL, gl, a->gloc, a->gscale);
        } else if (grad_log_prob) {
            crl_tanh_normal_log_prob_backward(a->loc, a->scale, rows, w, low(a), high(a), a->act, gl, a->gloc, a->gscale);
        }
        if (grad_entropy && !(a->last == LAST_SAMPLE && a->ent_shared))
            crl_tanh_normal_rsample_backward(a->loc, a->scale, a->eps_ent, rows, w, low(a), high(a), NULL, ge,
                                             a->gloc, a->gscale);
        crl_normal_params_backward(x, rows, w, a->gloc, a->gscale, gx);
    }
    return crl_tdmodule_backward(a->b.mod, a->gx, grads_in, err);
}
