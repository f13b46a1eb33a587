/* Internals shared by spec.c, spec_ops.c and spec_repr.c: the crl_spec layout and element access. */
#ifndef CRL_SPEC_PRIVATE_H
#define CRL_SPEC_PRIVATE_H

#include "crl-private.h"

/* One direct child of a Composite; `key` never contains a dot. */
typedef struct crl__spec_entry {
    char *key;
    crl_spec *spec;
} crl__spec_entry;

struct crl_spec {
    gint refcount;
    crl_spec_kind kind;
    crl_dtype dtype;            /* CRL_DTYPE_COUNT for Composite */
    int ndim;
    int64_t shape[CRL_MAX_DIMS];
    crl_device device;
    int64_t n;                  /* Categorical, OneHot, Binary */
    size_t nvec_len;            /* MultiCategorical, MultiOneHot */
    int64_t *nvec;
    /* Bounded: contiguous f64 tensors of the spec's shape, each value
     * already rounded to the spec's dtype (so rand and project results
     * that are clamped to them stay in the domain after the final cast). */
    crl_tensor *low, *high;
    /* Categorical / OneHot with a mask: contiguous bool, one row of n flags
     * per value (shape + [n] for Categorical, shape for OneHot). */
    crl_tensor *mask;
    GArray *children;           /* Composite: crl__spec_entry, sorted by key */
};

/* "float32", ... (as crl_dtype_name) and "torch.float32", ...; NULL when invalid. */
CRL_INTERNAL const char *crl__spec_dtype_name(crl_dtype dt);
CRL_INTERNAL const char *crl__spec_torch_dtype(crl_dtype dt);
/* Append "[2, 3]" to s. */
CRL_INTERNAL void crl__spec_append_dims(GString *s, int ndim, const int64_t *shape);
/* Append "cpu" or "cuda:N". */
CRL_INTERNAL void crl__spec_append_device(GString *s, crl_device d);
CRL_INTERNAL bool crl__spec_dtype_is_int(crl_dtype dt);   /* bool and integer dtypes */
/* Smallest and largest value of an integer dtype that are exact doubles
 * (for int64 the top is 2^63 - 1024, the largest double below 2^63). */
CRL_INTERNAL void crl__spec_int_range(crl_dtype dt, double *lo, double *hi);

/* Element access over a tensor's flat row-major positions: direct typed
 * loads and stores when contiguous, crl_tensor_flat_get/set otherwise.
 * Never allocates. */
typedef struct crl__elems {
    crl_tensor *t;
    char *data;        /* NULL when the view is not contiguous */
    crl_dtype dt;
    int64_t numel;
} crl__elems;

static inline crl__elems crl__elems_of(const crl_tensor *t)
{
    crl__elems e;
    e.t = (crl_tensor *)t;
    e.dt = crl_tensor_dtype(t);
    e.numel = crl_tensor_numel(t);
    e.data = crl_tensor_is_contiguous(t) ? (char *)crl_tensor_data(t) : NULL;
    return e;
}

static inline double crl__elem_get(const crl__elems *e, int64_t i)
{
    if (!e->data)
        return crl_tensor_flat_get(e->t, i);
    switch (e->dt) {
    case CRL_BOOL: return ((const uint8_t *)e->data)[i] != 0;
    case CRL_U8: return ((const uint8_t *)e->data)[i];
    case CRL_I8: return ((const int8_t *)e->data)[i];
    case CRL_I16: return ((const int16_t *)e->data)[i];
    case CRL_I32: return ((const int32_t *)e->data)[i];
    case CRL_I64: return (double)((const int64_t *)e->data)[i];
    case CRL_F16: return crl_half_to_float(((const uint16_t *)e->data)[i]);
    case CRL_F32: return ((const float *)e->data)[i];
    case CRL_F64: return ((const double *)e->data)[i];
    default: return 0.0;
    }
}

/* v must be representable in the dtype's range (callers clamp first). */
static inline void crl__elem_set(const crl__elems *e, int64_t i, double v)
{
    if (!e->data) {
        crl_tensor_flat_set(e->t, i, v);
        return;
    }
    switch (e->dt) {
    case CRL_BOOL: ((uint8_t *)e->data)[i] = v != 0.0; break;
    case CRL_U8: ((uint8_t *)e->data)[i] = (uint8_t)v; break;
    case CRL_I8: ((int8_t *)e->data)[i] = (int8_t)v; break;
    case CRL_I16: ((int16_t *)e->data)[i] = (int16_t)v; break;
    case CRL_I32: ((int32_t *)e->data)[i] = (int32_t)v; break;
    case CRL_I64: ((int64_t *)e->data)[i] = (int64_t)v; break;
    case CRL_F16: ((uint16_t *)e->data)[i] = crl_float_to_half((float)v); break;
    case CRL_F32: ((float *)e->data)[i] = (float)v; break;
    case CRL_F64: ((double *)e->data)[i] = v; break;
    default: break;
    }
}

/* Exact integer store for integer dtypes (int64 values beyond 2^53). */
static inline void crl__elem_set_i64(const crl__elems *e, int64_t i, int64_t v)
{
    if (e->dt == CRL_I64 && e->data) {
        ((int64_t *)e->data)[i] = v;
        return;
    }
    crl__elem_set(e, i, (double)v);
}

#endif
