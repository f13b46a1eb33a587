/* plugins/losses: DQN (TorchRL's DQNLoss): double DQN, L2 or smooth-L1, a target network; with a recurrent
 * [net.q] (type = lstm or gru), recurrent DQN as TorchRL's tutorial builds it: LSTMModule/GRUModule -> MLP
 * head, the state carried in the TensorDict while acting, learning from replayed slices of consecutive
 * steps with backpropagation through time; with [net.q] encoder = NAME, a conv stack reads the frames in
 * front of the LSTM/GRU (TorchRL's ConvNet -> LSTMModule -> MLP). */
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
    float *rew, *term, *wt;            /* the recurrent path's float copies of the batch's rows */
    int64_t *idx;
    int64_t cap;
    crl_tensor *next_obs;              /* scratch for rows != cap */
    bool user;                         /* the actor is the user's (create_from_modules) */
    /* A recurrent [net.q]: rnn -> "embed" -> q (the head).  act steps r_act; forward runs r_seq over the
     * [B, T] slices from the state stored at each slice's first step (resets at is_init inside), the target
     * network rnn_t over the same steps (r_tseq), then each next observation one step on from the state
     * after its step: with the target (r_tnext) for the target value, with the online network (r_onext) for
     * double DQN's choice.  Every scratch TensorDict and tensor below is sized for one [B, T] and reused. */
    crl_rnn *rnn, *rnn_t;
    /* Copies of rnn and rnn_t (synced before each use) for the one-step passes over the B*T next
     * observations: a network's infer workspace follows the last infer's shape, and these keep theirs. */
    crl_rnn *rnn_o1, *rnn_t1;
    crl_rnn_module *r_act, *r_seq, *r_onext, *r_tseq, *r_tnext;
    int64_t sB, sT;
    crl_td *so, *st, *sn, *snt;        /* slice inputs (so, st share them); next observations (sn, snt share) */
    crl_tensor *emb, *qtv, *qov, *gq;  /* [B*T, H] head input, [B*T, n] values and dLoss/dQ */
    char *state_keys[2], *next_state_keys[2];
    /* With [net.q] encoder = NAME: the conv stack (and its target copy) in front of the recurrent network,
     * each frame to `feat` features under "features", which the recurrent modules read instead of in_key.
     * fo, fot, fn, fnt: the features of the slices and next observations, [B, T, F], one per scratch td;
     * ob2, nob2: [B*T, C*H*W] views of the frames, the f2 views [B*T, F] of the features. */
    crl_mlp *enc, *enc_t;
    int64_t obs_numel;                 /* per step: C*H*W with an encoder, else the recurrent input size */
    crl_tensor *ob2, *nob2, *f2[4];
    crl_tensor *aobs;                  /* acting: the frames as float32 [N, C*H*W] */
} dqn;

static const char *rec_key(const dqn *d) { return d->enc ? "features" : d->no.in_key; }

static void rec_scratch_free(dqn *d)
{
    crl_td *tds[] = { d->so, d->st, d->sn, d->snt };
    crl_tensor *ts[] = { d->emb, d->qtv, d->qov, d->gq };
    for (size_t i = 0; i < 4; i++) {
        crl_td_unref(tds[i]);
        crl_tensor_unref(ts[i]);
    }
    d->so = d->st = d->sn = d->snt = NULL;
    d->emb = d->qtv = d->qov = d->gq = NULL;
    crl_tensor_unref(d->ob2);
    crl_tensor_unref(d->nob2);
    d->ob2 = d->nob2 = NULL;
    for (int i = 0; i < 4; i++) {
        crl_tensor_unref(d->f2[i]);
        d->f2[i] = NULL;
    }
    d->sB = d->sT = 0;
}

static void dqn_destroy(void *st)
{
    dqn *d = st;
    if (!d)
        return;
    rec_scratch_free(d);
    crl_rnn_module *mods[] = { d->r_act, d->r_seq, d->r_onext, d->r_tseq, d->r_tnext };
    for (size_t i = 0; i < 5; i++)
        crl_rnn_module_free(mods[i]);
    crl_rnn_unref(d->rnn);
    crl_rnn_unref(d->rnn_t);
    crl_rnn_unref(d->rnn_o1);
    crl_rnn_unref(d->rnn_t1);
    crl_mlp_unref(d->enc);
    crl_mlp_unref(d->enc_t);
    crl_tensor_unref(d->aobs);
    for (int i = 0; i < 2; i++) {
        g_free(d->state_keys[i]);
        g_free(d->next_state_keys[i]);
    }
    if (!d->user)
        crl_qvalue_actor_free(d->actor);
    crl_tdmodule_free(d->mod);
    crl_mlp_unref(d->q);
    crl_mlp_unref(d->target);
    g_free(d->next_key);
    g_free(d->rew);
    g_free(d->term);
    g_free(d->wt);
    g_free(d->qt);
    g_free(d->qo);
    g_free(d->grad);
    g_free(d->td_err);
    g_free(d->idx);
    g_free(d);
}

/* The recurrent network of a recurrent [net.q], its target copy and their modules; the env must carry the
 * state (a TensorDictPrimer) and is_init (an InitTracker). */
static int rec_init(dqn *d, const crl_opts *opts, const crl_spec *obs_spec, crl_rnn_kind kind, int nd,
                    const int64_t *shape, bool u8, int64_t hidden, crl_rng *rng, crl_error *err)
{
    const char *who = "loss 'dqn'", *kn = crl_rnn_kind_name(kind);
    int rc;
    crl_error e;
    crl_error_clear(&e);
    if ((rc = crl_net_encoder(opts, "q", "encoder", nd, shape, rng, &d->enc, err)))
        return rc;   /* names the [net.*] key's FILE:LINE */
    if (!d->enc && nd != 1)
        return crl_error_set(err, CRL_E_SHAPE, "%s: [net.q] type = %s reads vectors, but observation '%s' has %d dims "
                             "per env: give [net.q] a conv encoder (encoder = NAME and a [net.NAME] type = conv "
                             "section) or flatten it (a FlattenObservation transform)", who, kn, d->no.in_key, nd);
    if (!d->enc && u8)
        return crl_error_set(err, CRL_E_CONFIG, "%s: the observation is uint8 frames but [net.q] has no conv encoder "
                             "(set [net.q] encoder = NAME with a [net.NAME] type = conv section, or convert with "
                             "ToTensorImage)", who);
    if (d->enc && ((u8 && (rc = crl_mlp_set_normalize_images(d->enc, true, err))) ||
                   !(d->enc_t = crl_mlp_clone(d->enc, "encoder_target", &e))))
        return rc ? rc : crl_error_pass(err, &e, CRL_E_NOMEM);
    int64_t in = d->enc ? crl_mlp_out_features(d->enc) : shape[0];
    d->obs_numel = d->enc ? shape[0] * shape[1] * shape[2] : in;
    const char *rk = rec_key(d);
    char *tname = g_strconcat(kn, "_target", NULL);
    bool ok = (d->rnn = crl_rnn_new(kn, kind, in, hidden, rng, &e)) &&
              (d->rnn_t = crl_rnn_clone(d->rnn, tname, &e)) && (d->rnn_o1 = crl_rnn_clone(d->rnn, kn, &e)) &&
              (d->rnn_t1 = crl_rnn_clone(d->rnn, tname, &e)) &&
              (d->r_act = crl_rnn_module_new(d->rnn, rk, "embed", &e)) &&
              (d->r_seq = crl_rnn_module_new(d->rnn, rk, "embed", &e)) &&
              (d->r_onext = crl_rnn_module_new(d->rnn_o1, rk, "embed", &e)) &&
              (d->r_tseq = crl_rnn_module_new(d->rnn_t, rk, "embed", &e)) &&
              (d->r_tnext = crl_rnn_module_new(d->rnn_t1, rk, "embed", &e));
    g_free(tname);
    if (!ok)
        return crl_error_pass(err, &e, CRL_E_NOMEM);
    crl_rnn_module_set_recurrent_mode(d->r_seq, true);
    crl_rnn_module_set_recurrent_mode(d->r_tseq, true);
    for (int i = 0; i < 2 && crl_rnn_module_state_key(d->r_act, i); i++) {
        d->state_keys[i] = g_strdup(crl_rnn_module_state_key(d->r_act, i));
        d->next_state_keys[i] = g_strconcat("next.", d->state_keys[i], NULL);
    }
    return ls_rnn_env_check(obs_spec, d->r_act, who, "q", hidden, err);
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
    bool recurrent = false;
    crl_rnn_kind kind = CRL_RNN_LSTM;
    int64_t hidden = 0;
    if ((rc = crl_net_recurrent(opts, "q", &recurrent, &kind, &hidden, err)) ||
        (recurrent && (rc = rec_init(d, opts, obs_spec, kind, nd, shape, u8, hidden, &rng, err))))
        goto fail;
    if (recurrent) {
        nd = 1;
        shape[0] = hidden;
        u8 = false;   /* the encoder (rec_init) reads the frames; the head reads the recurrent state */
    }
    const char *keys[] = { recurrent ? "embed" : d->no.in_key, NULL };
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

/* The frames under in_key [batch..., C, H, W] (any dtype) through the encoder, into "features"
 * [batch..., F] for the recurrent module. */
static int enc_act(dqn *d, crl_td *td, crl_error *err)
{
    const char *who = "loss 'dqn'";
    crl_tensor *obs = crl_td_get(td, d->no.in_key);
    if (!obs)
        return crl_error_set(err, CRL_E_NOT_FOUND, "%s: the TensorDict has no '%s'", who, d->no.in_key);
    int nd = crl_tensor_ndim(obs);
    int64_t n = crl_tensor_numel(obs), F = crl_mlp_out_features(d->enc), N = n / d->obs_numel;
    if (nd < 3 || N * d->obs_numel != n || N < 1)
        return crl_error_set(err, CRL_E_SHAPE, "%s: '%s' has %lld values, not frames of %lld", who, d->no.in_key,
                             (long long)n, (long long)d->obs_numel);
    crl_error e;
    crl_error_clear(&e);
    if (!d->aobs || crl_tensor_shape(d->aobs)[0] != N) {
        crl_tensor_unref(d->aobs);
        if (!(d->aobs = crl_tensor_new(CRL_F32, 2, (const int64_t[]){ N, d->obs_numel }, &e)))
            return crl_error_pass(err, &e, CRL_E_NOMEM);
    }
    float *o = crl_tensor_data(d->aobs);
    if (crl_tensor_dtype(obs) == CRL_F32 && crl_tensor_is_contiguous(obs))
        memcpy(o, crl_tensor_data(obs), (size_t)n * sizeof *o);
    else
        for (int64_t i = 0; i < n; i++)
            o[i] = (float)crl_tensor_flat_get(obs, i);
    int64_t shape[CRL_MAX_DIMS];
    memcpy(shape, crl_tensor_shape(obs), (size_t)(nd - 3) * sizeof *shape);
    shape[nd - 3] = F;
    crl_tensor *f = crl_tensor_new(CRL_F32, nd - 2, shape, &e),
               *f2 = f ? crl_tensor_view(f, 2, (const int64_t[]){ N, F }, &e) : NULL;
    int rc = f2 ? CRL_OK : crl_error_pass(err, &e, CRL_E_NOMEM);
    if (!rc && !(rc = crl_mlp_infer(d->enc, d->aobs, f2, err)))
        rc = crl_td_set(td, "features", f, err);
    crl_tensor_unref(f2);
    crl_tensor_unref(f);
    return rc ? (crl_error_prefix(err, "%s: ", who), rc) : CRL_OK;
}

static int dqn_act(void *st, crl_td *td, crl_exploration e, crl_rng *rng, crl_error *err)
{
    dqn *d = st;
    int rc;
    /* the recurrent network steps even for a random action: the next state follows every observation */
    if (d->enc && (rc = enc_act(d, td, err)))
        return rc;
    if (d->rnn && (rc = crl_rnn_module_infer(d->r_act, td, err)))
        return crl_error_prefix(err, "loss 'dqn': "), rc;
    if ((rc = crl_qvalue_actor_act(d->actor, td, e, rng, err)) || d->user)
        return rc;
    static const char *const extra[] = { "action_value", "chosen_action_value", "embed", "features", NULL };
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
    dqn *d = st;
    return d->enc ? 3 : d->rnn ? 2 : 1;
}

static int dqn_param(void *st, size_t i, const char **name, crl_tensor **p, crl_tensor **g, crl_error *err)
{
    dqn *d = st;
    if (i >= dqn_num_params(d))
        return crl_error_set(err, CRL_E_RANGE, "loss 'dqn': no parameter vector %zu (it has %zu)", i,
                             dqn_num_params(d));
    if (i == 2) {
        *name = "encoder";
        *p = crl_mlp_params_get(d->enc);
        *g = crl_mlp_grads_get(d->enc);
        return CRL_OK;
    }
    if (i == 1) {
        *name = crl_rnn_kind_name(crl_rnn_kind_get(d->rnn));
        *p = crl_rnn_params_get(d->rnn);
        *g = crl_rnn_grads_get(d->rnn);
        return CRL_OK;
    }
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

/* The (double) DQN targets of rows steps, the loss, dLoss/dQ into d->grad and |TD error| into d->td_err.
 * q: Q(s, .) of the online network; qt, qo: Q(s', .) of the target and (double DQN) online networks. */
static int objective(dqn *d, int64_t rows, const float *q, const float *qt_all, const float *qo_all,
                     const float *reward, const float *term, const float *weight, double *loss_out, crl_error *err)
{
    int64_t n = d->n;
    double loss = 0, wsum = 0;
    memset(d->grad, 0, (size_t)(rows * n) * sizeof(float));
    for (int64_t r = 0; r < rows; r++) {
        int64_t a = d->idx[r];
        const float *qt = qt_all + r * n;
        int64_t best = 0;
        const float *pick = d->double_dqn ? qo_all + r * n : qt;
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
    if (!isfinite(loss))
        return crl_error_set(err, CRL_E_RUNTIME, "loss 'dqn': the loss is not finite (%g): the Q-values diverged; "
                             "lower the learning rate or clip gradients ([optim] max_grad_norm)", loss);
    *loss_out = loss;
    return CRL_OK;
}

static void reserve_rows(dqn *d, int64_t rows)
{
    if (rows <= d->cap)
        return;
    d->qt = g_renew(float, d->qt, rows * d->n);
    d->qo = g_renew(float, d->qo, rows * d->n);
    d->grad = g_renew(float, d->grad, rows * d->n);
    d->td_err = g_renew(float, d->td_err, rows);
    d->idx = g_renew(int64_t, d->idx, rows);
    d->rew = g_renew(float, d->rew, rows);
    d->term = g_renew(float, d->term, rows);
    d->wt = g_renew(float, d->wt, rows);
    d->cap = rows;
}

/* ---- recurrent DQN ------------------------------------------------------------------------------ */

static crl_tensor *new_f32(int nd, const int64_t *shape, crl_error *err)
{
    crl_error e;
    crl_error_clear(&e);
    crl_tensor *t = crl_tensor_new(CRL_F32, nd, shape, &e);
    if (!t)
        crl_error_pass(err, &e, CRL_E_NOMEM);
    return t;
}

/* Set a fresh float32 [B, T, extra...] tensor under key in each of the tds (one tensor shared by them). */
static int scratch_key(crl_td *a, crl_td *b, const char *key, int n_extra, const int64_t *extra, crl_error *err)
{
    int64_t shape[CRL_MAX_DIMS];
    memcpy(shape, crl_td_batch_shape(a), 2 * sizeof *shape);
    memcpy(shape + 2, extra, (size_t)n_extra * sizeof *shape);
    crl_tensor *t = new_f32(2 + n_extra, shape, err);
    if (!t)
        return CRL_E_NOMEM;
    int rc = crl_td_set(a, key, t, err);
    if (!rc && b)
        rc = crl_td_set(b, key, t, err);
    crl_tensor_unref(t);
    return rc;
}

/* The scratch of one [B, T] batch shape (kept while the shape stays). */
static int rec_scratch(dqn *d, int64_t B, int64_t T, crl_error *err)
{
    if (d->sB == B && d->sT == T)
        return CRL_OK;
    rec_scratch_free(d);
    crl_error e;
    crl_error_clear(&e);
    int64_t bt[2] = { B, T }, rows = B * T, F = crl_rnn_input_size(d->rnn), H = crl_rnn_hidden_size(d->rnn),
            O = d->obs_numel;
    int64_t one_h[2] = { 1, H }, one = 1;
    if (!(d->so = crl_td_new(2, bt, &e)) || !(d->st = crl_td_new(2, bt, &e)) || !(d->sn = crl_td_new(2, bt, &e)) ||
        !(d->snt = crl_td_new(2, bt, &e)))
        return rec_scratch_free(d), crl_error_pass(err, &e, CRL_E_NOMEM);
    int rc;
    if ((rc = scratch_key(d->so, d->st, d->no.in_key, 1, &O, err)) ||
        (rc = scratch_key(d->so, d->st, "is_init", 1, &one, err)) ||
        (rc = scratch_key(d->sn, d->snt, d->no.in_key, 1, &O, err)))
        return rec_scratch_free(d), rc;
    if (d->enc) {
        crl_td *tds[4] = { d->so, d->st, d->sn, d->snt };
        int64_t r2f[2] = { rows, F }, r2o[2] = { rows, O };
        for (int i = 0; i < 4; i++)
            if ((rc = scratch_key(tds[i], NULL, "features", 1, &F, err)) ||
                !(d->f2[i] = crl_tensor_view(crl_td_get(tds[i], "features"), 2, r2f, &e)))
                return rec_scratch_free(d), rc ? rc : crl_error_pass(err, &e, CRL_E_NOMEM);
        if (!(d->ob2 = crl_tensor_view(crl_td_get(d->so, d->no.in_key), 2, r2o, &e)) ||
            !(d->nob2 = crl_tensor_view(crl_td_get(d->sn, d->no.in_key), 2, r2o, &e)))
            return rec_scratch_free(d), crl_error_pass(err, &e, CRL_E_NOMEM);
    }
    for (int i = 0; i < 2 && d->state_keys[i]; i++)
        if ((rc = scratch_key(d->so, d->st, d->state_keys[i], 2, one_h, err)) ||
            (rc = scratch_key(d->sn, NULL, d->state_keys[i], 2, one_h, err)) ||
            (rc = scratch_key(d->snt, NULL, d->state_keys[i], 2, one_h, err)))
            return rec_scratch_free(d), rc;
    if (!(d->emb = new_f32(2, (const int64_t[]){ rows, H }, err)) ||
        !(d->qtv = new_f32(2, (const int64_t[]){ rows, d->n }, err)) ||
        !(d->qov = new_f32(2, (const int64_t[]){ rows, d->n }, err)) ||
        !(d->gq = new_f32(2, (const int64_t[]){ rows, d->n }, err)))
        return rec_scratch_free(d), CRL_E_NOMEM;
    d->sB = B;
    d->sT = T;
    return CRL_OK;
}

/* Copy the batch's `key` (numel values of any dtype) into td's float32 scratch entry. */
static int take(const char *who, crl_td *batch, const char *key, crl_td *td, const char *to, crl_error *err)
{
    const crl_tensor *src = crl_td_get(batch, key);
    crl_tensor *dst = crl_td_get(td, to);
    if (!src)
        return crl_error_set(err, CRL_E_NOT_FOUND, "%s: the batch has no '%s'%s", who, key,
                             strstr(key, "recurrent_state") ? " (the recurrent state stored with each step: a "
                             "TensorDictPrimer in [env] transforms)" : !strcmp(key, "is_init") ? " (an InitTracker "
                             "in [env] transforms)" : "");
    int64_t n = crl_tensor_numel(dst);
    if (crl_tensor_numel(src) != n)
        return crl_error_set(err, CRL_E_SHAPE, "%s: '%s' holds %lld values, expected %lld for the [%lld, %lld] "
                             "slices", who, key, (long long)crl_tensor_numel(src), (long long)n,
                             (long long)crl_td_batch_shape(td)[0], (long long)crl_td_batch_shape(td)[1]);
    float *o = crl_tensor_data(dst);
    if (crl_tensor_dtype(src) == CRL_F32 && crl_tensor_is_contiguous(src))
        memcpy(o, crl_tensor_data(src), (size_t)n * sizeof *o);
    else
        for (int64_t i = 0; i < n; i++)
            o[i] = (float)crl_tensor_flat_get(src, i);
    return CRL_OK;
}

/* The batch's `key`, one value per row of any dtype, into dst[rows] (no allocation). */
static int rows_into(crl_td *batch, const char *key, int64_t rows, const char *who, float *dst, crl_error *err)
{
    const crl_tensor *t = crl_td_get(batch, key);
    if (!t)
        return crl_error_set(err, CRL_E_NOT_FOUND, "%s: the batch has no '%s'", who, key);
    if (crl_tensor_numel(t) != rows)
        return crl_error_set(err, CRL_E_SHAPE, "%s: '%s' holds %lld values, expected %lld (one per step)", who, key,
                             (long long)crl_tensor_numel(t), (long long)rows);
    for (int64_t i = 0; i < rows; i++)
        dst[i] = (float)crl_tensor_flat_get(t, i);
    return CRL_OK;
}

/* The head's input: what module wrote under "embed" in td, as [B*T, H]. */
static int embed_of(dqn *d, crl_td *td, crl_error *err)
{
    const crl_tensor *e = crl_td_get(td, "embed");
    if (!e || crl_tensor_numel(e) != crl_tensor_numel(d->emb) || crl_tensor_dtype(e) != CRL_F32 ||
        !crl_tensor_is_contiguous(e))
        return crl_error_set(err, CRL_E_RUNTIME, "loss 'dqn': the recurrent module wrote no 'embed' of [%lld, %lld]",
                             (long long)crl_tensor_shape(d->emb)[0], (long long)crl_tensor_shape(d->emb)[1]);
    memcpy(crl_tensor_data(d->emb), crl_tensor_data(e), crl_tensor_nbytes(d->emb));
    return CRL_OK;
}

/* Q(s', .) of net one step on from the states after each step (written under next.<state> in from). */
static int rec_next_values(dqn *d, crl_rnn_module *m, crl_mlp *net, crl_td *from, crl_td *td, crl_tensor *out,
                           crl_error *err)
{
    int rc = CRL_OK;
    for (int i = 0; !rc && i < 2 && d->state_keys[i]; i++)
        rc = take("loss 'dqn'", from, d->next_state_keys[i], td, d->state_keys[i], err);
    if (rc || (rc = crl_rnn_module_infer(m, td, err)) || (rc = embed_of(d, td, err)))
        return rc;
    return crl_mlp_infer(net, d->emb, out, err);
}

static int rec_forward(dqn *d, crl_td *batch, crl_td *losses, crl_error *err)
{
    const char *who = "loss 'dqn'";
    if (crl_td_batch_ndim(batch) != 2)
        return crl_error_set(err, CRL_E_CONFIG, "%s: a recurrent [net.q] learns from slices of consecutive steps, "
                             "[slices, steps], and this batch has %d batch dims: set [train] sequence_length and "
                             "[replay] sampler = slice with slice_len = sequence_length", who,
                             crl_td_batch_ndim(batch));
    int64_t B = crl_td_batch_shape(batch)[0], T = crl_td_batch_shape(batch)[1], rows = B * T;
    bool weighted = crl_td_get(batch, "_weight") != NULL;
    const char *term_key = crl_td_get(batch, "next.terminated") || !crl_td_get(batch, "next.done")
                           ? "next.terminated" : "next.done";
    int rc;
    reserve_rows(d, rows);
    if ((rc = rec_scratch(d, B, T, err)) || (rc = rows_into(batch, "next.reward", rows, who, d->rew, err)) ||
        (rc = rows_into(batch, term_key, rows, who, d->term, err)) ||
        (weighted && (rc = rows_into(batch, "_weight", rows, who, d->wt, err))) ||
        (rc = ls_action_index(batch, rows, d->n, who, d->idx, err)) ||
        (rc = take(who, batch, d->no.in_key, d->so, d->no.in_key, err)) ||
        (rc = take(who, batch, d->next_key, d->sn, d->no.in_key, err)) ||
        (rc = take(who, batch, "is_init", d->so, "is_init", err)))
        return rc;
    for (int i = 0; i < 2 && d->state_keys[i]; i++)
        if ((rc = take(who, batch, d->state_keys[i], d->so, d->state_keys[i], err)))
            return rc;
    crl_tensor *from[2] = { crl_rnn_params_get(d->rnn), crl_rnn_params_get(d->rnn_t) },
               *to[2] = { crl_rnn_params_get(d->rnn_o1), crl_rnn_params_get(d->rnn_t1) };
    for (int i = 0; i < 2; i++)
        memcpy(crl_tensor_data(to[i]), crl_tensor_data(from[i]), crl_tensor_nbytes(to[i]));
    /* The frames through the conv encoders first: the online one with its cache (backward follows), the
     * target one for the target's passes, the online one again (no cache) for double DQN's choice. */
    if (d->enc) {
        const crl_tensor *fe = crl_mlp_forward(d->enc, d->ob2, err);
        if (!fe)
            return CRL_E_INVALID;
        memcpy(crl_tensor_data(d->f2[0]), crl_tensor_data(fe), crl_tensor_nbytes(d->f2[0]));
        if ((rc = crl_mlp_infer(d->enc_t, d->ob2, d->f2[1], err)) ||
            (rc = crl_mlp_infer(d->enc_t, d->nob2, d->f2[3], err)) ||
            (d->double_dqn && (rc = crl_mlp_infer(d->enc, d->nob2, d->f2[2], err))))
            return rc;
    }
    /* Online over the slices (with the cache), the target over the same steps from the same stored states;
     * then the next observations from the states after each step. */
    if ((rc = crl_rnn_module_forward(d->r_seq, d->so, err)) || (rc = crl_rnn_module_infer(d->r_tseq, d->st, err)) ||
        (rc = rec_next_values(d, d->r_tnext, d->target, d->st, d->snt, d->qtv, err)) ||
        (d->double_dqn && (rc = rec_next_values(d, d->r_onext, d->q, d->so, d->sn, d->qov, err))) ||
        (rc = embed_of(d, d->so, err)))
        return rc;
    const crl_tensor *qv = crl_mlp_forward(d->q, d->emb, err);
    double loss;
    if (!qv)
        return CRL_E_INVALID;
    if ((rc = objective(d, rows, crl_tensor_data(qv), crl_tensor_data(d->qtv), crl_tensor_data(d->qov), d->rew,
                        d->term, weighted ? d->wt : NULL, &loss, err)))
        return rc;
    memcpy(crl_tensor_data(d->gq), d->grad, (size_t)(rows * d->n) * sizeof(float));
    crl_tensor *gin = NULL, *gx = NULL;
    if ((rc = crl_mlp_backward(d->q, d->gq, &gin, err)) ||
        (rc = crl_rnn_module_backward(d->r_seq, gin, d->enc ? &gx : NULL, err)))
        return rc;
    if (d->enc) {
        /* the recurrent network's input gradient [B, T, F] into the conv stack's parameters */
        crl_error e;
        crl_error_clear(&e);
        crl_tensor *g2 = crl_tensor_view(gx, 2, (const int64_t[]){ rows, crl_mlp_out_features(d->enc) }, &e);
        if (!g2)
            return crl_error_pass(err, &e, CRL_E_SHAPE);
        rc = crl_mlp_backward(d->enc, g2, NULL, err);
        crl_tensor_unref(g2);
        if (rc)
            return rc;
    }
    if ((rc = ls_put_rows(batch, "td_error", d->td_err, err)))
        return rc;
    return ls_put_scalar(losses, "loss", loss, err);
}

static int dqn_forward(void *st, crl_td *batch, crl_td *losses, crl_error *err)
{
    const char *who = "loss 'dqn'";
    dqn *d = st;
    if (d->rnn)
        return rec_forward(d, batch, losses, err);
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
    reserve_rows(d, rows);
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
    double loss;
    if ((rc = objective(d, rows, q, d->qt, d->qo, reward, term, weight, &loss, err)))
        goto out;
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
    crl_tensor *tp[3] = { crl_mlp_params_get(d->target), d->rnn ? crl_rnn_params_get(d->rnn_t) : NULL,
                          d->enc ? crl_mlp_params_get(d->enc_t) : NULL };
    crl_tensor *op[3] = { crl_mlp_params_get(d->q), d->rnn ? crl_rnn_params_get(d->rnn) : NULL,
                          d->enc ? crl_mlp_params_get(d->enc) : NULL };
    int rc = CRL_OK;
    bool hard = d->tau <= 0 && (int64_t)d->counters[0] % d->hard_interval == 0;
    for (int i = 0; !rc && i < 3 && tp[i]; i++)
        if (d->tau > 0)
            rc = crl_params_soft_update(tp[i], op[i], d->tau, err);
        else if (hard)
            rc = crl_params_hard_update(tp[i], op[i], err);
    return rc;
}

static int dqn_save(void *st, crl_ckpt_writer *w, const char *prefix, crl_error *err)
{
    dqn *d = st;
    double c[4] = { d->counters[0], d->counters[1], d->counters[2], d->explore_frames_per_call };
    int rc;
    char sec[2][CRL_CKPT_NAME_MAX + 1];
    snprintf(sec[0], sizeof sec[0], "%s/rnn", prefix);
    snprintf(sec[1], sizeof sec[1], "%s/rnn_target", prefix);
    if ((rc = ls_mlp_save(d->q, w, prefix, "qvalue", err)) ||
        (rc = ls_mlp_save(d->target, w, prefix, "qvalue_target", err)) ||
        (d->rnn && ((rc = crl_rnn_save(d->rnn, w, sec[0], err)) || (rc = crl_rnn_save(d->rnn_t, w, sec[1], err)))) ||
        (d->enc && ((rc = ls_mlp_save(d->enc, w, prefix, "encoder", err)) ||
                    (rc = ls_mlp_save(d->enc_t, w, prefix, "encoder_target", err)))))
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
    crl_rnn *rn = d->rnn && t ? crl_rnn_clone(d->rnn, NULL, &e) : NULL,
            *rt = rn ? crl_rnn_clone(d->rnn_t, NULL, &e) : NULL;
    crl_mlp *en = d->enc && (!d->rnn || rt) ? crl_mlp_clone(d->enc, "encoder", &e) : NULL,
            *et = en ? crl_mlp_clone(d->enc_t, "encoder_target", &e) : NULL;
    rc = (!q || !t || (d->rnn && !rt) || (d->enc && !et)) ? crl_error_pass(err, &e, CRL_E_NOMEM) : CRL_OK;
    char sec[2][CRL_CKPT_NAME_MAX + 1];
    snprintf(sec[0], sizeof sec[0], "%s/rnn", prefix);
    snprintf(sec[1], sizeof sec[1], "%s/rnn_target", prefix);
    if (!rc && !(rc = ls_mlp_load(q, r, prefix, "qvalue", err)))
        rc = ls_mlp_load(t, r, prefix, "qvalue_target", err);
    if (!rc && rt && !(rc = crl_rnn_load(rn, r, sec[0], err)))
        rc = crl_rnn_load(rt, r, sec[1], err);
    if (!rc && et && !(rc = ls_mlp_load(en, r, prefix, "encoder", err)))
        rc = ls_mlp_load(et, r, prefix, "encoder_target", err);
    if (!rc && et) {
        crl_tensor_copy(crl_mlp_params_get(d->enc), crl_mlp_params_get(en), NULL);
        crl_tensor_copy(crl_mlp_params_get(d->enc_t), crl_mlp_params_get(et), NULL);
    }
    crl_mlp_unref(en);
    crl_mlp_unref(et);
    if (!rc && rt) {
        crl_tensor_copy(crl_rnn_params_get(d->rnn), crl_rnn_params_get(rn), NULL);
        crl_tensor_copy(crl_rnn_params_get(d->rnn_t), crl_rnn_params_get(rt), NULL);
    }
    crl_rnn_unref(rn);
    crl_rnn_unref(rt);
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
