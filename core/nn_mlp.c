/* The MLP (TorchRL's MLP; a Linear is one without hidden layers): construction, forward with a reused cache, backward. */
#include "nn-private.h"

static const struct {
    const char *name, *alias;
    crl_activation act;
} act_names[] = {
    { "tanh", "Tanh", CRL_ACT_TANH },
    { "relu", "ReLU", CRL_ACT_RELU },
    { "elu", "ELU", CRL_ACT_ELU },
    { "leaky_relu", "LeakyReLU", CRL_ACT_LEAKY_RELU },
    { "identity", "Identity", CRL_ACT_IDENTITY },
};

int crl_activation_from_name(const char *name, crl_activation *out, crl_error *err)
{
    for (size_t i = 0; name && i < G_N_ELEMENTS(act_names); i++)
        if (!strcmp(name, act_names[i].name) || !strcmp(name, act_names[i].alias)) {
            *out = act_names[i].act;
            return CRL_OK;
        }
    return crl_error_set(err, CRL_E_INVALID,
                         "unknown activation '%s': use tanh, relu, elu, leaky_relu or identity",
                         name ? name : "(null)");
}

const char *crl_activation_name(crl_activation a)
{
    for (size_t i = 0; i < G_N_ELEMENTS(act_names); i++)
        if (act_names[i].act == a)
            return act_names[i].name;
    return NULL;
}

int crl__rows_buffer(crl_tensor **t, int64_t rows, int64_t cols, crl_error *err)
{
    if (*t && crl_tensor_shape(*t)[0] == rows && crl_tensor_shape(*t)[1] == cols)
        return CRL_OK;
    crl_error e;
    crl_error_clear(&e);
    crl_tensor *n = crl_tensor_new(CRL_F32, 2, (int64_t[]){ rows, cols }, &e);
    if (!n)
        return crl_error_pass(err, &e, CRL_E_NOMEM);
    crl_tensor_unref(*t);
    *t = n;
    return CRL_OK;
}

void crl__rows_in(float *dst, const crl_tensor *src)
{
    const int64_t *s = crl_tensor_shape(src), *st = crl_tensor_strides(src);
    const float *p = crl_tensor_data(src);
    if (crl_tensor_is_contiguous(src)) {
        memcpy(dst, p, crl_tensor_nbytes(src));
        return;
    }
    for (int64_t r = 0; r < s[0]; r++)
        for (int64_t c = 0; c < s[1]; c++)
            *dst++ = p[r * st[0] + c * st[1]];
}

void crl__rows_out(crl_tensor *dst, const float *src)
{
    const int64_t *s = crl_tensor_shape(dst), *st = crl_tensor_strides(dst);
    float *p = crl_tensor_data(dst);
    if (crl_tensor_is_contiguous(dst)) {
        memcpy(p, src, crl_tensor_nbytes(dst));
        return;
    }
    for (int64_t r = 0; r < s[0]; r++)
        for (int64_t c = 0; c < s[1]; c++)
            p[r * st[0] + c * st[1]] = *src++;
}

int crl__check_rows(const char *name, const char *what, const crl_tensor *t, int64_t features, crl_error *err)
{
    char b[CRL__SHAPE_BUF];
    if (!t)
        return crl_error_set(err, CRL_E_INVALID, "module '%s': %s is NULL", name, what);
    if (crl_tensor_dtype(t) != CRL_F32)
        return crl_error_set(err, CRL_E_DTYPE, "module '%s': %s has dtype %s but networks take float32 (cast it)",
                             name, what, crl_dtype_name(crl_tensor_dtype(t)));
    const int64_t *s = crl_tensor_shape(t);
    if (crl_tensor_ndim(t) != 2 || s[0] < 1 || s[1] != features)
        return crl_error_set(err, CRL_E_SHAPE, "module '%s': %s has shape %s but the MLP expects [B, %" PRId64 "]",
                             name, what, crl__shape_fmt(b, crl_tensor_ndim(t), s), features);
    return CRL_OK;
}

crl_mlp *crl_mlp_new(const char *name, int64_t in_features, int64_t out_features, const int64_t *cells,
                     int n_cells, crl_activation act, bool activate_last, crl_rng *rng, crl_error *err)
{
    if (!name || !*name)
        name = "mlp";
    if (!rng) {
        crl_error_set(err, CRL_E_INVALID, "module '%s': no random stream given for the initial parameters", name);
        return NULL;
    }
    if (in_features < 1 || out_features < 1 || n_cells < 0 || (n_cells > 0 && !cells) || n_cells > 1000) {
        crl_error_set(err, CRL_E_INVALID,
                      "module '%s': in_features (%" PRId64 ") and out_features (%" PRId64
                      ") must be >= 1 and there may be 0..1000 hidden layers (%d given)",
                      name, in_features, out_features, n_cells);
        return NULL;
    }
    for (int i = 0; i < n_cells; i++)
        if (cells[i] < 1 || cells[i] > (1 << 24)) {
            crl_error_set(err, CRL_E_INVALID, "module '%s': num_cells[%d] = %" PRId64 " must be in [1, 16777216]",
                          name, i, cells[i]);
            return NULL;
        }
    if (!crl_activation_name(act)) {
        crl_error_set(err, CRL_E_INVALID, "module '%s': unknown activation %d", name, (int)act);
        return NULL;
    }
    crl_mlp *m = g_new0(crl_mlp, 1);
    m->refs = 1;
    m->name = g_strdup(name);
    m->n_layers = n_cells + 1;
    m->in_ndim = 1;
    m->in_shape[0] = in_features;
    m->layers = g_new0(crl__layer, m->n_layers);
    m->act = act;
    m->activate_last = activate_last;
    m->acts = g_new0(crl_tensor *, m->n_layers + 1);
    m->outs = g_new0(float *, m->n_layers);
    size_t off = 0;
    m->max_width = in_features;
    for (int l = 0; l < m->n_layers; l++) {
        crl__layer *L = &m->layers[l];
        L->in = l ? cells[l - 1] : in_features;
        L->out = l < n_cells ? cells[l] : out_features;
        L->w_off = off;
        off += (size_t)(L->in * L->out);
        L->b_off = off;
        off += (size_t)L->out;
        if (L->out > m->max_width)
            m->max_width = L->out;
    }
    int64_t P = (int64_t)off;
    m->params = crl_tensor_new(CRL_F32, 1, &P, err);
    m->grads = m->params ? crl_tensor_new(CRL_F32, 1, &P, err) : NULL;
    if (!m->grads || crl_mlp_init(m, CRL_INIT_DEFAULT, 1.0, 1.0, rng, err)) {
        if (err)
            crl_error_prefix(err, "module '%s': ", name);
        crl_mlp_unref(m);
        return NULL;
    }
    return m;
}

crl_mlp *crl_mlp_ref(crl_mlp *m)
{
    if (m)
        m->refs++;
    return m;
}

void crl_mlp_unref(crl_mlp *m)
{
    if (!m || --m->refs > 0)
        return;
    for (int l = 0; l <= m->n_layers; l++)
        crl_tensor_unref(m->acts[l]);
    crl_tensor_unref(m->g[0]);
    crl_tensor_unref(m->g[1]);
    crl_tensor_unref(m->gin);
    crl_tensor_unref(m->ib[0]);
    crl_tensor_unref(m->ib[1]);
    crl_tensor_unref(m->params);
    crl_tensor_unref(m->grads);
    g_free(m->acts);
    g_free(m->outs);
    g_free(m->layers);
    g_free(m->name);
    g_free(m);
}

const char *crl_mlp_name(const crl_mlp *m) { return m->name; }
int64_t crl_mlp_in_features(const crl_mlp *m) { return m->layers[0].in; }
int64_t crl_mlp_out_features(const crl_mlp *m) { return m->layers[m->n_layers - 1].out; }
int crl_mlp_num_layers(const crl_mlp *m) { return m->n_layers; }

int crl_mlp_in_shape(const crl_mlp *m, int64_t *shape)
{
    memcpy(shape, m->in_shape, (size_t)m->in_ndim * sizeof *shape);
    return m->in_ndim;
}
crl_tensor *crl_mlp_params_get(crl_mlp *m) { return m->params; }
crl_tensor *crl_mlp_grads_get(crl_mlp *m) { return m->grads; }

void crl_mlp_zero_grad(crl_mlp *m)
{
    memset(crl_tensor_data(m->grads), 0, crl_tensor_nbytes(m->grads));
}

/* Runs every layer from bufs[0] (the input rows); layer l writes into
 * out_of(l).  Shared by forward (out_of = the cache) and infer (ping-pong). */
static void run_layers(crl_mlp *m, int64_t B, const float *x, float *const *outs)
{
    const float *P = crl_tensor_data(m->params);
    for (int l = 0; l < m->n_layers; l++) {
        const crl__layer *L = &m->layers[l];
        crl__linear_forward(x, B, P + L->w_off, P + L->b_off, L->in, L->out, outs[l]);
        if (crl__layer_activated(m, l))
            crl__act_forward(m->act, outs[l], (size_t)(B * L->out));
        x = outs[l];
    }
}

crl_tensor *crl_mlp_forward(crl_mlp *m, const crl_tensor *in, crl_error *err)
{
    if (crl__check_rows(m->name, "the input", in, crl_mlp_in_features(m), err))
        return NULL;
    int64_t B = crl_tensor_shape(in)[0];
    m->have_forward = false;
    if (B != m->batch) {
        for (int l = 0; l <= m->n_layers; l++)
            if (crl__rows_buffer(&m->acts[l], B, l ? m->layers[l - 1].out : m->layers[0].in, err))
                return NULL;
        m->batch = B;
    }
    /* A copy, so that the caller may reuse its input before backward. */
    crl__rows_in(crl_tensor_data(m->acts[0]), in);
    for (int l = 0; l < m->n_layers; l++)
        m->outs[l] = crl_tensor_data(m->acts[l + 1]);
    run_layers(m, B, crl_tensor_data(m->acts[0]), m->outs);
    m->have_forward = true;
    return m->acts[m->n_layers];
}

int crl_mlp_infer(crl_mlp *m, const crl_tensor *in, crl_tensor *out, crl_error *err)
{
    int rc;
    if ((rc = crl__check_rows(m->name, "the input", in, crl_mlp_in_features(m), err)) ||
        (rc = crl__check_rows(m->name, "the output", out, crl_mlp_out_features(m), err)))
        return rc;
    int64_t B = crl_tensor_shape(in)[0];
    if (crl_tensor_shape(out)[0] != B)
        return crl_error_set(err, CRL_E_SHAPE, "module '%s': the output has %" PRId64 " rows but the input %" PRId64,
                             m->name, crl_tensor_shape(out)[0], B);
    if (B != m->infer_batch) {
        for (int i = 0; i < 2; i++)
            if ((rc = crl__rows_buffer(&m->ib[i], B, m->max_width, err)))
                return rc;
        m->infer_batch = B;
    }
    float *ib0 = crl_tensor_data(m->ib[0]);
    const float *x = crl_tensor_data(in);
    if (!crl_tensor_is_contiguous(in)) {
        crl__rows_in(ib0, in);
        x = ib0;
    }
    for (int l = 0; l < m->n_layers; l++)
        /* Layer l must not write where its input is: alternate, starting
         * with the buffer the input is not in. */
        m->outs[l] = crl_tensor_data(m->ib[(l + (x == ib0)) & 1]);
    bool direct = crl_tensor_is_contiguous(out);
    if (direct)
        m->outs[m->n_layers - 1] = crl_tensor_data(out);
    run_layers(m, B, x, m->outs);
    if (!direct)
        crl__rows_out(out, m->outs[m->n_layers - 1]);
    return CRL_OK;
}

int crl_mlp_backward(crl_mlp *m, const crl_tensor *grad_out, crl_tensor **grad_in, crl_error *err)
{
    if (!m->have_forward)
        return crl_error_set(err, CRL_E_INVALID,
                             "module '%s': backward needs a forward first (crl_mlp_forward, not crl_mlp_infer)",
                             m->name);
    int rc = crl__check_rows(m->name, "grad_out", grad_out, crl_mlp_out_features(m), err);
    if (rc)
        return rc;
    int64_t B = m->batch;
    if (crl_tensor_shape(grad_out)[0] != B)
        return crl_error_set(err, CRL_E_SHAPE, "module '%s': grad_out has %" PRId64
                             " rows but the last forward had %" PRId64, m->name, crl_tensor_shape(grad_out)[0], B);
    for (int i = 0; i < 2; i++)
        if ((rc = crl__rows_buffer(&m->g[i], B, m->max_width, err)))
            return rc;
    if (grad_in && (rc = crl__rows_buffer(&m->gin, B, crl_mlp_in_features(m), err)))
        return rc;
    int last = m->n_layers - 1;
    float *cur = crl_tensor_data(m->g[0]);
    crl__rows_in(cur, grad_out);
    const float *P = crl_tensor_data(m->params);
    float *G = crl_tensor_data(m->grads);
    for (int l = last; l >= 0; l--) {
        const crl__layer *L = &m->layers[l];
        if (crl__layer_activated(m, l))
            crl__act_backward(m->act, crl_tensor_data(m->acts[l + 1]), cur, (size_t)(B * L->out));
        float *dx = l > 0 ? crl_tensor_data(m->g[(last - l + 1) & 1]) : grad_in ? crl_tensor_data(m->gin) : NULL;
        crl__linear_backward(crl_tensor_data(m->acts[l]), cur, B, P + L->w_off, L->in, L->out, G + L->w_off,
                             G + L->b_off, dx);
        cur = dx;
    }
    if (grad_in)
        *grad_in = m->gin;
    return CRL_OK;
}
