/* The image group's shared frame: one plan per key, the generic call on a TensorDict and the spec rewrite. */
#include "config.h"
#include "image_common.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *img_shape_str(int ndim, const int64_t *shape, char *buf, size_t cap)
{
    size_t len = 0;
    len += (size_t)snprintf(buf, cap, "[");
    for (int i = 0; i < ndim && len < cap; i++)
        len += (size_t)snprintf(buf + len, cap - len, "%s%lld", i ? ", " : "", (long long)shape[i]);
    if (len < cap)
        snprintf(buf + len, cap - len, "]");
    return buf;
}

img_tf *img_tf_new(const crl_opts *o, const char *who, bool allow_empty, crl_error *err)
{
    img_tf *t = calloc(1, sizeof *t);
    if (!t) {
        crl_error_set(err, CRL_E_NOMEM, "%s: out of memory", who);
        return NULL;
    }
    t->who = who;
    if (tf_keys_read(o, "in_keys", "out_keys", allow_empty, who, &t->keys, err)) {
        free(t);
        return NULL;
    }
    return t;
}

void img_tf_destroy(void *vt)
{
    img_tf *t = vt;
    if (!t)
        return;
    if (t->free_extra)
        t->free_extra(t);
    tf_keys_free(&t->keys);
    free(t);
}

static bool overlaps(const crl_tensor *a, const crl_tensor *b)
{
    const char *pa = crl_tensor_data(a), *pb = crl_tensor_data(b);
    size_t na = crl_tensor_nbytes(a), nb = crl_tensor_nbytes(b);
    return na && nb && pa < pb + nb && pb < pa + na;
}

int img_tf_call(void *vt, crl_td *td, crl_error *err)
{
    img_tf *t = vt;
    for (size_t i = 0; i < t->keys.n; i++) {
        const char *ik = t->keys.in[i], *ok = t->keys.out[i];
        crl_error e;
        crl_error_clear(&e);
        crl_tensor *in = tf_td_need(td, ik, t->who, &e);
        if (!in)
            return crl_error_pass(err, &e, CRL_E_NOT_FOUND);
        img_plan p;
        memset(&p, 0, sizeof p);
        int rc = t->plan(t, crl_tensor_dtype(in), crl_tensor_ndim(in), crl_tensor_shape(in), crl_td_batch_ndim(td), ik,
                         &p, err);
        if (rc)
            return rc;
        /* The input may be replaced in td by the output (same key): keep it
         * alive, contiguous, until the work is done. */
        crl_tensor *c = crl_tensor_contiguous(in, &e);
        if (!c)
            return crl_error_pass(err, &e, CRL_E_NOMEM);
        crl_tensor *out = crl_transform_output(td, ok, p.out_dt, p.ndim, p.shape, &e);
        if (!out) {
            rc = crl_error_pass(err, &e, CRL_E_NOMEM);
        } else if (overlaps(out, c)) {
            crl_tensor *tmp = crl_tensor_new(p.out_dt, p.ndim, p.shape, &e);
            rc = tmp ? t->run(t, &p, c, tmp, err) : crl_error_pass(err, &e, CRL_E_NOMEM);
            if (!rc)
                rc = crl_tensor_copy(out, tmp, err);
            crl_tensor_unref(tmp);
        } else {
            rc = t->run(t, &p, c, out, err);
        }
        crl_tensor_unref(c);
        if (rc)
            return rc;
    }
    return CRL_OK;
}

/* NaN from an infinite bound times a zero weight (Resize) means that
 * side stays unbounded. */
static void fix_nan(crl_tensor *t, double inf)
{
    int64_t n = crl_tensor_numel(t);
    for (int64_t i = 0; i < n; i++) {
        double v = crl_tensor_flat_get(t, i);
        if (v != v)
            crl_tensor_flat_set(t, i, inf);
    }
}

/* One bound through the transform, in the dtypes the data has (so the
 * bound is what the data at the bound becomes, to the last bit). */
static crl_tensor *transform_bound(img_tf *t, const img_plan *p, const crl_tensor *b, crl_dtype in_dt, double inf,
                                   crl_error *err)
{
    crl_tensor *in = crl_tensor_cast(b, in_dt, err);
    crl_tensor *out = in ? crl_tensor_new(p->out_dt, p->ndim, p->shape, err) : NULL;
    if (out && t->run(t, p, in, out, err)) {
        crl_tensor_unref(out);
        out = NULL;
    }
    crl_tensor_unref(in);
    if (out && crl_dtype_is_float(p->out_dt))
        fix_nan(out, inf);
    return out;
}

/* The spec after the transform: kind kept, bounds carried through run
 * (as TorchRL applies the transform to space.low/high). */
static crl_spec *transform_leaf(img_tf *t, const img_plan *p, const crl_spec *leaf, const char *key, crl_error *err)
{
    crl_spec_kind kind = crl_spec_get_kind(leaf);
    if (kind == CRL_SPEC_UNBOUNDED)
        return crl_spec_unbounded(p->out_dt, p->ndim, p->shape, err);
    if (kind == CRL_SPEC_CATEGORICAL && p->out_dt == crl_spec_dtype(leaf))
        return crl_spec_categorical(crl_spec_n(leaf), p->out_dt, p->ndim, p->shape, err);
    if (kind != CRL_SPEC_BOUNDED) {
        crl_error_set(err, CRL_E_UNSUPPORTED, "%s: key '%s' has a %s spec; this transform needs a Bounded or Unbounded "
                      "one (or Categorical for shape-only transforms)", t->who, key, crl_spec_kind_name(kind));
        return NULL;
    }
    crl_dtype dt = crl_spec_dtype(leaf);
    crl_tensor *lo = transform_bound(t, p, crl_spec_low(leaf), dt, -INFINITY, err);
    crl_tensor *hi = lo ? transform_bound(t, p, crl_spec_high(leaf), dt, INFINITY, err) : NULL;
    crl_spec *out = hi ? crl_spec_bounded_t(p->out_dt, lo, hi, err) : NULL;
    crl_tensor_unref(lo);
    crl_tensor_unref(hi);
    return out;
}

int img_tf_specs(void *vt, crl_transform_specs *s, crl_error *err)
{
    img_tf *t = vt;
    for (size_t i = 0; i < t->keys.n; i++) {
        const char *ik = t->keys.in[i], *ok = t->keys.out[i];
        crl_error e;
        crl_error_clear(&e);
        crl_spec *leaf = tf_specs_need(s, ik, t->who, &e);
        if (!leaf)
            return crl_error_pass(err, &e, CRL_E_NOT_FOUND);
        img_plan p;
        memset(&p, 0, sizeof p);
        int rc = t->plan(t, crl_spec_dtype(leaf), crl_spec_ndim(leaf), crl_spec_shape(leaf), s->batch_ndim, ik, &p,
                         err);
        if (rc)
            return rc;
        crl_spec *ns = transform_leaf(t, &p, leaf, ik, &e);
        if (!ns)
            return crl_error_pass(err, &e, CRL_E_INVALID);
        rc = tf_specs_put(s, ok, ns, err);
        if (rc)
            return rc;
    }
    return CRL_OK;
}
