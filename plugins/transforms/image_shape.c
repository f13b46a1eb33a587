/* Shape transforms: PermuteTransform, UnsqueezeTransform, SqueezeTransform, FlattenObservation, CatTensors (TorchRL's). */
#include "config.h"
#include "image_common.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int nomem(const char *who, crl_error *err)
{
    return crl_error_set(err, CRL_E_NOMEM, "%s: out of memory", who);
}

typedef struct {
    int k;                       /* PermuteTransform: number of trailing dims */
    int dims[CRL_MAX_DIMS];      /* negative, a permutation of -k..-1 */
    int64_t dim, last;           /* Unsqueeze/Squeeze dim; Flatten first and last */
    bool allow_positive;
} shape_params;

static void free_extra(img_tf *t)
{
    free(t->extra);
}

/* Same element order: the contiguous input's bytes are the output's. */
static int run_memcpy(img_tf *t, const img_plan *p, const crl_tensor *in, crl_tensor *out, crl_error *err)
{
    (void)p;
    if (crl_tensor_dtype(in) != crl_tensor_dtype(out) || crl_tensor_nbytes(in) != crl_tensor_nbytes(out))
        return crl_error_set(err, CRL_E_SHAPE, "%s: internal size mismatch", t->who);
    memcpy(crl_tensor_data(out), crl_tensor_data(in), crl_tensor_nbytes(in));
    return CRL_OK;
}

static void plan_same(img_plan *p, crl_dtype dt, int ndim, const int64_t *shape)
{
    p->out_dt = dt;
    p->ndim = ndim;
    memcpy(p->shape, shape, (size_t)ndim * sizeof *shape);
}

static int rank_error(img_tf *t, const char *key, int ndim, const int64_t *shape, int batch_ndim, const char *what,
                      crl_error *err)
{
    char b[160];
    return crl_error_set(err, CRL_E_SHAPE, "%s: key '%s' has shape %s (%d batch dim%s): %s", t->who, key,
                         img_shape_str(ndim, shape, b, sizeof b), batch_ndim, batch_ndim == 1 ? "" : "s", what);
}

/* ---- PermuteTransform ------------------------------------------------- */

static int permute_plan(img_tf *t, crl_dtype dt, int ndim, const int64_t *shape, int batch_ndim, const char *key,
                        img_plan *p, crl_error *err)
{
    const shape_params *q = t->extra;
    if (ndim - batch_ndim < q->k) {
        char what[96];
        snprintf(what, sizeof what, "dims names %d trailing dims but it has %d after the batch dims", q->k,
                 ndim - batch_ndim);
        return rank_error(t, key, ndim, shape, batch_ndim, what, err);
    }
    plan_same(p, dt, ndim, shape);
    for (int i = 0; i < q->k; i++)
        p->shape[ndim - q->k + i] = shape[ndim + q->dims[i]];
    return CRL_OK;
}

static int permute_run(img_tf *t, const img_plan *p, const crl_tensor *in, crl_tensor *out, crl_error *err)
{
    (void)p;
    const shape_params *q = t->extra;
    int nd = crl_tensor_ndim(in), dims[CRL_MAX_DIMS];
    for (int i = 0; i < nd - q->k; i++)
        dims[i] = i;
    for (int i = 0; i < q->k; i++)
        dims[nd - q->k + i] = nd + q->dims[i];
    crl_error e;
    crl_error_clear(&e);
    crl_tensor *v = crl_tensor_permute((crl_tensor *)in, dims, &e);
    if (!v)
        return crl_error_pass(err, &e, CRL_E_INVALID);
    int rc = crl_tensor_copy(out, v, err);
    crl_tensor_unref(v);
    return rc;
}

static int permute_create(const crl_opts *o, void **out, crl_error *err)
{
    crl_error e;
    crl_error_clear(&e);
    img_tf *t = img_tf_new(o, "PermuteTransform", true, &e);
    if (!t)
        return crl_error_pass(err, &e, CRL_E_NOMEM);
    shape_params *q = calloc(1, sizeof *q);
    t->extra = q;
    t->free_extra = free_extra;
    size_t n = 0;
    const char *const *items = NULL;
    int rc = q ? crl_opts_list(o, "dims", &n, &items, err) : nomem(t->who, err);
    if (!rc && (n < 1 || n > CRL_MAX_DIMS))
        rc = crl_error_set(err, CRL_E_CONFIG, "%s: [%s] dims has %zu entries; give 1 to %d", crl_opts_origin(o, "dims"),
                           crl_opts_section(o), n, CRL_MAX_DIMS);
    bool seen[CRL_MAX_DIMS] = { false };
    for (size_t i = 0; !rc && i < n; i++) {
        int64_t d;
        if (!crl_parse_int(items[i], &d) || d >= 0 || d < -(int64_t)n || seen[-d - 1])
            rc = crl_error_set(err, CRL_E_CONFIG,
                               "%s: [%s] dims = %s: give a reordering of the trailing dims -%zu .. -1 (negative, each "
                               "once), e.g. dims = -1, -3, -2 for [H, W, C] -> [C, H, W]",
                               crl_opts_origin(o, "dims"), crl_opts_section(o), items[i], n);
        else {
            seen[-d - 1] = true;
            q->dims[i] = (int)d;
        }
    }
    if (rc) {
        img_tf_destroy(t);
        return rc;
    }
    q->k = (int)n;
    t->plan = permute_plan;
    t->run = permute_run;
    *out = t;
    return CRL_OK;
}

/* ---- UnsqueezeTransform / SqueezeTransform ---------------------------- */

static int read_dim(const crl_opts *o, const char *who, const char *name, shape_params *q, crl_error *err)
{
    int64_t d;
    int rc;
    if ((rc = crl_opts_int(o, name, &d, err)) || (rc = crl_opts_bool(o, "allow_positive_dim", &q->allow_positive, err)))
        return rc;
    if (d >= 0 && !q->allow_positive)
        return crl_error_set(err, CRL_E_CONFIG,
                             "%s: [%s] %s = %lld: %s takes negative dims (counted from the end) so that any batch "
                             "shape works; use a negative dim or set allow_positive_dim = true (then dims count "
                             "from the first dim after the batch dims)",
                             crl_opts_origin(o, name), crl_opts_section(o), name, (long long)d, who);
    if (!strcmp(name, "last_dim"))
        q->last = d;
    else
        q->dim = d;
    return CRL_OK;
}

static int unsqueeze_plan(img_tf *t, crl_dtype dt, int ndim, const int64_t *shape, int batch_ndim, const char *key,
                          img_plan *p, crl_error *err)
{
    const shape_params *q = t->extra;
    int feat = ndim - batch_ndim;
    int64_t pos = q->dim < 0 ? ndim + 1 + q->dim : batch_ndim + q->dim;
    if (pos < batch_ndim || pos > ndim || ndim + 1 > CRL_MAX_DIMS) {
        char what[128];
        snprintf(what, sizeof what, "cannot insert a dim at %lld; valid dims are %d .. -1%s", (long long)q->dim,
                 -(feat + 1), q->allow_positive ? " or 0 .. feature dims" : "");
        return rank_error(t, key, ndim, shape, batch_ndim, what, err);
    }
    p->out_dt = dt;
    p->ndim = ndim + 1;
    for (int i = 0, j = 0; i < ndim + 1; i++)
        p->shape[i] = i == pos ? 1 : shape[j++];
    return CRL_OK;
}

static int squeeze_plan(img_tf *t, crl_dtype dt, int ndim, const int64_t *shape, int batch_ndim, const char *key,
                        img_plan *p, crl_error *err)
{
    const shape_params *q = t->extra;
    int feat = ndim - batch_ndim;
    int64_t pos = q->dim < 0 ? ndim + q->dim : batch_ndim + q->dim;
    char what[160];
    if (pos < batch_ndim || pos >= ndim) {
        snprintf(what, sizeof what, "there is no dim %lld to squeeze; valid dims are %d .. -1", (long long)q->dim,
                 -feat);
        return rank_error(t, key, ndim, shape, batch_ndim, what, err);
    }
    if (shape[pos] != 1) {
        snprintf(what, sizeof what, "dim %lld has size %lld, only a size-1 dim can be squeezed", (long long)q->dim,
                 (long long)shape[pos]);
        return rank_error(t, key, ndim, shape, batch_ndim, what, err);
    }
    p->out_dt = dt;
    p->ndim = ndim - 1;
    for (int i = 0, j = 0; i < ndim; i++)
        if (i != pos)
            p->shape[j++] = shape[i];
    return CRL_OK;
}

static int sq_create(const crl_opts *o, void **out, bool unsqueeze, crl_error *err)
{
    crl_error e;
    crl_error_clear(&e);
    img_tf *t = img_tf_new(o, unsqueeze ? "UnsqueezeTransform" : "SqueezeTransform", true, &e);
    if (!t)
        return crl_error_pass(err, &e, CRL_E_NOMEM);
    shape_params *q = calloc(1, sizeof *q);
    t->extra = q;
    t->free_extra = free_extra;
    int rc = q ? read_dim(o, t->who, "dim", q, err) : nomem(t->who, err);
    if (rc) {
        img_tf_destroy(t);
        return rc;
    }
    t->plan = unsqueeze ? unsqueeze_plan : squeeze_plan;
    t->run = run_memcpy;
    *out = t;
    return CRL_OK;
}

static int unsqueeze_create(const crl_opts *o, void **out, crl_error *err)
{
    return sq_create(o, out, true, err);
}

static int squeeze_create(const crl_opts *o, void **out, crl_error *err)
{
    return sq_create(o, out, false, err);
}

/* ---- FlattenObservation ----------------------------------------------- */

static int flatten_plan(img_tf *t, crl_dtype dt, int ndim, const int64_t *shape, int batch_ndim, const char *key,
                        img_plan *p, crl_error *err)
{
    const shape_params *q = t->extra;
    int64_t first = q->dim < 0 ? ndim + q->dim : batch_ndim + q->dim;
    int64_t last = q->last < 0 ? ndim + q->last : batch_ndim + q->last;
    if (first < batch_ndim || last >= ndim || first > last) {
        char what[160];
        snprintf(what, sizeof what, "first_dim = %lld, last_dim = %lld do not name a range of its %d non-batch dims",
                 (long long)q->dim, (long long)q->last, ndim - batch_ndim);
        return rank_error(t, key, ndim, shape, batch_ndim, what, err);
    }
    p->out_dt = dt;
    int j = 0;
    for (int64_t i = 0; i < first; i++)
        p->shape[j++] = shape[i];
    int64_t prod = 1;
    for (int64_t i = first; i <= last; i++)
        prod *= shape[i];
    p->shape[j++] = prod;
    for (int64_t i = last + 1; i < ndim; i++)
        p->shape[j++] = shape[i];
    p->ndim = j;
    return CRL_OK;
}

static int flatten_create(const crl_opts *o, void **out, crl_error *err)
{
    crl_error e;
    crl_error_clear(&e);
    img_tf *t = img_tf_new(o, "FlattenObservation", false, &e);
    if (!t)
        return crl_error_pass(err, &e, CRL_E_NOMEM);
    shape_params *q = calloc(1, sizeof *q);
    t->extra = q;
    t->free_extra = free_extra;
    int rc = q ? read_dim(o, t->who, "first_dim", q, err) : nomem(t->who, err);
    if (!rc)
        rc = read_dim(o, t->who, "last_dim", q, err);
    if (!rc && (q->dim < 0) == (q->last < 0) && q->dim > q->last)
        rc = crl_error_set(err, CRL_E_CONFIG, "%s: [%s] first_dim = %lld comes after last_dim = %lld; swap them",
                           crl_opts_origin(o, "first_dim"), crl_opts_section(o), (long long)q->dim,
                           (long long)q->last);
    if (rc) {
        img_tf_destroy(t);
        return rc;
    }
    t->plan = flatten_plan;
    t->run = run_memcpy;
    *out = t;
    return CRL_OK;
}

#define KEYS_OPTIONS(def, doc_in)                                                                            \
    { "in_keys", CRL_OPT_LIST, 0, def, 0, 0, NULL, doc_in },                                                 \
    { "out_keys", CRL_OPT_LIST, 0, "", 0, 0, NULL, "keys to write, one per in key (empty: write over the in keys)" }

static const crl_option permute_options[] = {
    { "dims", CRL_OPT_LIST, CRL_OPT_REQUIRED, NULL, 0, 0, NULL,
      "new order of the trailing dims, negative (-1, -3, -2 turns [H, W, C] into [C, H, W])" },
    KEYS_OPTIONS("", "keys to permute (TorchRL's default: none)"),
    CRL_OPTIONS_END
};

static const crl_option unsqueeze_options[] = {
    { "dim", CRL_OPT_INT, CRL_OPT_REQUIRED, NULL, 0, 0, NULL, "where the new size-1 dim goes (negative: from the end)" },
    { "allow_positive_dim", CRL_OPT_BOOL, 0, "false", 0, 0, NULL,
      "accept dim >= 0, counted from the first dim after the batch dims" },
    KEYS_OPTIONS("", "keys to unsqueeze (TorchRL's default: none)"),
    CRL_OPTIONS_END
};

static const crl_option squeeze_options[] = {
    { "dim", CRL_OPT_INT, CRL_OPT_REQUIRED, NULL, 0, 0, NULL, "the size-1 dim to remove (negative: from the end)" },
    { "allow_positive_dim", CRL_OPT_BOOL, 0, "false", 0, 0, NULL,
      "accept dim >= 0, counted from the first dim after the batch dims" },
    KEYS_OPTIONS("", "keys to squeeze (TorchRL's default: none)"),
    CRL_OPTIONS_END
};

static const crl_option flatten_options[] = {
    { "first_dim", CRL_OPT_INT, CRL_OPT_REQUIRED, NULL, 0, 0, NULL, "first dim merged (negative: from the end)" },
    { "last_dim", CRL_OPT_INT, CRL_OPT_REQUIRED, NULL, 0, 0, NULL, "last dim merged (negative: from the end)" },
    { "allow_positive_dim", CRL_OPT_BOOL, 0, "false", 0, 0, NULL,
      "accept dims >= 0, counted from the first dim after the batch dims" },
    KEYS_OPTIONS("pixels", "keys to flatten"),
    CRL_OPTIONS_END
};

/* ---- CatTensors ------------------------------------------------------- */

typedef struct {
    const char *who;
    size_t n;
    char **in;          /* sorted when sort = true */
    char *out;
    int64_t dim;        /* negative */
    bool del_keys, unsqueeze_if_needed;
} cat_tf;

static void cat_destroy(void *vt)
{
    cat_tf *t = vt;
    if (!t)
        return;
    for (size_t i = 0; i < t->n; i++)
        free(t->in[i]);
    free(t->in);
    free(t->out);
    free(t);
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static int cat_create(const crl_opts *o, void **out, crl_error *err)
{
    cat_tf *t = calloc(1, sizeof *t);
    if (!t)
        return nomem("CatTensors", err);
    t->who = "CatTensors";
    size_t n = 0;
    const char *const *items = NULL;
    const char *ok = NULL;
    bool sort = true;
    int rc = crl_opts_list(o, "in_keys", &n, &items, err);
    if (!rc && n == 0)
        rc = crl_error_set(err, CRL_E_CONFIG, "%s: [%s] in_keys is empty; CatTensors needs the keys to concatenate",
                           crl_opts_origin(o, "in_keys"), crl_opts_section(o));
    if (!rc)
        rc = crl_opts_string(o, "out_key", &ok, err);
    if (!rc)
        rc = crl_opts_int(o, "dim", &t->dim, err);
    if (!rc)
        rc = crl_opts_bool(o, "del_keys", &t->del_keys, err);
    if (!rc)
        rc = crl_opts_bool(o, "unsqueeze_if_needed", &t->unsqueeze_if_needed, err);
    if (!rc)
        rc = crl_opts_bool(o, "sort", &sort, err);
    if (!rc && t->dim >= 0)
        rc = crl_error_set(err, CRL_E_CONFIG,
                           "%s: [%s] dim = %lld: CatTensors takes a negative dim (counted from the end) so that any "
                           "batch shape works; e.g. dim = -1",
                           crl_opts_origin(o, "dim"), crl_opts_section(o), (long long)t->dim);
    if (!rc && !*ok)
        rc = crl_error_set(err, CRL_E_CONFIG, "%s: [%s] out_key is empty; name the key to write",
                           crl_opts_origin(o, "out_key"), crl_opts_section(o));
    if (!rc) {
        t->in = calloc(n, sizeof *t->in);
        t->out = strdup(ok);
        if (!t->in || !t->out)
            rc = nomem(t->who, err);
        for (size_t i = 0; !rc && i < n; i++) {
            t->n = i + 1;
            if (!(t->in[i] = strdup(items[i])))
                rc = nomem(t->who, err);
        }
    }
    for (size_t i = 0; !rc && i < n; i++)
        for (size_t j = 0; j < i; j++)
            if (!strcmp(t->in[i], t->in[j]))
                rc = crl_error_set(err, CRL_E_CONFIG, "%s: [%s] in_keys names '%s' twice",
                                   crl_opts_origin(o, "in_keys"), crl_opts_section(o), t->in[i]);
    if (rc) {
        cat_destroy(t);
        return rc;
    }
    if (sort)
        qsort(t->in, t->n, sizeof *t->in, cmp_str);
    *out = t;
    return CRL_OK;
}

/* Check the inputs (dtype, ndim, sizes off the cat dim) and compute the
 * output shape.  ndims[i] < ndim marks an input to unsqueeze at -1. */
static int cat_plan(const cat_tf *t, size_t n, const crl_dtype *dts, const int *ndims, const int64_t *const *shapes,
                    int batch_ndim, int *ondim, int64_t *oshape, int64_t *pos, crl_error *err)
{
    int nd = 0;
    for (size_t i = 0; i < n; i++)
        nd = ndims[i] > nd ? ndims[i] : nd;
    char b0[160], b1[160];
    for (size_t i = 0; i < n; i++) {
        if (dts[i] != dts[0])
            return crl_error_set(err, CRL_E_DTYPE,
                                 "%s: key '%s' is %s but '%s' is %s; concatenated keys need one dtype (cast with "
                                 "DTypeCastTransform first)",
                                 t->who, t->in[i], crl_dtype_name(dts[i]), t->in[0], crl_dtype_name(dts[0]));
        if (ndims[i] != nd && !(t->unsqueeze_if_needed && ndims[i] == nd - 1))
            return crl_error_set(err, CRL_E_SHAPE,
                                 "%s: key '%s' has shape %s but another key has %d dims; give keys of one rank (or set "
                                 "unsqueeze_if_needed = true for keys one dim short)",
                                 t->who, t->in[i], img_shape_str(ndims[i], shapes[i], b0, sizeof b0), nd);
    }
    int64_t p = nd + t->dim;
    if (p < batch_ndim || p >= nd)
        return crl_error_set(err, CRL_E_SHAPE, "%s: dim = %lld is outside the %d non-batch dims of '%s' (shape %s)",
                             t->who, (long long)t->dim, nd - batch_ndim, t->in[0],
                             img_shape_str(ndims[0], shapes[0], b0, sizeof b0));
    int64_t full[CRL_MAX_DIMS];
    int64_t sum = 0;
    for (size_t i = 0; i < n; i++) {
        int64_t s[CRL_MAX_DIMS];
        memcpy(s, shapes[i], (size_t)ndims[i] * sizeof *s);
        if (ndims[i] < nd)
            s[nd - 1] = 1;
        if (i == 0)
            memcpy(full, s, (size_t)nd * sizeof *s);
        for (int d = 0; d < nd; d++)
            if (d != p && s[d] != full[d])
                return crl_error_set(err, CRL_E_SHAPE,
                                     "%s: key '%s' has shape %s and '%s' has %s; they must agree on every dim but "
                                     "dim %lld",
                                     t->who, t->in[i], img_shape_str(ndims[i], shapes[i], b0, sizeof b0), t->in[0],
                                     img_shape_str(ndims[0], shapes[0], b1, sizeof b1), (long long)t->dim);
        sum += s[p];
    }
    memcpy(oshape, full, (size_t)nd * sizeof *full);
    oshape[p] = sum;
    *ondim = nd;
    *pos = p;
    return CRL_OK;
}

static int cat_specs(void *vt, crl_transform_specs *s, crl_error *err)
{
    cat_tf *t = vt;
    crl_dtype dts[64];
    int ndims[64];
    const int64_t *shapes[64];
    int rc;
    crl_error e;   /* for the calls that return NULL on failure */
    crl_error_clear(&e);
    if (t->n > 64)
        return crl_error_set(err, CRL_E_RANGE, "%s: more than 64 in_keys", t->who);
    for (size_t i = 0; i < t->n; i++) {
        crl_spec *leaf = tf_specs_need(s, t->in[i], t->who, &e);
        if (!leaf)
            return crl_error_pass(err, &e, CRL_E_NOT_FOUND);
        dts[i] = crl_spec_dtype(leaf);
        ndims[i] = crl_spec_ndim(leaf);
        shapes[i] = crl_spec_shape(leaf);
    }
    int nd;
    int64_t shape[CRL_MAX_DIMS], pos;
    if ((rc = cat_plan(t, t->n, dts, ndims, shapes, s->batch_ndim, &nd, shape, &pos, err)))
        return rc;
    crl_spec *out = crl_spec_unbounded(dts[0], nd, shape, &e);
    if (!out)
        return crl_error_pass(err, &e, CRL_E_INVALID);
    if (t->del_keys)
        for (size_t i = 0; i < t->n; i++) {
            if (!strcmp(t->in[i], t->out))
                continue;
            crl_spec **owner = tf_specs_owner(s, t->in[i], NULL);
            if (owner && (rc = crl_spec_composite_del(*owner, t->in[i], err))) {
                crl_spec_unref(out);
                return rc;
            }
        }
    return tf_specs_put(s, t->out, out, err);
}

static int cat_call(void *vt, crl_td *td, crl_error *err)
{
    cat_tf *t = vt;
    crl_tensor *ins[64];
    crl_dtype dts[64];
    int ndims[64];
    const int64_t *shapes[64];
    if (t->n > 64)
        return crl_error_set(err, CRL_E_RANGE, "%s: more than 64 in_keys", t->who);
    crl_error e;   /* for the calls that return NULL on failure */
    crl_error_clear(&e);
    for (size_t i = 0; i < t->n; i++) {
        crl_tensor *x = tf_td_need(td, t->in[i], t->who, &e);
        if (!x) {
            for (size_t j = 0; j < i; j++)
                crl_tensor_unref(ins[j]);
            return crl_error_pass(err, &e, CRL_E_NOT_FOUND);
        }
        ins[i] = crl_tensor_ref(x); /* the output may replace one of them */
        dts[i] = crl_tensor_dtype(x);
        ndims[i] = crl_tensor_ndim(x);
        shapes[i] = crl_tensor_shape(x);
    }
    int nd;
    int64_t shape[CRL_MAX_DIMS], pos;
    int rc = cat_plan(t, t->n, dts, ndims, shapes, crl_td_batch_ndim(td), &nd, shape, &pos, err);
    crl_tensor *out = NULL, *tmp = NULL;
    if (!rc) {
        out = crl_transform_output(td, t->out, dts[0], nd, shape, &e);
        if (!out)
            rc = crl_error_pass(err, &e, CRL_E_NOMEM);
    }
    /* out is an input itself only when a single key is concatenated into
     * its own place: write into a scratch tensor then. */
    crl_tensor *dst = out;
    for (size_t i = 0; !rc && i < t->n; i++)
        if (ins[i] == out) {
            dst = tmp = crl_tensor_new(dts[0], nd, shape, &e);
            if (!tmp)
                rc = crl_error_pass(err, &e, CRL_E_NOMEM);
            break;
        }
    int64_t off = 0;
    for (size_t i = 0; !rc && i < t->n; i++) {
        crl_tensor *src = ndims[i] < nd ? crl_tensor_unsqueeze(ins[i], -1, &e) : crl_tensor_ref(ins[i]);
        int64_t len = src ? crl_tensor_shape(src)[pos] : 0;
        crl_tensor *slice = src ? crl_tensor_slice(dst, (int)pos, off, off + len, 1, &e) : NULL;
        rc = slice ? crl_tensor_copy(slice, src, err) : crl_error_pass(err, &e, CRL_E_NOMEM);
        crl_tensor_unref(slice);
        crl_tensor_unref(src);
        off += len;
    }
    if (!rc && tmp)
        rc = crl_tensor_copy(out, tmp, err);
    crl_tensor_unref(tmp);
    for (size_t i = 0; !rc && t->del_keys && i < t->n; i++)
        if (strcmp(t->in[i], t->out))
            rc = crl_td_del(td, t->in[i], err);
    for (size_t i = 0; i < t->n; i++)
        crl_tensor_unref(ins[i]);
    return rc;
}

static const crl_option cat_options[] = {
    { "in_keys", CRL_OPT_LIST, CRL_OPT_REQUIRED, NULL, 0, 0, NULL, "keys to concatenate" },
    { "out_key", CRL_OPT_STRING, 0, "observation_vector", 0, 0, NULL, "key of the result" },
    { "dim", CRL_OPT_INT, 0, "-1", 0, 0, NULL, "dim to concatenate along (negative: from the end)" },
    { "del_keys", CRL_OPT_BOOL, 0, "true", 0, 0, NULL, "remove the in keys once concatenated" },
    { "unsqueeze_if_needed", CRL_OPT_BOOL, 0, "false", 0, 0, NULL,
      "give keys one dim short a trailing size-1 dim (scalars next to vectors)" },
    { "sort", CRL_OPT_BOOL, 0, "true", 0, 0, NULL, "concatenate in sorted key order, as TorchRL does" },
    CRL_OPTIONS_END
};

/* ---- registration ----------------------------------------------------- */

#define SHAPE_OPS(create_)                                                                                   \
    { .struct_size = sizeof(crl_transform_ops), .create = create_, .transform_specs = img_tf_specs,           \
      .call = img_tf_call, .destroy = img_tf_destroy }

/* TorchRL's: CatTensors(in_keys=[...], out_key=observation), the out key as Python formats it. */
static int cat_repr(void *p, char *buf, size_t size)
{
    const cat_tf *t = p;
    char *in = tf_pylist(t->n, t->in), *out = tf_pylist(1, &t->out);
    int n = -1;
    if (in && out) {
        /* A plain key prints bare (str), a nested one as its tuple: strip the list's brackets and quotes. */
        size_t ol = strlen(out);
        if (strchr(t->out, '.'))
            n = snprintf(buf, size, "CatTensors(in_keys=%s, out_key=%.*s)", in, (int)(ol - 2), out + 1);
        else
            n = snprintf(buf, size, "CatTensors(in_keys=%s, out_key=%s)", in, t->out);
    }
    free(in);
    free(out);
    return n;
}

static const crl_transform_ops permute_ops = SHAPE_OPS(permute_create);
static const crl_transform_ops unsqueeze_ops = SHAPE_OPS(unsqueeze_create);
static const crl_transform_ops squeeze_ops = SHAPE_OPS(squeeze_create);
static const crl_transform_ops flatten_ops = SHAPE_OPS(flatten_create);
static const crl_transform_ops cat_ops = {
    .struct_size = sizeof(crl_transform_ops),
    .create = cat_create,
    .transform_specs = cat_specs,
    .call = cat_call,
    .destroy = cat_destroy,
    .repr = cat_repr,
};

int tf_register_image_shape(crl_host *host, crl_error *err)
{
    int rc;
    if ((rc = tf_register(host, "PermuteTransform", "reorder the trailing dims of tensors", permute_options,
                          &permute_ops, err)) ||
        (rc = tf_register(host, "UnsqueezeTransform", "insert a size-1 dim", unsqueeze_options, &unsqueeze_ops, err)) ||
        (rc = tf_register(host, "SqueezeTransform", "remove a size-1 dim", squeeze_options, &squeeze_ops, err)) ||
        (rc = tf_register(host, "FlattenObservation", "merge the dims first_dim .. last_dim into one", flatten_options,
                          &flatten_ops, err)) ||
        (rc = tf_register(host, "CatTensors", "concatenate keys into one along a dim", cat_options, &cat_ops, err)))
        return rc;
    return CRL_OK;
}
