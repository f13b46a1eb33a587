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

/* The encoder's stages from the layers given; CRL_E_INVALID naming the first that does not fit. */
static int plan_stages(crl_mlp *m, const crl_conv_layer *layers, int n, size_t *off, int64_t *col_max,
                       crl_error *err)
{
    int64_t c = m->in_shape[0], h = m->in_shape[1], w = m->in_shape[2];
    int seq = 0;
    m->enc_max = c * h * w;
    for (int i = 0; i < n; i++) {
        const crl_conv_layer *L = &layers[i];
        crl__stage *s = &m->stages[i];
        bool conv = L->kind == CRL_CONV2D;
        const char *what = conv ? "conv" : "pool";
        if (L->kind != CRL_CONV2D && L->kind != CRL_MAXPOOL2D)
            return crl_error_set(err, CRL_E_INVALID, "module '%s': layer %d: kind %d is neither CRL_CONV2D nor "
                                 "CRL_MAXPOOL2D", m->name, i, (int)L->kind);
        if (L->kernel_size < 1 || L->kernel_size > 1024 || L->stride < 1 || L->stride > 1024 || L->padding < 0 ||
            L->padding > 1024 || (conv && (L->out_channels < 1 || L->out_channels > (1 << 16))) ||
            (!conv && 2 * L->padding > L->kernel_size))
            return crl_error_set(err, CRL_E_INVALID, "module '%s': %s layer %d: kernel_size %" PRId64 ", stride %"
                                 PRId64 ", padding %" PRId64 "%s must be in 1..1024, 1..1024, 0..1024%s", m->name, what,
                                 i + 1, L->kernel_size, L->stride, L->padding, conv ? " and out_channels" : "",
                                 conv ? " and 1..65536" : " with padding at most half the kernel (as PyTorch)");
        int64_t ho = (h + 2 * L->padding - L->kernel_size) / L->stride + 1;
        int64_t wo = (w + 2 * L->padding - L->kernel_size) / L->stride + 1;
        if (h + 2 * L->padding < L->kernel_size || w + 2 * L->padding < L->kernel_size || ho < 1 || wo < 1)
            return crl_error_set(err, CRL_E_INVALID, "module '%s': %s layer %d: a %" PRId64 "x%" PRId64 " kernel "
                                 "(padding %" PRId64 ") does not fit its %" PRId64 "x%" PRId64 " input: fewer or "
                                 "smaller layers, or a larger image", m->name, what, i + 1, L->kernel_size,
                                 L->kernel_size, L->padding, h, w);
        *s = (crl__stage){ .kind = conv ? CRL__STAGE_CONV : CRL__STAGE_POOL, .cin = c, .hin = h, .win = w,
                           .cout = conv ? L->out_channels : c, .hout = ho, .wout = wo, .k = L->kernel_size,
                           .stride = L->stride, .pad = L->padding, .seq = seq };
        if (crl__stage_out_size(s) > ((int64_t)1 << 28) || crl__stage_col_size(s) > ((int64_t)1 << 28))
            return crl_error_set(err, CRL_E_INVALID, "module '%s': %s layer %d: %" PRId64 "x%" PRId64 "x%" PRId64
                                 " outputs are too many", m->name, what, i + 1, s->cout, ho, wo);
        seq += conv ? 2 : 1;
        if (conv) {
            s->w_off = *off;
            *off += (size_t)(s->cout * c * s->k * s->k);
            s->b_off = *off;
            *off += (size_t)s->cout;
        }
        if (crl__stage_col_size(s) > *col_max)
            *col_max = crl__stage_col_size(s);
        if (crl__stage_out_size(s) > m->enc_max)
            m->enc_max = crl__stage_out_size(s);
        c = s->cout;
        h = ho;
        w = wo;
    }
    return CRL_OK;
}

crl_mlp *crl_convnet_new(const char *name, int in_ndim, const int64_t *in_shape, const crl_conv_layer *layers,
                         int n_layers, crl_activation conv_act, const int64_t *cells, int n_cells, crl_activation act,
                         int64_t out_features, bool dueling, crl_rng *rng, crl_error *err)
{
    if (!name || !*name)
        name = "mlp";
    if (!rng) {
        crl_error_set(err, CRL_E_INVALID, "module '%s': no random stream given for the initial parameters", name);
        return NULL;
    }
    if (!in_shape || n_layers < 0 || n_layers > 64 || (n_layers > 0 && !layers) ||
        in_ndim != (n_layers > 0 ? 3 : 1)) {
        crl_error_set(err, CRL_E_INVALID, "module '%s': %d encoder layers (0..64) need an input shape of %s (%d dims "
                      "given)", name, n_layers, n_layers > 0 ? "3 dims [C, H, W]" : "1 dim [features]", in_ndim);
        return NULL;
    }
    int64_t in_total = 1;
    for (int d = 0; d < in_ndim; d++) {
        if (in_shape[d] < 1 || in_shape[d] > (1 << 24)) {
            crl_error_set(err, CRL_E_INVALID, "module '%s': input dim %d is %" PRId64 " (1..16777216)", name, d,
                          in_shape[d]);
            return NULL;
        }
        in_total *= in_shape[d];
    }
    /* out_features 0: the conv stack alone (a recurrent network's encoder), no Linear layer */
    bool enc_only = out_features == 0 && n_cells == 0 && n_layers > 0 && !dueling;
    if (in_total > ((int64_t)1 << 28) || (!enc_only && out_features < 1) || out_features > (1 << 24) || n_cells < 0 ||
        (n_cells > 0 && !cells) || n_cells > 1000) {
        crl_error_set(err, CRL_E_INVALID,
                      "module '%s': in_features (%" PRId64 ") and out_features (%" PRId64
                      ") must be >= 1 and there may be 0..1000 hidden layers (%d given)",
                      name, in_total, out_features, n_cells);
        return NULL;
    }
    for (int i = 0; i < n_cells; i++)
        if (cells[i] < 1 || cells[i] > (1 << 24)) {
            crl_error_set(err, CRL_E_INVALID, "module '%s': num_cells[%d] = %" PRId64 " must be in [1, 16777216]",
                          name, i, cells[i]);
            return NULL;
        }
    if (!crl_activation_name(act) || !crl_activation_name(conv_act)) {
        crl_error_set(err, CRL_E_INVALID, "module '%s': unknown activation %d", name,
                      (int)(crl_activation_name(act) ? conv_act : act));
        return NULL;
    }
    crl_mlp *m = g_new0(crl_mlp, 1);
    m->refs = 1;
    m->name = g_strdup(name);
    m->in_ndim = in_ndim;
    memcpy(m->in_shape, in_shape, (size_t)in_ndim * sizeof *in_shape);
    m->in_features = in_total;
    m->out_features = out_features;   /* enc_only: set from the last stage below */
    m->dueling = dueling;
    m->conv_act = conv_act;
    m->n_stages = n_layers;
    m->stages = g_new0(crl__stage, n_layers ? n_layers : 1);
    m->spec = g_memdup2(layers ? layers : (const crl_conv_layer[]){ { 0 } },
                        sizeof *layers * (size_t)(n_layers ? n_layers : 1));
    m->sacts = g_new0(crl_tensor *, n_layers + 1);
    m->pidx = g_new0(int32_t *, n_layers ? n_layers : 1);
    m->n_layers = enc_only ? 0 : n_cells + 1;
    m->layers = g_new0(crl__layer, m->n_layers ? m->n_layers : 1);
    m->act = act;
    m->activate_last = false;
    m->acts = g_new0(crl_tensor *, m->n_layers + 1);
    m->outs = g_new0(float *, m->n_layers);
    size_t off = 0;
    int64_t col_max = 0;
    if (plan_stages(m, layers, n_layers, &off, &col_max, err)) {
        crl_mlp_unref(m);
        return NULL;
    }
    int64_t head_in = n_layers ? crl__stage_out_size(&m->stages[n_layers - 1]) : in_total;
    m->max_width = head_in;
    if (enc_only)
        m->out_features = head_in;
    for (int l = 0; l < m->n_layers; l++) {
        crl__layer *L = &m->layers[l];
        L->in = l ? cells[l - 1] : head_in;
        L->out = l < n_cells ? cells[l] : out_features + (dueling ? 1 : 0);
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
    if (m->grads && col_max > 0)
        m->col = crl_tensor_new(CRL_F32, 1, &col_max, err);
    if (!m->grads || (col_max > 0 && !m->col) || crl_mlp_init(m, CRL_INIT_DEFAULT, 1.0, 1.0, rng, err)) {
        if (err)
            crl_error_prefix(err, "module '%s': ", name);
        crl_mlp_unref(m);
        return NULL;
    }
    return m;
}

crl_mlp *crl_mlp_new(const char *name, int64_t in_features, int64_t out_features, const int64_t *cells,
                     int n_cells, crl_activation act, bool activate_last, crl_rng *rng, crl_error *err)
{
    if (!name || !*name)
        name = "mlp";
    if (in_features < 1 || out_features < 1) {
        crl_error_set(err, CRL_E_INVALID,
                      "module '%s': in_features (%" PRId64 ") and out_features (%" PRId64
                      ") must be >= 1 and there may be 0..1000 hidden layers (%d given)",
                      name, in_features, out_features, n_cells);
        return NULL;
    }
    crl_mlp *m = crl_convnet_new(name, 1, &in_features, NULL, 0, act, cells, n_cells, act, out_features, false, rng,
                                 err);
    if (m && activate_last) {
        /* crl_convnet_new drew no differently: activate_last changes the forward only */
        m->activate_last = true;
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
    for (int l = 0; m->acts && l <= m->n_layers; l++)
        crl_tensor_unref(m->acts[l]);
    for (int i = 0; m->sacts && i <= m->n_stages; i++)
        crl_tensor_unref(m->sacts[i]);
    for (int i = 0; m->pidx && i < m->n_stages; i++)
        g_free(m->pidx[i]);
    for (int i = 0; i < 2; i++) {
        crl_tensor_unref(m->eg[i]);
        crl_tensor_unref(m->ie[i]);
    }
    crl_tensor_unref(m->col);
    crl_tensor_unref(m->dq);
    g_free(m->sacts);
    g_free(m->pidx);
    g_free(m->stages);
    g_free(m->spec);
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
int64_t crl_mlp_in_features(const crl_mlp *m) { return m->in_features; }
int64_t crl_mlp_out_features(const crl_mlp *m) { return m->out_features; }
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

/* The encoder's stage i from x into y; arg receives a pool's argmax (NULL: not kept). */
static void run_stage(crl_mlp *m, int i, int64_t B, const float *x, float *y, int32_t *arg)
{
    const crl__stage *s = &m->stages[i];
    if (s->kind == CRL__STAGE_POOL) {
        crl__pool_forward(s, x, B, y, arg);
        return;
    }
    const float *P = crl_tensor_data(m->params);
    crl__conv_forward(s, x, B, P + s->w_off, P + s->b_off, y, crl_tensor_data(m->col));
    crl__act_forward(m->conv_act, y, (size_t)(B * crl__stage_out_size(s)));
}

/* Pixel values 0..255 to [0, 1] as ToTensorImage computes them ((float)v / 255.0f), so that a network fed
 * uint8 frames sees the very floats ToTensorImage would have given it. */
static void normalize_rows(float *x, int64_t n)
{
    for (int64_t i = 0; i < n; i++)
        x[i] = x[i] / 255.0f;
}

int crl_mlp_set_normalize_images(crl_mlp *m, bool on, crl_error *err)
{
    if (!m)
        return crl_error_set(err, CRL_E_INVALID, "crl_mlp_set_normalize_images: the network is NULL");
    if (on && !m->n_stages)
        return crl_error_set(err, CRL_E_INVALID, "module '%s': normalize_images needs a conv encoder (images "
                             "[C, H, W]); this network is an MLP over %" PRId64 " features", m->name,
                             m->in_features);
    m->normalize_images = on;
    return CRL_OK;
}

bool crl_mlp_normalize_images(const crl_mlp *m) { return m && m->normalize_images; }

/* The forward's cache for B rows (recreated only when B changes). */
static int cache_for(crl_mlp *m, int64_t B, crl_error *err)
{
    if (B == m->batch)
        return CRL_OK;
    m->batch = 0;
    int rc = CRL_OK;
    for (int i = 0; !rc && i <= m->n_stages && m->n_stages; i++)
        rc = crl__rows_buffer(&m->sacts[i], B, i ? crl__stage_out_size(&m->stages[i - 1]) : m->in_features, err);
    for (int i = 0; !rc && i < m->n_stages; i++)
        if (m->stages[i].kind == CRL__STAGE_POOL)
            m->pidx[i] = g_renew(int32_t, m->pidx[i], (size_t)(B * crl__stage_out_size(&m->stages[i])));
    if (!rc && m->n_stages) {
        /* the head reads the encoder's last output in place */
        crl_tensor_unref(m->acts[0]);
        m->acts[0] = crl_tensor_ref(m->sacts[m->n_stages]);
    }
    for (int l = m->n_stages ? 1 : 0; !rc && l <= m->n_layers; l++)
        rc = crl__rows_buffer(&m->acts[l], B, l ? m->layers[l - 1].out : m->layers[0].in, err);
    if (!rc && m->dueling)
        rc = crl__rows_buffer(&m->dq, B, m->out_features, err);
    if (!rc)
        m->batch = B;
    return rc;
}

crl_tensor *crl_mlp_forward(crl_mlp *m, const crl_tensor *in, crl_error *err)
{
    if (crl__check_rows(m->name, "the input", in, crl_mlp_in_features(m), err))
        return NULL;
    int64_t B = crl_tensor_shape(in)[0];
    m->have_forward = false;
    if (cache_for(m, B, err))
        return NULL;
    /* A copy, so that the caller may reuse its input before backward. */
    float *x0 = crl_tensor_data(m->n_stages ? m->sacts[0] : m->acts[0]);
    crl__rows_in(x0, in);
    if (m->normalize_images)
        normalize_rows(x0, B * m->in_features);
    for (int i = 0; i < m->n_stages; i++)
        run_stage(m, i, B, crl_tensor_data(m->sacts[i]), crl_tensor_data(m->sacts[i + 1]), m->pidx[i]);
    for (int l = 0; l < m->n_layers; l++)
        m->outs[l] = crl_tensor_data(m->acts[l + 1]);
    run_layers(m, B, crl_tensor_data(m->acts[0]), m->outs);
    m->have_forward = true;
    if (m->dueling) {
        crl__dueling_forward(crl_tensor_data(m->acts[m->n_layers]), B, m->out_features, crl_tensor_data(m->dq));
        return m->dq;
    }
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
        m->infer_batch = 0;
        for (int i = 0; i < 2; i++)
            if ((rc = crl__rows_buffer(&m->ib[i], B, m->max_width, err)) ||
                (m->n_stages && (rc = crl__rows_buffer(&m->ie[i], B, m->enc_max, err))))
                return rc;
        m->infer_batch = B;
    }
    float *ib0 = crl_tensor_data(m->ib[0]);
    const float *x = crl_tensor_data(in);
    if (!crl_tensor_is_contiguous(in) || m->normalize_images) {
        float *to = m->n_stages ? crl_tensor_data(m->ie[1]) : ib0;
        crl__rows_in(to, in);
        if (m->normalize_images)
            normalize_rows(to, B * m->in_features);
        x = to;
    }
    for (int i = 0; i < m->n_stages; i++) {
        /* stage i writes where its input is not */
        float *y = crl_tensor_data(m->ie[x == crl_tensor_data(m->ie[0]) ? 1 : 0]);
        run_stage(m, i, B, x, y, NULL);
        x = y;
    }
    for (int l = 0; l < m->n_layers; l++)
        /* Layer l must not write where its input is: alternate, starting
         * with the buffer the input is not in. */
        m->outs[l] = crl_tensor_data(m->ib[(l + (x == ib0)) & 1]);
    if (!m->n_layers) {
        /* the conv stack alone: its last output is the result */
        crl__rows_out(out, x);
        return CRL_OK;
    }
    bool direct = crl_tensor_is_contiguous(out) && !m->dueling;
    if (direct)
        m->outs[m->n_layers - 1] = crl_tensor_data(out);
    run_layers(m, B, x, m->outs);
    const float *y = m->outs[m->n_layers - 1];
    if (m->dueling) {
        /* the other ping-pong buffer holds nothing needed any more */
        float *q = crl_tensor_is_contiguous(out) ? crl_tensor_data(out)
                                                 : crl_tensor_data(m->ib[y == ib0 ? 1 : 0]);
        crl__dueling_forward(y, B, m->out_features, q);
        y = q;
        direct = q == crl_tensor_data(out);
    }
    if (!direct)
        crl__rows_out(out, y);
    return CRL_OK;
}

/* Backward through the encoder from cur (the gradient of its output), into gin when wanted. */
static int encoder_backward(crl_mlp *m, int64_t B, float *cur, bool want_in)
{
    const float *P = crl_tensor_data(m->params);
    float *G = crl_tensor_data(m->grads);
    for (int i = m->n_stages - 1; i >= 0; i--) {
        const crl__stage *s = &m->stages[i];
        float *dx = i > 0 ? crl_tensor_data(m->eg[cur == crl_tensor_data(m->eg[0]) ? 1 : 0])
                  : want_in ? crl_tensor_data(m->gin) : NULL;
        if (s->kind == CRL__STAGE_POOL) {
            if (dx)
                crl__pool_backward(s, cur, B, m->pidx[i], dx);
        } else {
            crl__act_backward(m->conv_act, crl_tensor_data(m->sacts[i + 1]), cur,
                              (size_t)(B * crl__stage_out_size(s)));
            crl__conv_backward(s, crl_tensor_data(m->sacts[i]), cur, B, P + s->w_off, G + s->w_off, G + s->b_off, dx,
                               crl_tensor_data(m->col));
        }
        cur = dx;
        if (!cur)
            break;
    }
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
        if ((rc = crl__rows_buffer(&m->g[i], B, m->max_width, err)) ||
            (m->n_stages && (rc = crl__rows_buffer(&m->eg[i], B, m->enc_max, err))))
            return rc;
    if (grad_in && (rc = crl__rows_buffer(&m->gin, B, crl_mlp_in_features(m), err)))
        return rc;
    int last = m->n_layers - 1;
    float *cur = crl_tensor_data(m->g[0]);
    if (m->dueling) {
        float *g1 = crl_tensor_data(m->g[1]);
        crl__rows_in(g1, grad_out);
        crl__dueling_backward(g1, B, m->out_features, cur);
    } else {
        crl__rows_in(cur, grad_out);
    }
    const float *P = crl_tensor_data(m->params);
    float *G = crl_tensor_data(m->grads);
    for (int l = last; l >= 0; l--) {
        const crl__layer *L = &m->layers[l];
        if (crl__layer_activated(m, l))
            crl__act_backward(m->act, crl_tensor_data(m->acts[l + 1]), cur, (size_t)(B * L->out));
        float *dx = l > 0 ? crl_tensor_data(m->g[(last - l + 1) & 1])
                  : m->n_stages ? crl_tensor_data(m->eg[0])
                  : grad_in ? crl_tensor_data(m->gin) : NULL;
        crl__linear_backward(crl_tensor_data(m->acts[l]), cur, B, P + L->w_off, L->in, L->out, G + L->w_off,
                             G + L->b_off, dx);
        cur = dx;
    }
    if (m->n_stages)
        encoder_backward(m, B, cur, grad_in != NULL);
    if (grad_in && m->normalize_images) {
        /* the gradient with respect to the pixel values the caller gave, not to their scaled copy */
        float *g = crl_tensor_data(m->gin);
        for (int64_t i = 0; i < B * m->in_features; i++)
            g[i] /= 255.0f;
    }
    if (grad_in)
        *grad_in = m->gin;
    return CRL_OK;
}
