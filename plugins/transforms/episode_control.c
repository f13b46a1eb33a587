/* NoopResetEnv (random steps after a reset) and FrameSkipTransform (repeat an action, sum the rewards). */
#include "config.h"
#include "action_group.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The env's reward leaves, from the parent's reward spec (usually just "reward"). */
static char **reward_keys(crl_transform_ctx *ctx, const char *who, crl_error *err)
{
    const crl_transform_specs *ps = crl_transform_ctx_parent_specs(ctx);
    char **k = tfa_spec_leaf_keys(ps ? ps->reward : NULL);
    if (!k)
        crl_error_set(err, CRL_E_NOMEM, "%s: out of memory", who);
    return k;
}

/* ---- NoopResetEnv ---------------------------------------------------------- */

typedef struct noop {
    int64_t noops;
    bool random;
    bool *ended;            /* num flags */
    int64_t num;
    char **rkeys;
} noop;

static void noop_destroy(void *p)
{
    noop *t = p;
    if (!t)
        return;
    free(t->ended);
    tfa_strv_free(t->rkeys);
    free(t);
}

static int noop_create(const crl_opts *o, void **out, crl_error *err)
{
    noop *t = calloc(1, sizeof *t);
    if (!t)
        return crl_error_set(err, CRL_E_NOMEM, "NoopResetEnv: out of memory");
    int rc;
    if ((rc = crl_opts_int(o, "noops", &t->noops, err)) || (rc = crl_opts_bool(o, "random", &t->random, err))) {
        free(t);
        return rc;
    }
    if (t->random && t->noops < 1) {
        free(t);
        return crl_error_set(err, CRL_E_CONFIG, "%s: [%s] noops = 0 with random = true draws from an empty range "
                             "[0, 0); give noops >= 1, or random = false", crl_opts_origin(o, "noops"),
                             crl_opts_section(o));
    }
    *out = t;
    return CRL_OK;
}

static int noop_bind(void *p, crl_transform_ctx *ctx, crl_error *err)
{
    noop *t = p;
    int64_t num = crl_transform_ctx_num(ctx);
    bool *e = calloc((size_t)(num > 0 ? num : 1), sizeof *e);
    char **rk = reward_keys(ctx, "NoopResetEnv", err);
    if (!e || !rk) {
        free(e);
        tfa_strv_free(rk);
        /* reward_keys fails only for memory too, with the same message */
        return crl_error_set(err, CRL_E_NOMEM, "NoopResetEnv: out of memory");
    }
    free(t->ended);
    tfa_strv_free(t->rkeys);
    t->ended = e;
    t->rkeys = rk;
    t->num = num;
    return CRL_OK;
}

/* step_mdp on w: next's entries (but the reward) to the root, then no "next" and no "action". */
static int move_next(noop *t, crl_td *w, crl_error *err)
{
    crl_td *next = crl_td_get_td(w, "next");
    if (!next)
        return crl_error_set(err, CRL_E_RUNTIME, "NoopResetEnv: the parent's step wrote no 'next'");
    int rc = CRL_OK;
    for (size_t i = 0; i < crl_td_len(next) && !rc; i++) {
        const char *k = crl_td_key_at(next, i);
        if (tfa_strv_has(t->rkeys, k))
            continue;
        crl_tensor *x = crl_td_tensor_at(next, i);
        rc = x ? crl_td_set(w, k, x, err) : crl_td_set_td(w, k, crl_td_td_at(next, i), err);
    }
    if (!rc)
        rc = crl_td_del(w, "next", err);
    if (!rc && crl_td_has(w, "action"))
        rc = crl_td_del(w, "action", err);
    return rc;
}

static int noop_reset(void *p, crl_transform_ctx *ctx, crl_td *td, const bool *mask, crl_error *err)
{
    noop *t = p;
    int64_t num = t->num;
    int64_t n = t->random ? (int64_t)crl_rng_below(crl_transform_ctx_rng(ctx), (uint64_t)t->noops) : t->noops;
    if (n == 0)
        return CRL_OK;
    if (mask) {
        int64_t k = 0;
        for (int64_t i = 0; i < num; i++)
            k += mask[i];
        if (k == 0)
            return CRL_OK;
        if (k < num)
            return crl_error_set(err, CRL_E_UNSUPPORTED, "%s: a partial reset (%lld of %lld envs) cannot run "
                                 "no-op steps for those envs alone: the env steps all its envs at once. Reset "
                                 "every env together, or use num_envs = 1", crl_transform_ctx_name(ctx),
                                 (long long)k, (long long)num);
    }
    /* Work on a shallow copy so the caller's "next" and "action" stay as they were. */
    crl_error e;
    crl_error_clear(&e);
    crl_td *w = crl_td_new(crl_td_batch_ndim(td), crl_td_batch_shape(td), &e);
    if (!w)
        return crl_error_pass(err, &e, CRL_E_NOMEM);
    int rc = CRL_OK;
    for (size_t i = 0; i < crl_td_len(td) && !rc; i++) {
        const char *k = crl_td_key_at(td, i);
        if (strcmp(k, "next") == 0 || strcmp(k, "action") == 0)
            continue;
        crl_tensor *x = crl_td_tensor_at(td, i);
        rc = x ? crl_td_set(w, k, x, err) : crl_td_set_td(w, k, crl_td_td_at(td, i), err);
    }
    for (int64_t s = 0; s < n && !rc; s++) {
        rc = crl_transform_ctx_parent_rand_action(ctx, w, err);
        if (!rc)
            rc = crl_transform_ctx_parent_step(ctx, w, err);
        if (!rc)
            rc = move_next(t, w, err);
        if (rc)
            break;
        /* An env that ended during the no-ops starts again. */
        crl_tensor *done = tf_td_need(w, "done", crl_transform_ctx_name(ctx), &e);
        if (!done) {
            rc = crl_error_pass(err, &e, CRL_E_NOT_FOUND);
            break;
        }
        bool any = false;
        for (int64_t i = 0; i < num; i++)
            any |= (t->ended[i] = tfa_flag(done, i));
        if (any)
            rc = crl_transform_ctx_parent_reset(ctx, w, t->ended, err);
    }
    /* Only the root entries the reset output had or the steps made go back. */
    for (size_t i = 0; i < crl_td_len(w) && !rc; i++) {
        const char *k = crl_td_key_at(w, i);
        crl_tensor *x = crl_td_tensor_at(w, i);
        rc = x ? crl_td_set(td, k, x, err) : crl_td_set_td(td, k, crl_td_td_at(w, i), err);
    }
    crl_td_unref(w);
    return rc;
}

static int noop_repr(void *p, char *buf, size_t size)
{
    const noop *t = p;
    return snprintf(buf, size, "NoopResetEnv(noops=%lld, random=%s)", (long long)t->noops,
                    t->random ? "True" : "False");
}

static const crl_transform_ops noop_ops = {
    .struct_size = sizeof(crl_transform_ops),
    .create = noop_create,
    .bind = noop_bind,
    .reset = noop_reset,
    .destroy = noop_destroy,
    .repr = noop_repr,
};

static const crl_option noop_options[] = {
    { "noops", CRL_OPT_INT, CRL_OPT_RANGE, "30", 0, 1e9, NULL,
      "random steps after a reset: exactly this many, or a draw in [0, noops) with random" },
    { "random", CRL_OPT_BOOL, 0, "true", 0, 0, NULL, "draw the number of steps in [0, noops) at each reset" },
    CRL_OPTIONS_END
};

/* ---- FrameSkipTransform ------------------------------------------------------ */

typedef struct fskip {
    int64_t k;
    int64_t num;
    bool *active, *ended;
    char **rkeys;
} fskip;

static void fskip_destroy(void *p)
{
    fskip *t = p;
    if (!t)
        return;
    free(t->active);
    free(t->ended);
    tfa_strv_free(t->rkeys);
    free(t);
}

static int fskip_create(const crl_opts *o, void **out, crl_error *err)
{
    fskip *t = calloc(1, sizeof *t);
    if (!t)
        return crl_error_set(err, CRL_E_NOMEM, "FrameSkipTransform: out of memory");
    int rc = crl_opts_int(o, "frame_skip", &t->k, err);
    if (rc) {
        free(t);
        return rc;
    }
    *out = t;
    return CRL_OK;
}

static int fskip_bind(void *p, crl_transform_ctx *ctx, crl_error *err)
{
    fskip *t = p;
    int64_t num = crl_transform_ctx_num(ctx);
    bool *a = calloc((size_t)(num > 0 ? num : 1), sizeof *a);
    bool *d = calloc((size_t)(num > 0 ? num : 1), sizeof *d);
    char **rk = reward_keys(ctx, "FrameSkipTransform", err);
    if (!a || !d || !rk) {
        free(a);
        free(d);
        tfa_strv_free(rk);
        /* reward_keys fails only for memory too, with the same message */
        return crl_error_set(err, CRL_E_NOMEM, "FrameSkipTransform: out of memory");
    }
    free(t->active);
    free(t->ended);
    tfa_strv_free(t->rkeys);
    t->active = a;
    t->ended = d;
    t->rkeys = rk;
    t->num = num;
    return CRL_OK;
}

/* Rows of every leaf of src (path prefix) into acc for the active envs; reward leaves add up. */
static int merge(fskip *t, crl_td *acc, const crl_td *src, const char *prefix, crl_error *err)
{
    for (size_t i = 0; i < crl_td_len(src); i++) {
        char key[512];
        snprintf(key, sizeof key, "%s%s%s", prefix, *prefix ? "." : "", crl_td_key_at(src, i));
        crl_td *sub = crl_td_td_at(src, i);
        if (sub) {
            int rc = merge(t, acc, sub, key, err);
            if (rc)
                return rc;
            continue;
        }
        crl_tensor *x = crl_td_tensor_at(src, i);
        crl_tensor *a = crl_td_get(acc, key);
        if (!a || !crl_tensor_same_shape(a, x) || crl_tensor_dtype(a) != crl_tensor_dtype(x)) {
            /* A key the first frame did not write: take it whole. */
            crl_error e;
            crl_error_clear(&e);
            crl_tensor *c = crl_tensor_clone(x, &e);
            int rc = c ? crl_td_set(acc, key, c, err) : crl_error_pass(err, &e, CRL_E_NOMEM);
            crl_tensor_unref(c);
            if (rc)
                return rc;
            continue;
        }
        bool is_reward = tfa_strv_has(t->rkeys, key);
        int64_t r = tfa_row_elems(x, t->num);
        for (int64_t e = 0; e < t->num; e++) {
            if (!t->active[e])
                continue;
            if (is_reward)
                for (int64_t j = 0; j < r; j++)
                    crl_tensor_flat_set(a, e * r + j, crl_tensor_flat_get(a, e * r + j) +
                                                          crl_tensor_flat_get(x, e * r + j));
            else
                tfa_row_copy(a, x, e, t->num);
        }
    }
    return CRL_OK;
}

static int fskip_step(void *p, crl_transform_ctx *ctx, crl_td *td, crl_td *next, crl_error *err)
{
    fskip *t = p;
    if (t->k <= 1)
        return CRL_OK;
    const char *who = crl_transform_ctx_name(ctx);
    crl_error le;
    crl_error_clear(&le);
    crl_td *acc = crl_td_clone(next, &le);
    if (!acc)
        return crl_error_pass(err, &le, CRL_E_NOMEM);
    crl_td_ref(next);
    int rc = CRL_OK;
    for (int64_t s = 1; s < t->k && !rc; s++) {
        /* Envs that ended keep the outputs of the frame that ended them. */
        crl_tensor *done = tf_td_need(acc, "done", who, &le);
        if (!done) {
            rc = crl_error_pass(err, &le, CRL_E_NOT_FOUND);
            break;
        }
        bool any = false, ended = false;
        for (int64_t e = 0; e < t->num; e++) {
            any |= (t->active[e] = !tfa_flag(done, e));
            ended |= (t->ended[e] = !t->active[e]);
        }
        if (!any)
            break;
        /* The parent steps every env, and a done env may not be stepped: the envs that ended restart now (their
         * outputs stay those of the frame that ended them; the caller still sees done and resets them again). */
        if (ended) {
            crl_td *scratch = crl_td_new(crl_td_batch_ndim(td), crl_td_batch_shape(td), &le);
            rc = scratch ? crl_transform_ctx_parent_reset(ctx, scratch, t->ended, err)
                         : crl_error_pass(err, &le, CRL_E_NOMEM);
            crl_td_unref(scratch);
            if (rc)
                break;
        }
        rc = crl_transform_ctx_parent_step(ctx, td, err);
        crl_td *nn = rc ? NULL : crl_td_get_td(td, "next");
        if (!rc && !nn)
            rc = crl_error_set(err, CRL_E_RUNTIME, "%s: the parent's step wrote no 'next'", who);
        if (!rc)
            rc = merge(t, acc, nn, "", err);
    }
    /* The result goes into the "next" the host handed over, and td points at it again. */
    if (!rc)
        rc = crl_td_copy_into(next, acc, err);
    if (!rc && crl_td_get_td(td, "next") != next)
        rc = crl_td_set_td(td, "next", next, err);
    crl_td_unref(next);
    crl_td_unref(acc);
    return rc;
}

static int fskip_reset(void *p, crl_transform_ctx *ctx, crl_td *td, const bool *mask, crl_error *err)
{
    (void)p, (void)ctx, (void)td, (void)mask, (void)err;
    return CRL_OK;
}

static const crl_transform_ops fskip_ops = {
    .struct_size = sizeof(crl_transform_ops),
    .create = fskip_create,
    .bind = fskip_bind,
    .reset = fskip_reset,
    .step = fskip_step,
    .destroy = fskip_destroy,
};

static const crl_option fskip_options[] = {
    { "frame_skip", CRL_OPT_INT, CRL_OPT_RANGE, "1", 1, 1e9, NULL,
      "base steps per step: the action repeats and the rewards add up (an env stops at its end)" },
    CRL_OPTIONS_END
};

int tfa_register_episode(crl_host *host, crl_error *err)
{
    int rc;
    if ((rc = tf_register(host, "NoopResetEnv", "random steps of the env after every reset (Atari no-op starts)",
                          noop_options, &noop_ops, err)))
        return rc;
    return tf_register(host, "FrameSkipTransform", "repeat each action frame_skip times, summing the rewards",
                       fskip_options, &fskip_ops, err);
}
