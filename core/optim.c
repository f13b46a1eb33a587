/* Optimizers with PyTorch's update rules (SGD, Adam, AdamW, RMSprop) and global gradient-norm clipping. */
#include "nn-private.h"
#include "checkpoint-private.h"

#include <float.h>
#include <math.h>

typedef struct group {
    crl_tensor *p, *g;
    float *m, *v;      /* Adam moments; SGD/RMSprop momentum in m, RMSprop square average in v */
    size_t n;
} group;

struct crl_optim {
    crl_optim_kind kind;
    double lr, beta1, beta2, eps, weight_decay, momentum, dampening, alpha;
    int64_t steps;
    GArray *groups;
};

static const char *const kind_names[] = { "sgd", "adam", "adamw", "rmsprop" };

/* Which hyper-parameters each kind has (by name), as PyTorch's signatures. */
static const char *const kind_hparams[] = {
    "lr, momentum, dampening, weight_decay",
    "lr, beta1, beta2, eps, weight_decay",
    "lr, beta1, beta2, eps, weight_decay",
    "lr, alpha, eps, momentum, weight_decay",
};

int crl_optim_kind_from_name(const char *name, crl_optim_kind *out, crl_error *err)
{
    int i = crl__name_index(kind_names, G_N_ELEMENTS(kind_names), name);
    if (i >= 0) {
        *out = (crl_optim_kind)i;
        return CRL_OK;
    }
    return crl_error_set(err, CRL_E_INVALID, "unknown optimizer '%s': use sgd, adam, adamw or rmsprop",
                         name ? name : "(null)");
}

crl_optim *crl_optim_new(crl_optim_kind kind, double lr, crl_error *err)
{
    if ((unsigned)kind >= G_N_ELEMENTS(kind_names)) {
        crl_error_set(err, CRL_E_INVALID, "unknown optimizer kind %d: use sgd, adam, adamw or rmsprop", (int)kind);
        return NULL;
    }
    if (!(lr > 0 && isfinite(lr))) {
        crl_error_set(err, CRL_E_INVALID, "optimizer %s: lr = %g must be finite and > 0", kind_names[kind], lr);
        return NULL;
    }
    crl_optim *o = g_new0(crl_optim, 1);
    o->kind = kind;
    o->lr = lr;
    o->beta1 = 0.9;
    o->beta2 = 0.999;
    o->eps = 1e-8;
    o->alpha = 0.99;
    o->weight_decay = kind == CRL_OPTIM_ADAMW ? 0.01 : 0.0;
    o->groups = g_array_new(FALSE, TRUE, sizeof(group));
    return o;
}

void crl_optim_free(crl_optim *o)
{
    if (!o)
        return;
    for (guint i = 0; i < o->groups->len; i++) {
        group *g = &g_array_index(o->groups, group, i);
        crl_tensor_unref(g->p);
        crl_tensor_unref(g->g);
        g_free(g->m);
        g_free(g->v);
    }
    g_array_free(o->groups, TRUE);
    g_free(o);
}

static double *hparam(crl_optim *o, const char *name)
{
    struct { const char *name; double *v; unsigned kinds; } t[] = {
        { "lr", &o->lr, 0xf },
        { "beta1", &o->beta1, 1u << CRL_OPTIM_ADAM | 1u << CRL_OPTIM_ADAMW },
        { "beta2", &o->beta2, 1u << CRL_OPTIM_ADAM | 1u << CRL_OPTIM_ADAMW },
        { "eps", &o->eps, 1u << CRL_OPTIM_ADAM | 1u << CRL_OPTIM_ADAMW | 1u << CRL_OPTIM_RMSPROP },
        { "weight_decay", &o->weight_decay, 0xf },
        { "momentum", &o->momentum, 1u << CRL_OPTIM_SGD | 1u << CRL_OPTIM_RMSPROP },
        { "dampening", &o->dampening, 1u << CRL_OPTIM_SGD },
        { "alpha", &o->alpha, 1u << CRL_OPTIM_RMSPROP },
    };
    for (size_t i = 0; name && i < G_N_ELEMENTS(t); i++)
        if (!strcmp(name, t[i].name))
            return t[i].kinds & (1u << o->kind) ? t[i].v : NULL;
    return NULL;
}

int crl_optim_set(crl_optim *o, const char *name, double value, crl_error *err)
{
    double *p = hparam(o, name);
    if (!p)
        return crl_error_set(err, CRL_E_INVALID, "optimizer %s has no hyper-parameter '%s': it has %s",
                             kind_names[o->kind], name ? name : "(null)", kind_hparams[o->kind]);
    bool ok = isfinite(value);
    if (!strcmp(name, "lr"))
        ok = ok && value > 0;
    else if (!strcmp(name, "beta1") || !strcmp(name, "beta2"))
        ok = ok && value >= 0 && value < 1;
    else if (!strcmp(name, "alpha") || !strcmp(name, "dampening"))
        ok = ok && value >= 0 && value <= 1;
    else if (!strcmp(name, "eps"))
        ok = ok && value > 0;
    else
        ok = ok && value >= 0;
    if (!ok)
        return crl_error_set(err, CRL_E_RANGE, "optimizer %s: %s = %g is out of range (lr, eps > 0; beta in [0, 1); "
                             "alpha, dampening in [0, 1]; momentum, weight_decay >= 0)", kind_names[o->kind], name, value);
    *p = value;
    return CRL_OK;
}

double crl_optim_get(const crl_optim *o, const char *name)
{
    double *p = hparam((crl_optim *)o, name);
    return p ? *p : NAN;
}

int crl_optim_add(crl_optim *o, crl_tensor *params, crl_tensor *grads, crl_error *err)
{
    if (!params || !grads)
        return crl_error_set(err, CRL_E_INVALID, "optimizer %s: NULL parameters or gradients", kind_names[o->kind]);
    if (crl_tensor_dtype(params) != CRL_F32 || crl_tensor_dtype(grads) != CRL_F32 ||
        !crl_tensor_is_contiguous(params) || !crl_tensor_is_contiguous(grads) ||
        crl_tensor_numel(params) != crl_tensor_numel(grads))
        return crl_error_set(err, CRL_E_SHAPE,
                             "optimizer %s: parameters (%s, %" PRId64 ") and gradients (%s, %" PRId64
                             ") must be contiguous float32 of the same size (use crl_mlp_params_get / crl_mlp_grads_get)",
                             kind_names[o->kind], crl_dtype_name(crl_tensor_dtype(params)), crl_tensor_numel(params),
                             crl_dtype_name(crl_tensor_dtype(grads)), crl_tensor_numel(grads));
    /* A vector added twice would be stepped twice per step. */
    for (guint i = 0; i < o->groups->len; i++) {
        const group *h = &g_array_index(o->groups, group, i);
        if (crl_tensor_data(h->p) == crl_tensor_data(params) || crl_tensor_data(h->g) == crl_tensor_data(grads))
            return crl_error_set(err, CRL_E_EXISTS, "optimizer %s: these parameters (or gradients) were already added "
                                 "(vector %u): add each network once", kind_names[o->kind], i);
    }
    group g = { crl_tensor_ref(params), crl_tensor_ref(grads), NULL, NULL, (size_t)crl_tensor_numel(params) };
    g.m = g_new0(float, g.n ? g.n : 1);
    g.v = g_new0(float, g.n ? g.n : 1);
    g_array_append_val(o->groups, g);
    return CRL_OK;
}

int crl_optim_add_rnn(crl_optim *o, crl_rnn *r, crl_error *err)
{
    return crl_optim_add(o, crl_rnn_params_get(r), crl_rnn_grads_get(r), err);
}

int crl_optim_add_mlp(crl_optim *o, crl_mlp *m, crl_error *err)
{
    return crl_optim_add(o, crl_mlp_params_get(m), crl_mlp_grads_get(m), err);
}

void crl_optim_zero_grad(crl_optim *o)
{
    for (guint i = 0; i < o->groups->len; i++) {
        group *g = &g_array_index(o->groups, group, i);
        memset(crl_tensor_data(g->g), 0, g->n * sizeof(float));
    }
}

int64_t crl_optim_steps(const crl_optim *o) { return o->steps; }

static double grad_sq_norm(const crl_optim *o)
{
    double s = 0;
    for (guint i = 0; i < o->groups->len; i++) {
        const group *g = &g_array_index(o->groups, group, i);
        const float *d = crl_tensor_data(g->g);
#pragma omp simd reduction(+ : s)
        for (size_t j = 0; j < g->n; j++)
            s += (double)d[j] * d[j];
    }
    return s;
}

double crl_optim_clip_grad_norm(crl_optim *o, double max_norm)
{
    double norm = sqrt(grad_sq_norm(o));
    if (!isfinite(norm) || !(max_norm >= 0))
        return !isfinite(norm) ? norm : NAN;
    double coef = max_norm / (norm + 1e-6);
    if (coef < 1.0)
        for (guint i = 0; i < o->groups->len; i++) {
            group *g = &g_array_index(o->groups, group, i);
            float *d = crl_tensor_data(g->g), c = (float)coef;
            for (size_t j = 0; j < g->n; j++)
                d[j] *= c;
        }
    return norm;
}

static void step_group(const crl_optim *o, group *gr, int64_t t)
{
    float *p = crl_tensor_data(gr->p), *m = gr->m, *v = gr->v;
    const float *gd = crl_tensor_data(gr->g);
    float lr = (float)o->lr, wd = (float)o->weight_decay, mu = (float)o->momentum, eps = (float)o->eps;
    switch (o->kind) {
    case CRL_OPTIM_SGD:
        for (size_t i = 0; i < gr->n; i++) {
            float g = gd[i] + wd * p[i];
            if (mu != 0.0f) {
                /* The first step starts the buffer at g, undamped (PyTorch). */
                m[i] = t == 1 ? g : mu * m[i] + (1.0f - (float)o->dampening) * g;
                g = m[i];
            }
            p[i] -= lr * g;
        }
        break;
    case CRL_OPTIM_ADAM:
    case CRL_OPTIM_ADAMW: {
        float b1 = (float)o->beta1, b2 = (float)o->beta2;
        double bc1 = 1.0 - pow(o->beta1, (double)t), bc2 = 1.0 - pow(o->beta2, (double)t);
        float step = (float)(o->lr / bc1), bc2s = (float)sqrt(bc2);
        bool decoupled = o->kind == CRL_OPTIM_ADAMW;
        for (size_t i = 0; i < gr->n; i++) {
            float g = gd[i];
            if (decoupled)
                p[i] *= 1.0f - lr * wd;
            else
                g += wd * p[i];
            float mi = b1 * m[i] + (1.0f - b1) * g, vi = b2 * v[i] + (1.0f - b2) * g * g;
            /* Moments that decay into the subnormal range carry nothing the update can use, and each
             * operation on them costs a microcode assist (3x the whole DQN run on AVX-512 Xeons): zero
             * them, as flush-to-zero would, in every build and on every CPU alike. */
            m[i] = fabsf(mi) < FLT_MIN ? 0.0f : mi;
            v[i] = vi < FLT_MIN ? 0.0f : vi;
            /* eps is added after the bias correction of sqrt(v), as PyTorch does. */
            p[i] -= step * m[i] / (sqrtf(v[i]) / bc2s + eps);
        }
        break;
    }
    case CRL_OPTIM_RMSPROP: {
        float a = (float)o->alpha;
        for (size_t i = 0; i < gr->n; i++) {
            float g = gd[i] + wd * p[i];
            float vi = a * v[i] + (1.0f - a) * g * g;
            v[i] = vi < FLT_MIN ? 0.0f : vi;   /* as Adam's moments */
            float avg = sqrtf(v[i]) + eps;
            if (mu > 0.0f) {
                m[i] = mu * m[i] + g / avg;
                p[i] -= lr * m[i];
            } else {
                p[i] -= lr * g / avg;
            }
        }
        break;
    }
    }
}

int crl_optim_step(crl_optim *o, crl_error *err)
{
    if (!isfinite(grad_sq_norm(o)))
        return crl_error_set(err, CRL_E_RUNTIME,
                             "optimizer %s: a gradient is not finite (NaN or inf) at step %" PRId64
                             "; parameters left unchanged (lower the learning rate or clip gradients)",
                             kind_names[o->kind], o->steps + 1);
    o->steps++;
    for (guint i = 0; i < o->groups->len; i++)
        step_group(o, &g_array_index(o->groups, group, i), o->steps);
    return CRL_OK;
}

/* Sections, every number little-endian: "<prefix>/meta", i64 kind, steps, group count, then each group's
 * size; "<prefix>/<i>/m" and "<prefix>/<i>/v", group i's moment buffers as f32 (m: never NaN; v: a
 * running square average, never NaN or negative; SGD's v stays 0). */
static int write_floats(crl_ckpt_writer *w, const char *name, const float *v, size_t n, crl_error *err)
{
    if (crl_ckpt_host_is_le())
        return crl_ckpt_write(w, name, v, n * sizeof *v, err);
    float *le = g_try_new(float, n ? n : 1);
    if (!le)
        return crl_error_set(err, CRL_E_NOMEM, "optimizer checkpoint: no memory for section '%s'", name);
    crl_ckpt_byteswap_copy(le, v, sizeof *v, n);
    int rc = crl_ckpt_write(w, name, le, n * sizeof *v, err);
    g_free(le);
    return rc;
}

int crl_optim_save(const crl_optim *o, crl_ckpt_writer *w, const char *prefix, crl_error *err)
{
    size_t ng = o->groups->len;
    uint8_t *meta = g_new(uint8_t, 8 * (3 + ng));
    crl_ckpt_put_u64(meta, (uint64_t)o->kind);
    crl_ckpt_put_u64(meta + 8, (uint64_t)o->steps);
    crl_ckpt_put_u64(meta + 16, (uint64_t)ng);
    for (size_t i = 0; i < ng; i++)
        crl_ckpt_put_u64(meta + 8 * (3 + i), (uint64_t)g_array_index(o->groups, group, i).n);
    char name[CRL_CKPT_NAME_MAX + 1];
    snprintf(name, sizeof name, "%s/meta", prefix);
    int rc = crl_ckpt_write(w, name, meta, 8 * (3 + ng), err);
    g_free(meta);
    for (size_t i = 0; !rc && i < ng; i++) {
        const group *g = &g_array_index(o->groups, group, i);
        snprintf(name, sizeof name, "%s/%zu/m", prefix, i);
        rc = write_floats(w, name, g->m, g->n, err);
        snprintf(name, sizeof name, "%s/%zu/v", prefix, i);
        if (!rc)
            rc = write_floats(w, name, g->v, g->n, err);
    }
    return rc;
}

static float get_f32(const uint8_t *p)
{
    union { uint32_t u; float f; } x = { crl_ckpt_get_u32(p) };
    return x.f;
}

int crl__optim_check_load(const crl_optim *o, const crl_ckpt_reader *r, const char *prefix, crl_error *err)
{
    char name[CRL_CKPT_NAME_MAX + 1];
    snprintf(name, sizeof name, "%s/meta", prefix);
    size_t len = 0, ng = o->groups->len;
    crl_error e;
    crl_error_clear(&e);
    const uint8_t *meta = crl_ckpt_section(r, name, &len, &e);
    if (!meta)
        return crl_error_pass(err, &e, CRL_E_CORRUPT);
    if (len != (3 + ng) * 8)
        return crl_error_set(err, CRL_E_CORRUPT, "%s: offset %" PRIu64 ": section '%s' has %zu bytes but an "
                             "optimizer over %zu parameter vectors needs %zu", crl_ckpt_path(r),
                             crl__ckpt_section_offset(r, name), name, len, ng, (3 + ng) * 8);
    int64_t head[3];
    for (int k = 0; k < 3; k++)
        head[k] = (int64_t)crl_ckpt_get_u64(meta + 8 * k);
    if (head[0] != o->kind || head[1] < 0 || head[2] != (int64_t)ng)
        return crl_error_set(err, CRL_E_CORRUPT, "%s: offset %" PRIu64 ": '%s' holds %s optimizer state (%" PRId64
                             " vectors) but this is %s over %zu%s", crl_ckpt_path(r),
                             crl__ckpt_section_offset(r, name), name,
                             head[0] >= 0 && head[0] < 4 ? kind_names[head[0]] : "unknown", head[2],
                             kind_names[o->kind], ng, head[1] < 0 ? "; and its step count is negative" : "");
    for (size_t i = 0; i < ng; i++) {
        int64_t n = (int64_t)crl_ckpt_get_u64(meta + 8 * (3 + i));
        if (n != (int64_t)g_array_index(o->groups, group, i).n)
            return crl_error_set(err, CRL_E_CORRUPT, "%s: offset %" PRIu64 ": '%s': vector %zu has %" PRId64
                                 " parameters in the file and %zu here", crl_ckpt_path(r),
                                 crl__ckpt_section_offset(r, name) + 8 * (3 + i), name, i, n,
                                 g_array_index(o->groups, group, i).n);
    }
    for (size_t i = 0; i < ng; i++) {
        size_t n = g_array_index(o->groups, group, i).n;
        for (int k = 0; k < 2; k++) {
            snprintf(name, sizeof name, "%s/%zu/%c", prefix, i, k ? 'v' : 'm');
            size_t l = 0;
            crl_error_clear(&e);
            const uint8_t *p = crl_ckpt_section(r, name, &l, &e);
            if (!p)
                return crl_error_pass(err, &e, CRL_E_CORRUPT);
            if (l != n * sizeof(float))
                return crl_error_set(err, CRL_E_CORRUPT, "%s: offset %" PRIu64 ": section '%s' has %zu bytes, "
                                     "expected %zu", crl_ckpt_path(r), crl__ckpt_section_offset(r, name), name, l,
                                     n * sizeof(float));
            for (size_t j = 0; j < n; j++) {
                float x = get_f32(p + 4 * j);
                if (k ? !(x >= 0) : isnan(x))
                    return crl_error_set(err, CRL_E_CORRUPT, "%s: offset %" PRIu64 ": section '%s': element %zu "
                                         "is %g; %s", crl_ckpt_path(r), crl__ckpt_section_offset(r, name) + 4 * j,
                                         name, j, (double)x,
                                         k ? "a square average is a number >= 0" : "a moment is never NaN");
            }
        }
    }
    return CRL_OK;
}

void crl__optim_apply_load(crl_optim *o, const crl_ckpt_reader *r, const char *prefix)
{
    char name[CRL_CKPT_NAME_MAX + 1];
    snprintf(name, sizeof name, "%s/meta", prefix);
    o->steps = (int64_t)crl_ckpt_get_u64((const uint8_t *)crl_ckpt_section(r, name, NULL, NULL) + 8);
    for (size_t i = 0; i < o->groups->len; i++) {
        group *g = &g_array_index(o->groups, group, i);
        snprintf(name, sizeof name, "%s/%zu/m", prefix, i);
        crl__ckpt_le_copy(g->m, crl_ckpt_section(r, name, NULL, NULL), sizeof(float), g->n);
        snprintf(name, sizeof name, "%s/%zu/v", prefix, i);
        crl__ckpt_le_copy(g->v, crl_ckpt_section(r, name, NULL, NULL), sizeof(float), g->n);
    }
}

int crl_optim_load(crl_optim *o, const crl_ckpt_reader *r, const char *prefix, crl_error *err)
{
    /* Everything checked before the first write: a bad file changes nothing. */
    int rc = crl__optim_check_load(o, r, prefix, err);
    if (!rc)
        crl__optim_apply_load(o, r, prefix);
    return rc;
}
