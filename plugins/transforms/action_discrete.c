/* DiscreteActionProjection (a wider discrete action space projected onto the env's) and ActionMask (legal actions). */
#include "config.h"
#include "action_group.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- DiscreteActionProjection ------------------------------------------- */

typedef struct dap {
    int64_t eff, max;
    char *key;
    bool include_forward, modulo;
    bool onehot, have_kind;
    crl_dtype dt;
    crl_transform_ctx *ctx;
    crl_rng rng;            /* standalone use, before any bind */
} dap;

static void dap_destroy(void *p)
{
    dap *t = p;
    if (!t)
        return;
    free(t->key);
    free(t);
}

static int dap_create(const crl_opts *o, void **out, crl_error *err)
{
    int64_t eff = 0, max = 0;
    const char *key = NULL, *proj = NULL;
    bool fwd = true;
    int rc;
    if ((rc = crl_opts_int(o, "num_actions_effective", &eff, err)) ||
        (rc = crl_opts_int(o, "max_actions", &max, err)) ||
        (rc = crl_opts_string(o, "action_key", &key, err)) || (rc = crl_opts_bool(o, "include_forward", &fwd, err)) ||
        (rc = crl_opts_string(o, "projection", &proj, err)))
        return rc;
    if (max < eff)
        return crl_error_set(err, CRL_E_CONFIG, "%s: [%s] max_actions = %lld is below num_actions_effective = %lld "
                             "(%s); max_actions must be >= num_actions_effective", crl_opts_origin(o, "max_actions"),
                             crl_opts_section(o), (long long)max, (long long)eff,
                             crl_opts_origin(o, "num_actions_effective"));
    dap *t = calloc(1, sizeof *t);
    if (!t || !(t->key = tf_strdup(key))) {
        free(t);
        return crl_error_set(err, CRL_E_NOMEM, "DiscreteActionProjection: out of memory");
    }
    t->eff = eff;
    t->max = max;
    t->include_forward = fwd;
    t->modulo = strcmp(proj, "modulo") == 0;
    crl_rng_init(&t->rng, 0, 0);
    *out = t;
    return CRL_OK;
}

static int dap_specs(void *p, crl_transform_specs *s, crl_error *err)
{
    dap *t = p;
    crl_spec *leaf = crl_spec_composite_get(s->action, t->key);
    if (!leaf || crl_spec_get_kind(leaf) == CRL_SPEC_COMPOSITE)
        return crl_transform_missing_key(err, "DiscreteActionProjection", t->key, s->action, "action spec");
    crl_spec_kind k = crl_spec_get_kind(leaf);
    if (k != CRL_SPEC_ONEHOT && k != CRL_SPEC_CATEGORICAL)
        return crl_error_set(err, CRL_E_DTYPE, "DiscreteActionProjection: action '%s' is %s %s; it needs a "
                             "OneHot or Categorical action", t->key, crl_spec_kind_name(k),
                             crl_dtype_name(crl_spec_dtype(leaf)));
    if (crl_spec_n(leaf) != t->eff)
        return crl_error_set(err, CRL_E_CONFIG, "DiscreteActionProjection: action '%s' has %lld actions but "
                             "num_actions_effective = %lld; set num_actions_effective = %lld", t->key,
                             (long long)crl_spec_n(leaf), (long long)t->eff, (long long)crl_spec_n(leaf));
    t->onehot = k == CRL_SPEC_ONEHOT;
    t->have_kind = true;
    t->dt = crl_spec_dtype(leaf);
    int nd = crl_spec_ndim(leaf);
    int64_t sh[CRL_MAX_DIMS];
    memcpy(sh, crl_spec_shape(leaf), sizeof(int64_t) * (size_t)nd);
    crl_spec *outer;
    crl_error e;
    crl_error_clear(&e);
    if (t->onehot) {
        sh[nd - 1] = t->max;
        outer = crl_spec_onehot(t->max, t->dt, nd, sh, &e);
    } else {
        outer = crl_spec_categorical(t->max, t->dt, nd, sh, &e);
    }
    if (!outer)
        return crl_error_pass(err, &e, CRL_E_INVALID);
    int rc = crl_spec_composite_set(s->action, t->key, outer, err);
    crl_spec_unref(outer);
    return rc;
}

static int dap_bind(void *p, crl_transform_ctx *ctx, crl_error *err)
{
    (void)err;
    ((dap *)p)->ctx = ctx;
    return CRL_OK;
}

/* Index of the first maximum of n values at x[base..]. */
static int64_t argmax_row(const crl_tensor *x, int64_t base, int64_t n)
{
    int64_t best = 0;
    double bv = crl_tensor_flat_get(x, base);
    for (int64_t j = 1; j < n; j++) {
        double v = crl_tensor_flat_get(x, base + j);
        if (v > bv) {
            bv = v;
            best = j;
        }
    }
    return best;
}

static int dap_inv(void *p, crl_td *td, crl_error *err)
{
    dap *t = p;
    crl_error e;
    crl_error_clear(&e);
    crl_tensor *x = tf_td_need(td, t->key, "DiscreteActionProjection", &e);
    if (!x)
        return crl_error_pass(err, &e, CRL_E_NOT_FOUND);
    crl_rng *rng = t->ctx ? crl_transform_ctx_rng(t->ctx) : &t->rng;
    int nd = crl_tensor_ndim(x);
    int64_t sh[CRL_MAX_DIMS];
    memcpy(sh, crl_tensor_shape(x), sizeof(int64_t) * (size_t)nd);
    int64_t rows = crl_tensor_numel(x);
    if (t->onehot) {
        if (nd == 0 || sh[nd - 1] != t->max)
            return crl_error_set(err, CRL_E_SHAPE, "DiscreteActionProjection: action '%s' has last dim %lld; it "
                                 "must be max_actions = %lld", t->key, (long long)(nd ? sh[nd - 1] : 0),
                                 (long long)t->max);
        rows /= t->max;
        sh[nd - 1] = t->eff;
    }
    crl_tensor *y = crl_tensor_new(t->dt, nd, sh, &e);
    if (!y)
        return crl_error_pass(err, &e, CRL_E_NOMEM);
    for (int64_t r = 0; r < rows; r++) {
        int64_t a = t->onehot ? argmax_row(x, r * t->max, t->max) : (int64_t)crl_tensor_flat_get(x, r);
        if (a < 0 || a >= t->max) {
            crl_tensor_unref(y);
            return crl_error_set(err, CRL_E_RANGE, "DiscreteActionProjection: action '%s' holds %lld at row %lld; "
                                 "actions are in [0, %lld)", t->key, (long long)a, (long long)r, (long long)t->max);
        }
        if (a >= t->eff)
            a = t->modulo ? a % t->eff : (int64_t)crl_rng_below(rng, (uint64_t)t->eff);
        if (t->onehot)
            crl_tensor_flat_set(y, r * t->eff + a, 1.0);
        else
            crl_tensor_flat_set(y, r, (double)a);
    }
    int rc = crl_td_set(td, t->key, y, err);
    crl_tensor_unref(y);
    return rc;
}

/* Forward (stored data): one-hot actions of the env's width widened to max_actions. */
static int dap_call(void *p, crl_td *td, crl_error *err)
{
    dap *t = p;
    if (!t->include_forward || (t->have_kind && !t->onehot))
        return CRL_OK;
    crl_error e;
    crl_error_clear(&e);
    crl_tensor *x = tf_td_need(td, t->key, "DiscreteActionProjection", &e);
    if (!x)
        return crl_error_pass(err, &e, CRL_E_NOT_FOUND);
    int nd = crl_tensor_ndim(x);
    if (nd == 0 || crl_tensor_shape(x)[nd - 1] != t->eff || t->eff == t->max)
        return CRL_OK;
    int64_t sh[CRL_MAX_DIMS];
    memcpy(sh, crl_tensor_shape(x), sizeof(int64_t) * (size_t)nd);
    sh[nd - 1] = t->max;
    crl_tensor *y = crl_tensor_new(crl_tensor_dtype(x), nd, sh, &e);
    if (!y)
        return crl_error_pass(err, &e, CRL_E_NOMEM);
    int64_t rows = crl_tensor_numel(x) / t->eff;
    for (int64_t r = 0; r < rows; r++)
        crl_tensor_flat_set(y, r * t->max + argmax_row(x, r * t->eff, t->eff), 1.0);
    int rc = crl_td_set(td, t->key, y, err);
    crl_tensor_unref(y);
    return rc;
}

static int dap_noop_reset(void *p, crl_transform_ctx *ctx, crl_td *td, const bool *mask, crl_error *err)
{
    (void)p, (void)ctx, (void)td, (void)mask, (void)err;
    return CRL_OK;
}

static int dap_noop_step(void *p, crl_transform_ctx *ctx, crl_td *td, crl_td *next, crl_error *err)
{
    (void)p, (void)ctx, (void)td, (void)next, (void)err;
    return CRL_OK;
}

static const crl_transform_ops dap_ops = {
    .struct_size = sizeof(crl_transform_ops),
    .create = dap_create,
    .transform_specs = dap_specs,
    .bind = dap_bind,
    .call = dap_call,
    .reset = dap_noop_reset,
    .step = dap_noop_step,
    .inv = dap_inv,
    .destroy = dap_destroy,
};

static const crl_option dap_options[] = {
    { "num_actions_effective", CRL_OPT_INT, CRL_OPT_REQUIRED | CRL_OPT_RANGE, NULL, 1, 1e15, NULL,
      "the env's number of actions" },
    { "max_actions", CRL_OPT_INT, CRL_OPT_REQUIRED | CRL_OPT_RANGE, NULL, 1, 1e15, NULL,
      "the number of actions the policy chooses from" },
    { "action_key", CRL_OPT_STRING, 0, "action", 0, 0, NULL, "the action key" },
    { "include_forward", CRL_OPT_BOOL, 0, "true", 0, 0, NULL,
      "applied standalone (stored data), widen one-hot actions to max_actions" },
    { "projection", CRL_OPT_ENUM, 0, "random", 0, 0, "random|modulo",
      "an action >= num_actions_effective becomes a random valid action (TorchRL) or action % num_actions_effective" },
    CRL_OPTIONS_END
};

/* ---- ActionMask ----------------------------------------------------------- */

typedef struct amask {
    char *akey, *mkey;
    bool onehot;
    int64_t n;
    crl_tensor *mask;       /* the latest mask seen in the env's output */
    crl_transform_ctx *ctx;
} amask;

static void amask_destroy(void *p)
{
    amask *t = p;
    if (!t)
        return;
    free(t->akey);
    free(t->mkey);
    crl_tensor_unref(t->mask);
    free(t);
}

static int amask_create(const crl_opts *o, void **out, crl_error *err)
{
    const char *a = NULL, *m = NULL;
    int rc;
    if ((rc = crl_opts_string(o, "action_key", &a, err)) || (rc = crl_opts_string(o, "mask_key", &m, err)))
        return rc;
    amask *t = calloc(1, sizeof *t);
    if (!t || !(t->akey = tf_strdup(a)) || !(t->mkey = tf_strdup(m))) {
        amask_destroy(t);
        return crl_error_set(err, CRL_E_NOMEM, "ActionMask: out of memory");
    }
    *out = t;
    return CRL_OK;
}

static int amask_specs(void *p, crl_transform_specs *s, crl_error *err)
{
    amask *t = p;
    crl_spec *act = crl_spec_composite_get(s->action, t->akey);
    if (!act || crl_spec_get_kind(act) == CRL_SPEC_COMPOSITE)
        return crl_transform_missing_key(err, "ActionMask", t->akey, s->action, "action spec");
    crl_spec_kind k = crl_spec_get_kind(act);
    if (k != CRL_SPEC_ONEHOT && k != CRL_SPEC_CATEGORICAL)
        return crl_error_set(err, CRL_E_DTYPE, "ActionMask: action '%s' is %s; masks apply to OneHot or "
                             "Categorical actions", t->akey, crl_spec_kind_name(k));
    crl_error e;
    crl_error_clear(&e);
    crl_spec *m = tf_specs_need(s, t->mkey, "ActionMask", &e);
    if (!m)
        return crl_error_pass(err, &e, CRL_E_NOT_FOUND);
    t->onehot = k == CRL_SPEC_ONEHOT;
    t->n = crl_spec_n(act);
    int and = crl_spec_ndim(act), mnd = crl_spec_ndim(m);
    const int64_t *ash = crl_spec_shape(act), *msh = crl_spec_shape(m);
    bool ok = crl_spec_dtype(m) == CRL_BOOL;
    if (t->onehot)
        ok = ok && mnd == and && memcmp(ash, msh, sizeof(int64_t) * (size_t)and) == 0;
    else
        ok = ok && mnd == and + 1 && memcmp(ash, msh, sizeof(int64_t) * (size_t)and) == 0 && msh[and] == t->n;
    if (!ok) {
        char *want = NULL, *got = crl_shape_repr(mnd, msh);
        int64_t w[CRL_MAX_DIMS + 1];
        memcpy(w, ash, sizeof(int64_t) * (size_t)and);
        w[and] = t->n;
        want = crl_shape_repr(t->onehot ? and : and + 1, w);
        int rc = crl_error_set(err, crl_spec_dtype(m) == CRL_BOOL ? CRL_E_SHAPE : CRL_E_DTYPE,
                               "ActionMask: mask '%s' is %s %s; it must be bool of shape %s (one flag per action)",
                               t->mkey, crl_dtype_name(crl_spec_dtype(m)), got ? got : "?", want ? want : "?");
        crl_free(want);
        crl_free(got);
        return rc;
    }
    return CRL_OK;
}

static int amask_bind(void *p, crl_transform_ctx *ctx, crl_error *err)
{
    (void)err;
    amask *t = p;
    t->ctx = ctx;
    crl_tensor_unref(t->mask);
    t->mask = NULL;
    return CRL_OK;
}

/* Put the latest mask on the action spec seen outside (TorchRL's
 * update_mask), so random actions and the host's action check honour it.
 * An action renamed by a later transform is not the outside's: skip it. */
static int amask_publish(amask *t, crl_error *err)
{
    if (!t->ctx)
        return CRL_OK;
    crl_error e = { 0 };
    int rc = crl_transform_ctx_update_action_mask(t->ctx, t->akey, t->mask, &e);
    if (rc == CRL_E_NOT_FOUND)
        return CRL_OK;
    return rc ? crl_error_pass(err, &e, rc) : CRL_OK;
}

/* Keep a copy of the mask the env just produced. */
static int amask_keep(amask *t, crl_td *td, crl_error *err)
{
    crl_error e;
    crl_error_clear(&e);
    crl_tensor *m = tf_td_need(td, t->mkey, "ActionMask", &e);
    int rc;
    if (!m)
        return crl_error_pass(err, &e, CRL_E_NOT_FOUND);
    if (t->mask && crl_tensor_same_shape(t->mask, m) && crl_tensor_dtype(m) == CRL_BOOL) {
        if ((rc = crl_tensor_copy(t->mask, m, err)))
            return rc;
        return amask_publish(t, err);
    }
    crl_tensor *c = crl_tensor_clone(m, &e);
    if (!c)
        return crl_error_pass(err, &e, CRL_E_NOMEM);
    crl_tensor_unref(t->mask);
    t->mask = c;
    return amask_publish(t, err);
}

static int amask_reset(void *p, crl_transform_ctx *ctx, crl_td *td, const bool *mask, crl_error *err)
{
    (void)ctx, (void)mask;
    return amask_keep(p, td, err);
}

static int amask_step(void *p, crl_transform_ctx *ctx, crl_td *td, crl_td *next, crl_error *err)
{
    (void)ctx, (void)td;
    return amask_keep(p, next, err);
}

static int amask_inv(void *p, crl_td *td, crl_error *err)
{
    amask *t = p;
    crl_error e;
    crl_error_clear(&e);
    crl_tensor *a = tf_td_need(td, t->akey, "ActionMask", &e);
    if (!a)
        return crl_error_pass(err, &e, CRL_E_NOT_FOUND);
    /* The mask next to the action (the policy's input) if the td holds it, else the env's latest. */
    const crl_tensor *m = crl_td_get(td, t->mkey);
    if (!m)
        m = t->mask;
    if (!m)
        return crl_error_set(err, CRL_E_INVALID, "ActionMask: no mask '%s' seen yet; reset the env first", t->mkey);
    int64_t rows = t->onehot ? crl_tensor_numel(a) / t->n : crl_tensor_numel(a);
    if (crl_tensor_numel(m) != rows * t->n)
        return crl_error_set(err, CRL_E_SHAPE, "ActionMask: mask '%s' has %lld flags for %lld actions of %lld "
                             "choices", t->mkey, (long long)crl_tensor_numel(m), (long long)rows, (long long)t->n);
    int64_t num = t->ctx ? crl_transform_ctx_num(t->ctx) : 1;
    int64_t per_env = num > 0 && rows % num == 0 ? rows / num : rows;
    for (int64_t r = 0; r < rows; r++) {
        int64_t c = t->onehot ? argmax_row(a, r * t->n, t->n) : (int64_t)crl_tensor_flat_get(a, r);
        if (c < 0 || c >= t->n)
            continue; /* out of the domain: the env's own action check names it */
        if (crl_tensor_flat_get(m, r * t->n + c) == 0.0) {
            char lab[64];
            return crl_error_set(err, CRL_E_INVALID, "ActionMask: %s chose action %lld, which its mask '%s' "
                                 "forbids; pick an action whose mask entry is true",
                                 tfa_env_label(lab, sizeof lab, r / per_env, num), (long long)c, t->mkey);
        }
    }
    return CRL_OK;
}

static const crl_transform_ops amask_ops = {
    .struct_size = sizeof(crl_transform_ops),
    .create = amask_create,
    .transform_specs = amask_specs,
    .bind = amask_bind,
    .reset = amask_reset,
    .step = amask_step,
    .inv = amask_inv,
    .destroy = amask_destroy,
};

static const crl_option amask_options[] = {
    { "action_key", CRL_OPT_STRING, 0, "action", 0, 0, NULL, "the action key" },
    { "mask_key", CRL_OPT_STRING, 0, "action_mask", 0, 0, NULL, "the bool mask of legal actions in the env's output" },
    CRL_OPTIONS_END
};

int tfa_register_discrete(crl_host *host, crl_error *err)
{
    int rc;
    if ((rc = tf_register(host, "DiscreteActionProjection",
                          "a policy over max_actions actions on an env with fewer; extra actions are projected",
                          dap_options, &dap_ops, err)))
        return rc;
    return tf_register(host, "ActionMask", "refuse actions the env's action mask forbids", amask_options, &amask_ops,
                       err);
}
