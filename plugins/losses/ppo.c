/* plugins/losses: on-policy actor-critic losses (TorchRL's ClipPPOLoss, KLPENPPOLoss, A2CLoss,
 * ReinforceLoss) over a probabilistic actor (Categorical or TanhNormal) and a state-value critic,
 * with the value estimators of crl/value.h (GAE, TD(0), TD(1), TD(lambda)). */
#include "config.h"
#include "losses.h"

#include <crl/rnn.h>

#include <glib.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#define PG_COMMON_OPTIONS                                                                                      \
    { "in_key", CRL_OPT_STRING, 0, "observation", 0, 0, NULL, "observation key the actor and critic read" },   \
    { "num_cells", CRL_OPT_DOUBLES, CRL_OPT_RANGE, "64, 64", 0, 8, NULL,                                      \
      "hidden layer widths of the actor and of the critic" },                                                 \
    { "activation", CRL_OPT_ENUM, 0, "tanh", 0, 0, "tanh|relu|elu|leaky_relu", "hidden activation" },        \
    { "gamma", CRL_OPT_DOUBLE, CRL_OPT_RANGE, "0.99", 0, 1, NULL, "discount" },                              \
    { "lmbda", CRL_OPT_DOUBLE, CRL_OPT_RANGE, "0.95", 0, 1, NULL, "lambda of GAE and TD(lambda)" },           \
    { "entropy_coef", CRL_OPT_DOUBLE, CRL_OPT_RANGE, "0.01", 0, 1e6, NULL,                                   \
      "weight of the entropy bonus (loss_entropy = -entropy_coef * entropy)" },                                \
    { "critic_coef", CRL_OPT_DOUBLE, CRL_OPT_RANGE, "0.5", 0, 1e6, NULL, "weight of loss_critic" },           \
    { "loss_critic_type", CRL_OPT_ENUM, 0, "smooth_l1", 0, 0, "l2|smooth_l1",                                 \
      "distance between the critic's value and value_target" },                                              \
    { "normalize_advantage", CRL_OPT_BOOL, 0, "true", 0, 0, NULL,                                             \
      "standardize the advantage over each minibatch" },                                                      \
    { "init", CRL_OPT_ENUM, 0, "orthogonal", 0, 0, "default|orthogonal",                                     \
      "orthogonal: gain sqrt(2), actor output 0.01, critic output 1 (CleanRL's PPO); default: PyTorch's" }

const crl_option ls_ppo_options[] = {
    PG_COMMON_OPTIONS,
    { "estimator", CRL_OPT_ENUM, 0, "gae", 0, 0, "gae|td0|td1|td_lambda", "advantage and value target" },
    { "variant", CRL_OPT_ENUM, 0, "clip", 0, 0, "clip|kl",
      "clip: ClipPPOLoss; kl: KLPENPPOLoss (adaptive KL penalty)" },
    { "clip_epsilon", CRL_OPT_DOUBLE, CRL_OPT_RANGE, "0.2", 0, 10, NULL, "clipping of the probability ratio" },
    { "kl_target", CRL_OPT_DOUBLE, CRL_OPT_RANGE, "0.01", 1e-9, 10, NULL, "kl variant: target KL (dtarg)" },
    { "kl_beta", CRL_OPT_DOUBLE, CRL_OPT_RANGE, "1.0", 0, 1e6, NULL, "kl variant: initial penalty coefficient" },
    CRL_OPTIONS_END
};

const crl_option ls_a2c_options[] = {
    PG_COMMON_OPTIONS,
    { "estimator", CRL_OPT_ENUM, 0, "gae", 0, 0, "gae|td0|td1|td_lambda", "advantage and value target" },
    CRL_OPTIONS_END
};

const crl_option ls_reinforce_options[] = {
    PG_COMMON_OPTIONS,
    { "estimator", CRL_OPT_ENUM, 0, "td1", 0, 0, "gae|td0|td1|td_lambda",
      "advantage (td1: discounted return minus the critic's baseline)" },
    CRL_OPTIONS_END
};

typedef enum { PG_PPO, PG_A2C, PG_REINFORCE } pg_mode;

typedef struct pg {
    pg_mode mode;
    const char *who;
    ls_net_opts no;
    double gamma, lmbda, ent_coef, critic_coef, clip, kl_target, beta;
    bool smooth_l1, normalize, kl;
    crl_value_estimator est;
    bool categorical;
    crl_mlp *actor_net, *critic;
    crl_prob_actor *actor;
    crl_tdmodule *v_now, *v_next, *v_train;   /* critic on in_key, on next.in_key (infer), with cache */
    crl_rng rng;                              /* TanhNormal entropy estimates */
    float *glp, *gent, *gv, *adv;
    int64_t cap;
    double kl_sum;
    int64_t kl_n;
    bool user;                                /* the actor is the user's (create_from_modules) */
    /* A recurrent [net.actor]: one LSTM/GRU on the observation shared by the actor and critic heads, which
     * read its output "embed".  act steps it (state in the TensorDict), prepare runs it over the collected
     * [N, T] sequences, forward over [m, L] slices from their stored states, with BPTT. */
    crl_rnn *rnn;
    crl_rnn_module *r_act, *r_seq, *r_next;   /* one step per row; sequences; on "next" for V(s') */
    crl_td_key *k_next;
    float *gemb;                              /* dLoss/d embed, [rows, H] */
    int64_t gemb_cap;
} pg;

static void pg_destroy(void *st)
{
    pg *p = st;
    if (!p)
        return;
    if (!p->user)
        crl_prob_actor_free(p->actor);
    crl_tdmodule_free(p->v_now);
    crl_tdmodule_free(p->v_next);
    crl_tdmodule_free(p->v_train);
    crl_mlp_unref(p->actor_net);
    crl_mlp_unref(p->critic);
    crl_rnn_module_free(p->r_act);
    crl_rnn_module_free(p->r_seq);
    crl_rnn_module_free(p->r_next);
    crl_rnn_unref(p->rnn);
    crl_td_key_free(p->k_next);
    g_free(p->gemb);
    g_free(p->glp);
    g_free(p->gent);
    g_free(p->gv);
    g_free(p->adv);
    g_free(p);
}

/* PPO's own options (the clip and KL variants), the same for a loss from config and from modules. */
static int read_ppo_opts(pg *p, const crl_opts *opts, crl_error *err)
{
    const char *variant;
    int rc;
    if ((rc = crl_opts_string(opts, "variant", &variant, err)) ||
        (rc = crl_opts_double(opts, "clip_epsilon", &p->clip, err)) ||
        (rc = crl_opts_double(opts, "kl_target", &p->kl_target, err)) ||
        (rc = crl_opts_double(opts, "kl_beta", &p->beta, err)))
        return rc;
    p->kl = !strcmp(variant, "kl");
    return CRL_OK;
}

/* The shared recurrent network of a recurrent [net.actor] and its three modules.  The env must carry the
 * state (a TensorDictPrimer with its keys) and is_init (an InitTracker): checked on the observation spec. */
static int pg_recurrent_init(pg *p, const crl_spec *obs_spec, crl_rnn_kind kind, int nd, const int64_t *shape,
                             int64_t hidden, crl_rng *rng, crl_error *err)
{
    const char *kn = crl_rnn_kind_name(kind);
    if (nd != 1)
        return crl_error_set(err, CRL_E_SHAPE, "%s: [net.actor] type = %s reads vectors, but observation '%s' has %d "
                             "dims per env; flatten it (a FlattenObservation transform): a conv encoder in front of a "
                             "recurrent network is built for dqn's [net.q] only", p->who, kn, p->no.in_key, nd);
    crl_error e;
    crl_error_clear(&e);
    if (!(p->rnn = crl_rnn_new(kn, kind, shape[0], hidden, rng, &e)) ||
        !(p->r_act = crl_rnn_module_new(p->rnn, p->no.in_key, "embed", &e)) ||
        !(p->r_seq = crl_rnn_module_new(p->rnn, p->no.in_key, "embed", &e)) ||
        !(p->r_next = crl_rnn_module_new(p->rnn, p->no.in_key, "embed", &e)) ||
        !(p->k_next = crl_td_key_new("next", &e)))
        return crl_error_pass(err, &e, CRL_E_NOMEM);
    crl_rnn_module_set_recurrent_mode(p->r_seq, true);
    return ls_rnn_env_check(obs_spec, p->r_act, p->who, "actor", hidden, err);
}

static int pg_create(pg_mode mode, const crl_opts *opts, const crl_spec *obs_spec, const crl_spec *action_spec,
                     uint64_t seed, void **st, crl_error *err)
{
    static const char *const names[] = { "loss 'ppo'", "loss 'a2c'", "loss 'reinforce'" };
    pg *p = g_new0(pg, 1);
    p->mode = mode;
    p->who = names[mode];
    const char *ct, *est, *init;
    int nd;
    int64_t shape[CRL_MAX_DIMS];
    int rc;
    crl_error e;   /* for the calls that return NULL on failure */
    crl_error_clear(&e);
    if ((rc = ls_net_opts_read(opts, p->who, &p->no, err)) || (rc = crl_opts_double(opts, "gamma", &p->gamma, err)) ||
        (rc = crl_opts_double(opts, "lmbda", &p->lmbda, err)) ||
        (rc = crl_opts_double(opts, "entropy_coef", &p->ent_coef, err)) ||
        (rc = crl_opts_double(opts, "critic_coef", &p->critic_coef, err)) ||
        (rc = crl_opts_string(opts, "loss_critic_type", &ct, err)) ||
        (rc = crl_opts_bool(opts, "normalize_advantage", &p->normalize, err)) ||
        (rc = crl_opts_string(opts, "estimator", &est, err)) ||
        (rc = crl_value_estimator_from_name(est, &p->est, err)) ||
        (rc = crl_opts_string(opts, "init", &init, err)) ||
        (rc = ls_obs_shape(obs_spec, p->no.in_key, p->who, &nd, shape, NULL, err)))
        goto fail;
    if (mode == PG_PPO && (rc = read_ppo_opts(p, opts, err)))
        goto fail;
    p->smooth_l1 = !strcmp(ct, "smooth_l1");
    const crl_spec *act = ls_action_leaf(action_spec, p->who, &e);
    if (!act) {
        rc = crl_error_pass(err, &e, CRL_E_INVALID);
        goto fail;
    }
    crl_spec_kind k = crl_spec_get_kind(act);
    p->categorical = k == CRL_SPEC_CATEGORICAL || k == CRL_SPEC_ONEHOT;
    int64_t out;
    if (p->categorical)
        out = crl_spec_n(act);
    else if (k == CRL_SPEC_BOUNDED || k == CRL_SPEC_UNBOUNDED)
        out = 2 * crl_spec_shape(act)[crl_spec_ndim(act) - 1];
    else {
        rc = crl_error_set(err, CRL_E_INVALID, "%s: the env's action is %s; this loss needs Categorical, OneHot, "
                           "Bounded or Unbounded", p->who, crl_spec_kind_name(k));
        goto fail;
    }
    crl_rng rng;
    crl_rng_init(&rng, seed, 0);
    crl_rng_init(&p->rng, seed, 1);
    bool recurrent = false, crec = false;
    crl_rnn_kind kind = CRL_RNN_LSTM;
    int64_t hidden = 0, dummy;
    if ((rc = crl_net_recurrent(opts, "actor", &recurrent, &kind, &hidden, err)) ||
        (rc = crl_net_recurrent(opts, "critic", &crec, &kind, &dummy, err)))
        goto fail;
    if (crec) {
        rc = crl_error_set(err, CRL_E_CONFIG, "%s: [net.critic] is recurrent, but the critic shares the actor's "
                           "recurrent network: make [net.actor] type = lstm or gru and [net.critic] an mlp head",
                           p->who);
        goto fail;
    }
    if (recurrent && (rc = pg_recurrent_init(p, obs_spec, kind, nd, shape, hidden, &rng, err)))
        goto fail;
    const char *keys[] = { recurrent ? "embed" : p->no.in_key, NULL };
    char *next_key = g_strconcat("next.", keys[0], NULL);
    const char *nkeys[] = { next_key, NULL };
    if (recurrent) {
        nd = 1;
        shape[0] = hidden;
    }
    rc = CRL_OK;
    /* The loss's init applies to the networks whose [net.*] section sets none. */
    bool ortho = !strcmp(init, "orthogonal");
    if (!(p->actor_net = ls_net(opts, "actor", "actor", nd, shape, out, &p->no, &rng, &e)) ||
        !(p->critic = ls_net(opts, "critic", "critic", nd, shape, 1, &p->no, &rng, &e)) ||
        (ortho && !crl_net_sets_init(opts, "actor") &&
         (rc = crl_mlp_init(p->actor_net, CRL_INIT_ORTHOGONAL, sqrt(2.0), 0.01, &rng, err))) ||
        (ortho && !crl_net_sets_init(opts, "critic") &&
         (rc = crl_mlp_init(p->critic, CRL_INIT_ORTHOGONAL, sqrt(2.0), 1.0, &rng, err))) ||
        !(p->actor = crl_prob_actor_new(p->actor_net, keys,
                                        p->categorical ? CRL_DIST_CATEGORICAL : CRL_DIST_TANH_NORMAL, act, &e)) ||
        !(p->v_now = crl_tdmodule_new(p->critic, keys, "state_value", &e)) ||
        !(p->v_next = crl_tdmodule_new(p->critic, nkeys, "next.state_value", &e)) ||
        !(p->v_train = crl_tdmodule_new(p->critic, keys, "state_value", &e)))
        rc = rc ? rc : crl_error_pass(err, &e, CRL_E_INVALID);
    /* PPO's ratio needs the collecting policy's log-probs in the batch */
    if (!rc)
        crl_prob_actor_set_return_log_prob(p->actor, mode == PG_PPO);
    g_free(next_key);
    if (rc)
        goto fail;
    *st = p;
    return CRL_OK;
fail:
    pg_destroy(p);
    return rc;
}

static int ppo_create(const crl_opts *o, const crl_spec *obs, const crl_spec *act, uint64_t seed, void **st,
                      crl_error *err)
{
    return pg_create(PG_PPO, o, obs, act, seed, st, err);
}
static int a2c_create(const crl_opts *o, const crl_spec *obs, const crl_spec *act, uint64_t seed, void **st,
                      crl_error *err)
{
    return pg_create(PG_A2C, o, obs, act, seed, st, err);
}
static int reinforce_create(const crl_opts *o, const crl_spec *obs, const crl_spec *act, uint64_t seed, void **st,
                            crl_error *err)
{
    return pg_create(PG_REINFORCE, o, obs, act, seed, st, err);
}

/* create_from_modules: TorchRL's ClipPPOLoss / A2CLoss / ReinforceLoss(actor_network, critic_network).  The
 * critic reads its in_keys now and under "next." for the next state's value. */
static int pg_create_modules(pg_mode mode, const crl_opts *opts, const crl_loss_modules *m, uint64_t seed, void **st,
                             crl_error *err)
{
    static const char *const names[] = { "loss 'ppo'", "loss 'a2c'", "loss 'reinforce'" };
    static const char *const refused[] = { "in_key", "num_cells", "activation", "init", NULL };
    const char *who = names[mode];
    if (!m->prob_actor || !m->value)
        return crl_error_set(err, CRL_E_INVALID, "%s: give prob_actor (a crl_prob_actor) and value (V(s): a "
                             "crl_tdmodule with one output)", who);
    crl_mlp *vnet = crl_tdmodule_net_get(m->value);
    if (crl_mlp_out_features(vnet) != 1)
        return crl_error_set(err, CRL_E_SHAPE, "%s: the value module '%s' gives %lld outputs; V(s) gives 1", who,
                             crl_mlp_name(vnet), (long long)crl_mlp_out_features(vnet));
    pg *p = g_new0(pg, 1);
    p->mode = mode;
    p->who = who;
    p->user = true;
    p->actor = m->prob_actor;
    const char *ct, *est;
    int rc;
    crl_error e;
    crl_error_clear(&e);
    if ((rc = ls_reject_set(opts, who, refused, err)) || (rc = crl_opts_double(opts, "gamma", &p->gamma, err)) ||
        (rc = crl_opts_double(opts, "lmbda", &p->lmbda, err)) ||
        (rc = crl_opts_double(opts, "entropy_coef", &p->ent_coef, err)) ||
        (rc = crl_opts_double(opts, "critic_coef", &p->critic_coef, err)) ||
        (rc = crl_opts_string(opts, "loss_critic_type", &ct, err)) ||
        (rc = crl_opts_bool(opts, "normalize_advantage", &p->normalize, err)) ||
        (rc = crl_opts_string(opts, "estimator", &est, err)) ||
        (rc = crl_value_estimator_from_name(est, &p->est, err)))
        goto fail;
    if (mode == PG_PPO && (rc = read_ppo_opts(p, opts, err)))
        goto fail;
    p->smooth_l1 = !strcmp(ct, "smooth_l1");
    p->categorical = crl_prob_actor_kind(p->actor) == CRL_DIST_CATEGORICAL;
    crl_rng_init(&p->rng, seed, 1);
    p->actor_net = crl_mlp_ref(crl_prob_actor_net_get(p->actor));
    p->critic = crl_mlp_ref(vnet);
    size_t nk = crl_tdmodule_num_in_keys(m->value);
    const char **keys = g_new0(const char *, nk + 1);
    char **next = g_new0(char *, nk + 1);
    for (size_t i = 0; i < nk; i++) {
        keys[i] = crl_tdmodule_in_key(m->value, i);
        next[i] = g_strconcat("next.", keys[i], NULL);
    }
    if (!(p->v_now = crl_tdmodule_new(p->critic, keys, "state_value", &e)) ||
        !(p->v_next = crl_tdmodule_new(p->critic, (const char *const *)next, "next.state_value", &e)) ||
        !(p->v_train = crl_tdmodule_new(p->critic, keys, "state_value", &e)))
        rc = crl_error_pass(err, &e, CRL_E_INVALID);
    g_free(keys);
    g_strfreev(next);
    if (rc)
        goto fail;
    *st = p;
    return CRL_OK;
fail:
    pg_destroy(p);
    return rc;
}

static int ppo_create_modules(const crl_opts *o, const crl_loss_modules *m, uint64_t seed, void **st, crl_error *err)
{
    return pg_create_modules(PG_PPO, o, m, seed, st, err);
}
static int a2c_create_modules(const crl_opts *o, const crl_loss_modules *m, uint64_t seed, void **st, crl_error *err)
{
    return pg_create_modules(PG_A2C, o, m, seed, st, err);
}
static int reinforce_create_modules(const crl_opts *o, const crl_loss_modules *m, uint64_t seed, void **st,
                                    crl_error *err)
{
    return pg_create_modules(PG_REINFORCE, o, m, seed, st, err);
}

static int pg_act(void *st, crl_td *td, crl_exploration e, crl_rng *rng, crl_error *err)
{
    pg *p = st;
    int rc;
    if (p->rnn && (rc = crl_rnn_module_infer(p->r_act, td, err)))
        return rc;
    return crl_prob_actor_act(p->actor, td, e, rng, err);
}

static size_t pg_num_params(void *st)
{
    pg *p = st;
    return p->rnn ? 3 : 2;
}

static int pg_param(void *st, size_t i, const char **name, crl_tensor **params, crl_tensor **grads, crl_error *err)
{
    pg *p = st;
    if (i > pg_num_params(p) - 1)
        return crl_error_set(err, CRL_E_RANGE, "%s: no parameter vector %zu (it has %zu)", p->who, i,
                             pg_num_params(p));
    if (i == 2) {
        *name = crl_rnn_kind_name(crl_rnn_kind_get(p->rnn));
        *params = crl_rnn_params_get(p->rnn);
        *grads = crl_rnn_grads_get(p->rnn);
        return CRL_OK;
    }
    crl_mlp *m = i == 0 ? p->actor_net : p->critic;
    *name = i == 0 ? "actor" : "critic";
    *params = crl_mlp_params_get(m);
    *grads = crl_mlp_grads_get(m);
    return CRL_OK;
}

/* Values of both ends of every step, then advantages and targets. */
static int pg_prepare(void *st, crl_td *batch, crl_error *err)
{
    pg *p = st;
    if (p->mode == PG_PPO && !crl_td_get(batch, "sample_log_prob"))
        return crl_error_set(err, CRL_E_NOT_FOUND, "%s: the batch has no 'sample_log_prob' (collect it with an actor "
                             "that has return_log_prob set, as this loss's policy does, without init_random_frames)",
                             p->who);
    int rc;
    if (p->rnn) {
        /* The features of every step from each sequence's stored start state, and of every next state from
         * the state after its step (as the policy wrote it under next). */
        crl_td *next = crl_td_get_td(batch, "next");
        if (crl_td_batch_ndim(batch) != 2)
            return crl_error_set(err, CRL_E_SHAPE, "%s: a recurrent actor needs the batch as [envs, steps] "
                                 "sequences (it has %d batch dims)", p->who, crl_td_batch_ndim(batch));
        if (!next)
            return crl_error_set(err, CRL_E_NOT_FOUND, "%s: the batch has no 'next'", p->who);
        if ((rc = crl_rnn_module_infer(p->r_seq, batch, err)) || (rc = crl_rnn_module_infer(p->r_next, next, err)))
            return crl_error_prefix(err, "%s: ", p->who), rc;
    }
    if ((rc = crl_tdmodule_infer(p->v_now, batch, err)) || (rc = crl_tdmodule_infer(p->v_next, batch, err)) ||
        (rc = crl_value_estimate_td(p->est, p->gamma, p->lmbda, batch, err)))
        return crl_error_prefix(err, "%s: ", p->who), rc;
    if (p->kl && p->kl_n > 0) {
        /* KLPENPPOLoss: adapt beta to the mean KL of the previous batch. */
        double kl = p->kl_sum / (double)p->kl_n;
        if (kl > 1.5 * p->kl_target)
            p->beta *= 2;
        else if (kl < p->kl_target / 1.5)
            p->beta *= 0.5;
    }
    p->kl_sum = 0;
    p->kl_n = 0;
    return CRL_OK;
}

static void reserve(pg *p, int64_t rows)
{
    if (rows <= p->cap)
        return;
    p->glp = g_renew(float, p->glp, rows);
    p->gent = g_renew(float, p->gent, rows);
    p->gv = g_renew(float, p->gv, rows);
    p->adv = g_renew(float, p->adv, rows);
    p->cap = rows;
}

/* dLoss/d embed of one head (from gin), into p->gemb (add: onto what is there). */
static int take_embed_grad(pg *p, const crl_td *gin, int64_t M, bool add, crl_error *err)
{
    int64_t H = crl_rnn_hidden_size(p->rnn);
    const crl_tensor *g = crl_td_get(gin, "embed");
    if (!g || crl_tensor_numel(g) != M * H)
        return crl_error_set(err, CRL_E_RUNTIME, "%s: no gradient of 'embed' from the heads", p->who);
    if (M * H > p->gemb_cap) {
        p->gemb = g_renew(float, p->gemb, M * H);
        p->gemb_cap = M * H;
    }
    for (int64_t i = 0; i < M * H; i++)
        p->gemb[i] = (float)((add ? p->gemb[i] : 0) + crl_tensor_flat_get(g, i));
    return CRL_OK;
}

static int pg_forward(void *st, crl_td *batch, crl_td *losses, crl_error *err)
{
    pg *p = st;
    int64_t M = ls_rows(batch);
    crl_tensor *tmp[3] = { 0 };
    const float *adv, *vt, *old = NULL;
    int rc = CRL_OK;
    if (p->rnn && crl_td_batch_ndim(batch) != 2)
        return crl_error_set(err, CRL_E_CONFIG, "%s: a recurrent actor learns from whole slices of steps: set "
                             "[train] sequence_length (e.g. 16; it must divide the steps per env of a batch)", p->who);
    reserve(p, M);
    if ((rc = ls_batch_f32(batch, "advantage", M, 1, p->who, &adv, &tmp[0], err)) ||
        (rc = ls_batch_f32(batch, "value_target", M, 1, p->who, &vt, &tmp[1], err)) ||
        (p->mode == PG_PPO && (rc = ls_batch_f32(batch, "sample_log_prob", M, 1, p->who, &old, &tmp[2], err))))
        goto out;
    double mean = 0, sd = 1;
    if (p->normalize && M > 1) {
        double s = 0, s2 = 0;
        for (int64_t i = 0; i < M; i++)
            s += adv[i];
        mean = s / (double)M;
        for (int64_t i = 0; i < M; i++)
            s2 += (adv[i] - mean) * (adv[i] - mean);
        sd = sqrt(s2 / (double)(M - 1)) + 1e-8;  /* torch.std is unbiased */
    }
    for (int64_t i = 0; i < M; i++)
        p->adv[i] = (float)((adv[i] - mean) / sd);
    if (p->rnn && (rc = crl_rnn_module_forward(p->r_seq, batch, err)))
        goto out;
    /* The critic first (its own network); then the actor. */
    if ((rc = crl_tdmodule_forward(p->v_train, batch, err)))
        goto out;
    const float *v = crl_tensor_data(crl_td_get(batch, "state_value"));
    double lc = 0;
    for (int64_t i = 0; i < M; i++) {
        double g;
        lc += ls_distance(p->smooth_l1, v[i] - vt[i], &g);
        p->gv[i] = (float)(p->critic_coef * g / (double)M);
    }
    lc *= p->critic_coef / (double)M;
    if ((rc = crl_prob_actor_evaluate(p->actor, batch, &p->rng, err)))
        goto out;
    const float *lp = crl_tensor_data(crl_prob_actor_log_prob_get(p->actor)),
                *ent = crl_tensor_data(crl_prob_actor_entropy_get(p->actor));
    double lo = 0, le = 0, kl_sum = 0;
    for (int64_t i = 0; i < M; i++) {
        double a = p->adv[i];
        le += ent[i];
        p->gent[i] = (float)(-p->ent_coef / (double)M);
        if (p->mode != PG_PPO) {
            lo -= a * lp[i];
            p->glp[i] = (float)(-a / (double)M);
            continue;
        }
        double logr = lp[i] - old[i], r = exp(logr);
        kl_sum += -logr;  /* E_old[log old - log new], one sample */
        if (p->kl) {
            /* -(r A) + beta * KL estimate (old - new log-prob of the stored action) */
            lo -= r * a - p->beta * (-logr);
            p->glp[i] = (float)((-r * a - p->beta) / (double)M);
        } else {
            double rc_ = fmin(fmax(r, 1 - p->clip), 1 + p->clip), s1 = r * a, s2 = rc_ * a;
            lo -= fmin(s1, s2);
            /* d min(rA, clip(r)A)/dlogp: rA's when it is the smaller, else 0 outside the clip range */
            p->glp[i] = (float)((s1 <= s2 || (r > 1 - p->clip && r < 1 + p->clip)) ? -s1 / (double)M : 0.0);
        }
    }
    lo /= (double)M;
    le = -p->ent_coef * le / (double)M;
    if (!isfinite(lo) || !isfinite(lc) || !isfinite(le)) {
        rc = crl_error_set(err, CRL_E_RUNTIME, "%s: a loss is not finite (loss_objective %g, loss_critic %g, "
                           "loss_entropy %g); lower the learning rate or clip gradients ([optim] max_grad_norm)",
                           p->who, lo, lc, le);
        goto out;
    }
    crl_error e;
    crl_error_clear(&e);
    crl_tensor *gv = crl_tensor_wrap(p->gv, CRL_F32, 2, (const int64_t[]){ M, 1 }, NULL, NULL, NULL, &e),
               *glp = crl_tensor_wrap(p->glp, CRL_F32, 1, &M, NULL, NULL, NULL, &e),
               *gent = crl_tensor_wrap(p->gent, CRL_F32, 1, &M, NULL, NULL, NULL, &e);
    if (!gv || !glp || !gent)
        rc = crl_error_pass(err, &e, CRL_E_NOMEM);
    crl_td *gin = NULL;
    if (!rc && p->rnn && !(gin = crl_td_new(crl_td_batch_ndim(batch), crl_td_batch_shape(batch), &e)))
        rc = crl_error_pass(err, &e, CRL_E_NOMEM);
    if (!rc)
        rc = crl_tdmodule_backward(p->v_train, gv, gin, err);
    if (!rc && p->rnn)
        rc = take_embed_grad(p, gin, M, false, err);
    if (!rc)
        rc = crl_prob_actor_backward(p->actor, NULL, glp, p->ent_coef > 0 ? gent : NULL, gin, err);
    if (!rc && p->rnn && !(rc = take_embed_grad(p, gin, M, true, err))) {
        int64_t H = crl_rnn_hidden_size(p->rnn);
        crl_tensor *ge = crl_tensor_wrap(p->gemb, CRL_F32, 2, (const int64_t[]){ M, H }, NULL, NULL, NULL, &e);
        rc = ge ? crl_rnn_module_backward(p->r_seq, ge, NULL, err) : crl_error_pass(err, &e, CRL_E_NOMEM);
        crl_tensor_unref(ge);
    }
    crl_td_unref(gin);
    crl_tensor_unref(gv);
    crl_tensor_unref(glp);
    crl_tensor_unref(gent);
    if (!rc)
        rc = ls_set_scalar(losses, "loss_objective", lo, err);
    if (!rc)
        rc = ls_set_scalar(losses, "loss_critic", lc, err);
    if (!rc)
        rc = ls_set_scalar(losses, "loss_entropy", le, err);
    if (!rc && p->mode == PG_PPO) {
        p->kl_sum += kl_sum;
        p->kl_n += M;
        rc = ls_set_scalar(losses, "kl_approx", kl_sum / (double)M, err);
    }
out:
    for (int i = 0; i < 3; i++)
        crl_tensor_unref(tmp[i]);
    return rc;
}

static int pg_save(void *st, crl_ckpt_writer *w, const char *prefix, crl_error *err)
{
    pg *p = st;
    double s[3] = { p->beta, p->kl_sum, (double)p->kl_n };
    int rc;
    char sec[CRL_CKPT_NAME_MAX + 1];
    snprintf(sec, sizeof sec, "%s/rnn", prefix);
    if ((rc = ls_mlp_save(p->actor_net, w, prefix, "actor", err)) ||
        (rc = ls_mlp_save(p->critic, w, prefix, "critic", err)) ||
        (p->rnn && (rc = crl_rnn_save(p->rnn, w, sec, err))) ||
        (rc = ls_save_doubles(w, prefix, "state", s, 3, err)))
        return rc;
    return ls_save_rng(w, prefix, &p->rng, err);
}

static int pg_load(void *st, const crl_ckpt_reader *r, const char *prefix, crl_error *err)
{
    pg *p = st;
    double s[3];
    crl_rng rng;
    int rc;
    if ((rc = ls_load_doubles(r, prefix, "state", s, 3, err)) ||
        (rc = ls_check_field(r, prefix, "state", "beta", s[0], s[0] >= 0, "a number >= 0", err)) ||
        (rc = ls_check_count(r, prefix, "state", "KL samples", s[2], err)) || (rc = ls_load_rng(r, prefix, &rng, err)))
        return rc;
    crl_error e;
    crl_error_clear(&e);
    crl_mlp *a = crl_mlp_clone(p->actor_net, "actor", &e), *c = a ? crl_mlp_clone(p->critic, "critic", &e) : NULL;
    crl_rnn *rn = p->rnn && c ? crl_rnn_clone(p->rnn, NULL, &e) : NULL;
    rc = (!a || !c || (p->rnn && !rn)) ? crl_error_pass(err, &e, CRL_E_NOMEM) : CRL_OK;
    char sec[CRL_CKPT_NAME_MAX + 1];
    snprintf(sec, sizeof sec, "%s/rnn", prefix);
    if (!rc && !(rc = ls_mlp_load(a, r, prefix, "actor", err)))
        rc = ls_mlp_load(c, r, prefix, "critic", err);
    if (!rc && rn)
        rc = crl_rnn_load(rn, r, sec, err);
    if (!rc && rn)
        crl_tensor_copy(crl_rnn_params_get(p->rnn), crl_rnn_params_get(rn), NULL);
    crl_rnn_unref(rn);
    if (!rc) {
        crl_tensor_copy(crl_mlp_params_get(p->actor_net), crl_mlp_params_get(a), NULL);
        crl_tensor_copy(crl_mlp_params_get(p->critic), crl_mlp_params_get(c), NULL);
        p->beta = s[0];
        p->kl_sum = s[1];
        p->kl_n = (int64_t)s[2];
        p->rng = rng;
    }
    crl_mlp_unref(a);
    crl_mlp_unref(c);
    return rc;
}

#define PG_OPS(create_, modules_)                                                                              \
    {                                                                                                          \
        .struct_size = sizeof(crl_loss_ops), .flags = CRL_LOSS_ON_POLICY, .create = create_,                  \
        .destroy = pg_destroy, .act = pg_act, .explore_step = NULL, .num_params = pg_num_params,              \
        .param = pg_param, .prepare = pg_prepare, .forward = pg_forward, .update = NULL, .save = pg_save,     \
        .load = pg_load, .param_active = NULL, .create_from_modules = modules_,                               \
    }

const crl_loss_ops ls_ppo_ops = PG_OPS(ppo_create, ppo_create_modules);
const crl_loss_ops ls_a2c_ops = PG_OPS(a2c_create, a2c_create_modules);
const crl_loss_ops ls_reinforce_ops = PG_OPS(reinforce_create, reinforce_create_modules);
