/* TensorDictModule: a network that reads in_keys and writes out_key of a TensorDict. */
#include "nn-private.h"

struct crl_tdmodule {
    crl_mlp *net;
    crl_td_key **in, *out;
    size_t n_in;
    int64_t *in_cols;
    crl_tensor *x, *y, *gout;   /* [rows, in], infer's [rows, out], backward's [rows, out] */
};

int64_t crl__td_rows(const crl_td *td)
{
    int64_t rows = 1;
    for (int i = 0; i < crl_td_batch_ndim(td); i++)
        rows *= crl_td_batch_shape(td)[i];
    return rows;
}

static int missing_key(const char *who, const crl_td *td, const char *key, crl_error *err)
{
    char **keys = crl_td_leaf_keys(td, NULL);
    GString *s = g_string_new(NULL);
    for (size_t i = 0; keys && keys[i]; i++)
        g_string_append_printf(s, "%s'%s'", i ? ", " : "", keys[i]);
    int rc = crl_error_set(err, CRL_E_NOT_FOUND, "module '%s': in_key '%s' is not in the TensorDict (it has %s)", who,
                           key, s->len ? s->str : "no keys");
    g_string_free(s, TRUE);
    crl_free(keys);
    return rc;
}

/* The tensor at k must be [batch..., cols]. */
static int check_key(const char *who, const crl_td *td, const crl_td_key *k, const crl_tensor *t, int64_t cols,
                     const char *expects, crl_error *err)
{
    int bn = crl_td_batch_ndim(td);
    if (crl_tensor_ndim(t) == bn + 1 && crl_tensor_shape(t)[bn] == cols)
        return CRL_OK;
    /* images [batch..., C, H, W] read as rows of C*H*W (gather checked the dims against the network's) */
    int64_t feat = 1;
    for (int d = bn; d < crl_tensor_ndim(t); d++)
        feat *= crl_tensor_shape(t)[d];
    if (crl_tensor_ndim(t) > bn + 1 && feat == cols)
        return CRL_OK;
    char b[CRL__SHAPE_BUF];
    return crl_error_set(err, CRL_E_SHAPE, "module '%s': key '%s' has shape %s but %s %" PRId64
                         " features (batch dims %d, then one feature dim)", who, crl_td_key_str(k),
                         crl__shape_fmt(b, crl_tensor_ndim(t), crl_tensor_shape(t)), expects, cols, bn);
}

int crl__td_read_rows(const char *who, const crl_td *td, const crl_td_key *k, int64_t cols, float *dst,
                      int64_t stride, int64_t col0, crl_error *err)
{
    const crl_tensor *t = crl_td_get_k(td, k);
    if (!t)
        return missing_key(who, td, crl_td_key_str(k), err);
    int rc = check_key(who, td, k, t, cols, "the MLP expects", err);
    if (rc)
        return rc;
    int64_t rows = crl__td_rows(td);
    if (crl_tensor_dtype(t) == CRL_F32 && crl_tensor_is_contiguous(t)) {
        const float *s = crl_tensor_data(t);
        for (int64_t r = 0; r < rows; r++)
            memcpy(dst + r * stride + col0, s + r * cols, (size_t)cols * sizeof *dst);
        return CRL_OK;
    }
    if (crl_tensor_dtype(t) == CRL_U8 && crl_tensor_is_contiguous(t)) {
        /* pixel frames kept as uint8 (a network with normalize_images scales them) */
        const uint8_t *s = crl_tensor_data(t);
        for (int64_t r = 0; r < rows; r++)
            for (int64_t c = 0; c < cols; c++)
                dst[r * stride + col0 + c] = (float)s[r * cols + c];
        return CRL_OK;
    }
    /* Slow path: other dtypes and strided views. */
    for (int64_t r = 0; r < rows; r++)
        for (int64_t c = 0; c < cols; c++)
            dst[r * stride + col0 + c] = (float)crl_tensor_flat_get(t, r * cols + c);
    return CRL_OK;
}

int crl__td_write_rows(const char *who, crl_td *td, const crl_td_key *k, const float *src, int64_t cols,
                       crl_error *err)
{
    int bn = crl_td_batch_ndim(td);
    crl_tensor *t = crl_td_get_k(td, k);
    if (!(t && crl_tensor_dtype(t) == CRL_F32 && crl_tensor_is_contiguous(t) && crl_tensor_ndim(t) == bn + 1 &&
          crl_tensor_shape(t)[bn] == cols)) {
        int64_t shape[CRL_MAX_DIMS];
        if (bn + 1 > CRL_MAX_DIMS)
            return crl_error_set(err, CRL_E_SHAPE, "module '%s': key '%s': too many batch dims", who, crl_td_key_str(k));
        memcpy(shape, crl_td_batch_shape(td), (size_t)bn * sizeof *shape);
        shape[bn] = cols;
        crl_error e;
        crl_error_clear(&e);
        t = crl_tensor_new(CRL_F32, bn + 1, shape, &e);
        int rc = t ? crl_td_set_k(td, k, t, err) : crl_error_pass(err, &e, CRL_E_NOMEM);
        crl_tensor_unref(t);
        if (rc) {
            crl_error_prefix(err, "module '%s': ", who);
            return rc;
        }
    }
    memcpy(crl_tensor_data(t), src, (size_t)(crl__td_rows(td) * cols) * sizeof *src);
    return CRL_OK;
}

int crl__td_write_batch(const char *who, crl_td *td, const crl_td_key *k, const float *src, crl_error *err)
{
    int bn = crl_td_batch_ndim(td);
    crl_tensor *t = crl_td_get_k(td, k);
    if (!(t && crl_tensor_dtype(t) == CRL_F32 && crl_tensor_is_contiguous(t) && crl_tensor_ndim(t) == bn &&
          !memcmp(crl_tensor_shape(t), crl_td_batch_shape(td), (size_t)bn * sizeof(int64_t)))) {
        crl_error e;
        crl_error_clear(&e);
        t = crl_tensor_new(CRL_F32, bn, crl_td_batch_shape(td), &e);
        int rc = t ? crl_td_set_k(td, k, t, err) : crl_error_pass(err, &e, CRL_E_NOMEM);
        crl_tensor_unref(t);
        if (rc) {
            crl_error_prefix(err, "module '%s': ", who);
            return rc;
        }
    }
    memcpy(crl_tensor_data(t), src, (size_t)crl__td_rows(td) * sizeof *src);
    return CRL_OK;
}

crl_td_key **crl__keys_new(const char *who, const char *const *keys, size_t *n, crl_error *err)
{
    size_t c = 0;
    while (keys && keys[c])
        c++;
    if (!c) {
        crl_error_set(err, CRL_E_INVALID, "module '%s': give at least one in_key", who);
        return NULL;
    }
    crl_td_key **k = g_new0(crl_td_key *, c);
    for (size_t i = 0; i < c; i++)
        if (!(k[i] = crl_td_key_new(keys[i], err))) {
            crl_error_prefix(err, "module '%s': ", who);
            crl__keys_free(k, c);
            return NULL;
        }
    *n = c;
    return k;
}

void crl__keys_free(crl_td_key **k, size_t n)
{
    for (size_t i = 0; k && i < n; i++)
        crl_td_key_free(k[i]);
    g_free(k);
}

crl_tdmodule *crl_tdmodule_new(crl_mlp *net, const char *const *in_keys, const char *out_key, crl_error *err)
{
    if (!net) {
        crl_error_set(err, CRL_E_INVALID, "TensorDict module: no network given");
        return NULL;
    }
    crl_tdmodule *mod = g_new0(crl_tdmodule, 1);
    mod->in = crl__keys_new(net->name, in_keys, &mod->n_in, err);
    mod->out = mod->in ? crl_td_key_new(out_key ? out_key : "", err) : NULL;
    if (!mod->out) {
        if (mod->in)
            crl_error_prefix(err, "module '%s': out_key: ", net->name);
        crl__keys_free(mod->in, mod->n_in);
        g_free(mod);
        return NULL;
    }
    mod->net = crl_mlp_ref(net);
    mod->in_cols = g_new0(int64_t, mod->n_in);
    return mod;
}

void crl_tdmodule_free(crl_tdmodule *mod)
{
    if (!mod)
        return;
    crl__keys_free(mod->in, mod->n_in);
    crl_td_key_free(mod->out);
    crl_tensor_unref(mod->x);
    crl_tensor_unref(mod->y);
    crl_tensor_unref(mod->gout);
    g_free(mod->in_cols);
    crl_mlp_unref(mod->net);
    g_free(mod);
}

crl_mlp *crl_tdmodule_net_get(crl_tdmodule *mod) { return mod->net; }
size_t crl_tdmodule_num_in_keys(const crl_tdmodule *mod) { return mod ? mod->n_in : 0; }
const char *crl_tdmodule_in_key(const crl_tdmodule *mod, size_t i)
{
    return mod && i < mod->n_in ? crl_td_key_str(mod->in[i]) : NULL;
}
const char *crl_tdmodule_out_key(const crl_tdmodule *mod) { return mod ? crl_td_key_str(mod->out) : NULL; }

/* Concatenate the in_keys into mod->x.  Each key's width is its last dim;
 * the widths must add up to the network's input. */
static int gather(crl_tdmodule *mod, const crl_td *td, crl_error *err)
{
    const char *who = mod->net->name;
    int64_t in = crl_mlp_in_features(mod->net), total = 0, rows = crl__td_rows(td);
    int bn = crl_td_batch_ndim(td);
    for (size_t i = 0; i < mod->n_in; i++) {
        const crl_tensor *t = crl_td_get_k(td, mod->in[i]);
        if (!t)
            return missing_key(who, td, crl_td_key_str(mod->in[i]), err);
        if (mod->net->in_ndim > 1) {
            /* an encoder's images: [batch..., C, H, W] as the network's in_shape, one key */
            int nd = mod->net->in_ndim;
            bool ok = mod->n_in == 1 && crl_tensor_ndim(t) == bn + nd &&
                      !memcmp(crl_tensor_shape(t) + bn, mod->net->in_shape, (size_t)nd * sizeof(int64_t));
            if (!ok) {
                char b[CRL__SHAPE_BUF], c[CRL__SHAPE_BUF];
                return crl_error_set(err, CRL_E_SHAPE, "module '%s': key '%s' has shape %s but the network reads one "
                                     "key of the batch dims (%d) then %s", who, crl_td_key_str(mod->in[i]),
                                     crl__shape_fmt(b, crl_tensor_ndim(t), crl_tensor_shape(t)), bn,
                                     crl__shape_fmt(c, nd, mod->net->in_shape));
            }
            mod->in_cols[i] = in;
            total = in;
            continue;
        }
        mod->in_cols[i] = crl_tensor_ndim(t) == bn + 1 ? crl_tensor_shape(t)[bn] : -1;
        if (mod->n_in == 1 && mod->in_cols[i] != in)
            return check_key(who, td, mod->in[i], t, in, "the MLP expects", err);
        if (mod->in_cols[i] < 0) {
            char b[CRL__SHAPE_BUF], c[CRL__SHAPE_BUF];
            return crl_error_set(err, CRL_E_SHAPE, "module '%s': key '%s' has shape %s but in_keys are the batch dims "
                                 "%s then one feature dim", who, crl_td_key_str(mod->in[i]),
                                 crl__shape_fmt(b, crl_tensor_ndim(t), crl_tensor_shape(t)),
                                 crl__shape_fmt(c, bn, crl_td_batch_shape(td)));
        }
        total += mod->in_cols[i];
    }
    if (total != in) {
        GString *s = g_string_new(NULL);
        for (size_t i = 0; i < mod->n_in; i++)
            g_string_append_printf(s, "%s'%s' %" PRId64, i ? " + " : "", crl_td_key_str(mod->in[i]), mod->in_cols[i]);
        int rc = crl_error_set(err, CRL_E_SHAPE, "module '%s': in_keys give %s = %" PRId64
                               " features but the MLP expects %" PRId64 " input features", who, s->str, total, in);
        g_string_free(s, TRUE);
        return rc;
    }
    if (rows < 1)
        return crl_error_set(err, CRL_E_SHAPE, "module '%s': the TensorDict has an empty batch", who);
    int rc = crl__rows_buffer(&mod->x, rows, in, err);
    if (rc)
        return rc;
    for (size_t i = 0, col = 0; i < mod->n_in; col += (size_t)mod->in_cols[i], i++)
        if ((rc = crl__td_read_rows(who, td, mod->in[i], mod->in_cols[i], crl_tensor_data(mod->x), in, (int64_t)col,
                                    err)))
            return rc;
    return CRL_OK;
}

crl_tensor *crl__tdmodule_run(crl_tdmodule *mod, const crl_td *td, bool cache, crl_error *err)
{
    if (gather(mod, td, err))
        return NULL;
    if (cache)
        return crl_mlp_forward(mod->net, mod->x, err);
    if (crl__rows_buffer(&mod->y, crl__td_rows(td), crl_mlp_out_features(mod->net), err) ||
        crl_mlp_infer(mod->net, mod->x, mod->y, err))
        return NULL;
    return mod->y;
}

static int run_and_write(crl_tdmodule *mod, crl_td *td, bool cache, crl_error *err)
{
    crl_error e;
    crl_error_clear(&e);
    crl_tensor *y = crl__tdmodule_run(mod, td, cache, &e);
    if (!y)
        return crl_error_pass(err, &e, CRL_E_INVALID);
    return crl__td_write_rows(mod->net->name, td, mod->out, crl_tensor_data(y), crl_mlp_out_features(mod->net), err);
}

int crl_tdmodule_forward(crl_tdmodule *mod, crl_td *td, crl_error *err)
{
    return run_and_write(mod, td, true, err);
}

int crl_tdmodule_infer(crl_tdmodule *mod, crl_td *td, crl_error *err)
{
    return run_and_write(mod, td, false, err);
}

int crl_tdmodule_backward(crl_tdmodule *mod, const crl_tensor *grad_out, crl_td *grads_in, crl_error *err)
{
    const char *who = mod->net->name;
    int64_t out = crl_mlp_out_features(mod->net), rows = mod->net->batch;
    if (!grad_out || crl_tensor_numel(grad_out) != rows * out || crl_tensor_ndim(grad_out) < 1 ||
        crl_tensor_shape(grad_out)[crl_tensor_ndim(grad_out) - 1] != out) {
        char b[CRL__SHAPE_BUF];
        return crl_error_set(err, CRL_E_SHAPE, "module '%s': grad_out has shape %s but the last forward wrote %" PRId64
                             " rows of %" PRId64 " features to '%s'", who,
                             grad_out ? crl__shape_fmt(b, crl_tensor_ndim(grad_out), crl_tensor_shape(grad_out)) : "NULL",
                             rows, out, crl_td_key_str(mod->out));
    }
    int rc = crl__rows_buffer(&mod->gout, rows, out, err);
    if (rc)
        return rc;
    float *g = crl_tensor_data(mod->gout);
    if (crl_tensor_dtype(grad_out) == CRL_F32 && crl_tensor_is_contiguous(grad_out))
        memcpy(g, crl_tensor_data(grad_out), (size_t)(rows * out) * sizeof *g);
    else
        for (int64_t i = 0; i < rows * out; i++)
            g[i] = (float)crl_tensor_flat_get(grad_out, i);
    crl_tensor *gin = NULL;
    if ((rc = crl_mlp_backward(mod->net, mod->gout, grads_in ? &gin : NULL, err)))
        return rc;
    if (!grads_in)
        return CRL_OK;
    /* Split dLoss/dx back into the in_keys, shaped as grads_in's batch. */
    if (crl__td_rows(grads_in) != rows)
        return crl_error_set(err, CRL_E_SHAPE, "module '%s': grads_in has %" PRId64 " rows but the forward had %" PRId64,
                             who, crl__td_rows(grads_in), rows);
    int64_t in = crl_mlp_in_features(mod->net);
    float *part = g_new(float, (size_t)rows * (size_t)in);
    rc = CRL_OK;
    const float *gi = crl_tensor_data(gin);
    for (size_t i = 0, col = 0; !rc && i < mod->n_in; col += (size_t)mod->in_cols[i], i++) {
        int64_t c = mod->in_cols[i];
        for (int64_t r = 0; r < rows; r++)
            memcpy(part + r * c, gi + r * in + (int64_t)col, (size_t)c * sizeof *part);
        rc = crl__td_write_rows(who, grads_in, mod->in[i], part, c, err);
    }
    g_free(part);
    return rc;
}
