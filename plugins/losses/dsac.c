/* plugins/losses: discrete SAC (TorchRL's DiscreteSACLoss): a Categorical actor, twin Q-networks
 * giving one value per action, target networks and a learned entropy coefficient. */
#include "config.h"
#include "losses.h"

#include <glib.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

const crl_option ls_dsac_options[] = {
    { "in_key", CRL_OPT_STRING, 0, "observation", 0, 0, NULL, "observation key the networks read" },
    { "num_cells", CRL_OPT_DOUBLES, CRL_OPT_RANGE, "64, 64", 0, 8, NULL,
      "hidden layer widths of the actor and of each critic" },
    { "activation", CRL_OPT_ENUM, 0, "relu", 0, 0, "tanh|relu|elu|leaky_relu", "hidden activation" },
    { "gamma", CRL_OPT_DOUBLE, CRL_OPT_RANGE, "0.99", 0, 1, NULL, "discount" },
    { "tau", CRL_OPT_DOUBLE, CRL_OPT_RANGE, "0.005", 0, 1, NULL, "soft target update per optimizer step" },
    { "alpha_init", CRL_OPT_DOUBLE, CRL_OPT_RANGE, "1.0", 1e-12, 1e6, NULL, "initial entropy coefficient" },
    { "fixed_alpha", CRL_OPT_BOOL, 0, "false", 0, 0, NULL, "keep alpha at alpha_init (no loss_alpha)" },
    { "target_entropy_weight", CRL_OPT_DOUBLE, CRL_OPT_RANGE, "0.98", 0, 1, NULL,
      "target entropy = weight x log(number of actions)" },
    CRL_OPTIONS_END
};

typedef struct dsac {
    ls_net_opts no;
    double gamma, tau, target_entropy;
    bool fixed_alpha;
    int64_t o, n;
    crl_mlp *actor_net, *q[2], *qt[2];
    crl_prob_actor *actor;
    crl_tensor *log_alpha, *log_alpha_grad;
    char *next_key;
    int64_t *idx;
    float *buf;           /* [7 B n + 2 B] scratch */
    int64_t cap;
    bool user;            /* the actor is the user's (create_from_modules) */
} dsac;

static void dsac_destroy(void *st)
{
    dsac *d = st;
    if (!d)
        return;
    if (!d->user)
        crl_prob_actor_free(d->actor);
    crl_mlp_unref(d->actor_net);
    for (int i = 0; i < 2; i++) {
        crl_mlp_unref(d->q[i]);
        crl_mlp_unref(d->qt[i]);
    }
    crl_tensor_unref(d->log_alpha);
    crl_tensor_unref(d->log_alpha_grad);
    g_free(d->next_key);
    g_free(d->idx);
    g_free(d->buf);
    g_free(d);
}

static int dsac_create(const crl_opts *opts, const crl_spec *obs_spec, const crl_spec *action_spec, uint64_t seed,
                       void **st, crl_error *err)
{
    const char *who = "loss 'discrete_sac'";
    dsac *d = g_new0(dsac, 1);
    double alpha, w;
    int64_t one = 1;
    int rc;
    crl_error e;   /* for the calls that return NULL on failure */
    crl_error_clear(&e);
    if ((rc = ls_net_opts_read(opts, who, &d->no, err)) || (rc = crl_opts_double(opts, "gamma", &d->gamma, err)) ||
        (rc = crl_opts_double(opts, "tau", &d->tau, err)) || (rc = crl_opts_double(opts, "alpha_init", &alpha, err)) ||
        (rc = crl_opts_bool(opts, "fixed_alpha", &d->fixed_alpha, err)) ||
        (rc = crl_opts_double(opts, "target_entropy_weight", &w, err)) ||
        (rc = ls_obs_features(obs_spec, d->no.in_key, who, &d->o, err)))
        goto fail;
    if ((rc = ls_discrete_n(action_spec, who, "sac", &d->n, err)))
        goto fail;
    const crl_spec *act = ls_action_leaf(action_spec, who, err);
    d->target_entropy = w * log((double)d->n);
    crl_rng rng;
    crl_rng_init(&rng, seed, 0);
    const char *keys[] = { d->no.in_key, NULL };
    if (!(d->actor_net = ls_mlp(opts, "actor", "actor", d->o, d->n, &d->no, &rng, &e)) ||
        !(d->actor = crl_prob_actor_new(d->actor_net, keys, CRL_DIST_CATEGORICAL, act, &e)))
        goto fail;
    for (int i = 0; i < 2; i++) {
        char name[24];
        snprintf(name, sizeof name, "qvalue%d", i);
        if (!(d->q[i] = ls_mlp(opts, "q", name, d->o, d->n, &d->no, &rng, &e)))
            goto fail;
        snprintf(name, sizeof name, "qvalue%d_target", i);
        if (!(d->qt[i] = crl_mlp_clone(d->q[i], name, &e)))
            goto fail;
    }
    if (!(d->log_alpha = crl_tensor_new(CRL_F32, 1, &one, &e)) ||
        !(d->log_alpha_grad = crl_tensor_new(CRL_F32, 1, &one, &e)))
        goto fail;
    crl_tensor_flat_set(d->log_alpha, 0, log(alpha));
    d->next_key = g_strconcat("next.", d->no.in_key, NULL);
    *st = d;
    return CRL_OK;
fail:
    dsac_destroy(d);
    return rc ? rc : crl_error_pass(err, &e, CRL_E_INVALID);
}

/* create_from_modules: a Categorical actor and Q(s, .) network of the user's; the second critic is a copy
 * re-drawn from seed, the targets copies. */
static int dsac_create_modules(const crl_opts *opts, const crl_loss_modules *m, uint64_t seed, void **st,
                               crl_error *err)
{
    const char *who = "loss 'discrete_sac'";
    if (!m->prob_actor || !m->value)
        return crl_error_set(err, CRL_E_INVALID, "%s: give prob_actor (a Categorical crl_prob_actor) and value "
                             "(Q(s, .): a crl_tdmodule reading the actor's key, one output per action)", who);
    if (crl_prob_actor_kind(m->prob_actor) != CRL_DIST_CATEGORICAL)
        return crl_error_set(err, CRL_E_INVALID, "%s: prob_actor is a TanhNormal; discrete SAC needs a Categorical "
                             "actor (use sac for continuous actions)", who);
    dsac *d = g_new0(dsac, 1);
    d->user = true;
    d->actor = m->prob_actor;
    double alpha, w;
    int64_t one = 1;
    int rc;
    const char *key, *vkey;
    crl_error e;
    crl_error_clear(&e);
    crl_mlp *anet = crl_prob_actor_net_get(d->actor), *qnet = crl_tdmodule_net_get(m->value);
    if ((rc = ls_reject_set(opts, who, ls_net_keys, err)) || (rc = crl_opts_double(opts, "gamma", &d->gamma, err)) ||
        (rc = crl_opts_double(opts, "tau", &d->tau, err)) || (rc = crl_opts_double(opts, "alpha_init", &alpha, err)) ||
        (rc = crl_opts_bool(opts, "fixed_alpha", &d->fixed_alpha, err)) ||
        (rc = crl_opts_double(opts, "target_entropy_weight", &w, err)) ||
        (rc = ls_module_key(crl_prob_actor_module_get(d->actor), who, "actor", &key, err)) ||
        (rc = ls_module_key(m->value, who, "value", &vkey, err)))
        goto fail;
    d->o = crl_mlp_in_features(anet);
    d->n = crl_mlp_out_features(anet);
    if (strcmp(key, vkey) || crl_mlp_in_features(qnet) != d->o || crl_mlp_out_features(qnet) != d->n) {
        rc = crl_error_set(err, CRL_E_SHAPE, "%s: the value module '%s' reads '%s' (%lld features) and gives %lld "
                           "values; it must read the actor's '%s' (%lld features) and give one value per action (%lld)",
                           who, crl_mlp_name(qnet), vkey, (long long)crl_mlp_in_features(qnet),
                           (long long)crl_mlp_out_features(qnet), key, (long long)d->o, (long long)d->n);
        goto fail;
    }
    snprintf(d->no.in_key, sizeof d->no.in_key, "%s", key);
    d->target_entropy = w * log((double)d->n);
    crl_rng rng;
    crl_rng_init(&rng, seed, 0);
    d->actor_net = crl_mlp_ref(anet);
    d->q[0] = crl_mlp_ref(qnet);
    if (!(d->q[1] = crl_mlp_clone(d->q[0], "qvalue1", &e)) ||
        (rc = crl_mlp_init(d->q[1], CRL_INIT_DEFAULT, 1, 1, &rng, err)) ||
        !(d->qt[0] = crl_mlp_clone(d->q[0], "qvalue0_target", &e)) ||
        !(d->qt[1] = crl_mlp_clone(d->q[1], "qvalue1_target", &e)) ||
        !(d->log_alpha = crl_tensor_new(CRL_F32, 1, &one, &e)) ||
        !(d->log_alpha_grad = crl_tensor_new(CRL_F32, 1, &one, &e)))
        goto fail;
    crl_tensor_flat_set(d->log_alpha, 0, log(alpha));
    d->next_key = g_strconcat("next.", key, NULL);
    *st = d;
    return CRL_OK;
fail:
    dsac_destroy(d);
    return rc ? rc : crl_error_pass(err, &e, CRL_E_INVALID);
}

static int dsac_act(void *st, crl_td *td, crl_exploration e, crl_rng *rng, crl_error *err)
{
    dsac *d = st;
    int rc = crl_prob_actor_act(d->actor, td, e, rng, err);
    if (rc || d->user)
        return rc;
    static const char *const extra[] = { "logits", "sample_log_prob", NULL };
    return ls_drop_keys(td, extra, err);
}

static size_t dsac_num_params(void *st)
{
    dsac *d = st;
    return d->fixed_alpha ? 3 : 4;
}

static int dsac_param(void *st, size_t i, const char **name, crl_tensor **p, crl_tensor **g, crl_error *err)
{
    dsac *d = st;
    static const char *const names[] = { "actor", "qvalue0", "qvalue1", "log_alpha" };
    if (i >= dsac_num_params(st))
        return crl_error_set(err, CRL_E_RANGE, "loss 'discrete_sac': no parameter vector %zu", i);
    *name = names[i];
    if (i == 3) {
        *p = d->log_alpha;
        *g = d->log_alpha_grad;
        return CRL_OK;
    }
    crl_mlp *m = i == 0 ? d->actor_net : d->q[i - 1];
    *p = crl_mlp_params_get(m);
    *g = crl_mlp_grads_get(m);
    return CRL_OK;
}

/* Softmax and log-softmax of each row of z [B, n]. */
static void softmax(const float *z, int64_t B, int64_t n, float *p, float *logp)
{
    for (int64_t b = 0; b < B; b++) {
        const float *r = z + b * n;
        double m = r[0], s = 0;
        for (int64_t j = 1; j < n; j++)
            m = fmax(m, r[j]);
        for (int64_t j = 0; j < n; j++)
            s += exp(r[j] - m);
        double ls = m + log(s);
        for (int64_t j = 0; j < n; j++) {
            logp[b * n + j] = (float)(r[j] - ls);
            p[b * n + j] = (float)exp(r[j] - ls);
        }
    }
}

static int infer_into(crl_mlp *m, crl_tensor *in, float *out, int64_t B, int64_t n, crl_error *err)
{
    crl_error e;
    crl_error_clear(&e);
    crl_tensor *o = crl_tensor_wrap(out, CRL_F32, 2, (const int64_t[]){ B, n }, NULL, NULL, NULL, &e);
    int rc = o ? crl_mlp_infer(m, in, o, err) : crl_error_pass(err, &e, CRL_E_NOMEM);
    crl_tensor_unref(o);
    return rc;
}

static int dsac_forward(void *st, crl_td *batch, crl_td *losses, crl_error *err)
{
    const char *who = "loss 'discrete_sac'";
    dsac *d = st;
    int64_t B = ls_rows(batch), n = d->n, o = d->o;
    crl_tensor *own[5] = { 0 }, *obs_t = NULL, *nobs_t = NULL;
    const float *reward, *term, *obs, *nobs, *weight = NULL;
    int rc = CRL_OK;
    crl_error e;   /* for the calls that return NULL on failure */
    crl_error_clear(&e);
    if ((rc = ls_batch_f32(batch, "next.reward", B, 1, who, &reward, &own[0], err)) ||
        (rc = ls_batch_terminal(batch, B, who, &term, &own[1], err)) ||
        (rc = ls_batch_f32(batch, d->no.in_key, B, o, who, &obs, &own[2], err)) ||
        (rc = ls_batch_f32(batch, d->next_key, B, o, who, &nobs, &own[3], err)) ||
        (crl_td_get(batch, "_weight") && (rc = ls_batch_f32(batch, "_weight", B, 1, who, &weight, &own[4], err))))
        goto out;
    if (B > d->cap) {
        d->idx = g_renew(int64_t, d->idx, B);
        d->buf = g_renew(float, d->buf, 7 * B * n + 2 * B);
        d->cap = B;
    }
    if ((rc = ls_action_index(batch, B, n, who, d->idx, err)))
        goto out;
    float *q0 = d->buf, *q1 = q0 + B * n, *pn = q1 + B * n, *lpn = pn + B * n, *p = lpn + B * n, *lp = p + B * n,
          *g = lp + B * n, *y = g + B * n, *tde = y + B;
    double alpha = exp(crl_tensor_flat_get(d->log_alpha, 0));
    if (!(obs_t = crl_tensor_wrap((void *)obs, CRL_F32, 2, (const int64_t[]){ B, o }, NULL, NULL, NULL, &e)) ||
        !(nobs_t = crl_tensor_wrap((void *)nobs, CRL_F32, 2, (const int64_t[]){ B, o }, NULL, NULL, NULL, &e))) {
        rc = crl_error_pass(err, &e, CRL_E_NOMEM);
        goto out;
    }
    /* target: y = r + gamma (1 - terminated) sum_a pi(a|s') (min_i Q'_i(s', a) - alpha log pi(a|s')) */
    if ((rc = infer_into(d->actor_net, nobs_t, g, B, n, err)) || (rc = infer_into(d->qt[0], nobs_t, q0, B, n, err)) ||
        (rc = infer_into(d->qt[1], nobs_t, q1, B, n, err)))
        goto out;
    softmax(g, B, n, pn, lpn);
    for (int64_t b = 0; b < B; b++) {
        double v = 0;
        for (int64_t j = 0; j < n; j++)
            v += pn[b * n + j] * (fmin(q0[b * n + j], q1[b * n + j]) - alpha * lpn[b * n + j]);
        y[b] = (float)(reward[b] + (term[b] != 0 ? 0.0 : d->gamma * v));
    }
    /* critics: sum_i mean (w/2) (Q_i(s, a) - y)^2; their values (detached) feed the actor's loss */
    double loss_q = 0;
    for (int i = 0; i < 2 && !rc; i++) {
        crl_tensor *qv = crl_mlp_forward(d->q[i], obs_t, &e);
        if (!qv) {
            rc = crl_error_pass(err, &e, CRL_E_INVALID);
            break;
        }
        memcpy(i ? q1 : q0, crl_tensor_data(qv), (size_t)(B * n) * sizeof(float));
        const float *qd = i ? q1 : q0;
        memset(g, 0, (size_t)(B * n) * sizeof(float));
        for (int64_t b = 0; b < B; b++) {
            double diff = qd[b * n + d->idx[b]] - y[b], wt = weight ? weight[b] : 1.0;
            loss_q += 0.5 * wt * diff * diff;
            g[b * n + d->idx[b]] = (float)(wt * diff / (double)B);
            if (i == 0)
                tde[b] = (float)fabs(diff);
        }
        crl_tensor *gt = crl_tensor_wrap(g, CRL_F32, 2, (const int64_t[]){ B, n }, NULL, NULL, NULL, &e);
        rc = gt ? crl_mlp_backward(d->q[i], gt, NULL, err) : crl_error_pass(err, &e, CRL_E_NOMEM);
        crl_tensor_unref(gt);
    }
    if (rc)
        goto out;
    loss_q /= (double)B;
    /* actor: mean_b sum_a pi(a|s) (alpha log pi(a|s) - min_i Q_i(s, a)); dL/dz_j = pi_j (c_j - E_pi[c]) / B */
    crl_tensor *z = crl_mlp_forward(d->actor_net, obs_t, &e);
    if (!z) {
        rc = crl_error_pass(err, &e, CRL_E_INVALID);
        goto out;
    }
    softmax(crl_tensor_data(z), B, n, p, lp);
    double loss_actor = 0, logpi_sum = 0;
    for (int64_t b = 0; b < B; b++) {
        double ec = 0;
        for (int64_t j = 0; j < n; j++) {
            double c = alpha * lp[b * n + j] - fmin(q0[b * n + j], q1[b * n + j]);
            ec += p[b * n + j] * c;
            logpi_sum += p[b * n + j] * lp[b * n + j];
        }
        loss_actor += ec;
        for (int64_t j = 0; j < n; j++) {
            double c = alpha * lp[b * n + j] - fmin(q0[b * n + j], q1[b * n + j]);
            g[b * n + j] = (float)(p[b * n + j] * (c - ec) / (double)B);
        }
    }
    loss_actor /= (double)B;
    crl_tensor *gz = crl_tensor_wrap(g, CRL_F32, 2, (const int64_t[]){ B, n }, NULL, NULL, NULL, &e);
    rc = gz ? crl_mlp_backward(d->actor_net, gz, NULL, err) : crl_error_pass(err, &e, CRL_E_NOMEM);
    crl_tensor_unref(gz);
    if (rc)
        goto out;
    /* alpha: -log_alpha (E_pi[log pi] + target_entropy), detached */
    double loss_alpha = 0, m = logpi_sum / (double)B + d->target_entropy;
    if (!d->fixed_alpha) {
        loss_alpha = -crl_tensor_flat_get(d->log_alpha, 0) * m;
        crl_tensor_flat_set(d->log_alpha_grad, 0, crl_tensor_flat_get(d->log_alpha_grad, 0) - m);
    }
    if (!isfinite(loss_actor) || !isfinite(loss_q) || !isfinite(loss_alpha)) {
        rc = crl_error_set(err, CRL_E_RUNTIME, "%s: a loss is not finite (loss_actor %g, loss_qvalue %g, loss_alpha "
                           "%g); lower the learning rate or clip gradients ([optim] max_grad_norm)", who, loss_actor,
                           loss_q, loss_alpha);
        goto out;
    }
    if ((rc = ls_set_rows(batch, "td_error", tde, err)) || (rc = ls_set_scalar(losses, "loss_actor", loss_actor, err)) ||
        (rc = ls_set_scalar(losses, "loss_qvalue", loss_q, err)) ||
        (!d->fixed_alpha && (rc = ls_set_scalar(losses, "loss_alpha", loss_alpha, err))) ||
        (rc = ls_set_scalar(losses, "alpha", alpha, err)) ||
        (rc = ls_set_scalar(losses, "entropy", -logpi_sum / (double)B, err)))
        goto out;
out:
    crl_tensor_unref(obs_t);
    crl_tensor_unref(nobs_t);
    for (int i = 0; i < 5; i++)
        crl_tensor_unref(own[i]);
    return rc;
}

static int dsac_update(void *st, crl_error *err)
{
    dsac *d = st;
    for (int i = 0; i < 2; i++) {
        int rc = crl_params_soft_update(crl_mlp_params_get(d->qt[i]), crl_mlp_params_get(d->q[i]), d->tau, err);
        if (rc)
            return rc;
    }
    return CRL_OK;
}

/* Checkpoint section names: fixed, as a user's networks may share a name (those the loss builds have these). */
static const char *const sec_names[5] = { "actor", "qvalue0", "qvalue0_target", "qvalue1", "qvalue1_target" };

static int dsac_save(void *st, crl_ckpt_writer *w, const char *prefix, crl_error *err)
{
    dsac *d = st;
    crl_mlp *m[5] = { d->actor_net, d->q[0], d->qt[0], d->q[1], d->qt[1] };
    for (int i = 0; i < 5; i++) {
        int rc = ls_mlp_save(m[i], w, prefix, sec_names[i], err);
        if (rc)
            return rc;
    }
    double la = crl_tensor_flat_get(d->log_alpha, 0);
    return ls_save_doubles(w, prefix, "log_alpha", &la, 1, err);
}

static int dsac_load(void *st, const crl_ckpt_reader *r, const char *prefix, crl_error *err)
{
    dsac *d = st;
    crl_mlp *m[5] = { d->actor_net, d->q[0], d->qt[0], d->q[1], d->qt[1] }, *c[5] = { 0 };
    double la;
    int rc = ls_load_doubles(r, prefix, "log_alpha", &la, 1, err);
    crl_error e;
    crl_error_clear(&e);
    for (int i = 0; i < 5 && !rc; i++) {
        if (!(c[i] = crl_mlp_clone(m[i], sec_names[i], &e)))
            rc = crl_error_pass(err, &e, CRL_E_NOMEM);
        else
            rc = ls_mlp_load(c[i], r, prefix, sec_names[i], err);
    }
    if (!rc) {
        for (int i = 0; i < 5; i++)
            crl_tensor_copy(crl_mlp_params_get(m[i]), crl_mlp_params_get(c[i]), NULL);
        crl_tensor_flat_set(d->log_alpha, 0, la);
    }
    for (int i = 0; i < 5; i++)
        crl_mlp_unref(c[i]);
    return rc;
}

const crl_loss_ops ls_dsac_ops = {
    .struct_size = sizeof(crl_loss_ops),
    .flags = 0,
    .create = dsac_create,
    .destroy = dsac_destroy,
    .act = dsac_act,
    .explore_step = NULL,
    .num_params = dsac_num_params,
    .param = dsac_param,
    .prepare = NULL,
    .forward = dsac_forward,
    .update = dsac_update,
    .save = dsac_save,
    .load = dsac_load,
    .param_active = NULL,
    .create_from_modules = dsac_create_modules,
};
