/* plugins/losses: off-policy actor-critic losses for continuous actions (TorchRL's DDPGLoss,
 * TD3Loss, SACLoss with a learned entropy coefficient), with target networks. */
#include "config.h"
#include "losses.h"

#include <glib.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#define AC_COMMON_OPTIONS                                                                                    \
    { "in_key", CRL_OPT_STRING, 0, "observation", 0, 0, NULL, "observation key the networks read" },          \
    { "num_cells", CRL_OPT_DOUBLES, CRL_OPT_RANGE, "256, 256", 0, 8, NULL,                                  \
      "hidden layer widths of the actor and of each critic" },                                               \
    { "activation", CRL_OPT_ENUM, 0, "relu", 0, 0, "tanh|relu|elu|leaky_relu", "hidden activation" },      \
    { "gamma", CRL_OPT_DOUBLE, CRL_OPT_RANGE, "0.99", 0, 1, NULL, "discount" },                            \
    { "tau", CRL_OPT_DOUBLE, CRL_OPT_RANGE, "0.005", 0, 1, NULL, "soft target update per optimizer step" }

#define NOISE_OPTIONS                                                                                        \
    { "sigma", CRL_OPT_DOUBLE, CRL_OPT_RANGE, "0.1", 0, 1e6, NULL,                                         \
      "exploration: std of the Gaussian noise added to the action (in action units)" },                    \
    { "sigma_end", CRL_OPT_DOUBLE, CRL_OPT_RANGE, NULL, 0, 1e6, NULL,                                       \
      "exploration: final sigma (unset: sigma throughout)" },                                              \
    { "annealing_num_steps", CRL_OPT_INT, CRL_OPT_RANGE, "1000000", 1, 1e15, NULL,                         \
      "exploration: frames over which sigma goes to sigma_end" }

const crl_option ls_ddpg_options[] = {
    AC_COMMON_OPTIONS,
    NOISE_OPTIONS,
    CRL_OPTIONS_END
};

const crl_option ls_td3_options[] = {
    AC_COMMON_OPTIONS,
    NOISE_OPTIONS,
    { "policy_delay", CRL_OPT_INT, CRL_OPT_RANGE, "2", 1, 1e6, NULL,
      "optimizer steps between actor (and target) updates" },
    { "policy_noise", CRL_OPT_DOUBLE, CRL_OPT_RANGE, "0.2", 0, 1e6, NULL,
      "target policy smoothing: std of the noise on the target action (x half the action range)" },
    { "noise_clip", CRL_OPT_DOUBLE, CRL_OPT_RANGE, "0.5", 0, 1e6, NULL, "target policy smoothing: clip of that noise" },
    CRL_OPTIONS_END
};

const crl_option ls_sac_options[] = {
    AC_COMMON_OPTIONS,
    { "alpha_init", CRL_OPT_DOUBLE, CRL_OPT_RANGE, "1.0", 1e-12, 1e6, NULL, "initial entropy coefficient" },
    { "fixed_alpha", CRL_OPT_BOOL, 0, "false", 0, 0, NULL, "keep alpha at alpha_init (no loss_alpha)" },
    { "target_entropy", CRL_OPT_DOUBLE, 0, NULL, 0, 0, NULL, "target entropy (unset: -action dims)" },
    CRL_OPTIONS_END
};

typedef enum { AC_DDPG, AC_TD3, AC_SAC } ac_mode;

typedef struct ac {
    ac_mode mode;
    const char *who;
    ls_net_opts no;
    double gamma, tau, policy_noise, noise_clip, target_entropy;
    int64_t delay, o, d;
    bool fixed_alpha;
    int nq;                          /* critics: 1 (DDPG) or 2 */
    double *low, *high;              /* [d] action bounds (+-inf when unbounded) */
    crl_mlp *actor_net, *actor_target_net, *q[2], *qt[2];
    crl_det_actor *det, *det_target;
    crl_prob_actor *prob;
    crl_tensor *log_alpha, *log_alpha_grad;   /* [1] */
    uint64_t seed;
    double steps;                    /* optimizer steps (update calls) */
    double explore[3];               /* frames, calls, frames per call */
    double sigma[3];                 /* exploration noise: init, end, annealing frames */
    char *next_key;
    bool user;                       /* the actor and critic are the user's (create_from_modules) */
    float *x, *x2, *ga, *y, *td_err, *gsave, *pred;
    double pred_mean, actor_q, next_v;   /* TD3Loss's outputs of the last forward: batch means */
    int64_t cap, gsave_cap;
} ac;

static void ac_destroy(void *st)
{
    ac *a = st;
    if (!a)
        return;
    if (!a->user) {
        crl_det_actor_free(a->det);
        crl_prob_actor_free(a->prob);
    }
    crl_det_actor_free(a->det_target);
    crl_mlp_unref(a->actor_net);
    crl_mlp_unref(a->actor_target_net);
    for (int i = 0; i < 2; i++) {
        crl_mlp_unref(a->q[i]);
        crl_mlp_unref(a->qt[i]);
    }
    crl_tensor_unref(a->log_alpha);
    crl_tensor_unref(a->log_alpha_grad);
    g_free(a->low);
    g_free(a->high);
    g_free(a->next_key);
    g_free(a->x);
    g_free(a->x2);
    g_free(a->ga);
    g_free(a->y);
    g_free(a->td_err);
    g_free(a->gsave);
    g_free(a->pred);
    g_free(a);
}

static int read_noise(ac *a, const crl_opts *opts, crl_error *err)
{
    double sigma, sigma_end;
    int64_t steps;
    int rc;
    if ((rc = crl_opts_double(opts, "sigma", &sigma, err)) ||
        (rc = crl_opts_int(opts, "annealing_num_steps", &steps, err)))
        return rc;
    sigma_end = sigma;
    if (crl_opts_is_set(opts, "sigma_end") && (rc = crl_opts_double(opts, "sigma_end", &sigma_end, err)))
        return rc;
    a->sigma[0] = sigma;
    a->sigma[1] = sigma_end;
    a->sigma[2] = (double)steps;
    return crl_det_actor_set_gaussian(a->det, sigma, sigma_end, steps, 0, 1, err);
}

static int ac_create(ac_mode mode, const crl_opts *opts, const crl_spec *obs_spec, const crl_spec *action_spec,
                     uint64_t seed, void **st, crl_error *err)
{
    static const char *const names[] = { "loss 'ddpg'", "loss 'td3'", "loss 'sac'" };
    ac *a = g_new0(ac, 1);
    a->mode = mode;
    a->who = names[mode];
    a->seed = seed;
    a->nq = mode == AC_DDPG ? 1 : 2;
    a->delay = 1;
    int rc;
    crl_error e;   /* for the calls that return NULL on failure */
    crl_error_clear(&e);
    if ((rc = ls_net_opts_read(opts, a->who, &a->no, err)) || (rc = crl_opts_double(opts, "gamma", &a->gamma, err)) ||
        (rc = crl_opts_double(opts, "tau", &a->tau, err)) ||
        (rc = ls_obs_features(obs_spec, a->no.in_key, a->who, &a->o, err)))
        goto fail;
    if (mode == AC_TD3 && ((rc = crl_opts_int(opts, "policy_delay", &a->delay, err)) ||
                           (rc = crl_opts_double(opts, "policy_noise", &a->policy_noise, err)) ||
                           (rc = crl_opts_double(opts, "noise_clip", &a->noise_clip, err))))
        goto fail;
    const crl_spec *act = ls_action_leaf(action_spec, a->who, &e);
    if (!act)
        goto fail;
    crl_spec_kind k = crl_spec_get_kind(act);
    if (k != CRL_SPEC_BOUNDED && k != CRL_SPEC_UNBOUNDED) {
        rc = crl_error_set(err, CRL_E_INVALID, "%s: needs a continuous action (Bounded or Unbounded), the env's is "
                           "%s; use dqn or ppo for discrete actions", a->who, crl_spec_kind_name(k));
        goto fail;
    }
    a->d = crl_spec_shape(act)[crl_spec_ndim(act) - 1];
    a->low = g_new(double, a->d);
    a->high = g_new(double, a->d);
    for (int64_t j = 0; j < a->d; j++) {
        a->low[j] = k == CRL_SPEC_BOUNDED ? crl_tensor_flat_get(crl_spec_low(act), j) : -INFINITY;
        a->high[j] = k == CRL_SPEC_BOUNDED ? crl_tensor_flat_get(crl_spec_high(act), j) : INFINITY;
    }
    crl_rng rng;
    crl_rng_init(&rng, seed, 0);
    const char *keys[] = { a->no.in_key, NULL };
    a->next_key = g_strconcat("next.", a->no.in_key, NULL);
    int64_t out = mode == AC_SAC ? 2 * a->d : a->d;
    if (!(a->actor_net = ls_mlp(opts, "actor", "actor", a->o, out, &a->no, &rng, &e)))
        goto fail;
    for (int i = 0; i < a->nq; i++) {
        char name[16];
        snprintf(name, sizeof name, "qvalue%d", i);
        if (!(a->q[i] = ls_mlp(opts, "q", name, a->o + a->d, 1, &a->no, &rng, &e)))
            goto fail;
        snprintf(name, sizeof name, "qvalue%d_target", i);
        if (!(a->qt[i] = crl_mlp_clone(a->q[i], name, &e)))
            goto fail;
    }
    if (mode == AC_SAC) {
        double alpha;
        if (!(a->prob = crl_prob_actor_new(a->actor_net, keys, CRL_DIST_TANH_NORMAL, act, &e)) ||
            (rc = crl_opts_double(opts, "alpha_init", &alpha, err)) ||
            (rc = crl_opts_bool(opts, "fixed_alpha", &a->fixed_alpha, err)))
            goto fail;
        a->target_entropy = -(double)a->d;
        if (crl_opts_is_set(opts, "target_entropy") &&
            (rc = crl_opts_double(opts, "target_entropy", &a->target_entropy, err)))
            goto fail;
        int64_t one = 1;
        if (!(a->log_alpha = crl_tensor_new(CRL_F32, 1, &one, &e)) ||
            !(a->log_alpha_grad = crl_tensor_new(CRL_F32, 1, &one, &e)))
            goto fail;
        crl_tensor_flat_set(a->log_alpha, 0, log(alpha));
    } else {
        if (!(a->actor_target_net = crl_mlp_clone(a->actor_net, "actor_target", &e)) ||
            !(a->det = crl_det_actor_new(a->actor_net, keys, act, &e)) ||
            !(a->det_target = crl_det_actor_new(a->actor_target_net, keys, act, &e)) || (rc = read_noise(a, opts, err)))
            goto fail;
    }
    *st = a;
    return CRL_OK;
fail:
    ac_destroy(a);
    return rc ? rc : crl_error_pass(err, &e, CRL_E_INVALID);
}

static int ddpg_create(const crl_opts *o, const crl_spec *obs, const crl_spec *act, uint64_t seed, void **st,
                       crl_error *err)
{
    return ac_create(AC_DDPG, o, obs, act, seed, st, err);
}
static int td3_create(const crl_opts *o, const crl_spec *obs, const crl_spec *act, uint64_t seed, void **st,
                      crl_error *err)
{
    return ac_create(AC_TD3, o, obs, act, seed, st, err);
}
static int sac_create(const crl_opts *o, const crl_spec *obs, const crl_spec *act, uint64_t seed, void **st,
                      crl_error *err)
{
    return ac_create(AC_SAC, o, obs, act, seed, st, err);
}

/* create_from_modules: the user's actor and Q(s, a) network; targets (and the second critic) are copies. */
static int ac_create_modules(ac_mode mode, const crl_opts *opts, const crl_loss_modules *m, uint64_t seed, void **st,
                             crl_error *err)
{
    static const char *const names[] = { "loss 'ddpg'", "loss 'td3'", "loss 'sac'" };
    static const char *const refused[] = { "in_key", "num_cells", "activation", "sigma", "sigma_end",
                                           "annealing_num_steps", NULL };
    const char *who = names[mode];
    bool sac = mode == AC_SAC;
    if (sac ? !m->prob_actor || !m->value : !m->det_actor || !m->value)
        return crl_error_set(err, CRL_E_INVALID, "%s: give %s and value (Q(s, a): a crl_tdmodule reading the "
                             "actor's observation key and \"action\")", who,
                             sac ? "prob_actor (a TanhNormal crl_prob_actor)" : "det_actor (a crl_det_actor)");
    if (sac && crl_prob_actor_kind(m->prob_actor) != CRL_DIST_TANH_NORMAL)
        return crl_error_set(err, CRL_E_INVALID, "%s: prob_actor is a Categorical; SAC needs a TanhNormal actor (use "
                             "discrete_sac for discrete actions)", who);
    ac *a = g_new0(ac, 1);
    a->mode = mode;
    a->who = who;
    a->seed = seed;
    a->user = true;
    a->nq = mode == AC_DDPG ? 1 : 2;
    a->delay = 1;
    a->det = m->det_actor;
    a->prob = m->prob_actor;
    int rc;
    const char *key;
    crl_error e;
    crl_error_clear(&e);
    crl_tdmodule *am = sac ? crl_prob_actor_module_get(a->prob) : crl_det_actor_module_get(a->det);
    crl_mlp *anet = crl_tdmodule_net_get(am), *qnet = crl_tdmodule_net_get(m->value);
    if ((rc = ls_reject_set(opts, who, refused, err)) || (rc = crl_opts_double(opts, "gamma", &a->gamma, err)) ||
        (rc = crl_opts_double(opts, "tau", &a->tau, err)) || (rc = ls_module_key(am, who, "actor", &key, err)))
        goto fail;
    if (mode == AC_TD3 && ((rc = crl_opts_int(opts, "policy_delay", &a->delay, err)) ||
                           (rc = crl_opts_double(opts, "policy_noise", &a->policy_noise, err)) ||
                           (rc = crl_opts_double(opts, "noise_clip", &a->noise_clip, err))))
        goto fail;
    snprintf(a->no.in_key, sizeof a->no.in_key, "%s", key);
    a->o = crl_mlp_in_features(anet);
    const float *low = NULL, *high = NULL;
    a->d = sac ? crl_mlp_out_features(anet) / 2 : crl_det_actor_bounds(a->det, &low, &high);
    size_t nk = crl_tdmodule_num_in_keys(m->value);
    if (nk != 2 || strcmp(crl_tdmodule_in_key(m->value, 0), key) || strcmp(crl_tdmodule_in_key(m->value, 1), "action")) {
        rc = crl_error_set(err, CRL_E_INVALID, "%s: the value module '%s' reads %zu key%s ('%s'%s%s%s); it must read "
                           "the actor's '%s', then 'action'", who, crl_mlp_name(qnet), nk, nk == 1 ? "" : "s",
                           crl_tdmodule_in_key(m->value, 0), nk > 1 ? ", '" : "",
                           nk > 1 ? crl_tdmodule_in_key(m->value, 1) : "", nk > 1 ? "'" : "", key);
        goto fail;
    }
    if (crl_mlp_in_features(qnet) != a->o + a->d || crl_mlp_out_features(qnet) != 1) {
        rc = crl_error_set(err, CRL_E_SHAPE, "%s: the value module '%s' maps %lld features to %lld; Q(s, a) here maps "
                           "%lld (observation %lld + action %lld) to 1", who, crl_mlp_name(qnet),
                           (long long)crl_mlp_in_features(qnet), (long long)crl_mlp_out_features(qnet),
                           (long long)(a->o + a->d), (long long)a->o, (long long)a->d);
        goto fail;
    }
    a->low = g_new(double, a->d);
    a->high = g_new(double, a->d);
    for (int64_t j = 0; j < a->d; j++) {
        a->low[j] = low ? low[j] : -INFINITY;
        a->high[j] = high ? high[j] : INFINITY;
    }
    a->next_key = g_strconcat("next.", key, NULL);
    a->actor_net = crl_mlp_ref(anet);
    a->q[0] = crl_mlp_ref(qnet);
    crl_rng rng;
    crl_rng_init(&rng, seed, 0);
    if (!(a->qt[0] = crl_mlp_clone(a->q[0], "qvalue0_target", &e)))
        goto fail;
    if (a->nq == 2 && (!(a->q[1] = crl_mlp_clone(a->q[0], "qvalue1", &e)) ||
                       (rc = crl_mlp_init(a->q[1], CRL_INIT_DEFAULT, 1, 1, &rng, err)) ||
                       !(a->qt[1] = crl_mlp_clone(a->q[1], "qvalue1_target", &e))))
        goto fail;
    if (sac) {
        double alpha;
        int64_t one = 1;
        if ((rc = crl_opts_double(opts, "alpha_init", &alpha, err)) ||
            (rc = crl_opts_bool(opts, "fixed_alpha", &a->fixed_alpha, err)))
            goto fail;
        a->target_entropy = -(double)a->d;
        if (crl_opts_is_set(opts, "target_entropy") &&
            (rc = crl_opts_double(opts, "target_entropy", &a->target_entropy, err)))
            goto fail;
        if (!(a->log_alpha = crl_tensor_new(CRL_F32, 1, &one, &e)) ||
            !(a->log_alpha_grad = crl_tensor_new(CRL_F32, 1, &one, &e)))
            goto fail;
        crl_tensor_flat_set(a->log_alpha, 0, log(alpha));
    } else if (!(a->actor_target_net = crl_mlp_clone(a->actor_net, "actor_target", &e)) ||
               !(a->det_target = crl_det_actor_copy_new(a->det, a->actor_target_net, &e))) {
        goto fail;
    }
    *st = a;
    return CRL_OK;
fail:
    ac_destroy(a);
    return rc ? rc : crl_error_pass(err, &e, CRL_E_INVALID);
}

static int ddpg_create_modules(const crl_opts *o, const crl_loss_modules *m, uint64_t seed, void **st, crl_error *err)
{
    return ac_create_modules(AC_DDPG, o, m, seed, st, err);
}
static int td3_create_modules(const crl_opts *o, const crl_loss_modules *m, uint64_t seed, void **st, crl_error *err)
{
    return ac_create_modules(AC_TD3, o, m, seed, st, err);
}
static int sac_create_modules(const crl_opts *o, const crl_loss_modules *m, uint64_t seed, void **st, crl_error *err)
{
    return ac_create_modules(AC_SAC, o, m, seed, st, err);
}

static int ac_act(void *st, crl_td *td, crl_exploration e, crl_rng *rng, crl_error *err)
{
    ac *a = st;
    if (a->mode != AC_SAC)
        return crl_det_actor_act(a->det, td, e, rng, err);
    int rc = crl_prob_actor_act(a->prob, td, e, rng, err);
    if (rc || a->user)
        return rc;
    static const char *const extra[] = { "loc", "scale", "sample_log_prob", NULL };
    return ls_drop_keys(td, extra, err);
}

static void ac_explore_step(void *st, int64_t frames)
{
    ac *a = st;
    if (a->det && !a->user)
        crl_det_actor_step(a->det, frames);
    a->explore[0] += (double)frames;
    a->explore[1] += 1;
    a->explore[2] = (double)frames;
}

static size_t ac_num_params(void *st)
{
    ac *a = st;
    return 1 + (size_t)a->nq + (a->mode == AC_SAC && !a->fixed_alpha ? 1 : 0);
}

static int ac_param(void *st, size_t i, const char **name, crl_tensor **p, crl_tensor **g, crl_error *err)
{
    ac *a = st;
    static const char *const qnames[] = { "qvalue0", "qvalue1" };
    if (i >= ac_num_params(st))
        return crl_error_set(err, CRL_E_RANGE, "%s: no parameter vector %zu (it has %zu)", a->who, i,
                             ac_num_params(st));
    if (i == 0) {
        *name = "actor";
        *p = crl_mlp_params_get(a->actor_net);
        *g = crl_mlp_grads_get(a->actor_net);
    } else if (i <= (size_t)a->nq) {
        *name = qnames[i - 1];
        *p = crl_mlp_params_get(a->q[i - 1]);
        *g = crl_mlp_grads_get(a->q[i - 1]);
    } else {
        *name = "log_alpha";
        *p = a->log_alpha;
        *g = a->log_alpha_grad;
    }
    return CRL_OK;
}

static bool ac_param_active(void *st, size_t i)
{
    ac *a = st;
    /* TD3: the actor steps every policy_delay-th update */
    return i != 0 || ((int64_t)a->steps + 1) % a->delay == 0;
}

static void reserve(ac *a, int64_t B)
{
    if (B <= a->cap)
        return;
    a->x = g_renew(float, a->x, B * (a->o + a->d));
    a->x2 = g_renew(float, a->x2, B * (a->o + a->d));
    a->ga = g_renew(float, a->ga, B * a->d);
    a->y = g_renew(float, a->y, B);
    a->td_err = g_renew(float, a->td_err, B);
    a->pred = g_renew(float, a->pred, B);
    a->cap = B;
}

/* x = [obs | act] rows. */
static void concat(float *x, const float *obs, const float *act, int64_t B, int64_t o, int64_t d)
{
    for (int64_t b = 0; b < B; b++) {
        memcpy(x + b * (o + d), obs + b * o, (size_t)o * sizeof(float));
        memcpy(x + b * (o + d) + o, act + b * d, (size_t)d * sizeof(float));
    }
}

static crl_tensor *wrap(float *p, int64_t rows, int64_t cols, crl_error *err)
{
    return crl_tensor_wrap(p, CRL_F32, 2, (const int64_t[]){ rows, cols }, NULL, NULL, NULL, err);
}

/* A td of batch [B] holding obs under in_key (for the actors). */
static crl_td *obs_td(ac *a, crl_tensor *obs, int64_t B, crl_error *err)
{
    crl_td *td = crl_td_new(1, &B, err);
    if (td && crl_td_set(td, a->no.in_key, obs, err)) {
        crl_td_unref(td);
        return NULL;
    }
    return td;
}

/* Contiguous float32 [B, w] data of an action or observation tensor. */
static int f32_rows(crl_tensor *t, int64_t B, int64_t w, const char *who, const char *key, const float **out,
                    crl_tensor **owned, crl_error *err)
{
    *owned = NULL;
    if (crl_tensor_numel(t) != B * w)
        return crl_error_set(err, CRL_E_SHAPE, "%s: '%s' holds %lld values, expected %lld x %lld", who, key,
                             (long long)crl_tensor_numel(t), (long long)B, (long long)w);
    if (crl_tensor_dtype(t) == CRL_F32 && crl_tensor_is_contiguous(t)) {
        *out = crl_tensor_data(t);
        return CRL_OK;
    }
    crl_error e;
    crl_error_clear(&e);
    if (!(*owned = crl_tensor_cast(t, CRL_F32, &e)))
        return crl_error_pass(err, &e, CRL_E_NOMEM);
    *out = crl_tensor_data(*owned);
    return CRL_OK;
}

/* Backward through critic q of grad_q [B, 1] adding dQ/da into a->ga,
 * leaving q's parameter gradients as they were (the actor's loss does
 * not train the critics). */
static int critic_action_grad(ac *a, crl_mlp *q, const float *grad_q, int64_t B, crl_error *err)
{
    crl_tensor *g = crl_mlp_grads_get(q);
    int64_t n = crl_tensor_numel(g);
    if (n > a->gsave_cap) {
        a->gsave = g_renew(float, a->gsave, n);
        a->gsave_cap = n;
    }
    memcpy(a->gsave, crl_tensor_data(g), (size_t)n * sizeof(float));
    crl_error e;
    crl_error_clear(&e);
    crl_tensor *go = crl_tensor_wrap((void *)grad_q, CRL_F32, 2, (const int64_t[]){ B, 1 }, NULL, NULL, NULL, &e),
               *gin = NULL;
    int rc = go ? crl_mlp_backward(q, go, &gin, err) : crl_error_pass(err, &e, CRL_E_NOMEM);
    crl_tensor_unref(go);
    memcpy(crl_tensor_data(g), a->gsave, (size_t)n * sizeof(float));
    if (rc)
        return rc;
    const float *gi = crl_tensor_data(gin);
    for (int64_t b = 0; b < B; b++)
        for (int64_t j = 0; j < a->d; j++)
            a->ga[b * a->d + j] += gi[b * (a->o + a->d) + a->o + j];
    return CRL_OK;
}

static double vmax(const float *v, int64_t n)
{
    double m = -INFINITY;
    for (int64_t i = 0; i < n; i++)
        m = fmax(m, v[i]);
    return m;
}

static double vmean(const float *v, int64_t n)
{
    double s = 0;
    for (int64_t i = 0; i < n; i++)
        s += v[i];
    return s / (double)n;
}

/* What TorchRL's losses output besides the loss terms: DDPGLoss's td_error, pred_value,
 * target_value [B] and their maxima; TD3Loss's batch means (pred_value over both critics,
 * state_action_value_actor of the first critic at the actor's action, next_state_value before
 * reward and discount, target_value). */
static int torchrl_outputs(ac *a, crl_td *losses, int64_t B, crl_error *err)
{
    int rc = CRL_OK;
    if (a->mode == AC_DDPG) {
        if ((rc = ls_set_vec(losses, "td_error", a->td_err, B, err)) ||
            (rc = ls_set_vec(losses, "pred_value", a->pred, B, err)) ||
            (rc = ls_set_vec(losses, "target_value", a->y, B, err)) ||
            (rc = ls_set_scalar(losses, "pred_value_max", vmax(a->pred, B), err)))
            return rc;
        return ls_set_scalar(losses, "target_value_max", vmax(a->y, B), err);
    }
    if (a->mode == AC_TD3 && (!(rc = ls_set_scalar(losses, "pred_value", a->pred_mean, err)) &&
                              !(rc = ls_set_scalar(losses, "state_action_value_actor", a->actor_q, err)) &&
                              !(rc = ls_set_scalar(losses, "target_value", vmean(a->y, B), err))))
        rc = ls_set_scalar(losses, "next_state_value", a->next_v, err);
    return rc;
}

static int ac_forward(void *st, crl_td *batch, crl_td *losses, crl_error *err)
{
    ac *a = st;
    const char *who = a->who;
    int64_t B = ls_rows(batch), o = a->o, d = a->d, w = o + d;
    crl_tensor *own[6] = { 0 };
    crl_td *cur = NULL, *nxt = NULL;
    const float *reward, *term, *obs, *nobs, *act, *weight = NULL;
    int rc = CRL_OK;
    crl_error e;   /* for the calls that return NULL on failure */
    crl_error_clear(&e);
    crl_tensor *obs_t = crl_td_get(batch, a->no.in_key), *nobs_t = crl_td_get(batch, a->next_key),
               *act_t = crl_td_get(batch, "action");
    if (!obs_t || !nobs_t || !act_t) {
        rc = crl_error_set(err, CRL_E_NOT_FOUND, "%s: the batch has no '%s'", who,
                           !obs_t ? a->no.in_key : !nobs_t ? a->next_key : "action");
        goto out;
    }
    if ((rc = ls_batch_f32(batch, "next.reward", B, 1, who, &reward, &own[0], err)) ||
        (rc = ls_batch_terminal(batch, B, who, &term, &own[1], err)) ||
        (rc = f32_rows(obs_t, B, o, who, a->no.in_key, &obs, &own[2], err)) ||
        (rc = f32_rows(nobs_t, B, o, who, a->next_key, &nobs, &own[3], err)) ||
        (rc = f32_rows(act_t, B, d, who, "action", &act, &own[4], err)) ||
        (crl_td_get(batch, "_weight") && (rc = ls_batch_f32(batch, "_weight", B, 1, who, &weight, &own[5], err))))
        goto out;
    reserve(a, B);
    /* Noise of this update: the same for every forward until the next
     * optimizer step (finite differences see one function). */
    crl_rng noise;
    crl_rng_init(&noise, a->seed, 1000 + (uint64_t)a->steps);
    double alpha = a->mode == AC_SAC ? exp(crl_tensor_flat_get(a->log_alpha, 0)) : 0;
    a->next_v = a->pred_mean = a->actor_q = 0;
    crl_tensor *o_c = crl_tensor_contiguous(obs_t, &e), *n_c = o_c ? crl_tensor_contiguous(nobs_t, &e) : NULL;
    if (o_c && n_c) {
        cur = obs_td(a, o_c, B, &e);
        nxt = cur ? obs_td(a, n_c, B, &e) : NULL;
    }
    crl_tensor_unref(o_c);
    crl_tensor_unref(n_c);
    if (!cur || !nxt) {
        rc = crl_error_pass(err, &e, CRL_E_NOMEM);
        goto out;
    }

    /* ---- target: y = r + gamma (1 - terminated) (min_i Q'_i(s', a') [- alpha log pi(a'|s')]) */
    if ((rc = a->mode == AC_SAC ? crl_prob_actor_act(a->prob, nxt, CRL_EXPLORE_RANDOM, &noise, err)
                                : crl_det_actor_act(a->det_target, nxt, CRL_EXPLORE_MODE, NULL, err)))
        goto out;
    const float *na = crl_tensor_data(crl_td_get(nxt, "action"));
    concat(a->x2, nobs, na, B, o, d);
    if (a->mode == AC_TD3) {
        for (int64_t b = 0; b < B; b++)
            for (int64_t j = 0; j < d; j++) {
                double half = isfinite(a->high[j] - a->low[j]) ? 0.5 * (a->high[j] - a->low[j]) : 1.0;
                double eps = fmin(fmax(a->policy_noise * crl_rng_normal(&noise), -a->noise_clip), a->noise_clip);
                double v = a->x2[b * w + o + j] + eps * half;
                a->x2[b * w + o + j] = (float)fmin(fmax(v, a->low[j]), a->high[j]);
            }
    }
    crl_tensor *x2 = wrap(a->x2, B, w, &e), *qo = NULL;
    float *qn = g_new(float, 2 * B);
    if (!x2 || !(qo = wrap(qn, B, 1, &e)))
        rc = crl_error_pass(err, &e, CRL_E_NOMEM);
    for (int i = 0; i < a->nq && !rc; i++) {
        crl_tensor *dst = wrap(qn + i * B, B, 1, &e);
        rc = dst ? crl_mlp_infer(a->qt[i], x2, dst, err) : crl_error_pass(err, &e, CRL_E_NOMEM);
        crl_tensor_unref(dst);
    }
    crl_tensor_unref(x2);
    crl_tensor_unref(qo);
    if (!rc) {
        /* the actor's own log-probs: whether it writes sample_log_prob is the user's choice */
        const float *nlp = a->mode == AC_SAC ? crl_tensor_data(crl_prob_actor_log_prob_get(a->prob)) : NULL;
        for (int64_t b = 0; b < B; b++) {
            double v = a->nq == 2 ? fmin(qn[b], qn[B + b]) : qn[b];
            a->next_v += v / (double)B;
            if (nlp)
                v -= alpha * nlp[b];
            a->y[b] = (float)(reward[b] + (term[b] != 0 ? 0.0 : a->gamma * v));
        }
    }
    g_free(qn);
    if (rc)
        goto out;

    /* ---- actor: DDPG/TD3 -Q_0(s, mu(s)); SAC alpha log pi(a|s) - min_i Q_i(s, a), a ~ pi(s) */
    if ((rc = a->mode == AC_SAC ? crl_prob_actor_forward(a->prob, cur, CRL_EXPLORE_RANDOM, &noise, err)
                                : crl_det_actor_forward(a->det, cur, err)))
        goto out;
    const float *pa = crl_tensor_data(crl_td_get(cur, "action"));
    const float *lp = a->mode == AC_SAC ? crl_tensor_data(crl_prob_actor_log_prob_get(a->prob)) : NULL;
    concat(a->x, obs, pa, B, o, d);
    memset(a->ga, 0, (size_t)(B * d) * sizeof(float));
    crl_tensor *xp = wrap(a->x, B, w, &e);
    if (!xp) {
        rc = crl_error_pass(err, &e, CRL_E_NOMEM);
        goto out;
    }
    float *qv = g_new(float, 2 * B), *gq = g_new(float, B);
    double loss_actor = 0, lp_sum = 0;
    /* Each critic keeps its own forward cache: run them all, then backward. */
    for (int i = 0; i < a->nq && !rc; i++) {
        crl_tensor *y = crl_mlp_forward(a->q[i], xp, &e);
        if (!y)
            rc = crl_error_pass(err, &e, CRL_E_INVALID);
        else
            memcpy(qv + i * B, crl_tensor_data(y), (size_t)B * sizeof(float));
    }
    /* DDPG/TD3 use Q_0 only; SAC the smaller of the two per row (ties: Q_0) */
    int used = a->mode == AC_SAC ? a->nq : 1;
    for (int i = 0; i < used && !rc; i++) {
        for (int64_t b = 0; b < B; b++) {
            bool pick = a->mode != AC_SAC || (i == 0 ? qv[b] <= qv[B + b] : qv[B + b] < qv[b]);
            gq[b] = pick ? (float)(-1.0 / (double)B) : 0.0f;
        }
        rc = critic_action_grad(a, a->q[i], gq, B, err);
    }
    for (int64_t b = 0; b < B && !rc; b++) {
        double qmin = a->mode == AC_SAC ? fmin(qv[b], qv[B + b]) : qv[b];
        loss_actor += (lp ? alpha * lp[b] : 0.0) - qmin;
        a->actor_q += qv[b] / (double)B;
        if (lp)
            lp_sum += lp[b];
    }
    g_free(qv);
    g_free(gq);
    crl_tensor_unref(xp);
    if (rc)
        goto out;
    loss_actor /= (double)B;
    {
        crl_tensor *ga = wrap(a->ga, B, d, &e);
        if (!ga) {
            rc = crl_error_pass(err, &e, CRL_E_NOMEM);
            goto out;
        }
        if (a->mode == AC_SAC) {
            float *glp = g_new(float, B);
            for (int64_t b = 0; b < B; b++)
                glp[b] = (float)(alpha / (double)B);
            crl_tensor *g = crl_tensor_wrap(glp, CRL_F32, 1, &B, NULL, NULL, NULL, &e);
            rc = g ? crl_prob_actor_backward(a->prob, ga, g, NULL, NULL, err) : crl_error_pass(err, &e, CRL_E_NOMEM);
            crl_tensor_unref(g);
            g_free(glp);
        } else {
            rc = crl_det_actor_backward(a->det, ga, NULL, err);
        }
        crl_tensor_unref(ga);
        if (rc)
            goto out;
    }

    /* ---- critics: sum_i mean (w/2) (Q_i(s, a) - y)^2 (DDPG: one critic) */
    concat(a->x, obs, act, B, o, d);
    crl_tensor *xb = wrap(a->x, B, w, &e);
    if (!xb) {
        rc = crl_error_pass(err, &e, CRL_E_NOMEM);
        goto out;
    }
    double loss_q = 0;
    float *g1 = g_new(float, B);
    for (int i = 0; i < a->nq && !rc; i++) {
        crl_tensor *y = crl_mlp_forward(a->q[i], xb, &e);
        if (!y) {
            rc = crl_error_pass(err, &e, CRL_E_INVALID);
            break;
        }
        const float *pred = crl_tensor_data(y);
        for (int64_t b = 0; b < B; b++) {
            double diff = pred[b] - a->y[b], wt = weight ? weight[b] : 1.0;
            loss_q += 0.5 * wt * diff * diff;
            g1[b] = (float)(wt * diff / (double)B);
            a->pred_mean += pred[b] / (double)(B * a->nq);
            if (i == 0) {
                a->td_err[b] = (float)fabs(diff);
                a->pred[b] = pred[b];
            }
        }
        crl_tensor *g = wrap(g1, B, 1, &e);
        rc = g ? crl_mlp_backward(a->q[i], g, NULL, err) : crl_error_pass(err, &e, CRL_E_NOMEM);
        crl_tensor_unref(g);
    }
    g_free(g1);
    crl_tensor_unref(xb);
    if (rc)
        goto out;
    loss_q /= (double)B;

    /* ---- alpha: -log_alpha (log pi + target_entropy), log pi detached */
    double loss_alpha = 0;
    if (a->mode == AC_SAC && !a->fixed_alpha) {
        double m = lp_sum / (double)B + a->target_entropy;
        loss_alpha = -crl_tensor_flat_get(a->log_alpha, 0) * m;
        crl_tensor_flat_set(a->log_alpha_grad, 0, crl_tensor_flat_get(a->log_alpha_grad, 0) - m);
    }
    if (!isfinite(loss_actor) || !isfinite(loss_q) || !isfinite(loss_alpha)) {
        rc = crl_error_set(err, CRL_E_RUNTIME, "%s: a loss is not finite (loss_actor %g, %s %g, loss_alpha %g); lower "
                           "the learning rate or clip gradients ([optim] max_grad_norm)", who, loss_actor,
                           a->mode == AC_DDPG ? "loss_value" : "loss_qvalue", loss_q, loss_alpha);
        goto out;
    }
    if ((rc = ls_set_rows(batch, "td_error", a->td_err, err)) || (rc = ls_set_scalar(losses, "loss_actor", loss_actor, err)) ||
        (rc = ls_set_scalar(losses, a->mode == AC_DDPG ? "loss_value" : "loss_qvalue", loss_q, err)) ||
        (rc = torchrl_outputs(a, losses, B, err)))
        goto out;
    if (a->mode == AC_SAC) {
        if (!a->fixed_alpha && (rc = ls_set_scalar(losses, "loss_alpha", loss_alpha, err)))
            goto out;
        if ((rc = ls_set_scalar(losses, "alpha", alpha, err)) ||
            (rc = ls_set_scalar(losses, "entropy", -lp_sum / (double)B, err)))
            goto out;
    }
out:
    crl_td_unref(cur);
    crl_td_unref(nxt);
    for (int i = 0; i < 6; i++)
        crl_tensor_unref(own[i]);
    return rc;
}

static int ac_update(void *st, crl_error *err)
{
    ac *a = st;
    a->steps += 1;
    if ((int64_t)a->steps % a->delay != 0)
        return CRL_OK;
    for (int i = 0; i < a->nq; i++) {
        int rc = crl_params_soft_update(crl_mlp_params_get(a->qt[i]), crl_mlp_params_get(a->q[i]), a->tau, err);
        if (rc)
            return rc;
    }
    if (a->actor_target_net)
        return crl_params_soft_update(crl_mlp_params_get(a->actor_target_net), crl_mlp_params_get(a->actor_net),
                                      a->tau, err);
    return CRL_OK;
}

/* The networks in checkpoint order with their section names. */
static int nets(ac *a, crl_mlp **m, const char **names)
{
    static const char *const qn[] = { "qvalue0", "qvalue1" }, *const qtn[] = { "qvalue0_target", "qvalue1_target" };
    int n = 0;
    m[n] = a->actor_net;
    names[n++] = "actor";
    if (a->actor_target_net) {
        m[n] = a->actor_target_net;
        names[n++] = "actor_target";
    }
    for (int i = 0; i < a->nq; i++) {
        m[n] = a->q[i];
        names[n++] = qn[i];
        m[n] = a->qt[i];
        names[n++] = qtn[i];
    }
    return n;
}

static int ac_save(void *st, crl_ckpt_writer *w, const char *prefix, crl_error *err)
{
    ac *a = st;
    crl_mlp *m[6];
    const char *names[6];
    int n = nets(a, m, names);
    for (int i = 0; i < n; i++) {
        int rc = ls_mlp_save(m[i], w, prefix, names[i], err);
        if (rc)
            return rc;
    }
    double s[5] = { a->steps, a->explore[0], a->explore[1], a->explore[2],
                    a->log_alpha ? crl_tensor_flat_get(a->log_alpha, 0) : 0 };
    return ls_save_doubles(w, prefix, "state", s, 5, err);
}

static int ac_load(void *st, const crl_ckpt_reader *r, const char *prefix, crl_error *err)
{
    ac *a = st;
    crl_mlp *m[6], *c[6] = { 0 };
    const char *names[6];
    int n = nets(a, m, names), rc = CRL_OK;
    double s[5];
    static const char *const fields[4] = { "optimizer steps", "explore frames", "explore calls",
                                           "frames per explore call" };
    rc = ls_load_doubles(r, prefix, "state", s, 5, err);
    for (int i = 0; !rc && i < 4; i++)
        rc = ls_check_count(r, prefix, "state", fields[i], s[i], err);
    if (!rc)
        rc = ls_check_field(r, prefix, "state", fields[2], s[2], s[2] * s[3] <= 0x1p53,
                            "calls times frames per call at most 2^53", err);
    if (rc)
        return rc;
    /* into clones first: nothing changes on error */
    crl_error e;
    crl_error_clear(&e);
    for (int i = 0; i < n && !rc; i++) {
        if (!(c[i] = crl_mlp_clone(m[i], names[i], &e)))
            rc = crl_error_pass(err, &e, CRL_E_NOMEM);
        else
            rc = ls_mlp_load(c[i], r, prefix, names[i], err);
    }
    if (!rc) {
        for (int i = 0; i < n; i++)
            crl_tensor_copy(crl_mlp_params_get(m[i]), crl_mlp_params_get(c[i]), NULL);
        a->steps = s[0];
        if (a->log_alpha)
            crl_tensor_flat_set(a->log_alpha, 0, s[4]);
        /* replay the exploration schedule with the same calls (bitwise) */
        /* (a user's actor keeps its own schedule) */
        bool own = a->det && !a->user;
        if (own)
            crl_det_actor_set_gaussian(a->det, a->sigma[0], a->sigma[1], (int64_t)a->sigma[2], 0, 1, NULL);
        int64_t calls = own ? ls_anneal_calls((int64_t)s[2], (int64_t)s[3], (int64_t)a->sigma[2]) : 0;
        for (int64_t i = 0; i < calls; i++)
            ac_explore_step(a, (int64_t)s[3]);
        /* what all s[2] calls add up to (exact: below 2^53) */
        a->explore[0] = s[2] * s[3];
        a->explore[1] = s[2];
        if (s[2] > 0)
            a->explore[2] = s[3];
    }
    for (int i = 0; i < n; i++)
        crl_mlp_unref(c[i]);
    return rc;
}

#define AC_OPS(create_, modules_)                                                                              \
    {                                                                                                          \
        .struct_size = sizeof(crl_loss_ops), .flags = 0, .create = create_, .destroy = ac_destroy,            \
        .act = ac_act, .explore_step = ac_explore_step, .num_params = ac_num_params, .param = ac_param,       \
        .prepare = NULL, .forward = ac_forward, .update = ac_update, .save = ac_save, .load = ac_load,        \
        .param_active = ac_param_active, .create_from_modules = modules_,                                     \
    }

const crl_loss_ops ls_ddpg_ops = AC_OPS(ddpg_create, ddpg_create_modules);
const crl_loss_ops ls_td3_ops = AC_OPS(td3_create, td3_create_modules);
const crl_loss_ops ls_sac_ops = AC_OPS(sac_create, sac_create_modules);
