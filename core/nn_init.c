/* Parameter init schemes, as torch.nn.init draws them (from crl's Philox streams). */
#include "nn-private.h"

#include <math.h>

static const char *const init_names[] = { "default", "orthogonal", "kaiming_uniform", "xavier_uniform" };

int crl__name_index(const char *const *names, size_t n, const char *name)
{
    for (size_t i = 0; name && i < n; i++)
        if (!g_ascii_strcasecmp(name, names[i]))
            return (int)i;
    return -1;
}

int crl_init_from_name(const char *name, crl_init *out, crl_error *err)
{
    int i = crl__name_index(init_names, G_N_ELEMENTS(init_names), name);
    if (i >= 0) {
        *out = (crl_init)i;
        return CRL_OK;
    }
    return crl_error_set(err, CRL_E_INVALID,
                         "unknown init scheme '%s': use default, orthogonal, kaiming_uniform or xavier_uniform",
                         name ? name : "(null)");
}

static void uniform(float *p, size_t n, double bound, crl_rng *rng)
{
    for (size_t i = 0; i < n; i++)
        p[i] = (float)crl_rng_range(rng, -bound, bound);
}

/* torch.nn.init.orthogonal_: the Q of a Gaussian matrix's QR (with R's
 * diagonal made positive), the taller side holding the orthonormal vectors.
 * Modified Gram-Schmidt in double gives exactly that Q. */
static void orthogonal(float *W, int64_t rows, int64_t cols, double gain, crl_rng *rng)
{
    int64_t k = rows < cols ? rows : cols, n = rows < cols ? cols : rows;
    double *v = g_new(double, (size_t)(k * n));
    for (int64_t i = 0; i < k * n; i++)
        v[i] = crl_rng_normal(rng);
    for (int64_t a = 0; a < k; a++) {
        double *va = v + a * n;
        for (int64_t b = 0; b < a; b++) {
            const double *vb = v + b * n;
            double d = 0;
            for (int64_t i = 0; i < n; i++)
                d += va[i] * vb[i];
            for (int64_t i = 0; i < n; i++)
                va[i] -= d * vb[i];
        }
        double norm = 0;
        for (int64_t i = 0; i < n; i++)
            norm += va[i] * va[i];
        norm = sqrt(norm);
        for (int64_t i = 0; i < n; i++)
            va[i] = norm > 0 ? va[i] / norm : 0;
    }
    /* Vector a is row a of W when W is wide, column a when it is tall. */
    for (int64_t r = 0; r < rows; r++)
        for (int64_t c = 0; c < cols; c++)
            W[r * cols + c] = (float)(gain * (rows < cols ? v[r * n + c] : v[c * n + r]));
    g_free(v);
}

void crl__init_layer(crl_init scheme, double gain, int64_t in, int64_t out, float *W, float *b, crl_rng *rng)
{
    size_t nw = (size_t)(in * out);
    switch (scheme) {
    case CRL_INIT_DEFAULT:
        /* kaiming_uniform_(a=sqrt(5)) is U(+-1/sqrt(fan_in)), as the bias. */
        uniform(W, nw, 1.0 / sqrt((double)in), rng);
        uniform(b, (size_t)out, 1.0 / sqrt((double)in), rng);
        return;
    case CRL_INIT_ORTHOGONAL:
        orthogonal(W, out, in, gain, rng);
        break;
    case CRL_INIT_KAIMING_UNIFORM:
        uniform(W, nw, gain * sqrt(3.0 / (double)in), rng);
        break;
    case CRL_INIT_XAVIER_UNIFORM:
        uniform(W, nw, gain * sqrt(6.0 / (double)(in + out)), rng);
        break;
    }
    memset(b, 0, (size_t)out * sizeof *b);
}

int crl_mlp_init(crl_mlp *m, crl_init scheme, double gain, double last_gain, crl_rng *rng, crl_error *err)
{
    if ((unsigned)scheme >= G_N_ELEMENTS(init_names))
        return crl_error_set(err, CRL_E_INVALID, "module '%s': unknown init scheme %d", m->name, (int)scheme);
    if (!rng)
        return crl_error_set(err, CRL_E_INVALID, "module '%s': init needs a random stream", m->name);
    if (!(gain > 0 && isfinite(gain)) || !(last_gain > 0 && isfinite(last_gain)))
        return crl_error_set(err, CRL_E_INVALID, "module '%s': init gains must be finite and > 0 (got %g, %g)",
                             m->name, gain, last_gain);
    float *P = crl_tensor_data(m->params);
    /* a Conv2d is a Linear over its im2col columns: fan_in = in_channels * k * k, as PyTorch counts it */
    for (int i = 0; i < m->n_stages; i++) {
        const crl__stage *s = &m->stages[i];
        if (s->kind == CRL__STAGE_CONV)
            crl__init_layer(scheme, gain, s->cin * s->k * s->k, s->cout, P + s->w_off, P + s->b_off, rng);
    }
    for (int l = 0; l < m->n_layers; l++) {
        const crl__layer *L = &m->layers[l];
        crl__init_layer(scheme, l == m->n_layers - 1 ? last_gain : gain, L->in, L->out, P + L->w_off,
                        P + L->b_off, rng);
    }
    /* as crl_mlp_zero_grad (nn_mlp.c builds on this file, not the other way round) */
    memset(crl_tensor_data(m->grads), 0, crl_tensor_nbytes(m->grads));
    return CRL_OK;
}
