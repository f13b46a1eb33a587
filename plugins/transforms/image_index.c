/* IndexSelectTransform: keep some entries of one dim (torch.index_select), e.g. CartPole's positions without
 * their velocities, which makes an env partially observed. */
#include "config.h"
#include "image_common.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    int64_t dim;        /* negative: from the end; else counted after the batch dims */
    size_t n;
    int64_t *idx;       /* as given (negative: from the end of the dim) */
} index_params;

static void index_free(img_tf *t)
{
    index_params *q = t->extra;
    if (q)
        free(q->idx);
    free(q);
}

static int index_plan(img_tf *t, crl_dtype dt, int ndim, const int64_t *shape, int batch_ndim, const char *key,
                      img_plan *p, crl_error *err)
{
    const index_params *q = t->extra;
    int64_t d = q->dim < 0 ? ndim + q->dim : batch_ndim + q->dim;
    char b[160];
    if (d < batch_ndim || d >= ndim)
        return crl_error_set(err, CRL_E_SHAPE, "%s: key '%s' has shape %s (%d batch dims): dim = %lld names none of "
                             "its %d dims after the batch dims", t->who, key, img_shape_str(ndim, shape, b, sizeof b),
                             batch_ndim, (long long)q->dim, ndim - batch_ndim);
    for (size_t i = 0; i < q->n; i++)
        if (q->idx[i] < -shape[d] || q->idx[i] >= shape[d])
            return crl_error_set(err, CRL_E_SHAPE, "%s: key '%s' has shape %s: index %lld is outside its dim %lld of "
                                 "size %lld (use -%lld .. %lld)", t->who, key, img_shape_str(ndim, shape, b, sizeof b),
                                 (long long)q->idx[i], (long long)d, (long long)shape[d], (long long)shape[d],
                                 (long long)shape[d] - 1);
    p->out_dt = dt;
    p->ndim = ndim;
    memcpy(p->shape, shape, (size_t)ndim * sizeof *shape);
    p->shape[d] = (int64_t)q->n;
    p->top = d;   /* the selected dim, for run */
    return CRL_OK;
}

static int index_run(img_tf *t, const img_plan *p, const crl_tensor *in, crl_tensor *out, crl_error *err)
{
    const index_params *q = t->extra;
    const int64_t *s = crl_tensor_shape(in);
    int64_t d = p->top, outer = 1, size = s[d];
    size_t inner = crl_dtype_size(crl_tensor_dtype(in));
    if (crl_tensor_dtype(out) != crl_tensor_dtype(in))
        return crl_error_set(err, CRL_E_DTYPE, "%s: internal dtype mismatch", t->who);
    for (int64_t i = 0; i < d; i++)
        outer *= s[i];
    for (int i = (int)d + 1; i < crl_tensor_ndim(in); i++)
        inner *= (size_t)s[i];
    const char *src = crl_tensor_data(in);
    char *dst = crl_tensor_data(out);
    for (int64_t o = 0; o < outer; o++)
        for (size_t k = 0; k < q->n; k++) {
            int64_t j = q->idx[k] < 0 ? q->idx[k] + size : q->idx[k];
            memcpy(dst + ((size_t)o * q->n + k) * inner, src + (size_t)(o * size + j) * inner, inner);
        }
    return CRL_OK;
}

static int index_create(const crl_opts *o, void **out, crl_error *err)
{
    crl_error e;
    crl_error_clear(&e);
    img_tf *t = img_tf_new(o, "IndexSelectTransform", false, &e);
    if (!t)
        return crl_error_pass(err, &e, CRL_E_NOMEM);
    index_params *q = calloc(1, sizeof *q);
    t->extra = q;
    t->free_extra = index_free;
    size_t n = 0;
    const double *v = NULL;
    int rc = q ? crl_opts_int(o, "dim", &q->dim, err) : crl_error_set(err, CRL_E_NOMEM, "%s: out of memory", t->who);
    if (!rc)
        rc = crl_opts_doubles(o, "indices", &n, &v, err);
    if (!rc && !(q->idx = calloc(n ? n : 1, sizeof *q->idx)))
        rc = crl_error_set(err, CRL_E_NOMEM, "%s: out of memory", t->who);
    for (size_t i = 0; !rc && i < n; i++) {
        if (!(v[i] == floor(v[i]) && fabs(v[i]) < 1e15))
            rc = crl_error_set(err, CRL_E_CONFIG, "%s: [%s] indices: %g is not a whole number",
                               crl_opts_origin(o, "indices"), crl_opts_section(o), v[i]);
        else
            q->idx[q->n++] = (int64_t)v[i];
    }
    if (rc) {
        img_tf_destroy(t);
        return rc;
    }
    t->plan = index_plan;
    t->run = index_run;
    *out = t;
    return CRL_OK;
}

static const crl_option index_options[] = {
    { "indices", CRL_OPT_DOUBLES, CRL_OPT_REQUIRED | CRL_OPT_RANGE, NULL, 1, 4096, NULL,
      "the entries to keep, in this order (negative: from the end; e.g. 0, 2 keeps CartPole's x and angle)" },
    { "dim", CRL_OPT_INT, 0, "-1", 0, 0, NULL, "the dim to select along (negative: from the end; else counted "
      "after the batch dims)" },
    { "in_keys", CRL_OPT_LIST, 0, "observation", 0, 0, NULL, "keys to select from" },
    { "out_keys", CRL_OPT_LIST, 0, "", 0, 0, NULL, "keys to write, one per in key (empty: write over the in keys)" },
    CRL_OPTIONS_END
};

static const crl_transform_ops index_ops = {
    .struct_size = sizeof(crl_transform_ops),
    .create = index_create,
    .transform_specs = img_tf_specs,
    .call = img_tf_call,
    .destroy = img_tf_destroy,
};

int tf_register_image_index(crl_host *host, crl_error *err)
{
    return tf_register(host, "IndexSelectTransform", "keep the given entries of one dim (torch.index_select)",
                       index_options, &index_ops, err);
}
