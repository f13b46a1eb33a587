/* Q-value actor: argmax over action values (QValueModule) with epsilon-greedy exploration (EGreedyModule). */
#include "nn-private.h"

#include <math.h>

struct crl_qvalue_actor {
    crl_tdmodule *mod;
    crl__action_space space;
    crl_td_key *k_action, *k_chosen;
    double eps_init, eps_end, eps;
    int64_t anneal;
    int64_t *idx;          /* [rows] */
    float *chosen;         /* [rows] */
    int64_t cap;
};

crl_qvalue_actor *crl_qvalue_actor_new(crl_mlp *net, const char *const *in_keys, const crl_spec *action_spec,
                                       crl_error *err)
{
    const char *who = net ? net->name : "qvalue";
    if (!net) {
        crl_error_set(err, CRL_E_INVALID, "Q-value actor: no network given");
        return NULL;
    }
    crl_qvalue_actor *a = g_new0(crl_qvalue_actor, 1);
    if (crl__action_space_init(&a->space, who, action_spec, true, err))
        goto fail;
    if (crl_mlp_out_features(net) != a->space.n) {
        crl_error_set(err, CRL_E_SHAPE, "module '%s': the network gives %" PRId64 " action values but the action spec "
                      "has %" PRId64 " actions", who, crl_mlp_out_features(net), a->space.n);
        goto fail;
    }
    if (!(a->mod = crl_tdmodule_new(net, in_keys, "action_value", err)))
        goto fail;
    a->k_action = crl_td_key_new("action", err);
    a->k_chosen = crl_td_key_new("chosen_action_value", err);
    return a;
fail:
    crl_qvalue_actor_free(a);
    return NULL;
}

void crl_qvalue_actor_free(crl_qvalue_actor *a)
{
    if (!a)
        return;
    crl_tdmodule_free(a->mod);
    crl__action_space_clear(&a->space);
    crl_td_key_free(a->k_action);
    crl_td_key_free(a->k_chosen);
    g_free(a->idx);
    g_free(a->chosen);
    g_free(a);
}

crl_tdmodule *crl_qvalue_actor_module_get(crl_qvalue_actor *a) { return a->mod; }
double crl_qvalue_actor_epsilon(const crl_qvalue_actor *a) { return a->eps; }

int crl_qvalue_actor_set_egreedy(crl_qvalue_actor *a, double eps_init, double eps_end, int64_t annealing_num_steps,
                                 crl_error *err)
{
    if (!(eps_init >= 0 && eps_init <= 1 && eps_end >= 0 && eps_end <= 1) || annealing_num_steps < 1)
        return crl_error_set(err, CRL_E_RANGE, "epsilon-greedy: eps_init (%g) and eps_end (%g) must be in [0, 1] and "
                             "annealing_num_steps (%" PRId64 ") >= 1", eps_init, eps_end, annealing_num_steps);
    a->eps_init = a->eps = eps_init;
    a->eps_end = eps_end;
    a->anneal = annealing_num_steps;
    return CRL_OK;
}

/* EGreedyModule.step: linear, never past eps_end. */
void crl_qvalue_actor_step(crl_qvalue_actor *a, int64_t frames)
{
    if (!a->anneal)
        return;
    a->eps -= (double)frames * (a->eps_init - a->eps_end) / (double)a->anneal;
    if ((a->eps_init >= a->eps_end && a->eps < a->eps_end) || (a->eps_init < a->eps_end && a->eps > a->eps_end))
        a->eps = a->eps_end;
}

int crl_qvalue_actor_act(crl_qvalue_actor *a, crl_td *td, crl_exploration exploration, crl_rng *rng, crl_error *err)
{
    const char *who = crl_mlp_name(crl_tdmodule_net_get(a->mod));
    bool explore = exploration == CRL_EXPLORE_RANDOM && a->eps > 0;
    if (explore && !rng)
        return crl_error_set(err, CRL_E_INVALID, "module '%s': epsilon-greedy exploration needs a random stream", who);
    if (crl_tdmodule_infer(a->mod, td, err))
        return err ? err->code : CRL_E_INVALID;
    int64_t rows = crl__td_rows(td), n = a->space.n;
    if (rows > a->cap) {
        a->idx = g_renew(int64_t, a->idx, rows);
        a->chosen = g_renew(float, a->chosen, rows);
        a->cap = rows;
    }
    const float *q = crl_tensor_data(crl_td_get(td, "action_value"));
    crl_categorical_mode(q, rows, n, a->idx);
    for (int64_t r = 0; r < rows; r++) {
        a->chosen[r] = q[r * n + a->idx[r]];
        /* One uniform per row decides, a second picks the action. */
        if (explore && crl_rng_uniform(rng) < a->eps)
            a->idx[r] = (int64_t)crl_rng_below(rng, (uint64_t)n);
    }
    if (crl__td_write_rows(who, td, a->k_chosen, a->chosen, 1, err))
        return err ? err->code : CRL_E_INVALID;
    return crl__write_classes(who, td, a->k_action, &a->space, a->idx, err);
}
