/* Q-value actor: argmax over action values (QValueModule) with epsilon-greedy exploration (EGreedyModule). */
#include "nn-private.h"

#include <math.h>

struct crl_qvalue_actor {
    crl__actor_base b;
    crl_td_key *k_chosen;
    crl__anneal eps;
    int64_t *idx;          /* [rows] */
    float *chosen;         /* [rows] */
    int64_t cap;
};

crl_qvalue_actor *crl_qvalue_actor_new(crl_mlp *net, const char *const *in_keys, const crl_spec *action_spec,
                                       crl_error *err)
{
    crl_qvalue_actor *a = g_new0(crl_qvalue_actor, 1);
    if (crl__actor_base_init(&a->b, net, in_keys, action_spec, true, 1, "action_value", "a Q-value actor",
                             "one value per action", err) ||
        !(a->k_chosen = crl_td_key_new("chosen_action_value", err))) {
        crl_qvalue_actor_free(a);
        return NULL;
    }
    return a;
}

void crl_qvalue_actor_free(crl_qvalue_actor *a)
{
    if (!a)
        return;
    crl__actor_base_clear(&a->b);
    crl_td_key_free(a->k_chosen);
    g_free(a->idx);
    g_free(a->chosen);
    g_free(a);
}

crl_tdmodule *crl_qvalue_actor_module_get(crl_qvalue_actor *a) { return a->b.mod; }
double crl_qvalue_actor_epsilon(const crl_qvalue_actor *a) { return a->eps.value; }

int crl_qvalue_actor_set_egreedy(crl_qvalue_actor *a, double eps_init, double eps_end, int64_t annealing_num_steps,
                                 crl_error *err)
{
    return crl__anneal_set(&a->eps, "epsilon-greedy", eps_init, eps_end, annealing_num_steps, 0, 1, err);
}

void crl_qvalue_actor_step(crl_qvalue_actor *a, int64_t frames)
{
    crl__anneal_step(&a->eps, frames);
}

int crl_qvalue_actor_act(crl_qvalue_actor *a, crl_td *td, crl_exploration exploration, crl_rng *rng, crl_error *err)
{
    const char *who = crl_mlp_name(crl_tdmodule_net_get(a->b.mod));
    bool explore = exploration == CRL_EXPLORE_RANDOM && a->eps.value > 0;
    if (explore && !rng)
        return crl_error_set(err, CRL_E_INVALID, "module '%s': epsilon-greedy exploration needs a random stream", who);
    int rc = crl_tdmodule_infer(a->b.mod, td, err);
    if (rc)
        return rc;
    int64_t rows = crl__td_rows(td), n = a->b.space.n;
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
        if (explore && crl_rng_uniform(rng) < a->eps.value)
            a->idx[r] = (int64_t)crl_rng_below(rng, (uint64_t)n);
    }
    if ((rc = crl__td_write_rows(who, td, a->k_chosen, a->chosen, 1, err)))
        return rc;
    return crl__write_classes(who, td, a->b.k_action, &a->b.space, a->idx, err);
}
