/* Random actions and rollouts: rand_action, rand_step, rollout into a preallocated [batch..., T] TensorDict. */
#include "env-private.h"
#include "transform-private.h"

#include <string.h>

int crl_env_rand_action(crl_env *env, crl_td *td, crl_error *err)
{
    if (!env || !td)
        return crl_error_set(err, CRL_E_INVALID, "rand_action: %s is NULL", !env ? "env" : "the TensorDict");
    int rc = crl__env_check_batch(env, td, "rand_action", err);
    if (!rc && env->chain) {
        /* The transformed action spec (an inverse maps it back). */
        if ((rc = crl__spec_rand_into_td(env->chain->out.action, &env->rng, td, err)))
            crl_error_prefix(err, "rand_action: ");
        return rc;
    }
    for (size_t j = 0; !rc && j < env->nleaves; j++) {
        const crl__env_leaf *l = &env->leaves[j];
        if (l->role != CRL__ROLE_ACTION)
            continue;
        crl_tensor *t = crl_td_get_k(td, l->k);
        if (t && crl_tensor_dtype(t) == crl_tensor_dtype(l->ubuf) && crl_tensor_same_shape(t, l->ubuf)) {
            rc = crl_spec_rand_into(l->uspec, &env->rng, t, err);
            continue;
        }
        crl_error e;
        crl_error_clear(&e);
        t = crl_spec_rand(l->uspec, &env->rng, &e);
        rc = t ? crl_td_set_k(td, l->k, t, err) : crl_error_pass(err, &e, CRL_E_NOMEM);
        crl_tensor_unref(t);
    }
    if (rc)
        crl_error_prefix(err, "rand_action: ");
    return rc;
}

int crl_env_rand_step(crl_env *env, crl_td *td, crl_error *err)
{
    int rc = crl_env_rand_action(env, td, err);
    return rc ? rc : crl_env_step(env, td, err);
}

/* One leaf of the rollout: where it comes from and the [batch..., T, ...]
 * tensor it goes to. */
typedef struct slot {
    crl_td_key *k;
    crl_tensor *out;
    crl_dtype dt;
    int ndim;
    int64_t shape[CRL_MAX_DIMS];
} slot;

typedef struct rollout {
    crl_env *env;
    crl_td *out;
    slot *slots;
    size_t nslots;
} rollout;

static void rollout_clear(rollout *r)
{
    for (size_t i = 0; i < r->nslots; i++) {
        crl_td_key_free(r->slots[i].k);
        crl_tensor_unref(r->slots[i].out);
    }
    g_free(r->slots);
    crl_td_unref(r->out);
}

/* Allocate the whole output once, from the layout of the first step. */
static int rollout_alloc(rollout *r, const crl_td *cur, int64_t max_steps, crl_error *err)
{
    const crl_env *env = r->env;
    int b = env->batch_ndim;
    int64_t bshape[CRL_MAX_DIMS];
    memcpy(bshape, env->batch_shape, sizeof(int64_t) * (size_t)b);
    bshape[b] = max_steps;
    crl_error e;
    crl_error_clear(&e);
    r->out = crl_td_new(b + 1, bshape, &e);
    if (!r->out)
        return crl_error_pass(err, &e, CRL_E_NOMEM);
    char **keys = crl_td_leaf_keys(cur, &e);
    if (!keys)
        return crl_error_pass(err, &e, CRL_E_NOMEM);
    size_t n = 0;
    while (keys[n])
        n++;
    r->slots = g_new0(slot, n);
    int rc = CRL_OK;
    for (size_t i = 0; i < n && !rc; i++) {
        crl_tensor *t = crl_td_get(cur, keys[i]);
        slot *s = &r->slots[r->nslots++];
        s->dt = crl_tensor_dtype(t);
        s->ndim = crl_tensor_ndim(t);
        memcpy(s->shape, crl_tensor_shape(t), sizeof(int64_t) * (size_t)s->ndim);
        if (s->ndim + 1 > CRL_MAX_DIMS) {
            rc = crl_error_set(err, CRL_E_SHAPE, "rollout: key '%s' has %d dims; with the time dim it exceeds %d",
                               keys[i], s->ndim, CRL_MAX_DIMS);
            break;
        }
        int64_t oshape[CRL_MAX_DIMS];
        memcpy(oshape, s->shape, sizeof(int64_t) * (size_t)b);
        oshape[b] = max_steps;
        memcpy(oshape + b + 1, s->shape + b, sizeof(int64_t) * (size_t)(s->ndim - b));
        s->k = crl_td_key_new(keys[i], &e);
        s->out = s->k ? crl_tensor_new(s->dt, s->ndim + 1, oshape, &e) : NULL;
        if (!s->out)
            rc = crl_error_pass(err, &e, CRL_E_NOMEM);
        else if ((rc = crl_td_set(r->out, keys[i], s->out, err)))
            crl_error_prefix(err, "rollout: ");
    }
    crl_free(keys);
    return rc;
}

static size_t count_leaves(const crl_td *td)
{
    size_t n = 0, len = crl_td_len(td);
    for (size_t i = 0; i < len; i++) {
        crl_td *sub = crl_td_td_at(td, i);
        n += sub ? count_leaves(sub) : 1;
    }
    return n;
}

/* The key cur holds that the output has no slot for (error path only). */
static int extra_key_error(const rollout *r, const crl_td *cur, int64_t t, crl_error *err)
{
    crl_error e;
    crl_error_clear(&e);
    char **keys = crl_td_leaf_keys(cur, &e);
    if (!keys)
        return crl_error_pass(err, &e, CRL_E_NOMEM);
    const char *extra = NULL;
    for (size_t i = 0; keys[i] && !extra; i++) {
        bool found = false;
        for (size_t j = 0; j < r->nslots && !found; j++)
            found = strcmp(crl_td_key_str(r->slots[j].k), keys[i]) == 0;
        if (!found)
            extra = keys[i];
    }
    crl_error_set(err, CRL_E_INVALID, "rollout: step %" G_GINT64_FORMAT ": key '%s' appeared after the first step; "
                  "a policy must write the same keys at every step", (gint64)t, extra ? extra : "?");
    crl_free(keys);
    return CRL_E_INVALID;
}

/* Copy cur's leaves into the output at time t (no allocation). */
static int rollout_store(rollout *r, const crl_td *cur, int64_t t, crl_error *err)
{
    int b = r->env->batch_ndim;
    for (size_t i = 0; i < r->nslots; i++) {
        const slot *s = &r->slots[i];
        crl_tensor *src = crl_td_get_k(cur, s->k);
        if (!src)
            return crl_error_set(err, CRL_E_INVALID, "rollout: step %" G_GINT64_FORMAT ": key '%s' is gone; a policy "
                                 "must write the same keys at every step", (gint64)t, crl_td_key_str(s->k));
        if (crl_tensor_dtype(src) != s->dt || crl_tensor_ndim(src) != s->ndim ||
            memcmp(crl_tensor_shape(src), s->shape, sizeof(int64_t) * (size_t)s->ndim) != 0)
            return crl_error_set(err, CRL_E_SHAPE, "rollout: step %" G_GINT64_FORMAT ": key '%s' changed dtype or "
                                 "shape since the first step", (gint64)t, crl_td_key_str(s->k));
        size_t es = crl_dtype_size(s->dt);
        const int64_t *ost = crl_tensor_strides(s->out), *sst = crl_tensor_strides(src);
        int64_t ds[CRL_MAX_DIMS], ss[CRL_MAX_DIMS];
        for (int d = 0, o = 0; d < s->ndim; d++, o++) {
            if (d == b)
                o++;
            ds[d] = ost[o] * (int64_t)es;
            ss[d] = sst[d] * (int64_t)es;
        }
        char *dst = (char *)crl_tensor_data(s->out) + t * ost[b] * (int64_t)es;
        crl__env_block_copy(dst, ds, crl_tensor_data(src), ss, s->ndim, s->shape, es);
    }
    if (count_leaves(cur) != r->nslots)
        return extra_key_error(r, cur, t, err);
    return CRL_OK;
}

crl_td *crl_env_rollout(crl_env *env, int64_t max_steps, crl_policy_fn policy, void *user, bool break_when_any_done,
                        bool auto_reset, crl_td *td, crl_error *err)
{
    if (!env) {
        crl_error_set(err, CRL_E_INVALID, "rollout: env is NULL");
        return NULL;
    }
    if (max_steps < 1) {
        crl_error_set(err, CRL_E_INVALID, "rollout: max_steps is %" G_GINT64_FORMAT "; give at least 1",
                      (gint64)max_steps);
        return NULL;
    }
    if (!auto_reset && !td) {
        crl_error_set(err, CRL_E_INVALID, "rollout: without auto_reset, give the TensorDict of the current root state "
                      "(as crl_env_reset returns it)");
        return NULL;
    }
    if (td && crl__env_check_batch(env, td, "rollout", err))
        return NULL;
    char nb[300];
    if (!auto_reset && !env->started) {
        crl_error_set(err, CRL_E_INVALID, "rollout: %s was never reset; reset it or pass auto_reset = true",
                      crl__env_name(env, nb, sizeof nb));
        return NULL;
    }
    crl_td *cur = NULL;
    if (auto_reset) {
        crl_td *r = crl_env_reset(env, td, err);
        if (!r)
            return NULL;
        cur = td ? crl_td_clone(td, err) : crl_td_ref(r);
        crl_td_unref(r);
    } else {
        cur = crl_td_clone(td, err);
    }
    if (!cur)
        return NULL;
    bool *rmask = g_new0(bool, (gsize)env->num);
    rollout r = { env, NULL, NULL, 0 };
    int64_t T = 0;
    int rc = CRL_OK;
    if (env->autoreset == CRL_AUTORESET_OFF) {
        bool any = false;
        for (int64_t i = 0; i < env->num; i++)
            any |= (rmask[i] = env->needs_reset[i]);
        if (any)
            rc = crl__env_reset_through(env, cur, rmask, false, err);
    }
    for (int64_t t = 0; !rc && t < max_steps; t++) {
        rc = policy ? policy(user, env, cur, err) : crl_env_rand_action(env, cur, err);
        if (rc) {
            crl_error_prefix(err, "rollout: step %" G_GINT64_FORMAT ": policy: ", (gint64)t);
            break;
        }
        if ((rc = crl_env_step(env, cur, err))) {
            crl_error_prefix(err, "rollout: step %" G_GINT64_FORMAT ": ", (gint64)t);
            break;
        }
        if (t == 0 && (rc = rollout_alloc(&r, cur, max_steps, err)))
            break;
        if ((rc = rollout_store(&r, cur, t, err)))
            break;
        T = t + 1;
        bool any_done = false;
        for (int64_t i = 0; i < env->num; i++)
            any_done |= env->done_now[i];
        if ((break_when_any_done && any_done) || t == max_steps - 1)
            break;
        if ((rc = crl__env_step_mdp_into(env, cur, cur, err)))
            break;
        if (env->autoreset == CRL_AUTORESET_OFF && any_done) {
            memcpy(rmask, env->done_now, sizeof(bool) * (size_t)env->num);
            if ((rc = crl__env_reset_through(env, cur, rmask, false, err)))
                crl_error_prefix(err, "rollout: step %" G_GINT64_FORMAT ": ", (gint64)t);
        }
    }
    g_free(rmask);
    crl_td_unref(cur);
    crl_td *result = NULL;
    if (!rc)
        result = T == max_steps ? crl_td_ref(r.out) : crl_td_slice(r.out, env->batch_ndim, 0, T, 1, err);
    rollout_clear(&r);
    return result;
}
