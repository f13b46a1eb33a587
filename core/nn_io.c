/* Parameters as a whole: state dicts, clones (target networks), soft/hard updates, checkpoint save/load, finiteness. */
#include "nn-private.h"

#include <math.h>

/* Set key to a view [ndim, shape] of the parameters at off. */
static int put_view(crl_td *td, crl_mlp *m, const char *key, size_t off, int ndim, const int64_t *shape,
                    crl_error *err)
{
    int64_t n = 1;
    for (int d = 0; d < ndim; d++)
        n *= shape[d];
    crl_tensor *flat = crl_tensor_slice(m->params, 0, (int64_t)off, (int64_t)off + n, 1, err);
    crl_tensor *v = flat ? crl_tensor_view(flat, ndim, shape, err) : NULL;
    int rc = v ? crl_td_set(td, key, v, err) : CRL_E_NOMEM;
    crl_tensor_unref(v);
    crl_tensor_unref(flat);
    return rc;
}

crl_td *crl_mlp_state_dict(crl_mlp *m, crl_error *err)
{
    crl_td *td = crl_td_new(0, NULL, err);
    int rc = td ? CRL_OK : CRL_E_NOMEM;
    char key[96];
    /* Sequential(ConvNet, MLP) with an encoder: "0.<i>" and "1.<2l>"; an MLP alone: "<2l>". */
    const char *head = m->n_stages ? "1." : "";
    for (int i = 0; !rc && i < m->n_stages; i++) {
        const crl__stage *s = &m->stages[i];
        if (s->kind != CRL__STAGE_CONV)
            continue;
        snprintf(key, sizeof key, "0.%d.weight", s->seq);
        rc = put_view(td, m, key, s->w_off, 4, (int64_t[]){ s->cout, s->cin, s->k, s->k }, err);
        snprintf(key, sizeof key, "0.%d.bias", s->seq);
        if (!rc)
            rc = put_view(td, m, key, s->b_off, 1, &s->cout, err);
    }
    for (int l = 0; !rc && l < m->n_layers; l++) {
        const crl__layer *L = &m->layers[l];
        if (m->dueling && l == m->n_layers - 1) {
            /* the output layer's row 0 is the value, the rest the advantages */
            int64_t n = L->out - 1;
            snprintf(key, sizeof key, "%svalue.weight", head);
            rc = put_view(td, m, key, L->w_off, 2, (int64_t[]){ 1, L->in }, err);
            snprintf(key, sizeof key, "%svalue.bias", head);
            if (!rc)
                rc = put_view(td, m, key, L->b_off, 1, (int64_t[]){ 1 }, err);
            snprintf(key, sizeof key, "%sadvantage.weight", head);
            if (!rc)
                rc = put_view(td, m, key, L->w_off + (size_t)L->in, 2, (int64_t[]){ n, L->in }, err);
            snprintf(key, sizeof key, "%sadvantage.bias", head);
            if (!rc)
                rc = put_view(td, m, key, L->b_off + 1, 1, &n, err);
            break;
        }
        /* nn.Sequential numbers activations too: Linear l is entry 2l. */
        snprintf(key, sizeof key, "%s%d.weight", head, 2 * l);
        rc = put_view(td, m, key, L->w_off, 2, (int64_t[]){ L->out, L->in }, err);
        snprintf(key, sizeof key, "%s%d.bias", head, 2 * l);
        if (!rc)
            rc = put_view(td, m, key, L->b_off, 1, &L->out, err);
    }
    if (rc) {
        crl_td_unref(td);
        return NULL;
    }
    return td;
}

crl_mlp *crl_mlp_clone(crl_mlp *m, const char *name, crl_error *err)
{
    int64_t *cells = g_new(int64_t, m->n_layers ? m->n_layers : 1);
    for (int l = 0; l + 1 < m->n_layers; l++)
        cells[l] = m->layers[l].out;
    crl_rng rng;
    crl_rng_init(&rng, 0, 0);   /* overwritten below */
    crl_mlp *c = crl_convnet_new(name ? name : m->name, m->in_ndim, m->in_shape, m->spec, m->n_stages, m->conv_act,
                                 cells, m->n_layers ? m->n_layers - 1 : 0, m->act,
                                 m->n_layers ? m->out_features : 0, m->dueling, &rng, err);
    if (c) {
        c->activate_last = m->activate_last;
        c->normalize_images = m->normalize_images;
        memcpy(crl_tensor_data(c->params), crl_tensor_data(m->params), crl_tensor_nbytes(m->params));
    }
    g_free(cells);
    return c;
}

static int check_pair(const char *what, const crl_tensor *dst, const crl_tensor *src, crl_error *err)
{
    if (!dst || !src)
        return crl_error_set(err, CRL_E_INVALID, "%s: NULL parameter vector", what);
    if (crl_tensor_dtype(dst) != CRL_F32 || crl_tensor_dtype(src) != CRL_F32)
        return crl_error_set(err, CRL_E_DTYPE, "%s: parameters must be float32 (got %s and %s)", what,
                             crl_dtype_name(crl_tensor_dtype(dst)), crl_dtype_name(crl_tensor_dtype(src)));
    if (crl_tensor_numel(dst) != crl_tensor_numel(src) || !crl_tensor_is_contiguous(dst) ||
        !crl_tensor_is_contiguous(src))
        return crl_error_set(err, CRL_E_SHAPE,
                             "%s: the target has %" PRId64 " parameters and the source %" PRId64
                             " (both contiguous): clone the target from its source with crl_mlp_clone",
                             what, crl_tensor_numel(dst), crl_tensor_numel(src));
    return CRL_OK;
}

int crl_params_soft_update(crl_tensor *dst, const crl_tensor *src, double tau, crl_error *err)
{
    int rc = check_pair("soft update", dst, src, err);
    if (rc)
        return rc;
    if (!(tau >= 0 && tau <= 1))
        return crl_error_set(err, CRL_E_RANGE, "soft update: tau = %g must be in [0, 1] (TorchRL's eps = 1 - tau)", tau);
    float *d = crl_tensor_data(dst);
    const float *s = crl_tensor_data(src);
    float t = (float)tau, keep = (float)(1.0 - tau);
    for (int64_t i = 0, n = crl_tensor_numel(dst); i < n; i++)
        d[i] = keep * d[i] + t * s[i];
    return CRL_OK;
}

int crl_params_hard_update(crl_tensor *dst, const crl_tensor *src, crl_error *err)
{
    int rc = check_pair("hard update", dst, src, err);
    if (rc)
        return rc;
    memcpy(crl_tensor_data(dst), crl_tensor_data(src), crl_tensor_nbytes(dst));
    return CRL_OK;
}

bool crl_tensor_all_finite(const crl_tensor *t)
{
    if (!t || !crl_dtype_is_float(crl_tensor_dtype(t)))
        return false;
    if (crl_tensor_dtype(t) == CRL_F32 && crl_tensor_is_contiguous(t)) {
        const float *p = crl_tensor_data(t);
        for (int64_t i = 0, n = crl_tensor_numel(t); i < n; i++)
            if (!isfinite(p[i]))
                return false;
        return true;
    }
    for (int64_t i = 0, n = crl_tensor_numel(t); i < n; i++)
        if (!isfinite(crl_tensor_flat_get(t, i)))
            return false;
    return true;
}

int crl__state_dict_save(crl_td *sd, const crl_error *e, crl_ckpt_writer *w, const char *prefix, crl_error *err)
{
    if (!sd)
        return crl_error_pass(err, e, CRL_E_NOMEM);
    int rc = crl_ckpt_write_td(w, prefix, sd, err);
    crl_td_unref(sd);
    return rc;
}

int crl__state_dict_load(crl_td *sd, const crl_error *sd_err, const crl_ckpt_reader *r, const char *prefix,
                         const char *kind, const char *name, crl_error *err)
{
    crl_error e;
    crl_error_clear(&e);
    crl_td *got = crl_ckpt_read_td(r, prefix, &e);
    if (!got) {
        crl_td_unref(sd);
        return crl_error_pass(err, &e, CRL_E_CORRUPT);
    }
    if (!sd && sd_err)
        e = *sd_err;
    char **keys = sd ? crl_td_leaf_keys(sd, &e) : NULL;
    char **gkeys = keys ? crl_td_leaf_keys(got, &e) : NULL;
    int rc = gkeys ? CRL_OK : crl_error_pass(err, &e, CRL_E_NOMEM);
    size_t nk = 0, ng = 0;
    while (keys && keys[nk])
        nk++;
    while (gkeys && gkeys[ng])
        ng++;
    char b[CRL__SHAPE_BUF], c[CRL__SHAPE_BUF];
    /* Validate everything before the first write: a bad file changes nothing. */
    for (size_t i = 0; !rc && i < nk; i++) {
        const crl_tensor *want = crl_td_get(sd, keys[i]), *have = crl_td_get(got, keys[i]);
        if (!have)
            rc = crl_error_set(err, CRL_E_CORRUPT, "%s: section '%s/%s' is missing: the checkpoint holds another "
                               "network than %s%smodule '%s'", crl_ckpt_path(r), prefix, keys[i], kind ? kind : "",
                               kind ? " " : "", name);
        else if (crl_tensor_dtype(have) != CRL_F32 || !crl_tensor_same_shape(want, have))
            rc = crl_error_set(err, CRL_E_CORRUPT, "%s: section '%s/%s' holds %s %s but module '%s' has float32 %s",
                               crl_ckpt_path(r), prefix, keys[i], crl_dtype_name(crl_tensor_dtype(have)),
                               crl__shape_fmt(b, crl_tensor_ndim(have), crl_tensor_shape(have)), name,
                               crl__shape_fmt(c, crl_tensor_ndim(want), crl_tensor_shape(want)));
    }
    if (!rc && ng != nk)
        rc = crl_error_set(err, CRL_E_CORRUPT, "%s: '%s' holds %zu tensors but module '%s' has %zu: another "
                           "architecture", crl_ckpt_path(r), prefix, ng, name, nk);
    for (size_t i = 0; !rc && i < nk; i++)
        rc = crl_tensor_copy(crl_td_get(sd, keys[i]), crl_td_get(got, keys[i]), err);
    crl_free(keys);
    crl_free(gkeys);
    crl_td_unref(sd);
    crl_td_unref(got);
    return rc;
}

int crl_mlp_save(crl_mlp *m, crl_ckpt_writer *w, const char *prefix, crl_error *err)
{
    crl_error e;
    crl_error_clear(&e);
    crl_td *sd = crl_mlp_state_dict(m, &e);
    return crl__state_dict_save(sd, &e, w, prefix, err);
}

int crl_mlp_load(crl_mlp *m, const crl_ckpt_reader *r, const char *prefix, crl_error *err)
{
    crl_error e;
    crl_error_clear(&e);
    crl_td *sd = crl_mlp_state_dict(m, &e);
    return crl__state_dict_load(sd, &e, r, prefix, NULL, m->name, err);
}
