/* Reward transforms: RewardScaling, RewardClipping, BinarizeReward, SignTransform (TorchRL semantics). */
#include "config.h"
#include "state_common.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct rw {
    const char *who;
    tf_keys k;
    double loc, scale;
    bool standard_normal;
    double lo, hi;
    st_scratch scratch;
} rw;

static void rw_destroy(void *p)
{
    rw *t = p;
    if (!t)
        return;
    tf_keys_free(&t->k);
    st_scratch_free(&t->scratch);
    free(t);
}

static rw *rw_new(const crl_opts *o, const char *who, crl_error *err)
{
    rw *t = calloc(1, sizeof *t);
    if (!t) {
        crl_error_set(err, CRL_E_NOMEM, "%s: out of memory", who);
        return NULL;
    }
    t->who = who;
    if (tf_keys_read(o, "in_keys", "out_keys", false, who, &t->k, err)) {
        free(t);
        return NULL;
    }
    return t;
}

/* Reset: the reset output holds no reward, so absent keys are skipped (TorchRL's missing_tolerance). */
#define RW_RESET(name, fn, need_float, out_dt)                                                                     \
    static int name(void *p, crl_transform_ctx *ctx, crl_td *td, const bool *mask, crl_error *err)                 \
    {                                                                                                             \
        (void)ctx;                                                                                                \
        (void)mask;                                                                                               \
        rw *t = p;                                                                                                \
        return st_apply_elementwise(t, &t->k, td, t->who, need_float, out_dt, true, &t->scratch, fn, err);       \
    }
#define RW_CALL(name, fn, need_float, out_dt)                                                                      \
    static int name(void *p, crl_td *td, crl_error *err)                                                          \
    {                                                                                                             \
        rw *t = p;                                                                                                \
        return st_apply_elementwise(t, &t->k, td, t->who, need_float, out_dt, false, &t->scratch, fn, err);      \
    }

/* ---- RewardScaling: r * scale + loc, or (r - loc) / scale with standard_normal ---- */

static double scale_one(const rw *t, double x)
{
    return t->standard_normal ? (x - t->loc) / t->scale : x * t->scale + t->loc;
}

static void rscale_fn(void *p, double *v, int64_t n, int64_t F)
{
    (void)F;
    for (int64_t i = 0; i < n; i++)
        v[i] = scale_one(p, v[i]);
}

static double rscale_map(double x, int64_t j, void *p)
{
    (void)j;
    return scale_one(p, x);
}

static int rscale_create(const crl_opts *o, void **out, crl_error *err)
{
    crl_error e;
    crl_error_clear(&e);
    rw *t = rw_new(o, "RewardScaling", &e);
    if (!t)
        return crl_error_pass(err, &e, CRL_E_NOMEM);
    int rc;
    if ((rc = st_require(o, "loc", t->who, err)) || (rc = st_require(o, "scale", t->who, err)) ||
        (rc = crl_opts_double(o, "loc", &t->loc, err)) || (rc = crl_opts_double(o, "scale", &t->scale, err)) ||
        (rc = crl_opts_bool(o, "standard_normal", &t->standard_normal, err))) {
        rw_destroy(t);
        return rc;
    }
    if (t->scale == 0) {
        rw_destroy(t);
        return st_bad_option(err, o, "scale", "0",
                             "RewardScaling needs a non-zero scale (it multiplies or divides the reward)");
    }
    *out = t;
    return CRL_OK;
}

static int rscale_specs(void *p, crl_transform_specs *s, crl_error *err)
{
    rw *t = p;
    int rc;
    for (size_t i = 0; i < t->k.n; i++) {
        crl_error e;
        crl_error_clear(&e);
        crl_spec *leaf = st_spec_leaf(s, t->k.in[i], t->who, &e);
        if (!leaf)
            return crl_error_pass(err, &e, CRL_E_INVALID);
        if ((rc = st_need_float(leaf, t->k.in[i], t->who, err)))
            return rc;
        crl_spec *ns = st_spec_map(leaf, s->batch_ndim, crl_spec_dtype(leaf), rscale_map, t, &e);
        if ((rc = st_spec_set(s, t->k.out[i], ns, &e, err)))
            return rc;
    }
    return CRL_OK;
}

RW_CALL(rscale_call, rscale_fn, true, CRL_DTYPE_COUNT)
RW_RESET(rscale_reset, rscale_fn, true, CRL_DTYPE_COUNT)

const crl_option st_rscale_options[] = {
    { "in_keys", CRL_OPT_LIST, 0, "reward", 0, 0, NULL, "keys to scale" },
    { "out_keys", CRL_OPT_LIST, 0, "", 0, 0, NULL, "where to write them (empty: in place)" },
    { "loc", CRL_OPT_DOUBLE, CRL_OPT_REQUIRED, NULL, 0, 0, NULL, "added after scaling (subtracted first with standard_normal)" },
    { "scale", CRL_OPT_DOUBLE, CRL_OPT_REQUIRED, NULL, 0, 0, NULL, "multiplier (divisor with standard_normal); non-zero" },
    { "standard_normal", CRL_OPT_BOOL, 0, "false", 0, 0, NULL, "compute (r - loc) / scale instead of r * scale + loc" },
    CRL_OPTIONS_END
};

const crl_transform_ops st_rscale_ops = {
    .struct_size = sizeof(crl_transform_ops),
    .create = rscale_create,
    .transform_specs = rscale_specs,
    .call = rscale_call,
    .reset = rscale_reset,
    .destroy = rw_destroy,
};

/* ---- RewardClipping: clamp to [clamp_min, clamp_max] ---- */

static double clip_one(const rw *t, double x)
{
    if (isnan(x))
        return x;
    return x < t->lo ? t->lo : x > t->hi ? t->hi : x;
}

static void rclip_fn(void *p, double *v, int64_t n, int64_t F)
{
    (void)F;
    for (int64_t i = 0; i < n; i++)
        v[i] = clip_one(p, v[i]);
}

static double rclip_map(double x, int64_t j, void *p)
{
    (void)j;
    return clip_one(p, x);
}

static int rclip_create(const crl_opts *o, void **out, crl_error *err)
{
    crl_error e;
    crl_error_clear(&e);
    rw *t = rw_new(o, "RewardClipping", &e);
    if (!t)
        return crl_error_pass(err, &e, CRL_E_NOMEM);
    t->lo = -INFINITY;
    t->hi = INFINITY;
    int rc = CRL_OK;
    if ((crl_opts_is_set(o, "clamp_min") && (rc = crl_opts_double(o, "clamp_min", &t->lo, err))) ||
        (crl_opts_is_set(o, "clamp_max") && (rc = crl_opts_double(o, "clamp_max", &t->hi, err)))) {
        rw_destroy(t);
        return rc;
    }
    if (t->lo > t->hi) {
        char v[64];
        snprintf(v, sizeof v, "%g", t->lo);
        char why[160];
        snprintf(why, sizeof why, "clamp_min is above clamp_max = %g (%s); swap them", t->hi,
                 crl_opts_origin(o, "clamp_max"));
        rw_destroy(t);
        return st_bad_option(err, o, "clamp_min", v, why);
    }
    *out = t;
    return CRL_OK;
}

static int rclip_specs(void *p, crl_transform_specs *s, crl_error *err)
{
    rw *t = p;
    int rc;
    for (size_t i = 0; i < t->k.n; i++) {
        crl_error e;
        crl_error_clear(&e);
        crl_spec *leaf = st_spec_leaf(s, t->k.in[i], t->who, &e);
        if (!leaf)
            return crl_error_pass(err, &e, CRL_E_INVALID);
        if ((rc = st_need_numeric(leaf, t->k.in[i], t->who, err)))
            return rc;
        crl_spec *ns;
        if (crl_spec_get_kind(leaf) == CRL_SPEC_BOUNDED)
            ns = st_spec_map(leaf, s->batch_ndim, crl_spec_dtype(leaf), rclip_map, t, &e);
        else if (isinf(t->lo) && isinf(t->hi))
            ns = crl_spec_ref(leaf);
        else /* TorchRL: the clipped reward is Bounded(clamp_min, clamp_max) */
            ns = crl_spec_bounded(crl_spec_dtype(leaf), crl_spec_ndim(leaf), crl_spec_shape(leaf), t->lo, t->hi, &e);
        if ((rc = st_spec_set(s, t->k.out[i], ns, &e, err)))
            return rc;
    }
    return CRL_OK;
}

RW_CALL(rclip_call, rclip_fn, false, CRL_DTYPE_COUNT)
RW_RESET(rclip_reset, rclip_fn, false, CRL_DTYPE_COUNT)

const crl_option st_rclip_options[] = {
    { "in_keys", CRL_OPT_LIST, 0, "reward", 0, 0, NULL, "keys to clip" },
    { "out_keys", CRL_OPT_LIST, 0, "", 0, 0, NULL, "where to write them (empty: in place)" },
    { "clamp_min", CRL_OPT_DOUBLE, 0, NULL, 0, 0, NULL, "lower bound (unset: none)" },
    { "clamp_max", CRL_OPT_DOUBLE, 0, NULL, 0, 0, NULL, "upper bound (unset: none); >= clamp_min" },
    CRL_OPTIONS_END
};

const crl_transform_ops st_rclip_ops = {
    .struct_size = sizeof(crl_transform_ops),
    .create = rclip_create,
    .transform_specs = rclip_specs,
    .call = rclip_call,
    .reset = rclip_reset,
    .destroy = rw_destroy,
};

/* ---- BinarizeReward: 1 where r > 0, else 0, as int64 ---- */

static void binarize_fn(void *p, double *v, int64_t n, int64_t F)
{
    (void)p;
    (void)F;
    for (int64_t i = 0; i < n; i++)
        v[i] = v[i] > 0.0 ? 1.0 : 0.0;
}

static int binarize_create(const crl_opts *o, void **out, crl_error *err)
{
    crl_error e;
    crl_error_clear(&e);
    rw *t = rw_new(o, "BinarizeReward", &e);
    if (!t)
        return crl_error_pass(err, &e, CRL_E_NOMEM);
    *out = t;
    return CRL_OK;
}

static int binarize_specs(void *p, crl_transform_specs *s, crl_error *err)
{
    rw *t = p;
    int rc;
    for (size_t i = 0; i < t->k.n; i++) {
        crl_error e;
        crl_error_clear(&e);
        crl_spec *leaf = st_spec_leaf(s, t->k.in[i], t->who, &e);
        if (!leaf)
            return crl_error_pass(err, &e, CRL_E_INVALID);
        int nd = crl_spec_ndim(leaf);
        const int64_t *shape = crl_spec_shape(leaf);
        if (nd <= s->batch_ndim || shape[nd - 1] != 1) {
            char *r = crl_shape_repr(nd, shape);
            crl_error_set(err, CRL_E_SHAPE,
                          "%s: key '%s' has shape %s but the reward's last dim must be 1 (TorchRL's [..., 1] "
                          "reward)",
                          t->who, t->k.in[i], r ? r : "?");
            crl_free(r);
            return CRL_E_SHAPE;
        }
        if ((rc = st_spec_set(s, t->k.out[i], crl_spec_binary(1, CRL_I64, nd, shape, &e), &e, err)))
            return rc;
    }
    return CRL_OK;
}

RW_CALL(binarize_call, binarize_fn, false, CRL_I64)
RW_RESET(binarize_reset, binarize_fn, false, CRL_I64)

const crl_option st_binarize_options[] = {
    { "in_keys", CRL_OPT_LIST, 0, "reward", 0, 0, NULL, "keys to binarize (last dim 1)" },
    { "out_keys", CRL_OPT_LIST, 0, "", 0, 0, NULL, "where to write them (empty: in place)" },
    CRL_OPTIONS_END
};

const crl_transform_ops st_binarize_ops = {
    .struct_size = sizeof(crl_transform_ops),
    .create = binarize_create,
    .transform_specs = binarize_specs,
    .call = binarize_call,
    .reset = binarize_reset,
    .destroy = rw_destroy,
};

/* ---- SignTransform: -1, 0 or 1, in the input's dtype ---- */

static void sign_fn(void *p, double *v, int64_t n, int64_t F)
{
    (void)p;
    (void)F;
    for (int64_t i = 0; i < n; i++)
        v[i] = v[i] > 0 ? 1.0 : v[i] < 0 ? -1.0 : v[i]; /* keeps 0, -0 and NaN as torch.sign */
}

static int sign_create(const crl_opts *o, void **out, crl_error *err)
{
    crl_error e;
    crl_error_clear(&e);
    rw *t = rw_new(o, "SignTransform", &e);
    if (!t)
        return crl_error_pass(err, &e, CRL_E_NOMEM);
    *out = t;
    return CRL_OK;
}

static int sign_specs(void *p, crl_transform_specs *s, crl_error *err)
{
    rw *t = p;
    int rc;
    for (size_t i = 0; i < t->k.n; i++) {
        crl_error e;
        crl_error_clear(&e);
        crl_spec *leaf = st_spec_leaf(s, t->k.in[i], t->who, &e);
        if (!leaf)
            return crl_error_pass(err, &e, CRL_E_INVALID);
        if ((rc = st_need_numeric(leaf, t->k.in[i], t->who, err)))
            return rc;
        crl_spec *ns = crl_spec_bounded(crl_spec_dtype(leaf), crl_spec_ndim(leaf), crl_spec_shape(leaf), -1.0, 1.0, &e);
        if ((rc = st_spec_set(s, t->k.out[i], ns, &e, err)))
            return rc;
    }
    return CRL_OK;
}

/* Bool has no sign: the dtype check runs on the data too (standalone use). */
static int sign_call(void *p, crl_td *td, crl_error *err)
{
    rw *t = p;
    for (size_t i = 0; i < t->k.n; i++) {
        crl_tensor *x = crl_td_get(td, t->k.in[i]);
        if (x && crl_tensor_dtype(x) == CRL_BOOL)
            return crl_error_set(err, CRL_E_DTYPE,
                                 "%s: key '%s' is bool but a numeric tensor is needed; cast it first "
                                 "(DTypeCastTransform)",
                                 t->who, t->k.in[i]);
    }
    return st_apply_elementwise(t, &t->k, td, t->who, false, CRL_DTYPE_COUNT, false, &t->scratch, sign_fn, err);
}

RW_RESET(sign_reset, sign_fn, false, CRL_DTYPE_COUNT)

const crl_option st_sign_options[] = {
    { "in_keys", CRL_OPT_LIST, 0, "reward", 0, 0, NULL, "keys to replace by their sign" },
    { "out_keys", CRL_OPT_LIST, 0, "", 0, 0, NULL, "where to write them (empty: in place)" },
    CRL_OPTIONS_END
};

const crl_transform_ops st_sign_ops = {
    .struct_size = sizeof(crl_transform_ops),
    .create = sign_create,
    .transform_specs = sign_specs,
    .call = sign_call,
    .reset = sign_reset,
    .destroy = rw_destroy,
};
