/* ActionScaling: the policy acts in [-1, 1] (or [0, 1]); the inverse maps onto the parent's Bounded action range. */
#include "config.h"
#include "action_group.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef struct scaling {
    bool standard_normal;   /* policy range [-1, 1]; else [0, 1] */
    tf_keys keys, inv;      /* one key each (TorchRL: one action per instance) */
    double *loc, *scale;    /* per element of the parent's action (batch included) */
    int64_t numel;
    crl_dtype dt;
} scaling;

static void scaling_destroy(void *p)
{
    scaling *t = p;
    if (!t)
        return;
    tf_keys_free(&t->keys);
    tf_keys_free(&t->inv);
    free(t->loc);
    free(t->scale);
    free(t);
}

static int scaling_create(const crl_opts *o, void **out, crl_error *err)
{
    scaling *t = calloc(1, sizeof *t);
    if (!t)
        return crl_error_set(err, CRL_E_NOMEM, "ActionScaling: out of memory");
    int rc = crl_opts_bool(o, "standard_normal", &t->standard_normal, err);
    if (!rc)
        rc = tf_keys_read(o, "in_keys_inv", "out_keys_inv", false, "ActionScaling", &t->inv, err);
    if (!rc)
        rc = tf_keys_read(o, "in_keys", "out_keys", true, "ActionScaling", &t->keys, err);
    if (!rc && t->inv.n != 1)
        rc = crl_error_set(err, CRL_E_CONFIG, "%s: [%s] in_keys_inv names %zu keys; ActionScaling scales one "
                           "action (chain one ActionScaling per action)", crl_opts_origin(o, "in_keys_inv"),
                           crl_opts_section(o), t->inv.n);
    if (!rc && t->keys.n > 1)
        rc = crl_error_set(err, CRL_E_CONFIG, "%s: [%s] in_keys names %zu keys; give at most one (the action "
                           "to normalise in stored data)", crl_opts_origin(o, "in_keys"), crl_opts_section(o),
                           t->keys.n);
    if (rc) {
        scaling_destroy(t);
        return rc;
    }
    *out = t;
    return CRL_OK;
}

static int scaling_specs(void *p, crl_transform_specs *s, crl_error *err)
{
    scaling *t = p;
    const char *key = t->inv.in[0];
    crl_spec *leaf = crl_spec_composite_get(s->action, key);
    if (!leaf || crl_spec_get_kind(leaf) == CRL_SPEC_COMPOSITE)
        return crl_transform_missing_key(err, "ActionScaling", key, s->action, "action spec");
    if (!crl_dtype_is_float(crl_spec_dtype(leaf)) || crl_spec_get_kind(leaf) != CRL_SPEC_BOUNDED)
        return crl_error_set(err, CRL_E_DTYPE, "ActionScaling: action '%s' is %s %s; it needs a Bounded float "
                             "action (a continuous action space). For a discrete action use "
                             "DiscreteActionProjection or none", key, crl_spec_kind_name(crl_spec_get_kind(leaf)),
                             crl_dtype_name(crl_spec_dtype(leaf)));
    const crl_tensor *lo = crl_spec_low(leaf), *hi = crl_spec_high(leaf);
    int64_t n = crl_tensor_numel(lo);
    double *loc = malloc(sizeof(double) * (size_t)(n ? n : 1));
    double *scale = malloc(sizeof(double) * (size_t)(n ? n : 1));
    if (!loc || !scale) {
        free(loc);
        free(scale);
        return crl_error_set(err, CRL_E_NOMEM, "ActionScaling: out of memory");
    }
    for (int64_t i = 0; i < n; i++) {
        double a = crl_tensor_flat_get(lo, i), b = crl_tensor_flat_get(hi, i);
        if (!isfinite(a) || !isfinite(b)) {
            free(loc);
            free(scale);
            return crl_error_set(err, CRL_E_INVALID, "ActionScaling: action '%s' has an infinite bound at "
                                 "element %lld ([%g, %g]); it needs finite low and high", key, (long long)i, a, b);
        }
        /* a_env = a_norm * scale + loc: [-1, 1] or [0, 1] onto [a, b]. */
        if (t->standard_normal) {
            loc[i] = (b + a) / 2.0;
            scale[i] = (b - a) / 2.0;
        } else {
            loc[i] = a;
            scale[i] = b - a;
        }
    }
    free(t->loc);
    free(t->scale);
    t->loc = loc;
    t->scale = scale;
    t->numel = n;
    t->dt = crl_spec_dtype(leaf);
    crl_error e;
    crl_error_clear(&e);
    crl_spec *outer = crl_spec_bounded(t->dt, crl_spec_ndim(leaf), crl_spec_shape(leaf),
                                       t->standard_normal ? -1.0 : 0.0, 1.0, &e);
    if (!outer)
        return crl_error_pass(err, &e, CRL_E_INVALID);
    int rc = crl_spec_composite_set(s->action, t->inv.out[0], outer, err);
    crl_spec_unref(outer);
    if (!rc && strcmp(t->inv.in[0], t->inv.out[0]) != 0)
        rc = crl_spec_composite_del(s->action, t->inv.in[0], err);
    return rc;
}

/* y = forward ? (x - loc) / scale : x * scale + loc, into a new tensor at dst. */
static int scale_entry(scaling *t, crl_td *td, const char *src, const char *dst, bool forward, crl_error *err)
{
    if (!t->loc)
        return crl_error_set(err, CRL_E_INVALID, "ActionScaling: the action bounds are not known yet; use it in "
                             "an env's chain (or after its specs were transformed)");
    crl_error e;
    crl_error_clear(&e);
    crl_tensor *x = tf_td_need(td, src, "ActionScaling", &e);
    if (!x)
        return crl_error_pass(err, &e, CRL_E_NOT_FOUND);
    if (!crl_dtype_is_float(crl_tensor_dtype(x)))
        return crl_error_set(err, CRL_E_DTYPE, "ActionScaling: '%s' is %s; it needs a float action", src,
                             crl_dtype_name(crl_tensor_dtype(x)));
    if (crl_tensor_numel(x) != t->numel)
        return crl_error_set(err, CRL_E_SHAPE, "ActionScaling: '%s' has %lld elements, the action spec %lld", src,
                             (long long)crl_tensor_numel(x), (long long)t->numel);
    crl_tensor *y = crl_tensor_new(t->dt, crl_tensor_ndim(x), crl_tensor_shape(x), &e);
    if (!y)
        return crl_error_pass(err, &e, CRL_E_NOMEM);
    for (int64_t i = 0; i < t->numel; i++) {
        double v = crl_tensor_flat_get(x, i);
        crl_tensor_flat_set(y, i, forward ? (v - t->loc[i]) / t->scale[i] : v * t->scale[i] + t->loc[i]);
    }
    int rc = crl_td_set(td, dst, y, err);
    crl_tensor_unref(y);
    return rc;
}

static int scaling_call(void *p, crl_td *td, crl_error *err)
{
    scaling *t = p;
    int rc;
    for (size_t i = 0; i < t->keys.n; i++)
        if ((rc = scale_entry(t, td, t->keys.in[i], t->keys.out[i], true, err)))
            return rc;
    return CRL_OK;
}

static int scaling_inv(void *p, crl_td *td, crl_error *err)
{
    scaling *t = p;
    int rc;
    if ((rc = scale_entry(t, td, t->inv.out[0], t->inv.in[0], false, err)))
        return rc;
    if (strcmp(t->inv.in[0], t->inv.out[0]) != 0 && (rc = crl_td_del(td, t->inv.out[0], err)))
        return rc;
    return CRL_OK;
}

static const crl_transform_ops scaling_ops = {
    .struct_size = sizeof(crl_transform_ops),
    .create = scaling_create,
    .transform_specs = scaling_specs,
    .call = scaling_call,
    .inv = scaling_inv,
    .destroy = scaling_destroy,
};

static const crl_option scaling_options[] = {
    { "in_keys_inv", CRL_OPT_LIST, 0, "action", 0, 0, NULL, "the parent's Bounded action key" },
    { "out_keys_inv", CRL_OPT_LIST, 0, "", 0, 0, NULL, "the action key the policy writes; empty: the same" },
    { "in_keys", CRL_OPT_LIST, 0, "", 0, 0, NULL,
      "an env-range action to normalise when applied standalone (stored data); empty: none" },
    { "out_keys", CRL_OPT_LIST, 0, "", 0, 0, NULL, "where the normalised action goes; empty: in place" },
    { "standard_normal", CRL_OPT_BOOL, 0, "true", 0, 0, NULL, "policy range [-1, 1] (true) or [0, 1] (false)" },
    CRL_OPTIONS_END
};

int tfa_register_scaling(crl_host *host, crl_error *err)
{
    return tf_register(host, "ActionScaling", "the policy acts in [-1, 1]; actions are mapped onto the env's bounds",
                       scaling_options, &scaling_ops, err);
}
