/* ClipTransform: clamp observation leaves (and, on the inverse, actions) to [low, high]; specs become Bounded. */
#include "config.h"
#include "action_group.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef struct clip {
    double low, high;
    tf_keys keys, inv;
} clip;

static void clip_destroy(void *p)
{
    clip *t = p;
    if (!t)
        return;
    tf_keys_free(&t->keys);
    tf_keys_free(&t->inv);
    free(t);
}

static int clip_create(const crl_opts *o, void **out, crl_error *err)
{
    clip *t = calloc(1, sizeof *t);
    if (!t)
        return crl_error_set(err, CRL_E_NOMEM, "ClipTransform: out of memory");
    t->low = -INFINITY;
    t->high = INFINITY;
    int rc = CRL_OK;
    if (crl_opts_is_set(o, "low"))
        rc = crl_opts_double(o, "low", &t->low, err);
    if (!rc && crl_opts_is_set(o, "high"))
        rc = crl_opts_double(o, "high", &t->high, err);
    if (!rc && !crl_opts_is_set(o, "low") && !crl_opts_is_set(o, "high"))
        rc = crl_error_set(err, CRL_E_CONFIG, "[%s] ClipTransform needs low, high or both (neither is set)",
                           crl_opts_section(o));
    if (!rc && !(t->low < t->high))
        rc = crl_error_set(err, CRL_E_CONFIG, "%s: [%s] low = %g is not below high = %g (%s); give low < high",
                           crl_opts_origin(o, "low"), crl_opts_section(o), t->low, t->high,
                           crl_opts_origin(o, "high"));
    if (!rc)
        rc = tf_keys_read(o, "in_keys", "out_keys", true, "ClipTransform", &t->keys, err);
    if (!rc)
        rc = tf_keys_read(o, "in_keys_inv", "out_keys_inv", true, "ClipTransform", &t->inv, err);
    if (!rc && t->keys.n + t->inv.n == 0)
        rc = crl_error_set(err, CRL_E_CONFIG, "%s: [%s] in_keys and in_keys_inv are both empty; name the keys "
                           "to clip", crl_opts_origin(o, "in_keys"), crl_opts_section(o));
    if (rc) {
        clip_destroy(t);
        return rc;
    }
    *out = t;
    return CRL_OK;
}

static double clampd(double v, double lo, double hi)
{
    return v < lo ? lo : v > hi ? hi : v;
}

/* The leaf's domain after clamping: Bounded [clamp(pl), clamp(ph)] elementwise. */
static crl_spec *clipped_spec(const clip *t, const crl_spec *leaf, const char *key, crl_error *err)
{
    crl_dtype dt = crl_spec_dtype(leaf);
    if (dt == CRL_BOOL)
        return crl_error_set(err, CRL_E_DTYPE, "ClipTransform: key '%s' is bool; clip a numeric key", key), NULL;
    int nd = crl_spec_ndim(leaf);
    const int64_t *sh = crl_spec_shape(leaf);
    crl_tensor *lo = crl_tensor_new(CRL_F64, nd, sh, err);
    crl_tensor *hi = lo ? crl_tensor_new(CRL_F64, nd, sh, err) : NULL;
    crl_spec *out = NULL;
    if (hi) {
        const crl_tensor *pl = crl_spec_get_kind(leaf) == CRL_SPEC_BOUNDED ? crl_spec_low(leaf) : NULL;
        const crl_tensor *ph = pl ? crl_spec_high(leaf) : NULL;
        int64_t n = crl_tensor_numel(lo);
        for (int64_t i = 0; i < n; i++) {
            double a = pl ? crl_tensor_flat_get(pl, i) : -INFINITY;
            double b = ph ? crl_tensor_flat_get(ph, i) : INFINITY;
            crl_tensor_flat_set(lo, i, clampd(a, t->low, t->high));
            crl_tensor_flat_set(hi, i, clampd(b, t->low, t->high));
        }
        out = crl_spec_bounded_t(dt, lo, hi, err);
    }
    crl_tensor_unref(lo);
    crl_tensor_unref(hi);
    return out;
}

static int clip_specs(void *p, crl_transform_specs *s, crl_error *err)
{
    clip *t = p;
    int rc;
    for (size_t i = 0; i < t->keys.n; i++) {
        crl_error e;
        crl_error_clear(&e);
        crl_spec *leaf = tf_specs_need(s, t->keys.in[i], "ClipTransform", &e);
        crl_spec *c = leaf ? clipped_spec(t, leaf, t->keys.in[i], &e) : NULL;
        if (!c)
            return crl_error_pass(err, &e, CRL_E_INVALID);
        if ((rc = tf_specs_put(s, t->keys.out[i], c, err)))
            return rc;
    }
    for (size_t i = 0; i < t->inv.n; i++) {
        crl_spec *leaf = crl_spec_composite_get(s->action, t->inv.in[i]);
        if (!leaf || crl_spec_get_kind(leaf) == CRL_SPEC_COMPOSITE)
            return crl_transform_missing_key(err, "ClipTransform", t->inv.in[i], s->action, "action spec");
        if (crl_spec_dtype(leaf) == CRL_BOOL)
            return crl_error_set(err, CRL_E_DTYPE, "ClipTransform: action '%s' is bool; clip a numeric action",
                                 t->inv.in[i]);
        if (strcmp(t->inv.in[i], t->inv.out[i]) != 0) {
            /* The policy writes out_key, the parent reads in_key: the outer spec moves. */
            if ((rc = crl_spec_composite_set(s->action, t->inv.out[i], leaf, err)) ||
                (rc = crl_spec_composite_del(s->action, t->inv.in[i], err)))
                return rc;
        }
    }
    return CRL_OK;
}

/* dst = clamp(src); dst may be src's own key (then written through crl_transform_output). */
static int clip_entry(const clip *t, crl_td *td, const char *src, const char *dst, bool fresh, crl_error *err)
{
    crl_error e;
    crl_error_clear(&e);
    crl_tensor *x = tf_td_need(td, src, "ClipTransform", &e);
    if (!x)
        return crl_error_pass(err, &e, CRL_E_NOT_FOUND);
    crl_dtype dt = crl_tensor_dtype(x);
    if (dt == CRL_BOOL)
        return crl_error_set(err, CRL_E_DTYPE, "ClipTransform: key '%s' is bool; clip a numeric key", src);
    crl_tensor_ref(x);
    crl_tensor *y;
    int rc = CRL_OK;
    if (fresh) {
        /* The inverse never writes into the caller's tensors. */
        y = crl_tensor_new(dt, crl_tensor_ndim(x), crl_tensor_shape(x), &e);
        if (y && (rc = crl_td_set(td, dst, y, err))) {
            crl_tensor_unref(y);
            y = NULL;
        }
        crl_tensor_unref(y); /* td holds it */
    } else {
        y = crl_transform_output(td, dst, dt, crl_tensor_ndim(x), crl_tensor_shape(x), &e);
    }
    if (!y) {
        crl_tensor_unref(x);
        return rc ? rc : crl_error_pass(err, &e, CRL_E_NOMEM);
    }
    int64_t n = crl_tensor_numel(x);
    if (dt == CRL_F32 && crl_tensor_is_contiguous(x) && crl_tensor_is_contiguous(y)) {
        const float *a = crl_tensor_data(x);
        float *b = crl_tensor_data(y);
        float lo = (float)t->low, hi = (float)t->high;
        for (int64_t i = 0; i < n; i++)
            b[i] = a[i] < lo ? lo : a[i] > hi ? hi : a[i];
    } else {
        for (int64_t i = 0; i < n; i++)
            crl_tensor_flat_set(y, i, clampd(crl_tensor_flat_get(x, i), t->low, t->high));
    }
    crl_tensor_unref(x);
    return CRL_OK;
}

static int clip_call(void *p, crl_td *td, crl_error *err)
{
    clip *t = p;
    int rc;
    for (size_t i = 0; i < t->keys.n; i++)
        if ((rc = clip_entry(t, td, t->keys.in[i], t->keys.out[i], false, err)))
            return rc;
    return CRL_OK;
}

static int clip_inv(void *p, crl_td *td, crl_error *err)
{
    clip *t = p;
    int rc;
    for (size_t i = 0; i < t->inv.n; i++) {
        if ((rc = clip_entry(t, td, t->inv.out[i], t->inv.in[i], true, err)))
            return rc;
        if (strcmp(t->inv.in[i], t->inv.out[i]) != 0 && (rc = crl_td_del(td, t->inv.out[i], err)))
            return rc;
    }
    return CRL_OK;
}

static const crl_transform_ops clip_ops = {
    .struct_size = sizeof(crl_transform_ops),
    .create = clip_create,
    .transform_specs = clip_specs,
    .call = clip_call,
    .inv = clip_inv,
    .destroy = clip_destroy,
};

static const crl_option clip_options[] = {
    { "low", CRL_OPT_DOUBLE, 0, NULL, 0, 0, NULL, "lower bound (unset: none)" },
    { "high", CRL_OPT_DOUBLE, 0, NULL, 0, 0, NULL, "upper bound (unset: none)" },
    { "in_keys", CRL_OPT_LIST, 0, "observation", 0, 0, NULL, "keys to clip" },
    { "out_keys", CRL_OPT_LIST, 0, "", 0, 0, NULL, "where the clipped values go; empty: in place" },
    { "in_keys_inv", CRL_OPT_LIST, 0, "", 0, 0, NULL, "the parent's action keys to clip on the inverse" },
    { "out_keys_inv", CRL_OPT_LIST, 0, "", 0, 0, NULL, "those actions as the policy writes them; empty: the same" },
    CRL_OPTIONS_END
};

int tfa_register_clip(crl_host *host, crl_error *err)
{
    return tf_register(host, "ClipTransform", "clamp observations (and actions on the inverse) to [low, high]",
                       clip_options, &clip_ops, err);
}
