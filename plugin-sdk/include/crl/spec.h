/* crl plugin SDK: specs (TorchRL's TensorSpec family).
 *
 * A spec describes the dtype, shape and domain of a tensor (or, for
 * Composite, of a TensorDict).  Specs are immutable once built, except for
 * crl_spec_composite_set while a Composite is being assembled, and are
 * refcounted. */
#ifndef CRL_SPEC_H
#define CRL_SPEC_H

#include <crl/td.h>
#include <crl/rng.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum crl_spec_kind {
    CRL_SPEC_UNBOUNDED = 0,          /* any value of the dtype */
    CRL_SPEC_BOUNDED = 1,            /* low <= x <= high, elementwise bounds */
    CRL_SPEC_CATEGORICAL = 2,        /* integer in [0, n) */
    CRL_SPEC_ONEHOT = 3,             /* last dim n, exactly one set */
    CRL_SPEC_MULTI_CATEGORICAL = 4,  /* last dim k, x[..., i] in [0, nvec[i]) */
    CRL_SPEC_MULTI_ONEHOT = 5,       /* last dim sum(nvec), one set per group */
    CRL_SPEC_BINARY = 6,             /* last dim n, each 0 or 1 */
    CRL_SPEC_COMPOSITE = 7           /* named children, nested */
} crl_spec_kind;

typedef struct crl_spec crl_spec;

/* Constructors.  Each returns a new reference or NULL with err set
 * (CRL_E_INVALID names the bad argument).  `shape` is the full shape of the
 * described tensor, batch dims included, as in TorchRL. */
CRL_API crl_spec *crl_spec_unbounded(crl_dtype dt, int ndim, const int64_t *shape, crl_error *err);
/* Scalar bounds broadcast to the shape; low <= high required.  Bounds are
 * stored rounded to the dtype, as TorchRL stores them in the spec's dtype:
 * integers inward (ceil(low), floor(high)) and clamped to the dtype's range,
 * floats to the nearest value (finite bounds beyond the range clamp to the
 * largest finite value).  An infinite side means "unbounded on that side";
 * NaN, low = +inf, high = -inf and a range holding no value of an integer
 * dtype are CRL_E_INVALID. */
CRL_API crl_spec *crl_spec_bounded(crl_dtype dt, int ndim, const int64_t *shape, double low,
                                   double high, crl_error *err);
/* Elementwise bounds: low and high tensors of the spec's shape (copied). */
CRL_API crl_spec *crl_spec_bounded_t(crl_dtype dt, const crl_tensor *low, const crl_tensor *high,
                                     crl_error *err);
/* Integer category in [0, n); dtype is an integer dtype (TorchRL: int64). */
CRL_API crl_spec *crl_spec_categorical(int64_t n, crl_dtype dt, int ndim, const int64_t *shape,
                                       crl_error *err);
/* One-hot over n classes; shape[ndim-1] must be n. */
CRL_API crl_spec *crl_spec_onehot(int64_t n, crl_dtype dt, int ndim, const int64_t *shape,
                                  crl_error *err);
/* nvec has shape[ndim-1] entries. */
CRL_API crl_spec *crl_spec_multi_categorical(const int64_t *nvec, crl_dtype dt, int ndim,
                                             const int64_t *shape, crl_error *err);
/* shape[ndim-1] must be sum(nvec[0..k-1]). */
CRL_API crl_spec *crl_spec_multi_onehot(const int64_t *nvec, size_t k, crl_dtype dt, int ndim,
                                        const int64_t *shape, crl_error *err);
/* shape[ndim-1] must be n. */
CRL_API crl_spec *crl_spec_binary(int64_t n, crl_dtype dt, int ndim, const int64_t *shape,
                                  crl_error *err);
/* Empty Composite with a batch shape. */
CRL_API crl_spec *crl_spec_composite(int ndim, const int64_t *shape, crl_error *err);

/* A Composite with batch shape [num] holding `leaf` under `key`: the usual
 * one-entry spec of an env backend ("observation", "action", "reward").
 * Consumes the caller's reference to leaf, also on failure; a NULL leaf
 * gives NULL with err left as the leaf's constructor set it, so calls nest:
 *   crl_spec_composite_of(num, "reward", crl_spec_unbounded(...), err). */
CRL_API crl_spec *crl_spec_composite_of(int64_t num, const char *key, crl_spec *leaf, crl_error *err);

CRL_API crl_spec *crl_spec_ref(crl_spec *s);
CRL_API void crl_spec_unref(crl_spec *s);

/* Composite children.  set takes its own reference to child; the child's
 * shape must start with the composite's shape; a dotted key creates nested
 * Composites.  get/at return borrowed pointers (NULL if absent). */
CRL_API int crl_spec_composite_set(crl_spec *comp, const char *key, crl_spec *child, crl_error *err);
CRL_API crl_spec *crl_spec_composite_get(const crl_spec *comp, const char *key);
CRL_API int crl_spec_composite_del(crl_spec *comp, const char *key, crl_error *err);
CRL_API size_t crl_spec_composite_len(const crl_spec *comp);   /* sorted by key */
CRL_API const char *crl_spec_composite_key_at(const crl_spec *comp, size_t i);
CRL_API crl_spec *crl_spec_composite_at(const crl_spec *comp, size_t i);

/* TorchRL's update_mask (since ABI 1.1): restrict a Categorical or OneHot
 * spec to the true entries of `mask`, a bool tensor of shape
 * [spec shape..., n] for Categorical and of the spec's own shape for OneHot
 * (one row of n flags per value).  The mask is copied; NULL removes it.
 * Afterwards rand draws only allowed values, is_in/check reject the others
 * (naming the index) and project moves a value to the nearest allowed one.
 * The spec is changed in place (every holder of a reference sees it).
 * CRL_E_INVALID for another kind or a row with no allowed value,
 * CRL_E_DTYPE / CRL_E_SHAPE for a bad mask; on error nothing changes. */
CRL_API int crl_spec_update_mask(crl_spec *s, const crl_tensor *mask, crl_error *err);
/* The mask (borrowed), or NULL when the spec has none. */
CRL_API const crl_tensor *crl_spec_mask(const crl_spec *s);

/* "Unbounded", "Bounded", "Categorical", "OneHot", "MultiCategorical",
 * "MultiOneHot", "Binary", "Composite"; NULL for an invalid kind. */
CRL_API const char *crl_spec_kind_name(crl_spec_kind kind);

/* Accessors (borrowed). */
CRL_API crl_spec_kind crl_spec_get_kind(const crl_spec *s);
CRL_API crl_dtype crl_spec_dtype(const crl_spec *s);      /* CRL_DTYPE_COUNT for Composite */
CRL_API int crl_spec_ndim(const crl_spec *s);
CRL_API const int64_t *crl_spec_shape(const crl_spec *s);
CRL_API crl_device crl_spec_device(const crl_spec *s);
CRL_API int64_t crl_spec_n(const crl_spec *s);           /* Categorical/OneHot/Binary; else 0 */
CRL_API size_t crl_spec_nvec_len(const crl_spec *s);
CRL_API const int64_t *crl_spec_nvec(const crl_spec *s);
CRL_API const crl_tensor *crl_spec_low(const crl_spec *s);  /* Bounded only, f64 tensors */
CRL_API const crl_tensor *crl_spec_high(const crl_spec *s);

/* True when t has the spec's dtype and shape and every value is in the
 * domain.  For Composite use crl_spec_check_td. */
CRL_API bool crl_spec_is_in(const crl_spec *s, const crl_tensor *t);
/* Check a tensor against a leaf spec; on failure err names `key` (may be
 * NULL) and says what differs (dtype, shape, or the first offending value
 * and its index). */
CRL_API int crl_spec_check(const crl_spec *s, const crl_tensor *t, const char *key, crl_error *err);
/* Check every key of a Composite against td (which may hold extra keys);
 * err names the first missing or offending dotted key. */
CRL_API int crl_spec_check_td(const crl_spec *comp, const crl_td *td, crl_error *err);
/* Bring t into the domain in place: clamp (Bounded; NaN becomes low), round
 * and clamp (Categorical/MultiCategorical; NaN becomes 0), argmax (OneHot
 * groups; first maximum, NaN ignored), threshold at 0.5 (Binary: values
 * above 0.5 become 1, the rest 0).  Shape and dtype must already match. */
CRL_API int crl_spec_project(const crl_spec *s, crl_tensor *t, crl_error *err);

/* Fill an existing tensor of the spec's shape and dtype (no allocation):
 * uniform in [low, high] for Bounded (uniform integers for integer dtypes;
 * a half-infinite side draws low + |N(0,1)| or high - |N(0,1)|, both sides
 * infinite N(0,1)), uniform categories / one-hot positions per group, a fair
 * coin for Binary, standard normal for Unbounded floats, and for Unbounded
 * integers uniform over the full range of bool, uint8 and int8 and over
 * [-100, 100] for int16, int32 and int64. */
CRL_API int crl_spec_rand_into(const crl_spec *s, crl_rng *rng, crl_tensor *t, crl_error *err);
/* New tensor (leaf) drawn as crl_spec_rand_into, or zeros. */
CRL_API crl_tensor *crl_spec_rand(const crl_spec *s, crl_rng *rng, crl_error *err);
CRL_API crl_tensor *crl_spec_zero(const crl_spec *s, crl_error *err);
/* New TensorDict for a Composite: every leaf drawn or zeroed. */
CRL_API crl_td *crl_spec_rand_td(const crl_spec *comp, crl_rng *rng, crl_error *err);
CRL_API crl_td *crl_spec_zero_td(const crl_spec *comp, crl_error *err);

/* New spec with `batch` dims prepended (TorchRL's expand(*batch, *shape)). */
CRL_API crl_spec *crl_spec_expand(const crl_spec *s, int batch_ndim, const int64_t *batch,
                                  crl_error *err);
CRL_API crl_spec *crl_spec_clone(const crl_spec *s, crl_error *err);
CRL_API bool crl_spec_equal(const crl_spec *a, const crl_spec *b);

/* TorchRL's printed layout (BoundedTensorSpec(...), CompositeSpec(...)).
 * Free with crl_free. */
CRL_API char *crl_spec_repr(const crl_spec *s);

#ifdef __cplusplus
}
#endif
#endif
