/* Helpers shared by the state group of the transforms plugin: spec lookups, dtype checks, element access. */
#include "config.h"
#include "state_common.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int st_bad_option(crl_error *err, const crl_opts *o, const char *name, const char *value, const char *why)
{
    return crl_error_set(err, CRL_E_CONFIG, "%s: [%s] %s = %s: %s", crl_opts_origin(o, name), crl_opts_section(o), name,
                         value, why);
}

int st_require(const crl_opts *o, const char *name, const char *who, crl_error *err)
{
    if (crl_opts_is_set(o, name))
        return CRL_OK;
    return crl_error_set(err, CRL_E_CONFIG, "[%s] %s: %s is required; add '%s = ...' under [%s]", crl_opts_section(o),
                         who, name, name, crl_opts_section(o));
}

crl_spec *st_spec_leaf(crl_transform_specs *s, const char *key, const char *who, crl_error *err)
{
    crl_spec *leaf = NULL;
    if (tf_specs_owner(s, key, &leaf) && crl_spec_get_kind(leaf) == CRL_SPEC_COMPOSITE) {
        crl_error_set(err, CRL_E_DTYPE,
                      "%s: key '%s' is a Composite (a nested TensorDict), not a tensor; name one of its leaves "
                      "('%s.<key>') in in_keys",
                      who, key, key);
        return NULL;
    }
    return tf_specs_need(s, key, who, err);
}

int st_need_float(const crl_spec *leaf, const char *key, const char *who, crl_error *err)
{
    crl_dtype dt = crl_spec_dtype(leaf);
    if (crl_dtype_is_float(dt))
        return CRL_OK;
    return crl_error_set(err, CRL_E_DTYPE,
                         "%s: key '%s' is %s but a floating-point tensor is needed; cast it first "
                         "(DoubleToFloat or DTypeCastTransform)",
                         who, key, crl_dtype_name(dt));
}

int st_need_numeric(const crl_spec *leaf, const char *key, const char *who, crl_error *err)
{
    crl_dtype dt = crl_spec_dtype(leaf);
    if (dt != CRL_BOOL)
        return CRL_OK;
    return crl_error_set(err, CRL_E_DTYPE,
                         "%s: key '%s' is bool but a numeric tensor is needed; cast it first (DTypeCastTransform)",
                         who, key);
}

int64_t st_numel_from(int ndim, const int64_t *shape, int from)
{
    int64_t n = 1;
    for (int i = from; i < ndim; i++)
        n *= shape[i];
    return n;
}

static void sort_pair(double *a, double *b)
{
    if (*a > *b) {
        double t = *a;
        *a = *b;
        *b = t;
    }
}

crl_spec *st_spec_map(const crl_spec *leaf, int batch_ndim, crl_dtype out_dt, st_map_fn f, void *user, crl_error *err)
{
    int nd = crl_spec_ndim(leaf);
    const int64_t *shape = crl_spec_shape(leaf);
    if (crl_spec_get_kind(leaf) == CRL_SPEC_BOUNDED && f) {
        const crl_tensor *lo = crl_spec_low(leaf), *hi = crl_spec_high(leaf);
        crl_tensor *nlo = crl_tensor_new(CRL_F64, nd, shape, err);
        crl_tensor *nhi = nlo ? crl_tensor_new(CRL_F64, nd, shape, err) : NULL;
        if (!nhi) {
            crl_tensor_unref(nlo);
            return NULL;
        }
        int64_t n = crl_tensor_numel(nlo), F = st_numel_from(nd, shape, batch_ndim);
        for (int64_t p = 0; p < n; p++) {
            double a = f(crl_tensor_flat_get(lo, p), F ? p % F : 0, user);
            double b = f(crl_tensor_flat_get(hi, p), F ? p % F : 0, user);
            if (isnan(a))
                a = -INFINITY;
            if (isnan(b))
                b = INFINITY;
            sort_pair(&a, &b);
            crl_tensor_flat_set(nlo, p, a);
            crl_tensor_flat_set(nhi, p, b);
        }
        crl_spec *r = crl_spec_bounded_t(out_dt, nlo, nhi, err);
        crl_tensor_unref(nlo);
        crl_tensor_unref(nhi);
        return r;
    }
    if (out_dt != crl_spec_dtype(leaf) || (f && crl_spec_get_kind(leaf) != CRL_SPEC_UNBOUNDED))
        return crl_spec_unbounded(out_dt, nd, shape, err);
    return crl_spec_ref((crl_spec *)leaf);
}

int st_spec_set(crl_transform_specs *s, const char *key, crl_spec *spec, const crl_error *made, crl_error *err)
{
    if (!spec)
        return crl_error_pass(err, made, CRL_E_INVALID);
    return tf_specs_put(s, key, spec, err);
}

int64_t st_rows(const crl_td *td)
{
    return st_numel_from(crl_td_batch_ndim(td), crl_td_batch_shape(td), 0);
}

crl_tensor *st_input(const crl_td *td, const char *key, const char *who, bool need_float, bool tolerant,
                     crl_error *err)
{
    crl_tensor *t = crl_td_get(td, key);
    if (!t) {
        if (tolerant && !crl_td_get_td(td, key))
            return NULL;
        if (crl_td_get_td(td, key)) {
            crl_error_set(err, CRL_E_DTYPE, "%s: key '%s' is a nested TensorDict, not a tensor", who, key);
            return NULL;
        }
        crl_transform_missing_td_key(err, who, key, td);
        return NULL;
    }
    if (need_float && !crl_dtype_is_float(crl_tensor_dtype(t))) {
        crl_error_set(err, CRL_E_DTYPE,
                      "%s: key '%s' is %s but a floating-point tensor is needed; cast it first "
                      "(DoubleToFloat or DTypeCastTransform)",
                      who, key, crl_dtype_name(crl_tensor_dtype(t)));
        return NULL;
    }
    return crl_tensor_contiguous(t, err);
}

void st_load(const void *data, crl_dtype dt, int64_t pos, int64_t n, double *out)
{
    switch (dt) {
    case CRL_F32: {
        const float *p = (const float *)data + pos;
        for (int64_t i = 0; i < n; i++)
            out[i] = p[i];
        return;
    }
    case CRL_F64:
        memcpy(out, (const double *)data + pos, (size_t)n * sizeof(double));
        return;
    case CRL_F16: {
        const uint16_t *p = (const uint16_t *)data + pos;
        for (int64_t i = 0; i < n; i++)
            out[i] = crl_half_to_float(p[i]);
        return;
    }
    case CRL_BOOL:
    case CRL_U8: {
        const uint8_t *p = (const uint8_t *)data + pos;
        for (int64_t i = 0; i < n; i++)
            out[i] = p[i];
        return;
    }
    case CRL_I8: {
        const int8_t *p = (const int8_t *)data + pos;
        for (int64_t i = 0; i < n; i++)
            out[i] = p[i];
        return;
    }
    case CRL_I16: {
        const int16_t *p = (const int16_t *)data + pos;
        for (int64_t i = 0; i < n; i++)
            out[i] = p[i];
        return;
    }
    case CRL_I32: {
        const int32_t *p = (const int32_t *)data + pos;
        for (int64_t i = 0; i < n; i++)
            out[i] = p[i];
        return;
    }
    case CRL_I64: {
        const int64_t *p = (const int64_t *)data + pos;
        for (int64_t i = 0; i < n; i++)
            out[i] = (double)p[i];
        return;
    }
    default:
        for (int64_t i = 0; i < n; i++)
            out[i] = 0;
    }
}

/* Integer stores clamp to the dtype's range; NaN becomes 0. */
static double clamp_int(double v, double lo, double hi)
{
    if (isnan(v))
        return 0;
    return v < lo ? lo : v > hi ? hi : v;
}

void st_store(void *data, crl_dtype dt, int64_t pos, int64_t n, const double *in)
{
    switch (dt) {
    case CRL_F32: {
        float *p = (float *)data + pos;
        for (int64_t i = 0; i < n; i++)
            p[i] = (float)in[i];
        return;
    }
    case CRL_F64:
        memcpy((double *)data + pos, in, (size_t)n * sizeof(double));
        return;
    case CRL_F16: {
        uint16_t *p = (uint16_t *)data + pos;
        for (int64_t i = 0; i < n; i++)
            p[i] = crl_float_to_half((float)in[i]);
        return;
    }
    case CRL_BOOL: {
        uint8_t *p = (uint8_t *)data + pos;
        for (int64_t i = 0; i < n; i++)
            p[i] = in[i] != 0;
        return;
    }
    case CRL_U8: {
        uint8_t *p = (uint8_t *)data + pos;
        for (int64_t i = 0; i < n; i++)
            p[i] = (uint8_t)clamp_int(in[i], 0, 255);
        return;
    }
    case CRL_I8: {
        int8_t *p = (int8_t *)data + pos;
        for (int64_t i = 0; i < n; i++)
            p[i] = (int8_t)clamp_int(in[i], -128, 127);
        return;
    }
    case CRL_I16: {
        int16_t *p = (int16_t *)data + pos;
        for (int64_t i = 0; i < n; i++)
            p[i] = (int16_t)clamp_int(in[i], -32768, 32767);
        return;
    }
    case CRL_I32: {
        int32_t *p = (int32_t *)data + pos;
        for (int64_t i = 0; i < n; i++)
            p[i] = (int32_t)clamp_int(in[i], -2147483648.0, 2147483647.0);
        return;
    }
    case CRL_I64: {
        int64_t *p = (int64_t *)data + pos;
        for (int64_t i = 0; i < n; i++)
            p[i] = (int64_t)clamp_int(in[i], -9223372036854775808.0, 9223372036854774784.0);
        return;
    }
    default:
        return;
    }
}

double *st_scratch_get(st_scratch *s, size_t n, const char *who, crl_error *err)
{
    if (n == 0)
        n = 1;
    if (n > s->cap) {
        double *p = realloc(s->p, n * sizeof *p);
        if (!p) {
            crl_error_set(err, CRL_E_NOMEM, "%s: out of memory for %zu scratch values", who, n);
            return NULL;
        }
        s->p = p;
        s->cap = n;
    }
    return s->p;
}

void st_scratch_free(st_scratch *s)
{
    free(s->p);
    s->p = NULL;
    s->cap = 0;
}

int st_apply_elementwise(void *t, const tf_keys *k, crl_td *td, const char *who, bool need_float, crl_dtype out_dt,
                         bool tolerant, st_scratch *scratch, st_elem_fn fn, crl_error *err)
{
    for (size_t i = 0; i < k->n; i++) {
        crl_error e = { 0 };
        crl_tensor *in = st_input(td, k->in[i], who, need_float, tolerant, &e);
        if (!in) {
            if (e.code == CRL_OK)
                continue;
            return crl_error_pass(err, &e, e.code);
        }
        crl_dtype dt = out_dt == CRL_DTYPE_COUNT ? crl_tensor_dtype(in) : out_dt;
        int64_t n = crl_tensor_numel(in), rows = st_rows(td);
        int64_t F = rows ? n / rows : 0;
        double *v = st_scratch_get(scratch, (size_t)n, who, err);
        if (!v) {
            crl_tensor_unref(in);
            return CRL_E_NOMEM;
        }
        st_load(crl_tensor_data(in), crl_tensor_dtype(in), 0, n, v);
        int nd = crl_tensor_ndim(in);
        int64_t shape[CRL_MAX_DIMS];
        memcpy(shape, crl_tensor_shape(in), (size_t)nd * sizeof(int64_t));
        crl_tensor_unref(in);
        fn(t, v, n, F);
        crl_error le;
        crl_error_clear(&le);
        crl_tensor *out = crl_transform_output(td, k->out[i], dt, nd, shape, &le);
        if (!out)
            return crl_error_pass(err, &le, CRL_E_INVALID);
        st_store(crl_tensor_data(out), dt, 0, n, v);
    }
    return CRL_OK;
}

int st_state_vector(const crl_td *state, const char *key, int64_t n, const char *who, const crl_tensor **out,
                    crl_error *err)
{
    const crl_tensor *x = crl_td_get(state, key);
    *out = NULL;
    if (!x)
        return crl_transform_missing_td_key(err, who, key, state);
    if (crl_tensor_dtype(x) != CRL_F64 || crl_tensor_ndim(x) != 1 || !crl_tensor_is_contiguous(x))
        return crl_error_set(err, CRL_E_DTYPE, "%s: state entry '%s' must be a contiguous float64 vector", who, key);
    if (n >= 0 && crl_tensor_numel(x) != n)
        return crl_error_set(err, CRL_E_SHAPE, "%s: state entry '%s' has %lld elements, this instance needs %lld",
                             who, key, (long long)crl_tensor_numel(x), (long long)n);
    *out = x;
    return CRL_OK;
}

int st_state_put(crl_td *out, const char *key, const double *v, int64_t n, crl_error *err)
{
    crl_tensor *x = crl_tensor_new(CRL_F64, 1, &n, err);
    if (!x)
        return CRL_E_NOMEM;
    if (n)
        memcpy(crl_tensor_data(x), v, (size_t)n * sizeof(double));
    int rc = crl_td_set(out, key, x, err);
    crl_tensor_unref(x);
    return rc;
}
