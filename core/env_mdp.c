/* step_mdp: move a step's "next" entries to the root (TorchRL's torchrl.envs.utils.step_mdp). */
#include "env-private.h"

#include <string.h>

#define MDP_MAX_DEPTH 64

typedef struct mdp_walk {
    crl_env *env;
    const char *path[MDP_MAX_DEPTH];
    int depth;
} mdp_walk;

/* path + leaf spells exactly the components comps. */
static bool path_is(const mdp_walk *w, const char *leaf, char *const *comps)
{
    int i = 0;
    for (; i < w->depth; i++)
        if (!comps[i] || strcmp(comps[i], w->path[i]) != 0)
            return false;
    return comps[i] && strcmp(comps[i], leaf) == 0 && !comps[i + 1];
}

/* Rewards never reach the root; at the root, actions do not stay. */
static bool excluded(const mdp_walk *w, const char *leaf, bool root)
{
    const crl_env *env = w->env;
    for (size_t i = 0; i < env->nleaves; i++) {
        const crl__env_leaf *l = &env->leaves[i];
        if ((l->role == CRL__ROLE_REWARD || (root && l->role == CRL__ROLE_ACTION)) && path_is(w, leaf, l->comps))
            return true;
    }
    return false;
}

/* Store src's values at key of dst_level, reusing a tensor that fits. */
static int put_tensor(crl_td *dst_level, const char *key, crl_tensor *src, crl_error *err)
{
    crl_tensor *d = crl_td_get(dst_level, key);
    if (d == src)
        return CRL_OK;
    if (d && crl_tensor_dtype(d) == crl_tensor_dtype(src) && crl_tensor_same_shape(d, src))
        return crl_tensor_copy(d, src, err);
    crl_tensor *c = crl_tensor_clone(src, err);
    if (!c)
        return err ? err->code : CRL_E_NOMEM;
    int rc = crl_td_set(dst_level, key, c, err);
    crl_tensor_unref(c);
    return rc;
}

static crl_td *dst_sub(crl_td *dst_level, const char *key, const crl_td *src_sub, crl_error *err)
{
    crl_td *d = crl_td_get_td(dst_level, key);
    if (d)
        return d;
    d = crl_td_new(crl_td_batch_ndim(src_sub), crl_td_batch_shape(src_sub), err);
    if (!d)
        return NULL;
    int rc = crl_td_set_td(dst_level, key, d, err);
    crl_td_unref(d);
    return rc ? NULL : crl_td_get_td(dst_level, key);
}

static int push(mdp_walk *w, const char *key, crl_error *err)
{
    if (w->depth >= MDP_MAX_DEPTH)
        return crl_error_set(err, CRL_E_INVALID, "step_mdp: keys nest deeper than %d levels", MDP_MAX_DEPTH);
    w->path[w->depth++] = key;
    return CRL_OK;
}

/* Root entries that are not actions, rewards, "next", or superseded by an
 * entry of next at the same key. */
static int keep_root(mdp_walk *w, const crl_td *level, const crl_td *next_level, crl_td *dst_level, crl_error *err)
{
    size_t n = crl_td_len(level);
    for (size_t i = 0; i < n; i++) {
        const char *key = crl_td_key_at(level, i);
        if (w->depth == 0 && !strcmp(key, "next"))
            continue;
        crl_tensor *t = crl_td_tensor_at(level, i);
        if (t) {
            if (excluded(w, key, true) || (next_level && crl_td_has(next_level, key)))
                continue;
            int rc = put_tensor(dst_level, key, t, err);
            if (rc)
                return rc;
            continue;
        }
        crl_td *sub = crl_td_td_at(level, i);
        crl_td *next_sub = next_level ? crl_td_get_td(next_level, key) : NULL;
        if (next_level && !next_sub && crl_td_get(next_level, key))
            continue;
        crl_td *d = dst_sub(dst_level, key, sub, err);
        int rc = d ? push(w, key, err) : (err ? err->code : CRL_E_INVALID);
        if (rc)
            return rc;
        rc = keep_root(w, sub, next_sub, d, err);
        w->depth--;
        if (rc)
            return rc;
    }
    return CRL_OK;
}

/* Every entry of next but the rewards, at the same key of dst. */
static int copy_next(mdp_walk *w, const crl_td *next_level, crl_td *dst_level, crl_error *err)
{
    size_t n = crl_td_len(next_level);
    for (size_t i = 0; i < n; i++) {
        const char *key = crl_td_key_at(next_level, i);
        crl_tensor *t = crl_td_tensor_at(next_level, i);
        int rc;
        if (t) {
            if (excluded(w, key, false))
                continue;
            if ((rc = put_tensor(dst_level, key, t, err)))
                return rc;
            continue;
        }
        crl_td *sub = crl_td_td_at(next_level, i);
        crl_td *d = dst_sub(dst_level, key, sub, err);
        rc = d ? push(w, key, err) : (err ? err->code : CRL_E_INVALID);
        if (rc)
            return rc;
        rc = copy_next(w, sub, d, err);
        w->depth--;
        if (rc)
            return rc;
    }
    return CRL_OK;
}

int crl__env_step_mdp_into(crl_env *env, const crl_td *td, crl_td *dst, crl_error *err)
{
    const crl_td *next = crl_td_get_td(td, "next");
    if (!next)
        return crl_error_set(err, CRL_E_NOT_FOUND, "step_mdp: the TensorDict has no 'next' entries; call crl_env_step "
                             "on it first");
    mdp_walk w;
    w.env = env;
    w.depth = 0;
    int rc = keep_root(&w, td, next, dst, err);
    if (!rc)
        rc = copy_next(&w, next, dst, err);
    if (rc) {
        crl_error_prefix(err, "step_mdp: ");
        return rc;
    }
    if (env->autoreset != CRL_AUTORESET_SAME_STEP || !env->any_just_reset)
        return CRL_OK;
    /* same_step: the envs that ended were reset inside the step; their
     * root entries are the reset ones. */
    for (size_t j = 0; j < env->nleaves; j++) {
        const crl__env_leaf *l = &env->leaves[j];
        if (!l->rst || !l->exposed)
            continue;
        crl_tensor *d = crl_td_get_k(dst, l->k);
        if (!d || crl_tensor_dtype(d) != crl_tensor_dtype(l->ubuf) || !crl_tensor_same_shape(d, l->ubuf))
            continue;
        for (int64_t i = 0; i < env->num; i++)
            if (env->just_reset[i])
                crl__env_row_to_user(env, d, l, l->rst, i);
    }
    return CRL_OK;
}

static int check_args(const crl_env *env, const crl_td *td, const char *fn, crl_error *err)
{
    if (!env || !td)
        return crl_error_set(err, CRL_E_INVALID, "%s: %s is NULL", fn, !env ? "env" : "the TensorDict");
    return CRL_OK;
}

crl_td *crl_env_step_mdp(crl_env *env, const crl_td *td, crl_error *err)
{
    if (check_args(env, td, "step_mdp", err))
        return NULL;
    crl_td *dst = crl_td_new(crl_td_batch_ndim(td), crl_td_batch_shape(td), err);
    if (dst && crl__env_step_mdp_into(env, td, dst, err)) {
        crl_td_unref(dst);
        return NULL;
    }
    return dst;
}

int crl_env_step_mdp_into(crl_env *env, const crl_td *td, crl_td *dst, crl_error *err)
{
    int rc = check_args(env, td, "step_mdp_into", err);
    if (rc)
        return rc;
    if (!dst)
        return crl_error_set(err, CRL_E_INVALID, "step_mdp_into: the destination TensorDict is NULL");
    int nd = crl_td_batch_ndim(td);
    if (crl_td_batch_ndim(dst) != nd ||
        memcmp(crl_td_batch_shape(dst), crl_td_batch_shape(td), sizeof(int64_t) * (size_t)nd) != 0) {
        char *a = crl__env_dims(nd, crl_td_batch_shape(td));
        char *b = crl__env_dims(crl_td_batch_ndim(dst), crl_td_batch_shape(dst));
        crl_error_set(err, CRL_E_SHAPE, "step_mdp_into: the destination has batch shape %s but the source has %s", b, a);
        crl_free(a);
        crl_free(b);
        return CRL_E_SHAPE;
    }
    return crl__env_step_mdp_into(env, td, dst, err);
}
