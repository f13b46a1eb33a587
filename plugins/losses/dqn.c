/* plugins/losses: DQN (TorchRL's DQNLoss): double DQN, L2 or smooth-L1, a target network. */
#include "config.h"
#include "losses.h"

#include <glib.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

const crl_option ls_dqn_options[] = {
    { "in_key", CRL_OPT_STRING, 0, "observation", 0, 0, NULL, "observation key the Q-network reads" },
    { "num_cells", CRL_OPT_DOUBLES, CRL_OPT_RANGE, "120, 84", 0, 8, NULL, "hidden layer widths of the Q-network" },
    { "activation", CRL_OPT_ENUM, 0, "relu", 0, 0, "tanh|relu|elu|leaky_relu", "hidden activation" },
    { "gamma", CRL_OPT_DOUBLE, CRL_OPT_RANGE, "0.99", 0, 1, NULL, "discount" },
    { "loss_function", CRL_OPT_ENUM, 0, "l2", 0, 0, "l2|smooth_l1", "distance between Q(s, a) and its target" },
    { "double_dqn", CRL_OPT_BOOL, 0, "false", 0, 0, NULL,
      "pick the next action with the online network, value it with the target one" },
    { "tau", CRL_OPT_DOUBLE, CRL_OPT_RANGE, "0", 0, 1, NULL,
      "soft target update per optimizer step (0: hard updates every hard_update_interval steps)" },
    { "hard_update_interval", CRL_OPT_INT, CRL_OPT_RANGE, "50", 1, 1e12, NULL,
      "optimizer steps between hard target updates (with tau = 0)" },
    { "eps_init", CRL_OPT_DOUBLE, CRL_OPT_RANGE, "1.0", 0, 1, NULL, "epsilon-greedy: initial epsilon" },
    { "eps_end", CRL_OPT_DOUBLE, CRL_OPT_RANGE, "0.05", 0, 1, NULL, "epsilon-greedy: final epsilon" },
    { "annealing_num_steps", CRL_OPT_INT, CRL_OPT_RANGE, "10000", 1, 1e15, NULL,
      "frames over which epsilon falls linearly" },
    CRL_OPTIONS_END
};

typedef struct dqn {
    ls_net_opts no;
    double gamma, tau;
    bool smooth_l1, double_dqn;
    int64_t hard_interval, n;
    double eps_init, eps_end;
    int64_t eps_steps;
    crl_mlp *q, *target;
    crl_qvalue_actor *actor;
    crl_tdmodule *mod;                 /* q: in_key -> action_value, with cache */
    char *next_key;                    /* "next.<in_key>" */
    double counters[3];                /* optimizer steps, explore frames, explore calls */
    double explore_frames_per_call;
    float *qt, *qo, *grad, *td_err;
    int64_t *idx;
    int64_t cap;
    crl_tensor *next_obs;              /* scratch for rows != cap */
    bool user;                         /* the actor is the user's (create_from_modules) */
} dqn;

static void dqn_destroy(void *st)
{
    dqn *d = st;
    if (!d)
        return;
    if (!d->user)
        crl_qvalue_actor_free(d->actor);
    crl_tdmodule_free(d->mod);
    crl_mlp_unref(d->q);
    crl_mlp_unref(d->target);
    g_free(d->next_key);
    g_free(d->qt);
    g_free(d->qo);
    g_free(d->grad);
    g_free(d->td_err);
    g_free(d->idx);
    g_free(d);
}

/* A Q-network fed uint8 frames: only a conv encoder reads them (SB3's normalize_images). */
static int set_u8(crl_mlp *q, const char *who, crl_error *err)
{
    int rc = crl_mlp_set_normalize_images(q, true, err);
    if (rc)
        crl_error_prefix(err, "%s: the observation is uint8 frames but [net.q] has no conv encoder (set [net.q] "
                         "encoder = NAME with a [net.NAME] type = conv section, or convert with ToTensorImage): ", who);
    return rc;
}

static int dqn_create(const crl_opts *opts, const crl_spec *obs_spec, const crl_spec *action_spec, uint64_t seed,
                      void **st, crl_error *err)
{
    const char *who = "loss 'dqn'";
    dqn *d = g_new0(dqn, 1);
    const char *lf;
    int nd;
    int64_t shape[CRL_MAX_DIMS];
    bool u8;   /* uint8 frames: the Q-network divides them by 255 (its clone, the target, too) */
    int rc;
    crl_error e;   /* for the calls that return NULL on failure */
    crl_error_clear(&e);
    if ((rc = ls_net_opts_read(opts, who, &d->no, err)) || (rc = crl_opts_double(opts, "gamma", &d->gamma, err)) ||
        (rc = crl_opts_double(opts, "tau", &d->tau, err)) || (rc = crl_opts_string(opts, "loss_function", &lf, err)) ||
        (rc = crl_opts_bool(opts, "double_dqn", &d->double_dqn, err)) ||
        (rc = crl_opts_int(opts, "hard_update_interval", &d->hard_interval, err)) ||
        (rc = crl_opts_double(opts, "eps_init", &d->eps_init, err)) ||
        (rc = crl_opts_double(opts, "eps_end", &d->eps_end, err)) ||
        (rc = crl_opts_int(opts, "annealing_num_steps", &d->eps_steps, err)) ||
        (rc = ls_obs_shape(obs_spec, d->no.in_key, who, &nd, shape, &u8, err)))
        goto fail;
    d->smooth_l1 = !strcmp(lf, "smooth_l1");
    if ((rc = ls_discrete_n(action_spec, who, "sac, td3 or ddpg", &d->n, err)))
        goto fail;
    const crl_spec *act = ls_action_leaf(action_spec, who, err);
    crl_rng rng;
    crl_rng_init(&rng, seed, 0);
    const char *keys[] = { d->no.in_key, NULL };
    if (!(d->q = ls_net(opts, "q", "qvalue", nd, shape, d->n, &d->no, &rng, &e)) ||
        (u8 && (rc = set_u8(d->q, who, err))) ||
        !(d->target = crl_mlp_clone(d->q, "qvalue_target", &e)) ||
        !(d->actor = crl_qvalue_actor_new(d->q, keys, act, &e)) ||
        (rc = crl_qvalue_actor_set_egreedy(d->actor, d->eps_init, d->eps_end, d->eps_steps, err)) ||
        !(d->mod = crl_tdmodule_new(d->q, keys, "action_value", &e)))
        goto fail;
    d->next_key = g_strconcat("next.", d->no.in_key, NULL);
    *st = d;
    return CRL_OK;
fail:
    dqn_destroy(d);
    return rc ? rc : crl_error_pass(err, &e, CRL_E_INVALID);
}

/* create_from_modules: TorchRL's DQNLoss(value_network=QValueActor); the target network is a copy. */
static int dqn_create_modules(const crl_opts *opts, const crl_loss_modules *m, uint64_t seed, void **st,
                              crl_error *err)
{
    (void)seed;
    const char *who = "loss 'dqn'";
    static const char *const refused[] = { "in_key", "num_cells", "activation", "eps_init", "eps_end",
                                           "annealing_num_steps", NULL };
    if (!m->qvalue_actor)
        return crl_error_set(err, CRL_E_INVALID, "%s: give qvalue_actor (a crl_qvalue_actor)", who);
    dqn *d = g_new0(dqn, 1);
    d->user = true;
    d->actor = m->qvalue_actor;
    const char *lf, *key;
    int rc;
    crl_error e;
    crl_error_clear(&e);
    crl_tdmodule *mod = crl_qvalue_actor_module_get(d->actor);
    if ((rc = ls_reject_set(opts, who, refused, err)) || (rc = crl_opts_double(opts, "gamma", &d->gamma, err)) ||
        (rc = crl_opts_double(opts, "tau", &d->tau, err)) || (rc = crl_opts_string(opts, "loss_function", &lf, err)) ||
        (rc = crl_opts_bool(opts, "double_dqn", &d->double_dqn, err)) ||
        (rc = crl_opts_int(opts, "hard_update_interval", &d->hard_interval, err)) ||
        (rc = ls_module_key(mod, who, "qvalue actor", &key, err)))
        goto fail;
    d->smooth_l1 = !strcmp(lf, "smooth_l1");
    snprintf(d->no.in_key, sizeof d->no.in_key, "%s", key);
    d->q = crl_mlp_ref(crl_tdmodule_net_get(mod));
    d->n = crl_mlp_out_features(d->q);
    const char *keys[] = { key, NULL };
    if (!(d->target = crl_mlp_clone(d->q, "qvalue_target", &e)) ||
        !(d->mod = crl_tdmodule_new(d->q, keys, "action_value", &e)))
        goto fail;
    d->next_key = g_strconcat("next.", key, NULL);
    *st = d;
    return CRL_OK;
fail:
    dqn_destroy(d);
    return rc ? rc : crl_error_pass(err, &e, CRL_E_INVALID);
}

static int dqn_act(void *st, crl_td *td, crl_exploration e, crl_rng *rng, crl_error *err)
{
    dqn *d = st;
    int rc = crl_qvalue_actor_act(d->actor, td, e, rng, err);
    if (rc || d->user)
        return rc;
    static const char *const extra[] = { "action_value", "chosen_action_value", NULL };
    return ls_drop_keys(td, extra, err);
}

static void dqn_explore_step(void *st, int64_t frames)
{
    dqn *d = st;
    if (!d->user)   /* a user's actor keeps its own schedule */
        crl_qvalue_actor_step(d->actor, frames);
    d->counters[1] += (double)frames;
    d->counters[2] += 1;
    d->explore_frames_per_call = (double)frames;
}

static size_t dqn_num_params(void *st)
{
    (void)st;
    return 1;
}

static int dqn_param(void *st, size_t i, const char **name, crl_tensor **p, crl_tensor **g, crl_error *err)
{
    dqn *d = st;
    if (i != 0)
        return crl_error_set(err, CRL_E_RANGE, "loss 'dqn': no parameter vector %zu (it has 1)", i);
    *name = "qvalue";
    *p = crl_mlp_params_get(d->q);
    *g = crl_mlp_grads_get(d->q);
    return CRL_OK;
}

/* Q-values of the next observations through net (no cache) into out [rows, n]. */
static int next_values(dqn *d, crl_mlp *net, crl_tensor *next_obs, float *out, int64_t rows, crl_error *err)
{
    crl_error e;
    crl_error_clear(&e);
    crl_tensor *o = crl_tensor_wrap(out, CRL_F32, 2, (const int64_t[]){ rows, d->n }, NULL, NULL, NULL, &e);
    if (!o)
        return crl_error_pass(err, &e, CRL_E_NOMEM);
    int rc = crl_mlp_infer(net, next_obs, o, err);
    crl_tensor_unref(o);
    return rc;
}

static int dqn_forward(void *st, crl_td *batch, crl_td *losses, crl_error *err)
{
    const char *who = "loss 'dqn'";
    dqn *d = st;
    int64_t rows = ls_rows(batch), n = d->n;
    crl_tensor *tmp[4] = { 0 };
    const float *reward, *term, *weight = NULL, *nobs;
    int rc = CRL_OK;
    int64_t in = crl_mlp_in_features(d->q);
    if ((rc = ls_batch_f32(batch, "next.reward", rows, 1, who, &reward, &tmp[0], err)) ||
        (rc = ls_batch_terminal(batch, rows, who, &term, &tmp[1], err)) ||
        (rc = ls_batch_f32(batch, d->next_key, rows, in, who, &nobs, &tmp[2], err)))
        goto out;
    if (crl_td_get(batch, "_weight") && (rc = ls_batch_f32(batch, "_weight", rows, 1, who, &weight, &tmp[3], err)))
        goto out;
    if (rows > d->cap) {
        d->qt = g_renew(float, d->qt, rows * n);
        d->qo = g_renew(float, d->qo, rows * n);
        d->grad = g_renew(float, d->grad, rows * n);
        d->td_err = g_renew(float, d->td_err, rows);
        d->idx = g_renew(int64_t, d->idx, rows);
        d->cap = rows;
    }
    if ((rc = ls_action_index(batch, rows, n, who, d->idx, err)))
        goto out;
    crl_error e;
    crl_error_clear(&e);
    crl_tensor *nobs_t = crl_tensor_wrap((void *)nobs, CRL_F32, 2, (const int64_t[]){ rows, in }, NULL, NULL, NULL,
                                         &e);
    if (!nobs_t) {
        rc = crl_error_pass(err, &e, CRL_E_NOMEM);
        goto out;
    }
    rc = next_values(d, d->target, nobs_t, d->qt, rows, err);
    if (!rc && d->double_dqn)
        rc = next_values(d, d->q, nobs_t, d->qo, rows, err);
    crl_tensor_unref(nobs_t);
    if (rc || (rc = crl_tdmodule_forward(d->mod, batch, err)))
        goto out;
    const float *q = crl_tensor_data(crl_td_get(batch, "action_value"));
    double loss = 0, wsum = 0;
    memset(d->grad, 0, (size_t)(rows * n) * sizeof(float));
    for (int64_t r = 0; r < rows; r++) {
        int64_t a = d->idx[r];
        const float *qt = d->qt + r * n;
        int64_t best = 0;
        const float *pick = d->double_dqn ? d->qo + r * n : qt;
        for (int64_t j = 1; j < n; j++)
            if (pick[j] > pick[best])
                best = j;
        double target = reward[r] + (term[r] != 0 ? 0.0 : d->gamma * qt[best]);
        double diff = q[r * n + a] - target, g;
        double w = weight ? weight[r] : 1.0;
        loss += w * ls_distance(d->smooth_l1, diff, &g);
        wsum += 1;
        d->grad[r * n + a] = (float)(w * g / (double)rows);
        d->td_err[r] = (float)fabs(diff);
    }
    loss /= wsum;
    if (!isfinite(loss)) {
        rc = crl_error_set(err, CRL_E_RUNTIME, "%s: the loss is not finite (%g): the Q-values diverged; lower the "
                           "learning rate or clip gradients ([optim] max_grad_norm)", who, loss);
        goto out;
    }
    crl_tensor *g = crl_tensor_wrap(d->grad, CRL_F32, 2, (const int64_t[]){ rows, n }, NULL, NULL, NULL, &e);
    if (!g) {
        rc = crl_error_pass(err, &e, CRL_E_NOMEM);
        goto out;
    }
    rc = crl_tdmodule_backward(d->mod, g, NULL, err);
    crl_tensor_unref(g);
    if (!rc && !(rc = ls_set_rows(batch, "td_error", d->td_err, err)))
        rc = ls_set_scalar(losses, "loss", loss, err);
out:
    for (int i = 0; i < 4; i++)
        crl_tensor_unref(tmp[i]);
    return rc;
}

static int dqn_update(void *st, crl_error *err)
{
    dqn *d = st;
    d->counters[0] += 1;
    if (d->tau > 0)
        return crl_params_soft_update(crl_mlp_params_get(d->target), crl_mlp_params_get(d->q), d->tau, err);
    if ((int64_t)d->counters[0] % d->hard_interval == 0)
        return crl_params_hard_update(crl_mlp_params_get(d->target), crl_mlp_params_get(d->q), err);
    return CRL_OK;
}

static int dqn_save(void *st, crl_ckpt_writer *w, const char *prefix, crl_error *err)
{
    dqn *d = st;
    double c[4] = { d->counters[0], d->counters[1], d->counters[2], d->explore_frames_per_call };
    int rc;
    if ((rc = ls_mlp_save(d->q, w, prefix, "qvalue", err)) ||
        (rc = ls_mlp_save(d->target, w, prefix, "qvalue_target", err)))
        return rc;
    return ls_save_doubles(w, prefix, "counters", c, 4, err);
}

static int dqn_load(void *st, const crl_ckpt_reader *r, const char *prefix, crl_error *err)
{
    dqn *d = st;
    double c[4];
    static const char *const fields[4] = { "optimizer steps", "explore frames", "explore calls",
                                           "frames per explore call" };
    int rc = ls_load_doubles(r, prefix, "counters", c, 4, err);
    for (int i = 0; !rc && i < 4; i++)
        rc = ls_check_count(r, prefix, "counters", fields[i], c[i], err);
    if (!rc)
        rc = ls_check_field(r, prefix, "counters", fields[2], c[2], c[2] * c[3] <= 0x1p53,
                            "calls times frames per call at most 2^53", err);
    if (rc)
        return rc;
    /* Load into clones first: nothing changes on error. */
    crl_error e;
    crl_error_clear(&e);
    crl_mlp *q = crl_mlp_clone(d->q, "qvalue", &e), *t = q ? crl_mlp_clone(d->target, "qvalue_target", &e) : NULL;
    rc = (!q || !t) ? crl_error_pass(err, &e, CRL_E_NOMEM) : CRL_OK;
    if (!rc && !(rc = ls_mlp_load(q, r, prefix, "qvalue", err)))
        rc = ls_mlp_load(t, r, prefix, "qvalue_target", err);
    if (!rc) {
        crl_tensor_copy(crl_mlp_params_get(d->q), crl_mlp_params_get(q), NULL);
        crl_tensor_copy(crl_mlp_params_get(d->target), crl_mlp_params_get(t), NULL);
        d->counters[0] = c[0];
        /* Replay the epsilon schedule with the same calls, so it matches bitwise. */
        if (!d->user) {
            crl_qvalue_actor_set_egreedy(d->actor, d->eps_init, d->eps_end, d->eps_steps, NULL);
            for (int64_t i = 0, n = ls_anneal_calls((int64_t)c[2], (int64_t)c[3], d->eps_steps); i < n; i++)
                dqn_explore_step(d, (int64_t)c[3]);
        }
        /* What all c[2] calls add up to (exact: below 2^53). */
        d->counters[1] = c[2] * c[3];
        d->counters[2] = c[2];
    }
    crl_mlp_unref(q);
    crl_mlp_unref(t);
    return rc;
}

const crl_loss_ops ls_dqn_ops = {
    .struct_size = sizeof(crl_loss_ops),
    .flags = 0,
    .create = dqn_create,
    .destroy = dqn_destroy,
    .act = dqn_act,
    .explore_step = dqn_explore_step,
    .num_params = dqn_num_params,
    .param = dqn_param,
    .prepare = NULL,
    .forward = dqn_forward,
    .update = dqn_update,
    .save = dqn_save,
    .load = dqn_load,
    .param_active = NULL,
    .create_from_modules = dqn_create_modules,
};
