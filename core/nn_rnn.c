/* LSTM and GRU (PyTorch's nn.LSTM / nn.GRU, one layer, batch_first): forward over [B, T, F] with resets
 * where is_init is set, backpropagation through time, parameters.  The input projections of all steps are
 * one sgemm; each step is one more for the recurrent part, as cuDNN-less PyTorch does. */
#include "nn-private.h"
#include <crl/rnn.h>

#include <cblas.h>
#include <math.h>

/* One run's buffers: forward and infer each have their own, recreated only when B or T changes.  States
 * are stored time-major ([t][b][h]) so that each step's rows are contiguous. */
typedef struct rnn_ws {
    int64_t B, T;
    crl_tensor *x;      /* [B*T, F] copy of the input, (b, t) rows */
    crl_tensor *xg;     /* [B*T, GH] input projections + bias_ih */
    crl_tensor *gates;  /* [T*B, GH] after their nonlinearity (LSTM i f g o, GRU r z n) */
    crl_tensor *hn;     /* GRU: [T*B, H] W_hn h + b_hn */
    crl_tensor *hs, *cs;  /* [(T+1)*B, H]: slot 0 the initial state, slot t+1 step t's */
    crl_tensor *hp, *cp;  /* [T*B, H]: the state entering step t, after the reset */
    crl_tensor *tc;     /* LSTM: [T*B, H] tanh(c_t) */
    crl_tensor *hg;     /* [B, GH] recurrent pre-activations of one step */
    crl_tensor *reset;  /* [B*T, 1]: 1 where is_init */
    crl_tensor *y;      /* [B, T, H] */
    crl_tensor *hT, *cT;  /* [B, H] */
} rnn_ws;

struct crl_rnn {
    int refs;
    char *name;
    crl_rnn_kind kind;
    int64_t F, H, G;
    crl_tensor *params, *grads;
    rnn_ws fw, iw;
    bool have_forward;
    /* backward's buffers, [B*T, GH], [B, GH], [B, H] x 3, [B, T, F] */
    crl_tensor *dxg, *dhg, *dh, *dc, *dhp, *gin, *gh0, *gc0;
};

static const char *const kind_names[] = { "lstm", "gru" };

int crl_rnn_kind_from_name(const char *name, crl_rnn_kind *out, crl_error *err)
{
    int i = crl__name_index(kind_names, G_N_ELEMENTS(kind_names), name);
    if (i < 0)
        return crl_error_set(err, CRL_E_INVALID, "unknown recurrent network '%s': use lstm or gru",
                             name ? name : "(null)");
    *out = (crl_rnn_kind)i;
    return CRL_OK;
}

const char *crl_rnn_kind_name(crl_rnn_kind kind)
{
    return (unsigned)kind < G_N_ELEMENTS(kind_names) ? kind_names[kind] : NULL;
}

static void ws_clear(rnn_ws *w)
{
    crl_tensor **all[] = { &w->x, &w->xg, &w->gates, &w->hn, &w->hs, &w->cs, &w->hp, &w->cp, &w->tc,
                           &w->hg, &w->reset, &w->y, &w->hT, &w->cT };
    for (size_t i = 0; i < G_N_ELEMENTS(all); i++) {
        crl_tensor_unref(*all[i]);
        *all[i] = NULL;
    }
    w->B = w->T = 0;
}

static int buf3(crl_tensor **t, int64_t a, int64_t b, int64_t c, crl_error *err)
{
    if (*t && crl_tensor_shape(*t)[0] == a && crl_tensor_shape(*t)[1] == b && crl_tensor_shape(*t)[2] == c)
        return CRL_OK;
    crl_error e;
    crl_error_clear(&e);
    crl_tensor *n = crl_tensor_new(CRL_F32, 3, (int64_t[]){ a, b, c }, &e);
    if (!n)
        return crl_error_pass(err, &e, CRL_E_NOMEM);
    crl_tensor_unref(*t);
    *t = n;
    return CRL_OK;
}

static int ws_size(crl_rnn *r, rnn_ws *w, int64_t B, int64_t T, crl_error *err)
{
    if (w->B == B && w->T == T)
        return CRL_OK;
    int64_t GH = r->G * r->H, H = r->H;
    bool lstm = r->kind == CRL_RNN_LSTM;
    int rc;
    if ((rc = crl__rows_buffer(&w->x, B * T, r->F, err)) || (rc = crl__rows_buffer(&w->xg, B * T, GH, err)) ||
        (rc = crl__rows_buffer(&w->gates, T * B, GH, err)) ||
        (rc = crl__rows_buffer(&w->hs, (T + 1) * B, H, err)) || (rc = crl__rows_buffer(&w->hp, T * B, H, err)) ||
        (rc = crl__rows_buffer(&w->hg, B, GH, err)) || (rc = crl__rows_buffer(&w->reset, B * T, 1, err)) ||
        (rc = buf3(&w->y, B, T, H, err)) || (rc = crl__rows_buffer(&w->hT, B, H, err)) ||
        (rc = lstm ? crl__rows_buffer(&w->cs, (T + 1) * B, H, err) : 0) ||
        (rc = lstm ? crl__rows_buffer(&w->cp, T * B, H, err) : 0) ||
        (rc = lstm ? crl__rows_buffer(&w->tc, T * B, H, err) : 0) ||
        (rc = lstm ? crl__rows_buffer(&w->cT, B, H, err) : 0) ||
        (rc = lstm ? 0 : crl__rows_buffer(&w->hn, T * B, H, err))) {
        ws_clear(w);
        return rc;
    }
    w->B = B;
    w->T = T;
    return CRL_OK;
}

crl_rnn *crl_rnn_new(const char *name, crl_rnn_kind kind, int64_t input_size, int64_t hidden_size, crl_rng *rng,
                     crl_error *err)
{
    if (!name || !*name)
        name = "rnn";
    if (!crl_rnn_kind_name(kind)) {
        crl_error_set(err, CRL_E_INVALID, "module '%s': unknown recurrent network kind %d (use lstm or gru)", name,
                      (int)kind);
        return NULL;
    }
    if (!rng) {
        crl_error_set(err, CRL_E_INVALID, "module '%s': no random stream given for the initial parameters", name);
        return NULL;
    }
    if (input_size < 1 || input_size > (1 << 24) || hidden_size < 1 || hidden_size > (1 << 24)) {
        crl_error_set(err, CRL_E_INVALID, "module '%s': input_size (%" PRId64 ") and hidden_size (%" PRId64
                      ") must be in [1, 16777216]", name, input_size, hidden_size);
        return NULL;
    }
    crl_rnn *r = g_new0(crl_rnn, 1);
    r->refs = 1;
    r->name = g_strdup(name);
    r->kind = kind;
    r->F = input_size;
    r->H = hidden_size;
    r->G = kind == CRL_RNN_LSTM ? 4 : 3;
    int64_t P = r->G * r->H * (r->F + r->H + 2);
    r->params = crl_tensor_new(CRL_F32, 1, &P, err);
    r->grads = r->params ? crl_tensor_new(CRL_F32, 1, &P, err) : NULL;
    if (!r->grads) {
        crl_error_prefix(err, "module '%s': ", name);
        crl_rnn_unref(r);
        return NULL;
    }
    /* PyTorch's reset_parameters: every tensor ~ U(-1/sqrt(H), 1/sqrt(H)), in parameter order. */
    float *p = crl_tensor_data(r->params);
    double k = 1.0 / sqrt((double)r->H);
    for (int64_t i = 0; i < P; i++)
        p[i] = (float)crl_rng_range(rng, -k, k);
    crl_rnn_zero_grad(r);
    return r;
}

crl_rnn *crl_rnn_ref(crl_rnn *r)
{
    if (r)
        r->refs++;
    return r;
}

void crl_rnn_unref(crl_rnn *r)
{
    if (!r || --r->refs > 0)
        return;
    ws_clear(&r->fw);
    ws_clear(&r->iw);
    crl_tensor *bw[] = { r->dxg, r->dhg, r->dh, r->dc, r->dhp, r->gin, r->gh0, r->gc0, r->params, r->grads };
    for (size_t i = 0; i < G_N_ELEMENTS(bw); i++)
        crl_tensor_unref(bw[i]);
    g_free(r->name);
    g_free(r);
}

const char *crl_rnn_name(const crl_rnn *r) { return r->name; }
crl_rnn_kind crl_rnn_kind_get(const crl_rnn *r) { return r->kind; }
int64_t crl_rnn_input_size(const crl_rnn *r) { return r->F; }
int64_t crl_rnn_hidden_size(const crl_rnn *r) { return r->H; }
crl_tensor *crl_rnn_params_get(crl_rnn *r) { return r->params; }
crl_tensor *crl_rnn_grads_get(crl_rnn *r) { return r->grads; }
crl_tensor *crl_rnn_last_h(crl_rnn *r) { return r->have_forward ? r->fw.hT : NULL; }
crl_tensor *crl_rnn_last_c(crl_rnn *r) { return r->have_forward ? r->fw.cT : NULL; }

void crl_rnn_zero_grad(crl_rnn *r)
{
    memset(crl_tensor_data(r->grads), 0, crl_tensor_nbytes(r->grads));
}

/* ---- argument checks and copies ---- */

static int check_f32(const crl_rnn *r, const char *what, const crl_tensor *t, int ndim, const int64_t *want,
                     crl_error *err)
{
    char b[CRL__SHAPE_BUF], c[CRL__SHAPE_BUF];
    if (crl_tensor_dtype(t) != CRL_F32)
        return crl_error_set(err, CRL_E_DTYPE, "module '%s': %s has dtype %s but networks take float32 (cast it)",
                             r->name, what, crl_dtype_name(crl_tensor_dtype(t)));
    if (crl_tensor_ndim(t) != ndim || memcmp(crl_tensor_shape(t), want, (size_t)ndim * sizeof *want))
        return crl_error_set(err, CRL_E_SHAPE, "module '%s': %s has shape %s but the %s expects %s", r->name, what,
                             crl__shape_fmt(b, crl_tensor_ndim(t), crl_tensor_shape(t)),
                             r->kind == CRL_RNN_LSTM ? "LSTM" : "GRU", crl__shape_fmt(c, ndim, want));
    return CRL_OK;
}

/* Any-stride float32 tensor into contiguous floats, and back. */
static void copy_in(float *dst, const crl_tensor *src)
{
    if (crl_tensor_is_contiguous(src)) {
        memcpy(dst, crl_tensor_data(src), crl_tensor_nbytes(src));
        return;
    }
    for (int64_t i = 0, n = crl_tensor_numel(src); i < n; i++)
        dst[i] = (float)crl_tensor_flat_get(src, i);
}

static void copy_out(crl_tensor *dst, const float *src)
{
    if (crl_tensor_is_contiguous(dst)) {
        memcpy(crl_tensor_data(dst), src, crl_tensor_nbytes(dst));
        return;
    }
    for (int64_t i = 0, n = crl_tensor_numel(dst); i < n; i++)
        crl_tensor_flat_set(dst, i, src[i]);
}

static int check_inputs(const crl_rnn *r, const crl_tensor *x, const crl_tensor *h0, const crl_tensor *c0,
                        const crl_tensor *is_init, int64_t *B, int64_t *T, crl_error *err)
{
    char b[CRL__SHAPE_BUF];
    if (!x)
        return crl_error_set(err, CRL_E_INVALID, "module '%s': the input is NULL", r->name);
    const int64_t *s = crl_tensor_shape(x);
    if (crl_tensor_ndim(x) != 3 || s[0] < 1 || s[1] < 1 || s[2] != r->F)
        return crl_error_set(err, CRL_E_SHAPE, "module '%s': the input has shape %s but the %s expects [B, T, %" PRId64
                             "] (batch, time, features)", r->name, crl__shape_fmt(b, crl_tensor_ndim(x), s),
                             r->kind == CRL_RNN_LSTM ? "LSTM" : "GRU", r->F);
    int rc = check_f32(r, "the input", x, 3, s, err);
    if (rc)
        return rc;
    *B = s[0];
    *T = s[1];
    int64_t bh[2] = { *B, r->H };
    if (h0 && (rc = check_f32(r, "h0", h0, 2, bh, err)))
        return rc;
    if (c0 && r->kind != CRL_RNN_LSTM)
        return crl_error_set(err, CRL_E_INVALID, "module '%s': a GRU has no cell state: pass c0 = NULL", r->name);
    if (c0 && (rc = check_f32(r, "c0", c0, 2, bh, err)))
        return rc;
    if (is_init) {
        const int64_t *is = crl_tensor_shape(is_init);
        int nd = crl_tensor_ndim(is_init);
        if (!((nd == 2 || (nd == 3 && is[2] == 1)) && is[0] == *B && is[1] == *T))
            return crl_error_set(err, CRL_E_SHAPE, "module '%s': is_init has shape %s but the input is [%" PRId64
                                 ", %" PRId64 ", ...]: give [B, T] or [B, T, 1]", r->name,
                                 crl__shape_fmt(b, nd, is), *B, *T);
    }
    return CRL_OK;
}

/* ---- forward ---- */

static inline float sigm(float v) { return 1.0f / (1.0f + expf(-v)); }

static void run(crl_rnn *r, rnn_ws *w, const crl_tensor *x, const crl_tensor *h0, const crl_tensor *c0,
                const crl_tensor *is_init)
{
    const int64_t B = w->B, T = w->T, H = r->H, GH = r->G * H;
    const float *P = crl_tensor_data(r->params);
    const float *Wih = P, *Whh = Wih + GH * r->F, *bih = Whh + GH * H, *bhh = bih + GH;
    bool lstm = r->kind == CRL_RNN_LSTM;
    float *xs = crl_tensor_data(w->x), *xg = crl_tensor_data(w->xg), *gates = crl_tensor_data(w->gates);
    float *hs = crl_tensor_data(w->hs), *hp = crl_tensor_data(w->hp), *hg = crl_tensor_data(w->hg);
    float *cs = lstm ? crl_tensor_data(w->cs) : NULL, *cp = lstm ? crl_tensor_data(w->cp) : NULL;
    float *tcs = lstm ? crl_tensor_data(w->tc) : NULL, *hns = lstm ? NULL : crl_tensor_data(w->hn);
    float *reset = crl_tensor_data(w->reset), *y = crl_tensor_data(w->y);
    copy_in(xs, x);
    for (int64_t i = 0; i < B * T; i++)
        reset[i] = is_init && crl_tensor_flat_get(is_init, i) != 0 ? 1.0f : 0.0f;
    if (h0)
        copy_in(hs, h0);
    else
        memset(hs, 0, (size_t)(B * H) * sizeof *hs);
    if (lstm && c0)
        copy_in(cs, c0);
    else if (lstm)
        memset(cs, 0, (size_t)(B * H) * sizeof *cs);
    crl__linear_forward(xs, B * T, Wih, bih, r->F, GH, xg);
    for (int64_t t = 0; t < T; t++) {
        float *hin = hs + t * B * H, *hpt = hp + t * B * H, *ht = hs + (t + 1) * B * H, *gt = gates + t * B * GH;
        for (int64_t b = 0; b < B; b++) {
            bool z = reset[b * T + t] != 0;
            if (z)
                memset(hpt + b * H, 0, (size_t)H * sizeof *hpt);
            else
                memcpy(hpt + b * H, hin + b * H, (size_t)H * sizeof *hpt);
            if (lstm && z)
                memset(cp + (t * B + b) * H, 0, (size_t)H * sizeof *cp);
            else if (lstm)
                memcpy(cp + (t * B + b) * H, cs + (t * B + b) * H, (size_t)H * sizeof *cp);
        }
        crl__linear_forward(hpt, B, Whh, bhh, H, GH, hg);
        for (int64_t b = 0; b < B; b++) {
            const float *xr = xg + (b * T + t) * GH, *hr = hg + b * GH, *hprev = hpt + b * H;
            float *g = gt + b * GH, *h = ht + b * H, *yr = y + (b * T + t) * H;
            if (lstm) {
                const float *cprev = cp + (t * B + b) * H;
                float *c = cs + ((t + 1) * B + b) * H, *tc = tcs + (t * B + b) * H;
                for (int64_t j = 0; j < H; j++) {
                    float i = sigm(xr[j] + hr[j]), f = sigm(xr[H + j] + hr[H + j]);
                    float gg = tanhf(xr[2 * H + j] + hr[2 * H + j]), o = sigm(xr[3 * H + j] + hr[3 * H + j]);
                    g[j] = i;
                    g[H + j] = f;
                    g[2 * H + j] = gg;
                    g[3 * H + j] = o;
                    c[j] = f * cprev[j] + i * gg;
                    tc[j] = tanhf(c[j]);
                    h[j] = o * tc[j];
                }
            } else {
                float *hn = hns + (t * B + b) * H;
                for (int64_t j = 0; j < H; j++) {
                    float rr = sigm(xr[j] + hr[j]), zz = sigm(xr[H + j] + hr[H + j]);
                    hn[j] = hr[2 * H + j];
                    float n = tanhf(xr[2 * H + j] + rr * hn[j]);
                    g[j] = rr;
                    g[H + j] = zz;
                    g[2 * H + j] = n;
                    h[j] = (1.0f - zz) * n + zz * hprev[j];
                }
            }
            memcpy(yr, h, (size_t)H * sizeof *yr);
        }
    }
    memcpy(crl_tensor_data(w->hT), hs + T * B * H, (size_t)(B * H) * sizeof *hs);
    if (lstm)
        memcpy(crl_tensor_data(w->cT), cs + T * B * H, (size_t)(B * H) * sizeof *cs);
}

crl_tensor *crl_rnn_forward(crl_rnn *r, const crl_tensor *x, const crl_tensor *h0, const crl_tensor *c0,
                            const crl_tensor *is_init, crl_error *err)
{
    int64_t B, T;
    r->have_forward = false;
    if (check_inputs(r, x, h0, c0, is_init, &B, &T, err) || ws_size(r, &r->fw, B, T, err))
        return NULL;
    run(r, &r->fw, x, h0, c0, is_init);
    r->have_forward = true;
    return r->fw.y;
}

int crl_rnn_infer(crl_rnn *r, const crl_tensor *x, const crl_tensor *h0, const crl_tensor *c0,
                  const crl_tensor *is_init, crl_tensor *y, crl_tensor *h_out, crl_tensor *c_out, crl_error *err)
{
    int64_t B, T;
    int rc = check_inputs(r, x, h0, c0, is_init, &B, &T, err);
    if (rc)
        return rc;
    int64_t bth[3] = { B, T, r->H }, bh[2] = { B, r->H };
    if ((y && (rc = check_f32(r, "y", y, 3, bth, err))) || (h_out && (rc = check_f32(r, "h_out", h_out, 2, bh, err))))
        return rc;
    if (c_out && r->kind != CRL_RNN_LSTM)
        return crl_error_set(err, CRL_E_INVALID, "module '%s': a GRU has no cell state: pass c_out = NULL", r->name);
    if ((c_out && (rc = check_f32(r, "c_out", c_out, 2, bh, err))) || (rc = ws_size(r, &r->iw, B, T, err)))
        return rc;
    run(r, &r->iw, x, h0, c0, is_init);
    if (y)
        copy_out(y, crl_tensor_data(r->iw.y));
    if (h_out)
        copy_out(h_out, crl_tensor_data(r->iw.hT));
    if (c_out)
        copy_out(c_out, crl_tensor_data(r->iw.cT));
    return CRL_OK;
}

/* ---- backward through time ---- */

int crl_rnn_backward(crl_rnn *r, const crl_tensor *grad_out, const crl_tensor *grad_hT, const crl_tensor *grad_cT,
                     crl_tensor **grad_in, crl_tensor **grad_h0, crl_tensor **grad_c0, crl_error *err)
{
    if (!r->have_forward)
        return crl_error_set(err, CRL_E_INVALID,
                             "module '%s': backward needs a forward first (crl_rnn_forward, not crl_rnn_infer)", r->name);
    rnn_ws *w = &r->fw;
    const int64_t B = w->B, T = w->T, H = r->H, GH = r->G * H, F = r->F;
    bool lstm = r->kind == CRL_RNN_LSTM;
    int64_t bth[3] = { B, T, H }, bh[2] = { B, H };
    int rc;
    if ((grad_out && (rc = check_f32(r, "grad_out", grad_out, 3, bth, err))) ||
        (grad_hT && (rc = check_f32(r, "grad_hT", grad_hT, 2, bh, err))))
        return rc;
    if (grad_cT && !lstm)
        return crl_error_set(err, CRL_E_INVALID, "module '%s': a GRU has no cell state: pass grad_cT = NULL", r->name);
    if ((grad_cT && (rc = check_f32(r, "grad_cT", grad_cT, 2, bh, err))) ||
        (rc = crl__rows_buffer(&r->dxg, B * T, GH, err)) || (rc = crl__rows_buffer(&r->dhg, B, GH, err)) ||
        (rc = crl__rows_buffer(&r->dh, B, H, err)) || (rc = crl__rows_buffer(&r->dc, B, H, err)) ||
        (rc = crl__rows_buffer(&r->dhp, B * T, H, err)) ||
        (grad_in && (rc = buf3(&r->gin, B, T, F, err))) || (grad_h0 && (rc = crl__rows_buffer(&r->gh0, B, H, err))) ||
        (grad_c0 && lstm && (rc = crl__rows_buffer(&r->gc0, B, H, err))))
        return rc;
    const float *P = crl_tensor_data(r->params);
    const float *Wih = P, *Whh = Wih + GH * F;
    float *G = crl_tensor_data(r->grads);
    float *dWih = G, *dWhh = dWih + GH * F, *dbih = dWhh + GH * H, *dbhh = dbih + GH;
    float *dxg = crl_tensor_data(r->dxg), *dhg = crl_tensor_data(r->dhg), *dh = crl_tensor_data(r->dh);
    float *dc = crl_tensor_data(r->dc), *gy = crl_tensor_data(r->dhp);
    const float *gates = crl_tensor_data(w->gates), *hp = crl_tensor_data(w->hp);
    const float *cp = lstm ? crl_tensor_data(w->cp) : NULL, *tcs = lstm ? crl_tensor_data(w->tc) : NULL;
    const float *hns = lstm ? NULL : crl_tensor_data(w->hn), *reset = crl_tensor_data(w->reset);
    if (grad_out)
        copy_in(gy, grad_out);
    else
        memset(gy, 0, (size_t)(B * T * H) * sizeof *gy);
    if (grad_hT)
        copy_in(dh, grad_hT);
    else
        memset(dh, 0, (size_t)(B * H) * sizeof *dh);
    if (lstm && grad_cT)
        copy_in(dc, grad_cT);
    else
        memset(dc, 0, (size_t)(B * H) * sizeof *dc);
    for (int64_t t = T - 1; t >= 0; t--) {
        const float *hpt = hp + t * B * H;
        for (int64_t b = 0; b < B; b++) {
            const float *g = gates + (t * B + b) * GH, *gyr = gy + (b * T + t) * H;
            float *dhr = dh + b * H, *dpx = dxg + (b * T + t) * GH, *dph = dhg + b * GH;
            if (lstm) {
                const float *cprev = cp + (t * B + b) * H, *tc = tcs + (t * B + b) * H;
                float *dcr = dc + b * H;
                for (int64_t j = 0; j < H; j++) {
                    float i = g[j], f = g[H + j], gg = g[2 * H + j], o = g[3 * H + j];
                    float dht = dhr[j] + gyr[j];
                    float dct = dcr[j] + dht * o * (1.0f - tc[j] * tc[j]);
                    dph[j] = dpx[j] = dct * gg * i * (1.0f - i);
                    dph[H + j] = dpx[H + j] = dct * cprev[j] * f * (1.0f - f);
                    dph[2 * H + j] = dpx[2 * H + j] = dct * i * (1.0f - gg * gg);
                    dph[3 * H + j] = dpx[3 * H + j] = dht * tc[j] * o * (1.0f - o);
                    dcr[j] = dct * f;
                }
            } else {
                const float *hn = hns + (t * B + b) * H, *hprev = hpt + b * H;
                for (int64_t j = 0; j < H; j++) {
                    float rr = g[j], zz = g[H + j], n = g[2 * H + j];
                    float dht = dhr[j] + gyr[j];
                    float dn = dht * (1.0f - zz) * (1.0f - n * n);
                    float dr = dn * hn[j] * rr * (1.0f - rr);
                    float dz = dht * (hprev[j] - n) * zz * (1.0f - zz);
                    dph[j] = dpx[j] = dr;
                    dph[H + j] = dpx[H + j] = dz;
                    dpx[2 * H + j] = dn;
                    dph[2 * H + j] = dn * rr;
                    dhr[j] = dht * zz;
                }
            }
        }
        /* dW_hh += dpre^T hprev, db_hh += sums, and the gradient of the state entering step t. */
        crl__linear_backward(hpt, dhg, B, Whh, H, GH, dWhh, dbhh, NULL);
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)B, (int)H, (int)GH, 1.0f, dhg, (int)GH, Whh,
                    (int)H, lstm ? 0.0f : 1.0f, dh, (int)H);
        for (int64_t b = 0; b < B; b++)
            if (reset[b * T + t] != 0) {
                memset(dh + b * H, 0, (size_t)H * sizeof *dh);
                if (lstm)
                    memset(dc + b * H, 0, (size_t)H * sizeof *dc);
            }
    }
    crl__linear_backward(crl_tensor_data(w->x), dxg, B * T, Wih, F, GH, dWih, dbih,
                         grad_in ? crl_tensor_data(r->gin) : NULL);
    if (grad_in)
        *grad_in = r->gin;
    if (grad_h0) {
        memcpy(crl_tensor_data(r->gh0), dh, (size_t)(B * H) * sizeof *dh);
        *grad_h0 = r->gh0;
    }
    if (grad_c0 && lstm) {
        memcpy(crl_tensor_data(r->gc0), dc, (size_t)(B * H) * sizeof *dc);
        *grad_c0 = r->gc0;
    }
    return CRL_OK;
}

/* ---- parameters ---- */

crl_td *crl_rnn_state_dict(crl_rnn *r, crl_error *err)
{
    int64_t GH = r->G * r->H;
    struct { const char *key; int64_t off; int ndim; int64_t shape[2]; } parts[4] = {
        { "weight_ih_l0", 0, 2, { GH, r->F } },
        { "weight_hh_l0", GH * r->F, 2, { GH, r->H } },
        { "bias_ih_l0", GH * (r->F + r->H), 1, { GH, 0 } },
        { "bias_hh_l0", GH * (r->F + r->H + 1), 1, { GH, 0 } },
    };
    crl_td *td = crl_td_new(0, NULL, err);
    for (int i = 0; td && i < 4; i++) {
        int64_t n = parts[i].ndim == 2 ? parts[i].shape[0] * parts[i].shape[1] : GH;
        crl_tensor *flat = crl_tensor_slice(r->params, 0, parts[i].off, parts[i].off + n, 1, err);
        crl_tensor *v = flat ? crl_tensor_view(flat, parts[i].ndim, parts[i].shape, err) : NULL;
        int rc = v ? crl_td_set(td, parts[i].key, v, err) : CRL_E_NOMEM;
        crl_tensor_unref(v);
        crl_tensor_unref(flat);
        if (rc) {
            crl_td_unref(td);
            return NULL;
        }
    }
    return td;
}

crl_rnn *crl_rnn_clone(crl_rnn *r, const char *name, crl_error *err)
{
    crl_rng rng;
    crl_rng_init(&rng, 0, 0);   /* overwritten below */
    crl_rnn *c = crl_rnn_new(name ? name : r->name, r->kind, r->F, r->H, &rng, err);
    if (c)
        memcpy(crl_tensor_data(c->params), crl_tensor_data(r->params), crl_tensor_nbytes(r->params));
    return c;
}

int crl_rnn_save(crl_rnn *r, crl_ckpt_writer *w, const char *prefix, crl_error *err)
{
    crl_error e;
    crl_error_clear(&e);
    crl_td *sd = crl_rnn_state_dict(r, &e);
    return crl__state_dict_save(sd, &e, w, prefix, err);
}

int crl_rnn_load(crl_rnn *r, const crl_ckpt_reader *rd, const char *prefix, crl_error *err)
{
    crl_error e;
    crl_error_clear(&e);
    crl_td *sd = crl_rnn_state_dict(r, &e);
    return crl__state_dict_load(sd, &e, rd, prefix, crl_rnn_kind_name(r->kind), r->name, err);
}

const float *crl__rnn_states(const crl_rnn *r, bool infer, bool cell)
{
    const rnn_ws *w = infer ? &r->iw : &r->fw;
    const crl_tensor *t = cell ? w->cs : w->hs;
    return t ? crl_tensor_data(t) : NULL;
}
